/* mgt prepare.h - v0.1.0 - MIT licence - token shard writer and `mgt prepare`

   USAGE
     Define MGT_PREPARE_IMPLEMENTATION in exactly one C or C++ file before
     including this header. The implementation calls data/tokenizer.h, so
     MGT_TOKENIZER_IMPLEMENTATION must be defined in one file too (the same or
     another). It uses POSIX (fsync, ftruncate, fileno, isatty, clock_gettime):
     under strict -std=c99 this header defines _POSIX_C_SOURCE itself when it
     is included before any system header; otherwise define
     _POSIX_C_SOURCE 200809L at the top of the implementing file.

       #define MGT_TOKENIZER_IMPLEMENTATION
       #define MGT_PREPARE_IMPLEMENTATION
       #include "data/prepare.h"

   CONTENTS
     mgt_shard_write    write one token shard atomically
     mgt_prepare_main   the whole `mgt prepare` subcommand

   SHARD FORMATS (llm.c's, dev/data/data_common.py)
     256 little-endian int32: [0] = magic, [1] = version, [2] = number of tokens,
     the rest 0; then the tokens, little-endian:
       16-bit: magic 20240520 (MGT_PREP_SHARD_MAGIC), version 1, uint16 tokens
       32-bit: magic 20240801 (MGT_PREP_SHARD_MAGIC32), version 7, uint32 tokens
               (llm.c's Llama 3 format), for vocabularies of more than 65536 ids
     A shard is written as PATH.tmp, flushed, fsynced and renamed to PATH, so
     PATH is either the old file or the complete new one.

   mgt prepare --tokenizer byte|gpt2|hf [--bpe-dir DIR] [--tokenizer-json FILE]
               [--val-fraction F] INPUT... -o PREFIX
     Tokenizes the inputs as one stream (gpt2: the end-of-text token 50256
     before each input, as GPT-2 marks document starts; hf: the token its
     post-processor starts a text with, as Llama 3's <|begin_of_text|>, or
     <|endoftext|>, if it has one) and writes the last F of it (rounded to the
     nearest token) to PREFIX_val.bin and the rest to PREFIX_train.bin. Inputs
     are read in chunks; BPE tokenizers cut chunks only between a non-space
     character, a newline and a non-space character, where the pre-tokenizer
     always cuts as well, so the result equals tokenizing each whole file.
     (hf: true of the patterns of GPT-2, Llama 3 and Qwen, whose pieces never
     run from a newline into a non-space character, and of added tokens
     without a newline; hf needs data/tokenizer.h's MGT_TOK_HF.) The shards are
     16-bit when the tokenizer has at most 65536 ids, else 32-bit.

   ERRORS
     mgt_shard_write returns 0, or -1 with one line in err. mgt_prepare_main
     is a command: it prints errors to stderr as "mgt prepare: <file>: <what>
     (<fix>)" and returns the exit code: 0 ok, 2 bad arguments or input, 1
     failure at run time (cannot write the output).
*/
#if defined(MGT_PREPARE_IMPLEMENTATION) && defined(__STRICT_ANSI__) && !defined(_FEATURES_H) && \
    !defined(_POSIX_C_SOURCE) && !defined(_XOPEN_SOURCE) && !defined(_GNU_SOURCE) &&          \
    !defined(_DEFAULT_SOURCE) && !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L
#endif

#ifndef MGT_PREPARE_H
#define MGT_PREPARE_H

#include <stddef.h>  /* defines: size_t */
#include <stdint.h>  /* defines: uint16_t, uint32_t */

#include "tokenizer.h"  /* defines: mgt_tokenizer, mgt_tok_* */

/* MGT_STATIC: define (everywhere) to make every function static. */
#ifndef MGT_PREPDEF
#ifdef MGT_STATIC
#if defined(__GNUC__) || defined(__clang__)
#define MGT_PREPDEF static __attribute__((unused)) /* a private copy need not use every function */
#else
#define MGT_PREPDEF static
#endif
#else
#define MGT_PREPDEF extern
#endif
#endif

#define MGT_PREP_SHARD_MAGIC 20240520
#define MGT_PREP_SHARD_VERSION 1
#define MGT_PREP_SHARD_MAGIC32 20240801
#define MGT_PREP_SHARD_VERSION32 7
#define MGT_PREP_SHARD_HEADER_INTS 256

