/* RMSNorm (Llama) over the last dimension of (N,C), as mgt.h's mgt__rms_fwd_task and the two passes
   of its backward:
     forward   rstd = 1/sqrt(sum(x^2)/C + eps), out = x * rstd * weight;  rstd (N) saved in fp32
     backward  g = weight * dout, xhat = x * rstd
               dinp    += rstd * (g - xhat * mean(g * xhat))     (one warp per row)
               dweight += sum over rows of dout * xhat           (fp32)
   dweight is deterministic without atomics, as LayerNorm's: a fixed number of row parts (from N
   alone), one block per (32-channel slice, part) summing its rows in a fixed order into an fp32
   partial in scratch, then the partials added in part order. No mean and no bias: the LayerNorm
   kernels are left as they are. */
#include "common.cuh" // defines: launch macros, floatX conversions, warp sums, MGT_REQUIRE, MGT_CHECK_LAUNCH

#define MGT_RMS_BLOCK 256 /* 8 warps: 8 rows per block in the row kernels */
#define MGT_RMS_WARPS (MGT_RMS_BLOCK / MGT_WARP)
#define MGT_RMS_PARTS 64  /* at most this many row parts for dweight */

static inline int mgt_rms_parts(int N) { return N < MGT_RMS_PARTS ? N : MGT_RMS_PARTS; }

/* one warp per row */
template <class floatX>
__global__ void __launch_bounds__(MGT_RMS_BLOCK)
mgt_rmsnorm_forward_kernel(floatX *out, float *rstd, const floatX *inp, const floatX *weight, float eps, int N, int C) {
    int lane = (int)threadIdx.x % MGT_WARP, row = (int)blockIdx.x * MGT_RMS_WARPS + (int)threadIdx.x / MGT_WARP;
    if (row >= N) return; /* whole warps leave together */
    const floatX *x = inp + (size_t)row * (size_t)C;
    floatX *o = out + (size_t)row * (size_t)C;
    float ss = 0.0f;
    for (int c = lane; c < C; c += MGT_WARP) {
        float v = mgt_to_f32(x[c]);
        ss += v * v;
    }
    float rs = 1.0f / sqrtf(mgt_warp_sum(ss) / (float)C + eps);
    for (int c = lane; c < C; c += MGT_WARP) o[c] = mgt_from_f32<floatX>(mgt_to_f32(x[c]) * rs * mgt_to_f32(weight[c]));
    if (lane == 0 && rstd) rstd[row] = rs;
}

/* one warp per row: dinp += rstd * (g - xhat * mean(g * xhat)) */
template <class floatX>
__global__ void __launch_bounds__(MGT_RMS_BLOCK)
mgt_rmsnorm_backward_rows_kernel(floatX *dinp, const floatX *dout, const floatX *inp, const floatX *weight, const float *rstd, int N, int C) {
    int lane = (int)threadIdx.x % MGT_WARP, row = (int)blockIdx.x * MGT_RMS_WARPS + (int)threadIdx.x / MGT_WARP;
    if (row >= N) return;
    const floatX *d = dout + (size_t)row * (size_t)C, *x = inp + (size_t)row * (size_t)C;
    floatX *di = dinp + (size_t)row * (size_t)C;
    float rs = rstd[row], sgx = 0.0f;
    for (int c = lane; c < C; c += MGT_WARP) sgx += mgt_to_f32(weight[c]) * mgt_to_f32(d[c]) * mgt_to_f32(x[c]) * rs;
    float mgx = mgt_warp_sum(sgx) / (float)C;
    for (int c = lane; c < C; c += MGT_WARP) {
        float g = mgt_to_f32(weight[c]) * mgt_to_f32(d[c]), xhat = mgt_to_f32(x[c]) * rs;
        di[c] = mgt_from_f32<floatX>(mgt_to_f32(di[c]) + rs * (g - xhat * mgx));
    }
}

/* block (slice, part): lane = channel of a 32-channel slice, warp w sums rows w, w + 8, .. of the
   part; the 8 warp sums are added in warp order. scratch (parts, C) */
template <class floatX>
__global__ void __launch_bounds__(MGT_RMS_BLOCK)
mgt_rmsnorm_backward_partials_kernel(float *scratch, const floatX *dout, const floatX *inp, const float *rstd, int N, int C, int rows_per_part) {
    MGT_SHARED(float, sdw, MGT_RMS_BLOCK);
    int slices = (C + MGT_WARP - 1) / MGT_WARP, slice = (int)blockIdx.x % slices, part = (int)blockIdx.x / slices;
    int lane = (int)threadIdx.x % MGT_WARP, warp = (int)threadIdx.x / MGT_WARP, c = slice * MGT_WARP + lane;
    int r0 = part * rows_per_part, r1 = r0 + rows_per_part < N ? r0 + rows_per_part : N;
    float dw = 0.0f;
    if (c < C)
        for (int r = r0 + warp; r < r1; r += MGT_RMS_WARPS)
            dw += mgt_to_f32(dout[(size_t)r * (size_t)C + c]) * mgt_to_f32(inp[(size_t)r * (size_t)C + c]) * rstd[r];
    sdw[threadIdx.x] = dw;
    __syncthreads();
    if (warp == 0 && c < C) {
        for (int w = 1; w < MGT_RMS_WARPS; w++) dw += sdw[w * MGT_WARP + lane];
        scratch[(size_t)part * (size_t)C + c] = dw;
    }
}

