/* kernels/backend_cuda.cu: the mgt_backend table on one GPU (host code only: the kernels are in
   kernels/<op>.cu, the GEMMs in cuBLAS).

   Every op is enqueued on the backend's stream and returns at once; the runtime sees the results
   in stream order, the communicator (kernels/comm_nccl.c) orders itself after this stream with
   events (the backend knows nothing of it: both meet in the watchdog, kernels/watchdog.h). The table's ops return nothing, so the first failure (a launch, a cuBLAS call, a wait
   that failed) is kept, like CUDA's sticky errors, and the table's error() reports it; ops after a
   failure do nothing.

   A step does nothing for the first time (issue 13: a GPU step must not hang). reserve(), called
   when the run is created, makes everything a step uses, sized from the largest operands: the
   scratch of the op that needs most (attention backward's row sums, the bias and LayerNorm partial
   sums, the embedding backward's sort, the chunks of the multi-tensor sum of squares), the cuBLAS
   workspace (cublasSetWorkspace: cuBLAS would otherwise allocate it on its first GEMM; cuBLASLt is
   handed it), and the
   pinned host memory that crosses PCIe: a ring of slots for the token uploads (at least two, as
   many as a step uploads, so no upload waits) and a buffer for the step's downloads. Between
   step(be, 1) and step(be, 0) nothing is allocated or freed, no copy touches pageable memory, and
   the only host waits are on events of this stream: the download of the step's statistics and
   the step's end, each through the world's watchdog (mgt_watchdog_wait: the [parallel] timeout_s
   deadline, NCCL's asynchronous errors, the world's abort). Outside steps (creation, checkpoints,
   sampling) uploads and downloads may use any host memory and still wait with the deadline.

   MGT_CUDA_SYNC=1 waits for every op before the next starts, so the first failing op is named with
   its shapes and the launch sites of its kernels (kernels/<op>.cu:line), instead of surfacing at
   the next wait under whatever waited.

   GEMMs: cublasGemmEx with the storage type for A and B, fp32 accumulation (CUBLAS_COMPUTE_32F),
   and C in the storage type, or in fp32 for the parameter gradients (accumulated with beta = 1, as
   Megatron's main_grad). Row-major (rows, cols) tensors are column-major (cols x rows) to cuBLAS,
   so out = inp W^T is computed as out^T = W^T' inp^T with the operands swapped. Work right after a
   GEMM is its cuBLASLt epilogue (mgt__gemm_lt): a forward bias (BIAS), GPT-2's GELU (GELU_AUX_BIAS
   forward, DGELU in the dX GEMM of the projection after it) and bias gradients (BGRADB in the dW
   GEMM; kernels/README.md, "GEMMs with cuBLASLt epilogues").
   Attention is flash attention: cuDNN's fused scaled-dot-product attention for bf16/fp16 where it
   serves the shape (kernels/attention_cudnn.cpp: its graphs and plans made by reserve), else the own
   kernels (kernels/attention.cu: fp32, other head sizes, a cuDNN that refused). No T x T scores
   either way; att holds the logsumexp of each row and head (B, NH, T) in fp32
   (mgt_backend.att_lse), and the backward's scratch is one float per row and head (cuDNN's: the
   plan's workspace, the row sums and an fp32 dq accumulator). */
#include <cublasLt.h>     /* defines: cublasLtMatmul, CUBLASLT_EPILOGUE_BIAS */
#include <cublas_v2.h>    /* defines: cublasHandle_t, cublasGemmEx */
#include <cuda_runtime.h> /* defines: cudaMalloc, cudaMemcpyAsync, cudaStream_t */
#include <sched.h>        /* defines: sched_yield */
#include <stdarg.h>       /* defines: va_list */
#include <stdio.h>        /* defines: vsnprintf */
#include <stdlib.h>       /* defines: calloc, free, getenv */
#include <string.h>       /* defines: memset, memcpy */
#include <time.h>         /* defines: clock_gettime, nanosleep */

#include <cuda_bf16.h>    /* defines: __nv_bfloat16 */
#include <cuda_fp16.h>    /* defines: __half */

#include "launchers.h"      /* defines: the mgt_cuda_* launchers of kernels/<op>.cu, mgt_kernel_last_error, mgt_kernel_launches */
#include "backend_cuda.h"   /* defines: mgt_cuda_backend_create.. */
#include "attention_cudnn.h" /* defines: mgt_cudnn_attn_create, _forward, _backward (cuDNN's fused attention) */
#include "watchdog.h"       /* defines: mgt_watchdog_wait, mgt_watchdog_step, mgt_watchdog_rank.. */
#include "fake_note.h"      /* defines: mgt_cuda_fake_note (the checking fakes' hook; null in the library) */

typedef struct mgt__cuda {
    mgt_backend be; /* first member: the runtime holds a mgt_backend * */
    int device, rank;
    mgt_watchdog *wd; /* the deadline of its waits, or NULL (a backend of its own: its own deadline) */
    cudaStream_t stream;
    cublasHandle_t blas;
    cublasLtHandle_t lt; /* the GEMMs with a bias epilogue */
    mgt_cudnn_attn *cudnn_attn; /* bf16/fp16 attention of the run's shape through cuDNN, or NULL (the own kernels) */
    cudaDataType_t type; /* cuBLAS's name for be.dtype */
    void *blas_work;     /* cuBLAS's workspace (cublasSetWorkspace), also cuBLASLt's (one stream orders their uses) */
    size_t blas_work_bytes;
    void *work; /* scratch of one op at a time (stream order keeps uses apart) */
    size_t work_bytes;
    double *scalar;          /* a device double for sum_squares */
    unsigned *ticket;        /* a device word at 0 between kernels: the last-block ticket of LayerNorm's backward */
    char *up;                /* pinned ring of upload slots */
    size_t up_slot;          /* bytes per slot */
    int up_slots, up_next;   /* slots, and the next one to use */
    cudaEvent_t *up_done;    /* per slot: its copy is done */
    unsigned char *up_busy;  /* per slot: a copy may still read it */
    char *down;              /* pinned buffer of the downloads inside a step */
    size_t down_bytes;
    cudaEvent_t ev;          /* what the host waits for */
    int reserved, in_step, sync_mode;
    int warm_up; /* inside the warm-up step: not profiled */
    int nccl_counted;  /* NCCL's device memory (measured by the communicator) is in mem_current[MGT_MEM_BUFFERS] */
    /* the op-family profile (mgt_run_profile, off by default): a timing event recorded on the
       stream as each op of a step starts, the family of that op, and the seconds summed per family */
    int profiling, prof_n, prof_cap, prof_steps, prof_overflow;
    cudaEvent_t *prof_ev;
    signed char *prof_family;
    double prof_s[MGT_SIM_FAMILIES];
    size_t nccl_bytes;
    /* the op running now (MGT_CUDA_SYNC, the fakes, messages) */
    const char *op_name;
    int op_line, op_pending;
    char op_desc[200];
    int failed;
    char error[4096];
} mgt__cuda;

#define MGT__CU(be) ((mgt__cuda *)(be))

/* the simulator's family of an op (mgt.h's mgt__sim_charge calls), by the name the op gives itself;
   -1: a copy, in no family */
static int mgt__cuda_family(const char *name) {
    static const struct { const char *prefix; int family; } map[] = {
        {"matmul", MGT_SIM_GEMM}, {"attention", MGT_SIM_ATTENTION}, {"layernorm", MGT_SIM_NORM}, {"rmsnorm", MGT_SIM_NORM},
        {"residual + layernorm", MGT_SIM_NORM}, {"encoder", MGT_SIM_EMBEDDING}, {"cross-entropy", MGT_SIM_LOSS},
        {"AdamW", MGT_SIM_OPTIMIZER}, {"sum of squares", MGT_SIM_OPTIMIZER}, {"upload", -1}, {"download", -1},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strncmp(name, map[i].prefix, strlen(map[i].prefix))) return map[i].family;
    return MGT_SIM_ELEMENTWISE; /* gelu, swiglu, rope, add, bias, cast, scale, zero, sum */
}

/* ---- notes and errors: a note goes to mgt's logger (the library prints nothing itself); a rank's
   first error is kept */

static mgt_log_fn mgt__cuda_log;
static void *mgt__cuda_log_user;
void mgt_cuda_set_logger(mgt_log_fn log, void *user) {
    mgt__cuda_log_user = user;
    __atomic_store_n(&mgt__cuda_log, log, __ATOMIC_RELEASE);
}
static void mgt__cuda_note(int level, const char *fmt, ...) {
    mgt_log_fn log = __atomic_load_n(&mgt__cuda_log, __ATOMIC_ACQUIRE);
    char text[600];
    va_list ap;
    if (!log) return;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    log(mgt__cuda_log_user, level, text);
}

