#!/usr/bin/env bash
# Runs ON the GPU machine from the repo root: the Python package over the
# carried libtilejit.so (scripts/package-gpu.sh). PARTS (default "tests
# bench train") picks what runs; logs go to $OUT (default ./out).
#   tests  python/tests on CUDA (and the CPU ones again)
#   bench  `tilejit bench` of the ops at the main shapes (the kernels' time),
#          then scripts/bench/torch_ops.py (the PyTorch ops beside their
#          peers; Liger-Kernel's source from .peers/liger if carried)
#   train  scripts/bench/train_lm.py (TRAIN_ARGS adds to its arguments)
set -uo pipefail
parts=${PARTS:-tests bench train}
source scripts/gpu-env.sh
if has tests; then
  timeout 400 python3 -m pytest -q -p no:cacheprovider python/tests 2>&1 |
    tail -15 | tee "$out/pytest.log"
fi
if has bench; then
  tj="timeout 300 ./gpu-bin/tilejit"
  {
    $tj bench fused_ce_tvd --bt 4096 --vocab 151936 --dtype bf16 --reduction=mean
    $tj bench fused_linear_ce --bt 8192 --hidden 4096 --vocab 128256 \
      --dtype bf16 --iters 10 --memory-budget-mib 512
  } 2>&1 | tee "$out/bench.log"
  timeout 500 python3 scripts/bench/torch_ops.py 2>&1 |
    grep -v Warning | tee "$out/torch_ops.jsonl"
fi
if has train; then
  timeout 560 python3 scripts/bench/train_lm.py --out "$out/train.json" \
    ${TRAIN_ARGS:-} 2>&1 | grep -v Warning | tee "$out/train.log"
fi
