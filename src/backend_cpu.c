/* src/backend_cpu.c - the CPU backend: the ops as plain loops over the pool's threads, GEMMs
   through src/blas.c, bf16/fp16 storage */
/* ---- the backend table ------------------------------------------------------------------------ */

static void mgt__account(mgt_backend *be, long long bytes, int category) {
    be->mem_current[category] = (size_t)((long long)be->mem_current[category] + bytes);
    if (be->mem_current[category] > be->mem_peak[category]) be->mem_peak[category] = be->mem_current[category];
}

MGTDEF const char *mgt_mem_category_name(int category) {
    static const char *names[MGT_MEM_COUNT] = {"params", "grads", "optimizer", "activations", "buffers", "workspace"};
    return category >= 0 && category < MGT_MEM_COUNT ? names[category] : "?";
}

/* ---- the CPU backend: CBLAS for GEMMs, plain loops that the compiler vectorises --------------- */

typedef struct mgt__cpu {
    mgt__pool pool;
    float *scratch;      /* per-thread attention scratch, T*T floats each */
    size_t scratch_per_thread;
    float *wide;         /* 16-bit storage: fp32 copies of one op's operands (see mgt__widen_floats) */
    size_t wide_floats, wide_used;
    const mgt_onednn_api *onednn; /* bf16 storage: GEMMs on the bf16 tensors themselves (NULL: widened to sgemm) */
} mgt__cpu;

#define MGT__POOL(be) (&((mgt__cpu *)(be)->impl)->pool)

/* Argument bundle of a parallel region; each task reads the fields it documents. */
typedef struct mgt__args {
    float *out[3];
    const float *in[6];
    const int *ints;
    double *dout;
    int n[6];
    size_t count;
    float f[8];
    int flags[2];
    mgt_backend *be;
    void *copy; /* adamw: the parameters' 16-bit compute copy (n[0] its dtype), or NULL */
} mgt__args;

/* exp(x) for x <= 88: 2^k * e^r with |r| <= ln2/2 and a degree-7 Taylor polynomial (relative error
   below 2e-8 before rounding). Branch-free and without libm calls, so that loops calling it
   vectorise (libm's expf and floorf would not, short of -ffast-math). */
static float mgt__expf(float x) {
    float k, r, p, scale, c;
    int32_t bits;
    c = x >= -87.0f ? x : -87.0f; /* a NaN becomes -87 here, so the int conversion below is defined... */
    c = c <= 88.0f ? c : 88.0f;
    k = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest: 1.5 * 2^23 trick */
    r = c - k * 0.693145751953125f - k * 1.428606765330187e-06f;
    p = 1.0f + r * (1.0f + r * (0.5f + r * (1.6666667e-1f + r * (4.1666668e-2f + r * (8.3333338e-3f + r * (1.3888889e-3f + r * 1.9841270e-4f))))));
    bits = (int32_t)((uint32_t)((int32_t)k + 127) << 23);
    memcpy(&scale, &bits, sizeof scale);
    return x == x ? p * scale : x; /* ...and comes back as the NaN it was */
}
static float mgt__tanhf(float x) { return 1.0f - 2.0f / (mgt__expf(2.0f * x) + 1.0f); }

/* C = alpha op(A) op(B) + beta C (+ bias on each row), split over the backend's pool */
static void mgt__gemm(mgt_backend *be, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                      const float *Bm, int ldb, float beta, float *Cm, int ldc, const float *bias) {
    mgt__gemm_args g;
    g.ta = ta; g.tb = tb; g.M = M; g.N = N; g.K = K; g.lda = lda; g.ldb = ldb; g.ldc = ldc;
    g.alpha = alpha; g.beta = bias ? 1.0f : beta; g.A = A; g.B = Bm; g.C = Cm; g.bias = bias;
    mgt__pool_run(MGT__POOL(be), mgt__gemm_task, &g);
}

/* tensors start on a cache line: MGT_MALLOC's block, 64 bytes more, and the block's address kept
   just below the aligned one (for MGT_FREE) */
static void *mgt__cpu_alloc(mgt_backend *be, size_t bytes, int category) {
    size_t rounded = (bytes + 63) & ~(size_t)63;
    char *raw, *p;
    if (bytes > (size_t)-1 - 64 - 2 * sizeof(void *)) return NULL;
    raw = (char *)MGT_MALLOC((rounded ? rounded : 64) + 64 + sizeof(void *));
    if (!raw) return NULL;
    p = (char *)(((uintptr_t)raw + sizeof(void *) + 63) & ~(uintptr_t)63);
    memcpy(p - sizeof(void *), &raw, sizeof raw);
    memset(p, 0, rounded);
    mgt__account(be, (long long)bytes, category);
    return p;
}
static void mgt__cpu_free(mgt_backend *be, void *ptr, size_t bytes, int category) {
    void *raw;
    if (!ptr) return;
    memcpy(&raw, (char *)ptr - sizeof(void *), sizeof raw);
    MGT_FREE(raw);
    mgt__account(be, -(long long)bytes, category);
}
static void mgt__cpu_copy(mgt_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    if (bytes) memcpy(dst, src, bytes);
}

/* encoder: out (B,T,C) = wte[token - vocab_start] (tokens of this vocabulary slice) + wpe[t] */
static void mgt__encoder_fwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int T = a->n[1], C = a->n[2], v0 = a->n[3], rows = a->n[4], c;
    size_t lo, hi, r;
    mgt__span((size_t)a->n[0] * (size_t)T, tid, nth, 1, &lo, &hi);
    for (r = lo; r < hi; r++) {
        int v = a->ints[r] - v0;
        const float *e = v >= 0 && v < rows ? a->in[0] + (size_t)v * (size_t)C : NULL, *p = a->in[1] ? a->in[1] + (r % (size_t)T) * (size_t)C : NULL;
        float *o = a->out[0] + r * (size_t)C;
        for (c = 0; c < C; c++) o[c] = (e ? e[c] : 0.0f) + (p ? p[c] : 0.0f);
    }
}
static void mgt__cpu_encoder_forward(mgt_backend *be, float *out, const int *tokens, const float *wte, int vocab_start, int vocab_rows,
                                     const float *wpe, int B, int T, int C) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = out; a.in[0] = wte; a.in[1] = wpe; a.ints = tokens; a.n[0] = B; a.n[1] = T; a.n[2] = C; a.n[3] = vocab_start; a.n[4] = vocab_rows;
    mgt__pool_run(MGT__POOL(be), mgt__encoder_fwd_task, &a);
}
/* split by channels, so no two threads touch one gradient element and the sum order is fixed */
static void mgt__encoder_bwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int B = a->n[0], T = a->n[1], C = a->n[2], v0 = a->n[3], rows = a->n[4], b, t;
    size_t lo, hi, c;
    mgt__span((size_t)C, tid, nth, 16, &lo, &hi);
    for (b = 0; b < B; b++)
        for (t = 0; t < T; t++) {
            const float *d = a->in[0] + ((size_t)b * (size_t)T + (size_t)t) * (size_t)C;
            int v = a->ints[b * T + t] - v0;
            if (v >= 0 && v < rows) {
                float *dw = a->out[0] + (size_t)v * (size_t)C;
                for (c = lo; c < hi; c++) dw[c] += d[c];
            }
            if (a->out[1]) {
                float *dp = a->out[1] + (size_t)t * (size_t)C;
                for (c = lo; c < hi; c++) dp[c] += d[c];
            }
        }
}
static void mgt__cpu_encoder_backward(mgt_backend *be, float *dwte, float *dwpe, const float *dout, const int *tokens, int vocab_start,
                                      int vocab_rows, int B, int T, int C) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = dwte; a.out[1] = dwpe; a.in[0] = dout; a.ints = tokens; a.n[0] = B; a.n[1] = T; a.n[2] = C; a.n[3] = vocab_start; a.n[4] = vocab_rows;
    mgt__pool_run(MGT__POOL(be), mgt__encoder_bwd_task, &a);
}

/* sum of n floats in 8 independent lanes (vectorises without -ffast-math), then in a fixed order */
static float mgt__sum8(const float *x, int n) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, s = 0;
    int i, j;
    for (i = 0; i + 8 <= n; i += 8)
        for (j = 0; j < 8; j++) acc[j] += x[i + j];
    for (; i < n; i++) s += x[i];
    for (j = 0; j < 8; j++) s += acc[j];
    return s;
}
/* the largest of n floats in 16 independent lanes: a maximum does not depend on the order, so this
   is the scalar loop's result without its chain of dependent compares */
static float mgt__max16(const float *x, int n) {
    float acc[16], m = -INFINITY;
    int i, j;
    for (j = 0; j < 16; j++) acc[j] = -INFINITY;
    for (i = 0; i + 16 <= n; i += 16)
        for (j = 0; j < 16; j++) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    for (j = 0; j < 16; j++) m = acc[j] > m ? acc[j] : m;
    return m;
}

