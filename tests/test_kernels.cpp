/* test_kernels.cpp - every launcher of the kernels/<op>.cu files run on the CPU through the SIMT shim
   (tests/simt/cuda_cpu.h) against straightforward double-precision references written here (not
   mgt.h's code, not the kernels'), forward and backward, in fp32, bf16 and fp16. Parameter
   gradients (dwte, dwpe, dweight, dbias) and AdamW's gradient are fp32 whatever the storage type,
   as in mgt.h's backend table (Megatron's main_grad).

   - Inputs are generated in the storage type first, so the references see exactly the values the
     kernels see and only the kernels' arithmetic is compared.
   - Tolerances: every output is held to   bound = u_T (|ref| + e32) + e32 + tiny_T,   where u_T is
     the unit roundoff of the output's type T (fp32 2^-24, bf16 2^-8, fp16 2^-11: the final
     rounding of the result into T; T is fp32 for parameter gradients and statistics), e32 is what
     the kernel's fp32 arithmetic may add (2^-24 times a small factor for the length of each
     accumulation and the magnitude of its terms, derived per op below), and tiny_T is half the
     smallest subnormal of T (rounding near underflow is absolute, not relative). Each case
     reports its worst error as a fraction of its bound; the summary prints the worst per op family
     and storage type, then per parameter gradient (every output with TEST_KERNELS_OUTPUTS=1). A
     wrong kernel misses these by orders of magnitude.
   - Thread orders: every case runs under the forward and the reverse order, the smaller ones also
     under two random orders, and the outputs must be bitwise identical (common.cuh promises fixed
     reduction orders, so no result may depend on how the fibers were scheduled).
   - Shapes exercise the edges: sizes that are not multiples of a warp or a block, several blocks,
     grid-stride loops (n above 2048 blocks x 256 threads; plain build, fp32 under ASan), C not a multiple of
     4 or 8, "+=" outputs that start non-zero, the aliasing the launchers allow, vocabulary slices
     with tokens outside them and padding columns, tp = 1 and 2.
   - Builds (kernels/kernels.ninja): plain g++ -O2 (build/test_kernels), ASan+UBSan
     (build/asan/test_kernels, medium shapes) and g++ TSan (build/tsan/test_kernels, small
     shapes, forward and reverse orders: a race between the fibers of a block is reported by TSan
     and fails the run with exit code 66).
   - TEST_KERNELS_TIMES=1 in the environment prints the time of every case. */
#include "kernels/common.cuh" // defines: the launchers, MGT_KERNEL_*, mgt_kernel_last_error, the SIMT shim

#include <math.h>   // defines: fabs, exp, log, sqrt, tanh, ldexp, frexp, isnan, isinf, signbit
#include <stdarg.h> // defines: va_list
#include <stdint.h> // defines: uint64_t
#include <stdio.h>  // defines: printf, snprintf
#include <stdlib.h> // defines: getenv
#include <string.h> // defines: memcmp, memcpy, strstr
#include <time.h>   // defines: clock_gettime
#include <type_traits> // defines: std::is_same
#include <vector>   // defines: std::vector

#if defined(MGT__SIMT_ASAN)
#define BUILD "asan+ubsan"
static const int SIZE = 1; // medium shapes, grid-stride ones in fp32 only: ASan+UBSan costs 3x-4x here
#elif defined(MGT__SIMT_TSAN)
#define BUILD "tsan"
static const int SIZE = 0; // small shapes, forward and reverse orders only: TSan makes every fiber switch expensive
#else
#define BUILD "plain"
static const int SIZE = 2; // everything, grid-stride loops included
#endif

/* ---- precision of each storage type ---------------------------------------------------------------- */
static const double U32 = 0x1p-24; // fp32 unit roundoff: the kernels' arithmetic
template <class T> struct prec;
template <> struct prec<float> {
    static constexpr double u = 0x1p-24, tiny = 0x1p-150;
    static constexpr const char *name = "fp32";
};
template <> struct prec<__nv_bfloat16> {
    static constexpr double u = 0x1p-8, tiny = 0x1p-134;
    static constexpr const char *name = "bf16";
};
template <> struct prec<__half> {
    static constexpr double u = 0x1p-11, tiny = 0x1p-25;
    static constexpr const char *name = "fp16";
};
template <class T> static double dv(T x) { return (double)(float)x; }
/* the bound of an output of type T whose fp32 computation may be off by e32 before the final rounding */
template <class T> static double bnd(double ref, double e32) { return prec<T>::u * (fabs(ref) + e32) + e32 + prec<T>::tiny; }

/* ---- bookkeeping --------------------------------------------------------------------------------------- */
static int failures = 0;
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
#define FAIL(...)                                        \
    do {                                                 \
        failures++;                                      \
        if (failures <= 40) {                            \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);  \
            printf(__VA_ARGS__);                         \
            printf("\n");                                \
        }                                                \
    } while (0)

struct family {
    const char *name;
    int cases;
    long values;
    double worst; // worst |got - ref| / bound over its cases
    char worst_case[160];
    const char *worst_out; // a string literal
    double worst_by_type[3]; // fp32, bf16, fp16 cases (by the case's first type: the storage type)
};
static family families[] = {{"encoder", 0, 0, 0, "", "", {0, 0, 0}},  {"layernorm", 0, 0, 0, "", "", {0, 0, 0}},    {"attention", 0, 0, 0, "", "", {0, 0, 0}},
                            {"gelu", 0, 0, 0, "", "", {0, 0, 0}},     {"residual", 0, 0, 0, "", "", {0, 0, 0}},     {"crossentropy", 0, 0, 0, "", "", {0, 0, 0}},
                            {"adamw", 0, 0, 0, "", "", {0, 0, 0}},    {"cast", 0, 0, 0, "", "", {0, 0, 0}},         {"norm", 0, 0, 0, "", "", {0, 0, 0}},
                            {"rmsnorm", 0, 0, 0, "", "", {0, 0, 0}},  {"rope", 0, 0, 0, "", "", {0, 0, 0}},         {"swiglu", 0, 0, 0, "", "", {0, 0, 0}},
                            {"packets", 0, 0, 0, "", "", {0, 0, 0}},  {"preconditions", 0, 0, 0, "", "", {0, 0, 0}}};
static family *fam(const char *name) {
    for (family &f : families)
        if (!strcmp(f.name, name)) return &f;
    return &families[0];
}

/* the worst ratio per (family, output name) and storage type: parameter gradients are printed after
   the summary (fp32 results whatever the storage type), every output with TEST_KERNELS_OUTPUTS=1 */
struct output_stat {
    const family *f;
    const char *out; // a string literal
    long values;
    double worst_by_type[3];
};
static output_stat outputs[128];
static int noutputs = 0;
static bool is_param_grad(const char *out) {
    static const char *names[] = {"dwte", "dwpe", "dweight", "dbias"};
    for (const char *n : names)
        if (!strncmp(out, n, strlen(n)) && (out[strlen(n)] == 0 || out[strlen(n)] == ' ')) return true;
    return false;
}
static output_stat *output_of(const family *f, const char *out) {
    for (int i = 0; i < noutputs; i++)
        if (outputs[i].f == f && !strcmp(outputs[i].out, out)) return &outputs[i];
    if (noutputs == (int)(sizeof outputs / sizeof outputs[0])) return &outputs[0]; // full: lumped into the first
    outputs[noutputs] = {f, out, 0, {0, 0, 0}};
    return &outputs[noutputs++];
}

/* one case: compares values against references with bounds and remembers the worst ratio */
struct checker {
    family *f;
    char what[160];
    int bad = 0;
    int ti = -1; // the storage type: 0 fp32, 1 bf16, 2 fp16 (from "<type" in what), -1 none
    double t0 = now_s();
    const char *last_out = nullptr; // the output_of() lookup of the last output name
    output_stat *last_stat = nullptr;
    checker(const char *family_name, const char *fmt, ...) __attribute__((format(printf, 3, 4))) {
        f = fam(family_name);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        f->cases++;
        const char *lt = strchr(what, '<');
        ti = !lt ? -1 : !strncmp(lt + 1, "fp32", 4) ? 0 : !strncmp(lt + 1, "bf16", 4) ? 1 : !strncmp(lt + 1, "fp16", 4) ? 2 : -1;
    }
    /* got within bound of want; bound 0 means exact (bitwise for the value, sign of zero included) */
    void near(const char *out, size_t i, double got, double want, double bound) {
        f->values++;
        double err = fabs(got - want), ratio;
        if (bound == 0.0) ratio = (got == want && signbit(got) == signbit(want)) || (isnan(got) && isnan(want)) ? 0.0 : INFINITY;
        else ratio = err / bound;
        if (isnan(got) != isnan(want) || isinf(got) != isinf(want)) ratio = INFINITY;
        else if (isinf(got) && got == want) ratio = 0.0;
        if (!(ratio <= 1.0)) {
            if (bad++ < 4) FAIL("%s: %s[%zu] = %.9g, reference %.9g, error %.3g > bound %.3g", what, out, i, got, want, err, bound);
            else failures++;
        }
        if (out != last_out) last_out = out, last_stat = output_of(f, out);
        last_stat->values++;
        if (ti >= 0 && ratio <= 1.0 && ratio > f->worst_by_type[ti]) f->worst_by_type[ti] = ratio;
        if (ti >= 0 && ratio <= 1.0 && ratio > last_stat->worst_by_type[ti]) last_stat->worst_by_type[ti] = ratio;
        if (ratio > f->worst && ratio <= 1.0) {
            f->worst = ratio;
            memcpy(f->worst_case, what, sizeof what);
            f->worst_out = out;
        }
    }
    ~checker() {
        if (getenv("TEST_KERNELS_TIMES")) printf("    %.3f s  %s\n", now_s() - t0, what);
    }
    void rc(int code) {
        if (code != MGT_KERNEL_OK)
            FAIL("%s: launcher returned %d (%s:%d: %s)", what, code, mgt_kernel_last_error().file, mgt_kernel_last_error().line,
                 mgt_kernel_last_error().what);
    }
};

/* ---- inputs -------------------------------------------------------------------------------------------- */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double urand(void) { // uniform in [0, 1)
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * 0x1p-53;
}
static int irand(int n) { return (int)(urand() * n); }
template <class T> static std::vector<T> rnd(size_t n, double lo, double hi) {
    std::vector<T> v(n);
    for (T &x : v) x = T((float)(lo + (hi - lo) * urand()));
    return v;
}
template <class T> static std::vector<T> filled(size_t n, float value) { return std::vector<T>(n, T(value)); }

/* ---- thread orders ------------------------------------------------------------------------------------- */
typedef std::vector<unsigned char> blob;
template <class T> static blob bytes(const std::vector<T> &v) {
    blob b(v.size() * sizeof(T));
    if (!v.empty()) memcpy(b.data(), v.data(), b.size());
    return b;
}
static int order_runs = 0;
/* run() launches on fresh copies of the inputs and returns the outputs' bytes; it runs under the
   forward and reverse orders (and two random ones when `random`), and every run must give the
   forward run's bytes. The outputs of the last run stay where run() put them. */
template <class F> static void in_orders(checker &ck, bool random, F &&run) {
    static const int orders[][2] = {{MGT_SIMT_FORWARD, 0}, {MGT_SIMT_REVERSE, 0}, {MGT_SIMT_RANDOM, 1}, {MGT_SIMT_RANDOM, 2}};
    std::vector<blob> first;
    for (int k = 0; k < (random ? 4 : 2); k++) {
        mgt_simt_set_order(orders[k][0], (unsigned long long)orders[k][1]);
        std::vector<blob> got = run();
        order_runs++;
        if (k == 0) {
            first = got;
            continue;
        }
        for (size_t o = 0; o < got.size(); o++)
            if (got[o] != first[o]) {
                size_t at = 0;
                while (at < got[o].size() && got[o][at] == first[o][at]) at++;
                FAIL("%s: output %zu differs between the forward order and %s order %d (first at byte %zu)", ck.what, o,
                     orders[k][0] == MGT_SIMT_REVERSE ? "the reverse" : "random", orders[k][1], at);
            }
    }
    mgt_simt_set_order(MGT_SIMT_FORWARD, 0);
}

