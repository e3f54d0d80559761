/* libFuzzer target: the token shard reader (llm.c .bin: 256 int32 header words, magic 20240520,
   version 1, the token count, then uint16 tokens; or magic 20240801, version 7, uint32 tokens).
   Input: the shard file itself. It is written to the target's temporary folder and read by path as
   a run reads it: mgt_shard_check with the byte, the GPT-2 and the largest vocabulary (2^24 ids,
   which 32-bit shards reach), then the data loader
   (mgt__loader_open with prefetching, the rows of three steps, validation rows) and, for a shard
   that checks, a tiny training run on it (mgt_run_create with it as [data] train and val, one
   mgt_run_step, one mgt_run_eval). The target checks that every token the loader hands out is one
   of the shard's and below vocab_size.
   Build: `ninja build/fuzz/shard`; run: see README (Tests, fuzzing). */
#define MGT_IMPLEMENTATION
#include "mgt.h"
#include "tests/fuzz/fuzz_util.h"

#define T 4 /* the loader's and the tiny run's seq_len */

static void fail(const char *what) { fprintf(stderr, "shard: %s\n", what); abort(); }

/* rows (rows, T+1) of the loader's steps are windows of the shard with ids below vocab */
static void check_loader(const char *path, int vocab, int rows, int prefetch, size_t n_checked) {
    mgt__loader ld;
    long long step;
    if (mgt__loader_open(&ld, path, "[data] train", vocab, T, rows, 7, prefetch) != MGT_OK) {
        if (n_checked >= T + 1) fail("the loader refuses a shard that checks and is long enough");
        return;
    }
    if (ld.nshards != 1 || ld.shards[0].n != n_checked) fail("the loader and mgt_shard_check disagree on the token count");
    for (step = 0; step < 3; step++) {
        const uint32_t *x = mgt__loader_get(&ld, step);
        int i, t;
        for (i = 0; i < rows; i++) {
            const uint32_t *row = x + (size_t)i * (T + 1);
            int found = 0;
            size_t off;
            for (t = 0; t <= T; t++) if (row[t] >= (uint32_t)vocab) fail("a token at or above vocab_size");
            for (off = 0; off + T + 1 <= ld.shards[0].n && !found; off++)
                for (found = 1, t = 0; t <= T && found; t++) found = row[t] == mgt__shard_token(&ld.shards[0], off + (size_t)t);
            if (!found) fail("a row that is no window of the shard");
        }
    }
    mgt__loader_close(&ld);
}

static void tiny_run(const char *path) {
    mgt_config cfg;
    mgt_run *run;
    char set[700];
    double val;
    mgt_config_init(&cfg);
    mgt_config_set(&cfg, "model.n_layer=1");
    mgt_config_set(&cfg, "model.n_head=1");
    mgt_config_set(&cfg, "model.d_model=8");
    mgt_config_set(&cfg, "model.seq_len=4");
    mgt_config_set(&cfg, "train.global_batch=2");
    mgt_config_set(&cfg, "train.micro_batch=1");
    mgt_config_set(&cfg, "train.eval_batches=1");
    mgt_config_set(&cfg, "parallel.threads=1");
    mgt_config_set(&cfg, "parallel.device=cpu");
    mgt_config_set(&cfg, "log.metrics=none");
    snprintf(set, sizeof set, "data.train=%s", path);
    mgt_config_set(&cfg, set);
    snprintf(set, sizeof set, "data.val=%s", path);
    mgt_config_set(&cfg, set);
    snprintf(set, sizeof set, "checkpoint.dir=%s", fuzz_dir);
    mgt_config_set(&cfg, set);
    if (mgt_run_create(&run, &cfg) != MGT_OK) return; /* shorter than seq_len + 1 */
    if (mgt_run_step(run) != MGT_OK) fail(mgt_last_error());
    if (mgt_run_eval(run, &val) != MGT_OK) fail(mgt_last_error());
    mgt_run_destroy(run);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    fuzz_tmpdir("shard");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[600];
    size_t n = 0, n2 = 0, n3 = 0;
    mgt_result r, r2, r3;
    fuzz_write("shard.bin", data, size, path, sizeof path);
    r = mgt_shard_check(path, 256, &n);
    r2 = mgt_shard_check(path, 50257, &n2);
    r3 = mgt_shard_check(path, 16777216, &n3);
    if (r == MGT_OK && (r2 != MGT_OK || n2 != n)) fail("a shard that checks for 256 ids does not for 50257");
    if (r2 == MGT_OK && (r3 != MGT_OK || n3 != n2)) fail("a shard that checks for 50257 ids does not for 2^24");
    if (r3 == MGT_OK) {
        int wide = size >= 8 && data[0] == 0xA1 && data[1] == 0xD9 && data[2] == 0x34 && data[3] == 0x01; /* 20240801, little-endian */
        size_t need = 1024 + (wide ? 4 : 2) * n3;
        if (size < need) fail("a shard shorter than its header says checks");
    }
    if (r3 == MGT_OK) check_loader(path, 16777216, 2, 0, n3);
    if (r2 == MGT_OK) check_loader(path, 50257, 3, 1, n2);
    if (r == MGT_OK) {
        check_loader(path, 256, 2, 0, n);
        tiny_run(path);
    }
    return 0;
}
