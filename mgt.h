/* mgt.h - v0.1.0 - train GPT-style transformers from an INI preset - MIT licence (see end of file)

   USAGE
     Define MGT_IMPLEMENTATION in exactly one C or C++ file before including this header:

        #define MGT_IMPLEMENTATION
        #include "mgt.h"

     Other files include it without the define. Link with inih (`pkg-config --libs inih`), a CBLAS
     (`pkg-config --libs openblas`, or any library that provides cblas_sgemm), -lpthread and -lm.

   CONTENTS
     1. results and errors        mgt_result, mgt_last_error(), mgt_set_logger()
     2. presets                   mgt_config: one X-macro table of every key (MGT_CONFIG_KEYS)
     3. runs                      mgt_run: create, step, evaluate, checkpoint, resume, sample, stats
     4. data                      llm.c token shards (.bin), memory-mapped, sampled from (seed, step)
     5. checkpoints               safetensors files of named, layout-independent tensors
     6. implementation            thread pool, CPU backend (CBLAS + plain loops), model, AdamW

   OPTIONS (define before including; "everywhere" = in every file that includes mgt.h)
     MGT_STATIC          everywhere: make every function static (private copy per translation unit)
     MGT_NO_STDIO        beside MGT_IMPLEMENTATION: no FILE* helpers (mgt_config_fprint)
     MGT_MALLOC/MGT_FREE beside MGT_IMPLEMENTATION: allocator hooks, define both or neither

   EXAMPLE
        mgt_config cfg;
        mgt_run *run;
        mgt_stats st;
        mgt_config_init(&cfg);
        if (mgt_config_load(&cfg, "presets/quickstart.ini") != MGT_OK ||
            mgt_run_create(&run, &cfg) != MGT_OK) { fprintf(stderr, "%s\n", mgt_last_error()); return 2; }
        for (int i = 0; i < 10; i++) mgt_run_step(run);
        mgt_run_stats(run, &st);
        printf("step %d loss %.4f %.0f tok/s\n", st.step, st.loss, st.tokens_per_s);
        mgt_run_destroy(run);

   ERRORS
     Functions return an mgt_result: MGT_OK (0) or a negative code. The library never exits and never
     prints; the message of the last error on the calling thread is mgt_last_error(), and an optional
     logger (mgt_set_logger) receives warnings and information.
*/
/* POSIX functions of the implementation (mmap, pread, fsync, clock_gettime); include mgt.h first,
   or compile with -D_GNU_SOURCE, when another header comes before it */
#if defined(MGT_IMPLEMENTATION) && !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#ifndef MGT_H_INCLUDED
#define MGT_H_INCLUDED

#define MGT_VERSION_MAJOR 0
#define MGT_VERSION_MINOR 1
#define MGT_VERSION_PATCH 0
#define MGT_VERSION_STRING "0.1.0"

#include <stddef.h> /* defines: size_t */
#include <stdint.h> /* defines: uint16_t, uint64_t */
#ifndef MGT_NO_STDIO
#include <stdio.h> /* defines: FILE */
#endif

#ifndef MGTDEF
#ifdef MGT_STATIC
#if defined(__GNUC__) || defined(__clang__)
#define MGTDEF static __attribute__((unused)) /* a private copy need not use every function */
#else
#define MGTDEF static
#endif
#else
#define MGTDEF extern
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- 1. results and errors ------------------------------------------------------------------ */

#define MGT_RESULTS(X)                                                    \
    X(MGT_OK, 0, "ok")                                                    \
    X(MGT_ERROR_ARGUMENT, -1, "invalid argument")                         \
    X(MGT_ERROR_CONFIG, -2, "invalid preset")                             \
    X(MGT_ERROR_UNSUPPORTED, -3, "not supported yet")                     \
    X(MGT_ERROR_IO, -4, "input/output error")                             \
    X(MGT_ERROR_DATA, -5, "invalid data")                                 \
    X(MGT_ERROR_CHECKPOINT, -6, "invalid checkpoint")                     \
    X(MGT_ERROR_MEMORY, -7, "out of memory")                              \
    X(MGT_ERROR_NUMERIC, -8, "loss or gradient is not finite")

typedef enum mgt_result {
#define MGT__RESULT_ENUM(name, value, text) name = value,
    MGT_RESULTS(MGT__RESULT_ENUM)
#undef MGT__RESULT_ENUM
    MGT__RESULT_END = -9
} mgt_result;

enum { MGT_LOG_INFO = 0, MGT_LOG_WARN = 1 };
typedef void (*mgt_log_fn)(void *user, int level, const char *message);

MGTDEF const char *mgt_result_string(mgt_result result);
MGTDEF const char *mgt_last_error(void); /* message of the calling thread's last error */
MGTDEF void mgt_set_logger(mgt_log_fn fn, void *user);

/* ---- 2. presets ----------------------------------------------------------------------------- */

/* Every preset key: X(section, key, type, default, min, max, choices, help).
   Types: INT (int), FLOAT (double), STR (char[MGT_STR_MAX]), ENUM (int index into choices).
   This one table makes the struct, the defaults, the INI handler, --set, `mgt check` and the
   README's key reference. */
#define MGT_STR_MAX 256
#define MGT_CONFIG_SECTIONS(S) S(model) S(data) S(train) S(parallel) S(precision) S(checkpoint) S(log)

#define MGT_KEYS_model(X)                                                                          \
    X(model, n_layer, INT, "4", 1, 1024, "", "transformer blocks")                                 \
    X(model, n_head, INT, "4", 1, 1024, "", "attention heads; d_model must divide by it")              \
    X(model, d_model, INT, "128", 8, 65536, "", "channels of the residual stream")                 \
    X(model, seq_len, INT, "128", 2, 65536, "", "context length in tokens")                        \
    X(model, vocab_size, INT, "256", 2, 65536, "", "token ids; at least the tokenizer's vocabulary")
#define MGT_KEYS_data(X)                                                                           \
    X(data, train, STR, "data/quickstart_train.bin", 0, 0, "", "training token shard (llm.c .bin)") \
    X(data, val, STR, "data/quickstart_val.bin", 0, 0, "", "validation shard; empty for none")     \
    X(data, tokenizer, ENUM, "byte", 0, 0, "byte|gpt2", "how the shards were tokenized")           \
    X(data, bpe_dir, STR, "data/gpt2-bpe", 0, 0, "", "folder of encoder.json and vocab.bpe (gpt2)")
#define MGT_KEYS_train(X)                                                                          \
    X(train, steps, INT, "1000", 1, 2000000000, "", "optimizer steps")                             \
    X(train, global_batch, INT, "8", 1, 1000000, "", "sequences per optimizer step")               \
    X(train, micro_batch, INT, "8", 1, 1000000, "", "sequences per forward/backward pass")         \
    X(train, lr, FLOAT, "1e-3", 0, 10, "", "peak learning rate")                                   \
    X(train, min_lr, FLOAT, "1e-4", 0, 10, "", "learning rate at the end of the decay")            \
    X(train, warmup, INT, "100", 0, 2000000000, "", "linear warmup steps")                         \
    X(train, schedule, ENUM, "cosine", 0, 0, "cosine|linear|constant", "decay after warmup")       \
    X(train, weight_decay, FLOAT, "0.1", 0, 10, "", "AdamW decoupled decay (matrices, embeddings)") \
    X(train, beta1, FLOAT, "0.9", 0, 0.999999, "", "AdamW first-moment decay")                     \
    X(train, beta2, FLOAT, "0.95", 0, 0.999999, "", "AdamW second-moment decay")                   \
    X(train, eps, FLOAT, "1e-8", 0, 1, "", "AdamW denominator epsilon")                            \
    X(train, grad_clip, FLOAT, "1.0", 0, 1e9, "", "global gradient-norm clip; 0 is off")           \
    X(train, seed, INT, "1337", 0, 2147483647, "", "seed of initial weights and data order")       \
    X(train, eval_every, INT, "100", 0, 2000000000, "", "steps between validations; 0 is off")     \
    X(train, eval_batches, INT, "4", 1, 1000000, "", "micro-batches per validation")               \
    X(train, recompute, ENUM, "none", 0, 0, "none|full", "recompute activations in backward")
#define MGT_KEYS_parallel(X)                                                                       \
    X(parallel, device, ENUM, "auto", 0, 0, "auto|cpu|cuda", "where ranks run")                    \
    X(parallel, dp, INT, "1", 1, 4096, "", "data-parallel ranks")                                  \
    X(parallel, tp, INT, "1", 1, 4096, "", "tensor-parallel ranks")                                \
    X(parallel, pp, INT, "1", 1, 4096, "", "pipeline stages")                                      \
    X(parallel, zero, INT, "0", 0, 3, "", "ZeRO stage over the data-parallel group")               \
    X(parallel, pp_schedule, ENUM, "1f1b", 0, 0, "1f1b|gpipe", "pipeline schedule")                \
    X(parallel, bucket_mb, FLOAT, "25", 0.001, 65536, "", "gradient all-reduce bucket, MiB")       \
    X(parallel, threads, INT, "0", 0, 4096, "", "CPU threads in all; 0 uses every core")
#define MGT_KEYS_precision(X) X(precision, dtype, ENUM, "fp32", 0, 0, "fp32|bf16|fp16", "storage type")
#define MGT_KEYS_checkpoint(X)                                                                     \
    X(checkpoint, dir, STR, "", 0, 0, "", "checkpoint folder; empty is runs/<preset name>")        \
    X(checkpoint, every, INT, "0", 0, 2000000000, "", "steps between checkpoints; 0 only at the end") \
    X(checkpoint, keep, INT, "3", 1, 1000000, "", "newest checkpoints kept")
#define MGT_KEYS_log(X)                                                                            \
    X(log, every, INT, "10", 1, 2000000000, "", "steps between log lines and metrics")             \
    X(log, metrics, STR, "", 0, 0, "", "metrics.jsonl path; empty is <checkpoint dir>/metrics.jsonl")

#define MGT_CONFIG_KEYS(X) \
    MGT_KEYS_model(X) MGT_KEYS_data(X) MGT_KEYS_train(X) MGT_KEYS_parallel(X) \
    MGT_KEYS_precision(X) MGT_KEYS_checkpoint(X) MGT_KEYS_log(X)

#define MGT__DECL_INT(name) int name;
#define MGT__DECL_FLOAT(name) double name;
#define MGT__DECL_ENUM(name) int name;
#define MGT__DECL_STR(name) char name[MGT_STR_MAX];
#define MGT__DECL_KEY(sec, name, type, def, lo, hi, choices, help) MGT__DECL_##type(name)
#define MGT__DECL_SECTION(sec) struct { MGT_KEYS_##sec(MGT__DECL_KEY) } sec;
#define MGT__COUNT_KEY(sec, name, type, def, lo, hi, choices, help) +1
enum { MGT_CONFIG_NKEYS = 0 MGT_CONFIG_KEYS(MGT__COUNT_KEY) };

/* enum values (indices into the choices strings above) */
enum { MGT_SCHEDULE_COSINE, MGT_SCHEDULE_LINEAR, MGT_SCHEDULE_CONSTANT };
enum { MGT_DEVICE_AUTO, MGT_DEVICE_CPU, MGT_DEVICE_CUDA };
enum { MGT_TOKENIZER_BYTE, MGT_TOKENIZER_GPT2 };
enum { MGT_RECOMPUTE_NONE, MGT_RECOMPUTE_FULL };
enum { MGT_DTYPE_FP32, MGT_DTYPE_BF16, MGT_DTYPE_FP16 };

typedef struct mgt_config {
    MGT_CONFIG_SECTIONS(MGT__DECL_SECTION)
    char path[MGT_STR_MAX];        /* preset file, for messages ("" when built in code) */
    int line[MGT_CONFIG_NKEYS];    /* where each key was set: >0 file line, 0 default, -1 --set */
} mgt_config;

typedef struct mgt_key_info {
    const char *section, *name, *type, *def, *choices, *help;
    double min, max;
} mgt_key_info;

MGTDEF void mgt_config_init(mgt_config *cfg);                     /* every key at its default */
MGTDEF mgt_result mgt_config_load(mgt_config *cfg, const char *path); /* INI file over cfg */
MGTDEF mgt_result mgt_config_load_string(mgt_config *cfg, const char *ini_text, const char *name);
MGTDEF mgt_result mgt_config_set(mgt_config *cfg, const char *assignment); /* "section.key=value" */
MGTDEF mgt_result mgt_config_validate(const mgt_config *cfg);     /* consistency between keys */
MGTDEF int mgt_config_format(const mgt_config *cfg, char *buf, size_t cap); /* resolved INI text */
MGTDEF const mgt_key_info *mgt_config_keys(int *count);
MGTDEF int mgt_config_value_string(const mgt_config *cfg, int key, char *buf, size_t cap);

/* ---- 3. runs -------------------------------------------------------------------------------- */

enum { /* memory categories of the backend's allocator */
    MGT_MEM_PARAMS, MGT_MEM_GRADS, MGT_MEM_OPTIMIZER, MGT_MEM_ACTIVATIONS, MGT_MEM_BUFFERS,
    MGT_MEM_WORKSPACE, MGT_MEM_COUNT
};
MGTDEF const char *mgt_mem_category_name(int category);

typedef struct mgt_stats {
    int step, steps;            /* optimizer steps done, of total */
    double loss;                /* mean train loss of the last step */
    double val_loss;            /* last validation loss; valid when has_val_loss */
    int has_val_loss, val_step;
    double lr, grad_norm;       /* of the last step; grad_norm before clipping */
    double step_ms, tokens_per_s, samples_per_s;
    double flops_per_token;     /* 6 x parameters + 12 x layers x seq_len x d_model */
    double gflops;              /* achieved by the last step */
    double mfu;                 /* against peak_gflops; valid when has_mfu */
    int has_mfu;
    double peak_gflops;
    long long tokens_seen;
    size_t params;              /* parameter count (without vocabulary padding) */
    size_t mem_current[MGT_MEM_COUNT], mem_peak[MGT_MEM_COUNT];
    int threads;
    double elapsed_s;           /* wall time of the steps of this process */
} mgt_stats;

typedef struct mgt_run mgt_run;

MGTDEF mgt_result mgt_run_create(mgt_run **out, const mgt_config *cfg); /* validates, allocates, initialises */
MGTDEF void mgt_run_destroy(mgt_run *run);
MGTDEF mgt_result mgt_run_step(mgt_run *run);               /* one optimizer step over global_batch */
/* One optimizer step on your own tokens: rows (global_batch, seq_len + 1), targets shifted by one. */
MGTDEF mgt_result mgt_run_step_tokens(mgt_run *run, const uint16_t *rows);
/* Opens a checkpoint for sampling only: no gradients, optimizer or data. */
MGTDEF mgt_result mgt_run_open(mgt_run **out, const char *checkpoint, int threads);
MGTDEF mgt_result mgt_run_eval(mgt_run *run, double *val_loss); /* eval_batches micro-batches of val */
MGTDEF mgt_result mgt_run_save(mgt_run *run, char *path, size_t cap); /* checkpoint now; its path */
MGTDEF mgt_result mgt_run_resume(mgt_run *run, const char *checkpoint); /* file, folder or "latest" */
MGTDEF void mgt_run_stats(const mgt_run *run, mgt_stats *out);
MGTDEF const mgt_config *mgt_run_config(const mgt_run *run);
MGTDEF const char *mgt_run_dir(const mgt_run *run);        /* checkpoint folder in use */
/* Writes max_new tokens that follow the prompt (n_prompt >= 1; the last seq_len tokens are the
   context) into out; returns the count, or -1. Sampling draws from (seed, position). */
MGTDEF int mgt_run_generate(mgt_run *run, const int *prompt, int n_prompt, int *out, int max_new,
                            double temperature, int top_k, uint64_t seed);
/* Loss of one micro-batch (tokens (B,T+1)) without changing the model; for tests and tools. */
MGTDEF mgt_result mgt_run_loss(mgt_run *run, const uint16_t *tokens, int B, double *loss);

/* Named parameter tensors, for tools and tests (shape is the global, unpadded one). */
typedef struct mgt_tensor_info {
    char name[64];
    int ndim, shape[2];
    size_t numel;
} mgt_tensor_info;
MGTDEF int mgt_run_tensor_count(const mgt_run *run);
MGTDEF const mgt_tensor_info *mgt_run_tensor(const mgt_run *run, int tensor);
MGTDEF float *mgt_run_param(mgt_run *run, int tensor); /* host pointer to the tensor's values */
MGTDEF float *mgt_run_grad(mgt_run *run, int tensor);  /* gradients of the last step, before clipping */

/* ---- 4/5. data and checkpoints -------------------------------------------------------------- */

/* Reads the resolved preset stored in a checkpoint (so `mgt sample` needs no preset file). */
MGTDEF mgt_result mgt_checkpoint_config(const char *checkpoint, mgt_config *cfg);
/* Newest checkpoint file in a folder into path; MGT_ERROR_CHECKPOINT when there is none. */
MGTDEF mgt_result mgt_checkpoint_latest(const char *dir, char *path, size_t cap);
/* Checks a token shard: magic, version, size, ids below vocab_size; sets *n_tokens. */
MGTDEF mgt_result mgt_shard_check(const char *path, int vocab_size, size_t *n_tokens);

