/* Causal flash attention, forward and backward, on the (B, T, W) qkv layout, W = C + 2 KV, C = NH*hs
   query channels and KV = NKV*hs key (and value) channels: query head h of row (b, t) reads q at
   column h*hs and, under grouped-query attention, its group's key/value head g = h / (NH / NKV): k
   at C + g*hs and v at C + KV + g*hs (NKV = NH is GPT-2's); out (B, T, C) is written at h*hs. The T x T scores never exist: a block keeps one tile of 32 query rows (or key rows) in
   shared memory, streams the other side's tiles through, and keeps an online softmax (Milakov and
   Gimelshein; FlashAttention, Dao et al. 2022), so attention's memory is O(B NH T): the forward
   saves only the logsumexp of each row of scaled scores, lse (B, NH, T) in fp32, for the backward.
     forward   s[t][j] = scale q_t . k_j (j <= t), out_t = sum_j exp(s[t][j] - lse_t) v_j,
               lse_t = log sum_j exp(s[t][j])
     backward  P recomputed from lse; D_t = dout_t . out_t (= sum_j P dP); dS = P (dP - D),
               dP[t][j] = dout_t . v_j; dq = scale dS k, dk = scale dS^T q, dv = P^T dout
   Every sum is fp32 in a fixed order (no atomics): the backward runs one kernel over key tiles for
   dk and dv (a block per key/value head, summing over its group's query heads in head order) and
   one over query tiles for dq, so it recomputes the scores twice (7 T x T products
   against the forward's 2) and results never depend on timing.
   These kernels run on CUDA cores (fp32 FMA): the storage type is widened when a tile is loaded.
   One warp owns 8 rows of a tile and a lane stands for one column of the other side for the dot
   products; a tile of scores or probabilities then goes through shared memory (written by the
   warp, read by every lane after __syncwarp), and lane r < 8 keeps the running max and sum of the
   warp's row r. Tiles are fp32 rows of stride hs|1 (odd: a lane reading its own row and 31 lanes
   reading one row are both free of bank conflicts). */
#include "common.cuh" // defines: launch macros, floatX conversions, warp sums, MGT_REQUIRE, MGT_CHECK_LAUNCH
#include "attention_tiles.cuh" // defines: MGT_ATTN_TILE.., mgt_attn_load, mgt_attn_accumulate, mgt_attn_shared, MGT_ATTN_BY_HS

/* one block per (b, h, query tile); the tiles with most keys start first. Lane r < 8 of a warp keeps
   the running max and sum of the warp's row r; scores and probabilities pass through shared memory
   (a warp writes a tile, __syncwarp, every lane reads it) rather than a shuffle per value */
