#!/usr/bin/env bash
# Stop 20, call 4: UNROLL=3 (3 tiles per step; the tail change makes a step
# count that does not divide the slice cheap) against the default 2, one
# binary (the tail change + UNROLL candidates 3 and 4).
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > "$out/gpu.txt" 2>&1
CHECK=1 REPEAT=3 RUNS="--forward=cluster --set UNROLL=3|--forward=cluster" bash scripts/gpu-cetvd-ab.sh
cp "$out/ab.log" "$out/ab-main.log"
CHECK=0 REPEAT=1 SHAPES="4096:128256:bf16 4096:32000:bf16 1024:151936:bf16" \
  RUNS="--forward=cluster --set UNROLL=3|--forward=cluster" bash scripts/gpu-cetvd-ab.sh
cp "$out/ab.log" "$out/ab-shapes.log"
CHECK=1 REPEAT=1 SHAPES="16384:151936:bf16" RUNS="--forward=cluster --set UNROLL=3|--forward=cluster" bash scripts/gpu-cetvd-ab.sh
cp "$out/ab.log" "$out/ab-16384.log"
CHECK=0 REPEAT=1 RUNS="--reduction=mean --set UNROLL=3|--reduction=mean" bash scripts/gpu-cetvd-ab.sh
cp "$out/ab.log" "$out/ab-reduced.log"
