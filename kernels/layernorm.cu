/* LayerNorm over the last dimension of (N,C), eps 1e-5, as mgt.h's mgt__ln_fwd_task and the two
   passes of its backward:
     forward   mean = sum(x)/C, var = sum((x - mean)^2)/C (two passes), rstd = 1/sqrt(var + 1e-5)
               out = (x - mean) * rstd * weight + bias;  mean, rstd (N) saved in fp32 when given
     backward  g = weight * dout, xhat = (x - mean) * rstd
               dinp    += rstd * (g - mean(g) - xhat * mean(g * xhat))     (one warp per row)
               dweight += sum over rows of dout * xhat,  dbias += sum over rows of dout   (fp32)
   The parameter gradients are deterministic without atomics: the rows are cut into a fixed number
   of parts (from N alone, MGT_LN_PARTS), one block per (32-channel slice, part) sums its rows in a
   fixed order into an fp32 partial in scratch, and a last kernel adds the partials in part order.
   dweight and dbias are fp32 whatever the storage type (mgt.h's main_grad); dinp is in it. */
#include "common.cuh" // defines: launch macros, floatX conversions, warp/block sums, MGT_REQUIRE, MGT_CHECK_LAUNCH

#define MGT_LN_BLOCK 256                        /* 8 warps: 8 rows per block in the row kernels */
#define MGT_LN_WARPS (MGT_LN_BLOCK / MGT_WARP)
#define MGT_LN_PARTS 64                         /* at most this many row parts for dweight/dbias */

static inline int mgt_ln_parts(int N) { return N < MGT_LN_PARTS ? N : MGT_LN_PARTS; }

/* one warp per row */
template <class floatX>
__global__ void __launch_bounds__(MGT_LN_BLOCK)
mgt_layernorm_forward_kernel(floatX *out, float *mean, float *rstd, const floatX *inp, const floatX *weight, const floatX *bias, int N, int C) {
    int lane = (int)threadIdx.x % MGT_WARP, row = (int)blockIdx.x * MGT_LN_WARPS + (int)threadIdx.x / MGT_WARP;
    if (row >= N) return; /* whole warps leave together */
    const floatX *x = inp + (size_t)row * (size_t)C;
    floatX *o = out + (size_t)row * (size_t)C;
    float s = 0.0f;
    for (int c = lane; c < C; c += MGT_WARP) s += mgt_to_f32(x[c]);
    float m = mgt_warp_sum(s) / (float)C;
    float v = 0.0f;
    for (int c = lane; c < C; c += MGT_WARP) {
        float d = mgt_to_f32(x[c]) - m;
        v += d * d;
    }
    float rs = 1.0f / sqrtf(mgt_warp_sum(v) / (float)C + 1e-5f);
    for (int c = lane; c < C; c += MGT_WARP)
        o[c] = mgt_from_f32<floatX>((mgt_to_f32(x[c]) - m) * rs * mgt_to_f32(weight[c]) + mgt_to_f32(bias[c]));
    if (lane == 0) {
        if (mean) mean[row] = m;
        if (rstd) rstd[row] = rs;
    }
}

/* one warp per row: dinp += rstd * (g - mean(g) - xhat * mean(g * xhat)) */
template <class floatX>
__global__ void __launch_bounds__(MGT_LN_BLOCK)
mgt_layernorm_backward_rows_kernel(floatX *dinp, const floatX *dout, const floatX *inp, const floatX *weight, const float *mean,
                                   const float *rstd, int N, int C) {
    int lane = (int)threadIdx.x % MGT_WARP, row = (int)blockIdx.x * MGT_LN_WARPS + (int)threadIdx.x / MGT_WARP;
    if (row >= N) return;
    const floatX *d = dout + (size_t)row * (size_t)C, *x = inp + (size_t)row * (size_t)C;
    floatX *di = dinp + (size_t)row * (size_t)C;
    float m = mean[row], rs = rstd[row], sg = 0.0f, sgx = 0.0f;
    for (int c = lane; c < C; c += MGT_WARP) {
        float g = mgt_to_f32(weight[c]) * mgt_to_f32(d[c]);
        sg += g;
        sgx += g * (mgt_to_f32(x[c]) - m) * rs;
    }
    float mg = mgt_warp_sum(sg) / (float)C, mgx = mgt_warp_sum(sgx) / (float)C;
    for (int c = lane; c < C; c += MGT_WARP) {
        float g = mgt_to_f32(weight[c]) * mgt_to_f32(d[c]), xhat = (mgt_to_f32(x[c]) - m) * rs;
        di[c] = mgt_from_f32<floatX>(mgt_to_f32(di[c]) + rs * (g - mg - xhat * mgx));
    }
}

/* block (slice, part): lane = channel of a 32-channel slice, warp w sums rows w, w + 8, .. of the
   part; the 8 warp sums are added in warp order. scratch (parts, 2, C): dweight then dbias partials */