template <class floatX, int NC>
__global__ void __launch_bounds__(MGT_ATTN_BLOCK)
mgt_attention_forward_kernel(floatX *out, float *lse, const floatX *qkv, int T, int NH, int NKV, int hs, float scale) {
    MGT_DYNAMIC_SHARED(float, sm);
    int S = mgt_attn_stride(hs), tiles = (T + MGT_ATTN_TILE - 1) / MGT_ATTN_TILE;
    int qt = tiles - 1 - (int)blockIdx.x % tiles, bh = (int)blockIdx.x / tiles, b = bh / NH, h = bh % NH;
    int lane = (int)threadIdx.x % MGT_WARP, warp = (int)threadIdx.x / MGT_WARP, C = NH * hs, q0 = qt * MGT_ATTN_TILE;
    int row0 = warp * MGT_ATTN_ROWS; /* the warp's first row in the tile */
    size_t W = (size_t)C + 2 * (size_t)NKV * hs;
    const floatX *base = qkv + (size_t)b * T * W + (size_t)h * hs, *kbase = qkv + (size_t)b * T * W + C + (size_t)(h / (NH / NKV)) * hs;
    const floatX *vbase = kbase + (size_t)NKV * hs;
    float *Qs = sm, *Ks = sm + MGT_ATTN_TILE * S, *Vs = Ks + MGT_ATTN_TILE * S, *Ps = Vs + MGT_ATTN_TILE * S;
    float *Al = Ps + MGT_ATTN_TILE * MGT_ATTN_PSTRIDE; /* per row: the rescaling of this tile, at the end 1 / sum */
    mgt_attn_load(Qs, base, W, q0, T, hs);
    float m_own = -INFINITY, l_own = 0.0f, o[MGT_ATTN_ROWS][NC];
MGT_UNROLL
    for (int r = 0; r < MGT_ATTN_ROWS; r++)
MGT_UNROLL
        for (int c = 0; c < NC; c++) o[r][c] = 0.0f;
    int qlast = min(q0 + MGT_ATTN_TILE, T) - 1;
    for (int k0 = 0; k0 <= qlast; k0 += MGT_ATTN_TILE) {
        __syncthreads(); /* the previous tile is read */
        mgt_attn_load(Ks, kbase, W, k0, T, hs);
        mgt_attn_load(Vs, vbase, W, k0, T, hs);
        __syncthreads();
        mgt_attn_softmax_tile<NC>(o, Ps, Al, Qs, Ks, row0, q0, k0, T, hs, scale, true, m_own, l_own);
        mgt_attn_accumulate(o, Ps, row0, Vs, min(MGT_ATTN_TILE, qlast + 1 - k0), hs); /* o += P V */
    }
    __syncwarp(); /* every lane has read this tile's Al */
    if (lane < MGT_ATTN_ROWS) {
        int tq = q0 + row0 + lane;
        if (tq < T) lse[(size_t)bh * T + tq] = m_own + logf(l_own);
        Al[row0 + lane] = l_own > 0.0f ? 1.0f / l_own : 0.0f;
    }
    __syncwarp();
MGT_UNROLL
    for (int r = 0; r < MGT_ATTN_ROWS; r++) {
        int tq = q0 + row0 + r;
        if (tq >= T) continue;
        float inv = Al[row0 + r];
MGT_UNROLL
        for (int c = 0; c < NC; c++)
            if (lane + 32 * c < hs) out[((size_t)b * T + tq) * C + (size_t)h * hs + lane + 32 * c] = mgt_from_f32<floatX>(o[r][c] * inv);
    }
}

/* D (B, NH, T) = dout . out per row and head: one warp per (b, t, h) */
template <class floatX>
__global__ void __launch_bounds__(MGT_ATTN_BLOCK)
mgt_attention_backward_dot_kernel(float *D, const floatX *dout, const floatX *out, int B, int T, int NH, int hs) {
    int lane = (int)threadIdx.x % MGT_WARP, row = (int)blockIdx.x * (MGT_ATTN_BLOCK / MGT_WARP) + (int)threadIdx.x / MGT_WARP;
    if (row >= B * T * NH) return; /* whole warps leave together */
    int h = row % NH, bt = row / NH, b = bt / T, t = bt % T;
    size_t at = (size_t)bt * (size_t)(NH * hs) + (size_t)h * hs;
    float sum = 0.0f;
    for (int d = lane; d < hs; d += MGT_WARP) sum += mgt_to_f32(dout[at + d]) * mgt_to_f32(out[at + d]);
    sum = mgt_warp_sum(sum);
    if (lane == 0) D[((size_t)b * NH + h) * T + t] = sum;
}