static void mgt__cuda_fail(mgt__cuda *c, const char *fmt, ...) {
    va_list ap;
    if (c->failed) return;
    c->failed = 1;
    va_start(ap, fmt);
    vsnprintf(c->error, sizeof c->error, fmt, ap);
    va_end(ap);
}
static int mgt__cuda_ok(mgt__cuda *c, cudaError_t e, const char *what) {
    if (e == cudaSuccess) return 1;
    mgt__cuda_fail(c, "device %d: %s: %s (%s)", c->device, what, cudaGetErrorString(e), cudaGetErrorName(e));
    return 0;
}
static int mgt__blas_ok(mgt__cuda *c, cublasStatus_t s, const char *what) {
    if (s == CUBLAS_STATUS_SUCCESS) return 1;
    mgt__cuda_fail(c, "device %d: cuBLAS %s: %s", c->device, what, cublasGetStatusString(s));
    return 0;
}
/* a launcher's result: its own message names the file, line and failed condition */
static void mgt__kernel_ok(mgt__cuda *c, int rc, const char *op) {
    if (rc == MGT_KERNEL_OK) return;
    const mgt_kernel_error &e = mgt_kernel_last_error();
    mgt__cuda_fail(c, "device %d: %s: %s at %s:%d: %s", c->device, op, rc == MGT_KERNEL_INVALID ? "invalid arguments" : "launch failed", e.file,
                   e.line, e.what);
}

/* ---- host waits: on an event of this stream, with a deadline */

static double mgt__cuda_now() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
/* waits for the stream's work so far; `what` names it in a message. Through the world's watchdog,
   or (a backend of its own) a poll with the default deadline */
static int mgt__cuda_wait(mgt__cuda *c, const char *what) {
    if (c->failed) return 0;
    if (!mgt__cuda_ok(c, cudaEventRecord(c->ev, c->stream), "marking what the host waits for")) return 0;
    if (c->wd) {
        char why[4096];
        if (mgt_watchdog_wait(c->wd, c->rank, c->ev, what, why, sizeof why) == MGT_OK) return 1;
        mgt__cuda_fail(c, "%s", why);
        return 0;
    }
    double start = mgt__cuda_now();
    for (int spins = 0;; spins++) {
        cudaError_t q = cudaEventQuery(c->ev);
        if (q == cudaSuccess) return 1;
        (void)cudaGetLastError();
        if (q != cudaErrorNotReady) return mgt__cuda_ok(c, q, what);
        if (mgt__cuda_now() - start > 300.0) {
            mgt__cuda_fail(c, "device %d: waited 300 s for %s", c->device, what);
            return 0;
        }
        if (spins < 64) sched_yield();
        else {
            struct timespec ts = {0, 20000L};
            nanosleep(&ts, NULL);
        }
    }
}

/* ---- ops: each names itself first (MGT_CUDA_SYNC, the fakes' checks, messages) */

/* MGT_CUDA_SYNC=1: the previous op is waited for before the next starts, so the first failure names it */
static void mgt__cuda_check_op(mgt__cuda *c) {
    char what[600];
    const mgt_kernel_sites &k = mgt_kernel_launches();
    c->op_pending = 0;
    snprintf(what, sizeof what, "%s (backend_cuda.cu:%d", c->op_desc, c->op_line);
    for (int i = 0; i < k.n && i < 4; i++) {
        size_t n = strlen(what);
        snprintf(what + n, sizeof what - n, "%s%s:%d", i ? ", " : "; its kernels launched at ", k.file[i], k.line[i]);
    }
    size_t n = strlen(what);
    snprintf(what + n, sizeof what - n, ") to finish (MGT_CUDA_SYNC=1 waits for every op)");
    mgt__cuda_wait(c, what);
}
/* MGT_CUDA_SYNC=1, before each NCCL call of the rank (mgt_watchdog_finish_last_op): the op launched last is waited for */
static void mgt__cuda_finish_op(void *ctx) {
    mgt__cuda *c = (mgt__cuda *)ctx;
    if (!c->failed && c->op_pending && c->sync_mode) mgt__cuda_check_op(c);
}
__attribute__((format(printf, 4, 5))) static void mgt__cuda_op(mgt__cuda *c, const char *name, int line, const char *fmt, ...) {
    if (c->failed) return;
    if (c->op_pending && c->sync_mode) mgt__cuda_check_op(c);
    c->op_name = name;
    c->op_line = line;
    c->op_pending = 1;
    if (c->profiling && c->in_step && !c->warm_up) { /* the op starts: the previous one's time ends */
        if (c->prof_n + 1 >= c->prof_cap) c->prof_overflow = 1;
        else if (mgt__cuda_ok(c, cudaEventRecord(c->prof_ev[c->prof_n], c->stream), "profiling an op"))
            c->prof_family[c->prof_n++] = (signed char)mgt__cuda_family(name);
    }
    mgt_kernel_launches().n = 0;
    if (c->sync_mode || mgt_cuda_fake_note) {
        va_list ap;
        size_t n;
        snprintf(c->op_desc, sizeof c->op_desc, "%s (", name);
        n = strlen(c->op_desc);
        va_start(ap, fmt);
        vsnprintf(c->op_desc + n, sizeof c->op_desc - n, fmt, ap);
        va_end(ap);
        n = strlen(c->op_desc);
        snprintf(c->op_desc + n, sizeof c->op_desc - n, ")");
        if (mgt_cuda_fake_note) mgt_cuda_fake_note(c->device, MGT_NOTE_OP, c->op_desc);
    } else
        snprintf(c->op_desc, sizeof c->op_desc, "%s", name);
}
#define MGT__OP(c, name, ...) mgt__cuda_op((c), (name), __LINE__, __VA_ARGS__)

/* ---- memory: allocations are made when the run is created, never inside a step */

static void mgt__cuda_account(mgt_backend *be, long long bytes, int category) {
    be->mem_current[category] = (size_t)((long long)be->mem_current[category] + bytes);
    if (be->mem_current[category] > be->mem_peak[category]) be->mem_peak[category] = be->mem_current[category];
}

