/* src/mgt_api.h - the public API: results, presets, runs, backends, communicators, the CUDA and MPI
   tables, the simulator, data, checkpoints, the plan */
/* mgt.h - v0.1.0 - train GPT-style transformers from an INI preset - MIT licence (see end of file)

   USAGE
     Define MGT_IMPLEMENTATION in exactly one C or C++ file before including this header:

        #define MGT_IMPLEMENTATION
        #include "mgt.h"

     Other files include it without the define. Link with inih (`pkg-config --libs inih`), a CBLAS
     (`pkg-config --libs openblas`, or any library that provides cblas_sgemm), -lpthread and -lm.
     With OpenBLAS, run the program with OPENBLAS_NUM_THREADS=1: mgt calls BLAS from its own threads,
     and OpenBLAS's pthreads build otherwise starts threads of its own before main (see src/blas.c
     in the implementation). A run checks that it fits the machine's memory before it allocates
     (mgt_plan_fit); MGT_MEMORY_CHECK=off in the environment makes that a warning.

   CONTENTS
     the parts this file is assembled from, listed at its top (src/assemble.py); in this public
     part, each section naming the parts that implement it: results and errors; presets (one
     X-macro table of every key, MGT_CONFIG_KEYS); the communicator and backend tables; the CUDA
     library; MPI; the step simulator; runs (create, step, evaluate, checkpoint, resume, sample,
     statistics); planning; checkpoints, weights and data files

   OPTIONS (define before including; "everywhere" = in every file that includes mgt.h)
     MGT_STATIC          everywhere: make every function static (private copy per translation unit)
     MGT_NO_STDIO        beside MGT_IMPLEMENTATION: no FILE* helpers (mgt_config_fprint)
     MGT_NO_TENSORBOARD  beside MGT_IMPLEMENTATION: no TensorBoard writer ([log] tensorboard is then
                         refused when a run starts); metrics.jsonl stays
     MGT_NO_HF           beside MGT_IMPLEMENTATION: no Hugging Face weights formats (a Hugging Face folder
                         as [model] init, and mgt_export, are then refused); init from mgt checkpoints
                         and llm.c's .bin stays
     MGT_NO_SIM          beside MGT_IMPLEMENTATION: no step simulator (the mgt_sim_* functions, mgt_plan_search and
                         mgt_layout_search_free are then not defined; parallel.layout = auto is refused)
     MGT_NO_MPI          beside MGT_IMPLEMENTATION: one process only, no MPI (a run started by an MPI
                         launcher of several processes is then refused, naming the switch)
     MGT_MALLOC, MGT_REALLOC, MGT_FREE beside MGT_IMPLEMENTATION: your allocator for all of the
                         library's memory (all three or none; tests/test_alloc.c counts them)

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
#include <stdint.h> /* defines: uint16_t, uint32_t, uint64_t */
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

/* ---- results and errors (src/base.c) -------------------------------------------------------- */

#define MGT_RESULTS(X)                                                    \
    X(MGT_OK, 0, "ok")                                                    \
    X(MGT_ERROR_ARGUMENT, -1, "invalid argument")                         \
    X(MGT_ERROR_CONFIG, -2, "invalid preset")                             \
    X(MGT_ERROR_UNSUPPORTED, -3, "not supported yet")                     \
    X(MGT_ERROR_IO, -4, "input/output error")                             \
    X(MGT_ERROR_DATA, -5, "invalid data")                                 \
    X(MGT_ERROR_CHECKPOINT, -6, "invalid checkpoint")                     \
    X(MGT_ERROR_MEMORY, -7, "out of memory")                              \
    X(MGT_ERROR_NUMERIC, -8, "loss or gradient is not finite")                  \
    X(MGT_ERROR_COMM, -9, "communication error")                         \
    X(MGT_ERROR_DEVICE, -10, "device error")

typedef enum mgt_result {
#define MGT__RESULT_ENUM(name, value, text) name = value,
    MGT_RESULTS(MGT__RESULT_ENUM)
#undef MGT__RESULT_ENUM
    MGT__RESULT_END = -11
} mgt_result;

enum { MGT_LOG_INFO = 0, MGT_LOG_WARN = 1 };
typedef void (*mgt_log_fn)(void *user, int level, const char *message);

MGTDEF const char *mgt_result_string(mgt_result result);
MGTDEF const char *mgt_last_error(void); /* message of the calling thread's last error */
/* sets the calling thread's last error to message and returns result (the mgt_fail_fn the CUDA and
   MPI tables take; for drivers that report their own failures through mgt_last_error) */
MGTDEF mgt_result mgt_set_error(mgt_result result, const char *message);
MGTDEF void mgt_set_logger(mgt_log_fn fn, void *user);
/* small utilities the library uses and its driver shares: monotonic seconds; the counter-based
   hash behind initialisation and synthetic data; the CPUs this process may run on (its affinity);
   mkdir -p */
MGTDEF double mgt_now(void);
MGTDEF uint64_t mgt_hash3(uint64_t a, uint64_t b, uint64_t c);
MGTDEF int mgt_cpu_count(void);
MGTDEF mgt_result mgt_mkdirs(const char *path);

/* ---- presets (src/config.c) ----------------------------------------------------------------- */

/* Every preset key: X(section, key, type, default, min, max, choices, help).
   Types: INT (int), FLOAT (double), STR (char[MGT_STR_MAX]: up to 255 bytes of UTF-8 text without
   control characters), ENUM (int index into choices).
   This one table makes the struct, the defaults, the INI handler, --set, `mgt check` and the
   README's key reference. */
#define MGT_STR_MAX 256
#define MGT_CONFIG_SECTIONS(S) S(model) S(data) S(train) S(parallel) S(precision) S(checkpoint) S(log)

#define MGT_KEYS_model(X)                                                                          \
    X(model, n_layer, INT, "4", 1, 1024, "", "transformer blocks")                                 \
    X(model, n_head, INT, "4", 1, 1024, "", "attention heads; d_model must divide by it")              \
    X(model, d_model, INT, "128", 8, 65536, "", "channels of the residual stream")                 \
    X(model, seq_len, INT, "128", 2, 65536, "", "context length in tokens")                        \
    X(model, vocab_size, INT, "256", 2, 16777216, "", "token ids; at least the tokenizer's vocabulary") \
    X(model, norm, ENUM, "layernorm", 0, 0, "layernorm|rmsnorm", "normalisation of each block and the head (GPT-2: layernorm, Llama: rmsnorm)") \
    X(model, norm_eps, FLOAT, "1e-5", 1e-12, 1, "", "epsilon of the normalisation; layernorm's is 1e-5") \
    X(model, positions, ENUM, "learned", 0, 0, "learned|rope", "position embedding table (GPT-2) or rotary positions on q and k (Llama)") \
    X(model, rope_theta, FLOAT, "10000", 1, 1e12, "", "rope: base of the rotation frequencies (Llama 3: 500000)") \
    X(model, mlp, ENUM, "gelu", 0, 0, "gelu|swiglu", "MLP: fc, GELU, proj (GPT-2) or down(silu(gate) * up) (Llama)") \
    X(model, d_ff, INT, "0", 0, 1048576, "", "hidden units of the MLP; 0 is 4 x d_model (GPT-2)") \
    X(model, n_kv_head, INT, "0", 0, 1024, "", "key/value heads (grouped-query attention; 1 is multi-query); 0 is n_head; parallel.tp divides it, or is a multiple of it (each head then on tp / n_kv_head ranks)") \
    X(model, bias, INT, "1", 0, 1, "", "1: the linear layers have biases (GPT-2); 0: none (Llama); LayerNorm keeps its own") \
    X(model, tied_head, INT, "1", 0, 1, "", "1: the LM head is wte (GPT-2); 0: a separate lm_head matrix (Llama)") \
    X(model, init, STR, "", 0, 0, "", "start from these weights (step 0, fresh optimizer): an mgt checkpoint or run folder, a Hugging Face folder (GPT-2, Llama) or llm.c's .bin; the model keys left out come from it")
#define MGT_KEYS_data(X)                                                                           \
    X(data, train, STR, "data/quickstart_train.bin", 0, 0, "", "training token shards (llm.c .bin): files or globs, comma-separated") \
    X(data, val, STR, "data/quickstart_val.bin", 0, 0, "", "validation shards, as train; empty for none") \
    X(data, tokenizer, ENUM, "byte", 0, 0, "byte|gpt2|hf", "how the shards were tokenized")        \
    X(data, bpe_dir, STR, "data/gpt2-bpe", 0, 0, "", "folder of encoder.json and vocab.bpe (gpt2)") \
    X(data, tokenizer_json, STR, "", 0, 0, "", "Hugging Face tokenizer.json of byte-level BPE (hf)")
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
    X(train, eval_batches, INT, "4", 1, 1000000, "", "global batches per validation")               \
    X(train, recompute, ENUM, "none", 0, 0, "none|full|selective", "recompute in backward: whole blocks, or norms and GELU only")
