/* libFuzzer target: the checkpoint loader, through sampling and resume.
   Input: a safetensors file (8-byte header length, JSON header with the metadata and the tensors,
   then the data), as mgt_run_save writes it. Before it is written to the target's temporary folder,
   a `"checksum":"<16 hex>"` in its header is replaced with the checksum of the file, so mutated
   weights get past the checksum to the code that uses them (the mismatch path is one comparison;
   an input can still drop the checksum or spell it otherwise). Then, as `mgt sample` and
   `mgt train --resume` do:
   - mgt_checkpoint_config: the stored preset;
   - mgt_run_open on it (sampling: the checkpoint's own preset, one rank, one thread) and
     mgt_run_generate of three tokens, each of which must be below vocab_size. A preset whose model
     would take more than about 64 MiB is not opened: the target looks for bugs, not for the
     allocator's limit (a checkpoint asks for whatever model its preset names);
   - mgt_run_resume into a tiny run (n_layer 1, d_model 8, n_head 1, seq_len 4, vocab 256: the
     model the seed checkpoints were saved from) and one step on fixed tokens.
   Seeds: tests/fuzz/corpus/checkpoint, real checkpoints of that tiny model (tests/fuzz/make_seeds.c).
   Build: `ninja build/fuzz/checkpoint`; run: see README (Tests, fuzzing). */
#define MGT_IMPLEMENTATION
#include "mgt.h"
#include "tests/fuzz/fuzz_util.h"

static void fail(const char *what) { fprintf(stderr, "checkpoint: %s\n", what); abort(); }

/* the tiny model of the seeds; the checkpoint folder is the target's own */
static void tiny_config(mgt_config *cfg) {
    char set[400];
    mgt_config_init(cfg);
    mgt_config_set(cfg, "model.n_layer=1");
    mgt_config_set(cfg, "model.n_head=1");
    mgt_config_set(cfg, "model.d_model=8");
    mgt_config_set(cfg, "model.seq_len=4");
    mgt_config_set(cfg, "train.global_batch=1");
    mgt_config_set(cfg, "train.micro_batch=1");
    mgt_config_set(cfg, "parallel.threads=1");
    mgt_config_set(cfg, "parallel.device=cpu");
    mgt_config_set(cfg, "data.train=");
    mgt_config_set(cfg, "data.val=");
    mgt_config_set(cfg, "log.metrics=none");
    snprintf(set, sizeof set, "checkpoint.dir=%s", fuzz_dir);
    mgt_config_set(cfg, set);
}

/* the checksum a `"checksum":"` in the header claims, made true for the file as it is (the whole
   file, the 16 digits read as '0', as mgt__checkpoint_open computes it) */
static void fix_checksum(uint8_t *buf, size_t size) {
    static const char key[] = "\"checksum\":\"";
    uint64_t hlen;
    size_t i, k = sizeof key - 1;
    if (size < 8) return;
    memcpy(&hlen, buf, 8);
    if (hlen > size - 8) return;
    for (i = 8; i + k + 16 <= 8 + hlen; i++)
        if (!memcmp(buf + i, key, k)) {
            mgt__hash sum;
            char text[17];
            mgt__hash_init(&sum);
            mgt__hash_update(&sum, buf, i + k);
            mgt__hash_update(&sum, mgt__checksum_zeros, 16);
            mgt__hash_update(&sum, buf + i + k + 16, size - i - k - 16);
            snprintf(text, sizeof text, "%016llx", (unsigned long long)mgt__hash_final(&sum));
            memcpy(buf + i + k, text, 16);
            return;
        }
}

/* floats of the model a preset names, roughly (parameters, and activations of one sequence) */
static double model_floats(const mgt_config *c) {
    double C = c->model.d_model, L = c->model.n_layer, V = c->model.vocab_size + 128.0 * c->parallel.tp, T = c->model.seq_len;
    double B = c->train.micro_batch, H = c->model.n_head, F = c->model.d_ff > 4 * C ? c->model.d_ff - 4 * C : 0; /* a wider MLP than GPT-2's */
    return V * C + T * C + L * (12 * C * C + 3 * C * F + 16 * C) + B * T * (L * (16 * C + 3 * F + H * T) + V);
}

static void sample(const char *path) {
    mgt_config cfg;
    mgt_run *run;
    int prompt[2] = {0, 1}, out[3], n, i;
    if (mgt_checkpoint_config(path, &cfg) != MGT_OK) return;
    if (model_floats(&cfg) > 16e6) return;
    if (mgt_run_open(&run, path, 1) != MGT_OK) return;
    n = mgt_run_generate(run, prompt, 2, out, 3, 1.0, 5, 42);
    if (n != 3 && n != -1) fail("mgt_run_generate returned neither the count nor -1");
    for (i = 0; i < n; i++) if (out[i] < 0 || out[i] >= cfg.model.vocab_size) fail("a sampled token outside the vocabulary");
    n = mgt_run_generate(run, prompt, 1, out, 2, 0.0, 0, 43); /* greedy */
    for (i = 0; i < n; i++) if (out[i] < 0 || out[i] >= cfg.model.vocab_size) fail("a greedy token outside the vocabulary");
    mgt_run_destroy(run);
}

static void resume(const char *path) {
    mgt_config cfg;
    mgt_run *run;
    mgt_stats st;
    uint32_t rows[5] = {72, 105, 33, 10, 72};
    tiny_config(&cfg);
    if (mgt_run_create(&run, &cfg) != MGT_OK) fail(mgt_last_error());
    if (mgt_run_resume(run, path) == MGT_OK) {
        mgt_result r = mgt_run_step_tokens(run, rows);
        if (r != MGT_OK && r != MGT_ERROR_NUMERIC) fail(mgt_last_error()); /* a checkpoint of NaNs may stop it */
        mgt_run_stats(run, &st);
    }
    mgt_run_destroy(run);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    fuzz_tmpdir("checkpoint");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[600];
    uint8_t *copy;
    if (size > 1 << 20) return -1;
    copy = (uint8_t *)malloc(size ? size : 1);
    if (size) memcpy(copy, data, size);
    fix_checksum(copy, size);
    fuzz_write("step_00000001.safetensors", copy, size, path, sizeof path);
    free(copy);
    sample(path);
    resume(path);
    return 0;
}