static void *mgt__cuda_alloc(mgt_backend *be, size_t bytes, int category) {
    mgt__cuda *c = MGT__CU(be);
    void *p = NULL;
    if (c->failed) return NULL;
    if (c->in_step) {
        mgt__cuda_fail(c, "device %d: %zu bytes allocated inside a step (an allocation may wait for every stream of the device)", c->device, bytes);
        return NULL;
    }
    if (!mgt__cuda_ok(c, cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc")) return NULL;
    if (!mgt__cuda_ok(c, cudaMemsetAsync(p, 0, bytes, c->stream), "zeroing new memory")) {
        cudaFree(p);
        return NULL;
    }
    mgt__cuda_account(be, (long long)bytes, category);
    return p;
}
static void mgt__cuda_free(mgt_backend *be, void *p, size_t bytes, int category) {
    mgt__cuda *c = MGT__CU(be);
    if (!p) return;
    if (c->in_step) {
        mgt__cuda_fail(c, "device %d: %zu bytes freed inside a step (a free may wait for every stream of the device)", c->device, bytes);
        return;
    }
    /* the stream may still use it: wait for it (with the deadline) rather than rely on cudaFree's own
       wait; after a failure the memory is left to the process's end */
    if (!c->failed && !mgt__cuda_wait(c, "the stream, before freeing memory it may use")) return;
    if (c->failed) return;
    mgt__cuda_ok(c, cudaFree(p), "cudaFree");
    mgt__cuda_account(be, -(long long)bytes, category);
}

/* scratch of at least `bytes`, valid until the next op that asks for scratch: reserved when the run
   was created; a backend without reserve (a test of its own) grows it outside steps */
static void *mgt__cuda_work(mgt__cuda *c, size_t bytes) {
    if (bytes <= c->work_bytes) return c->work;
    if (c->reserved || c->in_step) {
        mgt__cuda_fail(c, "device %d: %s needs %zu bytes of scratch, %zu were reserved when the run was made", c->device, c->op_desc, bytes,
                       c->work_bytes);
        return NULL;
    }
    if (c->work) mgt__cuda_free(&c->be, c->work, c->work_bytes, MGT_MEM_WORKSPACE);
    c->work = NULL;
    c->work_bytes = 0;
    c->work = mgt__cuda_alloc(&c->be, bytes, MGT_MEM_WORKSPACE);
    if (c->work) c->work_bytes = bytes;
    return c->work;
}

/* ---- the storage type */

#define MGT__DISPATCH(c, call)                                                                         \
    do {                                                                                               \
        if ((c)->be.dtype == MGT_BF16) { typedef __nv_bfloat16 floatX; call; }                        \
        else if ((c)->be.dtype == MGT_F16) { typedef __half floatX; call; }                           \
        else { typedef float floatX; call; }                                                           \
    } while (0)

/* ---- GEMMs: column-major, as cuBLAS sees the row-major tensors */

static void mgt__gemm(mgt__cuda *c, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha, const void *A, int lda,
                      const void *B, int ldb, float beta, void *C, cudaDataType_t ctype, int ldc, const char *what) {
    if (c->failed) return;
    mgt__blas_ok(c, cublasGemmEx(c->blas, ta, tb, m, n, k, &alpha, A, c->type, lda, B, c->type, ldb, &beta, C, ctype, ldc, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT),
                 what);
}

/* the alignment cuBLASLt may assume of p: the largest power of two dividing the address, at most the
   256 bytes cuBLASLt assumes of a matrix unless told less (cublasLt.h, MIN_ALIGNMENT_*_BYTES) */
static uint32_t mgt__lt_alignment(const void *p) {
    uintptr_t a = (uintptr_t)p;
    return a == 0 || (a & (~a + 1)) >= 256 ? 256u : (uint32_t)(a & (~a + 1));
}
/* an epilogue's bias or aux vector: no preference covers it, and cuBLASLt's kernels may read it in
   16-byte pieces (PyTorch #194497: an under-aligned bias faulted with "misaligned address") */
#define MGT__LT_VECTOR_OK(p) (!(p) || mgt__lt_alignment(p) >= 16)

/* D (m x n) = op(A) op(B) + beta D through cuBLASLt with an epilogue (llm.c's matmul_cublaslt, in
   spirit): BIAS adds bias (m) as each tile of D is written; GELU_AUX(_BIAS) also writes the GELU's
   input to aux (m x n, ld m) and D = gelu of it; DGELU multiplies D by gelu'(aux); BGRADB writes the
   column sums of op(B) over k (the bias gradient, n floats: D is fp32 there) to bias. aux's leading
   dimension must be a multiple of 8 (cublasLt.h), which callers check. The heuristic is told each
   matrix pointer's alignment: by default it assumes 256 bytes and may pick a kernel that faults on
   the 16-byte aligned parameter slices. The descriptors are host objects made and destroyed per
   call; the workspace is cuBLAS's, as much as the heuristic asks for.
   Returns 0 when the epilogue is not run: a bias or aux pointer under 16 bytes aligned, no algorithm
   offered, or cublasLtMatmul refusing the call (the caller then runs the GEMM and its kernel apart);
   else 1 (done, or the backend failed) */
static int mgt__gemm_lt(mgt__cuda *c, uint32_t epilogue, cublasOperation_t opa, cublasOperation_t opb, int m, int n, int k, const void *A, int lda,
                         const void *B, int ldb, float beta, void *D, cudaDataType_t dtype, const void *bias, void *aux) {
    cublasLtMatmulDesc_t desc = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t algo;
    int32_t ta = opa, tb = opb;
    int64_t aux_ld = m;
    uint64_t most = c->blas_work_bytes;
    uint32_t align[4] = {mgt__lt_alignment(A), mgt__lt_alignment(B), mgt__lt_alignment(D), mgt__lt_alignment(D)}; /* A, B, C = D, D */
    int found = 0, ok, done = 1, i;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    float one = 1.0f;
    if (c->failed) return 1;
    if (!MGT__LT_VECTOR_OK(bias) || !MGT__LT_VECTOR_OK(aux)) return 0;
    memset(&algo, 0, sizeof algo);
    ok = mgt__blas_ok(c, cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate") &&
         mgt__blas_ok(c, cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "setting TRANSA") &&
         mgt__blas_ok(c, cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "setting TRANSB") &&
         mgt__blas_ok(c, cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue), "setting the epilogue");
    if (ok && bias) ok = mgt__blas_ok(c, cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias), "setting the bias");
    if (ok && aux)
        ok = mgt__blas_ok(c, cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux), "setting aux") &&
             mgt__blas_ok(c, cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld), "setting aux's ld");
    ok = ok && mgt__blas_ok(c, cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate") &&
         mgt__blas_ok(c, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &most, sizeof most), "the workspace");
    for (i = 0; ok && i < 4; i++)
        ok = mgt__blas_ok(c, cublasLtMatmulPreferenceSetAttribute(pref, (cublasLtMatmulPreferenceAttributes_t)(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES + i),
                                                                  &align[i], sizeof align[i]),
                          "the pointers' alignment");
    if (ok && mgt__blas_ok(c, cublasLtMatrixLayoutCreate(&la, c->type, opa == CUBLAS_OP_N ? m : k, opa == CUBLAS_OP_N ? k : m, lda), "the layout of A") &&
        mgt__blas_ok(c, cublasLtMatrixLayoutCreate(&lb, c->type, opb == CUBLAS_OP_N ? k : n, opb == CUBLAS_OP_N ? n : k, ldb), "the layout of B") &&
        mgt__blas_ok(c, cublasLtMatrixLayoutCreate(&ld, dtype, (uint64_t)m, (uint64_t)n, m), "the layout of D") &&
        ((st = cublasLtMatmulAlgoGetHeuristic(c->lt, desc, la, lb, ld, ld, pref, 1, &algo, &found)) == CUBLAS_STATUS_NOT_SUPPORTED ||
         mgt__blas_ok(c, st, "cublasLtMatmulAlgoGetHeuristic"))) {
        /* no algorithm (NOT_SUPPORTED, or none returned), or the call refused (nothing was queued): the caller's kernels */
        done = found >= 1 && cublasLtMatmul(c->lt, desc, &one, A, la, B, lb, &beta, D, ld, D, ld, &algo.algo, c->blas_work, c->blas_work_bytes,
                                            c->stream) == CUBLAS_STATUS_SUCCESS;
    }
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (desc) cublasLtMatmulDescDestroy(desc);
    return done || c->failed;
}
#define MGT__AUX_LD_OK(ld) ((ld) % 8 == 0) /* a GELU aux matrix's leading dimension (cublasLt.h, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD) */

/* out (N,OC) = inp (N,C) W^T + bias, W (OC,C): out^T (OC x N) = W^T' inp^T, the bias by the BIAS
   epilogue, or (no epilogue for this call) by the bias kernel after the GEMM */
static void mgt__cuda_matmul_forward(mgt_backend *be, void *out, const void *inp, const void *weight, const void *bias, int N, int C, int OC) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "matmul forward", "N %d, C %d, OC %d%s", N, C, OC, bias ? ", bias" : "");
    if (bias && mgt__gemm_lt(c, CUBLASLT_EPILOGUE_BIAS, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, weight, C, inp, C, 0.0f, out, c->type, bias, NULL)) return;
    mgt__gemm(c, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, 1.0f, weight, C, inp, C, 0.0f, out, c->type, OC, "matmul forward");
    if (bias && !c->failed) /* out += bias: the residual kernel without a residual */
        MGT__DISPATCH(c, mgt__kernel_ok(c, mgt_cuda_bias_residual<floatX>((floatX *)out, NULL, (const floatX *)bias, N, OC, c->stream), "matmul bias"));
}

/* dbias (OC) += column sums of dout (N,OC), by the kernel (a fixed order of additions) */
static void mgt__cuda_bias_backward(mgt_backend *be, float *dbias, const void *dout, int N, int OC) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "bias backward", "N %d, OC %d", N, OC);
    float *scratch = (float *)mgt__cuda_work(c, mgt_cuda_bias_backward_scratch(N, OC));
    if (c->failed || !scratch) return;
    MGT__DISPATCH(c, mgt__kernel_ok(c, mgt_cuda_bias_backward<floatX>(dbias, scratch, (const floatX *)dout, N, OC, c->stream), "bias backward"));
}

/* dW (OC,C) += dout^T inp: dW^T (C x OC, fp32, beta 1) = inp^T (C x N) dout (N x OC); with dbias, the
   BGRADB epilogue sums op(B) = dout over k = N into fp32 scratch as the GEMM reads it (the bias
   gradient is written, not added: BGRADA would sum inp's columns instead), then dbias += it */
static void mgt__cuda_weight_grad(mgt__cuda *c, float *dweight, float *dbias, const void *dout, const void *inp, int N, int C, int OC) {
    float *db = dbias ? (float *)mgt__cuda_work(c, (size_t)OC * sizeof(float)) : NULL;
    if (dbias && !db) return;
    if (dbias && mgt__gemm_lt(c, CUBLASLT_EPILOGUE_BGRADB, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, inp, C, dout, OC, 1.0f, dweight, CUDA_R_32F, db, NULL)) {
        if (!c->failed) mgt__kernel_ok(c, mgt_cuda_add_inplace<float>(dbias, db, (size_t)OC, c->stream), "bias gradient");
        return;
    }
    mgt__gemm(c, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, 1.0f, inp, C, dout, OC, 1.0f, dweight, CUDA_R_32F, C, "matmul backward (weight)");
    if (dbias) mgt__cuda_bias_backward(&c->be, dbias, dout, N, OC); /* without the epilogue: the bias kernel */
}

/* dinp (N,C) = dout W; dW (OC,C) += dout^T inp; dbias += column sums of dout */
static void mgt__cuda_matmul_backward(mgt_backend *be, void *dinp, float *dweight, float *dbias, const void *dout, const void *inp,
                                      const void *weight, int N, int C, int OC) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "matmul backward", "N %d, C %d, OC %d%s", N, C, OC, dbias ? ", bias" : "");
    if (dinp) mgt__gemm(c, CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, 1.0f, weight, C, dout, OC, 0.0f, dinp, c->type, C, "matmul backward (input)");
    if (dweight) mgt__cuda_weight_grad(c, dweight, dbias, dout, inp, N, C, OC);
}

/* ---- attention: flash attention, cuDNN's (bf16/fp16, the shape reserve built its plans for) or the
   own kernels (kernels/attention.cu); att holds the logsumexp per row and head either way.
   Grouped-query attention (NKV < NH): query head h reads key/value head h / (NH / NKV) */

