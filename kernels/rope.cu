/* Rotary positions (Llama), in place on the query and key heads of qkv (B,T,(NH + 2 NKV) hs), as
   mgt.h's mgt__rope_task: the pair of channels (i, i + hs/2) of a head at position t (pos0 + its row
   in the sequence: context parallelism gives a rank chunks that start later) turns by
     angle = t * (1 / theta^(2i/hs))        (fp32, as Hugging Face computes its cos/sin tables)
     forward   x_i' = x_i cos - x_{i+hs/2} sin,   x_{i+hs/2}' = x_{i+hs/2} cos + x_i sin
     backward  the same with -angle (a rotation's inverse), on dqkv
   The value heads are left alone. A block per row, a thread per (pair, head), the angle's cos and sin
   computed per thread (no tables: nothing to reserve). The angle is fp32, as the CPU's and Hugging
   Face's; its cos and sin come from sincospi in double: cosf/sinf of large arguments take a slow
   path with local memory (Payne-Hanek), while reducing angle / pi is exact. Math in fp32 otherwise. */
#include "common.cuh" // defines: launch macros, floatX conversions, MGT_REQUIRE, MGT_CHECK_LAUNCH

#define MGT_ROPE_BLOCK 256

#ifndef __CUDACC__ /* the SIMT shim on the host, whose libm has no sincospi */
static inline void sincospi(double x, double *s, double *c) {
    *s = sin(M_PI * x);
    *c = cos(M_PI * x);
}
#endif

/* a block per row (grid-stride over the B*T rows), its threads over (pair, head): 32-bit divisions only */
template <class floatX>
__global__ void __launch_bounds__(MGT_ROPE_BLOCK) mgt_rope_kernel(floatX *qkv, int rows, int T, int NH, int NKV, int hs, float theta, float sign, int pos0) {
    int half = hs / 2, heads = NH + NKV, W = (NH + 2 * NKV) * hs;
    for (int row = (int)blockIdx.x; row < rows; row += (int)gridDim.x)
        for (int j = (int)threadIdx.x; j < half * heads; j += (int)blockDim.x) {
            int i = j / heads, h = j - i * heads;
            float angle = (float)(pos0 + row % T) * (1.0f / powf(theta, (float)(2 * i) / (float)hs));
            double sd, cd;
            sincospi((double)angle * 0.318309886183790671538 /* 1/pi */, &sd, &cd);
            float c = (float)cd, s = sign * (float)sd;
            floatX *x = qkv + (size_t)row * (size_t)W + (size_t)h * (size_t)hs;
            float x0 = mgt_to_f32(x[i]), x1 = mgt_to_f32(x[half + i]);
            x[i] = mgt_from_f32<floatX>(x0 * c - x1 * s);
            x[half + i] = mgt_from_f32<floatX>(x1 * c + x0 * s);
        }
}

template <class floatX> static int mgt_rope(floatX *qkv, int B, int T, int NH, int NKV, int hs, float theta, float sign, int pos0, cudaStream_t stream) {
    MGT_REQUIRE(B > 0 && T > 0 && NH > 0 && NKV > 0 && hs > 0 && hs % 2 == 0 && theta > 0.0f && pos0 >= 0);
    MGT_REQUIRE(qkv);
    int rows = B * T;
    MGT_LAUNCH(mgt_rope_kernel<floatX>, rows < 65535 ? rows : 65535, MGT_ROPE_BLOCK, 0, stream, qkv, rows, T, NH, NKV, hs, theta, sign, pos0);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}
template <class floatX> int mgt_cuda_rope_forward(floatX *qkv, int B, int T, int NH, int NKV, int hs, float theta, int pos0, cudaStream_t stream) {
    return mgt_rope<floatX>(qkv, B, T, NH, NKV, hs, theta, 1.0f, pos0, stream);
}
template <class floatX> int mgt_cuda_rope_backward(floatX *dqkv, int B, int T, int NH, int NKV, int hs, float theta, int pos0, cudaStream_t stream) {
    return mgt_rope<floatX>(dqkv, B, T, NH, NKV, hs, theta, -1.0f, pos0, stream);
}

/* every kernel the launchers above can launch for floatX (launchers.h: loaded when the run is made) */
template <class floatX> void mgt_cuda_rope_kernels(mgt_kernel_list &l) {
    mgt_kernel_list_add(l, mgt_rope_kernel<floatX>);
}

#define MGT_INSTANTIATE(floatX)                                                                          \
    template int mgt_cuda_rope_forward<floatX>(floatX *, int, int, int, int, int, float, int, cudaStream_t);  \
    template int mgt_cuda_rope_backward<floatX>(floatX *, int, int, int, int, int, float, int, cudaStream_t); \
    template void mgt_cuda_rope_kernels<floatX>(mgt_kernel_list &);
MGT_FOR_EACH_FLOATX(MGT_INSTANTIATE)
