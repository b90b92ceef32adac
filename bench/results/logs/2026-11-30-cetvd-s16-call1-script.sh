#!/usr/bin/env bash
# Stop 16, call 1: GPU tests of stop 15's unrun commits plus balanced slices;
# A/B of stop 15's binary against balanced slices and KEEP=2 (teacher kept).
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
{ bash scripts/gpu-unpack.sh .carry/s15-bin.tar.xz && mv gpu-bin s15-bin &&
  bash scripts/gpu-unpack.sh .carry/tilejit-bin.tar.xz; } > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
timeout 120 ./gpu-bin/tilejit-unit-tests --gtest_filter='*Gpu*:Cluster*:MinMax*' --gtest_brief=1 > "$out/tests.log" 2>&1; echo "tests rc=$?"; tail -4 "$out/tests.log"
b() { # bin label args...
  local bin=$1; shift; echo "## $bin $*"
  timeout 40 ./$bin/tilejit bench fused_ce_tvd "$@" 2>&1 | grep -E "  forward  |loss \+ grad|PASS|FAIL|rror|copy"
}
{
for s in 4096:151936 4096:128256; do
  IFS=: read -r bt v <<<"$s"; S="--bt $bt --vocab $v --dtype bf16"
  b s15-bin $S --reduction=mean
  b gpu-bin $S --reduction=mean --check --check-rows 8
  b gpu-bin $S --reduction=mean --set KEEP=2 --check --check-rows 8
  b gpu-bin $S --reduction=mean --set KEEP=2 --set CLUSTER_SIZE=16
  b s15-bin $S --reduction=mean
  b s15-bin $S --forward=cluster
  b gpu-bin $S --forward=cluster --check --check-rows 8
  b gpu-bin $S --forward=cluster --set KEEP=2 --check --check-rows 8
  b gpu-bin $S --forward=cluster --set KEEP=2 --set CLUSTER_SIZE=16
  b gpu-bin $S --forward=cluster --set KEEP=2 --set num_warps=4
done
S="--bt 4096 --vocab 151936 --dtype fp32"
b gpu-bin $S --reduction=mean
b gpu-bin $S --reduction=mean --set KEEP=2 --set CLUSTER_SIZE=16
b gpu-bin $S --forward=cluster
b gpu-bin $S --forward=cluster --set KEEP=2 --set CLUSTER_SIZE=16
} 2>&1 | tee "$out/ab.log"
rm -rf "$TILEJIT_CACHE_DIR"