#ifdef __cplusplus
extern "C" {
#endif

/* The bytes per token of the shards of a vocabulary of vocab_size ids: 2 up to 65536, else 4. */
MGT_PREPDEF int mgt_shard_width(int vocab_size);

/* Writes tokens[0..n) as a shard of `width`-byte tokens (2 or 4, see mgt_shard_width) at path
   (via path.tmp, fsync, rename). Returns 0, or -1 with a one-line message in err (n above
   INT32_MAX, a token over 65535 in a 16-bit shard, I/O). */
MGT_PREPDEF int mgt_shard_write(const char *path, const uint32_t *tokens, size_t n, int width,
                                char *err, size_t errlen);

/* The whole subcommand: argv[0] is "prepare". Returns the exit code
   (0 ok, 2 bad arguments or input, 1 failure at run time). */
MGT_PREPDEF int mgt_prepare_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif /* MGT_PREPARE_H */

#ifdef MGT_PREPARE_IMPLEMENTATION
#ifndef MGT_PREPARE_IMPLEMENTED
#define MGT_PREPARE_IMPLEMENTED

#include <errno.h>   /* defines: errno */
#include <stdarg.h>  /* defines: va_list */
#include <stdio.h>   /* defines: FILE, fopen, fwrite, rename, fprintf */
#include <stdlib.h>  /* defines: malloc, realloc, free, strtod */
#include <string.h>  /* defines: strcmp, strncmp, strerror, memmove */
#include <time.h>    /* defines: clock_gettime, clock */

#ifdef _WIN32
#include <io.h>      /* defines: _commit, _chsize_s, _isatty, _fileno */
#define mgt__prep_fileno(f) _fileno(f)
#define mgt__prep_fsync(fd) _commit(fd)
#define mgt__prep_truncate(fd, n) _chsize_s(fd, (long long)(n))
#define mgt__prep_isatty(fd) _isatty(fd)
#else
#include <unistd.h>  /* defines: fsync, ftruncate, isatty */
#if defined(__GLIBC__) && !defined(__USE_POSIX199309)
#error "data/prepare.h needs POSIX: #define _POSIX_C_SOURCE 200809L before the first #include in the file that defines MGT_PREPARE_IMPLEMENTATION"
#endif
#define mgt__prep_fileno(f) fileno(f)
#define mgt__prep_fsync(fd) fsync(fd)
#define mgt__prep_truncate(fd, n) ftruncate(fd, (off_t)(n))
#define mgt__prep_isatty(fd) isatty(fd)
#endif

#define MGT__PREP_CHUNK (1u << 20)          /* input bytes read at a time */
#define MGT__PREP_PROGRESS_BYTES (4u << 20) /* progress also when not a terminal above this */
#define MGT__PREP_INT32_MAX 2147483647u

static double mgt__prep_now(void) {
#if defined(_WIN32)
    return (double)clock() / CLOCKS_PER_SEC;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
#endif
}

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 3, 4)))
#endif
static void mgt__prep_err(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    if (!err || !errlen) return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ---- shards -------------------------------------------------------------- */

typedef struct {
    FILE *f;
    char *path, *tmp;   /* final name, name while writing */
    size_t n;           /* tokens written */
    int width;          /* bytes per token: 2 or 4 */
} mgt__prep_shard;

static void mgt__prep_shard_abort(mgt__prep_shard *s) {
    if (s->f) fclose(s->f);
    if (s->tmp) remove(s->tmp);
    free(s->path); free(s->tmp);
    memset(s, 0, sizeof *s);
}

static int mgt__prep_shard_open(mgt__prep_shard *s, const char *path, int width, char *err,
                                size_t errlen) {
    static const unsigned char zero[4 * MGT_PREP_SHARD_HEADER_INTS] = {0};
    size_t len = strlen(path);
    memset(s, 0, sizeof *s);
    s->width = width;
    s->path = (char *)malloc(len + 1);
    s->tmp = (char *)malloc(len + 5);
    if (!s->path || !s->tmp) {
        mgt__prep_err(err, errlen, "%s: out of memory", path);
        free(s->path); free(s->tmp); s->path = s->tmp = NULL;
        return -1;
    }
    memcpy(s->path, path, len + 1);
    memcpy(s->tmp, path, len);
    memcpy(s->tmp + len, ".tmp", 5);
    s->f = fopen(s->tmp, "wb+");
    if (!s->f) {
        mgt__prep_err(err, errlen, "%s: cannot create (%s) (check that the directory exists "
                      "and is writable)", s->tmp, strerror(errno));
        free(s->path); free(s->tmp); s->path = s->tmp = NULL;
        return -1;
    }
    if (fwrite(zero, 1, sizeof zero, s->f) != sizeof zero) {
        mgt__prep_err(err, errlen, "%s: write error (%s)", s->tmp, strerror(errno));
        mgt__prep_shard_abort(s);
        return -1;
    }
    return 0;
}

/* Appends tokens, little-endian on every host; a 16-bit shard refuses a token over 65535. */
static int mgt__prep_shard_append(mgt__prep_shard *s, const uint32_t *tok, size_t n,
                                  char *err, size_t errlen) {
    unsigned char buf[8192];
    size_t i = 0;
    while (i < n) {
        size_t k = n - i < sizeof buf / 4 ? n - i : sizeof buf / 4, j;
        int b;
        for (j = 0; j < k; j++) {
            if (s->width == 2 && tok[i + j] > 65535u) {
                mgt__prep_err(err, errlen, "%s: token %lu (id %lu) does not fit a 16-bit shard "
                              "(write it with width 4)", s->path, (unsigned long)(s->n + i + j),
                              (unsigned long)tok[i + j]);
                return -1;
            }
            for (b = 0; b < s->width; b++)
                buf[(size_t)s->width * j + (size_t)b] = (unsigned char)(tok[i + j] >> (8 * b));
        }
        if (fwrite(buf, (size_t)s->width, k, s->f) != k) {
            mgt__prep_err(err, errlen, "%s: write error (%s)", s->tmp, strerror(errno));
            return -1;
        }
        i += k;
    }
    s->n += n;
    return 0;
}

/* Writes the header for s->n tokens, flushes, fsyncs, closes and renames. */
static int mgt__prep_shard_finish(mgt__prep_shard *s, char *err, size_t errlen) {
    unsigned char hdr[12];
    uint32_t v[3];
    int i;
    if (s->n > MGT__PREP_INT32_MAX) {
        mgt__prep_err(err, errlen, "%s: %lu tokens, a shard holds at most 2147483647",
                      s->path, (unsigned long)s->n);
        mgt__prep_shard_abort(s);
        return -1;
    }
    v[0] = s->width == 4 ? MGT_PREP_SHARD_MAGIC32 : MGT_PREP_SHARD_MAGIC;
    v[1] = s->width == 4 ? MGT_PREP_SHARD_VERSION32 : MGT_PREP_SHARD_VERSION;
    v[2] = (uint32_t)s->n;
    for (i = 0; i < 12; i++) hdr[i] = (unsigned char)(v[i / 4] >> (8 * (i % 4)));
    if (fflush(s->f) != 0 || fseek(s->f, 0, SEEK_SET) != 0 || fwrite(hdr, 1, 12, s->f) != 12 ||
        fflush(s->f) != 0 || mgt__prep_fsync(mgt__prep_fileno(s->f)) != 0) {
        mgt__prep_err(err, errlen, "%s: write error (%s)", s->tmp, strerror(errno));
        mgt__prep_shard_abort(s);
        return -1;
    }
    if (fclose(s->f) != 0) {
        s->f = NULL;
        mgt__prep_err(err, errlen, "%s: write error (%s)", s->tmp, strerror(errno));
        mgt__prep_shard_abort(s);
        return -1;
    }
    s->f = NULL;
#ifdef _WIN32
    remove(s->path);
#endif
    if (rename(s->tmp, s->path) != 0) {
        mgt__prep_err(err, errlen, "%s: cannot rename %s to it (%s)", s->path, s->tmp,
                      strerror(errno));
        mgt__prep_shard_abort(s);
        return -1;
    }
    free(s->path); free(s->tmp);
    memset(s, 0, sizeof *s);
    return 0;
}

MGT_PREPDEF int mgt_shard_width(int vocab_size) { return vocab_size > 65536 ? 4 : 2; }

MGT_PREPDEF int mgt_shard_write(const char *path, const uint32_t *tokens, size_t n, int width,
                                char *err, size_t errlen) {
    mgt__prep_shard s;
    if (err && errlen) err[0] = 0;
    if (!path || (!tokens && n)) {
        mgt__prep_err(err, errlen, "mgt_shard_write: path or tokens is NULL");
        return -1;
    }
    if (width != 2 && width != 4) {
        mgt__prep_err(err, errlen, "%s: token width %d (use 2 or 4 bytes, see mgt_shard_width)",
                      path, width);
        return -1;
    }
    if (n > MGT__PREP_INT32_MAX) {
        mgt__prep_err(err, errlen, "%s: %lu tokens, a shard holds at most 2147483647", path,
                      (unsigned long)n);
        return -1;
    }
    if (mgt__prep_shard_open(&s, path, width, err, errlen)) return -1;
    if (mgt__prep_shard_append(&s, tokens, n, err, errlen)) { mgt__prep_shard_abort(&s); return -1; }
    return mgt__prep_shard_finish(&s, err, errlen);
}

/* Moves the last n_val tokens of train into val and truncates train. */
static int mgt__prep_split(mgt__prep_shard *train, mgt__prep_shard *val, size_t n_val,
                           char *err, size_t errlen) {
    unsigned char buf[65536];
    size_t n_train = train->n - n_val, left = (size_t)train->width * n_val;
    long long off = 4LL * MGT_PREP_SHARD_HEADER_INTS + (long long)train->width * (long long)n_train;
    if (fflush(train->f) != 0) goto io;
    if (n_val > 0) {
        if (off > 2147483647LL) {
            /* beyond long: fall back to reading through from the start */
            long long skip = off;
            if (fseek(train->f, 0, SEEK_SET) != 0) goto io;
            while (skip > 0) {
                size_t k = skip < (long long)sizeof buf ? (size_t)skip : sizeof buf;
                if (fread(buf, 1, k, train->f) != k) goto io;
                skip -= (long long)k;
            }
        } else if (fseek(train->f, (long)off, SEEK_SET) != 0) goto io;
        while (left > 0) {
            size_t k = left < sizeof buf ? left : sizeof buf;
            if (fread(buf, 1, k, train->f) != k) goto io;
            if (fwrite(buf, 1, k, val->f) != k) {
                mgt__prep_err(err, errlen, "%s: write error (%s)", val->tmp, strerror(errno));
                return -1;
            }
            left -= k;
        }
        val->n += n_val;
        if (fflush(train->f) != 0 || fseek(train->f, 0, SEEK_SET) != 0) goto io;
        if (mgt__prep_truncate(mgt__prep_fileno(train->f), off) != 0) goto io;
    }
    train->n = n_train;
    return 0;
io:
    mgt__prep_err(err, errlen, "%s: read/write error while splitting off the val tokens (%s)",
                  train->tmp, strerror(errno));
    return -1;
}

/* ---- the subcommand ------------------------------------------------------ */

static void mgt__prep_usage(FILE *f, int full) {
    fprintf(f, "usage: mgt prepare [--tokenizer byte|gpt2|hf] [--bpe-dir DIR] [--tokenizer-json FILE] "
            "[--val-fraction F] INPUT... -o PREFIX\n");
    if (!full) return;
    fprintf(f,
        "  Tokenizes the text files INPUT... into PREFIX_train.bin and PREFIX_val.bin.\n"
        "  --tokenizer byte|gpt2|hf  byte: one token per byte (vocabulary 256, default);\n"
        "                          gpt2: GPT-2 BPE (vocabulary 50257, end-of-text before each input)\n"
        "                          hf: a Hugging Face tokenizer.json of byte-level BPE (Llama 3, SmolLM)\n"
        "  --bpe-dir DIR           directory with encoder.json and vocab.bpe (default data/gpt2-bpe)\n"
        "  --tokenizer-json FILE   the tokenizer.json of --tokenizer hf\n"
        "  --val-fraction F        the last fraction F of the tokens goes to PREFIX_val.bin,\n"
        "                          0 <= F <= 0.5 (default 0.1)\n"
        "  -o, --output PREFIX     output prefix (required)\n");
}

/* Where the GPT-2 pre-tokenizer is sure to cut: after "X\n" followed by Y, with
   X and Y printable non-space ASCII. Returns the last such cut in b[0..n), or 0. */
static size_t mgt__prep_safe_cut(const char *b, size_t n) {
    size_t p;
    if (n < 3) return 0;
    for (p = n - 1; p >= 2; p--) {
        if (b[p - 1] == '\n' && b[p - 2] > ' ' && b[p - 2] < 127 && b[p] > ' ' && b[p] < 127)
            return p;
    }
    return 0;
}

typedef struct {
    int show;             /* progress lines on stderr */
    double t0, last;
    size_t bytes_done, bytes_total, width;
} mgt__prep_progress;

static void mgt__prep_progress_line(mgt__prep_progress *pg, size_t tokens) {
    char line[160];
    int k;
    double t = mgt__prep_now();
    if (!pg->show || t - pg->last < 0.25) return;
    pg->last = t;
    if (pg->bytes_total > 0)
        k = snprintf(line, sizeof line, "prepare: %.1f / %.1f MB (%.0f%%), %lu tokens, %.1f MB/s",
                     pg->bytes_done / 1e6, pg->bytes_total / 1e6,
                     100.0 * (double)pg->bytes_done / (double)pg->bytes_total,
                     (unsigned long)tokens, pg->bytes_done / 1e6 / (t - pg->t0 + 1e-9));
    else
        k = snprintf(line, sizeof line, "prepare: %.1f MB, %lu tokens", pg->bytes_done / 1e6,
                     (unsigned long)tokens);
    if (k > 0 && (size_t)k > pg->width) pg->width = (size_t)k;
    fprintf(stderr, "\r%-*s", (int)pg->width, line);
    fflush(stderr);
}

/* Tokenizes one input into the train shard. Returns 0, 1 (run time) or 2 (input). */
static int mgt__prep_file(const char *path, mgt_tokenizer *tok, mgt__prep_shard *train,
                          mgt__prep_progress *pg, int bpe, char **buf, size_t *cap,
                          uint32_t **ids, size_t *cap_ids, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    size_t len = 0, n;
    int eof = 0;
    if (!f) {
        mgt__prep_err(err, errlen, "%s: cannot open (%s) (check the path)", path, strerror(errno));
        return 2;
    }
    if (mgt_tok_eot(tok) >= 0) {
        uint32_t eot = (uint32_t)mgt_tok_eot(tok);
        if (mgt__prep_shard_append(train, &eot, 1, err, errlen)) { fclose(f); return 1; }
    }
    while (!eof) {
        size_t got, cut;
        if (len == *cap) {                   /* no cut found in a full buffer: grow */
            size_t nc = *cap ? 2 * *cap : MGT__PREP_CHUNK;
            char *nb = (char *)realloc(*buf, nc);
            if (!nb) {
                mgt__prep_err(err, errlen, "%s: out of memory (a %lu-byte stretch without a "
                              "place to cut)", path, (unsigned long)nc);
                fclose(f);
                return 1;
            }
            *buf = nb; *cap = nc;
        }
        got = fread(*buf + len, 1, *cap - len, f);
        if (got == 0) {
            if (ferror(f)) {
                mgt__prep_err(err, errlen, "%s: read error (%s)", path, strerror(errno));
                fclose(f);
                return 2;
            }
            eof = 1;
        }
        len += got;
        pg->bytes_done += got;
        if (len == 0) break;
        cut = eof || !bpe ? len : mgt__prep_safe_cut(*buf, len);
        if (cut == 0) continue;
        n = 0;
        if (mgt_tok_encode(tok, *buf, cut, ids, &n, cap_ids)) {
            mgt__prep_err(err, errlen, "%s: out of memory while tokenizing", path);
            fclose(f);
            return 1;
        }
        if (train->n + n > MGT__PREP_INT32_MAX) {
            mgt__prep_err(err, errlen, "%s: more than 2147483647 tokens in all (a shard holds "
                          "at most INT32_MAX tokens; split the inputs across several prepare "
                          "runs)", path);
            fclose(f);
            return 2;
        }
        if (mgt__prep_shard_append(train, *ids, n, err, errlen)) { fclose(f); return 1; }
        memmove(*buf, *buf + cut, len - cut);
        len -= cut;
        mgt__prep_progress_line(pg, train->n);
    }
    fclose(f);
    return 0;
}

static const char *mgt__prep_opt(int argc, char **argv, int *i, const char *name, int *bad) {
    size_t k = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, k) != 0) return NULL;
    if (a[k] == '=') return a + k + 1;
    if (a[k] != 0) return NULL;
    if (*i + 1 >= argc) { *bad = 1; return NULL; }
    return argv[++*i];
}

