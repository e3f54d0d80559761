#!/usr/bin/env bash
# tests/test_cli.sh - the command-line contract of ./mgt: preset and data errors (exit 2 with
# file, line, key and what is valid), the training log / metrics / checkpoint contract, exact
# resume, Ctrl-C and SIGTERM (exit 130 + checkpoint), sampling and checkpoint checksums.
#
# Run from the repository root after `ninja mgt`:   tests/test_cli.sh
# Prints `ok - ...` or `FAIL - ...` per check; exits 0 only if every check passes.
# Works in a temporary folder (removed on exit); uses tiny models, about 10 s on 2 cores.
set -u

ROOT=$(pwd)
MGT="$ROOT/mgt"
P="$ROOT/tests/presets"
B="$P/bad"
if [ ! -x "$MGT" ] || [ ! -f "$P/tiny.ini" ]; then
    echo "FAIL - run from the repository root after \`ninja mgt\` (need ./mgt and tests/presets/tiny.ini)"
    exit 1
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/mgt_test_cli.XXXXXX") || exit 1
BGPID=
cleanup() {
    if [ -n "$BGPID" ]; then kill "$BGPID" 2>/dev/null; wait "$BGPID" 2>/dev/null; fi
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
cd "$T" || exit 1
cp "$P/tiny.ini" "$P/long.ini" . && P=$T # a preset's paths are relative to its folder: here, beside the test's data
export MGT_BASELINES="$T/baselines.tsv" # mgt bench records single-rank figures here, not in ~/.cache

PASS=0
FAILS=0
ok() { echo "ok - $*"; PASS=$((PASS + 1)); }
fail() { echo "FAIL - $*"; FAILS=$((FAILS + 1)); }

# run NAME CMD...: runs CMD with stdout in $T/NAME.out, stderr in $T/NAME.err; sets RC
RC=0
run() {
    local name=$1
    shift
    "$@" >"$T/$name.out" 2>"$T/$name.err"
    RC=$?
}

# expect_err DESC RC CMD... -- PATTERN...: CMD exits RC and its stderr contains every fixed
# PATTERN; on failure prints the actual exit code and stderr
expect_err() {
    local desc=$1 want=$2 pat missing=""
    shift 2
    local cmd=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do cmd+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    run err "${cmd[@]}"
    for pat in "$@"; do
        grep -qF -- "$pat" "$T/err.err" || missing="$missing [$pat]"
    done
    if [ "$RC" -eq "$want" ] && [ -z "$missing" ]; then
        ok "$desc"
    else
        fail "$desc: exit $RC (want $want)${missing:+, stderr lacks$missing}; stderr: $(head -c 400 "$T/err.err")"
    fi
}

# ---- data for the tests ------------------------------------------------------------------------

python3 - <<'EOF'
import random, struct
s = ["The quick brown fox jumps over the lazy dog. ", "A stitch in time saves nine. ",
     "All that glitters is not gold. ", "Where there is smoke there is fire. "]
r = random.Random(1)
open("text.txt", "w").write("".join(r.choice(s) for _ in range(2000)) + "\n")

def shard(name, toks, ntok=None, magic=20240520, version=1):
    h = [0] * 256
    h[0], h[1], h[2] = magic, version, len(toks) if ntok is None else ntok
    with open(name, "wb") as f:
        f.write(struct.pack("<256i", *h))
        f.write(struct.pack("<%dH" % len(toks), *toks))

shard("short.bin", [65] * 10)                          # fewer than seq_len + 1 = 17 tokens
shard("truncated.bin", [65] * 100, ntok=5000)          # header promises more than the file has
shard("magic.bin", [65] * 5000, magic=12345)           # wrong magic
shard("bigtoken.bin", [65] * 2000 + [300] + [65] * 2000)  # 300 >= vocab_size 256
open("headeronly.bin", "wb").write(b"\x00" * 100)      # shorter than the 1024-byte header
EOF
[ -f text.txt ] || { fail "python3 could not write the test data"; exit 1; }

run prepare "$MGT" prepare --tokenizer byte text.txt -o tk
if [ "$RC" -eq 0 ] && [ -s tk_train.bin ] && [ -s tk_val.bin ]; then ok "prepare --tokenizer byte makes tk_train.bin and tk_val.bin"
else fail "prepare: exit $RC; $(cat prepare.err)"; fi
if grep -q "holds .* tokens" prepare.err; then fail "prepare of the test text warns of a short shard: $(cat prepare.err)"; fi
printf 'hello world, this is a tiny.\n' > tiny29.txt
run tiny_prepare "$MGT" prepare --tokenizer byte tiny29.txt -o tiny29
if [ "$RC" -eq 0 ] && grep -q "warning: tiny29_val.bin holds 3 tokens: a preset reads it only with \[model\] seq_len 2 or less" tiny_prepare.err \
    && grep -q "warning: tiny29_train.bin holds 26 tokens" tiny_prepare.err; then ok "prepare of a 29-byte text warns that its 3-token val shard (and 26-token train shard) fit no preset"
else fail "prepare of a 29-byte text: exit $RC; $(cat tiny_prepare.err)"; fi

expect_err "prepare with a missing input exits 2 and names it" 2 "$MGT" prepare --tokenizer byte no_such_input.txt -o x -- "no_such_input.txt"
expect_err "prepare --val-fraction 0.9: out of range, not 'not a number'" 2 "$MGT" prepare --tokenizer byte --val-fraction 0.9 no_such_input.txt -o x -- \
    "--val-fraction: 0.9 is out of range (valid: 0 to 0.5"
expect_err "prepare --val-fraction abc: not a number" 2 "$MGT" prepare --tokenizer byte --val-fraction abc no_such_input.txt -o x -- \
    "--val-fraction: 'abc' is not a number (valid: 0 to 0.5"

# ---- 0. help: every command, exit 0; an option of another command is an error --------------------
for c in train sample check keys prepare bench plan version; do
    run help "$MGT" "$c" --help
    if [ "$RC" -eq 0 ] && head -1 help.out | grep -q "^usage: mgt $c"; then ok "mgt $c --help: usage on stdout, exit 0"
    else fail "mgt $c --help: exit $RC; $(head -2 help.out help.err)"; fi
done
expect_err "mgt plan --resume: an option of mgt train, exit 2" 2 "$MGT" plan "$ROOT/presets/quickstart.ini" --resume x -- "--resume is an option of mgt train"
expect_err "mgt bench --no-tui: an option of mgt train, exit 2" 2 "$MGT" bench "$ROOT/presets/quickstart.ini" --no-tui -- "--no-tui is an option of mgt train"
expect_err "mgt keys with a stray argument exits 2" 2 "$MGT" keys --bogus -- "unknown option --bogus"

# ---- 1. preset errors: exit 2, file:line, key, what is valid ------------------------------------

expect_err "unknown section: line of the header, nearest section suggested" 2 "$MGT" check "$B/unknown_section.ini" -- \
    "unknown_section.ini:6:" "[trian]" "[train]"
expect_err "unknown section with no keys is still reported" 2 "$MGT" check "$B/unknown_section_empty.ini" --set data.train= --set data.val= -- \
    "unknown_section_empty.ini:4:" "[modle]" "[model]"
expect_err "unknown key: n_layers -> n_layer" 2 "$MGT" check "$B/unknown_key.ini" -- "unknown_key.ini:3:" "n_layers" "did you mean 'n_layer'"
for pair in "train.learning_rate [train] lr" "model.block_size [model] seq_len" "train.max_iters [train] steps" "model.n_embd [model] d_model" \
    "train.warmup_steps [train] warmup" "train.batch_size [train] global_batch" "parallel.zero_stage [parallel] zero" "model.lr belongs in [train]"; do
    set -- $pair
    expect_err "--set $1: the name other tools use leads to mgt's (${*:2})" 2 "$MGT" check "$P/tiny.ini" --set "$1=1" -- "${*:2}"
done
expect_err "malformed integer" 2 "$MGT" check "$B/not_integer.ini" -- "not_integer.ini:4:" "n_layer" "not an integer" "1..1024"
expect_err "malformed number" 2 "$MGT" check "$B/not_number.ini" -- "not_number.ini:3:" "lr" "not a number" "0..10"
expect_err "value not one of the choices" 2 "$MGT" check "$B/not_choice.ini" -- "not_choice.ini:2:" "schedule" "cosin" "cosine|linear|constant"
expect_err "out-of-range value" 2 "$MGT" check "$B/out_of_range.ini" -- "out_of_range.ini:3:" "n_layer" "out of range" "1..1024"
expect_err "missing preset file" 2 "$MGT" check "$T/no_such_preset.ini" -- "no_such_preset.ini" "No such file"
expect_err "missing preset file (train)" 2 "$MGT" train "$T/no_such_preset.ini" --no-tui -- "no_such_preset.ini"
expect_err "a line that is not INI" 2 "$MGT" check "$B/not_ini.ini" -- "not_ini.ini:4:" "not an INI line" "key = value"
expect_err "d_model % n_head != 0 names both lines" 2 "$MGT" check "$B/heads.ini" -- "heads.ini:3" "heads.ini:4" "d_model" "n_head" "divisors"
expect_err "global_batch not a multiple of micro_batch" 2 "$MGT" check "$B/batch.ini" -- "batch.ini:2" "batch.ini:4" "global_batch" \
    "micro_batch" "multiple of 4"
expect_err "vocab_size below the byte tokenizer's 256" 2 "$MGT" check "$B/vocab_byte.ini" -- "vocab_byte.ini:2:" "vocab_size" "256"
expect_err "vocab_size below the gpt2 tokenizer's 50257" 2 "$MGT" check "$B/vocab_gpt2.ini" -- "vocab_gpt2.ini:4:" "vocab_size" "50257"
expect_err "min_lr above lr" 2 "$MGT" check "$B/min_lr.ini" -- "min_lr.ini:3:" "min_lr" "lr = 0.001"
expect_err "seq_len larger than the data (check)" 2 "$MGT" check "$P/tiny.ini" --set data.train=short.bin -- "short.bin" "seq_len"
expect_err "seq_len larger than the data (train)" 2 "$MGT" train "$P/tiny.ini" --no-tui --set data.train=short.bin -- "short.bin" "seq_len" "17"

expect_err "--set without '='" 2 "$MGT" check "$P/tiny.ini" --set model.n_layer -- "model.n_layer" "section.key=value"
expect_err "--set without a section" 2 "$MGT" check "$P/tiny.ini" --set n_layer=2 -- "section.key=value"
expect_err "--set without a value at the end" 2 "$MGT" check "$P/tiny.ini" --set -- "--set"
expect_err "--set unknown key" 2 "$MGT" check "$P/tiny.ini" --set model.n_layers=2 -- "n_layers" "did you mean 'n_layer'"
expect_err "--set unknown section" 2 "$MGT" check "$P/tiny.ini" --set modle.n_layer=2 -- "[modle]" "[model]"
expect_err "--set bad value" 2 "$MGT" check "$P/tiny.ini" --set train.lr=abc -- "train.lr=abc" "not a number" "0..10"
expect_err "--set out of range" 2 "$MGT" check "$P/tiny.ini" --set train.beta1=1.5 -- "beta1" "out of range"

# device = cuda where the CUDA library cannot be had (named explicitly, so a GPU here changes nothing):
# exit 2, the key, why, and the fix; tests/test_cuda_smoke.sh has the real library without a driver
MGT_CUDA_LIBRARY="$T/none.so" expect_err "--set parallel.device=cuda without the CUDA library" 2 "$MGT" train "$P/tiny.ini" --no-tui \
    --set parallel.device=cuda -- "[parallel] device = cuda, but no usable GPU" "none.so" "ninja cuda" "set device = cpu"
expect_err "dp = 2 in a file with the default batch: the batch does not divide, at dp's line" 2 "$MGT" check "$B/batch_dp.ini" -- \
    "batch_dp.ini:4:" "global_batch = 8" "micro_batch x dp = 8 x 2" "dp from" "global_batch from the default of [train] global_batch" \
    "or keep the batch with [train] micro_batch = 4 (1 micro-batch of 4 on each of the 2 DP ranks)"
expect_err "a GPU preset without its data: the preset's file and line, and mgt prepare" 2 "$MGT" check "$ROOT/presets/gpt2_124m_8gpu.ini" -- \
    "gpt2_124m_8gpu.ini:16: [data] train: " "matches no file" "mgt prepare"
expect_err "mgt plan --gpus 3 of the quick start: the message names --gpus 3 (not --set parallel.dp) and the dp that keep the batch" 2 \
    "$MGT" plan "$ROOT/presets/quickstart.ini" --gpus 3 -- "mgt: --gpus 3: [train] global_batch = 16" "dp from --gpus 3)" "a dp that divides 16: 1, 2, 4, 8, 16"
expect_err "tp must divide n_head" 2 "$MGT" check "$P/tiny.ini" --set parallel.tp=3 -- "tp = 3" "n_head"
expect_err "pp must not exceed n_layer" 2 "$MGT" check "$P/tiny.ini" --set parallel.pp=9 -- "pp = 9" "n_layer"
# interleaved 1F1B (parallel.pp_virtual): each refusal names the key and the fix
expect_err "pp_virtual without a pipeline" 2 "$MGT" check "$P/tiny.ini" --set parallel.pp_virtual=2 -- "pp_virtual = 2 with pp = 1" "set pp_virtual = 1, or pp >= 2"
expect_err "pp_virtual with gpipe" 2 "$MGT" check "$P/tiny.ini" --set parallel.pp=2 --set parallel.pp_virtual=2 --set parallel.pp_schedule=gpipe -- \
    "pp_virtual = 2 with pp_schedule = gpipe" "set pp_schedule = 1f1b, or pp_virtual = 1"
expect_err "pp_virtual: chunks of equal size" 2 "$MGT" check "$P/tiny.ini" --set parallel.pp=2 --set parallel.pp_virtual=2 -- \
    "n_layer = 2 blocks into 4 chunks" "make n_layer a multiple of pp x pp_virtual = 4, or set pp_virtual to one of: 1"
expect_err "pp_virtual: micro-batches in groups of pp" 2 "$MGT" check "$P/tiny.ini" --set model.n_layer=4 --set parallel.pp=2 --set parallel.pp_virtual=2 \
    --set train.micro_batch=4 -- "groups of pp = 2" "global_batch / (micro_batch x dp) = 1" "multiple of micro_batch x dp x pp = 8"
# zero-bubble (parallel.pp_schedule = zb): a refusal names the key and the fix; check says the schedule
expect_err "zb with full recompute" 2 "$MGT" check "$P/tiny.ini" --set parallel.pp=2 --set parallel.pp_schedule=zb --set train.recompute=full -- \
    "pp_schedule = zb with [train] recompute = full" "set recompute = selective or none, or pp_schedule = 1f1b"
run check_z "$MGT" check "$P/tiny.ini" --set parallel.pp=2 --set parallel.pp_schedule=zb
if [ "$RC" -eq 0 ] && grep -qF "schedule zb" "$T/check_z.out"; then ok "mgt check: pp 2 zb"; else fail "mgt check of pp 2 zb: exit $RC; $(grep -F schedule "$T/check_z.out")"; fi
run check_v "$MGT" check "$P/tiny.ini" --set model.n_layer=4 --set parallel.pp=2 --set parallel.pp_virtual=2
if [ "$RC" -eq 0 ] && grep -qF "stages         0: blocks 0-0,2-2 +embedding; 1: blocks 1-1,3-3 +head;" "$T/check_v.out" && grep -qF "schedule 1f1b interleaved x2" "$T/check_v.out"
then ok "mgt check: pp 2 x 2 chunks, stage 0 holds blocks 0 and 2"; else fail "mgt check of pp 2 x 2 chunks: exit $RC; $(grep -F stages "$T/check_v.out")"; fi

# a preset is a regular text file, read whole, each key once: never an empty preset, never a wait on
# a FIFO, never the tail of a long line as a key of its own
mkdir -p preset_dir && mkfifo preset_fifo
printf '[model]\nn_layer = 2\n\0\n' > nul.ini
expect_err "a folder as preset is refused" 2 "$MGT" check preset_dir -- "preset_dir: cannot open the preset: it is a folder, not a file"
expect_err "/dev/null as preset is refused" 2 "$MGT" check /dev/null -- "/dev/null" "character device, not a file"
expect_err "a FIFO as preset is refused at once" 2 timeout 10 "$MGT" check preset_fifo -- "preset_fifo" "FIFO (named pipe), not a file"
expect_err "a NUL byte in a preset is refused at its line" 2 "$MGT" check nul.ini -- "nul.ini:3:" "NUL byte"
python3 - <<'EOF2'
data = "[data]\ntrain = tk_train.bin\nval = tk_val.bin\n"
open("long_comment.ini", "w").write("[model]\n; " + "x" * 197 + "n_layer = 7\n" + data)  # inih's 199th byte starts "n_layer = 7"
open("long_lines.ini", "w").write("[checkpoint]\ndir = " + "d" * 230 + "\n[model]\nn_layers = 3\n")
open("dup.ini", "w").write("[model]\nn_layer = 2\nn_layer = 3\n")
open("indent.ini", "w").write("[data]\ntrain = tk_train.bin\n  val = tk_val.bin\n")
open("sections.ini", "w").write("[model]\nn_layer = 1\n" + data + "[model]\nn_head = 1\n")
EOF2
run long_comment "$MGT" check long_comment.ini
if [ "$RC" -eq 0 ] && grep -Eq '^n_layer += 4 ' long_comment.out; then ok "the tail of a long comment is not a key (n_layer stays 4)"
else fail "long comment: exit $RC, $(grep '^n_layer' long_comment.out); $(head -c 300 long_comment.err)"; fi
expect_err "after a 236-character line errors name the right line" 2 "$MGT" check long_lines.ini -- "long_lines.ini:4:" "n_layers"
expect_err "a key set twice names both lines" 2 "$MGT" check dup.ini -- "dup.ini:3:" "dup.ini:2" "n_layer" "set again"
expect_err "an indented line (INI's continued value) is refused" 2 "$MGT" check indent.ini -- "indent.ini:3:" "indent.ini:2" "[data] train" \
    "remove the indentation"
run sections "$MGT" check sections.ini
if [ "$RC" -eq 0 ] && grep -Eq '^n_head += 1 ' sections.out && grep -q 'warning: sections.ini:6: \[model\] again (first at sections.ini:1)' sections.err
then ok "a repeated [section] is read, with a warning naming both lines"
else fail "repeated section: exit $RC; $(head -c 300 sections.err)"; fi

if [ -e ck ] || [ -e runs ]; then fail "a rejected preset wrote files: $(ls -d ck runs 2>/dev/null)"; else ok "rejected presets wrote nothing"; fi

run check "$MGT" check "$P/tiny.ini"
if [ "$RC" -eq 0 ] && grep -q '^\[model\]' check.out && grep -Eq '^n_layer +=  *2 ' check.out && grep -Eq '^d_model +=  *32 ' check.out &&
    grep -Eq '^metrics +=' check.out && grep -q '^; layout' check.out && grep -q '^parameters ' check.out; then
    ok "check of a good preset prints the resolved config and the layout, exit 0"
else fail "check tiny.ini: exit $RC; $(head -c 300 check.err)"; fi
if grep -q '^memory by category (planned' check.out && grep -Eq '^ rank +params +grads +optimizer +activations +buffers +workspace +total$' check.out &&
   grep -Eq '^    0 +[0-9.]+ [KMG]iB( +[0-9.]+ [KMG]iB){6}$' check.out; then ok "check prints each rank's memory by category, as its help says"
else fail "check tiny.ini: no memory by category: $(grep -A3 'memory by' check.out | head -4)"; fi
run check2 "$MGT" check "$P/tiny.ini" --set model.n_layer=1
if [ "$RC" -eq 0 ] && grep -Eq '^n_layer +=  *1 ' check2.out; then ok "check applies --set"; else fail "check --set model.n_layer=1: exit $RC"; fi

# ---- 2. data errors: exit 2 and the file is named -----------------------------------------------

expect_err "missing train shard" 2 "$MGT" train "$P/tiny.ini" --no-tui --set data.train=no_such.bin -- "no_such.bin"
expect_err "missing val shard" 2 "$MGT" train "$P/tiny.ini" --no-tui --set data.val=no_such_val.bin -- "no_such_val.bin"
expect_err "truncated shard (header says more tokens)" 2 "$MGT" train "$P/tiny.ini" --no-tui --set data.train=truncated.bin -- \
    "truncated.bin" "truncated"
expect_err "shard shorter than the 1024-byte header" 2 "$MGT" train "$P/tiny.ini" --no-tui --set data.train=headeronly.bin -- \
    "headeronly.bin" "1024"
expect_err "shard with the wrong magic" 2 "$MGT" train "$P/tiny.ini" --no-tui --set data.train=magic.bin -- "magic.bin" "20240520"
expect_err "a shard pattern in a folder that does not exist: matches no file, names the folder and mgt prepare" 2 "$MGT" check "$P/tiny.ini" \
    --set "data.train=no_such_folder/shard_*.bin" -- "'no_such_folder/shard_*.bin' matches no file: the folder no_such_folder does not exist" "mgt prepare"
expect_err "token id >= vocab_size (train)" 2 "$MGT" train "$P/tiny.ini" --no-tui --set data.train=bigtoken.bin -- "bigtoken.bin" "300" "256"
expect_err "token id >= vocab_size (val)" 2 "$MGT" train "$P/tiny.ini" --no-tui --set data.val=bigtoken.bin -- "bigtoken.bin" "300"
expect_err "check also validates the train shard" 2 "$MGT" check "$P/tiny.ini" --set data.train=magic.bin -- "magic.bin"
expect_err "check also validates the val shard" 2 "$MGT" check "$P/tiny.ini" --set data.val=no_such_val.bin -- "no_such_val.bin"
mkfifo shard_fifo && mkdir -p shard_dir bpe_fifo bpe_dir/encoder.json && mkfifo bpe_fifo/encoder.json
expect_err "a FIFO as the train shard is refused at once" 2 timeout 10 "$MGT" train "$P/tiny.ini" --no-tui --set data.train=shard_fifo -- \
    "[data] train: shard_fifo: cannot open the token shard: it is a FIFO (named pipe), not a file"
expect_err "a folder as the val shard is refused" 2 "$MGT" train "$P/tiny.ini" --no-tui --set data.val=shard_dir -- "shard_dir" "a folder, not a file"
expect_err "a FIFO as encoder.json is refused at once" 2 timeout 10 "$MGT" prepare --tokenizer gpt2 --bpe-dir bpe_fifo text.txt -o bpe_out -- \
    "bpe_fifo/encoder.json: is a FIFO (named pipe), not a file"
expect_err "a folder as encoder.json is refused" 2 "$MGT" prepare --tokenizer gpt2 --bpe-dir bpe_dir text.txt -o bpe_out -- \
    "bpe_dir/encoder.json: is a folder, not a file"
mkdir -p no_bpe
expect_err "gpt2 without its BPE files names ./setup.sh --gpt2" 2 "$MGT" prepare --tokenizer gpt2 --bpe-dir no_bpe text.txt -o bpe_out -- \
    "no_bpe/encoder.json" "./setup.sh --gpt2"
if [ -e ck ]; then fail "a run rejected for its data wrote $T/ck"; else ok "runs rejected for their data wrote nothing"; fi

# ---- 3. training contract -----------------------------------------------------------------------

LINE_RE='^step [0-9]+/[0-9]+ \| loss [0-9.]+ \(smoothed [0-9.]+\) \| lr [0-9.e+-]+ \| norm [0-9.]+ \| [0-9]+ tok/s \| [0-9.]+ ms \| mfu ([0-9.]+%|n/a) \| mem [0-9.]+ [KMG]iB \| [0-9]+:[0-9]{2}:[0-9]{2} elapsed, eta [0-9]+:[0-9]{2}:[0-9]{2}$'
run train "$MGT" train "$P/tiny.ini" --no-tui
if [ "$RC" -eq 0 ]; then ok "train tiny.ini exits 0"; else fail "train tiny.ini: exit $RC; $(head -c 400 train.err)"; fi
n_step=$(grep -c '^step ' train.out)
n_good=$(grep -Ec "$LINE_RE" train.out)
if [ "$n_step" -eq 20 ] && [ "$n_good" -eq 20 ]; then ok "20 log lines (log.every=1) in the documented format"
else fail "log lines: $n_step start with 'step ', $n_good match the format; e.g. $(grep '^step ' train.out | head -1)"; fi
if grep -Eq '^step 20/20 ' train.out && [ "$(grep -E "$LINE_RE" train.out | head -1 | cut -d' ' -f2)" = "1/20" ]; then
    ok "steps count 1/20 .. 20/20"; else fail "first/last step lines: $(grep '^step ' train.out | sed -n '1p;$p' | tr '\n' ';')"; fi

if grep -A1 '^step 5/20 ' train.out | tail -1 | grep -q '^  step 5: val loss '; then
    ok "a validation's line follows its step's line"; else fail "after step 5: $(grep -A1 '^step 5/20 ' train.out | tail -1)"; fi
if grep -m1 '^mgt ' train.out | grep -qF '| 1 rank: dp 1 x tp 1 x pp 1, zero 0 | 2 micro-batches of 2 sequences | cpu, 1 thread |' &&
    grep -qE '^MFU against [0-9.]+ GFLOP/s \(this machine.s sgemm, measured ' train.out && grep -qE '^step 20/20 .* \| mfu [0-9.]+% \|' train.out; then
    ok "banner: fields labelled, no schedule at pp 1; MFU against the measured sgemm, shown in the log"
else fail "banner/MFU: $(grep -m2 -E '^(mgt|MFU) ' train.out | tr '\n' ';')"; fi
if [ -e ck/mgt.lock ]; then fail "a finished run left ck/mgt.lock behind"; else ok "a finished run leaves no mgt.lock"; fi
run one "$MGT" train "$P/tiny.ini" --no-tui --set checkpoint.dir=one --set train.steps=1
if [ "$RC" -eq 0 ] && grep -q '^done: 1 step, final loss' one.out; then ok "done: 1 step"; else fail "one step: $(grep '^done' one.out)"; fi
# mgt export: a folder for from_pretrained; a second export into it is refused unless --overwrite
run export1 "$MGT" export ck -o exported
run export2 "$MGT" export ck -o exported
E2=$RC
run export3 "$MGT" export ck -o exported --overwrite
if [ "$E2" -eq 2 ] && grep -q "exported already holds config.json.*--overwrite" export2.err && [ "$RC" -eq 0 ] && [ -s exported/model.safetensors ] &&
    grep -q '^wrote exported' export1.out; then ok "export: written, refused into a folder holding a model (exit 2), replaced with --overwrite"
else fail "export: second exit $E2 ($(cat export2.err)), --overwrite exit $RC ($(cat export3.err))"; fi
# device auto where no CUDA library was ever built (an mgt alone in its folder): the CPU, without a line about it
mkdir -p alone && cp "$MGT" alone/mgt
run alone alone/mgt train "$P/tiny.ini" --no-tui --set checkpoint.dir=alone_ck --set train.steps=1
if [ "$RC" -eq 0 ] && ! grep -q 'device auto' alone.out alone.err; then ok "device auto, no CUDA library built: no line about it"
else fail "device auto, no CUDA library built: exit $RC; $(grep -h 'device auto' alone.out alone.err)"; fi
if python3 - ck/metrics.jsonl <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
train = [r for r in rows if r.get("type") == "train"]
evals = [r for r in rows if r.get("type") == "eval"]
assert len(train) == 20 and len(rows) == 24, "%d rows, %d train" % (len(rows), len(train))
need = ["step", "loss", "lr", "grad_norm", "tokens", "tokens_per_s", "step_s", "mem_peak", "elapsed_s"]
for i, r in enumerate(train):
    for k in need:
        assert k in r and isinstance(r[k], (int, float)), "train row %d lacks %s: %r" % (i, k, r)
    assert r["step"] == i + 1 and r["tokens"] == 64 * (i + 1), r
    assert "step_ms" not in r and "val_loss" not in r, r
assert [r["step"] for r in evals] == [5, 10, 15, 20], evals
for r in evals:
    assert set(r) == {"type", "step", "val_loss", "tokens", "elapsed_s"} and r["val_loss"] > 0, r
times = [r["elapsed_s"] for r in rows]
assert times == sorted(times), "elapsed_s goes back: %r" % times
EOF
then ok "metrics.jsonl: 20 train lines (step, loss, lr, grad_norm, tokens, tokens_per_s, step_s, mem_peak, elapsed_s) and 4 eval lines, typed"
else fail "metrics.jsonl (see the python error above)"; fi
if python3 -c "
import json, sys
rows = [json.loads(l) for l in open('ck/metrics.jsonl') if json.loads(l)['type'] == 'train']
log = {int(l.split()[1].split('/')[0]): float(l.split('|')[1].split()[1]) for l in open('train.out') if l.startswith('step ')}
sys.exit(0 if all(abs(r['loss'] - log[r['step']]) < 6e-5 for r in rows) else 1)"; then
    ok "metrics.jsonl losses agree with the log lines"; else fail "metrics.jsonl losses differ from the log lines"; fi
run ranks "$MGT" train "$P/tiny.ini" --no-tui --set checkpoint.dir=ranks --set parallel.dp=2 --set train.steps=3 --set parallel.threads=2
if [ "$RC" -eq 0 ] && python3 - ranks/metrics.jsonl <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["type"] for r in rows] == ["train", "ranks"] * 3 + ["eval"], [r["type"] for r in rows]
for r in rows[1:6:2]:
    assert len(r["ranks"]) == 2 and {"rank", "dp", "step_s", "compute_s", "comm_s", "comm", "mem_peak"} <= set(r["ranks"][1]), r
    assert r["ranks"][0]["comm"]["all-reduce"]["calls"] > 0, r
