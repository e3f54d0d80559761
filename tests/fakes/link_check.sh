#!/usr/bin/env bash
# link_check.sh CXX OUT SOURCE LIB: proves that a call the fakes do not define is a link error.
# SOURCE calls cudaGraphLaunch, cublasDgemm (cublasDgemm_v2) and ncclReduce; linking it with LIB
# must fail, naming each as an undefined reference. On success writes OUT.
set -u
cxx=$1 out=$2 src=$3 lib=$4
log=$out.log
if [ ! -f /usr/local/cuda/include/cublas_v2.h ] || [ ! -f /usr/local/cuda/include/nccl.h ]; then
  echo "no CUDA/NCCL headers under /usr/local/cuda/include: not checked" | tee "$out"; exit 0
fi
if $cxx -std=c++17 -I/usr/local/cuda/include -o "$out.exe" "$src" "$lib" -pthread > "$log" 2>&1; then
  echo "link_check: $src linked against $lib, but it calls functions the fakes do not define" >&2
  rm -f "$out.exe"; exit 1
fi
for f in cudaGraphLaunch cublasDgemm_v2 ncclReduce; do
  grep -q "undefined reference to .$f" "$log" || { echo "link_check: no undefined reference to $f:" >&2; cat "$log" >&2; exit 1; }
done
echo "unfaked calls are link errors: cudaGraphLaunch cublasDgemm_v2 ncclReduce" > "$out"
