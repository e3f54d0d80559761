#!/usr/bin/env bash
# tests/test_tui.sh - the dashboard in a real terminal: `mgt train` inside tmux at 80x24 and
# 160x48 with 2 data-parallel ranks (tests/presets/tui.ini), the screen read with capture-pane.
# Asserts: the step advances; loss and tokens/s are numbers; every rank has a row; the
# communication table shows all-reduce traffic; p pauses (the step stops) and p resumes; s writes
# a checkpoint; q (80x24) and Ctrl-C (160x48) stop with a checkpoint and exit 130; the terminal is
# restored (alternate screen left, summary printed); --tui-frames N exits by itself; a crash
# signal (SIGSEGV) still restores the terminal; an error in training (a periodic checkpoint that
# cannot be written) restores it, shows the state failed, names the file and key, exits 1. The
# header and the summary show the layout; the speedup is n/a without a single-rank measurement of
# the model (mgt bench) and a number with one.
# Issue 12 (conventions): memory with its unit (KiB), micro-batches in words; in every view at
# 80x24, 120x40 (1 rank), 160x48 and 200x60 (8 ranks) every row between header and footer begins
# and ends with a box border (a long checkpoint path, the ! marker) and the progress bar ends in
# the same column; "(1 rank)"; a footer message clears after 5 s; q and Ctrl-C leave the summary
# "stopped"; the header's elapsed time and the events' times are one clock, h:mm:ss; the loss
# chart's range leaves out the warmup spike; the dashboard's own figures only with MGT_TUI_DEBUG=1.
# Skips (77) without tmux or python3.
set -u
cd "$(dirname "$0")/.."
command -v tmux > /dev/null || { echo "SKIP: tmux is not installed (setup.sh installs it)"; exit 77; }
command -v python3 > /dev/null || { echo "SKIP: python3 is not installed"; exit 77; }
[ -s build/testdata/tiny_train.bin ] || { echo "SKIP: build/testdata/tiny_train.bin is missing (tests/run.sh makes it)"; exit 77; }
[ -x ./mgt ] || { echo "FAIL: ./mgt is not built"; exit 1; }
TMP=$(mktemp -d)
NSOCK=0 SOCK=$TMP/tmux0.sock
tm() { tmux -S "$SOCK" "$@"; }
trap 'for s in "$TMP"/tmux*.sock; do tmux -S "$s" kill-server 2> /dev/null; done; rm -rf "$TMP"' EXIT
LOC=C.UTF-8
locale -a 2> /dev/null | grep -qix 'c.utf-\?8' || LOC=en_US.UTF-8