#ifdef __cplusplus
}
#endif
#endif /* MGT_H_INCLUDED */

/* ============================================================================================== */
/*                                         IMPLEMENTATION                                         */
/* ============================================================================================== */
#ifdef MGT_IMPLEMENTATION
#ifndef MGT__IMPLEMENTED
#define MGT__IMPLEMENTED

#if defined(MGT_MALLOC) != defined(MGT_FREE)
#error "define both MGT_MALLOC and MGT_FREE, or neither"
#endif
#ifndef MGT_MALLOC
#define MGT_MALLOC(size) malloc(size)
#define MGT_FREE(ptr) free(ptr)
#endif

#include <stdlib.h>    /* defines: malloc, free, qsort, strtod, strtol */
#include <string.h>    /* defines: memcpy, memset, strcmp, strlen */
#include <stdarg.h>    /* defines: va_list */
#include <math.h>      /* defines: sqrt, exp, log, cos, floorf */
#include <errno.h>     /* defines: errno */
#include <pthread.h>   /* defines: pthread_create, mutexes, condition variables */
#include <time.h>      /* defines: clock_gettime */
#include <unistd.h>    /* defines: sysconf, fsync, close */
#include <fcntl.h>     /* defines: open */
#include <dirent.h>    /* defines: opendir, readdir */
#include <sys/mman.h>  /* defines: mmap */
#include <sys/stat.h>  /* defines: stat, mkdir */
#include <cblas.h>     /* defines: cblas_sgemm */
#include <ini.h>       /* defines: ini_parse_stream (inih) */
#ifdef MGT_NO_STDIO
#include <stdio.h>     /* the implementation still reads and writes files */
#endif

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define MGT__THREAD_LOCAL __thread
#define MGT__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define MGT__THREAD_LOCAL
#define MGT__PRINTF(a, b)
#endif

/* ---- results, errors, logging ---------------------------------------------------------------- */

static MGT__THREAD_LOCAL char mgt__error_text[1024];
static mgt_log_fn mgt__logger;
static void *mgt__logger_user;

MGTDEF const char *mgt_result_string(mgt_result result) {
    switch (result) {
#define MGT__RESULT_CASE(name, value, text) case name: return text;
        MGT_RESULTS(MGT__RESULT_CASE)
#undef MGT__RESULT_CASE
    default: return "unknown result";
    }
}
MGTDEF const char *mgt_last_error(void) { return mgt__error_text; }
MGTDEF void mgt_set_logger(mgt_log_fn fn, void *user) { mgt__logger = fn; mgt__logger_user = user; }

MGT__PRINTF(2, 3) static mgt_result mgt__fail(mgt_result result, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(mgt__error_text, sizeof mgt__error_text, fmt, ap);
    va_end(ap);
    return result;
}
MGT__PRINTF(2, 3) static void mgt__log(int level, const char *fmt, ...) {
    char text[1024];
    va_list ap;
    if (!mgt__logger) return;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    mgt__logger(mgt__logger_user, level, text);
}

static double mgt__now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* bounded string copy that always terminates */
static void mgt__strlcpy(char *dst, const char *src, size_t cap) {
    size_t n = strlen(src);
    if (cap == 0) return;
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* ---- counter-based random numbers: every value is a pure function of its keys --------------- */

static uint64_t mgt__mix64(uint64_t x) { /* splitmix64 finaliser */
    x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27; x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}
static uint64_t mgt__hash3(uint64_t a, uint64_t b, uint64_t c) {
    return mgt__mix64(mgt__mix64(mgt__mix64(a + 0x9e3779b97f4a7c15ULL) ^ b) ^ c);
}
static double mgt__uniform(uint64_t h) { return ((double)(h >> 11) + 0.5) * (1.0 / 9007199254740992.0); } /* (0,1) */
/* standard normal for element `index` of tensor `tensor` (Box-Muller over two counters) */
static double mgt__normal(uint64_t seed, uint64_t tensor, uint64_t index) {
    double u1 = mgt__uniform(mgt__hash3(seed, tensor, 2 * index));
    double u2 = mgt__uniform(mgt__hash3(seed, tensor, 2 * index + 1));
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* ---- presets ---------------------------------------------------------------------------------- */

enum { MGT__T_INT, MGT__T_FLOAT, MGT__T_STR, MGT__T_ENUM };
#define MGT__TYPE_INT MGT__T_INT
#define MGT__TYPE_FLOAT MGT__T_FLOAT
#define MGT__TYPE_STR MGT__T_STR
#define MGT__TYPE_ENUM MGT__T_ENUM

typedef struct mgt__key {
    mgt_key_info info;
    int type;
    size_t offset;
} mgt__key;

static const mgt__key mgt__keys[MGT_CONFIG_NKEYS] = {
#define MGT__KEY_ROW(sec, name, type, def, lo, hi, choices, help) \
    {{#sec, #name, #type, def, choices, help, (double)(lo), (double)(hi)}, MGT__TYPE_##type, offsetof(mgt_config, sec.name)},
    MGT_CONFIG_KEYS(MGT__KEY_ROW)
#undef MGT__KEY_ROW
};

MGTDEF const mgt_key_info *mgt_config_keys(int *count) {
    static mgt_key_info infos[MGT_CONFIG_NKEYS];
    int i;
    for (i = 0; i < MGT_CONFIG_NKEYS; i++) infos[i] = mgt__keys[i].info;
    if (count) *count = MGT_CONFIG_NKEYS;
    return infos;
}

static int mgt__find_key(const char *section, const char *name) {
    int i;
    for (i = 0; i < MGT_CONFIG_NKEYS; i++)
        if (!strcmp(mgt__keys[i].info.section, section) && !strcmp(mgt__keys[i].info.name, name)) return i;
    return -1;
}

/* index of choice `value` in "a|b|c", or -1 */
static int mgt__choice_index(const char *choices, const char *value) {
    int index = 0;
    size_t n = strlen(value);
    const char *p = choices;
    while (*p) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !strncmp(p, value, n)) return index;
        index++;
        if (!bar) break;
        p = bar + 1;
    }
    return -1;
}
static void mgt__choice_name(const char *choices, int index, char *out, size_t cap) {
    const char *p = choices;
    while (index-- > 0 && p) { p = strchr(p, '|'); if (p) p++; }
    if (!p) { mgt__strlcpy(out, "?", cap); return; }
    {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len >= cap) len = cap - 1;
        memcpy(out, p, len);
        out[len] = 0;
    }
}

static int mgt__edit_distance(const char *a, const char *b) {
    int la = (int)strlen(a), lb = (int)strlen(b), i, j, prev[64], cur[64];
    if (la > 63 || lb > 63) return 99;
    for (j = 0; j <= lb; j++) prev[j] = j;
    for (i = 1; i <= la; i++) {
        cur[0] = i;
        for (j = 1; j <= lb; j++) {
            int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            int del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, sizeof(int) * (size_t)(lb + 1));
    }
    return prev[lb];
}

/* "did you mean" text for an unknown section or key */
static void mgt__suggest(const char *section, const char *name, char *out, size_t cap) {
    int i, best = -1, best_d = 1 << 30, section_known = 0;
    for (i = 0; i < MGT_CONFIG_NKEYS; i++) if (!strcmp(mgt__keys[i].info.section, section)) section_known = 1;
    if (!section_known) {
        const char *sections[] = {
#define MGT__SECTION_NAME(s) #s,
            MGT_CONFIG_SECTIONS(MGT__SECTION_NAME)
#undef MGT__SECTION_NAME
        };
        for (i = 0; i < (int)(sizeof sections / sizeof sections[0]); i++) {
            int d = mgt__edit_distance(section, sections[i]);
            if (d < best_d) { best_d = d; best = i; }
        }
        snprintf(out, cap, "unknown section [%s]; did you mean [%s]?", section, sections[best]);
        return;
    }
    for (i = 0; i < MGT_CONFIG_NKEYS; i++) {
        int d;
        if (strcmp(mgt__keys[i].info.section, section)) continue;
        d = mgt__edit_distance(name, mgt__keys[i].info.name);
        if (d < best_d) { best_d = d; best = i; }
    }
    snprintf(out, cap, "unknown key '%s' in [%s]; did you mean '%s'?", name, section, mgt__keys[best].info.name);
}

/* of two keys in a consistency error, the one the user set (file or --set) comes first */
static void mgt__order_keys(const mgt_config *cfg, int *first, int *second) {
    if (cfg->line[*first] == 0 && cfg->line[*second] != 0) { int t = *first; *first = *second; *second = t; }
}
/* where a key got its value: "file:line", "--set section.key" or "the default" */
static const char *mgt__where(const mgt_config *cfg, int key, char *buf, size_t cap) {
    int line = cfg->line[key];
    if (line > 0) snprintf(buf, cap, "%s:%d", cfg->path, line);
    else if (line < 0) snprintf(buf, cap, "--set %s.%s", mgt__keys[key].info.section, mgt__keys[key].info.name);
    else snprintf(buf, cap, "the default");
    return buf;
}

/* Parses one value into cfg; on error writes what is valid into why. */
static int mgt__set_value(mgt_config *cfg, int key, const char *value, char *why, size_t cap) {
    const mgt__key *k = &mgt__keys[key];
    char *field = (char *)cfg + k->offset, *end;
    while (*value == ' ' || *value == '\t') value++;
    switch (k->type) {
    case MGT__T_INT: {
        long long v;
        errno = 0;
        v = strtoll(value, &end, 10);
        while (*end == ' ' || *end == '\t') end++;
        if (!*value || *end || errno) {
            snprintf(why, cap, "'%s' is not an integer (valid: %.0f..%.0f)", value, k->info.min, k->info.max);
            return 0;
        }
        if ((double)v < k->info.min || (double)v > k->info.max) {
            snprintf(why, cap, "%lld is out of range (valid: %.0f..%.0f)", v, k->info.min, k->info.max);
            return 0;
        }
        *(int *)field = (int)v;
        return 1;
    }
    case MGT__T_FLOAT: {
        double v;
        errno = 0;
        v = strtod(value, &end);
        while (*end == ' ' || *end == '\t') end++;
        if (!*value || *end || errno || v != v) {
            snprintf(why, cap, "'%s' is not a number (valid: %g..%g)", value, k->info.min, k->info.max);
            return 0;
        }
        if (v < k->info.min || v > k->info.max) {
            snprintf(why, cap, "%g is out of range (valid: %g..%g)", v, k->info.min, k->info.max);
            return 0;
        }
        *(double *)field = v;
        return 1;
    }
    case MGT__T_ENUM: {
        int index = mgt__choice_index(k->info.choices, value);
        if (index < 0) {
            snprintf(why, cap, "'%s' is not one of %s", value, k->info.choices);
            return 0;
        }
        *(int *)field = index;
        return 1;
    }
    default:
        if (strlen(value) >= MGT_STR_MAX) {
            snprintf(why, cap, "value is longer than %d characters", MGT_STR_MAX - 1);
            return 0;
        }
        mgt__strlcpy(field, value, MGT_STR_MAX);
        return 1;
    }
}

MGTDEF void mgt_config_init(mgt_config *cfg) {
    int i;
    char why[256];
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    for (i = 0; i < MGT_CONFIG_NKEYS; i++) (void)mgt__set_value(cfg, i, mgt__keys[i].info.def, why, sizeof why);
}

MGTDEF int mgt_config_value_string(const mgt_config *cfg, int key, char *buf, size_t cap) {
    const mgt__key *k;
    const char *field;
    if (!cfg || key < 0 || key >= MGT_CONFIG_NKEYS || !buf) return -1;
    k = &mgt__keys[key];
    field = (const char *)cfg + k->offset;
    switch (k->type) {
    case MGT__T_INT: return snprintf(buf, cap, "%d", *(const int *)field);
    case MGT__T_FLOAT: { /* the shortest text that reads back to the same double */
        double v = *(const double *)field;
        int digits;
        for (digits = 6; digits < 17; digits++) {
            snprintf(buf, cap, "%.*g", digits, v);
            if (strtod(buf, NULL) == v) break;
        }
        return snprintf(buf, cap, "%.*g", digits, v);
    }
    case MGT__T_ENUM: mgt__choice_name(k->info.choices, *(const int *)field, buf, cap); return (int)strlen(buf);
    default: return snprintf(buf, cap, "%s", field);
    }
}

typedef struct mgt__ini_state {
    mgt_config *cfg;
    const char *text;   /* for string input */
    FILE *file;         /* for file input */
    int line;           /* line the reader returned last: inih calls the handler for it */
    int failed;
} mgt__ini_state;

static char *mgt__ini_reader(char *str, int num, void *stream) {
    mgt__ini_state *st = (mgt__ini_state *)stream;
    char *r;
    if (st->file) r = fgets(str, num, st->file);
    else {
        int i = 0;
        if (!*st->text) return NULL;
        while (i < num - 1 && *st->text) { str[i++] = *st->text; if (*st->text++ == '\n') break; }
        str[i] = 0;
        r = str;
    }
    if (r) {
        const char *p = str;
        st->line++;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '[') { /* inih reports keys, not sections: check the section at its own line */
            char name[64];
            size_t n = 0;
            int i, known = 0;
            p++;
            while (*p && *p != ']' && n < sizeof name - 1) name[n++] = *p++;
            name[n] = 0;
            for (i = 0; i < MGT_CONFIG_NKEYS; i++) known |= !strcmp(mgt__keys[i].info.section, name);
            if (*p == ']' && !known) {
                char why[256];
                mgt__suggest(name, "", why, sizeof why);
                mgt__fail(MGT_ERROR_CONFIG, "%s:%d: %s", st->cfg->path, st->line, why);
                st->failed = 1;
                return NULL; /* ends the parse */
            }
        }
    }
    return r;
}

static int mgt__ini_handler(void *user, const char *section, const char *name, const char *value) {
    mgt__ini_state *st = (mgt__ini_state *)user;
    char why[512];
    int key;
    if (st->failed) return 0;
    key = mgt__find_key(section, name);
    if (key < 0) {
        if (!section[0]) snprintf(why, sizeof why, "key '%s' outside a section; put it under its [section] (see `mgt keys`)", name);
        else mgt__suggest(section, name, why, sizeof why);
        mgt__fail(MGT_ERROR_CONFIG, "%s:%d: %s", st->cfg->path, st->line, why);
        st->failed = 1;
        return 0;
    }
    if (!mgt__set_value(st->cfg, key, value, why, sizeof why)) {
        mgt__fail(MGT_ERROR_CONFIG, "%s:%d: [%s] %s: %s", st->cfg->path, st->line, section, name, why);
        st->failed = 1;
        return 0;
    }
    st->cfg->line[key] = st->line;
    return 1;
}

static mgt_result mgt__config_parse(mgt_config *cfg, mgt__ini_state *st, const char *name) {
    int rc;
    mgt__strlcpy(cfg->path, name, sizeof cfg->path);
    st->cfg = cfg;
    rc = ini_parse_stream(mgt__ini_reader, st, mgt__ini_handler, st);
    if (st->failed) return MGT_ERROR_CONFIG;
    if (rc > 0) return mgt__fail(MGT_ERROR_CONFIG, "%s:%d: not an INI line (expected [section], key = value or a ; comment)", name, rc);
    if (rc < 0) return mgt__fail(MGT_ERROR_IO, "%s: cannot read the preset", name);
    return MGT_OK;
}

MGTDEF mgt_result mgt_config_load(mgt_config *cfg, const char *path) {
    mgt__ini_state st;
    mgt_result r;
    if (!cfg || !path) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_config_load: cfg and path are required");
    memset(&st, 0, sizeof st);
    st.file = fopen(path, "r");
    if (!st.file) return mgt__fail(MGT_ERROR_CONFIG, "%s: cannot open the preset: %s (check the path; presets live in presets/)", path, strerror(errno));
    r = mgt__config_parse(cfg, &st, path);
    fclose(st.file);
    return r;
}

MGTDEF mgt_result mgt_config_load_string(mgt_config *cfg, const char *ini_text, const char *name) {
    mgt__ini_state st;
    if (!cfg || !ini_text) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_config_load_string: cfg and text are required");
    memset(&st, 0, sizeof st);
    st.text = ini_text;
    return mgt__config_parse(cfg, &st, name ? name : "<string>");
}

