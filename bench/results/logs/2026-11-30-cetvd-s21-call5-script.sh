#!/usr/bin/env bash
# Stop 21, call 5: the final kernels (2c1e7f3) against stop 20's
# (base-tail) with the peers in the same call; FAST_LOG2=1 for fp32 and f16
# now that its fast walk keeps no per-pair tie check.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt" 2>&1
date -u >> "$out/gpu.txt"
CHECK=0 REPEAT=3 BASE=.carry/base-tail.tar.xz \
  RUNS="--forward=cluster|--reduction=mean" bash scripts/gpu-cetvd-ab.sh
cp "$out/ab.log" "$out/ab-main.log"
CHECK=1 REPEAT=1 SHAPES="4096:151936:fp32 4096:151936:fp16" \
  RUNS="--forward=cluster|--forward=cluster --set FAST_LOG2=1|--reduction=mean|--reduction=mean --set FAST_LOG2=1" \
  bash scripts/gpu-cetvd-ab.sh
cp "$out/ab.log" "$out/ab-fastlog2.log"
PYTHONUNBUFFERED=1 PYTHONPATH=.carry/liger timeout 200 \
  python3 bench/cetvd_peers.py --harness .carry/peers.py --providers torch_compile,liger \
  4096:151936:bf16 2>"$out/peers.err" | tee "$out/peers.jsonl"
