/* Casts between fp32 and the 16-bit storage types, elementwise on n values: fp32 -> bf16/fp16 rounds
   to nearest even (overflow to fp16 gives inf, which the loss scaler detects), bf16/fp16 -> fp32 is
   exact. Instantiated for (bf16, fp32), (fp16, fp32), (fp32, bf16), (fp32, fp16), and (fp32, fp32), an
   exact copy (a backend templated on the storage type casts fp32 into it, fp32 included). */
#include "common.cuh" // defines: launch macros, floatX conversions, MGT_REQUIRE, MGT_CHECK_LAUNCH

#define MGT_CAST_BLOCK 256

template <class D, class S> __global__ void __launch_bounds__(MGT_CAST_BLOCK) mgt_cast_kernel(D *dst, const S *src, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = mgt_from_f32<D>(mgt_to_f32(src[i]));
}

template <class D, class S> int mgt_cuda_cast(D *dst, const S *src, size_t n, cudaStream_t stream) {
    MGT_REQUIRE(n == 0 || (dst && src));
    MGT_REQUIRE(n == 0 || (const void *)dst != (const void *)src); /* the sizes differ: never in place */
    if (n == 0) return MGT_KERNEL_OK;
    void (*kernel)(D *, const S *, size_t) = mgt_cast_kernel<D, S>; /* a name with a comma cannot be a macro argument */
    MGT_LAUNCH(kernel, mgt_grid_for(n, MGT_CAST_BLOCK), MGT_CAST_BLOCK, 0, stream, dst, src, n);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

template int mgt_cuda_cast<__nv_bfloat16, float>(__nv_bfloat16 *, const float *, size_t, cudaStream_t);
template int mgt_cuda_cast<__half, float>(__half *, const float *, size_t, cudaStream_t);
template int mgt_cuda_cast<float, __nv_bfloat16>(float *, const __nv_bfloat16 *, size_t, cudaStream_t);
template int mgt_cuda_cast<float, __half>(float *, const __half *, size_t, cudaStream_t);
template int mgt_cuda_cast<float, float>(float *, const float *, size_t, cudaStream_t);
