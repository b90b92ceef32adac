#!/usr/bin/env bash
# Stop 17, call 8: the final commit (fallback condition per input) against
# call 6's binary (s17a) at the main shape, with checks; GPU unit tests.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh .carry/s17a-bin.tar.xz > "$out/unpack.log" 2>&1 && mv gpu-bin s17a-bin
bash scripts/gpu-unpack.sh >> "$out/unpack.log" 2>&1
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
b() { local bin=$1; shift; echo "## $bin $*"; timeout 30 ./$bin/tilejit bench fused_ce_tvd "$@" 2>&1 | grep -E "copy ceiling|  forward  |loss \+ grad|PASS|FAIL|rror"; }
S="--bt 4096 --vocab 151936 --dtype bf16"
{
b gpu-bin $S --reduction=mean --check --check-rows 8
b s17a-bin $S --reduction=mean
b gpu-bin $S --forward=cluster --check --check-rows 8
b s17a-bin $S --forward=cluster
} 2>&1 | tee "$out/ab.log"
timeout 110 ./gpu-bin/tilejit-unit-tests --gtest_filter='*Gpu*:Cluster*:MinMax*-*EveryConfig*' --gtest_brief=1 > "$out/unit.log" 2>&1; echo "tests rc=$?"; tail -3 "$out/unit.log"; grep -E "FAILED|Failure" -A3 "$out/unit.log" | head -20
rm -rf "$TILEJIT_CACHE_DIR"
