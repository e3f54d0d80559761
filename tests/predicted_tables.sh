#!/usr/bin/env bash
# The PREDICTED tables of docs/simulator.md, made anew from `mgt plan --gpu` (run it after a change
# to the simulator or the kernels' cost table, and paste its output over the tables there):
# GPT-2 124M on 1, 2, 4 and 8 A100s and H100s, and every GPU preset on one node of H100s.
# Usage: tests/predicted_tables.sh [REPO] (MGT=program).
cd "${1:-$(dirname "$0")/..}"
MGT=${MGT:-./mgt}
field() { awk -v k="$1" '$1 == k {print $2; exit}'; }      # "  tokens/s  123" -> 123
echo "| GPUs | A100 tokens/s | speedup | MFU | H100 tokens/s | speedup | MFU | memory per GPU |"
echo "|---|---|---|---|---|---|---|---|"
declare -A base
for n in 1 2 4 8; do
  row="| $n"
  for g in a100 h100; do
    out=$($MGT plan presets/gpt2_124m_8gpu.ini --gpu $g --gpus $n 2>&1)
    tok=$(echo "$out" | field tokens/s); mfu=$(echo "$out" | field MFU)
    mem=$(echo "$out" | awk '$1 == "memory" && $3 == "GiB" {print $2; exit}')
    [ $n = 1 ] && base[$g]=$tok
    row="$row | $(echo ${tok%.*}) | $(awk -v a=$tok -v b=${base[$g]} 'BEGIN {printf "%.2fx", a / b}') | $mfu%"
  done
  echo "$row | $mem GiB |"
done
echo
echo "| preset | layout | step | tokens/s | MFU | bubble | memory per GPU |"
echo "|---|---|---|---|---|---|---|"
for p in $(grep -l "^device *= *cuda" presets/*.ini); do
  out=$($MGT plan "$p" --gpu h100 2>&1)
  layout=$(echo "$out" | awk '/^plan of/ {sub(/.*ranks? = /, ""); print; exit}')
  printf "| \`%s\` | %s | %s ms | %s | %s%% | %s ms | %s GiB |\n" "$(basename "$p")" "$layout" "$(echo "$out" | field step)" \
    "$(echo "$out" | field tokens/s)" "$(echo "$out" | field MFU)" "$(echo "$out" | field bubble)" \
    "$(echo "$out" | awk '$1 == "memory" && $3 == "GiB" {print $2; exit}')"
done
echo
# across nodes: GPT-2 1.5B on 2, 4 and 16 nodes of 8 H100s, each GPU with its own 400 Gb/s NIC
# (8 x 400 Gb/s InfiniBand NDR per node) and NVLink 4 inside; global batch 512, micro-batch 4
echo "| preset | nodes x 8 H100 | layout | step | tokens/s | per GPU | MFU | exposed communication |"
echo "|---|---|---|---|---|---|---|---|"
for p in presets/gpt2_1558m_dp8_zero3.ini presets/gpt2_1558m_tp2_pp2_dp2.ini; do
  for nodes in 2 4 16; do
    out=$($MGT plan "$p" --gpu h100 --gpus $((nodes * 8)) --gpus-per-node 8 --set train.micro_batch=4 2>&1)
    layout=$(echo "$out" | awk '/^plan of/ {sub(/.*ranks? = /, ""); print; exit}')
    tok=$(echo "$out" | field tokens/s)
    exposed=$(echo "$out" | awk '/exposed/ {sub(/.*exposed /, ""); sub(/ ms/, ""); s += $1} END {printf "%.1f", s}')
    printf "| \`%s\` | %d | %s | %s ms | %s | %s | %s%% | %s ms |\n" "$(basename "$p")" "$nodes" "$layout" "$(echo "$out" | field step)" "$tok" \
      "$(awk -v t="$tok" -v n=$((nodes * 8)) 'BEGIN {printf "%.0f", t / n}')" "$(echo "$out" | field MFU)" "$exposed"
  done
done