/* ==== encoder: out = wte[tok - start] (in the slice) + wpe[t]; dwte, dwpe += ================================ */
template <class T> static void test_encoder(int B, int Tn, int C, int vocab_start, int vocab_rows, int V, bool wpe_on, bool random) {
    int N = B * Tn;
    std::vector<int> tok(N);
    int hot = vocab_start + (vocab_rows > 1 ? 1 : 0); // a token at every third position: long accumulations
    for (int r = 0; r < N; r++) tok[r] = r % 3 == 0 ? hot : irand(V);
    std::vector<T> wte = rnd<T>((size_t)(vocab_rows > 0 ? vocab_rows : 1) * C, -1, 1), wpe = rnd<T>((size_t)Tn * C, -1, 1);
    const T *wte_p = vocab_rows > 0 ? wte.data() : nullptr, *wpe_p = wpe_on ? wpe.data() : nullptr;
    {
        checker ck("encoder", "encoder_forward<%s> B=%d T=%d C=%d slice [%d,+%d) of V=%d%s", prec<T>::name, B, Tn, C, vocab_start,
                   vocab_rows, V, wpe_on ? "" : " no wpe");
        std::vector<T> out;
        in_orders(ck, random, [&] {
            out = filled<T>((size_t)N * C, 7.0f); // every element must be written
            ck.rc(mgt_cuda_encoder_forward<T>(out.data(), tok.data(), wte_p, vocab_start, vocab_rows, wpe_p, B, Tn, C, nullptr));
            return std::vector<blob>{bytes(out)};
        });
        for (int r = 0; r < N; r++) {
            int v = tok[r] - vocab_start;
            bool in = v >= 0 && v < vocab_rows;
            for (int c = 0; c < C; c++) {
                double e = in ? dv(wte[(size_t)v * C + c]) : 0.0, p = wpe_on ? dv(wpe[(size_t)(r % Tn) * C + c]) : 0.0;
                // one fp32 addition (exact when one term is 0): one rounding of the sum
                ck.near("out", (size_t)r * C + c, dv(out[(size_t)r * C + c]), e + p, bnd<T>(e + p, U32 * fabs(e + p)));
            }
        }
    }
    {
        checker ck("encoder", "encoder_backward<%s> B=%d T=%d C=%d slice [%d,+%d) of V=%d%s", prec<T>::name, B, Tn, C, vocab_start,
                   vocab_rows, V, wpe_on ? "" : " no dwpe");
        std::vector<T> dout = rnd<T>((size_t)N * C, -1, 1);
        std::vector<float> dwte0 = rnd<float>(wte.size(), -1, 1), dwpe0 = rnd<float>(wpe.size(), -1, 1), dwte, dwpe; // fp32 gradients
        std::vector<unsigned long long> keys;
        in_orders(ck, random, [&] {
            dwte = dwte0; // "+=": starts non-zero
            dwpe = dwpe0;
            keys.assign(mgt_cuda_encoder_backward_scratch(N) / sizeof(unsigned long long), 0x5a5a5a5a5a5a5a5aull); // written before read
            ck.rc(mgt_cuda_encoder_backward<T>(vocab_rows > 0 ? dwte.data() : nullptr, wpe_on ? dwpe.data() : nullptr, keys.data(), dout.data(),
                                               tok.data(), vocab_start, vocab_rows, B, Tn, C, nullptr));
            return std::vector<blob>{bytes(dwte), bytes(dwpe)};
        });
        /* two references. In double: the fp32 sum of k terms (the start value and each position's
           dout) is off by at most (k - 1) 2^-24 sum|terms|, held to bnd<float> with k 2^-24 sum|terms|
           (fp32 result: no rounding into T any more). In fp32, adding the positions in order
           b = 0.., t = 0.. (mgt.h's mgt__encoder_bwd_task): the kernel must give it bit for bit */
        std::vector<double> swte(dwte0.size()), mwte(dwte0.size()), swpe(dwpe0.size()), mwpe(dwpe0.size());
        std::vector<float> owte = dwte0, owpe = dwpe0;
        std::vector<int> kwte(vocab_rows > 0 ? (size_t)vocab_rows : 1, 1);
        for (size_t i = 0; i < swte.size(); i++) swte[i] = dwte0[i], mwte[i] = fabs(swte[i]);
        for (size_t i = 0; i < swpe.size(); i++) swpe[i] = dwpe0[i], mwpe[i] = fabs(swpe[i]);
        for (int r = 0; r < N; r++) {
            int v = tok[r] - vocab_start;
            bool in = v >= 0 && v < vocab_rows;
            if (in) kwte[v]++;
            for (int c = 0; c < C; c++) {
                double d = dv(dout[(size_t)r * C + c]);
                if (in) swte[(size_t)v * C + c] += d, mwte[(size_t)v * C + c] += fabs(d), owte[(size_t)v * C + c] += (float)d;
                swpe[(size_t)(r % Tn) * C + c] += d, mwpe[(size_t)(r % Tn) * C + c] += fabs(d), owpe[(size_t)(r % Tn) * C + c] += (float)d;
            }
        }
        if (vocab_rows > 0)
            for (size_t i = 0; i < swte.size(); i++) {
                ck.near("dwte", i, dwte[i], swte[i], bnd<float>(swte[i], kwte[i / C] * U32 * mwte[i]));
                ck.near("dwte (fp32, position order)", i, dwte[i], owte[i], 0.0);
            }
        for (size_t i = 0; i < swpe.size(); i++) {
            if (!wpe_on) { // no dwpe: untouched
                ck.near("dwpe (untouched)", i, dwpe[i], dwpe0[i], 0.0);
                continue;
            }
            ck.near("dwpe", i, dwpe[i], swpe[i], bnd<float>(swpe[i], (B + 1) * U32 * mwpe[i]));
            ck.near("dwpe (fp32, position order)", i, dwpe[i], owpe[i], 0.0);
        }
    }
}

/* a frequent token: 1024 positions of one token with dout = 0.0100098 = 41 x 2^-12 (0.01 in bf16,
   exact in every T) each. Every partial fp32 sum k x 41 x 2^-12 (k <= 1024) fits in 16 bits, so is
   exact, and dwte must be the sum, 10.25, exactly (a dwte rounded to bf16 after every addition
   would stall at 4) */
template <class T> static void test_encoder_frequent_token(void) {
    const int N = 1024, C = 5;
    checker ck("encoder", "encoder_backward<%s> one token at %d positions", prec<T>::name, N);
    std::vector<int> tok(N, 0);
    std::vector<T> dout = filled<T>((size_t)N * C, (float)__nv_bfloat16(0.01f));
    std::vector<float> dwte;
    std::vector<unsigned long long> keys(mgt_cuda_encoder_backward_scratch(N) / sizeof(unsigned long long));
    in_orders(ck, false, [&] {
        dwte.assign(C, 0.0f);
        ck.rc(mgt_cuda_encoder_backward<T>(dwte.data(), nullptr, keys.data(), dout.data(), tok.data(), 0, 1, 1, N, C, nullptr));
        return std::vector<blob>{bytes(dwte)};
    });
    for (int c = 0; c < C; c++) ck.near("dwte", c, dwte[c], N * dv(dout[0]), 0.0);
}

/* ==== layernorm ============================================================================================= */
template <class T> static void test_layernorm(int N, int C, bool random, bool stats = true) {
    std::vector<T> inp = rnd<T>((size_t)N * C, -1, 1.5), w = rnd<T>(C, 0.5, 1.5), b = rnd<T>(C, -0.5, 0.5);
    for (int c = 0; c < C; c += 5) inp[c] = T(3.0f); // a few outliers in row 0
    std::vector<double> m(N), rs(N);
    for (int r = 0; r < N; r++) {
        double s = 0, v = 0;
        for (int c = 0; c < C; c++) s += dv(inp[(size_t)r * C + c]);
        m[r] = s / C;
        for (int c = 0; c < C; c++) v += (dv(inp[(size_t)r * C + c]) - m[r]) * (dv(inp[(size_t)r * C + c]) - m[r]);
        rs[r] = 1.0 / sqrt(v / C + 1e-5);
    }
    {
        checker ck("layernorm", "layernorm_forward<%s> N=%d C=%d%s", prec<T>::name, N, C, stats ? "" : " no mean/rstd");
        std::vector<T> out;
        std::vector<float> mean, rstd;
        in_orders(ck, random, [&] {
            out = filled<T>((size_t)N * C, 7.0f);
            mean.assign(N, 7.0f);
            rstd.assign(N, 7.0f);
            ck.rc(mgt_cuda_layernorm_forward<T>(out.data(), stats ? mean.data() : nullptr, stats ? rstd.data() : nullptr, inp.data(), w.data(),
                                                b.data(), N, C, nullptr));
            return std::vector<blob>{bytes(out), bytes(mean), bytes(rstd)};
        });
        /* the mean is a C-term fp32 sum (strided per lane, then a 5-level tree): (C + 5) 2^-24 mean|x|;
           the variance a C-term sum of squares, so rstd is off by about (C + 8) 2^-24 relative (its
           square root halves that; the rest is slack); the variance is stationary in the mean, so the
           mean's error em enters it only squared (em^2 rs^2 relative); out = (x - m) rs w + b inherits
           the mean's error times rs |w|, rstd's relative error times |xhat w|, and four roundings */
        for (int r = 0; r < N; r++) {
            double ma = 0;
            for (int c = 0; c < C; c++) ma += fabs(dv(inp[(size_t)r * C + c]));
            ma /= C;
            double em = (C + 5) * U32 * ma, erel = (C + 8) * U32;
            if (stats) {
                ck.near("mean", r, mean[r], m[r], em + prec<float>::tiny);
                ck.near("rstd", r, rstd[r], rs[r], (erel + em * em * rs[r] * rs[r]) * rs[r]);
            } else {
                ck.near("mean (untouched)", r, mean[r], 7.0, 0.0);
            }
            for (int c = 0; c < C; c++) {
                double xh = (dv(inp[(size_t)r * C + c]) - m[r]) * rs[r], want = xh * dv(w[c]) + dv(b[c]);
                double e32 = em * rs[r] * fabs(dv(w[c])) + (erel + em * em * rs[r] * rs[r]) * fabs(xh * dv(w[c])) +
                             4 * U32 * (fabs(xh * dv(w[c])) + fabs(dv(b[c])));
                ck.near("out", (size_t)r * C + c, dv(out[(size_t)r * C + c]), want, bnd<T>(want, e32));
            }
        }
    }
    {
        checker ck("layernorm", "layernorm_backward<%s> N=%d C=%d", prec<T>::name, N, C);
        std::vector<T> dout = rnd<T>((size_t)N * C, -1, 1), dinp0 = rnd<T>((size_t)N * C, -1, 1), dinp;
        std::vector<float> dw0 = rnd<float>(C, -1, 1), db0 = rnd<float>(C, -1, 1), dw, db; // fp32 parameter gradients
        std::vector<float> mean(N), rstd(N); // the saved statistics, as the forward kernel stores them
        for (int r = 0; r < N; r++) mean[r] = (float)m[r], rstd[r] = (float)rs[r];
        std::vector<float> scratch;
        size_t sbytes = mgt_cuda_layernorm_backward_scratch(N, C);
        unsigned ticket = 0;
        in_orders(ck, random, [&] {
            dinp = dinp0, dw = dw0, db = db0;
            scratch.assign(sbytes / sizeof(float), NAN); // the kernel must write before it reads
            ck.rc(mgt_cuda_layernorm_backward<T>(dinp.data(), dw.data(), db.data(), scratch.data(), &ticket, dout.data(), inp.data(), w.data(),
                                                 mean.data(), rstd.data(), N, C, nullptr));
            ck.near("ticket (left at 0)", 0, ticket, 0.0, 0.0);
            return std::vector<blob>{bytes(dinp), bytes(dw), bytes(db)};
        });
        std::vector<double> sw(C), sb(C), mw(C), mb(C);
        for (int c = 0; c < C; c++) sw[c] = dw0[c], sb[c] = db0[c], mw[c] = fabs(sw[c]), mb[c] = fabs(sb[c]);
        for (int r = 0; r < N; r++) {
            double mr = mean[r], rr = rstd[r], sg = 0, sgx = 0, ag = 0, agx = 0;
            for (int c = 0; c < C; c++) {
                double g = dv(w[c]) * dv(dout[(size_t)r * C + c]), xh = (dv(inp[(size_t)r * C + c]) - mr) * rr;
                sg += g, sgx += g * xh, ag += fabs(g), agx += fabs(g * xh);
            }
            double mg = sg / C, mgx = sgx / C;
            for (int c = 0; c < C; c++) {
                size_t i = (size_t)r * C + c;
                double d = dv(dout[i]), g = dv(w[c]) * d, xh = (dv(inp[i]) - mr) * rr;
                double want = dv(dinp0[i]) + rr * (g - mg - xh * mgx);
                /* the two row means are C-term fp32 sums: (C + 5) 2^-24 of their |terms|; six roundings on the rest */
                double e32 = (C + 5) * U32 * rr * (ag + fabs(xh) * agx) / C + 6 * U32 * (fabs(dv(dinp0[i])) + rr * (fabs(g) + fabs(mg) + fabs(xh * mgx)));
                ck.near("dinp", i, dv(dinp[i]), want, bnd<T>(want, e32));
                sw[c] += d * xh, mw[c] += fabs(d * xh), sb[c] += d, mb[c] += fabs(d);
            }
        }
        /* dweight, dbias: fp32 results. N + 1 values (the start and a term per row) summed by N fp32
           additions in any tree (rows in parts, warps, then parts in order), each off by at most
           2^-24 of its result, at most 2^-24 sum|terms|; xhat and dout xhat add 3 roundings per term:
           (N + 3) 2^-24 sum|terms|, held to (N + 8) (no u_T: nothing is rounded into T) */
        for (int c = 0; c < C; c++) {
            ck.near("dweight", c, dw[c], sw[c], bnd<float>(sw[c], (N + 8) * U32 * mw[c]));
            ck.near("dbias", c, db[c], sb[c], bnd<float>(sb[c], (N + 8) * U32 * mb[c]));
        }
    }
}

