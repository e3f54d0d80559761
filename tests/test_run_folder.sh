#!/usr/bin/env bash
# tests/test_run_folder.sh - a run never destroys or mixes up another, and a checkpoint is trusted
# only when every byte of it is as written: a second run into a folder with checkpoints is refused
# (--overwrite, --resume latest), the folder lock, metrics.jsonl per run and per resume, a metrics
# write failure, stale temporary files, the checkpoint path of a resumed finished run, the checksum
# over header and data, strictly parsed metadata and a stored preset validated as `mgt train` does.
#
# Run from the repository root after `ninja mgt`:   tests/test_run_folder.sh
# Prints `ok - ...` or `FAIL - ...` per check; exits 0 only if every check passes. About 10 s.
set -u

ROOT=$(pwd)
MGT="$ROOT/mgt"
P="$ROOT/tests/presets/tiny.ini"
[ -x "$MGT" ] && [ -f "$P" ] || { echo "FAIL - run from the repository root after \`ninja mgt\`"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/mgt_test_run_folder.XXXXXX") || exit 1
BGPID=
cleanup() {
    if [ -n "$BGPID" ]; then kill "$BGPID" 2>/dev/null; wait "$BGPID" 2>/dev/null; fi
    rm -rf "$T"
}
export MGT_BASELINES="$T/baselines.tsv" # the sgemm rate mgt train measures is kept here, not in ~/.cache
trap cleanup EXIT
trap 'exit 1' INT TERM
cd "$T" || exit 1
cp "$P" . && P=$T/tiny.ini # a preset's paths are relative to its folder: here, beside the test's data

PASS=0 FAILS=0
ok() { echo "ok - $*"; PASS=$((PASS + 1)); }
fail() { echo "FAIL - $*"; FAILS=$((FAILS + 1)); }
RC=0
run() { local name=$1; shift; "$@" >"$T/$name.out" 2>"$T/$name.err"; RC=$?; }
has() { grep -qF -- "$2" "$T/$1"; } # has FILE PATTERN
train() { local name=$1; shift; run "$name" "$MGT" train "$P" --no-tui "$@"; }
steps_in() { python3 -c 'import json,sys; print(" ".join(str(json.loads(l)["step"]) for l in open(sys.argv[1]) if json.loads(l)["type"] == "train"))' "$1"; }
seq_line() { seq -s ' ' "$1" "$2"; }

# re-signs a checkpoint after editing it as a writer other than mgt might have: the checksum is
# splitmix64's finaliser over 8-byte words of the whole file, its own 16 digits read as '0' (see mgt__hash)
cat >"$T/ckpt.py" <<'EOF'
import json, re, struct, sys
M64 = 2**64 - 1
def mix(x):  # splitmix64's finaliser
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & M64
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & M64
    return x ^ (x >> 31)
def checksum(b):
    h, n = 0xcbf29ce484222325, len(b) // 8 * 8
    for (w,) in struct.iter_unpack("<Q", b[:n]): h = mix(h ^ w)
    for c in b[n:]: h = mix(h ^ c)
    return h
def load(path):
    d = open(path, "rb").read(); n = struct.unpack("<Q", d[:8])[0]
    return json.loads(d[8:8 + n]), d[8 + n:]
def save(path, header, data, pad=8):
    header["__metadata__"]["checksum"] = "0" * 16
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8) + (b"" if pad else b"   ")  # unpadded: a length of 3 mod 8
    raw = struct.pack("<Q", len(text)) + text + data
    at = raw.index(b'"checksum":"' + b"0" * 16) + 12
    raw = raw[:at] + b"%016x" % checksum(raw) + raw[at + 16:]
    open(path, "wb").write(raw)
cmd, path = sys.argv[1], sys.argv[2]
h, data = load(path)
if cmd == "meta":      # meta FILE KEY VALUE: set a metadata value and re-sign
    h["__metadata__"][sys.argv[3]] = sys.argv[4]; save(path, h, data)
