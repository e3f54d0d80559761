/* src/blas.c - the BLAS: OpenBLAS's threads and core type settled, single-threaded sgemm calls from
   the pools' threads, split over them; bf16 GEMMs through oneDNN */
/* ---- BLAS: single-threaded calls from the pools' threads, at most mgt__blas.slots at a time ------
   Every thread of every rank's pool calls cblas_sgemm on its own block, so BLAS must run each call
   on the calling thread and start no threads of its own. OpenBLAS's pthreads build (Debian's
   default) starts them in a library constructor, before main, from OPENBLAS_NUM_THREADS or the core
   count: each idles here but holds a GEMM buffer (128 MiB of address space), and one that cannot
   allocate it (a tight ulimit -v) retries forever, so the program never exits (exit joins it). The
   driver therefore runs with OPENBLAS_NUM_THREADS=1 (mgt.c); a program that embeds mgt.h should
   too. At its first CPU backend the library sets OpenBLAS to one thread and stops threads it had
   started (as OpenBLAS's own fork handler does), which helps where they got their buffers.
   OpenBLAS hands each call a buffer from a pool sized when it was built (2 x MAX_THREADS, at least
   50: 128 for Debian's): a call that finds none free prints "This library was built to support a
   maximum of 128 threads" and crashes, and one whose buffer cannot be allocated retries forever.
   So at most `slots` calls run at once (the cores: more would only take turns, and never more than
   the pool), and OpenBLAS allocates those `slots` buffers when the first CPU backend is created,
   after a check that the address space has room for them: a run that does not fit fails there
   with the numbers (MGT_ERROR_MEMORY), before its own memory, never inside a GEMM. Other BLAS
   libraries (no OpenBLAS symbols) are only limited to `slots` calls at a time. */
#if defined(__GNUC__) || defined(__clang__)
extern void openblas_set_num_threads(int) __attribute__((weak));
extern int openblas_get_num_threads(void) __attribute__((weak));
extern int openblas_get_parallel(void) __attribute__((weak)); /* 0 serial, 1 pthreads, 2 OpenMP */
extern char *openblas_get_config(void) __attribute__((weak)); /* "... MAX_THREADS=64" */
extern void *blas_memory_alloc(int) __attribute__((weak));    /* its GEMM buffers (exported, internal) */
extern void blas_memory_free(void *) __attribute__((weak));
extern int blas_thread_shutdown_(void) __attribute__((weak)); /* stops its threads (its fork handler's call) */
#define MGT__OPENBLAS(fn) (fn) /* NULL where the BLAS is not OpenBLAS */
#else
#define MGT__OPENBLAS(fn) NULL /* no weak symbols: OpenBLAS is left as it is */
#endif

static struct {
    pthread_mutex_t mu;
    pthread_cond_t free_slot;
    int slots, busy;       /* calls allowed at once (0: not set up yet), calls running */
    int ready;             /* OpenBLAS holds `slots` buffers (or is not OpenBLAS) */
    int openblas_threads;  /* OpenBLAS's threads when mgt first looked, the calling one included */
    size_t buffer_bytes;   /* address space of one OpenBLAS buffer, as measured (0: not yet) */
    void (*set_threads)(int);
    int (*get_threads)(void), (*parallel)(void), (*shutdown)(void);
    char *(*config)(void);
    void *(*alloc)(int);
    void (*release)(void *);
} mgt__blas = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL};

#define MGT__BLAS_BUFFER_GUESS ((size_t)128 << 20) /* x86-64 OpenBLAS builds; measured once allocated */

/* the process's mapped address space (VmSize) and resident memory, in bytes; 0 when unknown */
static void mgt__self_memory(double *mapped, double *resident) {
    unsigned long long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%llu %llu", &pages, &rss) != 2) pages = rss = 0;
        fclose(f);
    }
    if (mapped) *mapped = (double)pages * (double)sysconf(_SC_PAGESIZE);
    if (resident) *resident = (double)rss * (double)sysconf(_SC_PAGESIZE);
}