#define MGT_KEYS_parallel(X)                                                                       \
    X(parallel, device, ENUM, "auto", 0, 0, "auto|cpu|cuda", "where ranks run")                    \
    X(parallel, layout, ENUM, "manual", 0, 0, "manual|auto", "manual: the layout keys as set (dp, tp, pp, zero, pp_schedule, train.micro_batch, train.recompute); auto: the step simulator's fastest layout that fits this machine, chosen as the run starts; layout keys set beside auto or by --set constrain it") \
    X(parallel, dp, INT, "1", 1, 4096, "", "data-parallel ranks")                                  \
    X(parallel, tp, INT, "1", 1, 4096, "", "tensor-parallel ranks")                                \
    X(parallel, sp, INT, "0", 0, 1, "", "1: sequence parallelism (needs tp > 1): the norms and residual adds between the TP layers hold 1/tp of the rows") \
    X(parallel, cp, INT, "1", 1, 4096, "", "context-parallel ranks: each holds 1/cp of the sequence (two mirrored chunks) and attention passes keys and values around them in a ring; seq_len must divide by 2 cp") \
    X(parallel, pp, INT, "1", 1, 4096, "", "pipeline stages")                                      \
    X(parallel, zero, INT, "0", 0, 3, "", "ZeRO stage over the data-parallel group")               \
    X(parallel, pp_schedule, ENUM, "1f1b", 0, 0, "1f1b|gpipe|zb", "pipeline schedule; zb: zero-bubble ZB-H1, the backward split into input- and weight-gradient passes, the weights' filling the bubble") \
    X(parallel, pp_virtual, INT, "1", 1, 64, "", "model chunks per pipeline stage: interleaved 1F1B when more than 1") \
    X(parallel, bucket_mb, FLOAT, "25", 0.001, 65536, "", "gradient all-reduce bucket, MiB")       \
    X(parallel, threads, INT, "0", 0, 4096, "", "CPU threads in all; 0 uses every core")                \
    X(parallel, peak_gflops, FLOAT, "0", 0, 1e9, "", "a rank's peak GFLOP/s for MFU; 0 is unknown (n/a)") \
    X(parallel, timeout_s, FLOAT, "300", 1, 86400, "", "a wait for a peer (another GPU or MPI process) or the device that takes longer aborts the run, naming the rank and call")
#define MGT_KEYS_precision(X)                                                                      \
    X(precision, dtype, ENUM, "fp32", 0, 0, "fp32|bf16|fp16", "storage of parameters and activations; fp32 master weights") \
    X(precision, loss_scale, FLOAT, "65536", 1, 1e30, "", "fp16: initial dynamic loss scale, a power of two")        \
    X(precision, loss_scale_window, INT, "1000", 1, 2000000000, "", "fp16: finite steps before the loss scale doubles") \
    X(precision, max_skipped, INT, "5", 1, 1000000, "", "bf16/fp32: non-finite steps in a row skipped before the run fails")
#define MGT_KEYS_checkpoint(X)                                                                     \
    X(checkpoint, dir, STR, "", 0, 0, "", "checkpoint folder; empty is runs/<preset name>")        \
    X(checkpoint, every, INT, "0", 0, 2000000000, "", "steps between checkpoints; 0 only at the end") \
    X(checkpoint, keep, INT, "3", 1, 1000000, "", "newest checkpoints kept")
#define MGT_KEYS_log(X)                                                                            \
    X(log, every, INT, "10", 1, 2000000000, "", "steps between log lines and metrics")             \
    X(log, metrics, STR, "", 0, 0, "", "metrics.jsonl path; auto: <checkpoint dir>/metrics.jsonl; none: no file; empty: auto under mgt train, none in a program that embeds mgt") \
    X(log, tensorboard, STR, "", 0, 0, "", "folder for TensorBoard event files; empty is none")

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
enum { MGT_TOKENIZER_BYTE, MGT_TOKENIZER_GPT2, MGT_TOKENIZER_HF };
enum { MGT_RECOMPUTE_NONE, MGT_RECOMPUTE_FULL, MGT_RECOMPUTE_SELECTIVE };
#define MGT_RECOMPUTE_NAMES {"none", "full", "selective"}
MGTDEF const char *mgt_recompute_name(int mode); /* MGT_RECOMPUTE_NAMES[mode], or "?" */
enum { MGT_DTYPE_FP32, MGT_DTYPE_BF16, MGT_DTYPE_FP16 };
enum { MGT_NORM_LAYERNORM, MGT_NORM_RMSNORM };
enum { MGT_POSITIONS_LEARNED, MGT_POSITIONS_ROPE };
enum { MGT_MLP_GELU, MGT_MLP_SWIGLU };
enum { MGT_LAYOUT_MANUAL, MGT_LAYOUT_AUTO };

typedef struct mgt_config {
    MGT_CONFIG_SECTIONS(MGT__DECL_SECTION)
    char path[MGT_STR_MAX];        /* preset file, for messages ("" when built in code) */
    int line[MGT_CONFIG_NKEYS];    /* where each key was set: >0 file line, 0 default, -1 --set,
                                      -3 - i a program's option[i] (mgt_config_set_from) */
    char option[4][48];            /* the options that set keys, as the user typed them ("--gpus 3") */
} mgt_config;

typedef struct mgt_key_info {
    const char *section, *name, *type, *def, *choices, *help;
    double min, max;
} mgt_key_info;

MGTDEF void mgt_config_init(mgt_config *cfg);                     /* every key at its default */
MGTDEF mgt_result mgt_config_load(mgt_config *cfg, const char *path); /* INI file over cfg */
MGTDEF mgt_result mgt_config_load_string(mgt_config *cfg, const char *ini_text, const char *name);
MGTDEF mgt_result mgt_config_set(mgt_config *cfg, const char *assignment); /* "section.key=value" */
/* where key section.name got its value, for messages: "preset.ini:17", "--set data.train", "--gpus 3",
   "[model] init's model", or "" for a default (and an unknown key) */
MGTDEF const char *mgt_config_where(const mgt_config *cfg, const char *section, const char *name, char *buf, size_t cap);
/* the same, set by a program's own option (`option`, "--gpus 3"), which messages then name */
MGTDEF mgt_result mgt_config_set_from(mgt_config *cfg, const char *assignment, const char *option);
MGTDEF mgt_result mgt_config_validate(const mgt_config *cfg);     /* each key in its range, consistency between keys */
MGTDEF int mgt_config_ranks(const mgt_config *cfg);               /* the ranks its layout needs: dp x cp x tp x pp */
MGTDEF int mgt_config_format(const mgt_config *cfg, char *buf, size_t cap); /* resolved INI text, to read (checkpoints store JSON) */
MGTDEF const mgt_key_info *mgt_config_keys(int *count);
MGTDEF int mgt_config_value_string(const mgt_config *cfg, int key, char *buf, size_t cap);

/* ---- communication: the mgt_comm table (src/comm_local.c, src/comm_mpi.c, kernels/comm_nccl.c) ---
   One mgt_comm per rank. Collectives work over a group; every member calls
   the same collectives on that group in the same order (op, count, dtype and root equal), or all
   of them get MGT_ERROR_COMM with a message naming both calls. Reductions sum the members'
   contributions in group order (member 0 + member 1 + ...), element by element, so results are the
   same on every member and do not depend on timing; bf16 and f16 are summed in fp32 and rounded
   once, to nearest even (the local communicator; NCCL's ring rounds each partial sum, so from 3
   members its 16-bit sums may differ in the last bit). After any communication error the whole
   world has failed: every pending and later call returns MGT_ERROR_COMM at once. */


/* element types of communication buffers; bf16 and f16 are reduced in fp32, f64 in fp64 */
enum { MGT_F32, MGT_BF16, MGT_F16, MGT_F64 };
enum {
    MGT_COLL_ALL_REDUCE,
    MGT_COLL_REDUCE_SCATTER,
    MGT_COLL_ALL_GATHER,
    MGT_COLL_BROADCAST,
    MGT_COLL_SEND_RECV,
    MGT_COLL_BARRIER,
    MGT_COLL_COUNT
};
/* "all-reduce", "reduce-scatter", "all-gather", "broadcast", "send/recv", "barrier" */
MGTDEF const char *mgt_coll_name(int coll);

/* The kinds of group a rank belongs to, one of each: the ranks whose grid coordinates differ from
   its own along one axis (TP, DP, PP), the first and last pipeline stages of its (dp, tp) position
   (the tied embedding's pair), the whole world, and the TP ranks that hold the same key/value heads
   (replicated when tp exceeds the key/value heads). */
enum { MGT_GROUP_TP, MGT_GROUP_DP, MGT_GROUP_PP, MGT_GROUP_EMBEDDING, MGT_GROUP_WORLD, MGT_GROUP_KV, MGT_GROUP_CP, MGT_GROUP_KINDS };
/* their names, by kind: a list for the libraries mgt opens (kernels/), which cannot call mgt.h */
#define MGT_GROUP_KIND_NAMES {"TP", "DP", "PP", "embedding", "world", "KV", "CP"}
MGTDEF const char *mgt_group_kind_name(int kind); /* MGT_GROUP_KIND_NAMES[kind], or "other" */

typedef struct mgt_group {
    int id;           /* the same on every member, different for every group of the world */
    int size;         /* members */
    int index;        /* this rank's position among them */
    const int *ranks; /* global ranks of the members, in group order */
    int kind;         /* MGT_GROUP_*: which of a rank's groups this is */
} mgt_group;

typedef struct mgt_comm_stats { /* per rank, cumulative, written only by the rank's own thread */
    long long calls[MGT_COLL_COUNT];
    /* bytes this rank contributed/received: all-reduce count*elt; reduce-scatter the send buffer;
       all-gather the receive buffer; broadcast count*elt; send and recv count*elt each */
    double bytes[MGT_COLL_COUNT];
    double seconds[MGT_COLL_COUNT]; /* wall time inside the calls, waiting included */
} mgt_comm_stats;