MGTDEF mgt_result mgt_config_set(mgt_config *cfg, const char *assignment) {
    char section[64], name[64], why[512];
    const char *dot, *eq;
    int key;
    if (!cfg || !assignment) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_config_set: cfg and assignment are required");
    dot = strchr(assignment, '.');
    eq = strchr(assignment, '=');
    if (!dot || !eq || dot > eq || (size_t)(dot - assignment) >= sizeof section || (size_t)(eq - dot - 1) >= sizeof name)
        return mgt__fail(MGT_ERROR_CONFIG, "--set %s: expected section.key=value, for example --set train.steps=100", assignment);
    memcpy(section, assignment, (size_t)(dot - assignment));
    section[dot - assignment] = 0;
    memcpy(name, dot + 1, (size_t)(eq - dot - 1));
    name[eq - dot - 1] = 0;
    key = mgt__find_key(section, name);
    if (key < 0) {
        mgt__suggest(section, name, why, sizeof why);
        return mgt__fail(MGT_ERROR_CONFIG, "--set %s: %s", assignment, why);
    }
    if (!mgt__set_value(cfg, key, eq + 1, why, sizeof why))
        return mgt__fail(MGT_ERROR_CONFIG, "--set %s: [%s] %s: %s", assignment, section, name, why);
    cfg->line[key] = -1;
    return MGT_OK;
}

#define MGT__KEY(sec, name) mgt__find_key(#sec, #name)

MGTDEF mgt_result mgt_config_validate(const mgt_config *cfg) {
    char w1[300], w2[300], w3[300];
    int tok_vocab;
    if (!cfg) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_config_validate: cfg is required");
    /* parsed and checked now, implemented by later releases: refuse rather than ignore */
#define MGT__UNSUPPORTED(cond, sec, name, what, fix)                                                         \
    if (cond)                                                                                                \
        return mgt__fail(MGT_ERROR_UNSUPPORTED, "%s: [" #sec "] " #name ": %s is not supported yet in mgt " MGT_VERSION_STRING "; %s", \
                         mgt__where(cfg, MGT__KEY(sec, name), w1, sizeof w1), what, fix);
    MGT__UNSUPPORTED(cfg->parallel.dp != 1, parallel, dp, "data parallelism (dp > 1)", "use dp = 1")
    MGT__UNSUPPORTED(cfg->parallel.tp != 1, parallel, tp, "tensor parallelism (tp > 1)", "use tp = 1")
    MGT__UNSUPPORTED(cfg->parallel.pp != 1, parallel, pp, "pipeline parallelism (pp > 1)", "use pp = 1")
    MGT__UNSUPPORTED(cfg->parallel.zero != 0, parallel, zero, "ZeRO (zero > 0)", "use zero = 0")
    MGT__UNSUPPORTED(cfg->parallel.device == MGT_DEVICE_CUDA, parallel, device, "the CUDA backend", "use device = cpu or auto")
    MGT__UNSUPPORTED(cfg->precision.dtype != MGT_DTYPE_FP32, precision, dtype, "mixed precision", "use dtype = fp32")
#undef MGT__UNSUPPORTED
    if (cfg->model.d_model % cfg->model.n_head) {
        int a = MGT__KEY(model, n_head), b = MGT__KEY(model, d_model);
        mgt__order_keys(cfg, &a, &b);
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [model] d_model = %d does not divide by n_head = %d (d_model from %s, n_head from %s); pick n_head among the divisors of d_model",
                         mgt__where(cfg, a, w1, sizeof w1), cfg->model.d_model, cfg->model.n_head, mgt__where(cfg, MGT__KEY(model, d_model), w2, sizeof w2),
                         mgt__where(cfg, MGT__KEY(model, n_head), w3, sizeof w3));
    }
    if (cfg->train.global_batch % (cfg->train.micro_batch * cfg->parallel.dp)) {
        int a = MGT__KEY(train, global_batch), b = MGT__KEY(train, micro_batch);
        mgt__order_keys(cfg, &a, &b);
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [train] global_batch = %d is not a multiple of micro_batch x dp = %d x %d (global_batch from %s, micro_batch from %s); make global_batch a multiple of %d",
                         mgt__where(cfg, a, w1, sizeof w1), cfg->train.global_batch, cfg->train.micro_batch, cfg->parallel.dp,
                         mgt__where(cfg, MGT__KEY(train, global_batch), w2, sizeof w2), mgt__where(cfg, MGT__KEY(train, micro_batch), w3, sizeof w3),
                         cfg->train.micro_batch * cfg->parallel.dp);
    }
    if (cfg->train.min_lr > cfg->train.lr)
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [train] min_lr = %g is above lr = %g; the schedule decays from lr down to min_lr",
                         mgt__where(cfg, MGT__KEY(train, min_lr), w1, sizeof w1), cfg->train.min_lr, cfg->train.lr);
    tok_vocab = cfg->data.tokenizer == MGT_TOKENIZER_GPT2 ? 50257 : 256;
    if (cfg->model.vocab_size < tok_vocab)
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [model] vocab_size = %d is smaller than the %s tokenizer's %d tokens; set vocab_size to at least %d",
                         mgt__where(cfg, MGT__KEY(model, vocab_size), w1, sizeof w1), cfg->model.vocab_size,
                         cfg->data.tokenizer == MGT_TOKENIZER_GPT2 ? "gpt2" : "byte", tok_vocab, tok_vocab);
    return MGT_OK;
}

MGTDEF int mgt_config_format(const mgt_config *cfg, char *buf, size_t cap) {
    size_t used = 0;
    int i;
    const char *section = "";
    char value[MGT_STR_MAX + 8];
    if (!cfg || !buf || cap == 0) return -1;
    buf[0] = 0;
    for (i = 0; i < MGT_CONFIG_NKEYS; i++) {
        const mgt_key_info *k = &mgt__keys[i].info;
        int n;
        mgt_config_value_string(cfg, i, value, sizeof value);
        if (strcmp(section, k->section)) {
            n = snprintf(buf + used, cap - used, "%s[%s]\n", used ? "\n" : "", k->section);
            if (n < 0 || (size_t)n >= cap - used) return -1;
            used += (size_t)n;
            section = k->section;
        }
        n = snprintf(buf + used, cap - used, "%-13s = %-28s ; %s\n", k->name, value, k->help);
        if (n < 0 || (size_t)n >= cap - used) return -1;
        used += (size_t)n;
    }
    return (int)used;
}

/* ---- thread pool: the rank's thread plus helpers, one parallel region at a time --------------- */

typedef void (*mgt__task_fn)(void *ctx, int tid, int nthreads);

typedef struct mgt__pool {
    int n; /* threads including the calling one */
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    mgt__task_fn fn;
    void *ctx;
    unsigned long generation;
    int pending, quit;
} mgt__pool;

typedef struct mgt__worker_arg { mgt__pool *pool; int tid; } mgt__worker_arg;

static void *mgt__worker(void *arg) {
    mgt__worker_arg *wa = (mgt__worker_arg *)arg;
    mgt__pool *p = wa->pool;
    int tid = wa->tid;
    unsigned long seen = 0;
    MGT_FREE(wa);
    for (;;) {
        mgt__task_fn fn;
        void *ctx;
        pthread_mutex_lock(&p->mu);
        while (p->generation == seen && !p->quit) pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit) { pthread_mutex_unlock(&p->mu); return NULL; }
        seen = p->generation;
        fn = p->fn;
        ctx = p->ctx;
        pthread_mutex_unlock(&p->mu);
        fn(ctx, tid, p->n);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0) pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
}

static int mgt__pool_init(mgt__pool *p, int n) {
    int i;
    memset(p, 0, sizeof *p);
    p->n = n < 1 ? 1 : n;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    p->threads = (pthread_t *)MGT_MALLOC(sizeof(pthread_t) * (size_t)p->n);
    if (!p->threads) return 0;
    for (i = 1; i < p->n; i++) {
        mgt__worker_arg *wa = (mgt__worker_arg *)MGT_MALLOC(sizeof *wa);
        if (!wa) return 0;
        wa->pool = p;
        wa->tid = i;
        if (pthread_create(&p->threads[i], NULL, mgt__worker, wa)) { MGT_FREE(wa); p->n = i; return 0; }
    }
    return 1;
}

static void mgt__pool_destroy(mgt__pool *p) {
    int i;
    if (!p->threads) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    MGT_FREE(p->threads);
    p->threads = NULL;
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
}

/* runs fn(ctx, tid, n) on every thread of the pool and returns when all are done */
static void mgt__pool_run(mgt__pool *p, mgt__task_fn fn, void *ctx) {
    if (p->n == 1) { fn(ctx, 0, 1); return; }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->pending = p->n - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, p->n);
    pthread_mutex_lock(&p->mu);
    while (p->pending) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

/* [lo, hi) of n items for thread tid of nth, in chunks that are multiples of align */
static void mgt__span(size_t n, int tid, int nth, size_t align, size_t *lo, size_t *hi) {
    size_t chunks = (n + align - 1) / align, per = chunks / (size_t)nth, extra = chunks % (size_t)nth;
    size_t c0 = (size_t)tid * per + ((size_t)tid < extra ? (size_t)tid : extra);
    size_t c1 = c0 + per + ((size_t)tid < extra ? 1 : 0);
    *lo = c0 * align < n ? c0 * align : n;
    *hi = c1 * align < n ? c1 * align : n;
}

/* ---- the backend table ------------------------------------------------------------------------ */

/* Shapes: B batch, T time, C channels, NH heads, V vocabulary (Vp padded), N = B*T rows.
   Outputs first, then inputs, then sizes (llm.c). Parameter gradients are added (+=) so micro-batches
   accumulate; activation gradients are written (=), except dres, the residual stream's (+=). */
typedef struct mgt_backend mgt_backend;
struct mgt_backend {
    const char *name;
    void *(*alloc)(mgt_backend *be, size_t bytes, int category); /* zero-filled */
    void (*free)(mgt_backend *be, void *ptr, size_t bytes, int category);
    void (*encoder_forward)(mgt_backend *be, float *out, const int *tokens, const float *wte, const float *wpe, int B, int T, int C);
    void (*encoder_backward)(mgt_backend *be, float *dwte, float *dwpe, const float *dout, const int *tokens, int B, int T, int C);
    void (*layernorm_forward)(mgt_backend *be, float *out, float *mean, float *rstd, const float *inp, const float *weight, const float *bias, int N, int C);
    void (*layernorm_backward)(mgt_backend *be, float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                               const float *weight, const float *mean, const float *rstd, int N, int C);
    void (*matmul_forward)(mgt_backend *be, float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC);
    void (*matmul_backward)(mgt_backend *be, float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, int N, int C, int OC);
    void (*attention_forward)(mgt_backend *be, float *out, float *att, const float *qkv, int B, int T, int C, int NH);
    void (*attention_backward)(mgt_backend *be, float *dqkv, const float *dout, const float *qkv, const float *att, int B, int T, int C, int NH);
    void (*gelu_forward)(mgt_backend *be, float *out, const float *inp, size_t n);
    void (*gelu_backward)(mgt_backend *be, float *dinp, const float *inp, const float *dout, size_t n);
    void (*add_inplace)(mgt_backend *be, float *y, const float *x, size_t n); /* y += x */
    /* per-row losses; the logits are consumed: with grad_scale != 0 they become
       dlogits = (softmax - onehot) * grad_scale, with 0 they are left as scratch */
    void (*crossentropy)(mgt_backend *be, double *losses, float *logits, const int *targets, int N, int V, int Vp, float grad_scale);
    double (*sum_squares)(mgt_backend *be, const float *x, size_t n);
    void (*adamw)(mgt_backend *be, float *param, const float *grad, float *m, float *v, size_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, float grad_scale, float bias_correction1, float bias_correction2);
    void (*scale)(mgt_backend *be, float *x, float factor, size_t n);
    void (*zero)(mgt_backend *be, float *x, size_t n);
    size_t mem_current[MGT_MEM_COUNT], mem_peak[MGT_MEM_COUNT];
    void *impl;
};

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
} mgt__args;

/* exp(x) for x <= 88: 2^k * e^r with |r| <= ln2/2 and a degree-7 Taylor polynomial (relative error
   below 2e-8 before rounding). Branch-free and without libm calls, so that loops calling it
   vectorise (libm's expf and floorf would not, short of -ffast-math). */
static float mgt__expf(float x) {
    float k, r, p, scale;
    int32_t bits;
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    k = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest: 1.5 * 2^23 trick */
    r = x - k * 0.693145751953125f - k * 1.428606765330187e-06f;
    p = 1.0f + r * (1.0f + r * (0.5f + r * (1.6666667e-1f + r * (4.1666668e-2f + r * (8.3333338e-3f + r * (1.3888889e-3f + r * 1.9841270e-4f))))));
    bits = ((int32_t)k + 127) << 23;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}
static float mgt__tanhf(float x) { return 1.0f - 2.0f / (mgt__expf(2.0f * x) + 1.0f); }

/* sgemm on row-major matrices, split across the pool along the larger of M and N.
   Each thread calls a single-threaded BLAS on its block, so the rank owns its cores. */
typedef struct mgt__gemm_args {
    int ta, tb, M, N, K, lda, ldb, ldc;
    float alpha, beta;
    const float *A, *B;
    float *C;
    const float *bias; /* optional (N): C rows start as bias and beta must be 1 */
} mgt__gemm_args;

static void mgt__gemm_task(void *ctx, int tid, int nth) {
    const mgt__gemm_args *g = (const mgt__gemm_args *)ctx;
    size_t lo, hi;
    const float *A = g->A, *Bm = g->B;
    float *Cm = g->C;
    int M = g->M, N = g->N;
    if (g->M >= g->N) {
        mgt__span((size_t)g->M, tid, nth, 16, &lo, &hi);
        if (hi <= lo) return;
        A = g->ta ? g->A + lo : g->A + lo * (size_t)g->lda;
        Cm = g->C + lo * (size_t)g->ldc;
        M = (int)(hi - lo);
        if (g->bias) {
            size_t i;
            for (i = 0; i < (size_t)M; i++) memcpy(Cm + i * (size_t)g->ldc, g->bias, sizeof(float) * (size_t)N);
        }
    } else {
        mgt__span((size_t)g->N, tid, nth, 16, &lo, &hi);
        if (hi <= lo) return;
        Bm = g->tb ? g->B + lo * (size_t)g->ldb : g->B + lo;
        Cm = g->C + lo;
        N = (int)(hi - lo);
        if (g->bias) {
            int i;
            for (i = 0; i < M; i++) memcpy(Cm + (size_t)i * (size_t)g->ldc, g->bias + lo, sizeof(float) * (size_t)N);
        }
    }
    cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans, M, N, g->K,
                g->alpha, A, g->lda, Bm, g->ldb, g->beta, Cm, g->ldc);
}

static void mgt__gemm(mgt_backend *be, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                      const float *Bm, int ldb, float beta, float *Cm, int ldc, const float *bias) {
    mgt__gemm_args g;
    g.ta = ta; g.tb = tb; g.M = M; g.N = N; g.K = K; g.lda = lda; g.ldb = ldb; g.ldc = ldc;
    g.alpha = alpha; g.beta = bias ? 1.0f : beta; g.A = A; g.B = Bm; g.C = Cm; g.bias = bias;
    mgt__pool_run(MGT__POOL(be), mgt__gemm_task, &g);
}

static void *mgt__cpu_alloc(mgt_backend *be, size_t bytes, int category) {
    void *p = NULL;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, rounded ? rounded : 64)) return NULL;
    memset(p, 0, rounded);
    mgt__account(be, (long long)bytes, category);
    return p;
}
static void mgt__cpu_free(mgt_backend *be, void *ptr, size_t bytes, int category) {
    if (!ptr) return;
    free(ptr);
    mgt__account(be, -(long long)bytes, category);
}

/* encoder: out (B,T,C) = wte[tokens] + wpe[t] */
static void mgt__encoder_fwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int T = a->n[1], C = a->n[2];
    size_t lo, hi, r;
    mgt__span((size_t)a->n[0] * (size_t)T, tid, nth, 1, &lo, &hi);
    for (r = lo; r < hi; r++) {
        const float *e = a->in[0] + (size_t)a->ints[r] * (size_t)C, *p = a->in[1] + (r % (size_t)T) * (size_t)C;
        float *o = a->out[0] + r * (size_t)C;
        int c;
        for (c = 0; c < C; c++) o[c] = e[c] + p[c];
    }
}
static void mgt__cpu_encoder_forward(mgt_backend *be, float *out, const int *tokens, const float *wte, const float *wpe, int B, int T, int C) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = out; a.in[0] = wte; a.in[1] = wpe; a.ints = tokens; a.n[0] = B; a.n[1] = T; a.n[2] = C;
    mgt__pool_run(MGT__POOL(be), mgt__encoder_fwd_task, &a);
}
/* split by channels, so no two threads touch one gradient element and the sum order is fixed */
static void mgt__encoder_bwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int B = a->n[0], T = a->n[1], C = a->n[2], b, t;
    size_t lo, hi, c;
    mgt__span((size_t)C, tid, nth, 16, &lo, &hi);
    for (b = 0; b < B; b++)
        for (t = 0; t < T; t++) {
            const float *d = a->in[0] + ((size_t)b * (size_t)T + (size_t)t) * (size_t)C;
            float *dw = a->out[0] + (size_t)a->ints[b * T + t] * (size_t)C, *dp = a->out[1] + (size_t)t * (size_t)C;
            for (c = lo; c < hi; c++) { dw[c] += d[c]; dp[c] += d[c]; }
        }
}
static void mgt__cpu_encoder_backward(mgt_backend *be, float *dwte, float *dwpe, const float *dout, const int *tokens, int B, int T, int C) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = dwte; a.out[1] = dwpe; a.in[0] = dout; a.ints = tokens; a.n[0] = B; a.n[1] = T; a.n[2] = C;
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
/* dbias (OC) += column sums of dout (N,OC), split by columns for a fixed summation order */
static void mgt__bias_bwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int N = a->n[0], OC = a->n[1], r;
    size_t lo, hi, o;
    mgt__span((size_t)OC, tid, nth, 16, &lo, &hi);
    for (r = 0; r < N; r++) {
        const float *d = a->in[0] + (size_t)r * (size_t)OC;
        for (o = lo; o < hi; o++) a->out[0][o] += d[o];
    }
}
static void mgt__cpu_matmul_backward(mgt_backend *be, float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                                     const float *weight, int N, int C, int OC) {
    if (dinp) mgt__gemm(be, 0, 0, N, C, OC, 1.0f, dout, OC, weight, C, 0.0f, dinp, C, NULL);   /* dinp = dout @ W */
    mgt__gemm(be, 1, 0, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C, NULL);            /* dW += dout^T @ inp */
    if (dbias) {
        mgt__args a;
        memset(&a, 0, sizeof a);
        a.out[0] = dbias; a.in[0] = dout; a.n[0] = N; a.n[1] = OC;
        mgt__pool_run(MGT__POOL(be), mgt__bias_bwd_task, &a);
    }
}

