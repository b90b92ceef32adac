bash scripts/gpu-unpack.sh > /dev/null 2>&1 || exit 1
export TILEJIT_CACHE_DIR=/tmp/tjc2; tj=./gpu-bin/tilejit; shape="--bt 4096 --vocab 151936 --dtype bf16"
{ echo "## cold cache (fresh process, default configs)"; $tj bench fused_ce_tvd $shape
  echo "## warm disk cache (fresh process, default configs)"; $tj bench fused_ce_tvd $shape
  $tj tune fused_ce_tvd $shape 2>/dev/null | grep winner
  echo "## tuned"; $tj bench fused_ce_tvd $shape
  $tj tune fused_ce_tvd --bt 4096 --vocab 151936 --dtype fp32 2>/dev/null | grep winner
  echo "## tuned fp32"; $tj bench fused_ce_tvd --bt 4096 --vocab 151936 --dtype fp32
} 2>&1 | tee $OUT/bench.log
