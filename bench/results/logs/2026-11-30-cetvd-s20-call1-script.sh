#!/usr/bin/env bash
# Stop 20, call 1: cross-row L2 prefetch (NEXT_ROW) and the step-vs-bytes scaling.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv > "$out/gpu.txt" 2>&1
CHECK=1 REPEAT=1 RUNS="--forward=cluster --set NEXT_ROW=96" bash scripts/gpu-cetvd-ab.sh
cp "$out/ab.log" "$out/ab-check.log"
R="--forward=cluster"
for n in 64 80 96 112 128 160; do R="$R|--forward=cluster --set NEXT_ROW=$n"; done
R="$R|--forward=cluster --set NEXT_ROW=96 --set NEXT_ROW_STEPS=2|--forward=cluster --set NEXT_ROW=128 --set NEXT_ROW_STEPS=2"
R="$R|--reduction=mean|--reduction=mean --set NEXT_ROW=96|--reduction=mean --set NEXT_ROW=128"
CHECK=0 REPEAT=2 RUNS="$R" bash scripts/gpu-cetvd-ab.sh
cp "$out/ab.log" "$out/ab-nextrow.log"
CHECK=0 REPEAT=2 SHAPES="4096:147456:bf16 4096:151936:bf16 4096:163840:bf16" RUNS="--forward=cluster" bash scripts/gpu-cetvd-ab.sh
cp "$out/ab.log" "$out/ab-scaling.log"