/* sets `slots` (under mu): the cores, and no more than OpenBLAS's buffer pool less its threads' */
static void mgt__blas_setup_locked(void) {
    int pool = 0;
    const char *c;
    if (mgt__blas.slots) return;
    mgt__blas.set_threads = MGT__OPENBLAS(openblas_set_num_threads);
    mgt__blas.get_threads = MGT__OPENBLAS(openblas_get_num_threads);
    mgt__blas.parallel = MGT__OPENBLAS(openblas_get_parallel);
    mgt__blas.shutdown = MGT__OPENBLAS(blas_thread_shutdown_);
    mgt__blas.config = MGT__OPENBLAS(openblas_get_config);
    mgt__blas.alloc = MGT__OPENBLAS(blas_memory_alloc);
    mgt__blas.release = MGT__OPENBLAS(blas_memory_free);
    c = mgt__blas.config ? mgt__blas.config() : NULL;
    if (c && strstr(c, "MAX_THREADS=")) pool = 2 * atoi(strstr(c, "MAX_THREADS=") + 12);
    if (c && pool < 50) pool = 50;
    mgt__blas.openblas_threads = mgt__blas.get_threads ? mgt__blas.get_threads() : 1;
    mgt__blas.slots = mgt_cpu_count();
    if (pool && mgt__blas.slots > pool - mgt__blas.openblas_threads) mgt__blas.slots = pool - mgt__blas.openblas_threads;
    if (mgt__blas.slots < 1) mgt__blas.slots = 1;
}

MGTDEF void mgt_blas_describe(char *out, size_t cap, int *threads) {
    const char *c;
    pthread_mutex_lock(&mgt__blas.mu);
    mgt__blas_setup_locked();
    c = mgt__blas.config ? mgt__blas.config() : NULL;
    if (threads) *threads = mgt__blas.get_threads ? mgt__blas.get_threads() : 0;
    if (c) snprintf(out, cap, "%s (%s)", c, !mgt__blas.parallel ? "threading unknown" : mgt__blas.parallel() == 0 ? "serial" :
                                          mgt__blas.parallel() == 1 ? "pthreads" : "OpenMP");
    else snprintf(out, cap, "a CBLAS that is not OpenBLAS (no openblas_get_config): mgt limits it to one call per core, nothing more");
    pthread_mutex_unlock(&mgt__blas.mu);
}

/* calls allowed at once, and the address space OpenBLAS's buffers for them still need */
static int mgt__blas_slots(size_t *still_needed) {
    int n;
    pthread_mutex_lock(&mgt__blas.mu);
    mgt__blas_setup_locked();
    n = mgt__blas.slots;
    if (still_needed)
        *still_needed = mgt__blas.ready || !mgt__blas.alloc ? 0
                        : (size_t)n * (mgt__blas.buffer_bytes ? mgt__blas.buffer_bytes : MGT__BLAS_BUFFER_GUESS);
    pthread_mutex_unlock(&mgt__blas.mu);
    return n;
}

/* once per process, from the first CPU backend: one thread, OpenBLAS's own threads stopped, and
   `slots` buffers allocated, each after a probe of the address space it needs */
