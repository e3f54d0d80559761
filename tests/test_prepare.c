/* test_prepare.c - checks data/prepare.h: mgt_shard_write and mgt_prepare (byte, GPT-2 and hf
   tokenizers, the val split, chunked reading, its errors and progress, 32-bit shards for a
   vocabulary over 65536 ids), and `./mgt prepare`, its command line (the option forms, exit codes).

     ninja build/test_prepare mgt && build/test_prepare [BPE_DIR]     # run from the repo root

   BPE_DIR defaults to data/gpt2-bpe (./setup.sh --gpt2), else ../shared/data/gpt2-bpe; without it the GPT-2 part is
   skipped (the byte tokenizer part always runs). Exit 0 pass, 1 fail.
   The command line's error cases print their messages to stderr: that is expected. */
#define _POSIX_C_SOURCE 200809L
#define MGT_TOKENIZER_IMPLEMENTATION
#define MGT_TOK_HF
#define MGT_PREPARE_IMPLEMENTATION
#include "../data/prepare.h"  // defines: mgt_prepare, mgt_shard_write, mgt_tok_*

#include <stdio.h>   // defines: printf, fopen
#include <stdlib.h>  // defines: malloc, free
#include <string.h>  // defines: memcmp, strlen
#include <unistd.h>  // defines: rmdir, unlink, access
#include <sys/wait.h> // defines: WEXITSTATUS (./mgt prepare's exit code)

static int failures = 0;
static char dir[] = "/tmp/mgt_prep_XXXXXX";

#define CHECK(cond, ...)                                              \
    do {                                                              \
        if (!(cond)) {                                                \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);               \
            printf(__VA_ARGS__);                                      \
            printf("\n");                                             \
            failures++;                                               \
        }                                                             \
    } while (0)

static char *tmp_path(const char *name) {
    static char buf[8][512];
    static int k = 0;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

static void write_file(const char *path, const char *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n) { printf("cannot write %s\n", path); exit(1); }
    fclose(f);
}

static char *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    char *buf;
    long sz;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = (char *)malloc((size_t)sz + 1);
    if (!buf || fread(buf, 1, (size_t)sz, f) != (size_t)sz) { free(buf); fclose(f); return NULL; }
    fclose(f);
    *n = (size_t)sz;
    return buf;
}

