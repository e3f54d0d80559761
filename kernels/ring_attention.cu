/* One block of context parallelism's ring attention (src/rank.c, mgt__ring_attention_*; mgt.h's
   backend table, attention_part_forward and attention_part_backward), forward and backward: the
   queries of qkv (B, T, W), W = C + 2 KV as in attention.cu, against one block of keys and values,
   kv (B, T rows, kv_stride elements apart: NKV k heads at column g*hs, then NKV v heads at KV + g*hs).
   causal: key t' <= query t (the block is the queries' own chunk); else every key of the block (an
   earlier chunk). Query head h reads key/value head g = h / (NH / NKV).
     forward   per (b, h, query tile) an online softmax over the block's keys, as attention.cu's
               forward: the block's own output o_b = sum_j exp(s_tj - m) v_j / l and log-sum-exp
               lse_b = m + log l; then, unless `first`, merged into the running (o, lse) (fp32, o (B, T,
               C) and lse (B, NH, T)): lse' = log(exp(lse) + exp(lse_b)), o' = o exp(lse - lse') +
               o_b exp(lse_b - lse'), which is what one softmax over every key so far gives; `first`
               writes o_b and lse_b.
     backward  flash attention's with the merged lse and D_t = dout_t . out_t of the merged output
               (out and dout in the storage type): P = exp(s - lse) is this block's share of the
               softmax, dS = P (dP - D); dq (B, T, C) += scale dS k, dk += scale dS^T q, dv += P^T dout,
               dkv (B, T, 2 KV) fp32 with dk at g*hs and dv at KV + g*hs.
   The kernels are attention.cu's on CUDA cores (kernels/attention_tiles.cuh), with the key range of
   the block (the diagonal, or every key tile) and fp32 outputs that are merged into or added to
   rather than written. No atomics: dq comes from a kernel over query tiles, dk and dv from one over
   key tiles per key/value head that sums its group's query heads in head order, each output
   element is read and written by one thread, so results never depend on timing. The backward's
   scratch is D, one fp32 per row and head (mgt_cuda_attention_part_backward_scratch). */
#include "common.cuh" // defines: launch macros, floatX conversions, warp sums, MGT_REQUIRE, MGT_CHECK_LAUNCH
#include "attention_tiles.cuh" // defines: MGT_ATTN_TILE.., mgt_attn_load, mgt_attn_accumulate, mgt_attn_shared, MGT_ATTN_BY_HS

/* the last key that query t attends to in the block (T - 1 for a whole block) */
__device__ __forceinline__ int mgt_ring_last_key(int t, int T, int causal) { return causal ? t : T - 1; }

