/* cuda_cpu.h - v0.1.0 - the SIMT shim: CUDA kernels compiled as C++17 and run on the CPU, each
   CUDA thread a fiber - MIT licence (as mgt.h)

   USAGE
     A test rig: the kernels of kernels/<op>.cu reach it through kernels/common.cuh when they are
     compiled on the CPU (the test builds add -Itests/simt; under nvcc common.cuh defines the MGT_
     macros itself, so the CUDA library never needs this folder). A kernel source that includes
     this header directly (tests/simt/simt_examples.cu) compiles two ways:
       - with nvcc (__CUDACC__ defined): real CUDA; the header includes cuda_runtime.h,
         cuda_bf16.h and cuda_fp16.h and defines only the MGT_ macros below;
       - as plain C++17 with g++ or clang++ (`-x c++ -std=c++17`): the header provides the CUDA
         names a kernel uses, and MGT_LAUNCH runs every block of the grid on the calling OS
         thread, each CUDA thread of a block a fiber, and returns when the grid is done.
     Everything is inline (C++17 inline functions and variables), so no implementation define is
     needed: include it in as many files as you like. The shim is C++ only.

   THE CONTRACT (what kernels may use; the nvcc build of tests/simt/simt_examples.cu keeps it honest)
     qualifiers   __global__ __device__ __host__ __forceinline__ __noinline__ __constant__
                  __launch_bounds__(...) __restrict__ (defined away, or native in g++/clang++)
     indices      threadIdx blockIdx (uint3), blockDim gridDim (dim3), warpSize (32), dim3, uint3;
                  per fiber: each simulated thread sees its own values
     shared       MGT_SHARED(type, name, count)      per-block array `type name[count]`
                                                     (nvcc: __shared__ type name[count])
                  MGT_DYNAMIC_SHARED(type, name)     `type *name` to the launch's dynamic shared
                                                     memory (nvcc: extern __shared__)
                  the shim fills both with 0xFF bytes (float NaN) before each block, so reading
                  memory no thread wrote shows up as NaN in the output
     barriers     __syncthreads() __syncwarp(mask)
     warp         __shfl_sync __shfl_xor_sync __shfl_down_sync __shfl_up_sync (any 1-, 2-, 4- or
                  8-byte trivially copyable type: float, int, unsigned, double, __nv_bfloat16..;
                  optional width), __ballot_sync __any_sync __all_sync, __activemask()
     math         expf logf sqrtf rsqrtf tanhf fmaxf fminf fabsf powf (math.h), __expf __logf
                  __fdividef __powf __saturatef, min max (integers, float, double),
                  __float_as_int __int_as_float __float_as_uint __uint_as_float __popc __ffs __clz
     atomics      atomicAdd(float*, float) atomicAdd(int*, int) atomicAdd(unsigned*, unsigned)
                  atomicMax(int*, int) atomicExch(...): real atomics, so TSan does not flag them
     precision    __nv_bfloat16 __half (16-bit types, round-to-nearest-even conversions):
                  __float2bfloat16(_rn) __bfloat162float __float2half(_rn) __half2float,
                  __bfloat16_as_ushort __ushort_as_bfloat16 __half_as_ushort __ushort_as_half
     launching    MGT_LAUNCH(kernel, grid, block, shmem_bytes, stream, args...)
                  (nvcc: kernel<<<grid, block, shmem_bytes, stream>>>(args...)); arguments are
                  evaluated once and converted to the kernel's parameter types; wrap a template
                  kernel whose name has commas in parentheses: MGT_LAUNCH((k<float, 4>), ...)
     streams      typedef struct CUstream_st *cudaStream_t (the shim ignores the stream, unless the
                  checking fakes of tests/fakes are linked: see mgt_simt_launch_hook)
     order        mgt_simt_set_order(MGT_SIMT_FORWARD | MGT_SIMT_REVERSE | MGT_SIMT_RANDOM, seed):
                  the order in which ready fibers run between switch points (process-wide)

   EXAMPLE
        #include "cuda_cpu.h"   // defines: the contract above, under nvcc and on the CPU
        __global__ void block_sum(float *out, const float *in, int n) {  // (gridDim.x), (n)
            MGT_SHARED(float, partial, 256);
            float s = 0.0f;
            for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
                s += in[i];
            for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
            if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = s;
            __syncthreads();
            if (threadIdx.x == 0) {
                float t = 0.0f;
                for (unsigned w = 0; w < blockDim.x / 32; w++) t += partial[w];
                out[blockIdx.x] = t;
            }
        }
        void block_sum_launch(float *out, const float *in, int n, int blocks, cudaStream_t s) {
            MGT_LAUNCH(block_sum, blocks, 256, 0, s, out, in, n);
        }

   HOW IT RUNS
     Blocks run one after the other. Within a block every CUDA thread is a fiber on its own stack
     (all stacks of a launch come from one mapping: MGT_SIMT_STACK_SIZE each, a guard page below
     each and a canary checked when the fiber exits). A fiber runs until a switch point
     (__syncthreads, __syncwarp and the *_sync intrinsics) or its end; then the next ready fiber
     runs, chosen by the order (forward: lowest thread first, reverse: highest, random: any ready
     one). A barrier releases its threads when every thread of the block (of the mask) arrived;
     warp intrinsics exchange their values at that moment. The context switch is a few lines of
     x86-64 assembly (callee-saved registers, stack pointer, MXCSR and the x87 control word).
     mgt_simt_switch_count() counts switches on the calling OS thread.

   ERRORS (fatal: a message on stderr naming the kernel, the block and the threads, then abort())
     - "divergent __syncthreads": threads of a block wait at different __syncthreads call sites, or
       some threads exit while others wait at (or later reach) a __syncthreads;
     - "mismatched warp mask": a *_sync intrinsic whose mask does not name the calling lane, names a
       lane that does not exist or has exited, or differs from the mask (or intrinsic) another
       named lane waits with;
     - "deadlock": every live thread waits and none can proceed (the report lists what each waits
       for);
     - "bad launch": a block or grid outside CUDA's limits, a launch from inside a kernel;
     - "stack overflow": a fiber's stack canary was overwritten (the guard page usually faults
       first: raise MGT_SIMT_STACK_SIZE).
     These abort rather than return an mgt_result: the shim is a test instrument, and a kernel bug
     has no caller that could handle it.

   SANITIZERS
     ASan: each switch is announced (__sanitizer_start/finish_switch_fiber). TSan (g++): every
     fiber is a TSan fiber switched without synchronisation; happens-before comes only from what
     CUDA guarantees (a barrier orders its participants, a warp intrinsic its lanes), so a missing
     __syncthreads is reported as a data race between two threads of the block. Blocks of one
     launch are ordered one after the other for TSan (races between blocks are not reported).

   OPTIONS (define before including, in every file that includes it)
     MGT_SIMT_STACK_SIZE    bytes of stack per CUDA thread (default 65536, a multiple of 4096)
*/
#ifndef MGT_CUDA_CPU_H_INCLUDED
#define MGT_CUDA_CPU_H_INCLUDED

#define MGT_SIMT_VERSION_STRING "0.1.0"

