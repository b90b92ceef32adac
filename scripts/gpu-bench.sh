#!/usr/bin/env bash
# Runs ON the GPU machine from the repo root: JIT costs (cold cache, then warm
# disk cache, each a fresh process), tuning, and `tilejit bench` with the
# tuned configs, for bf16 and fp32. Logs go to $OUT (or ./gpu-out).
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
export TILEJIT_CACHE_DIR=/tmp/tilejit-cache-$$
tj=./gpu-bin/tilejit
shape="--bt 4096 --vocab 151936"
{
  echo "## cold cache (fresh process, default configs)"
  $tj bench fused_ce_tvd $shape --dtype bf16
  echo "## warm disk cache (fresh process, default configs)"
  $tj bench fused_ce_tvd $shape --dtype bf16
  for dt in bf16 fp32; do
    $tj tune fused_ce_tvd $shape --dtype $dt 2>/dev/null | grep winner
    echo "## tuned $dt"
    $tj bench fused_ce_tvd $shape --dtype $dt
  done
} 2>&1 | tee "$out/bench.log"
rm -rf "$TILEJIT_CACHE_DIR"
