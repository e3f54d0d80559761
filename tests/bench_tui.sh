#!/usr/bin/env bash
# tests/bench_tui.sh - what the dashboard costs training: the same steps with --no-tui and under the
# dashboard (in a detached tmux at 160x48), alternated, REPEAT times each; tokens/s from the time
# in steps that the driver prints ("done: N steps, ..., S s in steps"), the mean and the best of the
# runs (the best is the least disturbed by other work on the machine), and the median of the ratios
# of neighbouring runs (which share the machine's load at the time). Not part of the suite.
#   tests/bench_tui.sh [PRESET [STEPS [REPEAT]]]     (default: presets/quickstart.ini 150 3)
#   AA=1 tests/bench_tui.sh ...   the same with --no-tui in tmux too: the noise of the comparison
set -u
cd "$(dirname "$0")/.."
preset=${1:-presets/quickstart.ini} steps=${2:-150} repeat=${3:-3}
command -v tmux > /dev/null || { echo "SKIP: tmux is not installed"; exit 77; }
TMP=$(mktemp -d)
trap 'tmux -S "$TMP/sock" kill-server 2> /dev/null; rm -rf "$TMP"' EXIT
args="$preset --set train.steps=$steps --set checkpoint.every=0 --set train.eval_every=0 --set checkpoint.dir=$TMP/ck --set log.metrics=none"
secs() { sed -n 's/.* \([0-9.]*\) s in steps.*/\1/p' "$1"; }
tok() { ./mgt check $args | awk '/^global_batch/ {gb=$3} /^seq_len/ {t=$3} END {print gb * t}'; }
per_step=$(tok)
for ((i = 1; i <= repeat; i++)); do
  rm -rf "$TMP/ck"
  ./mgt train $args --no-tui > "$TMP/plain.$i" 2>&1
  rm -rf "$TMP/ck"
  tmux -S "$TMP/sock" new-session -d -x 160 -y 48 "env LANG=C.UTF-8 TERM=xterm-256color ./mgt train $args ${AA:+--no-tui}; sleep 60"
  # the dashboard writes to the pane; the "done:" line is printed after it closes: read it from the pane
  while tmux -S "$TMP/sock" has-session 2> /dev/null; do
    tmux -S "$TMP/sock" capture-pane -p -J -S -50 > "$TMP/tui.$i" 2> /dev/null
    grep -q ' s in steps' "$TMP/tui.$i" && break
    sleep 0.5
  done
  # the terminal's side of drawing: CPU seconds of the tmux server (it parses every byte drawn)
  tcpu=$(awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$(tmux -S "$TMP/sock" display -p '#{pid}')/stat" 2> /dev/null)
  tmux -S "$TMP/sock" kill-server 2> /dev/null
  printf 'run %d: --no-tui %s s, dashboard %s s in %d steps (%s; tmux server %s s CPU)\n' "$i" "$(secs "$TMP/plain.$i")" "$(secs "$TMP/tui.$i")" "$steps" \
    "$(grep -o '[0-9]* frames, [0-9.]* s of CPU' "$TMP/tui.$i")" "$tcpu"
done
awk -v n="$repeat" -v steps="$steps" -v tokps="$per_step" -v dir="$TMP" 'function secs(f,   cmd, v) {
    cmd = "sed -n \"s/.* \\([0-9.]*\\) s in steps.*/\\1/p\" " f; cmd | getline v; close(cmd); return v + 0 }
  BEGIN {
  for (i = 1; i <= n; i++) {
    a = secs(dir "/plain." i); b = secs(dir "/tui." i); pa += a; pb += b
    if (i == 1 || a < ma) ma = a
    if (i == 1 || b < mb) mb = b
  }
  printf "mean tokens/s: --no-tui %.0f, dashboard %.0f (%+.2f%% time)\n", steps * tokps * n / pa, steps * tokps * n / pb, 100 * (pb - pa) / pa
  printf "best tokens/s: --no-tui %.0f, dashboard %.0f (%+.2f%% time)\n", steps * tokps / ma, steps * tokps / mb, 100 * (mb - ma) / ma
  for (i = 1; i <= n; i++) r[i] = secs(dir "/tui." i) / secs(dir "/plain." i)
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (r[j] < r[i]) { x = r[i]; r[i] = r[j]; r[j] = x }
  med = n % 2 ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2
  printf "median of the paired ratios (dashboard time / --no-tui time, neighbours in time): %+.2f%%\n", 100 * (med - 1)
}'
