/* Mixed precision on the CPU backend with real 16-bit storage:
   1. every 16-bit op (bf16 and fp16) is the fp32 op on the widened inputs with its stored outputs
      rounded once: bit for bit, so the CPU twin of a kernel templated on the storage type is exact;
   2. bf16 and fp16 training curves follow fp32 within a bound derived below, with half the
      parameter and activation bytes and fp32 master weights in the optimizer state;
   3. fp16 dynamic loss scaling: from 2^40 the first steps overflow, are skipped and halve the scale,
      then training goes on (the exact sequence, the same on 1 and 4 ranks); the scale doubles after
      loss_scale_window finite steps;
   4. a non-finite gradient norm in a multi-rank fp32 run (a NaN left in rank 0's embedding gradient by tests/fault_world.h) skips
      the update on every rank alike and the run goes on, exactly as one rank does; too many in a row
      fail with a clear error, never a hang;
   5. checkpoints hold the fp32 master weights: bf16 resumes bit-exactly, and fp32 resumes a bf16 run;
      an fp16 run's loss scale comes back. */
#define MGT_IMPLEMENTATION
#include "mgt.h"
#include "train_util.h"
#include "fault_world.h"

static char dir[256];
static const char *dt_name[3] = {"fp32", "bf16", "fp16"};

/* ---- 1. the 16-bit ops against the fp32 ops --------------------------------------------------- */

static float urandf(uint64_t tag, size_t i, double lo, double hi) { return (float)(lo + (hi - lo) * mgt__uniform(mgt_hash3(99, tag, i))); }
static float round_to(float x, int dt) { return dt == MGT_BF16 ? mgt__bf16_to_f32(mgt__f32_to_bf16(x)) : mgt__f16_to_f32(mgt__f32_to_f16(x)); }

/* an input: fp32 values exactly representable in dt, and the same values stored in dt */
typedef struct pair { float *f; uint16_t *h; size_t n; } pair;
static pair input(size_t n, uint64_t tag, double lo, double hi, int dt) {
    pair p;
    size_t i;
    p.n = n;
    p.f = (float *)malloc(sizeof(float) * (n ? n : 1));
    p.h = (uint16_t *)malloc(sizeof(uint16_t) * (n ? n : 1));
    for (i = 0; i < n; i++) {
        p.f[i] = round_to(urandf(tag, i, lo, hi), dt);
        mgt__store(p.h, i, dt, p.f[i]);
    }
    return p;
}
static void pair_free(pair *p) { free(p->f); free(p->h); }
/* the 16-bit result must be the fp32 result rounded once: counts elements that are not */
static void same16(const char *what, const pair *p, int dt) {
    size_t i, bad = 0;
    for (i = 0; i < p->n; i++) {
        uint16_t want = dt == MGT_BF16 ? mgt__f32_to_bf16(p->f[i]) : mgt__f32_to_f16(p->f[i]);
        bad += p->h[i] != want;
    }
    check(bad == 0, "%s %-44s stores round(fp32 op): %zu of %zu elements differ", dt_name[dt], what, bad, p->n);
}
static void same32(const char *what, const void *a, const void *b, size_t bytes, int dt) {
    check(memcmp(a, b, bytes) == 0, "%s %-44s fp32 outputs bit-identical to the fp32 op's", dt_name[dt], what);
}
static void refresh(pair *p, int dt) { size_t i; for (i = 0; i < p->n; i++) p->f[i] = dt == MGT_BF16 ? mgt__bf16_to_f32(p->h[i]) : mgt__f16_to_f32(p->h[i]); }

