#!/usr/bin/env bash
# Stop 21, call 6: FAST_LOG2 on by default for every dtype: the new default
# against --set FAST_LOG2=0 for fp32 and f16 at more shapes (same binary).
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu.txt" 2>&1
date -u >> "$out/gpu.txt"
CHECK=1 REPEAT=1 SHAPES="4096:32000:fp32 1024:151936:fp32 4096:128256:fp32 4096:32000:fp16" \
  RUNS="--forward=cluster|--forward=cluster --set FAST_LOG2=0|--reduction=mean|--reduction=mean --set FAST_LOG2=0" \
  bash scripts/gpu-cetvd-ab.sh