template <class floatX>
__global__ void __launch_bounds__(MGT_LN_BLOCK)
mgt_layernorm_backward_partials_kernel(float *scratch, const floatX *dout, const floatX *inp, const float *mean, const float *rstd, int N,
                                       int C, int rows_per_part) {
    MGT_SHARED(float, sdw, MGT_LN_BLOCK);
    MGT_SHARED(float, sdb, MGT_LN_BLOCK);
    int slices = (C + MGT_WARP - 1) / MGT_WARP, slice = (int)blockIdx.x % slices, part = (int)blockIdx.x / slices;
    int lane = (int)threadIdx.x % MGT_WARP, warp = (int)threadIdx.x / MGT_WARP, c = slice * MGT_WARP + lane;
    int r0 = part * rows_per_part, r1 = r0 + rows_per_part < N ? r0 + rows_per_part : N;
    float dw = 0.0f, db = 0.0f;
    if (c < C)
        for (int r = r0 + warp; r < r1; r += MGT_LN_WARPS) {
            float d = mgt_to_f32(dout[(size_t)r * (size_t)C + c]);
            dw += d * (mgt_to_f32(inp[(size_t)r * (size_t)C + c]) - mean[r]) * rstd[r];
            db += d;
        }
    sdw[threadIdx.x] = dw;
    sdb[threadIdx.x] = db;
    __syncthreads();
    if (warp == 0 && c < C) {
        for (int w = 1; w < MGT_LN_WARPS; w++) {
            dw += sdw[w * MGT_WARP + lane];
            db += sdb[w * MGT_WARP + lane];
        }
        scratch[(size_t)part * 2 * (size_t)C + c] = dw;
        scratch[(size_t)part * 2 * (size_t)C + (size_t)C + c] = db;
    }
}

/* one thread per channel: dweight[c] += sum over parts in order, dbias[c] likewise */
static __global__ void __launch_bounds__(MGT_LN_BLOCK)
mgt_layernorm_backward_params_kernel(float *dweight, float *dbias, const float *scratch, int parts, int C) {
    int c = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (c >= C) return;
    float dw = 0.0f, db = 0.0f;
    for (int p = 0; p < parts; p++) {
        dw += scratch[(size_t)p * 2 * (size_t)C + c];
        db += scratch[(size_t)p * 2 * (size_t)C + (size_t)C + c];
    }
    dweight[c] += dw;
    dbias[c] += db;
}

template <class floatX>
int mgt_cuda_layernorm_forward(floatX *out, float *mean, float *rstd, const floatX *inp, const floatX *weight, const floatX *bias, int N,
                               int C, cudaStream_t stream) {
    MGT_REQUIRE(N > 0 && C > 0);
    MGT_REQUIRE(out && inp && weight && bias);
    MGT_REQUIRE(out != inp);
    MGT_LAUNCH(mgt_layernorm_forward_kernel<floatX>, (N + MGT_LN_WARPS - 1) / MGT_LN_WARPS, MGT_LN_BLOCK, 0, stream, out, mean, rstd, inp,
               weight, bias, N, C);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

size_t mgt_cuda_layernorm_backward_scratch(int N, int C) {
    return N > 0 && C > 0 ? (size_t)mgt_ln_parts(N) * 2 * (size_t)C * sizeof(float) : 0;
}

template <class floatX>
int mgt_cuda_layernorm_backward(floatX *dinp, float *dweight, float *dbias, float *scratch, const floatX *dout, const floatX *inp,
                                const floatX *weight, const float *mean, const float *rstd, int N, int C, cudaStream_t stream) {
    MGT_REQUIRE(N > 0 && C > 0);
    MGT_REQUIRE(dinp && dweight && dbias && scratch && dout && inp && weight && mean && rstd);
    MGT_REQUIRE(dinp != dout && dinp != inp && dweight != dbias && scratch != dweight && scratch != dbias);
    int parts = mgt_ln_parts(N), rows_per_part = (N + parts - 1) / parts, slices = (C + MGT_WARP - 1) / MGT_WARP;
    parts = (N + rows_per_part - 1) / rows_per_part; /* no empty part */
    MGT_LAUNCH(mgt_layernorm_backward_rows_kernel<floatX>, (N + MGT_LN_WARPS - 1) / MGT_LN_WARPS, MGT_LN_BLOCK, 0, stream, dinp, dout, inp,
               weight, mean, rstd, N, C);
    MGT_CHECK_LAUNCH();
    MGT_LAUNCH(mgt_layernorm_backward_partials_kernel<floatX>, slices * parts, MGT_LN_BLOCK, 0, stream, scratch, dout, inp, mean, rstd, N, C,
               rows_per_part);
    MGT_CHECK_LAUNCH();
    MGT_LAUNCH(mgt_layernorm_backward_params_kernel, (C + MGT_LN_BLOCK - 1) / MGT_LN_BLOCK, MGT_LN_BLOCK, 0, stream, dweight, dbias,
               scratch, parts, C);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

#define MGT_INSTANTIATE(floatX)                                                                                                   \
    template int mgt_cuda_layernorm_forward<floatX>(floatX *, float *, float *, const floatX *, const floatX *, const floatX *, int,  \
                                                    int, cudaStream_t);                                                        \
    template int mgt_cuda_layernorm_backward<floatX>(floatX *, float *, float *, float *, const floatX *, const floatX *,          \
                                                     const floatX *, const float *, const float *, int, int, cudaStream_t);
MGT_FOR_EACH_FLOATX(MGT_INSTANTIATE)