/* one thread per channel: dweight[c] += the partials in part order */
static __global__ void __launch_bounds__(MGT_RMS_BLOCK) mgt_rmsnorm_backward_params_kernel(float *dweight, const float *scratch, int parts, int C) {
    int c = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (c >= C) return;
    float dw = 0.0f;
    for (int p = 0; p < parts; p++) dw += scratch[(size_t)p * (size_t)C + c];
    dweight[c] += dw;
}

template <class floatX>
int mgt_cuda_rmsnorm_forward(floatX *out, float *rstd, const floatX *inp, const floatX *weight, float eps, int N, int C, cudaStream_t stream) {
    MGT_REQUIRE(N > 0 && C > 0 && eps > 0.0f);
    MGT_REQUIRE(out && inp && weight);
    MGT_REQUIRE(out != inp);
    MGT_LAUNCH(mgt_rmsnorm_forward_kernel<floatX>, (N + MGT_RMS_WARPS - 1) / MGT_RMS_WARPS, MGT_RMS_BLOCK, 0, stream, out, rstd, inp, weight, eps,
               N, C);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

size_t mgt_cuda_rmsnorm_backward_scratch(int N, int C) { return N > 0 && C > 0 ? (size_t)mgt_rms_parts(N) * (size_t)C * sizeof(float) : 0; }

template <class floatX>
int mgt_cuda_rmsnorm_backward(floatX *dinp, float *dweight, float *scratch, const floatX *dout, const floatX *inp, const floatX *weight,
                              const float *rstd, int N, int C, cudaStream_t stream) {
    MGT_REQUIRE(N > 0 && C > 0);
    MGT_REQUIRE(dinp && dweight && scratch && dout && inp && weight && rstd);
    MGT_REQUIRE(dinp != dout && dinp != inp && scratch != dweight);
    int parts = mgt_rms_parts(N), rows_per_part = (N + parts - 1) / parts, slices = (C + MGT_WARP - 1) / MGT_WARP;
    parts = (N + rows_per_part - 1) / rows_per_part; /* no empty part */
    MGT_LAUNCH(mgt_rmsnorm_backward_rows_kernel<floatX>, (N + MGT_RMS_WARPS - 1) / MGT_RMS_WARPS, MGT_RMS_BLOCK, 0, stream, dinp, dout, inp, weight,
               rstd, N, C);
    MGT_CHECK_LAUNCH();
    MGT_LAUNCH(mgt_rmsnorm_backward_partials_kernel<floatX>, slices * parts, MGT_RMS_BLOCK, 0, stream, scratch, dout, inp, rstd, N, C, rows_per_part);
    MGT_CHECK_LAUNCH();
    MGT_LAUNCH(mgt_rmsnorm_backward_params_kernel, (C + MGT_RMS_BLOCK - 1) / MGT_RMS_BLOCK, MGT_RMS_BLOCK, 0, stream, dweight, scratch, parts, C);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

/* every kernel the launchers above can launch for floatX (launchers.h: loaded when the run is made) */
template <class floatX> void mgt_cuda_rmsnorm_kernels(mgt_kernel_list &l) {
    mgt_kernel_list_add(l, mgt_rmsnorm_forward_kernel<floatX>);
    mgt_kernel_list_add(l, mgt_rmsnorm_backward_rows_kernel<floatX>);
    mgt_kernel_list_add(l, mgt_rmsnorm_backward_partials_kernel<floatX>);
    mgt_kernel_list_add(l, mgt_rmsnorm_backward_params_kernel);
}

#define MGT_INSTANTIATE(floatX)                                                                                                      \
    template int mgt_cuda_rmsnorm_forward<floatX>(floatX *, float *, const floatX *, const floatX *, float, int, int, cudaStream_t); \
    template int mgt_cuda_rmsnorm_backward<floatX>(floatX *, float *, float *, const floatX *, const floatX *, const floatX *,       \
                                                   const float *, int, int, cudaStream_t); \
    template void mgt_cuda_rmsnorm_kernels<floatX>(mgt_kernel_list &);
MGT_FOR_EACH_FLOATX(MGT_INSTANTIATE)
