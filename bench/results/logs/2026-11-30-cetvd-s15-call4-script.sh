#!/usr/bin/env bash
# Stop 15, call 4: the cluster's first wait deferred to the first combine;
# configs of both cluster kernels again now that combines need no cluster
# barrier; fp32 at the main shape.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > "$out/env.log" 2>&1
timeout 100 ./gpu-bin/tilejit-unit-tests --gtest_filter='Cluster*:*ReducedGpu*' --gtest_brief=1 > "$out/unit.log" 2>&1
tail -3 "$out/unit.log"; grep -E "FAILED|Failure" -A3 "$out/unit.log" | head -30
S="--bt 4096 --vocab 151936 --dtype bf16"
tj="timeout 60 ./gpu-bin/tilejit"
{
for set in "" "" "--set CLUSTER_SIZE=16" "--set CLUSTER_SIZE=16 --set num_warps=4" "--set CLUSTER_SIZE=4" "--set num_warps=4" "--set LANE_STATS=0" "--set CLUSTER_SIZE=16 --set BLOCK_SIZE=1024"; do
  echo "## reduced $set"; $tj bench fused_ce_tvd $S --reduction=mean $set 2>&1 | grep -E "copy ceiling|loss \+ grad|rror"
done
for c in 2 4 8; do for keep in 0 1; do for w in 8 4; do
  set="--set CLUSTER_SIZE=$c --set KEEP=$keep --set num_warps=$w"
  echo "## forward $set"; $tj bench fused_ce_tvd $S --forward=cluster $set 2>&1 | grep -E "  forward  |rror"
done; done; done
echo "## fp32 reduced"; $tj bench fused_ce_tvd --bt 4096 --vocab 151936 --dtype fp32 --reduction=mean 2>&1 | grep -E "copy ceiling|loss \+ grad|rror"
echo "## fp32 forward"; $tj bench fused_ce_tvd --bt 4096 --vocab 151936 --dtype fp32 --forward=cluster 2>&1 | grep -E "copy ceiling|  forward  |rror"
echo "## checked"; $tj bench fused_ce_tvd $S --reduction=mean --in-place --check 2>&1 | grep -E "loss \+ grad|PASS|FAIL|rror"
} 2>&1 | tee "$out/bench.log"
rm -rf "$TILEJIT_CACHE_DIR"