screen() { tm capture-pane -p -t t > "$TMP/screen"; }
# py CHECK [ARGS]: a check of $TMP/screen that counts characters, not bytes (the screen is UTF-8)
py() {
  python3 - "$TMP/screen" "$@" << 'PY'
import re, sys
path, what = sys.argv[1], sys.argv[2]
lines = open(path, encoding='utf-8').read().split('\n')
def clock(s):  # h:mm:ss or m:ss in seconds
    p = [int(x) for x in s.split(':')]
    return p[0] * 3600 + p[1] * 60 + p[2] if len(p) == 3 else p[0] * 60 + p[1]
if what == 'boxes':  # COLS ROWS: every row between the header and the footer begins and ends with a border
    cols, rows = int(sys.argv[3]), int(sys.argv[4])
    bad = ['row %d is %d wide: %s' % (i + 1, len(l), l) for i, l in enumerate(lines[2:rows - 1], 2)
           if len(l) != cols or l[0] not in '\u2502\u250c\u2514' or l[-1] not in '\u2502\u2510\u2518']
    print('\n'.join(bad)); sys.exit(1 if bad else 0)
if what == 'bar_end':  # the column of the progress bar's end
    print(lines[1].index(']'))
if what == 'clock':  # the header's elapsed time is the run's clock: at least the newest event's time, both h:mm:ss
    el = re.search(r'elapsed +([0-9:]+)', lines[1]).group(1)
    ev = [re.match(r'^\u2502 *([0-9]+:[0-9:]+)  ', l) for l in lines]
    ev = [m.group(1) for m in ev if m]
    ok = re.fullmatch(r'[0-9]+:[0-5][0-9]:[0-5][0-9]', el) and ev and all(re.fullmatch(r'[0-9]+:[0-5][0-9]:[0-5][0-9]', e) for e in ev) \
        and clock(el) >= clock(ev[-1])
    print('elapsed %s, newest event at %s' % (el, ev[-1] if ev else None)); sys.exit(0 if ok else 1)
if what == 'loss_top':  # the loss chart's highest y label
    print(re.match(r'^\u2502 +([0-9.]+) ', lines[4]).group(1))
PY
}
fail() { echo "FAIL ($SIZE): $*"; echo "--- screen:"; cat "$TMP/screen"; exit 1; }
step() { screen; sed -n 2p "$TMP/screen" | grep -o 'step *[0-9]*/' | grep -o '[0-9][0-9]*'; }
start() { # cols rows extra-args...
  local cols=$1 rows=$2; shift 2
  SIZE=${cols}x$rows
  # a server of its own for each run: a new session on a server that is exiting after kill-session
  # fails under load ("server exited unexpectedly")
  tm kill-server 2> /dev/null
  NSOCK=$((NSOCK + 1)) SOCK=$TMP/tmux$NSOCK.sock
  CKDIR=$TMP/ck$NSOCK # a folder per run: a new run into a folder with checkpoints is refused
  tm new-session -d -s t -x "$cols" -y "$rows" \
    "env TERM=xterm-256color LANG=$LOC LC_ALL=$LOC MGT_BASELINES=$TMP/baselines$cols ${ENVS:-} ./mgt train tests/presets/tui.ini --set checkpoint.dir=$CKDIR $*; echo \"EXIT=\$?\"; sleep 120"
}
wait_for() { # regex seconds: until the screen matches
  local i
  for ((i = 0; i < $2 * 10; i++)); do screen; grep -Eq "$1" "$TMP/screen" && return 0; sleep 0.1; done
  return 1
}
send() { tm send-keys -t t "$@"; }
boxes() { py boxes "$1" "$2" > "$TMP/why" || { cat "$TMP/why"; fail "${3:-}: a row does not begin and end with a box border"; }; }
views() { # cols rows: each view's rows begin and end with borders, and its progress bar ends where the overview's does
  local v e0 e
  for v in 1 2 3; do
    send "$v"; sleep 0.7; screen
    boxes "$1" "$2" "view $v"
    e=$(py bar_end); [ "$v" = 1 ] && e0=$e
    [ "$e" = "$e0" ] || fail "the progress bar ends in column $e in view $v, $e0 in the overview"
  done
}

