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

# NVIDIA's pip wheels: a CUDA library that needs a libcudnn_mgttest.so.9 the loader cannot find loads once
# mgt opens the one in a Python environment's site-packages/nvidia/cudnn/lib, and doctor says so
W=$T/venv/lib/python3.11/site-packages/nvidia/cudnn/lib
mkdir -p "$W"
echo 'int cudnn_stub(void) { return 9; }' >"$T/cudnn.c"
cat >"$T/stub.c" <<'STUB'
#include "mgt.h"
extern int cudnn_stub(void);
static int probe(int *devices, char *why, size_t cap) { *devices = 0; snprintf(why, cap, "stub library, cuDNN stub %d", cudnn_stub()); return -1; }
const mgt_cuda_api *mgt_cuda_api_get(void) { static mgt_cuda_api api; api.abi = MGT_CUDA_ABI; api.probe = probe; return &api; }
STUB
if cc -shared -fPIC -o "$W/libcudnn_mgttest.so.9" -Wl,-soname,libcudnn_mgttest.so.9 "$T/cudnn.c" 2>"$T/err" &&
   cc -shared -fPIC -I"$ROOT" -o "$T/libmgt_cuda.so" "$T/stub.c" "$W/libcudnn_mgttest.so.9" 2>>"$T/err"; then
    out=$(MGT_CUDA_LIBRARY=$T/libmgt_cuda.so "$ROOT/mgt" doctor 2>&1); rc=$?
    check "without the wheels the library does not load, naming libcudnn_mgttest.so.9" 'echo "$out" | grep -q "libcudnn_mgttest.so.9: cannot open shared object file"' "$out"
    out=$(VIRTUAL_ENV=$T/venv MGT_CUDA_LIBRARY=$T/libmgt_cuda.so "$ROOT/mgt" doctor 2>&1); rc=$?
    check "with a virtualenv holding nvidia/cudnn: loaded, the wheels' folder named" \
        '[ $rc -eq 0 ] && echo "$out" | grep -q "NVIDIA pip wheels  *$T/venv/lib/python3.11/site-packages/nvidia (opened" \
         && echo "$out" | grep -q "GPUs  *none: stub library, cuDNN stub 9"' "$out"
    # a virtualenv only on PATH, as a container image puts it (/opt/torch/.venv/bin first, no VIRTUAL_ENV)
    mkdir -p "$T/venv/bin" && printf '#!/bin/sh\n' > "$T/venv/bin/python3" && chmod +x "$T/venv/bin/python3"
    out=$(env -u VIRTUAL_ENV PATH="$T/venv/bin:$PATH" MGT_CUDA_LIBRARY=$T/libmgt_cuda.so "$ROOT/mgt" doctor 2>&1); rc=$?
    check "with that virtualenv's python3 first on PATH: loaded, the wheels' folder named" \
        '[ $rc -eq 0 ] && echo "$out" | grep -q "NVIDIA pip wheels  *$T/venv/lib/python3.11/site-packages/nvidia (opened"' "$out"
else
    echo "FAIL building the pip-wheel stubs: $(cat "$T/err")"; fails=$((fails + 1))
