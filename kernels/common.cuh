/* kernels/common.cuh: what every kernels/<op>.cu shares.

   Each .cu compiles two ways: with nvcc (__CUDACC__: the real CUDA headers and launch syntax) and
   as plain C++17 on the CPU through the SIMT shim tests/simt/cuda_cpu.h, which provides the same names
   (threadIdx.., __syncthreads, the *_sync warp intrinsics, float math, __nv_bfloat16, __half,
   cudaStream_t) and the macros below. Device code uses nothing outside that list: 1-D grids and
   blocks given as ints (no dim3), shared memory only through MGT_SHARED / MGT_DYNAMIC_SHARED.

   Launchers are plain host functions declared at the end of this file (one section per op family,
   defined in kernels/<op>.cu). They take the stream last, check their preconditions and the launch,
   and return 0 or a negative MGT_KERNEL_* code; the failing file, line and reason are kept per
   thread in mgt_kernel_last_error(). They never print and never exit.

   Shape letters as in mgt.h: B batch, T time, C channels, V vocabulary, NH heads, N = B*T rows.
   Element types, as in mgt.h's backend table: floatX (float, __nv_bfloat16 or __half) is the
   storage type of activations, activation gradients and the parameters the ops read; `float *` is
   always fp32: parameter gradients (summed over micro-batches and DP ranks in fp32, Megatron's
   main_grad), LayerNorm mean/rstd, cross-entropy partials, master weights and AdamW moments.
   Every reduction and every intermediate is fp32 (the sum of squares in fp64). */
#ifndef MGT_KERNELS_COMMON_CUH
#define MGT_KERNELS_COMMON_CUH

#include <stddef.h> // defines: size_t
#include <math.h>   // defines: INFINITY
#include <string.h> // defines: memcpy (packets)

#ifdef __CUDACC__
#include <cuda_runtime.h> // defines: cudaStream_t, cudaGetLastError, cudaGetErrorString
#include <cuda_bf16.h>    // defines: __nv_bfloat16, __float2bfloat16, __bfloat162float
#include <cuda_fp16.h>    // defines: __half, __float2half, __half2float
#define MGT_SHARED(type, name, count) __shared__ type name[count]
#define MGT_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#define MGT_LAUNCH(kernel, grid, block, shmem, stream, ...) kernel<<<grid, block, shmem, stream>>>(__VA_ARGS__)
#else
/* a test rig, not part of the CUDA library: the CPU builds of the tests add -Itests/simt */
#include "cuda_cpu.h" // defines: the SIMT shim (CUDA names, MGT_SHARED, MGT_DYNAMIC_SHARED, MGT_LAUNCH)
#endif

/* qualifiers the shim may leave undefined (they mean nothing on the CPU) */
#ifndef __CUDACC__
#ifndef __global__
#define __global__
#endif
#ifndef __device__
#define __device__
#endif
#ifndef __host__
#define __host__
#endif
#ifndef __forceinline__
#define __forceinline__ inline
#endif
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif
#ifndef __grid_constant__
#define __grid_constant__
#endif
#endif

/* ---- errors and launchers: kernels/launchers.h (what host code outside kernels/ may include) ---- */

#include "launchers.h" // defines: MGT_KERNEL_*, mgt_kernel_last_error, mgt_kernel_fail, the mgt_cuda_* launchers