/* dq: one block per (b, h, query tile), over the key tiles up to the diagonal */
template <class floatX, int NC>
__global__ void __launch_bounds__(MGT_ATTN_BLOCK, 1) /* ptxas for sm_100 otherwise aims at 64 registers and spills */
mgt_attention_backward_dq_kernel(floatX *dqkv, const float *D, const floatX *dout, const floatX *qkv, const float *lse, int T, int NH, int NKV,
                                 int hs, float scale) {
    MGT_DYNAMIC_SHARED(float, sm);
    int S = mgt_attn_stride(hs), tiles = (T + MGT_ATTN_TILE - 1) / MGT_ATTN_TILE;
    int qt = tiles - 1 - (int)blockIdx.x % tiles, bh = (int)blockIdx.x / tiles, b = bh / NH, h = bh % NH;
    int lane = (int)threadIdx.x % MGT_WARP, warp = (int)threadIdx.x / MGT_WARP, C = NH * hs, q0 = qt * MGT_ATTN_TILE;
    int row0 = warp * MGT_ATTN_ROWS;
    size_t W = (size_t)C + 2 * (size_t)NKV * hs;
    const floatX *base = qkv + (size_t)b * T * W + (size_t)h * hs, *kbase = qkv + (size_t)b * T * W + C + (size_t)(h / (NH / NKV)) * hs;
    const floatX *vbase = kbase + (size_t)NKV * hs;
    float *Qs = sm, *Os = sm + MGT_ATTN_TILE * S, *Ks = Os + MGT_ATTN_TILE * S, *Vs = Ks + MGT_ATTN_TILE * S;
    float *Ls = Vs + MGT_ATTN_TILE * S, *Ds = Ls + MGT_ATTN_TILE, *Ps = Ds + MGT_ATTN_TILE; /* Ps: dS of the tile */
    mgt_attn_load(Qs, base, W, q0, T, hs);
    mgt_attn_load(Os, dout + (size_t)b * T * C + (size_t)h * hs, (size_t)C, q0, T, hs);
    if ((int)threadIdx.x < MGT_ATTN_TILE) {
        int t = q0 + (int)threadIdx.x;
        Ls[threadIdx.x] = t < T ? lse[(size_t)bh * T + t] : 0.0f;
        Ds[threadIdx.x] = t < T ? D[(size_t)bh * T + t] : 0.0f;
    }
    float dq[MGT_ATTN_ROWS][NC];
MGT_UNROLL
    for (int r = 0; r < MGT_ATTN_ROWS; r++)
MGT_UNROLL
        for (int c = 0; c < NC; c++) dq[r][c] = 0.0f;
    int qlast = min(q0 + MGT_ATTN_TILE, T) - 1;
    for (int k0 = 0; k0 <= qlast; k0 += MGT_ATTN_TILE) {
        __syncthreads();
        mgt_attn_load(Ks, kbase, W, k0, T, hs);
        mgt_attn_load(Vs, vbase, W, k0, T, hs);
        __syncthreads();
        float s[MGT_ATTN_ROWS], dp[MGT_ATTN_ROWS];
MGT_UNROLL
        for (int r = 0; r < MGT_ATTN_ROWS; r++) s[r] = dp[r] = 0.0f;
        for (int d = 0; d < hs; d++) {
            float kd = Ks[lane * S + d], vd = Vs[lane * S + d];
MGT_UNROLL
            for (int r = 0; r < MGT_ATTN_ROWS; r++) {
                s[r] += Qs[(row0 + r) * S + d] * kd;
                dp[r] += Os[(row0 + r) * S + d] * vd;
            }
        }
        int kj = k0 + lane;
MGT_UNROLL
        for (int r = 0; r < MGT_ATTN_ROWS; r++) {
            int row = row0 + r, tq = q0 + row;
            float p = kj <= tq && tq < T ? expf(scale * s[r] - Ls[row]) : 0.0f;
            Ps[row * MGT_ATTN_PSTRIDE + lane] = p * (dp[r] - Ds[row]);
        }
        __syncwarp();
        mgt_attn_accumulate(dq, Ps, row0, Ks, min(MGT_ATTN_TILE, qlast + 1 - k0), hs); /* dq += dS K */
    }
MGT_UNROLL
    for (int r = 0; r < MGT_ATTN_ROWS; r++) {
        int tq = q0 + row0 + r;
        if (tq >= T) continue;
MGT_UNROLL
        for (int c = 0; c < NC; c++)
            if (lane + 32 * c < hs) dqkv[((size_t)b * T + tq) * W + (size_t)h * hs + lane + 32 * c] = mgt_from_f32<floatX>(scale * dq[r][c]);
    }
}

