/* test_fakes.cpp - the checking fakes of cudart, cuBLAS and NCCL (tests/fakes/) against what they
   promise: the GEMM against a double reference over every transpose pair, odd leading dimensions,
   strides, batches, alpha/beta and the three input types; NCCL collectives across 1..8 rank
   threads, split communicators and grouped send/recv rings; deferred streams (a kernel launched
   through the SIMT shim runs only when its stream is synchronised); and every checking failure
   provoked on purpose in a child process (this program re-run with --die NAME), whose stderr must
   hold the expected "mgt fake ..." line and which must end with SIGABRT. */
#include "tests/fakes/fake_core.h" /* defines: mgtfake::float_to_half, float_to_bf16 (the fakes' own) */
#include "tests/fakes/fakes.h"     /* defines: mgt_fake_queued, mgt_fake_fail_malloc_after, mgt_fake_step_counts */
#include "kernels/fake_note.h"     /* defines: mgt_cuda_fake_note, MGT_NOTE_* (the backend's step brackets) */
#include "mgt.h"                   /* defines: MGT_BF16, MGT_F16, MGT_F32 */
#include "kernels/attention_cudnn.h" /* defines: mgt_cudnn_attn_create, _forward, _backward (cuDNN's fused attention) */
#include <cudnn.h>             /* defines: cudnnBackendCreateDescriptor (the cuDNN fake's checks) */
#include <cublasLt.h>          /* defines: cublasLtMatmul */
#include <cublas_v2.h>         /* defines: cublasGemmEx, cublasSgemm */
#include <cuda_runtime_api.h>  /* defines: cudaMalloc, cudaStream_t, cudaEvent_t */
#include <nccl.h>              /* defines: ncclAllReduce, ncclCommInitAll */
#include <math.h>              /* defines: fabs, isnan */
#include <signal.h>            /* defines: SIGABRT */
#include <stdio.h>             /* defines: printf, fprintf */
#include <stdlib.h>            /* defines: malloc, exit */
#include <string.h>            /* defines: strstr, memcpy */
#include <sys/wait.h>          /* defines: waitpid, WIFSIGNALED */
#include <unistd.h>            /* defines: fork, execv, pipe */
#include <condition_variable>  /* defines: std::condition_variable */
#include <functional>          /* defines: std::function */
#include <mutex>               /* defines: std::mutex */
#include <string>              /* defines: std::string */
#include <chrono>              /* defines: std::chrono::milliseconds */
#include <thread>              /* defines: std::thread, std::this_thread::sleep_for */
#include <vector>              /* defines: std::vector */

/* tests/fakes/fake_kernels.cpp, through the SIMT shim */
void fake_axpy(float *y, const float *x, float a, int n, cudaStream_t s);
void fake_fill(float *y, float v, int n, cudaStream_t s);
void fake_kernel_functions(const void **fn); /* fake_axpy's and fake_fill's kernels */

static int checks, failures;
#define CHECK(cond, ...)                                                               \
    do {                                                                               \
        checks++;                                                                      \
        if (!(cond)) {                                                                 \
            failures++;                                                                \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);            \
            fprintf(stderr, __VA_ARGS__);                                              \
            fputc('\n', stderr);                                                       \
        }                                                                              \
    } while (0)
#define CK(call) CHECK((call) == 0, "%s returned an error", #call)

static float bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint16_t to_bf16(float f) { /* only for values that bf16 holds exactly */
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}
static float fp16(uint16_t h) { /* normal numbers only: the test's values are */
    uint32_t u = ((uint32_t)(h & 0x8000) << 16) | ((((h >> 10) & 31u) + 112u) << 23) | ((uint32_t)(h & 1023u) << 13);
    if (!(h & 0x7fff)) u = (uint32_t)(h & 0x8000) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint16_t to_half(float f) { /* exact for the test's values: 8 significant bits, normal range */
    uint32_t u;
    memcpy(&u, &f, 4);
    if (!(u & 0x7fffffffu)) return (uint16_t)((u >> 16) & 0x8000);
    return (uint16_t)(((u >> 16) & 0x8000) | ((((u >> 23) & 255u) - 112u) << 10) | ((u >> 13) & 1023u));
}

/* the fakes' 16-bit conversions (cuBLAS outputs, NCCL reductions): every half against the compiler's
   _Float16, floats rounded to half against it and to bf16 against nearest-even by hand */
static void test_conversions() {
    int bad = 0;
#ifdef __FLT16_MAX__
    for (unsigned h = 0; h < 65536; h++) {
        uint16_t hh = (uint16_t)h;
        _Float16 r;
        memcpy(&r, &hh, 2);
        float f = mgtfake::half_to_float(hh);
        bad += !(f == (float)r || (f != f && r != r));
    }
#endif
    unsigned seed = 1;
    for (int i = 0; i < 400000; i++) {
        seed = seed * 1664525u + 1013904223u;
        float f;
        memcpy(&f, &seed, 4);
        if (f != f) continue;
        if (i & 1) f *= 0x1p-100f; /* into the half range, subnormals included */
#ifdef __FLT16_MAX__
        _Float16 r = (_Float16)f;
        uint16_t want;
        memcpy(&want, &r, 2);
        bad += mgtfake::float_to_half(f) != want;
#endif
        uint32_t u;
        memcpy(&u, &f, 4);
        uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u; /* the bf16 neighbours (same sign) */
        float flo, fhi;
        memcpy(&flo, &lo, 4);
        memcpy(&fhi, &hi, 4);
        double dl = fabs((double)f - flo), dh = fabs((double)fhi - f);
        if ((hi & 0x7fffffffu) == 0x7f800000u) dh = fabs(copysign(0x1p128, (double)f) - f); /* rounding to infinity */
        uint32_t pick = dl < dh || (dl == dh && !(lo & 0x10000u)) ? lo : hi;
        bad += mgtfake::float_to_bf16(f) != (uint16_t)(pick >> 16);
    }
    CHECK(bad == 0, "%d 16-bit conversions differ", bad);
}

/* ---- GEMM ------------------------------------------------------------------------------------- */
static size_t tsize(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }
static float tload(const std::vector<char> &v, size_t i, cudaDataType t) {
    if (t == CUDA_R_32F) return ((const float *)v.data())[i];
    uint16_t h = ((const uint16_t *)v.data())[i];
    return t == CUDA_R_16BF ? bf16(h) : fp16(h);
}
static void tstore(std::vector<char> &v, size_t i, cudaDataType t, float x) {
    if (t == CUDA_R_32F) ((float *)v.data())[i] = x;
    else ((uint16_t *)v.data())[i] = t == CUDA_R_16BF ? to_bf16(x) : to_half(x);
}
/* values k/64 for small integers k: exact in bf16 and fp16, so the inputs are the same numbers in
   every type and the reference needs no rounding of its own */
static float val(unsigned &seed) {
    seed = seed * 1103515245u + 12345u;
    return (float)((int)((seed >> 16) % 129u) - 64) / 64.0f;
}
static void gemm_case(cudaDataType in, cudaDataType out, cublasOperation_t ta, cublasOperation_t tb, int batch,
                      float beta) {
    const int m = 7, n = 5, k = 9;
    int arows = ta == CUBLAS_OP_N ? m : k, acols = ta == CUBLAS_OP_N ? k : m;
    int brows = tb == CUBLAS_OP_N ? k : n, bcols = tb == CUBLAS_OP_N ? n : k;
    int lda = arows + 3, ldb = brows + 1, ldc = m + 2; /* odd padding on every matrix */
    long long sa = (long long)lda * acols + 5, sb = (long long)ldb * bcols + 2, sc = (long long)ldc * n + 3;
    size_t na = (size_t)(sa * batch), nb = (size_t)(sb * batch), nc = (size_t)(sc * batch);
    std::vector<char> A(na * tsize(in)), B(nb * tsize(in)), C(nc * tsize(out)), C0;
    unsigned seed = 42u + (unsigned)(ta * 7 + tb * 3 + batch);
    for (size_t i = 0; i < na; i++) tstore(A, i, in, val(seed));
    for (size_t i = 0; i < nb; i++) tstore(B, i, in, val(seed));
    for (size_t i = 0; i < nc; i++) tstore(C, i, out, val(seed));
    C0 = C;
    void *dA, *dB, *dC;
    CK(cudaMalloc(&dA, A.size()));
    CK(cudaMalloc(&dB, B.size()));
    CK(cudaMalloc(&dC, C.size()));
    CK(cudaMemcpy(dA, A.data(), A.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dB, B.data(), B.size(), cudaMemcpyHostToDevice));
    if (beta != 0.0f) CK(cudaMemcpy(dC, C.data(), C.size(), cudaMemcpyHostToDevice));
    else { /* C holds NaN (0xFF bytes) outside the padding: with beta = 0 cuBLAS must not read it */
        CK(cudaMemset(dC, 0xff, C.size()));
        CK(cudaMemcpy(C0.data(), dC, C.size(), cudaMemcpyDeviceToHost));
    }
    cublasHandle_t h;
    CK(cublasCreate(&h));
    float alpha = 0.75f;
    if (batch == 1)
        CK(cublasGemmEx(h, ta, tb, m, n, k, &alpha, dA, in, lda, dB, in, ldb, &beta, dC, out, ldc, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
    else
        CK(cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, &alpha, dA, in, lda, sa, dB, in, ldb, sb, &beta, dC, out, ldc,
                                      sc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    std::vector<char> got(C.size());
    CK(cudaMemcpy(got.data(), dC, C.size(), cudaMemcpyDeviceToHost));
    double worst = 0;
    int bad_pad = 0;
    for (int l = 0; l < batch; l++)
        for (int j = 0; j < n; j++)
            for (int i = 0; i < ldc; i++) {
                size_t ci = (size_t)(sc * l) + (size_t)j * ldc + i;
                float g = tload(got, ci, out);
                if (i >= m) { /* padding rows: untouched */
                    uint64_t a = 0, b = 0;
                    memcpy(&a, got.data() + ci * tsize(out), tsize(out));
                    memcpy(&b, C0.data() + ci * tsize(out), tsize(out));
                    bad_pad += a != b;
                    continue;
                }
                double ref = 0, mag = 0;
                for (int p = 0; p < k; p++) {
                    size_t ai = (size_t)(sa * l) + (ta == CUBLAS_OP_N ? (size_t)p * lda + i : (size_t)i * lda + p);
                    size_t bi = (size_t)(sb * l) + (tb == CUBLAS_OP_N ? (size_t)j * ldb + p : (size_t)p * ldb + j);
                    double t = (double)tload(A, ai, in) * tload(B, bi, in);
                    ref += t;
                    mag += fabs(t);
                }
                ref *= alpha;
                mag *= alpha;
                if (beta != 0.0f) {
                    ref += (double)beta * tload(C0, ci, out);
                    mag += fabs((double)beta * tload(C0, ci, out));
                }
                /* fp32 accumulation: k + 2 roundings of at most 2^-24 relative to the magnitude;
                   then one rounding of the result to C's type (unit roundoff 2^-8 bf16, 2^-11 fp16) */
                double tol = (k + 2) * 0x1p-24 * mag + fabs(ref) * (out == CUDA_R_32F ? 0x1p-24 : out == CUDA_R_16BF ? 0x1p-8 : 0x1p-11);
                double e = isnan(g) ? INFINITY : fabs(g - ref) - tol;
                if (e > worst) worst = e;
            }
    CHECK(worst <= 0 && bad_pad == 0, "GEMM in %d out %d op %d%d batch %d beta %g: %g beyond tolerance, %d padding "
          "elements changed", (int)in, (int)out, (int)ta, (int)tb, batch, beta, worst, bad_pad);
    CK(cublasDestroy(h));
    CK(cudaFree(dA));
    CK(cudaFree(dB));
    CK(cudaFree(dC));
}
static void test_gemm() {
    cudaDataType types[] = {CUDA_R_32F, CUDA_R_16BF, CUDA_R_16F};
    cublasOperation_t ops[] = {CUBLAS_OP_N, CUBLAS_OP_T};
    for (cudaDataType in : types)
        for (int outf = 0; outf < 2; outf++)
            for (cublasOperation_t ta : ops)
                for (cublasOperation_t tb : ops)
                    for (int batch : {1, 3})
                        for (float beta : {0.0f, -0.5f}) {
                            if (outf && in == CUDA_R_32F) continue;
                            gemm_case(in, outf ? CUDA_R_32F : in, ta, tb, batch, beta);
                        }
    /* cublasSgemm and TF32: 1 + 2^-12 is exact in fp32 and rounds to 1 in TF32 (10 mantissa bits) */
    float *d;
    CK(cudaMalloc((void **)&d, 3 * sizeof(float)));
    float host[3] = {1.0f + 0x1p-12f, 1.0f, 0.0f}, one = 1.0f, zero = 0.0f, out = 0;
    CK(cudaMemcpy(d, host, sizeof host, cudaMemcpyHostToDevice));
    cublasHandle_t h;
    CK(cublasCreate(&h));
    CK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, d, 1, d + 1, 1, &zero, d + 2, 1));
    CK(cudaMemcpy(&out, d + 2, 4, cudaMemcpyDeviceToHost));
    CHECK(out == 1.0f + 0x1p-12f, "fp32 GEMM %.9g", out);
    CK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, d, CUDA_R_32F, 1, d + 1, CUDA_R_32F, 1, &zero, d + 2,
                    CUDA_R_32F, 1, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
    CK(cudaMemcpy(&out, d + 2, 4, cudaMemcpyDeviceToHost));
    CHECK(out == 1.0f, "TF32 GEMM %.9g (inputs must be rounded to TF32)", out);
    /* cublasSgemmStridedBatched: two 1x1 products with stride 1 */
    float two[4] = {2.0f, 3.0f, 0, 0};
    float *e;
    CK(cudaMalloc((void **)&e, sizeof two));
    CK(cudaMemcpy(e, two, sizeof two, cudaMemcpyHostToDevice));
    CK(cublasSgemmStridedBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, 1, 1, 1, &one, e, 1, 1, e, 1, 1, &zero, e + 2, 1, 1, 2));
    CK(cudaMemcpy(two, e, sizeof two, cudaMemcpyDeviceToHost));
    CHECK(two[2] == 4.0f && two[3] == 9.0f, "strided batched Sgemm %g %g", two[2], two[3]);
    CK(cublasDestroy(h));
    CK(cudaFree(d));
    CK(cudaFree(e));
}

/* cuBLASLt: D = GELU(alpha op(A) op(B) + beta C + bias), bf16 A/B, fp32 C and D apart, a batch of 2 */
static void test_lt() {
    const int m = 6, n = 4, k = 5, batch = 2, lda = k + 1, ldb = k + 2, ldc = m + 1, ldd = m + 3;
    const long long sa = (long long)lda * m + 1, sb = (long long)ldb * n, sc = (long long)ldc * n, sd = (long long)ldd * n;
    std::vector<uint16_t> A((size_t)(sa * batch)), B((size_t)(sb * batch));
    std::vector<float> C((size_t)(sc * batch)), bias(m), D((size_t)(sd * batch));
    unsigned seed = 7;
    for (auto &x : A) x = to_bf16(val(seed));
    for (auto &x : B) x = to_bf16(val(seed));
    for (auto &x : C) x = val(seed);
    for (auto &x : bias) x = val(seed);
    void *dA, *dB, *dC, *dD, *dbias, *ws;
    CK(cudaMalloc(&dA, A.size() * 2));
    CK(cudaMalloc(&dB, B.size() * 2));
    CK(cudaMalloc(&dC, C.size() * 4));
    CK(cudaMalloc(&dD, D.size() * 4));
    CK(cudaMalloc(&dbias, m * 4));
    CK(cudaMalloc(&ws, 1 << 16));
    CK(cudaMemcpy(dA, A.data(), A.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dB, B.data(), B.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dC, C.data(), C.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dbias, bias.data(), m * 4, cudaMemcpyHostToDevice));
    cublasLtHandle_t h;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc, ld;
    cublasLtMatmulPreference_t pref;
    CK(cublasLtCreate(&h));
    CK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    int32_t opt = CUBLAS_OP_T, batch32 = batch;
    uint32_t epi = CUBLASLT_EPILOGUE_GELU_BIAS;
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opt, sizeof opt));
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dbias, sizeof dbias));
    CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, k, m, lda));
    CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, n, ldb));
    CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, ldc));
    CK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, ldd));
    cublasLtMatrixLayout_t ls[4] = {la, lb, lc, ld};
    long long strides[4] = {sa, sb, sc, sd};
    for (int i = 0; i < 4; i++) {
        CK(cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch32, sizeof batch32));
        int64_t st = strides[i];
        CK(cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st, sizeof st));
    }
    CK(cublasLtMatmulPreferenceCreate(&pref));
    size_t wsb = 1 << 16;
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    CK(cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, lc, ld, pref, 1, &res, &found));
    CHECK(found == 1, "%d algorithms", found);
    float alpha = 1.25f, beta = 0.5f;
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    CK(cublasLtMatmul(h, desc, &alpha, dA, la, dB, lb, &beta, dC, lc, dD, ld, &res.algo, ws, wsb, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(D.data(), dD, D.size() * 4, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (int l = 0; l < batch; l++)
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double x = 0, mag = 0;
                for (int p = 0; p < k; p++) {
                    double t = (double)bf16(A[(size_t)(sa * l) + (size_t)i * lda + p]) * bf16(B[(size_t)(sb * l) + (size_t)j * ldb + p]);
                    x += t;
                    mag += fabs(t);
                }
                double c = C[(size_t)(sc * l) + (size_t)j * ldc + i];
                x = alpha * x + beta * c + bias[(size_t)i];
                mag = alpha * mag + fabs(beta * c) + fabs(bias[(size_t)i]);
                double want = 0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)));
                /* fp32 accumulation (k + 3 roundings relative to mag), then GELU in fp32: its slope is
                   below 1.2 and tanhf is within a few ulps, so 1e-6 of mag + 1 covers it */
                double e = fabs(D[(size_t)(sd * l) + (size_t)j * ldd + i] - want) - ((k + 3) * 0x1p-24 * mag * 1.2 + 1e-6 * (mag + 1));
                if (!(e <= worst)) worst = e;
            }
    CHECK(worst <= 0, "cuBLASLt GELU_BIAS GEMM: %g beyond tolerance", worst);
    CK(cublasLtMatmulPreferenceDestroy(pref));
    for (int i = 0; i < 4; i++) CK(cublasLtMatrixLayoutDestroy(ls[i]));
    CK(cublasLtMatmulDescDestroy(desc));
    CK(cublasLtDestroy(h));
    CK(cudaStreamDestroy(s));
    for (void *p : {dA, dB, dC, dD, dbias, ws}) CK(cudaFree(p));
}