elif cmd == "preset":  # preset FILE OLD NEW: replace text in the stored preset and re-sign
    m = h["__metadata__"]; assert sys.argv[3] in m["preset"], m["preset"]
    m["preset"] = m["preset"].replace(sys.argv[3], sys.argv[4]); save(path, h, data)
elif cmd == "odd":     # odd FILE: a header length that is not a multiple of 8 (legal safetensors)
    save(path, h, data, pad=0)
elif cmd == "shift":   # shift FILE: a 1-byte tensor first, so every float tensor starts at an odd offset
    for k, v in h.items():
        if k != "__metadata__": v["data_offsets"] = [o + 1 for o in v["data_offsets"]]
    h["pad"] = {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}; save(path, h, b"\0" + data)
elif cmd == "flip":    # flip FILE OLD NEW: edit the raw header bytes, no re-signing (a damaged file)
    raw = open(path, "rb").read(); assert raw.count(sys.argv[3].encode()) == 1
    open(path, "wb").write(raw.replace(sys.argv[3].encode(), sys.argv[4].encode()))
elif cmd == "topbits": # topbits FILE: the sign bits of two floats 4096 bytes apart, no re-signing
    raw = bytearray(open(path, "rb").read()); n = struct.unpack("<Q", raw[:8])[0]
    raw[8 + n + 7] ^= 0x80; raw[8 + n + 4103] ^= 0x80; open(path, "wb").write(raw)
elif cmd == "nosum":   # nosum FILE: remove the checksum key, keeping the header length
    raw = open(path, "rb").read(); m = re.search(rb',"checksum":"[0-9a-f]{16}"', raw)
    open(path, "wb").write(raw[:m.start()] + b" " * (m.end() - m.start()) + raw[m.end():])
EOF
ck() { python3 "$T/ckpt.py" "$@"; }

python3 - <<'EOF'
import random
s = ["The quick brown fox jumps over the lazy dog. ", "A stitch in time saves nine. "]
r = random.Random(1)
open("text.txt", "w").write("".join(r.choice(s) for _ in range(2000)) + "\n")
EOF
"$MGT" prepare --tokenizer byte text.txt -o tk >/dev/null 2>&1 || { fail "mgt prepare"; exit 1; }

# ---- 1. a second run into a folder with checkpoints ----------------------------------------------

train a1 --set train.steps=20
ls ck >ls_before.txt
train a2 --set train.steps=10
if [ "$RC" -eq 2 ] && has a2.err "already holds 2 checkpoints of another run" && has a2.err "--resume latest" && has a2.err "--overwrite" &&
    has a2.err "tiny.ini:29" && ls ck | cmp -s - ls_before.txt; then ok "a new run into a folder with checkpoints exits 2 offering --resume latest, another dir, --overwrite; nothing changed"
else fail "second run into ck: exit $RC (want 2); $(head -c 400 a2.err); $(ls ck | tr '\n' ' ')"; fi
run s0 "$MGT" sample ck --tokens 3
if [ "$RC" -eq 0 ] && [ -f ck/step_00000020.safetensors ]; then ok "the old run's checkpoints are still there for sample / --resume latest"
else fail "sample ck after a refused run: exit $RC"; fi

train a3 --set train.steps=10 --overwrite
if [ "$RC" -eq 0 ] && [ "$(ls ck | grep -c safetensors)" = 2 ] && [ -f ck/step_00000010.safetensors ] && [ ! -f ck/step_00000020.safetensors ] &&
    [ "$(steps_in ck/metrics.jsonl)" = "$(seq_line 1 10)" ]; then ok "--overwrite deletes the old run's checkpoints; metrics.jsonl has this run's steps only"
else fail "--overwrite: exit $RC; $(ls ck | tr '\n' ' '); metrics steps $(steps_in ck/metrics.jsonl); $(head -c 300 a3.err)"; fi

