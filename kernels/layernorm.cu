/* LayerNorm over the last dimension of (N,C), eps 1e-5, as mgt.h's mgt__ln_fwd_task and the two
   passes of its backward:
     forward   mean = sum(x)/C, var = sum((x - mean)^2)/C (two passes), rstd = 1/sqrt(var + 1e-5)
               out = (x - mean) * rstd * weight + bias;  mean, rstd (N) saved in fp32 when given
     residual_layernorm_forward: x += residual + res_bias first (mgt.h's bias_residual), in the same
               kernel: the sum is stored and normalised without being read back from DRAM
     backward  g = weight * dout, xhat = (x - mean) * rstd
               dinp    += rstd * (g - mean(g) - xhat * mean(g * xhat))     (one warp per row)
               dweight += sum over rows of dout * xhat,  dbias += sum over rows of dout   (fp32)
   The backward is one kernel, and its parameter gradients are deterministic without floating-point
   atomics: the rows are cut into a fixed number of parts (from N alone, MGT_LN_PARTS), one block per
   part writes dinp for its rows and sums their dweight and dbias terms in a fixed order into an fp32
   partial in scratch, and the block that finishes last (an integer ticket) adds the partials in part
   order. dweight and dbias are fp32 whatever the storage type (mgt.h's main_grad); dinp is in it.
   Memory-bound: rows in 16-byte packets when C is a multiple of the packet and the pointers are
   aligned (common.cuh), channel by channel otherwise; a warp reads its row from DRAM once per kernel
   and again from L1, the partial sums read the part's rows again from L2. */
#include "common.cuh" // defines: launch macros, floatX conversions, packets, warp/block sums, MGT_REQUIRE, MGT_CHECK_LAUNCH

#define MGT_LN_BLOCK 256                        /* forward: 8 warps, a row each */
#define MGT_LN_WARPS (MGT_LN_BLOCK / MGT_WARP)
#define MGT_LN_BWD_BLOCK 512                    /* backward: 16 warps over the rows of a part */
#define MGT_LN_BWD_WARPS (MGT_LN_BWD_BLOCK / MGT_WARP)
#define MGT_LN_PARTS 128                        /* at most this many row parts (blocks of the backward) */

static inline int mgt_ln_parts(int N) { return N < MGT_LN_PARTS ? N : MGT_LN_PARTS; }

/* one warp per row; lane handles E consecutive channels at c = lane E, lane E + 32 E, .. (E > 1: 16-byte
   packets, C % E == 0 and aligned rows; E = 1: channel by channel). RESIDUAL: the row of inp is first
   made inp += residual + res_bias (rounded to floatX, stored, and normalised as stored): the residual
   stream's addition fused into the LayerNorm that reads it */
template <class floatX, int E, bool RESIDUAL>
__global__ void __launch_bounds__(MGT_LN_BLOCK)
mgt_layernorm_forward_kernel(floatX *out, float *mean, float *rstd, floatX *inp, const floatX *residual, const floatX *res_bias, const floatX *weight,
                             const floatX *bias, int N, int C) {
    int lane = (int)threadIdx.x % MGT_WARP, row = (int)blockIdx.x * MGT_LN_WARPS + (int)threadIdx.x / MGT_WARP;
    if (row >= N) return; /* whole warps leave together */
    floatX *x = inp + (size_t)row * (size_t)C;
    floatX *o = out + (size_t)row * (size_t)C;
    float s = 0.0f;
    for (int c = lane * E; c < C; c += MGT_WARP * E) {
        mgt_vec<floatX, E> a = mgt_load_n<floatX, E>(x + c);
        if constexpr (RESIDUAL) {
            mgt_vec<floatX, E> r = mgt_load_n<floatX, E>(residual + (size_t)row * (size_t)C + c), b = mgt_load_n<floatX, E>(res_bias + c);
            for (int k = 0; k < E; k++) a.v[k] = mgt_from_f32<floatX>(mgt_to_f32(a.v[k]) + (mgt_to_f32(r.v[k]) + mgt_to_f32(b.v[k])));
            mgt_store_n<floatX, E>(x + c, a);
        }
        for (int k = 0; k < E; k++) s += mgt_to_f32(a.v[k]);
    }
    float m = mgt_warp_sum(s) / (float)C;
    float v = 0.0f;
    for (int c = lane * E; c < C; c += MGT_WARP * E) { /* the row again (this thread's own values): DRAM reads it once */
        mgt_vec<floatX, E> a = mgt_load_n<floatX, E>(x + c);
        for (int k = 0; k < E; k++) {
            float d = mgt_to_f32(a.v[k]) - m;
            v += d * d;
        }
    }
    float rs = 1.0f / sqrtf(mgt_warp_sum(v) / (float)C + 1e-5f);
    for (int c = lane * E; c < C; c += MGT_WARP * E) {
        mgt_vec<floatX, E> a = mgt_load_n<floatX, E>(x + c), w = mgt_load_n<floatX, E>(weight + c), b = mgt_load_n<floatX, E>(bias + c), y;
        for (int k = 0; k < E; k++) y.v[k] = mgt_from_f32<floatX>((mgt_to_f32(a.v[k]) - m) * rs * mgt_to_f32(w.v[k]) + mgt_to_f32(b.v[k]));
        mgt_store_n<floatX, E>(o + c, y);
    }
    if (lane == 0) {
        if (mean) mean[row] = m;
        if (rstd) rstd[row] = rs;
    }
}