EOF
then ok "metrics.jsonl of 2 ranks: a typed ranks line after each train line"
else fail "ranks lines: exit $RC; $(head -c 300 ranks.err)"; fi

ckpts=$(cd ck && ls step_*.safetensors 2>/dev/null | tr '\n' ' ')
if [ "$ckpts" = "step_00000015.safetensors step_00000020.safetensors " ]; then ok "checkpoints every 5 steps, only the newest keep=2 kept"
else fail "checkpoints in ck: '$ckpts' (want step_00000015 and step_00000020)"; fi

# an uninterrupted run that keeps every checkpoint, then resume from its step 10 in a fresh folder
run full "$MGT" train "$P/tiny.ini" --no-tui --set checkpoint.dir=full --set checkpoint.keep=100
mkdir -p resumed && cp full/step_00000010.safetensors resumed/ 2>/dev/null
run resumed "$MGT" train "$P/tiny.ini" --no-tui --set checkpoint.dir=resumed --resume latest
first=$(grep -E "$LINE_RE" resumed.out | head -1 | cut -d' ' -f2)
if [ "$RC" -eq 0 ] && [ "$first" = "11/20" ]; then ok "--resume latest continues at step 11 of 20"
else fail "--resume latest: exit $RC, first step line '$first'; $(head -c 300 resumed.err)"; fi
losses() { grep -E "$LINE_RE" "$1" | awk -F' [|] ' -v from="$2" '{split($1, s, "[ /]"); split($2, l, " "); if (s[2] + 0 >= from) print s[2], l[2]}'; }
if [ "$(losses full.out 11)" = "$(losses resumed.out 11)" ] && [ -n "$(losses resumed.out 11)" ]; then
    ok "losses after resuming equal those of the uninterrupted run exactly (steps 11..20)"
