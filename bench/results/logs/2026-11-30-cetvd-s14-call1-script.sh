#!/usr/bin/env bash
# Stop 14, call 1: KEEP (pass 2 keeps sign or p*sign in shared memory) for the
# reduced loss + grad, main shape; ncu of the best; then every *Gpu* test.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
tj="timeout 60 ./gpu-bin/tilejit"
S="--bt 4096 --vocab 151936 --dtype bf16 --reduction=mean"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } > "$out/env.log" 2>&1
{
for cfg in "0 8 8 2048 2" "1 8 8 2048 2" "1 8 8 2048 1" "1 4 8 2048 2" "1 16 8 1024 2" "2 8 8 2048 2" "2 8 8 2048 1" "2 8 8 1024 2" "2 8 16 2048 2" "2 8 4 1024 2" "2 16 8 1024 2" "2 16 8 2048 1" "2 4 8 2048 2" "0 8 8 2048 2"; do
  read -r kp c w b u <<<"$cfg"
  echo "## KEEP=$kp CLUSTER_SIZE=$c num_warps=$w BLOCK_SIZE=$b UNROLL=$u"
  $tj bench fused_ce_tvd $S --set KEEP=$kp --set CLUSTER_SIZE=$c --set num_warps=$w --set BLOCK_SIZE=$b --set UNROLL=$u 2>&1 | grep -E "loss \+ grad|copy|rror"
done
for kp in 1 2; do
  echo "## checked in place KEEP=$kp (defaults otherwise)"
  $tj bench fused_ce_tvd $S --in-place --check --set KEEP=$kp 2>&1 | grep -E "loss \+ grad|PASS|FAIL|rror"
done
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_shared_mem,launch__occupancy_limit_registers
for kp in 0 1 2; do
  echo "## ncu KEEP=$kp (defaults otherwise)"
  timeout 120 ncu --clock-control none -k regex:fused_ce_tvd_loss_grad -s 2 -c 1 --metrics $M \
    ./gpu-bin/tilejit bench fused_ce_tvd $S --iters 3 --set KEEP=$kp 2>&1 |
    grep -E "gpu__time|dram__|hit_rate|warps_active|inst_executed|issue_active|registers|occupancy"
done
} 2>&1 | tee "$out/keep.log"
timeout 240 ./gpu-bin/tilejit-unit-tests --gtest_filter='*Gpu*' --gtest_brief=1 > "$out/unit.log" 2>&1
tail -3 "$out/unit.log"; grep -E "FAILED|Failure" -A3 "$out/unit.log" | head -30
rm -rf "$TILEJIT_CACHE_DIR"