/* block `part` of the backward (MGT_LN_BWD_BLOCK threads): rows [part rows_per_part, ..) of (N,C); lane
   handles E channels as in the forward.
     1. dinp, a warp per row: the row's two means, then dinp += rstd (g - mean(g) - xhat mean(g xhat))
     2. this part's dweight and dbias: for each (32 E)-channel slice, warp w sums its rows w, w + 16, ..
        of the part, the warps' sums are added in warp order, and written to scratch (parts, 2, C)
     3. the last block to finish (a ticket, left at 0 again) adds the parts into dweight and dbias in part
        order: a fixed order whatever the timing */
template <class floatX, int E>
__global__ void __launch_bounds__(MGT_LN_BWD_BLOCK)
mgt_layernorm_backward_kernel(floatX *dinp, float *dweight, float *dbias, float *scratch, unsigned *ticket, const floatX *dout, const floatX *inp,
                              const floatX *weight, const float *mean, const float *rstd, int N, int C, int rows_per_part, int parts) {
    MGT_SHARED(float, sdw, MGT_LN_BWD_BLOCK * E);
    MGT_SHARED(float, sdb, MGT_LN_BWD_BLOCK * E);
    MGT_SHARED(int, last, 1);
    int lane = (int)threadIdx.x % MGT_WARP, warp = (int)threadIdx.x / MGT_WARP, part = (int)blockIdx.x;
    int r0 = part * rows_per_part, r1 = r0 + rows_per_part < N ? r0 + rows_per_part : N;
    for (int r = r0 + warp; r < r1; r += MGT_LN_BWD_WARPS) {
        const floatX *d = dout + (size_t)r * (size_t)C, *x = inp + (size_t)r * (size_t)C;
        floatX *di = dinp + (size_t)r * (size_t)C;
        float m = mean[r], rs = rstd[r], sg = 0.0f, sgx = 0.0f;
        for (int c = lane * E; c < C; c += MGT_WARP * E) {
            mgt_vec<floatX, E> dv = mgt_load_n<floatX, E>(d + c), xv = mgt_load_n<floatX, E>(x + c), wv = mgt_load_n<floatX, E>(weight + c);
            for (int k = 0; k < E; k++) {
                float g = mgt_to_f32(wv.v[k]) * mgt_to_f32(dv.v[k]);
                sg += g;
                sgx += g * (mgt_to_f32(xv.v[k]) - m) * rs;
            }
        }
        float mg = mgt_warp_sum(sg) / (float)C, mgx = mgt_warp_sum(sgx) / (float)C;
        for (int c = lane * E; c < C; c += MGT_WARP * E) { /* the row again: from L1 */
            mgt_vec<floatX, E> dv = mgt_load_n<floatX, E>(d + c), xv = mgt_load_n<floatX, E>(x + c), wv = mgt_load_n<floatX, E>(weight + c),
                               iv = mgt_load_n<floatX, E>(di + c);
            for (int k = 0; k < E; k++) {
                float g = mgt_to_f32(wv.v[k]) * mgt_to_f32(dv.v[k]), xhat = (mgt_to_f32(xv.v[k]) - m) * rs;
                iv.v[k] = mgt_from_f32<floatX>(mgt_to_f32(iv.v[k]) + rs * (g - mg - xhat * mgx));
            }
            mgt_store_n<floatX, E>(di + c, iv);
        }
    }
    for (int c0 = 0; c0 < C; c0 += MGT_WARP * E) { /* the part's rows again, from L2: by channel now */
        int c = c0 + lane * E;
        float dw[E], db[E];
        for (int k = 0; k < E; k++) dw[k] = db[k] = 0.0f;
        if (c < C)
            for (int r = r0 + warp; r < r1; r += MGT_LN_BWD_WARPS) {
                mgt_vec<floatX, E> dv = mgt_load_n<floatX, E>(dout + (size_t)r * (size_t)C + c), xv = mgt_load_n<floatX, E>(inp + (size_t)r * (size_t)C + c);
                float m = mean[r], rs = rstd[r];
                for (int k = 0; k < E; k++) {
                    float dk = mgt_to_f32(dv.v[k]);
                    dw[k] += dk * (mgt_to_f32(xv.v[k]) - m) * rs;
                    db[k] += dk;
                }
            }
        __syncthreads(); /* the previous slice's sums are read */
        for (int k = 0; k < E; k++) {
            sdw[k * MGT_LN_BWD_BLOCK + threadIdx.x] = dw[k];
            sdb[k * MGT_LN_BWD_BLOCK + threadIdx.x] = db[k];
        }
        __syncthreads();
        if (warp == 0 && c < C)
            for (int k = 0; k < E; k++) {
                for (int w = 1; w < MGT_LN_BWD_WARPS; w++) {
                    dw[k] += sdw[k * MGT_LN_BWD_BLOCK + w * MGT_WARP + lane];
                    db[k] += sdb[k * MGT_LN_BWD_BLOCK + w * MGT_WARP + lane];
                }
                scratch[(size_t)part * 2 * (size_t)C + c + k] = dw[k];
                scratch[(size_t)part * 2 * (size_t)C + (size_t)C + c + k] = db[k];
            }
    }
    __threadfence(); /* this part's sums are visible to the block that takes the last ticket */
    __syncthreads();
    if (threadIdx.x == 0) last[0] = atomicAdd(ticket, 1u) == (unsigned)parts - 1;
    __syncthreads();
    if (!last[0]) return;
    __threadfence();
    const volatile float *parts_sums = scratch; /* written by other blocks: not through this SM's L1 */
    for (int c = (int)threadIdx.x; c < C; c += MGT_LN_BWD_BLOCK) {
        float dw = 0.0f, db = 0.0f;
        for (int p = 0; p < parts; p++) {
            dw += parts_sums[(size_t)p * 2 * (size_t)C + c];
            db += parts_sums[(size_t)p * 2 * (size_t)C + (size_t)C + c];
        }
        dweight[c] += dw;
        dbias[c] += db;
    }
    if (threadIdx.x == 0) *ticket = 0; /* for the next call */
}

