/* mgt_onednn.c - bf16 GEMMs for mgt's CPU backend through oneDNN's matmul, built by `ninja onednn`
   into build/libmgt_onednn.so.

   mgt.h never includes or links oneDNN: a bf16 CPU backend opens this library with dlopen
   (mgt_onednn_load) and multiplies through the table below, so ./mgt runs where oneDNN is absent
   and falls back to widening into sgemm. Only this file is compiled against oneDNN's headers
   (Debian's libdnnl-dev: oneDNN 2.x; the 3.x API where it is newer).

   Each call runs on the calling thread: mgt's pool splits a GEMM into blocks, one per thread, as it
   does for sgemm, so oneDNN's own OpenMP team is kept to one thread (a second set of threads
   spinning beside the pool's would take their cores). Plans are cached by shape; the scratchpad is
   the caller's (user mode, one buffer per thread), which makes one plan safe to run from every
   thread at once. */
#define _POSIX_C_SOURCE 200809L /* posix_memalign under -std=c99 */
#include <omp.h>     /* defines: omp_set_num_threads */
#include <pthread.h> /* defines: pthread_mutex_t, pthread_key_t */
#include <stdio.h>   /* defines: snprintf */
#include <stdlib.h>  /* defines: calloc, free, posix_memalign */
#include <stdint.h>  /* defines: uint16_t */
#include <string.h>  /* defines: strstr, memset */

#include <oneapi/dnnl/dnnl.h> /* defines: dnnl_matmul, dnnl_memory_create, dnnl_primitive_execute */

#include "mgt.h" /* defines: mgt_onednn_api, MGT_ONEDNN_ABI */

#define PLANS 512 /* shapes cached: a model has a few dozen (each GEMM's, split over the threads) */

/* oneDNN's brgemm matmul accumulates a bf16 C in an fp32 buffer of all of C (its scratchpad): for
   the classifier's logits (512 x 50257 a thread) 98 MiB a thread. A bf16 C of more than this many
   elements is therefore computed in column chunks of at most this size, each against its own columns
   of B (A, the smaller operand, is read again per chunk). */
#define CHUNK_ELEMS (1 << 20)

typedef struct part { /* one primitive: C's columns [0, cols) of a chunk, or the last chunk's */
    int cols;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t b, bias, c; /* 2.x: structs; 3.x: handles (kept for the plan's life) */
} part;
typedef struct plan {
    int key[11]; /* ta, tb, M, N, K, lda, ldb, ldc, bias, c_bf16, accumulate */
    dnnl_memory_desc_t a;
    part parts[2]; /* the chunk, and the narrower last one (cols 0 when N is a multiple) */
    size_t scratch; /* bytes: the larger of the parts' */
} plan;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static plan plans[PLANS];
static int plans_n;
static dnnl_engine_t engine;
static pthread_key_t thread_key; /* each thread's thread_state */
static int ready;

typedef struct thread_state { /* each calling thread's: its stream and scratchpad */
    dnnl_stream_t stream;
    size_t bytes;
    void *scratch;
} thread_state;
static void thread_end(void *p) {
    thread_state *t = (thread_state *)p;
    if (t->stream) dnnl_stream_destroy(t->stream);
    free(t->scratch);
    free(t);
}

static void status_text(dnnl_status_t s, const char *call, char *why, size_t cap) {
    snprintf(why, cap, "oneDNN %s failed: status %d (%s)", call, (int)s,
             s == dnnl_unimplemented ? "no implementation for this shape and these types" : s == dnnl_out_of_memory ? "out of memory" :
             s == dnnl_invalid_arguments ? "invalid arguments" : "error");
}

/* the engine, once (under mu) */
static int start(char *why, size_t cap) {
    dnnl_status_t s;
    if (ready) return 0;
    s = dnnl_engine_create(&engine, dnnl_cpu, 0);
    if (s != dnnl_success) { status_text(s, "dnnl_engine_create", why, cap); return -1; }
    if (pthread_key_create(&thread_key, thread_end)) { snprintf(why, cap, "pthread_key_create failed"); return -1; }
    ready = 1;
    return 0;
}