/* cuBLASLt's training epilogues, as the CUDA backend calls them (one matrix, D = op(A) op(B) with
   op(A) = A^T): GELU_AUX_BIAS writes pre = x + bias to aux and D = gelu(pre); DGELU gives
   D = x gelu'(aux); BGRADB writes op(B)'s column sums over k (the bias gradient) while D (fp32,
   beta 1) accumulates. Inputs are k/64 values (exact in bf16), references in double; each output
   is held to its rounding (2^-8 relative in bf16 plus the fp32 sum's (k + 3) 2^-24 of the
   magnitudes, 3x for the GELU's slope) */
static float gelu_d(double x) { return (float)(0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)))); }
static double gelu_grad_d(double x) {
    double th = tanh(0.7978845608 * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * 0.7978845608 * (1 + 3 * 0.044715 * x * x);
}
static void lt_run(uint32_t epi, cudaDataType dt, int m, int n, int k, const void *A, const void *B, float beta, void *D, const void *bias, void *aux,
                   int64_t aux_ld) {
    cublasLtHandle_t h;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulHeuristicResult_t res;
    int32_t opt = CUBLAS_OP_T;
    int found = 0;
    void *ws;
    size_t wsb = 1 << 16;
    float alpha = 1.0f;
    CK(cudaMalloc(&ws, wsb));
    CK(cublasLtCreate(&h));
    CK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opt, sizeof opt));
    CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (bias) CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    if (aux) {
        CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
        CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld));
    }
    CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, k, m, k));
    CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, n, k));
    CK(cublasLtMatrixLayoutCreate(&ld, dt, m, n, m));
    CK(cublasLtMatmulPreferenceCreate(&pref));
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
    CK(cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, ld, ld, pref, 1, &res, &found));
    CK(cublasLtMatmul(h, desc, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &res.algo, ws, wsb, nullptr));
    CK(cudaDeviceSynchronize());
    CK(cublasLtMatmulPreferenceDestroy(pref));
    for (cublasLtMatrixLayout_t l : {la, lb, ld}) CK(cublasLtMatrixLayoutDestroy(l));
    CK(cublasLtMatmulDescDestroy(desc));
    CK(cublasLtDestroy(h));
    CK(cudaFree(ws));
}
/* a BIAS GEMM (D 8x8 fp32 = A^T B + bias) through the heuristic, A at a_offset bytes into its buffer (the
   heuristic told a_pref bytes when a_pref, else the default 256), the bias at bias_offset bytes */