static mgt_result mgt__blas_prepare(void) {
    mgt_result res = MGT_OK;
    pthread_mutex_lock(&mgt__blas.mu);
    mgt__blas_setup_locked();
    if (!mgt__blas.ready) {
        void *held[4096];
        int n = 0, i, want = mgt__blas.slots < 4096 ? mgt__blas.slots : 4096;
        if (mgt__blas.set_threads) mgt__blas.set_threads(1); /* before the shutdown, which it would undo */
        if (mgt__blas.shutdown && mgt__blas.parallel && mgt__blas.parallel() == 1 && mgt__blas.openblas_threads > 1) mgt__blas.shutdown();
        for (; mgt__blas.alloc && mgt__blas.release && n < want; n++) {
            size_t probe = mgt__blas.buffer_bytes ? mgt__blas.buffer_bytes + ((size_t)1 << 20) : 2 * MGT__BLAS_BUFFER_GUESS;
            double before, after;
            void *p = malloc(probe); /* libc: a probe of address space (a fresh mapping, never touched), not memory mgt keeps */
            if (!p) {
                double have, mapped;
                struct rlimit lim;
                char limit[160] = "";
                mgt__self_memory(&mapped, NULL);
                have = getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY ? (double)lim.rlim_cur : -1;
                if (have >= 0) snprintf(limit, sizeof limit, " of the %.0f MiB that ulimit -v (RLIMIT_AS) allows; raise ulimit -v", have / 1048576.0);
                res = mgt__fail(MGT_ERROR_MEMORY,
                                "out of memory: OpenBLAS needs a buffer of %.0f MiB of address space for each GEMM running at once (%d here, one per "
                                "core) and there is no room for %s: this process maps %.0f MiB%s%s",
                                (double)(mgt__blas.buffer_bytes ? mgt__blas.buffer_bytes : MGT__BLAS_BUFFER_GUESS) / 1048576.0, want,
                                n ? "the next" : "the first", mapped / 1048576.0, limit,
                                mgt__blas.openblas_threads > 1 ? "; OPENBLAS_NUM_THREADS=1 in the environment keeps OpenBLAS's own threads from taking theirs" : "");
                break;
            }
            free(p); /* libc: the probe's */
            mgt__self_memory(&before, NULL);
            held[n] = mgt__blas.alloc(0);
            mgt__self_memory(&after, NULL);
            if (after > before && (size_t)(after - before) > mgt__blas.buffer_bytes) mgt__blas.buffer_bytes = (size_t)(after - before);
        }
        for (i = 0; i < n; i++) if (held[i]) mgt__blas.release(held[i]);
        mgt__blas.ready = res == MGT_OK;
    }
    pthread_mutex_unlock(&mgt__blas.mu);
    return res;
}

/* C = alpha op(A) op(B) + beta C on the calling thread, waiting while `slots` calls run */
static void mgt__sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                       float *C, int ldc) {
    pthread_mutex_lock(&mgt__blas.mu);
    mgt__blas_setup_locked();
    while (mgt__blas.busy >= mgt__blas.slots) pthread_cond_wait(&mgt__blas.free_slot, &mgt__blas.mu);
    mgt__blas.busy++;
    pthread_mutex_unlock(&mgt__blas.mu);
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    pthread_mutex_lock(&mgt__blas.mu);
    mgt__blas.busy--;
    pthread_cond_signal(&mgt__blas.free_slot);
    pthread_mutex_unlock(&mgt__blas.mu);
}

/* sgemm on row-major matrices, split across the pool along the larger of M and N.
   Each thread calls a single-threaded BLAS on its block, so the rank owns its cores. */
typedef struct mgt__gemm_args {
    int ta, tb, M, N, K, lda, ldb, ldc;
    float alpha, beta;
    const float *A, *B;
    float *C;
    const float *bias; /* optional (N): C rows start as bias and beta must be 1 */
} mgt__gemm_args;

/* A thread's block of a GEMM, as every CPU GEMM is split: along M (rows of C) when M >= N, else
   along N (columns of C); [lo, hi) along the split, and where the block starts in A, B, C and the
   bias, in elements */
typedef struct mgt__gemm_block { int split_m; size_t lo, hi, a, b, c, bias; } mgt__gemm_block;
static mgt__gemm_block mgt__gemm_block_of(int M, int N, int ta, int tb, int lda, int ldb, int ldc, int tid, int nth) {
    mgt__gemm_block k;
    int split_m = k.split_m = M >= N;
    mgt__span((size_t)(split_m ? M : N), tid, nth, 16, &k.lo, &k.hi);
    k.a = split_m ? (ta ? k.lo : k.lo * (size_t)lda) : 0;
    k.b = split_m ? 0 : (tb ? k.lo * (size_t)ldb : k.lo);
    k.c = split_m ? k.lo * (size_t)ldc : k.lo;
    k.bias = split_m ? 0 : k.lo;
    return k;
}

