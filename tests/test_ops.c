/* test_ops.c - every op of the CPU backend (struct mgt_backend in mgt.h) checked in double precision.

     mkdir -p build
     gcc -std=gnu11 -O2 -g -Wall -Wextra -Werror -pthread -I. $(pkg-config --cflags inih openblas) \
         -o build/test_ops tests/test_ops.c $(pkg-config --libs inih openblas) -lm
     build/test_ops          # one line per check; exit 0 when all pass, 1 otherwise

   For each op, with 1 thread and then with 2 threads:
     1. the float forward against an independent double-precision reference written here with plain
        loops (no BLAS, no code shared with mgt.h);
     2. the float backward against central finite differences of that double reference, for the
        scalar objective L = sum(out * R) with a fixed random R (so dout = R), on every element of
        every input and parameter (the shapes are small);
     3. the accumulation contract: parameter gradients (and layernorm's dinp) start at a non-zero
        pattern P and must end at P + gradient; activation gradients and forward outputs start as NaN
        and must be fully written (=), which also shows that nothing reads them;
   then that 1 and 2 threads give bitwise-identical results where mgt.h promises a fixed reduction
   order (layernorm dweight/dbias, matmul dbias, encoder dwte/dwpe, sum_squares). The other outputs
   are compared too and printed as "info" lines without failing.

   Shapes exercise remainders: C = 43 and 7 (not multiples of the 8-lane sums nor of the 16-wide
   thread spans), T = 7 and 13, NH = 3 with hs = 8 and 7, V = 37 padded to Vp = 48, and N both
   larger and smaller than OC so the GEMM is split along each of its dimensions.

   Error measure: err = max_i |a_i - b_i| / (|b_i| + s), where a is the backend (float), b the
   double reference, and s the RMS of b: a relative error for the large elements and an error relative
   to the tensor's scale for the elements near zero (whose float error is set by the scale of the
   terms that cancelled, not by their own size). Tolerances (float32 eps = 6e-8):
     - forwards: reductions here are at most 43 terms long; float error is ~sqrt(K) eps typically and
       K eps = 2.6e-6 at worst, so 1e-5 leaves room while a wrong formula gives > 1e-3;
     - backwards: the double finite differences use h = 1e-6, with truncation error h^2 f''' ~ 1e-12
       and rounding error eps_double |L| / h ~ 1e-9, both far below float rounding; the float
       backward chains two or three reductions (up to 45 terms) and uses the float mean/rstd/att of
       the forward, ~1e-6; tolerance 1e-4 (100x margin, while a missing term or factor gives > 1e-2);
     - elementwise ops with an exact float answer (add, scale, zero) must match bit for bit.
   Inputs come from mgt_hash3, so every run sees the same numbers. */
#define MGT_IMPLEMENTATION
#include "mgt.h" // defines: mgt_backend, mgt__cpu_backend_create_typed/destroy, mgt_hash3, mgt__uniform

#include <math.h>   // defines: fabs, sqrt, exp, log, tanh, NAN, isnan
#include <stdio.h>  // defines: printf
#include <stdlib.h> // defines: malloc, free
#include <string.h> // defines: memcpy, memcmp, strcmp
#include <time.h>   // defines: clock_gettime

#define TOL_FWD 1e-5
#define TOL_BWD 1e-4

static int g_failures, g_checks, g_threads;

static void report(const char *op, const char *what, double err, double tol) {
    int ok = err <= tol; /* NaN fails */
    g_checks++;
    if (!ok) g_failures++;
    printf("%-4s threads=%d  %-18s %-40s max_err %.3e  tol %.1e\n", ok ? "ok" : "FAIL", g_threads, op, what, err, tol);
}

/* ---- deterministic inputs and small helpers ------------------------------------------------- */

