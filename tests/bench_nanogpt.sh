#!/usr/bin/env bash
# mgt against nanoGPT's published CPU run (its README: train_shakespeare_char on the CPU, 2000
# iterations, val loss about 1.88), interleaved: each round runs nanoGPT, then mgt in fp32 and in
# bf16 with the same hyper-parameters (tests/presets/nanogpt_cpu.ini), and prints the wall time and
# the last validation loss of each, with the load average before the round. Not part of CI: it
# needs PyTorch, a checkout of nanoGPT and tinyshakespeare, and takes minutes a round.
#   tests/bench_nanogpt.sh NANOGPT_DIR [ROUNDS] [PYTHON]
# NANOGPT_DIR/data/shakespeare_char must hold train.bin and val.bin (its prepare.py); mgt gets the
# same text through `mgt prepare` (its input.txt, split 90/10 as nanoGPT splits it).
set -euo pipefail
cd "$(dirname "$0")/.."
ng=${1:?usage: tests/bench_nanogpt.sh NANOGPT_DIR [ROUNDS] [PYTHON]} rounds=${2:-3} py=${3:-python3}
[ -s "$ng/data/shakespeare_char/train.bin" ] && [ -s "$ng/data/shakespeare_char/input.txt" ] ||
  { echo "bench_nanogpt: run $ng/data/shakespeare_char/prepare.py first (with its input.txt)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
./mgt prepare --tokenizer byte "$ng/data/shakespeare_char/input.txt" -o "$work/shakespeare" > /dev/null
cp tests/presets/nanogpt_cpu.ini "$work/"
threads=$(nproc)
printf '%-6s %6s %-10s %8s %10s\n' round load run wall_s val_loss
for r in $(seq 1 "$rounds"); do
  load=$(cut -d' ' -f1 /proc/loadavg)
  t0=$(date +%s.%N)
  (cd "$ng" && OMP_NUM_THREADS=$threads "$py" train.py config/train_shakespeare_char.py --device=cpu --compile=False --eval_iters=20 \
      --log_interval=100 --block_size=64 --batch_size=12 --n_layer=4 --n_head=4 --n_embd=128 --max_iters=2000 --lr_decay_iters=2000 \
      --dropout=0.0 --always_save_checkpoint=False --out_dir="$work/ng_out") > "$work/ng.log" 2>&1
  t1=$(date +%s.%N)
  printf '%-6s %6s %-10s %8.1f %10s\n' "$r" "$load" nanoGPT "$(echo "$t1 - $t0" | bc)" "$(grep -o 'val loss [0-9.]*' "$work/ng.log" | tail -n 1 | cut -d' ' -f3)"
  for dtype in fp32 bf16; do
    t0=$(date +%s.%N)
    ./mgt train "$work/nanogpt_cpu.ini" --no-tui --overwrite --set precision.dtype=$dtype --set checkpoint.dir="$work/mgt_$dtype" \
        --set log.metrics=none > "$work/mgt.log" 2>&1
    t1=$(date +%s.%N)
    printf '%-6s %6s %-10s %8.1f %10s\n' "$r" "-" "mgt $dtype" "$(echo "$t1 - $t0" | bc)" "$(grep -o 'val loss [0-9.]*' "$work/mgt.log" | tail -n 1 | cut -d' ' -f3)"
  done
done
