#!/usr/bin/env bash
# Stop 15, call 1: where the reduced CE+TVD kernel (KEEP default) waits
# (ncu warp states, per-instruction stalls), and the tuner over its 192
# candidates at the main shape.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; ncu --version | tail -1; } > "$out/env.log" 2>&1
S="--bt 4096 --vocab 151936 --dtype bf16 --reduction=mean"
M=dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__occupancy_cluster_pct,launch__cluster_max_active
timeout 200 ncu --clock-control none -k regex:fused_ce_tvd_loss_grad -s 2 -c 1 \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
  --section LaunchStats --section SourceCounters --metrics $M \
  --export "$out/reduced-default" ./gpu-bin/tilejit bench fused_ce_tvd $S --iters 3 > "$out/ncu.log" 2>&1
grep -v "^==PROF==" "$out/ncu.log" | tail -150
timeout 100 ncu --import "$out/reduced-default.ncu-rep" --page source --csv --print-source sass > "$out/sass-stalls.csv" 2>&1
ls -la "$out"
timeout 240 ./gpu-bin/tilejit tune fused_ce_tvd $S > "$out/tune.log" 2>&1
grep -E "ms|best|chosen" "$out/tune.log" | sort -t: -k2 | head -5
tail -30 "$out/tune.log"
rm -rf "$TILEJIT_CACHE_DIR"
