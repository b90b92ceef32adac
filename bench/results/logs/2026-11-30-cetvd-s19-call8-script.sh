#!/usr/bin/env bash
# Stop 19, call 8: L2 prefetch distances beyond 2 steps (forward and
# reduced), the final kernels otherwise.
set -uo pipefail
export OUT=${OUT:-gpu-out}
f="--forward=cluster"; r="--reduction=mean"
CHECK=0 REPEAT=2 RUNS="$f|$f --set PREFETCH_L2=3|$f --set PREFETCH_L2=4|$f --set PREFETCH_L2=8|$r|$r --set PREFETCH_L2=2|$r --set PREFETCH_L2=4" \
  bash scripts/gpu-cetvd-ab.sh