/* causal self-attention per (batch, head), on qkv (B,T,3C) laid out [q | k | v], head h on channels
   h*hs..h*hs+hs-1 of each. att (B,NH,T,T) keeps the softmax probabilities for backward. */
static void mgt__attn_fwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int B = a->n[0], T = a->n[1], C = a->n[2], NH = a->n[3], hs = C / NH, C3 = 3 * C, t, j;
    float scale = 1.0f / sqrtf((float)hs);
    size_t lo, hi, bh;
    mgt__span((size_t)B * (size_t)NH, tid, nth, 1, &lo, &hi);
    for (bh = lo; bh < hi; bh++) {
        size_t b = bh / (size_t)NH, h = bh % (size_t)NH;
        const float *q = a->in[0] + b * (size_t)T * (size_t)C3 + h * (size_t)hs, *k = q + C, *v = q + 2 * C;
        float *att = a->out[1] + bh * (size_t)T * (size_t)T, *out = a->out[0] + b * (size_t)T * (size_t)C + h * (size_t)hs;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, C3, k, C3, 0.0f, att, T);
        for (t = 0; t < T; t++) {
            float *row = att + (size_t)t * (size_t)T, mx = row[0], sum = 0, inv;
            for (j = 1; j <= t; j++) mx = row[j] > mx ? row[j] : mx;
            for (j = 0; j <= t; j++) row[j] = mgt__expf(row[j] - mx);
            sum = mgt__sum8(row, t + 1);
            inv = 1.0f / sum;
            for (j = 0; j <= t; j++) row[j] *= inv;
            for (j = t + 1; j < T; j++) row[j] = 0.0f;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, att, T, v, C3, 0.0f, out, C);
    }
}
static void mgt__cpu_attention_forward(mgt_backend *be, float *out, float *att, const float *qkv, int B, int T, int C, int NH) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = out; a.out[1] = att; a.in[0] = qkv; a.n[0] = B; a.n[1] = T; a.n[2] = C; a.n[3] = NH;
    mgt__pool_run(MGT__POOL(be), mgt__attn_fwd_task, &a);
}
static void mgt__attn_bwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    const mgt__cpu *cpu = (const mgt__cpu *)a->be->impl;
    int B = a->n[0], T = a->n[1], C = a->n[2], NH = a->n[3], hs = C / NH, C3 = 3 * C, t, j;
    float scale = 1.0f / sqrtf((float)hs), *dp = cpu->scratch + (size_t)tid * cpu->scratch_per_thread;
    size_t lo, hi, bh;
    mgt__span((size_t)B * (size_t)NH, tid, nth, 1, &lo, &hi);
    for (bh = lo; bh < hi; bh++) {
        size_t b = bh / (size_t)NH, h = bh % (size_t)NH, off = b * (size_t)T * (size_t)C3 + h * (size_t)hs;
        const float *q = a->in[1] + off, *k = q + C, *v = q + 2 * C;
        const float *att = a->in[2] + bh * (size_t)T * (size_t)T, *dout = a->in[0] + b * (size_t)T * (size_t)C + h * (size_t)hs;
        float *dq = a->out[0] + off, *dk = dq + C, *dv = dq + 2 * C;
        /* dP = dY V^T, dV = P^T dY */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dout, C, v, C3, 0.0f, dp, T);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, att, T, dout, C, 0.0f, dv, C3);
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
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, dp, T, k, C3, 0.0f, dq, C3);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, dp, T, q, C3, 0.0f, dk, C3);
    }
}
static void mgt__cpu_attention_backward(mgt_backend *be, float *dqkv, const float *dout, const float *qkv, const float *att, int B, int T, int C, int NH) {
    mgt__args a;
    if ((size_t)T * (size_t)T > ((mgt__cpu *)be->impl)->scratch_per_thread) abort(); /* sized from seq_len at creation */
    memset(&a, 0, sizeof a);
    a.out[0] = dqkv; a.in[0] = dout; a.in[1] = qkv; a.in[2] = att; a.n[0] = B; a.n[1] = T; a.n[2] = C; a.n[3] = NH; a.be = be;
    mgt__pool_run(MGT__POOL(be), mgt__attn_bwd_task, &a);
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
    mgt__span(a->count, tid, nth, 1024, &lo, &hi);
    if (hi > lo) memset(a->out[0] + lo, 0, sizeof(float) * (hi - lo));
}
static void mgt__cpu_zero(mgt_backend *be, float *x, size_t n) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = x; a.count = n;
    mgt__pool_run(MGT__POOL(be), mgt__zero_task, &a);
}
static void mgt__cpu_scale(mgt_backend *be, float *x, float factor, size_t n) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = x; a.f[0] = factor; a.count = n;
    mgt__pool_run(MGT__POOL(be), mgt__scale_task, &a);
}

/* fused softmax + cross-entropy over the first V of Vp logits per row */
static void mgt__xent_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int V = a->n[1], Vp = a->n[2], i;
    float gs = a->f[0];
    size_t lo, hi, r;
    mgt__span((size_t)a->n[0], tid, nth, 1, &lo, &hi);
    for (r = lo; r < hi; r++) {
        float *l = a->out[0] + r * (size_t)Vp, mx = l[0], sum, inv;
        int y = a->ints[r];
        double target;
        for (i = 1; i < V; i++) mx = l[i] > mx ? l[i] : mx;
        target = (double)l[y] - (double)mx;
        for (i = 0; i < V; i++) l[i] = mgt__expf(l[i] - mx);
        sum = mgt__sum8(l, V);
        a->dout[r] = log((double)sum) - target;
        if (gs == 0.0f) continue;
        inv = gs / sum;
        for (i = 0; i < V; i++) l[i] *= inv;
        l[y] -= gs;
        for (i = V; i < Vp; i++) l[i] = 0.0f;
    }
}
static void mgt__cpu_crossentropy(mgt_backend *be, double *losses, float *logits, const int *targets, int N, int V, int Vp, float grad_scale) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = logits; a.dout = losses; a.ints = targets; a.n[0] = N; a.n[1] = V; a.n[2] = Vp; a.f[0] = grad_scale;
    mgt__pool_run(MGT__POOL(be), mgt__xent_task, &a);
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
    size_t lo, hi, i;
    mgt__span(a->count, tid, nth, 64, &lo, &hi);
    for (i = lo; i < hi; i++) {
        float gi = g[i] * gs;
        m[i] = b1 * m[i] + (1.0f - b1) * gi;
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        p[i] = p[i] * decay - step * m[i] / (sqrtf(v[i]) / sbc2 + eps);
    }
}
static void mgt__cpu_adamw(mgt_backend *be, float *param, const float *grad, float *m, float *v, size_t n, float lr, float beta1,
                           float beta2, float eps, float weight_decay, float grad_scale, float bias_correction1, float bias_correction2) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = param; a.out[1] = m; a.out[2] = v; a.in[0] = grad; a.count = n;
    a.f[0] = lr; a.f[1] = beta1; a.f[2] = beta2; a.f[3] = eps; a.f[4] = weight_decay; a.f[5] = grad_scale;
    a.f[6] = bias_correction1; a.f[7] = bias_correction2;
    mgt__pool_run(MGT__POOL(be), mgt__adamw_task, &a);
}

/* OpenBLAS would start its own threads inside each call; the pool already owns the cores */
#if defined(__GNUC__) || defined(__clang__)
extern void openblas_set_num_threads(int) __attribute__((weak));
#endif

static int mgt__cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

static mgt_result mgt__cpu_backend_create(mgt_backend **out, int threads, size_t scratch_per_thread) {
    mgt_backend *be = (mgt_backend *)MGT_MALLOC(sizeof *be);
    mgt__cpu *cpu = (mgt__cpu *)MGT_MALLOC(sizeof *cpu);
    if (!be || !cpu) { MGT_FREE(be); MGT_FREE(cpu); return mgt__fail(MGT_ERROR_MEMORY, "out of memory creating the CPU backend"); }
    memset(be, 0, sizeof *be);
    memset(cpu, 0, sizeof *cpu);
#if defined(__GNUC__) || defined(__clang__)
    if (openblas_set_num_threads) openblas_set_num_threads(1);
#endif
    be->name = "cpu";
    be->impl = cpu;
    be->alloc = mgt__cpu_alloc;
    be->free = mgt__cpu_free;
    be->encoder_forward = mgt__cpu_encoder_forward;
    be->encoder_backward = mgt__cpu_encoder_backward;
    be->layernorm_forward = mgt__cpu_layernorm_forward;
    be->layernorm_backward = mgt__cpu_layernorm_backward;
    be->matmul_forward = mgt__cpu_matmul_forward;
    be->matmul_backward = mgt__cpu_matmul_backward;
    be->attention_forward = mgt__cpu_attention_forward;
    be->attention_backward = mgt__cpu_attention_backward;
    be->gelu_forward = mgt__cpu_gelu_forward;
    be->gelu_backward = mgt__cpu_gelu_backward;
    be->add_inplace = mgt__cpu_add_inplace;
    be->crossentropy = mgt__cpu_crossentropy;
    be->sum_squares = mgt__cpu_sum_squares;
    be->adamw = mgt__cpu_adamw;
    be->scale = mgt__cpu_scale;
    be->zero = mgt__cpu_zero;
    if (!mgt__pool_init(&cpu->pool, threads)) {
        mgt__pool_destroy(&cpu->pool);
        MGT_FREE(cpu); MGT_FREE(be);
        return mgt__fail(MGT_ERROR_MEMORY, "cannot start %d CPU threads", threads);
    }
    cpu->scratch_per_thread = scratch_per_thread;
    cpu->scratch = (float *)be->alloc(be, sizeof(float) * scratch_per_thread * (size_t)cpu->pool.n, MGT_MEM_WORKSPACE);
    if (!cpu->scratch) {
        mgt__pool_destroy(&cpu->pool);
        MGT_FREE(cpu); MGT_FREE(be);
        return mgt__fail(MGT_ERROR_MEMORY, "out of memory for attention scratch");
    }
    *out = be;
    return MGT_OK;
}
static void mgt__cpu_backend_destroy(mgt_backend *be) {
    mgt__cpu *cpu;
    if (!be) return;
    cpu = (mgt__cpu *)be->impl;
    be->free(be, cpu->scratch, sizeof(float) * cpu->scratch_per_thread * (size_t)cpu->pool.n, MGT_MEM_WORKSPACE);
    mgt__pool_destroy(&cpu->pool);
    MGT_FREE(cpu);
    MGT_FREE(be);
}

/* ---- the model: one contiguous parameter buffer and a table of named tensors ------------------ */

enum { /* tensors of one block, in storage order */
    MGT__LN1W, MGT__LN1B, MGT__QKVW, MGT__QKVB, MGT__PROJW, MGT__PROJB,
    MGT__LN2W, MGT__LN2B, MGT__FCW, MGT__FCB, MGT__FCPROJW, MGT__FCPROJB, MGT__BLOCK_TENSORS
};
#define MGT__WTE 0
#define MGT__WPE 1
#define MGT__BLOCK(l, k) (2 + (l) * MGT__BLOCK_TENSORS + (k))
#define MGT__LNFW(L) (2 + (L) * MGT__BLOCK_TENSORS)
#define MGT__LNFB(L) (3 + (L) * MGT__BLOCK_TENSORS)

typedef struct mgt__tensor {
    mgt_tensor_info info;
    size_t offset;   /* into the parameter buffer, in floats */
    size_t storage;  /* floats stored: numel plus vocabulary padding rows for wte */
    int decay;       /* AdamW weight decay applies (matrices and embeddings) */
    float init_std;  /* N(0, init_std), or init_value when 0 */
    float init_value;
} mgt__tensor;

static void mgt__add_tensor(mgt__tensor *t, int *count, size_t *offset, const char *name, int rows, int cols, int storage_rows,
                            int decay, float std, float value) {
    mgt__tensor *x = &t[(*count)++];
    memset(x, 0, sizeof *x);
    mgt__strlcpy(x->info.name, name, sizeof x->info.name);
    x->info.ndim = cols ? 2 : 1;
    x->info.shape[0] = rows;
    x->info.shape[1] = cols;
    x->info.numel = (size_t)rows * (size_t)(cols ? cols : 1);
    x->storage = (size_t)storage_rows * (size_t)(cols ? cols : 1);
    x->offset = *offset;
    *offset += (x->storage + 15) & ~(size_t)15; /* 64-byte aligned tensors */
    x->decay = decay;
    x->init_std = std;
    x->init_value = value;
}

/* GPT-2 layout, block-major so that a layer's tensors are contiguous (buckets, shards, stages) */
static int mgt__model_tensors(const mgt_config *cfg, int Vp, mgt__tensor *t, size_t *total) {
    int L = cfg->model.n_layer, C = cfg->model.d_model, n = 0, l;
    size_t off = 0;
    float std = 0.02f, proj_std = 0.02f / sqrtf(2.0f * (float)L);
    char name[64];
    mgt__add_tensor(t, &n, &off, "wte", cfg->model.vocab_size, C, Vp, 1, std, 0);
    mgt__add_tensor(t, &n, &off, "wpe", cfg->model.seq_len, C, cfg->model.seq_len, 1, std, 0);
    for (l = 0; l < L; l++) {
#define MGT__T(suffix, rows, cols, decay, sd, val) \
    snprintf(name, sizeof name, "h.%d.%s", l, suffix); mgt__add_tensor(t, &n, &off, name, rows, cols, rows, decay, sd, val);
        MGT__T("ln_1.weight", C, 0, 0, 0, 1)
        MGT__T("ln_1.bias", C, 0, 0, 0, 0)
        MGT__T("attn.c_attn.weight", 3 * C, C, 1, std, 0)
        MGT__T("attn.c_attn.bias", 3 * C, 0, 0, 0, 0)
        MGT__T("attn.c_proj.weight", C, C, 1, proj_std, 0)
        MGT__T("attn.c_proj.bias", C, 0, 0, 0, 0)
        MGT__T("ln_2.weight", C, 0, 0, 0, 1)
        MGT__T("ln_2.bias", C, 0, 0, 0, 0)
        MGT__T("mlp.c_fc.weight", 4 * C, C, 1, std, 0)
        MGT__T("mlp.c_fc.bias", 4 * C, 0, 0, 0, 0)
        MGT__T("mlp.c_proj.weight", C, 4 * C, 1, proj_std, 0)
        MGT__T("mlp.c_proj.bias", C, 0, 0, 0, 0)
#undef MGT__T
    }
    mgt__add_tensor(t, &n, &off, "ln_f.weight", C, 0, C, 0, 0, 1);
    mgt__add_tensor(t, &n, &off, "ln_f.bias", C, 0, C, 0, 0, 0);
    *total = off;
    return n;
}

static uint64_t mgt__name_key(const char *name) { /* FNV-1a: the generator's stream per tensor */
    uint64_t h = 0xcbf29ce484222325ULL;
    while (*name) { h ^= (unsigned char)*name++; h *= 0x100000001b3ULL; }
    return h;
}

/* Activations of one micro-batch. With recompute = full, every layer shares one set and only the
   residual stream at each layer's input is kept. */
typedef struct mgt__layer_acts {
    float *ln1, *ln1_mean, *ln1_rstd; /* (N,C) (N) (N) */
    float *qkv;                       /* (N,3C) */
    float *att;                       /* (B,NH,T,T) */
    float *atty;                      /* (N,C) */
    float *res2;                      /* (N,C) residual after attention */
    float *ln2, *ln2_mean, *ln2_rstd; /* (N,C) (N) (N) */
    float *fch, *fch_gelu;            /* (N,4C) */
} mgt__layer_acts;

