#!/usr/bin/env bash
# Stop 19, call 3: pass 1's two cluster rounds (max, then sums) as one
# tile.cluster_gather, against call 1's binary (s19a: max form only);
# GPU unit tests (with the gather's).
set -uo pipefail
export OUT=${OUT:-gpu-out}
BASE=.carry/s19a-bin.tar.xz UNIT=1 REPEAT=3 RUNS="--forward=cluster|--reduction=mean|--reduction=mean --in-place" \
  bash scripts/gpu-cetvd-ab.sh
