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

   cuBLASLt: cublasLtMatmul with column-major layouts (batch count, strided batch offset), D
   apart from C (same type), TRANSA/TRANSB, epilogues DEFAULT, BIAS, RELU, RELU_BIAS, GELU (tanh
   form), GELU_BIAS (a bias of D's type unless BIAS_DATA_TYPE says otherwise, BIAS_BATCH_STRIDE),
   and the training ones mgt uses (one matrix, no batch): GELU_AUX and GELU_AUX_BIAS (the GELU's
   input, after the bias, written to the EPILOGUE_AUX_POINTER matrix in D's type, D its GELU), DGELU
   (D = (alpha op(A) op(B) + beta C) * gelu'(aux), aux read) and BGRADB (the bias pointer gets the
   sums of op(B) over k, one per column of D, in D's type: cublasLt.h's "same type as the output
   elements"); the workspace argument written; the heuristic returns one
   algorithm, which needs the preference's CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES of workspace up
   to 1 MiB (as real ones want some: a caller that passes less than the heuristic's workspaceSize,
   or no workspace, fails). The algorithm assumes the preference's CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{A,B,C,D}_BYTES
   (256 each unless set, as cublasLt.h documents) of the matrix pointers, and 16 bytes of the bias and aux
   pointers. MGT_FAKE_LT_NO_ALGO=1 makes the heuristic answer every epilogue but DEFAULT (BIAS and the
   training ones) with no algorithm (CUBLAS_STATUS_NOT_SUPPORTED, count 0), as a cuBLASLt without them
   would, so the backend's fallback to separate kernels runs. Other epilogues (DGELU_BGRAD, BGRADA, the ReLU masks)
   and attributes abort as not faked.

   CHECKS (abort with "mgt fake <api>: ..."): the argument rules cuBLAS answers with
   CUBLAS_STATUS_INVALID_VALUE (negative sizes, lda/ldb/ldc too small, a batch count below 0),
   a type combination or compute type not listed above, an aux epilogue without the aux pointer or
   with an EPILOGUE_AUX_LD that is not a multiple of 8 or is below D's rows (cublasLt.h's rule), a
   bias epilogue without the bias pointer, a bias gradient of another type than D's, a matrix pointer
   less aligned than the algorithm's MIN_ALIGNMENT preferences promised, a bias or aux pointer under 16
   bytes aligned (a GPU faults with "misaligned address"),
   a handle used after cublasDestroy or on a
   device other than its own, device pointer mode (not faked); inside a step of the handle's device
   (kernels/fake_note.h), a GEMM on a handle without cublasSetWorkspace (cuBLAS would allocate its
   workspace lazily) and making a handle. */
#include "fake_core.h" /* defines: mgtfake::enqueue, mem_use, fail, bf16/half conversions */
#include <cublasLt.h>  /* defines: the cuBLASLt declarations faked here */
#include <cublas_v2.h> /* defines: the declarations faked here */
#include <math.h>      /* defines: fmaf */
#include <stdlib.h>    /* defines: malloc, getenv, atoi */
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

static cublasContext *handle(const char *api, cublasHandle_t h, bool any_device = false) {
    lock_t lk(mu);
    if (!handles.count(h)) fail(api, "%p is not a live cuBLAS handle (never created, or destroyed)", (void *)h);
    if (!any_device && h->device != current_device())
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
    /* cuBLASLt: C read from its own layout (the classic API: Cin == C), bias and activation */
    const void *Cin;
    cudaDataType cit;
    int ldcin;
    long long scin;
    const void *bias;
    cudaDataType biast;
    long long sbias;
    bool relu, gelu;
    /* cuBLASLt's training epilogues: aux (ld auxld, D's type) written with the GELU's input
       (gelu_aux) or read for gelu' (dgelu); bgrad (n, D's type) written with op(B)'s sums over k */
    void *aux;
    long long auxld;
    bool gelu_aux, dgelu;
    void *bgrad;
};
static float gelu_grad(float x) { /* d/dx of the tanh form, in fp32 */
    float u = 0.7978845608f * (x + 0.044715f * x * x * x), th = tanhf(u);
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * 0.7978845608f * (1.0f + 3.0f * 0.044715f * x * x);
}
static void gemm_run(const gemm_args &g) {
    /* op(A) as (m x k) and op(B) as (k x n) in fp32, row-major copies, then C column by column */
    float *a = (float *)malloc(sizeof(float) * ((size_t)g.m * g.k + (size_t)g.k * g.n + 1)), *b = a + (size_t)g.m * g.k;
    if (!a) fail("cublasGemmEx", "out of host memory for a %dx%dx%d GEMM", g.m, g.n, g.k);
    for (int l = 0; l < g.batch; l++) {
        const void *A = (const char *)g.A + (size_t)(g.sa * l) * type_size(g.at);
        const void *B = (const char *)g.B + (size_t)(g.sb * l) * type_size(g.bt);
        void *C = (char *)g.C + (size_t)(g.sc * l) * type_size(g.ct);
        const void *Cin = (const char *)g.Cin + (size_t)(g.scin * l) * type_size(g.cit);
        const void *bias = g.bias ? (const char *)g.bias + (size_t)(g.sbias * l) * type_size(g.biast) : nullptr;
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
                float c = g.alpha * s;
                if (g.beta != 0.0f) c = fmaf(g.beta, load(Cin, (size_t)j * g.ldcin + i, g.cit), c);
                if (bias) c += load(bias, (size_t)i, g.biast);
                if (g.gelu_aux) store(g.aux, (size_t)j * (size_t)g.auxld + i, g.ct, c);
                if (g.dgelu) c *= gelu_grad(load(g.aux, (size_t)j * (size_t)g.auxld + i, g.ct));
                if (g.relu) c = c > 0.0f ? c : 0.0f;
                if (g.gelu) c = 0.5f * c * (1.0f + tanhf(0.7978845608f * (c + 0.044715f * c * c * c))); /* tanh form, as cuBLASLt */
                store(C, (size_t)j * g.ldc + i, g.ct, c);
            }
        if (g.bgrad)
            for (int j = 0; j < g.n; j++) { /* the bias gradient: op(B)'s column j summed over k, in k order */
                float sum = 0.0f;
                for (int p = 0; p < g.k; p++) sum += b[(size_t)p * g.n + j];
                store(g.bgrad, (size_t)j, g.ct, sum);
            }
    }
    free(a);
}

/* bytes a strided batch of column-major (rows x cols, ld) matrices spans */
static size_t span(int rows, int cols, int ld, long long stride, int batch, cudaDataType t) {
    if (rows == 0 || cols == 0 || batch == 0) return 0;
    return ((size_t)(stride * (batch - 1)) + (size_t)ld * (cols - 1) + rows) * type_size(t);
}
static bool compute_ok(cublasComputeType_t c) {
    return c == CUBLAS_COMPUTE_32F || c == CUBLAS_COMPUTE_32F_FAST_TF32 || c == CUBLAS_COMPUTE_32F_PEDANTIC ||
           c == CUBLAS_COMPUTE_32F_FAST_16BF || c == CUBLAS_COMPUTE_32F_FAST_16F;
}
/* check g (alpha and beta already read) and queue it on `stream` of `device` */
static void submit(const char *api, int device, cudaStream_t stream, const gemm_args &g, void *workspace,
                   size_t workspace_bytes) {
    bool okt = (g.at == CUDA_R_32F || g.at == CUDA_R_16BF || g.at == CUDA_R_16F) && g.bt == g.at &&
               (g.ct == g.at || g.ct == CUDA_R_32F) && g.cit == g.ct;
    if (!okt)
        fail(api, "types A %s, B %s, C %s, D %s are not faked (A and B of one type, C = D the same or CUDA_R_32F)",
             type_name(g.at), type_name(g.bt), type_name(g.cit), type_name(g.ct));
    auto opok = [](cublasOperation_t o) { return o == CUBLAS_OP_N || o == CUBLAS_OP_T; };
    int m = g.m, n = g.n, k = g.k;
    int arows = g.ta == CUBLAS_OP_N ? m : k, acols = g.ta == CUBLAS_OP_N ? k : m;
    int brows = g.tb == CUBLAS_OP_N ? k : n, bcols = g.tb == CUBLAS_OP_N ? n : k;
    if (!opok(g.ta) || !opok(g.tb) || m < 0 || n < 0 || k < 0 || g.batch < 0 || g.lda < (arows > 1 ? arows : 1) ||
        g.ldb < (brows > 1 ? brows : 1) || g.ldc < (m > 1 ? m : 1) || g.ldcin < (m > 1 ? m : 1))
        fail(api, "invalid arguments (CUBLAS_STATUS_INVALID_VALUE): transa %d transb %d m %d n %d k %d lda %d ldb %d "
             "ldc %d batch %d", (int)g.ta, (int)g.tb, m, n, k, g.lda, g.ldb, g.ldc, g.batch);
    std::string what = strf("%s(%c%c, m %d, n %d, k %d, batch %d)", api, g.ta == CUBLAS_OP_N ? 'N' : 'T',
                            g.tb == CUBLAS_OP_N ? 'N' : 'T', m, n, k, g.batch);
    {
        /* the kernel cuBLAS picks depends on the operation, types, epilogue, beta and shape: a new
           combination may need a kernel not loaded yet */
        lock_t lk(mu);
        load_library_kernel(api, device,
                            strf("%s %d%d %d %d %d %d %d %d %d %d tf32 %d beta %d bias %d relu %d gelu %d aux %d dgelu %d bgrad %d", api, (int)g.ta,
                                 (int)g.tb, m, n, k, g.batch, (int)g.at, (int)g.bt, (int)g.ct, (int)g.cit, (int)g.tf32, g.beta != 0.0f,
                                 g.bias != nullptr, (int)g.relu, (int)g.gelu, (int)g.gelu_aux, (int)g.dgelu, g.bgrad != nullptr),
                            what);
    }
    std::vector<mem_use> acc;
    if (m && n && g.batch) {
        if (k) {
            acc.push_back({g.A, span(arows, acols, g.lda, g.sa, g.batch, g.at), false, "A", false});
            acc.push_back({g.B, span(brows, bcols, g.ldb, g.sb, g.batch, g.bt), false, "B", false});
        }
        if (g.beta != 0.0f) acc.push_back({g.Cin, span(m, n, g.ldcin, g.scin, g.batch, g.cit), false, "C", false});
        acc.push_back({g.C, span(m, n, g.ldc, g.sc, g.batch, g.ct), true, g.Cin == g.C ? "C" : "D", false});
        if (g.bias) acc.push_back({g.bias, span(m, 1, m, g.sbias, g.batch, g.biast), false, "the bias", false});
        if (g.aux) acc.push_back({g.aux, span(m, n, (int)g.auxld, 0, 1, g.ct), g.gelu_aux, "the epilogue's aux matrix", false});
        if (g.bgrad) acc.push_back({g.bgrad, (size_t)n * type_size(g.ct), true, "the bias gradient", false});
        if (workspace && workspace_bytes) acc.push_back({workspace, workspace_bytes, true, "the workspace", false});
    }
    enqueue(api, stream, device, what, acc, [g] {
        if (g.m && g.n && g.batch) gemm_run(g);
    });
}
static float host_scalar(const char *api, const void *p, const char *name) {
    if (!p) fail(api, "%s is a null pointer", name);
    if (is_device_memory(p, nullptr)) fail(api, "%s points to device memory: device pointer mode is not faked", name);
    return *(const float *)p;
}
static cublasStatus_t gemm(const char *api, cublasHandle_t hd, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, int k, const void *alpha, const void *A, cudaDataType at, int lda, long long sa,
                           const void *B, cudaDataType bt, int ldb, long long sb, const void *beta, void *C,
                           cudaDataType ct, int ldc, long long sc, int batch, cublasComputeType_t compute) {
    cublasContext *h = handle(api, hd);
    {
        lock_t lk(mu);
        if (!h->workspace)
            step_check(api, h->device, strf("%s on a handle without a workspace", api),
                       "cuBLAS then allocates its workspace on first use, which may synchronise the device: give every handle one "
                       "with cublasSetWorkspace when the run is created");
    }
    if (!compute_ok(compute))
        fail(api, "compute type %d is not faked (only the CUBLAS_COMPUTE_32F family, with float alpha/beta)", (int)compute);
    gemm_args g{ta, tb, m, n, k, host_scalar(api, alpha, "alpha"), host_scalar(api, beta, "beta"), A, B, C, at, bt, ct,
                lda, ldb, ldc, sa, sb, sc, batch,
                compute == CUBLAS_COMPUTE_32F_FAST_TF32 ||
                    (at == CUDA_R_32F && compute == CUBLAS_COMPUTE_32F && (h->math & 0xf) == CUBLAS_TF32_TENSOR_OP_MATH),
                C, ct, ldc, sc, nullptr, ct, 0, false, false, nullptr, 0, false, false, nullptr};
    submit(api, h->device, h->stream, g, h->workspace, h->workspace_bytes);
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- cuBLASLt: descriptors live inside the header's opaque structs, marked by a magic number ---- */
static const uint64_t LT_MAGIC = 0x6d6774666b4c7431ull; /* "mgtfkLt1" */
struct lt_layout {
    uint64_t magic;
    cudaDataType type;
    int32_t order, batch;
    uint64_t rows, cols;
    int64_t ld, stride;
};
struct lt_desc {
    uint64_t magic;
    cublasComputeType_t compute;
    cudaDataType scale, bias_type;
    int32_t pointer_mode, ta, tb, bias_type_set;
    uint32_t epilogue;
    const void *bias;
    int64_t bias_stride;
    void *aux;
    int64_t aux_ld;
};
struct lt_pref {
    uint64_t magic, max_workspace;
    uint32_t min_align[4]; /* CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{A,B,C,D}_BYTES */
};
static const char *const lt_matrix[4] = {"A", "B", "C", "D"};
/* cublasLt.h: "uint32_t, default: 256" for each MIN_ALIGNMENT preference. An algorithm the heuristic
   picks may assume that much of every matrix pointer; a less aligned one faults ("misaligned
   address") on a GPU */
static const uint32_t LT_DEFAULT_ALIGN = 256;
/* the bias and aux pointers have no preference: PyTorch #194497 found the heuristic picking kernels
   that load the epilogue's bias in 16-byte vectors (a misaligned bias faulted), and cublasLt.h's
   EPILOGUE_AUX_LD rule (a multiple of 8 elements) keeps each aux column 16-byte aligned for 16-bit
   types, so the fake requires 16 bytes of both */
static const uint32_t LT_VECTOR_ALIGN = 16;
static uint32_t alignment_of(const void *p) { /* the largest power of two dividing the address, at most 256 */
    uintptr_t a = (uintptr_t)p;
    return a == 0 || (a & -a) >= LT_DEFAULT_ALIGN ? LT_DEFAULT_ALIGN : (uint32_t)(a & -a);
}
static const uint64_t LT_ALGO_WORKSPACE_CAP = 1 << 20; /* what the fake's algorithm asks for at most */
static_assert(sizeof(lt_layout) <= sizeof(cublasLtMatrixLayoutOpaque_t), "lt_layout fits the opaque layout");
static_assert(sizeof(lt_desc) <= sizeof(cublasLtMatmulDescOpaque_t), "lt_desc fits the opaque descriptor");
static_assert(sizeof(lt_pref) <= sizeof(cublasLtMatmulPreferenceOpaque_t), "lt_pref fits the opaque preference");
struct cublasLtContext {
    int device;
};
static std::set<cublasLtContext *> &lt_handles = *new std::set<cublasLtContext *>; /* never freed */

template <class T, class O> static T *lt_get(const char *api, O *o, const char *what) {
    if (!o || ((T *)o->data)->magic != LT_MAGIC) fail(api, "%s %p was never created or was destroyed", what, (void *)o);
    return (T *)o->data;
}
/* an attribute value of 4 or 8 bytes, as the header documents each one */
static int64_t attr_int(const char *api, int attr, const void *buf, size_t bytes) {
    if (!buf) fail(api, "attribute %d: null buffer", attr);
    if (bytes == 4) { int32_t v; memcpy(&v, buf, 4); return v; }
    if (bytes == 8) { int64_t v; memcpy(&v, buf, 8); return v; }
    fail(api, "attribute %d: %zu bytes (4 or 8 expected)", attr, bytes);
}

/* what the algorithm assumes of the pointers (a NULL algo: cuBLASLt's own query, which sees them) */
static void lt_check_alignment(int device, const cublasLtMatmulAlgo_t *algo, const void *A, const void *B, const void *C, const void *D,
                               const void *bias, const void *aux) {
    const char *api = "cublasLtMatmul";
    std::string op;
    {
        lock_t lk(mu);
        op = step_op(device);
    }
    const void *mat[4] = {A, B, C, D};
    for (int i = 0; algo && algo->data[0] == LT_MAGIC && i < 4; i++)
        if (alignment_of(mat[i]) < algo->data[2 + i])
            fail(api, "%s at %p is %u-byte aligned, but the algorithm was chosen for a %llu-byte aligned %s "
                 "(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_%s_BYTES, 256 unless set): a GPU fails or faults with \"misaligned address\"; "
                 "set the preference from the pointer's alignment (device %d, during %s)",
                 lt_matrix[i], mat[i], alignment_of(mat[i]), (unsigned long long)algo->data[2 + i], lt_matrix[i], lt_matrix[i], device, op.c_str());
    const void *vec[2] = {bias, aux};
    static const char *const vec_name[2] = {"bias (CUBLASLT_MATMUL_DESC_BIAS_POINTER)", "aux matrix (CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER)"};
    for (int i = 0; i < 2; i++)
        if (vec[i] && alignment_of(vec[i]) < LT_VECTOR_ALIGN)
            fail(api, "the epilogue's %s at %p is %u-byte aligned, under the %u bytes its kernels may assume (no preference covers it): "
                 "a GPU faults with \"misaligned address\"; run the GEMM without the epilogue and the op apart (device %d, during %s)",
                 vec_name[i], vec[i], alignment_of(vec[i]), LT_VECTOR_ALIGN, device, op.c_str());
}

extern "C" {

/* the version of the headers the fake was built against, as the real library reports its own */
cublasStatus_t cublasGetProperty(libraryPropertyType type, int *value) {
    if (!value) return CUBLAS_STATUS_INVALID_VALUE;
    *value = type == MAJOR_VERSION ? CUBLAS_VER_MAJOR : type == MINOR_VERSION ? CUBLAS_VER_MINOR : CUBLAS_VER_PATCH;
    return CUBLAS_STATUS_SUCCESS;
}
size_t cublasLtGetVersion(void) { return CUBLAS_VERSION; } /* cuBLASLt ships with cuBLAS and reports its version */
cublasStatus_t cublasCreate_v2(cublasHandle_t *out) {
    if (!out) return CUBLAS_STATUS_INVALID_VALUE;
    lock_t lk(mu);
    step_check("cublasCreate", current_device(), "making a cuBLAS handle", "handles are made when the run is created");
    cublasContext *h = new cublasContext{current_device(), nullptr, nullptr, 0, CUBLAS_DEFAULT_MATH};
    handles.insert(h);
    *out = h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
    handle("cublasDestroy", h, true); /* teardown may run on any thread */
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
cublasStatus_t cublasLtCreate(cublasLtHandle_t *out) {
    if (!out) return CUBLAS_STATUS_INVALID_VALUE;
    lock_t lk(mu);
    cublasLtContext *h = new cublasLtContext{current_device()};
    lt_handles.insert(h);
    *out = h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
    destroy_handle(lt_handles, h, "cublasLtDestroy", "cuBLASLt");
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *out, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
    if (!out) return CUBLAS_STATUS_INVALID_VALUE;
    cublasLtMatrixLayoutOpaque_t *o = new cublasLtMatrixLayoutOpaque_t();
    lt_layout l{LT_MAGIC, type, CUBLASLT_ORDER_COL, 1, rows, cols, ld, 0};
    memcpy(o->data, &l, sizeof l);
    *out = o;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t o) {
    lt_get<lt_layout>("cublasLtMatrixLayoutDestroy", o, "matrix layout")->magic = 0;
    delete o;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t o, cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t bytes) {
    const char *api = "cublasLtMatrixLayoutSetAttribute";
    lt_layout *l = lt_get<lt_layout>(api, o, "matrix layout");
    int64_t v = attr_int(api, attr, buf, bytes);
    switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: l->type = (cudaDataType)v; break;
    case CUBLASLT_MATRIX_LAYOUT_ORDER: l->order = (int32_t)v; break;
    case CUBLASLT_MATRIX_LAYOUT_ROWS: l->rows = (uint64_t)v; break;
    case CUBLASLT_MATRIX_LAYOUT_COLS: l->cols = (uint64_t)v; break;
    case CUBLASLT_MATRIX_LAYOUT_LD: l->ld = v; break;
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: l->batch = (int32_t)v; break;
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: l->stride = v; break;
    default: fail(api, "layout attribute %d is not faked", (int)attr);
    }
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *out, cublasComputeType_t compute, cudaDataType_t scale) {
    if (!out) return CUBLAS_STATUS_INVALID_VALUE;
    cublasLtMatmulDescOpaque_t *o = new cublasLtMatmulDescOpaque_t();
    lt_desc d{LT_MAGIC, compute, scale, CUDA_R_32F, CUBLASLT_POINTER_MODE_HOST, CUBLAS_OP_N, CUBLAS_OP_N, 0,
              CUBLASLT_EPILOGUE_DEFAULT, nullptr, 0, nullptr, 0};
    memcpy(o->data, &d, sizeof d);
    *out = o;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t o) {
    lt_get<lt_desc>("cublasLtMatmulDescDestroy", o, "matmul descriptor")->magic = 0;
    delete o;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t o, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t bytes) {
    const char *api = "cublasLtMatmulDescSetAttribute";
    lt_desc *d = lt_get<lt_desc>(api, o, "matmul descriptor");
    if (attr == CUBLASLT_MATMUL_DESC_BIAS_POINTER || attr == CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER) {
        if (!buf || bytes != sizeof(void *)) fail(api, "a pointer attribute takes %zu bytes", sizeof(void *));
        memcpy(attr == CUBLASLT_MATMUL_DESC_BIAS_POINTER ? (void *)&d->bias : (void *)&d->aux, buf, sizeof(void *));
        return CUBLAS_STATUS_SUCCESS;
    }
    int64_t v = attr_int(api, attr, buf, bytes);
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: d->compute = (cublasComputeType_t)v; break;
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: d->scale = (cudaDataType)v; break;
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: d->pointer_mode = (int32_t)v; break;
    case CUBLASLT_MATMUL_DESC_TRANSA: d->ta = (int32_t)v; break;
    case CUBLASLT_MATMUL_DESC_TRANSB: d->tb = (int32_t)v; break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: d->epilogue = (uint32_t)v; break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: d->bias_type = (cudaDataType)v, d->bias_type_set = 1; break;
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: d->bias_stride = v; break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: d->aux_ld = v; break;
    default: fail(api, "matmul attribute %d is not faked (epilogue auxiliary buffers, scaling factors, ...)", (int)attr);
    }
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *out) {
    if (!out) return CUBLAS_STATUS_INVALID_VALUE;
    *out = new cublasLtMatmulPreferenceOpaque_t();
    lt_pref p{LT_MAGIC, 0, {LT_DEFAULT_ALIGN, LT_DEFAULT_ALIGN, LT_DEFAULT_ALIGN, LT_DEFAULT_ALIGN}}; /* cuBLASLt's defaults: no workspace */
    memcpy((*out)->data, &p, sizeof p);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t o) {
    lt_get<lt_pref>("cublasLtMatmulPreferenceDestroy", o, "matmul preference")->magic = 0;
    delete o;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t o, cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t bytes) {
    const char *api = "cublasLtMatmulPreferenceSetAttribute";
    lt_pref *p = lt_get<lt_pref>(api, o, "matmul preference");
    if (!buf) return CUBLAS_STATUS_INVALID_VALUE;
    if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) {
        if (bytes != 8) fail(api, "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES takes a uint64_t, not %zu bytes", bytes);
        memcpy(&p->max_workspace, buf, 8);
    } else if (attr >= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES && attr <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES) {
        int i = attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES;
        if (bytes != 4) fail(api, "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_%s_BYTES takes a uint32_t, not %zu bytes", lt_matrix[i], bytes);
        memcpy(&p->min_align[i], buf, 4);
    }
    return CUBLAS_STATUS_SUCCESS; /* other preferences do not change the fake's one algorithm */
}
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t dd, cublasLtMatmulPreference_t p, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int *count) {
    const char *api = "cublasLtMatmulAlgoGetHeuristic";
    const char *env = getenv("MGT_FAKE_LT_NO_ALGO"); /* read per call: a test turns it on for one run */
    bool no_algo = env && atoi(env);
    uint32_t e = lt_get<lt_desc>(api, d, "matmul descriptor")->epilogue;
    lt_get<lt_layout>(api, a, "layout A");
    lt_get<lt_layout>(api, b, "layout B");
    lt_get<lt_layout>(api, c, "layout C");
    lt_get<lt_layout>(api, dd, "layout D");
    lt_pref *pref = lt_get<lt_pref>(api, p, "matmul preference");
    if (requested < 1 || !results || !count) return CUBLAS_STATUS_INVALID_VALUE;
    if (no_algo && e != CUBLASLT_EPILOGUE_DEFAULT) {
        *count = 0;
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    memset(&results[0], 0, sizeof results[0]);
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    results[0].workspaceSize = pref->max_workspace < LT_ALGO_WORKSPACE_CAP ? pref->max_workspace : LT_ALGO_WORKSPACE_CAP;
    results[0].algo.data[0] = LT_MAGIC; /* the algorithm carries what it needs: its workspace, the alignments it assumes */
    results[0].algo.data[1] = results[0].workspaceSize;
    for (int i = 0; i < 4; i++) results[0].algo.data[2 + i] = pref->min_align[i];
    *count = 1;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t ad, const void *B, cublasLtMatrixLayout_t bd, const void *beta,
                              const void *C, cublasLtMatrixLayout_t cd, void *D, cublasLtMatrixLayout_t dd,
                              const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspace_bytes,
                              cudaStream_t stream) {
    const char *api = "cublasLtMatmul";
    if (algo && algo->data[0] == LT_MAGIC && (workspace_bytes < algo->data[1] || (algo->data[1] && !workspace)))
        fail(api, "the algorithm needs %llu bytes of workspace, the call passes %zu at %p (give it the workspace the heuristic's "
             "workspaceSize says, reserved when the run is made)", (unsigned long long)algo->data[1], workspace_bytes, workspace);
    int device;
    {
        lock_t lk(mu);
        if (!lt_handles.count(h)) fail(api, "%p is not a live cuBLASLt handle", (void *)h);
        device = h->device;
    }
    lt_desc *d = lt_get<lt_desc>(api, desc, "matmul descriptor");
    lt_layout *la = lt_get<lt_layout>(api, ad, "layout A"), *lb = lt_get<lt_layout>(api, bd, "layout B");
    lt_layout *lc = lt_get<lt_layout>(api, cd, "layout C"), *ld = lt_get<lt_layout>(api, dd, "layout D");
    if (!compute_ok(d->compute) || d->scale != CUDA_R_32F || d->pointer_mode != CUBLASLT_POINTER_MODE_HOST)
        fail(api, "compute type %d, scale type %d, pointer mode %d: only the CUBLAS_COMPUTE_32F family with host float "
             "alpha/beta is faked", (int)d->compute, (int)d->scale, (int)d->pointer_mode);
    uint32_t e = d->epilogue;
    bool gelu_aux = e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS, dgelu = e == CUBLASLT_EPILOGUE_DGELU,
         bgradb = e == CUBLASLT_EPILOGUE_BGRADB;
    if (e != CUBLASLT_EPILOGUE_DEFAULT && e != CUBLASLT_EPILOGUE_BIAS && e != CUBLASLT_EPILOGUE_RELU &&
        e != CUBLASLT_EPILOGUE_RELU_BIAS && e != CUBLASLT_EPILOGUE_GELU && e != CUBLASLT_EPILOGUE_GELU_BIAS && !gelu_aux && !dgelu && !bgradb)
        fail(api, "epilogue %u is not faked (DEFAULT, BIAS, RELU, RELU_BIAS, GELU, GELU_BIAS, GELU_AUX, GELU_AUX_BIAS, DGELU, BGRADB are)", e);
    for (lt_layout *l : {la, lb, lc, ld})
        if (l->order != CUBLASLT_ORDER_COL) fail(api, "a matrix order other than CUBLASLT_ORDER_COL is not faked");
    int m = (int)ld->rows, n = (int)ld->cols, k = d->ta == CUBLAS_OP_N ? (int)la->cols : (int)la->rows;
    int brows = d->tb == CUBLAS_OP_N ? k : n, bcols = d->tb == CUBLAS_OP_N ? n : k;
    if ((int)lc->rows != m || (int)lc->cols != n || (int)(d->ta == CUBLAS_OP_N ? la->rows : la->cols) != m ||
        (int)lb->rows != brows || (int)lb->cols != bcols)
        fail(api, "shapes do not agree: A %llux%llu (op %d), B %llux%llu (op %d), C %llux%llu, D %dx%d",
             (unsigned long long)la->rows, (unsigned long long)la->cols, d->ta, (unsigned long long)lb->rows,
             (unsigned long long)lb->cols, d->tb, (unsigned long long)lc->rows, (unsigned long long)lc->cols, m, n);
    if (la->batch != ld->batch || lb->batch != ld->batch || lc->batch != ld->batch)
        fail(api, "batch counts differ: A %d, B %d, C %d, D %d", la->batch, lb->batch, lc->batch, ld->batch);
    bool has_bias = (e & CUBLASLT_EPILOGUE_BIAS) && !dgelu && !bgradb;
    if ((has_bias || bgradb) && !d->bias) fail(api, "epilogue %u without CUBLASLT_MATMUL_DESC_BIAS_POINTER", e);
    if (gelu_aux || dgelu) { /* cublasLt.h: the GELU input matrix's ld is a multiple of 8, no less than D's rows */
        if (!d->aux) fail(api, "epilogue %u without CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER", e);
        if (d->aux_ld % 8 != 0 || d->aux_ld < m)
            fail(api, "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD %lld: must be divisible by 8 and no less than D's %d rows (CUBLAS_STATUS_INVALID_VALUE)",
                 (long long)d->aux_ld, m);
    }
    if ((gelu_aux || dgelu || bgradb) && ld->batch != 1) fail(api, "epilogue %u over a batch of %d is not faked", e, ld->batch);
    lt_check_alignment(device, algo, A, B, C, D, has_bias || bgradb ? d->bias : nullptr, gelu_aux || dgelu ? d->aux : nullptr);
    if (bgradb && d->bias_type_set && d->bias_type != ld->type)
        fail(api, "a bias gradient of type %s for D of type %s: the gradient is D's type", type_name(d->bias_type), type_name(ld->type));
    gemm_args g{(cublasOperation_t)d->ta, (cublasOperation_t)d->tb, m, n, k, host_scalar(api, alpha, "alpha"),
                host_scalar(api, beta, "beta"), A, B, D, la->type, lb->type, ld->type, (int)la->ld, (int)lb->ld,
                (int)ld->ld, la->stride, lb->stride, ld->stride, ld->batch, d->compute == CUBLAS_COMPUTE_32F_FAST_TF32,
                C, lc->type, (int)lc->ld, lc->stride, has_bias ? d->bias : nullptr,
                d->bias_type_set ? d->bias_type : ld->type, d->bias_stride,
                (e & CUBLASLT_EPILOGUE_RELU) != 0 && !dgelu && !bgradb, (e & CUBLASLT_EPILOGUE_GELU) != 0 && !dgelu && !bgradb,
                gelu_aux || dgelu ? d->aux : nullptr, d->aux_ld, gelu_aux, dgelu, bgradb ? (void *)d->bias : nullptr};
    submit(api, device, stream, g, workspace, workspace_bytes);
    return CUBLAS_STATUS_SUCCESS;
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