check_size() { # cols rows stop-key
  local cols=$1 rows=$2 key=$3 s1 s2 r
  start "$cols" "$rows" --set checkpoint.dir=$TMP/ck$((NSOCK + 1))/a-folder-with-a-name-long-enough-to-reach-the-border/runs/x
  CKDIR=$TMP/ck$NSOCK/a-folder-with-a-name-long-enough-to-reach-the-border/runs/x
  wait_for 'step +[1-9][0-9]*/' 20 || fail "no step within 20 s"
  s1=$(step); sleep 1.2; s2=$(step)
  [ "$s2" -gt "$s1" ] || fail "the step does not advance ($s1 then $s2)"
  grep -Eq 'now [0-9]+\.[0-9]+ +best [0-9]+\.[0-9]+' "$TMP/screen" || fail "no loss figures"
  grep -Eq 'tokens/s +[0-9.]+[kMG]? ' "$TMP/screen" || fail "tokens/s is not a number"
  grep -Eq 'RUNNING|EVALUATING' "$TMP/screen" || fail "state is neither RUNNING nor EVALUATING (the preset evaluates every 200 steps, a few ms apart)"
  grep -Eq ' \| 2 ranks: dp2 tp1 pp1( zero0 1f1b)? \| 1 micro-batch x 4 seq \| fp32 ' "$TMP/screen" || fail "the header does not show the layout and micro-batches in words"
  if grep -q ' mb[0-9]' "$TMP/screen"; then fail "the header still says mb<n>"; fi
  if grep -qs 'batch=' "$TMP/baselines$cols"; then grep -Eq 'speedup +[0-9]+\.[0-9]{2}x over 1 rank' "$TMP/screen" || fail "no speedup over the measured single rank"
  else grep -Eq 'speedup +n/a' "$TMP/screen" || fail "a speedup without a single-rank measurement"; fi
  for r in 0 1; do
    grep -Eq "^│[ !] +$r +$r +0 +0 cpu" "$TMP/screen" || fail "rank $r has no row inside the box"
    grep -E "^│[ !] +$r +$r +0 +0 cpu" "$TMP/screen" | grep -Eq ' [0-9.]+KiB +[0-9.]+KiB ' || fail "rank $r: memory without its unit"
    if grep -E "^│[ !] +$r +$r +0 +0 cpu" "$TMP/screen" | grep -Eq ' [0-9.]+[KMG] '; then fail "rank $r: memory as a bare count (136K)"; fi
  done
  py loss_top > "$TMP/why"
  awk '{ exit !($1 < 2) }' "$TMP/why" || fail "the loss chart's top is $(cat "$TMP/why"): the warmup spike sets the range"
  grep -Eq 'cut above: max [2-9]\.[0-9]+' "$TMP/screen" || fail "the loss chart does not say what it cut off"
  views "$cols" "$rows"
  if [ "$cols" -ge 160 ]; then grep -Eq 'all-reduce +[1-9][0-9]* +[0-9.]+(B|KiB|MiB|GiB) ' "$TMP/screen" || fail "no all-reduce traffic in the overview"; fi
  send 3; wait_for 'communication, per step' 3 || fail "3 does not show the communication view"
  grep -Eq 'all-reduce +[1-9][0-9]* +[0-9.]+(KiB|MiB|GiB) +[0-9.]+ +[0-9.]+' "$TMP/screen" || fail "no all-reduce traffic for dp 2"
  send Tab; wait_for '^ step .*overview' 3 || fail "Tab does not go back to the overview"
  send p; wait_for 'PAUSED' 5 || fail "p does not pause"
  s1=$(step); sleep 1.5; s2=$(step)
  [ "$s1" = "$s2" ] || fail "the step advances while paused ($s1 then $s2)"
  send s; wait_for 'checkpoint .*step_[0-9]+\.safetensors' 5 || fail "s wrote no checkpoint event"
  ls "$CKDIR"/step_*.safetensors > /dev/null 2>&1 || fail "s wrote no checkpoint"
  boxes "$cols" "$rows" "a checkpoint event"
  if [ "$cols" -lt 120 ]; then grep -Eq "checkpoint (…|\.\.\.)/runs/x/step_[0-9]+\.safetensors +│$" "$TMP/screen" || fail "the checkpoint's path does not keep its tail"; fi
  py clock > "$TMP/why" || fail "the header's elapsed time and the events' are not one clock: $(cat "$TMP/why")"
  send p; wait_for 'RUNNING' 5 || fail "p does not resume"
  grep -q '  resumed' "$TMP/screen" || fail "no message after p"
  sleep 1; s2=$(step)
  [ "$s2" -gt "$s1" ] || fail "the step does not advance after resuming ($s1 then $s2)"
  if [ "$cols" = 80 ]; then # footer messages expire (5 s)
    sleep 5; screen
    if tail -1 "$TMP/screen" | grep -q 'resumed'; then fail "the message 'resumed' is still shown 6 s later"; fi
  fi
  send "$key"
  wait_for 'EXIT=' 20 || fail "$key did not end the run"
  grep -q 'EXIT=130' "$TMP/screen" || fail "exit status is not 130"
  grep -q '^dashboard: step [0-9]*/100000 .*loss [0-9.]*' "$TMP/screen" || fail "no summary after the dashboard closed"
  grep -q '^dashboard: step [0-9]*/100000 (stopped) ' "$TMP/screen" || fail "the summary does not say stopped after $key"
  if [ -n "${ENVS:-}" ]; then grep -Eq '^dashboard: [0-9]+ frames \([0-9]+ drawn\), [0-9.]+ s of CPU' "$TMP/screen" || fail "no developer figures with $ENVS"
  elif grep -q '^dashboard: .* frames (' "$TMP/screen"; then fail "developer figures in the summary without MGT_TUI_DEBUG=1"; fi
  grep -q 'resume with: ./mgt train' "$TMP/screen" || fail "no resume hint"
  tm capture-pane -p -J -t t > "$TMP/joined" # long lines whole
  grep -q '| 2 ranks: dp 2 x tp 1 x pp 1, zero 0 | 1 micro-batch of 4 sequences |' "$TMP/joined" || fail "the printed header does not show the layout"
  grep -Eq "^dashboard: [0-9.]+[kM]? tokens/s, .*, speedup ($(grep -qs 'batch=' "$TMP/baselines$cols" && echo '[0-9]+\.[0-9]{2}x' || echo 'n/a')) \| [0-9]+:[0-9]{2}:[0-9]{2} elapsed \| 2 ranks: dp 2 x tp 1 x pp 1, zero 0, 1f1b, 1 micro-batch x 4 seq$" \
    "$TMP/joined" || fail "the summary lacks the speedup or the layout"
  [ "$(tm display -p -t t '#{alternate_on}')" = 0 ] || fail "the terminal is still on the alternate screen"
  s2=$(ls "$CKDIR"/step_*.safetensors | tail -1)
  [ -s "$s2" ] || fail "no checkpoint after $key"
  cp "$TMP/screen" "$TMP/final_$cols"
  echo "ok $SIZE: steps advance, figures, ranks, all-reduce traffic, pause/resume, s, $key -> exit 130 with $(basename "$s2")"
}

