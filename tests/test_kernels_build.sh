#!/usr/bin/env bash
# Strict compilation of the CUDA kernels (kernels/*.cu), a test rig apart from the CUDA library
# (kernels/build_cuda.sh compiles the kernels for it without these checks). `ninja test` runs it
# with no argument (all), `ninja kernels_check` too.
#
#   tests/test_kernels_build.sh nvcc SRC OUT   nvcc for sm_80, sm_90, sm_100 and compute_90 PTX, all
#                                         warnings fatal (host -Wall -Wextra -Werror, ptxas spill and
#                                         local memory warnings), position-independent host code
#                                         (-fPIC, as the library compiles them), ptxas -v kept in
#                                         OUT.log; fails on any "bytes spill" that is not 0
#   tests/test_kernels_build.sh cpu SRC OUT    the same source as plain C++17 through the SIMT shim
#                                         tests/simt/cuda_cpu.h (g++ -fsyntax-only -Wall -Wextra -Werror)
#   tests/test_kernels_build.sh report LOG..   registers, shared memory, stack and spills per kernel
#                                         and architecture; fails on any spill
#   tests/test_kernels_build.sh ptx PTX..      what the design promises, in the PTX nvcc kept beside
#                                         each object (OUT.compute_80/90/100.ptx): no 64-bit division
#                                         or remainder (div/rem .s64/.u64) in any kernel, and 16-byte
#                                         loads (ld.global.v4) and stores (st.global.v4) in every
#                                         memory-bound kernel named below, except its element-loop
#                                         instantiation (template argument E = 1)
#   tests/test_kernels_build.sh objects        the nvcc step of every op family alone, for kernels/build_cuda.sh
#   tests/test_kernels_build.sh [all]          both checks of every op family (each kernels/*.cu that
#                                         includes common.cuh, except kernels/backend_*.cu, the
#                                         backend's host code) through a generated
#                                         build/kernels/check.ninja (parallel, timed, its own ninja
#                                         log so it can run inside `ninja test`), then the report;
#                                         exit 77 (skip) when nvcc is missing: the CPU program needs no CUDA
#
# Without nvcc the nvcc step prints why and succeeds without writing its output, so ninja runs it
# again next time instead of remembering a skip as a success.
set -u
cd "$(dirname "$0")/.." || exit 1
export PATH="$PATH:/usr/local/cuda/bin"
GENCODE="-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_100,code=sm_100 -gencode arch=compute_90,code=compute_90"
# the memory-bound kernels: each loads (and the first list's also store) in 16-byte packets
PACKED_LOADS="mgt_gelu_forward_kernel mgt_gelu_backward_kernel mgt_add_inplace_kernel mgt_bias_residual_kernel
  mgt_bias_backward_partials_kernel mgt_cast_kernel mgt_scale_kernel mgt_adamw_kernel mgt_layernorm_forward_kernel
  mgt_layernorm_backward_rows_kernel mgt_layernorm_backward_partials_kernel mgt_encoder_forward_kernel
  mgt_encoder_backward_wte_kernel mgt_encoder_backward_wpe_kernel mgt_xent_partial_kernel mgt_xent_finish_kernel
  mgt_sum_squares_chunks_kernel mgt_adamw_many_kernel"
PACKED_STORES="mgt_gelu_forward_kernel mgt_gelu_backward_kernel mgt_add_inplace_kernel mgt_bias_residual_kernel mgt_cast_kernel
  mgt_scale_kernel mgt_adamw_kernel mgt_layernorm_forward_kernel mgt_layernorm_backward_rows_kernel mgt_encoder_forward_kernel
  mgt_encoder_backward_wte_kernel mgt_xent_finish_kernel mgt_adamw_many_kernel"
NVCC_FLAGS="-c -std=c++17 -O3 $GENCODE -Werror all-warnings -Xptxas -v,-warn-spills,-warn-lmem-usage -Xcompiler -fPIC,-Wall,-Wextra,-Werror,-Wmissing-declarations"
CPU_FLAGS="-std=c++17 -fsyntax-only -Wall -Wextra -Werror -I kernels -I tests/simt -x c++"

have_nvcc() { command -v nvcc > /dev/null 2>&1; }

# kernel name, arch, registers, shared memory, stack, spill stores, spill loads: one line per
# (kernel, arch) from ptxas -v output
parse() {
    awk '
        /Compiling entry function/ { name = $0; sub(/.*function \047/, "", name); sub(/\047.*/, "", name)
                                     arch = $0; sub(/.*for \047/, "", arch); sub(/\047.*/, "", arch) }
        /bytes stack frame/ { stack = $1; st = $5; ld = $9 }
        /Used [0-9]+ registers/ { regs = $0; sub(/.*Used /, "", regs); sub(/ registers.*/, "", regs)
                                  smem = 0; if (match($0, /[0-9]+ bytes smem/)) { smem = substr($0, RSTART, RLENGTH); sub(/ .*/, "", smem) }
                                  print name, arch, regs, smem, stack, st, ld }
    ' "$@"
}