static void test_ops16(int dt) {
    enum { B = 2, T = 8, C = 16, NH = 2, OC = 24, V = 40 };
    const size_t N = B * T;
    mgt_backend *b32, *b16;
    int tok[B * T], tgt[B * T];
    size_t i;
    if (mgt__cpu_backend_create_typed(&b32, 2, T * T, MGT_F32, 0) != MGT_OK ||
        mgt__cpu_backend_create_typed(&b16, 2, T * T, dt, 1 << 16) != MGT_OK) { printf("FAIL backend: %s\n", mgt_last_error()); exit(1); }
    ((mgt__cpu *)b16->impl)->onednn = NULL; /* bit for bit is the widened path's; test_onednn checks oneDNN's against it */
    for (i = 0; i < N; i++) { tok[i] = (int)(mgt_hash3(5, 6, i) % V); tgt[i] = (int)(mgt_hash3(7, 8, i) % V); }
    { /* encoder */
        pair wte = input((size_t)V * C, 1, -1, 1, dt), wpe = input((size_t)T * C, 2, -1, 1, dt), out = input(N * C, 3, 0, 0, dt), dout = input(N * C, 4, -1, 1, dt);
        float *g32 = (float *)calloc((size_t)(V + T) * C, 4), *g16 = (float *)calloc((size_t)(V + T) * C, 4);
        b32->encoder_forward(b32, out.f, tok, wte.f, 0, V, wpe.f, B, T, C);
        b16->encoder_forward(b16, out.h, tok, wte.h, 0, V, wpe.h, B, T, C);
        same16("encoder_forward out", &out, dt);
        b32->encoder_backward(b32, g32, g32 + V * C, dout.f, tok, 0, V, B, T, C);
        b16->encoder_backward(b16, g16, g16 + V * C, dout.h, tok, 0, V, B, T, C);
        same32("encoder_backward dwte, dwpe", g32, g16, sizeof(float) * (V + T) * C, dt);
        pair_free(&wte); pair_free(&wpe); pair_free(&out); pair_free(&dout); free(g32); free(g16);
    }
    { /* layernorm */
        pair x = input(N * C, 11, -2, 2, dt), w = input(C, 12, 0.5, 1.5, dt), bb = input(C, 13, -0.5, 0.5, dt), out = input(N * C, 14, 0, 0, dt);
        pair dout = input(N * C, 15, -1, 1, dt), dinp = input(N * C, 16, -1, 1, dt); /* dinp accumulates: a residual gradient already there */
        float m32[N], r32[N], m16[N], r16[N], dw32[2 * C], dw16[2 * C];
        memset(dw32, 0, sizeof dw32); memset(dw16, 0, sizeof dw16);
        b32->layernorm_forward(b32, out.f, m32, r32, x.f, w.f, bb.f, (int)N, C);
        b16->layernorm_forward(b16, out.h, m16, r16, x.h, w.h, bb.h, (int)N, C);
        same16("layernorm_forward out", &out, dt);
        same32("layernorm_forward mean", m32, m16, sizeof m32, dt);
        same32("layernorm_forward rstd", r32, r16, sizeof r32, dt);
        b32->layernorm_backward(b32, dinp.f, dw32, dw32 + C, dout.f, x.f, w.f, m32, r32, (int)N, C);
        b16->layernorm_backward(b16, dinp.h, dw16, dw16 + C, dout.h, x.h, w.h, m16, r16, (int)N, C);
        same16("layernorm_backward dinp (+=)", &dinp, dt);
        same32("layernorm_backward dweight, dbias", dw32, dw16, sizeof dw32, dt);
        pair_free(&x); pair_free(&w); pair_free(&bb); pair_free(&out); pair_free(&dout); pair_free(&dinp);
    }
    { /* matmul, bias_residual, bias_backward */
        pair x = input(N * C, 21, -1, 1, dt), w = input((size_t)OC * C, 22, -0.3, 0.3, dt), bb = input(OC, 23, -0.5, 0.5, dt), out = input(N * OC, 24, 0, 0, dt);
        pair dout = input(N * OC, 25, -1, 1, dt), dinp = input(N * C, 26, 0, 0, dt), res = input(N * OC, 27, -1, 1, dt);
        float dw32[OC * C + OC], dw16[OC * C + OC];
        for (i = 0; i < OC * C + OC; i++) dw32[i] = dw16[i] = urandf(28, i, -1, 1); /* accumulated into */
        b32->matmul_forward(b32, out.f, x.f, w.f, bb.f, (int)N, C, OC);
        b16->matmul_forward(b16, out.h, x.h, w.h, bb.h, (int)N, C, OC);
        same16("matmul_forward out", &out, dt);
        refresh(&out, dt);
        b32->bias_residual(b32, out.f, res.f, bb.f, (int)N, OC);
        b16->bias_residual(b16, out.h, res.h, bb.h, (int)N, OC);
        same16("bias_residual out (+=)", &out, dt);
        b32->matmul_backward(b32, dinp.f, dw32, dw32 + OC * C, dout.f, x.f, w.f, (int)N, C, OC);
        b16->matmul_backward(b16, dinp.h, dw16, dw16 + OC * C, dout.h, x.h, w.h, (int)N, C, OC);
        same16("matmul_backward dinp", &dinp, dt);
        same32("matmul_backward dweight, dbias (+=)", dw32, dw16, sizeof dw32, dt);
        b32->bias_backward(b32, dw32, dout.f, (int)N, OC);
        b16->bias_backward(b16, dw16, dout.h, (int)N, OC);
        same32("bias_backward dbias (+=)", dw32, dw16, sizeof(float) * OC, dt);
        pair_free(&x); pair_free(&w); pair_free(&bb); pair_free(&out); pair_free(&dout); pair_free(&dinp); pair_free(&res);
    }
    { /* attention: GPT-2's (NKV = NH) and grouped-query (NKV = 1) */
        int nkv;
        for (nkv = NH; nkv >= 1; nkv /= 2) {
            size_t W = C + 2 * (C / NH) * (size_t)nkv;
            pair qkv = input(N * W, 31, -1, 1, dt), out = input(N * C, 32, 0, 0, dt), att = input((size_t)B * NH * T * T, 33, 0, 0, dt);
            pair dout = input(N * C, 34, -1, 1, dt), dqkv = input(N * W, 35, 0, 0, dt);
            b32->attention_forward(b32, out.f, att.f, qkv.f, B, T, C, NH, nkv);
            b16->attention_forward(b16, out.h, att.h, qkv.h, B, T, C, NH, nkv);
            same16(nkv == NH ? "attention_forward out" : "attention_forward out (GQA)", &out, dt);
            same16(nkv == NH ? "attention_forward att" : "attention_forward att (GQA)", &att, dt);
            refresh(&att, dt); /* backward reads the stored probabilities */
            b32->attention_backward(b32, dqkv.f, dout.f, qkv.f, out.f, att.f, B, T, C, NH, nkv);
            b16->attention_backward(b16, dqkv.h, dout.h, qkv.h, out.h, att.h, B, T, C, NH, nkv);
            same16(nkv == NH ? "attention_backward dqkv" : "attention_backward dqkv (GQA)", &dqkv, dt);
            pair_free(&qkv); pair_free(&out); pair_free(&att); pair_free(&dout); pair_free(&dqkv);
        }
    }
    { /* rmsnorm */
        pair x = input(N * C, 71, -2, 2, dt), w = input(C, 72, 0.5, 1.5, dt), out = input(N * C, 73, 0, 0, dt);
        pair dout = input(N * C, 74, -1, 1, dt), dinp = input(N * C, 75, -1, 1, dt);
        float r32[N], r16[N], dw32[C], dw16[C];
        memset(dw32, 0, sizeof dw32); memset(dw16, 0, sizeof dw16);
        b32->rmsnorm_forward(b32, out.f, r32, x.f, w.f, 1e-5f, (int)N, C);
        b16->rmsnorm_forward(b16, out.h, r16, x.h, w.h, 1e-5f, (int)N, C);
        same16("rmsnorm_forward out", &out, dt);
        same32("rmsnorm_forward rstd", r32, r16, sizeof r32, dt);
        b32->rmsnorm_backward(b32, dinp.f, dw32, dout.f, x.f, w.f, r32, (int)N, C);
        b16->rmsnorm_backward(b16, dinp.h, dw16, dout.h, x.h, w.h, r16, (int)N, C);
        same16("rmsnorm_backward dinp (+=)", &dinp, dt);
        same32("rmsnorm_backward dweight", dw32, dw16, sizeof dw32, dt);
        pair_free(&x); pair_free(&w); pair_free(&out); pair_free(&dout); pair_free(&dinp);
    }
    { /* rope in place, forward and backward, on 2 query heads and 1 key/value head */
        pair q = input(N * 4 * (C / NH), 76, -1, 1, dt);
        b32->rope_forward(b32, q.f, B, T, NH, 1, C / NH, 10000.0f, 0);
        b16->rope_forward(b16, q.h, B, T, NH, 1, C / NH, 10000.0f, 0);
        same16("rope_forward qkv (in place)", &q, dt);
        refresh(&q, dt);
        b32->rope_backward(b32, q.f, B, T, NH, 1, C / NH, 10000.0f, 0);
        b16->rope_backward(b16, q.h, B, T, NH, 1, C / NH, 10000.0f, 0);
        same16("rope_backward dqkv (in place)", &q, dt);
        pair_free(&q);
    }
    { /* swiglu */
        pair x = input(N * 2 * OC, 77, -3, 3, dt), out = input(N * OC, 78, 0, 0, dt), d = input(N * OC, 79, -1, 1, dt), dx = input(N * 2 * OC, 80, 0, 0, dt);
        b32->swiglu_forward(b32, out.f, x.f, (int)N, OC);
        b16->swiglu_forward(b16, out.h, x.h, (int)N, OC);
        same16("swiglu_forward out", &out, dt);
        b32->swiglu_backward(b32, dx.f, x.f, d.f, (int)N, OC);
        b16->swiglu_backward(b16, dx.h, x.h, d.h, (int)N, OC);
        same16("swiglu_backward dinp", &dx, dt);
        pair_free(&x); pair_free(&out); pair_free(&d); pair_free(&dx);
    }
    { /* gelu, backward in place (dinp is dout) */
        pair x = input(N * OC, 41, -3, 3, dt), out = input(N * OC, 42, 0, 0, dt), d = input(N * OC, 43, -1, 1, dt);
        b32->gelu_forward(b32, out.f, x.f, N * OC);
        b16->gelu_forward(b16, out.h, x.h, N * OC);
        same16("gelu_forward out", &out, dt);
        b32->gelu_backward(b32, d.f, x.f, d.f, N * OC);
        b16->gelu_backward(b16, d.h, x.h, d.h, N * OC);
        same16("gelu_backward dinp (in place)", &d, dt);
        pair_free(&x); pair_free(&out); pair_free(&d);
    }
    { /* cross-entropy */
        pair l = input(N * V, 51, -4, 4, dt);
        float p32[N * 3], p16[N * 3];
        double l32[N], l16[N];
        b32->xent_partial(b32, p32, l.f, tgt, (int)N, 0, V, V);
        b16->xent_partial(b16, p16, l.h, tgt, (int)N, 0, V, V);
        same32("xent_partial partials", p32, p16, sizeof p32, dt); /* fp32's logits now hold its exponentials (mgt__xent_keeps_exp) */
        b32->xent_finish(b32, l32, l.f, p32, 1, tgt, (int)N, 0, V, V, 1.0f / 16);
        b16->xent_finish(b16, l16, l.h, p16, 1, tgt, (int)N, 0, V, V, 1.0f / 16);
        same32("xent_finish losses", l32, l16, sizeof l32, dt);
        same16("xent_finish dlogits", &l, dt);
        pair_free(&l);
    }
    { /* AdamW on fp32 master weights writes the rounded compute copy; cast; zero */
        const size_t n = 1000;
        float *p32 = (float *)malloc(4 * n), *p16 = (float *)malloc(4 * n), *m32 = (float *)calloc(n, 4), *v32 = (float *)calloc(n, 4);
        float *m16 = (float *)calloc(n, 4), *v16 = (float *)calloc(n, 4), *g = (float *)malloc(4 * n);
        pair copy = input(n, 61, 0, 0, dt);
        for (i = 0; i < n; i++) { p32[i] = p16[i] = urandf(62, i, -1, 1); g[i] = urandf(63, i, -1, 1); }
        b32->adamw(b32, p32, NULL, g, m32, v32, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 0.1f, 0.05f);
        b16->adamw(b16, p16, copy.h, g, m16, v16, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 0.1f, 0.05f);
        same32("adamw master weights and moments", p32, p16, 4 * n, dt);
        memcpy(copy.f, p32, 4 * n);
        same16("adamw compute copy = round(master)", &copy, dt);
        b16->cast(b16, copy.h, dt, g, MGT_F32, n);
        memcpy(copy.f, g, 4 * n);
        same16("cast fp32 -> 16-bit", &copy, dt);
        b16->cast(b16, p16, MGT_F32, copy.h, dt, n);
        for (i = 0; i < n; i++) p32[i] = round_to(g[i], dt);
        same32("cast 16-bit -> fp32 (exact)", p32, p16, 4 * n, dt);
        b16->zero(b16, copy.h, 2 * n);
        for (i = 0; i < n; i++) copy.f[i] = 0.0f;
        same16("zero", &copy, dt);
        free(p32); free(p16); free(m32); free(v32); free(m16); free(v16); free(g); pair_free(&copy);
    }
    mgt__cpu_backend_destroy(b32);
    mgt__cpu_backend_destroy(b16);
}