/* one block per (b, h, query tile); for a causal block the tiles with most keys start first */
template <class floatX, int NC>
__global__ void __launch_bounds__(MGT_ATTN_BLOCK)
mgt_ring_attention_forward_kernel(float *o, float *lse, const floatX *qkv, const floatX *kv, int kv_stride, int T, int NH, int NKV, int hs, float scale,
                                  int causal, int first) {
    MGT_DYNAMIC_SHARED(float, sm);
    int S = mgt_attn_stride(hs), tiles = (T + MGT_ATTN_TILE - 1) / MGT_ATTN_TILE;
    int qt = tiles - 1 - (int)blockIdx.x % tiles, bh = (int)blockIdx.x / tiles, b = bh / NH, h = bh % NH;
    int lane = (int)threadIdx.x % MGT_WARP, warp = (int)threadIdx.x / MGT_WARP, C = NH * hs, q0 = qt * MGT_ATTN_TILE;
    int row0 = warp * MGT_ATTN_ROWS; /* the warp's first row in the tile */
    size_t W = (size_t)C + 2 * (size_t)NKV * hs;
    const floatX *base = qkv + (size_t)b * T * W + (size_t)h * hs, *kbase = kv + (size_t)b * T * kv_stride + (size_t)(h / (NH / NKV)) * hs;
    const floatX *vbase = kbase + (size_t)NKV * hs;
    float *Qs = sm, *Ks = sm + MGT_ATTN_TILE * S, *Vs = Ks + MGT_ATTN_TILE * S, *Ps = Vs + MGT_ATTN_TILE * S;
    float *Al = Ps + MGT_ATTN_TILE * MGT_ATTN_PSTRIDE; /* per row: the rescaling of this tile, at the end the block's weight */
    float *Keep = Al + MGT_ATTN_TILE;                 /* per row, at the end: the weight of the running output */
    mgt_attn_load(Qs, base, (size_t)W, q0, T, hs);
    float m_own = -INFINITY, l_own = 0.0f, acc[MGT_ATTN_ROWS][NC];
MGT_UNROLL
    for (int r = 0; r < MGT_ATTN_ROWS; r++)
MGT_UNROLL
        for (int c = 0; c < NC; c++) acc[r][c] = 0.0f;
    int qlast = min(q0 + MGT_ATTN_TILE, T) - 1, klast = mgt_ring_last_key(qlast, T, causal);
    for (int k0 = 0; k0 <= klast; k0 += MGT_ATTN_TILE) {
        __syncthreads(); /* the previous tile is read */
        mgt_attn_load(Ks, kbase, (size_t)kv_stride, k0, T, hs);
        mgt_attn_load(Vs, vbase, (size_t)kv_stride, k0, T, hs);
        __syncthreads();
        mgt_attn_softmax_tile<NC>(acc, Ps, Al, Qs, Ks, row0, q0, k0, T, hs, scale, causal != 0, m_own, l_own);
        mgt_attn_accumulate(acc, Ps, row0, Vs, min(MGT_ATTN_TILE, klast + 1 - k0), hs); /* acc += P V */
    }
    __syncwarp(); /* every lane has read this tile's Al */
    if (lane < MGT_ATTN_ROWS) { /* the merge: every row of a block has a key (its own, or all T), so l_own > 0 */
        int tq = q0 + row0 + lane;
        float keep = 0.0f, weight = l_own > 0.0f ? 1.0f / l_own : 0.0f;
        if (tq < T) {
            float part = m_own + logf(l_own), merged = part;
            size_t li = (size_t)bh * T + tq;
            if (!first) {
                float old = lse[li], hi = fmaxf(old, part);
                merged = hi + logf(expf(old - hi) + expf(part - hi));
                keep = expf(old - merged);
                weight = expf(m_own - merged); /* acc holds exp(s - m_own): exp(s - merged) is the share of all keys so far */
            }
            lse[li] = merged;
        }
        Al[row0 + lane] = weight;
        Keep[row0 + lane] = keep;
    }
    __syncwarp();
MGT_UNROLL
    for (int r = 0; r < MGT_ATTN_ROWS; r++) {
        int tq = q0 + row0 + r;
        if (tq >= T) continue;
        float weight = Al[row0 + r], keep = Keep[row0 + r];
        float *row = o + ((size_t)b * T + tq) * C + (size_t)h * hs;
MGT_UNROLL
        for (int c = 0; c < NC; c++)
            if (lane + 32 * c < hs) row[lane + 32 * c] = first ? acc[r][c] * weight : row[lane + 32 * c] * keep + acc[r][c] * weight;
    }
}

/* D (B, NH, T) = dout . out per row and head: one warp per (b, t, h) */
template <class floatX>
__global__ void __launch_bounds__(MGT_ATTN_BLOCK)
mgt_ring_attention_dot_kernel(float *D, const floatX *dout, const floatX *out, int B, int T, int NH, int hs) {
    int lane = (int)threadIdx.x % MGT_WARP, row = (int)blockIdx.x * (MGT_ATTN_BLOCK / MGT_WARP) + (int)threadIdx.x / MGT_WARP;
    if (row >= B * T * NH) return; /* whole warps leave together */
    int h = row % NH, bt = row / NH, b = bt / T, t = bt % T;
    size_t at = (size_t)bt * (size_t)(NH * hs) + (size_t)h * hs;
    float sum = 0.0f;
    for (int d = lane; d < hs; d += MGT_WARP) sum += mgt_to_f32(dout[at + d]) * mgt_to_f32(out[at + d]);
    sum = mgt_warp_sum(sum);
    if (lane == 0) D[((size_t)b * NH + h) * T + t] = sum;
}

