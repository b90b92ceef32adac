#!/usr/bin/env bash
# Stop 14, call 2: KEEP=3 (student slice kept from pass 1 for pass 2, then
# p*sign for pass 3) against KEEP=0/2, reduced loss + grad, several shapes.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
tj="timeout 60 ./gpu-bin/tilejit"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } > "$out/env.log" 2>&1
{
S="--bt 4096 --vocab 151936 --dtype bf16 --reduction=mean"
for cfg in "2 8 8 2048 2" "3 8 8 2048 2" "3 8 8 2048 1" "3 8 4 1024 2" "3 8 8 1024 2" "3 16 8 1024 2" "3 16 4 1024 2" "3 4 8 2048 2" "3 4 16 2048 2" "0 8 8 2048 2"; do
  read -r kp c w b u <<<"$cfg"
  echo "## bf16 4096x151936 KEEP=$kp CLUSTER_SIZE=$c num_warps=$w BLOCK_SIZE=$b UNROLL=$u"
  $tj bench fused_ce_tvd $S --set KEEP=$kp --set CLUSTER_SIZE=$c --set num_warps=$w --set BLOCK_SIZE=$b --set UNROLL=$u 2>&1 | grep -E "loss \+ grad|rror"
done
for shape in "4096 32000 bf16" "4096 128256 bf16" "1024 151936 bf16" "16384 151936 bf16" "16384 32000 bf16" "4096 151936 fp32" "4096 32000 fp32"; do
  read -r bt v dt <<<"$shape"
  for kp in 0 2 3; do
    echo "## $dt ${bt}x$v KEEP=$kp (default cluster)"
    $tj bench fused_ce_tvd --bt $bt --vocab $v --dtype $dt --reduction=mean --set KEEP=$kp 2>&1 | grep -E "loss \+ grad|rror"
  done
done
for c in 16 8; do for kp in 2 3; do
  echo "## fp32 4096x151936 KEEP=$kp CLUSTER_SIZE=$c"
  $tj bench fused_ce_tvd --bt 4096 --vocab 151936 --dtype fp32 --reduction=mean --set KEEP=$kp --set CLUSTER_SIZE=$c 2>&1 | grep -E "loss \+ grad|rror"
done; done
for kp in 3; do
  echo "## checked in place KEEP=$kp"
  $tj bench fused_ce_tvd $S --in-place --check --set KEEP=$kp 2>&1 | grep -E "loss \+ grad|PASS|FAIL|rror"
done
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_shared_mem,launch__occupancy_limit_registers
echo "## ncu KEEP=3 (defaults otherwise)"
timeout 120 ncu --clock-control none -k regex:fused_ce_tvd_loss_grad -s 2 -c 1 --metrics $M \
    ./gpu-bin/tilejit bench fused_ce_tvd $S --iters 3 --set KEEP=3 2>&1 |
    grep -E "gpu__time|dram__|hit_rate|warps_active|inst_executed|issue_active|registers|occupancy"
} 2>&1 | tee "$out/keep3.log"
timeout 200 ./gpu-bin/tilejit-unit-tests --gtest_filter='*ReducedGpu*' --gtest_brief=1 > "$out/unit.log" 2>&1
tail -3 "$out/unit.log"; grep -E "FAILED|Failure" -A3 "$out/unit.log" | head -30
rm -rf "$TILEJIT_CACHE_DIR"
