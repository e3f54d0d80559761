/* mgt prepare.h - v0.1.0 - MIT licence - token shard writer and corpus preparer (`mgt prepare`)

   USAGE
     Define MGT_PREPARE_IMPLEMENTATION in exactly one C or C++ file before
     including this header. The implementation calls data/tokenizer.h, so
     MGT_TOKENIZER_IMPLEMENTATION must be defined in one file too (the same or
     another). It uses POSIX (fsync, ftruncate, fileno, clock_gettime): under
     strict -std=c99 this header defines _POSIX_C_SOURCE itself when it is
     included before any system header; otherwise define
     _POSIX_C_SOURCE 200809L at the top of the implementing file.

       #define MGT_TOKENIZER_IMPLEMENTATION
       #define MGT_PREPARE_IMPLEMENTATION
       #include "data/prepare.h"

   CONTENTS
     mgt_shard_write           write one token shard atomically
     mgt_prepare_options_init  the preparer's defaults
     mgt_prepare               tokenize text files into PREFIX_train.bin and PREFIX_val.bin
                               (mgt.c's `mgt prepare` is its command line)

   SHARD FORMATS (llm.c's, dev/data/data_common.py)
     256 little-endian int32: [0] = magic, [1] = version, [2] = number of tokens,
     the rest 0; then the tokens, little-endian:
       16-bit: magic 20240520 (MGT_PREP_SHARD_MAGIC), version 1, uint16 tokens
       32-bit: magic 20240801 (MGT_PREP_SHARD_MAGIC32), version 7, uint32 tokens
               (llm.c's Llama 3 format), for vocabularies of more than 65536 ids
     A shard is written as PATH.tmp, flushed, fsynced and renamed to PATH, so
     PATH is either the old file or the complete new one.

   PREPARING A CORPUS (mgt_prepare)
     Tokenizes the inputs as one stream (gpt2: the end-of-text token 50256
     before each input, as GPT-2 marks document starts; hf: the token its
     post-processor starts a text with, as Llama 3's <|begin_of_text|>, or
     <|endoftext|>, if it has one) and writes the last val_fraction of it
     (rounded to the nearest token) to PREFIX_val.bin and the rest to
     PREFIX_train.bin. Inputs are read in chunks; BPE tokenizers cut chunks
     only between a non-space character, a newline and a non-space character,
     where the pre-tokenizer always cuts as well, so the result equals
     tokenizing each whole file. (hf: true of the patterns of GPT-2, Llama 3
     and Qwen, whose pieces never run from a newline into a non-space
     character, and of added tokens without a newline; hf needs
     data/tokenizer.h's MGT_TOK_HF.) The shards are 16-bit when the tokenizer
     has at most 65536 ids, else 32-bit. A failed run leaves no output file.

   ERRORS
     Nothing here prints. mgt_shard_write returns 0, or -1 with one line in
     err. mgt_prepare returns 0, or a negative MGT_PREP_ERROR_* that says
     whose fault it was, with one line in err ("<file>: <what> (<fix>)").
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

/* mgt_prepare's errors (0 is success) */
#define MGT_PREP_ERROR_ARGUMENT (-1)  /* the options: see mgt_prepare_options */
#define MGT_PREP_ERROR_INPUT (-2)     /* an input cannot be read; no tokens, or over INT32_MAX */
#define MGT_PREP_ERROR_TOKENIZER (-3) /* the tokenizer's files cannot be read or are malformed */
#define MGT_PREP_ERROR_OUTPUT (-4)    /* a shard cannot be written, or memory ran out */

/* How far mgt_prepare is, after each chunk of input it tokenized. */
typedef struct mgt_prepare_progress {
    size_t bytes_done, bytes_total; /* input bytes read, and the sizes of all inputs */
    size_t tokens;                  /* tokens written so far */
    double seconds;                 /* since tokenizing began */
} mgt_prepare_progress;
typedef void (*mgt_prepare_progress_fn)(void *user, const mgt_prepare_progress *progress);

typedef struct mgt_prepare_options {
    const char *tokenizer;        /* "byte" (one token per byte, the default), "gpt2" or "hf" */
    const char *bpe_dir;          /* gpt2: encoder.json and vocab.bpe's folder ("data/gpt2-bpe") */
    const char *tokenizer_json;   /* hf: a Hugging Face tokenizer.json (required) */
    double val_fraction;          /* the last part of the tokens for PREFIX_val.bin, 0..0.5 (0.1) */
    const char *const *inputs;    /* the text files, tokenized as one stream (at least one) */
    int ninputs;
    const char *prefix;           /* the outputs: PREFIX_train.bin and PREFIX_val.bin (required) */
    mgt_prepare_progress_fn progress; /* optional, called on the calling thread */
    void *user;                   /* passed to progress */
} mgt_prepare_options;

