/* test_tokenizer.c - checks data/tokenizer.h: the byte tokenizer always, GPT-2
   BPE against tests/fixtures/tokenizer_gpt2.txt (written by
   tests/make_tokenizer_fixture.py from Hugging Face tokenizers) when the
   GPT-2 files are present.

     gcc -std=c99 -O2 -Wall -Wextra -Werror -o /tmp/test_tokenizer tests/test_tokenizer.c
     /tmp/test_tokenizer [BPE_DIR] [TINYSHAKESPEARE] [FIXTURE]   # run from the repo root

   Defaults: data/gpt2-bpe (./setup.sh --gpt2), else ../shared/data/gpt2-bpe, ../shared/data/tinyshakespeare/input.txt,
   tests/fixtures/tokenizer_gpt2.txt. Exit 0 pass, 1 fail, 77 skip (no GPT-2 files). */
#define _POSIX_C_SOURCE 200809L
#define MGT_TOKENIZER_IMPLEMENTATION
#include "../data/tokenizer.h"  // defines: mgt_tok_*

#include <stdio.h>   // defines: printf, fopen
#include <stdlib.h>  // defines: malloc, free
#include <string.h>  // defines: memcmp, strlen, strstr
#include <time.h>    // defines: clock_gettime
#include <unistd.h>  // defines: rmdir, unlink

static int failures = 0;

#define CHECK(cond, ...)                                              \
    do {                                                              \
        if (!(cond)) {                                                \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);               \
            printf(__VA_ARGS__);                                      \
            printf("\n");                                             \
            failures++;                                               \
        }                                                             \
    } while (0)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
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
    buf[sz] = 0;
    fclose(f);
    *n = (size_t)sz;
    return buf;
}

static int write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

/* Decodes ids and compares the concatenated bytes with text[0..len). */
static int round_trips(const mgt_tokenizer *tok, const uint32_t *ids, size_t n,
                       const char *text, size_t len) {
    size_t i, o = 0;
    for (i = 0; i < n; i++) {
        const char *b;
        int k = mgt_tok_decode(tok, ids[i], &b);
        if (k < 0 || o + (size_t)k > len || memcmp(text + o, b, (size_t)k) != 0) return 0;
        o += (size_t)k;
    }
    return o == len;
}

static uint32_t fnv1a(const char *p, size_t n) {
    uint32_t h = 0x811C9DC5u;
    size_t i;
    for (i = 0; i < n; i++) { h ^= (unsigned char)p[i]; h *= 0x01000193u; }
    return h;
}

static void test_byte(void) {
    mgt_tokenizer *tok;
    char err[256], text[256];
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0, i;
    const char *b;
    int ok = 1;
    printf("byte tokenizer: vocab 256, ids = bytes, decode round trip\n");
    CHECK(mgt_tok_open(&tok, "byte", NULL, err, sizeof err) == 0, "open byte: %s", err);
    CHECK(mgt_tok_vocab_size(tok) == 256, "vocab %d", mgt_tok_vocab_size(tok));
    CHECK(mgt_tok_eot(tok) == -1, "eot %d", mgt_tok_eot(tok));
    for (i = 0; i < 256; i++) text[i] = (char)(255 - i);
    CHECK(mgt_tok_encode(tok, text, 256, &ids, &n, &cap) == 0, "encode");
    CHECK(mgt_tok_encode(tok, "ab", 2, &ids, &n, &cap) == 0, "encode (append)");
    CHECK(n == 258, "n %zu", n);
    for (i = 0; i < 256; i++) ok &= ids[i] == 255 - i;
    CHECK(ok && ids[256] == 'a' && ids[257] == 'b', "ids are not the bytes");
    CHECK(round_trips(tok, ids, 256, text, 256), "decode round trip");
    CHECK(mgt_tok_decode(tok, -1, &b) == -1 && mgt_tok_decode(tok, 256, &b) == -1,
          "decode out of range must return -1");
    CHECK(mgt_tok_encode(tok, "", 0, &ids, &n, &cap) == 0 && n == 258, "empty encode");
    free(ids);
    mgt_tok_close(tok);
}

