#!/usr/bin/env bash
# Stop 21, call 3: the persistent forward with more clusters than run at
# once (TILEJIT_PERSISTENT_CLUSTERS up to BT: one row per cluster), to tell
# its code from its static row assignment.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1
export TILEJIT_CACHE_DIR=/tmp/tjc-s21
bench() {
  echo "## $*"
  timeout 60 ./gpu-bin/tilejit bench fused_ce_tvd "$@" 2>&1 |
    grep -E "  forward  |grid|PASS|FAIL|rror"
}
{
S="--bt 4096 --vocab 151936 --dtype bf16 --forward=cluster"
for r in 1 2; do
bench $S
for n in 4096 2048 1024 616 308 231 154; do
  echo "# TILEJIT_PERSISTENT_CLUSTERS=$n"
  TILEJIT_PERSISTENT_CLUSTERS=$n bench $S --set PERSISTENT=1
done
done
} 2>&1 | tee "$out/ab.log"
