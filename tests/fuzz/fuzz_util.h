/* What the fuzz targets share: a private temporary folder for the files the library reads by path,
   and splitting an input into NUL-separated parts. Include after mgt.h (or data/tokenizer.h) with
   its implementation. Each process (each libFuzzer job) has its own folder, named with its pid; it
   is removed at exit. A crash skips that (libFuzzer owns the sanitizers' death callback), so each
   target, when it starts, removes the folders of processes that no longer run. */
#include <dirent.h>                       /* defines: opendir, readdir */
#include <errno.h>                        /* defines: errno, ESRCH */
#include <signal.h>                       /* defines: kill */
#include <stdio.h>                        /* defines: snprintf, fprintf */
#include <stdlib.h>                       /* defines: mkdtemp, atexit, getenv, abort */
#include <string.h>                       /* defines: memcpy, memchr */
#include <unistd.h>                       /* defines: unlink, rmdir, getpid */

/* Every UndefinedBehaviorSanitizer report stops the target (halt_on_error), but those that
   tests/fuzz/ubsan.supp names: known findings, until they are fixed. UBSAN_OPTIONS overrides. */
#ifdef FUZZ_UBSAN_SUPP
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) { return "halt_on_error=1:print_stacktrace=1:suppressions=" FUZZ_UBSAN_SUPP; }
#endif

#define FUZZ_HELPER static __attribute__((unused)) /* not every target uses every helper */

static char fuzz_dir[256];

static void fuzz_rmdir(const char *dir) {
    DIR *d;
    struct dirent *e;
    char path[600];
    if (!(d = opendir(dir))) return;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    closedir(d);
    rmdir(dir);
}

static void fuzz_cleanup(void) {
    if (fuzz_dir[0]) fuzz_rmdir(fuzz_dir);
    fuzz_dir[0] = 0;
}

/* makes the folder once: $TMPDIR/mgt_fuzz_<name>_<pid>_XXXXXX, after removing those of <name>
   whose process is gone */
FUZZ_HELPER const char *fuzz_tmpdir(const char *name) {
    if (!fuzz_dir[0]) {
        const char *tmp = getenv("TMPDIR");
        char prefix[128], stale[600];
        DIR *d;
        struct dirent *e;
        tmp = tmp && *tmp ? tmp : "/tmp";
        snprintf(prefix, sizeof prefix, "mgt_fuzz_%s_", name);
        if ((d = opendir(tmp))) {
            while ((e = readdir(d))) {
                long pid;
                char *end;
                if (strncmp(e->d_name, prefix, strlen(prefix))) continue;
                pid = strtol(e->d_name + strlen(prefix), &end, 10);
                if (*end != '_' || pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
                snprintf(stale, sizeof stale, "%s/%s", tmp, e->d_name);
                fuzz_rmdir(stale);
            }
            closedir(d);
        }
        snprintf(fuzz_dir, sizeof fuzz_dir, "%s/%s%ld_XXXXXX", tmp, prefix, (long)getpid());
        if (!mkdtemp(fuzz_dir)) { perror("mkdtemp"); abort(); }
        atexit(fuzz_cleanup);
    }
    return fuzz_dir;
}

/* writes data into the folder as `name`; path receives the full path */
FUZZ_HELPER void fuzz_write(const char *name, const void *data, size_t n, char *path, size_t cap) {
    FILE *f;
    snprintf(path, cap, "%s/%s", fuzz_dir, name);
    f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f)) { perror(path); abort(); }
}

/* Splits data[0..size) at NUL bytes into at most max parts, each copied and NUL-terminated into
   store (size + max bytes); returns the count. The last part takes the rest, NULs included, with
   its length in *last_len (for binary text). */
FUZZ_HELPER int fuzz_split(const uint8_t *data, size_t size, char *store, char **parts, int max, size_t *last_len) {
    int n = 0;
    size_t at = 0;
    char *out = store;
    while (n < max) {
        const uint8_t *nul = n < max - 1 ? (const uint8_t *)memchr(data + at, 0, size - at) : NULL;
        size_t len = nul ? (size_t)(nul - (data + at)) : size - at;
        if (len) memcpy(out, data + at, len);
        out[len] = 0;
        parts[n++] = out;
        if (last_len) *last_len = len;
        out += len + 1;
        if (!nul) break;
        at += len + 1;
    }
    return n;
}

#ifdef MGT_TOKENIZER_H /* the tokenizer targets */
/* encodes text with tok and checks the ids and the round trip */
FUZZ_HELPER void roundtrip(mgt_tokenizer *tok, const char *name, const char *text, size_t len) {
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0, i, at = 0;
    int vocab = mgt_tok_vocab_size(tok);
    if (mgt_tok_encode(tok, text, len, &ids, &n, &cap) != 0) { fprintf(stderr, "%s: encode failed\n", name); abort(); }
    for (i = 0; i < n; i++) {
        const char *bytes;
        int k = mgt_tok_decode(tok, ids[i], &bytes);
        if (ids[i] >= (uint32_t)vocab || k < 0) { fprintf(stderr, "%s: id %d of %d is not in the vocabulary (%d)\n", name, (int)ids[i], (int)i, vocab); abort(); }
        if (at + (size_t)k > len || (k && memcmp(text + at, bytes, (size_t)k))) {
            fprintf(stderr, "%s: decode(encode(x)) != x at byte %zu (id %d of %zu)\n", name, at, (int)i, n);
            abort();
        }
        at += (size_t)k;
    }
    if (at != len) { fprintf(stderr, "%s: decode(encode(x)) has %zu bytes, x has %zu\n", name, at, len); abort(); }
    free(ids);
}
#endif
