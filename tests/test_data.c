/* test_data.c - data.train of many shards: a comma-separated list of files and glob patterns, the
   files of each pattern in name order; a sequence never crosses two shards; each shard is drawn in
   proportion to the sequence starts it offers; the draw is a pure function of (seed, step, index),
   and with one shard the positions are those of the one-shard formula mgt always used (so runs
   and their resumes keep their data order). Both of llm.c's shard formats are read: 16-bit tokens
   and 32-bit (Llama 3's, for vocabularies over 65536), in one list too; a model of more than 65536
   ids trains, validates and resumes on 32-bit shards. Errors name the pattern or the shard and
   what is wrong (magic, version, truncation, a token beyond the vocabulary). The shards are
   written by the project's writer, data/prepare.h's mgt_shard_write. */
#define _POSIX_C_SOURCE 200809L
#define MGT_IMPLEMENTATION
#include "mgt.h"
#define MGT_TOKENIZER_IMPLEMENTATION
#define MGT_PREPARE_IMPLEMENTATION
#include "data/prepare.h" /* defines: mgt_shard_write */

#include <stdlib.h> /* defines: mkdtemp, system */
#include <unistd.h> /* defines: truncate */

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

static char dir[] = "/tmp/mgt_test_data.XXXXXX";

/* an llm.c shard of n `width`-byte tokens (2 or 4), token k = first + k % period */
static void write_tokens(const char *name, int n, uint32_t first, int period, int width) {
    char path[256], err[512];
    uint32_t *tok = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)(n ? n : 1));
    int i;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    for (i = 0; i < n; i++) tok[i] = first + (uint32_t)(i % period);
    if (mgt_shard_write(path, tok, (size_t)n, width, err, sizeof err)) { printf("FAIL: %s\n", err); exit(1); }
    free(tok);
}
static void write_shard(const char *name, int n, int token) { write_tokens(name, n, (uint32_t)token, 1, 2); }

/* overwrites 4 bytes of a file at `at` with v (little-endian), or truncates it there (cut) */
static void damage(const char *name, long at, uint32_t v, int cut) {
    char path[256];
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (cut) { CHECK(!truncate(path, at), "truncate %s", path); return; }
    f = fopen(path, "r+b");
    CHECK(f && !fseek(f, at, SEEK_SET) && fwrite(b, 1, 4, f) == 4 && !fclose(f), "damage %s", path);
}

/* 32-bit shards: read beside 16-bit ones, ids over 65535 kept whole, and every way a header or a
   token can be wrong refused with the file's name and what is wrong */