/* dq += : one block per (b, h, query tile), over the block's key tiles */
template <class floatX, int NC>
__global__ void __launch_bounds__(MGT_ATTN_BLOCK, 1) /* as attention.cu's dq kernel: ptxas for sm_100 otherwise aims at 64 registers and spills */
mgt_ring_attention_backward_dq_kernel(float *dq, const float *D, const floatX *dout, const floatX *qkv, const floatX *kv, int kv_stride,
                                      const float *lse, int T, int NH, int NKV, int hs, float scale, int causal) {
    MGT_DYNAMIC_SHARED(float, sm);
    int S = mgt_attn_stride(hs), tiles = (T + MGT_ATTN_TILE - 1) / MGT_ATTN_TILE;
    int qt = tiles - 1 - (int)blockIdx.x % tiles, bh = (int)blockIdx.x / tiles, b = bh / NH, h = bh % NH;
    int lane = (int)threadIdx.x % MGT_WARP, warp = (int)threadIdx.x / MGT_WARP, C = NH * hs, q0 = qt * MGT_ATTN_TILE;
    int row0 = warp * MGT_ATTN_ROWS;
    size_t W = (size_t)C + 2 * (size_t)NKV * hs;
    const floatX *base = qkv + (size_t)b * T * W + (size_t)h * hs, *kbase = kv + (size_t)b * T * kv_stride + (size_t)(h / (NH / NKV)) * hs;
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
    float g[MGT_ATTN_ROWS][NC];
MGT_UNROLL
    for (int r = 0; r < MGT_ATTN_ROWS; r++)
MGT_UNROLL
        for (int c = 0; c < NC; c++) g[r][c] = 0.0f;
    int qlast = min(q0 + MGT_ATTN_TILE, T) - 1, klast = mgt_ring_last_key(qlast, T, causal);
    for (int k0 = 0; k0 <= klast; k0 += MGT_ATTN_TILE) {
        __syncthreads();
        mgt_attn_load(Ks, kbase, (size_t)kv_stride, k0, T, hs);
        mgt_attn_load(Vs, vbase, (size_t)kv_stride, k0, T, hs);
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
            float p = tq < T && kj <= mgt_ring_last_key(tq, T, causal) ? expf(scale * s[r] - Ls[row]) : 0.0f;
            Ps[row * MGT_ATTN_PSTRIDE + lane] = p * (dp[r] - Ds[row]);
        }
        __syncwarp();
        mgt_attn_accumulate(g, Ps, row0, Ks, min(MGT_ATTN_TILE, klast + 1 - k0), hs); /* g += dS K */
    }
MGT_UNROLL
    for (int r = 0; r < MGT_ATTN_ROWS; r++) {
        int tq = q0 + row0 + r;
        if (tq >= T) continue;
        float *row = dq + ((size_t)b * T + tq) * C + (size_t)h * hs;
MGT_UNROLL
        for (int c = 0; c < NC; c++)
            if (lane + 32 * c < hs) row[lane + 32 * c] += scale * g[r][c];
    }
}

/* dk, dv += : one block per (b, key/value head g, key tile), over its group's query heads in order and,
   for each, the query tiles that see the key tile (from the diagonal on, or all of them) */
