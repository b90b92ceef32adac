#!/usr/bin/env bash
# Stop 22, call 4: the fast form's p scaled back (log2OffsetScale), the
# target element signed in the row's form, against call 3's binary in the
# same call; then the GPU unit tests.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
export BASE=.carry/s22-call3-bin.tar.xz CHECK=1
SHAPES="4096:151936:bf16" RUNS="--forward=cluster|--reduction=mean|--reduction=mean --set KEEP=0" \
  REPEAT=2 timeout 150 bash scripts/gpu-cetvd-ab.sh > "$out/ab1.log" 2>&1
echo "ab1 rc=$?"; cp "$out/ab.log" "$out/ab-bf16.log"
SHAPES="4096:151936:fp32" RUNS="--reduction=mean" REPEAT=1 \
  timeout 60 bash scripts/gpu-cetvd-ab.sh > "$out/ab2.log" 2>&1
echo "ab2 rc=$?"; cp "$out/ab.log" "$out/ab-fp32.log"; rm -f "$out/ab.log"
export TILEJIT_CACHE_DIR=/tmp/tjc-s22d
timeout 150 ./gpu-bin/tilejit-unit-tests \
  --gtest_filter='*Gpu*:Cluster*:MinMax*-*EveryConfig*' --gtest_brief=1 > "$out/unit.log" 2>&1
echo "unit rc=$?"
tail -4 "$out/unit.log"; grep -E "Failure" -A4 "$out/unit.log" | head -30
cat "$out/ab-bf16.log" "$out/ab-fp32.log"