static double urand(uint64_t tag, uint64_t i, double lo, double hi) {
    return lo + (hi - lo) * mgt__uniform(mgt_hash3(0x6d67745f6f7073ULL, tag, i));
}
static float *falloc(size_t n) {
    float *x = (float *)malloc(sizeof(float) * (n ? n : 1));
    if (!x) { fprintf(stderr, "out of memory\n"); exit(2); }
    return x;
}
static double *dalloc(size_t n) {
    double *x = (double *)calloc(n ? n : 1, sizeof(double));
    if (!x) { fprintf(stderr, "out of memory\n"); exit(2); }
    return x;
}
static float *frand(size_t n, uint64_t tag, double lo, double hi) {
    float *x = falloc(n);
    size_t i;
    for (i = 0; i < n; i++) x[i] = (float)urand(tag, i, lo, hi);
    return x;
}
static float *fnan(size_t n) {
    float *x = falloc(n);
    size_t i;
    for (i = 0; i < n; i++) x[i] = NAN;
    return x;
}
static float *fcopy(const float *x, size_t n) {
    float *y = falloc(n);
    memcpy(y, x, sizeof(float) * n);
    return y;
}
static double *to_double(const float *x, size_t n) {
    double *y = dalloc(n);
    size_t i;
    for (i = 0; i < n; i++) y[i] = x[i];
    return y;
}
static double dot(const double *a, const double *b, size_t n) {
    double s = 0;
    size_t i;
    for (i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}
static double rms(const double *b, size_t n) {
    double s = 0;
    size_t i;
    for (i = 0; i < n; i++) s += b[i] * b[i];
    return n ? sqrt(s / (double)n) : 0;
}
/* max |a - b| / (|b| + atol); +inf when a holds a NaN or an infinity */
static double max_err_atol(const float *a, const double *b, size_t n, double atol) {
    double m = 0;
    size_t i;
    for (i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / (fabs(b[i]) + atol);
        if (!(e < INFINITY)) return INFINITY;
        if (e > m) m = e;
    }
    return m;
}
/* the test's standard measure: atol is the RMS of the reference (see the top comment) */
static double max_err(const float *a, const double *b, size_t n) {
    double s = rms(b, n);
    return max_err_atol(a, b, n, s > 0 ? s : 1e-30);
}
/* P + g: the expected value of a gradient buffer that started at P */
static double *plus(const float *P, const double *g, size_t n) {
    double *y = dalloc(n);
    size_t i;
    for (i = 0; i < n; i++) y[i] = (double)P[i] + g[i];
    return y;
}

/* central finite differences of f with respect to x[0..n), in double */
typedef double (*objective_fn)(void *ctx);
static void fd_grad(objective_fn f, void *ctx, double *x, size_t n, double *g) {
    const double h = 1e-6;
    size_t i;
    for (i = 0; i < n; i++) {
        double x0 = x[i], xp = x0 + h, xm = x0 - h, fp, fm;
        x[i] = xp;
        fp = f(ctx);
        x[i] = xm;
        fm = f(ctx);
        x[i] = x0;
        g[i] = (fp - fm) / (xp - xm);
    }
}

/* ---- bitwise comparison of 1 and 2 threads --------------------------------------------------- */

typedef struct snapshot { char name[96]; void *data; size_t bytes; } snapshot;
static snapshot g_snaps[128];
static int g_nsnaps;

/* With 1 thread, keep a copy; with more, compare with that copy. claimed: mgt.h promises a fixed
   reduction order, so a difference fails; otherwise the result is printed as information. */
static void record(const char *name, const void *data, size_t bytes, int claimed) {
    int i;
    if (g_threads == 1) {
        if (g_nsnaps == (int)(sizeof g_snaps / sizeof g_snaps[0])) { fprintf(stderr, "too many snapshots\n"); exit(2); }
        snprintf(g_snaps[g_nsnaps].name, sizeof g_snaps[0].name, "%s", name);
        g_snaps[g_nsnaps].data = malloc(bytes ? bytes : 1);
        if (!g_snaps[g_nsnaps].data) { fprintf(stderr, "out of memory\n"); exit(2); }
        memcpy(g_snaps[g_nsnaps].data, data, bytes);
        g_snaps[g_nsnaps].bytes = bytes;
        g_nsnaps++;
        return;
    }
    for (i = 0; i < g_nsnaps; i++) {
        if (strcmp(g_snaps[i].name, name) == 0) {
            size_t diff = 0, j;
            const unsigned char *a = (const unsigned char *)data, *b = (const unsigned char *)g_snaps[i].data;
            if (g_snaps[i].bytes != bytes) diff = bytes;
            else for (j = 0; j < bytes; j++) diff += a[j] != b[j];
            if (claimed) {
                char what[140];
                snprintf(what, sizeof what, "%s bitwise = 1 thread (bytes differing)", name);
                report("determinism", what, (double)diff, 0.0);
            } else {
                printf("info threads=%d  %-18s %s: %s 1 thread\n", g_threads, "determinism", name,
                       diff ? "differs from" : "bitwise identical to");
            }
            return;
        }
    }
    fprintf(stderr, "no 1-thread snapshot named %s\n", name);
    exit(2);
}

/* ---- encoder ----------------------------------------------------------------------------------- */

static void ref_encoder(double *out, const int *tok, const double *wte, const double *wpe, int B, int T, int C) {
    int b, t, c;
    for (b = 0; b < B; b++)
        for (t = 0; t < T; t++)
            for (c = 0; c < C; c++)
                out[((size_t)b * T + t) * C + c] = wte[(size_t)tok[b * T + t] * C + c] + wpe[(size_t)t * C + c];
}
typedef struct enc_ctx { const int *tok; double *wte, *wpe, *R, *out; int B, T, C; } enc_ctx;
static double enc_obj(void *p) {
    enc_ctx *k = (enc_ctx *)p;
    ref_encoder(k->out, k->tok, k->wte, k->wpe, k->B, k->T, k->C);
    return dot(k->out, k->R, (size_t)k->B * k->T * k->C);
}

static void test_encoder(mgt_backend *be) {
    const int B = 2, T = 7, C = 24, V = 11;
    size_t n = (size_t)B * T * C, i;
    int tok[2 * 7];
    float *wte = frand((size_t)V * C, 101, -1, 1), *wpe = frand((size_t)T * C, 102, -1, 1), *R = frand(n, 103, -1, 1);
    float *out = fnan(n), *dwte = frand((size_t)V * C, 104, -1, 1), *dwpe = frand((size_t)T * C, 105, -1, 1);
    float *P_wte = fcopy(dwte, (size_t)V * C), *P_wpe = fcopy(dwpe, (size_t)T * C);
    enc_ctx k;
    double *g_wte = dalloc((size_t)V * C), *g_wpe = dalloc((size_t)T * C), *e_wte, *e_wpe;
    for (i = 0; i < (size_t)(B * T); i++) tok[i] = (int)(mgt_hash3(7, 106, i) % (uint64_t)(V - 2)); /* repeats; rows V-2, V-1 unused */
    tok[3] = tok[5]; /* the same token at two positions of a row */
    k.tok = tok; k.B = B; k.T = T; k.C = C;
    k.wte = to_double(wte, (size_t)V * C); k.wpe = to_double(wpe, (size_t)T * C); k.R = to_double(R, n); k.out = dalloc(n);
    ref_encoder(k.out, tok, k.wte, k.wpe, B, T, C);

    be->encoder_forward(be, out, tok, wte, 0, V, wpe, B, T, C);
    /* one float addition: error <= eps/2 of the result */
    report("encoder_forward", "out", max_err(out, k.out, n), 1e-6);
    record("encoder_forward out", out, sizeof(float) * n, 0);

    be->encoder_backward(be, dwte, dwpe, R, tok, 0, V, B, T, C);
    fd_grad(enc_obj, &k, k.wte, (size_t)V * C, g_wte);
    fd_grad(enc_obj, &k, k.wpe, (size_t)T * C, g_wpe);
    e_wte = plus(P_wte, g_wte, (size_t)V * C);
    e_wpe = plus(P_wpe, g_wpe, (size_t)T * C);
    /* sums of at most B*T = 14 float terms onto P */
    report("encoder_backward", "dwte = P + fd (+=, unused rows kept)", max_err(dwte, e_wte, (size_t)V * C), TOL_FWD);
    report("encoder_backward", "dwpe = P + fd (+=)", max_err(dwpe, e_wpe, (size_t)T * C), TOL_FWD);
    record("encoder_backward dwte", dwte, sizeof(float) * V * C, 1);
    record("encoder_backward dwpe", dwpe, sizeof(float) * T * C, 1);

    free(wte); free(wpe); free(R); free(out); free(dwte); free(dwpe); free(P_wte); free(P_wpe);
    free(k.wte); free(k.wpe); free(k.R); free(k.out); free(g_wte); free(g_wpe); free(e_wte); free(e_wpe);
}

/* ---- layernorm --------------------------------------------------------------------------------- */

static void ref_layernorm(double *out, double *mean, double *rstd, const double *x, const double *w, const double *b, int N, int C) {
    int r, c;
    for (r = 0; r < N; r++) {
        const double *xr = x + (size_t)r * C;
        double m = 0, v = 0, s;
        for (c = 0; c < C; c++) m += xr[c];
        m /= C;
        for (c = 0; c < C; c++) v += (xr[c] - m) * (xr[c] - m);
        v /= C; /* biased variance */
        s = 1.0 / sqrt(v + 1e-5);
        for (c = 0; c < C; c++) out[(size_t)r * C + c] = (xr[c] - m) * s * w[c] + b[c];
        if (mean) mean[r] = m;
        if (rstd) rstd[r] = s;
    }
}
typedef struct ln_ctx { double *x, *w, *b, *R, *out; int N, C; } ln_ctx;
static double ln_obj(void *p) {
    ln_ctx *k = (ln_ctx *)p;
    ref_layernorm(k->out, NULL, NULL, k->x, k->w, k->b, k->N, k->C);
    return dot(k->out, k->R, (size_t)k->N * k->C);
}

static void test_layernorm(mgt_backend *be, int N, int C) {
    size_t n = (size_t)N * C;
    char what[96], name[96];
    float *x = frand(n, 201 + C, -2, 2.5), *w = frand((size_t)C, 202, 0.5, 1.5), *b = frand((size_t)C, 203, -0.5, 0.5);
    float *R = frand(n, 204, -1, 1), *out = fnan(n), *mean = fnan((size_t)N), *rstd = fnan((size_t)N);
    float *dinp = frand(n, 205, -1, 1), *dw = frand((size_t)C, 206, -1, 1), *db = frand((size_t)C, 207, -1, 1);
    float *P_inp = fcopy(dinp, n), *P_w = fcopy(dw, (size_t)C), *P_b = fcopy(db, (size_t)C);
    double *rmean = dalloc((size_t)N), *rrstd = dalloc((size_t)N), *g_x = dalloc(n), *g_w = dalloc((size_t)C), *g_b = dalloc((size_t)C);
    double *e;
    ln_ctx k;
    k.N = N; k.C = C; k.x = to_double(x, n); k.w = to_double(w, (size_t)C); k.b = to_double(b, (size_t)C);
    k.R = to_double(R, n); k.out = dalloc(n);
    ref_layernorm(k.out, rmean, rrstd, k.x, k.w, k.b, N, C);

    be->layernorm_forward(be, out, mean, rstd, x, w, b, N, C);
    snprintf(what, sizeof what, "out (N=%d C=%d)", N, C);
    report("layernorm_forward", what, max_err(out, k.out, n), TOL_FWD);
    report("layernorm_forward", "mean", max_err(mean, rmean, (size_t)N), TOL_FWD);
    report("layernorm_forward", "rstd", max_err(rstd, rrstd, (size_t)N), TOL_FWD);
    snprintf(name, sizeof name, "layernorm_forward out C=%d", C);
    record(name, out, sizeof(float) * n, 0);

    be->layernorm_backward(be, dinp, dw, db, R, x, w, mean, rstd, N, C);
    fd_grad(ln_obj, &k, k.x, n, g_x);
    fd_grad(ln_obj, &k, k.w, (size_t)C, g_w);
    fd_grad(ln_obj, &k, k.b, (size_t)C, g_b);
    /* dinp accumulates too (the residual stream): P + fd. Measured against the scale of the
       gradient alone, not of P + fd, so that P does not loosen the check. */
    e = plus(P_inp, g_x, n);
    report("layernorm_backward", "dinp = P + fd (+=)", max_err_atol(dinp, e, n, rms(g_x, n)), TOL_BWD);
    free(e);
    e = plus(P_w, g_w, (size_t)C);
    report("layernorm_backward", "dweight = P + fd (+=)", max_err_atol(dw, e, (size_t)C, rms(g_w, (size_t)C)), TOL_BWD);
    free(e);
    e = plus(P_b, g_b, (size_t)C);
    report("layernorm_backward", "dbias = P + fd (+=)", max_err_atol(db, e, (size_t)C, rms(g_b, (size_t)C)), TOL_BWD);
    free(e);
    snprintf(name, sizeof name, "layernorm_backward dinp C=%d", C);
    record(name, dinp, sizeof(float) * n, 0);
    snprintf(name, sizeof name, "layernorm_backward dweight C=%d", C);
    record(name, dw, sizeof(float) * C, 1);
    snprintf(name, sizeof name, "layernorm_backward dbias C=%d", C);
    record(name, db, sizeof(float) * C, 1);

    free(x); free(w); free(b); free(R); free(out); free(mean); free(rstd); free(dinp); free(dw); free(db);
    free(P_inp); free(P_w); free(P_b); free(rmean); free(rrstd); free(g_x); free(g_w); free(g_b);
    free(k.x); free(k.w); free(k.b); free(k.R); free(k.out);
}

/* ---- matmul ------------------------------------------------------------------------------------ */

static void ref_matmul(double *out, const double *inp, const double *w, const double *bias, int N, int C, int OC) {
    int r, o, c;
    for (r = 0; r < N; r++)
        for (o = 0; o < OC; o++) {
            double s = bias ? bias[o] : 0.0;
            for (c = 0; c < C; c++) s += inp[(size_t)r * C + c] * w[(size_t)o * C + c];
            out[(size_t)r * OC + o] = s;
        }
}
typedef struct mm_ctx { double *inp, *w, *bias, *R, *out; int N, C, OC; } mm_ctx;
static double mm_obj(void *p) {
    mm_ctx *k = (mm_ctx *)p;
    ref_matmul(k->out, k->inp, k->w, k->bias, k->N, k->C, k->OC);
    return dot(k->out, k->R, (size_t)k->N * k->OC);
}

static void test_matmul(mgt_backend *be, int N, int C, int OC, int has_bias) {
    size_t ni = (size_t)N * C, nw = (size_t)OC * C, no = (size_t)N * OC;
    char what[96], name[96], shape[48];
    float *inp = frand(ni, 301, -1, 1), *w = frand(nw, 302, -1, 1), *bias = has_bias ? frand((size_t)OC, 303, -1, 1) : NULL;
    float *R = frand(no, 304, -1, 1), *out = fnan(no), *dinp = fnan(ni), *dw = frand(nw, 305, -1, 1);
    float *db = has_bias ? frand((size_t)OC, 306, -1, 1) : NULL, *P_w = fcopy(dw, nw), *P_b = has_bias ? fcopy(db, (size_t)OC) : NULL;
    double *g_inp = dalloc(ni), *g_w = dalloc(nw), *g_b = dalloc((size_t)OC), *e;
    mm_ctx k;
    snprintf(shape, sizeof shape, "N=%d C=%d OC=%d%s", N, C, OC, has_bias ? "" : " nobias");
    k.N = N; k.C = C; k.OC = OC; k.inp = to_double(inp, ni); k.w = to_double(w, nw);
    k.bias = has_bias ? to_double(bias, (size_t)OC) : NULL; k.R = to_double(R, no); k.out = dalloc(no);
    ref_matmul(k.out, k.inp, k.w, k.bias, N, C, OC);

    be->matmul_forward(be, out, inp, w, bias, N, C, OC);
    snprintf(what, sizeof what, "out (%s)", shape);
    report("matmul_forward", what, max_err(out, k.out, no), TOL_FWD);
    snprintf(name, sizeof name, "matmul_forward out %s", shape);
    record(name, out, sizeof(float) * no, 0);

    be->matmul_backward(be, dinp, dw, db, R, inp, w, N, C, OC);
    fd_grad(mm_obj, &k, k.inp, ni, g_inp);
    fd_grad(mm_obj, &k, k.w, nw, g_w);
    report("matmul_backward", "dinp = fd (=, NaN before)", max_err(dinp, g_inp, ni), TOL_BWD);
    e = plus(P_w, g_w, nw);
    report("matmul_backward", "dweight = P + fd (+=)", max_err_atol(dw, e, nw, rms(g_w, nw)), TOL_BWD);
    free(e);
    snprintf(name, sizeof name, "matmul_backward dinp %s", shape);
    record(name, dinp, sizeof(float) * ni, 0);
    snprintf(name, sizeof name, "matmul_backward dweight %s", shape);
    record(name, dw, sizeof(float) * nw, 0);
    if (has_bias) {
        fd_grad(mm_obj, &k, k.bias, (size_t)OC, g_b);
        e = plus(P_b, g_b, (size_t)OC);
        report("matmul_backward", "dbias = P + fd (+=)", max_err_atol(db, e, (size_t)OC, rms(g_b, (size_t)OC)), TOL_BWD);
        free(e);
        snprintf(name, sizeof name, "matmul_backward dbias %s", shape);
        record(name, db, sizeof(float) * OC, 1);
    }

    free(inp); free(w); free(bias); free(R); free(out); free(dinp); free(dw); free(db); free(P_w); free(P_b);
    free(g_inp); free(g_w); free(g_b); free(k.inp); free(k.w); free(k.bias); free(k.R); free(k.out);
}

/* the backward's two halves alone, as zero-bubble pipelining runs them (B: the input gradient, dweight
   and dbias NULL; W later: the weight gradient, dinp NULL): each equals the joint call's bitwise and
   leaves the other half's outputs as they were. elt 2: a 16-bit backend (storage-type operands), the
   wrapper that widens only what each half reads. */
static void test_matmul_split(mgt_backend *be, int N, int C, int OC, size_t elt) {
    size_t ni = (size_t)N * C, nw = (size_t)OC * C, no = (size_t)N * OC, i;
    float *src[4], *dw = frand(nw, 325, -1, 1), *dw2 = fcopy(dw, nw), *dw0 = fcopy(dw, nw);
    float *db = frand((size_t)OC, 326, -1, 1), *db2 = fcopy(db, (size_t)OC), *db0 = fcopy(db, (size_t)OC);
    char *op[4], *dinp = (char *)malloc(ni * elt), *dinp2 = (char *)malloc(ni * elt);
    double same;
    src[0] = frand(ni, 321, -1, 1); src[1] = frand(nw, 322, -1, 1); src[2] = frand(no, 323, -1, 1); src[3] = NULL; /* inp, w, dout */
    for (i = 0; i < 3; i++) { /* 16-bit: the upper halves of the fp32 values (bf16's truncation) */
        size_t n = i == 0 ? ni : i == 1 ? nw : no, j;
        op[i] = (char *)malloc(n * elt);
        for (j = 0; j < n; j++) memcpy(op[i] + j * elt, (char *)&src[i][j] + (elt == 2 ? 2 : 0), elt);
    }
    memset(dinp, 0x7f, ni * elt); memset(dinp2, 0x7f, ni * elt);
    be->matmul_backward(be, dinp, dw, db, op[2], op[0], op[1], N, C, OC);              /* joint */
    be->matmul_backward(be, dinp2, NULL, NULL, op[2], NULL, op[1], N, C, OC);          /* B: inp unread */
    same = memcmp(dinp, dinp2, ni * elt) == 0 && memcmp(dw2, dw0, sizeof(float) * nw) == 0 && memcmp(db2, db0, sizeof(float) * OC) == 0 ? 0.0 : 1.0;
    report("matmul_backward", elt == 2 ? "dinp alone (bf16) = joint, dweight untouched (bitwise)" : "dinp alone = joint, dweight untouched (bitwise)", same, 0.0);
    be->matmul_backward(be, NULL, dw2, db2, op[2], op[0], NULL, N, C, OC);             /* W: weight unread */
    same = memcmp(dw, dw2, sizeof(float) * nw) == 0 && memcmp(db, db2, sizeof(float) * OC) == 0 ? 0.0 : 1.0;
    report("matmul_backward", elt == 2 ? "dweight, dbias alone (bf16) = joint (bitwise)" : "dweight, dbias alone = joint (bitwise)", same, 0.0);
    for (i = 0; i < 3; i++) { free(src[i]); free(op[i]); }
    free(dw); free(dw2); free(dw0); free(db); free(db2); free(db0); free(dinp); free(dinp2);
}

/* the GELU MLP's fused ops: the same bytes as the ops they join (matmul_forward then gelu_forward;
   matmul_backward then gelu_backward in place), which the tests above hold to references: the CPU
   numerics must not change when the CUDA backend fuses them into cuBLASLt epilogues */
static void test_matmul_gelu(mgt_backend *be, int N, int C, int OC, int has_bias) {
    size_t ni = (size_t)N * C, nw = (size_t)OC * C, no = (size_t)N * OC, i;
    float *inp = frand(ni, 311, -1, 1), *w = frand(nw, 312, -1, 1), *bias = has_bias ? frand((size_t)OC, 313, -1, 1) : NULL;
    float *pre = fnan(no), *out = fnan(no), *pre2 = fnan(no), *out2 = fnan(no), *dout = frand(no, 314, -1, 1), *gpre = frand(ni, 315, -3, 3);
    float *dw = frand(nw, 316, -1, 1), *dw2 = fcopy(dw, nw), *db = frand((size_t)OC, 317, -1, 1), *db2 = fcopy(db, (size_t)OC);
    float *dp = fnan(ni), *dp2 = fnan(ni);
    double same;
    be->matmul_gelu_forward(be, out, pre, inp, w, bias, N, C, OC);
    be->matmul_forward(be, pre2, inp, w, bias, N, C, OC);
    be->gelu_forward(be, out2, pre2, no);
    same = memcmp(pre, pre2, sizeof(float) * no) == 0 && memcmp(out, out2, sizeof(float) * no) == 0 ? 0.0 : 1.0;
    report("matmul_gelu_forward", has_bias ? "pre, out = matmul_forward, gelu_forward (bitwise)" : "pre, out bitwise (no bias)", same, 0.0);
    /* backward of the matmul after the GELU: here inp (N,C) plays gelu(pre), gpre (N,C) the pre */
    be->matmul_gelu_backward(be, dp, dw, has_bias ? db : NULL, dout, inp, w, gpre, N, C, OC);
    be->matmul_backward(be, dp2, dw2, has_bias ? db2 : NULL, dout, inp, w, N, C, OC);
    be->gelu_backward(be, dp2, gpre, dp2, ni);
    same = memcmp(dp, dp2, sizeof(float) * ni) == 0 && memcmp(dw, dw2, sizeof(float) * nw) == 0 && memcmp(db, db2, sizeof(float) * OC) == 0 ? 0.0 : 1.0;
    for (i = 0; i < ni && same == 0.0; i++) same = dp[i] == dp[i] ? 0.0 : 1.0; /* every dpre written */
    report("matmul_gelu_backward", has_bias ? "dpre, dweight, dbias = matmul_backward, gelu_backward (bitwise)" : "dpre, dweight bitwise (no bias)", same,
           0.0);
    free(inp); free(w); free(bias); free(pre); free(out); free(pre2); free(out2); free(dout); free(gpre);
    free(dw); free(dw2); free(db); free(db2); free(dp); free(dp2);
}

/* ---- attention --------------------------------------------------------------------------------- */

/* out (B,T,C), att (B,NH,T,T) or NULL, from qkv (B,T,W) = [q | k | v], W = C + 2 NKV hs: query head h
   on channels h*hs.. of q, key/value head h / (NH / NKV) on the same channels of k and v */
static void ref_attention(double *out, double *att, const double *qkv, int B, int T, int C, int NH, int NKV) {
    int hs = C / NH, W = C + 2 * NKV * hs, b, h, t, u, i;
    double scale = 1.0 / sqrt((double)hs), p[64];
    for (b = 0; b < B; b++)
        for (h = 0; h < NH; h++)
            for (t = 0; t < T; t++) {
                int kvh = h / (NH / NKV);
                const double *q = qkv + ((size_t)b * T + t) * W + (size_t)h * hs;
                double mx = -INFINITY, sum = 0;
                for (u = 0; u <= t; u++) {
                    const double *kk = qkv + ((size_t)b * T + u) * W + C + (size_t)kvh * hs;
                    double s = 0;
                    for (i = 0; i < hs; i++) s += q[i] * kk[i];
                    p[u] = s * scale;
                    if (p[u] > mx) mx = p[u];
                }
                for (u = 0; u <= t; u++) { p[u] = exp(p[u] - mx); sum += p[u]; }
                for (u = 0; u <= t; u++) p[u] /= sum;
                for (i = 0; i < hs; i++) {
                    double s = 0;
                    for (u = 0; u <= t; u++) s += p[u] * qkv[((size_t)b * T + u) * W + C + (size_t)(NKV + kvh) * hs + i];
                    out[((size_t)b * T + t) * C + (size_t)h * hs + i] = s;
                }
                if (att)
                    for (u = 0; u < T; u++) att[(((size_t)b * NH + h) * T + t) * T + u] = u <= t ? p[u] : 0.0;
            }
}
typedef struct attn_ctx { double *qkv, *R, *out; int B, T, C, NH, NKV; } attn_ctx;
static double attn_obj(void *p) {
    attn_ctx *k = (attn_ctx *)p;
    ref_attention(k->out, NULL, k->qkv, k->B, k->T, k->C, k->NH, k->NKV);
    return dot(k->out, k->R, (size_t)k->B * k->T * k->C);
}

/* NKV < NH: grouped-query attention, whose dK and dV sum over the query heads of a group */
static void test_attention(mgt_backend *be, int B, int T, int C, int NH, int NKV) {
    size_t nq = (size_t)B * T * (C + 2 * (C / NH) * NKV), no = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    char what[96], name[96], shape[48];
    float *qkv = frand(nq, 401 + T, -2, 2), *R = frand(no, 402, -1, 1), *out = fnan(no), *att = fnan(na), *dqkv = fnan(nq);
    double *ratt = dalloc(na), *g = dalloc(nq);
    attn_ctx k;
    snprintf(shape, sizeof shape, "B=%d T=%d C=%d NH=%d NKV=%d", B, T, C, NH, NKV);
    k.B = B; k.T = T; k.C = C; k.NH = NH; k.NKV = NKV; k.qkv = to_double(qkv, nq); k.R = to_double(R, no); k.out = dalloc(no);
    ref_attention(k.out, ratt, k.qkv, B, T, C, NH, NKV);

    be->attention_forward(be, out, att, qkv, B, T, C, NH, NKV);
    snprintf(what, sizeof what, "out (%s)", shape);
    report("attention_forward", what, max_err(out, k.out, no), TOL_FWD);
    /* probabilities in [0,1], exact zeros above the diagonal: measured against 1 */
    report("attention_forward", "att (zeros above the diagonal)", max_err_atol(att, ratt, na, 1.0), TOL_FWD);
    snprintf(name, sizeof name, "attention_forward out %s", shape);
    record(name, out, sizeof(float) * no, 0);

    be->attention_backward(be, dqkv, R, qkv, out, att, B, T, C, NH, NKV);
    fd_grad(attn_obj, &k, k.qkv, nq, g);
    snprintf(what, sizeof what, "dqkv = fd (=, NaN before) %s", NKV < NH ? "GQA" : "");
    report("attention_backward", what, max_err(dqkv, g, nq), TOL_BWD);
    snprintf(name, sizeof name, "attention_backward dqkv %s", shape);
    record(name, dqkv, sizeof(float) * nq, 0);

    free(qkv); free(R); free(out); free(att); free(dqkv); free(ratt); free(g); free(k.qkv); free(k.R); free(k.out);
}

/* ring attention (context parallelism): the sequence in nch chunks of Tc rows, each chunk's queries
   attending to every earlier chunk's keys whole and to its own causally, one part at a time, merged
   by log-sum-exp (attention_part_forward), the parts taken in reverse so the merge is not just an
   append; out must be causal attention over the whole sequence, and the parts' backward
   (attention_part_backward, from the merged out and lse) its gradient */
static void test_ring_attention(mgt_backend *be, int B, int Tc, int nch, int C, int NH, int NKV) {
    int T = Tc * nch, hs = C / NH, KV2 = 2 * NKV * hs, W = C + KV2, i, j, b, t;
    size_t nq = (size_t)B * T * W, no = (size_t)B * T * C, rows = (size_t)B * Tc;
    float *qkv = frand(nq, 405 + T, -2, 2), *R = frand(no, 406, -1, 1), *got = fnan(no), *dqkv = fnan(nq);
    float *cq = falloc(nq), *ckv = falloc((size_t)B * T * KV2), *co = fnan(no), *lse = fnan((size_t)B * NH * T), *cR = falloc(no);
    float *dq = falloc(no), *dkv = falloc((size_t)B * T * KV2);
    double *g = dalloc(nq);
    char what[96];
    attn_ctx k;
    k.B = B; k.T = T; k.C = C; k.NH = NH; k.NKV = NKV; k.qkv = to_double(qkv, nq); k.R = to_double(R, no); k.out = dalloc(no);
    ref_attention(k.out, NULL, k.qkv, B, T, C, NH, NKV);
    /* chunk-major copies: chunk j's rows (B, Tc), its keys and values packed (B, Tc, 2 KV) */
    for (j = 0; j < nch; j++)
        for (b = 0; b < B; b++)
            for (t = 0; t < Tc; t++) {
                size_t from = (size_t)b * T + (size_t)j * Tc + (size_t)t, to = (size_t)j * rows + (size_t)b * Tc + (size_t)t;
                memcpy(cq + to * W, qkv + from * W, sizeof(float) * (size_t)W);
                memcpy(ckv + to * KV2, qkv + from * W + C, sizeof(float) * (size_t)KV2);
                memcpy(cR + to * C, R + from * C, sizeof(float) * (size_t)C);
            }
    for (i = 0; i < nch; i++)
        for (j = i; j >= 0; j--)
            be->attention_part_forward(be, co + (size_t)i * rows * C, lse + (size_t)i * B * NH * Tc, cq + (size_t)i * rows * W, ckv + (size_t)j * rows * KV2, KV2,
                                       B, Tc, C, NH, NKV, i == j, j == i);
    memset(dq, 0, sizeof(float) * no);
    memset(dkv, 0, sizeof(float) * (size_t)B * T * KV2);
    for (i = 0; i < nch; i++)
        for (j = 0; j <= i; j++)
            be->attention_part_backward(be, dq + (size_t)i * rows * C, dkv + (size_t)j * rows * KV2, cR + (size_t)i * rows * C, co + (size_t)i * rows * C,
                                        lse + (size_t)i * B * NH * Tc, cq + (size_t)i * rows * W, ckv + (size_t)j * rows * KV2, KV2, B, Tc, C, NH, NKV, i == j);
    for (j = 0; j < nch; j++) /* back to (B, T) order */
        for (b = 0; b < B; b++)
            for (t = 0; t < Tc; t++) {
                size_t to = (size_t)b * T + (size_t)j * Tc + (size_t)t, from = (size_t)j * rows + (size_t)b * Tc + (size_t)t;
                memcpy(got + to * C, co + from * C, sizeof(float) * (size_t)C);
                memcpy(dqkv + to * W, dq + from * C, sizeof(float) * (size_t)C);
                memcpy(dqkv + to * W + C, dkv + from * KV2, sizeof(float) * (size_t)KV2);
            }
    snprintf(what, sizeof what, "out, %d chunks of %d (B=%d C=%d NH=%d NKV=%d)", nch, Tc, B, C, NH, NKV);
    report("attention_part_fwd", what, max_err(got, k.out, no), TOL_FWD);
    fd_grad(attn_obj, &k, k.qkv, nq, g);
    snprintf(what, sizeof what, "dqkv = fd (+= over the parts) %s", NKV < NH ? "GQA" : "");
    report("attention_part_bwd", what, max_err(dqkv, g, nq), TOL_BWD);
    free(qkv); free(R); free(got); free(dqkv); free(cq); free(ckv); free(co); free(lse); free(cR); free(dq); free(dkv); free(g);
    free(k.qkv); free(k.R); free(k.out);
}

/* ---- rmsnorm ----------------------------------------------------------------------------------- */

static void ref_rmsnorm(double *out, double *rstd, const double *x, const double *w, double eps, int N, int C) {
    int r, c;
    for (r = 0; r < N; r++) {
        const double *xr = x + (size_t)r * C;
        double ms = 0, s;
        for (c = 0; c < C; c++) ms += xr[c] * xr[c];
        s = 1.0 / sqrt(ms / C + eps);
        for (c = 0; c < C; c++) out[(size_t)r * C + c] = xr[c] * s * w[c];
        if (rstd) rstd[r] = s;
    }
}
typedef struct rms_ctx { double *x, *w, *R, *out, eps; int N, C; } rms_ctx;
static double rms_obj(void *p) {
    rms_ctx *k = (rms_ctx *)p;
    ref_rmsnorm(k->out, NULL, k->x, k->w, k->eps, k->N, k->C);
    return dot(k->out, k->R, (size_t)k->N * k->C);
}

static void test_rmsnorm(mgt_backend *be, int N, int C) {
    size_t n = (size_t)N * C;
    char what[96], name[96];
    const float eps = 1e-5f;
    float *x = frand(n, 211 + C, -2, 2.5), *w = frand((size_t)C, 212, 0.5, 1.5), *R = frand(n, 214, -1, 1), *out = fnan(n), *rstd = fnan((size_t)N);
    float *dinp = frand(n, 215, -1, 1), *dw = frand((size_t)C, 216, -1, 1), *P_inp = fcopy(dinp, n), *P_w = fcopy(dw, (size_t)C);
    double *rrstd = dalloc((size_t)N), *g_x = dalloc(n), *g_w = dalloc((size_t)C), *e;
    rms_ctx k;
    k.N = N; k.C = C; k.eps = (double)eps; k.x = to_double(x, n); k.w = to_double(w, (size_t)C); k.R = to_double(R, n); k.out = dalloc(n);
    ref_rmsnorm(k.out, rrstd, k.x, k.w, k.eps, N, C);

    be->rmsnorm_forward(be, out, rstd, x, w, eps, N, C);
    snprintf(what, sizeof what, "out (N=%d C=%d)", N, C);
    report("rmsnorm_forward", what, max_err(out, k.out, n), TOL_FWD);
    report("rmsnorm_forward", "rstd", max_err(rstd, rrstd, (size_t)N), TOL_FWD);
    snprintf(name, sizeof name, "rmsnorm_forward out C=%d", C);
    record(name, out, sizeof(float) * n, 0);

    be->rmsnorm_backward(be, dinp, dw, R, x, w, rstd, N, C);
    fd_grad(rms_obj, &k, k.x, n, g_x);
    fd_grad(rms_obj, &k, k.w, (size_t)C, g_w);
    e = plus(P_inp, g_x, n);
    report("rmsnorm_backward", "dinp = P + fd (+=)", max_err_atol(dinp, e, n, rms(g_x, n)), TOL_BWD);
    free(e);
    e = plus(P_w, g_w, (size_t)C);
    report("rmsnorm_backward", "dweight = P + fd (+=)", max_err_atol(dw, e, (size_t)C, rms(g_w, (size_t)C)), TOL_BWD);
    free(e);
    snprintf(name, sizeof name, "rmsnorm_backward dweight C=%d", C);
    record(name, dw, sizeof(float) * C, 1);

    free(x); free(w); free(R); free(out); free(rstd); free(dinp); free(dw); free(P_inp); free(P_w); free(rrstd); free(g_x); free(g_w);
    free(k.x); free(k.w); free(k.R); free(k.out);
}

/* ---- rope -------------------------------------------------------------------------------------- */

/* in place on the q and k heads of qkv (B,T,(NH + 2 NKV) hs): channels i and i + hs/2 turn by t theta^(-2i/hs) */
static void ref_rope(double *qkv, int B, int T, int NH, int NKV, int hs, double theta) {
    int W = (NH + 2 * NKV) * hs, half = hs / 2, b, t, h, i;
    for (b = 0; b < B; b++)
        for (t = 0; t < T; t++)
            for (h = 0; h < NH + NKV; h++)
                for (i = 0; i < half; i++) {
                    double *x = qkv + ((size_t)b * T + t) * W + (size_t)h * hs, a = t * pow(theta, -2.0 * i / hs), x0 = x[i], x1 = x[half + i];
                    x[i] = x0 * cos(a) - x1 * sin(a);
                    x[half + i] = x1 * cos(a) + x0 * sin(a);
                }
}
typedef struct rope_ctx { double *x, *R, *tmp, theta; int B, T, NH, NKV, hs; } rope_ctx;
static double rope_obj(void *p) {
    rope_ctx *k = (rope_ctx *)p;
    size_t n = (size_t)k->B * k->T * (k->NH + 2 * k->NKV) * k->hs;
    memcpy(k->tmp, k->x, sizeof(double) * n);
    ref_rope(k->tmp, k->B, k->T, k->NH, k->NKV, k->hs, k->theta);
    return dot(k->tmp, k->R, n);
}

static void test_rope(mgt_backend *be, int B, int T, int NH, int NKV, int hs) {
    size_t n = (size_t)B * T * (NH + 2 * NKV) * hs;
    const float theta = 10000.0f;
    char what[96];
    float *x = frand(n, 421 + hs, -2, 2), *R = frand(n, 422, -1, 1), *y = fcopy(x, n), *d = fcopy(R, n);
    double *ref = to_double(x, n), *g = dalloc(n);
    rope_ctx k;
    k.B = B; k.T = T; k.NH = NH; k.NKV = NKV; k.hs = hs; k.theta = theta; k.x = to_double(x, n); k.R = to_double(R, n); k.tmp = dalloc(n);
    ref_rope(ref, B, T, NH, NKV, hs, theta);
    be->rope_forward(be, y, B, T, NH, NKV, hs, theta, 0);
    snprintf(what, sizeof what, "qkv in place (B=%d T=%d NH=%d NKV=%d hs=%d)", B, T, NH, NKV, hs);
    report("rope_forward", what, max_err(y, ref, n), TOL_FWD);
    be->rope_backward(be, d, B, T, NH, NKV, hs, theta, 0); /* dqkv in place: the v heads pass through */
    fd_grad(rope_obj, &k, k.x, n, g);
    report("rope_backward", "dqkv = fd (in place)", max_err(d, g, n), TOL_BWD);
    free(x); free(R); free(y); free(d); free(ref); free(g); free(k.x); free(k.R); free(k.tmp);
}

/* ---- swiglu ------------------------------------------------------------------------------------ */

static double ref_silu(double x) { return x / (1.0 + exp(-x)); }
typedef struct swiglu_ctx { double *x, *R; int N, H; } swiglu_ctx;
static double swiglu_obj(void *p) {
    swiglu_ctx *k = (swiglu_ctx *)p;
    double s = 0;
    int r, c;
    for (r = 0; r < k->N; r++)
        for (c = 0; c < k->H; c++) s += ref_silu(k->x[(size_t)r * 2 * k->H + c]) * k->x[(size_t)r * 2 * k->H + k->H + c] * k->R[(size_t)r * k->H + c];
    return s;
}

static void test_swiglu(mgt_backend *be, int N, int H) {
    size_t n = (size_t)N * H;
    float *x = frand(2 * n, 511 + H, -5, 5), *R = frand(n, 512, -1, 1), *out = fnan(n), *dinp = fnan(2 * n);
    double *ref = dalloc(n), *g = dalloc(2 * n);
    swiglu_ctx k;
    char what[96];
    int r, c;
    x[0] = 0.0f; x[1] = 20.0f; x[2] = -20.0f; /* centre and saturated tails */
    k.x = to_double(x, 2 * n); k.R = to_double(R, n); k.N = N; k.H = H;
    for (r = 0; r < N; r++)
        for (c = 0; c < H; c++) ref[(size_t)r * H + c] = ref_silu(k.x[(size_t)r * 2 * H + c]) * k.x[(size_t)r * 2 * H + H + c];
    be->swiglu_forward(be, out, x, N, H);
    snprintf(what, sizeof what, "out (N=%d H=%d)", N, H);
    report("swiglu_forward", what, max_err(out, ref, n), TOL_FWD);
    be->swiglu_backward(be, dinp, x, R, N, H);
    fd_grad(swiglu_obj, &k, k.x, 2 * n, g);
    report("swiglu_backward", "dinp (gate, up) = fd (=, NaN before)", max_err(dinp, g, 2 * n), TOL_BWD);
    free(x); free(R); free(out); free(dinp); free(ref); free(g); free(k.x); free(k.R);
}

/* ---- gelu -------------------------------------------------------------------------------------- */

static double ref_gelu(double x) { return 0.5 * x * (1.0 + tanh(0.79788456080286535588 /* sqrt(2/pi) */ * (x + 0.044715 * x * x * x))); }
typedef struct gelu_ctx { double *x, *R; size_t n; } gelu_ctx;
static double gelu_obj(void *p) {
    gelu_ctx *k = (gelu_ctx *)p;
    double s = 0;
    size_t i;
    for (i = 0; i < k->n; i++) s += ref_gelu(k->x[i]) * k->R[i];
    return s;
}

static void test_gelu(mgt_backend *be) {
    const size_t n = 1037; /* not a multiple of the 64-wide thread spans */
    float *x = frand(n, 501, -5, 5), *R = frand(n, 502, -1, 1), *out = fnan(n + 1), *dinp = fnan(n + 1);
    double *ref = dalloc(n), *g = dalloc(n);
    gelu_ctx k;
    size_t i;
    x[0] = 0.0f; x[1] = 1e-3f; x[2] = -1e-3f; x[3] = 12.0f; x[4] = -12.0f; /* centre and saturated tails */
    out[n] = 1234.5f; dinp[n] = 1234.5f; /* guards */
    k.x = to_double(x, n); k.R = to_double(R, n); k.n = n;
    for (i = 0; i < n; i++) ref[i] = ref_gelu(k.x[i]);

    be->gelu_forward(be, out, x, n);
    report("gelu_forward", "out", max_err(out, ref, n), TOL_FWD);
    report("gelu_forward", "guard after n untouched", fabs(out[n] - 1234.5f), 0.0);
    record("gelu_forward out", out, sizeof(float) * n, 0);

    be->gelu_backward(be, dinp, x, R, n);
    fd_grad(gelu_obj, &k, k.x, n, g);
    report("gelu_backward", "dinp = fd (=, NaN before)", max_err(dinp, g, n), TOL_BWD);
    report("gelu_backward", "guard after n untouched", fabs(dinp[n] - 1234.5f), 0.0);
    record("gelu_backward dinp", dinp, sizeof(float) * n, 0);

    free(x); free(R); free(out); free(dinp); free(ref); free(g); free(k.x); free(k.R);
}

/* ---- crossentropy ------------------------------------------------------------------------------ */

static double ref_xent_row(const double *l, int y, int V) {
    double mx = -INFINITY, s = 0;
    int i;
    for (i = 0; i < V; i++) mx = l[i] > mx ? l[i] : mx;
    for (i = 0; i < V; i++) s += exp(l[i] - mx);
    return log(s) + mx - l[y];
}
typedef struct xent_ctx { double *logits, gs; const int *y; int N, V, Vp; } xent_ctx;
static double xent_obj(void *p) { /* gs * sum of the row losses, whose gradient the op writes */
    xent_ctx *k = (xent_ctx *)p;
    double s = 0;
    int r;
    for (r = 0; r < k->N; r++) s += ref_xent_row(k->logits + (size_t)r * k->Vp, k->y[r], k->V);
    return k->gs * s;
}

/* the one-rank cross-entropy: partial statistics, then the finish with tp = 1 */
static void xent_one_rank(mgt_backend *be, double *losses, float *logits, const int *y, int N, int V, int Vp, float gs) {
    float *part = falloc((size_t)N * 3);
    be->xent_partial(be, part, logits, y, N, 0, Vp, V);
    be->xent_finish(be, losses, logits, part, 1, y, N, 0, Vp, V, gs);
    free(part);
}

/* the vocabulary-parallel cross-entropy: two ranks with half the columns each must give the
   losses and the gradient columns of one rank */
static void test_crossentropy_split(mgt_backend *be, const float *logits, const int *y, int N, int V, int Vp, float gs,
                                    const double *losses1, const float *grad1) {
    int Vl = Vp / 2, r, c, k;
    float *slice[2], *parts = falloc((size_t)2 * N * 3);
    double losses[2][14], lerr = 0, gerr = 0;
    for (k = 0; k < 2; k++) {
        slice[k] = falloc((size_t)N * Vl);
        for (r = 0; r < N; r++)
            for (c = 0; c < Vl; c++) slice[k][(size_t)r * Vl + c] = logits[(size_t)r * Vp + k * Vl + c];
        be->xent_partial(be, parts + (size_t)k * N * 3, slice[k], y, N, k * Vl, Vl, V);
    }
    for (k = 0; k < 2; k++) { /* what the all-gather hands every rank: the partials of both */
        be->xent_finish(be, losses[k], slice[k], parts, 2, y, N, k * Vl, Vl, V, gs);
        for (r = 0; r < N; r++) {
            lerr = fmax(lerr, fabs(losses[k][r] - losses1[r]) / (fabs(losses1[r]) + 1.0));
            for (c = 0; c < Vl; c++) gerr = fmax(gerr, fabs((double)slice[k][(size_t)r * Vl + c] - grad1[(size_t)r * Vp + k * Vl + c]));
        }
    }
    /* the same arithmetic up to the rescaling by exp(max_k - max): float32 rounding only */
    report("xent split tp=2", "losses vs one rank", lerr, 1e-6);
    report("xent split tp=2", "dlogits vs one rank", gerr, 1e-6);
    free(slice[0]); free(slice[1]); free(parts);
}

static void test_crossentropy(mgt_backend *be) {
    const int N = 14, V = 37, Vp = 48;
    const float gs = 0.37f;
    size_t n = (size_t)N * Vp, i;
    int y[14], r, c;
    float *logits = frand(n, 601, -3, 3), *work, *dv;
    double losses[14], rloss[14], *g = dalloc(n), *gref;
    xent_ctx k;
    double lerr = 0, pad = 0, clobber = 0;
    for (r = 0; r < N; r++) {
        y[r] = (int)(mgt_hash3(7, 602, (uint64_t)r) % (uint64_t)V);
        for (c = V; c < Vp; c++) logits[(size_t)r * Vp + c] = 100.0f; /* padding: would dominate if read */
    }
    y[0] = 0; y[1] = V - 1;
    for (c = 0; c < V; c++) logits[3 * (size_t)Vp + c] += 60.0f; /* needs the max subtraction */
    k.logits = to_double(logits, n); k.gs = gs; k.y = y; k.N = N; k.V = V; k.Vp = Vp;
    for (r = 0; r < N; r++) rloss[r] = ref_xent_row(k.logits + (size_t)r * Vp, y[r], V);

    /* losses only */
    work = fcopy(logits, n);
    for (r = 0; r < N; r++) losses[r] = NAN;
    xent_one_rank(be, losses, work, y, N, V, Vp, 0.0f);
    for (r = 0; r < N; r++) {
        double e = fabs(losses[r] - rloss[r]) / (fabs(rloss[r]) + 1.0); /* losses are O(1) */
        lerr = !(e <= lerr) ? e : lerr;
    }
    report("crossentropy", "losses (grad_scale 0)", lerr, TOL_FWD);
    for (i = 0; i < n; i++) clobber += work[i] != logits[i];
    printf("info threads=%d  %-18s with grad_scale 0 the logits buffer is %s (%.0f of %zu values changed)\n", g_threads,
           "crossentropy", clobber ? "overwritten" : "unchanged", clobber, n);
    free(work);

    /* losses and gradients */
    work = fcopy(logits, n);
    for (r = 0; r < N; r++) losses[r] = NAN;
    xent_one_rank(be, losses, work, y, N, V, Vp, gs);
    lerr = 0;
    for (r = 0; r < N; r++) {
        double e = fabs(losses[r] - rloss[r]) / (fabs(rloss[r]) + 1.0);
        lerr = !(e <= lerr) ? e : lerr;
    }
    report("crossentropy", "losses (grad_scale 0.37)", lerr, TOL_FWD);
    /* finite differences over the V real columns of each row; compare those columns */
    gref = dalloc((size_t)N * V);
    dv = falloc((size_t)N * V);
    for (r = 0; r < N; r++) {
        fd_grad(xent_obj, &k, k.logits + (size_t)r * Vp, (size_t)V, g + (size_t)r * Vp);
        for (c = 0; c < V; c++) {
            gref[(size_t)r * V + c] = g[(size_t)r * Vp + c];
            dv[(size_t)r * V + c] = work[(size_t)r * Vp + c];
        }
        for (c = V; c < Vp; c++) pad = fmax(pad, fabs(work[(size_t)r * Vp + c]));
    }
    report("crossentropy", "dlogits = fd of gs*sum(loss)", max_err(dv, gref, (size_t)N * V), TOL_BWD);
    report("crossentropy", "dlogits padding columns = 0", pad, 0.0);
    record("crossentropy losses", losses, sizeof losses, 0);
    record("crossentropy dlogits", work, sizeof(float) * n, 0);
    test_crossentropy_split(be, logits, y, N, V, Vp, gs, losses, work);

    free(logits); free(work); free(dv); free(g); free(gref); free(k.logits);
}

/* ---- sum_squares ------------------------------------------------------------------------------- */

static void test_sum_squares(mgt_backend *be) {
    const size_t sizes[3] = {13, 200003, 65536}; /* one short block; four blocks with a ragged end; exactly one */
    int s;
    for (s = 0; s < 3; s++) {
        size_t n = sizes[s], i;
        float *x = frand(n, 701 + (uint64_t)s, -1, 1);
        double ref = 0, got, err;
        char what[64], name[64];
        for (i = 0; i < n; i++) ref += (double)x[i] * (double)x[i];
        got = be->sum_squares(be, x, n);
        err = fabs(got - ref) / ref;
        /* the squares are summed in 8 float lanes of up to 8192 terms each (see the report): the
           rounding walk is ~sqrt(8192) eps = 5e-6 relative, 8192 eps = 5e-4 in the worst case */
        snprintf(what, sizeof what, "n=%zu relative", n);
        report("sum_squares", what, err, 1e-4);
        snprintf(name, sizeof name, "sum_squares n=%zu", n);
        record(name, &got, sizeof got, 1);
        free(x);
    }
}

/* ---- adamw ------------------------------------------------------------------------------------- */

static void test_adamw(mgt_backend *be) {
    const size_t n = 1037;
    const float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 0.7f;
    float *p = frand(n, 801, -1, 1), *m = falloc(n), *v = falloc(n), *prev = falloc(n);
    double *rp = to_double(p, n), *rm = dalloc(n), *rv = dalloc(n), *rdelta = dalloc(n);
    float *delta = falloc(n);
    double ep = 0, em = 0, ev = 0, ed = 0;
    size_t i;
    int step;
    for (i = 0; i < n; i++) m[i] = v[i] = 0.0f;
    for (step = 1; step <= 3; step++) {
        float *g = frand(n, 810 + (uint64_t)step, -2, 2);
        float bc1 = (float)(1.0 - pow(b1, step)), bc2 = (float)(1.0 - pow(b2, step));
        for (i = 0; i < n; i += 7) g[i] = 0.0f; /* zero gradients: only the decay moves them at first */
        memcpy(prev, p, sizeof(float) * n);
        be->adamw(be, p, NULL, g, m, v, n, lr, b1, b2, eps, wd, gs, bc1, bc2);
        /* torch.optim.AdamW in double, from the same float hyperparameters */
        for (i = 0; i < n; i++) {
            double gi = (double)g[i] * gs, old = rp[i];
            rp[i] *= 1.0 - (double)lr * wd;
            rm[i] = b1 * rm[i] + (1.0 - b1) * gi;
            rv[i] = b2 * rv[i] + (1.0 - b2) * gi * gi;
            rp[i] -= ((double)lr / bc1) * rm[i] / (sqrt(rv[i]) / sqrt((double)bc2) + eps);
            rdelta[i] = rp[i] - old;
            delta[i] = p[i] - prev[i];
        }
        ep = fmax(ep, max_err(p, rp, n));
        em = fmax(em, max_err(m, rm, n));
        ev = fmax(ev, max_err(v, rv, n));
        /* the step itself, against lr: float p carries eps*|p| ~ 6e-8 of rounding, 6e-6 of lr */
        ed = fmax(ed, max_err_atol(delta, rdelta, n, (double)lr));
        if (isnan(ep) || isnan(em) || isnan(ev) || isnan(ed)) ep = INFINITY;
        free(g);
    }
    report("adamw", "param after 3 steps", ep, 1e-6);
    report("adamw", "update p - p_prev (against lr)", ed, TOL_BWD);
    report("adamw", "m after 3 steps", em, TOL_FWD);
    report("adamw", "v after 3 steps", ev, TOL_FWD);
    record("adamw param", p, sizeof(float) * n, 0);
    free(p); free(m); free(v); free(prev); free(rp); free(rm); free(rv); free(rdelta); free(delta);
}

/* ---- add_inplace, scale, zero: exact in float ------------------------------------------------- */

static void test_elementwise(mgt_backend *be) {
    const size_t n = 3037; /* spans of 64 (add, scale) and 1024 (zero) with a ragged end */
    float *x = frand(n, 901, -1, 1), *y0 = frand(n, 902, -1, 1), *buf = falloc(n + 2), *y = buf + 1;
    double err = 0;
    size_t i;

    buf[0] = buf[n + 1] = 1234.5f;
    memcpy(y, y0, sizeof(float) * n);
    be->add_inplace(be, y, x, n);
    for (i = 0; i < n; i++) { float e = y0[i] + x[i]; err = fmax(err, y[i] == e ? 0.0 : 1.0); }
    report("add_inplace", "y += x bitwise (mismatches)", err, 0.0);
    report("add_inplace", "guards before/after untouched", fabs(buf[0] - 1234.5f) + fabs(buf[n + 1] - 1234.5f), 0.0);

    err = 0;
    memcpy(y, y0, sizeof(float) * n);
    be->scale(be, y, 0.3f, n);
    for (i = 0; i < n; i++) { float e = y0[i] * 0.3f; err = fmax(err, y[i] == e ? 0.0 : 1.0); }
    report("scale", "x *= 0.3f bitwise (mismatches)", err, 0.0);
    report("scale", "guards before/after untouched", fabs(buf[0] - 1234.5f) + fabs(buf[n + 1] - 1234.5f), 0.0);

    err = 0;
    for (i = 0; i < n; i++) y[i] = NAN;
    be->zero(be, y, sizeof(float) * n);
    for (i = 0; i < n; i++) err = fmax(err, y[i] == 0.0f && !signbit(y[i]) ? 0.0 : 1.0);
    report("zero", "all +0 (mismatches)", err, 0.0);
    report("zero", "guards before/after untouched", fabs(buf[0] - 1234.5f) + fabs(buf[n + 1] - 1234.5f), 0.0);

    free(x); free(y0); free(buf);
}

int main(void) {
    static const int threads[2] = {1, 2};
    struct timespec t0, t1;
    int it, i;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (it = 0; it < 2; it++) {
        mgt_backend *be;
        g_threads = threads[it];
        if (mgt__cpu_backend_create_typed(&be, g_threads, 13 * 13, MGT_F32, 0) != MGT_OK) { /* scratch: T*T of the largest T */
            fprintf(stderr, "cannot create the CPU backend: %s\n", mgt_last_error());
            return 2;
        }
        test_encoder(be);
        test_layernorm(be, 14, 43);
        test_layernorm(be, 3, 7);
        test_matmul(be, 14, 43, 37, 1); /* N < OC: the GEMM splits along OC */
        test_matmul(be, 45, 19, 13, 1); /* N > OC: it splits along N */
        test_matmul(be, 14, 43, 37, 0); /* bias NULL, dbias NULL */
        test_matmul_split(be, 14, 43, 37, 4);
        test_matmul_split(be, 45, 19, 13, 4);
        test_matmul_gelu(be, 14, 43, 37, 1);
        test_matmul_gelu(be, 45, 19, 13, 0);
        test_attention(be, 2, 7, 24, 3, 3);
        test_attention(be, 1, 13, 21, 3, 3);
        test_attention(be, 2, 7, 32, 4, 2); /* grouped-query */
        test_attention(be, 1, 13, 24, 3, 1); /* multi-query */
        test_ring_attention(be, 2, 6, 2, 24, 3, 3);
        test_ring_attention(be, 1, 4, 3, 32, 4, 2); /* grouped-query, 3 chunks */
        test_ring_attention(be, 2, 5, 2, 24, 3, 1); /* multi-query */
        test_rmsnorm(be, 14, 43);
        test_rmsnorm(be, 3, 7);
        test_rope(be, 2, 7, 3, 1, 8);
        test_rope(be, 1, 13, 2, 2, 6);
        test_swiglu(be, 7, 37);
        test_gelu(be);
        test_crossentropy(be);
        test_sum_squares(be);
        test_adamw(be);
        test_elementwise(be);
        mgt__cpu_backend_destroy(be);
    }
    { /* the 16-bit wrapper's halves */
        mgt_backend *be;
        if (mgt__cpu_backend_create_typed(&be, 2, 13 * 13, MGT_BF16, 8192 /* fp32 workspace: the operands of one matmul */) != MGT_OK) {
            fprintf(stderr, "cannot create the bf16 CPU backend: %s\n", mgt_last_error());
            return 2;
        }
        test_matmul_split(be, 14, 43, 37, 2);
        mgt__cpu_backend_destroy(be);
    }
    for (i = 0; i < g_nsnaps; i++) free(g_snaps[i].data);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%s: %d of %d checks passed in %.2f s\n", g_failures ? "FAIL" : "PASS", g_checks - g_failures, g_checks,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    return g_failures ? 1 : 0;
}
