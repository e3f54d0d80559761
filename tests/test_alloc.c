/* tests/test_alloc.c - every allocation of mgt.h goes through MGT_MALLOC, MGT_REALLOC and MGT_FREE
   (issue 24): this program defines them as counting hooks and runs what a user does (train a
   layout of 8 ranks with ZeRO-3 and a checkpoint, resume it elsewhere, sample, export to Hugging
   Face's format and start a run from the export, simulate a step and search layouts). Each block
   carries a header (a magic word and its size), so MGT_FREE of memory the hooks did not give (a
   raw malloc's) or libc's free of the hooks' memory (a leak here) is seen: at the end nothing may
   be live, and the hooks must have been used. And it reads src/: no part calls malloc, calloc,
   realloc, free or strdup itself but where the line says why (libc's own memory). */
#include <stdio.h>  /* defines: printf */
#include <stdlib.h> /* defines: malloc, realloc, free, abort */
#include <string.h> /* defines: memcpy */
#include <stdint.h> /* defines: uint64_t */
#include <dirent.h> /* defines: opendir, readdir */

static void *hook_malloc(size_t bytes);
static void *hook_realloc(void *p, size_t bytes);
static void hook_free(void *p);
#define MGT_MALLOC(size) hook_malloc(size)
#define MGT_REALLOC(ptr, size) hook_realloc(ptr, size)
#define MGT_FREE(ptr) hook_free(ptr)
#define MGT_IMPLEMENTATION
#include "mgt.h"
#include "train_util.h"

#define MAGIC 0x6d67742d616c6c63ull /* "mgt-allc" */
#define HEADER 16                   /* keeps the block 16-byte aligned, as malloc's */
static long long live, total, live_bytes, peak_bytes, foreign;