/* dk and dv: one block per (b, key/value head g, key tile), over its group's query heads in order and,
   for each, the query tiles from the diagonal on; the tiles with most queries start first */
template <class floatX, int NC>
__global__ void __launch_bounds__(MGT_ATTN_BLOCK, 1) /* as dq's: the loop over the group's heads otherwise spills on sm_100 */
mgt_attention_backward_dkv_kernel(floatX *dqkv, const float *D, const floatX *dout, const floatX *qkv, const float *lse, int T, int NH, int NKV,
                                  int hs, float scale) {
    MGT_DYNAMIC_SHARED(float, sm);
    int S = mgt_attn_stride(hs), tiles = (T + MGT_ATTN_TILE - 1) / MGT_ATTN_TILE, group = NH / NKV;
    int kt = (int)blockIdx.x % tiles, bg = (int)blockIdx.x / tiles, b = bg / NKV, g = bg % NKV;
    int lane = (int)threadIdx.x % MGT_WARP, warp = (int)threadIdx.x / MGT_WARP, C = NH * hs, k0 = kt * MGT_ATTN_TILE;
    int row0 = warp * MGT_ATTN_ROWS; /* the warp's first key in the tile */
    size_t W = (size_t)C + 2 * (size_t)NKV * hs, KV = (size_t)NKV * hs;
    const floatX *kbase = qkv + (size_t)b * T * W + C + (size_t)g * hs;
    float *Ks = sm, *Vs = sm + MGT_ATTN_TILE * S, *Qs = Vs + MGT_ATTN_TILE * S, *Os = Qs + MGT_ATTN_TILE * S;
    float *Ls = Os + MGT_ATTN_TILE * S, *Ds = Ls + MGT_ATTN_TILE, *Ps = Ds + MGT_ATTN_TILE, *DSs = Ps + MGT_ATTN_TILE * MGT_ATTN_PSTRIDE;
    mgt_attn_load(Ks, kbase, W, k0, T, hs);
    mgt_attn_load(Vs, kbase + KV, W, k0, T, hs);
    float dk[MGT_ATTN_ROWS][NC], dv[MGT_ATTN_ROWS][NC];
MGT_UNROLL
    for (int r = 0; r < MGT_ATTN_ROWS; r++)
MGT_UNROLL
        for (int c = 0; c < NC; c++) dk[r][c] = dv[r][c] = 0.0f;
    for (int h = g * group; h < (g + 1) * group; h++) {
        const floatX *qbase = qkv + (size_t)b * T * W + (size_t)h * hs, *obase = dout + (size_t)b * T * C + (size_t)h * hs;
        size_t bh = (size_t)b * NH + (size_t)h;
        for (int q0 = k0; q0 < T; q0 += MGT_ATTN_TILE) {
            __syncthreads();
            mgt_attn_load(Qs, qbase, W, q0, T, hs);
            mgt_attn_load(Os, obase, (size_t)C, q0, T, hs);
            if ((int)threadIdx.x < MGT_ATTN_TILE) {
                int t = q0 + (int)threadIdx.x;
                Ls[threadIdx.x] = t < T ? lse[bh * T + t] : 0.0f;
                Ds[threadIdx.x] = t < T ? D[bh * T + t] : 0.0f;
            }
            __syncthreads();
            float p[MGT_ATTN_ROWS], ds[MGT_ATTN_ROWS];
MGT_UNROLL
            for (int r = 0; r < MGT_ATTN_ROWS; r++) p[r] = ds[r] = 0.0f;
            for (int d = 0; d < hs; d++) {
                float qd = Qs[lane * S + d], od = Os[lane * S + d];
MGT_UNROLL
                for (int r = 0; r < MGT_ATTN_ROWS; r++) {
                    p[r] += qd * Ks[(row0 + r) * S + d];
                    ds[r] += od * Vs[(row0 + r) * S + d];
                }
            }
            int tq = q0 + lane;
MGT_UNROLL
            for (int r = 0; r < MGT_ATTN_ROWS; r++) {
                int key = k0 + row0 + r;
                float pr = key <= tq && tq < T ? expf(scale * p[r] - Ls[lane]) : 0.0f;
                Ps[(row0 + r) * MGT_ATTN_PSTRIDE + lane] = pr;
                DSs[(row0 + r) * MGT_ATTN_PSTRIDE + lane] = pr * (ds[r] - Ds[lane]);
            }
            __syncwarp();
            mgt_attn_accumulate(dv, Ps, row0, Os, min(MGT_ATTN_TILE, T - q0), hs);  /* dv += P^T dout */
            mgt_attn_accumulate(dk, DSs, row0, Qs, min(MGT_ATTN_TILE, T - q0), hs); /* dk += dS^T q */
        }
    }
MGT_UNROLL
    for (int r = 0; r < MGT_ATTN_ROWS; r++) {
        int key = k0 + row0 + r;
        if (key >= T) continue;
        floatX *row = dqkv + ((size_t)b * T + key) * W + C + (size_t)g * hs;
MGT_UNROLL
        for (int c = 0; c < NC; c++)
            if (lane + 32 * c < hs) {
                row[lane + 32 * c] = mgt_from_f32<floatX>(scale * dk[r][c]);
                row[KV + lane + 32 * c] = mgt_from_f32<floatX>(dv[r][c]);
            }
    }
}