/* a row-major matrix of rows x cols, transposed in memory when `trans` (its rows are ld apart) */
static dnnl_status_t matrix(dnnl_memory_desc_t *md, int rows, int cols, int ld, int trans, dnnl_data_type_t type) {
    dnnl_dims_t dims = {rows, cols}, strides = {trans ? 1 : ld, trans ? ld : 1};
#if DNNL_VERSION_MAJOR >= 3
    return dnnl_memory_desc_create_with_strides(md, 2, dims, type, strides);
#else
    return dnnl_memory_desc_init_by_strides(md, 2, dims, type, strides);
#endif
}

#if DNNL_VERSION_MAJOR >= 3
#define MD(x) (x)
#else
#define MD(x) (&(x))
#endif

/* plan p's primitive for a chunk of `cols` columns of C */
static dnnl_status_t make_part(plan *p, part *q, int cols, const char **call) {
    int tb = p->key[1], M = p->key[2], K = p->key[4], ldb = p->key[6], ldc = p->key[7], bias = p->key[8];
    int c_bf16 = p->key[9], accumulate = p->key[10];
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t post = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s;
    size_t scratch;
    q->cols = cols;
#define TRY(x) do { *call = #x; if ((s = (x)) != dnnl_success) goto done; } while (0)
    TRY(matrix(&q->b, K, cols, ldb, tb, dnnl_bf16));
    TRY(matrix(&q->c, M, cols, ldc, 0, c_bf16 ? dnnl_bf16 : dnnl_f32));
    if (bias) TRY(matrix(&q->bias, 1, cols, cols, 0, dnnl_bf16));
    TRY(dnnl_primitive_attr_create(&attr));
    TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    if (accumulate) {
        TRY(dnnl_post_ops_create(&post));
#if DNNL_VERSION_MAJOR >= 3
        TRY(dnnl_post_ops_append_sum(post, 1.0f, 0, dnnl_data_type_undef));
#else
        TRY(dnnl_post_ops_append_sum(post, 1.0f));
#endif
        TRY(dnnl_primitive_attr_set_post_ops(attr, post));
    }
#if DNNL_VERSION_MAJOR >= 3
    TRY(dnnl_matmul_primitive_desc_create(&pd, engine, p->a, q->b, bias ? q->bias : NULL, q->c, attr));
#else
    {
        dnnl_matmul_desc_t desc;
        TRY(dnnl_matmul_desc_init(&desc, &p->a, &q->b, bias ? &q->bias : NULL, &q->c));
        TRY(dnnl_primitive_desc_create(&pd, &desc, attr, engine, NULL));
    }
#endif
    scratch = dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0));
    if (scratch > p->scratch) p->scratch = scratch;
    TRY(dnnl_primitive_create(&q->prim, pd));
#undef TRY
done:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (post) dnnl_post_ops_destroy(post);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return s;
}

