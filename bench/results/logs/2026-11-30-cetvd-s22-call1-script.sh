#!/usr/bin/env bash
# Stop 22, call 1: issue 4's remaining shapes on the final kernels (faf0f77),
# tilejit and its peers in one run, then the GPU unit tests.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
SHAPES="16384:151936:bf16 16384:128256:bf16 16384:32000:bf16 16384:151936:fp32 1024:32000:bf16 1024:128256:bf16" \
  PEERS_TIMEOUT=150 timeout 420 bash scripts/gpu-cetvd-shapes.sh > "$out/summary.log" 2>&1
echo "shapes rc=$?" | tee -a "$out/summary.log"
export TILEJIT_CACHE_DIR=/tmp/tjc-s22
timeout 150 ./gpu-bin/tilejit-unit-tests \
  --gtest_filter='*Gpu*:Cluster*:MinMax*-*EveryConfig*' --gtest_brief=1 > "$out/unit.log" 2>&1
echo "unit rc=$?"
tail -5 "$out/unit.log"; cat "$out/summary.log"
