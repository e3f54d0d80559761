/* kernels/common.cuh: what every kernels/<op>.cu shares.

   Each .cu compiles two ways: with nvcc (__CUDACC__: the real CUDA headers and launch syntax) and
   as plain C++17 on the CPU through the SIMT shim kernels/cuda_cpu.h, which provides the same names
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

#ifdef __CUDACC__
#include <cuda_runtime.h> // defines: cudaStream_t, cudaGetLastError, cudaGetErrorString
#include <cuda_bf16.h>    // defines: __nv_bfloat16, __float2bfloat16, __bfloat162float
#include <cuda_fp16.h>    // defines: __half, __float2half, __half2float
#define MGT_SHARED(type, name, count) __shared__ type name[count]
#define MGT_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#define MGT_LAUNCH(kernel, grid, block, shmem, stream, ...) kernel<<<grid, block, shmem, stream>>>(__VA_ARGS__)
#else
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
#endif

/* ---- errors ------------------------------------------------------------------------------------ */

enum {
    MGT_KERNEL_OK = 0,
    MGT_KERNEL_INVALID = -1, /* a precondition of the launcher does not hold (shape, null pointer, alias) */
    MGT_KERNEL_LAUNCH = -2   /* the launch itself failed (cudaGetLastError) */
};

typedef struct mgt_kernel_error {
    int code;
    const char *file;
    int line;
    const char *what; /* the failed condition, or the CUDA error string */
} mgt_kernel_error;

/* the last failure of a launcher on this thread (code 0 when none failed yet) */
inline mgt_kernel_error &mgt_kernel_last_error() {
    static thread_local mgt_kernel_error e = {0, "", 0, ""};
    return e;
}
inline int mgt_kernel_fail(int code, const char *file, int line, const char *what) {
    mgt_kernel_error &e = mgt_kernel_last_error();
    e.code = code;
    e.file = file;
    e.line = line;
    e.what = what;
    return code;
}

