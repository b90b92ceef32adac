#!/usr/bin/env bash
# Stop 17, call 3: mbarrier wait at CTA scope with a sleep hint (no L1
# invalidation in the spin loop) and teacher-first loads, each switched by an
# experiment variable, against stop 16's binary; reduced and forward.
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
bash scripts/gpu-unpack.sh .carry/s16-bin.tar.xz > "$out/unpack.log" 2>&1 && mv gpu-bin s16-bin
bash scripts/gpu-unpack.sh >> "$out/unpack.log" 2>&1
b() { local bin=$1; shift; echo "## $bin ${EXP:-} $*"; TILEJIT_CACHE_DIR=/tmp/tjc-$RANDOM env $EXP ./$bin/tilejit bench fused_ce_tvd "$@" 2>&1 | grep -E "  forward  |loss \+ grad|PASS|FAIL|rror"; }
S="--bt 4096 --vocab 151936 --dtype bf16"
{
EXP="TJ_EXP_X=1" b gpu-bin $S --reduction=mean --check --check-rows 8
EXP="TJ_EXP_X=1" b gpu-bin $S --forward=cluster --check --check-rows 8
for i in 1 2; do
  EXP="TJ_EXP_X=1" b s16-bin $S --reduction=mean
  EXP="TJ_EXP_X=1" b gpu-bin $S --reduction=mean
  EXP="TJ_EXP_TF=0" b gpu-bin $S --reduction=mean
  EXP="TJ_EXP_WAIT=cluster" b gpu-bin $S --reduction=mean
  EXP="TJ_EXP_TF=0 TJ_EXP_WAIT=cluster" b gpu-bin $S --reduction=mean
done
for i in 1 2; do
  EXP="TJ_EXP_X=1" b s16-bin $S --forward=cluster
  EXP="TJ_EXP_X=1" b gpu-bin $S --forward=cluster
  EXP="TJ_EXP_WAIT=cluster" b gpu-bin $S --forward=cluster
done
EXP="TJ_EXP_X=1" b gpu-bin $S --forward=cluster --set COPY_AHEAD=1
} 2>&1 | tee "$out/ab.log"
TILEJIT_CACHE_DIR=/tmp/tjc-t timeout 200 ./gpu-bin/tilejit-unit-tests --gtest_filter='*Gpu*:Cluster*-*EveryConfig*' --gtest_brief=1 > "$out/tests.log" 2>&1; echo "tests rc=$?"; tail -3 "$out/tests.log"