typedef struct mgt_comm mgt_comm; /* one per rank */
struct mgt_comm {
    int rank, world;
    /* sum, in place */
    mgt_result (*all_reduce)(mgt_comm *c, const mgt_group *g, void *buf, size_t count, int dtype);
    /* send holds size*recv_count; member i receives the sum of block i;
       recv may alias send + index*recv_count (no other overlap) */
    mgt_result (*reduce_scatter)(mgt_comm *c, const mgt_group *g, const void *send, void *recv,
                                 size_t recv_count, int dtype);
    /* recv gets size*send_count, block i from member i; send may alias recv + index*send_count */
    mgt_result (*all_gather)(mgt_comm *c, const mgt_group *g, const void *send, void *recv,
                             size_t send_count, int dtype);
    mgt_result (*broadcast)(mgt_comm *c, const mgt_group *g, void *buf, size_t count, int dtype,
                            int root_index);
    /* peer: global rank; buffered: returns once the data is copied */
    mgt_result (*send)(mgt_comm *c, int peer, const void *buf, size_t count, int dtype);
    /* blocks until the matching send; messages between a pair arrive in order */
    mgt_result (*recv)(mgt_comm *c, int peer, void *buf, size_t count, int dtype);
    /* a send and a receive that proceed together (one NCCL group): where two pipeline stages each
       send to the other before receiving, as 1F1B's steady state does, an unbuffered send (NCCL's)
       would otherwise wait for a receive the peer posts only after its own send; counted as one
       send and one receive */
    mgt_result (*sendrecv)(mgt_comm *c, int send_peer, const void *send, int recv_peer, void *recv, size_t count, int dtype);
    mgt_result (*barrier)(mgt_comm *c, const mgt_group *g);
    /* optional (NULL where every call completes before it returns, as the local communicator's
       do). A communicator that runs on its own stream (NCCL) orders the compute after each call;
       defer() exempts the next call, whose result the compute that follows does not read (a DP
       bucket reduced while backward goes on, a ZeRO-3 prefetch), and returns its ticket; after
       sync(ticket) the compute sees that call and those before it (ticket -1: every call) */
    long (*defer)(mgt_comm *c);
    mgt_result (*sync)(mgt_comm *c, long ticket);
    mgt_comm_stats stats;
    void *impl;
};

/* ---- memory categories: what every backend counts its allocations by ------------------------ */

enum { /* memory categories of the backend's allocator */
    MGT_MEM_PARAMS, MGT_MEM_GRADS, MGT_MEM_OPTIMIZER, MGT_MEM_ACTIVATIONS, MGT_MEM_BUFFERS,
    MGT_MEM_WORKSPACE, MGT_MEM_COUNT
};
MGTDEF const char *mgt_mem_category_name(int category);

/* ---- backends: the mgt_backend table (src/backend_cpu.c, kernels/backend_cuda.cu) ---------------
   Every op of the model on one device. The runtime above it (schedules, parallelism, optimizer,
   checkpoints) is the same for the CPU backend (src/backend_cpu.c) and the CUDA one (kernels/, loaded at
   run time: the CUDA backend library, below). */

/* Shapes: B batch, T time, C channels, NH heads, V vocabulary (Vp padded), N = B*T rows.
   Outputs first, then inputs, then sizes (llm.c). Parameter gradients are added (+=) so micro-batches
   accumulate; activation gradients are written (=), except dres, the residual stream's (+=).
   Types: `void *` tensors are in the backend's storage type `dtype` (MGT_F32, MGT_BF16 or MGT_F16,
   the communicator's enum): the parameters the ops read (the compute copy), activations and
   activation gradients. `float *` tensors are always fp32: parameter gradients (accumulated over
   micro-batches and reduced over DP in fp32, like Megatron's main_grad), LayerNorm mean/rstd,
   cross-entropy partials, master weights and AdamW moments. A 16-bit op computes in fp32 and rounds
   what it stores once, to nearest even (the numerics of a GPU kernel templated on the storage type). */
typedef struct mgt_backend mgt_backend;
#define MGT_ADAMW_BATCH 32 /* tensors of one adamw_many call at most */
/* the largest operands of a rank's ops, for mgt_backend.reserve */
typedef struct mgt_backend_limits {
    int B, T, C;                          /* a micro-batch: N = B*T rows of C channels */
    int NH;                               /* attention heads of the rank (its TP share) */
    int NKV, hs;                          /* its key/value heads, and the head size (cuDNN's attention plans are built for them) */
    int OC;                               /* the widest matmul output with a bias */
    size_t norm_tensors, norm_elements;   /* what one sum_squares_many call covers at most */
    size_t upload_bytes;                  /* the largest upload inside a step */
    int uploads;                          /* uploads a step makes */
} mgt_backend_limits;
/* whether the CUDA backend runs attention of this shape through cuDNN's fused flash attention
   (kernels/attention_cudnn.cpp): bf16 or fp16 (it has no fp32), a head size that is a multiple of 8
   up to 128, query heads a multiple of the key/value heads; else its own kernel. The plan and the
   simulator price the same choice. */
