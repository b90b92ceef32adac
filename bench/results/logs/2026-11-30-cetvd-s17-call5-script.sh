#!/usr/bin/env bash
# Stop 17, call 5: bf16 pass 1 in the scaled form (one fma + exp2 per
# element) against stop 16's binary; PREFETCH_L2 and COPY_AHEAD variants;
# the GPU unit tests.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh .carry/s16-bin.tar.xz > "$out/unpack.log" 2>&1 && mv gpu-bin s16-bin
bash scripts/gpu-unpack.sh >> "$out/unpack.log" 2>&1
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
b() { local bin=$1; shift; echo "## $bin $*"; timeout 40 ./$bin/tilejit bench fused_ce_tvd "$@" 2>&1 | grep -E "  forward  |loss \+ grad|max |PASS|FAIL|rror"; }
S="--bt 4096 --vocab 151936 --dtype bf16"
{
b gpu-bin $S --reduction=mean --check --check-rows 8
b gpu-bin $S --forward=cluster --check --check-rows 8
for i in 1 2; do
  b s16-bin $S --reduction=mean
  b gpu-bin $S --reduction=mean
  b gpu-bin $S --reduction=mean --set PREFETCH_L2=1
  b gpu-bin $S --reduction=mean --set PREFETCH_L2=1 --set COPY_AHEAD=2
done
for i in 1 2; do
  b s16-bin $S --forward=cluster
  b gpu-bin $S --forward=cluster
  b gpu-bin $S --forward=cluster --set PREFETCH_L2=2
done
b gpu-bin $S --reduction=mean --set COPY_AHEAD=2
b gpu-bin $S --reduction=mean --set PREFETCH_L2=2 --set COPY_AHEAD=2
} 2>&1 | tee "$out/ab.log"
timeout 150 ./gpu-bin/tilejit-unit-tests --gtest_filter='*Gpu*:Cluster*-*EveryConfig*' --gtest_brief=1 > "$out/tests.log" 2>&1; echo "tests rc=$?"; tail -4 "$out/tests.log"
rm -rf "$TILEJIT_CACHE_DIR"