/* whether cuDNN runs this call; its workspace, or NULL when it does not */
static void *mgt__cudnn_work(mgt__cuda *c, int B, int T, int C, int NH, int NKV) {
    if (!c->cudnn_attn || !mgt_cudnn_attn_serves(c->cudnn_attn, B, T, NH, NKV, C / NH)) return NULL;
    return mgt__cuda_work(c, mgt_cudnn_attn_workspace(c->cudnn_attn));
}

static void mgt__cuda_attention_forward(mgt_backend *be, void *out, void *att, const void *qkv, int B, int T, int C, int NH, int NKV) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "attention forward", "B %d, T %d, C %d, NH %d, NKV %d", B, T, C, NH, NKV);
    if (c->failed) return;
    if (void *work = mgt__cudnn_work(c, B, T, C, NH, NKV)) {
        char why[300];
        if (mgt_cudnn_attn_forward(c->cudnn_attn, work, out, (float *)att, qkv, why, sizeof why) != 0) mgt__cuda_fail(c, "device %d: %s", c->device, why);
        return;
    }
    MGT__DISPATCH(c, mgt__kernel_ok(c, mgt_cuda_attention_forward<floatX>((floatX *)out, (float *)att, (const floatX *)qkv, B, T, NH, NKV, C / NH,
                                                                         c->stream),
                                    "attention forward"));
}

static void mgt__cuda_attention_backward(mgt_backend *be, void *dqkv, const void *dout, const void *qkv, const void *out, const void *att, int B, int T,
                                         int C, int NH, int NKV) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "attention backward", "B %d, T %d, C %d, NH %d, NKV %d", B, T, C, NH, NKV);
    if (c->failed) return;
    if (void *work = mgt__cudnn_work(c, B, T, C, NH, NKV)) {
        char why[300];
        if (mgt_cudnn_attn_backward(c->cudnn_attn, work, dqkv, dout, qkv, out, (const float *)att, why, sizeof why) != 0)
            mgt__cuda_fail(c, "device %d: %s", c->device, why);
        return;
    }
    float *rows = (float *)mgt__cuda_work(c, mgt_cuda_attention_backward_scratch(B, T, NH)); /* dout . out per row and head */
    if (c->failed || !rows) return;
    MGT__DISPATCH(c, mgt__kernel_ok(c, mgt_cuda_attention_backward<floatX>((floatX *)dqkv, rows, (const floatX *)dout, (const floatX *)qkv,
                                                                          (const floatX *)out, (const float *)att, B, T, NH, NKV, C / NH, c->stream),
                                    "attention backward"));
}

/* ---- context parallelism's ring attention (src/rank.c, mgt__ring_attention_*): one block of keys and
   values at a time through the own kernels (kernels/ring_attention.cu; cuDNN's fused attention has no
   merge into a running output), and the strided copies between qkv and the blocks (kernels/cast.cu) */

static void mgt__cuda_attention_part_forward(mgt_backend *be, float *o, float *lse, const void *qkv, const void *kv, int kv_stride, int B, int T, int C,
                                             int NH, int NKV, int causal, int first) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "attention part forward", "B %d, T %d, C %d, NH %d, NKV %d, kv stride %d, %s%s", B, T, C, NH, NKV, kv_stride, causal ? "causal" : "whole",
            first ? ", first" : "");
    if (c->failed) return;
    MGT__DISPATCH(c, mgt__kernel_ok(c, mgt_cuda_attention_part_forward<floatX>(o, lse, (const floatX *)qkv, (const floatX *)kv, kv_stride, B, T, NH, NKV,
                                                                              C / NH, causal, first, c->stream),
                                    "attention part forward"));
}

static void mgt__cuda_attention_part_backward(mgt_backend *be, float *dq, float *dkv, const void *dout, const void *out, const float *lse, const void *qkv,
                                              const void *kv, int kv_stride, int B, int T, int C, int NH, int NKV, int causal) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "attention part backward", "B %d, T %d, C %d, NH %d, NKV %d, kv stride %d, %s", B, T, C, NH, NKV, kv_stride, causal ? "causal" : "whole");
    float *rows = (float *)mgt__cuda_work(c, mgt_cuda_attention_part_backward_scratch(B, T, NH)); /* dout . out per row and head */
    if (c->failed || !rows) return;
    MGT__DISPATCH(c, mgt__kernel_ok(c, mgt_cuda_attention_part_backward<floatX>(dq, dkv, rows, (const floatX *)dout, (const floatX *)out, lse,
                                                                               (const floatX *)qkv, (const floatX *)kv, kv_stride, B, T, NH, NKV, C / NH,
                                                                               causal, c->stream),
                                    "attention part backward"));
}

static void mgt__cuda_copy_cols(mgt_backend *be, void *dst, int dst_dtype, int dst_stride, const void *src, int src_dtype, int src_stride, size_t rows,
                                int cols) {
    mgt__cuda *c = MGT__CU(be);
    int rc = MGT_KERNEL_OK;
    MGT__OP(c, "copy columns", "%zu rows of %d, type %d to %d, strides %d to %d", rows, cols, src_dtype, dst_dtype, src_stride, dst_stride);
    if (c->failed) return;
#define MGT__COPY(D, S) rc = mgt_cuda_copy_cols<D, S>((D *)dst, dst_stride, (const S *)src, src_stride, rows, cols, c->stream)
    if (dst_dtype == MGT_F32 && src_dtype == MGT_F32) MGT__COPY(float, float);
    else if (dst_dtype == MGT_BF16 && src_dtype == MGT_BF16) MGT__COPY(__nv_bfloat16, __nv_bfloat16);
    else if (dst_dtype == MGT_F16 && src_dtype == MGT_F16) MGT__COPY(__half, __half);
    else if (dst_dtype == MGT_F32 && src_dtype == MGT_BF16) MGT__COPY(float, __nv_bfloat16);
    else if (dst_dtype == MGT_F32 && src_dtype == MGT_F16) MGT__COPY(float, __half);
    else if (dst_dtype == MGT_BF16 && src_dtype == MGT_F32) MGT__COPY(__nv_bfloat16, float);
    else if (dst_dtype == MGT_F16 && src_dtype == MGT_F32) MGT__COPY(__half, float);
    else mgt__cuda_fail(c, "device %d: copy from type %d to type %d is not supported (through fp32 instead)", c->device, src_dtype, dst_dtype);
#undef MGT__COPY
    mgt__kernel_ok(c, rc, "copy columns");
}

/* ---- elementwise and row ops: the kernels */

static void mgt__cuda_encoder_forward(mgt_backend *be, void *out, const int *tokens, const void *wte, int vocab_start, int vocab_rows, const void *wpe,
                                      int B, int T, int C) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "encoder forward", "B %d, T %d, C %d, vocabulary rows %d", B, T, C, vocab_rows);
    if (c->failed) return;
    MGT__DISPATCH(c, mgt__kernel_ok(c, mgt_cuda_encoder_forward<floatX>((floatX *)out, tokens, (const floatX *)wte, vocab_start, vocab_rows,
                                                                       (const floatX *)wpe, B, T, C, c->stream),
                                    "encoder forward"));
}
static void mgt__cuda_encoder_backward(mgt_backend *be, float *dwte, float *dwpe, const void *dout, const int *tokens, int vocab_start, int vocab_rows,
                                       int B, int T, int C) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "encoder backward", "B %d, T %d, C %d, vocabulary rows %d", B, T, C, vocab_rows);
    void *keys = mgt__cuda_work(c, mgt_cuda_encoder_backward_scratch(B * T)); /* the sort of (token, position) */
    if (c->failed || !keys) return;
    MGT__DISPATCH(c, mgt__kernel_ok(c, mgt_cuda_encoder_backward<floatX>(dwte, dwpe, keys, (const floatX *)dout, tokens, vocab_start, vocab_rows, B, T,
                                                                        C, c->stream),
                                    "encoder backward"));
}
static void mgt__cuda_layernorm_forward(mgt_backend *be, void *out, float *mean, float *rstd, const void *inp, const void *weight, const void *bias,
                                        int N, int C) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "layernorm forward", "N %d, C %d", N, C);
    if (c->failed) return;
    MGT__DISPATCH(c, mgt__kernel_ok(c, mgt_cuda_layernorm_forward<floatX>((floatX *)out, mean, rstd, (const floatX *)inp, (const floatX *)weight,
                                                                         (const floatX *)bias, N, C, c->stream),
                                    "layernorm forward"));
}
static void mgt__cuda_layernorm_backward(mgt_backend *be, void *dinp, float *dweight, float *dbias, const void *dout, const void *inp, const void *weight,
                                         const float *mean, const float *rstd, int N, int C) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "layernorm backward", "N %d, C %d", N, C);
    float *scratch = (float *)mgt__cuda_work(c, mgt_cuda_layernorm_backward_scratch(N, C));
    if (c->failed || !scratch) return;
    MGT__DISPATCH(c, mgt__kernel_ok(c, mgt_cuda_layernorm_backward<floatX>((floatX *)dinp, dweight, dbias, scratch, c->ticket, (const floatX *)dout,
                                                                          (const floatX *)inp, (const floatX *)weight, mean, rstd, N, C, c->stream),
                                    "layernorm backward"));
}
static void mgt__cuda_gelu_forward(mgt_backend *be, void *out, const void *inp, size_t n) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "gelu forward", "n %zu", n);
    if (c->failed) return;
    MGT__DISPATCH(c, mgt__kernel_ok(c, mgt_cuda_gelu_forward<floatX>((floatX *)out, (const floatX *)inp, n, c->stream), "gelu forward"));
}
static void mgt__cuda_gelu_backward(mgt_backend *be, void *dinp, const void *inp, const void *dout, size_t n) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "gelu backward", "n %zu", n);
    if (c->failed) return;
    MGT__DISPATCH(c, mgt__kernel_ok(c, mgt_cuda_gelu_backward<floatX>((floatX *)dinp, (const floatX *)inp, (const floatX *)dout, n, c->stream),
                                    "gelu backward"));
}
/* pre (N,OC) = inp W^T + bias and out = gelu(pre) in one GEMM (GELU_AUX_BIAS: pre is the aux output);
   OC not a multiple of 8 (aux's ld), or the epilogue not run (mgt__gemm_lt), takes the GEMM and the
   GELU kernel apart */