static void wide_shards(int T) {
    char spec[512];
    mgt__loader ld;
    uint32_t seq[17];
    int i, ok = 1;
    write_tokens("w_16.bin", 64, 100, 7, 2);
    write_tokens("w_32.bin", 64, 65530, 11, 4); /* ids 65530..65540: across the 16-bit limit */
    snprintf(spec, sizeof spec, "%s/w_*.bin", dir);
    CHECK(mgt__loader_open(&ld, spec, "[data] train", 70000, T, 4, 5, 0) == MGT_OK, "16- and 32-bit shards together: %s", mgt_last_error());
    CHECK(ld.nshards == 2 && ld.shards[0].width == 2 && ld.shards[1].width == 4 && ld.shards[1].n == 64, "widths %d %d",
          ld.nshards == 2 ? ld.shards[0].width : 0, ld.nshards == 2 ? ld.shards[1].width : 0);
    for (i = 0; i < 400 && ld.nshards == 2; i++) { /* each sequence is a window of its shard's pattern */
        size_t off, t;
        const mgt__shard *sh = mgt__loader_where(&ld, MGT__STREAM_TRAIN, (uint64_t)i, 0, &off);
        mgt__loader_sequence(&ld, MGT__STREAM_TRAIN, (uint64_t)i, 0, seq);
        for (t = 0; t <= (size_t)T; t++)
            ok &= seq[t] == (sh == &ld.shards[1] ? 65530u + (uint32_t)((off + t) % 11) : 100u + (uint32_t)((off + t) % 7));
    }
    CHECK(ok, "a sequence is not its shard's tokens");
    mgt__loader_close(&ld);

    snprintf(spec, sizeof spec, "%s/w_32.bin", dir);
    CHECK(mgt_data_check(spec, "[data] train", 65536, T, NULL, NULL) == MGT_ERROR_DATA && strstr(mgt_last_error(), "w_32.bin: token id 65540") &&
          strstr(mgt_last_error(), "model.vocab_size = 65536"), "a token beyond the vocabulary: %s", mgt_last_error());
    printf("refused: %s\n", mgt_last_error());

    write_tokens("bad_magic.bin", 64, 1, 5, 4);
    damage("bad_magic.bin", 0, 20240521, 0);
    snprintf(spec, sizeof spec, "%s/bad_magic.bin", dir);
    CHECK(mgt_data_check(spec, "[data] train", 256, T, NULL, NULL) == MGT_ERROR_DATA && strstr(mgt_last_error(), "bad_magic.bin: not a token shard (magic 20240521"),
          "wrong magic: %s", mgt_last_error());
    printf("refused: %s\n", mgt_last_error());
    write_tokens("bad_version.bin", 64, 1, 5, 4);
    damage("bad_version.bin", 4, 1, 0); /* the 32-bit magic with the 16-bit version: neither format */
    snprintf(spec, sizeof spec, "%s/bad_version.bin", dir);
    CHECK(mgt_data_check(spec, "[data] train", 256, T, NULL, NULL) == MGT_ERROR_DATA &&
          strstr(mgt_last_error(), "bad_version.bin: not a token shard (magic 20240801 version 1"), "wrong version: %s", mgt_last_error());
    write_tokens("cut.bin", 64, 1, 5, 4);
    damage("cut.bin", 1024 + 4 * 64 - 2, 0, 1); /* 62.5 tokens: the count read as 16-bit would fit */
    snprintf(spec, sizeof spec, "%s/cut.bin", dir);
    CHECK(mgt_data_check(spec, "[data] train", 256, T, NULL, NULL) == MGT_ERROR_DATA &&
          strstr(mgt_last_error(), "cut.bin: truncated shard: the header promises 64 32-bit tokens (1280 bytes) but the file has 1278 bytes"),
          "truncated: %s", mgt_last_error());
    printf("refused: %s\n", mgt_last_error());
    write_tokens("negative.bin", 64, 1, 5, 2);
    damage("negative.bin", 8, 0xFFFFFFF0u, 0);
    snprintf(spec, sizeof spec, "%s/negative.bin", dir);
    CHECK(mgt_data_check(spec, "[data] train", 256, T, NULL, NULL) == MGT_ERROR_DATA && strstr(mgt_last_error(), "negative.bin: the header's token count -16"),
          "a negative count: %s", mgt_last_error());
}

/* a model of 65600 ids on 32-bit shards whose ids are all over 65535: it learns (a cycle of five
   ids), validates, and a resume continues with the same data positions (the same losses) */
