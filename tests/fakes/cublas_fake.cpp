/* cublas_fake.cpp - a checking fake of the cuBLAS GEMMs the CUDA backend uses.

   Compiled against the real cublas_v2.h (extern "C" definitions: a signature change is a compile
   error, an unfaked function a link error). A GEMM is a stream operation on the handle's stream
   (tests/fakes/cudart_fake.cpp): A and B are read, C is written and also read when beta != 0,
   the workspace (cublasSetWorkspace) is written, all checked as device memory of the handle's
   device, inside bounds, and for hazards with other streams.

   WHAT IT COMPUTES: the real column-major C = alpha op(A) op(B) + beta C, honouring transposes,
   leading dimensions, strides and batches, with A/B/C each CUDA_R_32F, CUDA_R_16BF or CUDA_R_16F
   (A and B of one type, as cuBLAS requires), accumulated in fp32 (the products in the order of
   k), alpha and beta host floats (the default pointer mode), and C rounded to its type once. With
   beta == 0, C is not read (NaN there does not propagate), as in cuBLAS. CUBLAS_COMPUTE_32F_FAST_TF32
   (and CUBLAS_TF32_TENSOR_OP_MATH with 32F inputs) rounds fp32 inputs to TF32 first, so a
   tolerance that only holds in fp32 fails here as it would on the GPU.

   CHECKS (abort with "mgt fake <api>: ..."): the argument rules cuBLAS answers with
   CUBLAS_STATUS_INVALID_VALUE (negative sizes, lda/ldb/ldc too small, a batch count below 0),
   a type combination or compute type not listed above, a handle used after cublasDestroy or on a
   device other than its own, device pointer mode (not faked). */
#include "fake_core.h" /* defines: mgtfake::enqueue, mem_use, fail, bf16/half conversions */
#include <cublas_v2.h> /* defines: the declarations faked here */
#include <math.h>      /* defines: fmaf */
#include <stdlib.h>    /* defines: malloc */
#include <set>         /* defines: std::set */

using namespace mgtfake;

struct cublasContext {
    int device;
    cudaStream_t stream;
    void *workspace;
    size_t workspace_bytes;
    cublasMath_t math;
};
static std::set<cublasContext *> &handles = *new std::set<cublasContext *>; /* never freed */

static cublasContext *handle(const char *api, cublasHandle_t h) {
    lock_t lk(mu);
    if (!handles.count(h)) fail(api, "%p is not a live cuBLAS handle (never created, or destroyed)", (void *)h);
    if (h->device != current_device())
        fail(api, "the handle belongs to device %d but the current device is %d", h->device, current_device());
    return h;
}
static size_t type_size(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }
static const char *type_name(cudaDataType t) {
    return t == CUDA_R_32F ? "CUDA_R_32F" : t == CUDA_R_16BF ? "CUDA_R_16BF" : t == CUDA_R_16F ? "CUDA_R_16F" : "an unfaked type";
}
static float load(const void *p, size_t i, cudaDataType t) {
    if (t == CUDA_R_32F) return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return t == CUDA_R_16BF ? bf16_to_float(h) : half_to_float(h);
}
static void store(void *p, size_t i, cudaDataType t, float v) {
    if (t == CUDA_R_32F) ((float *)p)[i] = v;
    else ((uint16_t *)p)[i] = t == CUDA_R_16BF ? float_to_bf16(v) : float_to_half(v);
}
static float tf32(float f) { /* round to 10 mantissa bits, nearest even, as the tensor cores read fp32 */
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
    memcpy(&f, &u, 4);
    return f;
}

