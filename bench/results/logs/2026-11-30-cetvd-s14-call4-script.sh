#!/usr/bin/env bash
# Stop 14, final call: GPU unit tests, then the shape sweep at the new
# defaults (loss_grad KEEP=1 where it fits; f32 cluster forward by V with
# KEEP) with checks and the peers in the same session.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1 || { cat "$out/unpack.log"; exit 1; }
timeout 150 ./gpu-bin/tilejit-unit-tests --gtest_filter='*Gpu*' --gtest_brief=1 > "$out/unit.log" 2>&1
tail -3 "$out/unit.log"; grep -E "FAILED" -A3 "$out/unit.log" | head -20
IN_PLACE_TOO=1 PEERS_TIMEOUT=240 SHAPES="4096:151936:bf16 4096:128256:bf16 4096:32000:bf16 16384:151936:bf16 1024:151936:bf16 4096:151936:fp32 4096:32000:fp32" \
  bash scripts/gpu-cetvd-shapes.sh
