/* The fused causal softmax of attention. Attention itself runs as batched GEMMs on the host side
   (cuBLAS): scores = Q K^T per (batch, head), then this softmax, then out = P V; backward
   dP = dY V^T, this kernel, then dQ = dS K and dK = dS^T Q. Rows are the BNH*T rows of
   (B*NH, T, T); row t of each (b,h) matrix sees columns 0..t.
     forward   att[t][j] = exp(scale * s[t][j] - max) / sum over j <= t, 0 for j > t
     backward  dscores[t][j] = scale * P[t][j] * (dP[t][j] - sum over k <= t of P[t][k] * dP[t][k]),
               0 for j > t
   as mgt.h's mgt__attn_fwd_task / mgt__attn_bwd_task (which fold scale into the GEMMs: pass
   scale = 1 to do the same here). One warp per row, fp32 math; the output may overwrite the input
   (every lane reads its whole part of the row before the warp reduction, and writes after it). */
#include "common.cuh" // defines: launch macros, floatX conversions, warp sums, MGT_REQUIRE, MGT_CHECK_LAUNCH

#define MGT_SOFTMAX_BLOCK 256
#define MGT_SOFTMAX_WARPS (MGT_SOFTMAX_BLOCK / MGT_WARP)

template <class floatX>
__global__ void __launch_bounds__(MGT_SOFTMAX_BLOCK) mgt_softmax_forward_kernel(floatX *att, const floatX *scores, float scale, int rows, int T) {
    int lane = (int)threadIdx.x % MGT_WARP, row = (int)blockIdx.x * MGT_SOFTMAX_WARPS + (int)threadIdx.x / MGT_WARP;
    if (row >= rows) return; /* whole warps leave together */
    int t = row % T;
    const floatX *s = scores + (size_t)row * (size_t)T;
    floatX *p = att + (size_t)row * (size_t)T;
    /* online max and sum per lane, then combined across the warp */
    float m = -INFINITY, sum = 0.0f;
    for (int j = lane; j <= t; j += MGT_WARP) {
        float x = scale * mgt_to_f32(s[j]);
        if (x > m) {
            sum = sum * expf(m - x) + 1.0f;
            m = x;
        } else {
            sum += expf(x - m);
        }
    }
    float M = mgt_warp_max(m);
    sum = m == -INFINITY ? 0.0f : sum * expf(m - M); /* a lane with no column adds nothing */
    float inv = 1.0f / mgt_warp_sum(sum);
    for (int j = lane; j < T; j += MGT_WARP)
        p[j] = mgt_from_f32<floatX>(j <= t ? expf(scale * mgt_to_f32(s[j]) - M) * inv : 0.0f);
}

template <class floatX>
__global__ void __launch_bounds__(MGT_SOFTMAX_BLOCK)
mgt_softmax_backward_kernel(floatX *dscores, const floatX *datt, const floatX *att, float scale, int rows, int T) {
    int lane = (int)threadIdx.x % MGT_WARP, row = (int)blockIdx.x * MGT_SOFTMAX_WARPS + (int)threadIdx.x / MGT_WARP;
    if (row >= rows) return;
    int t = row % T;
    const floatX *p = att + (size_t)row * (size_t)T, *dp = datt + (size_t)row * (size_t)T;
    floatX *ds = dscores + (size_t)row * (size_t)T;
    float dot = 0.0f;
    for (int j = lane; j <= t; j += MGT_WARP) dot += mgt_to_f32(p[j]) * mgt_to_f32(dp[j]);
    dot = mgt_warp_sum(dot);
    for (int j = lane; j < T; j += MGT_WARP)
        ds[j] = mgt_from_f32<floatX>(j <= t ? scale * mgt_to_f32(p[j]) * (mgt_to_f32(dp[j]) - dot) : 0.0f);
}

template <class floatX> int mgt_cuda_softmax_forward(floatX *att, const floatX *scores, float scale, int BNH, int T, cudaStream_t stream) {
    MGT_REQUIRE(BNH > 0 && T > 0 && (long long)BNH * T <= 0x7fffffff);
    MGT_REQUIRE(att && scores);
    int rows = BNH * T;
    MGT_LAUNCH(mgt_softmax_forward_kernel<floatX>, (rows + MGT_SOFTMAX_WARPS - 1) / MGT_SOFTMAX_WARPS, MGT_SOFTMAX_BLOCK, 0, stream, att,
               scores, scale, rows, T);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

template <class floatX>
int mgt_cuda_softmax_backward(floatX *dscores, const floatX *datt, const floatX *att, float scale, int BNH, int T, cudaStream_t stream) {
    MGT_REQUIRE(BNH > 0 && T > 0 && (long long)BNH * T <= 0x7fffffff);
    MGT_REQUIRE(dscores && datt && att);
    MGT_REQUIRE(dscores != att);
    int rows = BNH * T;
    MGT_LAUNCH(mgt_softmax_backward_kernel<floatX>, (rows + MGT_SOFTMAX_WARPS - 1) / MGT_SOFTMAX_WARPS, MGT_SOFTMAX_BLOCK, 0, stream, dscores,
               datt, att, scale, rows, T);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

#define MGT_INSTANTIATE(floatX)                                                                                         \
    template int mgt_cuda_softmax_forward<floatX>(floatX *, const floatX *, float, int, int, cudaStream_t);             \
    template int mgt_cuda_softmax_backward<floatX>(floatX *, const floatX *, const floatX *, float, int, int, cudaStream_t);
MGT_FOR_EACH_FLOATX(MGT_INSTANTIATE)
