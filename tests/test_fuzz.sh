#!/usr/bin/env bash
# tests/test_fuzz.sh - a short, fixed run of each libFuzzer target (tests/fuzz/, `ninja fuzz`):
# FUZZ_SECONDS (8) seconds each with a fixed seed (FUZZ_SEED, 1; 0 draws one), on a copy of its
# committed seed corpus, in one process (no -jobs: that would leave fuzz-0.log behind). A crash, a
# sanitizer report or a broken property fails the test with the target, the first lines of the
# report, and the input kept under build/logs/fuzz/ with the command that reproduces it. Exits 77
# with a SKIP line only when the targets were built without libFuzzer (tests/fuzz/cc.sh builds
# stubs then). Longer runs: README, Tests.
#
# The preset target checks the stored-preset round trip (mgt__config_store, mgt__config_restore)
# and aborts on a difference (MGT_FUZZ_ROUNDTRIP=report would print differences instead).
set -u
cd "$(dirname "$0")/.."
ROUNDTRIP=abort
secs=${FUZZ_SECONDS:-8}
seed=${FUZZ_SEED:-1}
targets="config shard checkpoint tokenizer hf_tokenizer init"
keep=build/logs/fuzz
mkdir -p "$keep"
work=$(mktemp -d "${TMPDIR:-/tmp}/mgt_test_fuzz.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT

failed=0
for t in $targets; do
    bin=build/fuzz/$t
    if [ ! -x "$bin" ]; then echo "FAIL $t: $bin is missing (ninja fuzz)"; failed=1; continue; fi
    "$bin" -help=1 >/dev/null 2>&1
    if [ $? -eq 77 ]; then "$bin"; exit 77; fi # the stub prints the SKIP line
    if [ -d "tests/fuzz/regressions/$t" ]; then # the inputs of fixed findings, once each: none may stop the target again
        if MGT_FUZZ_ROUNDTRIP=$ROUNDTRIP "$bin" -timeout=20 tests/fuzz/regressions/$t/* > "$work/$t.regressions.log" 2>&1; then
            echo "$t: $(ls tests/fuzz/regressions/$t | wc -l) regression inputs run again, none stops it"
        else
            failed=1
            echo "FAIL $t: a regression input stops it again"
            grep -a -m3 -E 'ERROR:|runtime error|round trip|Running:' "$work/$t.regressions.log" | sed 's/^/    /'
        fi
    fi
    cp -r "tests/fuzz/corpus/$t" "$work/$t"
    dict=()
    [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
    start=$(date +%s.%N)
    MGT_FUZZ_ROUNDTRIP=$ROUNDTRIP "$bin" -seed="$seed" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$work/$t-" "${dict[@]}" "$work/$t" > "$work/$t.log" 2>&1
    rc=$?
    end=$(date +%s.%N)
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log" | tail -1)
    printf '%-11s %8s inputs in %5.1fs' "$t" "${runs:-?}" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')"
    if [ $rc -ne 0 ]; then
        failed=1
        echo "  FAIL (exit $rc)"
        grep -a -m1 -E 'ERROR:|runtime error|round trip|^(shard|checkpoint|gpt2|byte).*:' "$work/$t.log" | sed 's/^/    /'
        grep -a -m8 -E '^ +#[0-9]+ ' "$work/$t.log" | sed 's/^/    /'
        for a in "$work/$t"-*; do
            [ -f "$a" ] || continue
            cp "$a" "$keep/" && echo "    input: $keep/${a##*/}; reproduce: $bin $keep/${a##*/}"
        done
        cp "$work/$t.log" "$keep/$t.log" && echo "    log: $keep/$t.log"
    else
        echo
    fi
    if [ "$t" = config ]; then
        known=$(grep -a -c '^round trip:' "$work/$t.log")
        if [ "$known" -gt 0 ]; then
            echo "  note: $known stored-preset round-trip failures (known, MGT_FUZZ_ROUNDTRIP=report):"
            grep -a '^round trip:' "$work/$t.log" | LC_ALL=C tr -c '[:print:]\n' '?' | cut -c1-150 | sort -u | head -n 6 | sed 's/^/    /'
        fi
    fi
done
[ $failed -eq 0 ] && echo "test_fuzz: ok" || echo "test_fuzz: FAILED"
exit $failed