else fail "resumed losses differ: $(diff <(losses full.out 11) <(losses resumed.out 11) | head -6 | tr '\n' ';')"; fi
run resumed_file "$MGT" train "$P/tiny.ini" --no-tui --set checkpoint.dir=resumed_file --resume full/step_00000015.safetensors
if [ "$RC" -eq 0 ] && [ "$(losses full.out 16)" = "$(losses resumed_file.out 16)" ]; then ok "--resume FILE continues exactly (steps 16..20)"
else fail "--resume full/step_00000015.safetensors: exit $RC; $(head -c 300 resumed_file.err)"; fi
run past_end "$MGT" train "$P/tiny.ini" --no-tui --set checkpoint.dir=full --resume latest
if [ "$RC" -eq 0 ] && grep -q "^nothing to train: the checkpoint is at step 20 and \[train\] steps = 20; to train on, raise it: --set train.steps=40 --resume latest" past_end.out \
   && ! grep -q "final loss" past_end.out; then ok "--resume latest of a finished run: nothing to train, how to go on, no loss"
else fail "--resume latest past the end: exit $RC; $(head -c 300 past_end.out) $(head -c 300 past_end.err)"; fi
mkdir -p empty_dir
expect_err "--resume latest with no checkpoint exits 2" 2 "$MGT" train "$P/tiny.ini" --no-tui --set checkpoint.dir=empty_dir --resume latest -- "empty_dir"