static inline int mgt_cudnn_attention_serves(int dtype, int hs, int NH, int NKV) {
    return dtype != MGT_F32 && hs > 0 && hs % 8 == 0 && hs <= 128 && NKV > 0 && NH % NKV == 0;
}
struct mgt_backend {
    const char *name;
    int dtype;       /* storage type of the `void *` tensors */
    size_t elt;      /* its size in bytes: 4 or 2 */
    int host_memory; /* 1: the host may read and write what alloc returns (CPU); 0: only through
                        upload and download (a GPU) */
    int att_lse;     /* what attention saves in att: 0 the probabilities (B,NH,T,T) in the storage type
                        (CPU); 1 the logsumexp of each row of scaled scores (B,NH,T) in fp32, flash
                        attention's O(T) memory (CUDA, and the simulator that models it) */
    void *(*alloc)(mgt_backend *be, size_t bytes, int category); /* zero-filled */
    void (*free)(mgt_backend *be, void *ptr, size_t bytes, int category);
    /* host memory to the backend's and back; both return once host memory may be reused or read */
    void (*upload)(mgt_backend *be, void *dst, const void *host_src, size_t bytes);
    void (*download)(mgt_backend *be, void *host_dst, const void *src, size_t bytes);
    /* optional (NULL on CPU): enter makes the backend usable on the calling thread (a GPU's device
       current); finish waits for the work enqueued so far; error is the first failure of an op,
       which returns nothing (ops after it do nothing), or NULL */
    void (*enter)(mgt_backend *be);
    void (*finish)(mgt_backend *be);
    const char *(*error)(mgt_backend *be);
    /* out (B,T,C) = wte[token - vocab_start] for tokens in [vocab_start, vocab_start + vocab_rows),
       else 0, plus wpe[t] when wpe is given (vocabulary-parallel embedding) */
    void (*encoder_forward)(mgt_backend *be, void *out, const int *tokens, const void *wte, int vocab_start, int vocab_rows, const void *wpe,
                            int B, int T, int C);
    void (*encoder_backward)(mgt_backend *be, float *dwte, float *dwpe, const void *dout, const int *tokens, int vocab_start, int vocab_rows,
                             int B, int T, int C);
    void (*layernorm_forward)(mgt_backend *be, void *out, float *mean, float *rstd, const void *inp, const void *weight, const void *bias, int N, int C);
    void (*layernorm_backward)(mgt_backend *be, void *dinp, float *dweight, float *dbias, const void *dout, const void *inp,
                               const void *weight, const float *mean, const float *rstd, int N, int C);
    void (*matmul_forward)(mgt_backend *be, void *out, const void *inp, const void *weight, const void *bias, int N, int C, int OC);
    /* dinp (N,C) = dout W; dweight (OC,C) += dout^T inp; dbias (OC) += column sums of dout. Either half
       alone: dinp NULL (weight gradient only; weight unread), or dweight and dbias NULL (input
       gradient only; inp unread), as zero-bubble pipelining splits the backward */
    void (*matmul_backward)(mgt_backend *be, void *dinp, float *dweight, float *dbias, const void *dout, const void *inp,
                            const void *weight, int N, int C, int OC);
    /* GPT-2's MLP around its GELU (tanh form), each the same arithmetic as the ops it joins (the CUDA
       backend fuses them into cuBLASLt epilogues). Forward: pre (N,OC) = inp W^T + bias, the GELU's
       input kept for the backward, and out (N,OC) = gelu(pre): matmul_forward then gelu_forward.
       Backward of the next matmul, whose input was gelu(pre): dW += dout^T gelu(pre) (inp), dbias +=
       column sums of dout, dpre (N,C) = (dout W) * gelu'(pre): matmul_backward then gelu_backward */
    void (*matmul_gelu_forward)(mgt_backend *be, void *out, void *pre, const void *inp, const void *weight, const void *bias, int N, int C, int OC);
    void (*matmul_gelu_backward)(mgt_backend *be, void *dpre, float *dweight, float *dbias, const void *dout, const void *inp, const void *weight,
                                 const void *pre, int N, int C, int OC);
    /* causal attention on qkv (B,T,(NH + 2 NKV) hs) laid out [q heads | k heads | v heads], hs = C / NH;
       query head h reads key/value head h / (NH / NKV) (grouped-query attention; NKV = NH is GPT-2's);
       out (B,T,C); att is what the forward saves for the backward, as att_lse says; the backward also
       reads the forward's out */
    void (*attention_forward)(mgt_backend *be, void *out, void *att, const void *qkv, int B, int T, int C, int NH, int NKV);
    void (*attention_backward)(mgt_backend *be, void *dqkv, const void *dout, const void *qkv, const void *out, const void *att, int B, int T, int C,
                               int NH, int NKV);
    /* context parallelism's ring attention (src/rank.c, mgt__ring_attention_*): the queries of qkv
       (B,T rows, as above) against one block of keys and values, kv (B,T rows of NKV k heads then NKV
       v heads, kv_stride elements apart); causal: key t' <= query t (the block is the queries' own
       chunk), else every key (an earlier chunk). o (B,T,C) and lse (B,NH,T), fp32, hold the output
       normalised over the blocks so far and its log-sum-exp: first writes them, else merges this
       block in. The backward takes the merged out and lse of the forward and adds dq (B,T,C) and
       dkv (B,T,2 NKV hs), fp32 */
    void (*attention_part_forward)(mgt_backend *be, float *o, float *lse, const void *qkv, const void *kv, int kv_stride, int B, int T, int C,
                                   int NH, int NKV, int causal, int first);
    void (*attention_part_backward)(mgt_backend *be, float *dq, float *dkv, const void *dout, const void *out, const float *lse, const void *qkv,
                                    const void *kv, int kv_stride, int B, int T, int C, int NH, int NKV, int causal);
    /* dst (rows, cols), rows dst_stride elements apart, = src (rows, cols), src_stride apart, converted
       as cast does */
    void (*copy_cols)(mgt_backend *be, void *dst, int dst_dtype, int dst_stride, const void *src, int src_dtype, int src_stride, size_t rows, int cols);
    void (*gelu_forward)(mgt_backend *be, void *out, const void *inp, size_t n);
    void (*gelu_backward)(mgt_backend *be, void *dinp, const void *inp, const void *dout, size_t n); /* dinp may be dout */
    /* the Llama family's parts. RMSNorm: out (N,C) = inp * rstd * weight, rstd (N) = 1 / sqrt(mean(inp^2) + eps);
       backward adds into dinp (the residual stream), as layernorm_backward */
    void (*rmsnorm_forward)(mgt_backend *be, void *out, float *rstd, const void *inp, const void *weight, float eps, int N, int C);
    void (*rmsnorm_backward)(mgt_backend *be, void *dinp, float *dweight, const void *dout, const void *inp, const void *weight, const float *rstd,
                             int N, int C);
    /* rotary positions, in place on the q and k heads of qkv (B,T,(NH + 2 NKV) hs): channels i and i + hs/2 of
       a head at position t turn by t x theta^(-2i/hs) (Hugging Face's rotate_half); backward turns dqkv back */
    void (*rope_forward)(mgt_backend *be, void *qkv, int B, int T, int NH, int NKV, int hs, float theta, int pos0); /* positions pos0 + t */
    void (*rope_backward)(mgt_backend *be, void *dqkv, int B, int T, int NH, int NKV, int hs, float theta, int pos0);
    /* SwiGLU: out (N,H) = silu(inp[:, :H]) * inp[:, H:], inp (N,2H) the gate and up projections side by side */
    void (*swiglu_forward)(mgt_backend *be, void *out, const void *inp, int N, int H);
    void (*swiglu_backward)(mgt_backend *be, void *dinp, const void *inp, const void *dout, int N, int H);
    void (*add_inplace)(mgt_backend *be, float *y, const float *x, size_t n); /* y += x (gradient shards) */
    void (*bias_residual)(mgt_backend *be, void *out, const void *residual, const void *bias, int N, int C); /* out += residual + bias (bias may be NULL) */
    /* res += residual + res_bias, then out = LayerNorm(res) with weight and bias, mean and rstd saved:
       bias_residual and layernorm_forward in one pass (the CUDA backend fuses them) */
    void (*residual_layernorm_forward)(mgt_backend *be, void *res, void *out, float *mean, float *rstd, const void *residual, const void *res_bias,
                                       const void *weight, const void *bias, int N, int C);
    void (*bias_backward)(mgt_backend *be, float *dbias, const void *dout, int N, int C);                      /* dbias += column sums */
    /* vocabulary-parallel cross-entropy over this rank's Vl logits (global columns vocab_start..,
       those >= V are padding). xent_partial writes per row (max, sum of exp(logit - max), the target's
       logit or 0 when another rank has it) and may leave in the logits what its own xent_finish
       reads instead (the CPU keeps exp(logit - max) there when the rank holds the whole vocabulary
       in fp32); xent_finish takes the partials of all tp ranks, writes per-row losses and, when
       grad_scale != 0, turns the logits into dlogits = (softmax - onehot) * grad_scale (a fused
       classifier: two reads of the logits, one write, no probabilities stored). Between them
       nothing else reads the logits. */
    void (*xent_partial)(mgt_backend *be, float *part, void *logits, const int *targets, int N, int vocab_start, int Vl, int V);
    void (*xent_finish)(mgt_backend *be, double *losses, void *logits, const float *parts, int tp, const int *targets, int N, int vocab_start,
                        int Vl, int V, float grad_scale);
    double (*sum_squares)(mgt_backend *be, const float *x, size_t n);
    /* AdamW on fp32 param (the master weights when dtype is 16-bit); param_copy, when not NULL,
       receives the updated param rounded to dtype (the compute copy) */
    void (*adamw)(mgt_backend *be, float *param, void *param_copy, const float *grad, float *m, float *v, size_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, float grad_scale, float bias_correction1, float bias_correction2);
    /* count (at most MGT_ADAMW_BATCH) tensors at once, each exactly as adamw with its own param_copy
       (or NULL) and weight decay: one launch on a GPU (the multi-tensor AdamW) */
    void (*adamw_many)(mgt_backend *be, int count, float *const *param, void *const *param_copy, const float *const *grad, float *const *m,
                       float *const *v, const size_t *n, const float *weight_decay, float lr, float beta1, float beta2, float eps, float grad_scale,
                       float bias_correction1, float bias_correction2);
    void (*scale)(mgt_backend *be, float *x, float factor, size_t n);
    void (*zero)(mgt_backend *be, void *x, size_t bytes);
    /* dst = src converted (MGT_F32, MGT_BF16, MGT_F16), rounded to nearest even */
    void (*cast)(mgt_backend *be, void *dst, int dst_dtype, const void *src, int src_dtype, size_t n);
    size_t mem_current[MGT_MEM_COUNT], mem_peak[MGT_MEM_COUNT]; /* bytes by category, kept by alloc and free */
    void *impl;
    /* ---- optional (NULL on CPU), for a backend whose steps must not allocate or wait without a
       deadline (the CUDA backend): reserve makes everything a step uses from the largest operands,
       once, when the run is created (0, or -1 with error() set); step(be, 1) and step(be, 0)
       bracket each training step and forward-only pass, step(be, 2) and step(be, 0) the warm-up
       step before the first (its libraries' kernels load); sum_squares_many (*out = the sum of squares
       of count fp32 vectors, in a fixed order) and sum_doubles (*out = (accumulate ? *out : 0) + the
       sum of x[0..n)) leave their result in backend memory, so the gradient norm, the loss and the
       skip decision cost one download per step */
    int (*reserve)(mgt_backend *be, const mgt_backend_limits *limits);
    void (*step)(mgt_backend *be, int begin);
    void (*sum_squares_many)(mgt_backend *be, double *out, int count, const float *const *x, const size_t *n);
    void (*sum_doubles)(mgt_backend *be, double *out, const double *x, size_t n, int accumulate);
    /* the op-family profile, called between steps: on 1 starts it, 0 ends it; family_s
       (MGT_SIM_FAMILIES, may be NULL) gets the device seconds per step of each family since it
       started; returns the steps profiled, -1 on failure (mgt_run_profile) */
    int (*profile)(mgt_backend *be, int on, double *family_s);
};

/* ---- the CUDA backend library, opened at run time (src/plugin.c, src/device.c) -------------------
   `ninja cuda` builds build/libmgt_cuda.so from kernels/: the CUDA mgt_backend (cuBLAS and the
   kernels of kernels/<op>.cu), the NCCL mgt_comm and the GPU readings (NVML), behind one table. A
   run with device = cuda or auto opens it with dlopen, so this header and the programs built on it
   never link CUDA: they start on any machine, and where there is no GPU `auto` trains on the CPU.
   The library is looked for at $MGT_CUDA_LIBRARY, then beside the program (build/libmgt_cuda.so
   next to it, then libmgt_cuda.so), then on the loader's path. A program that links the library's
   objects itself hands their table to mgt_cuda_use() instead. */
#define MGT_CUDA_ABI 11 /* the table's version: the library and this header must agree */
#define MGT_NCCL_ID_BYTES 128 /* an NCCL unique id (NCCL_UNIQUE_ID_BYTES) */

typedef struct mgt_gpu_info {
    char name[96];
    char pci_bus_id[32]; /* "00000000:17:00.0", as NVML names devices */
    size_t memory_total, memory_free;
    int sm_count, cc_major, cc_minor;
} mgt_gpu_info;

typedef struct mgt_gpu_reading { /* has_*: the value was read (n/a otherwise) */
    double util_pct, power_w, temp_c, memory_used, memory_total;
    int has_util, has_power, has_temp, has_memory;
} mgt_gpu_reading;

/* what mgt doctor reports of the CUDA side: versions and files as loaded, each GPU's board, and
   which GPUs reach each other directly; -1 (or "") where it is not known */
#define MGT_CUDA_REPORT_GPUS 16
typedef struct mgt_cuda_report {
    int driver_version, runtime_version; /* 13000 = 13.0 */
    int libraries;
    struct {
        char name[16];    /* cuBLAS, cuBLASLt, cuDNN, NCCL, NVRTC */
        char version[32]; /* as the loaded library says */
        char path[512];   /* the file it was loaded from */
    } library[8];
    int gpus; /* rows of gpu[] and peer[] (at most MGT_CUDA_REPORT_GPUS) */
    struct {
        int sm_clock_mhz, memory_clock_mhz, ecc; /* the CUDA runtime's */
        int power_limit_w, pcie_generation, pcie_width, nvlinks_active; /* NVML's */
    } gpu[MGT_CUDA_REPORT_GPUS];
    signed char peer[MGT_CUDA_REPORT_GPUS][MGT_CUDA_REPORT_GPUS]; /* cudaDeviceCanAccessPeer: 1, 0, -1 */
    char nvml_why[256]; /* why NVML's readings are missing, or "" */
} mgt_cuda_report;

/* sets the calling thread's mgt_last_error() to message and returns result */
typedef mgt_result (*mgt_fail_fn)(mgt_result result, const char *message);