/* ==== causal flash attention ================================================================================== */
/* qkv (B,T,W) with W = C + 2 KV, C = NH hs, KV = NKV hs (query head h reads key/value head
   h / (NH / NKV)); references in double from the inputs as stored: the exact softmax over j <= t,
   out, lse, and the exact gradients (dk, dv summed over each group's query heads). The backward gets
   the forward's out rounded into T (as the kernel would have stored it) and lse rounded to fp32. */
template <class T> static void test_attention(int B, int Tn, int NH, int NKV, int hs, bool random) {
    int C = NH * hs, KV = NKV * hs, W = C + 2 * KV, group = NH / NKV;
    size_t nq = (size_t)B * Tn * W, no = (size_t)B * Tn * C, nkv = (size_t)B * Tn * KV, nl = (size_t)B * NH * Tn;
    const double scale = (double)(1.0f / sqrtf((float)hs)); // the kernel's, in fp32
    std::vector<T> qkv = rnd<T>(nq, -2, 2), dout = rnd<T>(no, -1, 1);
    auto Q = [&](int b, int t, int h, int d) { return dv(qkv[((size_t)b * Tn + t) * W + (size_t)h * hs + d]); };
    auto K = [&](int b, int t, int h, int d) { return dv(qkv[((size_t)b * Tn + t) * W + C + (size_t)(h / group) * hs + d]); };
    auto V = [&](int b, int t, int h, int d) { return dv(qkv[((size_t)b * Tn + t) * W + C + KV + (size_t)(h / group) * hs + d]); };
    auto dO = [&](int b, int t, int h, int d) { return dv(dout[((size_t)b * Tn + t) * C + (size_t)h * hs + d]); };
    /* per (b,h): P (T,T), |s| magnitudes, out, lse; then the gradients */
    std::vector<double> out(no), lse(nl), dq(no), dk(nkv, 0.0), dvv(nkv, 0.0), out_e(no), lse_e(nl), dq_e(no), dk_e(nkv, 0.0), dv_e(nkv, 0.0);
    std::vector<T> out_T(no);
    /* e32 of each output: F times the sum of its terms' magnitudes, F covering the fp32 dot products
       (hs terms), the sums over keys (T terms) and the exp of scores off by their own rounding
       (mag: scale sum |q k| + |s| + |lse|), twice over; in the backward, D from the out the kernel
       read (rounded into T) adds |dout| |out - rounded out| per row */
    const double F = 2.0 * (2 * hs + Tn + 32) * U32;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            std::vector<double> P((size_t)Tn * Tn, 0.0), mag((size_t)Tn * Tn, 0.0), dS((size_t)Tn * Tn, 0.0), dP((size_t)Tn * Tn, 0.0);
            std::vector<double> Dabs(Tn), Dt(Tn);
            for (int t = 0; t < Tn; t++) {
                double mx = -INFINITY, sum = 0;
                std::vector<double> sv(t + 1);
                for (int j = 0; j <= t; j++) {
                    double x = 0, xa = 0;
                    for (int d = 0; d < hs; d++) x += Q(b, t, h, d) * K(b, j, h, d), xa += fabs(Q(b, t, h, d) * K(b, j, h, d));
                    sv[j] = scale * x;
                    mag[(size_t)t * Tn + j] = scale * xa;
                    mx = fmax(mx, sv[j]);
                }
                for (int j = 0; j <= t; j++) sum += exp(sv[j] - mx);
                size_t li = ((size_t)b * NH + h) * Tn + t;
                lse[li] = mx + log(sum);
                double magmax = 0;
                for (int j = 0; j <= t; j++) {
                    P[(size_t)t * Tn + j] = exp(sv[j] - lse[li]);
                    // relative error of the kernel's P: its scores, the max and lse are fp32 sums of hs terms
                    mag[(size_t)t * Tn + j] += fabs(sv[j]) + fabs(lse[li]);
                    magmax = fmax(magmax, mag[(size_t)t * Tn + j]);
                }
                lse_e[li] = F * (magmax + 1);
                for (int d = 0; d < hs; d++) {
                    double o = 0, oa = 0;
                    for (int j = 0; j <= t; j++) o += P[(size_t)t * Tn + j] * V(b, j, h, d), oa += P[(size_t)t * Tn + j] * fabs(V(b, j, h, d)) * (1 + mag[(size_t)t * Tn + j]);
                    size_t oi = ((size_t)b * Tn + t) * C + (size_t)h * hs + d;
                    out[oi] = o;
                    out_e[oi] = F * oa;
                    out_T[oi] = T((float)o);
                }
            }
            for (int t = 0; t < Tn; t++) { // D from the rounded out, as the kernel sees it
                double Dx = 0, Da = 0, De = 0;
                for (int d = 0; d < hs; d++) {
                    size_t oi = ((size_t)b * Tn + t) * C + (size_t)h * hs + d;
                    Dx += dO(b, t, h, d) * out[oi], Da += fabs(dO(b, t, h, d) * out[oi]);
                    De += fabs(dO(b, t, h, d) * (dv(out_T[oi]) - out[oi]));
                }
                Dt[t] = Dx;
                Dabs[t] = Da * F + De;
                for (int j = 0; j <= t; j++) {
                    double x = 0;
                    for (int d = 0; d < hs; d++) x += dO(b, t, h, d) * V(b, j, h, d);
                    dP[(size_t)t * Tn + j] = x;
                    dS[(size_t)t * Tn + j] = P[(size_t)t * Tn + j] * (x - Dx);
                }
            }
            for (int t = 0; t < Tn; t++)
                for (int d = 0; d < hs; d++) {
                    size_t gi = ((size_t)b * Tn + t) * C + (size_t)h * hs + d;
                    double g = 0, ga = 0, gk = 0, gka = 0, gv = 0, gva = 0;
                    for (int j = 0; j <= t; j++) { // dq_t: over keys j <= t
                        size_t i = (size_t)t * Tn + j;
                        g += dS[i] * K(b, j, h, d);
                        ga += fabs(K(b, j, h, d)) * P[i] * (F * (fabs(dP[i]) + fabs(Dt[t]) + fabs(dP[i] - Dt[t]) * (1 + mag[i])) + Dabs[t]);
                    }
                    for (int u = t; u < Tn; u++) { // dk_t, dv_t: over queries u >= t
                        size_t i = (size_t)u * Tn + t;
                        gk += dS[i] * Q(b, u, h, d);
                        gka += fabs(Q(b, u, h, d)) * P[i] * (F * (fabs(dP[i]) + fabs(Dt[u]) + fabs(dP[i] - Dt[u]) * (1 + mag[i])) + Dabs[u]);
                        gv += P[i] * dO(b, u, h, d);
                        gva += P[i] * fabs(dO(b, u, h, d)) * F * (1 + mag[i]);
                    }
                    size_t ki = ((size_t)b * Tn + t) * KV + (size_t)(h / group) * hs + d; // the group's heads in turn
                    dq[gi] = scale * g, dq_e[gi] = scale * ga;
                    dk[ki] += scale * gk, dk_e[ki] += scale * gka;
                    dvv[ki] += gv, dv_e[ki] += gva;
                }
        }
    {
        checker ck("attention", "attention_forward<%s> B=%d T=%d NH=%d NKV=%d hs=%d", prec<T>::name, B, Tn, NH, NKV, hs);
        std::vector<T> o;
        std::vector<float> l;
        in_orders(ck, random, [&] {
            o = filled<T>(no, 7.0f);
            l = filled<float>(nl, 7.0f);
            ck.rc(mgt_cuda_attention_forward<T>(o.data(), l.data(), qkv.data(), B, Tn, NH, NKV, hs, nullptr));
            return std::vector<blob>{bytes(o), bytes(l)};
        });
        for (size_t i = 0; i < no; i++) ck.near("out", i, dv(o[i]), out[i], bnd<T>(out[i], out_e[i]));
        for (size_t i = 0; i < nl; i++) ck.near("lse", i, (double)l[i], lse[i], bnd<float>(lse[i], lse_e[i]));
    }
    {
        checker ck("attention", "attention_backward<%s> B=%d T=%d NH=%d NKV=%d hs=%d", prec<T>::name, B, Tn, NH, NKV, hs);
        std::vector<float> l(nl), scratch(nl);
        for (size_t i = 0; i < nl; i++) l[i] = (float)lse[i];
        std::vector<T> d;
        in_orders(ck, random, [&] {
            d = filled<T>(nq, 7.0f);
            scratch = filled<float>(nl, 7.0f);
            ck.rc(mgt_cuda_attention_backward<T>(d.data(), scratch.data(), dout.data(), qkv.data(), out_T.data(), l.data(), B, Tn, NH, NKV, hs, nullptr));
            return std::vector<blob>{bytes(d)};
        });
        for (int bt = 0; bt < B * Tn; bt++) {
            for (int c = 0; c < C; c++) {
                size_t gi = (size_t)bt * C + c, at = (size_t)bt * W + c;
                ck.near("dq", at, dv(d[at]), dq[gi], bnd<T>(dq[gi], dq_e[gi]));
            }
            for (int c = 0; c < KV; c++) {
                size_t ki = (size_t)bt * KV + c, at = (size_t)bt * W + C + c;
                ck.near("dk", at, dv(d[at]), dk[ki], bnd<T>(dk[ki], dk_e[ki]));
                ck.near("dv", at + KV, dv(d[at + KV]), dvv[ki], bnd<T>(dvv[ki], dv_e[ki]));
            }
        }
    }
}

/* the fused residual + LayerNorm forward: the same bytes as bias_residual then layernorm_forward (the
   same fp32 operations in the same order), both of which are held to references above; residual may be res */
template <class T> static void test_residual_layernorm(int N, int C, bool alias, bool random) {
    std::vector<T> res0 = rnd<T>((size_t)N * C, -1, 1), x = rnd<T>((size_t)N * C, -1, 1), rb = rnd<T>(C, -0.5, 0.5), w = rnd<T>(C, 0.5, 1.5),
                   b = rnd<T>(C, -0.5, 0.5);
    checker ck("layernorm", "residual_layernorm_forward<%s> N=%d C=%d%s", prec<T>::name, N, C, alias ? " residual = res" : "");
    std::vector<T> res, out, res2, out2;
    std::vector<float> mean, rstd, mean2, rstd2;
    in_orders(ck, random, [&] {
        res = res0, out = filled<T>((size_t)N * C, 7.0f), mean.assign(N, 7.0f), rstd.assign(N, 7.0f);
        ck.rc(mgt_cuda_residual_layernorm_forward<T>(res.data(), out.data(), mean.data(), rstd.data(), alias ? res.data() : x.data(), rb.data(), w.data(),
                                                     b.data(), N, C, nullptr));
        return std::vector<blob>{bytes(res), bytes(out), bytes(mean), bytes(rstd)};
    });
    res2 = res0, out2 = filled<T>((size_t)N * C, 7.0f), mean2.assign(N, 7.0f), rstd2.assign(N, 7.0f);
    ck.rc(mgt_cuda_bias_residual<T>(res2.data(), alias ? res2.data() : x.data(), rb.data(), N, C, nullptr));
    ck.rc(mgt_cuda_layernorm_forward<T>(out2.data(), mean2.data(), rstd2.data(), res2.data(), w.data(), b.data(), N, C, nullptr));
    const char *names[] = {"res", "out", "mean", "rstd"};
    std::vector<blob> fused = {bytes(res), bytes(out), bytes(mean), bytes(rstd)}, apart = {bytes(res2), bytes(out2), bytes(mean2), bytes(rstd2)};
    for (int o = 0; o < 4; o++) {
        ck.f->values++;
        if (fused[o] != apart[o]) FAIL("%s: %s differs from bias_residual then layernorm_forward", ck.what, names[o]);
    }
    for (size_t i = 0; i < res.size(); i++) { // and the sum itself: two fp32 additions
        double o = dv(res0[i]), r = alias ? o : dv(x[i]), bb = dv(rb[i % C]), want = o + r + bb;
        ck.near("res", i, dv(res[i]), want, bnd<T>(want, 2 * U32 * (fabs(o) + fabs(r) + fabs(bb))));
    }
}