# ---- 4. Ctrl-C and SIGTERM: exit 130, checkpoint at the step it stopped, resume works -------------

# interrupt_run NAME SIGNAL [ARGS...]: trains long.ini, sends SIGNAL once a step line is printed
# and a second has passed; sets RC, STOPPED (the step of "interrupted at step N"), FIRST (first step)
interrupt_run() {
    local name=$1 sig=$2
    shift 2
    "$MGT" train "$P/long.ini" --no-tui "$@" >"$name.out" 2>"$name.err" &
    BGPID=$!
    for _ in $(seq 100); do grep -q '^step ' "$name.out" && break; sleep 0.1; done
    sleep 1
    kill "-$sig" "$BGPID" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$BGPID" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$BGPID" 2>/dev/null && kill -KILL "$BGPID"
    wait "$BGPID"
    RC=$?
    BGPID=
    STOPPED=$(sed -n 's/^interrupted at step \([0-9]*\):.*/\1/p' "$name.out")
    FIRST=$(grep -E "$LINE_RE" "$name.out" | head -1 | cut -d' ' -f2 | cut -d/ -f1)
}
interrupt_run sigint INT
if [ "$RC" -eq 130 ]; then ok "SIGINT: exit 130"; else fail "SIGINT: exit $RC; $(tail -c 300 sigint.err)"; fi
if [ -n "$STOPPED" ] && [ -f "$(printf 'ck_long/step_%08d.safetensors' "$STOPPED")" ]; then ok "SIGINT: checkpoint of step $STOPPED written"
else fail "SIGINT: no checkpoint for the step it stopped at ('$STOPPED'); ck_long: $(ls ck_long 2>/dev/null | tr '\n' ' ')"; fi
if grep -q -- '--resume latest' sigint.out sigint.err; then ok "SIGINT: says how to resume (--resume latest)"
else fail "SIGINT: output does not mention --resume latest"; fi
S1=${STOPPED:-0}

interrupt_run sigterm TERM --resume latest
if [ "$FIRST" = "$((S1 + 1))" ]; then ok "resume after SIGINT starts at step $((S1 + 1))"
else fail "resume after SIGINT: first step '$FIRST', want $((S1 + 1))"; fi
if [ "$RC" -eq 130 ]; then ok "SIGTERM: exit 130"; else fail "SIGTERM: exit $RC; $(tail -c 300 sigterm.err)"; fi
if [ -n "$STOPPED" ] && [ "$STOPPED" -gt "$S1" ] && [ -f "$(printf 'ck_long/step_%08d.safetensors' "$STOPPED")" ]; then
    ok "SIGTERM: checkpoint of step $STOPPED written"
