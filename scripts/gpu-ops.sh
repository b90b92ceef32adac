#!/usr/bin/env bash
# Runs ON the GPU machine from the repo root (see docs/static-build.md): the
# losses through the device API (tilejit/ops/) at their main shapes. The GPU
# tests of the ops (a caller's stream, strided rows, CUDA graph replay, the
# tuned-config lookup), then `bench` of each op checked against the fp64
# reference (CE+TVD: sampled rows at 4096 x 151936; linear CE: every feature
# at 1024 x 1024 x 32000, then timed at 8192 x 4096 x 128256), and the JSD
# spec run, tuned and benched from the CLI; cold and warm compile times of
# single kernels (one process each) on this machine's host. Logs go to $OUT
# (default ./out). PARTS (default "tests bench compile") picks what runs.
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
export TILEJIT_CACHE_DIR=/tmp/tilejit-cache-$$
if [ -z "${TILEJIT_CUBLASLT:-}" ]; then
  site=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
  TILEJIT_CUBLASLT=$(find $site /usr/local/cuda* -name 'libcublasLt.so.1[23]' 2>/dev/null | head -1)
  export TILEJIT_CUBLASLT
fi
tj="timeout 300 ./gpu-bin/tilejit"
parts=${PARTS:-tests bench compile}
has() { [[ " $parts " == *" $1 "* ]]; }
if has tests; then
  timeout 420 ./gpu-bin/tilejit-unit-tests --gtest_brief=1 \
    --gtest_filter="${UNIT_FILTER:-*Gpu*}" 2>&1 |
    grep -vE 'cuModuleUnload failed' > "$out/unit-tests.log"
  tail -3 "$out/unit-tests.log"
  LD_LIBRARY_PATH=gpu-bin timeout 120 ./gpu-bin/tilejit-capi-tests --gtest_brief=1 2>&1 |
    tail -5 | tee "$out/capi-tests.log"
fi
cetvd="--bt 4096 --vocab 151936 --dtype bf16 --check"
lce="--hidden 1024 --vocab 32000 --dtype bf16 --label-smoothing 0.1 --z-loss 1e-4
  --softcap 30 --bias --class-weights"
has bench && {
  $tj bench fused_ce_tvd $cetvd
  $tj bench fused_ce_tvd $cetvd --reduction=mean
  $tj bench fused_ce_tvd $cetvd --reduction=mean --in-place
  $tj run fused_linear_ce --device=gpu --bt 1024 $lce --chunk-rows 384 --check
  $tj bench fused_linear_ce --bt 8192 --hidden 4096 --vocab 128256 --dtype bf16 \
    --iters 10 --memory-budget-mib 512
  $tj run fused_linear_ce --device=gpu --bt 8192 --hidden 4096 --vocab 128256 \
    --dtype bf16 --iters 10 --memory-budget-mib 512 --label-smoothing 0.1 \
    --z-loss 1e-4 --softcap 30 --bias --class-weights --reduction=sum \
    --check --check-rows 16
  jsd="--size BT=4096 --size V=151936 --dtype bf16"
  $tj run jsd $jsd
  $tj tune jsd $jsd
  $tj bench jsd $jsd --iters 20
} 2>&1 | tee "$out/ops.log"
# Compile times: cold (an empty cache), then warm (the filled one), in ms.
has compile || exit 0
ms() { local t0=$(date +%s%N); "$@" >/dev/null 2>&1; echo $(( ($(date +%s%N) - t0) / 1000000 )); }
{
  echo "process start (tilejit --version): $(ms ./gpu-bin/tilejit --version) ms"
  for kd in ce_tvd_row_weights:fp32 fused_ce_tvd_fwd:bf16 fused_ce_tvd_loss_grad:bf16 jsd:bf16; do
    k=${kd%:*} c="./gpu-bin/tilejit compile ${kd%:*} --dtype ${kd#*:} --vocab 151936 --emit=ptx"
    $c >/dev/null || { echo "$k: compile failed"; continue; }
    for run in 1 2 3; do
      dir=$(mktemp -d)
      cold=$(TILEJIT_CACHE_DIR=$dir ms $c)
      warm=$(TILEJIT_CACHE_DIR=$dir ms $c)
      echo "$k: cold $cold ms, warm $warm ms"
      rm -rf "$dir"
    done
  done
} 2>&1 | tee "$out/compile-times.log"
rm -rf "$TILEJIT_CACHE_DIR"
