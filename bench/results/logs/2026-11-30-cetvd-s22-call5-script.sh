#!/usr/bin/env bash
# Stop 22, call 5: the final code (the target's kept sign by its sign bit):
# the GPU unit tests and checked runs at the main shape.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1
export TILEJIT_CACHE_DIR=/tmp/tjc-s22e
timeout 130 ./gpu-bin/tilejit-unit-tests \
  --gtest_filter='*Gpu*:Cluster*:MinMax*-*EveryConfig*' --gtest_brief=1 > "$out/unit.log" 2>&1
echo "unit rc=$?"; tail -3 "$out/unit.log"; grep -E "Failure" -A4 "$out/unit.log" | head -20
for dt in bf16 fp16 fp32; do
  for run in "--reduction=mean" "--forward=cluster"; do
    echo "## $dt $run"
    timeout 60 ./gpu-bin/tilejit bench fused_ce_tvd --bt 4096 --vocab 151936 --dtype $dt $run \
      --check --check-rows 8 2>&1 | grep -E "  forward  |  backward  |loss \+ grad|grad error|PASS|FAIL|rror"
  done
done | tee "$out/checks.log"
