#!/usr/bin/env bash
# Stop 15, last call: does another config of the reduced kernel win now
# (bf16 and fp32, main shape)?
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
{
for dt in bf16 fp32; do
  for set in "" "--set UNROLL=1" "--set BLOCK_SIZE=1024 --set UNROLL=4" "--set num_warps=4" "--set KEEP=0"; do
    echo "## $dt reduced $set"; timeout 40 ./gpu-bin/tilejit bench fused_ce_tvd --bt 4096 --vocab 151936 --dtype $dt --reduction=mean $set 2>&1 | grep -E "loss \+ grad|rror"
  done
done
} 2>&1 | tee "$out/configs.log"
rm -rf "$TILEJIT_CACHE_DIR"
