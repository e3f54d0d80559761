/* The residual stream and the biases of row-parallel layers, as mgt.h's mgt__add_task,
   mgt__bias_residual_task and mgt__bias_bwd_task:
     add_inplace    y += x                                   (n)
     bias_residual  out += residual + bias                   (N,C) += (N,C) + (C); out += bias without a residual
                                                             (a matmul's bias where cuBLASLt's epilogue is not run)
     bias_backward  dbias += column sums of dout             (C) += sum over rows of (N,C), dbias fp32
   bias_backward is deterministic without atomics, like LayerNorm's parameter gradients: a fixed
   number of row parts (from N alone), one block per (32-column slice, part) summing its rows in a
   fixed order into an fp32 partial, then the partials added in part order. Math in fp32.
   Memory-bound: 16-byte packets where the pointers and C allow (common.cuh); indices without 64-bit
   division (rows and columns as ints, one warp per row).
   mgt.h's backend table uses add_inplace on fp32 only (gradient shards). */
#include "common.cuh" // defines: launch macros, floatX conversions, MGT_REQUIRE, MGT_CHECK_LAUNCH

#define MGT_RESIDUAL_BLOCK 256
#define MGT_RESIDUAL_WARPS (MGT_RESIDUAL_BLOCK / MGT_WARP)
#define MGT_BIAS_PARTS 64

static inline int mgt_bias_parts(int N) { return N < MGT_BIAS_PARTS ? N : MGT_BIAS_PARTS; }

/* packets [0, packs), then elements [packs * E, n) */
template <class floatX>
__global__ void __launch_bounds__(MGT_RESIDUAL_BLOCK) mgt_add_inplace_kernel(floatX *y, const floatX *x, size_t n, size_t packs) {
    const int E = mgt_pack_of<floatX>::n;
    size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t p = first; p < packs; p += stride) {
        mgt_vec<floatX, E> a = mgt_load128<floatX, E>(y + p * E), b = mgt_load128<floatX, E>(x + p * E);
        for (int k = 0; k < E; k++) a.v[k] = mgt_from_f32<floatX>(mgt_to_f32(a.v[k]) + mgt_to_f32(b.v[k]));
        mgt_store128<floatX, E>(y + p * E, a);
    }
    for (size_t i = packs * E + first; i < n; i += stride) y[i] = mgt_from_f32<floatX>(mgt_to_f32(y[i]) + mgt_to_f32(x[i]));
}

/* one warp per row (no index division): packets of E columns when packed (C % E == 0, aligned),
   else column by column */
template <class floatX>
__global__ void __launch_bounds__(MGT_RESIDUAL_BLOCK)
mgt_bias_residual_kernel(floatX *out, const floatX *residual, const floatX *bias, int N, int C, int packed) {
    const int E = mgt_pack_of<floatX>::n;
    int lane = (int)threadIdx.x % MGT_WARP, warps = (int)(gridDim.x * blockDim.x) / MGT_WARP;
    for (int r = (int)(blockIdx.x * blockDim.x + threadIdx.x) / MGT_WARP; r < N; r += warps) {
        floatX *o = out + (size_t)r * (size_t)C;
        const floatX *x = residual ? residual + (size_t)r * (size_t)C : nullptr;
        if (packed) {
            for (int c = lane * E; c < C; c += MGT_WARP * E) {
                mgt_vec<floatX, E> a = mgt_load128<floatX, E>(o + c), w = mgt_load128<floatX, E>(bias + c), b = w;
                if (x) b = mgt_load128<floatX, E>(x + c);
                for (int k = 0; k < E; k++) a.v[k] = mgt_from_f32<floatX>(mgt_to_f32(a.v[k]) + ((x ? mgt_to_f32(b.v[k]) : 0.0f) + mgt_to_f32(w.v[k])));
                mgt_store128<floatX, E>(o + c, a);
            }
        } else {
            for (int c = lane; c < C; c += MGT_WARP)
                o[c] = mgt_from_f32<floatX>(mgt_to_f32(o[c]) + ((x ? mgt_to_f32(x[c]) : 0.0f) + mgt_to_f32(bias[c])));
        }
    }
}

/* block (slice, part): lane = E columns of a (32 E)-column slice (E = 1 unless packed), warp w sums
   rows w, w + 8, .. of the part, then the 8 warp sums in warp order. scratch (parts, C) */
