#!/usr/bin/env bash
# Several processes under mpirun (issue 17): each layout trained by 2 and 4 processes (each holding
# a block of the ranks as threads) gives the losses, gradient norms, validation losses and
# communication counts of the same layout in one process, bit for bit as metrics.jsonl prints them;
# also over TCP only (--mca btl tcp,self); GPU ranks across processes on the CUDA backend built with
# the checking fakes (NCCL's world joined by 2 processes) as one process; checkpoints the same as one process's, resumed across process
# counts; the sanitized programs; a stalled process; only process 0 writes metrics and holds the folder; a world
# that the processes cannot share evenly is refused. Skips without mpirun or mpicc.
set -u
cd "$(dirname "$0")/.."
if ! command -v mpirun >/dev/null || ! command -v mpicc >/dev/null; then
  echo "SKIP: no mpirun or mpicc (Debian: apt-get install openmpi-bin libopenmpi-dev; ./setup.sh installs them)"
  exit 77
fi
ninja -j1 mgt build/libmgt_mpi.so build/mpi_comm_check build/asan/mpi_comm_check build/tsan/mpi_comm_check build/asan/mgt build/tsan/mgt build/libmgt_cuda_fake.so >/dev/null ||
  { echo "FAIL: cannot build mgt, build/libmgt_mpi.so and build/mpi_comm_check"; exit 1; }