fi

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
         && echo "$out" | grep -q "predicted step  *[0-9.]* ms an optimizer step, .* on h100 (PREDICTED" \
         && echo "$out" | grep -q "cuDNN  *9\.[0-9]*\.[0-9]*, .*libmgt_cuda_fake.so" && echo "$out" | grep -q "peer access  *0: P2P; 1: P2P" \
         && echo "$out" | grep -q "clocks  *SM 1980 MHz, memory 2619 MHz" && echo "$out" | grep -q "power limit  *n/a"' "$out"
    out=$(MGT_NVML_LIBRARY=$ROOT/build/fake_nvml/libnvidia-ml.so.1 "$ROOT/mgt" doctor 2>&1); rc=$?
    check "doctor with NVML (the fake): power limit, PCIe, NVLink" \
        '[ $rc -eq 0 ] && echo "$out" | grep -q "power limit  *700 W" && echo "$out" | grep -q "PCIe  *gen 5 x16" && echo "$out" | grep -q "NVLink  *18 links active"' "$out"
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
    # the acceptance run, end to end on the fakes (its quick variant; the multi-GPU checks need the 2 GPUs),
    # into a folder whose name JSON must escape
    out=$("$ROOT/mgt" doctor --gpu --quick --out "$T/d\"g" --only small-bf16,resume,bench,dp2,allreduce 2>&1); rc=$?
    check "doctor --gpu --quick on the fakes: small-bf16, resume, bench, dp2 and the all-reduce sweep pass, the summary and JSON written" \
        '[ $rc -eq 0 ] && echo "$out" | grep -q "^PASS small-bf16: 4 steps, .* attention: cuDNN" && echo "$out" | grep -q "^PASS resume: .* bit-identical" \
         && echo "$out" | grep -q "^PASS bench: .*MEASURED.*the checking fakes" && echo "$out" | grep -q "^PASS dp2: " && echo "$out" | grep -q "^PASS allreduce: 2 GPUs: best bus bandwidth [0-9.]* GB/s" \
         && echo "$out" | grep -q "^PASS: 5 checks, 0 failed" && [ "$(grep -c "^ *[0-9]* *[0-9]* *[0-9.]* *[0-9.]* *[0-9.]*$" "$T/d\"g/allreduce.log")" = 9 ] \
         && [ "$(jget "$T/d\"g/doctor-gpu.json" "len(d[\"checks\"]), d[\"failed\"], d[\"checks\"][0][\"status\"], sep=\" \"")" = "5 0 PASS" ] \
         && cmp -s <(echo "$out") "$T/d\"g/doctor-gpu.txt"' "$out"
    # the bench's op-family profile: every family measured, in the file mgt plan --calibrate reads
    out=$("$ROOT/mgt" plan presets/gpt2_124m_1gpu.ini --gpu h100 --calibrate "$T/d\"g/calibration.ini" 2>&1); rc=$?
    check "doctor --gpu's bench writes calibration.ini (7 families measured) and mgt plan --calibrate reads it" \
        '[ $rc -eq 0 ] && [ "$(grep -cE "^(gemm|attention|norm|elementwise|embedding|loss|optimizer) = [0-9.]+$" "$T/d\"g/calibration.ini")" = 7 ] \
         && echo "$out" | grep -q "calibrat"' "$out"
    # a kernel that faults: the check fails, and its run with MGT_CUDA_SYNC=1 names the op and the line
    out=$(MGT_FAKE_KERNEL_FAULT=layernorm_forward "$ROOT/mgt" doctor --gpu --quick --out "$T/dg2" --only small-fp32 2>&1); rc=$?
    check "doctor --gpu with a faulting kernel: exit 1, the op named by the MGT_CUDA_SYNC=1 run" \
        '[ $rc -eq 1 ] && echo "$out" | grep -q "^FAIL small-fp32: the GPU run: .*with MGT_CUDA_SYNC=1: .*while waiting for layernorm forward (N [0-9]*, C 128) (backend_cuda.cu:[0-9]*; its kernels launched at kernels/layernorm.cu:[0-9]*)" \
         && echo "$out" | grep -q "^FAIL: 1 check, 1 failed"' "$out"
    # mgt bench on a GPU: MFU against the GPU's peak, not the CPU's sgemm (on the H200 it printed
    # "393094% of the machine's sgemm"), and a baseline kept apart from the CPU's
    tiny="--set model.n_layer=1 --set model.d_model=64 --set model.n_head=1 --set model.seq_len=64 --set train.global_batch=2 --set train.micro_batch=2"
    # shellcheck disable=SC2086
    out=$("$ROOT/mgt" bench presets/quickstart.ini --steps 1 --set parallel.device=cuda --set precision.dtype=bf16 $tiny 2>&1); rc=$?
    check "mgt bench on a fake GPU: MFU against its dense bf16 peak, no CPU sgemm, the baseline keyed device=cuda" \
        '[ $rc -eq 0 ] && ! echo "$out" | grep -q "sgemm" \
         && echo "$out" | grep -q "^train step: .* MFU [0-9.]*% against 989400.0 GFLOP/s (mgt fake NVIDIA H100 80GB HBM3 (0).s dense bf16 peak, mgt plan --gpu h100) (1 rank on 1 GPU)" \
         && grep -q "device=cuda .*L=1 NH=1 C=64 T=64" "$MGT_BASELINES" && ! grep -q "device=cpu .*L=1 NH=1 C=64 T=64" "$MGT_BASELINES"' "$out"
fi
[ $fails -eq 0 ] && echo "doctor: ok" || echo "doctor: $fails failed"
[ $fails -eq 0 ]
