#!/usr/bin/env bash
# Strict compilation of the CUDA kernels (kernels/check_build.sh all): every op family in kernels/
# with nvcc for sm_80, sm_90, sm_100 and compute_90 PTX with all warnings fatal and no register
# spills (prints registers and shared memory per kernel), the PTX of every architecture checked for
# 16-byte loads and stores in the memory-bound kernels and for 64-bit divisions in any, and as C++17
# through the SIMT shim when kernels/cuda_cpu.h exists. Exit 77 (skip) where nvcc is missing: the CPU program needs no CUDA.
cd "$(dirname "$0")/.." || exit 1
exec kernels/check_build.sh all
