#!/usr/bin/env bash
# Stop 18, call 6: the final commit (review fixes): GPU unit tests, and the
# main shape (bf16) with checks, both APIs, in place too.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
timeout 110 ./gpu-bin/tilejit-unit-tests --gtest_filter='*Gpu*:Cluster*:MinMax*-*EveryConfig*' --gtest_brief=1 > "$out/unit.log" 2>&1
echo "tests rc=$?"; tail -3 "$out/unit.log"; grep -E "FAILED|Failure" -A3 "$out/unit.log" | head -30
S="--bt 4096 --vocab 151936 --dtype bf16"
b() { echo "## $*"; timeout 40 ./gpu-bin/tilejit bench fused_ce_tvd $S "$@" 2>&1 | grep -E "copy ceiling|  forward  |loss \+ grad|PASS|FAIL|rror"; }
{
b --reduction=mean --check --check-rows 8
b --reduction=mean --in-place --check --check-rows 8
b --forward=cluster --check --check-rows 8
} 2>&1 | tee "$out/ab.log"
rm -rf "$TILEJIT_CACHE_DIR"