static void mgt__cuda_matmul_gelu_forward(mgt_backend *be, void *out, void *pre, const void *inp, const void *weight, const void *bias, int N, int C,
                                          int OC) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "matmul gelu forward", "N %d, C %d, OC %d%s", N, C, OC, bias ? ", bias" : "");
    if (MGT__AUX_LD_OK(OC) && mgt__gemm_lt(c, bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C,
                                           weight, C, inp, C, 0.0f, out, c->type, bias, pre))
        return;
    mgt__cuda_matmul_forward(be, pre, inp, weight, bias, N, C, OC);
    mgt__cuda_gelu_forward(be, out, pre, (size_t)N * (size_t)OC);
}

/* the backward of the matmul after the GELU: dpre (N,C) = (dout W) * gelu'(pre) in one GEMM (DGELU, pre
   the aux input), then dW and dbias as matmul_backward's; C not a multiple of 8, or the epilogue not
   run, takes the GELU backward kernel after the GEMM */
static void mgt__cuda_matmul_gelu_backward(mgt_backend *be, void *dpre, float *dweight, float *dbias, const void *dout, const void *inp,
                                           const void *weight, const void *pre, int N, int C, int OC) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "matmul gelu backward", "N %d, C %d, OC %d%s", N, C, OC, dbias ? ", bias" : "");
    if (MGT__AUX_LD_OK(C) && mgt__gemm_lt(c, CUBLASLT_EPILOGUE_DGELU, CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, weight, C, dout, OC, 0.0f, dpre, c->type, NULL,
                                          (void *)pre)) {
        if (dweight) mgt__cuda_weight_grad(c, dweight, dbias, dout, inp, N, C, OC);
        return;
    }
    mgt__cuda_matmul_backward(be, dpre, dweight, dbias, dout, inp, weight, N, C, OC);
    mgt__cuda_gelu_backward(be, dpre, pre, dpre, (size_t)N * (size_t)C);
}

static void mgt__cuda_add_inplace(mgt_backend *be, float *y, const float *x, size_t n) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "add", "n %zu", n);
    if (c->failed) return;
    mgt__kernel_ok(c, mgt_cuda_add_inplace<float>(y, x, n, c->stream), "add");
}
static void mgt__cuda_bias_residual(mgt_backend *be, void *out, const void *residual, const void *bias, int N, int C) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "bias residual", "N %d, C %d", N, C);
    if (c->failed) return;
    if (!bias) { /* a layer without a bias (Llama): out += residual */
        MGT__DISPATCH(c, mgt__kernel_ok(c, mgt_cuda_add_inplace<floatX>((floatX *)out, (const floatX *)residual, (size_t)N * (size_t)C, c->stream),
                                        "residual"));
        return;
    }
    MGT__DISPATCH(c, mgt__kernel_ok(c, mgt_cuda_bias_residual<floatX>((floatX *)out, (const floatX *)residual, (const floatX *)bias, N, C, c->stream),
                                    "bias residual"));
}

/* the Llama family's ops (kernels/rmsnorm.cu, rope.cu, swiglu.cu); RMSNorm's scratch is at most LayerNorm's */
static void mgt__cuda_rmsnorm_forward(mgt_backend *be, void *out, float *rstd, const void *inp, const void *weight, float eps, int N, int C) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "rmsnorm forward", "N %d, C %d", N, C);
    if (c->failed) return;
    MGT__DISPATCH(c, mgt__kernel_ok(c, mgt_cuda_rmsnorm_forward<floatX>((floatX *)out, rstd, (const floatX *)inp, (const floatX *)weight, eps, N, C,
                                                                       c->stream),
                                    "rmsnorm forward"));
}
static void mgt__cuda_rmsnorm_backward(mgt_backend *be, void *dinp, float *dweight, const void *dout, const void *inp, const void *weight,
                                       const float *rstd, int N, int C) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "rmsnorm backward", "N %d, C %d", N, C);
    float *scratch = (float *)mgt__cuda_work(c, mgt_cuda_rmsnorm_backward_scratch(N, C));
    if (c->failed || !scratch) return;
    MGT__DISPATCH(c, mgt__kernel_ok(c, mgt_cuda_rmsnorm_backward<floatX>((floatX *)dinp, dweight, scratch, (const floatX *)dout, (const floatX *)inp,
                                                                        (const floatX *)weight, rstd, N, C, c->stream),
                                    "rmsnorm backward"));
}
static void mgt__cuda_rope_forward(mgt_backend *be, void *qkv, int B, int T, int NH, int NKV, int hs, float theta, int pos0) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "rope forward", "B %d, T %d, NH %d, NKV %d, hs %d, pos0 %d", B, T, NH, NKV, hs, pos0);
    if (c->failed) return;
    MGT__DISPATCH(c, mgt__kernel_ok(c, mgt_cuda_rope_forward<floatX>((floatX *)qkv, B, T, NH, NKV, hs, theta, pos0, c->stream), "rope forward"));
}
static void mgt__cuda_rope_backward(mgt_backend *be, void *dqkv, int B, int T, int NH, int NKV, int hs, float theta, int pos0) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "rope backward", "B %d, T %d, NH %d, NKV %d, hs %d, pos0 %d", B, T, NH, NKV, hs, pos0);
    if (c->failed) return;
    MGT__DISPATCH(c, mgt__kernel_ok(c, mgt_cuda_rope_backward<floatX>((floatX *)dqkv, B, T, NH, NKV, hs, theta, pos0, c->stream), "rope backward"));
}
static void mgt__cuda_swiglu_forward(mgt_backend *be, void *out, const void *inp, int N, int H) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "swiglu forward", "N %d, H %d", N, H);
    if (c->failed) return;
    MGT__DISPATCH(c, mgt__kernel_ok(c, mgt_cuda_swiglu_forward<floatX>((floatX *)out, (const floatX *)inp, N, H, c->stream), "swiglu forward"));
}
static void mgt__cuda_swiglu_backward(mgt_backend *be, void *dinp, const void *inp, const void *dout, int N, int H) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "swiglu backward", "N %d, H %d", N, H);
    if (c->failed) return;
    MGT__DISPATCH(c, mgt__kernel_ok(c, mgt_cuda_swiglu_backward<floatX>((floatX *)dinp, (const floatX *)inp, (const floatX *)dout, N, H, c->stream),
                                    "swiglu backward"));
}
static void mgt__cuda_residual_layernorm_forward(mgt_backend *be, void *res, void *out, float *mean, float *rstd, const void *residual,
                                                 const void *res_bias, const void *weight, const void *bias, int N, int C) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "residual + layernorm forward", "N %d, C %d", N, C);
    if (c->failed) return;
    MGT__DISPATCH(c, mgt__kernel_ok(c, mgt_cuda_residual_layernorm_forward<floatX>((floatX *)res, (floatX *)out, mean, rstd, (const floatX *)residual,
                                                                                  (const floatX *)res_bias, (const floatX *)weight, (const floatX *)bias,
                                                                                  N, C, c->stream),
                                    "residual + layernorm forward"));
}

static void mgt__cuda_xent_partial(mgt_backend *be, float *part, void *logits, const int *targets, int N, int vocab_start, int Vl, int V) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "cross-entropy partials", "N %d, Vl %d, V %d", N, Vl, V);
    if (c->failed) return;
    MGT__DISPATCH(c, mgt__kernel_ok(c, mgt_cuda_xent_partial<floatX>(part, (floatX *)logits, targets, N, vocab_start, Vl, V, c->stream),
                                    "cross-entropy partials"));
}
static void mgt__cuda_xent_finish(mgt_backend *be, double *losses, void *logits, const float *parts, int tp, const int *targets, int N, int vocab_start,
                                  int Vl, int V, float grad_scale) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "cross-entropy", "N %d, Vl %d, V %d, tp %d", N, Vl, V, tp);
    if (c->failed) return;
    MGT__DISPATCH(c, mgt__kernel_ok(c, mgt_cuda_xent_finish<floatX>(losses, (floatX *)logits, parts, tp, targets, N, vocab_start, Vl, V, grad_scale,
                                                                   c->stream),
                                    "cross-entropy"));
}

