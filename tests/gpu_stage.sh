#!/usr/bin/env bash
# tests/gpu_stage.sh: stages what a lent GPU machine needs for mgt's acceptance run, when that
# machine has a GPU, nvcc and Python with NVIDIA's pip wheels but no network, no apt and none of
# mgt's libraries (inih, OpenBLAS, ncurses, PCRE2, jansson). Here: `ninja cuda` (sm_80, sm_90,
# sm_100) and `ninja dist` (mgt and the libraries it links, with $ORIGIN run paths: the bundle of
# issue 23), copied into .gpu/ (ignored by git), beside tests/gpu_device.sh, which runs there:
#   tests/gpu_stage.sh             here, then on the GPU machine, from the checkout's root, with .gpu carried:
#   bash tests/gpu_device.sh       mgt doctor, mgt doctor --gpu, and a build of the CUDA library there
# Its files go to $OUT (or /tmp/mgt_gpu_out): doctor-gpu.txt and .json, each check's log in a tarball.
set -euo pipefail
cd "$(dirname "$0")/.."
ninja mgt cuda dist
rm -rf .gpu
mkdir -p .gpu
cp build/mgt-*-linux-x86_64.tar.gz .gpu/
tar -tzf .gpu/mgt-*.tar.gz > .gpu/contents
grep -q 'lib/libmgt_cuda.so$' .gpu/contents || { echo "gpu_stage.sh: the bundle has no libmgt_cuda.so" >&2; exit 1; }
echo "staged .gpu/ ($(du -sh .gpu | cut -f1)): run on the GPU machine: bash tests/gpu_device.sh (carry .gpu)"
