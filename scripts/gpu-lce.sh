#!/usr/bin/env bash
# Runs ON the GPU machine from the repo root (see docs/static-build.md): the
# tile.dot and linear-CE GPU tests, the chunked fused linear cross-entropy
# (cuBLASLt GEMMs) checked against the fp64 reference and benched, then the
# peers (torch eager, torch.compile, Liger, Cut Cross-Entropy) at the same
# shape. Logs go to $OUT (default ./out).
# libcublasLt comes from the machine's PyTorch wheels unless TILEJIT_CUBLASLT
# names it. The peers' harness is not part of this repository:
# PEERS_HARNESS names it (default .carry/peers.py), PEERS_PYTHONPATH where it
# finds Liger and CCE (default .carry/liger:.carry/cce). Without it, or with
# PEERS=0, no peers run.
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
export TILEJIT_CACHE_DIR=/tmp/tilejit-cache-$$
if [ -z "${TILEJIT_CUBLASLT:-}" ]; then
  site=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
  TILEJIT_CUBLASLT=$(find $site /usr/local/cuda* -name 'libcublasLt.so.1[23]' 2>/dev/null | head -1)
  export TILEJIT_CUBLASLT
fi
echo "libcublasLt: ${TILEJIT_CUBLASLT:-<loader path>}" | tee "$out/env.log"
harness=${PEERS_HARNESS:-.carry/peers.py}
if [ "${PEERS:-1}" = 1 ] && [ ! -f "$harness" ]; then
  echo "gpu-lce: no peers harness at $harness (set PEERS_HARNESS): peers skipped" >&2
  PEERS=0
fi
# peers TIMEOUT_S ARGS...: the harness's linear-CE timings.
peers() {
  [ "${PEERS:-1}" = 1 ] || return 0
  local t=$1; shift
  PYTHONUNBUFFERED=1 PYTHONPATH=${PEERS_PYTHONPATH:-.carry/liger:.carry/cce} timeout "$t" \
    python3 "$harness" lce "$@" 2>&1 | grep -v Warning
}
tj="timeout 300 ./gpu-bin/tilejit"
timeout 300 ./gpu-bin/tilejit-unit-tests --gtest_brief=1 --gtest_filter="${UNIT_FILTER:-*LinearCe*:*Dot*}" 2>&1 | tail -20 > "$out/unit-tests.log"
tail -3 "$out/unit-tests.log"
n=${LCE_N:-8192} d=${LCE_D:-4096} v=${LCE_V:-128256}
{
  $tj run fused_linear_ce --device=gpu --bt 512 --hidden 256 --vocab 32000 --dtype bf16 \
    --label-smoothing 0.1 --z-loss 1e-4 --softcap 30 --bias --class-weights --chunk-rows 128 --check
  $tj run fused_linear_ce --device=gpu --bt 512 --hidden 256 --vocab 32000 --dtype bf16 \
    --label-smoothing 0.1 --z-loss 1e-4 --softcap 30 --bias --class-weights --chunk-rows 128 \
    --narrow-logits=false --check
  # PEERS_BEFORE=1: torch.compile also before the variants (drift check).
  [ "${PEERS_BEFORE:-0}" = 1 ] &&
    peers 300 --n $n --hidden $d --vocab $v --providers torch_compile
  shape="--bt $n --hidden $d --vocab $v --dtype bf16 --iters 10"
  # One bench per line of LCE_VARIANTS (chunking, logits dtype, workspace).
  variants=${LCE_VARIANTS:-"--memory-budget-mib 512 --tune-chunk
--memory-budget-mib 512
--memory-budget-mib 512 --gemm-candidates 1
--memory-budget-mib 512 --cuda-graph
--memory-budget-mib 512 --gemm=tilejit
--memory-budget-mib 512 --tune-chunk --bf16-grad-accumulation
--memory-budget-mib 0"}
  while IFS= read -r variant; do
    [ -n "$variant" ] && $tj bench fused_linear_ce $shape $variant
  done <<<"$variants"
  peers 400 --n $n --hidden $d --vocab $v --providers ${PEER_PROVIDERS:-torch,torch_compile,liger,cce}
  # SWEEP="N:d:V ...": the default variant and torch.compile (and the
  # SWEEP_PROVIDERS) at each shape.
  for s in ${SWEEP:-}; do
    IFS=: read -r sn sd sv <<<"$s"
    $tj bench fused_linear_ce --bt $sn --hidden $sd --vocab $sv --dtype bf16 --iters 10 \
      --memory-budget-mib 512 --tune-chunk
    peers 300 --n $sn --hidden $sd --vocab $sv --providers ${SWEEP_PROVIDERS:-torch_compile}
  done
} 2>&1 | tee "$out/lce.log"
rm -rf "$TILEJIT_CACHE_DIR"
