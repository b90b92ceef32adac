#!/usr/bin/env bash
# Stop 15, last call: the bf16 cluster forward's default (C=2, KEEP=0, 8
# warps) against the cluster by V with KEEP, at 4 or 8 warps.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
{
for s in 4096:151936:8 4096:128256:8 4096:32000:2 16384:151936:8 1024:151936:8; do
  IFS=: read -r bt v c <<<"$s"
  for set in "" "--set CLUSTER_SIZE=$c --set KEEP=1 --set num_warps=4" "--set CLUSTER_SIZE=$c --set KEEP=1 --set num_warps=8"; do
    echo "## $bt x $v forward $set"; timeout 60 ./gpu-bin/tilejit bench fused_ce_tvd --bt $bt --vocab $v --dtype bf16 --forward=cluster $set 2>&1 | grep -E "  forward  |rror"
  done
done
} 2>&1 | tee "$out/fwd.log"
rm -rf "$TILEJIT_CACHE_DIR"