static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Reads a shard, checks its header (16- or 32-bit, whichever `width` says) and size; returns its
   tokens (malloc'd) and count. */
static uint32_t *read_shard(const char *path, int width, size_t *count) {
    size_t n, i;
    unsigned char *b = (unsigned char *)read_file(path, &n);
    uint32_t *tok;
    int zeros = 1, k;
    *count = 0;
    if (!b) { CHECK(0, "%s: missing", path); return NULL; }
    if (n < 1024) { CHECK(0, "%s: %zu bytes, shorter than the header", path, n); free(b); return NULL; }
    CHECK(le32(b) == (width == 4 ? 20240801u : 20240520u), "%s: magic %u for %d-byte tokens", path, le32(b), width);
    CHECK(le32(b + 4) == (width == 4 ? 7u : 1u), "%s: version %u for %d-byte tokens", path, le32(b + 4), width);
    for (i = 12; i < 1024; i++) zeros &= b[i] == 0;
    CHECK(zeros, "%s: header ints 3..255 are not 0", path);
    *count = le32(b + 8);
    CHECK(n == 1024 + (size_t)width * *count, "%s: %zu bytes for %zu %d-byte tokens", path, n, *count, width);
    tok = (uint32_t *)malloc(4 * *count + 4);
    for (i = 0; i < *count && 1024 + (size_t)width * (i + 1) <= n; i++)
        for (tok[i] = 0, k = 0; k < width; k++) tok[i] |= (uint32_t)b[1024 + (size_t)width * i + (size_t)k] << (8 * k);
    free(b);
    return tok;
}

static int prepare(int first, ...) {          /* ./mgt prepare args... (NULL-terminated): its exit code */
    char cmd[4096];
    size_t n = (size_t)snprintf(cmd, sizeof cmd, "./mgt prepare");
    int status;
    va_list ap;
    va_start(ap, first);
    for (;;) {
        const char *a = va_arg(ap, const char *);
        if (!a) break;
        n += (size_t)snprintf(cmd + n, n < sizeof cmd ? sizeof cmd - n : 0, " '%s'", a); /* the tests' arguments hold no quote */
    }
    va_end(ap);
    (void)first;
    if (n >= sizeof cmd) { CHECK(0, "command line too long"); return -1; }
    fflush(stdout);
    status = system(cmd);
    return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* mgt_prepare of one or two inputs (in2 may be NULL) with the tokenizer kind (its files in
   `files`), into prefix; its result, the message in err */
static int prepare_lib(const char *kind, const char *files, double val_fraction, const char *in1, const char *in2,
                       const char *prefix, mgt_prepare_result *res, char *err, size_t errlen) {
    mgt_prepare_options o;
    const char *inputs[2];
    inputs[0] = in1, inputs[1] = in2;
    mgt_prepare_options_init(&o);
    o.tokenizer = kind;
    if (files && !strcmp(kind, "hf")) o.tokenizer_json = files;
    else if (files) o.bpe_dir = files;
    o.val_fraction = val_fraction;
    o.inputs = inputs;
    o.ninputs = in1 ? (in2 ? 2 : 1) : 0;
    o.prefix = prefix;
    return mgt_prepare(&o, res, err, errlen);
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

static void test_shard_write(void) {
    static const uint32_t tok[5] = {0, 1, 255, 256, 65535}, wide[5] = {0, 65535, 65536, 128255, 4000000000u};
    char err[256];
    size_t n;
    uint32_t *got;
    const char *p = tmp_path("w.bin");
    printf("mgt_shard_write: header, little-endian tokens, no .tmp left\n");
    CHECK(mgt_shard_width(256) == 2 && mgt_shard_width(65536) == 2 && mgt_shard_width(65537) == 4 &&
          mgt_shard_width(128256) == 4, "mgt_shard_width");
    CHECK(mgt_shard_write(p, tok, 5, 2, err, sizeof err) == 0, "write: %s", err);
    got = read_shard(p, 2, &n);
    CHECK(got && n == 5 && memcmp(got, tok, sizeof tok) == 0, "tokens differ");
    CHECK(!exists(tmp_path("w.bin.tmp")), ".tmp left behind");
    free(got);
    CHECK(mgt_shard_write(p, tok, 0, 2, err, sizeof err) == 0, "empty write: %s", err);
    got = read_shard(p, 2, &n);
    CHECK(n == 0, "empty shard count %zu", n);
    free(got);
    printf("mgt_shard_write: 32-bit tokens round trip (llm.c's Llama 3 header)\n");
    CHECK(mgt_shard_write(p, wide, 5, 4, err, sizeof err) == 0, "write: %s", err);
    got = read_shard(p, 4, &n);
    CHECK(got && n == 5 && memcmp(got, wide, sizeof wide) == 0, "32-bit tokens differ");
    free(got);
    CHECK(mgt_shard_write(p, wide, 5, 2, err, sizeof err) == -1 && strstr(err, "w.bin: token 2 (id 65536) does not fit a 16-bit shard"),
          "a 16-bit shard of id 65536: '%s'", err);
    printf("  message: %s\n", err);
    CHECK(!exists(tmp_path("w.bin.tmp")), ".tmp left behind by a refused write");
    CHECK(mgt_shard_write(p, tok, 5, 3, err, sizeof err) == -1 && strstr(err, "token width 3"), "width 3: '%s'", err);
    CHECK(mgt_shard_write("/nonexistent/dir/x.bin", tok, 5, 2, err, sizeof err) == -1 &&
          strstr(err, "/nonexistent/dir/x.bin.tmp: cannot create"), "bad dir: '%s'", err);
    printf("  message: %s\n", err);
    unlink(p);
}

static void test_byte(void) {
    char text[1000], err[512], in1[512], in2[512], pre[512]; /* copies: tmp_path's buffers are reused */
    size_t i, ntr, nva;
    uint32_t *tr, *va;
    mgt_prepare_result res;
    int ok = 1;
    snprintf(in1, sizeof in1, "%s", tmp_path("a.txt"));
    snprintf(in2, sizeof in2, "%s", tmp_path("b.txt"));
    snprintf(pre, sizeof pre, "%s", tmp_path("byte"));
    printf("mgt_prepare, tokenizer byte: two inputs, val = last 10%%\n");
    for (i = 0; i < sizeof text; i++) text[i] = (char)(i * 7 + 3);
    write_file(in1, text, 600);
    write_file(in2, text + 600, 400);
    CHECK(prepare_lib("byte", NULL, 0.1, in1, in2, pre, &res, err, sizeof err) == 0, "mgt_prepare: %s", err);
    CHECK(res.bytes == 1000 && res.train_tokens == 900 && res.val_tokens == 100 && res.width == 2 && res.seconds >= 0,
          "result: %zu bytes, train %zu, val %zu, width %d", res.bytes, res.train_tokens, res.val_tokens, res.width);
    tr = read_shard(tmp_path("byte_train.bin"), 2, &ntr);
    va = read_shard(tmp_path("byte_val.bin"), 2, &nva);
    CHECK(ntr == 900 && nva == 100, "train %zu val %zu", ntr, nva);
    for (i = 0; tr && va && i < 1000 && ntr == 900 && nva == 100; i++)
        ok &= (i < 900 ? tr[i] : va[i - 900]) == (unsigned char)text[i];
    CHECK(ok, "tokens are not the input bytes");
    free(tr); free(va);

    printf("./mgt prepare: --val-fraction=0 and --output give an empty, valid val shard (with a warning)\n");
    CHECK(prepare(0, in1, "--val-fraction=0", "--output", pre, NULL) == 0, "exit code");
    tr = read_shard(tmp_path("byte_train.bin"), 2, &ntr);
    va = read_shard(tmp_path("byte_val.bin"), 2, &nva);
    CHECK(ntr == 600 && nva == 0, "train %zu val %zu", ntr, nva);
    free(tr); free(va);
    printf("mgt_prepare: val_fraction 0.5 rounds to the nearest token\n");
    write_file(in1, text, 5);
    CHECK(prepare_lib("byte", NULL, 0.5, in1, NULL, pre, &res, err, sizeof err) == 0, "mgt_prepare: %s", err);
    tr = read_shard(tmp_path("byte_train.bin"), 2, &ntr);
    va = read_shard(tmp_path("byte_val.bin"), 2, &nva);
    CHECK(ntr == 2 && nva == 3, "train %zu val %zu", ntr, nva);
    CHECK(!exists(tmp_path("byte_train.bin.tmp")) && !exists(tmp_path("byte_val.bin.tmp")),
          ".tmp left behind");
    free(tr); free(va);
    printf("./mgt prepare --val-fraction 0.5: the same through the command line\n");
    CHECK(prepare(0, in1, "--val-fraction", "0.5", "-o", pre, NULL) == 0, "exit code");
    tr = read_shard(tmp_path("byte_train.bin"), 2, &ntr);
    va = read_shard(tmp_path("byte_val.bin"), 2, &nva);
    CHECK(ntr == 2 && nva == 3, "train %zu val %zu", ntr, nva);
    free(tr); free(va);
}

typedef struct progress_seen {
    int calls, ordered;
    mgt_prepare_progress last;
} progress_seen;

static void on_progress(void *user, const mgt_prepare_progress *p) {
    progress_seen *s = (progress_seen *)user;
    s->ordered &= p->bytes_done >= s->last.bytes_done && p->tokens >= s->last.tokens && p->seconds >= s->last.seconds &&
                  p->bytes_done <= p->bytes_total;
    s->last = *p;
    s->calls++;
}

/* the progress callback: after each chunk, counts that only grow, the last at the inputs' size */
static void test_progress(void) {
    size_t n = (5u << 20) + 123, i;
    char *text = (char *)malloc(n), err[512], *in1 = tmp_path("p.txt");
    const char *inputs[1];
    mgt_prepare_options o;
    mgt_prepare_result res;
    progress_seen seen;
    printf("mgt_prepare: the progress callback after each 1 MB chunk, counts growing to the inputs' size\n");
    for (i = 0; i < n; i++) text[i] = (char)('a' + i % 26);
    write_file(in1, text, n);
    memset(&seen, 0, sizeof seen);
    seen.ordered = 1;
    mgt_prepare_options_init(&o);
    inputs[0] = in1;
    o.inputs = inputs;
    o.ninputs = 1;
    o.prefix = tmp_path("p");
    o.progress = on_progress;
    o.user = &seen;
    CHECK(mgt_prepare(&o, &res, err, sizeof err) == 0, "mgt_prepare: %s", err);
    CHECK(seen.calls == 6 && seen.ordered, "%d calls (6 chunks), in order %d", seen.calls, seen.ordered);
    CHECK(seen.last.bytes_done == n && seen.last.bytes_total == n && seen.last.tokens == n && res.bytes == n,
          "last call: %zu of %zu bytes, %zu tokens (want %zu)", seen.last.bytes_done, seen.last.bytes_total, seen.last.tokens, n);
    free(text);
    unlink(in1); unlink(tmp_path("p_train.bin")); unlink(tmp_path("p_val.bin"));
}

/* mgt_prepare's refusals: whose fault each is, what the message names, no file left behind */
static void test_library_errors(void) {
    char err[512], *in1 = tmp_path("a.txt"), *pre = tmp_path("err"), *empty = tmp_path("empty.txt");
    mgt_prepare_result res;
    mgt_prepare_options o;
    printf("mgt_prepare errors:\n");
    write_file(empty, "", 0);
    CHECK(mgt_prepare(NULL, &res, err, sizeof err) == MGT_PREP_ERROR_ARGUMENT, "NULL options");
    CHECK(prepare_lib("byte", NULL, 0.1, tmp_path("missing.txt"), NULL, pre, &res, err, sizeof err) == MGT_PREP_ERROR_INPUT &&
          strstr(err, "missing.txt: cannot open"), "missing input: '%s'", err);
    CHECK(prepare_lib("bpe", NULL, 0.1, in1, NULL, pre, &res, err, sizeof err) == MGT_PREP_ERROR_ARGUMENT && strstr(err, "'bpe'"),
          "unknown tokenizer: '%s'", err);
    CHECK(prepare_lib("byte", NULL, 0.7, in1, NULL, pre, &res, err, sizeof err) == MGT_PREP_ERROR_ARGUMENT, "fraction > 0.5: '%s'", err);
    CHECK(prepare_lib("byte", NULL, -0.1, in1, NULL, pre, &res, err, sizeof err) == MGT_PREP_ERROR_ARGUMENT, "negative fraction: '%s'", err);
    CHECK(prepare_lib("byte", NULL, 0.1, in1, NULL, NULL, &res, err, sizeof err) == MGT_PREP_ERROR_ARGUMENT, "no prefix: '%s'", err);
    CHECK(prepare_lib("byte", NULL, 0.1, NULL, NULL, pre, &res, err, sizeof err) == MGT_PREP_ERROR_ARGUMENT, "no inputs: '%s'", err);
    CHECK(prepare_lib("hf", NULL, 0.1, in1, NULL, pre, &res, err, sizeof err) == MGT_PREP_ERROR_ARGUMENT, "hf without its file: '%s'", err);
    CHECK(prepare_lib("gpt2", "/nonexistent", 0.1, in1, NULL, pre, &res, err, sizeof err) == MGT_PREP_ERROR_TOKENIZER &&
          strstr(err, "/nonexistent/encoder.json"), "missing bpe dir: '%s'", err);
    CHECK(prepare_lib("byte", NULL, 0.1, empty, NULL, pre, &res, err, sizeof err) == MGT_PREP_ERROR_INPUT && strstr(err, "no tokens"),
          "empty input: '%s'", err);
    CHECK(prepare_lib("byte", NULL, 0.1, in1, NULL, "/nonexistent/dir/x", &res, err, sizeof err) == MGT_PREP_ERROR_OUTPUT &&
          strstr(err, "/nonexistent/dir/x_train.bin.tmp: cannot create"), "unwritable output: '%s'", err);
    CHECK(res.train_tokens == 0 && res.val_tokens == 0, "a failed run's result is not zeroed");
    CHECK(!exists(tmp_path("err_train.bin")) && !exists(tmp_path("err_val.bin")) &&
          !exists(tmp_path("err_train.bin.tmp")) && !exists(tmp_path("err_val.bin.tmp")),
          "failed runs left files behind");
    mgt_prepare_options_init(&o);
    CHECK(!strcmp(o.tokenizer, "byte") && !strcmp(o.bpe_dir, "data/gpt2-bpe") && o.val_fraction == 0.1 && !o.inputs && !o.prefix &&
          !o.progress, "mgt_prepare_options_init's defaults");
    unlink(empty);
}

static void test_errors(void) {
    char *in1 = tmp_path("a.txt"), *pre = tmp_path("err"), *empty = tmp_path("empty.txt");
    printf("./mgt prepare errors (messages below are expected):\n");
    write_file(empty, "", 0);
    CHECK(prepare(0, tmp_path("missing.txt"), "-o", pre, NULL) == 2, "missing input");
    CHECK(prepare(0, "--bogus", in1, "-o", pre, NULL) == 2, "unknown option");
    CHECK(prepare(0, "--val-fraction", "0.7", in1, "-o", pre, NULL) == 2, "fraction > 0.5");
    CHECK(prepare(0, "--val-fraction", "abc", in1, "-o", pre, NULL) == 2, "fraction not a number");
    CHECK(prepare(0, "--val-fraction", "-0.1", in1, "-o", pre, NULL) == 2, "negative fraction");
    CHECK(prepare(0, in1, "-o", NULL) == 2, "-o without a value");
    CHECK(prepare(0, in1, NULL) == 2, "no -o");
    CHECK(prepare(0, "-o", pre, NULL) == 2, "no inputs");
    CHECK(prepare(0, "--tokenizer", "bpe", in1, "-o", pre, NULL) == 2, "unknown tokenizer");
    CHECK(prepare(0, "--tokenizer", "gpt2", "--bpe-dir", "/nonexistent", in1, "-o", pre, NULL) == 2,
          "missing bpe dir");
    CHECK(prepare(0, empty, "-o", pre, NULL) == 2, "empty input");
    CHECK(prepare(0, in1, "-o", "/nonexistent/dir/x", NULL) == 1, "unwritable output");
    CHECK(!exists(tmp_path("err_train.bin")) && !exists(tmp_path("err_val.bin")) &&
          !exists(tmp_path("err_train.bin.tmp")) && !exists(tmp_path("err_val.bin.tmp")),
          "failed runs left files behind");
    CHECK(prepare(0, "--help", NULL) == 0, "--help");
    unlink(empty);
}

/* GPT-2 and hf (kind, its files): mgt_prepare's shards equal the document-start token +
   encode(file) per input; a file over the 1 MB chunk checks that cutting at safe places changes
   nothing; the shards hold `width`-byte tokens. */
static void test_bpe(const char *kind, const char *files, int width) {
    mgt_tokenizer *tok;
    char err[512], *in1 = tmp_path("g1.txt"), *in2 = tmp_path("g2.txt"), *pre = tmp_path("g");
    static const char *pieces[] = {"Hello world", "  indented  line", "x", "\n", "\n\n", " ",
                                   "\t", "tail   ", "It's 12345 caf\xc3\xa9", "\xe4\xb8\xad\xe6\x96\x87",
                                   "!!", "'s", "\n \n", "\r\n", "<|eot_id|>", ".\n", "a\nb"};
    size_t big_n = 3u << 20, i, n = 0, cap = 0, ntr, nva;
    char *big = (char *)malloc(big_n);
    uint32_t *want = NULL, *tr, *va, top = 0;
    mgt_prepare_result res;
    unsigned r = 12345;
    int ok = 1;
    int eot;
    printf("mgt_prepare, tokenizer %s: the document start before each input, chunked = whole-file "
           "encoding\n", kind);
    for (i = 0; i < big_n;) {                  /* random mix of pieces, 3 MB */
        const char *p;
        size_t k;
        r = r * 1103515245u + 12345u;
        p = pieces[(r >> 16) % (sizeof pieces / sizeof *pieces)];
        k = strlen(p);
        if (i + k > big_n) k = big_n - i;
        memcpy(big + i, p, k);
        i += k;
    }
    write_file(in1, big, big_n);
    write_file(in2, "Second file.\n", 13);
    CHECK(mgt_tok_open(&tok, kind, files, err, sizeof err) == 0, "%s", err);
    if (!tok) { free(big); return; }
    eot = mgt_tok_eot(tok);
    CHECK(eot >= 0, "%s: no document-start token", kind);
    want = (uint32_t *)malloc(sizeof *want);
    cap = 1;
    want[n++] = (uint32_t)eot;
    mgt_tok_encode(tok, big, big_n, &want, &n, &cap);
    if (cap < n + 1) { want = (uint32_t *)realloc(want, sizeof *want * (n + 16)); cap = n + 16; }
    want[n++] = (uint32_t)eot;
    mgt_tok_encode(tok, "Second file.\n", 13, &want, &n, &cap);
    mgt_tok_close(tok);
    CHECK(prepare_lib(kind, files, 0.25, in1, in2, pre, &res, err, sizeof err) == 0, "mgt_prepare: %s", err);
    CHECK(res.width == width && res.train_tokens + res.val_tokens == n, "result: width %d, %zu + %zu tokens", res.width,
          res.train_tokens, res.val_tokens);
    tr = read_shard(tmp_path("g_train.bin"), width, &ntr);
    va = read_shard(tmp_path("g_val.bin"), width, &nva);
    CHECK(ntr + nva == n, "train %zu + val %zu tokens, expected %zu", ntr, nva, n);
    CHECK(nva == (size_t)(n * 0.25 + 0.5), "val %zu of %zu", nva, n);
    for (i = 0; tr && va && ntr + nva == n && i < n; i++) {
        ok &= (i < ntr ? tr[i] : va[i - ntr]) == want[i];
        top = want[i] > top ? want[i] : top;
    }
    CHECK(ok, "prepare's tokens differ from encoding each whole file");
    CHECK(width == 2 || top > 65535, "the 32-bit case wrote no id over 65535 (largest %u)", top);
    printf("  %zu bytes -> %zu tokens (train %zu, val %zu, largest id %u, %d-bit shards)\n", big_n + 13, n, ntr, nva, top, 8 * width);
    free(tr); free(va); free(want); free(big);
    unlink(in1); unlink(in2);
    unlink(tmp_path("g_train.bin")); unlink(tmp_path("g_val.bin"));
}

/* the hf fixture with its added token <|eot_id|> at id 128009, as Llama 3 has it: a vocabulary of
   more than 65536 ids, so prepare writes 32-bit shards (test_bpe's text has <|eot_id|>) */
static const char *wide_json(void) {
    static char out[600];
    const char *from = "{\"id\":4,\"content\":\"<|eot_id|>\"", *to = "{\"id\":128009,\"content\":\"<|eot_id|>\"";
    size_t n, at;
    char *in = read_file("tests/fixtures/hf_llama3ish.json", &n), *big, *hit;
    snprintf(out, sizeof out, "%s/wide.json", dir);
    hit = in ? strstr(in, from) : NULL;
    if (!hit) { CHECK(0, "tests/fixtures/hf_llama3ish.json: missing, or no %s (run from the repository root)", from); free(in); return out; }
    at = (size_t)(hit - in);
    big = (char *)malloc(n + 16);
    memcpy(big, in, at);
    memcpy(big + at, to, strlen(to));
    memcpy(big + at + strlen(to), hit + strlen(from), n - at - strlen(from));
    write_file(out, big, n - strlen(from) + strlen(to));
    free(in); free(big);
    return out;
}

int main(int argc, char **argv) {
    /* the project's copy (./setup.sh --gpt2 fetches it), else the shared data beside the checkout */
    const char *bpe_dir = argc > 1 ? argv[1] : access("data/gpt2-bpe/encoder.json", R_OK) == 0 ? "data/gpt2-bpe" : "../shared/data/gpt2-bpe";
    char probe[600];
    if (access("./mgt", X_OK)) { printf("FAIL ./mgt is not built (ninja mgt; run from the repository root)\n"); return 1; }
    if (!mkdtemp(dir)) { printf("mkdtemp failed\n"); return 1; }
    test_shard_write();
    test_byte();
    test_progress();
    test_library_errors();
    test_errors();
    snprintf(probe, sizeof probe, "%s/encoder.json", bpe_dir);
    if (exists(probe)) test_bpe("gpt2", bpe_dir, 2);
    else printf("SKIP (GPT-2 part): %s not found\n", probe);
    test_bpe("hf", "tests/fixtures/hf_llama3ish.json", 2);
    test_bpe("hf", wide_json(), 4);
    CHECK(prepare(0, "--tokenizer", "hf", tmp_path("a.txt"), "-o", tmp_path("hf"), NULL) == 2,
          "hf without --tokenizer-json");
    unlink(tmp_path("a.txt")); unlink(tmp_path("b.txt"));
    unlink(tmp_path("byte_train.bin")); unlink(tmp_path("byte_val.bin")); unlink(tmp_path("wide.json"));
    rmdir(dir);
    if (failures) { printf("%d FAILED\n", failures); return 1; }
    printf("all prepare tests passed\n");
    return 0;
}