typedef struct mgt_cuda_api {
    int abi;                                           /* MGT_CUDA_ABI */
    int (*probe)(int *devices, char *why, size_t cap); /* 0 with the GPU count, or -1 with why */
    int (*info)(int device, mgt_gpu_info *out);
    int (*reading)(int device, mgt_gpu_reading *out);
    /* a backend of a rank of `world` (its waits go through the world's watchdog) */
    int (*backend_create)(void *world, int device, int dtype, mgt_backend **out, char *why, size_t cap);
    void (*backend_destroy)(mgt_backend *be);
    void *(*backend_stream)(mgt_backend *be); /* the cudaStream_t its ops are enqueued on */
    /* NCCL: a unique id (the process of rank 0 makes it, MPI carries it to the others); one world
       on the calling thread, of this process's ranks first..first+count-1 on devices[0..count-1]
       (ncclCommInitRank with the id; unique_id NULL: every rank is here, the id made inside), then
       each rank's communicator on its own thread, all at once (the group splits are collective over
       every process); settle ends a step (waits, times) */
    mgt_result (*unique_id)(void *id, mgt_fail_fn fail); /* MGT_NCCL_ID_BYTES */
    mgt_result (*world_create)(int world, int first, int count, const int *devices, const void *unique_id, double timeout_s,
                               mgt_fail_fn fail, void **world_out);
    mgt_result (*comm_create)(void *world, int rank, void *stream, const mgt_group *const *groups, int ngroups, mgt_comm **out);
    mgt_result (*comm_settle)(mgt_comm *comm);
    void (*comm_destroy)(mgt_comm *comm);
    void (*world_abort)(void *world); /* after an error: every rank's pending call returns */
    void (*world_destroy)(void *world);
    void (*report)(mgt_cuda_report *out); /* mgt doctor's view of the CUDA side */
    /* where the library's notes go (it prints nothing itself): mgt_cuda_load and mgt_cuda_use give it
       mgt's logger (mgt_set_logger); NULL: a library with nothing to say */
    void (*set_logger)(mgt_log_fn log, void *user);
} mgt_cuda_api;

/* the library's table (opened once), or NULL with why: not found, not an mgt CUDA library, or
   built for another version of this header */
MGTDEF const mgt_cuda_api *mgt_cuda_load(char *why, size_t cap);
/* uses api (from a statically linked mgt_cuda_api_get()) instead of loading the library */
MGTDEF void mgt_cuda_use(const mgt_cuda_api *api);
/* the site-packages/nvidia folder whose pip wheels mgt_cuda_load opened to load the library, or "" */
MGTDEF const char *mgt_cuda_pip_folder(void);

/* ---- processes: MPI, opened at run time (src/comm_mpi.c) -----------------------------------------
   `mpirun -np P ./mgt train PRESET` runs P processes; each runs a contiguous block of world / P
   ranks as threads, so the rank order (and every result) is the one of a single process. As with
   CUDA, this header and the programs built on it never link MPI: a process that finds itself
   started by a launcher of more than one process (mgt_mpi_launcher) opens build/libmgt_mpi.so
   (`ninja mpi`, from mpi/mgt_mpi.c with the launcher's mpicc) and calls MPI through this table of
   plain C types, so the program runs where MPI is absent and is not tied to one MPI's ABI. The
   library is looked for at $MGT_MPI_LIBRARY, then beside the program, then on the loader's path.
   The table's calls take `why` (an error's text) and its buffer's size. */
#define MGT_MPI_ABI 1
enum { MGT_MPI_COLLECTIVE, MGT_MPI_P2P, MGT_MPI_STARTUP, MGT_MPI_CHANNELS }; /* a communicator each */
typedef struct mgt_mpi_api {
    int abi; /* MGT_MPI_ABI */
    /* MPI_Init_thread(MPI_THREAD_MULTIPLE) once: this process's index, the count, its host */
    int (*init)(int *process, int *processes, char *host, size_t host_cap, char *why, size_t cap);
    int (*max_tag)(void); /* MPI_TAG_UB */
    void (*finalize)(void);
    void (*abort_all)(int code);
    /* non-blocking, on `channel`; a request for test or cancel, or NULL with why */
    void *(*isend)(const void *buf, size_t bytes, int process, int tag, int channel, char *why, size_t cap);
    void *(*irecv)(void *buf, size_t bytes, int process, int tag, int channel, char *why, size_t cap);
    int (*test)(void *request, char *why, size_t cap); /* 1 done (request freed), 0 not yet, -1 failed (freed) */
    void (*cancel)(void *request);
    int (*allgather)(const void *send, void *recv, size_t bytes, char *why, size_t cap); /* blocking, startup channel */
} mgt_mpi_api;

/* the number of processes an MPI launcher started this one among (Open MPI's
   OMPI_COMM_WORLD_SIZE, MPICH/Intel MPI's PMI_SIZE, Slurm's SLURM_NTASKS beside PMIX_RANK or
   PMI_RANK), or 1 when none did; `name` gets the variable that said so */
MGTDEF int mgt_mpi_launcher(char *name, size_t cap);
/* this process's index among them, from the same launcher's variables (0 when none started it) */
MGTDEF int mgt_mpi_launcher_rank(void);
/* the library's table (opened once), or NULL with why */
MGTDEF const mgt_mpi_api *mgt_mpi_load(char *why, size_t cap);
MGTDEF void mgt_mpi_use(const mgt_mpi_api *api); /* a statically linked table instead */
/* MPI started once for this process (a run does it when launched so): 0 with this process's index
   and the count, or an error; finalized at exit unless mgt_mpi_abort ran */
MGTDEF mgt_result mgt_mpi_start(int *process, int *processes);
MGTDEF void mgt_mpi_abort(int code); /* ends every process of the job (MPI_Abort); nothing without MPI */

/* ---- bf16 GEMMs on the CPU: oneDNN, opened at run time (src/blas.c) ------------------------------
   With precision.dtype = bf16 a CPU backend multiplies the bf16 tensors themselves, accumulating in
   fp32, through oneDNN's matmul, whose kernels use the processor's bf16 dot products (AVX512_BF16,
   AMX) at twice the fp32 FMA rate; without it, it widens the operands to fp32 and calls sgemm.
   build/libmgt_onednn.so (`ninja onednn`, from onednn/mgt_onednn.c against Debian's libdnnl-dev)
   carries the table below, so mgt.h needs no oneDNN headers; it is looked for as MPI's is, at
   $MGT_ONEDNN_LIBRARY first (`off` keeps the sgemm path). Row-major matrices; a plan is one shape,
   built once (the library caches it) and run from any thread, each call on the calling thread. */
#define MGT_ONEDNN_ABI 1
typedef struct mgt_onednn_api {
    int abi; /* MGT_ONEDNN_ABI */
    /* the library and the kernel it picks for a bf16 matmul ("oneDNN 2.6.3, brg:avx512_core_bf16");
       1 when that kernel uses bf16 instructions, 0 when it would emulate them (mgt then keeps sgemm) */
    int (*describe)(char *out, size_t cap);
    /* C = op(A) op(B) (+ bias) (+ C when accumulate): A, B and bias bf16, C bf16 (c_bf16) or fp32;
       op transposes when ta / tb; a plan, or NULL with why */
    void *(*plan)(int ta, int tb, int M, int N, int K, int lda, int ldb, int ldc, int bias, int c_bf16, int accumulate, char *why, size_t cap);
    int (*run)(void *plan, const void *A, const void *B, const void *bias, void *C, char *why, size_t cap); /* 0, or -1 with why */
} mgt_onednn_api;
/* the library's table (opened once), or NULL with why (not built, turned off, not this header's) */
MGTDEF const mgt_onednn_api *mgt_onednn_load(char *why, size_t cap);
/* what a bf16 CPU backend multiplies with, in words: oneDNN's kernel, or why it widens to sgemm;
   1 when oneDNN, 0 when sgemm */
MGTDEF int mgt_cpu_bf16_gemm(char *out, size_t cap);

/* ---- the step simulator (src/sim.c .. src/sim_search.c) -------------------------------------------
   mgt_sim_run drives the runtime above (presets, plan, schedules, buckets, ZeRO, TP, PP) with a
   third backend and a third communicator that compute nothing and touch no data: each op and each
   collective advances virtual clocks of its rank (host, compute stream, communication stream) by a
   modelled cost, and waits, deferred calls and tickets, send/recv and collectives order the clocks
   as the CUDA backend and NCCL order work. Ops are priced by a roofline per device (peak FLOP/s
   of the storage type, memory bandwidth, achievable fractions, GEMM efficiency by shape, launch
   overhead), collectives by an alpha-beta model with NCCL's ring factors over the link they cross
   (inside a node, between nodes). Memory is counted, never allocated. Everything it says is a
   PREDICTION under these assumptions. */
enum { /* op families, as the simulator reports them */
    MGT_SIM_GEMM, MGT_SIM_ATTENTION, MGT_SIM_NORM, MGT_SIM_ELEMENTWISE, MGT_SIM_EMBEDDING, MGT_SIM_LOSS, MGT_SIM_OPTIMIZER,
    MGT_SIM_FAMILIES
};
MGTDEF const char *mgt_sim_family_name(int family); /* "gemm", "attention", ... */

typedef struct mgt_sim_device {
    char name[32];          /* "a100", "h100", "h200", "b200", "cpu" */
    char title[64];         /* "NVIDIA H100 SXM 80GB" */
    double tensor_tflops[3];/* dense GEMM peak by storage type: [MGT_F32] (TF32 on GPUs), [MGT_BF16], [MGT_F16] */
    double vector_tflops;   /* fp32 FLOP/s of the non-GEMM kernels */
    double mem_gbps;        /* device memory bandwidth, GB/s */
    double mem_gib;         /* device memory */
    double gemm_frac;       /* achievable fraction of the GEMM peak on large shapes */
    double gemm_dim;        /* a GEMM's efficiency is gemm_frac * d / (d + gemm_dim), d its smallest dimension */
    double vector_frac, mem_frac; /* achievable fractions of vector_tflops and mem_gbps */
    double launch_us;       /* host time to launch a kernel or enqueue a collective */
    double intra_gbps, inter_gbps; /* per GPU and direction: inside a node (NVLink), between nodes (NIC) */
    double intra_lat_us, inter_lat_us; /* per collective call */
    double step_lat_us;     /* per ring step */
    double link_frac;       /* achievable fraction of the link bandwidth (NCCL bus bandwidth / link) */
    double reserve_gib;     /* what the CUDA backend holds beside the model: context, cuBLAS, NCCL */
    int host_sync;          /* 1: ops and calls run on the rank's thread one after another (the CPU) */
    double transc_gps;      /* exp and tanh per second, G (0: a quarter of vector_tflops) */
    int sms;                /* streaming multiprocessors (0: the cpu) */
    double clock_ghz;       /* the SM clock at which the dense peak is quoted */
    double nvls_gbps;       /* all-reduce inside a node through NVLink SHARP (NVLS), algorithm bandwidth per GPU, GB/s (0: none) */
} mgt_sim_device;

