#!/usr/bin/env bash
# Runs ON the GPU machine from the repo root: the row losses (jsd,
# jsd_logits, kl_div, cross_entropy) and the compiler's row schedules, with
# the carried binaries (scripts/package-gpu.sh). PARTS (default "tune bench
# peers") picks what runs; logs go to $OUT (default ./out).
#   tune   `tilejit tune` of each loss at BT = 4096, V = 151936, bf16 (every
#          candidate's time, checked against the fp64 reference)
#   bench  `tilejit bench` + `run --check` of each of SCHEDULES at the main
#          shape (cross_entropy without weights, smoothing, z-loss, softcap)
#   peers  scripts/bench/row_losses.py: the PyTorch ops beside Liger-Kernel
#          (.peers/liger if carried), torch.compile and eager
set -uo pipefail
parts=${PARTS:-tune bench peers}
source scripts/gpu-env.sh
losses=${LOSSES:-jsd jsd_logits kl_div cross_entropy}
main="--size BT=4096 --size V=151936 --dtype bf16"
tj="timeout 280 ./gpu-bin/tilejit"
if has tune; then
  for k in $losses; do
    $tj tune "$k" $main --reps 10 ${TUNE_SET:-} 2>&1 | tee "$out/tune-$k.log"
  done
fi
# Schedules benched (and checked) for each loss: comma-separated --set's.
schedules=${SCHEDULES:-"KEEP_ROW=0 LOAD_AHEAD=1 LOAD_AHEAD=1,num_warps=4
  SPLIT_ROWS=2,LOAD_AHEAD=1 SPLIT_ROWS=4,LOAD_AHEAD=1
  SPLIT_ROWS=2,KEEP_ROW=1,LOAD_AHEAD=1 SPLIT_ROWS=4,KEEP_ROW=1,LOAD_AHEAD=1
  SPLIT_ROWS=8,KEEP_ROW=1,LOAD_AHEAD=1 SPLIT_ROWS=4,KEEP_ROW=1,LOAD_AHEAD=1,num_warps=16
  SPLIT_ROWS=8,KEEP_ROW=1,LOAD_AHEAD=1,num_warps=16 SPLIT_ROWS=4,KEEP_ROW=1"}
# The plain cross-entropy: no class weights, smoothing, z-loss or softcap.
plain_ce="--set=HAS_WEIGHT=0 --set=HAS_SOFTCAP=0 --set=label_smoothing=0 --set=lse_square_scale=0"
if has bench; then
  for k in $losses; do
    extra=""; [ "$k" = cross_entropy ] && extra=$plain_ce
    for sched in $schedules; do
      sets=""; for s in ${sched//,/ }; do sets="$sets --set=$s"; done
      echo "== $k $sched"
      $tj bench "$k" $main $extra $sets --iters 20 | grep -E " ms |error"
      $tj run "$k" --size BT=64 --size V=151936 --dtype bf16 $extra $sets \
        --check | grep -E "check:|error"
    done
  done 2>&1 | tee "$out/bench.log"
fi
if has peers; then
  timeout 500 python3 scripts/bench/row_losses.py ${PEER_ARGS:-} 2>&1 |
    grep -v Warning | tee "$out/row_losses.jsonl"
fi