static void lt_align_case(size_t a_offset, uint32_t a_pref, size_t bias_offset) {
    cublasLtHandle_t h;
    cublasLtMatmulDesc_t d;
    cublasLtMatrixLayout_t l;
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulHeuristicResult_t res;
    char *p;
    float one = 1.0f, zero = 0.0f;
    int found = 0;
    int32_t opt = CUBLAS_OP_T;
    uint32_t epi = CUBLASLT_EPILOGUE_BIAS;
    CK(cudaMalloc((void **)&p, 4096)); /* A at 0 (+ a_offset), B at 1024, D at 2048, the bias at 3072 (+ bias_offset) */
    CK(cudaMemset(p, 0, 4096));
    const void *bias = p + 3072 + bias_offset;
    CK(cublasLtCreate(&h));
    CK(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &opt, sizeof opt));
    CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    CK(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 8, 8, 8));
    CK(cublasLtMatmulPreferenceCreate(&pref));
    if (a_pref) CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &a_pref, sizeof a_pref));
    CK(cublasLtMatmulAlgoGetHeuristic(h, d, l, l, l, l, pref, 1, &res, &found));
    CHECK(found == 1, "%d algorithms", found);
    CK(cublasLtMatmul(h, d, &one, p + a_offset, l, p + 1024, l, &zero, p + 2048, l, p + 2048, l, &res.algo, nullptr, 0, nullptr));
    CK(cudaDeviceSynchronize());
    CK(cublasLtMatmulPreferenceDestroy(pref));
    CK(cublasLtMatrixLayoutDestroy(l));
    CK(cublasLtMatmulDescDestroy(d));
    CK(cublasLtDestroy(h));
    CK(cudaFree(p));
}
static void test_lt_training() {
    const int m = 16, n = 5, k = 9, aux_ld = 24; /* aux's ld above m: the fake must honour it */
    std::vector<char> A((size_t)k * m * 2), B((size_t)k * n * 2), bias((size_t)m * 2), pre((size_t)aux_ld * n * 2), Dh((size_t)m * n * 2);
    std::vector<float> D32((size_t)m * n), bg(n);
    unsigned seed = 11;
    for (size_t i = 0; i < A.size() / 2; i++) tstore(A, i, CUDA_R_16BF, 2 * val(seed));
    for (size_t i = 0; i < B.size() / 2; i++) tstore(B, i, CUDA_R_16BF, val(seed));
    for (int i = 0; i < m; i++) tstore(bias, (size_t)i, CUDA_R_16BF, val(seed));
    void *dA, *dB, *dbias, *daux, *dD, *dbg;
    CK(cudaMalloc(&dA, A.size()));
    CK(cudaMalloc(&dB, B.size()));
    CK(cudaMalloc(&dbias, bias.size()));
    CK(cudaMalloc(&daux, pre.size()));
    CK(cudaMalloc(&dD, D32.size() * 4));
    CK(cudaMalloc(&dbg, (size_t)n * 4));
    CK(cudaMemcpy(dA, A.data(), A.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dB, B.data(), B.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dbias, bias.data(), bias.size(), cudaMemcpyHostToDevice));
    auto x = [&](int i, int j, double *mag) { /* (A^T B)[i][j] and its magnitude */
        double s = 0, a = 0;
        for (int p = 0; p < k; p++) {
            double t = (double)tload(A, (size_t)i * k + p, CUDA_R_16BF) * tload(B, (size_t)j * k + p, CUDA_R_16BF);
            s += t, a += fabs(t);
        }
        *mag = a;
        return s;
    };
    double worst = 0;
    auto near = [&](double got, double want, double mag, double rel) {
        double e = fabs(got - want) - (rel * fabs(want) + 3 * (k + 3) * 0x1p-24 * (mag + 1));
        if (!(e <= worst)) worst = e;
    };
    /* GELU_AUX_BIAS in bf16: aux = x + bias, D = gelu(x + bias) */
    lt_run(CUBLASLT_EPILOGUE_GELU_AUX_BIAS, CUDA_R_16BF, m, n, k, dA, dB, 0.0f, dD, dbias, daux, aux_ld);
    CK(cudaMemcpy(pre.data(), daux, pre.size(), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(Dh.data(), dD, Dh.size(), cudaMemcpyDeviceToHost));
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double mag, v = x(i, j, &mag) + tload(bias, (size_t)i, CUDA_R_16BF);
            near(tload(pre, (size_t)j * aux_ld + i, CUDA_R_16BF), v, mag, 0x1p-8);
            near(tload(Dh, (size_t)j * m + i, CUDA_R_16BF), gelu_d(v), mag, 0x1p-8);
        }
    CHECK(worst <= 0, "cuBLASLt GELU_AUX_BIAS: %g beyond tolerance", worst);
    /* DGELU in bf16: D = x gelu'(aux), aux the pre just written */
    worst = 0;
    lt_run(CUBLASLT_EPILOGUE_DGELU, CUDA_R_16BF, m, n, k, dA, dB, 0.0f, dD, nullptr, daux, aux_ld);
    CK(cudaMemcpy(Dh.data(), dD, Dh.size(), cudaMemcpyDeviceToHost));
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double mag, v = x(i, j, &mag), g = gelu_grad_d(tload(pre, (size_t)j * aux_ld + i, CUDA_R_16BF));
            near(tload(Dh, (size_t)j * m + i, CUDA_R_16BF), v * g, mag * 1.2, 0x1p-8);
        }
    CHECK(worst <= 0, "cuBLASLt DGELU: %g beyond tolerance", worst);
    /* BGRADB, fp32 D accumulating (beta 1): D += x, bias gradient = op(B) = B^T's column sums over k */
    worst = 0;
    for (size_t i = 0; i < D32.size(); i++) D32[i] = val(seed);
    std::vector<float> D0 = D32;
    CK(cudaMemcpy(dD, D32.data(), D32.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(dbg, 0xff, (size_t)n * 4)); /* NaN: written, not added */
    /* op(B) = B (k x n, OP_N) here; the backend's dW GEMM has op(B) = dout^T, the same sums over k = N rows */
    lt_run(CUBLASLT_EPILOGUE_BGRADB, CUDA_R_32F, m, n, k, dA, dB, 1.0f, dD, dbg, nullptr, 0);
    CK(cudaMemcpy(D32.data(), dD, D32.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(bg.data(), dbg, (size_t)n * 4, cudaMemcpyDeviceToHost));
    for (int j = 0; j < n; j++) {
        double s = 0, a = 0;
        for (int p = 0; p < k; p++) s += tload(B, (size_t)j * k + p, CUDA_R_16BF), a += fabs(tload(B, (size_t)j * k + p, CUDA_R_16BF));
        near(bg[j], s, a, 0);
        for (int i = 0; i < m; i++) {
            double mag, v = x(i, j, &mag) + D0[(size_t)j * m + i];
            near(D32[(size_t)j * m + i], v, mag + fabs(D0[(size_t)j * m + i]), 0);
        }
    }
    CHECK(worst <= 0, "cuBLASLt BGRADB: %g beyond tolerance", worst);
    for (void *p : {dA, dB, dbias, daux, dD, dbg}) CK(cudaFree(p));
    lt_align_case(16, 16, 16); /* an A 16 bytes into its buffer, the heuristic told so, a bias 16-byte aligned: no failure */
}

/* ---- NCCL ------------------------------------------------------------------------------------- */
struct host_barrier { /* C++17 has no std::barrier */
    std::mutex m;
    std::condition_variable cv;
    int n, waiting = 0, gen = 0;
    explicit host_barrier(int count) : n(count) {}
    void arrive() {
        std::unique_lock<std::mutex> lk(m);
        int g = gen;
        if (++waiting == n) { waiting = 0; gen++; cv.notify_all(); }
        else cv.wait(lk, [&] { return gen != g; });
    }
};
static void run_ranks(int n, const std::function<void(int)> &f) {
    std::vector<std::thread> t;
    for (int r = 0; r < n; r++) t.emplace_back(f, r);
    for (auto &x : t) x.join();
}
static std::vector<float> fetch(const void *d, size_t count) {
    std::vector<float> v(count);
    if (cudaMemcpy(v.data(), d, count * 4, cudaMemcpyDeviceToHost) != cudaSuccess) v.clear();
    return v;
}
static void test_nccl(int n) {
    std::vector<ncclComm_t> comms((size_t)n);
    CK(ncclCommInitAll(comms.data(), n, nullptr));
    std::mutex m;
    host_barrier counted(n);
    int bad = 0;
    run_ranks(n, [&](int r) {
        int errs = 0;
        cudaSetDevice(r);
        cudaStream_t s;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        ncclComm_t c = comms[(size_t)r];
        int cnt = 0, rk = -1;
        ncclCommCount(c, &cnt);
        ncclCommUserRank(c, &rk);
        errs += cnt != n || rk != r;
        const size_t C = 6;
        float *a, *b, *g;
        uint16_t *hb;
        double *d;
        cudaMalloc((void **)&a, C * n * 4);
        cudaMalloc((void **)&b, C * n * 4);
        cudaMalloc((void **)&g, C * 3 * 4); /* reduce-scatter, broadcast, ring */
        cudaMalloc((void **)&hb, C * 2);
        cudaMalloc((void **)&d, C * 8);
        std::vector<float> x(C * n);
        std::vector<uint16_t> xb(C);
        std::vector<double> xd(C);
        for (size_t i = 0; i < C * n; i++) x[i] = (float)(r + 1) * (float)(i + 1); /* small integers: exact sums */
        for (size_t i = 0; i < C; i++) xb[i] = to_bf16((float)(r + (int)i)), xd[i] = 0.5 * r + (double)i;
        cudaMemcpy(a, x.data(), C * n * 4, cudaMemcpyHostToDevice);
        cudaMemcpy(hb, xb.data(), C * 2, cudaMemcpyHostToDevice);
        cudaMemcpy(d, xd.data(), C * 8, cudaMemcpyHostToDevice);
        ncclAllReduce(a, b, C, ncclFloat32, ncclSum, c, s);          /* b[i] = (i+1) n(n+1)/2 */
        ncclAllReduce(hb, hb, C, ncclBfloat16, ncclSum, c, s);        /* in place */
        ncclAllReduce(d, d, C, ncclFloat64, ncclMax, c, s);
        ncclReduceScatter(a, g, C, ncclFloat32, ncclSum, c, s);       /* g[i] = (rC+i+1) n(n+1)/2 */
        ncclAllGather(a + r * C, a, C, ncclFloat32, c, s);            /* in place */
        ncclBroadcast(a, g + C, C, ncclFloat32, n - 1, c, s);
        /* a ring inside a group: send a to the next rank, receive from the previous */
        if (n > 1) {
            ncclGroupStart();
            ncclSend(b, C, ncclFloat32, (r + 1) % n, c, s);
            ncclRecv(g + 2 * C, C, ncclFloat32, (r + n - 1) % n, c, s);
            ncclGroupEnd();
        }
        int queued = (int)mgt_fake_queued(s);
        counted.arrive(); /* a rank that waits runs its peers' launched parts, as their GPUs would */
        cudaStreamSynchronize(s);
        float tri = (float)(n * (n + 1) / 2);
        std::vector<float> vb = fetch(b, C), vg = fetch(g, 3 * C), va = fetch(a, C * n);
        std::vector<uint16_t> hbv(C);
        std::vector<double> dv(C);
        cudaMemcpy(hbv.data(), hb, C * 2, cudaMemcpyDeviceToHost);
        cudaMemcpy(dv.data(), d, C * 8, cudaMemcpyDeviceToHost);
        for (size_t i = 0; i < C; i++) {
            errs += vb[i] != (float)(i + 1) * tri;
            errs += vg[i] != (float)(r * C + i + 1) * tri;
            errs += vg[C + i] != (float)(i + 1); /* rank n-1's a after the all-gather */
            errs += n > 1 && vg[2 * C + i] != vb[i];
            errs += bf16(hbv[i]) != (float)(n * (int)i + n * (n - 1) / 2);
            errs += dv[i] != 0.5 * (n - 1) + (double)i;
        }
        for (size_t i = 0; i < C * n; i++) errs += va[i] != (float)(i / C + 1) * (float)(i + 1); /* a_q[qC + j] */
        errs += queued != (n > 1 ? 7 : 6); /* 6 collectives + 1 group: nothing ran before the synchronisation */
        /* a split: even and odd ranks, ordered by descending parent rank */
        ncclComm_t sc;
        ncclCommSplit(c, r % 2, -r, &sc, nullptr);
        int sn = 0, sr = -1;
        ncclCommCount(sc, &sn);
        ncclCommUserRank(sc, &sr);
        int members = (n + 1 - r % 2) / 2;
        errs += sn != members || sr != (members - 1 - r / 2);
        float one = (float)(r + 1);
        cudaMemcpy(a, &one, 4, cudaMemcpyHostToDevice);
        ncclAllReduce(a, a, 1, ncclFloat32, ncclSum, sc, s);
        cudaStreamSynchronize(s);
        float sum = fetch(a, 1)[0], want = 0;
        for (int q = r % 2; q < n; q += 2) want += (float)(q + 1);
        errs += sum != want;
        ncclCommDestroy(sc);
        ncclCommDestroy(c);
        cudaFree(a);
        cudaFree(b);
        cudaFree(g);
        cudaFree(hb);
        cudaFree(d);
        cudaStreamDestroy(s);
        std::lock_guard<std::mutex> lk(m);
        bad += errs;
    });
    CHECK(bad == 0, "%d wrong results with %d ranks", bad, n);
}
static void test_init_rank() { /* ncclGetUniqueId + ncclCommInitRank, three threads */
    ncclUniqueId id;
    CK(ncclGetUniqueId(&id));
    int bad = 0;
    std::mutex m;
    run_ranks(3, [&](int r) {
        cudaSetDevice(r + 2);
        /* memory first: an allocation (or a copy from pageable memory) while a peer's collective waits
           for this rank would hold the driver's lock that the peer's next allocation needs (the
           deadlock of the death test driver_lock); ncclCommInitRank then works as a barrier */
        float *p;
        cudaMalloc((void **)&p, 4);
        float v = 10.0f * (float)r;
        cudaMemcpy(p, &v, 4, cudaMemcpyHostToDevice);
        ncclComm_t c;
        int e = ncclCommInitRank(&c, 3, id, r) != ncclSuccess, dev = -1;
        ncclCommCuDevice(c, &dev);
        ncclBroadcast(p, p, 1, ncclFloat32, 1, c, nullptr); /* the legacy stream */
        cudaStreamSynchronize(nullptr);                     /* every rank runs its part */
        cudaMemcpy(&v, p, 4, cudaMemcpyDeviceToHost);
        e += dev != r + 2 || v != 10.0f;
        ncclCommDestroy(c);
        cudaFree(p);
        std::lock_guard<std::mutex> lk(m);
        bad += e;
    });
    CHECK(bad == 0, "%d wrong results with ncclCommInitRank", bad);
}

/* the DP overlap pattern: gradients written on the compute stream, reduced on a communication stream
   after an event, read again on the compute stream after a second event: no hazard, right sums */
static void test_overlap() {
    ncclComm_t c[2];
    CK(ncclCommInitAll(c, 2, nullptr));
    int bad = 0;
    std::mutex m;
    run_ranks(2, [&](int r) {
        cudaSetDevice(r);
        cudaStream_t compute, comm;
        cudaEvent_t produced, reduced;
        cudaStreamCreate(&compute);
        cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking);
        cudaEventCreateWithFlags(&produced, cudaEventDisableTiming);
        cudaEventCreateWithFlags(&reduced, cudaEventDisableTiming);
        float *grads, *param, h[256];
        cudaMalloc((void **)&grads, 256 * 4);
        cudaMalloc((void **)&param, 256 * 4);
        fake_fill(param, 0.0f, 256, compute);
        for (int step = 0; step < 3; step++) {
            fake_fill(grads, (float)(r + 1), 128, compute); /* bucket 0 */
            cudaEventRecord(produced, compute);
            cudaStreamWaitEvent(comm, produced, 0);
            ncclAllReduce(grads, grads, 128, ncclFloat32, ncclSum, c[r], comm);
            fake_fill(grads + 128, 1.0f, 128, compute); /* bucket 1, overlapping the reduction of bucket 0 */
            cudaEventRecord(reduced, comm);
            cudaStreamWaitEvent(compute, reduced, 0);
            fake_axpy(param, grads, -1.0f, 128, compute);
        }
        cudaStreamSynchronize(compute);
        cudaMemcpy(h, param, sizeof h, cudaMemcpyDeviceToHost);
        int e = h[0] != -9.0f || h[127] != -9.0f || h[128] != 0.0f; /* 3 steps of -(1 + 2) */
        ncclCommDestroy(c[r]);
        cudaFree(grads);
        cudaFree(param);
        cudaEventDestroy(produced);
        cudaEventDestroy(reduced);
        cudaStreamDestroy(compute);
        cudaStreamDestroy(comm);
        std::lock_guard<std::mutex> lk(m);
        bad += e;
    });
    CHECK(bad == 0, "%d ranks with wrong parameters after the overlapped reduction", bad);
}

static void test_abort() { /* an abort from another thread ends a collective that can never complete */
    ncclComm_t c[2];
    CK(ncclCommInitAll(c, 2, nullptr));
    int returned = 0;
    run_ranks(2, [&](int r) {
        cudaSetDevice(r);
        if (r == 1) { /* never joins the all-reduce; aborts both ranks instead */
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            ncclCommAbort(c[0]);
            ncclCommAbort(c[1]);
            return;
        }
        float *p;
        cudaMalloc((void **)&p, 16);
        ncclAllReduce(p, p, 4, ncclFloat32, ncclSum, c[0], nullptr);
        cudaStreamSynchronize(nullptr);
        returned = 1;
        cudaFree(p);
    });
    CHECK(returned == 1, "rank 0 returned after the abort");
}

/* ---- streams ------------------------------------------------------------------------------------ */
static void test_streams() {
    int count = 0;
    CK(cudaGetDeviceCount(&count));
    CHECK(count == 8, "%d devices (MGT_FAKE_DEVICES unset: 8)", count);
    CHECK(cudaSetDevice(99) == cudaErrorInvalidDevice && cudaGetLastError() == cudaErrorInvalidDevice &&
              cudaGetLastError() == cudaSuccess, "an invalid device is an error that cudaGetLastError reports once");
    CK(cudaSetDevice(0));
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    CHECK(p.major == 9 && p.multiProcessorCount == 132 && p.warpSize == 32, "a fake H100: sm_%d%d", p.major, p.minor);
    int sms = 0, optin = 0, version = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 3));
    CK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 3));
    CK(cudaRuntimeGetVersion(&version));
    CHECK(sms == 132 && optin == 227 * 1024 && version >= 13000, "attributes %d SMs, %d bytes, version %d", sms, optin,
          version);
    size_t free0, total, free1;
    CK(cudaMemGetInfo(&free0, &total));
    const int n = 1000;
    float *x, *y, *hx;
    CK(cudaMalloc((void **)&x, n * 4));
    CK(cudaMalloc((void **)&y, n * 4));
    CK(cudaMallocHost((void **)&hx, n * 4));
    CK(cudaMemGetInfo(&free1, &total));
    cudaPointerAttributes pa;
    CK(cudaPointerGetAttributes(&pa, y + 3));
    CHECK(pa.type == cudaMemoryTypeDevice && pa.device == 0, "a device pointer: type %d", (int)pa.type);
    CK(cudaPointerGetAttributes(&pa, &pa));
    CHECK(pa.type == cudaMemoryTypeUnregistered, "a stack pointer: type %d", (int)pa.type);
    CK(cudaPointerGetAttributes(&pa, hx));
    CHECK(pa.type == cudaMemoryTypeHost, "pinned memory: type %d", (int)pa.type);
    CHECK(free0 - free1 == 2 * n * 4, "cudaMemGetInfo counts allocations: %zu", free0 - free1);
    for (int i = 0; i < n; i++) hx[i] = (float)i;
    cudaStream_t s1, s2;
    CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    /* deferred: pinned copy and two kernels queue on s1, nothing runs until the synchronisation */
    CK(cudaMemcpyAsync(x, hx, n * 4, cudaMemcpyHostToDevice, s1));
    fake_fill(y, 1.0f, n, s1);
    fake_axpy(y, x, 2.0f, n, s1);
    CK(cudaMemcpyAsync(hx, y, n * 4, cudaMemcpyDeviceToHost, s1));
    CHECK(mgt_fake_queued(s1) == 4 && hx[10] == 10.0f, "%zu queued, hx[10] = %g before synchronising",
          mgt_fake_queued(s1), hx[10]);
    /* a query answers what the host could see at the call, and makes the device progress: a wait
       loop's next query sees the work done, but the host has not synchronised until it does */
    CHECK(cudaStreamQuery(s1) == cudaErrorNotReady && mgt_fake_queued(s1) < 4, "a query of a busy stream says not ready and runs some of it (%zu queued)",
          mgt_fake_queued(s1));
    {
        int polls = 0;
        while (cudaStreamQuery(s1) == cudaErrorNotReady && polls < 1000) polls++;
        CHECK(mgt_fake_queued(s1) == 0 && hx[10] == 21.0f, "a wait loop of queries sees it done (%d more polls)", polls);
    }
    CK(cudaStreamSynchronize(s1));
    CHECK(mgt_fake_queued(s1) == 0 && hx[10] == 21.0f && hx[999] == 1999.0f && cudaStreamQuery(s1) == cudaSuccess,
          "after synchronising: hx[10] = %g, the query says done", hx[10]);
    /* s1 -> event -> s2: ordered, no hazard; the event runs s1 when s2 needs it */
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventRecord(e0, s1));
    fake_fill(x, 3.0f, n, s1);
    CK(cudaEventRecord(e1, s1));
    CK(cudaStreamWaitEvent(s2, e1, 0));
    fake_axpy(y, x, 1.0f, n, s2); /* reads x written on s1 */
    CK(cudaStreamSynchronize(s2));
    CHECK(mgt_fake_queued(s1) == 0, "s2's wait ran s1 through the event (%zu left)", mgt_fake_queued(s1));
    float ms = -1;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    CHECK(ms >= 0, "elapsed %g ms", ms);
    CK(cudaMemcpy(hx, y, n * 4, cudaMemcpyDeviceToHost));
    CHECK(hx[10] == 24.0f, "y[10] = %g after the event-ordered axpy", hx[10]);
    /* the legacy stream orders blocking streams: memset on 0, kernel on a blocking stream */
    cudaStream_t sb;
    CK(cudaStreamCreate(&sb));
    CK(cudaMemset(x, 0, n * 4));
    fake_axpy(y, x, 5.0f, n, sb);
    CK(cudaStreamSynchronize(sb));
    CK(cudaMemcpy(hx, y, 4 * n, cudaMemcpyDeviceToHost));
    CHECK(hx[10] == 24.0f, "y[10] = %g (x was zeroed first)", hx[10]);
    /* a copy may use a stream of another device (CUDA allows it; a kernel launch would fail) */
    {
        cudaStream_t s3;
        CK(cudaSetDevice(3));
        CK(cudaStreamCreate(&s3));
        CK(cudaSetDevice(0));
        CK(cudaMemcpyAsync(hx, y, 4, cudaMemcpyDeviceToHost, s3));
        CK(cudaStreamSynchronize(s3));
        CHECK(hx[0] == 4.0f, "a copy on device 3's stream: %g (y[0] = 1 + 3)", hx[0]);
        CK(cudaStreamDestroy(s3));
    }
    /* pageable host memory: the source is read at the call */
    std::vector<float> pageable(n, 7.0f);
    CK(cudaMemcpyAsync(x, pageable.data(), n * 4, cudaMemcpyHostToDevice, s1));
    pageable[0] = -1.0f;
    CK(cudaMemcpyAsync(pageable.data(), x, n * 4, cudaMemcpyDeviceToHost, s1)); /* completes before returning */
    CHECK(pageable[0] == 7.0f, "pageable copies: %g", pageable[0]);
    /* a host function runs in stream order */
    int flag = 0;
    CK(cudaLaunchHostFunc(s1, [](void *f) { *(int *)f = 1; }, &flag));
    CHECK(flag == 0, "host function ran early");
    CK(cudaEventRecord(e0, s1));
    CHECK(cudaEventQuery(e0) == cudaErrorNotReady && flag == 1, "cudaEventQuery of a pending event: not ready, but it ran (one short operation)");
    CHECK(cudaGetLastError() == cudaErrorNotReady, "cudaErrorNotReady stays the last error, as on some runtimes");
    CHECK(cudaEventQuery(e0) == cudaSuccess && flag == 1, "the next query sees the event complete");
    CK(cudaEventSynchronize(e0));
    /* allocation failures are returned, not fatal */
    mgt_fake_fail_malloc_after(0);
    void *z = nullptr;
    CHECK(cudaMalloc(&z, 16) == cudaErrorMemoryAllocation && !z, "injected failure");
    CHECK(cudaGetLastError() == cudaErrorMemoryAllocation, "last error");
    mgt_fake_fail_malloc_after(-1);
    CHECK(strcmp(cudaGetErrorName(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation") == 0, "error names");
    CK(cudaDeviceSynchronize());
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaStreamDestroy(s1));
    CK(cudaStreamDestroy(s2));
    CK(cudaStreamDestroy(sb));
    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaFreeHost(hx));
    CHECK(mgt_fake_live_allocations(0) == 0, "%zu allocations left", mgt_fake_live_allocations(0));
}


