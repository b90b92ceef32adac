#!/usr/bin/env bash
# Stop 19, call 7: the shape sweep with the peers (torch.compile, Liger's
# fused CE+TVD from PR #1384, fef6376) at the final kernels (acfe611).
set -uo pipefail
PEERS_TIMEOUT=150 SHAPES="4096:151936:bf16 4096:128256:bf16 4096:32000:bf16 1024:151936:bf16 16384:151936:bf16 4096:151936:fp32 4096:32000:fp32" \
  bash scripts/gpu-cetvd-shapes.sh
