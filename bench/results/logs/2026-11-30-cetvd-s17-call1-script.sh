#!/usr/bin/env bash
# Stop 17, call 1: teacher loads before the copy wait + one rescale per step
# in pass 1 (new) against stop 16's binary (s16), reduced and forward; forward
# variants; ncu of the new forward (pipes, clock, stalls).
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
bash scripts/gpu-unpack.sh .carry/s16-bin.tar.xz >> "$out/unpack.log" 2>&1 && mv gpu-bin s16-bin
bash scripts/gpu-unpack.sh >> "$out/unpack.log" 2>&1
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm --format=csv; } > "$out/env.log" 2>&1
b() { local bin=$1; shift; echo "## $bin $*"; timeout 40 ./$bin/tilejit bench fused_ce_tvd "$@" 2>&1 | grep -E "  forward  |loss \+ grad|PASS|FAIL|rror|copy"; }
{
S="--bt 4096 --vocab 151936 --dtype bf16"
for mode in "--reduction=mean" "--forward=cluster"; do
  b gpu-bin $S $mode --check --check-rows 8
  for i in 1 2; do b s16-bin $S $mode; b gpu-bin $S $mode; done
done
M="--forward=cluster"
b gpu-bin $S $M --set COPY_AHEAD=1
b gpu-bin $S $M --set REGISTER_BUDGET=64
b gpu-bin $S $M --set UNROLL=1
b gpu-bin $S $M --set KEEP=0
b gpu-bin $S --reduction=mean --set COPY_AHEAD=2
} 2>&1 | tee "$out/ab.log"
timeout 60 ./gpu-bin/tilejit-unit-tests --gtest_filter='*Gpu*:*Cluster*' --gtest_brief=1 > "$out/tests.log" 2>&1; echo "tests rc=$?"; tail -3 "$out/tests.log"
MET=sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,launch__cluster_max_active,gpu__time_duration.sum
for K in fwd_cluster loss_grad; do
  mode="--forward=cluster"; [ $K = loss_grad ] && mode="--reduction=mean"
  timeout 150 ncu --clock-control none -k regex:fused_ce_tvd_$K -s 2 -c 1 \
    --section WarpStateStats --section SourceCounters --section ComputeWorkloadAnalysis --metrics $MET \
    --export "$out/ncu-$K" ./gpu-bin/tilejit bench fused_ce_tvd $S $mode --iters 3 > "$out/ncu-$K.log" 2>&1
  grep -v "^==PROF==" "$out/ncu-$K.log" | grep -E "per_second|inst_executed|pct|bytes|max_active|duration|Stall|Pipe|Issue|Warp Cycles" | head -60
  timeout 60 ncu --import "$out/ncu-$K.ncu-rep" --page source --csv --print-source sass > "$out/sass-stalls-$K.csv" 2>&1
done
rm -rf "$TILEJIT_CACHE_DIR"
