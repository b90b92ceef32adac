#!/usr/bin/env bash
# Stop 16, call 2: COPY_AHEAD (pass 1 copies the student into the KEEP array
# with cp.async, A steps ahead) x UNROLL, reduced and forward; 5 programs per
# SM (48 registers, TJ_MPS=5); the cluster GPU tests (fixed device lifetime).
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
timeout 60 ./gpu-bin/tilejit-unit-tests --gtest_filter='ClusterGpu*' --gtest_brief=1 > "$out/tests.log" 2>&1; echo "tests rc=$?"; tail -3 "$out/tests.log"
b() { echo "## $*"; timeout 40 ./gpu-bin/tilejit bench fused_ce_tvd "$@" 2>&1 | grep -E "  forward  |loss \+ grad|PASS|FAIL|rror"; }
{
S="--bt 4096 --vocab 151936 --dtype bf16"
for mode in "--reduction=mean" "--forward=cluster"; do
  b $S $mode --check --check-rows 8
  for u in 2 1; do for a in 1 2 3; do
    b $S $mode --set UNROLL=$u --set COPY_AHEAD=$a --check --check-rows 8
  done; done
  b $S $mode --set UNROLL=1
  b $S $mode
done
TJ_MPS=5 b $S --reduction=mean
TJ_MPS=5 b $S --reduction=mean --set COPY_AHEAD=2
TJ_MPS=5 b $S --reduction=mean --set COPY_AHEAD=2 --set UNROLL=1
S="--bt 4096 --vocab 151936 --dtype fp32"
b $S --reduction=mean
b $S --reduction=mean --set COPY_AHEAD=1
b $S --reduction=mean --set COPY_AHEAD=2
} 2>&1 | tee "$out/ab.log"
rm -rf "$TILEJIT_CACHE_DIR"
