#!/usr/bin/env bash
# Stop 16, call 5: configs around the new defaults (maxnreg 48; COPY_AHEAD 1
# in the reduced kernel): 1024-element tiles (slices of 19456, not 20480, at
# V = 151936), clusters of 16; then the likeliest at the other bf16 shapes.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
b() { echo "## $*"; timeout 40 ./gpu-bin/tilejit bench fused_ce_tvd "$@" 2>&1 | grep -E "  forward  |loss \+ grad|PASS|FAIL|rror"; }
{
S="--bt 4096 --vocab 151936 --dtype bf16"
R="$S --reduction=mean"; F="$S --forward=cluster"
b $R
for c in "--set BLOCK_SIZE=1024 --set UNROLL=4 --set COPY_AHEAD=1" "--set BLOCK_SIZE=1024 --set UNROLL=4 --set COPY_AHEAD=2" \
         "--set BLOCK_SIZE=1024 --set UNROLL=2 --set COPY_AHEAD=1" "--set BLOCK_SIZE=1024 --set UNROLL=2 --set COPY_AHEAD=2" \
         "--set CLUSTER_SIZE=16 --set COPY_AHEAD=1" "--set CLUSTER_SIZE=16 --set COPY_AHEAD=2"; do
  b $R $c --check --check-rows 8
done
b $R
b $F
for c in "--set BLOCK_SIZE=1024 --set UNROLL=4" "--set BLOCK_SIZE=1024 --set UNROLL=2" "--set CLUSTER_SIZE=16" \
         "--set BLOCK_SIZE=1024 --set UNROLL=4 --set COPY_AHEAD=1"; do
  b $F $c --check --check-rows 8
done
b $F
for s in 4096:128256 16384:151936 1024:151936 4096:32000; do
  IFS=: read -r bt v <<<"$s"; S="--bt $bt --vocab $v --dtype bf16"
  b $S --reduction=mean
  b $S --reduction=mean --set BLOCK_SIZE=1024 --set UNROLL=4 --set COPY_AHEAD=1
  b $S --forward=cluster
  b $S --forward=cluster --set BLOCK_SIZE=1024 --set UNROLL=4
done
} 2>&1 | tee "$out/ab.log"
rm -rf "$TILEJIT_CACHE_DIR"