else fail "SIGTERM: no checkpoint for the step it stopped at ('$STOPPED'); ck_long: $(ls ck_long 2>/dev/null | tr '\n' ' ')"; fi
if grep -q -- '--resume latest' sigterm.out sigterm.err; then ok "SIGTERM: says how to resume (--resume latest)"
else fail "SIGTERM: output does not mention --resume latest"; fi
S2=${STOPPED:-0}
run finish "$MGT" train "$P/long.ini" --no-tui --resume latest --set train.steps=$((S2 + 3))
if [ "$RC" -eq 0 ] && grep -Eq "^step $((S2 + 1))/$((S2 + 3)) " finish.out && grep -Eq "^step $((S2 + 3))/$((S2 + 3)) " finish.out &&
    [ -f "$(printf 'ck_long/step_%08d.safetensors' $((S2 + 3)))" ]; then
    ok "resume after SIGTERM runs to the end (steps $((S2 + 1))..$((S2 + 3)))"
else fail "resume after SIGTERM: exit $RC; $(head -c 300 finish.err)"; fi

# ---- 5. sampling and checkpoint integrity -------------------------------------------------------

CK=full/step_00000020.safetensors
run s1 "$MGT" sample "$CK" --tokens 50 --seed 3
rc1=$RC
run s2 "$MGT" sample "$CK" --tokens 50 --seed 3
if [ "$rc1" -eq 0 ] && [ "$RC" -eq 0 ] && [ "$(wc -c <s1.out)" -ge 20 ]; then ok "sample --tokens 50 --seed 3 prints text, exit 0"
else fail "sample: exit $rc1/$RC, $(wc -c <s1.out) bytes; $(head -c 300 s1.err)"; fi
if cmp -s s1.out s2.out; then ok "sample: the same seed gives the same text"; else fail "sample: the same seed gave different text"; fi
run s3 "$MGT" sample "$CK" --tokens 50 --seed 4
if [ "$RC" -eq 0 ] && ! cmp -s s1.out s3.out; then ok "sample: another seed gives other text"; else fail "sample --seed 4: exit $RC or same text as --seed 3"; fi
run vbig "$MGT" train "$P/tiny.ini" --no-tui --set model.vocab_size=4096 --set train.steps=1 --set checkpoint.dir=vbig --set checkpoint.every=1
run s5 "$MGT" sample vbig --prompt "" --tokens 40 --seed 3
n5=$(grep -o '<|[0-9]*|>' s5.out | wc -l); bad5=$(grep -o '<|[0-9]*|>' s5.out | tr -d '<|>' | awk '$1 < 256 || $1 >= 4096' | wc -l)
if [ "$RC" -eq 0 ] && [ "$n5" -ge 20 ] && [ "$bad5" -eq 0 ]; then ok "sample: ids beyond the byte tokenizer print as <|id|> ($n5 of 40), none dropped"
else fail "sample of a 4096-id byte model: exit $RC, $n5 shown, $bad5 out of range; $(head -c 200 s5.out) $(head -c 200 s5.err)"; fi
run s4 "$MGT" sample full --tokens 10 --seed 3
if [ "$RC" -eq 0 ] && [ -s s4.out ]; then ok "sample accepts a checkpoint folder"; else fail "sample full/: exit $RC; $(head -c 300 s4.err)"; fi
expect_err "sample of a missing checkpoint exits 2" 2 "$MGT" sample full/step_00099999.safetensors --tokens 5 -- "step_00099999.safetensors"
expect_err "sample of a preset: not a checkpoint, it is text, what sample takes" 2 "$MGT" sample tiny.ini -- \
    "tiny.ini: not a checkpoint (a safetensors file opens with its header's length and '{'); it begins as text" "mgt sample takes a checkpoint (step_N.safetensors) or a run's folder"
mkdir -p hf_folder && echo '{}' > hf_folder/config.json
expect_err "sample of a Hugging Face folder points at [model] init" 2 "$MGT" sample hf_folder -- \
    "hf_folder: a Hugging Face model folder (config.json), not mgt's checkpoints" "[model] init = hf_folder"
python3 -c "import json,struct; h=json.dumps({'w':{'dtype':'F32','shape':[2],'data_offsets':[0,8]}}).encode(); open('hf_folder/model.safetensors','wb').write(struct.pack('<Q',len(h))+h+bytes(8))"
expect_err "--resume of a Hugging Face weights file points at [model] init" 2 "$MGT" train tiny.ini --no-tui --set checkpoint.dir=hf_resume --resume hf_folder/model.safetensors -- \
    "not an mgt checkpoint" "the weights of a Hugging Face model start a run with [model] init"

# every numeric option as strictly as a preset value: the whole text, finite, in range; exit 2
expect_err "sample --tokens abc" 2 "$MGT" sample "$CK" --tokens abc -- "mgt sample: --tokens 'abc' is not an integer (valid: 0..1000000)"
expect_err "sample --tokens 2147483647" 2 "$MGT" sample "$CK" --tokens 2147483647 -- "--tokens 2147483647 is out of range (valid: 0..1000000)"
expect_err "sample --temperature nan" 2 "$MGT" sample "$CK" --temperature nan -- "--temperature 'nan' is not a finite number (valid: 0..1000)"
expect_err "sample --temperature -1" 2 "$MGT" sample "$CK" --temperature -1 -- "--temperature -1 is out of range"
expect_err "sample --top-k 5x" 2 "$MGT" sample "$CK" --top-k 5x -- "--top-k '5x' is not an integer (valid: 0..65536)"
expect_err "sample --seed -1" 2 "$MGT" sample "$CK" --seed -1 -- "--seed -1 is out of range (valid: 0..2147483647)"
expect_err "sample of two checkpoints" 2 "$MGT" sample "$CK" "$CK" -- "one checkpoint at a time"
expect_err "bench --steps x" 2 "$MGT" bench "$P/tiny.ini" --steps x -- "mgt bench: --steps 'x' is not an integer (valid: 1..1000000)"
expect_err "bench --steps 2147483647" 2 "$MGT" bench "$P/tiny.ini" --steps 2147483647 -- "--steps 2147483647 is out of range"
expect_err "train --steps is not a train option" 2 "$MGT" train "$P/tiny.ini" --no-tui --steps 5 -- "--steps is an option of mgt bench" \
    "--set train.steps=N"
expect_err "plan --gpus 0" 2 "$MGT" plan "$P/tiny.ini" --gpus 0 -- "mgt plan: --gpus 0 is out of range (valid: 1..4096)"
expect_err "plan --gpu unknown" 2 "$MGT" plan "$P/tiny.ini" --gpu h9 -- "mgt plan: --gpu h9: unknown device (a100, h100, h200, b200 or cpu)"
expect_err "plan --trace without --gpu" 2 "$MGT" plan "$P/tiny.ini" --trace "$T/t.json" -- "--trace needs --gpu NAME"
expect_err "plan --search on the cpu" 2 "$MGT" plan "$P/tiny.ini" --gpu cpu --search -- "--search is for GPUs"
# the step simulator: a PREDICTED step on 2 H100s in two nodes, its trace, and a search
run plan_gpu "$MGT" plan "$P/tiny.ini" --gpu H100 --gpus 2 --gpus-per-node 1 --trace "$T/t.json"
if [ "$RC" -eq 0 ] && grep -q "^PREDICTED one optimizer step on 2 x NVIDIA H100" "$T/plan_gpu.out" && grep -q "^  tokens/s " "$T/plan_gpu.out" &&
   python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert any(e.get('ph')=='X' for e in d['traceEvents'])" "$T/t.json"; then
    ok "plan --gpu h100 predicts a step and writes its trace"
else fail "plan --gpu h100: exit $RC; $(tail -c 400 "$T/plan_gpu.out") $(head -c 400 "$T/plan_gpu.err")"; fi
# simulated GPUs are not this machine's cores: no warning about ranks or threads on them
run plan_gpu8 "$MGT" plan "$P/tiny.ini" --gpu h100 --gpus 8 --set parallel.threads=64 --set train.global_batch=16
if [ "$RC" -eq 0 ] && ! grep -q "cores" "$T/plan_gpu8.out" "$T/plan_gpu8.err"; then ok "plan --gpu h100 --gpus 8: no warning about this machine's cores"
else fail "plan --gpu h100 --gpus 8 warns about CPU cores: $(grep -h cores "$T/plan_gpu8.out" "$T/plan_gpu8.err" | head -c 400)"; fi
run plan_one "$MGT" plan "$P/tiny.ini"
if [ "$RC" -eq 0 ] && grep -q "^plan of .*: 1 rank = dp 1 x tp 1 x pp 1, zero 0, fp32, micro_batch" "$T/plan_one.out" && ! grep -q "1f1b\|1 ranks" "$T/plan_one.out" \
   && grep -q "^bytes moved per step: none (one rank)$" "$T/plan_one.out"; then ok "plan of one rank: '1 rank', the dtype, no schedule, no empty traffic heading"
else fail "plan of one rank: exit $RC; $(head -c 300 "$T/plan_one.out")"; fi
run plan_sp "$MGT" plan "$P/tiny.ini" --set parallel.tp=2 --set parallel.sp=1
if [ "$RC" -eq 0 ] && grep -q "^plan of .*: 2 ranks = dp 1 x tp 2 x pp 1, zero 0, sequence parallel, fp32" "$T/plan_sp.out" \
   && grep -q "^  reduce-scatter " "$T/plan_sp.out" && grep -q "^  all-gather " "$T/plan_sp.out"; then
    ok "plan with parallel.sp = 1 names sequence parallelism, its reduce-scatters and all-gathers"
