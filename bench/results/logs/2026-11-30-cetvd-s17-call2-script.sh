#!/usr/bin/env bash
# Stop 17, call 2: ncu of the new cluster forward and reduced kernels
# (clock, pipes, issue, stalls).
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
[ -x gpu-bin/tilejit ] || bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
S="--bt 4096 --vocab 151936 --dtype bf16"
MET=sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,launch__cluster_max_active,gpu__time_duration.sum
for K in fwd_cluster loss_grad; do
  mode="--forward=cluster"; [ $K = loss_grad ] && mode="--reduction=mean"
  timeout 150 ncu --clock-control none -k regex:fused_ce_tvd_$K -s 2 -c 1 \
    --section WarpStateStats --section SourceCounters --section ComputeWorkloadAnalysis --metrics $MET \
    --export "$out/ncu-$K" ./gpu-bin/tilejit bench fused_ce_tvd $S $mode --iters 3 > "$out/ncu-$K.log" 2>&1
  grep -v "^==PROF==" "$out/ncu-$K.log" | grep -E "per_second|inst_executed|pct|bytes|max_active|duration|Stall|Pipe|Issue|Warp Cycles" | head -40
  timeout 60 ncu --import "$out/ncu-$K.ncu-rep" --page source --csv --print-source sass > "$out/sass-stalls-$K.csv" 2>&1
done
rm -rf "$TILEJIT_CACHE_DIR"