# pruning keeps this run's newest checkpoint.keep only, never another run's: an other run's
# checkpoint copied in after this run took the folder (as an mgt without the folder check would)
train p1 --set checkpoint.dir=pr --set train.steps=5 --set checkpoint.every=5
cp pr/step_00000005.safetensors other_run.safetensors
ck meta other_run.safetensors run_id 0123456789abcdef
ck meta other_run.safetensors step 3
train p2 --set checkpoint.dir=pr --resume latest --set train.steps=30 --set checkpoint.every=5 &
BGPID=$!
while [ ! -f pr/step_00000010.safetensors ] && kill -0 $BGPID 2>/dev/null; do sleep 0.01; done
cp other_run.safetensors pr/step_00000003.safetensors
wait $BGPID; RC=$?; BGPID=
if [ "$RC" -eq 0 ] && [ "$(ls pr | grep safetensors | tr '\n' ' ')" = "step_00000003.safetensors step_00000025.safetensors step_00000030.safetensors " ]; then
    ok "pruning (keep 2) removes only this run's older checkpoints, not another run's"
else fail "pruning: exit $RC; $(ls pr | tr '\n' ' ')"; fi

# ---- 2. the folder lock ------------------------------------------------------------------------

"$MGT" train "$P" --no-tui --set checkpoint.dir=lk --set train.steps=2000000 --set checkpoint.every=0 --set log.every=1000 >bg.out 2>bg.err &
BGPID=$!
for _ in $(seq 500); do grep -q process lk/mgt.lock 2>/dev/null && break; sleep 0.02; done
train l2 --set checkpoint.dir=lk --set train.steps=5
if [ "$RC" -eq 2 ] && has l2.err "lk is in use by another run: process $BGPID on $(hostname) (" && has l2.err "checkpoint.dir=lk"; then ok "a second run into a folder in use exits 2 naming the first one's process ($BGPID)"
else fail "lock: exit $RC (want 2); $(head -c 300 l2.err); lock file: $(cat lk/mgt.lock 2>&1)"; fi
train l2r --set checkpoint.dir=lk --set train.steps=5 --resume latest
if [ "$RC" -eq 2 ] && has l2r.err "lk: no checkpoints (step_*.safetensors) in this folder yet: it is in use by a run that has written none: process $BGPID on"; then
    ok "--resume latest into a folder a live run holds before its first checkpoint says it is in use, naming the run"
else fail "resume into a live run's folder: exit $RC (want 2); $(head -c 300 l2r.err)"; fi
kill -TERM $BGPID; wait $BGPID; rc=$?; BGPID=
if [ "$rc" -eq 130 ] && ls lk | grep -q safetensors; then ok "the first run is undisturbed: SIGTERM saves its checkpoint (exit 130)"
else fail "first run: exit $rc; $(tail -2 bg.err)"; fi
train l3 --set checkpoint.dir=lk --resume latest --set train.steps=1
if [ "$RC" -eq 0 ]; then ok "the lock is released when a run ends"; else fail "after the first run ended: exit $RC; $(head -c 300 l3.err)"; fi

# ---- 3. metrics.jsonl across a resume, stale temporary files ---------------------------------------