static void count(long long blocks, long long bytes) {
    __atomic_add_fetch(&live, blocks, __ATOMIC_RELAXED);
    if (blocks > 0) __atomic_add_fetch(&total, blocks, __ATOMIC_RELAXED);
    long long now = __atomic_add_fetch(&live_bytes, bytes, __ATOMIC_RELAXED), was = __atomic_load_n(&peak_bytes, __ATOMIC_RELAXED);
    while (now > was && !__atomic_compare_exchange_n(&peak_bytes, &was, now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
}
static void *hook_malloc(size_t bytes) {
    unsigned char *b = (unsigned char *)malloc(bytes + HEADER);
    uint64_t h[2] = {MAGIC, (uint64_t)bytes};
    if (!b) return NULL;
    memcpy(b, h, sizeof h);
    count(1, (long long)bytes);
    return b + HEADER;
}
static int ours(void *p, uint64_t *bytes) { /* the block's header, or a count of a foreign pointer */
    uint64_t h[2];
    memcpy(h, (unsigned char *)p - HEADER, sizeof h);
    if (h[0] != MAGIC) {
        __atomic_add_fetch(&foreign, 1, __ATOMIC_RELAXED);
        fprintf(stderr, "FAIL MGT_FREE or MGT_REALLOC of %p, which MGT_MALLOC did not give\n", p);
        return 0;
    }
    *bytes = h[1];
    return 1;
}
static void hook_free(void *p) {
    uint64_t bytes, dead = 0;
    if (!p || !ours(p, &bytes)) return; /* a foreign block is left alone (freeing it through the header would corrupt) */
    memcpy((unsigned char *)p - HEADER, &dead, sizeof dead);
    count(-1, -(long long)bytes);
    free((unsigned char *)p - HEADER);
}
static void *hook_realloc(void *p, size_t bytes) {
    uint64_t old, h[2] = {MAGIC, (uint64_t)bytes};
    unsigned char *b;
    if (!p) return hook_malloc(bytes);
    if (!ours(p, &old)) return NULL;
    b = (unsigned char *)realloc((unsigned char *)p - HEADER, bytes + HEADER);
    if (!b) return NULL;
    memcpy(b, h, sizeof h);
    count(0, (long long)bytes - (long long)old);
    return b + HEADER;
}

static char dir[256];

/* the static half: no part of src/ calls the C library's allocator itself, but where a line says
   why ("libc: ..."); a raw malloc paired with a raw free would pass the counting above unseen */
static int raw_allocations(void) {
    static const char *calls[] = {"malloc(", "calloc(", "realloc(", "free(", "strdup(", "posix_memalign(", "aligned_alloc("};
    DIR *d = opendir("src");
    struct dirent *e;
    int found = 0, files = 0;
    if (!d) { printf("FAIL cannot list src/ (run from the repository's root)\n"); return -1; }
    while ((e = readdir(d))) {
        char path[600], line[4096];
        size_t n = strlen(e->d_name);
        int no = 0;
        FILE *f;
        if (n < 3 || strcmp(e->d_name + n - 2, ".c")) continue;
        snprintf(path, sizeof path, "src/%s", e->d_name);
        if (!(f = fopen(path, "r"))) continue;
        files++;
        while (fgets(line, sizeof line, f)) {
            size_t k;
            no++;
            if (strstr(line, "libc:")) continue;
            for (k = 0; k < sizeof calls / sizeof calls[0]; k++) {
                const char *p = line;
                while ((p = strstr(p, calls[k]))) {
                    char before = p == line ? ' ' : p[-1];
                    if (!(before == '_' || before == '.' || before == '>' || (before >= 'a' && before <= 'z') || (before >= 'A' && before <= 'Z') ||
                          (before >= '0' && before <= '9'))) {
                        printf("     %s:%d calls %.*s) itself: use MGT_MALLOC, MGT_REALLOC or MGT_FREE (or say why not: \"libc: ...\")\n", path, no,
                               (int)strlen(calls[k]) - 1, calls[k]);
                        found++;
                    }
                    p += strlen(calls[k]);
                }
            }
        }
        fclose(f);
    }
    closedir(d);
    return files ? found : -1;
}

static void config(mgt_config *cfg, const char *layout, const char *sub) {
    char set[600];
    mgt_config_init(cfg);
    mgt_config_set(cfg, "model.n_layer=2");
    mgt_config_set(cfg, "model.n_head=4");
    mgt_config_set(cfg, "model.d_model=32");
    mgt_config_set(cfg, "model.seq_len=16");
    mgt_config_set(cfg, "model.vocab_size=256");
    mgt_config_set(cfg, "train.steps=3");
    mgt_config_set(cfg, "train.global_batch=8");
    mgt_config_set(cfg, "train.micro_batch=2");
    mgt_config_set(cfg, "train.eval_every=2");
    mgt_config_set(cfg, "train.eval_batches=1");
    mgt_config_set(cfg, "parallel.threads=2");
    mgt_config_set(cfg, layout);
    snprintf(set, sizeof set, "data.train=%s/corpus.bin", dir); mgt_config_set(cfg, set);
    snprintf(set, sizeof set, "data.val=%s/corpus.bin", dir); mgt_config_set(cfg, set);
    snprintf(set, sizeof set, "checkpoint.dir=%s/%s", dir, sub); mgt_config_set(cfg, set);
    snprintf(set, sizeof set, "log.tensorboard=%s/%s/tb", dir, sub); mgt_config_set(cfg, set);
}

#define MUST(expr) do { mgt_result r_ = (expr); if (r_ != MGT_OK) { printf("FAIL %s: %s\n", #expr, mgt_last_error()); exit(1); } } while (0)

int main(void) {
    mgt_config cfg;
    mgt_run *run;
    char ckpt[1024], note[1024], set[600];
    int i, prompt[2] = {116, 104}, out[8];
    i = raw_allocations();
    check(i == 0, "src/: no call of the C library's allocator outside the hooks (%d found)", i);
    make_workdir(dir, sizeof dir, "test_alloc", 20000, 3);
    /* train 8 ranks (dp 2, tp 2, pp 2, ZeRO-3) with validation, TensorBoard and a checkpoint */
    config(&cfg, "parallel.dp=2", "a");
    mgt_config_set(&cfg, "parallel.tp=2");
    mgt_config_set(&cfg, "parallel.pp=2");
    mgt_config_set(&cfg, "parallel.zero=3");
    MUST(mgt_run_create(&run, &cfg));
    for (i = 0; i < 2; i++) MUST(mgt_run_step(run));
    MUST(mgt_run_save(run, ckpt, sizeof ckpt));
    mgt_run_destroy(run);
    /* resume it on one rank, train on, sample */
    config(&cfg, "parallel.dp=1", "b");
    MUST(mgt_run_create(&run, &cfg));
    MUST(mgt_run_resume(run, ckpt));
    MUST(mgt_run_step(run));
    check(mgt_run_generate(run, prompt, 2, out, 8, 1.0, 0, 7) == 8, "a resumed run samples 8 tokens");
    mgt_run_destroy(run);
    MUST(mgt_run_open(&run, ckpt, 1));
    check(mgt_run_generate(run, prompt, 2, out, 8, 0.8, 5, 9) == 8, "an opened checkpoint samples 8 tokens");
    mgt_run_destroy(run);
    /* export to Hugging Face's format, and start a run from it */
    snprintf(set, sizeof set, "%s/hf", dir);
    MUST(mgt_export(ckpt, set, note, sizeof note));
    config(&cfg, "parallel.tp=2", "c");
    snprintf(set, sizeof set, "model.init=%s/hf", dir);
    MUST(mgt_config_set(&cfg, set));
    MUST(mgt_run_create(&run, &cfg));
    MUST(mgt_run_step(run));
    mgt_run_destroy(run);
    { /* the simulator: a step of 4 GPUs, and the layout search */
        mgt_sim_options o;
        mgt_sim_result res;
        mgt_layout_search found;
        config(&cfg, "parallel.dp=4", "d");
        mgt_sim_options_init(&o);
        MUST(mgt_sim_run(&cfg, &o, &res));
        mgt_sim_result_free(&res);
        MUST(mgt_plan_search(&cfg, &o, 4, &found));
        check(found.count > 0, "the layout search of 4 GPUs found %d layouts", found.count);
        mgt_layout_search_free(&found);
    }
    check(total > 100 && live == 0 && live_bytes == 0 && foreign == 0,
          "every allocation through the hooks: %lld blocks (peak %.1f MiB), %lld still live (%lld bytes), %lld foreign pointers freed", total,
          (double)peak_bytes / 1048576.0, live, live_bytes, foreign);
    return finish(dir, "alloc");
}
