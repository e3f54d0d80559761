/* SwiGLU (Llama) on the gate and up projections side by side, inp (N,2H) = [gate | up], as mgt.h's
   mgt__swiglu_fwd_task / mgt__swiglu_bwd_task:
     forward   out (N,H) = silu(g) * u,  silu(g) = g * sigmoid(g)
     backward  dg = dout * u * sig * (1 + g (1 - sig)),  du = dout * silu(g)   (dinp (N,2H) written)
   A block per row, its threads over the units (32-bit indices, no division). Math in fp32; expf, not __expf, for the fp32 reference's digits. */
#include "common.cuh" // defines: launch macros, floatX conversions, MGT_REQUIRE, MGT_CHECK_LAUNCH

#define MGT_SWIGLU_BLOCK 256

/* a block per row (grid-stride over rows), its threads over the row's H units: no index division */
template <class floatX>
__global__ void __launch_bounds__(MGT_SWIGLU_BLOCK) mgt_swiglu_forward_kernel(floatX *out, const floatX *inp, int N, int H) {
    for (int r = (int)blockIdx.x; r < N; r += (int)gridDim.x) {
        const floatX *g = inp + (size_t)r * 2 * (size_t)H, *u = g + H;
        floatX *o = out + (size_t)r * (size_t)H;
        for (int c = (int)threadIdx.x; c < H; c += (int)blockDim.x) {
            float gv = mgt_to_f32(g[c]);
            o[c] = mgt_from_f32<floatX>(gv / (1.0f + expf(-gv)) * mgt_to_f32(u[c]));
        }
    }
}

template <class floatX>
__global__ void __launch_bounds__(MGT_SWIGLU_BLOCK) mgt_swiglu_backward_kernel(floatX *dinp, const floatX *inp, const floatX *dout, int N, int H) {
    for (int r = (int)blockIdx.x; r < N; r += (int)gridDim.x) {
        const floatX *g = inp + (size_t)r * 2 * (size_t)H, *u = g + H, *d = dout + (size_t)r * (size_t)H;
        floatX *dg = dinp + (size_t)r * 2 * (size_t)H, *du = dg + H;
        for (int c = (int)threadIdx.x; c < H; c += (int)blockDim.x) {
            float gv = mgt_to_f32(g[c]), uv = mgt_to_f32(u[c]), dv = mgt_to_f32(d[c]), sig = 1.0f / (1.0f + expf(-gv));
            du[c] = mgt_from_f32<floatX>(dv * gv * sig);
            dg[c] = mgt_from_f32<floatX>(dv * uv * sig * (1.0f + gv * (1.0f - sig)));
        }
    }
}

template <class floatX> int mgt_cuda_swiglu_forward(floatX *out, const floatX *inp, int N, int H, cudaStream_t stream) {
    MGT_REQUIRE(N > 0 && H > 0);
    MGT_REQUIRE(out && inp && out != inp);
    MGT_LAUNCH(mgt_swiglu_forward_kernel<floatX>, N < 65535 ? N : 65535, MGT_SWIGLU_BLOCK, 0, stream, out, inp, N, H);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

template <class floatX> int mgt_cuda_swiglu_backward(floatX *dinp, const floatX *inp, const floatX *dout, int N, int H, cudaStream_t stream) {
    MGT_REQUIRE(N > 0 && H > 0);
    MGT_REQUIRE(dinp && inp && dout && dinp != inp && dinp != dout);
    MGT_LAUNCH(mgt_swiglu_backward_kernel<floatX>, N < 65535 ? N : 65535, MGT_SWIGLU_BLOCK, 0, stream, dinp, inp, dout, N, H);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

/* every kernel the launchers above can launch for floatX (launchers.h: loaded when the run is made) */
template <class floatX> void mgt_cuda_swiglu_kernels(mgt_kernel_list &l) {
    mgt_kernel_list_add(l, mgt_swiglu_forward_kernel<floatX>);
    mgt_kernel_list_add(l, mgt_swiglu_backward_kernel<floatX>);
}

#define MGT_INSTANTIATE(floatX)                                                                                      \
    template int mgt_cuda_swiglu_forward<floatX>(floatX *, const floatX *, int, int, cudaStream_t);                  \
    template int mgt_cuda_swiglu_backward<floatX>(floatX *, const floatX *, const floatX *, int, int, cudaStream_t); \
    template void mgt_cuda_swiglu_kernels<floatX>(mgt_kernel_list &);
MGT_FOR_EACH_FLOATX(MGT_INSTANTIATE)