/* ---- polls, non-blocking communicators, steps -------------------------------------------------- */
static cudaStream_t nb_stream() {
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    return s;
}

/* a host that only polls (cudaEventQuery in a loop, as a wait with a deadline does) still gets its
   collectives done: each poll makes its device progress, an all-reduce resumes where it stopped */
static int poll_event(cudaEvent_t e, int max_polls) { /* 0 done, else the last error */
    for (int i = 0; i < max_polls; i++) {
        cudaError_t q = cudaEventQuery(e);
        if (q == cudaSuccess) return 0;
        if (q != cudaErrorNotReady) return (int)q;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return (int)cudaErrorNotReady;
}
static void make_nonblocking(ncclComm_t *c, int n, int first_device) { /* one thread, as comm_nccl.c makes its world */
    ncclUniqueId id;
    ncclGetUniqueId(&id);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclGroupStart();
    for (int i = 0; i < n; i++) {
        cudaSetDevice(first_device + i);
        ncclCommInitRankConfig(&c[i], n, id, i, &cfg);
    }
    ncclGroupEnd();
    cudaSetDevice(0);
}
/* after a call on a non-blocking communicator: NCCL may launch it later from its own thread (it
   answered ncclInProgress); the stream holds the work once the state leaves ncclInProgress */
static ncclResult_t enqueued(ncclComm_t c, ncclResult_t r) {
    for (int i = 0; i < 100000 && r == ncclInProgress; i++) ncclCommGetAsyncError(c, &r);
    return r;
}
static void test_poll() {
    ncclComm_t c[3];
    make_nonblocking(c, 3, 0);
    int bad = 0, states = 0;
    for (int i = 0; i < 3; i++) {
        ncclResult_t st = ncclInProgress;
        CK(ncclCommGetAsyncError(c[i], &st));
        states += st == ncclSuccess;
    }
    CHECK(states == 3, "the non-blocking world is ready once every rank joined (%d of 3)", states);
    std::mutex m;
    run_ranks(3, [&](int r) {
        cudaSetDevice(r);
        cudaStream_t s = nb_stream();
        cudaEvent_t done;
        cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
        float *p, h[8] = {0};
        cudaMalloc((void **)&p, sizeof h);
        fake_fill(p, (float)(r + 1), 8, s);
        /* a split without blocking: in progress until every rank has split */
        ncclComm_t sub = nullptr;
        ncclResult_t sr = ncclCommSplit(c[r], r < 2 ? 0 : NCCL_SPLIT_NOCOLOR, r, &sub, nullptr);
        ncclResult_t st = ncclInProgress;
        for (int i = 0; i < 10000 && st == ncclInProgress; i++) {
            ncclCommGetAsyncError(c[r], &st);
            if (st == ncclInProgress) std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
        int e = (sr != ncclSuccess && sr != ncclInProgress) || st != ncclSuccess || (r < 2) != (sub != nullptr);
        if (sub) {
            ncclResult_t ss = ncclInProgress;
            ncclCommGetAsyncError(sub, &ss);
            e += ss != ncclSuccess;
        }
        e += enqueued(c[r], ncclAllReduce(p, p, 8, ncclFloat32, ncclSum, c[r], s)) != ncclSuccess;
        cudaEventRecord(done, s);
        e += poll_event(done, 20000) != 0;
        cudaMemcpy(h, p, sizeof h, cudaMemcpyDeviceToHost);
        e += h[0] != 6.0f || h[7] != 6.0f;
        if (sub) { /* polled too: the split communicator works */
            e += enqueued(sub, ncclAllReduce(p, p, 8, ncclFloat32, ncclSum, sub, s)) != ncclSuccess;
            cudaEventRecord(done, s);
            e += poll_event(done, 20000) != 0;
            cudaMemcpy(h, p, sizeof h, cudaMemcpyDeviceToHost);
            e += h[3] != 12.0f;
            ncclCommFinalize(sub);
            ncclCommDestroy(sub);
        }
        ncclCommFinalize(c[r]);
        ncclCommDestroy(c[r]);
        cudaFree(p);
        cudaEventDestroy(done);
        cudaStreamDestroy(s);
        std::lock_guard<std::mutex> lk(m);
        bad += e;
    });
    CHECK(bad == 0, "%d ranks went wrong polling their collectives", bad);
}

/* loads the test's kernels into the current device's context, as the backend loads its own when it
   is made (a first launch inside a step fails: lazy loading) */
static void load_fake_kernels() {
    const void *fn[2];
    fake_kernel_functions(fn);
    for (const void *f : fn) {
        cudaFuncAttributes a;
        CK(cudaFuncGetAttributes(&a, f));
        CHECK(a.maxThreadsPerBlock == 1024, "cudaFuncGetAttributes: %d threads per block at most", a.maxThreadsPerBlock);
    }
}

/* on each of the fake's 8 devices, as the backend loads its kernels when it is made: a first launch
   while an NCCL call is queued on the device would fail (the load may synchronise the device) */
static void load_fake_kernels_everywhere() {
    int was;
    cudaGetDevice(&was);
    for (int d = 0; d < 8; d++) {
        cudaSetDevice(d);
        load_fake_kernels();
    }
    cudaSetDevice(was);
}

/* the backend's step brackets: what a step did, counted per device */
static void test_step_counts() {
    cudaSetDevice(5);
    load_fake_kernels();
    cudaStream_t s = nb_stream();
    cudaEvent_t e;
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    float *d, *pinned;
    cudaMalloc((void **)&d, 64);
    CK(cudaHostAlloc((void **)&pinned, 64, cudaHostAllocDefault));
    mgt_cuda_fake_note(5, MGT_NOTE_STEP_BEGIN, nullptr);
    mgt_cuda_fake_note(5, MGT_NOTE_OP, "test op");
    fake_fill(d, 2.0f, 16, s);
    CK(cudaMemcpyAsync(pinned, d, 64, cudaMemcpyDeviceToHost, s)); /* pinned: asynchronous */
    CK(cudaEventRecord(e, s));
    int polls = 0;
    while (cudaEventQuery(e) == cudaErrorNotReady) polls++;
    mgt_cuda_fake_note(5, MGT_NOTE_STEP_END, nullptr);
    mgt_fake_counts last, total;
    mgt_fake_step_counts(5, &last, &total);
    CHECK(last.steps == 1 && last.d2h == 1 && last.d2h_bytes == 64 && last.waits == 1 && last.polls == polls && last.ops == 3 &&
              total.steps == 1 && pinned[15] == 2.0f,
          "one step: %ld copies to the host, %ld waits, %ld polls, %ld operations (%g)", last.d2h, last.waits, last.polls, last.ops,
          pinned[15]);
    cudaFree(d);
    cudaFreeHost(pinned);
    cudaEventDestroy(e);
    cudaStreamDestroy(s);
    cudaSetDevice(0);
}

/* MGT_FAKE_* fault injectors, each in a child (the fakes read the environment once): this program is
   run again with --fault NAME and that variable set; it prints what it saw and exits 0 */
static int fault_kernel() { /* MGT_FAKE_KERNEL_FAULT=fake_fill */
    cudaStream_t s = nb_stream();
    cudaEvent_t e;
    cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    float *d;
    cudaMalloc((void **)&d, 64);
    fake_fill(d, 1.0f, 16, s);
    cudaEventRecord(e, s);
    int q = poll_event(e, 1000);
    cudaError_t last = cudaGetLastError(), again = cudaGetLastError();
    printf("poll: %s, last error %s then %s, copy %s\n", cudaGetErrorName((cudaError_t)q), cudaGetErrorName(last),
           cudaGetErrorName(again), cudaGetErrorName(cudaMemcpyAsync(d, d + 8, 4, cudaMemcpyDeviceToDevice, s)));
    return 0;
}
static int fault_nccl(bool stall) { /* MGT_FAKE_STALL_RANK=1 or MGT_FAKE_NCCL_ERROR=1 */
    ncclComm_t c[2];
    setenv("MGT_FAKE_NCCL_LATE", "0", 1); /* the step's call answers at once: the output below is fixed */
    make_nonblocking(c, 2, 0);
    host_barrier b(2);
    run_ranks(2, [&](int r) {
        cudaSetDevice(r);
        cudaStream_t s = nb_stream();
        cudaEvent_t e;
        cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
        float *d;
        cudaMalloc((void **)&d, 64);
        cudaMemsetAsync(d, 0, 64, s);
        enqueued(c[r], ncclAllReduce(d, d, 16, ncclFloat32, ncclSum, c[r], s)); /* the warm-up, outside any step */
        cudaEventRecord(e, s);
        int warm = poll_event(e, 20000);
        b.arrive();
        mgt_cuda_fake_note(r, MGT_NOTE_STEP_BEGIN, nullptr);
        ncclResult_t call = ncclAllReduce(d, d, 16, ncclFloat32, ncclSum, c[r], s);
        cudaEventRecord(e, s);
        int q = poll_event(e, 500); /* 0.1 s or more: the peer never arrives */
        ncclResult_t st = ncclSuccess;
        ncclCommGetAsyncError(c[r], &st);
        b.arrive();
        if (r == 0) printf("rank 1: %s\n", ncclGetLastError(c[1]));
        b.arrive();
        printf("rank %d: warm-up %s, call %s, poll %s, state %s\n", r, warm ? "failed" : "done", ncclGetErrorString(call),
               cudaGetErrorName((cudaError_t)q), ncclGetErrorString(st));
        b.arrive();
        ncclCommAbort(c[r]); /* each rank its own: the waits end */
        int after = poll_event(e, 20000);
        mgt_cuda_fake_note(r, MGT_NOTE_STEP_END, nullptr);
        printf("rank %d: after the abort the poll %s\n", r, after ? "still waits" : "ends");
        cudaFree(d);
        (void)stall;
    });
    return 0;
}

/* NCCL_RUNTIME_CONNECT=0: the communicators are connected when made, so a step's first ring
   collectives (a 1 MiB all-reduce, a reduce-scatter) are no connection inside it, and each is right */
static int fault_eager() {
    ncclComm_t c[2];
    make_nonblocking(c, 2, 0);
    host_barrier b(2);
    run_ranks(2, [&](int r) {
        const size_t n = 1 << 18; /* 1 MiB of floats: a ring all-reduce */
        cudaSetDevice(r);
        cudaStream_t s = nb_stream();
        cudaEvent_t e;
        cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
        float *d, h[2];
        cudaMalloc((void **)&d, n * 4);
        fake_fill(d, (float)(r + 1), n, s);
        b.arrive();
        mgt_cuda_fake_note(r, MGT_NOTE_STEP_BEGIN, nullptr);
        ncclResult_t a = enqueued(c[r], ncclAllReduce(d, d, n, ncclFloat32, ncclSum, c[r], s));
        ncclResult_t rs = enqueued(c[r], ncclReduceScatter(d, d + n / 2, n / 2, ncclFloat32, ncclSum, c[r], s));
        cudaEventRecord(e, s);
        int q = poll_event(e, 20000);
        mgt_cuda_fake_note(r, MGT_NOTE_STEP_END, nullptr);
        cudaMemcpy(&h[0], d, 4, cudaMemcpyDeviceToHost);
        cudaMemcpy(&h[1], d + n / 2, 4, cudaMemcpyDeviceToHost);
        b.arrive();
        printf("rank %d: eager %s %s %s, sums %g %g\n", r, ncclGetErrorString(a), ncclGetErrorString(rs), q ? "waits" : "done", h[0], h[1]);
        b.arrive();
        ncclCommFinalize(c[r]);
        ncclCommDestroy(c[r]);
        cudaFree(d);
    });
    return 0;
}

/* ---- cuDNN: kernels/attention_cudnn.cpp's graphs run by the cuDNN fake, against a double reference */
struct attn_case {
    int dtype, B, T, NH, NKV, hs;
};
static float attn_val(unsigned &seed) { return (float)((seed = seed * 1103515245u + 12345u) >> 16 & 0x3ff) / 512.0f - 1.0f; }
static void attention_case(const attn_case &c) {
    bool bf = c.dtype == MGT_BF16;
    int W = (c.NH + 2 * c.NKV) * c.hs, C = c.NH * c.hs, g = c.NH / c.NKV;
    size_t nqkv = (size_t)c.B * c.T * W, nout = (size_t)c.B * c.T * C, nrows = (size_t)c.B * c.NH * c.T;
    auto rt = [&](float f) { return bf ? bf16(mgtfake::float_to_bf16(f)) : mgtfake::half_to_float(mgtfake::float_to_half(f)); }; /* a value the storage type holds */
    auto enc = [&](float f) { return bf ? mgtfake::float_to_bf16(f) : mgtfake::float_to_half(f); };
    auto dec = [&](uint16_t h) { return bf ? bf16(h) : mgtfake::half_to_float(h); };
    std::vector<float> qkv(nqkv), dout(nout);
    unsigned seed = 7u + (unsigned)c.T;
    for (float &x : qkv) x = rt(attn_val(seed));
    for (float &x : dout) x = rt(attn_val(seed));
    /* reference in double: out, lse, dqkv */
    double scale = 1.0 / sqrt((double)c.hs);
    std::vector<double> out(nout), lse(nrows), dqkv(nqkv, 0.0);
    for (int b = 0; b < c.B; b++)
        for (int h = 0; h < c.NH; h++) {
            int kh = h / g;
            auto q = [&](int t, int d) { return (double)qkv[((size_t)b * c.T + t) * W + h * c.hs + d]; };
            auto k = [&](int t, int d) { return (double)qkv[((size_t)b * c.T + t) * W + C + kh * c.hs + d]; };
            auto v = [&](int t, int d) { return (double)qkv[((size_t)b * c.T + t) * W + C + (c.NKV + kh) * c.hs + d]; };
            for (int t = 0; t < c.T; t++) {
                std::vector<double> s(t + 1), dp(t + 1);
                double m = -INFINITY, z = 0, D = 0;
                for (int j = 0; j <= t; j++) {
                    s[j] = 0;
                    for (int d = 0; d < c.hs; d++) s[j] += q(t, d) * k(j, d);
                    s[j] *= scale;
                    m = s[j] > m ? s[j] : m;
                }
                for (int j = 0; j <= t; j++) z += exp(s[j] - m);
                double l = m + log(z);
                lse[((size_t)b * c.NH + h) * c.T + t] = l;
                double *o = &out[((size_t)b * c.T + t) * C + h * c.hs];
                const float *dO = &dout[((size_t)b * c.T + t) * C + h * c.hs];
                for (int d = 0; d < c.hs; d++) {
                    o[d] = 0;
                    for (int j = 0; j <= t; j++) o[d] += exp(s[j] - l) * v(j, d);
                    D += dO[d] * o[d];
                }
                for (int j = 0; j <= t; j++) {
                    double p = exp(s[j] - l), dpj = 0;
                    for (int d = 0; d < c.hs; d++) dpj += dO[d] * v(j, d);
                    double ds = p * (dpj - D) * scale;
                    for (int d = 0; d < c.hs; d++) {
                        dqkv[((size_t)b * c.T + t) * W + h * c.hs + d] += ds * k(j, d);
                        dqkv[((size_t)b * c.T + j) * W + C + kh * c.hs + d] += ds * q(t, d);
                        dqkv[((size_t)b * c.T + j) * W + C + (c.NKV + kh) * c.hs + d] += p * dO[d];
                    }
                }
            }
        }
    /* through cuDNN (the fake) on device 6 */
    cudaSetDevice(6);
    cudaStream_t st = nb_stream();
    char why[256] = "";
    mgt_cudnn_attn *a = mgt_cudnn_attn_create(st, c.dtype, c.B, c.T, c.NH, c.NKV, c.hs, why, sizeof why);
    CHECK(a, "cuDNN attention B %d T %d NH %d NKV %d hs %d: %s", c.B, c.T, c.NH, c.NKV, c.hs, why);
    if (!a) return;
    size_t ws = mgt_cudnn_attn_workspace(a);
    size_t want_ws = (1u << 20) + (nrows * 4 + 255) / 256 * 256 + nrows * c.hs * 4; /* the backward plan's 1 MiB, D, the fp32 dq */
    CHECK(ws == want_ws && mgt_cudnn_attn_serves(a, c.B, c.T, c.NH, c.NKV, c.hs) && !mgt_cudnn_attn_serves(a, c.B, c.T + 1, c.NH, c.NKV, c.hs),
          "workspace %zu bytes, want %zu", ws, want_ws);
    std::vector<uint16_t> h16(nqkv), o16(nout);
    for (size_t i = 0; i < nqkv; i++) h16[i] = enc(qkv[i]);
    for (size_t i = 0; i < nout; i++) o16[i] = enc(dout[i]);
    void *dq, *dd, *dout_d, *dqkv_d, *work;
    float *dl;
    cudaMalloc(&dq, nqkv * 2);
    cudaMalloc(&dd, nout * 2);
    cudaMalloc(&dout_d, nout * 2);
    cudaMalloc(&dqkv_d, nqkv * 2);
    cudaMalloc(&work, ws);
    cudaMalloc((void **)&dl, nrows * 4);
    cudaMemcpy(dq, h16.data(), nqkv * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(dout_d, o16.data(), nout * 2, cudaMemcpyHostToDevice);
    /* a warm-up outside any step loads the engines' kernels (the runtime's untimed first step) */
    CHECK(mgt_cudnn_attn_forward(a, work, dd, dl, dq, why, sizeof why) == 0 &&
              mgt_cudnn_attn_backward(a, work, dqkv_d, dout_d, dq, dd, dl, why, sizeof why) == 0,
          "warm-up: %s", why);
    long runs = mgt_fake_cudnn_executions();
    mgt_cuda_fake_note(6, MGT_NOTE_STEP_BEGIN, nullptr); /* executing inside a step is allowed */
    CHECK(mgt_cudnn_attn_forward(a, work, dd, dl, dq, why, sizeof why) == 0, "forward: %s", why);
    /* twice, as two layers share the workspace: the second finds the first's dQ accumulator */
    for (int layer = 0; layer < 2; layer++)
        CHECK(mgt_cudnn_attn_backward(a, work, dqkv_d, dout_d, dq, dd, dl, why, sizeof why) == 0, "backward: %s", why);
    mgt_cuda_fake_note(6, MGT_NOTE_STEP_END, nullptr);
    CHECK(mgt_fake_cudnn_executions() == runs + 3, "%ld cuDNN executions, want 3", mgt_fake_cudnn_executions() - runs);
    { /* the dQ accumulator is zeroed by the caller before cuDNN 9.6 only (from 9.6 the engine does) */
        mgt_fake_counts last;
        long want = cudnnGetVersion() < 90600 ? 5 : 3;
        mgt_fake_step_counts(6, &last, nullptr);
        CHECK(last.ops == want, "cuDNN %zu: %ld operations in the step, want %ld (3 executions%s)", cudnnGetVersion(), last.ops, want,
              want == 5 ? " and 2 memsets" : ", no memset");
    }
    cudaStreamSynchronize(st);
    std::vector<uint16_t> go(nout), gd(nqkv);
    std::vector<float> gl = fetch(dl, nrows);
    cudaMemcpy(go.data(), dd, nout * 2, cudaMemcpyDeviceToHost);
    cudaMemcpy(gd.data(), dqkv_d, nqkv * 2, cudaMemcpyDeviceToHost);
    /* bounds: lse is fp32 from exact inputs (1e-5); out and dqkv are rounded once to the storage type
       (half an ulp: 2^-9 of bf16, 2^-12 of fp16, relative) after P and dS were rounded to it for the
       tensor-core matmuls (sums of such errors over T keys: 4 ulps of the largest value) */
    double ulp = bf ? 1.0 / 256 : 1.0 / 2048, e_l = 0, e_o = 0, e_d = 0, m_o = 0, m_d = 0;
    /* fmax drops a NaN, so a NaN error counts as infinite */
    auto worst = [](double e, double d) { return d == d ? fmax(e, d) : INFINITY; };
    for (size_t i = 0; i < nrows; i++) e_l = worst(e_l, fabs(gl[i] - lse[i]));
    for (size_t i = 0; i < nout; i++) e_o = worst(e_o, fabs(dec(go[i]) - out[i])), m_o = fmax(m_o, fabs(out[i]));
    for (size_t i = 0; i < nqkv; i++) e_d = worst(e_d, fabs(dec(gd[i]) - dqkv[i])), m_d = fmax(m_d, fabs(dqkv[i]));
    CHECK(e_l < 1e-5 && e_o <= 4 * ulp * m_o && e_d <= 4 * ulp * m_d && m_d > 0,
          "%s B %d T %d NH %d NKV %d hs %d: lse error %.3g, out error %.3g (max %.3g), dqkv error %.3g (max %.3g)", bf ? "bf16" : "fp16", c.B, c.T,
          c.NH, c.NKV, c.hs, e_l, e_o, m_o, e_d, m_d);
    if (getenv("MGT_FAKE_SHOW"))
        printf("cuDNN attention %s B %d T %d NH %d NKV %d hs %d: lse %.3g, out %.3g of %.3g, dqkv %.3g of %.3g\n", bf ? "bf16" : "fp16", c.B, c.T, c.NH,
               c.NKV, c.hs, e_l, e_o, m_o, e_d, m_d);
    mgt_cudnn_attn_destroy(a);
    for (void *p : {dq, dd, dout_d, dqkv_d, work, (void *)dl}) cudaFree(p);
    cudaStreamDestroy(st);
    cudaSetDevice(0);
}
/* one tensor descriptor with the attributes of a (first_dim, 1, 4, 8) bf16 tensor, minus `skip` */
static cudnnBackendDescriptor_t cudnn_tensor(int skip, int64_t align = 16, int64_t first_dim = 1, int64_t uid = 1) {
    cudnnBackendDescriptor_t t;
    cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &t);
    int64_t n[4] = {first_dim, 1, 4, 8}, s[4] = {32, 32, 8, 1};
    cudnnDataType_t type = CUDNN_DATA_BFLOAT16;
    cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, n);
    if (skip != 1) cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, s);
    cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    return t;
}
/* a finalized graph of one pointwise IDENTITY from tensor x_uid (1, 1, 4, 8) to tensor y_uid (y_dim, 1, 4,
   8), broadcast; graph_in_step: the graph descriptor is made inside a step */