/* the forward kernel for (out, inp) and, when residual, the fused addition into inp */
template <class floatX>
static int mgt_layernorm_forward_launch(floatX *out, float *mean, float *rstd, floatX *inp, const floatX *residual, const floatX *res_bias,
                                        const floatX *weight, const floatX *bias, int N, int C, cudaStream_t stream) {
    const int E = mgt_pack_of<floatX>::n;
    bool packed = C % E == 0 && mgt_aligned16(out) && mgt_aligned16(inp) && mgt_aligned16(residual) && mgt_aligned16(res_bias) &&
                  mgt_aligned16(weight) && mgt_aligned16(bias);
    /* the launch is named after the pointer (the fakes match kernel names, MGT_FAKE_KERNEL_FAULT) */
    void (*layernorm_forward_kernel)(floatX *, float *, float *, floatX *, const floatX *, const floatX *, const floatX *, const floatX *, int, int) =
        residual ? (packed ? mgt_layernorm_forward_kernel<floatX, E, true> : mgt_layernorm_forward_kernel<floatX, 1, true>)
                 : (packed ? mgt_layernorm_forward_kernel<floatX, E, false> : mgt_layernorm_forward_kernel<floatX, 1, false>);
    MGT_LAUNCH(layernorm_forward_kernel, (N + MGT_LN_WARPS - 1) / MGT_LN_WARPS, MGT_LN_BLOCK, 0, stream, out, mean, rstd, inp, residual, res_bias, weight, bias, N, C);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

template <class floatX>
int mgt_cuda_layernorm_forward(floatX *out, float *mean, float *rstd, const floatX *inp, const floatX *weight, const floatX *bias, int N,
                               int C, cudaStream_t stream) {
    MGT_REQUIRE(N > 0 && C > 0);
    MGT_REQUIRE(out && inp && weight && bias);
    MGT_REQUIRE(out != inp);
    return mgt_layernorm_forward_launch<floatX>(out, mean, rstd, (floatX *)inp, (const floatX *)nullptr, (const floatX *)nullptr, weight, bias, N, C,
                                                stream); /* inp is only read without a residual */
}

template <class floatX>
int mgt_cuda_residual_layernorm_forward(floatX *res, floatX *out, float *mean, float *rstd, const floatX *residual, const floatX *res_bias,
                                        const floatX *weight, const floatX *bias, int N, int C, cudaStream_t stream) {
    MGT_REQUIRE(N > 0 && C > 0);
    MGT_REQUIRE(res && out && residual && res_bias && weight && bias);
    MGT_REQUIRE(out != res && out != residual && res != res_bias);
    return mgt_layernorm_forward_launch<floatX>(out, mean, rstd, res, residual, res_bias, weight, bias, N, C, stream);
}

size_t mgt_cuda_layernorm_backward_scratch(int N, int C) {
    return N > 0 && C > 0 ? (size_t)mgt_ln_parts(N) * 2 * (size_t)C * sizeof(float) : 0;
}

template <class floatX>
int mgt_cuda_layernorm_backward(floatX *dinp, float *dweight, float *dbias, float *scratch, unsigned *ticket, const floatX *dout, const floatX *inp,
                                const floatX *weight, const float *mean, const float *rstd, int N, int C, cudaStream_t stream) {
    MGT_REQUIRE(N > 0 && C > 0);
    MGT_REQUIRE(dinp && dweight && dbias && scratch && ticket && dout && inp && weight && mean && rstd);
    MGT_REQUIRE(dinp != dout && dinp != inp && dweight != dbias && scratch != dweight && scratch != dbias);
    const int E = mgt_pack_of<floatX>::n;
    bool packed = C % E == 0 && mgt_aligned16(dinp) && mgt_aligned16(dout) && mgt_aligned16(inp) && mgt_aligned16(weight);
    int parts = mgt_ln_parts(N), rows_per_part = (N + parts - 1) / parts;
    parts = (N + rows_per_part - 1) / rows_per_part; /* no empty part */
    void (*layernorm_backward_kernel)(floatX *, float *, float *, float *, unsigned *, const floatX *, const floatX *, const floatX *, const float *,
                                      const float *, int, int, int, int) =
        packed ? mgt_layernorm_backward_kernel<floatX, E> : mgt_layernorm_backward_kernel<floatX, 1>;
    MGT_LAUNCH(layernorm_backward_kernel, parts, MGT_LN_BWD_BLOCK, 0, stream, dinp, dweight, dbias, scratch, ticket, dout, inp, weight, mean, rstd, N, C, rows_per_part,
               parts);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

/* every kernel the launchers above can launch for floatX (launchers.h: loaded when the run is made) */
template <class floatX> void mgt_cuda_layernorm_kernels(mgt_kernel_list &l) {
    const int E = mgt_pack_of<floatX>::n;
    mgt_kernel_list_add(l, mgt_layernorm_forward_kernel<floatX, E, true>);
    mgt_kernel_list_add(l, mgt_layernorm_forward_kernel<floatX, 1, true>);
    mgt_kernel_list_add(l, mgt_layernorm_forward_kernel<floatX, E, false>);
    mgt_kernel_list_add(l, mgt_layernorm_forward_kernel<floatX, 1, false>);
    mgt_kernel_list_add(l, mgt_layernorm_backward_kernel<floatX, E>);
    mgt_kernel_list_add(l, mgt_layernorm_backward_kernel<floatX, 1>);
}

#define MGT_INSTANTIATE(floatX)                                                                                                   \
    template int mgt_cuda_layernorm_forward<floatX>(floatX *, float *, float *, const floatX *, const floatX *, const floatX *, int,  \
                                                    int, cudaStream_t);                                                        \
    template int mgt_cuda_residual_layernorm_forward<floatX>(floatX *, floatX *, float *, float *, const floatX *, const floatX *,  \
                                                             const floatX *, const floatX *, int, int, cudaStream_t);           \
    template int mgt_cuda_layernorm_backward<floatX>(floatX *, float *, float *, float *, unsigned *, const floatX *, const floatX *, \
                                                     const floatX *, const float *, const float *, int, int, cudaStream_t); \
    template void mgt_cuda_layernorm_kernels<floatX>(mgt_kernel_list &);
MGT_FOR_EACH_FLOATX(MGT_INSTANTIATE)