static void *make_plan(int ta, int tb, int M, int N, int K, int lda, int ldb, int ldc, int bias, int c_bf16, int accumulate, char *why,
                       size_t cap) {
    int key[11] = {ta, tb, M, N, K, lda, ldb, ldc, bias, c_bf16, accumulate}, i, chunk = N;
    plan *p = NULL;
    dnnl_status_t s;
    const char *call = "";
    omp_set_num_threads(1); /* before oneDNN's first parallel region on this thread: a team started here would outlive every call */
    pthread_mutex_lock(&mu);
    for (i = 0; i < plans_n; i++)
        if (!memcmp(plans[i].key, key, sizeof key)) { p = &plans[i]; break; }
    if (p) { pthread_mutex_unlock(&mu); return p; }
    if (start(why, cap)) { pthread_mutex_unlock(&mu); return NULL; }
    if (plans_n == PLANS) {
        snprintf(why, cap, "more than %d GEMM shapes: mgt_onednn.c's PLANS is too small", PLANS);
        pthread_mutex_unlock(&mu);
        return NULL;
    }
    p = &plans[plans_n];
    memset(p, 0, sizeof *p);
    memcpy(p->key, key, sizeof key);
    if (c_bf16 && (size_t)M * (size_t)N > CHUNK_ELEMS) { /* columns a chunk: a multiple of 64, at least 64 */
        chunk = (int)(CHUNK_ELEMS / (size_t)M) / 64 * 64;
        chunk = chunk < 64 ? 64 : chunk < N ? chunk : N;
    }
    call = "matrix(&p->a)";
    if ((s = matrix(&p->a, M, K, lda, ta, dnnl_bf16)) != dnnl_success) goto fail;
    if ((s = make_part(p, &p->parts[0], chunk, &call)) != dnnl_success) goto fail;
    if (N % chunk && (s = make_part(p, &p->parts[1], N % chunk, &call)) != dnnl_success) goto fail;
    plans_n++;
    pthread_mutex_unlock(&mu);
    return p;
fail:
    status_text(s, call, why, cap);
    snprintf(why + strlen(why), cap - strlen(why), " for a %dx%dx%d bf16 GEMM", M, N, K);
    for (i = 0; i < 2; i++)
        if (p->parts[i].prim) dnnl_primitive_destroy(p->parts[i].prim);
    pthread_mutex_unlock(&mu);
    return NULL;
}

/* this thread's stream and a scratchpad of at least `bytes`, its OpenMP team set to one thread
   the first time; NULL when out of memory */
static thread_state *thread_get(size_t bytes, char *why, size_t cap) {
    thread_state *t = (thread_state *)pthread_getspecific(thread_key);
    dnnl_status_t s;
    omp_set_num_threads(1); /* this thread's OpenMP team: itself alone (a per-thread setting, so set on every call) */
    if (!t) {
        t = (thread_state *)calloc(1, sizeof *t);
        if (!t) { snprintf(why, cap, "out of memory for a thread's oneDNN state"); return NULL; }
        if ((s = dnnl_stream_create(&t->stream, engine, dnnl_stream_default_flags)) != dnnl_success) {
            status_text(s, "dnnl_stream_create", why, cap);
            free(t);
            return NULL;
        }
        pthread_setspecific(thread_key, t);
    }
    if (t->bytes < bytes) {
        void *grown = NULL;
        if (posix_memalign(&grown, 64, bytes)) { snprintf(why, cap, "out of memory for a oneDNN scratchpad of %zu bytes", bytes); return NULL; }
        free(t->scratch);
        t->scratch = grown;
        t->bytes = bytes;
    }
    return t;
}