static double mgt__cuda_sum_squares(mgt_backend *be, const float *x, size_t n) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "sum of squares", "n %zu", n);
    double *scratch = (double *)mgt__cuda_work(c, mgt_cuda_sum_squares_scratch(n)), out = 0.0;
    if (c->failed || !scratch) return 0.0;
    mgt__kernel_ok(c, mgt_cuda_sum_squares<float>(c->scalar, scratch, x, n, c->stream), "sum of squares");
    if (c->failed) return 0.0;
    c->be.download(&c->be, &out, c->scalar, sizeof out);
    return out;
}

/* the multi-tensor sum of squares: every tensor's block sums into one array, then one sum (no host wait) */
static void mgt__cuda_sum_squares_many(mgt_backend *be, double *out, int count, const float *const *x, const size_t *n) {
    mgt__cuda *c = MGT__CU(be);
    size_t chunks = 0, at = 0;
    int t;
    MGT__OP(c, "sum of squares", "%d tensors", count);
    for (t = 0; t < count; t++) chunks += mgt_cuda_sum_squares_chunks(n[t]);
    double *scratch = (double *)mgt__cuda_work(c, (chunks ? chunks : 1) * sizeof(double));
    if (c->failed || !scratch) return;
    for (t = 0; t < count && !c->failed; t++) {
        mgt__kernel_ok(c, mgt_cuda_sum_squares_blocks<float>(scratch + at, x[t], n[t], c->stream), "sum of squares");
        at += mgt_cuda_sum_squares_chunks(n[t]);
    }
    if (!c->failed) mgt__kernel_ok(c, mgt_cuda_sum_doubles(out, scratch, chunks, 0, c->stream), "sum of squares");
}
static void mgt__cuda_sum_doubles(mgt_backend *be, double *out, const double *x, size_t n, int accumulate) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "sum", "n %zu%s", n, accumulate ? ", accumulated" : "");
    if (c->failed) return;
    mgt__kernel_ok(c, mgt_cuda_sum_doubles(out, x, n, accumulate, c->stream), "sum");
}

static void mgt__cuda_adamw(mgt_backend *be, float *param, void *param_copy, const float *grad, float *m, float *v, size_t n, float lr, float beta1,
                            float beta2, float eps, float weight_decay, float grad_scale, float bias_correction1, float bias_correction2) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "AdamW", "n %zu", n);
    if (c->failed) return;
    if (!param_copy || be->dtype == MGT_F32) {
        mgt__kernel_ok(c, mgt_cuda_adamw(param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, grad_scale, bias_correction1, bias_correction2,
                                         c->stream),
                       "AdamW");
        if (param_copy && param_copy != param)
            mgt__cuda_ok(c, cudaMemcpyAsync(param_copy, param, n * sizeof(float), cudaMemcpyDeviceToDevice, c->stream), "copying parameters");
        return;
    }
    MGT__DISPATCH(c, mgt__kernel_ok(c, mgt_cuda_adamw_master<floatX>((floatX *)param_copy, param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay,
                                                                    grad_scale, bias_correction1, bias_correction2, c->stream),
                                    "AdamW"));
}
/* the multi-tensor AdamW: one launch for the call's tensors (fp32: a copy other than the parameter gets
   the parameter itself, as adamw's device copy does) */
static void mgt__cuda_adamw_many(mgt_backend *be, int count, float *const *param, void *const *param_copy, const float *const *grad, float *const *m,
                                 float *const *v, const size_t *n, const float *weight_decay, float lr, float beta1, float beta2, float eps,
                                 float grad_scale, float bias_correction1, float bias_correction2) {
    mgt__cuda *c = MGT__CU(be);
    mgt_adamw_tensor t[MGT_ADAMW_MANY];
    MGT__OP(c, "AdamW", "%d tensors", count);
    if (c->failed) return;
    if (count > MGT_ADAMW_MANY) {
        mgt__cuda_fail(c, "device %d: AdamW on %d tensors at once, more than %d", c->device, count, MGT_ADAMW_MANY);
        return;
    }
    for (int k = 0; k < count; k++) {
        t[k].master = param[k];
        t[k].copy = param_copy[k] == (void *)param[k] ? NULL : param_copy[k];
        t[k].grad = grad[k];
        t[k].m = m[k];
        t[k].v = v[k];
        t[k].n = n[k];
        t[k].weight_decay = weight_decay[k];
    }
    MGT__DISPATCH(c, mgt__kernel_ok(c, mgt_cuda_adamw_many<floatX>(t, count, lr, beta1, beta2, eps, grad_scale, bias_correction1, bias_correction2,
                                                                  c->stream),
                                    "AdamW"));
}
static void mgt__cuda_scale(mgt_backend *be, float *x, float factor, size_t n) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "scale", "n %zu", n);
    if (c->failed) return;
    mgt__kernel_ok(c, mgt_cuda_scale<float>(x, factor, n, c->stream), "scale");
}
static void mgt__cuda_zero(mgt_backend *be, void *x, size_t bytes) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "zero", "%zu bytes", bytes);
    if (c->failed || !bytes) return;
    mgt__cuda_ok(c, cudaMemsetAsync(x, 0, bytes, c->stream), "zeroing");
}

static void mgt__cuda_cast(mgt_backend *be, void *dst, int dst_dtype, const void *src, int src_dtype, size_t n) {
    mgt__cuda *c = MGT__CU(be);
    MGT__OP(c, "cast", "n %zu, type %d to %d", n, src_dtype, dst_dtype);
    int rc = MGT_KERNEL_OK;
    if (c->failed || !n) return;
    if (dst_dtype == src_dtype) {
        mgt__cuda_ok(c, cudaMemcpyAsync(dst, src, n * (dst_dtype == MGT_F32 ? 4 : 2), cudaMemcpyDeviceToDevice, c->stream), "copying");
        return;
    }
#define MGT__CAST(D, S) rc = mgt_cuda_cast<D, S>((D *)dst, (const S *)src, n, c->stream)
    if (dst_dtype == MGT_F32 && src_dtype == MGT_BF16) MGT__CAST(float, __nv_bfloat16);
    else if (dst_dtype == MGT_F32 && src_dtype == MGT_F16) MGT__CAST(float, __half);
    else if (dst_dtype == MGT_BF16 && src_dtype == MGT_F32) MGT__CAST(__nv_bfloat16, float);
    else if (dst_dtype == MGT_F16 && src_dtype == MGT_F32) MGT__CAST(__half, float);
    else mgt__cuda_fail(c, "device %d: cast from type %d to type %d is not supported (through fp32 instead)", c->device, src_dtype, dst_dtype);
#undef MGT__CAST
    mgt__kernel_ok(c, rc, "cast");
}

/* ---- host memory, threads, errors */

/* inside a step: through a slot of the pinned ring (the source is copied there, the copy runs while the
   host goes on; a slot is reused after its copy is done, which a step's worth of slots makes true
   without waiting); outside: straight from the caller's memory, then waited for */