static cudnnBackendDescriptor_t cudnn_identity_graph(int64_t x_uid, int64_t y_uid, int64_t y_dim, bool graph_in_step = false) {
    cudnnHandle_t h;
    cudnnCreate(&h);
    cudnnBackendDescriptor_t x = cudnn_tensor(0, 16, 1, x_uid), y = cudnn_tensor(0, 16, y_dim, y_uid), pw, op, g;
    cudnnBackendFinalize(x);
    cudnnBackendFinalize(y);
    cudnnPointwiseMode_t mode = CUDNN_POINTWISE_IDENTITY;
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    cudnnBackendCreateDescriptor(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, &pw);
    cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    cudnnBackendFinalize(pw);
    cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, &op);
    cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw);
    cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    cudnnBackendFinalize(op);
    if (graph_in_step) mgt_cuda_fake_note(0, MGT_NOTE_STEP_BEGIN, nullptr);
    cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &g);
    cudnnBackendSetAttribute(g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    cudnnBackendSetAttribute(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op);
    cudnnBackendFinalize(g);
    return g;
}
/* an older cuDNN (MGT_FAKE_CUDNN_VERSION=90500): the mask value must be the float's lowest (its -inf
   gives NaN) and the dQ accumulator zeroed by the caller, each case still right */
static int fault_cudnn_old() {
    attention_case({MGT_BF16, 2, 13, 2, 2, 16});
    attention_case({MGT_F16, 1, 5, 3, 1, 32});
    printf("cuDNN %zu: %d checks, %d failed\n", cudnnGetVersion(), checks, failures);
    return 0;
}

static void test_cudnn() {
    attention_case({MGT_BF16, 2, 13, 2, 2, 16}); /* odd T */
    attention_case({MGT_BF16, 1, 9, 4, 2, 8});   /* grouped-query: 2 query heads per key/value head */
    attention_case({MGT_F16, 1, 5, 3, 1, 32});   /* fp16, one key/value head */
    attention_case({MGT_BF16, 1, 1, 1, 1, 128}); /* T = 1, the largest head */
    /* what cuDNN cannot serve: create says why, the backend keeps its own kernel */
    char why[256] = "";
    cudaStream_t st = nb_stream();
    CHECK(!mgt_cudnn_attn_create(st, MGT_F32, 1, 4, 2, 2, 16, why, sizeof why) && strstr(why, "fp32"), "fp32: %s", why);
    CHECK(!mgt_cudnn_attn_create(st, MGT_BF16, 1, 4, 2, 2, 20, why, sizeof why) && strstr(why, "multiple of 8"), "head size 20: %s", why);
    CHECK(!mgt_cudnn_attn_create(st, MGT_BF16, 1, 4, 2, 2, 136, why, sizeof why) && strstr(why, "up to 128"), "head size 136: %s", why);
    { /* a graph that is not one of the SDPA patterns: the heuristic offers no engine */
        cudnnBackendDescriptor_t g = cudnn_identity_graph(1, 2, 1), heur, cfg;
        cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
        int64_t n = -1;
        cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur);
        cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g);
        cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
        cudnnBackendFinalize(heur);
        cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg);
        CHECK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &cfg) == CUDNN_STATUS_SUCCESS && n == 0,
              "an identity graph: %lld engine configurations, want none", (long long)n);
    }
    setenv("MGT_FAKE_CUDNN_REFUSE", "1", 1); /* a real cuDNN that refuses the plan the fake accepts */
    mgt_cudnn_attn *a = mgt_cudnn_attn_create(st, MGT_BF16, 1, 4, 2, 2, 16, why, sizeof why);
    unsetenv("MGT_FAKE_CUDNN_REFUSE");
    CHECK(!a && strstr(why, "no execution plan of the forward graph finalizes (1 engine configurations tried; the last: CUDNN_STATUS_NOT_SUPPORTED)"),
          "a refused plan: %s", why);
    cudaStreamDestroy(st);
}
/* the forward's plan executed with a variant pack of its ids and pointers minus id `drop`, the scale
   at `scale` (a qkv of 8 rows of width 96 in bf16: B 1, T 8, NH = NKV = 2, hs 16) */
