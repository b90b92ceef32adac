#!/usr/bin/env bash
# Stop 18, call 2: FAST_LOG2 0/1 in f16 and fp32 against stop 17's binary;
# the tuner on the new kernels at the main shape (bf16, both kernels).
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh .carry/s17-bin.tar.xz > "$out/unpack.log" 2>&1 && mv gpu-bin s17-bin
bash scripts/gpu-unpack.sh >> "$out/unpack.log" 2>&1
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
b() { local bin=$1; shift; echo "## $bin $*"; timeout 40 ./$bin/tilejit bench fused_ce_tvd "$@" 2>&1 | grep -E "copy ceiling|  forward  |loss \+ grad|PASS|FAIL|rror"; }
{
for dt in fp16 fp32; do
  S="--bt 4096 --vocab 151936 --dtype $dt"
  b gpu-bin $S --reduction=mean --check --check-rows 8
  b gpu-bin $S --forward=cluster --check --check-rows 8
  for i in 1 2; do
    b s17-bin $S --reduction=mean
    b gpu-bin $S --reduction=mean --set FAST_LOG2=0
    b gpu-bin $S --reduction=mean --set FAST_LOG2=1
    b s17-bin $S --forward=cluster
    b gpu-bin $S --forward=cluster --set FAST_LOG2=0
    b gpu-bin $S --forward=cluster --set FAST_LOG2=1
  done
done
} 2>&1 | tee "$out/ab.log"
S="--bt 4096 --vocab 151936 --dtype bf16"
{
echo "## tune reduced"; timeout 170 ./gpu-bin/tilejit tune fused_ce_tvd $S --reduction=mean --retune 2>&1 | tail -25
echo "## tune forward"; timeout 170 ./gpu-bin/tilejit tune fused_ce_tvd $S --forward=cluster --retune 2>&1 | tail -25
} > "$out/tune.log" 2>&1
tail -60 "$out/tune.log"
rm -rf "$TILEJIT_CACHE_DIR"
