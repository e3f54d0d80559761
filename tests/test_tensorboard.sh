#!/usr/bin/env bash
# tests/test_tensorboard.sh - `[log] tensorboard = DIR` writes event files TensorBoard reads: every
# record's framing (length, masked CRC-32C of the length, data, masked CRC-32C of the data), the
# first Event's file_version, then one Event per logged step whose scalars equal metrics.jsonl's.
# Reads them with a decoder of its own (Python's standard library only); tests/check_tensorboard.py
# reads them with the tensorboard package itself (not in CI). About 2 s.
set -u
ROOT=$(pwd)
[ -x "$ROOT/mgt" ] || { echo "FAIL - run from the repository root after \`ninja mgt\`"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/mgt_test_tb.XXXXXX") || exit 1
export MGT_BASELINES="$T/baselines.tsv" # the sgemm rate mgt train measures is kept here, not in ~/.cache
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
cp "$ROOT/tests/presets/tiny.ini" . # a preset's paths are relative to its folder: here, beside the test's data
python3 -c "print('the cat sat on the mat and the dog ran far away. ' * 300)" >t.txt
"$ROOT/mgt" prepare --tokenizer byte t.txt -o tk >/dev/null 2>&1 || { echo "FAIL - mgt prepare"; exit 1; }
"$ROOT/mgt" train tiny.ini --no-tui --set log.tensorboard=tb --set parallel.dp=2 --set parallel.threads=2 \
    --set train.steps=12 --set log.every=3 --set checkpoint.every=3 --set checkpoint.keep=10 >train.out 2>&1 || { echo "FAIL - mgt train: $(tail -3 train.out)"; exit 1; }
cp -r tb tb_first
# a resume from step 6: a second event file that starts with SessionLog START at step 7
"$ROOT/mgt" train tiny.ini --no-tui --set log.tensorboard=tb --set parallel.dp=2 --set parallel.threads=2 --set train.steps=12 --set log.every=3 \
    --set checkpoint.keep=10 --resume ck/step_00000006.safetensors --overwrite >resume.out 2>&1 || { echo "FAIL - resume: $(tail -3 resume.out)"; exit 1; }
python3 - <<'EOF'
import glob, json, struct, sys

def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 & -(c & 1))
    return c ^ 0xFFFFFFFF

def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

def varint(b, i):
    v = s = 0
    while True:
        x = b[i]; i += 1; v |= (x & 0x7F) << s; s += 7
        if x < 0x80: return v, i

def fields(b):  # protobuf wire format: (field, wire type, value)
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        f, w = key >> 3, key & 7
        if w == 0: v, i = varint(b, i)
        elif w == 1: v = b[i:i + 8]; i += 8
        elif w == 5: v = b[i:i + 4]; i += 4
        elif w == 2: n, i = varint(b, i); v = b[i:i + n]; i += n
        else: raise AssertionError("wire type %d" % w)
        yield f, w, v

fails = 0
assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
def check(cond, what):
    global fails
    print(("ok - " if cond else "FAIL - ") + what)
    fails += not cond

files = glob.glob("tb_first/events.out.tfevents.*")
check(len(files) == 1, "one event file in tb/: %s" % files)
raw = open(files[0], "rb").read()
events, i, framing_ok = [], 0, True
while i < len(raw):
    head = raw[i:i + 8]
    n = struct.unpack("<Q", head)[0]
    framing_ok &= struct.unpack("<I", raw[i + 8:i + 12])[0] == masked(head)
    data = raw[i + 12:i + 12 + n]
    framing_ok &= len(data) == n and struct.unpack("<I", raw[i + 12 + n:i + 16 + n])[0] == masked(data)
    events.append(data)
    i += 16 + n
check(framing_ok and i == len(raw), "%d records, every length and data CRC-32C (masked) right, no bytes left over" % len(events))
check(len(events) == 1 + 6, "a record per step with a train or eval line (3, 5, 6, 9, 10, 12) and the version: %d" % len(events))
first = {f: v for f, w, v in fields(events[0])}
check(first.get(3) == b"brain.Event:2" and struct.unpack("<d", first[1])[0] > 1.6e9, "the first Event: file_version brain.Event:2, a wall time")
series = {}
for e in events[1:]:
    ev = {f: v for f, w, v in fields(e)}
    for f, w, value in fields(ev[5]):
        val = dict((g, x) for g, _, x in fields(value))
        series.setdefault(val[1].decode(), []).append((ev[2], struct.unpack("<f", val[2])[0]))
rows = [json.loads(l) for l in open("ck/metrics.jsonl")]
train = [r for r in rows if r["type"] == "train"]
evals = [r for r in rows if r["type"] == "eval"]
check([s for s, _ in series.get("train/loss", [])] == [r["step"] for r in train] == [3, 6, 9, 12], "train/loss at steps 3, 6, 9, 12")
check(all(abs(v - r["loss"]) < 1e-5 for (_, v), r in zip(series["train/loss"], train)), "train/loss equals metrics.jsonl's loss (float32)")
check(all(abs(v - r["lr"]) < 1e-7 for (_, v), r in zip(series["train/lr"], train)), "train/lr equals metrics.jsonl's lr")
check([s for s, _ in series.get("eval/val_loss", [])] == [r["step"] for r in evals] == [5, 10, 12], "eval/val_loss at steps 5, 10, 12")
want = {"train/grad_norm", "perf/tokens_per_s", "perf/step_s", "memory/peak_bytes", "comm/all-reduce_s"}
check(want <= set(series), "scalars %s present (of %s)" % (sorted(want), sorted(series)))
second = sorted(set(glob.glob("tb/events.out.tfevents.*")) - set(f.replace("tb_first/", "tb/") for f in files))
check(len(second) == 1, "the resumed run writes a file of its own: %s" % second)
if second:
    raw, recs, i = open(second[0], "rb").read(), [], 0
    while i < len(raw):
        n = struct.unpack("<Q", raw[i:i + 8])[0]; recs.append(raw[i + 12:i + 12 + n]); i += 16 + n
    ev = {f: v for f, w, v in fields(recs[1])}
    log = {f: v for f, w, v in fields(ev.get(7, b""))}
    check(ev.get(2) == 7 and log.get(1) == 1, "its second record: SessionLog START (status 1) at step 7, so TensorBoard drops the first file's steps from 7")
print("# %d failed" % fails)
sys.exit(1 if fails else 0)
EOF
