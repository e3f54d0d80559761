/* GELU, tanh approximation (GPT-2), elementwise on n values:
     forward   out = 0.5 x (1 + tanh(s (x + 0.044715 x^3))),  s = sqrt(2/pi)
     backward  dinp = (0.5 (1 + th) + 0.5 x (1 - th^2) s (1 + 3 * 0.044715 x^2)) * dout
   as mgt.h's mgt__gelu_fwd_task / mgt__gelu_bwd_task (dinp is written, not accumulated). Math in fp32.
   Memory-bound: 16-byte packets when the pointers allow (common.cuh), the rest element by element. */
#include "common.cuh" // defines: launch macros, floatX conversions, packets, MGT_REQUIRE, MGT_CHECK_LAUNCH

#define MGT_GELU_S 0.7978845608028654f /* sqrt(2/pi) */
#define MGT_GELU_BLOCK 256

__device__ __forceinline__ float mgt_gelu(float x) { return 0.5f * x * (1.0f + tanhf(MGT_GELU_S * (x + 0.044715f * x * x * x))); }
__device__ __forceinline__ float mgt_gelu_grad(float x) {
    float th = tanhf(MGT_GELU_S * (x + 0.044715f * x * x * x));
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * MGT_GELU_S * (1.0f + 3.0f * 0.044715f * x * x);
}

/* packets [0, packs), then elements [packs * E, n) */
template <class floatX>
__global__ void __launch_bounds__(MGT_GELU_BLOCK) mgt_gelu_forward_kernel(floatX *out, const floatX *inp, size_t n, size_t packs) {
    const int E = mgt_pack_of<floatX>::n;
    size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t p = first; p < packs; p += stride) {
        mgt_vec<floatX, E> x = mgt_load128<floatX, E>(inp + p * E), o;
        for (int k = 0; k < E; k++) o.v[k] = mgt_from_f32<floatX>(mgt_gelu(mgt_to_f32(x.v[k])));
        mgt_store128<floatX, E>(out + p * E, o);
    }
    for (size_t i = packs * E + first; i < n; i += stride) out[i] = mgt_from_f32<floatX>(mgt_gelu(mgt_to_f32(inp[i])));
}

template <class floatX>
__global__ void __launch_bounds__(MGT_GELU_BLOCK)
mgt_gelu_backward_kernel(floatX *dinp, const floatX *inp, const floatX *dout, size_t n, size_t packs) {
    const int E = mgt_pack_of<floatX>::n;
    size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t p = first; p < packs; p += stride) {
        mgt_vec<floatX, E> x = mgt_load128<floatX, E>(inp + p * E), d = mgt_load128<floatX, E>(dout + p * E), o;
        for (int k = 0; k < E; k++) o.v[k] = mgt_from_f32<floatX>(mgt_gelu_grad(mgt_to_f32(x.v[k])) * mgt_to_f32(d.v[k]));
        mgt_store128<floatX, E>(dinp + p * E, o);
    }
    for (size_t i = packs * E + first; i < n; i += stride) dinp[i] = mgt_from_f32<floatX>(mgt_gelu_grad(mgt_to_f32(inp[i])) * mgt_to_f32(dout[i]));
}

template <class floatX> int mgt_cuda_gelu_forward(floatX *out, const floatX *inp, size_t n, cudaStream_t stream) {
    MGT_REQUIRE(n == 0 || (out && inp));
    if (n == 0) return MGT_KERNEL_OK;
    size_t packs = mgt_aligned16(out) && mgt_aligned16(inp) ? n / mgt_pack_of<floatX>::n : 0;
    MGT_LAUNCH(mgt_gelu_forward_kernel<floatX>, mgt_grid_for(packs ? packs : n, MGT_GELU_BLOCK), MGT_GELU_BLOCK, 0, stream, out, inp, n, packs);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

template <class floatX> int mgt_cuda_gelu_backward(floatX *dinp, const floatX *inp, const floatX *dout, size_t n, cudaStream_t stream) {
    MGT_REQUIRE(n == 0 || (dinp && inp && dout));
    if (n == 0) return MGT_KERNEL_OK;
    size_t packs = mgt_aligned16(dinp) && mgt_aligned16(inp) && mgt_aligned16(dout) ? n / mgt_pack_of<floatX>::n : 0;
    MGT_LAUNCH(mgt_gelu_backward_kernel<floatX>, mgt_grid_for(packs ? packs : n, MGT_GELU_BLOCK), MGT_GELU_BLOCK, 0, stream, dinp, inp, dout, n,
               packs);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

/* every kernel the launchers above can launch for floatX (launchers.h: loaded when the run is made) */
template <class floatX> void mgt_cuda_gelu_kernels(mgt_kernel_list &l) {
    mgt_kernel_list_add(l, mgt_gelu_forward_kernel<floatX>);
    mgt_kernel_list_add(l, mgt_gelu_backward_kernel<floatX>);
}

#define MGT_INSTANTIATE(floatX)                                                                                     \
    template int mgt_cuda_gelu_forward<floatX>(floatX *, const floatX *, size_t, cudaStream_t);                     \
    template int mgt_cuda_gelu_backward<floatX>(floatX *, const floatX *, const floatX *, size_t, cudaStream_t); \
    template void mgt_cuda_gelu_kernels<floatX>(mgt_kernel_list &);
MGT_FOR_EACH_FLOATX(MGT_INSTANTIATE)
