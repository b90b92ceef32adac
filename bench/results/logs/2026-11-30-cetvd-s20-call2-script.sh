#!/usr/bin/env bash
# Stop 20, call 2: forTiles' tail as one unmasked whole tile + one masked tile
# (new) against d1e69da's kernels (base-s20), NEXT_ROW beside it.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv > "$out/gpu.txt" 2>&1
export BASE=.carry/base-s20.tar.xz
CHECK=1 REPEAT=3 RUNS="--forward=cluster|--reduction=mean|--reduction=mean --in-place" bash scripts/gpu-cetvd-ab.sh
cp "$out/ab.log" "$out/ab-main.log"
CHECK=0 REPEAT=2 RUNS="--forward=cluster --set NEXT_ROW=80|--forward=cluster --set NEXT_ROW=96" bash scripts/gpu-cetvd-ab.sh
cp "$out/ab.log" "$out/ab-nextrow.log"
CHECK=1 REPEAT=2 SHAPES="4096:128256:bf16 4096:32000:bf16 1024:151936:bf16 4096:147456:bf16 4096:151936:fp32" RUNS="--forward=cluster|--reduction=mean" bash scripts/gpu-cetvd-ab.sh
cp "$out/ab.log" "$out/ab-shapes.log"
for i in 1 2; do for b in base-bin gpu-bin; do
  echo "## $b lce"; timeout 120 ./$b/tilejit bench fused_linear_ce --bt 8192 --hidden 4096 --vocab 128256 --dtype bf16 2>&1 | tail -6
done; done > "$out/lce.log" 2>&1