/* layernorm: out (N,C) = (inp - mean) * rstd * weight + bias, with eps 1e-5 */
static void mgt__ln_fwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int C = a->n[1], c, j;
    size_t lo, hi, r;
    mgt__span((size_t)a->n[0], tid, nth, 1, &lo, &hi);
    for (r = lo; r < hi; r++) {
        const float *x = a->in[0] + r * (size_t)C;
        float *o = a->out[0] + r * (size_t)C, m, v = 0, s, acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        m = mgt__sum8(x, C) / (float)C;
        for (c = 0; c + 8 <= C; c += 8)
            for (j = 0; j < 8; j++) acc[j] += (x[c + j] - m) * (x[c + j] - m);
        for (; c < C; c++) v += (x[c] - m) * (x[c] - m);
        for (j = 0; j < 8; j++) v += acc[j];
        v /= (float)C;
        s = 1.0f / sqrtf(v + 1e-5f);
        for (c = 0; c < C; c++) o[c] = (x[c] - m) * s * a->in[1][c] + a->in[2][c];
        a->out[1][r] = m;
        a->out[2][r] = s;
    }
}
static void mgt__cpu_layernorm_forward(mgt_backend *be, float *out, float *mean, float *rstd, const float *inp, const float *weight, const float *bias, int N, int C) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = out; a.out[1] = mean; a.out[2] = rstd; a.in[0] = inp; a.in[1] = weight; a.in[2] = bias; a.n[0] = N; a.n[1] = C;
    mgt__pool_run(MGT__POOL(be), mgt__ln_fwd_task, &a);
}
/* pass 1 over rows: dinp += rstd * (g - mean(g) - xhat * mean(g * xhat)), g = weight * dout */
static void mgt__ln_bwd_rows_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int C = a->n[1], c, j;
    size_t lo, hi, r;
    mgt__span((size_t)a->n[0], tid, nth, 1, &lo, &hi);
    for (r = lo; r < hi; r++) {
        const float *d = a->in[0] + r * (size_t)C, *x = a->in[1] + r * (size_t)C, *w = a->in[2];
        float m = a->in[3][r], rs = a->in[4][r], mg = 0, mgx = 0, *di = a->out[0] + r * (size_t)C;
        float ag[8] = {0, 0, 0, 0, 0, 0, 0, 0}, agx[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (c = 0; c + 8 <= C; c += 8)
            for (j = 0; j < 8; j++) {
                float g = w[c + j] * d[c + j];
                ag[j] += g;
                agx[j] += g * (x[c + j] - m) * rs;
            }
        for (; c < C; c++) { float g = w[c] * d[c]; mg += g; mgx += g * (x[c] - m) * rs; }
        for (j = 0; j < 8; j++) { mg += ag[j]; mgx += agx[j]; }
        mg /= (float)C;
        mgx /= (float)C;
        for (c = 0; c < C; c++) di[c] += rs * (w[c] * d[c] - mg - (x[c] - m) * rs * mgx);
    }
}
/* pass 2 over channels: dweight += sum dout*xhat, dbias += sum dout (fixed row order) */
static void mgt__ln_bwd_params_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int N = a->n[0], C = a->n[1];
    size_t lo, hi, c;
    int r;
    mgt__span((size_t)C, tid, nth, 16, &lo, &hi);
    for (r = 0; r < N; r++) {
        const float *d = a->in[0] + (size_t)r * (size_t)C, *x = a->in[1] + (size_t)r * (size_t)C;
        float m = a->in[3][r], rs = a->in[4][r];
        for (c = lo; c < hi; c++) { a->out[1][c] += d[c] * (x[c] - m) * rs; a->out[2][c] += d[c]; }
    }
}
static void mgt__cpu_layernorm_backward(mgt_backend *be, float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                                        const float *weight, const float *mean, const float *rstd, int N, int C) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = dinp; a.out[1] = dweight; a.out[2] = dbias;
    a.in[0] = dout; a.in[1] = inp; a.in[2] = weight; a.in[3] = mean; a.in[4] = rstd; a.n[0] = N; a.n[1] = C;
    mgt__pool_run(MGT__POOL(be), mgt__ln_bwd_rows_task, &a);
    mgt__pool_run(MGT__POOL(be), mgt__ln_bwd_params_task, &a);
}

/* matmul: out (N,OC) = inp (N,C) @ weight (OC,C)^T + bias (OC) */
static void mgt__cpu_matmul_forward(mgt_backend *be, float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC) {
    mgt__gemm(be, 0, 1, N, OC, C, 1.0f, inp, C, weight, C, 0.0f, out, OC, bias);
}
/* dbias (OC) += column sums of dout (N,OC), fp32 or (n[2]) bf16, split by columns for a fixed
   summation order */
static void mgt__bias_bwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int N = a->n[0], OC = a->n[1], r;
    size_t lo, hi, o;
    mgt__span((size_t)OC, tid, nth, 16, &lo, &hi);
    for (r = 0; r < N; r++) {
        if (a->n[2] == MGT_BF16) {
            const uint16_t *d = (const uint16_t *)(const void *)a->in[0] + (size_t)r * (size_t)OC;
            for (o = lo; o < hi; o++) a->out[0][o] += mgt__bf16_to_f32(d[o]);
        } else {
            const float *d = a->in[0] + (size_t)r * (size_t)OC;
            for (o = lo; o < hi; o++) a->out[0][o] += d[o];
        }
    }
}
static void mgt__cpu_matmul_backward(mgt_backend *be, float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                                     const float *weight, int N, int C, int OC) {
    if (dinp) mgt__gemm(be, 0, 0, N, C, OC, 1.0f, dout, OC, weight, C, 0.0f, dinp, C, NULL);   /* dinp = dout @ W */
    if (dweight) mgt__gemm(be, 1, 0, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C, NULL); /* dW += dout^T @ inp */
    if (dweight && dbias) {
        mgt__args a;
        memset(&a, 0, sizeof a);
        a.out[0] = dbias; a.in[0] = dout; a.n[0] = N; a.n[1] = OC;
        mgt__pool_run(MGT__POOL(be), mgt__bias_bwd_task, &a);
    }
}

/* out (N,C) += residual + bias: the bias of a row-parallel layer, added once after the reduction */
static void mgt__bias_residual_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int C = a->n[1], c;
    size_t lo, hi, r;
    mgt__span((size_t)a->n[0], tid, nth, 1, &lo, &hi);
    for (r = lo; r < hi; r++) {
        float *o = a->out[0] + r * (size_t)C;
        const float *x = a->in[0] + r * (size_t)C;
        if (a->in[1])
            for (c = 0; c < C; c++) o[c] += x[c] + a->in[1][c];
        else
            for (c = 0; c < C; c++) o[c] += x[c];
    }
}
static void mgt__cpu_bias_residual(mgt_backend *be, float *out, const float *residual, const float *bias, int N, int C) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = out; a.in[0] = residual; a.in[1] = bias; a.n[0] = N; a.n[1] = C;
    mgt__pool_run(MGT__POOL(be), mgt__bias_residual_task, &a);
}
static void mgt__cpu_bias_backward(mgt_backend *be, float *dbias, const float *dout, int N, int C) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = dbias; a.in[0] = dout; a.n[0] = N; a.n[1] = C;
    mgt__pool_run(MGT__POOL(be), mgt__bias_bwd_task, &a);
}

/* causal self-attention per (batch, key/value head), on qkv (B,T,W) laid out [q | k | v], W = (NH + 2 NKV) hs:
   query head h on channels h*hs.. of q, its key/value head h / (NH / NKV) on the same channels of k
   and v. att (B,NH,T,T) keeps the softmax probabilities for backward. The query heads that share a
   key/value head run in one task, so their dK and dV add up without a race, in head order. */
static void mgt__attn_fwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int B = a->n[0], T = a->n[1], C = a->n[2], NH = a->n[3], NKV = a->n[4], hs = C / NH, group = NH / NKV, W = C + 2 * NKV * hs, t, j, g;
    float scale = 1.0f / sqrtf((float)hs);
    size_t lo, hi, bk;
    mgt__span((size_t)B * (size_t)NKV, tid, nth, 1, &lo, &hi);
    for (bk = lo; bk < hi; bk++)
        for (g = 0; g < group; g++) {
            size_t b = bk / (size_t)NKV, kvh = bk % (size_t)NKV, h = kvh * (size_t)group + (size_t)g, bh = b * (size_t)NH + h;
            const float *row = a->in[0] + b * (size_t)T * (size_t)W, *q = row + h * (size_t)hs, *k = row + C + kvh * (size_t)hs, *v = k + NKV * hs;
            float *att = a->out[1] + bh * (size_t)T * (size_t)T, *out = a->out[0] + b * (size_t)T * (size_t)C + h * (size_t)hs;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, W, k, W, 0.0f, att, T);
            for (t = 0; t < T; t++) {
                float *p = att + (size_t)t * (size_t)T, mx = p[0], sum = 0, inv;
                for (j = 1; j <= t; j++) mx = p[j] > mx ? p[j] : mx;
                for (j = 0; j <= t; j++) p[j] = mgt__expf(p[j] - mx);
                sum = mgt__sum8(p, t + 1);
                inv = 1.0f / sum;
                for (j = 0; j <= t; j++) p[j] *= inv;
                for (j = t + 1; j < T; j++) p[j] = 0.0f;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, att, T, v, W, 0.0f, out, C);
        }
}
static void mgt__cpu_attention_forward(mgt_backend *be, float *out, float *att, const float *qkv, int B, int T, int C, int NH, int NKV) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = out; a.out[1] = att; a.in[0] = qkv; a.n[0] = B; a.n[1] = T; a.n[2] = C; a.n[3] = NH; a.n[4] = NKV;
    mgt__pool_run(MGT__POOL(be), mgt__attn_fwd_task, &a);
}
static void mgt__attn_bwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    const mgt__cpu *cpu = (const mgt__cpu *)a->be->impl;
    int B = a->n[0], T = a->n[1], C = a->n[2], NH = a->n[3], NKV = a->n[4], hs = C / NH, group = NH / NKV, W = C + 2 * NKV * hs, t, j, g;
    float scale = 1.0f / sqrtf((float)hs), *dp = cpu->scratch + (size_t)tid * cpu->scratch_per_thread;
    size_t lo, hi, bk;
    mgt__span((size_t)B * (size_t)NKV, tid, nth, 1, &lo, &hi);
    for (bk = lo; bk < hi; bk++)
        for (g = 0; g < group; g++) {
            size_t b = bk / (size_t)NKV, kvh = bk % (size_t)NKV, h = kvh * (size_t)group + (size_t)g, bh = b * (size_t)NH + h;
            size_t row = b * (size_t)T * (size_t)W, qoff = row + h * (size_t)hs, koff = row + (size_t)C + kvh * (size_t)hs;
            const float *q = a->in[1] + qoff, *k = a->in[1] + koff, *v = k + NKV * hs;
            const float *att = a->in[2] + bh * (size_t)T * (size_t)T, *dout = a->in[0] + b * (size_t)T * (size_t)C + h * (size_t)hs;
            float *dq = a->out[0] + qoff, *dk = a->out[0] + koff, *dv = dk + NKV * hs, first = g == 0 ? 0.0f : 1.0f; /* the group's first head writes dK, dV */
            /* dP = dY V^T, dV = P^T dY */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dout, C, v, W, 0.0f, dp, T);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, att, T, dout, C, first, dv, W);
            /* dS = P * (dP - rowsum(P * dP)), zero above the diagonal */
            for (t = 0; t < T; t++) {
                const float *p = att + (size_t)t * (size_t)T;
                float *d = dp + (size_t)t * (size_t)T, dot = 0, acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                int n = t + 1;
                for (j = 0; j + 8 <= n; j += 8) {
                    int l;
                    for (l = 0; l < 8; l++) acc[l] += p[j + l] * d[j + l];
                }
                for (; j < n; j++) dot += p[j] * d[j];
                for (j = 0; j < 8; j++) dot += acc[j];
                for (j = 0; j < n; j++) d[j] = p[j] * (d[j] - dot);
                for (j = n; j < T; j++) d[j] = 0.0f;
            }
            /* dQ = scale * dS K, dK = scale * dS^T Q */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, dp, T, k, W, 0.0f, dq, W);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, dp, T, q, W, first, dk, W);
        }
}
static void mgt__cpu_attention_backward(mgt_backend *be, float *dqkv, const float *dout, const float *qkv, const float *att, int B, int T, int C, int NH,
                                        int NKV) {
    mgt__args a;
    if ((size_t)T * (size_t)T > ((mgt__cpu *)be->impl)->scratch_per_thread) abort(); /* sized from seq_len at creation */
    memset(&a, 0, sizeof a);
    a.out[0] = dqkv; a.in[0] = dout; a.in[1] = qkv; a.in[2] = att; a.n[0] = B; a.n[1] = T; a.n[2] = C; a.n[3] = NH; a.n[4] = NKV; a.be = be;
    mgt__pool_run(MGT__POOL(be), mgt__attn_bwd_task, &a);
}

