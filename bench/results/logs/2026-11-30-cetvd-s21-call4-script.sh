#!/usr/bin/env bash
# Stop 21, call 4: ties looked for per row (the fast pass 2 walk without its
# per-pair min) against stop 20's kernels (base-tail = 4e07302), both
# kernels; the GPU tests of the cluster kernels first.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv > "$out/gpu.txt" 2>&1
export BASE=.carry/base-tail.tar.xz
UNIT=1 CHECK=1 REPEAT=3 RUNS="--forward=cluster|--reduction=mean|--reduction=mean --in-place" bash scripts/gpu-cetvd-ab.sh
cp "$out/ab.log" "$out/ab-main.log"
CHECK=1 REPEAT=1 SHAPES="4096:128256:bf16 4096:32000:bf16 1024:151936:bf16 4096:151936:fp32" RUNS="--forward=cluster|--reduction=mean" bash scripts/gpu-cetvd-ab.sh
cp "$out/ab.log" "$out/ab-shapes.log"