static void cudnn_execute_own_pack(int64_t drop, const float *scale) {
    char why[256];
    float neg_inf = -INFINITY;
    mgt_cudnn_attn *a = mgt_cudnn_attn_create(nb_stream(), MGT_BF16, 1, 8, 2, 2, 16, why, sizeof why);
    char *qkv, *out, *lse, *work;
    cudaMalloc((void **)&qkv, 8 * 96 * 2);
    cudaMalloc((void **)&out, 8 * 32 * 2);
    cudaMalloc((void **)&lse, 2 * 8 * 4);
    cudaMalloc((void **)&work, mgt_cudnn_attn_workspace(a));
    int64_t all[] = {1, 2, 3, 4, 5, 6, 7}, uids[7];
    void *ptrs_all[] = {qkv, qkv + 64, qkv + 128, out, lse, (void *)scale, &neg_inf}, *ptrs[7];
    int n = 0;
    for (int i = 0; i < 7; i++)
        if (all[i] != drop) uids[n] = all[i], ptrs[n++] = ptrs_all[i];
    cudnnBackendDescriptor_t pack;
    cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
    cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
    cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
    cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &work);
    cudnnBackendFinalize(pack);
    cudnnBackendExecute((cudnnHandle_t)mgt_cudnn_attn_handle(a), mgt_cudnn_attn_plan(a, 0), pack);
}
/* forward on device 0 with a qkv buffer of qkv_bytes and a workspace of ws_bytes (0: what it asks) */
static void cudnn_forward(size_t qkv_bytes, size_t ws_bytes) {
    char why[256];
    cudaStream_t st = nb_stream();
    mgt_cudnn_attn *a = mgt_cudnn_attn_create(st, MGT_BF16, 1, 8, 2, 2, 16, why, sizeof why);
    void *qkv, *out, *work;
    float *lse;
    cudaMalloc(&qkv, qkv_bytes);
    cudaMalloc(&out, 8 * 32 * 2);
    cudaMalloc((void **)&lse, 2 * 8 * 4);
    cudaMalloc(&work, ws_bytes ? ws_bytes : mgt_cudnn_attn_workspace(a));
    mgt_cudnn_attn_forward(a, work, out, lse, qkv, why, sizeof why);
}

/* ---- failures, each in a child ------------------------------------------------------------------ */
static void two_ranks(const std::function<void(int, ncclComm_t, cudaStream_t, float *)> &f) {
    ncclComm_t c[2];
    ncclCommInitAll(c, 2, nullptr);
    run_ranks(2, [&](int r) {
        cudaSetDevice(r);
        float *p;
        cudaMalloc((void **)&p, 64 * 4);
        f(r, c[r], nb_stream(), p);
    });
}
/* a cuBLASLt call with epilogue epi on an 8-row (or rows) D the fake must refuse: aux of ld aux_ld when
   with_aux, a bias (gradient) buffer, BIAS_DATA_TYPE *bias_type when given */