/* the built-in devices (the "cpu" entry holds this machine's figures once mgt_sim_device_find measured it) */
MGTDEF int mgt_sim_devices(const mgt_sim_device **table);
/* a device by name (case-insensitive; "a100", "h100", "h200", "b200", "cpu"). "cpu" measures this
   machine once (sgemm rate of `threads` threads, memory bandwidth, the local communicator's copy
   rate); mgt_sim_run on it prices each op by running the CPU backend's op of that shape (once per
   shape, the median of three) with the threads a rank of the run has, the ranks sharing the machine */
MGTDEF mgt_result mgt_sim_device_find(const char *name, int threads, mgt_sim_device *out);

/* one op as the simulator prices it: FLOPs and bytes of its GEMM part and of the rest */
typedef struct mgt_sim_op {
    const char *name;       /* the backend entry: "matmul_forward", ... */
    int family;             /* MGT_SIM_* */
    double gemm_flops, gemm_bytes, flops, bytes;
    double transcendentals; /* exp and tanh of the non-GEMM part */
    double m, n, k;         /* the GEMM's dimensions (0 when none) */
    int kernels;            /* launches */
    int rank;               /* whose op */
    long long args[6];      /* the call's shape arguments, as the backend entry takes them (the cpu device runs the op with them) */
    double tensor_frac;     /* > 0: the GEMM part runs at this fraction of the tensor peak: cuDNN's fused attention (a
                               published rate), or the op's GEMMs by their shapes (FLOP-weighted) */
    double host_us;         /* host time beyond the launches (cuBLASLt's per-call descriptors and heuristic) */
    double serial_us;       /* device time of parts that run on one SM (a one-block kernel), added to the roofline */
} mgt_sim_op;
/* optional: prices an op instead of the model (modelled: the model's seconds); tests use it */
typedef double (*mgt_sim_cost_fn)(void *user, const mgt_sim_op *op, double modelled);

typedef struct mgt_sim_options {
    mgt_sim_device device;
    int gpus_per_node;      /* ranks per node: collectives within it use intra_*, across nodes inter_* */
    mgt_sim_cost_fn cost;   /* NULL: the model */
    void *cost_user;
    const char *trace;      /* a Chrome trace JSON file of the simulated step, or NULL */
    double family_scale[MGT_SIM_FAMILIES]; /* each op of a family costs this times its price (0: 1): mgt_sim_calibrate */
} mgt_sim_options;
MGTDEF void mgt_sim_options_init(mgt_sim_options *opt); /* h100, 8 per node */

typedef struct mgt_sim_rank {
    int rank, dp, tp, pp;
    double step_s;                      /* when its last work of the step ended */
    double busy_s[MGT_SIM_FAMILIES];    /* compute stream busy, by op family */
    double compute_s;                   /* their sum */
    double comm_s[MGT_COLL_COUNT];      /* communication stream busy, by collective */
    double exposed_s[MGT_COLL_COUNT];   /* compute stream waiting for it, by collective */
    double bubble_s;                    /* compute stream waiting for a pipeline peer to send */
    double host_s;                      /* compute stream waiting for the host (launch-bound) */
    long long calls[MGT_COLL_COUNT];
    double bytes[MGT_COLL_COUNT];       /* as mgt_comm_stats counts them */
    size_t mem_peak[MGT_MEM_COUNT];     /* as the backend's allocator counts them */
} mgt_sim_rank;

typedef struct mgt_sim_result {
    int world;
    double step_s;                      /* the slowest rank's */
    double tokens_per_s, flops_per_token, mfu; /* mfu against the storage type's dense peak */
    double mem_peak_gib;                /* the fullest rank's, with the device reserve */
    double wall_s;                      /* what the simulation took on this machine */
    int shapes_measured;                /* the cpu device: op shapes run to price them */
    long long ops_modelled;             /* the cpu device: ops priced by the model, too large to run here (over 2 GiB of buffers) */
    mgt_sim_rank *ranks;                /* world of them; mgt_sim_result_free */
} mgt_sim_result;
/* one simulated optimizer step of cfg (data is not read) */
MGTDEF mgt_result mgt_sim_run(const mgt_config *cfg, const mgt_sim_options *opt, mgt_sim_result *out);
MGTDEF void mgt_sim_result_free(mgt_sim_result *res);

/* Calibration: per-op-family times measured on a real GPU for one shape (one GPU, one micro-batch's
   forward, backward and optimizer step), in an INI file (docs/simulator.md, "Calibration"):
     [calibration]
     gpu = NVIDIA H100 80GB HBM3        ; as the GPU names itself
     gemm = 19.1                        ; milliseconds, one key per measured family (mgt_sim_family_name)
     attention = 4.8
     [model] ... [train] micro_batch = 16 ... [precision] dtype = bf16    ; the shape measured, as preset keys
   mgt_sim_calibrate simulates that shape and scales each measured family's prices by measured /
   predicted (mgt_sim_options.family_scale), so every layout and size of the family is rescaled. */
typedef struct mgt_sim_calibration {
    char path[256];                     /* the file it was read from */
    char gpu[128];                      /* the GPU the times were measured on */
    mgt_config shape;                   /* the shape measured: one GPU, global batch = micro_batch */
    double measured_s[MGT_SIM_FAMILIES];/* seconds by family; < 0 where the file has none */
    double scale[MGT_SIM_FAMILIES];     /* measured / predicted, after mgt_sim_calibrate; 0 where not measured */
} mgt_sim_calibration;
/* writes the file: family_seconds[MGT_SIM_FAMILIES] measured on gpu_name for cfg's shape (model,
   micro_batch, recompute, precision), a negative time where a family was not measured */
MGTDEF mgt_result mgt_sim_calibration_write(const char *path, const char *gpu_name, const mgt_config *cfg, const double *family_seconds);
/* reads it; an error names the file, the line and what would be valid */
MGTDEF mgt_result mgt_sim_calibration_read(const char *path, mgt_sim_calibration *out);
/* simulates cal's shape on opt->device and sets opt->family_scale (and cal->scale) to measured / predicted */
MGTDEF mgt_result mgt_sim_calibrate(mgt_sim_calibration *cal, mgt_sim_options *opt);

/* The layout search (`mgt plan --search`): every layout of `world` GPUs of opt->device that fits its
   memory (the closed-form plan, the CUDA reserve and the attention scratch), simulated, fastest
   first (PREDICTED). It tries dp x tp x pp with tp within a node, ZeRO 0-3 where dp > 1, every
   micro-batch that divides the batch, 1F1B and GPipe where pp > 1, and the least recompute that
   fits (none, then selective, then full; each that fits where base's recompute is not none: an auto
   layout's pinned recompute). base gives the model, the batch and the precision. Layouts are
   simulated on a thread a core at once (on the cpu device one at a time); the list does not depend
   on it. */
typedef struct mgt_layout_choice {
    int dp, tp, pp, zero, micro_batch, recompute, pp_schedule; /* the preset's values */
    double step_s, tokens_per_s, mfu, mem_gib;                 /* mem_gib: the fullest GPU */
    double bubble_s, exposed_s;                                /* rank 0's pipeline wait, and its communication not hidden */
} mgt_layout_choice;
typedef struct mgt_layout_search {
    int count;                  /* layouts that fit and were simulated, in layouts[] */
    int failed;                 /* that fit but the simulator refused (mgt_last_error says why, for the last) */
    double wall_s;              /* the search's own time */
    mgt_layout_choice *layouts; /* fastest first; mgt_layout_search_free */
} mgt_layout_search;
MGTDEF mgt_result mgt_plan_search(const mgt_config *base, const mgt_sim_options *opt, int world, mgt_layout_search *out);
MGTDEF void mgt_layout_search_free(mgt_layout_search *search);

/* A layout chosen for you: [parallel] layout = auto (src/layout_auto.c; docs/design.md, "A layout
   chosen for you"). mgt_config_resolve_layout writes into cfg the fastest layout mgt_plan_search finds for this
   machine among those that fit it as mgt_run_create checks, PREDICTED by the simulator, in seconds
   (one simulated step per layout, no trial runs):
   - GPUs (device cuda, or auto where the CUDA library finds GPUs): every GPU visible, priced as the
     simulator's model of its name (A100, H100, H200, B200; another is refused) with the least free
     memory among them; fewer GPUs only where no layout of all of them fits;
   - the CPU: ranks are threads sharing parallel.threads (0: every core); 1, 2, 4 ... ranks and the
     threads themselves, each op priced by running it here (the simulator's cpu device).
   It sets dp, tp, pp, zero, pp_schedule, train.micro_batch and train.recompute, never the model, the
   global batch or the precision. A layout key set beside auto (in the preset that says auto, or by
   mgt_config_set / --set after it) is pinned: only layouts with its value are chosen; a preset's own
   layout keys are replaced when auto comes from mgt_config_set or --auto-layout. cfg keeps
   parallel.layout = auto, marked chosen: a second call leaves it as it is, mgt_run_create refuses
   an auto layout not chosen, and a checkpoint's stored preset holds the layout with layout = auto
   (a run resumed from it chooses again: checkpoints do not depend on the layout). parallel.layout =
   manual: nothing to do (out->searched 0). Refused under an MPI launcher of several processes and
   under MGT_NO_SIM. */
