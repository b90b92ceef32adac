#!/usr/bin/env bash
# Stop 19, call 2: forward configs with the max-form pass 2 (main shape).
set -uo pipefail
export OUT=${OUT:-gpu-out}
f="--forward=cluster"
CHECK=0 REPEAT=2 RUNS="$f|$f --set KEEP=0|$f --set COPY_AHEAD=1|$f --set COPY_AHEAD=2|$f --set PREFETCH_L2=1|$f --set BLOCK_SIZE=1024|$f --set KEEP=0 --set num_warps=4|$f --set UNROLL=1|$f --set REGISTER_BUDGET=64|$f" \
  bash scripts/gpu-cetvd-ab.sh