# build/kernels/check.ninja: one strict nvcc and one shim edge per op family (every kernels/*.cu built
# on common.cuh but kernels/backend_*.cu, the backend's host code); sets srcs
write_ninja() {
    srcs=$(grep -l '^#include "common.cuh"' kernels/*.cu | grep -v '^kernels/backend_' | sort)
    mkdir -p build/kernels
    {
        echo "# generated by tests/test_kernels_build.sh all: one nvcc and one shim edge per op family"
        echo "builddir = build/kernels"
        printf 'rule cu_strict\n  command = tests/test_kernels_build.sh nvcc $in $out\n  depfile = $out.d\n  deps = gcc\n  description = NVCC $in\n'
        printf 'rule cu_cpu\n  command = tests/test_kernels_build.sh cpu $in $out\n  depfile = $out.d\n  deps = gcc\n  description = C++ $in (shim)\n'
        for f in $srcs; do
            b=$(basename "$f" .cu)
            echo "build build/kernels/$b.o: cu_strict $f | kernels/common.cuh tests/test_kernels_build.sh"
            echo "build build/kernels/$b.cpu: cu_cpu $f | kernels/common.cuh tests/test_kernels_build.sh"
        done
    } > build/kernels/check.ninja.tmp
    cmp -s build/kernels/check.ninja.tmp build/kernels/check.ninja || mv build/kernels/check.ninja.tmp build/kernels/check.ninja
    rm -f build/kernels/check.ninja.tmp
}

case "${1:-all}" in
nvcc)
    src=$2 out=$3
    if ! have_nvcc; then echo "SKIP $src: nvcc not found (the CPU program does not need it)"; exit 0; fi
    mkdir -p "$(dirname "$out")"
    # shellcheck disable=SC2086
    rm -rf "$out.keep" && mkdir -p "$out.keep"
    if ! nvcc $NVCC_FLAGS --keep --keep-dir "$out.keep" -MMD -MF "$out.d" -o "$out.tmp" "$src" > "$out.log" 2>&1; then
        grep -v '^ptxas info\|bytes stack frame' "$out.log"
        echo "FAIL $src: nvcc (full log: $out.log)"
        rm -rf "$out.tmp" "$out.keep"
        exit 1
    fi
    for a in 80 90 100; do mv "$out.keep/$(basename "$src" .cu).compute_$a.ptx" "$out.compute_$a.ptx"; done # for the ptx check
    rm -rf "$out.keep"
    spills=$(parse "$out.log" | awk '$6 != 0 || $7 != 0')
    if [ -n "$spills" ]; then
        echo "FAIL $src: register spills (kernel arch regs smem stack spill-stores spill-loads):"
        echo "$spills"
        rm -f "$out.tmp"
        exit 1
    fi
    mv "$out.tmp" "$out"
    ;;
cpu)
    src=$2 out=$3
    mkdir -p "$(dirname "$out")"
    # shellcheck disable=SC2086
    g++ $CPU_FLAGS -MMD -MF "$out.d" -MT "$out" "$src" || { echo "FAIL $src: g++ through the shim"; exit 1; }
    # every kernel defined here is added to the file's mgt_cuda_<op>_kernels list (launchers.h): the
    # backend loads those when the run is made, and one left out would load lazily, inside a step
    missing=$(perl -0ne 'my %listed; $listed{$1} = 1 while /mgt_kernel_list_add\(l, (\w+)/g;
        while (/__global__\s+void\s+(?:__launch_bounds__\((?:[^()]|\([^()]*\))*\)\s*)?(?:\/\*.*?\*\/\s*)?(\w+)\s*\(/gs) { print "$1 " unless $listed{$1} }' "$src")
    if [ -n "$missing" ]; then
        echo "FAIL $src: kernel(s) ${missing% } not added in its mgt_cuda_<op>_kernels (kernels/launchers.h: the backend loads every kernel when the run is made; one left out loads lazily at its first launch, inside a step)"
        exit 1
    fi
    touch "$out"
    ;;
report)
    shift
    [ $# -gt 0 ] || { echo "no ptxas logs"; exit 1; }
    filt=cat
    if command -v cu++filt > /dev/null 2>&1; then filt=cu++filt; elif command -v c++filt > /dev/null 2>&1; then filt=c++filt; fi
    # one row per kernel: registers on each architecture, static shared memory and stack (the
    # largest over the architectures), spilled bytes (stores + loads, all architectures)
    parse "$@" | sort -u | while read -r name arch regs smem stack st ld; do
        echo "$(echo "$name" | $filt | sed 's/^void //; s/(.*//; s/__nv_bfloat16/bf16/g; s/__half/fp16/g; s/ //g') $arch $regs $smem $stack $((st + ld))"
    done | sort | awk '
        { k = $1; if (!(k in seen)) { seen[k] = 1; order[++n] = k }
          r[k, $2] = $3; if ($4 > sm[k]) sm[k] = $4; if ($5 > stk[k]) stk[k] = $5; sp[k] += $6; if ($6 > 0) bad++ }
        END {
            printf "%-46s %6s %6s %6s %7s %6s %7s\n", "kernel", "sm_80", "sm_90", "sm_100", "smem B", "stack", "spills"
            for (i = 1; i <= n; i++) { k = order[i]
                printf "%-46s %6s %6s %6s %7d %6d %7d\n", k, r[k, "sm_80"], r[k, "sm_90"], r[k, "sm_100"], sm[k], stk[k], sp[k] }
            printf "%d kernels (registers per thread on each architecture), %d with spills\n", n, bad + 0
            exit bad > 0
        }'
    ;;
ptx)
    shift
    [ $# -gt 0 ] || { echo "no PTX files"; exit 1; }
    # per kernel entry of each file: 64-bit divisions, 16-byte global loads and stores
    awk -v loads="$PACKED_LOADS" -v stores="$PACKED_STORES" '
        function flush() {
            if (name == "") return
            base = name # the unqualified name: _Z[L]<length><name>..
            if (match(name, /^_ZL?[0-9]+/)) { n = substr(name, 1, RLENGTH); sub(/^_ZL?/, "", n); base = substr(name, RLENGTH + 1, n + 0) }
            one = name ~ /Li1E[EL]/ # the element-loop instantiation (E = 1, maybe followed by other arguments)
            entries++
            if (div) { printf "FAIL %s: %s: %d 64-bit divisions or remainders\n", FILENAME, name, div; bad++ }
            if (!one && (" " loads " ") ~ (" " base " ") && !ld) { printf "FAIL %s: %s: no 16-byte global load\n", FILENAME, name; bad++ }
            if (!one && (" " stores " ") ~ (" " base " ") && !st) { printf "FAIL %s: %s: no 16-byte global store\n", FILENAME, name; bad++ }
            if (!one && (" " loads " ") ~ (" " base " ")) packed++
            name = ""
        }
        BEGIN { gsub(/[ \n]+/, " ", loads); gsub(/[ \n]+/, " ", stores) }
        FNR == 1 { flush() }
        /\.entry / { flush(); name = $0; sub(/.*\.entry /, "", name); sub(/\(.*/, "", name); div = ld = st = 0; next }
        /(div|rem)\.[su]64/ { div++ }
        /ld\.global[.a-z]*\.v4\./ { ld++ }
        /st\.global[.a-z]*\.v4\./ { st++ }
        END {
            flush()
            printf "PTX of %d files: %d kernel entries, none with a 64-bit division; %d memory-bound ones in 16-byte packets%s\n",
                   ARGC - 1, entries, packed, bad ? " (FAILED)" : ""
            exit bad > 0
        }' "$@"
    ;;
objects)
    # the strict nvcc objects alone (build/kernels/*.o), for kernels/build_cuda.sh: the library links
    # the objects this test checks, so each kernel is compiled once for both
    write_ninja
    have_nvcc || { echo "SKIP nvcc not found"; exit 77; }
    # shellcheck disable=SC2046
    ninja -f build/kernels/check.ninja $(for f in $srcs; do echo "build/kernels/$(basename "$f" .cu).o"; done) > build/kernels/objects.log 2>&1 ||
        { cat build/kernels/objects.log; exit 1; }
    ;;
all)
    write_ninja
    others=$(for f in kernels/*.cu; do echo "$srcs" | grep -qx "$f" || echo "$f"; done)
    [ -n "$others" ] && echo "not op families (no common.cuh, or backend_*.cu), checked elsewhere:" $others
    start=$(date +%s.%N)
    ninja -f build/kernels/check.ninja || exit 1
    end=$(date +%s.%N)
    secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
    echo "C++17 through the shim: every op family passes g++ -fsyntax-only -Wall -Wextra -Werror"
    if ! have_nvcc; then echo "SKIP nvcc not found: the CUDA kernels were not compiled"; exit 77; fi
    logs=$(for f in $srcs; do echo "build/kernels/$(basename "$f" .cu).o.log"; done)
    # shellcheck disable=SC2086
    tests/test_kernels_build.sh report $logs || exit 1
    ptxs=$(for f in $srcs; do for a in 80 90 100; do echo "build/kernels/$(basename "$f" .cu).o.compute_$a.ptx"; done; done)
    # shellcheck disable=SC2086
    tests/test_kernels_build.sh ptx $ptxs || exit 1
    echo "strict CUDA compile of $(echo "$srcs" | wc -w) files: ${secs}s wall on $(nproc) cores (ninja rebuilds only what changed)"
    ;;
*)
    echo "usage: tests/test_kernels_build.sh nvcc SRC OUT | cpu SRC OUT | report LOG.. | ptx PTX.. | all" >&2
    exit 2
    ;;
esac