/* one block of ring attention (context parallelism; see mgt_backend.attention_part_forward): per
   (batch, key/value head) as above, the block's scores in the thread's scratch. The forward merges
   the block into the running output by rescaling: with m the new log-sum-exp of a row, the old
   output is weighted exp(lse_old - m) and the block's probabilities exp(s - m), which is what one
   softmax over all the keys so far gives. The backward is flash attention's: P = exp(s - lse) from
   the merged lse, D = rowsum(dout * out), dS = P (dP - D). */
static void mgt__attn_part_fwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    const mgt__cpu *cpu = (const mgt__cpu *)a->be->impl;
    int B = a->n[0], T = a->n[1], C = a->n[2], NH = a->n[3], NKV = a->n[4], ks = a->n[5], causal = a->flags[0], first = a->flags[1];
    int hs = C / NH, group = NH / NKV, W = C + 2 * NKV * hs, t, j, g, c;
    float scale = 1.0f / sqrtf((float)hs), *sc = cpu->scratch + (size_t)tid * cpu->scratch_per_thread;
    size_t lo, hi, bk;
    mgt__span((size_t)B * (size_t)NKV, tid, nth, 1, &lo, &hi);
    for (bk = lo; bk < hi; bk++)
        for (g = 0; g < group; g++) {
            size_t b = bk / (size_t)NKV, kvh = bk % (size_t)NKV, h = kvh * (size_t)group + (size_t)g;
            const float *q = a->in[0] + b * (size_t)T * (size_t)W + h * (size_t)hs, *k = a->in[1] + b * (size_t)T * (size_t)ks + kvh * (size_t)hs;
            const float *v = k + NKV * hs;
            float *o = a->out[0] + b * (size_t)T * (size_t)C + h * (size_t)hs, *lse = a->out[1] + (b * (size_t)NH + h) * (size_t)T;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, W, k, ks, 0.0f, sc, T);
            for (t = 0; t < T; t++) {
                float *p = sc + (size_t)t * (size_t)T, mx = p[0], sum, part, m, keep;
                int n = causal ? t + 1 : T;
                for (j = 1; j < n; j++) mx = p[j] > mx ? p[j] : mx;
                for (j = 0; j < n; j++) p[j] = mgt__expf(p[j] - mx);
                for (j = n; j < T; j++) p[j] = 0.0f;
                sum = mgt__sum8(p, n);
                part = mx + logf(sum);
                if (first) { m = part; keep = 0.0f; }
                else {
                    float hi2 = lse[t] > part ? lse[t] : part;
                    m = hi2 + logf(expf(lse[t] - hi2) + expf(part - hi2));
                    keep = expf(lse[t] - m);
                }
                for (j = 0; j < n; j++) p[j] *= expf(mx - m); /* exp(s - m) */
                if (!first)
                    for (c = 0; c < hs; c++) o[(size_t)t * (size_t)C + (size_t)c] *= keep;
                lse[t] = m;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, sc, T, v, ks, first ? 0.0f : 1.0f, o, C);
        }
}
static void mgt__cpu_attention_part_forward(mgt_backend *be, float *o, float *lse, const float *qkv, const float *kv, int kv_stride, int B, int T, int C,
                                            int NH, int NKV, int causal, int first) {
    mgt__args a;
    if ((size_t)T * (size_t)T > ((mgt__cpu *)be->impl)->scratch_per_thread) abort(); /* sized from the chunk at creation */
    memset(&a, 0, sizeof a);
    a.out[0] = o; a.out[1] = lse; a.in[0] = qkv; a.in[1] = kv; a.n[0] = B; a.n[1] = T; a.n[2] = C; a.n[3] = NH; a.n[4] = NKV; a.n[5] = kv_stride;
    a.flags[0] = causal; a.flags[1] = first; a.be = be;
    mgt__pool_run(MGT__POOL(be), mgt__attn_part_fwd_task, &a);
}
static void mgt__attn_part_bwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    const mgt__cpu *cpu = (const mgt__cpu *)a->be->impl;
    int B = a->n[0], T = a->n[1], C = a->n[2], NH = a->n[3], NKV = a->n[4], ks = a->n[5], causal = a->flags[0];
    int hs = C / NH, group = NH / NKV, W = C + 2 * NKV * hs, KV2 = 2 * NKV * hs, t, j, g, c;
    float scale = 1.0f / sqrtf((float)hs), *P = cpu->scratch + (size_t)tid * cpu->scratch_per_thread, *dP = P + (size_t)T * (size_t)T;
    size_t lo, hi, bk;
    mgt__span((size_t)B * (size_t)NKV, tid, nth, 1, &lo, &hi);
    for (bk = lo; bk < hi; bk++)
        for (g = 0; g < group; g++) {
            size_t b = bk / (size_t)NKV, kvh = bk % (size_t)NKV, h = kvh * (size_t)group + (size_t)g;
            const float *q = a->in[3] + b * (size_t)T * (size_t)W + h * (size_t)hs, *k = a->in[4] + b * (size_t)T * (size_t)ks + kvh * (size_t)hs;
            const float *v = k + NKV * hs, *lse = a->in[2] + (b * (size_t)NH + h) * (size_t)T;
            const float *dout = a->in[0] + b * (size_t)T * (size_t)C + h * (size_t)hs, *out = a->in[1] + b * (size_t)T * (size_t)C + h * (size_t)hs;
            float *dq = a->out[0] + b * (size_t)T * (size_t)C + h * (size_t)hs, *dk = a->out[1] + b * (size_t)T * (size_t)KV2 + kvh * (size_t)hs;
            float *dv = dk + NKV * hs;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, W, k, ks, 0.0f, P, T);
            for (t = 0; t < T; t++) {
                float *p = P + (size_t)t * (size_t)T;
                int n = causal ? t + 1 : T;
                for (j = 0; j < n; j++) p[j] = mgt__expf(p[j] - lse[t]);
                for (j = n; j < T; j++) p[j] = 0.0f;
            }
            /* dP = dY V^T, dV += P^T dY */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dout, C, v, ks, 0.0f, dP, T);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, P, T, dout, C, 1.0f, dv, KV2);
            for (t = 0; t < T; t++) {
                const float *p = P + (size_t)t * (size_t)T, *dy = dout + (size_t)t * (size_t)C, *y = out + (size_t)t * (size_t)C;
                float *d = dP + (size_t)t * (size_t)T, D = 0;
                for (c = 0; c < hs; c++) D += dy[c] * y[c];
                for (j = 0; j < T; j++) d[j] = p[j] * (d[j] - D);
            }
            /* dQ += scale dS K, dK += scale dS^T Q */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, dP, T, k, ks, 1.0f, dq, C);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, dP, T, q, W, 1.0f, dk, KV2);
        }
}
static void mgt__cpu_attention_part_backward(mgt_backend *be, float *dq, float *dkv, const float *dout, const float *out, const float *lse,
                                             const float *qkv, const float *kv, int kv_stride, int B, int T, int C, int NH, int NKV, int causal) {
    mgt__args a;
    if (2 * (size_t)T * (size_t)T > ((mgt__cpu *)be->impl)->scratch_per_thread) abort(); /* sized from the chunk at creation */
    memset(&a, 0, sizeof a);
    a.out[0] = dq; a.out[1] = dkv; a.in[0] = dout; a.in[1] = out; a.in[2] = lse; a.in[3] = qkv; a.in[4] = kv;
    a.n[0] = B; a.n[1] = T; a.n[2] = C; a.n[3] = NH; a.n[4] = NKV; a.n[5] = kv_stride; a.flags[0] = causal; a.be = be;
    mgt__pool_run(MGT__POOL(be), mgt__attn_part_bwd_task, &a);
}

/* GELU, tanh approximation (GPT-2) */
#define MGT__GELU_S 0.7978845608028654f /* sqrt(2/pi) */
static void mgt__gelu_fwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    size_t lo, hi, i;
    mgt__span(a->count, tid, nth, 64, &lo, &hi);
    for (i = lo; i < hi; i++) {
        float x = a->in[0][i];
        a->out[0][i] = 0.5f * x * (1.0f + mgt__tanhf(MGT__GELU_S * (x + 0.044715f * x * x * x)));
    }
}
static void mgt__gelu_bwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    size_t lo, hi, i;
    mgt__span(a->count, tid, nth, 64, &lo, &hi);
    for (i = lo; i < hi; i++) {
        float x = a->in[0][i], u = MGT__GELU_S * (x + 0.044715f * x * x * x), th = mgt__tanhf(u);
        float grad = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * MGT__GELU_S * (1.0f + 3.0f * 0.044715f * x * x);
        a->out[0][i] = grad * a->in[1][i];
    }
}
static void mgt__cpu_gelu_forward(mgt_backend *be, float *out, const float *inp, size_t n) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = out; a.in[0] = inp; a.count = n;
    mgt__pool_run(MGT__POOL(be), mgt__gelu_fwd_task, &a);
}
static void mgt__cpu_gelu_backward(mgt_backend *be, float *dinp, const float *inp, const float *dout, size_t n) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = dinp; a.in[0] = inp; a.in[1] = dout; a.count = n;
    mgt__pool_run(MGT__POOL(be), mgt__gelu_bwd_task, &a);
}