#ifdef __CUDACC__
/* ---- nvcc: real CUDA; only the MGT_ macros ---------------------------------------------------- */
#include <cuda_runtime.h> /* defines: dim3, cudaStream_t, threadIdx.. */
#include <cuda_bf16.h>    /* defines: __nv_bfloat16, __float2bfloat16, __bfloat162float */
#include <cuda_fp16.h>    /* defines: __half, __float2half, __half2float */
#define MGT_SHARED(type, name, count) __shared__ type name[count]
#define MGT_DYNAMIC_SHARED(type, name)                                                       \
    extern __shared__ __align__(16) unsigned char mgt__dynamic_shared_##name[];              \
    type *name = reinterpret_cast<type *>(mgt__dynamic_shared_##name)
#define MGT_LAUNCH(kernel, grid, block, shmem, stream, ...) \
    kernel<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__)

#else /* ---- the CPU shim ------------------------------------------------------------------------ */

#ifndef __cplusplus
#error "cuda_cpu.h: the SIMT shim is C++17 (compile kernels with g++/clang++ -std=c++17)"
#endif
#if !(defined(__x86_64__) && defined(__linux__))
#error "cuda_cpu.h: the fiber context switch is written for x86-64 Linux (SysV) only"
#endif

#include <math.h>        /* defines: expf, logf, sqrtf, tanhf, fmaxf, fminf, fabsf, powf */
#include <stddef.h>      /* defines: size_t */
#include <stdint.h>      /* defines: uint32_t, uint64_t, uintptr_t */
#include <stdarg.h>      /* defines: va_list */
#include <stdio.h>       /* defines: fprintf, vsnprintf */
#include <stdlib.h>      /* defines: abort, malloc, free */
#include <string.h>      /* defines: memcpy, memset, strcmp */
#include <sys/mman.h>    /* defines: mmap, mprotect, munmap */
#include <unistd.h>      /* defines: sysconf */
#include <atomic>        /* defines: std::atomic */
#include <tuple>         /* defines: std::tuple, std::apply */
#include <type_traits>   /* defines: std::decay_t, std::is_trivially_copyable */
#include <utility>       /* defines: std::forward */

#ifndef MGT_SIMT_STACK_SIZE
#define MGT_SIMT_STACK_SIZE 65536 /* everywhere: stack bytes per simulated CUDA thread */
#endif

/* sanitizers in use */
#if defined(__SANITIZE_ADDRESS__)
#define MGT__SIMT_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define MGT__SIMT_TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) && !defined(MGT__SIMT_ASAN)
#define MGT__SIMT_ASAN 1
#endif
#if __has_feature(thread_sanitizer) && !defined(MGT__SIMT_TSAN)
#define MGT__SIMT_TSAN 1
#endif
#endif
#ifdef MGT__SIMT_ASAN
#include <sanitizer/asan_interface.h>   /* defines: __asan_unpoison_memory_region */
#include <sanitizer/common_interface_defs.h> /* defines: __sanitizer_start_switch_fiber */
#endif
#ifdef MGT__SIMT_TSAN
#include <sanitizer/tsan_interface.h>   /* defines: __tsan_create_fiber, __tsan_acquire */
/* the shim's own bookkeeping is shared by all fibers of a block without happens-before (that is
   the point: only barriers order fibers), so TSan must not see it */
#define MGT__SIMT_INTERNAL __attribute__((no_sanitize("thread")))
#else
#define MGT__SIMT_INTERNAL
#endif
#define MGT__SIMT_NOASAN __attribute__((no_sanitize("address")))

/* ---- qualifiers and built-in variables --------------------------------------------------------- */
#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};
typedef struct CUstream_st *cudaStream_t;

/* per OS thread; the scheduler rewrites threadIdx before it switches to a fiber */
inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;
inline constexpr int warpSize = 32;

