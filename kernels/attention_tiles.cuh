/* kernels/attention_tiles.cuh: the tiles that flash attention on CUDA cores is built from, shared by
   kernels/attention.cu (causal attention over the whole sequence) and kernels/ring_attention.cu (one
   block of keys and values of context parallelism's ring): attention.cu's opening comment says how a
   block of 4 warps holds a tile of 32 rows, a lane a column of the other side, and why the fp32
   tiles have rows of stride hs|1. Device helpers and host launch helpers only: no kernels. */
#ifndef MGT_KERNELS_ATTENTION_TILES_CUH
#define MGT_KERNELS_ATTENTION_TILES_CUH

#include "common.cuh" // defines: launch macros, floatX conversions, MGT_WARP, mgt_kernel_fail

#define MGT_ATTN_TILE 32  /* query or key rows per tile: one per lane */
#define MGT_ATTN_BLOCK 128 /* 4 warps */
#define MGT_ATTN_ROWS (MGT_ATTN_TILE / (MGT_ATTN_BLOCK / MGT_WARP)) /* rows a warp owns: 8 */
#define MGT_ATTN_MAX_HS 128

/* loops over a warp's rows and a lane's columns unrolled, so their arrays stay in registers (the
   shim's compilers do not know the pragma) */
#ifdef __CUDACC__
#define MGT_UNROLL _Pragma("unroll")
#else
#define MGT_UNROLL
#endif

__device__ __forceinline__ int mgt_attn_stride(int hs) { return hs | 1; }

/* rows t0.. of one head's part (column offset `col`) of a (B, T, width) tensor into a fp32 tile; 0 past T */
template <class floatX>
__device__ __forceinline__ void mgt_attn_load(float *tile, const floatX *src, size_t width, int t0, int T, int hs) {
    int S = mgt_attn_stride(hs);
    for (int i = (int)threadIdx.x; i < MGT_ATTN_TILE * hs; i += MGT_ATTN_BLOCK) {
        int r = i / hs, d = i % hs, t = t0 + r;
        tile[r * S + d] = t < T ? mgt_to_f32(src[(size_t)t * width + (size_t)d]) : 0.0f;
    }
}

#define MGT_ATTN_PSTRIDE (MGT_ATTN_TILE + 1) /* a tile of probabilities: a lane's row and a row across lanes both conflict-free */

/* acc[r][c] += sum over j < jn, in order, of w[row0 + r][j] * tile[j][lane + 32c]: a warp's rows of
   weights (a (32, 33) tile of probabilities or dS in shared memory) times the rows of a fp32 tile */
template <int NC>
__device__ __forceinline__ void mgt_attn_accumulate(float (&acc)[MGT_ATTN_ROWS][NC], const float *w, int row0, const float *tile, int jn, int hs) {
    int S = mgt_attn_stride(hs), lane = (int)threadIdx.x % MGT_WARP;
    for (int j = 0; j < jn; j++) {
        float x[NC];
MGT_UNROLL
        for (int c = 0; c < NC; c++) x[c] = lane + 32 * c < hs ? tile[j * S + lane + 32 * c] : 0.0f;
MGT_UNROLL
        for (int r = 0; r < MGT_ATTN_ROWS; r++) {
            float wj = w[(row0 + r) * MGT_ATTN_PSTRIDE + j];
MGT_UNROLL
            for (int c = 0; c < NC; c++) acc[r][c] += wj * x[c];
        }
    }
}

/* dynamic shared memory: `tiles` fp32 tiles of (32, hs|1), `ptiles` of (32, 33), `rows` floats per row */
static inline size_t mgt_attn_shared(int tiles, int hs, int ptiles, int rows) {
    return ((size_t)tiles * MGT_ATTN_TILE * (size_t)(hs | 1) + (size_t)ptiles * MGT_ATTN_TILE * MGT_ATTN_PSTRIDE + (size_t)rows * MGT_ATTN_TILE) *
           sizeof(float);
}

/* a kernel asking for more than the default 48 KiB of dynamic shared memory must say so (hs >= 80
   in the backward, > 116 in the forward); the SIMT shim allows up to 227 KiB without it */
template <class K> static int mgt_attn_allow_shared(K kernel, size_t bytes) {
#ifdef __CUDACC__
    if (bytes > 48 * 1024 && cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes) != cudaSuccess)
        return mgt_kernel_fail(MGT_KERNEL_LAUNCH, __FILE__, __LINE__, cudaGetErrorString(cudaGetLastError()));
#else
    (void)kernel;
    (void)bytes;
#endif
    return MGT_KERNEL_OK;
}

/* the kernel for a head size: NC = ceil(hs / 32) output columns per lane */
#define MGT_ATTN_BY_HS(hs, K, ...)                                                                  \
    ((hs) <= 32 ? K<floatX, 1>(__VA_ARGS__) : (hs) <= 64 ? K<floatX, 2>(__VA_ARGS__) : (hs) <= 96 ? K<floatX, 3>(__VA_ARGS__) \
                                                                                                  : K<floatX, 4>(__VA_ARGS__))

#endif /* MGT_KERNELS_ATTENTION_TILES_CUH */
