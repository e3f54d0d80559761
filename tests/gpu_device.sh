#!/usr/bin/env bash
# tests/gpu_device.sh: mgt's acceptance run on a GPU machine where nothing can be installed, from
# what tests/gpu_stage.sh put in .gpu/ (run from the checkout's root). In order, each under a time
# limit, so one that hangs leaves time for the rest:
#   1. the machine: GPU, driver, where cuBLAS, cuDNN and NCCL are (toolkit or pip wheels)
#   2. the bundle's mgt: `mgt doctor` and `mgt doctor --json` with the staged libmgt_cuda.so
#   3. `mgt doctor --gpu` (the acceptance run, docs/gpu.md "First light"), full or --quick
#   4. the CUDA library built there by kernels/build_cuda.sh (this machine's nvcc and wheels), and
#      small-bf16 again with it
# Files to $OUT (or /tmp/mgt_gpu_out): machine.txt, doctor.txt, doctor.json, doctor-gpu.txt,
# doctor-gpu.json, doctor-gpu-logs.tgz, build.log. Options: --quick (doctor --gpu --quick),
# --only CHECKS (doctor --gpu --only), --no-build (skip 4). Self-test on a machine without a GPU:
#   MGT_GPU_DEVICE_LIBRARY=build/libmgt_cuda_fake.so MGT_FAKE_DEVICES=2 bash tests/gpu_device.sh --quick --no-build
set -u
out=${OUT:-/tmp/mgt_gpu_out}
quick="" only="" build=1
while [ $# -gt 0 ]; do
    case $1 in
        --quick) quick=--quick ;;
        --only) only=$2; shift ;;
        --no-build) build=0 ;;
        *) echo "gpu_device.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
mkdir -p "$out"
start=$(date +%s)
elapsed() { echo $(($(date +%s) - start)); }
say() { echo "== [$(elapsed) s] $*"; }

say "the machine"
{
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit,ecc.mode.current --format=csv 2>&1
    echo "cores $(nproc), kernel $(uname -r), $(ldd --version | head -n 1)"
    command -v nvcc && nvcc --version | tail -n 1
    platlib=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])' 2> /dev/null)
    echo "python3 $(command -v python3): $platlib"
    for d in "$platlib"/nvidia/*/lib; do echo "$d: $(cd "$d" && ls | tr '\n' ' ' | cut -c1-400)"; done
    cuda=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
    echo "toolkit $cuda: $(ls "$cuda/include" | grep -E '^(nccl|cudnn|cublas_v2)\.h$' | tr '\n' ' ')$(ls "$cuda/lib64" 2> /dev/null | grep -E '^lib(cublas|cublasLt|nccl|cudnn|nvrtc)\.so\.[0-9]+$' | tr '\n' ' ')"
} 2>&1 | tee "$out/machine.txt"

bundle=/tmp/mgt_bundle
rm -rf "$bundle" && mkdir -p "$bundle" && tar -xzf .gpu/mgt-*-linux-x86_64.tar.gz -C "$bundle" || { echo "FAIL no bundle in .gpu/ (tests/gpu_stage.sh)"; exit 1; }
mgt=$(ls -d "$bundle"/mgt-*)/bin/mgt
export MGT_CUDA_LIBRARY
MGT_CUDA_LIBRARY=${MGT_GPU_DEVICE_LIBRARY:-$(dirname "$mgt")/../lib/libmgt_cuda.so} # the self-test here: the checking fakes
"$mgt" version || { echo "FAIL the bundle's mgt does not run here"; exit 1; }

say "mgt doctor"
timeout 120 "$mgt" doctor presets/gpt2_124m_1gpu.ini > "$out/doctor.txt" 2>&1; echo "exit $?" >> "$out/doctor.txt"
cat "$out/doctor.txt"
timeout 120 "$mgt" doctor presets/gpt2_124m_1gpu.ini --json > "$out/doctor.json" 2> /dev/null

say "mgt doctor --gpu $quick ${only:+--only $only}"
rm -rf /tmp/doctor-gpu
# shellcheck disable=SC2086
timeout 330 "$mgt" doctor --gpu $quick ${only:+--only "$only"} --out /tmp/doctor-gpu; echo "exit $?"
cp /tmp/doctor-gpu/doctor-gpu.txt /tmp/doctor-gpu/doctor-gpu.json "$out/" 2> /dev/null
tar -czf "$out/doctor-gpu-logs.tgz" -C /tmp doctor-gpu

if [ $build -eq 1 ]; then
    say "the CUDA library built here (kernels/build_cuda.sh)"
    unset MGT_CUDA_LIBRARY
    if timeout 150 kernels/build_cuda.sh /tmp/libmgt_cuda_here.so > "$out/build.log" 2>&1; then
        tail -n 3 "$out/build.log"
        say "small-bf16 with the library built here"
        MGT_CUDA_LIBRARY=/tmp/libmgt_cuda_here.so timeout 120 "$mgt" doctor --gpu --only small-bf16 --out /tmp/doctor-gpu-here | tail -n 2
    else
        echo "FAIL kernels/build_cuda.sh (exit $?): $(tail -n 5 "$out/build.log")"
    fi
fi
say "done"
