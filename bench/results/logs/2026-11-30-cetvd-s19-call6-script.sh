#!/usr/bin/env bash
# Stop 19, call 6: L2 prefetches issued by each warp in turn (not always
# warp 0), against call 1's binary (s19a).
set -uo pipefail
export OUT=${OUT:-gpu-out}
BASE=.carry/s19a-bin.tar.xz REPEAT=3 RUNS="--forward=cluster|--reduction=mean" \
  bash scripts/gpu-cetvd-ab.sh
