/* Gradient norm and scaling, elementwise on n values.
     sum_squares  *out = sum of x[i]^2 in fp64: one block per fixed chunk of MGT_SS_BLOCK values
                  (the chunks of mgt.h's mgt__cpu_sum_squares), each summed by a fixed tree in fp64,
                  then the chunk sums combined by a fixed tree in one block. The result depends on
                  n only, never on the GPU or the timing (it differs from the CPU backend's sum in
                  rounding only). An inf or nan anywhere gives inf or nan: the fp16 loss scaler's
                  overflow check.
     sum_squares_blocks, sum_doubles: the same two stages apart, so that many tensors' chunks go
                  into one array and one sum (the multi-tensor norm of a step, and the loss)
     scale        x *= factor
   Memory-bound: 16-byte packets when x is aligned (common.cuh; a gradient slice at any offset is read
   element by element).
   sum_squares leaves its result in device memory (no host sync); the caller copies it when needed. */
#include "common.cuh" // defines: launch macros, floatX conversions, MGT_SS_BLOCK, MGT_REQUIRE, MGT_CHECK_LAUNCH

#define MGT_NORM_BLOCK 256

/* the fp64 tree over the block (blockDim.x == MGT_NORM_BLOCK); the total ends in s[0] */
__device__ __forceinline__ void mgt_norm_tree(double *s) {
    for (int stride = MGT_NORM_BLOCK / 2; stride > 0; stride >>= 1) {
        __syncthreads();
        if ((int)threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
    }
    __syncthreads();
}

/* packed (x aligned): thread t adds the packets t, t + 256, .. of its chunk, element by element */
template <class floatX>
__global__ void __launch_bounds__(MGT_NORM_BLOCK) mgt_sum_squares_chunks_kernel(double *chunks, const floatX *x, size_t n, int packed) {
    const int E = mgt_pack_of<floatX>::n;
    MGT_SHARED(double, s, MGT_NORM_BLOCK);
    size_t i0 = (size_t)blockIdx.x * MGT_SS_BLOCK, i1 = i0 + MGT_SS_BLOCK < n ? i0 + MGT_SS_BLOCK : n;
    double acc = 0.0;
    if (packed) {
        size_t whole = i0 + (i1 - i0) / E * E; /* MGT_SS_BLOCK is a multiple of E: every chunk starts on a packet */
        for (size_t i = i0 + threadIdx.x * E; i < whole; i += MGT_NORM_BLOCK * E) {
            mgt_vec<floatX, E> a = mgt_load128<floatX, E>(x + i);
            for (int k = 0; k < E; k++) {
                double v = (double)mgt_to_f32(a.v[k]);
                acc += v * v;
            }
        }
        i0 = whole;
    }
    for (size_t i = i0 + threadIdx.x; i < i1; i += MGT_NORM_BLOCK) {
        double v = (double)mgt_to_f32(x[i]);
        acc += v * v;
    }
    s[threadIdx.x] = acc;
    mgt_norm_tree(s);
    if (threadIdx.x == 0) chunks[blockIdx.x] = s[0];
}

/* out[0] = (accumulate ? out[0] : 0) + the sum of x[0..n): thread t adds x[t], x[t + 256].. in order,
   then the fixed tree */
static __global__ void __launch_bounds__(MGT_NORM_BLOCK) mgt_sum_doubles_kernel(double *out, const double *x, size_t n, int accumulate) {
    MGT_SHARED(double, s, MGT_NORM_BLOCK);
    double acc = 0.0;
    for (size_t i = threadIdx.x; i < n; i += MGT_NORM_BLOCK) acc += x[i];
    s[threadIdx.x] = acc;
    mgt_norm_tree(s);
    if (threadIdx.x == 0) out[0] = accumulate ? out[0] + s[0] : s[0];
}

/* packets [0, packs), then elements [packs * E, n) */
template <class floatX> __global__ void __launch_bounds__(MGT_NORM_BLOCK) mgt_scale_kernel(floatX *x, float factor, size_t n, size_t packs) {
    const int E = mgt_pack_of<floatX>::n;
    size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t p = first; p < packs; p += stride) {
        mgt_vec<floatX, E> a = mgt_load128<floatX, E>(x + p * E);
        for (int k = 0; k < E; k++) a.v[k] = mgt_from_f32<floatX>(mgt_to_f32(a.v[k]) * factor);
        mgt_store128<floatX, E>(x + p * E, a);
    }
    for (size_t i = packs * E + first; i < n; i += stride) x[i] = mgt_from_f32<floatX>(mgt_to_f32(x[i]) * factor);
}

