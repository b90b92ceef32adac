#!/usr/bin/env bash
# Stop 18, call 5: config variants of both cluster kernels at the main shape
# (bf16), with pass 2's fast form; the defaults twice.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
b() { echo "## $*"; timeout 40 ./gpu-bin/tilejit bench fused_ce_tvd $S "$@" 2>&1 | grep -E "  forward  |loss \+ grad|rror"; }
S="--bt 4096 --vocab 151936 --dtype bf16"
{
b --forward=cluster
for v in "BLOCK_SIZE=1024" "PREFETCH_L2=1" "num_warps=4" "CLUSTER_SIZE=4" "UNROLL=1" "REGISTER_BUDGET=64" "COPY_AHEAD=1"; do
  b --forward=cluster --set $v
done
b --forward=cluster
b --reduction=mean
for v in "BLOCK_SIZE=1024" "PREFETCH_L2=2" "num_warps=4" "COPY_AHEAD=2"; do
  b --reduction=mean --set $v
done
b --reduction=mean
} 2>&1 | tee "$out/variants.log"
rm -rf "$TILEJIT_CACHE_DIR"