/* one part's primitive on columns [j0, j0 + q->cols) of B, bias and C */
static dnnl_status_t run_part(const plan *p, const part *q, thread_state *t, const void *A, const void *B, const void *bias, void *C,
                              const char **call) {
    dnnl_memory_t mem[5] = {NULL, NULL, NULL, NULL, NULL};
    dnnl_exec_arg_t args[5];
    dnnl_status_t s = dnnl_success;
    int n = 0, i;
#define TRY(x) do { *call = #x; if ((s = (x)) != dnnl_success) goto done; } while (0)
    TRY(dnnl_memory_create(&mem[0], MD(p->a), engine, (void *)A));
    TRY(dnnl_memory_create(&mem[1], MD(q->b), engine, (void *)B));
    TRY(dnnl_memory_create(&mem[2], MD(q->c), engine, C));
    args[0].arg = DNNL_ARG_SRC; args[0].memory = mem[0];
    args[1].arg = DNNL_ARG_WEIGHTS; args[1].memory = mem[1];
    args[2].arg = DNNL_ARG_DST; args[2].memory = mem[2];
    n = 3;
    if (p->key[8]) {
        TRY(dnnl_memory_create(&mem[3], MD(q->bias), engine, (void *)bias));
        args[n].arg = DNNL_ARG_BIAS; args[n++].memory = mem[3];
    }
    if (p->scratch) {
        dnnl_memory_desc_t sd;
        dnnl_dims_t dims = {(dnnl_dim_t)p->scratch};
#if DNNL_VERSION_MAJOR >= 3
        TRY(dnnl_memory_desc_create_with_tag(&sd, 1, dims, dnnl_u8, dnnl_a));
        s = dnnl_memory_create(&mem[4], sd, engine, t->scratch);
        dnnl_memory_desc_destroy(sd);
        *call = "dnnl_memory_create";
        if (s != dnnl_success) goto done;
#else
        TRY(dnnl_memory_desc_init_by_tag(&sd, 1, dims, dnnl_u8, dnnl_a));
        TRY(dnnl_memory_create(&mem[4], &sd, engine, t->scratch));
#endif
        args[n].arg = DNNL_ARG_SCRATCHPAD; args[n++].memory = mem[4];
    }
    TRY(dnnl_primitive_execute(q->prim, t->stream, n, args));
    TRY(dnnl_stream_wait(t->stream));
#undef TRY
done:
    for (i = 0; i < 5; i++)
        if (mem[i]) dnnl_memory_destroy(mem[i]);
    return s;
}

static int run(void *handle, const void *A, const void *B, const void *bias, void *C, char *why, size_t cap) {
    const plan *p = (const plan *)handle;
    int tb = p->key[1], N = p->key[3], ldb = p->key[6], csize = p->key[9] ? 2 : 4, j0;
    dnnl_status_t s = dnnl_success;
    const char *call = "";
    thread_state *t = thread_get(p->scratch, why, cap);
    if (!t) return -1;
    for (j0 = 0; j0 < N && s == dnnl_success; j0 += p->parts[0].cols) { /* B's column j is its row j when transposed */
        const part *q = N - j0 < p->parts[0].cols ? &p->parts[1] : &p->parts[0];
        s = run_part(p, q, t, A, (const uint16_t *)B + (tb ? (size_t)j0 * (size_t)ldb : (size_t)j0), bias ? (const uint16_t *)bias + j0 : NULL,
                     (char *)C + (size_t)j0 * (size_t)csize, &call);
    }
    if (s != dnnl_success) { status_text(s, call, why, cap); return -1; }
    return 0;
}

static int describe(char *out, size_t cap) {
    const dnnl_version_t *v = dnnl_version();
    const char *impl = "";
    char why[300] = "";
    int uses_bf16;
    plan *p = (plan *)make_plan(0, 1, 256, 256, 256, 256, 256, 256, 0, 0, 0, why, sizeof why);
    if (!p) { snprintf(out, cap, "oneDNN %d.%d.%d: %s", v->major, v->minor, v->patch, why); return 0; }
    {
        const_dnnl_primitive_desc_t pd = NULL;
        if (dnnl_primitive_get_primitive_desc(p->parts[0].prim, &pd) != dnnl_success || dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success)
            impl = "unknown";
    }
    /* brgemm and jit kernels name their ISA: avx512_core_bf16 and amx use bf16 instructions; plain
       avx512_core or avx2 would convert to fp32 first, no faster than mgt's own widening */
    uses_bf16 = strstr(impl, "bf16") != NULL || strstr(impl, "amx") != NULL;
    snprintf(out, cap, "oneDNN %d.%d.%d, %s%s", v->major, v->minor, v->patch, impl, uses_bf16 ? "" : " (no bf16 instructions on this CPU)");
    return uses_bf16;
}

static const mgt_onednn_api api = {MGT_ONEDNN_ABI, describe, make_plan, run};

const mgt_onednn_api *mgt_onednn_api_get(void);
const mgt_onednn_api *mgt_onednn_api_get(void) { return &api; }