struct gemm_args {
    cublasOperation_t ta, tb;
    int m, n, k;
    float alpha, beta;
    const void *A, *B;
    void *C;
    cudaDataType at, bt, ct;
    int lda, ldb, ldc;
    long long sa, sb, sc;
    int batch;
    bool tf32;
};
static void gemm_run(const gemm_args &g) {
    /* op(A) as (m x k) and op(B) as (k x n) in fp32, row-major copies, then C column by column */
    float *a = (float *)malloc(sizeof(float) * ((size_t)g.m * g.k + (size_t)g.k * g.n + 1)), *b = a + (size_t)g.m * g.k;
    if (!a) fail("cublasGemmEx", "out of host memory for a %dx%dx%d GEMM", g.m, g.n, g.k);
    for (int l = 0; l < g.batch; l++) {
        const void *A = (const char *)g.A + (size_t)(g.sa * l) * type_size(g.at);
        const void *B = (const char *)g.B + (size_t)(g.sb * l) * type_size(g.bt);
        void *C = (char *)g.C + (size_t)(g.sc * l) * type_size(g.ct);
        for (int i = 0; i < g.m; i++)
            for (int p = 0; p < g.k; p++) {
                size_t idx = g.ta == CUBLAS_OP_N ? (size_t)p * g.lda + i : (size_t)i * g.lda + p;
                float v = load(A, idx, g.at);
                a[(size_t)i * g.k + p] = g.tf32 ? tf32(v) : v;
            }
        for (int p = 0; p < g.k; p++)
            for (int j = 0; j < g.n; j++) {
                size_t idx = g.tb == CUBLAS_OP_N ? (size_t)j * g.ldb + p : (size_t)p * g.ldb + j;
                float v = load(B, idx, g.bt);
                b[(size_t)p * g.n + j] = g.tf32 ? tf32(v) : v;
            }
        for (int j = 0; j < g.n; j++)
            for (int i = 0; i < g.m; i++) {
                float s = 0.0f;
                for (int p = 0; p < g.k; p++) s = fmaf(a[(size_t)i * g.k + p], b[(size_t)p * g.n + j], s);
                size_t ci = (size_t)j * g.ldc + i;
                float c = g.alpha * s;
                if (g.beta != 0.0f) c = fmaf(g.beta, load(C, ci, g.ct), c);
                store(C, ci, g.ct, c);
            }
    }
    free(a);
}

