#!/usr/bin/env bash
# tests/test_doctor.sh - `mgt doctor` (issue 23): what it prints and its --json, on this machine
# (no CUDA library: the one-line reason) and on the checking fakes' GPUs (build/libmgt_cuda_fake.so
# through MGT_CUDA_LIBRARY: 2 fake H100s of MGT_FAKE_DEVICE_MIB), where it must name each GPU, its
# memory, what device = auto chooses and the predicted step of a preset, and say when a preset does
# not fit. A few seconds.
set -u
ROOT=$(pwd)
[ -x "$ROOT/mgt" ] || { echo "FAIL - run from the repository root after \`ninja mgt\`"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/mgt_test_doctor.XXXXXX") || exit 1
export MGT_BASELINES="$T/baselines.tsv"
trap 'rm -rf "$T"' EXIT
fails=0
check() { # name, condition (a command), what it printed
    if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; echo "$3" | sed 's/^/     /' | head -40; fails=$((fails + 1)); fi
}
# JSON field of a file: jget FILE 'expression over d'
jget() { python3 -c "import json,sys; d=json.load(open('$1')); print($2)"; }

# no CUDA library: one line with the reason, and auto chooses the CPU
out=$(MGT_CUDA_LIBRARY=$T/none.so "$ROOT/mgt" doctor 2>&1); rc=$?
check "doctor without a CUDA library: exit 0, every section, the reason in one line" \
    '[ $rc -eq 0 ] && echo "$out" | grep -q "^CPU" && echo "$out" | grep -q "^MPI" && echo "$out" | grep -q "BLAS  *OpenBLAS\|BLAS  *a CBLAS" \
     && [ "$(echo "$out" | grep -c "GPUs  *none usable: the CUDA backend library is not built or cannot load")" = 1 ] \
     && echo "$out" | grep -q "device auto  *cpu: the CUDA backend library"' "$out"
MGT_CUDA_LIBRARY=$T/none.so "$ROOT/mgt" doctor --json >"$T/none.json" 2>"$T/err"; rc=$?
check "doctor --json without a CUDA library: valid JSON, cores a number, device auto cpu" \
    '[ $rc -eq 0 ] && [ "$(jget "$T/none.json" "type(d[\"cpu\"][\"cores\"]).__name__, d[\"preset\"][\"device_auto\"][:4], \"gpus\" in d, sep=\" \"")" = "int cpu: False" ]' \
    "$(cat "$T/none.json" "$T/err")"
# a measured sgemm rate comes from the baselines file, as mgt bench and mgt train keep it
printf 'host=%s sgemm threads=%s\t812.5\t2026-01-02T03:04:05Z\n' "$(hostname)" "$(MGT_CUDA_LIBRARY=$T/none.so "$ROOT/mgt" doctor --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["cpu"]["cores"])')" >"$MGT_BASELINES"
out=$(MGT_CUDA_LIBRARY=$T/none.so "$ROOT/mgt" doctor 2>&1)
check "doctor shows the sgemm rate the baselines file holds" 'echo "$out" | grep -q "sgemm  *812.5 GFLOP/s on .* measured 2026-01-02T03:04:05Z"' "$out"
out=$("$ROOT/mgt" doctor --bogus 2>&1); rc=$?
check "doctor with an unknown option: exit 2, named" '[ $rc -eq 2 ] && echo "$out" | grep -q "unknown option --bogus"' "$out"

FAKE=$ROOT/build/libmgt_cuda_fake.so
if [ ! -f "$FAKE" ]; then
    echo "SKIP the fake GPUs: $FAKE is not built (ninja build/libmgt_cuda_fake.so; needs nvcc)"
else
    export MGT_CUDA_LIBRARY=$FAKE MGT_FAKE_DEVICES=2 MGT_FAKE_DEVICE_MIB=81559
    out=$("$ROOT/mgt" doctor presets/gpt2_124m_1gpu.ini 2>&1); rc=$?
    check "doctor on 2 fake H100s: each GPU, its memory, auto chooses cuda, the predicted step labelled" \
        '[ $rc -eq 0 ] && echo "$out" | grep -q "^GPU 0: mgt fake NVIDIA H100 80GB HBM3 (0)" && echo "$out" | grep -q "^GPU 1: " \
         && echo "$out" | grep -q "compute capability  *9.0" && echo "$out" | grep -q "memory  *79.6 GiB, 79.6 GiB free" \
         && echo "$out" | grep -q "device auto  *cuda" && echo "$out" | grep -q "fits  *GPU memory: rank 0 needs .*: fits" \
         && echo "$out" | grep -q "predicted step  *[0-9.]* ms an optimizer step, .* on h100 (PREDICTED"' "$out"
    "$ROOT/mgt" doctor presets/gpt2_124m_1gpu.ini --json >"$T/fake.json" 2>"$T/err"; rc=$?
    check "doctor --json on the fakes: 2 GPUs, memory in bytes, the prediction a number" \
        '[ $rc -eq 0 ] && [ "$(jget "$T/fake.json" "len(d[\"gpus\"]), d[\"gpus\"][1][\"memory_total_bytes\"], d[\"gpus\"][0][\"compute_capability\"], d[\"preset\"][\"predicted_on\"], d[\"preset\"][\"predicted_step_ms\"] > 0, sep=\" \"")" = "2 85520809984 9.0 h100 True" ]' \
        "$(cat "$T/fake.json" "$T/err")"
    out=$(MGT_FAKE_DEVICE_MIB=4096 "$ROOT/mgt" doctor presets/gpt2_124m_1gpu.ini 2>&1); rc=$?
    check "doctor on a 4 GiB fake GPU: the preset does not fit, with what would" \
        '[ $rc -eq 0 ] && echo "$out" | grep -q "fits  *.*does not fit this machine: GPU memory: rank 0 needs .* GPU 0 has 4.0 GiB free.* it fits with "' "$out"
    out=$("$ROOT/mgt" doctor presets/gpt2_124m_1gpu.ini --set parallel.dp=4 2>&1); rc=$?
    check "doctor with 4 ranks on 2 GPUs: auto chooses the CPU and says why" \
        '[ $rc -eq 0 ] && echo "$out" | grep -q "device auto  *cpu: the run needs 4 GPUs (dp 4 x tp 1 x pp 1), this machine has 2"' "$out"
fi
[ $fails -eq 0 ] && echo "doctor: ok" || echo "doctor: $fails failed"
[ $fails -eq 0 ]