/* ==== GELU (tanh approximation) ============================================================================== */
static const double GELU_S = 0.7978845608028654, GELU_A = 0.044715;
template <class T> static void test_gelu(size_t n, int alias, bool random) {
    static const char *alias_name[] = {"", " dinp = inp", " dinp = dout"};
    std::vector<T> inp = rnd<T>(n, -6, 6), dout0 = rnd<T>(n, -1, 1);
    inp[0] = T(0.0f), inp[n > 1 ? 1 : 0] = T(-0.0f);
    {
        checker ck("gelu", "gelu_forward<%s> n=%zu", prec<T>::name, n);
        std::vector<T> out;
        in_orders(ck, random, [&] {
            out = filled<T>(n, 7.0f);
            ck.rc(mgt_cuda_gelu_forward<T>(out.data(), inp.data(), n, nullptr));
            return std::vector<blob>{bytes(out)};
        });
        /* out = 0.5 x (1 + th): tanhf and its argument give th an absolute error of a few 2^-24, which
           0.5 |x| carries into out (the cancellation in 1 + th for x << 0); four more roundings */
        for (size_t i = 0; i < n; i++) {
            double x = dv(inp[i]), want = 0.5 * x * (1 + tanh(GELU_S * (x + GELU_A * x * x * x)));
            ck.near("out", i, dv(out[i]), want, bnd<T>(want, U32 * (4 * fabs(x) + 4 * fabs(want))));
        }
    }
    {
        checker ck("gelu", "gelu_backward<%s> n=%zu%s", prec<T>::name, n, alias_name[alias]);
        std::vector<T> dinp, in, dout;
        in_orders(ck, random, [&] {
            in = inp, dout = dout0;
            dinp = filled<T>(n, 7.0f);
            T *d = alias == 1 ? in.data() : alias == 2 ? dout.data() : dinp.data();
            ck.rc(mgt_cuda_gelu_backward<T>(d, in.data(), dout.data(), n, nullptr));
            return std::vector<blob>{bytes(alias == 1 ? in : alias == 2 ? dout : dinp)};
        });
        const std::vector<T> &got = alias == 1 ? in : alias == 2 ? dout : dinp;
        /* grad = 0.5 (1 + th) + 0.5 x (1 - th^2) s (1 + 3 a x^2): th's absolute error (a few 2^-24) is
           multiplied by up to 1 + |x| s (1 + 3 a x^2) (the second term's factor th^2); ten roundings */
        for (size_t i = 0; i < n; i++) {
            double x = dv(inp[i]), th = tanh(GELU_S * (x + GELU_A * x * x * x));
            double g = 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * GELU_S * (1 + 3 * GELU_A * x * x), d = dv(dout0[i]), want = g * d;
            double mag = 1 + fabs(x) * GELU_S * (1 + 3 * GELU_A * x * x);
            ck.near("dinp", i, dv(got[i]), want, bnd<T>(want, 10 * U32 * mag * fabs(d)));
        }
    }
}

/* ==== residual: y += x; out += residual + bias; dbias += column sums ========================================== */
template <class T> static void test_residual(int N, int C, bool random) {
    size_t n = (size_t)N * C;
    std::vector<T> x = rnd<T>(n, -1, 1), y0 = rnd<T>(n, -1, 1), bias = rnd<T>(C, -1, 1);
    for (int alias = 0; alias < 2; alias++) {
        checker ck("residual", "add_inplace<%s> n=%zu%s", prec<T>::name, n, alias ? " x = y" : "");
        std::vector<T> y;
        in_orders(ck, random, [&] {
            y = y0;
            ck.rc(mgt_cuda_add_inplace<T>(y.data(), alias ? y.data() : x.data(), n, nullptr));
            return std::vector<blob>{bytes(y)};
        });
        for (size_t i = 0; i < n; i++) { // one fp32 addition: one rounding
            double want = dv(y0[i]) + (alias ? dv(y0[i]) : dv(x[i]));
            ck.near("y", i, dv(y[i]), want, bnd<T>(want, U32 * fabs(want)));
        }
    }
    for (int alias = 0; alias < 3; alias++) { /* 2: no residual (out += bias, a matmul's bias without cuBLASLt's epilogue) */
        checker ck("residual", "bias_residual<%s> N=%d C=%d%s", prec<T>::name, N, C, alias == 1 ? " residual = out" : alias ? " no residual" : "");
        std::vector<T> out;
        in_orders(ck, random, [&] {
            out = y0; // "+="
            ck.rc(mgt_cuda_bias_residual<T>(out.data(), alias == 1 ? out.data() : alias ? nullptr : x.data(), bias.data(), N, C, nullptr));
            return std::vector<blob>{bytes(out)};
        });
        for (size_t i = 0; i < n; i++) { // two fp32 additions
            double o = dv(y0[i]), r = alias == 1 ? o : alias ? 0.0 : dv(x[i]), b = dv(bias[i % C]), want = o + r + b;
            ck.near("out", i, dv(out[i]), want, bnd<T>(want, 2 * U32 * (fabs(o) + fabs(r) + fabs(b))));
        }
    }
    {
        checker ck("residual", "bias_backward<%s> N=%d C=%d", prec<T>::name, N, C);
        std::vector<float> db0 = rnd<float>(C, -1, 1), db, scratch; // fp32 parameter gradient
        size_t sbytes = mgt_cuda_bias_backward_scratch(N, C);
        in_orders(ck, random, [&] {
            db = db0;
            scratch.assign(sbytes / sizeof(float), NAN);
            ck.rc(mgt_cuda_bias_backward<T>(db.data(), scratch.data(), x.data(), N, C, nullptr));
            return std::vector<blob>{bytes(db)};
        });
        /* an (N + 1)-term fp32 sum in parts: N additions, each off by at most 2^-24 sum|terms|; the
           result is fp32 (no u_T), held to (N + 8) 2^-24 sum|terms| */
        for (int c = 0; c < C; c++) {
            double s = db0[c], a = fabs(s);
            for (int r = 0; r < N; r++) s += dv(x[(size_t)r * C + c]), a += fabs(dv(x[(size_t)r * C + c]));
            ck.near("dbias", c, db[c], s, bnd<float>(s, (N + 8) * U32 * a));
        }
    }
}

/* ==== vocabulary-parallel cross-entropy ======================================================================= */
template <class T> static void test_xent(int N, int V, int tp, int Vl, float gs, bool random) {
    const float PAD = 1000.0f; // padding columns hold a value that would dominate any max or sum that read it
    std::vector<int> tgt(N);
    for (int r = 0; r < N; r++) tgt[r] = irand(V);
    tgt[0] = 0, tgt[N > 1 ? 1 : 0] = V - 1;
    if (N > 2 && tp > 1) tgt[2] = Vl; // the first column of rank 1
    std::vector<std::vector<T>> logits0(tp);
    for (int k = 0; k < tp; k++) {
        logits0[k] = rnd<T>((size_t)N * Vl, -4, 4);
        for (int r = 0; r < N; r++) {
            if (r % 4 == 1 && Vl > 3) logits0[k][(size_t)r * Vl + 3] = T(12.0f); // a peaked row
            for (int i = 0; i < Vl; i++)
                if (k * Vl + i >= V) logits0[k][(size_t)r * Vl + i] = T(PAD);
        }
    }
    auto valid_of = [&](int k) { int v = V - k * Vl; return v < 0 ? 0 : v > Vl ? Vl : v; };
    /* partial, rank by rank */
    std::vector<float> parts((size_t)tp * N * 3);
    for (int k = 0; k < tp; k++) {
        int valid = valid_of(k);
        checker ck("crossentropy", "xent_partial<%s> N=%d V=%d tp=%d rank %d Vl=%d (valid %d)", prec<T>::name, N, V, tp, k, Vl, valid);
        std::vector<T> l;
        std::vector<float> part;
        in_orders(ck, random, [&] {
            l = logits0[k];
            part.assign((size_t)N * 3, 7.0f);
            ck.rc(mgt_cuda_xent_partial<T>(part.data(), l.data(), tgt.data(), N, k * Vl, Vl, V, nullptr));
            return std::vector<blob>{bytes(part), bytes(l)};
        });
        for (int r = 0; r < N; r++) {
            const T *x = &logits0[k][(size_t)r * Vl];
            double mx = -INFINITY, sum = 0, mag = 0;
            for (int i = 0; i < valid; i++) mx = fmax(mx, dv(x[i]));
            for (int i = 0; i < valid; i++) {
                double e = exp(dv(x[i]) - mx);
                sum += e, mag += e * (fabs(dv(x[i]) - mx) + 2);
            }
            int y = tgt[r] - k * Vl;
            double target = y >= 0 && y < valid ? dv(x[y]) : 0.0;
            ck.near("max", (size_t)r, part[(size_t)r * 3], mx, 0.0); // a max is exact
            /* sum of exp(l - max): each term off by (|l - max| + 2) 2^-24 relative (the rounded
               difference, expf), the sum of `valid` terms by (valid + 10) 2^-24 of the total */
            ck.near("sum", (size_t)r, part[(size_t)r * 3 + 1], sum, valid ? U32 * (mag + (valid + 10) * sum) : 0.0);
            ck.near("target", (size_t)r, part[(size_t)r * 3 + 2], target, 0.0);
            for (int i = 0; i < Vl; i++) // the fused classifier keeps no probabilities: the logits are only read
                ck.near("logits (untouched)", (size_t)r * Vl + i, dv(l[(size_t)r * Vl + i]), dv(x[i]), 0.0);
        }
        memcpy(&parts[(size_t)k * N * 3], part.data(), sizeof(float) * N * 3);
    }
    /* finish, on every rank: the same losses everywhere, and this rank's gradient */
    std::vector<double> loss0;
    for (int k = 0; k < tp; k++) {
        int valid = valid_of(k);
        checker ck("crossentropy", "xent_finish<%s> N=%d V=%d tp=%d rank %d Vl=%d grad_scale=%g", prec<T>::name, N, V, tp, k, Vl, gs);
        std::vector<T> l;
        std::vector<double> losses;
        in_orders(ck, random, [&] {
            l = logits0[k];
            losses.assign(N, 7.0);
            ck.rc(mgt_cuda_xent_finish<T>(losses.data(), l.data(), parts.data(), tp, tgt.data(), N, k * Vl, Vl, V, gs, nullptr));
            return std::vector<blob>{bytes(losses), bytes(l)};
        });
        if (k == 0) loss0 = losses;
        else if (bytes(losses) != bytes(loss0)) FAIL("%s: the losses differ from rank 0's", ck.what);
        for (int r = 0; r < N; r++) {
            /* from the parts: M, S = sum_k sum_k exp(max_k - M) (each exp off by (|max_k - M| + 2)
               2^-24 relative, an underflowing one by 2^-149 absolute), loss = log S + M - target in fp64 */
            double M = -INFINITY, S = 0, target = 0, w = 0, under = 0;
            for (int q = 0; q < tp; q++) {
                const float *p = &parts[((size_t)q * N + r) * 3];
                if (p[1] > 0 && p[0] > M) M = p[0];
            }
            for (int q = 0; q < tp; q++) {
                const float *p = &parts[((size_t)q * N + r) * 3];
                if (p[1] > 0) {
                    double e = (double)p[1] * exp((double)p[0] - M);
                    S += e, w += e * (fabs((double)p[0] - M) + 2), under += (double)p[1] * 0x1p-149;
                }
                target += p[2];
            }
            double loss = log(S) + M - target;
            ck.near("loss", (size_t)r, losses[r], loss, (U32 * w + under) / S + 1e-15 * (fabs(log(S)) + fabs(M) + fabs(target)));
            /* and end to end from the original logits (independent of the parts): the partial sums'
               (valid + 10 + spread) 2^-24 on top */
            double gmax = -INFINITY, gsum = 0, spread = 0, yl = 0;
            for (int q = 0; q < tp; q++)
                for (int i = 0; i < valid_of(q); i++) gmax = fmax(gmax, dv(logits0[q][(size_t)r * Vl + i]));
            for (int q = 0; q < tp; q++)
                for (int i = 0; i < valid_of(q); i++) {
                    double x = dv(logits0[q][(size_t)r * Vl + i]);
                    gsum += exp(x - gmax), spread = fmax(spread, gmax - x);
                    if (q * Vl + i == tgt[r]) yl = x;
                }
            double direct = log(gsum) + gmax - yl;
            ck.near("loss (end to end)", (size_t)r, losses[r], direct, U32 * (Vl + 20 + 2 * spread) + 1e-15 * (fabs(gmax) + fabs(yl) + 1));
            /* dlogits = exp(l - M) * (gs / S) - onehot gs: exp(l - M) off by (|l - M| + 2) 2^-24 relative
               (the rounded difference, expf), the scale 1/S rounded to fp32 and times gs, the product:
               (|l - M| + 6) 2^-24 in all */
            int y = tgt[r] - k * Vl;
            for (int i = 0; i < Vl; i++) {
                size_t j = (size_t)r * Vl + i;
                if (gs == 0.0f) {
                    ck.near("logits (untouched)", j, dv(l[j]), dv(logits0[k][j]), 0.0);
                    continue;
                }
                if (i >= valid) {
                    ck.near("dlogits padding", j, dv(l[j]), 0.0, 0.0);
                    continue;
                }
                double a = exp(dv(logits0[k][j]) - M) / S * gs, want = a - (i == y ? gs : 0.0);
                double e32 = (fabs(dv(logits0[k][j]) - M) + 6) * U32 * fabs(a) + U32 * fabs(want);
                ck.near("dlogits", j, dv(l[j]), want, bnd<T>(want, e32));
                /* end to end: (softmax - onehot) gs, the partial sums' error on top */
                double x = dv(logits0[k][j]), sm = exp(x - gmax) / gsum, d2 = (sm - (i == y ? 1.0 : 0.0)) * gs;
                double e2 = U32 * (Vl + 30 + 2 * spread) * sm * fabs(gs);
                ck.near("dlogits (end to end)", j, dv(l[j]), d2, bnd<T>(d2, e2));
            }
        }
    }
}