/* What mgt_prepare wrote. */
typedef struct mgt_prepare_result {
    size_t bytes;                     /* input bytes read */
    size_t train_tokens, val_tokens;
    int width;                        /* bytes per token of both shards: 2 or 4 */
    double seconds;                   /* tokenizing and writing */
} mgt_prepare_result;

/* The defaults above, no inputs and no prefix. */
MGT_PREPDEF void mgt_prepare_options_init(mgt_prepare_options *opt);

/* Checks the options, then that every input opens, then opens the tokenizer, then tokenizes and
   writes both shards (out may be NULL). Returns 0, or a MGT_PREP_ERROR_* with a one-line message
   in err; a failed run leaves no output behind. */
MGT_PREPDEF int mgt_prepare(const mgt_prepare_options *opt, mgt_prepare_result *out, char *err,
                            size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* MGT_PREPARE_H */

#ifdef MGT_PREPARE_IMPLEMENTATION
#ifndef MGT_PREPARE_IMPLEMENTED
#define MGT_PREPARE_IMPLEMENTED

#include <errno.h>   /* defines: errno */
#include <stdarg.h>  /* defines: va_list */
#include <stdio.h>   /* defines: FILE, fopen, fwrite, rename, snprintf */
#include <stdlib.h>  /* defines: malloc, realloc, free */
#include <string.h>  /* defines: strcmp, strerror, memmove */
#include <time.h>    /* defines: clock_gettime, clock */

#ifdef _WIN32
#include <io.h>      /* defines: _commit, _chsize_s, _fileno */
#define mgt__prep_fileno(f) _fileno(f)
#define mgt__prep_fsync(fd) _commit(fd)
#define mgt__prep_truncate(fd, n) _chsize_s(fd, (long long)(n))
#else
#include <unistd.h>  /* defines: fsync, ftruncate */
#if defined(__GLIBC__) && !defined(__USE_POSIX199309)
#error "data/prepare.h needs POSIX: #define _POSIX_C_SOURCE 200809L before the first #include in the file that defines MGT_PREPARE_IMPLEMENTATION"
#endif
#define mgt__prep_fileno(f) fileno(f)
#define mgt__prep_fsync(fd) fsync(fd)
#define mgt__prep_truncate(fd, n) ftruncate(fd, (off_t)(n))
#endif

#define MGT__PREP_CHUNK (1u << 20)          /* input bytes read at a time */
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

/* ---- preparing a corpus -------------------------------------------------- */

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

/* One mgt_prepare: the tokenizer, both shards, the reading and encoding buffers, the progress. */
typedef struct {
    mgt_tokenizer *tok;
    int bpe;                     /* cut chunks only where the pre-tokenizer cuts */
    mgt__prep_shard train, val;
    char *buf;                   /* input not yet tokenized */
    size_t cap;
    uint32_t *ids;               /* one chunk's tokens */
    size_t cap_ids;
    mgt_prepare_progress now;
    double t0;
    mgt_prepare_progress_fn progress;
    void *user;
} mgt__prep_job;

static int mgt__prep_is_kind(const char *kind) {
    return kind && (!strcmp(kind, "byte") || !strcmp(kind, "gpt2") || !strcmp(kind, "hf"));
}

/* mgt_prepare's options, before any file is opened: 0 or MGT_PREP_ERROR_ARGUMENT (gpt2's bpe_dir is
   mgt_tok_open's to check). */
static int mgt__prep_check_options(const mgt_prepare_options *o, char *err, size_t errlen) {
    int i;
    if (!mgt__prep_is_kind(o->tokenizer)) {
        mgt__prep_err(err, errlen, "tokenizer '%s' is not known (use byte, gpt2 or hf)",
                      o->tokenizer ? o->tokenizer : "(null)");
        return MGT_PREP_ERROR_ARGUMENT;
    }
    if (!strcmp(o->tokenizer, "hf") && (!o->tokenizer_json || !*o->tokenizer_json)) {
        mgt__prep_err(err, errlen, "the hf tokenizer needs tokenizer_json, a Hugging Face "
                      "tokenizer.json");
        return MGT_PREP_ERROR_ARGUMENT;
    }
    if (!(o->val_fraction >= 0.0 && o->val_fraction <= 0.5)) {
        mgt__prep_err(err, errlen, "val_fraction %g is out of range (valid: 0 to 0.5)",
                      o->val_fraction);
        return MGT_PREP_ERROR_ARGUMENT;
    }
    if (!o->prefix || !*o->prefix) {
        mgt__prep_err(err, errlen, "no output prefix (the outputs are PREFIX_train.bin and "
                      "PREFIX_val.bin)");
        return MGT_PREP_ERROR_ARGUMENT;
    }
    if (!o->inputs || o->ninputs < 1) {
        mgt__prep_err(err, errlen, "no inputs (give one or more text files)");
        return MGT_PREP_ERROR_ARGUMENT;
    }
    for (i = 0; i < o->ninputs; i++)
        if (!o->inputs[i]) {
            mgt__prep_err(err, errlen, "input %d of %d is NULL", i + 1, o->ninputs);
            return MGT_PREP_ERROR_ARGUMENT;
        }
    return 0;
}

/* Opens every input before any work, so that a wrong path fails at once; their sizes in *total. */
static int mgt__prep_input_sizes(const mgt_prepare_options *o, size_t *total, char *err,
                                 size_t errlen) {
    int i;
    *total = 0;
    for (i = 0; i < o->ninputs; i++) {
        FILE *f = fopen(o->inputs[i], "rb");
        if (!f) {
            mgt__prep_err(err, errlen, "%s: cannot open (%s) (check the path)", o->inputs[i],
                          strerror(errno));
            return MGT_PREP_ERROR_INPUT;
        }
        if (fseek(f, 0, SEEK_END) == 0) {
            long sz = ftell(f);
            if (sz > 0) *total += (size_t)sz;
        }
        fclose(f);
    }
    return 0;
}

static void mgt__prep_report(mgt__prep_job *j) {
    j->now.tokens = j->train.n;
    j->now.seconds = mgt__prep_now() - j->t0;
    if (j->progress) j->progress(j->user, &j->now);
}

/* Grows j->buf when a full buffer held no place to cut. */
static int mgt__prep_grow(mgt__prep_job *j, const char *path, char *err, size_t errlen) {
    size_t nc = j->cap ? 2 * j->cap : MGT__PREP_CHUNK;
    char *nb = (char *)realloc(j->buf, nc);
    if (!nb) {
        mgt__prep_err(err, errlen, "%s: out of memory (a %lu-byte stretch without a place to "
                      "cut)", path, (unsigned long)nc);
        return MGT_PREP_ERROR_OUTPUT;
    }
    j->buf = nb;
    j->cap = nc;
    return 0;
}

/* Encodes j->buf[0..cut) into the train shard. */
static int mgt__prep_encode(mgt__prep_job *j, const char *path, size_t cut, char *err,
                            size_t errlen) {
    size_t n = 0;
    if (mgt_tok_encode(j->tok, j->buf, cut, &j->ids, &n, &j->cap_ids)) {
        mgt__prep_err(err, errlen, "%s: out of memory while tokenizing", path);
        return MGT_PREP_ERROR_OUTPUT;
    }
    if (j->train.n + n > MGT__PREP_INT32_MAX) {
        mgt__prep_err(err, errlen, "%s: more than 2147483647 tokens in all (a shard holds at "
                      "most INT32_MAX tokens; split the inputs across several prepare runs)", path);
        return MGT_PREP_ERROR_INPUT;
    }
    if (mgt__prep_shard_append(&j->train, j->ids, n, err, errlen)) return MGT_PREP_ERROR_OUTPUT;
    return 0;
}

/* Tokenizes one input into the train shard, after the tokenizer's document start if it has one. */
static int mgt__prep_file(mgt__prep_job *j, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    size_t len = 0;
    int eof = 0, r = 0;
    if (!f) {
        mgt__prep_err(err, errlen, "%s: cannot open (%s) (check the path)", path, strerror(errno));
        return MGT_PREP_ERROR_INPUT;
    }
    if (mgt_tok_eot(j->tok) >= 0) {
        uint32_t eot = (uint32_t)mgt_tok_eot(j->tok);
        if (mgt__prep_shard_append(&j->train, &eot, 1, err, errlen)) r = MGT_PREP_ERROR_OUTPUT;
    }
    while (!r && !eof) {
        size_t got, cut;
        if (len == j->cap && (r = mgt__prep_grow(j, path, err, errlen)) != 0) break;
        got = fread(j->buf + len, 1, j->cap - len, f);
        if (got == 0) {
            if (ferror(f)) {
                mgt__prep_err(err, errlen, "%s: read error (%s)", path, strerror(errno));
                r = MGT_PREP_ERROR_INPUT;
                break;
            }
            eof = 1;
        }
        len += got;
        j->now.bytes_done += got;
        if (len == 0) break;
        cut = eof || !j->bpe ? len : mgt__prep_safe_cut(j->buf, len);
        if (cut == 0) continue;
        if ((r = mgt__prep_encode(j, path, cut, err, errlen)) != 0) break;
        memmove(j->buf, j->buf + cut, len - cut);
        len -= cut;
        mgt__prep_report(j);
    }
    fclose(f);
    return r;
}

/* Opens PREFIX_train.bin and PREFIX_val.bin (as their .tmp files) with width-byte tokens. */
static int mgt__prep_open_shards(mgt__prep_job *j, const char *prefix, int width, char *err,
                                 size_t errlen) {
    size_t cap = strlen(prefix) + 16;
    char *path = (char *)malloc(cap);
    int r = 0;
    if (!path) {
        mgt__prep_err(err, errlen, "out of memory");
        return MGT_PREP_ERROR_OUTPUT;
    }
    snprintf(path, cap, "%s_train.bin", prefix);
    if (mgt__prep_shard_open(&j->train, path, width, err, errlen)) r = MGT_PREP_ERROR_OUTPUT;
    snprintf(path, cap, "%s_val.bin", prefix);
    if (!r && mgt__prep_shard_open(&j->val, path, width, err, errlen)) r = MGT_PREP_ERROR_OUTPUT;
    free(path);
    return r;
}

/* With the tokenizer open: every input into the train shard, its last part moved to val, both
   finished. */
static int mgt__prep_run(mgt__prep_job *j, const mgt_prepare_options *o, mgt_prepare_result *out,
                         char *err, size_t errlen) {
    size_t n_total, n_val;
    int i, r, width = mgt_shard_width(mgt_tok_vocab_size(j->tok));
    if ((r = mgt__prep_open_shards(j, o->prefix, width, err, errlen)) != 0) return r;
    j->t0 = mgt__prep_now();
    for (i = 0; i < o->ninputs; i++)
        if ((r = mgt__prep_file(j, o->inputs[i], err, errlen)) != 0) return r;
    n_total = j->train.n;
    if (n_total == 0) {
        mgt__prep_err(err, errlen, "%s: no tokens (the inputs are empty)", o->inputs[0]);
        return MGT_PREP_ERROR_INPUT;
    }
    n_val = (size_t)((double)n_total * o->val_fraction + 0.5);   /* nearest */
    if (n_val > n_total) n_val = n_total;
    if (mgt__prep_split(&j->train, &j->val, n_val, err, errlen) ||
        mgt__prep_shard_finish(&j->train, err, errlen) ||
        mgt__prep_shard_finish(&j->val, err, errlen))
        return MGT_PREP_ERROR_OUTPUT;
    if (out) {
        out->bytes = j->now.bytes_done;
        out->train_tokens = n_total - n_val;
        out->val_tokens = n_val;
        out->width = width;
        out->seconds = mgt__prep_now() - j->t0;
    }
    return 0;
}

MGT_PREPDEF void mgt_prepare_options_init(mgt_prepare_options *opt) {
    if (!opt) return;
    memset(opt, 0, sizeof *opt);
    opt->tokenizer = "byte";
    opt->bpe_dir = "data/gpt2-bpe";
    opt->val_fraction = 0.1;
}

MGT_PREPDEF int mgt_prepare(const mgt_prepare_options *opt, mgt_prepare_result *out, char *err,
                            size_t errlen) {
    mgt__prep_job j;
    const char *files;
    int r;
    if (err && errlen) err[0] = 0;
    if (out) memset(out, 0, sizeof *out);
    if (!opt) {
        mgt__prep_err(err, errlen, "mgt_prepare: the options are NULL (see "
                      "mgt_prepare_options_init)");
        return MGT_PREP_ERROR_ARGUMENT;
    }
    if ((r = mgt__prep_check_options(opt, err, errlen)) != 0) return r;
    memset(&j, 0, sizeof j);
    if ((r = mgt__prep_input_sizes(opt, &j.now.bytes_total, err, errlen)) != 0) return r;
    files = strcmp(opt->tokenizer, "hf") ? opt->bpe_dir : opt->tokenizer_json;
    if (mgt_tok_open(&j.tok, opt->tokenizer, files, err, errlen))
        return MGT_PREP_ERROR_TOKENIZER;
    j.bpe = strcmp(opt->tokenizer, "byte") != 0;
    j.progress = opt->progress;
    j.user = opt->user;
    r = mgt__prep_run(&j, opt, out, err, errlen);
    mgt__prep_shard_abort(&j.train); /* after a success both are closed already: nothing to do */
    mgt__prep_shard_abort(&j.val);
    mgt_tok_close(j.tok);
    free(j.buf);
    free(j.ids);
    return r;
}

#endif /* MGT_PREPARE_IMPLEMENTED */
#endif /* MGT_PREPARE_IMPLEMENTATION */