static void mgt__cuda_upload(mgt_backend *be, void *dst, const void *host_src, size_t bytes) {
    mgt__cuda *c = MGT__CU(be);
    if (c->failed || !bytes) return;
    MGT__OP(c, "upload", "%zu bytes", bytes);
    if (!c->in_step) {
        if (mgt__cuda_ok(c, cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, c->stream), "copying to the device"))
            mgt__cuda_wait(c, "a copy to the device"); /* the host buffer is free again */
        return;
    }
    if (bytes > c->up_slot || !c->up_slots) {
        mgt__cuda_fail(c, "device %d: an upload of %zu bytes inside a step, more than the %zu reserved when the run was made", c->device, bytes,
                       c->up_slot);
        return;
    }
    int k = c->up_next;
    c->up_next = (c->up_next + 1) % c->up_slots;
    char *slot = c->up + (size_t)k * c->up_slot;
    if (c->up_busy[k]) { /* the ring came round within a step: wait for that slot's copy */
        if (c->wd) {
            char why[4096];
            if (mgt_watchdog_wait(c->wd, c->rank, c->up_done[k], "an earlier upload from the same pinned slot", why, sizeof why) != MGT_OK) {
                mgt__cuda_fail(c, "%s", why);
                return;
            }
        } else if (!mgt__cuda_ok(c, cudaEventSynchronize(c->up_done[k]), "an earlier upload from the same pinned slot"))
            return;
    }
    memcpy(slot, host_src, bytes);
    if (mgt__cuda_ok(c, cudaMemcpyAsync(dst, slot, bytes, cudaMemcpyHostToDevice, c->stream), "copying to the device") &&
        mgt__cuda_ok(c, cudaEventRecord(c->up_done[k], c->stream), "marking an upload"))
        c->up_busy[k] = 1;
}
/* inside a step through the pinned buffer, the one host wait of a download; outside into any memory */
static void mgt__cuda_download(mgt_backend *be, void *host_dst, const void *src, size_t bytes) {
    mgt__cuda *c = MGT__CU(be);
    if (c->failed) {
        memset(host_dst, 0, bytes); /* defined contents; the run fails at the step's end */
        return;
    }
    if (!bytes) return;
    MGT__OP(c, "download", "%zu bytes", bytes);
    if (c->in_step && bytes > c->down_bytes) {
        mgt__cuda_fail(c, "device %d: a download of %zu bytes inside a step, more than the %zu reserved when the run was made", c->device, bytes,
                       c->down_bytes);
    } else if (c->in_step) {
        if (mgt__cuda_ok(c, cudaMemcpyAsync(c->down, src, bytes, cudaMemcpyDeviceToHost, c->stream), "copying to the host") &&
            mgt__cuda_wait(c, "a copy to the host (the step's statistics)"))
            memcpy(host_dst, c->down, bytes);
    } else if (mgt__cuda_ok(c, cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, c->stream), "copying to the host"))
        mgt__cuda_wait(c, "a copy to the host");
    if (c->failed) memset(host_dst, 0, bytes);
}
static void mgt__cuda_enter(mgt_backend *be) {
    mgt__cuda *c = MGT__CU(be);
    mgt__cuda_ok(c, cudaSetDevice(c->device), "cudaSetDevice");
}
/* the end of a rank's step: its stream is done (then every upload slot is free again) */
static void mgt__cuda_finish(mgt_backend *be) {
    mgt__cuda *c = MGT__CU(be);
    if (c->sync_mode && c->op_pending) mgt__cuda_check_op(c);
    int marks = c->prof_n; /* the profile: an end mark after the last op */
    if (marks && !mgt__cuda_ok(c, cudaEventRecord(c->prof_ev[marks], c->stream), "profiling an op")) marks = 0;
    if (mgt__cuda_wait(c, "the step's compute (its compute stream)"))
        for (int k = 0; k < c->up_slots; k++) c->up_busy[k] = 0;
    if (marks && !c->failed && !c->prof_overflow) { /* the step's ops, each from its start to the next op's */
        for (int k = 0; k < marks; k++) {
            float ms = 0;
            if (c->prof_family[k] >= 0 && mgt__cuda_ok(c, cudaEventElapsedTime(&ms, c->prof_ev[k], c->prof_ev[k + 1]), "reading the profile"))
                c->prof_s[c->prof_family[k]] += ms * 1e-3;
        }
        c->prof_steps++;
    }
    c->prof_n = c->prof_overflow = 0;
}

/* the op-family profile, between steps: on 1 starts it (the events made now, outside any step), 0
   ends it; family_s (MGT_SIM_FAMILIES) gets the seconds per step of each family, averaged over the
   steps profiled, which are returned (-1 on failure) */
static int mgt__cuda_profile(mgt_backend *be, int on, double *family_s) {
    mgt__cuda *c = MGT__CU(be);
    int steps = c->prof_steps;
    if (c->in_step || c->failed) return -1;
    if (family_s)
        for (int f = 0; f < MGT_SIM_FAMILIES; f++) family_s[f] = steps ? c->prof_s[f] / steps : 0;
    memset(c->prof_s, 0, sizeof c->prof_s);
    c->prof_steps = c->prof_n = c->prof_overflow = 0;
    c->profiling = on;
    if (on && !c->prof_ev) { /* a step of GPT-2 124M runs about 800 ops; 16384 covers 16 micro-batches of it */
        c->prof_cap = 16384;
        c->prof_ev = (cudaEvent_t *)calloc((size_t)c->prof_cap, sizeof *c->prof_ev);
        c->prof_family = (signed char *)calloc((size_t)c->prof_cap, 1);
        if (!c->prof_ev || !c->prof_family) {
            mgt__cuda_fail(c, "device %d: out of memory for the profile's events", c->device);
            return -1;
        }
        for (int k = 0; k < c->prof_cap; k++)
            if (!mgt__cuda_ok(c, cudaEventCreate(&c->prof_ev[k]), "making the profile's events")) return -1;
    }
    return steps;
}
static const char *mgt__cuda_error(mgt_backend *be) { return MGT__CU(be)->failed ? MGT__CU(be)->error : NULL; }

/* the runtime's bracket of a step (or a forward-only pass): nothing is made, freed or waited for
   without a deadline between them. begin 2: the warm-up step, where cuBLAS's and cuDNN's kernels
   load at their first launch (its waits allow 10 x timeout_s, at least 120 s: watchdog.c) */
static void mgt__cuda_step(mgt_backend *be, int begin) {
    mgt__cuda *c = MGT__CU(be);
    if (begin) c->up_next = 0;
    if (begin && c->wd && !c->nccl_counted) { /* NCCL's own memory, measured after its warm-up: among the buffers */
        size_t nccl = mgt_watchdog_comm_memory(c->wd, c->rank);
        mgt__cuda_account(be, (long long)nccl, MGT_MEM_BUFFERS);
        c->nccl_bytes = nccl;
        c->nccl_counted = 1;
    }
    c->in_step = begin != 0;
    c->warm_up = begin == 2;
    c->op_pending = 0;
    snprintf(c->op_desc, sizeof c->op_desc, "%s", begin == 2 ? "the start of the warm-up step" : begin ? "the start of a step" : "no step");
    if (c->wd) mgt_watchdog_step(c->wd, c->rank, begin);
    if (mgt_cuda_fake_note)
        mgt_cuda_fake_note(c->device, begin == 2 ? MGT_NOTE_WARM_UP_BEGIN : begin ? MGT_NOTE_STEP_BEGIN : MGT_NOTE_STEP_END, NULL);
}

/* everything a step uses, from the largest operands (mgt_backend_limits) */
static int mgt__cuda_reserve(mgt_backend *be, const mgt_backend_limits *l) {
    mgt__cuda *c = MGT__CU(be);
    size_t N = (size_t)l->B * (size_t)l->T, work = 0, need;
    if (c->failed) return -1;
    snprintf(c->op_desc, sizeof c->op_desc, "reserving memory for a step");
#define MGT__NEED(x) do { need = (x); if (need > work) work = need; } while (0)
    MGT__NEED(mgt_cuda_attention_backward_scratch(l->B, l->T, l->NH));              /* attention backward: a float per row and head */
    MGT__NEED(mgt_cuda_attention_part_backward_scratch(l->B, l->T, l->NH));         /* ring attention's (on a chunk, T / 2: no more) */
    if (be->dtype != MGT_F32 && l->NH > 0) { /* cuDNN's fused attention: its graphs and plans for the run's shape, now */
        char why[300];
        c->cudnn_attn = mgt_cudnn_attn_create((struct CUstream_st *)c->stream, be->dtype, l->B, l->T, l->NH, l->NKV, l->hs, why, sizeof why);
        if (c->cudnn_attn) MGT__NEED(mgt_cudnn_attn_workspace(c->cudnn_attn)); /* the plan's workspace, the row sums, the fp32 dq */
        else mgt__cuda_note(MGT_LOG_INFO, "device %d: cuDNN attention not used (%s): the own flash-attention kernel runs instead", c->device, why);
    }
    MGT__NEED(mgt_cuda_bias_backward_scratch((int)N, l->OC));                        /* the widest bias */
    MGT__NEED(mgt_cuda_bias_backward_scratch((int)N, l->C));
    MGT__NEED(mgt_cuda_layernorm_backward_scratch((int)N, l->C));
    MGT__NEED(mgt_cuda_encoder_backward_scratch((int)N));                             /* the sort of the embedding's backward */
    MGT__NEED((l->norm_elements / MGT_SS_BLOCK + l->norm_tensors + 1) * sizeof(double)); /* the chunks of the multi-tensor norm */
#undef MGT__NEED
    if (!mgt__cuda_work(c, work)) return -1;
    c->up_slots = l->uploads > 2 ? l->uploads : 2; /* double-buffered at least */
    c->up_slot = (l->upload_bytes + 255) / 256 * 256;
    c->down_bytes = 4096;
    c->up_done = (cudaEvent_t *)calloc((size_t)c->up_slots, sizeof(cudaEvent_t));
    c->up_busy = (unsigned char *)calloc((size_t)c->up_slots, 1);
    if (!c->up_done || !c->up_busy) {
        mgt__cuda_fail(c, "device %d: out of host memory", c->device);
        return -1;
    }
    for (int k = 0; k < c->up_slots; k++)
        if (!mgt__cuda_ok(c, cudaEventCreateWithFlags(&c->up_done[k], cudaEventDisableTiming), "making events")) return -1;
    if (!mgt__cuda_ok(c, cudaHostAlloc((void **)&c->up, (size_t)c->up_slots * c->up_slot + 1, cudaHostAllocDefault), "pinned memory for uploads") ||
        !mgt__cuda_ok(c, cudaHostAlloc((void **)&c->down, c->down_bytes, cudaHostAllocDefault), "pinned memory for downloads"))
        return -1;
    c->reserved = 1; /* (the pinned memory is the host's: not counted among the device's categories) */
    return mgt__cuda_wait(c, "the scratch being made") ? 0 : -1;
}

/* ---- the backend */

