#!/usr/bin/env bash
# Stop 18, call 4: GPU unit tests at the final commit; stop 17's binary
# beside it at the main shape (bf16).
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh .carry/s17-bin.tar.xz > "$out/unpack.log" 2>&1 && mv gpu-bin s17-bin
bash scripts/gpu-unpack.sh >> "$out/unpack.log" 2>&1
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
timeout 120 ./gpu-bin/tilejit-unit-tests --gtest_filter='*Gpu*:Cluster*:MinMax*-*EveryConfig*' --gtest_brief=1 > "$out/unit.log" 2>&1
echo "tests rc=$?"; tail -3 "$out/unit.log"; grep -E "FAILED|Failure" -A3 "$out/unit.log" | head -30
S="--bt 4096 --vocab 151936 --dtype bf16"
{
for b in s17-bin gpu-bin; do
  echo "## $b reduced"; timeout 40 ./$b/tilejit bench fused_ce_tvd $S --reduction=mean 2>&1 | grep -E "copy ceiling|loss \+ grad|rror"
  echo "## $b forward"; timeout 40 ./$b/tilejit bench fused_ce_tvd $S --forward=cluster 2>&1 | grep -E "  forward  |rror"
done
} 2>&1 | tee "$out/ab.log"
rm -rf "$TILEJIT_CACHE_DIR"
