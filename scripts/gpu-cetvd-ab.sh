#!/usr/bin/env bash
# Run ON the GPU machine, from the repo root: times this checkout's CE+TVD
# kernels (.carry/tilejit-bin.tar.xz) against a baseline build. Each bench
# is one process; the two builds take turns (which goes first alternates
# from one repeat to the next), after a --check run of the new one;
# optionally the GPU unit tests first.
#
#   BASE=.carry/base-bin.tar.xz bash scripts/gpu-cetvd-ab.sh
#
# Environment:
#   BASE    the baseline archive (scripts/package-gpu.sh of another commit);
#           without it only the new binary runs
#   SHAPES  space-separated BT:V:dtype list (default "4096:151936:bf16")
#   RUNS    '|'-separated bench options (default
#           "--reduction=mean|--reduction=mean --in-place|--forward=cluster")
#   REPEAT  alternating timings per shape and run (default 2)
#   UNIT    1: the GPU unit tests first (default 0)
#   CHECK   0: no --check run before the timings (default 1)
# Logs: $OUT (default ./gpu-out)/ab.log (the bench lines), unit.log and
# unpack.log. Both builds share a fresh kernel cache (its keys include the
# source's hash), removed at the end.
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
SHAPES=${SHAPES:-4096:151936:bf16}
RUNS=${RUNS:---reduction=mean|--reduction=mean --in-place|--forward=cluster}
REPEAT=${REPEAT:-2}
bins=(gpu-bin)
if [ -n "${BASE:-}" ]; then
  bash scripts/gpu-unpack.sh "$BASE" >"$out/unpack.log" 2>&1 || {
    echo "gpu-cetvd-ab: unpacking $BASE failed, see $out/unpack.log" >&2
    exit 1
  }
  rm -rf base-bin && mv gpu-bin base-bin && bins=(base-bin gpu-bin)
fi
bash scripts/gpu-unpack.sh >>"$out/unpack.log" 2>&1 || {
  echo "gpu-cetvd-ab: unpacking failed, see $out/unpack.log" >&2
  exit 1
}
export TILEJIT_CACHE_DIR=/tmp/tjc-$$
trap 'rm -rf "$TILEJIT_CACHE_DIR"' EXIT

if [ "${UNIT:-0}" = 1 ]; then
  timeout 150 ./gpu-bin/tilejit-unit-tests \
    --gtest_filter='*Gpu*:Cluster*:MinMax*-*EveryConfig*' --gtest_brief=1 \
    >"$out/unit.log" 2>&1
  echo "unit tests rc=$?"
  tail -3 "$out/unit.log"
  grep -E "FAILED|Failure" -A3 "$out/unit.log" | head -30
fi

bench() {
  local bin=$1
  shift
  echo "## $bin $*"
  timeout 60 "./$bin/tilejit" bench fused_ce_tvd "$@" 2>&1 |
    grep -E "copy ceiling|  forward  |  backward  |loss \+ grad|PASS|FAIL|rror"
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || echo "  exit status $rc (124: timed out)"
}
IFS='|' read -ra runs <<<"$RUNS"
{
  for shape in $SHAPES; do
    IFS=: read -r bt v dt <<<"$shape"
    s=(--bt "$bt" --vocab "$v" --dtype "$dt")
    for run in "${runs[@]}"; do
      # shellcheck disable=SC2086 # a run is a list of options
      [ "${CHECK:-1}" = 0 ] ||
        bench gpu-bin "${s[@]}" $run --check --check-rows 8
      for i in $(seq "$REPEAT"); do
        order=("${bins[@]}") # rotated every other repeat
        [ $((i % 2)) = 1 ] || order=("${bins[@]:1}" "${bins[0]}")
        for bin in "${order[@]}"; do
          # shellcheck disable=SC2086
          bench "$bin" "${s[@]}" $run
        done
      done
    done
  done
} 2>&1 | tee "$out/ab.log"
