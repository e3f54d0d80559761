#!/usr/bin/env bash
# tests/test_sanitized_train.sh - the program itself under the sanitizers, end to end: the tiny
# preset trained for a few steps, its checkpoint sampled, then `check` and `plan`, by
#   build/asan/mgt        gcc,   AddressSanitizer + UndefinedBehaviorSanitizer, leak checking on
#   build/asan/mgt_clang  clang, the same (clang's UBSan checks more, e.g. a null pointer offset)
#   build/tsan/mgt        gcc,   ThreadSanitizer, dp 2 (the rank threads, the pool, the loader)
# Any sanitizer report fails the test (the sanitizers exit 66 and their report is shown).
#
# Run from the repository root after `ninja build/asan/mgt build/asan/mgt_clang build/tsan/mgt`:
#   tests/test_sanitized_train.sh
# Prints `ok - ...` or `FAIL - ...` per command; about 30 s on 2 cores.
set -u

ROOT=$(pwd)
P="$ROOT/tests/presets"
BINS="build/asan/mgt build/asan/mgt_clang build/tsan/mgt"
for b in $BINS; do
    if [ ! -x "$ROOT/$b" ]; then
        echo "FAIL - run from the repository root after \`ninja $BINS\` (need $b)"
        exit 1
    fi
done
T=$(mktemp -d "${TMPDIR:-/tmp}/mgt_test_sanitized.XXXXXX") || exit 1
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
cd "$T" || exit 1
cp "$P/tiny.ini" . && P=$T # a preset's paths are relative to its folder: here, beside the test's data

# every sanitizer stops at its first report with status 66, which mgt never uses; leaks are checked
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:exitcode=66:abort_on_error=0
export LSAN_OPTIONS=exitcode=66
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:exitcode=66
export TSAN_OPTIONS=halt_on_error=1:exitcode=66:second_deadlock_stack=1
export MGT_BASELINES="$T/baselines.tsv"

PASS=0
FAILS=0
# san NAME CMD...: CMD exits 0 and no sanitizer reported anything
san() {
    local name=$1 rc
    shift
    "$@" >"$T/$name.out" 2>"$T/$name.err"
    rc=$?
    if [ $rc -eq 0 ] && ! grep -qE 'Sanitizer|runtime error:' "$T/$name.err"; then
        echo "ok - $name"
        PASS=$((PASS + 1))
    else
        echo "FAIL - $name: exit $rc; $*"
        grep -E -A 14 'ERROR: |WARNING: |runtime error:' "$T/$name.err" | head -n 40 | sed 's/^/    /'
        [ -s "$T/$name.err" ] && ! grep -qE 'Sanitizer|runtime error:' "$T/$name.err" && tail -n 5 "$T/$name.err" | sed 's/^/    /'
        FAILS=$((FAILS + 1))
    fi
}

# the tiny preset's data (tk_train.bin, tk_val.bin), made by the program under test
python3 - >text.txt <<'EOF'
import random
r = random.Random(3)
w = "the cat sat on a mat and the dog ran far away then it slept under an old tree".split()
print("\n".join(" ".join(r.choice(w) for _ in range(10)) + "." for _ in range(3000)))
EOF
san prepare "$ROOT/build/asan/mgt" prepare --tokenizer byte text.txt -o tk

for b in $BINS; do
    tag=${b#build/}
    tag=${tag//\//_}
    extra=()
    case $b in build/tsan/*) extra=(--set parallel.dp=2) ;; esac
    rm -rf ck
    san "$tag train" "$ROOT/$b" train "$P/tiny.ini" --no-tui --set train.steps=4 --set train.eval_every=2 --set checkpoint.every=2 "${extra[@]}"
    san "$tag sample" "$ROOT/$b" sample ck --tokens 24 --top-k 5
    san "$tag check" "$ROOT/$b" check "$P/tiny.ini" "${extra[@]}"
    san "$tag plan" "$ROOT/$b" plan "$P/tiny.ini" --set parallel.dp=2 --set parallel.zero=3
done

echo "$PASS passed, $FAILS failed"
[ $FAILS -eq 0 ]
