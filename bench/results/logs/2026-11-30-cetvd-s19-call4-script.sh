#!/usr/bin/env bash
# Stop 19, call 4: ncu of the forward with the max-form pass 2 (stalls per
# instruction, pipes, issue), to see what the last 1% waits on.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
S="--bt 4096 --vocab 151936 --dtype bf16"
MET=sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum
timeout 200 ncu --clock-control none -k regex:fused_ce_tvd_fwd_cluster -s 2 -c 1 \
  --section WarpStateStats --section SourceCounters --metrics $MET \
  --export "$out/ncu-fwd" ./gpu-bin/tilejit bench fused_ce_tvd $S --forward=cluster --iters 3 > "$out/ncu-fwd.log" 2>&1
grep -v "^==PROF==" "$out/ncu-fwd.log" | grep -E "per_second|inst_executed|pct|bytes|duration|Stall|Warp Cycles" | head -40
timeout 100 ncu --import "$out/ncu-fwd.ncu-rep" --page source --csv --print-source sass > "$out/sass-stalls-fwd.csv" 2>&1
ls -la "$out"
rm -rf "$TILEJIT_CACHE_DIR"
