#!/usr/bin/env bash
# Stop 22, call 3: the f16 loss + gradient kernel keeping p sign(p - q) in
# f16 scaled by 2^15, against faf0f77 (base-s22) in the same call; f16
# checks at more shapes; then the GPU unit tests.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
export BASE=.carry/base-s22.tar.xz CHECK=1
SHAPES="4096:151936:fp16" RUNS="--reduction=mean|--reduction=mean --in-place" \
  REPEAT=2 timeout 150 bash scripts/gpu-cetvd-ab.sh > "$out/ab1.log" 2>&1
echo "ab1 rc=$?"; cp "$out/ab.log" "$out/ab-f16.log"
SHAPES="4096:32000:fp16 1024:128256:fp16" RUNS="--reduction=mean" REPEAT=1 \
  timeout 100 bash scripts/gpu-cetvd-ab.sh > "$out/ab2.log" 2>&1
echo "ab2 rc=$?"; cp "$out/ab.log" "$out/ab-f16-shapes.log"; rm -f "$out/ab.log"
export TILEJIT_CACHE_DIR=/tmp/tjc-s22c
timeout 150 ./gpu-bin/tilejit-unit-tests \
  --gtest_filter='*Gpu*:Cluster*:MinMax*-*EveryConfig*' --gtest_brief=1 > "$out/unit.log" 2>&1
echo "unit rc=$?"
tail -4 "$out/unit.log"; grep -E "Failure" -A4 "$out/unit.log" | head -30
cat "$out/ab-f16.log" "$out/ab-f16-shapes.log"