typedef struct mgt_layout_auto {
    int searched;                /* 1: cfg's layout was chosen by this call */
    int on_gpus;                 /* 1: GPU ranks priced as `device`; 0: CPU ranks */
    char device[32], title[64];  /* the simulator's device ("h100", "cpu") and its title */
    int devices;                 /* GPUs visible, or the CPU threads: the most ranks tried */
    int simulated;               /* layouts that fit and were simulated, over every rank count tried */
    int eligible;                /* of them, those that keep the pinned keys */
    int pinned;                  /* layout keys pinned, as pins lists them ("parallel.tp = 2") */
    char pins[256];
    mgt_layout_choice chosen;    /* its PREDICTED step_s, tokens_per_s, mfu, mem_gib */
    mgt_layout_choice runner_up; /* the next fastest that fits (has_runner_up) */
    int has_runner_up;
    double search_s;             /* what the search took here, measured */
} mgt_layout_auto;
MGTDEF mgt_result mgt_config_resolve_layout(mgt_config *cfg, mgt_layout_auto *out);

/* ---- runs (src/run.c .. src/api.c): create, step, evaluate, save, resume, sample, statistics -- */

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
    double peak_gflops;         /* of all ranks: the preset's, or set by mgt_run_set_peak */
    char peak_source[64];       /* "preset", or what mgt_run_set_peak said (e.g. "sgemm measured at start") */
    long long tokens_seen;
    size_t params;              /* parameter count (without vocabulary padding) */
    size_t mem_current[MGT_MEM_COUNT], mem_peak[MGT_MEM_COUNT];
    int threads;
    double elapsed_s;           /* wall time of the steps of this process */
    int dtype;                  /* storage type, MGT_DTYPE_* of [precision] dtype */
    double loss_scale;          /* the loss scale of the next step: 1 but in fp16 */
    int skipped_steps;          /* steps whose update was skipped (non-finite gradient norm), in all */
    int step_skipped;           /* the last step's update was skipped */
} mgt_stats;

/* One rank's statistics: of the last step and cumulative. Times are wall seconds of the rank's
   thread: communication is time inside collectives (waiting included), bubble is time waiting for
   other pipeline stages (send/recv), compute is the rest of the step. On a GPU the first two are
   the communication stream's time inside NCCL calls (CUDA events); where they overlap compute,
   compute (still the rest of the step) is only the part that nothing overlapped. */
typedef struct mgt_rank_stats {
    int step;                           /* the step these statistics are of */
    int rank, dp, tp, pp;               /* coordinates in the grid */
    int first_block, last_block;        /* blocks of its pipeline stage, inclusive */
    char device[32];                    /* "cpu" or "cuda:N" */
    double step_s, compute_s, comm_s, bubble_s;
    double total_compute_s, total_comm_s, total_bubble_s;
    long long calls[MGT_COLL_COUNT], total_calls[MGT_COLL_COUNT];
    double bytes[MGT_COLL_COUNT], total_bytes[MGT_COLL_COUNT];
    double seconds[MGT_COLL_COUNT], total_seconds[MGT_COLL_COUNT];
    size_t mem_current[MGT_MEM_COUNT], mem_peak[MGT_MEM_COUNT];
    /* the rank's GPU as NVML and the CUDA runtime last read it (every 0.5 s at most); each valid
       when its has_ flag is set (never on CPU) */
    double gpu_util;                    /* percent of the time a kernel ran */
    double gpu_power_w, gpu_temp_c;
    double gpu_mem_used, gpu_mem_total; /* bytes of the whole device (cudaMemGetInfo), every process */
    int has_gpu_util, has_gpu_power, has_gpu_temp, has_gpu_mem;
} mgt_rank_stats;

enum { MGT_STATE_STARTING, MGT_STATE_RUNNING, MGT_STATE_PAUSED, MGT_STATE_EVALUATING, MGT_STATE_CHECKPOINTING, MGT_STATE_FINISHED,
       MGT_STATE_FAILED };
MGTDEF const char *mgt_state_name(int state);

typedef struct mgt_event {
    int step, level;                    /* MGT_LOG_INFO or MGT_LOG_WARN */
    double time_s;                      /* since the run was created */
    char text[200];
} mgt_event;

typedef struct mgt_run mgt_run;

MGTDEF mgt_result mgt_run_create(mgt_run **out, const mgt_config *cfg); /* validates, allocates, initialises */
MGTDEF void mgt_run_destroy(mgt_run *run);
MGTDEF mgt_result mgt_run_step(mgt_run *run);               /* one optimizer step over global_batch */
/* One optimizer step on your own tokens: rows (global_batch, seq_len + 1), targets shifted by one. */
MGTDEF mgt_result mgt_run_step_tokens(mgt_run *run, const uint32_t *rows);
/* Opens a checkpoint for sampling only: no gradients, optimizer or data. */
MGTDEF mgt_result mgt_run_open(mgt_run **out, const char *checkpoint, int threads);
MGTDEF mgt_result mgt_run_eval(mgt_run *run, double *val_loss); /* eval_batches micro-batches of val */
MGTDEF mgt_result mgt_run_save(mgt_run *run, char *path, size_t cap); /* checkpoint now; its path */
/* Takes the run's checkpoint folder: locks it (flock on <dir>/mgt.lock; a second run into the same
   folder is refused, naming the process that holds it), removes temporary files a killed run left
   there, and refuses (MGT_ERROR_CONFIG) a folder that holds checkpoints of another run, or of this
   run from after the step it resumed at, unless overwrite, which deletes those. Then it starts
   metrics.jsonl afresh, or for a resumed run keeps its lines up to the resumed step. Call it after
   mgt_run_resume and before training; the first step or save calls it with overwrite 0 when the
   caller did not. */
MGTDEF mgt_result mgt_run_claim(mgt_run *run, int overwrite);
MGTDEF mgt_result mgt_run_resume(mgt_run *run, const char *checkpoint); /* file, folder or "latest" */
MGTDEF void mgt_run_stats(const mgt_run *run, mgt_stats *out);
/* What a run has published, for readers on other threads (a dashboard): one call copies, under
   the statistics lock taken once, the state, the run statistics of each step as published after it
   (a ring of the last 65536 steps; a step validated after it was published comes again, with its
   val_loss), the latest per-rank statistics and the events (validations, checkpoints, warnings
   such as a loss spike, a non-finite loss or a slow rank), so every part of a frame is of the same
   moment. The caller owns the arrays (NULL with max 0: none of that kind) and says where its
   reading left off; a reader behind by more than history_max calls again until history_n <
   history_max. */
typedef struct mgt_snapshot {
    /* in */
    int history_from;              /* the first step entry wanted (0: the oldest kept) */
    mgt_stats *history;
    int history_max;
    mgt_rank_stats *ranks;
    int ranks_max;
    int events_from;               /* the first event wanted */
    mgt_event *events;
    int events_max;
    /* out */
    int state;                     /* MGT_STATE_* */
    double time_s;                 /* seconds since the run was created: the clock of mgt_event.time_s,
                                      which a resumed run continues */
    int history_first, history_n;  /* entries [history_first, history_first + history_n) were copied:
                                      history_first > history_from when the ring overwrote older ones */
    int ranks_n;                   /* the run's ranks; min(ranks_n, ranks_max) were copied */
    int events_n;                  /* events [events_from, events_from + events_n) were copied */
} mgt_snapshot;
MGTDEF void mgt_run_snapshot(const mgt_run *run, mgt_snapshot *s);
MGTDEF int mgt_run_state(const mgt_run *run);
/* GFLOP/s of 1024^3 sgemms split over `threads` (0: every core) of a pool as a rank's, the median
   of repetitions over about `seconds` (0 or less when it cannot measure): a CPU's peak for MFU */
MGTDEF double mgt_cpu_sgemm_gflops(int threads, double seconds);
/* the same for bf16 GEMMs through oneDNN (mgt_cpu_bf16_gemm), the peak of a bf16 run's MFU; 0 when
   a bf16 backend widens to sgemm (sgemm's rate is then its peak) */
MGTDEF double mgt_cpu_bf16_gemm_gflops(int threads, double seconds);
/* the BLAS mgt calls, in words ("OpenBLAS 0.3.21 ... (its build configuration)", or a CBLAS that is
   not OpenBLAS), and OpenBLAS's own thread count (0 when unknown) */
MGTDEF void mgt_blas_describe(char *out, size_t cap, int *threads);
/* where a run of cfg would go now: 1 its GPUs (device cuda or auto, a usable GPU for each rank of
   this process), else 0 with why (empty for device = cpu) */
MGTDEF int mgt_device_for(const mgt_config *cfg, char *why, size_t cap);
/* the peak of one rank MFU is reckoned against when the preset states none (parallel.peak_gflops
   = 0), and where it comes from, shown beside MFU */
MGTDEF void mgt_run_set_peak(mgt_run *run, double gflops_per_rank, const char *source);
MGTDEF void mgt_run_set_state(mgt_run *run, int state); /* for drivers: paused, finished, failed */
MGTDEF const mgt_config *mgt_run_config(const mgt_run *run);
MGTDEF const char *mgt_run_dir(const mgt_run *run);        /* checkpoint folder in use */
MGTDEF const char *mgt_run_device(const mgt_run *run);     /* where the ranks run: "cpu", or "cuda" (one GPU each) */
typedef struct mgt_plan mgt_plan; /* below, with the planning functions */
MGTDEF const mgt_plan *mgt_run_plan(const mgt_run *run);    /* the run's plan (mgt_plan_make of its config) */
/* this process's index among the run's processes (0 and 1 without an MPI launcher): process 0
   alone claims the folder and writes metrics and checkpoints; a driver keeps the others quiet */
MGTDEF int mgt_run_process(const mgt_run *run, int *processes);
/* a stop that every process agrees on: request_stop asks for one (a driver, after a signal), and
   after each step stop_agreed says whether any process of the run asked, the same on all of them,
   so all stop after the same step (one process: whether this one asked) */
