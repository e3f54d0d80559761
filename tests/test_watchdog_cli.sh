#!/usr/bin/env bash
# tests/test_watchdog_cli.sh - `mgt train` itself (./mgt) on the CUDA backend built with the checking
# fakes in place of cudart, cuBLAS and NCCL (build/libmgt_cuda_fake.so, opened through
# MGT_CUDA_LIBRARY, tests/cuda.ninja): a dp 2 run with [parallel] timeout_s = 3 trains; the same run
# whose rank 1 never arrives at its first NCCL call of a step (MGT_FAKE_STALL_RANK=1) exits 1 within
# timeout_s plus a margin, with one message naming rank 1, that call and its group, and a pp 2 run
# whose rank 1 gets an asynchronous NCCL error exits 1 at once, naming it. Issue 13; the cases of
# every layout, under ASan and TSan, are tests/test_watchdog_cuda.c's. Exit 77 without the library.
set -u
ROOT=$(pwd)
MGT="$ROOT/mgt"
LIB="$ROOT/build/libmgt_cuda_fake.so"
[ -x "$MGT" ] || { echo "FAIL - run from the repository root after \`ninja mgt\`"; exit 1; }
[ -s "$LIB" ] || { echo "SKIP: no $LIB (no CUDA headers to build the fakes against)"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/mgt_test_watchdog_cli.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
PASS=0 FAILS=0
ok() { echo "ok - $*"; PASS=$((PASS + 1)); }
fail() { echo "FAIL - $*"; FAILS=$((FAILS + 1)); }

cd "$T" || exit 1
python3 - <<'PY'
import random
random.seed(5)
words = "the cat sat on a mat and the dog ran far away".split()
open("t.txt", "w").write("\n".join(" ".join(random.choice(words) for _ in range(10)) for _ in range(800)))
PY
"$MGT" prepare --tokenizer byte t.txt -o tk > prepare.log 2>&1 || { cat prepare.log; exit 1; }
cp "$ROOT/tests/presets/tiny.ini" tiny.ini # beside its data: presets name files relative to themselves
sets="--set parallel.device=cuda --set parallel.timeout_s=3 --set train.steps=3 --set train.eval_every=0 --set checkpoint.every=0"
sets="$sets --set data.val= --set log.every=1"

# train NAME COMMAND...: the command with MGT_CUDA_LIBRARY set; sets $rc, $secs (from its start) and
# $err (the first "mgt: " line of its stderr)
train() {
    local name=$1 start end
    shift
    start=$(date +%s.%N)
    env MGT_CUDA_LIBRARY="$LIB" "$@" --set checkpoint.dir="ck_$name" > "$name.out" 2> "$name.err" &
    wait $!
    rc=$?
    end=$(date +%s.%N)
    err=$(grep '^mgt: ' "$name.err" | head -n 1)
    secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
}

train good "$MGT" train tiny.ini --no-tui $sets --set parallel.dp=2
if [ $rc -eq 0 ] && grep -q '^done: 3 steps' good.out && grep -q 'cuda' good.out; then
    ok "dp 2 on the fake GPUs trains: $(grep '^done' good.out)"
else
    fail "dp 2 on the fake GPUs: exit $rc: $(tail -n 5 good.err good.out)"
fi

# the stall: the run must end within timeout_s (3) plus the margin, counted from its start (its
# creation and first step take well under a second here)
train stall env MGT_FAKE_STALL_RANK=1 "$MGT" train tiny.ini --no-tui $sets --set parallel.dp=2
call=$(sed -n "s/.*inside steps, ncclAllReduce #\([0-9]*\) .*/all-reduce #\1/p" stall.err | head -n 1)
if [ $rc -eq 1 ] && [ -n "$call" ] && awk -v s="$secs" 'BEGIN { exit !(s < 3 + 6) }' && echo "$err" | grep -q "$call on group 2 (DP)" &&
    echo "$err" | grep -Eq "rank 1 \(GPU 1\): NCCL $call|rank 1 issuing $call" && echo "$err" | grep -q 'every rank is stopped'; then
    ok "a rank that never arrives: exit 1 after $secs s (timeout_s 3), naming rank 1 and $call: $err"
else
    fail "a rank that never arrives: exit $rc after $secs s, the fake's call '$call': $(cat stall.err)"
fi
[ -n "$(ls ck_stall 2>/dev/null | grep safetensors)" ] && fail "a failed run wrote a checkpoint" || ok "the failed run saved nothing"

pp_sets="--set parallel.pp=2 --set parallel.dp=1"
train error env MGT_FAKE_NCCL_ERROR=1 "$MGT" train tiny.ini --no-tui $sets $pp_sets
# the receive the fake failed (its own line numbers it, warm-up and connection included), named by mgt
recv=$(grep -o 'ncclRecv #[0-9]*' error.err | head -n1 | sed 's/ncclRecv/recv/')
if [ $rc -eq 1 ] && awk -v s="$secs" 'BEGIN { exit !(s < 3 + 6) }' && echo "$err" | grep -q 'rank 1 (GPU 1): NCCL reported an asynchronous error' &&
    [ -n "$recv" ] && echo "$err" | grep -q "$recv from rank 0"; then
    ok "an asynchronous NCCL error on pp 2: exit 1 after $secs s: $err"
else
    fail "an asynchronous NCCL error on pp 2: exit $rc after $secs s: $(cat error.err)"
fi

echo "$PASS passed, $FAILS failed"
[ $FAILS -eq 0 ]
