#!/usr/bin/env bash
# Runs ON the GPU machine from the repo root (see docs/static-build.md): the
# CE+TVD kernels that hold each row on chip (thread-block clusters), checked
# against the fp64 reference and timed beside the peers in one session:
#   GPU unit tests of the CE+TVD ops; run --check of the cluster forward and
#   of the reduced loss + gradient (separate and in place); tune both; runs
#   with the tuned configs; peers (torch.compile, Liger's fused CE+TVD from
#   .carry/liger when present) via .carry/peers.py. Logs go to $OUT.
#   SHAPES="BT:V:dtype ..." sets the shapes (default: the issue's set below);
#   TUNE=0 skips the tuning (runs use stored or default configs);
#   RUN_UNIT=0 skips the GPU unit tests.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
export TILEJIT_CACHE_DIR=/tmp/tilejit-cache-$$
tj="timeout 300 ./gpu-bin/tilejit"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } 2>&1 | tee "$out/env.log"
[ "${RUN_UNIT:-1}" = 1 ] && timeout 300 ./gpu-bin/tilejit-unit-tests --gtest_brief=1 --gtest_filter='*CeTvd*:*Cluster*' 2>&1 | tail -20 > "$out/unit-tests.log"
[ -f "$out/unit-tests.log" ] && tail -3 "$out/unit-tests.log"
for s in ${SHAPES:-4096:151936:bf16 1024:151936:bf16 16384:151936:bf16 4096:128256:bf16 4096:32000:bf16 4096:151936:fp32}; do
  IFS=: read -r bt v dt <<<"$s"
  shape="--bt $bt --vocab $v --dtype $dt"
  {
    echo "## $shape"
    [ "${TUNE:-1}" = 1 ] && $tj tune fused_ce_tvd $shape --reduction=mean 2>&1
    $tj run fused_ce_tvd --device=gpu $shape --reduction=mean --check --check-rows 32
    $tj run fused_ce_tvd --device=gpu $shape --reduction=mean --in-place --check --check-rows 32
    [ "${TUNE:-1}" = 1 ] && $tj tune fused_ce_tvd $shape --forward=cluster 2>/dev/null
    $tj run fused_ce_tvd --device=gpu $shape --forward=cluster --check --check-rows 32
    if [ -f .carry/peers.py ]; then
      PYTHONUNBUFFERED=1 PYTHONPATH=.carry/liger timeout 300 python3 .carry/peers.py cetvd \
        $shape --providers torch_compile,liger 2>&1 | grep -v Warning
    fi
  } 2>&1 | tee "$out/cluster-$bt-$v-$dt.log"
done
[ -f .carry/peers.py ] && PYTHONUNBUFFERED=1 python3 .carry/peers.py ceilings 2>&1 | tee "$out/ceilings.log"
rm -rf "$TILEJIT_CACHE_DIR"
