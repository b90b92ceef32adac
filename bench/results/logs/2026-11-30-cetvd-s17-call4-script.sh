#!/usr/bin/env bash
# Stop 17, call 4: PREFETCH_L2 (pass 1 asks for its inputs of a later step
# into L2 with cp.async.bulk.prefetch), reduced and forward, against stop 16's
# binary; checks at the new settings.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh .carry/s16-bin.tar.xz > "$out/unpack.log" 2>&1 && mv gpu-bin s16-bin
bash scripts/gpu-unpack.sh >> "$out/unpack.log" 2>&1
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
b() { local bin=$1; shift; echo "## $bin $*"; timeout 40 ./$bin/tilejit bench fused_ce_tvd "$@" 2>&1 | grep -E "  forward  |loss \+ grad|PASS|FAIL|rror"; }
S="--bt 4096 --vocab 151936 --dtype bf16"
{
b gpu-bin $S --reduction=mean --set PREFETCH_L2=1 --check --check-rows 8
b gpu-bin $S --forward=cluster --set PREFETCH_L2=1 --check --check-rows 8
for i in 1 2; do
  b s16-bin $S --reduction=mean
  for p in 0 1 2; do b gpu-bin $S --reduction=mean --set PREFETCH_L2=$p; done
done
for i in 1 2; do
  b s16-bin $S --forward=cluster
  for p in 0 1 2; do b gpu-bin $S --forward=cluster --set PREFETCH_L2=$p; done
done
b gpu-bin $S --reduction=mean --set PREFETCH_L2=1 --set COPY_AHEAD=2
b gpu-bin $S --forward=cluster --set PREFETCH_L2=1 --set COPY_AHEAD=1
b gpu-bin $S --forward=cluster --set PREFETCH_L2=1 --set UNROLL=1
b gpu-bin --bt 4096 --vocab 151936 --dtype fp32 --reduction=mean --set PREFETCH_L2=0
b gpu-bin --bt 4096 --vocab 151936 --dtype fp32 --reduction=mean --set PREFETCH_L2=1
b gpu-bin --bt 4096 --vocab 32000 --dtype bf16 --reduction=mean --set PREFETCH_L2=0
b gpu-bin --bt 4096 --vocab 32000 --dtype bf16 --reduction=mean --set PREFETCH_L2=1
} 2>&1 | tee "$out/ab.log"
rm -rf "$TILEJIT_CACHE_DIR"
