#!/usr/bin/env bash
# The simulator against what runs: predicted (mgt plan --gpu cpu) vs measured (mgt bench) step time of
# presets/bench_small.ini over the layout matrix, one line per layout with the ratio. Usage:
# tests/bench_sim.sh [REPO] (STEPS=N timed steps, MGT=program). Needs a quiet machine: the CPU
# device is measured when each `mgt plan` starts, and a loaded machine moves both figures.
cd "${1:-$(dirname "$0")/..}"
MGT=${MGT:-./mgt}
layouts=(
 "1rank|train.micro_batch=4"
 "accum4|train.micro_batch=1"
 "dp2|parallel.dp=2 train.micro_batch=2"
 "tp2|parallel.tp=2"
 "pp2-1f1b|parallel.pp=2 train.micro_batch=2 parallel.pp_schedule=1f1b"
 "pp2-gpipe|parallel.pp=2 train.micro_batch=2 parallel.pp_schedule=gpipe"
 "dp2-zero1|parallel.dp=2 train.micro_batch=2 parallel.zero=1"
 "dp2-zero2|parallel.dp=2 train.micro_batch=2 parallel.zero=2"
 "dp2-zero3|parallel.dp=2 train.micro_batch=2 parallel.zero=3"
)
for l in "${layouts[@]}"; do
  name=${l%%|*}; sets=""
  for s in ${l#*|}; do sets="$sets --set $s"; done
  meas=$($MGT bench presets/bench_small.ini --steps ${STEPS:-3} $sets 2>&1 | awk '/^train step:/{print $3}')
  pred=$($MGT plan presets/bench_small.ini --gpu cpu $sets 2>&1 | awk '/^  step /{print $2}')
  echo "$name $pred $meas" | awk '{printf "%-10s predicted %8.1f ms  measured %8.1f ms  ratio %.2f\n", $1, $2, $3, ($3>0? $2/$3 : 0)}'
done