/* RMSNorm (Llama): out (N,C) = inp * rstd * weight, rstd = 1 / sqrt(mean(inp^2) + eps); no mean, no bias */
static void mgt__rms_fwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int C = a->n[1], c, j;
    size_t lo, hi, r;
    mgt__span((size_t)a->n[0], tid, nth, 1, &lo, &hi);
    for (r = lo; r < hi; r++) {
        const float *x = a->in[0] + r * (size_t)C;
        float *o = a->out[0] + r * (size_t)C, ss = 0, s, acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (c = 0; c + 8 <= C; c += 8)
            for (j = 0; j < 8; j++) acc[j] += x[c + j] * x[c + j];
        for (; c < C; c++) ss += x[c] * x[c];
        for (j = 0; j < 8; j++) ss += acc[j];
        s = 1.0f / sqrtf(ss / (float)C + a->f[0]);
        for (c = 0; c < C; c++) o[c] = x[c] * s * a->in[1][c];
        a->out[1][r] = s;
    }
}
static void mgt__cpu_rmsnorm_forward(mgt_backend *be, float *out, float *rstd, const float *inp, const float *weight, float eps, int N, int C) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = out; a.out[1] = rstd; a.in[0] = inp; a.in[1] = weight; a.f[0] = eps; a.n[0] = N; a.n[1] = C;
    mgt__pool_run(MGT__POOL(be), mgt__rms_fwd_task, &a);
}
/* pass 1 over rows: dinp += rstd * (g - xhat * mean(g * xhat)), g = weight * dout, xhat = inp * rstd */
static void mgt__rms_bwd_rows_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int C = a->n[1], c, j;
    size_t lo, hi, r;
    mgt__span((size_t)a->n[0], tid, nth, 1, &lo, &hi);
    for (r = lo; r < hi; r++) {
        const float *d = a->in[0] + r * (size_t)C, *x = a->in[1] + r * (size_t)C, *w = a->in[2];
        float rs = a->in[3][r], mgx = 0, *di = a->out[0] + r * (size_t)C, agx[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (c = 0; c + 8 <= C; c += 8)
            for (j = 0; j < 8; j++) agx[j] += w[c + j] * d[c + j] * x[c + j] * rs;
        for (; c < C; c++) mgx += w[c] * d[c] * x[c] * rs;
        for (j = 0; j < 8; j++) mgx += agx[j];
        mgx /= (float)C;
        for (c = 0; c < C; c++) di[c] += rs * (w[c] * d[c] - x[c] * rs * mgx);
    }
}
/* pass 2 over channels: dweight += sum dout * xhat (fixed row order) */
static void mgt__rms_bwd_params_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int N = a->n[0], C = a->n[1], r;
    size_t lo, hi, c;
    mgt__span((size_t)C, tid, nth, 16, &lo, &hi);
    for (r = 0; r < N; r++) {
        const float *d = a->in[0] + (size_t)r * (size_t)C, *x = a->in[1] + (size_t)r * (size_t)C;
        float rs = a->in[3][r];
        for (c = lo; c < hi; c++) a->out[1][c] += d[c] * x[c] * rs;
    }
}
static void mgt__cpu_rmsnorm_backward(mgt_backend *be, float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                                      const float *rstd, int N, int C) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = dinp; a.out[1] = dweight; a.in[0] = dout; a.in[1] = inp; a.in[2] = weight; a.in[3] = rstd; a.n[0] = N; a.n[1] = C;
    mgt__pool_run(MGT__POOL(be), mgt__rms_bwd_rows_task, &a);
    mgt__pool_run(MGT__POOL(be), mgt__rms_bwd_params_task, &a);
}

/* RoPE (Llama), in place on the q and k heads of each row of qkv (B,T,(NH + 2 NKV) hs): the pair
   (i, i + hs/2) of a head at position t turns by t x theta^(-2i/hs), computed in fp32 as Hugging
   Face computes its cos/sin tables. `sign` -1 turns back: the backward of a rotation is its inverse. */
static void mgt__rope_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int T = a->n[1], NH = a->n[2], NKV = a->n[3], hs = a->n[4], half = hs / 2, W = (NH + 2 * NKV) * hs, i, h;
    float theta = a->f[0], sign = a->f[1];
    size_t lo, hi, r;
    mgt__span((size_t)a->n[0] * (size_t)T, tid, nth, 1, &lo, &hi);
    for (r = lo; r < hi; r++) {
        float *row = a->out[0] + r * (size_t)W, pos = (float)(a->n[5] + (int)(r % (size_t)T));
        for (i = 0; i < half; i++) {
            float angle = pos * (1.0f / powf(theta, (float)(2 * i) / (float)hs)), c = cosf(angle), sn = sign * sinf(angle);
            for (h = 0; h < NH + NKV; h++) { /* the q heads, then the k heads right after them */
                float *x = row + (size_t)h * (size_t)hs, x0 = x[i], x1 = x[half + i];
                x[i] = x0 * c - x1 * sn;
                x[half + i] = x1 * c + x0 * sn;
            }
        }
    }
}
static void mgt__cpu_rope(mgt_backend *be, float *qkv, int B, int T, int NH, int NKV, int hs, float theta, float sign, int pos0) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = qkv; a.n[0] = B; a.n[1] = T; a.n[2] = NH; a.n[3] = NKV; a.n[4] = hs; a.n[5] = pos0; a.f[0] = theta; a.f[1] = sign;
    mgt__pool_run(MGT__POOL(be), mgt__rope_task, &a);
}
/* SwiGLU (Llama): out (N,H) = silu(gate) * up with gate = inp[:, :H], up = inp[:, H:], silu(g) = g sigmoid(g) */
static void mgt__swiglu_fwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int H = a->n[1], c;
    size_t lo, hi, r;
    mgt__span((size_t)a->n[0], tid, nth, 1, &lo, &hi);
    for (r = lo; r < hi; r++) {
        const float *g = a->in[0] + r * 2 * (size_t)H, *u = g + H;
        float *o = a->out[0] + r * (size_t)H;
        for (c = 0; c < H; c++) o[c] = g[c] / (1.0f + mgt__expf(-g[c])) * u[c];
    }
}
static void mgt__swiglu_bwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int H = a->n[1], c;
    size_t lo, hi, r;
    mgt__span((size_t)a->n[0], tid, nth, 1, &lo, &hi);
    for (r = lo; r < hi; r++) {
        const float *g = a->in[0] + r * 2 * (size_t)H, *u = g + H, *d = a->in[1] + r * (size_t)H;
        float *dg = a->out[0] + r * 2 * (size_t)H, *du = dg + H;
        for (c = 0; c < H; c++) {
            float sig = 1.0f / (1.0f + mgt__expf(-g[c])), gd = d[c];
            du[c] = gd * g[c] * sig;
            dg[c] = gd * u[c] * sig * (1.0f + g[c] * (1.0f - sig));
        }
    }
}
static void mgt__cpu_swiglu_forward(mgt_backend *be, float *out, const float *inp, int N, int H) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = out; a.in[0] = inp; a.n[0] = N; a.n[1] = H;
    mgt__pool_run(MGT__POOL(be), mgt__swiglu_fwd_task, &a);
}
static void mgt__cpu_swiglu_backward(mgt_backend *be, float *dinp, const float *inp, const float *dout, int N, int H) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = dinp; a.in[0] = inp; a.in[1] = dout; a.n[0] = N; a.n[1] = H;
    mgt__pool_run(MGT__POOL(be), mgt__swiglu_bwd_task, &a);
}

static void mgt__add_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    size_t lo, hi, i;
    mgt__span(a->count, tid, nth, 64, &lo, &hi);
    for (i = lo; i < hi; i++) a->out[0][i] += a->in[0][i];
}
static void mgt__cpu_add_inplace(mgt_backend *be, float *y, const float *x, size_t n) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = y; a.in[0] = x; a.count = n;
    mgt__pool_run(MGT__POOL(be), mgt__add_task, &a);
}
static void mgt__scale_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    size_t lo, hi, i;
    mgt__span(a->count, tid, nth, 64, &lo, &hi);
    for (i = lo; i < hi; i++) a->out[0][i] *= a->f[0];
}
static void mgt__zero_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    size_t lo, hi;
    mgt__span(a->count, tid, nth, 4096, &lo, &hi);
    if (hi > lo) memset((char *)a->out[0] + lo, 0, hi - lo);
}
static void mgt__cpu_zero(mgt_backend *be, void *x, size_t bytes) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = (float *)x; a.count = bytes;
    mgt__pool_run(MGT__POOL(be), mgt__zero_task, &a);
}
static void mgt__cpu_scale(mgt_backend *be, float *x, float factor, size_t n) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = x; a.f[0] = factor; a.count = n;
    mgt__pool_run(MGT__POOL(be), mgt__scale_task, &a);
}

/* cross-entropy, vocabulary-parallel: each rank has columns [v0, v0 + Vl) of the logits */
/* The classifier's cross-entropy, a row at a time. Logits in 16-bit storage are widened a row at a
   time into the thread's own row of fp32 (row_buf, Vl floats per thread) and the finished
   gradients rounded back from it: one pass over the largest activation, not a widened copy of it
   all (N x V floats) written and read again. */
typedef struct mgt__xent_args {
    void *logits;        /* (N, Vl) in dtype: read by partial, overwritten with gradients by finish */
    int dtype;
    float *row_buf;      /* 16-bit: Vl floats per thread */
    float *part;         /* partial: (N, 3) out; finish: (tp, N, 3) in */
    double *losses;
    const int *targets;
    int N, v0, Vl, V, tp;
    float grad_scale;
} mgt__xent_args;
static void mgt__convert(void *dst, int dd, const void *src, int sd, size_t lo, size_t hi);
static size_t mgt__dtype_size(int dtype);
static float *mgt__wide_take(mgt_backend *be, size_t n);
/* row r of the logits as fp32: in place for fp32, else widened into this thread's row */
static float *mgt__xent_row(const mgt__xent_args *a, int tid, size_t r) {
    float *row;
    if (a->dtype == MGT_F32) return (float *)a->logits + r * (size_t)a->Vl;
    row = a->row_buf + (size_t)tid * (size_t)a->Vl;
    mgt__convert(row, MGT_F32, (const char *)a->logits + r * (size_t)a->Vl * mgt__dtype_size(a->dtype), a->dtype, 0, (size_t)a->Vl);
    return row;
}
static int mgt__xent_valid(const mgt__xent_args *a) { return a->V - a->v0 < a->Vl ? (a->V - a->v0 > 0 ? a->V - a->v0 : 0) : a->Vl; }
/* An fp32 rank that holds the whole vocabulary keeps partial's exp(logit - max) in the logits and
   finish only scales them: one exponential per logit, not two (6% of a step at V = 50257). The max
   is then the global one, so the gradients are bit for bit those of the two-pass form. */