/* a launcher's precondition: return MGT_KERNEL_INVALID naming the condition */
#define MGT_REQUIRE(cond)                                                                       \
    do {                                                                                        \
        if (!(cond)) return mgt_kernel_fail(MGT_KERNEL_INVALID, __FILE__, __LINE__, #cond);     \
    } while (0)

/* after each launch: a bad configuration or a sticky error returns MGT_KERNEL_LAUNCH */
#ifndef MGT_CHECK_LAUNCH
#ifdef __CUDACC__
#define MGT_CHECK_LAUNCH()                                                                      \
    do {                                                                                        \
        cudaError_t mgt_err_ = cudaGetLastError();                                              \
        if (mgt_err_ != cudaSuccess)                                                            \
            return mgt_kernel_fail(MGT_KERNEL_LAUNCH, __FILE__, __LINE__, cudaGetErrorString(mgt_err_)); \
    } while (0)
#else
#define MGT_CHECK_LAUNCH() do {} while (0) /* the shim reports its own launch errors */
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

/* ---- launchers (0 = ok, negative = MGT_KERNEL_*) ---------------------------------------------- */

/* encoder.cu: vocabulary-parallel token + position embedding */
template <class floatX> /* out (B,T,C) = wte[tok - vocab_start] for tok in [vocab_start, vocab_start + vocab_rows), else 0; + wpe[t] when wpe */
int mgt_cuda_encoder_forward(floatX *out, const int *tokens, const floatX *wte, int vocab_start, int vocab_rows, const floatX *wpe, int B, int T,
                             int C, cudaStream_t stream);
template <class floatX> /* dwte (vocab_rows,C) += and dwpe (T,C) += (when dwpe) in fp32, positions added in order */
int mgt_cuda_encoder_backward(float *dwte, float *dwpe, const floatX *dout, const int *tokens, int vocab_start, int vocab_rows, int B, int T, int C,
                              cudaStream_t stream);

/* layernorm.cu: eps 1e-5; mean and rstd (N) in fp32 */
template <class floatX>
int mgt_cuda_layernorm_forward(floatX *out, float *mean, float *rstd, const floatX *inp, const floatX *weight, const floatX *bias, int N, int C,
                               cudaStream_t stream);
/* bytes of scratch that mgt_cuda_layernorm_backward needs for (N, C) */
size_t mgt_cuda_layernorm_backward_scratch(int N, int C);
template <class floatX> /* dinp (N,C) +=, dweight (C) += and dbias (C) += in fp32 */
int mgt_cuda_layernorm_backward(floatX *dinp, float *dweight, float *dbias, float *scratch, const floatX *dout, const floatX *inp, const floatX *weight,
                                const float *mean, const float *rstd, int N, int C, cudaStream_t stream);

/* attention.cu: the causal softmax between the batched GEMMs; rows of (BNH = B*NH, T, T) */
template <class floatX> /* att = softmax(scale * scores) over j <= t, 0 above the diagonal; att may be scores */
int mgt_cuda_softmax_forward(floatX *att, const floatX *scores, float scale, int BNH, int T, cudaStream_t stream);
template <class floatX> /* dscores = scale * P * (dP - rowsum(P * dP)), 0 above the diagonal; dscores may be datt */
int mgt_cuda_softmax_backward(floatX *dscores, const floatX *datt, const floatX *att, float scale, int BNH, int T, cudaStream_t stream);

/* gelu.cu: tanh approximation */
template <class floatX> int mgt_cuda_gelu_forward(floatX *out, const floatX *inp, size_t n, cudaStream_t stream);
template <class floatX> /* dinp = gelu'(inp) * dout (dinp may alias inp or dout) */
int mgt_cuda_gelu_backward(floatX *dinp, const floatX *inp, const floatX *dout, size_t n, cudaStream_t stream);

/* residual.cu */
/* y += x; the backend table's add_inplace is the float one (gradient shards) */
template <class floatX> int mgt_cuda_add_inplace(floatX *y, const floatX *x, size_t n, cudaStream_t stream);
template <class floatX> /* out (N,C) += residual (N,C) + bias (C) */
int mgt_cuda_bias_residual(floatX *out, const floatX *residual, const floatX *bias, int N, int C, cudaStream_t stream);
size_t mgt_cuda_bias_backward_scratch(int N, int C);
template <class floatX> /* dbias (C) += column sums of dout (N,C) in fp32, in a fixed order */
int mgt_cuda_bias_backward(float *dbias, float *scratch, const floatX *dout, int N, int C, cudaStream_t stream);

/* crossentropy.cu: vocabulary-parallel, the semantics of mgt.h's xent_partial / xent_finish */
template <class floatX> /* part (N,3) = (max, sum exp(l - max), target logit or 0); logits (N,Vl) become exp(l - max) */
int mgt_cuda_xent_partial(float *part, floatX *logits, const int *targets, int N, int vocab_start, int Vl, int V, cudaStream_t stream);
template <class floatX> /* losses (N) from parts (tp,N,3); logits become (softmax - onehot) * grad_scale when grad_scale != 0 */
int mgt_cuda_xent_finish(double *losses, floatX *logits, const float *parts, int tp, const int *targets, int N, int vocab_start, int Vl,
                         int V, float grad_scale, cudaStream_t stream);

/* adamw.cu: mgt.h's AdamW (torch.optim.AdamW); grad_scale multiplies the gradient (clipping, 1/loss scale) */
int mgt_cuda_adamw(float *param, const float *grad, float *m, float *v, size_t n, float lr, float beta1, float beta2, float eps,
                   float weight_decay, float grad_scale, float bias_correction1, float bias_correction2, cudaStream_t stream);
template <class floatX> /* the update on fp32 master weights and moments from the fp32 grad, writing param_copy = round(master) */
int mgt_cuda_adamw_master(floatX *param_copy, float *master, const float *grad, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                          float eps, float weight_decay, float grad_scale, float bias_correction1, float bias_correction2,
                          cudaStream_t stream);

/* cast.cu: between fp32 and the 16-bit types (round to nearest even) */
template <class D, class S> int mgt_cuda_cast(D *dst, const S *src, size_t n, cudaStream_t stream);

/* norm.cu: sum of squares in fixed blocks of MGT_SS_BLOCK elements, each in fp64, added in block order;
   the backend table's sum_squares and scale are the float ones (gradients) */
#define MGT_SS_BLOCK 65536
size_t mgt_cuda_sum_squares_scratch(size_t n);
template <class floatX> /* *out (one double in device memory) = sum of x[i]^2 */
int mgt_cuda_sum_squares(double *out, double *scratch, const floatX *x, size_t n, cudaStream_t stream);
template <class floatX> int mgt_cuda_scale(floatX *x, float factor, size_t n, cudaStream_t stream); /* x *= factor */

#endif /* MGT_KERNELS_COMMON_CUH */
