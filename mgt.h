/* mgt.h - assembled by src/assemble.py from the parts under src/: edit a part, then run `ninja`
   (or src/assemble.py), which writes this file again. A compiler names the part's file and line.

   PARTS (in this order: the public API, then the implementation from its base up)
     src/mgt_api.h          the public API: results, presets, runs, backends, communicators, the CUDA and MPI
                            tables, the simulator, data, checkpoints, the plan
     src/catf.h             mgt__catf, shared by the implementation and the CUDA library's C files (which
                            define MGT_CATF)
     src/impl_begin.h       the implementation begins: its guard, allocator hooks, system includes, compiler
                            macros
     src/base.c             results, errors and logging; counter-based random numbers
     src/plugin.c           opening mgt's libraries at run time (the CUDA backend's, MPI's, oneDNN's): where
                            they are looked for, and their interface version
     src/config.c           presets: the key table, INI loading, validation, printing
     src/pool.c             the CPUs a process may use, the thread pool of a rank; bf16 and fp16 conversions
     src/blas.c             the BLAS: OpenBLAS's threads and core type settled, single-threaded sgemm calls
                            from the pools' threads, split over them; bf16 GEMMs through oneDNN
     src/backend_cpu.c      the CPU backend: the ops as plain loops over the pool's threads, GEMMs through
                            src/blas.c, bf16/fp16 storage
     src/world.c            the world table: where a run's ranks live and how they reach each other
     src/model.c            the run's plan (mgt_plan_make: the grid, the batch's split, the stages, the sizes)
                            and the model: a rank's tensors in one buffer, each a slice of a global tensor
     src/data.c             llm.c token shards, memory-mapped, sampled from (seed, step)
     src/safetensors.c      safetensors files: reading, writing, the JSON header
     src/comm_local.c       the in-process world of rank threads: collectives, messages, deadlock detection
     src/comm_mpi.c         processes (MPI) around the in-process world: the launcher, the MPI library, the
                            two-level communicator (MGT_NO_MPI leaves it out)
     src/run.c              the run's state (mgt_run), the learning-rate schedule, folders made, and what a
                            run says of itself (mgt_run_config, _plan, _dir, _process)
     src/rank.c             a rank: collectives over its groups, block, embedding and head forward and
                            backward, a stage's blocks forward and backward
     src/pipeline.c         the pipeline: a micro-batch's rows, activations between stages, the schedules
                            (GPipe, 1F1B; interleaved 1F1B and zero-bubble ZB-H1 as lists of actions)
     src/step.c             a rank's optimizer step (ZeRO reductions, the global norm, AdamW), the commands
                            rank threads run, a step of the run, statistics and events
     src/tensorboard.c      TensorBoard event files
     src/metrics.c          metrics.jsonl: a line per logged step and validation, cut back to the resumed step
                            and read back as the dashboard's history when a run resumes in its folder
     src/folder.c           a run's folder: its checkpoint files (named, listed, pruned, the newest found),
                            its lock and the claim that opens its metrics, the preset a checkpoint stores
     src/checkpoint.c       layout-independent checkpoints: the ranks' slices gathered into global tensors,
                            and back
     src/rank_make.c        a rank made and freed: its place and groups, its backend, its buffers and
                            activations, its first values
     src/weights.c          [model] init's sources read as mgt's global tensors: what every source shares, mgt
                            checkpoints, llm.c's .bin
     src/weights_hf.c       Hugging Face's weights in and out: a folder as [model] init (config.json and its
                            JSON reader, model.safetensors or its shards, the tensor names), mgt_export; left
                            out by MGT_NO_HF
     src/weights_init.c     [model] init: what it names opened, the preset's model resolved from it, a fresh
                            run's weights; under MGT_NO_HF, a Hugging Face folder and mgt_export refused
     src/plan.c             a rank's plan in closed form (mgt_plan_rank: its memory and traffic), and whether
                            a run fits this machine (mgt_plan_fit)
     src/device.c           where ranks go: the CUDA library opened at run time, the device choice, the sgemm
                            probe
     src/api.c              making and destroying a run (mgt_run_create, mgt_run_open, mgt_run_destroy),
                            sampling
     src/sim.c              the step simulator: its ranks' clocks, the devices it knows, the price of an op
     src/sim_measure.c      the simulator's cpu device: an op priced by running the CPU backend's op of its
                            shape, beside the machine's other ranks
     src/sim_backend.c      the simulator's backend: every op's FLOPs and bytes as formulas of its shapes,
                            charged to the compute stream's clock
     src/sim_comm.c         the step simulator: its communicator and world, the CPU priced by running its ops
     src/sim_calibration.c  the step simulator: calibration from per-family times measured on a GPU
     src/sim_search.c       the layout search: every layout of a number of GPUs (or CPU ranks) that fits,
                            simulated, fastest first (mgt plan --search, parallel.layout = auto)
     src/layout_auto.c      a layout chosen for you: parallel.layout = auto resolved into the layout keys by
                            the layout search, on this machine's GPUs or cores (mgt_config_resolve_layout);
                            under MGT_NO_SIM a stand-in that refuses auto
     src/impl_end.h         the implementation ends; the licence
*/
/* ==== begin src/mgt_api.h ==== */
#line 1 "src/mgt_api.h"
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
/* ==== end src/mgt_api.h ==== */
/* ==== begin src/catf.h ==== */
#line 1 "src/catf.h"
/* src/catf.h - mgt__catf, shared by the implementation and the CUDA library's C files (which define MGT_CATF) */

/* mgt__catf: printf appended to the text in buf, cut at cap. The implementation's, and that of a
   file built apart from it that includes only the declarations: kernels/comm_nccl.c and
   kernels/watchdog.c, in the CUDA library, which takes nothing from the program (it is opened with
   dlopen and reached through one table), define MGT_CATF before including mgt.h. */
#if (defined(MGT_IMPLEMENTATION) || defined(MGT_CATF)) && !defined(MGT__CATF_DEFINED)
#define MGT__CATF_DEFINED
#include <stdarg.h> /* defines: va_list */
#include <stdio.h>  /* defines: vsnprintf */
#include <string.h> /* defines: strlen */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 3, 4)))
#endif
static void mgt__catf(char *buf, size_t cap, const char *fmt, ...) {
    size_t n = strlen(buf);
    va_list ap;
    if (n + 1 >= cap) return;
    va_start(ap, fmt);
    vsnprintf(buf + n, cap - n, fmt, ap);
    va_end(ap);
}
#endif
/* ==== end src/catf.h ==== */
/* ==== begin src/impl_begin.h ==== */
#line 1 "src/impl_begin.h"
/* src/impl_begin.h - the implementation begins: its guard, allocator hooks, system includes, compiler
   macros */

/* ============================================================================================== */
/*                                         IMPLEMENTATION                                         */
/* ============================================================================================== */
#ifdef MGT_IMPLEMENTATION
#ifndef MGT__IMPLEMENTED
#define MGT__IMPLEMENTED

/* every allocation of the library goes through these (a test counts them: tests/test_alloc.c);
   what the C library allocates itself (glob's paths) it frees itself */
#if defined(MGT_MALLOC) != defined(MGT_FREE) || defined(MGT_MALLOC) != defined(MGT_REALLOC)
#error "define MGT_MALLOC, MGT_REALLOC and MGT_FREE together, or none of them"
#endif
#ifndef MGT_MALLOC
#define MGT_MALLOC(size) malloc(size)
#define MGT_REALLOC(ptr, size) realloc(ptr, size)
#define MGT_FREE(ptr) free(ptr)
#endif

#include <stdlib.h>    /* defines: malloc, free, qsort, strtod, strtol */
#include <string.h>    /* defines: memcpy, memset, strcmp, strlen */
#include <stdarg.h>    /* defines: va_list */
#include <math.h>      /* defines: sqrt, exp, log, log2, cos, floorf */
#include <errno.h>     /* defines: errno */
#include <pthread.h>   /* defines: pthread_create, mutexes, condition variables */
#include <sched.h>     /* defines: sched_yield (a spinning pool thread) */
#include <time.h>      /* defines: clock_gettime */
#include <unistd.h>    /* defines: sysconf, fsync, close */
#include <fcntl.h>     /* defines: open */
#include <dirent.h>    /* defines: opendir, readdir */
#include <glob.h>      /* defines: glob (data.train = data/fineweb_train_*.bin) */
#include <sys/mman.h>  /* defines: mmap */
#include <sys/stat.h>  /* defines: stat, mkdir */
#include <sys/file.h>  /* defines: flock (a run's lock on its checkpoint folder) */
#include <sys/resource.h> /* defines: getrlimit, RLIMIT_AS */
#include <dlfcn.h>     /* defines: dlopen, dlsym (the CUDA backend library) */
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
/* ==== end src/impl_begin.h ==== */
/* ==== begin src/base.c ==== */
#line 1 "src/base.c"
/* src/base.c - results, errors and logging; counter-based random numbers */
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
#define MGT__TRY(expr) do { mgt_result mgt__r = (expr); if (mgt__r != MGT_OK) return mgt__r; } while (0)
MGT__PRINTF(2, 3) static void mgt__log(int level, const char *fmt, ...) {
    char text[1024];
    va_list ap;
    if (!mgt__logger) return;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    mgt__logger(mgt__logger_user, level, text);
}

MGTDEF double mgt_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* zeroed memory for n things of `size` bytes through MGT_MALLOC; NULL when the product overflows */
static void *mgt__calloc(size_t n, size_t size) {
    void *p;
    size_t bytes;
    if (size && n > (size_t)-1 / size) return NULL;
    bytes = n * size;
    p = MGT_MALLOC(bytes > 0 ? bytes : 1);
    if (p) memset(p, 0, bytes);
    return p;
}

/* bounded string copy that always terminates */
static void mgt__strlcpy(char *dst, const char *src, size_t cap) {
    size_t n = strlen(src);
    if (cap == 0) return;
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* Opens path read-only if it is a regular file; anything else (a folder, /dev/null, a FIFO, a
   socket) is refused before a byte is read. O_NONBLOCK makes open() of a FIFO return at once
   instead of waiting for a writer; the flag is cleared once fstat shows a regular file. Returns the
   descriptor (and *st when st is not NULL), or -1 with why = strerror ("No such file or
   directory") or what the path is ("it is a folder, not a file"), for a message such as
   "%s: cannot open the preset: %s". */
static int mgt__open_regular(const char *path, struct stat *st, char *why, size_t cap) {
    struct stat s;
    const char *kind;
    int fd = open(path, O_RDONLY | O_NONBLOCK), flags;
    if (fd < 0) { snprintf(why, cap, "%s", strerror(errno)); return -1; }
    if (fstat(fd, &s)) { snprintf(why, cap, "%s", strerror(errno)); close(fd); return -1; }
    if (S_ISREG(s.st_mode)) {
        if ((flags = fcntl(fd, F_GETFL)) == -1 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == -1) {
            snprintf(why, cap, "%s", strerror(errno));
            close(fd);
            return -1;
        }
        if (st) *st = s;
        return fd;
    }
    kind = S_ISDIR(s.st_mode) ? "a folder" : S_ISFIFO(s.st_mode) ? "a FIFO (named pipe)" : S_ISCHR(s.st_mode) ? "a character device"
         : S_ISBLK(s.st_mode) ? "a block device" : S_ISSOCK(s.st_mode) ? "a socket" : NULL;
    if (kind) snprintf(why, cap, "it is %s, not a file", kind);
    else snprintf(why, cap, "it is not a regular file");
    close(fd);
    errno = EINVAL;
    return -1;
}

/* ---- counter-based random numbers: every value is a pure function of its keys --------------- */

static uint64_t mgt__mix64(uint64_t x) { /* splitmix64 finaliser */
    x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27; x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}
MGTDEF uint64_t mgt_hash3(uint64_t a, uint64_t b, uint64_t c) {
    return mgt__mix64(mgt__mix64(mgt__mix64(a + 0x9e3779b97f4a7c15ULL) ^ b) ^ c);
}
static double mgt__uniform(uint64_t h) { return ((double)(h >> 11) + 0.5) * (1.0 / 9007199254740992.0); } /* (0,1) */
/* standard normal for element `index` of tensor `tensor` (Box-Muller over two counters) */
static double mgt__normal(uint64_t seed, uint64_t tensor, uint64_t index) {
    double u1 = mgt__uniform(mgt_hash3(seed, tensor, 2 * index));
    double u2 = mgt__uniform(mgt_hash3(seed, tensor, 2 * index + 1));
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
/* ==== end src/base.c ==== */
/* ==== begin src/plugin.c ==== */
#line 1 "src/plugin.c"
/* src/plugin.c - opening mgt's libraries at run time (the CUDA backend's, MPI's, oneDNN's): where they are looked for, and their interface version */
/* one of mgt's libraries: the variable that names its path, its file, the getter of its table
   (whose first int is the interface version, abi), what it is, and the build target that makes it */
typedef struct mgt__dl_lib { const char *env, *file, *symbol, *kind, *target; int abi; } mgt__dl_lib;

/* lib's table: dlopen(path), then its getter, whose table must have this mgt's version; NULL with
   why appended to `why` */
static const void *mgt__dl_table(const mgt__dl_lib *lib, const char *path, char *why, size_t cap) {
    typedef const void *(*get_fn)(void);
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL), *sym;
    const void *table;
    get_fn get;
    size_t used = strlen(why);
    if (!handle) {
        const char *e = dlerror();
        snprintf(why + used, cap - used, "%s%s", used ? "; " : "", e ? e : path);
        return NULL;
    }
    sym = dlsym(handle, lib->symbol);
    if (!sym) {
        snprintf(why + used, cap - used, "%s%s: not an mgt %s library (no %s)", used ? "; " : "", path, lib->kind, lib->symbol);
        dlclose(handle);
        return NULL;
    }
    memcpy(&get, &sym, sizeof get); /* POSIX: a symbol's address converts to a function pointer */
    table = get();
    if (!table || *(const int *)table != lib->abi) {
        snprintf(why + used, cap - used, "%s%s: built for another mgt (interface %d, this one %d); rebuild it with `%s`", used ? "; " : "", path,
                 table ? *(const int *)table : -1, lib->abi, lib->target);
        dlclose(handle);
        return NULL;
    }
    return table; /* kept open for the life of the process */
}
/* lib's table from the file at $env, else build/<file> beside the program (the source tree), <file>
   beside it, ../lib/mgt/<file> (`ninja install`), then on the loader's path (a bundle's run path);
   what each place lacked is appended to `tried` */
static const void *mgt__dl_search(const mgt__dl_lib *lib, char *tried, size_t cap) {
    char exe[1024], dir[1024], path[1200], *slash;
    const char *env = getenv(lib->env), *file = lib->file;
    const void *api = NULL;
    ssize_t n;
    if (env && env[0]) return mgt__dl_table(lib, env, tried, cap);
    n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    mgt__strlcpy(dir, exe, sizeof dir);
    slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    snprintf(path, sizeof path, "%s/build/%s", dir, file);
    if (!access(path, F_OK)) api = mgt__dl_table(lib, path, tried, cap);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (!api && !access(path, F_OK)) api = mgt__dl_table(lib, path, tried, cap);
    snprintf(path, sizeof path, "%s/../lib/mgt/%s", dir, file);
    if (!api && !access(path, F_OK)) api = mgt__dl_table(lib, path, tried, cap);
    if (!api) api = mgt__dl_table(lib, file, tried, cap);
    return api;
}
/* ==== end src/plugin.c ==== */
/* ==== begin src/config.c ==== */
#line 1 "src/config.c"
/* src/config.c - presets: the key table, INI loading, validation, printing */
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
    const char *p = index >= 0 ? choices : NULL;
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

/* what people coming from nanoGPT, llm.c, Hugging Face, Megatron and DeepSpeed type, and mgt's key */
static const char *const mgt__key_aliases[][2] = {
    {"learning_rate", "[train] lr"}, {"max_lr", "[train] lr"}, {"min_learning_rate", "[train] min_lr"}, {"lr_min", "[train] min_lr"},
    {"batch_size", "[train] global_batch (sequences per step) or micro_batch (per forward pass)"}, {"total_batch_size", "[train] global_batch"},
    {"global_batch_size", "[train] global_batch"}, {"micro_batch_size", "[train] micro_batch"}, {"per_device_train_batch_size", "[train] micro_batch"},
    {"gradient_accumulation_steps", "[train] global_batch (accumulation = global_batch / (micro_batch x dp))"},
    {"max_steps", "[train] steps"}, {"max_iters", "[train] steps"}, {"num_iterations", "[train] steps"}, {"train_steps", "[train] steps"},
    {"iterations", "[train] steps"}, {"warmup_steps", "[train] warmup"}, {"warmup_iters", "[train] warmup"}, {"lr_warmup_steps", "[train] warmup"},
    {"lr_decay_style", "[train] schedule"}, {"lr_scheduler_type", "[train] schedule"}, {"decay_lr", "[train] schedule"},
    {"max_grad_norm", "[train] grad_clip"}, {"clip_grad", "[train] grad_clip"}, {"gradient_clipping", "[train] grad_clip"},
    {"adam_beta1", "[train] beta1"}, {"adam_beta2", "[train] beta2"}, {"adam_epsilon", "[train] eps"}, {"adam_eps", "[train] eps"},
    {"eval_interval", "[train] eval_every"}, {"val_loss_every", "[train] eval_every"}, {"eval_steps", "[train] eval_every"},
    {"eval_iters", "[train] eval_batches"}, {"val_max_steps", "[train] eval_batches"},
    {"gradient_checkpointing", "[train] recompute = full"}, {"activation_checkpointing", "[train] recompute = full"}, {"recompute_activations", "[train] recompute = full"},
    {"n_embd", "[model] d_model"}, {"n_embed", "[model] d_model"}, {"hidden_size", "[model] d_model"}, {"dim", "[model] d_model"},
    {"block_size", "[model] seq_len"}, {"n_ctx", "[model] seq_len"}, {"n_positions", "[model] seq_len"}, {"max_seq_len", "[model] seq_len"},
    {"seq_length", "[model] seq_len"}, {"sequence_length", "[model] seq_len"}, {"max_position_embeddings", "[model] seq_len"},
    {"num_layers", "[model] n_layer"}, {"num_hidden_layers", "[model] n_layer"},
    {"num_heads", "[model] n_head"}, {"num_attention_heads", "[model] n_head"}, {"vocab", "[model] vocab_size"},
    {"num_key_value_heads", "[model] n_kv_head"}, {"n_kv_heads", "[model] n_kv_head"}, {"intermediate_size", "[model] d_ff"}, {"ffn_dim", "[model] d_ff"},
    {"rms_norm_eps", "[model] norm_eps"}, {"layer_norm_epsilon", "[model] norm_eps"}, {"tie_word_embeddings", "[model] tied_head"},
    {"tensor_model_parallel_size", "[parallel] tp"}, {"tensor_parallel_size", "[parallel] tp"}, {"pipeline_model_parallel_size", "[parallel] pp"},
    {"pipeline_parallel_size", "[parallel] pp"}, {"data_parallel_size", "[parallel] dp"}, {"zero_stage", "[parallel] zero"}, {"stage", "[parallel] zero"},
    {"bf16", "[precision] dtype = bf16"}, {"fp16", "[precision] dtype = fp16"}, {"mixed_precision", "[precision] dtype"},
    {"out_dir", "[checkpoint] dir"}, {"output_dir", "[checkpoint] dir"}, {"save_steps", "[checkpoint] every"}, {"checkpoint_every", "[checkpoint] every"},
    {"save_total_limit", "[checkpoint] keep"}, {"log_interval", "[log] every"}, {"logging_steps", "[log] every"}, {"log_every", "[log] every"},
    {"input_bin", "[data] train"}, {"train_bin", "[data] train"}, {"input_val_bin", "[data] val"}, {"val_bin", "[data] val"}, {"dataset", "[data] train"},
};

/* "did you mean" text for an unknown section or key */
static void mgt__suggest(const char *section, const char *name, char *out, size_t cap) {
    int i, best = -1, best_d = 1 << 30, section_known = 0;
    char lower[64];
    for (i = 0; name[i] && i < 63; i++) lower[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
    lower[i] = 0;
    for (i = 0; i < (int)(sizeof mgt__key_aliases / sizeof mgt__key_aliases[0]); i++)
        if (!strcmp(lower, mgt__key_aliases[i][0])) {
            snprintf(out, cap, "unknown key '%s'%s%s%s; did you mean %s? (mgt's name for it)", name, section[0] ? " in [" : "", section, section[0] ? "]" : "",
                     mgt__key_aliases[i][1]);
            return;
        }
    for (i = 0; i < MGT_CONFIG_NKEYS; i++) /* a key of mgt's in another section */
        if (!strcmp(lower, mgt__keys[i].info.name) && strcmp(section, mgt__keys[i].info.section)) {
            snprintf(out, cap, "unknown key '%s' in [%s]; '%s' belongs in [%s]", name, section, mgt__keys[i].info.name, mgt__keys[i].info.section);
            return;
        }
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
#define MGT__FROM_INIT (-2) /* cfg->line of a model key taken from [model] init's file */
#define MGT__FROM_LAYOUT (-7) /* cfg->line of a layout key parallel.layout = auto chose, and of layout itself once it has chosen */
/* the keys parallel.layout = auto chooses */
static const char *const mgt__layout_keys[][2] = {
    {"parallel", "dp"}, {"parallel", "tp"}, {"parallel", "pp"}, {"parallel", "zero"}, {"parallel", "pp_schedule"}, {"train", "micro_batch"}, {"train", "recompute"},
};
#define MGT__LAYOUT_KEYS 7
/* whether cfg asks for a layout still to be chosen: parallel.layout = auto, not yet resolved (mgt_config_resolve_layout) */
static int mgt__layout_unresolved(const mgt_config *cfg) {
    return cfg->parallel.layout == MGT_LAYOUT_AUTO && cfg->line[mgt__find_key("parallel", "layout")] != MGT__FROM_LAYOUT;
}
/* whether layout key `key` constrains an automatic layout: set beside auto or after it. A preset's own
   layout keys pin it only where the preset itself says auto (auto from --set, --auto-layout or a
   program replaces the preset's layout); --set and a program's options always pin; a default, or a
   value auto chose before, never does */
static int mgt__layout_pinned(const mgt_config *cfg, int key) {
    int line = cfg->line[key];
    if (line == 0 || line == MGT__FROM_LAYOUT || line == MGT__FROM_INIT) return 0;
    return line < 0 || cfg->line[mgt__find_key("parallel", "layout")] > 0;
}
/* where a key got its value: "file:line", "--set section.key", init's model or "the default" */
static const char *mgt__where(const mgt_config *cfg, int key, char *buf, size_t cap) {
    int line = cfg->line[key];
    if (line > 0) snprintf(buf, cap, "%s:%d", cfg->path, line);
    else if (line == MGT__FROM_INIT) snprintf(buf, cap, "[model] init's model");
    else if (line == MGT__FROM_LAYOUT) snprintf(buf, cap, "parallel.layout = auto's choice");
    else if (line <= -3 && line >= -6) snprintf(buf, cap, "%s", cfg->option[-3 - line]);
    else if (line < 0) snprintf(buf, cap, "--set %s.%s", mgt__keys[key].info.section, mgt__keys[key].info.name);
    else snprintf(buf, cap, "the default of [%s] %s", mgt__keys[key].info.section, mgt__keys[key].info.name);
    return buf;
}
/* MGT_OK, or (with the error set) where cfg's layout is parallel.layout = auto still to be chosen:
   `who` needs a layout */
static mgt_result mgt__layout_chosen(const mgt_config *cfg, const char *who) {
    char where[300];
    if (!mgt__layout_unresolved(cfg)) return MGT_OK;
    return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] layout = auto: %s needs the layout chosen first: mgt_config_resolve_layout(&cfg, &choice) "
                     "chooses it (mgt train does)", mgt__where(cfg, mgt__find_key("parallel", "layout"), where, sizeof where), who);
}

/* why a string value is refused (NULL when it is fine): a value is UTF-8 text of one line, so that
   any value stores exactly in a checkpoint's JSON and prints as it is */
static const char *mgt__str_problem(const char *s, char *why, size_t cap) {
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    if (n >= MGT_STR_MAX) { snprintf(why, cap, "a value of %zu bytes is longer than %d", n, MGT_STR_MAX - 1); return why; }
    while (*p) {
        int len = *p < 0x80 ? 1 : (*p & 0xe0) == 0xc0 ? 2 : (*p & 0xf0) == 0xe0 ? 3 : (*p & 0xf8) == 0xf0 ? 4 : 0, i;
        unsigned cp = len == 1 ? *p : len == 2 ? *p & 0x1fu : len == 3 ? *p & 0x0fu : *p & 0x07u;
        if (*p < 0x20 || *p == 0x7f) {
            snprintf(why, cap, "byte %d is the control character 0x%02x; a value is text on one line", (int)(p - (const unsigned char *)s) + 1, *p);
            return why;
        }
        for (i = 1; i < len; i++) {
            if ((p[i] & 0xc0) != 0x80) { len = 0; break; }
            cp = cp << 6 | (p[i] & 0x3fu);
        }
        if (!len || (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff)) {
            snprintf(why, cap, "byte %d is not UTF-8 text; a value is UTF-8", (int)(p - (const unsigned char *)s) + 1);
            return why;
        }
        p += len;
    }
    return NULL;
}

/* Parses one value into cfg; on error writes what is valid into why. A string is taken as it is
   (inih has already stripped a file's spaces around it); numbers and choices may have spaces. */
static int mgt__set_value(mgt_config *cfg, int key, const char *value, char *why, size_t cap) {
    const mgt__key *k = &mgt__keys[key];
    char *field = (char *)cfg + k->offset, *end;
    if (k->type != MGT__T_STR) while (*value == ' ' || *value == '\t') value++;
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
        if (errno == ERANGE && isfinite(v)) errno = 0; /* a subnormal number, or below it: the nearest double */
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
        if (mgt__str_problem(value, why, cap)) return 0;
        memset(field, 0, MGT_STR_MAX); /* the same value is the same bytes */
        memcpy(field, value, strlen(value));
        return 1;
    }
}

MGTDEF const char *mgt_recompute_name(int mode) {
    static const char *const names[] = MGT_RECOMPUTE_NAMES;
    return mode >= 0 && mode < (int)(sizeof names / sizeof names[0]) ? names[mode] : "?";
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

/* Preset text goes through inih one physical line per reader call, so inih's line numbers are the
   file's. inih reads at most `num` bytes of a line (INI_MAX_LINE: 200 in Debian's build, which has
   neither INI_ALLOW_REALLOC nor INI_USE_STACK 0) and would read the rest as the next line; the
   reader reads each line whole instead and hands inih what it needs of it: a longer comment or
   blank line shortened (inih ignores it), a longer [section] header up to its ']', a longer
   key = value line as "key =" with the value kept aside for the handler (st->long_value), cut where
   inih cuts a value (mgt__ini_value). A NUL byte is refused: a preset is text. */
enum { MGT__NSECTIONS = 0
#define MGT__COUNT_SECTION(s) +1
    MGT_CONFIG_SECTIONS(MGT__COUNT_SECTION)
#undef MGT__COUNT_SECTION
};
static const char *const mgt__section_names[MGT__NSECTIONS] = {
#define MGT__SECTION_NAME(s) #s,
    MGT_CONFIG_SECTIONS(MGT__SECTION_NAME)
#undef MGT__SECTION_NAME
};
#define MGT__INI_LINE_MAX 65536 /* a longer line is refused: not a preset */

typedef struct mgt__ini_state {
    mgt_config *cfg;
    const char *text;        /* for string input */
    FILE *file;              /* for file input */
    int line;                /* line the reader returned last: inih calls the handler for it */
    mgt_result failed;       /* the error that ended the parse, MGT_OK while none */
    char *buf;               /* that line, whole */
    size_t cap;
    const char *long_value;  /* its value when inih got "key =" without it, else NULL */
    int last_key;            /* the key inih continues with an indented line (its prev_name); -1 after a header */
    int key_line[MGT_CONFIG_NKEYS];   /* the line of this text that set each key, 0 for none */
    int section_line[MGT__NSECTIONS]; /* the line of each section's first header, 0 for none */
    char base[MGT_STR_MAX];  /* a preset file's folder, with its '/': the paths in it are relative to it */
} mgt__ini_state;

static int mgt__ini_space(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; } /* isspace in "C" */
/* inih's scan for one of `chars` or an inline comment (a ';' after a space) */
static char *mgt__ini_find(char *s, const char *chars) {
    int was_space = 0;
    while (*s && !(chars && strchr(chars, *s)) && !(was_space && *s == ';')) { was_space = mgt__ini_space((unsigned char)*s); s++; }
    return s;
}
/* what inih makes of the text after a key's '=': up to an inline comment, spaces stripped */
static char *mgt__ini_value(char *v) {
    char *end = mgt__ini_find(v, NULL);
    *end = 0;
    while (end > v && mgt__ini_space((unsigned char)end[-1])) *--end = 0;
    while (mgt__ini_space((unsigned char)*v)) v++;
    return v;
}

/* the next physical line into st->buf, without its '\n': 1, or 0 at the end or on an error (st->failed) */
static int mgt__ini_getline(mgt__ini_state *st) {
    size_t n = 0;
    int c, any = 0;
    for (;;) {
        if (st->file) { if ((c = getc(st->file)) == EOF) break; }
        else { if (!*st->text) break; c = (unsigned char)*st->text++; }
        any = 1;
        if (c == '\n') break;
        if (c == 0) {
            st->failed = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: a NUL byte at column %zu: a preset is INI text (UTF-8); is this a binary or UTF-16 file?",
                                   st->cfg->path, st->line + 1, n + 1);
            return 0;
        }
        if (n + 1 >= st->cap) {
            size_t cap = st->cap ? 2 * st->cap : 256;
            char *p;
            if (cap > MGT__INI_LINE_MAX) {
                st->failed = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: a line of more than %d characters: not a preset", st->cfg->path, st->line + 1,
                                       MGT__INI_LINE_MAX);
                return 0;
            }
            if (!(p = (char *)MGT_REALLOC(st->buf, cap))) { st->failed = mgt__fail(MGT_ERROR_MEMORY, "%s: out of memory reading the preset", st->cfg->path); return 0; }
            st->buf = p;
            st->cap = cap;
        }
        st->buf[n++] = (char)c;
    }
    if (st->file && ferror(st->file)) {
        st->failed = mgt__fail(MGT_ERROR_IO, "%s:%d: cannot read the preset: %s", st->cfg->path, st->line + 1, strerror(errno));
        return 0;
    }
    if (!any) return 0;
    if (!st->buf) { /* a first line that is empty */
        if (!(st->buf = (char *)MGT_REALLOC(NULL, 256))) { st->failed = mgt__fail(MGT_ERROR_MEMORY, "%s: out of memory reading the preset", st->cfg->path); return 0; }
        st->cap = 256;
    }
    if (n > 0 && st->buf[n - 1] == '\r') n--; /* CRLF; inih strips it too */
    st->buf[n] = 0;
    return 1;
}

/* a [section] header, its name from s to close: an unknown section fails at its own line (inih
   reports keys, not sections); a repeated one is a warning naming both lines */
static int mgt__ini_section(mgt__ini_state *st, const char *s, const char *close) {
    char name[64], why[256];
    size_t len = (size_t)(close - s), n = len < sizeof name - 1 ? len : sizeof name - 1;
    int i;
    memcpy(name, s, n);
    name[n] = 0;
    for (i = 0; i < MGT__NSECTIONS; i++)
        if (len == strlen(mgt__section_names[i]) && !strncmp(s, mgt__section_names[i], len)) break;
    if (i == MGT__NSECTIONS) {
        mgt__suggest(name, "", why, sizeof why);
        st->failed = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: %s", st->cfg->path, st->line, why);
        return 0;
    }
    if (st->section_line[i])
        mgt__log(MGT_LOG_WARN, "%s:%d: [%s] again (first at %s:%d): the keys under both headers are read as one [%s] section", st->cfg->path, st->line,
                 name, st->cfg->path, st->section_line[i], name);
    else st->section_line[i] = st->line;
    return 1;
}

static char *mgt__ini_reader(char *str, int num, void *stream) {
    mgt__ini_state *st = (mgt__ini_state *)stream;
    size_t room = num > 2 ? (size_t)num - 2 : 0, hand; /* what fits beside '\n' and the terminator */
    char *line, *p;
    if (st->failed || !mgt__ini_getline(st)) return NULL;
    st->line++;
    st->long_value = NULL;
    line = p = st->buf;
    if (st->line == 1 && !strncmp(p, "\xEF\xBB\xBF", 3)) p += 3; /* a UTF-8 byte-order mark, which inih skips */
    while (mgt__ini_space((unsigned char)*p)) p++;
    hand = strlen(p); /* inih gets the line from p: without the indentation and the mark, which it skips */
    if (!*p || *p == ';' || *p == '#') { /* blank or a comment: inih reads nothing of it */
        if (hand > room) hand = room;
    } else if (p > line && st->last_key >= 0) { /* inih would continue the previous key's value */
        const mgt_key_info *k = &mgt__keys[st->last_key].info;
        st->failed = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: an indented line continues the value of [%s] %s (%s:%d) in INI; a value is one line: "
                               "remove the indentation", st->cfg->path, st->line, k->section, k->name, st->cfg->path, st->key_line[st->last_key]);
        return NULL;
    } else if (*p == '[') {
        char *close = mgt__ini_find(p + 1, "]");
        if (*close != ']') {
            st->failed = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: a [section] header without its ']' (before any ; comment)", st->cfg->path, st->line);
            return NULL;
        }
        if (!mgt__ini_section(st, p + 1, close)) return NULL;
        st->last_key = -1;
        hand = (size_t)(close + 1 - p); /* inih ignores what follows the ']'; a known name fits */
    } else {
        char *sep = mgt__ini_find(p, "=:");
        if (*sep != '=' && *sep != ':') {
            st->failed = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: not an INI line (expected [section], key = value or a ; comment)", st->cfg->path, st->line);
            return NULL;
        }
        if (hand > room) { /* too long for inih's buffer: the value goes around it */
            if ((size_t)(sep + 1 - p) > room) {
                *sep = 0;
                st->failed = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: a key name of %zu characters: not a key of mgt (see `mgt keys`)", st->cfg->path, st->line,
                                       strlen(p));
                return NULL;
            }
            st->long_value = mgt__ini_value(sep + 1);
            hand = (size_t)(sep + 1 - p);
        }
    }
    memcpy(str, p, hand);
    str[hand] = '\n';
    str[hand + 1] = 0;
    return str;
}

/* path, relative to the folder base (ending in '/', or "" for the working directory), as a path
   relative to the working directory; a leading "../" takes back a folder of base ("presets/" and
   "../data/x.bin" make "data/x.bin"). 0 when it does not fit cap. */
static int mgt__join_path(const char *base, const char *path, char *out, size_t cap) {
    size_t keep = strlen(base);
    if (!path[0] || path[0] == '/' || !base[0]) return (size_t)snprintf(out, cap, "%s", path) < cap;
    while (path[0] == '.' && path[1] == '/') path += 2; /* ./x is x */
    while (!strncmp(path, "../", 3) && keep > 0) {
        size_t start = keep - 1; /* the last folder of base: base[start..keep) is "name/" */
        while (start > 0 && base[start - 1] != '/') start--;
        if (keep - start == 3 && !strncmp(base + start, "../", 3)) break; /* base is above the working directory already */
        if (keep - start == 2 && !strncmp(base + start, "./", 2)) { keep = start; continue; }
        keep = start;
        path += 3;
    }
    return (size_t)snprintf(out, cap, "%.*s%s", (int)keep, base, path) < cap;
}

/* a preset file's path keys (every STR key) relative to its folder; data lists item by item */
static int mgt__preset_path(const mgt__ini_state *st, int key, const char *value, char *out, size_t cap) {
    const char *name = mgt__keys[key].info.name;
    size_t used = 0;
    int list = !strcmp(mgt__keys[key].info.section, "data") && (!strcmp(name, "train") || !strcmp(name, "val"));
    if (!strcmp(name, "metrics") && (!strcmp(value, "auto") || !strcmp(value, "none"))) return (size_t)snprintf(out, cap, "%s", value) < cap;
    out[0] = 0;
    for (;;) {
        char item[MGT_STR_MAX], joined[MGT_STR_MAX];
        size_t n = list ? strcspn(value, ",") : strlen(value), lead = 0;
        while (lead < n && (value[lead] == ' ' || value[lead] == '\t')) lead++;
        if (n - lead >= sizeof item) return 0;
        memcpy(item, value + lead, n - lead);
        item[n - lead] = 0;
        if (!mgt__join_path(st->base, item, joined, sizeof joined)) return 0;
        if ((size_t)snprintf(out + used, cap - used, "%s%s", used ? "," : "", joined) >= cap - used) return 0;
        used = strlen(out);
        if (!list || !value[n]) return 1;
        value += n + 1;
    }
}

static int mgt__ini_handler(void *user, const char *section, const char *name, const char *value) {
    mgt__ini_state *st = (mgt__ini_state *)user;
    char why[512];
    int key;
    if (st->failed) return 0;
    if (st->long_value) value = st->long_value;
    key = mgt__find_key(section, name);
    if (key < 0) {
        if (!section[0]) snprintf(why, sizeof why, "key '%s' outside a section; put it under its [section] (see `mgt keys`)", name);
        else mgt__suggest(section, name, why, sizeof why);
        st->failed = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: %s", st->cfg->path, st->line, why);
        return 0;
    }
    if (st->key_line[key]) {
        st->failed = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: [%s] %s is set again (first at %s:%d); a preset sets a key once: delete one of the two lines",
                               st->cfg->path, st->line, section, name, st->cfg->path, st->key_line[key]);
        return 0;
    }
    if (mgt__keys[key].type == MGT__T_STR && st->base[0]) {
        char path[MGT_STR_MAX];
        if (!mgt__preset_path(st, key, value, path, sizeof path)) {
            st->failed = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: [%s] %s: '%s' relative to the preset's folder %s is longer than %d characters", st->cfg->path,
                                   st->line, section, name, value, st->base, MGT_STR_MAX - 1);
            return 0;
        }
        value = path;
        if (!mgt__set_value(st->cfg, key, value, why, sizeof why)) {
            st->failed = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: [%s] %s: %s", st->cfg->path, st->line, section, name, why);
            return 0;
        }
    } else if (!mgt__set_value(st->cfg, key, value, why, sizeof why)) {
        st->failed = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: [%s] %s: %s", st->cfg->path, st->line, section, name, why);
        return 0;
    }
    st->cfg->line[key] = st->key_line[key] = st->line;
    st->last_key = key;
    return 1;
}

static mgt_result mgt__config_parse(mgt_config *cfg, mgt__ini_state *st, const char *name) {
    int rc;
    mgt__strlcpy(cfg->path, name, sizeof cfg->path);
    st->cfg = cfg;
    st->last_key = -1;
    rc = ini_parse_stream(mgt__ini_reader, st, mgt__ini_handler, st);
    MGT_FREE(st->buf);
    st->buf = NULL;
    if (st->failed) return st->failed;
    if (rc > 0) return mgt__fail(MGT_ERROR_CONFIG, "%s:%d: not an INI line (expected [section], key = value or a ; comment)", name, rc);
    if (rc < 0) return mgt__fail(MGT_ERROR_IO, "%s: cannot read the preset", name);
    return MGT_OK;
}

MGTDEF mgt_result mgt_config_load(mgt_config *cfg, const char *path) {
    mgt__ini_state st;
    mgt_result r;
    char why[128];
    int fd;
    if (!cfg || !path) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_config_load: cfg and path are required");
    memset(&st, 0, sizeof st);
    fd = mgt__open_regular(path, NULL, why, sizeof why);
    if (fd < 0) return mgt__fail(MGT_ERROR_CONFIG, "%s: cannot open the preset: %s (check the path; presets live in presets/)", path, why);
    if (strrchr(path, '/')) { /* its paths are relative to its folder, as most tools' config files' are */
        size_t n = (size_t)(strrchr(path, '/') - path) + 1;
        if (n >= sizeof st.base) { close(fd); return mgt__fail(MGT_ERROR_CONFIG, "%s: the preset's folder is longer than %d characters", path, MGT_STR_MAX - 1); }
        memcpy(st.base, path, n);
        st.base[n] = 0;
    }
    if (!(st.file = fdopen(fd, "r"))) {
        int e = errno;
        close(fd);
        return mgt__fail(MGT_ERROR_IO, "%s: cannot open the preset: %s", path, strerror(e));
    }
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

MGTDEF mgt_result mgt_config_set(mgt_config *cfg, const char *assignment) { return mgt_config_set_from(cfg, assignment, NULL); }

MGTDEF const char *mgt_config_where(const mgt_config *cfg, const char *section, const char *name, char *buf, size_t cap) {
    int key = cfg && section && name ? mgt__find_key(section, name) : -1;
    if (cap) buf[0] = 0;
    if (key >= 0 && cfg->line[key] != 0) mgt__where(cfg, key, buf, cap);
    return buf;
}

MGTDEF mgt_result mgt_config_set_from(mgt_config *cfg, const char *assignment, const char *option) {
    char section[64], name[64], why[512], by[80];
    const char *dot, *eq;
    int key, slot;
    if (!cfg || !assignment) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_config_set: cfg and assignment are required");
    if (option) snprintf(by, sizeof by, "%s (%s)", option, assignment);
    else snprintf(by, sizeof by, "--set %.70s", assignment);
    dot = strchr(assignment, '.');
    eq = strchr(assignment, '=');
    if (!dot || !eq || dot > eq || (size_t)(dot - assignment) >= sizeof section || (size_t)(eq - dot - 1) >= sizeof name)
        return mgt__fail(MGT_ERROR_CONFIG, "%s: expected section.key=value, for example --set train.steps=100", by);
    memcpy(section, assignment, (size_t)(dot - assignment));
    section[dot - assignment] = 0;
    memcpy(name, dot + 1, (size_t)(eq - dot - 1));
    name[eq - dot - 1] = 0;
    key = mgt__find_key(section, name);
    if (key < 0) {
        mgt__suggest(section, name, why, sizeof why);
        return mgt__fail(MGT_ERROR_CONFIG, "%s: %s", by, why);
    }
    if (!mgt__set_value(cfg, key, eq + 1, why, sizeof why))
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [%s] %s: %s", by, section, name, why);
    cfg->line[key] = -1;
    if (!option) return MGT_OK;
    for (slot = 0; slot < 3 && cfg->option[slot][0] && strcmp(cfg->option[slot], option); slot++) {} /* the last slot is reused */
    mgt__strlcpy(cfg->option[slot], option, sizeof cfg->option[slot]);
    cfg->line[key] = -3 - slot;
    return MGT_OK;
}

#define MGT__KEY(sec, name) mgt__find_key(#sec, #name)

MGTDEF int mgt_config_ranks(const mgt_config *cfg) { return cfg->parallel.dp * cfg->parallel.cp * cfg->parallel.tp * cfg->parallel.pp; }

MGTDEF mgt_result mgt_config_validate(const mgt_config *cfg) {
    char w1[300], w2[300], w3[300], w4[300];
    int tok_vocab;
    if (!cfg) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_config_validate: cfg is required");
    { /* each key as a file or --set could give it (a program may set fields directly) */
        int i;
        for (i = 0; i < MGT_CONFIG_NKEYS; i++) {
            mgt_config copy;
            char text[MGT_STR_MAX + 64], why[512];
            const mgt__key *k = &mgt__keys[i];
            if (k->type == MGT__T_STR && !memchr((const char *)cfg + k->offset, 0, MGT_STR_MAX))
                return mgt__fail(MGT_ERROR_CONFIG, "%s: [%s] %s: not a string (no terminating NUL in %d bytes)",
                                 cfg->line[i] ? mgt__where(cfg, i, w1, sizeof w1) : "set by the program", k->info.section, k->info.name, MGT_STR_MAX);
            mgt_config_value_string(cfg, i, text, sizeof text);
            copy = *cfg;
            if (!mgt__set_value(&copy, i, text, why, sizeof why)) /* a default is valid: line 0 here is a program's assignment */
                return mgt__fail(MGT_ERROR_CONFIG, "%s: [%s] %s: %s", cfg->line[i] ? mgt__where(cfg, i, w1, sizeof w1) : "set by the program",
                                 k->info.section, k->info.name, why);
        }
    }
    if (cfg->parallel.cp > 1 && mgt__layout_unresolved(cfg))
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] cp = %d with layout = auto (from %s): the layout search does not choose context parallelism, nor keep "
                         "it; set layout = manual with the layout you want, or cp = 1", mgt__where(cfg, MGT__KEY(parallel, cp), w1, sizeof w1),
                         cfg->parallel.cp, mgt__where(cfg, MGT__KEY(parallel, layout), w2, sizeof w2));
    if (mgt__layout_unresolved(cfg)) { /* the keys auto chooses are checked once chosen: here those set (pinned) against the rest */
        mgt_config pinned = *cfg;
        int k;
        for (k = 0; k < MGT__LAYOUT_KEYS; k++) {
            int key = mgt__find_key(mgt__layout_keys[k][0], mgt__layout_keys[k][1]);
            if (mgt__layout_pinned(cfg, key)) continue;
            if (k == 0) pinned.parallel.dp = 1;
            else if (k == 1) pinned.parallel.tp = 1;
            else if (k == 2) pinned.parallel.pp = 1;
            else if (k == 3) pinned.parallel.zero = 0;
            else if (k == 4) pinned.parallel.pp_schedule = 0;
            else if (k == 5) pinned.train.micro_batch = 1;
            else pinned.train.recompute = MGT_RECOMPUTE_NONE;
        }
        pinned.parallel.sp = 0; /* its rules are of tp and the micro-batch's rows: checked once they are chosen */
        pinned.parallel.layout = MGT_LAYOUT_MANUAL;
        return mgt_config_validate(&pinned);
    }
    {
        int e;
        if (frexp(cfg->precision.loss_scale, &e) != 0.5) /* a power of two scales and unscales exactly */
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [precision] loss_scale = %g is not a power of two; scaling by one is exact: use for example 65536 (2^16)",
                             mgt__where(cfg, MGT__KEY(precision, loss_scale), w1, sizeof w1), cfg->precision.loss_scale);
    }
    if (cfg->model.d_model % cfg->model.n_head) {
        int a = MGT__KEY(model, n_head), b = MGT__KEY(model, d_model);
        mgt__order_keys(cfg, &a, &b);
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [model] d_model = %d does not divide by n_head = %d (d_model from %s, n_head from %s); pick n_head among the divisors of d_model",
                         mgt__where(cfg, a, w1, sizeof w1), cfg->model.d_model, cfg->model.n_head, mgt__where(cfg, MGT__KEY(model, d_model), w2, sizeof w2),
                         mgt__where(cfg, MGT__KEY(model, n_head), w3, sizeof w3));
    }
    if ((long long)cfg->train.global_batch % ((long long)cfg->train.micro_batch * cfg->parallel.dp)) { /* 1e6 x 4096 does not fit an int */
        int keys[3], k, primary;
        keys[0] = MGT__KEY(parallel, dp); keys[1] = MGT__KEY(train, global_batch); keys[2] = MGT__KEY(train, micro_batch);
        int per = cfg->train.global_batch % cfg->parallel.dp ? 0 : cfg->train.global_batch / cfg->parallel.dp, m = 0;
        char keep[160] = "";
        for (primary = keys[1], k = 2; k >= 0; k--) if (cfg->line[keys[k]] != 0) primary = keys[k]; /* a key the user set */
        for (m = per && cfg->train.micro_batch < per ? cfg->train.micro_batch : per; m > 1 && per % m; m--) {}
        if (per) /* the micro-batch that keeps the batch, and with it the training */
            snprintf(keep, sizeof keep, ", or keep the batch with [train] micro_batch = %d (%d micro-batch%s of %d on each of the %d DP ranks)", m, per / m,
                     per / m == 1 ? "" : "es", m, cfg->parallel.dp);
        else { /* no micro-batch keeps it: the data-parallel sizes that would */
            int d, shown = 0;
            snprintf(keep, sizeof keep, ", or keep the batch with a dp that divides %d:", cfg->train.global_batch);
            for (d = 1; d <= cfg->train.global_batch && shown < 8; d++)
                if (cfg->train.global_batch % d == 0) snprintf(keep + strlen(keep), sizeof keep - strlen(keep), "%s %d", shown++ ? "," : "", d);
        }
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [train] global_batch = %d is not a multiple of micro_batch x dp = %d x %d (global_batch from %s, micro_batch from %s, dp from %s); make global_batch a multiple of %lld%s",
                         mgt__where(cfg, primary, w1, sizeof w1), cfg->train.global_batch, cfg->train.micro_batch, cfg->parallel.dp,
                         mgt__where(cfg, keys[1], w2, sizeof w2), mgt__where(cfg, keys[2], w3, sizeof w3), mgt__where(cfg, keys[0], w4, sizeof w4),
                         (long long)cfg->train.micro_batch * cfg->parallel.dp, keep);
    }
    if (cfg->model.n_head % cfg->parallel.tp) {
        int a = MGT__KEY(parallel, tp), b = MGT__KEY(model, n_head);
        mgt__order_keys(cfg, &a, &b);
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] tp = %d does not divide n_head = %d (tp from %s, n_head from %s); tensor parallelism splits the heads, so pick tp among the divisors of n_head",
                         mgt__where(cfg, a, w1, sizeof w1), cfg->parallel.tp, cfg->model.n_head, mgt__where(cfg, MGT__KEY(parallel, tp), w2, sizeof w2),
                         mgt__where(cfg, MGT__KEY(model, n_head), w3, sizeof w3));
    }
    {
        int nkv = cfg->model.n_kv_head ? cfg->model.n_kv_head : cfg->model.n_head, dff = cfg->model.d_ff ? cfg->model.d_ff : 4 * cfg->model.d_model;
        if (cfg->model.n_head % nkv)
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [model] n_kv_head = %d does not divide n_head = %d; each key/value head serves n_head / n_kv_head query heads",
                             mgt__where(cfg, MGT__KEY(model, n_kv_head), w1, sizeof w1), nkv, cfg->model.n_head);
        if (nkv % cfg->parallel.tp && cfg->parallel.tp % nkv) { /* neither split nor replicated (see mgt__kv_local) */
            char valid[200] = "";
            int t;
            for (t = 1; t <= cfg->model.n_head; t++)
                if (cfg->model.n_head % t == 0 && (nkv % t == 0 || t % nkv == 0)) mgt__catf(valid, sizeof valid, "%s%d", valid[0] ? ", " : "", t);
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] tp = %d with n_kv_head = %d (n_kv_head from %s): tensor parallelism splits the key/value heads "
                             "(tp divides n_kv_head) or, when tp is a multiple of n_kv_head, gives each rank the one its query heads read; valid tp "
                             "for n_head = %d: %s", mgt__where(cfg, MGT__KEY(parallel, tp), w1, sizeof w1), cfg->parallel.tp, nkv,
                             mgt__where(cfg, MGT__KEY(model, n_kv_head), w2, sizeof w2), cfg->model.n_head, valid);
        }
        if (dff % cfg->parallel.tp)
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] tp = %d does not divide the MLP's d_ff = %d (d_ff from %s); tensor parallelism splits its hidden units",
                             mgt__where(cfg, MGT__KEY(parallel, tp), w1, sizeof w1), cfg->parallel.tp, dff, mgt__where(cfg, MGT__KEY(model, d_ff), w2, sizeof w2));
        if (cfg->model.positions == MGT_POSITIONS_ROPE && (cfg->model.d_model / cfg->model.n_head) % 2)
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [model] positions = rope rotates pairs of channels, but the head size d_model / n_head = %d is odd",
                             mgt__where(cfg, MGT__KEY(model, positions), w1, sizeof w1), cfg->model.d_model / cfg->model.n_head);
        if (cfg->model.norm == MGT_NORM_LAYERNORM && cfg->model.norm_eps != 1e-5)
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [model] norm_eps = %g with norm = layernorm; LayerNorm's epsilon is fixed at 1e-5 (GPT-2's), only rmsnorm takes another",
                             mgt__where(cfg, MGT__KEY(model, norm_eps), w1, sizeof w1), cfg->model.norm_eps);
    }
    if (cfg->parallel.sp && cfg->parallel.tp == 1)
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] sp = 1 with tp = 1 (tp from %s): sequence parallelism splits the rows between the tensor-parallel "
                         "layers over the TP ranks, so it needs tp > 1; set parallel.tp to 2 or more, or parallel.sp = 0",
                         mgt__where(cfg, MGT__KEY(parallel, sp), w1, sizeof w1), mgt__where(cfg, MGT__KEY(parallel, tp), w2, sizeof w2));
    if (cfg->parallel.sp && ((long long)cfg->train.micro_batch * (cfg->model.seq_len / cfg->parallel.cp)) % cfg->parallel.tp)
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] sp = 1 with tp = %d: the micro-batch's micro_batch x seq_len = %d x %d = %lld rows do not divide "
                         "by tp (micro_batch from %s, seq_len from %s); each TP rank holds an equal share of the rows: make micro_batch x seq_len a "
                         "multiple of %d, or set parallel.sp = 0", mgt__where(cfg, MGT__KEY(parallel, sp), w1, sizeof w1), cfg->parallel.tp,
                         cfg->train.micro_batch, cfg->model.seq_len, (long long)cfg->train.micro_batch * cfg->model.seq_len,
                         mgt__where(cfg, MGT__KEY(train, micro_batch), w2, sizeof w2), mgt__where(cfg, MGT__KEY(model, seq_len), w3, sizeof w3), cfg->parallel.tp);
    if (cfg->parallel.cp > 1 && cfg->model.seq_len % (2 * cfg->parallel.cp))
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] cp = %d with seq_len = %d (from %s): context parallelism cuts the sequence into 2 cp = %d chunks of "
                         "equal size (each rank takes chunk i and its mirror 2 cp - 1 - i, for an equal share of causal attention); make seq_len a "
                         "multiple of %d, or choose cp so that 2 cp divides it", mgt__where(cfg, MGT__KEY(parallel, cp), w1, sizeof w1), cfg->parallel.cp,
                         cfg->model.seq_len, mgt__where(cfg, MGT__KEY(model, seq_len), w2, sizeof w2), 2 * cfg->parallel.cp, 2 * cfg->parallel.cp);
    if (cfg->parallel.pp > cfg->model.n_layer || cfg->parallel.pp > 256) {
        int a = MGT__KEY(parallel, pp), b = MGT__KEY(model, n_layer);
        mgt__order_keys(cfg, &a, &b);
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] pp = %d stages for n_layer = %d blocks (pp from %s); every stage needs a block: use pp <= min(n_layer, 256)",
                         mgt__where(cfg, a, w1, sizeof w1), cfg->parallel.pp, cfg->model.n_layer, mgt__where(cfg, MGT__KEY(parallel, pp), w2, sizeof w2));
    }
    if (cfg->parallel.pp_virtual > 1) { /* interleaved 1F1B (mgt__pipeline_actions): what its chunks and groups of micro-batches need */
        int V = cfg->parallel.pp_virtual, P = cfg->parallel.pp, L = cfg->model.n_layer, M = cfg->train.global_batch / (cfg->train.micro_batch * cfg->parallel.dp);
        const char *at = mgt__where(cfg, MGT__KEY(parallel, pp_virtual), w1, sizeof w1);
        if (P == 1)
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] pp_virtual = %d with pp = 1: a stage's chunks interleave with the other stages'; set pp_virtual = 1, or pp >= 2",
                             at, V);
        if (cfg->parallel.pp_schedule == 1)
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] pp_virtual = %d with pp_schedule = gpipe: the chunks interleave the 1f1b schedule; set pp_schedule = 1f1b, or pp_virtual = 1",
                             at, V);
        if (L % (P * V)) {
            char valid[200] = "";
            int v;
            for (v = 1; v <= 64 && P * v <= L; v++)
                if (L % (P * v) == 0) mgt__catf(valid, sizeof valid, "%s%d", valid[0] ? ", " : "", v);
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] pp_virtual = %d with pp = %d cuts n_layer = %d blocks into %d chunks of equal size; make n_layer a multiple of "
                             "pp x pp_virtual = %d, or set pp_virtual to one of: %s", at, V, P, L, P * V, P * V, valid);
        }
        if (M % P)
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] pp_virtual = %d runs micro-batches in groups of pp = %d, but a step has global_batch / (micro_batch x dp) = "
                             "%d of them; make [train] global_batch a multiple of micro_batch x dp x pp = %lld, or set pp_virtual = 1",
                             at, V, P, M, (long long)cfg->train.micro_batch * cfg->parallel.dp * P);
    }
    if (cfg->parallel.pp_schedule == 2 /* zb */ && cfg->parallel.pp > 1) { /* what the split backward (src/pipeline.c) does not do */
        const char *at = mgt__where(cfg, MGT__KEY(parallel, pp_schedule), w1, sizeof w1);
        if (cfg->parallel.pp_virtual > 1)
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] pp_schedule = zb with pp_virtual = %d: the zero-bubble schedule runs one chunk per stage; set pp_virtual = 1, "
                             "or pp_schedule = 1f1b for interleaving", at, cfg->parallel.pp_virtual);
        if (cfg->train.recompute == MGT_RECOMPUTE_FULL)
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] pp_schedule = zb with [train] recompute = full: the weight-gradient pass reads every block's matmul inputs, "
                             "which full recompute would rebuild a second time; set recompute = selective or none, or pp_schedule = 1f1b", at);
        if (cfg->parallel.zero >= 2)
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] pp_schedule = zb with zero = %d: a block's gradients are complete only after its deferred weight-gradient pass, "
                             "but ZeRO %d reduce-scatters each block's after its backward; set zero = 0 or 1, or pp_schedule = 1f1b", at, cfg->parallel.zero, cfg->parallel.zero);
    }
    if ((long long)cfg->parallel.dp * cfg->parallel.cp * cfg->parallel.tp * cfg->parallel.pp > 4096)
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] dp x cp x tp x pp = %lld ranks; at most 4096", mgt__where(cfg, MGT__KEY(parallel, dp), w1, sizeof w1),
                         (long long)cfg->parallel.dp * cfg->parallel.cp * cfg->parallel.tp * cfg->parallel.pp);
    if (cfg->train.min_lr > cfg->train.lr)
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [train] min_lr = %g is above lr = %g; the schedule decays from lr down to min_lr",
                         mgt__where(cfg, MGT__KEY(train, min_lr), w1, sizeof w1), cfg->train.min_lr, cfg->train.lr);
    if (cfg->data.tokenizer == MGT_TOKENIZER_HF && !cfg->data.tokenizer_json[0])
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [data] tokenizer = hf needs [data] tokenizer_json, the path of a Hugging Face tokenizer.json",
                         mgt__where(cfg, MGT__KEY(data, tokenizer), w1, sizeof w1));
    /* hf's vocabulary is in its file, which mgt.h does not read: `mgt sample` compares the two */
    tok_vocab = cfg->data.tokenizer == MGT_TOKENIZER_GPT2 ? 50257 : cfg->data.tokenizer == MGT_TOKENIZER_HF ? 2 : 256;
    if (cfg->model.vocab_size < tok_vocab && cfg->line[MGT__KEY(model, vocab_size)] == MGT__FROM_INIT)
        return mgt__fail(MGT_ERROR_CONFIG, "[model] init %s has %d tokens, fewer than the %s tokenizer's %d; set [data] tokenizer to the tokenizer the "
                         "model was trained with", cfg->model.init, cfg->model.vocab_size, cfg->data.tokenizer == MGT_TOKENIZER_GPT2 ? "gpt2" : "byte", tok_vocab);
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
/* ==== end src/config.c ==== */
/* ==== begin src/pool.c ==== */
#line 1 "src/pool.c"
/* src/pool.c - the CPUs a process may use, the thread pool of a rank; bf16 and fp16 conversions */
/* the CPUs this process may run on: its affinity (Cpus_allowed_list, as taskset, numactl and
   mpirun's binding set it), else the online ones; read from /proc so that no feature macro is needed */
MGTDEF int mgt_cpu_count(void) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int n = 0;
    char line[4096];
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f)) {
        const char *p = line + strlen("Cpus_allowed_list:");
        if (strncmp(line, "Cpus_allowed_list:", strlen("Cpus_allowed_list:"))) continue;
        while (*p) { /* "0-3,8,10-11" */
            char *end;
            long lo = strtol(p, &end, 10), hi = lo;
            if (end == p) { p++; continue; }
            p = end;
            if (*p == '-') { hi = strtol(p + 1, &end, 10); p = end; }
            if (hi >= lo) n += (int)(hi - lo + 1);
        }
        break;
    }
    if (f) fclose(f);
    if (n < 1 || (online >= 1 && n > online)) n = online < 1 ? 1 : (int)online;
    return n;
}

/* ---- thread pool: the rank's thread plus helpers, one parallel region at a time --------------- */

typedef void (*mgt__task_fn)(void *ctx, int tid, int nthreads);

/* A region costs two handovers: the workers learn of it, the caller learns they are done. Through
   a futex each is a sleep and a wake-up, 5-20 us, which small models pay a few hundred times a
   step (the nanoGPT shape's 40 ms step spent a fifth of its time there). So a waiting thread first
   spins on the region's counter for about MGT__POOL_SPIN_US and only then sleeps; it spins only
   while the process's pools have no more threads than it has cores (mgt__pool_threads), and
   yields between checks, so that spinning does not keep a core from a thread with work (another
   process's, when several share the machine). */
#define MGT__POOL_SPIN_US 50.0
static int mgt__pool_threads; /* threads of every live pool (the calling threads counted), atomically */
static int mgt__pool_cores;   /* mgt_cpu_count(), read when the first pool starts */

typedef struct mgt__pool {
    int n; /* threads including the calling one */
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    mgt__task_fn fn;
    void *ctx;
    unsigned long generation; /* regions started: atomic; fn and ctx are written before it moves */
    int pending, quit;        /* workers still in the region; atomic */
    int sleepers, caller_asleep; /* under mu, read atomically: who needs a futex wake-up */
} mgt__pool;

typedef struct mgt__worker_arg { mgt__pool *pool; int tid; } mgt__worker_arg;

static void mgt__pool_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}
/* spins, when spinning is allowed, for about MGT__POOL_SPIN_US while the generation is `seen` (a
   worker) or workers are pending (the caller); 1 when that changed, 0 when the thread should sleep */
static int mgt__pool_spin(mgt__pool *p, const unsigned long *gen, unsigned long seen, const int *pending) {
    double until;
    int i;
    if (__atomic_load_n(&mgt__pool_threads, __ATOMIC_RELAXED) > __atomic_load_n(&mgt__pool_cores, __ATOMIC_RELAXED)) return 0;
    until = mgt_now() + MGT__POOL_SPIN_US * 1e-6;
    for (;;) {
        for (i = 0; i < 64; i++) {
            if (gen ? __atomic_load_n(gen, __ATOMIC_ACQUIRE) != seen || __atomic_load_n(&p->quit, __ATOMIC_ACQUIRE)
                    : __atomic_load_n(pending, __ATOMIC_ACQUIRE) == 0)
                return 1;
            mgt__pool_pause();
        }
        if (mgt_now() > until) return 0;
        sched_yield(); /* a runnable thread of this core (another process's, when processes share the cores) goes first */
    }
}

static void *mgt__worker(void *arg) {
    mgt__worker_arg *wa = (mgt__worker_arg *)arg;
    mgt__pool *p = wa->pool;
    int tid = wa->tid;
    unsigned long seen = 0;
    MGT_FREE(wa);
    for (;;) {
        mgt__task_fn fn;
        void *ctx;
        if (!mgt__pool_spin(p, &p->generation, seen, NULL)) {
            pthread_mutex_lock(&p->mu);
            /* sleepers, then the counter (both sequentially consistent), against the caller's
               counter, then sleepers: one of the two sees the other, so no wake-up is lost */
            __atomic_add_fetch(&p->sleepers, 1, __ATOMIC_SEQ_CST);
            while (__atomic_load_n(&p->generation, __ATOMIC_SEQ_CST) == seen && !__atomic_load_n(&p->quit, __ATOMIC_SEQ_CST))
                pthread_cond_wait(&p->wake, &p->mu);
            __atomic_sub_fetch(&p->sleepers, 1, __ATOMIC_SEQ_CST);
            pthread_mutex_unlock(&p->mu);
        }
        if (__atomic_load_n(&p->quit, __ATOMIC_ACQUIRE)) return NULL;
        seen = __atomic_load_n(&p->generation, __ATOMIC_ACQUIRE);
        fn = p->fn;
        ctx = p->ctx;
        fn(ctx, tid, p->n);
        if (__atomic_sub_fetch(&p->pending, 1, __ATOMIC_SEQ_CST) == 0 && __atomic_load_n(&p->caller_asleep, __ATOMIC_SEQ_CST)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
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
    if (!__atomic_load_n(&mgt__pool_cores, __ATOMIC_RELAXED)) __atomic_store_n(&mgt__pool_cores, mgt_cpu_count(), __ATOMIC_RELAXED);
    __atomic_add_fetch(&mgt__pool_threads, p->n, __ATOMIC_RELAXED);
    for (i = 1; i < p->n; i++) {
        mgt__worker_arg *wa = (mgt__worker_arg *)MGT_MALLOC(sizeof *wa);
        if (!wa) return 0;
        wa->pool = p;
        wa->tid = i;
        if (pthread_create(&p->threads[i], NULL, mgt__worker, wa)) {
            MGT_FREE(wa);
            __atomic_sub_fetch(&mgt__pool_threads, p->n - i, __ATOMIC_RELAXED);
            p->n = i;
            return 0;
        }
    }
    return 1;
}

static void mgt__pool_destroy(mgt__pool *p) {
    int i;
    if (!p->threads) return;
    pthread_mutex_lock(&p->mu);
    __atomic_store_n(&p->quit, 1, __ATOMIC_SEQ_CST);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    __atomic_sub_fetch(&mgt__pool_threads, p->n, __ATOMIC_RELAXED);
    MGT_FREE(p->threads);
    p->threads = NULL;
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
}

/* runs fn(ctx, tid, n) on every thread of the pool and returns when all are done */
static void mgt__pool_run(mgt__pool *p, mgt__task_fn fn, void *ctx) {
    if (p->n == 1) { fn(ctx, 0, 1); return; }
    p->fn = fn;
    p->ctx = ctx;
    __atomic_store_n(&p->pending, p->n - 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&p->generation, 1, __ATOMIC_SEQ_CST); /* releases fn, ctx and pending */
    if (__atomic_load_n(&p->sleepers, __ATOMIC_SEQ_CST)) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    fn(ctx, 0, p->n);
    if (!mgt__pool_spin(p, NULL, 0, &p->pending)) {
        pthread_mutex_lock(&p->mu);
        __atomic_store_n(&p->caller_asleep, 1, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&p->pending, __ATOMIC_SEQ_CST)) pthread_cond_wait(&p->done, &p->mu);
        __atomic_store_n(&p->caller_asleep, 0, __ATOMIC_SEQ_CST);
        pthread_mutex_unlock(&p->mu);
    }
}

/* [lo, hi) of n items for thread tid of nth, in chunks that are multiples of align */
static void mgt__span(size_t n, int tid, int nth, size_t align, size_t *lo, size_t *hi) {
    size_t chunks = (n + align - 1) / align, per = chunks / (size_t)nth, extra = chunks % (size_t)nth;
    size_t c0 = (size_t)tid * per + ((size_t)tid < extra ? (size_t)tid : extra);
    size_t c1 = c0 + per + ((size_t)tid < extra ? 1 : 0);
    *lo = c0 * align < n ? c0 * align : n;
    *hi = c1 * align < n ? c1 * align : n;
}

/* ---- 16-bit floats: bf16 (fp32 with the low 16 bits dropped) and IEEE fp16, rounded to nearest even ---- */

static float mgt__bits_f32(uint32_t x) { float f; memcpy(&f, &x, 4); return f; }
static uint32_t mgt__f32_bits(float f) { uint32_t x; memcpy(&x, &f, 4); return x; }
static float mgt__bf16_to_f32(uint16_t h) { return mgt__bits_f32((uint32_t)h << 16); }
static uint16_t mgt__f32_to_bf16(float f) { /* round to nearest even; NaN stays NaN */
    uint32_t x = mgt__f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
static float mgt__f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f) return mgt__bits_f32(sign | 0x7f800000u | (mant << 13));
    if (exp) return mgt__bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
    return mgt__bits_f32(sign | mgt__f32_bits((float)mant * (1.0f / 16777216.0f))); /* subnormal */
}
static uint16_t mgt__f32_to_f16(float f) { /* round to nearest even, overflow to inf, NaN stays NaN */
    uint32_t x = mgt__f32_bits(f), sign = (x >> 16) & 0x8000u, o;
    x &= 0x7fffffffu;
    if (x >= 0x47800000u) { /* 65536 and up, inf, NaN */
        o = x > 0x7f800000u ? 0x7e00u : 0x7c00u;
    } else if (x < 0x38800000u) { /* below 2^-14: subnormal or zero; the fp32 addition rounds */
        const uint32_t magic = 126u << 23; /* 0.5: aligns the 10 mantissa bits at the bottom */
        o = mgt__f32_bits(mgt__bits_f32(x) + mgt__bits_f32(magic)) - magic;
    } else { /* normal; a carry out of the mantissa rounds up to the next binade or to inf */
        x += 0xfffu + ((x >> 13) & 1u) - (112u << 23);
        o = x >> 13;
    }
    return (uint16_t)(o | sign);
}
/* ==== end src/pool.c ==== */
/* ==== begin src/blas.c ==== */
#line 1 "src/blas.c"
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
/* ==== end src/blas.c ==== */
/* ==== begin src/backend_cpu.c ==== */
#line 1 "src/backend_cpu.c"
/* src/backend_cpu.c - the CPU backend: the ops as plain loops over the pool's threads, GEMMs
   through src/blas.c, bf16/fp16 storage */
/* ---- the backend table ------------------------------------------------------------------------ */

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
    float *wide;         /* 16-bit storage: fp32 copies of one op's operands (see mgt__widen_floats) */
    size_t wide_floats, wide_used;
    const mgt_onednn_api *onednn; /* bf16 storage: GEMMs on the bf16 tensors themselves (NULL: widened to sgemm) */
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
    void *copy; /* adamw: the parameters' 16-bit compute copy (n[0] its dtype), or NULL */
} mgt__args;

/* exp(x) for x <= 88: 2^k * e^r with |r| <= ln2/2 and a degree-7 Taylor polynomial (relative error
   below 2e-8 before rounding). Branch-free and without libm calls, so that loops calling it
   vectorise (libm's expf and floorf would not, short of -ffast-math). */
static float mgt__expf(float x) {
    float k, r, p, scale, c;
    int32_t bits;
    c = x >= -87.0f ? x : -87.0f; /* a NaN becomes -87 here, so the int conversion below is defined... */
    c = c <= 88.0f ? c : 88.0f;
    k = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest: 1.5 * 2^23 trick */
    r = c - k * 0.693145751953125f - k * 1.428606765330187e-06f;
    p = 1.0f + r * (1.0f + r * (0.5f + r * (1.6666667e-1f + r * (4.1666668e-2f + r * (8.3333338e-3f + r * (1.3888889e-3f + r * 1.9841270e-4f))))));
    bits = (int32_t)((uint32_t)((int32_t)k + 127) << 23);
    memcpy(&scale, &bits, sizeof scale);
    return x == x ? p * scale : x; /* ...and comes back as the NaN it was */
}
static float mgt__tanhf(float x) { return 1.0f - 2.0f / (mgt__expf(2.0f * x) + 1.0f); }

/* C = alpha op(A) op(B) + beta C (+ bias on each row), split over the backend's pool */
static void mgt__gemm(mgt_backend *be, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                      const float *Bm, int ldb, float beta, float *Cm, int ldc, const float *bias) {
    mgt__gemm_args g;
    g.ta = ta; g.tb = tb; g.M = M; g.N = N; g.K = K; g.lda = lda; g.ldb = ldb; g.ldc = ldc;
    g.alpha = alpha; g.beta = bias ? 1.0f : beta; g.A = A; g.B = Bm; g.C = Cm; g.bias = bias;
    mgt__pool_run(MGT__POOL(be), mgt__gemm_task, &g);
}

/* tensors start on a cache line: MGT_MALLOC's block, 64 bytes more, and the block's address kept
   just below the aligned one (for MGT_FREE) */
static void *mgt__cpu_alloc(mgt_backend *be, size_t bytes, int category) {
    size_t rounded = (bytes + 63) & ~(size_t)63;
    char *raw, *p;
    if (bytes > (size_t)-1 - 64 - 2 * sizeof(void *)) return NULL;
    raw = (char *)MGT_MALLOC((rounded ? rounded : 64) + 64 + sizeof(void *));
    if (!raw) return NULL;
    p = (char *)(((uintptr_t)raw + sizeof(void *) + 63) & ~(uintptr_t)63);
    memcpy(p - sizeof(void *), &raw, sizeof raw);
    memset(p, 0, rounded);
    mgt__account(be, (long long)bytes, category);
    return p;
}
static void mgt__cpu_free(mgt_backend *be, void *ptr, size_t bytes, int category) {
    void *raw;
    if (!ptr) return;
    memcpy(&raw, (char *)ptr - sizeof(void *), sizeof raw);
    MGT_FREE(raw);
    mgt__account(be, -(long long)bytes, category);
}
static void mgt__cpu_copy(mgt_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    if (bytes) memcpy(dst, src, bytes);
}

/* encoder: out (B,T,C) = wte[token - vocab_start] (tokens of this vocabulary slice) + wpe[t] */
static void mgt__encoder_fwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int T = a->n[1], C = a->n[2], v0 = a->n[3], rows = a->n[4], c;
    size_t lo, hi, r;
    mgt__span((size_t)a->n[0] * (size_t)T, tid, nth, 1, &lo, &hi);
    for (r = lo; r < hi; r++) {
        int v = a->ints[r] - v0;
        const float *e = v >= 0 && v < rows ? a->in[0] + (size_t)v * (size_t)C : NULL, *p = a->in[1] ? a->in[1] + (r % (size_t)T) * (size_t)C : NULL;
        float *o = a->out[0] + r * (size_t)C;
        for (c = 0; c < C; c++) o[c] = (e ? e[c] : 0.0f) + (p ? p[c] : 0.0f);
    }
}
static void mgt__cpu_encoder_forward(mgt_backend *be, float *out, const int *tokens, const float *wte, int vocab_start, int vocab_rows,
                                     const float *wpe, int B, int T, int C) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = out; a.in[0] = wte; a.in[1] = wpe; a.ints = tokens; a.n[0] = B; a.n[1] = T; a.n[2] = C; a.n[3] = vocab_start; a.n[4] = vocab_rows;
    mgt__pool_run(MGT__POOL(be), mgt__encoder_fwd_task, &a);
}
/* split by channels, so no two threads touch one gradient element and the sum order is fixed */
static void mgt__encoder_bwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int B = a->n[0], T = a->n[1], C = a->n[2], v0 = a->n[3], rows = a->n[4], b, t;
    size_t lo, hi, c;
    mgt__span((size_t)C, tid, nth, 16, &lo, &hi);
    for (b = 0; b < B; b++)
        for (t = 0; t < T; t++) {
            const float *d = a->in[0] + ((size_t)b * (size_t)T + (size_t)t) * (size_t)C;
            int v = a->ints[b * T + t] - v0;
            if (v >= 0 && v < rows) {
                float *dw = a->out[0] + (size_t)v * (size_t)C;
                for (c = lo; c < hi; c++) dw[c] += d[c];
            }
            if (a->out[1]) {
                float *dp = a->out[1] + (size_t)t * (size_t)C;
                for (c = lo; c < hi; c++) dp[c] += d[c];
            }
        }
}
static void mgt__cpu_encoder_backward(mgt_backend *be, float *dwte, float *dwpe, const float *dout, const int *tokens, int vocab_start,
                                      int vocab_rows, int B, int T, int C) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = dwte; a.out[1] = dwpe; a.in[0] = dout; a.ints = tokens; a.n[0] = B; a.n[1] = T; a.n[2] = C; a.n[3] = vocab_start; a.n[4] = vocab_rows;
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
/* the largest of n floats in 16 independent lanes: a maximum does not depend on the order, so this
   is the scalar loop's result without its chain of dependent compares */
static float mgt__max16(const float *x, int n) {
    float acc[16], m = -INFINITY;
    int i, j;
    for (j = 0; j < 16; j++) acc[j] = -INFINITY;
    for (i = 0; i + 16 <= n; i += 16)
        for (j = 0; j < 16; j++) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    for (j = 0; j < 16; j++) m = acc[j] > m ? acc[j] : m;
    return m;
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
/* dbias (OC) += column sums of dout (N,OC), fp32 or (n[2]) bf16, split by columns for a fixed
   summation order */
static void mgt__bias_bwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int N = a->n[0], OC = a->n[1], r;
    size_t lo, hi, o;
    mgt__span((size_t)OC, tid, nth, 16, &lo, &hi);
    for (r = 0; r < N; r++) {
        if (a->n[2] == MGT_BF16) {
            const uint16_t *d = (const uint16_t *)(const void *)a->in[0] + (size_t)r * (size_t)OC;
            for (o = lo; o < hi; o++) a->out[0][o] += mgt__bf16_to_f32(d[o]);
        } else {
            const float *d = a->in[0] + (size_t)r * (size_t)OC;
            for (o = lo; o < hi; o++) a->out[0][o] += d[o];
        }
    }
}
static void mgt__cpu_matmul_backward(mgt_backend *be, float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                                     const float *weight, int N, int C, int OC) {
    if (dinp) mgt__gemm(be, 0, 0, N, C, OC, 1.0f, dout, OC, weight, C, 0.0f, dinp, C, NULL);   /* dinp = dout @ W */
    if (dweight) mgt__gemm(be, 1, 0, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C, NULL); /* dW += dout^T @ inp */
    if (dweight && dbias) {
        mgt__args a;
        memset(&a, 0, sizeof a);
        a.out[0] = dbias; a.in[0] = dout; a.n[0] = N; a.n[1] = OC;
        mgt__pool_run(MGT__POOL(be), mgt__bias_bwd_task, &a);
    }
}

/* out (N,C) += residual + bias: the bias of a row-parallel layer, added once after the reduction */
static void mgt__bias_residual_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int C = a->n[1], c;
    size_t lo, hi, r;
    mgt__span((size_t)a->n[0], tid, nth, 1, &lo, &hi);
    for (r = lo; r < hi; r++) {
        float *o = a->out[0] + r * (size_t)C;
        const float *x = a->in[0] + r * (size_t)C;
        if (a->in[1])
            for (c = 0; c < C; c++) o[c] += x[c] + a->in[1][c];
        else
            for (c = 0; c < C; c++) o[c] += x[c];
    }
}
static void mgt__cpu_bias_residual(mgt_backend *be, float *out, const float *residual, const float *bias, int N, int C) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = out; a.in[0] = residual; a.in[1] = bias; a.n[0] = N; a.n[1] = C;
    mgt__pool_run(MGT__POOL(be), mgt__bias_residual_task, &a);
}
static void mgt__cpu_bias_backward(mgt_backend *be, float *dbias, const float *dout, int N, int C) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = dbias; a.in[0] = dout; a.n[0] = N; a.n[1] = C;
    mgt__pool_run(MGT__POOL(be), mgt__bias_bwd_task, &a);
}

/* causal self-attention per (batch, key/value head), on qkv (B,T,W) laid out [q | k | v], W = (NH + 2 NKV) hs:
   query head h on channels h*hs.. of q, its key/value head h / (NH / NKV) on the same channels of k
   and v. att (B,NH,T,T) keeps the softmax probabilities for backward. The query heads that share a
   key/value head run in one task, so their dK and dV add up without a race, in head order. */
static void mgt__attn_fwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int B = a->n[0], T = a->n[1], C = a->n[2], NH = a->n[3], NKV = a->n[4], hs = C / NH, group = NH / NKV, W = C + 2 * NKV * hs, t, j, g;
    float scale = 1.0f / sqrtf((float)hs);
    size_t lo, hi, bk;
    mgt__span((size_t)B * (size_t)NKV, tid, nth, 1, &lo, &hi);
    for (bk = lo; bk < hi; bk++)
        for (g = 0; g < group; g++) {
            size_t b = bk / (size_t)NKV, kvh = bk % (size_t)NKV, h = kvh * (size_t)group + (size_t)g, bh = b * (size_t)NH + h;
            const float *row = a->in[0] + b * (size_t)T * (size_t)W, *q = row + h * (size_t)hs, *k = row + C + kvh * (size_t)hs, *v = k + NKV * hs;
            float *att = a->out[1] + bh * (size_t)T * (size_t)T, *out = a->out[0] + b * (size_t)T * (size_t)C + h * (size_t)hs;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, W, k, W, 0.0f, att, T);
            for (t = 0; t < T; t++) {
                float *p = att + (size_t)t * (size_t)T, mx = p[0], sum = 0, inv;
                for (j = 1; j <= t; j++) mx = p[j] > mx ? p[j] : mx;
                for (j = 0; j <= t; j++) p[j] = mgt__expf(p[j] - mx);
                sum = mgt__sum8(p, t + 1);
                inv = 1.0f / sum;
                for (j = 0; j <= t; j++) p[j] *= inv;
                for (j = t + 1; j < T; j++) p[j] = 0.0f;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, att, T, v, W, 0.0f, out, C);
        }
}
static void mgt__cpu_attention_forward(mgt_backend *be, float *out, float *att, const float *qkv, int B, int T, int C, int NH, int NKV) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = out; a.out[1] = att; a.in[0] = qkv; a.n[0] = B; a.n[1] = T; a.n[2] = C; a.n[3] = NH; a.n[4] = NKV;
    mgt__pool_run(MGT__POOL(be), mgt__attn_fwd_task, &a);
}
static void mgt__attn_bwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    const mgt__cpu *cpu = (const mgt__cpu *)a->be->impl;
    int B = a->n[0], T = a->n[1], C = a->n[2], NH = a->n[3], NKV = a->n[4], hs = C / NH, group = NH / NKV, W = C + 2 * NKV * hs, t, j, g;
    float scale = 1.0f / sqrtf((float)hs), *dp = cpu->scratch + (size_t)tid * cpu->scratch_per_thread;
    size_t lo, hi, bk;
    mgt__span((size_t)B * (size_t)NKV, tid, nth, 1, &lo, &hi);
    for (bk = lo; bk < hi; bk++)
        for (g = 0; g < group; g++) {
            size_t b = bk / (size_t)NKV, kvh = bk % (size_t)NKV, h = kvh * (size_t)group + (size_t)g, bh = b * (size_t)NH + h;
            size_t row = b * (size_t)T * (size_t)W, qoff = row + h * (size_t)hs, koff = row + (size_t)C + kvh * (size_t)hs;
            const float *q = a->in[1] + qoff, *k = a->in[1] + koff, *v = k + NKV * hs;
            const float *att = a->in[2] + bh * (size_t)T * (size_t)T, *dout = a->in[0] + b * (size_t)T * (size_t)C + h * (size_t)hs;
            float *dq = a->out[0] + qoff, *dk = a->out[0] + koff, *dv = dk + NKV * hs, first = g == 0 ? 0.0f : 1.0f; /* the group's first head writes dK, dV */
            /* dP = dY V^T, dV = P^T dY */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dout, C, v, W, 0.0f, dp, T);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, att, T, dout, C, first, dv, W);
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
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, dp, T, k, W, 0.0f, dq, W);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, dp, T, q, W, first, dk, W);
        }
}
static void mgt__cpu_attention_backward(mgt_backend *be, float *dqkv, const float *dout, const float *qkv, const float *att, int B, int T, int C, int NH,
                                        int NKV) {
    mgt__args a;
    if ((size_t)T * (size_t)T > ((mgt__cpu *)be->impl)->scratch_per_thread) abort(); /* sized from seq_len at creation */
    memset(&a, 0, sizeof a);
    a.out[0] = dqkv; a.in[0] = dout; a.in[1] = qkv; a.in[2] = att; a.n[0] = B; a.n[1] = T; a.n[2] = C; a.n[3] = NH; a.n[4] = NKV; a.be = be;
    mgt__pool_run(MGT__POOL(be), mgt__attn_bwd_task, &a);
}

/* one block of ring attention (context parallelism; see mgt_backend.attention_part_forward): per
   (batch, key/value head) as above, the block's scores in the thread's scratch. The forward merges
   the block into the running output by rescaling: with m the new log-sum-exp of a row, the old
   output is weighted exp(lse_old - m) and the block's probabilities exp(s - m), which is what one
   softmax over all the keys so far gives. The backward is flash attention's: P = exp(s - lse) from
   the merged lse, D = rowsum(dout * out), dS = P (dP - D). */
static void mgt__attn_part_fwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    const mgt__cpu *cpu = (const mgt__cpu *)a->be->impl;
    int B = a->n[0], T = a->n[1], C = a->n[2], NH = a->n[3], NKV = a->n[4], ks = a->n[5], causal = a->flags[0], first = a->flags[1];
    int hs = C / NH, group = NH / NKV, W = C + 2 * NKV * hs, t, j, g, c;
    float scale = 1.0f / sqrtf((float)hs), *sc = cpu->scratch + (size_t)tid * cpu->scratch_per_thread;
    size_t lo, hi, bk;
    mgt__span((size_t)B * (size_t)NKV, tid, nth, 1, &lo, &hi);
    for (bk = lo; bk < hi; bk++)
        for (g = 0; g < group; g++) {
            size_t b = bk / (size_t)NKV, kvh = bk % (size_t)NKV, h = kvh * (size_t)group + (size_t)g;
            const float *q = a->in[0] + b * (size_t)T * (size_t)W + h * (size_t)hs, *k = a->in[1] + b * (size_t)T * (size_t)ks + kvh * (size_t)hs;
            const float *v = k + NKV * hs;
            float *o = a->out[0] + b * (size_t)T * (size_t)C + h * (size_t)hs, *lse = a->out[1] + (b * (size_t)NH + h) * (size_t)T;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, W, k, ks, 0.0f, sc, T);
            for (t = 0; t < T; t++) {
                float *p = sc + (size_t)t * (size_t)T, mx = p[0], sum, part, m, keep;
                int n = causal ? t + 1 : T;
                for (j = 1; j < n; j++) mx = p[j] > mx ? p[j] : mx;
                for (j = 0; j < n; j++) p[j] = mgt__expf(p[j] - mx);
                for (j = n; j < T; j++) p[j] = 0.0f;
                sum = mgt__sum8(p, n);
                part = mx + logf(sum);
                if (first) { m = part; keep = 0.0f; }
                else {
                    float hi2 = lse[t] > part ? lse[t] : part;
                    m = hi2 + logf(expf(lse[t] - hi2) + expf(part - hi2));
                    keep = expf(lse[t] - m);
                }
                for (j = 0; j < n; j++) p[j] *= expf(mx - m); /* exp(s - m) */
                if (!first)
                    for (c = 0; c < hs; c++) o[(size_t)t * (size_t)C + (size_t)c] *= keep;
                lse[t] = m;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, sc, T, v, ks, first ? 0.0f : 1.0f, o, C);
        }
}
static void mgt__cpu_attention_part_forward(mgt_backend *be, float *o, float *lse, const float *qkv, const float *kv, int kv_stride, int B, int T, int C,
                                            int NH, int NKV, int causal, int first) {
    mgt__args a;
    if ((size_t)T * (size_t)T > ((mgt__cpu *)be->impl)->scratch_per_thread) abort(); /* sized from the chunk at creation */
    memset(&a, 0, sizeof a);
    a.out[0] = o; a.out[1] = lse; a.in[0] = qkv; a.in[1] = kv; a.n[0] = B; a.n[1] = T; a.n[2] = C; a.n[3] = NH; a.n[4] = NKV; a.n[5] = kv_stride;
    a.flags[0] = causal; a.flags[1] = first; a.be = be;
    mgt__pool_run(MGT__POOL(be), mgt__attn_part_fwd_task, &a);
}
static void mgt__attn_part_bwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    const mgt__cpu *cpu = (const mgt__cpu *)a->be->impl;
    int B = a->n[0], T = a->n[1], C = a->n[2], NH = a->n[3], NKV = a->n[4], ks = a->n[5], causal = a->flags[0];
    int hs = C / NH, group = NH / NKV, W = C + 2 * NKV * hs, KV2 = 2 * NKV * hs, t, j, g, c;
    float scale = 1.0f / sqrtf((float)hs), *P = cpu->scratch + (size_t)tid * cpu->scratch_per_thread, *dP = P + (size_t)T * (size_t)T;
    size_t lo, hi, bk;
    mgt__span((size_t)B * (size_t)NKV, tid, nth, 1, &lo, &hi);
    for (bk = lo; bk < hi; bk++)
        for (g = 0; g < group; g++) {
            size_t b = bk / (size_t)NKV, kvh = bk % (size_t)NKV, h = kvh * (size_t)group + (size_t)g;
            const float *q = a->in[3] + b * (size_t)T * (size_t)W + h * (size_t)hs, *k = a->in[4] + b * (size_t)T * (size_t)ks + kvh * (size_t)hs;
            const float *v = k + NKV * hs, *lse = a->in[2] + (b * (size_t)NH + h) * (size_t)T;
            const float *dout = a->in[0] + b * (size_t)T * (size_t)C + h * (size_t)hs, *out = a->in[1] + b * (size_t)T * (size_t)C + h * (size_t)hs;
            float *dq = a->out[0] + b * (size_t)T * (size_t)C + h * (size_t)hs, *dk = a->out[1] + b * (size_t)T * (size_t)KV2 + kvh * (size_t)hs;
            float *dv = dk + NKV * hs;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, W, k, ks, 0.0f, P, T);
            for (t = 0; t < T; t++) {
                float *p = P + (size_t)t * (size_t)T;
                int n = causal ? t + 1 : T;
                for (j = 0; j < n; j++) p[j] = mgt__expf(p[j] - lse[t]);
                for (j = n; j < T; j++) p[j] = 0.0f;
            }
            /* dP = dY V^T, dV += P^T dY */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dout, C, v, ks, 0.0f, dP, T);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, P, T, dout, C, 1.0f, dv, KV2);
            for (t = 0; t < T; t++) {
                const float *p = P + (size_t)t * (size_t)T, *dy = dout + (size_t)t * (size_t)C, *y = out + (size_t)t * (size_t)C;
                float *d = dP + (size_t)t * (size_t)T, D = 0;
                for (c = 0; c < hs; c++) D += dy[c] * y[c];
                for (j = 0; j < T; j++) d[j] = p[j] * (d[j] - D);
            }
            /* dQ += scale dS K, dK += scale dS^T Q */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, dP, T, k, ks, 1.0f, dq, C);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, dP, T, q, W, 1.0f, dk, KV2);
        }
}
static void mgt__cpu_attention_part_backward(mgt_backend *be, float *dq, float *dkv, const float *dout, const float *out, const float *lse,
                                             const float *qkv, const float *kv, int kv_stride, int B, int T, int C, int NH, int NKV, int causal) {
    mgt__args a;
    if (2 * (size_t)T * (size_t)T > ((mgt__cpu *)be->impl)->scratch_per_thread) abort(); /* sized from the chunk at creation */
    memset(&a, 0, sizeof a);
    a.out[0] = dq; a.out[1] = dkv; a.in[0] = dout; a.in[1] = out; a.in[2] = lse; a.in[3] = qkv; a.in[4] = kv;
    a.n[0] = B; a.n[1] = T; a.n[2] = C; a.n[3] = NH; a.n[4] = NKV; a.n[5] = kv_stride; a.flags[0] = causal; a.be = be;
    mgt__pool_run(MGT__POOL(be), mgt__attn_part_bwd_task, &a);
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

/* RMSNorm (Llama): out (N,C) = inp * rstd * weight, rstd = 1 / sqrt(mean(inp^2) + eps); no mean, no bias */
static void mgt__rms_fwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int C = a->n[1], c, j;
    size_t lo, hi, r;
    mgt__span((size_t)a->n[0], tid, nth, 1, &lo, &hi);
    for (r = lo; r < hi; r++) {
        const float *x = a->in[0] + r * (size_t)C;
        float *o = a->out[0] + r * (size_t)C, ss = 0, s, acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (c = 0; c + 8 <= C; c += 8)
            for (j = 0; j < 8; j++) acc[j] += x[c + j] * x[c + j];
        for (; c < C; c++) ss += x[c] * x[c];
        for (j = 0; j < 8; j++) ss += acc[j];
        s = 1.0f / sqrtf(ss / (float)C + a->f[0]);
        for (c = 0; c < C; c++) o[c] = x[c] * s * a->in[1][c];
        a->out[1][r] = s;
    }
}
static void mgt__cpu_rmsnorm_forward(mgt_backend *be, float *out, float *rstd, const float *inp, const float *weight, float eps, int N, int C) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = out; a.out[1] = rstd; a.in[0] = inp; a.in[1] = weight; a.f[0] = eps; a.n[0] = N; a.n[1] = C;
    mgt__pool_run(MGT__POOL(be), mgt__rms_fwd_task, &a);
}
/* pass 1 over rows: dinp += rstd * (g - xhat * mean(g * xhat)), g = weight * dout, xhat = inp * rstd */
static void mgt__rms_bwd_rows_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int C = a->n[1], c, j;
    size_t lo, hi, r;
    mgt__span((size_t)a->n[0], tid, nth, 1, &lo, &hi);
    for (r = lo; r < hi; r++) {
        const float *d = a->in[0] + r * (size_t)C, *x = a->in[1] + r * (size_t)C, *w = a->in[2];
        float rs = a->in[3][r], mgx = 0, *di = a->out[0] + r * (size_t)C, agx[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (c = 0; c + 8 <= C; c += 8)
            for (j = 0; j < 8; j++) agx[j] += w[c + j] * d[c + j] * x[c + j] * rs;
        for (; c < C; c++) mgx += w[c] * d[c] * x[c] * rs;
        for (j = 0; j < 8; j++) mgx += agx[j];
        mgx /= (float)C;
        for (c = 0; c < C; c++) di[c] += rs * (w[c] * d[c] - x[c] * rs * mgx);
    }
}
/* pass 2 over channels: dweight += sum dout * xhat (fixed row order) */
static void mgt__rms_bwd_params_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int N = a->n[0], C = a->n[1], r;
    size_t lo, hi, c;
    mgt__span((size_t)C, tid, nth, 16, &lo, &hi);
    for (r = 0; r < N; r++) {
        const float *d = a->in[0] + (size_t)r * (size_t)C, *x = a->in[1] + (size_t)r * (size_t)C;
        float rs = a->in[3][r];
        for (c = lo; c < hi; c++) a->out[1][c] += d[c] * x[c] * rs;
    }
}
static void mgt__cpu_rmsnorm_backward(mgt_backend *be, float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                                      const float *rstd, int N, int C) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = dinp; a.out[1] = dweight; a.in[0] = dout; a.in[1] = inp; a.in[2] = weight; a.in[3] = rstd; a.n[0] = N; a.n[1] = C;
    mgt__pool_run(MGT__POOL(be), mgt__rms_bwd_rows_task, &a);
    mgt__pool_run(MGT__POOL(be), mgt__rms_bwd_params_task, &a);
}

/* RoPE (Llama), in place on the q and k heads of each row of qkv (B,T,(NH + 2 NKV) hs): the pair
   (i, i + hs/2) of a head at position t turns by t x theta^(-2i/hs), computed in fp32 as Hugging
   Face computes its cos/sin tables. `sign` -1 turns back: the backward of a rotation is its inverse. */
static void mgt__rope_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int T = a->n[1], NH = a->n[2], NKV = a->n[3], hs = a->n[4], half = hs / 2, W = (NH + 2 * NKV) * hs, i, h;
    float theta = a->f[0], sign = a->f[1];
    size_t lo, hi, r;
    mgt__span((size_t)a->n[0] * (size_t)T, tid, nth, 1, &lo, &hi);
    for (r = lo; r < hi; r++) {
        float *row = a->out[0] + r * (size_t)W, pos = (float)(a->n[5] + (int)(r % (size_t)T));
        for (i = 0; i < half; i++) {
            float angle = pos * (1.0f / powf(theta, (float)(2 * i) / (float)hs)), c = cosf(angle), sn = sign * sinf(angle);
            for (h = 0; h < NH + NKV; h++) { /* the q heads, then the k heads right after them */
                float *x = row + (size_t)h * (size_t)hs, x0 = x[i], x1 = x[half + i];
                x[i] = x0 * c - x1 * sn;
                x[half + i] = x1 * c + x0 * sn;
            }
        }
    }
}
static void mgt__cpu_rope(mgt_backend *be, float *qkv, int B, int T, int NH, int NKV, int hs, float theta, float sign, int pos0) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = qkv; a.n[0] = B; a.n[1] = T; a.n[2] = NH; a.n[3] = NKV; a.n[4] = hs; a.n[5] = pos0; a.f[0] = theta; a.f[1] = sign;
    mgt__pool_run(MGT__POOL(be), mgt__rope_task, &a);
}
/* SwiGLU (Llama): out (N,H) = silu(gate) * up with gate = inp[:, :H], up = inp[:, H:], silu(g) = g sigmoid(g) */
static void mgt__swiglu_fwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int H = a->n[1], c;
    size_t lo, hi, r;
    mgt__span((size_t)a->n[0], tid, nth, 1, &lo, &hi);
    for (r = lo; r < hi; r++) {
        const float *g = a->in[0] + r * 2 * (size_t)H, *u = g + H;
        float *o = a->out[0] + r * (size_t)H;
        for (c = 0; c < H; c++) o[c] = g[c] / (1.0f + mgt__expf(-g[c])) * u[c];
    }
}
static void mgt__swiglu_bwd_task(void *ctx, int tid, int nth) {
    const mgt__args *a = (const mgt__args *)ctx;
    int H = a->n[1], c;
    size_t lo, hi, r;
    mgt__span((size_t)a->n[0], tid, nth, 1, &lo, &hi);
    for (r = lo; r < hi; r++) {
        const float *g = a->in[0] + r * 2 * (size_t)H, *u = g + H, *d = a->in[1] + r * (size_t)H;
        float *dg = a->out[0] + r * 2 * (size_t)H, *du = dg + H;
        for (c = 0; c < H; c++) {
            float sig = 1.0f / (1.0f + mgt__expf(-g[c])), gd = d[c];
            du[c] = gd * g[c] * sig;
            dg[c] = gd * u[c] * sig * (1.0f + g[c] * (1.0f - sig));
        }
    }
}
static void mgt__cpu_swiglu_forward(mgt_backend *be, float *out, const float *inp, int N, int H) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = out; a.in[0] = inp; a.n[0] = N; a.n[1] = H;
    mgt__pool_run(MGT__POOL(be), mgt__swiglu_fwd_task, &a);
}
static void mgt__cpu_swiglu_backward(mgt_backend *be, float *dinp, const float *inp, const float *dout, int N, int H) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = dinp; a.in[0] = inp; a.in[1] = dout; a.n[0] = N; a.n[1] = H;
    mgt__pool_run(MGT__POOL(be), mgt__swiglu_bwd_task, &a);
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
    mgt__span(a->count, tid, nth, 4096, &lo, &hi);
    if (hi > lo) memset((char *)a->out[0] + lo, 0, hi - lo);
}
static void mgt__cpu_zero(mgt_backend *be, void *x, size_t bytes) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = (float *)x; a.count = bytes;
    mgt__pool_run(MGT__POOL(be), mgt__zero_task, &a);
}
static void mgt__cpu_scale(mgt_backend *be, float *x, float factor, size_t n) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.out[0] = x; a.f[0] = factor; a.count = n;
    mgt__pool_run(MGT__POOL(be), mgt__scale_task, &a);
}

/* cross-entropy, vocabulary-parallel: each rank has columns [v0, v0 + Vl) of the logits */
/* The classifier's cross-entropy, a row at a time. Logits in 16-bit storage are widened a row at a
   time into the thread's own row of fp32 (row_buf, Vl floats per thread) and the finished
   gradients rounded back from it: one pass over the largest activation, not a widened copy of it
   all (N x V floats) written and read again. */
typedef struct mgt__xent_args {
    void *logits;        /* (N, Vl) in dtype: read by partial, overwritten with gradients by finish */
    int dtype;
    float *row_buf;      /* 16-bit: Vl floats per thread */
    float *part;         /* partial: (N, 3) out; finish: (tp, N, 3) in */
    double *losses;
    const int *targets;
    int N, v0, Vl, V, tp;
    float grad_scale;
} mgt__xent_args;
static void mgt__convert(void *dst, int dd, const void *src, int sd, size_t lo, size_t hi);
static size_t mgt__dtype_size(int dtype);
static float *mgt__wide_take(mgt_backend *be, size_t n);
/* row r of the logits as fp32: in place for fp32, else widened into this thread's row */
static float *mgt__xent_row(const mgt__xent_args *a, int tid, size_t r) {
    float *row;
    if (a->dtype == MGT_F32) return (float *)a->logits + r * (size_t)a->Vl;
    row = a->row_buf + (size_t)tid * (size_t)a->Vl;
    mgt__convert(row, MGT_F32, (const char *)a->logits + r * (size_t)a->Vl * mgt__dtype_size(a->dtype), a->dtype, 0, (size_t)a->Vl);
    return row;
}
static int mgt__xent_valid(const mgt__xent_args *a) { return a->V - a->v0 < a->Vl ? (a->V - a->v0 > 0 ? a->V - a->v0 : 0) : a->Vl; }
/* An fp32 rank that holds the whole vocabulary keeps partial's exp(logit - max) in the logits and
   finish only scales them: one exponential per logit, not two (6% of a step at V = 50257). The max
   is then the global one, so the gradients are bit for bit those of the two-pass form. */
static int mgt__xent_keeps_exp(const mgt__xent_args *a) { return a->dtype == MGT_F32 && a->v0 == 0 && a->V <= a->Vl; }
static void mgt__xent_partial_task(void *ctx, int tid, int nth) {
    const mgt__xent_args *a = (const mgt__xent_args *)ctx;
    int valid = mgt__xent_valid(a), keep = mgt__xent_keeps_exp(a), i;
    size_t lo, hi, r;
    mgt__span((size_t)a->N, tid, nth, 1, &lo, &hi);
    for (r = lo; r < hi; r++) {
        float *l = mgt__xent_row(a, tid, r), *part = a->part + r * 3, mx, e[256];
        int y = a->targets[r] - a->v0, j, k;
        part[2] = y >= 0 && y < valid ? l[y] : 0.0f;
        part[0] = mx = mgt__max16(l, valid);
        part[1] = 0.0f;
        for (i = 0; i < valid; i += k) { /* the exponentials a block at a time */
            float *ek = keep ? l + i : e;
            k = valid - i < 256 ? valid - i : 256;
            for (j = 0; j < k; j++) ek[j] = mgt__expf(l[i + j] - mx);
            part[1] += mgt__sum8(ek, k);
        }
    }
}
static void mgt__xent_finish_task(void *ctx, int tid, int nth) {
    const mgt__xent_args *a = (const mgt__xent_args *)ctx;
    int N = a->N, valid = mgt__xent_valid(a), keep = mgt__xent_keeps_exp(a), i, k;
    float gs = a->grad_scale;
    size_t lo, hi, r;
    mgt__span((size_t)N, tid, nth, 1, &lo, &hi);
    for (r = lo; r < hi; r++) {
        float *l, M = -INFINITY, scale;
        double S = 0, target = 0;
        int y = a->targets[r] - a->v0;
        for (k = 0; k < a->tp; k++) { const float *p = a->part + ((size_t)k * (size_t)N + r) * 3; if (p[1] > 0 && p[0] > M) M = p[0]; }
        for (k = 0; k < a->tp; k++) { /* in rank order: the same sum on every rank */
            const float *p = a->part + ((size_t)k * (size_t)N + r) * 3;
            if (p[1] > 0) S += (double)p[1] * (double)mgt__expf(p[0] - M);
            target += p[2];
        }
        a->losses[r] = log(S) + (double)M - target;
        if (gs == 0.0f) continue;
        l = mgt__xent_row(a, tid, r);
        scale = (float)(1.0 / S) * gs;
        if (keep) for (i = 0; i < valid; i++) l[i] *= scale; /* M is this rank's max: l holds exp(logit - M) */
        else for (i = 0; i < valid; i++) l[i] = mgt__expf(l[i] - M) * scale;
        if (y >= 0 && y < valid) l[y] -= gs;
        for (i = valid; i < a->Vl; i++) l[i] = 0.0f;
        if (a->dtype != MGT_F32) mgt__convert((char *)a->logits + r * (size_t)a->Vl * mgt__dtype_size(a->dtype), a->dtype, l, MGT_F32, 0, (size_t)a->Vl);
    }
}
static void mgt__xent_run(mgt_backend *be, mgt__task_fn fn, mgt__xent_args *a) {
    mgt__cpu *cpu = (mgt__cpu *)be->impl;
    a->dtype = be->dtype;
    if (be->dtype != MGT_F32) { /* one row per thread, from the op's workspace */
        cpu->wide_used = 0;
        a->row_buf = mgt__wide_take(be, (size_t)(cpu->pool.n < a->N ? cpu->pool.n : a->N) * (size_t)a->Vl); /* threads past N have no row */
    }
    mgt__pool_run(MGT__POOL(be), fn, a);
}
static void mgt__cpu_xent_partial(mgt_backend *be, float *part, void *logits, const int *targets, int N, int vocab_start, int Vl, int V) {
    mgt__xent_args a;
    memset(&a, 0, sizeof a);
    a.logits = logits; a.part = part; a.targets = targets; a.N = N; a.v0 = vocab_start; a.Vl = Vl; a.V = V;
    mgt__xent_run(be, mgt__xent_partial_task, &a);
}
static void mgt__cpu_xent_finish(mgt_backend *be, double *losses, void *logits, const float *parts, int tp, const int *targets, int N,
                                 int vocab_start, int Vl, int V, float grad_scale) {
    mgt__xent_args a;
    memset(&a, 0, sizeof a);
    a.logits = logits; a.part = (float *)parts; a.losses = losses; a.targets = targets;
    a.N = N; a.v0 = vocab_start; a.Vl = Vl; a.V = V; a.tp = tp; a.grad_scale = grad_scale;
    mgt__xent_run(be, mgt__xent_finish_task, &a);
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
    size_t lo, hi, i, b, e;
    mgt__span(a->count, tid, nth, 64, &lo, &hi);
    for (b = lo; b < hi; b = e) { /* blocks of 4096: the compute copy is rounded from them while they are in cache */
        e = hi - b < 4096 ? hi : b + 4096;
        for (i = b; i < e; i++) { /* vectorises only where sqrtf need not set errno (-fno-math-errno): 3x faster at 124M */
            float gi = g[i] * gs, mi = b1 * m[i] + (1.0f - b1) * gi, vi = b2 * v[i] + (1.0f - b2) * gi * gi;
            m[i] = mi;
            v[i] = vi;
            p[i] = p[i] * decay - step * mi / (sqrtf(vi) / sbc2 + eps);
        }
        if (a->copy) mgt__convert(a->copy, a->n[0], p, MGT_F32, b, e);
    }
}
static void mgt__cpu_adamw(mgt_backend *be, float *param, void *param_copy, const float *grad, float *m, float *v, size_t n, float lr, float beta1,
                           float beta2, float eps, float weight_decay, float grad_scale, float bias_correction1, float bias_correction2) {
    mgt__args a;
    memset(&a, 0, sizeof a);
    a.copy = param_copy; a.n[0] = be->dtype;
    a.out[0] = param; a.out[1] = m; a.out[2] = v; a.in[0] = grad; a.count = n;
    a.f[0] = lr; a.f[1] = beta1; a.f[2] = beta2; a.f[3] = eps; a.f[4] = weight_decay; a.f[5] = grad_scale;
    a.f[6] = bias_correction1; a.f[7] = bias_correction2;
    mgt__pool_run(MGT__POOL(be), mgt__adamw_task, &a);
}

/* ---- storage types on the CPU: fp32 runs the code above as it is; bf16 and fp16 widen their
   inputs into fp32 workspace, run the same code, and round what they store once (to nearest even):
   the numerics of a GPU kernel that computes in fp32 and stores 16-bit. The workspace is sized
   from the rank's shapes (mgt__widen_floats) and counted as workspace memory. ---- */

static size_t mgt__dtype_size(int dtype) { return dtype == MGT_F32 ? 4 : 2; }
static float mgt__load(const void *base, size_t i, int dtype) { /* element i of a tensor in dtype */
    if (dtype == MGT_BF16) return mgt__bf16_to_f32(((const uint16_t *)base)[i]);
    if (dtype == MGT_F16) return mgt__f16_to_f32(((const uint16_t *)base)[i]);
    return ((const float *)base)[i];
}
static void mgt__store(void *base, size_t i, int dtype, float v) { /* element i of a tensor in dtype, rounded */
    if (dtype == MGT_F32) ((float *)base)[i] = v;
    else ((uint16_t *)base)[i] = dtype == MGT_BF16 ? mgt__f32_to_bf16(v) : mgt__f32_to_f16(v);
}

/* elements [lo, hi) of src (sd) into dst (dd), rounded to nearest even */
static void mgt__convert(void *dst, int dd, const void *src, int sd, size_t lo, size_t hi) {
    size_t i;
    if (dd == sd) { memcpy((char *)dst + lo * mgt__dtype_size(dd), (const char *)src + lo * mgt__dtype_size(sd), (hi - lo) * mgt__dtype_size(dd)); return; }
    /* one loop per pair, so that each vectorises */
    if (sd == MGT_BF16 && dd == MGT_F32) for (i = lo; i < hi; i++) ((float *)dst)[i] = mgt__bf16_to_f32(((const uint16_t *)src)[i]);
    else if (sd == MGT_F32 && dd == MGT_BF16) for (i = lo; i < hi; i++) ((uint16_t *)dst)[i] = mgt__f32_to_bf16(((const float *)src)[i]);
    else if (sd == MGT_F16 && dd == MGT_F32) for (i = lo; i < hi; i++) ((float *)dst)[i] = mgt__f16_to_f32(((const uint16_t *)src)[i]);
    else if (sd == MGT_F32 && dd == MGT_F16) for (i = lo; i < hi; i++) ((uint16_t *)dst)[i] = mgt__f32_to_f16(((const float *)src)[i]);
    else /* between the two 16-bit types, through fp32 */
        for (i = lo; i < hi; i++) {
            float x = sd == MGT_BF16 ? mgt__bf16_to_f32(((const uint16_t *)src)[i]) : mgt__f16_to_f32(((const uint16_t *)src)[i]);
            ((uint16_t *)dst)[i] = dd == MGT_BF16 ? mgt__f32_to_bf16(x) : mgt__f32_to_f16(x);
        }
}
typedef struct mgt__cast_args { void *dst; const void *src; int dd, sd; size_t n; } mgt__cast_args;
static void mgt__cast_task(void *ctx, int tid, int nth) {
    const mgt__cast_args *c = (const mgt__cast_args *)ctx;
    size_t lo, hi;
    mgt__span(c->n, tid, nth, 1024, &lo, &hi);
    mgt__convert(c->dst, c->dd, c->src, c->sd, lo, hi);
}
static void mgt__cpu_cast(mgt_backend *be, void *dst, int dst_dtype, const void *src, int src_dtype, size_t n) {
    mgt__cast_args c;
    if (!n) return;
    c.dst = dst; c.src = src; c.dd = dst_dtype; c.sd = src_dtype; c.n = n;
    mgt__pool_run(MGT__POOL(be), mgt__cast_task, &c);
}

/* the workspace of one op: taken in 64-byte pieces, released together by the next op */
static float *mgt__wide_take(mgt_backend *be, size_t n) {
    mgt__cpu *cpu = (mgt__cpu *)be->impl;
    float *p = cpu->wide + cpu->wide_used;
    cpu->wide_used += (n + 15) & ~(size_t)15;
    if (cpu->wide_used > cpu->wide_floats) abort(); /* sized from the shapes at creation: a bug if it is short */
    return p;
}
/* at least n floats of workspace: a GEMM that oneDNN could not plan widens its operands, which the
   workspace was not sized for when oneDNN was to multiply them (mgt__widen_floats) */
static void mgt__wide_reserve(mgt_backend *be, size_t n) {
    mgt__cpu *cpu = (mgt__cpu *)be->impl;
    if (cpu->wide_floats >= n) return;
    be->free(be, cpu->wide, sizeof(float) * cpu->wide_floats, MGT_MEM_WORKSPACE);
    cpu->wide = (float *)be->alloc(be, sizeof(float) * n, MGT_MEM_WORKSPACE);
    cpu->wide_floats = cpu->wide ? n : 0;
    if (!cpu->wide) {
        fprintf(stderr, "mgt: out of memory for %.1f MiB of fp32 workspace to widen a bf16 GEMM oneDNN could not plan\n", (double)n * 4 / 1048576.0);
        abort();
    }
}
static float *mgt__wide_in(mgt_backend *be, const void *src, size_t n) {
    float *p;
    if (!src) return NULL;
    p = mgt__wide_take(be, n);
    mgt__cpu_cast(be, p, MGT_F32, src, be->dtype, n);
    return p;
}
static void mgt__wide_out(mgt_backend *be, void *dst, const float *p, size_t n) { mgt__cpu_cast(be, dst, be->dtype, p, MGT_F32, n); }
#define MGT__WIDE(be) (((mgt__cpu *)(be)->impl)->wide_used = 0, (be)->dtype != MGT_F32) /* starts an op: true when 16-bit */
#define MGT__F(p) ((float *)(p))
#define MGT__CF(p) ((const float *)(p))

static void mgt__t_encoder_forward(mgt_backend *be, void *out, const int *tokens, const void *wte, int v0, int vr, const void *wpe, int B, int T, int C) {
    size_t n = (size_t)B * T * C;
    float *o;
    if (!MGT__WIDE(be)) { mgt__cpu_encoder_forward(be, MGT__F(out), tokens, MGT__CF(wte), v0, vr, MGT__CF(wpe), B, T, C); return; }
    o = mgt__wide_take(be, n);
    mgt__cpu_encoder_forward(be, o, tokens, mgt__wide_in(be, wte, (size_t)vr * C), v0, vr, mgt__wide_in(be, wpe, (size_t)T * C), B, T, C);
    mgt__wide_out(be, out, o, n);
}
static void mgt__t_encoder_backward(mgt_backend *be, float *dwte, float *dwpe, const void *dout, const int *tokens, int v0, int vr, int B, int T, int C) {
    if (!MGT__WIDE(be)) { mgt__cpu_encoder_backward(be, dwte, dwpe, MGT__CF(dout), tokens, v0, vr, B, T, C); return; }
    mgt__cpu_encoder_backward(be, dwte, dwpe, mgt__wide_in(be, dout, (size_t)B * T * C), tokens, v0, vr, B, T, C);
}
static void mgt__t_layernorm_forward(mgt_backend *be, void *out, float *mean, float *rstd, const void *inp, const void *w, const void *b, int N, int C) {
    size_t n = (size_t)N * C;
    float *o;
    if (!MGT__WIDE(be)) { mgt__cpu_layernorm_forward(be, MGT__F(out), mean, rstd, MGT__CF(inp), MGT__CF(w), MGT__CF(b), N, C); return; }
    o = mgt__wide_take(be, n);
    mgt__cpu_layernorm_forward(be, o, mean, rstd, mgt__wide_in(be, inp, n), mgt__wide_in(be, w, (size_t)C), mgt__wide_in(be, b, (size_t)C), N, C);
    mgt__wide_out(be, out, o, n);
}
static void mgt__t_layernorm_backward(mgt_backend *be, void *dinp, float *dw, float *db, const void *dout, const void *inp, const void *w,
                                      const float *mean, const float *rstd, int N, int C) {
    size_t n = (size_t)N * C;
    float *di;
    if (!MGT__WIDE(be)) { mgt__cpu_layernorm_backward(be, MGT__F(dinp), dw, db, MGT__CF(dout), MGT__CF(inp), MGT__CF(w), mean, rstd, N, C); return; }
    di = mgt__wide_in(be, dinp, n); /* accumulated into (+=) */
    mgt__cpu_layernorm_backward(be, di, dw, db, mgt__wide_in(be, dout, n), mgt__wide_in(be, inp, n), mgt__wide_in(be, w, (size_t)C), mean, rstd, N, C);
    mgt__wide_out(be, dinp, di, n);
}
/* ---- bf16 GEMMs through oneDNN: C = op(A) op(B) (+ bias) (+ C), bf16 operands, fp32 accumulation,
   split over the pool along the larger of M and N as mgt__gemm splits sgemm. Every block's plan
   is made on the calling thread before any block runs, so an op whose plan fails has touched
   nothing and widens to sgemm instead (and so does every later op: the reason is logged once). */
typedef struct mgt__bf16_gemm_args {
    const mgt_onednn_api *api;
    int ta, tb, M, N, K, lda, ldb, ldc, c_bf16;
    int sizes[3];  /* the blocks' lengths along the split: mgt__span gives at most three */
    void *plans[3];
    const uint16_t *A, *B, *bias;
    void *C;
    int failed;
    char why[300];
} mgt__bf16_gemm_args;

static int mgt__bf16_gemm_plan(mgt_backend *be, mgt__bf16_gemm_args *g, int ta, int tb, int M, int N, int K, const void *A, int lda, const void *B,
                               int ldb, const void *bias, void *C, int ldc, int c_bf16, int accumulate) {
    mgt__cpu *cpu = (mgt__cpu *)be->impl;
    int nth = cpu->pool.n, tid, k, kinds = 0;
    memset(g, 0, sizeof *g);
    if (!cpu->onednn) return 0;
    g->api = cpu->onednn;
    g->ta = ta; g->tb = tb; g->M = M; g->N = N; g->K = K; g->lda = lda; g->ldb = ldb; g->ldc = ldc; g->c_bf16 = c_bf16;
    g->A = (const uint16_t *)A; g->B = (const uint16_t *)B; g->bias = (const uint16_t *)bias; g->C = C;
    for (tid = 0; tid < nth; tid++) {
        mgt__gemm_block b = mgt__gemm_block_of(M, N, ta, tb, lda, ldb, ldc, tid, nth);
        int len = (int)(b.hi - b.lo);
        for (k = 0; k < kinds && g->sizes[k] != len; k++) {}
        if (len == 0 || k < kinds) continue;
        if (kinds == 3) abort(); /* mgt__span's blocks have at most three lengths: a bug otherwise */
        g->sizes[kinds] = len;
        g->plans[kinds] = g->api->plan(ta, tb, b.split_m ? len : M, b.split_m ? N : len, K, lda, ldb, ldc, bias != NULL, c_bf16, accumulate, g->why,
                                       sizeof g->why);
        if (!g->plans[kinds]) {
            mgt__log(MGT_LOG_WARN, "oneDNN could not plan a bf16 GEMM (%s); this CPU backend's GEMMs widen to fp32 sgemm from here on", g->why);
            cpu->onednn = NULL;
            return 0;
        }
        kinds++;
    }
    return 1;
}
static void mgt__bf16_gemm_task(void *ctx, int tid, int nth) {
    mgt__bf16_gemm_args *g = (mgt__bf16_gemm_args *)ctx;
    mgt__gemm_block b = mgt__gemm_block_of(g->M, g->N, g->ta, g->tb, g->lda, g->ldb, g->ldc, tid, nth);
    char why[300];
    int k = 0, len = (int)(b.hi - b.lo);
    if (len == 0) return;
    while (g->sizes[k] != len) k++;
    if (g->api->run(g->plans[k], g->A + b.a, g->B + b.b, g->bias ? g->bias + b.bias : NULL, (char *)g->C + b.c * (g->c_bf16 ? 2 : 4), why, sizeof why)) {
        g->failed = 1; /* one thread's text is enough */
        mgt__strlcpy(g->why, why, sizeof g->why);
    }
}
static void mgt__bf16_gemm_run(mgt_backend *be, mgt__bf16_gemm_args *g) {
    mgt__pool_run(MGT__POOL(be), mgt__bf16_gemm_task, g);
    if (g->failed) { /* planned but could not run: blocks may be half written, so there is no going back to sgemm */
        fprintf(stderr, "mgt: a planned oneDNN bf16 GEMM failed to run: %s\n", g->why);
        abort();
    }
}

static void mgt__t_matmul_forward(mgt_backend *be, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    float *o;
    mgt__bf16_gemm_args g;
    if (!MGT__WIDE(be)) { mgt__cpu_matmul_forward(be, MGT__F(out), MGT__CF(inp), MGT__CF(w), MGT__CF(bias), N, C, OC); return; }
    if (mgt__bf16_gemm_plan(be, &g, 0, 1, N, OC, C, inp, C, w, C, bias, out, OC, 1, 0)) { mgt__bf16_gemm_run(be, &g); return; } /* out = inp W^T + b */
    mgt__wide_reserve(be, 4 * 16 + (size_t)N * OC + (size_t)N * C + (size_t)OC * C + (size_t)OC); /* each operand padded to 16 */
    o = mgt__wide_take(be, (size_t)N * OC);
    mgt__cpu_matmul_forward(be, o, mgt__wide_in(be, inp, (size_t)N * C), mgt__wide_in(be, w, (size_t)OC * C), mgt__wide_in(be, bias, (size_t)OC), N, C, OC);
    mgt__wide_out(be, out, o, (size_t)N * OC);
}
static void mgt__t_matmul_backward(mgt_backend *be, void *dinp, float *dw, float *db, const void *dout, const void *inp, const void *w, int N, int C, int OC) {
    float *di;
    mgt__bf16_gemm_args gi, gw;
    if (!MGT__WIDE(be)) { mgt__cpu_matmul_backward(be, MGT__F(dinp), dw, db, MGT__CF(dout), MGT__CF(inp), MGT__CF(w), N, C, OC); return; }
    if ((!dinp || mgt__bf16_gemm_plan(be, &gi, 0, 0, N, C, OC, dout, OC, w, C, NULL, dinp, C, 1, 0)) &&   /* dinp = dout W */
        (!dw || mgt__bf16_gemm_plan(be, &gw, 1, 0, OC, C, N, dout, OC, inp, C, NULL, dw, C, 0, 1))) {    /* dW += dout^T inp */
        if (dinp) mgt__bf16_gemm_run(be, &gi);
        if (dw) mgt__bf16_gemm_run(be, &gw);
        if (dw && db) {
            mgt__args a;
            memset(&a, 0, sizeof a);
            a.out[0] = db; a.in[0] = (const float *)dout; a.n[0] = N; a.n[1] = OC; a.n[2] = MGT_BF16;
            mgt__pool_run(MGT__POOL(be), mgt__bias_bwd_task, &a);
        }
        return;
    }
    mgt__wide_reserve(be, 4 * 16 + 2 * (size_t)N * C + (size_t)N * OC + (size_t)OC * C);
    di = dinp ? mgt__wide_take(be, (size_t)N * C) : NULL;
    mgt__cpu_matmul_backward(be, di, dw, db, mgt__wide_in(be, dout, (size_t)N * OC), dw ? mgt__wide_in(be, inp, (size_t)N * C) : NULL,
                             dinp ? mgt__wide_in(be, w, (size_t)OC * C) : NULL, N, C, OC); /* widens only what the asked gradients read */
    if (dinp) mgt__wide_out(be, dinp, di, (size_t)N * C);
}
static void mgt__t_gelu_forward(mgt_backend *be, void *out, const void *inp, size_t n);
static void mgt__t_gelu_backward(mgt_backend *be, void *dinp, const void *inp, const void *dout, size_t n);
static void mgt__t_matmul_gelu_forward(mgt_backend *be, void *out, void *pre, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    mgt__t_matmul_forward(be, pre, inp, w, bias, N, C, OC);
    mgt__t_gelu_forward(be, out, pre, (size_t)N * OC);
}
static void mgt__t_matmul_gelu_backward(mgt_backend *be, void *dpre, float *dw, float *db, const void *dout, const void *inp, const void *w,
                                        const void *pre, int N, int C, int OC) {
    mgt__t_matmul_backward(be, dpre, dw, db, dout, inp, w, N, C, OC);
    mgt__t_gelu_backward(be, dpre, pre, dpre, (size_t)N * C);
}
static void mgt__t_attention_forward(mgt_backend *be, void *out, void *att, const void *qkv, int B, int T, int C, int NH, int NKV) {
    size_t n = (size_t)B * T * C, nqkv = (size_t)B * T * (C + 2 * (C / NH) * NKV), na = (size_t)B * NH * T * T;
    float *o, *a;
    if (!MGT__WIDE(be)) { mgt__cpu_attention_forward(be, MGT__F(out), MGT__F(att), MGT__CF(qkv), B, T, C, NH, NKV); return; }
    o = mgt__wide_take(be, n);
    a = mgt__wide_take(be, na);
    mgt__cpu_attention_forward(be, o, a, mgt__wide_in(be, qkv, nqkv), B, T, C, NH, NKV);
    mgt__wide_out(be, out, o, n);
    mgt__wide_out(be, att, a, na);
}
static void mgt__t_attention_backward(mgt_backend *be, void *dqkv, const void *dout, const void *qkv, const void *out, const void *att, int B, int T,
                                      int C, int NH, int NKV) {
    size_t n = (size_t)B * T * C, nqkv = (size_t)B * T * (C + 2 * (C / NH) * NKV);
    float *d;
    (void)out; /* the probabilities are saved */
    if (!MGT__WIDE(be)) { mgt__cpu_attention_backward(be, MGT__F(dqkv), MGT__CF(dout), MGT__CF(qkv), MGT__CF(att), B, T, C, NH, NKV); return; }
    d = mgt__wide_take(be, nqkv);
    mgt__cpu_attention_backward(be, d, mgt__wide_in(be, dout, n), mgt__wide_in(be, qkv, nqkv), mgt__wide_in(be, att, (size_t)B * NH * T * T), B, T, C,
                                NH, NKV);
    mgt__wide_out(be, dqkv, d, nqkv);
}
/* kv's rows, widened: its (B T - 1) strides and the last row's k and v heads */
static size_t mgt__kv_span(int B, int T, int C, int NH, int NKV, int kv_stride) { return (size_t)(B * T - 1) * (size_t)kv_stride + 2 * (size_t)(C / NH) * NKV; }
static void mgt__t_attention_part_forward(mgt_backend *be, float *o, float *lse, const void *qkv, const void *kv, int kv_stride, int B, int T, int C,
                                          int NH, int NKV, int causal, int first) {
    size_t nqkv = (size_t)B * T * (C + 2 * (C / NH) * NKV);
    if (!MGT__WIDE(be)) { mgt__cpu_attention_part_forward(be, o, lse, MGT__CF(qkv), MGT__CF(kv), kv_stride, B, T, C, NH, NKV, causal, first); return; }
    mgt__cpu_attention_part_forward(be, o, lse, mgt__wide_in(be, qkv, nqkv), mgt__wide_in(be, kv, mgt__kv_span(B, T, C, NH, NKV, kv_stride)), kv_stride, B,
                                    T, C, NH, NKV, causal, first);
}
static void mgt__t_attention_part_backward(mgt_backend *be, float *dq, float *dkv, const void *dout, const void *out, const float *lse, const void *qkv,
                                           const void *kv, int kv_stride, int B, int T, int C, int NH, int NKV, int causal) {
    size_t n = (size_t)B * T * C, nqkv = (size_t)B * T * (C + 2 * (C / NH) * NKV);
    if (!MGT__WIDE(be)) {
        mgt__cpu_attention_part_backward(be, dq, dkv, MGT__CF(dout), MGT__CF(out), lse, MGT__CF(qkv), MGT__CF(kv), kv_stride, B, T, C, NH, NKV, causal);
        return;
    }
    mgt__cpu_attention_part_backward(be, dq, dkv, mgt__wide_in(be, dout, n), mgt__wide_in(be, out, n), lse, mgt__wide_in(be, qkv, nqkv),
                                     mgt__wide_in(be, kv, mgt__kv_span(B, T, C, NH, NKV, kv_stride)), kv_stride, B, T, C, NH, NKV, causal);
}
typedef struct mgt__cols_args { void *dst; const void *src; int dd, sd, dstride, sstride, cols; size_t rows; } mgt__cols_args;
static void mgt__copy_cols_task(void *ctx, int tid, int nth) {
    const mgt__cols_args *c = (const mgt__cols_args *)ctx;
    size_t lo, hi, r;
    int j;
    mgt__span(c->rows, tid, nth, 16, &lo, &hi);
    for (r = lo; r < hi; r++)
        for (j = 0; j < c->cols; j++)
            mgt__store(c->dst, r * (size_t)c->dstride + (size_t)j, c->dd, mgt__load(c->src, r * (size_t)c->sstride + (size_t)j, c->sd));
}
static void mgt__cpu_copy_cols(mgt_backend *be, void *dst, int dst_dtype, int dst_stride, const void *src, int src_dtype, int src_stride, size_t rows,
                               int cols) {
    mgt__cols_args c;
    c.dst = dst; c.src = src; c.dd = dst_dtype; c.sd = src_dtype; c.dstride = dst_stride; c.sstride = src_stride; c.cols = cols; c.rows = rows;
    mgt__pool_run(MGT__POOL(be), mgt__copy_cols_task, &c);
}
static void mgt__t_gelu_forward(mgt_backend *be, void *out, const void *inp, size_t n) {
    float *o;
    if (!MGT__WIDE(be)) { mgt__cpu_gelu_forward(be, MGT__F(out), MGT__CF(inp), n); return; }
    o = mgt__wide_take(be, n);
    mgt__cpu_gelu_forward(be, o, mgt__wide_in(be, inp, n), n);
    mgt__wide_out(be, out, o, n);
}
static void mgt__t_gelu_backward(mgt_backend *be, void *dinp, const void *inp, const void *dout, size_t n) {
    float *d, *x, *g;
    if (!MGT__WIDE(be)) { mgt__cpu_gelu_backward(be, MGT__F(dinp), MGT__CF(inp), MGT__CF(dout), n); return; }
    x = mgt__wide_in(be, inp, n);
    g = mgt__wide_in(be, dout, n); /* read before dinp (which may be dout) is written */
    d = mgt__wide_take(be, n);
    mgt__cpu_gelu_backward(be, d, x, g, n);
    mgt__wide_out(be, dinp, d, n);
}
static void mgt__t_rmsnorm_forward(mgt_backend *be, void *out, float *rstd, const void *inp, const void *w, float eps, int N, int C) {
    size_t n = (size_t)N * C;
    float *o;
    if (!MGT__WIDE(be)) { mgt__cpu_rmsnorm_forward(be, MGT__F(out), rstd, MGT__CF(inp), MGT__CF(w), eps, N, C); return; }
    o = mgt__wide_take(be, n);
    mgt__cpu_rmsnorm_forward(be, o, rstd, mgt__wide_in(be, inp, n), mgt__wide_in(be, w, (size_t)C), eps, N, C);
    mgt__wide_out(be, out, o, n);
}
static void mgt__t_rmsnorm_backward(mgt_backend *be, void *dinp, float *dw, const void *dout, const void *inp, const void *w, const float *rstd, int N,
                                    int C) {
    size_t n = (size_t)N * C;
    float *di;
    if (!MGT__WIDE(be)) { mgt__cpu_rmsnorm_backward(be, MGT__F(dinp), dw, MGT__CF(dout), MGT__CF(inp), MGT__CF(w), rstd, N, C); return; }
    di = mgt__wide_in(be, dinp, n); /* accumulated into (+=) */
    mgt__cpu_rmsnorm_backward(be, di, dw, mgt__wide_in(be, dout, n), mgt__wide_in(be, inp, n), mgt__wide_in(be, w, (size_t)C), rstd, N, C);
    mgt__wide_out(be, dinp, di, n);
}
static void mgt__t_rope(mgt_backend *be, void *qkv, int B, int T, int NH, int NKV, int hs, float theta, float sign, int pos0) {
    size_t n = (size_t)B * T * (NH + 2 * NKV) * hs;
    float *x;
    if (!MGT__WIDE(be)) { mgt__cpu_rope(be, MGT__F(qkv), B, T, NH, NKV, hs, theta, sign, pos0); return; }
    x = mgt__wide_in(be, qkv, n);
    mgt__cpu_rope(be, x, B, T, NH, NKV, hs, theta, sign, pos0);
    mgt__wide_out(be, qkv, x, n);
}
static void mgt__t_rope_forward(mgt_backend *be, void *qkv, int B, int T, int NH, int NKV, int hs, float theta, int pos0) {
    mgt__t_rope(be, qkv, B, T, NH, NKV, hs, theta, 1.0f, pos0);
}
static void mgt__t_rope_backward(mgt_backend *be, void *dqkv, int B, int T, int NH, int NKV, int hs, float theta, int pos0) {
    mgt__t_rope(be, dqkv, B, T, NH, NKV, hs, theta, -1.0f, pos0);
}
static void mgt__t_swiglu_forward(mgt_backend *be, void *out, const void *inp, int N, int H) {
    size_t n = (size_t)N * H;
    float *o;
    if (!MGT__WIDE(be)) { mgt__cpu_swiglu_forward(be, MGT__F(out), MGT__CF(inp), N, H); return; }
    o = mgt__wide_take(be, n);
    mgt__cpu_swiglu_forward(be, o, mgt__wide_in(be, inp, 2 * n), N, H);
    mgt__wide_out(be, out, o, n);
}
static void mgt__t_swiglu_backward(mgt_backend *be, void *dinp, const void *inp, const void *dout, int N, int H) {
    size_t n = (size_t)N * H;
    float *d;
    if (!MGT__WIDE(be)) { mgt__cpu_swiglu_backward(be, MGT__F(dinp), MGT__CF(inp), MGT__CF(dout), N, H); return; }
    d = mgt__wide_take(be, 2 * n);
    mgt__cpu_swiglu_backward(be, d, mgt__wide_in(be, inp, 2 * n), mgt__wide_in(be, dout, n), N, H);
    mgt__wide_out(be, dinp, d, 2 * n);
}
static void mgt__t_bias_residual(mgt_backend *be, void *out, const void *residual, const void *bias, int N, int C) {
    size_t n = (size_t)N * C;
    float *o;
    if (!MGT__WIDE(be)) { mgt__cpu_bias_residual(be, MGT__F(out), MGT__CF(residual), MGT__CF(bias), N, C); return; }
    o = mgt__wide_in(be, out, n);
    mgt__cpu_bias_residual(be, o, mgt__wide_in(be, residual, n), mgt__wide_in(be, bias, (size_t)C), N, C);
    mgt__wide_out(be, out, o, n);
}
static void mgt__t_bias_backward(mgt_backend *be, float *dbias, const void *dout, int N, int C) {
    if (!MGT__WIDE(be)) { mgt__cpu_bias_backward(be, dbias, MGT__CF(dout), N, C); return; }
    mgt__cpu_bias_backward(be, dbias, mgt__wide_in(be, dout, (size_t)N * C), N, C);
}
/* the reference is adamw on each tensor in turn */
static void mgt__cpu_adamw_many(mgt_backend *be, int count, float *const *param, void *const *param_copy, const float *const *grad, float *const *m,
                                float *const *v, const size_t *n, const float *weight_decay, float lr, float beta1, float beta2, float eps,
                                float grad_scale, float bias_correction1, float bias_correction2) {
    int k;
    for (k = 0; k < count; k++)
        be->adamw(be, param[k], param_copy[k], grad[k], m[k], v[k], n[k], lr, beta1, beta2, eps, weight_decay[k], grad_scale, bias_correction1,
                  bias_correction2);
}
/* the reference is the two ops one after the other */
static void mgt__cpu_residual_layernorm_forward(mgt_backend *be, void *res, void *out, float *mean, float *rstd, const void *residual, const void *res_bias,
                                                const void *weight, const void *bias, int N, int C) {
    be->bias_residual(be, res, residual, res_bias, N, C);
    be->layernorm_forward(be, out, mean, rstd, res, weight, bias, N, C);
}
#undef MGT__F
#undef MGT__CF

/* a CPU backend of `threads` threads storing `dtype`; wide_floats of fp32 workspace for 16-bit ops */
static mgt_result mgt__cpu_backend_create_typed(mgt_backend **out, int threads, size_t scratch_per_thread, int dtype, size_t wide_floats) {
    mgt_backend *be = (mgt_backend *)MGT_MALLOC(sizeof *be);
    mgt__cpu *cpu = (mgt__cpu *)MGT_MALLOC(sizeof *cpu);
    if (!be || !cpu) { MGT_FREE(be); MGT_FREE(cpu); return mgt__fail(MGT_ERROR_MEMORY, "out of memory creating the CPU backend"); }
    memset(be, 0, sizeof *be);
    memset(cpu, 0, sizeof *cpu);
    {
        mgt_result res = mgt__blas_prepare();
        if (res != MGT_OK) { MGT_FREE(be); MGT_FREE(cpu); return res; }
    }
    be->name = "cpu";
    be->dtype = dtype;
    be->elt = mgt__dtype_size(dtype);
    be->impl = cpu;
    be->host_memory = 1;
    be->alloc = mgt__cpu_alloc;
    be->free = mgt__cpu_free;
    be->upload = mgt__cpu_copy;
    be->download = mgt__cpu_copy;
    be->encoder_forward = mgt__t_encoder_forward;
    be->encoder_backward = mgt__t_encoder_backward;
    be->layernorm_forward = mgt__t_layernorm_forward;
    be->layernorm_backward = mgt__t_layernorm_backward;
    be->matmul_forward = mgt__t_matmul_forward;
    be->matmul_backward = mgt__t_matmul_backward;
    be->matmul_gelu_forward = mgt__t_matmul_gelu_forward;
    be->matmul_gelu_backward = mgt__t_matmul_gelu_backward;
    be->attention_forward = mgt__t_attention_forward;
    be->attention_backward = mgt__t_attention_backward;
    be->attention_part_forward = mgt__t_attention_part_forward;
    be->attention_part_backward = mgt__t_attention_part_backward;
    be->copy_cols = mgt__cpu_copy_cols;
    be->gelu_forward = mgt__t_gelu_forward;
    be->gelu_backward = mgt__t_gelu_backward;
    be->rmsnorm_forward = mgt__t_rmsnorm_forward;
    be->rmsnorm_backward = mgt__t_rmsnorm_backward;
    be->rope_forward = mgt__t_rope_forward;
    be->rope_backward = mgt__t_rope_backward;
    be->swiglu_forward = mgt__t_swiglu_forward;
    be->swiglu_backward = mgt__t_swiglu_backward;
    be->add_inplace = mgt__cpu_add_inplace;
    be->bias_residual = mgt__t_bias_residual;
    be->residual_layernorm_forward = mgt__cpu_residual_layernorm_forward;
    be->bias_backward = mgt__t_bias_backward;
    be->xent_partial = mgt__cpu_xent_partial;
    be->xent_finish = mgt__cpu_xent_finish;
    be->sum_squares = mgt__cpu_sum_squares;
    be->adamw = mgt__cpu_adamw;
    be->adamw_many = mgt__cpu_adamw_many;
    be->scale = mgt__cpu_scale;
    be->zero = mgt__cpu_zero;
    be->cast = mgt__cpu_cast;
    if (!mgt__pool_init(&cpu->pool, threads)) {
        mgt__pool_destroy(&cpu->pool);
        MGT_FREE(cpu); MGT_FREE(be);
        return mgt__fail(MGT_ERROR_MEMORY, "cannot start %d CPU threads", threads);
    }
    cpu->scratch_per_thread = scratch_per_thread;
    cpu->scratch = (float *)be->alloc(be, sizeof(float) * scratch_per_thread * (size_t)cpu->pool.n, MGT_MEM_WORKSPACE);
    cpu->wide_floats = dtype == MGT_F32 ? 0 : wide_floats;
    cpu->onednn = dtype == MGT_BF16 ? mgt__onednn_for_bf16() : NULL;
    cpu->wide = cpu->wide_floats ? (float *)be->alloc(be, sizeof(float) * cpu->wide_floats, MGT_MEM_WORKSPACE) : NULL;
    if (!cpu->scratch || (cpu->wide_floats && !cpu->wide)) {
        be->free(be, cpu->scratch, sizeof(float) * scratch_per_thread * (size_t)cpu->pool.n, MGT_MEM_WORKSPACE);
        mgt__pool_destroy(&cpu->pool);
        MGT_FREE(cpu); MGT_FREE(be);
        return mgt__fail(MGT_ERROR_MEMORY, "out of memory for the CPU backend's workspace");
    }
    *out = be;
    return MGT_OK;
}
static void mgt__cpu_backend_destroy(mgt_backend *be) {
    mgt__cpu *cpu;
    if (!be) return;
    cpu = (mgt__cpu *)be->impl;
    be->free(be, cpu->scratch, sizeof(float) * cpu->scratch_per_thread * (size_t)cpu->pool.n, MGT_MEM_WORKSPACE);
    be->free(be, cpu->wide, sizeof(float) * cpu->wide_floats, MGT_MEM_WORKSPACE);
    mgt__pool_destroy(&cpu->pool);
    MGT_FREE(cpu);
    MGT_FREE(be);
}
/* ==== end src/backend_cpu.c ==== */
/* ==== begin src/world.c ==== */
#line 1 "src/world.c"
/* src/world.c - the world table: where a run's ranks live and how they reach each other */
/* ---- worlds ------------------------------------------------------------------------------------
   A run's ranks live in one world, which makes each rank's backend and communicator and wakes the
   others when one fails. Four fill the table: rank threads of this process (mgt__world_local,
   src/comm_local.c), MPI processes around CPU ranks (mgt__world_mpi, src/comm_mpi.c), ranks on
   GPUs talking through NCCL (mgt__world_nccl, src/device.c) and the step simulator
   (mgt__world_sim, src/sim_comm.c). A run holds one and never asks which; a new transport fills
   one more. The processes around the ranks (one, or MPI's) are apart from the world: the run's
   `procs`, NULL for one process, which a world may use (NCCL shares its unique id through it). */

typedef struct mgt__mpi_world mgt__mpi_world;

typedef struct mgt__world_args { /* what a world is made from */
    int world, first, count;      /* ranks in all; this process's are first .. first + count - 1 */
    double timeout_s;             /* [parallel] timeout_s */
    mgt__mpi_world *procs;        /* the processes around them, or NULL for one */
    const mgt_cuda_api *cuda;     /* a GPU world's CUDA backend library */
} mgt__world_args;

typedef struct mgt__rank_want { /* what a rank's backend is made for */
    int rank, dtype, threads;     /* threads: a CPU rank's */
    size_t scratch_floats;        /* a CPU rank's attention scratch */
    size_t widen_floats;          /* and its widest operand in fp32 (bf16 and fp16 storage) */
} mgt__rank_want;

typedef struct mgt__world_api {
    const char *device;           /* what mgt_run_device says: "cpu" or "cuda" */
    /* ranks on GPUs: every group is used once when a rank connects (NCCL connects lazily), an
       untimed warm-up step loads the kernels, and the GPUs are read for the dashboard */
    int on_gpus;
    int holds_values;             /* 0: buffers hold nothing (simulated), nothing to initialise */
    mgt_result (*create)(const mgt__world_args *a, void **world); /* NULL: made by its owner */
    /* a rank's backend, and the GPU it is on (-1: none) */
    mgt_result (*backend)(void *world, const mgt__rank_want *want, mgt_backend **out, int *device);
    void (*backend_destroy)(void *world, mgt_backend *be); /* NULL: the world's own */
    /* a rank's communicator, made on the rank's thread beside the others' (NCCL's splits are collective) */
    mgt_result (*comm)(void *world, int rank, mgt_backend *be, const mgt_group *const *groups, int ngroups, mgt_comm **out);
    mgt_result (*settle)(void *world, mgt_comm *c);   /* waits for what the rank enqueued; NULL: calls complete when they return */
    void (*comm_destroy)(void *world, mgt_comm *c);   /* NULL: the world's own */
    void (*rank_failed)(void *world, mgt_comm *c);    /* a rank failed: peers waiting on it return an error */
    void (*read_gpu)(void *world, int device, mgt_gpu_reading *out); /* NULL: no GPUs */
    void (*destroy)(void *world);                     /* NULL: its owner's */
} mgt__world_api;

/* a CPU rank's backend, for the worlds of CPU ranks */
static mgt_result mgt__world_cpu_backend(void *world, const mgt__rank_want *want, mgt_backend **out, int *device) {
    (void)world;
    *device = -1;
    return mgt__cpu_backend_create_typed(out, want->threads, want->scratch_floats, want->dtype, want->widen_floats);
}
static void mgt__world_cpu_backend_destroy(void *world, mgt_backend *be) {
    (void)world;
    mgt__cpu_backend_destroy(be);
}
/* ==== end src/world.c ==== */
/* ==== begin src/model.c ==== */
#line 1 "src/model.c"
/* src/model.c - the run's plan (mgt_plan_make: the grid, the batch's split, the stages, the sizes)
   and the model: a rank's tensors in one buffer, each a slice of a global tensor */
/* ---- the plan: ranks, groups, stages -------------------------------------------------------- */

MGTDEF void mgt_rank_coords(int rank, int dp, int tp, int *dp_index, int *tp_index, int *pp_index) {
    *tp_index = rank % tp;
    *dp_index = rank / tp % dp;
    *pp_index = rank / (tp * dp);
}
MGTDEF int mgt_rank_at(int dp_index, int tp_index, int pp_index, int dp, int tp) { return (pp_index * dp + dp_index) * tp + tp_index; }
MGTDEF const char *mgt_grid_text(int dp, int cp, int tp, int pp, char *out, size_t cap) {
    if (cp > 1) snprintf(out, cap, "dp %d x cp %d x tp %d x pp %d", dp, cp, tp, pp);
    else snprintf(out, cap, "dp %d x tp %d x pp %d", dp, tp, pp);
    return out;
}

/* The model's shapes from its preset. GPT-2 and the Llama family are settings of one model: the
   normalisation, the positions, the MLP, the key/value heads, the biases and the head are chosen
   here, and every size below follows from these numbers (layout, activations, plan, costs). */
static mgt_dims mgt__model_dims(const mgt_config *cfg) {
    mgt_dims d;
    d.C = cfg->model.d_model;
    d.NH = cfg->model.n_head;
    d.NKV = cfg->model.n_kv_head ? cfg->model.n_kv_head : d.NH;
    d.hs = d.C / d.NH;
    d.H = cfg->model.d_ff ? cfg->model.d_ff : 4 * d.C;
    d.rms = cfg->model.norm == MGT_NORM_RMSNORM;
    d.rope = cfg->model.positions == MGT_POSITIONS_ROPE;
    d.swiglu = cfg->model.mlp == MGT_MLP_SWIGLU;
    d.bias = cfg->model.bias != 0;
    d.tied = cfg->model.tied_head != 0;
    d.qkv = (d.NH + 2 * d.NKV) * d.hs;
    d.fc = d.swiglu ? 2 * d.H : d.H;
    return d;
}
/* key/value heads per TP rank: n_kv_head / tp; or, when tp is a multiple of n_kv_head, one, the head
   its query heads read, held by tp / n_kv_head neighbouring TP ranks (its replicas; the rule of
   vLLM's and SGLang's QKVParallelLinear: Megatron-LM's attention asserts that tp divides the
   query groups). The replicas' gradients are summed over them (mgt__kv_grads), so they stay equal. */
static int mgt__kv_local(const mgt_dims *d, int tp) { return d->NKV >= tp ? d->NKV / tp : 1; }
static int mgt__kv_replicas(const mgt_dims *d, int tp) { return d->NKV >= tp ? 1 : tp / d->NKV; }

/* Ranks are ordered TP fastest, then CP, then DP, then PP, so a TP group is neighbouring ranks (mgt_rank_coords). */

static double mgt__block_cost(const mgt_config *cfg) { /* forward FLOPs per token of one block */
    mgt_dims d = mgt__model_dims(cfg);
    double C = d.C, T = cfg->model.seq_len;
    return 2.0 * C * ((double)d.qkv + C + (double)d.fc + (double)d.H) + 4.0 * T * C; /* GPT-2: 24 C^2 + 4 T C */
}

/* contiguous blocks per stage minimising the most expensive stage; the last stage also runs the
   LM head (2 x C x Vp per token), so on a large vocabulary it gets fewer blocks */
static mgt_result mgt__plan_stages(const mgt_config *cfg, mgt_plan *p) {
    int L = cfg->model.n_layer, S = p->pp, s, l, k;
    double block = mgt__block_cost(cfg), head = 2.0 * cfg->model.d_model * (double)p->Vp;
    size_t w = (size_t)L + 1;
    double *best; /* best[s w + l]: the lowest max-cost of blocks [0,l) on stages [0,s) */
    int *cut;     /* cut[s w + l]: where the last of those stages begins */
    if (S == 1) { p->stage_first[0] = 0; p->stage_first[1] = L; return MGT_OK; }
    best = (double *)MGT_MALLOC(sizeof(double) * (size_t)(S + 1) * w);
    cut = (int *)MGT_MALLOC(sizeof(int) * (size_t)(S + 1) * w);
    if (!best || !cut) {
        MGT_FREE(best);
        MGT_FREE(cut);
        return mgt__fail(MGT_ERROR_MEMORY, "out of memory planning %d pipeline stages", S);
    }
    for (l = 0; l <= L; l++) best[w + (size_t)l] = l * block, cut[w + (size_t)l] = 0;
    for (s = 2; s <= S; s++)
        for (l = 0; l <= L; l++) {
            best[(size_t)s * w + (size_t)l] = 1e300;
            for (k = s - 1; k < l; k++) { /* stage s-1 takes [k, l), at least one block each */
                double c = (l - k) * block + (s == S && l == L ? head : 0), m = best[(size_t)(s - 1) * w + (size_t)k] > c ? best[(size_t)(s - 1) * w + (size_t)k] : c;
                if (m < best[(size_t)s * w + (size_t)l]) { best[(size_t)s * w + (size_t)l] = m; cut[(size_t)s * w + (size_t)l] = k; }
            }
        }
    p->stage_first[S] = L;
    for (s = S, l = L; s >= 1; s--) { p->stage_first[s - 1] = cut[(size_t)s * w + (size_t)l]; l = cut[(size_t)s * w + (size_t)l]; }
    p->stage_first[0] = 0;
    MGT_FREE(best);
    MGT_FREE(cut);
    return MGT_OK;
}

/* Interleaved 1F1B (parallel.pp_virtual = V > 1): the blocks are cut into pp x V chunks of equal
   size, and chunk g goes to stage g mod pp, so stage s holds chunks s, s + pp, ..., s + (V-1) pp
   (Megatron-LM's virtual pipeline stages). With V = 1 a stage's one chunk is its contiguous,
   balanced range (mgt__plan_stages). */
static int mgt__plan_chunks(const mgt_plan *p) { return p->pp > 1 ? p->cfg.parallel.pp_virtual : 1; }
/* parallel.pp_schedule = zb over more than one stage: the zero-bubble schedule (src/pipeline.c) */
#define MGT__SCHEDULE_ZB 2
static int mgt__plan_zb(const mgt_plan *p) { return p->pp > 1 && p->cfg.parallel.pp_schedule == MGT__SCHEDULE_ZB; }
static int mgt__chunk_first(const mgt_plan *p, int g) { /* first block of global chunk g (of pp x V; g = pp x V: n_layer) */
    int V = mgt__plan_chunks(p);
    return V == 1 ? p->stage_first[g] : g * (p->cfg.model.n_layer / (p->pp * V));
}
/* block b of stage s's blocks (its chunks' blocks, one chunk after the other) as a layer of the model */
static int mgt__stage_layer(const mgt_plan *p, int s, int b) {
    int per = mgt__chunk_first(p, s + 1) - mgt__chunk_first(p, s); /* blocks in each of its chunks */
    return mgt__chunk_first(p, s + (b / per) * p->pp) + b % per;
}
static int mgt__stage_blocks(const mgt_plan *p, int s) { return mgt__plan_chunks(p) * (mgt__chunk_first(p, s + 1) - mgt__chunk_first(p, s)); }

/* the model's parameters, without the vocabulary's padding (GPT-2: V C + T C + L (12 C^2 + 13 C) + 2 C) */
static size_t mgt__global_params(const mgt_config *cfg) {
    mgt_dims d = mgt__model_dims(cfg);
    size_t C = (size_t)d.C, V = (size_t)cfg->model.vocab_size, norm = d.rms ? C : 2 * C;
    size_t block = 2 * norm + (size_t)d.qkv * C + C * C + (size_t)d.fc * C + C * (size_t)d.H + (d.bias ? (size_t)d.qkv + (size_t)d.fc + 2 * C : 0);
    return V * C * (d.tied ? 1 : 2) + (d.rope ? 0 : (size_t)cfg->model.seq_len * C) + (size_t)cfg->model.n_layer * block + norm;
}

/* the plan of a validated config */
static mgt_result mgt__plan_make(const mgt_config *cfg, mgt_plan *p) {
    memset(p, 0, sizeof *p);
    p->cfg = *cfg;
    p->dp = cfg->parallel.dp;
    p->tp = cfg->parallel.tp;
    p->pp = cfg->parallel.pp;
    p->cp = cfg->parallel.cp;
    p->replicas = p->dp * p->cp;
    p->zero = p->replicas > 1 ? cfg->parallel.zero : 0; /* ZeRO over a single replica changes nothing */
    p->world = p->replicas * p->tp * p->pp;
    p->micro_steps = cfg->train.global_batch / (cfg->train.micro_batch * p->dp);
    p->Vp = (cfg->model.vocab_size + 128 * p->tp - 1) / (128 * p->tp) * (128 * p->tp);
    p->params = mgt__global_params(cfg);
    p->dims = mgt__model_dims(cfg);
    return mgt__plan_stages(cfg, p);
}
MGTDEF mgt_result mgt_plan_make(const mgt_config *cfg, mgt_plan *out) {
    if (!cfg || !out) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_plan_make: cfg and out are required");
    MGT__TRY(mgt_config_validate(cfg));
    MGT__TRY(mgt__layout_chosen(cfg, "a plan"));
    return mgt__plan_make(cfg, out);
}

/* ---- the model: a rank's tensors in one contiguous buffer, each a slice of a global tensor ---- */

enum { /* the kinds of tensor of a block, in storage order; a model without biases (Llama) has only
          some of them (mgt__block_slots) */
    MGT__LN1W, MGT__LN1B, MGT__QKVW, MGT__QKVB, MGT__PROJW, MGT__PROJB,
    MGT__LN2W, MGT__LN2B, MGT__FCW, MGT__FCB, MGT__FCPROJW, MGT__FCPROJB, MGT__BLOCK_TENSORS
};

/* A local tensor: local row r of segment i is global row seg_global[i] + (r - seg_local[i]);
   local column c is global column col_start + c. Rows of wte at or beyond vocab_size are padding:
   zero, no logit, no gradient, not in checkpoints. */
typedef struct mgt__tensor {
    mgt_tensor_info info;   /* global name and shape */
    int rows, cols;         /* local shape; cols is 1 for vectors */
    int nseg, seg_local[3], seg_global[3], seg_rows[3];
    int col_start;
    int tp_replicated;      /* the same values on every TP rank */
    size_t kv_from;         /* with replicated key/value heads: local elements from here on (c_attn's k and v rows) are
                               held by the kv group too: their gradients summed over it, counted once; else 0 */
    int tied_copy;          /* the last stage's copy of wte: kept equal, saved and counted once */
    int sp_sum;             /* sequence parallelism: a norm's weight or bias, whose gradient each TP rank takes from its
                               rows only: summed over TP (mgt__sp_grads) */
    int decay;              /* AdamW weight decay applies (matrices and embeddings) */
    float init_std, init_value;
    size_t offset;          /* in the rank's flat buffer, floats */
    int unit;
} mgt__tensor;

/* A unit is the tensors communicated and sharded together: the embedding, each block, the head. */
typedef struct mgt__unit {
    size_t offset, size;    /* in the flat buffer; size is a multiple of 16 x replicas */
    size_t shard_offset;    /* of this rank's 1/replicas slice in its shard buffers */
    int first_tensor, ntensors;
} mgt__unit;

static size_t mgt__tensor_storage(const mgt__tensor *t) { return (size_t)t->rows * (size_t)t->cols; }

/* global row of local row r, or -1 for padding */
static int mgt__global_row(const mgt__tensor *t, int r) {
    int i;
    for (i = 0; i < t->nseg; i++)
        if (r >= t->seg_local[i] && r < t->seg_local[i] + t->seg_rows[i]) {
            int g = t->seg_global[i] + (r - t->seg_local[i]);
            return g < t->info.shape[0] ? g : -1;
        }
    return -1;
}

typedef struct mgt__layout {
    mgt__tensor *t;
    int n, cap;
    int per_block, slot[MGT__BLOCK_TENSORS]; /* tensors of a block, and where each kind is in it (-1: absent) */
    int emb_tensors;                         /* wte, and wpe with learned positions */
    mgt__unit *u;
    int nu;
    size_t size;
} mgt__layout;

/* appends a tensor with one row segment [g0, g0 + rows) (or three for qkv, given by the caller) */
static mgt__tensor *mgt__add(mgt__layout *lay, const char *name, int grows, int gcols, int rows, int cols, int row0, int col0,
                             int decay, float std, float value, int tp_replicated) {
    mgt__tensor *x = &lay->t[lay->n++];
    memset(x, 0, sizeof *x);
    mgt__strlcpy(x->info.name, name, sizeof x->info.name);
    x->info.ndim = gcols ? 2 : 1;
    x->info.shape[0] = grows;
    x->info.shape[1] = gcols;
    x->info.numel = (size_t)grows * (size_t)(gcols ? gcols : 1);
    x->rows = rows;
    x->cols = cols ? cols : 1;
    x->nseg = 1;
    x->seg_rows[0] = rows;
    x->seg_global[0] = row0;
    x->col_start = col0;
    x->decay = decay;
    x->init_std = std;
    x->init_value = value;
    x->tp_replicated = tp_replicated;
    x->unit = lay->nu - 1;
    return x;
}
static void mgt__open_unit(mgt__layout *lay) {
    mgt__unit *u = &lay->u[lay->nu++];
    memset(u, 0, sizeof *u);
    u->first_tensor = lay->n;
}
/* closes the unit: lays its tensors out and pads it to a multiple of 16 x replicas floats */
static void mgt__close_unit(mgt__layout *lay, int replicas) {
    mgt__unit *u = &lay->u[lay->nu - 1];
    size_t off = lay->size, align = 16 * (size_t)replicas;
    int i;
    u->offset = lay->size;
    u->ntensors = lay->n - u->first_tensor;
    for (i = u->first_tensor; i < lay->n; i++) {
        lay->t[i].offset = off;
        off += (mgt__tensor_storage(&lay->t[i]) + 15) & ~(size_t)15;
    }
    u->size = (off - u->offset + align - 1) / align * align;
    u->shard_offset = (lay->nu > 1 ? lay->u[lay->nu - 2].shard_offset + lay->u[lay->nu - 2].size / (size_t)replicas : 0);
    lay->size = u->offset + u->size;
}

/* which of the block tensors (MGT__LN1W..) a model has: GPT-2 all twelve, a model without biases
   (Llama) only the weights. slot[k] is tensor k's index inside its block, or -1; returns the count */
static int mgt__block_slots(const mgt_dims *d, int slot[MGT__BLOCK_TENSORS]) {
    int k, n = 0;
    for (k = 0; k < MGT__BLOCK_TENSORS; k++) {
        int norm_bias = k == MGT__LN1B || k == MGT__LN2B, linear_bias = k == MGT__QKVB || k == MGT__PROJB || k == MGT__FCB || k == MGT__FCPROJB;
        slot[k] = (norm_bias && d->rms) || (linear_bias && !d->bias) ? -1 : n++; /* LayerNorm always has its bias, RMSNorm never */
    }
    return n;
}

/* the tensors of pipeline stage `stage` on tensor-parallel rank `tpr` (Megatron splits). Names are
   GPT-2's (Hugging Face), whatever the model, so that a checkpoint maps to Hugging Face's names by
   a table: c_attn.weight holds q, k and v rows one after the other ((NH + 2 NKV) hs rows: Llama's
   q_proj, k_proj, v_proj), mlp.c_fc.weight holds SwiGLU's gate rows then its up rows (gate_proj,
   up_proj), mlp.c_proj is down_proj, ln_1/ln_2/ln_f the norms, lm_head.weight a separate head. */
static void mgt__layout_make(mgt__layout *lay, const mgt_plan *p, int stage, int tpr) {
    const mgt_config *cfg = &p->cfg;
    mgt_dims d = p->dims;
    int L = cfg->model.n_layer, C = d.C, T = cfg->model.seq_len, V = cfg->model.vocab_size, tp = p->tp, hs = d.hs;
    int Cl = C / tp, KVl = mgt__kv_local(&d, tp) * hs, kvr = mgt__kv_replicas(&d, tp), Hl = d.H / tp, Vl = p->Vp / tp, l, b, nb = mgt__stage_blocks(p, stage);
    int norm_bias = !d.rms; /* LayerNorm has a bias, RMSNorm none */
    int sp = cfg->parallel.sp && tp > 1; /* the norms' gradients are partial on each TP rank */
    float std = 0.02f, proj_std = 0.02f / sqrtf(2.0f * (float)L);
    char name[64];
    lay->n = lay->nu = 0;
    lay->size = 0;
    lay->per_block = mgt__block_slots(&d, lay->slot);
    lay->emb_tensors = d.rope ? 1 : 2;
    if (stage == 0) {
        mgt__open_unit(lay);
        mgt__add(lay, "wte", V, C, Vl, C, tpr * Vl, 0, 1, std, 0, 0);
        if (!d.rope) mgt__add(lay, "wpe", T, C, T, C, 0, 0, 1, std, 0, 1);
        mgt__close_unit(lay, p->replicas);
    }
    for (b = 0; b < nb; b++) { /* the stage's chunks in order: with pp_virtual > 1 its layers are not contiguous */
        mgt__tensor *x;
        int i, k, kv = d.NKV * hs;
        l = mgt__stage_layer(p, stage, b);
        mgt__open_unit(lay);
#define MGT__NAME(suffix) (snprintf(name, sizeof name, "h.%d.%s", l, suffix), name)
        mgt__add(lay, MGT__NAME("ln_1.weight"), C, 0, C, 0, 0, 0, 0, 0, 1, 1)->sp_sum = sp;
        if (norm_bias) mgt__add(lay, MGT__NAME("ln_1.bias"), C, 0, C, 0, 0, 0, 0, 0, 0, 1)->sp_sum = sp;
        for (k = 0; k < 1 + d.bias; k++) { /* the weight, then the bias: this rank's q heads, k heads, v heads */
            x = k == 0 ? mgt__add(lay, MGT__NAME("attn.c_attn.weight"), d.qkv, C, Cl + 2 * KVl, C, 0, 0, 1, std, 0, 0)
                       : mgt__add(lay, MGT__NAME("attn.c_attn.bias"), d.qkv, 0, Cl + 2 * KVl, 0, 0, 0, 0, 0, 0, 0);
            x->nseg = 3;
            for (i = 0; i < 3; i++) { /* replicas: TP ranks tpr / kvr * kvr .. + kvr - 1 hold the same key/value head */
                x->seg_local[i] = i == 0 ? 0 : Cl + (i - 1) * KVl;
                x->seg_global[i] = i == 0 ? tpr * Cl : C + (i - 1) * kv + tpr / kvr * KVl;
                x->seg_rows[i] = i == 0 ? Cl : KVl;
            }
            if (kvr > 1) x->kv_from = (size_t)Cl * (size_t)x->cols;
        }
        mgt__add(lay, MGT__NAME("attn.c_proj.weight"), C, C, C, Cl, 0, tpr * Cl, 1, proj_std, 0, 0);
        if (d.bias) mgt__add(lay, MGT__NAME("attn.c_proj.bias"), C, 0, C, 0, 0, 0, 0, 0, 0, 1);
        mgt__add(lay, MGT__NAME("ln_2.weight"), C, 0, C, 0, 0, 0, 0, 0, 1, 1)->sp_sum = sp;
        if (norm_bias) mgt__add(lay, MGT__NAME("ln_2.bias"), C, 0, C, 0, 0, 0, 0, 0, 0, 1)->sp_sum = sp;
        for (k = 0; k < 1 + d.bias; k++) { /* GELU: this rank's hidden units; SwiGLU: its gate units, then its up units */
            x = k == 0 ? mgt__add(lay, MGT__NAME("mlp.c_fc.weight"), d.fc, C, d.fc / tp, C, tpr * Hl, 0, 1, std, 0, 0)
                       : mgt__add(lay, MGT__NAME("mlp.c_fc.bias"), d.fc, 0, d.fc / tp, 0, tpr * Hl, 0, 0, 0, 0, 0);
            if (d.swiglu) {
                x->nseg = 2;
                for (i = 0; i < 2; i++) { x->seg_local[i] = i * Hl; x->seg_global[i] = i * d.H + tpr * Hl; x->seg_rows[i] = Hl; }
            }
        }
        mgt__add(lay, MGT__NAME("mlp.c_proj.weight"), C, d.H, C, Hl, 0, tpr * Hl, 1, proj_std, 0, 0);
        if (d.bias) mgt__add(lay, MGT__NAME("mlp.c_proj.bias"), C, 0, C, 0, 0, 0, 0, 0, 0, 1);
#undef MGT__NAME
        mgt__close_unit(lay, p->replicas);
    }
    if (stage == p->pp - 1) {
        mgt__open_unit(lay);
        mgt__add(lay, "ln_f.weight", C, 0, C, 0, 0, 0, 0, 0, 1, 1)->sp_sum = sp;
        if (norm_bias) mgt__add(lay, "ln_f.bias", C, 0, C, 0, 0, 0, 0, 0, 0, 1)->sp_sum = sp;
        if (!d.tied) mgt__add(lay, "lm_head.weight", V, C, Vl, C, tpr * Vl, 0, 1, std, 0, 0);
        else if (p->pp > 1) mgt__add(lay, "wte", V, C, Vl, C, tpr * Vl, 0, 1, std, 0, 0)->tied_copy = 1;
        mgt__close_unit(lay, p->replicas);
    }
}

static int mgt__layout_alloc(mgt__layout *lay, const mgt_plan *p) {
    int blocks = p->cfg.model.n_layer; /* an upper bound for any stage */
    lay->cap = 2 + MGT__BLOCK_TENSORS * blocks + 3;
    lay->t = (mgt__tensor *)MGT_MALLOC(sizeof(mgt__tensor) * (size_t)lay->cap);
    lay->u = (mgt__unit *)MGT_MALLOC(sizeof(mgt__unit) * (size_t)(blocks + 2));
    (void)p;
    return lay->t && lay->u;
}
static void mgt__layout_free(mgt__layout *lay) {
    MGT_FREE(lay->t);
    MGT_FREE(lay->u);
    memset(lay, 0, sizeof *lay);
}

static uint64_t mgt__name_key(const char *name) { /* FNV-1a: the generator's stream per tensor */
    uint64_t h = 0xcbf29ce484222325ULL;
    while (*name) { h ^= (unsigned char)*name++; h *= 0x100000001b3ULL; }
    return h;
}

/* Activations of one micro-batch on one rank, with the rank's local widths, in the storage type
   (`void *`) or fp32 (`float *`). With recompute = full, every block shares one set and only the
   residual stream at each block's input is kept; with recompute = selective, the blocks share the
   outputs of the cheap memory-bound ops (ln1, ln2, fch_gelu: rebuilt in backward from what each
   block keeps) and keep the GEMMs' and attention's. R is the rows of the residual stream the rank
   holds (mgt__rows: N, or N / tp under sequence parallelism). */
typedef struct mgt__layer_acts {
    void *ln1; float *ln1_mean, *ln1_rstd; /* (R,C) (R) (R) */
    void *qkv;                             /* (N,3Cl) */
    void *att;                             /* (B,NHl,T,T) probabilities, or (B,NHl,T) fp32 logsumexps (att_lse) */
    void *atty;                            /* (N,Cl) */
    void *res2;                            /* (R,C) residual after attention */
    void *ln2; float *ln2_mean, *ln2_rstd; /* (R,C) (R) (R) */
    void *fch, *fch_gelu;                  /* (N,Hl) */
    /* pp_schedule = zb: the output gradients of the block's matmuls, kept from its input-gradient pass
       (B) to its weight-gradient pass (W), which reads them with the matmuls' inputs above */
    void *dmlp, *dattn;                    /* (N,C) c_proj's of the MLP and of attention (every TP rank's rows); without sequence
                                              parallelism or recompute they take the block's output's and res2's place */
    void *dfch, *dqkv;                     /* (N,Fl) (N,3Cl); without recompute dqkv takes fch's place */
} mgt__layer_acts;

typedef struct mgt__acts {
    void **resid;                          /* nblocks+1 of (R,C): input of each block, then the output */
    mgt__layer_acts *layer;                /* nblocks */
    void *lnf; float *lnf_mean, *lnf_rstd; /* (R,C) (R) (R), last stage */
    float *logits;                         /* (N,Vl); dlogits in place, last stage; storage type (typed float * for fp32 tools) */
    float *xent;                           /* (tp,N,3) cross-entropy partials of every TP rank, last stage */
    double *losses;                        /* (N) */
    int *inputs, *targets;                 /* (N) */
    void *dgrad;                           /* (N,C) pp_virtual > 1: the gradient a chunk receives, then the one it sends (NULL otherwise) */
} mgt__acts;

/* consecutive 256-byte aligned pieces of one block (a device block starts 256-byte aligned: cuBLASLt
   picks its fastest kernels for pointers that are, cublasLt.h's MIN_ALIGNMENT default); a NULL base
   only measures (offsets, never pointers, are added up: arithmetic on a null pointer is undefined) */
#define MGT__CARVE_ALIGN 256
static size_t mgt__carve_bytes(size_t bytes) { return (bytes + MGT__CARVE_ALIGN - 1) & ~(size_t)(MGT__CARVE_ALIGN - 1); }
typedef struct mgt__cursor { char *base; size_t used; } mgt__cursor;
static void *mgt__carve(mgt__cursor *c, size_t bytes) {
    void *p = c->base ? c->base + c->used : NULL;
    c->used += mgt__carve_bytes(bytes);
    return p;
}

/* a rank's widths: Cl its query channels (NHl heads), KVl its key or value channels, Hl its MLP hidden
   units, Fl the width of its MLP's first matmul (Hl, or 2 Hl for SwiGLU's gate and up); att_lse as the
   backend's (mgt_backend.att_lse). Under context parallelism (cp > 1) T is the rank's share of the
   sequence, seq_len / cp, held as two chunks of T / 2: the rows are (2, B, T / 2), chunk-major */
typedef struct mgt__shape { int B, T, C, Cl, KVl, Hl, Fl, NHl, Vl, tp, nblocks, first, last, recompute /* MGT_RECOMPUTE_* */, att_lse, sp, chunks, cp; size_t elt; int zb; } mgt__shape; /* chunks: pp_virtual, 1 without; zb: the zero-bubble schedule (backward split into B and W) */

/* rows of the residual stream a rank holds: all B x T, or under sequence parallelism (sp) its TP
   rank's contiguous 1/tp of them (the norms, residual adds and row-parallel biases run on these) */
static int mgt__rows(const mgt__shape *s) { return s->B * s->T / (s->sp ? s->tp : 1); }

/* bytes of what attention saves per layer (mgt_backend.att_lse; ring attention, cp > 1, always saves
   the log-sum-exps) */
static size_t mgt__att_bytes(size_t B, size_t NH, size_t T, size_t elt, int att_lse) { return att_lse ? B * NH * T * sizeof(float) : B * NH * T * T * elt; }
/* the query rows of one attention call: the whole sequence, or under context parallelism one chunk */
static int mgt__att_T(const mgt__shape *s) { return s->cp > 1 ? s->T / 2 : s->T; }
/* the CPU backend's attention scratch per thread: a T x T score matrix, or ring attention's two of
   a chunk (probabilities and their gradient) */
static size_t mgt__att_scratch_floats(const mgt__shape *s) {
    size_t t = (size_t)mgt__att_T(s);
    return (s->cp > 1 ? 2 : 1) * t * t;
}

/* lays one micro-batch's activations out from base (NULL: only measures); returns the bytes */
static size_t mgt__acts_layout(mgt__acts *a, char *base, const mgt__shape *s) {
    mgt__cursor cur = {base, 0};
    size_t N = (size_t)s->B * (size_t)s->T, R = (size_t)mgt__rows(s), f = sizeof(float), e = s->elt, C = (size_t)s->C, l;
    int sets = s->nblocks == 0 ? 0 : (s->recompute == MGT_RECOMPUTE_FULL ? 1 : s->nblocks), selective = s->recompute == MGT_RECOMPUTE_SELECTIVE;
    void *ln1 = NULL, *ln2 = NULL, *fch_gelu = NULL; /* selective: shared by the blocks */
    for (l = 0; l <= (size_t)s->nblocks; l++) a->resid[l] = mgt__carve(&cur, R * C * e);
    if (selective && sets) {
        ln1 = mgt__carve(&cur, R * C * e);
        ln2 = mgt__carve(&cur, R * C * e);
        fch_gelu = mgt__carve(&cur, N * (size_t)s->Hl * e);
    }
    for (l = 0; l < (size_t)sets; l++) {
        mgt__layer_acts *x = &a->layer[l];
        x->ln1 = selective ? ln1 : mgt__carve(&cur, R * C * e);
        x->ln1_mean = (float *)mgt__carve(&cur, R * f);
        x->ln1_rstd = (float *)mgt__carve(&cur, R * f);
        x->qkv = mgt__carve(&cur, N * (size_t)(s->Cl + 2 * s->KVl) * e);
        x->att = mgt__carve(&cur, mgt__att_bytes((size_t)s->B, (size_t)s->NHl, (size_t)s->T, e, s->att_lse || s->cp > 1));
        x->atty = mgt__carve(&cur, N * (size_t)s->Cl * e);
        x->res2 = mgt__carve(&cur, R * C * e);
        x->ln2 = selective ? ln2 : mgt__carve(&cur, R * C * e);
        x->ln2_mean = (float *)mgt__carve(&cur, R * f);
        x->ln2_rstd = (float *)mgt__carve(&cur, R * f);
        x->fch = mgt__carve(&cur, N * (size_t)s->Fl * e);
        x->fch_gelu = selective ? fch_gelu : mgt__carve(&cur, N * (size_t)s->Hl * e);
        if (s->zb && !s->sp && !s->recompute) { /* dead once B has read them: the block's output (block b+1's B, or the head's, read it
                                                   first) and res2 (after ln2's backward), each (N,C) when R = N */
            x->dmlp = a->resid[l + 1];
            x->dattn = x->res2;
        } else {
            x->dmlp = s->zb ? mgt__carve(&cur, N * C * e) : NULL;
            x->dattn = s->zb ? mgt__carve(&cur, N * C * e) : NULL;
        }
        x->dfch = s->zb ? mgt__carve(&cur, N * (size_t)s->Fl * e) : NULL;
        if (s->zb && !s->recompute && s->Cl + 2 * s->KVl <= s->Fl) x->dqkv = x->fch; /* fch is dead once the MLP's backward read it */
        else x->dqkv = s->zb ? mgt__carve(&cur, N * (size_t)(s->Cl + 2 * s->KVl) * e) : NULL;
    }
    for (l = (size_t)sets; l < (size_t)s->nblocks; l++) a->layer[l] = a->layer[0];
    if (s->last) {
        a->lnf = mgt__carve(&cur, R * C * e);
        a->lnf_mean = (float *)mgt__carve(&cur, R * f);
        a->lnf_rstd = (float *)mgt__carve(&cur, R * f);
        a->logits = (float *)mgt__carve(&cur, N * (size_t)s->Vl * e);
        a->xent = (float *)mgt__carve(&cur, (size_t)s->tp * N * 3 * f);
        a->losses = (double *)mgt__carve(&cur, N * sizeof(double));
    }
    a->inputs = (int *)mgt__carve(&cur, N * sizeof(int));
    a->targets = (int *)mgt__carve(&cur, N * sizeof(int));
    a->dgrad = s->chunks > 1 || s->zb ? mgt__carve(&cur, (size_t)mgt__rows(s) * C * e) : NULL; /* the residual stream's gradient: the rank's rows */
    return cur.used;
}

/* gradient scratch shared by the micro-batches of a rank (one backward at a time), storage type.
   dres is the residual stream's gradient (R,C); dact SwiGLU's output gradient; full, under sequence
   parallelism, the (N,C) rows of every TP rank: a norm's output gathered for a column-parallel GEMM
   (forward, and again for its weight gradient), dres gathered for a row-parallel GEMM's backward,
   a row-parallel GEMM's output or a column-parallel GEMM's input gradient before its reduce-scatter.
   Each use ends inside the op that begins it (block, embedding, head), so one serves them all.
   Under context parallelism ring attention's buffers (mgt__ring_attention_*): kv[2] the key/value
   blocks passed around the ring (N, 2 KVl) in the storage type, one computed on while the next
   arrives; dkv[2] their gradients on the way back to their owners, o the output merged in fp32
   (N, Cl) and dq its query gradient, fp32. */
typedef struct mgt__grad_scratch { void *dres, *dln, *dqkv, *dfch, *dact, *full, *kv[2]; float *dkv[2], *o, *dq; } mgt__grad_scratch;
static size_t mgt__scratch_layout(mgt__grad_scratch *g, char *base, const mgt__shape *s) {
    mgt__cursor cur = {base, 0};
    size_t N = (size_t)s->B * (size_t)s->T, e = s->elt;
    g->dres = mgt__carve(&cur, (size_t)mgt__rows(s) * (size_t)s->C * e);
    g->dln = mgt__carve(&cur, N * (size_t)s->C * e);
    g->dqkv = s->zb ? NULL : mgt__carve(&cur, N * (size_t)(s->Cl + 2 * s->KVl) * e); /* zb: each block keeps its own (mgt__layer_acts) */
    g->dfch = s->zb ? NULL : mgt__carve(&cur, N * (size_t)s->Fl * e);
    g->dact = s->Fl > s->Hl ? mgt__carve(&cur, N * (size_t)s->Hl * e) : NULL;
    g->full = s->sp ? mgt__carve(&cur, N * (size_t)s->C * e) : NULL;
    if (s->cp > 1) {
        size_t kv = N * 2 * (size_t)s->KVl;
        g->kv[0] = mgt__carve(&cur, kv * e);
        g->kv[1] = mgt__carve(&cur, kv * e);
        g->dkv[0] = (float *)mgt__carve(&cur, kv * sizeof(float));
        g->dkv[1] = (float *)mgt__carve(&cur, kv * sizeof(float));
        g->o = (float *)mgt__carve(&cur, N * (size_t)s->Cl * sizeof(float));
        g->dq = (float *)mgt__carve(&cur, N * (size_t)s->Cl * sizeof(float));
    } else g->kv[0] = g->kv[1] = NULL, g->dkv[0] = g->dkv[1] = g->o = g->dq = NULL;
    return cur.used;
}

/* fp32 workspace of the CPU backend's 16-bit ops on a rank of this shape and `threads`: the most
   any one op widens (each operand padded to 16 floats, as mgt__wide_take carves it); the GEMMs'
   operands only when they are widened (gemms: not bf16 through oneDNN) */
static size_t mgt__widen_floats(const mgt__shape *s, int threads, int gemms) {
    size_t N = (size_t)s->B * (size_t)s->T, C = (size_t)s->C, Cl = (size_t)s->Cl, Hl = (size_t)s->Hl, Vl = (size_t)s->Vl, T = (size_t)s->T;
    size_t Q = Cl + 2 * (size_t)s->KVl, F = (size_t)s->Fl; /* the widths of qkv and of the MLP's first matmul */
    size_t att = s->cp > 1 ? 0 : (size_t)s->B * (size_t)s->NHl * T * T, most = 0, k, mm[5][2];
    int nmm = gemms ? 4 : 0;
#define MGT__P16(n) (((size_t)(n) + 15) & ~(size_t)15)
#define MGT__MOST(x) do { size_t mgt__x = (x); if (mgt__x > most) most = mgt__x; } while (0)
    mm[0][0] = C; mm[0][1] = Q; mm[1][0] = Cl; mm[1][1] = C; mm[2][0] = C; mm[2][1] = F; mm[3][0] = Hl; mm[3][1] = C;
    if (s->last && gemms) { mm[4][0] = C; mm[4][1] = Vl; nmm = 5; }
    for (k = 0; k < (size_t)nmm; k++) { /* (in, out): forward out, inp, weight, bias; backward dinp, dout, inp, weight */
        size_t in = mm[k][0], out = mm[k][1];
        MGT__MOST(MGT__P16(N * out) + MGT__P16(N * in) + MGT__P16(out * in) + MGT__P16(out));
        MGT__MOST(2 * MGT__P16(N * in) + MGT__P16(N * out) + MGT__P16(out * in));
    }
    if (s->first) MGT__MOST(MGT__P16(N * C) + MGT__P16(Vl * C) + MGT__P16(T * C)); /* the embedding */
    MGT__MOST(3 * MGT__P16(N * C) + MGT__P16(C));                                  /* LayerNorm backward */
    if (s->cp > 1) { /* ring attention on one chunk (N / 2 rows) against a key/value block of as many */
        MGT__MOST(MGT__P16(N / 2 * Q) + MGT__P16(N / 2 * 2 * (size_t)s->KVl));
        MGT__MOST(2 * MGT__P16(N / 2 * Cl) + MGT__P16(N / 2 * Q) + MGT__P16(N / 2 * 2 * (size_t)s->KVl));
    } else {
        MGT__MOST(MGT__P16(N * Cl) + MGT__P16(att) + MGT__P16(N * Q));             /* attention forward */
        MGT__MOST(2 * MGT__P16(N * Q) + MGT__P16(N * Cl) + MGT__P16(att));         /* attention backward */
    }
    MGT__MOST(3 * MGT__P16(N * Hl));                                               /* GELU backward */
    MGT__MOST(2 * MGT__P16(N * F) + MGT__P16(N * Hl));                             /* SwiGLU backward (RMSNorm and RoPE need less) */
    if (s->last) MGT__MOST(MGT__P16((threads < 1 ? 1 : (size_t)threads < N ? (size_t)threads : N) * Vl)); /* cross-entropy: a row per thread */
#undef MGT__P16
#undef MGT__MOST
    return most;
}
/* ==== end src/model.c ==== */
/* ==== begin src/data.c ==== */
#line 1 "src/data.c"
/* src/data.c - llm.c token shards, memory-mapped, sampled from (seed, step) */
/* ---- data: llm.c token shards, memory-mapped ------------------------------------------------- */

/* llm.c's two shard formats (dev/data/data_common.py): a 256-int32 header [magic, version, token
   count], then the tokens, uint16 (GPT-2's) or uint32 (Llama 3's, for vocabularies over 65536) */
#define MGT_SHARD_MAGIC 20240520
#define MGT_SHARD_VERSION 1
#define MGT_SHARD_MAGIC32 20240801
#define MGT_SHARD_VERSION32 7
#define MGT_SHARD_HEADER_BYTES 1024

typedef struct mgt__shard {
    const unsigned char *tokens;  /* little-endian, `width` bytes each */
    int width;                    /* 2 or 4 */
    size_t n;
    void *map;
    size_t map_len;
    unsigned long long dev, ino;  /* the file's identity: train and val sharing a shard is worth a word */
} mgt__shard;

static uint32_t mgt__shard_token(const mgt__shard *s, size_t i) {
    const unsigned char *p = s->tokens + i * (size_t)s->width;
    return s->width == 2 ? (uint32_t)p[0] | (uint32_t)p[1] << 8 : (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void mgt__shard_close(mgt__shard *s) {
    if (s->map) munmap(s->map, s->map_len);
    memset(s, 0, sizeof *s);
}

static mgt_result mgt__shard_open(mgt__shard *s, const char *path, const char *key, int vocab_size) {
    int fd, header[256];
    struct stat st;
    size_t i, count, bytes;
    uint32_t max_token = 0;
    char why[128];
    memset(s, 0, sizeof *s);
    fd = mgt__open_regular(path, &st, why, sizeof why);
    if (fd < 0) return mgt__fail(MGT_ERROR_DATA, "%s: %s: cannot open the token shard: %s (make it with `mgt prepare`, see README)", key, path, why);
    s->dev = (unsigned long long)st.st_dev;
    s->ino = (unsigned long long)st.st_ino;
    if ((size_t)st.st_size < MGT_SHARD_HEADER_BYTES) {
        close(fd);
        return mgt__fail(MGT_ERROR_DATA, "%s: %s: truncated shard: %lld bytes, shorter than the 1024-byte header", key, path, (long long)st.st_size);
    }
    if (pread(fd, header, sizeof header, 0) != (ssize_t)sizeof header) { close(fd); return mgt__fail(MGT_ERROR_DATA, "%s: %s: cannot read the header", key, path); }
    if (header[0] == MGT_SHARD_MAGIC && header[1] == MGT_SHARD_VERSION) s->width = 2;
    else if (header[0] == MGT_SHARD_MAGIC32 && header[1] == MGT_SHARD_VERSION32) s->width = 4;
    else {
        close(fd);
        return mgt__fail(MGT_ERROR_DATA, "%s: %s: not a token shard (magic %d version %d; expected %d version %d for 16-bit tokens or %d version %d "
                         "for 32-bit; make it with `mgt prepare`)", key, path, header[0], header[1], MGT_SHARD_MAGIC, MGT_SHARD_VERSION,
                         MGT_SHARD_MAGIC32, MGT_SHARD_VERSION32);
    }
    if (header[2] < 0) {
        close(fd);
        return mgt__fail(MGT_ERROR_DATA, "%s: %s: the header's token count %d is negative (a damaged shard; make it again with `mgt prepare`)", key, path, header[2]);
    }
    count = (size_t)header[2];
    bytes = MGT_SHARD_HEADER_BYTES + (size_t)s->width * count;
    if ((size_t)st.st_size < bytes) {
        close(fd);
        return mgt__fail(MGT_ERROR_DATA, "%s: %s: truncated shard: the header promises %zu %d-bit tokens (%zu bytes) but the file has %lld bytes",
                         key, path, count, 8 * s->width, bytes, (long long)st.st_size);
    }
    s->map_len = bytes;
    s->map = mmap(NULL, s->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (s->map == MAP_FAILED) { s->map = NULL; return mgt__fail(MGT_ERROR_DATA, "%s: %s: cannot map: %s", key, path, strerror(errno)); }
    s->tokens = (const unsigned char *)s->map + MGT_SHARD_HEADER_BYTES;
    s->n = count;
    for (i = 0; i < count; i++) {
        uint32_t t = mgt__shard_token(s, i);
        max_token = t > max_token ? t : max_token;
    }
    if (count && max_token >= (uint32_t)vocab_size) {
        for (i = 0; mgt__shard_token(s, i) != max_token; i++) {}
        mgt__shard_close(s);
        return mgt__fail(MGT_ERROR_DATA, "%s: %s: token id %lu (token %zu of the shard) is beyond the vocabulary (model.vocab_size = %d); "
                         "was it prepared with another tokenizer?", key, path, (unsigned long)max_token, i, vocab_size);
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

#define MGT__STREAM_TRAIN 0x747261696eULL
#define MGT__STREAM_VAL 0x76616cULL

/* The shards of data.train (or data.val): a comma-separated list of files or glob patterns, each
   pattern's files in name order. A sequence never crosses shards: shard k offers n_k - T starts,
   and the starts of all shards are numbered one after the other, so sequence i of step `step`
   starts at start number hash(seed, step, i) mod (all starts): a pure function of (seed, step, i)
   whatever the layout, and with one shard the same positions as ever. */
typedef struct mgt__loader {
    mgt__shard *shards;
    int nshards;
    size_t *first_start;        /* nshards + 1: the number of the first start of each shard, then the total */
    int T, rows;
    uint64_t seed;
    uint32_t *buf[2];
    long long buf_step[2], want;
    int busy, quit, started, inited;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} mgt__loader;

/* where sequence i of a step starts: its shard and the offset in it */
static const mgt__shard *mgt__loader_where(const mgt__loader *ld, uint64_t stream, uint64_t step, uint64_t i, size_t *off) {
    size_t g = (size_t)(mgt_hash3(ld->seed ^ stream, step, i) % (uint64_t)ld->first_start[ld->nshards]);
    int lo = 0, hi = ld->nshards - 1;
    while (lo < hi) { /* the shard whose starts hold g */
        int mid = (lo + hi + 1) / 2;
        if (ld->first_start[mid] <= g) lo = mid;
        else hi = mid - 1;
    }
    *off = g - ld->first_start[lo];
    return &ld->shards[lo];
}

/* the T + 1 tokens of sequence i of a step into out, widened to 32 bits whatever the shard's width */
static void mgt__loader_sequence(const mgt__loader *ld, uint64_t stream, uint64_t step, uint64_t i, uint32_t *out) {
    size_t off, t;
    const mgt__shard *s = mgt__loader_where(ld, stream, step, i, &off);
    for (t = 0; t <= (size_t)ld->T; t++) out[t] = mgt__shard_token(s, off + t);
}

/* fills rows (count, T+1) of the given step; the loader thread prefetches the next step */
static void mgt__loader_fill(const mgt__loader *ld, long long step, uint32_t *out) {
    int i;
    for (i = 0; i < ld->rows; i++) mgt__loader_sequence(ld, MGT__STREAM_TRAIN, (uint64_t)step, (uint64_t)i, out + (size_t)i * (size_t)(ld->T + 1));
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
static const uint32_t *mgt__loader_get(mgt__loader *ld, long long step) {
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

static void mgt__loader_close(mgt__loader *ld);

static int mgt__strcmp_ptr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* the files of a data spec: comma-separated paths or glob patterns, each pattern's matches in name
   order (bytes, whatever the locale); a pattern that matches nothing is an error naming it, an
   existing file is itself even when its name has glob characters; a file listed twice counts once */
static mgt_result mgt__data_files(const char *spec, const char *key, glob_t *files) {
    char item[MGT_STR_MAX];
    const char *p = spec;
    int flags = 0;
    size_t before = 0, i, j, kept;
    memset(files, 0, sizeof *files);
    while (*p) {
        size_t n = strcspn(p, ",");
        int rc;
        struct stat st;
        while (n && (*p == ' ' || *p == '\t')) { p++; n--; }
        if (n >= sizeof item) {
            if (flags) globfree(files);
            return mgt__fail(MGT_ERROR_DATA, "%s: an item of '%.60s...' is longer than %d characters", key, spec, (int)sizeof item - 1);
        }
        memcpy(item, p, n);
        item[n] = 0;
        while (n && (item[n - 1] == ' ' || item[n - 1] == '\t')) item[--n] = 0;
        p += strcspn(p, ",");
        if (*p == ',') p++;
        if (!item[0]) continue;
        rc = glob(item, flags | GLOB_ERR | GLOB_NOSORT, NULL, files);
        if (rc == GLOB_NOMATCH) {
            if (!strpbrk(item, "*?[") || !stat(item, &st)) { /* a plain path (reading it says why it fails), or a file named so */
                rc = glob(item, flags | GLOB_NOCHECK | GLOB_NOESCAPE | GLOB_NOSORT, NULL, files);
                if (rc == 0 && strpbrk(item, "*?[")) { /* GLOB_NOCHECK gave the pattern back: it is the file's name */ }
            } else {
                if (flags) globfree(files);
                return mgt__fail(MGT_ERROR_DATA, "%s: '%s' matches no file (make the shards with `mgt prepare`, or check the pattern)", key, item);
            }
        }
        if (rc == GLOB_ABORTED && errno == ENOENT) { /* the pattern's folder does not exist: nothing prepared there yet */
            char folder[sizeof item], *slash;
            if (flags) globfree(files);
            memcpy(folder, item, sizeof folder);
            slash = strrchr(folder, '/');
            if (slash) *slash = 0;
            return mgt__fail(MGT_ERROR_DATA, "%s: '%s' matches no file: the folder %s does not exist (make the shards there with `mgt prepare`)", key, item,
                             slash ? folder : ".");
        }
        if (rc != 0) {
            if (flags) globfree(files);
            return mgt__fail(rc == GLOB_NOSPACE ? MGT_ERROR_MEMORY : MGT_ERROR_DATA, "%s: cannot list '%s': %s", key, item, strerror(errno));
        }
        qsort(files->gl_pathv + before, files->gl_pathc - before, sizeof(char *), mgt__strcmp_ptr);
        before = files->gl_pathc;
        flags = GLOB_APPEND;
    }
    if (!flags) return mgt__fail(MGT_ERROR_DATA, "%s: '%s' names no file", key, spec);
    { /* the same file twice (by its identity, not its name) counts once */
        struct stat st;
        unsigned long long *id = (unsigned long long *)MGT_MALLOC(sizeof(unsigned long long) * 2 * (files->gl_pathc + 1));
        if (!id) { globfree(files); return mgt__fail(MGT_ERROR_MEMORY, "out of memory listing %s", key); }
        for (i = 0, kept = 0; i < files->gl_pathc; i++) {
            int seen = 0;
            char *t;
            if (!stat(files->gl_pathv[i], &st)) {
                for (j = 0; j < kept && !seen; j++) seen = id[2 * j] == (unsigned long long)st.st_dev && id[2 * j + 1] == (unsigned long long)st.st_ino;
                id[2 * kept] = (unsigned long long)st.st_dev;
                id[2 * kept + 1] = (unsigned long long)st.st_ino;
            } else id[2 * kept] = id[2 * kept + 1] = ~0ULL - kept; /* unreadable: kept, reading it says why */
            if (seen) continue;
            t = files->gl_pathv[kept];
            files->gl_pathv[kept] = files->gl_pathv[i];
            files->gl_pathv[i] = t;
            kept++;
        }
        MGT_FREE(id);
        for (i = kept; i < files->gl_pathc; i++) { free(files->gl_pathv[i]); files->gl_pathv[i] = NULL; } /* libc: glob's own */
    }
    files->gl_pathc = kept;
    return MGT_OK;
}

static mgt_result mgt__loader_open(mgt__loader *ld, const char *spec, const char *key, int vocab_size, int T, int rows, uint64_t seed, int prefetch) {
    mgt_result r;
    glob_t files;
    size_t k;
    memset(ld, 0, sizeof *ld);
    MGT__TRY(mgt__data_files(spec, key, &files));
    ld->shards = (mgt__shard *)MGT_MALLOC(sizeof(mgt__shard) * files.gl_pathc);
    ld->first_start = (size_t *)MGT_MALLOC(sizeof(size_t) * (files.gl_pathc + 1));
    if (!ld->shards || !ld->first_start) { globfree(&files); mgt__loader_close(ld); return mgt__fail(MGT_ERROR_MEMORY, "out of memory for the data loader"); }
    ld->first_start[0] = 0;
    for (k = 0; k < files.gl_pathc; k++) {
        const char *path = files.gl_pathv[k];
        r = mgt__shard_open(&ld->shards[k], path, key, vocab_size);
        if (r != MGT_OK) { globfree(&files); mgt__loader_close(ld); return r; }
        ld->nshards++;
        if (ld->shards[k].n < (size_t)T + 1) {
            mgt__fail(MGT_ERROR_CONFIG, "%s: %s has %zu tokens, fewer than seq_len + 1 = %d; lower [model] seq_len or use more data", key, path, ld->shards[k].n, T + 1);
            globfree(&files);
            mgt__loader_close(ld);
            return MGT_ERROR_CONFIG;
        }
        ld->first_start[k + 1] = ld->first_start[k] + (ld->shards[k].n - (size_t)T);
    }
    globfree(&files);
    ld->T = T;
    ld->rows = rows;
    ld->seed = seed;
    ld->buf_step[0] = ld->buf_step[1] = -1;
    ld->buf[0] = (uint32_t *)MGT_MALLOC(sizeof(uint32_t) * (size_t)rows * (size_t)(T + 1) * 2);
    if (!ld->buf[0]) { mgt__loader_close(ld); return mgt__fail(MGT_ERROR_MEMORY, "out of memory for the data loader"); }
    ld->buf[1] = ld->buf[0] + (size_t)rows * (size_t)(T + 1);
    pthread_mutex_init(&ld->mu, NULL);
    pthread_cond_init(&ld->cv, NULL);
    ld->inited = 1;
    if (prefetch && !pthread_create(&ld->thread, NULL, mgt__loader_main, ld)) ld->started = 1;
    return MGT_OK;
}

/* "[data] train", after where the preset set it ("preset.ini:12: [data] train"), for messages */
static const char *mgt__data_key(const mgt_config *cfg, const char *name, char *out, size_t cap) {
    char where[300];
    mgt_config_where(cfg, "data", name, where, sizeof where);
    snprintf(out, cap, "%s%s[data] %s", where, where[0] ? ": " : "", name);
    return out;
}

/* a data spec's shards, as a run would read them: the files, their tokens in all */
MGTDEF mgt_result mgt_data_check(const char *spec, const char *name, int vocab_size, int seq_len, int *n_files, size_t *n_tokens) {
    mgt__loader ld;
    int k;
    if (!spec) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_data_check: spec is required");
    MGT__TRY(mgt__loader_open(&ld, spec, name ? name : "data", vocab_size, seq_len, 1, 0, 0));
    if (n_files) *n_files = ld.nshards;
    if (n_tokens) for (*n_tokens = 0, k = 0; k < ld.nshards; k++) *n_tokens += ld.shards[k].n;
    mgt__loader_close(&ld);
    return MGT_OK;
}

static void mgt__loader_close(mgt__loader *ld) {
    int k;
    if (ld->started) {
        pthread_mutex_lock(&ld->mu);
        ld->quit = 1;
        pthread_cond_broadcast(&ld->cv);
        pthread_mutex_unlock(&ld->mu);
        pthread_join(ld->thread, NULL);
    }
    if (ld->inited) {
        pthread_mutex_destroy(&ld->mu);
        pthread_cond_destroy(&ld->cv);
    }
    MGT_FREE(ld->buf[0]);
    for (k = 0; k < ld->nshards; k++) mgt__shard_close(&ld->shards[k]);
    MGT_FREE(ld->shards);
    MGT_FREE(ld->first_start);
    memset(ld, 0, sizeof *ld);
}
/* ==== end src/data.c ==== */
/* ==== begin src/safetensors.c ==== */
#line 1 "src/safetensors.c"
/* src/safetensors.c - safetensors files: reading, writing, the JSON header */
/* ---- safetensors: an 8-byte header length, a JSON header, then the raw tensors --------------- */

typedef struct mgt__st_tensor {
    char name[96];
    char dtype[8];              /* "F32", "F64", "I32" */
    int ndim;
    long long shape[4];
    size_t begin, end;          /* byte offsets into the data section */
} mgt__st_tensor;

typedef struct mgt__st_file {
    unsigned char *buf;         /* the whole file (the data section moved to `data`) */
    size_t size, data_start;    /* data_start: the data section's offset in the file */
    unsigned char *data;        /* the data section, 8-byte aligned whatever the header's length */
    size_t checksum_at;         /* offset in the file of the checksum's 16 hex digits; 0: none */
    mgt__st_tensor *t;
    int n;
    char **meta;                /* nmeta pairs: key, value */
    int nmeta;
} mgt__st_file;

/* A checkpoint's checksum: h = mix(h ^ word) over its 8-byte little-endian words, then
   h = mix(h ^ byte) over the bytes of a last partial word, from h = 0xcbf29ce484222325, where mix
   is splitmix64's finaliser. mix is a bijection that spreads every bit over every other, so a
   change of one word always changes the result and any other damage goes unnoticed with a chance
   of 2^-64 (FNV's multiply alone, which this replaced, never carries a change to lower bits: two
   flipped top bits cancelled). Streamed: the bytes may come in pieces of any size and hash as one
   run (a checkpoint hashes its length, header and tensors as they are written). */
typedef struct mgt__hash { uint64_t h; unsigned char tail[8]; size_t ntail; } mgt__hash;
static void mgt__hash_init(mgt__hash *s) { s->h = 0xcbf29ce484222325ULL; s->ntail = 0; }
static void mgt__hash_word(mgt__hash *s, const unsigned char *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    s->h = mgt__mix64(s->h ^ w);
}
static void mgt__hash_update(mgt__hash *s, const void *data, size_t bytes) {
    const unsigned char *p = (const unsigned char *)data;
    if (s->ntail) { /* complete a word begun by the previous piece */
        size_t take = 8 - s->ntail < bytes ? 8 - s->ntail : bytes;
        memcpy(s->tail + s->ntail, p, take);
        s->ntail += take;
        p += take;
        bytes -= take;
        if (s->ntail < 8) return;
        mgt__hash_word(s, s->tail);
        s->ntail = 0;
    }
    for (; bytes >= 8; p += 8, bytes -= 8) mgt__hash_word(s, p);
    memcpy(s->tail + s->ntail, p, bytes);
    s->ntail += bytes;
}
static uint64_t mgt__hash_final(const mgt__hash *s) {
    uint64_t h = s->h;
    size_t i;
    for (i = 0; i < s->ntail; i++) h = mgt__mix64(h ^ s->tail[i]);
    return h;
}

/* JSON string with escapes into a growing buffer */
typedef struct mgt__buf { char *p; size_t n, cap; int oom; } mgt__buf;
static void mgt__buf_put(mgt__buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        char *p;
        while (cap < b->n + n + 1) cap *= 2;
        p = (char *)MGT_REALLOC(b->p, cap);
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

/* The checksum of a checkpoint covers the whole file: the header length, the header (with the 16
   hex digits of the checksum itself read as '0') and the tensors, so no bit of it can change
   unnoticed. */
static const char mgt__checksum_zeros[16] = {'0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0'};

/* finishes a file written to tmp: flush, fsync, close, rename over path, fsync of the folder */
static mgt_result mgt__atomic_finish(FILE *f, int ok, const char *tmp, const char *path) {
    ok &= fflush(f) == 0;
    ok &= fsync(fileno(f)) == 0;
    ok &= fclose(f) == 0;
    if (!ok || rename(tmp, path)) {
        int e = errno;
        remove(tmp);
        return mgt__fail(MGT_ERROR_IO, "%s: cannot write: %s%s", path, strerror(e), e == ENOSPC || e == EDQUOT ? " (the disk is full)" : "");
    }
    return mgt__fsync_dir(path);
}
/* writes path atomically: path.tmp, fsync, rename, fsync of the folder. meta: nmeta key/value pairs. */
static mgt_result mgt__st_write(const char *path, const mgt__st_out *t, int n, const char *const *meta, int nmeta) {
    mgt__buf h;
    mgt__hash sum;
    char tmp[1300], digits[17];
    uint64_t len;
    size_t off = 0, sum_at;
    int i, ok = 1;
    FILE *f;
    memset(&h, 0, sizeof h);
    mgt__buf_str(&h, "{\"__metadata__\":{");
    for (i = 0; i < nmeta; i++) {
        mgt__buf_json_string(&h, meta[2 * i]);
        mgt__buf_str(&h, ":");
        mgt__buf_json_string(&h, meta[2 * i + 1]);
        mgt__buf_str(&h, ",");
    }
    mgt__buf_str(&h, "\"checksum\":\"");
    sum_at = h.n;
    mgt__buf_put(&h, mgt__checksum_zeros, 16);
    mgt__buf_str(&h, "\"}");
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
    if (h.oom) { MGT_FREE(h.p); return mgt__fail(MGT_ERROR_MEMORY, "out of memory writing %s", path); }
    len = (uint64_t)h.n;
    mgt__hash_init(&sum);
    mgt__hash_update(&sum, &len, 8);
    mgt__hash_update(&sum, h.p, h.n);
    for (i = 0; i < n; i++) mgt__hash_update(&sum, t[i].data, t[i].bytes);
    snprintf(digits, sizeof digits, "%016llx", (unsigned long long)mgt__hash_final(&sum));
    memcpy(h.p + sum_at, digits, 16);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    f = fopen(tmp, "wb");
    if (!f) { MGT_FREE(h.p); return mgt__fail(MGT_ERROR_IO, "%s: cannot create: %s", tmp, strerror(errno)); }
    ok &= fwrite(&len, 8, 1, f) == 1;
    ok &= fwrite(h.p, 1, h.n, f) == h.n;
    for (i = 0; i < n && ok; i++) ok &= fwrite(t[i].data, 1, t[i].bytes, f) == t[i].bytes;
    MGT_FREE(h.p);
    return mgt__atomic_finish(f, ok, tmp, path);
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
    for (i = 0; i < 2 * f->nmeta; i++) MGT_FREE(f->meta[i]);
    MGT_FREE(f->meta);
    MGT_FREE(f->t);
    MGT_FREE(f->buf);
    memset(f, 0, sizeof *f);
}

/* reads a safetensors file, or only its header (header_only: no tensor data, `data` is NULL) */
/* whether the 8 bytes read (the header's length) are followed by the header's '{', as in every
   safetensors file; leaves fp just after the length */
static int mgt__st_opens_header(FILE *fp) {
    return fgetc(fp) == '{' && fseek(fp, 8, SEEK_SET) == 0;
}

/* the header's "__metadata__" object, after its '{': string keys and values, each key once. 1, or 0
   when malformed */
static int mgt__st_parse_metadata(mgt__st_file *f, const char **pp, int *cap_m) {
    const char *p = *pp;
    for (;;) {
        mgt__buf k, v;
        mgt__json_ws(&p);
        if (*p == '}') { *pp = p + 1; return 1; }
        memset(&k, 0, sizeof k);
        memset(&v, 0, sizeof v);
        if (!mgt__json_string(&p, &k) || !mgt__json_expect(&p, ':')) { MGT_FREE(k.p); return 0; }
        mgt__json_ws(&p);
        if (!strcmp(k.p, "checksum")) f->checksum_at = (size_t)(p + 1 - (const char *)f->buf);
        if (!mgt__json_string(&p, &v)) { MGT_FREE(k.p); MGT_FREE(v.p); return 0; }
        {
            int i;
            for (i = 0; i < f->nmeta; i++)
                if (!strcmp(f->meta[2 * i], k.p)) { MGT_FREE(k.p); MGT_FREE(v.p); return 0; } /* a key twice: which one counts? */
        }
        if (f->nmeta == *cap_m) {
            char **m;
            *cap_m = *cap_m ? 2 * *cap_m : 16;
            m = (char **)MGT_REALLOC(f->meta, sizeof(char *) * 2 * (size_t)*cap_m);
            if (!m) { MGT_FREE(k.p); MGT_FREE(v.p); return 0; }
            f->meta = m;
        }
        f->meta[2 * f->nmeta] = k.p;
        f->meta[2 * f->nmeta + 1] = v.p;
        f->nmeta++;
        mgt__json_ws(&p);
        if (*p == ',') p++;
    }
}

/* one tensor's object, after its '{': its dtype, shape and data offsets. 1; 0 when malformed; -1
   when its data ends past the file */
static int mgt__st_parse_tensor(mgt__st_file *f, const char **pp, const char *name, int *cap_t) {
    const char *p = *pp;
    mgt__st_tensor *t;
    if (f->n == *cap_t) {
        mgt__st_tensor *nt;
        *cap_t = *cap_t ? 2 * *cap_t : 64;
        nt = (mgt__st_tensor *)MGT_REALLOC(f->t, sizeof *nt * (size_t)*cap_t);
        if (!nt) return 0;
        f->t = nt;
    }
    t = &f->t[f->n++];
    memset(t, 0, sizeof *t);
    mgt__strlcpy(t->name, name, sizeof t->name);
    for (;;) {
        mgt__buf field;
        mgt__json_ws(&p);
        if (*p == '}') { p++; break; }
        memset(&field, 0, sizeof field);
        if (!mgt__json_string(&p, &field) || !mgt__json_expect(&p, ':')) { MGT_FREE(field.p); return 0; }
        if (!strcmp(field.p, "dtype")) {
            mgt__buf v;
            memset(&v, 0, sizeof v);
            if (!mgt__json_string(&p, &v)) { MGT_FREE(field.p); MGT_FREE(v.p); return 0; }
            mgt__strlcpy(t->dtype, v.p, sizeof t->dtype);
            MGT_FREE(v.p);
        } else if (!strcmp(field.p, "shape")) {
            t->ndim = mgt__json_numbers(&p, t->shape, 4);
            if (t->ndim < 0) { MGT_FREE(field.p); return 0; }
        } else if (!strcmp(field.p, "data_offsets")) {
            long long o[2];
            if (mgt__json_numbers(&p, o, 2) != 2 || o[0] < 0 || o[1] < o[0]) { MGT_FREE(field.p); return 0; }
            t->begin = (size_t)o[0];
            t->end = (size_t)o[1];
        } else { MGT_FREE(field.p); return 0; }
        MGT_FREE(field.p);
        mgt__json_ws(&p);
        if (*p == ',') p++;
    }
    *pp = p;
    return t->end > f->size - f->data_start ? -1 : 1;
}

static mgt_result mgt__st_read(mgt__st_file *f, const char *path, int header_only) {
    FILE *fp;
    uint64_t hlen;
    const char *p, *end;
    struct stat st;
    size_t want;
    char why[256];
    int cap_t = 0, cap_m = 0, fd;
    memset(f, 0, sizeof *f);
    fd = mgt__open_regular(path, &st, why, sizeof why);
    if (fd < 0) return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: cannot open the checkpoint: %s", path, why);
    fp = fdopen(fd, "rb");
    if (!fp) { close(fd); return mgt__fail(MGT_ERROR_MEMORY, "%s: cannot open: %s", path, strerror(errno)); }
    if (st.st_size < 8 || fread(&hlen, 8, 1, fp) != 1) {
        fclose(fp);
        return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: too short to be a safetensors file", path);
    }
    f->size = (size_t)st.st_size;
    if (!mgt__st_opens_header(fp)) {
        unsigned char head[8];
        int text = 1, i;
        memcpy(head, &hlen, 8);
        for (i = 0; i < 8; i++) text &= head[i] == '\n' || head[i] == '\t' || head[i] == '\r' || (head[i] >= 32 && head[i] < 127);
        fclose(fp);
        return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: not a checkpoint (a safetensors file opens with its header's length and '{')%s", path,
                         text ? "; it begins as text: a preset, or another text file?" : "");
    }
    if (hlen > f->size - 8) {
        fclose(fp);
        return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: truncated: header of %llu bytes in a %zu-byte file", path, (unsigned long long)hlen, f->size);
    }
    f->data_start = 8 + (size_t)hlen;
    want = header_only ? f->data_start : f->size;
    f->buf = (unsigned char *)MGT_MALLOC(want + 8); /* room to align the data section, and a terminator */
    if (!f->buf) { fclose(fp); return mgt__fail(MGT_ERROR_MEMORY, "%s: out of memory (%zu bytes)", path, want); }
    memcpy(f->buf, &hlen, 8);
    if (fread(f->buf + 8, 1, want - 8, fp) != want - 8) { fclose(fp); mgt__st_close(f); return mgt__fail(MGT_ERROR_IO, "%s: read error", path); }
    fclose(fp);
    {
        unsigned char save = f->buf[f->data_start];
        f->buf[f->data_start] = 0; /* terminate the header for parsing */
        p = (const char *)f->buf + 8;
        end = p + hlen;
        if (!mgt__json_expect(&p, '{')) goto bad;
        for (;;) {
            mgt__buf key;
            int got;
            mgt__json_ws(&p);
            if (*p == '}') break;
            memset(&key, 0, sizeof key);
            if (!mgt__json_string(&p, &key) || !mgt__json_expect(&p, ':') || !mgt__json_expect(&p, '{')) { MGT_FREE(key.p); goto bad; }
            if (!strcmp(key.p, "__metadata__")) got = mgt__st_parse_metadata(f, &p, &cap_m);
            else got = mgt__st_parse_tensor(f, &p, key.p, &cap_t);
            MGT_FREE(key.p);
            if (got < 0) {
                f->buf[f->data_start] = save;
                mgt__st_close(f);
                return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: truncated: tensor data ends past the end of the file", path);
            }
            if (!got) goto bad;
            mgt__json_ws(&p);
            if (*p == ',') p++;
        }
        if (p > end) goto bad;
        f->buf[f->data_start] = save;
    }
    if (header_only) return MGT_OK;
    /* a header whose length is not a multiple of 8 leaves the tensors unaligned: move them */
    f->data = f->buf + ((f->data_start + 7) & ~(size_t)7);
    if (f->data != f->buf + f->data_start) memmove(f->data, f->buf + f->data_start, f->size - f->data_start);
    return MGT_OK;
bad:
    mgt__st_close(f);
    return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: malformed safetensors header", path);
}

static mgt_result mgt__st_open(mgt__st_file *f, const char *path) { return mgt__st_read(f, path, 0); }

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
static const void *mgt__st_data(const mgt__st_file *f, const mgt__st_tensor *t) { return f->data + t->begin; }

#define MGT__CHECKPOINT_FORMAT "mgt-checkpoint-2"

/* a metadata number, strictly: the whole text is an integer in [lo, hi] */
static int mgt__meta_int(const mgt__st_file *f, const char *key, long long lo, long long hi, long long *out) {
    const char *text = mgt__st_meta(f, key);
    char *end;
    long long v;
    if (!text) return 0;
    errno = 0;
    v = strtoll(text, &end, 10);
    if (end == text || *end || errno || v < lo || v > hi || !(text[0] == '-' || (text[0] >= '0' && text[0] <= '9'))) return 0;
    *out = v;
    return 1;
}

/* opens an mgt checkpoint: a safetensors file of our format whose checksum covers every byte */
static mgt_result mgt__checkpoint_open(mgt__st_file *f, const char *path) {
    const char *format, *sum_text;
    mgt__hash sum;
    char text[17];
    MGT__TRY(mgt__st_open(f, path));
    format = mgt__st_meta(f, "format");
    sum_text = mgt__st_meta(f, "checksum");
    if (!format || strncmp(format, "mgt-checkpoint-", 15)) {
        mgt__st_close(f);
        return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: not an mgt checkpoint (no \"format\": \"" MGT__CHECKPOINT_FORMAT "\" in its metadata)%s", path,
                         format ? "" : "; the weights of a Hugging Face model start a run with [model] init = its file or folder");
    }
    if (strcmp(format, MGT__CHECKPOINT_FORMAT)) {
        mgt__fail(MGT_ERROR_CHECKPOINT, "%s: checkpoint format '%s'; this mgt reads " MGT__CHECKPOINT_FORMAT "%s", path, format,
                  !strcmp(format, "mgt-checkpoint-1") ? " (format 1, of mgt 0.1.0, has a checksum that leaves its header unchecked)" : "");
        mgt__st_close(f);
        return MGT_ERROR_CHECKPOINT;
    }
    if (!sum_text || !f->checksum_at || strlen(sum_text) != 16 || f->checksum_at + 16 > f->data_start ||
        memcmp(f->buf + f->checksum_at, sum_text, 16)) {
        mgt__st_close(f);
        return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: has no checksum of 16 hex digits in its metadata, so it cannot be trusted", path);
    }
    mgt__hash_init(&sum);
    mgt__hash_update(&sum, f->buf, f->checksum_at);
    mgt__hash_update(&sum, mgt__checksum_zeros, 16);
    mgt__hash_update(&sum, f->buf + f->checksum_at + 16, f->data_start - f->checksum_at - 16);
    mgt__hash_update(&sum, f->data, f->size - f->data_start);
    snprintf(text, sizeof text, "%016llx", (unsigned long long)mgt__hash_final(&sum));
    if (strcmp(text, sum_text)) {
        mgt__fail(MGT_ERROR_CHECKPOINT, "%s: checksum mismatch (stored %s, computed %s): the file is damaged; resume from an older checkpoint", path, sum_text, text);
        mgt__st_close(f);
        return MGT_ERROR_CHECKPOINT;
    }
    return MGT_OK;
}
/* ==== end src/safetensors.c ==== */
/* ==== begin src/comm_local.c ==== */
#line 1 "src/comm_local.c"
/* src/comm_local.c - the in-process world of rank threads: collectives, messages, deadlock detection */
/* ---- communication: the in-process world of rank threads ---------------------------------------
   mgt__local_world runs `world` ranks as threads of this process, one mgt_comm each; a rank's
   comm is used by one thread at a time. All shared state sits behind one mutex; each rank sleeps
   on its own condition variable.
   Collectives meet in a rendezvous keyed by (group id, n-th collective of this rank on that
   group). Each member posts its call and its buffer pointers; the first member's call is the one
   the others must match (op, count, dtype, root, group members), otherwise the world fails.
   When the last member arrives, every member works outside the lock on its own part, reading the
   other members' buffers directly: all-reduce sums slice i of all buffers (member 0 + member 1 +
   ... in group order, in fp32, rounded once to the buffer type) and writes it into every buffer;
   reduce-scatter sums block i into its own recv; all-gather and broadcast copy into its own
   buffer. Members then wait for each other before returning, as their buffers are still in use
   until everyone is done. The result therefore does not depend on who arrives first.
   Send copies the data into a message queued for the receiver and returns; recv takes the oldest
   message from that peer, checking count and dtype against the send.
   Deadlocks: a rank waiting in a rendezvous waits for the members that have not arrived yet, a
   rank in recv for its peer. Whenever a rank starts waiting or finishes, the ranks that can still
   get on are marked (running ones, then waiting ones that wait for a marked one, until nothing
   changes); a waiting rank left unmarked can never be released, and the world fails naming every
   such rank's pending call. A failed world answers every pending and later call with
   MGT_ERROR_COMM at once (members already past the rendezvous finish their part first). */

#if defined(__GNUC__) || defined(__clang__)
#define MGT__LCOMM_UNUSED __attribute__((unused)) /* entry points the training code may not call yet */
#else
#define MGT__LCOMM_UNUSED
#endif
#ifndef MGT_COMM_TIMEOUT_S
/* beside MGT_IMPLEMENTATION: seconds one call may wait before the world fails (0: no limit); a
   safety net only, deadlocks are found at once */
#define MGT_COMM_TIMEOUT_S 120
#endif
#define MGT__LCOMM_HISTORY 8   /* calls remembered per rank, for messages */
#define MGT__LCOMM_SHOWN 16    /* group members spelled out in messages */
#define MGT__LCOMM_CHUNK 1024  /* elements summed per pass, in fp32 on the stack */

MGTDEF const char *mgt_coll_name(int coll) {
    static const char *const names[MGT_COLL_COUNT] = {"all-reduce", "reduce-scatter", "all-gather",
                                                      "broadcast",  "send/recv",      "barrier"};
    return coll >= 0 && coll < MGT_COLL_COUNT ? names[coll] : "unknown";
}
MGTDEF const char *mgt_group_kind_name(int kind) {
    static const char *const names[MGT_GROUP_KINDS] = MGT_GROUP_KIND_NAMES;
    return kind >= 0 && kind < MGT_GROUP_KINDS ? names[kind] : "other";
}

typedef struct mgt__local_world mgt__local_world;

typedef struct mgt__lcomm_call { /* one call, as messages describe it */
    long long number;           /* 1-based, counting every call of the rank */
    int coll, is_recv, peer;    /* peer: send/recv */
    int group, size, root;      /* collectives: group id, members, root index (broadcast) */
    int shown[MGT__LCOMM_SHOWN]; /* first members */
    size_t count;
    int dtype;
} mgt__lcomm_call;

typedef struct mgt__lcomm_msg { /* a buffered send; the data follows the struct */
    struct mgt__lcomm_msg *next;
    int from;
    mgt__lcomm_call call; /* the sender's */
    size_t bytes;
} mgt__lcomm_msg;

typedef struct mgt__lcomm_rv { /* one collective of one group */
    struct mgt__lcomm_rv *next;
    int group, size, first_rank;
    long long seq;
    mgt__lcomm_call first; /* the first member's call: the others must match it */
    int *ranks;           /* (size) group order, from the first member */
    unsigned char *here;  /* (size) member i has arrived */
    const void **src;     /* (size) member i's input */
    void **dst;           /* (size) member i's output */
    int arrived, joined, left, finished, complete;
} mgt__lcomm_rv;

enum { MGT__LCOMM_RUNNING, MGT__LCOMM_WAIT_RV, MGT__LCOMM_WAIT_RECV };

typedef struct mgt__lcomm_rank {
    mgt_comm comm;
    mgt__local_world *w;
    pthread_cond_t cv;
    int done, wait, wait_peer; /* wait: MGT__LCOMM_RUNNING or what it waits in */
    mgt__lcomm_rv *rv;          /* the rendezvous waited in */
    long long calls;
    mgt__lcomm_call history[MGT__LCOMM_HISTORY]; /* call n at [(n - 1) % MGT__LCOMM_HISTORY] */
    int *seq_group;                            /* (seq_n) groups used, and their next sequence */
    long long *seq_next;
    int seq_n, seq_cap;
    mgt__lcomm_msg *inbox; /* messages to this rank, oldest first */
} mgt__lcomm_rank;

struct mgt__local_world {
    int world, failed;
    pthread_mutex_t mu;
    mgt__lcomm_rank *ranks; /* (world) */
    mgt__lcomm_rv *rvs;     /* rendezvous in progress */
    unsigned char *mark;   /* (world) scratch, under mu */
    int *live;             /* (world) scratch, under mu */
    char why[4096];        /* the failure, once failed */
};

/* ---- element types */

static size_t mgt__lcomm_elt(int dtype) { return dtype == MGT_F64 ? 8 : dtype == MGT_F32 ? 4 : 2; }
static const char *mgt__lcomm_dtype_name(int dtype) {
    return dtype == MGT_F32 ? "f32" : dtype == MGT_BF16 ? "bf16" : dtype == MGT_F16 ? "f16" : dtype == MGT_F64 ? "f64" : "unknown-dtype";
}
static void mgt__lcomm_load(float *acc, const void *src, size_t n, int dtype) {
    size_t i;
    if (dtype == MGT_F32) { memcpy(acc, src, n * 4); return; }
    if (dtype == MGT_BF16) for (i = 0; i < n; i++) acc[i] = mgt__bf16_to_f32(((const uint16_t *)src)[i]);
    else for (i = 0; i < n; i++) acc[i] = mgt__f16_to_f32(((const uint16_t *)src)[i]);
}
static void mgt__lcomm_add(float *acc, const void *src, size_t n, int dtype) {
    size_t i;
    if (dtype == MGT_F32) for (i = 0; i < n; i++) acc[i] += ((const float *)src)[i];
    else if (dtype == MGT_BF16) for (i = 0; i < n; i++) acc[i] += mgt__bf16_to_f32(((const uint16_t *)src)[i]);
    else for (i = 0; i < n; i++) acc[i] += mgt__f16_to_f32(((const uint16_t *)src)[i]);
}
static void mgt__lcomm_store(void *dst, const float *acc, size_t n, int dtype) {
    size_t i;
    if (dtype == MGT_F32) memcpy(dst, acc, n * 4);
    else if (dtype == MGT_BF16) for (i = 0; i < n; i++) ((uint16_t *)dst)[i] = mgt__f32_to_bf16(acc[i]);
    else for (i = 0; i < n; i++) ((uint16_t *)dst)[i] = mgt__f32_to_f16(acc[i]);
}
/* dst[j][dst_off + e] = src[0][src_off + e] + src[1][src_off + e] + ..., in that order, for every
   j; each pass reads all sources before writing, so a destination may be one of the sources */
static void mgt__lcomm_sum(const void *const *src, int nsrc, size_t src_off, void *const *dst, int ndst,
                          size_t dst_off, size_t count, int dtype) {
    union { float f[MGT__LCOMM_CHUNK]; double d[MGT__LCOMM_CHUNK / 2]; } u;
    float *acc = u.f;
    size_t elt = mgt__lcomm_elt(dtype), done, m, e;
    int j;
    if (dtype == MGT_F64) { /* in fp64, in the same order */
        double *a = u.d;
        for (done = 0; done < count; done += m) {
            m = count - done < MGT__LCOMM_CHUNK / 2 ? count - done : MGT__LCOMM_CHUNK / 2;
            memcpy(a, (const double *)src[0] + src_off + done, m * 8);
            for (j = 1; j < nsrc; j++)
                for (e = 0; e < m; e++) a[e] += ((const double *)src[j])[src_off + done + e];
            for (j = 0; j < ndst; j++) memcpy((double *)dst[j] + dst_off + done, a, m * 8);
        }
        return;
    }
    for (done = 0; done < count; done += m) {
        m = count - done < MGT__LCOMM_CHUNK ? count - done : MGT__LCOMM_CHUNK;
        mgt__lcomm_load(acc, (const char *)src[0] + (src_off + done) * elt, m, dtype);
        for (j = 1; j < nsrc; j++) mgt__lcomm_add(acc, (const char *)src[j] + (src_off + done) * elt, m, dtype);
        for (j = 0; j < ndst; j++) mgt__lcomm_store((char *)dst[j] + (dst_off + done) * elt, acc, m, dtype);
    }
}

/* ---- messages */

static void mgt__lcomm_call_text(const mgt__lcomm_call *k, char *buf, size_t cap) {
    char members[MGT__LCOMM_SHOWN * 12 + 8];
    size_t n = 0;
    int i, shown = k->size < MGT__LCOMM_SHOWN ? k->size : MGT__LCOMM_SHOWN;
    unsigned long long count = (unsigned long long)k->count;
    if (k->coll == MGT_COLL_SEND_RECV) {
        snprintf(buf, cap, "%s(%s %d, %llu %s)", k->is_recv ? "recv" : "send", k->is_recv ? "from" : "to",
                 k->peer, count, mgt__lcomm_dtype_name(k->dtype));
        return;
    }
    members[0] = 0;
    for (i = 0; i < shown; i++) n += (size_t)snprintf(members + n, sizeof members - n, i ? " %d" : "%d", k->shown[i]);
    if (k->size > shown) snprintf(members + n, sizeof members - n, " ...");
    if (k->coll == MGT_COLL_BARRIER)
        snprintf(buf, cap, "barrier(group %d [%s])", k->group, members);
    else if (k->coll == MGT_COLL_BROADCAST)
        snprintf(buf, cap, "broadcast(group %d [%s], %llu %s, root %d)", k->group, members, count,
                 mgt__lcomm_dtype_name(k->dtype), k->root);
    else
        snprintf(buf, cap, "%s(group %d [%s], %llu %s)", mgt_coll_name(k->coll), k->group, members, count,
                 mgt__lcomm_dtype_name(k->dtype));
}
/* "rank 3 called all-reduce(...) as its call #17" */
static void mgt__lcomm_cat_call(char *buf, size_t cap, int rank, const char *verb, const mgt__lcomm_call *k) {
    char text[512];
    mgt__lcomm_call_text(k, text, sizeof text);
    mgt__catf(buf, cap, "rank %d %s %s as its call #%lld", rank, verb, text, k->number);
}
/* the calls of `rank` before call `before` that are still in its history */
static void mgt__lcomm_cat_history(mgt__local_world *w, char *buf, size_t cap, int rank, long long before) {
    const mgt__lcomm_rank *q = &w->ranks[rank];
    long long n, oldest = q->calls - MGT__LCOMM_HISTORY + 1, from = before - 4 > oldest ? before - 4 : oldest;
    char text[512];
    if (from < 1) from = 1;
    if (from >= before) return;
    mgt__catf(buf, cap, "; rank %d's calls before:", rank);
    for (n = from; n < before && n <= q->calls; n++) {
        mgt__lcomm_call_text(&q->history[(n - 1) % MGT__LCOMM_HISTORY], text, sizeof text);
        mgt__catf(buf, cap, " #%lld %s", n, text);
    }
}
/* under mu: the world fails (once) with `why`; everyone waiting wakes up */
static void mgt__lcomm_fail_world(mgt__local_world *w, const char *why) {
    int r;
    if (w->failed) return;
    w->failed = 1;
    snprintf(w->why, sizeof w->why, "%s", why);
    for (r = 0; r < w->world; r++) pthread_cond_broadcast(&w->ranks[r].cv);
}
static mgt_result mgt__lcomm_world_error(mgt__local_world *w) { return mgt__fail(MGT_ERROR_COMM, "%s", w->why); }

/* ---- deadlock detection, under mu */

static int mgt__lcomm_has_msg(const mgt__lcomm_rank *q, int from) {
    const mgt__lcomm_msg *m;
    for (m = q->inbox; m; m = m->next)
        if (m->from == from) return 1;
    return 0;
}
static int mgt__lcomm_blocked(const mgt__local_world *w, int r) {
    const mgt__lcomm_rank *q = &w->ranks[r];
    if (q->done) return 0;
    if (q->wait == MGT__LCOMM_WAIT_RV) return !q->rv->complete;
    if (q->wait == MGT__LCOMM_WAIT_RECV) return !mgt__lcomm_has_msg(q, q->wait_peer);
    return 0;
}
/* does blocked rank r wait for rank p? */
static int mgt__lcomm_waits_for(const mgt__local_world *w, int r, int p) {
    const mgt__lcomm_rank *q = &w->ranks[r];
    int i;
    if (q->wait == MGT__LCOMM_WAIT_RECV) return q->wait_peer == p;
    for (i = 0; i < q->rv->size; i++)
        if (q->rv->ranks[i] == p) return !q->rv->here[i];
    return 0;
}
/* Live ranks: the running ones, then every blocked rank that waits for a live one, to a fixed
   point; blocked ranks left over can never go on. Runs at every wait, so each sweep is linear: a
   rendezvous makes its waiting members live when one of its absent members is, a receive when its
   sender is (comparing every pair of ranks made a step of 2048 CPU ranks take 56 s instead of 1). */
static void mgt__lcomm_check_deadlock(mgt__local_world *w) {
    int r, p, i, changed = 1, dead = 0, first;
    const mgt__lcomm_rv *rv;
    char why[4096];
    for (r = 0; r < w->world; r++) w->live[r] = !w->ranks[r].done && !mgt__lcomm_blocked(w, r);
    while (changed) {
        changed = 0;
        for (rv = w->rvs; rv; rv = rv->next) {
            int absent_live = 0;
            if (rv->complete) continue;
            for (i = 0; i < rv->size && !absent_live; i++) absent_live = !rv->here[i] && w->live[rv->ranks[i]];
            for (i = 0; absent_live && i < rv->size; i++) {
                const mgt__lcomm_rank *q = &w->ranks[p = rv->ranks[i]];
                if (rv->here[i] && !w->live[p] && !q->done && q->wait == MGT__LCOMM_WAIT_RV && q->rv == rv) { w->live[p] = 1; changed = 1; }
            }
        }
        for (r = 0; r < w->world; r++) {
            const mgt__lcomm_rank *q = &w->ranks[r];
            if (!w->live[r] && !q->done && q->wait == MGT__LCOMM_WAIT_RECV && mgt__lcomm_blocked(w, r) && w->live[q->wait_peer]) {
                w->live[r] = 1;
                changed = 1;
            }
        }
    }
    for (r = 0; r < w->world; r++) dead += !w->live[r] && mgt__lcomm_blocked(w, r);
    if (!dead) return;
    snprintf(why, sizeof why, "communication can never complete (deadlock): ");
    for (r = 0, first = 1; r < w->world; r++) {
        const mgt__lcomm_rank *q = &w->ranks[r];
        if (w->live[r] || !mgt__lcomm_blocked(w, r)) continue;
        if (!first) mgt__catf(why, sizeof why, "; ");
        first = 0;
        mgt__lcomm_cat_call(why, sizeof why, r, "waits in", &q->history[(q->calls - 1) % MGT__LCOMM_HISTORY]);
        mgt__catf(why, sizeof why, " for");
        for (p = 0; p < w->world; p++) {
            if (!mgt__lcomm_waits_for(w, r, p)) continue;
            mgt__catf(why, sizeof why, " rank %d", p);
            if (w->ranks[p].done) mgt__catf(why, sizeof why, " (finished after call #%lld)", w->ranks[p].calls);
        }
    }
    for (r = 0; r < w->world; r++)
        if (!w->live[r] && mgt__lcomm_blocked(w, r)) mgt__lcomm_cat_history(w, why, sizeof why, r, w->ranks[r].calls);
    mgt__lcomm_fail_world(w, why);
}

/* under mu: one wait; 1 once the safety timeout has passed */
static int mgt__lcomm_sleep(mgt__local_world *w, mgt__lcomm_rank *me, struct timespec *deadline, int *armed) {
#if MGT_COMM_TIMEOUT_S > 0
    if (!*armed) {
        clock_gettime(CLOCK_REALTIME, deadline);
        deadline->tv_sec += MGT_COMM_TIMEOUT_S;
        *armed = 1;
    }
    return pthread_cond_timedwait(&me->cv, &w->mu, deadline) == ETIMEDOUT;
#else
    (void)deadline;
    (void)armed;
    pthread_cond_wait(&me->cv, &w->mu);
    return 0;
#endif
}
static void mgt__lcomm_timeout(mgt__local_world *w, mgt__lcomm_rank *me) {
    char why[1024];
    snprintf(why, sizeof why, "timeout: ");
    mgt__lcomm_cat_call(why, sizeof why, me->comm.rank, "waited", &me->history[(me->calls - 1) % MGT__LCOMM_HISTORY]);
    mgt__catf(why, sizeof why, " for %d s (MGT_COMM_TIMEOUT_S) while other ranks kept running", MGT_COMM_TIMEOUT_S);
    mgt__lcomm_fail_world(w, why);
}

/* ---- calls */

/* under mu: remember the call in the rank's history */
static mgt__lcomm_call *mgt__lcomm_record(mgt__lcomm_rank *me, int coll, int is_recv, const mgt_group *g, size_t count,
                                        int dtype, int root, int peer) {
    mgt__lcomm_call *k = &me->history[me->calls % MGT__LCOMM_HISTORY];
    int i;
    memset(k, 0, sizeof *k);
    k->number = ++me->calls;
    k->coll = coll;
    k->is_recv = is_recv;
    k->peer = peer;
    k->count = count;
    k->dtype = dtype;
    k->root = root;
    if (g) {
        k->group = g->id;
        k->size = g->size;
        for (i = 0; g->ranks && i < g->size && i < MGT__LCOMM_SHOWN; i++) k->shown[i] = g->ranks[i];
    }
    return k;
}
/* under mu: after recording; MGT_OK to go on, else this rank's error (the world has failed) */
static mgt_result mgt__lcomm_enter(mgt__local_world *w, mgt__lcomm_rank *me, const char *invalid) {
    char why[1024];
    if (w->failed) return mgt__lcomm_world_error(w);
    if (invalid || me->done) {
        snprintf(why, sizeof why, "invalid call: ");
        mgt__lcomm_cat_call(why, sizeof why, me->comm.rank, "called", &me->history[(me->calls - 1) % MGT__LCOMM_HISTORY]);
        mgt__catf(why, sizeof why, ": %s", invalid ? invalid : "after mgt__local_rank_done");
        mgt__lcomm_fail_world(w, why);
        return mgt__fail(invalid ? MGT_ERROR_ARGUMENT : MGT_ERROR_COMM, "%s", w->why);
    }
    return MGT_OK;
}
static void mgt__lcomm_check_args(const mgt__lcomm_rank *me, size_t count, int dtype, size_t mult, int bufs_ok,
                                 char *invalid, size_t cap) {
    if (dtype != MGT_F32 && dtype != MGT_BF16 && dtype != MGT_F16 && dtype != MGT_F64)
        snprintf(invalid, cap, "dtype %d is not MGT_F32, MGT_BF16, MGT_F16 or MGT_F64", dtype);
    else if (count > ((size_t)-1 - sizeof(mgt__lcomm_msg)) / mgt__lcomm_elt(dtype) / mult)
        snprintf(invalid, cap, "count %llu is too large", (unsigned long long)count);
    else if (count && !bufs_ok)
        snprintf(invalid, cap, "a buffer is NULL");
    (void)me;
}
static void mgt__lcomm_check_group(mgt__local_world *w, const mgt__lcomm_rank *me, const mgt_group *g, char *invalid,
                                  size_t cap) {
    int i;
    if (!g || !g->ranks) { snprintf(invalid, cap, "no group"); return; }
    if (g->size < 1 || g->size > w->world) { snprintf(invalid, cap, "group size %d is not in 1..%d", g->size, w->world); return; }
    if (g->index < 0 || g->index >= g->size || g->ranks[g->index] != me->comm.rank) {
        snprintf(invalid, cap, "this rank is not member %d of the group", g->index);
        return;
    }
    for (i = 0; i < g->size; i++)
        if (g->ranks[i] < 0 || g->ranks[i] >= w->world) {
            snprintf(invalid, cap, "member %d is rank %d, outside the world of %d", i, g->ranks[i], w->world);
            return;
        }
    for (i = 0; i < g->size && !invalid[0]; i++) {
        if (w->mark[g->ranks[i]]) snprintf(invalid, cap, "rank %d is listed twice", g->ranks[i]);
        w->mark[g->ranks[i]] = 1;
    }
    for (i = 0; i < g->size; i++) w->mark[g->ranks[i]] = 0;
}
/* under mu: the sequence number of this rank's next collective on group id; -1 when out of memory */
static long long mgt__lcomm_next_seq(mgt__lcomm_rank *me, int group) {
    int i;
    for (i = 0; i < me->seq_n; i++)
        if (me->seq_group[i] == group) return me->seq_next[i]++;
    if (me->seq_n == me->seq_cap) {
        int cap = me->seq_cap ? 2 * me->seq_cap : 8;
        int *ids = (int *)MGT_MALLOC(sizeof(int) * (size_t)cap);
        long long *next = (long long *)MGT_MALLOC(sizeof(long long) * (size_t)cap);
        if (!ids || !next) { MGT_FREE(ids); MGT_FREE(next); return -1; }
        if (me->seq_n) {
            memcpy(ids, me->seq_group, sizeof(int) * (size_t)me->seq_n);
            memcpy(next, me->seq_next, sizeof(long long) * (size_t)me->seq_n);
        }
        MGT_FREE(me->seq_group);
        MGT_FREE(me->seq_next);
        me->seq_group = ids;
        me->seq_next = next;
        me->seq_cap = cap;
    }
    me->seq_group[me->seq_n] = group;
    me->seq_next[me->seq_n++] = 1;
    return 0;
}
static mgt__lcomm_rv *mgt__lcomm_rv_new(int size) {
    size_t bytes = sizeof(mgt__lcomm_rv) + (size_t)size * (sizeof(int) + 2 * sizeof(void *) + 1);
    mgt__lcomm_rv *rv = (mgt__lcomm_rv *)MGT_MALLOC(bytes);
    if (!rv) return NULL;
    memset(rv, 0, bytes);
    rv->size = size;
    rv->src = (const void **)(void *)(rv + 1);
    rv->dst = (void **)(rv->src + size);
    rv->ranks = (int *)(void *)(rv->dst + size);
    rv->here = (unsigned char *)(rv->ranks + size);
    return rv;
}
/* under mu: a member is done with rv; the last one frees it */
static void mgt__lcomm_rv_leave(mgt__local_world *w, mgt__lcomm_rv *rv) {
    mgt__lcomm_rv **p;
    if (++rv->left < rv->joined || !(rv->complete || w->failed)) return;
    for (p = &w->rvs; *p != rv; p = &(*p)->next) {}
    *p = rv->next;
    MGT_FREE(rv);
}
static int mgt__lcomm_rv_matches(const mgt__lcomm_rv *rv, const mgt__lcomm_call *k, const mgt_group *g) {
    const mgt__lcomm_call *f = &rv->first;
    int i;
    if (f->coll != k->coll || f->count != k->count || f->dtype != k->dtype || g->size != rv->size) return 0;
    if (k->coll == MGT_COLL_BROADCAST && f->root != k->root) return 0;
    for (i = 0; i < g->size; i++)
        if (g->ranks[i] != rv->ranks[i]) return 0;
    return 1;
}
/* outside mu, once every member has arrived: this member's part of the work */
static void mgt__lcomm_work(const mgt__lcomm_rv *rv, int index, int coll, size_t count, int dtype, int root) {
    size_t elt = mgt__lcomm_elt(dtype), n = (size_t)rv->size, i = (size_t)index;
    size_t j;
    if (coll == MGT_COLL_ALL_REDUCE) { /* slice i of every buffer */
        size_t per = count / n, extra = count % n, lo = per * i + (i < extra ? i : extra);
        mgt__lcomm_sum((const void *const *)rv->dst, rv->size, lo, rv->dst, rv->size, lo, per + (i < extra), dtype);
    } else if (coll == MGT_COLL_REDUCE_SCATTER) { /* block i of every send buffer into my recv */
        mgt__lcomm_sum(rv->src, rv->size, i * count, rv->dst + i, 1, 0, count, dtype);
    } else if (coll == MGT_COLL_ALL_GATHER) {
        for (j = 0; j < n && count; j++) {
            char *to = (char *)rv->dst[i] + j * count * elt;
            if ((const void *)to != rv->src[j]) memcpy(to, rv->src[j], count * elt);
        }
    } else if (coll == MGT_COLL_BROADCAST) {
        if (index != root && count && rv->dst[i] != rv->dst[root]) memcpy(rv->dst[i], rv->dst[root], count * elt);
    }
}
static mgt_result mgt__lcomm_finish(mgt_comm *c, int coll, double t0, mgt_result r, double bytes) {
    c->stats.calls[coll]++;
    c->stats.seconds[coll] += mgt_now() - t0;
    if (r == MGT_OK) c->stats.bytes[coll] += bytes;
    return r;
}

static mgt_result mgt__lcomm_collective(mgt_comm *c, int coll, const mgt_group *g, const void *src, void *dst,
                                       size_t count, int dtype, int root) {
    double t0 = mgt_now(), bytes;
    mgt__lcomm_rank *me;
    mgt__local_world *w;
    mgt__lcomm_rv *rv;
    mgt__lcomm_call call;
    mgt_result r;
    char invalid[256], why[2048];
    struct timespec deadline;
    int i, n, armed = 0, timed_out = 0;
    long long seq;
    if (!c || !c->impl) return mgt__fail(MGT_ERROR_ARGUMENT, "%s: no communicator", mgt_coll_name(coll));
    me = (mgt__lcomm_rank *)c->impl;
    w = me->w;
    invalid[0] = 0;
    pthread_mutex_lock(&w->mu);
    call = *mgt__lcomm_record(me, coll, 0, g, count, dtype, root, -1);
    mgt__lcomm_check_group(w, me, g, invalid, sizeof invalid);
    if (!invalid[0])
        mgt__lcomm_check_args(me, count, dtype, (size_t)g->size, coll == MGT_COLL_BARRIER || (dst && src), invalid,
                              sizeof invalid);
    if (!invalid[0] && coll == MGT_COLL_BROADCAST && (root < 0 || root >= g->size))
        snprintf(invalid, sizeof invalid, "root %d is not a member index in 0..%d", root, g->size - 1);
    r = mgt__lcomm_enter(w, me, invalid[0] ? invalid : NULL);
    if (r != MGT_OK) { pthread_mutex_unlock(&w->mu); return mgt__lcomm_finish(c, coll, t0, r, 0); }
    n = g->size;
    bytes = (double)count * (double)mgt__lcomm_elt(dtype) * (coll == MGT_COLL_REDUCE_SCATTER || coll == MGT_COLL_ALL_GATHER ? n : 1);
    if (coll == MGT_COLL_BARRIER) bytes = 0;
    if (n == 1) { /* nothing to wait for */
        pthread_mutex_unlock(&w->mu);
        if ((coll == MGT_COLL_REDUCE_SCATTER || coll == MGT_COLL_ALL_GATHER) && count && src != dst)
            memmove(dst, src, count * mgt__lcomm_elt(dtype));
        return mgt__lcomm_finish(c, coll, t0, MGT_OK, bytes);
    }
    seq = mgt__lcomm_next_seq(me, g->id);
    for (rv = w->rvs; rv && !(rv->group == g->id && rv->seq == seq); rv = rv->next) {}
    if (seq < 0 || (!rv && !(rv = mgt__lcomm_rv_new(n)))) {
        snprintf(why, sizeof why, "out of memory: ");
        mgt__lcomm_cat_call(why, sizeof why, me->comm.rank, "called", &call);
        mgt__lcomm_fail_world(w, why);
        r = mgt__lcomm_world_error(w);
        pthread_mutex_unlock(&w->mu);
        return mgt__lcomm_finish(c, coll, t0, r, 0);
    }
    if (rv->joined == 0) { /* new: this member's call is the reference */
        rv->group = g->id;
        rv->seq = seq;
        rv->first = call;
        rv->first_rank = me->comm.rank;
        memcpy(rv->ranks, g->ranks, sizeof(int) * (size_t)n);
        rv->next = w->rvs;
        w->rvs = rv;
    } else if (!mgt__lcomm_rv_matches(rv, &call, g)) {
        snprintf(why, sizeof why, "mismatched collectives (the members of a group must make the same calls in the same order): ");
        mgt__lcomm_cat_call(why, sizeof why, rv->first_rank, "called", &rv->first);
        mgt__catf(why, sizeof why, ", ");
        mgt__lcomm_cat_call(why, sizeof why, me->comm.rank, "called", &call);
        mgt__lcomm_cat_history(w, why, sizeof why, rv->first_rank, rv->first.number);
        mgt__lcomm_cat_history(w, why, sizeof why, me->comm.rank, call.number);
        mgt__lcomm_fail_world(w, why);
        r = mgt__lcomm_world_error(w);
        pthread_mutex_unlock(&w->mu);
        return mgt__lcomm_finish(c, coll, t0, r, 0);
    }
    rv->here[g->index] = 1;
    rv->src[g->index] = src;
    rv->dst[g->index] = dst;
    rv->joined++;
    if (++rv->arrived == n) {
        rv->complete = 1;
        for (i = 0; i < n; i++) pthread_cond_broadcast(&w->ranks[rv->ranks[i]].cv);
    } else {
        me->wait = MGT__LCOMM_WAIT_RV;
        me->rv = rv;
        mgt__lcomm_check_deadlock(w);
        while (!rv->complete && !w->failed) {
            if (timed_out) mgt__lcomm_timeout(w, me);
            else timed_out = mgt__lcomm_sleep(w, me, &deadline, &armed);
        }
        me->wait = MGT__LCOMM_RUNNING;
        me->rv = NULL;
        if (!rv->complete) { /* failed: nobody touches this member's buffers any more */
            mgt__lcomm_rv_leave(w, rv);
            r = mgt__lcomm_world_error(w);
            pthread_mutex_unlock(&w->mu);
            return mgt__lcomm_finish(c, coll, t0, r, 0);
        }
    }
    pthread_mutex_unlock(&w->mu);
    mgt__lcomm_work(rv, g->index, coll, count, dtype, root);
    pthread_mutex_lock(&w->mu);
    if (++rv->finished == n)
        for (i = 0; i < n; i++) pthread_cond_broadcast(&w->ranks[rv->ranks[i]].cv);
    while (rv->finished < n) pthread_cond_wait(&me->cv, &w->mu); /* the others still use my buffers */
    mgt__lcomm_rv_leave(w, rv);
    pthread_mutex_unlock(&w->mu);
    return mgt__lcomm_finish(c, coll, t0, MGT_OK, bytes);
}

static mgt_result mgt__lcomm_all_reduce(mgt_comm *c, const mgt_group *g, void *buf, size_t count, int dtype) {
    return mgt__lcomm_collective(c, MGT_COLL_ALL_REDUCE, g, buf, buf, count, dtype, 0);
}
static mgt_result mgt__lcomm_reduce_scatter(mgt_comm *c, const mgt_group *g, const void *send, void *recv,
                                           size_t recv_count, int dtype) {
    return mgt__lcomm_collective(c, MGT_COLL_REDUCE_SCATTER, g, send, recv, recv_count, dtype, 0);
}
static mgt_result mgt__lcomm_all_gather(mgt_comm *c, const mgt_group *g, const void *send, void *recv,
                                       size_t send_count, int dtype) {
    return mgt__lcomm_collective(c, MGT_COLL_ALL_GATHER, g, send, recv, send_count, dtype, 0);
}
static mgt_result mgt__lcomm_broadcast(mgt_comm *c, const mgt_group *g, void *buf, size_t count, int dtype,
                                      int root_index) {
    return mgt__lcomm_collective(c, MGT_COLL_BROADCAST, g, buf, buf, count, dtype, root_index);
}
static mgt_result mgt__lcomm_barrier(mgt_comm *c, const mgt_group *g) {
    return mgt__lcomm_collective(c, MGT_COLL_BARRIER, g, NULL, NULL, 0, MGT_F32, 0);
}

static mgt_result mgt__lcomm_send(mgt_comm *c, int peer, const void *buf, size_t count, int dtype) {
    double t0 = mgt_now();
    mgt__lcomm_rank *me;
    mgt__local_world *w;
    mgt__lcomm_msg *m = NULL, **tail;
    mgt__lcomm_call *k;
    mgt_result r;
    char invalid[256], why[2048];
    size_t bytes = 0;
    if (!c || !c->impl) return mgt__fail(MGT_ERROR_ARGUMENT, "send: no communicator");
    me = (mgt__lcomm_rank *)c->impl;
    w = me->w;
    invalid[0] = 0;
    mgt__lcomm_check_args(me, count, dtype, 1, buf != NULL, invalid, sizeof invalid);
    if (!invalid[0] && (peer < 0 || peer >= w->world)) snprintf(invalid, sizeof invalid, "peer %d is outside the world of %d", peer, w->world);
    if (!invalid[0]) {
        bytes = count * mgt__lcomm_elt(dtype);
        m = (mgt__lcomm_msg *)MGT_MALLOC(sizeof *m + bytes);
        if (m && bytes) memcpy(m + 1, buf, bytes);
    }
    pthread_mutex_lock(&w->mu);
    k = mgt__lcomm_record(me, MGT_COLL_SEND_RECV, 0, NULL, count, dtype, 0, peer);
    r = mgt__lcomm_enter(w, me, invalid[0] ? invalid : NULL);
    if (r == MGT_OK && (!m || w->ranks[peer].done)) {
        snprintf(why, sizeof why, "%s: ", m ? "send to a finished rank" : "out of memory");
        mgt__lcomm_cat_call(why, sizeof why, me->comm.rank, "called", k);
        if (m) mgt__catf(why, sizeof why, ", but rank %d has finished after call #%lld", peer, w->ranks[peer].calls);
        mgt__lcomm_fail_world(w, why);
        r = mgt__lcomm_world_error(w);
    }
    if (r == MGT_OK) {
        m->next = NULL;
        m->from = me->comm.rank;
        m->call = *k;
        m->bytes = bytes;
        for (tail = &w->ranks[peer].inbox; *tail; tail = &(*tail)->next) {}
        *tail = m;
        m = NULL;
        pthread_cond_broadcast(&w->ranks[peer].cv);
    }
    pthread_mutex_unlock(&w->mu);
    MGT_FREE(m);
    return mgt__lcomm_finish(c, MGT_COLL_SEND_RECV, t0, r, (double)bytes);
}

static mgt_result mgt__lcomm_recv(mgt_comm *c, int peer, void *buf, size_t count, int dtype);
/* the send is buffered here, so the pair is the send, then the receive */
static mgt_result mgt__lcomm_sendrecv(mgt_comm *c, int send_peer, const void *send, int recv_peer, void *recv, size_t count, int dtype) {
    mgt_result r = mgt__lcomm_send(c, send_peer, send, count, dtype);
    return r == MGT_OK ? mgt__lcomm_recv(c, recv_peer, recv, count, dtype) : r;
}

static mgt_result mgt__lcomm_recv(mgt_comm *c, int peer, void *buf, size_t count, int dtype) {
    double t0 = mgt_now();
    mgt__lcomm_rank *me;
    mgt__local_world *w;
    mgt__lcomm_msg *m = NULL, **p;
    mgt__lcomm_call call;
    mgt_result r;
    char invalid[256], why[2048];
    struct timespec deadline;
    int armed = 0, timed_out = 0;
    if (!c || !c->impl) return mgt__fail(MGT_ERROR_ARGUMENT, "recv: no communicator");
    me = (mgt__lcomm_rank *)c->impl;
    w = me->w;
    invalid[0] = 0;
    mgt__lcomm_check_args(me, count, dtype, 1, buf != NULL, invalid, sizeof invalid);
    if (!invalid[0] && (peer < 0 || peer >= w->world)) snprintf(invalid, sizeof invalid, "peer %d is outside the world of %d", peer, w->world);
    pthread_mutex_lock(&w->mu);
    call = *mgt__lcomm_record(me, MGT_COLL_SEND_RECV, 1, NULL, count, dtype, 0, peer);
    r = mgt__lcomm_enter(w, me, invalid[0] ? invalid : NULL);
    while (r == MGT_OK) {
        if (w->failed) { r = mgt__lcomm_world_error(w); break; }
        for (p = &me->inbox; *p && (*p)->from != peer; p = &(*p)->next) {}
        if (*p) {
            if ((*p)->call.count != count || (*p)->call.dtype != dtype) {
                snprintf(why, sizeof why, "mismatched send/recv: ");
                mgt__lcomm_cat_call(why, sizeof why, peer, "called", &(*p)->call);
                mgt__catf(why, sizeof why, ", ");
                mgt__lcomm_cat_call(why, sizeof why, me->comm.rank, "called", &call);
                mgt__lcomm_fail_world(w, why);
                continue;
            }
            m = *p;
            *p = m->next;
            break;
        }
        if (timed_out) { mgt__lcomm_timeout(w, me); continue; }
        me->wait = MGT__LCOMM_WAIT_RECV;
        me->wait_peer = peer;
        mgt__lcomm_check_deadlock(w);
        if (!w->failed) timed_out = mgt__lcomm_sleep(w, me, &deadline, &armed);
        me->wait = MGT__LCOMM_RUNNING;
    }
    pthread_mutex_unlock(&w->mu);
    if (m) {
        if (m->bytes) memcpy(buf, m + 1, m->bytes);
        MGT_FREE(m);
    }
    return mgt__lcomm_finish(c, MGT_COLL_SEND_RECV, t0, r, r == MGT_OK ? (double)count * (double)mgt__lcomm_elt(dtype) : 0);
}

/* ---- the world */

MGT__LCOMM_UNUSED static void mgt__local_world_destroy(mgt__local_world *w) {
    int r;
    if (!w) return;
    while (w->rvs) {
        mgt__lcomm_rv *rv = w->rvs;
        w->rvs = rv->next;
        MGT_FREE(rv);
    }
    for (r = 0; w->ranks && r < w->world; r++) {
        mgt__lcomm_rank *q = &w->ranks[r];
        while (q->inbox) {
            mgt__lcomm_msg *m = q->inbox;
            q->inbox = m->next;
            MGT_FREE(m);
        }
        MGT_FREE(q->seq_group);
        MGT_FREE(q->seq_next);
        pthread_cond_destroy(&q->cv);
    }
    pthread_mutex_destroy(&w->mu);
    MGT_FREE(w->ranks);
    MGT_FREE(w->mark);
    MGT_FREE(w->live);
    MGT_FREE(w);
}

MGT__LCOMM_UNUSED static mgt_result mgt__local_world_create(mgt__local_world **out, int world) {
    mgt__local_world *w;
    int r;
    if (!out) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt__local_world_create: out is required");
    *out = NULL;
    if (world < 1 || world > 65536) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt__local_world_create: world = %d is not in 1..65536", world);
    w = (mgt__local_world *)MGT_MALLOC(sizeof *w);
    if (!w) return mgt__fail(MGT_ERROR_MEMORY, "out of memory for a world of %d ranks", world);
    memset(w, 0, sizeof *w);
    w->ranks = (mgt__lcomm_rank *)MGT_MALLOC(sizeof(mgt__lcomm_rank) * (size_t)world);
    w->mark = (unsigned char *)MGT_MALLOC((size_t)world);
    w->live = (int *)MGT_MALLOC(sizeof(int) * (size_t)world);
    if (!w->ranks || !w->mark || !w->live) {
        MGT_FREE(w->ranks);
        MGT_FREE(w->mark);
        MGT_FREE(w->live);
        MGT_FREE(w);
        return mgt__fail(MGT_ERROR_MEMORY, "out of memory for a world of %d ranks", world);
    }
    memset(w->ranks, 0, sizeof(mgt__lcomm_rank) * (size_t)world);
    memset(w->mark, 0, (size_t)world);
    w->world = world;
    pthread_mutex_init(&w->mu, NULL);
    for (r = 0; r < world; r++) {
        mgt__lcomm_rank *q = &w->ranks[r];
        q->w = w;
        pthread_cond_init(&q->cv, NULL);
        q->comm.rank = r;
        q->comm.world = world;
        q->comm.all_reduce = mgt__lcomm_all_reduce;
        q->comm.reduce_scatter = mgt__lcomm_reduce_scatter;
        q->comm.all_gather = mgt__lcomm_all_gather;
        q->comm.broadcast = mgt__lcomm_broadcast;
        q->comm.send = mgt__lcomm_send;
        q->comm.sendrecv = mgt__lcomm_sendrecv;
        q->comm.recv = mgt__lcomm_recv;
        q->comm.barrier = mgt__lcomm_barrier;
        q->comm.impl = q;
    }
    *out = w;
    return MGT_OK;
}

MGT__LCOMM_UNUSED static mgt_comm *mgt__local_comm(mgt__local_world *w, int rank) {
    return w && rank >= 0 && rank < w->world ? &w->ranks[rank].comm : NULL;
}

/* this rank will make no more calls (it finished or failed): peers waiting for it get an error */
MGT__LCOMM_UNUSED static void mgt__local_rank_done(mgt_comm *c) {
    mgt__lcomm_rank *me;
    mgt__local_world *w;
    char why[2048];
    if (!c || !c->impl) return;
    me = (mgt__lcomm_rank *)c->impl;
    w = me->w;
    pthread_mutex_lock(&w->mu);
    if (!me->done) {
        me->done = 1;
        me->wait = MGT__LCOMM_RUNNING;
        if (!w->failed && me->inbox) {
            snprintf(why, sizeof why, "rank %d finished after call #%lld without receiving what ", me->comm.rank, me->calls);
            mgt__lcomm_cat_call(why, sizeof why, me->inbox->from, "sent in", &me->inbox->call);
            mgt__lcomm_fail_world(w, why);
        } else if (!w->failed) {
            mgt__lcomm_check_deadlock(w);
        }
    }
    pthread_mutex_unlock(&w->mu);
}


/* ---- the world of rank threads in this process (the table of src/world.c) */
static mgt_result mgt__world_local_create(const mgt__world_args *a, void **world) {
    mgt__local_world *w = NULL;
    mgt_result res = mgt__local_world_create(&w, a->world);
    *world = w;
    return res;
}
static mgt_result mgt__world_local_comm(void *world, int rank, mgt_backend *be, const mgt_group *const *groups, int ngroups, mgt_comm **out) {
    (void)be, (void)groups, (void)ngroups;
    *out = mgt__local_comm((mgt__local_world *)world, rank);
    return MGT_OK;
}
static void mgt__world_local_rank_failed(void *world, mgt_comm *c) {
    (void)world;
    mgt__local_rank_done(c);
}
static void mgt__world_local_destroy(void *world) { mgt__local_world_destroy((mgt__local_world *)world); }
static const mgt__world_api mgt__world_local = {
    "cpu", 0, 1, mgt__world_local_create, mgt__world_cpu_backend, mgt__world_cpu_backend_destroy, mgt__world_local_comm,
    NULL, NULL, mgt__world_local_rank_failed, NULL, mgt__world_local_destroy,
};
/* ==== end src/comm_local.c ==== */
/* ==== begin src/comm_mpi.c ==== */
#line 1 "src/comm_mpi.c"
/* src/comm_mpi.c - processes (MPI) around the in-process world: the launcher, the MPI library, the two-level communicator (MGT_NO_MPI leaves it out) */
/* ---- communication: processes (MPI) around the in-process world ---------------------------------
   Under an MPI launcher each process runs a contiguous block of `per` ranks (rank / per is its
   process) in an in-process world of the whole world's size, of which only its block makes calls.
   Each rank's mgt_comm is two-level: a group whose members all live in this process, and a
   send/recv between two of them, go through the in-process communicator unchanged. A reduction
   over a group that spans processes is hierarchical (mgt__pcomm_chain): each process's first
   member adds its process's members to the running sum of the processes before it, in the
   in-process communicator's order (member 0 + member 1 + ... in group order, in fp32, rounded
   once), so every result is bit-identical to one process whatever the process count, and one sum
   and one result cross each process boundary. All-gather, broadcast and a group whose processes'
   members are not contiguous are exchanged member to member with MPI.
   Rank threads call MPI themselves (MPI_THREAD_MULTIPLE) with non-blocking sends and receives
   polled against parallel.timeout_s, rather than through one communication thread per process:
   no hand-off, no queue, and each wait keeps its own deadline and its own message. Matching:
   tag = sender * world + receiver on a communicator per kind (collectives, send/recv); between
   one pair, MPI delivers messages of one tag in the order they were posted, and a rank posts in
   program order. Send copies the data and returns (buffered, as the in-process send). Calls are
   counted in the in-process communicator's statistics, which the rank's mgt_comm mirrors. */

/* ---- the launcher: how many processes started this one, from the launcher's environment (read
   also by a program built with MGT_NO_MPI, so that it refuses to run as one of several copies) */

MGTDEF int mgt_mpi_launcher(char *name, size_t cap) {
    /* each launcher's own size variable; Slurm's srun counts only beside a PMI rank of its step
       (SLURM_NTASKS alone is also set inside a batch script, which is one process) */
    static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    const char *v;
    long n;
    size_t i;
    if (name && cap) name[0] = 0;
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (!(v = getenv(sizes[i])) || (n = strtol(v, NULL, 10)) < 1) continue;
        if (name) mgt__strlcpy(name, sizes[i], cap);
        return n > 65536 ? 65536 : (int)n;
    }
    if ((getenv("PMIX_RANK") || getenv("PMI_RANK")) && (v = getenv("SLURM_NTASKS")) && (n = strtol(v, NULL, 10)) >= 1) {
        if (name) mgt__strlcpy(name, "SLURM_NTASKS", cap);
        return n > 65536 ? 65536 : (int)n;
    }
    return 1;
}

MGTDEF int mgt_mpi_launcher_rank(void) {
    static const char *const ranks[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
    size_t i;
    if (mgt_mpi_launcher(NULL, 0) <= 1) return 0;
    for (i = 0; i < sizeof ranks / sizeof ranks[0]; i++)
        if (getenv(ranks[i])) return atoi(getenv(ranks[i]));
    return getenv("SLURM_PROCID") ? atoi(getenv("SLURM_PROCID")) : 0;
}

typedef struct mgt__pcomm_msg { /* a buffered send in flight; the data follows the struct */
    struct mgt__pcomm_msg *next;
    void *request;
} mgt__pcomm_msg;

typedef struct mgt__pcomm_rank {
    mgt_comm comm;   /* the rank's communicator; stats mirror inner's */
    mgt_comm *inner; /* the rank in the in-process world, which counts every call */
    mgt__mpi_world *w;
    mgt__pcomm_msg *sends;
} mgt__pcomm_rank;

struct mgt__mpi_world {
    const mgt_mpi_api *api;
    int process, processes, per, world;
    double timeout_s;
    mgt__local_world *local;
    mgt__pcomm_rank *ranks; /* (per) this process's */
    char (*hosts)[64];      /* (processes) */
    pthread_mutex_t mu;
    int failed;
    char why[2048];
    int handoff; /* ThreadSanitizer's token for MPI's hand-overs (MGT__MPI_RELEASE) */
    double wire_bytes; /* bytes this process's ranks sent to other processes (under mu): what the network carries */
};

#ifndef MGT_NO_MPI

/* ---- the MPI library: build/libmgt_mpi.so, opened on first use (src/plugin.c) ---------------- */

static char mgt__mpi_host[256]; /* this process's, once MPI has started */
static pthread_mutex_t mgt__mpi_mu = PTHREAD_MUTEX_INITIALIZER;
static const mgt_mpi_api *mgt__mpi_api;
static char mgt__mpi_why[800];
static int mgt__mpi_started, mgt__mpi_aborted, mgt__mpi_process, mgt__mpi_processes = 1;

static const mgt__dl_lib mgt__mpi_lib = {"MGT_MPI_LIBRARY", "libmgt_mpi.so", "mgt_mpi_api_get", "MPI", "ninja mpi", MGT_MPI_ABI};

MGTDEF const mgt_mpi_api *mgt_mpi_load(char *why, size_t cap) {
    const mgt_mpi_api *api;
    pthread_mutex_lock(&mgt__mpi_mu);
    if (!mgt__mpi_api && !mgt__mpi_why[0]) {
        char tried[600] = "";
        mgt__mpi_api = (const mgt_mpi_api *)mgt__dl_search(&mgt__mpi_lib, tried, sizeof tried);
        if (!mgt__mpi_api)
            snprintf(mgt__mpi_why, sizeof mgt__mpi_why, "the MPI library is not built or cannot load (%s); build it with `ninja mpi` (needs mpicc)",
                     tried[0] ? tried : "not found");
    }
    api = mgt__mpi_api;
    if (!api && why) mgt__strlcpy(why, mgt__mpi_why, cap);
    pthread_mutex_unlock(&mgt__mpi_mu);
    return api;
}

MGTDEF void mgt_mpi_use(const mgt_mpi_api *api) {
    pthread_mutex_lock(&mgt__mpi_mu);
    mgt__mpi_api = api;
    mgt__mpi_why[0] = 0;
    pthread_mutex_unlock(&mgt__mpi_mu);
}

/* MPI_Finalize at exit: Open MPI's launcher treats a process that exits without it as failed. Not
   after an abort, whose processes are being killed */
static void mgt__mpi_at_exit(void) {
    if (mgt__mpi_started && !mgt__mpi_aborted) mgt__mpi_api->finalize();
}

MGTDEF mgt_result mgt_mpi_start(int *process, int *processes) {
    char why[800], launcher[64];
    int expected = mgt_mpi_launcher(launcher, sizeof launcher);
    mgt_result r = MGT_OK;
    if (!process || !processes) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_mpi_start: process and processes are required");
    why[0] = 0;
    if (!mgt_mpi_load(why, sizeof why)) return mgt__fail(MGT_ERROR_UNSUPPORTED, "started by an MPI launcher (%s=%d), but %s", launcher, expected, why);
    pthread_mutex_lock(&mgt__mpi_mu);
    if (!mgt__mpi_started) {
        if (mgt__mpi_api->init(&mgt__mpi_process, &mgt__mpi_processes, mgt__mpi_host, sizeof mgt__mpi_host, why, sizeof why))
            r = mgt__fail(MGT_ERROR_COMM, "MPI_Init_thread: %s", why);
        else {
            mgt__mpi_started = 1;
            atexit(mgt__mpi_at_exit);
        }
    }
    *process = mgt__mpi_process;
    *processes = mgt__mpi_processes;
    pthread_mutex_unlock(&mgt__mpi_mu);
    return r;
}

MGTDEF void mgt_mpi_abort(int code) {
    if (!mgt__mpi_started || mgt__mpi_processes < 2) return;
    mgt__mpi_aborted = 1;
    mgt__mpi_api->abort_all(code);
}

/* Between two threads of one process, MPI hands data over inside its own (uninstrumented)
   library: ThreadSanitizer sees the receiver read what another thread wrote with no order
   between them. Under TSan every send and test (MPI moves data for any thread inside any call)
   releases, and a completed wait acquires, the world. */
#if defined(__SANITIZE_THREAD__)
#define MGT__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MGT__TSAN 1
#endif
#endif
#ifdef MGT__TSAN
#ifdef __cplusplus
extern "C" {
#endif
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#ifdef __cplusplus
}
#endif
#define MGT__MPI_RELEASE(w) __tsan_release(&(w)->handoff)
#define MGT__MPI_ACQUIRE(w) __tsan_acquire(&(w)->handoff)
#else
#define MGT__MPI_RELEASE(w) ((void)0)
#define MGT__MPI_ACQUIRE(w) ((void)0)
#endif

static int mgt__pcomm_process_of(const mgt__mpi_world *w, int rank) { return rank / w->per; }

/* an MPI_Isend of a rank's, counted in wire_bytes when it leaves the process */
static void *mgt__pcomm_isend(mgt__mpi_world *w, const void *buf, size_t bytes, int process, int tag, int channel, char *why, size_t cap) {
    void *req;
    MGT__MPI_RELEASE(w);
    req = w->api->isend(buf, bytes, process, tag, channel, why, cap);
    if (req && process != w->process) {
        pthread_mutex_lock(&w->mu);
        w->wire_bytes += (double)bytes;
        pthread_mutex_unlock(&w->mu);
    }
    return req;
}
static int mgt__pcomm_tag(const mgt__mpi_world *w, int from, int to) { return from * w->world + to; }

static int mgt__pcomm_failed(mgt__mpi_world *w) {
    int failed;
    pthread_mutex_lock(&w->mu);
    failed = w->failed;
    pthread_mutex_unlock(&w->mu);
    if (!failed) { /* a rank of this process failed in the in-process world */
        pthread_mutex_lock(&w->local->mu);
        failed = w->local->failed;
        pthread_mutex_unlock(&w->local->mu);
    }
    return failed;
}
static mgt_result mgt__pcomm_fail(mgt__mpi_world *w, const char *why) {
    char copy[2048]; /* why may be the thread's message (mgt_last_error()), which the failure rewrites */
    mgt__strlcpy(copy, why, sizeof copy);
    pthread_mutex_lock(&w->mu);
    if (!w->failed) {
        w->failed = 1;
        mgt__strlcpy(w->why, copy, sizeof w->why);
    }
    pthread_mutex_unlock(&w->mu);
    return mgt__fail(MGT_ERROR_COMM, "%s", copy);
}
static mgt_result mgt__pcomm_world_error(mgt__mpi_world *w) {
    char why[2048];
    pthread_mutex_lock(&w->mu);
    mgt__strlcpy(why, w->failed ? w->why : "", sizeof why);
    pthread_mutex_unlock(&w->mu);
    if (!why[0]) {
        pthread_mutex_lock(&w->local->mu);
        mgt__strlcpy(why, w->local->why, sizeof why);
        pthread_mutex_unlock(&w->local->mu);
    }
    return mgt__fail(MGT_ERROR_COMM, "%s", why);
}

/* waits for n requests (NULL ones are done) until the deadline; who, what and peer (a rank) name a
   late one */
static mgt_result mgt__pcomm_wait(mgt__mpi_world *w, const char *who, void **req, const int *peer, int n, const char *what) {
    double start = mgt_now(), pause = 1e-6, last = start;
    char why[2048], text[512];
    int i, left;
    for (;;) {
        for (i = 0, left = 0; i < n; i++) {
            int done;
            if (!req[i]) continue;
            done = w->api->test(req[i], text, sizeof text);
            MGT__MPI_RELEASE(w); /* MPI may have moved another thread's data during the call */
            if (done < 0) {
                req[i] = NULL;
                snprintf(why, sizeof why, "%s, %s with rank %d (process %d on %s): MPI: %s", who, what, peer[i],
                         mgt__pcomm_process_of(w, peer[i]), w->hosts[mgt__pcomm_process_of(w, peer[i])], text);
                for (i = 0; i < n; i++) if (req[i]) { w->api->cancel(req[i]); req[i] = NULL; }
                return mgt__pcomm_fail(w, why);
            }
            if (done) req[i] = NULL;
            else left++;
        }
        if (!left) {
            MGT__MPI_ACQUIRE(w);
            return MGT_OK;
        }
        { /* polls come every 0.2 ms at most: a gap of seconds means this process did not run (SIGSTOP,
             a suspended machine), not that the peer is late, so the gap does not count against it */
            double now = mgt_now();
            if (now - last > 0.5) start += now - last;
            last = now;
        }
        if (mgt__pcomm_failed(w) || (w->timeout_s > 0 && mgt_now() - start > w->timeout_s)) {
            int timed_out = !mgt__pcomm_failed(w);
            for (i = 0; i < n && !req[i]; i++) {}
            if (timed_out)
                snprintf(why, sizeof why, "%s waited %.0f s (parallel.timeout_s) in %s for rank %d (process %d on %s): that process is "
                         "stalled, lost, or called something else", who, w->timeout_s, what, peer[i], mgt__pcomm_process_of(w, peer[i]),
                         w->hosts[mgt__pcomm_process_of(w, peer[i])]);
            for (i = 0; i < n; i++) if (req[i]) { w->api->cancel(req[i]); req[i] = NULL; }
            return timed_out ? mgt__pcomm_fail(w, why) : mgt__pcomm_world_error(w);
        }
        { /* poll, backing off to 0.2 ms: the cores are the ranks' */
            struct timespec ts;
            ts.tv_sec = 0;
            ts.tv_nsec = (long)(pause * 1e9);
            nanosleep(&ts, NULL);
            if (pause < 2e-4) pause *= 2;
        }
    }
}

/* buffered sends that have completed are freed */
static mgt_result mgt__pcomm_reap(mgt__pcomm_rank *me) {
    mgt__pcomm_msg **p = &me->sends;
    char text[512], why[1024];
    while (*p) {
        int done = me->w->api->test((*p)->request, text, sizeof text);
        if (done) {
            mgt__pcomm_msg *s = *p;
            *p = s->next;
            MGT_FREE(s);
            if (done < 0) {
                snprintf(why, sizeof why, "rank %d: a send to another process failed: MPI: %s", me->comm.rank, text);
                return mgt__pcomm_fail(me->w, why);
            }
        } else p = &(*p)->next;
    }
    return MGT_OK;
}

static int mgt__pcomm_in_process(const mgt__mpi_world *w, const mgt_group *g) {
    int i;
    for (i = 0; i < g->size; i++)
        if (mgt__pcomm_process_of(w, g->ranks[i]) != w->process) return 0;
    return 1;
}

static mgt_result mgt__pcomm_count(mgt__pcomm_rank *me, int coll, double t0, mgt_result r, double bytes) {
    r = mgt__lcomm_finish(me->inner, coll, t0, r, bytes);
    me->comm.stats = me->inner->stats;
    return r;
}

/* a send (is_send) or receive of `bytes` between this rank and rank q on the collective channel,
   appended to req/peer; 0, or -1 with the thread's error set */
static int mgt__pcomm_post(mgt__pcomm_rank *me, int is_send, void *buf, size_t bytes, int q, void **req, int *peer, int *nreq, const char *what) {
    mgt__mpi_world *w = me->w;
    int pq = mgt__pcomm_process_of(w, q), rank = me->comm.rank;
    char text[512];
    req[*nreq] = is_send ? mgt__pcomm_isend(w, buf, bytes, pq, mgt__pcomm_tag(w, rank, q), MGT_MPI_COLLECTIVE, text, sizeof text)
                         : w->api->irecv(buf, bytes, pq, mgt__pcomm_tag(w, q, rank), MGT_MPI_COLLECTIVE, text, sizeof text);
    peer[*nreq] = q;
    if (!req[(*nreq)++]) {
        mgt__fail(MGT_ERROR_COMM, "rank %d: %s: %s: %s", rank, what, is_send ? "MPI_Isend" : "MPI_Irecv", text);
        return -1;
    }
    return 0;
}

/* the runs of a group's members by process, in group order: run k is members first[k] to
   first[k + 1] - 1 (first has size + 1 entries); the number of runs, or 0 when a process's members
   are not contiguous (a group out of rank order) */
static int mgt__pcomm_runs(const mgt__mpi_world *w, const mgt_group *g, int *first) {
    int j, k, runs = 0;
    for (j = 0; j < g->size; j++) {
        int p = mgt__pcomm_process_of(w, g->ranks[j]);
        if (j && p == mgt__pcomm_process_of(w, g->ranks[j - 1])) continue;
        for (k = 0; k < runs; k++)
            if (mgt__pcomm_process_of(w, g->ranks[first[k]]) == p) return 0;
        first[runs++] = j;
    }
    first[runs] = g->size;
    return runs;
}

/* acc (fp32; fp64 for f64) = acc if `have`, else src[0], plus the sources in order: the local
   communicator's arithmetic (mgt__lcomm_sum), cut where a process boundary passes the running sum */
static void mgt__pcomm_add(void *acc, int have, const void *const *src, int nsrc, size_t count, int dtype) {
    int j = 0;
    size_t e;
    if (dtype == MGT_F64) {
        double *a = (double *)acc;
        if (!have) memcpy(a, src[j++], count * 8);
        for (; j < nsrc; j++)
            for (e = 0; e < count; e++) a[e] += ((const double *)src[j])[e];
        return;
    }
    if (!have) mgt__lcomm_load((float *)acc, src[j++], count, dtype);
    for (; j < nsrc; j++) mgt__lcomm_add((float *)acc, src[j], count, dtype);
}

/* all-reduce or reduce-scatter of a group that spans processes, hierarchically and in the
   communicator's order (member 0 + member 1 + ... in fp32, fp64 for f64, rounded once): the first
   member of each process's run (its leader) takes its process's members' inputs, adds them in group
   order to the running sum that the previous process's leader passes it (fp32/fp64, unrounded), and
   passes the sum on; the last leader rounds it and sends each other leader its members' result,
   which the leader hands to them. The bits are one process's; between processes each boundary
   carries one running sum and each process its result, where member to member every member sent
   every member of another process its whole buffer. The leaders' chain is sequential: P processes
   add P - 1 hops of latency, a price worth the traffic at the few processes (nodes) a run spans. */
static mgt_result mgt__pcomm_chain(mgt__pcomm_rank *me, int coll, const mgt_group *g, const void *src, void *dst, size_t count, int dtype,
                                   const int *first, int runs, const char *what) {
    mgt__mpi_world *w = me->w;
    int n = g->size, idx = g->index, run = 0, leader, end, j, nreq = 0, rs = coll == MGT_COLL_REDUCE_SCATTER;
    size_t elt = mgt__lcomm_elt(dtype), wide = dtype == MGT_F64 ? 8 : 4, total = rs ? count * (size_t)n : count, block = count * elt;
    const void *in = rs ? src : (const void *)dst; /* this member's contribution: `total` elements */
    void **req = (void **)MGT_MALLOC(sizeof(void *) * (size_t)(n + runs));
    int *peer = (int *)MGT_MALLOC(sizeof(int) * (size_t)(n + runs));
    const void **from = (const void **)MGT_MALLOC(sizeof(void *) * (size_t)n);
    char *stage = NULL, *acc = NULL, *result = NULL, who[32];
    mgt_result r = MGT_OK;
    snprintf(who, sizeof who, "rank %d", me->comm.rank);
    while (first[run + 1] <= idx) run++;
    leader = first[run];
    end = first[run + 1];
    if (!req || !peer || !from) { r = mgt__fail(MGT_ERROR_MEMORY, "rank %d: out of memory for %s", me->comm.rank, what); goto done; }
    if (idx != leader) { /* its input to its leader, then its result back (one after the other: in place, they overlap) */
        if (mgt__pcomm_post(me, 1, (void *)in, total * elt, g->ranks[leader], req, peer, &nreq, what)) goto failed;
        if ((r = mgt__pcomm_wait(w, who, req, peer, nreq, what)) != MGT_OK) goto done;
        nreq = 0;
        if (mgt__pcomm_post(me, 0, dst, block, g->ranks[leader], req, peer, &nreq, what)) goto failed;
        r = mgt__pcomm_wait(w, who, req, peer, nreq, what);
        goto done;
    }
    stage = (char *)MGT_MALLOC(total * elt * (size_t)(end - leader) + 1);
    acc = (char *)MGT_MALLOC(total * wide + 1);
    result = (char *)MGT_MALLOC(total * elt + 1);
    if (!stage || !acc || !result) { r = mgt__fail(MGT_ERROR_MEMORY, "rank %d: out of memory for %s", me->comm.rank, what); goto done; }
    for (j = leader + 1; j < end; j++) /* this process's members, and the running sum of the processes before */
        if (mgt__pcomm_post(me, 0, stage + (size_t)(j - leader) * total * elt, total * elt, g->ranks[j], req, peer, &nreq, what)) goto failed;
    if (run > 0 && mgt__pcomm_post(me, 0, acc, total * wide, g->ranks[first[run - 1]], req, peer, &nreq, what)) goto failed;
    if ((r = mgt__pcomm_wait(w, who, req, peer, nreq, what)) != MGT_OK) goto done;
    nreq = 0;
    for (j = leader; j < end; j++) from[j - leader] = j == idx ? in : stage + (size_t)(j - leader) * total * elt;
    if (total) mgt__pcomm_add(acc, run > 0, from, end - leader, total, dtype);
    if (run < runs - 1) { /* on to the next process; the result comes from the last */
        if (mgt__pcomm_post(me, 1, acc, total * wide, g->ranks[first[run + 1]], req, peer, &nreq, what) ||
            mgt__pcomm_post(me, 0, result + (rs ? (size_t)leader * block : 0), rs ? (size_t)(end - leader) * block : block, g->ranks[first[runs - 1]], req,
                            peer, &nreq, what))
            goto failed;
        if ((r = mgt__pcomm_wait(w, who, req, peer, nreq, what)) != MGT_OK) goto done;
        nreq = 0;
    } else {
        if (dtype == MGT_F64) memcpy(result, acc, total * 8);
        else if (total) mgt__lcomm_store(result, (const float *)acc, total, dtype);
        for (j = 0; j < runs - 1; j++) /* each other leader its members' blocks */
            if (mgt__pcomm_post(me, 1, result + (rs ? (size_t)first[j] * block : 0), rs ? (size_t)(first[j + 1] - first[j]) * block : block,
                                g->ranks[first[j]], req, peer, &nreq, what))
                goto failed;
    }
    for (j = leader + 1; j < end; j++)
        if (mgt__pcomm_post(me, 1, result + (rs ? (size_t)j * block : 0), block, g->ranks[j], req, peer, &nreq, what)) goto failed;
    if (block) memcpy(dst, result + (rs ? (size_t)idx * block : 0), block);
    r = mgt__pcomm_wait(w, who, req, peer, nreq, what);
    goto done;
failed: /* a post failed: what was posted cannot complete */
    for (j = 0; j < nreq; j++) if (req[j]) w->api->cancel(req[j]);
    r = mgt__pcomm_fail(w, mgt_last_error());
done:
    MGT_FREE(req);
    MGT_FREE(peer);
    MGT_FREE((void *)from);
    MGT_FREE(stage);
    MGT_FREE(acc);
    MGT_FREE(result);
    return r;
}

static mgt_result mgt__pcomm_collective(mgt_comm *c, int coll, const mgt_group *g, const void *src, void *dst, size_t count, int dtype, int root) {
    mgt__pcomm_rank *me = (mgt__pcomm_rank *)c->impl;
    mgt__mpi_world *w = me->w;
    double t0 = mgt_now(), bytes;
    size_t elt = mgt__lcomm_elt(dtype), block = count * elt;
    int n, idx, j, nreq = 0, *peer = NULL;
    void **req = NULL;
    const void **from = NULL;
    char *stage = NULL, what[600];
    mgt__lcomm_call call;
    mgt_result r;
    if (!g || !g->ranks || g->size < 1 || g->index < 0 || g->index >= g->size || g->ranks[g->index] != c->rank)
        return mgt__fail(MGT_ERROR_ARGUMENT, "rank %d: %s: not a member of the group it names", c->rank, mgt_coll_name(coll));
    if (mgt__pcomm_in_process(w, g)) {
        mgt_comm *in = me->inner;
        r = coll == MGT_COLL_ALL_REDUCE       ? in->all_reduce(in, g, dst, count, dtype)
            : coll == MGT_COLL_REDUCE_SCATTER ? in->reduce_scatter(in, g, src, dst, count, dtype)
            : coll == MGT_COLL_ALL_GATHER     ? in->all_gather(in, g, src, dst, count, dtype)
            : coll == MGT_COLL_BROADCAST      ? in->broadcast(in, g, dst, count, dtype, root)
                                              : in->barrier(in, g);
        c->stats = in->stats;
        return r;
    }
    n = g->size;
    idx = g->index;
    if (dtype < MGT_F32 || dtype > MGT_F64 || (coll != MGT_COLL_BARRIER && count && (!src || !dst)) ||
        (coll == MGT_COLL_BROADCAST && (root < 0 || root >= n)))
        return mgt__pcomm_count(me, coll, t0, mgt__fail(MGT_ERROR_ARGUMENT, "rank %d: %s: invalid dtype, buffers or root", c->rank, mgt_coll_name(coll)), 0);
    if (mgt__pcomm_failed(w)) return mgt__pcomm_count(me, coll, t0, mgt__pcomm_world_error(w), 0);
    memset(&call, 0, sizeof call);
    call.coll = coll;
    call.group = g->id;
    call.size = n;
    call.count = count;
    call.dtype = dtype;
    call.root = root;
    for (j = 0; j < n && j < MGT__LCOMM_SHOWN; j++) call.shown[j] = g->ranks[j];
    mgt__lcomm_call_text(&call, what, sizeof what);
    if (coll == MGT_COLL_ALL_REDUCE || coll == MGT_COLL_REDUCE_SCATTER) { /* hierarchically, where each process's members are contiguous */
        int *first = (int *)MGT_MALLOC(sizeof(int) * (size_t)(n + 1)), runs = first ? mgt__pcomm_runs(w, g, first) : 0;
        if (runs) {
            r = mgt__pcomm_chain(me, coll, g, src, dst, count, dtype, first, runs, what);
            MGT_FREE(first);
            goto done;
        }
        MGT_FREE(first);
    }
    req = (void **)MGT_MALLOC(sizeof(void *) * 2 * (size_t)n);
    peer = (int *)MGT_MALLOC(sizeof(int) * 2 * (size_t)n);
    from = (const void **)MGT_MALLOC(sizeof(void *) * (size_t)n);
    if ((coll == MGT_COLL_ALL_REDUCE || coll == MGT_COLL_REDUCE_SCATTER) && block) stage = (char *)MGT_MALLOC(block * (size_t)n);
    if (!req || !peer || !from || ((coll == MGT_COLL_ALL_REDUCE || coll == MGT_COLL_REDUCE_SCATTER) && block && !stage)) {
        r = mgt__fail(MGT_ERROR_MEMORY, "rank %d: out of memory for %s", c->rank, what);
        goto done;
    }
    r = MGT_OK;
    for (j = 0; j < n && r == MGT_OK; j++) {
        int q = g->ranks[j], pq = mgt__pcomm_process_of(w, q);
        const void *out = NULL;
        void *in = NULL;
        size_t out_bytes = block, in_bytes = block;
        char text[512];
        if (j == idx) continue;
        if (coll == MGT_COLL_ALL_REDUCE) { out = dst; in = stage + (size_t)j * block; }
        else if (coll == MGT_COLL_REDUCE_SCATTER) { out = (const char *)src + (size_t)j * block; in = stage + (size_t)j * block; }
        else if (coll == MGT_COLL_ALL_GATHER) { out = src; in = (char *)dst + (size_t)j * block; }
        else if (coll == MGT_COLL_BROADCAST) {
            if (idx == root) { out = dst; in_bytes = 0; }
            else if (j == root) { in = dst; out_bytes = 0; }
            else continue;
        } else { out_bytes = in_bytes = 0; }
        if (coll != MGT_COLL_BROADCAST || idx == root) {
            peer[nreq] = q;
            req[nreq] = mgt__pcomm_isend(w, out ? out : (const void *)&idx, out_bytes, pq, mgt__pcomm_tag(w, c->rank, q), MGT_MPI_COLLECTIVE, text, sizeof text);
            if (!req[nreq++]) r = mgt__fail(MGT_ERROR_COMM, "rank %d: %s: MPI_Isend: %s", c->rank, what, text);
        }
        if (r == MGT_OK && (coll != MGT_COLL_BROADCAST || j == root)) {
            int sink;
            peer[nreq] = q;
            req[nreq] = w->api->irecv(in ? in : (void *)&sink, in_bytes, pq, mgt__pcomm_tag(w, q, c->rank), MGT_MPI_COLLECTIVE, text, sizeof text);
            if (!req[nreq++]) r = mgt__fail(MGT_ERROR_COMM, "rank %d: %s: MPI_Irecv: %s", c->rank, what, text);
        }
    }
    if (r != MGT_OK) { /* the posted ones cannot complete any more */
        for (j = 0; j < nreq; j++) if (req[j]) w->api->cancel(req[j]);
        r = mgt__pcomm_fail(w, mgt_last_error());
        goto done;
    }
    {
        char who[32];
        snprintf(who, sizeof who, "rank %d", c->rank);
        r = mgt__pcomm_wait(w, who, req, peer, nreq, what);
    }
    if (r != MGT_OK) goto done;
    if (coll == MGT_COLL_ALL_REDUCE || coll == MGT_COLL_REDUCE_SCATTER) {
        const void *own = coll == MGT_COLL_ALL_REDUCE ? (const void *)dst : (const void *)((const char *)src + (size_t)idx * block);
        for (j = 0; j < n; j++) from[j] = j == idx ? own : stage + (size_t)j * block;
        if (count) mgt__lcomm_sum(from, n, 0, &dst, 1, 0, count, dtype);
    } else if (coll == MGT_COLL_ALL_GATHER && block && (char *)dst + (size_t)idx * block != (const char *)src)
        memmove((char *)dst + (size_t)idx * block, src, block);
done:
    MGT_FREE(req);
    MGT_FREE(peer);
    MGT_FREE((void *)from);
    MGT_FREE(stage);
    bytes = (double)block * (coll == MGT_COLL_REDUCE_SCATTER || coll == MGT_COLL_ALL_GATHER ? n : 1);
    return mgt__pcomm_count(me, coll, t0, r, coll == MGT_COLL_BARRIER ? 0 : bytes);
}

static mgt_result mgt__pcomm_all_reduce(mgt_comm *c, const mgt_group *g, void *buf, size_t count, int dtype) {
    return mgt__pcomm_collective(c, MGT_COLL_ALL_REDUCE, g, buf, buf, count, dtype, 0);
}
static mgt_result mgt__pcomm_reduce_scatter(mgt_comm *c, const mgt_group *g, const void *send, void *recv, size_t recv_count, int dtype) {
    return mgt__pcomm_collective(c, MGT_COLL_REDUCE_SCATTER, g, send, recv, recv_count, dtype, 0);
}
static mgt_result mgt__pcomm_all_gather(mgt_comm *c, const mgt_group *g, const void *send, void *recv, size_t send_count, int dtype) {
    return mgt__pcomm_collective(c, MGT_COLL_ALL_GATHER, g, send, recv, send_count, dtype, 0);
}
static mgt_result mgt__pcomm_broadcast(mgt_comm *c, const mgt_group *g, void *buf, size_t count, int dtype, int root_index) {
    return mgt__pcomm_collective(c, MGT_COLL_BROADCAST, g, buf, buf, count, dtype, root_index);
}
static mgt_result mgt__pcomm_barrier(mgt_comm *c, const mgt_group *g) {
    return mgt__pcomm_collective(c, MGT_COLL_BARRIER, g, NULL, NULL, 0, MGT_F32, 0);
}

/* what a send and a receive do first: a peer in this process (or none) is the in-process
   communicator's, which checks it; a failed world (after the send's finished sends are freed) or a
   missing buffer fails the call. 1 when the call is over (its result in *r), 0 when it goes to MPI */
static int mgt__pcomm_p2p_begin(mgt_comm *c, int is_recv, int peer, const void *buf, size_t count, int dtype, double t0, mgt_result *r) {
    mgt__pcomm_rank *me = (mgt__pcomm_rank *)c->impl;
    mgt__mpi_world *w = me->w;
    if (peer < 0 || peer >= w->world || mgt__pcomm_process_of(w, peer) == w->process) {
        *r = is_recv ? me->inner->recv(me->inner, peer, (void *)buf, count, dtype) : me->inner->send(me->inner, peer, buf, count, dtype);
        c->stats = me->inner->stats;
        return 1;
    }
    if (!is_recv && (*r = mgt__pcomm_reap(me)) != MGT_OK) *r = mgt__pcomm_count(me, MGT_COLL_SEND_RECV, t0, *r, 0);
    else if (mgt__pcomm_failed(w)) *r = mgt__pcomm_count(me, MGT_COLL_SEND_RECV, t0, mgt__pcomm_world_error(w), 0);
    else if (count && !buf)
        *r = mgt__pcomm_count(me, MGT_COLL_SEND_RECV, t0, mgt__fail(MGT_ERROR_ARGUMENT, "rank %d: %s: no buffer", c->rank, is_recv ? "recv" : "send"), 0);
    else return 0;
    return 1;
}

static mgt_result mgt__pcomm_send(mgt_comm *c, int peer, const void *buf, size_t count, int dtype) {
    mgt__pcomm_rank *me = (mgt__pcomm_rank *)c->impl;
    mgt__mpi_world *w = me->w;
    size_t bytes = count * mgt__lcomm_elt(dtype);
    double t0 = mgt_now();
    mgt__pcomm_msg *s;
    mgt_result r;
    char text[512], why[1024];
    if (mgt__pcomm_p2p_begin(c, 0, peer, buf, count, dtype, t0, &r)) return r;
    s = (mgt__pcomm_msg *)MGT_MALLOC(sizeof *s + bytes);
    if (!s) return mgt__pcomm_count(me, MGT_COLL_SEND_RECV, t0, mgt__fail(MGT_ERROR_MEMORY, "rank %d: out of memory for a send of %zu bytes", c->rank, bytes), 0);
    if (bytes) memcpy(s + 1, buf, bytes);
    s->request = mgt__pcomm_isend(w, s + 1, bytes, mgt__pcomm_process_of(w, peer), mgt__pcomm_tag(w, c->rank, peer), MGT_MPI_P2P, text, sizeof text);
    if (!s->request) {
        MGT_FREE(s);
        snprintf(why, sizeof why, "rank %d: send to rank %d: MPI_Isend: %s", c->rank, peer, text);
        return mgt__pcomm_count(me, MGT_COLL_SEND_RECV, t0, mgt__pcomm_fail(w, why), 0);
    }
    s->next = me->sends;
    me->sends = s;
    return mgt__pcomm_count(me, MGT_COLL_SEND_RECV, t0, MGT_OK, (double)bytes);
}

static mgt_result mgt__pcomm_recv(mgt_comm *c, int peer, void *buf, size_t count, int dtype) {
    mgt__pcomm_rank *me = (mgt__pcomm_rank *)c->impl;
    mgt__mpi_world *w = me->w;
    size_t bytes = count * mgt__lcomm_elt(dtype);
    double t0 = mgt_now();
    void *req;
    mgt_result r;
    char text[512], what[128];
    if (mgt__pcomm_p2p_begin(c, 1, peer, buf, count, dtype, t0, &r)) return r;
    req = w->api->irecv(buf, bytes, mgt__pcomm_process_of(w, peer), mgt__pcomm_tag(w, peer, c->rank), MGT_MPI_P2P, text, sizeof text);
    if (!req) {
        char why[1024];
        snprintf(why, sizeof why, "rank %d: recv from rank %d: MPI_Irecv: %s", c->rank, peer, text);
        return mgt__pcomm_count(me, MGT_COLL_SEND_RECV, t0, mgt__pcomm_fail(w, why), 0);
    }
    snprintf(what, sizeof what, "recv(from %d, %zu %s)", peer, count, mgt__lcomm_dtype_name(dtype));
    {
        char who[32];
        snprintf(who, sizeof who, "rank %d", c->rank);
        r = mgt__pcomm_wait(w, who, &req, &peer, 1, what);
    }
    return mgt__pcomm_count(me, MGT_COLL_SEND_RECV, t0, r, r == MGT_OK ? (double)bytes : 0);
}

/* the send is buffered, so the pair is the send, then the receive */
static mgt_result mgt__pcomm_sendrecv(mgt_comm *c, int send_peer, const void *send, int recv_peer, void *recv, size_t count, int dtype) {
    mgt_result r = mgt__pcomm_send(c, send_peer, send, count, dtype);
    return r == MGT_OK ? mgt__pcomm_recv(c, recv_peer, recv, count, dtype) : r;
}

/* this rank failed: this process's other ranks stop waiting (the in-process world fails them),
   and so do its MPI waits */
static void mgt__pcomm_rank_done(mgt_comm *c) {
    mgt__pcomm_rank *me;
    char why[1024];
    if (!c || !c->impl) return;
    me = (mgt__pcomm_rank *)c->impl;
    mgt__local_rank_done(me->inner);
    snprintf(why, sizeof why, "rank %d (process %d on %s) failed", c->rank, me->w->process, me->w->hosts[me->w->process]);
    mgt__pcomm_fail(me->w, why);
}

static void mgt__mpi_world_destroy(mgt__mpi_world *w) {
    int i;
    if (!w) return;
    for (i = 0; w->ranks && i < w->per; i++) {
        mgt__pcomm_rank *me = &w->ranks[i];
        double until = mgt_now() + 1;
        while (me->sends && mgt_now() < until && mgt__pcomm_reap(me) == MGT_OK) {}
        while (me->sends) { /* never received: the run failed */
            mgt__pcomm_msg *s = me->sends;
            me->sends = s->next;
            w->api->cancel(s->request);
            MGT_FREE(s);
        }
    }
    mgt__local_world_destroy(w->local);
    pthread_mutex_destroy(&w->mu);
    MGT_FREE(w->ranks);
    MGT_FREE(w->hosts);
    MGT_FREE(w);
}

/* `world` ranks over `processes` processes of `api` (started), this one `process`: a contiguous
   block each */
static mgt_result mgt__mpi_world_create(mgt__mpi_world **out, const mgt_mpi_api *api, int process, int processes, int world, double timeout_s) {
    mgt__mpi_world *w;
    mgt_result r;
    char why[512], host[64];
    int i;
    *out = NULL;
    if (processes < 1 || world % processes)
        return mgt__fail(MGT_ERROR_CONFIG, "%d ranks cannot be shared evenly by %d processes: run a multiple of the processes (dp x tp x pp)", world, processes);
    if ((double)world * world - 1 > (double)api->max_tag())
        return mgt__fail(MGT_ERROR_CONFIG, "%d ranks need MPI tags up to %.0f, this MPI's MPI_TAG_UB is %d", world, (double)world * world - 1, api->max_tag());
    w = (mgt__mpi_world *)MGT_MALLOC(sizeof *w);
    if (!w) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    w->api = api;
    w->process = process;
    w->processes = processes;
    w->world = world;
    w->per = world / processes;
    w->timeout_s = timeout_s;
    w->ranks = (mgt__pcomm_rank *)MGT_MALLOC(sizeof(mgt__pcomm_rank) * (size_t)w->per);
    w->hosts = (char(*)[64])MGT_MALLOC(64 * (size_t)processes);
    if (!w->ranks || !w->hosts) { mgt__mpi_world_destroy(w); return mgt__fail(MGT_ERROR_MEMORY, "out of memory"); }
    memset(w->ranks, 0, sizeof(mgt__pcomm_rank) * (size_t)w->per);
    if ((r = mgt__local_world_create(&w->local, world)) != MGT_OK) { mgt__mpi_world_destroy(w); return r; }
    memset(host, 0, sizeof host);
    mgt__strlcpy(host, mgt__mpi_host, sizeof host);
    if (api->allgather(host, w->hosts, sizeof host, why, sizeof why)) {
        mgt__mpi_world_destroy(w);
        return mgt__fail(MGT_ERROR_COMM, "exchanging host names between processes: MPI: %s", why);
    }
    for (i = 0; i < w->per; i++) {
        mgt__pcomm_rank *me = &w->ranks[i];
        me->w = w;
        me->inner = mgt__local_comm(w->local, process * w->per + i);
        me->comm.rank = process * w->per + i;
        me->comm.world = world;
        me->comm.all_reduce = mgt__pcomm_all_reduce;
        me->comm.reduce_scatter = mgt__pcomm_reduce_scatter;
        me->comm.all_gather = mgt__pcomm_all_gather;
        me->comm.broadcast = mgt__pcomm_broadcast;
        me->comm.send = mgt__pcomm_send;
        me->comm.recv = mgt__pcomm_recv;
        me->comm.sendrecv = mgt__pcomm_sendrecv;
        me->comm.barrier = mgt__pcomm_barrier;
        me->comm.impl = me;
    }
    *out = w;
    return MGT_OK;
}

/* this process's rank `rank` (global), or NULL */
static mgt_comm *mgt__mpi_comm(mgt__mpi_world *w, int rank) {
    return w && mgt__pcomm_process_of(w, rank) == w->process && rank >= 0 && rank < w->world ? &w->ranks[rank - w->process * w->per].comm : NULL;
}

/* after a step every process takes alike (reading a checkpoint, claiming the folder): every process
   fails when one did, naming it, so that none trains on waiting for a peer that left. One process
   (w NULL) agrees with itself. */
typedef struct mgt__mpi_outcome { int result; char error[500]; } mgt__mpi_outcome;
static mgt_result mgt__mpi_agree(mgt__mpi_world *w, mgt_result res, const char *doing) {
    mgt__mpi_outcome mine, *all;
    char why[512];
    int p;
    if (!w) return res;
    memset(&mine, 0, sizeof mine);
    mine.result = res;
    if (res != MGT_OK) mgt__strlcpy(mine.error, mgt_last_error(), sizeof mine.error);
    all = (mgt__mpi_outcome *)MGT_MALLOC(sizeof mine * (size_t)w->processes);
    if (!all) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    if (w->api->allgather(&mine, all, sizeof mine, why, sizeof why)) res = mgt__fail(MGT_ERROR_COMM, "%s: MPI: %s", doing, why);
    else
        for (p = 0; p < w->processes && res == MGT_OK; p++)
            if (all[p].result != MGT_OK) res = mgt__fail((mgt_result)all[p].result, "process %d (on %s), %s: %s", p, w->hosts[p], doing, all[p].error);
    MGT_FREE(all);
    return res;
}

/* ---- the world of CPU ranks over MPI processes (the table of src/world.c): the run's processes
   are the world, made before it (they decide which ranks are this process's) */
static mgt_result mgt__world_mpi_create(const mgt__world_args *a, void **world) {
    *world = a->procs;
    return MGT_OK;
}
static mgt_result mgt__world_mpi_comm(void *world, int rank, mgt_backend *be, const mgt_group *const *groups, int ngroups, mgt_comm **out) {
    (void)be, (void)groups, (void)ngroups;
    *out = mgt__mpi_comm((mgt__mpi_world *)world, rank);
    return MGT_OK;
}
static void mgt__world_mpi_rank_failed(void *world, mgt_comm *c) {
    (void)world;
    mgt__pcomm_rank_done(c);
}
static const mgt__world_api mgt__world_mpi = {
    "cpu", 0, 1, mgt__world_mpi_create, mgt__world_cpu_backend, mgt__world_cpu_backend_destroy, mgt__world_mpi_comm,
    NULL, NULL, mgt__world_mpi_rank_failed, NULL, NULL,
};

#else /* MGT_NO_MPI: one process; a launcher of several is refused, and what takes a process's role elsewhere is never reached */

static const mgt_mpi_api *mgt__mpi_api;
MGTDEF const mgt_mpi_api *mgt_mpi_load(char *why, size_t cap) {
    if (why && cap) mgt__strlcpy(why, "this program was built with MGT_NO_MPI (no MPI)", cap);
    return NULL;
}
MGTDEF void mgt_mpi_use(const mgt_mpi_api *api) { (void)api; }
MGTDEF mgt_result mgt_mpi_start(int *process, int *processes) {
    char launcher[64];
    int expected = mgt_mpi_launcher(launcher, sizeof launcher);
    if (!process || !processes) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_mpi_start: process and processes are required");
    *process = 0;
    *processes = 1;
    if (expected <= 1) return MGT_OK;
    return mgt__fail(MGT_ERROR_UNSUPPORTED, "started by an MPI launcher (%s=%d), but this program was built with MGT_NO_MPI: run it as one process, "
                                            "or build it without MGT_NO_MPI", launcher, expected);
}
MGTDEF void mgt_mpi_abort(int code) { (void)code; }
static mgt_result mgt__mpi_world_create(mgt__mpi_world **out, const mgt_mpi_api *api, int process, int processes, int world, double timeout_s) {
    (void)api, (void)process, (void)processes, (void)world, (void)timeout_s;
    *out = NULL;
    return mgt__fail(MGT_ERROR_UNSUPPORTED, "this program was built with MGT_NO_MPI");
}
static void mgt__mpi_world_destroy(mgt__mpi_world *w) { (void)w; }
static mgt_result mgt__mpi_agree(mgt__mpi_world *w, mgt_result res, const char *doing) {
    (void)w, (void)doing;
    return res;
}
static mgt_result mgt__pcomm_fail(mgt__mpi_world *w, const char *why) {
    (void)w;
    return mgt__fail(MGT_ERROR_COMM, "%s", why);
}
static mgt_result mgt__pcomm_wait(mgt__mpi_world *w, const char *who, void **req, const int *peer, int n, const char *what) {
    (void)w, (void)req, (void)peer, (void)n;
    return mgt__fail(MGT_ERROR_COMM, "%s: %s: built with MGT_NO_MPI", who, what);
}
static const mgt__world_api mgt__world_mpi = {"cpu", 0, 1, NULL, mgt__world_cpu_backend, mgt__world_cpu_backend_destroy, NULL, NULL, NULL, NULL, NULL, NULL};

#endif /* MGT_NO_MPI */
/* ==== end src/comm_mpi.c ==== */
/* ==== begin src/run.c ==== */
#line 1 "src/run.c"
/* src/run.c - the run's state (mgt_run), the learning-rate schedule, folders made, and what a run
   says of itself (mgt_run_config, _plan, _dir, _process) */
/* ---- runs: the ranks of a layout, driven from the caller's thread ---------------------------- */

enum { MGT__CMD_NONE, MGT__CMD_CONNECT, MGT__CMD_WARM_UP, MGT__CMD_STEP, MGT__CMD_FORWARD, MGT__CMD_QUIT };
#define MGT__HISTORY 65536 /* steps of statistics kept for readers */

typedef struct mgt__rank mgt__rank;
struct mgt_run {
    mgt_plan plan;
    mgt__rank *ranks;
    const mgt__world_api *world_api; /* where the ranks live and how they reach each other (src/world.c) */
    void *world;                     /* and that world's state */
    mgt__mpi_world *procs;           /* the processes under an MPI launcher (src/comm_mpi.c), NULL for one */
    int process, processes;          /* this one, and how many (1 without MPI) */
    int rank_lo, rank_hi;            /* this process's ranks: all of them but under MPI */
    mgt_backend *shadow_be;          /* (world) under MPI: what the other processes' ranks report */
    mgt_comm *shadow_comm;           /* (world) and their communication statistics */
    int stop_asked, stop_agreed;     /* mgt_run_request_stop here; under MPI, asked by any process */
    int warmed_up;                   /* the untimed warm-up step has run (GPU ranks) */
    double gpu_read_s;               /* when the GPUs were last read */
    int inference, threads_per_rank;
    mgt__loader train, val;
    int has_train, has_val;
    int step;                        /* optimizer steps done (skipped ones included) */
    int dtype;                       /* storage type: MGT_F32, MGT_BF16 or MGT_F16 */
    double loss_scale;               /* the loss is multiplied by it before backward: 1 but in fp16 */
    int skipped, skipped_in_row;     /* steps whose update was skipped: in all, and the latest run of them */
    int good_steps;                  /* fp16: finite steps since the scale last changed */
    int last_skipped;
    int saved_step;                  /* step of the newest checkpoint written or loaded, -1 none */
    char saved_path[1200];           /* and its file */
    char run_id[17];                 /* 16 hex digits, stored in its checkpoints; a resumed run keeps the
                                        checkpoint's, so pruning and the folder check know their own */
    int resumed;                     /* continues a checkpoint (mgt_run_resume) */
    int resumed_elsewhere;           /* from a checkpoint in another folder than dir */
    int claimed, lock_fd;            /* holds its checkpoint folder (mgt_run_claim): the flock'd mgt.lock */
    double peak_per_rank;            /* mgt_run_set_peak's GFLOP/s, used when the preset states none */
    char peak_source[64];
    double peak_seen;                /* a step's GFLOP/s per rank that beat the peak above (0: none did): MFU's peak from then on */
    char peak_seen_source[64];
    double loss, lr, grad_norm, step_s, val_loss, elapsed_s;
    int has_val_loss, val_step;
    long long tokens_seen;
    char dir[MGT_STR_MAX + 32], metrics_path[MGT_STR_MAX + 64];
    FILE *metrics;
    FILE *tensorboard;               /* the event file of [log] tensorboard, or NULL */
    /* statistics published for readers on other threads, behind stats_mu */
    pthread_mutex_t stats_mu;
    mgt_stats *history;           /* a ring of the last MGT__HISTORY steps */
    int history_n;                /* steps published */
    mgt_rank_stats *rank_stats;
    mgt_event *events;
    int events_n, events_cap;
    int state;
    double created_s;
    /* the command the rank threads run, and its arguments */
    pthread_mutex_t mu;
    pthread_cond_t cv_cmd, cv_done;
    int cmd, pending, started;
    unsigned long generation;
    const uint32_t *cmd_rows;
    int cmd_micro;
};

/* ---- schedule and checkpoint files ------------------------------------------------------------ */

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

MGTDEF mgt_result mgt_mkdirs(const char *path) {
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

/* ---- what a run says of itself ---- */
MGTDEF const mgt_config *mgt_run_config(const mgt_run *r) { return r ? &r->plan.cfg : NULL; }
MGTDEF const char *mgt_run_device(const mgt_run *r) { return r ? r->world_api->device : "cpu"; }
MGTDEF const mgt_plan *mgt_run_plan(const mgt_run *r) { return &r->plan; }
MGTDEF void mgt_run_request_stop(mgt_run *r) { if (r) r->stop_asked = 1; }
MGTDEF int mgt_run_stop_agreed(const mgt_run *r) { return r && (r->processes > 1 ? r->stop_agreed : r->stop_asked); }
MGTDEF int mgt_run_process(const mgt_run *r, int *processes) {
    if (processes) *processes = r ? r->processes : 1;
    return r ? r->process : 0;
}
MGTDEF const char *mgt_run_dir(const mgt_run *r) { return r ? r->dir : NULL; }
/* ==== end src/run.c ==== */
/* ==== begin src/rank.c ==== */
#line 1 "src/rank.c"
/* src/rank.c - a rank: collectives over its groups, block, embedding and head forward and backward,
   a stage's blocks forward and backward */
/* ---- ranks ----------------------------------------------------------------------------------- */

/* one action of a stage's step under interleaved 1F1B or zero-bubble (src/pipeline.c makes the lists) */
enum { MGT__PA_FORWARD, MGT__PA_BACKWARD, MGT__PA_SEND, MGT__PA_RECV, MGT__PA_WEIGHT /* zb: the deferred weight gradients (W) */ };
typedef struct mgt__pipe_action {
    int kind;        /* MGT__PA_* */
    int micro, chunk; /* the micro-batch, and which of the stage's chunks (0 .. V-1) */
    int grad;        /* send and recv: 0 a forward's output, 1 a backward's input gradient */
    int peer;        /* send and recv: the other stage */
    long long t;     /* when, in the unit-cost run; and how it sorts */
    int order, sender, seq;
} mgt__pipe_action;

/* One rank: its slice of the model, its optimizer shard, its communicator. A run has dp x cp x tp
   x pp of them; on CPU each is a thread with its share of the cores. */
struct mgt__rank {
    struct mgt_run *run;
    int rank, dpr, tpr, ppr, cpr, first, last, l0, nblocks;
    int replica;                  /* among the dp x cp ranks with the same parameters (dp_g): dpr x cp + cpr */
    int device;                   /* its GPU, or -1 on the CPU */
    mgt_gpu_reading gpu;          /* the GPU's last reading */
    mgt_backend *be;
    mgt_comm *comm;               /* the rank's communicator (the warm-up swaps in a quiet one) */
    mgt_group tp_g, dp_g, pp_g, emb_g, world_g; /* dp_g: the replicas (dp x cp ranks), over which gradients are summed and ZeRO shards */
    mgt_group cp_g;               /* the context-parallel ranks that share this rank's sequences (the ring of attention) */
    double ring_s;                /* of this step's send/receive seconds, the ring's (a communicator that times each call as it returns) */
    mgt_group kv_g;               /* the TP ranks that hold this rank's key/value heads (one rank unless they are replicated) */
    int *members;                 /* storage of the groups' rank lists */
    mgt__layout lay;
    mgt__shape shape;
    size_t shard;                 /* elements in this rank's shards: the sum of unit.size / replicas */
    void *params;                 /* the compute copy in the storage type: full (zero < 3) */
    float *grads;                 /* fp32 gradients, full (zero < 2) */
    void *pshard;                 /* the compute copy's shard (zero 3) */
    float *gshard;                /* the gradients' shard (zero >= 2) */
    float *m, *v;                 /* AdamW moments: full (zero 0) or the shard */
    float *master;                /* 16-bit storage: fp32 master weights, sharded as m and v; NULL in fp32 */
    void **unit_param;            /* where each unit's parameters (storage type) are now */
    float **unit_grad;            /* and its gradients */
    void *gather[2];              /* zero 3: gathered units */
    int gathered[2];              /* unit in each gather buffer, -1 none */
    long gather_ticket[2];        /* the deferred all-gather that filled it (a prefetch), or -1 */
    float *unit_gbuf[2];          /* zero >= 2: a block's gradients until they are reduce-scattered; two,
                                     so one block's reduce-scatter runs while the next computes */
    float *keep_gbuf[2];          /* zero >= 2: the embedding and head units' gradients, kept for the
                                     step because the tied embedding is reduced at its end */
    float *rs_tmp;                /* zero >= 2: reduce-scatter result before accumulation (slot 0, and the
                                     embedding and head units) */
    float *rs_tmp1;               /* and slot 1's */
    int gslot, gpending[2];       /* the slot the next block takes; the unit whose reduce-scatter each
                                     slot holds, not yet added to the shard (-1 none) */
    long gticket[2];              /* and that reduce-scatter's ticket (mgt_comm.defer) */
    size_t max_unit, max_block, keep_size[2];
    mgt__acts *acts;              /* activation sets: one per micro-batch in flight */
    int nsets;
    mgt__pipe_action *pipe[2]; /* pp_virtual > 1 or zb: the step's actions (mgt__pipeline_actions), [0] training, [1] forward only */
    int npipe[2];
    void *acts_block;
    size_t acts_bytes;
    mgt__grad_scratch gs;
    void *gs_block;
    size_t gs_bytes;
    int *bucket_of_unit;          /* DP all-reduce bucket of each unit (zero 0) */
    void *host_io;                /* host memory for one micro-batch's inputs and targets, then its losses */
    void *mirrored[5];            /* while mirrored (see mgt__mirror): params, pshard, master, m, v */
    int mirror_depth;             /* mirrors nest: the outermost makes and ends the copies */
    double loss_sum, norm;        /* norm: the global gradient norm of the last step, unscaled */
    int skipped;                  /* the last step's update was skipped (non-finite norm) */
    double step_s, comm_s, bubble_s;
    double total_compute_s, total_comm_s, total_bubble_s;
    mgt_comm_stats step_comm;     /* communication of the last step */
    mgt_result result;
    char error[1024];
    pthread_t thread;
    /* a backend with sum_squares_many (GPU): the step's statistics stay in its memory until one
       download, [0] the sum of squares, [1] the loss, then a double per rank of the world */
    double *dstat;
    const float **ss_x;           /* the vectors of this rank's sum of squares, and their lengths */
    size_t *ss_n;
};


/* tensor t's compute copy, in the storage type (typed float * for fp32 tools: index it only when
   shape.elt is 4), and its fp32 gradient */
/* rank `index` of plan p: its coordinates in the grid and its stage's blocks (a rank of this
   process, or another process's as its driver sees it) */
static void mgt__rank_locate(mgt__rank *rk, const mgt_plan *p, int index) {
    rk->rank = index;
    mgt_rank_coords(index, p->replicas, p->tp, &rk->replica, &rk->tpr, &rk->ppr);
    rk->dpr = rk->replica / p->cp;
    rk->cpr = rk->replica % p->cp;
    rk->first = rk->ppr == 0;
    rk->last = rk->ppr == p->pp - 1;
    rk->l0 = mgt__chunk_first(p, rk->ppr); /* its first chunk's first block (with pp_virtual > 1 more chunks follow, pp chunks apart) */
    rk->nblocks = mgt__stage_blocks(p, rk->ppr);
}

static float *mgt__P(mgt__rank *rk, int t) { /* NULL for an absent tensor (t < 0: a bias of a model without) */
    const mgt__tensor *x;
    if (t < 0) return NULL;
    x = &rk->lay.t[t];
    return (float *)(void *)((char *)rk->unit_param[x->unit] + (x->offset - rk->lay.u[x->unit].offset) * rk->shape.elt);
}
static float *mgt__G(mgt__rank *rk, int t) {
    const mgt__tensor *x;
    if (t < 0) return NULL;
    x = &rk->lay.t[t];
    return rk->unit_grad[x->unit] + (x->offset - rk->lay.u[x->unit].offset);
}

/* tensor indices in a rank's layout (-1: the model has no such tensor) */
static int mgt__t_head(const mgt__rank *rk) { return rk->first && rk->run->plan.pp == 1 && rk->run->plan.dims.tied ? 0 : rk->lay.n - 1; } /* the LM head's matrix */
static int mgt__t_wpe(const mgt__rank *rk) { return rk->lay.emb_tensors > 1 ? 1 : -1; }
static int mgt__t_block(const mgt__rank *rk, int b, int k) {
    return rk->lay.slot[k] < 0 ? -1 : (rk->first ? rk->lay.emb_tensors : 0) + b * rk->lay.per_block + rk->lay.slot[k];
}
static int mgt__t_lnf(const mgt__rank *rk) { return (rk->first ? rk->lay.emb_tensors : 0) + rk->nblocks * rk->lay.per_block; }
static int mgt__t_lnf_bias(const mgt__rank *rk) { return rk->run->plan.dims.rms ? -1 : mgt__t_lnf(rk) + 1; }
static int mgt__u_block(const mgt__rank *rk, int b) { return (rk->first ? 1 : 0) + b; }
static int mgt__u_head(const mgt__rank *rk) { return rk->lay.nu - 1; }
static int mgt__is_block_unit(const mgt__rank *rk, int u) { int b = u - (rk->first ? 1 : 0); return b >= 0 && b < rk->nblocks; }

/* collectives that skip groups of one, so a single rank makes no calls at all */
static mgt_result mgt__all_reduce(mgt__rank *rk, const mgt_group *g, float *buf, size_t n) {
    return g->size > 1 ? rk->comm->all_reduce(rk->comm, g, buf, n, MGT_F32) : MGT_OK;
}
/* activations and their gradients in the storage type: the communicator sums 16-bit in fp32 and
   rounds once, so a TP all-reduce rounds as an op's output does */
static mgt_result mgt__all_reduce_act(mgt__rank *rk, const mgt_group *g, void *buf, size_t n) {
    return g->size > 1 ? rk->comm->all_reduce(rk->comm, g, buf, n, rk->be->dtype) : MGT_OK;
}

/* sequence parallelism (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
   Transformer Models"; Megatron-LM's --sequence-parallel): between the tensor-parallel layers each
   TP rank holds its contiguous 1/tp of the rows (mgt__rows). A column-parallel GEMM reads every
   row: its input is all-gathered (R -> N rows). A row-parallel GEMM's partial products are summed
   and scattered (N -> R rows) where an all-reduce summed them. In the storage type: 16-bit sums in
   fp32, rounded once, as the all-reduce's. */
static mgt_result mgt__sp_gather(mgt__rank *rk, const void *mine, void *full) {
    return rk->comm->all_gather(rk->comm, &rk->tp_g, mine, full, (size_t)mgt__rows(&rk->shape) * (size_t)rk->shape.C, rk->be->dtype);
}
static mgt_result mgt__sp_scatter(mgt__rank *rk, const void *full, void *mine) {
    return rk->comm->reduce_scatter(rk->comm, &rk->tp_g, full, mine, (size_t)mgt__rows(&rk->shape) * (size_t)rk->shape.C, rk->be->dtype);
}
/* the TP sum of (N,C) partial products: all-reduced in place, or under sequence parallelism
   reduce-scattered into `mine`, the rank's R rows */
static mgt_result mgt__tp_sum(mgt__rank *rk, void *partial, void *mine) {
    const mgt__shape *s = &rk->shape;
    return s->sp ? mgt__sp_scatter(rk, partial, mine) : mgt__all_reduce_act(rk, &rk->tp_g, partial, (size_t)s->B * s->T * s->C);
}
/* what a GEMM over every row reads of the rank's rows `mine`: themselves, or gathered into `full` */
static mgt_result mgt__all_rows(mgt__rank *rk, const void *mine, void *full, const void **rows) {
    *rows = mine;
    if (!rk->shape.sp) return MGT_OK;
    *rows = full;
    return mgt__sp_gather(rk, mine, full);
}

/* a double summed over a group in member order: all-gathered as raw bytes, so it stays a double
   and every member adds the same numbers in the same order */
static mgt_result mgt__sum_over(mgt__rank *rk, const mgt_group *g, double *value) {
    double stack[64], *all = g->size <= 64 ? stack : (double *)MGT_MALLOC(sizeof(double) * (size_t)g->size), sum = 0;
    int i;
    mgt_result res;
    if (!all) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    res = rk->comm->all_gather(rk->comm, g, value, all, 2, MGT_F32); /* 2 x 4 bytes: one double each */
    for (i = 0; i < g->size && res == MGT_OK; i++) sum += all[i];
    if (all != stack) MGT_FREE(all);
    if (res == MGT_OK) *value = sum;
    return res;
}

/* communication that the compute next does not read, and the point where it must have arrived
   (see mgt_comm.defer) */
static long mgt__comm_defer(mgt__rank *rk) { return rk->comm->defer ? rk->comm->defer(rk->comm) : -1; }
static mgt_result mgt__comm_sync(mgt__rank *rk, long ticket) { return rk->comm->sync ? rk->comm->sync(rk->comm, ticket) : MGT_OK; }

/* ZeRO-3: brings a unit's parameters into a gather buffer (all-gather of the DP shards); a unit
   prefetched earlier is waited for here */
static mgt_result mgt__fetch(mgt__rank *rk, int u) {
    const mgt__unit *un = &rk->lay.u[u];
    size_t s = un->size / (size_t)rk->run->plan.replicas;
    int slot;
    if (rk->run->plan.zero < 3) return MGT_OK;
    for (slot = 0; slot < 2; slot++)
        if (rk->gathered[slot] == u) return mgt__comm_sync(rk, rk->gather_ticket[slot]);
    slot = rk->gathered[0] < 0 ? 0 : 1;
    if (rk->gathered[slot] >= 0) rk->unit_param[rk->gathered[slot]] = NULL;
    rk->gather_ticket[slot] = -1; /* waited for by the compute at once, unless a prefetch defers it */
    MGT__TRY(rk->comm->all_gather(rk->comm, &rk->dp_g, (char *)rk->pshard + un->shard_offset * rk->shape.elt, rk->gather[slot], s, rk->be->dtype));
    rk->gathered[slot] = u;
    rk->unit_param[u] = rk->gather[slot];
    return MGT_OK;
}
/* ZeRO-3: gathers the unit needed next while a slot is free, so that a backend with a second
   stream overlaps it with this unit's compute (on CPU ranks the order is what matters) */
static mgt_result mgt__prefetch(mgt__rank *rk, int u) {
    long ticket;
    if (rk->run->plan.zero < 3 || u < 0 || u >= rk->lay.nu || rk->unit_param[u]) return MGT_OK;
    if (rk->gathered[0] >= 0 && rk->gathered[1] >= 0) return MGT_OK;
    ticket = mgt__comm_defer(rk);
    MGT__TRY(mgt__fetch(rk, u));
    rk->gather_ticket[rk->gathered[0] == u ? 0 : 1] = ticket;
    return MGT_OK;
}
static void mgt__release(mgt__rank *rk, int u) {
    int slot;
    if (rk->run->plan.zero < 3) return;
    for (slot = 0; slot < 2; slot++)
        if (rk->gathered[slot] == u) { rk->gathered[slot] = -1; rk->unit_param[u] = NULL; }
}

/* ZeRO-2/3: a block's gradients are ready: reduce-scatter them and add this rank's slice to its
   gradient shard; the embedding and head units wait for the end of the step (tied embedding) */
/* ZeRO-2/3: the reduce-scatter a slot holds, waited for and added to the gradient shard */
static mgt_result mgt__block_grads_flush(mgt__rank *rk, int slot) {
    int u = rk->gpending[slot];
    if (u < 0) return MGT_OK;
    MGT__TRY(mgt__comm_sync(rk, rk->gticket[slot]));
    rk->be->add_inplace(rk->be, rk->gshard + rk->lay.u[u].shard_offset, slot ? rk->rs_tmp1 : rk->rs_tmp, rk->lay.u[u].size / (size_t)rk->run->plan.replicas);
    rk->gpending[slot] = -1;
    return MGT_OK;
}
/* the block's gradients are complete: their reduce-scatter is issued, and added to the shard when
   the next block's are complete (or at the end of the step), so a communicator with its own
   stream runs it while the next block computes */
static mgt_result mgt__block_grads_done(mgt__rank *rk, int u) {
    int slot = rk->gslot;
    if (rk->run->plan.zero < 2) return MGT_OK;
    MGT__TRY(mgt__block_grads_flush(rk, 1 - slot)); /* the previous block's, which ran while this one computed */
    rk->gticket[slot] = mgt__comm_defer(rk);
    MGT__TRY(rk->comm->reduce_scatter(rk->comm, &rk->dp_g, rk->unit_gbuf[slot], slot ? rk->rs_tmp1 : rk->rs_tmp,
                                      rk->lay.u[u].size / (size_t)rk->run->plan.replicas, MGT_F32));
    rk->gpending[slot] = u;
    rk->gslot = 1 - slot;
    return MGT_OK;
}
static mgt_result mgt__block_grads_begin(mgt__rank *rk, int u) {
    int slot = rk->gslot;
    if (rk->run->plan.zero < 2) return MGT_OK;
    MGT__TRY(mgt__block_grads_flush(rk, slot)); /* the slot's previous block has arrived */
    rk->be->zero(rk->be, rk->unit_gbuf[slot], sizeof(float) * rk->lay.u[u].size);
    rk->unit_grad[u] = rk->unit_gbuf[slot];
    return MGT_OK;
}

/* the block's normalisations: LayerNorm (GPT-2) or RMSNorm (Llama), into the same activations */
static void mgt__norm_forward(mgt__rank *rk, void *out, float *mean, float *rstd, const void *inp, int t_weight, int t_bias, int N) {
    mgt_backend *be = rk->be;
    if (rk->run->plan.dims.rms) be->rmsnorm_forward(be, out, rstd, inp, mgt__P(rk, t_weight), (float)rk->run->plan.cfg.model.norm_eps, N, rk->shape.C);
    else be->layernorm_forward(be, out, mean, rstd, inp, mgt__P(rk, t_weight), mgt__P(rk, t_bias), N, rk->shape.C);
}
static void mgt__norm_backward(mgt__rank *rk, void *dinp, const void *dout, const void *inp, const float *mean, const float *rstd, int t_weight,
                               int t_bias, int N) {
    mgt_backend *be = rk->be;
    if (rk->run->plan.dims.rms) be->rmsnorm_backward(be, dinp, mgt__G(rk, t_weight), dout, inp, mgt__P(rk, t_weight), rstd, N, rk->shape.C);
    else be->layernorm_backward(be, dinp, mgt__G(rk, t_weight), mgt__G(rk, t_bias), dout, inp, mgt__P(rk, t_weight), mean, rstd, N, rk->shape.C);
}

/* ---- context parallelism: the rank's two chunks of the sequence, and ring attention -------------

   With parallel.cp = P the sequence is cut into 2P chunks and context-parallel rank i holds chunks i
   and 2P - 1 - i (rows (2, B, T / 2)), so that every rank has the same share of causal attention's
   work (Megatron-LM's and torchtitan's load balance). Everything but attention is row by row; the
   positions (GPT-2's wpe, RoPE) are the chunks'. Attention is a ring (Liu et al. 2023, "Ring
   Attention"): each rank's key/value block goes around the CP group; at step r a rank holds the
   block of rank i - r, attends its own queries to it (a chunk's own keys causally, an earlier
   chunk's in full, a later one's not at all) and merges the result by log-sum-exp, while the next
   block arrives. The backward passes the blocks around again, with their gradients travelling with
   them, which are home after P steps. */
static int mgt__cp_chunk(int cpr, int cp, int h) { return h == 0 ? cpr : 2 * cp - 1 - cpr; } /* global chunk of local chunk h */
#define MGT__AT(p, i, elt) ((void *)((char *)(p) + (size_t)(i) * (size_t)(elt))) /* element i of a buffer of elt-byte elements */

/* RoPE on a qkv buffer (or its gradient), at the positions of the rank's rows */
static void mgt__rope(mgt__rank *rk, void *qkv, int backward) {
    const mgt__shape *s = &rk->shape;
    const mgt_dims *d = &rk->run->plan.dims;
    int NKVl = s->KVl / d->hs, h, Tc = s->T / 2, W = s->Cl + 2 * s->KVl;
    float theta = (float)rk->run->plan.cfg.model.rope_theta;
    void (*op)(mgt_backend *, void *, int, int, int, int, int, float, int) = backward ? rk->be->rope_backward : rk->be->rope_forward;
    if (s->cp == 1) { op(rk->be, qkv, s->B, s->T, s->NHl, NKVl, d->hs, theta, 0); return; }
    for (h = 0; h < 2; h++)
        op(rk->be, MGT__AT(qkv, (size_t)h * s->B * Tc * W, s->elt), s->B, Tc, s->NHl, NKVl, d->hs, theta, mgt__cp_chunk(rk->cpr, s->cp, h) * Tc);
}

/* the ring's neighbours */
static int mgt__cp_next(const mgt__rank *rk) { return rk->cp_g.ranks[(rk->cpr + 1) % rk->cp_g.size]; }
static int mgt__cp_prev(const mgt__rank *rk) { return rk->cp_g.ranks[(rk->cpr + rk->cp_g.size - 1) % rk->cp_g.size]; }

/* a block on to the next rank of the ring while the previous rank's arrives; its seconds are kept
   apart from the pipeline's (the bubble) */
static mgt_result mgt__ring_pass(mgt__rank *rk, const void *send, void *recv, size_t count, int dtype) {
    double before = rk->comm->stats.seconds[MGT_COLL_SEND_RECV];
    mgt_result res = rk->comm->sendrecv(rk->comm, mgt__cp_next(rk), send, mgt__cp_prev(rk), recv, count, dtype);
    rk->ring_s += rk->comm->stats.seconds[MGT_COLL_SEND_RECV] - before;
    return res;
}

/* the pairs of (query chunk, key/value chunk) that attend at ring step `step`, for forward and
   backward alike: calls visit(q chunk, kv chunk, causal, first of the query chunk) */
#define MGT__RING_PAIRS(rk, step, BODY)                                                                             \
    do {                                                                                                           \
        int mgt__qh, mgt__kh, mgt__kv_owner = ((rk)->cpr - (step) + (rk)->shape.cp) % (rk)->shape.cp;                   \
        for (mgt__qh = 0; mgt__qh < 2; mgt__qh++)                                                                  \
            for (mgt__kh = 0; mgt__kh < 2; mgt__kh++) {                                                            \
                int qi = mgt__cp_chunk((rk)->cpr, (rk)->shape.cp, mgt__qh), kj = mgt__cp_chunk(mgt__kv_owner, (rk)->shape.cp, mgt__kh); \
                int qh = mgt__qh, kh = mgt__kh, causal = qi == kj, first = (step) == 0 && mgt__kh == 0;           \
                if (kj > qi) continue; /* a later chunk: masked whole */                                           \
                (void)first;                                                                                       \
                BODY;                                                                                              \
            }                                                                                                      \
    } while (0)

/* forward: atty (N, Cl) and the log-sum-exps (att) of the layer from its qkv */
static mgt_result mgt__ring_attention_forward(mgt__rank *rk, mgt__layer_acts *a) {
    mgt_backend *be = rk->be;
    const mgt__shape *s = &rk->shape;
    mgt__grad_scratch *g = &rk->gs;
    int B = s->B, Tc = s->T / 2, N = B * s->T, KV2 = 2 * s->KVl, W = s->Cl + KV2, NKVl = s->KVl / rk->run->plan.dims.hs, step, dt = be->dtype;
    size_t rows = (size_t)B * Tc, e = s->elt;
    be->copy_cols(be, g->kv[0], dt, KV2, MGT__AT(a->qkv, s->Cl, e), dt, W, (size_t)N, KV2);
    for (step = 0; step < s->cp; step++) {
        int cur = step & 1;
        long ticket = -1;
        if (step + 1 < s->cp) { /* the next block arrives while this one is attended to */
            ticket = mgt__comm_defer(rk);
            MGT__TRY(mgt__ring_pass(rk, g->kv[cur], g->kv[1 - cur], (size_t)N * KV2, dt));
        }
        MGT__RING_PAIRS(rk, step,
                        be->attention_part_forward(be, g->o + (size_t)qh * rows * s->Cl, (float *)a->att + (size_t)qh * B * s->NHl * Tc,
                                                   MGT__AT(a->qkv, (size_t)qh * rows * W, e), MGT__AT(g->kv[cur], (size_t)kh * rows * KV2, e), KV2, B,
                                                   Tc, s->Cl, s->NHl, NKVl, causal, first));
        MGT__TRY(mgt__comm_sync(rk, ticket));
    }
    be->cast(be, a->atty, dt, g->o, MGT_F32, (size_t)N * s->Cl);
    return MGT_OK;
}

/* backward: dqkv (N, W) from d(atty) */
static mgt_result mgt__ring_attention_backward(mgt__rank *rk, mgt__layer_acts *a, void *dqkv, const void *datty) {
    mgt_backend *be = rk->be;
    const mgt__shape *s = &rk->shape;
    mgt__grad_scratch *g = &rk->gs;
    int B = s->B, Tc = s->T / 2, N = B * s->T, KV2 = 2 * s->KVl, W = s->Cl + KV2, NKVl = s->KVl / rk->run->plan.dims.hs, step, dt = be->dtype;
    size_t rows = (size_t)B * Tc, e = s->elt;
    be->zero(be, g->dq, sizeof(float) * (size_t)N * s->Cl);
    be->zero(be, g->dkv[0], sizeof(float) * (size_t)N * KV2);
    be->copy_cols(be, g->kv[0], dt, KV2, MGT__AT(a->qkv, s->Cl, e), dt, W, (size_t)N, KV2);
    for (step = 0; step < s->cp; step++) {
        int cur = step & 1;
        long ticket = -1;
        if (step + 1 < s->cp) {
            ticket = mgt__comm_defer(rk);
            MGT__TRY(mgt__ring_pass(rk, g->kv[cur], g->kv[1 - cur], (size_t)N * KV2, dt));
        }
        MGT__RING_PAIRS(rk, step,
                        be->attention_part_backward(be, g->dq + (size_t)qh * rows * s->Cl, g->dkv[cur] + (size_t)kh * rows * KV2,
                                                    MGT__AT(datty, (size_t)qh * rows * s->Cl, e), MGT__AT(a->atty, (size_t)qh * rows * s->Cl, e),
                                                    (const float *)a->att + (size_t)qh * B * s->NHl * Tc, MGT__AT(a->qkv, (size_t)qh * rows * W, e),
                                                    MGT__AT(g->kv[cur], (size_t)kh * rows * KV2, e), KV2, B, Tc, s->Cl, s->NHl, NKVl, causal));
        MGT__TRY(mgt__comm_sync(rk, ticket));
        /* the block's gradient goes on with it; after the last step each is back with its owner */
        MGT__TRY(mgt__ring_pass(rk, g->dkv[cur], g->dkv[1 - cur], (size_t)N * KV2, MGT_F32));
    }
    be->copy_cols(be, dqkv, dt, W, g->dq, MGT_F32, s->Cl, (size_t)N, s->Cl);
    be->copy_cols(be, MGT__AT(dqkv, s->Cl, e), dt, W, g->dkv[s->cp & 1], MGT_F32, KV2, (size_t)N, KV2);
    return MGT_OK;
}

/* forward of block b: reads resid[b], writes resid[b+1]. The norms, residual adds and row-parallel
   biases run on the rank's R rows (all N but under sequence parallelism), the GEMMs and attention
   on all N (gathered into gs.full under sequence parallelism, where the row-parallel GEMMs also
   write their partial products before the reduce-scatter) */
static mgt_result mgt__block_forward(mgt__rank *rk, mgt__acts *A, int b) {
    mgt_backend *be = rk->be;
    const mgt__shape *s = &rk->shape;
    const mgt_dims *d = &rk->run->plan.dims;
    mgt__layer_acts *a = &A->layer[b];
    int C = s->C, N = s->B * s->T, R = mgt__rows(s), NKVl = s->KVl / d->hs;
    const void *x = A->resid[b], *rows;
    void *out = A->resid[b + 1], *full = rk->gs.full;
#define MGT__BP(k) mgt__P(rk, mgt__t_block(rk, b, k))
#define MGT__BT(k) mgt__t_block(rk, b, k)
    mgt__norm_forward(rk, a->ln1, a->ln1_mean, a->ln1_rstd, x, MGT__BT(MGT__LN1W), MGT__BT(MGT__LN1B), R);
    MGT__TRY(mgt__all_rows(rk, a->ln1, full, &rows));
    be->matmul_forward(be, a->qkv, rows, MGT__BP(MGT__QKVW), MGT__BP(MGT__QKVB), N, C, s->Cl + 2 * s->KVl);
    if (d->rope) mgt__rope(rk, a->qkv, 0);
    if (s->cp > 1) MGT__TRY(mgt__ring_attention_forward(rk, a));
    else be->attention_forward(be, a->atty, a->att, a->qkv, s->B, s->T, s->Cl, s->NHl, NKVl);
    be->matmul_forward(be, s->sp ? full : a->res2, a->atty, MGT__BP(MGT__PROJW), NULL, N, s->Cl, C);
    MGT__TRY(mgt__tp_sum(rk, s->sp ? full : a->res2, a->res2)); /* row-parallel: sum the partial products */
    if (!d->rms && MGT__BT(MGT__PROJB) >= 0) /* GPT-2: the residual and LayerNorm in one pass */
        be->residual_layernorm_forward(be, a->res2, a->ln2, a->ln2_mean, a->ln2_rstd, x, MGT__BP(MGT__PROJB), MGT__BP(MGT__LN2W), MGT__BP(MGT__LN2B), R, C);
    else {
        be->bias_residual(be, a->res2, x, MGT__BP(MGT__PROJB), R, C);
        mgt__norm_forward(rk, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, MGT__BT(MGT__LN2W), MGT__BT(MGT__LN2B), R);
    }
    MGT__TRY(mgt__all_rows(rk, a->ln2, full, &rows));
    if (d->swiglu) {
        be->matmul_forward(be, a->fch, rows, MGT__BP(MGT__FCW), MGT__BP(MGT__FCB), N, C, s->Fl);
        be->swiglu_forward(be, a->fch_gelu, a->fch, N, s->Hl);
    } else
        be->matmul_gelu_forward(be, a->fch_gelu, a->fch, rows, MGT__BP(MGT__FCW), MGT__BP(MGT__FCB), N, C, s->Fl);
    be->matmul_forward(be, s->sp ? full : out, a->fch_gelu, MGT__BP(MGT__FCPROJW), NULL, N, s->Hl, C);
    MGT__TRY(mgt__tp_sum(rk, s->sp ? full : out, out));
    be->bias_residual(be, out, a->res2, MGT__BP(MGT__FCPROJB), R, C);
#undef MGT__BP
#undef MGT__BT
    return MGT_OK;
}

/* backward of block b: gs.dres holds d(resid[b+1]) on entry and d(resid[b]) on exit, the rank's R
   rows. Under sequence parallelism gs.full takes, in turn: dres gathered for the MLP's row-parallel
   GEMM, ln2 gathered again for c_fc's weight gradient (the norms keep only their R rows), ln2's
   gradient reduce-scattered, dres gathered for attention's row-parallel GEMM, ln1 gathered again,
   ln1's gradient reduce-scattered. Under pp_schedule = zb (shape.zb) this is the input-gradient
   pass B: the matmuls' weight gradients wait for mgt__block_weight_grads (W), their output gradients
   kept in the block's activations (gathered straight there under sequence parallelism, copied
   otherwise), and the norms' inputs are not gathered again here but there; the norms' own weight
   gradients come with their input gradients, in B. */
static mgt_result mgt__block_backward(mgt__rank *rk, mgt__acts *A, int b) {
    mgt_backend *be = rk->be;
    const mgt__shape *s = &rk->shape;
    const mgt_dims *d = &rk->run->plan.dims;
    mgt__layer_acts *a = &A->layer[b];
    mgt__grad_scratch *g = &rk->gs;
    int C = s->C, N = s->B * s->T, R = mgt__rows(s), NKVl = s->KVl / d->hs, zb = s->zb;
    const void *rows = NULL, *dout;
    const void *dln = s->sp ? g->full : g->dln; /* a norm's output gradient, the rank's rows, summed over TP */
    void *dfch = zb ? a->dfch : g->dfch, *dqkv = zb ? a->dqkv : g->dqkv;
#define MGT__BP(k) mgt__P(rk, mgt__t_block(rk, b, k))
#define MGT__BG(k) (zb ? NULL : mgt__G(rk, mgt__t_block(rk, b, k))) /* zb: in W */
#define MGT__BT(k) mgt__t_block(rk, b, k)
    /* the biases' gradients come with their matmul's (the CUDA backend: in its weight GEMM); a
       row-parallel layer's bias is whole on every TP rank, its gradient the column sums of every
       row of dres (gathered under sequence parallelism), the same on each */
    MGT__TRY(mgt__all_rows(rk, g->dres, zb ? a->dmlp : g->full, &dout));
    if (zb && dout != a->dmlp) be->cast(be, a->dmlp, be->dtype, dout, be->dtype, (size_t)N * C);
    if (d->swiglu) { /* d(swiglu output) in dact, then d(gate, up) in dfch */
        be->matmul_backward(be, g->dact, MGT__BG(MGT__FCPROJW), MGT__BG(MGT__FCPROJB), dout, a->fch_gelu, MGT__BP(MGT__FCPROJW), N, s->Hl, C);
        be->swiglu_backward(be, dfch, a->fch, g->dact, N, s->Hl);
    } else
        be->matmul_gelu_backward(be, dfch, MGT__BG(MGT__FCPROJW), MGT__BG(MGT__FCPROJB), dout, a->fch_gelu, MGT__BP(MGT__FCPROJW), a->fch, N,
                                 s->Hl, C);
    if (!zb) MGT__TRY(mgt__all_rows(rk, a->ln2, g->full, &rows));
    be->matmul_backward(be, g->dln, MGT__BG(MGT__FCW), MGT__BG(MGT__FCB), dfch, rows, MGT__BP(MGT__FCW), N, C, s->Fl);
    MGT__TRY(mgt__tp_sum(rk, g->dln, g->full)); /* column-parallel: sum the input gradients */
    mgt__norm_backward(rk, g->dres, dln, a->res2, a->ln2_mean, a->ln2_rstd, MGT__BT(MGT__LN2W), MGT__BT(MGT__LN2B), R);
    /* dln carries d(atty) (N,Cl), then d(ln1) */
    MGT__TRY(mgt__all_rows(rk, g->dres, zb ? a->dattn : g->full, &dout));
    if (zb && dout != a->dattn) be->cast(be, a->dattn, be->dtype, dout, be->dtype, (size_t)N * C);
    be->matmul_backward(be, g->dln, MGT__BG(MGT__PROJW), MGT__BG(MGT__PROJB), dout, a->atty, MGT__BP(MGT__PROJW), N, s->Cl, C);
    if (s->cp > 1) MGT__TRY(mgt__ring_attention_backward(rk, a, dqkv, g->dln));
    else be->attention_backward(be, dqkv, g->dln, a->qkv, a->atty, a->att, s->B, s->T, s->Cl, s->NHl, NKVl);
    if (d->rope) mgt__rope(rk, dqkv, 1);
    if (!zb) MGT__TRY(mgt__all_rows(rk, a->ln1, g->full, &rows));
    be->matmul_backward(be, g->dln, MGT__BG(MGT__QKVW), MGT__BG(MGT__QKVB), dqkv, rows, MGT__BP(MGT__QKVW), N, C, s->Cl + 2 * s->KVl);
    MGT__TRY(mgt__tp_sum(rk, g->dln, g->full));
    mgt__norm_backward(rk, g->dres, dln, A->resid[b], a->ln1_mean, a->ln1_rstd, MGT__BT(MGT__LN1W), MGT__BT(MGT__LN1B), R);
#undef MGT__BP
#undef MGT__BG
#undef MGT__BT
    return MGT_OK;
}

/* pp_schedule = zb, the weight-gradient pass W of block b: its four matmuls' weight and bias
   gradients from the output gradients B kept and the inputs the forward kept (the norms' outputs
   gathered again under sequence parallelism, as the joint backward does); reads no weights */
static mgt_result mgt__block_weight_grads(mgt__rank *rk, mgt__acts *A, int b) {
    mgt_backend *be = rk->be;
    const mgt__shape *s = &rk->shape;
    mgt__layer_acts *a = &A->layer[b];
    int C = s->C, N = s->B * s->T;
    const void *rows;
#define MGT__BG(k) mgt__G(rk, mgt__t_block(rk, b, k))
    be->matmul_backward(be, NULL, MGT__BG(MGT__FCPROJW), MGT__BG(MGT__FCPROJB), a->dmlp, a->fch_gelu, NULL, N, s->Hl, C);
    MGT__TRY(mgt__all_rows(rk, a->ln2, rk->gs.full, &rows));
    be->matmul_backward(be, NULL, MGT__BG(MGT__FCW), MGT__BG(MGT__FCB), a->dfch, rows, NULL, N, C, s->Fl);
    be->matmul_backward(be, NULL, MGT__BG(MGT__PROJW), MGT__BG(MGT__PROJB), a->dattn, a->atty, NULL, N, s->Cl, C);
    MGT__TRY(mgt__all_rows(rk, a->ln1, rk->gs.full, &rows));
    be->matmul_backward(be, NULL, MGT__BG(MGT__QKVW), MGT__BG(MGT__QKVB), a->dqkv, rows, NULL, N, C, s->Cl + 2 * s->KVl);
#undef MGT__BG
    return MGT_OK;
}

/* the first stage's embedding: vocabulary-parallel lookups summed over TP (under sequence
   parallelism, reduce-scattered: the rank's rows), positions added once */
static mgt_result mgt__embed_forward(mgt__rank *rk, mgt__acts *A) {
    const mgt__shape *s = &rk->shape;
    void *partial = s->sp ? rk->gs.full : A->resid[0];
    MGT__TRY(mgt__fetch(rk, 0));
    const float *wpe = rk->tpr == 0 ? mgt__P(rk, mgt__t_wpe(rk)) : NULL;
    if (s->cp == 1) rk->be->encoder_forward(rk->be, partial, A->inputs, mgt__P(rk, 0), rk->tpr * s->Vl, s->Vl, wpe, s->B, s->T, s->C);
    else { /* each chunk with its positions */
        int h, Tc = s->T / 2;
        size_t rows = (size_t)s->B * Tc;
        for (h = 0; h < 2; h++)
            rk->be->encoder_forward(rk->be, MGT__AT(partial, h * rows * s->C, s->elt), A->inputs + h * rows, mgt__P(rk, 0), rk->tpr * s->Vl, s->Vl,
                                    wpe ? MGT__AT(wpe, (size_t)mgt__cp_chunk(rk->cpr, s->cp, h) * Tc * s->C, s->elt) : NULL, s->B, Tc, s->C);
    }
    return mgt__tp_sum(rk, partial, A->resid[0]);
}

/* the last stage's head: final LayerNorm, vocabulary-parallel logits and cross-entropy. Each TP
   rank sees only its Vl logits; the softmax statistics of all are gathered (3 floats a row), never
   the logits. Returns the summed loss; with grad_scale != 0 the logits become their gradients. */
static mgt_result mgt__head_forward(mgt__rank *rk, mgt__acts *A, float grad_scale, double *loss_sum) {
    const mgt__shape *s = &rk->shape;
    mgt_backend *be = rk->be;
    int N = s->B * s->T, i, V = rk->run->plan.cfg.model.vocab_size, u_head = mgt__u_head(rk);
    float *part = A->xent + (size_t)rk->tpr * (size_t)N * 3;
    const void *rows;
    double sum = 0;
    MGT__TRY(mgt__fetch(rk, u_head));
    MGT__TRY(mgt__fetch(rk, rk->lay.t[mgt__t_head(rk)].unit));
    mgt__norm_forward(rk, A->lnf, A->lnf_mean, A->lnf_rstd, A->resid[s->nblocks], mgt__t_lnf(rk), mgt__t_lnf_bias(rk), mgt__rows(s));
    MGT__TRY(mgt__all_rows(rk, A->lnf, rk->gs.full, &rows)); /* the logits of every row */
    be->matmul_forward(be, A->logits, rows, mgt__P(rk, mgt__t_head(rk)), NULL, N, s->C, s->Vl);
    be->xent_partial(be, part, A->logits, A->targets, N, rk->tpr * s->Vl, s->Vl, V);
    if (rk->tp_g.size > 1) MGT__TRY(rk->comm->all_gather(rk->comm, &rk->tp_g, part, A->xent, (size_t)N * 3, MGT_F32));
    be->xent_finish(be, A->losses, A->logits, A->xent, s->tp, A->targets, N, rk->tpr * s->Vl, s->Vl, V, grad_scale);
    if (rk->dstat) be->sum_doubles(be, rk->dstat + 1, A->losses, (size_t)N, 1); /* stays on the device until the step's download */
    else {
        be->download(be, rk->host_io, A->losses, sizeof(double) * (size_t)N);
        for (i = 0; i < N; i++) sum += ((const double *)rk->host_io)[i];
    }
    *loss_sum = sum;
    mgt__release(rk, u_head);
    mgt__release(rk, rk->lay.t[mgt__t_head(rk)].unit);
    return MGT_OK;
}

static mgt_result mgt__head_backward(mgt__rank *rk, mgt__acts *A) {
    const mgt__shape *s = &rk->shape;
    mgt_backend *be = rk->be;
    int N = s->B * s->T, R = mgt__rows(s), t_lnf = mgt__t_lnf(rk), t_wte = mgt__t_head(rk);
    const void *rows;
    MGT__TRY(mgt__fetch(rk, mgt__u_head(rk)));
    MGT__TRY(mgt__fetch(rk, rk->lay.t[t_wte].unit));
    if (s->zb) /* the head's weight gradient waits for W (mgt__head_weight_grad) */
        be->matmul_backward(be, rk->gs.dln, NULL, NULL, A->logits, NULL, mgt__P(rk, t_wte), N, s->C, s->Vl);
    else {
        MGT__TRY(mgt__all_rows(rk, A->lnf, rk->gs.full, &rows)); /* gathered again for the head's weight gradient */
        be->matmul_backward(be, rk->gs.dln, mgt__G(rk, t_wte), NULL, A->logits, rows, mgt__P(rk, t_wte), N, s->C, s->Vl);
    }
    MGT__TRY(mgt__tp_sum(rk, rk->gs.dln, rk->gs.full));
    be->zero(be, rk->gs.dres, (size_t)R * s->C * s->elt);
    mgt__norm_backward(rk, rk->gs.dres, s->sp ? rk->gs.full : rk->gs.dln, A->resid[s->nblocks], A->lnf_mean, A->lnf_rstd, t_lnf, mgt__t_lnf_bias(rk), R);
    mgt__release(rk, mgt__u_head(rk));
    mgt__release(rk, rk->lay.t[t_wte].unit);
    return MGT_OK;
}

/* pp_schedule = zb: the head's weight gradient (W), from the logits' gradient and ln_f's output the
   micro-batch's activations keep */
static mgt_result mgt__head_weight_grad(mgt__rank *rk, mgt__acts *A) {
    const mgt__shape *s = &rk->shape;
    int t_wte = mgt__t_head(rk);
    const void *rows;
    MGT__TRY(mgt__fetch(rk, rk->lay.t[t_wte].unit));
    MGT__TRY(mgt__all_rows(rk, A->lnf, rk->gs.full, &rows));
    rk->be->matmul_backward(rk->be, NULL, mgt__G(rk, t_wte), NULL, A->logits, rows, NULL, s->B * s->T, s->C, s->Vl);
    mgt__release(rk, rk->lay.t[t_wte].unit);
    return MGT_OK;
}

/* forward of blocks [b0, b1) of this stage for one micro-batch, after the embedding when `embed`
   (activations already received on later stages) */
static mgt_result mgt__blocks_forward(mgt__rank *rk, mgt__acts *A, int b0, int b1, int embed) {
    int b;
    if (embed) {
        MGT__TRY(mgt__fetch(rk, 0));
        if (b1 > b0) MGT__TRY(mgt__prefetch(rk, mgt__u_block(rk, b0)));
        MGT__TRY(mgt__embed_forward(rk, A));
        mgt__release(rk, 0);
    }
    for (b = b0; b < b1; b++) {
        int u = mgt__u_block(rk, b);
        MGT__TRY(mgt__fetch(rk, u));
        if (b + 1 < b1) MGT__TRY(mgt__prefetch(rk, u + 1));
        MGT__TRY(mgt__block_forward(rk, A, b));
        mgt__release(rk, u);
    }
    return MGT_OK;
}
/* forward of this stage for one micro-batch */
static mgt_result mgt__stage_forward(mgt__rank *rk, mgt__acts *A) { return mgt__blocks_forward(rk, A, 0, rk->nblocks, rk->first); }

/* the DP all-reduce of bucket k once the last micro-batch's backward finished its units */
static mgt_result mgt__bucket_done(mgt__rank *rk, int u) {
    const mgt_plan *p = &rk->run->plan;
    int k, first = u, last = u;
    if (p->zero != 0 || rk->dp_g.size == 1) return MGT_OK;
    k = rk->bucket_of_unit[u];
    while (first > 0 && rk->bucket_of_unit[first - 1] == k) first--;
    while (last + 1 < rk->lay.nu && rk->bucket_of_unit[last + 1] == k) last++;
    if (u != first) return MGT_OK; /* backward finishes a bucket at its lowest unit */
    mgt__comm_defer(rk); /* read again only by the update */
    return mgt__all_reduce(rk, &rk->dp_g, rk->grads + rk->lay.u[first].offset,
                           rk->lay.u[last].offset + rk->lay.u[last].size - rk->lay.u[first].offset);
}

/* recompute = selective: block b's norm and GELU (or SwiGLU) outputs again, from the residual
   streams and the GEMM output it kept; no communication, a few passes over memory */
static void mgt__block_recompute_selective(mgt__rank *rk, mgt__acts *A, int b) {
    const mgt__shape *s = &rk->shape;
    mgt__layer_acts *a = &A->layer[b];
    int N = s->B * s->T, R = mgt__rows(s); /* the norms on the rank's rows (sequence parallelism: 1/tp of them) */
    mgt__norm_forward(rk, a->ln1, a->ln1_mean, a->ln1_rstd, A->resid[b], mgt__t_block(rk, b, MGT__LN1W), mgt__t_block(rk, b, MGT__LN1B), R);
    mgt__norm_forward(rk, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, mgt__t_block(rk, b, MGT__LN2W), mgt__t_block(rk, b, MGT__LN2B), R);
    if (rk->run->plan.dims.swiglu) rk->be->swiglu_forward(rk->be, a->fch_gelu, a->fch, N, s->Hl);
    else rk->be->gelu_forward(rk->be, a->fch_gelu, a->fch, (size_t)N * s->Hl);
}

/* backward of blocks [b0, b1) of this stage for one micro-batch, after the head when `head`, then
   the embedding's when `embed`; gs.dres holds the gradient of the blocks' output (received from the
   next stage) unless `head`. last_micro: the last backward of these units in the step */
static mgt_result mgt__blocks_backward(mgt__rank *rk, mgt__acts *A, int b0, int b1, int head, int embed, int last_micro) {
    int b, recompute = rk->shape.recompute;
    if (head) {
        MGT__TRY(mgt__head_backward(rk, A));
        if (last_micro && !rk->shape.zb) MGT__TRY(mgt__bucket_done(rk, mgt__u_head(rk))); /* with pp = 1 the head is unit nu - 1, never 0 */
    }
    for (b = b1 - 1; b >= b0; b--) {
        int u = mgt__u_block(rk, b);
        MGT__TRY(mgt__fetch(rk, u));
        if (b > b0) MGT__TRY(mgt__prefetch(rk, u - 1));
        MGT__TRY(mgt__block_grads_begin(rk, u));
        if (recompute == MGT_RECOMPUTE_FULL) MGT__TRY(mgt__block_forward(rk, A, b)); /* rebuild this block's activations from resid[b] */
        if (recompute == MGT_RECOMPUTE_SELECTIVE && !rk->shape.zb) mgt__block_recompute_selective(rk, A, b); /* zb: B reads none of them, W rebuilds them */
        MGT__TRY(mgt__block_backward(rk, A, b));
        mgt__release(rk, u);
        MGT__TRY(mgt__block_grads_done(rk, u));
        if (last_micro && !rk->shape.zb) MGT__TRY(mgt__bucket_done(rk, u)); /* zb: complete after W */
    }
    if (embed) {
        const mgt__shape *s = &rk->shape;
        const void *dout;
        MGT__TRY(mgt__fetch(rk, 0));
        MGT__TRY(mgt__all_rows(rk, rk->gs.dres, rk->gs.full, &dout)); /* each TP rank's vocabulary rows take every row's gradient */
        float *dwpe = mgt__G(rk, mgt__t_wpe(rk));
        if (s->cp == 1) rk->be->encoder_backward(rk->be, mgt__G(rk, 0), dwpe, dout, A->inputs, rk->tpr * s->Vl, s->Vl, s->B, s->T, s->C);
        else {
            int h, Tc = s->T / 2;
            size_t rows = (size_t)s->B * Tc;
            for (h = 0; h < 2; h++)
                rk->be->encoder_backward(rk->be, mgt__G(rk, 0), dwpe ? dwpe + (size_t)mgt__cp_chunk(rk->cpr, s->cp, h) * Tc * s->C : NULL,
                                         MGT__AT(dout, h * rows * s->C, s->elt), A->inputs + h * rows, rk->tpr * s->Vl, s->Vl, s->B, Tc, s->C);
        }
        mgt__release(rk, 0);
        if (last_micro && !rk->shape.zb) MGT__TRY(mgt__bucket_done(rk, 0));
    }
    return MGT_OK;
}

/* pp_schedule = zb, the weight-gradient pass W of blocks [b0, b1) (and the head's first when `head`)
   for one micro-batch, in the order of its backward; recompute = selective first rebuilds a block's
   norm and GELU outputs, which the blocks share. last_micro: the step's last W, after which each
   unit's gradients are complete (the embedding's, from B, when `embed`: it ends a DP bucket) */
static mgt_result mgt__blocks_weight_grads(mgt__rank *rk, mgt__acts *A, int b0, int b1, int head, int embed, int last_micro) {
    int b;
    if (head) {
        MGT__TRY(mgt__head_weight_grad(rk, A));
        if (last_micro) MGT__TRY(mgt__bucket_done(rk, mgt__u_head(rk)));
    }
    for (b = b1 - 1; b >= b0; b--) {
        int u = mgt__u_block(rk, b);
        if (rk->shape.recompute == MGT_RECOMPUTE_SELECTIVE) mgt__block_recompute_selective(rk, A, b);
        MGT__TRY(mgt__block_weight_grads(rk, A, b));
        if (last_micro) MGT__TRY(mgt__bucket_done(rk, u));
    }
    if (embed && last_micro) MGT__TRY(mgt__bucket_done(rk, 0));
    return MGT_OK;
}
/* backward of this stage for one micro-batch */
static mgt_result mgt__stage_backward(mgt__rank *rk, mgt__acts *A, int last_micro) {
    return mgt__blocks_backward(rk, A, 0, rk->nblocks, rk->last, rk->first, last_micro);
}
/* ==== end src/rank.c ==== */
/* ==== begin src/pipeline.c ==== */
#line 1 "src/pipeline.c"
/* src/pipeline.c - the pipeline: a micro-batch's rows, activations between stages, the schedules
   (GPipe, 1F1B; interleaved 1F1B and zero-bubble ZB-H1 as lists of actions) */
/* ---- the pipeline ---------------------------------------------------------------------------- */

/* inputs (first stage) and targets (last stage) of micro-batch `micro` of this DP rank from the
   global batch rows (GB, seq_len + 1), made in host memory and uploaded; under context parallelism
   the rank's two chunks of each row, chunk-major (mgt__cp_chunk) */
static void mgt__set_rows(mgt__rank *rk, mgt__acts *A, const uint32_t *rows, int micro) {
    const mgt__shape *s = &rk->shape;
    int b, t, h, dp = rk->run->plan.dp, N = s->B * s->T, *inputs = (int *)rk->host_io, *targets = inputs + N, L = s->T * s->cp;
    int Tc = s->cp > 1 ? s->T / 2 : s->T, parts = s->cp > 1 ? 2 : 1;
    for (h = 0; h < parts; h++) {
        int t0 = s->cp > 1 ? mgt__cp_chunk(rk->cpr, s->cp, h) * Tc : 0;
        for (b = 0; b < s->B; b++) {
            const uint32_t *row = rows + (size_t)((micro * dp + rk->dpr) * s->B + b) * (size_t)(L + 1) + t0;
            int *in = inputs + ((size_t)h * s->B + b) * Tc, *tg = targets + ((size_t)h * s->B + b) * Tc;
            for (t = 0; t < Tc; t++) {
                in[t] = (int)row[t];
                tg[t] = (int)row[t + 1];
            }
        }
    }
    if (rk->first) rk->be->upload(rk->be, A->inputs, inputs, sizeof(int) * (size_t)N);
    if (rk->last) rk->be->upload(rk->be, A->targets, targets, sizeof(int) * (size_t)N);
}

/* activations and their gradients between stages, in the storage type: the rank's R rows (under
   sequence parallelism each TP rank sends its 1/tp to the same TP rank of the next stage) */
static mgt_result mgt__recv_act(mgt__rank *rk, void *buf, int from_stage) {
    const mgt__shape *s = &rk->shape;
    return rk->comm->recv(rk->comm, rk->pp_g.ranks[from_stage], buf, (size_t)mgt__rows(s) * s->C, rk->be->dtype);
}
static mgt_result mgt__send_act(mgt__rank *rk, const void *buf, int to_stage) {
    const mgt__shape *s = &rk->shape;
    return rk->comm->send(rk->comm, rk->pp_g.ranks[to_stage], buf, (size_t)mgt__rows(s) * s->C, rk->be->dtype);
}

/* micro-batch m through this stage, forward: receive (unless `received`), compute, then send, or
   leave the sending to the caller (`send` 0), or compute the loss on the last stage */
static mgt_result mgt__micro_forward(mgt__rank *rk, const uint32_t *rows, int m, float grad_scale, int received, int send) {
    mgt__acts *A = &rk->acts[m % rk->nsets];
    mgt__set_rows(rk, A, rows, m);
    if (!rk->first && !received) MGT__TRY(mgt__recv_act(rk, A->resid[0], rk->ppr - 1));
    MGT__TRY(mgt__stage_forward(rk, A));
    if (!rk->last) return send ? mgt__send_act(rk, A->resid[rk->nblocks], rk->ppr + 1) : MGT_OK;
    {
        double loss;
        MGT__TRY(mgt__head_forward(rk, A, grad_scale, &loss));
        rk->loss_sum += loss;
    }
    return MGT_OK;
}
/* and backward, with the same choices for the gradient it receives and the one it sends */
static mgt_result mgt__micro_backward(mgt__rank *rk, int m, int last_micro, int received, int send) {
    mgt__acts *A = &rk->acts[m % rk->nsets];
    if (!rk->last && !received) MGT__TRY(mgt__recv_act(rk, rk->gs.dres, rk->ppr + 1));
    MGT__TRY(mgt__stage_backward(rk, A, last_micro));
    if (!rk->first && send) return mgt__send_act(rk, rk->gs.dres, rk->ppr - 1);
    return MGT_OK;
}

/* ---- interleaved 1F1B as lists of actions ------------------------------------------------------

   With parallel.pp_virtual = V > 1 each stage holds V chunks of blocks (chunk g of pp x V on stage
   g mod pp) and a micro-batch goes through the chunks in order, around the stages V times. Each
   stage's step is a list of actions, made here once per run: compute (the forward or backward of a
   micro-batch through one chunk), and the sends and receives around it; one executor
   (mgt__run_pipe_actions) runs them. Another schedule is another list: zero-bubble's, below.

   The compute order is Megatron-LM's interleaved schedule (Narayanan et al. 2021,
   schedules.py:forward_backward_pipelining_with_interleaving): forwards k = 0, 1, ... take
   micro-batch (k / (pp V)) pp + k mod pp through chunk (k mod pp V) / pp, i.e. pp micro-batches at
   a time through one chunk, then the next chunk; backwards the same with the chunks reversed;
   stage s first runs 2 (pp - s - 1) + (V - 1) pp forwards, then one forward and one backward in
   turn, then the remaining backwards. Its bubble is (pp - 1) / (V M) of the step where 1F1B's is
   (pp - 1) / M, for M micro-batches, a multiple of pp.

   The order of the communication: the whole pipeline is run once here with unit costs (forward
   1, backward 2, or 3 with recompute), which gives every message a time (its producer's end) and every compute a start.
   Each stage sorts its actions by time, a message before a compute at the same time, messages by
   (time, sending stage). Every message is then at the same place in the global order of messages on
   both its stages, so a communicator whose send waits for the receiver (NCCL) cannot deadlock: the
   earliest message not yet done is the next communication of both its sender and its receiver. A
   receive may come before computes that precede its consumer, so each activation set (one per
   micro-batch in flight) has its own place to receive into: the chunk's input resid[c x blocks per
   chunk], and acts.dgrad for the gradient, in which the chunk's backward then runs (gs.dres
   pointed at it) and from which it is sent. Where the real costs differ from these, a receive
   placed early may wait while a compute could run: the simulator's bubble is the ideal
   (pp - 1) / V of a micro-batch at backward = 2 forwards (test_sim), more at other ratios
   (pp 4, V 2, M 8 at backward = forward: 0.256 of the step instead of 0.158). */

/* ---- zero-bubble ZB-H1 (parallel.pp_schedule = zb) -------------------------------------------

   Qi et al. 2023, "Zero Bubble Pipeline Parallelism" (ICLR 2024), the schedule ZB-H1: each backward
   is split into B, the input gradients (sent upstream at once: the next stage's critical path) and
   W, the weight gradients of the matmuls (mgt__blocks_weight_grads), which nothing waits for, and
   which fill the time a stage would otherwise wait. The forwards and B's keep 1F1B's order (stage s
   first runs pp - s - 1 forwards). In the unit-cost run a stage runs its next F or B when its input
   is there, and otherwise its oldest pending W; a W also comes first when one more forward would
   hold more than pp micro-batches between their F and their W, 1F1B's most (its first stage's). So
   the last stage defers its W's by pp - 1 micro-batches and the first runs F B W, as the paper's
   figure; every stage then holds up to pp micro-batches where 1F1B's stage s holds pp - s. The
   costs: F = B = 4, W = 3. The paper's F = B = W gives a step of 3 M + (pp - 1) where 1F1B's is
   3 (M + pp - 1) (pp 4, M 8: 27 against 33, the bubble a third), but a W has neither attention
   nor the norms, so it costs less than a forward (the H100 model prices a GPT-2 1.5B stage's at
   about 11.5 : 14 : 9), and an order made for F = W then leaves gaps in the drain that the real
   costs do not fill: the simulator's step of that model on pp 4 x dp 2 was 5% longer than 1F1B's
   with F = B = W, and 2% shorter with any W < F it was given (3 : 3 : 2, 10 : 12 : 8, 21 : 23 :
   20 alike). With F = B = 4, W = 3: pp 4, M 8 takes 105 units, 17 idle on stage 0 (1F1B at a
   backward of 7: 121, 33 idle; test_sim). What W needs stays in the micro-batch's
   activations: each block's four matmul output gradients (mgt__layer_acts dmlp, dattn, dfch, dqkv;
   without recompute all but dfch in activations B is done with); their inputs were kept anyway
   (selective recompute rebuilds ln1, ln2, fch_gelu again for W).
   Messages are ordered as the interleaved schedule's, below. */
#define MGT__ZB_FB_COST 4 /* a forward's and an input-gradient pass's cost in the unit-cost run */
#define MGT__ZB_W_COST 3  /* and a weight-gradient pass's: less (see above) */
static void mgt__zb_order(int pp, int M, mgt__pipe_action *comp, int per, long long *fend, long long *bend, int *state, long long *clock) {
    /* state: per stage, [0] next of its F/B order, [1] forwards, [2] B's, [3] W's done, [4] actions made; clock: when it is free */
    int s, best;
    for (;;) {
        long long best_t = 0;
        int best_w = 0;
        best = -1;
        for (s = 0; s < pp; s++) {
            int *st = state + 5 * s, pend = st[2] - st[3], warm = pp - s - 1 < M ? pp - s - 1 : M, i = st[0], fwd, m, w;
            long long t, dep;
            if (i == 2 * M) {
                if (!pend) continue;
                t = clock[s]; w = 1;
            } else {
                /* 1F1B's order: warm forwards, then forward and backward in turn, then the rest of the backwards */
                if (i < warm) fwd = 1, m = i;
                else if (i < 2 * M - warm) fwd = (i - warm) % 2 == 0, m = fwd ? warm + (i - warm) / 2 : (i - warm) / 2;
                else fwd = 0, m = i - M;
                dep = fwd ? (s > 0 ? fend[m * pp + s - 1] : 0) : (s < pp - 1 ? bend[m * pp + s + 1] : fend[m * pp + s]);
                if (fwd && st[1] - st[3] >= pp && pend) t = clock[s], w = 1; /* no more than pp micro-batches held */
                else if (dep >= 0 && dep <= clock[s]) t = clock[s], w = 0;
                else if (pend) t = clock[s], w = 1; /* its input is not there yet: a W fills the wait */
                else if (dep >= 0) t = dep, w = 0;
                else continue;
            }
            if (best < 0 || t < best_t) best = s, best_t = t, best_w = w;
        }
        if (best < 0) return;
        {
            int *st = state + 5 * best, i = st[0], warm = pp - best - 1 < M ? pp - best - 1 : M;
            mgt__pipe_action *a = comp + (size_t)best * (size_t)per + st[4]++;
            a->t = best_t;
            clock[best] = best_t + (best_w ? MGT__ZB_W_COST : MGT__ZB_FB_COST);
            if (best_w) { a->kind = MGT__PA_WEIGHT; a->micro = st[3]++; continue; }
            if (i < warm) a->kind = MGT__PA_FORWARD, a->micro = i;
            else if (i < 2 * M - warm) a->kind = (i - warm) % 2 == 0 ? MGT__PA_FORWARD : MGT__PA_BACKWARD,
                                        a->micro = a->kind == MGT__PA_FORWARD ? warm + (i - warm) / 2 : (i - warm) / 2;
            else a->kind = MGT__PA_BACKWARD, a->micro = i - M;
            st[0]++;
            if (a->kind == MGT__PA_FORWARD) fend[a->micro * pp + best] = clock[best], st[1]++;
            else bend[a->micro * pp + best] = clock[best], st[2]++;
        }
    }
}

static int mgt__pipe_action_cmp(const void *x, const void *y) {
    const mgt__pipe_action *a = (const mgt__pipe_action *)x, *b = (const mgt__pipe_action *)y;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    if (a->order != b->order) return a->order - b->order;
    if (a->sender != b->sender) return a->sender - b->sender;
    return a->seq - b->seq;
}

/* stage `stage`'s actions for a step of M micro-batches (a multiple of pp) through pp stages of V
   chunks each; forward_only: validation's forwards; bcost: a backward's cost in forwards; zb: the
   zero-bubble order (V = 1; B and W cost a forward each). *out is MGT_MALLOC'd. */
static mgt_result mgt__pipeline_actions(int pp, int V, int M, int forward_only, int bcost, int zb, int stage, mgt__pipe_action **out, int *n_out) {
    int G = pp * V, total = M * V, per = forward_only ? total : (zb ? 3 : 2) * total, s, k, i, n = 0, *pos = NULL, progress;
    long long *fend = NULL, *bend = NULL, *clock = NULL;
    mgt__pipe_action *comp = NULL, *res = NULL; /* comp: every stage's computes, per apart */
    mgt_result r = MGT_OK;
    *out = NULL;
    *n_out = 0;
    comp = (mgt__pipe_action *)MGT_MALLOC(sizeof *comp * (size_t)per * (size_t)pp);
    fend = (long long *)MGT_MALLOC(sizeof(long long) * (size_t)M * (size_t)G * 2);
    pos = (int *)MGT_MALLOC(sizeof(int) * (size_t)pp * 5); /* zb: mgt__zb_order's state */
    clock = (long long *)MGT_MALLOC(sizeof(long long) * (size_t)pp);
    res = (mgt__pipe_action *)MGT_MALLOC(sizeof *res * (size_t)per * 3);
    if (!comp || !fend || !pos || !clock || !res) { r = mgt__fail(MGT_ERROR_MEMORY, "out of memory planning the pipeline schedule"); goto done; }
    bend = fend + (size_t)M * (size_t)G;
    for (i = 0; i < M * G * 2; i++) fend[i] = -1;
    memset(comp, 0, sizeof *comp * (size_t)per * (size_t)pp);
    if (zb && !forward_only) {
        memset(pos, 0, sizeof(int) * (size_t)pp * 5);
        memset(clock, 0, sizeof(long long) * (size_t)pp);
        mgt__zb_order(pp, M, comp, per, fend, bend, pos, clock);
        for (s = 0; s < pp; s++)
            if (pos[5 * s + 4] < per) { r = mgt__fail(MGT_ERROR_UNSUPPORTED, "the zero-bubble schedule of %d stages over %d micro-batches does not complete", pp, M); goto done; }
        goto messages;
    }
    for (s = 0; s < pp; s++) { /* Megatron's order */
        mgt__pipe_action *c = comp + (size_t)s * (size_t)per;
        int warm = forward_only ? total : 2 * (pp - s - 1) + (V - 1) * pp, nf = 0, nb = 0, j = 0;
        if (warm > total) warm = total;
#define MGT__PA_PUSH(k_, idx_)                                                                                   \
    (c[j].kind = (k_), c[j].micro = (idx_) / G * pp + (idx_) % pp,                                               \
     c[j].chunk = (k_) == MGT__PA_FORWARD ? (idx_) % G / pp : V - 1 - (idx_) % G / pp, j++)
        while (nf < warm) MGT__PA_PUSH(MGT__PA_FORWARD, nf), nf++;
        while (nf < total) { MGT__PA_PUSH(MGT__PA_FORWARD, nf); nf++; if (!forward_only) MGT__PA_PUSH(MGT__PA_BACKWARD, nb), nb++; }
        while (!forward_only && nb < total) MGT__PA_PUSH(MGT__PA_BACKWARD, nb), nb++;
#undef MGT__PA_PUSH
        pos[s] = 0;
        clock[s] = 0;
    }
    do { /* each stage runs its list in order, each compute once its input is there */
        progress = 0;
        for (s = 0; s < pp; s++)
            while (pos[s] < per) {
                mgt__pipe_action *a = comp + (size_t)s * (size_t)per + pos[s];
                int g = a->chunk * pp + s, idx = a->micro * G + g;
                long long dep = a->kind == MGT__PA_FORWARD ? (g > 0 ? fend[idx - 1] : 0) : (g < G - 1 ? bend[idx + 1] : fend[idx]);
                if (dep < 0) break;
                a->t = clock[s] > dep ? clock[s] : dep;
                clock[s] = a->t + (a->kind == MGT__PA_FORWARD ? 1 : bcost);
                (a->kind == MGT__PA_FORWARD ? fend : bend)[idx] = clock[s];
                pos[s]++;
                progress = 1;
            }
    } while (progress);
    for (s = 0; s < pp; s++)
        if (pos[s] < per) { r = mgt__fail(MGT_ERROR_UNSUPPORTED, "the interleaved schedule of %d stages x %d chunks over %d micro-batches does not complete", pp, V, M); goto done; }
messages:
    for (k = 0; k < per; k++) { /* this stage's computes with their messages */
        const mgt__pipe_action *a = comp + (size_t)stage * (size_t)per + k;
        int g = a->chunk * pp + stage, idx = a->micro * G + g, fwd = a->kind == MGT__PA_FORWARD;
        int from = fwd ? g - 1 : g + 1, to = fwd ? g + 1 : g - 1; /* the chunks it receives from and sends to */
        if (a->kind == MGT__PA_WEIGHT) from = to = -1; /* no messages */
        if (from >= 0 && from < G) {
            mgt__pipe_action *x = &res[n];
            memset(x, 0, sizeof *x);
            x->kind = MGT__PA_RECV; x->micro = a->micro; x->chunk = a->chunk; x->grad = !fwd; x->peer = from % pp;
            x->t = fwd ? fend[idx - 1] : bend[idx + 1]; x->order = 0; x->sender = x->peer; x->seq = n++;
        }
        res[n] = *a;
        res[n].order = 1; res[n].sender = stage; res[n].seq = n; n++;
        if (to >= 0 && to < G) {
            mgt__pipe_action *x = &res[n];
            memset(x, 0, sizeof *x);
            x->kind = MGT__PA_SEND; x->micro = a->micro; x->chunk = a->chunk; x->grad = !fwd; x->peer = to % pp;
            x->t = fwd ? fend[idx] : bend[idx]; x->order = 0; x->sender = stage; x->seq = n++;
        }
    }
    qsort(res, (size_t)n, sizeof *res, mgt__pipe_action_cmp);
    *out = res;
    *n_out = n;
    res = NULL;
done:
    MGT_FREE(comp); MGT_FREE(fend); MGT_FREE(pos); MGT_FREE(clock); MGT_FREE(res);
    return r;
}

/* activation sets a list of actions needs when micro-batch m takes set m mod sets from its first
   action to its last (receives and sends included): the fewest with which no two overlap */
static int mgt__pipe_sets(const mgt__pipe_action *a, int n, int M) {
    int *first = (int *)MGT_MALLOC(sizeof(int) * (size_t)M * 3), *last, *runmax, i, k, m, ok = 0;
    if (!first) return M; /* every micro-batch its own set: always enough */
    last = first + M;
    runmax = last + M;
    for (m = 0; m < M; m++) first[m] = n, last[m] = -1;
    for (i = 0; i < n; i++) {
        if (i < first[a[i].micro]) first[a[i].micro] = i;
        last[a[i].micro] = i;
    }
    for (k = 1; k < M && !ok; k++) {
        ok = 1;
        for (m = 0; m < k; m++) runmax[m] = -1;
        for (m = 0; m < M && ok; m++) {
            if (runmax[m % k] >= first[m]) ok = 0;
            if (last[m] > runmax[m % k]) runmax[m % k] = last[m];
        }
        if (ok) break;
    }
    MGT_FREE(first);
    return ok ? k : M;
}

/* the interleaved (or zero-bubble) schedule of stage `stage` of plan p: its training and validation
   actions (free with MGT_FREE; NULL to only count) and the activation sets they need */
static mgt_result mgt__interleaved_plan(const mgt_plan *p, int stage, mgt__pipe_action **train, int *ntrain, mgt__pipe_action **fwd, int *nfwd, int *sets) {
    mgt__pipe_action *a[2] = {NULL, NULL};
    int n[2] = {0, 0}, i, M = p->micro_steps, most = 1;
    mgt_result r = MGT_OK;
    for (i = 0; i < 2 && r == MGT_OK; i++) {
        int k;
        /* a backward costs about two forwards (the input's and the weights' gradients), three with recompute */
        r = mgt__pipeline_actions(p->pp, mgt__plan_chunks(p), M, i, p->cfg.train.recompute == MGT_RECOMPUTE_FULL ? 3 : 2, mgt__plan_zb(p), stage, &a[i], &n[i]);
        if (r == MGT_OK && (k = mgt__pipe_sets(a[i], n[i], M)) > most) most = k;
    }
    *sets = most;
    if (r == MGT_OK && train) { *train = a[0]; *ntrain = n[0]; a[0] = NULL; }
    if (r == MGT_OK && fwd) { *fwd = a[1]; *nfwd = n[1]; a[1] = NULL; }
    MGT_FREE(a[0]);
    MGT_FREE(a[1]);
    return r;
}

/* runs a list of actions (mgt__pipeline_actions) over the step's rows */
static mgt_result mgt__run_pipe_actions(mgt__rank *rk, const mgt__pipe_action *a, int n, const uint32_t *rows, float grad_scale) {
    const mgt__shape *s = &rk->shape;
    int i, V = s->chunks, per = rk->nblocks / V, M = rk->run->plan.micro_steps;
    size_t act = (size_t)mgt__rows(s) * s->C; /* the rank's rows of the residual stream (sequence parallelism: 1/tp of them) */
    for (i = 0; i < n; i++) {
        const mgt__pipe_action *x = &a[i];
        mgt__acts *A = &rk->acts[x->micro % rk->nsets];
        int c = x->chunk, head = rk->last && c == V - 1, embed = rk->first && c == 0, peer = rk->pp_g.ranks[x->peer];
        if (x->kind == MGT__PA_RECV)
            MGT__TRY(rk->comm->recv(rk->comm, peer, x->grad ? A->dgrad : A->resid[c * per], act, rk->be->dtype));
        else if (x->kind == MGT__PA_SEND)
            MGT__TRY(rk->comm->send(rk->comm, peer, x->grad ? A->dgrad : A->resid[(c + 1) * per], act, rk->be->dtype));
        else if (x->kind == MGT__PA_FORWARD) {
            if (embed || head) mgt__set_rows(rk, A, rows, x->micro);
            MGT__TRY(mgt__blocks_forward(rk, A, c * per, (c + 1) * per, embed));
            if (head) {
                double loss;
                MGT__TRY(mgt__head_forward(rk, A, grad_scale, &loss));
                rk->loss_sum += loss;
            }
        } else if (x->kind == MGT__PA_WEIGHT) /* zb: the weight gradients B left */
            MGT__TRY(mgt__blocks_weight_grads(rk, A, c * per, (c + 1) * per, head, embed, x->micro == M - 1));
        else { /* the chunk's backward runs in the set's gradient buffer, from which it is sent */
            void *dres = rk->gs.dres;
            mgt_result r;
            rk->gs.dres = A->dgrad;
            r = mgt__blocks_backward(rk, A, c * per, (c + 1) * per, head, embed, x->micro == M - 1);
            rk->gs.dres = dres;
            MGT__TRY(r);
        }
    }
    return MGT_OK;
}

/* the pipeline schedule of one step over M micro-batches: GPipe runs every forward and then every
   backward; 1F1B runs pp - stage - 1 forwards, then alternates, so at most pp - stage micro-batches
   are in flight. In 1F1B's steady state a stage sends its output and receives the gradient of an
   earlier micro-batch from the next stage, which does the reverse: each pair goes as one sendrecv
   (Megatron's send_forward_recv_backward and send_backward_recv_forward), so that communicators
   whose send waits for the receiver (NCCL) cannot deadlock. */
static mgt_result mgt__schedule(mgt__rank *rk, const uint32_t *rows, float grad_scale) {
    const mgt__shape *s = &rk->shape;
    size_t act = (size_t)mgt__rows(s) * s->C;
    int M = rk->run->plan.micro_steps, m, warm, steady, dtype = rk->be->dtype;
    if (s->chunks > 1 || s->zb) return mgt__run_pipe_actions(rk, rk->pipe[0], rk->npipe[0], rows, grad_scale); /* interleaved, zero-bubble */
    if (rk->run->plan.cfg.parallel.pp_schedule == 1 /* gpipe */ || rk->run->plan.pp == 1) {
        for (m = 0; m < M; m++) {
            MGT__TRY(mgt__micro_forward(rk, rows, m, grad_scale, 0, 1));
            if (rk->run->plan.pp == 1) MGT__TRY(mgt__micro_backward(rk, m, m == M - 1, 0, 1)); /* one stage: no need to hold M sets */
        }
        if (rk->run->plan.pp > 1)
            for (m = 0; m < M; m++) MGT__TRY(mgt__micro_backward(rk, m, m == M - 1, 0, 1));
        return MGT_OK;
    }
    warm = rk->run->plan.pp - rk->ppr - 1;
    if (warm > M) warm = M;
    steady = M - warm;
    for (m = 0; m < warm; m++) MGT__TRY(mgt__micro_forward(rk, rows, m, grad_scale, 0, 1));
    for (m = 0; m < steady; m++) {
        mgt__acts *F = &rk->acts[(m + warm) % rk->nsets];
        /* forward of m + warm: its input came with the previous backward's send, but the first */
        MGT__TRY(mgt__micro_forward(rk, rows, m + warm, grad_scale, m > 0, 0));
        if (!rk->last) /* send that output, receive the gradient of micro-batch m */
            MGT__TRY(rk->comm->sendrecv(rk->comm, rk->pp_g.ranks[rk->ppr + 1], F->resid[rk->nblocks], rk->pp_g.ranks[rk->ppr + 1], rk->gs.dres, act,
                                        dtype));
        MGT__TRY(mgt__micro_backward(rk, m, m == M - 1, 1, m == steady - 1));
        if (!rk->first && m < steady - 1) { /* send the gradient, receive the next forward's input */
            mgt__acts *next = &rk->acts[(m + warm + 1) % rk->nsets];
            MGT__TRY(rk->comm->sendrecv(rk->comm, rk->pp_g.ranks[rk->ppr - 1], rk->gs.dres, rk->pp_g.ranks[rk->ppr - 1], next->resid[0], act, dtype));
        }
    }
    for (m = steady; m < M; m++) MGT__TRY(mgt__micro_backward(rk, m, m == M - 1, 0, 1));
    return MGT_OK;
}
/* ==== end src/pipeline.c ==== */
/* ==== begin src/step.c ==== */
#line 1 "src/step.c"
/* src/step.c - a rank's optimizer step (ZeRO reductions, the global norm, AdamW), the commands rank
   threads run, a step of the run, statistics and events */
/* ---- the optimizer step on a rank: tied embedding, ZeRO reductions, one global norm, AdamW ---- */

/* the slice [lo, hi) of unit u that this DP rank owns (its ZeRO shard, or its share of the norm) */
static void mgt__unit_slice(const mgt__rank *rk, int u, size_t *lo, size_t *hi) {
    size_t s = rk->lay.u[u].size / (size_t)rk->run->plan.replicas;
    *lo = rk->lay.u[u].offset + (size_t)rk->replica * s;
    *hi = *lo + s;
}
/* element `flat` of this rank's slice of unit u, in whichever buffer holds it (elements of elt bytes) */
static void *mgt__slice_at(mgt__rank *rk, void *full, void *shard, int u, size_t flat, size_t elt) {
    size_t lo, hi;
    if (!shard) return (char *)full + flat * elt;
    mgt__unit_slice(rk, u, &lo, &hi);
    return (char *)shard + (rk->lay.u[u].shard_offset + (flat - lo)) * elt;
}
static float *mgt__slice_ptr(mgt__rank *rk, float *full, float *shard, int u, size_t flat) {
    return (float *)mgt__slice_at(rk, full, shard, u, flat, sizeof(float));
}

/* replicated key/value heads: each replica's k and v rows of c_attn hold the gradient of its own
   query heads only; summed over the kv group, in member order like every sum, once the DP
   reduction is done, so every replica updates alike. Under ZeRO each rank sums its slice (the
   group's members own the same slices: their layouts are alike). At most two calls a block: the
   weight's rows, the bias's. */
static mgt_result mgt__kv_grads(mgt__rank *rk) {
    int u, t, zero = rk->run->plan.zero;
    if (rk->kv_g.size == 1) return MGT_OK;
    for (u = 0; u < rk->lay.nu; u++) {
        size_t lo = rk->lay.u[u].offset, hi = lo + rk->lay.u[u].size;
        if (zero >= 1) mgt__unit_slice(rk, u, &lo, &hi);
        for (t = rk->lay.u[u].first_tensor; t < rk->lay.u[u].first_tensor + rk->lay.u[u].ntensors; t++) {
            const mgt__tensor *x = &rk->lay.t[t];
            size_t a = x->offset + x->kv_from, b = x->offset + mgt__tensor_storage(x);
            if (!x->kv_from) continue;
            a = a > lo ? a : lo;
            b = b < hi ? b : hi;
            if (a < b) MGT__TRY(mgt__all_reduce(rk, &rk->kv_g, mgt__slice_ptr(rk, rk->grads, zero >= 2 ? rk->gshard : NULL, u, a), b - a));
        }
    }
    return MGT_OK;
}

/* sequence parallelism: a norm runs on its TP rank's rows only, so its weight's and bias's gradients
   are partial on each TP rank; summed over TP once a step, after the DP reduction (its DP slice
   under ZeRO), in member order, so every TP rank updates them alike (the row-parallel biases need
   no sum: their gradients come from the gathered rows). One call per run of adjacent norm tensors
   (a block's ln_1, its ln_2, the head's ln_f), the padding between them included: zeros. */
static mgt_result mgt__sp_grads(mgt__rank *rk) {
    int u, t, last, zero = rk->run->plan.zero;
    if (!rk->shape.sp) return MGT_OK;
    for (u = 0; u < rk->lay.nu; u++) {
        size_t lo = rk->lay.u[u].offset, hi = lo + rk->lay.u[u].size;
        if (zero >= 1) mgt__unit_slice(rk, u, &lo, &hi);
        last = rk->lay.u[u].first_tensor + rk->lay.u[u].ntensors;
        for (t = rk->lay.u[u].first_tensor; t < last; t++) {
            size_t a, b;
            if (!rk->lay.t[t].sp_sum) continue;
            a = rk->lay.t[t].offset;
            while (t + 1 < last && rk->lay.t[t + 1].sp_sum) t++;
            b = rk->lay.t[t].offset + mgt__tensor_storage(&rk->lay.t[t]);
            a = a > lo ? a : lo;
            b = b < hi ? b : hi;
            if (a < b) MGT__TRY(mgt__all_reduce(rk, &rk->tp_g, mgt__slice_ptr(rk, rk->grads, zero >= 2 ? rk->gshard : NULL, u, a), b - a));
        }
    }
    return MGT_OK;
}

static mgt_result mgt__reduce_gradients(mgt__rank *rk) {
    const mgt_plan *p = &rk->run->plan;
    int u;
    /* the tied embedding: the first stage's and the last stage's wte gradients are one gradient */
    if (p->pp > 1 && p->dims.tied && (rk->first || rk->last)) {
        int t = rk->first ? 0 : mgt__t_head(rk); /* the embedding's wte, or the head's copy */
        MGT__TRY(mgt__all_reduce(rk, &rk->emb_g, mgt__G(rk, t), mgt__tensor_storage(&rk->lay.t[t])));
    }
    if (p->zero == 1) {
        for (u = 0; u < rk->lay.nu; u++) { /* in place: this rank's slice receives the sum */
            size_t lo, hi;
            mgt__unit_slice(rk, u, &lo, &hi);
            MGT__TRY(rk->comm->reduce_scatter(rk->comm, &rk->dp_g, rk->grads + rk->lay.u[u].offset, rk->grads + lo, hi - lo, MGT_F32));
        }
    } else if (p->zero >= 2) { /* the embedding and head units, kept whole for the tied embedding */
        MGT__TRY(mgt__block_grads_flush(rk, rk->gslot)); /* the older pending block first: the same order of additions */
        MGT__TRY(mgt__block_grads_flush(rk, 1 - rk->gslot));
        for (u = 0; u < rk->lay.nu; u++) {
            size_t s = rk->lay.u[u].size / (size_t)p->replicas;
            if (mgt__is_block_unit(rk, u)) continue;
            MGT__TRY(rk->comm->reduce_scatter(rk->comm, &rk->dp_g, rk->unit_grad[u], rk->rs_tmp, s, MGT_F32));
            rk->be->add_inplace(rk->be, rk->gshard + rk->lay.u[u].shard_offset, rk->rs_tmp, s);
        }
    }
    MGT__TRY(mgt__sp_grads(rk));
    return mgt__kv_grads(rk);
}

/* sum of squares of the gradients this rank counts: its DP slice of every unit, TP-replicated
   tensors on TP rank 0 only, replicated key/value rows on their kv group's first rank only, the
   tied copy of wte never: every parameter exactly once */
static double mgt__local_sumsq(mgt__rank *rk) {
    double sum = 0;
    int u, t, k = 0;
    for (u = 0; u < rk->lay.nu; u++) {
        size_t lo, hi;
        mgt__unit_slice(rk, u, &lo, &hi);
        for (t = rk->lay.u[u].first_tensor; t < rk->lay.u[u].first_tensor + rk->lay.u[u].ntensors; t++) {
            const mgt__tensor *x = &rk->lay.t[t];
            size_t a = x->offset > lo ? x->offset : lo, b = x->offset + mgt__tensor_storage(x) < hi ? x->offset + mgt__tensor_storage(x) : hi;
            if (x->kv_from && rk->kv_g.index != 0 && b > x->offset + x->kv_from) b = x->offset + x->kv_from > a ? x->offset + x->kv_from : a; /* replicas: the first */
            if (a >= b || x->tied_copy || (x->tp_replicated && rk->tpr != 0)) continue;
            if (rk->dstat) { /* listed, for one multi-tensor sum */
                rk->ss_x[k] = mgt__slice_ptr(rk, rk->grads, rk->run->plan.zero >= 2 ? rk->gshard : NULL, u, a);
                rk->ss_n[k++] = b - a;
                continue;
            }
            sum += rk->be->sum_squares(rk->be, mgt__slice_ptr(rk, rk->grads, rk->run->plan.zero >= 2 ? rk->gshard : NULL, u, a), b - a);
        }
    }
    if (rk->dstat) rk->be->sum_squares_many(rk->be, rk->dstat, k, rk->ss_x, rk->ss_n); /* into dstat[0], on the device */
    return sum;
}

/* GPU ranks: this rank's sum of squares (dstat[0]) summed over the world in member order on the device,
   and the step's loss (dstat[1]), copied to the host together: the step's one download */
static mgt_result mgt__device_stats(mgt__rank *rk, double *sumsq) {
    double host[2];
    (void)mgt__local_sumsq(rk);
    if (rk->world_g.size > 1) { /* each rank's double as 2 floats of raw bytes, then summed in member order */
        MGT__TRY(rk->comm->all_gather(rk->comm, &rk->world_g, rk->dstat, rk->dstat + 2, 2, MGT_F32));
        rk->be->sum_doubles(rk->be, rk->dstat, rk->dstat + 2, (size_t)rk->world_g.size, 0);
    }
    rk->be->download(rk->be, host, rk->dstat, sizeof host);
    *sumsq = host[0];
    rk->loss_sum = host[1];
    return MGT_OK;
}

/* the tensors of the next adamw_many call */
typedef struct mgt__adamw_batch {
    int count;
    float *param[MGT_ADAMW_BATCH], *m[MGT_ADAMW_BATCH], *v[MGT_ADAMW_BATCH], weight_decay[MGT_ADAMW_BATCH];
    void *copy[MGT_ADAMW_BATCH];
    const float *grad[MGT_ADAMW_BATCH];
    size_t n[MGT_ADAMW_BATCH];
    float lr, b1, b2, eps, grad_scale, bc1, bc2;
} mgt__adamw_batch;
static void mgt__adamw_flush(mgt__rank *rk, mgt__adamw_batch *bt) {
    if (bt->count)
        rk->be->adamw_many(rk->be, bt->count, bt->param, bt->copy, bt->grad, bt->m, bt->v, bt->n, bt->weight_decay, bt->lr, bt->b1, bt->b2, bt->eps,
                           bt->grad_scale, bt->bc1, bt->bc2);
    bt->count = 0;
}

/* AdamW on this rank's part (step: updates done before this one); grad_scale undoes the loss
   scale and applies clipping. 16-bit storage updates the fp32 master weights and writes the compute
   copy rounded from them; ZeRO 1/2 then all-gather the compute copy in the storage type. The tensors
   go to the backend MGT_ADAMW_BATCH at a time (one launch each on a GPU), and before each ZeRO 1/2
   all-gather, which reads what they wrote. */
static mgt_result mgt__optimizer_step(mgt__rank *rk, double lr, double grad_scale, int step) {
    const mgt_config *cfg = &rk->run->plan.cfg;
    const mgt_plan *p = &rk->run->plan;
    double b1 = cfg->train.beta1, b2 = cfg->train.beta2;
    float bc1 = (float)(1.0 - pow(b1, step + 1)), bc2 = (float)(1.0 - pow(b2, step + 1));
    int u, t, sharded = p->zero >= 1;
    mgt__adamw_batch bt;
    bt.count = 0;
    bt.lr = (float)lr; bt.b1 = (float)b1; bt.b2 = (float)b2; bt.eps = (float)cfg->train.eps; bt.grad_scale = (float)grad_scale; bt.bc1 = bc1; bt.bc2 = bc2;
    for (u = 0; u < rk->lay.nu; u++) {
        size_t lo = rk->lay.u[u].offset, hi = lo + rk->lay.u[u].size;
        if (sharded) mgt__unit_slice(rk, u, &lo, &hi);
        for (t = rk->lay.u[u].first_tensor; t < rk->lay.u[u].first_tensor + rk->lay.u[u].ntensors; t++) {
            const mgt__tensor *x = &rk->lay.t[t];
            size_t a = x->offset > lo ? x->offset : lo, b = x->offset + mgt__tensor_storage(x) < hi ? x->offset + mgt__tensor_storage(x) : hi;
            float *param, *grad, *m, *v;
            void *copy;
            if (a >= b) continue;
            copy = mgt__slice_at(rk, rk->params, p->zero >= 3 ? rk->pshard : NULL, u, a, rk->shape.elt);
            if (rk->master) param = mgt__slice_ptr(rk, rk->master, sharded ? rk->master : NULL, u, a);
            else { param = (float *)copy; copy = NULL; } /* fp32: the compute copy is the master */
            grad = mgt__slice_ptr(rk, rk->grads, p->zero >= 2 ? rk->gshard : NULL, u, a);
            m = mgt__slice_ptr(rk, rk->m, sharded ? rk->m : NULL, u, a);
            v = mgt__slice_ptr(rk, rk->v, sharded ? rk->v : NULL, u, a);
            bt.param[bt.count] = param; bt.copy[bt.count] = copy; bt.grad[bt.count] = grad; bt.m[bt.count] = m; bt.v[bt.count] = v;
            bt.n[bt.count] = b - a;
            bt.weight_decay[bt.count++] = x->decay ? (float)cfg->train.weight_decay : 0.0f;
            if (bt.count == MGT_ADAMW_BATCH) mgt__adamw_flush(rk, &bt);
        }
        if (p->zero == 1 || p->zero == 2) { /* every DP rank gets the updated unit back */
            size_t s = rk->lay.u[u].size / (size_t)p->replicas, e = rk->shape.elt;
            mgt__adamw_flush(rk, &bt);
            MGT__TRY(rk->comm->all_gather(rk->comm, &rk->dp_g, (char *)rk->params + lo * e, (char *)rk->params + rk->lay.u[u].offset * e, s, rk->be->dtype));
        }
    }
    mgt__adamw_flush(rk, &bt);
    return MGT_OK;
}

static void mgt__comm_delta(mgt_comm_stats *out, const mgt_comm_stats *now, const mgt_comm_stats *before) {
    int i;
    for (i = 0; i < MGT_COLL_COUNT; i++) {
        out->calls[i] = now->calls[i] - before->calls[i];
        out->bytes[i] = now->bytes[i] - before->bytes[i];
        out->seconds[i] = now->seconds[i] - before->seconds[i];
    }
}

/* the end of a rank's work: a GPU rank waits for its streams (the step's time is the devices' too)
   and reports the first failure of an op or a collective */
/* the warm-up's communicator: every call returns at once and moves nothing, so no NCCL kernel is in
   flight while the libraries' kernels load (see mgt__warm_up) */
static mgt_result mgt__quiet_all_reduce(mgt_comm *c, const mgt_group *g, void *buf, size_t n, int dt) {
    (void)c; (void)g; (void)buf; (void)n; (void)dt;
    return MGT_OK;
}
static mgt_result mgt__quiet_reduce_scatter(mgt_comm *c, const mgt_group *g, const void *s, void *r, size_t n, int dt) {
    (void)c; (void)g; (void)s; (void)r; (void)n; (void)dt;
    return MGT_OK;
}
static mgt_result mgt__quiet_all_gather(mgt_comm *c, const mgt_group *g, const void *s, void *r, size_t n, int dt) {
    (void)c; (void)g; (void)s; (void)r; (void)n; (void)dt;
    return MGT_OK;
}
static mgt_result mgt__quiet_broadcast(mgt_comm *c, const mgt_group *g, void *buf, size_t n, int dt, int root) {
    (void)c; (void)g; (void)buf; (void)n; (void)dt; (void)root;
    return MGT_OK;
}
static mgt_result mgt__quiet_send(mgt_comm *c, int peer, const void *buf, size_t n, int dt) {
    (void)c; (void)peer; (void)buf; (void)n; (void)dt;
    return MGT_OK;
}
static mgt_result mgt__quiet_recv(mgt_comm *c, int peer, void *buf, size_t n, int dt) {
    (void)c; (void)peer; (void)buf; (void)n; (void)dt;
    return MGT_OK;
}
static mgt_result mgt__quiet_sendrecv(mgt_comm *c, int sp, const void *s, int rp, void *r, size_t n, int dt) {
    (void)c; (void)sp; (void)s; (void)rp; (void)r; (void)n; (void)dt;
    return MGT_OK;
}
static mgt_result mgt__quiet_barrier(mgt_comm *c, const mgt_group *g) {
    (void)c; (void)g;
    return MGT_OK;
}
static mgt_comm mgt__quiet_comm(const mgt_comm *real) {
    mgt_comm q;
    memset(&q, 0, sizeof q);
    q.rank = real->rank;
    q.world = real->world;
    q.all_reduce = mgt__quiet_all_reduce;
    q.reduce_scatter = mgt__quiet_reduce_scatter;
    q.all_gather = mgt__quiet_all_gather;
    q.broadcast = mgt__quiet_broadcast;
    q.send = mgt__quiet_send;
    q.recv = mgt__quiet_recv;
    q.sendrecv = mgt__quiet_sendrecv;
    q.barrier = mgt__quiet_barrier;
    return q; /* defer and sync NULL: every call is complete when it returns */
}
static int mgt__comm_is_quiet(const mgt_comm *c) { return c->all_reduce == mgt__quiet_all_reduce; }

static mgt_result mgt__settle(mgt__rank *rk) {
    const mgt_run *r = rk->run;
    mgt_result comm = r->world_api->settle && !mgt__comm_is_quiet(rk->comm) ? r->world_api->settle(r->world, rk->comm) : MGT_OK;
    const char *e;
    if (rk->be->finish) rk->be->finish(rk->be);
    e = rk->be->error ? rk->be->error(rk->be) : NULL;
    /* the rank's own first fault comes first: a failed kernel also fails the communication after it */
    return e ? mgt__fail(MGT_ERROR_DEVICE, "%s", e) : comm;
}

/* one training step on this rank: the schedule, the reductions, the norm, the update. The loss is
   multiplied by the run's loss scale (1 but in fp16) before backward and the gradients divided by
   it in the update. A non-finite global norm (the same number on every rank) skips the update on
   every rank alike; the run decides what follows. */
/* update 0: the warm-up, a step without the optimizer (weights, moments and totals untouched) */
static mgt_result mgt__rank_train_step(mgt__rank *rk, const uint32_t *rows, int update) {
    struct mgt_run *run = rk->run;
    const mgt_plan *p = &run->plan;
    double t0 = mgt_now(), sumsq, norm, lr, clip = 1.0, loss_scale = run->loss_scale;
    float grad_scale = (float)loss_scale / ((float)run->plan.cfg.train.global_batch * (float)run->plan.cfg.model.seq_len);
    mgt_comm_stats before = rk->comm->stats;
    int u;
    rk->loss_sum = 0;
    rk->ring_s = 0; /* a forward-only pass since the last step used the ring too */
    if (rk->dstat) rk->be->zero(rk->be, rk->dstat, 2 * sizeof(double));
    if (p->zero < 2) rk->be->zero(rk->be, rk->grads, sizeof(float) * rk->lay.size);
    else {
        rk->be->zero(rk->be, rk->gshard, sizeof(float) * rk->shard);
        for (u = 0; u < rk->lay.nu; u++)
            if (!mgt__is_block_unit(rk, u)) rk->be->zero(rk->be, rk->unit_grad[u], sizeof(float) * rk->lay.u[u].size);
    }
    MGT__TRY(mgt__schedule(rk, rows, grad_scale));
    MGT__TRY(mgt__reduce_gradients(rk));
    MGT__TRY(mgt__comm_sync(rk, -1)); /* the deferred buckets and prefetches have arrived */
    if (rk->dstat) MGT__TRY(mgt__device_stats(rk, &sumsq));
    else {
        sumsq = mgt__local_sumsq(rk);
        if (rk->world_g.size > 1) MGT__TRY(mgt__sum_over(rk, &rk->world_g, &sumsq));
    }
    norm = sqrt(sumsq) / loss_scale;
    rk->norm = norm;
    rk->skipped = !isfinite(norm);
    if (!update) {
        MGT__TRY(mgt__settle(rk));
        memset(&rk->comm->stats, 0, sizeof rk->comm->stats); /* the steps' statistics start at zero */
        return MGT_OK;
    }
    if (!rk->skipped) {
        lr = mgt__lr_at(&run->plan.cfg, run->step);
        if (run->plan.cfg.train.grad_clip > 0 && norm > run->plan.cfg.train.grad_clip) clip = run->plan.cfg.train.grad_clip / (norm + 1e-6);
        MGT__TRY(mgt__optimizer_step(rk, lr, clip / loss_scale, run->step - run->skipped));
    }
    MGT__TRY(mgt__settle(rk));
    rk->step_s = mgt_now() - t0;
    mgt__comm_delta(&rk->step_comm, &rk->comm->stats, &before);
    /* the bubble: waiting for pipeline peers, the time in sends and receives but the ring of context
       parallelism's, which is communication. A communicator that times its calls when the step ends
       (NCCL) cannot tell them apart: with cp > 1 they all count as communication there */
    rk->bubble_s = rk->shape.cp == 1 ? rk->step_comm.seconds[MGT_COLL_SEND_RECV] : rk->comm->sync ? 0 : rk->step_comm.seconds[MGT_COLL_SEND_RECV] - rk->ring_s;
    rk->comm_s = 0;
    for (u = 0; u < MGT_COLL_COUNT; u++) rk->comm_s += rk->step_comm.seconds[u];
    rk->comm_s -= rk->bubble_s;
    rk->total_comm_s += rk->comm_s;
    rk->total_bubble_s += rk->bubble_s;
    rk->total_compute_s += rk->step_s - rk->comm_s - rk->bubble_s;
    return MGT_OK;
}

/* forward only over rows (count micro-batches of this DP rank): the summed loss on the last stage */
static mgt_result mgt__rank_forward_only(mgt__rank *rk, const uint32_t *rows, int micro_batches) {
    int m;
    rk->loss_sum = 0;
    if (rk->dstat) rk->be->zero(rk->be, rk->dstat + 1, sizeof(double));
    if (rk->shape.chunks > 1) /* interleaved: through the chunks in their order (validation's micro_batches are the step's) */
        MGT__TRY(mgt__run_pipe_actions(rk, rk->pipe[1], rk->npipe[1], rows, 0.0f));
    else
        for (m = 0; m < micro_batches; m++) MGT__TRY(mgt__micro_forward(rk, rows, m, 0.0f, 0, 1));
    if (rk->dstat && rk->last) rk->be->download(rk->be, &rk->loss_sum, rk->dstat + 1, sizeof(double)); /* one download */
    return mgt__settle(rk);
}



/* the rank of a replica (dpr x cp + cpr), TP rank and stage */
static mgt__rank *mgt__rank_at(mgt_run *r, int replica, int tpr, int ppr) { return &r->ranks[mgt_rank_at(replica, tpr, ppr, r->plan.replicas, r->plan.tp)]; }

/* the rank's communicator from its world, made on its own thread beside the others' (NCCL's group
   splits are collective) */
static mgt_result mgt__rank_connect(mgt__rank *rk) {
    mgt_run *r = rk->run;
    const mgt_group *groups[7];
    int i, s, dt = rk->be->dtype;
    char *buf;
    groups[0] = &rk->tp_g; groups[1] = &rk->dp_g; groups[2] = &rk->pp_g; groups[3] = &rk->emb_g; groups[4] = &rk->world_g; groups[5] = &rk->kv_g; groups[6] = &rk->cp_g;
    MGT__TRY(r->world_api->comm(r->world, rk->rank, rk->be, groups, 7, &rk->comm));
    if (!r->world_api->on_gpus) return MGT_OK;
    /* NCCL connects on first use, allocating and synchronising: one collective on every group and a
       send/receive with each pipeline neighbour and around the context-parallel ring, now, so that no
       step does anything for the first time */
    buf = (char *)rk->acts[0].resid[0]; /* at least two elements of the storage type */
    for (i = 0; i < 7; i++)
        if (groups[i]->size > 1 && groups[i]->ranks[groups[i]->index] == rk->rank) MGT__TRY(rk->comm->barrier(rk->comm, groups[i]));
    for (s = 0; s + 1 < r->plan.pp; s++) /* pairs in stage order: no cycle of waits */
        if (rk->ppr == s || rk->ppr == s + 1) {
            int peer = rk->pp_g.ranks[rk->ppr == s ? s + 1 : s];
            MGT__TRY(rk->comm->sendrecv(rk->comm, peer, buf, peer, buf + rk->be->elt, 1, dt));
        }
    if (rk->shape.chunks > 1 && r->plan.pp > 2 && (rk->first || rk->last)) { /* interleaved: the last stage also sends to the first, last */
        int peer = rk->pp_g.ranks[rk->first ? r->plan.pp - 1 : 0];
        MGT__TRY(rk->comm->sendrecv(rk->comm, peer, buf, peer, buf + rk->be->elt, 1, dt));
    }
    if (rk->cp_g.size > 1) /* the ring of attention (a CP group is one stage's: after the pipeline's pairs, no cycle of waits) */
        MGT__TRY(rk->comm->sendrecv(rk->comm, mgt__cp_next(rk), buf, mgt__cp_prev(rk), buf + rk->be->elt, 1, dt));
    if (r->world_api->settle) MGT__TRY(r->world_api->settle(r->world, rk->comm));
    memset(&rk->comm->stats, 0, sizeof rk->comm->stats); /* the steps' statistics start at zero */
    return MGT_OK;
}

static void mgt__enter(mgt_backend *be) { if (be->enter) be->enter(be); }

static mgt_result mgt__rank_run_cmd(mgt__rank *rk) {
    mgt_run *r = rk->run;
    mgt_result res;
    mgt__enter(rk->be);
    if (r->cmd == MGT__CMD_CONNECT) return mgt__rank_connect(rk);
    if (r->cmd != MGT__CMD_STEP && r->cmd != MGT__CMD_FORWARD && r->cmd != MGT__CMD_WARM_UP) return MGT_OK;
    /* a step: nothing is made or waited for without a deadline until its end (2: the warm-up step) */
    if (rk->be->step) rk->be->step(rk->be, r->cmd == MGT__CMD_WARM_UP ? 2 : 1);
    if (r->cmd == MGT__CMD_FORWARD) res = mgt__rank_forward_only(rk, r->cmd_rows, r->cmd_micro);
    else if (r->cmd == MGT__CMD_WARM_UP) {
        mgt_comm *real = rk->comm, quiet = mgt__quiet_comm(real);
        rk->comm = &quiet;
        res = mgt__rank_train_step(rk, r->cmd_rows, 0);
        rk->comm = real;
    } else res = mgt__rank_train_step(rk, r->cmd_rows, 1);
    if (rk->be->step) rk->be->step(rk->be, 0);
    return res;
}

static void *mgt__rank_main(void *arg) {
    mgt__rank *rk = (mgt__rank *)arg;
    mgt_run *r = rk->run;
    unsigned long seen = 0;
    for (;;) {
        int cmd;
        pthread_mutex_lock(&r->mu);
        while (r->generation == seen) pthread_cond_wait(&r->cv_cmd, &r->mu);
        seen = r->generation;
        cmd = r->cmd;
        pthread_mutex_unlock(&r->mu);
        if (cmd == MGT__CMD_QUIT) return NULL;
        rk->result = mgt__rank_run_cmd(rk);
        if (rk->result != MGT_OK) {
            mgt__strlcpy(rk->error, mgt_last_error(), sizeof rk->error);
            /* peers waiting on this rank fail instead of hanging */
            r->world_api->rank_failed(r->world, rk->comm);
        }
        pthread_mutex_lock(&r->mu);
        if (--r->pending == 0) pthread_cond_signal(&r->cv_done);
        pthread_mutex_unlock(&r->mu);
    }
}

/* under MPI, after each command: what the driver reads of a rank (its loss, norm, times, memory,
   communication, result), from every process to every process, so each one's driver sees the
   whole world as a single process's does */
typedef struct mgt__rank_report {
    double loss_sum, norm, step_s, comm_s, bubble_s, total_compute_s, total_comm_s, total_bubble_s;
    mgt_comm_stats step_comm, comm;
    size_t mem_current[MGT_MEM_COUNT], mem_peak[MGT_MEM_COUNT];
    int skipped, result, stop; /* stop: its process asked for one */
    char error[512];
} mgt__rank_report;

static mgt_result mgt__share_ranks(mgt_run *r) {
    int per = r->rank_hi - r->rank_lo, i;
    size_t bytes = sizeof(mgt__rank_report) * (size_t)per;
    mgt__rank_report *all, *mine;
    char why[512];
    if (r->processes == 1) return MGT_OK; /* one process has every rank's */
    all = (mgt__rank_report *)MGT_MALLOC(bytes * (size_t)r->processes);
    if (!all) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    for (i = r->rank_lo; i < r->rank_hi; i++) /* a failed rank fails the run now; its process ends the job */
        if (r->ranks[i].result != MGT_OK) { MGT_FREE(all); return MGT_OK; }
    mine = all + r->rank_lo;
    memset(mine, 0, bytes);
    for (i = 0; i < per; i++) {
        const mgt__rank *rk = &r->ranks[r->rank_lo + i];
        mgt__rank_report *o = &mine[i];
        o->loss_sum = rk->loss_sum;
        o->norm = rk->norm;
        o->step_s = rk->step_s;
        o->comm_s = rk->comm_s;
        o->bubble_s = rk->bubble_s;
        o->total_compute_s = rk->total_compute_s;
        o->total_comm_s = rk->total_comm_s;
        o->total_bubble_s = rk->total_bubble_s;
        o->step_comm = rk->step_comm;
        o->comm = rk->comm->stats;
        memcpy(o->mem_current, rk->be->mem_current, sizeof o->mem_current);
        memcpy(o->mem_peak, rk->be->mem_peak, sizeof o->mem_peak);
        o->skipped = rk->skipped;
        o->result = rk->result;
        o->stop = r->stop_asked;
        mgt__strlcpy(o->error, rk->error, sizeof o->error);
    }
    { /* to and from every other process, against parallel.timeout_s (a lost process is named) */
        mgt__mpi_world *w = r->procs;
        int n = 0, p, *peer = (int *)MGT_MALLOC(sizeof(int) * 2 * (size_t)w->processes);
        void **req = (void **)MGT_MALLOC(sizeof(void *) * 2 * (size_t)w->processes);
        char who[48];
        mgt_result res = peer && req ? MGT_OK : mgt__fail(MGT_ERROR_MEMORY, "out of memory");
        for (p = 0; p < w->processes && res == MGT_OK; p++) {
            if (p == w->process) continue;
            peer[n] = p * per;
            if (!(req[n++] = w->api->isend(mine, bytes, p, 0, MGT_MPI_STARTUP, why, sizeof why))) res = mgt__pcomm_fail(w, why);
            peer[n] = p * per;
            if (res == MGT_OK && !(req[n++] = w->api->irecv(all + (size_t)p * per, bytes, p, 0, MGT_MPI_STARTUP, why, sizeof why)))
                res = mgt__pcomm_fail(w, why);
        }
        snprintf(who, sizeof who, "process %d (on %s)", w->process, w->hosts[w->process]);
        if (res == MGT_OK) res = mgt__pcomm_wait(w, who, req, peer, n, "sharing the ranks' results after a step");
        else
            while (n-- > 0) if (req[n]) w->api->cancel(req[n]);
        MGT_FREE(peer);
        MGT_FREE(req);
        if (res != MGT_OK) { MGT_FREE(all); return res; }
    }
    for (i = 0; i < r->plan.world; i++) {
        mgt__rank *rk = &r->ranks[i];
        const mgt__rank_report *o = &all[i];
        if (o->stop) r->stop_agreed = 1;
        if (i >= r->rank_lo && i < r->rank_hi) continue;
        rk->loss_sum = o->loss_sum;
        rk->norm = o->norm;
        rk->step_s = o->step_s;
        rk->comm_s = o->comm_s;
        rk->bubble_s = o->bubble_s;
        rk->total_compute_s = o->total_compute_s;
        rk->total_comm_s = o->total_comm_s;
        rk->total_bubble_s = o->total_bubble_s;
        rk->step_comm = o->step_comm;
        rk->comm->stats = o->comm;
        memcpy(rk->be->mem_current, o->mem_current, sizeof o->mem_current);
        memcpy(rk->be->mem_peak, o->mem_peak, sizeof o->mem_peak);
        rk->skipped = o->skipped;
        rk->result = (mgt_result)o->result;
        if (o->result != MGT_OK)
            snprintf(rk->error, sizeof rk->error, "(process %d on %s) %s", i / per, r->procs->hosts[i / per], o->error);
    }
    MGT_FREE(all);
    return MGT_OK;
}

/* a rank of another process, as this one's driver sees it: its coordinates and what it reports */
static void mgt__shadow_rank(mgt_run *r, mgt__rank *rk, int index) {
    const mgt_plan *p = &r->plan;
    memset(rk, 0, sizeof *rk); /* run stays NULL: nothing of it is freed */
    mgt__rank_locate(rk, p, index);
    rk->device = r->world_api->on_gpus ? index % (r->rank_hi - r->rank_lo) : -1; /* its process's GPU, as this process's ranks have theirs */
    rk->be = &r->shadow_be[index];
    rk->be->name = "cpu";
    rk->comm = &r->shadow_comm[index];
    rk->comm->rank = index;
    rk->comm->world = p->world;
}

/* rank i's error, said as rank i's (once: a message that names the rank already is kept as it is) */
static mgt_result mgt__rank_fail(const mgt_run *r, int i) {
    char tag[32];
    int n = snprintf(tag, sizeof tag, "rank %d", i);
    const char *e = r->ranks[i].error;
    if (!strncmp(e, tag, (size_t)n) && (e[n] == ' ' || e[n] == ':')) return mgt__fail(r->ranks[i].result, "%s", e);
    return mgt__fail(r->ranks[i].result, "rank %d: %s", i, e);
}

/* runs the command on every rank (on the calling thread when there is one rank) and returns the
   first error, with the failing rank's message */
static mgt_result mgt__run_cmd(mgt_run *r, int cmd, const uint32_t *rows, int micro) {
    int i;
    r->cmd = cmd;
    r->cmd_rows = rows;
    r->cmd_micro = micro;
    if (r->plan.world == 1) {
        r->ranks[0].result = mgt__rank_run_cmd(&r->ranks[0]);
        return r->ranks[0].result;
    }
    pthread_mutex_lock(&r->mu);
    r->pending = r->rank_hi - r->rank_lo;
    r->generation++;
    pthread_cond_broadcast(&r->cv_cmd);
    while (r->pending) pthread_cond_wait(&r->cv_done, &r->mu);
    pthread_mutex_unlock(&r->mu);
    MGT__TRY(mgt__share_ranks(r));
    for (i = 0; i < r->plan.world; i++) /* a root cause rather than its echo on the peers */
        if (r->ranks[i].result != MGT_OK && r->ranks[i].result != MGT_ERROR_COMM) return mgt__rank_fail(r, i);
    for (i = 0; i < r->plan.world; i++)
        if (r->ranks[i].result != MGT_OK) return mgt__rank_fail(r, i);
    return MGT_OK;
}

/* the summed loss of the last stage, over DP and CP ranks in order: the same number whatever the layout */
static double mgt__gather_loss(mgt_run *r) {
    double sum = 0;
    int d;
    for (d = 0; d < r->plan.replicas; d++) sum += mgt__rank_at(r, d, 0, r->plan.pp - 1)->loss_sum;
    return sum;
}


MGTDEF const char *mgt_state_name(int state) {
    static const char *names[] = {"starting", "running", "paused", "evaluating", "checkpointing", "finished", "failed"};
    return state >= 0 && state <= MGT_STATE_FAILED ? names[state] : "?";
}

/* an event for readers (and the logger): validations, checkpoints, warnings */
MGT__PRINTF(3, 4) static void mgt__event(mgt_run *r, int level, const char *fmt, ...) {
    mgt_event e;
    va_list ap;
    memset(&e, 0, sizeof e);
    e.step = r->step;
    e.level = level;
    e.time_s = mgt_now() - r->created_s;
    va_start(ap, fmt);
    vsnprintf(e.text, sizeof e.text, fmt, ap);
    va_end(ap);
    mgt__log(level, "%s", e.text);
    pthread_mutex_lock(&r->stats_mu);
    if (r->events_n == r->events_cap) {
        int cap = r->events_cap ? 2 * r->events_cap : 64;
        mgt_event *p = (mgt_event *)MGT_REALLOC(r->events, sizeof *p * (size_t)cap);
        if (p) { r->events = p; r->events_cap = cap; }
    }
    if (r->events_n < r->events_cap) r->events[r->events_n++] = e;
    pthread_mutex_unlock(&r->stats_mu);
}

static double mgt__flops_per_token(const mgt_run *r) {
    return 6.0 * (double)r->plan.params + 12.0 * r->plan.cfg.model.n_layer * (double)r->plan.cfg.model.seq_len * r->plan.cfg.model.d_model;
}

/* MFU cannot pass 100%: a step faster than the peak MFU is reckoned against (a measured sgemm, taken
   on a busy machine or on one GEMM shape, or the preset's) proves the peak low. From then on MFU is
   against the fastest step of the run, and the first such step says so in an event. */
static void mgt__peak_check(mgt_run *r) {
    double stated = r->plan.cfg.parallel.peak_gflops > 0 ? r->plan.cfg.parallel.peak_gflops : r->peak_per_rank, now;
    if (stated <= 0 || r->step_s <= 0) return;
    now = (double)r->plan.cfg.train.global_batch * r->plan.cfg.model.seq_len / r->step_s * mgt__flops_per_token(r) * 1e-9 / r->plan.world;
    if (now <= stated || now <= r->peak_seen) return;
    if (r->peak_seen <= 0)
        mgt__event(r, MGT_LOG_WARN, "step %d ran at %.1f GFLOP/s per rank, above the peak MFU was reckoned against (%.1f, %s): MFU is against "
                   "the fastest step from now on", r->step, now, stated, r->plan.cfg.parallel.peak_gflops > 0 ? "[parallel] peak_gflops" : r->peak_source);
    r->peak_seen = now;
    snprintf(r->peak_seen_source, sizeof r->peak_seen_source, "the fastest step of this run, step %d", r->step);
}


/* GPU ranks, before their first step or forward pass: one untimed step without the optimizer or
   communication. CUDA loads a kernel at its first launch (lazy loading, the default since 12.2),
   which may synchronise the device while NCCL kernels spin waiting for peers that are loading too;
   mgt's own kernels are loaded when the backend is made, but cuBLAS's and cuDNN's can only be loaded
   by running them, which the warm-up does (step(be, 2): the step's rules, but loads allowed and
   waits of 10 x timeout_s, at least 120 s), so that no step loads anything. Its communicator is
   quiet (every call returns at once, moving nothing): no NCCL kernel is in flight while a kernel
   loads, and the values it computes (from unreduced, unreceived buffers) are thrown away. NCCL
   itself is connected already (mgt__rank_connect). */
static mgt_result mgt__warm_up(mgt_run *r, const uint32_t *rows) {
    double t0 = mgt_now();
    if (!r->world_api->on_gpus || r->warmed_up) return MGT_OK;
    r->warmed_up = 1;
    MGT__TRY(mgt__run_cmd(r, MGT__CMD_WARM_UP, rows, 0));
    mgt__event(r, MGT_LOG_INFO, "warm-up step (not counted): %.2f s, the libraries' kernels loaded", mgt_now() - t0);
    return MGT_OK;
}

static void mgt__fill_rank_stats(mgt_run *r, int i, mgt_rank_stats *o) {
    mgt__rank *rk = &r->ranks[i];
    int c;
    memset(o, 0, sizeof *o);
    o->step = r->step;
    o->rank = i;
    o->dp = rk->dpr;
    o->tp = rk->tpr;
    o->pp = rk->ppr;
    o->first_block = rk->l0;
    o->last_block = mgt__stage_layer(&r->plan, rk->ppr, rk->nblocks - 1); /* with pp_virtual > 1 the blocks between are not all its own */
    if (rk->device >= 0) snprintf(o->device, sizeof o->device, "cuda:%d", rk->device);
    else mgt__strlcpy(o->device, rk->be->name, sizeof o->device);
    o->gpu_util = rk->gpu.util_pct;
    o->gpu_power_w = rk->gpu.power_w;
    o->gpu_temp_c = rk->gpu.temp_c;
    o->gpu_mem_used = rk->gpu.memory_used;
    o->gpu_mem_total = rk->gpu.memory_total;
    o->has_gpu_util = rk->gpu.has_util;
    o->has_gpu_power = rk->gpu.has_power;
    o->has_gpu_temp = rk->gpu.has_temp;
    o->has_gpu_mem = rk->gpu.has_memory;
    o->step_s = rk->step_s;
    o->comm_s = rk->comm_s;
    o->bubble_s = rk->bubble_s;
    o->compute_s = rk->step_s - rk->comm_s - rk->bubble_s;
    o->total_compute_s = rk->total_compute_s;
    o->total_comm_s = rk->total_comm_s;
    o->total_bubble_s = rk->total_bubble_s;
    for (c = 0; c < MGT_COLL_COUNT; c++) {
        o->calls[c] = rk->step_comm.calls[c];
        o->bytes[c] = rk->step_comm.bytes[c];
        o->seconds[c] = rk->step_comm.seconds[c];
        o->total_calls[c] = rk->comm->stats.calls[c];
        o->total_bytes[c] = rk->comm->stats.bytes[c];
        o->total_seconds[c] = rk->comm->stats.seconds[c];
    }
    memcpy(o->mem_current, rk->be->mem_current, sizeof o->mem_current);
    memcpy(o->mem_peak, rk->be->mem_peak, sizeof o->mem_peak);
}

/* after each step: the run's statistics into the history, the ranks' into their table, and
   warnings about what a person would want to know */
static void mgt__publish(mgt_run *r) {
    mgt_stats st;
    int i, slowest = 0;
    double mean = 0;
    mgt_run_stats(r, &st);
    if (r->world_api->read_gpu && mgt_now() - r->gpu_read_s >= 0.5) { /* NVML's counters move slower than steps */
        for (i = r->rank_lo; i < r->rank_hi; i++) r->world_api->read_gpu(r->world, r->ranks[i].device, &r->ranks[i].gpu);
        r->gpu_read_s = mgt_now();
    }
    pthread_mutex_lock(&r->stats_mu);
    if (!r->history) r->history = (mgt_stats *)MGT_MALLOC(sizeof(mgt_stats) * MGT__HISTORY);
    if (r->history) r->history[r->history_n++ % MGT__HISTORY] = st;
    for (i = 0; i < r->plan.world; i++) mgt__fill_rank_stats(r, i, &r->rank_stats[i]);
    pthread_mutex_unlock(&r->stats_mu);
    for (i = 0; i < r->plan.world; i++) {
        double busy = r->ranks[i].step_s - r->ranks[i].comm_s - r->ranks[i].bubble_s;
        mean += busy / r->plan.world;
        if (busy > r->ranks[slowest].step_s - r->ranks[slowest].comm_s - r->ranks[slowest].bubble_s) slowest = i;
    }
    if (r->history && r->history_n >= 21) { /* a loss spike: well above the mean of the 20 steps before */
        double m = 0;
        for (i = r->history_n - 21; i < r->history_n - 1; i++) m += r->history[i % MGT__HISTORY].loss / 20.0;
        if (isfinite(st.loss) && st.loss > 1.5 * m && st.loss > m + 0.5) mgt__event(r, MGT_LOG_WARN, "step %d: loss spike: %.4f after a mean of %.4f", st.step, st.loss, m);
    }
    if (r->plan.world > 1 && mean > 0.01) {
        double busy = r->ranks[slowest].step_s - r->ranks[slowest].comm_s - r->ranks[slowest].bubble_s;
        if (busy > 1.5 * mean)
            mgt__event(r, MGT_LOG_WARN, "step %d: rank %d computed for %.1f ms, %.1fx the mean of %.1f ms (warned above 1.5x)", st.step, slowest, busy * 1e3,
                       busy / mean, mean * 1e3);
    }
}

MGTDEF void mgt_run_snapshot(const mgt_run *r, mgt_snapshot *s) {
    mgt_run *w = (mgt_run *)r; /* the lock is the only thing touched */
    int i, from;
    if (!s) return;
    s->state = MGT_STATE_FAILED;
    s->history_first = s->history_from;
    s->history_n = s->ranks_n = s->events_n = 0;
    if (!r) return;
    pthread_mutex_lock(&w->stats_mu);
    s->state = r->state;
    s->time_s = mgt_now() - r->created_s;
    from = s->history_from < r->history_n - MGT__HISTORY ? r->history_n - MGT__HISTORY : s->history_from; /* overwritten: the oldest kept */
    if (from < 0) from = 0;
    s->history_first = from;
    for (; s->history && from + s->history_n < r->history_n && s->history_n < s->history_max; s->history_n++)
        s->history[s->history_n] = r->history[(from + s->history_n) % MGT__HISTORY];
    s->ranks_n = r->plan.world;
    for (i = 0; s->ranks && i < s->ranks_max && i < r->plan.world; i++) s->ranks[i] = r->rank_stats[i];
    for (; s->events && s->events_from >= 0 && s->events_from + s->events_n < r->events_n && s->events_n < s->events_max; s->events_n++)
        s->events[s->events_n] = r->events[s->events_from + s->events_n];
    pthread_mutex_unlock(&w->stats_mu);
}
MGTDEF int mgt_run_state(const mgt_run *r) {
    int s;
    mgt_run *w = (mgt_run *)r;
    if (!r) return MGT_STATE_FAILED;
    pthread_mutex_lock(&w->stats_mu);
    s = r->state;
    pthread_mutex_unlock(&w->stats_mu);
    return s;
}
MGTDEF void mgt_run_set_state(mgt_run *r, int state) {
    if (!r) return;
    pthread_mutex_lock(&r->stats_mu);
    r->state = state;
    pthread_mutex_unlock(&r->stats_mu);
}

/* One step on every rank. A non-finite gradient norm skips the update on all ranks (they computed
   the same norm): fp16 halves the loss scale, and doubles it after loss_scale_window finite steps;
   bf16 and fp32 fail after max_skipped skipped steps in a row, fp16 when the scale would fall below 1.
   A skipped step still consumes its batch and counts as a step (the schedule and the data order do
   not depend on skips); AdamW's bias correction counts the updates. */
static mgt_result mgt__train_step(mgt_run *r, const uint32_t *rows) {
    double t0 = mgt_now();
    int GB = r->plan.cfg.train.global_batch, T = r->plan.cfg.model.seq_len, fp16 = r->dtype == MGT_F16;
    MGT__TRY(mgt__warm_up(r, rows));
    t0 = mgt_now();
    if (mgt_run_state(r) == MGT_STATE_STARTING) mgt_run_set_state(r, MGT_STATE_RUNNING);
    MGT__TRY(mgt__run_cmd(r, MGT__CMD_STEP, rows, 0));
    r->loss = mgt__gather_loss(r) / ((double)GB * T);
    r->grad_norm = r->ranks[0].norm;
    r->lr = mgt__lr_at(&r->plan.cfg, r->step);
    r->last_skipped = r->ranks[0].skipped;
    if (!r->last_skipped && !isfinite(r->loss)) {
        mgt__event(r, MGT_LOG_WARN, "step %d: loss %g is not finite", r->step + 1, r->loss);
        return mgt__fail(MGT_ERROR_NUMERIC, "step %d: loss %g with a finite gradient norm (lower [train] lr or raise warmup)", r->step + 1, r->loss);
    }
    r->step++;
    r->tokens_seen += (long long)GB * T;
    r->step_s = mgt_now() - t0;
    r->elapsed_s += r->step_s;
    mgt__peak_check(r);
    if (r->last_skipped) {
        double before = r->loss_scale;
        r->skipped++;
        r->skipped_in_row++;
        r->good_steps = 0;
        if (fp16) r->loss_scale = before / 2;
        mgt__publish(r);
        if (fp16)
            mgt__event(r, MGT_LOG_WARN, "step %d: gradient norm %g at loss scale %g: update skipped, loss scale now %g", r->step, r->grad_norm, before, r->loss_scale);
        else
            mgt__event(r, MGT_LOG_WARN, "step %d: gradient norm %g: update skipped (%d in a row)", r->step, r->grad_norm, r->skipped_in_row);
        if (fp16 && r->loss_scale < 1)
            return mgt__fail(MGT_ERROR_NUMERIC, "step %d: the gradients are not finite even at loss scale 1 (%d steps skipped in a row); lower [train] lr or raise warmup",
                             r->step, r->skipped_in_row);
        if (!fp16 && r->skipped_in_row >= r->plan.cfg.precision.max_skipped)
            return mgt__fail(MGT_ERROR_NUMERIC, "step %d: %d steps in a row with a non-finite gradient norm ([precision] max_skipped = %d); lower [train] lr or raise warmup",
                             r->step, r->skipped_in_row, r->plan.cfg.precision.max_skipped);
        return MGT_OK;
    }
    r->skipped_in_row = 0;
    if (fp16 && ++r->good_steps >= r->plan.cfg.precision.loss_scale_window && r->loss_scale < ldexp(1.0, 100)) { /* far below FLT_MAX: the float scale stays finite */
        r->loss_scale *= 2;
        r->good_steps = 0;
        mgt__event(r, MGT_LOG_INFO, "step %d: %d steps without overflow: loss scale now %g", r->step, r->plan.cfg.precision.loss_scale_window, r->loss_scale);
    }
    mgt__publish(r);
    return MGT_OK;
}

/* mean loss over `count` global batches of rows (count x global_batch, T+1), without training */
static mgt_result mgt__forward_loss(mgt_run *r, const uint32_t *rows, int count, double *loss) {
    int j, GB = r->plan.cfg.train.global_batch, T = r->plan.cfg.model.seq_len;
    double sum = 0;
    MGT__TRY(mgt__warm_up(r, rows));
    for (j = 0; j < count; j++) {
        MGT__TRY(mgt__run_cmd(r, MGT__CMD_FORWARD, rows + (size_t)j * GB * (T + 1), r->plan.micro_steps));
        sum += mgt__gather_loss(r);
    }
    *loss = sum / ((double)count * GB * T);
    return MGT_OK;
}

MGTDEF int mgt_run_profile(mgt_run *r, int on, double *family_seconds) {
    int i, steps = 0;
    if (family_seconds) memset(family_seconds, 0, sizeof(double) * MGT_SIM_FAMILIES);
    if (!r) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_profile: run is NULL"), -1;
    for (i = r->rank_lo; i < r->rank_hi; i++) {
        mgt_backend *be = r->ranks[i].be;
        int n;
        if (!be || !be->profile) continue;
        mgt__enter(be);
        n = be->profile(be, on, i == 0 ? family_seconds : NULL);
        if (n < 0) return mgt__fail(MGT_ERROR_DEVICE, "mgt_run_profile: rank %d: %s", i, be->error && be->error(be) ? be->error(be) : "failed"), -1;
        if (i == 0) steps = n;
    }
    return steps;
}

MGTDEF mgt_result mgt_run_loss(mgt_run *r, const uint32_t *rows, int count, double *loss) {
    if (!r || !rows || !loss || count < 1 || r->inference) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_loss: run, rows, count >= 1 and loss are required");
    return mgt__forward_loss(r, rows, count, loss);
}

MGTDEF mgt_result mgt_run_eval(mgt_run *r, double *val_loss) {
    int j, n, T, GB, state;
    uint32_t *rows;
    mgt_result res;
    if (!r || !val_loss) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_eval: run and val_loss are required");
    if (!r->has_val) return mgt__fail(MGT_ERROR_CONFIG, "[data] val is empty: set it to a validation shard");
    T = r->plan.cfg.model.seq_len;
    GB = r->plan.cfg.train.global_batch;
    n = r->plan.cfg.train.eval_batches * GB; /* the same sequences whatever the layout */
    rows = (uint32_t *)MGT_MALLOC(sizeof(uint32_t) * (size_t)n * (size_t)(T + 1));
    if (!rows) return mgt__fail(MGT_ERROR_MEMORY, "out of memory for validation batches");
    for (j = 0; j < n; j++) mgt__loader_sequence(&r->val, MGT__STREAM_VAL, 0, (uint64_t)j, rows + (size_t)j * (size_t)(T + 1));
    state = mgt_run_state(r);
    mgt_run_set_state(r, MGT_STATE_EVALUATING);
    res = mgt__forward_loss(r, rows, r->plan.cfg.train.eval_batches, &r->val_loss);
    mgt_run_set_state(r, state);
    MGT_FREE(rows);
    MGT__TRY(res);
    r->has_val_loss = 1;
    r->val_step = r->step;
    *val_loss = r->val_loss;
    pthread_mutex_lock(&r->stats_mu); /* the step was published before this validation: again, with it */
    if (r->history && r->history_n > 0 && r->history[(r->history_n - 1) % MGT__HISTORY].step == r->step) {
        mgt_stats st = r->history[(r->history_n - 1) % MGT__HISTORY];
        st.val_loss = r->val_loss;
        st.has_val_loss = 1;
        st.val_step = r->step;
        r->history[r->history_n++ % MGT__HISTORY] = st;
    }
    pthread_mutex_unlock(&r->stats_mu);
    mgt__event(r, MGT_LOG_INFO, "step %d: val loss %.4f", r->step, r->val_loss);
    return MGT_OK;
}

MGTDEF void mgt_run_stats(const mgt_run *r, mgt_stats *st) {
    int i, c;
    if (!st) return;
    memset(st, 0, sizeof *st);
    if (!r) return;
    st->step = r->step;
    st->steps = r->plan.cfg.train.steps;
    st->loss = r->loss;
    st->val_loss = r->val_loss;
    st->has_val_loss = r->has_val_loss;
    st->val_step = r->val_step;
    st->lr = r->lr;
    st->grad_norm = r->grad_norm;
    st->step_ms = r->step_s * 1e3;
    st->tokens_per_s = r->step_s > 0 ? (double)r->plan.cfg.train.global_batch * r->plan.cfg.model.seq_len / r->step_s : 0;
    st->samples_per_s = r->step_s > 0 ? (double)r->plan.cfg.train.global_batch / r->step_s : 0;
    st->flops_per_token = mgt__flops_per_token(r);
    st->gflops = st->tokens_per_s * st->flops_per_token * 1e-9;
    st->peak_gflops = (r->peak_seen > 0 ? r->peak_seen : r->plan.cfg.parallel.peak_gflops > 0 ? r->plan.cfg.parallel.peak_gflops : r->peak_per_rank) * r->plan.world;
    mgt__strlcpy(st->peak_source, r->peak_seen > 0 ? r->peak_seen_source : r->plan.cfg.parallel.peak_gflops > 0 ? "preset" : r->peak_per_rank > 0 ? r->peak_source : "",
                 sizeof st->peak_source);
    st->has_mfu = st->peak_gflops > 0 && st->gflops > 0; /* against the peak the preset states, or one measured */
    st->mfu = st->has_mfu ? st->gflops / st->peak_gflops : 0;
    st->tokens_seen = r->tokens_seen;
    st->params = r->plan.params;
    for (i = 0; i < r->plan.world; i++) /* the busiest rank: what a device must hold */
        for (c = 0; c < MGT_MEM_COUNT; c++) {
            if (r->ranks[i].be->mem_current[c] > st->mem_current[c]) st->mem_current[c] = r->ranks[i].be->mem_current[c];
            if (r->ranks[i].be->mem_peak[c] > st->mem_peak[c]) st->mem_peak[c] = r->ranks[i].be->mem_peak[c];
        }
    st->threads = r->threads_per_rank * r->plan.world;
    st->elapsed_s = r->elapsed_s;
    st->dtype = r->plan.cfg.precision.dtype;
    st->loss_scale = r->loss_scale;
    st->skipped_steps = r->skipped;
    st->step_skipped = r->last_skipped;
}
/* ==== end src/step.c ==== */
/* ==== begin src/tensorboard.c ==== */
#line 1 "src/tensorboard.c"
/* src/tensorboard.c - TensorBoard event files */
/* ---- TensorBoard event files: TFRecord framing around Event protocol buffers ----------------------
   A record is a little-endian uint64 length, the masked CRC-32C of those 8 bytes, the data, and the
   masked CRC-32C of the data. The data is an Event message: wall_time (field 1, double), step
   (field 2, varint), file_version (field 3, "brain.Event:2" in the first record), summary (field
   5): a Summary of repeated Value (field 1) {tag (field 1, string), simple_value (field 2, float)},
   session_log (field 7): {status (field 1): START = 1}, which makes TensorBoard drop the points of
   earlier files from its step on (a resumed run's). These few fields are what TensorBoard's scalar
   dashboard reads. */
#ifndef MGT_NO_TENSORBOARD
static uint32_t mgt__crc32c(const unsigned char *p, size_t n) {
    uint32_t c = 0xffffffffu;
    size_t i;
    int k;
    for (i = 0; i < n; i++) {
        c ^= p[i];
        for (k = 0; k < 8; k++) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u))); /* reflected Castagnoli */
    }
    return ~c;
}
static uint32_t mgt__crc_masked(const unsigned char *p, size_t n) { uint32_t c = mgt__crc32c(p, n); return ((c >> 15) | (c << 17)) + 0xa282ead8u; }

typedef struct mgt__pb { unsigned char b[4096]; size_t n; } mgt__pb; /* an encoded message; a step's scalars fit */
static void mgt__pb_bytes(mgt__pb *m, const void *p, size_t n) {
    if (m->n + n <= sizeof m->b) memcpy(m->b + m->n, p, n);
    m->n += n; /* past the end: the caller sees n > sizeof b and drops the record */
}
static void mgt__pb_varint(mgt__pb *m, uint64_t v) {
    unsigned char c[10];
    size_t k = 0;
    do { c[k++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0)); v >>= 7; } while (v);
    mgt__pb_bytes(m, c, k);
}
static void mgt__pb_le(mgt__pb *m, uint64_t v, int bytes) {
    unsigned char c[8];
    int k;
    for (k = 0; k < bytes; k++) c[k] = (unsigned char)(v >> (8 * k));
    mgt__pb_bytes(m, c, (size_t)bytes);
}
static void mgt__pb_lendelim(mgt__pb *m, int field, const void *p, size_t n) {
    mgt__pb_varint(m, (uint64_t)field << 3 | 2);
    mgt__pb_varint(m, n);
    mgt__pb_bytes(m, p, n);
}
static void mgt__tb_scalar(mgt__pb *summary, const char *tag, double value) {
    mgt__pb v;
    float f = (float)value;
    uint32_t bits;
    if (!isfinite(value)) return; /* TensorBoard would plot nan as a gap at best */
    v.n = 0;
    mgt__pb_lendelim(&v, 1, tag, strlen(tag));
    memcpy(&bits, &f, 4);
    mgt__pb_varint(&v, 2 << 3 | 5);
    mgt__pb_le(&v, bits, 4);
    if (v.n <= sizeof v.b) mgt__pb_lendelim(summary, 1, v.b, v.n);
}
/* one record of an Event with the given step and a file version, a summary or a session log */
static int mgt__tb_event(FILE *f, double wall_time, long long step, const char *file_version, const mgt__pb *summary, const mgt__pb *session_log) {
    mgt__pb e;
    uint64_t len, bits;
    unsigned char head[12], tail[4];
    uint32_t crc;
    int k;
    e.n = 0;
    memcpy(&bits, &wall_time, 8);
    mgt__pb_varint(&e, 1 << 3 | 1);
    mgt__pb_le(&e, bits, 8);
    mgt__pb_varint(&e, 2 << 3 | 0);
    mgt__pb_varint(&e, (uint64_t)step);
    if (file_version) mgt__pb_lendelim(&e, 3, file_version, strlen(file_version));
    if (summary) mgt__pb_lendelim(&e, 5, summary->b, summary->n);
    if (session_log) mgt__pb_lendelim(&e, 7, session_log->b, session_log->n);
    if (e.n > sizeof e.b) return 0;
    len = e.n;
    for (k = 0; k < 8; k++) head[k] = (unsigned char)(len >> (8 * k));
    crc = mgt__crc_masked(head, 8);
    for (k = 0; k < 4; k++) head[8 + k] = (unsigned char)(crc >> (8 * k));
    if (fwrite(head, 1, 12, f) != 12 || fwrite(e.b, 1, e.n, f) != e.n) return 0;
    crc = mgt__crc_masked(e.b, e.n);
    for (k = 0; k < 4; k++) tail[k] = (unsigned char)(crc >> (8 * k));
    return fwrite(tail, 1, 4, f) == 4 && fflush(f) == 0;
}

static mgt_result mgt__tensorboard_open(mgt_run *r) {
    char path[MGT_STR_MAX + 160], host[64] = "localhost";
    if (r->tensorboard) { fclose(r->tensorboard); r->tensorboard = NULL; }
    if (!r->plan.cfg.log.tensorboard[0]) return MGT_OK;
    MGT__TRY(mgt_mkdirs(r->plan.cfg.log.tensorboard));
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    /* TensorBoard reads every events.out.tfevents.* of the folder: a resumed run adds its own file */
    snprintf(path, sizeof path, "%s/events.out.tfevents.%lld.%s.%ld.mgt", r->plan.cfg.log.tensorboard, (long long)time(NULL), host, (long)getpid());
    r->tensorboard = fopen(path, "wb");
    if (!r->tensorboard) return mgt__fail(MGT_ERROR_IO, "%s: cannot create: %s ([log] tensorboard)", path, strerror(errno));
    if (!mgt__tb_event(r->tensorboard, (double)time(NULL), r->step, "brain.Event:2", NULL, NULL))
        return mgt__fail(MGT_ERROR_IO, "%s: cannot write: %s ([log] tensorboard)", path, strerror(errno));
    if (r->resumed) { /* SessionLog{status: START} at the next step: TensorBoard drops the earlier files' points from there on,
                         which the resumed run trains again */
        mgt__pb start;
        start.n = 0;
        mgt__pb_varint(&start, 1 << 3 | 0);
        mgt__pb_varint(&start, 1);
        if (!mgt__tb_event(r->tensorboard, (double)time(NULL), r->step + 1, NULL, NULL, &start))
            return mgt__fail(MGT_ERROR_IO, "%s: cannot write: %s ([log] tensorboard)", path, strerror(errno));
    }
    return MGT_OK;
}

/* the scalars of a logged step (train_line) or a validation, as metrics.jsonl's lines hold them */
static void mgt__tensorboard_step(mgt_run *r, const mgt_stats *st, int train_line, int eval_line) {
    mgt__pb sum;
    struct timespec now;
    int c;
    if (!r->tensorboard) return;
    sum.n = 0;
    if (train_line) {
        size_t peak = 0;
        mgt__tb_scalar(&sum, "train/loss", st->loss);
        mgt__tb_scalar(&sum, "train/lr", st->lr);
        mgt__tb_scalar(&sum, "train/grad_norm", st->grad_norm);
        mgt__tb_scalar(&sum, "perf/tokens_per_s", st->tokens_per_s);
        mgt__tb_scalar(&sum, "perf/step_s", st->step_ms / 1e3);
        if (st->has_mfu) mgt__tb_scalar(&sum, "perf/mfu", st->mfu);
        for (c = 0; c < MGT_MEM_COUNT; c++) peak += st->mem_peak[c];
        mgt__tb_scalar(&sum, "memory/peak_bytes", (double)peak);
        if (r->dtype == MGT_F16) mgt__tb_scalar(&sum, "train/loss_scale", st->loss_scale);
        if (r->plan.world > 1) { /* rank 0's time inside each kind of collective in the last step */
            mgt_rank_stats rs;
            char tag[64];
            mgt__fill_rank_stats(r, 0, &rs);
            for (c = 0; c < MGT_COLL_COUNT; c++)
                if (rs.calls[c]) { snprintf(tag, sizeof tag, "comm/%s_s", mgt_coll_name(c)); mgt__tb_scalar(&sum, tag, rs.seconds[c]); }
        }
    }
    if (eval_line) mgt__tb_scalar(&sum, "eval/val_loss", st->val_loss);
    clock_gettime(CLOCK_REALTIME, &now);
    if (sum.n > sizeof sum.b || !mgt__tb_event(r->tensorboard, (double)now.tv_sec + now.tv_nsec * 1e-9, st->step, NULL, &sum, NULL)) {
        mgt__event(r, MGT_LOG_WARN, "step %d: cannot write the TensorBoard events of [log] tensorboard = %s: %s; training goes on without them", st->step,
                   r->plan.cfg.log.tensorboard, strerror(errno));
        fclose(r->tensorboard);
        r->tensorboard = NULL;
    }
}

#else /* MGT_NO_TENSORBOARD: the writer is left out, and a run that asks for it refused */
static mgt_result mgt__tensorboard_open(mgt_run *r) {
    if (!r->plan.cfg.log.tensorboard[0]) return MGT_OK;
    return mgt__fail(MGT_ERROR_CONFIG, "[log] tensorboard = %s, but this program was built with MGT_NO_TENSORBOARD (no TensorBoard writer): "
                     "leave the key empty, or build without the switch", r->plan.cfg.log.tensorboard);
}
static void mgt__tensorboard_step(mgt_run *r, const mgt_stats *st, int train_line, int eval_line) {
    (void)r, (void)st, (void)train_line, (void)eval_line;
}
#endif /* MGT_NO_TENSORBOARD */
/* ==== end src/tensorboard.c ==== */
/* ==== begin src/metrics.c ==== */
#line 1 "src/metrics.c"
/* src/metrics.c - metrics.jsonl: a line per logged step and validation, cut back to the resumed
   step and read back as the dashboard's history when a run resumes in its folder */
/* metrics.jsonl of a run resumed from its own folder: the lines of steps after the resumed one
   were trained again, so they go, as does a last line a killed run left unfinished (written to a
   temporary file and renamed over it) */
static mgt_result mgt__metrics_truncate(const char *path, int step) {
    char tmp[sizeof(((mgt_run *)0)->metrics_path) + 8], line[1 << 14];
    FILE *in, *out;
    struct stat st;
    int ok = 1, keep = 1, at_start = 1;
    if (stat(path, &st) || !S_ISREG(st.st_mode)) return MGT_OK; /* none yet, or not a file (a pipe, /dev/null) */
    in = fopen(path, "r");
    if (!in) return mgt__fail(MGT_ERROR_IO, "%s: cannot read: %s", path, strerror(errno));
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    out = fopen(tmp, "w");
    if (!out) { fclose(in); return mgt__fail(MGT_ERROR_IO, "%s: cannot create: %s", tmp, strerror(errno)); }
    while (fgets(line, sizeof line, in)) {
        size_t len = strlen(line);
        int whole = len > 0 && line[len - 1] == '\n', s;
        if (at_start) { /* a line's step decides for it and its continuations (lines longer than the buffer) */
            const char *at = strstr(line, "\"step\":");
            keep = line[0] == '{' && at && sscanf(at, "\"step\":%d", &s) == 1 && s <= step;
        }
        if (!whole && feof(in)) break; /* the unfinished last line of a killed run */
        if (keep) ok &= fputs(line, out) >= 0;
        at_start = whole;
    }
    ok &= !ferror(in);
    fclose(in);
    ok &= fflush(out) == 0 && fsync(fileno(out)) == 0;
    ok &= fclose(out) == 0;
    if (!ok || rename(tmp, path)) {
        int e = errno;
        remove(tmp);
        return mgt__fail(MGT_ERROR_IO, "%s: cannot rewrite for the resumed step %d: %s", path, step, strerror(e));
    }
    return MGT_OK;
}

/* number `key` of a metrics.jsonl line into *v; 0 when the line has none */
static int mgt__jsonl_number(const char *line, const char *key, double *v) {
    char pat[48];
    const char *at;
    snprintf(pat, sizeof pat, "\"%s\":", key);
    return (at = strstr(line, pat)) != NULL && sscanf(at + strlen(pat), "%lf", v) == 1;
}
/* A run resumed in its own folder: the steps its metrics.jsonl holds (up to the resumed step) as
   the first of its published history, so that a reader (the dashboard) draws the whole run and
   its smoothed loss goes on rather than restarting at the resumed step. */
static void mgt__history_from_metrics(mgt_run *r) {
    char line[1 << 12];
    FILE *f = fopen(r->metrics_path, "r");
    if (!f) return;
    pthread_mutex_lock(&r->stats_mu);
    if (!r->history) r->history = (mgt_stats *)MGT_MALLOC(sizeof(mgt_stats) * MGT__HISTORY);
    while (r->history && fgets(line, sizeof line, f)) {
        double v;
        mgt_stats st, *last = r->history_n ? &r->history[(r->history_n - 1) % MGT__HISTORY] : NULL;
        if (!strncmp(line, "{\"type\":\"eval\",", 15) && last && mgt__jsonl_number(line, "step", &v) && (int)v == last->step &&
            mgt__jsonl_number(line, "val_loss", &last->val_loss)) {
            last->has_val_loss = 1, last->val_step = last->step;
            continue;
        }
        if (strncmp(line, "{\"type\":\"train\",", 16) || !mgt__jsonl_number(line, "step", &v)) continue;
        memset(&st, 0, sizeof st);
        st.step = (int)v, st.steps = r->plan.cfg.train.steps;
        mgt__jsonl_number(line, "loss", &st.loss);
        mgt__jsonl_number(line, "lr", &st.lr);
        mgt__jsonl_number(line, "grad_norm", &st.grad_norm);
        mgt__jsonl_number(line, "tokens_per_s", &st.tokens_per_s);
        st.samples_per_s = st.tokens_per_s / r->plan.cfg.model.seq_len;
        if (mgt__jsonl_number(line, "step_s", &v)) st.step_ms = v * 1e3;
        st.has_mfu = mgt__jsonl_number(line, "mfu", &st.mfu);
        if (mgt__jsonl_number(line, "tokens", &v)) st.tokens_seen = (long long)v;
        if (last && last->has_val_loss) st.has_val_loss = 1, st.val_loss = last->val_loss, st.val_step = last->val_step;
        r->history[r->history_n++ % MGT__HISTORY] = st;
    }
    pthread_mutex_unlock(&r->stats_mu);
    fclose(f);
}
/* a program that embeds mgt writes no metrics unless asked: empty (the default) and "none" are off */
static int mgt__metrics_on(const mgt_config *c) { return c->log.metrics[0] && strcmp(c->log.metrics, "none"); }
static mgt_result mgt__open_metrics(mgt_run *r) {
    char folder[sizeof r->metrics_path];
    char *slash;
    int continues = r->resumed && !r->resumed_elsewhere; /* the file holds this history up to the resumed step */
    if (r->metrics) { fclose(r->metrics); r->metrics = NULL; }
    MGT__TRY(mgt__tensorboard_open(r));
    if (!mgt__metrics_on(&r->plan.cfg)) return MGT_OK;
    mgt__strlcpy(folder, r->metrics_path, sizeof folder);
    slash = strrchr(folder, '/');
    if (slash && slash != folder) { *slash = 0; MGT__TRY(mgt_mkdirs(folder)); }
    /* a new run, or one resumed from another folder, starts a new file */
    if (continues) MGT__TRY(mgt__metrics_truncate(r->metrics_path, r->step));
    if (continues) mgt__history_from_metrics(r);
    r->metrics = fopen(r->metrics_path, continues ? "a" : "w");
    if (!r->metrics) return mgt__fail(MGT_ERROR_IO, "%s: cannot open for writing: %s", r->metrics_path, strerror(errno));
    if (r->plan.cfg.parallel.layout == MGT_LAYOUT_AUTO) { /* each start of the run says the layout parallel.layout = auto chose for it */
        const mgt_config *c = &r->plan.cfg;
        char schedule[16], recompute[16];
        mgt_config_value_string(c, mgt__find_key("parallel", "pp_schedule"), schedule, sizeof schedule);
        mgt_config_value_string(c, mgt__find_key("train", "recompute"), recompute, sizeof recompute);
        fprintf(r->metrics, "{\"type\":\"layout\",\"step\":%d,\"chosen\":\"auto\",\"dp\":%d,\"cp\":%d,\"tp\":%d,\"pp\":%d,\"zero\":%d,\"pp_schedule\":\"%s\","
                "\"micro_batch\":%d,\"recompute\":\"%s\"}\n", r->step, c->parallel.dp, c->parallel.cp, c->parallel.tp, c->parallel.pp, c->parallel.zero, schedule,
                c->train.micro_batch, recompute);
        fflush(r->metrics);
    }
    return MGT_OK;
}

/* a JSON number, or null where it is not finite (JSON has no inf or nan) */
static void mgt__json_number(FILE *f, const char *key, const char *fmt, double v) {
    fprintf(f, ",\"%s\":", key);
    if (isfinite(v)) fprintf(f, fmt, v);
    else fputs("null", f);
}

/* metrics.jsonl: one JSON object a line, each with a "type" (README, "metrics.jsonl"):
   train (a logged step), eval (a validation), ranks (per-rank figures of a logged step) */
static mgt_result mgt__metrics_line(mgt_run *r, int train_line, int eval_line) {
    mgt_stats st;
    FILE *f = r->metrics;
    double elapsed = mgt_now() - r->created_s;
    size_t peak = 0;
    int c;
    if (!train_line && !eval_line) return MGT_OK;
    mgt_run_stats(r, &st);
    mgt__tensorboard_step(r, &st, train_line, eval_line);
    if (!f) return MGT_OK;
    for (c = 0; c < MGT_MEM_COUNT; c++) peak += st.mem_peak[c];
    if (train_line) {
        fprintf(f, "{\"type\":\"train\",\"step\":%d", st.step);
        mgt__json_number(f, "loss", "%.6f", st.loss);
        mgt__json_number(f, "lr", "%.6e", st.lr);
        mgt__json_number(f, "grad_norm", "%.6f", st.grad_norm);
        if (st.step_skipped) fputs(",\"skipped\":true", f);
        if (r->dtype == MGT_F16) mgt__json_number(f, "loss_scale", "%g", st.loss_scale);
        fprintf(f, ",\"tokens\":%lld", st.tokens_seen);
        mgt__json_number(f, "tokens_per_s", "%.1f", st.tokens_per_s);
        mgt__json_number(f, "step_s", "%.6f", st.step_ms / 1e3);
        if (st.has_mfu) mgt__json_number(f, "mfu", "%.4f", st.mfu);
        fprintf(f, ",\"mem_peak\":%zu", peak);
        mgt__json_number(f, "elapsed_s", "%.3f", elapsed);
        fputs("}\n", f);
    }
    if (train_line && r->plan.world > 1) {
        int i;
        fprintf(f, "{\"type\":\"ranks\",\"step\":%d", st.step);
        mgt__json_number(f, "elapsed_s", "%.3f", elapsed);
        fputs(",\"ranks\":[", f);
        for (i = 0; i < r->plan.world; i++) {
            mgt_rank_stats rs;
            mgt__fill_rank_stats(r, i, &rs);
            fprintf(f, "%s{\"rank\":%d,\"dp\":%d,\"tp\":%d,\"pp\":%d,\"step_s\":%.6f,\"compute_s\":%.6f,\"comm_s\":%.6f,\"bubble_s\":%.6f,\"comm\":{",
                    i ? "," : "", i, rs.dp, rs.tp, rs.pp, rs.step_s, rs.compute_s, rs.comm_s, rs.bubble_s);
            for (c = 0; c < MGT_COLL_COUNT; c++)
                fprintf(f, "%s\"%s\":{\"calls\":%lld,\"bytes\":%.0f,\"s\":%.6f}", c ? "," : "", mgt_coll_name(c), rs.calls[c], rs.bytes[c], rs.seconds[c]);
            fputs("},\"mem_peak\":{", f);
            for (c = 0; c < MGT_MEM_COUNT; c++) fprintf(f, "%s\"%s\":%zu", c ? "," : "", mgt_mem_category_name(c), rs.mem_peak[c]);
            fputs("}}", f);
        }
        fputs("]}\n", f);
    }
    if (eval_line) {
        fprintf(f, "{\"type\":\"eval\",\"step\":%d", st.step);
        mgt__json_number(f, "val_loss", "%.6f", st.val_loss);
        fprintf(f, ",\"tokens\":%lld", st.tokens_seen);
        mgt__json_number(f, "elapsed_s", "%.3f", elapsed);
        fputs("}\n", f);
    }
    if (fflush(f) || ferror(f)) { /* metrics are a record of the run, not the run: warn once and train on */
        mgt__event(r, MGT_LOG_WARN, "step %d: cannot write %s: %s; training goes on without metrics lines", st.step, r->metrics_path, strerror(errno));
        fclose(f);
        r->metrics = NULL;
    }
    return MGT_OK;
}
/* ==== end src/metrics.c ==== */
/* ==== begin src/folder.c ==== */
#line 1 "src/folder.c"
/* src/folder.c - a run's folder: its checkpoint files (named, listed, pruned, the newest found),
   its lock and the claim that opens its metrics, the preset a checkpoint stores */
/* the step of a checkpoint's file name, which must be exactly what mgt writes (step_%08d.safetensors:
   the folder check and pruning delete files by that name) */
static int mgt__checkpoint_step(const char *name) {
    char canonical[48];
    int step, len = 0;
    if (sscanf(name, "step_%d.safetensors%n", &step, &len) != 1 || len != (int)strlen(name) || step < 0) return -1;
    snprintf(canonical, sizeof canonical, "step_%08d.safetensors", step);
    return strcmp(canonical, name) ? -1 : step;
}

/* what the run holding lock file fd wrote of itself ("process 4242 on host (mgt train ...)"), one line */
static void mgt__lock_owner(int fd, char *owner, size_t cap) {
    ssize_t got = pread(fd, owner, cap - 1, 0);
    owner[got > 0 ? got : 0] = 0;
    owner[strcspn(owner, "\n")] = 0;
}
/* whether another process's run holds folder dir (its mgt.lock locked), that run in owner */
static int mgt__folder_held(const char *dir, char *owner, size_t cap) {
    char lock_path[1100];
    int fd, held = 0, pid = 0;
    snprintf(lock_path, sizeof lock_path, "%s/mgt.lock", dir);
    owner[0] = 0;
    if ((fd = open(lock_path, O_RDONLY | O_CLOEXEC)) < 0) return 0;
    if (flock(fd, LOCK_SH | LOCK_NB) == 0) flock(fd, LOCK_UN);
    else if ((held = errno == EWOULDBLOCK)) mgt__lock_owner(fd, owner, cap);
    close(fd);
    if (sscanf(owner, "process %d", &pid) == 1 && pid == (int)getpid()) held = 0; /* this process's own run */
    return held;
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
    if (best < 0) {
        char hf[1100];
        struct stat st;
        snprintf(hf, sizeof hf, "%s/config.json", dir);
        if (stat(hf, &st) == 0)
            return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: a Hugging Face model folder (config.json), not mgt's checkpoints (step_*.safetensors): "
                             "start a run from its weights with [model] init = %s (--set model.init=%s)", dir, dir, dir);
        if (mgt__folder_held(dir, hf, sizeof hf))
            return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: no checkpoints (step_*.safetensors) in this folder yet: it is in use by a run that has "
                             "written none: %s; wait for its first checkpoint or its end", dir, hf[0] ? hf : "a process that left no name");
        return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: no checkpoints (step_*.safetensors) in this folder", dir);
    }
    snprintf(path, cap, "%s/step_%08d.safetensors", dir, best);
    return MGT_OK;
}

/* the run id stored in a checkpoint (its header only is read); "" when it has none or is unreadable */
static void mgt__checkpoint_run_id(const char *path, char *id, size_t cap) {
    mgt__st_file f;
    const char *v;
    id[0] = 0;
    if (mgt__st_read(&f, path, 1) != MGT_OK) return;
    v = mgt__st_meta(&f, "run_id");
    if (v) mgt__strlcpy(id, v, cap);
    mgt__st_close(&f);
}

/* Whose history a checkpoint in the run's folder is: the run's own when it has the run's id and a
   step in [first, last], where first is 0 for a new run or one resumed from this folder, and the
   resumed step for a run resumed from another folder (what this folder held before then is
   another line of history, even with the same id); last is the run's step. */
typedef struct mgt__history { const char *run_id; int first, last; } mgt__history;
static mgt__history mgt__own_history(const mgt_run *r) {
    mgt__history h;
    h.run_id = r->run_id;
    h.first = r->resumed_elsewhere ? r->step : 0;
    h.last = r->step;
    return h;
}

/* the steps of the checkpoints in dir, newest first, in a growing array the caller frees; mine: 1
   keeps only those of history h, 0 only the others; returns the count, or -1 out of memory */
static int mgt__list_checkpoints(const char *dir, const mgt__history *h, int mine, int **steps) {
    int n = 0, cap = 0, i, j;
    DIR *d = opendir(dir);
    struct dirent *e;
    *steps = NULL;
    if (!d) return 0;
    while ((e = readdir(d))) {
        char path[1200], id[40];
        int s = mgt__checkpoint_step(e->d_name);
        if (s < 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        mgt__checkpoint_run_id(path, id, sizeof id);
        if ((!strcmp(id, h->run_id) && s >= h->first && s <= h->last) != mine) continue;
        if (n == cap) {
            int *grown = (int *)MGT_REALLOC(*steps, sizeof(int) * (size_t)(cap = cap ? 2 * cap : 64));
            if (!grown) { closedir(d); MGT_FREE(*steps); *steps = NULL; return -1; }
            *steps = grown;
        }
        (*steps)[n++] = s;
    }
    closedir(d);
    for (i = 1; i < n; i++)
        for (j = i; j > 0 && (*steps)[j] > (*steps)[j - 1]; j--) { int t = (*steps)[j]; (*steps)[j] = (*steps)[j - 1]; (*steps)[j - 1] = t; }
    return n;
}

/* checkpoint.keep: the newest of this run's checkpoints stay; another run's are never touched */
static void mgt__prune_checkpoints(const mgt_run *r) {
    mgt__history h = mgt__own_history(r);
    int *steps, n = mgt__list_checkpoints(r->dir, &h, 1, &steps), i;
    for (i = r->plan.cfg.checkpoint.keep; i < n; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/step_%08d.safetensors", r->dir, steps[i]);
        remove(path);
    }
    MGT_FREE(steps);
}

/* The run's folder holds one line of history: another's checkpoints (another run's, this run's
   from after the step it resumed, or any the folder held before a run resumed from elsewhere
   came) would be taken by --resume latest and pruned alike. Refuses such a folder, or with
   overwrite deletes them (listing again until none is left). */
static mgt_result mgt__check_folder(mgt_run *r, const mgt__history *h, int resumed, int overwrite) {
    char where[300];
    for (;;) {
        int *steps, n = mgt__list_checkpoints(r->dir, h, 0, &steps), i;
        if (n < 0) return mgt__fail(MGT_ERROR_MEMORY, "out of memory listing %s", r->dir);
        if (n == 0) return MGT_OK;
        if (!overwrite) {
            char list[200] = "";
            for (i = n - 1; i >= 0 && strlen(list) < 120; i--)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%sstep_%08d", list[0] ? ", " : "", steps[i]);
            if (i >= 0) snprintf(list + strlen(list), sizeof list - strlen(list), ", ...");
            MGT_FREE(steps);
            mgt__where(&r->plan.cfg, mgt__find_key("checkpoint", "dir"), where, sizeof where);
            if (resumed)
                return mgt__fail(MGT_ERROR_CONFIG, "%s: checkpoint folder %s holds %d checkpoint%s of another run, of another line of this run's history or "
                                 "of steps after %d (%s); training on from step %d would mix two histories: give this run another [checkpoint] dir, "
                                 "or add --overwrite to delete them", where, r->dir, n, n == 1 ? "" : "s", h->last, list, h->last);
            return mgt__fail(MGT_ERROR_CONFIG, "%s: checkpoint folder %s already holds %d checkpoint%s of another run (%s); continue that run with "
                             "--resume latest, train into another [checkpoint] dir, or add --overwrite to delete them and start afresh",
                             where, r->dir, n, n == 1 ? "" : "s", list);
        }
        for (i = 0; i < n; i++) {
            char path[1200];
            snprintf(path, sizeof path, "%s/step_%08d.safetensors", r->dir, steps[i]);
            if (remove(path)) {
                int e = errno;
                MGT_FREE(steps);
                return mgt__fail(MGT_ERROR_IO, "%s: cannot delete (--overwrite): %s", path, strerror(e));
            }
            mgt__log(MGT_LOG_INFO, "--overwrite: deleted %s", path);
        }
        MGT_FREE(steps);
    }
}

/* the lock file's text: who holds the folder, on which machine */
static void mgt__lock_owner_text(char *buf, size_t cap) {
    char cmd[512], host[128] = "?";
    size_t n = 0, i;
    FILE *f = fopen("/proc/self/cmdline", "rb");
    cmd[0] = 0;
    if (f) {
        n = fread(cmd, 1, sizeof cmd - 1, f);
        fclose(f);
        for (i = 0; i + 1 < n; i++) if (!cmd[i]) cmd[i] = ' ';
        cmd[n] = 0;
    }
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    if (snprintf(buf, cap, "process %ld on %s (%s)\n", (long)getpid(), host, cmd[0] ? cmd : "unknown command") >= (int)cap && cap > 1)
        buf[cap - 2] = '\n'; /* a long command line, cut */
}

static mgt_result mgt__claim(mgt_run *r, int overwrite) {
    char lock_path[1200], where[300];
    mgt__history h;
    if (r->inference) return MGT_OK;
    if (r->process > 0) return MGT_OK; /* process 0 holds the folder and writes the records */
    if (!r->claimed) {
        int fd, e, tries = 0;
        DIR *d;
        struct dirent *de;
        struct stat held, named;
        MGT__TRY(mgt_mkdirs(r->dir));
        snprintf(lock_path, sizeof lock_path, "%s/mgt.lock", r->dir);
    again:
        fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0 && errno == EACCES) fd = open(lock_path, O_RDONLY | O_CLOEXEC); /* another user's lock file: flock needs no write */
        if (fd < 0) return mgt__fail(MGT_ERROR_IO, "%s: cannot create the run's lock file: %s", lock_path, strerror(errno));
        if (flock(fd, LOCK_EX | LOCK_NB)) {
            char owner[600];
            e = errno;
            if (e != EWOULDBLOCK) { /* no lock to be had here (some network file systems): say so rather than "in use" */
                close(fd);
                return mgt__fail(MGT_ERROR_IO, "%s: cannot lock: %s; the checkpoint folder must be on a file system with flock (a local disk)", lock_path,
                                 strerror(e));
            }
            mgt__lock_owner(fd, owner, sizeof owner);
            close(fd);
            return mgt__fail(MGT_ERROR_CONFIG, "%s: checkpoint folder %s is in use by another run: %s; wait for it to end, or give this run another [checkpoint] dir",
                             mgt__where(&r->plan.cfg, mgt__find_key("checkpoint", "dir"), where, sizeof where), r->dir, owner[0] ? owner : "a process that left no name");
        }
        /* the run that held it removes the file as it ends: a lock taken on the removed file is no
           lock, so take the one the folder names now */
        if (fstat(fd, &held) || stat(lock_path, &named) || held.st_dev != named.st_dev || held.st_ino != named.st_ino) {
            close(fd);
            if (++tries < 100) goto again;
            return mgt__fail(MGT_ERROR_IO, "%s: the lock file keeps changing under this run", lock_path);
        }
        {
            char owner[600];
            mgt__lock_owner_text(owner, sizeof owner);
            if (ftruncate(fd, 0) || pwrite(fd, owner, strlen(owner), 0) < 0) { /* the lock still holds; only the name is missing */ }
        }
        r->lock_fd = fd;
        r->claimed = 1;
        /* temporary files left by a run that was killed while writing: nobody else writes here now */
        if ((d = opendir(r->dir))) {
            while ((de = readdir(d))) {
                size_t len = strlen(de->d_name);
                if (len > 4 && !strcmp(de->d_name + len - 4, ".tmp") && (!strncmp(de->d_name, "step_", 5) || !strncmp(de->d_name, "metrics", 7))) {
                    char path[1200];
                    snprintf(path, sizeof path, "%s/%s", r->dir, de->d_name);
                    if (!remove(path)) mgt__log(MGT_LOG_INFO, "removed %s, left by a run that stopped while writing it", path);
                }
            }
            closedir(d);
        }
    }
    h = mgt__own_history(r);
    MGT__TRY(mgt__check_folder(r, &h, r->resumed, overwrite));
    return mgt__open_metrics(r);
}

static mgt_result mgt__claim_once(mgt_run *r) { return r->claimed || r->inference ? MGT_OK : mgt__claim(r, 0); }
/* before a step: a run that will write metrics or checkpoints takes its folder before it trains
   (a run that writes nothing, as `mgt bench`'s, takes it only if it saves) */
static mgt_result mgt__claim_before_step(mgt_run *r) {
    return mgt__metrics_on(&r->plan.cfg) || r->plan.cfg.log.tensorboard[0] || r->plan.cfg.checkpoint.every > 0 ? mgt__claim_once(r) : MGT_OK;
}

MGTDEF mgt_result mgt_run_claim(mgt_run *r, int overwrite) {
    if (!r) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_claim: run is NULL");
    if (r->inference) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_claim: this run was opened for sampling only");
    return mgt__mpi_agree(r->procs, mgt__claim(r, overwrite), "claiming the checkpoint folder");
}

static mgt_result mgt__resolve_checkpoint(const char *what, const char *dir, char *path, size_t cap) {
    struct stat st;
    if (!strcmp(what, "latest")) return mgt_checkpoint_latest(dir, path, cap);
    if (stat(what, &st)) return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: no such checkpoint file or folder", what);
    if (S_ISDIR(st.st_mode)) return mgt_checkpoint_latest(what, path, cap);
    mgt__strlcpy(path, what, cap);
    return MGT_OK;
}

/* ---- the preset a checkpoint stores: every key exactly ----------------------------------------
   A JSON object of "section.key": "value" strings, each value as mgt_config_value_string gives it
   (floats in the shortest text that reads back to the same double), in the order of the key table:
   {"model.n_layer":"2",...,"log.metrics":""}. Every value any valid config holds comes back
   byte for byte, where INI text (mgt_config_format, for reading) would strip spaces, cut at ';'
   and split long lines. Restoring checks each value as a preset line is checked. */
static int mgt__config_store(const mgt_config *cfg, char *out, size_t cap) { /* length, or -1 when cap is too small */
    mgt__buf b;
    char name[80], value[MGT_STR_MAX + 64];
    int i, n;
    memset(&b, 0, sizeof b);
    mgt__buf_str(&b, "{");
    for (i = 0; i < MGT_CONFIG_NKEYS; i++) {
        snprintf(name, sizeof name, "%s.%s", mgt__keys[i].info.section, mgt__keys[i].info.name);
        mgt_config_value_string(cfg, i, value, sizeof value);
        if (i) mgt__buf_str(&b, ",");
        mgt__buf_json_string(&b, name);
        mgt__buf_str(&b, ":");
        mgt__buf_json_string(&b, value);
    }
    mgt__buf_str(&b, "}");
    n = !b.oom && b.n < cap ? (int)b.n : -1;
    if (n >= 0) memcpy(out, b.p, b.n + 1);
    MGT_FREE(b.p);
    return n;
}

static mgt_result mgt__config_restore(mgt_config *cfg, const char *json, const char *name) {
    const char *p = json;
    int seen[MGT_CONFIG_NKEYS], first = 1;
    mgt_result r = MGT_OK;
    memset(seen, 0, sizeof seen);
    mgt__strlcpy(cfg->path, name, sizeof cfg->path);
    if (!mgt__json_expect(&p, '{')) return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: the stored preset is not a JSON object", name);
    for (;;) {
        mgt__buf k, v;
        char why[512], *dot;
        int key;
        mgt__json_ws(&p);
        if (*p == '}') { p++; break; }
        if (!first && !mgt__json_expect(&p, ',')) return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: the stored preset is malformed near byte %d", name, (int)(p - json));
        first = 0;
        memset(&k, 0, sizeof k);
        memset(&v, 0, sizeof v);
        if (!mgt__json_string(&p, &k) || !mgt__json_expect(&p, ':') || !mgt__json_string(&p, &v) || strlen(k.p) != k.n || strlen(v.p) != v.n) {
            MGT_FREE(k.p);
            MGT_FREE(v.p);
            return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: the stored preset is malformed near byte %d", name, (int)(p - json));
        }
        dot = strchr(k.p, '.');
        if (dot) *dot = 0;
        key = dot ? mgt__find_key(k.p, dot + 1) : -1;
        if (dot) *dot = '.';
        if (key < 0) r = mgt__fail(MGT_ERROR_CHECKPOINT, "%s: the stored preset has the key '%s', unknown to mgt %s", name, k.p, MGT_VERSION_STRING);
        else if (seen[key]) r = mgt__fail(MGT_ERROR_CHECKPOINT, "%s: the stored preset has '%s' twice", name, k.p);
        else if (!mgt__set_value(cfg, key, v.p, why, sizeof why)) r = mgt__fail(MGT_ERROR_CHECKPOINT, "%s: the stored preset's %s: %s", name, k.p, why);
        else { seen[key] = 1; cfg->line[key] = 0; }
        MGT_FREE(k.p);
        MGT_FREE(v.p);
        if (r != MGT_OK) return r;
    }
    mgt__json_ws(&p);
    if (*p) return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: the stored preset has text after its end (byte %d)", name, (int)(p - json));
    return MGT_OK;
}

MGTDEF mgt_result mgt_checkpoint_config(const char *checkpoint, mgt_config *cfg) {
    mgt__st_file f;
    const char *preset;
    mgt_result res;
    char path[1200];
    if (!checkpoint || !cfg) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_checkpoint_config: checkpoint and cfg are required");
    res = mgt__resolve_checkpoint(checkpoint, ".", path, sizeof path);
    if (res != MGT_OK) return res;
    res = mgt__checkpoint_open(&f, path);
    if (res != MGT_OK) return res;
    preset = mgt__st_meta(&f, "preset");
    mgt_config_init(cfg);
    res = preset && preset[0] == '{' ? mgt__config_restore(cfg, preset, path)
                                     : mgt__fail(MGT_ERROR_CHECKPOINT, "%s: has no preset (a JSON object) in its metadata", path);
    mgt__st_close(&f);
    if (res == MGT_OK && mgt_config_validate(cfg) != MGT_OK) { /* as `mgt train` would refuse it */
        char why[1024];
        mgt__strlcpy(why, mgt_last_error(), sizeof why);
        return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: the preset stored in it is not valid: %s", path, why);
    }
    return res;
}
/* ==== end src/folder.c ==== */
/* ==== begin src/checkpoint.c ==== */
#line 1 "src/checkpoint.c"
/* src/checkpoint.c - layout-independent checkpoints: the ranks' slices gathered into global tensors,
   and back */
/* ---- layout-independent checkpoints: gather the ranks' slices into global tensors, and back ---- */

enum { MGT__BUF_PARAMS, MGT__BUF_M, MGT__BUF_V };

/* element `flat` of (tp, pp)'s local fp32 buffer `which`, wherever ZeRO keeps it: the parameters
   are the master weights under 16-bit storage (sharded as the moments), else the compute copy */
static float *mgt__element(mgt_run *r, int which, int tpr, int ppr, int unit, size_t flat, int replica) {
    mgt__rank *rk0 = mgt__rank_at(r, replica, tpr, ppr);
    const mgt__unit *u = &rk0->lay.u[unit];
    int master = which == MGT__BUF_PARAMS && rk0->master;
    int sharded = which == MGT__BUF_PARAMS && !master ? r->plan.zero >= 3 : r->plan.zero >= 1;
    size_t s, d;
    mgt__rank *owner;
#define MGT__BUF(rk) (which == MGT__BUF_PARAMS ? (master ? (rk)->master : (float *)((rk)->params ? (rk)->params : (rk)->pshard)) : which == MGT__BUF_M ? (rk)->m : (rk)->v)
    if (!sharded) return MGT__BUF(rk0) + flat;
    s = u->size / (size_t)r->plan.replicas;
    d = (flat - u->offset) / s;
    owner = mgt__rank_at(r, (int)d, tpr, ppr);
    return MGT__BUF(owner) + u->shard_offset + (flat - u->offset - d * s);
#undef MGT__BUF
}

/* A backend whose memory the host cannot touch (a GPU) has the buffers that host code reads and
   writes element by element (initialisation, checkpoints) copied to host memory in between:
   mgt__mirror swaps a rank's params, pshard, master, m and v for downloaded copies, mgt__unmirror
   uploads them (when `changed`) and swaps back. Calls nest (the outermost pair copies). A no-op
   on the CPU backend. */
static void mgt__mirror_bytes(const mgt__rank *rk, size_t bytes[5]) {
    size_t opt = sizeof(float) * (rk->run->plan.zero >= 1 ? rk->shard : rk->lay.size);
    bytes[0] = rk->be->elt * rk->lay.size;
    bytes[1] = rk->be->elt * rk->shard;
    bytes[2] = bytes[3] = bytes[4] = opt;
}
static void mgt__mirror_swap(mgt__rank *rk, void *ptrs[5]) {
    void *old[5];
    int k;
    old[0] = rk->params; old[1] = rk->pshard; old[2] = rk->master; old[3] = rk->m; old[4] = rk->v;
    rk->params = ptrs[0]; rk->pshard = ptrs[1]; rk->master = (float *)ptrs[2]; rk->m = (float *)ptrs[3]; rk->v = (float *)ptrs[4];
    for (k = 0; k < 5; k++) ptrs[k] = old[k];
}
static void mgt__unmirror(mgt__rank *rk, int changed) {
    size_t bytes[5];
    void *host[5];
    int k;
    if (rk->mirror_depth == 0 || --rk->mirror_depth > 0) return;
    mgt__mirror_bytes(rk, bytes);
    mgt__enter(rk->be);
    for (k = 0; k < 5; k++) host[k] = rk->mirrored[k];
    mgt__mirror_swap(rk, host); /* host[] now holds the host copies, the rank its own buffers */
    for (k = 0; k < 5; k++) {
        if (host[k] && changed) rk->be->upload(rk->be, rk->mirrored[k], host[k], bytes[k]);
        MGT_FREE(host[k]);
        rk->mirrored[k] = NULL;
    }
}
static mgt_result mgt__mirror(mgt__rank *rk) {
    size_t bytes[5];
    void *dev[5], *host[5] = {NULL, NULL, NULL, NULL, NULL};
    int k;
    if (rk->be->host_memory) return MGT_OK;
    if (rk->mirror_depth > 0) {
        rk->mirror_depth++;
        return MGT_OK;
    }
    mgt__mirror_bytes(rk, bytes);
    mgt__enter(rk->be);
    dev[0] = rk->params; dev[1] = rk->pshard; dev[2] = rk->master; dev[3] = rk->m; dev[4] = rk->v;
    for (k = 0; k < 5; k++) {
        if (!dev[k]) continue;
        host[k] = MGT_MALLOC(bytes[k]);
        if (!host[k]) {
            double mib = (double)bytes[k] / 1048576.0;
            while (k-- > 0) MGT_FREE(host[k]);
            return mgt__fail(MGT_ERROR_MEMORY, "out of host memory for a copy of rank %d's parameters (%.1f MiB)", rk->rank, mib);
        }
        rk->be->download(rk->be, host[k], dev[k], bytes[k]);
    }
    mgt__mirror_swap(rk, host); /* host[] now holds the device buffers */
    for (k = 0; k < 5; k++) rk->mirrored[k] = host[k];
    rk->mirror_depth = 1;
    return MGT_OK;
}
static mgt_result mgt__mirror_all(mgt_run *r) {
    int i;
    for (i = r->rank_lo; i < r->rank_hi; i++) {
        mgt_result res = mgt__mirror(&r->ranks[i]);
        if (res != MGT_OK) {
            while (i-- > r->rank_lo) mgt__unmirror(&r->ranks[i], 0);
            return res;
        }
    }
    return MGT_OK;
}
static void mgt__unmirror_all(mgt_run *r, int changed) {
    int i;
    for (i = r->rank_lo; i < r->rank_hi; i++) mgt__unmirror(&r->ranks[i], changed);
}

/* copies between the ranks' buffers and global fp32 tensors (one per tensor of the global layout):
   to_global gathers (each element from one rank), else every rank takes its own elements. Under
   16-bit storage the parameters are the master weights (none when sampling), and loading also sets
   the compute copy, rounded, on every rank that holds the element. */
/* under MPI: does this process hold element `flat` of buffer `which` of rank rk's unit (its
   owner's shard, when sharded)? */
static int mgt__element_here(mgt_run *r, int which, const mgt__rank *rk, int unit, size_t flat) {
    const mgt__unit *u = &rk->lay.u[unit];
    int master = which == MGT__BUF_PARAMS && rk->master, owner;
    int sharded = which == MGT__BUF_PARAMS && !master ? r->plan.zero >= 3 : r->plan.zero >= 1;
    if (!sharded) return 1;
    owner = mgt__rank_at(r, (int)((flat - u->offset) / (u->size / (size_t)r->plan.replicas)), rk->tpr, rk->ppr)->rank;
    return owner >= r->rank_lo && owner < r->rank_hi;
}

/* to_global with `here` (under MPI): this process's ranks only, each element it holds marked in
   here[tensor] (replicas hold the same bits, so any one of them will do) */
static void mgt__exchange(mgt_run *r, int which, const mgt__layout *global, float **tensors, int to_global, unsigned char **here) {
    int sixteen = r->dtype != MGT_F32, i, t, g, row, c;
    for (i = r->rank_lo; i < r->rank_hi; i++) {
        mgt__rank *rk = &r->ranks[i];
        int master = which == MGT__BUF_PARAMS && rk->master, has_buf = which != MGT__BUF_PARAMS || master || !sixteen;
        int sharded = which == MGT__BUF_PARAMS && !master ? r->plan.zero >= 3 : r->plan.zero >= 1;
        int copy = !to_global && sixteen && which == MGT__BUF_PARAMS, copy_sharded = r->plan.zero >= 3 && !r->inference;
        if (to_global && rk->replica != 0 && !here) continue;
        for (t = 0; t < rk->lay.n; t++) {
            const mgt__tensor *x = &rk->lay.t[t];
            float *glob = NULL;
            unsigned char *mark = NULL;
            size_t lo, hi, gcols = (size_t)(x->info.ndim == 2 ? x->info.shape[1] : 1);
            if (to_global && x->tied_copy) continue;
            for (g = 0; g < global->n; g++)
                if (!strcmp(global->t[g].info.name, x->info.name)) { glob = tensors[g]; mark = here ? here[g] : NULL; }
            mgt__unit_slice(rk, x->unit, &lo, &hi);
            for (row = 0; row < x->rows; row++) {
                int grow = mgt__global_row(x, row);
                for (c = 0; c < x->cols; c++) {
                    size_t flat = x->offset + (size_t)row * (size_t)x->cols + (size_t)c;
                    size_t gidx = (size_t)grow * gcols + (size_t)(x->col_start + c);
                    int mine = flat >= lo && flat < hi;
                    float value = grow >= 0 && !to_global ? glob[gidx] : 0.0f;
                    if (to_global) {
                        if (grow >= 0 && !mark) glob[gidx] = *mgt__element(r, which, rk->tpr, rk->ppr, x->unit, flat, 0);
                        else if (grow >= 0 && mgt__element_here(r, which, rk, x->unit, flat)) {
                            glob[gidx] = *mgt__element(r, which, rk->tpr, rk->ppr, x->unit, flat, rk->replica);
                            mark[gidx] = 1;
                        }
                        continue;
                    }
                    if (has_buf && (!sharded || mine)) /* a shard takes only its slice */
                        *mgt__element(r, which, rk->tpr, rk->ppr, x->unit, flat, rk->replica) = value;
                    if (copy && !copy_sharded) mgt__store(rk->params, flat, r->dtype, value);
                    else if (copy && mine) mgt__store(rk->pshard, rk->lay.u[x->unit].shard_offset + (flat - lo), r->dtype, value);
                }
            }
        }
    }
}

/* the tensors of the whole model, one rank's view with no parallelism: names, global shapes */
static mgt_result mgt__global_layout(const mgt_config *cfg, mgt__layout *lay) {
    mgt_plan one;
    mgt_config c1 = *cfg;
    c1.parallel.dp = c1.parallel.tp = c1.parallel.pp = c1.parallel.cp = 1;
    c1.parallel.pp_virtual = 1;
    MGT__TRY(mgt__plan_make(&c1, &one));
    if (!mgt__layout_alloc(lay, &one)) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    mgt__layout_make(lay, &one, 0, 0);
    return MGT_OK;
}

/* global tensors of buffer `which` (params, m, v), gathered from the ranks; free with MGT_FREE */
/* under MPI: each process takes the elements its ranks hold, and process 0 merges every process's
   into `out` (the others' `out` is only their part) */
static mgt_result mgt__gather_mpi(mgt_run *r, const mgt__layout *g, int which, float **out) {
    mgt__mpi_world *w = r->procs;
    int n = g->n, t, p, nreq = 0, *peer = (int *)MGT_MALLOC(sizeof(int) * 2 * (size_t)n);
    unsigned char **here = (unsigned char **)MGT_MALLOC(sizeof(unsigned char *) * (size_t)n);
    unsigned char **got = (unsigned char **)MGT_MALLOC(sizeof(unsigned char *) * (size_t)n);
    float **theirs = (float **)MGT_MALLOC(sizeof(float *) * (size_t)n);
    void **req = (void **)MGT_MALLOC(sizeof(void *) * 2 * (size_t)n);
    mgt_result res = peer && here && got && theirs && req ? MGT_OK : mgt__fail(MGT_ERROR_MEMORY, "out of memory gathering a checkpoint");
    char why[512], who[64], what[96];
    size_t e;
    for (t = 0; t < n; t++) { if (here) here[t] = NULL; if (got) got[t] = NULL; if (theirs) theirs[t] = NULL; }
    for (t = 0; t < n && res == MGT_OK; t++) {
        size_t numel = g->t[t].info.numel;
        here[t] = (unsigned char *)MGT_MALLOC(numel);
        if (w->process == 0) { got[t] = (unsigned char *)MGT_MALLOC(numel); theirs[t] = (float *)MGT_MALLOC(sizeof(float) * numel); }
        if (!here[t] || (w->process == 0 && (!got[t] || !theirs[t]))) res = mgt__fail(MGT_ERROR_MEMORY, "out of memory gathering a checkpoint");
        else memset(here[t], 0, numel);
    }
    if (res == MGT_OK) mgt__exchange(r, which, g, out, 1, here);
    snprintf(who, sizeof who, "process %d (on %s)", w->process, w->hosts[w->process]);
    snprintf(what, sizeof what, "gathering a checkpoint's %s to process 0", which == MGT__BUF_PARAMS ? "weights" : "optimizer moments");
    for (p = 1; p < w->processes && res == MGT_OK; p++) { /* process 0 takes each process's part in turn; a process sends its own */
        if (w->process != 0 && w->process != p) continue;
        nreq = 0;
        for (t = 0; t < n && res == MGT_OK; t++) {
            size_t numel = g->t[t].info.numel;
            int to = w->process == 0 ? p : 0;
            peer[nreq] = to * w->per;
            req[nreq] = w->process == 0 ? w->api->irecv(theirs[t], sizeof(float) * numel, p, 1, MGT_MPI_STARTUP, why, sizeof why)
                                        : w->api->isend(out[t], sizeof(float) * numel, 0, 1, MGT_MPI_STARTUP, why, sizeof why);
            if (!req[nreq++]) { res = mgt__pcomm_fail(w, why); break; }
            peer[nreq] = to * w->per;
            req[nreq] = w->process == 0 ? w->api->irecv(got[t], numel, p, 1, MGT_MPI_STARTUP, why, sizeof why)
                                        : w->api->isend(here[t], numel, 0, 1, MGT_MPI_STARTUP, why, sizeof why);
            if (!req[nreq++]) res = mgt__pcomm_fail(w, why);
        }
        if (res == MGT_OK) res = mgt__pcomm_wait(w, who, req, peer, nreq, what);
        else
            while (nreq-- > 0) if (req[nreq]) w->api->cancel(req[nreq]);
        for (t = 0; t < n && res == MGT_OK && w->process == 0; t++)
            for (e = 0; e < g->t[t].info.numel; e++)
                if (got[t][e] && !here[t][e]) { out[t][e] = theirs[t][e]; here[t][e] = 1; }
    }
    for (t = 0; t < n && res == MGT_OK && w->process == 0; t++) /* every element held somewhere, or the layout arithmetic is wrong */
        for (e = 0; e < g->t[t].info.numel; e++)
            if (!here[t][e]) { res = mgt__fail(MGT_ERROR_CHECKPOINT, "checkpoint: element %zu of %s held by no process", e, g->t[t].info.name); break; }
    for (t = 0; t < n; t++) {
        if (here) MGT_FREE(here[t]);
        if (got) MGT_FREE(got[t]);
        if (theirs) MGT_FREE(theirs[t]);
    }
    MGT_FREE(here);
    MGT_FREE(got);
    MGT_FREE(theirs);
    MGT_FREE(peer);
    MGT_FREE(req);
    return res;
}

/* the global tensors from this process's ranks, and from the other processes' under MPI */
static mgt_result mgt__gather_processes(mgt_run *r, const mgt__layout *g, int which, float **out) {
    if (r->procs) return mgt__gather_mpi(r, g, which, out);
    mgt__exchange(r, which, g, out, 1, NULL);
    return MGT_OK;
}

static float **mgt__gather_global(mgt_run *r, const mgt__layout *g, int which) {
    float **out = (float **)MGT_MALLOC(sizeof(float *) * (size_t)g->n);
    int t;
    if (!out) return NULL;
    for (t = 0; t < g->n; t++) out[t] = (float *)MGT_MALLOC(sizeof(float) * g->t[t].info.numel);
    for (t = 0; t < g->n; t++) if (!out[t]) { while (t < g->n) out[t++] = NULL; return out; }
    if (mgt__mirror_all(r) != MGT_OK) {
        for (t = 0; t < g->n; t++) MGT_FREE(out[t]);
        MGT_FREE(out);
        return NULL;
    }
    if (mgt__gather_processes(r, g, which, out) != MGT_OK) {
        for (t = 0; t < g->n; t++) MGT_FREE(out[t]);
        MGT_FREE(out);
        out = NULL;
    }
    mgt__unmirror_all(r, 0);
    return out;
}
static void mgt__free_global(const mgt__layout *g, float **tensors) {
    int t;
    if (!tensors) return;
    for (t = 0; t < g->n; t++) MGT_FREE(tensors[t]);
    MGT_FREE(tensors);
}


/* path made absolute against the working directory, in place; left as it is when it does not fit */
static void mgt__absolute_path(char *path, size_t cap) {
    char where[4096];
    size_t n;
    if (path[0] == '/' || !path[0] || !getcwd(where, sizeof where) || strlen(where) + 1 + strlen(path) >= cap) return;
    n = strlen(where);
    where[n] = '/';
    mgt__strlcpy(where + n + 1, path, sizeof where - n - 1);
    mgt__strlcpy(path, where, cap);
}
MGTDEF mgt_result mgt_run_save(mgt_run *r, char *path_out, size_t cap) {
    char path[1200], step_text[32], seed_text[32], tokens_text[32], loss_text[64], skipped_text[64], scale_text[64], wall_text[64], steps_text[64];
    char *preset = NULL;
    mgt__st_out *out = NULL;
    mgt__layout g;
    float **bufs[3] = {NULL, NULL, NULL};
    int i, k, n = 0, bytes_preset = 1 << 16, ok = 1, state;
    mgt_result res;
    const char *meta[22];
    static const char *prefix[3] = {"", "optim.m.", "optim.v."};
    if (!r) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_save: run is NULL");
    if (r->inference) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_save: this run was opened for sampling only");
    snprintf(path, sizeof path, "%s/step_%08d.safetensors", r->dir, r->step);
    if (path_out) mgt__strlcpy(path_out, path, cap);
    /* this step is saved already when its file is this folder's (a run resumed from another
       folder and not trained further is saved here too); under MPI every process decides alike,
       without looking at a file only process 0's machine may see */
    if (r->saved_step == r->step && !strcmp(r->saved_path, path) && (r->processes > 1 || !access(path, F_OK))) return MGT_OK;
    MGT__TRY(mgt__claim_once(r));
    MGT__TRY(mgt__global_layout(&r->plan.cfg, &g));
    state = mgt_run_state(r);
    mgt_run_set_state(r, MGT_STATE_CHECKPOINTING);
    res = mgt__mirror_all(r);
    if (res != MGT_OK) {
        mgt__layout_free(&g);
        mgt_run_set_state(r, state);
        return res;
    }
    for (k = 0; k < 3; k++) {
        bufs[k] = mgt__gather_global(r, &g, k);
        for (i = 0; ok && i < g.n; i++) ok = bufs[k] && bufs[k][i];
    }
    mgt__unmirror_all(r, 0);
    if (r->process > 0) { /* its part is with process 0, which writes the file */
        for (k = 0; k < 3; k++) mgt__free_global(&g, bufs[k]);
        mgt__layout_free(&g);
        mgt_run_set_state(r, state);
        if (!ok) return mgt__fail(MGT_ERROR_CHECKPOINT, "checkpoint of step %d: %s", r->step, mgt_last_error());
        r->saved_step = r->step;
        mgt__strlcpy(r->saved_path, path, sizeof r->saved_path);
        return MGT_OK;
    }
    out = (mgt__st_out *)MGT_MALLOC(sizeof *out * (size_t)g.n * 3);
    preset = (char *)MGT_MALLOC((size_t)bytes_preset);
    if (!ok || !out || !preset) res = mgt__fail(MGT_ERROR_MEMORY, "out of memory saving a checkpoint");
    else {
        mgt_config stored = r->plan.cfg;
        /* the tokenizer's files by their absolute path, so `mgt sample` decodes from any folder */
        if (stored.data.tokenizer == MGT_TOKENIZER_GPT2) mgt__absolute_path(stored.data.bpe_dir, sizeof stored.data.bpe_dir);
        if (stored.data.tokenizer == MGT_TOKENIZER_HF) mgt__absolute_path(stored.data.tokenizer_json, sizeof stored.data.tokenizer_json);
        mgt__absolute_path(stored.model.init, sizeof stored.model.init);
        ok = mgt__config_store(&stored, preset, (size_t)bytes_preset) >= 0; /* 64 KiB: every value 255 escaped bytes is ~30 */
        for (k = 0; k < 3; k++)
            for (i = 0; i < g.n; i++) {
                char *name = (char *)MGT_MALLOC(96);
                if (!name) { ok = 0; break; }
                snprintf(name, 96, "%s%s", prefix[k], g.t[i].info.name);
                out[n].name = name;
                out[n].data = bufs[k][i];
                out[n].dtype = "F32";
                out[n].ndim = g.t[i].info.ndim;
                out[n].shape[0] = g.t[i].info.shape[0];
                out[n].shape[1] = g.t[i].info.shape[1];
                out[n].bytes = sizeof(float) * g.t[i].info.numel;
                n++;
            }
        snprintf(step_text, sizeof step_text, "%d", r->step);
        snprintf(seed_text, sizeof seed_text, "%d", r->plan.cfg.train.seed);
        snprintf(tokens_text, sizeof tokens_text, "%lld", r->tokens_seen);
        snprintf(loss_text, sizeof loss_text, "%.17g", r->loss);
        meta[0] = "format"; meta[1] = MGT__CHECKPOINT_FORMAT;
        meta[2] = "step"; meta[3] = step_text;
        meta[4] = "seed"; meta[5] = seed_text;
        meta[6] = "tokens_seen"; meta[7] = tokens_text;
        meta[8] = "train_loss"; meta[9] = loss_text;
        meta[10] = "preset"; meta[11] = preset;
        /* updates skipped in all and fp16's finite steps since the scale changed ("skipped good"):
           AdamW's bias correction and the scale's window continue exactly; the weights saved are the
           fp32 master weights, so any storage type resumes any other */
        snprintf(skipped_text, sizeof skipped_text, "%d %d", r->skipped, r->good_steps);
        snprintf(scale_text, sizeof scale_text, "%.17g", r->loss_scale);
        meta[12] = "skipped_steps"; meta[13] = skipped_text;
        meta[14] = "run_id"; meta[15] = r->run_id;
        /* the run's clocks, so that a resumed run's elapsed time and events go on from here */
        snprintf(wall_text, sizeof wall_text, "%.3f", mgt_now() - r->created_s);
        snprintf(steps_text, sizeof steps_text, "%.6f", r->elapsed_s);
        meta[16] = "elapsed_s"; meta[17] = wall_text;
        meta[18] = "step_time_s"; meta[19] = steps_text;
        meta[20] = "loss_scale"; meta[21] = scale_text;
        res = ok ? mgt__st_write(path, out, n, meta, r->dtype == MGT_F16 ? 11 : 10) : mgt__fail(MGT_ERROR_MEMORY, "out of memory saving a checkpoint");
    }
    for (i = 0; i < n; i++) MGT_FREE((void *)out[i].name);
    MGT_FREE(out);
    MGT_FREE(preset);
    for (k = 0; k < 3; k++) mgt__free_global(&g, bufs[k]);
    mgt__layout_free(&g);
    mgt_run_set_state(r, state);
    if (res != MGT_OK) return res;
    r->saved_step = r->step;
    mgt__strlcpy(r->saved_path, path, sizeof r->saved_path);
    mgt__prune_checkpoints(r);
    mgt__event(r, MGT_LOG_INFO, "step %d: checkpoint %s", r->step, path);
    return MGT_OK;
}

/* the run state a checkpoint's metadata holds, each number parsed strictly and range-checked */
typedef struct mgt__resume_meta {
    long long step, seed, tokens, skipped, good;
    double loss_scale, elapsed_s, step_time_s; /* the clocks: 0 in checkpoints written before them */
    int has_scale;
    const char *run_id;
} mgt__resume_meta;
/* an optional non-negative number of the metadata; 0 when absent, -1 when malformed */
static double mgt__meta_seconds(const mgt__st_file *f, const char *key) {
    const char *v = mgt__st_meta(f, key);
    char *end;
    double x;
    if (!v) return 0;
    x = strtod(v, &end);
    return end == v || *end || !(x >= 0 && x < 1e12) ? -1 : x;
}
static mgt_result mgt__resume_meta_read(const mgt__st_file *f, const char *path, mgt__resume_meta *m) {
    const char *skipped = mgt__st_meta(f, "skipped_steps"), *scale = mgt__st_meta(f, "loss_scale"), *bad = NULL;
    memset(m, 0, sizeof *m);
    if (!mgt__meta_int(f, "step", 0, 2000000000, &m->step)) bad = "step";
    else if (!mgt__meta_int(f, "seed", 0, 2147483647, &m->seed)) bad = "seed";
    else if (!mgt__meta_int(f, "tokens_seen", 0, (long long)1 << 62, &m->tokens)) bad = "tokens_seen";
    else if (!(m->run_id = mgt__st_meta(f, "run_id")) || strlen(m->run_id) != 16 || strspn(m->run_id, "0123456789abcdef") != 16) bad = "run_id";
    else {
        int a = 0, b = 0, len = -1;
        if (!skipped || sscanf(skipped, "%d %d%n", &a, &b, &len) != 2 || len != (int)strlen(skipped) || a < 0 || a > m->step || b < 0 ||
            skipped[0] < '0' || skipped[0] > '9')
            bad = "skipped_steps";
        m->skipped = a;
        m->good = b;
    }
    if (!bad && (m->elapsed_s = mgt__meta_seconds(f, "elapsed_s")) < 0) bad = "elapsed_s";
    if (!bad && (m->step_time_s = mgt__meta_seconds(f, "step_time_s")) < 0) bad = "step_time_s";
    if (!bad && scale) { /* an fp16 run's dynamic loss scale: a power of two in [1, 2^100] */
        char *end;
        int e;
        m->loss_scale = strtod(scale, &end);
        if (end == scale || *end || !(m->loss_scale >= 1 && m->loss_scale <= ldexp(1.0, 100)) || frexp(m->loss_scale, &e) != 0.5) bad = "loss_scale";
        m->has_scale = 1;
    }
    if (bad) {
        const char *v = mgt__st_meta(f, bad);
        return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: metadata \"%s\" is %s%s%s, not a valid value; the file was not written by mgt or is damaged", path, bad,
                         v ? "\"" : "missing", v ? v : "", v ? "\"" : "");
    }
    return MGT_OK;
}

MGTDEF mgt_result mgt_run_resume(mgt_run *r, const char *what) {
    char path[1200];
    mgt__st_file f;
    mgt__layout g;
    mgt__resume_meta meta;
    mgt_result res = MGT_OK;
    float **tensors, **copies = NULL;
    int k, t, elsewhere;
    static const char *prefix[3] = {"", "optim.m.", "optim.v."};
    if (!r || !what) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_resume: run and checkpoint are required");
    MGT__TRY(mgt__resolve_checkpoint(what, r->dir, path, sizeof path));
    MGT__TRY(mgt__checkpoint_open(&f, path));
    if ((res = mgt__resume_meta_read(&f, path, &meta)) != MGT_OK) { mgt__st_close(&f); return res; }
    { /* is the checkpoint in the run's own folder (the same folder, however it is named)? */
        char folder[1200];
        struct stat a, b;
        const char *slash = strrchr(path, '/');
        snprintf(folder, sizeof folder, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
        elsewhere = stat(folder, &a) || stat(r->dir, &b) || a.st_dev != b.st_dev || a.st_ino != b.st_ino;
    }
    if (r->claimed) { /* a run that holds its folder checks it for the history it would continue before changing anything */
        mgt__history h;
        h.run_id = meta.run_id;
        h.first = elsewhere ? (int)meta.step : 0;
        h.last = (int)meta.step;
        if ((res = mgt__check_folder(r, &h, 1, 0)) != MGT_OK) { mgt__st_close(&f); return res; }
    }
    if ((res = mgt__global_layout(&r->plan.cfg, &g)) != MGT_OK) { mgt__st_close(&f); return res; }
    tensors = (float **)MGT_MALLOC(sizeof(float *) * (size_t)g.n);
    copies = (float **)MGT_MALLOC(sizeof(float *) * (size_t)g.n);
    if (copies) memset(copies, 0, sizeof(float *) * (size_t)g.n);
    if (tensors && copies) res = mgt__mirror_all(r);
    for (k = 0; k < (r->inference ? 1 : 3) && res == MGT_OK && tensors && copies; k++) {
        for (t = 0; t < g.n && res == MGT_OK; t++) { /* check every tensor before changing anything */
            const mgt_tensor_info *x = &g.t[t].info;
            char name[128];
            const mgt__st_tensor *s;
            snprintf(name, sizeof name, "%s%s", prefix[k], x->name);
            s = mgt__st_find(&f, name);
            if (!s) res = mgt__fail(MGT_ERROR_CHECKPOINT, "%s: has no tensor '%s'; it was written for another model", path, name);
            else if (strcmp(s->dtype, "F32") || s->ndim != x->ndim || s->shape[0] != x->shape[0] || (x->ndim == 2 && s->shape[1] != x->shape[1]) ||
                     s->end - s->begin != sizeof(float) * x->numel)
                res = mgt__fail(MGT_ERROR_CHECKPOINT, "%s: tensor '%s' is %s [%lld,%lld] but the preset's model needs F32 [%d,%d]; use the preset the run was trained with",
                                path, name, s->dtype, s->shape[0], s->ndim > 1 ? s->shape[1] : 0, x->shape[0], x->shape[1]);
            else if (s->begin % sizeof(float)) { /* an offset safetensors allows but a float load does not: read a copy */
                MGT_FREE(copies[t]);
                copies[t] = (float *)MGT_MALLOC(sizeof(float) * x->numel);
                if (!copies[t]) res = mgt__fail(MGT_ERROR_MEMORY, "out of memory");
                else memcpy(copies[t], mgt__st_data(&f, s), sizeof(float) * x->numel);
                tensors[t] = copies[t];
            } else tensors[t] = (float *)(void *)mgt__st_data(&f, s);
        }
        if (res == MGT_OK) mgt__exchange(r, k, &g, tensors, 0, NULL);
    }
    mgt__unmirror_all(r, res == MGT_OK);
    if (!tensors || !copies) res = mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    if (res == MGT_OK) {
        r->step = (int)meta.step;
        r->saved_step = r->step;
        mgt__strlcpy(r->saved_path, path, sizeof r->saved_path);
        mgt__strlcpy(r->run_id, meta.run_id, sizeof r->run_id);
        r->resumed = 1;
        r->resumed_elsewhere = elsewhere;
        r->tokens_seen = meta.tokens;
        r->elapsed_s = meta.step_time_s;
        r->created_s = mgt_now() - meta.elapsed_s; /* the run's clock goes on from the checkpoint's */
        r->skipped = (int)meta.skipped;
        r->good_steps = (int)meta.good;
        r->skipped_in_row = 0;
        if (r->dtype == MGT_F16 && meta.has_scale) r->loss_scale = meta.loss_scale; /* an fp16 run's scale; others start afresh */
        else if (r->dtype == MGT_F16) r->good_steps = 0;
        if (meta.seed != r->plan.cfg.train.seed)
            mgt__log(MGT_LOG_WARN, "%s was trained with seed %lld, this preset has %d: the data order changes", path, meta.seed, r->plan.cfg.train.seed);
        mgt__event(r, MGT_LOG_INFO, "resumed from %s at step %d", path, r->step);
    }
    if (copies) for (t = 0; t < g.n; t++) MGT_FREE(copies[t]);
    MGT_FREE(copies);
    MGT_FREE(tensors);
    mgt__layout_free(&g);
    mgt__st_close(&f);
    if (res == MGT_OK && r->claimed) res = mgt__open_metrics(r); /* its metrics continue this history */
    res = mgt__mpi_agree(r->procs, res, "resuming");
    return res;
}
/* ==== end src/checkpoint.c ==== */
/* ==== begin src/rank_make.c ==== */
#line 1 "src/rank_make.c"
/* src/rank_make.c - a rank made and freed: its place and groups, its backend, its buffers and
   activations, its first values */
static void mgt__rank_free(mgt__rank *rk) {
    mgt_backend *be = rk->be;
    const mgt_plan *p = &rk->run->plan;
    int u;
    mgt__unmirror(rk, 0);
    if (be) {
        mgt__enter(be);
        /* the communicator first: it waits for its stream, which may still read the buffers below */
        if (rk->comm && rk->run->world_api->comm_destroy) {
            rk->run->world_api->comm_destroy(rk->run->world, rk->comm);
            rk->comm = NULL;
        }
        size_t full = sizeof(float) * rk->lay.size, sh = sizeof(float) * rk->shard, e = be->elt;
        be->free(be, rk->params, e * rk->lay.size, MGT_MEM_PARAMS);
        be->free(be, rk->pshard, e * rk->shard, MGT_MEM_PARAMS);
        be->free(be, rk->gather[0], e * rk->max_unit, MGT_MEM_BUFFERS);
        be->free(be, rk->gather[1], e * rk->max_unit, MGT_MEM_BUFFERS);
        be->free(be, rk->master, p->zero >= 1 ? sh : full, MGT_MEM_OPTIMIZER);
        be->free(be, rk->grads, full, MGT_MEM_GRADS);
        be->free(be, rk->gshard, sh, MGT_MEM_GRADS);
        be->free(be, rk->unit_gbuf[0], sizeof(float) * rk->max_block, MGT_MEM_GRADS);
        be->free(be, rk->unit_gbuf[1], sizeof(float) * rk->max_block, MGT_MEM_GRADS);
        be->free(be, rk->rs_tmp1, sizeof(float) * rk->max_block / (size_t)p->replicas, MGT_MEM_BUFFERS);
        for (u = 0; u < 2; u++) be->free(be, rk->keep_gbuf[u], sizeof(float) * rk->keep_size[u], MGT_MEM_GRADS);
        be->free(be, rk->rs_tmp, sizeof(float) * rk->max_unit / (size_t)p->replicas, MGT_MEM_BUFFERS);
        be->free(be, rk->m, p->zero >= 1 ? sh : full, MGT_MEM_OPTIMIZER);
        be->free(be, rk->v, p->zero >= 1 ? sh : full, MGT_MEM_OPTIMIZER);
        be->free(be, rk->acts_block, rk->acts_bytes, MGT_MEM_ACTIVATIONS);
        be->free(be, rk->gs_block, rk->gs_bytes, MGT_MEM_ACTIVATIONS);
        be->free(be, rk->dstat, sizeof(double) * (size_t)(2 + rk->run->plan.world), MGT_MEM_BUFFERS);
        if (rk->run->world_api->backend_destroy) rk->run->world_api->backend_destroy(rk->run->world, be);
    }
    MGT_FREE(rk->host_io);
    MGT_FREE(rk->ss_x);
    MGT_FREE(rk->ss_n);
    if (rk->acts) for (u = 0; u < rk->nsets; u++) { MGT_FREE(rk->acts[u].resid); MGT_FREE(rk->acts[u].layer); }
    MGT_FREE(rk->acts);
    MGT_FREE(rk->pipe[0]);
    MGT_FREE(rk->pipe[1]);
    MGT_FREE(rk->unit_param);
    MGT_FREE(rk->unit_grad);
    MGT_FREE(rk->bucket_of_unit);
    MGT_FREE(rk->members);
    mgt__layout_free(&rk->lay);
}


/* every element from (seed, tensor name, global element index): any slice of any layout
   initialises alike; vocabulary padding rows stay zero */
typedef struct mgt__init_args { mgt__rank *rk; const mgt__tensor *x; } mgt__init_args;
static void mgt__init_task(void *ctx, int tid, int nth) {
    const mgt__init_args *a = (const mgt__init_args *)ctx;
    const mgt__tensor *x = a->x;
    mgt__rank *rk = a->rk;
    uint64_t key = mgt__name_key(x->info.name), seed = (uint64_t)rk->run->plan.cfg.train.seed;
    size_t lo, hi, slo, shi, i, gcols = (size_t)(x->info.ndim == 2 ? x->info.shape[1] : 1);
    int zero3 = rk->run->plan.zero >= 3, master_sharded = rk->run->plan.zero >= 1, dtype = rk->be->dtype;
    mgt__span((size_t)x->rows, tid, nth, 1, &lo, &hi);
    mgt__unit_slice(rk, x->unit, &slo, &shi);
    for (i = lo; i < hi; i++) {
        int grow = mgt__global_row(x, (int)i), c;
        for (c = 0; c < x->cols; c++) {
            size_t flat = x->offset + i * (size_t)x->cols + (size_t)c, gidx = (size_t)grow * gcols + (size_t)(x->col_start + c);
            float v = grow < 0 ? 0.0f : x->init_std > 0 ? (float)(x->init_std * mgt__normal(seed, key, gidx)) : x->init_value;
            size_t in_shard = rk->lay.u[x->unit].shard_offset + (flat - slo);
            int mine = flat >= slo && flat < shi;
            if (rk->master && (!master_sharded || mine)) rk->master[master_sharded ? in_shard : flat] = v;
            if (!zero3) mgt__store(rk->params, flat, dtype, v);
            else if (mine) mgt__store(rk->pshard, in_shard, dtype, v);
        }
    }
}

/* a group of `kind`: size members from `base` every `stride` ranks, this rank at `index`; its id is
   kind x world + `place` (its first member's place among the groups of that kind), the same on
   every member */
static void mgt__make_group(mgt_group *g, int **cursor, int kind, int world, int place, int size, int index, int stride, int base) {
    int i;
    g->kind = kind;
    g->id = kind * world + place;
    g->size = size;
    g->index = index;
    g->ranks = *cursor;
    for (i = 0; i < size; i++) (*cursor)[i] = base + i * stride;
    *cursor += size;
}
/* a rank's groups, all in one place: TP (neighbours), DP (the replicas: dp x cp), PP, the
   embedding pair (first and last stage), the world, the key/value replicas (runs of k neighbouring
   TP ranks) and CP (every tp-th rank of a run of cp x tp) */
static mgt_result mgt__rank_groups(mgt__rank *rk, const mgt_plan *p) {
    int W = p->world, index = rk->rank, k = mgt__kv_replicas(&p->dims, p->tp), R = p->replicas, *cur;
    rk->members = (int *)MGT_MALLOC(sizeof(int) * (size_t)(p->tp + R + p->pp + 2 + W + k + p->cp));
    if (!rk->members) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    cur = rk->members;
    mgt__make_group(&rk->tp_g, &cur, MGT_GROUP_TP, W, index / p->tp, p->tp, rk->tpr, 1, index - rk->tpr);
    mgt__make_group(&rk->dp_g, &cur, MGT_GROUP_DP, W, rk->ppr * p->tp + rk->tpr, R, rk->replica, p->tp, rk->ppr * p->tp * R + rk->tpr);
    mgt__make_group(&rk->pp_g, &cur, MGT_GROUP_PP, W, rk->replica * p->tp + rk->tpr, p->pp, rk->ppr, p->tp * R, rk->replica * p->tp + rk->tpr);
    mgt__make_group(&rk->emb_g, &cur, MGT_GROUP_EMBEDDING, W, rk->replica * p->tp + rk->tpr, p->pp > 1 ? 2 : 1, rk->last && p->pp > 1 ? 1 : 0,
                    (p->pp - 1) * p->tp * R, rk->replica * p->tp + rk->tpr);
    mgt__make_group(&rk->world_g, &cur, MGT_GROUP_WORLD, W, 0, W, index, 1, 0);
    mgt__make_group(&rk->kv_g, &cur, MGT_GROUP_KV, W, index / k, k, rk->tpr % k, 1, index - rk->tpr % k);
    mgt__make_group(&rk->cp_g, &cur, MGT_GROUP_CP, W, index - rk->cpr * p->tp, p->cp, rk->cpr, p->tp, index - rk->cpr * p->tp);
    return MGT_OK;
}

/* the rank's place in the grid: its coordinates and stage, its slice of the model, its groups and
   the shapes of its ops */
static mgt_result mgt__rank_place(mgt_run *r, mgt__rank *rk, int index) {
    const mgt_plan *p = &r->plan;
    const mgt_config *cfg = &r->plan.cfg;
    int u;
    memset(rk, 0, sizeof *rk);
    rk->run = r;
    mgt__rank_locate(rk, p, index);
    if (!mgt__layout_alloc(&rk->lay, p)) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    mgt__layout_make(&rk->lay, p, rk->ppr, rk->tpr);
    for (u = 0; u < rk->lay.nu; u++) {
        rk->shard += rk->lay.u[u].size / (size_t)p->replicas;
        if (rk->lay.u[u].size > rk->max_unit) rk->max_unit = rk->lay.u[u].size;
        if (mgt__is_block_unit(rk, u) && rk->lay.u[u].size > rk->max_block) rk->max_block = rk->lay.u[u].size;
    }
    MGT__TRY(mgt__rank_groups(rk, p));
    /* shape of this rank's slice */
    rk->shape.B = r->inference ? 1 : cfg->train.micro_batch;
    rk->shape.cp = r->inference ? 1 : p->cp;
    rk->shape.T = cfg->model.seq_len / rk->shape.cp; /* its share of the sequence: two chunks under context parallelism */
    rk->shape.C = cfg->model.d_model;
    rk->shape.tp = p->tp;
    rk->shape.Cl = cfg->model.d_model / p->tp;
    rk->shape.KVl = mgt__kv_local(&p->dims, p->tp) * p->dims.hs;
    rk->shape.Hl = p->dims.H / p->tp;
    rk->shape.Fl = p->dims.fc / p->tp;
    rk->shape.NHl = cfg->model.n_head / p->tp;
    rk->shape.Vl = p->Vp / p->tp;
    rk->shape.nblocks = rk->nblocks;
    rk->shape.last = rk->last;
    rk->shape.recompute = r->inference ? MGT_RECOMPUTE_NONE : cfg->train.recompute;
    rk->shape.sp = !r->inference && cfg->parallel.sp && p->tp > 1; /* sampling keeps its rows whole */
    rk->shape.first = rk->first;
    rk->shape.chunks = r->inference ? 1 : mgt__plan_chunks(p);
    rk->shape.zb = !r->inference && mgt__plan_zb(p);
    rk->shape.elt = mgt__dtype_size(r->dtype);
    return MGT_OK;
}

/* the rank's backend, from its world; on a GPU, everything a step uses is made now, from the
   largest operands */
static mgt_result mgt__rank_backend(mgt_run *r, mgt__rank *rk) {
    mgt_backend *be;
    {
        mgt__rank_want want;
        want.rank = rk->rank;
        want.dtype = r->dtype;
        want.threads = r->threads_per_rank;
        want.scratch_floats = mgt__att_scratch_floats(&rk->shape);
        want.widen_floats = mgt__widen_floats(&rk->shape, r->threads_per_rank, mgt__cpu_widens_gemms(r->dtype));
        MGT__TRY(r->world_api->backend(r->world, &want, &rk->be, &rk->device));
    }
    be = rk->be;
    mgt__enter(be);
    rk->shape.att_lse = be->att_lse; /* the size of what attention saves */
    if (rk->shape.cp > 1 && (!be->attention_part_forward || !be->attention_part_backward || !be->copy_cols))
        return mgt__fail(MGT_ERROR_CONFIG, "[parallel] cp = %d: the %s backend has no ring attention (attention_part_forward, attention_part_backward, "
                         "copy_cols); set parallel.cp = 1, or device = cpu", rk->shape.cp, be->name);
    rk->host_io = MGT_MALLOC(sizeof(double) * (size_t)rk->shape.B * (size_t)rk->shape.T); /* 2N ints or N doubles */
    if (!rk->host_io) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    if (be->reserve) { /* GPU: everything a step uses, made now from the largest operands */
        mgt_backend_limits lim;
        memset(&lim, 0, sizeof lim);
        lim.B = rk->shape.B;
        lim.T = rk->shape.T;
        lim.C = rk->shape.C;
        lim.NH = rk->shape.NHl;
        lim.hs = rk->shape.NHl > 0 ? rk->shape.Cl / rk->shape.NHl : 0;
        lim.NKV = lim.hs > 0 ? rk->shape.KVl / lim.hs : 0;
        lim.OC = rk->shape.Cl + 2 * rk->shape.KVl > rk->shape.Fl ? rk->shape.Cl + 2 * rk->shape.KVl : rk->shape.Fl;
        lim.norm_tensors = (size_t)rk->lay.n;
        lim.norm_elements = rk->lay.size;
        lim.upload_bytes = sizeof(int) * (size_t)rk->shape.B * (size_t)rk->shape.T;
        lim.uploads = 2 * (r->inference ? 1 : r->plan.micro_steps);
        if (be->reserve(be, &lim) != 0)
            return mgt__fail(MGT_ERROR_MEMORY, "rank %d cannot reserve what its steps use: %s", rk->rank, be->error ? be->error(be) : "?");
    }
    return MGT_OK;
}

/* parameters, gradients and AdamW moments, sharded over DP as the ZeRO stage says, and the step's
   statistics on the device */
static mgt_result mgt__rank_state(mgt_run *r, mgt__rank *rk) {
    const mgt_plan *p = &r->plan;
    mgt_backend *be = rk->be;
    int u, k, zero = p->zero;
    rk->unit_param = (void **)MGT_MALLOC(sizeof(void *) * (size_t)rk->lay.nu);
    rk->unit_grad = (float **)MGT_MALLOC(sizeof(float *) * (size_t)rk->lay.nu);
    rk->bucket_of_unit = (int *)MGT_MALLOC(sizeof(int) * (size_t)rk->lay.nu);
    if (!rk->unit_param || !rk->unit_grad || !rk->bucket_of_unit) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
#define MGT__ALLOC_AS(type, ptr, bytes, cat) \
    if (!((ptr) = (type)be->alloc(be, (bytes), cat))) return mgt__fail(MGT_ERROR_MEMORY, "out of memory: rank %d needs more for its %s", rk->rank, mgt_mem_category_name(cat));
#define MGT__ALLOC(ptr, floats, cat) MGT__ALLOC_AS(float *, ptr, sizeof(float) * (floats), cat)
    if (zero < 3 || r->inference) { MGT__ALLOC_AS(void *, rk->params, be->elt * rk->lay.size, MGT_MEM_PARAMS) }
    else {
        MGT__ALLOC_AS(void *, rk->pshard, be->elt * rk->shard, MGT_MEM_PARAMS)
        MGT__ALLOC_AS(void *, rk->gather[0], be->elt * rk->max_unit, MGT_MEM_BUFFERS)
        MGT__ALLOC_AS(void *, rk->gather[1], be->elt * rk->max_unit, MGT_MEM_BUFFERS)
    }
    rk->gathered[0] = rk->gathered[1] = -1;
    for (u = 0; u < rk->lay.nu; u++) rk->unit_param[u] = rk->params ? (char *)rk->params + rk->lay.u[u].offset * be->elt : NULL;
    if (!r->inference) {
        if (zero < 2) {
            MGT__ALLOC(rk->grads, rk->lay.size, MGT_MEM_GRADS)
            for (u = 0; u < rk->lay.nu; u++) rk->unit_grad[u] = rk->grads + rk->lay.u[u].offset;
        } else {
            MGT__ALLOC(rk->gshard, rk->shard, MGT_MEM_GRADS)
            if (rk->max_block) {
                MGT__ALLOC(rk->unit_gbuf[0], rk->max_block, MGT_MEM_GRADS)
                MGT__ALLOC(rk->unit_gbuf[1], rk->max_block, MGT_MEM_GRADS)
                MGT__ALLOC(rk->rs_tmp1, rk->max_block / (size_t)p->replicas, MGT_MEM_BUFFERS)
            }
            rk->gpending[0] = rk->gpending[1] = -1;
            MGT__ALLOC(rk->rs_tmp, rk->max_unit / (size_t)p->replicas, MGT_MEM_BUFFERS)
            for (u = 0, k = 0; u < rk->lay.nu; u++) {
                rk->unit_grad[u] = NULL;
                if (mgt__is_block_unit(rk, u)) continue;
                rk->keep_size[k] = rk->lay.u[u].size;
                MGT__ALLOC(rk->keep_gbuf[k], rk->keep_size[k], MGT_MEM_GRADS)
                rk->unit_grad[u] = rk->keep_gbuf[k++];
            }
        }
        MGT__ALLOC(rk->m, zero >= 1 ? rk->shard : rk->lay.size, MGT_MEM_OPTIMIZER)
        MGT__ALLOC(rk->v, zero >= 1 ? rk->shard : rk->lay.size, MGT_MEM_OPTIMIZER)
        if (r->dtype != MGT_F32) MGT__ALLOC(rk->master, zero >= 1 ? rk->shard : rk->lay.size, MGT_MEM_OPTIMIZER)
    }
    if (be->sum_squares_many && be->sum_doubles) { /* the step's statistics, on the device until one download */
        MGT__ALLOC_AS(double *, rk->dstat, sizeof(double) * (size_t)(2 + p->world), MGT_MEM_BUFFERS)
        rk->ss_x = (const float **)MGT_MALLOC(sizeof(float *) * (size_t)rk->lay.n);
        rk->ss_n = (size_t *)MGT_MALLOC(sizeof(size_t) * (size_t)rk->lay.n);
        if (!rk->ss_x || !rk->ss_n) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    }
#undef MGT__ALLOC
#undef MGT__ALLOC_AS
    return MGT_OK;
}

/* the DP buckets, and the activations of the micro-batches in flight */
static mgt_result mgt__rank_activations(mgt_run *r, mgt__rank *rk) {
    const mgt_plan *p = &r->plan;
    const mgt_config *cfg = &r->plan.cfg;
    mgt_backend *be = rk->be;
    int u, k, M = p->micro_steps;
    size_t bucket_floats, in_bucket = 0;
    /* DP buckets: consecutive units in the order backward finishes them, about bucket_mb each */
    bucket_floats = (size_t)(cfg->parallel.bucket_mb * 1048576.0 / sizeof(float));
    for (u = rk->lay.nu - 1, k = 0; u >= 0; u--) {
        if (in_bucket > 0 && in_bucket + rk->lay.u[u].size > bucket_floats) { k++; in_bucket = 0; }
        rk->bucket_of_unit[u] = k;
        in_bucket += rk->lay.u[u].size;
    }
    /* activations: one set per micro-batch in flight (GPipe: all of them; 1F1B: pp - stage) */
    rk->nsets = r->inference || p->pp == 1 ? 1 : cfg->parallel.pp_schedule == 1 ? M : (p->pp - rk->ppr < M ? p->pp - rk->ppr : M);
    if (!r->inference && (rk->shape.chunks > 1 || rk->shape.zb)) /* interleaved or zb: the sets its actions need, the plan's count */
        MGT__TRY(mgt__interleaved_plan(p, rk->ppr, &rk->pipe[0], &rk->npipe[0], &rk->pipe[1], &rk->npipe[1], &rk->nsets));
    rk->acts = (mgt__acts *)MGT_MALLOC(sizeof(mgt__acts) * (size_t)rk->nsets);
    if (!rk->acts) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    memset(rk->acts, 0, sizeof(mgt__acts) * (size_t)rk->nsets);
    for (k = 0; k < rk->nsets; k++) {
        rk->acts[k].resid = (void **)MGT_MALLOC(sizeof(void *) * (size_t)(rk->nblocks + 1));
        rk->acts[k].layer = (mgt__layer_acts *)MGT_MALLOC(sizeof(mgt__layer_acts) * (size_t)(rk->nblocks + 1));
        if (!rk->acts[k].resid || !rk->acts[k].layer) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    }
    {
        size_t one = mgt__acts_layout(&rk->acts[0], NULL, &rk->shape);
        rk->acts_bytes = one * (size_t)rk->nsets;
        rk->acts_block = be->alloc(be, rk->acts_bytes, MGT_MEM_ACTIVATIONS);
        if (!rk->acts_block)
            return mgt__fail(MGT_ERROR_MEMORY, "out of memory: rank %d needs %.1f MiB of activations; lower [train] micro_batch or use recompute = full",
                             rk->rank, (double)rk->acts_bytes / 1048576.0);
        for (k = 0; k < rk->nsets; k++) mgt__acts_layout(&rk->acts[k], (char *)rk->acts_block + (size_t)k * one, &rk->shape);
    }
    if (!r->inference) {
        rk->gs_bytes = mgt__scratch_layout(&rk->gs, NULL, &rk->shape);
        rk->gs_block = be->alloc(be, rk->gs_bytes, MGT_MEM_ACTIVATIONS);
        if (!rk->gs_block) return mgt__fail(MGT_ERROR_MEMORY, "out of memory for gradient scratch");
        mgt__scratch_layout(&rk->gs, (char *)rk->gs_block, &rk->shape);
    }
    return MGT_OK;
}

/* first values from (seed, tensor name, element): CPU ranks with their threads, GPU ranks in a host
   copy, one thread each */
static mgt_result mgt__rank_first_values(mgt__rank *rk) {
    mgt_backend *be = rk->be;
    int t;
    MGT__TRY(mgt__mirror(rk));
    for (t = 0; t < rk->lay.n; t++) {
        mgt__init_args a;
        a.rk = rk;
        a.x = &rk->lay.t[t];
        if (be->host_memory) mgt__pool_run(MGT__POOL(be), mgt__init_task, &a);
        else mgt__init_task(&a, 0, 1);
    }
    mgt__unmirror(rk, 1);
    return MGT_OK;
}

static mgt_result mgt__rank_init(mgt_run *r, mgt__rank *rk, int index) {
    MGT__TRY(mgt__rank_place(r, rk, index));
    MGT__TRY(mgt__rank_backend(r, rk));
    MGT__TRY(mgt__rank_state(r, rk));
    MGT__TRY(mgt__rank_activations(r, rk));
    return r->world_api->holds_values ? mgt__rank_first_values(rk) : MGT_OK; /* simulated ranks hold nothing */
}
/* ==== end src/rank_make.c ==== */
/* ==== begin src/weights.c ==== */
#line 1 "src/weights.c"
/* src/weights.c - [model] init's sources read as mgt's global tensors: what every source shares, mgt
   checkpoints, llm.c's .bin */
/* ---- weights in: the sources of [model] init ------------------------------------------------
   init reads weights only (the run starts at step 0 with fresh AdamW moments and data position)
   from an mgt checkpoint (a file or a run folder's newest), a Hugging Face folder (src/weights_hf.c)
   or llm.c's GPT-2 .bin. Every source becomes mgt's global tensors (fp32 master weights, whatever
   the file's F32/F16/BF16/F64), which the ranks slice as they do on resume, so init works under
   every layout. A source names its tensors through its `parts`: mgt's own names here, Hugging
   Face's in src/weights_hf.c; src/weights_init.c opens the source init names. */

enum { MGT__SRC_MGT, MGT__SRC_GPT2, MGT__SRC_LLAMA, MGT__SRC_LLMC };
#define MGT__LLMC_MAGIC 20240326
/* what to open of a source: its model (0), its tensors too (1), or a Hugging Face folder's tensor
   index alone (a check of the shapes before a run allocates anything) */
#define MGT__SRC_INDEX 2
/* what init takes, for the messages that refuse what it names */
#ifndef MGT_NO_HF
#define MGT__INIT_TAKES "an mgt checkpoint or run folder, a Hugging Face folder (config.json beside model.safetensors) or llm.c's .bin"
#else
#define MGT__INIT_TAKES "an mgt checkpoint or run folder, or llm.c's .bin (not a Hugging Face folder: this program was built with MGT_NO_HF)"
#endif

/* the file's tensors that make mgt's global tensor x of the model cfg, stacked by rows in mgt's
   (out, in) order: Llama's q, k, v into c_attn and gate, up into c_fc; transpose: the file keeps
   (in, out) (GPT-2's Conv1D); src_rows: the file's rows, of which mgt takes the first `rows`
   (a position table longer than seq_len). The count, 1 to 3. Export writes the same parts. */
typedef struct mgt__part { char name[128]; int rows, src_rows, cols, transpose; } mgt__part;
typedef int (*mgt__parts_fn)(int kind, const mgt_config *cfg, int positions, const mgt_tensor_info *x, mgt__part part[3]);

typedef struct mgt__src {
    int kind;
    mgt__parts_fn parts;                    /* its names of mgt's tensors: mgt__own_parts, mgt__hf_parts */
    char path[1200];                        /* the checkpoint file, the Hugging Face folder or the .bin */
    char what[64];                          /* "config.json", "the checkpoint's preset", "the llm.c header" */
    mgt__st_file *files;                    /* the checkpoint or the Hugging Face shards */
    int nfiles;
    unsigned char *bin;                     /* llm.c: the whole file */
    size_t bin_size;
    int hdr[8];                             /* llm.c: magic, version, maxT, V, L, NH, C, Vp */
    int positions;                          /* rows of the file's position table (its longest context) */
    mgt_config model;                       /* the file's model keys */
    char field[MGT_CONFIG_NKEYS][64];       /* the file's field for each model key it gives; "" none */
} mgt__src;

/* mgt's own names (an mgt checkpoint, llm.c's .bin): one part, the whole tensor; a position table
   may have more rows than the model's seq_len */
static int mgt__own_parts(int kind, const mgt_config *cfg, int positions, const mgt_tensor_info *x, mgt__part part[3]) {
    (void)kind, (void)cfg;
    memset(part, 0, sizeof(mgt__part) * 3);
    part[0].rows = part[0].src_rows = x->shape[0];
    part[0].cols = x->ndim == 2 ? x->shape[1] : 0;
    if (!strcmp(x->name, "wpe")) part[0].src_rows = positions;
    mgt__strlcpy(part[0].name, x->name, sizeof part[0].name);
    return 1;
}

static void mgt__src_free(mgt__src *s) {
    int i;
    if (!s) return;
    for (i = 0; i < s->nfiles; i++) mgt__st_close(&s->files[i]);
    MGT_FREE(s->files);
    MGT_FREE(s->bin);
    MGT_FREE(s);
}

/* the file's value of model key `name` (text as a preset would write it) and the field it came from */
static mgt_result mgt__src_put(mgt__src *s, const char *name, const char *value, const char *field) {
    int key = mgt__find_key("model", name);
    char why[512], most[32];
    if (!strcmp(name, "seq_len")) { /* the file's positions; mgt's longest context, where the file has more (Llama 3's 131072) */
        long long n = strtoll(value, NULL, 10);
        s->positions = n > 0 && n < 2000000000 ? (int)n : 0;
        snprintf(most, sizeof most, "%d", (int)mgt__keys[key].info.max);
        if (n > (long long)mgt__keys[key].info.max) value = most;
    }
    if (!mgt__set_value(&s->model, key, value, why, sizeof why))
        return mgt__fail(MGT_ERROR_CONFIG, "%s: %s's %s = %s does not fit mgt's [model] %s: %s", s->path, s->what, field, value, name, why);
    mgt__strlcpy(s->field[key], field, sizeof s->field[key]);
    return MGT_OK;
}

/* llm.c's GPT-2 .bin (train_gpt2.c's write_model): 256 int32 of header (magic 20240326; version 3
   fp32 or 5 bf16; maxT, V, L, NH, C, Vp), then 16 tensors, layer-major, in llm.c's order below,
   each (out, in) as mgt keeps them: the header gives the model, every key GPT-2's */
static const char *const mgt__llmc_names[16] = {"wte", "wpe", "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                                                "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
                                                "mlp.c_proj.bias", "ln_f.weight", "ln_f.bias"};
static void mgt__llmc_sizes(const int *hdr, long long size[16]) {
    long long maxT = hdr[2], L = hdr[4], C = hdr[6], Vp = hdr[7];
    long long s[16] = {Vp * C, maxT * C, L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C, L * C, L * C, L * 4 * C * C, L * 4 * C, L * C * 4 * C, L * C, C, C};
    memcpy(size, s, sizeof s);
}
/* the element offset of mgt's global tensor `name` in the .bin's parameters; -1 if llm.c has none */
static long long mgt__llmc_offset(const int *hdr, const char *name) {
    long long size[16], at = 0;
    int layer = -1, off = 0, i;
    const char *rest = name;
    if (sscanf(name, "h.%d.%n", &layer, &off) == 1 && off > 0) rest = name + off;
    else layer = -1;
    mgt__llmc_sizes(hdr, size);
    for (i = 0; i < 16; i++) {
        if (!strcmp(rest, mgt__llmc_names[i]) && (layer >= 0) == (i >= 2 && i < 14)) return at + (layer >= 0 ? layer * (size[i] / hdr[4]) : 0);
        at += size[i];
    }
    return -1;
}
static mgt_result mgt__llmc_open(mgt__src *s, int weights) {
    int32_t h[256];
    long long size[16], total = 0;
    struct stat st;
    char why[256], v[32];
    int i, fd = mgt__open_regular(s->path, &st, why, sizeof why);
    static const char *const keys[] = {"seq_len", "vocab_size", "n_layer", "n_head", "d_model"};
    static const char *const fields[] = {"header[2] maxT", "header[3] vocab_size", "header[4] num_layers", "header[5] num_heads", "header[6] channels"};
    s->kind = MGT__SRC_LLMC;
    s->parts = mgt__own_parts;
    mgt__strlcpy(s->what, "the llm.c header", sizeof s->what);
    if (fd < 0) return mgt__fail(MGT_ERROR_CONFIG, "%s: cannot open: %s", s->path, why);
    if (read(fd, h, sizeof h) != (ssize_t)sizeof h) { close(fd); return mgt__fail(MGT_ERROR_CONFIG, "%s: shorter than llm.c's 1024-byte header", s->path); }
    for (i = 0; i < 8; i++) s->hdr[i] = h[i];
    if (h[1] != 3 && h[1] != 5) {
        close(fd);
        return mgt__fail(MGT_ERROR_CONFIG, "%s: llm.c model version %d; mgt reads version 3 (fp32) and 5 (bf16), as train_gpt2.c/.cu write them", s->path, h[1]);
    }
    for (i = 2; i < 8; i++) if (h[i] <= 0) break;
    /* within mgt's own limits before any product of them (untrusted: a header of 1 << 30 layers and
       channels would overflow the sizes below); the vocabulary's padding at most 16 Mi rows too */
    if (i == 8 && (h[2] > 65536 || h[3] > 16777216 || h[4] > 1024 || h[5] > 1024 || h[6] > 65536 || h[7] > 16777216)) {
        close(fd);
        return mgt__fail(MGT_ERROR_CONFIG, "%s: llm.c header (maxT %d, V %d, L %d, NH %d, C %d, Vp %d) is beyond what mgt trains (maxT and C at most 65536, "
                         "V and Vp 16777216, L and NH 1024); the file is damaged or not a model", s->path, h[2], h[3], h[4], h[5], h[6], h[7]);
    }
    if (i < 8 || h[7] < h[3] || h[6] % h[5]) {
        close(fd);
        return mgt__fail(MGT_ERROR_CONFIG, "%s: llm.c header (maxT %d, V %d, L %d, NH %d, C %d, Vp %d) is not a GPT-2 model; the file is damaged", s->path, h[2], h[3],
                         h[4], h[5], h[6], h[7]);
    }
    mgt__llmc_sizes(s->hdr, size);
    for (i = 0; i < 16; i++) total += size[i];
    if ((long long)st.st_size != 1024 + total * (h[1] == 3 ? 4 : 2)) {
        close(fd);
        return mgt__fail(MGT_ERROR_CONFIG, "%s: %lld bytes, but its header's model needs %lld: the file is truncated or damaged", s->path, (long long)st.st_size,
                         1024 + total * (h[1] == 3 ? 4 : 2));
    }
    for (i = 0; i < 5; i++) {
        snprintf(v, sizeof v, "%d", h[2 + i]);
        if (mgt__src_put(s, keys[i], v, fields[i]) != MGT_OK) { close(fd); return MGT_ERROR_CONFIG; }
    }
    snprintf(v, sizeof v, "%d", 4 * h[6]);
    if (mgt__src_put(s, "d_ff", v, "4 x channels (GPT-2)") != MGT_OK || mgt__src_put(s, "n_kv_head", "0", "GPT-2") != MGT_OK ||
        mgt__src_put(s, "norm", "layernorm", "GPT-2") != MGT_OK || mgt__src_put(s, "norm_eps", "1e-5", "GPT-2") != MGT_OK ||
        mgt__src_put(s, "positions", "learned", "GPT-2") != MGT_OK || mgt__src_put(s, "mlp", "gelu", "GPT-2") != MGT_OK ||
        mgt__src_put(s, "bias", "1", "GPT-2") != MGT_OK || mgt__src_put(s, "tied_head", "1", "GPT-2") != MGT_OK) { close(fd); return MGT_ERROR_CONFIG; }
    if (weights) {
        s->bin_size = (size_t)st.st_size;
        s->bin = (unsigned char *)MGT_MALLOC(s->bin_size);
        if (!s->bin || pread(fd, s->bin, s->bin_size, 0) != (ssize_t)s->bin_size) {
            close(fd);
            return mgt__fail(s->bin ? MGT_ERROR_IO : MGT_ERROR_MEMORY, "%s: cannot read its %zu bytes", s->path, s->bin_size);
        }
    }
    close(fd);
    return MGT_OK;
}

/* an mgt checkpoint: its stored preset's model section, its weights (not the moments) */
static mgt_result mgt__ckpt_src(mgt__src *s, int weights) {
    mgt_config c;
    mgt_result res;
    int i;
    s->kind = MGT__SRC_MGT;
    s->parts = mgt__own_parts;
    mgt__strlcpy(s->what, "the checkpoint's preset", sizeof s->what);
    if ((res = mgt_checkpoint_config(s->path, &c)) != MGT_OK) {
        char why[1024];
        mgt__strlcpy(why, mgt_last_error(), sizeof why);
        return mgt__fail(res, "%s; [model] init takes " MGT__INIT_TAKES, why);
    }
    for (i = 0; i < MGT_CONFIG_NKEYS; i++) {
        char v[MGT_STR_MAX + 64], field[80];
        if (strcmp(mgt__keys[i].info.section, "model") || !strcmp(mgt__keys[i].info.name, "init")) continue;
        mgt_config_value_string(&c, i, v, sizeof v);
        snprintf(field, sizeof field, "[model] %s", mgt__keys[i].info.name);
        MGT__TRY(mgt__src_put(s, mgt__keys[i].info.name, v, field));
    }
    if (!weights) return MGT_OK;
    s->files = (mgt__st_file *)mgt__calloc(1, sizeof *s->files);
    if (!s->files) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    MGT__TRY(mgt__checkpoint_open(&s->files[0], s->path));
    s->nfiles = 1;
    return MGT_OK;
}

/* a tensor of the file by name; GPT-2 files saved without the "transformer." prefix are found too */
static const mgt__st_tensor *mgt__src_find(const mgt__src *s, const char *name, const mgt__st_file **file) {
    int i;
    for (i = 0; i < s->nfiles; i++) {
        const mgt__st_tensor *t = mgt__st_find(&s->files[i], name);
        if (t) { *file = &s->files[i]; return t; }
    }
    return s->kind == MGT__SRC_GPT2 && !strncmp(name, "transformer.", 12) ? mgt__src_find(s, name + 12, file) : NULL;
}

/* element i of raw little-endian data of a safetensors dtype (its size in bytes: 4 F32, 8 F64,
   2 BF16 or, with f16 set, F16), as fp32 */
static float mgt__st_value(const unsigned char *p, int size, int f16, size_t i) {
    if (size == 4) { float v; memcpy(&v, p + 4 * i, 4); return v; }
    if (size == 8) { double v; memcpy(&v, p + 8 * i, 8); return (float)v; }
    { uint16_t h; memcpy(&h, p + 2 * i, 2); return f16 ? mgt__f16_to_f32(h) : mgt__bf16_to_f32(h); }
}

/* the safetensors tensor of part p (name prefixed by `prefix`), checked: there, of a float dtype
   (its size in bytes in *size) and of the shape the model needs */
static mgt_result mgt__src_tensor(const mgt__src *s, const mgt__part *p, const char *prefix, const char *mgt_name, const mgt__st_file **f,
                                  const mgt__st_tensor **out, int *size) {
    char name[160];
    const mgt__st_tensor *t;
    long long want0 = p->transpose ? p->cols : p->src_rows, want1 = p->transpose ? p->src_rows : p->cols;
    int ndim = p->cols ? 2 : 1;
    snprintf(name, sizeof name, "%.31s%.127s", prefix, p->name); /* a prefix: "grad.", "final." (tests) */
    *out = t = mgt__src_find(s, name, f);
    if (!t)
        return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: has no tensor '%s' (mgt's %s); %s says the model has it: use the folder as save_pretrained wrote it",
                         s->path, name, mgt_name, s->what);
    if (strcmp(t->dtype, "F32") && strcmp(t->dtype, "F64") && strcmp(t->dtype, "BF16") && strcmp(t->dtype, "F16"))
        return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: tensor '%s' is %s; mgt reads F32, F16, BF16 and F64 weights", s->path, name, t->dtype);
    *size = !strcmp(t->dtype, "F64") ? 8 : !strcmp(t->dtype, "F32") ? 4 : 2;
    if (t->ndim != ndim || t->shape[0] != want0 || (ndim == 2 && t->shape[1] != want1) || t->end - t->begin != (size_t)(want0 * (ndim == 2 ? want1 : 1)) * (size_t)*size)
        return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: tensor '%s' has shape [%lld%s%lld], but %s's model needs [%lld%s%lld]; the weights and %s disagree: "
                         "use the files as they were saved together", s->path, name, t->shape[0], t->ndim > 1 ? "," : "", t->ndim > 1 ? t->shape[1] : 0,
                         s->what, want0, ndim > 1 ? "," : "", ndim > 1 ? want1 : 0, s->what);
    return MGT_OK;
}

/* every tensor model cfg needs, checked against a Hugging Face folder's index (mgt__src_tensor)
   before anything is allocated for them */
static mgt_result mgt__src_check(const mgt__src *s, const mgt_config *cfg) {
    mgt__layout g;
    mgt_result res = MGT_OK;
    int t;
    MGT__TRY(mgt__global_layout(cfg, &g));
    for (t = 0; t < g.n && res == MGT_OK; t++) {
        mgt__part part[3];
        int i, n = s->parts(s->kind, cfg, s->positions, &g.t[t].info, part), size;
        for (i = 0; i < n && res == MGT_OK; i++) {
            const mgt__st_file *f;
            const mgt__st_tensor *x;
            res = mgt__src_tensor(s, &part[i], "", g.t[t].info.name, &f, &x, &size);
        }
    }
    mgt__layout_free(&g);
    return res;
}

/* part p (name prefixed by `prefix`) into its rows of dst, in mgt's layout */
static mgt_result mgt__src_read(const mgt__src *s, const mgt__part *p, const char *prefix, const char *mgt_name, float *dst) {
    size_t cols = p->cols ? (size_t)p->cols : 1, r, c;
    const unsigned char *data;
    const char *dtype;
    int size;
    if (s->kind == MGT__SRC_LLMC) {
        long long at = mgt__llmc_offset(s->hdr, mgt_name);
        if (at < 0) return mgt__fail(MGT_ERROR_CONFIG, "%s: llm.c's GPT-2 has no %s; the preset's model is not GPT-2", s->path, mgt_name);
        data = s->bin + 1024;
        for (r = 0; r < (size_t)p->rows; r++)
            for (c = 0; c < cols; c++) dst[r * cols + c] = mgt__st_value(data, s->hdr[1] == 5 ? 2 : 4, 0, (size_t)at + r * cols + c);
        return MGT_OK;
    } else {
        const mgt__st_file *f = NULL;
        const mgt__st_tensor *t;
        MGT__TRY(mgt__src_tensor(s, p, prefix, mgt_name, &f, &t, &size));
        dtype = t->dtype;
        data = (const unsigned char *)mgt__st_data(f, t);
        for (r = 0; r < (size_t)p->rows; r++)
            for (c = 0; c < cols; c++) dst[r * cols + c] = mgt__st_value(data, size, !strcmp(dtype, "F16"), p->transpose ? c * (size_t)p->src_rows + r : r * cols + c);
        return MGT_OK;
    }
}

/* every global tensor of model cfg from the file (names prefixed by `prefix`), as fp32 in mgt's
   layout: g and *out (free with mgt__free_global and mgt__layout_free) */
static mgt_result mgt__src_global(const mgt__src *s, const mgt_config *cfg, const char *prefix, mgt__layout *g, float ***out) {
    mgt_result res;
    int t;
    *out = NULL;
    MGT__TRY(mgt__global_layout(cfg, g));
    *out = (float **)MGT_MALLOC(sizeof(float *) * (size_t)g->n);
    if (!*out) { mgt__layout_free(g); return mgt__fail(MGT_ERROR_MEMORY, "out of memory"); }
    memset(*out, 0, sizeof(float *) * (size_t)g->n);
    for (t = 0, res = MGT_OK; t < g->n && res == MGT_OK; t++) {
        mgt__part part[3];
        int i, n = s->parts(s->kind, cfg, s->positions, &g->t[t].info, part);
        size_t row = 0, cols = g->t[t].info.ndim == 2 ? (size_t)g->t[t].info.shape[1] : 1;
        (*out)[t] = (float *)MGT_MALLOC(sizeof(float) * g->t[t].info.numel);
        if (!(*out)[t]) res = mgt__fail(MGT_ERROR_MEMORY, "out of memory reading [model] init");
        for (i = 0; i < n && res == MGT_OK; row += (size_t)part[i].rows, i++) res = mgt__src_read(s, &part[i], prefix, g->t[t].info.name, (*out)[t] + row * cols);
    }
    if (res != MGT_OK) {
        mgt__free_global(g, *out);
        mgt__layout_free(g);
        *out = NULL;
    }
    return res;
}
/* ==== end src/weights.c ==== */
/* ==== begin src/weights_hf.c ==== */
#ifndef MGT_NO_HF
#line 1 "src/weights_hf.c"
/* src/weights_hf.c - Hugging Face's weights in and out: a folder as [model] init (config.json and its
   JSON reader, model.safetensors or its shards, the tensor names), mgt_export; left out by MGT_NO_HF */
/* ---- Hugging Face in and out --------------------------------------------------------------------
   A Hugging Face folder (config.json and model.safetensors, or shards listed by
   model.safetensors.index.json) of GPT2LMHeadModel or LlamaForCausalLM is a source of [model] init
   (src/weights.c); mgt_export writes the reverse: a folder from_pretrained loads. One table
   (mgt__hf_parts) maps mgt's names to Hugging Face's both ways. */

/* reads a whole small file (config.json, an index) into a NUL-terminated buffer the caller frees */
static char *mgt__read_text(const char *path, char *why, size_t cap) {
    struct stat st;
    int fd = mgt__open_regular(path, &st, why, cap);
    char *text;
    if (fd < 0) return NULL;
    text = st.st_size < (1 << 26) ? (char *)MGT_MALLOC((size_t)st.st_size + 1) : NULL;
    if (!text || read(fd, text, (size_t)st.st_size) != (ssize_t)st.st_size) {
        snprintf(why, cap, "%s", text ? "read error" : "too large or out of memory");
        MGT_FREE(text);
        close(fd);
        return NULL;
    }
    close(fd);
    text[st.st_size] = 0;
    return text;
}

/* skips one JSON value of any kind (config.json has nested objects, arrays, true, null); nesting
   deeper than 64 is refused, so a hostile file cannot exhaust the stack */
static int mgt__json_skip_at(const char **p, int depth) {
    mgt__json_ws(p);
    if (depth > 64) return 0;
    if (**p == '"') {
        mgt__buf b;
        int ok;
        memset(&b, 0, sizeof b);
        ok = mgt__json_string(p, &b);
        MGT_FREE(b.p);
        return ok;
    }
    if (**p == '{' || **p == '[') {
        char close = **p == '{' ? '}' : ']';
        (*p)++;
        mgt__json_ws(p);
        if (**p == close) { (*p)++; return 1; }
        for (;;) {
            if (close == '}') {
                mgt__buf k;
                int ok;
                memset(&k, 0, sizeof k);
                ok = mgt__json_string(p, &k) && mgt__json_expect(p, ':');
                MGT_FREE(k.p);
                if (!ok) return 0;
            }
            if (!mgt__json_skip_at(p, depth + 1)) return 0;
            mgt__json_ws(p);
            if (**p == ',') { (*p)++; continue; }
            if (**p == close) { (*p)++; return 1; }
            return 0;
        }
    }
    {
        const char *s = *p;
        while (*s && strchr("+-.0123456789eEtrufalsn", *s)) s++;
        if (s == *p) return 0;
        *p = s;
        return 1;
    }
}

static int mgt__json_skip(const char **p) { return mgt__json_skip_at(p, 0); }

/* the value of member `key` of the object at obj, or NULL (absent, or the text is not an object) */
static const char *mgt__json_member(const char *obj, const char *key) {
    const char *p = obj;
    if (!obj || !mgt__json_expect(&p, '{')) return NULL;
    mgt__json_ws(&p);
    if (*p == '}') return NULL;
    for (;;) {
        mgt__buf k;
        int match;
        memset(&k, 0, sizeof k);
        if (!mgt__json_string(&p, &k) || !mgt__json_expect(&p, ':')) { MGT_FREE(k.p); return NULL; }
        match = !strcmp(k.p, key);
        MGT_FREE(k.p);
        mgt__json_ws(&p);
        if (match) return p;
        if (!mgt__json_skip(&p) || !mgt__json_expect(&p, ',')) return NULL;
    }
}

/* a scalar member as text: a string's characters, a number's digits, "1"/"0" for true/false;
   0 when absent or null */
static int mgt__json_text(const char *obj, const char *key, char *out, size_t cap) {
    const char *p = mgt__json_member(obj, key), *end;
    if (!p || !strncmp(p, "null", 4)) return 0;
    if (*p == '"') {
        mgt__buf b;
        memset(&b, 0, sizeof b);
        if (!mgt__json_string(&p, &b)) { MGT_FREE(b.p); return 0; }
        mgt__strlcpy(out, b.p, cap);
        MGT_FREE(b.p);
        return 1;
    }
    if (!strncmp(p, "true", 4) || !strncmp(p, "false", 5)) { mgt__strlcpy(out, p[0] == 't' ? "1" : "0", cap); return 1; }
    end = p;
    if (!mgt__json_skip(&end) || *p == '{' || *p == '[') return 0;
    snprintf(out, cap, "%.*s", (int)(end - p), p);
    return 1;
}

/* config.json member `field` into model key `name`; absent or null: `def` (NULL: required) */
static mgt_result mgt__hf_key(mgt__src *s, const char *json, const char *field, const char *name, const char *def) {
    char v[128];
    if (!mgt__json_text(json, field, v, sizeof v)) {
        if (!def) return mgt__fail(MGT_ERROR_CONFIG, "%s/config.json: has no \"%s\"; a %s config.json needs it (save the model with save_pretrained)", s->path, field,
                                   s->kind == MGT__SRC_GPT2 ? "GPT2LMHeadModel" : "LlamaForCausalLM");
        mgt__strlcpy(v, def, sizeof v);
    }
    return mgt__src_put(s, name, v, field);
}

/* the Hugging Face config.json's model: GPT2LMHeadModel or LlamaForCausalLM, refusing what mgt's
   blocks do not compute (another activation, scaled RoPE, attention scaled by layer) */
static mgt_result mgt__hf_config(mgt__src *s, const char *json) {
    const char *arch = mgt__json_member(json, "architectures");
    char name[128] = "", v[128], def[32];
    int gpt2;
    if (arch && mgt__json_expect(&arch, '[')) {
        mgt__buf b;
        memset(&b, 0, sizeof b);
        if (mgt__json_string(&arch, &b)) mgt__strlcpy(name, b.p, sizeof name);
        MGT_FREE(b.p);
    }
    if (!name[0] && mgt__json_text(json, "model_type", v, sizeof v)) /* a config.json without "architectures" */
        mgt__strlcpy(name, !strcmp(v, "gpt2") ? "GPT2LMHeadModel" : !strcmp(v, "llama") ? "LlamaForCausalLM" : v, sizeof name);
    if (strcmp(name, "GPT2LMHeadModel") && strcmp(name, "LlamaForCausalLM"))
        return mgt__fail(MGT_ERROR_CONFIG, "%s/config.json: architecture '%s'; [model] init reads GPT2LMHeadModel or LlamaForCausalLM (Llama-family "
                         "checkpoints of other names need their config.json's \"architectures\" and tensors in Llama's form)", s->path, name[0] ? name : "(none)");
    gpt2 = !strcmp(name, "GPT2LMHeadModel");
    s->kind = gpt2 ? MGT__SRC_GPT2 : MGT__SRC_LLAMA;
    mgt__strlcpy(s->what, "config.json", sizeof s->what);
#define MGT__HF(field, key, def) MGT__TRY(mgt__hf_key(s, json, field, key, def))
    if (gpt2) {
        if (mgt__json_text(json, "activation_function", v, sizeof v) && strcmp(v, "gelu_new") && strcmp(v, "gelu_pytorch_tanh"))
            return mgt__fail(MGT_ERROR_CONFIG, "%s/config.json: activation_function \"%s\"; mgt's GELU is the tanh form (gelu_new)", s->path, v);
        if (mgt__json_text(json, "scale_attn_by_inverse_layer_idx", v, sizeof v) && !strcmp(v, "1"))
            return mgt__fail(MGT_ERROR_CONFIG, "%s/config.json: scale_attn_by_inverse_layer_idx is true; mgt scales attention by 1/sqrt(head size) only", s->path);
        if (mgt__json_text(json, "scale_attn_weights", v, sizeof v) && !strcmp(v, "0"))
            return mgt__fail(MGT_ERROR_CONFIG, "%s/config.json: scale_attn_weights is false; mgt scales attention by 1/sqrt(head size)", s->path);
        MGT__HF("n_layer", "n_layer", NULL);
        MGT__HF("n_head", "n_head", NULL);
        MGT__HF("n_head", "n_kv_head", NULL);
        MGT__HF("n_embd", "d_model", NULL);
        snprintf(def, sizeof def, "%d", 4 * s->model.model.d_model);
        MGT__HF("n_inner", "d_ff", def);
        MGT__HF("vocab_size", "vocab_size", NULL);
        MGT__HF("n_positions", "seq_len", NULL);
        MGT__HF("layer_norm_epsilon", "norm_eps", "1e-5");
        MGT__TRY(mgt__src_put(s, "norm", "layernorm", "model_type gpt2"));
        MGT__TRY(mgt__src_put(s, "positions", "learned", "model_type gpt2"));
        MGT__TRY(mgt__src_put(s, "mlp", "gelu", "activation_function"));
        MGT__TRY(mgt__src_put(s, "bias", "1", "model_type gpt2"));
        MGT__HF("tie_word_embeddings", "tied_head", "1");
    } else {
        const char *rope = mgt__json_member(json, "rope_parameters");
        char bias[8] = "0", mlp_bias[8] = "0";
        if (!rope) rope = mgt__json_member(json, "rope_scaling"); /* transformers 4's name */
        if (mgt__json_text(json, "hidden_act", v, sizeof v) && strcmp(v, "silu"))
            return mgt__fail(MGT_ERROR_CONFIG, "%s/config.json: hidden_act \"%s\"; mgt's SwiGLU uses silu", s->path, v);
        if (rope && mgt__json_text(rope, "rope_type", v, sizeof v) && strcmp(v, "default"))
            return mgt__fail(MGT_ERROR_CONFIG, "%s/config.json: rope_type \"%s\" (scaled RoPE); mgt computes the default rotation only", s->path, v);
        MGT__HF("num_hidden_layers", "n_layer", NULL);
        MGT__HF("num_attention_heads", "n_head", NULL);
        MGT__HF("hidden_size", "d_model", NULL);
        if (mgt__json_text(json, "head_dim", v, sizeof v) && /* bounded, in 64 bits: a head_dim of 536870920 x 8 heads wrapped to 64 in an int */
            (strtoll(v, NULL, 10) < 1 || strtoll(v, NULL, 10) > 65536 || strtoll(v, NULL, 10) * (long long)s->model.model.n_head != (long long)s->model.model.d_model))
            return mgt__fail(MGT_ERROR_CONFIG, "%s/config.json: head_dim %s is not hidden_size / num_attention_heads; mgt's heads split d_model", s->path, v);
        snprintf(def, sizeof def, "%d", s->model.model.n_head);
        MGT__HF("num_key_value_heads", "n_kv_head", def);
        MGT__HF("intermediate_size", "d_ff", NULL);
        MGT__HF("vocab_size", "vocab_size", NULL);
        MGT__HF("max_position_embeddings", "seq_len", NULL);
        MGT__HF("rms_norm_eps", "norm_eps", "1e-6");
        if (mgt__json_text(json, "rope_theta", v, sizeof v)) MGT__TRY(mgt__src_put(s, "rope_theta", v, "rope_theta"));
        else if (rope && mgt__json_text(rope, "rope_theta", v, sizeof v)) MGT__TRY(mgt__src_put(s, "rope_theta", v, "rope_parameters.rope_theta"));
        else MGT__TRY(mgt__src_put(s, "rope_theta", "10000", "rope_theta"));
        mgt__json_text(json, "attention_bias", bias, sizeof bias);
        mgt__json_text(json, "mlp_bias", mlp_bias, sizeof mlp_bias);
        if (strcmp(bias, mlp_bias))
            return mgt__fail(MGT_ERROR_CONFIG, "%s/config.json: attention_bias and mlp_bias differ; mgt's [model] bias is one switch for every linear layer", s->path);
        MGT__TRY(mgt__src_put(s, "bias", bias, "attention_bias"));
        MGT__TRY(mgt__src_put(s, "norm", "rmsnorm", "model_type llama"));
        MGT__TRY(mgt__src_put(s, "positions", "rope", "model_type llama"));
        MGT__TRY(mgt__src_put(s, "mlp", "swiglu", "hidden_act"));
        MGT__HF("tie_word_embeddings", "tied_head", "0");
    }
#undef MGT__HF
    return MGT_OK;
}

/* the safetensors files of a Hugging Face folder: model.safetensors, or the shards its index names;
   header_only: their tensor index alone (a check of the shapes before a run allocates anything) */
static mgt_result mgt__hf_files(mgt__src *s, int header_only) {
    char path[1600], why[256], (*names)[256] = NULL;
    char *index;
    const char *map;
    mgt_result res = MGT_OK;
    int i;
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", s->path);
    if (access(path, F_OK)) {
        snprintf(path, sizeof path, "%s/model.safetensors", s->path);
        if (access(path, F_OK))
            return mgt__fail(MGT_ERROR_CONFIG, "%s: has config.json but no model.safetensors (nor model.safetensors.index.json); download the weights in "
                             "safetensors form (pytorch_model.bin is not read)", s->path);
        s->files = (mgt__st_file *)mgt__calloc(1, sizeof *s->files);
        if (!s->files) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
        MGT__TRY(mgt__st_read(&s->files[0], path, header_only));
        s->nfiles = 1;
        return MGT_OK;
    }
    if (!(index = mgt__read_text(path, why, sizeof why))) return mgt__fail(MGT_ERROR_CONFIG, "%s: cannot read: %s", path, why);
    map = mgt__json_member(index, "weight_map");
    if (!map || !mgt__json_expect(&map, '{')) res = mgt__fail(MGT_ERROR_CONFIG, "%s: has no \"weight_map\" object", path);
    while (res == MGT_OK) { /* each distinct shard once, in the order the map first names it */
        mgt__buf k, v;
        int seen = 0;
        mgt__json_ws(&map);
        if (*map == '}') break;
        memset(&k, 0, sizeof k);
        memset(&v, 0, sizeof v);
        if (!mgt__json_string(&map, &k) || !mgt__json_expect(&map, ':') || !mgt__json_string(&map, &v) || strchr(v.p, '/') || strlen(v.p) >= 256)
            res = mgt__fail(MGT_ERROR_CONFIG, "%s: a malformed \"weight_map\" (tensor name to a shard file in the same folder)", path);
        for (i = 0; res == MGT_OK && i < s->nfiles && !seen; i++) seen = !strcmp(names[i], v.p);
        if (res == MGT_OK && !seen) {
            mgt__st_file *nf = (mgt__st_file *)MGT_REALLOC(s->files, sizeof *nf * (size_t)(s->nfiles + 1));
            char (*nn)[256] = (char (*)[256])MGT_REALLOC(names, 256 * (size_t)(s->nfiles + 1));
            if (nf) s->files = nf;
            if (nn) names = nn;
            if (!nf || !nn) res = mgt__fail(MGT_ERROR_MEMORY, "out of memory");
            else {
                snprintf(path, sizeof path, "%s/%s", s->path, v.p);
                res = mgt__st_read(&s->files[s->nfiles], path, header_only);
                snprintf(path, sizeof path, "%s/model.safetensors.index.json", s->path);
                if (res == MGT_OK) mgt__strlcpy(names[s->nfiles++], v.p, 256);
            }
        }
        MGT_FREE(k.p);
        MGT_FREE(v.p);
        mgt__json_ws(&map);
        if (*map == ',') map++;
    }
    MGT_FREE(index);
    MGT_FREE(names);
    if (res == MGT_OK && !s->nfiles) res = mgt__fail(MGT_ERROR_CONFIG, "%s: an empty \"weight_map\"", path);
    return res;
}

/* Hugging Face's names of mgt's tensors (mgt__part): GPT-2's under "transformer.", its Conv1D
   weights kept (in, out); Llama's under "model.", q, k, v and gate, up apart */
static int mgt__hf_parts(int kind, const mgt_config *cfg, int positions, const mgt_tensor_info *x, mgt__part part[3]) {
    static const char *const conv1d[] = {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"};
    static const char *const llama[][2] = {{"ln_1.weight", "input_layernorm.weight"},     {"attn.c_proj.weight", "self_attn.o_proj.weight"},
                                           {"attn.c_proj.bias", "self_attn.o_proj.bias"}, {"ln_2.weight", "post_attention_layernorm.weight"},
                                           {"mlp.c_proj.weight", "mlp.down_proj.weight"}, {"mlp.c_proj.bias", "mlp.down_proj.bias"}};
    mgt_dims d = mgt__model_dims(cfg);
    int layer = -1, off = 0, i, n = mgt__own_parts(kind, cfg, positions, x, part);
    const char *rest = x->name, *suffix;
    if (sscanf(x->name, "h.%d.%n", &layer, &off) == 1 && off > 0) rest = x->name + off;
    else layer = -1;
    suffix = strrchr(rest, '.') ? strrchr(rest, '.') + 1 : "weight";
    if (!strcmp(x->name, "lm_head.weight")) return n; /* the same name in both */
    if (kind == MGT__SRC_GPT2) {
        snprintf(part[0].name, sizeof part[0].name, "transformer.%s%s", x->name, strchr(x->name, '.') ? "" : ".weight");
        for (i = 0; i < 4; i++) part[0].transpose |= layer >= 0 && !strcmp(rest, conv1d[i]);
    } else if (!strcmp(x->name, "wte")) mgt__strlcpy(part[0].name, "model.embed_tokens.weight", sizeof part[0].name);
    else if (!strcmp(x->name, "ln_f.weight")) mgt__strlcpy(part[0].name, "model.norm.weight", sizeof part[0].name);
    else if (!strncmp(rest, "attn.c_attn.", 12) || !strncmp(rest, "mlp.c_fc.", 9)) {
        int qkv = rest[0] == 'a';
        n = qkv ? 3 : 2;
        for (i = 0; i < n; i++) {
            part[i].cols = part[0].cols;
            part[i].rows = part[i].src_rows = qkv ? (i == 0 ? d.NH : d.NKV) * d.hs : d.H;
            if (qkv) snprintf(part[i].name, sizeof part[i].name, "model.layers.%d.self_attn.%c_proj.%s", layer, "qkv"[i], suffix);
            else snprintf(part[i].name, sizeof part[i].name, "model.layers.%d.mlp.%s_proj.%s", layer, i == 0 ? "gate" : "up", suffix);
        }
    } else
        for (i = 0; i < (int)(sizeof llama / sizeof llama[0]); i++)
            if (!strcmp(rest, llama[i][0])) snprintf(part[0].name, sizeof part[0].name, "model.layers.%d.%s", layer, llama[i][1]);
    return n;
}

/* a Hugging Face folder s->path (it has config.json) as a source: its model, and with `weights`
   its tensors (MGT__SRC_INDEX: their index alone) */
static mgt_result mgt__hf_open(mgt__src *s, int weights) {
    char cj[1400], why[256];
    char *json;
    mgt_result res;
    snprintf(cj, sizeof cj, "%s/config.json", s->path);
    json = mgt__read_text(cj, why, sizeof why);
    res = json ? mgt__hf_config(s, json) : mgt__fail(MGT_ERROR_CONFIG, "%s: cannot read: %s", cj, why);
    MGT_FREE(json);
    s->parts = mgt__hf_parts;
    if (res == MGT_OK && weights) res = mgt__hf_files(s, weights == MGT__SRC_INDEX);
    return res;
}

/* which Hugging Face class expresses model cfg: GPT2LMHeadModel (layernorm, learned positions,
   GELU, biases, n_kv_head = n_head) or LlamaForCausalLM (rmsnorm, rope, swiglu); -1 with why */
static int mgt__hf_kind(const mgt_config *cfg, char *why, size_t cap) {
    mgt_dims d = mgt__model_dims(cfg);
    if (!d.rms && !d.rope && !d.swiglu) {
        if (d.NKV != d.NH) snprintf(why, cap, "[model] n_kv_head = %d with n_head = %d: GPT2LMHeadModel has no grouped-query attention", d.NKV, d.NH);
        else if (!d.bias) snprintf(why, cap, "[model] bias = 0: GPT2LMHeadModel's linear layers all have biases");
        else return MGT__SRC_GPT2;
        return -1;
    }
    if (d.rms && d.rope && d.swiglu) return MGT__SRC_LLAMA;
    snprintf(why, cap, "[model] norm = %s, positions = %s, mlp = %s: Hugging Face's GPT2LMHeadModel is layernorm, learned, gelu and LlamaForCausalLM rmsnorm, "
             "rope, swiglu; a mixture has no class there", d.rms ? "rmsnorm" : "layernorm", d.rope ? "rope" : "learned", d.swiglu ? "swiglu" : "gelu");
    return -1;
}

static mgt_result mgt__write_atomic(const char *path, const void *data, size_t bytes) {
    char tmp[1300];
    FILE *f;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!(f = fopen(tmp, "wb"))) return mgt__fail(MGT_ERROR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    return mgt__atomic_finish(f, fwrite(data, 1, bytes, f) == bytes, tmp, path);
}

/* config.json as from_pretrained reads it */
static void mgt__hf_config_json(mgt__buf *b, const mgt_config *cfg, int kind) {
    mgt_dims d = mgt__model_dims(cfg);
    char eps[64], theta[64];
    mgt_config_value_string(cfg, mgt__find_key("model", "norm_eps"), eps, sizeof eps);
    mgt_config_value_string(cfg, mgt__find_key("model", "rope_theta"), theta, sizeof theta);
    if (kind == MGT__SRC_GPT2)
        mgt__buf_printf(b, "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n  \"vocab_size\": %d,\n  \"n_positions\": %d,\n"
                        "  \"n_embd\": %d,\n  \"n_layer\": %d,\n  \"n_head\": %d,\n  \"n_inner\": %d,\n  \"activation_function\": \"gelu_new\",\n"
                        "  \"layer_norm_epsilon\": %s,\n  \"resid_pdrop\": 0.0,\n  \"embd_pdrop\": 0.0,\n  \"attn_pdrop\": 0.0,\n",
                        cfg->model.vocab_size, cfg->model.seq_len, d.C, cfg->model.n_layer, d.NH, d.H, eps);
    else {
        mgt__buf_printf(b, "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n  \"vocab_size\": %d,\n"
                        "  \"max_position_embeddings\": %d,\n  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n  \"num_hidden_layers\": %d,\n",
                        cfg->model.vocab_size, cfg->model.seq_len, d.C, d.H, cfg->model.n_layer);
        mgt__buf_printf(b, "  \"num_attention_heads\": %d,\n  \"num_key_value_heads\": %d,\n  \"head_dim\": %d,\n  \"hidden_act\": \"silu\",\n"
                        "  \"rms_norm_eps\": %s,\n  \"rope_theta\": %s,\n  \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": %s},\n",
                        d.NH, d.NKV, d.hs, eps, theta, theta);
        mgt__buf_printf(b, "  \"attention_bias\": %s,\n  \"mlp_bias\": %s,\n  \"attention_dropout\": 0.0,\n", d.bias ? "true" : "false", d.bias ? "true" : "false");
    }
    mgt__buf_printf(b, "  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"float32\",\n  \"generated_by\": \"mgt " MGT_VERSION_STRING " export\"\n}\n",
                    d.tied ? "true" : "false");
}

/* copies a tokenizer file into the export folder under Hugging Face's name */
static mgt_result mgt__copy_file(const char *from, const char *dir, const char *name, const char *fix) {
    char why[256], to[1400];
    char *text = mgt__read_text(from, why, sizeof why);
    mgt_result res;
    if (!text) return mgt__fail(MGT_ERROR_CONFIG, "%s: cannot read the run's tokenizer file: %s; %s", from, why, fix);
    snprintf(to, sizeof to, "%s/%s", dir, name);
    res = mgt__write_atomic(to, text, strlen(text));
    MGT_FREE(text);
    return res;
}

MGTDEF mgt_result mgt_export(const char *checkpoint, const char *dir, char *note, size_t cap) {
    char path[1200], why[512], file[1400];
    static const char *const meta[2] = {"format", "pt"}; /* transformers checks it */
    mgt_config cfg;
    mgt__src s;
    mgt__layout g;
    mgt__st_out *out = NULL;
    float **parts = NULL;
    int kind, t, i, n = 0, cap_out;
    mgt_result res = MGT_OK;
    mgt__buf json;
    if (!checkpoint || !dir) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_export: checkpoint and dir are required");
    MGT__TRY(mgt__resolve_checkpoint(checkpoint, ".", path, sizeof path));
    MGT__TRY(mgt_checkpoint_config(path, &cfg));
    if ((kind = mgt__hf_kind(&cfg, why, sizeof why)) < 0)
        return mgt__fail(MGT_ERROR_UNSUPPORTED, "%s: %s; such a model stays in mgt's checkpoints", path, why);
    MGT__TRY(mgt_mkdirs(dir));
    memset(&s, 0, sizeof s);
    s.kind = MGT__SRC_MGT;
    mgt__strlcpy(s.path, path, sizeof s.path);
    s.files = (mgt__st_file *)mgt__calloc(1, sizeof *s.files);
    if (!s.files) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    if ((res = mgt__checkpoint_open(&s.files[0], path)) != MGT_OK) { MGT_FREE(s.files); return res; }
    s.nfiles = 1;
    s.positions = cfg.model.seq_len;
    if ((res = mgt__global_layout(&cfg, &g)) != MGT_OK) { mgt__st_close(&s.files[0]); MGT_FREE(s.files); return res; }
    cap_out = 3 * g.n;
    out = (mgt__st_out *)mgt__calloc((size_t)cap_out, sizeof *out);
    parts = (float **)mgt__calloc((size_t)cap_out, sizeof *parts);
    if (!out || !parts) res = mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    for (t = 0; t < g.n && res == MGT_OK; t++) { /* each tensor read as init reads mgt's, then cut into Hugging Face's parts */
        mgt__part mine[3], hf[3];
        const mgt_tensor_info *x = &g.t[t].info;
        int np = mgt__hf_parts(kind, &cfg, cfg.model.seq_len, x, hf);
        size_t row = 0, cols = x->ndim == 2 ? (size_t)x->shape[1] : 1, r, c;
        float *whole = (float *)MGT_MALLOC(sizeof(float) * x->numel);
        mgt__own_parts(MGT__SRC_MGT, &cfg, cfg.model.seq_len, x, mine);
        res = whole ? mgt__src_read(&s, &mine[0], "", x->name, whole) : mgt__fail(MGT_ERROR_MEMORY, "out of memory");
        for (i = 0; i < np && res == MGT_OK; row += (size_t)hf[i].rows, i++) {
            float *p = (float *)MGT_MALLOC(sizeof(float) * (size_t)hf[i].rows * cols);
            char *name = (char *)MGT_MALLOC(sizeof hf[i].name);
            parts[n] = p;
            out[n].name = name;
            if (!p || !name) { MGT_FREE(p); MGT_FREE(name); parts[n] = NULL; out[n].name = NULL; res = mgt__fail(MGT_ERROR_MEMORY, "out of memory"); break; }
            mgt__strlcpy(name, hf[i].name, sizeof hf[i].name);
            for (r = 0; r < (size_t)hf[i].rows; r++)
                for (c = 0; c < cols; c++) p[hf[i].transpose ? c * (size_t)hf[i].rows + r : r * cols + c] = whole[(row + r) * cols + c];
            out[n].data = p;
            out[n].dtype = "F32";
            out[n].ndim = x->ndim;
            out[n].shape[0] = hf[i].transpose ? (long long)cols : hf[i].rows;
            out[n].shape[1] = hf[i].transpose ? hf[i].rows : (long long)cols;
            out[n].bytes = sizeof(float) * (size_t)hf[i].rows * cols;
            n++;
        }
        MGT_FREE(whole);
    }
    mgt__layout_free(&g);
    mgt__st_close(&s.files[0]);
    MGT_FREE(s.files);
    snprintf(file, sizeof file, "%s/model.safetensors", dir);
    if (res == MGT_OK) res = mgt__st_write(file, out, n, meta, 1);
    for (i = 0; i < n; i++) { MGT_FREE((void *)out[i].name); MGT_FREE(parts[i]); }
    MGT_FREE(out);
    MGT_FREE(parts);
    if (res != MGT_OK) return res;
    memset(&json, 0, sizeof json);
    mgt__hf_config_json(&json, &cfg, kind);
    snprintf(file, sizeof file, "%s/config.json", dir);
    res = json.oom ? mgt__fail(MGT_ERROR_MEMORY, "out of memory") : mgt__write_atomic(file, json.p, json.n);
    MGT_FREE(json.p);
    if (res != MGT_OK) return res;
    if (cfg.data.tokenizer == MGT_TOKENIZER_GPT2) { /* GPT-2's encoder.json and vocab.bpe are Hugging Face's vocab.json and merges.txt */
        const char *fix = "export reads it from the checkpoint's [data] bpe_dir: put GPT-2's files back there";
        snprintf(file, sizeof file, "%s/encoder.json", cfg.data.bpe_dir);
        MGT__TRY(mgt__copy_file(file, dir, "vocab.json", fix));
        snprintf(file, sizeof file, "%s/vocab.bpe", cfg.data.bpe_dir);
        MGT__TRY(mgt__copy_file(file, dir, "merges.txt", fix));
        if (note) snprintf(note, cap, "%s: %s, config.json, model.safetensors, vocab.json and merges.txt (GPT-2 BPE from %s)", dir,
                           kind == MGT__SRC_GPT2 ? "GPT2LMHeadModel" : "LlamaForCausalLM", cfg.data.bpe_dir);
    } else if (cfg.data.tokenizer == MGT_TOKENIZER_HF) {
        MGT__TRY(mgt__copy_file(cfg.data.tokenizer_json, dir, "tokenizer.json", "export reads it from the checkpoint's [data] tokenizer_json: put the file back there"));
        if (note) snprintf(note, cap, "%s: %s, config.json, model.safetensors and tokenizer.json (from %s)", dir,
                           kind == MGT__SRC_GPT2 ? "GPT2LMHeadModel" : "LlamaForCausalLM", cfg.data.tokenizer_json);
    } else if (note)
        snprintf(note, cap, "%s: %s, config.json and model.safetensors; no tokenizer files: the run's tokenizer is bytes (token id = byte value), "
                 "which Hugging Face has no file for", dir, kind == MGT__SRC_GPT2 ? "GPT2LMHeadModel" : "LlamaForCausalLM");
    return MGT_OK;
}
#endif /* MGT_NO_HF */
/* ==== end src/weights_hf.c ==== */
/* ==== begin src/weights_init.c ==== */
#line 1 "src/weights_init.c"
/* src/weights_init.c - [model] init: what it names opened, the preset's model resolved from it, a
   fresh run's weights; under MGT_NO_HF, a Hugging Face folder and mgt_export refused */
/* ---- [model] init -------------------------------------------------------------------------------
   A folder with config.json is Hugging Face's (src/weights_hf.c), a folder of checkpoints a run's
   (its newest), a file llm.c's .bin by its magic number or else an mgt checkpoint (src/weights.c). */

#ifdef MGT_NO_HF /* src/weights_hf.c is left out: what needs Hugging Face's files is refused, naming the switch */
static mgt_result mgt__hf_open(mgt__src *s, int weights) {
    (void)weights;
    return mgt__fail(MGT_ERROR_CONFIG, "%s: a Hugging Face folder (it has config.json), but this program was built with MGT_NO_HF (no Hugging Face "
                     "weights formats): init from an mgt checkpoint or run folder or llm.c's .bin, or build without the switch", s->path);
}
MGTDEF mgt_result mgt_export(const char *checkpoint, const char *dir, char *note, size_t cap) {
    (void)dir, (void)note, (void)cap;
    return mgt__fail(MGT_ERROR_UNSUPPORTED, "mgt_export of %s: this program was built with MGT_NO_HF (no Hugging Face weights formats), and export "
                     "writes Hugging Face's; build without the switch", checkpoint ? checkpoint : "(null)");
}
#endif /* MGT_NO_HF */

/* opens what [model] init names: its model, and with `weights` its tensors too (MGT__SRC_INDEX:
   a Hugging Face folder's tensor index alone, nothing more of the other kinds) */
static mgt_result mgt__src_open(mgt__src **out, const char *init, int weights) {
    mgt__src *s = (mgt__src *)mgt__calloc(1, sizeof *s);
    struct stat st;
    mgt_result res = MGT_OK;
    int hf = 0;
    *out = NULL;
    if (!s) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    mgt_config_init(&s->model);
    mgt__strlcpy(s->path, init, sizeof s->path);
    if (stat(init, &st))
        res = mgt__fail(MGT_ERROR_CONFIG, "%s: no such file or folder (from [model] init); [model] init takes " MGT__INIT_TAKES, init);
    else if (S_ISDIR(st.st_mode)) {
        char cj[1400];
        snprintf(cj, sizeof cj, "%s/config.json", init);
        if (!access(cj, F_OK)) hf = 1;
        else if (mgt_checkpoint_latest(init, s->path, sizeof s->path) != MGT_OK)
            res = mgt__fail(MGT_ERROR_CONFIG, "%s: neither a Hugging Face folder (no config.json) nor a run folder (no step_*.safetensors); [model] init "
                            "takes either, an mgt checkpoint file or llm.c's .bin", init);
    }
    if (res == MGT_OK && hf) res = mgt__hf_open(s, weights);
    else if (res == MGT_OK) { /* a file: llm.c's magic number, else an mgt checkpoint */
        int32_t magic = 0;
        FILE *fp = fopen(s->path, "rb");
        if (fp && fread(&magic, 4, 1, fp) != 1) magic = 0;
        if (fp) fclose(fp);
        res = magic == MGT__LLMC_MAGIC ? mgt__llmc_open(s, weights == 1) : mgt__ckpt_src(s, weights == 1);
    }
    if (res != MGT_OK) { mgt__src_free(s); return res; }
    *out = s;
    return MGT_OK;
}

/* is the preset's value of model key i the file's? d_ff 0 and n_kv_head 0 mean their defaults */
static int mgt__same_model_key(const mgt_config *cfg, const mgt_config *file, int i) {
    char a[MGT_STR_MAX + 64], b[MGT_STR_MAX + 64];
    mgt_dims x = mgt__model_dims(cfg), y = mgt__model_dims(file);
    if (!strcmp(mgt__keys[i].info.name, "d_ff")) return x.H == y.H;
    if (!strcmp(mgt__keys[i].info.name, "n_kv_head")) return x.NKV == y.NKV;
    mgt_config_value_string(cfg, i, a, sizeof a);
    mgt_config_value_string(file, i, b, sizeof b);
    return !strcmp(a, b);
}

MGTDEF mgt_result mgt_config_resolve_init(mgt_config *cfg) {
    mgt__src *s;
    int i;
    mgt_result res = MGT_OK;
    if (!cfg) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_config_resolve_init: cfg is NULL");
    if (!cfg->model.init[0]) return MGT_OK;
    MGT__TRY(mgt__src_open(&s, cfg->model.init, MGT__SRC_INDEX));
    for (i = 0; i < MGT_CONFIG_NKEYS && res == MGT_OK; i++) {
        char where[MGT_STR_MAX + 64], mine[MGT_STR_MAX + 64], theirs[MGT_STR_MAX + 64], why[512];
        const char *name = mgt__keys[i].info.name;
        int user = cfg->line[i] != 0 && cfg->line[i] != MGT__FROM_INIT;
        if (!s->field[i][0]) continue;
        mgt_config_value_string(cfg, i, mine, sizeof mine);
        mgt_config_value_string(&s->model, i, theirs, sizeof theirs);
        if (!strcmp(name, "seq_len") && user) { /* a shorter context than the file's is a training choice; a longer one has no positions */
            if (cfg->model.seq_len > s->positions)
                res = mgt__fail(MGT_ERROR_CONFIG, "%s: [model] seq_len = %d, but [model] init %s has %d positions (%s: %s); set seq_len to at most %d or leave it out",
                                mgt__where(cfg, i, where, sizeof where), cfg->model.seq_len, cfg->model.init, s->positions, s->what, s->field[i], s->positions);
        } else if (!user) {
            if (!mgt__set_value(cfg, i, theirs, why, sizeof why)) res = mgt__fail(MGT_ERROR_CONFIG, "%s: %s", cfg->model.init, why);
            cfg->line[i] = MGT__FROM_INIT;
        } else if (!mgt__same_model_key(cfg, &s->model, i))
            res = mgt__fail(MGT_ERROR_CONFIG, "%s: [model] %s = %s, but [model] init %s has %s = %s (%s: %s); remove %s from the preset (init's model gives it) "
                            "or init from another model", mgt__where(cfg, i, where, sizeof where), name, mine, cfg->model.init, name, theirs, s->what, s->field[i], name);
    }
    /* a config.json that its safetensors contradict: refused here (mgt check), not after the run
       allocated its memory */
    if (res == MGT_OK && (s->kind == MGT__SRC_GPT2 || s->kind == MGT__SRC_LLAMA)) res = mgt__src_check(s, cfg);
    mgt__src_free(s);
    return res;
}

/* a fresh run's weights from [model] init (its step, moments and data position stay as created) */
static mgt_result mgt__init_weights(mgt_run *r) {
    mgt__src *s;
    mgt__layout g;
    float **tensors;
    mgt_result res = mgt__src_open(&s, r->plan.cfg.model.init, 1);
    if (res == MGT_OK) {
        res = mgt__src_global(s, &r->plan.cfg, "", &g, &tensors);
        if (res == MGT_OK && (res = mgt__mirror_all(r)) == MGT_OK) {
            mgt__exchange(r, MGT__BUF_PARAMS, &g, tensors, 0, NULL);
            mgt__unmirror_all(r, 1);
        }
        if (tensors) { mgt__free_global(&g, tensors); mgt__layout_free(&g); }
        mgt__src_free(s);
    }
    res = mgt__mpi_agree(r->procs, res, "reading [model] init");
    if (res == MGT_OK) mgt__log(MGT_LOG_INFO, "weights from %s (step 0, fresh optimizer)", r->plan.cfg.model.init);
    return res;
}
/* ==== end src/weights_init.c ==== */
/* ==== begin src/plan.c ==== */
#line 1 "src/plan.c"
/* src/plan.c - a rank's plan in closed form (mgt_plan_rank: its memory and traffic), and whether a run fits this machine (mgt_plan_fit) */
/* ---- the plan in closed form: the sizes mgt__rank_init allocates, from the shapes alone ----- */

static size_t mgt__pad16(size_t n) { return (n + 15) & ~(size_t)15; }
static size_t mgt__overlap(size_t a0, size_t a1, size_t b0, size_t b1) { /* of [a0, a1) and [b0, b1) */
    size_t lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
    return hi > lo ? hi - lo : 0;
}

/* a rank's sizes, from the plan: its slice of the model's shapes and its stage (the parameters:
   each tensor padded to 16 floats, each unit to 16 x dp; LayerNorm has a bias, RMSNorm none; the
   linear layers' biases follow [model] bias) */
typedef struct mgt__rank_sizes {
    size_t C, T, B, N, Cl, Hl, Q, F, Vl; /* model width, sequence, micro-batch, tokens; the rank's slices of width, heads, qkv, MLP, vocabulary */
    size_t R;                            /* rows of the residual stream it holds: N, or N / tp under sequence parallelism (mgt__rows) */
    size_t norm, block, emb, head;       /* floats of a norm, a block's unit, the embedding's and the head's (0: not on this stage) */
    size_t S, shard, keep;               /* the rank's parameters, its DP shard, the units outside blocks */
    size_t e, f;                         /* bytes of the storage type and of fp32 */
    int replica, tpr, ppr, nb, first, last, M, kvr, dtype, sp, V, cp; /* replica: dpr x cp + cpr; V: chunks per stage (pp_virtual) */
} mgt__rank_sizes;

static void mgt__rank_sizes_of(const mgt_plan *p, int rank, mgt__rank_sizes *z) {
    const mgt_config *cfg = &p->cfg;
    const mgt_dims *d = &p->dims;
    size_t unit_align = 16 * (size_t)p->replicas;
    memset(z, 0, sizeof *z);
    z->dtype = cfg->precision.dtype == MGT_DTYPE_BF16 ? MGT_BF16 : cfg->precision.dtype == MGT_DTYPE_FP16 ? MGT_F16 : MGT_F32;
    mgt_rank_coords(rank, p->replicas, p->tp, &z->replica, &z->tpr, &z->ppr);
    z->cp = p->cp;
    z->first = z->ppr == 0;
    z->last = z->ppr == p->pp - 1;
    z->nb = mgt__stage_blocks(p, z->ppr);
    z->V = mgt__plan_chunks(p);
    z->M = p->micro_steps;
    z->C = (size_t)cfg->model.d_model; z->T = (size_t)(cfg->model.seq_len / p->cp); z->B = (size_t)cfg->train.micro_batch; z->N = z->B * z->T;
    z->sp = cfg->parallel.sp && p->tp > 1;
    z->R = z->N / (z->sp ? (size_t)p->tp : 1);
    z->Cl = z->C / (size_t)p->tp; z->Hl = (size_t)d->H / (size_t)p->tp; z->Vl = (size_t)p->Vp / (size_t)p->tp;
    z->Q = z->Cl + 2 * (size_t)(mgt__kv_local(d, p->tp) * d->hs); z->F = (size_t)d->fc / (size_t)p->tp;
    z->kvr = mgt__kv_replicas(d, p->tp);
    z->e = mgt__dtype_size(z->dtype); /* parameters (the compute copy), activations; gradients stay fp32 */
    z->f = sizeof(float);
    z->norm = (d->rms ? 1 : 2) * mgt__pad16(z->C);
#define MGT__UNIT(x) (((x) + unit_align - 1) / unit_align * unit_align)
    z->block = MGT__UNIT(2 * z->norm + mgt__pad16(z->Q * z->C) + mgt__pad16(z->C * z->Cl) + mgt__pad16(z->F * z->C) + mgt__pad16(z->C * z->Hl) +
                         (d->bias ? mgt__pad16(z->Q) + mgt__pad16(z->F) + 2 * mgt__pad16(z->C) : 0));
    z->emb = z->first ? MGT__UNIT(mgt__pad16(z->Vl * z->C) + (d->rope ? 0 : mgt__pad16((size_t)cfg->model.seq_len * z->C))) : 0;
    z->head = z->last ? MGT__UNIT(z->norm + (!d->tied || p->pp > 1 ? mgt__pad16(z->Vl * z->C) : 0)) : 0;
#undef MGT__UNIT
    z->S = z->emb + (size_t)z->nb * z->block + z->head;
    z->shard = z->S / (size_t)p->replicas;
    z->keep = z->emb + z->head;
}

/* the CUDA backend's own memory (its reserve: issue 13), and NCCL's and the context's estimates */
static void mgt__plan_rank_cuda(const mgt_plan *p, const mgt__rank_sizes *z, mgt_rank_plan *o) {
    const mgt_config *cfg = &p->cfg;
    const mgt_dims *d = &p->dims;
    size_t per_block = (size_t)(6 + 2 * !d->rms + 4 * d->bias), /* tensors of a block */ ss = (z->S / 65536 + (size_t)(4 + per_block * (size_t)z->nb + 2) + 1) * sizeof(double);
    size_t oc = z->Q > z->F ? z->Q : z->F, k, f = z->f;
    int kinds[7], g;
    size_t NHl = (size_t)(cfg->model.n_head / p->tp), hs = z->Cl / NHl;
    /* flash attention's backward: dout . out per row and head; under cp ring attention's backward
       (kernels/ring_attention.cu) needs the same per row and head of a chunk, T / 2, so no more */
    o->cuda_attention = z->B * NHl * z->T * f;
    if (mgt_cudnn_attention_serves(z->dtype, (int)hs, (int)NHl, (int)((z->Q - z->Cl) / 2 / hs))) /* cuDNN's: also its fp32 dq accumulator */
        o->cuda_attention = (o->cuda_attention + 255) / 256 * 256 + z->B * NHl * z->T * hs * f;
    o->cuda_scratch = o->cuda_attention; /* the largest of what ops ask for */
    if ((k = 128 * 2 * z->C * f) > o->cuda_scratch) o->cuda_scratch = k; /* LayerNorm's partial sums (128 parts) */
    if ((k = 64 * oc * f) > o->cuda_scratch) o->cuda_scratch = k;       /* the widest bias's (64 parts) */
    for (k = 1; k < z->N;) k <<= 1;
    if ((k *= 8) > o->cuda_scratch) o->cuda_scratch = k;                 /* the embedding backward's sort: 8-byte keys, a power of two */
    if (ss > o->cuda_scratch) o->cuda_scratch = ss;                      /* the chunks of the multi-tensor norm */
    o->cuda_cublas = (size_t)32 << 20;                                   /* sm_90 and later; 4 MiB before */
    o->mem[MGT_MEM_WORKSPACE] = o->cuda_scratch + o->cuda_cublas;
    /* NCCL: a communicator per group of more than one rank (a group of the whole world uses the
       world's), about 300 MiB each on NVLink: 32 channels x the Simple (4 MiB), LL128 (4.5 MiB)
       and LL (0.25 MiB) buffers, NCCL's defaults; NCCL_BUFFSIZE and NCCL_NCHANNELS change it */
    kinds[0] = p->tp; kinds[1] = p->replicas; kinds[2] = p->pp; kinds[3] = p->pp > 1 && (z->first || z->last) ? 2 : 1; kinds[4] = p->world; kinds[5] = z->kvr; kinds[6] = p->cp;
    for (g = 0; g < 7; g++) o->cuda_communicators += kinds[g] > 1 && (kinds[g] < p->world || g == 4);
    o->cuda_nccl_estimate = (size_t)o->cuda_communicators * ((size_t)300 << 20);
    o->cuda_context_estimate = (size_t)500 << 20; /* the CUDA context and the modules it loads: about 500 MiB on an H100 */
}

/* traffic per step, as the communicator counts it (bytes the rank sends or receives) */
static void mgt__plan_rank_traffic(const mgt_plan *p, const mgt__rank_sizes *z, mgt_rank_plan *o) {
    const mgt_config *cfg = &p->cfg;
    const mgt_dims *d = &p->dims;
    size_t f = z->f, e = z->e;
    double act = (double)(z->N * z->C * e), per_micro_tp = 0; /* activations move in the storage type */
    int recompute = cfg->train.recompute == MGT_RECOMPUTE_FULL, M = z->M, nb = z->nb, first = z->first, last = z->last;
    if (p->tp > 1 && !z->sp) {
        per_micro_tp = (double)nb * (2 + 2 + (recompute ? 2 : 0)) * act + (first ? act : 0) + (last ? act : 0);
        o->bytes[MGT_COLL_ALL_REDUCE] += M * per_micro_tp;
    }
    if (z->sp) { /* sequence parallelism, per micro-batch (a reduce-scatter or an all-gather counts its whole (N,C) buffer, as an
                    all-reduce does; on a ring each moves half an all-reduce's bytes). A block's forward: an all-gather before each
                    column-parallel GEMM (ln1, ln2), a reduce-scatter after each row-parallel one; its backward: dres gathered before
                    each row-parallel GEMM, ln1 and ln2 gathered again for the column-parallel weight gradients (the extra traffic:
                    the norms keep only their rows), their input gradients reduce-scattered; recompute reruns the forward's. The
                    embedding: a reduce-scatter forward, dres gathered backward. The head: lnf gathered forward and again backward,
                    its input gradient reduce-scattered. */
        o->bytes[MGT_COLL_REDUCE_SCATTER] += M * act * ((double)nb * (4 + (recompute ? 2 : 0)) + (first ? 1 : 0) + (last ? 1 : 0));
        o->bytes[MGT_COLL_ALL_GATHER] += M * act * ((double)nb * (6 + (recompute ? 2 : 0)) + (first ? 1 : 0) + (last ? 2 : 0));
    }
    if (p->tp > 1 && last) o->bytes[MGT_COLL_ALL_GATHER] += (double)M * (double)p->tp * (double)(z->N * 3 * f); /* the cross-entropy's statistics */
    if (p->pp > 1) {
        /* forward and backward, in and out, the rank's rows: each of its V chunks receives but the model's first, sends but its last */
        o->bytes[MGT_COLL_SEND_RECV] += (double)M * (double)(z->R * z->C * e) * 2.0 * ((z->V - first) + (z->V - last));
        if ((first || last) && d->tied) o->bytes[MGT_COLL_ALL_REDUCE] += (double)(z->Vl * z->C * f); /* the tied embedding */
    }
    if (z->cp > 1) { /* ring attention, per block and micro-batch (mgt__ring_attention_*): forward, cp - 1 key/value blocks (N, 2 KVl)
                      passed on in the storage type; backward, the same and cp gradient blocks in fp32; recompute reruns the forward's.
                      A sendrecv counts its send and its receive */
        double kv = (double)(z->N * (z->Q - z->Cl));
        double fwd = 2.0 * (double)(z->cp - 1) * kv * (double)e, bwd = fwd + 2.0 * (double)z->cp * kv * (double)f;
        o->bytes[MGT_COLL_SEND_RECV] += (double)M * (double)nb * (fwd * (recompute ? 2 : 1) + bwd);
    }
    if (p->replicas > 1) {
        double full = (double)(z->S * f), blocks = (double)((size_t)nb * z->block * f), fetches;
        double pfull = full / (double)f * (double)e, pblocks = blocks / (double)f * (double)e; /* parameters: storage type */
        if (p->zero == 0) o->bytes[MGT_COLL_ALL_REDUCE] += full;
        if (p->zero == 1) { o->bytes[MGT_COLL_REDUCE_SCATTER] += full; o->bytes[MGT_COLL_ALL_GATHER] += pfull; }
        if (p->zero >= 2) o->bytes[MGT_COLL_REDUCE_SCATTER] += M * blocks + (double)(z->keep * f);
        if (p->zero == 2) o->bytes[MGT_COLL_ALL_GATHER] += pfull;
        if (p->zero == 3) { /* every use of a unit gathers it: forward and backward of each block, the
                              embedding in both directions, the head (and a tied wte with it) in both */
            fetches = 2.0 * pblocks + (first ? 2.0 * (double)(z->emb * e) : 0) + (last ? 2.0 * (double)(z->head * e) : 0) +
                      (first && last && d->tied ? 2.0 * (double)(z->emb * e) : 0);
            o->bytes[MGT_COLL_ALL_GATHER] += M * fetches;
        }
    }
    if (p->world > 1) o->bytes[MGT_COLL_ALL_GATHER] += (double)p->world * sizeof(double); /* the gradient norm */
    if (z->sp) { /* the norms' gradients summed over TP once a step in fp32, the rank's DP slice of them under ZeRO (mgt__sp_grads):
                    each block's ln_1 (from its start) and ln_2 (after c_attn and attn.c_proj), the head's ln_f (from its start); a
                    norm's weight and bias are one call, the padding between them included */
        size_t run = z->norm - mgt__pad16(z->C) + z->C, o2 = z->norm + mgt__pad16(z->Q * z->C) + mgt__pad16(z->C * z->Cl) + (d->bias ? mgt__pad16(z->Q) + mgt__pad16(z->C) : 0);
        size_t s0 = p->zero >= 1 ? (size_t)z->replica * (z->block / (size_t)p->replicas) : 0, s1 = p->zero >= 1 ? s0 + z->block / (size_t)p->replicas : z->block;
        size_t h0 = p->zero >= 1 ? (size_t)z->replica * (z->head / (size_t)p->replicas) : 0, h1 = p->zero >= 1 ? h0 + z->head / (size_t)p->replicas : z->head;
        o->bytes[MGT_COLL_ALL_REDUCE] += (double)f * ((double)nb * (double)(mgt__overlap(0, run, s0, s1) + mgt__overlap(o2, o2 + run, s0, s1)) +
                                                      (last ? (double)mgt__overlap(0, run, h0, h1) : 0));
    }
    if (z->kvr > 1) { /* replicated key/value heads: their rows of c_attn's weight (and bias) in each block, summed over the kv group
                         once a step in fp32, the rank's DP slice of them under ZeRO (mgt__kv_grads); a block lays out ln_1, c_attn.weight, c_attn.bias */
        size_t s0 = p->zero >= 1 ? (size_t)z->replica * (z->block / (size_t)p->replicas) : 0, s1 = p->zero >= 1 ? s0 + z->block / (size_t)p->replicas : z->block;
        size_t w0 = z->norm + z->Cl * z->C, b0 = z->norm + mgt__pad16(z->Q * z->C) + z->Cl;
        o->bytes[MGT_COLL_ALL_REDUCE] += (double)nb * (double)f *
                                         (double)(mgt__overlap(w0, z->norm + z->Q * z->C, s0, s1) + (d->bias ? mgt__overlap(b0, b0 - z->Cl + z->Q, s0, s1) : 0));
    }
}

MGTDEF mgt_result mgt_plan_rank(const mgt_plan *p, int rank, mgt_rank_plan *o) {
    mgt__rank_sizes z;
    const mgt_dims *d;
    const mgt_config *cfg;
    size_t max_unit, max_block, sets, one, a_resid, a_layer, a_last, a_io, scratch, N, C, e, f;
    int threads;
    if (!p || !o) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_plan_rank: plan and out are required");
    d = &p->dims;
    cfg = &p->cfg;
    if (rank < 0 || rank >= p->world) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_plan_rank: rank %d of %d", rank, p->world);
    memset(o, 0, sizeof *o);
    mgt__rank_sizes_of(p, rank, &z);
    N = z.N; C = z.C; e = z.e; f = z.f;
    max_block = z.nb ? z.block : 0;
    max_unit = z.emb > z.block ? z.emb : z.block;
    max_unit = z.head > max_unit ? z.head : max_unit;
    o->rank = rank; o->dp = z.replica / p->cp; o->cp = z.replica % p->cp; o->tp = z.tpr; o->pp = z.ppr;
    o->first_block = mgt__chunk_first(p, z.ppr); /* with pp_virtual > 1: of its first chunk, and of its last chunk */
    o->last_block = mgt__chunk_first(p, z.ppr + (z.V - 1) * p->pp + 1) - 1;
    o->params = z.S;
    o->shard = z.shard;
    { /* the tensors: the embeddings, each block's (mgt__block_slots), the final norm and an untied or pipelined head */
        int slot[MGT__BLOCK_TENSORS];
        o->tensors = (z.first ? (d->rope ? 1 : 2) : 0) + z.nb * mgt__block_slots(d, slot) + (z.last ? (d->rms ? 1 : 2) + (!d->tied || p->pp > 1) : 0);
    }
    o->mem[MGT_MEM_PARAMS] = e * (p->zero >= 3 ? z.shard : z.S);
    o->mem[MGT_MEM_BUFFERS] = e * (p->zero >= 3 ? 2 * max_unit : 0) + f * (p->zero >= 2 ? (max_unit + max_block) / (size_t)p->replicas : 0);
    o->mem[MGT_MEM_GRADS] = f * (p->zero >= 2 ? z.shard + 2 * max_block + z.keep : z.S);
    o->mem[MGT_MEM_OPTIMIZER] = (z.dtype == MGT_F32 ? 2 : 3) * f * (p->zero >= 1 ? z.shard : z.S); /* moments, and master weights under 16-bit */
    /* activations: one set per micro-batch in flight, and the backward scratch */
    sets = p->pp == 1 ? 1 : cfg->parallel.pp_schedule == 1 ? (size_t)z.M : (size_t)(p->pp - z.ppr < z.M ? p->pp - z.ppr : z.M);
    if (z.V > 1 || mgt__plan_zb(p)) { /* interleaved, zero-bubble: the sets its schedule holds at once (mgt__pipe_sets) */
        int v_sets;
        MGT__TRY(mgt__interleaved_plan(p, z.ppr, NULL, NULL, NULL, NULL, &v_sets));
        sets = (size_t)v_sets;
    }
    /* the residual stream and the norms' inputs and outputs: the rank's R rows (N / tp under sequence parallelism) */
    a_resid = (size_t)(z.nb + 1) * mgt__carve_bytes(z.R * C * e);
    { /* a block's activations (mgt__acts_layout): what recompute = selective rebuilds (ln1, ln2, fch_gelu)
         apart from what every block keeps */
        size_t cheap = 2 * mgt__carve_bytes(z.R * C * e) + mgt__carve_bytes(N * z.Hl * e);
        size_t kept = mgt__carve_bytes(z.R * C * e) + 4 * mgt__carve_bytes(z.R * f) + mgt__carve_bytes(N * z.Q * e) +
                      mgt__carve_bytes(mgt__att_bytes(z.B, (size_t)(cfg->model.n_head / p->tp), z.T, e, cfg->parallel.device == MGT_DEVICE_CUDA || z.cp > 1)) +
                      mgt__carve_bytes(N * z.Cl * e) + mgt__carve_bytes(N * z.F * e);
        int rec = cfg->train.recompute;
        a_layer = z.nb == 0 ? 0 : rec == MGT_RECOMPUTE_FULL ? kept + cheap : rec == MGT_RECOMPUTE_SELECTIVE ? (size_t)z.nb * kept + cheap : (size_t)z.nb * (kept + cheap);
        if (mgt__plan_zb(p)) /* each block's matmul output gradients, kept from B to W: dmlp, dattn (N,C) (in the block's output's and
                                res2's place without sequence parallelism or recompute), dfch (N,F), dqkv (N,Q) (in fch's without recompute) */
            a_layer += (size_t)z.nb * ((z.sp || rec ? 2 * mgt__carve_bytes(N * C * e) : 0) + mgt__carve_bytes(N * z.F * e) +
                                       (rec || z.Q > z.F ? mgt__carve_bytes(N * z.Q * e) : 0));
    }
    a_last = z.last ? mgt__carve_bytes(z.R * C * e) + 2 * mgt__carve_bytes(z.R * f) + mgt__carve_bytes(N * z.Vl * e) + mgt__carve_bytes((size_t)p->tp * N * 3 * f) +
                          mgt__carve_bytes(N * sizeof(double)) : 0;
    a_io = 2 * mgt__carve_bytes(N * sizeof(int)) + (z.V > 1 || mgt__plan_zb(p) ? mgt__carve_bytes(z.R * C * e) : 0); /* and the action lists' gradient in and out (acts.dgrad) */
    one = a_resid + a_layer + a_last + a_io;
    scratch = mgt__carve_bytes(z.R * C * e) + mgt__carve_bytes(N * C * e) + (mgt__plan_zb(p) ? 0 : mgt__carve_bytes(N * z.Q * e) + mgt__carve_bytes(N * z.F * e)) +
              (z.F > z.Hl ? mgt__carve_bytes(N * z.Hl * e) : 0) + (z.sp ? mgt__carve_bytes(N * C * e) : 0); /* dres, dln, dqkv and dfch (zb: per block), dact, full */
    if (z.cp > 1) /* ring attention's key/value blocks and their gradients, two each, the merged output and dq (mgt__scratch_layout) */
        scratch += 2 * mgt__carve_bytes(N * (z.Q - z.Cl) * e) + 2 * mgt__carve_bytes(N * (z.Q - z.Cl) * f) + 2 * mgt__carve_bytes(N * z.Cl * f);
    o->mem[MGT_MEM_ACTIVATIONS] = one * sets + scratch;
    o->micro_in_flight = (int)sets;
    threads = cfg->parallel.threads > 0 ? cfg->parallel.threads : mgt_cpu_count();
    threads = threads / p->world > 0 ? threads / p->world : 1;
    o->mem[MGT_MEM_WORKSPACE] = f * (z.cp > 1 ? 2 * (z.T / 2) * (z.T / 2) : z.T * z.T) * (size_t)threads; /* mgt__att_scratch_floats */
    if (z.dtype != MGT_F32) { /* the CPU backend's fp32 copies of a 16-bit op's operands */
        mgt__shape sh;
        memset(&sh, 0, sizeof sh);
        sh.B = (int)z.B; sh.T = (int)z.T; sh.C = (int)C; sh.Cl = (int)z.Cl; sh.Hl = (int)z.Hl; sh.NHl = cfg->model.n_head / p->tp; sh.Vl = (int)z.Vl;
        sh.KVl = (int)(z.Q - z.Cl) / 2; sh.Fl = (int)z.F;
        sh.first = z.first; sh.last = z.last; sh.cp = z.cp;
        o->mem[MGT_MEM_WORKSPACE] += f * mgt__widen_floats(&sh, threads, mgt__cpu_widens_gemms(z.dtype));
    }
    if (cfg->parallel.device == MGT_DEVICE_CUDA) mgt__plan_rank_cuda(p, &z, o);
    mgt__plan_rank_traffic(p, &z, o);
    return MGT_OK;
}

/* ---- does a run fit this machine (mgt_plan_fit): the plan against MemAvailable, ulimit -v, GPU memory ---- */

#define MGT__HOST_SHARE 0.9 /* of MemAvailable a run may plan on: the rest is the page cache of its data, other programs, what no plan counts */
#define MGT__THREAD_RESIDENT 262144.0 /* a thread's touched stack and bookkeeping (1024 rank threads measured 240 MB) */
#define MGT__ARENA_BYTES 67108864.0 /* glibc gives a thread that allocates its own arena: 64 MiB of address space, at most 8 per core */
#define MGT__GPU_RESERVE 268435456.0 /* per GPU, and per NCCL communicator: cuBLAS workspaces, NCCL buffers, rounding */

/* snprintf for messages that may be cut at cap (the compiler is not asked to prove they are not) */
MGT__PRINTF(3, 4) static int mgt__textf(char *buf, size_t cap, const char *fmt, ...) {
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    return n < 0 ? 0 : (size_t)n < cap ? n : (int)(cap ? cap - 1 : 0);
}

static void mgt__fmt_bytes(double b, char *out, size_t cap) {
    if (b >= 1099511627776.0) mgt__textf(out, cap, "%.1f TiB", b / 1099511627776.0);
    else if (b >= 1073741824.0) mgt__textf(out, cap, "%.1f GiB", b / 1073741824.0);
    else if (b >= 10485760.0) mgt__textf(out, cap, "%.0f MiB", b / 1048576.0);
    else if (b >= 1048576.0) mgt__textf(out, cap, "%.1f MiB", b / 1048576.0);
    else mgt__textf(out, cap, "%.0f KiB", b / 1024.0);
}

/* a /proc/meminfo line ("MemAvailable:") in bytes, -1 when it cannot be read */
static double mgt__meminfo(const char *key) {
    char line[256];
    double v = -1;
    size_t n = strlen(key);
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n)) { v = strtod(line + n, NULL) * 1024.0; break; }
    fclose(f);
    return v;
}

typedef struct mgt__need {
    double host, as;      /* RAM, and the address space the run adds (CPU) */
    double planned;       /* what `mgt plan` shows, summed over the ranks (CPU) */
    double state;         /* of it: parameters, gradients and optimizer state */
    double checkpoint;    /* a checkpoint's fp32 copies (parameters and both moments) */
    double threads;       /* threads the run starts */
    int gpu_rank;         /* GPU: the rank with the least headroom, what it needs and its excess over its device's free memory */
    double gpu_need, gpu_excess;
} mgt__need;

/* What a run of plan `of` needs, from the plan of each rank. gpu_free[i] (nfree of them): free
   memory of rank i's GPU (NULL: CPU ranks); ranks past nfree are compared with the least of them. 0,
   or -1 when sampling with it is not valid (mgt_last_error says why). */
static int mgt__fit_need(const mgt_plan *of, int inference, const double *gpu_free, int nfree, mgt__need *n) {
    mgt_plan variant;
    const mgt_plan *plan = of;
    const mgt_config *cfg = &of->cfg;
    int world, r, c, threads, per_rank, cores = mgt_cpu_count();
    double least = -1;
    memset(n, 0, sizeof *n);
    n->gpu_rank = -1;
    if (inference || (gpu_free && cfg->parallel.device != MGT_DEVICE_CUDA)) {
        mgt_config v = *cfg;
        if (inference) v.train.micro_batch = v.train.global_batch = 1; /* sampling: one sequence, no optimizer */
        if (inference) v.parallel.sp = 0, v.parallel.cp = 1; /* and its rows whole, on one rank (mgt__rank_place, mgt_run_open) */
        if (gpu_free) v.parallel.device = MGT_DEVICE_CUDA; /* the plan's workspace is then the CUDA backend's (issue 13); no rule depends on the device */
        if ((inference && mgt_config_validate(&v) != MGT_OK) || mgt__plan_make(&v, &variant) != MGT_OK) return -1;
        plan = &variant;
        cfg = &variant.cfg;
    }
    world = plan->world;
    for (r = 0; gpu_free && r < nfree; r++) least = least < 0 || gpu_free[r] < least ? gpu_free[r] : least;
    for (r = 0; r < world; r++) {
        mgt_rank_plan p;
        double rank = 0, reserve = MGT__GPU_RESERVE, have;
        if (mgt_plan_rank(plan, r, &p) != MGT_OK) return -1;
        if (inference) p.mem[MGT_MEM_GRADS] = p.mem[MGT_MEM_OPTIMIZER] = p.mem[MGT_MEM_BUFFERS] = 0;
        n->state += (double)(p.mem[MGT_MEM_PARAMS] + p.mem[MGT_MEM_GRADS] + p.mem[MGT_MEM_OPTIMIZER]);
        for (c = 0; c < MGT_MEM_COUNT; c++) rank += (double)p.mem[c]; /* on GPUs the workspace is the CUDA backend's scratch and cuBLAS's */
        if (!gpu_free) { n->planned += rank; continue; }
        /* NCCL: a communicator for the world and for each kind of group with more than one member */
        reserve *= 1 + (world > 1) + (cfg->parallel.tp > 1) + (cfg->parallel.dp * cfg->parallel.cp > 1) + 2 * (cfg->parallel.pp > 1) + (cfg->parallel.cp > 1);
        rank += reserve;
        n->host += (double)(p.mem[MGT_MEM_PARAMS] + p.mem[MGT_MEM_OPTIMIZER]); /* a checkpoint copies the rank to the host */
        have = r < nfree ? gpu_free[r] : least;
        if (have >= 0 && (n->gpu_rank < 0 || rank - have > n->gpu_excess)) { n->gpu_rank = r; n->gpu_need = rank; n->gpu_excess = rank - have; }
    }
    n->checkpoint = 12.0 * (double)plan->params; /* saving gathers, resuming reads, three fp32 copies */
    n->host += n->planned + n->checkpoint;
    if (gpu_free) return 0;
    threads = cfg->parallel.threads > 0 ? cfg->parallel.threads : cores;
    per_rank = threads / world > 0 ? threads / world : 1;
    n->threads = (world > 1 ? world : 0) + (double)world * (per_rank - 1) + (!inference && cfg->data.train[0] ? 1 : 0); /* ranks, pools, loader */
    n->host += n->threads * MGT__THREAD_RESIDENT;
    {
        pthread_attr_t a;
        size_t stack = 8 << 20, blas = 0;
        struct stat st;
        if (pthread_attr_init(&a) == 0) { pthread_attr_getstacksize(&a, &stack); pthread_attr_destroy(&a); }
        mgt__blas_slots(&blas);
        n->as = n->planned + n->checkpoint + n->threads * (double)stack + (n->threads < 8.0 * cores ? n->threads : 8.0 * cores) * MGT__ARENA_BYTES +
                (double)blas + 64.0 * 1048576.0; /* and the libraries' own allocations */
        if (!inference && cfg->data.train[0] && stat(cfg->data.train, &st) == 0) n->as += (double)st.st_size; /* the shards are mapped */
        if (!inference && cfg->data.val[0] && stat(cfg->data.val, &st) == 0) n->as += (double)st.st_size;
    }
    return 0;
}

static int mgt__need_fits(const mgt__need *n, const mgt_fit *f) {
    return (f->host_have < 0 || n->host <= f->host_have) && (f->as_have < 0 || n->as <= f->as_have) && (n->gpu_rank < 0 || n->gpu_excess <= 0);
}

/* appends "key = value (needs X)" to buf when cfg with that change fits; returns whether it did */
static int mgt__lever(char *buf, size_t cap, const mgt_config *cfg, int inference, const double *gpu_free, int nfree, const mgt_fit *f,
                      const char *what) {
    mgt__need n;
    char b[32];
    size_t used = strlen(buf);
    mgt_plan plan;
    if (mgt_config_validate(cfg) != MGT_OK || mgt__plan_make(cfg, &plan) != MGT_OK) return 0; /* a change the rules refuse */
    if (mgt__fit_need(&plan, inference, gpu_free, nfree, &n) != 0 || !mgt__need_fits(&n, f)) return 0;
    mgt__fmt_bytes(gpu_free ? n.gpu_need : n.host, b, sizeof b);
    mgt__textf(buf + used, cap - used, "%s%s (%s%s)", used ? ", or " : "", what, b, gpu_free ? " per GPU" : "");
    return 1;
}

/* The comparison for a run of cfg on the CPU (gpu_free NULL) or on GPUs (gpu_free[rank], nfree of
   them) into out; MGT_ERROR_CONFIG with the same line as the error when it does not fit and the
   check is enforced. */
/* what would make cfg fit, each tried with the planner, written into levers ("" when nothing does) */
static void mgt__fit_levers(const mgt_config *cfg, int inference, const double *gpu_free, int nfree, mgt_fit *out, char *levers, size_t cap) {
    char what[96];
    int world = cfg->parallel.dp * cfg->parallel.cp * cfg->parallel.tp * cfg->parallel.pp;
    mgt_config c = *cfg;
    int per_dp = cfg->train.global_batch / cfg->parallel.dp, m, z, t, found = 0, selective = 0, nkv = cfg->model.n_kv_head ? cfg->model.n_kv_head : cfg->model.n_head;
    for (m = cfg->train.micro_batch - 1; m >= 1 && !found && !inference; m--) {
        if (per_dp % m) continue;
        c.train.micro_batch = m;
        mgt__textf(what, sizeof what, "train.micro_batch = %d", m);
        found = mgt__lever(levers, cap, &c, inference, gpu_free, nfree, out, what);
    }
    c = *cfg;
    /* selective first: it rebuilds only the cheap ops, where full runs each block's forward again */
    if (cfg->train.recompute == MGT_RECOMPUTE_NONE && !inference) {
        c.train.recompute = MGT_RECOMPUTE_SELECTIVE;
        selective = mgt__lever(levers, cap, &c, inference, gpu_free, nfree, out, "train.recompute = selective");
    }
    if (cfg->train.recompute != MGT_RECOMPUTE_FULL && !selective && !inference) {
        c.train.recompute = MGT_RECOMPUTE_FULL;
        if (!mgt__lever(levers, cap, &c, inference, gpu_free, nfree, out, "train.recompute = full") && !found)
            for (m = cfg->train.micro_batch - 1; m >= 1; m--) {
                if (per_dp % m) continue;
                c.train.micro_batch = m;
                mgt__textf(what, sizeof what, "train.recompute = full with train.micro_batch = %d", m);
                if (mgt__lever(levers, cap, &c, inference, gpu_free, nfree, out, what)) break;
            }
    }
    c = *cfg;
    for (z = cfg->parallel.zero + 1; cfg->parallel.dp > 1 && z <= 3 && !inference; z++) {
        c.parallel.zero = z;
        mgt__textf(what, sizeof what, "parallel.zero = %d", z);
        if (mgt__lever(levers, cap, &c, inference, gpu_free, nfree, out, what)) break;
    }
    c = *cfg;
    /* more GPUs, each holding less: tp must divide the key/value heads (and so n_head) and d_ff */
    for (t = 2 * cfg->parallel.tp; gpu_free && t <= 64 && c.model.n_head % t == 0 && /* key/value heads split or replicated (mgt__kv_local) */
                                   (nkv % t == 0 || t % nkv == 0) && (c.model.d_ff ? c.model.d_ff : 4 * c.model.d_model) % t == 0;
         t *= 2) {
        c.parallel.tp = t;
        mgt__textf(what, sizeof what, "parallel.tp = %d on %d GPUs", t, world / cfg->parallel.tp * t);
        if (mgt__lever(levers, cap, &c, inference, gpu_free, nfree, out, what)) break;
    }
    c = *cfg;
    for (t = 2 * cfg->parallel.pp; gpu_free && t <= cfg->model.n_layer && t <= 256; t *= 2) {
        c.parallel.pp = t;
        mgt__textf(what, sizeof what, "parallel.pp = %d on %d GPUs", t, world / cfg->parallel.pp * t);
        if (mgt__lever(levers, cap, &c, inference, gpu_free, nfree, out, what)) break;
    }
}

static mgt_result mgt__fit(const mgt_plan *plan, int inference, const double *gpu_free, int nfree, mgt_fit *out) {
    const mgt_config *cfg = &plan->cfg;
    mgt__need n;
    char need[32], have[32], avail_text[32], as_need[32], as_have[32], extra[32], cmp[640], levers[400] = "", what[96];
    double avail = mgt__meminfo("MemAvailable:"), mapped = 0;
    const char *env = getenv("MGT_MEMORY_CHECK");
    struct rlimit lim;
    int world = cfg->parallel.dp * cfg->parallel.cp * cfg->parallel.tp * cfg->parallel.pp, used;
    memset(out, 0, sizeof *out);
    out->device = gpu_free ? MGT_DEVICE_CUDA : MGT_DEVICE_CPU;
    out->enforced = !(env && !strcmp(env, "off"));
    out->host_have = avail >= 0 ? MGT__HOST_SHARE * avail : -1;
    out->as_have = -1;
    if (!gpu_free && getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
        mgt__self_memory(&mapped, NULL);
        out->as_have = (double)lim.rlim_cur > mapped ? (double)lim.rlim_cur - mapped : 0;
    }
    if (mgt__fit_need(plan, inference, gpu_free, nfree, &n) != 0) return MGT_ERROR_CONFIG;
    out->host_need = n.host;
    out->as_need = gpu_free ? 0 : n.as;
    out->gpu_rank = n.gpu_rank;
    out->gpu_need = n.gpu_need;
    out->gpu_have = n.gpu_rank >= 0 ? n.gpu_need - n.gpu_excess : -1;
    out->checked = out->host_have >= 0 || out->as_have >= 0 || n.gpu_rank >= 0;
    out->fits = mgt__need_fits(&n, out);
    /* the comparison */
    mgt__fmt_bytes(n.host, need, sizeof need);
    mgt__fmt_bytes(out->host_have, have, sizeof have);
    mgt__fmt_bytes(avail, avail_text, sizeof avail_text);
    used = 0;
    if (gpu_free && n.gpu_rank >= 0) {
        char gn[32], gh[32];
        mgt__fmt_bytes(n.gpu_need, gn, sizeof gn);
        mgt__fmt_bytes(out->gpu_have, gh, sizeof gh);
        used = mgt__textf(cmp, sizeof cmp, "GPU memory: rank %d needs %s (its plan and a reserve for cuBLAS and NCCL) and GPU %d has %s free%s; ",
                        n.gpu_rank, gn, n.gpu_rank, gh, world > 1 ? " (the least headroom of the ranks)" : "");
    }
    if (gpu_free) {
        mgt__textf(cmp + used, sizeof cmp - (size_t)used, "host memory: checkpoints need %s of the %s mgt may use (%.0f%% of MemAvailable %s)", need,
                 have, 100 * MGT__HOST_SHARE, avail_text);
    } else {
        mgt__fmt_bytes(n.host - n.planned, extra, sizeof extra);
        mgt__fmt_bytes(n.planned, what, sizeof what);
        used = mgt__textf(cmp, sizeof cmp, "memory: %d rank%s %s (%s planned, as `mgt plan` shows, and %s for %.0f thread%s and a checkpoint's copies)",
                        world, world == 1 ? " needs" : "s need", need, what, extra, n.threads, n.threads == 1 ? "" : "s");
        if (out->host_have >= 0)
            used += mgt__textf(cmp + used, sizeof cmp - (size_t)used, ", mgt may use %s (%.0f%% of MemAvailable %s)", have, 100 * MGT__HOST_SHARE, avail_text);
        else
            used += mgt__textf(cmp + used, sizeof cmp - (size_t)used, ", MemAvailable unknown (no /proc/meminfo)");
        mgt__fmt_bytes(n.as, as_need, sizeof as_need);
        mgt__fmt_bytes(out->as_have, as_have, sizeof as_have);
        mgt__fmt_bytes(mapped, extra, sizeof extra);
        if (out->as_have >= 0 && used < (int)sizeof cmp)
            mgt__textf(cmp + used, sizeof cmp - (size_t)used, "; address space: the run adds %s, ulimit -v (RLIMIT_AS) leaves %s (%s already mapped)", as_need,
                     as_have, extra);
    }
    if (out->fits) {
        mgt__textf(out->text, sizeof out->text, "%s: fits", cmp);
        return MGT_OK;
    }
    mgt__fit_levers(cfg, inference, gpu_free, nfree, out, levers, sizeof levers);
    {
        char state[32], at[MGT_STR_MAX + 8] = "", raise[96] = "";
        int host_short = out->host_have >= 0 && n.host > out->host_have, as_short = out->as_have >= 0 && n.as > out->as_have;
        size_t len = strlen(levers);
        mgt__fmt_bytes(n.state, state, sizeof state);
        if (cfg->path[0]) mgt__textf(at, sizeof at, "%s: ", cfg->path);
        if (as_short && !host_short) /* the address space alone: ulimit -v counts KiB */
            mgt__textf(raise, sizeof raise, "%sulimit -v %.0f or more", len ? ", or with " : "", (mapped + n.as) / 1024.0 + 1);
        if (levers[0] || raise[0])
            mgt__textf(out->text, sizeof out->text, "%sdoes not fit this machine: %s; it fits with %s%s%s", at, cmp, levers, raise,
                     out->enforced ? "; MGT_MEMORY_CHECK=off runs it anyway" : "");
        else
            mgt__textf(out->text, sizeof out->text,
                     "%sdoes not fit this machine: %s; neither a smaller micro-batch, recompute nor ZeRO%s makes it fit: parameters, gradients and "
                     "optimizer state alone take %s; train a smaller model, or on a machine with more memory%s",
                     at, cmp, gpu_free ? " nor more GPUs for tp or pp" : "", state, out->enforced ? "; MGT_MEMORY_CHECK=off runs it anyway" : "");
    }
    return out->enforced ? mgt__fail(MGT_ERROR_CONFIG, "%s", out->text) : MGT_OK;
}
/* ==== end src/plan.c ==== */
/* ==== begin src/device.c ==== */
#line 1 "src/device.c"
/* src/device.c - where ranks go: the CUDA library opened at run time, the device choice, the sgemm
   probe */
/* ---- the CUDA backend library: opened on first use (src/plugin.c) ---------------------------- */

static pthread_mutex_t mgt__cuda_mu = PTHREAD_MUTEX_INITIALIZER;
static const mgt_cuda_api *mgt__cuda_api;
static char mgt__cuda_why[800];

MGTDEF mgt_result mgt_set_error(mgt_result result, const char *message) { return mgt__fail(result, "%s", message ? message : ""); }

/* the CUDA library's notes, through mgt's logger */
static void mgt__cuda_note(void *user, int level, const char *message) {
    (void)user;
    mgt__log(level, "%s", message);
}

MGTDEF void mgt_cuda_use(const mgt_cuda_api *api) {
    pthread_mutex_lock(&mgt__cuda_mu);
    mgt__cuda_api = api;
    if (api && api->set_logger) api->set_logger(mgt__cuda_note, NULL);
    mgt__cuda_why[0] = 0;
    pthread_mutex_unlock(&mgt__cuda_mu);
}

static const mgt__dl_lib mgt__cuda_lib = {"MGT_CUDA_LIBRARY", "libmgt_cuda.so", "mgt_cuda_api_get", "CUDA", "ninja cuda", MGT_CUDA_ABI};

/* NVIDIA's libraries as pip wheels (nvidia-cudnn-cu13, nvidia-nccl-cu13, nvidia-cublas...), where
   PyTorch users have them: site-packages/nvidia/<part>/lib, which no loader path names. When the
   CUDA library cannot load for want of one, each such folder of the Python environments in sight
   ($MGT_NVIDIA_PIP: a folder holding nvidia/; $VIRTUAL_ENV, $CONDA_PREFIX, the environment of the
   first python3 on PATH (an activated or a PATH-only virtualenv), ~/.local, /usr/local, /usr) has
   its libraries opened by path (RTLD_GLOBAL), so the library's needs are met by what is loaded,
   and it is tried again. The folder used, or "" when none had any. */
static char mgt__cuda_pip[512];
/* the environment of the first python3 on PATH: its bin/'s parent, links not followed (a
   virtualenv's python3 links to the system's), or "" */
static void mgt__python_prefix(char *out, size_t cap) {
    const char *path = getenv("PATH");
    out[0] = 0;
    while (path && *path) {
        size_t n = strcspn(path, ":");
        char exe[600];
        snprintf(exe, sizeof exe, "%.*s/python3", (int)n, path);
        if (n && !access(exe, X_OK)) {
            char *slash;
            snprintf(out, cap, "%.*s", (int)n, path);
            slash = strrchr(out, '/');
            if (slash && slash != out) *slash = 0; /* bin's parent */
            return;
        }
        path += n + (path[n] == ':');
    }
}
static int mgt__cuda_preload_pip(void) {
    const char *roots[7];
    char pattern[700], python[600];
    int i, opened = 0;
    size_t k;
    mgt__python_prefix(python, sizeof python);
    roots[0] = getenv("MGT_NVIDIA_PIP");
    roots[1] = getenv("VIRTUAL_ENV");
    roots[2] = getenv("CONDA_PREFIX");
    roots[3] = python;
    roots[4] = getenv("HOME");
    roots[5] = "/usr/local";
    roots[6] = "/usr";
    for (i = 0; i < 7 && !opened; i++) {
        glob_t g;
        if (!roots[i] || !roots[i][0]) continue;
        if (i == 0) snprintf(pattern, sizeof pattern, "%s/nvidia/*/lib/lib*.so.*", roots[i]);
        else snprintf(pattern, sizeof pattern, "%s/%slib/python3*/*-packages/nvidia/*/lib/lib*.so.*", roots[i], i == 4 ? ".local/" : "");
        if (glob(pattern, 0, NULL, &g) != 0) continue;
        for (k = 0; k < g.gl_pathc; k++) /* cudart, cuBLAS(Lt), cuDNN (its engines open each other), NCCL, NVRTC */
            if (dlopen(g.gl_pathv[k], RTLD_NOW | RTLD_GLOBAL)) {
                if (!opened++) {
                    char *nv = strstr(g.gl_pathv[k], "/nvidia/");
                    snprintf(mgt__cuda_pip, sizeof mgt__cuda_pip, "%.*s/nvidia", nv ? (int)(nv - g.gl_pathv[k]) : 0, g.gl_pathv[k]);
                }
            } else
                (void)dlerror();
        globfree(&g);
    }
    return opened;
}

MGTDEF const mgt_cuda_api *mgt_cuda_load(char *why, size_t cap) {
    const mgt_cuda_api *api;
    pthread_mutex_lock(&mgt__cuda_mu);
    if (!mgt__cuda_api && !mgt__cuda_why[0]) {
        char tried[600] = "";
        const char *env = getenv("MGT_CUDA_LIBRARY");
        mgt__cuda_api = (const mgt_cuda_api *)mgt__dl_search(&mgt__cuda_lib, tried, sizeof tried);
        if (!mgt__cuda_api && (strstr(tried, "libcudnn") || strstr(tried, "libnccl") || strstr(tried, "libcublas") || strstr(tried, "libcudart")) &&
            mgt__cuda_preload_pip()) { /* a library it needs is missing: NVIDIA's pip wheels, when a Python environment has them */
            tried[0] = 0;
            mgt__cuda_api = (const mgt_cuda_api *)mgt__dl_search(&mgt__cuda_lib, tried, sizeof tried);
            if (mgt__cuda_api) mgt__log(MGT_LOG_INFO, "CUDA: cuDNN, NCCL and cuBLAS from NVIDIA's pip wheels in %s", mgt__cuda_pip);
        }
        if (mgt__cuda_api && mgt__cuda_api->set_logger) mgt__cuda_api->set_logger(mgt__cuda_note, NULL);
        /* the usual CPU machine, no libmgt_cuda.so anywhere: one short line; one found that cannot
           load (a bundle's lib/libmgt_cuda.so without CUDA's libraries) names what it lacks */
        if (!mgt__cuda_api && (!tried[0] || strstr(tried, "libmgt_cuda.so: cannot open shared object file") == tried) && !(env && env[0]))
            snprintf(mgt__cuda_why, sizeof mgt__cuda_why, "no CUDA library built; `ninja cuda` builds one");
        else if (!mgt__cuda_api)
            snprintf(mgt__cuda_why, sizeof mgt__cuda_why, "the CUDA backend library is not built or cannot load (%s); build it with `ninja cuda`",
                     tried[0] ? tried : "not found");
    }
    api = mgt__cuda_api;
    if (!api && why) mgt__strlcpy(why, mgt__cuda_why, cap);
    pthread_mutex_unlock(&mgt__cuda_mu);
    return api;
}

MGTDEF const char *mgt_cuda_pip_folder(void) { return mgt__cuda_pip; }

/* The CUDA library when a run of cfg goes to GPUs: device cuda or auto, and a GPU for each of its
   `world` ranks; else NULL with why (device cpu: why is empty) */
/* the ranks of a world of `world` that this process runs: world / P under an MPI launcher of P
   processes (a contiguous block each), else all */
static int mgt__local_ranks(int world) {
    int p = mgt_mpi_launcher(NULL, 0);
    return p > 1 && world % p == 0 ? world / p : world;
}

static const mgt_cuda_api *mgt__gpus_for(const mgt_config *cfg, int world, char *why, size_t cap) {
    const mgt_cuda_api *api;
    int devices = 0, need = mgt__local_ranks(world);
    why[0] = 0;
    if (cfg->parallel.device == MGT_DEVICE_CPU) return NULL;
    api = mgt_cuda_load(why, cap);
    if (api && api->probe(&devices, why, cap) != 0) api = NULL;
    if (api && devices < need) {
        char grid[64];
        snprintf(why, cap, "the run needs %d GPUs (%s%s), this machine has %d", need,
                 mgt_grid_text(cfg->parallel.dp, cfg->parallel.cp, cfg->parallel.tp, cfg->parallel.pp, grid, sizeof grid),
                 need < world ? " over the launcher's processes" : "", devices);
        api = NULL;
    }
    return api;
}

/* ---- the world of GPU ranks talking through NCCL (the table of src/world.c) */
typedef struct mgt__nccl_state {
    const mgt_cuda_api *cuda;     /* the CUDA backend library */
    void *world;                  /* its NCCL world of this process's ranks */
    int first;                    /* this process's first rank, on its GPU 0 */
} mgt__nccl_state;

/* this process's ranks on its GPUs 0.. (one process per node, or a launcher that gives each
   process its own GPUs): under MPI the process of rank 0 makes NCCL's unique id and every process
   takes it from one allgather, then joins the world with its ranks (ncclCommInitRank) */
static mgt_result mgt__world_nccl_create(const mgt__world_args *a, void **world) {
    mgt__nccl_state *s = (mgt__nccl_state *)MGT_MALLOC(sizeof *s);
    const mgt__mpi_world *procs = a->procs;
    int *devices = (int *)MGT_MALLOC(sizeof(int) * (size_t)a->count), i;
    unsigned char mine[MGT_NCCL_ID_BYTES], *ids = procs ? (unsigned char *)MGT_MALLOC(MGT_NCCL_ID_BYTES * (size_t)procs->processes) : NULL;
    mgt_result res = MGT_OK;
    char why[512];
    *world = s;
    if (!s || !devices || (procs && !ids)) res = mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    if (s) {
        s->cuda = a->cuda;
        s->world = NULL;
        s->first = a->first;
    }
    for (i = 0; devices && i < a->count; i++) devices[i] = i;
    if (res == MGT_OK && procs) {
        memset(mine, 0, sizeof mine);
        if (procs->process == 0) res = a->cuda->unique_id(mine, mgt_set_error);
        if (procs->api->allgather(mine, ids, sizeof mine, why, sizeof why) && res == MGT_OK) /* every process calls it, even after a failure */
            res = mgt__fail(MGT_ERROR_COMM, "sending NCCL's unique id from the process of rank 0 to the others: MPI: %s", why);
    }
    if (res == MGT_OK) res = a->cuda->world_create(a->world, a->first, a->count, devices, ids, a->timeout_s, mgt_set_error, &s->world);
    MGT_FREE(devices);
    MGT_FREE(ids);
    return res;
}
/* rank i on its process's GPU i - (its first rank) */
static mgt_result mgt__world_nccl_backend(void *world, const mgt__rank_want *want, mgt_backend **out, int *device) {
    mgt__nccl_state *s = (mgt__nccl_state *)world;
    char why[600];
    *device = want->rank - s->first;
    if (s->cuda->backend_create(s->world, *device, want->dtype, out, why, sizeof why) != 0)
        return mgt__fail(MGT_ERROR_DEVICE, "rank %d cannot start on GPU %d: %s", want->rank, *device, why);
    return MGT_OK;
}
static void mgt__world_nccl_backend_destroy(void *world, mgt_backend *be) { ((mgt__nccl_state *)world)->cuda->backend_destroy(be); }
/* ordered after the backend's stream */
static mgt_result mgt__world_nccl_comm(void *world, int rank, mgt_backend *be, const mgt_group *const *groups, int ngroups, mgt_comm **out) {
    mgt__nccl_state *s = (mgt__nccl_state *)world;
    return s->cuda->comm_create(s->world, rank, s->cuda->backend_stream(be), groups, ngroups, out);
}
static mgt_result mgt__world_nccl_settle(void *world, mgt_comm *c) { return ((mgt__nccl_state *)world)->cuda->comm_settle(c); }
static void mgt__world_nccl_comm_destroy(void *world, mgt_comm *c) { ((mgt__nccl_state *)world)->cuda->comm_destroy(c); }
static void mgt__world_nccl_rank_failed(void *world, mgt_comm *c) {
    mgt__nccl_state *s = (mgt__nccl_state *)world;
    (void)c; /* every rank's pending call returns */
    s->cuda->world_abort(s->world);
}
static void mgt__world_nccl_read_gpu(void *world, int device, mgt_gpu_reading *out) { ((mgt__nccl_state *)world)->cuda->reading(device, out); }
static void mgt__world_nccl_destroy(void *world) {
    mgt__nccl_state *s = (mgt__nccl_state *)world;
    if (s->world) s->cuda->world_destroy(s->world);
    MGT_FREE(s);
}
static const mgt__world_api mgt__world_nccl = {
    "cuda", 1, 1, mgt__world_nccl_create, mgt__world_nccl_backend, mgt__world_nccl_backend_destroy, mgt__world_nccl_comm,
    mgt__world_nccl_settle, mgt__world_nccl_comm_destroy, mgt__world_nccl_rank_failed, mgt__world_nccl_read_gpu, mgt__world_nccl_destroy,
};

/* where a run's ranks go: the CPU, or one GPU each (device cuda, or auto when GPUs work). Sets
   *cuda (NULL: CPU); a run that asked for cuda and cannot have it fails with what to do. */
static mgt_result mgt__choose_device(const mgt_config *cfg, int world, const mgt_cuda_api **cuda) {
    char why[900], where[300];
    *cuda = mgt__gpus_for(cfg, world, why, sizeof why);
    if (*cuda || cfg->parallel.device == MGT_DEVICE_CPU) return MGT_OK;
    if (cfg->parallel.device == MGT_DEVICE_CUDA)
        return mgt__fail(MGT_ERROR_UNSUPPORTED, "%s: [parallel] device = cuda, but no usable GPU: %s; set device = cpu (or auto) to train on the CPU",
                         mgt__where(cfg, mgt__find_key("parallel", "device"), where, sizeof where), why);
    /* the usual CPU machine, which never built the CUDA library, hears nothing of it on every run */
    if (strncmp(why, "no CUDA library built", 21)) mgt__log(MGT_LOG_INFO, "device auto: training on the CPU (%s)", why);
    return MGT_OK;
}

MGTDEF int mgt_device_for(const mgt_config *cfg, char *why, size_t cap) {
    char w[1024];
    const mgt_cuda_api *api = mgt__gpus_for(cfg, mgt_config_ranks(cfg), w, sizeof w);
    if (why) mgt__strlcpy(why, api ? "" : w, cap);
    return api != NULL;
}

/* the fit of a planned run on the CPU (api NULL) or on the GPUs of api, one rank each */
static mgt_result mgt__fit_on(const mgt_plan *plan, const mgt_cuda_api *api, int inference, mgt_fit *out) {
    double *free_bytes = NULL;
    int world = plan->world, i, local = mgt__local_ranks(world);
    mgt_result res;
    if (api) {
        free_bytes = (double *)MGT_MALLOC(sizeof(double) * (size_t)world);
        if (!free_bytes) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
        for (i = 0; i < world; i++) { /* rank i on GPU i % local of its process's machine */
            mgt_gpu_info info;
            free_bytes[i] = api->info(i % local, &info) == 0 && info.memory_free > 0 ? (double)info.memory_free : -1;
        }
    }
    res = mgt__fit(plan, inference, free_bytes, api ? world : 0, out);
    MGT_FREE(free_bytes);
    return res;
}

MGTDEF mgt_result mgt_plan_fit(const mgt_config *cfg, mgt_fit *out) {
    const mgt_cuda_api *api;
    mgt_plan plan;
    char why[900];
    if (!cfg || !out) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_plan_fit: cfg and out are required");
    memset(out, 0, sizeof *out);
    MGT__TRY(mgt_config_validate(cfg));
    MGT__TRY(mgt__layout_chosen(cfg, "the memory check"));
    MGT__TRY(mgt__plan_make(cfg, &plan));
    api = mgt__gpus_for(cfg, mgt_config_ranks(cfg), why, sizeof why);
    if (!api && cfg->parallel.device == MGT_DEVICE_CUDA) { /* the run itself would stop at its device */
        out->device = MGT_DEVICE_CUDA;
        out->fits = 1;
        out->gpu_rank = -1;
        snprintf(out->text, sizeof out->text, "GPU memory not checked: no usable GPU here (%s)", why);
        return MGT_OK;
    }
    return mgt__fit_on(&plan, api, 0, out);
}

/* GFLOP/s of 1024^3 GEMMs on a pool of `threads`: sgemm (bf16 0), or bf16 through oneDNN (0 when
   a bf16 backend would widen to sgemm instead); the median of repetitions over about `seconds` */
static double mgt__cpu_gemm_gflops(int bf16, int threads, double seconds) {
    const int n = 1024;
    const size_t elt = bf16 ? 2 : 4;
    mgt_backend *be;
    void *a, *b, *c;
    double rates[256], t_all = 0;
    int reps = 0, i, j;
    if (threads <= 0 || threads > 4096) threads = mgt_cpu_count();
    if (mgt__cpu_backend_create_typed(&be, threads, 0, bf16 ? MGT_BF16 : MGT_F32, 0) != MGT_OK) return 0;
    if (bf16 && !((mgt__cpu *)be->impl)->onednn) { mgt__cpu_backend_destroy(be); return 0; }
    a = MGT_MALLOC(elt * (size_t)n * n);
    b = MGT_MALLOC(elt * (size_t)n * n);
    c = MGT_MALLOC(elt * (size_t)n * n);
    if (a && b && c) {
        for (i = 0; i < n * n; i++) {
            float x = (float)(i % 7) * 0.1f, y = (float)(i % 5) * 0.1f;
            if (bf16) ((uint16_t *)a)[i] = mgt__f32_to_bf16(x), ((uint16_t *)b)[i] = mgt__f32_to_bf16(y);
            else ((float *)a)[i] = x, ((float *)b)[i] = y;
        }
        for (i = -1; i < 256 && (i < 3 || t_all < seconds); i++) { /* i = -1 warms caches, BLAS buffers and oneDNN's plan */
            double t0 = mgt_now(), dt;
            be->matmul_forward(be, c, a, b, NULL, n, n, n); /* c = a b^T */
            dt = mgt_now() - t0;
            if (i < 0) continue;
            t_all += dt;
            rates[reps++] = 2.0 * n * n * (double)n / dt * 1e-9;
        }
        for (i = 1; i < reps; i++) /* the median: a shared machine's slow repetitions do not pull it down */
            for (j = i; j > 0 && rates[j] < rates[j - 1]; j--) { double t = rates[j]; rates[j] = rates[j - 1]; rates[j - 1] = t; }
    }
    MGT_FREE(a); MGT_FREE(b); MGT_FREE(c);
    mgt__cpu_backend_destroy(be);
    return reps ? rates[reps / 2] : 0;
}
MGTDEF double mgt_cpu_sgemm_gflops(int threads, double seconds) { return mgt__cpu_gemm_gflops(0, threads, seconds); }
MGTDEF double mgt_cpu_bf16_gemm_gflops(int threads, double seconds) { return mgt__cpu_gemm_gflops(1, threads, seconds); }

MGTDEF void mgt_run_set_peak(mgt_run *r, double gflops_per_rank, const char *source) {
    if (!r) return;
    r->peak_per_rank = gflops_per_rank > 0 && isfinite(gflops_per_rank) ? gflops_per_rank : 0;
    mgt__strlcpy(r->peak_source, source ? source : "", sizeof r->peak_source);
}

/* 64 random bits (the kernel's; else time, process and address), as 16 hex digits */
/* ==== end src/device.c ==== */
/* ==== begin src/api.c ==== */
#line 1 "src/api.c"
/* src/api.c - making and destroying a run (mgt_run_create, mgt_run_open, mgt_run_destroy), sampling */
static void mgt__new_run_id(char *id, size_t cap) {
    uint64_t x = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, &x, sizeof x) != (ssize_t)sizeof x) x = mgt__mix64((uint64_t)(mgt_now() * 1e9) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)id);
    if (fd >= 0) close(fd);
    snprintf(id, cap, "%016llx", (unsigned long long)x);
}

/* given: a world made by its owner (the simulator's), with its state; NULL: the world this machine
   and launcher give (src/world.c) */
static mgt_result mgt__run_alloc_on(mgt_run **out, const mgt_config *cfg, int inference, const mgt__world_api *given, void *given_world);
static mgt_result mgt__run_alloc(mgt_run **out, const mgt_config *cfg, int inference) { return mgt__run_alloc_on(out, cfg, inference, NULL, NULL); }
static mgt_result mgt__run_alloc_on(mgt_run **out, const mgt_config *cfg, int inference, const mgt__world_api *given, void *given_world) {
    mgt_run *r;
    const mgt_cuda_api *cuda = NULL;
    int i, total, cores;
    *out = NULL;
    r = (mgt_run *)MGT_MALLOC(sizeof *r);
    if (!r) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    memset(r, 0, sizeof *r);
    r->inference = inference;
    r->saved_step = -1;
    r->lock_fd = -1;
    r->processes = 1;
    mgt__new_run_id(r->run_id, sizeof r->run_id);
    r->dtype = cfg->precision.dtype == MGT_DTYPE_BF16 ? MGT_BF16 : cfg->precision.dtype == MGT_DTYPE_FP16 ? MGT_F16 : MGT_F32;
    r->loss_scale = r->dtype == MGT_F16 ? cfg->precision.loss_scale : 1.0;
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->stats_mu, NULL);
    r->created_s = mgt_now();
    r->state = MGT_STATE_STARTING;
    pthread_cond_init(&r->cv_cmd, NULL);
    pthread_cond_init(&r->cv_done, NULL);
    {
        mgt_result res = mgt__plan_make(cfg, &r->plan);
        if (res != MGT_OK) { mgt_run_destroy(r); return res; }
    }
    if (!given) { /* where the ranks go, and whether they fit there, before anything large is allocated (a simulated run allocates nothing) */
        mgt_fit fit;
        mgt_result res = mgt__choose_device(cfg, r->plan.world, &cuda);
        if (res == MGT_OK) res = mgt__fit_on(&r->plan, cuda, inference, &fit);
        if (res != MGT_OK) { mgt_run_destroy(r); return res; }
        if (!fit.fits) {
            mgt__log(MGT_LOG_WARN, "MGT_MEMORY_CHECK=off: %s", fit.text);
            mgt__event(r, MGT_LOG_WARN, "the run does not fit this machine's memory (MGT_MEMORY_CHECK=off): it may fail or swap");
        } else if (fit.host_have > 0 && fit.host_need > 0.5 * fit.host_have / MGT__HOST_SHARE) {
            char need[32], avail[32];
            mgt__fmt_bytes(fit.host_need, need, sizeof need);
            mgt__fmt_bytes(fit.host_have / MGT__HOST_SHARE, avail, sizeof avail);
            mgt__event(r, MGT_LOG_WARN, "the run takes %s of RAM, %.0f%% of what this machine has available (MemAvailable %s): other programs may run short",
                       need, 100 * fit.host_need * MGT__HOST_SHARE / fit.host_have, avail);
        }
    }
    r->rank_lo = 0;
    r->rank_hi = r->plan.world;
    if (!given && !inference && mgt_mpi_launcher(NULL, 0) > 1) { /* this process runs its block of the ranks */
        mgt_result res = mgt_mpi_start(&r->process, &r->processes);
        if (res == MGT_OK)
            res = mgt__mpi_world_create(&r->procs, mgt__mpi_api, r->process, r->processes, r->plan.world, cfg->parallel.timeout_s);
        if (res != MGT_OK) { mgt_run_destroy(r); return res; }
        r->rank_lo = r->process * r->procs->per;
        r->rank_hi = r->rank_lo + r->procs->per;
    }
    /* the one choice of world; everything after asks the table */
    r->world_api = given ? given : cuda ? &mgt__world_nccl : r->procs ? &mgt__world_mpi : &mgt__world_local;
    /* the cores are divided evenly between the ranks of this process, at least one thread each */
    cores = mgt_cpu_count();
    total = cfg->parallel.threads > 0 ? cfg->parallel.threads : cores;
    r->threads_per_rank = total / (r->rank_hi - r->rank_lo) > 0 ? total / (r->rank_hi - r->rank_lo) : 1;
    /* ranks on this machine's cores (not on GPUs, nor simulated): warn where they would only take turns */
    if (!given && !r->world_api->on_gpus && cfg->parallel.threads > cores) /* each op ends when its slowest thread does: spare threads only wait */
        mgt__event(r, MGT_LOG_WARN, "[parallel] threads = %d on %d core%s: a rank's threads meet at every op, so threads beyond the cores only "
                   "wait for each other and a step takes many times longer; set threads = 0 (one per core)", cfg->parallel.threads, cores, cores == 1 ? "" : "s");
    if (!given && !r->world_api->on_gpus && r->rank_hi - r->rank_lo > cores) { /* this process's ranks on its cores */
        char grid[64];
        mgt__event(r, MGT_LOG_WARN, "%d ranks (%s%s) on %d core%s: a rank is at least one thread, so ranks take turns on the cores and a step is slower "
                   "than on fewer ranks", r->rank_hi - r->rank_lo, r->rank_hi - r->rank_lo < r->plan.world ? "this process's, of " : "",
                   mgt_grid_text(r->plan.dp, r->plan.cp, r->plan.tp, r->plan.pp, grid, sizeof grid), cores, cores == 1 ? "" : "s");
    }
    r->ranks = (mgt__rank *)MGT_MALLOC(sizeof(mgt__rank) * (size_t)r->plan.world);
    r->rank_stats = (mgt_rank_stats *)MGT_MALLOC(sizeof(mgt_rank_stats) * (size_t)r->plan.world);
    if (r->rank_stats) memset(r->rank_stats, 0, sizeof(mgt_rank_stats) * (size_t)r->plan.world);
    if (r->ranks) memset(r->ranks, 0, sizeof(mgt__rank) * (size_t)r->plan.world); /* destroy may walk them */
    if (!r->ranks || !r->rank_stats) { mgt_run_destroy(r); return mgt__fail(MGT_ERROR_MEMORY, "out of memory"); }
    {
        mgt_result res = MGT_OK;
        if (r->processes > 1) {
            r->shadow_be = (mgt_backend *)MGT_MALLOC(sizeof(mgt_backend) * (size_t)r->plan.world);
            r->shadow_comm = (mgt_comm *)MGT_MALLOC(sizeof(mgt_comm) * (size_t)r->plan.world);
            if (!r->shadow_be || !r->shadow_comm) res = mgt__fail(MGT_ERROR_MEMORY, "out of memory");
            else {
                memset(r->shadow_be, 0, sizeof(mgt_backend) * (size_t)r->plan.world);
                memset(r->shadow_comm, 0, sizeof(mgt_comm) * (size_t)r->plan.world);
            }
        }
        if (res == MGT_OK && given) r->world = given_world;
        else if (res == MGT_OK) {
            mgt__world_args a;
            a.world = r->plan.world;
            a.first = r->rank_lo;
            a.count = r->rank_hi - r->rank_lo;
            a.timeout_s = cfg->parallel.timeout_s;
            a.procs = r->procs;
            a.cuda = cuda;
            res = r->world_api->create(&a, &r->world);
        }
        if (res != MGT_OK) { mgt_run_destroy(r); return res; }
    }
    for (i = 0; i < r->plan.world; i++) {
        mgt_result res;
        if (i < r->rank_lo || i >= r->rank_hi) { mgt__shadow_rank(r, &r->ranks[i], i); continue; }
        res = mgt__rank_init(r, &r->ranks[i], i);
        if (res != MGT_OK) { mgt_run_destroy(r); return res; }
    }
    if (r->plan.world > 1) {
        for (i = r->rank_lo; i < r->rank_hi; i++)
            if (pthread_create(&r->ranks[i].thread, NULL, mgt__rank_main, &r->ranks[i])) {
                r->started = 1;
                mgt_run_destroy(r);
                return mgt__fail(MGT_ERROR_MEMORY, "cannot start the thread of rank %d", i);
            }
        r->started = 1;
    }
    { /* each rank takes its communicator on its own thread */
        mgt_result res = mgt__run_cmd(r, MGT__CMD_CONNECT, NULL, 0);
        if (res != MGT_OK) { mgt_run_destroy(r); return res; }
    }
    *out = r;
    return MGT_OK;
}

MGTDEF void mgt_run_destroy(mgt_run *r) {
    int i;
    if (!r) return;
    if (r->started) {
        pthread_mutex_lock(&r->mu);
        r->cmd = MGT__CMD_QUIT;
        r->generation++;
        pthread_cond_broadcast(&r->cv_cmd);
        pthread_mutex_unlock(&r->mu);
        for (i = 0; i < r->plan.world; i++) if (r->ranks[i].thread) pthread_join(r->ranks[i].thread, NULL);
    }
    if (r->has_train) mgt__loader_close(&r->train);
    if (r->has_val) mgt__loader_close(&r->val);
    if (r->metrics) fclose(r->metrics);
    if (r->tensorboard) fclose(r->tensorboard);
    if (r->lock_fd >= 0) { /* releases the folder, leaving no lock file behind (a run that takes it next checks it took the named one) */
        char lock_path[MGT_STR_MAX + 48];
        snprintf(lock_path, sizeof lock_path, "%s/mgt.lock", r->dir);
        unlink(lock_path);
        close(r->lock_fd);
    }
    if (r->ranks) for (i = 0; i < r->plan.world; i++) if (r->ranks[i].run) mgt__rank_free(&r->ranks[i]);
    if (r->world && r->world_api->destroy) r->world_api->destroy(r->world);
    mgt__mpi_world_destroy(r->procs);
    MGT_FREE(r->shadow_be);
    MGT_FREE(r->shadow_comm);
    pthread_mutex_destroy(&r->mu);
    pthread_mutex_destroy(&r->stats_mu);
    MGT_FREE(r->history);
    MGT_FREE(r->events);
    MGT_FREE(r->rank_stats);
    pthread_cond_destroy(&r->cv_cmd);
    pthread_cond_destroy(&r->cv_done);
    MGT_FREE(r->ranks);
    MGT_FREE(r);
}

/* mgt_run_create on a given world (NULL: this machine's); tests wrap the local world's to inject faults */
static mgt_result mgt__run_create_on(mgt_run **out, const mgt_config *cfg, const mgt__world_api *given, void *given_world) {
    mgt_run *r;
    mgt_result res;
    mgt_config resolved;
    if (!out || !cfg) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_create: out and cfg are required");
    *out = NULL;
    resolved = *cfg;
    cfg = &resolved; /* the model keys [model] init gives */
    MGT__TRY(mgt_config_resolve_init(&resolved));
    MGT__TRY(mgt_config_validate(cfg));
    MGT__TRY(mgt__layout_chosen(cfg, "a run"));
    MGT__TRY(mgt__run_alloc_on(&r, cfg, 0, given, given_world));
    if (cfg->model.init[0] && (res = mgt__init_weights(r)) != MGT_OK) { mgt_run_destroy(r); return res; }
    if (cfg->data.train[0]) {
        char name[400];
        res = mgt__loader_open(&r->train, cfg->data.train, mgt__data_key(cfg, "train", name, sizeof name), cfg->model.vocab_size, cfg->model.seq_len,
                               cfg->train.global_batch, (uint64_t)cfg->train.seed, 1);
        if (res != MGT_OK) { mgt_run_destroy(r); return res; }
        r->has_train = 1;
    }
    if (cfg->data.val[0]) {
        char name[400];
        res = mgt__loader_open(&r->val, cfg->data.val, mgt__data_key(cfg, "val", name, sizeof name), cfg->model.vocab_size, cfg->model.seq_len, 1,
                               (uint64_t)cfg->train.seed, 0);
        if (res != MGT_OK) { mgt_run_destroy(r); return res; }
        r->has_val = 1;
        if (r->has_train) { /* validating on shards it also trains on measures memory, not generalisation */
            int a, b;
            for (a = 0; a < r->train.nshards; a++)
                for (b = 0; b < r->val.nshards; b++)
                    if (r->train.shards[a].dev == r->val.shards[b].dev && r->train.shards[a].ino == r->val.shards[b].ino) {
                        mgt__log(MGT_LOG_WARN, "[data] val's shard %d is also [data] train's shard %d: the validation loss is of data the run trains on",
                                 b + 1, a + 1);
                        a = r->train.nshards;
                        break;
                    }
        }
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
    if (strcmp(cfg->log.metrics, "auto")) mgt__strlcpy(r->metrics_path, cfg->log.metrics, sizeof r->metrics_path);
    else snprintf(r->metrics_path, sizeof r->metrics_path, "%s/metrics.jsonl", r->dir);
    *out = r; /* the folder and metrics.jsonl are taken by mgt_run_claim, after a resume */
    return MGT_OK;
}
/* ---- training: a step, then what follows it (validation, the metrics line, a periodic checkpoint) ---- */

/* after a step: validate when due, write the metrics line, checkpoint when due */
static mgt_result mgt__after_step(mgt_run *r) {
    const mgt_config *cfg = &r->plan.cfg;
    int evaluated = 0;
    if (r->has_val && cfg->train.eval_every > 0 && (r->step % cfg->train.eval_every == 0 || r->step == cfg->train.steps)) {
        double vl;
        MGT__TRY(mgt_run_eval(r, &vl));
        evaluated = 1;
    }
    MGT__TRY(mgt__metrics_line(r, r->step % cfg->log.every == 0 || r->step == cfg->train.steps, evaluated));
    if (cfg->checkpoint.every > 0 && r->step % cfg->checkpoint.every == 0) return mgt_run_save(r, NULL, 0);
    return MGT_OK;
}

MGTDEF mgt_result mgt_run_step(mgt_run *r) {
    if (!r) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_step: run is NULL");
    if (r->inference) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_step: this run was opened for sampling only");
    if (!r->has_train) return mgt__fail(MGT_ERROR_CONFIG, "[data] train is empty: set it to a token shard");
    MGT__TRY(mgt__claim_before_step(r));
    MGT__TRY(mgt__train_step(r, mgt__loader_get(&r->train, r->step)));
    return mgt__after_step(r);
}

MGTDEF mgt_result mgt_run_step_tokens(mgt_run *r, const uint32_t *rows) {
    int i, n;
    if (!r || !rows) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_step_tokens: run and rows are required");
    if (r->inference) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_step_tokens: this run was opened for sampling only");
    n = r->plan.cfg.train.global_batch * (r->plan.cfg.model.seq_len + 1);
    for (i = 0; i < n; i++)
        if (rows[i] >= (uint32_t)r->plan.cfg.model.vocab_size)
            return mgt__fail(MGT_ERROR_DATA, "mgt_run_step_tokens: token %lu at %d is beyond vocab_size %d", (unsigned long)rows[i], i, r->plan.cfg.model.vocab_size);
    MGT__TRY(mgt__claim_before_step(r));
    MGT__TRY(mgt__train_step(r, rows));
    return mgt__after_step(r);
}

MGTDEF mgt_result mgt_run_create(mgt_run **out, const mgt_config *cfg) { return mgt__run_create_on(out, cfg, NULL, NULL); }

MGTDEF mgt_result mgt_run_open(mgt_run **out, const char *checkpoint, int threads) {
    mgt_config cfg;
    mgt_run *r;
    mgt_result res;
    if (!out || !checkpoint) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_open: out and checkpoint are required");
    *out = NULL;
    MGT__TRY(mgt_checkpoint_config(checkpoint, &cfg));
    if (threads > 0) cfg.parallel.threads = threads;
    cfg.parallel.dp = cfg.parallel.tp = cfg.parallel.pp = cfg.parallel.cp = 1; /* sampling runs on one rank, whatever trained it */
    cfg.parallel.pp_virtual = 1;
    cfg.parallel.zero = cfg.parallel.sp = 0;
    MGT__TRY(mgt__run_alloc(&r, &cfg, 1));
    res = mgt_run_resume(r, checkpoint);
    if (res != MGT_OK) { mgt_run_destroy(r); return res; }
    *out = r;
    return MGT_OK;
}

MGTDEF int mgt_run_generate(mgt_run *r, const int *prompt, int n_prompt, int *out, int max_new, double temperature, int top_k, uint64_t seed) {
    int *ctx, n = n_prompt, i, j, V;
    float *probs, *logits;
    void *raw;
    mgt__rank *rk;
    if (!r || !prompt || n_prompt < 1 || !out || max_new < 0 || r->plan.world != 1) {
        mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_generate: needs a one-rank run, a prompt of at least one token, out and max_new >= 0");
        return -1;
    }
    rk = &r->ranks[0];
    V = r->plan.cfg.model.vocab_size;
    ctx = (int *)MGT_MALLOC(sizeof(int) * (size_t)(n_prompt + max_new + 1));
    probs = (float *)MGT_MALLOC(sizeof(float) * (size_t)V);
    logits = (float *)MGT_MALLOC(sizeof(float) * (size_t)rk->shape.Vl); /* the last row in fp32 */
    raw = MGT_MALLOC(rk->shape.elt * (size_t)rk->shape.Vl);              /* and as stored */
    if (!ctx || !probs || !logits || !raw) {
        MGT_FREE(ctx); MGT_FREE(probs); MGT_FREE(logits); MGT_FREE(raw);
        mgt__fail(MGT_ERROR_MEMORY, "out of memory");
        return -1;
    }
    memcpy(ctx, prompt, sizeof(int) * (size_t)n_prompt);
    for (i = 0; i < max_new; i++) {
        int start = n > r->plan.cfg.model.seq_len ? n - r->plan.cfg.model.seq_len : 0, len = n - start, pick = 0, T = rk->shape.T, B0;
        mgt__acts *A = &rk->acts[0];
        double total = 0, u, acc = 0, mx = -1e30, kth = -1e30;
        mgt__enter(rk->be);
        rk->be->upload(rk->be, A->inputs, ctx + start, sizeof(int) * (size_t)len);
        B0 = rk->shape.B;
        rk->shape.B = 1;
        rk->shape.T = len; /* the buffers are sized for seq_len; a shorter context uses a prefix */
        mgt__stage_forward(rk, A);
        mgt__norm_forward(rk, A->lnf, A->lnf_mean, A->lnf_rstd, A->resid[rk->nblocks], mgt__t_lnf(rk), mgt__t_lnf_bias(rk), len);
        rk->be->matmul_forward(rk->be, A->logits, A->lnf, mgt__P(rk, mgt__t_head(rk)), NULL, len, rk->shape.C, rk->shape.Vl);
        rk->shape.T = T;
        rk->shape.B = B0;
        rk->be->download(rk->be, raw, (const char *)A->logits + (size_t)(len - 1) * (size_t)rk->shape.Vl * rk->shape.elt,
                         (size_t)rk->shape.Vl * rk->shape.elt);
        for (j = 0; j < rk->shape.Vl; j++) logits[j] = mgt__load(raw, (size_t)j, rk->be->dtype);
        if (rk->be->error && rk->be->error(rk->be)) {
            mgt__fail(MGT_ERROR_DEVICE, "%s", rk->be->error(rk->be));
            max_new = -1;
            break;
        }
        for (j = 0; j < V; j++) mx = logits[j] > mx ? logits[j] : mx;
        if (top_k > 0 && top_k < V) { /* the k-th largest logit: partial selection over a copy */
            int k;
            for (j = 0; j < V; j++) probs[j] = logits[j];
            for (k = 0; k < top_k; k++) {
                int best = k;
                for (j = k + 1; j < V; j++) if (probs[j] > probs[best]) best = j;
                { float t = probs[k]; probs[k] = probs[best]; probs[best] = t; }
            }
            kth = probs[top_k - 1];
        }
        for (j = 0; j < V; j++) {
            double p = logits[j] < kth ? 0.0 : (temperature > 0 ? exp((logits[j] - mx) / temperature) : (logits[j] == mx ? 1.0 : 0.0));
            probs[j] = (float)p;
            total += p;
        }
        u = mgt__uniform(mgt_hash3(seed, 0x73616d70, (uint64_t)i)) * total;
        for (j = 0; j < V; j++) { acc += probs[j]; pick = j; if (acc >= u && probs[j] > 0) break; }
        ctx[n++] = pick;
        out[i] = pick;
    }
    MGT_FREE(ctx);
    MGT_FREE(probs);
    MGT_FREE(logits);
    MGT_FREE(raw);
    return max_new;
}
/* ==== end src/api.c ==== */
/* ==== begin src/sim.c ==== */
#ifndef MGT_NO_SIM
#line 1 "src/sim.c"
/* src/sim.c - the step simulator: its ranks' clocks, the devices it knows, the price of an op */
/* ---- the step simulator: a backend and a communicator that keep clocks ----------------------
   Each rank has three clocks: its host thread (th), its compute stream (tc) and its communication
   stream (tm), in seconds from the start of the step. An op costs the host a launch and runs on
   the compute stream once both are there; a collective starts on the communication stream after
   the compute enqueued before it (NCCL's ordering) and completes when its last member has issued
   it, plus its cost; the compute waits for it, unless the call was deferred, until sync(ticket). A
   send occupies the sender's stream for its cost (buffered: it does not wait for the receiver); a
   receive completes at max(its issue, the send's issue) + the cost. Devices with host_sync (the
   CPU) run everything on the rank's thread, one thing after another. No data is read or written:
   alloc returns addresses inside a reserved range that is never mapped, and host buffers a call
   writes (a gathered norm, downloaded losses) get zeros. */

#define MGT__SIM_TICKETS 64
#define MGT__SIM_PCIE 25e9 /* bytes/s of host-device copies (PCIe 4.0 x16, what one direction achieves) */

typedef struct mgt__sim_world mgt__sim_world;
typedef struct mgt__sim_event { const char *name; double start, dur; int stream; } mgt__sim_event;

typedef struct mgt__sim_rank {
    mgt__sim_world *w;
    int rank;
    mgt_backend be;
    mgt_comm comm;
    double th, tc, tm;              /* host, compute stream, communication stream */
    int tm_coll;                    /* the collective the communication stream ends with */
    int defer_next;
    long long args[6];              /* the shape arguments of the op being charged (MGT__SIM_ARGS) */
    double tensor_frac;             /* and its GEMM part's fraction of the tensor peak (mgt_sim_op.tensor_frac) */
    double host_us;                 /* and its host time beyond the launches (mgt_sim_op.host_us) */
    double serial_us;               /* and its one-SM part (mgt_sim_op.serial_us) */
    long tickets;
    double ticket_end[MGT__SIM_TICKETS];
    int ticket_coll[MGT__SIM_TICKETS];
    int seq_id[8];                  /* calls made on each group so far */
    long seq[8];
    int nseq;
    mgt_sim_rank st;
    mgt__sim_event *ev;             /* the trace, when asked for */
    size_t nev, cap_ev;
} mgt__sim_rank;

typedef struct mgt__sim_slot { int arrived, left, done; double issue, cost, end; } mgt__sim_slot;
typedef struct mgt__sim_group {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int known, nodes, per_node;     /* the nodes its members span, the most members on one of them */
    mgt__sim_slot slot[2];          /* a member cannot be two calls ahead: each call waits for all */
} mgt__sim_group;
typedef struct mgt__sim_msg { int src, taken; double issue, cost; } mgt__sim_msg;
typedef struct mgt__sim_box {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    mgt__sim_msg *msg;
    size_t n, head, cap;
} mgt__sim_box;

typedef struct mgt__sim_measured { const char *op; long long args[6]; int dtype; double sec; } mgt__sim_measured;
typedef struct mgt__sim_meter {     /* a CPU backend and buffers that run ops of the shapes met so far */
    mgt_backend *be;
    size_t wide, scratch;           /* its fp32 workspace for 16-bit ops; attention's per thread */
    int dtype;
    float *arena;
    size_t floats;
} mgt__sim_meter;
struct mgt__sim_world {
    mgt_sim_options opt;
    int world, ngroups, aborted;
    /* the cpu device: ops priced by running the CPU backend's (threads of a rank), once per shape */
    int measure_threads;
    int companions;                 /* the other ranks the machine runs at once, which run the op beside the one timed */
    pthread_mutex_t measure_mu;
    mgt__sim_meter *meters;         /* [0] times, the others are the companions */
    mgt__sim_measured *measured;
    size_t nmeasured, cap_measured;
    long long ops_modelled;
    mgt__sim_rank *ranks;
    mgt__sim_group *groups;
    mgt__sim_box *boxes;
    char *base;                     /* the reserved, never mapped, range the fake pointers lie in */
    size_t span, bump;
    pthread_mutex_t mu;
};

static const char *const mgt__sim_family_names[MGT_SIM_FAMILIES] = {"gemm", "attention", "norm", "elementwise", "embedding", "loss", "optimizer"};
MGTDEF const char *mgt_sim_family_name(int family) { return family >= 0 && family < MGT_SIM_FAMILIES ? mgt__sim_family_names[family] : "?"; }

/* The devices: dense peaks (no structured sparsity), per GPU; sources in docs/simulator.md.
   Achievable fractions and latencies are assumptions, stated there too, except where a source is named:
   - link_frac 0.82: NCCL's protocol overhead on NVLink, "450GB/s is the line rate. With the protocol
     overhead (~20%) NCCL can get an effective NVLink bandwidth of 370GB/s" (S. Jeaugey, NCCL maintainer,
     github.com/NVIDIA/nccl-tests/issues/212); the same overhead assumed on the other links.
   - nvls_gbps 275: an all-reduce inside an H100/H200 node goes through NVLink SHARP by default, "On 8
     GPUs, you should reach a peak busBw of ~480GB/s (algbw ~275GB/s)" (same thread; nccl-tests issue
     290: 476 GB/s measured, "in the expected range for H100"). A100 has no NVLS; for B200 no published
     figure was found, so it keeps the ring.
   - transc_gps: exp2/tanh run on the special function units, 16 results per clock per SM on compute
     capability 8.0 and 9.0 (CUDA C++ Programming Guide, "Arithmetic Instructions" throughput table),
     times SMs and clock; B200 assumed alike.
   - clock_ghz: the clock the datasheet's dense BF16 peak implies (peak / (SMs x dense FLOP per clock
     per SM: 2048 on A100, 4096 on H100, 8192 assumed on B200)): 1.41, 1.83, 1.86 GHz.
   name title {TF32, BF16, FP16 TFLOP/s} fp32 TFLOP/s, GB/s, GiB, gemm_frac, gemm_dim, vector_frac,
   mem_frac, launch us, NVLink GB/s, NIC GB/s, latency inside/between nodes us, per ring step us,
   link_frac, reserve GiB, host_sync, exp/tanh G/s (0: vector_tflops / 4), SMs, clock GHz, NVLS GB/s */
static mgt_sim_device mgt__sim_table[] = {
    {"a100", "NVIDIA A100 SXM4 80GB", {156, 312, 312}, 19.5, 2039, 80, 0.80, 64, 0.5, 0.80, 4, 300, 25, 10, 20, 0.5, 0.82, 1.0, 0, 16 * 108 * 1.41, 108, 1.41, 0},
    {"h100", "NVIDIA H100 SXM5 80GB", {494.7, 989.4, 989.4}, 66.9, 3350, 80, 0.75, 64, 0.5, 0.85, 4, 450, 50, 10, 20, 0.5, 0.82, 1.0, 0, 16 * 132 * 1.83, 132, 1.83,
     275},
    {"h200", "NVIDIA H200 SXM 141GB", {494.7, 989.4, 989.4}, 66.9, 4800, 141, 0.75, 64, 0.5, 0.85, 4, 450, 50, 10, 20, 0.5, 0.82, 1.0, 0, 16 * 132 * 1.83, 132, 1.83,
     275},
    {"b200", "NVIDIA B200 (HGX) 180GB", {1100, 2250, 2250}, 75, 7700, 180, 0.70, 64, 0.5, 0.85, 4, 900, 50, 10, 20, 0.5, 0.82, 1.0, 0, 16 * 148 * 1.86, 148, 1.86, 0},
    {"cpu", "this machine (measured)", {0, 0, 0}, 0, 0, 0, 1.0, 0, 1.0, 1.0, 2, 0, 0, 2, 2, 0.2, 1.0, 0, 1, 0, 0, 0, 0},
};
enum { MGT__SIM_NDEVICES = (int)(sizeof mgt__sim_table / sizeof mgt__sim_table[0]) };
static pthread_mutex_t mgt__sim_cpu_mu = PTHREAD_MUTEX_INITIALIZER;
static int mgt__sim_cpu_threads; /* the thread count the cpu entry was measured with, 0 none */

MGTDEF int mgt_sim_devices(const mgt_sim_device **table) {
    if (table) *table = mgt__sim_table;
    return MGT__SIM_NDEVICES;
}

/* bytes/s of memcpy over `bytes`, the median of a few repetitions on the calling thread */
static double mgt__sim_copy_rate(size_t bytes) {
    char *a = (char *)MGT_MALLOC(bytes), *b = (char *)MGT_MALLOC(bytes);
    double rates[9];
    int i, j, n = 9;
    if (!a || !b) { MGT_FREE(a); MGT_FREE(b); return 0; }
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    for (i = 0; i < n; i++) {
        double t0 = mgt_now(), dt;
        memcpy(i % 2 ? a : b, i % 2 ? b : a, bytes);
        dt = mgt_now() - t0;
        rates[i] = dt > 0 ? (double)bytes / dt : 0;
    }
    for (i = 1; i < n; i++)
        for (j = i; j > 0 && rates[j] < rates[j - 1]; j--) { double t = rates[j]; rates[j] = rates[j - 1]; rates[j - 1] = t; }
    MGT_FREE(a);
    MGT_FREE(b);
    return rates[n / 2];
}

/* exp per second of the CPU backend's vectorised mgt__expf on the calling thread (the median of a few runs) */
static double mgt__sim_exp_rate(void) {
    enum { n = 1 << 16 };
    float *x = (float *)MGT_MALLOC(sizeof(float) * n);
    double rates[7], sink = 0;
    int i, r, j;
    if (!x) return 0;
    for (i = 0; i < n; i++) x[i] = -8.0f + 8.0f * (float)i / n;
    for (r = 0; r < 7; r++) {
        double t0 = mgt_now(), dt;
        for (j = 0; j < 16; j++) {
            for (i = 0; i < n; i++) x[i] = mgt__expf(x[i]) - 1.0f;
            sink += x[j];
        }
        dt = mgt_now() - t0;
        rates[r] = dt > 0 ? 16.0 * n / dt : 0;
    }
    for (i = 1; i < 7; i++)
        for (j = i; j > 0 && rates[j] < rates[j - 1]; j--) { double t = rates[j]; rates[j] = rates[j - 1]; rates[j - 1] = t; }
    MGT_FREE(x);
    return sink == sink ? rates[3] : rates[3]; /* sink keeps the loop */
}

MGTDEF mgt_result mgt_sim_device_find(const char *name, int threads, mgt_sim_device *out) {
    int i, j;
    if (!name || !out) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_sim_device_find: name and out are required");
    for (i = 0; i < MGT__SIM_NDEVICES; i++) {
        const char *a = name, *b = mgt__sim_table[i].name;
        for (j = 0; a[j] && b[j] && (a[j] | 0x20) == (b[j] | 0x20); j++) {}
        if (a[j] || b[j]) continue;
        if (mgt__sim_table[i].host_sync) { /* this machine: measured once per thread count */
            mgt_sim_device *d = &mgt__sim_table[i];
            if (threads < 1) threads = mgt_cpu_count();
            pthread_mutex_lock(&mgt__sim_cpu_mu);
            if (mgt__sim_cpu_threads != threads) {
                double gf = mgt_cpu_sgemm_gflops(threads, 0.3), copy = mgt__sim_copy_rate((size_t)64 << 20);
                d->tensor_tflops[0] = d->tensor_tflops[1] = d->tensor_tflops[2] = gf * 1e-3;
                d->vector_tflops = gf * 1e-3 / 8; /* loops that vectorise, without the GEMM's reuse */
                d->mem_gbps = copy * 2e-9;        /* memcpy reads and writes each byte */
                d->intra_gbps = d->inter_gbps = copy * 1e-9;
                d->mem_gib = 0;
                d->transc_gps = mgt__sim_exp_rate() * threads * 1e-9;
                mgt__sim_cpu_threads = threads;
            }
            *out = *d;
            pthread_mutex_unlock(&mgt__sim_cpu_mu);
        } else
            *out = mgt__sim_table[i];
        return MGT_OK;
    }
    return mgt__fail(MGT_ERROR_ARGUMENT, "unknown device '%s' (a100, h100, h200, b200 or cpu)", name);
}

MGTDEF void mgt_sim_options_init(mgt_sim_options *opt) {
    if (!opt) return;
    memset(opt, 0, sizeof *opt);
    opt->device = mgt__sim_table[1];
    opt->gpus_per_node = 8;
}

/* ---- prices */

static double mgt__sim_max(double a, double b) { return a > b ? a : b; }

/* seconds of op on the device, storage type dtype: the GEMM part's roofline plus the rest's */
static double mgt__sim_price(const mgt_sim_device *d, int dtype, const mgt_sim_op *op) {
    double t = 0, bw = d->mem_gbps * 1e9 * d->mem_frac;
    if (op->gemm_flops > 0 || op->gemm_bytes > 0) {
        double dmin = op->m < op->n ? op->m : op->n, eff;
        dmin = op->k < dmin ? op->k : dmin;
        eff = op->tensor_frac > 0 ? op->tensor_frac : d->gemm_frac * (dmin > 0 ? dmin / (dmin + d->gemm_dim) : 1.0);
        t += mgt__sim_max(op->gemm_flops / (d->tensor_tflops[dtype >= 0 && dtype < 3 ? dtype : 0] * 1e12 * eff), op->gemm_bytes / bw);
    }
    if (op->flops > 0 || op->bytes > 0) {
        double transc = d->transc_gps > 0 ? d->transc_gps * 1e9 : d->vector_tflops * 1e12 / 4;
        t += mgt__sim_max(op->flops / (d->vector_tflops * 1e12 * d->vector_frac) + op->transcendentals / transc, op->bytes / bw);
    }
    return t + op->serial_us * 1e-6;
}

static void mgt__sim_trace(mgt__sim_rank *rk, const char *name, double start, double dur, int stream) {
    if (!rk->w->opt.trace || dur <= 0) return;
    if (rk->nev == rk->cap_ev) {
        size_t cap = rk->cap_ev ? 2 * rk->cap_ev : 1024;
        mgt__sim_event *p = (mgt__sim_event *)MGT_REALLOC(rk->ev, sizeof *p * cap);
        if (!p) return; /* the trace is best effort */
        rk->ev = p;
        rk->cap_ev = cap;
    }
    rk->ev[rk->nev].name = name;
    rk->ev[rk->nev].start = start;
    rk->ev[rk->nev].dur = dur;
    rk->ev[rk->nev++].stream = stream;
}
#endif /* MGT_NO_SIM */
/* ==== end src/sim.c ==== */
/* ==== begin src/sim_measure.c ==== */
#ifndef MGT_NO_SIM
#line 1 "src/sim_measure.c"
/* src/sim_measure.c - the simulator's cpu device: an op priced by running the CPU backend's op of
   its shape, beside the machine's other ranks */
/* ---- the cpu device: an op priced by running the CPU backend's op of its shape. mgt__sim_replay
   calls op on be with buffers carved from arena (floats; tokens and targets in range), or with
   arena NULL only counts the floats it needs. */
static size_t mgt__sim_replay(mgt_backend *be, const mgt_sim_op *op, float *arena) {
    const long long *a = op->args;
    const char *name = op->name;
    size_t need = 0, i;
    int *ints;
#define MGT__TAKE(n) (need += (size_t)(n), arena ? arena + need - (size_t)(n) : NULL)
    if (!strcmp(name, "encoder_forward") || !strcmp(name, "encoder_backward") || !strcmp(name, "xent_partial") || !strcmp(name, "xent_finish")) {
        long long rows = name[0] == 'e' ? a[0] * a[1] : a[0], vs = a[1 + (name[0] == 'e' ? 2 : 0)], span = name[0] == 'e' ? a[4] : a[3] - a[1];
        ints = (int *)MGT__TAKE(rows);
        for (i = 0; ints && i < (size_t)rows; i++) ints[i] = (int)(vs + (long long)((i * 2654435761u) % (size_t)(span > 0 ? span : 1)));
        if (!strcmp(name, "encoder_forward")) {
            float *out = MGT__TAKE(rows * a[2]), *wte = MGT__TAKE(a[4] * a[2]), *wpe = a[5] ? MGT__TAKE(a[1] * a[2]) : NULL;
            if (arena) be->encoder_forward(be, out, ints, wte, (int)a[3], (int)a[4], wpe, (int)a[0], (int)a[1], (int)a[2]);
        } else if (!strcmp(name, "encoder_backward")) {
            float *dwte = MGT__TAKE(a[4] * a[2]), *dwpe = a[5] ? MGT__TAKE(a[1] * a[2]) : NULL, *dout = MGT__TAKE(rows * a[2]);
            if (arena) be->encoder_backward(be, dwte, dwpe, dout, ints, (int)a[3], (int)a[4], (int)a[0], (int)a[1], (int)a[2]);
        } else if (!strcmp(name, "xent_partial")) {
            float *part = MGT__TAKE(3 * rows), *logits = MGT__TAKE(rows * a[2]);
            if (arena) be->xent_partial(be, part, logits, ints, (int)rows, (int)a[1], (int)a[2], (int)a[3]);
        } else {
            float *parts = MGT__TAKE(3 * rows * a[4]), *logits = MGT__TAKE(rows * a[2]);
            double *losses;
            need += need & 1; /* doubles on 8 bytes */
            losses = (double *)(void *)MGT__TAKE(2 * rows);
            if (arena) be->xent_finish(be, losses, logits, parts, (int)a[4], ints, (int)rows, (int)a[1], (int)a[2], (int)a[3], a[5] ? 1.0f / (float)rows : 0.0f);
        }
    } else if (!strcmp(name, "residual_layernorm_forward")) {
        float *res = MGT__TAKE(a[0] * a[1]), *y = MGT__TAKE(a[0] * a[1]), *x = MGT__TAKE(a[0] * a[1]), *mean = MGT__TAKE(a[0]), *rstd = MGT__TAKE(a[0]);
        float *rb = MGT__TAKE(a[1]), *w = MGT__TAKE(a[1]), *b = MGT__TAKE(a[1]);
        if (arena) be->residual_layernorm_forward(be, res, y, mean, rstd, x, a[2] ? rb : NULL, w, b, (int)a[0], (int)a[1]);
    } else if (!strcmp(name, "layernorm_forward") || !strcmp(name, "layernorm_backward")) {
        float *x = MGT__TAKE(a[0] * a[1]), *y = MGT__TAKE(a[0] * a[1]), *g = MGT__TAKE(a[0] * a[1]), *mean = MGT__TAKE(a[0]), *rstd = MGT__TAKE(a[0]);
        float *w = MGT__TAKE(a[1]), *b = MGT__TAKE(a[1]), *dw = MGT__TAKE(a[1]), *db = MGT__TAKE(a[1]);
        if (arena && name[10] == 'f') be->layernorm_forward(be, y, mean, rstd, x, w, b, (int)a[0], (int)a[1]);
        else if (arena) be->layernorm_backward(be, y, dw, db, g, x, w, mean, rstd, (int)a[0], (int)a[1]);
    } else if (!strcmp(name, "matmul_forward") || !strcmp(name, "matmul_backward")) {
        float *x = MGT__TAKE(a[0] * a[1]), *w = MGT__TAKE(a[1] * a[2]), *y = MGT__TAKE(a[0] * a[2]), *bias = MGT__TAKE(a[2]);
        float *dx = name[7] == 'b' && a[3] ? MGT__TAKE(a[0] * a[1]) : NULL, *dw = name[7] == 'b' && a[5] ? NULL : MGT__TAKE(a[1] * a[2]); /* a[5]: no dW */
        if (arena && name[7] == 'f') be->matmul_forward(be, y, x, w, a[3] ? bias : NULL, (int)a[0], (int)a[1], (int)a[2]);
        else if (arena) be->matmul_backward(be, dx, dw, a[4] ? bias : NULL, y, x, w, (int)a[0], (int)a[1], (int)a[2]);
    } else if (!strcmp(name, "matmul_gelu_forward") || !strcmp(name, "matmul_gelu_backward")) { /* N, C, OC, bias */
        float *x = MGT__TAKE(a[0] * a[1]), *w = MGT__TAKE(a[1] * a[2]), *y = MGT__TAKE(a[0] * a[2]), *pre = MGT__TAKE(a[0] * a[2]);
        float *bias = MGT__TAKE(a[2]), *dw = name[12] == 'b' && a[4] ? NULL : MGT__TAKE(a[1] * a[2]), *dpre = name[12] == 'b' ? MGT__TAKE(a[0] * a[1]) : NULL;
        if (arena && name[12] == 'f') be->matmul_gelu_forward(be, y, pre, x, w, a[3] ? bias : NULL, (int)a[0], (int)a[1], (int)a[2]);
        else if (arena) be->matmul_gelu_backward(be, dpre, dw, a[3] ? bias : NULL, y, x, w, x, (int)a[0], (int)a[1], (int)a[2]); /* pre: any (N,C) */
    } else if (!strcmp(name, "attention_forward") || !strcmp(name, "attention_backward")) { /* B, T, C, NH, NKV */
        long long W = a[2] + 2 * (a[2] / a[3]) * a[4];
        float *qkv = MGT__TAKE(a[0] * a[1] * W), *dqkv = MGT__TAKE(a[0] * a[1] * W), *y = MGT__TAKE(a[0] * a[1] * a[2]);
        float *att = MGT__TAKE(a[0] * a[3] * a[1] * a[1]);
        if (arena && name[10] == 'f') be->attention_forward(be, y, att, qkv, (int)a[0], (int)a[1], (int)a[2], (int)a[3], (int)a[4]);
        else if (arena) be->attention_backward(be, dqkv, y, qkv, y, att, (int)a[0], (int)a[1], (int)a[2], (int)a[3], (int)a[4]); /* out: unread on the CPU */
    } else if (!strcmp(name, "attention_part_forward") || !strcmp(name, "attention_part_backward")) { /* B, T, C, NH, NKV, causal */
        long long KV2 = 2 * (a[2] / a[3]) * a[4], W = a[2] + KV2;
        float *qkv = MGT__TAKE(a[0] * a[1] * W), *kv = MGT__TAKE(a[0] * a[1] * KV2), *dkv = MGT__TAKE(a[0] * a[1] * KV2);
        float *o = MGT__TAKE(a[0] * a[1] * a[2]), *y = MGT__TAKE(a[0] * a[1] * a[2]), *lse = MGT__TAKE(a[0] * a[3] * a[1]);
        if (arena && name[15] == 'f') be->attention_part_forward(be, o, lse, qkv, kv, (int)KV2, (int)a[0], (int)a[1], (int)a[2], (int)a[3], (int)a[4], (int)a[5], 1);
        else if (arena) /* lse: the arena's values, small and finite, as a merged forward's are */
            be->attention_part_backward(be, o, dkv, y, y, lse, qkv, kv, (int)KV2, (int)a[0], (int)a[1], (int)a[2], (int)a[3], (int)a[4], (int)a[5]);
    } else if (!strcmp(name, "copy_cols")) { /* rows, cols, dst dtype, src dtype */
        float *x = MGT__TAKE(a[0] * a[1]), *y = MGT__TAKE(a[0] * a[1]);
        if (arena) be->copy_cols(be, y, (int)a[2], (int)a[1], x, (int)a[3], (int)a[1], (size_t)a[0], (int)a[1]);
    } else if (!strcmp(name, "rmsnorm_forward") || !strcmp(name, "rmsnorm_backward")) { /* N, C */
        float *x = MGT__TAKE(a[0] * a[1]), *y = MGT__TAKE(a[0] * a[1]), *g = MGT__TAKE(a[0] * a[1]), *rstd = MGT__TAKE(a[0]), *w = MGT__TAKE(a[1]);
        float *dw = MGT__TAKE(a[1]);
        if (arena && name[8] == 'f') be->rmsnorm_forward(be, y, rstd, x, w, 1e-5f, (int)a[0], (int)a[1]);
        else if (arena) be->rmsnorm_backward(be, y, dw, g, x, w, rstd, (int)a[0], (int)a[1]);
    } else if (!strcmp(name, "rope_forward") || !strcmp(name, "rope_backward")) { /* B, T, NH, NKV, hs */
        float *qkv = MGT__TAKE(a[0] * a[1] * (a[2] + 2 * a[3]) * a[4]);
        if (arena && name[5] == 'f') be->rope_forward(be, qkv, (int)a[0], (int)a[1], (int)a[2], (int)a[3], (int)a[4], 10000.0f, 0);
        else if (arena) be->rope_backward(be, qkv, (int)a[0], (int)a[1], (int)a[2], (int)a[3], (int)a[4], 10000.0f, 0);
    } else if (!strcmp(name, "swiglu_forward") || !strcmp(name, "swiglu_backward")) { /* N, H */
        float *x = MGT__TAKE(2 * a[0] * a[1]), *dx = MGT__TAKE(2 * a[0] * a[1]), *y = MGT__TAKE(a[0] * a[1]);
        if (arena && name[7] == 'f') be->swiglu_forward(be, y, x, (int)a[0], (int)a[1]);
        else if (arena) be->swiglu_backward(be, dx, x, y, (int)a[0], (int)a[1]);
    } else if (!strcmp(name, "bias_residual") || !strcmp(name, "bias_backward")) {
        float *y = MGT__TAKE(a[0] * a[1]), *x = MGT__TAKE(a[0] * a[1]), *b = MGT__TAKE(a[1]);
        if (arena && name[5] == 'r') be->bias_residual(be, y, x, a[2] ? b : NULL, (int)a[0], (int)a[1]);
        else if (arena) be->bias_backward(be, b, x, (int)a[0], (int)a[1]);
    } else if (!strcmp(name, "adamw")) {
        float *p = MGT__TAKE(a[0]), *g = MGT__TAKE(a[0]), *m = MGT__TAKE(a[0]), *v = MGT__TAKE(a[0]), *copy = a[1] ? MGT__TAKE(a[0]) : NULL;
        if (arena) be->adamw(be, p, copy, g, m, v, (size_t)a[0], 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 0.5f, 0.5f);
    } else if (!strcmp(name, "cast")) {
        float *x = MGT__TAKE(a[0]), *y = MGT__TAKE(a[0]);
        if (arena) be->cast(be, y, (int)a[1], x, (int)a[2], (size_t)a[0]);
    } else if (!strcmp(name, "zero")) {
        float *x = MGT__TAKE((a[0] + 3) / 4);
        if (arena) be->zero(be, x, (size_t)a[0]);
    } else { /* gelu_forward, gelu_backward, add_inplace, scale, sum_squares: n elements */
        float *x = MGT__TAKE(a[0]), *y = MGT__TAKE(a[0]), *g = MGT__TAKE(a[0]);
        if (strcmp(name, "gelu_forward") && strcmp(name, "gelu_backward") && strcmp(name, "add_inplace") && strcmp(name, "scale") &&
            strcmp(name, "sum_squares"))
            return 0; /* not an op of the backend table: the caller prices it by the model */
        if (!arena) {}
        else if (!strcmp(name, "gelu_forward")) be->gelu_forward(be, y, x, (size_t)a[0]);
        else if (!strcmp(name, "gelu_backward")) be->gelu_backward(be, y, x, g, (size_t)a[0]);
        else if (!strcmp(name, "add_inplace")) be->add_inplace(be, y, x, (size_t)a[0]);
        else if (!strcmp(name, "scale")) be->scale(be, y, 0.5f, (size_t)a[0]);
        else (void)be->sum_squares(be, x, (size_t)a[0]);
    }
#undef MGT__TAKE
    return need;
}

#define MGT__SIM_MEASURE_BYTES 2147483648.0 /* buffers an op may take to be measured; a larger one is priced by the model */

/* m ready to run op (need floats of buffers, scratch floats a thread for attention); 0 without memory */
static int mgt__sim_meter_ready(mgt__sim_meter *m, int threads, int dtype, size_t need, size_t scratch) {
    size_t i;
    if (!m->be || m->dtype != dtype || m->wide < need || m->scratch < scratch) {
        if (m->be) mgt__cpu_backend_destroy(m->be);
        m->be = NULL;
        m->wide = need > m->wide ? need : m->wide;
        m->scratch = scratch > m->scratch ? scratch : m->scratch;
        m->dtype = dtype;
        if (mgt__cpu_backend_create_typed(&m->be, threads, m->scratch, dtype, m->wide) != MGT_OK) m->be = NULL;
    }
    if (need > m->floats) {
        MGT_FREE(m->arena);
        m->arena = (float *)MGT_MALLOC(sizeof(float) * need);
        m->floats = m->arena ? need : 0;
    }
    if (!m->be || !m->arena) return 0;
    for (i = 0; i < need; i++) m->arena[i] = 0.01f * (float)(int)(i % 197) - 0.98f; /* fresh, finite, varied: no op's leftovers */
    return 1;
}

typedef struct mgt__sim_companion { mgt__sim_meter *m; const mgt_sim_op *op; volatile int *stop; pthread_mutex_t *mu; } mgt__sim_companion;
static void *mgt__sim_companion_main(void *arg) { /* another rank of the machine, running the same op meanwhile */
    mgt__sim_companion *c = (mgt__sim_companion *)arg;
    for (;;) {
        int stop;
        pthread_mutex_lock(c->mu);
        stop = *c->stop;
        pthread_mutex_unlock(c->mu);
        if (stop) return NULL;
        mgt__sim_replay(c->m->be, c->op, c->m->arena);
    }
}

/* Measurements shared by the simulated steps of a layout search (parallel.layout = auto): an op shape
   run with the same threads beside the same number of companions costs what it measured once, so the
   search's ZeRO stages and schedules of a layout run no op twice. Counted: a search turns it on and
   off around itself (mgt__sim_share(1), (0)); off, every simulated step measures its own. */
typedef struct mgt__sim_shared { mgt__sim_measured m; int threads, companions; } mgt__sim_shared;
static pthread_mutex_t mgt__sim_share_mu = PTHREAD_MUTEX_INITIALIZER;
static mgt__sim_shared *mgt__sim_shares;
static size_t mgt__sim_nshares, mgt__sim_cap_shares;
static int mgt__sim_sharing;
static void mgt__sim_share(int on) {
    pthread_mutex_lock(&mgt__sim_share_mu);
    mgt__sim_sharing += on ? 1 : -1;
    if (mgt__sim_sharing <= 0) {
        MGT_FREE(mgt__sim_shares);
        mgt__sim_shares = NULL;
        mgt__sim_nshares = mgt__sim_cap_shares = 0;
        mgt__sim_sharing = 0;
    }
    pthread_mutex_unlock(&mgt__sim_share_mu);
}
/* the shared measurement of op for w's ranks (1, *sec), or 0; with sec NULL, adds *m */
static int mgt__sim_shared_find(const mgt__sim_world *w, int dtype, const mgt_sim_op *op, double *sec, const mgt__sim_measured *add) {
    size_t i;
    int found = 0;
    pthread_mutex_lock(&mgt__sim_share_mu);
    if (mgt__sim_sharing && add) {
        if (mgt__sim_nshares == mgt__sim_cap_shares) {
            size_t cap = mgt__sim_cap_shares ? 2 * mgt__sim_cap_shares : 256;
            mgt__sim_shared *p = (mgt__sim_shared *)MGT_REALLOC(mgt__sim_shares, sizeof *p * cap);
            if (p) { mgt__sim_shares = p; mgt__sim_cap_shares = cap; }
        }
        if (mgt__sim_nshares < mgt__sim_cap_shares) {
            mgt__sim_shared *s = &mgt__sim_shares[mgt__sim_nshares++];
            s->m = *add;
            s->threads = w->measure_threads;
            s->companions = w->companions;
        }
    }
    for (i = 0; mgt__sim_sharing && !add && i < mgt__sim_nshares && !found; i++) {
        const mgt__sim_shared *s = &mgt__sim_shares[i];
        if (s->threads == w->measure_threads && s->companions == w->companions && s->m.dtype == dtype && !strcmp(s->m.op, op->name) &&
            !memcmp(s->m.args, op->args, sizeof op->args)) {
            *sec = s->m.sec;
            found = 1;
        }
    }
    pthread_mutex_unlock(&mgt__sim_share_mu);
    return found;
}

/* seconds of op on this machine: the CPU backend's op of its shape and storage type, run by the
   threads of a rank while the machine's other ranks run it too (they share memory bandwidth and
   the cores' clock), the median of three runs after one that warms caches; measured once per
   shape. Ops without a replay (a copy), or whose buffers would pass MGT__SIM_MEASURE_BYTES, are
   priced by the model. */
static double mgt__sim_measure(mgt__sim_world *w, int dtype, const mgt_sim_op *op) {
    size_t i, need;
    double times[3], sec;
    int r, j, k, ready, started = 0;
    volatile int stop = 0;
    pthread_mutex_t stop_mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_t tid[64];
    mgt__sim_companion comp[64];
    pthread_mutex_lock(&w->measure_mu);
    for (i = 0; i < w->nmeasured; i++)
        if (w->measured[i].dtype == dtype && !strcmp(w->measured[i].op, op->name) && !memcmp(w->measured[i].args, op->args, sizeof op->args)) {
            sec = w->measured[i].sec;
            pthread_mutex_unlock(&w->measure_mu);
            return sec;
        }
    if (mgt__sim_shared_find(w, dtype, op, &sec, NULL)) { /* another step of the search ran it */
        pthread_mutex_unlock(&w->measure_mu);
        return sec;
    }
    need = mgt__sim_replay(NULL, op, NULL);
    ready = need > 0 && (double)need * sizeof(float) * (w->companions + 1) <= MGT__SIM_MEASURE_BYTES;
    for (j = 0; ready && j <= w->companions; j++)
        ready = mgt__sim_meter_ready(&w->meters[j], w->measure_threads, dtype, need,
                                     !strncmp(op->name, "attention", 9) ? 2 * (size_t)(op->args[1] * op->args[1]) : 0);
    if (!ready) { /* nothing to run, or no memory to run it: the model */
        w->ops_modelled++;
        pthread_mutex_unlock(&w->measure_mu);
        return mgt__sim_price(&w->opt.device, dtype, op);
    }
    for (j = 1; j <= w->companions; j++) {
        comp[j].m = &w->meters[j];
        comp[j].op = op;
        comp[j].stop = &stop;
        comp[j].mu = &stop_mu;
        if (pthread_create(&tid[j], NULL, mgt__sim_companion_main, &comp[j])) break;
        started = j;
    }
    mgt__sim_replay(w->meters[0].be, op, w->meters[0].arena);
    for (r = 0; r < 3; r++) {
        double t0 = mgt_now();
        mgt__sim_replay(w->meters[0].be, op, w->meters[0].arena);
        times[r] = mgt_now() - t0;
    }
    pthread_mutex_lock(&stop_mu);
    stop = 1;
    pthread_mutex_unlock(&stop_mu);
    for (j = 1; j <= started; j++) pthread_join(tid[j], NULL);
    pthread_mutex_destroy(&stop_mu);
    for (j = 1; j < 3; j++)
        for (k = j; k > 0 && times[k] < times[k - 1]; k--) { double t = times[k]; times[k] = times[k - 1]; times[k - 1] = t; }
    sec = times[1];
    if (w->nmeasured == w->cap_measured) {
        size_t cap = w->cap_measured ? 2 * w->cap_measured : 64;
        mgt__sim_measured *p = (mgt__sim_measured *)MGT_REALLOC(w->measured, sizeof *p * cap);
        if (p) { w->measured = p; w->cap_measured = cap; }
    }
    if (w->nmeasured < w->cap_measured) {
        mgt__sim_measured *m = &w->measured[w->nmeasured++];
        m->op = op->name;
        memcpy(m->args, op->args, sizeof m->args);
        m->dtype = dtype;
        m->sec = sec;
        mgt__sim_shared_find(w, dtype, op, NULL, m);
    }
    pthread_mutex_unlock(&w->measure_mu);
    return sec;
}
#endif /* MGT_NO_SIM */
/* ==== end src/sim_measure.c ==== */
/* ==== begin src/sim_backend.c ==== */
#ifndef MGT_NO_SIM
#line 1 "src/sim_backend.c"
/* src/sim_backend.c - the simulator's backend: every op's FLOPs and bytes as formulas of its
   shapes, charged to the compute stream's clock */
/* the compute stream runs op: launched by the host, started when both are there */
static void mgt__sim_run_op(mgt_backend *be, const mgt_sim_op *op) {
    mgt__sim_rank *rk = (mgt__sim_rank *)be->impl;
    const mgt_sim_options *o = &rk->w->opt;
    double sec = rk->w->measure_threads ? mgt__sim_measure(rk->w, be->dtype, op) : mgt__sim_price(&o->device, be->dtype, op), start;
    if (o->family_scale[op->family] > 0) sec *= o->family_scale[op->family]; /* calibrated */
    if (o->cost) sec = o->cost(o->cost_user, op, sec);
    if (o->device.host_sync) {
        start = mgt__sim_max(rk->th, mgt__sim_max(rk->tc, rk->tm));
        sec += op->kernels * o->device.launch_us * 1e-6;
        rk->th = rk->tc = rk->tm = start + sec;
    } else {
        rk->th += op->kernels * o->device.launch_us * 1e-6 + op->host_us * 1e-6;
        if (rk->th > rk->tc) rk->st.host_s += rk->th - rk->tc;
        start = mgt__sim_max(rk->tc, rk->th);
        rk->tc = start + sec;
    }
    rk->st.busy_s[op->family] += sec;
    mgt__sim_trace(rk, op->name, start, sec, 0);
}

/* one entry of the cost table (transc: exp and tanh among the flops' elements) */
static void mgt__sim_charge_t(mgt_backend *be, const char *name, int family, double gemm_flops, double gemm_bytes, double flops, double bytes,
                              double transc, double m, double n, double k, int kernels) {
    mgt_sim_op op;
    mgt__sim_rank *rk = (mgt__sim_rank *)be->impl;
    memcpy(op.args, rk->args, sizeof op.args);
    memset(rk->args, 0, sizeof rk->args);
    op.tensor_frac = rk->tensor_frac;
    rk->tensor_frac = 0;
    op.host_us = rk->host_us;
    rk->host_us = 0;
    op.serial_us = rk->serial_us;
    rk->serial_us = 0;
    op.transcendentals = transc;
    op.name = name;
    op.family = family;
    op.gemm_flops = gemm_flops;
    op.gemm_bytes = gemm_bytes;
    op.flops = flops;
    op.bytes = bytes;
    op.m = m;
    op.n = n;
    op.k = k;
    op.kernels = kernels;
    op.rank = ((mgt__sim_rank *)be->impl)->rank;
    mgt__sim_run_op(be, &op);
}
static void mgt__sim_charge(mgt_backend *be, const char *name, int family, double gemm_flops, double gemm_bytes, double flops, double bytes,
                            double m, double n, double k, int kernels) {
    mgt__sim_charge_t(be, name, family, gemm_flops, gemm_bytes, flops, bytes, 0, m, n, k, kernels);
}

/* A GEMM's fraction of the tensor peak by its shape: gemm_frac (large shapes), times d / (d + gemm_dim)
   for d the smaller of its output's sides (tiles and waves: an assumption), times the K curve: cuBLAS
   bf16 on a B200 with M = 128256, N = 4096 (linkedin/Liger-Kernel pull 1380, its cuBLAS column) took
   0.264, 0.396, 0.685 and 1.336 ms at K = 256, 512, 1024 and 2048: 1019, 1359, 1571 and 1611 TFLOP/s, so
   relative to K = 2048 0.633, 0.844, 0.975 and 1 (each output tile's pipeline fill and epilogue weigh
   more when its K loop is short). The only published K sweep of cuBLAS found, on another chip: the same
   curve is assumed on every GPU (linear in log2 K between the points, 1 from 2048, in proportion to K
   below 256). The old model took d as the smallest of M, N and K alike: 685 TFLOP/s at K = 768 on an
   H100, where this says 632 for GPT-2's forward GEMMs. */
static double mgt__sim_gemm_k(double k) {
    static const double ks[4] = {256, 512, 1024, 2048}, r[4] = {1019.0 / 1611, 1359.0 / 1611, 1571.0 / 1611, 1.0};
    int i;
    if (k >= ks[3]) return 1.0;
    if (k <= ks[0]) return r[0] * k / ks[0];
    for (i = 1; k > ks[i]; i++) {}
    return r[i - 1] + (r[i] - r[i - 1]) * log2(k / ks[i - 1]);
}
static double mgt__sim_gemm_frac(const mgt_sim_device *d, double m, double n, double k) {
    double mn = m < n ? m : n;
    if (d->host_sync) return d->gemm_frac; /* the cpu measures its ops */
    return d->gemm_frac * (mn > 0 ? mn / (mn + d->gemm_dim) : 1.0) * mgt__sim_gemm_k(k);
}
/* the op's GEMMs, each (M, N, K) with 2 M N K FLOPs: their FLOP-weighted fraction of the peak
   (mgt_sim_op.tensor_frac), and `lt` cuBLASLt calls among them. A cuBLASLt call builds its descriptors
   and asks the heuristic for an algorithm each time (kernels/backend_cuda.cu, mgt__gemm_lt): host time
   beyond the launch, MGT__SIM_LT_LAUNCHES launches' worth (5 us at the GPUs' 4 us a launch): NVIDIA/raft
   pull 1736 measured a GEMM's host latency at about 10 us with the heuristic and descriptors made per
   call and about 5 us with them cached */
#define MGT__SIM_LT_LAUNCHES 1.25
static void mgt__sim_gemms(mgt_backend *be, int count, const double *mnk, int lt) {
    mgt__sim_rank *rk = (mgt__sim_rank *)be->impl;
    const mgt_sim_device *d = &rk->w->opt.device;
    double flops = 0, t = 0;
    int i;
    for (i = 0; i < count; i++) {
        double f = mnk[3 * i] * mnk[3 * i + 1] * mnk[3 * i + 2];
        flops += f;
        t += f / mgt__sim_gemm_frac(d, mnk[3 * i], mnk[3 * i + 1], mnk[3 * i + 2]);
    }
    rk->tensor_frac = t > 0 ? flops / t : 0;
    rk->host_us = d->host_sync ? 0 : lt * MGT__SIM_LT_LAUNCHES * d->launch_us;
}

/* ---- the backend: every op's FLOPs and bytes as formulas of its shapes (N = B*T rows, e = the
   storage type's bytes, fp32 parameter gradients and statistics), as the CUDA backend runs them. */
#define MGT__SIM_E ((double)be->elt)
#define MGT__SIM_ARGS(a0, a1, a2, a3, a4, a5)                                                                         \
    do {                                                                                                                \
        long long *args_ = ((mgt__sim_rank *)be->impl)->args;                                                          \
        args_[0] = (a0); args_[1] = (a1); args_[2] = (a2); args_[3] = (a3); args_[4] = (a4); args_[5] = (a5);          \
    } while (0)
static void mgt__sim_encoder_forward(mgt_backend *be, void *out, const int *tokens, const void *wte, int vs, int vr, const void *wpe, int B, int T, int C) {
    double N = (double)B * T;
    (void)out; (void)tokens; (void)wte; (void)vs; (void)vr;
    MGT__SIM_ARGS(B, T, C, vs, vr, wpe != NULL);
    mgt__sim_charge(be, "encoder_forward", MGT_SIM_EMBEDDING, 0, 0, N * C, N * 4 + N * C * MGT__SIM_E * (wpe ? 3 : 2), 0, 0, 0, 1);
}
/* the CUDA backend's embedding backward (kernels/encoder.cu): one block of 1024 threads sorts the
   (token, position) keys, a bitonic network of P = the next power of two from N keys, log2 P (log2 P +
   1) / 2 steps, each visiting every index once (a thread per index, 16 indices a thread at P = 16384),
   then a warp per distinct token (at most min(N, vr)) reads and writes its fp32 row once and reads its
   positions' dout; dwpe reads dout again and its own (T,C). The sort runs on one SM alone and is
   priced by its shared-memory traffic: every visited index reads its 8-byte key once and about half
   the keys are written back after a swap, 12 bytes an index at 128 bytes a clock (32 banks of 4 bytes:
   the CUDA C++ Programming Guide, shared memory of compute capability 8.x and 9.x; B200 assumed alike).
   The instructions it issues take less: about 9 an index (an estimate from mgt_bitonic_chunks' loop:
   the index, its partner and the test for all; the loads, the compare and the swap for the half that
   owns a pair) at 128 a clock (4 warp schedulers). 16384 keys on an H100: 105 steps, 88 us, where the
   old price (4 operations a compare-exchange at one SM's share of the vector rate) said 14 us. Its
   passes over the keys in memory are in the bytes. */
#define MGT__SIM_SORT_BYTES 12.0
static void mgt__sim_encoder_backward(mgt_backend *be, float *dwte, float *dwpe, const void *dout, const int *tokens, int vs, int vr, int B, int T, int C) {
    mgt__sim_rank *rk = (mgt__sim_rank *)be->impl;
    const mgt_sim_device *d = &rk->w->opt.device;
    double N = (double)B * T, P = 1, steps, rows = N < vr ? N : (double)vr;
    (void)dwte; (void)dout; (void)tokens; (void)vs;
    while (P < N) P *= 2;
    steps = log2(P) * (log2(P) + 1) / 2;
    MGT__SIM_ARGS(B, T, C, vs, vr, dwpe != NULL);
    if (d->clock_ghz > 0) rk->serial_us = steps * P * MGT__SIM_SORT_BYTES / (128.0 * d->clock_ghz * 1e3);
    mgt__sim_charge(be, "encoder_backward", MGT_SIM_EMBEDDING, 0, 0, N * C + (dwpe ? N * C : 0),
                    N * 4 + 8 * P + N * C * MGT__SIM_E + 8 * rows * C + (dwpe ? N * C * MGT__SIM_E + 8.0 * T * C : 0), 0, 0, 0, dwpe ? 3 : 2);
}
static void mgt__sim_layernorm_forward(mgt_backend *be, void *out, float *mean, float *rstd, const void *inp, const void *w, const void *b, int N, int C) {
    (void)out; (void)mean; (void)rstd; (void)inp; (void)w; (void)b;
    MGT__SIM_ARGS(N, C, 0, 0, 0, 0);
    mgt__sim_charge(be, "layernorm_forward", MGT_SIM_NORM, 0, 0, 8.0 * N * C, 2.0 * N * C * MGT__SIM_E + 8.0 * N + 2.0 * C * MGT__SIM_E, 0, 0, 0, 1);
}
/* one kernel (kernels/layernorm.cu): parts = min(N, 128) blocks of 512 threads, one per SM, so its
   rows stream through at most 128 of the SMs (an H100 has 132: the bandwidth in proportion, an
   assumption that an SM's share of the bandwidth is what its loads can pull); a warp per row reads dout,
   inp and dinp and writes dinp; the block's partial sums of dweight and dbias read its rows of dout and
   inp again (counted as DRAM: a part's rows may have left L2), each part writes 2 C fp32 partials; then
   the last block alone adds the parts' partials (2 C parts floats, from L2) into dweight and dbias: one
   SM, priced at its share of the device's bandwidth (an estimate: 512 threads with a load or two each in
   flight over L2's latency pull about that much), 36 us for C = 768 on an H100 */
static void mgt__sim_layernorm_backward(mgt_backend *be, void *dinp, float *dw, float *db, const void *dout, const void *inp, const void *w, const float *mean,
                                        const float *rstd, int N, int C) {
    mgt__sim_rank *rk = (mgt__sim_rank *)be->impl;
    const mgt_sim_device *d = &rk->w->opt.device;
    double parts = N < 128 ? N : 128, share = d->sms > parts ? d->sms / parts : 1.0;
    (void)dinp; (void)dw; (void)db; (void)dout; (void)inp; (void)w; (void)mean; (void)rstd;
    MGT__SIM_ARGS(N, C, 0, 0, 0, 0);
    if (d->sms > 0) rk->serial_us = (2.0 * parts * C * 4 + 16.0 * C) / (d->mem_gbps * 1e3 * d->mem_frac / d->sms);
    mgt__sim_charge(be, "layernorm_backward", MGT_SIM_NORM, 0, 0, 16.0 * N * C, (6.0 * N * C * MGT__SIM_E + 16.0 * N + 2 * parts * 4.0 * C) * share, 0, 0,
                    0, 1);
}
static void mgt__sim_matmul_forward(mgt_backend *be, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    double n = N, c = C, oc = OC, g[3];
    (void)out; (void)inp; (void)w;
    g[0] = n; g[1] = oc; g[2] = c;
    MGT__SIM_ARGS(N, C, OC, bias != NULL, 0, 0);
    mgt__sim_gemms(be, 1, g, bias != NULL);
    mgt__sim_charge(be, "matmul_forward", MGT_SIM_GEMM, 2 * n * c * oc, (n * c + c * oc + n * oc + (bias ? oc : 0)) * MGT__SIM_E, 0, 0, n, oc, c, 1);
}
/* a linear layer's backward GEMMs (M, N, K): dW (C x OC over the N rows), then dinp (N x C over OC) */
static void mgt__sim_linear_gemms(double *g, double n, double c, double oc) {
    g[0] = c; g[1] = oc; g[2] = n;
    g[3] = n; g[4] = c; g[5] = oc;
}
#define MGT__SIM_BGRAD_BYTES(oc) (12 * (oc)) /* the BGRADB epilogue's fp32 vector written, read and added into dbias */
static void mgt__sim_matmul_backward(mgt_backend *be, void *dinp, float *dw, float *db, const void *dout, const void *inp, const void *w, int N, int C,
                                     int OC) {
    double n = N, c = C, oc = OC, k = (dinp ? 1 : 0) + (dw ? 1 : 0), g[6];
    (void)dout; (void)inp; (void)w;
    if (!dw) db = NULL; /* the bias gradient comes with the weight's */
    mgt__sim_linear_gemms(g, n, c, oc);
    MGT__SIM_ARGS(N, C, OC, dinp != NULL, db != NULL, dw == NULL);
    mgt__sim_gemms(be, (int)k, dw ? g : g + 3, db != NULL); /* g: the dW GEMM, then dinp's */
    mgt__sim_charge(be, "matmul_backward", MGT_SIM_GEMM, k * 2 * n * c * oc,
                    (k * n * oc + c * oc + (dw ? n * c : 0) + (dinp ? n * c : 0)) * MGT__SIM_E + (dw ? 8 * c * oc : 0), db ? n * oc : 0,
                    db ? MGT__SIM_BGRAD_BYTES(oc) : 0, n, oc, c, (int)k + (db ? 1 : 0));
}
/* cuBLASLt's epilogues (kernels/backend_cuda.cu): the GELU forward writes pre and gelu(pre) as the
   GEMM's tiles are stored (no pass over pre); the backward's dX GEMM reads pre and applies gelu'
   (DGELU); a bias gradient is the dW GEMM's BGRADB reduction of dout (no pass over dout), written
   as fp32 and added into dbias by a small kernel */
static void mgt__sim_matmul_gelu_forward(mgt_backend *be, void *out, void *pre, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    double n = N, c = C, oc = OC, g[3];
    (void)out; (void)pre; (void)inp; (void)w;
    g[0] = n; g[1] = oc; g[2] = c;
    MGT__SIM_ARGS(N, C, OC, bias != NULL, 0, 0);
    mgt__sim_gemms(be, 1, g, 1);
    mgt__sim_charge_t(be, "matmul_gelu_forward", MGT_SIM_GEMM, 2 * n * c * oc, (n * c + c * oc + 2 * n * oc + (bias ? oc : 0)) * MGT__SIM_E, 10 * n * oc,
                      0, n * oc, n, oc, c, 1);
}
static void mgt__sim_matmul_gelu_backward(mgt_backend *be, void *dpre, float *dw, float *db, const void *dout, const void *inp, const void *w,
                                          const void *pre, int N, int C, int OC) {
    double n = N, c = C, oc = OC, g[6];
    (void)dpre; (void)dout; (void)inp; (void)w; (void)pre;
    if (!dw) db = NULL; /* the input gradient only (zero-bubble's B): the DGELU GEMM */
    mgt__sim_linear_gemms(g, n, c, oc);
    MGT__SIM_ARGS(N, C, OC, db != NULL, dw == NULL, 0);
    mgt__sim_gemms(be, dw ? 2 : 1, dw ? g : g + 3, 1 + (db != NULL));
    mgt__sim_charge_t(be, "matmul_gelu_backward", MGT_SIM_GEMM, (dw ? 4 : 2) * n * c * oc,
                      ((dw ? 2 : 1) * n * oc + (dw ? 3 : 2) * n * c + c * oc) * MGT__SIM_E + (dw ? 8 * c * oc : 0), 15 * n * c + (db ? n * oc : 0),
                      db ? MGT__SIM_BGRAD_BYTES(oc) : 0, n * c, n, oc, c, (dw ? 2 : 1) + (db ? 1 : 0));
}
/* Attention on a GPU in bf16/fp16, where cuDNN serves the shape (mgt_cudnn_attention_serves), is
   cuDNN's fused flash attention on tensor cores: the causal half of the scores, 4 hs FLOPs per
   (query, key) pair forward (q.k, p v) and 2.5 times that backward (q.k, dout.v, p^T dout, ds^T q,
   ds k), at a fraction of the tensor peak published for it: NVIDIA's cuDNN 9.19 SDPA training
   benchmark on an H200 (cudnn-frontend benchmark/sdpa_benchmark_training/results/h200_919_only_cudnn;
   an H200's bf16 tensor peak is the H100 SXM's 989 TFLOP/s), causal, bf16: head size 128 at T = 2048,
   forward 484 and backward 370 TFLOP/s (49% and 37%); head size 64 (the GPT-OSS shape, a 1024-key
   window at T = 2048) 310 and 264 TFLOP/s (31% and 27%), both scaled to the sequence's length by
   mgt__sim_cudnn_attention_frac. Between 64 and 128 linear in hs, below 64
   in proportion to hs (a smaller head does less work per tile it loads); the same fractions on other
   devices. Its traffic is the tensors, O(B T C), the fp32 Stats and row sums, and the backward's fp32
   dq accumulator (written and read). Elsewhere, flash attention (kernels/attention.cu) on CUDA cores: each (batch, head)
   computes the causal triangle of 32 x 32 tiles, diagonal tiles whole, W pairs of a query and a key;
   the forward does 2 products of hs per pair (q.k, p v), the backward 7 (q.k, dout.v, p dout, ds q
   in the key-tile kernel; q.k, dout.v, ds k in the query-tile kernel: no atomics, so it recomputes
   the scores), at the vector rate (fp32 FMA, not tensor cores); memory traffic is the tensors
   themselves, O(B T C) plus fp32 per row and head (K and V tiles re-read by every query tile are
   assumed to hit L2; under grouped-query attention KV = NKV hs channels each). On the CPU
   (host_sync) it is the CPU backend's: GEMMs over the whole T x T scores, materialised, with a
   softmax between them. */
static double mgt__sim_attention_pairs(int B, int T, int NH) {
    double tiles = (double)((T + 31) / 32);
    return (double)B * NH * 1024.0 * tiles * (tiles + 1) / 2;
}
static int mgt__sim_on_cpu(mgt_backend *be) { return ((mgt__sim_rank *)be->impl)->w->opt.device.host_sync; }
/* cuDNN's rate falls at short sequences: per query tile it loads Q and writes O (and the backward its
   dq, dk, dv) whatever the keys, and the diagonal tile is half masked. The H200 table (llama3.1 rows:
   causal, bf16, head size 128, batch 1, 64 query heads) has forward 0.142 ms at T = 2048 and 0.465 ms at
   T = 4096, backward 0.464 and 1.450 ms: a time a T^2 + b T through both gives the rate's shape
   T / (T + T0), T0 = b / a = 1165 forward and 1593 backward (the same fit predicts 665 and 551 TFLOP/s
   at T = 8192, where the table has 644 and 541). The published rates are scaled by it from the causal
   length each was measured at: T = 2048 for head size 128; the GPT-OSS rows' 1024-key window at T = 2048
   attends 768 keys per query on average, as a causal T = 1536 does, so 1536 for head size 64. Never above
   the table's longest sequences (688 and 581 TFLOP/s at T = 32768 for 128; 358 and 299 for 64) */
static double mgt__sim_cudnn_attention_frac(double hs, double T, int backward) {
    double t0 = backward ? 1593.0 : 1165.0, g = T / (T + t0);
    double f64 = (backward ? 264.0 : 310.0) / 989 * g / (1536.0 / (1536.0 + t0)), f128 = (backward ? 370.0 : 484.0) / 989 * g / (2048.0 / (2048.0 + t0));
    double m64 = (backward ? 299.0 : 358.0) / 989, m128 = (backward ? 581.0 : 688.0) / 989;
    f64 = f64 < m64 ? f64 : m64;
    f128 = f128 < m128 ? f128 : m128;
    if (hs >= 128) return f128;
    return hs >= 64 ? f64 + (f128 - f64) * (hs - 64) / 64 : f64 * hs / 64;
}
/* cuDNN's attention: the forward's FLOPs on the causal pairs, charged at its fraction of the peak */
static int mgt__sim_cudnn_attention(mgt_backend *be, const char *name, int backward, int B, int T, int C, int NH, int NKV, double bytes, int kernels) {
    int hs = NH > 0 ? C / NH : 0;
    double pairs = (double)B * NH * T * (T + 1.0) / 2;
    if (mgt__sim_on_cpu(be) || !mgt_cudnn_attention_serves(be->dtype, hs, NH, NKV)) return 0;
    ((mgt__sim_rank *)be->impl)->tensor_frac = mgt__sim_cudnn_attention_frac(hs, T, backward);
    mgt__sim_charge_t(be, name, MGT_SIM_ATTENTION, (backward ? 2.5 : 1.0) * 4 * pairs * hs, bytes, 0, 0, 0, T, T, hs, kernels);
    return 1;
}
static void mgt__sim_attention_forward(mgt_backend *be, void *out, void *att, const void *qkv, int B, int T, int C, int NH, int NKV) {
    double N = (double)B * T, W = mgt__sim_attention_pairs(B, T, NH), hs = C / (double)NH, e = MGT__SIM_E, rows = (double)B * NH * T;
    double S = (double)B * NH * T * T, KV = hs * NKV; /* S: the scores, on the CPU */
    (void)out; (void)att; (void)qkv;
    MGT__SIM_ARGS(B, T, C, NH, NKV, 0);
    if (mgt__sim_cudnn_attention(be, "attention_forward", 0, B, T, C, NH, NKV, (2 * N * C + 2 * N * KV) * e + 4 * rows, 1)) return;
    if (mgt__sim_on_cpu(be))
        mgt__sim_charge_t(be, "attention_forward", MGT_SIM_ATTENTION, 4 * N * T * C, (2 * N * C + 2 * N * KV + 2 * S) * e, 5 * S, 2 * S * e, S, T, T,
                          hs, 3);
    else
        mgt__sim_charge_t(be, "attention_forward", MGT_SIM_ATTENTION, 0, 0, 4 * W * hs + 8 * W, (2 * N * C + 2 * N * KV) * e + 4 * rows, W, 0, 0, 0, 1);
}
static void mgt__sim_attention_backward(mgt_backend *be, void *dqkv, const void *dout, const void *qkv, const void *out, const void *att, int B, int T, int C,
                                        int NH, int NKV) {
    double N = (double)B * T, W = mgt__sim_attention_pairs(B, T, NH), hs = C / (double)NH, e = MGT__SIM_E, rows = (double)B * NH * T;
    double S = (double)B * NH * T * T, KV = hs * NKV;
    (void)dqkv; (void)dout; (void)qkv; (void)out; (void)att;
    MGT__SIM_ARGS(B, T, C, NH, NKV, 0);
    /* cuDNN: the row sums (dout . out), the fused kernel (q, k, v, dout, Stats read; dk, dv written; dq
       accumulated in fp32: 4 bytes written and read back per element), dq converted */
    if (mgt__sim_cudnn_attention(be, "attention_backward", 1, B, T, C, NH, NKV, (4 * N * C + 4 * N * KV) * e + 8 * rows + 8 * N * C, 3)) return;
    if (mgt__sim_on_cpu(be))
        mgt__sim_charge(be, "attention_backward", MGT_SIM_ATTENTION, 8 * N * T * C, (4 * N * C + 4 * N * KV + 4 * S) * e, 4 * S, 3 * S * e, T, T, hs, 5);
    else /* the row sums (dout . out), then the two kernels, each reading q, k, v, dout, lse and the row sums; dq, dk, dv written */
        mgt__sim_charge_t(be, "attention_backward", MGT_SIM_ATTENTION, 0, 0, 2 * N * C + 14 * W * hs + 16 * W,
                          (2 * N * C + 2 * (2 * N * C + 2 * N * KV) + N * C + 2 * N * KV) * e + 20 * rows, 2 * W, 0, 0, 0, 3);
}
/* one block of ring attention (context parallelism). On the CPU (host_sync) the CPU backend's: the
   block's scores materialised by GEMMs, the output and log-sum-exp merged in fp32, the backward's dq
   and dk, dv accumulated in fp32. On a GPU the CUDA backend's kernels/ring_attention.cu, attention.cu's
   flash attention on CUDA cores whatever the storage type (cuDNN's fused kernel cannot merge into a
   running output): 32 x 32 tiles per (batch, head), the causal triangle (diagonal tiles whole) or
   every tile of a whole block, W pairs; the forward does 2 products of hs per pair (q.k, p v), one
   kernel, reading q, k and v once (K and V tiles re-read by every query tile are assumed to hit L2)
   and writing o and lse in fp32, reading them too when it merges (not the first block); the backward
   is 3 kernels: the row sums D = dout . out (both read, D written), then one over key tiles (q.k,
   dout.v, p^T dout, ds^T q: 4 products) and one over query tiles (q.k, dout.v, ds k: 3), each reading
   q, dout, k, v, lse and D, adding into dk, dv and into dq in fp32 (read and written) */
static double mgt__sim_attention_part_pairs(int B, int T, int NH, int causal) {
    double tiles = (double)((T + 31) / 32);
    return causal ? mgt__sim_attention_pairs(B, T, NH) : (double)B * NH * 1024.0 * tiles * tiles;
}
static void mgt__sim_attention_part(mgt_backend *be, const char *name, int backward, int B, int T, int C, int NH, int NKV, int causal, int first) {
    double N = (double)B * T, hs = C / (double)NH, e = MGT__SIM_E, rows = (double)B * NH * T, KV = hs * NKV;
    double S = (double)B * NH * T * T, W = mgt__sim_attention_part_pairs(B, T, NH, causal);
    MGT__SIM_ARGS(B, T, C, NH, NKV, causal);
    if (mgt__sim_on_cpu(be)) {
        if (!backward)
            mgt__sim_charge_t(be, name, MGT_SIM_ATTENTION, 4 * N * T * C, (N * C + 2 * N * KV + 2 * S) * e + 8 * N * C, 5 * S, 2 * S * 4, S, T, T, hs, 3);
        else
            mgt__sim_charge(be, name, MGT_SIM_ATTENTION, 8 * N * T * C, (3 * N * C + 2 * N * KV) * e + 8 * (N * C + 2 * N * KV) + 8 * S, 4 * S, 3 * S * 4,
                            T, T, hs, 5);
    } else if (!backward) /* q, k, v read; o and lse written, and read first when merged */
        mgt__sim_charge_t(be, name, MGT_SIM_ATTENTION, 0, 0, 4 * W * hs + 8 * W, (N * C + 2 * N * KV) * e + (first ? 4 : 8) * (N * C + rows), W, 0, 0, 0, 1);
    else /* D: dout and out read, D written; then each of the two kernels reads q, dout, k, v, lse and D; dk, dv and dq read and written */
        mgt__sim_charge_t(be, name, MGT_SIM_ATTENTION, 0, 0, 2 * N * C + 14 * W * hs + 16 * W,
                          (2 * N * C + 2 * (2 * N * C + 2 * N * KV)) * e + 4 * rows + 2 * 8 * rows + 8 * (N * C + 2 * N * KV), 2 * W, 0, 0, 0, 3);
}
static void mgt__sim_attention_part_forward(mgt_backend *be, float *o, float *lse, const void *qkv, const void *kv, int ks, int B, int T, int C, int NH,
                                            int NKV, int causal, int first) {
    (void)o; (void)lse; (void)qkv; (void)kv; (void)ks;
    mgt__sim_attention_part(be, "attention_part_forward", 0, B, T, C, NH, NKV, causal, first);
}
static void mgt__sim_attention_part_backward(mgt_backend *be, float *dq, float *dkv, const void *dout, const void *out, const float *lse, const void *qkv,
                                             const void *kv, int ks, int B, int T, int C, int NH, int NKV, int causal) {
    (void)dq; (void)dkv; (void)dout; (void)out; (void)lse; (void)qkv; (void)kv; (void)ks;
    mgt__sim_attention_part(be, "attention_part_backward", 1, B, T, C, NH, NKV, causal, 0);
}
static void mgt__sim_copy_cols(mgt_backend *be, void *dst, int dt, int ds, const void *src, int st, int ss, size_t rows, int cols) {
    double n = (double)rows * cols;
    (void)dst; (void)ds; (void)src; (void)ss;
    MGT__SIM_ARGS((long long)rows, cols, dt, st, 0, 0);
    mgt__sim_charge(be, "copy_cols", MGT_SIM_ELEMENTWISE, 0, 0, n, n * (double)(mgt__dtype_size(dt) + mgt__dtype_size(st)), 0, 0, 0, 1);
}
/* the Llama family's ops: memory-bound, one kernel each (the CUDA backend's rmsnorm.cu, rope.cu, swiglu.cu) */
static void mgt__sim_rmsnorm_forward(mgt_backend *be, void *out, float *rstd, const void *inp, const void *w, float eps, int N, int C) {
    (void)out; (void)rstd; (void)inp; (void)w; (void)eps;
    MGT__SIM_ARGS(N, C, 0, 0, 0, 0);
    mgt__sim_charge(be, "rmsnorm_forward", MGT_SIM_NORM, 0, 0, 4.0 * N * C, 2.0 * N * C * MGT__SIM_E + 4.0 * N + (double)C * MGT__SIM_E, 0, 0, 0, 1);
}
static void mgt__sim_rmsnorm_backward(mgt_backend *be, void *dinp, float *dw, const void *dout, const void *inp, const void *w, const float *rstd, int N,
                                      int C) {
    (void)dinp; (void)dw; (void)dout; (void)inp; (void)w; (void)rstd;
    MGT__SIM_ARGS(N, C, 0, 0, 0, 0);
    mgt__sim_charge(be, "rmsnorm_backward", MGT_SIM_NORM, 0, 0, 10.0 * N * C, 4.0 * N * C * MGT__SIM_E + 4.0 * N + 8.0 * C, 0, 0, 0, 2);
}
static void mgt__sim_rope(mgt_backend *be, const char *name, int B, int T, int NH, int NKV, int hs) {
    double N = (double)B * T, n = N * (NH + NKV) * hs; /* the q and k channels, turned in place */
    MGT__SIM_ARGS(B, T, NH, NKV, hs, 0);
    mgt__sim_charge_t(be, name, MGT_SIM_ELEMENTWISE, 0, 0, 3.0 * n, 2.0 * n * MGT__SIM_E, N * hs, 0, 0, 0, 1);
}
static void mgt__sim_rope_forward(mgt_backend *be, void *qkv, int B, int T, int NH, int NKV, int hs, float theta, int pos0) {
    (void)qkv; (void)theta; (void)pos0;
    mgt__sim_rope(be, "rope_forward", B, T, NH, NKV, hs);
}
static void mgt__sim_rope_backward(mgt_backend *be, void *dqkv, int B, int T, int NH, int NKV, int hs, float theta, int pos0) {
    (void)dqkv; (void)theta; (void)pos0;
    mgt__sim_rope(be, "rope_backward", B, T, NH, NKV, hs);
}
static void mgt__sim_swiglu_forward(mgt_backend *be, void *out, const void *inp, int N, int H) {
    double n = (double)N * H;
    (void)out; (void)inp;
    MGT__SIM_ARGS(N, H, 0, 0, 0, 0);
    mgt__sim_charge_t(be, "swiglu_forward", MGT_SIM_ELEMENTWISE, 0, 0, 5.0 * n, 3.0 * n * MGT__SIM_E, n, 0, 0, 0, 1);
}
static void mgt__sim_swiglu_backward(mgt_backend *be, void *dinp, const void *inp, const void *dout, int N, int H) {
    double n = (double)N * H;
    (void)dinp; (void)inp; (void)dout;
    MGT__SIM_ARGS(N, H, 0, 0, 0, 0);
    mgt__sim_charge_t(be, "swiglu_backward", MGT_SIM_ELEMENTWISE, 0, 0, 10.0 * n, 5.0 * n * MGT__SIM_E, n, 0, 0, 0, 1);
}
static void mgt__sim_gelu_forward(mgt_backend *be, void *out, const void *inp, size_t n) {
    (void)out; (void)inp;
    MGT__SIM_ARGS((long long)n, 0, 0, 0, 0, 0);
    mgt__sim_charge_t(be, "gelu_forward", MGT_SIM_ELEMENTWISE, 0, 0, 10.0 * (double)n, 2.0 * (double)n * MGT__SIM_E, (double)n, 0, 0, 0, 1);
}
static void mgt__sim_gelu_backward(mgt_backend *be, void *dinp, const void *inp, const void *dout, size_t n) {
    (void)dinp; (void)inp; (void)dout;
    MGT__SIM_ARGS((long long)n, 0, 0, 0, 0, 0);
    mgt__sim_charge_t(be, "gelu_backward", MGT_SIM_ELEMENTWISE, 0, 0, 15.0 * (double)n, 3.0 * (double)n * MGT__SIM_E, (double)n, 0, 0, 0, 1);
}
static void mgt__sim_add_inplace(mgt_backend *be, float *y, const float *x, size_t n) {
    (void)y; (void)x;
    MGT__SIM_ARGS((long long)n, 0, 0, 0, 0, 0);
    mgt__sim_charge(be, "add_inplace", MGT_SIM_ELEMENTWISE, 0, 0, (double)n, 12.0 * (double)n, 0, 0, 0, 1);
}
static void mgt__sim_bias_residual(mgt_backend *be, void *out, const void *res, const void *bias, int N, int C) {
    (void)out; (void)res;
    MGT__SIM_ARGS(N, C, bias != NULL, 0, 0, 0);
    mgt__sim_charge(be, "bias_residual", MGT_SIM_ELEMENTWISE, 0, 0, (bias ? 2.0 : 1.0) * N * C, (3.0 * N * C + (bias ? C : 0)) * MGT__SIM_E, 0, 0, 0, 1);
}
/* one kernel: reads res and residual, writes res and out (the LayerNorm reads res back from L1) */
static void mgt__sim_residual_layernorm_forward(mgt_backend *be, void *res, void *out, float *mean, float *rstd, const void *residual, const void *rb,
                                                const void *w, const void *b, int N, int C) {
    (void)res; (void)out; (void)mean; (void)rstd; (void)residual; (void)rb; (void)w; (void)b;
    MGT__SIM_ARGS(N, C, rb != NULL, 0, 0, 0);
    mgt__sim_charge(be, "residual_layernorm_forward", MGT_SIM_NORM, 0, 0, 10.0 * N * C, 4.0 * N * C * MGT__SIM_E + 8.0 * N + 3.0 * C * MGT__SIM_E, 0, 0, 0,
                    1);
}
static void mgt__sim_bias_backward(mgt_backend *be, float *dbias, const void *dout, int N, int C) {
    (void)dbias; (void)dout;
    MGT__SIM_ARGS(N, C, 0, 0, 0, 0);
    mgt__sim_charge(be, "bias_backward", MGT_SIM_ELEMENTWISE, 0, 0, (double)N * C, (double)N * C * MGT__SIM_E + 8.0 * C, 0, 0, 0, 1);
}
static void mgt__sim_xent_partial(mgt_backend *be, float *part, void *logits, const int *targets, int N, int vs, int Vl, int V) {
    (void)part; (void)logits; (void)targets; (void)vs; (void)V;
    /* the fused classifier: one read of the logits (an online max and sum), nothing written but the partials */
    MGT__SIM_ARGS(N, vs, Vl, V, 0, 0);
    mgt__sim_charge_t(be, "xent_partial", MGT_SIM_LOSS, 0, 0, 4.0 * N * Vl, (double)N * Vl * MGT__SIM_E + 16.0 * N, (double)N * Vl, 0, 0, 0, 1);
}
static void mgt__sim_xent_finish(mgt_backend *be, double *losses, void *logits, const float *parts, int tp, const int *targets, int N, int vs, int Vl, int V,
                                 float grad_scale) {
    (void)losses; (void)logits; (void)parts; (void)targets; (void)vs; (void)V;
    /* the gradient exp(l - M) / S - onehot: one read and one write of the logits, an exp each */
    MGT__SIM_ARGS(N, vs, Vl, V, tp, grad_scale != 0);
    mgt__sim_charge_t(be, "xent_finish", MGT_SIM_LOSS, 0, 0, grad_scale != 0 ? 3.0 * N * Vl : 4.0 * N * tp,
                      (grad_scale != 0 ? 2.0 * N * Vl * MGT__SIM_E : 0) + 12.0 * N * tp + 12.0 * N, grad_scale != 0 ? (double)N * Vl : 0, 0, 0, 0, 1);
}
static double mgt__sim_sum_squares(mgt_backend *be, const float *x, size_t n) {
    mgt__sim_rank *rk = (mgt__sim_rank *)be->impl;
    (void)x;
    MGT__SIM_ARGS((long long)n, 0, 0, 0, 0, 0);
    mgt__sim_charge(be, "sum_squares", MGT_SIM_OPTIMIZER, 0, 0, 2.0 * (double)n, 4.0 * (double)n, 0, 0, 0, 1);
    rk->th = mgt__sim_max(rk->th, rk->tc); /* the host reads the result */
    return 0.0;
}
static void mgt__sim_adamw(mgt_backend *be, float *param, void *copy, const float *grad, float *m, float *v, size_t n, float lr, float b1, float b2, float eps,
                           float wd, float gs, float bc1, float bc2) {
    (void)param; (void)grad; (void)m; (void)v; (void)lr; (void)b1; (void)b2; (void)eps; (void)wd; (void)gs; (void)bc1; (void)bc2;
    MGT__SIM_ARGS((long long)n, copy != NULL, 0, 0, 0, 0);
    mgt__sim_charge(be, "adamw", MGT_SIM_OPTIMIZER, 0, 0, 15.0 * (double)n, (28.0 + (copy ? MGT__SIM_E : 0)) * (double)n, 0, 0, 0, 1);
}
/* one kernel over every tensor of the call */
static void mgt__sim_adamw_many(mgt_backend *be, int count, float *const *param, void *const *copy, const float *const *grad, float *const *m,
                                float *const *v, const size_t *n, const float *wd, float lr, float b1, float b2, float eps, float gs, float bc1, float bc2) {
    double elements = 0, bytes = 0;
    int k;
    (void)param; (void)grad; (void)m; (void)v; (void)wd; (void)lr; (void)b1; (void)b2; (void)eps; (void)gs; (void)bc1; (void)bc2;
    for (k = 0; k < count; k++) {
        elements += (double)n[k];
        bytes += (28.0 + (copy[k] ? MGT__SIM_E : 0)) * (double)n[k];
    }
    MGT__SIM_ARGS((long long)elements, count > 0 && copy[0] != NULL, 0, 0, 0, 0); /* on the cpu, run as one AdamW of all the elements */
    mgt__sim_charge(be, "adamw", MGT_SIM_OPTIMIZER, 0, 0, 15.0 * elements, bytes, 0, 0, 0, 1);
}
static void mgt__sim_scale(mgt_backend *be, float *x, float f, size_t n) {
    (void)x; (void)f;
    MGT__SIM_ARGS((long long)n, 0, 0, 0, 0, 0);
    mgt__sim_charge(be, "scale", MGT_SIM_ELEMENTWISE, 0, 0, (double)n, 8.0 * (double)n, 0, 0, 0, 1);
}
static void mgt__sim_zero(mgt_backend *be, void *x, size_t bytes) {
    (void)x;
    MGT__SIM_ARGS((long long)bytes, 0, 0, 0, 0, 0);
    mgt__sim_charge(be, "zero", MGT_SIM_ELEMENTWISE, 0, 0, 0, (double)bytes, 0, 0, 0, 1);
}
static void mgt__sim_cast(mgt_backend *be, void *dst, int dt, const void *src, int st, size_t n) {
    (void)dst; (void)src;
    MGT__SIM_ARGS((long long)n, dt, st, 0, 0, 0);
    mgt__sim_charge(be, "cast", MGT_SIM_ELEMENTWISE, 0, 0, (double)n, (double)n * (double)(mgt__dtype_size(dt) + mgt__dtype_size(st)), 0, 0, 0, 1);
}
#undef MGT__SIM_E
#undef MGT__SIM_ARGS

/* memory: counted, and answered with an address that is never mapped */
static void *mgt__sim_alloc(mgt_backend *be, size_t bytes, int category) {
    mgt__sim_rank *rk = (mgt__sim_rank *)be->impl;
    mgt__sim_world *w = rk->w;
    size_t at;
    if (category < 0 || category >= MGT_MEM_COUNT) return NULL;
    pthread_mutex_lock(&w->mu);
    bytes = (bytes + 255) & ~(size_t)255;
    if (w->bump + bytes > w->span) w->bump = 0; /* addresses are reused: nothing is ever stored */
    at = bytes > w->span ? 0 : w->bump;
    w->bump += bytes > w->span ? 0 : bytes;
    pthread_mutex_unlock(&w->mu);
    be->mem_current[category] += bytes;
    if (be->mem_current[category] > be->mem_peak[category]) be->mem_peak[category] = be->mem_current[category];
    return w->base + at;
}
static void mgt__sim_free(mgt_backend *be, void *ptr, size_t bytes, int category) {
    if (!ptr || category < 0 || category >= MGT_MEM_COUNT) return;
    bytes = (bytes + 255) & ~(size_t)255;
    be->mem_current[category] -= bytes < be->mem_current[category] ? bytes : be->mem_current[category];
}
static int mgt__sim_is_device(const mgt__sim_world *w, const void *p) {
    return (const char *)p >= w->base && (const char *)p < w->base + w->span;
}
/* seconds of a copy between host and device memory (PCIe; memory on the CPU), as the cost function says */
static double mgt__sim_copy_cost(mgt__sim_rank *rk, const char *name, size_t bytes) {
    const mgt_sim_options *o = &rk->w->opt;
    mgt_sim_op op;
    double sec = (double)bytes / (o->device.host_sync ? o->device.mem_gbps * 1e9 : MGT__SIM_PCIE);
    memset(&op, 0, sizeof op);
    op.name = name;
    op.family = MGT_SIM_ELEMENTWISE;
    op.bytes = (double)bytes;
    op.kernels = 1;
    op.rank = rk->rank;
    return o->cost ? o->cost(o->cost_user, &op, sec) : sec;
}
static void mgt__sim_upload(mgt_backend *be, void *dst, const void *src, size_t bytes) {
    mgt__sim_rank *rk = (mgt__sim_rank *)be->impl;
    double sec = mgt__sim_copy_cost(rk, "upload", bytes);
    (void)dst; (void)src;
    if (rk->w->opt.device.host_sync) { rk->th = rk->tc = rk->tm = mgt__sim_max(rk->th, rk->tc) + sec; return; }
    rk->th += rk->w->opt.device.launch_us * 1e-6;
    rk->tc = mgt__sim_max(rk->tc, rk->th) + sec;
}
static void mgt__sim_download(mgt_backend *be, void *host_dst, const void *src, size_t bytes) {
    mgt__sim_rank *rk = (mgt__sim_rank *)be->impl;
    (void)src;
    if (host_dst && !mgt__sim_is_device(rk->w, host_dst)) memset(host_dst, 0, bytes); /* the host reads zeros */
    rk->th = mgt__sim_max(rk->th, rk->tc) + mgt__sim_copy_cost(rk, "download", bytes);
    if (rk->w->opt.device.host_sync) rk->tc = rk->tm = rk->th;
}
static void mgt__sim_finish(mgt_backend *be) {
    mgt__sim_rank *rk = (mgt__sim_rank *)be->impl;
    double t = mgt__sim_max(rk->th, mgt__sim_max(rk->tc, rk->tm));
    rk->th = rk->tc = rk->tm = t;
}
#endif /* MGT_NO_SIM */
/* ==== end src/sim_backend.c ==== */
/* ==== begin src/sim_comm.c ==== */
#ifndef MGT_NO_SIM
#line 1 "src/sim_comm.c"
/* src/sim_comm.c - the step simulator: its communicator and world, the CPU priced by running its ops */
/* ---- the communicator */

/* the cost of a collective over n members moving `bytes` (the buffer NCCL's bus bandwidth is
   counted against): ring all-reduce 2(n-1)/n, reduce-scatter and all-gather (n-1)/n, broadcast 1 */
static double mgt__sim_ring_cost(const mgt_sim_device *d, int coll, int n, int inter, double bytes) {
    double steps, factor, bw = (inter ? d->inter_gbps : d->intra_gbps) * 1e9 * d->link_frac;
    if (n <= 1) return 0;
    if (d->host_sync) { /* the in-process communicator: one rendezvous, then each member reads and writes
                           the whole buffer itself (all-reduce: n slices in, n out), reduce-scatter reads it
                           and writes its block; copies priced at the copy rate (a byte read and one written) */
        factor = coll == MGT_COLL_BARRIER ? 0 : coll == MGT_COLL_REDUCE_SCATTER ? (1.0 + 1.0 / n) / 2 : 1;
        return d->intra_lat_us * 1e-6 + (bw > 0 ? factor * bytes / bw : 0);
    }
    if (coll == MGT_COLL_ALL_REDUCE || coll == MGT_COLL_BARRIER) { steps = 2.0 * (n - 1); factor = 2.0 * (n - 1) / n; }
    else if (coll == MGT_COLL_BROADCAST) { steps = n - 1; factor = 1; }
    else { steps = n - 1; factor = (double)(n - 1) / n; }
    if (coll == MGT_COLL_BARRIER) bytes = 0;
    return ((inter ? d->inter_lat_us : d->intra_lat_us) + steps * d->step_lat_us) * 1e-6 + (bw > 0 ? factor * bytes / bw : 0);
}
/* a group on `nodes` nodes, at most k members on one: within one node a ring over NVLink; across
   nodes two levels, as NCCL's rings and trees over rail-aligned NICs (one per GPU) behave: inside
   each node over NVLink on the whole buffer, and between nodes on 1/k of it per GPU, the k GPUs
   of a node each through its own NIC at once (all-reduce: reduce-scatter inside, all-reduce
   between nodes, all-gather inside; reduce-scatter and all-gather: one inside, one between;
   broadcast: 1/k of the buffer to each node per NIC, then inside). One member per node: the ring
   between nodes alone, on the NICs */
static double mgt__sim_coll_cost(const mgt_sim_device *d, int coll, int n, int nodes, int k, double bytes) {
    double inside;
    if (nodes <= 1 && coll == MGT_COLL_ALL_REDUCE && d->nvls_gbps > 0 && n > 1 && !d->host_sync) {
        /* NVLink SHARP: each GPU sends its buffer into the switch, which reduces, and reads the sum back,
           whatever n: the published algorithm bandwidth (nvls_gbps), or the ring where that is faster
           (2 GPUs), as NCCL's tuner chooses */
        double ring = mgt__sim_ring_cost(d, coll, n, 0, bytes), nvls = d->intra_lat_us * 1e-6 + bytes / (d->nvls_gbps * 1e9);
        return ring < nvls ? ring : nvls;
    }
    if (nodes <= 1 || d->host_sync) return mgt__sim_ring_cost(d, coll, n, 0, bytes);
    if (coll == MGT_COLL_ALL_REDUCE)
        inside = mgt__sim_ring_cost(d, MGT_COLL_REDUCE_SCATTER, k, 0, bytes) + mgt__sim_ring_cost(d, MGT_COLL_ALL_GATHER, k, 0, bytes);
    else inside = mgt__sim_ring_cost(d, coll, k, 0, bytes);
    return inside + mgt__sim_ring_cost(d, coll, nodes, 1, bytes / k);
}
static int mgt__sim_inter(const mgt__sim_world *w, int a, int b) {
    int per = w->opt.gpus_per_node > 0 ? w->opt.gpus_per_node : 1;
    return a / per != b / per;
}
static double mgt__sim_p2p_cost(const mgt__sim_world *w, int a, int b, double bytes) {
    const mgt_sim_device *d = &w->opt.device;
    int inter = mgt__sim_inter(w, a, b);
    double bw = (inter ? d->inter_gbps : d->intra_gbps) * 1e9 * d->link_frac;
    return (inter ? d->inter_lat_us : d->intra_lat_us) * 1e-6 + (bw > 0 ? bytes / bw : 0);
}

/* where the communication stream may start a call: after the compute enqueued before it */
static double mgt__sim_issue(mgt__sim_rank *rk, int host_buffer) {
    if (rk->w->opt.device.host_sync) return mgt__sim_max(rk->th, mgt__sim_max(rk->tc, rk->tm));
    rk->th += rk->w->opt.device.launch_us * 1e-6;
    if (host_buffer) rk->th = mgt__sim_max(rk->th, rk->tc); /* NCCL stages a host buffer after the compute */
    return mgt__sim_max(rk->tm, mgt__sim_max(rk->tc, rk->th));
}
/* the call [issue, end) is on the communication stream; the compute waits for it unless deferred */
static void mgt__sim_complete(mgt__sim_rank *rk, int coll, double issue, double end, double peer_ready, int deferred, int host_buffer, const char *name) {
    double wait;
    rk->tm = end;
    rk->tm_coll = coll;
    rk->st.comm_s[coll] += end - issue;
    mgt__sim_trace(rk, name, issue, end - issue, 1);
    if (rk->w->opt.device.host_sync) {
        wait = end - issue;
        rk->th = rk->tc = end;
    } else if (deferred) {
        long t = rk->tickets - 1;
        rk->ticket_end[t % MGT__SIM_TICKETS] = end;
        rk->ticket_coll[t % MGT__SIM_TICKETS] = coll;
        wait = 0;
        issue = rk->tc;
    } else {
        wait = end > rk->tc ? end - rk->tc : 0;
        issue = rk->tc;
        if (end > rk->tc) rk->tc = end;
        if (host_buffer) rk->th = mgt__sim_max(rk->th, end);
    }
    if (wait > 0) { /* waiting for a pipeline peer to send is the bubble; the rest is communication */
        double bubble = coll == MGT_COLL_SEND_RECV && peer_ready > issue ? (peer_ready < end ? peer_ready : end) - issue : 0;
        rk->st.bubble_s += bubble;
        rk->st.exposed_s[coll] += wait - bubble;
        rk->comm.stats.seconds[coll] += wait;
    }
}

static long mgt__sim_next_seq(mgt__sim_rank *rk, int id) {
    int i;
    for (i = 0; i < rk->nseq; i++)
        if (rk->seq_id[i] == id) return rk->seq[i]++;
    if (rk->nseq < 8) { rk->seq_id[rk->nseq] = id; rk->seq[rk->nseq++] = 1; }
    return 0;
}

static mgt_result mgt__sim_aborted(mgt__sim_rank *rk) {
    return mgt__fail(MGT_ERROR_COMM, "simulated rank %d: the world was aborted after another rank's error", rk->rank);
}

/* a collective over g: completes at the last member's issue plus its cost */
static mgt_result mgt__sim_collective(mgt_comm *c, const mgt_group *g, int coll, double cost_bytes, double counted, void *host_out, size_t host_bytes) {
    mgt__sim_rank *rk = (mgt__sim_rank *)c->impl;
    mgt__sim_world *w = rk->w;
    int deferred = rk->defer_next, host = host_out && !mgt__sim_is_device(w, host_out);
    double issue, end, cost;
    mgt__sim_group *gr;
    mgt__sim_slot *s;
    long seq;
    rk->defer_next = 0;
    if (!g || g->id < 0 || g->id >= w->ngroups) return mgt__fail(MGT_ERROR_ARGUMENT, "simulated %s: group %d is not of this world", mgt_coll_name(coll), g ? g->id : -1);
    c->stats.calls[coll]++;
    c->stats.bytes[coll] += counted;
    rk->st.calls[coll]++;
    rk->st.bytes[coll] += counted;
    if (host) memset(host_out, 0, host_bytes);
    if (g->size <= 1) return MGT_OK;
    issue = mgt__sim_issue(rk, host);
    gr = &w->groups[g->id];
    seq = mgt__sim_next_seq(rk, g->id);
    pthread_mutex_lock(&gr->mu);
    if (!gr->known) {
        int i;
        int per = w->opt.gpus_per_node > 0 ? w->opt.gpus_per_node : 1, run = 0;
        for (i = 0; i < g->size; i++) { /* members in rank order: a node's are consecutive */
            int same = i && g->ranks[i] / per == g->ranks[i - 1] / per;
            run = same ? run + 1 : 1;
            gr->nodes += !same;
            if (run > gr->per_node) gr->per_node = run;
        }
        gr->known = 1;
    }
    cost = mgt__sim_coll_cost(&w->opt.device, coll, g->size, gr->nodes, gr->per_node, cost_bytes);
    s = &gr->slot[seq % 2];
    if (s->arrived == 0) { s->issue = issue; s->cost = cost; }
    s->issue = mgt__sim_max(s->issue, issue);
    s->cost = mgt__sim_max(s->cost, cost);
    if (++s->arrived == g->size) {
        s->end = s->issue + s->cost;
        s->done = 1;
        pthread_cond_broadcast(&gr->cv);
    }
    while (!s->done && !w->aborted) pthread_cond_wait(&gr->cv, &gr->mu);
    if (!s->done) { pthread_mutex_unlock(&gr->mu); return mgt__sim_aborted(rk); }
    end = s->end;
    if (++s->left == g->size) memset(s, 0, sizeof *s);
    pthread_mutex_unlock(&gr->mu);
    mgt__sim_complete(rk, coll, issue, end, 0, deferred, host, mgt_coll_name(coll));
    return MGT_OK;
}

static size_t mgt__sim_elt(int dtype) { return dtype == MGT_F64 ? 8 : dtype == MGT_F32 ? 4 : 2; }

static mgt_result mgt__sim_all_reduce(mgt_comm *c, const mgt_group *g, void *buf, size_t count, int dtype) {
    double b = (double)(count * mgt__sim_elt(dtype));
    if (!count) { ((mgt__sim_rank *)c->impl)->defer_next = 0; return MGT_OK; }
    return mgt__sim_collective(c, g, MGT_COLL_ALL_REDUCE, b, b, buf, count * mgt__sim_elt(dtype));
}
static mgt_result mgt__sim_reduce_scatter(mgt_comm *c, const mgt_group *g, const void *send, void *recv, size_t recv_count, int dtype) {
    double b = (double)(recv_count * mgt__sim_elt(dtype)) * (g ? g->size : 1);
    (void)send;
    if (!recv_count) { ((mgt__sim_rank *)c->impl)->defer_next = 0; return MGT_OK; }
    return mgt__sim_collective(c, g, MGT_COLL_REDUCE_SCATTER, b, b, recv, recv_count * mgt__sim_elt(dtype));
}
static mgt_result mgt__sim_all_gather(mgt_comm *c, const mgt_group *g, const void *send, void *recv, size_t send_count, int dtype) {
    double b = (double)(send_count * mgt__sim_elt(dtype)) * (g ? g->size : 1);
    (void)send;
    if (!send_count) { ((mgt__sim_rank *)c->impl)->defer_next = 0; return MGT_OK; }
    return mgt__sim_collective(c, g, MGT_COLL_ALL_GATHER, b, b, recv, (size_t)b);
}
static mgt_result mgt__sim_broadcast(mgt_comm *c, const mgt_group *g, void *buf, size_t count, int dtype, int root) {
    double b = (double)(count * mgt__sim_elt(dtype));
    (void)root;
    if (!count) { ((mgt__sim_rank *)c->impl)->defer_next = 0; return MGT_OK; }
    return mgt__sim_collective(c, g, MGT_COLL_BROADCAST, b, b, buf, count * mgt__sim_elt(dtype));
}
static mgt_result mgt__sim_barrier(mgt_comm *c, const mgt_group *g) { return mgt__sim_collective(c, g, MGT_COLL_BARRIER, 0, 0, NULL, 0); }

/* point to point: the send is posted to the peer's box with its issue time and cost */
static mgt_result mgt__sim_post(mgt__sim_rank *rk, int peer, double issue, double cost) {
    mgt__sim_world *w = rk->w;
    mgt__sim_box *b;
    if (peer < 0 || peer >= w->world) return mgt__fail(MGT_ERROR_ARGUMENT, "simulated send from rank %d to rank %d of %d", rk->rank, peer, w->world);
    b = &w->boxes[peer];
    pthread_mutex_lock(&b->mu);
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 16;
        mgt__sim_msg *m = (mgt__sim_msg *)MGT_REALLOC(b->msg, sizeof *m * cap);
        if (!m) { pthread_mutex_unlock(&b->mu); return mgt__fail(MGT_ERROR_MEMORY, "out of memory"); }
        b->msg = m;
        b->cap = cap;
    }
    b->msg[b->n].src = rk->rank;
    b->msg[b->n].taken = 0;
    b->msg[b->n].issue = issue;
    b->msg[b->n++].cost = cost;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return MGT_OK;
}
/* the oldest message from peer, waited for */
static mgt_result mgt__sim_take(mgt__sim_rank *rk, int peer, double *issue, double *cost) {
    mgt__sim_world *w = rk->w;
    mgt__sim_box *b = &w->boxes[rk->rank];
    size_t i;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        for (i = b->head; i < b->n; i++)
            if (!b->msg[i].taken && b->msg[i].src == peer) break;
        if (i < b->n || w->aborted) break;
        pthread_cond_wait(&b->cv, &b->mu);
    }
    if (i >= b->n) { pthread_mutex_unlock(&b->mu); return mgt__sim_aborted(rk); }
    b->msg[i].taken = 1;
    *issue = b->msg[i].issue;
    *cost = b->msg[i].cost;
    while (b->head < b->n && b->msg[b->head].taken) b->head++;
    if (b->head == b->n) b->head = b->n = 0;
    pthread_mutex_unlock(&b->mu);
    return MGT_OK;
}
static mgt_result mgt__sim_sendrecv_impl(mgt_comm *c, int send_peer, int recv_peer, size_t count, int dtype) {
    mgt__sim_rank *rk = (mgt__sim_rank *)c->impl;
    double bytes = (double)(count * mgt__sim_elt(dtype)), issue, end, peer_issue = 0, peer_cost = 0, scost = 0;
    rk->defer_next = 0;
    if (!count) return MGT_OK;
    issue = mgt__sim_issue(rk, 0);
    end = issue;
    if (send_peer >= 0) {
        scost = mgt__sim_p2p_cost(rk->w, rk->rank, send_peer, bytes);
        MGT__TRY(mgt__sim_post(rk, send_peer, issue, scost));
        end = issue + scost;
        c->stats.calls[MGT_COLL_SEND_RECV]++;
        c->stats.bytes[MGT_COLL_SEND_RECV] += bytes;
        rk->st.calls[MGT_COLL_SEND_RECV]++;
        rk->st.bytes[MGT_COLL_SEND_RECV] += bytes;
    }
    if (recv_peer >= 0) {
        if (recv_peer >= rk->w->world) return mgt__fail(MGT_ERROR_ARGUMENT, "simulated recv on rank %d from rank %d", rk->rank, recv_peer);
        MGT__TRY(mgt__sim_take(rk, recv_peer, &peer_issue, &peer_cost));
        if (rk->w->opt.device.host_sync) end = mgt__sim_max(end, peer_issue + peer_cost); /* the sender copied it */
        else end = mgt__sim_max(end, mgt__sim_max(issue, peer_issue) + peer_cost);
        c->stats.calls[MGT_COLL_SEND_RECV]++;
        c->stats.bytes[MGT_COLL_SEND_RECV] += bytes;
        rk->st.calls[MGT_COLL_SEND_RECV]++;
        rk->st.bytes[MGT_COLL_SEND_RECV] += bytes;
    }
    mgt__sim_complete(rk, MGT_COLL_SEND_RECV, issue, end, recv_peer >= 0 ? peer_issue : 0, 0, 0,
                      send_peer >= 0 && recv_peer >= 0 ? "sendrecv" : send_peer >= 0 ? "send" : "recv");
    return MGT_OK;
}
static mgt_result mgt__sim_send(mgt_comm *c, int peer, const void *buf, size_t count, int dtype) {
    (void)buf;
    return mgt__sim_sendrecv_impl(c, peer, -1, count, dtype);
}
static mgt_result mgt__sim_recv(mgt_comm *c, int peer, void *buf, size_t count, int dtype) {
    (void)buf;
    return mgt__sim_sendrecv_impl(c, -1, peer, count, dtype);
}
static mgt_result mgt__sim_sendrecv(mgt_comm *c, int send_peer, const void *send, int recv_peer, void *recv, size_t count, int dtype) {
    (void)send; (void)recv;
    return mgt__sim_sendrecv_impl(c, send_peer, recv_peer, count, dtype);
}
static long mgt__sim_defer(mgt_comm *c) {
    mgt__sim_rank *rk = (mgt__sim_rank *)c->impl;
    if (rk->w->opt.device.host_sync) return -1; /* every call completes before it returns */
    rk->defer_next = 1;
    return rk->tickets++;
}
static mgt_result mgt__sim_sync(mgt_comm *c, long ticket) {
    mgt__sim_rank *rk = (mgt__sim_rank *)c->impl;
    double e = rk->tm;
    int coll = rk->tm_coll;
    if (rk->w->opt.device.host_sync) return MGT_OK;
    if (ticket >= 0 && ticket < rk->tickets && ticket >= rk->tickets - MGT__SIM_TICKETS) {
        e = rk->ticket_end[ticket % MGT__SIM_TICKETS];
        coll = rk->ticket_coll[ticket % MGT__SIM_TICKETS];
    }
    if (e > rk->tc) {
        rk->st.exposed_s[coll] += e - rk->tc;
        rk->comm.stats.seconds[coll] += e - rk->tc;
        rk->tc = e;
    }
    return MGT_OK;
}

/* ---- the world */

static void mgt__sim_world_destroy(mgt__sim_world *w) {
    int i;
    if (!w) return;
    for (i = 0; w->groups && i < w->ngroups; i++) { pthread_mutex_destroy(&w->groups[i].mu); pthread_cond_destroy(&w->groups[i].cv); }
    for (i = 0; w->boxes && i < w->world; i++) { pthread_mutex_destroy(&w->boxes[i].mu); pthread_cond_destroy(&w->boxes[i].cv); MGT_FREE(w->boxes[i].msg); }
    for (i = 0; w->ranks && i < w->world; i++) MGT_FREE(w->ranks[i].ev);
    if (w->base) munmap(w->base, w->span);
    for (i = 0; w->meters && i <= w->companions; i++) {
        if (w->meters[i].be) mgt__cpu_backend_destroy(w->meters[i].be);
        MGT_FREE(w->meters[i].arena);
    }
    MGT_FREE(w->meters);
    MGT_FREE(w->measured); /* realloc'd */
    pthread_mutex_destroy(&w->measure_mu);
    pthread_mutex_destroy(&w->mu);
    MGT_FREE(w->groups);
    MGT_FREE(w->boxes);
    MGT_FREE(w->ranks);
    MGT_FREE(w);
}

/* a range of addresses that nothing may use: reserved without access, never touched */
static void *mgt__sim_reserve(size_t span) {
    void *p;
#ifdef MAP_ANONYMOUS
    p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS
#ifdef MAP_NORESERVE
                                          | MAP_NORESERVE
#endif
             , -1, 0);
#else
    int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE, fd, 0);
    close(fd);
#endif
    return p == MAP_FAILED ? NULL : p;
}

static mgt_result mgt__sim_world_create(mgt__sim_world **out, int world, const mgt_sim_options *opt) {
    mgt__sim_world *w;
    int i;
    *out = NULL;
    w = (mgt__sim_world *)MGT_MALLOC(sizeof *w);
    if (!w) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    pthread_mutex_init(&w->measure_mu, NULL);
    w->opt = *opt;
    w->world = world;
    w->ngroups = 6 * world; /* the ids of mgt__rank_init's groups */
    for (w->span = (size_t)1 << 40; w->span >= ((size_t)1 << 30) && !(w->base = (char *)mgt__sim_reserve(w->span)); w->span >>= 2) {}
    w->ranks = (mgt__sim_rank *)MGT_MALLOC(sizeof(mgt__sim_rank) * (size_t)world);
    w->groups = (mgt__sim_group *)MGT_MALLOC(sizeof(mgt__sim_group) * (size_t)w->ngroups);
    w->boxes = (mgt__sim_box *)MGT_MALLOC(sizeof(mgt__sim_box) * (size_t)world);
    if (!w->base || !w->ranks || !w->groups || !w->boxes) {
        if (!w->base) w->span = 0;
        MGT_FREE(w->groups); w->groups = NULL;
        MGT_FREE(w->boxes); w->boxes = NULL;
        mgt__sim_world_destroy(w);
        return mgt__fail(MGT_ERROR_MEMORY, "out of memory (or address space) for a simulated world of %d ranks", world);
    }
    memset(w->ranks, 0, sizeof(mgt__sim_rank) * (size_t)world);
    memset(w->groups, 0, sizeof(mgt__sim_group) * (size_t)w->ngroups);
    memset(w->boxes, 0, sizeof(mgt__sim_box) * (size_t)world);
    for (i = 0; i < w->ngroups; i++) { pthread_mutex_init(&w->groups[i].mu, NULL); pthread_cond_init(&w->groups[i].cv, NULL); }
    for (i = 0; i < world; i++) {
        mgt__sim_rank *rk = &w->ranks[i];
        mgt_backend *be = &rk->be;
        mgt_comm *c = &rk->comm;
        pthread_mutex_init(&w->boxes[i].mu, NULL);
        pthread_cond_init(&w->boxes[i].cv, NULL);
        rk->w = w;
        rk->rank = i;
        be->name = "sim";
        be->host_memory = 0;
        be->att_lse = !w->opt.device.host_sync; /* a GPU's flash attention; the CPU backend saves the probabilities */
        be->alloc = mgt__sim_alloc;
        be->free = mgt__sim_free;
        be->upload = mgt__sim_upload;
        be->download = mgt__sim_download;
        be->finish = mgt__sim_finish;
        be->encoder_forward = mgt__sim_encoder_forward;
        be->encoder_backward = mgt__sim_encoder_backward;
        be->layernorm_forward = mgt__sim_layernorm_forward;
        be->layernorm_backward = mgt__sim_layernorm_backward;
        be->matmul_forward = mgt__sim_matmul_forward;
        be->matmul_backward = mgt__sim_matmul_backward;
        be->matmul_gelu_forward = mgt__sim_matmul_gelu_forward;
        be->matmul_gelu_backward = mgt__sim_matmul_gelu_backward;
        be->attention_forward = mgt__sim_attention_forward;
        be->attention_backward = mgt__sim_attention_backward;
        be->attention_part_forward = mgt__sim_attention_part_forward;
        be->attention_part_backward = mgt__sim_attention_part_backward;
        be->copy_cols = mgt__sim_copy_cols;
        be->gelu_forward = mgt__sim_gelu_forward;
        be->gelu_backward = mgt__sim_gelu_backward;
        be->rmsnorm_forward = mgt__sim_rmsnorm_forward;
        be->rmsnorm_backward = mgt__sim_rmsnorm_backward;
        be->rope_forward = mgt__sim_rope_forward;
        be->rope_backward = mgt__sim_rope_backward;
        be->swiglu_forward = mgt__sim_swiglu_forward;
        be->swiglu_backward = mgt__sim_swiglu_backward;
        be->add_inplace = mgt__sim_add_inplace;
        be->bias_residual = mgt__sim_bias_residual;
        be->residual_layernorm_forward = mgt__sim_residual_layernorm_forward;
        be->bias_backward = mgt__sim_bias_backward;
        be->xent_partial = mgt__sim_xent_partial;
        be->xent_finish = mgt__sim_xent_finish;
        be->sum_squares = mgt__sim_sum_squares;
        be->adamw = mgt__sim_adamw;
        be->adamw_many = mgt__sim_adamw_many;
        be->scale = mgt__sim_scale;
        be->zero = mgt__sim_zero;
        be->cast = mgt__sim_cast;
        be->impl = rk;
        c->rank = i;
        c->world = world;
        c->all_reduce = mgt__sim_all_reduce;
        c->reduce_scatter = mgt__sim_reduce_scatter;
        c->all_gather = mgt__sim_all_gather;
        c->broadcast = mgt__sim_broadcast;
        c->send = mgt__sim_send;
        c->recv = mgt__sim_recv;
        c->sendrecv = mgt__sim_sendrecv;
        c->barrier = mgt__sim_barrier;
        c->defer = mgt__sim_defer;
        c->sync = mgt__sim_sync;
        c->impl = rk;
    }
    *out = w;
    return MGT_OK;
}

/* after a rank's error: every waiting and later call fails */
static void mgt__sim_abort(mgt__sim_world *w) {
    int i;
    for (i = 0; i < w->ngroups; i++) {
        pthread_mutex_lock(&w->groups[i].mu);
        w->aborted = 1;
        pthread_cond_broadcast(&w->groups[i].cv);
        pthread_mutex_unlock(&w->groups[i].mu);
    }
    for (i = 0; i < w->world; i++) {
        pthread_mutex_lock(&w->boxes[i].mu);
        w->aborted = 1;
        pthread_cond_broadcast(&w->boxes[i].cv);
        pthread_mutex_unlock(&w->boxes[i].mu);
    }
}

/* ---- the simulated world (the table of src/world.c): its ranks' backends and communicators are
   the simulator's, which makes and frees them */
static mgt_result mgt__world_sim_backend(void *world, const mgt__rank_want *want, mgt_backend **out, int *device) {
    mgt_backend *be = &((mgt__sim_world *)world)->ranks[want->rank].be;
    be->dtype = want->dtype;
    be->elt = mgt__dtype_size(want->dtype);
    *out = be;
    *device = -1;
    return MGT_OK;
}
static mgt_result mgt__world_sim_comm(void *world, int rank, mgt_backend *be, const mgt_group *const *groups, int ngroups, mgt_comm **out) {
    (void)be, (void)groups, (void)ngroups;
    *out = &((mgt__sim_world *)world)->ranks[rank].comm;
    return MGT_OK;
}
static void mgt__world_sim_rank_failed(void *world, mgt_comm *c) {
    (void)c;
    mgt__sim_abort((mgt__sim_world *)world);
}
static const mgt__world_api mgt__world_sim = {
    "cpu", 0, 0, NULL, mgt__world_sim_backend, NULL, mgt__world_sim_comm, NULL, NULL, mgt__world_sim_rank_failed, NULL, NULL,
};

/* every clock and count back to zero, between steps (the rank threads are idle) */
static void mgt__sim_reset(mgt__sim_world *w) {
    int i;
    for (i = 0; i < w->world; i++) {
        mgt__sim_rank *rk = &w->ranks[i];
        rk->th = rk->tc = rk->tm = 0;
        rk->defer_next = 0;
        memset(&rk->st, 0, sizeof rk->st);
        rk->nev = 0;
    }
}

static mgt_result mgt__sim_write_trace(const mgt__sim_world *w, const char *path) {
    FILE *f = fopen(path, "w");
    int i, first = 1;
    size_t k;
    if (!f) return mgt__fail(MGT_ERROR_IO, "cannot write the trace %s: %s", path, strerror(errno));
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"note\":\"PREDICTED by mgt's step simulator on %s\"},\"traceEvents\":[\n", w->opt.device.name);
    for (i = 0; i < w->world; i++) {
        fprintf(f, "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}}", first ? "" : ",\n", i, i);
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"compute\"}}", i);
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":1,\"args\":{\"name\":\"communication\"}}", i);
        first = 0;
        for (k = 0; k < w->ranks[i].nev; k++) {
            const mgt__sim_event *e = &w->ranks[i].ev[k];
            fprintf(f, ",\n{\"name\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f}", e->name, i, e->stream, e->start * 1e6, e->dur * 1e6);
        }
    }
    fprintf(f, "\n]}\n");
    if (fclose(f) != 0) return mgt__fail(MGT_ERROR_IO, "cannot write the trace %s", path);
    return MGT_OK;
}

MGTDEF void mgt_sim_result_free(mgt_sim_result *res) {
    if (!res) return;
    MGT_FREE(res->ranks);
    res->ranks = NULL;
}

MGTDEF mgt_result mgt_sim_run(const mgt_config *cfg, const mgt_sim_options *opt, mgt_sim_result *out) {
    mgt_plan p;
    mgt__sim_world *w = NULL;
    mgt_run *r = NULL;
    uint32_t *rows = NULL;
    mgt_result res;
    double t0 = mgt_now(), peak, tokens;
    int i, c;
    if (!cfg || !opt || !out) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_sim_run: cfg, opt and out are required");
    memset(out, 0, sizeof *out);
    if (opt->device.tensor_tflops[0] <= 0 || opt->device.mem_gbps <= 0 || opt->device.vector_tflops <= 0)
        return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_sim_run: device '%s' has no peak or bandwidth (for cpu, use mgt_sim_device_find)", opt->device.name);
    MGT__TRY(mgt_config_validate(cfg));
    MGT__TRY(mgt__layout_chosen(cfg, "a simulated step"));
    MGT__TRY(mgt__plan_make(cfg, &p));
    MGT__TRY(mgt__sim_world_create(&w, p.world, opt));
    res = mgt__run_alloc_on(&r, cfg, 0, &mgt__world_sim, w);
    if (res == MGT_OK) {
        rows = (uint32_t *)MGT_MALLOC(sizeof(uint32_t) * (size_t)cfg->train.global_batch * (size_t)(cfg->model.seq_len + 1));
        if (!rows) res = mgt__fail(MGT_ERROR_MEMORY, "out of memory");
        else memset(rows, 0, sizeof(uint32_t) * (size_t)cfg->train.global_batch * (size_t)(cfg->model.seq_len + 1));
    }
    if (res == MGT_OK && opt->device.host_sync) { /* the cpu: ops measured, as a rank runs them beside the others */
        int cores = mgt_cpu_count(), on_machine = p.world < cores / r->threads_per_rank ? p.world : cores / r->threads_per_rank;
        w->companions = on_machine > 1 ? (on_machine - 1 < 63 ? on_machine - 1 : 63) : 0;
        w->meters = (mgt__sim_meter *)MGT_MALLOC(sizeof(mgt__sim_meter) * (size_t)(w->companions + 1));
        if (!w->meters) res = mgt__fail(MGT_ERROR_MEMORY, "out of memory");
        else {
            memset(w->meters, 0, sizeof(mgt__sim_meter) * (size_t)(w->companions + 1));
            w->measure_threads = r->threads_per_rank;
        }
    }
    if (res == MGT_OK) {
        mgt__sim_reset(w);
        res = mgt__run_cmd(r, MGT__CMD_STEP, rows, 0);
    }
    if (res == MGT_OK) {
        out->ranks = (mgt_sim_rank *)MGT_MALLOC(sizeof(mgt_sim_rank) * (size_t)p.world);
        if (!out->ranks) res = mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    }
    if (res == MGT_OK) {
        out->world = p.world;
        for (i = 0; i < p.world; i++) {
            mgt_sim_rank *o = &out->ranks[i];
            mgt__rank *rk = &r->ranks[i];
            double used = 0;
            *o = w->ranks[i].st;
            o->rank = i;
            o->dp = rk->dpr;
            o->tp = rk->tpr;
            o->pp = rk->ppr;
            o->step_s = mgt__sim_max(w->ranks[i].tc, mgt__sim_max(w->ranks[i].tm, w->ranks[i].th));
            for (c = 0; c < MGT_SIM_FAMILIES; c++) o->compute_s += o->busy_s[c];
            for (c = 0; c < MGT_MEM_COUNT; c++) { o->mem_peak[c] = rk->be->mem_peak[c]; used += (double)rk->be->mem_peak[c]; }
            if (o->step_s > out->step_s) out->step_s = o->step_s;
            if (!opt->device.host_sync) /* the CUDA backend's attention scratch: a float per row and head of a micro-batch */
                used += (double)cfg->train.micro_batch * (double)(cfg->model.n_head / p.tp) * (double)cfg->model.seq_len * sizeof(float);
            used = used / 1073741824.0 + opt->device.reserve_gib;
            if (used > out->mem_peak_gib) out->mem_peak_gib = used;
        }
        tokens = (double)cfg->train.global_batch * cfg->model.seq_len;
        out->tokens_per_s = out->step_s > 0 ? tokens / out->step_s : 0;
        out->flops_per_token = mgt__flops_per_token(r);
        peak = opt->device.tensor_tflops[r->dtype >= 0 && r->dtype < 3 ? r->dtype : 0] * 1e12 * p.world;
        out->mfu = peak > 0 ? out->tokens_per_s * out->flops_per_token / peak : 0;
        out->shapes_measured = (int)w->nmeasured;
        out->ops_modelled = w->ops_modelled;
        if (opt->trace && opt->trace[0]) res = mgt__sim_write_trace(w, opt->trace);
    }
    MGT_FREE(rows);
    if (r) mgt_run_destroy(r);
    mgt__sim_world_destroy(w);
    if (res != MGT_OK) mgt_sim_result_free(out);
    out->wall_s = mgt_now() - t0;
    return res;
}
#endif /* MGT_NO_SIM */
/* ==== end src/sim_comm.c ==== */
/* ==== begin src/sim_calibration.c ==== */
#ifndef MGT_NO_SIM
#line 1 "src/sim_calibration.c"
/* src/sim_calibration.c - the step simulator: calibration from per-family times measured on a GPU */
/* ---- calibration: per-family times measured on a GPU, in an INI file (mgt.h section 3d's
   declarations; docs/simulator.md, "Calibration"). The [calibration] section is read here, line by
   line; the shape's sections go to the preset reader with the calibration's lines blanked, so its
   errors name the file's own lines. */
static const char *const mgt__sim_cal_sections[] = {"model", "precision"};

MGTDEF mgt_result mgt_sim_calibration_write(const char *path, const char *gpu_name, const mgt_config *cfg, const double *family_seconds) {
    const mgt_key_info *keys;
    char value[MGT_STR_MAX + 64];
    FILE *f;
    int n, i, s, c, err;
    if (!path || !gpu_name || !cfg || !family_seconds) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_sim_calibration_write: path, gpu_name, cfg and family_seconds are required");
    if (strpbrk(gpu_name, ";#\n\r[]")) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_sim_calibration_write: the GPU's name '%s' has a character INI cannot hold (; # [ ] or a line break)", gpu_name);
    for (c = 0; c < MGT_SIM_FAMILIES; c++)
        if (family_seconds[c] >= 0 && !isfinite(family_seconds[c]))
            return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_sim_calibration_write: %s's time is not finite", mgt_sim_family_name(c));
    if (!(f = fopen(path, "w"))) return mgt__fail(MGT_ERROR_IO, "cannot write the calibration %s: %s", path, strerror(errno));
    keys = mgt_config_keys(&n);
    fprintf(f, "; mgt step simulator calibration (docs/simulator.md, \"Calibration\"): `mgt plan PRESET --gpu NAME --calibrate %s`\n", path);
    fprintf(f, "[calibration]\ngpu = %s\n", gpu_name);
    fprintf(f, "; milliseconds of one micro-batch's forward, backward and optimizer step on one GPU, by op family\n");
    for (c = 0; c < MGT_SIM_FAMILIES; c++)
        if (family_seconds[c] >= 0) fprintf(f, "%s = %.9g\n", mgt_sim_family_name(c), family_seconds[c] * 1e3);
    fprintf(f, "; the shape measured\n");
    for (s = 0; s < 2; s++) {
        fprintf(f, "[%s]\n", mgt__sim_cal_sections[s]);
        for (i = 0; i < n; i++)
            if (!strcmp(keys[i].section, mgt__sim_cal_sections[s])) {
                mgt_config_value_string(cfg, i, value, sizeof value);
                fprintf(f, "%s = %s\n", keys[i].name, value);
            }
    }
    fprintf(f, "[train]\nmicro_batch = %d\nrecompute = %s\n", cfg->train.micro_batch, mgt_recompute_name(cfg->train.recompute));
    err = ferror(f);
    if (fclose(f) != 0 || err) return mgt__fail(MGT_ERROR_IO, "cannot write the calibration %s", path);
    return MGT_OK;
}

/* one line of [calibration]: "key = value ; comment", trimmed in place; 0 when it has no '=' */
static int mgt__sim_cal_split(char *line, char **key, char **value) {
    char *eq = strchr(line, '='), *end;
    size_t i;
    if (!eq) return 0;
    *eq = 0;
    *key = line;
    *value = eq + 1;
    for (i = 0; (*value)[i]; i++) /* an inline comment, after a space (inih's rule) */
        if (((*value)[i] == ';' || (*value)[i] == '#') && i > 0 && ((*value)[i - 1] == ' ' || (*value)[i - 1] == '\t')) { (*value)[i] = 0; break; }
    while (**key == ' ' || **key == '\t') (*key)++;
    while (**value == ' ' || **value == '\t') (*value)++;
    for (end = *key + strlen(*key); end > *key && (end[-1] == ' ' || end[-1] == '\t'); end--) end[-1] = 0;
    for (end = *value + strlen(*value); end > *value && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'); end--) end[-1] = 0;
    return 1;
}

MGTDEF mgt_result mgt_sim_calibration_read(const char *path, mgt_sim_calibration *out) {
    FILE *f;
    char *text = NULL, *line, *next;
    size_t len = 0, cap = 0;
    int lineno = 0, in_cal = 0, seen_cal = 0, c, families = 0;
    mgt_result r = MGT_OK;
    if (!path || !out) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_sim_calibration_read: path and out are required");
    memset(out, 0, sizeof *out);
    for (c = 0; c < MGT_SIM_FAMILIES; c++) out->measured_s[c] = -1;
    mgt__strlcpy(out->path, path, sizeof out->path);
    if (!(f = fopen(path, "r")))
        return mgt__fail(MGT_ERROR_CONFIG, "%s: cannot read the calibration: %s (write one with mgt_sim_calibration_write; format in docs/simulator.md)", path,
                         strerror(errno));
    for (;;) { /* the whole file, as text */
        size_t got;
        if (len + 4096 + 1 > cap) {
            char *p = (char *)MGT_REALLOC(text, cap = 2 * cap + 4096 + 1);
            if (!p) { MGT_FREE(text); fclose(f); return mgt__fail(MGT_ERROR_MEMORY, "out of memory"); }
            text = p;
        }
        got = fread(text + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0) break;
    }
    fclose(f);
    text[len] = 0;
    if (strlen(text) != len) { MGT_FREE(text); return mgt__fail(MGT_ERROR_CONFIG, "%s: a NUL byte: not a text file (a calibration is INI text)", path); }
    for (line = text; line && r == MGT_OK; line = next) { /* [calibration] read and blanked; the rest left for the preset reader */
        char *p = line, *key, *value, *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        next = nl ? nl + 1 : NULL;
        if (nl) *nl = 0;
        lineno++;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '[') {
            in_cal = !strncmp(p, "[calibration]", 13);
            seen_cal |= in_cal;
        }
        if (in_cal && *p && *p != ';' && *p != '#' && *p != '[') {
            if (!mgt__sim_cal_split(p, &key, &value))
                r = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: not an INI line (expected key = value or a ; comment)", path, lineno);
            else if (!strcmp(key, "gpu")) {
                if (!value[0] || strlen(value) >= sizeof out->gpu) r = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: gpu: the GPU's name, 1 to %d characters", path, lineno, (int)sizeof out->gpu - 1);
                else mgt__strlcpy(out->gpu, value, sizeof out->gpu);
            } else {
                char *end;
                double ms;
                for (c = 0; c < MGT_SIM_FAMILIES && strcmp(key, mgt_sim_family_name(c)); c++) {}
                if (c == MGT_SIM_FAMILIES) {
                    char valid[160] = "gpu";
                    int k;
                    for (k = 0; k < MGT_SIM_FAMILIES; k++) { strcat(valid, ", "); strcat(valid, mgt_sim_family_name(k)); }
                    r = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: [calibration] has no key '%s' (valid: %s)", path, lineno, key, valid);
                } else if (out->measured_s[c] >= 0)
                    r = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: %s is set again: a family's time is given once", path, lineno, key);
                else {
                    errno = 0;
                    ms = strtod(value, &end);
                    if (end == value || *end || errno || !isfinite(ms) || ms <= 0 || ms > 1e9)
                        r = mgt__fail(MGT_ERROR_CONFIG, "%s:%d: %s = '%s': milliseconds, a number above 0 (the family's measured time)", path, lineno, key, value);
                    else {
                        out->measured_s[c] = ms * 1e-3;
                        families++;
                    }
                }
            }
        }
        if (in_cal) memset(line, ' ', n); /* the preset reader sees a blank line (the split left NULs in it) */
        if (nl) *nl = '\n';
    }
    if (r == MGT_OK && !seen_cal) r = mgt__fail(MGT_ERROR_CONFIG, "%s: no [calibration] section (format in docs/simulator.md, \"Calibration\")", path);
    if (r == MGT_OK && !out->gpu[0]) r = mgt__fail(MGT_ERROR_CONFIG, "%s: [calibration] names no gpu (add gpu = the GPU's name)", path);
    if (r == MGT_OK && !families) r = mgt__fail(MGT_ERROR_CONFIG, "%s: [calibration] has no measured family (add e.g. gemm = 19.1, in milliseconds)", path);
    if (r == MGT_OK) {
        mgt_config_init(&out->shape);
        r = mgt_config_load_string(&out->shape, text, path);
    }
    MGT_FREE(text);
    if (r == MGT_OK) { /* one GPU, one micro-batch a step, nothing read */
        mgt_config *k = &out->shape;
        char kv[64];
        snprintf(kv, sizeof kv, "train.global_batch=%d", k->train.micro_batch);
        if ((r = mgt_config_set(k, kv)) == MGT_OK && (r = mgt_config_set(k, "parallel.dp=1")) == MGT_OK && (r = mgt_config_set(k, "parallel.tp=1")) == MGT_OK &&
            (r = mgt_config_set(k, "parallel.sp=0")) == MGT_OK && (r = mgt_config_set(k, "parallel.pp_virtual=1")) == MGT_OK &&
            (r = mgt_config_set(k, "parallel.pp=1")) == MGT_OK && (r = mgt_config_set(k, "data.train=")) == MGT_OK && (r = mgt_config_set(k, "data.val=")) == MGT_OK)
            r = mgt_config_validate(k);
        if (r != MGT_OK) r = mgt__fail(MGT_ERROR_CONFIG, "%s: the shape measured is not a valid preset: %s", path, mgt_last_error());
    }
    return r;
}

MGTDEF mgt_result mgt_sim_calibrate(mgt_sim_calibration *cal, mgt_sim_options *opt) {
    mgt_sim_options o;
    mgt_sim_result res;
    int c;
    if (!cal || !opt) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_sim_calibrate: cal and opt are required");
    if (opt->device.host_sync) return mgt__fail(MGT_ERROR_ARGUMENT, "a calibration rescales a GPU's model; the cpu device measures its ops itself");
    o = *opt;
    memset(o.family_scale, 0, sizeof o.family_scale);
    o.trace = NULL;
    o.cost = NULL;
    MGT__TRY(mgt_sim_run(&cal->shape, &o, &res));
    for (c = 0; c < MGT_SIM_FAMILIES; c++) {
        double predicted = res.ranks[0].busy_s[c];
        cal->scale[c] = 0;
        if (cal->measured_s[c] < 0) continue;
        if (predicted <= 0) {
            mgt_sim_result_free(&res);
            return mgt__fail(MGT_ERROR_CONFIG, "%s: %s is measured but no op of the family runs in the shape measured (remove the line)", cal->path,
                             mgt_sim_family_name(c));
        }
        cal->scale[c] = cal->measured_s[c] / predicted;
    }
    mgt_sim_result_free(&res);
    memcpy(opt->family_scale, cal->scale, sizeof opt->family_scale);
    return MGT_OK;
}
#endif /* MGT_NO_SIM */
/* ==== end src/sim_calibration.c ==== */
/* ==== begin src/sim_search.c ==== */
#ifndef MGT_NO_SIM
#line 1 "src/sim_search.c"
/* src/sim_search.c - the layout search: every layout of a number of GPUs (or CPU ranks) that fits,
   simulated, fastest first (mgt plan --search, parallel.layout = auto) */

/* GiB the fullest rank of cfg needs on a GPU (the plan, the device's reserve, the attention
   scratch), or -1 when cfg is not a valid layout. On the CPU (host_sync), where the ranks share the
   machine's memory: 0 when the whole run fits it as mgt_run_create checks it (mgt__fit), else -1 */
static double mgt__search_mem(const mgt_config *layout, const mgt_sim_device *d) {
    mgt_config gpu = *layout; /* planned as GPU ranks: flash attention's activations */
    mgt_plan plan;
    int r, c, tp = gpu.parallel.tp, dp = gpu.parallel.dp, pp = gpu.parallel.pp;
    double worst = 0;
    if (d->host_sync) {
        mgt_fit fit;
        gpu.parallel.device = MGT_DEVICE_CPU;
        if (mgt_plan_make(&gpu, &plan) != MGT_OK) return -1;
        mgt__fit(&plan, 0, NULL, 0, &fit);
        return fit.fits || !fit.checked ? 0 : -1;
    }
    gpu.parallel.device = MGT_DEVICE_CUDA;
    if (mgt_plan_make(&gpu, &plan) != MGT_OK) return -1;
    for (r = 0; r < dp * tp * pp; r++) {
        mgt_rank_plan p;
        double used = 0;
        int dpi, tpi, ppi;
        mgt_rank_coords(r, dp, tp, &dpi, &tpi, &ppi);
        if (ppi > 0 && ppi < pp - 1 && (dpi || tpi)) continue; /* one rank per middle stage: they hold alike */
        if (mgt_plan_rank(&plan, r, &p) != MGT_OK) return -1;
        for (c = 0; c < MGT_MEM_COUNT; c++)
            if (c != MGT_MEM_WORKSPACE) used += (double)p.mem[c];
        if (used > worst) worst = used;
    }
    return worst / 1073741824.0 + d->reserve_gib +
           (double)gpu.train.micro_batch * (gpu.model.n_head / tp) * (double)gpu.model.seq_len * sizeof(float) / 1073741824.0;
}
static int mgt__search_faster(const void *a, const void *b) {
    double x = ((const mgt_layout_choice *)a)->tokens_per_s, y = ((const mgt_layout_choice *)b)->tokens_per_s;
    return x < y ? 1 : x > y ? -1 : 0;
}
/* a layout of the search: its config, then what its simulated step came to (the layout search
   simulates its layouts on several threads at once, each step on its own simulated world) */
static const int mgt__search_modes[3] = {MGT_RECOMPUTE_NONE, MGT_RECOMPUTE_SELECTIVE, MGT_RECOMPUTE_FULL}; /* least first */
typedef struct mgt__search_job {
    mgt_config cfg;
    int fallback;               /* > 0: the mode (mgt__search_modes) to try from should the simulator refuse this one */
    mgt_result rc;              /* of mgt_sim_run */
    char why[320];              /* its error */
    mgt_layout_choice choice;   /* its figures, when rc is MGT_OK */
} mgt__search_job;
typedef struct mgt__search_jobs {
    mgt__search_job *job;
    int n, cap, next;
    const mgt_sim_options *opt;
    pthread_mutex_t mu;
} mgt__search_jobs;

/* job's step simulated into its choice */
static void mgt__search_run(mgt__search_job *job, const mgt_sim_options *opt) {
    mgt_sim_result res;
    mgt_layout_choice *c = &job->choice;
    const mgt_config *cfg = &job->cfg;
    int k;
    job->rc = mgt_sim_run(cfg, opt, &res);
    if (job->rc != MGT_OK) { mgt__strlcpy(job->why, mgt_last_error(), sizeof job->why); return; }
    memset(c, 0, sizeof *c);
    c->dp = cfg->parallel.dp; c->tp = cfg->parallel.tp; c->pp = cfg->parallel.pp; c->zero = cfg->parallel.zero;
    c->micro_batch = cfg->train.micro_batch; c->recompute = cfg->train.recompute; c->pp_schedule = cfg->parallel.pp_schedule;
    c->step_s = res.step_s; c->tokens_per_s = res.tokens_per_s; c->mfu = res.mfu; c->mem_gib = res.mem_peak_gib;
    c->bubble_s = res.ranks[0].bubble_s;
    for (k = 0; k < MGT_COLL_COUNT; k++) c->exposed_s += res.ranks[0].exposed_s[k];
    mgt_sim_result_free(&res);
}
static void *mgt__search_worker(void *arg) {
    mgt__search_jobs *q = (mgt__search_jobs *)arg;
    for (;;) {
        int i;
        pthread_mutex_lock(&q->mu);
        i = q->next++;
        pthread_mutex_unlock(&q->mu);
        if (i >= q->n) return NULL;
        mgt__search_run(&q->job[i], q->opt);
    }
}
/* queues cfg; 0 when out of memory */
static int mgt__search_queue(mgt__search_jobs *q, const mgt_config *cfg, int fallback) {
    if (q->n == q->cap) {
        int grown = q->cap ? 2 * q->cap : 64;
        mgt__search_job *g = (mgt__search_job *)MGT_REALLOC(q->job, sizeof *g * (size_t)grown);
        if (!g) return 0;
        q->job = g;
        q->cap = grown;
    }
    q->job[q->n].cfg = *cfg;
    q->job[q->n].fallback = fallback;
    q->job[q->n].rc = MGT_OK;
    q->job[q->n].why[0] = 0;
    q->n++;
    return 1;
}

MGTDEF mgt_result mgt_plan_search(const mgt_config *base, const mgt_sim_options *opt, int world, mgt_layout_search *out) {
    int tp, pp, zero, micro, k, sched, per_node, i, threads, started = 0;
    double t0 = mgt_now();
    mgt_result last_rc = MGT_OK;
    char last_why[320] = "";
    mgt__search_jobs q;
    pthread_t tid[64];
    if (!base || !opt || !out) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_plan_search: base, opt and out are required");
    memset(out, 0, sizeof *out);
    if (world < 1) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_plan_search: %d GPUs", world);
    if (base->parallel.cp > 1)
        return mgt__fail(MGT_ERROR_CONFIG, "the layout search does not choose context parallelism: [parallel] cp = %d; plan the layout with cp as it is "
                         "(mgt plan without --search), or search with cp = 1", base->parallel.cp);
    memset(&q, 0, sizeof q);
    per_node = opt->gpus_per_node > 0 ? opt->gpus_per_node : world;
    for (tp = 1; tp <= world && tp <= per_node; tp++) {
        if (world % tp || base->model.n_head % tp) continue;
        for (pp = 1; pp <= world / tp && pp <= base->model.n_layer && pp <= MGT_MAX_PP; pp++) {
            int dp = world / tp / pp;
            if ((world / tp) % pp || base->train.global_batch % dp) continue;
            for (zero = 0; zero <= (dp > 1 ? 3 : 0); zero++)
                for (micro = base->train.global_batch / dp; micro >= 1; micro--) {
                    if ((base->train.global_batch / dp) % micro) continue;
                    for (sched = 0; sched < (pp > 1 ? 2 : 1); sched++)
                        for (k = 0; k < 3; k++) { /* the least recompute that fits: none, selective, full */
                            mgt_config cfg = *base;
                            double mem;
                            /* only the least, unless base asks for recompute (an auto layout's pinned recompute): then each that fits */
                            int only = base->train.recompute == MGT_RECOMPUTE_NONE;
                            cfg.parallel.dp = dp; cfg.parallel.tp = tp; cfg.parallel.pp = pp; cfg.parallel.zero = zero;
                            cfg.train.micro_batch = micro; cfg.train.recompute = mgt__search_modes[k]; cfg.parallel.pp_schedule = sched;
                            cfg.parallel.layout = MGT_LAYOUT_MANUAL; /* a layout of its own, checked as such */
                            cfg.parallel.pp_virtual = 1; /* the search compares plain schedules */
                            mem = mgt__search_mem(&cfg, &opt->device);
                            if (mem < 0 || mem > opt->device.mem_gib) continue;
                            /* refused by the simulator, the next mode is tried (mgt__search_job.fallback) */
                            if (!mgt__search_queue(&q, &cfg, only ? k + 1 : 0)) { MGT_FREE(q.job); return mgt__fail(MGT_ERROR_MEMORY, "out of memory"); }
                            if (only) break; /* more recompute only pays where it lets a micro-batch fit */
                        }
                }
        }
    }
    /* simulated on a thread a core (the cpu device one at a time: it measures its ops on the cores),
       at most 4096 simulated ranks at once; the list is the same in any order of completion */
    threads = opt->device.host_sync ? 1 : mgt_cpu_count();
    if (threads > 64) threads = 64;
    if (threads > 4096 / world) threads = 4096 / world > 0 ? 4096 / world : 1;
    if (threads > q.n) threads = q.n;
    q.opt = opt;
    pthread_mutex_init(&q.mu, NULL);
    for (i = 1; i < threads; i++)
        if (pthread_create(&tid[i], NULL, mgt__search_worker, &q) == 0) started = i;
        else break;
    mgt__search_worker(&q);
    for (i = 1; i <= started; i++) pthread_join(tid[i], NULL);
    pthread_mutex_destroy(&q.mu);
    out->layouts = (mgt_layout_choice *)MGT_MALLOC(sizeof *out->layouts * (size_t)(q.n > 0 ? q.n : 1));
    if (!out->layouts) { MGT_FREE(q.job); return mgt__fail(MGT_ERROR_MEMORY, "out of memory"); }
    for (i = 0; i < q.n; i++) { /* in the order of the loops above */
        mgt__search_job *j = &q.job[i];
        if (j->rc != MGT_OK && j->fallback) { /* refused: the next recompute that fits, as the loops above would have */
            int m;
            for (m = j->fallback; m < 3 && j->rc != MGT_OK; m++) {
                double mem;
                j->cfg.train.recompute = mgt__search_modes[m];
                mem = mgt__search_mem(&j->cfg, &opt->device);
                if (mem < 0 || mem > opt->device.mem_gib) continue;
                out->failed++;
                last_rc = j->rc;
                mgt__strlcpy(last_why, j->why, sizeof last_why);
                mgt__search_run(j, opt);
            }
        }
        if (j->rc == MGT_OK) out->layouts[out->count++] = j->choice;
        else {
            out->failed++;
            last_rc = j->rc;
            mgt__strlcpy(last_why, j->why, sizeof last_why);
        }
    }
    if (last_rc != MGT_OK) mgt__fail(last_rc, "%s", last_why); /* mgt_last_error says why, for the last */
    MGT_FREE(q.job);
    if (out->count) qsort(out->layouts, (size_t)out->count, sizeof *out->layouts, mgt__search_faster);
    out->wall_s = mgt_now() - t0;
    return MGT_OK;
}
MGTDEF void mgt_layout_search_free(mgt_layout_search *search) {
    if (!search) return;
    MGT_FREE(search->layouts);
    memset(search, 0, sizeof *search);
}
#endif /* MGT_NO_SIM */
/* ==== end src/sim_search.c ==== */
/* ==== begin src/layout_auto.c ==== */
#line 1 "src/layout_auto.c"
/* src/layout_auto.c - a layout chosen for you: parallel.layout = auto resolved into the layout keys by
   the layout search, on this machine's GPUs or cores (mgt_config_resolve_layout); under MGT_NO_SIM a
   stand-in that refuses auto */

#ifndef MGT_NO_SIM
/* the simulator's model of a GPU that names itself `name` ("NVIDIA H100 80GB HBM3"), or NULL (as mgt
   doctor names them: a GH200 is priced as an H200) */
static const char *mgt__layout_gpu_model(const char *name) {
    char up[96];
    size_t i;
    for (i = 0; name[i] && i + 1 < sizeof up; i++) up[i] = (char)(name[i] >= 'a' && name[i] <= 'z' ? name[i] - 32 : name[i]);
    up[i] = 0;
    if (strstr(up, "A100")) return "a100";
    if (strstr(up, "H100")) return "h100";
    if (strstr(up, "H200")) return "h200";
    if (strstr(up, "B200")) return "b200";
    return NULL;
}

/* whether layout c keeps every pinned key of cfg (zero only counts where there is DP, the schedule
   where there is a pipeline: the search tries no others there) */
static int mgt__layout_keeps(const mgt_config *cfg, const int *pinned, const mgt_layout_choice *c) {
    return (!pinned[0] || c->dp == cfg->parallel.dp) && (!pinned[1] || c->tp == cfg->parallel.tp) && (!pinned[2] || c->pp == cfg->parallel.pp) &&
           (!pinned[3] || c->dp == 1 || c->zero == cfg->parallel.zero) && (!pinned[4] || c->pp == 1 || c->pp_schedule == cfg->parallel.pp_schedule) &&
           (!pinned[5] || c->micro_batch == cfg->train.micro_batch) && (!pinned[6] || c->recompute == cfg->train.recompute);
}

/* cfg with layout c (pinned keys keep their values), each chosen key marked as auto's choice */
static void mgt__layout_apply(mgt_config *cfg, const int *pinned, const mgt_layout_choice *c) {
    int v[MGT__LAYOUT_KEYS], k;
    v[0] = c->dp; v[1] = c->tp; v[2] = c->pp; v[3] = c->zero; v[4] = c->pp_schedule; v[5] = c->micro_batch; v[6] = c->recompute;
    for (k = 0; k < MGT__LAYOUT_KEYS; k++) {
        if (pinned[k]) continue;
        if (k == 0) cfg->parallel.dp = v[k];
        else if (k == 1) cfg->parallel.tp = v[k];
        else if (k == 2) cfg->parallel.pp = v[k];
        else if (k == 3) cfg->parallel.zero = v[k];
        else if (k == 4) cfg->parallel.pp_schedule = v[k];
        else if (k == 5) cfg->train.micro_batch = v[k];
        else cfg->train.recompute = v[k];
        cfg->line[mgt__find_key(mgt__layout_keys[k][0], mgt__layout_keys[k][1])] = MGT__FROM_LAYOUT;
    }
}

/* whether cfg with layout c fits this machine as mgt_run_create checks it (api: its GPUs; NULL: the CPU) */
static int mgt__layout_fits(const mgt_config *cfg, const int *pinned, const mgt_layout_choice *c, const mgt_cuda_api *api) {
    mgt_config t = *cfg;
    mgt_plan plan;
    mgt_fit fit;
    mgt__layout_apply(&t, pinned, c);
    t.parallel.layout = MGT_LAYOUT_MANUAL;
    if (mgt_config_validate(&t) != MGT_OK || mgt__plan_make(&t, &plan) != MGT_OK) return 0;
    mgt__fit_on(&plan, api, 0, &fit);
    return fit.fits || !fit.checked;
}

MGTDEF mgt_result mgt_config_resolve_layout(mgt_config *cfg, mgt_layout_auto *out) {
    const mgt_cuda_api *api = NULL;
    mgt_sim_options o;
    mgt_config base;
    int pinned[MGT__LAYOUT_KEYS], k, gpus = 0, threads, worlds[32], nworlds = 0, w, have = 0, fixed_world = 0, processes;
    double t0 = mgt_now();
    char why[900] = "", where[300];
    if (!cfg || !out) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_config_resolve_layout: cfg and out are required");
    memset(out, 0, sizeof *out);
    if (!mgt__layout_unresolved(cfg)) return MGT_OK; /* manual, or chosen already */
    MGT__TRY(mgt_config_resolve_init(cfg)); /* the model the layouts are of */
    MGT__TRY(mgt_config_validate(cfg));
    mgt__where(cfg, mgt__find_key("parallel", "layout"), where, sizeof where);
    if ((processes = mgt_mpi_launcher(NULL, 0)) > 1) /* each process would choose by itself, and on the CPU measure differently */
        return mgt__fail(MGT_ERROR_UNSUPPORTED, "%s: [parallel] layout = auto under an MPI launcher of %d processes: not supported; set the layout "
                         "(`mgt plan PRESET --gpu NAME --gpus N --search` lists the fastest)", where, processes);
    for (k = 0; k < MGT__LAYOUT_KEYS; k++) {
        pinned[k] = mgt__layout_pinned(cfg, mgt__find_key(mgt__layout_keys[k][0], mgt__layout_keys[k][1]));
        if (pinned[k]) {
            char value[32];
            mgt_config_value_string(cfg, mgt__find_key(mgt__layout_keys[k][0], mgt__layout_keys[k][1]), value, sizeof value);
            mgt__catf(out->pins, sizeof out->pins, "%s%s.%s = %s", out->pinned++ ? ", " : "", mgt__layout_keys[k][0], mgt__layout_keys[k][1], value);
        }
    }
    base = *cfg;
    base.parallel.layout = MGT_LAYOUT_MANUAL;
    mgt_sim_options_init(&o);
    /* where the ranks go: GPUs where the CUDA library finds them (device cuda or auto), else the CPU */
    if (cfg->parallel.device != MGT_DEVICE_CPU) {
        api = mgt_cuda_load(why, sizeof why);
        if (api && (api->probe(&gpus, why, sizeof why) != 0 || gpus < 1)) api = NULL;
        if (!api && cfg->parallel.device == MGT_DEVICE_CUDA)
            return mgt__fail(MGT_ERROR_UNSUPPORTED, "%s: [parallel] layout = auto with device = cuda, but no usable GPU: %s", where, why[0] ? why : "none found");
    }
    if (api) { /* every GPU visible, priced as the simulator's model of its name, with the least free memory of them */
        double least = -1;
        const char *model = NULL;
        mgt_gpu_info info;
        for (k = 0; k < gpus; k++) {
            memset(&info, 0, sizeof info);
            if (api->info(k, &info) != 0) return mgt__fail(MGT_ERROR_DEVICE, "%s: parallel.layout = auto: cannot read GPU %d", where, k);
            if (!(model = mgt__layout_gpu_model(info.name)))
                return mgt__fail(MGT_ERROR_UNSUPPORTED, "%s: [parallel] layout = auto: the step simulator has no model of GPU %d, %s (it knows A100, H100, H200 "
                                 "and B200); set the layout (parallel.layout = manual)", where, k, info.name);
            if (least < 0 || (double)info.memory_free < least) least = (double)info.memory_free;
        }
        MGT__TRY(mgt_sim_device_find(model, 0, &o.device));
        o.device.mem_gib = least / 1073741824.0;
        o.gpus_per_node = gpus;
        out->on_gpus = 1;
        out->devices = gpus;
    } else { /* ranks are threads sharing the cores: the cpu device runs each op of each shape to price it */
        threads = cfg->parallel.threads > 0 ? cfg->parallel.threads : mgt_cpu_count();
        MGT__TRY(mgt_sim_device_find("cpu", threads, &o.device));
        out->devices = threads;
    }
    mgt__strlcpy(out->device, o.device.name, sizeof out->device);
    mgt__strlcpy(out->title, o.device.title, sizeof out->title);
    if (pinned[0] && pinned[1] && pinned[2]) { /* the pins say how many ranks */
        fixed_world = mgt_config_ranks(cfg);
        if (api && fixed_world > gpus)
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] layout = auto with dp x tp x pp pinned to %d ranks (%s), on %d GPUs", where, fixed_world, out->pins, gpus);
        worlds[nworlds++] = fixed_world;
    } else if (api) /* all the GPUs; fewer only where no layout of all of them fits (the loop below stops at the first that has one) */
        for (w = gpus; w >= 1 && nworlds < 32; w--) worlds[nworlds++] = w;
    else { /* 1, 2, 4, ... ranks and the threads themselves: each rank at least a thread, the threads divided between them */
        for (w = 1; w <= out->devices && nworlds < 31; w *= 2) worlds[nworlds++] = w;
        if (worlds[nworlds - 1] != out->devices) worlds[nworlds++] = out->devices;
    }
    for (w = 0; w < nworlds; w++) {
        mgt_layout_search found;
        mgt_sim_options ow = o;
        int i;
        if (!api) { /* a rank's share of the machine's peak, as mgt plan --gpu cpu reckons MFU */
            for (i = 0; i < 3; i++) ow.device.tensor_tflops[i] /= worlds[w];
            ow.device.vector_tflops /= worlds[w];
            ow.device.transc_gps /= worlds[w];
            ow.gpus_per_node = worlds[w];
        }
        if (!api) mgt__sim_share(1); /* the CPU: an op shape measured once for the whole search, per rank count */
        {
            mgt_result res = mgt_plan_search(&base, &ow, worlds[w], &found);
            if (!api) mgt__sim_share(0);
            MGT__TRY(res);
        }
        out->simulated += found.count;
        for (i = 0; i < found.count; i++) { /* fastest first: the first two that keep the pins and fit as the run will check */
            const mgt_layout_choice *c = &found.layouts[i];
            if (!mgt__layout_keeps(cfg, pinned, c)) continue;
            out->eligible++;
            if (have == 2 && c->tokens_per_s <= out->runner_up.tokens_per_s) continue;
            if (!mgt__layout_fits(cfg, pinned, c, api)) continue;
            if (!have || c->tokens_per_s > out->chosen.tokens_per_s) {
                if (have) out->runner_up = out->chosen;
                out->chosen = *c;
                have = have ? 2 : 1;
            } else if (have == 1 || c->tokens_per_s > out->runner_up.tokens_per_s) {
                out->runner_up = *c;
                have = 2;
            }
        }
        mgt_layout_search_free(&found);
        if (api && have) break; /* GPUs: the most GPUs that hold a layout */
    }
    out->has_runner_up = have == 2;
    out->search_s = mgt_now() - t0;
    if (!have)
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] layout = auto: no layout of up to %d %s fits%s%s (%d simulated; global batch %d); %s",
                         where, out->devices, api ? o.device.title : "CPU threads", out->pinned ? " with " : "", out->pins, out->simulated,
                         cfg->train.global_batch, out->pinned ? "pin fewer layout keys, or train a smaller model" : "train a smaller model, or on a machine with more memory");
    mgt__layout_apply(cfg, pinned, &out->chosen);
    cfg->line[mgt__find_key("parallel", "layout")] = MGT__FROM_LAYOUT;
    out->searched = 1;
    return mgt_config_validate(cfg);
}
#else
MGTDEF mgt_result mgt_config_resolve_layout(mgt_config *cfg, mgt_layout_auto *out) {
    if (!cfg || !out) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_config_resolve_layout: cfg and out are required");
    memset(out, 0, sizeof *out);
    if (!mgt__layout_unresolved(cfg)) return MGT_OK;
    return mgt__fail(MGT_ERROR_UNSUPPORTED, "[parallel] layout = auto needs the step simulator, which this build leaves out (MGT_NO_SIM); set the layout");
}
#endif
/* ==== end src/layout_auto.c ==== */
/* ==== begin src/impl_end.h ==== */
#line 1 "src/impl_end.h"
/* src/impl_end.h - the implementation ends; the licence */

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
/* ==== end src/impl_end.h ==== */