typedef struct mgt__acts {
    float **resid;                    /* L+1 of (N,C): input of each block, then the last output */
    mgt__layer_acts *layer;           /* L */
    float *lnf, *lnf_mean, *lnf_rstd; /* (N,C) (N) (N) */
    float *logits;                    /* (N,Vp); dlogits in place */
    double *losses;                   /* (N) */
    int *inputs, *targets;            /* (N) */
    float *dres, *dln, *dqkv, *dfch;  /* gradient scratch: (N,C) (N,C) (N,3C) (N,4C) */
    void *block;
    size_t bytes;
} mgt__acts;

static void *mgt__carve(char **cursor, size_t bytes) {
    void *p = *cursor;
    *cursor += (bytes + 63) & ~(size_t)63;
    return p;
}

/* lays the activations out from base (NULL: only measures); returns the bytes needed */
static size_t mgt__acts_layout(mgt__acts *a, char *base, int L, int B, int T, int C, int NH, int Vp, int recompute, int backward) {
    char *cur = base;
    size_t N = (size_t)B * (size_t)T, f = sizeof(float), l;
    int sets = recompute ? 1 : L;
    mgt__layer_acts *sets_acts = a->layer;
    for (l = 0; l <= (size_t)L; l++) a->resid[l] = (float *)mgt__carve(&cur, N * (size_t)C * f);
    for (l = 0; l < (size_t)sets; l++) {
        mgt__layer_acts *x = &sets_acts[l];
        x->ln1 = (float *)mgt__carve(&cur, N * (size_t)C * f);
        x->ln1_mean = (float *)mgt__carve(&cur, N * f);
        x->ln1_rstd = (float *)mgt__carve(&cur, N * f);
        x->qkv = (float *)mgt__carve(&cur, N * 3 * (size_t)C * f);
        x->att = (float *)mgt__carve(&cur, (size_t)B * (size_t)NH * (size_t)T * (size_t)T * f);
        x->atty = (float *)mgt__carve(&cur, N * (size_t)C * f);
        x->res2 = (float *)mgt__carve(&cur, N * (size_t)C * f);
        x->ln2 = (float *)mgt__carve(&cur, N * (size_t)C * f);
        x->ln2_mean = (float *)mgt__carve(&cur, N * f);
        x->ln2_rstd = (float *)mgt__carve(&cur, N * f);
        x->fch = (float *)mgt__carve(&cur, N * 4 * (size_t)C * f);
        x->fch_gelu = (float *)mgt__carve(&cur, N * 4 * (size_t)C * f);
    }
    for (l = (size_t)sets; l < (size_t)L; l++) sets_acts[l] = sets_acts[0];
    a->lnf = (float *)mgt__carve(&cur, N * (size_t)C * f);
    a->lnf_mean = (float *)mgt__carve(&cur, N * f);
    a->lnf_rstd = (float *)mgt__carve(&cur, N * f);
    a->logits = (float *)mgt__carve(&cur, N * (size_t)Vp * f);
    a->losses = (double *)mgt__carve(&cur, N * sizeof(double));
    a->inputs = (int *)mgt__carve(&cur, N * sizeof(int));
    a->targets = (int *)mgt__carve(&cur, N * sizeof(int));
    if (backward) {
        a->dres = (float *)mgt__carve(&cur, N * (size_t)C * f);
        a->dln = (float *)mgt__carve(&cur, N * (size_t)C * f);
        a->dqkv = (float *)mgt__carve(&cur, N * 3 * (size_t)C * f);
        a->dfch = (float *)mgt__carve(&cur, N * 4 * (size_t)C * f);
    }
    return (size_t)(cur - base);
}

/* ---- data: llm.c token shards, memory-mapped ------------------------------------------------- */

#define MGT_SHARD_MAGIC 20240520
#define MGT_SHARD_HEADER_BYTES 1024

typedef struct mgt__shard {
    const uint16_t *tokens;
    size_t n;
    void *map;
    size_t map_len;
} mgt__shard;

static void mgt__shard_close(mgt__shard *s) {
    if (s->map) munmap(s->map, s->map_len);
    memset(s, 0, sizeof *s);
}