check_size 80 24 q
# a measured single rank of the same model (tests/presets/tui.ini has threads = 2, so one rank of 2
# threads): the 160x48 run shows its speedup; the 80x24 run had none and showed n/a
MGT_BASELINES=$TMP/baselines160 ./mgt bench tests/presets/tui.ini --set parallel.dp=1 --steps 2 > "$TMP/bench" 2>&1 ||
  { SIZE=bench; cat "$TMP/bench"; fail "mgt bench of one rank failed"; }
ENVS=MGT_TUI_DEBUG=1 check_size 160 48 C-c

# 1 rank at 120x40, 8 ranks at 200x60: every view's borders, the progress bar, the layout in words
SIZE=120x40
start 120 40 --set parallel.dp=1
wait_for 'step +[1-9][0-9]*/' 20 || fail "no step within 20 s"
grep -q ' | 1 rank: dp1 tp1 pp1 zero0 1f1b | 2 micro-batches x 4 seq | fp32 ' "$TMP/screen" || fail "the header does not show 1 rank and 2 micro-batches"
views 120 40
grep -q 'ms per collective in the last step, by rank; < marks the slowest (1 rank) ' "$TMP/screen" || fail "the communication view's title does not say what it shows (1 rank)"
send q; wait_for 'EXIT=' 20 || fail "q did not end the run"
tm capture-pane -p -J -t t > "$TMP/screen"
grep -q ' | 1 rank: dp 1 x tp 1 x pp 1, zero 0, 1f1b, 2 micro-batches x 4 seq$' "$TMP/screen" || fail "the summary does not show 1 rank"
echo "ok $SIZE, 1 rank: borders and progress bar in every view, (1 rank), 2 micro-batches x 4 seq"
SIZE=200x60
start 200 60 --set parallel.dp=8 --set train.global_batch=16 --set train.micro_batch=2
wait_for 'step +[1-9][0-9]*/' 20 || fail "no step within 20 s"
grep -q ' | 8 ranks: dp8 tp1 pp1 zero0 1f1b | 1 micro-batch x 2 seq | fp32 ' "$TMP/screen" || fail "the header does not show 8 ranks"
views 200 60
send 2; sleep 0.7; screen
for r in 0 1 2 3 4 5 6 7; do grep -Eq "^│[ !] +$r +$r +0 +0 cpu .*KiB" "$TMP/screen" || fail "rank $r has no row"; done
send q; wait_for 'EXIT=' 20 || fail "q did not end the run"
echo "ok $SIZE, 8 ranks: borders and progress bar in every view"

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
wait_for 'step +[1-9][0-9]*/' 20 || fail "no step within 20 s"
pid=$(pgrep -P "$(tm display -p -t t '#{pane_pid}')" -x mgt)
[ -n "$pid" ] || { pid=$(pgrep -P "$(pgrep -P "$(tm display -p -t t '#{pane_pid}')" | head -1)" -x mgt); }
[ -n "$pid" ] || fail "cannot find the mgt process"
kill -SEGV "$pid"
wait_for 'EXIT=' 10 || fail "SIGSEGV did not end the run"
grep -q 'EXIT=139' "$TMP/screen" || fail "SIGSEGV: exit status is not 139"
[ "$(tm display -p -t t '#{alternate_on}')" = 0 ] || fail "SIGSEGV: the terminal is still on the alternate screen"
echo "ok SIGSEGV restores the terminal"
# an error in training (not a signal): the checkpoint folder is replaced by a regular file while
# paused, so the next periodic checkpoint cannot be written. The run must stop (not train on
# without checkpoints), give the terminal back, show the state failed in the summary, name the
# file and the key, and exit 1.
SIZE=failure
start 160 24 --set checkpoint.dir=$TMP/ckfail --set checkpoint.every=50 --set log.metrics=$TMP/fail_metrics.jsonl
wait_for 'step +[1-9][0-9]*/' 20 || fail "no step within 20 s"
send p; wait_for 'PAUSED' 5 || fail "p does not pause"
rm -rf "$TMP/ckfail"; echo "not a folder" > "$TMP/ckfail"
send p
wait_for 'EXIT=' 20 || fail "the run did not stop when its checkpoint folder became a file"
tm capture-pane -p -J -t t > "$TMP/screen" # -J: the error lines joined whole
grep -q 'EXIT=1$' "$TMP/screen" || fail "exit status is not 1"
[ "$(tm display -p -t t '#{alternate_on}')" = 0 ] || fail "the terminal is still on the alternate screen"
grep -q '^dashboard: step [0-9]*/100000 (failed)' "$TMP/screen" || fail "the summary does not show the state failed"
grep -q "^mgt: $TMP/ckfail/step_[0-9]*\.safetensors\.tmp: cannot create: Not a directory" "$TMP/screen" || fail "the error does not name the file"
grep -q "^mgt: the checkpoint of step [0-9]* could not be written (checkpoint.dir = $TMP/ckfail, checkpoint.every = 50): training stopped" \
  "$TMP/screen" || fail "the error does not name the key"
grep -q "^mgt: no checkpoint to resume from in $TMP/ckfail" "$TMP/screen" || fail "no word on the checkpoint to resume from"
echo "ok a checkpoint that cannot be written stops the run: failed, terminal restored, exit 1"
echo "test_tui: ok"
