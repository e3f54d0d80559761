#!/usr/bin/env bash
# The simulator against what runs: predicted (mgt plan --gpu cpu) vs measured (mgt bench) step time of
# presets/bench_small.ini over the layout matrix. Each layout is predicted and measured REPS times
# in turn (default 3), so that both see the same state of the machine, and its line gives the
# medians and their ratio; then the median ratio, the largest deviation, and the layouts ordered by
# measured and by predicted step time. Usage: tests/bench_sim.sh [REPO] (STEPS=N timed steps of
# mgt bench, default 3; REPS=N; MGT=program). Wants a quiet machine: other work moves both figures.
cd "${1:-$(dirname "$0")/..}"
MGT=${MGT:-./mgt}
REPS=${REPS:-3}
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
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
table=""
for l in "${layouts[@]}"; do
  name=${l%%|*}; sets=""
  for s in ${l#*|}; do sets="$sets --set $s"; done
  preds=""; meas=""
  for ((r = 0; r < REPS; r++)); do
    preds="$preds $($MGT plan presets/bench_small.ini --gpu cpu $sets 2>&1 | awk '/^  step /{print $2}')"
    meas="$meas $($MGT bench presets/bench_small.ini --steps ${STEPS:-3} $sets 2>&1 | awk '/^train step:/{print $3}')"
  done
  p=$(echo $preds | median); m=$(echo $meas | median)
  line=$(awk -v n=$name -v p=$p -v m=$m 'BEGIN {printf "%-10s predicted %8.1f ms  measured %8.1f ms  ratio %.2f", n, p, m, (m > 0 ? p / m : 0)}')
  echo "$line   (measured:$meas; predicted:$preds)"
  table="$table$line"$'\n'
done
mr=$(echo "$table" | awk 'NF {print $NF}' | tr '\n' ' ' | median)
echo "$table" | awk -v mr=$mr 'NF { d = $NF - 1; if (d < 0) d = -d; if (d > worst) { worst = d; wn = $1 } }
  END { printf "median ratio %.2f (within 15%%: %s); largest deviation %.0f%% (%s; within 30%%: %s)\n", mr,
        (mr >= 0.85 && mr <= 1.15 ? "yes" : "no"), 100 * worst, wn, (worst <= 0.30 ? "yes" : "no") }'
echo "by measured step time:  $(echo "$table" | awk 'NF {print $6, $1}' | sort -g | awk '{printf "%s ", $2}')"
echo "by predicted step time: $(echo "$table" | awk 'NF {print $3, $1}' | sort -g | awk '{printf "%s ", $2}')"
# the order where it can be told: pairs of layouts whose measured times differ by more than 5% (the
# spread of repeated measurements here), and how many of them the prediction orders alike
echo "$table" | awk 'NF {n++; name[n] = $1; p[n] = $3; m[n] = $6}
  END { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) {
          d = m[i] > m[j] ? m[i] / m[j] : m[j] / m[i]; if (d < 1.05) continue; apart++
          if ((m[i] < m[j]) == (p[i] < p[j])) alike++; else wrong = wrong " " name[i] "/" name[j] }
        printf "pairs measured more than 5%% apart: %d, ordered alike by the prediction: %d%s\n", apart, alike, (wrong ? " (not:" wrong ")" : "") }'