/* ==== AdamW ==================================================================================================== */
struct adam_hp {
    float lr, b1, b2, eps, wd, gs, bc1, bc2;
};
/* one element in double from the same fp32 hyperparameters; e32: what fp32 may add (the scalars
   step, sqrt(bc2), decay each rounded once, a few roundings per moment, the quotient's ten) */
static void adam_ref(const adam_hp &h, double p, double g, double m, double v, double *po, double *mo, double *vo, double e32[3]) {
    g *= h.gs;
    double m1 = h.b1 * m + (1.0 - h.b1) * g, v1 = h.b2 * v + (1.0 - h.b2) * g * g;
    double den = sqrt(v1) / sqrt((double)h.bc2) + h.eps, upd = (double)h.lr / h.bc1 * m1 / den, decay = 1.0 - (double)h.lr * h.wd;
    *mo = m1, *vo = v1, *po = p * decay - upd;
    e32[0] = 4 * U32 * (fabs(h.b1 * m) + fabs((1.0 - h.b1) * g));
    e32[1] = 5 * U32 * (fabs(h.b2 * v) + fabs((1.0 - h.b2) * g * g));
    e32[2] = U32 * (3 * fabs(p * decay) + 12 * fabs(upd)) + fabs(upd) * (e32[0] / fmax(fabs(m1), 1e-300) + e32[1] / fmax(v1, 1e-300));
}
static const adam_hp HP = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 1.0f - 0.9f * 0.9f * 0.9f, 1.0f - 0.95f * 0.95f * 0.95f};
static void test_adamw(size_t n, bool random) {
    std::vector<float> p0 = rnd<float>(n, -1, 1), g = rnd<float>(n, -2, 2), m0 = rnd<float>(n, -0.1, 0.1), v0 = rnd<float>(n, 0, 0.01);
    v0[0] = 0, m0[0] = 0, g[0] = 0; // 0 / (0 + eps)
    checker ck("adamw", "adamw<fp32> n=%zu", n);
    std::vector<float> p, m, v;
    in_orders(ck, random, [&] {
        p = p0, m = m0, v = v0;
        ck.rc(mgt_cuda_adamw(p.data(), g.data(), m.data(), v.data(), n, HP.lr, HP.b1, HP.b2, HP.eps, HP.wd, HP.gs, HP.bc1, HP.bc2, nullptr));
        return std::vector<blob>{bytes(p), bytes(m), bytes(v)};
    });
    for (size_t i = 0; i < n; i++) {
        double po, mo, vo, e[3];
        adam_ref(HP, p0[i], g[i], m0[i], v0[i], &po, &mo, &vo, e);
        ck.near("m", i, m[i], mo, e[0] + prec<float>::tiny);
        ck.near("v", i, v[i], vo, e[1] + prec<float>::tiny);
        ck.near("param", i, p[i], po, e[2] + prec<float>::tiny);
    }
}
template <class T> static void test_adamw_master(size_t n, bool random) {
    /* the gradient is fp32 whatever T (mgt.h's main_grad); T is the type of param_copy only */
    std::vector<float> w0 = rnd<float>(n, -1, 1), m0 = rnd<float>(n, -0.1, 0.1), v0 = rnd<float>(n, 0, 0.01), g = rnd<float>(n, -2, 2);
    checker ck("adamw", "adamw_master<%s> n=%zu", prec<T>::name, n);
    std::vector<float> w, m, v;
    std::vector<T> pc;
    in_orders(ck, random, [&] {
        w = w0, m = m0, v = v0;
        pc = filled<T>(n, 7.0f);
        ck.rc(mgt_cuda_adamw_master<T>(pc.data(), w.data(), g.data(), m.data(), v.data(), n, HP.lr, HP.b1, HP.b2, HP.eps, HP.wd, HP.gs, HP.bc1,
                                       HP.bc2, nullptr));
        return std::vector<blob>{bytes(w), bytes(m), bytes(v), bytes(pc)};
    });
    for (size_t i = 0; i < n; i++) {
        double po, mo, vo, e[3];
        adam_ref(HP, w0[i], g[i], m0[i], v0[i], &po, &mo, &vo, e);
        ck.near("m", i, m[i], mo, e[0] + prec<float>::tiny);
        ck.near("v", i, v[i], vo, e[1] + prec<float>::tiny);
        ck.near("master", i, w[i], po, e[2] + prec<float>::tiny);
        ck.near("param_copy = round(master)", i, dv(pc[i]), dv(T(w[i])), 0.0); // the kernel's own master, rounded: exact
    }
}

/* the multi-tensor AdamW: tensors of several sizes (empty, below a packet, aligned and one element off),
   each with its own weight decay, in one launch, against the one-tensor launchers byte for byte (the
   same arithmetic per element; those are held to the reference above) */
template <class T> static void test_adamw_many(bool random) {
    const size_t sizes[] = {0, 3, 1000, 777, 64, 4097};
    const int count = (int)(sizeof sizes / sizeof sizes[0]);
    checker ck("adamw", "adamw_many<%s> %d tensors", prec<T>::name, count);
    std::vector<std::vector<float>> w0, g, m0, v0, w, m, v;
    std::vector<std::vector<T>> pc;
    for (int k = 0; k < count; k++) {
        size_t n = sizes[k] + 1; // one element more: tensor 3 starts one element in
        w0.push_back(rnd<float>(n, -1, 1)), g.push_back(rnd<float>(n, -2, 2)), m0.push_back(rnd<float>(n, -0.1, 0.1)), v0.push_back(rnd<float>(n, 0, 0.01));
    }
    auto off = [](int k) { return k == 3 ? 1 : 0; };
    in_orders(ck, random, [&] {
        w = w0, m = m0, v = v0, pc.assign(count, filled<T>(4098, 7.0f));
        mgt_adamw_tensor t[8];
        for (int k = 0; k < count; k++)
            t[k] = {w[k].data() + off(k), std::is_same<T, float>::value && k == 1 ? nullptr : (void *)(pc[k].data() + off(k)), g[k].data() + off(k),
                    m[k].data() + off(k), v[k].data() + off(k), sizes[k], k % 2 ? HP.wd : 0.0f};
        ck.rc(mgt_cuda_adamw_many<T>(t, count, HP.lr, HP.b1, HP.b2, HP.eps, HP.gs, HP.bc1, HP.bc2, nullptr));
        std::vector<blob> out;
        for (int k = 0; k < count; k++) out.push_back(bytes(w[k])), out.push_back(bytes(m[k])), out.push_back(bytes(v[k])), out.push_back(bytes(pc[k]));
        return out;
    });
    for (int k = 0; k < count; k++) {
        std::vector<float> w1 = w0[k], m1 = m0[k], v1 = v0[k];
        std::vector<T> pc1 = filled<T>(4098, 7.0f);
        bool no_copy = std::is_same<T, float>::value && k == 1;
        if (no_copy)
            ck.rc(mgt_cuda_adamw(w1.data() + off(k), g[k].data() + off(k), m1.data() + off(k), v1.data() + off(k), sizes[k], HP.lr, HP.b1, HP.b2, HP.eps,
                                 k % 2 ? HP.wd : 0.0f, HP.gs, HP.bc1, HP.bc2, nullptr));
        else
            ck.rc(mgt_cuda_adamw_master<T>(pc1.data() + off(k), w1.data() + off(k), g[k].data() + off(k), m1.data() + off(k), v1.data() + off(k), sizes[k],
                                           HP.lr, HP.b1, HP.b2, HP.eps, k % 2 ? HP.wd : 0.0f, HP.gs, HP.bc1, HP.bc2, nullptr));
        ck.f->values++;
        if (bytes(w1) != bytes(w[k]) || bytes(m1) != bytes(m[k]) || bytes(v1) != bytes(v[k]) || bytes(pc1) != bytes(pc[k]))
            FAIL("%s: tensor %d (n %zu) differs from its one-tensor launch", ck.what, k, sizes[k]);
    }
}

/* ==== casts: against a rounding written here in double arithmetic =============================================== */
/* round to nearest even into a binary format with p significand bits and exponents emin..emax */
static double round_to(double a, int p, int emin, int emax) {
    if (isnan(a) || isinf(a) || a == 0) return a;
    double x = fabs(a);
    int e;
    frexp(x, &e);
    e -= 1; // x in [2^e, 2^(e+1))
    if (e < emin) e = emin; // subnormal: the quantum stops shrinking
    double q = ldexp(1.0, e - p + 1), r = x / q, k = floor(r), frac = r - k;
    if (frac > 0.5 || (frac == 0.5 && fmod(k, 2.0) == 1.0)) k += 1;
    double y = k * q;
    if (y >= ldexp(1.0, emax + 1)) y = INFINITY;
    return a < 0 ? -y : y;
}
/* the value of 16 bits: sign, exponent with bias, mantissa of mbits */
static double decode16(unsigned bits, int ebits, int mbits) {
    int bias = (1 << (ebits - 1)) - 1, e = (int)(bits >> mbits) & ((1 << ebits) - 1);
    double m = bits & ((1u << mbits) - 1), s = bits >> 15 ? -1.0 : 1.0;
    if (e == (1 << ebits) - 1) return m ? NAN : s * INFINITY;
    if (e == 0) return s * ldexp(m, 1 - bias - mbits);
    return s * ldexp(1.0 + ldexp(m, -mbits), e - bias);
}
static unsigned bits_of(__nv_bfloat16 h) { return __bfloat16_as_ushort(h); }
static unsigned bits_of(__half h) { return __half_as_ushort(h); }
template <class H> static void test_cast(size_t n, bool random) {
    const bool bf = sizeof(H) == 2 && std::is_same<H, __nv_bfloat16>::value;
    const int p = bf ? 8 : 11, emin = bf ? -126 : -14, emax = bf ? 127 : 15, ebits = bf ? 8 : 5, mbits = bf ? 7 : 10;
    std::vector<float> src(n);
    for (size_t i = 0; i < n; i++) { // every binade the format has and some it does not, both signs
        double mant = 1 + urand(), sgn = urand() < 0.5 ? -1 : 1;
        int e = bf ? irand(260) - 130 : irand(50) - 27;
        src[i] = (float)(sgn * ldexp(mant, e));
    }
    /* the edges: ties (to even, both directions), overflow, the largest finite, subnormals, zeros, inf, nan */
    const float edges[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65504.0f, 65519.0f, 65520.0f,
                           -65520.0f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-26f, 3.3895314e38f, 3.4028235e38f, 0x1p-133f, 0x1p-134f,
                           0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0] && i < n; i++) src[i] = edges[i];
    {
        checker ck("cast", "cast<%s <- fp32> n=%zu", prec<H>::name, n);
        std::vector<H> dst;
        in_orders(ck, random, [&] {
            dst = filled<H>(n, 7.0f);
            ck.rc(mgt_cuda_cast<H, float>(dst.data(), src.data(), n, nullptr));
            return std::vector<blob>{bytes(dst)};
        });
        for (size_t i = 0; i < n; i++)
            ck.near("dst", i, decode16(bits_of(dst[i]), ebits, mbits), round_to(src[i], p, emin, emax), 0.0);
    }
    {
        checker ck("cast", "cast<fp32 <- %s> n=%zu", prec<H>::name, n);
        std::vector<H> h(n);
        for (size_t i = 0; i < n; i++) h[i] = H(src[i]);
        std::vector<float> dst;
        in_orders(ck, random, [&] {
            dst.assign(n, 7.0f);
            ck.rc(mgt_cuda_cast<float, H>(dst.data(), h.data(), n, nullptr));
            return std::vector<blob>{bytes(dst)};
        });
        for (size_t i = 0; i < n; i++) ck.near("dst", i, dst[i], decode16(bits_of(h[i]), ebits, mbits), 0.0); // exact
    }
    if (bf) { // fp32 -> fp32: a copy, bit for bit (subnormals, signed zeros, inf and nan included)
        checker ck("cast", "cast<fp32 <- fp32> n=%zu", n);
        std::vector<float> dst;
        in_orders(ck, random, [&] {
            dst.assign(n, 7.0f);
            ck.rc(mgt_cuda_cast<float, float>(dst.data(), src.data(), n, nullptr));
            return std::vector<blob>{bytes(dst)};
        });
        if (memcmp(dst.data(), src.data(), n * sizeof(float))) FAIL("%s: not a bitwise copy", ck.what);
        for (size_t i = 0; i < n; i++) ck.near("dst", i, dst[i], src[i], 0.0);
    }
}