static void lt_die_aux(uint32_t epi, int64_t aux_ld, bool with_aux, int rows = 8, const int32_t *bias_type = nullptr) {
    cublasLtHandle_t h;
    cublasLtMatmulDesc_t d;
    cublasLtMatrixLayout_t la, ld;
    float *p, one = 1.0f;
    cudaMalloc((void **)&p, 8192); /* A, B at 0 and 256, aux at 512, the bias at 900, D at 1024 (floats) */
    void *aux = p + 512, *bias = p + 900;
    cublasLtCreate(&h);
    cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    if (bias_type) cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type, sizeof *bias_type);
    if (with_aux) cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld);
    cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, rows, rows, rows);
    cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, rows, rows, rows);
    cublasLtMatmul(h, d, &one, p, la, p + 256, la, &one, p + 1024, ld, p + 1024, ld, nullptr, nullptr, 0, nullptr);
}
struct death {
    const char *name, *expect;
    void (*run)();
};
static const death deaths[] = {
    {"cudnn_graph_in_step", "mgt fake cudnnBackendCreateDescriptor: making an operation graph on device 0 inside a step", [] {
         cudnn_identity_graph(1, 2, 1, true);
     }},
    {"cudnn_duplicate_id", "mgt fake cudnnBackendFinalize: two tensors with id 1 differ ((1, 1, 4, 8) and (2, 1, 4, 8))", [] {
         cudnn_identity_graph(1, 1, 2); /* x and y both id 1 */
     }},
    {"cudnn_no_such_attribute", "mgt fake cudnnBackendSetAttribute: a tensor has no attribute 1500", [] {
         cudnnBackendDescriptor_t t;
         cudnnDataType_t comp = CUDNN_DATA_FLOAT;
         cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &t);
         cudnnBackendSetAttribute(t, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
     }},
    {"cudnn_missing_pointer", "mgt fake cudnnBackendExecute: cudnnBackendExecute(SDPA forward, B 1, heads 2, T 8, hs 16): tensor 7 (1, 1, 1, 1) of the graph has no pointer in the variant pack", [] {
         float scale = 0.25f;
         cudnn_execute_own_pack(7, &scale);
     }},
    {"cudnn_by_value_on_device", "by-value tensor 6 points to device memory (cuDNN reads it on the host)", [] {
         float *scale;
         cudaMalloc((void **)&scale, 4);
         cudnn_execute_own_pack(0, scale);
     }},
    {"cudnn_wrong_device", "mgt fake cudnnBackendExecute: the handle belongs to device 0 but the current device is 1", [] {
         char why[256];
         mgt_cudnn_attn *a = mgt_cudnn_attn_create(nb_stream(), MGT_BF16, 1, 8, 2, 2, 16, why, sizeof why);
         cudaSetDevice(1);
         mgt_cudnn_attn_forward(a, nullptr, nullptr, nullptr, nullptr, why, sizeof why);
     }},
    {"cudnn_build_in_step", "mgt fake cudnnCreate: making a cuDNN handle on device 0 inside a step (during attention forward): handles are made", [] {
         char why[256];
         cudaStream_t st = nb_stream();
         mgt_cuda_fake_note(0, MGT_NOTE_STEP_BEGIN, nullptr);
         mgt_cuda_fake_note(0, MGT_NOTE_OP, "attention forward");
         mgt_cudnn_attn_create(st, MGT_BF16, 1, 8, 2, 2, 16, why, sizeof why);
     }},
    {"cudnn_set_finalized", "mgt fake cudnnBackendSetAttribute: attribute 906 of a tensor that is already finalized", [] {
         cudnnBackendDescriptor_t t = cudnn_tensor(0);
         cudnnBackendFinalize(t);
         int64_t uid = 2;
         cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
     }},
    {"cudnn_missing_attribute", "mgt fake cudnnBackendFinalize: a tensor without its required attribute 903", [] {
         cudnnBackendFinalize(cudnn_tensor(1)); /* no strides */
     }},
    {"cudnn_wrong_type", "mgt fake cudnnBackendSetAttribute: attribute 906 of a tensor takes type 3, not 4", [] {
         cudnnBackendDescriptor_t t;
         cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &t);
         float uid = 1;
         cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_FLOAT, 1, &uid);
     }},
    {"cudnn_not_finalized", "points to a tensor that is not finalized (finalize the parts first", [] {
         cudnnBackendDescriptor_t op, t = cudnn_tensor(0);
         cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, &op);
         cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
     }},
    {"cudnn_alignment", "mgt fake cudnnBackendFinalize: tensor 1: byte alignment 12 is not a power of two", [] { cudnnBackendFinalize(cudnn_tensor(0, 12)); }},
    {"cudnn_dimension", "mgt fake cudnnBackendFinalize: tensor 1: dimensions (0, 1, 4, 8), a stride or dimension below 1", [] {
         cudnnBackendFinalize(cudnn_tensor(0, 16, 0));
     }},
    {"cudnn_shapes", "mgt fake cudnnBackendFinalize: reshape of (1, 1, 4, 8) into (2, 1, 4, 8) changes the element count", [] {
         cudnnBackendDescriptor_t op, x = cudnn_tensor(0), y = cudnn_tensor(0, 16, 2);
         cudnnBackendFinalize(x);
         cudnnBackendFinalize(y);
         cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, &op);
         cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
         cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
         cudnnBackendFinalize(op);
     }},
    {"cudnn_small_workspace", "the workspace (the plan's CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)", [] { cudnn_forward(8 * 96 * 2, 4096); }},
    {"cudnn_small_tensor", "an input of the variant pack", [] { cudnn_forward(8 * 96 * 2 - 2, 0); }},
    {"cudnn_destroyed", "mgt fake cudnnBackendFinalize: 0x", [] {
         cudnnBackendDescriptor_t t = cudnn_tensor(0);
         cudnnBackendDestroyDescriptor(t);
         cudnnBackendFinalize(t);
     }},
    {"hazard_kernel_memcpy", "mgt fake cudaMemcpyAsync: hazard on bytes [0, 1) of an allocation of 16 bytes", [] {
         float *x, h[4];
         cudaMalloc((void **)&x, 16);
         fake_fill(x, 1.0f, 4, nb_stream());
         cudaMemcpyAsync(h, x, 4, cudaMemcpyDeviceToHost, nb_stream()); /* no event between */
     }},
    {"hazard_memset_kernel", "mgt fake kernel launch: hazard", [] {
         float *x, *y;
         cudaMalloc((void **)&x, 16);
         cudaMalloc((void **)&y, 16);
         cudaMemsetAsync(x, 0, 16, nb_stream());
         fake_axpy(y, x, 1.0f, 4, nb_stream()); /* reads x */
     }},
    {"free_in_use", "mgt fake cudaFree: ", [] {
         float *x;
         cudaMalloc((void **)&x, 16);
         cudaMemsetAsync(x, 0, 16, nb_stream());
         cudaFree(x);
     }},
    {"wrong_device", "is memory of device 1, used on stream", [] {
         float *x;
         cudaSetDevice(1);
         cudaMalloc((void **)&x, 16);
         cudaSetDevice(0);
         cudaMemsetAsync(x, 0, 16, nb_stream());
     }},
    {"host_pointer_gemm", "mgt fake cublasGemmEx: A ", [] {
         float a[4] = {0}, *d;
         cudaMalloc((void **)&d, 64);
         cublasHandle_t h;
         cublasCreate(&h);
         float one = 1, zero = 0;
         cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, a, CUDA_R_32F, 2, d, CUDA_R_32F, 2, &zero, d + 4,
                      CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
     }},
    {"gemm_out_of_bounds", "runs 4 bytes past its allocation", [] {
         float *d;
         cudaMalloc((void **)&d, 15 * 4); /* A 2x2, B 2x2, C needs 4 more floats than there are */
         cublasHandle_t h;
         cublasCreate(&h);
         float one = 1, zero = 0;
         cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, d, 2, d + 4, 2, &zero, d + 12, 2);
     }},
    {"lt_epilogue", "mgt fake cublasLtMatmul: epilogue 208 is not faked", [] {
         cublasLtHandle_t h;
         cublasLtMatmulDesc_t d;
         cublasLtMatrixLayout_t l;
         float *p, one = 1.0f;
         cudaMalloc((void **)&p, 64);
         cublasLtCreate(&h);
         cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F);
         uint32_t epi = CUBLASLT_EPILOGUE_DGELU_BGRAD; /* its bias gradient would be in D's 16-bit type: mgt uses DGELU and BGRADB */
         cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
         cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 2, 2, 2);
         cublasLtMatmul(h, d, &one, p, l, p + 4, l, &one, p + 8, l, p + 8, l, nullptr, nullptr, 0, nullptr);
     }},
    {"lt_aux_ld", "EPILOGUE_AUX_LD 12: must be divisible by 8 and no less than D's 8 rows", [] { lt_die_aux(CUBLASLT_EPILOGUE_GELU_AUX, 12, true); }},
    {"lt_aux_rows", "EPILOGUE_AUX_LD 8: must be divisible by 8 and no less than D's 16 rows", [] { lt_die_aux(CUBLASLT_EPILOGUE_DGELU, 8, true, 16); }},
    {"lt_aux_pointer", "epilogue 192 without CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER", [] { lt_die_aux(CUBLASLT_EPILOGUE_DGELU, 8, false); }},
    {"lt_bgrad_type", "a bias gradient of type CUDA_R_16BF for D of type CUDA_R_32F", [] {
         int32_t t = CUDA_R_16BF;
         lt_die_aux(CUBLASLT_EPILOGUE_BGRADB, 0, false, 8, &t);
     }},
    {"lt_workspace", "mgt fake cublasLtMatmul: the algorithm needs 4096 bytes of workspace, the call passes 1024", [] {
         cublasLtHandle_t h;
         cublasLtMatmulDesc_t d;
         cublasLtMatrixLayout_t l;
         cublasLtMatmulPreference_t pref;
         cublasLtMatmulHeuristicResult_t res;
         float *p, one = 1.0f;
         int found = 0;
         uint64_t most = 4096;
         cudaMalloc((void **)&p, 8192);
         cublasLtCreate(&h);
         cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F);
         cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 2, 2, 2);
         cublasLtMatmulPreferenceCreate(&pref);
         cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &most, sizeof most);
         cublasLtMatmulAlgoGetHeuristic(h, d, l, l, l, l, pref, 1, &res, &found);
         cublasLtMatmul(h, d, &one, p, l, p + 4, l, &one, p + 8, l, p + 8, l, &res.algo, p + 16, 1024, nullptr); /* less than it asked */
     }},
    {"lt_alignment", "is 64-byte aligned, but the algorithm was chosen for a 256-byte aligned A (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES", [] {
         lt_align_case(64, 0, 0); /* an activation carved at 64 bytes, the heuristic not told */
     }},
    {"lt_alignment_told", "is 16-byte aligned, but the algorithm was chosen for a 32-byte aligned A", [] { lt_align_case(16, 32, 0); }},
    {"lt_bias_alignment", "the epilogue's bias (CUBLASLT_MATMUL_DESC_BIAS_POINTER) at", [] { lt_align_case(0, 0, 8); }},
    {"host_deref", "mgt fake host access: device memory at", [] {
         float *x;
         cudaMalloc((void **)&x, 1000);
         cudaMemset(x, 0, 1000);
         cudaDeviceSynchronize();
         printf("%g\n", x[100]); /* a device pointer read on the host: a fault on a GPU machine too */
     }},
    {"nccl_kernel_hazard", "mgt fake ncclAllReduce: hazard on bytes [0, 1)", [] {
         two_ranks([](int, ncclComm_t c, cudaStream_t comm, float *grads) {
             fake_fill(grads, 1.0f, 64, nb_stream()); /* backward writes the gradients on the compute stream */
             ncclAllReduce(grads, grads, 64, ncclFloat32, ncclSum, c, comm); /* no event: the DP overlap bug */
         });
     }},
    {"kernel_other_device", "stream 9 (device 1) belongs to device 1, but the call is for device 0", [] {
         float *x;
         cudaMalloc((void **)&x, 16);
         nb_stream(); /* stream 8 on device 0 */
         cudaSetDevice(1);
         cudaStream_t s = nb_stream();
         cudaSetDevice(0);
         fake_fill(x, 1.0f, 4, s);
     }},
    {"sendrecv_count", "mismatched send/receive #0 between rank", [] {
         two_ranks([](int r, ncclComm_t c, cudaStream_t s, float *p) {
             if (r == 0) ncclSend(p, 4, ncclFloat32, 1, c, s);
             else ncclRecv(p, 5, ncclFloat32, 0, c, s);
         });
     }},
    {"destroy_queued", "mgt fake ncclCommDestroy: 1 operations of rank 0", [] {
         two_ranks([](int r, ncclComm_t c, cudaStream_t s, float *p) {
             ncclAllReduce(p, p, 4, ncclFloat32, ncclSum, c, s);
             if (r == 0) ncclCommDestroy(c); /* without synchronising s */
         });
     }},
    {"missing_collective", "collective #0 ncclAllGather(count 4, ncclFloat32) that rank 0 issued was never issued by rank 1", [] {
         host_barrier b(2);
         two_ranks([&](int r, ncclComm_t c, cudaStream_t s, float *p) {
             if (r == 0) ncclAllGather(p, p + 8, 4, ncclFloat32, c, s);
             b.arrive();
             if (r == 1) ncclCommDestroy(c);
             b.arrive();
         });
     }},
    {"destroyed_stream", "was destroyed", [] {
         cudaStream_t s = nb_stream();
         cudaStreamDestroy(s);
         cudaStreamSynchronize(s);
     }},
    {"nccl_count", "mismatched collective #1 of a 2-rank communicator", [] {
         two_ranks([](int r, ncclComm_t c, cudaStream_t s, float *p) {
             ncclAllReduce(p, p, 8, ncclFloat32, ncclSum, c, s);
             ncclAllReduce(p, p, 8 + r, ncclFloat32, ncclSum, c, s);
         });
     }},
    {"nccl_type", "rank 0 called ncclAllGather(count 4, ncclBfloat16) and rank 1 called ncclAllGather(count 4, ncclFloat16)", [] {
         host_barrier b(2);
         two_ranks([&](int r, ncclComm_t c, cudaStream_t s, float *p) {
             if (r == 1) b.arrive(); /* rank 0 calls first, so the message has a fixed order */
             ncclAllGather(p, p + 8, 4, r ? ncclFloat16 : ncclBfloat16, c, s);
             if (r == 0) b.arrive();
         });
     }},
    {"nccl_op", "rank 0 called ncclAllReduce(count 4, ncclFloat32, ncclSum) and rank 1 called ncclReduceScatter", [] {
         host_barrier b(2);
         two_ranks([&](int r, ncclComm_t c, cudaStream_t s, float *p) {
             if (r == 1) b.arrive(); /* rank 0 calls first, so the message has a fixed order */
             if (r == 0) ncclAllReduce(p, p, 4, ncclFloat32, ncclSum, c, s);
             else ncclReduceScatter(p, p, 2, ncclFloat32, ncclSum, c, s);
             if (r == 0) b.arrive();
         });
     }},
    {"unmatched_send", "mgt fake ncclCommDestroy: unmatched send: rank 0 called ncclSend(count 4", [] {
         host_barrier b(2);
         two_ranks([&](int r, ncclComm_t c, cudaStream_t s, float *p) {
             if (r == 0) ncclSend(p, 4, ncclFloat32, 1, c, s);
             b.arrive();
             if (r == 1) ncclCommDestroy(c);
             b.arrive();
         });
     }},
    {"step_malloc", "mgt fake cudaMalloc: cudaMalloc of 16 bytes on device 0 inside a step (during matmul forward (N 4)): an allocation may wait", [] {
         mgt_cuda_fake_note(0, MGT_NOTE_STEP_BEGIN, nullptr);
         mgt_cuda_fake_note(0, MGT_NOTE_OP, "matmul forward (N 4)");
         void *p;
         cudaMalloc(&p, 16);
     }},
    {"lazy_load_in_step", "mgt fake kernel launch: the first launch of kernel fake_fill_kernel (not loaded yet) on device 0 inside a step (during layernorm forward)", [] {
         float *d;
         cudaMalloc((void **)&d, 64);
         cudaStream_t s = nb_stream();
         mgt_cuda_fake_note(0, MGT_NOTE_STEP_BEGIN, nullptr);
         mgt_cuda_fake_note(0, MGT_NOTE_OP, "layernorm forward");
         fake_fill(d, 1.0f, 16, s); /* never loaded on device 0: CUDA loads it now (lazy loading) */
     }},
    {"lazy_load_other_device", "the first launch of kernel fake_fill_kernel (not loaded yet) on device 1 inside a step", [] {
         load_fake_kernels(); /* into device 0's context only */
         cudaSetDevice(1);
         float *d;
         cudaMalloc((void **)&d, 64);
         cudaStream_t s = nb_stream();
         mgt_cuda_fake_note(1, MGT_NOTE_STEP_BEGIN, nullptr);
         fake_fill(d, 1.0f, 16, s);
     }},
    {"load_in_step", "mgt fake cudaFuncGetAttributes: loading a kernel on device 0 inside a step", [] {
         mgt_cuda_fake_note(0, MGT_NOTE_STEP_BEGIN, nullptr);
         load_fake_kernels();
     }},
    {"eager_loading", "mgt fake cudaMalloc: cudaMalloc of 16 bytes on device 0 inside a step", [] {
         setenv("CUDA_MODULE_LOADING", "EAGER", 1); /* before the fakes start: every kernel loaded with the context */
         float *d;
         cudaMalloc((void **)&d, 64);
         cudaStream_t s = nb_stream();
         mgt_cuda_fake_note(0, MGT_NOTE_STEP_BEGIN, nullptr);
         fake_fill(d, 1.0f, 16, s); /* no failure here */
         cudaMalloc((void **)&d, 16); /* the step's first rule break */
     }},
    {"step_free", "mgt fake cudaFree: cudaFree of", [] {
         void *p;
         cudaMalloc(&p, 16);
         mgt_cuda_fake_note(0, MGT_NOTE_STEP_BEGIN, nullptr);
         cudaFree(p);
     }},
    {"step_pinned_alloc", "mgt fake cudaHostAlloc: cudaHostAlloc of 64 bytes on device 0 inside a step", [] {
         mgt_cuda_fake_note(0, MGT_NOTE_STEP_BEGIN, nullptr);
         void *p;
         cudaHostAlloc(&p, 64, cudaHostAllocDefault);
     }},
    {"step_pageable", "cudaMemcpyDeviceToHost of 4 bytes into pageable host memory on device 0 inside a step (during download)", [] {
         float *d, h[1];
         cudaMalloc((void **)&d, 16);
         cudaStream_t s = nb_stream();
         mgt_cuda_fake_note(0, MGT_NOTE_STEP_BEGIN, nullptr);
         mgt_cuda_fake_note(0, MGT_NOTE_OP, "download");
         cudaMemcpyAsync(h, d, 4, cudaMemcpyDeviceToHost, s);
     }},
    {"step_stream_sync", "mgt fake cudaStreamSynchronize: cudaStreamSynchronize of stream 8 (device 0) on device 0 inside a step (during the start of a step): an unbounded host wait", [] {
         cudaStream_t s = nb_stream();
         mgt_cuda_fake_note(0, MGT_NOTE_STEP_BEGIN, nullptr);
         cudaStreamSynchronize(s);
     }},
    {"step_event_sync", "mgt fake cudaEventSynchronize: cudaEventSynchronize on device 0 inside a step", [] {
         cudaEvent_t e;
         cudaEventCreate(&e);
         mgt_cuda_fake_note(0, MGT_NOTE_STEP_BEGIN, nullptr);
         cudaEventSynchronize(e);
     }},
    {"step_device_sync", "mgt fake cudaDeviceSynchronize: cudaDeviceSynchronize on device 0 inside a step", [] {
         mgt_cuda_fake_note(0, MGT_NOTE_STEP_BEGIN, nullptr);
         cudaDeviceSynchronize();
     }},
    {"step_legacy", "on the legacy default stream on device 0 inside a step", [] {
         float *d;
         cudaMalloc((void **)&d, 16);
         mgt_cuda_fake_note(0, MGT_NOTE_STEP_BEGIN, nullptr);
         cudaMemset(d, 0, 16);
     }},
    {"step_event_create", "mgt fake cudaEventCreate: making an event on device 0 inside a step", [] {
         mgt_cuda_fake_note(0, MGT_NOTE_STEP_BEGIN, nullptr);
         cudaEvent_t e;
         cudaEventCreate(&e);
     }},
    {"step_first_collective", "mgt fake ncclAllReduce: the first collective on trees of rank ", [] {
         two_ranks([](int r, ncclComm_t c, cudaStream_t s, float *p) {
             mgt_cuda_fake_note(r, MGT_NOTE_STEP_BEGIN, nullptr);
             ncclAllReduce(p, p, 4, ncclFloat32, ncclSum, c, s);
         });
     }},
    {"step_first_send", "mgt fake ncclSend: the first send between ranks 0 and 1", [] {
         host_barrier b(2);
         two_ranks([&](int r, ncclComm_t c, cudaStream_t s, float *p) {
             ncclAllReduce(p, p, 4, ncclFloat32, ncclSum, c, s); /* a warm communicator, but no pair warmed up */
             cudaStreamSynchronize(s);
             if (r == 1) b.arrive(); /* rank 0 first */
             mgt_cuda_fake_note(r, MGT_NOTE_STEP_BEGIN, nullptr);
             if (r == 0) ncclSend(p, 4, ncclFloat32, 1, c, s);
             else ncclRecv(p, 4, ncclFloat32, 0, c, s);
             if (r == 0) b.arrive();
         });
     }},
    {"step_lazy_workspace", "mgt fake cublasGemmEx: cublasGemmEx on a handle without a workspace on device 0 inside a step", [] {
         float *d, one = 1, zero = 0;
         cudaMalloc((void **)&d, 64);
         cublasHandle_t h;
         cublasCreate(&h);
         mgt_cuda_fake_note(0, MGT_NOTE_STEP_BEGIN, nullptr);
         cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, d, CUDA_R_32F, 2, d + 4, CUDA_R_32F, 2, &zero, d + 8,
                      CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
     }},
    {"step_first_gemm", "mgt fake cublasGemmEx: cublasGemmEx(NN, m 2, n 2, k 4, batch 1) (its library kernel is not loaded yet", [] {
         /* issue 22: cuBLAS's kernels load lazily at their first launch; a shape used outside a step
            is loaded, a new one inside a step is not (the runtime's warm-up step runs every shape) */
         float *d, one = 1, zero = 0;
         void *ws;
         cudaMalloc((void **)&d, 256);
         cudaMalloc(&ws, 1 << 20);
         cublasHandle_t h;
         cublasCreate(&h);
         cublasSetWorkspace(h, ws, 1 << 20);
         cublasSetStream(h, nb_stream());
         cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, d, CUDA_R_32F, 2, d + 4, CUDA_R_32F, 2, &zero, d + 8,
                      CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
         mgt_cuda_fake_note(0, MGT_NOTE_STEP_BEGIN, nullptr);
         cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, d, CUDA_R_32F, 2, d + 4, CUDA_R_32F, 2, &zero, d + 8,
                      CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT); /* loaded: allowed */
         cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 4, &one, d, CUDA_R_32F, 2, d + 16, CUDA_R_32F, 4, &zero, d + 32,
                      CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
     }},
    {"warm_up_load_beside_nccl", "while an NCCL kernel is in flight there (", [] {
         /* issue 22: even in the warm-up step, where loads are allowed, a library kernel must not
            load while an NCCL kernel may spin on the device: the load may synchronise the device */
         two_ranks([](int r, ncclComm_t c, cudaStream_t s, float *p) {
             float one = 1, zero = 0;
             void *ws;
             cudaMalloc(&ws, 1 << 20);
             cublasHandle_t h;
             cublasCreate(&h);
             cublasSetWorkspace(h, ws, 1 << 20);
             cublasSetStream(h, nb_stream());
             ncclAllReduce(p + 48, p + 48, 16, ncclFloat32, ncclSum, c, s); /* connects the trees it runs on */
             cudaStreamSynchronize(s);
             mgt_cuda_fake_note(r, MGT_NOTE_WARM_UP_BEGIN, nullptr);
             ncclAllReduce(p + 48, p + 48, 16, ncclFloat32, ncclSum, c, s);
             cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, p, CUDA_R_32F, 2, p + 4, CUDA_R_32F, 2, &zero, p + 8,
                          CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
         });
     }},
    {"step_first_ring", "mgt fake ncclReduceScatter: the first collective on rings of rank ", [] {
         /* a 1-element warm-up connects trees (small all-reduces), not the rings a step's
            reduce-scatter runs on: NCCL 2.22 and later connect each algorithm at its first use */
         two_ranks([](int r, ncclComm_t c, cudaStream_t s, float *p) {
             ncclAllReduce(p, p, 1, ncclFloat32, ncclSum, c, s);
             cudaStreamSynchronize(s);
             mgt_cuda_fake_note(r, MGT_NOTE_STEP_BEGIN, nullptr);
             ncclReduceScatter(p, p + 32, 16, ncclFloat32, ncclSum, c, s);
         });
     }},
    {"late_launch_order", "hazard on bytes [0, 1) of an allocation of 256 bytes", [] {
         /* who reports it depends on which comes second, NCCL's thread enqueuing the all-reduce
            or this thread launching the kernel (under TSan NCCL's thread is often first) */
         /* the defect of issue 22: a call that answered ncclInProgress is enqueued later by NCCL's
            thread; a stream ordered after an event recorded before the poll says ncclSuccess is
            ordered after nothing, and its kernel writes the buffer before the all-reduce does */
         ncclComm_t c[2];
         make_nonblocking(c, 2, 0);
         run_ranks(2, [&](int r) {
             cudaSetDevice(r);
             cudaStream_t s = nb_stream(), compute = nb_stream();
             cudaEvent_t done;
             cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
             float *p;
             cudaMalloc((void **)&p, 64 * 4);
             fake_fill(p, 1.0f, 64, s);
             ncclResult_t st = ncclAllReduce(p, p, 64, ncclFloat32, ncclSum, c[r], s); /* connects: launched late */
             cudaEventRecord(done, s); /* too early: before the poll */
             cudaStreamWaitEvent(compute, done, 0);
             fake_fill(p, 2.0f, 64, compute);
             enqueued(c[r], st);
             cudaStreamSynchronize(compute);
         });
     }},
    {"in_progress_call", "mgt fake ncclAllReduce: a communicator of device 0 still being split", [] {
         ncclComm_t c[2];
         make_nonblocking(c, 2, 0);
         float *p;
         cudaMalloc((void **)&p, 16);
         ncclComm_t sub;
         ncclCommSplit(c[0], 0, 0, &sub, nullptr); /* rank 1 never splits: in progress */
         ncclAllReduce(p, p, 4, ncclFloat32, ncclSum, sub, nullptr);
     }},
    {"driver_lock", "waits for the driver's lock, held by a thread in cudaMalloc of 16 bytes on device 0, for cudaMalloc of 16 bytes on device 1", [] {
         /* rank 0 allocates while its all-reduce waits for rank 1, whose thread then allocates before
            it launches its part: the driver's lock, held by rank 0 while it waits for its device,
            keeps rank 1 out (jax #11637; NCCL's "Using multiple NCCL communicators concurrently").
            Had rank 1 launched first, its GPU would run its part and rank 0's wait would end. */
         host_barrier b(2);
         two_ranks([&](int r, ncclComm_t c, cudaStream_t s, float *p) {
             b.arrive();
             if (r == 0) {
                 ncclAllReduce(p, p, 4, ncclFloat32, ncclSum, c, s);
                 b.arrive();
                 void *q;
                 cudaMalloc(&q, 16); /* waits for device 0's streams: the all-reduce */
             } else {
                 b.arrive();
                 std::this_thread::sleep_for(std::chrono::milliseconds(200));
                 void *q;
                 cudaMalloc(&q, 16); /* needs the lock before it launches its all-reduce */
                 ncclAllReduce(p, p, 4, ncclFloat32, ncclSum, c, s);
             }
         });
     }},
    {"deadlock", "mgt fake deadlock: every rank waits", [] {
         two_ranks([](int r, ncclComm_t c, cudaStream_t s, float *p) {
             ncclRecv(p, 4, ncclFloat32, 1 - r, c, s); /* both receive first: nobody sends */
             ncclSend(p + 4, 4, ncclFloat32, 1 - r, c, s);
             cudaStreamSynchronize(s);
         });
     }},
};