static int mgt__xent_keeps_exp(const mgt__xent_args *a) { return a->dtype == MGT_F32 && a->v0 == 0 && a->V <= a->Vl; }
static void mgt__xent_partial_task(void *ctx, int tid, int nth) {
    const mgt__xent_args *a = (const mgt__xent_args *)ctx;
    int valid = mgt__xent_valid(a), keep = mgt__xent_keeps_exp(a), i;
    size_t lo, hi, r;
    mgt__span((size_t)a->N, tid, nth, 1, &lo, &hi);
    for (r = lo; r < hi; r++) {
        float *l = mgt__xent_row(a, tid, r), *part = a->part + r * 3, mx, e[256];
        int y = a->targets[r] - a->v0, j, k;
        part[2] = y >= 0 && y < valid ? l[y] : 0.0f;
        part[0] = mx = mgt__max16(l, valid);
        part[1] = 0.0f;
        for (i = 0; i < valid; i += k) { /* the exponentials a block at a time */
            float *ek = keep ? l + i : e;
            k = valid - i < 256 ? valid - i : 256;
            for (j = 0; j < k; j++) ek[j] = mgt__expf(l[i + j] - mx);
            part[1] += mgt__sum8(ek, k);
        }
    }
}
static void mgt__xent_finish_task(void *ctx, int tid, int nth) {
    const mgt__xent_args *a = (const mgt__xent_args *)ctx;
    int N = a->N, valid = mgt__xent_valid(a), keep = mgt__xent_keeps_exp(a), i, k;
    float gs = a->grad_scale;
    size_t lo, hi, r;
    mgt__span((size_t)N, tid, nth, 1, &lo, &hi);
    for (r = lo; r < hi; r++) {
        float *l, M = -INFINITY, scale;
        double S = 0, target = 0;
        int y = a->targets[r] - a->v0;
        for (k = 0; k < a->tp; k++) { const float *p = a->part + ((size_t)k * (size_t)N + r) * 3; if (p[1] > 0 && p[0] > M) M = p[0]; }
        for (k = 0; k < a->tp; k++) { /* in rank order: the same sum on every rank */
            const float *p = a->part + ((size_t)k * (size_t)N + r) * 3;
            if (p[1] > 0) S += (double)p[1] * (double)mgt__expf(p[0] - M);
            target += p[2];
        }
        a->losses[r] = log(S) + (double)M - target;
        if (gs == 0.0f) continue;
        l = mgt__xent_row(a, tid, r);
        scale = (float)(1.0 / S) * gs;
        if (keep) for (i = 0; i < valid; i++) l[i] *= scale; /* M is this rank's max: l holds exp(logit - M) */
        else for (i = 0; i < valid; i++) l[i] = mgt__expf(l[i] - M) * scale;
        if (y >= 0 && y < valid) l[y] -= gs;
        for (i = valid; i < a->Vl; i++) l[i] = 0.0f;
        if (a->dtype != MGT_F32) mgt__convert((char *)a->logits + r * (size_t)a->Vl * mgt__dtype_size(a->dtype), a->dtype, l, MGT_F32, 0, (size_t)a->Vl);
    }
}
static void mgt__xent_run(mgt_backend *be, mgt__task_fn fn, mgt__xent_args *a) {
    mgt__cpu *cpu = (mgt__cpu *)be->impl;
    a->dtype = be->dtype;
    if (be->dtype != MGT_F32) { /* one row per thread, from the op's workspace */
        cpu->wide_used = 0;
        a->row_buf = mgt__wide_take(be, (size_t)(cpu->pool.n < a->N ? cpu->pool.n : a->N) * (size_t)a->Vl); /* threads past N have no row */
    }
    mgt__pool_run(MGT__POOL(be), fn, a);
}
static void mgt__cpu_xent_partial(mgt_backend *be, float *part, void *logits, const int *targets, int N, int vocab_start, int Vl, int V) {
    mgt__xent_args a;
    memset(&a, 0, sizeof a);
    a.logits = logits; a.part = part; a.targets = targets; a.N = N; a.v0 = vocab_start; a.Vl = Vl; a.V = V;
    mgt__xent_run(be, mgt__xent_partial_task, &a);
}
static void mgt__cpu_xent_finish(mgt_backend *be, double *losses, void *logits, const float *parts, int tp, const int *targets, int N,
                                 int vocab_start, int Vl, int V, float grad_scale) {
    mgt__xent_args a;
    memset(&a, 0, sizeof a);
    a.logits = logits; a.part = (float *)parts; a.losses = losses; a.targets = targets;
    a.N = N; a.v0 = vocab_start; a.Vl = Vl; a.V = V; a.tp = tp; a.grad_scale = grad_scale;
    mgt__xent_run(be, mgt__xent_finish_task, &a);
}

/* sum of squares in fixed blocks of 65536, each in double, added in block order: the result does
   not depend on the thread count */
#define MGT__SS_BLOCK 65536
static void mgt__ss_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    size_t nblocks = (a->count + MGT__SS_BLOCK - 1) / MGT__SS_BLOCK, lo, hi, bl;
    mgt__span(nblocks, tid, nth, 1, &lo, &hi);
    for (bl = lo; bl < hi; bl++) {
        size_t i0 = bl * MGT__SS_BLOCK, i1 = i0 + MGT__SS_BLOCK < a->count ? i0 + MGT__SS_BLOCK : a->count, i;
        double s = 0, acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int j;
        for (i = i0; i + 8 <= i1; i += 8)
            for (j = 0; j < 8; j++) acc[j] += (double)a->in[0][i + j] * a->in[0][i + j];
        for (; i < i1; i++) s += (double)a->in[0][i] * a->in[0][i];
        for (j = 0; j < 8; j++) s += acc[j];
        a->dout[bl] = s;
    }
}
static double mgt__cpu_sum_squares(mgt_backend *be, const float *x, size_t n) {
    mgt__args a;
    size_t nblocks = (n + MGT__SS_BLOCK - 1) / MGT__SS_BLOCK, i;
    double total = 0, stack_parts[64], *parts = nblocks <= 64 ? stack_parts : (double *)MGT_MALLOC(sizeof(double) * nblocks);
    if (!parts) return NAN;
    memset(&a, 0, sizeof a);
    a.in[0] = x; a.count = n; a.dout = parts;
    mgt__pool_run(MGT__POOL(be), mgt__ss_task, &a);
    for (i = 0; i < nblocks; i++) total += parts[i];
    if (parts != stack_parts) MGT_FREE(parts);
    return total;
}

/* AdamW, as torch.optim.AdamW: decoupled decay, bias-corrected moments; grad_scale applies clipping */
static void mgt__adamw_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    float lr = a->f[0], b1 = a->f[1], b2 = a->f[2], eps = a->f[3], wd = a->f[4], gs = a->f[5], bc1 = a->f[6], bc2 = a->f[7];
    float *p = a->out[0], *m = a->out[1], *v = a->out[2];
    const float *g = a->in[0];
    float step = lr / bc1, sbc2 = sqrtf(bc2), decay = 1.0f - lr * wd;
    size_t lo, hi, i, b, e;
    mgt__span(a->count, tid, nth, 64, &lo, &hi);
    for (b = lo; b < hi; b = e) { /* blocks of 4096: the compute copy is rounded from them while they are in cache */
        e = hi - b < 4096 ? hi : b + 4096;
        for (i = b; i < e; i++) { /* vectorises only where sqrtf need not set errno (-fno-math-errno): 3x faster at 124M */
            float gi = g[i] * gs, mi = b1 * m[i] + (1.0f - b1) * gi, vi = b2 * v[i] + (1.0f - b2) * gi * gi;
            m[i] = mi;
            v[i] = vi;
            p[i] = p[i] * decay - step * mi / (sqrtf(vi) / sbc2 + eps);
        }
        if (a->copy) mgt__convert(a->copy, a->n[0], p, MGT_F32, b, e);
    }
}
static void mgt__cpu_adamw(mgt_backend *be, float *param, void *param_copy, const float *grad, float *m, float *v, size_t n, float lr, float beta1,
                           float beta2, float eps, float weight_decay, float grad_scale, float bias_correction1, float bias_correction2) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.copy = param_copy; a.n[0] = be->dtype;
    a.out[0] = param; a.out[1] = m; a.out[2] = v; a.in[0] = grad; a.count = n;
    a.f[0] = lr; a.f[1] = beta1; a.f[2] = beta2; a.f[3] = eps; a.f[4] = weight_decay; a.f[5] = grad_scale;
    a.f[6] = bias_correction1; a.f[7] = bias_correction2;
    mgt__pool_run(MGT__POOL(be), mgt__adamw_task, &a);
}

/* ---- storage types on the CPU: fp32 runs the code above as it is; bf16 and fp16 widen their
   inputs into fp32 workspace, run the same code, and round what they store once (to nearest even):
   the numerics of a GPU kernel that computes in fp32 and stores 16-bit. The workspace is sized
   from the rank's shapes (mgt__widen_floats) and counted as workspace memory. ---- */

static size_t mgt__dtype_size(int dtype) { return dtype == MGT_F32 ? 4 : 2; }
static float mgt__load(const void *base, size_t i, int dtype) { /* element i of a tensor in dtype */
    if (dtype == MGT_BF16) return mgt__bf16_to_f32(((const uint16_t *)base)[i]);
    if (dtype == MGT_F16) return mgt__f16_to_f32(((const uint16_t *)base)[i]);
    return ((const float *)base)[i];
}
static void mgt__store(void *base, size_t i, int dtype, float v) { /* element i of a tensor in dtype, rounded */
    if (dtype == MGT_F32) ((float *)base)[i] = v;
    else ((uint16_t *)base)[i] = dtype == MGT_BF16 ? mgt__f32_to_bf16(v) : mgt__f32_to_f16(v);
}

