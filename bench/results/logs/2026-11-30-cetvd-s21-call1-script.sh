#!/usr/bin/env bash
# Stop 21, call 1: the persistent cluster forward (PERSISTENT=1, NEXT_ROW_L2)
# against stop 20's kernels (base-tail = 4e07302), GPU unit tests first.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv > "$out/gpu.txt" 2>&1
bash scripts/gpu-unpack.sh .carry/base-tail.tar.xz > "$out/unpack.log" 2>&1
rm -rf base-bin && mv gpu-bin base-bin
bash scripts/gpu-unpack.sh >> "$out/unpack.log" 2>&1
export TILEJIT_CACHE_DIR=/tmp/tjc-s21
timeout 240 ./gpu-bin/tilejit-unit-tests \
  --gtest_filter='Cluster*:CeTvdGpu*:CeTvdReducedGpu*:CeTvdClusterForward*' \
  --gtest_brief=1 > "$out/unit.log" 2>&1
echo "unit rc=$?"; tail -3 "$out/unit.log"; grep -E "FAILED|Failure" -A3 "$out/unit.log" | head -20
bench() {
  local bin=$1; shift
  echo "## $bin $*"
  timeout 60 "./$bin/tilejit" bench fused_ce_tvd "$@" 2>&1 |
    grep -E "copy ceiling|  forward  |PASS|FAIL|rror"
}
{
S="--bt 4096 --vocab 151936 --dtype bf16 --forward=cluster"
bench gpu-bin $S --set PERSISTENT=1 --set NEXT_ROW_L2=2 --check --check-rows 8
bench gpu-bin --bt 4096 --vocab 147456 --dtype bf16 --forward=cluster --set PERSISTENT=1 --check --check-rows 8
for i in 1 2 3; do
  bench base-bin $S
  bench gpu-bin $S
  bench gpu-bin $S --set PERSISTENT=1
  bench gpu-bin $S --set PERSISTENT=1 --set NEXT_ROW_L2=1
  bench gpu-bin $S --set PERSISTENT=1 --set NEXT_ROW_L2=2
done
for shape in "4096 128256 bf16" "4096 151936 fp32" "1024 151936 bf16"; do
  read -r bt v dt <<<"$shape"
  S2="--bt $bt --vocab $v --dtype $dt --forward=cluster"
  bench base-bin $S2
  bench gpu-bin $S2 --set PERSISTENT=1
  bench gpu-bin $S2 --set PERSISTENT=1 --set NEXT_ROW_L2=2
done
} 2>&1 | tee "$out/ab.log"