static void mgt__gemm_task(void *ctx, int tid, int nth) {
    const mgt__gemm_args *g = (const mgt__gemm_args *)ctx;
    mgt__gemm_block k = mgt__gemm_block_of(g->M, g->N, g->ta, g->tb, g->lda, g->ldb, g->ldc, tid, nth);
    float *Cm = g->C + k.c;
    int M = k.split_m ? (int)(k.hi - k.lo) : g->M, N = k.split_m ? g->N : (int)(k.hi - k.lo), i;
    if (k.hi <= k.lo) return;
    if (g->bias)
        for (i = 0; i < M; i++) memcpy(Cm + (size_t)i * (size_t)g->ldc, g->bias + k.bias, sizeof(float) * (size_t)N);
    mgt__sgemm(g->ta, g->tb, M, N, g->K, g->alpha, g->A + k.a, g->lda, g->B + k.b, g->ldb, g->beta, Cm, g->ldc);
}

/* ---- bf16 GEMMs: oneDNN's matmul through build/libmgt_onednn.so (onednn/mgt_onednn.c) ----------- */
static pthread_mutex_t mgt__onednn_mu = PTHREAD_MUTEX_INITIALIZER;
static const mgt_onednn_api *mgt__onednn_api;
static int mgt__onednn_bf16 = -1; /* its kernel uses bf16 instructions (-1: not asked yet) */
static char mgt__onednn_why[800], mgt__onednn_text[300];

static const mgt__dl_lib mgt__onednn_lib = {"MGT_ONEDNN_LIBRARY", "libmgt_onednn.so", "mgt_onednn_api_get", "oneDNN", "ninja onednn", MGT_ONEDNN_ABI};

MGTDEF const mgt_onednn_api *mgt_onednn_load(char *why, size_t cap) {
    const mgt_onednn_api *api;
    pthread_mutex_lock(&mgt__onednn_mu);
    if (!mgt__onednn_api && !mgt__onednn_why[0]) {
        char tried[600] = "";
        const char *env = getenv("MGT_ONEDNN_LIBRARY");
        if (env && !strcmp(env, "off")) snprintf(mgt__onednn_why, sizeof mgt__onednn_why, "turned off by MGT_ONEDNN_LIBRARY=off");
        else mgt__onednn_api = (const mgt_onednn_api *)mgt__dl_search(&mgt__onednn_lib, tried, sizeof tried);
        if (!mgt__onednn_api && !mgt__onednn_why[0])
            snprintf(mgt__onednn_why, sizeof mgt__onednn_why, "the oneDNN library is not built or cannot load (%s); build it with `ninja onednn` "
                     "(needs libdnnl-dev)", tried[0] ? tried : "not found");
    }
    api = mgt__onednn_api;
    if (!api && why) mgt__strlcpy(why, mgt__onednn_why, cap);
    pthread_mutex_unlock(&mgt__onednn_mu);
    return api;
}

/* oneDNN's table when a bf16 backend should use it (it loads and its kernel has bf16 instructions), else NULL */
static const mgt_onednn_api *mgt__onednn_for_bf16(void) {
    const mgt_onednn_api *api = mgt_onednn_load(NULL, 0);
    pthread_mutex_lock(&mgt__onednn_mu);
    if (api && mgt__onednn_bf16 < 0) mgt__onednn_bf16 = api->describe(mgt__onednn_text, sizeof mgt__onednn_text);
    pthread_mutex_unlock(&mgt__onednn_mu);
    return api && mgt__onednn_bf16 == 1 ? api : NULL;
}

/* whether a CPU backend of this storage type widens its GEMMs' operands to fp32 (its workspace
   then holds them): every 16-bit type but bf16 where oneDNN serves it */
static int mgt__cpu_widens_gemms(int dtype) { return dtype != MGT_F32 && !(dtype == MGT_BF16 && mgt__onednn_for_bf16()); }

MGTDEF int mgt_cpu_bf16_gemm(char *out, size_t cap) {
    char why[800] = "";
    const mgt_onednn_api *api = mgt_onednn_load(why, sizeof why);
    int use = mgt__onednn_for_bf16() != NULL;
    if (use) snprintf(out, cap, "%s", mgt__onednn_text);
    else if (api) snprintf(out, cap, "fp32 sgemm on widened copies: %s", mgt__onednn_text);
    else snprintf(out, cap, "fp32 sgemm on widened copies: %s", why);
    return use;
}
