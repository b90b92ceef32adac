#!/usr/bin/env bash
# Stop 17, final call: GPU unit tests at the new defaults (bf16 pass 1 in the
# scaled form; PREFETCH_L2 1 in the reduced kernel, 2 in the forward); stop
# 16's binary against them at the main shape; the in-place run; then the
# shape sweep with checks and the peers.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh .carry/s16-bin.tar.xz > "$out/unpack-s16.log" 2>&1 && mv gpu-bin s16-bin
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
timeout 130 ./gpu-bin/tilejit-unit-tests --gtest_filter='*Gpu*:Cluster*:MinMax*-*EveryConfig*' --gtest_brief=1 > "$out/unit.log" 2>&1
tail -3 "$out/unit.log"; grep -E "FAILED|Failure" -A3 "$out/unit.log" | head -30
S="--bt 4096 --vocab 151936 --dtype bf16"
{
for i in 1 2; do for b in s16-bin gpu-bin; do
  echo "## $b reduced"; timeout 60 ./$b/tilejit bench fused_ce_tvd $S --reduction=mean 2>&1 | grep -E "copy ceiling|loss \+ grad|rror"
  echo "## $b forward"; timeout 60 ./$b/tilejit bench fused_ce_tvd $S --forward=cluster 2>&1 | grep -E "  forward  |rror"
done; done
echo "## gpu-bin reduced in place"; timeout 60 ./gpu-bin/tilejit bench fused_ce_tvd $S --reduction=mean --in-place --check 2>&1 | grep -E "loss \+ grad|PASS|FAIL|rror"
} 2>&1 | tee "$out/ab.log"
rm -rf "$TILEJIT_CACHE_DIR"
PEERS_TIMEOUT=160 SHAPES="4096:151936:bf16 4096:128256:bf16 4096:32000:bf16 16384:151936:bf16 1024:151936:bf16 4096:151936:fp32 4096:32000:fp32" \
  bash scripts/gpu-cetvd-shapes.sh