size_t mgt_cuda_sum_squares_scratch(size_t n) { return (n + MGT_SS_BLOCK - 1) / MGT_SS_BLOCK * sizeof(double); }

template <class floatX> int mgt_cuda_sum_squares(double *out, double *scratch, const floatX *x, size_t n, cudaStream_t stream) {
    size_t nchunks = (n + MGT_SS_BLOCK - 1) / MGT_SS_BLOCK;
    MGT_REQUIRE(out && (n == 0 || (x && scratch)));
    MGT_REQUIRE(nchunks <= 0x7fffffff);
    if (n > 0) {
        MGT_LAUNCH(mgt_sum_squares_chunks_kernel<floatX>, (int)nchunks, MGT_NORM_BLOCK, 0, stream, scratch, x, n, mgt_aligned16(x) ? 1 : 0);
        MGT_CHECK_LAUNCH();
    }
    MGT_LAUNCH(mgt_sum_doubles_kernel, 1, MGT_NORM_BLOCK, 0, stream, out, (const double *)scratch, nchunks, 0); /* n == 0 writes 0 */
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

size_t mgt_cuda_sum_squares_chunks(size_t n) { return (n + MGT_SS_BLOCK - 1) / MGT_SS_BLOCK; }

template <class floatX> int mgt_cuda_sum_squares_blocks(double *chunks, const floatX *x, size_t n, cudaStream_t stream) {
    size_t nchunks = mgt_cuda_sum_squares_chunks(n);
    MGT_REQUIRE(n == 0 || (x && chunks));
    MGT_REQUIRE(nchunks <= 0x7fffffff);
    if (n == 0) return MGT_KERNEL_OK;
    MGT_LAUNCH(mgt_sum_squares_chunks_kernel<floatX>, (int)nchunks, MGT_NORM_BLOCK, 0, stream, chunks, x, n, mgt_aligned16(x) ? 1 : 0);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

int mgt_cuda_sum_doubles(double *out, const double *x, size_t n, int accumulate, cudaStream_t stream) {
    MGT_REQUIRE(out && (n == 0 || x));
    MGT_LAUNCH(mgt_sum_doubles_kernel, 1, MGT_NORM_BLOCK, 0, stream, out, x, n, accumulate ? 1 : 0);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

template <class floatX> int mgt_cuda_scale(floatX *x, float factor, size_t n, cudaStream_t stream) {
    MGT_REQUIRE(n == 0 || x);
    if (n == 0) return MGT_KERNEL_OK;
    size_t packs = mgt_aligned16(x) ? n / mgt_pack_of<floatX>::n : 0;
    MGT_LAUNCH(mgt_scale_kernel<floatX>, mgt_grid_for(packs ? packs : n, MGT_NORM_BLOCK), MGT_NORM_BLOCK, 0, stream, x, factor, n, packs);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

/* every kernel the launchers above can launch for floatX (launchers.h: loaded when the run is made) */
template <class floatX> void mgt_cuda_norm_kernels(mgt_kernel_list &l) {
    mgt_kernel_list_add(l, mgt_sum_squares_chunks_kernel<floatX>);
    mgt_kernel_list_add(l, mgt_sum_doubles_kernel);
    mgt_kernel_list_add(l, mgt_scale_kernel<floatX>);
}

#define MGT_INSTANTIATE(floatX)                                                                            \
    template int mgt_cuda_sum_squares<floatX>(double *, double *, const floatX *, size_t, cudaStream_t);   \
    template int mgt_cuda_sum_squares_blocks<floatX>(double *, const floatX *, size_t, cudaStream_t);      \
    template int mgt_cuda_scale<floatX>(floatX *, float, size_t, cudaStream_t); \
    template void mgt_cuda_norm_kernels<floatX>(mgt_kernel_list &);
MGT_FOR_EACH_FLOATX(MGT_INSTANTIATE)