/* a launcher's precondition: return MGT_KERNEL_INVALID naming the condition */
#define MGT_REQUIRE(cond)                                                                       \
    do {                                                                                        \
        if (!(cond)) return mgt_kernel_fail(MGT_KERNEL_INVALID, __FILE__, __LINE__, #cond);     \
    } while (0)

/* after each launch: the launch site is noted (mgt_kernel_launches); a bad configuration or a sticky
   error returns MGT_KERNEL_LAUNCH */
#ifndef MGT_CHECK_LAUNCH
#ifdef __CUDACC__
#define MGT_CHECK_LAUNCH()                                                                      \
    do {                                                                                        \
        mgt_kernel_note_launch(__FILE__, __LINE__);                                             \
        cudaError_t mgt_err_ = cudaGetLastError();                                              \
        if (mgt_err_ != cudaSuccess)                                                            \
            return mgt_kernel_fail(MGT_KERNEL_LAUNCH, __FILE__, __LINE__, cudaGetErrorString(mgt_err_)); \
    } while (0)
#else
#define MGT_CHECK_LAUNCH() mgt_kernel_note_launch(__FILE__, __LINE__) /* the shim reports its own launch errors */
#endif
#endif

/* ---- element types ----------------------------------------------------------------------------- */

/* X(type) for every storage type the launchers are instantiated for */
#define MGT_FOR_EACH_FLOATX(X) X(float) X(__nv_bfloat16) X(__half)

__device__ __forceinline__ float mgt_to_f32(float x) { return x; }
__device__ __forceinline__ float mgt_to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float mgt_to_f32(__half x) { return __half2float(x); }

/* round to nearest even into the storage type */
template <class T> struct mgt_store;
template <> struct mgt_store<float> { static __device__ __forceinline__ float from(float x) { return x; } };
template <> struct mgt_store<__nv_bfloat16> { static __device__ __forceinline__ __nv_bfloat16 from(float x) { return __float2bfloat16(x); } };
template <> struct mgt_store<__half> { static __device__ __forceinline__ __half from(float x) { return __float2half(x); } };
template <class T> __device__ __forceinline__ T mgt_from_f32(float x) { return mgt_store<T>::from(x); }

/* ---- 16-byte packets (llm.c's Packed128) -------------------------------------------------------
   Memory-bound kernels move E elements at a time: mgt_load128<T, E> and mgt_store128<T, E> are E * sizeof(T)
   bytes (a multiple of 16) as 128-bit accesses (ld.global.v4 / st.global.v4 under nvcc; memcpy in
   the shim). E is 16 / sizeof of the narrowest type a kernel touches, so every array is read and
   written in whole 16-byte pieces. A launcher takes the packed path only when every pointer is 16-byte
   aligned (mgt_aligned16); the elements after the last whole packet, and every element of an unaligned
   call (a shard at any offset), go through the same kernel's element loop. */
#define MGT_PACK_BYTES 16
template <class T> struct mgt_pack_of { static constexpr int n = MGT_PACK_BYTES / (int)sizeof(T); }; /* elements in 16 bytes */
template <class T, int E> struct alignas(MGT_PACK_BYTES) mgt_vec {
    T v[E];
};
template <class T, int E> __device__ __forceinline__ mgt_vec<T, E> mgt_load128(const T *p) {
    static_assert(sizeof(T) * E % MGT_PACK_BYTES == 0, "whole 16-byte pieces");
    mgt_vec<T, E> r;
#ifdef __CUDACC__
    int4 bits[sizeof(T) * E / MGT_PACK_BYTES];
    for (int k = 0; k < (int)(sizeof(T) * E / MGT_PACK_BYTES); k++) bits[k] = reinterpret_cast<const int4 *>(p)[k];
    memcpy(&r, bits, sizeof r);
#else
    memcpy(&r, p, sizeof r);
#endif
    return r;
}
template <class T, int E> __device__ __forceinline__ void mgt_store128(T *p, const mgt_vec<T, E> &x) {
    static_assert(sizeof(T) * E % MGT_PACK_BYTES == 0, "whole 16-byte pieces");
#ifdef __CUDACC__
    int4 bits[sizeof(T) * E / MGT_PACK_BYTES];
    memcpy(bits, &x, sizeof x);
    for (int k = 0; k < (int)(sizeof(T) * E / MGT_PACK_BYTES); k++) reinterpret_cast<int4 *>(p)[k] = bits[k];
#else
    memcpy(p, &x, sizeof x);
#endif
}
/* E elements: in 16-byte pieces when they make whole ones (then p must be aligned), else one by one
   (E = 1: the element loop of a kernel written once for both) */
template <class T, int E> __device__ __forceinline__ mgt_vec<T, E> mgt_load_n(const T *p) {
    if constexpr (sizeof(T) * E % MGT_PACK_BYTES == 0) {
        return mgt_load128<T, E>(p);
    } else {
        mgt_vec<T, E> r;
        for (int k = 0; k < E; k++) r.v[k] = p[k];
        return r;
    }
}
template <class T, int E> __device__ __forceinline__ void mgt_store_n(T *p, const mgt_vec<T, E> &x) {
    if constexpr (sizeof(T) * E % MGT_PACK_BYTES == 0) {
        mgt_store128<T, E>(p, x);
    } else {
        for (int k = 0; k < E; k++) p[k] = x.v[k];
    }
}
/* true when p (or NULL) may be read in packets */
inline bool mgt_aligned16(const void *p) { return ((size_t)p & (MGT_PACK_BYTES - 1)) == 0; }

/* ---- reductions (fixed order: the result depends only on the block size, never on timing) ---- */

#define MGT_WARP 32
#define MGT_FULL_MASK 0xffffffffu

__device__ __forceinline__ float mgt_warp_sum(float v) {
    for (int o = MGT_WARP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(MGT_FULL_MASK, v, o);
    return v;
}
__device__ __forceinline__ float mgt_warp_max(float v) {
    for (int o = MGT_WARP / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(MGT_FULL_MASK, v, o));
    return v;
}
/* sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the same value.
   scratch: 32 floats of shared memory, reusable right after the call */
__device__ __forceinline__ float mgt_block_sum(float v, float *scratch) {
    int lane = (int)threadIdx.x % MGT_WARP, warp = (int)threadIdx.x / MGT_WARP, nwarps = (int)blockDim.x / MGT_WARP;
    v = mgt_warp_sum(v);
    __syncthreads(); /* the previous use of scratch is over */
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < nwarps ? scratch[lane] : 0.0f;
    return mgt_warp_sum(v);
}
__device__ __forceinline__ float mgt_block_max(float v, float *scratch) {
    int lane = (int)threadIdx.x % MGT_WARP, warp = (int)threadIdx.x / MGT_WARP, nwarps = (int)blockDim.x / MGT_WARP;
    v = mgt_warp_max(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < nwarps ? scratch[lane] : -INFINITY;
    return mgt_warp_max(v);
}

/* ---- launch geometry --------------------------------------------------------------------------- */

/* blocks for a grid-stride loop over n elements: enough to fill any current GPU, never more than n needs */
inline int mgt_grid_for(size_t n, int block, int cap = 2048) {
    size_t g = (n + (size_t)block - 1) / (size_t)block;
    return g < 1 ? 1 : g > (size_t)cap ? cap : (int)g;
}

#endif /* MGT_KERNELS_COMMON_CUH */