/* ---- math ---------------------------------------------------------------------------------------- */
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : (x == x ? x : 0.0f)); }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
inline int __float_as_int(float x) { int r; memcpy(&r, &x, 4); return r; }
inline unsigned __float_as_uint(float x) { unsigned r; memcpy(&r, &x, 4); return r; }
inline float __int_as_float(int x) { float r; memcpy(&r, &x, 4); return r; }
inline float __uint_as_float(unsigned x) { float r; memcpy(&r, &x, 4); return r; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
/* every block of a launch runs on the launching OS thread, so a fence only has to keep the compiler from
   moving memory accesses across it (a thread fence would also be one that TSan rejects) */
inline void __threadfence() { std::atomic_signal_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_signal_fence(std::memory_order_seq_cst); }
template <class T> inline T __ldg(const T *p) { return *p; }

/* ---- atomics: fibers of a block share an OS thread, but TSan must see them as atomic --------------- */
inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
inline unsigned atomicAdd(unsigned *p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) {
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
inline float atomicAdd(float *p, float v) {
    uint32_t *u = reinterpret_cast<uint32_t *>(p);
    uint32_t old = __atomic_load_n(u, __ATOMIC_RELAXED), want;
    do {
        float f;
        memcpy(&f, &old, 4);
        f += v;
        memcpy(&want, &f, 4);
    } while (!__atomic_compare_exchange_n(u, &old, want, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    float r;
    memcpy(&r, &old, 4);
    return r;
}
inline int atomicMax(int *p, int v) {
    int old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}
inline int atomicExch(int *p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }
inline unsigned atomicExch(unsigned *p, unsigned v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }
inline int atomicCAS(int *p, int cmp, int v) {
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return cmp;
}

/* ---- 16-bit floating point: round to nearest even, NaN stays NaN ------------------------------------ */
inline unsigned short mgt__simt_f2bf(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x0040u); /* quiet NaN */
    return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
inline float mgt__simt_bf2f(unsigned short h) {
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}
inline unsigned short mgt__simt_f2h(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) return (unsigned short)(sign | 0x7e00u);  /* NaN */
    if (x >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u); /* rounds to infinity */
    if (x >= 0x38800000u) { /* normal half: rebias the exponent, round 23 -> 10 mantissa bits */
        x -= 0x38000000u;
        return (unsigned short)(sign | ((x + 0x0fffu + ((x >> 13) & 1u)) >> 13));
    }
    if (x <= 0x33000000u) return (unsigned short)sign; /* at most half the smallest subnormal */
    uint32_t e = x >> 23, m = (x & 0x7fffffu) | 0x800000u, shift = 126u - e; /* 14..24 */
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) r++;
    return (unsigned short)(sign | r);
}
inline float mgt__simt_h2f(unsigned short h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
    if (e == 0x1fu) x = sign | 0x7f800000u | (m << 13);
    else if (e != 0) x = sign | ((e + 112u) << 23) | (m << 13);
    else if (m == 0) x = sign;
    else { /* subnormal: normalise */
        e = 113;
        while (!(m & 0x400u)) { m <<= 1; e--; }
        x = sign | (e << 23) | ((m & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}
struct __nv_bfloat16 {
    __nv_bfloat16() = default;
    __nv_bfloat16(float f) : mgt__bits(mgt__simt_f2bf(f)) {}
    operator float() const { return mgt__simt_bf2f(mgt__bits); }
    unsigned short mgt__bits; /* not CUDA's: use __bfloat16_as_ushort */
};
struct __half {
    __half() = default;
    __half(float f) : mgt__bits(mgt__simt_f2h(f)) {}
    operator float() const { return mgt__simt_h2f(mgt__bits); }
    unsigned short mgt__bits; /* not CUDA's: use __half_as_ushort */
};
typedef __nv_bfloat16 nv_bfloat16;
typedef __half half;
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline float __bfloat162float(__nv_bfloat16 h) { return mgt__simt_bf2f(h.mgt__bits); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.mgt__bits; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { __nv_bfloat16 h; h.mgt__bits = u; return h; }
inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline float __half2float(__half h) { return mgt__simt_h2f(h.mgt__bits); }
inline unsigned short __half_as_ushort(__half h) { return h.mgt__bits; }
inline __half __ushort_as_half(unsigned short u) { __half h; h.mgt__bits = u; return h; }

/* ---- the context switch (x86-64 SysV) ----------------------------------------------------------------
   mgt__simt_switch(save, to): push the callee-saved registers and the MXCSR/x87 control words on the
   current stack, store the stack pointer in *save, load `to` and pop the same from there. A new
   fiber's stack is prepared to "return" into mgt__simt_trampoline, which calls r13(r12).
   The code is a COMDAT group, so every file may include the header and the linker keeps one copy. */
extern "C" void mgt__simt_switch(void **save, void *to);
extern "C" void mgt__simt_trampoline(void);
__asm__(".pushsection .text.mgt__simt_switch,\"axG\",@progbits,mgt__simt_switch,comdat\n"
        ".weak mgt__simt_switch\n"
        ".hidden mgt__simt_switch\n"
        ".type mgt__simt_switch,@function\n"
        ".p2align 4\n"
        "mgt__simt_switch:\n"
        "  pushq %rbp\n"
        "  pushq %rbx\n"
        "  pushq %r12\n"
        "  pushq %r13\n"
        "  pushq %r14\n"
        "  pushq %r15\n"
        "  subq $8, %rsp\n"
        "  stmxcsr (%rsp)\n"
        "  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  ldmxcsr (%rsp)\n"
        "  fldcw 4(%rsp)\n"
        "  addq $8, %rsp\n"
        "  popq %r15\n"
        "  popq %r14\n"
        "  popq %r13\n"
        "  popq %r12\n"
        "  popq %rbx\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size mgt__simt_switch, .-mgt__simt_switch\n"
        ".weak mgt__simt_trampoline\n"
        ".hidden mgt__simt_trampoline\n"
        ".type mgt__simt_trampoline,@function\n"
        "mgt__simt_trampoline:\n"
        "  movq %r12, %rdi\n"
        "  callq *%r13\n"
        "  ud2\n"
        ".size mgt__simt_trampoline, .-mgt__simt_trampoline\n"
        ".popsection\n");

/* ---- scheduler state --------------------------------------------------------------------------------- */
enum { MGT_SIMT_FORWARD = 0, MGT_SIMT_REVERSE = 1, MGT_SIMT_RANDOM = 2 };
enum { MGT__SIMT_READY, MGT__SIMT_RUNNING, MGT__SIMT_BARRIER, MGT__SIMT_WARP, MGT__SIMT_DONE };
enum { MGT__SIMT_SYNCWARP, MGT__SIMT_SHFL, MGT__SIMT_SHFL_UP, MGT__SIMT_SHFL_DOWN, MGT__SIMT_SHFL_XOR,
       MGT__SIMT_BALLOT, MGT__SIMT_ANY, MGT__SIMT_ALL };

struct mgt__simt_block;
struct mgt__simt_thread {
    void *sp; /* saved stack pointer while switched out */
    mgt__simt_block *blk;
    unsigned tid, lane;
    uint3 idx;
    int state;
    /* what it waits at */
    const char *op, *file;
    int line;
    int kind, arg, width;
    unsigned mask, size;
    uint64_t value, result;
    unsigned nwarp;                     /* warp ops so far */
    void *acq_from;                     /* TSan: after a warp op, the exchange's sync object to acquire */
    char *stack_lo;                     /* lowest usable byte (the canary), above the guard page */
    void *asan_fake;
    void *tsan_fiber;
    char tsan_slot[2];   /* TSan sync objects: this lane's release at its even / odd warp op */
    char tsan_gather[2]; /* and, as the lane that completes an exchange, every lane's releases joined */
    const char *active_file; /* __activemask: 1 = waiting at it, 2 = its group is complete */
    int active_line, active_state;
    unsigned active_mask;
};
struct mgt__simt_shared_entry {
    const void *key;
    void *p;
    size_t bytes;
};
struct mgt__simt_block {
    const char *kernel;
    dim3 grid, block;
    size_t dyn_bytes;
    void (*call)(void *);
    void *args;
    unsigned n, ndone, order;
    mgt__simt_thread *t;
    unsigned *ready, rhead, rcount, *scratch;
    uint64_t rng;
    /* the block barrier in progress */
    unsigned nbar, bar_first, gen;
    /* the launching context */
    void *main_sp, *main_fake;
    const void *main_bottom;
    size_t main_size;
    void *tsan_main;
    char tsan_bar[2], tsan_start, tsan_end;
    /* shared memory */
    unsigned char *dyn;
    mgt__simt_shared_entry shared[64];
    unsigned nshared;
};

inline std::atomic<int> mgt__simt_order{MGT_SIMT_FORWARD};
inline std::atomic<unsigned long long> mgt__simt_seed{0};
inline thread_local mgt__simt_thread *mgt__simt_self = nullptr;
inline thread_local unsigned long long mgt__simt_switches = 0, mgt__simt_launches = 0;

/* order: MGT_SIMT_FORWARD, MGT_SIMT_REVERSE or MGT_SIMT_RANDOM (seeded); process-wide, read at launch */
inline void mgt_simt_set_order(int order, unsigned long long seed) {
    mgt__simt_order.store(order, std::memory_order_relaxed);
    mgt__simt_seed.store(seed, std::memory_order_relaxed);
}
/* context switches performed by fibers of the calling OS thread so far */
inline unsigned long long mgt_simt_switch_count(void) { return mgt__simt_switches; }

__attribute__((format(printf, 1, 2), noreturn)) inline void mgt__simt_fatal(const char *fmt, ...) {
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "mgt simt: %s\n", msg);
    fflush(stderr);
    abort();
}
#define MGT__SIMT_WHERE(b) (b)->kernel, blockIdx.x, blockIdx.y, blockIdx.z
#define MGT__SIMT_T(t) (t)->idx.x, (t)->idx.y, (t)->idx.z

MGT__SIMT_INTERNAL inline uint64_t mgt__simt_rand(mgt__simt_block *b) { /* splitmix64 */
    uint64_t z = (b->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* make threads ids[0..k) ready, in the block's order */
MGT__SIMT_INTERNAL inline void mgt__simt_push(mgt__simt_block *b, unsigned *ids, unsigned k) {
    if (b->order == MGT_SIMT_RANDOM)
        for (unsigned i = k; i > 1; i--) {
            unsigned j = (unsigned)(mgt__simt_rand(b) % i), tmp = ids[i - 1];
            ids[i - 1] = ids[j];
            ids[j] = tmp;
        }
    for (unsigned i = 0; i < k; i++) {
        unsigned id = b->order == MGT_SIMT_REVERSE ? ids[k - 1 - i] : ids[i];
        b->t[id].state = MGT__SIMT_READY;
        b->ready[(b->rhead + b->rcount++) % b->n] = id;
    }
}
MGT__SIMT_INTERNAL inline mgt__simt_thread *mgt__simt_pop(mgt__simt_block *b) {
    if (b->rcount == 0) return nullptr;
    if (b->order == MGT_SIMT_RANDOM && b->rcount > 1) { /* any ready fiber may run next */
        unsigned j = (b->rhead + (unsigned)(mgt__simt_rand(b) % b->rcount)) % b->n, tmp = b->ready[j];
        b->ready[j] = b->ready[b->rhead];
        b->ready[b->rhead] = tmp;
    }
    unsigned id = b->ready[b->rhead];
    b->rhead = (b->rhead + 1) % b->n;
    b->rcount--;
    return &b->t[id];
}

MGT__SIMT_INTERNAL inline const char *mgt__simt_describe(const mgt__simt_thread *t, char *buf, size_t cap) {
    switch (t->state) {
    case MGT__SIMT_DONE: snprintf(buf, cap, "exited"); break;
    case MGT__SIMT_BARRIER: snprintf(buf, cap, "wait in __syncthreads at %s:%d", t->file, t->line); break;
    case MGT__SIMT_WARP:
        snprintf(buf, cap, "wait in %s(mask 0x%08x) at %s:%d", t->op, t->mask, t->file, t->line);
        break;
    default: snprintf(buf, cap, "ready to run"); break;
    }
    return buf;
}
/* every live fiber waits and none is ready: list the waits, grouped by consecutive threads */
__attribute__((noreturn)) MGT__SIMT_INTERNAL inline void mgt__simt_deadlock(mgt__simt_block *b) {
    char msg[3072], cur[256], next[256];
    int len = 0, groups = 0;
    for (unsigned i = 0; i < b->n;) {
        mgt__simt_describe(&b->t[i], cur, sizeof cur);
        unsigned j = i + 1;
        while (j < b->n && strcmp(mgt__simt_describe(&b->t[j], next, sizeof next), cur) == 0) j++;
        if (groups++ < 12 && len < (int)sizeof msg - 400) {
            const mgt__simt_thread *a = &b->t[i], *z = &b->t[j - 1];
            if (j - i == 1)
                len += snprintf(msg + len, sizeof msg - len, "\n  thread (%u,%u,%u) %s", MGT__SIMT_T(a), cur);
            else
                len += snprintf(msg + len, sizeof msg - len, "\n  threads (%u,%u,%u)..(%u,%u,%u) %s",
                                MGT__SIMT_T(a), MGT__SIMT_T(z), cur);
        }
        i = j;
    }
    mgt__simt_fatal("deadlock in kernel %s, block (%u,%u,%u): every live thread waits and none can "
                    "proceed:%s",
                    MGT__SIMT_WHERE(b), msg);
}

/* the canary at the bottom of a fiber's stack (ASan may hold stale poison there: not instrumented) */
typedef uint64_t __attribute__((may_alias)) mgt__simt_u64a;
MGT__SIMT_INTERNAL inline uint64_t mgt__simt_canary_value(const mgt__simt_thread *t) {
    return 0x6d67742d73696d74ull ^ (uint64_t)(uintptr_t)t->stack_lo;
}
MGT__SIMT_INTERNAL MGT__SIMT_NOASAN inline void mgt__simt_set_canary(mgt__simt_thread *t) {
    *(volatile mgt__simt_u64a *)t->stack_lo = mgt__simt_canary_value(t);
}
MGT__SIMT_INTERNAL MGT__SIMT_NOASAN inline void mgt__simt_check_canary(mgt__simt_block *b, mgt__simt_thread *t) {
    if (*(volatile mgt__simt_u64a *)t->stack_lo != mgt__simt_canary_value(t))
        mgt__simt_fatal("stack overflow in kernel %s, block (%u,%u,%u), thread (%u,%u,%u): the canary at "
                        "the bottom of its %d-byte stack was overwritten (raise MGT_SIMT_STACK_SIZE)",
                        MGT__SIMT_WHERE(b), MGT__SIMT_T(t), MGT_SIMT_STACK_SIZE);
}

/* switch from fiber `self` (or the launching context when self is null) to fiber `to`, or to the
   launching context when `to` is null; `exiting`: self never runs again */
MGT__SIMT_INTERNAL inline void mgt__simt_go(mgt__simt_block *b, mgt__simt_thread *self, mgt__simt_thread *to,
                                            bool exiting) {
    void **save = self ? &self->sp : &b->main_sp;
    mgt__simt_switches++;
    if (to) {
        to->state = MGT__SIMT_RUNNING;
        threadIdx = to->idx;
    }
    mgt__simt_self = to;
#ifdef MGT__SIMT_ASAN
    void **fake = exiting ? nullptr : (self ? &self->asan_fake : &b->main_fake);
    if (to) __sanitizer_start_switch_fiber(fake, to->stack_lo, MGT_SIMT_STACK_SIZE);
    else __sanitizer_start_switch_fiber(fake, b->main_bottom, b->main_size);
#else
    (void)exiting;
#endif
#ifdef MGT__SIMT_TSAN
    __tsan_switch_to_fiber(to ? to->tsan_fiber : b->tsan_main, __tsan_switch_to_fiber_no_sync);
#endif
    mgt__simt_switch(save, to ? to->sp : b->main_sp);
#ifdef MGT__SIMT_ASAN
    __sanitizer_finish_switch_fiber(self ? self->asan_fake : b->main_fake, nullptr, nullptr);
#endif
}
/* `self` blocked (or is ready again): run the next ready fiber */
MGT__SIMT_INTERNAL inline void mgt__simt_yield(mgt__simt_block *b, mgt__simt_thread *self) {
    mgt__simt_thread *next = mgt__simt_pop(b);
    if (!next) mgt__simt_deadlock(b);
    if (next == self) {
        self->state = MGT__SIMT_RUNNING;
        return;
    }
    mgt__simt_go(b, self, next, false);
}

__attribute__((noreturn)) MGT__SIMT_INTERNAL inline void mgt__simt_exit(mgt__simt_thread *t) {
    mgt__simt_block *b = t->blk;
    mgt__simt_check_canary(b, t);
    t->state = MGT__SIMT_DONE;
    b->ndone++;
    if (b->nbar > 0) {
        mgt__simt_thread *w = &b->t[b->bar_first];
        mgt__simt_fatal("divergent __syncthreads in kernel %s, block (%u,%u,%u): thread (%u,%u,%u) exits "
                        "while thread (%u,%u,%u) waits at __syncthreads at %s:%d",
                        MGT__SIMT_WHERE(b), MGT__SIMT_T(t), MGT__SIMT_T(w), w->file, w->line);
    }
    unsigned base = t->tid & ~31u;
    for (unsigned k = base; k < b->n && k < base + 32; k++) {
        mgt__simt_thread *u = &b->t[k];
        if (u->state == MGT__SIMT_WARP && (u->mask >> t->lane & 1u))
            mgt__simt_fatal("mismatched warp mask in kernel %s, block (%u,%u,%u): lane %u (thread (%u,%u,%u)) "
                            "waits in %s with mask 0x%08x at %s:%d, which names lane %u (thread (%u,%u,%u)), "
                            "but that thread exits",
                            MGT__SIMT_WHERE(b), u->lane, MGT__SIMT_T(u), u->op, u->mask, u->file, u->line,
                            t->lane, MGT__SIMT_T(t));
    }
#ifdef MGT__SIMT_TSAN
    __tsan_release(&b->tsan_end);
#endif
    mgt__simt_thread *next = mgt__simt_pop(b);
    if (next) mgt__simt_go(b, t, next, true);
    else if (b->ndone == b->n) mgt__simt_go(b, t, nullptr, true);
    else mgt__simt_deadlock(b);
    abort(); /* never resumed */
}
MGT__SIMT_INTERNAL inline void mgt__simt_fiber_main(mgt__simt_thread *t) {
    mgt__simt_block *b = t->blk;
#ifdef MGT__SIMT_ASAN
    const void *from_bottom;
    size_t from_size;
    __sanitizer_finish_switch_fiber(nullptr, &from_bottom, &from_size);
    if (!b->main_bottom) { /* the first fiber of a launch starts from the launching context */
        b->main_bottom = from_bottom;
        b->main_size = from_size;
    }
#endif
#ifdef MGT__SIMT_TSAN
    __tsan_acquire(&b->tsan_start);
#endif
    b->call(b->args);
    mgt__simt_exit(t);
}

/* ---- switch points ------------------------------------------------------------------------------------ */
MGT__SIMT_INTERNAL inline mgt__simt_thread *mgt__simt_current(const char *what, const char *file, int line) {
    mgt__simt_thread *t = mgt__simt_self;
    if (!t) mgt__simt_fatal("%s called outside a kernel launched with MGT_LAUNCH (%s:%d)", what, file, line);
    return t;
}
MGT__SIMT_INTERNAL inline void mgt__simt_syncthreads(const char *file, int line) {
    mgt__simt_thread *t = mgt__simt_current("__syncthreads", file, line);
    mgt__simt_block *b = t->blk;
    if (b->ndone > 0) {
        unsigned k = 0;
        while (b->t[k].state != MGT__SIMT_DONE) k++;
        mgt__simt_fatal("divergent __syncthreads in kernel %s, block (%u,%u,%u): thread (%u,%u,%u) reaches "
                        "__syncthreads at %s:%d, but thread (%u,%u,%u) has exited",
                        MGT__SIMT_WHERE(b), MGT__SIMT_T(t), file, line, MGT__SIMT_T(&b->t[k]));
    }
    if (b->nbar > 0) {
        mgt__simt_thread *w = &b->t[b->bar_first];
        if (w->line != line || (w->file != file && strcmp(w->file, file) != 0))
            mgt__simt_fatal("divergent __syncthreads in kernel %s, block (%u,%u,%u): thread (%u,%u,%u) reaches "
                            "__syncthreads at %s:%d while thread (%u,%u,%u) waits at __syncthreads at %s:%d",
                            MGT__SIMT_WHERE(b), MGT__SIMT_T(t), file, line, MGT__SIMT_T(w), w->file, w->line);
    } else
        b->bar_first = t->tid;
    t->state = MGT__SIMT_BARRIER;
    t->op = "__syncthreads";
    t->file = file;
    t->line = line;
#ifdef MGT__SIMT_TSAN
    unsigned gen = b->gen;
    __tsan_release(&b->tsan_bar[gen & 1]);
#endif
    if (++b->nbar == b->n) { /* everyone is here: release the block */
        b->nbar = 0;
        b->gen++;
        for (unsigned i = 0; i < b->n; i++) b->scratch[i] = i;
        mgt__simt_push(b, b->scratch, b->n);
    }
    mgt__simt_yield(b, t);
#ifdef MGT__SIMT_TSAN
    __tsan_acquire(&b->tsan_bar[gen & 1]);
#endif
}

/* a warp intrinsic: wait until every lane of `mask` arrived, then exchange values */
MGT__SIMT_INTERNAL inline uint64_t mgt__simt_warp(int kind, const char *op, unsigned mask, uint64_t value,
                                                  unsigned size, int arg, int width, const char *file,
                                                  int line) {
    mgt__simt_thread *t = mgt__simt_current(op, file, line);
    mgt__simt_block *b = t->blk;
    unsigned base = t->tid & ~31u, nlanes = b->n - base < 32 ? b->n - base : 32;
    unsigned exist = nlanes == 32 ? 0xffffffffu : (1u << nlanes) - 1u, lane = t->lane;
    if (!(mask >> lane & 1u))
        mgt__simt_fatal("mismatched warp mask in kernel %s, block (%u,%u,%u): lane %u (thread (%u,%u,%u)) calls "
                        "%s with mask 0x%08x at %s:%d, which does not name the calling lane",
                        MGT__SIMT_WHERE(b), lane, MGT__SIMT_T(t), op, mask, file, line);
    if (mask & ~exist)
        mgt__simt_fatal("mismatched warp mask in kernel %s, block (%u,%u,%u): lane %u (thread (%u,%u,%u)) calls "
                        "%s with mask 0x%08x at %s:%d, which names lanes that do not exist (this warp has "
                        "%u threads: 0x%08x)",
                        MGT__SIMT_WHERE(b), lane, MGT__SIMT_T(t), op, mask, file, line, nlanes, exist);
    if (width <= 0 || width > 32 || (width & (width - 1)))
        mgt__simt_fatal("bad width %d in %s in kernel %s, block (%u,%u,%u) at %s:%d (a power of 2 up to 32)",
                        width, op, MGT__SIMT_WHERE(b), file, line);
    unsigned arrived = 1;
    for (unsigned k = 0; k < nlanes; k++) {
        mgt__simt_thread *u = &b->t[base + k];
        if (k == lane) continue;
        bool named = mask >> k & 1u;
        if (named && u->state == MGT__SIMT_DONE)
            mgt__simt_fatal("mismatched warp mask in kernel %s, block (%u,%u,%u): lane %u (thread (%u,%u,%u)) calls "
                            "%s with mask 0x%08x at %s:%d, which names lane %u (thread (%u,%u,%u)), but that "
                            "thread has exited",
                            MGT__SIMT_WHERE(b), lane, MGT__SIMT_T(t), op, mask, file, line, k, MGT__SIMT_T(u));
        if (u->state != MGT__SIMT_WARP) continue;
        if (named && u->mask == mask && u->kind == kind && u->size == size) {
            arrived++;
            continue;
        }
        if (named || (u->mask >> lane & 1u))
            mgt__simt_fatal("mismatched warp mask in kernel %s, block (%u,%u,%u): lane %u (thread (%u,%u,%u)) calls "
                            "%s with mask 0x%08x at %s:%d while lane %u (thread (%u,%u,%u)) waits in %s with mask "
                            "0x%08x at %s:%d",
                            MGT__SIMT_WHERE(b), lane, MGT__SIMT_T(t), op, mask, file, line, k, MGT__SIMT_T(u),
                            u->op, u->mask, u->file, u->line);
    }
    t->state = MGT__SIMT_WARP;
    t->op = op;
    t->file = file;
    t->line = line;
    t->kind = kind;
    t->mask = mask;
    t->size = size;
    t->value = value;
    t->arg = arg;
    t->width = width;
#ifdef MGT__SIMT_TSAN
    __tsan_release(&t->tsan_slot[t->nwarp & 1u]);
#endif
    t->nwarp++;
    if (arrived == (unsigned)__builtin_popcount(mask)) { /* the last lane: exchange and release */
        uint64_t poison = size == 8 ? ~0ull : (1ull << (8 * size)) - 1ull, ballot = 0;
        unsigned k = 0;
        void *gather = &t->tsan_gather[t->nwarp & 1u];
        for (unsigned m = mask; m; m &= m - 1) {
            unsigned l = (unsigned)__builtin_ctz(m);
            mgt__simt_thread *u = &b->t[base + l];
            if (u->value) ballot |= 1ull << l;
            b->scratch[k++] = base + l;
#ifdef MGT__SIMT_TSAN
            /* this lane gathers every lane's release, then the others take them all from one object:
               2 x 31 clock operations per exchange instead of 31 x 31 (each costs TSan the clock's size) */
            if (u != t) __tsan_acquire(&u->tsan_slot[(u->nwarp - 1u) & 1u]);
#endif
        }
#ifdef MGT__SIMT_TSAN
        __tsan_release(gather);
#endif
        for (unsigned m = mask; m; m &= m - 1) {
            unsigned l = (unsigned)__builtin_ctz(m);
            mgt__simt_thread *u = &b->t[base + l];
            unsigned w = (unsigned)u->width, lo = l & ~(w - 1u), hi = lo + w - 1u, src = l;
            bool own = false;
            switch (kind) {
            case MGT__SIMT_SHFL: src = lo + ((unsigned)u->arg & (w - 1u)); break;
            case MGT__SIMT_SHFL_UP: src = l - (unsigned)u->arg; own = (int)l - u->arg < (int)lo; break;
            case MGT__SIMT_SHFL_DOWN: src = l + (unsigned)u->arg; own = src > hi; break;
            case MGT__SIMT_SHFL_XOR: src = l ^ (unsigned)u->arg; own = src > hi; break;
            default: break;
            }
            if (kind == MGT__SIMT_BALLOT) u->result = ballot;
            else if (kind == MGT__SIMT_ANY) u->result = ballot != 0;
            else if (kind == MGT__SIMT_ALL) u->result = ballot == mask;
            else if (kind == MGT__SIMT_SYNCWARP) u->result = 0;
            else if (own) u->result = u->value;
            else if (src < 32 && (mask >> src & 1u)) u->result = b->t[base + src].value;
            else u->result = poison; /* reading an inactive lane: undefined in CUDA */
            u->acq_from = u == t ? nullptr : gather;
        }
        mgt__simt_push(b, b->scratch, k);
    }
    mgt__simt_yield(b, t);
#ifdef MGT__SIMT_TSAN
    if (t->acq_from) __tsan_acquire(t->acq_from);
#endif
    return t->result;
}
/* __activemask(): the lanes of the warp that reach this call site together. It does not synchronise
   (in CUDA it is no barrier): the caller lets the warp's other runnable lanes go first (each yields
   to the back of the queue) until none of them can still arrive, then every lane waiting here gets
   the mask of those waiting here; lanes that exited or wait at a barrier are not active. */
MGT__SIMT_INTERNAL inline unsigned mgt__simt_activemask(const char *file, int line) {
    mgt__simt_thread *t = mgt__simt_current("__activemask", file, line);
    mgt__simt_block *b = t->blk;
    unsigned base = t->tid & ~31u, nlanes = b->n - base < 32 ? b->n - base : 32;
    t->active_file = file;
    t->active_line = line;
    t->active_state = 1;
    for (;;) {
        if (t->active_state == 2) break; /* another lane completed the group */
        bool pending = false;
        for (unsigned k = 0; k < nlanes && !pending; k++) {
            mgt__simt_thread *u = &b->t[base + k];
            pending = u != t && (u->state == MGT__SIMT_READY || u->state == MGT__SIMT_RUNNING) && u->active_state != 1;
        }
        if (!pending) { /* nobody else can still arrive: the group is complete */
            unsigned m = 0;
            for (unsigned k = 0; k < nlanes; k++) {
                mgt__simt_thread *u = &b->t[base + k];
                if (u->active_state == 1 && u->active_line == line && strcmp(u->active_file, file) == 0) m |= 1u << k;
            }
            for (unsigned k = 0; k < nlanes; k++) {
                mgt__simt_thread *u = &b->t[base + k];
                if (m >> k & 1u) {
                    u->active_state = 2;
                    u->active_mask = m;
                }
            }
            break;
        }
        b->scratch[0] = t->tid; /* let the others run first */
        mgt__simt_push(b, b->scratch, 1);
        mgt__simt_yield(b, t);
    }
    t->active_state = 0;
    return t->active_mask;
}

template <class T> MGT__SIMT_INTERNAL inline T mgt__simt_shfl(int kind, const char *op, unsigned mask, T v, int arg,
                                                             int width, const char *file, int line) {
    static_assert(std::is_trivially_copyable<T>::value && (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 ||
                                                            sizeof(T) == 8),
                  "warp shuffles move 1, 2, 4 or 8 bytes");
    uint64_t bits = 0;
    memcpy(&bits, &v, sizeof(T));
    bits = mgt__simt_warp(kind, op, mask, bits, sizeof(T), arg, width, file, line);
    T r;
    memcpy(&r, &bits, sizeof(T));
    return r;
}
/* the intrinsics are object-like macros that name their call site, then take CUDA's arguments
   (with CUDA's defaults: __syncwarp() is the whole warp, width is 32) */
struct mgt__simt_syncwarp_at {
    const char *file;
    int line;
    MGT__SIMT_INTERNAL void operator()(unsigned mask = 0xffffffffu) const {
        mgt__simt_warp(MGT__SIMT_SYNCWARP, "__syncwarp", mask, 0, 4, 0, 32, file, line);
    }
};
struct mgt__simt_shfl_at {
    int kind;
    const char *op, *file;
    int line;
    template <class T> MGT__SIMT_INTERNAL T operator()(unsigned mask, T v, int arg, int width = 32) const {
        return mgt__simt_shfl(kind, op, mask, v, arg, width, file, line);
    }
};
struct mgt__simt_vote_at {
    int kind;
    const char *op, *file;
    int line;
    MGT__SIMT_INTERNAL unsigned operator()(unsigned mask, int pred) const {
        return (unsigned)mgt__simt_warp(kind, op, mask, pred != 0, 4, 0, 32, file, line);
    }
};
#define __syncthreads() mgt__simt_syncthreads(__FILE__, __LINE__)
#define __syncwarp (mgt__simt_syncwarp_at{__FILE__, __LINE__})
#define __shfl_sync (mgt__simt_shfl_at{MGT__SIMT_SHFL, "__shfl_sync", __FILE__, __LINE__})
#define __shfl_up_sync (mgt__simt_shfl_at{MGT__SIMT_SHFL_UP, "__shfl_up_sync", __FILE__, __LINE__})
#define __shfl_down_sync (mgt__simt_shfl_at{MGT__SIMT_SHFL_DOWN, "__shfl_down_sync", __FILE__, __LINE__})
#define __shfl_xor_sync (mgt__simt_shfl_at{MGT__SIMT_SHFL_XOR, "__shfl_xor_sync", __FILE__, __LINE__})
#define __ballot_sync (mgt__simt_vote_at{MGT__SIMT_BALLOT, "__ballot_sync", __FILE__, __LINE__})
#define __any_sync(mask, pred) ((int)mgt__simt_vote_at{MGT__SIMT_ANY, "__any_sync", __FILE__, __LINE__}(mask, pred))
#define __all_sync(mask, pred) ((int)mgt__simt_vote_at{MGT__SIMT_ALL, "__all_sync", __FILE__, __LINE__}(mask, pred))
#define __activemask() mgt__simt_activemask(__FILE__, __LINE__)

/* ---- shared memory --------------------------------------------------------------------------------- */
/* the block's copy of the static shared array declared at `key` (allocated by the first thread of the
   launch that reaches it, filled with 0xFF before every block) */
MGT__SIMT_INTERNAL inline void *mgt__simt_shared(const void *key, size_t bytes) {
    mgt__simt_thread *t = mgt__simt_current("MGT_SHARED", "?", 0);
    mgt__simt_block *b = t->blk;
    for (unsigned i = 0; i < b->nshared; i++)
        if (b->shared[i].key == key) {
#ifdef MGT__SIMT_TSAN
            __tsan_acquire(&b->shared[i]);
#endif
            return b->shared[i].p;
        }
    if (b->nshared == sizeof b->shared / sizeof b->shared[0])
        mgt__simt_fatal("kernel %s declares more than 64 MGT_SHARED arrays", b->kernel);
    void *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!p) mgt__simt_fatal("kernel %s: out of memory for %zu bytes of shared memory", b->kernel, bytes);
    memset(p, 0xff, bytes);
    mgt__simt_shared_entry *e = &b->shared[b->nshared++];
    e->key = key;
    e->p = p;
    e->bytes = bytes;
#ifdef MGT__SIMT_TSAN
    __tsan_release(e);
#endif
    return p;
}
MGT__SIMT_INTERNAL inline void *mgt__simt_dynamic_shared(void) {
    return mgt__simt_current("MGT_DYNAMIC_SHARED", "?", 0)->blk->dyn;
}
#define MGT_SHARED(type, name, count)                                                                        \
    static char mgt__shared_key_##name;                                                                      \
    type(&name)[count] = *reinterpret_cast<type(*)[count]>(mgt__simt_shared(&mgt__shared_key_##name,         \
                                                                            sizeof(type) * (size_t)(count)))
#define MGT_DYNAMIC_SHARED(type, name) type *name = reinterpret_cast<type *>(mgt__simt_dynamic_shared())

/* ---- launching ------------------------------------------------------------------------------------------ */
struct mgt__simt_stacks { /* one mapping per OS thread, reused by every launch */
    char *base = nullptr;
    size_t bytes = 0;
    unsigned n = 0;
    ~mgt__simt_stacks() {
        if (base) munmap(base, bytes);
    }
};
inline thread_local mgt__simt_stacks mgt__simt_stack_cache;
#ifdef MGT__SIMT_TSAN
struct mgt__simt_tsan_fibers { /* TSan fibers, reused by every launch of this OS thread */
    void **f = nullptr;
    unsigned n = 0;
    ~mgt__simt_tsan_fibers() {
        for (unsigned i = 0; i < n; i++) __tsan_destroy_fiber(f[i]);
        free(f);
    }
};
inline thread_local mgt__simt_tsan_fibers mgt__simt_tsan_cache;
#endif

MGT__SIMT_INTERNAL inline void mgt__simt_run(const char *kernel, dim3 grid, dim3 block, size_t dyn_bytes,
                                             void (*call)(void *), void *args) {
    if (mgt__simt_self)
        mgt__simt_fatal("bad launch of kernel %s: launched from inside a kernel (not supported)", kernel);
    unsigned long long n = (unsigned long long)block.x * block.y * block.z;
    if (n == 0 || n > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 ||
        grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535 || dyn_bytes > 227 * 1024)
        mgt__simt_fatal("bad launch of kernel %s: grid (%u,%u,%u), block (%u,%u,%u), %zu bytes of dynamic shared "
                        "memory (CUDA allows 1..1024 threads per block with z <= 64, grid y and z <= 65535, and "
                        "at most 227 KiB of shared memory)",
                        kernel, grid.x, grid.y, grid.z, block.x, block.y, block.z, dyn_bytes);
    /* on the heap: TSan forgets the sync objects inside it when it is freed */
    mgt__simt_block *b = (mgt__simt_block *)calloc(1, sizeof(mgt__simt_block));
    if (!b) mgt__simt_fatal("launch of kernel %s: out of memory", kernel);
    b->kernel = kernel;
    b->grid = grid;
    b->block = block;
    b->dyn_bytes = dyn_bytes;
    b->call = call;
    b->args = args;
    b->n = (unsigned)n;
    b->order = (unsigned)mgt__simt_order.load(std::memory_order_relaxed);
    b->t = (mgt__simt_thread *)calloc(n, sizeof(mgt__simt_thread));
    b->ready = (unsigned *)calloc(n, sizeof(unsigned));
    b->scratch = (unsigned *)calloc(n, sizeof(unsigned));
    b->dyn = (unsigned char *)aligned_alloc(16, (dyn_bytes + 15) & ~(size_t)15);
    if (!b->t || !b->ready || !b->scratch || (!b->dyn && dyn_bytes))
        mgt__simt_fatal("launch of kernel %s: out of memory", kernel);

    /* stacks: [guard page][MGT_SIMT_STACK_SIZE] per thread */
    static_assert(MGT_SIMT_STACK_SIZE % 4096 == 0 && MGT_SIMT_STACK_SIZE >= 16384,
                  "MGT_SIMT_STACK_SIZE: a multiple of 4096, at least 16384");
    size_t page = (size_t)sysconf(_SC_PAGESIZE), stride = page + MGT_SIMT_STACK_SIZE;
    mgt__simt_stacks *sc = &mgt__simt_stack_cache;
    if (sc->n < n) {
        if (sc->base) munmap(sc->base, sc->bytes);
        sc->bytes = stride * n;
        sc->base = (char *)mmap(nullptr, sc->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                                -1, 0);
        if (sc->base == MAP_FAILED) mgt__simt_fatal("launch of kernel %s: cannot map %zu bytes of fiber stacks", kernel, sc->bytes);
        for (unsigned i = 0; i < n; i++)
            if (mprotect(sc->base + i * stride, page, PROT_NONE) != 0)
                mgt__simt_fatal("launch of kernel %s: mprotect of a guard page failed", kernel);
        sc->n = (unsigned)n;
    }
#ifdef MGT__SIMT_TSAN
    mgt__simt_tsan_fibers *tf = &mgt__simt_tsan_cache;
    if (tf->n < n) {
        tf->f = (void **)realloc(tf->f, n * sizeof(void *));
        while (tf->n < n) tf->f[tf->n++] = __tsan_create_fiber(0);
    }
    b->tsan_main = __tsan_get_current_fiber();
#endif
    unsigned cw = 0x037f, mxcsr = 0x1f80;
    __asm__ volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(mxcsr), "=m"(cw));
    uint32_t csr[2] = {mxcsr, cw};
    uint64_t csr64;
    memcpy(&csr64, csr, 8);

    unsigned long long launch = mgt__simt_launches++;
    dim3 saved_grid = gridDim, saved_block = blockDim;
    uint3 saved_bidx = blockIdx, saved_tidx = threadIdx;
    gridDim = grid;
    blockDim = block;
    for (unsigned i = 0; i < n; i++) {
        mgt__simt_thread *t = &b->t[i];
        t->blk = b;
        t->tid = i;
        t->lane = i & 31u;
        t->idx = uint3{i % block.x, (i / block.x) % block.y, i / (block.x * block.y)};
        t->stack_lo = sc->base + i * stride + page;
#ifdef MGT__SIMT_TSAN
        t->tsan_fiber = mgt__simt_tsan_cache.f[i];
#endif
    }
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                blockIdx = uint3{bx, by, bz};
                b->rng = (mgt__simt_seed.load(std::memory_order_relaxed) + 1) * 0x2545f4914f6cdd1dull ^
                         (launch << 32) ^ ((uint64_t)bz << 48 ^ (uint64_t)by << 32 ^ bx);
                for (unsigned i = 0; i < b->nshared; i++) memset(b->shared[i].p, 0xff, b->shared[i].bytes);
                if (dyn_bytes) memset(b->dyn, 0xff, dyn_bytes);
                b->ndone = b->nbar = b->rhead = b->rcount = 0;
                for (unsigned i = 0; i < n; i++) {
                    mgt__simt_thread *t = &b->t[i];
                    char *top = t->stack_lo + MGT_SIMT_STACK_SIZE - 16;
#ifdef MGT__SIMT_ASAN
                    __asan_unpoison_memory_region(top - 4096, 4096 + 16);
#endif
                    uint64_t *f = (uint64_t *)(top - 8 - 56);
                    f[0] = csr64;                              /* MXCSR, x87 control word */
                    f[1] = 0;                                  /* r15 */
                    f[2] = 0;                                  /* r14 */
                    f[3] = (uint64_t)(uintptr_t)&mgt__simt_fiber_main; /* r13: what the trampoline calls */
                    f[4] = (uint64_t)(uintptr_t)t;             /* r12: its argument */
                    f[5] = 0;                                  /* rbx */
                    f[6] = 0;                                  /* rbp: ends frame-pointer walks */
                    f[7] = (uint64_t)(uintptr_t)&mgt__simt_trampoline; /* return address */
                    f[8] = 0;
                    t->sp = f;
                    mgt__simt_set_canary(t);
                    t->state = MGT__SIMT_READY;
                    t->nwarp = 0;
                    t->active_state = 0;
                    b->scratch[i] = i;
                }
                mgt__simt_push(b, b->scratch, b->n);
#ifdef MGT__SIMT_TSAN
                __tsan_release(&b->tsan_start);
#endif
                mgt__simt_go(b, nullptr, mgt__simt_pop(b), false);
#ifdef MGT__SIMT_TSAN
                __tsan_acquire(&b->tsan_end);
#endif
                for (unsigned i = 0; i < n; i++) mgt__simt_check_canary(b, &b->t[i]);
            }
    mgt__simt_self = nullptr;
    gridDim = saved_grid;
    blockDim = saved_block;
    blockIdx = saved_bidx;
    threadIdx = saved_tidx;
    for (unsigned i = 0; i < b->nshared; i++) free(b->shared[i].p);
    free(b->dyn);
    free(b->scratch);
    free(b->ready);
    free(b->t);
    free(b);
}

/* THE FAKES' HOOK. tests/fakes/cudart_fake.cpp (the checking fake of cudart) defines this function;
   where it is linked, MGT_LAUNCH hands the launch to it instead of running it: the fake queues it
   on `stream` and calls run(ctx) when the stream runs, then drop(ctx). `func` is the kernel function
   (what cudaFuncGetAttributes takes: the fake knows which kernels are loaded). `ptrs` are the kernel's
   pointer arguments, `writes[i]` 0 where the parameter points to const (read only), so the fake
   can check them as device memory of the stream's device and for cross-stream hazards. Without
   the fakes the weak reference is null and a launch runs at once, on the calling thread. */
extern "C" void mgt_simt_launch_hook(cudaStream_t stream, const char *kernel, const void *func, void (*run)(void *ctx),
                                     void (*drop)(void *ctx), void *ctx, int nptrs, const void *const *ptrs,
                                     const unsigned char *writes) __attribute__((weak));
/* a struct passed by value that holds device pointers (a multi-tensor launch's list) names them with a
   member `void simt_pointers(const void **ptrs, unsigned char *writes, int &n) const` (defined for the
   shim only), so that the fakes know the memory the launch uses; MGT_SIMT_MAX_POINTERS in all */
#define MGT_SIMT_MAX_POINTERS 256
template <class T, class = void> struct mgt__simt_names_pointers : std::false_type {};
template <class T> struct mgt__simt_names_pointers<T, std::void_t<decltype(&T::simt_pointers)>> : std::true_type {};
template <class T> inline void mgt__simt_note_pointer(const T &x, const void **ptrs, unsigned char *writes, int &n) {
    if constexpr (std::is_pointer_v<T>) {
        ptrs[n] = (const void *)x;
        writes[n++] = !std::is_const_v<std::remove_pointer_t<T>>;
    } else if constexpr (mgt__simt_names_pointers<T>::value) {
        x.simt_pointers(ptrs, writes, n);
    }
}

/* run `kernel` over the grid: arguments are converted to the parameter types once, then every CUDA
   thread gets its own copy, as a CUDA launch does */
template <class... P, class... A>
inline void mgt_simt_launch(const char *name, dim3 grid, dim3 block, size_t shmem_bytes, cudaStream_t stream,
                            void (*kernel)(P...), A &&...args) {
    static_assert(sizeof...(P) == sizeof...(A), "MGT_LAUNCH: wrong number of kernel arguments");
    struct pack {
        void (*k)(P...);
        std::tuple<std::decay_t<P>...> a;
        const char *name;
        dim3 grid, block;
        size_t shmem;
    };
    auto run = [](void *p) {
        pack *q = static_cast<pack *>(p);
        mgt__simt_run(q->name, q->grid, q->block, q->shmem, [](void *r) {
            pack *s = static_cast<pack *>(r);
            std::apply(s->k, s->a);
        }, q);
    };
    if (mgt_simt_launch_hook) {
        pack *pk = new pack{kernel, std::tuple<std::decay_t<P>...>(std::forward<A>(args)...), name, grid, block,
                            shmem_bytes};
        const void *ptrs[MGT_SIMT_MAX_POINTERS];
        unsigned char writes[MGT_SIMT_MAX_POINTERS];
        int n = 0;
        std::apply([&](const auto &...x) { (mgt__simt_note_pointer(x, ptrs, writes, n), ...); }, pk->a);
        mgt_simt_launch_hook(stream, name, reinterpret_cast<const void *>(kernel), run, [](void *p) { delete static_cast<pack *>(p); }, pk, n,
                             ptrs, writes);
        return;
    }
    pack pk{kernel, std::tuple<std::decay_t<P>...>(std::forward<A>(args)...), name, grid, block, shmem_bytes};
    run(&pk);
}
#define MGT_LAUNCH(kernel, grid, block, shmem, stream, ...) \
    mgt_simt_launch(#kernel, (grid), (block), (shmem), (stream), kernel, ##__VA_ARGS__)

#endif /* __CUDACC__ */
#endif /* MGT_CUDA_CPU_H_INCLUDED */