/* ==== sum of squares and scale ==================================================================================== */
template <class T> static void test_norm(size_t n, bool random) {
    std::vector<T> x = rnd<T>(n, -2, 2);
    {
        checker ck("norm", "sum_squares<%s> n=%zu", prec<T>::name, n);
        std::vector<double> out, scratch;
        size_t sbytes = mgt_cuda_sum_squares_scratch(n);
        in_orders(ck, random, [&] {
            out.assign(1, 7.0);
            scratch.assign(sbytes / sizeof(double), NAN);
            ck.rc(mgt_cuda_sum_squares<T>(out.data(), n ? scratch.data() : nullptr, x.data(), n, nullptr));
            return std::vector<blob>{bytes(out)};
        });
        long double s = 0;
        for (size_t i = 0; i < n; i++) s += (long double)dv(x[i]) * dv(x[i]);
        /* squares of fp32 values are exact in fp64; each thread adds n / 65536 / 256 chunks' worth
           sequentially (at most 256 terms each), then two 8-level trees and the chunk loop: relative
           (256 + 16 + chunks) 2^-53 */
        size_t chunks = (n + MGT_SS_BLOCK - 1) / MGT_SS_BLOCK;
        ck.near("sum", 0, out[0], (double)s, (272 + chunks) * 0x1p-53 * (double)s);
    }
    if (n >= 3) { // inf and nan reach the result (the fp16 loss scaler's overflow check)
        for (int k = 0; k < 2; k++) {
            checker ck("norm", "sum_squares<%s> n=%zu with %s", prec<T>::name, n, k ? "nan" : "inf");
            std::vector<T> y = x;
            y[n / 2] = T(k ? NAN : -INFINITY);
            std::vector<double> out(1), scratch(mgt_cuda_sum_squares_scratch(n) / sizeof(double));
            ck.rc(mgt_cuda_sum_squares<T>(out.data(), scratch.data(), y.data(), n, nullptr));
            ck.near("sum", 0, out[0], k ? NAN : INFINITY, 0.0);
        }
    }
    {
        checker ck("norm", "scale<%s> n=%zu", prec<T>::name, n);
        std::vector<T> y;
        const float f = 0.37f;
        in_orders(ck, random, [&] {
            y = x;
            ck.rc(mgt_cuda_scale<T>(y.data(), f, n, nullptr));
            return std::vector<blob>{bytes(y)};
        });
        for (size_t i = 0; i < n; i++) { // one fp32 product
            double want = dv(x[i]) * (double)f;
            ck.near("x", i, dv(y[i]), want, bnd<T>(want, U32 * fabs(want)));
        }
    }
}

/* ==== 16-byte packets against the element loop ===================================================================
   The elementwise launchers take 16-byte packets when every pointer is aligned and the element loop
   otherwise (a shard at any offset): the per-element arithmetic is the same, so the same values one
   element off alignment must give the same bytes */
template <class T> static void test_packed_vs_elements(size_t n) {
    checker ck("packets", "aligned vs one element off<%s> n=%zu", prec<T>::name, n);
    std::vector<T> x = rnd<T>(n + 1, -3, 3), y = rnd<T>(n + 1, -1, 1), b = rnd<T>(n + 1, -1, 1);
    std::vector<float> w = rnd<float>(n + 1, -1, 1), g = rnd<float>(n + 1, -1, 1), m = rnd<float>(n + 1, -0.1, 0.1), v = rnd<float>(n + 1, 0, 0.01);
    /* run(off) applies every launcher to the arrays starting `off` elements in and returns their bytes */
    auto run = [&](int off) {
        std::vector<T> o = filled<T>(n + 1, 7.0f), d = y, sx = x, c = filled<T>(n + 1, 7.0f), r = y;
        std::vector<float> wm = w, mm = m, vm = v, f = filled<float>(n + 1, 7.0f);
        ck.rc(mgt_cuda_gelu_forward<T>(o.data() + off, x.data() + off, n, nullptr));
        ck.rc(mgt_cuda_gelu_backward<T>(d.data() + off, x.data() + off, d.data() + off, n, nullptr));
        ck.rc(mgt_cuda_add_inplace<T>(r.data() + off, b.data() + off, n, nullptr));
        ck.rc(mgt_cuda_scale<T>(sx.data() + off, 0.37f, n, nullptr));
        ck.rc(mgt_cuda_cast<float, T>(f.data() + off, x.data() + off, n, nullptr));
        ck.rc(mgt_cuda_adamw_master<T>(c.data() + off, wm.data() + off, g.data() + off, mm.data() + off, vm.data() + off, n, HP.lr, HP.b1, HP.b2,
                                       HP.eps, HP.wd, HP.gs, HP.bc1, HP.bc2, nullptr));
        std::vector<blob> out;
        auto tail = [&](const auto &a) { // the n elements the call wrote, as bytes
            typedef typename std::decay<decltype(a)>::type V;
            return bytes(V(a.begin() + off, a.begin() + off + (long)n));
        };
        out.push_back(tail(o)), out.push_back(tail(d)), out.push_back(tail(r)), out.push_back(tail(sx)), out.push_back(tail(f));
        out.push_back(tail(c)), out.push_back(tail(wm)), out.push_back(tail(mm)), out.push_back(tail(vm));
        return out;
    };
    /* the inputs at offset 1 must be the inputs at offset 0: shift every array by one element */
    auto shift = [](auto &a) { a.insert(a.begin(), a.back()), a.pop_back(); };
    std::vector<blob> at0 = run(0);
    shift(x), shift(y), shift(b), shift(w), shift(g), shift(m), shift(v);
    std::vector<blob> at1 = run(1);
    static const char *names[] = {"gelu_forward", "gelu_backward", "add_inplace", "scale", "cast", "adamw_master param_copy", "master", "m", "v"};
    for (size_t o = 0; o < at0.size(); o++) {
        ck.f->values++;
        if (at0[o] != at1[o]) FAIL("%s: %s differs between the packets (aligned) and the element loop (one element off)", ck.what, names[o]);
    }
}

