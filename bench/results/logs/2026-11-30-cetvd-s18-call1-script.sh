#!/usr/bin/env bash
# Stop 18, call 1: pass 2 in one fma per log-probability and a sign copy
# (new) against stop 17's final binary (s17) at the main shape, with
# checks; other shapes checked; GPU unit tests.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh .carry/s17-bin.tar.xz > "$out/unpack.log" 2>&1 && mv gpu-bin s17-bin
bash scripts/gpu-unpack.sh >> "$out/unpack.log" 2>&1
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
b() { local bin=$1; shift; echo "## $bin $*"; timeout 40 ./$bin/tilejit bench fused_ce_tvd "$@" 2>&1 | grep -E "copy ceiling|  forward  |loss \+ grad|PASS|FAIL|rror"; }
S="--bt 4096 --vocab 151936 --dtype bf16"
{
b gpu-bin $S --reduction=mean --check --check-rows 8
b gpu-bin $S --forward=cluster --check --check-rows 8
for i in 1 2; do
  b s17-bin $S --reduction=mean
  b gpu-bin $S --reduction=mean
  b s17-bin $S --forward=cluster
  b gpu-bin $S --forward=cluster
done
b s17-bin $S --reduction=mean --in-place
b gpu-bin $S --reduction=mean --in-place --check --check-rows 8
for s in "--bt 4096 --vocab 32000 --dtype bf16" "--bt 4096 --vocab 151936 --dtype fp32"; do
  b s17-bin $s --reduction=mean
  b gpu-bin $s --reduction=mean --check --check-rows 8
  b s17-bin $s --forward=cluster
  b gpu-bin $s --forward=cluster --check --check-rows 8
done
} 2>&1 | tee "$out/ab.log"
timeout 150 ./gpu-bin/tilejit-unit-tests --gtest_filter='*Gpu*:Cluster*:MinMax*-*EveryConfig*' --gtest_brief=1 > "$out/unit.log" 2>&1; echo "tests rc=$?"; tail -3 "$out/unit.log"; grep -E "FAILED|Failure" -A3 "$out/unit.log" | head -20
rm -rf "$TILEJIT_CACHE_DIR"
