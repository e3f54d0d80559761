#!/usr/bin/env bash
# tests/test_tui.sh - the dashboard in a real terminal: `mgt train` inside tmux at 80x24 and
# 160x48 with 2 data-parallel ranks (tests/presets/tui.ini), the screen read with capture-pane.
# Asserts: the step advances; loss and tokens/s are numbers; every rank has a row; the
# communication table shows all-reduce traffic; p pauses (the step stops) and p resumes; s writes
# a checkpoint; q (80x24) and Ctrl-C (160x48) stop with a checkpoint and exit 130; the terminal is
# restored (alternate screen left, summary printed); --tui-frames N exits by itself; a crash
# signal (SIGSEGV) still restores the terminal. Skips (77) without tmux.
set -u
cd "$(dirname "$0")/.."
command -v tmux > /dev/null || { echo "SKIP: tmux is not installed (setup.sh installs it)"; exit 77; }
[ -s build/testdata/tiny_train.bin ] || { echo "SKIP: build/testdata/tiny_train.bin is missing (tests/run.sh makes it)"; exit 77; }
[ -x ./mgt ] || { echo "FAIL: ./mgt is not built"; exit 1; }
TMP=$(mktemp -d)
SOCK=$TMP/tmux.sock
tm() { tmux -S "$SOCK" "$@"; }
trap 'tm kill-server 2> /dev/null; rm -rf "$TMP"' EXIT
LOC=C.UTF-8
locale -a 2> /dev/null | grep -qix 'c.utf-\?8' || LOC=en_US.UTF-8

screen() { tm capture-pane -p -t t > "$TMP/screen"; }
fail() { echo "FAIL ($SIZE): $*"; echo "--- screen:"; cat "$TMP/screen"; exit 1; }
step() { screen; sed -n 2p "$TMP/screen" | grep -o 'step [0-9]*/' | grep -o '[0-9]*'; }
start() { # cols rows extra-args...
  local cols=$1 rows=$2; shift 2
  SIZE=${cols}x$rows
  tm kill-session -t t 2> /dev/null
  tm new-session -d -s t -x "$cols" -y "$rows" \
    "env TERM=xterm-256color LANG=$LOC LC_ALL=$LOC ./mgt train tests/presets/tui.ini --set checkpoint.dir=$TMP/ck$cols $*; echo \"EXIT=\$?\"; sleep 120"
}
wait_for() { # regex seconds: until the screen matches
  local i
  for ((i = 0; i < $2 * 10; i++)); do screen; grep -Eq "$1" "$TMP/screen" && return 0; sleep 0.1; done
  return 1
}
send() { tm send-keys -t t "$@"; }

check_size() { # cols rows stop-key
  local cols=$1 rows=$2 key=$3 s1 s2 r
  start "$cols" "$rows"
  wait_for 'step [1-9][0-9]*/' 20 || fail "no step within 20 s"
  s1=$(step); sleep 1.2; s2=$(step)
  [ "$s2" -gt "$s1" ] || fail "the step does not advance ($s1 then $s2)"
  grep -Eq 'now [0-9]+\.[0-9]+ +best [0-9]+\.[0-9]+' "$TMP/screen" || fail "no loss figures"
  grep -Eq 'tokens/s +[0-9.]+[kMG]? ' "$TMP/screen" || fail "tokens/s is not a number"
  grep -q 'RUNNING' "$TMP/screen" || fail "state is not RUNNING"
  for r in 0 1; do grep -Eq "^. +$r +$r +0 +0 cpu" "$TMP/screen" || fail "rank $r has no row"; done
  if [ "$cols" -ge 152 ]; then grep -Eq 'all-reduce +[1-9][0-9]* +[0-9.]+[BKMG]' "$TMP/screen" || fail "no all-reduce traffic in the overview"; fi
  send 3; wait_for 'communication, per step' 3 || fail "3 does not show the communication view"
  grep -Eq 'all-reduce +[1-9][0-9]* +[0-9.]+[KMG] +[0-9.]+ +[0-9.]+' "$TMP/screen" || fail "no all-reduce traffic for dp 2"
  send Tab; wait_for '^ step .*overview' 3 || fail "Tab does not go back to the overview"
  send p; wait_for 'PAUSED' 5 || fail "p does not pause"
  s1=$(step); sleep 1.5; s2=$(step)
  [ "$s1" = "$s2" ] || fail "the step advances while paused ($s1 then $s2)"
  send s; sleep 1.5
  ls "$TMP/ck$cols"/step_*.safetensors > /dev/null 2>&1 || fail "s wrote no checkpoint"
  send p; wait_for 'RUNNING' 5 || fail "p does not resume"
  sleep 1; s2=$(step)
  [ "$s2" -gt "$s1" ] || fail "the step does not advance after resuming ($s1 then $s2)"
  send "$key"
  wait_for 'EXIT=' 20 || fail "$key did not end the run"
  grep -q 'EXIT=130' "$TMP/screen" || fail "exit status is not 130"
  grep -q '^dashboard: step [0-9]*/100000 .*loss [0-9.]*' "$TMP/screen" || fail "no summary after the dashboard closed"
  grep -q 'resume with: mgt train' "$TMP/screen" || fail "no resume hint"
  [ "$(tm display -p -t t '#{alternate_on}')" = 0 ] || fail "the terminal is still on the alternate screen"
  s2=$(ls "$TMP/ck$cols"/step_*.safetensors | tail -1)
  [ -s "$s2" ] || fail "no checkpoint after $key"
  cp "$TMP/screen" "$TMP/final_$cols"
  echo "ok $SIZE: steps advance, figures, ranks, all-reduce traffic, pause/resume, s, $key -> exit 130 with $(basename "$s2")"
}

check_size 80 24 q
check_size 160 48 C-c

# --tui-frames N: the dashboard closes by itself and the run stops with a checkpoint
SIZE=frames
start 80 24 --tui-frames 15
wait_for 'EXIT=' 20 || fail "--tui-frames 15 did not exit"
grep -q 'EXIT=130' "$TMP/screen" || fail "--tui-frames: exit status is not 130"
[ "$(tm display -p -t t '#{alternate_on}')" = 0 ] || fail "--tui-frames: the terminal is still on the alternate screen"
echo "ok --tui-frames 15 exits"

# a crash signal in the middle of training restores the terminal, then kills with the signal
SIZE=crash
start 80 24
wait_for 'step [1-9][0-9]*/' 20 || fail "no step within 20 s"
pid=$(pgrep -P "$(tm display -p -t t '#{pane_pid}')" -x mgt)
[ -n "$pid" ] || { pid=$(pgrep -P "$(pgrep -P "$(tm display -p -t t '#{pane_pid}')" | head -1)" -x mgt); }
[ -n "$pid" ] || fail "cannot find the mgt process"
kill -SEGV "$pid"
wait_for 'EXIT=' 10 || fail "SIGSEGV did not end the run"
grep -q 'EXIT=139' "$TMP/screen" || fail "SIGSEGV: exit status is not 139"
[ "$(tm display -p -t t '#{alternate_on}')" = 0 ] || fail "SIGSEGV: the terminal is still on the alternate screen"
echo "ok SIGSEGV restores the terminal"
echo "test_tui: ok"