/* ---- training runs ------------------------------------------------------------------------------ */

static void set(mgt_config *cfg, const char *fmt, ...) MGT__PRINTF(2, 3);
static void set(mgt_config *cfg, const char *fmt, ...) {
    char buf[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (mgt_config_set(cfg, buf) != MGT_OK) { printf("FAIL set %s: %s\n", buf, mgt_last_error()); exit(1); }
}

/* a tiny GPT (L=2, C=64, T=32, V=256), batch 8, on the generated corpus */
static void config(mgt_config *cfg, const char *dtype, int dp, int tp, int pp, int zero, const char *name) {
    mgt_config_init(cfg);
    set(cfg, "model.n_layer=2"); set(cfg, "model.n_head=4"); set(cfg, "model.d_model=64"); set(cfg, "model.seq_len=32");
    set(cfg, "train.steps=1000"); set(cfg, "train.global_batch=8"); set(cfg, "train.micro_batch=%d", 8 / dp);
    set(cfg, "train.lr=1e-3"); set(cfg, "train.warmup=5"); set(cfg, "train.eval_every=0"); /* lr 1e-3: no loss spikes, curves comparable */
    set(cfg, "log.metrics=none"); set(cfg, "parallel.threads=2"); set(cfg, "data.val=");
    set(cfg, "parallel.dp=%d", dp); set(cfg, "parallel.tp=%d", tp); set(cfg, "parallel.pp=%d", pp); set(cfg, "parallel.zero=%d", zero);
    set(cfg, "precision.dtype=%s", dtype);
    set(cfg, "data.train=%s/corpus.bin", dir);
    set(cfg, "checkpoint.dir=%s/%s", dir, name);
}

static mgt_run *create(const mgt_config *cfg) {
    mgt_run *run;
    if (mgt_run_create(&run, cfg) != MGT_OK) { printf("FAIL create: %s\n", mgt_last_error()); exit(1); }
    return run;
}
/* steps up to `to`; losses[s-1], scales[s-1] (the scale after step s) and skipped[s-1] when given */
static void train(mgt_run *run, int to, double *losses, double *scales, int *skipped) {
    while (run->step < to) {
        mgt_stats st;
        if (mgt_run_step(run) != MGT_OK) { printf("FAIL step %d: %s\n", run->step, mgt_last_error()); exit(1); }
        mgt_run_stats(run, &st);
        if (losses) losses[st.step - 1] = st.loss;
        if (scales) scales[st.step - 1] = st.loss_scale;
        if (skipped) skipped[st.step - 1] = st.step_skipped;
    }
}
static double max_rel(const double *a, const double *b, int from, int to) {
    double e = 0;
    int s;
    for (s = from; s < to; s++) e = worse_of(e, fabs(a[s] - b[s]) / fabs(b[s]));
    return e;
}
/* the global fp32 parameters (master weights under 16-bit storage) */
static float **params(mgt_run *r, mgt__layout *g) {
    mgt__global_layout(&r->plan.cfg, g);
    return mgt__gather_global(r, g, MGT__BUF_PARAMS);
}
static int same_params(mgt_run *a, mgt_run *b) {
    mgt__layout g;
    float **pa = params(a, &g), **pb = mgt__gather_global(b, &g, MGT__BUF_PARAMS);
    int t, same = 1;
    for (t = 0; t < g.n; t++) same &= !memcmp(pa[t], pb[t], sizeof(float) * g.t[t].info.numel);
    mgt__free_global(&g, pa);
    mgt__free_global(&g, pb);
    mgt__layout_free(&g);
    return same;
}

#define STEPS 30

#ifndef __SANITIZE_THREAD__
static void test_curves(void) {
    mgt_config cfg;
    mgt_run *run[3];
    double loss[3][STEPS], e16[3];
    size_t mem[3][MGT_MEM_COUNT];
    int d;
    for (d = 0; d < 3; d++) {
        config(&cfg, dt_name[d], 1, 1, 1, 0, dt_name[d]);
        run[d] = create(&cfg);
        train(run[d], STEPS, loss[d], NULL, NULL);
        memcpy(mem[d], run[d]->ranks[0].be->mem_peak, sizeof mem[d]);
    }
    for (d = 1; d < 3; d++) e16[d] = max_rel(loss[d], loss[0], 0, STEPS);
    printf("     fp32 loss %.4f -> %.4f over %d steps; bf16 follows within %.2e, fp16 within %.2e\n", loss[0][0], loss[0][STEPS - 1], STEPS, e16[1], e16[2]);
    /* bf16 keeps 8 bits of mantissa (unit roundoff u = 2^-8 = 3.9e-3), fp16 11 (u = 2^-11 = 4.9e-4).
       Each op rounds what it stores once, so activations carry about u of relative error here and
       there; the loss averages them over 256 tokens, and the curves drift apart only as the weights
       do (fp32 master weights keep the updates themselves exact). Measured over these 30 steps of a
       stable run (lr 1e-3): bf16 at most 8.2e-4, fp16 4.1e-5. Bound: one unit roundoff of the storage
       type, a 4.8x (bf16) and 12x (fp16) margin; a lost rounding step, a loss scale not undone or a
       stale compute copy moves the loss by far more. Not 0: the storage really is 16-bit. */
    check(e16[1] <= 1.0 / 256 && e16[1] > 0, "bf16 curve follows fp32: max relative loss difference %.2e over %d steps (bound 2^-8)", e16[1], STEPS);
    check(e16[2] <= 1.0 / 2048 && e16[2] > 0, "fp16 curve follows fp32: max relative loss difference %.2e over %d steps (bound 2^-11)", e16[2], STEPS);
    check(loss[1][STEPS - 1] < loss[1][0] - 2 && loss[2][STEPS - 1] < loss[2][0] - 2, "bf16 and fp16 learn: %.3f -> %.3f, %.3f -> %.3f", loss[1][0],
          loss[1][STEPS - 1], loss[2][0], loss[2][STEPS - 1]);
    check(2 * mem[1][MGT_MEM_PARAMS] == mem[0][MGT_MEM_PARAMS] && 2 * mem[1][MGT_MEM_OPTIMIZER] == 3 * mem[0][MGT_MEM_OPTIMIZER] &&
              mem[1][MGT_MEM_GRADS] == mem[0][MGT_MEM_GRADS] && mem[1][MGT_MEM_ACTIVATIONS] < mem[0][MGT_MEM_ACTIVATIONS] * 0.6,
          "bf16 memory: params %zu (fp32 %zu), optimizer %zu with master weights (fp32 %zu), fp32 grads %zu, activations %zu (fp32 %zu)",
          mem[1][MGT_MEM_PARAMS], mem[0][MGT_MEM_PARAMS], mem[1][MGT_MEM_OPTIMIZER], mem[0][MGT_MEM_OPTIMIZER], mem[1][MGT_MEM_GRADS],
          mem[1][MGT_MEM_ACTIVATIONS], mem[0][MGT_MEM_ACTIVATIONS]);
    { /* Adam hides a gradient scale in m / sqrt(v), not in the moments: fp16's loss scale must be undone */
        mgt__layout g;
        float **m[3];
        double rms[3] = {0, 0, 0};
        int t;
        size_t i;
        mgt__global_layout(&run[0]->plan.cfg, &g);
        for (d = 0; d < 3; d++) {
            m[d] = mgt__gather_global(run[d], &g, MGT__BUF_M);
            for (t = 0; t < g.n; t++)
                for (i = 0; i < g.t[t].info.numel; i++) rms[d] += (double)m[d][t][i] * m[d][t][i];
            mgt__free_global(&g, m[d]);
        }
        mgt__layout_free(&g);
        check(fabs(sqrt(rms[2] / rms[0]) - 1) < 0.05 && fabs(sqrt(rms[1] / rms[0]) - 1) < 0.05,
              "AdamW first moments at step %d: RMS ratio to fp32 %.4f (bf16), %.4f (fp16, loss scale undone; bound 5%%)", STEPS, sqrt(rms[1] / rms[0]),
              sqrt(rms[2] / rms[0]));
    }
    for (d = 0; d < 3; d++) mgt_run_destroy(run[d]);
}
#endif

/* ---- 1b. bf16 GEMMs through oneDNN against the widened path --------------------------------------
   oneDNN multiplies the same bf16 values with fp32 accumulation, in its own order, so its fp32
   sums differ from sgemm's by rounding alone: |difference| <= 2 (K + 2) 2^-24 S for each element,
   S the sum of the magnitudes added (the classic bound on a K-term fp32 sum is (K - 1) 2^-24 S;
   twice that leaves room for the fused pair products of the bf16 dot instruction). What is stored
   in bf16 is then the same rounding or its neighbour (1 ulp). A wrong transpose, stride, bias
   offset or block of the split moves elements by far more. Shapes: odd sizes (not multiples of the
   split's 16 or of the instruction's pairs), the split along M (N >= OC) and along N (N < OC). */
static void *refuse_plan(int ta, int tb, int M, int N, int K, int lda, int ldb, int ldc, int bias, int c_bf16, int accumulate, char *why, size_t cap) {
    (void)ta; (void)tb; (void)M; (void)N; (void)K; (void)lda; (void)ldb; (void)ldc; (void)bias; (void)c_bf16; (void)accumulate;
    snprintf(why, cap, "refused by the test");
    return NULL;
}
/* a GEMM oneDNN cannot plan widens instead, in a workspace grown for it (the backend's was sized
   without the GEMMs' operands), and so do the GEMMs after it: the same numbers as the widened path */
static void test_onednn_refusal(void) {
    static const mgt_onednn_api refusing = {MGT_ONEDNN_ABI, NULL, refuse_plan, NULL};
    enum { N = 40, C = 24, OC = 36 };
    mgt_backend *bo, *bw;
    pair x = input((size_t)N * C, 91, -1, 1, MGT_BF16), w = input((size_t)OC * C, 92, -1, 1, MGT_BF16), dout = input((size_t)N * OC, 93, -1, 1, MGT_BF16);
    uint16_t o1[N * OC], o2[N * OC], d1[N * C], d2[N * C];
    float g1[OC * C + OC], g2[OC * C + OC];
    if (mgt__cpu_backend_create_typed(&bo, 2, 16, MGT_BF16, 16) != MGT_OK || mgt__cpu_backend_create_typed(&bw, 2, 16, MGT_BF16, 1 << 16) != MGT_OK) {
        printf("FAIL backend: %s\n", mgt_last_error());
        exit(1);
    }
    ((mgt__cpu *)bo->impl)->onednn = &refusing;
    ((mgt__cpu *)bw->impl)->onednn = NULL;
    memset(g1, 0, sizeof g1); memset(g2, 0, sizeof g2);
    bo->matmul_forward(bo, o1, x.h, w.h, NULL, N, C, OC);
    bw->matmul_forward(bw, o2, x.h, w.h, NULL, N, C, OC);
    check(((mgt__cpu *)bo->impl)->onednn == NULL && ((mgt__cpu *)bo->impl)->wide_floats > 16 && !memcmp(o1, o2, sizeof o1),
          "bf16 GEMM oneDNN refused to plan: widened instead (workspace grown from 16 to %zu floats), forward bit-identical, oneDNN not asked again",
          ((mgt__cpu *)bo->impl)->wide_floats);
    bo->matmul_backward(bo, d1, g1, g1 + OC * C, dout.h, x.h, w.h, N, C, OC);
    bw->matmul_backward(bw, d2, g2, g2 + OC * C, dout.h, x.h, w.h, N, C, OC);
    check(!memcmp(d1, d2, sizeof d1) && !memcmp(g1, g2, sizeof g1), "and its backward after it: bit-identical to the widened path's");
    pair_free(&x); pair_free(&w); pair_free(&dout);
    mgt__cpu_backend_destroy(bo);
    mgt__cpu_backend_destroy(bw);
}
/* two bf16 results of one fp32 sum of n terms whose magnitudes add to S, accumulated in different
   orders and rounded: each within n u S of the exact sum (u = 2^-24) and half a bf16 step of that.
   Where the sum cancels (a result far smaller than S) they may be many bf16 steps apart. */
static int summed_alike(uint16_t a, uint16_t b, int n, double S) {
    double fa = mgt__bf16_to_f32(a), fb = mgt__bf16_to_f32(b), big = fabs(fa) > fabs(fb) ? fabs(fa) : fabs(fb);
    return fabs(fa - fb) <= 2.0 * (n + 2) * ldexp(1.0, -24) * S + ldexp(big, -7);
}
static void test_onednn(void) {
    /* N, C, OC; the last one's output blocks (130 x 10000 a thread) exceed mgt_onednn.c's CHUNK_ELEMS:
       oneDNN computes them in column chunks, a remainder chunk too, with the bias */
    static const int shapes[4][3] = {{50, 33, 20}, {20, 33, 70}, {37, 129, 45}, {130, 33, 20000}};
    mgt_backend *bo, *bw;
    char what[400];
    int s;
    test_onednn_refusal();
    if (!mgt_cpu_bf16_gemm(what, sizeof what)) { printf("skip bf16 GEMMs through oneDNN: the CPU backend uses %s\n", what); return; }
    if (mgt__cpu_backend_create_typed(&bo, 2, 16, MGT_BF16, 1 << 16) != MGT_OK || mgt__cpu_backend_create_typed(&bw, 2, 16, MGT_BF16, 1 << 16) != MGT_OK) {
        printf("FAIL backend: %s\n", mgt_last_error());
        exit(1);
    }
    ((mgt__cpu *)bw->impl)->onednn = NULL;
    check(((mgt__cpu *)bo->impl)->onednn != NULL, "bf16 CPU backend multiplies through %s", what);
    for (s = 0; s < 4; s++) {
        int N = shapes[s][0], C = shapes[s][1], OC = shapes[s][2], r, c, k;
        pair x = input((size_t)N * C, 81, -1, 1, MGT_BF16), w = input((size_t)OC * C, 82, -1, 1, MGT_BF16), bb = input((size_t)OC, 83, -1, 1, MGT_BF16);
        pair dout = input((size_t)N * OC, 84, -1, 1, MGT_BF16);
        uint16_t *out_o = (uint16_t *)calloc((size_t)N * OC, 2), *out_w = (uint16_t *)calloc((size_t)N * OC, 2);
        uint16_t *di_o = (uint16_t *)calloc((size_t)N * C, 2), *di_w = (uint16_t *)calloc((size_t)N * C, 2);
        float *dw_o = (float *)malloc(sizeof(float) * ((size_t)OC * C + OC)), *dw_w = (float *)malloc(sizeof(float) * ((size_t)OC * C + OC));
        size_t i, out_ulp = 0, out_far = 0, di_ulp = 0, di_far = 0, dw_far = 0;
        double dw_worst = 0;
        for (i = 0; i < (size_t)OC * C + OC; i++) dw_o[i] = dw_w[i] = urandf(85, i, -1, 1); /* accumulated into */
        bo->matmul_forward(bo, out_o, x.h, w.h, bb.h, N, C, OC);
        bw->matmul_forward(bw, out_w, x.h, w.h, bb.h, N, C, OC);
        bo->matmul_backward(bo, di_o, dw_o, dw_o + (size_t)OC * C, dout.h, x.h, w.h, N, C, OC);
        bw->matmul_backward(bw, di_w, dw_w, dw_w + (size_t)OC * C, dout.h, x.h, w.h, N, C, OC);
        for (i = 0; i < (size_t)N * OC; i++) { /* out[r][o] = bias[o] + sum over c of x[r][c] w[o][c] */
            int d = abs((int)out_o[i] - (int)out_w[i]); /* same sign: adjacent bf16 values differ by 1 in their bits */
            double S = fabs((double)bb.f[i % (size_t)OC]);
            if (d > 1)
                for (c = 0; c < C; c++) S += fabs((double)x.f[i / (size_t)OC * C + c] * w.f[i % (size_t)OC * C + c]);
            out_ulp += d == 1; out_far += d > 1 && !summed_alike(out_o[i], out_w[i], C, S);
        }
        for (i = 0; i < (size_t)N * C; i++) { /* dinp[r][c] = sum over o of dout[r][o] w[o][c] */
            int d = abs((int)di_o[i] - (int)di_w[i]);
            double S = 0;
            if (d > 1)
                for (k = 0; k < OC; k++) S += fabs((double)dout.f[i / (size_t)C * OC + k] * w.f[(size_t)k * C + i % (size_t)C]);
            di_ulp += d == 1; di_far += d > 1 && !summed_alike(di_o[i], di_w[i], OC, S);
        }
        for (r = 0; r < OC; r++)
            for (c = 0; c < C; c++) { /* dW[r][c] += sum over rows k of dout[k][r] x[k][c] */
                double S = fabs(urandf(85, (size_t)r * C + c, -1, 1)), diff = fabs((double)dw_o[(size_t)r * C + c] - dw_w[(size_t)r * C + c]), bound;
                for (k = 0; k < N; k++) S += fabs((double)dout.f[(size_t)k * OC + r] * x.f[(size_t)k * C + c]);
                bound = 2.0 * (N + 2) * ldexp(1.0, -24) * S;
                dw_far += diff > bound;
                if (diff / bound > dw_worst) dw_worst = diff / bound;
            }
        for (r = 0; r < OC; r++) dw_far += dw_o[(size_t)OC * C + r] != dw_w[(size_t)OC * C + r]; /* the bias gradient: the same sums in the same order */
        check(out_far == 0 && di_far == 0 && dw_far == 0,
              "oneDNN bf16 GEMMs N %d C %d OC %d (split along %s): forward %zu of %d and dinp %zu of %d elements 1 ulp from the widened path's, none "
              "further but where a sum cancels; dW within %.2f of its rounding bound, dbias identical",
              N, C, OC, N >= OC ? "M" : "N", out_ulp, N * OC, di_ulp, N * C, dw_worst);
        pair_free(&x); pair_free(&w); pair_free(&bb); pair_free(&dout);
        free(out_o); free(out_w); free(di_o); free(di_w); free(dw_o); free(dw_w);
    }
    mgt__cpu_backend_destroy(bo);
    mgt__cpu_backend_destroy(bw);
}

/* fp16 from a loss scale of 2^40 on 1 and 4 ranks: the exact sequence of skips and scales */
static void test_loss_scale(void) {
    static const int lay[2][4] = {{1, 1, 1, 0}, {2, 1, 2, 1}};
    double scales[2][STEPS], loss[2][STEPS];
    int skipped[2][STEPS], k, s, first_good[2];
    mgt_config cfg;
    for (k = 0; k < 2; k++) {
        mgt_run *run;
        mgt_stats st;
        config(&cfg, "fp16", lay[k][0], lay[k][1], lay[k][2], lay[k][3], k ? "scale4" : "scale1");
        set(&cfg, "precision.loss_scale=1099511627776"); /* 2^40 */
        run = create(&cfg);
        train(run, STEPS, loss[k], scales[k], skipped[k]);
        mgt_run_stats(run, &st);
        for (first_good[k] = 0; first_good[k] < STEPS && skipped[k][first_good[k]]; first_good[k]++) {}
        check(st.skipped_steps == first_good[k] && st.loss_scale == scales[k][STEPS - 1], "%d ranks: %d steps skipped, all before the first update; stats show scale %g",
              lay[k][0] * lay[k][1] * lay[k][2], st.skipped_steps, st.loss_scale);
        mgt_run_destroy(run);
    }
    /* The largest dlogit is about scale / (8 x 32 tokens) (p - 1 for the target, p ~ 1/256): it
       overflows fp16 (65504) for the 17 scales 2^40 .. 2^24; the backward behind it (the head's and
       the LayerNorms' input gradients) still overflows at 2^23 and 2^22, so measured: 19 skips, the
       first update at 2^21, then no overflow for the rest (the window of 1000 is not reached). */
    {
        int ok = first_good[0] == 19 && first_good[1] == 19;
        for (s = 0; s < STEPS && ok; s++) ok = scales[0][s] == ldexp(1.0, 40 - (s < 19 ? s + 1 : 19)) && scales[1][s] == scales[0][s];
        check(ok, "fp16 from 2^40: steps 1..%d skipped, the scale halves each time to 2^%d, then trains; the same on 4 ranks (dp2 pp2 zero1)",
              first_good[0], (int)log2(scales[0][STEPS - 1]));
        check(loss[0][STEPS - 1] < loss[0][0] - 0.5 && max_rel(loss[1], loss[0], 0, STEPS) < 1.0 / 64,
              "after the skips it learns: loss %.3f -> %.3f; 4 ranks follow within %.2e", loss[0][0], loss[0][STEPS - 1], max_rel(loss[1], loss[0], 0, STEPS));
    }
    { /* the window: 3 finite steps double the scale */
        mgt_run *run;
        static const double want[7] = {1024, 1024, 2048, 2048, 2048, 4096, 4096};
        int ok = 1;
        config(&cfg, "fp16", 1, 1, 1, 0, "window");
        set(&cfg, "precision.loss_scale=1024");
        set(&cfg, "precision.loss_scale_window=3");
        run = create(&cfg);
        train(run, 7, NULL, scales[0], skipped[0]);
        for (s = 0; s < 7; s++) ok &= scales[0][s] == want[s] && !skipped[0][s];
        check(ok, "fp16 window 3 from 1024: scale after steps 1..7 = %g %g %g %g %g %g %g", scales[0][0], scales[0][1], scales[0][2], scales[0][3],
              scales[0][4], scales[0][5], scales[0][6]);
        mgt_run_destroy(run);
    }
    {
        mgt_config bad;
        config(&bad, "fp16", 1, 1, 1, 0, "bad");
        set(&bad, "precision.loss_scale=1000");
        check(mgt_config_validate(&bad) == MGT_ERROR_CONFIG && strstr(mgt_last_error(), "power of two"), "loss_scale = 1000 refused: %s", mgt_last_error());
    }
}

/* a NaN in the gradient at step 3 of an fp32 run on 8 ranks and on 1 */
static void test_skip(void) {
    mgt_config cfg;
    mgt_run *one, *many, *before;
    fault_world fw_one, fw_many;
    double l1[8], l8[8];
    int sk[8], s, found = 0, n, i;
    mgt_event ev[64];
    config(&cfg, "fp32", 1, 1, 1, 0, "skip1");
    one = fault_run_create(&cfg, &fw_one);
    fw_one.nan_from = fw_one.nan_to = 3;
    train(one, 8, l1, NULL, NULL);
    config(&cfg, "fp32", 2, 2, 2, 1, "skip8");
    many = fault_run_create(&cfg, &fw_many);
    fw_many.nan_from = fw_many.nan_to = 3;
    before = create(&cfg);
    train(many, 2, l8, NULL, sk);
    train(before, 2, NULL, NULL, NULL);
    train(many, 3, l8, NULL, sk);
    check(sk[2] && many->skipped == 1 && same_params(many, before), "8 ranks, NaN at step 3: the update skipped (weights bit-identical to step 2's)");
    train(many, 8, l8, NULL, sk);
    for (s = 3; s < 8; s++) found += sk[s];
    check(found == 0 && isfinite(l8[7]) && max_rel(l8, l1, 3, 8) < 1e-5, "training goes on: steps 4..8 updated, losses as one rank with the same skip (%.2e)",
          max_rel(l8, l1, 3, 8));
    { /* the DP replicas stayed equal: every rank skipped, none updated alone */
        mgt__rank *a = mgt__rank_at(many, 0, 1, 1), *b = mgt__rank_at(many, 1, 1, 1);
        check(!memcmp(a->params, b->params, sizeof(float) * a->lay.size), "DP replicas bit-identical after the skipped step");
    }
    n = published(many, NULL, 0, NULL, 0, ev, 64).events_n;
    for (i = 0, found = 0; i < n; i++) found |= ev[i].level == MGT_LOG_WARN && strstr(ev[i].text, "skipped") != NULL;
    check(found, "a warning event says the update was skipped");
    mgt_run_destroy(one);
    mgt_run_destroy(many);
    mgt_run_destroy(before);
    fault_world_free(&fw_one);
    fault_world_free(&fw_many);
    /* non-finite from step 2 on: max_skipped = 3 fails at step 4 with a clear error, on bf16 as on fp32 */
    for (i = 0; i < 2; i++) {
        mgt_result res = MGT_OK;
        double t0 = mgt_now();
        config(&cfg, i ? "bf16" : "fp32", 2, 1, 2, 3, "fail");
        set(&cfg, "precision.max_skipped=3");
        many = fault_run_create(&cfg, &fw_many);
        fw_many.nan_from = 2;
        fw_many.nan_to = 1000;
        for (s = 0; s < 6 && res == MGT_OK; s++) res = mgt_run_step(many);
        check(res == MGT_ERROR_NUMERIC && many->step == 4 && strstr(mgt_last_error(), "max_skipped") && mgt_now() - t0 < 30,
              "%s, 4 ranks, non-finite from step 2: fails at step %d: %s", dt_name[i], many->step, mgt_last_error());
        mgt_run_destroy(many);
        fault_world_free(&fw_many);
    }
}

/* checkpoints: fp32 master weights in the file, whatever the storage type */
static void test_checkpoints(void) {
    mgt_config cfg;
    mgt_run *full, *part, *back;
    double lf[8], lp[8];
    char path[1200];
    config(&cfg, "bf16", 2, 1, 1, 1, "ck16");
    full = create(&cfg);
    train(full, 8, lf, NULL, NULL);
    part = create(&cfg);
    train(part, 4, lp, NULL, NULL);
    mgt_run_save(part, path, sizeof path);
    back = create(&cfg);
    if (mgt_run_resume(back, path) != MGT_OK) { printf("FAIL resume: %s\n", mgt_last_error()); exit(1); }
    train(back, 8, lp, NULL, NULL);
    check(!memcmp(lp + 4, lf + 4, 4 * sizeof(double)) && same_params(back, full), "bf16 dp2 zero1 resumed at step 4: losses 5..8 and master weights bit-identical");
    mgt_run_destroy(back);
    config(&cfg, "fp32", 1, 2, 1, 0, "ck16");
    back = create(&cfg);
    if (mgt_run_resume(back, path) != MGT_OK) { printf("FAIL resume in fp32: %s\n", mgt_last_error()); exit(1); }
    check(same_params(back, part), "fp32 tp2 resumes the bf16 checkpoint: the master weights, bit for bit");
    train(back, 8, lp, NULL, NULL);
    check(max_rel(lp, lf, 4, 8) < 1.0 / 256, "and trains on: losses 5..8 within %.2e of the bf16 run's (bound 2^-8, as the curves)", max_rel(lp, lf, 4, 8));
    mgt_run_destroy(back);
    mgt_run_destroy(part);
    mgt_run_destroy(full);
    { /* fp16: the loss scale comes back */
        config(&cfg, "fp16", 1, 1, 1, 0, "ck_fp16");
        set(&cfg, "precision.loss_scale=1024");
        set(&cfg, "precision.loss_scale_window=2");
        part = create(&cfg);
        train(part, 3, NULL, NULL, NULL);
        mgt_run_save(part, path, sizeof path);
        full = create(&cfg);
        mgt_run_resume(full, path);
        check(full->loss_scale == 2048 && part->loss_scale == 2048 && full->good_steps == part->good_steps,
              "fp16 checkpoint: loss scale %g and window count %d restored", full->loss_scale, full->good_steps);
        train(part, 6, lf, NULL, NULL);
        train(full, 6, lp, NULL, NULL);
        check(!memcmp(lp + 3, lf + 3, 3 * sizeof(double)) && full->loss_scale == part->loss_scale, "fp16 resumed: steps 4..6 bit-identical, scale %g", full->loss_scale);
        mgt_run_destroy(part);
        mgt_run_destroy(full);
    }
}

int main(int argc, char **argv) {
    (void)argv;
    make_workdir(dir, sizeof dir, "test_precision", 100000, 11);
    test_ops16(MGT_BF16);
    test_ops16(MGT_F16);
    test_onednn();
    if (argc > 1) return finish(dir, "precision (ops)");
#ifdef __SANITIZE_THREAD__
    printf("     (TSan: the single-rank curves are left to the plain and ASan builds; nothing for TSan there, and 30 s under it)\n");
#else
    test_curves();
#endif
    test_loss_scale();
    test_skip();
    test_checkpoints();
    return finish(dir, "precision");
}
