#!/usr/bin/env bash
# tests/test_resources.sh - what a run needs against what the machine has, from the command line:
# - a run that does not fit is refused before it allocates (exit 2) by `mgt train` and `mgt check`,
#   with the numbers and what would make it fit: a model no machine holds, and a run over ulimit -v
#   (whose suggested ulimit -v is then enough to train);
# - past the check (MGT_MEMORY_CHECK=off), out of memory exits 1 within seconds at every limit,
#   whether OpenBLAS's buffers or the run's own memory find no room (it used to hang: OpenBLAS
#   retried its allocation forever, in a GEMM or in a thread that exit waits for);
# - OpenBLAS starts no threads of its own, even when OPENBLAS_NUM_THREADS asks for some;
# - 2048 CPU ranks train (1.1 GB, a few seconds);
# - more threads than cores, and more ranks than cores, are warned about.
#
# Run from the repository root after `ninja mgt`:   tests/test_resources.sh   (MGT=path tests another build)
# Prints `ok - ...` or `FAIL - ...` per check; exits 0 only if every check passes. About 20 s.
set -u

ROOT=$(pwd)
MGT=${MGT:-$ROOT/mgt}
P="$ROOT/tests/presets"
if [ ! -x "$MGT" ] || [ ! -f "$P/tiny.ini" ]; then
    echo "FAIL - run from the repository root after \`ninja mgt\` (need ./mgt and tests/presets/tiny.ini)"
    exit 1
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/mgt_test_resources.XXXXXX") || exit 1
BGPID=
cleanup() {
    if [ -n "$BGPID" ]; then kill -9 "$BGPID" 2>/dev/null; wait "$BGPID" 2>/dev/null; fi
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
cd "$T" || exit 1
cp "$P/tiny.ini" . && P=$T # a preset's paths are relative to its folder: here, beside the test's data
export MGT_BASELINES="$T/baselines.tsv"
unset MGT_MEMORY_CHECK
CORES=$(getconf _NPROCESSORS_ONLN)

PASS=0
FAILS=0
ok() { echo "ok - $*"; PASS=$((PASS + 1)); }
fail() { echo "FAIL - $*"; FAILS=$((FAILS + 1)); }

# run NAME CMD...: stdout in NAME.out, stderr in NAME.err; sets RC and SECS
RC=0
SECS=0
run() {
    local name=$1 start
    shift
    start=$(date +%s.%N)
    "$@" >"$T/$name.out" 2>"$T/$name.err"
    RC=$?
    SECS=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
}
# has FILE PATTERN...: every fixed PATTERN is in FILE
has() {
    local f=$1 p
    shift
    for p in "$@"; do grep -qF -- "$p" "$f" || return 1; done
}
show() { head -c 600 "$T/$1"; echo; }

# the tiny preset's data (tk_train.bin, tk_val.bin)
python3 - >text.txt <<'EOF'
import random
r = random.Random(5)
w = "the quick brown fox jumps over the lazy dog and a stitch in time saves nine".split()
print("\n".join(" ".join(r.choice(w) for _ in range(10)) + "." for _ in range(3000)))
EOF
"$MGT" prepare --tokenizer byte text.txt -o tk >/dev/null 2>&1 || { echo "FAIL - mgt prepare"; exit 1; }

TRAIN=("$MGT" train "$P/tiny.ini" --no-tui --overwrite) # runs one after another into ck: each starts afresh
BIG=(--set model.n_layer=1024 --set model.d_model=65536 --set model.n_head=1024) # 52.8 trillion parameters
# 4 blocks of 128 channels, 16 x 256 tokens: 232 MiB planned, GEMMs large enough for OpenBLAS's buffers
MID=(--set model.n_layer=4 --set model.d_model=128 --set model.n_head=4 --set model.seq_len=256 --set train.global_batch=16
     --set train.micro_batch=16 --set train.eval_every=0 --set checkpoint.every=0 --set log.metrics=none --set train.steps=2)

# ---- the check --------------------------------------------------------------------------------

run check "$MGT" check "$P/tiny.ini"
if [ "$RC" -eq 0 ] && has "$T/check.out" "memory: 1 rank needs" "MemAvailable" ": fits"; then ok "check: the tiny preset fits, with the numbers"
else fail "check: tiny preset: exit $RC, expected a 'memory: ... fits' line; $(show check.out)"; fi

run big "$MGT" check "$P/tiny.ini" "${BIG[@]}"
if [ "$RC" -eq 2 ] && has "$T/big.err" "tiny.ini: does not fit this machine" "TiB" "MemAvailable" \
    "parameters, gradients and optimizer state alone take" "smaller model" "MGT_MEMORY_CHECK=off"; then
    ok "check: 52.8T parameters do not fit: exit 2, the numbers, nothing but a smaller model helps"
else fail "check: 52.8T parameters: exit $RC (want 2); $(show big.err)"; fi

run bigtrain timeout -k 2 20 "${TRAIN[@]}" "${BIG[@]}"
if [ "$RC" -eq 2 ] && has "$T/bigtrain.err" "does not fit this machine" && [ ! -e ck ]; then
    ok "train: 52.8T parameters refused before anything was allocated or written (exit 2, ${SECS} s)"
else fail "train: 52.8T parameters: exit $RC (want 2); $(show bigtrain.err)"; fi

MGT_MEMORY_CHECK=off run bigoff "$MGT" check "$P/tiny.ini" "${BIG[@]}"
if [ "$RC" -eq 0 ] && has "$T/bigoff.out" "warning: " "does not fit this machine"; then ok "check: MGT_MEMORY_CHECK=off reports, exit 0"
else fail "check: MGT_MEMORY_CHECK=off: exit $RC (want 0); $(show bigoff.out)"; fi

# ---- ulimit -v: refused with the numbers; the limit the message suggests is enough -------------

(ulimit -v 400000 && exec "${TRAIN[@]}" "${MID[@]}") >"$T/as.out" 2>"$T/as.err"
RC=$?
if [ "$RC" -eq 2 ] && has "$T/as.err" "does not fit this machine" "planned, as \`mgt plan\` shows" "address space: the run adds" \
    "ulimit -v (RLIMIT_AS) leaves" "already mapped" "it fits with" && [ ! -e ck ]; then
    ok "train under ulimit -v 400000: refused before allocating (exit 2), with the address space numbers"
else fail "train under ulimit -v 400000: exit $RC (want 2); $(show as.err)"; fi
(ulimit -v 400000 && exec "$MGT" check "$P/tiny.ini" "${MID[@]}") >"$T/as2.out" 2>"$T/as2.err"
RC=$?
if [ "$RC" -eq 2 ] && has "$T/as2.err" "ulimit -v (RLIMIT_AS) leaves"; then ok "check under ulimit -v 400000: exit 2 as well"
else fail "check under ulimit -v 400000: exit $RC (want 2); $(show as2.err)"; fi
SUGGESTED=$(grep -o 'ulimit -v [0-9]* or more' "$T/as.err" | grep -o '[0-9]*')
if [ -n "$SUGGESTED" ]; then
    (ulimit -v "$SUGGESTED" && exec timeout -k 2 60 "${TRAIN[@]}" "${MID[@]}") >"$T/as3.out" 2>"$T/as3.err"
    RC=$?
    if [ "$RC" -eq 0 ] && has "$T/as3.out" "done: 2 steps"; then ok "the ulimit -v the message suggests ($SUGGESTED) is enough to train"
    else fail "train under the suggested ulimit -v $SUGGESTED: exit $RC (want 0); $(show as3.err)"; fi
else fail "the message under ulimit -v 400000 suggests no ulimit -v; $(show as.err)"; fi
rm -rf ck

# ---- past the check, out of memory exits 1 promptly wherever it strikes --------------------------

SEEN_BLAS=0 SEEN_RUN=0 HUNG="" WRONG=""
for kb in 100000 140000 180000 220000 260000 300000 350000 400000 450000 500000 600000 700000 900000; do
    (ulimit -v "$kb" && MGT_MEMORY_CHECK=off exec timeout -k 2 20 "${TRAIN[@]}" "${MID[@]}") >"$T/oom.out" 2>"$T/oom.err"
    RC=$?
    if [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then HUNG="$HUNG $kb"; tail -n 2 "$T/oom.err" | sed 's/^/    /'; continue; fi
    [ "$RC" -eq 0 ] && break
    if [ "$RC" -ne 1 ] || ! grep -q "out of memory" "$T/oom.err"; then WRONG="$WRONG $kb:exit$RC"; tail -n 2 "$T/oom.err" | sed 's/^/    /'; continue; fi
    grep -q "OpenBLAS needs a buffer" "$T/oom.err" && SEEN_BLAS=$((SEEN_BLAS + 1))
    grep -q "rank 0 needs" "$T/oom.err" && SEEN_RUN=$((SEEN_RUN + 1))
    echo "    ulimit -v $kb: exit 1: $(grep -m1 -o 'out of memory.\{0,90\}' "$T/oom.err")"
done
if [ -z "$HUNG" ] && [ -z "$WRONG" ] && [ "$SEEN_BLAS" -gt 0 ] && [ "$SEEN_RUN" -gt 0 ]; then
    ok "MGT_MEMORY_CHECK=off under ulimit -v from 100000 up: exit 1 with 'out of memory' at once, in OpenBLAS's buffers ($SEEN_BLAS) and the run's ($SEEN_RUN), until it fits"
else fail "out of memory past the check: hung (killed after 20 s) at [$HUNG], wrong exit at [$WRONG], OpenBLAS's buffers seen $SEEN_BLAS, the run's $SEEN_RUN"; fi
rm -rf ck

# ---- OpenBLAS starts no threads: mgt's own are all there is ----------------------------------------

for env in OPENBLAS_NUM_THREADS=4 "-u OPENBLAS_NUM_THREADS"; do
    env $env "${TRAIN[@]}" --set train.steps=1000000 --set train.eval_every=0 --set checkpoint.every=0 --set log.every=1000 >"$T/th.out" 2>"$T/th.err" &
    BGPID=$!
    for _ in $(seq 100); do grep -q '^step' "$T/th.out" && break; sleep 0.1; done
    N=$(ls "/proc/$BGPID/task" 2>/dev/null | wc -l)
    kill -9 "$BGPID" 2>/dev/null
    wait "$BGPID" 2>/dev/null
    BGPID=
    # threads = 1, one rank: the main thread and the data loader's
    if [ "$N" -eq 2 ]; then ok "env $env: training has 2 threads (main, data loader): OpenBLAS started none"
    else fail "env $env: training has $N threads, want 2 (main, data loader); $(show th.err)"; fi
done
rm -rf ck

# ---- 2048 CPU ranks train: no OpenBLAS buffer limit, no deadlock check over every pair of ranks ----

run wide timeout -k 2 90 "${TRAIN[@]}" --set parallel.dp=256 --set parallel.tp=8 --set model.n_head=16 --set model.d_model=64 \
    --set model.n_layer=1 --set train.global_batch=256 --set train.micro_batch=1 --set train.steps=2 --set train.eval_every=0 \
    --set checkpoint.every=0 --set log.metrics=none
if [ "$RC" -eq 0 ] && has "$T/wide.out" "2048 ranks: dp 256 x tp 8" "done: 2 steps"; then ok "2048 ranks (dp 256 x tp 8) train 2 steps in $SECS s"
else fail "2048 ranks: exit $RC after $SECS s (killed at 90 s: it took 179 s when each wait compared every pair of ranks); $(tail -c 400 "$T/wide.err")"; fi
rm -rf ck

# ---- threads and ranks beyond the cores are warned about ------------------------------------------

run many "${TRAIN[@]}" --set train.steps=1 --set parallel.threads=$((2 * CORES + 1)) --set train.eval_every=0
if [ "$RC" -eq 0 ] && has "$T/many.err" "warning: [parallel] threads = $((2 * CORES + 1)) on $CORES cores" "threads = 0"; then
    ok "parallel.threads = $((2 * CORES + 1)) on $CORES cores: warned, with the numbers and the fix"
else fail "parallel.threads beyond the cores: exit $RC, no warning; $(show many.err)"; fi
DP=$((2 * CORES))
run ranks "${TRAIN[@]}" --set train.steps=1 --set parallel.dp=$DP --set train.global_batch=$DP --set train.micro_batch=1 --set train.eval_every=0
if [ "$RC" -eq 0 ] && has "$T/ranks.err" "warning: $DP ranks (dp $DP x tp 1 x pp 1) on $CORES cores"; then ok "dp $DP on $CORES cores: warned"
else fail "more ranks than cores: exit $RC, no warning; $(show ranks.err)"; fi
run quiet "${TRAIN[@]}" --set train.steps=1 --set train.eval_every=0
if [ "$RC" -eq 0 ] && ! grep -q "warning" "$T/quiet.err"; then ok "one rank of one thread: no warning"
else fail "tiny preset: exit $RC or an unexpected warning; $(show quiet.err)"; fi
rm -rf ck

echo "# $PASS passed, $FAILS failed"
[ "$FAILS" -eq 0 ]