static void test_errors(void) {
    mgt_tokenizer *tok = NULL;
    char err[512], dir[] = "/tmp/mgt_tok_XXXXXX", path[600];
    printf("errors: unknown kind, missing files, malformed JSON, bad merges\n");
    CHECK(mgt_tok_open(&tok, "bpe", NULL, err, sizeof err) == -1 && tok == NULL &&
          strstr(err, "unknown tokenizer 'bpe'"), "unknown kind: '%s'", err);
#ifndef MGT_TOK_HF
    CHECK(mgt_tok_open(&tok, "hf", "tests/fixtures/hf_llama3ish.json", err, sizeof err) == -1 &&
          tok == NULL && strstr(err, "the hf tokenizer is not in this build (define MGT_TOK_HF"),
          "hf without MGT_TOK_HF: '%s'", err);
#endif
    CHECK(mgt_tok_open(&tok, "gpt2", "/nonexistent/dir", err, sizeof err) == -1 &&
          strstr(err, "/nonexistent/dir/encoder.json: cannot open"), "missing dir: '%s'", err);
    printf("  message: %s\n", err);
    if (!mkdtemp(dir)) { CHECK(0, "mkdtemp"); return; }
    snprintf(path, sizeof path, "%s/encoder.json", dir);
    write_file(path, "{\"a\": 0, \"b\" 1}");
    CHECK(mgt_tok_open(&tok, "gpt2", dir, err, sizeof err) == -1 &&
          strstr(err, "malformed JSON at byte 13: expected ':'"), "bad json: '%s'", err);
    printf("  message: %s\n", err);
    /* a tiny valid vocabulary: 256 byte tokens (\u escapes, surrogate pairs
       are not byte-level characters), "hi", eot; then merges */
    {
        FILE *f = fopen(path, "wb");
        int b, k = 0;
        fputs("{", f);
        for (b = 0; b < 256; b++) {
            int pr = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
            unsigned cp = pr ? (unsigned)b : 256u + (unsigned)k++;
            if (b == '"' || b == '\\') fprintf(f, "\"\\%c\": %d, ", b, b);
            else fprintf(f, "\"\\u%04x\": %d, ", cp, b);
        }
        fputs("\"hi\": 256, \"<|endoftext|>\": 257}", f);
        fclose(f);
        snprintf(path, sizeof path, "%s/vocab.bpe", dir);
        write_file(path, "#version: 0.2\nh i\n");
        CHECK(mgt_tok_open(&tok, "gpt2", dir, err, sizeof err) == 0, "tiny vocab: %s", err);
        if (tok) {
            uint32_t *ids = NULL;
            size_t n = 0, cap = 0;
            CHECK(mgt_tok_vocab_size(tok) == 258 && mgt_tok_eot(tok) == 257, "tiny vocab size");
            mgt_tok_encode(tok, "hi", 2, &ids, &n, &cap);
            CHECK(n == 1 && ids[0] == 256, "tiny vocab encode");
            free(ids);
            mgt_tok_close(tok);
        }
        write_file(path, "#version: 0.2\nh i\nx\n");
        CHECK(mgt_tok_open(&tok, "gpt2", dir, err, sizeof err) == -1 &&
              strstr(err, "vocab.bpe: line 3: expected two tokens"), "bad merges: '%s'", err);
        printf("  message: %s\n", err);
        write_file(path, "#version: 0.2\nh j\n");
        CHECK(mgt_tok_open(&tok, "gpt2", dir, err, sizeof err) == -1 &&
              strstr(err, "vocab.bpe: line 2: a token or the merged token is not in"),
              "merge not in vocab: '%s'", err);
        unlink(path);
        snprintf(path, sizeof path, "%s/encoder.json", dir);
        unlink(path);
    }
    rmdir(dir);
}