[ -s build/testdata/tiny_train.bin ] || { echo "FAIL: build/testdata/tiny_train.bin missing (tests/run.sh makes it)"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none # containers forbid the cross-process copy (CMA)
export MGT_MPI_LIBRARY=$PWD/build/libmgt_mpi.so # the sanitized checks live in build/asan, build/tsan
mgt=$PWD/mgt
root=$PWD
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp tests/presets/tiny.ini "$tmp/"
cp build/testdata/tiny_train.bin "$tmp/tk_train.bin"
cp build/testdata/tiny_val.bin "$tmp/tk_val.bin"
cd "$tmp"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# the communicator alone: every collective, dtype and kind of group against one process, bit for bit;
# under ASan+UBSan (Open MPI's plugins leak at exit and are unloaded, so LeakSanitizer cannot name
# them: leaks are not checked) and TSan (Open MPI is not instrumented: tests/mpi_tsan.supp)
comm_check() { # label, mpirun options..., program
  local label=$1; shift
  if timeout 120 mpirun "$@" > comm.log 2>&1 && [ "$(grep -c '^ok ' comm.log)" -ge 2 ] && ! grep -q 'Sanitizer\|runtime error' comm.log; then
    echo "ok  communicator, $label: $(grep -c '^ok ' comm.log) processes identical to one process"
  else fail "communicator, $label"; grep -v '^ok ' comm.log | head -20; fi
}
comm_check "2 processes" -np 2 "$root/build/mpi_comm_check"
comm_check "4 processes over TCP" -np 4 --oversubscribe --mca btl tcp,self "$root/build/mpi_comm_check"
comm_check "2 processes, ASan+UBSan" -np 2 -x ASAN_OPTIONS=detect_leaks=0 "$root/build/asan/mpi_comm_check"
comm_check "2 processes, TSan" -np 2 -x TSAN_OPTIONS="halt_on_error=1 suppressions=$root/tests/mpi_tsan.supp" "$root/build/tsan/mpi_comm_check"

# what must be equal: losses, norms, validation, and every rank's calls and bytes per collective
summary() { sed -e 's/"\(elapsed_s\|tokens_per_s\|step_s\|mfu\|compute_s\|comm_s\|bubble_s\|s\)":[-0-9.e+]*//g' "$1"; }

train() { # name, processes (0: no mpirun), extra mpirun options, --set assignments...
  local name=$1 np=$2 opts=$3; shift 3
  local sets=(--set train.steps=6 --set train.eval_every=3 --set checkpoint.every=0 --set checkpoint.dir="ck_$name" --set log.metrics="m_$name.jsonl")
  for a in "$@"; do sets+=(--set "$a"); done
  if [ "$np" = 0 ]; then
    timeout 60 "$mgt" train tiny.ini --no-tui "${sets[@]}" > "log_$name" 2>&1
  else
    # shellcheck disable=SC2086
    timeout 60 mpirun -np "$np" $opts "$mgt" train tiny.ini --no-tui "${sets[@]}" > "log_$name" 2>&1
  fi
}

check() { # processes, mpirun options, --set assignments... (threads = 1 per rank in both runs)
  local np=$1 opts=$2; shift 2
  local label="np $np ${opts:+($opts) }$*" name; name=$(echo "$np $opts $*" | tr -c 'a-z0-9' '_')
  train "ref$name" 0 "" "$@" || { fail "$label: the one-process run failed"; tail -5 "log_ref$name"; return; }
  train "mpi$name" "$np" "$opts" "$@" || { fail "$label: exit $?"; tail -15 "log_mpi$name"; return; }
  if ! diff <(summary "m_ref$name.jsonl") <(summary "m_mpi$name.jsonl") > "diff_$name"; then
    fail "$label: metrics differ from one process"; head -6 "diff_$name"; return
  fi
  if [ "$(grep -c '"type":"train"' "m_mpi$name.jsonl")" -ne 6 ]; then fail "$label: process 0 did not write 6 train lines"; return; fi
  grep -q '^step 6/6' "log_mpi$name" || { fail "$label: no log line of step 6"; return; }
  [ "$(grep -c '^done:' "log_mpi$name")" -eq 1 ] || { fail "$label: the log is not process 0's alone"; return; }
  echo "ok  $label: $(grep -o '"loss":[0-9.]*' "m_mpi$name.jsonl" | tail -1), identical to one process"
}

# the program itself under the sanitizers, across processes
for san in asan tsan; do
  opts=(-x ASAN_OPTIONS=detect_leaks=0)
  [ $san = tsan ] && opts=(-x TSAN_OPTIONS="halt_on_error=1 suppressions=$root/tests/mpi_tsan.supp")
  if timeout 200 mpirun -np 2 "${opts[@]}" "$root/build/$san/mgt" train tiny.ini --no-tui --set parallel.dp=2 --set parallel.pp=2 \
      --set parallel.zero=1 --set train.steps=4 --set checkpoint.every=0 --set checkpoint.dir="ck_$san" --set log.metrics="m_$san.jsonl" > "log_$san" 2>&1 &&
      ! grep -q 'Sanitizer\|runtime error' "log_$san"; then
    echo "ok  build/$san/mgt, 2 processes of dp 2 x pp 2, zero 1: $(grep -m1 -o 'final loss [0-9.]*' "log_$san"), no report"
  else fail "build/$san/mgt under mpirun"; grep -m1 -A12 'Sanitizer\|runtime error' "log_$san" || tail -5 "log_$san"; fi
done

# 2 processes: every axis across processes, ZeRO 1/2/3, both schedules, 16-bit
check 2 "" parallel.dp=2
check 2 "" parallel.tp=2
check 2 "" parallel.pp=2
check 2 "" parallel.pp=2 parallel.pp_schedule=gpipe
check 2 "" parallel.dp=2 parallel.zero=1
check 2 "" parallel.dp=2 parallel.zero=2
check 2 "" parallel.dp=2 parallel.zero=3
check 2 "" parallel.dp=2 parallel.tp=2 parallel.zero=1
check 2 "" parallel.dp=2 precision.dtype=bf16
check 2 "" parallel.cp=2 # the ring of attention between processes
check 2 "--mca btl tcp,self" parallel.dp=2 parallel.pp=2 parallel.zero=1
# 4 processes on fewer cores
check 4 "--oversubscribe" parallel.dp=2 parallel.tp=2
check 4 "--oversubscribe" parallel.tp=2 parallel.pp=2
check 4 "--oversubscribe" parallel.dp=2 parallel.cp=2 parallel.zero=2
check 4 "--oversubscribe --mca btl tcp,self" parallel.dp=4 parallel.zero=3 train.micro_batch=1

# GPU ranks across processes, on the CUDA backend built with the checking fakes of cudart, cuBLAS and
# NCCL (build/libmgt_cuda_fake.so; each process has MGT_FAKE_DEVICES "GPUs"): rank 0's process makes
# NCCL's unique id, MPI carries it, every process's ranks join the world (ncclCommInitRank) and split
# it into the groups; the fake NCCL joins the processes through its own socket (tests/fakes/nccl_fake.cpp),
# its checks (signatures, connection outside steps, in-progress state) intact. The same layout on the
# same library in one process gives the same metrics bit for bit (the fake reduces in rank order in
# every process), which is inside any of test_layouts_cuda's bounds. 5 layouts: about 50 s here
# (the CUDA path runs its kernels through the SIMT shim); bf16 across processes was checked by hand.
if [ -s "$root/build/libmgt_cuda_fake.so" ]; then
  export MGT_CUDA_LIBRARY=$root/build/libmgt_cuda_fake.so MGT_FAKE_DEVICES=4
  check 2 "" parallel.device=cuda parallel.dp=2
  check 2 "" parallel.device=cuda parallel.tp=2
  check 2 "" parallel.device=cuda parallel.pp=2
  check 2 "" parallel.device=cuda parallel.dp=2 parallel.zero=3
  check 2 "" parallel.device=cuda parallel.dp=2 parallel.tp=2 parallel.zero=1
  # process 1's GPU never arrives at its first NCCL call of a step (MGT_FAKE_STALL_RANK counts a
  # process's own devices): process 0's watchdog gives up after timeout_s naming the call, the
  # abort reaches process 1 (the fake's ncclRemoteError), and the job ends with exit 1
  printf '#!/bin/sh\n[ "$OMPI_COMM_WORLD_RANK" = 1 ] && export MGT_FAKE_STALL_RANK=0\nexec "$@"\n' > stall1.sh && chmod +x stall1.sh
  start=$(date +%s.%N)
  timeout 90 mpirun -np 2 ./stall1.sh "$mgt" train tiny.ini --no-tui --set parallel.device=cuda --set parallel.dp=2 --set train.steps=3 \
    --set checkpoint.every=0 --set checkpoint.dir=ck_gpu_stall --set log.metrics=none --set parallel.timeout_s=3 > log_gpu_stall 2>&1
  rc=$?
  secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  # the all-reduce the fake stalled (its line numbers it, the connection's and the warm-up's calls included)
  n=$(grep -o 'ncclAllReduce #[0-9]*' log_gpu_stall | head -n1 | tr -dc 0-9)
  # named by process 0's wait, or by process 1's own call (whichever deadline passes first)
  if [ $rc -ne 1 ] || [ -z "$n" ] || ! grep -qE "waited 3.0 s \(\[parallel\] timeout_s\) .*behind NCCL all-reduce #$n on group 2 \(DP\)|NCCL all-reduce #$n on group 2 \(DP\) stayed in progress \(ncclInProgress: not enqueued\) for 3.0 s" log_gpu_stall; then
    fail "GPU rank of process 1 stalled: exit $rc after ${secs}s"; grep '^mgt' log_gpu_stall | head -3
  else echo "ok  GPU rank of process 1 stalled: exit 1 after ${secs}s: $(grep -m1 -oE 'rank [01] \(GPU 0\): (waited 3.0 s|NCCL all-reduce).*\(DP\)' log_gpu_stall | cut -c1-150)"; fi
  unset MGT_CUDA_LIBRARY MGT_FAKE_DEVICES
else echo "SKIP: GPU ranks across processes: build/libmgt_cuda_fake.so is empty (no CUDA headers to build the fakes against)"; fi

# checkpoints: written by process 0 from every process's part, the same tensors as one process's,
# bit for bit; any process count resumes any other's, and continues as the run that never stopped
same() { python3 "$root/tests/safetensors_same.py" "$1" "$2"; }
ckpt() { # processes, --set assignments...
  local np=$1; shift
  local name; name=ck$(echo "$np $*" | tr -c 'a-z0-9' '_')
  local sets=(--set train.steps=6 --set train.eval_every=3 --set checkpoint.every=3 --set log.metrics=none)
  for a in "$@"; do sets+=(--set "$a"); done
  rm -rf "${name}_1" "${name}_n" "${name}_r1" "${name}_rn"
  "$mgt" train tiny.ini --no-tui "${sets[@]}" --set checkpoint.dir="${name}_1" > "log_${name}_1" 2>&1 || { fail "$np $*: one process"; return; }
  timeout 60 mpirun -np "$np" "$mgt" train tiny.ini --no-tui "${sets[@]}" --set checkpoint.dir="${name}_n" > "log_${name}_n" 2>&1 ||
    { fail "$np $*: $np processes: exit $?"; tail -5 "log_${name}_n"; return; }
  same "${name}_1/step_00000006.safetensors" "${name}_n/step_00000006.safetensors" > cmp || { fail "$np $*: $(cat cmp)"; return; }
  mkdir -p "${name}_r1" "${name}_rn"
  cp "${name}_n/step_00000003.safetensors" "${name}_r1/" # np processes' step 3, resumed by one
  cp "${name}_1/step_00000003.safetensors" "${name}_rn/" # one process's, resumed by np
  "$mgt" train tiny.ini --no-tui "${sets[@]}" --set checkpoint.dir="${name}_r1" --resume latest > "log_${name}_r1" 2>&1 &&
    same "${name}_1/step_00000006.safetensors" "${name}_r1/step_00000006.safetensors" > cmp1 || { fail "$np $*: one process resuming $np's: $(cat cmp1)"; return; }
  timeout 60 mpirun -np "$np" "$mgt" train tiny.ini --no-tui "${sets[@]}" --set checkpoint.dir="${name}_rn" --resume latest > "log_${name}_rn" 2>&1 &&
    same "${name}_1/step_00000006.safetensors" "${name}_rn/step_00000006.safetensors" > cmpn || { fail "$np $*: $np resuming one's: $(cat cmpn)"; tail -5 "log_${name}_rn"; return; }
  echo "ok  checkpoints, np $np $*: the same $(grep -o 'tensors [0-9]*' cmp) as one process; resumed $np -> 1 and 1 -> $np, step 6 identical"
}
ckpt 2 parallel.dp=2 parallel.zero=3
ckpt 4 parallel.dp=2 parallel.pp=2 parallel.zero=1 precision.dtype=bf16

# only process 0 holds the folder: one metrics file, and no lock file left when the run ends
name=one_folder
train "$name" 2 "" parallel.dp=2 || fail "$name: exit $?"
[ ! -e "ck_$name/mgt.lock" ] && [ -s "m_$name.jsonl" ] || fail "$name: ck_$name/mgt.lock left behind, or process 0 wrote no m_$name.jsonl"

# 3 ranks over 2 processes: refused, naming both numbers
train uneven 2 "" parallel.dp=3 train.global_batch=6 train.micro_batch=2
rc=$?
if [ $rc -eq 0 ] || ! grep -q "3 ranks cannot be shared evenly by 2 processes" log_uneven; then
  fail "3 ranks over 2 processes: exit $rc"; tail -5 log_uneven
else echo "ok  3 ranks over 2 processes refused: $(grep -m1 -o '3 ranks cannot.*processes' log_uneven)"; fi

# launched, but no MPI library: exit 2 naming `ninja mpi`, nothing trained
MGT_MPI_LIBRARY=$tmp/none.so timeout 60 mpirun -np 2 "$mgt" train tiny.ini --no-tui --set parallel.dp=2 > log_nolib 2>&1
rc=$?
if [ $rc -eq 0 ] || ! grep -q "started by an MPI launcher (OMPI_COMM_WORLD_SIZE=2), but the MPI library.*ninja mpi" log_nolib; then
  fail "no MPI library: exit $rc"; tail -5 log_nolib
else echo "ok  no MPI library: $(grep -m1 -o 'started by an MPI launcher.*' log_nolib | cut -c1-150)"; fi

# a refusal by process 0 (its folder holds another run's checkpoints) is every process's: the job
# ends with exit 2 at once, the reason printed once, where process 1 trained on and waited
# parallel.timeout_s (300 s) for process 0 (issue 25)
"$mgt" train tiny.ini --no-tui --set checkpoint.dir=held --set train.steps=2 --set checkpoint.every=2 > log_held0 2>&1
start=$(date +%s)
timeout 120 mpirun -np 2 "$mgt" train tiny.ini --no-tui --set parallel.dp=2 --set checkpoint.dir=held > log_held 2>&1
rc=$?
took=$(( $(date +%s) - start ))
said=$(grep -c "already holds 1 checkpoint of another run" log_held)
if [ $rc -ne 2 ] || [ "$said" != 1 ] || [ $took -gt 30 ] || grep -q "^step\|waited" log_held; then
  fail "a refusal by process 0: exit $rc after $took s, the reason printed $said times"; tail -5 log_held
else echo "ok  a refusal by process 0 ends every process: exit 2 after $took s, said once: $(grep -m1 -o 'already holds.*another run' log_held)"; fi

# a warning is the job's, said once (by process 0), and a process's ranks are counted against its own
# cores (each process bound to one: 1 rank each is no oversubscription)
timeout 120 mpirun -np 2 "$mgt" train tiny.ini --no-tui --set parallel.dp=2 --set train.steps=2 --set parallel.threads=64 \
  --set checkpoint.dir=warn_once > log_warn 2>&1
rc=$?
said=$(grep -c "warning: \[parallel\] threads = 64 on" log_warn)
if [ $rc -ne 0 ] || [ "$said" != 1 ] || grep -q "ranks (.*) on 1 core" log_warn; then
  fail "warnings under mpirun: exit $rc, the threads warning said $said times"; grep -i warning log_warn
else echo "ok  a warning under mpirun -np 2 is said once, and 1 rank a process on its core is no warning"; fi

# a stalled process (SIGSTOP): the other's ranks give up after parallel.timeout_s naming it, and the
# job ends with exit 1 rather than hanging
timeout 90 mpirun -np 2 "$mgt" train tiny.ini --no-tui --set parallel.dp=2 --set train.steps=1000000 --set train.eval_every=0 \
  --set checkpoint.every=0 --set checkpoint.dir=ck_stall --set log.metrics=m_stall.jsonl --set parallel.timeout_s=2 > log_stall 2>&1 &
launcher=$!
stalled=""
for _ in $(seq 200); do # process 1, once training has begun
  if grep -q '^step 3/' log_stall 2>/dev/null; then
    for p in $(pgrep -f "$mgt train tiny.ini"); do
      tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 && stalled=$p
    done
    [ -n "$stalled" ] && break
  fi
  sleep 0.1
done
if [ -z "$stalled" ]; then fail "stall: process 1 not found"; kill "$launcher" 2>/dev/null
else
  kill -STOP "$stalled"
  start=$(date +%s.%N)
  wait "$launcher"
  rc=$?
  secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  kill -CONT "$stalled" 2>/dev/null
  if [ $rc -eq 0 ] || [ $rc -eq 124 ] || ! grep -q "waited 2 s (parallel.timeout_s) in .* for rank 1 (process 1 on " log_stall || grep -q "rank 0: rank 0" log_stall \
    || grep -q "for rank 0 (process 0 on" log_stall; then # the stopped process, resumed to be killed, blamed its healthy peer
    fail "stall: exit $rc after ${secs}s"; tail -8 log_stall
  else echo "ok  process 1 stopped: exit $rc after ${secs}s: $(grep -m1 'waited 2 s' log_stall | cut -c1-170)"; fi
fi

# SIGUSR1 to mpirun (which forwards it; Ctrl-C kills the job): every process stops after the same
# step, process 0 writes the checkpoint, exit 130; one process resumes it
mpirun -np 2 "$mgt" train tiny.ini --no-tui --set parallel.dp=2 --set parallel.zero=1 --set train.steps=1000000 \
  --set train.eval_every=0 --set checkpoint.every=0 --set checkpoint.dir=ck_usr1 --set log.metrics=m_usr1.jsonl > log_usr1 2>&1 &
launcher=$!
for _ in $(seq 200); do grep -q '^step 3/' log_usr1 2>/dev/null && break; sleep 0.1; done
kill -USR1 "$launcher"
( sleep 60; kill "$launcher" 2>/dev/null ) & watchdog=$!
wait "$launcher"
rc=$?
kill "$watchdog" 2>/dev/null
stopped=$(grep -o '^interrupted at step [0-9]*' log_usr1 | grep -o '[0-9]*$')
if [ $rc -ne 130 ] || [ -z "$stopped" ] || [ ! -s "ck_usr1/step_$(printf %08d "$stopped").safetensors" ]; then
  fail "SIGUSR1: exit $rc, stopped at '${stopped}'"; tail -5 log_usr1
elif ! grep -q "^to stop with a checkpoint: kill -USR1 $launcher (mpirun forwards it to every process; Ctrl-C makes it end the job at once" log_usr1; then
  fail "SIGUSR1: the banner does not say how to stop (kill -USR1 $launcher): $(grep 'to stop' log_usr1)"
elif ! grep -q "^resume with: mpirun -np 2 $mgt train tiny.ini .*--resume latest$" log_usr1; then
  fail "SIGUSR1: the resume hint does not name mpirun -np 2: $(grep 'resume with' log_usr1)"
elif ! "$mgt" train tiny.ini --no-tui --set parallel.dp=2 --set parallel.zero=1 --set train.steps=$((stopped + 2)) --set train.eval_every=0 \
    --set checkpoint.every=0 --set checkpoint.dir=ck_usr1 --set log.metrics=m_usr1.jsonl --resume latest > log_usr1_resume 2>&1; then
  fail "SIGUSR1: one process cannot resume step $stopped"; tail -5 log_usr1_resume
else echo "ok  SIGUSR1 to mpirun: both processes stopped after step $stopped, exit 130, the hint 'mpirun -np 2 ... --resume latest', its checkpoint resumed by one process"; fi

[ $fails -eq 0 ] && echo "test_mpi: all passed"
[ $fails -eq 0 ]
