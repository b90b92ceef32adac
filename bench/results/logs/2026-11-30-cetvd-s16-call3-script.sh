#!/usr/bin/env bash
# Stop 16, call 3: maxnreg 48 (5 programs of 8 warps per SM) x COPY_AHEAD at
# the main shape, then the best guesses at the other bf16 shapes.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
b() { echo "## $*"; timeout 40 ./gpu-bin/tilejit bench fused_ce_tvd "$@" 2>&1 | grep -E "  forward  |loss \+ grad|PASS|FAIL|rror"; }
{
S="--bt 4096 --vocab 151936 --dtype bf16"
for mode in "--reduction=mean" "--forward=cluster"; do
  b $S $mode
  for a in 0 1 2 3; do b $S $mode --set maxnreg=48 --set COPY_AHEAD=$a --check --check-rows 8; done
done
for s in 4096:128256 4096:32000 16384:151936 1024:151936; do
  IFS=: read -r bt v <<<"$s"; S="--bt $bt --vocab $v --dtype bf16"
  for mode in "--reduction=mean" "--forward=cluster"; do
    b $S $mode
    b $S $mode --set maxnreg=48 --set COPY_AHEAD=1
    b $S $mode --set maxnreg=48 --set COPY_AHEAD=2 --check --check-rows 8
  done
done
S="--bt 4096 --vocab 151936 --dtype bf16"
b $S --reduction=mean --set maxnreg=48 --set COPY_AHEAD=2 --in-place --check --check-rows 8
b $S --reduction=mean --set maxnreg=48 --set COPY_AHEAD=2 --set UNROLL=1
b $S --reduction=mean
} 2>&1 | tee "$out/ab.log"
rm -rf "$TILEJIT_CACHE_DIR"