else fail "plan with sp: exit $RC; $(head -c 400 "$T/plan_sp.out") $(head -c 300 "$T/plan_sp.err")"; fi
expect_err "sequence parallelism without tensor parallelism is refused naming the key and the fix" 2 "$MGT" plan "$P/tiny.ini" --set parallel.sp=1 -- \
    "[parallel] sp = 1 with tp = 1" "set parallel.tp to 2 or more, or parallel.sp = 0"
run plan_nofit "$MGT" plan "$P/tiny.ini" --gpu h100 --set model.d_model=4096 --set model.n_head=32 --set model.n_layer=24 --set model.vocab_size=50304 \
    --set model.seq_len=4096 --set train.micro_batch=8 --set train.global_batch=8
if [ "$RC" -eq 1 ] && grep -q "DOES NOT FIT" "$T/plan_nofit.out" && grep -q "tokens/s *n/a: the layout does not fit" "$T/plan_nofit.out" \
   && ! grep -Eq "tokens/s +[0-9]" "$T/plan_nofit.out" && grep -q "does not fit .* (exit 1)" "$T/plan_nofit.err"; then
    ok "plan of a layout that does not fit: exit 1, no tokens/s or MFU for it"
else fail "plan that does not fit: exit $RC; $(grep -E 'tokens/s|MFU|memory' "$T/plan_nofit.out" | head -4)"; fi
run plan_search "$MGT" plan "$P/tiny.ini" --gpu a100 --gpus 2 --search
if [ "$RC" -eq 0 ] && grep -q "^PREDICTED fastest layouts of 2 x NVIDIA A100" "$T/plan_search.out"; then ok "plan --search lists the fastest layouts"
else fail "plan --search: exit $RC; $(tail -c 400 "$T/plan_search.out") $(head -c 400 "$T/plan_search.err")"; fi
# --calibrate: per-family times measured on a GPU (docs/simulator.md, "Calibration") rescale the model
printf '[calibration]\ngpu = NVIDIA H100 80GB HBM3\ngemm = 5\n[model]\nn_layer = 2\n[train]\nmicro_batch = 2\n' > "$T/cal.ini"
run plan_cal "$MGT" plan "$P/tiny.ini" --gpu h100 --calibrate "$T/cal.ini"
if [ "$RC" -eq 0 ] && grep -q "^calibrated from $T/cal.ini (measured on GPU NVIDIA H100 80GB HBM3, families gemm x" "$T/plan_cal.out"; then
    ok "plan --calibrate says where its prices come from"
else fail "plan --calibrate: exit $RC; $(tail -c 400 "$T/plan_cal.out") $(head -c 400 "$T/plan_cal.err")"; fi
printf '[calibration]\ngpu = NVIDIA H100 80GB HBM3\ngemm = fast\n' > "$T/cal_bad.ini"
expect_err "plan --calibrate, a malformed time" 2 "$MGT" plan "$P/tiny.ini" --gpu h100 --calibrate "$T/cal_bad.ini" -- \
    "mgt plan: --calibrate: $T/cal_bad.ini:3: gemm = 'fast': milliseconds, a number above 0"
expect_err "plan --calibrate, no file" 2 "$MGT" plan "$P/tiny.ini" --gpu h100 --calibrate "$T/none.ini" -- "$T/none.ini: cannot read the calibration"
expect_err "plan --calibrate without --gpu" 2 "$MGT" plan "$P/tiny.ini" --calibrate "$T/cal.ini" -- "--calibrate needs --gpu NAME"
expect_err "train --tui-frames x" 2 "$MGT" train "$P/tiny.ini" --no-tui --tui-frames x -- "mgt train: --tui-frames 'x' is not an integer"

# the stored preset comes back exactly: a checkpoint folder of 150 characters with ';', '=' and spaces
LONGDIR="ck ;x = \"q\" #$(printf 'd%.0s' $(seq 130)) ; e "
run longdir "$MGT" train "$P/tiny.ini" --no-tui --set train.steps=2 --set train.eval_every=0 --set "checkpoint.dir=$LONGDIR"
run longdir_sample "$MGT" sample "$LONGDIR" --tokens 5 --seed 1
if [ "$RC" -eq 0 ] && python3 - "$LONGDIR" <<'EOF2'
import json, struct, sys
d = open(sys.argv[1] + "/step_00000002.safetensors", "rb").read()
meta = json.loads(d[8:8 + struct.unpack("<Q", d[:8])[0]])["__metadata__"]
assert json.loads(meta["preset"])["checkpoint.dir"] == sys.argv[1], json.loads(meta["preset"])["checkpoint.dir"]
EOF2
then ok "a checkpoint.dir of ${#LONGDIR} characters with ';' and spaces is stored exactly and samples"
else fail "long checkpoint.dir: sample exit $RC; $(head -c 300 longdir_sample.err) $(head -c 300 longdir.err)"; fi

# LeakSanitizer on the driver (build/asan/mgt, built by `ninja sanitized`): every command frees what it allocates
if [ -x "$ROOT/build/asan/mgt" ]; then
    A="$ROOT/build/asan/mgt"
    run asan_train "$A" train "$P/tiny.ini" --no-tui --set train.steps=2 --set checkpoint.dir=asan_ck
    r1=$RC
    run asan_sample "$A" sample asan_ck --tokens 5
    r2=$RC
    run asan_check "$A" check "$P/tiny.ini"
    r3=$RC
    run asan_bad "$A" check dup.ini
    if [ $r1 -eq 0 ] && [ $r2 -eq 0 ] && [ $r3 -eq 0 ] && [ "$RC" -eq 2 ] && ! grep -q Sanitizer asan_*.err; then
        ok "under ASan+LSan: train, sample, check and a refused preset, no leak"
    else fail "ASan: exit $r1/$r2/$r3/$RC; $(grep -h -A3 Sanitizer asan_*.err | head -8)"; fi
else
    echo "skip - ASan driver: build/asan/mgt not built (ninja build/asan/mgt)"
fi

