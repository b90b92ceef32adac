#!/usr/bin/env bash
# Stop 21, call 7: the GPU unit tests of the final code (FAST_LOG2 on for
# every dtype; persistent grids).
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1
export TILEJIT_CACHE_DIR=/tmp/tjc-s21
timeout 200 ./gpu-bin/tilejit-unit-tests \
  --gtest_filter='*Gpu*:Cluster*:MinMax*-*EveryConfig*' --gtest_brief=1 > "$out/unit.log" 2>&1
echo "unit rc=$?"
