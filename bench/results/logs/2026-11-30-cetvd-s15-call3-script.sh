#!/usr/bin/env bash
# Stop 15, call 3: PREFETCH (each pass loads its next step before this
# step's math) in the reduced kernel and the cluster forward, main shape.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > "$out/env.log" 2>&1
S="--bt 4096 --vocab 151936 --dtype bf16"
tj="timeout 60 ./gpu-bin/tilejit"
{
for rep in 1 2; do
for set in "" "--set PREFETCH=1 --set UNROLL=1" "--set PREFETCH=1" "--set PREFETCH=1 --set UNROLL=1 --set num_warps=4" "--set PREFETCH=1 --set UNROLL=1 --set BLOCK_SIZE=1024"; do
  echo "## reduced $set"; $tj bench fused_ce_tvd $S --reduction=mean $set 2>&1 | grep -E "loss \+ grad|rror"
done
done
for set in "" "--set PREFETCH=1 --set UNROLL=1" "--set PREFETCH=1"; do
  echo "## forward $set"; $tj bench fused_ce_tvd $S --forward=cluster $set 2>&1 | grep -E "  forward  |rror"
done
for set in "--set PREFETCH=1 --set UNROLL=1" "--set PREFETCH=1"; do
  echo "## checked reduced in place $set"; $tj bench fused_ce_tvd $S --reduction=mean --in-place --check $set 2>&1 | grep -E "loss \+ grad|PASS|FAIL|rror"
  echo "## checked forward $set"; $tj bench fused_ce_tvd $S --forward=cluster --check $set 2>&1 | grep -E "  forward  |PASS|FAIL|rror"
done
echo "## checked reduced V=32003 prefetch"; $tj bench fused_ce_tvd --bt 1024 --vocab 32003 --dtype bf16 --reduction=mean --check --set PREFETCH=1 --set UNROLL=1 2>&1 | grep -E "loss \+ grad|PASS|FAIL|rror"
} 2>&1 | tee "$out/bench.log"
rm -rf "$TILEJIT_CACHE_DIR"
