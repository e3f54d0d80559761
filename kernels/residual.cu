/* The residual stream and the biases of row-parallel layers, as mgt.h's mgt__add_task,
   mgt__bias_residual_task and mgt__bias_bwd_task:
     add_inplace    y += x                                   (n)
     bias_residual  out += residual + bias                   (N,C) += (N,C) + (C)
     bias_backward  dbias += column sums of dout             (C) += sum over rows of (N,C), dbias fp32
   bias_backward is deterministic without atomics, like LayerNorm's parameter gradients: a fixed
   number of row parts (from N alone), one block per (32-column slice, part) summing its rows in a
   fixed order into an fp32 partial, then the partials added in part order. Math in fp32.
   mgt.h's backend table uses add_inplace on fp32 only (gradient shards). */
#include "common.cuh" // defines: launch macros, floatX conversions, MGT_REQUIRE, MGT_CHECK_LAUNCH

#define MGT_RESIDUAL_BLOCK 256
#define MGT_RESIDUAL_WARPS (MGT_RESIDUAL_BLOCK / MGT_WARP)
#define MGT_BIAS_PARTS 64

static inline int mgt_bias_parts(int N) { return N < MGT_BIAS_PARTS ? N : MGT_BIAS_PARTS; }

template <class floatX>
__global__ void __launch_bounds__(MGT_RESIDUAL_BLOCK) mgt_add_inplace_kernel(floatX *y, const floatX *x, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = mgt_from_f32<floatX>(mgt_to_f32(y[i]) + mgt_to_f32(x[i]));
}

template <class floatX>
__global__ void __launch_bounds__(MGT_RESIDUAL_BLOCK) mgt_bias_residual_kernel(floatX *out, const floatX *residual, const floatX *bias, size_t n, int C) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = mgt_from_f32<floatX>(mgt_to_f32(out[i]) + (mgt_to_f32(residual[i]) + mgt_to_f32(bias[i % (size_t)C])));
}

/* block (slice, part): lane = column of a 32-column slice, warp w sums rows w, w + 8, .. of the part,
   then the 8 warp sums in warp order. scratch (parts, C) */
template <class floatX>
__global__ void __launch_bounds__(MGT_RESIDUAL_BLOCK)
mgt_bias_backward_partials_kernel(float *scratch, const floatX *dout, int N, int C, int rows_per_part) {
    MGT_SHARED(float, sums, MGT_RESIDUAL_BLOCK);
    int slices = (C + MGT_WARP - 1) / MGT_WARP, slice = (int)blockIdx.x % slices, part = (int)blockIdx.x / slices;
    int lane = (int)threadIdx.x % MGT_WARP, warp = (int)threadIdx.x / MGT_WARP, c = slice * MGT_WARP + lane;
    int r0 = part * rows_per_part, r1 = r0 + rows_per_part < N ? r0 + rows_per_part : N;
    float s = 0.0f;
    if (c < C)
        for (int r = r0 + warp; r < r1; r += MGT_RESIDUAL_WARPS) s += mgt_to_f32(dout[(size_t)r * (size_t)C + c]);
    sums[threadIdx.x] = s;
    __syncthreads();
    if (warp == 0 && c < C) {
        for (int w = 1; w < MGT_RESIDUAL_WARPS; w++) s += sums[w * MGT_WARP + lane];
        scratch[(size_t)part * (size_t)C + c] = s;
    }
}

static __global__ void __launch_bounds__(MGT_RESIDUAL_BLOCK) mgt_bias_backward_sum_kernel(float *dbias, const float *scratch, int parts, int C) {
    int c = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (c >= C) return;
    float s = 0.0f;
    for (int p = 0; p < parts; p++) s += scratch[(size_t)p * (size_t)C + c];
    dbias[c] += s;
}

template <class floatX> int mgt_cuda_add_inplace(floatX *y, const floatX *x, size_t n, cudaStream_t stream) {
    MGT_REQUIRE(n == 0 || (y && x));
    if (n == 0) return MGT_KERNEL_OK;
    MGT_LAUNCH(mgt_add_inplace_kernel<floatX>, mgt_grid_for(n, MGT_RESIDUAL_BLOCK), MGT_RESIDUAL_BLOCK, 0, stream, y, x, n);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

template <class floatX> int mgt_cuda_bias_residual(floatX *out, const floatX *residual, const floatX *bias, int N, int C, cudaStream_t stream) {
    MGT_REQUIRE(N > 0 && C > 0);
    MGT_REQUIRE(out && residual && bias);
    MGT_REQUIRE(out != bias);
    size_t n = (size_t)N * (size_t)C;
    MGT_LAUNCH(mgt_bias_residual_kernel<floatX>, mgt_grid_for(n, MGT_RESIDUAL_BLOCK), MGT_RESIDUAL_BLOCK, 0, stream, out, residual, bias, n, C);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

size_t mgt_cuda_bias_backward_scratch(int N, int C) { return N > 0 && C > 0 ? (size_t)mgt_bias_parts(N) * (size_t)C * sizeof(float) : 0; }

template <class floatX> int mgt_cuda_bias_backward(float *dbias, float *scratch, const floatX *dout, int N, int C, cudaStream_t stream) {
    MGT_REQUIRE(N > 0 && C > 0);
    MGT_REQUIRE(dbias && scratch && dout);
    MGT_REQUIRE(dbias != scratch);
    int parts = mgt_bias_parts(N), rows_per_part = (N + parts - 1) / parts, slices = (C + MGT_WARP - 1) / MGT_WARP;
    parts = (N + rows_per_part - 1) / rows_per_part; /* no empty part */
    MGT_LAUNCH(mgt_bias_backward_partials_kernel<floatX>, slices * parts, MGT_RESIDUAL_BLOCK, 0, stream, scratch, dout, N, C, rows_per_part);
    MGT_CHECK_LAUNCH();
    MGT_LAUNCH(mgt_bias_backward_sum_kernel, (C + MGT_RESIDUAL_BLOCK - 1) / MGT_RESIDUAL_BLOCK, MGT_RESIDUAL_BLOCK, 0, stream, dbias,
               scratch, parts, C);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

#define MGT_INSTANTIATE(floatX)                                                                                    \
    template int mgt_cuda_add_inplace<floatX>(floatX *, const floatX *, size_t, cudaStream_t);                     \
    template int mgt_cuda_bias_residual<floatX>(floatX *, const floatX *, const floatX *, int, int, cudaStream_t); \
    template int mgt_cuda_bias_backward<floatX>(float *, float *, const floatX *, int, int, cudaStream_t);
MGT_FOR_EACH_FLOATX(MGT_INSTANTIATE)