/* every kernel the backend can launch, for its storage type and fp32, loaded into the device's context
   now: CUDA would load each at its first launch (CUDA_MODULE_LOADING=LAZY, the default since CUDA
   12.2), which may synchronise the device inside a step while NCCL kernels spin on another stream */
static int mgt__cuda_load_kernels(mgt__cuda *c) {
    mgt_kernel_list l;
    cudaFuncAttributes a;
    l.n = 0;
    MGT__DISPATCH(c, mgt_cuda_kernels<floatX>(l));
    if (c->be.dtype != MGT_F32) mgt_cuda_kernels<float>(l);
    if (l.n > MGT_KERNELS_MAX) {
        mgt__cuda_fail(c, "device %d: %d kernels to load, more than MGT_KERNELS_MAX (%d): raise it in kernels/launchers.h", c->device, l.n,
                       MGT_KERNELS_MAX);
        return 0;
    }
    for (int i = 0; i < l.n; i++)
        if (!mgt__cuda_ok(c, cudaFuncGetAttributes(&a, l.fn[i]), "loading the kernels (cudaFuncGetAttributes)")) return 0;
    return 1;
}

extern "C" void *mgt_cuda_backend_stream(mgt_backend *be) { return MGT__CU(be)->stream; }

extern "C" void mgt_cuda_backend_destroy(mgt_backend *be) {
    mgt__cuda *c = MGT__CU(be);
    if (!c) return;
    cudaSetDevice(c->device);
    int idle = 0;
    if (c->stream && c->ev && cudaEventRecord(c->ev, c->stream) == cudaSuccess) { /* its work ends (bounded: after an abort too) */
        double start = mgt__cuda_now();
        for (int spins = 0;; spins++) {
            cudaError_t q = cudaEventQuery(c->ev);
            if (q == cudaSuccess) { idle = 1; break; }
            (void)cudaGetLastError();
            if (q != cudaErrorNotReady || mgt__cuda_now() - start > mgt_watchdog_timeout(c->wd)) break;
            if (spins < 64) sched_yield();
            else {
                struct timespec ts = {0, 20000L};
                nanosleep(&ts, NULL);
            }
        }
    }
    (void)cudaGetLastError();
    if (idle) { /* memory the stream may still use is left to the process's end */
        cudaFree(c->work);
        cudaFree(c->scalar);
        cudaFree(c->blas_work);
        cudaFreeHost(c->up);
        cudaFreeHost(c->down);
    }
    for (int k = 0; c->up_done && k < c->up_slots; k++)
        if (c->up_done[k]) cudaEventDestroy(c->up_done[k]);
    free(c->up_done);
    free(c->up_busy);
    if (c->nccl_counted) mgt__cuda_account(be, -(long long)c->nccl_bytes, MGT_MEM_BUFFERS);
    if (c->ev) cudaEventDestroy(c->ev);
    for (int k = 0; c->prof_ev && k < c->prof_cap; k++)
        if (c->prof_ev[k]) cudaEventDestroy(c->prof_ev[k]);
    free(c->prof_ev);
    free(c->prof_family);
    mgt_cudnn_attn_destroy(c->cudnn_attn);
    if (c->lt) cublasLtDestroy(c->lt);
    if (c->blas) cublasDestroy(c->blas);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c);
}

extern "C" int mgt_cuda_backend_create(mgt_watchdog *wd, int device, int dtype, mgt_backend **out, char *why, size_t cap) {
    mgt__cuda *c = (mgt__cuda *)calloc(1, sizeof *c);
    mgt_backend *be;
    const char *sync = getenv("MGT_CUDA_SYNC");
    int major = 0;
    *out = NULL;
    if (!c) { snprintf(why, cap, "out of memory"); return -1; }
    be = &c->be;
    c->device = device;
    c->wd = wd;
    c->rank = wd ? mgt_watchdog_rank(wd, device) : -1;
    if (wd && c->rank < 0) {
        free(c);
        snprintf(why, cap, "device %d runs no rank of the world", device);
        return -1;
    }
    c->sync_mode = sync && *sync && strcmp(sync, "0") != 0;
    if (wd) mgt_watchdog_set_last_op(wd, c->rank, mgt__cuda_finish_op, c);
    be->name = "cuda";
    be->dtype = dtype;
    be->elt = dtype == MGT_F32 ? 4 : 2;
    c->type = dtype == MGT_BF16 ? CUDA_R_16BF : dtype == MGT_F16 ? CUDA_R_16F : CUDA_R_32F;
    be->host_memory = 0;
    be->att_lse = 1; /* flash attention saves the logsumexp of each row */
    be->alloc = mgt__cuda_alloc;
    be->free = mgt__cuda_free;
    be->upload = mgt__cuda_upload;
    be->download = mgt__cuda_download;
    be->enter = mgt__cuda_enter;
    be->finish = mgt__cuda_finish;
    be->error = mgt__cuda_error;
    be->encoder_forward = mgt__cuda_encoder_forward;
    be->encoder_backward = mgt__cuda_encoder_backward;
    be->layernorm_forward = mgt__cuda_layernorm_forward;
    be->layernorm_backward = mgt__cuda_layernorm_backward;
    be->matmul_forward = mgt__cuda_matmul_forward;
    be->matmul_backward = mgt__cuda_matmul_backward;
    be->matmul_gelu_forward = mgt__cuda_matmul_gelu_forward;
    be->matmul_gelu_backward = mgt__cuda_matmul_gelu_backward;
    be->attention_forward = mgt__cuda_attention_forward;
    be->attention_backward = mgt__cuda_attention_backward;
    be->attention_part_forward = mgt__cuda_attention_part_forward;
    be->attention_part_backward = mgt__cuda_attention_part_backward;
    be->copy_cols = mgt__cuda_copy_cols;
    be->gelu_forward = mgt__cuda_gelu_forward;
    be->gelu_backward = mgt__cuda_gelu_backward;
    be->rmsnorm_forward = mgt__cuda_rmsnorm_forward;
    be->rmsnorm_backward = mgt__cuda_rmsnorm_backward;
    be->rope_forward = mgt__cuda_rope_forward;
    be->rope_backward = mgt__cuda_rope_backward;
    be->swiglu_forward = mgt__cuda_swiglu_forward;
    be->swiglu_backward = mgt__cuda_swiglu_backward;
    be->add_inplace = mgt__cuda_add_inplace;
    be->bias_residual = mgt__cuda_bias_residual;
    be->residual_layernorm_forward = mgt__cuda_residual_layernorm_forward;
    be->bias_backward = mgt__cuda_bias_backward;
    be->xent_partial = mgt__cuda_xent_partial;
    be->xent_finish = mgt__cuda_xent_finish;
    be->sum_squares = mgt__cuda_sum_squares;
    be->adamw = mgt__cuda_adamw;
    be->adamw_many = mgt__cuda_adamw_many;
    be->scale = mgt__cuda_scale;
    be->zero = mgt__cuda_zero;
    be->cast = mgt__cuda_cast;
    be->reserve = mgt__cuda_reserve;
    be->step = mgt__cuda_step;
    be->profile = mgt__cuda_profile;
    be->sum_squares_many = mgt__cuda_sum_squares_many;
    be->sum_doubles = mgt__cuda_sum_doubles;
    be->impl = c;
    snprintf(c->op_desc, sizeof c->op_desc, "making the backend");
    /* a cuBLAS workspace of its own (cuBLAS's recommendation: 32 MiB on Hopper and later, 4 MiB before),
       so its first GEMM allocates nothing */
    if (mgt__cuda_ok(c, cudaSetDevice(device), "cudaSetDevice") && mgt__cuda_load_kernels(c) &&
        mgt__cuda_ok(c, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "making a stream") &&
        mgt__cuda_ok(c, cudaEventCreateWithFlags(&c->ev, cudaEventDisableTiming), "making an event") &&
        mgt__cuda_ok(c, cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "reading the compute capability") &&
        mgt__blas_ok(c, cublasCreate(&c->blas), "cublasCreate") && mgt__blas_ok(c, cublasSetStream(c->blas, c->stream), "cublasSetStream") &&
        mgt__blas_ok(c, cublasLtCreate(&c->lt), "cublasLtCreate") &&
        mgt__cuda_ok(c, cudaMalloc(&c->blas_work, c->blas_work_bytes = major >= 9 ? (size_t)32 << 20 : (size_t)4 << 20), "the cuBLAS workspace") &&
        mgt__blas_ok(c, cublasSetWorkspace(c->blas, c->blas_work, c->blas_work_bytes), "cublasSetWorkspace") &&
        mgt__cuda_ok(c, cudaMalloc((void **)&c->scalar, 2 * sizeof(double)), "cudaMalloc") &&
        mgt__cuda_ok(c, cudaMemsetAsync(c->scalar, 0, 2 * sizeof(double), c->stream), "zeroing the ticket")) {
        c->ticket = (unsigned *)(c->scalar + 1);
        mgt__cuda_account(be, (long long)c->blas_work_bytes, MGT_MEM_WORKSPACE);
        *out = be;
        return 0;
    }
    snprintf(why, cap, "%s", c->error);
    mgt_cuda_backend_destroy(be);
    return -1;
}