/* ==== launcher preconditions ====================================================================================== */
static void expect_invalid(const char *call, int code, const char *file, const char *cond) {
    checker ck("preconditions", "%s", call);
    ck.f->values++;
    const mgt_kernel_error &e = mgt_kernel_last_error();
    if (code != MGT_KERNEL_INVALID || e.code != MGT_KERNEL_INVALID || !strstr(e.file, file) || !strstr(e.what, cond))
        FAIL("%s: returned %d, last error %d at %s:%d \"%s\"; expected MGT_KERNEL_INVALID from %s naming \"%s\"", call, code, e.code, e.file,
             e.line, e.what, file, cond);
}
static void test_preconditions(void) {
    float a[64] = {0}, b[64] = {0}, c[64] = {0}, d[64] = {0}, mean[4] = {0}, rstd[4] = {0};
    int tok[4] = {0, 0, 0, 0};
    unsigned ticket = 0;
    double loss[4];
    __nv_bfloat16 h[64];
    expect_invalid("layernorm_forward N = 0", mgt_cuda_layernorm_forward<float>(a, mean, rstd, b, c, d, 0, 16, nullptr), "layernorm.cu", "N > 0");
    expect_invalid("layernorm_forward out = inp", mgt_cuda_layernorm_forward<float>(a, mean, rstd, a, c, d, 4, 16, nullptr), "layernorm.cu",
                   "out != inp");
    expect_invalid("layernorm_backward dinp = dout",
                   mgt_cuda_layernorm_backward<float>(a, b, c, d, &ticket, a, d, d, mean, rstd, 4, 16, nullptr), "layernorm.cu", "dinp != dout");
    expect_invalid("layernorm_backward null scratch",
                   mgt_cuda_layernorm_backward<float>(a, b, c, nullptr, &ticket, d, d, d, mean, rstd, 4, 16, nullptr), "layernorm.cu", "scratch");
    expect_invalid("layernorm_backward null ticket",
                   mgt_cuda_layernorm_backward<float>(a, b, c, d, nullptr, d, d, d, mean, rstd, 4, 16, nullptr), "layernorm.cu", "ticket");
    expect_invalid("residual_layernorm_forward out = res",
                   mgt_cuda_residual_layernorm_forward<float>(a, a, mean, rstd, b, c, d, d, 4, 16, nullptr), "layernorm.cu", "out != res");
    expect_invalid("rmsnorm_forward out = inp", mgt_cuda_rmsnorm_forward<float>(a, rstd, a, c, 1e-5f, 4, 16, nullptr), "rmsnorm.cu", "out != inp");
    expect_invalid("rmsnorm_backward dinp = dout", mgt_cuda_rmsnorm_backward<float>(a, b, c, a, d, d, rstd, 4, 16, nullptr), "rmsnorm.cu",
                   "dinp != dout");
    expect_invalid("rope_forward odd head size", mgt_cuda_rope_forward<float>(a, 1, 4, 2, 1, 7, 10000.0f, 0, nullptr), "rope.cu", "hs % 2 == 0");
    expect_invalid("swiglu_backward dinp = inp", mgt_cuda_swiglu_backward<float>(a, a, b, 4, 8, nullptr), "swiglu.cu", "dinp != inp");
    expect_invalid("encoder_forward out = wte", mgt_cuda_encoder_forward<float>(a, tok, a, 0, 4, b, 1, 4, 16, nullptr), "encoder.cu", "out != wte");
    expect_invalid("encoder_forward null tokens", mgt_cuda_encoder_forward<float>(a, nullptr, b, 0, 4, c, 1, 4, 16, nullptr), "encoder.cu", "tokens");
    expect_invalid("encoder_backward vocab_start < 0", mgt_cuda_encoder_backward<float>(a, b, d, c, tok, -1, 4, 1, 4, 16, nullptr), "encoder.cu",
                   "vocab_start >= 0");
    expect_invalid("attention_forward T = 0", mgt_cuda_attention_forward<float>(a, b, a, 2, 0, 1, 1, 8, nullptr), "attention.cu", "T > 0");
    expect_invalid("attention_forward hs = 129", mgt_cuda_attention_forward<float>(a, b, a + 1, 1, 4, 1, 1, 129, nullptr), "attention.cu",
                   "hs <= MGT_ATTN_MAX_HS");
    expect_invalid("attention_forward NKV not dividing NH", mgt_cuda_attention_forward<float>(a, b, a + 1, 1, 4, 3, 2, 8, nullptr), "attention.cu",
                   "NH % NKV == 0");
    expect_invalid("attention_backward dqkv = qkv", mgt_cuda_attention_backward<float>(a, b, a + 1, a, a + 2, b, 1, 8, 1, 1, 8, nullptr), "attention.cu",
                   "(const void *)dqkv != (const void *)qkv");
    expect_invalid("gelu_forward null inp", mgt_cuda_gelu_forward<float>(a, nullptr, 8, nullptr), "gelu.cu", "inp");
    expect_invalid("bias_residual out = bias", mgt_cuda_bias_residual<float>(a, b, a, 2, 8, nullptr), "residual.cu", "out != bias");
    expect_invalid("bias_backward C = 0", mgt_cuda_bias_backward<float>(a, b, c, 4, 0, nullptr), "residual.cu", "C > 0");
    expect_invalid("xent_finish vocab_start not a slice", mgt_cuda_xent_finish<float>(loss, a, b, 2, tok, 2, 5, 8, 16, 1.0f, nullptr),
                   "crossentropy.cu", "vocab_start % Vl == 0");
    expect_invalid("xent_finish rank beyond tp", mgt_cuda_xent_finish<float>(loss, a, b, 2, tok, 2, 16, 8, 24, 1.0f, nullptr), "crossentropy.cu",
                   "vocab_start / Vl < tp");
    expect_invalid("xent_partial null targets", mgt_cuda_xent_partial<float>(b, a, nullptr, 2, 0, 8, 8, nullptr), "crossentropy.cu", "targets");
    expect_invalid("adamw param = m",
                   mgt_cuda_adamw(a, b, a, c, 8, HP.lr, HP.b1, HP.b2, HP.eps, HP.wd, 1.0f, HP.bc1, HP.bc2, nullptr), "adamw.cu", "param != m");
    expect_invalid("adamw bias_correction1 = 0", mgt_cuda_adamw(a, b, c, d, 8, HP.lr, HP.b1, HP.b2, HP.eps, HP.wd, 1.0f, 0.0f, HP.bc2, nullptr),
                   "adamw.cu", "bias_correction1 > 0");
    expect_invalid("adamw_master param_copy = master",
                   mgt_cuda_adamw_master<float>(a, a, b, c, d, 8, HP.lr, HP.b1, HP.b2, HP.eps, HP.wd, 1.0f, HP.bc1, HP.bc2, nullptr), "adamw.cu",
                   "param_copy");
    /* the 16-bit instantiations take fp32 parameter gradients (h: bf16 activations) */
    expect_invalid("encoder_backward<bf16> dwte = dwpe", mgt_cuda_encoder_backward<__nv_bfloat16>(a, a, d, h, tok, 0, 4, 1, 4, 16, nullptr),
                   "encoder.cu", "dwte != dwpe");
    expect_invalid("encoder_backward<fp32> dwpe = dout", mgt_cuda_encoder_backward<float>(a, b, d, b, tok, 0, 4, 1, 4, 16, nullptr), "encoder.cu",
                   "dwpe != (const void *)dout");
    expect_invalid("encoder_backward null scratch", mgt_cuda_encoder_backward<float>(a, b, nullptr, c, tok, 0, 4, 1, 4, 16, nullptr), "encoder.cu",
                   "scratch");
    expect_invalid("layernorm_backward<bf16> scratch = dbias",
                   mgt_cuda_layernorm_backward<__nv_bfloat16>(h, a, b, b, &ticket, h + 16, h + 32, h + 48, mean, rstd, 1, 16, nullptr), "layernorm.cu",
                   "scratch != dbias");
    expect_invalid("bias_backward<bf16> dbias = scratch", mgt_cuda_bias_backward<__nv_bfloat16>(a, a, h, 4, 8, nullptr), "residual.cu",
                   "dbias != scratch");
    {
        mgt_adamw_tensor t[1] = {{a, nullptr, b, a, c, 8, 0.0f}};
        expect_invalid("adamw_many master = m", mgt_cuda_adamw_many<float>(t, 1, HP.lr, HP.b1, HP.b2, HP.eps, 1.0f, HP.bc1, HP.bc2, nullptr), "adamw.cu",
                       "t.master != t.m");
        expect_invalid("adamw_many too many", mgt_cuda_adamw_many<float>(t, MGT_ADAMW_MANY + 1, HP.lr, HP.b1, HP.b2, HP.eps, 1.0f, HP.bc1, HP.bc2, nullptr),
                       "adamw.cu", "count <= MGT_ADAMW_MANY");
    }
    expect_invalid("adamw_master<bf16> null grad",
                   mgt_cuda_adamw_master<__nv_bfloat16>(h, a, nullptr, c, d, 8, HP.lr, HP.b1, HP.b2, HP.eps, HP.wd, 1.0f, HP.bc1, HP.bc2, nullptr),
                   "adamw.cu", "grad");
    expect_invalid("cast null src", mgt_cuda_cast<__nv_bfloat16, float>(h, nullptr, 8, nullptr), "cast.cu", "src");
    expect_invalid("cast in place", mgt_cuda_cast<__nv_bfloat16, float>(h, (const float *)(const void *)h, 8, nullptr), "cast.cu", "dst");
    expect_invalid("sum_squares null out", mgt_cuda_sum_squares<float>(nullptr, (double *)(void *)a, b, 8, nullptr), "norm.cu", "out");
    expect_invalid("scale null x", mgt_cuda_scale<float>(nullptr, 2.0f, 8, nullptr), "norm.cu", "x");
    /* empty launches succeed without touching memory */
    checker ck("preconditions", "n = 0 launches");
    ck.rc(mgt_cuda_gelu_forward<float>(nullptr, nullptr, 0, nullptr));
    ck.rc(mgt_cuda_add_inplace<float>(nullptr, nullptr, 0, nullptr));
    ck.rc(mgt_cuda_cast<float, __half>(nullptr, nullptr, 0, nullptr));
    ck.rc(mgt_cuda_adamw(nullptr, nullptr, nullptr, nullptr, 0, HP.lr, HP.b1, HP.b2, HP.eps, HP.wd, 1.0f, HP.bc1, HP.bc2, nullptr));
}

/* ==== RMSNorm (Llama) ======================================================================================== */
template <class T> static void test_rmsnorm(int N, int C, bool random) {
    const float eps = 1e-5f;
    std::vector<T> inp = rnd<T>((size_t)N * C, -1, 1.5), w = rnd<T>(C, 0.5, 1.5);
    for (int c = 0; c < C; c += 5) inp[c] = T(3.0f); // a few outliers in row 0
    std::vector<double> rs(N);
    for (int r = 0; r < N; r++) {
        double ss = 0;
        for (int c = 0; c < C; c++) ss += dv(inp[(size_t)r * C + c]) * dv(inp[(size_t)r * C + c]);
        rs[r] = 1.0 / sqrt(ss / C + (double)eps);
    }
    {
        checker ck("rmsnorm", "rmsnorm_forward<%s> N=%d C=%d", prec<T>::name, N, C);
        std::vector<T> out;
        std::vector<float> rstd;
        in_orders(ck, random, [&] {
            out = filled<T>((size_t)N * C, 7.0f);
            rstd.assign(N, 7.0f);
            ck.rc(mgt_cuda_rmsnorm_forward<T>(out.data(), rstd.data(), inp.data(), w.data(), eps, N, C, nullptr));
            return std::vector<blob>{bytes(out), bytes(rstd)};
        });
        /* the sum of squares is a C-term fp32 sum of positive terms (strided per lane, then a 5-level
           tree): (C + 5) 2^-24 relative, halved by the square root, plus a few roundings: (C + 8) 2^-24;
           out = x rs w inherits it and two roundings */
        for (int r = 0; r < N; r++) {
            double erel = (C + 8) * U32;
            ck.near("rstd", r, rstd[r], rs[r], erel * rs[r]);
            for (int c = 0; c < C; c++) {
                double want = dv(inp[(size_t)r * C + c]) * rs[r] * dv(w[c]);
                ck.near("out", (size_t)r * C + c, dv(out[(size_t)r * C + c]), want, bnd<T>(want, (erel + 3 * U32) * fabs(want)));
            }
        }
    }
    {
        checker ck("rmsnorm", "rmsnorm_backward<%s> N=%d C=%d", prec<T>::name, N, C);
        std::vector<T> dout = rnd<T>((size_t)N * C, -1, 1), dinp0 = rnd<T>((size_t)N * C, -1, 1), dinp;
        std::vector<float> dw0 = rnd<float>(C, -1, 1), dw, rstd(N), scratch;
        for (int r = 0; r < N; r++) rstd[r] = (float)rs[r];
        size_t sbytes = mgt_cuda_rmsnorm_backward_scratch(N, C);
        in_orders(ck, random, [&] {
            dinp = dinp0, dw = dw0;
            scratch.assign(sbytes / sizeof(float), NAN); // the kernels must write before they read
            ck.rc(mgt_cuda_rmsnorm_backward<T>(dinp.data(), dw.data(), scratch.data(), dout.data(), inp.data(), w.data(), rstd.data(), N, C, nullptr));
            return std::vector<blob>{bytes(dinp), bytes(dw)};
        });
        std::vector<double> sw(C), mw(C);
        for (int c = 0; c < C; c++) sw[c] = dw0[c], mw[c] = fabs(sw[c]);
        for (int r = 0; r < N; r++) {
            double rr = rstd[r], sgx = 0, agx = 0;
            for (int c = 0; c < C; c++) {
                double g = dv(w[c]) * dv(dout[(size_t)r * C + c]), xh = dv(inp[(size_t)r * C + c]) * rr;
                sgx += g * xh, agx += fabs(g * xh);
            }
            double mgx = sgx / C;
            for (int c = 0; c < C; c++) {
                size_t i = (size_t)r * C + c;
                double d = dv(dout[i]), g = dv(w[c]) * d, xh = dv(inp[i]) * rr, want = dv(dinp0[i]) + rr * (g - xh * mgx);
                /* the row mean is a C-term fp32 sum: (C + 5) 2^-24 of its |terms|; six roundings on the rest */
                double e32 = (C + 5) * U32 * rr * fabs(xh) * agx / C + 6 * U32 * (fabs(dv(dinp0[i])) + rr * (fabs(g) + fabs(xh * mgx)));
                ck.near("dinp", i, dv(dinp[i]), want, bnd<T>(want, e32));
                sw[c] += d * xh, mw[c] += fabs(d * xh);
            }
        }
        for (int c = 0; c < C; c++) ck.near("dweight", c, dw[c], sw[c], bnd<float>(sw[c], (N + 8) * U32 * mw[c]));
    }
}

/* ==== RoPE (Llama): q and k heads turned in place, v heads left alone ======================================== */
template <class T> static void test_rope(int B, int Tn, int NH, int NKV, int hs, float theta, bool random) {
    int W = (NH + 2 * NKV) * hs, half = hs / 2;
    size_t n = (size_t)B * Tn * W;
    std::vector<T> x0 = rnd<T>(n, -2, 2);
    for (int dir = 0; dir < 2; dir++) {
        checker ck("rope", "rope_%s<%s> B=%d T=%d NH=%d NKV=%d hs=%d theta=%g", dir ? "backward" : "forward", prec<T>::name, B, Tn, NH, NKV, hs, theta);
        std::vector<T> x;
        in_orders(ck, random, [&] {
            x = x0;
            ck.rc(dir ? mgt_cuda_rope_backward<T>(x.data(), B, Tn, NH, NKV, hs, theta, 0, nullptr) : mgt_cuda_rope_forward<T>(x.data(), B, Tn, NH, NKV, hs, theta, 0, nullptr));
            return std::vector<blob>{bytes(x)};
        });
        /* the angle t / theta^(2i/hs) in fp32: powf, the exponent's rounding (ln theta 2^-24 relative)
           and the product make it off by about 16 2^-24 of itself, which cos and sin turn into an
           absolute error; a few more roundings in the rotation */
        for (size_t row = 0; row < (size_t)B * Tn; row++)
            for (int h = 0; h < NH + 2 * NKV; h++)
                for (int i = 0; i < half; i++) {
                    size_t a = row * W + (size_t)h * hs + i, b = a + half;
                    double u = dv(x0[a]), v = dv(x0[b]), angle = (double)(row % Tn) * pow((double)theta, -2.0 * i / hs) * (dir ? -1 : 1);
                    if (h >= NH + NKV) { // a value head
                        ck.near("v (untouched)", a, dv(x[a]), u, 0.0);
                        ck.near("v (untouched)", b, dv(x[b]), v, 0.0);
                        continue;
                    }
                    double wa = u * cos(angle) - v * sin(angle), wb = v * cos(angle) + u * sin(angle);
                    double e32 = (fabs(u) + fabs(v)) * (16 * U32 * fabs(angle) + 6 * U32);
                    ck.near("qk", a, dv(x[a]), wa, bnd<T>(wa, e32));
                    ck.near("qk", b, dv(x[b]), wb, bnd<T>(wb, e32));
                }
    }
}

