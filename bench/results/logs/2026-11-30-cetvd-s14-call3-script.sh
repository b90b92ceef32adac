#!/usr/bin/env bash
# Stop 14, call 3: KEEP for the cluster forward (student slice kept for pass
# 2) across cluster sizes; reduced KEEP=1 variants; main shape, bf16.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
tj="timeout 60 ./gpu-bin/tilejit"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } > "$out/env.log" 2>&1
{
S="--bt 4096 --vocab 151936 --dtype bf16"
for cfg in "0 2 8 2048 2" "1 2 8 2048 2" "1 4 8 2048 2" "1 8 8 2048 2" "1 8 4 1024 2" "1 8 8 2048 1" "1 4 8 1024 2" "1 4 4 1024 2" "1 16 4 1024 2" "0 8 8 2048 2"; do
  read -r kp c w b u <<<"$cfg"
  echo "## forward KEEP=$kp CLUSTER_SIZE=$c num_warps=$w BLOCK_SIZE=$b UNROLL=$u"
  $tj bench fused_ce_tvd $S --forward cluster --set KEEP=$kp --set CLUSTER_SIZE=$c --set num_warps=$w --set BLOCK_SIZE=$b --set UNROLL=$u 2>&1 | grep -E "^  forward |rror"
done
for cfg in "1 8 8 2048 2 2" "1 8 8 2048 2 1" "1 8 4 2048 2 2" "1 8 4 1024 2 2" "1 4 8 2048 2 2" "1 8 8 1024 2 2"; do
  read -r kp c w b u ls <<<"$cfg"
  echo "## reduced KEEP=$kp CLUSTER_SIZE=$c num_warps=$w BLOCK_SIZE=$b UNROLL=$u LANE_STATS=$ls"
  $tj bench fused_ce_tvd $S --reduction=mean --set KEEP=$kp --set CLUSTER_SIZE=$c --set num_warps=$w --set BLOCK_SIZE=$b --set UNROLL=$u --set LANE_STATS=$ls 2>&1 | grep -E "loss \+ grad|rror"
done
for shape in "4096 32000 bf16" "4096 128256 fp32"; do
  read -r bt v dt <<<"$shape"
  for cfg in "0 2" "1 2" "1 4" "1 8"; do
    read -r kp c <<<"$cfg"
    echo "## forward $dt ${bt}x$v KEEP=$kp CLUSTER_SIZE=$c"
    $tj bench fused_ce_tvd --bt $bt --vocab $v --dtype $dt --forward cluster --set KEEP=$kp --set CLUSTER_SIZE=$c 2>&1 | grep -E "^  forward |rror"
  done
done
} 2>&1 | tee "$out/fwd.log"
rm -rf "$TILEJIT_CACHE_DIR"