/* elements [lo, hi) of src (sd) into dst (dd), rounded to nearest even */
static void mgt__convert(void *dst, int dd, const void *src, int sd, size_t lo, size_t hi) {
    size_t i;
    if (dd == sd) { memcpy((char *)dst + lo * mgt__dtype_size(dd), (const char *)src + lo * mgt__dtype_size(sd), (hi - lo) * mgt__dtype_size(dd)); return; }
    /* one loop per pair, so that each vectorises */
    if (sd == MGT_BF16 && dd == MGT_F32) for (i = lo; i < hi; i++) ((float *)dst)[i] = mgt__bf16_to_f32(((const uint16_t *)src)[i]);
    else if (sd == MGT_F32 && dd == MGT_BF16) for (i = lo; i < hi; i++) ((uint16_t *)dst)[i] = mgt__f32_to_bf16(((const float *)src)[i]);
    else if (sd == MGT_F16 && dd == MGT_F32) for (i = lo; i < hi; i++) ((float *)dst)[i] = mgt__f16_to_f32(((const uint16_t *)src)[i]);
    else if (sd == MGT_F32 && dd == MGT_F16) for (i = lo; i < hi; i++) ((uint16_t *)dst)[i] = mgt__f32_to_f16(((const float *)src)[i]);
    else /* between the two 16-bit types, through fp32 */
        for (i = lo; i < hi; i++) {
            float x = sd == MGT_BF16 ? mgt__bf16_to_f32(((const uint16_t *)src)[i]) : mgt__f16_to_f32(((const uint16_t *)src)[i]);
            ((uint16_t *)dst)[i] = dd == MGT_BF16 ? mgt__f32_to_bf16(x) : mgt__f32_to_f16(x);
        }
}
typedef struct mgt__cast_args { void *dst; const void *src; int dd, sd; size_t n; } mgt__cast_args;
static void mgt__cast_task(void *ctx, int tid, int nth) {
    const mgt__cast_args *c = (const mgt__cast_args *)ctx;
    size_t lo, hi;
    mgt__span(c->n, tid, nth, 1024, &lo, &hi);
    mgt__convert(c->dst, c->dd, c->src, c->sd, lo, hi);
}
static void mgt__cpu_cast(mgt_backend *be, void *dst, int dst_dtype, const void *src, int src_dtype, size_t n) {
    mgt__cast_args c;
    if (!n) return;
    c.dst = dst; c.src = src; c.dd = dst_dtype; c.sd = src_dtype; c.n = n;
    mgt__pool_run(MGT__POOL(be), mgt__cast_task, &c);
}

/* the workspace of one op: taken in 64-byte pieces, released together by the next op */
static float *mgt__wide_take(mgt_backend *be, size_t n) {
    mgt__cpu *cpu = (mgt__cpu *)be->impl;
    float *p = cpu->wide + cpu->wide_used;
    cpu->wide_used += (n + 15) & ~(size_t)15;
    if (cpu->wide_used > cpu->wide_floats) abort(); /* sized from the shapes at creation: a bug if it is short */
    return p;
}
/* at least n floats of workspace: a GEMM that oneDNN could not plan widens its operands, which the
   workspace was not sized for when oneDNN was to multiply them (mgt__widen_floats) */
static void mgt__wide_reserve(mgt_backend *be, size_t n) {
    mgt__cpu *cpu = (mgt__cpu *)be->impl;
    if (cpu->wide_floats >= n) return;
    be->free(be, cpu->wide, sizeof(float) * cpu->wide_floats, MGT_MEM_WORKSPACE);
    cpu->wide = (float *)be->alloc(be, sizeof(float) * n, MGT_MEM_WORKSPACE);
    cpu->wide_floats = cpu->wide ? n : 0;
    if (!cpu->wide) {
        fprintf(stderr, "mgt: out of memory for %.1f MiB of fp32 workspace to widen a bf16 GEMM oneDNN could not plan\n", (double)n * 4 / 1048576.0);
        abort();
    }
}
static float *mgt__wide_in(mgt_backend *be, const void *src, size_t n) {
    float *p;
    if (!src) return NULL;
    p = mgt__wide_take(be, n);
    mgt__cpu_cast(be, p, MGT_F32, src, be->dtype, n);
    return p;
}
static void mgt__wide_out(mgt_backend *be, void *dst, const float *p, size_t n) { mgt__cpu_cast(be, dst, be->dtype, p, MGT_F32, n); }
#define MGT__WIDE(be) (((mgt__cpu *)(be)->impl)->wide_used = 0, (be)->dtype != MGT_F32) /* starts an op: true when 16-bit */
#define MGT__F(p) ((float *)(p))
#define MGT__CF(p) ((const float *)(p))

static void mgt__t_encoder_forward(mgt_backend *be, void *out, const int *tokens, const void *wte, int v0, int vr, const void *wpe, int B, int T, int C) {
    size_t n = (size_t)B * T * C;
    float *o;
    if (!MGT__WIDE(be)) { mgt__cpu_encoder_forward(be, MGT__F(out), tokens, MGT__CF(wte), v0, vr, MGT__CF(wpe), B, T, C); return; }
    o = mgt__wide_take(be, n);
    mgt__cpu_encoder_forward(be, o, tokens, mgt__wide_in(be, wte, (size_t)vr * C), v0, vr, mgt__wide_in(be, wpe, (size_t)T * C), B, T, C);
    mgt__wide_out(be, out, o, n);
}
static void mgt__t_encoder_backward(mgt_backend *be, float *dwte, float *dwpe, const void *dout, const int *tokens, int v0, int vr, int B, int T, int C) {
    if (!MGT__WIDE(be)) { mgt__cpu_encoder_backward(be, dwte, dwpe, MGT__CF(dout), tokens, v0, vr, B, T, C); return; }
    mgt__cpu_encoder_backward(be, dwte, dwpe, mgt__wide_in(be, dout, (size_t)B * T * C), tokens, v0, vr, B, T, C);
}
static void mgt__t_layernorm_forward(mgt_backend *be, void *out, float *mean, float *rstd, const void *inp, const void *w, const void *b, int N, int C) {
    size_t n = (size_t)N * C;
    float *o;
    if (!MGT__WIDE(be)) { mgt__cpu_layernorm_forward(be, MGT__F(out), mean, rstd, MGT__CF(inp), MGT__CF(w), MGT__CF(b), N, C); return; }
    o = mgt__wide_take(be, n);
    mgt__cpu_layernorm_forward(be, o, mean, rstd, mgt__wide_in(be, inp, n), mgt__wide_in(be, w, (size_t)C), mgt__wide_in(be, b, (size_t)C), N, C);
    mgt__wide_out(be, out, o, n);
}
static void mgt__t_layernorm_backward(mgt_backend *be, void *dinp, float *dw, float *db, const void *dout, const void *inp, const void *w,
                                      const float *mean, const float *rstd, int N, int C) {
    size_t n = (size_t)N * C;
    float *di;
    if (!MGT__WIDE(be)) { mgt__cpu_layernorm_backward(be, MGT__F(dinp), dw, db, MGT__CF(dout), MGT__CF(inp), MGT__CF(w), mean, rstd, N, C); return; }
    di = mgt__wide_in(be, dinp, n); /* accumulated into (+=) */
    mgt__cpu_layernorm_backward(be, di, dw, db, mgt__wide_in(be, dout, n), mgt__wide_in(be, inp, n), mgt__wide_in(be, w, (size_t)C), mean, rstd, N, C);
    mgt__wide_out(be, dinp, di, n);
}
/* ---- bf16 GEMMs through oneDNN: C = op(A) op(B) (+ bias) (+ C), bf16 operands, fp32 accumulation,
   split over the pool along the larger of M and N as mgt__gemm splits sgemm. Every block's plan
   is made on the calling thread before any block runs, so an op whose plan fails has touched
   nothing and widens to sgemm instead (and so does every later op: the reason is logged once). */
typedef struct mgt__bf16_gemm_args {
    const mgt_onednn_api *api;
    int ta, tb, M, N, K, lda, ldb, ldc, c_bf16;
    int sizes[3];  /* the blocks' lengths along the split: mgt__span gives at most three */
    void *plans[3];
    const uint16_t *A, *B, *bias;
    void *C;
    int failed;
    char why[300];
} mgt__bf16_gemm_args;

static int mgt__bf16_gemm_plan(mgt_backend *be, mgt__bf16_gemm_args *g, int ta, int tb, int M, int N, int K, const void *A, int lda, const void *B,
                               int ldb, const void *bias, void *C, int ldc, int c_bf16, int accumulate) {
    mgt__cpu *cpu = (mgt__cpu *)be->impl;
    int nth = cpu->pool.n, tid, k, kinds = 0;
    memset(g, 0, sizeof *g);
    if (!cpu->onednn) return 0;
    g->api = cpu->onednn;
    g->ta = ta; g->tb = tb; g->M = M; g->N = N; g->K = K; g->lda = lda; g->ldb = ldb; g->ldc = ldc; g->c_bf16 = c_bf16;
    g->A = (const uint16_t *)A; g->B = (const uint16_t *)B; g->bias = (const uint16_t *)bias; g->C = C;
    for (tid = 0; tid < nth; tid++) {
        mgt__gemm_block b = mgt__gemm_block_of(M, N, ta, tb, lda, ldb, ldc, tid, nth);
        int len = (int)(b.hi - b.lo);
        for (k = 0; k < kinds && g->sizes[k] != len; k++) {}
        if (len == 0 || k < kinds) continue;
        if (kinds == 3) abort(); /* mgt__span's blocks have at most three lengths: a bug otherwise */
        g->sizes[kinds] = len;
        g->plans[kinds] = g->api->plan(ta, tb, b.split_m ? len : M, b.split_m ? N : len, K, lda, ldb, ldc, bias != NULL, c_bf16, accumulate, g->why,
                                       sizeof g->why);
        if (!g->plans[kinds]) {
            mgt__log(MGT_LOG_WARN, "oneDNN could not plan a bf16 GEMM (%s); this CPU backend's GEMMs widen to fp32 sgemm from here on", g->why);
            cpu->onednn = NULL;
            return 0;
        }
        kinds++;
    }
    return 1;
}
static void mgt__bf16_gemm_task(void *ctx, int tid, int nth) {
    mgt__bf16_gemm_args *g = (mgt__bf16_gemm_args *)ctx;
    mgt__gemm_block b = mgt__gemm_block_of(g->M, g->N, g->ta, g->tb, g->lda, g->ldb, g->ldc, tid, nth);
    char why[300];
    int k = 0, len = (int)(b.hi - b.lo);
    if (len == 0) return;
    while (g->sizes[k] != len) k++;
    if (g->api->run(g->plans[k], g->A + b.a, g->B + b.b, g->bias ? g->bias + b.bias : NULL, (char *)g->C + b.c * (g->c_bf16 ? 2 : 4), why, sizeof why)) {
        g->failed = 1; /* one thread's text is enough */
        mgt__strlcpy(g->why, why, sizeof g->why);
    }
}
static void mgt__bf16_gemm_run(mgt_backend *be, mgt__bf16_gemm_args *g) {
    mgt__pool_run(MGT__POOL(be), mgt__bf16_gemm_task, g);
    if (g->failed) { /* planned but could not run: blocks may be half written, so there is no going back to sgemm */
        fprintf(stderr, "mgt: a planned oneDNN bf16 GEMM failed to run: %s\n", g->why);
        abort();
    }
}

