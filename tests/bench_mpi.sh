#!/usr/bin/env bash
# Throughput of several processes against one (issue 17), measured in one run: `mgt bench` of a
# preset at dp 2 with both ranks as threads of one process, then the same 2 ranks as 2 processes
# under `mpirun -np 2` (one rank each), alternately ROUNDS times, each with the same threads in all
# (one per rank), so the difference is what the processes cost: MPI between them instead of
# memory shared by threads. Prints each round's tokens/s and the medians.
# Usage: tests/bench_mpi.sh [PRESET (presets/bench_small.ini)] [ROUNDS (3)] [STEPS (3)]; needs
# mpirun and `ninja mgt mpi`. Not part of the suite: minutes on a busy 2-core machine.
set -u
cd "$(dirname "$0")/.."
preset=${1:-presets/bench_small.ini} rounds=${2:-3} steps=${3:-3}
command -v mpirun >/dev/null || { echo "SKIP: no mpirun (./setup.sh installs Open MPI)"; exit 77; }
[ -x ./mgt ] && [ -s build/libmgt_mpi.so ] || { echo "FAIL: run \`ninja mgt mpi\` first"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none MGT_MPI_LIBRARY=$PWD/build/libmgt_mpi.so
sets=(--steps "$steps" --set parallel.dp=2 --set train.global_batch=8 --set train.micro_batch=4)
tok() { awk '/^train step:/ { for (i = 1; i < NF; i++) if ($(i + 1) == "tokens/s,") print $i }'; }
one=() two=()
for r in $(seq "$rounds"); do
  a=$(./mgt bench "$preset" "${sets[@]}" --set parallel.threads=2 2>&1 | tok)
  b=$(mpirun -np 2 ./mgt bench "$preset" "${sets[@]}" --set parallel.threads=1 2>&1 | tok)
  echo "round $r: 1 process x 2 rank threads ${a:-n/a} tokens/s; mpirun -np 2 x 1 rank ${b:-n/a} tokens/s (measured)"
  one+=("${a:-0}") two+=("${b:-0}")
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
m1=$(median "${one[@]}") m2=$(median "${two[@]}")
echo "$preset, dp 2, $steps timed steps, medians of $rounds rounds (measured): one process $m1 tokens/s, 2 processes $m2 tokens/s," \
  "ratio $(awk -v a="$m2" -v b="$m1" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')"
