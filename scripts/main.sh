#!/usr/bin/env bash
# The main job: install + build, compile the CE+TVD kernels to PTX, then run
# them with --check on the GPU when there is one, otherwise on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${TILEJIT_SKIP_SETUP:-0}" = 1 ] || scripts/setup.sh
bin=${TILEJIT_BIN:-build/tools/tilejit}
mkdir -p out
for k in fused_ce_tvd_fwd fused_ce_tvd_bwd; do
  "$bin" compile "$k" --dtype bf16 --emit=ptx -o "out/$k.ptx"
done
echo "PTX of the CE+TVD kernels: $(realpath out)/fused_ce_tvd_{fwd,bwd}.ptx"
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  "$bin" run fused_ce_tvd --device=gpu --bt 4096 --vocab 151936 --dtype bf16 --check
else
  echo "no GPU here: running on the CPU interpreter at a small shape"
  "$bin" run fused_ce_tvd --device=cpu --bt 64 --vocab 32000 --dtype bf16 --check
fi