static mgt_result mgt__shard_open(mgt__shard *s, const char *path, const char *key, int vocab_size) {
    int fd, header[256];
    struct stat st;
    size_t i, count;
    uint16_t max_token = 0;
    memset(s, 0, sizeof *s);
    fd = open(path, O_RDONLY);
    if (fd < 0) return mgt__fail(MGT_ERROR_DATA, "%s: %s: cannot open the token shard: %s (make it with `mgt prepare`, see README)", key, path, strerror(errno));
    if (fstat(fd, &st) || (size_t)st.st_size < MGT_SHARD_HEADER_BYTES) {
        close(fd);
        return mgt__fail(MGT_ERROR_DATA, "%s: %s: truncated shard: %lld bytes, shorter than the 1024-byte header", key, path, (long long)st.st_size);
    }
    if (pread(fd, header, sizeof header, 0) != (ssize_t)sizeof header) { close(fd); return mgt__fail(MGT_ERROR_DATA, "%s: %s: cannot read the header", key, path); }
    if (header[0] != MGT_SHARD_MAGIC || header[1] != 1) {
        close(fd);
        return mgt__fail(MGT_ERROR_DATA, "%s: %s: not a token shard (magic %d version %d, expected %d version 1; make it with `mgt prepare`)",
                         key, path, header[0], header[1], MGT_SHARD_MAGIC);
    }
    count = (size_t)(unsigned)header[2];
    if ((size_t)st.st_size < MGT_SHARD_HEADER_BYTES + 2 * count) {
        close(fd);
        return mgt__fail(MGT_ERROR_DATA, "%s: %s: truncated shard: the header promises %zu tokens (%zu bytes) but the file has %lld bytes",
                         key, path, count, MGT_SHARD_HEADER_BYTES + 2 * count, (long long)st.st_size);
    }
    s->map_len = MGT_SHARD_HEADER_BYTES + 2 * count;
    s->map = mmap(NULL, s->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (s->map == MAP_FAILED) { s->map = NULL; return mgt__fail(MGT_ERROR_DATA, "%s: %s: cannot map: %s", key, path, strerror(errno)); }
    s->tokens = (const uint16_t *)((const char *)s->map + MGT_SHARD_HEADER_BYTES);
    s->n = count;
    for (i = 0; i < count; i++) max_token = s->tokens[i] > max_token ? s->tokens[i] : max_token;
    if (count && (int)max_token >= vocab_size) {
        mgt__shard_close(s);
        return mgt__fail(MGT_ERROR_DATA, "%s: %s: token id %d is beyond the vocabulary (model.vocab_size = %d); was it prepared with another tokenizer?",
                         key, path, (int)max_token, vocab_size);
    }
    return MGT_OK;
}

MGTDEF mgt_result mgt_shard_check(const char *path, int vocab_size, size_t *n_tokens) {
    mgt__shard s;
    mgt_result r;
    if (!path) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_shard_check: path is required");
    r = mgt__shard_open(&s, path, "shard", vocab_size);
    if (r != MGT_OK) return r;
    if (n_tokens) *n_tokens = s.n;
    mgt__shard_close(&s);
    return MGT_OK;
}

/* where sequence i of step `step` starts: a pure function of (seed, step, i), whatever the layout */
static size_t mgt__sequence_offset(const mgt__shard *s, uint64_t seed, uint64_t stream, uint64_t step, uint64_t i, int T) {
    return (size_t)(mgt__hash3(seed ^ stream, step, i) % (uint64_t)(s->n - (size_t)T));
}
#define MGT__STREAM_TRAIN 0x747261696eULL
#define MGT__STREAM_VAL 0x76616cULL

/* fills rows (count, T+1) of the given step; the loader thread prefetches the next step */
typedef struct mgt__loader {
    mgt__shard shard;
    int T, rows;
    uint64_t seed;
    uint16_t *buf[2];
    long long buf_step[2], want;
    int busy, quit, started;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} mgt__loader;

static void mgt__loader_fill(const mgt__loader *ld, long long step, uint16_t *out) {
    int i;
    for (i = 0; i < ld->rows; i++) {
        size_t off = mgt__sequence_offset(&ld->shard, ld->seed, MGT__STREAM_TRAIN, (uint64_t)step, (uint64_t)i, ld->T);
        memcpy(out + (size_t)i * (size_t)(ld->T + 1), ld->shard.tokens + off, sizeof(uint16_t) * (size_t)(ld->T + 1));
    }
}

static void *mgt__loader_main(void *arg) {
    mgt__loader *ld = (mgt__loader *)arg;
    pthread_mutex_lock(&ld->mu);
    for (;;) {
        long long s;
        while (!ld->busy && !ld->quit) pthread_cond_wait(&ld->cv, &ld->mu);
        if (ld->quit) break;
        s = ld->want;
        pthread_mutex_unlock(&ld->mu);
        mgt__loader_fill(ld, s, ld->buf[s & 1]);
        pthread_mutex_lock(&ld->mu);
        ld->buf_step[s & 1] = s;
        ld->busy = 0;
        pthread_cond_broadcast(&ld->cv);
    }
    pthread_mutex_unlock(&ld->mu);
    return NULL;
}

/* tokens of step `step`, valid until the next call; starts prefetching step+1 */
static const uint16_t *mgt__loader_get(mgt__loader *ld, long long step) {
    pthread_mutex_lock(&ld->mu);
    while (ld->busy) pthread_cond_wait(&ld->cv, &ld->mu);
    if (ld->buf_step[step & 1] != step) {
        mgt__loader_fill(ld, step, ld->buf[step & 1]);
        ld->buf_step[step & 1] = step;
    }
    ld->want = step + 1;
    ld->busy = ld->started;
    pthread_cond_broadcast(&ld->cv);
    pthread_mutex_unlock(&ld->mu);
    return ld->buf[step & 1];
}

static mgt_result mgt__loader_open(mgt__loader *ld, const char *path, const char *key, int vocab_size, int T, int rows, uint64_t seed, int prefetch) {
    mgt_result r;
    memset(ld, 0, sizeof *ld);
    r = mgt__shard_open(&ld->shard, path, key, vocab_size);
    if (r != MGT_OK) return r;
    if (ld->shard.n < (size_t)T + 1) {
        size_t n = ld->shard.n;
        mgt__shard_close(&ld->shard);
        return mgt__fail(MGT_ERROR_CONFIG, "%s: %s has %zu tokens, fewer than seq_len + 1 = %d; lower [model] seq_len or use more data", key, path, n, T + 1);
    }
    ld->T = T;
    ld->rows = rows;
    ld->seed = seed;
    ld->buf_step[0] = ld->buf_step[1] = -1;
    ld->buf[0] = (uint16_t *)MGT_MALLOC(sizeof(uint16_t) * (size_t)rows * (size_t)(T + 1) * 2);
    if (!ld->buf[0]) { mgt__shard_close(&ld->shard); return mgt__fail(MGT_ERROR_MEMORY, "out of memory for the data loader"); }
    ld->buf[1] = ld->buf[0] + (size_t)rows * (size_t)(T + 1);
    pthread_mutex_init(&ld->mu, NULL);
    pthread_cond_init(&ld->cv, NULL);
    if (prefetch && !pthread_create(&ld->thread, NULL, mgt__loader_main, ld)) ld->started = 1;
    return MGT_OK;
}

static void mgt__loader_close(mgt__loader *ld) {
    if (!ld->buf[0]) return;
    if (ld->started) {
        pthread_mutex_lock(&ld->mu);
        ld->quit = 1;
        pthread_cond_broadcast(&ld->cv);
        pthread_mutex_unlock(&ld->mu);
        pthread_join(ld->thread, NULL);
    }
    pthread_mutex_destroy(&ld->mu);
    pthread_cond_destroy(&ld->cv);
    MGT_FREE(ld->buf[0]);
    mgt__shard_close(&ld->shard);
    memset(ld, 0, sizeof *ld);
}

/* ---- safetensors: an 8-byte header length, a JSON header, then the raw tensors --------------- */

typedef struct mgt__st_tensor {
    char name[96];
    char dtype[8];              /* "F32", "F64", "I32" */
    int ndim;
    long long shape[4];
    size_t begin, end;          /* byte offsets into the data section */
} mgt__st_tensor;

typedef struct mgt__st_file {
    unsigned char *buf;         /* the whole file */
    size_t size, data_start;
    mgt__st_tensor *t;
    int n;
    char **meta;                /* nmeta pairs: key, value */
    int nmeta;
} mgt__st_file;

static uint64_t mgt__checksum_update(uint64_t h, const void *data, size_t bytes) { /* 64-bit FNV-1a over words */
    const unsigned char *p = (const unsigned char *)data;
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ULL;
    }
    for (; i < bytes; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}
#define MGT__CHECKSUM_INIT 0xcbf29ce484222325ULL

/* JSON string with escapes into a growing buffer */
typedef struct mgt__buf { char *p; size_t n, cap; int oom; } mgt__buf;
static void mgt__buf_put(mgt__buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        char *p;
        while (cap < b->n + n + 1) cap *= 2;
        p = (char *)realloc(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void mgt__buf_str(mgt__buf *b, const char *s) { mgt__buf_put(b, s, strlen(s)); }
MGT__PRINTF(2, 3) static void mgt__buf_printf(mgt__buf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) mgt__buf_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}
static void mgt__buf_json_string(mgt__buf *b, const char *s) {
    mgt__buf_str(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { char e[2] = {'\\', (char)c}; mgt__buf_put(b, e, 2); }
        else if (c == '\n') mgt__buf_str(b, "\\n");
        else if (c == '\t') mgt__buf_str(b, "\\t");
        else if (c < 0x20) mgt__buf_printf(b, "\\u%04x", c);
        else mgt__buf_put(b, (const char *)&c, 1);
    }
    mgt__buf_str(b, "\"");
}

typedef struct mgt__st_out {
    const char *name;
    const void *data;
    const char *dtype; /* "F32" */
    int ndim;
    long long shape[2];
    size_t bytes;
} mgt__st_out;

static mgt_result mgt__fsync_dir(const char *path) {
    char dir[1024];
    const char *slash = strrchr(path, '/');
    int fd;
    if (!slash) mgt__strlcpy(dir, ".", sizeof dir);
    else {
        size_t n = (size_t)(slash - path);
        if (n >= sizeof dir) n = sizeof dir - 1;
        memcpy(dir, path, n ? n : 1);
        dir[n ? n : 1] = 0;
    }
    fd = open(dir, O_RDONLY);
    if (fd >= 0) { (void)fsync(fd); close(fd); }
    return MGT_OK;
}

/* writes path atomically: path.tmp, fsync, rename, fsync of the folder. meta: nmeta key/value pairs. */
static mgt_result mgt__st_write(const char *path, const mgt__st_out *t, int n, const char *const *meta, int nmeta) {
    mgt__buf h;
    char tmp[1300];
    uint64_t sum = MGT__CHECKSUM_INIT, len;
    size_t off = 0;
    int i, ok = 1;
    FILE *f;
    memset(&h, 0, sizeof h);
    for (i = 0; i < n; i++) sum = mgt__checksum_update(sum, t[i].data, t[i].bytes);
    mgt__buf_str(&h, "{\"__metadata__\":{");
    for (i = 0; i < nmeta; i++) {
        mgt__buf_json_string(&h, meta[2 * i]);
        mgt__buf_str(&h, ":");
        mgt__buf_json_string(&h, meta[2 * i + 1]);
        mgt__buf_str(&h, ",");
    }
    mgt__buf_printf(&h, "\"checksum\":\"%016llx\"}", (unsigned long long)sum);
    for (i = 0; i < n; i++) {
        mgt__buf_str(&h, ",");
        mgt__buf_json_string(&h, t[i].name);
        mgt__buf_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", t[i].dtype);
        if (t[i].ndim >= 1) mgt__buf_printf(&h, "%lld", t[i].shape[0]);
        if (t[i].ndim >= 2) mgt__buf_printf(&h, ",%lld", t[i].shape[1]);
        mgt__buf_printf(&h, "],\"data_offsets\":[%zu,%zu]}", off, off + t[i].bytes);
        off += t[i].bytes;
    }
    mgt__buf_str(&h, "}");
    while (!h.oom && h.n % 8) mgt__buf_str(&h, " ");
    if (h.oom) { free(h.p); return mgt__fail(MGT_ERROR_MEMORY, "out of memory writing %s", path); }
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    f = fopen(tmp, "wb");
    if (!f) { free(h.p); return mgt__fail(MGT_ERROR_IO, "%s: cannot create: %s", tmp, strerror(errno)); }
    len = (uint64_t)h.n;
    ok &= fwrite(&len, 8, 1, f) == 1;
    ok &= fwrite(h.p, 1, h.n, f) == h.n;
    for (i = 0; i < n && ok; i++) ok &= fwrite(t[i].data, 1, t[i].bytes, f) == t[i].bytes;
    free(h.p);
    ok &= fflush(f) == 0;
    ok &= fsync(fileno(f)) == 0;
    ok &= fclose(f) == 0;
    if (!ok || rename(tmp, path)) {
        int e = errno;
        remove(tmp);
        return mgt__fail(MGT_ERROR_IO, "%s: cannot write: %s (is the disk full?)", path, strerror(e));
    }
    return mgt__fsync_dir(path);
}

/* a small JSON reader for safetensors headers: objects, strings, numbers and arrays of numbers */
static void mgt__json_ws(const char **p) { while (**p == ' ' || **p == '\n' || **p == '\r' || **p == '\t') (*p)++; }
static int mgt__json_string(const char **p, mgt__buf *out) {
    const char *s = *p;
    mgt__json_ws(&s);
    if (*s != '"') return 0;
    s++;
    while (*s && *s != '"') {
        if (*s == '\\') {
            char c = *++s, e = 0;
            if (!c) return 0;
            if (c == 'u') {
                unsigned cp = 0;
                int k;
                char u[4];
                for (k = 1; k <= 4; k++) {
                    char d = s[k];
                    if (!d) return 0;
                    cp = cp * 16 + (unsigned)(d <= '9' ? d - '0' : (d | 32) - 'a' + 10);
                }
                s += 5;
                if (cp < 0x80) { u[0] = (char)cp; mgt__buf_put(out, u, 1); }
                else if (cp < 0x800) { u[0] = (char)(0xc0 | (cp >> 6)); u[1] = (char)(0x80 | (cp & 63)); mgt__buf_put(out, u, 2); }
                else { u[0] = (char)(0xe0 | (cp >> 12)); u[1] = (char)(0x80 | ((cp >> 6) & 63)); u[2] = (char)(0x80 | (cp & 63)); mgt__buf_put(out, u, 3); }
                continue;
            }
            e = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c == 'b' ? '\b' : c == 'f' ? '\f' : c;
            mgt__buf_put(out, &e, 1);
            s++;
        } else {
            mgt__buf_put(out, s, 1);
            s++;
        }
    }
    if (*s != '"') return 0;
    *p = s + 1;
    if (!out->p) mgt__buf_put(out, "", 0);
    return !out->oom;
}
static int mgt__json_expect(const char **p, char c) {
    mgt__json_ws(p);
    if (**p != c) return 0;
    (*p)++;
    return 1;
}
static int mgt__json_numbers(const char **p, long long *v, int cap) { /* [n, n, ...]; returns count or -1 */
    int n = 0;
    if (!mgt__json_expect(p, '[')) return -1;
    mgt__json_ws(p);
    if (**p == ']') { (*p)++; return 0; }
    for (;;) {
        char *end;
        long long x;
        mgt__json_ws(p);
        x = strtoll(*p, &end, 10);
        if (end == *p || n >= cap) return -1;
        v[n++] = x;
        *p = end;
        mgt__json_ws(p);
        if (**p == ',') { (*p)++; continue; }
        if (**p == ']') { (*p)++; return n; }
        return -1;
    }
}

static void mgt__st_close(mgt__st_file *f) {
    int i;
    for (i = 0; i < 2 * f->nmeta; i++) free(f->meta[i]);
    free(f->meta);
    free(f->t);
    MGT_FREE(f->buf);
    memset(f, 0, sizeof *f);
}

static mgt_result mgt__st_open(mgt__st_file *f, const char *path) {
    FILE *fp;
    uint64_t hlen;
    const char *p, *end;
    long long sz;
    int cap_t = 0, cap_m = 0;
    const char *sum_text = NULL;
    memset(f, 0, sizeof *f);
    fp = fopen(path, "rb");
    if (!fp) return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: cannot open: %s", path, strerror(errno));
    if (fseek(fp, 0, SEEK_END) || (sz = ftell(fp)) < 8 || fseek(fp, 0, SEEK_SET)) {
        fclose(fp);
        return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: too short to be a safetensors file", path);
    }
    f->size = (size_t)sz;
    f->buf = (unsigned char *)MGT_MALLOC(f->size + 1);
    if (!f->buf) { fclose(fp); return mgt__fail(MGT_ERROR_MEMORY, "%s: out of memory (%zu bytes)", path, f->size); }
    if (fread(f->buf, 1, f->size, fp) != f->size) { fclose(fp); mgt__st_close(f); return mgt__fail(MGT_ERROR_IO, "%s: read error", path); }
    fclose(fp);
    memcpy(&hlen, f->buf, 8);
    if (hlen > f->size - 8) {
        mgt__fail(MGT_ERROR_CHECKPOINT, "%s: truncated: header of %llu bytes in a %zu-byte file", path, (unsigned long long)hlen, f->size);
        mgt__st_close(f);
        return MGT_ERROR_CHECKPOINT;
    }
    f->data_start = 8 + (size_t)hlen;
    {
        unsigned char save = f->buf[f->data_start];
        f->buf[f->data_start] = 0; /* terminate the header for parsing */
        p = (const char *)f->buf + 8;
        end = p + hlen;
        if (!mgt__json_expect(&p, '{')) goto bad;
        for (;;) {
            mgt__buf key;
            mgt__json_ws(&p);
            if (*p == '}') break;
            memset(&key, 0, sizeof key);
            if (!mgt__json_string(&p, &key) || !mgt__json_expect(&p, ':') || !mgt__json_expect(&p, '{')) { free(key.p); goto bad; }
            if (!strcmp(key.p, "__metadata__")) {
                free(key.p);
                for (;;) {
                    mgt__buf k, v;
                    mgt__json_ws(&p);
                    if (*p == '}') { p++; break; }
                    memset(&k, 0, sizeof k);
                    memset(&v, 0, sizeof v);
                    if (!mgt__json_string(&p, &k) || !mgt__json_expect(&p, ':') || !mgt__json_string(&p, &v)) { free(k.p); free(v.p); goto bad; }
                    if (f->nmeta == cap_m) {
                        char **m;
                        cap_m = cap_m ? 2 * cap_m : 16;
                        m = (char **)realloc(f->meta, sizeof(char *) * 2 * (size_t)cap_m);
                        if (!m) { free(k.p); free(v.p); goto bad; }
                        f->meta = m;
                    }
                    f->meta[2 * f->nmeta] = k.p;
                    f->meta[2 * f->nmeta + 1] = v.p;
                    f->nmeta++;
                    mgt__json_ws(&p);
                    if (*p == ',') p++;
                }
            } else {
                mgt__st_tensor *t;
                if (f->n == cap_t) {
                    mgt__st_tensor *nt;
                    cap_t = cap_t ? 2 * cap_t : 64;
                    nt = (mgt__st_tensor *)realloc(f->t, sizeof *nt * (size_t)cap_t);
                    if (!nt) { free(key.p); goto bad; }
                    f->t = nt;
                }
                t = &f->t[f->n++];
                memset(t, 0, sizeof *t);
                mgt__strlcpy(t->name, key.p, sizeof t->name);
                free(key.p);
                for (;;) {
                    mgt__buf field;
                    mgt__json_ws(&p);
                    if (*p == '}') { p++; break; }
                    memset(&field, 0, sizeof field);
                    if (!mgt__json_string(&p, &field) || !mgt__json_expect(&p, ':')) { free(field.p); goto bad; }
                    if (!strcmp(field.p, "dtype")) {
                        mgt__buf v;
                        memset(&v, 0, sizeof v);
                        if (!mgt__json_string(&p, &v)) { free(field.p); free(v.p); goto bad; }
                        mgt__strlcpy(t->dtype, v.p, sizeof t->dtype);
                        free(v.p);
                    } else if (!strcmp(field.p, "shape")) {
                        t->ndim = mgt__json_numbers(&p, t->shape, 4);
                        if (t->ndim < 0) { free(field.p); goto bad; }
                    } else if (!strcmp(field.p, "data_offsets")) {
                        long long o[2];
                        if (mgt__json_numbers(&p, o, 2) != 2 || o[0] < 0 || o[1] < o[0]) { free(field.p); goto bad; }
                        t->begin = (size_t)o[0];
                        t->end = (size_t)o[1];
                    } else { free(field.p); goto bad; }
                    free(field.p);
                    mgt__json_ws(&p);
                    if (*p == ',') p++;
                }
                if (t->end > f->size - f->data_start) {
                    f->buf[f->data_start] = save;
                    mgt__st_close(f);
                    return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: truncated: tensor data ends past the end of the file", path);
                }
            }
            mgt__json_ws(&p);
            if (*p == ',') p++;
        }
        if (p > end) goto bad;
        f->buf[f->data_start] = save;
    }
    {
        int i;
        for (i = 0; i < f->nmeta; i++) if (!strcmp(f->meta[2 * i], "checksum")) sum_text = f->meta[2 * i + 1];
    }
    if (sum_text) {
        uint64_t sum = mgt__checksum_update(MGT__CHECKSUM_INIT, f->buf + f->data_start, f->size - f->data_start);
        char text[32];
        snprintf(text, sizeof text, "%016llx", (unsigned long long)sum);
        if (strcmp(text, sum_text)) {
            mgt__fail(MGT_ERROR_CHECKPOINT, "%s: checksum mismatch (stored %s, computed %s): the file is damaged; resume from an older checkpoint", path, sum_text, text);
            mgt__st_close(f);
            return MGT_ERROR_CHECKPOINT;
        }
    }
    return MGT_OK;
bad:
    mgt__st_close(f);
    return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: malformed safetensors header", path);
}

static const mgt__st_tensor *mgt__st_find(const mgt__st_file *f, const char *name) {
    int i;
    for (i = 0; i < f->n; i++) if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}
static const char *mgt__st_meta(const mgt__st_file *f, const char *key) {
    int i;
    for (i = 0; i < f->nmeta; i++) if (!strcmp(f->meta[2 * i], key)) return f->meta[2 * i + 1];
    return NULL;
}
static const void *mgt__st_data(const mgt__st_file *f, const mgt__st_tensor *t) { return f->buf + f->data_start + t->begin; }

/* ---- runs ------------------------------------------------------------------------------------ */

struct mgt_run {
    mgt_config cfg;
    mgt_backend *be;
    int L, NH, C, T, V, Vp, B, micro_steps, inference;
    mgt__tensor *tensors;
    int ntensors;
    size_t storage;                  /* floats in the parameter buffer */
    size_t nparams;                  /* real parameters (no padding) */
    float *params, *grads, *m, *v;
    mgt__acts acts;
    mgt__loader train, val;
    int has_train, has_val;
    int step;                        /* optimizer steps done */
    int saved_step;                  /* step of the newest checkpoint written or loaded, -1 none */
    double loss, lr, grad_norm, step_s, val_loss, elapsed_s;
    int has_val_loss, val_step;
    long long tokens_seen;
    char dir[MGT_STR_MAX + 32], metrics_path[MGT_STR_MAX + 64];
    FILE *metrics;
};

static float *mgt__p(mgt_run *r, int t) { return r->params + r->tensors[t].offset; }
static float *mgt__g(mgt_run *r, int t) { return r->grads + r->tensors[t].offset; }

/* every element from (seed, tensor name, element index): any slice of any layout initialises alike */
typedef struct mgt__init_args { const mgt__tensor *tensor; float *p; uint64_t seed; } mgt__init_args;
static void mgt__init_task(void *ctx, int tid, int nth) {
    const mgt__init_args *a = (const mgt__init_args *)ctx;
    const mgt__tensor *x = a->tensor;
    uint64_t key = mgt__name_key(x->info.name);
    size_t lo, hi, i;
    mgt__span(x->info.numel, tid, nth, 64, &lo, &hi);
    for (i = lo; i < hi; i++) a->p[i] = x->init_std > 0 ? (float)(x->init_std * mgt__normal(a->seed, key, i)) : x->init_value;
}
static void mgt__init_params(mgt_run *r) {
    int t;
    for (t = 0; t < r->ntensors; t++) { /* vocabulary padding rows stay zero: no logit, no gradient, no decay */
        mgt__init_args a;
        a.tensor = &r->tensors[t];
        a.p = r->params + r->tensors[t].offset;
        a.seed = (uint64_t)r->cfg.train.seed;
        mgt__pool_run(MGT__POOL(r->be), mgt__init_task, &a);
    }
}

/* the forward pass of block l on B sequences of T tokens, reading resid[l], writing resid[l+1] */
static void mgt__block_forward(mgt_run *r, int l, int B, int T) {
    mgt_backend *be = r->be;
    mgt__layer_acts *a = &r->acts.layer[l];
    int C = r->C, N = B * T;
    const float *x = r->acts.resid[l];
    float *out = r->acts.resid[l + 1];
    be->layernorm_forward(be, a->ln1, a->ln1_mean, a->ln1_rstd, x, mgt__p(r, MGT__BLOCK(l, MGT__LN1W)), mgt__p(r, MGT__BLOCK(l, MGT__LN1B)), N, C);
    be->matmul_forward(be, a->qkv, a->ln1, mgt__p(r, MGT__BLOCK(l, MGT__QKVW)), mgt__p(r, MGT__BLOCK(l, MGT__QKVB)), N, C, 3 * C);
    be->attention_forward(be, a->atty, a->att, a->qkv, B, T, C, r->NH);
    be->matmul_forward(be, a->res2, a->atty, mgt__p(r, MGT__BLOCK(l, MGT__PROJW)), mgt__p(r, MGT__BLOCK(l, MGT__PROJB)), N, C, C);
    be->add_inplace(be, a->res2, x, (size_t)N * (size_t)C);
    be->layernorm_forward(be, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, mgt__p(r, MGT__BLOCK(l, MGT__LN2W)), mgt__p(r, MGT__BLOCK(l, MGT__LN2B)), N, C);
    be->matmul_forward(be, a->fch, a->ln2, mgt__p(r, MGT__BLOCK(l, MGT__FCW)), mgt__p(r, MGT__BLOCK(l, MGT__FCB)), N, C, 4 * C);
    be->gelu_forward(be, a->fch_gelu, a->fch, (size_t)N * 4 * (size_t)C);
    be->matmul_forward(be, out, a->fch_gelu, mgt__p(r, MGT__BLOCK(l, MGT__FCPROJW)), mgt__p(r, MGT__BLOCK(l, MGT__FCPROJB)), N, 4 * C, C);
    be->add_inplace(be, out, a->res2, (size_t)N * (size_t)C);
}

/* backward of block l: dres holds d(resid[l+1]) on entry and d(resid[l]) on exit */
static void mgt__block_backward(mgt_run *r, int l, int B, int T) {
    mgt_backend *be = r->be;
    mgt__layer_acts *a = &r->acts.layer[l];
    mgt__acts *s = &r->acts;
    int C = r->C, N = B * T;
    be->matmul_backward(be, s->dfch, mgt__g(r, MGT__BLOCK(l, MGT__FCPROJW)), mgt__g(r, MGT__BLOCK(l, MGT__FCPROJB)), s->dres, a->fch_gelu,
                        mgt__p(r, MGT__BLOCK(l, MGT__FCPROJW)), N, 4 * C, C);
    be->gelu_backward(be, s->dfch, a->fch, s->dfch, (size_t)N * 4 * (size_t)C);
    be->matmul_backward(be, s->dln, mgt__g(r, MGT__BLOCK(l, MGT__FCW)), mgt__g(r, MGT__BLOCK(l, MGT__FCB)), s->dfch, a->ln2,
                        mgt__p(r, MGT__BLOCK(l, MGT__FCW)), N, C, 4 * C);
    be->layernorm_backward(be, s->dres, mgt__g(r, MGT__BLOCK(l, MGT__LN2W)), mgt__g(r, MGT__BLOCK(l, MGT__LN2B)), s->dln, a->res2,
                           mgt__p(r, MGT__BLOCK(l, MGT__LN2W)), a->ln2_mean, a->ln2_rstd, N, C);
    /* dln now carries d(atty), then d(ln1) */
    be->matmul_backward(be, s->dln, mgt__g(r, MGT__BLOCK(l, MGT__PROJW)), mgt__g(r, MGT__BLOCK(l, MGT__PROJB)), s->dres, a->atty,
                        mgt__p(r, MGT__BLOCK(l, MGT__PROJW)), N, C, C);
    be->attention_backward(be, s->dqkv, s->dln, a->qkv, a->att, B, T, C, r->NH);
    be->matmul_backward(be, s->dln, mgt__g(r, MGT__BLOCK(l, MGT__QKVW)), mgt__g(r, MGT__BLOCK(l, MGT__QKVB)), s->dqkv, a->ln1,
                        mgt__p(r, MGT__BLOCK(l, MGT__QKVW)), N, C, 3 * C);
    be->layernorm_backward(be, s->dres, mgt__g(r, MGT__BLOCK(l, MGT__LN1W)), mgt__g(r, MGT__BLOCK(l, MGT__LN1B)), s->dln, r->acts.resid[l],
                           mgt__p(r, MGT__BLOCK(l, MGT__LN1W)), a->ln1_mean, a->ln1_rstd, N, C);
}

/* forward over acts.inputs (B,T) to logits; then per-row losses against acts.targets, and when
   grad_scale != 0 the logits turn into their gradients. Returns the summed loss. */
static double mgt__forward(mgt_run *r, int B, int T, float grad_scale) {
    mgt_backend *be = r->be;
    mgt__acts *s = &r->acts;
    int l, N = B * T;
    double sum = 0;
    be->encoder_forward(be, s->resid[0], s->inputs, mgt__p(r, MGT__WTE), mgt__p(r, MGT__WPE), B, T, r->C);
    for (l = 0; l < r->L; l++) mgt__block_forward(r, l, B, T);
    be->layernorm_forward(be, s->lnf, s->lnf_mean, s->lnf_rstd, s->resid[r->L], mgt__p(r, MGT__LNFW(r->L)), mgt__p(r, MGT__LNFB(r->L)), N, r->C);
    be->matmul_forward(be, s->logits, s->lnf, mgt__p(r, MGT__WTE), NULL, N, r->C, r->Vp);
    if (!s->targets || grad_scale < 0) return 0;
    be->crossentropy(be, s->losses, s->logits, s->targets, N, r->V, r->Vp, grad_scale);
    for (l = 0; l < N; l++) sum += s->losses[l];
    return sum;
}

static void mgt__backward(mgt_run *r, int B, int T) {
    mgt_backend *be = r->be;
    mgt__acts *s = &r->acts;
    int l, N = B * T, recompute = r->cfg.train.recompute == MGT_RECOMPUTE_FULL;
    be->matmul_backward(be, s->dln, mgt__g(r, MGT__WTE), NULL, s->logits, s->lnf, mgt__p(r, MGT__WTE), N, r->C, r->Vp);
    be->zero(be, s->dres, (size_t)N * (size_t)r->C);
    be->layernorm_backward(be, s->dres, mgt__g(r, MGT__LNFW(r->L)), mgt__g(r, MGT__LNFB(r->L)), s->dln, s->resid[r->L],
                           mgt__p(r, MGT__LNFW(r->L)), s->lnf_mean, s->lnf_rstd, N, r->C);
    for (l = r->L - 1; l >= 0; l--) {
        if (recompute) mgt__block_forward(r, l, B, T); /* rebuild this block's activations from resid[l] */
        mgt__block_backward(r, l, B, T);
    }
    be->encoder_backward(be, mgt__g(r, MGT__WTE), mgt__g(r, MGT__WPE), s->dres, s->inputs, B, T, r->C);
}

/* rows (B, T+1) of tokens into inputs and targets */
static void mgt__set_batch(mgt_run *r, const uint16_t *rows, int B, int T) {
    int b, t;
    for (b = 0; b < B; b++)
        for (t = 0; t < T; t++) {
            r->acts.inputs[b * T + t] = rows[(size_t)b * (size_t)(T + 1) + (size_t)t];
            r->acts.targets[b * T + t] = rows[(size_t)b * (size_t)(T + 1) + (size_t)t + 1];
        }
}

static double mgt__lr_at(const mgt_config *cfg, int step) {
    const double lr = cfg->train.lr, min_lr = cfg->train.min_lr;
    int warmup = cfg->train.warmup, steps = cfg->train.steps;
    double ratio;
    if (step < warmup) return lr * (double)(step + 1) / (double)warmup;
    if (steps <= warmup || cfg->train.schedule == MGT_SCHEDULE_CONSTANT) return lr;
    ratio = (double)(step - warmup) / (double)(steps - warmup);
    if (ratio > 1) ratio = 1;
    if (cfg->train.schedule == MGT_SCHEDULE_LINEAR) return lr - ratio * (lr - min_lr);
    return min_lr + 0.5 * (1.0 + cos(3.14159265358979323846 * ratio)) * (lr - min_lr);
}

static mgt_result mgt__metrics_line(mgt_run *r, int with_val);

/* one optimizer step over a global batch given as rows (global_batch, T+1) */
static mgt_result mgt__train_step(mgt_run *r, const uint16_t *rows) {
    mgt_backend *be = r->be;
    const mgt_config *cfg = &r->cfg;
    int GB = cfg->train.global_batch, micro, t;
    double t0 = mgt__now(), loss_sum = 0, sumsq, scale = 1.0, b1 = cfg->train.beta1, b2 = cfg->train.beta2;
    float grad_scale = 1.0f / ((float)GB * (float)r->T);
    be->zero(be, r->grads, r->storage);
    for (micro = 0; micro < r->micro_steps; micro++) {
        mgt__set_batch(r, rows + (size_t)micro * (size_t)r->B * (size_t)(r->T + 1), r->B, r->T);
        loss_sum += mgt__forward(r, r->B, r->T, grad_scale);
        mgt__backward(r, r->B, r->T);
    }
    sumsq = be->sum_squares(be, r->grads, r->storage);
    r->loss = loss_sum / ((double)GB * (double)r->T);
    r->grad_norm = sqrt(sumsq);
    if (!isfinite(r->loss) || !isfinite(r->grad_norm))
        return mgt__fail(MGT_ERROR_NUMERIC, "step %d: loss %g, gradient norm %g; the update was skipped (lower [train] lr or raise warmup)",
                         r->step + 1, r->loss, r->grad_norm);
    r->lr = mgt__lr_at(cfg, r->step);
    if (cfg->train.grad_clip > 0 && r->grad_norm > cfg->train.grad_clip) scale = cfg->train.grad_clip / (r->grad_norm + 1e-6);
    for (t = 0; t < r->ntensors; t++) {
        const mgt__tensor *x = &r->tensors[t];
        be->adamw(be, r->params + x->offset, r->grads + x->offset, r->m + x->offset, r->v + x->offset, x->storage, (float)r->lr,
                  (float)b1, (float)b2, (float)cfg->train.eps, x->decay ? (float)cfg->train.weight_decay : 0.0f, (float)scale,
                  (float)(1.0 - pow(b1, r->step + 1)), (float)(1.0 - pow(b2, r->step + 1)));
    }
    r->step++;
    r->tokens_seen += (long long)GB * r->T;
    r->step_s = mgt__now() - t0;
    r->elapsed_s += r->step_s;
    return MGT_OK;
}

static mgt_result mgt__after_step(mgt_run *r) {
    const mgt_config *cfg = &r->cfg;
    int evaluated = 0;
    mgt_result res;
    if (r->has_val && cfg->train.eval_every > 0 && (r->step % cfg->train.eval_every == 0 || r->step == cfg->train.steps)) {
        double vl;
        res = mgt_run_eval(r, &vl);
        if (res != MGT_OK) return res;
        evaluated = 1;
    }
    if (r->step % cfg->log.every == 0 || r->step == cfg->train.steps || evaluated) {
        res = mgt__metrics_line(r, evaluated);
        if (res != MGT_OK) return res;
    }
    if (cfg->checkpoint.every > 0 && r->step % cfg->checkpoint.every == 0) return mgt_run_save(r, NULL, 0);
    return MGT_OK;
}

MGTDEF mgt_result mgt_run_step(mgt_run *r) {
    mgt_result res;
    if (!r) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_step: run is NULL");
    if (r->inference) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_step: this run was opened for sampling only");
    if (!r->has_train) return mgt__fail(MGT_ERROR_CONFIG, "[data] train is empty: set it to a token shard");
    res = mgt__train_step(r, mgt__loader_get(&r->train, r->step));
    return res == MGT_OK ? mgt__after_step(r) : res;
}

MGTDEF mgt_result mgt_run_step_tokens(mgt_run *r, const uint16_t *rows) {
    int i, n;
    mgt_result res;
    if (!r || !rows) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_step_tokens: run and rows are required");
    if (r->inference) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_step_tokens: this run was opened for sampling only");
    n = r->cfg.train.global_batch * (r->T + 1);
    for (i = 0; i < n; i++)
        if (rows[i] >= r->V) return mgt__fail(MGT_ERROR_DATA, "mgt_run_step_tokens: token %d at %d is beyond vocab_size %d", rows[i], i, r->V);
    res = mgt__train_step(r, rows);
    return res == MGT_OK ? mgt__after_step(r) : res;
}

MGTDEF mgt_result mgt_run_loss(mgt_run *r, const uint16_t *rows, int B, double *loss) {
    int i;
    double sum = 0;
    if (!r || !rows || !loss || B < 1) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_loss: run, rows, B >= 1 and loss are required");
    for (i = 0; i < B; i += r->B) {
        int b = B - i < r->B ? B - i : r->B;
        mgt__set_batch(r, rows + (size_t)i * (size_t)(r->T + 1), b, r->T);
        sum += mgt__forward(r, b, r->T, 0.0f);
    }
    *loss = sum / ((double)B * (double)r->T);
    return MGT_OK;
}

MGTDEF mgt_result mgt_run_eval(mgt_run *r, double *val_loss) {
    int j, b, rows = r ? r->B : 0;
    double sum = 0;
    uint16_t *buf;
    if (!r || !val_loss) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_eval: run and val_loss are required");
    if (!r->has_val) return mgt__fail(MGT_ERROR_CONFIG, "[data] val is empty: set it to a validation shard");
    buf = r->val.buf[0];
    for (j = 0; j < r->cfg.train.eval_batches; j++) {
        for (b = 0; b < rows; b++) {
            size_t off = mgt__sequence_offset(&r->val.shard, r->val.seed, MGT__STREAM_VAL, 0, (uint64_t)(j * rows + b), r->T);
            memcpy(buf + (size_t)b * (size_t)(r->T + 1), r->val.shard.tokens + off, sizeof(uint16_t) * (size_t)(r->T + 1));
        }
        mgt__set_batch(r, buf, rows, r->T);
        sum += mgt__forward(r, rows, r->T, 0.0f);
    }
    r->val_loss = sum / ((double)r->cfg.train.eval_batches * rows * r->T);
    r->has_val_loss = 1;
    r->val_step = r->step;
    *val_loss = r->val_loss;
    mgt__log(MGT_LOG_INFO, "step %d: val loss %.4f", r->step, r->val_loss);
    return MGT_OK;
}

static double mgt__flops_per_token(const mgt_run *r) {
    return 6.0 * (double)r->nparams + 12.0 * r->L * (double)r->T * r->C;
}

MGTDEF void mgt_run_stats(const mgt_run *r, mgt_stats *st) {
    if (!st) return;
    memset(st, 0, sizeof *st);
    if (!r) return;
    st->step = r->step;
    st->steps = r->cfg.train.steps;
    st->loss = r->loss;
    st->val_loss = r->val_loss;
    st->has_val_loss = r->has_val_loss;
    st->val_step = r->val_step;
    st->lr = r->lr;
    st->grad_norm = r->grad_norm;
    st->step_ms = r->step_s * 1e3;
    st->tokens_per_s = r->step_s > 0 ? (double)r->cfg.train.global_batch * r->T / r->step_s : 0;
    st->samples_per_s = r->step_s > 0 ? (double)r->cfg.train.global_batch / r->step_s : 0;
    st->flops_per_token = mgt__flops_per_token(r);
    st->gflops = st->tokens_per_s * st->flops_per_token * 1e-9;
    st->has_mfu = 0; /* the CPU has no stated peak */
    st->tokens_seen = r->tokens_seen;
    st->params = r->nparams;
    memcpy(st->mem_current, r->be->mem_current, sizeof st->mem_current);
    memcpy(st->mem_peak, r->be->mem_peak, sizeof st->mem_peak);
    st->threads = ((mgt__cpu *)r->be->impl)->pool.n;
    st->elapsed_s = r->elapsed_s;
}

static mgt_result mgt__metrics_line(mgt_run *r, int with_val) {
    mgt_stats st;
    if (!r->metrics) return MGT_OK;
    mgt_run_stats(r, &st);
    fprintf(r->metrics, "{\"step\":%d,\"loss\":%.6f,\"lr\":%.6e,\"grad_norm\":%.6f,\"tokens_per_s\":%.1f,\"step_ms\":%.3f,\"tokens\":%lld",
            st.step, st.loss, st.lr, st.grad_norm, st.tokens_per_s, st.step_ms, st.tokens_seen);
    if (with_val) fprintf(r->metrics, ",\"val_loss\":%.6f", st.val_loss);
    fprintf(r->metrics, "}\n");
    if (fflush(r->metrics)) return mgt__fail(MGT_ERROR_IO, "%s: cannot write metrics: %s", r->metrics_path, strerror(errno));
    return MGT_OK;
}

MGTDEF const mgt_config *mgt_run_config(const mgt_run *r) { return r ? &r->cfg : NULL; }
MGTDEF const char *mgt_run_dir(const mgt_run *r) { return r ? r->dir : NULL; }
MGTDEF int mgt_run_tensor_count(const mgt_run *r) { return r ? r->ntensors : 0; }
MGTDEF const mgt_tensor_info *mgt_run_tensor(const mgt_run *r, int t) { return r && t >= 0 && t < r->ntensors ? &r->tensors[t].info : NULL; }
MGTDEF float *mgt_run_param(mgt_run *r, int t) { return r && t >= 0 && t < r->ntensors ? mgt__p(r, t) : NULL; }
MGTDEF float *mgt_run_grad(mgt_run *r, int t) { return r && r->grads && t >= 0 && t < r->ntensors ? mgt__g(r, t) : NULL; }

static mgt_result mgt__mkdirs(const char *path) {
    char tmp[1024];
    size_t i, n = strlen(path);
    if (n >= sizeof tmp) return mgt__fail(MGT_ERROR_IO, "%s: path too long", path);
    memcpy(tmp, path, n + 1);
    for (i = 1; i <= n; i++) {
        if (tmp[i] == '/' || tmp[i] == 0) {
            char c = tmp[i];
            tmp[i] = 0;
            if (mkdir(tmp, 0777) && errno != EEXIST) return mgt__fail(MGT_ERROR_IO, "%s: cannot create folder: %s", tmp, strerror(errno));
            tmp[i] = c;
        }
    }
    return MGT_OK;
}

/* step number of "step_00000100.safetensors", or -1 */
static int mgt__checkpoint_step(const char *name) {
    int step, len = 0;
    if (sscanf(name, "step_%d.safetensors%n", &step, &len) == 1 && len == (int)strlen(name) && step >= 0) return step;
    return -1;
}

MGTDEF mgt_result mgt_checkpoint_latest(const char *dir, char *path, size_t cap) {
    DIR *d;
    struct dirent *e;
    int best = -1;
    if (!dir || !path) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_checkpoint_latest: dir and path are required");
    d = opendir(dir);
    if (!d) return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: no checkpoint folder: %s", dir, strerror(errno));
    while ((e = readdir(d))) {
        int s = mgt__checkpoint_step(e->d_name);
        if (s > best) best = s;
    }
    closedir(d);
    if (best < 0) return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: no checkpoints (step_*.safetensors) in this folder", dir);
    snprintf(path, cap, "%s/step_%08d.safetensors", dir, best);
    return MGT_OK;
}

static void mgt__prune_checkpoints(const mgt_run *r) {
    int steps[4096], n = 0, i, j;
    DIR *d = opendir(r->dir);
    struct dirent *e;
    if (!d) return;
    while ((e = readdir(d)) && n < 4096) {
        int s = mgt__checkpoint_step(e->d_name);
        if (s >= 0) steps[n++] = s;
    }
    closedir(d);
    for (i = 1; i < n; i++) /* newest first */
        for (j = i; j > 0 && steps[j] > steps[j - 1]; j--) { int t = steps[j]; steps[j] = steps[j - 1]; steps[j - 1] = t; }
    for (i = r->cfg.checkpoint.keep; i < n; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/step_%08d.safetensors", r->dir, steps[i]);
        remove(path);
    }
}

MGTDEF mgt_result mgt_run_save(mgt_run *r, char *path_out, size_t cap) {
    char path[1200], step_text[32], seed_text[32], tokens_text[32], loss_text[64];
    char *preset = NULL;
    mgt__st_out *out;
    int i, n = 0, bytes_preset = 1 << 16;
    mgt_result res;
    const char *meta[12];
    if (!r) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_save: run is NULL");
    snprintf(path, sizeof path, "%s/step_%08d.safetensors", r->dir, r->step);
    if (path_out) mgt__strlcpy(path_out, path, cap);
    if (r->saved_step == r->step) return MGT_OK;
    if (r->inference) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_save: this run was opened for sampling only");
    res = mgt__mkdirs(r->dir);
    if (res != MGT_OK) return res;
    out = (mgt__st_out *)MGT_MALLOC(sizeof *out * (size_t)r->ntensors * 3);
    preset = (char *)MGT_MALLOC((size_t)bytes_preset);
    if (!out || !preset) { MGT_FREE(out); MGT_FREE(preset); return mgt__fail(MGT_ERROR_MEMORY, "out of memory saving a checkpoint"); }
    mgt_config_format(&r->cfg, preset, (size_t)bytes_preset);
    for (i = 0; i < 3 * r->ntensors; i++) {
        const mgt__tensor *x = &r->tensors[i % r->ntensors];
        static const char *prefix[3] = {"", "optim.m.", "optim.v."};
        const float *base = i < r->ntensors ? r->params : i < 2 * r->ntensors ? r->m : r->v;
        char *name = (char *)MGT_MALLOC(96);
        if (!name) break;
        snprintf(name, 96, "%s%s", prefix[i / r->ntensors], x->info.name);
        out[n].name = name;
        out[n].data = base + x->offset;
        out[n].dtype = "F32";
        out[n].ndim = x->info.ndim;
        out[n].shape[0] = x->info.shape[0];
        out[n].shape[1] = x->info.shape[1];
        out[n].bytes = sizeof(float) * x->info.numel; /* the unpadded rows: checkpoints do not depend on padding */
        n++;
    }
    snprintf(step_text, sizeof step_text, "%d", r->step);
    snprintf(seed_text, sizeof seed_text, "%d", r->cfg.train.seed);
    snprintf(tokens_text, sizeof tokens_text, "%lld", r->tokens_seen);
    snprintf(loss_text, sizeof loss_text, "%.17g", r->loss);
    meta[0] = "format"; meta[1] = "mgt-checkpoint-1";
    meta[2] = "step"; meta[3] = step_text;
    meta[4] = "seed"; meta[5] = seed_text;
    meta[6] = "tokens_seen"; meta[7] = tokens_text;
    meta[8] = "train_loss"; meta[9] = loss_text;
    meta[10] = "preset"; meta[11] = preset;
    res = n == 3 * r->ntensors ? mgt__st_write(path, out, n, meta, 6) : mgt__fail(MGT_ERROR_MEMORY, "out of memory saving a checkpoint");
    for (i = 0; i < n; i++) MGT_FREE((void *)out[i].name);
    MGT_FREE(out);
    MGT_FREE(preset);
    if (res != MGT_OK) return res;
    r->saved_step = r->step;
    mgt__prune_checkpoints(r);
    mgt__log(MGT_LOG_INFO, "step %d: checkpoint %s", r->step, path);
    return MGT_OK;
}

static mgt_result mgt__resolve_checkpoint(const char *what, const char *dir, char *path, size_t cap) {
    struct stat st;
    if (!strcmp(what, "latest")) return mgt_checkpoint_latest(dir, path, cap);
    if (stat(what, &st)) return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: no such checkpoint file or folder", what);
    if (S_ISDIR(st.st_mode)) return mgt_checkpoint_latest(what, path, cap);
    mgt__strlcpy(path, what, cap);
    return MGT_OK;
}

/* copies the tensors named like the model's (with prefix) from f into base */
static mgt_result mgt__load_tensors(mgt_run *r, const mgt__st_file *f, const char *path, const char *prefix, float *base) {
    int t;
    for (t = 0; t < r->ntensors; t++) {
        const mgt__tensor *x = &r->tensors[t];
        char name[128];
        const mgt__st_tensor *s;
        snprintf(name, sizeof name, "%s%s", prefix, x->info.name);
        s = mgt__st_find(f, name);
        if (!s) return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: has no tensor '%s'; it was written for another model", path, name);
        if (strcmp(s->dtype, "F32") || s->ndim != x->info.ndim || s->shape[0] != x->info.shape[0] ||
            (x->info.ndim == 2 && s->shape[1] != x->info.shape[1]) || s->end - s->begin != sizeof(float) * x->info.numel)
            return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: tensor '%s' is %s [%lld,%lld] but the preset's model needs F32 [%d,%d]; use the preset the run was trained with",
                             path, name, s->dtype, s->shape[0], s->ndim > 1 ? s->shape[1] : 0, x->info.shape[0], x->info.shape[1]);
        memcpy(base + x->offset, mgt__st_data(f, s), sizeof(float) * x->info.numel);
    }
    return MGT_OK;
}

MGTDEF mgt_result mgt_run_resume(mgt_run *r, const char *what) {
    char path[1200];
    mgt__st_file f;
    const char *step_text, *seed_text, *tokens_text;
    mgt_result res;
    if (!r || !what) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_resume: run and checkpoint are required");
    res = mgt__resolve_checkpoint(what, r->dir, path, sizeof path);
    if (res != MGT_OK) return res;
    res = mgt__st_open(&f, path);
    if (res != MGT_OK) return res;
    step_text = mgt__st_meta(&f, "step");
    seed_text = mgt__st_meta(&f, "seed");
    tokens_text = mgt__st_meta(&f, "tokens_seen");
    if (!step_text || !seed_text) { mgt__st_close(&f); return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: not an mgt checkpoint (no step in its metadata)", path); }
    res = mgt__load_tensors(r, &f, path, "", r->params);
    if (res == MGT_OK && !r->inference) res = mgt__load_tensors(r, &f, path, "optim.m.", r->m);
    if (res == MGT_OK && !r->inference) res = mgt__load_tensors(r, &f, path, "optim.v.", r->v);
    if (res == MGT_OK) {
        r->step = atoi(step_text);
        r->saved_step = r->step;
        r->tokens_seen = tokens_text ? atoll(tokens_text) : 0;
        if (atoi(seed_text) != r->cfg.train.seed)
            mgt__log(MGT_LOG_WARN, "%s was trained with seed %s, this preset has %d: the data order changes", path, seed_text, r->cfg.train.seed);
        mgt__log(MGT_LOG_INFO, "resumed from %s at step %d", path, r->step);
    }
    mgt__st_close(&f);
    return res;
}

MGTDEF mgt_result mgt_checkpoint_config(const char *checkpoint, mgt_config *cfg) {
    mgt__st_file f;
    const char *preset;
    mgt_result res;
    char path[1200];
    if (!checkpoint || !cfg) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_checkpoint_config: checkpoint and cfg are required");
    res = mgt__resolve_checkpoint(checkpoint, ".", path, sizeof path);
    if (res != MGT_OK) return res;
    res = mgt__st_open(&f, path);
    if (res != MGT_OK) return res;
    preset = mgt__st_meta(&f, "preset");
    mgt_config_init(cfg);
    res = preset ? mgt_config_load_string(cfg, preset, path) : mgt__fail(MGT_ERROR_CHECKPOINT, "%s: has no preset in its metadata", path);
    mgt__st_close(&f);
    return res;
}

MGTDEF void mgt_run_destroy(mgt_run *r) {
    mgt_backend *be;
    if (!r) return;
    be = r->be;
    if (r->has_train) mgt__loader_close(&r->train);
    if (r->has_val) mgt__loader_close(&r->val);
    if (r->metrics) fclose(r->metrics);
    if (be) {
        be->free(be, r->params, sizeof(float) * r->storage, MGT_MEM_PARAMS);
        be->free(be, r->grads, sizeof(float) * r->storage, MGT_MEM_GRADS);
        be->free(be, r->m, sizeof(float) * r->storage, MGT_MEM_OPTIMIZER);
        be->free(be, r->v, sizeof(float) * r->storage, MGT_MEM_OPTIMIZER);
        be->free(be, r->acts.block, r->acts.bytes, MGT_MEM_ACTIVATIONS);
        mgt__cpu_backend_destroy(be);
    }
    MGT_FREE(r->acts.resid);
    MGT_FREE(r->acts.layer);
    MGT_FREE(r->tensors);
    MGT_FREE(r);
}

static mgt_result mgt__run_alloc(mgt_run **out, const mgt_config *cfg, int inference) {
    mgt_run *r;
    mgt_result res;
    int threads, t, recompute;
    size_t scratch;
    *out = NULL;
    r = (mgt_run *)MGT_MALLOC(sizeof *r);
    if (!r) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    memset(r, 0, sizeof *r);
    r->cfg = *cfg;
    r->inference = inference;
    r->saved_step = -1;
    r->L = cfg->model.n_layer;
    r->NH = cfg->model.n_head;
    r->C = cfg->model.d_model;
    r->T = cfg->model.seq_len;
    r->V = cfg->model.vocab_size;
    r->Vp = (r->V + 127) / 128 * 128; /* GEMM-friendly rows; the padding never gets a logit */
    r->B = inference ? 1 : cfg->train.micro_batch;
    r->micro_steps = cfg->train.global_batch / (cfg->train.micro_batch * cfg->parallel.dp);
    recompute = !inference && cfg->train.recompute == MGT_RECOMPUTE_FULL;
    threads = cfg->parallel.threads > 0 ? cfg->parallel.threads : mgt__cpu_count();
    scratch = (size_t)r->T * (size_t)r->T;
    res = mgt__cpu_backend_create(&r->be, threads, scratch);
    if (res != MGT_OK) { MGT_FREE(r); return res; }
    r->tensors = (mgt__tensor *)MGT_MALLOC(sizeof(mgt__tensor) * (size_t)(4 + MGT__BLOCK_TENSORS * r->L));
    r->acts.resid = (float **)MGT_MALLOC(sizeof(float *) * (size_t)(r->L + 1));
    r->acts.layer = (mgt__layer_acts *)MGT_MALLOC(sizeof(mgt__layer_acts) * (size_t)r->L);
    if (!r->tensors || !r->acts.resid || !r->acts.layer) { mgt_run_destroy(r); return mgt__fail(MGT_ERROR_MEMORY, "out of memory"); }
    r->ntensors = mgt__model_tensors(cfg, r->Vp, r->tensors, &r->storage);
    for (t = 0; t < r->ntensors; t++) r->nparams += r->tensors[t].info.numel;
    r->params = (float *)r->be->alloc(r->be, sizeof(float) * r->storage, MGT_MEM_PARAMS);
    if (!inference) {
        r->grads = (float *)r->be->alloc(r->be, sizeof(float) * r->storage, MGT_MEM_GRADS);
        r->m = (float *)r->be->alloc(r->be, sizeof(float) * r->storage, MGT_MEM_OPTIMIZER);
        r->v = (float *)r->be->alloc(r->be, sizeof(float) * r->storage, MGT_MEM_OPTIMIZER);
    }
    r->acts.bytes = mgt__acts_layout(&r->acts, NULL, r->L, r->B, r->T, r->C, r->NH, r->Vp, recompute, !inference);
    r->acts.block = r->be->alloc(r->be, r->acts.bytes, MGT_MEM_ACTIVATIONS);
    if (!r->params || (!inference && (!r->grads || !r->m || !r->v)) || !r->acts.block) {
        size_t need = sizeof(float) * r->storage * (inference ? 1 : 4) + r->acts.bytes;
        mgt_run_destroy(r);
        return mgt__fail(MGT_ERROR_MEMORY, "out of memory: the model needs %.1f MiB; lower [train] micro_batch or use recompute = full", (double)need / 1048576.0);
    }
    mgt__acts_layout(&r->acts, (char *)r->acts.block, r->L, r->B, r->T, r->C, r->NH, r->Vp, recompute, !inference);
    *out = r;
    return MGT_OK;
}

MGTDEF mgt_result mgt_run_create(mgt_run **out, const mgt_config *cfg) {
    mgt_run *r;
    mgt_result res;
    if (!out || !cfg) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_create: out and cfg are required");
    *out = NULL;
    res = mgt_config_validate(cfg);
    if (res != MGT_OK) return res;
    res = mgt__run_alloc(&r, cfg, 0);
    if (res != MGT_OK) return res;
    if (cfg->data.train[0]) {
        res = mgt__loader_open(&r->train, cfg->data.train, "[data] train", r->V, r->T, cfg->train.global_batch, (uint64_t)cfg->train.seed, 1);
        if (res != MGT_OK) { mgt_run_destroy(r); return res; }
        r->has_train = 1;
    }
    if (cfg->data.val[0]) {
        res = mgt__loader_open(&r->val, cfg->data.val, "[data] val", r->V, r->T, cfg->train.micro_batch, (uint64_t)cfg->train.seed, 0);
        if (res != MGT_OK) { mgt_run_destroy(r); return res; }
        r->has_val = 1;
    }
    if (cfg->checkpoint.dir[0]) mgt__strlcpy(r->dir, cfg->checkpoint.dir, sizeof r->dir);
    else {
        const char *base = strrchr(cfg->path, '/');
        char stem[MGT_STR_MAX];
        char *dot;
        mgt__strlcpy(stem, base ? base + 1 : (cfg->path[0] ? cfg->path : "run"), sizeof stem);
        dot = strrchr(stem, '.');
        if (dot && dot != stem) *dot = 0;
        snprintf(r->dir, sizeof r->dir, "runs/%s", stem);
    }
    if (cfg->log.metrics[0]) mgt__strlcpy(r->metrics_path, cfg->log.metrics, sizeof r->metrics_path);
    else snprintf(r->metrics_path, sizeof r->metrics_path, "%s/metrics.jsonl", r->dir);
    if (strcmp(cfg->log.metrics, "none")) {
        char folder[sizeof r->metrics_path];
        char *slash;
        mgt__strlcpy(folder, r->metrics_path, sizeof folder);
        slash = strrchr(folder, '/');
        if (slash) { *slash = 0; res = mgt__mkdirs(folder); if (res != MGT_OK) { mgt_run_destroy(r); return res; } }
        r->metrics = fopen(r->metrics_path, "a");
        if (!r->metrics) { mgt_run_destroy(r); return mgt__fail(MGT_ERROR_IO, "%s: cannot open for writing: %s", r->metrics_path, strerror(errno)); }
    }
    mgt__init_params(r);
    *out = r;
    return MGT_OK;
}

MGTDEF mgt_result mgt_run_open(mgt_run **out, const char *checkpoint, int threads) {
    mgt_config cfg;
    mgt_run *r;
    mgt_result res;
    if (!out || !checkpoint) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_open: out and checkpoint are required");
    *out = NULL;
    res = mgt_checkpoint_config(checkpoint, &cfg);
    if (res != MGT_OK) return res;
    if (threads > 0) cfg.parallel.threads = threads;
    res = mgt__run_alloc(&r, &cfg, 1);
    if (res != MGT_OK) return res;
    res = mgt_run_resume(r, checkpoint);
    if (res != MGT_OK) { mgt_run_destroy(r); return res; }
    *out = r;
    return MGT_OK;
}

MGTDEF int mgt_run_generate(mgt_run *r, const int *prompt, int n_prompt, int *out, int max_new, double temperature, int top_k, uint64_t seed) {
    int *ctx, n = n_prompt, i, j;
    float *probs;
    if (!r || !prompt || n_prompt < 1 || !out || max_new < 0) {
        mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_generate: needs a prompt of at least one token, out and max_new >= 0");
        return -1;
    }
    ctx = (int *)MGT_MALLOC(sizeof(int) * (size_t)(n_prompt + max_new + 1));
    probs = (float *)MGT_MALLOC(sizeof(float) * (size_t)r->V);
    if (!ctx || !probs) { MGT_FREE(ctx); MGT_FREE(probs); mgt__fail(MGT_ERROR_MEMORY, "out of memory"); return -1; }
    memcpy(ctx, prompt, sizeof(int) * (size_t)n_prompt);
    for (i = 0; i < max_new; i++) {
        int start = n > r->T ? n - r->T : 0, len = n - start, pick = 0;
        const float *logits;
        double total = 0, u, acc = 0, mx = -1e30, kth = -1e30;
        memcpy(r->acts.inputs, ctx + start, sizeof(int) * (size_t)len);
        mgt__forward(r, 1, len, -1.0f);
        logits = r->acts.logits + (size_t)(len - 1) * (size_t)r->Vp;
        for (j = 0; j < r->V; j++) mx = logits[j] > mx ? logits[j] : mx;
        if (top_k > 0 && top_k < r->V) { /* the k-th largest logit: partial selection over a copy */
            int k;
            for (j = 0; j < r->V; j++) probs[j] = logits[j];
            for (k = 0; k < top_k; k++) {
                int best = k;
                for (j = k + 1; j < r->V; j++) if (probs[j] > probs[best]) best = j;
                { float t = probs[k]; probs[k] = probs[best]; probs[best] = t; }
            }
            kth = probs[top_k - 1];
        }
        for (j = 0; j < r->V; j++) {
            double p = logits[j] < kth ? 0.0 : (temperature > 0 ? exp((logits[j] - mx) / temperature) : (logits[j] == mx ? 1.0 : 0.0));
            probs[j] = (float)p;
            total += p;
        }
        u = mgt__uniform(mgt__hash3(seed, 0x73616d70, (uint64_t)i)) * total;
        for (j = 0; j < r->V; j++) { acc += probs[j]; pick = j; if (acc >= u && probs[j] > 0) break; }
        ctx[n++] = pick;
        out[i] = pick;
    }
    MGT_FREE(ctx);
    MGT_FREE(probs);
    return max_new;
}

#ifdef __cplusplus
}
#endif
#endif /* MGT__IMPLEMENTED */
#endif /* MGT_IMPLEMENTATION */

/*
   MIT License. Copyright (c) 2026 the mgt authors.
   Permission is hereby granted, free of charge, to any person obtaining a copy of this software and
   associated documentation files (the "Software"), to deal in the Software without restriction,
   including without limitation the rights to use, copy, modify, merge, publish, distribute,
   sublicense, and/or sell copies of the Software, and to permit persons to whom the Software is
   furnished to do so, subject to the following conditions: The above copyright notice and this
   permission notice shall be included in all copies or substantial portions of the Software.
   THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED.
*/