MGTDEF void mgt_run_request_stop(mgt_run *run);
MGTDEF int mgt_run_stop_agreed(const mgt_run *run);
/* Writes max_new tokens that follow the prompt (n_prompt >= 1; the last seq_len tokens are the
   context) into out; returns the count, or -1. Sampling draws from (seed, position). */
MGTDEF int mgt_run_generate(mgt_run *run, const int *prompt, int n_prompt, int *out, int max_new,
                            double temperature, int top_k, uint64_t seed);
/* a named tensor of the model, with its global shape */
typedef struct mgt_tensor_info {
    char name[64];
    int ndim, shape[2];
    size_t numel;
} mgt_tensor_info;

/* Mean loss over `count` global batches of rows (count x global_batch, seq_len + 1), without
   training; for tests and tools. */
MGTDEF mgt_result mgt_run_loss(mgt_run *run, const uint32_t *rows, int count, double *loss);
/* The op-family profile of a GPU run (CUDA events around each op of a step; off by default, no
   effect on results), between steps: on 1 starts it, 0 ends it and gives rank 0's device seconds per
   step of each family (family_seconds[MGT_SIM_FAMILIES], mgt_sim_family_name; each op from its
   start to the next op's, so idle time behind an op counts in its family). Returns the steps
   profiled; 0 on a backend without a profile (the CPU), or for rank 0 in another process; -1 with
   the error set on failure. What mgt_sim_calibration_write takes. */
MGTDEF int mgt_run_profile(mgt_run *run, int on, double *family_seconds);

/* ---- planning: what each rank holds and moves, in closed form (src/model.c, src/plan.c) ----- */

/* The grid: rank = (pp_index x dp + dp_index) x tp + tp_index, so that the ranks of a TP group are
   neighbours (one node's GPUs) and a pipeline stage is a contiguous block. The one place it is written.
   With context parallelism dp here is the plan's replicas (dp x cp) and dp_index a replica, dp_index
   x cp + cp_index: the order is tp, cp, dp, pp. */
MGTDEF void mgt_rank_coords(int rank, int dp, int tp, int *dp_index, int *tp_index, int *pp_index);
MGTDEF int mgt_rank_at(int dp_index, int tp_index, int pp_index, int dp, int tp);
/* the grid as messages say it, "dp 2 x tp 1 x pp 2", with "cp C x " before tp where cp > 1; returns out */
MGTDEF const char *mgt_grid_text(int dp, int cp, int tp, int pp, char *out, size_t cap);

/* The model's shapes, from its preset: GPT-2 and the Llama family are settings of one model. */
typedef struct mgt_dims {
    int C, NH, NKV, hs;   /* channels, query heads, key/value heads, head size C / NH */
    int H;                /* the MLP's hidden units (d_ff) */
    int qkv;              /* rows of the fused attention input matrix: (NH + 2 NKV) x hs */
    int fc;               /* rows of the MLP's first matrix: H, or gate and up side by side (2H) */
    int rms, rope, swiglu, bias, tied;
} mgt_dims;
#define MGT_MAX_PP 256
/* What a config means for the run as a whole: the grid, the batch's split, the stages, the sizes.
   Made once per run (mgt_run_create) from a validated config, and read by rank setup, the memory
   plan, the simulator, checkpoints and the driver. */
struct mgt_plan {
    int world, dp, tp, pp, zero; /* zero is 0 where replicas is 1 (nothing to shard) */
    int cp;                 /* context-parallel ranks (each holds 1/cp of the sequence) */
    int replicas;           /* ranks holding the same parameters: dp x cp; ZeRO shards over them and
                               their gradients are summed over them */
    int micro_steps;        /* global_batch / (micro_batch x dp): accumulation and pipeline depth */
    int Vp;                 /* vocabulary padded to a multiple of 128 x tp rows */
    int stage_first[MGT_MAX_PP + 1]; /* stage s holds blocks [stage_first[s], stage_first[s+1]) */
    size_t params;          /* the model's parameters, without the vocabulary's padding */
    mgt_dims dims;
    mgt_config cfg;         /* the validated config the plan is of: what the plan's readers take the rest from */
};
/* validates cfg, then plans it (thread-safe) */
MGTDEF mgt_result mgt_plan_make(const mgt_config *cfg, mgt_plan *out);

typedef struct mgt_rank_plan {
    int rank, dp, tp, pp, cp;      /* coordinates */
    int first_block, last_block;   /* blocks of its stage, inclusive */
    size_t params;                 /* parameters it holds (its TP and PP slice, padding included) */
    size_t shard;                  /* of them, its 1/replicas share (what ZeRO keeps of them) */
    int tensors;                   /* the tensors they are */
    size_t mem[MGT_MEM_COUNT];     /* predicted bytes by memory category */
    double bytes[MGT_COLL_COUNT];  /* predicted bytes per optimizer step, counted as mgt_comm_stats counts them */
    int micro_in_flight;           /* activation sets it keeps (the pipeline schedule's depth) */
    /* device = cuda: what the CUDA backend (kernels/backend_cuda.cu) holds beyond the runtime's
       categories. In mem[MGT_MEM_WORKSPACE] (in place of the CPU backend's scratch): its scratch, sized
       for the op that needs most (cuda_attention: the attention backward's float per row and head;
       where cuDNN's attention serves, also its fp32 dq accumulator, 4 B NH T hs bytes, but not its
       plan's workspace, known only to a real cuDNN) and
       cuBLAS's workspace (also cuBLASLt's).
       Not in mem, because they are estimates: NCCL's buffers (per communicator of more than one rank,
       the communicators this rank is in) and the CUDA context */
    size_t cuda_scratch, cuda_attention, cuda_cublas;
    size_t cuda_nccl_estimate, cuda_context_estimate;
    int cuda_communicators;
} mgt_rank_plan;
/* The plan of `rank` (0 .. dp*tp*pp - 1) of a run planned by mgt_plan_make (or mgt_run_plan). */
MGTDEF mgt_result mgt_plan_rank(const mgt_plan *plan, int rank, mgt_rank_plan *out);

/* Does a run of cfg fit this machine? What the planner says its ranks need, against what the
   machine has, before anything is allocated; mgt_run_create and mgt_run_open refuse a run that does
   not fit, and `mgt check` prints the comparison. CPU ranks live in one process: the sum over ranks,
   plus their threads, the BLAS buffers and a checkpoint's copies, against 90% of MemAvailable
   (/proc/meminfo; the rest is for the page cache of the data and what the plan does not count), and
   the address space the run adds against what ulimit -v (RLIMIT_AS) leaves. GPU ranks: each rank
   against its device's free memory, less a reserve for cuBLAS and NCCL; the host against the copies a
   checkpoint makes. MGT_OK when it fits or nothing could be checked; MGT_ERROR_CONFIG when it does
   not, with the numbers and what would make it fit (the same line is in out->text). With the
   environment variable MGT_MEMORY_CHECK=off a run that does not fit is only warned about (MGT_OK,
   fits 0, enforced 0): MemAvailable does not count swap, and memory may be freed meanwhile. */
typedef struct mgt_fit {
    int device;                /* MGT_DEVICE_CPU or MGT_DEVICE_CUDA: where the ranks would run */
    int checked;               /* 0: nothing to compare with (no /proc/meminfo; a cuda preset here without GPUs) */
    int fits, enforced;        /* enforced 0 under MGT_MEMORY_CHECK=off */
    double host_need, host_have; /* bytes of RAM the run needs, and what mgt may use (-1: unknown) */
    double as_need, as_have;   /* address space the run adds, and what ulimit -v leaves (-1: unlimited) */
    int gpu_rank;              /* GPU: the rank with the least headroom (-1 on CPU) */
    double gpu_need, gpu_have; /* its need, and its device's free memory */
    char text[1024];           /* the comparison and its verdict in one line; the levers when it does not fit */
} mgt_fit;
MGTDEF mgt_result mgt_plan_fit(const mgt_config *cfg, mgt_fit *out);

/* ---- checkpoints, weights and data files (src/folder.c, src/weights*.c, src/data.c) --------- */

/* Reads the resolved preset stored in a checkpoint (so `mgt sample` needs no preset file). */
MGTDEF mgt_result mgt_checkpoint_config(const char *checkpoint, mgt_config *cfg);
/* Newest checkpoint file in a folder into path; MGT_ERROR_CHECKPOINT when there is none. */
MGTDEF mgt_result mgt_checkpoint_latest(const char *dir, char *path, size_t cap);
/* [model] init: the model keys the preset leaves out are set from init's file, a key the preset sets
   to another value is refused naming both; a no-op without init (mgt_run_create calls it) */
MGTDEF mgt_result mgt_config_resolve_init(mgt_config *cfg);
/* Writes a folder Hugging Face's from_pretrained loads from a checkpoint (file or run folder):
   config.json (GPT2LMHeadModel or LlamaForCausalLM), model.safetensors and the run's tokenizer
   files, each atomically; note: what was written. MGT_ERROR_UNSUPPORTED: a model Hugging Face has no class for. */
MGTDEF mgt_result mgt_export(const char *checkpoint, const char *dir, char *note, size_t cap);
/* Checks a token shard: magic, version, size, ids below vocab_size; sets *n_tokens. */
MGTDEF mgt_result mgt_shard_check(const char *path, int vocab_size, size_t *n_tokens);
/* Checks the shards of a data spec as a run reads them (data.train: comma-separated files or glob
   patterns, each pattern's files in name order; every shard holds at least seq_len + 1 tokens);
   sets how many files and tokens in all (either may be NULL). name (such as "[data] train", or NULL)
   begins the messages. */
MGTDEF mgt_result mgt_data_check(const char *spec, const char *name, int vocab_size, int seq_len, int *n_files, size_t *n_tokens);

#ifdef __cplusplus
}
#endif
#endif /* MGT_H_INCLUDED */