cp "$CK" corrupt.safetensors
python3 - corrupt.safetensors <<'EOF'
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", d[:8])[0]            # JSON header length; tensor data follows it
d[8 + n + (len(d) - 8 - n) // 2] ^= 0x40     # flip one bit in the middle of the data section
open(sys.argv[1], "wb").write(d)
EOF
expect_err "sample of a corrupted checkpoint: checksum error, exit 2" 2 "$MGT" sample corrupt.safetensors --tokens 5 -- "corrupt.safetensors" "checksum"
mkdir -p corrupt_dir && cp corrupt.safetensors corrupt_dir/step_00000020.safetensors
expect_err "resume from a corrupted checkpoint: checksum error, exit 2" 2 "$MGT" train "$P/tiny.ini" --no-tui --set checkpoint.dir=corrupt_dir \
    --resume latest -- "checksum"
head -c 500 "$CK" >cut.safetensors
expect_err "truncated checkpoint exits 2 and gives the real file size" 2 "$MGT" sample cut.safetensors --tokens 5 -- "cut.safetensors" "500-byte"

# a GPT-2-tokenized run samples from any folder: the checkpoint stores the BPE folder's absolute
# path; --bpe-dir names another when the files moved
BPE=""
for d in "$ROOT/data/gpt2-bpe" "$ROOT/../shared/data/gpt2-bpe"; do [ -f "$d/vocab.bpe" ] && BPE=$d && break; done
if [ -n "$BPE" ]; then
    mkdir -p g/bpe && cp "$BPE/encoder.json" "$BPE/vocab.bpe" g/bpe/
    run gprep "$MGT" prepare --tokenizer gpt2 --bpe-dir g/bpe text.txt -o g/tk
    run gtrain "$MGT" train "$P/tiny.ini" --no-tui --set data.tokenizer=gpt2 --set data.bpe_dir=g/bpe --set model.vocab_size=50257 \
        --set data.train=g/tk_train.bin --set data.val=g/tk_val.bin --set checkpoint.dir=g/ck --set train.steps=2
    mkdir -p elsewhere
    (cd elsewhere && "$MGT" sample ../g/ck --tokens 5 --prompt "The quick" >../gs1.out 2>../gs1.err); rc1=$?
    mv g/bpe g/bpe_moved
    (cd elsewhere && "$MGT" sample ../g/ck --tokens 5 >../gs2.out 2>../gs2.err); rc2=$?
    (cd elsewhere && "$MGT" sample ../g/ck --tokens 5 --bpe-dir ../g/bpe_moved >../gs3.out 2>../gs3.err); rc3=$?
    if [ "$rc1" -eq 0 ] && grep -q "^The quick" gs1.out && [ "$rc2" -eq 2 ] && grep -q -- "--bpe-dir DIR" gs2.err && [ "$rc3" -eq 0 ]; then
        ok "a GPT-2 run samples from another folder (absolute bpe_dir stored); moved files: exit 2 naming --bpe-dir, which works"
    else fail "gpt2 sample elsewhere: exit $rc1/$rc2/$rc3; $(head -c 200 gs1.err) / $(head -c 200 gs2.err) / $(head -c 200 gs3.err)"; fi
else ok "# skipped: no GPT-2 BPE files (./setup.sh --gpt2)"; fi

# ---- 6. the header names the layout; a speedup only against a measured single rank of the model --

run layout "$MGT" train "$P/tiny.ini" --no-tui --set checkpoint.dir=layout --set train.steps=2 --set train.global_batch=8 \
    --set parallel.dp=2 --set parallel.tp=2 --set parallel.pp=2 --set parallel.zero=1 --set parallel.pp_schedule=gpipe
if [ "$RC" -eq 0 ] && grep -m1 '^mgt ' layout.out | grep -qF '| 8 ranks: dp 2 x tp 2 x pp 2, zero 1, gpipe | 2 micro-batches of 2 sequences | cpu, 8 threads | fp32 |'; then
    ok "the header names the layout (8 ranks: dp, tp, pp, zero, schedule, micro-batches)"
else fail "layout header: exit $RC; $(grep -m1 '^mgt ' layout.out)"; fi
SP=(--no-tui --set train.steps=3 --set parallel.threads=2) # the same two threads for one rank and for two
run sp_none "$MGT" train "$P/tiny.ini" "${SP[@]}" --set parallel.dp=2 --set checkpoint.dir=sp_none
if [ "$RC" -eq 0 ] && ! grep -qi speedup sp_none.out; then ok "no single-rank measurement: no speedup shown"
else fail "speedup without a measurement: exit $RC; $(grep -i speedup sp_none.out)"; fi
echo "garbage line" > "$MGT_BASELINES"
run bench1 "$MGT" bench "$P/tiny.ini" --steps 2 --set parallel.threads=2 --record # kept even if this machine is busy (CI's neighbours)
base=$(awk -F'\t' '$1 ~ / L=2 NH=2 C=32 T=16 V=256 batch=4 recompute=0 dtype=fp32$/ {print $2}' "$MGT_BASELINES")
if [ "$RC" -eq 0 ] && grep -q "^recorded as the single-rank baseline of this model in $MGT_BASELINES" bench1.out && [ -n "$base" ] &&
    grep -q '^host=.* threads=2 L=2 ' "$MGT_BASELINES"; then ok "bench of one rank records its tokens/s ($base), keyed by machine and shape"
else fail "bench of one rank: exit $RC; $(tail -2 bench1.out); $(cat "$MGT_BASELINES")"; fi
# the CPU affinity mask is the machine: one core under taskset, one thread (threads = 0), and a warning for 2
if command -v taskset > /dev/null; then
    run aff taskset -c 0 "$MGT" train "$P/tiny.ini" --no-tui --set train.steps=1 --set checkpoint.dir=aff
    run aff2 taskset -c 0 "$MGT" train "$P/tiny.ini" --no-tui --set train.steps=1 --set checkpoint.dir=aff2 --set parallel.threads=2
    if grep -m1 '^mgt ' aff.out | grep -qF '| cpu, 1 thread |' && ! grep -q "threads = " aff.err &&
        grep -q "warning: \[parallel\] threads = 2 on 1 core: a rank's threads meet" aff2.err; then
        ok "under taskset -c 0: threads = 0 is 1 thread, threads = 2 warns of 1 core"
    else fail "under taskset -c 0: $(grep -m1 '^mgt ' aff.out); $(cat aff.err aff2.err)"; fi
fi
# a busy machine (busy loops on every core): the benchmark says so and records no baseline
busy=()
for _ in $(seq $((2 * $(nproc)))); do timeout 60 sh -c 'while :; do :; done' & busy+=($!); done
run bench_busy "$MGT" bench "$P/tiny.ini" --steps 2 --set parallel.threads=2 --set model.d_model=48
kill "${busy[@]}" 2> /dev/null; wait "${busy[@]}" 2> /dev/null
if [ "$RC" -eq 0 ] && grep -q "warning: the machine is busy: this benchmark's 2 threads had only [0-9]*% of their cores .* records no single-rank baseline" bench_busy.err &&
    ! grep -q "C=48 " "$MGT_BASELINES" && ! grep -q "^recorded" bench_busy.out; then ok "bench on a busy machine warns and records no baseline"
else fail "bench on a busy machine: exit $RC; $(cat bench_busy.err); $(cat "$MGT_BASELINES")"; fi
# dp 2 with micro-batches of 1 instead of 2: the same training of the same batch, so the same key
run sp "$MGT" train "$P/tiny.ini" "${SP[@]}" --set parallel.dp=2 --set train.micro_batch=1 --set checkpoint.dir=sp
base=$(printf '%.0f' "${base:-0}") # as the driver prints it
if [ "$RC" -eq 0 ] && grep -q "^speedup against one rank of this model: $base tokens/s, measured by mgt bench at 20.*Z, its 2 threads had [0-9]*% of their cores" sp.out &&
    grep -Eq "^speedup [0-9]+\.[0-9]{2}x over one rank: [0-9]+ tokens/s in steps here, $base measured by mgt bench" sp.out; then
    ok "2 ranks of the same model show their speedup over the measured single rank ($(grep -o '^speedup [0-9.]*x' sp.out))"
else fail "speedup of 2 ranks: exit $RC; $(grep -i speedup sp.out)"; fi
run sp_other "$MGT" train "$P/tiny.ini" "${SP[@]}" --set parallel.dp=2 --set checkpoint.dir=sp_other --set model.d_model=64
if [ "$RC" -eq 0 ] && ! grep -qi speedup sp_other.out; then ok "another model shape never uses the measurement"
else fail "speedup of another shape: exit $RC; $(grep -i speedup sp_other.out)"; fi
run sp_batch "$MGT" train "$P/tiny.ini" "${SP[@]}" --set parallel.dp=2 --set checkpoint.dir=sp_batch --set train.global_batch=8
if [ "$RC" -eq 0 ] && ! grep -qi speedup sp_batch.out; then ok "another global batch never uses the measurement"
else fail "speedup of another batch: exit $RC; $(grep -i speedup sp_batch.out)"; fi
run bench2 "$MGT" bench "$P/tiny.ini" --steps 2 --set parallel.threads=2 --set parallel.dp=2 --record # its figures even if this machine is busy
if [ "$RC" -eq 0 ] && grep -Eq '^speedup: +[0-9]+\.[0-9]{2}x over one rank' bench2.out && [ "$(grep -vc ' sgemm threads=' "$MGT_BASELINES")" -eq 2 ]; then
    ok "bench of 2 ranks shows the speedup and records nothing"
else fail "bench of 2 ranks: exit $RC; $(tail -1 bench2.out)"; fi

# ---- the hf tokenizer (a Hugging Face tokenizer.json): prepare, a preset naming it relative to itself, sample from elsewhere ----

HFJ="$ROOT/tests/fixtures/hf_llama3ish.json"
mkdir -p hfp && cp "$HFJ" hfp/tok.json && printf '{"model": {"vocab": {"a": 0}' > bad_tok.json
expect_err "prepare --tokenizer hf without --tokenizer-json, exit 2" 2 "$MGT" prepare --tokenizer hf text.txt -o hf -- "--tokenizer hf needs --tokenizer-json FILE"
expect_err "a malformed tokenizer.json is exit 2 naming the file and the fault" 2 "$MGT" prepare --tokenizer hf --tokenizer-json bad_tok.json text.txt -o hf -- \
    "bad_tok.json: malformed JSON at line 1, column 28"
expect_err "a folder as tokenizer.json is refused" 2 "$MGT" prepare --tokenizer hf --tokenizer-json hfp text.txt -o hf -- "hfp: is a folder, not a file"
python3 -c "import json, sys; d = json.load(open(sys.argv[1])); d['added_tokens'][-1]['id'] = 70000; json.dump(d, open('big_tok.json', 'w'))" "$HFJ"
run big_prepare "$MGT" prepare --tokenizer hf --tokenizer-json big_tok.json text.txt -o big
if [ "$RC" -eq 0 ] && grep -q "32-bit shards" "$T/big_prepare.err" && [ "$(od -An -tu4 -N8 big_train.bin | tr -s ' ')" = " 20240801 7" ]; then
    ok "prepare with a tokenizer of more than 65536 ids writes 32-bit shards (llm.c's Llama 3 header: 20240801, version 7)"
else fail "prepare with 70001 token ids: exit $RC; $(cat "$T/big_prepare.err"); header $(od -An -tu4 -N8 big_train.bin 2>&1)"; fi
run hf_prepare "$MGT" prepare --tokenizer hf --tokenizer-json hfp/tok.json text.txt -o hf
if [ "$RC" -eq 0 ] && [ -s hf_train.bin ]; then ok "prepare --tokenizer hf --tokenizer-json FILE writes the shards"
else fail "prepare hf: exit $RC; $(head -c 300 hf_prepare.err)"; fi
sed -e 's/^vocab_size = 256/vocab_size = 863/' -e 's/^tokenizer = byte/tokenizer = hf\ntokenizer_json = tok.json/' \
    -e 's|^train = tk_train.bin|train = ../hf_train.bin|' -e 's|^val = tk_val.bin|val = ../hf_val.bin|' -e 's|^dir = ck|dir = ../hf_ck|' "$P/tiny.ini" > hfp/hf.ini
expect_err "tokenizer = hf without tokenizer_json, exit 2 naming the key" 2 "$MGT" check hfp/hf.ini --set data.tokenizer_json= -- \
    "[data] tokenizer = hf needs [data] tokenizer_json"
run hf_check "$MGT" check hfp/hf.ini
if [ "$RC" -eq 0 ] && grep -q "tokenizer_json = hfp/tok.json" hf_check.out; then ok "data.tokenizer_json is relative to the preset's folder"
else fail "check hf.ini: exit $RC; $(grep tokenizer_json hf_check.out) $(head -c 300 hf_check.err)"; fi
run hf_train "$MGT" train hfp/hf.ini --no-tui --set train.steps=5
mkdir -p elsewhere && (cd elsewhere && "$MGT" sample ../hf_ck --tokens 20 --seed 1 --prompt "<|begin_of_text|>The" >../hf_sample.out 2>../hf_sample.err)
src=$?
if [ "$RC" -eq 0 ] && [ "$src" -eq 0 ] && grep -q '^<|begin_of_text|>The' hf_sample.out && [ "$(wc -c <hf_sample.out)" -gt 20 ]; then
    ok "a model trained on hf shards samples from another folder (the checkpoint stores tokenizer_json absolute)"
else fail "hf train/sample: train exit $RC; $(head -c 300 hf_train.err) $(head -c 300 hf_sample.err)"; fi
expect_err "sample --tokenizer-json of a malformed file, exit 2" 2 "$MGT" sample hf_ck --tokens 5 --tokenizer-json bad_tok.json -- "bad_tok.json: malformed JSON"
if [ -x "$ROOT/build/asan/mgt" ]; then # the hf paths under ASan and LeakSanitizer: prepare, a refusal, sample
    A="$ROOT/build/asan/mgt"
    run asan_hf_prepare "$A" prepare --tokenizer hf --tokenizer-json hfp/tok.json text.txt -o asan_hf
    r1=$RC
    run asan_hf_bad "$A" prepare --tokenizer hf --tokenizer-json bad_tok.json text.txt -o asan_hf
    r2=$RC
    run asan_hf_sample "$A" sample hf_ck --tokens 5 --prompt "<|eot_id|>x"
    if [ $r1 -eq 0 ] && [ $r2 -eq 2 ] && [ "$RC" -eq 0 ] && ! grep -q Sanitizer asan_hf_*.err; then
        ok "ASan + LeakSanitizer: hf prepare, a malformed tokenizer.json and hf sampling are clean"
    else fail "ASan hf: exit $r1/$r2/$RC; $(grep -h -A3 Sanitizer asan_hf_*.err | head -8)"; fi
fi

# ---- parallel.layout = auto (--auto-layout): the layout chosen for 2 threads, printed and trained with -----------------
run auto "$MGT" train "$P/tiny.ini" --no-tui --auto-layout --set parallel.threads=2 --set train.steps=3 --set checkpoint.dir=auto_ck
if [ "$RC" -eq 0 ] && python3 - auto.out auto_ck <<'EOF'
import glob, json, re, struct, sys
log = open(sys.argv[1]).read()
m = re.search(r"layout chosen automatically: dp (\d+) x tp (\d+) x pp (\d+)(?: \((1f1b|gpipe)\))?, zero (\d+), micro_batch (\d+), recompute (none|full|selective)\n", log)
assert m, log
dp, tp, pp, zero, micro = (int(m.group(i)) for i in (1, 2, 3, 5, 6))
assert dp * tp * pp <= 2 and 4 % (dp * micro) == 0, m.group(0)
p = re.search(r"PREDICTED by the step simulator: step ([0-9.]+) ms, ([0-9]+) tokens/s", log)
r = re.search(r"runner-up: dp \d+ x tp \d+ x pp \d+.*: PREDICTED step ([0-9.]+) ms, ([0-9]+) tokens/s", log)
s = re.search(r"search: (\d+) layouts that fit 2 CPU threads of this machine simulated, in ([0-9.]+) s \(measured\)", log)
assert p and r and s and float(p.group(1)) > 0 and int(p.group(2)) >= int(r.group(2)) and int(s.group(1)) >= 10 and float(s.group(2)) < 60, log
banner = re.search(r"\| (\d+) ranks?: dp (\d+) x tp (\d+) x pp (\d+)", log)  # the run trains with the choice
assert banner and [int(banner.group(i)) for i in (1, 2, 3, 4)] == [dp * tp * pp, dp, tp, pp], (banner and banner.group(0), m.group(0))
first = json.loads(open(sys.argv[2] + "/metrics.jsonl").readline())
assert first["type"] == "layout" and first["chosen"] == "auto" and first["step"] == 0, first
assert [first[k] for k in ("dp", "tp", "pp", "micro_batch")] == [dp, tp, pp, micro] and first["recompute"] == m.group(7), first
f = open(sorted(glob.glob(sys.argv[2] + "/step_*.safetensors"))[-1], "rb")
meta = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))["__metadata__"]
stored = json.loads(meta["preset"])
assert stored["parallel.layout"] == "auto" and [int(stored["parallel." + k]) for k in ("dp", "tp", "pp")] == [dp, tp, pp], stored
assert int(stored["train.micro_batch"]) == micro, stored
print("chose dp %d tp %d pp %d micro %d; predicted %s ms; search %s s over %s layouts" % (dp, tp, pp, micro, p.group(1), s.group(2), s.group(1)))
EOF
then ok "train --auto-layout: prints the choice, its PREDICTED step, the runner-up and the search's time; trains with its ranks; metrics and the stored preset say it"
else fail "train --auto-layout: exit $RC; $(head -c 600 auto.out) $(head -c 300 auto.err)"; fi
run auto_resume "$MGT" train "$P/tiny.ini" --no-tui --auto-layout --set parallel.threads=2 --set train.steps=5 --set checkpoint.dir=auto_ck --resume latest
if [ "$RC" -eq 0 ] && grep -q "resuming at step 3 of 5" auto_resume.out && python3 - auto_ck/metrics.jsonl <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
starts = [r["step"] for r in rows if r["type"] == "layout"]
steps = [r["step"] for r in rows if r["type"] == "train"]
assert starts == [0, 3] and steps == [1, 2, 3, 4, 5], (starts, steps)
EOF
then ok "--auto-layout --resume latest chooses again and continues the run (metrics: a layout line at steps 0 and 3, train steps 1..5)"
else fail "--auto-layout resume: exit $RC; $(head -c 600 auto_resume.out) $(head -c 300 auto_resume.err)"; fi
run auto_pp "$MGT" train "$P/tiny.ini" --no-tui --auto-layout --set parallel.pp=2 --set parallel.threads=2 --set train.steps=1 --set checkpoint.dir=auto_pp
if [ "$RC" -eq 0 ] && grep -q "layout chosen automatically: dp 1 x tp 1 x pp 2 (" auto_pp.out && grep -q ", [0-9]* of them with parallel.pp = 2, in" auto_pp.out \
    && grep -q "| 2 ranks: dp 1 x tp 1 x pp 2" auto_pp.out; then ok "--auto-layout keeps a layout key given by --set (pp = 2) and trains with it"
