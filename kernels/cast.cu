/* Casts between fp32 and the 16-bit storage types, elementwise on n values: fp32 -> bf16/fp16 rounds
   to nearest even (overflow to fp16 gives inf, which the loss scaler detects), bf16/fp16 -> fp32 is
   exact. Instantiated for (bf16, fp32), (fp16, fp32), (fp32, bf16), (fp32, fp16), and (fp32, fp32), an
   exact copy (a backend templated on the storage type casts fp32 into it, fp32 included).
   Memory-bound: 16-byte packets when the pointers allow (common.cuh), the rest element by element.
   copy_cols is the same conversion on a strided 2-D block (context parallelism's key/value columns of
   qkv into a block of their own, and the gradients back): a warp per row, its lanes along the row
   (coalesced), rows in a grid-stride loop; element by element (no 16-byte packets yet: they would
   need every row start aligned, which the shapes of the presets allow but a general stride does not). */
#include "common.cuh" // defines: launch macros, floatX conversions, packets, MGT_REQUIRE, MGT_CHECK_LAUNCH

#define MGT_CAST_BLOCK 256

/* elements per packet: 16 bytes of the narrower type (the wider one moves in two 16-byte pieces) */
template <class D, class S> struct mgt_cast_pack { static constexpr int n = MGT_PACK_BYTES / (int)(sizeof(D) < sizeof(S) ? sizeof(D) : sizeof(S)); };

/* packets [0, packs), then elements [packs * E, n) */
template <class D, class S> __global__ void __launch_bounds__(MGT_CAST_BLOCK) mgt_cast_kernel(D *dst, const S *src, size_t n, size_t packs) {
    const int E = mgt_cast_pack<D, S>::n;
    size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t p = first; p < packs; p += stride) {
        mgt_vec<S, E> x = mgt_load128<S, E>(src + p * E);
        mgt_vec<D, E> y;
        for (int k = 0; k < E; k++) y.v[k] = mgt_from_f32<D>(mgt_to_f32(x.v[k]));
        mgt_store128<D, E>(dst + p * E, y);
    }
    for (size_t i = packs * E + first; i < n; i += stride) dst[i] = mgt_from_f32<D>(mgt_to_f32(src[i]));
}

template <class D, class S> int mgt_cuda_cast(D *dst, const S *src, size_t n, cudaStream_t stream) {
    MGT_REQUIRE(n == 0 || (dst && src));
    MGT_REQUIRE(n == 0 || (const void *)dst != (const void *)src); /* the sizes differ: never in place */
    if (n == 0) return MGT_KERNEL_OK;
    size_t packs = mgt_aligned16(dst) && mgt_aligned16(src) ? n / mgt_cast_pack<D, S>::n : 0;
    void (*cast_kernel)(D *, const S *, size_t, size_t) = mgt_cast_kernel<D, S>; /* a name with a comma cannot be a macro argument */
    MGT_LAUNCH(cast_kernel, mgt_grid_for(packs ? packs : n, MGT_CAST_BLOCK), MGT_CAST_BLOCK, 0, stream, dst, src, n, packs);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

#define MGT_COPY_ROWS (MGT_CAST_BLOCK / MGT_WARP) /* rows a block copies at a time: a warp each */
template <class D, class S>
__global__ void __launch_bounds__(MGT_CAST_BLOCK) mgt_copy_cols_kernel(D *dst, int dst_stride, const S *src, int src_stride, size_t rows, int cols) {
    int lane = (int)threadIdx.x % MGT_WARP;
    size_t first = (size_t)blockIdx.x * MGT_COPY_ROWS + threadIdx.x / MGT_WARP, stride = (size_t)gridDim.x * MGT_COPY_ROWS;
    for (size_t r = first; r < rows; r += stride) {
        D *d = dst + r * (size_t)dst_stride;
        const S *s = src + r * (size_t)src_stride;
        for (int j = lane; j < cols; j += MGT_WARP) d[j] = mgt_from_f32<D>(mgt_to_f32(s[j]));
    }
}

template <class D, class S> int mgt_cuda_copy_cols(D *dst, int dst_stride, const S *src, int src_stride, size_t rows, int cols, cudaStream_t stream) {
    MGT_REQUIRE(cols >= 0 && dst_stride >= cols && src_stride >= cols);
    MGT_REQUIRE(rows == 0 || cols == 0 || (dst && src));
    MGT_REQUIRE(rows == 0 || cols == 0 || (const void *)dst != (const void *)src); /* never in place */
    if (rows == 0 || cols == 0) return MGT_KERNEL_OK;
    void (*copy_cols_kernel)(D *, int, const S *, int, size_t, int) = mgt_copy_cols_kernel<D, S>;
    MGT_LAUNCH(copy_cols_kernel, mgt_grid_for(rows, MGT_COPY_ROWS), MGT_CAST_BLOCK, 0, stream, dst, dst_stride, src, src_stride, rows, cols);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

/* every kernel mgt_cuda_cast and mgt_cuda_copy_cols can launch to and from floatX (launchers.h: loaded
   when the run is made) */
template <class floatX> void mgt_cuda_cast_kernels(mgt_kernel_list &l) {
    mgt_kernel_list_add(l, mgt_cast_kernel<floatX, float>);
    mgt_kernel_list_add(l, mgt_cast_kernel<float, floatX>);
    mgt_kernel_list_add(l, mgt_copy_cols_kernel<floatX, floatX>);
    mgt_kernel_list_add(l, mgt_copy_cols_kernel<floatX, float>);
    mgt_kernel_list_add(l, mgt_copy_cols_kernel<float, floatX>);
}

template int mgt_cuda_cast<__nv_bfloat16, float>(__nv_bfloat16 *, const float *, size_t, cudaStream_t);
template int mgt_cuda_cast<__half, float>(__half *, const float *, size_t, cudaStream_t);
template int mgt_cuda_cast<float, __nv_bfloat16>(float *, const __nv_bfloat16 *, size_t, cudaStream_t);
template int mgt_cuda_cast<float, __half>(float *, const __half *, size_t, cudaStream_t);
template int mgt_cuda_cast<float, float>(float *, const float *, size_t, cudaStream_t);
template int mgt_cuda_copy_cols<__nv_bfloat16, float>(__nv_bfloat16 *, int, const float *, int, size_t, int, cudaStream_t);
template int mgt_cuda_copy_cols<__half, float>(__half *, int, const float *, int, size_t, int, cudaStream_t);
template int mgt_cuda_copy_cols<float, __nv_bfloat16>(float *, int, const __nv_bfloat16 *, int, size_t, int, cudaStream_t);
template int mgt_cuda_copy_cols<float, __half>(float *, int, const __half *, int, size_t, int, cudaStream_t);
#define MGT_INSTANTIATE(floatX)                                                                                                   \
    template void mgt_cuda_cast_kernels<floatX>(mgt_kernel_list &);                                                               \
    template int mgt_cuda_copy_cols<floatX, floatX>(floatX *, int, const floatX *, int, size_t, int, cudaStream_t); /* a copy */
MGT_FOR_EACH_FLOATX(MGT_INSTANTIATE)
