#!/usr/bin/env bash
# Stop 20, call 3: warp 0 alone polls the cluster combines' mbarrier (new)
# against the tail change alone (base-tail); d1e69da (base-s20) against new;
# the GPU unit tests; the peers at the main shape in the same call.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt" 2>&1
date -u >> "$out/gpu.txt"
UNIT=1 CHECK=1 REPEAT=3 BASE=.carry/base-tail.tar.xz \
  RUNS="--forward=cluster|--reduction=mean|--reduction=mean --in-place" bash scripts/gpu-cetvd-ab.sh
cp "$out/ab.log" "$out/ab-wait.log"
CHECK=0 REPEAT=1 BASE=.carry/base-tail.tar.xz SHAPES="4096:128256:bf16 4096:32000:bf16" \
  RUNS="--forward=cluster|--reduction=mean" bash scripts/gpu-cetvd-ab.sh
cp "$out/ab.log" "$out/ab-wait-shapes.log"
CHECK=0 REPEAT=2 BASE=.carry/base-s20.tar.xz RUNS="--forward=cluster" bash scripts/gpu-cetvd-ab.sh
cp "$out/ab.log" "$out/ab-d1e69da.log"
PYTHONUNBUFFERED=1 PYTHONPATH=.carry/liger timeout 200 \
  python3 bench/cetvd_peers.py --harness .carry/peers.py --providers torch_compile,liger \
  4096:151936:bf16 2>"$out/peers.err" | tee "$out/peers.jsonl"