static void mgt__t_matmul_forward(mgt_backend *be, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    float *o;
    mgt__bf16_gemm_args g;
    if (!MGT__WIDE(be)) { mgt__cpu_matmul_forward(be, MGT__F(out), MGT__CF(inp), MGT__CF(w), MGT__CF(bias), N, C, OC); return; }
    if (mgt__bf16_gemm_plan(be, &g, 0, 1, N, OC, C, inp, C, w, C, bias, out, OC, 1, 0)) { mgt__bf16_gemm_run(be, &g); return; } /* out = inp W^T + b */
    mgt__wide_reserve(be, 4 * 16 + (size_t)N * OC + (size_t)N * C + (size_t)OC * C + (size_t)OC); /* each operand padded to 16 */
    o = mgt__wide_take(be, (size_t)N * OC);
    mgt__cpu_matmul_forward(be, o, mgt__wide_in(be, inp, (size_t)N * C), mgt__wide_in(be, w, (size_t)OC * C), mgt__wide_in(be, bias, (size_t)OC), N, C, OC);
    mgt__wide_out(be, out, o, (size_t)N * OC);
}
static void mgt__t_matmul_backward(mgt_backend *be, void *dinp, float *dw, float *db, const void *dout, const void *inp, const void *w, int N, int C, int OC) {
    float *di;
    mgt__bf16_gemm_args gi, gw;
    if (!MGT__WIDE(be)) { mgt__cpu_matmul_backward(be, MGT__F(dinp), dw, db, MGT__CF(dout), MGT__CF(inp), MGT__CF(w), N, C, OC); return; }
    if ((!dinp || mgt__bf16_gemm_plan(be, &gi, 0, 0, N, C, OC, dout, OC, w, C, NULL, dinp, C, 1, 0)) &&   /* dinp = dout W */
        (!dw || mgt__bf16_gemm_plan(be, &gw, 1, 0, OC, C, N, dout, OC, inp, C, NULL, dw, C, 0, 1))) {    /* dW += dout^T inp */
        if (dinp) mgt__bf16_gemm_run(be, &gi);
        if (dw) mgt__bf16_gemm_run(be, &gw);
        if (dw && db) {
            mgt__args a;
            memset(&a, 0, sizeof a);
            a.out[0] = db; a.in[0] = (const float *)dout; a.n[0] = N; a.n[1] = OC; a.n[2] = MGT_BF16;
            mgt__pool_run(MGT__POOL(be), mgt__bias_bwd_task, &a);
        }
        return;
    }
    mgt__wide_reserve(be, 4 * 16 + 2 * (size_t)N * C + (size_t)N * OC + (size_t)OC * C);
    di = dinp ? mgt__wide_take(be, (size_t)N * C) : NULL;
    mgt__cpu_matmul_backward(be, di, dw, db, mgt__wide_in(be, dout, (size_t)N * OC), dw ? mgt__wide_in(be, inp, (size_t)N * C) : NULL,
                             dinp ? mgt__wide_in(be, w, (size_t)OC * C) : NULL, N, C, OC); /* widens only what the asked gradients read */
    if (dinp) mgt__wide_out(be, dinp, di, (size_t)N * C);
}
static void mgt__t_gelu_forward(mgt_backend *be, void *out, const void *inp, size_t n);
static void mgt__t_gelu_backward(mgt_backend *be, void *dinp, const void *inp, const void *dout, size_t n);
static void mgt__t_matmul_gelu_forward(mgt_backend *be, void *out, void *pre, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    mgt__t_matmul_forward(be, pre, inp, w, bias, N, C, OC);
    mgt__t_gelu_forward(be, out, pre, (size_t)N * OC);
}
static void mgt__t_matmul_gelu_backward(mgt_backend *be, void *dpre, float *dw, float *db, const void *dout, const void *inp, const void *w,
                                        const void *pre, int N, int C, int OC) {
    mgt__t_matmul_backward(be, dpre, dw, db, dout, inp, w, N, C, OC);
    mgt__t_gelu_backward(be, dpre, pre, dpre, (size_t)N * C);
}
static void mgt__t_attention_forward(mgt_backend *be, void *out, void *att, const void *qkv, int B, int T, int C, int NH, int NKV) {
    size_t n = (size_t)B * T * C, nqkv = (size_t)B * T * (C + 2 * (C / NH) * NKV), na = (size_t)B * NH * T * T;
    float *o, *a;
    if (!MGT__WIDE(be)) { mgt__cpu_attention_forward(be, MGT__F(out), MGT__F(att), MGT__CF(qkv), B, T, C, NH, NKV); return; }
    o = mgt__wide_take(be, n);
    a = mgt__wide_take(be, na);
    mgt__cpu_attention_forward(be, o, a, mgt__wide_in(be, qkv, nqkv), B, T, C, NH, NKV);
    mgt__wide_out(be, out, o, n);
    mgt__wide_out(be, att, a, na);
}
static void mgt__t_attention_backward(mgt_backend *be, void *dqkv, const void *dout, const void *qkv, const void *out, const void *att, int B, int T,
                                      int C, int NH, int NKV) {
    size_t n = (size_t)B * T * C, nqkv = (size_t)B * T * (C + 2 * (C / NH) * NKV);
    float *d;
    (void)out; /* the probabilities are saved */
    if (!MGT__WIDE(be)) { mgt__cpu_attention_backward(be, MGT__F(dqkv), MGT__CF(dout), MGT__CF(qkv), MGT__CF(att), B, T, C, NH, NKV); return; }
    d = mgt__wide_take(be, nqkv);
    mgt__cpu_attention_backward(be, d, mgt__wide_in(be, dout, n), mgt__wide_in(be, qkv, nqkv), mgt__wide_in(be, att, (size_t)B * NH * T * T), B, T, C,
                                NH, NKV);
    mgt__wide_out(be, dqkv, d, nqkv);
}
/* kv's rows, widened: its (B T - 1) strides and the last row's k and v heads */
static size_t mgt__kv_span(int B, int T, int C, int NH, int NKV, int kv_stride) { return (size_t)(B * T - 1) * (size_t)kv_stride + 2 * (size_t)(C / NH) * NKV; }
static void mgt__t_attention_part_forward(mgt_backend *be, float *o, float *lse, const void *qkv, const void *kv, int kv_stride, int B, int T, int C,
                                          int NH, int NKV, int causal, int first) {
    size_t nqkv = (size_t)B * T * (C + 2 * (C / NH) * NKV);
    if (!MGT__WIDE(be)) { mgt__cpu_attention_part_forward(be, o, lse, MGT__CF(qkv), MGT__CF(kv), kv_stride, B, T, C, NH, NKV, causal, first); return; }
    mgt__cpu_attention_part_forward(be, o, lse, mgt__wide_in(be, qkv, nqkv), mgt__wide_in(be, kv, mgt__kv_span(B, T, C, NH, NKV, kv_stride)), kv_stride, B,
                                    T, C, NH, NKV, causal, first);
}
static void mgt__t_attention_part_backward(mgt_backend *be, float *dq, float *dkv, const void *dout, const void *out, const float *lse, const void *qkv,
                                           const void *kv, int kv_stride, int B, int T, int C, int NH, int NKV, int causal) {
    size_t n = (size_t)B * T * C, nqkv = (size_t)B * T * (C + 2 * (C / NH) * NKV);
    if (!MGT__WIDE(be)) {
        mgt__cpu_attention_part_backward(be, dq, dkv, MGT__CF(dout), MGT__CF(out), lse, MGT__CF(qkv), MGT__CF(kv), kv_stride, B, T, C, NH, NKV, causal);
        return;
    }
    mgt__cpu_attention_part_backward(be, dq, dkv, mgt__wide_in(be, dout, n), mgt__wide_in(be, out, n), lse, mgt__wide_in(be, qkv, nqkv),
                                     mgt__wide_in(be, kv, mgt__kv_span(B, T, C, NH, NKV, kv_stride)), kv_stride, B, T, C, NH, NKV, causal);
}
typedef struct mgt__cols_args { void *dst; const void *src; int dd, sd, dstride, sstride, cols; size_t rows; } mgt__cols_args;
static void mgt__copy_cols_task(void *ctx, int tid, int nth) {
    const mgt__cols_args *c = (const mgt__cols_args *)ctx;
    size_t lo, hi, r;
    int j;
    mgt__span(c->rows, tid, nth, 16, &lo, &hi);
    for (r = lo; r < hi; r++)
        for (j = 0; j < c->cols; j++)
            mgt__store(c->dst, r * (size_t)c->dstride + (size_t)j, c->dd, mgt__load(c->src, r * (size_t)c->sstride + (size_t)j, c->sd));
}
static void mgt__cpu_copy_cols(mgt_backend *be, void *dst, int dst_dtype, int dst_stride, const void *src, int src_dtype, int src_stride, size_t rows,
                               int cols) {
    mgt__cols_args c;
    c.dst = dst; c.src = src; c.dd = dst_dtype; c.sd = src_dtype; c.dstride = dst_stride; c.sstride = src_stride; c.cols = cols; c.rows = rows;
    mgt__pool_run(MGT__POOL(be), mgt__copy_cols_task, &c);
}
static void mgt__t_gelu_forward(mgt_backend *be, void *out, const void *inp, size_t n) {
    float *o;
    if (!MGT__WIDE(be)) { mgt__cpu_gelu_forward(be, MGT__F(out), MGT__CF(inp), n); return; }
    o = mgt__wide_take(be, n);
    mgt__cpu_gelu_forward(be, o, mgt__wide_in(be, inp, n), n);
    mgt__wide_out(be, out, o, n);
}
static void mgt__t_gelu_backward(mgt_backend *be, void *dinp, const void *inp, const void *dout, size_t n) {
    float *d, *x, *g;
    if (!MGT__WIDE(be)) { mgt__cpu_gelu_backward(be, MGT__F(dinp), MGT__CF(inp), MGT__CF(dout), n); return; }
    x = mgt__wide_in(be, inp, n);
    g = mgt__wide_in(be, dout, n); /* read before dinp (which may be dout) is written */
    d = mgt__wide_take(be, n);
    mgt__cpu_gelu_backward(be, d, x, g, n);
    mgt__wide_out(be, dinp, d, n);
}
static void mgt__t_rmsnorm_forward(mgt_backend *be, void *out, float *rstd, const void *inp, const void *w, float eps, int N, int C) {
    size_t n = (size_t)N * C;
    float *o;
    if (!MGT__WIDE(be)) { mgt__cpu_rmsnorm_forward(be, MGT__F(out), rstd, MGT__CF(inp), MGT__CF(w), eps, N, C); return; }
    o = mgt__wide_take(be, n);
    mgt__cpu_rmsnorm_forward(be, o, rstd, mgt__wide_in(be, inp, n), mgt__wide_in(be, w, (size_t)C), eps, N, C);
    mgt__wide_out(be, out, o, n);
}
static void mgt__t_rmsnorm_backward(mgt_backend *be, void *dinp, float *dw, const void *dout, const void *inp, const void *w, const float *rstd, int N,
                                    int C) {
    size_t n = (size_t)N * C;
    float *di;
    if (!MGT__WIDE(be)) { mgt__cpu_rmsnorm_backward(be, MGT__F(dinp), dw, MGT__CF(dout), MGT__CF(inp), MGT__CF(w), rstd, N, C); return; }
    di = mgt__wide_in(be, dinp, n); /* accumulated into (+=) */
    mgt__cpu_rmsnorm_backward(be, di, dw, mgt__wide_in(be, dout, n), mgt__wide_in(be, inp, n), mgt__wide_in(be, w, (size_t)C), rstd, N, C);
    mgt__wide_out(be, dinp, di, n);
}
static void mgt__t_rope(mgt_backend *be, void *qkv, int B, int T, int NH, int NKV, int hs, float theta, float sign, int pos0) {
    size_t n = (size_t)B * T * (NH + 2 * NKV) * hs;
    float *x;
    if (!MGT__WIDE(be)) { mgt__cpu_rope(be, MGT__F(qkv), B, T, NH, NKV, hs, theta, sign, pos0); return; }
    x = mgt__wide_in(be, qkv, n);
    mgt__cpu_rope(be, x, B, T, NH, NKV, hs, theta, sign, pos0);
    mgt__wide_out(be, qkv, x, n);
}
static void mgt__t_rope_forward(mgt_backend *be, void *qkv, int B, int T, int NH, int NKV, int hs, float theta, int pos0) {
    mgt__t_rope(be, qkv, B, T, NH, NKV, hs, theta, 1.0f, pos0);
}
static void mgt__t_rope_backward(mgt_backend *be, void *dqkv, int B, int T, int NH, int NKV, int hs, float theta, int pos0) {
    mgt__t_rope(be, dqkv, B, T, NH, NKV, hs, theta, -1.0f, pos0);
}
static void mgt__t_swiglu_forward(mgt_backend *be, void *out, const void *inp, int N, int H) {
    size_t n = (size_t)N * H;
    float *o;
    if (!MGT__WIDE(be)) { mgt__cpu_swiglu_forward(be, MGT__F(out), MGT__CF(inp), N, H); return; }
    o = mgt__wide_take(be, n);
    mgt__cpu_swiglu_forward(be, o, mgt__wide_in(be, inp, 2 * n), N, H);
    mgt__wide_out(be, out, o, n);
}
static void mgt__t_swiglu_backward(mgt_backend *be, void *dinp, const void *inp, const void *dout, int N, int H) {
    size_t n = (size_t)N * H;
    float *d;
    if (!MGT__WIDE(be)) { mgt__cpu_swiglu_backward(be, MGT__F(dinp), MGT__CF(inp), MGT__CF(dout), N, H); return; }
    d = mgt__wide_take(be, 2 * n);
    mgt__cpu_swiglu_backward(be, d, mgt__wide_in(be, inp, 2 * n), mgt__wide_in(be, dout, n), N, H);
    mgt__wide_out(be, dinp, d, 2 * n);
}
static void mgt__t_bias_residual(mgt_backend *be, void *out, const void *residual, const void *bias, int N, int C) {
    size_t n = (size_t)N * C;
    float *o;
    if (!MGT__WIDE(be)) { mgt__cpu_bias_residual(be, MGT__F(out), MGT__CF(residual), MGT__CF(bias), N, C); return; }
    o = mgt__wide_in(be, out, n);
    mgt__cpu_bias_residual(be, o, mgt__wide_in(be, residual, n), mgt__wide_in(be, bias, (size_t)C), N, C);
    mgt__wide_out(be, out, o, n);
}
static void mgt__t_bias_backward(mgt_backend *be, float *dbias, const void *dout, int N, int C) {
    if (!MGT__WIDE(be)) { mgt__cpu_bias_backward(be, dbias, MGT__CF(dout), N, C); return; }
    mgt__cpu_bias_backward(be, dbias, mgt__wide_in(be, dout, (size_t)N * C), N, C);
}
/* the reference is adamw on each tensor in turn */
static void mgt__cpu_adamw_many(mgt_backend *be, int count, float *const *param, void *const *param_copy, const float *const *grad, float *const *m,
                                float *const *v, const size_t *n, const float *weight_decay, float lr, float beta1, float beta2, float eps,
                                float grad_scale, float bias_correction1, float bias_correction2) {
    int k;
    for (k = 0; k < count; k++)
        be->adamw(be, param[k], param_copy[k], grad[k], m[k], v[k], n[k], lr, beta1, beta2, eps, weight_decay[k], grad_scale, bias_correction1,
                  bias_correction2);
}
/* the reference is the two ops one after the other */
static void mgt__cpu_residual_layernorm_forward(mgt_backend *be, void *res, void *out, float *mean, float *rstd, const void *residual, const void *res_bias,
                                                const void *weight, const void *bias, int N, int C) {
    be->bias_residual(be, res, residual, res_bias, N, C);
    be->layernorm_forward(be, out, mean, rstd, res, weight, bias, N, C);
}
#undef MGT__F
#undef MGT__CF

