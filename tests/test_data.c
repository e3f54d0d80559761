/* test_data.c - data.train of many shards: a comma-separated list of files and glob patterns, the
   files of each pattern in name order; a sequence never crosses two shards; each shard is drawn in
   proportion to the sequence starts it offers; the draw is a pure function of (seed, step, index),
   and with one shard the positions are those of the one-shard formula mgt always used (so runs
   and their resumes keep their data order). Errors name the pattern or the shard. */
#define MGT_IMPLEMENTATION
#include "mgt.h"

#include <stdlib.h> /* defines: mkdtemp */
#include <unistd.h> /* defines: unlink, rmdir */

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

static char dir[] = "/tmp/mgt_test_data.XXXXXX";

/* an llm.c shard of n tokens, every one `token` */
static void write_shard(const char *name, int n, int token) {
    char path[256];
    int header[256] = {0}, i;
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "wb");
    header[0] = 20240520;
    header[1] = 1;
    header[2] = n;
    fwrite(header, sizeof header, 1, f);
    for (i = 0; i < n; i++) { uint16_t t = (uint16_t)token; fwrite(&t, 2, 1, f); }
    fclose(f);
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
        const uint16_t *seq = mgt__loader_sequence(&ld, MGT__STREAM_TRAIN, (uint64_t)(i / 8), (uint64_t)(i % 8));
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
        const uint16_t *a = mgt__loader_sequence(&ld, MGT__STREAM_TRAIN, 7, 3), *b = mgt__loader_sequence(&ld, MGT__STREAM_TRAIN, 7, 3);
        CHECK(a == b, "the same (seed, step, index) gives another sequence");
    }
    mgt__loader_close(&ld);

    /* one shard: the positions of the one-shard formula, hash(seed ^ stream, step, i) mod (n - T) */
    snprintf(spec, sizeof spec, "%s/s_000002.bin", dir);
    CHECK(mgt__loader_open(&ld, spec, "[data] train", 256, T, 1, 1337, 0) == MGT_OK, "open one: %s", mgt_last_error());
    for (i = 0; i < 100; i++) {
        size_t want = (size_t)(mgt__hash3(1337 ^ MGT__STREAM_TRAIN, (uint64_t)i, 5) % (uint64_t)(300 - T));
        CHECK(mgt__loader_sequence(&ld, MGT__STREAM_TRAIN, (uint64_t)i, 5) == ld.shards[0].tokens + want, "one shard, step %d: another position", i);
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

    {
        const char *names[] = {"s_000001.bin", "s_000002.bin", "s_000003.bin", "short.bin", "sh[1].bin"};
        char path[256];
        for (i = 0; i < 5; i++) { snprintf(path, sizeof path, "%s/%s", dir, names[i]); unlink(path); }
        rmdir(dir);
    }
    if (failures) { printf("%d FAILED\n", failures); return 1; }
    printf("data: ok\n");
    return 0;
}
