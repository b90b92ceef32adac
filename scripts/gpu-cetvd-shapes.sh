#!/usr/bin/env bash
# Runs ON the GPU machine from the repo root (see docs/static-build.md): a
# CE+TVD shape sweep, tilejit and its peers on the same GPU in one run.
#   Per shape: `tilejit bench fused_ce_tvd --check` for the unreduced API
#   (forward, backward) and the reduced one (loss + gradient, separate
#   buffer; IN_PLACE_TOO=1 adds the in-place run; LOSS_GRAD_KERNELS names
#   its kernels, default fused_ce_tvd_loss_grad, or ce_tvd_loss_grad too),
#   each checked against the fp64 reference on sampled rows; then scripts/bench/cetvd_peers.py times
#   torch.compile and Liger's fused CE+TVD at the same shapes.
#   DTYPES, VOCABS and BTS pick the shapes (default: bf16, fp32 x V 32000,
#   128256, 151936 x BT 1024, 4096, 16384); SHAPES="BT:V:dtype ..." replaces
#   that list.
#   The peers' harness is not part of this repository: PEERS_HARNESS names
#   it (default .carry/peers.py), PEERS_PYTHONPATH where it finds Liger
#   (default .carry/liger). Without it, or with PEERS=0, no peers run.
#   Logs go to $OUT (default ./out): tilejit.log and peers.jsonl, which
#   scripts/bench/cetvd_table.py tabulates.
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
export TILEJIT_CACHE_DIR=/tmp/tilejit-cache-$$
tj="timeout 240 ./gpu-bin/tilejit"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } > "$out/env.log" 2>&1
read -ra shapes <<<"${SHAPES:-}"
if [ ${#shapes[@]} = 0 ]; then
  for dt in ${DTYPES:-bf16 fp32}; do
    for v in ${VOCABS:-32000 128256 151936}; do
      for bt in ${BTS:-1024 4096 16384}; do shapes+=("$bt:$v:$dt"); done
    done
  done
fi
failed=0
for s in "${shapes[@]}"; do
  IFS=: read -r bt v dt <<<"$s"
  shape="--bt $bt --vocab $v --dtype $dt"
  {
    echo "## $s"
    $tj bench fused_ce_tvd $shape --check || echo "CHECK-FAILED unreduced $s"
    for lg in ${LOSS_GRAD_KERNELS:-fused_ce_tvd_loss_grad}; do
      echo "reduced by $lg"
      $tj bench fused_ce_tvd $shape --reduction=mean --loss-grad-kernel=$lg \
        --check || echo "CHECK-FAILED reduced $lg $s"
      if [ "${IN_PLACE_TOO:-0}" = 1 ]; then
        echo "reduced in place by $lg"
        $tj bench fused_ce_tvd $shape --reduction=mean --in-place \
          --loss-grad-kernel=$lg --check ||
          echo "CHECK-FAILED reduced-in-place $lg $s"
      fi
    done
  } > "$out/shape.log" 2>&1
  cat "$out/shape.log" >> "$out/tilejit.log"
  grep -E "^reduced|^  (forward|backward|fwd\+bwd|loss \+ grad) |PASS|FAIL" "$out/shape.log" |
    sed "s/^/$s /"
  grep -q "CHECK-FAILED" "$out/shape.log" && failed=1
done
rm -f "$out/shape.log"
harness=${PEERS_HARNESS:-.carry/peers.py}
if [ "${PEERS:-1}" = 1 ] && [ ! -f "$harness" ]; then
  echo "gpu-cetvd-shapes: no peers harness at $harness (set PEERS_HARNESS): peers skipped" >&2
elif [ "${PEERS:-1}" = 1 ]; then
  PYTHONUNBUFFERED=1 PYTHONPATH=${PEERS_PYTHONPATH:-.carry/liger} timeout "${PEERS_TIMEOUT:-400}" \
    python3 scripts/bench/cetvd_peers.py --harness "$harness" --providers torch_compile,liger \
    "${shapes[@]}" 2>"$out/peers.err" | tee "$out/peers.jsonl"
fi
rm -rf "$TILEJIT_CACHE_DIR"
exit $failed