# a resumed run goes on: its clock (metrics' elapsed_s) from the checkpoint's, its smoothed loss from
# the metrics' points before it (was: elapsed_s from 0, smoothed = the first loss), and it says so
train c1 --set checkpoint.dir=cont --set train.steps=200 --set checkpoint.every=100 --set log.every=5
train c2 --set checkpoint.dir=cont --set train.steps=210 --set checkpoint.every=100 --set log.every=5 --resume latest
el=$(python3 -c 'import json,sys
t = {l["step"]: l["elapsed_s"] for l in map(json.loads, open(sys.argv[1])) if l["type"] == "train"}
print(int(t[205] >= t[200]), t[200], t[205])' cont/metrics.jsonl 2>&1)
first=$(grep -m1 '^step 201/' c2.out)
if [ "$RC" -eq 0 ] && [ "${el%% *}" = 1 ] && has c2.out "resumed from cont/step_00000200.safetensors at step 200" &&
    [ -n "$first" ] && ! echo "$first" | grep -Eq 'loss ([0-9.]+) \(smoothed \1\)'; then
    ok "a resumed run's clock and smoothed loss go on (elapsed_s at steps 200, 205: ${el#* }; $(echo "$first" | cut -d'|' -f2))"
else fail "resume continuity: exit $RC; elapsed $el; $first"; fi

train m1 --set checkpoint.dir=mr --set train.steps=12 --set checkpoint.every=5 --set checkpoint.keep=5
rm mr/step_00000010.safetensors mr/step_00000012.safetensors # as if killed after step 12 with its last checkpoint at step 5
: >mr/step_00000007.safetensors.tmp                             # and one left half-written
train m2 --set checkpoint.dir=mr --set train.steps=12 --set checkpoint.every=5 --set checkpoint.keep=5 --resume latest
if [ "$RC" -eq 0 ] && [ "$(steps_in mr/metrics.jsonl)" = "$(seq_line 1 12)" ]; then ok "resume drops metrics lines after the resumed step: steps 1..12 once each"
else fail "metrics after resume: exit $RC; steps $(steps_in mr/metrics.jsonl)"; fi
if [ ! -e mr/step_00000007.safetensors.tmp ] && has m2.out "removed mr/step_00000007.safetensors.tmp"; then ok "a stale step_N.safetensors.tmp is removed when a run starts, and said"
else fail "stale tmp: $(ls mr | tr '\n' ' ')"; fi
train m3 --set checkpoint.dir=mr --set train.steps=12 --resume mr/step_00000005.safetensors
if [ "$RC" -eq 2 ] && has m3.err "steps after 5" && has m3.err "--overwrite"; then ok "resuming an older checkpoint into a folder with later ones exits 2 (two histories)"
else fail "resume older: exit $RC; $(head -c 300 m3.err)"; fi

# a fork: a run resumed from another folder's step 5 into fb, then the original's step 20 resumed
# into fb too. fb's step 10 has the same run id but is another line of history: refused
K=(--set checkpoint.keep=10)
train k1 --set checkpoint.dir=fa --set train.steps=20 "${K[@]}"
train k2 --set checkpoint.dir=fb --set train.steps=10 --resume fa/step_00000005.safetensors --set train.lr=1e-2 "${K[@]}"
train k3 --set checkpoint.dir=fb --set train.steps=25 --resume fa/step_00000020.safetensors "${K[@]}"
if [ "$RC" -eq 2 ] && has k3.err "another line of this run's history" && [ ! -f fb/step_00000025.safetensors ]; then
    ok "resuming into a folder that holds a fork of the same run (same id, resumed elsewhere) exits 2"
else fail "fork: exit $RC; $(head -c 300 k3.err); $(ls fb | tr '\n' ' ')"; fi
if [ "$(steps_in fb/metrics.jsonl)" = "$(seq_line 6 10)" ]; then ok "a run resumed from another folder starts its own metrics.jsonl (steps 6..10)"
else fail "fork metrics: $(steps_in fb/metrics.jsonl)"; fi

# names mgt does not write (step_5.safetensors) are not checkpoints: never taken, never deleted
train w1 --set checkpoint.dir=ow --set train.steps=5
cp fa/step_00000020.safetensors ow/step_5.safetensors
train w2 --set checkpoint.dir=ow --set train.steps=7 --resume latest --overwrite
if [ "$RC" -eq 0 ] && [ -f ow/step_5.safetensors ] && [ -f ow/step_00000007.safetensors ] && has w2.out "resumed from ow/step_00000005.safetensors"; then
    ok "step_5.safetensors is not a checkpoint: --resume latest and --overwrite leave it alone"
else fail "non-canonical name: exit $RC; $(ls ow | tr '\n' ' '); $(head -c 300 w2.err)"; fi

# a killed run's unfinished last metrics line goes when a resume cuts the file back
train u1 --set checkpoint.dir=un --set train.steps=8 --set checkpoint.every=4
rm un/step_00000008.safetensors
printf '{"type":"tr' >>un/metrics.jsonl
train u2 --set checkpoint.dir=un --set train.steps=8 --resume latest
if [ "$RC" -eq 0 ] && [ "$(steps_in un/metrics.jsonl)" = "$(seq_line 1 8)" ]; then ok "an unfinished last metrics line is dropped on resume (steps 1..8, each line JSON)"
else fail "unfinished line: exit $RC; $(tail -c 300 un/metrics.jsonl)"; fi

# ---- 4. a failed metrics write does not end the run ----------------------------------------------

if [ -w /dev/full ]; then
    train f1 --set checkpoint.dir=full --set log.metrics=/dev/full --set train.steps=8 --set checkpoint.every=0
    if [ "$RC" -eq 0 ] && [ -f full/step_00000008.safetensors ] && [ "$(grep -c 'cannot write /dev/full' f1.err)" = 1 ]; then
        ok "metrics on a full disk: warned once, trained on, checkpoint written"
    else fail "metrics on /dev/full: exit $RC; $(ls full 2>&1 | tr '\n' ' '); $(head -c 300 f1.err)"; fi
else ok "# skipped: no writable /dev/full"; fi

# ---- 5. the checkpoint a finished run resumed into another folder reports ---------------------

train r1 --set checkpoint.dir=fin --set train.steps=6 --set checkpoint.every=0
train r2 --set checkpoint.dir=fin2 --set train.steps=6 --resume fin
line=$(grep '^nothing to train:' r2.out)
if [ "$RC" -eq 0 ] && [[ "$line" == *"(checkpoint fin2/step_00000006.safetensors)" ]] && [ -f fin2/step_00000006.safetensors ] && ! grep -q "final loss" r2.out; then
    ok "a finished run resumed into another folder: nothing to train, its checkpoint saved there, and the path it prints exists"
else fail "resume finished: exit $RC; $line; $(ls fin2 2>&1 | tr '\n' ' ')"; fi

# ---- 6. checkpoints that must not be trusted ---------------------------------------------------

C=fin/step_00000006.safetensors
cp $C flipped.safetensors && ck flip flipped.safetensors '"step":"6"' '"step":"2"'
run t1 "$MGT" sample flipped.safetensors --tokens 3
rc1=$RC
run t2 "$MGT" train "$P" --no-tui --set checkpoint.dir=t2 --resume flipped.safetensors
if [ "$rc1" = 2 ] && [ "$RC" = 2 ] && has t1.err "checksum mismatch" && has t2.err "checksum mismatch"; then ok "a changed header byte (step 6 -> 2) fails the checksum (sample and resume)"
else fail "header flip: sample exit $rc1, resume exit $RC; $(head -c 200 t1.err) / $(head -c 200 t2.err)"; fi
# tensors whose byte size is not a multiple of 8 (d_model 9: LayerNorm weights of 36 bytes): the
# writer hashed each tensor as its own run of words and the reader the whole data as one
train o1 --set checkpoint.dir=odd9 --set model.d_model=9 --set model.n_head=3 --set train.steps=2
run o2 "$MGT" sample odd9 --tokens 3
if [ "$RC" -eq 0 ]; then ok "a model with tensors of 36 bytes (d_model 9) reads back its checkpoint"
else fail "d_model 9: exit $RC; $(head -c 300 o2.err)"; fi
cp $C topbits.safetensors && ck topbits topbits.safetensors
run t11 "$MGT" sample topbits.safetensors --tokens 3
if [ "$RC" -eq 2 ] && has t11.err "checksum mismatch"; then ok "two flipped top bits (sign bits of two floats) fail the checksum"
else fail "top bits: exit $RC; $(head -c 300 t11.err)"; fi
cp $C nosum.safetensors && ck nosum nosum.safetensors
run t3 "$MGT" sample nosum.safetensors --tokens 3
if [ "$RC" -eq 2 ] && has t3.err "has no checksum"; then ok "a checkpoint without a checksum is refused"
else fail "no checksum: exit $RC; $(head -c 300 t3.err)"; fi
for v in -5 abc 6x 99999999999 ''; do
    cp $C bad.safetensors && ck meta bad.safetensors step "$v"
    run t4 "$MGT" train "$P" --no-tui --set checkpoint.dir=t4 --resume bad.safetensors
    if [ "$RC" -eq 2 ] && has t4.err "metadata \"step\" is \"$v\""; then ok "metadata step '$v' is refused, naming it"
    else fail "step '$v': exit $RC; $(head -c 300 t4.err)"; fi
done
for kv in "seed -1" "tokens_seen x" "skipped_steps 1" "skipped_steps 9 0" "run_id xyz"; do
    cp $C bad.safetensors && ck meta bad.safetensors ${kv%% *} "${kv#* }"
    run t5 "$MGT" train "$P" --no-tui --set checkpoint.dir=t5 --resume bad.safetensors
    if [ "$RC" -eq 2 ] && has t5.err "metadata \"${kv%% *}\""; then ok "metadata ${kv%% *} '${kv#* }' is refused"
    else fail "${kv%% *} '${kv#* }': exit $RC; $(head -c 300 t5.err)"; fi
done
cp $C fmt1.safetensors && ck meta fmt1.safetensors format mgt-checkpoint-1
run t6 "$MGT" sample fmt1.safetensors --tokens 3
if [ "$RC" -eq 2 ] && has t6.err "format 1"; then ok "a format-1 checkpoint (header unchecked) is refused, saying why"
else fail "format 1: exit $RC; $(head -c 300 t6.err)"; fi
cp $C inconsistent.safetensors && ck preset inconsistent.safetensors "\"model.n_head\":\"2\"" "\"model.n_head\":\"3\""
run t7 "$MGT" sample inconsistent.safetensors --tokens 3
if [ "$RC" -eq 2 ] && has t7.err "the preset stored in it is not valid" && has t7.err "n_head = 3"; then ok "sample validates the stored preset as train does (n_head 3, d_model 32)"
else fail "inconsistent stored preset: exit $RC; $(head -c 300 t7.err)"; fi
cp $C odd.safetensors && ck odd odd.safetensors
run t8 "$MGT" sample odd.safetensors --tokens 3 --seed 1
run t9 "$MGT" sample $C --tokens 3 --seed 1
if [ "$RC" -eq 0 ] && cmp -s t8.out t9.out; then ok "a header length not a multiple of 8 reads (tensors aligned on load), same text"
else fail "odd header: exit $RC; $(head -c 300 t8.err)"; fi
cp $C shifted.safetensors && ck shift shifted.safetensors
run t10 "$MGT" sample shifted.safetensors --tokens 3 --seed 1
if [ "$RC" -eq 0 ] && cmp -s t10.out t9.out; then ok "float tensors at offsets that are not multiples of 4 read (copied), same text"
else fail "shifted tensors: exit $RC; $(head -c 300 t10.err)"; fi
# the same two under UBSan, where an unaligned float load is an error (build/asan/mgt_clang: `ninja`)
if [ -x "$ROOT/build/asan/mgt_clang" ]; then
    for f in odd shifted; do
        run u_$f env ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 "$ROOT/build/asan/mgt_clang" sample $f.safetensors --tokens 3 --seed 1
        if [ "$RC" -eq 0 ] && cmp -s u_$f.out t9.out && ! grep -q "runtime error" u_$f.err; then ok "$f.safetensors under clang ASan+UBSan: no misaligned load"
        else fail "$f under UBSan: exit $RC; $(grep -m2 'runtime error\|ERROR' u_$f.err)"; fi
    done
fi

echo "# $PASS passed, $FAILS failed"
[ "$FAILS" -eq 0 ]