static void expect_death(const char *self, const death &d) {
    int fd[2];
    if (pipe(fd) != 0) { perror("pipe"); exit(1); }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        close(fd[1]);
        execl(self, self, "--die", d.name, (char *)nullptr);
        _exit(127);
    }
    close(fd[1]);
    std::string err;
    char buf[4096];
    ssize_t k;
    while ((k = read(fd[0], buf, sizeof buf)) > 0) err.append(buf, (size_t)k);
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    bool aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
    CHECK(aborted && err.find(d.expect) != std::string::npos, "--die %s: want SIGABRT and '%s', got status %d and:\n%s",
          d.name, d.expect, status, err.c_str());
    if (getenv("MGT_FAKE_SHOW")) printf("--die %s:\n%s", d.name, err.c_str());
}

/* ---- one world in two processes (nccl_fake.cpp's ACROSS PROCESSES) ---------------------------- */
/* ranks first and first + 1 of a 4-rank world of unique id `name`, on this process's devices 0 and 1:
   an all-reduce of the world, a split into {0, 2} and {1, 3} (each across the processes) and an
   all-reduce on it, a send from rank 1 to rank 2; `mismatch`: rank 2 all-reduces another count.
   The number of wrong results */
static int xp_ranks(const char *name, int first, bool mismatch) {
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    snprintf(id.internal, sizeof id.internal, "%s", name);
    int bad = 0;
    std::mutex m;
    run_ranks(2, [&](int i) {
        int r = first + i, e = 0;
        cudaSetDevice(i);
        float *p, v[3] = {(float)r, 0, 0};
        cudaMalloc((void **)&p, sizeof v);
        cudaMemcpy(p, v, sizeof v, cudaMemcpyHostToDevice);
        ncclComm_t c, half;
        e += ncclCommInitRank(&c, 4, id, r) != ncclSuccess;
        ncclAllReduce(p, p, mismatch && r == 2 ? 2 : 1, ncclFloat32, ncclSum, c, nullptr);
        cudaStreamSynchronize(nullptr);
        e += ncclCommSplit(c, r % 2, r, &half, nullptr) != ncclSuccess;
        ncclAllReduce(p, p + 1, 1, ncclFloat32, ncclSum, half, nullptr);
        if (r == 1) ncclSend(p + 1, 1, ncclFloat32, 2, c, nullptr);
        if (r == 2) ncclRecv(p + 2, 1, ncclFloat32, 1, c, nullptr);
        cudaStreamSynchronize(nullptr);
        cudaMemcpy(v, p, sizeof v, cudaMemcpyDeviceToHost);
        e += v[0] != 6.0f || v[1] != 12.0f || (r == 2 && v[2] != 12.0f); /* 0+1+2+3; twice that over a pair */
        ncclCommDestroy(half);
        ncclCommDestroy(c);
        cudaFree(p);
        std::lock_guard<std::mutex> lk(m);
        bad += e;
    });
    return bad;
}
/* `self --xp hub` (ranks 0-1, prints its unique id) and `self --xp ID` (ranks 2-3) as two processes:
   both end well with the right results; with a mismatch, one of them reports it (SIGABRT) */
static void test_processes(const char *self, bool mismatch) {
    int out[2];
    char err[2][64] = {"/tmp/mgt_fake_xp0.XXXXXX", "/tmp/mgt_fake_xp1.XXXXXX"};
    int efd[2] = {mkstemp(err[0]), mkstemp(err[1])};
    pid_t pid[2];
    if (pipe(out) != 0 || efd[0] < 0 || efd[1] < 0) { perror("pipe"); exit(1); }
    for (int k = 0; k < 2; k++) {
        char name[128] = "";
        if (k == 1) { /* the hub's id, its first line */
            size_t n = 0;
            while (n + 1 < sizeof name && read(out[0], name + n, 1) == 1 && name[n] != '\n') n++;
            name[n] = 0;
        }
        pid[k] = fork();
        if (pid[k] == 0) {
            if (k == 0) dup2(out[1], 1);
            dup2(efd[k], 2);
            close(out[0]);
            close(out[1]);
            execl(self, self, "--xp", k == 0 ? "hub" : name, mismatch ? "mismatch" : (char *)nullptr, (char *)nullptr);
            _exit(127);
        }
    }
    close(out[1]);
    int status[2] = {0, 0}, left = 2;
    while (left) { /* with a mismatch the other process waits on in vain: ended once one has reported */
        int st = 0;
        pid_t w = waitpid(-1, &st, 0);
        int k = w == pid[0] ? 0 : w == pid[1] ? 1 : -1;
        if (k < 0) break;
        status[k] = st;
        if (--left && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) kill(pid[1 - k], SIGKILL);
    }
    close(out[0]);
    std::string text[2];
    for (int k = 0; k < 2; k++) {
        char buf[4096];
        ssize_t n;
        lseek(efd[k], 0, SEEK_SET);
        while ((n = read(efd[k], buf, sizeof buf)) > 0) text[k].append(buf, (size_t)n);
        close(efd[k]);
        unlink(err[k]);
    }
    if (!mismatch)
        CHECK(WIFEXITED(status[0]) && !WEXITSTATUS(status[0]) && WIFEXITED(status[1]) && !WEXITSTATUS(status[1]),
              "a world across two processes: status %d and %d:\n%s\n%s", status[0], status[1], text[0].c_str(), text[1].c_str());
    else {
        bool found = false;
        for (int k = 0; k < 2; k++)
            found = found || (WIFSIGNALED(status[k]) && WTERMSIG(status[k]) == SIGABRT &&
                              text[k].find("mismatched collective #0 of a 4-rank communicator") != std::string::npos);
        CHECK(found, "a mismatch across two processes is not reported:\n%s\n%s", text[0].c_str(), text[1].c_str());
    }
}

struct fault_case {
    const char *name, *env, *value;
    std::vector<const char *> expect;
};
static const fault_case faults[] = {
    {"kernel", "MGT_FAKE_KERNEL_FAULT", "fake_fill",
     {"mgt fake: kernel fake_fill_kernel faults on device 0 (MGT_FAKE_KERNEL_FAULT=fake_fill)",
      "poll: cudaErrorIllegalAddress, last error cudaErrorIllegalAddress then cudaErrorIllegalAddress, copy cudaErrorIllegalAddress"}},
    {"stall", "MGT_FAKE_STALL_RANK", "1",
     {"mgt fake: stalling (MGT_FAKE_STALL_RANK) rank 1's NCCL call 1 inside steps, ncclAllReduce #1 as rank 1 of a 2-rank communicator",
      "rank 1: warm-up done, call NCCL operation in progress, poll cudaSuccess, state NCCL operation in progress",
      "rank 0: warm-up done, call no error, poll cudaErrorNotReady, state no error", "rank 0: after the abort the poll ends",
      "rank 1: after the abort the poll ends"}},
    {"nccl_error", "MGT_FAKE_NCCL_ERROR", "1",
     {"mgt fake: failing (MGT_FAKE_NCCL_ERROR) rank 1's NCCL call 1 inside steps, ncclAllReduce #1",
      "rank 1: mgt fake: rank 1's ncclAllReduce #1 failed asynchronously (MGT_FAKE_NCCL_ERROR)",
      "rank 1: warm-up done, call no error, poll cudaErrorNotReady, state remote process exited or there was a network error",
      "rank 0: warm-up done, call no error, poll cudaErrorNotReady, state no error", "rank 1: after the abort the poll ends"}},
    {"cudnn_old", "MGT_FAKE_CUDNN_VERSION", "90500", {"cuDNN 90500: ", " checks, 0 failed"}},
    {"eager", "NCCL_RUNTIME_CONNECT", "0",
     {"rank 0: eager no error no error done, sums 3 6", "rank 1: eager no error no error done, sums 3 6"}},
};
static void expect_fault(const char *self, const fault_case &f) {
    int fd[2];
    if (pipe(fd) != 0) { perror("pipe"); exit(1); }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        dup2(fd[1], 2);
        close(fd[0]);
        close(fd[1]);
        setenv(f.env, f.value, 1);
        execl(self, self, "--fault", f.name, (char *)nullptr);
        _exit(127);
    }
    close(fd[1]);
    std::string out;
    char buf[4096];
    ssize_t k;
    while ((k = read(fd[0], buf, sizeof buf)) > 0) out.append(buf, (size_t)k);
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    bool all = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    for (const char *e : f.expect) all = all && out.find(e) != std::string::npos;
    CHECK(all, "--fault %s (%s=%s): status %d, output:\n%s", f.name, f.env, f.value, status, out.c_str());
    if (getenv("MGT_FAKE_SHOW")) printf("--fault %s:\n%s", f.name, out.c_str());
}

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "--xp")) { /* a process of test_processes */
        ncclUniqueId id;
        const char *name = argv[2];
        if (!strcmp(name, "hub")) {
            setenv("MGT_FAKE_NCCL_PROCESSES", "1", 1); /* its id is joined from another process */
            CK(ncclGetUniqueId(&id));
            printf("%s\n", id.internal);
            fflush(stdout);
            name = id.internal;
        }
        return xp_ranks(name, strcmp(argv[2], "hub") ? 2 : 0, argc > 3) != 0;
    }
    if (argc == 3 && !strcmp(argv[1], "--fault")) {
        setvbuf(stdout, nullptr, _IONBF, 0);
        load_fake_kernels_everywhere();
        if (!strcmp(argv[2], "kernel")) return fault_kernel();
        if (!strcmp(argv[2], "stall")) return fault_nccl(true);
        if (!strcmp(argv[2], "nccl_error")) return fault_nccl(false);
        if (!strcmp(argv[2], "eager")) return fault_eager();
        if (!strcmp(argv[2], "cudnn_old")) return fault_cudnn_old();
        return 2;
    }
    if (argc == 3 && !strcmp(argv[1], "--die")) {
        for (const death &d : deaths)
            if (!strcmp(d.name, argv[2])) {
                d.run();
                fprintf(stderr, "--die %s: no failure was reported\n", d.name);
                return 1;
            }
        return 2;
    }
    load_fake_kernels_everywhere();
    test_conversions();
    test_streams();
    test_gemm();
    test_lt();
    test_lt_training();
    for (int n = 1; n <= 8; n++) test_nccl(n);
    test_init_rank();
    test_abort();
    test_overlap();
    test_poll();
    test_step_counts();
    test_cudnn();
    for (const death &d : deaths) expect_death(argv[0], d);
    for (const fault_case &f : faults) expect_fault(argv[0], f);
    test_processes(argv[0], false);
    test_processes(argv[0], true);
    printf("%d checks, %d failed\n", checks, failures);
    return failures != 0;
}
