#!/usr/bin/env bash
# Stop 22, call 2: the backward signing in the forward's form (fast_signs)
# and the f16 forward's f16 KEEP array, against faf0f77 (base-s22) in the
# same call; then the GPU unit tests (the new shifted-teacher test).
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
export BASE=.carry/base-s22.tar.xz CHECK=1
SHAPES="4096:151936:bf16 4096:151936:fp16" RUNS="--forward=cluster|--reduction=mean|--forward=loop" \
  REPEAT=2 timeout 330 bash scripts/gpu-cetvd-ab.sh > "$out/ab1.log" 2>&1
echo "ab1 rc=$?"; cp "$out/ab.log" "$out/ab-bf16-f16.log"
SHAPES="4096:151936:fp32" RUNS="--forward=cluster" REPEAT=2 \
  timeout 90 bash scripts/gpu-cetvd-ab.sh > "$out/ab2.log" 2>&1
echo "ab2 rc=$?"; cp "$out/ab.log" "$out/ab-fp32.log"; rm -f "$out/ab.log"
export TILEJIT_CACHE_DIR=/tmp/tjc-s22b
timeout 150 ./gpu-bin/tilejit-unit-tests \
  --gtest_filter='*Gpu*:Cluster*:MinMax*-*EveryConfig*' --gtest_brief=1 > "$out/unit.log" 2>&1
echo "unit rc=$?"
tail -4 "$out/unit.log"; grep -E "Failure" -A4 "$out/unit.log" | head -30
cat "$out/ab-bf16-f16.log" "$out/ab-fp32.log"
