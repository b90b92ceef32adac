#!/usr/bin/env bash
# Stop 19, call 5: the forward's last cluster combine to the first program
# only (tile.cluster_reduce `first`), against call 1's binary (s19a);
# GPU unit tests.
set -uo pipefail
export OUT=${OUT:-gpu-out}
BASE=.carry/s19a-bin.tar.xz UNIT=1 REPEAT=3 RUNS="--forward=cluster|--reduction=mean" \
  bash scripts/gpu-cetvd-ab.sh