template <class floatX, int NC>
__global__ void __launch_bounds__(MGT_ATTN_BLOCK, 1) /* as attention.cu's dkv kernel: the loop over the group's heads otherwise spills on sm_100 */
mgt_ring_attention_backward_dkv_kernel(float *dkv, const float *D, const floatX *dout, const floatX *qkv, const floatX *kv, int kv_stride,
                                       const float *lse, int T, int NH, int NKV, int hs, float scale, int causal) {
    MGT_DYNAMIC_SHARED(float, sm);
    int S = mgt_attn_stride(hs), tiles = (T + MGT_ATTN_TILE - 1) / MGT_ATTN_TILE, group = NH / NKV;
    int kt = (int)blockIdx.x % tiles, bg = (int)blockIdx.x / tiles, b = bg / NKV, g = bg % NKV;
    int lane = (int)threadIdx.x % MGT_WARP, warp = (int)threadIdx.x / MGT_WARP, C = NH * hs, k0 = kt * MGT_ATTN_TILE;
    int row0 = warp * MGT_ATTN_ROWS; /* the warp's first key in the tile */
    size_t W = (size_t)C + 2 * (size_t)NKV * hs, KV = (size_t)NKV * hs;
    const floatX *kbase = kv + (size_t)b * T * kv_stride + (size_t)g * hs;
    float *Ks = sm, *Vs = sm + MGT_ATTN_TILE * S, *Qs = Vs + MGT_ATTN_TILE * S, *Os = Qs + MGT_ATTN_TILE * S;
    float *Ls = Os + MGT_ATTN_TILE * S, *Ds = Ls + MGT_ATTN_TILE, *Ps = Ds + MGT_ATTN_TILE, *DSs = Ps + MGT_ATTN_TILE * MGT_ATTN_PSTRIDE;
    mgt_attn_load(Ks, kbase, (size_t)kv_stride, k0, T, hs);
    mgt_attn_load(Vs, kbase + KV, (size_t)kv_stride, k0, T, hs);
    float dk[MGT_ATTN_ROWS][NC], dv[MGT_ATTN_ROWS][NC];
MGT_UNROLL
    for (int r = 0; r < MGT_ATTN_ROWS; r++)
MGT_UNROLL
        for (int c = 0; c < NC; c++) dk[r][c] = dv[r][c] = 0.0f;
    for (int h = g * group; h < (g + 1) * group; h++) {
        const floatX *qbase = qkv + (size_t)b * T * W + (size_t)h * hs, *obase = dout + (size_t)b * T * C + (size_t)h * hs;
        size_t bh = (size_t)b * NH + (size_t)h;
        for (int q0 = causal ? k0 : 0; q0 < T; q0 += MGT_ATTN_TILE) {
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
                float pr = tq < T && key <= mgt_ring_last_key(tq, T, causal) ? expf(scale * p[r] - Ls[lane]) : 0.0f;
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
        float *row = dkv + ((size_t)b * T + key) * 2 * KV + (size_t)g * hs;
MGT_UNROLL
        for (int c = 0; c < NC; c++)
            if (lane + 32 * c < hs) {
                row[lane + 32 * c] += scale * dk[r][c];
                row[KV + lane + 32 * c] += dv[r][c];
            }
    }
}

/* ---- launchers */

template <class floatX, int NC>
static int mgt_ring_forward_nc(float *o, float *lse, const floatX *qkv, const floatX *kv, int kv_stride, int B, int T, int NH, int NKV, int hs,
                               float scale, int causal, int first, cudaStream_t stream) {
    int blocks = B * NH * ((T + MGT_ATTN_TILE - 1) / MGT_ATTN_TILE);
    size_t shared = mgt_attn_shared(3, hs, 1, 2); /* q, k, v; probabilities; the rescaling and the running output's weight */
    void (*ring_forward)(float *, float *, const floatX *, const floatX *, int, int, int, int, int, float, int, int) =
        mgt_ring_attention_forward_kernel<floatX, NC>;
    int rc = mgt_attn_allow_shared(ring_forward, shared);
    if (rc) return rc;
    MGT_LAUNCH(ring_forward, blocks, MGT_ATTN_BLOCK, shared, stream, o, lse, qkv, kv, kv_stride, T, NH, NKV, hs, scale, causal, first);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}
template <class floatX, int NC>
static int mgt_ring_backward_nc(float *dq, float *dkv, const float *D, const floatX *dout, const floatX *qkv, const floatX *kv, int kv_stride,
                                const float *lse, int B, int T, int NH, int NKV, int hs, float scale, int causal, cudaStream_t stream) {
    int tiles = (T + MGT_ATTN_TILE - 1) / MGT_ATTN_TILE;
    size_t shared = mgt_attn_shared(4, hs, 2, 2); /* q, dout, k, v; p and dS (dq: dS only); lse and D */
    void (*ring_backward_dkv)(float *, const float *, const floatX *, const floatX *, const floatX *, int, const float *, int, int, int, int, float,
                              int) = mgt_ring_attention_backward_dkv_kernel<floatX, NC>;
    void (*ring_backward_dq)(float *, const float *, const floatX *, const floatX *, const floatX *, int, const float *, int, int, int, int, float,
                             int) = mgt_ring_attention_backward_dq_kernel<floatX, NC>;
    int rc = mgt_attn_allow_shared(ring_backward_dkv, shared);
    if (!rc) rc = mgt_attn_allow_shared(ring_backward_dq, shared);
    if (rc) return rc;
    MGT_LAUNCH(ring_backward_dkv, B * NKV * tiles, MGT_ATTN_BLOCK, shared, stream, dkv, D, dout, qkv, kv, kv_stride, lse, T, NH, NKV, hs, scale, causal);
    MGT_CHECK_LAUNCH();
    MGT_LAUNCH(ring_backward_dq, B * NH * tiles, MGT_ATTN_BLOCK, shared, stream, dq, D, dout, qkv, kv, kv_stride, lse, T, NH, NKV, hs, scale, causal);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

template <class floatX>
int mgt_cuda_attention_part_forward(float *o, float *lse, const floatX *qkv, const floatX *kv, int kv_stride, int B, int T, int NH, int NKV, int hs,
                                    int causal, int first, cudaStream_t stream) {
    MGT_REQUIRE(B > 0 && T > 0 && NH > 0 && NKV > 0 && NH % NKV == 0 && hs > 0 && hs <= MGT_ATTN_MAX_HS);
    MGT_REQUIRE(kv_stride >= 2 * NKV * hs);
    MGT_REQUIRE((long long)B * NH * ((T + MGT_ATTN_TILE - 1) / MGT_ATTN_TILE) <= 0x7fffffff && (long long)B * T * (NH + 2 * NKV) * hs <= 0x7fffffffffffLL);
    MGT_REQUIRE(o && lse && qkv && kv);
    MGT_REQUIRE((const void *)o != (const void *)lse && (const void *)o != (const void *)qkv && (const void *)o != (const void *)kv);
    float scale = 1.0f / sqrtf((float)hs);
    return MGT_ATTN_BY_HS(hs, mgt_ring_forward_nc, o, lse, qkv, kv, kv_stride, B, T, NH, NKV, hs, scale, causal, first, stream);
}

size_t mgt_cuda_attention_part_backward_scratch(int B, int T, int NH) { return (size_t)B * (size_t)NH * (size_t)T * sizeof(float); }

template <class floatX>
int mgt_cuda_attention_part_backward(float *dq, float *dkv, float *scratch, const floatX *dout, const floatX *out, const float *lse, const floatX *qkv,
                                     const floatX *kv, int kv_stride, int B, int T, int NH, int NKV, int hs, int causal, cudaStream_t stream) {
    MGT_REQUIRE(B > 0 && T > 0 && NH > 0 && NKV > 0 && NH % NKV == 0 && hs > 0 && hs <= MGT_ATTN_MAX_HS);
    MGT_REQUIRE(kv_stride >= 2 * NKV * hs);
    MGT_REQUIRE((long long)B * T * NH <= 0x7fffffff);
    MGT_REQUIRE(dq && dkv && scratch && dout && out && lse && qkv && kv);
    MGT_REQUIRE((const void *)dq != (const void *)dkv && (const void *)scratch != (const void *)dq && (const void *)scratch != (const void *)dkv);
    float scale = 1.0f / sqrtf((float)hs);
    int rows = B * T * NH, per = MGT_ATTN_BLOCK / MGT_WARP;
    MGT_LAUNCH(mgt_ring_attention_dot_kernel<floatX>, (rows + per - 1) / per, MGT_ATTN_BLOCK, 0, stream, scratch, dout, out, B, T, NH, hs);
    MGT_CHECK_LAUNCH();
    return MGT_ATTN_BY_HS(hs, mgt_ring_backward_nc, dq, dkv, scratch, dout, qkv, kv, kv_stride, lse, B, T, NH, NKV, hs, scale, causal, stream);
}

/* every kernel the launchers above can launch for floatX (launchers.h: loaded when the run is made) */
template <class floatX, int NC> static void mgt_ring_kernels_nc(mgt_kernel_list &l) {
    mgt_kernel_list_add(l, mgt_ring_attention_forward_kernel<floatX, NC>);
    mgt_kernel_list_add(l, mgt_ring_attention_backward_dq_kernel<floatX, NC>);
    mgt_kernel_list_add(l, mgt_ring_attention_backward_dkv_kernel<floatX, NC>);
}
template <class floatX> void mgt_cuda_ring_attention_kernels(mgt_kernel_list &l) {
    mgt_kernel_list_add(l, mgt_ring_attention_dot_kernel<floatX>);
    mgt_ring_kernels_nc<floatX, 1>(l); /* every head size MGT_ATTN_BY_HS picks */
    mgt_ring_kernels_nc<floatX, 2>(l);
    mgt_ring_kernels_nc<floatX, 3>(l);
    mgt_ring_kernels_nc<floatX, 4>(l);
}

#define MGT_INSTANTIATE(floatX)                                                                                                                  \
    template int mgt_cuda_attention_part_forward<floatX>(float *, float *, const floatX *, const floatX *, int, int, int, int, int, int, int, int,  \
                                                         cudaStream_t);                                                                          \
    template int mgt_cuda_attention_part_backward<floatX>(float *, float *, float *, const floatX *, const floatX *, const float *, const floatX *, \
                                                          const floatX *, int, int, int, int, int, int, int, cudaStream_t);                      \
    template void mgt_cuda_ring_attention_kernels<floatX>(mgt_kernel_list &);
MGT_FOR_EACH_FLOATX(MGT_INSTANTIATE)
