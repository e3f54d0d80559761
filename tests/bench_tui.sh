#!/usr/bin/env bash
# tests/bench_tui.sh - what the dashboard costs training, measured inside one run. A benchmark, not
# part of the suite.
#
# Separate runs with and without the dashboard cannot resolve 1% on a shared machine (two identical
# --no-tui runs differed by ~7%). So one run under the dashboard (tmux, 160x48; build/bench_tui,
# tests/bench_tui.c: mgt train's loop under the dashboard through the public API) alternates windows
# of W seconds in which the dashboard draws and in which its thread only waits; each pair of
# neighbouring windows, in a random order, shares the machine's load, and it prints the mean of the
# paired relative differences of step time with a 95% CI, and the 20%-trimmed mean of the pairs
# with Yuen's CI (bursts of other work make a few pairs far off either way; trimming pairs narrows
# the interval without bias, see ab_report in tests/bench_tui.c).
#   1. the dashboard as it is (a screen at most every 0.5 s): the figure asked for, with its CI;
#   2. the same with a screen every AMP ms (--refresh-ms AMP): many more screens per second, so
#      the cost of one screen stands out of the noise; scaled by the screens per second of run 1,
#      a second, much tighter estimate of the same figure (it assumes cost proportional to screens).
#   tests/bench_tui.sh [PRESET [PAIRS [W [AMP]]]]  (default: tests/presets/tui.ini 150 1 10)
#   AA=1 tests/bench_tui.sh ...   both windows of every pair quiet: the statistic's own noise (run 1 only)
# MGT_TUI_DEBUG=1: the summary's line of the dashboard's own figures (frames drawn, its CPU time)
set -u
cd "$(dirname "$0")/.."
preset=${1:-tests/presets/tui.ini} pairs=${2:-150} window=${3:-1} amp=${4:-10}
command -v tmux > /dev/null || { echo "SKIP: tmux is not installed"; exit 77; }
[ -x build/bench_tui ] || { echo "build/bench_tui is not built (ninja build/bench_tui)"; exit 1; }
TMP=$(mktemp -d)
trap 'tmux -S "$TMP/sock" kill-server 2> /dev/null; rm -rf "$TMP"' EXIT
args="$preset --set train.steps=2000000000 --set checkpoint.every=0 --set train.eval_every=0 --set checkpoint.dir=$TMP/ck --set log.metrics=none"

ab() { # name, extra options: one run; its last lines in $TMP/name
  local name=$1 i; shift
  rm -rf "$TMP/ck"
  tmux -S "$TMP/sock" new-session -d -x 160 -y 48 \
    "env LANG=C.UTF-8 TERM=xterm-256color MGT_TUI_DEBUG=1 build/bench_tui --window $window --pairs $pairs${AA:+ --aa} $* $args; sleep 600"
  local limit; limit=$(awk -v p="$pairs" -v w="$window" 'BEGIN { printf "%d", (2 * p + 2) * w * 1.5 + 120 }')
  for ((i = 0; i < limit; i++)); do # the run stops by itself after the last pair
    sleep 1
    tmux -S "$TMP/sock" capture-pane -p -J -S -60 > "$TMP/$name" 2> /dev/null
    grep -q '^dashboard A/B' "$TMP/$name" && break
  done
  tmux -S "$TMP/sock" kill-server 2> /dev/null
  grep '^dashboard' "$TMP/$name" || { echo "no A/B figure from run $name:"; cat "$TMP/$name"; exit 1; }
}
field() { sed -n "s/.*$2.*/\\1/p" "$TMP/$1" | head -1; }
scale() { # the amplified run's figure (line $1 of its A/B lines), scaled by screens per second
  local line; line=$(grep "^dashboard A/B: $1" "$TMP/amp")
  awk -v c="$(echo "$line" | sed -n 's/.*costs \([-+0-9.]*\)%.*/\1/p')" -v lo="$(echo "$line" | sed -n 's/.*CI \([-+0-9.]*\)%.*/\1/p')" \
    -v hi="$(echo "$line" | sed -n 's/.*\.\. \([-+0-9.]*\)%.*/\1/p')" -v k="$k" -v what="$1" \
    'BEGIN { printf "== scaled, %s drawing costs %+.3f%% of step time (95%% CI %+.3f%% .. %+.3f%%)\n", what, c * k, lo * k, hi * k }'
}

echo "== 1. the dashboard as it is (${AA:+AA, }$pairs pairs of $window s, $preset)"
ab normal
[ -n "${AA:-}" ] && exit 0
echo "== 2. a screen every $amp ms"
ab amp --refresh-ms "$amp"
d1=$(field normal ' \([0-9.]*\) screens drawn') d2=$(field amp ' \([0-9.]*\) screens drawn')
k=$(awk -v a="$d1" -v b="$d2" 'BEGIN { if (b > 0) printf "%.6f", a / b; else print 0 }')
echo "== scaled by $d1 / $d2 screens per s (run 1 / run 2):"
scale mean:
scale 20%-trimmed
