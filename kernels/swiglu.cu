/* SwiGLU (Llama) on the gate and up projections side by side, inp (N,2H) = [gate | up], as mgt.h's
   mgt__swiglu_fwd_task / mgt__swiglu_bwd_task:
     forward   out (N,H) = silu(g) * u,  silu(g) = g * sigmoid(g)
     backward  dg = dout * u * sig * (1 + g (1 - sig)),  du = dout * silu(g)   (dinp (N,2H) written)
   One thread per output element. Math in fp32; expf, not __expf, for the fp32 reference's digits. */
#include "common.cuh" // defines: launch macros, floatX conversions, MGT_REQUIRE, MGT_CHECK_LAUNCH

#define MGT_SWIGLU_BLOCK 256

template <class floatX>
__global__ void __launch_bounds__(MGT_SWIGLU_BLOCK) mgt_swiglu_forward_kernel(floatX *out, const floatX *inp, int H, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / (size_t)H, c = i % (size_t)H;
        float g = mgt_to_f32(inp[r * 2 * (size_t)H + c]), u = mgt_to_f32(inp[r * 2 * (size_t)H + (size_t)H + c]);
        out[i] = mgt_from_f32<floatX>(g / (1.0f + expf(-g)) * u);
    }
}

template <class floatX>
__global__ void __launch_bounds__(MGT_SWIGLU_BLOCK)
mgt_swiglu_backward_kernel(floatX *dinp, const floatX *inp, const floatX *dout, int H, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / (size_t)H, c = i % (size_t)H, gi = r * 2 * (size_t)H + c, ui = gi + (size_t)H;
        float g = mgt_to_f32(inp[gi]), u = mgt_to_f32(inp[ui]), d = mgt_to_f32(dout[i]), sig = 1.0f / (1.0f + expf(-g));
        dinp[ui] = mgt_from_f32<floatX>(d * g * sig);
        dinp[gi] = mgt_from_f32<floatX>(d * u * sig * (1.0f + g * (1.0f - sig)));
    }
}

template <class floatX> int mgt_cuda_swiglu_forward(floatX *out, const floatX *inp, int N, int H, cudaStream_t stream) {
    MGT_REQUIRE(N > 0 && H > 0);
    MGT_REQUIRE(out && inp && out != inp);
    size_t n = (size_t)N * (size_t)H;
    MGT_LAUNCH(mgt_swiglu_forward_kernel<floatX>, mgt_grid_for(n, MGT_SWIGLU_BLOCK), MGT_SWIGLU_BLOCK, 0, stream, out, inp, H, n);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

template <class floatX> int mgt_cuda_swiglu_backward(floatX *dinp, const floatX *inp, const floatX *dout, int N, int H, cudaStream_t stream) {
    MGT_REQUIRE(N > 0 && H > 0);
    MGT_REQUIRE(dinp && inp && dout && dinp != inp && dinp != dout);
    size_t n = (size_t)N * (size_t)H;
    MGT_LAUNCH(mgt_swiglu_backward_kernel<floatX>, mgt_grid_for(n, MGT_SWIGLU_BLOCK), MGT_SWIGLU_BLOCK, 0, stream, dinp, inp, dout, H, n);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

#define MGT_INSTANTIATE(floatX)                                                                                      \
    template int mgt_cuda_swiglu_forward<floatX>(floatX *, const floatX *, int, int, cudaStream_t);                  \
    template int mgt_cuda_swiglu_backward<floatX>(floatX *, const floatX *, const floatX *, int, int, cudaStream_t);
MGT_FOR_EACH_FLOATX(MGT_INSTANTIATE)
