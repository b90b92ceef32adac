#!/usr/bin/env bash
# Stop 15, call 2: cluster reductions pushed through mbarriers (st.async, no
# cluster barrier, no release fence) against stop 14's binary, same call;
# rank-balance variants (BLOCK_SIZE 1024); GPU tests; stalls at the new default.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh .carry/s14-bin.tar.xz > "$out/unpack-s14.log" 2>&1 && mv gpu-bin s14-bin
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; } > "$out/env.log" 2>&1
timeout 150 ./gpu-bin/tilejit-unit-tests --gtest_filter='*Gpu*:Cluster*' --gtest_brief=1 > "$out/unit.log" 2>&1
tail -3 "$out/unit.log"; grep -E "FAILED|Failure" -A3 "$out/unit.log" | head -30
S="--bt 4096 --vocab 151936 --dtype bf16"
{
for rep in 1 2; do
  for b in s14-bin gpu-bin; do
    echo "## $b reduced"; timeout 60 ./$b/tilejit bench fused_ce_tvd $S --reduction=mean 2>&1 | grep -E "loss \+ grad|rror"
    echo "## $b forward"; timeout 60 ./$b/tilejit bench fused_ce_tvd $S --forward=cluster 2>&1 | grep -E "forward|rror"
  done
done
for set in "--set BLOCK_SIZE=1024" "--set BLOCK_SIZE=1024 --set UNROLL=4" "--set UNROLL=4" "--set num_warps=4"; do
  echo "## gpu-bin reduced $set"; timeout 60 ./gpu-bin/tilejit bench fused_ce_tvd $S --reduction=mean $set 2>&1 | grep -E "loss \+ grad|rror"
done
echo "## checked"; timeout 60 ./gpu-bin/tilejit bench fused_ce_tvd $S --reduction=mean --in-place --check 2>&1 | grep -E "loss \+ grad|PASS|FAIL|rror"
timeout 60 ./gpu-bin/tilejit bench fused_ce_tvd $S --forward=cluster --check 2>&1 | grep -E "forward|PASS|FAIL|rror"
} 2>&1 | tee "$out/bench.log"
timeout 200 ncu --clock-control none -k regex:fused_ce_tvd_loss_grad -s 2 -c 1 \
  --section WarpStateStats --section SourceCounters --metrics smsp__inst_executed.sum,dram__bytes_read.sum \
  --export "$out/reduced-mbar" ./gpu-bin/tilejit bench fused_ce_tvd $S --reduction=mean --iters 3 > "$out/ncu.log" 2>&1
timeout 100 ncu --import "$out/reduced-mbar.ncu-rep" --page source --csv --print-source sass > "$out/sass-stalls.csv" 2>&1
timeout 60 ncu --import "$out/reduced-mbar.ncu-rep" --page raw --csv > "$out/raw.csv" 2>&1
rm -rf "$TILEJIT_CACHE_DIR"