template <class floatX, int E>
__global__ void __launch_bounds__(MGT_RESIDUAL_BLOCK)
mgt_bias_backward_partials_kernel(float *scratch, const floatX *dout, int N, int C, int rows_per_part) {
    MGT_SHARED(float, sums, MGT_RESIDUAL_BLOCK * E);
    int slices = (C + MGT_WARP * E - 1) / (MGT_WARP * E), slice = (int)blockIdx.x % slices, part = (int)blockIdx.x / slices;
    int lane = (int)threadIdx.x % MGT_WARP, warp = (int)threadIdx.x / MGT_WARP, c = (slice * MGT_WARP + lane) * E;
    int r0 = part * rows_per_part, r1 = r0 + rows_per_part < N ? r0 + rows_per_part : N;
    float s[E];
    for (int k = 0; k < E; k++) s[k] = 0.0f;
    if (c < C)
        for (int r = r0 + warp; r < r1; r += MGT_RESIDUAL_WARPS) {
            if constexpr (E > 1) {
                mgt_vec<floatX, E> d = mgt_load128<floatX, E>(dout + (size_t)r * (size_t)C + c);
                for (int k = 0; k < E; k++) s[k] += mgt_to_f32(d.v[k]);
            } else {
                s[0] += mgt_to_f32(dout[(size_t)r * (size_t)C + c]);
            }
        }
    for (int k = 0; k < E; k++) sums[k * MGT_RESIDUAL_BLOCK + threadIdx.x] = s[k];
    __syncthreads();
    if (warp == 0 && c < C)
        for (int k = 0; k < E; k++) {
            for (int w = 1; w < MGT_RESIDUAL_WARPS; w++) s[k] += sums[k * MGT_RESIDUAL_BLOCK + w * MGT_WARP + lane];
            scratch[(size_t)part * (size_t)C + c + k] = s[k];
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
    size_t packs = mgt_aligned16(y) && mgt_aligned16(x) ? n / mgt_pack_of<floatX>::n : 0;
    MGT_LAUNCH(mgt_add_inplace_kernel<floatX>, mgt_grid_for(packs ? packs : n, MGT_RESIDUAL_BLOCK), MGT_RESIDUAL_BLOCK, 0, stream, y, x, n, packs);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

template <class floatX> int mgt_cuda_bias_residual(floatX *out, const floatX *residual, const floatX *bias, int N, int C, cudaStream_t stream) {
    MGT_REQUIRE(N > 0 && C > 0);
    MGT_REQUIRE(out && bias); /* residual may be NULL: out += bias */
    MGT_REQUIRE(out != bias);
    int packed = C % mgt_pack_of<floatX>::n == 0 && mgt_aligned16(out) && mgt_aligned16(residual) && mgt_aligned16(bias);
    MGT_LAUNCH(mgt_bias_residual_kernel<floatX>, mgt_grid_for((size_t)N, MGT_RESIDUAL_WARPS, 8192), MGT_RESIDUAL_BLOCK, 0, stream, out, residual,
               bias, N, C, packed);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

size_t mgt_cuda_bias_backward_scratch(int N, int C) { return N > 0 && C > 0 ? (size_t)mgt_bias_parts(N) * (size_t)C * sizeof(float) : 0; }

template <class floatX> int mgt_cuda_bias_backward(float *dbias, float *scratch, const floatX *dout, int N, int C, cudaStream_t stream) {
    MGT_REQUIRE(N > 0 && C > 0);
    MGT_REQUIRE(dbias && scratch && dout);
    MGT_REQUIRE(dbias != scratch);
    const int E = mgt_pack_of<floatX>::n;
    int parts = mgt_bias_parts(N), rows_per_part = (N + parts - 1) / parts, packed = C % E == 0 && mgt_aligned16(dout);
    int slices = (C + MGT_WARP * (packed ? E : 1) - 1) / (MGT_WARP * (packed ? E : 1));
    parts = (N + rows_per_part - 1) / rows_per_part; /* no empty part */
    void (*bias_backward_partials_kernel)(float *, const floatX *, int, int, int) = packed ? mgt_bias_backward_partials_kernel<floatX, E>
                                                                      : mgt_bias_backward_partials_kernel<floatX, 1>;
    MGT_LAUNCH(bias_backward_partials_kernel, slices * parts, MGT_RESIDUAL_BLOCK, 0, stream, scratch, dout, N, C, rows_per_part);
    MGT_CHECK_LAUNCH();
    MGT_LAUNCH(mgt_bias_backward_sum_kernel, (C + MGT_RESIDUAL_BLOCK - 1) / MGT_RESIDUAL_BLOCK, MGT_RESIDUAL_BLOCK, 0, stream, dbias,
               scratch, parts, C);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

/* every kernel the launchers above can launch for floatX (launchers.h: loaded when the run is made) */
template <class floatX> void mgt_cuda_residual_kernels(mgt_kernel_list &l) {
    const int E = mgt_pack_of<floatX>::n;
    mgt_kernel_list_add(l, mgt_add_inplace_kernel<floatX>);
    mgt_kernel_list_add(l, mgt_bias_residual_kernel<floatX>);
    mgt_kernel_list_add(l, mgt_bias_backward_partials_kernel<floatX, E>);
    mgt_kernel_list_add(l, mgt_bias_backward_partials_kernel<floatX, 1>);
    mgt_kernel_list_add(l, mgt_bias_backward_sum_kernel);
}

#define MGT_INSTANTIATE(floatX)                                                                                    \
    template int mgt_cuda_add_inplace<floatX>(floatX *, const floatX *, size_t, cudaStream_t);                     \
    template int mgt_cuda_bias_residual<floatX>(floatX *, const floatX *, const floatX *, int, int, cudaStream_t); \
    template int mgt_cuda_bias_backward<floatX>(float *, float *, const floatX *, int, int, cudaStream_t); \
    template void mgt_cuda_residual_kernels<floatX>(mgt_kernel_list &);
MGT_FOR_EACH_FLOATX(MGT_INSTANTIATE)