/* ---- launchers */

template <class floatX, int NC>
static int mgt_attn_forward_nc(floatX *out, float *lse, const floatX *qkv, int B, int T, int NH, int NKV, int hs, float scale, cudaStream_t stream) {
    int blocks = B * NH * ((T + MGT_ATTN_TILE - 1) / MGT_ATTN_TILE);
    size_t shared = mgt_attn_shared(3, hs, 1, 1); /* q, k, v; probabilities; rescaling */
    void (*attention_forward)(floatX *, float *, const floatX *, int, int, int, int, float) = mgt_attention_forward_kernel<floatX, NC>;
    int rc = mgt_attn_allow_shared(attention_forward, shared);
    if (rc) return rc;
    MGT_LAUNCH(attention_forward, blocks, MGT_ATTN_BLOCK, shared, stream, out, lse, qkv, T, NH, NKV, hs, scale);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}
template <class floatX, int NC>
static int mgt_attn_backward_nc(floatX *dqkv, const float *D, const floatX *dout, const floatX *qkv, const float *lse, int B, int T, int NH, int NKV,
                                int hs, float scale, cudaStream_t stream) {
    int tiles = (T + MGT_ATTN_TILE - 1) / MGT_ATTN_TILE;
    size_t shared = mgt_attn_shared(4, hs, 2, 2); /* q, dout, k, v; p and dS (dq: dS only); lse and D */
    void (*attention_backward_dkv)(floatX *, const float *, const floatX *, const floatX *, const float *, int, int, int, int, float) =
        mgt_attention_backward_dkv_kernel<floatX, NC>;
    void (*attention_backward_dq)(floatX *, const float *, const floatX *, const floatX *, const float *, int, int, int, int, float) =
        mgt_attention_backward_dq_kernel<floatX, NC>;
    int rc = mgt_attn_allow_shared(attention_backward_dkv, shared);
    if (!rc) rc = mgt_attn_allow_shared(attention_backward_dq, shared);
    if (rc) return rc;
    MGT_LAUNCH(attention_backward_dkv, B * NKV * tiles, MGT_ATTN_BLOCK, shared, stream, dqkv, D, dout, qkv, lse, T, NH, NKV, hs, scale);
    MGT_CHECK_LAUNCH();
    MGT_LAUNCH(attention_backward_dq, B * NH * tiles, MGT_ATTN_BLOCK, shared, stream, dqkv, D, dout, qkv, lse, T, NH, NKV, hs, scale);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

template <class floatX>
int mgt_cuda_attention_forward(floatX *out, float *lse, const floatX *qkv, int B, int T, int NH, int NKV, int hs, cudaStream_t stream) {
    MGT_REQUIRE(B > 0 && T > 0 && NH > 0 && NKV > 0 && NH % NKV == 0 && hs > 0 && hs <= MGT_ATTN_MAX_HS);
    MGT_REQUIRE((long long)B * NH * ((T + MGT_ATTN_TILE - 1) / MGT_ATTN_TILE) <= 0x7fffffff && (long long)B * T * (NH + 2 * NKV) * hs <= 0x7fffffffffffLL);
    MGT_REQUIRE(out && lse && qkv);
    MGT_REQUIRE((const void *)out != (const void *)qkv);
    float scale = 1.0f / sqrtf((float)hs);
    return MGT_ATTN_BY_HS(hs, mgt_attn_forward_nc, out, lse, qkv, B, T, NH, NKV, hs, scale, stream);
}

size_t mgt_cuda_attention_backward_scratch(int B, int T, int NH) { return (size_t)B * (size_t)NH * (size_t)T * sizeof(float); }

template <class floatX>
int mgt_cuda_attention_backward(floatX *dqkv, float *scratch, const floatX *dout, const floatX *qkv, const floatX *out, const float *lse, int B, int T,
                                int NH, int NKV, int hs, cudaStream_t stream) {
    MGT_REQUIRE(B > 0 && T > 0 && NH > 0 && NKV > 0 && NH % NKV == 0 && hs > 0 && hs <= MGT_ATTN_MAX_HS);
    MGT_REQUIRE((long long)B * T * NH <= 0x7fffffff);
    MGT_REQUIRE(dqkv && scratch && dout && qkv && out && lse);
    MGT_REQUIRE((const void *)dqkv != (const void *)qkv && (const void *)dqkv != (const void *)dout && (const void *)dqkv != (const void *)out);
    float scale = 1.0f / sqrtf((float)hs);
    int rows = B * T * NH, per = MGT_ATTN_BLOCK / MGT_WARP;
    MGT_LAUNCH(mgt_attention_backward_dot_kernel<floatX>, (rows + per - 1) / per, MGT_ATTN_BLOCK, 0, stream, scratch, dout, out, B, T, NH, hs);
    MGT_CHECK_LAUNCH();
    return MGT_ATTN_BY_HS(hs, mgt_attn_backward_nc, dqkv, scratch, dout, qkv, lse, B, T, NH, NKV, hs, scale, stream);
}

/* every kernel the launchers above can launch for floatX (launchers.h: loaded when the run is made) */
template <class floatX, int NC> static void mgt_attn_kernels_nc(mgt_kernel_list &l) {
    mgt_kernel_list_add(l, mgt_attention_forward_kernel<floatX, NC>);
    mgt_kernel_list_add(l, mgt_attention_backward_dq_kernel<floatX, NC>);
    mgt_kernel_list_add(l, mgt_attention_backward_dkv_kernel<floatX, NC>);
}
template <class floatX> void mgt_cuda_attention_kernels(mgt_kernel_list &l) {
    mgt_kernel_list_add(l, mgt_attention_backward_dot_kernel<floatX>);
    mgt_attn_kernels_nc<floatX, 1>(l); /* every head size MGT_ATTN_BY_HS picks */
    mgt_attn_kernels_nc<floatX, 2>(l);
    mgt_attn_kernels_nc<floatX, 3>(l);
    mgt_attn_kernels_nc<floatX, 4>(l);
}

#define MGT_INSTANTIATE(floatX)                                                                                                  \
    template int mgt_cuda_attention_forward<floatX>(floatX *, float *, const floatX *, int, int, int, int, int, cudaStream_t);    \
    template int mgt_cuda_attention_backward<floatX>(floatX *, float *, const floatX *, const floatX *, const floatX *, const float *, int, int, \
                                                     int, int, int, cudaStream_t); \
    template void mgt_cuda_attention_kernels<floatX>(mgt_kernel_list &);
MGT_FOR_EACH_FLOATX(MGT_INSTANTIATE)