/* Compares the encoder with every case of the fixture but the one whose text is skip. */
static void test_fixture(mgt_tokenizer *tok, const char *label, const char *fixture,
                         const char *shakespeare, const char *skip) {
    size_t nfix, pos = 0, ncase = 0, nids_total = 0;
    char *fix = read_file(fixture, &nfix), *text = NULL;
    size_t tlen = 0;
    int have_text = 0;
    char name[128] = "?";
    printf("%s: fixture %s\n", label, fixture);
    CHECK(fix != NULL, "cannot read fixture %s", fixture);
    if (!fix) return;
    while (pos < nfix) {
        char *line = fix + pos, *eol = strchr(line, '\n');
        if (!eol) eol = fix + nfix;
        *eol = 0;
        pos = (size_t)(eol - fix) + 1;
        if (strncmp(line, "case ", 5) == 0) {
            snprintf(name, sizeof name, "case %s", line + 5);
        } else if (strncmp(line, "text ", 5) == 0) {
            size_t hl = strlen(line + 5), i;
            free(text);
            text = (char *)malloc(hl / 2 + 1);
            for (i = 0; i < hl / 2; i++) {
                unsigned v;
                sscanf(line + 5 + 2 * i, "%2x", &v);
                text[i] = (char)v;
            }
            tlen = hl / 2;
            have_text = 1;
        } else if (strncmp(line, "file ", 5) == 0) {
            unsigned long want_fnv = 0;
            size_t nbytes = 0, nall = 0;
            char fname[64];
            char *all = read_file(shakespeare, &nall);
            have_text = 0;
            if (sscanf(line + 5, "%63s %zu %lx", fname, &nbytes, &want_fnv) != 3) {
                CHECK(0, "bad fixture line '%s'", line);
            } else if (!all || nall < nbytes) {
                printf("  note: %s not found, skipping its case\n", shakespeare);
            } else if (fnv1a(all, nbytes) != (uint32_t)want_fnv) {
                CHECK(0, "%s: first %zu bytes differ from the fixture's (checksum)", shakespeare, nbytes);
            } else {
                free(text);
                text = (char *)malloc(nbytes);
                memcpy(text, all, nbytes);
                tlen = nbytes;
                have_text = 1;
                snprintf(name, sizeof name, "%s first %zu bytes", fname, nbytes);
            }
            free(all);
        } else if (strncmp(line, "ids", 3) == 0 && have_text && skip &&
                   tlen == strlen(skip) && memcmp(text, skip, tlen) == 0) {
            printf("  %s: skipped\n", name);
            have_text = 0;
        } else if (strncmp(line, "ids", 3) == 0 && have_text) {
            uint32_t *ids = NULL;
            size_t n = 0, cap = 0, k = 0, i;
            char *p = line + 3;
            int ok;
            CHECK(mgt_tok_encode(tok, text, tlen, &ids, &n, &cap) == 0, "encode %s", name);
            ok = 1;
            for (;;) {
                char *end;
                long v = strtol(p, &end, 10);
                if (end == p) break;
                p = end;
                if (k >= n || ids[k] != v) {
                    if (ok) {
                        CHECK(0, "%s: id %zu is %d, reference %ld", name, k,
                              k < n ? (int)ids[k] : -1, v);
                        printf("  text: \"");
                        for (i = 0; i < tlen && i < 80; i++)
                            printf(text[i] >= 32 && text[i] < 127 ? "%c" : "\\x%02x",
                                   (unsigned char)text[i]);
                        printf("\"\n");
                    }
                    ok = 0;
                }
                k++;
            }
            CHECK(k == n, "%s: %zu ids, reference %zu", name, n, k);
            CHECK(round_trips(tok, ids, n, text, tlen), "%s: decode round trip", name);
            ncase++;
            nids_total += n;
            free(ids);
            have_text = 0;
        }
    }
    printf("  %zu cases, %zu ids compared\n", ncase, nids_total);
    CHECK(ncase >= 100, "only %zu fixture cases", ncase);
    free(text);
    free(fix);
}

