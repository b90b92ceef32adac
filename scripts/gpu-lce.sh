#!/usr/bin/env bash
# Runs ON the GPU machine from the repo root (see docs/static-build.md): the
# tile.dot and linear-CE GPU tests, the chunked fused linear cross-entropy
# (cuBLASLt GEMMs) checked against the fp64 reference and benched, then the
# peers (torch eager, torch.compile, and Liger and Cut Cross-Entropy when carried in .carry/liger and .carry/cce) from .carry/peers.py. Logs go to
# $OUT.
# libcublasLt comes from the machine's PyTorch wheels unless TILEJIT_CUBLASLT
# names it.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
export TILEJIT_CACHE_DIR=/tmp/tilejit-cache-$$
if [ -z "${TILEJIT_CUBLASLT:-}" ]; then
  site=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
  TILEJIT_CUBLASLT=$(find $site /usr/local/cuda* -name 'libcublasLt.so.1[23]' 2>/dev/null | head -1)
  export TILEJIT_CUBLASLT
fi
echo "libcublasLt: ${TILEJIT_CUBLASLT:-<loader path>}" | tee "$out/env.log"
tj="timeout 300 ./gpu-bin/tilejit"
timeout 300 ./gpu-bin/tilejit-unit-tests --gtest_brief=1 --gtest_filter="${UNIT_FILTER:-*LinearCe*:*Dot*}" 2>&1 | tail -20 > "$out/unit-tests.log"
tail -3 "$out/unit-tests.log"
{
  $tj run fused_linear_ce --device=gpu --bt 512 --hidden 256 --vocab 32000 --dtype bf16 \
    --label-smoothing 0.1 --z-loss 1e-4 --softcap 30 --bias --class-weights --chunk-rows 128 --check
  $tj run fused_linear_ce --device=gpu --bt 512 --hidden 256 --vocab 32000 --dtype bf16 \
    --label-smoothing 0.1 --z-loss 1e-4 --softcap 30 --bias --class-weights --chunk-rows 128 \
    --narrow-logits=false --check
  # PEERS_BEFORE=1: torch.compile also before the variants (drift check).
  if [ "${PEERS_BEFORE:-0}" = 1 ] && [ -f .carry/peers.py ]; then
    PYTHONUNBUFFERED=1 timeout 300 python3 .carry/peers.py lce --n ${LCE_N:-8192} \
      --hidden ${LCE_D:-4096} --vocab ${LCE_V:-128256} --providers torch_compile 2>&1 | grep -v Warning
  fi
  shape="--bt ${LCE_N:-8192} --hidden ${LCE_D:-4096} --vocab ${LCE_V:-128256} --dtype bf16 --iters 10"
  # One bench per line of LCE_VARIANTS (chunking, logits dtype, workspace).
  variants=${LCE_VARIANTS:-"--memory-budget-mib 512 --tune-chunk
--memory-budget-mib 512
--memory-budget-mib 512 --gemm-candidates 1
--memory-budget-mib 512 --cuda-graph
--memory-budget-mib 512 --gemm=tilejit
--memory-budget-mib 512 --tune-chunk --bf16-grad-accumulation
--memory-budget-mib 0"}
  while IFS= read -r v; do
    [ -n "$v" ] && $tj bench fused_linear_ce $shape $v
  done <<<"$variants"
  if [ "${PEERS:-1}" = 1 ] && [ -f .carry/peers.py ]; then
    PYTHONUNBUFFERED=1 PYTHONPATH=.carry/liger:.carry/cce timeout 400 python3 .carry/peers.py lce \
      --n ${LCE_N:-8192} --hidden ${LCE_D:-4096} --vocab ${LCE_V:-128256} --providers ${PEER_PROVIDERS:-torch,torch_compile,liger,cce} 2>&1 | grep -v Warning
  fi
  # SWEEP="N:d:V ...": the default variant and torch.compile (and the
  # SWEEP_PROVIDERS) at each shape.
  for s in ${SWEEP:-}; do
    IFS=: read -r n dd vv <<<"$s"
    $tj bench fused_linear_ce --bt $n --hidden $dd --vocab $vv --dtype bf16 --iters 10 \
      --memory-budget-mib 512 --tune-chunk
    PYTHONUNBUFFERED=1 PYTHONPATH=.carry/liger:.carry/cce timeout 300 python3 .carry/peers.py lce \
      --n $n --hidden $dd --vocab $vv --providers ${SWEEP_PROVIDERS:-torch_compile} 2>&1 | grep -v Warning
  done
} 2>&1 | tee "$out/lce.log"
rm -rf "$TILEJIT_CACHE_DIR"
