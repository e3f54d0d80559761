/* What the training tests share: a check that counts failures, a generated corpus, a temporary
   folder. Include after mgt.h with its implementation; it brings the project's shard writer
   (data/prepare.h, and data/tokenizer.h without the hf tokenizer) with theirs. */
#define MGT_TOKENIZER_IMPLEMENTATION
#define MGT_PREPARE_IMPLEMENTATION
#include "data/prepare.h" /* defines: mgt_shard_write */
#include "worst.h"        /* defines: worse_of */

static int failures;

static void check(int ok, const char *fmt, ...) MGT__PRINTF(2, 3);
static void check(int ok, const char *fmt, ...) {
    va_list ap;
    printf("%-4s ", ok ? "ok" : "FAIL");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    if (!ok) failures++;
}

/* what a reader on another thread sees (mgt_run_snapshot) from the start: the first hmax
   published steps, rmax ranks' latest statistics, the first emax events (NULL with 0: none of that
   kind); .history_n, .ranks_n and .events_n say how many. Inline: a test that does not use it
   is not warned of it. */
static inline mgt_snapshot published(const mgt_run *run, mgt_stats *h, int hmax, mgt_rank_stats *rs, int rmax, mgt_event *ev, int emax) {
    mgt_snapshot s;
    memset(&s, 0, sizeof s);
    s.history = h, s.history_max = hmax;
    s.ranks = rs, s.ranks_max = rmax;
    s.events = ev, s.events_max = emax;
    mgt_run_snapshot(run, &s);
    return s;
}

/* a shard of n pseudo-English bytes drawn from `seed`: learnable, and long enough for random windows */
static void write_corpus(const char *path, size_t n, uint64_t seed) {
    static const char *words[] = {"the ", "cat ", "sat ", "on ", "a ", "mat ", "and ", "dog ", "ran ", "far ", "away. ", "then ", "it ", "slept.\n"};
    uint32_t *tok = (uint32_t *)malloc(n * sizeof(uint32_t));
    size_t i = 0;
    uint64_t k = 0;
    char err[700];
    while (i < n) {
        const char *w = words[mgt_hash3(seed, seed + 1, k++) % 14];
        while (*w && i < n) tok[i++] = (uint32_t)(unsigned char)*w++;
    }
    if (mgt_shard_write(path, tok, n, 2, err, sizeof err)) { printf("FAIL: %s\n", err); exit(1); }
    free(tok);
}

/* a fresh folder /tmp/mgt_<name>_XXXXXX into dir, with a corpus of n bytes in dir/corpus.bin */
static void make_workdir(char *dir, size_t cap, const char *name, size_t n, uint64_t seed) {
    char file[600];
    setvbuf(stdout, NULL, _IOLBF, 0);
    snprintf(dir, cap, "/tmp/mgt_%s_XXXXXX", name);
    if (!mkdtemp(dir)) { perror("mkdtemp"); exit(1); }
    snprintf(file, sizeof file, "%s/corpus.bin", dir);
    write_corpus(file, n, seed);
}

static int finish(const char *dir, const char *name) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) printf("note: could not remove %s\n", dir);
    printf("%s: %s\n", name, failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
