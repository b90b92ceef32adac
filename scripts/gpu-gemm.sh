#!/usr/bin/env bash
# Runs ON the GPU machine from the repo root: the DSL GEMM (lce_gemm, a K
# loop of dot that tile-pipeline-dot pipelines) with the carried binaries
# (scripts/package-gpu.sh). PARTS (default "test bench") picks what runs;
# logs go to $OUT (default ./out).
#   test   the GPU unit tests of dot and dot loops against fp64
#   bench  scripts/bench/dsl_gemm.py: lce_gemm beside cuBLAS at a square
#          shape and the linear CE's chunk products, for each of CONFIGS
#   cli    `tilejit bench lce_gemm` at the same shapes for each of
#          CLI_CONFIGS (space-separated, comma-separated NAME=VALUE; default
#          "default"): TFLOP/s and the fraction of cuBLASLt, one process
#   lce    `tilejit bench fused_linear_ce` at N = 8192, d = 4096,
#          V = 128256 for each --gemm of LCE_GEMMS (default "cublaslt
#          tilejit"), LCE_SET added to each
#   torch  scripts/bench/torch_ops.py lce: the PyTorch op at the same shape
#          beside torch.compile (and Liger when .peers/liger is carried)
set -uo pipefail
parts=${PARTS:-test bench}
source scripts/gpu-env.sh
if has test; then
  timeout 300 ./gpu-bin/tilejit-unit-tests --gtest_filter="${TESTS:-Dot*:LinearCeGemm*:LinearCeGpu*}" 2>&1 |
    tee "$out/test.log" | grep -E '^\[  (PASSED|FAILED) |OK \]|FAILED|Failure|error' | head -60
fi
if has bench; then
  timeout 500 python3 scripts/bench/dsl_gemm.py ${CONFIGS:+--configs "$CONFIGS"} \
    ${SHAPES:+--shapes "$SHAPES"} 2>&1 | grep -v Warning | tee "$out/gemm.jsonl"
fi
if has cli; then
  # M N K TRANS_A TRANS_B, as scripts/bench/dsl_gemm.py's shapes.
  for shape in "8192 8192 8192 0 0" "2048 128256 4096 0 1" \
    "2048 4096 128256 0 0" "128256 4096 2048 1 0" ${CLI_SHAPES:-}; do
    read -r m n k ta tb <<<"${shape//,/ }"
    for cfg in ${CLI_CONFIGS:-default}; do
      sets=()
      [ "$cfg" = default ] || for kv in ${cfg//,/ }; do sets+=(--set "$kv"); done
      echo "== M=$m N=$n K=$k TRANS_A=$ta TRANS_B=$tb $cfg"
      timeout 120 ./gpu-bin/tilejit bench lce_gemm --size M=$m --size N=$n \
        --size K=$k --set TRANS_A=$ta --set TRANS_B=$tb --set C_F32=0 \
        "${sets[@]}" --iters ${ITERS:-20}
    done
  done 2>&1 | tee "$out/cli.log"
fi
if has lce; then
  for gemm in ${LCE_GEMMS:-cublaslt tilejit}; do
    echo "== --gemm=$gemm"
    timeout 280 ./gpu-bin/tilejit bench fused_linear_ce --bt 8192 --hidden 4096 \
      --vocab 128256 --dtype bf16 --gemm=$gemm --check ${LCE_SET:-}
  done 2>&1 | tee "$out/lce.log"
fi
if has torch; then
  timeout 200 python3 scripts/bench/torch_ops.py lce 2>&1 | grep -v Warning |
    tee "$out/torch_ops.jsonl"
fi
