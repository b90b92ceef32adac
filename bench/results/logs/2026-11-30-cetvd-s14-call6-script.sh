#!/usr/bin/env bash
# Stop 14, call 6: the leaner pass 2 with registers capped for 4 programs per
# SM (min_programs_per_sm, now the default) against no cap; checks.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
tj="timeout 60 ./gpu-bin/tilejit"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } > "$out/env.log" 2>&1
{
S="--bt 4096 --vocab 151936 --dtype bf16 --reduction=mean"
for set in "" "--set min_programs_per_sm=0" ""; do
  echo "## reduced $set"
  $tj bench fused_ce_tvd $S $set 2>&1 | grep -E "loss \+ grad|rror"
done
echo "## checked in place"
$tj bench fused_ce_tvd $S --in-place --check 2>&1 | grep -E "loss \+ grad|PASS|FAIL|rror"
echo "## checked 16384x151936"
$tj bench fused_ce_tvd --bt 16384 --vocab 151936 --dtype bf16 --reduction=mean --check 2>&1 | grep -E "loss \+ grad|PASS|FAIL|rror"
} 2>&1 | tee "$out/cap.log"
timeout 60 ./gpu-bin/tilejit-unit-tests --gtest_filter='*ReducedGpu*' --gtest_brief=1 > "$out/unit.log" 2>&1
tail -3 "$out/unit.log"; grep -E "FAILED|Failure" -A3 "$out/unit.log" | head -30
rm -rf "$TILEJIT_CACHE_DIR"
