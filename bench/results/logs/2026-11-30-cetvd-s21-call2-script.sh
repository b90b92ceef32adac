#!/usr/bin/env bash
# Stop 21, call 2: the persistent forward's grid: the clusters the occupancy
# API gives, against fixed counts (TILEJIT_PERSISTENT_CLUSTERS).
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh > "$out/unpack.log" 2>&1
export TILEJIT_CACHE_DIR=/tmp/tjc-s21
bench() {
  echo "## $*"
  timeout 60 ./gpu-bin/tilejit bench fused_ce_tvd "$@" 2>&1 |
    grep -E "  forward  |grid|run at once|PASS|FAIL|rror"
}
{
S="--bt 4096 --vocab 151936 --dtype bf16 --forward=cluster"
bench $S
bench $S --set PERSISTENT=1
for n in 8 16 33 48 64 72 76 80 82 84 96 160; do
  echo "# TILEJIT_PERSISTENT_CLUSTERS=$n"
  TILEJIT_PERSISTENT_CLUSTERS=$n bench $S --set PERSISTENT=1
done
bench $S
} 2>&1 | tee "$out/ab.log"