static void test_gpt2_misc(mgt_tokenizer *tok) {
    static const char bad[] = "\xff\xfe abc \xc3 \xe2\x82 \xed\xa0\x80 caf\xc3\xa9\xc3";
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0;
    const char *b;
    int k;
    printf("gpt2: vocab, eot, known ids, invalid UTF-8 round trip\n");
    CHECK(mgt_tok_vocab_size(tok) == 50257, "vocab %d", mgt_tok_vocab_size(tok));
    CHECK(mgt_tok_eot(tok) == 50256, "eot %d", mgt_tok_eot(tok));
    k = mgt_tok_decode(tok, 50256, &b);
    CHECK(k == 13 && memcmp(b, "<|endoftext|>", 13) == 0, "decode eot");
    CHECK(mgt_tok_decode(tok, 50257, &b) == -1 && mgt_tok_decode(tok, -1, &b) == -1,
          "decode out of range");
    mgt_tok_encode(tok, "Hello world", 11, &ids, &n, &cap);
    CHECK(n == 2 && ids[0] == 15496 && ids[1] == 995, "Hello world");
    n = 0;
    CHECK(mgt_tok_encode(tok, bad, sizeof bad - 1, &ids, &n, &cap) == 0, "encode invalid UTF-8");
    CHECK(round_trips(tok, ids, n, bad, sizeof bad - 1), "invalid UTF-8 round trip");
    free(ids);
}

static void test_speed(mgt_tokenizer *tok, const char *label, const char *path) {
    size_t len, n = 0, cap = 0, n2 = 0, cap2 = 0;
    char *text = read_file(path, &len);
    uint32_t *ids = NULL, *ids2 = NULL;
    double t0, dt, dt2;
    if (!text) { printf("%s speed: %s not found, skipped\n", label, path); return; }
    t0 = now_s();
    CHECK(mgt_tok_encode(tok, text, len, &ids, &n, &cap) == 0, "encode %s", path);
    dt = now_s() - t0;
    t0 = now_s();
    CHECK(mgt_tok_encode(tok, text, len, &ids2, &n2, &cap2) == 0, "encode again");
    dt2 = now_s() - t0;
    printf("%s speed: %zu bytes -> %zu tokens in %.3f s (%.1f MB/s), again with a warm "
           "cache %.3f s (%.1f MB/s)\n", label, len, n, dt, (double)len / dt / 1e6, dt2,
           (double)len / dt2 / 1e6);
    CHECK(n == n2 && memcmp(ids, ids2, n * sizeof *ids) == 0, "second encode differs");
    CHECK(round_trips(tok, ids, n, text, len), "decode round trip of %s", path);
#ifdef __OPTIMIZE__
    CHECK(dt < 2.0, "too slow: %.3f s (want well under 2 s)", dt);
#endif
    free(ids); free(ids2); free(text);
}

#ifndef TEST_TOKENIZER_NO_MAIN   /* test_hf_tokenizer.c reuses the helpers above */
int main(int argc, char **argv) {
    /* the project's copy (./setup.sh --gpt2 fetches it), else the shared data beside the checkout */
    const char *bpe_dir = argc > 1 ? argv[1] : access("data/gpt2-bpe/encoder.json", R_OK) == 0 ? "data/gpt2-bpe" : "../shared/data/gpt2-bpe";
    const char *shakespeare = argc > 2 ? argv[2] : "../shared/data/tinyshakespeare/input.txt";
    const char *fixture = argc > 3 ? argv[3] : "tests/fixtures/tokenizer_gpt2.txt";
    mgt_tokenizer *tok;
    char err[512], probe[600];
    FILE *f;

    test_byte();
    test_errors();
    snprintf(probe, sizeof probe, "%s/encoder.json", bpe_dir);
    f = fopen(probe, "rb");
    if (!f) {
        if (failures) { printf("%d FAILED\n", failures); return 1; }
        printf("SKIP: GPT-2 tests: %s not found (pass the gpt2-bpe directory as argv[1])\n", probe);
        return 77;
    }
    fclose(f);
    {
        double t0 = now_s();
        CHECK(mgt_tok_open(&tok, "gpt2", bpe_dir, err, sizeof err) == 0, "open gpt2: %s", err);
        if (failures) { printf("%d FAILED\n", failures); return 1; }
        printf("gpt2: loaded %s in %.3f s\n", bpe_dir, now_s() - t0);
    }
    test_gpt2_misc(tok);
    test_fixture(tok, "gpt2", fixture, shakespeare, NULL);
    test_speed(tok, "gpt2", shakespeare);
    mgt_tok_close(tok);
    if (failures) { printf("%d FAILED\n", failures); return 1; }
    printf("all tokenizer tests passed\n");
    return 0;
}
#endif