MGT_PREPDEF int mgt_prepare_main(int argc, char **argv) {
    const char *kind = "byte", *bpe_dir = "data/gpt2-bpe", *json = NULL, *prefix = NULL, *vf = NULL;
    const char **inputs = NULL;
    char err[1024], *path = NULL, *buf = NULL;
    double frac = 0.1;
    int i, ninputs = 0, rc = 2, only_inputs = 0, width;
    mgt_tokenizer *tok = NULL;
    mgt__prep_shard train, val;
    mgt__prep_progress pg;
    uint32_t *ids = NULL;
    size_t cap = 0, cap_ids = 0, n_total, n_val, plen;

    memset(&train, 0, sizeof train);
    memset(&val, 0, sizeof val);
    memset(&pg, 0, sizeof pg);
    inputs = (const char **)malloc((size_t)(argc > 0 ? argc : 1) * sizeof *inputs);
    if (!inputs) { fprintf(stderr, "mgt prepare: out of memory\n"); return 1; }
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int bad = 0;
        if (only_inputs || a[0] != '-' || a[1] == 0) { inputs[ninputs++] = a; continue; }
        if (strcmp(a, "--") == 0) { only_inputs = 1; continue; }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            mgt__prep_usage(stdout, 1);
            free(inputs);
            return 0;
        }
        if ((v = mgt__prep_opt(argc, argv, &i, "--tokenizer", &bad)) != NULL) kind = v;
        else if ((v = mgt__prep_opt(argc, argv, &i, "--bpe-dir", &bad)) != NULL) bpe_dir = v;
        else if ((v = mgt__prep_opt(argc, argv, &i, "--tokenizer-json", &bad)) != NULL) json = v;
        else if ((v = mgt__prep_opt(argc, argv, &i, "--val-fraction", &bad)) != NULL) vf = v;
        else if ((v = mgt__prep_opt(argc, argv, &i, "--output", &bad)) != NULL) prefix = v;
        else if ((v = mgt__prep_opt(argc, argv, &i, "-o", &bad)) != NULL) prefix = v;
        if (bad) {
            fprintf(stderr, "mgt prepare: %s: missing value (see mgt prepare --help)\n", a);
            goto out;
        }
        if (!v) {
            fprintf(stderr, "mgt prepare: %s: unknown option\n", a);
            mgt__prep_usage(stderr, 1);
            goto out;
        }
    }
    if (strcmp(kind, "byte") != 0 && strcmp(kind, "gpt2") != 0 && strcmp(kind, "hf") != 0) {
        fprintf(stderr, "mgt prepare: --tokenizer: unknown tokenizer '%s' (use byte, gpt2 or hf)\n", kind);
        goto out;
    }
    if (!strcmp(kind, "hf") && (!json || !*json)) {
        fprintf(stderr, "mgt prepare: --tokenizer hf needs --tokenizer-json FILE, a Hugging Face "
                "tokenizer.json\n");
        goto out;
    }
    if (vf) {
        char *end;
        errno = 0;
        frac = strtod(vf, &end);
        if (end == vf || *end != 0 || errno != 0 || frac != frac) {
            fprintf(stderr, "mgt prepare: --val-fraction: '%s' is not a number (valid: 0 to 0.5, e.g. --val-fraction 0.1)\n", vf);
            goto out;
        }
        if (!(frac >= 0.0 && frac <= 0.5)) {
            fprintf(stderr, "mgt prepare: --val-fraction: %s is out of range (valid: 0 to 0.5, e.g. --val-fraction 0.1)\n", vf);
            goto out;
        }
    }
    if (!prefix || !*prefix) {
        fprintf(stderr, "mgt prepare: missing -o PREFIX (the outputs are PREFIX_train.bin and "
                "PREFIX_val.bin)\n");
        mgt__prep_usage(stderr, 0);
        goto out;
    }
    if (ninputs == 0) {
        fprintf(stderr, "mgt prepare: no INPUT files (give one or more text files)\n");
        mgt__prep_usage(stderr, 0);
        goto out;
    }
    for (i = 0; i < ninputs; i++) {          /* check every input before any work */
        FILE *f = fopen(inputs[i], "rb");
        if (!f) {
            fprintf(stderr, "mgt prepare: %s: cannot open (%s) (check the path)\n", inputs[i],
                    strerror(errno));
            goto out;
        }
        if (fseek(f, 0, SEEK_END) == 0) {
            long sz = ftell(f);
            if (sz > 0) pg.bytes_total += (size_t)sz;
        }
        fclose(f);
    }
    if (mgt_tok_open(&tok, kind, strcmp(kind, "hf") ? bpe_dir : json, err, sizeof err)) {
        fprintf(stderr, "mgt prepare: %s%s\n", err, strcmp(kind, "gpt2") ? "" : " (`./setup.sh --gpt2` fetches GPT-2's encoder.json and "
                "vocab.bpe into data/gpt2-bpe; or pass --bpe-dir DIR, a directory that has them)");
        goto out;
    }

    rc = 1;
    plen = strlen(prefix);
    path = (char *)malloc(plen + 16);
    if (!path) { fprintf(stderr, "mgt prepare: out of memory\n"); goto out; }
    snprintf(path, plen + 16, "%s_train.bin", prefix);
    width = mgt_shard_width(mgt_tok_vocab_size(tok));
    if (mgt__prep_shard_open(&train, path, width, err, sizeof err)) {
        fprintf(stderr, "mgt prepare: %s\n", err);
        goto out;
    }
    snprintf(path, plen + 16, "%s_val.bin", prefix);
    if (mgt__prep_shard_open(&val, path, width, err, sizeof err)) {
        fprintf(stderr, "mgt prepare: %s\n", err);
        goto out;
    }

    pg.show = mgt__prep_isatty(mgt__prep_fileno(stderr)) || pg.bytes_total > MGT__PREP_PROGRESS_BYTES;
    pg.t0 = mgt__prep_now();
    pg.last = pg.t0;
    for (i = 0; i < ninputs; i++) {
        int r = mgt__prep_file(inputs[i], tok, &train, &pg, strcmp(kind, "byte") != 0, &buf, &cap,
                               &ids, &cap_ids, err, sizeof err);
        if (r) {
            if (pg.width) fprintf(stderr, "\n");
            fprintf(stderr, "mgt prepare: %s\n", err);
            rc = r;
            goto out;
        }
    }
    n_total = train.n;
    if (n_total == 0) {
        if (pg.width) fprintf(stderr, "\n");
        fprintf(stderr, "mgt prepare: %s: no tokens (the inputs are empty)\n", inputs[0]);
        rc = 2;
        goto out;
    }
    n_val = (size_t)((double)n_total * frac + 0.5);   /* nearest */
    if (n_val > n_total) n_val = n_total;
    if (mgt__prep_split(&train, &val, n_val, err, sizeof err) ||
        mgt__prep_shard_finish(&train, err, sizeof err) ||
        mgt__prep_shard_finish(&val, err, sizeof err)) {
        if (pg.width) fprintf(stderr, "\n");
        fprintf(stderr, "mgt prepare: %s\n", err);
        goto out;
    }
    {
        char line[256];
        int k = snprintf(line, sizeof line, "prepare: %lu bytes -> %lu tokens (train %lu, val %lu, "
                         "%d-bit shards) in %.2f s", (unsigned long)pg.bytes_done,
                         (unsigned long)n_total, (unsigned long)(n_total - n_val),
                         (unsigned long)n_val, 8 * width, mgt__prep_now() - pg.t0);
        fprintf(stderr, "%s%-*s\n", pg.width ? "\r" : "", k > (int)pg.width ? k : (int)pg.width,
                line);
    }
    if (n_val == 0)
        fprintf(stderr, "mgt prepare: warning: %s_val.bin is empty (--val-fraction %g of %lu "
                "tokens is less than one token)\n", prefix, frac, (unsigned long)n_total);
    { /* a shard shorter than one sequence (seq_len + 1 tokens) is refused by mgt train: say so
         now, against the quick start's seq_len 128 */
        size_t counts[2];
        const char *names[2] = {"train", "val"};
        int k;
        counts[0] = n_total - n_val, counts[1] = n_val;
        for (k = 0; k < 2; k++)
            if (counts[k] > 0 && counts[k] < 129)
                fprintf(stderr, "mgt prepare: warning: %s_%s.bin holds %lu tokens: a preset reads it only with [model] "
                        "seq_len %lu or less (a sequence is seq_len + 1 tokens; the quick start's is 128): give more text%s\n",
                        prefix, names[k], (unsigned long)counts[k], (unsigned long)(counts[k] - 1),
                        k ? " or a larger --val-fraction" : "");
    }
    rc = 0;
out:
    mgt__prep_shard_abort(&train);
    mgt__prep_shard_abort(&val);
    mgt_tok_close(tok);
    free(inputs); free(path); free(buf); free(ids);
    return rc;
}

#endif /* MGT_PREPARE_IMPLEMENTED */
#endif /* MGT_PREPARE_IMPLEMENTATION */