static void wide_training(void) {
    mgt_config cfg;
    mgt_run *run;
    mgt_stats st;
    char train[300], valid[300], ck[300], saved[600];
    double first = 0, val = 0, cont[3], resumed[3];
    int i;
    write_tokens("big_train.bin", 4096, 65590, 5, 4);
    write_tokens("big_val.bin", 256, 65590, 5, 4);
    mgt_config_init(&cfg);
    snprintf(train, sizeof train, "data.train=%s/big_train.bin", dir);
    snprintf(valid, sizeof valid, "data.val=%s/big_val.bin", dir);
    snprintf(ck, sizeof ck, "checkpoint.dir=%s/ck", dir);
    {
        const char *sets[] = {"model.vocab_size=65600", "model.n_layer=1", "model.n_head=2", "model.d_model=16", "model.seq_len=8",
                              "train.global_batch=4", "train.micro_batch=4", "train.steps=80", "train.warmup=5", "train.lr=2e-2", "train.min_lr=2e-3",
                              "train.eval_batches=1", "parallel.threads=1", "parallel.device=cpu", "log.metrics=none", train, valid, ck};
        for (i = 0; i < (int)(sizeof sets / sizeof *sets); i++) CHECK(mgt_config_set(&cfg, sets[i]) == MGT_OK, "%s: %s", sets[i], mgt_last_error());
    }
    if (mgt_run_create(&run, &cfg) != MGT_OK) { CHECK(0, "a run of 65600 ids: %s", mgt_last_error()); return; }
    for (i = 0; i < 80; i++) {
        CHECK(mgt_run_step(run) == MGT_OK, "step %d: %s", i, mgt_last_error());
        mgt_run_stats(run, &st);
        if (i == 0) first = st.loss;
        if (i == 76) CHECK(mgt_run_save(run, saved, sizeof saved) == MGT_OK, "save: %s", mgt_last_error());
        if (i >= 77) cont[i - 77] = st.loss;
    }
    CHECK(mgt_run_eval(run, &val) == MGT_OK, "eval: %s", mgt_last_error());
    { /* greedy continuation: the ids themselves, not their low 16 bits, went in and came out */
        int prompt[1] = {65592}, out[4];
        CHECK(mgt_run_generate(run, prompt, 1, out, 4, 0.0, 0, 1) == 4 && out[0] == 65593 && out[1] == 65594 && out[2] == 65590 && out[3] == 65591,
              "greedy after 65592: %d %d %d %d, want 65593 65594 65590 65591", out[0], out[1], out[2], out[3]);
    }
    mgt_run_destroy(run);
    /* at the start about ln(65600) = 11.09 (every id as likely); the cycle is learnt: the next id
       is certain once seen, so the loss goes well below ln 5 = 1.61, what knowing only which five
       ids occur gives (0.5: far below that, well above the 0.074 measured) */
    CHECK(fabs(first - log(65600.0)) < 0.5 && cont[2] < 0.5 && val < 0.5, "ids over 65535: loss %.3f at step 1, %.3f at step 80, val %.3f", first,
          cont[2], val);
    printf("ids 65590..65594 (32-bit shard): loss %.3f at step 1 (ln 65600 = %.3f), %.3f at step 80, val %.3f\n", first, log(65600.0), cont[2], val);
    if (mgt_run_create(&run, &cfg) != MGT_OK) { CHECK(0, "second run: %s", mgt_last_error()); return; }
    CHECK(mgt_run_resume(run, saved) == MGT_OK && mgt_run_claim(run, 1) == MGT_OK, "resume %s: %s", saved, mgt_last_error());
    for (i = 0; i < 3; i++) {
        CHECK(mgt_run_step(run) == MGT_OK, "resumed step %d: %s", i, mgt_last_error());
        mgt_run_stats(run, &st);
        resumed[i] = st.loss;
    }
    mgt_run_destroy(run);
    CHECK(resumed[0] == cont[0] && resumed[1] == cont[1] && resumed[2] == cont[2], "resumed losses %.9g %.9g %.9g, continuous %.9g %.9g %.9g", resumed[0],
          resumed[1], resumed[2], cont[0], cont[1], cont[2]);
}

