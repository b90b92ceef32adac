#!/usr/bin/env bash
# Stop 19, call 1: the forward's pass 2 in the max form (one exp per pair)
# against stop 18's final binary; GPU unit tests; other shapes.
set -uo pipefail
export OUT=${OUT:-gpu-out}
BASE=.carry/base-bin.tar.xz UNIT=1 REPEAT=3 RUNS="--forward=cluster|--reduction=mean" \
  bash scripts/gpu-cetvd-ab.sh
mv "$OUT/ab.log" "$OUT/ab-main.log"
BASE=.carry/base-bin.tar.xz REPEAT=1 RUNS="--forward=cluster" \
  SHAPES="4096:128256:bf16 4096:32000:bf16 1024:151936:bf16 16384:151936:bf16" \
  bash scripts/gpu-cetvd-ab.sh
mv "$OUT/ab.log" "$OUT/ab-shapes.log"
