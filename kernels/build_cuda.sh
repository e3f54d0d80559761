#!/usr/bin/env bash
# kernels/build_cuda.sh [OUT]: the CUDA backend library (default build/libmgt_cuda.so), what
# `ninja cuda` runs. The op families with nvcc (sm_80, sm_90, sm_100 and compute_90 PTX,
# position-independent, warnings fatal, no register spills: tests/test_kernels_build.sh's objects,
# which it also checks further: the PTX, the SIMT shim); the backend's host code with nvcc
# (kernels/backend_cuda.cu) and gcc (kernels/comm_nccl.c, kernels/watchdog.c, kernels/plugin_cuda.c)
# against the real headers, kernels/attention_cudnn.cpp with g++ against cudnn.h; all linked into one
# shared library with cuBLAS, cuDNN 9 and NCCL (found at run time through an rpath to the toolkit),
# cudart linked statically (nvcc's default), libcuda never (the driver provides it at run time:
# linking its stub would stop the library loading on a machine without one). mgt opens the library
# only when a run asks for device = cuda or auto, so the CPU program needs none of this. Exit 77
# where nvcc is missing.
set -eu
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
out=${1:-build/libmgt_cuda.so}
if ! command -v nvcc > /dev/null 2>&1; then
    echo "SKIP nvcc not found: the CUDA backend library needs the CUDA toolkit (the CPU program does not)"
    exit 77
fi
cuda_home=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
mkdir -p build/cuda
# cuDNN, NCCL or cuBLAS missing from the toolkit (a machine with nvcc whose libraries came as
# NVIDIA's pip wheels, as PyTorch installs them): their headers and libraries from the wheels of
# $MGT_NVIDIA_PIP (a folder holding nvidia/) or of python3's environment, linked by the names the
# wheels have (libnccl.so.2: a wheel has no unversioned link) through links made in build/cuda/pip,
# with a run path to each wheel's lib/ (mgt's loader also finds them there when the library moves)
includes="-I$cuda_home/include" pip_links="" pip_rpaths=""
pip_root=${MGT_NVIDIA_PIP:-$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])' 2> /dev/null || true)}
for header in cudnn.h nccl.h cublas_v2.h; do
    [ -f "$cuda_home/include/$header" ] && continue
    found=$(ls "$pip_root"/nvidia/*/include/"$header" 2> /dev/null | head -1)
    [ -n "$found" ] || { echo "FAIL $header is neither in $cuda_home/include nor in NVIDIA's pip wheels (${pip_root:-no python3}/nvidia): install cuDNN 9, NCCL and cuBLAS, or set MGT_NVIDIA_PIP to a folder holding nvidia/" >&2; exit 1; }
    wheel=$(dirname "$(dirname "$found")")
    echo "note: $header from NVIDIA's pip wheel $wheel"
    includes="$includes -I$wheel/include"
    mkdir -p build/cuda/pip
    for so in "$wheel"/lib/lib*.so.*; do
        [ -e "$so" ] || continue
        base=$(basename "$so")
        ln -sf "$so" "build/cuda/pip/${base%%.so.*}.so"
    done
    pip_links="-Lbuild/cuda/pip" pip_rpaths="$pip_rpaths -Xlinker -rpath=$wheel/lib"
done
gencode="-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_100,code=sm_100"
gencode="$gencode -gencode arch=compute_90,code=compute_90"
# the op families (every kernels/*.cu built on common.cuh but kernels/backend_*.cu, the host code):
# the objects tests/test_kernels_build.sh compiles and checks (warnings fatal, no spills), through
# its ninja file, so they compile in parallel, once for the test and the library, and a second
# build compiles only what changed
tests/test_kernels_build.sh objects
srcs=$(grep -l '^#include "common.cuh"' kernels/*.cu | grep -v '^kernels/backend_' | sort)
objs=$(for f in $srcs; do echo "build/kernels/$(basename "$f" .cu).o"; done)
# shellcheck disable=SC2086
nvcc -c -std=c++17 -O2 $gencode -Werror all-warnings -Xcompiler -fPIC,-Wall,-Wextra,-Werror -I. -Ikernels $includes \
    -o build/cuda/backend_cuda.o kernels/backend_cuda.cu
# cuDNN's fused attention (host code against cudnn.h: no kernels of its own)
# shellcheck disable=SC2086
g++ -std=c++17 -O2 -fPIC -fvisibility=hidden -Wall -Wextra -Werror -I. -Ikernels $includes \
    -c -o build/cuda/attention_cudnn.o kernels/attention_cudnn.cpp
for f in comm_nccl watchdog plugin_cuda; do
    # shellcheck disable=SC2086
    gcc -std=c11 -O2 -fPIC -fvisibility=hidden -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -I. -Ikernels $includes \
        -c -o "build/cuda/$f.o" "kernels/$f.c"
done
libdirs=""
for d in "$cuda_home/lib64" "$cuda_home/lib"; do [ -d "$d" ] && libdirs="$libdirs -L$d -Xlinker -rpath=$d"; done
# shellcheck disable=SC2086
nvcc -shared -o "$out.tmp" $objs build/cuda/backend_cuda.o build/cuda/attention_cudnn.o build/cuda/comm_nccl.o build/cuda/watchdog.o build/cuda/plugin_cuda.o $libdirs $pip_links $pip_rpaths \
    -lcublas -lcublasLt -lcudnn -lnccl -ldl -lpthread
mv "$out.tmp" "$out"
# cuDNN's runtime-compiled engines need NVRTC: the library opens libnvrtc.so.MAJOR through this run path
# (kernels/attention_cudnn.cpp), so say so here when the toolkit has none
nvrtc_major=$(sed -n 's/^#define CUDART_VERSION *\([0-9]*\)/\1/p' "$cuda_home/include/cuda_runtime_api.h" | head -1)
nvrtc_major=$((${nvrtc_major:-13000} / 1000))
found_nvrtc=0
for d in "$cuda_home/lib64" "$cuda_home/lib"; do [ -e "$d/libnvrtc.so.$nvrtc_major" ] && found_nvrtc=1; done
[ $found_nvrtc -eq 1 ] || echo "note: libnvrtc.so.$nvrtc_major is not in $cuda_home/lib64 or lib: cuDNN will offer only its precompiled attention engines"
echo "built $out ($(du -h "$out" | cut -f1)); exports: $(nm -D --defined-only "$out" | awk '$2 == "T" && $3 ~ /^mgt_cuda_api_get$/ { print $3 }');" \
    "needs: $(readelf -d "$out" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