int main(void) {
    char spec[512];
    mgt__loader ld;
    const int T = 16, draws = 20000;
    int counts[4] = {0, 0, 0, 0}, i, k, crossed = 0, n_files = 0;
    size_t n_tokens = 0;
    if (!mkdtemp(dir)) { printf("mkdtemp failed\n"); return 1; }
    write_shard("s_000002.bin", 300, 2); /* written out of order: the glob sorts by name */
    write_shard("s_000001.bin", 100, 1);
    write_shard("s_000003.bin", 50, 3);
    write_shard("short.bin", 10, 3);

    /* a glob: three shards in name order, starts 84 + 284 + 34 */
    snprintf(spec, sizeof spec, "%s/s_*.bin", dir);
    CHECK(mgt__loader_open(&ld, spec, "[data] train", 256, T, 1, 1337, 0) == MGT_OK, "open %s: %s", spec, mgt_last_error());
    CHECK(ld.nshards == 3 && ld.first_start[3] == 84 + 284 + 34, "%d shards, %zu starts", ld.nshards, ld.nshards == 3 ? ld.first_start[3] : 0);
    CHECK(ld.shards[0].n == 100 && ld.shards[1].n == 300 && ld.shards[2].n == 50, "name order");
    for (i = 0; i < draws; i++) {
        uint32_t seq[17];
        mgt__loader_sequence(&ld, MGT__STREAM_TRAIN, (uint64_t)(i / 8), (uint64_t)(i % 8), seq);
        for (k = 1; k <= T; k++) crossed += seq[k] != seq[0];
        if (seq[0] >= 1 && seq[0] <= 3) counts[seq[0]]++;
    }
    CHECK(crossed == 0, "%d tokens of a sequence came from another shard", crossed);
    for (k = 1; k <= 3; k++) { /* binomial: within 5 standard deviations of draws x starts_k / all starts */
        double p = (k == 1 ? 84.0 : k == 2 ? 284.0 : 34.0) / 402.0, want = draws * p, sd = sqrt(draws * p * (1 - p));
        CHECK(fabs(counts[k] - want) < 5 * sd, "shard %d drawn %d times, want %.0f +- %.0f", k, counts[k], want, 5 * sd);
        printf("shard %d: %d of %d sequences (expected %.0f)\n", k, counts[k], draws, want);
    }
    {
        size_t a, b;
        CHECK(mgt__loader_where(&ld, MGT__STREAM_TRAIN, 7, 3, &a) == mgt__loader_where(&ld, MGT__STREAM_TRAIN, 7, 3, &b) && a == b,
              "the same (seed, step, index) gives another sequence");
    }
    mgt__loader_close(&ld);

    /* one shard: the positions of the one-shard formula, hash(seed ^ stream, step, i) mod (n - T) */
    snprintf(spec, sizeof spec, "%s/s_000002.bin", dir);
    CHECK(mgt__loader_open(&ld, spec, "[data] train", 256, T, 1, 1337, 0) == MGT_OK, "open one: %s", mgt_last_error());
    for (i = 0; i < 100; i++) {
        size_t want = (size_t)(mgt_hash3(1337 ^ MGT__STREAM_TRAIN, (uint64_t)i, 5) % (uint64_t)(300 - T));
        size_t off;
        CHECK(mgt__loader_where(&ld, MGT__STREAM_TRAIN, (uint64_t)i, 5, &off) == &ld.shards[0] && off == want, "one shard, step %d: another position", i);
    }
    mgt__loader_close(&ld);

    /* a list, with spaces: the order given */
    snprintf(spec, sizeof spec, "%s/s_000003.bin , %s/s_00000[12].bin", dir, dir);
    CHECK(mgt_data_check(spec, NULL, 256, T, &n_files, &n_tokens) == MGT_OK && n_files == 3 && n_tokens == 450, "list: %d files, %zu tokens: %s", n_files,
          n_tokens, mgt_last_error());
    CHECK(mgt__loader_open(&ld, spec, "[data] train", 256, T, 1, 1, 0) == MGT_OK && ld.shards[0].n == 50 && ld.shards[2].n == 300, "list order");
    mgt__loader_close(&ld);

    /* a file named twice counts once; a file whose name has glob characters is itself */
    snprintf(spec, sizeof spec, "%s/s_000001.bin,%s/s_00000[1].bin,%s/s_*.bin", dir, dir, dir);
    CHECK(mgt_data_check(spec, NULL, 256, T, &n_files, &n_tokens) == MGT_OK && n_files == 3 && n_tokens == 450, "duplicates: %d files, %zu tokens", n_files,
          n_tokens);
    write_shard("sh[1].bin", 40, 1);
    snprintf(spec, sizeof spec, "%s/sh[1].bin", dir);
    CHECK(mgt_data_check(spec, NULL, 256, T, &n_files, &n_tokens) == MGT_OK && n_files == 1 && n_tokens == 40, "sh[1].bin: %s", mgt_last_error());
    {
        char huge[2000];
        memset(huge, 'a', sizeof huge - 1);
        huge[sizeof huge - 1] = 0;
        CHECK(mgt_data_check(huge, NULL, 256, T, NULL, NULL) == MGT_ERROR_DATA && strstr(mgt_last_error(), "longer than"), "a 2000-byte item: %s",
              mgt_last_error());
    }

    /* errors name what is wrong */
    snprintf(spec, sizeof spec, "%s/nothing_*.bin", dir);
    CHECK(mgt_data_check(spec, NULL, 256, T, NULL, NULL) == MGT_ERROR_DATA && strstr(mgt_last_error(), "matches no file") &&
          strstr(mgt_last_error(), "nothing_*.bin"), "no match: %s", mgt_last_error());
    snprintf(spec, sizeof spec, "%s/s_*.bin,%s/short.bin", dir, dir);
    CHECK(mgt_data_check(spec, NULL, 256, T, NULL, NULL) == MGT_ERROR_CONFIG && strstr(mgt_last_error(), "short.bin has 10 tokens"), "short: %s", mgt_last_error());
    snprintf(spec, sizeof spec, "%s/missing.bin", dir);
    CHECK(mgt_data_check(spec, NULL, 256, T, NULL, NULL) == MGT_ERROR_DATA && strstr(mgt_last_error(), "missing.bin: cannot open"), "missing: %s", mgt_last_error());
    CHECK(mgt_data_check(" , ", NULL, 256, T, NULL, NULL) == MGT_ERROR_DATA, "an empty list is refused");

    wide_shards(T);
    wide_training();
    {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        CHECK(system(cmd) == 0, "%s", cmd);
    }
    if (failures) { printf("%d FAILED\n", failures); return 1; }
    printf("data: ok\n");
    return 0;
}