/* ==== SwiGLU (Llama): out = silu(gate) up ===================================================================== */
template <class T> static void test_swiglu(int N, int H, bool random) {
    size_t n = (size_t)N * H;
    std::vector<T> inp = rnd<T>(2 * n, -6, 6), dout = rnd<T>(n, -1, 1);
    inp[0] = T(0.0f);
    {
        checker ck("swiglu", "swiglu_forward<%s> N=%d H=%d", prec<T>::name, N, H);
        std::vector<T> out;
        in_orders(ck, random, [&] {
            out = filled<T>(n, 7.0f);
            ck.rc(mgt_cuda_swiglu_forward<T>(out.data(), inp.data(), N, H, nullptr));
            return std::vector<blob>{bytes(out)};
        });
        for (int r = 0; r < N; r++)
            for (int c = 0; c < H; c++) {
                double g = dv(inp[(size_t)r * 2 * H + c]), u = dv(inp[(size_t)r * 2 * H + H + c]), want = g / (1 + exp(-g)) * u;
                ck.near("out", (size_t)r * H + c, dv(out[(size_t)r * H + c]), want, bnd<T>(want, 8 * U32 * fabs(want)));
            }
    }
    {
        checker ck("swiglu", "swiglu_backward<%s> N=%d H=%d", prec<T>::name, N, H);
        std::vector<T> dinp;
        in_orders(ck, random, [&] {
            dinp = filled<T>(2 * n, 7.0f); // every element must be written
            ck.rc(mgt_cuda_swiglu_backward<T>(dinp.data(), inp.data(), dout.data(), N, H, nullptr));
            return std::vector<blob>{bytes(dinp)};
        });
        /* dg = d u sig (1 + g (1 - sig)) cancels near g = -1.28: its error is relative to d u sig (1 + |g| (1 - sig)) */
        for (int r = 0; r < N; r++)
            for (int c = 0; c < H; c++) {
                size_t gi = (size_t)r * 2 * H + c, ui = gi + H;
                double g = dv(inp[gi]), u = dv(inp[ui]), d = dv(dout[(size_t)r * H + c]), sig = 1 / (1 + exp(-g));
                double dg = d * u * sig * (1 + g * (1 - sig)), du = d * g * sig;
                ck.near("dgate", gi, dv(dinp[gi]), dg, bnd<T>(dg, 10 * U32 * fabs(d * u) * sig * (1 + fabs(g) * (1 - sig))));
                ck.near("dup", ui, dv(dinp[ui]), du, bnd<T>(du, 8 * U32 * fabs(du)));
            }
    }
}

/* ==== the cases ======================================================================================================= */
template <class T> static void all_ops(void) {
    /* grid-stride shapes (n > 2048 x 256): every type in the plain build, fp32 under ASan (the
       indexing does not depend on the type), none under TSan */
    const bool big = SIZE >= 2 || (SIZE == 1 && sizeof(T) == 4);
    const bool r = SIZE > 0; // random orders for the smaller cases (TSan: forward and reverse only)
    /* encoder: C of 37 (not a multiple of 4/8/32), 300 (two blocks of the per-channel kernel);
       slices with tokens outside them; a rank without rows; grid-stride shapes */
    test_encoder<T>(2, 5, 37, 0, 40, 40, true, r);
    test_encoder<T>(3, 7, 45, 10, 20, 40, true, r);
    test_encoder<T>(2, 9, 300, 20, 20, 40, false, r);
    test_encoder<T>(1, 3, 8, 40, 0, 40, false, r); // all tokens outside an empty slice
    if (SIZE >= 1) test_encoder<T>(4, 64, 96, 100, 100, 200, true, false);
    if (big) test_encoder<T>(2, 131, 4003, 0, 50, 50, true, false); // T C > 2048 x 256: grid-stride
    if (SIZE >= 1) test_encoder<T>(3, 400, 40, 0, 50, 50, false, false); // 1200 positions: long accumulations into 50 rows
    test_encoder<T>(2, 6, 64, 0, 30, 30, true, r); // C a multiple of every packet: the packed kernels
    if (SIZE >= 1) test_encoder<T>(3, 50, 264, 5, 40, 60, true, false); // lanes loop past 32 packets
    if (SIZE >= 1) test_encoder<T>(3, 3001, 8, 0, 60, 60, false, false); // 9003 positions: the sort's stages beyond its 4096-key chunks
    test_encoder_frequent_token<T>();
    /* layernorm: rows not a multiple of the 8 rows per block, C = 1, 3, 5, 37, 45, 67, 131; part splits of N */
    test_layernorm<T>(1, 1, r);
    test_layernorm<T>(19, 37, r);
    test_layernorm<T>(5, 3, r, false);
    if (SIZE >= 1) test_layernorm<T>(70, 131, r);
    if (SIZE >= 1) test_layernorm<T>(200, 45, false);
    test_layernorm<T>(13, 64, r); // packets of every type
    test_residual_layernorm<T>(9, 37, false, r);
    test_residual_layernorm<T>(13, 64, false, r);
    test_residual_layernorm<T>(13, 64, true, r);
    if (SIZE >= 1) test_residual_layernorm<T>(70, 264, false, false);
    if (SIZE >= 1) test_layernorm<T>(70, 264, false); // packets, lanes loop past 32 of them
    if (SIZE >= 1) test_layernorm<T>(520, 5, false); // 58 parts of 9 rows: all 8 warps of a part hold rows
    if (SIZE >= 2) test_layernorm<T>(1000, 67, false); // 63 parts of 16 rows
    /* attention: T = 1, odd T within a tile and over several (37, 70: a partial last tile), the head
       sizes of the presets (32, 64, 80) and the edges of the per-lane columns (20, 96, 128: more than
       48 KiB of shared memory on a GPU) */
    test_attention<T>(1, 1, 1, 1, 8, r);
    test_attention<T>(2, 37, 3, 3, 20, r);
    test_attention<T>(1, SIZE ? 70 : 33, 2, 2, 64, r);
    test_attention<T>(1, SIZE ? 45 : 9, 2, 2, 80, r);
    test_attention<T>(2, 35, 4, 2, 32, r); // grouped-query: two query heads per key/value head (llama_tiny's hs)
    test_attention<T>(1, 33, 3, 1, 16, r); // multi-query: every head reads one
    if (SIZE >= 1) test_attention<T>(2, 33, 2, 2, 32, false);
    if (SIZE >= 1) test_attention<T>(1, 40, 1, 1, 128, false);
    if (SIZE >= 1) test_attention<T>(1, 40, 4, 1, 128, false); // Llama 3 8B's head size, a group of 4
    if (SIZE >= 2) test_attention<T>(1, 131, 2, 2, 96, false);
    /* gelu: n below and above a block, the three aliasings; grid-stride n */
    test_gelu<T>(1, 0, r);
    test_gelu<T>(1000, 0, r);
    test_gelu<T>(777, 1, r);
    test_gelu<T>(777, 2, r);
    if (big) test_gelu<T>((size_t)2048 * 256 + 1001, 0, false);
    /* the Llama family: RMSNorm on the layernorm shapes, RoPE with grouped kv heads (Llama 3's theta too), SwiGLU */
    test_rmsnorm<T>(1, 1, r);
    test_rmsnorm<T>(19, 37, r);
    if (SIZE >= 1) test_rmsnorm<T>(70, 131, r);
    if (SIZE >= 1) test_rmsnorm<T>(520, 5, false);
    test_rope<T>(2, 5, 3, 1, 8, 10000.0f, r);
    test_rope<T>(1, 9, 2, 2, 6, 500000.0f, r);
    if (SIZE >= 1) test_rope<T>(2, 64, 8, 2, 32, 500000.0f, false);
    test_swiglu<T>(1, 1, r);
    test_swiglu<T>(7, 37, r);
    if (big) test_swiglu<T>(1000, 600, false); // rows of more than a block of units
    /* residual: N C not a multiple of a block; bias sums over parts */
    test_residual<T>(1, 5, r);
    test_residual<T>(19, 37, r);
    if (SIZE >= 1) test_residual<T>(200, 70, false);
    test_residual<T>(11, 64, r); // packets of every type
    if (SIZE >= 1) test_residual<T>(90, 264, false); // packets, lanes loop past 32 of them
    if (SIZE >= 1) test_residual<T>(520, 5, false); // parts of 9 rows: all 8 warps hold rows
    if (big) test_residual<T>(1000, 525, false); // 525000 > 2048 x 256: grid-stride
    /* cross-entropy: tp = 1 without and with padding, tp = 2 with padding in rank 1, tp = 2 where
       rank 1 holds only padding, loss only (grad_scale 0), Vl = 304 above the block of 256 */
    if (SIZE >= 1) test_xent<T>(5, 50, 1, 50, 0.2f, r);
    test_xent<T>(SIZE ? 6 : 3, 50, 1, 56, 0.25f, r);
    test_xent<T>(SIZE ? 7 : 3, 301, 2, 152, 1.0f / 7, r);
    test_xent<T>(SIZE ? 4 : 2, 100, 2, 100, 0.5f, r);
    if (SIZE >= 1) test_xent<T>(4, 90, 2, 48, 0.0f, r);
    if (SIZE >= 1) test_xent<T>(33, 600, 2, 304, 1.0f / 33, false);
    /* AdamW with fp32 master weights, casts, norms */
    test_adamw_master<T>(1000, r);
    test_adamw_many<T>(r);
    if (big) test_adamw_master<T>((size_t)2048 * 256 + 333, false);
    test_packed_vs_elements<T>(1000);
    if (SIZE >= 1) test_packed_vs_elements<T>(3001);
    test_norm<T>(0, r);
    test_norm<T>(1, r);
    test_norm<T>(1000, r);
    if (SIZE >= 1) test_norm<T>(MGT_SS_BLOCK + 1, false); // two chunks
    if (big) test_norm<T>((size_t)3 * MGT_SS_BLOCK * 3 + 5, false); // ten chunks, grid-stride scale
}

int main(void) {
    double t0 = now_s();
    printf("test_kernels (%s build): every launcher of kernels/*.cu through the SIMT shim against double references\n", BUILD);
    struct step {
        const char *name;
        void (*run)(void);
    } steps[] = {{"fp32", all_ops<float>},
                 {"bf16", all_ops<__nv_bfloat16>},
                 {"fp16", all_ops<__half>},
                 {"fp32 adamw", [] { test_adamw(1000, SIZE > 0); if (SIZE >= 1) test_adamw((size_t)2048 * 256 + 77, false); }},
                 {"casts", [] {
                      test_cast<__nv_bfloat16>(1000, SIZE > 0);
                      test_cast<__half>(1000, SIZE > 0);
                      if (SIZE >= 1) test_cast<__nv_bfloat16>((size_t)2048 * 256 + 5, false);
                      if (SIZE >= 2) test_cast<__half>((size_t)2048 * 256 + 5, false);
                  }},
                 {"preconditions", test_preconditions}};
    for (const step &s : steps) {
        double t1 = now_s();
        int before = failures;
        s.run();
        printf("  %-14s %s (%.2f s)\n", s.name, failures == before ? "ok" : "FAIL", now_s() - t1);
    }
    printf("worst error as a fraction of its bound, per op family and storage type (0 = exact):\n");
    printf("%-14s %6s %9s %6s %6s %6s  %s\n", "family", "cases", "values", "fp32", "bf16", "fp16", "worst case");
    for (const family &f : families)
        printf("%-14s %6d %9ld %6.3f %6.3f %6.3f  %s%s%s\n", f.name, f.cases, f.values, f.worst_by_type[0], f.worst_by_type[1],
               f.worst_by_type[2], f.worst_case[0] ? f.worst_case : "", f.worst_case[0] ? ": " : "", f.worst_case[0] ? f.worst_out : "");
    bool all_outputs = getenv("TEST_KERNELS_OUTPUTS") != nullptr;
    printf("%s:\n", all_outputs ? "per output (* parameter gradients: fp32 whatever the storage type)"
                                 : "parameter gradients (fp32 whatever the storage type)");
    for (int i = 0; i < noutputs; i++) {
        const output_stat &o = outputs[i];
        if (all_outputs || is_param_grad(o.out))
            printf("%-14s %6s %9ld %6.3f %6.3f %6.3f  %s%s\n", o.f->name, "", o.values, o.worst_by_type[0], o.worst_by_type[1], o.worst_by_type[2],
                   o.out, all_outputs && is_param_grad(o.out) ? " *" : "");
    }
    printf("%d runs under the thread orders, %.1f s; %s\n", order_runs, now_s() - t0, failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
