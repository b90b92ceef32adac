#!/usr/bin/env bash
# Stop 14, call 5: leaner pass 2 (log2 form, p sign by two selects, ties by
# p - |p sign|) and an experimental min_programs_per_sm; checked sweep of the
# reduced kernel and the forward; every *Gpu* test.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
tj="timeout 60 ./gpu-bin/tilejit"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } > "$out/env.log" 2>&1
{
S="--bt 4096 --vocab 151936 --dtype bf16"
for set in "" "--set min_programs_per_sm=5" "--set KEEP=0" "--set num_warps=4 --set BLOCK_SIZE=1024" "--set min_programs_per_sm=5 --set num_warps=4 --set BLOCK_SIZE=1024" ""; do
  echo "## reduced $set"
  $tj bench fused_ce_tvd $S --reduction=mean $set 2>&1 | grep -E "loss \+ grad|rror"
done
for shape in "4096 151936 bf16" "4096 128256 bf16" "4096 32000 bf16" "16384 151936 bf16" "1024 151936 bf16" "4096 151936 fp32" "4096 32000 fp32" "16384 32000 bf16"; do
  read -r bt v dt <<<"$shape"
  echo "## checked $dt ${bt}x$v"
  $tj bench fused_ce_tvd --bt $bt --vocab $v --dtype $dt --reduction=mean --in-place --check 2>&1 | grep -E "loss \+ grad|PASS|FAIL|rror"
  $tj bench fused_ce_tvd --bt $bt --vocab $v --dtype $dt --check 2>&1 | grep -E "^  forward |^  backward |PASS|FAIL|rror"
done
} 2>&1 | tee "$out/lean.log"
timeout 150 ./gpu-bin/tilejit-unit-tests --gtest_filter='*Gpu*' --gtest_brief=1 > "$out/unit.log" 2>&1
tail -3 "$out/unit.log"; grep -E "FAILED|Failure" -A3 "$out/unit.log" | head -30
rm -rf "$TILEJIT_CACHE_DIR"
