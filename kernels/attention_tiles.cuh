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

/* one key tile of the forward's online softmax (attention.cu, ring_attention.cu): for the warp's rows
   row0.. of the query tile at q0 (Qs) against the keys at k0 (Ks), the scaled scores where the key is
   seen (causal: key <= query; else every key of the T; rows past T see none), turned into exp(s - m)
   in Ps for mgt_attn_accumulate; lane r keeps row row0 + r's running max m_own and sum l_own, and the
   rows' outputs so far, acc, are rescaled to the new max (the factor also left in Al) */
template <int NC>
__device__ __forceinline__ void mgt_attn_softmax_tile(float (&acc)[MGT_ATTN_ROWS][NC], float *Ps, float *Al, const float *Qs, const float *Ks, int row0,
                                                      int q0, int k0, int T, int hs, float scale, bool causal, float &m_own, float &l_own) {
    int S = mgt_attn_stride(hs), lane = (int)threadIdx.x % MGT_WARP;
    float s[MGT_ATTN_ROWS];
MGT_UNROLL
    for (int r = 0; r < MGT_ATTN_ROWS; r++) s[r] = 0.0f;
    for (int d = 0; d < hs; d++) {
        float kd = Ks[lane * S + d];
MGT_UNROLL
        for (int r = 0; r < MGT_ATTN_ROWS; r++) s[r] += Qs[(row0 + r) * S + d] * kd;
    }
    int kj = k0 + lane;
MGT_UNROLL
    for (int r = 0; r < MGT_ATTN_ROWS; r++) {
        int tq = q0 + row0 + r;
        Ps[(row0 + r) * MGT_ATTN_PSTRIDE + lane] = tq < T && kj <= (causal ? tq : T - 1) ? scale * s[r] : -INFINITY;
    }
    __syncwarp();
    if (lane < MGT_ATTN_ROWS) { /* the online softmax of row row0 + lane, in key order */
        float *x = Ps + (row0 + lane) * MGT_ATTN_PSTRIDE, mx = -INFINITY, sum = 0.0f;
        for (int j = 0; j < MGT_ATTN_TILE; j++) mx = fmaxf(mx, x[j]);
        float mnew = fmaxf(m_own, mx), alpha = m_own == -INFINITY ? 0.0f : expf(m_own - mnew); /* nothing summed yet: acc is 0 */
        for (int j = 0; j < MGT_ATTN_TILE; j++) {
            float p = x[j] == -INFINITY ? 0.0f : expf(x[j] - mnew);
            x[j] = p;
            sum += p;
        }
        l_own = l_own * alpha + sum;
        m_own = mnew;
        Al[row0 + lane] = alpha;
    }
    __syncwarp();
MGT_UNROLL
    for (int r = 0; r < MGT_ATTN_ROWS; r++) {
        float alpha = Al[row0 + r];
MGT_UNROLL
        for (int c = 0; c < NC; c++) acc[r][c] *= alpha;
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
