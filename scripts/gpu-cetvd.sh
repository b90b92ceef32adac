#!/usr/bin/env bash
# Runs ON the GPU machine from the repo root (see docs/static-build.md), all in
# one session so the numbers sit side by side:
#   GPU unit tests; cold and warm JIT (fresh processes, empty then warm cache);
#   tilejit tune; tilejit run --check with the tuned configs (BT = 4096 and
#   BT = 16384, which exceeds 2^31 elements); tilejit bench (bf16, fp32); the
#   peers (torch eager, torch.compile) from ../shared/bench/peers.py, carried
#   as .carry/peers.py. Logs go to $OUT (or ./gpu-out).
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
export TILEJIT_CACHE_DIR=/tmp/tilejit-cache-$$
tj=./gpu-bin/tilejit
shape="--bt 4096 --vocab 151936 --dtype bf16"
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
} 2>&1 | tee "$out/env.log"
./gpu-bin/tilejit-unit-tests --gtest_brief=1 2>&1 | tail -30 > "$out/unit-tests.log"
tail -3 "$out/unit-tests.log"
{
  echo "## cold cache (fresh process)"; $tj bench fused_ce_tvd $shape
  echo "## warm disk cache (fresh process)"; $tj bench fused_ce_tvd $shape
} 2>&1 | tee "$out/jit.log"
$tj tune fused_ce_tvd $shape 2>"$out/tune-progress.log" | tee "$out/tune.log"
{
  $tj run fused_ce_tvd --device=gpu $shape --check --check-rows 64
  $tj bench fused_ce_tvd $shape
  $tj bench fused_ce_tvd --bt 4096 --vocab 151936 --dtype fp32
  $tj run fused_ce_tvd --device=gpu --bt 16384 --vocab 151936 --dtype bf16 \
    --check --check-rows 24 --iters 5
} 2>&1 | tee "$out/tuned.log"
if [ -f .carry/peers.py ]; then
  { PYTHONUNBUFFERED=1 python3 .carry/peers.py ceilings
    PYTHONUNBUFFERED=1 python3 .carry/peers.py cetvd $shape --providers torch,torch_compile
  } 2>&1 | grep -v Warning | tee "$out/peers.log"
fi
rm -rf "$TILEJIT_CACHE_DIR"
