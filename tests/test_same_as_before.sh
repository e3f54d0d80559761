#!/usr/bin/env bash
# The restructuring of issue 24 changed no number: mgt built from the last commit of the
# hand-edited header (before mgt.h was assembled from src/; MGT_SAME_BASE names another commit) and
# mgt built from this tree train the quick start's model for 20 steps, and a dp 2 x tp 2 x pp 2
# ZeRO-2 layout for 20 steps, on the same generated corpus, with validation and a checkpoint; their
# checkpoints must hold the same tensors byte for byte (parameters and AdamW moments) and their
# metrics the same losses. Both binaries run on this machine, so its BLAS and CPU are the same for
# both. Skips outside a git checkout that has the base commit (a shallow clone).
set -u
cd "$(dirname "$0")/.."
root=$PWD
base=${MGT_SAME_BASE:-3c1b2bb}
if ! git -C "$root" cat-file -e "$base^{commit}" 2>/dev/null; then
  echo "SKIP: commit $base (the hand-edited header) is not in this checkout (a shallow clone or no git): nothing to compare with"
  exit 77
fi
ninja -j2 mgt >/dev/null || { echo "FAIL: cannot build mgt"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/base"
git -C "$root" archive "$base" | tar -x -C "$tmp/base"
# the base is built with this tree's optimisation flags: the numbers compared are the code's, and a
# flag that lets the compiler vectorise differently (-fno-math-errno: AdamW's sqrtf) applies to both
opt=$(sed -n 's/^opt = //p' build.ninja)
sed -i "s|^opt = .*|opt = $opt|" "$tmp/base/build.ninja"
(cd "$tmp/base" && ninja mgt >build.log 2>&1) || { echo "FAIL: cannot build mgt at $base"; tail -20 "$tmp/base/build.log"; exit 1; }
cd "$tmp"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# a learnable byte corpus: words drawn from a fixed seed
python3 -c "
import random
random.seed(5)
w = 'the cat sat on a mat and dog ran far away then it slept'.split()
open('text.txt', 'w').write(' '.join(random.choice(w) for _ in range(60000)))
"
"$root/mgt" prepare text.txt -o corpus >/dev/null || { echo "FAIL: prepare"; exit 1; }
cat >layout.ini <<'EOF'
[model]
n_layer = 4
n_head = 4
d_model = 64
seq_len = 64
vocab_size = 256
[data]
train = corpus_train.bin
val = corpus_val.bin
tokenizer = byte
[train]
steps = 20
global_batch = 16
micro_batch = 2
lr = 2e-3
warmup = 5
seed = 7
eval_every = 10
eval_batches = 2
[parallel]
dp = 2
tp = 2
pp = 2
zero = 2
threads = 8
[checkpoint]
every = 20
EOF

# label, preset, --set overrides...: trains with both binaries, compares step 20's checkpoints and the losses of metrics.jsonl
same() {
  local label=$1 preset=$2 who
  shift 2
  for who in base new; do
    local bin=$tmp/base/mgt
    [ $who = new ] && bin=$root/mgt
    if ! "$bin" train "$preset" "$@" --set checkpoint.dir="$label-$who" --set log.metrics="$label-$who/metrics.jsonl" >"$label-$who.log" 2>&1; then
      fail "$label: mgt ($who) failed"; tail -5 "$label-$who.log"; return
    fi
  done
  local ck=step_00000020.safetensors
  if [ ! -s "$label-base/$ck" ] || [ ! -s "$label-new/$ck" ]; then fail "$label: no checkpoint at step 20"; return; fi
  local tensors losses_base losses_new
  tensors=$(python3 "$root/tests/safetensors_same.py" "$label-base/$ck" "$label-new/$ck")
  losses_base=$(grep -o '"\(loss\|val_loss\)":[^,}]*' "$label-base/metrics.jsonl" | tr '\n' ' ')
  losses_new=$(grep -o '"\(loss\|val_loss\)":[^,}]*' "$label-new/metrics.jsonl" | tr '\n' ' ')
  if python3 "$root/tests/safetensors_same.py" "$label-base/$ck" "$label-new/$ck" >/dev/null && [ -n "$losses_base" ] && [ "$losses_base" = "$losses_new" ]; then
    echo "ok  $label: checkpoints of step 20 the same ($tensors), $(echo "$losses_new" | wc -w) losses of metrics.jsonl the same"
  else
    fail "$label: $tensors; losses before: ${losses_base:0:200}; after: ${losses_new:0:200}"
  fi
}

same "quick start, 20 steps" "$root/presets/quickstart.ini" --set data.train=corpus_train.bin --set data.val=corpus_val.bin \
  --set train.steps=20 --set checkpoint.every=20 --set train.eval_every=10 --set parallel.threads=2
same "dp2 x tp2 x pp2 ZeRO-2, 20 steps" layout.ini

[ $fails -eq 0 ] && echo "test_same_as_before: ok (base $base)" || echo "test_same_as_before: $fails failed (base $base)"
[ $fails -eq 0 ]