else fail "--auto-layout --set parallel.pp=2: exit $RC; $(head -c 600 auto_pp.out) $(head -c 300 auto_pp.err)"; fi
run auto_sp "$MGT" train "$P/tiny.ini" --no-tui --auto-layout --set parallel.sp=1 --set parallel.threads=2 --set train.steps=1 --set checkpoint.dir=auto_sp
if [ "$RC" -eq 0 ] && grep -q "layout chosen automatically: dp 1 x tp 2 x pp 1," auto_sp.out && grep -q "| 2 ranks: dp 1 x tp 2 x pp 1, zero 0, sequence parallel" auto_sp.out
then ok "--auto-layout with parallel.sp = 1 chooses among the layouts sequence parallelism allows (tp 2 here)"
else fail "--auto-layout --set parallel.sp=1: exit $RC; $(head -c 600 auto_sp.out) $(head -c 300 auto_sp.err)"; fi
MGT_CUDA_LIBRARY="$T/none.so" expect_err "--auto-layout with device = cuda and no GPU: exit 2, why" 2 "$MGT" train "$P/tiny.ini" --no-tui --auto-layout \
    --set parallel.device=cuda -- "[parallel] layout = auto with device = cuda, but no usable GPU" "none.so"
expect_err "plan --gpu of an auto layout: exit 2, pointing at --search" 2 "$MGT" plan "$P/tiny.ini" --auto-layout --gpu h100 -- "--search"

echo "# $PASS passed, $FAILS failed"
[ "$FAILS" -eq 0 ]