/* bytes a strided batch of column-major (rows x cols, ld) matrices spans */
static size_t span(int rows, int cols, int ld, long long stride, int batch, cudaDataType t) {
    if (rows == 0 || cols == 0 || batch == 0) return 0;
    return ((size_t)(stride * (batch - 1)) + (size_t)ld * (cols - 1) + rows) * type_size(t);
}
static cublasStatus_t gemm(const char *api, cublasHandle_t hd, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, int k, const void *alpha, const void *A, cudaDataType at, int lda, long long sa,
                           const void *B, cudaDataType bt, int ldb, long long sb, const void *beta, void *C,
                           cudaDataType ct, int ldc, long long sc, int batch, cublasComputeType_t compute) {
    cublasContext *h = handle(api, hd);
    bool okt = (at == CUDA_R_32F || at == CUDA_R_16BF || at == CUDA_R_16F) && bt == at &&
               (ct == at || ct == CUDA_R_32F);
    if (!okt)
        fail(api, "types A %s, B %s, C %s are not faked (A and B of one type, C the same or CUDA_R_32F)",
             type_name(at), type_name(bt), type_name(ct));
    if (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_TF32 && compute != CUBLAS_COMPUTE_32F_PEDANTIC &&
        compute != CUBLAS_COMPUTE_32F_FAST_16BF && compute != CUBLAS_COMPUTE_32F_FAST_16F)
        fail(api, "compute type %d is not faked (only the CUBLAS_COMPUTE_32F family, with float alpha/beta)", (int)compute);
    auto opok = [](cublasOperation_t o) { return o == CUBLAS_OP_N || o == CUBLAS_OP_T; };
    int arows = ta == CUBLAS_OP_N ? m : k, acols = ta == CUBLAS_OP_N ? k : m;
    int brows = tb == CUBLAS_OP_N ? k : n, bcols = tb == CUBLAS_OP_N ? n : k;
    if (!opok(ta) || !opok(tb) || m < 0 || n < 0 || k < 0 || batch < 0 || lda < (arows > 1 ? arows : 1) ||
        ldb < (brows > 1 ? brows : 1) || ldc < (m > 1 ? m : 1))
        fail(api, "invalid arguments (CUBLAS_STATUS_INVALID_VALUE): transa %d transb %d m %d n %d k %d lda %d ldb %d "
             "ldc %d batch %d", (int)ta, (int)tb, m, n, k, lda, ldb, ldc, batch);
    if (!alpha || !beta) fail(api, "alpha or beta is a null pointer");
    if (is_device_memory(alpha, nullptr) || is_device_memory(beta, nullptr))
        fail(api, "alpha/beta point to device memory: device pointer mode is not faked");
    gemm_args g{ta, tb, m, n, k, *(const float *)alpha, *(const float *)beta, A, B, C, at, bt, ct, lda, ldb, ldc,
                sa, sb, sc, batch,
                compute == CUBLAS_COMPUTE_32F_FAST_TF32 ||
                    (at == CUDA_R_32F && compute == CUBLAS_COMPUTE_32F && (h->math & 0xf) == CUBLAS_TF32_TENSOR_OP_MATH)};
    std::string what = strf("%s(%c%c, m %d, n %d, k %d, batch %d)", api, ta == CUBLAS_OP_N ? 'N' : 'T',
                            tb == CUBLAS_OP_N ? 'N' : 'T', m, n, k, batch);
    std::vector<mem_use> acc;
    if (m && n && batch) {
        if (k) {
            acc.push_back({A, span(arows, acols, lda, sa, batch, at), false, "A", false});
            acc.push_back({B, span(brows, bcols, ldb, sb, batch, bt), false, "B", false});
        }
        acc.push_back({C, span(m, n, ldc, sc, batch, ct), true, "C", false});
        if (g.beta != 0.0f) acc.push_back({C, span(m, n, ldc, sc, batch, ct), false, "C", false});
        if (h->workspace && h->workspace_bytes)
            acc.push_back({h->workspace, h->workspace_bytes, true, "the workspace", false});
    }
    enqueue(api, h->stream, h->device, what, acc, [g] {
        if (g.m && g.n && g.batch) gemm_run(g);
    });
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t *out) {
    if (!out) return CUBLAS_STATUS_INVALID_VALUE;
    lock_t lk(mu);
    cublasContext *h = new cublasContext{current_device(), nullptr, nullptr, 0, CUBLAS_DEFAULT_MATH};
    handles.insert(h);
    *out = h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
    handle("cublasDestroy", h);
    lock_t lk(mu);
    handles.erase(h);
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t hd, cudaStream_t s) {
    cublasContext *h = handle("cublasSetStream", hd);
    if (stream_device("cublasSetStream", s) != h->device)
        fail("cublasSetStream", "the stream belongs to device %d, the handle to device %d", stream_device("cublasSetStream", s),
             h->device);
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetStream_v2(cublasHandle_t hd, cudaStream_t *s) {
    if (!s) return CUBLAS_STATUS_INVALID_VALUE;
    *s = handle("cublasGetStream", hd)->stream;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t hd, void *workspace, size_t bytes) {
    cublasContext *h = handle("cublasSetWorkspace", hd);
    int dev = -2;
    if (workspace && (!is_device_memory(workspace, &dev) || dev != h->device))
        fail("cublasSetWorkspace", "%p is not device memory of the handle's device %d", workspace, h->device);
    h->workspace = workspace;
    h->workspace_bytes = workspace ? bytes : 0;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t hd, cublasMath_t mode) {
    handle("cublasSetMathMode", hd)->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetMathMode(cublasHandle_t hd, cublasMath_t *mode) {
    if (!mode) return CUBLAS_STATUS_INVALID_VALUE;
    *mode = handle("cublasGetMathMode", hd)->math;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType at, int lda, const void *B, cudaDataType bt,
                            int ldb, const void *beta, void *C, cudaDataType ct, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t) {
    return gemm("cublasGemmEx", h, ta, tb, m, n, k, alpha, A, at, lda, 0, B, bt, ldb, 0, beta, C, ct, ldc, 0, 1, compute);
}
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                          int k, const void *alpha, const void *A, cudaDataType at, int lda,
                                          long long sa, const void *B, cudaDataType bt, int ldb, long long sb,
                                          const void *beta, void *C, cudaDataType ct, int ldc, long long sc, int batch,
                                          cublasComputeType_t compute, cublasGemmAlgo_t) {
    return gemm("cublasGemmStridedBatchedEx", h, ta, tb, m, n, k, alpha, A, at, lda, sa, B, bt, ldb, sb, beta, C, ct,
                ldc, sc, batch, compute);
}
cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                              float *C, int ldc) {
    return gemm("cublasSgemm", h, ta, tb, m, n, k, alpha, A, CUDA_R_32F, lda, 0, B, CUDA_R_32F, ldb, 0, beta, C,
                CUDA_R_32F, ldc, 0, 1, CUBLAS_COMPUTE_32F);
}
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float *alpha, const float *A, int lda, long long sa,
                                         const float *B, int ldb, long long sb, const float *beta, float *C, int ldc,
                                         long long sc, int batch) {
    return gemm("cublasSgemmStridedBatched", h, ta, tb, m, n, k, alpha, A, CUDA_R_32F, lda, sa, B, CUDA_R_32F, ldb, sb,
                beta, C, CUDA_R_32F, ldc, sc, batch, CUBLAS_COMPUTE_32F);
}
const char *cublasGetStatusString(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
    case CUBLAS_STATUS_INVALID_VALUE: return "an unsupported value or parameter was passed to the function";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    default: return "a cuBLAS status the fake does not produce";
    }
}

} /* extern "C" */