/* a CPU backend of `threads` threads storing `dtype`; wide_floats of fp32 workspace for 16-bit ops */
static mgt_result mgt__cpu_backend_create_typed(mgt_backend **out, int threads, size_t scratch_per_thread, int dtype, size_t wide_floats) {
    mgt_backend *be = (mgt_backend *)MGT_MALLOC(sizeof *be);
    mgt__cpu *cpu = (mgt__cpu *)MGT_MALLOC(sizeof *cpu);
    if (!be || !cpu) { MGT_FREE(be); MGT_FREE(cpu); return mgt__fail(MGT_ERROR_MEMORY, "out of memory creating the CPU backend"); }
    memset(be, 0, sizeof *be);
    memset(cpu, 0, sizeof *cpu);
    {
        mgt_result res = mgt__blas_prepare();
        if (res != MGT_OK) { MGT_FREE(be); MGT_FREE(cpu); return res; }
    }
    be->name = "cpu";
    be->dtype = dtype;
    be->elt = mgt__dtype_size(dtype);
    be->impl = cpu;
    be->host_memory = 1;
    be->alloc = mgt__cpu_alloc;
    be->free = mgt__cpu_free;
    be->upload = mgt__cpu_copy;
    be->download = mgt__cpu_copy;
    be->encoder_forward = mgt__t_encoder_forward;
    be->encoder_backward = mgt__t_encoder_backward;
    be->layernorm_forward = mgt__t_layernorm_forward;
    be->layernorm_backward = mgt__t_layernorm_backward;
    be->matmul_forward = mgt__t_matmul_forward;
    be->matmul_backward = mgt__t_matmul_backward;
    be->matmul_gelu_forward = mgt__t_matmul_gelu_forward;
    be->matmul_gelu_backward = mgt__t_matmul_gelu_backward;
    be->attention_forward = mgt__t_attention_forward;
    be->attention_backward = mgt__t_attention_backward;
    be->attention_part_forward = mgt__t_attention_part_forward;
    be->attention_part_backward = mgt__t_attention_part_backward;
    be->copy_cols = mgt__cpu_copy_cols;
    be->gelu_forward = mgt__t_gelu_forward;
    be->gelu_backward = mgt__t_gelu_backward;
    be->rmsnorm_forward = mgt__t_rmsnorm_forward;
    be->rmsnorm_backward = mgt__t_rmsnorm_backward;
    be->rope_forward = mgt__t_rope_forward;
    be->rope_backward = mgt__t_rope_backward;
    be->swiglu_forward = mgt__t_swiglu_forward;
    be->swiglu_backward = mgt__t_swiglu_backward;
    be->add_inplace = mgt__cpu_add_inplace;
    be->bias_residual = mgt__t_bias_residual;
    be->residual_layernorm_forward = mgt__cpu_residual_layernorm_forward;
    be->bias_backward = mgt__t_bias_backward;
    be->xent_partial = mgt__cpu_xent_partial;
    be->xent_finish = mgt__cpu_xent_finish;
    be->sum_squares = mgt__cpu_sum_squares;
    be->adamw = mgt__cpu_adamw;
    be->adamw_many = mgt__cpu_adamw_many;
    be->scale = mgt__cpu_scale;
    be->zero = mgt__cpu_zero;
    be->cast = mgt__cpu_cast;
    if (!mgt__pool_init(&cpu->pool, threads)) {
        mgt__pool_destroy(&cpu->pool);
        MGT_FREE(cpu); MGT_FREE(be);
        return mgt__fail(MGT_ERROR_MEMORY, "cannot start %d CPU threads", threads);
    }
    cpu->scratch_per_thread = scratch_per_thread;
    cpu->scratch = (float *)be->alloc(be, sizeof(float) * scratch_per_thread * (size_t)cpu->pool.n, MGT_MEM_WORKSPACE);
    cpu->wide_floats = dtype == MGT_F32 ? 0 : wide_floats;
    cpu->onednn = dtype == MGT_BF16 ? mgt__onednn_for_bf16() : NULL;
    cpu->wide = cpu->wide_floats ? (float *)be->alloc(be, sizeof(float) * cpu->wide_floats, MGT_MEM_WORKSPACE) : NULL;
    if (!cpu->scratch || (cpu->wide_floats && !cpu->wide)) {
        be->free(be, cpu->scratch, sizeof(float) * scratch_per_thread * (size_t)cpu->pool.n, MGT_MEM_WORKSPACE);
        mgt__pool_destroy(&cpu->pool);
        MGT_FREE(cpu); MGT_FREE(be);
        return mgt__fail(MGT_ERROR_MEMORY, "out of memory for the CPU backend's workspace");
    }
    *out = be;
    return MGT_OK;
}
static void mgt__cpu_backend_destroy(mgt_backend *be) {
    mgt__cpu *cpu;
    if (!be) return;
    cpu = (mgt__cpu *)be->impl;
    be->free(be, cpu->scratch, sizeof(float) * cpu->scratch_per_thread * (size_t)cpu->pool.n, MGT_MEM_WORKSPACE);
    be->free(be, cpu->wide, sizeof(float) * cpu->wide_floats, MGT_MEM_WORKSPACE);
    mgt__pool_destroy(&cpu->pool);
    MGT_FREE(cpu);
    MGT_FREE(be);
}

