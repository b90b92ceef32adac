#!/usr/bin/env bash
# Runs ON the GPU machine from the repo root (see docs/static-build.md):
# GPU unit tests, the CE+TVD walking-skeleton run at the Qwen shape, and the
# peers (torch eager / torch.compile from ../shared/bench/peers.py, carried as
# .carry/peers.py) in the same command. Logs go to $OUT (or ./gpu-out).
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh || exit 1
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
} 2>&1 | tee "$out/env.log"
./gpu-bin/tilejit-unit-tests --gtest_brief=1 2>&1 | tail -40 | tee "$out/unit-tests.log"
./gpu-bin/tilejit run fused_ce_tvd --device=gpu --bt 4096 --vocab 151936 \
  --dtype bf16 --check --check-rows 64 2>&1 | tee "$out/run-bt4096-v151936-bf16.log"
if [ -f .carry/peers.py ]; then
  PYTHONUNBUFFERED=1 python3 .carry/peers.py ceilings 2>&1 | tee "$out/peers.log"
  PYTHONUNBUFFERED=1 python3 .carry/peers.py cetvd --bt 4096 --vocab 151936 \
    --dtype bf16 --providers torch,torch_compile 2>&1 | tee -a "$out/peers.log"
fi
