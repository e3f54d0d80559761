/* mgt tokenizer.h - v0.1.0 - MIT licence - byte, GPT-2 BPE and Hugging Face tokenizer.json
   (byte-level BPE) tokenizers for mgt

   USAGE
     Define MGT_TOKENIZER_IMPLEMENTATION in exactly one C or C++ file before
     including this header; other files include it for the declarations only.
     The implementation opens the BPE files with POSIX open/fstat/fdopen (a
     folder, /dev/null or a FIFO is refused, never read or waited on): under
     strict -std=c99 this header defines _POSIX_C_SOURCE itself when it is
     included before any system header; otherwise define
     _POSIX_C_SOURCE 200809L at the top of the implementing file.

       #define MGT_TOKENIZER_IMPLEMENTATION
       #define MGT_TOK_HF      // optional: the "hf" tokenizer
       #include "data/tokenizer.h"

   CONTENTS
     1. options           MGT_STATIC, MGT_TOK_MALLOC/REALLOC/FREE, MGT_TOK_HF
     2. API               mgt_tok_open/close/vocab_size/eot/encode/decode
     3. implementation    Unicode tables, UTF-8 pre-tokenizer, JSON reader,
                          merges, tokenizer.json (MGT_TOK_HF), BPE with a word
                          cache

   MGT_TOK_HF
     Define beside MGT_TOKENIZER_IMPLEMENTATION to build the "hf" tokenizer; it
     then includes <pcre2.h> and <jansson.h> and the program links
     `pkg-config --libs libpcre2-8 jansson` (Debian: libpcre2-dev,
     libjansson-dev). Without it nothing here needs either library and
     mgt_tok_open("hf") fails saying how to get it. A compile-time switch, not
     dlopen as the CUDA backend: both libraries are small Debian packages with
     stable C APIs whose types and constants the compiler then checks, and a
     program that does not ask for hf carries no trace of them.

   TOKENIZERS
     "byte"  vocabulary 256, id = byte value, no files, no end-of-text token.
     "gpt2"  exact GPT-2 byte-level BPE (vocabulary 50257, end-of-text 50256),
             read from BPE_DIR/encoder.json and BPE_DIR/vocab.bpe. The
             pre-tokenizer is GPT-2's regex
               's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
             written out by hand over UTF-8 (bytes that are not valid UTF-8
             count as one "other" character each, so every input encodes and
             decodes back to itself).
     "hf"    a Hugging Face tokenizer.json of byte-level BPE (GPT-2, Llama 3,
             SmolLM; MGT_TOK_HF): model BPE with vocab and merges ("a b" or
             ["a", "b"]; ignore_merges honoured), added tokens (cut out of the
             text first, leftmost and then longest, as Hugging Face does; no
             lstrip/rstrip/single_word), a pre_tokenizer of Split regexes
             (behavior Isolated), Digits and ByteLevel (last; use_regex adds
             GPT-2's pattern; no add_prefix_space), no normalizer, the
             ByteLevel decoder. Patterns run through PCRE2 (UTF, UCP, JIT;
             \s spelled as Unicode White_Space, as Hugging Face's Oniguruma
             reads it; bytes that are not UTF-8 never match, so every input
             round-trips); the JSON through jansson (its errors name line and
             column; duplicate keys are errors). Anything else (a normalizer
             such as Qwen 2's NFC, Metaspace, WordPiece, byte_fallback) is
             refused by name, never tokenized differently. Ids are 32-bit
             (Llama 3's 128,256 tokens; at most 2^24 ids). mgt_tok_eot is the
             token a document
             starts with: the one the post-processor's template puts first
             (Llama 3's <|begin_of_text|>), else the special <|endoftext|>.
             Checked against `tokenizers` by tests/test_hf_tokenizer.c.

   EXAMPLE
       mgt_tokenizer *tok; char err[256];
       uint32_t *ids = NULL; size_t n = 0, cap = 0;
       if (mgt_tok_open(&tok, "gpt2", "data/gpt2-bpe", err, sizeof err) != 0) {
           fprintf(stderr, "%s\n", err); return 1;
       }
       mgt_tok_encode(tok, "Hello world", 11, &ids, &n, &cap);   // 15496 995
       for (size_t i = 0; i < n; i++) {
           const char *b; int len = mgt_tok_decode(tok, ids[i], &b);
           fwrite(b, 1, (size_t)len, stdout);
       }
       free(ids); mgt_tok_close(tok);

   IDS
     32-bit (uint32_t). llm.c's shards hold 16-bit tokens: data/prepare.h refuses
     a tokenizer of more than 65536 ids.

   ERRORS
     Functions return 0 (or a count) on success and -1 on failure; they never
     print and never exit. mgt_tok_open writes one line into err naming the
     file and what is wrong ("data/gpt2-bpe/encoder.json: malformed JSON at
     byte 1234: expected ':'").

   THREADS
     mgt_tok_decode, mgt_tok_vocab_size and mgt_tok_eot only read and may be
     called from any thread. mgt_tok_encode updates the tokenizer's word cache:
     use one tokenizer per encoding thread.
*/
#if defined(MGT_TOKENIZER_IMPLEMENTATION) && defined(__STRICT_ANSI__) && !defined(_FEATURES_H) && \
    !defined(_POSIX_C_SOURCE) && !defined(_XOPEN_SOURCE) && !defined(_GNU_SOURCE) &&            \
    !defined(_DEFAULT_SOURCE) && !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L /* open, fstat, fdopen: BPE files must be regular files (see USAGE) */
#endif

#ifndef MGT_TOKENIZER_H
#define MGT_TOKENIZER_H

#include <stddef.h>  /* defines: size_t */
#include <stdint.h>  /* defines: uint16_t, uint32_t, uint64_t */

/* MGT_STATIC: define (everywhere) to make every function static. */
#ifndef MGT_TOKDEF
#ifdef MGT_STATIC
#if defined(__GNUC__) || defined(__clang__)
#define MGT_TOKDEF static __attribute__((unused)) /* a private copy need not use every function */
#else
#define MGT_TOKDEF static
#endif
#else
#define MGT_TOKDEF extern
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mgt_tokenizer mgt_tokenizer;

/* kind: "byte" (vocabulary 256, no files), "gpt2" (path is a folder: reads
   path/encoder.json and path/vocab.bpe) or "hf" (path is a Hugging Face
   tokenizer.json; only with MGT_TOK_HF). Returns 0, or -1 with a one-line
   message in err that names the file and what is wrong. */
MGT_TOKDEF int  mgt_tok_open(mgt_tokenizer **out, const char *kind, const char *path,
                             char *err, size_t errlen);
MGT_TOKDEF void mgt_tok_close(mgt_tokenizer *tok);
MGT_TOKDEF int  mgt_tok_vocab_size(const mgt_tokenizer *tok);   /* 256, 50257, or hf's ids */
/* The token a document starts with: 50256 for gpt2, -1 for byte; for hf the special token
   the post-processor puts first (Llama 3's <|begin_of_text|>), else <|endoftext|>, else -1. */
MGT_TOKDEF int  mgt_tok_eot(const mgt_tokenizer *tok);
/* Appends the ids of text[0..len) to *ids (grown with MGT_TOK_REALLOC, realloc by
   default, so the caller frees it with free(); *n and *cap updated).
   Returns 0, or -1 (out of memory or bad arguments; *ids, *n stay valid). */
MGT_TOKDEF int  mgt_tok_encode(mgt_tokenizer *tok, const char *text, size_t len,
                               uint32_t **ids, size_t *n, size_t *cap);
/* Points *bytes at the bytes of one id (GPT-2 tokens may be partial UTF-8
   sequences) and returns their count, or -1 for an id out of range. */
MGT_TOKDEF int  mgt_tok_decode(const mgt_tokenizer *tok, int id, const char **bytes);

#ifdef __cplusplus
}
#endif
#endif /* MGT_TOKENIZER_H */

#ifdef MGT_TOKENIZER_IMPLEMENTATION
#ifndef MGT_TOKENIZER_IMPLEMENTED
#define MGT_TOKENIZER_IMPLEMENTED

#include <errno.h>   /* defines: errno */
#include <stdarg.h>  /* defines: va_list */
#include <stdio.h>   /* defines: FILE, fopen, fread, snprintf */
#include <stdlib.h>  /* defines: malloc, realloc, free */
#include <string.h>  /* defines: memcpy, memcmp, strcmp, strerror, strlen */
#ifndef _WIN32
#include <fcntl.h>     /* defines: open, fcntl, O_NONBLOCK */
#include <sys/stat.h>  /* defines: fstat, S_ISREG */
#include <unistd.h>    /* defines: close */
#endif
#ifdef MGT_TOK_HF
#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>    /* defines: pcre2_compile, pcre2_jit_compile, pcre2_match (libpcre2-8) */
#include <jansson.h>  /* defines: json_loadb, json_object_get, json_array_get (libjansson) */
#endif

/* Allocator hooks: define all three or none, beside MGT_TOKENIZER_IMPLEMENTATION. */
#if defined(MGT_TOK_MALLOC) && defined(MGT_TOK_REALLOC) && defined(MGT_TOK_FREE)
#elif !defined(MGT_TOK_MALLOC) && !defined(MGT_TOK_REALLOC) && !defined(MGT_TOK_FREE)
#define MGT_TOK_MALLOC(sz) malloc(sz)
#define MGT_TOK_REALLOC(p, sz) realloc(p, sz)
#define MGT_TOK_FREE(p) free(p)
#else
#error "define all of MGT_TOK_MALLOC, MGT_TOK_REALLOC, MGT_TOK_FREE or none of them"
#endif

/* ---- Unicode tables ---------------------------------------------------------
   Sorted inclusive code point ranges of \p{L} (general categories Lu Ll Lt Lm
   Lo) and \p{N} (Nd Nl No), generated by
     python3 tests/make_tokenizer_fixture.py --unicode-tables
   from Python 3.11's unicodedata (Unicode 14.0.0). \s is Unicode White_Space,
   written out in mgt__tok_is_space. */
/* 648 ranges: unicodedata 14.0.0, categories L* */
static const uint32_t mgt__tok_letter_ranges[1296] = {
    0x41,0x5A, 0x61,0x7A, 0xAA,0xAA, 0xB5,0xB5, 0xBA,0xBA, 0xC0,0xD6, 0xD8,0xF6, 0xF8,0x2C1,
    0x2C6,0x2D1, 0x2E0,0x2E4, 0x2EC,0x2EC, 0x2EE,0x2EE, 0x370,0x374, 0x376,0x377, 0x37A,0x37D,
    0x37F,0x37F, 0x386,0x386, 0x388,0x38A, 0x38C,0x38C, 0x38E,0x3A1, 0x3A3,0x3F5, 0x3F7,0x481,
    0x48A,0x52F, 0x531,0x556, 0x559,0x559, 0x560,0x588, 0x5D0,0x5EA, 0x5EF,0x5F2, 0x620,0x64A,
    0x66E,0x66F, 0x671,0x6D3, 0x6D5,0x6D5, 0x6E5,0x6E6, 0x6EE,0x6EF, 0x6FA,0x6FC, 0x6FF,0x6FF,
    0x710,0x710, 0x712,0x72F, 0x74D,0x7A5, 0x7B1,0x7B1, 0x7CA,0x7EA, 0x7F4,0x7F5, 0x7FA,0x7FA,
    0x800,0x815, 0x81A,0x81A, 0x824,0x824, 0x828,0x828, 0x840,0x858, 0x860,0x86A, 0x870,0x887,
    0x889,0x88E, 0x8A0,0x8C9, 0x904,0x939, 0x93D,0x93D, 0x950,0x950, 0x958,0x961, 0x971,0x980,
    0x985,0x98C, 0x98F,0x990, 0x993,0x9A8, 0x9AA,0x9B0, 0x9B2,0x9B2, 0x9B6,0x9B9, 0x9BD,0x9BD,
    0x9CE,0x9CE, 0x9DC,0x9DD, 0x9DF,0x9E1, 0x9F0,0x9F1, 0x9FC,0x9FC, 0xA05,0xA0A, 0xA0F,0xA10,
    0xA13,0xA28, 0xA2A,0xA30, 0xA32,0xA33, 0xA35,0xA36, 0xA38,0xA39, 0xA59,0xA5C, 0xA5E,0xA5E,
    0xA72,0xA74, 0xA85,0xA8D, 0xA8F,0xA91, 0xA93,0xAA8, 0xAAA,0xAB0, 0xAB2,0xAB3, 0xAB5,0xAB9,
    0xABD,0xABD, 0xAD0,0xAD0, 0xAE0,0xAE1, 0xAF9,0xAF9, 0xB05,0xB0C, 0xB0F,0xB10, 0xB13,0xB28,
    0xB2A,0xB30, 0xB32,0xB33, 0xB35,0xB39, 0xB3D,0xB3D, 0xB5C,0xB5D, 0xB5F,0xB61, 0xB71,0xB71,
    0xB83,0xB83, 0xB85,0xB8A, 0xB8E,0xB90, 0xB92,0xB95, 0xB99,0xB9A, 0xB9C,0xB9C, 0xB9E,0xB9F,
    0xBA3,0xBA4, 0xBA8,0xBAA, 0xBAE,0xBB9, 0xBD0,0xBD0, 0xC05,0xC0C, 0xC0E,0xC10, 0xC12,0xC28,
    0xC2A,0xC39, 0xC3D,0xC3D, 0xC58,0xC5A, 0xC5D,0xC5D, 0xC60,0xC61, 0xC80,0xC80, 0xC85,0xC8C,
    0xC8E,0xC90, 0xC92,0xCA8, 0xCAA,0xCB3, 0xCB5,0xCB9, 0xCBD,0xCBD, 0xCDD,0xCDE, 0xCE0,0xCE1,
    0xCF1,0xCF2, 0xD04,0xD0C, 0xD0E,0xD10, 0xD12,0xD3A, 0xD3D,0xD3D, 0xD4E,0xD4E, 0xD54,0xD56,
    0xD5F,0xD61, 0xD7A,0xD7F, 0xD85,0xD96, 0xD9A,0xDB1, 0xDB3,0xDBB, 0xDBD,0xDBD, 0xDC0,0xDC6,
    0xE01,0xE30, 0xE32,0xE33, 0xE40,0xE46, 0xE81,0xE82, 0xE84,0xE84, 0xE86,0xE8A, 0xE8C,0xEA3,
    0xEA5,0xEA5, 0xEA7,0xEB0, 0xEB2,0xEB3, 0xEBD,0xEBD, 0xEC0,0xEC4, 0xEC6,0xEC6, 0xEDC,0xEDF,
    0xF00,0xF00, 0xF40,0xF47, 0xF49,0xF6C, 0xF88,0xF8C, 0x1000,0x102A, 0x103F,0x103F, 0x1050,0x1055,
    0x105A,0x105D, 0x1061,0x1061, 0x1065,0x1066, 0x106E,0x1070, 0x1075,0x1081, 0x108E,0x108E,
    0x10A0,0x10C5, 0x10C7,0x10C7, 0x10CD,0x10CD, 0x10D0,0x10FA, 0x10FC,0x1248, 0x124A,0x124D,
    0x1250,0x1256, 0x1258,0x1258, 0x125A,0x125D, 0x1260,0x1288, 0x128A,0x128D, 0x1290,0x12B0,
    0x12B2,0x12B5, 0x12B8,0x12BE, 0x12C0,0x12C0, 0x12C2,0x12C5, 0x12C8,0x12D6, 0x12D8,0x1310,
    0x1312,0x1315, 0x1318,0x135A, 0x1380,0x138F, 0x13A0,0x13F5, 0x13F8,0x13FD, 0x1401,0x166C,
    0x166F,0x167F, 0x1681,0x169A, 0x16A0,0x16EA, 0x16F1,0x16F8, 0x1700,0x1711, 0x171F,0x1731,
    0x1740,0x1751, 0x1760,0x176C, 0x176E,0x1770, 0x1780,0x17B3, 0x17D7,0x17D7, 0x17DC,0x17DC,
    0x1820,0x1878, 0x1880,0x1884, 0x1887,0x18A8, 0x18AA,0x18AA, 0x18B0,0x18F5, 0x1900,0x191E,
    0x1950,0x196D, 0x1970,0x1974, 0x1980,0x19AB, 0x19B0,0x19C9, 0x1A00,0x1A16, 0x1A20,0x1A54,
    0x1AA7,0x1AA7, 0x1B05,0x1B33, 0x1B45,0x1B4C, 0x1B83,0x1BA0, 0x1BAE,0x1BAF, 0x1BBA,0x1BE5,
    0x1C00,0x1C23, 0x1C4D,0x1C4F, 0x1C5A,0x1C7D, 0x1C80,0x1C88, 0x1C90,0x1CBA, 0x1CBD,0x1CBF,
    0x1CE9,0x1CEC, 0x1CEE,0x1CF3, 0x1CF5,0x1CF6, 0x1CFA,0x1CFA, 0x1D00,0x1DBF, 0x1E00,0x1F15,
    0x1F18,0x1F1D, 0x1F20,0x1F45, 0x1F48,0x1F4D, 0x1F50,0x1F57, 0x1F59,0x1F59, 0x1F5B,0x1F5B,
    0x1F5D,0x1F5D, 0x1F5F,0x1F7D, 0x1F80,0x1FB4, 0x1FB6,0x1FBC, 0x1FBE,0x1FBE, 0x1FC2,0x1FC4,
    0x1FC6,0x1FCC, 0x1FD0,0x1FD3, 0x1FD6,0x1FDB, 0x1FE0,0x1FEC, 0x1FF2,0x1FF4, 0x1FF6,0x1FFC,
    0x2071,0x2071, 0x207F,0x207F, 0x2090,0x209C, 0x2102,0x2102, 0x2107,0x2107, 0x210A,0x2113,
    0x2115,0x2115, 0x2119,0x211D, 0x2124,0x2124, 0x2126,0x2126, 0x2128,0x2128, 0x212A,0x212D,
    0x212F,0x2139, 0x213C,0x213F, 0x2145,0x2149, 0x214E,0x214E, 0x2183,0x2184, 0x2C00,0x2CE4,
    0x2CEB,0x2CEE, 0x2CF2,0x2CF3, 0x2D00,0x2D25, 0x2D27,0x2D27, 0x2D2D,0x2D2D, 0x2D30,0x2D67,
    0x2D6F,0x2D6F, 0x2D80,0x2D96, 0x2DA0,0x2DA6, 0x2DA8,0x2DAE, 0x2DB0,0x2DB6, 0x2DB8,0x2DBE,
    0x2DC0,0x2DC6, 0x2DC8,0x2DCE, 0x2DD0,0x2DD6, 0x2DD8,0x2DDE, 0x2E2F,0x2E2F, 0x3005,0x3006,
    0x3031,0x3035, 0x303B,0x303C, 0x3041,0x3096, 0x309D,0x309F, 0x30A1,0x30FA, 0x30FC,0x30FF,
    0x3105,0x312F, 0x3131,0x318E, 0x31A0,0x31BF, 0x31F0,0x31FF, 0x3400,0x4DBF, 0x4E00,0xA48C,
    0xA4D0,0xA4FD, 0xA500,0xA60C, 0xA610,0xA61F, 0xA62A,0xA62B, 0xA640,0xA66E, 0xA67F,0xA69D,
    0xA6A0,0xA6E5, 0xA717,0xA71F, 0xA722,0xA788, 0xA78B,0xA7CA, 0xA7D0,0xA7D1, 0xA7D3,0xA7D3,
    0xA7D5,0xA7D9, 0xA7F2,0xA801, 0xA803,0xA805, 0xA807,0xA80A, 0xA80C,0xA822, 0xA840,0xA873,
    0xA882,0xA8B3, 0xA8F2,0xA8F7, 0xA8FB,0xA8FB, 0xA8FD,0xA8FE, 0xA90A,0xA925, 0xA930,0xA946,
    0xA960,0xA97C, 0xA984,0xA9B2, 0xA9CF,0xA9CF, 0xA9E0,0xA9E4, 0xA9E6,0xA9EF, 0xA9FA,0xA9FE,
    0xAA00,0xAA28, 0xAA40,0xAA42, 0xAA44,0xAA4B, 0xAA60,0xAA76, 0xAA7A,0xAA7A, 0xAA7E,0xAAAF,
    0xAAB1,0xAAB1, 0xAAB5,0xAAB6, 0xAAB9,0xAABD, 0xAAC0,0xAAC0, 0xAAC2,0xAAC2, 0xAADB,0xAADD,
    0xAAE0,0xAAEA, 0xAAF2,0xAAF4, 0xAB01,0xAB06, 0xAB09,0xAB0E, 0xAB11,0xAB16, 0xAB20,0xAB26,
    0xAB28,0xAB2E, 0xAB30,0xAB5A, 0xAB5C,0xAB69, 0xAB70,0xABE2, 0xAC00,0xD7A3, 0xD7B0,0xD7C6,
    0xD7CB,0xD7FB, 0xF900,0xFA6D, 0xFA70,0xFAD9, 0xFB00,0xFB06, 0xFB13,0xFB17, 0xFB1D,0xFB1D,
    0xFB1F,0xFB28, 0xFB2A,0xFB36, 0xFB38,0xFB3C, 0xFB3E,0xFB3E, 0xFB40,0xFB41, 0xFB43,0xFB44,
    0xFB46,0xFBB1, 0xFBD3,0xFD3D, 0xFD50,0xFD8F, 0xFD92,0xFDC7, 0xFDF0,0xFDFB, 0xFE70,0xFE74,
    0xFE76,0xFEFC, 0xFF21,0xFF3A, 0xFF41,0xFF5A, 0xFF66,0xFFBE, 0xFFC2,0xFFC7, 0xFFCA,0xFFCF,
    0xFFD2,0xFFD7, 0xFFDA,0xFFDC, 0x10000,0x1000B, 0x1000D,0x10026, 0x10028,0x1003A,
    0x1003C,0x1003D, 0x1003F,0x1004D, 0x10050,0x1005D, 0x10080,0x100FA, 0x10280,0x1029C,
    0x102A0,0x102D0, 0x10300,0x1031F, 0x1032D,0x10340, 0x10342,0x10349, 0x10350,0x10375,
    0x10380,0x1039D, 0x103A0,0x103C3, 0x103C8,0x103CF, 0x10400,0x1049D, 0x104B0,0x104D3,
    0x104D8,0x104FB, 0x10500,0x10527, 0x10530,0x10563, 0x10570,0x1057A, 0x1057C,0x1058A,
    0x1058C,0x10592, 0x10594,0x10595, 0x10597,0x105A1, 0x105A3,0x105B1, 0x105B3,0x105B9,
    0x105BB,0x105BC, 0x10600,0x10736, 0x10740,0x10755, 0x10760,0x10767, 0x10780,0x10785,
    0x10787,0x107B0, 0x107B2,0x107BA, 0x10800,0x10805, 0x10808,0x10808, 0x1080A,0x10835,
    0x10837,0x10838, 0x1083C,0x1083C, 0x1083F,0x10855, 0x10860,0x10876, 0x10880,0x1089E,
    0x108E0,0x108F2, 0x108F4,0x108F5, 0x10900,0x10915, 0x10920,0x10939, 0x10980,0x109B7,
    0x109BE,0x109BF, 0x10A00,0x10A00, 0x10A10,0x10A13, 0x10A15,0x10A17, 0x10A19,0x10A35,
    0x10A60,0x10A7C, 0x10A80,0x10A9C, 0x10AC0,0x10AC7, 0x10AC9,0x10AE4, 0x10B00,0x10B35,
    0x10B40,0x10B55, 0x10B60,0x10B72, 0x10B80,0x10B91, 0x10C00,0x10C48, 0x10C80,0x10CB2,
    0x10CC0,0x10CF2, 0x10D00,0x10D23, 0x10E80,0x10EA9, 0x10EB0,0x10EB1, 0x10F00,0x10F1C,
    0x10F27,0x10F27, 0x10F30,0x10F45, 0x10F70,0x10F81, 0x10FB0,0x10FC4, 0x10FE0,0x10FF6,
    0x11003,0x11037, 0x11071,0x11072, 0x11075,0x11075, 0x11083,0x110AF, 0x110D0,0x110E8,
    0x11103,0x11126, 0x11144,0x11144, 0x11147,0x11147, 0x11150,0x11172, 0x11176,0x11176,
    0x11183,0x111B2, 0x111C1,0x111C4, 0x111DA,0x111DA, 0x111DC,0x111DC, 0x11200,0x11211,
    0x11213,0x1122B, 0x11280,0x11286, 0x11288,0x11288, 0x1128A,0x1128D, 0x1128F,0x1129D,
    0x1129F,0x112A8, 0x112B0,0x112DE, 0x11305,0x1130C, 0x1130F,0x11310, 0x11313,0x11328,
    0x1132A,0x11330, 0x11332,0x11333, 0x11335,0x11339, 0x1133D,0x1133D, 0x11350,0x11350,
    0x1135D,0x11361, 0x11400,0x11434, 0x11447,0x1144A, 0x1145F,0x11461, 0x11480,0x114AF,
    0x114C4,0x114C5, 0x114C7,0x114C7, 0x11580,0x115AE, 0x115D8,0x115DB, 0x11600,0x1162F,
    0x11644,0x11644, 0x11680,0x116AA, 0x116B8,0x116B8, 0x11700,0x1171A, 0x11740,0x11746,
    0x11800,0x1182B, 0x118A0,0x118DF, 0x118FF,0x11906, 0x11909,0x11909, 0x1190C,0x11913,
    0x11915,0x11916, 0x11918,0x1192F, 0x1193F,0x1193F, 0x11941,0x11941, 0x119A0,0x119A7,
    0x119AA,0x119D0, 0x119E1,0x119E1, 0x119E3,0x119E3, 0x11A00,0x11A00, 0x11A0B,0x11A32,
    0x11A3A,0x11A3A, 0x11A50,0x11A50, 0x11A5C,0x11A89, 0x11A9D,0x11A9D, 0x11AB0,0x11AF8,
    0x11C00,0x11C08, 0x11C0A,0x11C2E, 0x11C40,0x11C40, 0x11C72,0x11C8F, 0x11D00,0x11D06,
    0x11D08,0x11D09, 0x11D0B,0x11D30, 0x11D46,0x11D46, 0x11D60,0x11D65, 0x11D67,0x11D68,
    0x11D6A,0x11D89, 0x11D98,0x11D98, 0x11EE0,0x11EF2, 0x11FB0,0x11FB0, 0x12000,0x12399,
    0x12480,0x12543, 0x12F90,0x12FF0, 0x13000,0x1342E, 0x14400,0x14646, 0x16800,0x16A38,
    0x16A40,0x16A5E, 0x16A70,0x16ABE, 0x16AD0,0x16AED, 0x16B00,0x16B2F, 0x16B40,0x16B43,
    0x16B63,0x16B77, 0x16B7D,0x16B8F, 0x16E40,0x16E7F, 0x16F00,0x16F4A, 0x16F50,0x16F50,
    0x16F93,0x16F9F, 0x16FE0,0x16FE1, 0x16FE3,0x16FE3, 0x17000,0x187F7, 0x18800,0x18CD5,
    0x18D00,0x18D08, 0x1AFF0,0x1AFF3, 0x1AFF5,0x1AFFB, 0x1AFFD,0x1AFFE, 0x1B000,0x1B122,
    0x1B150,0x1B152, 0x1B164,0x1B167, 0x1B170,0x1B2FB, 0x1BC00,0x1BC6A, 0x1BC70,0x1BC7C,
    0x1BC80,0x1BC88, 0x1BC90,0x1BC99, 0x1D400,0x1D454, 0x1D456,0x1D49C, 0x1D49E,0x1D49F,
    0x1D4A2,0x1D4A2, 0x1D4A5,0x1D4A6, 0x1D4A9,0x1D4AC, 0x1D4AE,0x1D4B9, 0x1D4BB,0x1D4BB,
    0x1D4BD,0x1D4C3, 0x1D4C5,0x1D505, 0x1D507,0x1D50A, 0x1D50D,0x1D514, 0x1D516,0x1D51C,
    0x1D51E,0x1D539, 0x1D53B,0x1D53E, 0x1D540,0x1D544, 0x1D546,0x1D546, 0x1D54A,0x1D550,
    0x1D552,0x1D6A5, 0x1D6A8,0x1D6C0, 0x1D6C2,0x1D6DA, 0x1D6DC,0x1D6FA, 0x1D6FC,0x1D714,
    0x1D716,0x1D734, 0x1D736,0x1D74E, 0x1D750,0x1D76E, 0x1D770,0x1D788, 0x1D78A,0x1D7A8,
    0x1D7AA,0x1D7C2, 0x1D7C4,0x1D7CB, 0x1DF00,0x1DF1E, 0x1E100,0x1E12C, 0x1E137,0x1E13D,
    0x1E14E,0x1E14E, 0x1E290,0x1E2AD, 0x1E2C0,0x1E2EB, 0x1E7E0,0x1E7E6, 0x1E7E8,0x1E7EB,
    0x1E7ED,0x1E7EE, 0x1E7F0,0x1E7FE, 0x1E800,0x1E8C4, 0x1E900,0x1E943, 0x1E94B,0x1E94B,
    0x1EE00,0x1EE03, 0x1EE05,0x1EE1F, 0x1EE21,0x1EE22, 0x1EE24,0x1EE24, 0x1EE27,0x1EE27,
    0x1EE29,0x1EE32, 0x1EE34,0x1EE37, 0x1EE39,0x1EE39, 0x1EE3B,0x1EE3B, 0x1EE42,0x1EE42,
    0x1EE47,0x1EE47, 0x1EE49,0x1EE49, 0x1EE4B,0x1EE4B, 0x1EE4D,0x1EE4F, 0x1EE51,0x1EE52,
    0x1EE54,0x1EE54, 0x1EE57,0x1EE57, 0x1EE59,0x1EE59, 0x1EE5B,0x1EE5B, 0x1EE5D,0x1EE5D,
    0x1EE5F,0x1EE5F, 0x1EE61,0x1EE62, 0x1EE64,0x1EE64, 0x1EE67,0x1EE6A, 0x1EE6C,0x1EE72,
    0x1EE74,0x1EE77, 0x1EE79,0x1EE7C, 0x1EE7E,0x1EE7E, 0x1EE80,0x1EE89, 0x1EE8B,0x1EE9B,
    0x1EEA1,0x1EEA3, 0x1EEA5,0x1EEA9, 0x1EEAB,0x1EEBB, 0x20000,0x2A6DF, 0x2A700,0x2B738,
    0x2B740,0x2B81D, 0x2B820,0x2CEA1, 0x2CEB0,0x2EBE0, 0x2F800,0x2FA1D, 0x30000,0x3134A,
};
/* 134 ranges: unicodedata 14.0.0, categories N* */
static const uint32_t mgt__tok_number_ranges[268] = {
    0x30,0x39, 0xB2,0xB3, 0xB9,0xB9, 0xBC,0xBE, 0x660,0x669, 0x6F0,0x6F9, 0x7C0,0x7C9, 0x966,0x96F,
    0x9E6,0x9EF, 0x9F4,0x9F9, 0xA66,0xA6F, 0xAE6,0xAEF, 0xB66,0xB6F, 0xB72,0xB77, 0xBE6,0xBF2,
    0xC66,0xC6F, 0xC78,0xC7E, 0xCE6,0xCEF, 0xD58,0xD5E, 0xD66,0xD78, 0xDE6,0xDEF, 0xE50,0xE59,
    0xED0,0xED9, 0xF20,0xF33, 0x1040,0x1049, 0x1090,0x1099, 0x1369,0x137C, 0x16EE,0x16F0,
    0x17E0,0x17E9, 0x17F0,0x17F9, 0x1810,0x1819, 0x1946,0x194F, 0x19D0,0x19DA, 0x1A80,0x1A89,
    0x1A90,0x1A99, 0x1B50,0x1B59, 0x1BB0,0x1BB9, 0x1C40,0x1C49, 0x1C50,0x1C59, 0x2070,0x2070,
    0x2074,0x2079, 0x2080,0x2089, 0x2150,0x2182, 0x2185,0x2189, 0x2460,0x249B, 0x24EA,0x24FF,
    0x2776,0x2793, 0x2CFD,0x2CFD, 0x3007,0x3007, 0x3021,0x3029, 0x3038,0x303A, 0x3192,0x3195,
    0x3220,0x3229, 0x3248,0x324F, 0x3251,0x325F, 0x3280,0x3289, 0x32B1,0x32BF, 0xA620,0xA629,
    0xA6E6,0xA6EF, 0xA830,0xA835, 0xA8D0,0xA8D9, 0xA900,0xA909, 0xA9D0,0xA9D9, 0xA9F0,0xA9F9,
    0xAA50,0xAA59, 0xABF0,0xABF9, 0xFF10,0xFF19, 0x10107,0x10133, 0x10140,0x10178, 0x1018A,0x1018B,
    0x102E1,0x102FB, 0x10320,0x10323, 0x10341,0x10341, 0x1034A,0x1034A, 0x103D1,0x103D5,
    0x104A0,0x104A9, 0x10858,0x1085F, 0x10879,0x1087F, 0x108A7,0x108AF, 0x108FB,0x108FF,
    0x10916,0x1091B, 0x109BC,0x109BD, 0x109C0,0x109CF, 0x109D2,0x109FF, 0x10A40,0x10A48,
    0x10A7D,0x10A7E, 0x10A9D,0x10A9F, 0x10AEB,0x10AEF, 0x10B58,0x10B5F, 0x10B78,0x10B7F,
    0x10BA9,0x10BAF, 0x10CFA,0x10CFF, 0x10D30,0x10D39, 0x10E60,0x10E7E, 0x10F1D,0x10F26,
    0x10F51,0x10F54, 0x10FC5,0x10FCB, 0x11052,0x1106F, 0x110F0,0x110F9, 0x11136,0x1113F,
    0x111D0,0x111D9, 0x111E1,0x111F4, 0x112F0,0x112F9, 0x11450,0x11459, 0x114D0,0x114D9,
    0x11650,0x11659, 0x116C0,0x116C9, 0x11730,0x1173B, 0x118E0,0x118F2, 0x11950,0x11959,
    0x11C50,0x11C6C, 0x11D50,0x11D59, 0x11DA0,0x11DA9, 0x11FC0,0x11FD4, 0x12400,0x1246E,
    0x16A60,0x16A69, 0x16AC0,0x16AC9, 0x16B50,0x16B59, 0x16B5B,0x16B61, 0x16E80,0x16E96,
    0x1D2E0,0x1D2F3, 0x1D360,0x1D378, 0x1D7CE,0x1D7FF, 0x1E140,0x1E149, 0x1E2F0,0x1E2F9,
    0x1E8C7,0x1E8CF, 0x1E950,0x1E959, 0x1EC71,0x1ECAB, 0x1ECAD,0x1ECAF, 0x1ECB1,0x1ECB4,
    0x1ED01,0x1ED2D, 0x1ED2F,0x1ED3D, 0x1F100,0x1F10C, 0x1FBF0,0x1FBF9,
};

#define MGT__TOK_BYTE 0
#define MGT__TOK_GPT2 1
#define MGT__TOK_HF 2
#define MGT__TOK_CACHE_MAX_WORD 255     /* longer words are not cached */
#define MGT__TOK_DEAD 0xFFFFFFFFu       /* a symbol merged into its left neighbour */
#define MGT__TOK_CACHE_MAX_ENTRIES (1u << 18) /* cache is cleared when full */

enum { MGT__TOK_OTHER = 0, MGT__TOK_LETTER, MGT__TOK_NUMBER, MGT__TOK_SPACE };

typedef struct {
    uint32_t hash, key_off, ids_off;
    uint16_t key_len, n_ids;
} mgt__tok_cache_entry;

typedef struct {            /* a BPE merge candidate: pair (left, right) at symbol pos */
    uint32_t rank, pos;
    uint32_t left, right;
} mgt__tok_cand;

/* vocabulary hash: token bytes -> id (entries are id + 1, 0 = empty), over off/bytes */
typedef struct { uint32_t *tab, mask; const uint32_t *off; const char *bytes; } mgt__tok_vmap;

#ifdef MGT_TOK_HF
#define MGT__TOK_HF_MAX_STAGES 8            /* pre-tokenizer regexes applied in turn */
#define MGT__TOK_HF_MAX_ID ((1 << 24) - 1)  /* ids size tables: Llama 3 has 128,256, Gemma 256,000 */
#endif

struct mgt_tokenizer {
    int kind, vocab_size, eot;
    /* decode table: token id -> bytes[off[id] .. off[id+1]) */
    uint32_t *off;
    char *bytes;
    uint32_t byte_id[256];                  /* id of each single-byte token */
    /* merges: key (left << 32 | right) -> rank and merged id; open addressing */
    uint64_t *mkey;
    uint32_t *mrank, *mid;
    uint32_t mmask;
    /* word cache: word bytes -> ids */
    uint32_t *ctab, cmask;                  /* entry index + 1, 0 = empty */
    mgt__tok_cache_entry *cent;
    uint32_t ncent;
    char *ckeys; size_t nckeys, capckeys;
    uint32_t *cids; size_t ncids, capcids;
    /* BPE scratch */
    uint32_t *sym; int32_t *prev, *next; size_t capsym, capprev, capnext;
    mgt__tok_cand *heap; size_t capheap;
#ifdef MGT_TOK_HF
    /* hf: the model's vocabulary, kept for ignore_merges (a whole pre-token in it is one id) */
    mgt__tok_vmap vocab;
    int ignore_merges, nstage;
    pcre2_code *stage[MGT__TOK_HF_MAX_STAGES];
    pcre2_match_data *match[MGT__TOK_HF_MAX_STAGES];
    int jit[MGT__TOK_HF_MAX_STAGES];        /* compiled to machine code: pcre2_jit_match, faster */
    /* added tokens by first byte, longest first: added_id[added_first[b] .. added_first[b+1]) */
    uint32_t *added_id;
    uint32_t added_first[257];
#endif
};

/* ---- small helpers ------------------------------------------------------- */

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 3, 4)))
#endif
static void mgt__tok_err(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    if (!err || !errlen) return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static uint32_t mgt__tok_hash(const unsigned char *p, size_t n) {  /* FNV-1a */
    uint32_t h = 0x811C9DC5u;
    size_t i;
    for (i = 0; i < n; i++) { h ^= p[i]; h *= 0x01000193u; }
    return h;
}

static uint32_t mgt__tok_mix(uint32_t x) {   /* murmur3 finalizer */
    x ^= x >> 16; x *= 0x85EBCA6Bu; x ^= x >> 13; x *= 0xC2B2AE35u; x ^= x >> 16;
    return x;
}

static int mgt__tok_grow(void **p, size_t *cap, size_t need, size_t elem) {
    size_t c = *cap ? *cap : 64;
    void *q;
    if (need <= *cap) return 0;
    while (c < need) c *= 2;
    q = MGT_TOK_REALLOC(*p, c * elem);
    if (!q) return -1;
    *p = q; *cap = c;
    return 0;
}

static int mgt__tok_in_ranges(const uint32_t *r, size_t n, uint32_t cp) {
    size_t lo = 0, hi = n / 2;          /* binary search over range pairs */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[2 * mid]) hi = mid;
        else if (cp > r[2 * mid + 1]) lo = mid + 1;
        else return 1;
    }
    return 0;
}

static int mgt__tok_is_space(uint32_t cp) {  /* Unicode White_Space */
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

static int mgt__tok_class(uint32_t cp) {
    if (cp < 0x80) {
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return MGT__TOK_LETTER;
        if (cp >= '0' && cp <= '9') return MGT__TOK_NUMBER;
        return mgt__tok_is_space(cp) ? MGT__TOK_SPACE : MGT__TOK_OTHER;
    }
    if (cp == 0xFFFFFFFFu) return MGT__TOK_OTHER;  /* invalid UTF-8 byte */
    if (mgt__tok_is_space(cp)) return MGT__TOK_SPACE;
    if (mgt__tok_in_ranges(mgt__tok_letter_ranges,
                           sizeof mgt__tok_letter_ranges / sizeof(uint32_t), cp))
        return MGT__TOK_LETTER;
    if (mgt__tok_in_ranges(mgt__tok_number_ranges,
                           sizeof mgt__tok_number_ranges / sizeof(uint32_t), cp))
        return MGT__TOK_NUMBER;
    return MGT__TOK_OTHER;
}

/* Decodes one UTF-8 character at s[0..n), n >= 1. Returns its length in bytes
   and the code point in *cp, or length 1 and 0xFFFFFFFF for an invalid byte
   (overlong forms, surrogates and values above U+10FFFF are invalid). */
static size_t mgt__tok_utf8(const unsigned char *s, size_t n, uint32_t *cp) {
    uint32_t c = s[0], min;
    size_t len, i;
    if (c < 0x80) { *cp = c; return 1; }
    if (c >= 0xC2 && c <= 0xDF) { len = 2; c &= 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; c &= 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; c &= 0x07; min = 0x10000; }
    else { *cp = 0xFFFFFFFFu; return 1; }
    if (len > n) { *cp = 0xFFFFFFFFu; return 1; }
    for (i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) { *cp = 0xFFFFFFFFu; return 1; }
        c = (c << 6) | (s[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) { *cp = 0xFFFFFFFFu; return 1; }
    *cp = c;
    return len;
}

static int mgt__tok_class_at(const unsigned char *s, size_t n, size_t i, size_t *len) {
    uint32_t cp;
    *len = mgt__tok_utf8(s + i, n - i, &cp);
    return mgt__tok_class(cp);
}

/* Length of the GPT-2 pre-token that starts at s[i], i < n. */
static size_t mgt__tok_pretoken(const unsigned char *s, size_t n, size_t i) {
    size_t j, len, last = 0;
    int k;
    /* 's|'t|'re|'ve|'m|'ll|'d */
    if (s[i] == '\'' && i + 1 < n) {
        unsigned char a = s[i + 1], b = i + 2 < n ? s[i + 2] : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    }
    /* ' ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+': an optional space, then a run of one class */
    j = i;
    k = mgt__tok_class_at(s, n, j, &len);
    if (s[i] == ' ' && i + 1 < n) {
        size_t len1;
        int k1 = mgt__tok_class_at(s, n, i + 1, &len1);
        if (k1 != MGT__TOK_SPACE) { j = i + 1; k = k1; len = len1; }
    }
    if (k != MGT__TOK_SPACE) {
        j += len;
        while (j < n && mgt__tok_class_at(s, n, j, &len) == k) j += len;
        return j - i;
    }
    /* '\s+(?!\S)|\s+': a whitespace run; when a non-space follows a run of two
       or more, the lookahead gives back the run's last character (which may
       then start the next token as its ' ?'). */
    j = i;
    while (j < n && mgt__tok_class_at(s, n, j, &len) == MGT__TOK_SPACE) { last = j; j += len; }
    if (j < n && last > i) return last - i;
    return j - i;
}

/* ---- GPT-2 byte <-> unicode mapping ---------------------------------------
   GPT-2 stores tokens as strings in which byte b is the character b when b is
   printable (! .. ~, ¡ .. ¬, ® .. ÿ) and U+0100 + k for the k-th other byte. */
static int mgt__tok_printable(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

static int mgt__tok_unicode_to_byte(uint32_t cp) {   /* -1 if not a byte-level char */
    unsigned b, k = 0;
    if (cp < 256) return mgt__tok_printable(cp) ? (int)cp : -1;
    for (b = 0; b < 256; b++) {
        if (mgt__tok_printable(b)) continue;
        if (cp == 256 + k) return (int)b;
        k++;
    }
    return -1;
}

/* Converts the byte-level string s[0..n) (UTF-8) to raw bytes in place.
   Returns the new length, or -1 if a character is not a byte-level character. */
static long mgt__tok_unbyte(char *s, size_t n) {
    size_t i = 0, o = 0;
    while (i < n) {
        uint32_t cp;
        int b;
        i += mgt__tok_utf8((const unsigned char *)s + i, n - i, &cp);
        b = cp == 0xFFFFFFFFu ? -1 : mgt__tok_unicode_to_byte(cp);
        if (b < 0) return -1;
        s[o++] = (char)b;
    }
    return (long)o;
}

/* ---- file and JSON reading --------------------------------------------- */

/* path opened for reading if it is a regular file (mgt.h's mgt__open_regular, for this header
   alone): a folder, /dev/null or a FIFO is refused before a byte is read, and O_NONBLOCK keeps
   open() of a FIFO from waiting for a writer. NULL with the reason in err otherwise. */
static FILE *mgt__tok_open_regular(const char *path, char *err, size_t errlen) {
#ifndef _WIN32
    struct stat st;
    const char *kind;
    FILE *f;
    int fd = open(path, O_RDONLY | O_NONBLOCK), flags;
    if (fd < 0 || fstat(fd, &st) != 0) {
        mgt__tok_err(err, errlen, "%s: cannot open (%s)", path, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        kind = S_ISDIR(st.st_mode) ? "a folder" : S_ISFIFO(st.st_mode) ? "a FIFO (named pipe)"
             : S_ISCHR(st.st_mode) ? "a character device" : "not a regular file";
        mgt__tok_err(err, errlen, "%s: is %s, not a file", path, kind);
        close(fd);
        return NULL;
    }
    if ((flags = fcntl(fd, F_GETFL)) == -1 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == -1 ||
        (f = fdopen(fd, "rb")) == NULL) {
        mgt__tok_err(err, errlen, "%s: cannot open (%s)", path, strerror(errno));
        close(fd);
        return NULL;
    }
    return f;
#else
    FILE *f = fopen(path, "rb");
    if (!f) mgt__tok_err(err, errlen, "%s: cannot open (%s)", path, strerror(errno));
    return f;
#endif
}

static char *mgt__tok_read_file(const char *path, size_t *n, char *err, size_t errlen) {
    FILE *f = mgt__tok_open_regular(path, err, errlen);
    char *buf = NULL;
    size_t cap = 0, len = 0;
    if (!f) return NULL;
    for (;;) {
        size_t got;
        if (mgt__tok_grow((void **)&buf, &cap, len + 65536 + 1, 1)) {
            mgt__tok_err(err, errlen, "%s: out of memory", path);
            MGT_TOK_FREE(buf); fclose(f);
            return NULL;
        }
        got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        mgt__tok_err(err, errlen, "%s: read error (%s)", path, strerror(errno));
        MGT_TOK_FREE(buf); fclose(f);
        return NULL;
    }
    fclose(f);
    buf[len] = 0;
    *n = len;
    return buf;
}

static size_t mgt__tok_skip_ws(const char *s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    return i;
}

static int mgt__tok_hex4(const char *s, size_t n, size_t i, uint32_t *v) {
    size_t k;
    *v = 0;
    if (i + 4 > n) return -1;
    for (k = 0; k < 4; k++) {
        char c = s[i + k];
        *v <<= 4;
        if (c >= '0' && c <= '9') *v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') *v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') *v |= (uint32_t)(c - 'A' + 10);
        else return -1;
    }
    return 0;
}

/* Parses the JSON string at s[*i] (which must be '"') into out (UTF-8, at most
   as long as the source). Returns its length, or -1 with *i at the bad byte. */
static long mgt__tok_json_string(const char *s, size_t n, size_t *i, char *out) {
    size_t p = *i, o = 0;
    if (p >= n || s[p] != '"') return -1;
    p++;
    while (p < n && s[p] != '"') {
        uint32_t cp;
        unsigned char c = (unsigned char)s[p];
        if (c < 0x20) { *i = p; return -1; }
        if (c != '\\') { out[o++] = (char)c; p++; continue; }
        if (p + 1 >= n) { *i = p; return -1; }
        switch (s[p + 1]) {
        case '"': cp = '"'; break;
        case '\\': cp = '\\'; break;
        case '/': cp = '/'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
            if (mgt__tok_hex4(s, n, p + 2, &cp)) { *i = p; return -1; }
            if (cp >= 0xD800 && cp <= 0xDBFF) {          /* surrogate pair */
                uint32_t lo;
                if (p + 12 > n || s[p + 6] != '\\' || s[p + 7] != 'u' ||
                    mgt__tok_hex4(s, n, p + 8, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                    *i = p; return -1;
                }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                p += 6;
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) { *i = p; return -1; }
            p += 4;
            break;
        default: *i = p; return -1;
        }
        p += 2;
        /* the UTF-8 of an escape is never longer than the escape itself */
        if (cp < 0x80) out[o++] = (char)cp;
        else if (cp < 0x800) {
            out[o++] = (char)(0xC0 | (cp >> 6)); out[o++] = (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out[o++] = (char)(0xE0 | (cp >> 12)); out[o++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            out[o++] = (char)(0x80 | (cp & 0x3F));
        } else {
            out[o++] = (char)(0xF0 | (cp >> 18)); out[o++] = (char)(0x80 | ((cp >> 12) & 0x3F));
            out[o++] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[o++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    if (p >= n) { *i = p; return -1; }
    *i = p + 1;
    return (long)o;
}

/* ---- vocabulary hash (used while loading) -------------------------------- */


static int mgt__tok_vmap_find(const mgt__tok_vmap *m, const char *s, size_t n) {
    uint32_t h = mgt__tok_hash((const unsigned char *)s, n) & m->mask;
    for (;; h = (h + 1) & m->mask) {
        uint32_t e = m->tab[h];
        if (!e) return -1;
        e--;
        if (m->off[e + 1] - m->off[e] == n && memcmp(m->bytes + m->off[e], s, n) == 0)
            return (int)e;
    }
}

static int mgt__tok_vmap_init(mgt__tok_vmap *m, const mgt_tokenizer *t, size_t ntok) {
    uint32_t cap = 1;
    while (cap < 2 * ntok) cap *= 2;
    m->tab = (uint32_t *)MGT_TOK_MALLOC(cap * sizeof *m->tab);
    if (!m->tab) return -1;
    memset(m->tab, 0, cap * sizeof *m->tab);
    m->mask = cap - 1; m->off = t->off; m->bytes = t->bytes;
    return 0;
}

/* Adds token id (its bytes in off/bytes); -1 if a token with the same bytes is there already. */
static int mgt__tok_vmap_add(mgt__tok_vmap *m, uint32_t id) {
    uint32_t l = m->off[id + 1] - m->off[id];
    uint32_t h = mgt__tok_hash((const unsigned char *)m->bytes + m->off[id], l) & m->mask;
    if (mgt__tok_vmap_find(m, m->bytes + m->off[id], l) >= 0) return -1;
    while (m->tab[h]) h = (h + 1) & m->mask;
    m->tab[h] = id + 1;
    return 0;
}

/* byte_id[] from the vocabulary: byte-level BPE has a token for every byte. */
static int mgt__tok_byte_ids(mgt_tokenizer *t, const mgt__tok_vmap *vm, const char *path,
                             char *err, size_t errlen) {
    int k;
    for (k = 0; k < 256; k++) {
        char c = (char)k;
        int id = mgt__tok_vmap_find(vm, &c, 1);
        if (id < 0) {
            mgt__tok_err(err, errlen, "%s: no token for byte %d", path, k);
            return -1;
        }
        t->byte_id[k] = (uint32_t)id;
    }
    return 0;
}

/* ---- merges hash --------------------------------------------------------- */

#define MGT__TOK_NO_KEY (~(uint64_t)0)   /* an empty slot: ids stay below 2^31 */
#define MGT__TOK_PAIR(a, b) (((uint64_t)(a) << 32) | (uint64_t)(b))

static uint32_t mgt__tok_key_hash(uint64_t key) {
    return mgt__tok_mix((uint32_t)key ^ mgt__tok_mix((uint32_t)(key >> 32)));
}

static uint32_t mgt__tok_merge_find(const mgt_tokenizer *t, uint64_t key) {
    uint32_t h = mgt__tok_key_hash(key) & t->mmask;
    for (;; h = (h + 1) & t->mmask) {
        if (t->mkey[h] == key) return h;
        if (t->mkey[h] == MGT__TOK_NO_KEY) return 0xFFFFFFFFu;
    }
}

static int mgt__tok_merges_init(mgt_tokenizer *t, size_t nmerges) {   /* room for nmerges */
    uint32_t cap = 1;
    while (cap < 2 * nmerges + 2) cap *= 2;
    t->mkey = (uint64_t *)MGT_TOK_MALLOC(cap * sizeof *t->mkey);
    t->mrank = (uint32_t *)MGT_TOK_MALLOC(cap * sizeof *t->mrank);
    t->mid = (uint32_t *)MGT_TOK_MALLOC(cap * sizeof *t->mid);
    if (!t->mkey || !t->mrank || !t->mid) return -1;
    memset(t->mkey, 0xFF, cap * sizeof *t->mkey);
    t->mmask = cap - 1;
    return 0;
}

/* The merge of ids a and b into m at rank; a pair listed again keeps its first (lowest) rank. */
static void mgt__tok_merge_add(mgt_tokenizer *t, int a, int b, int m, uint32_t rank) {
    uint64_t key = MGT__TOK_PAIR(a, b);
    uint32_t h;
    if (mgt__tok_merge_find(t, key) != 0xFFFFFFFFu) return;
    h = mgt__tok_key_hash(key) & t->mmask;
    while (t->mkey[h] != MGT__TOK_NO_KEY) h = (h + 1) & t->mmask;
    t->mkey[h] = key;
    t->mrank[h] = rank;
    t->mid[h] = (uint32_t)m;
}

/* ---- loading GPT-2 ------------------------------------------------------- */

/* encoder.json's entries in the file's order: entry k is the token bytes[off[k] .. off[k+1]) with
   id id[k] */
typedef struct {
    char *bytes;
    uint32_t *off;
    int *id;
    size_t n, nbytes, cap_off, cap_id;
} mgt__tok_entries;

/* encoder.json's text js[0..nj), { "token": id, ... }, into e, each token as its bytes. 0, or -1
   with the message (a malformed place named by its byte offset). */
static int mgt__tok_gpt2_parse_encoder(const char *js, size_t nj, const char *path,
                                       mgt__tok_entries *e, char *err, size_t errlen) {
    char *tmp = (char *)MGT_TOK_MALLOC(nj + 1);
    size_t i;
    const char *what = "";
    e->bytes = (char *)MGT_TOK_MALLOC(nj + 1);
    if (!e->bytes || !tmp) goto oom;
    i = mgt__tok_skip_ws(js, nj, 0);
    if (i >= nj || js[i] != '{') { what = "expected '{'"; goto bad_json; }
    i = mgt__tok_skip_ws(js, nj, i + 1);
    if (i < nj && js[i] == '}') { what = "empty object"; goto bad_json; }
    for (;;) {
        long len, id = 0;
        size_t start = i;
        if (i >= nj || js[i] != '"') { what = "expected '\"' (a token string)"; goto bad_json; }
        len = mgt__tok_json_string(js, nj, &i, tmp);
        if (len < 0) { what = "bad string or escape"; goto bad_json; }
        len = mgt__tok_unbyte(tmp, (size_t)len);
        if (len < 0) { i = start; what = "token is not a GPT-2 byte-level string"; goto bad_json; }
        i = mgt__tok_skip_ws(js, nj, i);
        if (i >= nj || js[i] != ':') { what = "expected ':'"; goto bad_json; }
        i = mgt__tok_skip_ws(js, nj, i + 1);
        if (i >= nj || js[i] < '0' || js[i] > '9') { what = "expected a token id"; goto bad_json; }
        while (i < nj && js[i] >= '0' && js[i] <= '9') {
            id = id * 10 + (js[i++] - '0');
            if (id > 65534) { what = "token id above 65534"; goto bad_json; }
        }
        if (mgt__tok_grow((void **)&e->off, &e->cap_off, e->n + 2, sizeof *e->off) ||
            mgt__tok_grow((void **)&e->id, &e->cap_id, e->n + 1, sizeof *e->id))
            goto oom;
        e->off[e->n] = (uint32_t)e->nbytes;
        memcpy(e->bytes + e->nbytes, tmp, (size_t)len);
        e->nbytes += (size_t)len;
        e->id[e->n++] = (int)id;
        i = mgt__tok_skip_ws(js, nj, i);
        if (i < nj && js[i] == ',') { i = mgt__tok_skip_ws(js, nj, i + 1); continue; }
        if (i < nj && js[i] == '}') break;
        what = "expected ',' or '}'";
        goto bad_json;
    }
    e->off[e->n] = (uint32_t)e->nbytes;
    MGT_TOK_FREE(tmp);
    return 0;
bad_json:
    mgt__tok_err(err, errlen, "%s: malformed JSON at byte %ld: %s", path, (long)i, what);
    MGT_TOK_FREE(tmp);
    return -1;
oom:
    mgt__tok_err(err, errlen, "%s: out of memory", path);
    MGT_TOK_FREE(tmp);
    return -1;
}

/* The entries by id into t->off and t->bytes: every id 0 .. entries-1 exactly once. */
static int mgt__tok_gpt2_order(mgt_tokenizer *t, const mgt__tok_entries *e, const char *path,
                               char *err, size_t errlen) {
    uint32_t *entry_of;                   /* id -> entry */
    size_t k, o = 0;
    t->vocab_size = (int)e->n;
    t->off = (uint32_t *)MGT_TOK_MALLOC((e->n + 1) * sizeof *t->off);
    t->bytes = (char *)MGT_TOK_MALLOC(e->nbytes + 1);
    entry_of = (uint32_t *)MGT_TOK_MALLOC(e->n * sizeof *entry_of);
    if (!t->off || !t->bytes || !entry_of) {
        MGT_TOK_FREE(entry_of);
        mgt__tok_err(err, errlen, "%s: out of memory", path);
        return -1;
    }
    for (k = 0; k < e->n; k++) entry_of[k] = 0xFFFFFFFFu;
    for (k = 0; k < e->n; k++) {
        size_t id = (size_t)e->id[k];
        if (id >= e->n || entry_of[id] != 0xFFFFFFFFu) {
            mgt__tok_err(err, errlen, "%s: token id %ld is duplicated or out of range "
                         "(ids must be 0 .. entries-1)", path, (long)id);
            MGT_TOK_FREE(entry_of);
            return -1;
        }
        entry_of[id] = (uint32_t)k;
    }
    for (k = 0; k < e->n; k++) {
        uint32_t x = entry_of[k], l = e->off[x + 1] - e->off[x];
        t->off[k] = (uint32_t)o;
        memcpy(t->bytes + o, e->bytes + e->off[x], l);
        o += l;
    }
    t->off[e->n] = (uint32_t)o;
    MGT_TOK_FREE(entry_of);
    return 0;
}

/* The vocabulary's hash (bytes -> id) in vm, byte_id[] and the end-of-text token. */
static int mgt__tok_gpt2_vocab_map(mgt_tokenizer *t, mgt__tok_vmap *vm, const char *path,
                                   char *err, size_t errlen) {
    static const char eot[] = "<|endoftext|>";
    size_t k, ntok = (size_t)t->vocab_size;
    if (mgt__tok_vmap_init(vm, t, ntok)) {
        mgt__tok_err(err, errlen, "%s: out of memory", path);
        return -1;
    }
    for (k = 0; k < ntok; k++)
        if (mgt__tok_vmap_add(vm, (uint32_t)k)) {
            mgt__tok_err(err, errlen, "%s: token %ld appears twice", path, (long)k);
            return -1;
        }
    if (mgt__tok_byte_ids(t, vm, path, err, errlen)) return -1;
    t->eot = mgt__tok_vmap_find(vm, eot, sizeof eot - 1);
    return 0;
}

/* vocab.bpe's text bpe[0..nb): a "#version" line, then one "left right" per line, by rank; both
   sides and the merged token must be in the vocabulary (vm). */
static int mgt__tok_gpt2_merges(mgt_tokenizer *t, const mgt__tok_vmap *vm, const char *bpe,
                                size_t nb, const char *path, char *err, size_t errlen) {
    char *tmp = (char *)MGT_TOK_MALLOC(nb + 1);
    size_t i = 0;
    int line, nmerges = 0, rc = -1;
    if (!tmp || mgt__tok_merges_init(t, 65535)) {
        mgt__tok_err(err, errlen, "%s: out of memory", path);
        goto done;
    }
    for (line = 1; i < nb; line++) {
        size_t e = i, sp, end;
        long la, lb;
        int a, b, m;
        while (e < nb && bpe[e] != '\n') e++;
        end = e;
        if (end > i && bpe[end - 1] == '\r') end--;
        if (end == i || (line == 1 && bpe[i] == '#')) { i = e + 1; continue; }
        for (sp = i; sp < end && bpe[sp] != ' '; sp++) {}
        if (sp == i || sp + 1 >= end || memchr(bpe + sp + 1, ' ', end - sp - 1)) {
            mgt__tok_err(err, errlen, "%s: line %ld: expected two tokens separated by one "
                         "space", path, (long)line);
            goto done;
        }
        if (nmerges >= 65535) {
            mgt__tok_err(err, errlen, "%s: line %ld: more than 65535 merges", path, (long)line);
            goto done;
        }
        memcpy(tmp, bpe + i, end - i);
        la = mgt__tok_unbyte(tmp, sp - i);
        lb = mgt__tok_unbyte(tmp + (sp - i) + 1, end - sp - 1);
        if (la < 0 || lb < 0) {
            mgt__tok_err(err, errlen, "%s: line %ld: not a GPT-2 byte-level string", path,
                         (long)line);
            goto done;
        }
        memmove(tmp + la, tmp + (sp - i) + 1, (size_t)lb);
        a = mgt__tok_vmap_find(vm, tmp, (size_t)la);
        b = mgt__tok_vmap_find(vm, tmp + la, (size_t)lb);
        m = mgt__tok_vmap_find(vm, tmp, (size_t)(la + lb));
        if (a < 0 || b < 0 || m < 0) {
            mgt__tok_err(err, errlen, "%s: line %ld: a token or the merged token is not in "
                         "encoder.json", path, (long)line);
            goto done;
        }
        mgt__tok_merge_add(t, a, b, m, (uint32_t)nmerges);
        nmerges++;
        i = e + 1;
    }
    rc = 0;
done:
    MGT_TOK_FREE(tmp);
    return rc;
}

static int mgt__tok_load_gpt2(mgt_tokenizer *t, const char *dir, char *err, size_t errlen) {
    char path[4096], *js, *bpe = NULL;
    size_t nj, nb;
    mgt__tok_entries e;
    mgt__tok_vmap vm;
    int rc = -1;
    memset(&e, 0, sizeof e);
    memset(&vm, 0, sizeof vm);
    snprintf(path, sizeof path, "%s/encoder.json", dir);
    js = mgt__tok_read_file(path, &nj, err, errlen);
    if (!js) return -1;
    if (!mgt__tok_gpt2_parse_encoder(js, nj, path, &e, err, errlen) &&
        !mgt__tok_gpt2_order(t, &e, path, err, errlen) &&
        !mgt__tok_gpt2_vocab_map(t, &vm, path, err, errlen)) {
        snprintf(path, sizeof path, "%s/vocab.bpe", dir);
        bpe = mgt__tok_read_file(path, &nb, err, errlen);
        if (bpe) rc = mgt__tok_gpt2_merges(t, &vm, bpe, nb, path, err, errlen);
    }
    MGT_TOK_FREE(js); MGT_TOK_FREE(bpe);
    MGT_TOK_FREE(e.bytes); MGT_TOK_FREE(e.off); MGT_TOK_FREE(e.id);
    MGT_TOK_FREE(vm.tab);
    return rc;
}

/* ---- loading a Hugging Face tokenizer.json (MGT_TOK_HF) ------------------
   Byte-level BPE only: model BPE over byte-level strings, no normalizer, a
   pre-tokenizer of Split regexes (behavior Isolated), Digits and a final
   ByteLevel, the ByteLevel decoder. Anything else is refused by name rather
   than tokenized differently from Hugging Face. */
#ifdef MGT_TOK_HF

/* the pattern of HF's ByteLevel pre-tokenizer with use_regex = true (GPT-2's) */
static const char mgt__tok_gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static const char *mgt__tok_json_kind(const json_t *v) {
    switch (v ? json_typeof(v) : JSON_NULL) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: case JSON_REAL: return "a number";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* The string member key of object o, or NULL (and *kind says what it is instead). */
static const char *mgt__tok_json_str(const json_t *o, const char *key, const char **kind) {
    const json_t *v = json_object_get(o, key);
    *kind = mgt__tok_json_kind(v);
    return json_string_value(v);
}

/* 1 if o's member key is true, 0 if it is false, null or absent, -1 if it is something else. */
static int mgt__tok_json_flag(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v) || json_is_false(v)) return 0;
    return json_is_true(v) ? 1 : -1;
}

/* pattern with \s and \S spelled out as Unicode White_Space, which Hugging Face's regex engine
   (Oniguruma) means by them; PCRE2's \s also takes U+180E. \S inside a class is left as it is.
   Returns a buffer to free, or NULL (out of memory). */
#define MGT__TOK_WHITE_SPACE "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
static char *mgt__tok_hf_spaces(const char *p, size_t n, size_t *out_len) {
    static const char ws[] = MGT__TOK_WHITE_SPACE;
    char *out = (char *)MGT_TOK_MALLOC(n * (sizeof ws + 3) + 1);
    size_t i, o = 0;
    int in_class = 0;
    if (!out) return NULL;
    for (i = 0; i < n; i++) {
        if (p[i] == '\\' && i + 1 < n && (p[i + 1] == 's' || (p[i + 1] == 'S' && !in_class))) {
            o += (size_t)sprintf(out + o, "%s%s%s", in_class ? "" : p[i + 1] == 's' ? "[" : "[^", ws,
                                 in_class ? "" : "]");
            i++;
            continue;
        }
        if (p[i] == '\\' && i + 1 < n) { out[o++] = p[i++]; out[o++] = p[i]; continue; }
        if (!in_class && p[i] == '[') {                 /* a ']' first in a class is literal */
            in_class = 1;
            out[o++] = p[i];
            if (i + 1 < n && p[i + 1] == '^') out[o++] = p[++i];
            if (i + 1 < n && p[i + 1] == ']') out[o++] = p[++i];
            continue;
        }
        if (in_class && p[i] == ']') in_class = 0;
        out[o++] = p[i];
    }
    out[o] = 0;
    *out_len = o;
    return out;
}

/* Appends a pre-tokenizer regex stage (Split behavior Isolated: matches and the text between
   them are pieces). PCRE2_MATCH_INVALID_UTF: bytes that are not UTF-8 never match and stay
   pieces of their own, so any input encodes and decodes back to itself. */
static int mgt__tok_hf_stage(mgt_tokenizer *t, const char *pattern, size_t len, uint32_t options,
                             const char *path, const char *where, char *err, size_t errlen) {
    int code;
    PCRE2_SIZE at;
    pcre2_code *re;
    if (t->nstage >= MGT__TOK_HF_MAX_STAGES) {
        mgt__tok_err(err, errlen, "%s: %s: more than %d pre-tokenizer patterns", path, where,
                     MGT__TOK_HF_MAX_STAGES);
        return -1;
    }
    size_t len0 = len;
    char *spelled = options & PCRE2_LITERAL ? NULL : mgt__tok_hf_spaces(pattern, len, &len);
    if (!spelled && !(options & PCRE2_LITERAL)) {
        mgt__tok_err(err, errlen, "%s: out of memory", path);
        return -1;
    }
    re = pcre2_compile((PCRE2_SPTR)(spelled ? spelled : pattern), len,    /* a literal takes no UCP */
                       options | PCRE2_UTF | (spelled ? PCRE2_UCP : 0) | PCRE2_MATCH_INVALID_UTF,
                       &code, &at, NULL);
    MGT_TOK_FREE(spelled);
    if (!re && !(options & PCRE2_LITERAL))             /* the error at its place in the file's pattern */
        pcre2_code_free(pcre2_compile((PCRE2_SPTR)pattern, len0, options | PCRE2_UTF | PCRE2_UCP,
                                      &code, &at, NULL));
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        mgt__tok_err(err, errlen, "%s: %s: the pattern does not compile with PCRE2 at offset %lu: "
                     "%s", path, where, (unsigned long)at, (const char *)msg);
        return -1;
    }
    t->jit[t->nstage] = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0; /* else pcre2_match interprets */
    t->stage[t->nstage] = re;
    t->match[t->nstage] = pcre2_match_data_create_from_pattern(re, NULL);
    if (!t->match[t->nstage++]) {
        mgt__tok_err(err, errlen, "%s: out of memory", path);
        return -1;
    }
    return 0;
}

/* pre_tokenizer: Sequence, Split, Digits, ByteLevel (last). *byte_level is set by ByteLevel. */
static int mgt__tok_hf_pretok(mgt_tokenizer *t, const json_t *p, const char *where, int depth,
                              int *byte_level, const char *path, char *err, size_t errlen) {
    const char *type, *kind;
    char sub[128];
    if (!json_is_object(p)) {
        mgt__tok_err(err, errlen, "%s: %s is %s; byte-level BPE needs a ByteLevel pre-tokenizer",
                     path, where, mgt__tok_json_kind(p));
        return -1;
    }
    type = mgt__tok_json_str(p, "type", &kind);
    if (!type) {
        mgt__tok_err(err, errlen, "%s: %s.type is %s, not a string", path, where, kind);
        return -1;
    }
    if (*byte_level) {
        mgt__tok_err(err, errlen, "%s: %s: a %s pre-tokenizer after ByteLevel (it would see "
                     "ByteLevel's characters, not the text; mgt reads ByteLevel last)", path, where,
                     type);
        return -1;
    }
    if (!strcmp(type, "Sequence")) {
        const json_t *list = json_object_get(p, "pretokenizers");
        size_t k;
        if (!json_is_array(list) || depth > 4) {
            mgt__tok_err(err, errlen, "%s: %s.pretokenizers is %s, not a list", path, where,
                         depth > 4 ? "nested too deep" : mgt__tok_json_kind(list));
            return -1;
        }
        for (k = 0; k < json_array_size(list); k++) {
            snprintf(sub, sizeof sub, "%.60s.pretokenizers[%lu]", where, (unsigned long)k);
            if (mgt__tok_hf_pretok(t, json_array_get(list, k), sub, depth + 1, byte_level, path,
                                   err, errlen))
                return -1;
        }
        return 0;
    }
    if (!strcmp(type, "Split")) {
        const json_t *pat = json_object_get(p, "pattern"), *re = json_object_get(pat, "Regex");
        const json_t *lit = json_object_get(pat, "String");
        const char *behavior = mgt__tok_json_str(p, "behavior", &kind);
        if (!json_is_string(re) && !json_is_string(lit)) {
            mgt__tok_err(err, errlen, "%s: %s.pattern is %s, not {\"Regex\": ...} or "
                         "{\"String\": ...}", path, where, mgt__tok_json_kind(pat));
            return -1;
        }
        if (!behavior || strcmp(behavior, "Isolated") != 0 || mgt__tok_json_flag(p, "invert")) {
            mgt__tok_err(err, errlen, "%s: %s: behavior %s%s: mgt reads Split with behavior "
                         "Isolated and invert false", path, where, behavior ? behavior : kind,
                         mgt__tok_json_flag(p, "invert") ? ", invert true" : "");
            return -1;
        }
        snprintf(sub, sizeof sub, "%.80s.pattern", where);
        return re ? mgt__tok_hf_stage(t, json_string_value(re), json_string_length(re), 0, path,
                                      sub, err, errlen)
                  : mgt__tok_hf_stage(t, json_string_value(lit), json_string_length(lit),
                                      PCRE2_LITERAL, path, sub, err, errlen);
    }
    if (!strcmp(type, "Digits")) {   /* Rust's char::is_numeric is \p{N} */
        const char *pattern = mgt__tok_json_flag(p, "individual_digits") ? "\\p{N}" : "\\p{N}+";
        return mgt__tok_hf_stage(t, pattern, strlen(pattern), 0, path, where, err, errlen);
    }
    if (!strcmp(type, "ByteLevel")) {
        *byte_level = 1;
        if (mgt__tok_json_flag(p, "add_prefix_space")) {
            mgt__tok_err(err, errlen, "%s: %s: add_prefix_space true (a space put before the "
                         "text would not decode back to it): not supported", path, where);
            return -1;
        }
        if (json_object_get(p, "use_regex") && !json_is_false(json_object_get(p, "use_regex")))
            return mgt__tok_hf_stage(t, mgt__tok_gpt2_pattern, sizeof mgt__tok_gpt2_pattern - 1, 0,
                                     path, where, err, errlen);
        return 0;
    }
    mgt__tok_err(err, errlen, "%s: %s: pre-tokenizer %s is not supported (mgt reads Sequence, "
                 "Split, Digits and ByteLevel)", path, where, type);
    return -1;
}

/* The token a document starts with: the special token the post-processor's template puts before
   a single sequence (Llama 3's <|begin_of_text|>), else the special token <|endoftext|> (GPT-2),
   else none (-1). */
static int mgt__tok_hf_doc_start(const json_t *root, const json_t *added) {
    const json_t *pp = json_object_get(root, "post_processor"), *list;
    const char *kind, *type = mgt__tok_json_str(pp, "type", &kind);
    size_t k;
    list = type && !strcmp(type, "Sequence") ? json_object_get(pp, "processors") : NULL;
    for (k = 0; list ? k < json_array_size(list) : k < 1; k++) {
        const json_t *proc = list ? json_array_get(list, k) : pp, *first, *name, *ids;
        type = mgt__tok_json_str(proc, "type", &kind);
        if (!type || strcmp(type, "TemplateProcessing") != 0) continue;
        first = json_array_get(json_object_get(proc, "single"), 0);
        name = json_object_get(json_object_get(first, "SpecialToken"), "id");
        ids = json_object_get(json_object_get(json_object_get(proc, "special_tokens"),
                                              json_string_value(name) ? json_string_value(name)
                                                                      : ""), "ids");
        if (json_is_integer(json_array_get(ids, 0))) {
            json_int_t id = json_integer_value(json_array_get(ids, 0));
            return id >= 0 && id <= MGT__TOK_HF_MAX_ID ? (int)id : -1;
        }
    }
    for (k = 0; k < json_array_size(added); k++) {
        const json_t *a = json_array_get(added, k);
        const char *content = mgt__tok_json_str(a, "content", &kind);
        if (content && !strcmp(content, "<|endoftext|>") && mgt__tok_json_flag(a, "special") == 1)
            return (int)json_integer_value(json_object_get(a, "id"));   /* checked by the loader */
    }
    return -1;
}

typedef struct { uint32_t id; unsigned char first; uint32_t len; } mgt__tok_added;

static int mgt__tok_added_order(const void *pa, const void *pb) {  /* by first byte, longest first */
    const mgt__tok_added *a = (const mgt__tok_added *)pa, *b = (const mgt__tok_added *)pb;
    if (a->first != b->first) return a->first < b->first ? -1 : 1;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* A byte-level merge side "a" (or one side of "a b") as raw bytes in out; its id, or -1. */
static int mgt__tok_hf_merge_side(const mgt__tok_vmap *vm, const char *s, size_t n, char *out,
                                  long *len) {
    memcpy(out, s, n);
    *len = mgt__tok_unbyte(out, n);
    return *len < 0 ? -1 : mgt__tok_vmap_find(vm, out, (size_t)*len);
}

/* A tokenizer.json's tokens while it loads: each id's JSON string (its model.vocab key, else its
   added token's content) and whether model.vocab has it; the added tokens, for their table. */
typedef struct {
    const json_t *vocab, *merges, *added; /* model.vocab, model.merges, added_tokens */
    size_t vocab_size, nadded, total;     /* ids 0 .. vocab_size-1; the strings' bytes */
    const char **src;                     /* id -> its JSON string, or NULL for an unused id */
    uint32_t *srclen;
    unsigned char *from_vocab;            /* id -> 1 for a model.vocab token */
    mgt__tok_added *order;                /* the added tokens */
} mgt__tok_hf_tokens;

/* The file as JSON, its top level an object; NULL with the message otherwise. */
static json_t *mgt__tok_hf_read(const char *path, char *err, size_t errlen) {
    size_t ntext;
    char *text = mgt__tok_read_file(path, &ntext, err, errlen);
    json_error_t jerr;
    json_t *root;
    if (!text) return NULL;
    root = json_loadb(text, ntext, JSON_REJECT_DUPLICATES, &jerr);
    MGT_TOK_FREE(text);
    if (!root) {
        mgt__tok_err(err, errlen, "%s: malformed JSON at line %d, column %d: %s", path, jerr.line,
                     jerr.column, jerr.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        mgt__tok_err(err, errlen, "%s: the top level is %s, not an object", path,
                     mgt__tok_json_kind(root));
        json_decref(root);
        return NULL;
    }
    return root;
}

/* The model, normalizer, decoder and pre-tokenizer: byte-level BPE as mgt reads it, or refused
   by name. Sets ignore_merges and the pre-tokenizer's stages. */
static int mgt__tok_hf_choices(mgt_tokenizer *t, const json_t *root, const char *path, char *err,
                               size_t errlen) {
    const json_t *model = json_object_get(root, "model"), *v;
    const char *kind, *type = mgt__tok_json_str(model, "type", &kind);
    int byte_level = 0;
    if (!json_is_object(model) ||
        (json_object_get(model, "type") && (!type || strcmp(type, "BPE")))) {
        mgt__tok_err(err, errlen, "%s: model is %s%s%s: mgt reads byte-level BPE models", path,
                     json_is_object(model) ? "of type " : mgt__tok_json_kind(model),
                     json_is_object(model) ? (type ? type : kind) : "", "");
        return -1;
    }
    v = json_object_get(root, "normalizer");
    if (v && !json_is_null(v)) {
        type = mgt__tok_json_str(v, "type", &kind);
        mgt__tok_err(err, errlen, "%s: normalizer %s is not supported (mgt reads byte-level BPE "
                     "without a normalizer: GPT-2, Llama 3, SmolLM)", path, type ? type : kind);
        return -1;
    }
    if (mgt__tok_json_flag(model, "byte_fallback") ||
        (json_string_length(json_object_get(model, "continuing_subword_prefix")) > 0) ||
        (json_string_length(json_object_get(model, "end_of_word_suffix")) > 0) ||
        (json_is_number(json_object_get(model, "dropout")) &&
         json_number_value(json_object_get(model, "dropout")) != 0.0)) {
        mgt__tok_err(err, errlen, "%s: model: byte_fallback, continuing_subword_prefix, "
                     "end_of_word_suffix or dropout is set: not byte-level BPE as mgt reads it",
                     path);
        return -1;
    }
    t->ignore_merges = mgt__tok_json_flag(model, "ignore_merges") == 1;
    type = mgt__tok_json_str(json_object_get(root, "decoder"), "type", &kind);
    if (!type || strcmp(type, "ByteLevel") != 0) {
        mgt__tok_err(err, errlen, "%s: decoder is %s, not ByteLevel: not byte-level BPE", path,
                     type ? type : kind);
        return -1;
    }
    if (mgt__tok_hf_pretok(t, json_object_get(root, "pre_tokenizer"), "pre_tokenizer", 0,
                           &byte_level, path, err, errlen))
        return -1;
    if (!byte_level) {
        mgt__tok_err(err, errlen, "%s: pre_tokenizer has no ByteLevel: not byte-level BPE", path);
        return -1;
    }
    return 0;
}

/* model.vocab, model.merges and added_tokens, each of the kind it must be, into k. */
static int mgt__tok_hf_members(const json_t *root, mgt__tok_hf_tokens *k, const char *path,
                               char *err, size_t errlen) {
    const json_t *model = json_object_get(root, "model");
    k->vocab = json_object_get(model, "vocab");
    k->merges = json_object_get(model, "merges");
    k->added = json_object_get(root, "added_tokens");
    if (!json_is_object(k->vocab) || json_object_size(k->vocab) == 0) {
        mgt__tok_err(err, errlen, "%s: model.vocab is %s, not an object of tokens", path,
                     json_is_object(k->vocab) ? "empty" : mgt__tok_json_kind(k->vocab));
        return -1;
    }
    if (!json_is_array(k->merges)) {
        mgt__tok_err(err, errlen, "%s: model.merges is %s, not a list", path,
                     mgt__tok_json_kind(k->merges));
        return -1;
    }
    if (k->added && !json_is_null(k->added) && !json_is_array(k->added)) {
        mgt__tok_err(err, errlen, "%s: added_tokens is %s, not a list", path,
                     mgt__tok_json_kind(k->added));
        return -1;
    }
    k->nadded = json_array_size(k->added);
    return 0;
}

/* Every id an integer 0 .. MGT__TOK_HF_MAX_ID, which bounds the tables an id sizes; the largest
   plus one in k->vocab_size. */
static int mgt__tok_hf_ids(mgt__tok_hf_tokens *k, const char *path, char *err, size_t errlen) {
    const char *key;
    json_t *val;
    size_t i;
    json_object_foreach((json_t *)k->vocab, key, val) {
        json_int_t id = json_integer_value(val);
        if (!json_is_integer(val) || id < 0 || id > MGT__TOK_HF_MAX_ID) {
            char what[64];
            if (json_is_integer(val)) snprintf(what, sizeof what, "id %lld", (long long)id);
            else snprintf(what, sizeof what, "an id that is %s", mgt__tok_json_kind(val));
            mgt__tok_err(err, errlen, "%s: model.vocab: token \"%.40s\" has %s: ids are integers "
                         "0 .. %d", path, key, what, MGT__TOK_HF_MAX_ID);
            return -1;
        }
        if ((size_t)id + 1 > k->vocab_size) k->vocab_size = (size_t)id + 1;
    }
    for (i = 0; i < k->nadded; i++) {
        const json_t *a = json_array_get(k->added, i), *idv = json_object_get(a, "id");
        json_int_t id = json_integer_value(idv);
        if (!json_is_object(a) || !json_is_integer(idv) || id < 0 || id > MGT__TOK_HF_MAX_ID) {
            mgt__tok_err(err, errlen, "%s: added_tokens[%lu]: id is %s: ids are integers 0 .. "
                         "%d", path, (unsigned long)i, json_is_integer(idv) ? "out of range" :
                         mgt__tok_json_kind(idv), MGT__TOK_HF_MAX_ID);
            return -1;
        }
        if ((size_t)id + 1 > k->vocab_size) k->vocab_size = (size_t)id + 1;
    }
    return 0;
}

/* The strings of model.vocab's ids, each id given once. */
static int mgt__tok_hf_vocab_sources(mgt__tok_hf_tokens *k, const char *path, char *err,
                                     size_t errlen) {
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)k->vocab, key, val) {
        size_t id = (size_t)json_integer_value(val);
        if (k->src[id]) {
            mgt__tok_err(err, errlen, "%s: model.vocab: id %lu is given to \"%.40s\" and "
                         "\"%.40s\"", path, (unsigned long)id, k->src[id], key);
            return -1;
        }
        k->src[id] = key; k->srclen[id] = (uint32_t)strlen(key); k->from_vocab[id] = 1;
        k->total += k->srclen[id];
    }
    return 0;
}

/* The added tokens: a non-empty content without lstrip, rstrip or single_word, an id given once
   among them; their content is the string of an id model.vocab does not have. */
static int mgt__tok_hf_added_sources(mgt__tok_hf_tokens *k, const char *path, char *err,
                                     size_t errlen) {
    size_t i;
    for (i = 0; i < k->nadded; i++) {
        const json_t *a = json_array_get(k->added, i), *c = json_object_get(a, "content");
        size_t id = (size_t)json_integer_value(json_object_get(a, "id"));
        if (!json_is_string(c) || json_string_length(c) == 0) {
            mgt__tok_err(err, errlen, "%s: added_tokens[%lu]: content is %s, not a non-empty "
                         "string", path, (unsigned long)i,
                         json_is_string(c) ? "empty" : mgt__tok_json_kind(c));
            return -1;
        }
        if (mgt__tok_json_flag(a, "lstrip") || mgt__tok_json_flag(a, "rstrip") ||
            mgt__tok_json_flag(a, "single_word")) {
            mgt__tok_err(err, errlen, "%s: added_tokens[%lu] \"%.40s\": lstrip, rstrip or "
                         "single_word is set: not supported", path, (unsigned long)i,
                         json_string_value(c));
            return -1;
        }
        if (k->src[id] && !k->from_vocab[id]) {
            mgt__tok_err(err, errlen, "%s: added_tokens[%lu]: id %lu is given twice", path,
                         (unsigned long)i, (unsigned long)id);
            return -1;
        }
        k->order[i].id = (uint32_t)id;
        k->order[i].first = (unsigned char)json_string_value(c)[0];
        k->order[i].len = (uint32_t)json_string_length(c);
        if (!k->src[id]) {
            k->src[id] = json_string_value(c); k->srclen[id] = k->order[i].len;
            k->total += k->srclen[id];
        }
    }
    return 0;
}

/* The decode table (a vocabulary token's byte-level string as bytes, an added token's text), an
   added token's twin in model.vocab the same text, the vocabulary's hash and byte_id[]. */
static int mgt__tok_hf_decode_table(mgt_tokenizer *t, const mgt__tok_hf_tokens *k,
                                    const char *path, char *err, size_t errlen) {
    size_t i, total = 0;
    t->vocab_size = (int)k->vocab_size;
    t->bytes = (char *)MGT_TOK_MALLOC(k->total + 1);
    if (!t->bytes) goto oom;
    for (i = 0; i < k->vocab_size; i++) {
        long len = (long)k->srclen[i];
        t->off[i] = (uint32_t)total;
        if (!k->src[i]) continue;                       /* an unused id decodes to nothing */
        memcpy(t->bytes + total, k->src[i], k->srclen[i]);
        if (k->from_vocab[i] && (len = mgt__tok_unbyte(t->bytes + total, k->srclen[i])) < 0) {
            mgt__tok_err(err, errlen, "%s: model.vocab: \"%.40s\" (id %lu) is not a byte-level "
                         "string", path, k->src[i], (unsigned long)i);
            return -1;
        }
        total += (size_t)len;
    }
    t->off[k->vocab_size] = (uint32_t)total;
    for (i = 0; i < k->nadded; i++) {                   /* the vocabulary's twin must agree */
        const json_t *c = json_object_get(json_array_get(k->added, i), "content");
        uint32_t id = k->order[i].id;
        uint32_t len = k->order[i].len;
        if (k->from_vocab[id] && (t->off[id + 1] - t->off[id] != len ||
                                  memcmp(t->bytes + t->off[id], json_string_value(c), len))) {
            mgt__tok_err(err, errlen, "%s: added_tokens[%lu]: \"%.40s\" has id %u, which "
                         "model.vocab gives to another token", path, (unsigned long)i,
                         json_string_value(c), (unsigned)id);
            return -1;
        }
    }
    if (mgt__tok_vmap_init(&t->vocab, t, k->vocab_size)) goto oom;
    for (i = 0; i < k->vocab_size; i++)
        if (k->from_vocab[i] && mgt__tok_vmap_add(&t->vocab, (uint32_t)i)) {
            mgt__tok_err(err, errlen, "%s: model.vocab: \"%.40s\" (id %lu) is the same bytes as "
                         "another token", path, k->src[i], (unsigned long)i);
            return -1;
        }
    return mgt__tok_byte_ids(t, &t->vocab, path, err, errlen);
oom:
    mgt__tok_err(err, errlen, "%s: out of memory", path);
    return -1;
}

/* model.merges, "a b" or ["a", "b"], by rank: both sides and the merged token in the vocabulary. */
static int mgt__tok_hf_merges(mgt_tokenizer *t, const json_t *merges, const char *path, char *err,
                              size_t errlen) {
    size_t k, nmerges = json_array_size(merges);
    char *tmp = NULL;
    int rc = -1;
    if (mgt__tok_merges_init(t, nmerges)) goto oom;
    for (k = 0; k < nmerges; k++) {
        const json_t *m = json_array_get(merges, k);
        const char *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        long la, lb;
        int ia, ib, im;
        if (json_is_string(m)) {
            const char *s = json_string_value(m), *sp = strchr(s, ' ');
            if (sp && !strchr(sp + 1, ' ') && sp > s && sp[1]) {
                a = s; na = (size_t)(sp - s); b = sp + 1; nb = strlen(b);
            }
        } else if (json_is_array(m) && json_array_size(m) == 2 &&
                   json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0)); na = json_string_length(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1)); nb = json_string_length(json_array_get(m, 1));
        }
        if (!a || !na || !nb) {
            mgt__tok_err(err, errlen, "%s: model.merges[%lu] is %s, not \"a b\" or [\"a\", \"b\"]",
                         path, (unsigned long)k, mgt__tok_json_kind(m));
            goto done;
        }
        MGT_TOK_FREE(tmp);
        tmp = (char *)MGT_TOK_MALLOC(na + nb + 1);
        if (!tmp) goto oom;
        ia = mgt__tok_hf_merge_side(&t->vocab, a, na, tmp, &la);
        ib = mgt__tok_hf_merge_side(&t->vocab, b, nb, tmp + (la > 0 ? la : 0), &lb);
        im = la >= 0 && lb >= 0 ? mgt__tok_vmap_find(&t->vocab, tmp, (size_t)(la + lb)) : -1;
        if (ia < 0 || ib < 0 || im < 0) {
            mgt__tok_err(err, errlen, "%s: model.merges[%lu] \"%.*s\" + \"%.*s\": %s", path,
                         (unsigned long)k, (int)(na < 40 ? na : 40), a, (int)(nb < 40 ? nb : 40), b,
                         la < 0 || lb < 0 ? "not a byte-level string"
                                          : "a side or the merged token is not in model.vocab");
            goto done;
        }
        mgt__tok_merge_add(t, ia, ib, im, (uint32_t)k);
    }
    rc = 0;
    goto done;
oom:
    mgt__tok_err(err, errlen, "%s: out of memory", path);
done:
    MGT_TOK_FREE(tmp);
    return rc;
}

/* The added tokens, matched in the text before pre-tokenization: by first byte, longest first. */
static int mgt__tok_hf_added_table(mgt_tokenizer *t, mgt__tok_hf_tokens *k, const char *path,
                                   char *err, size_t errlen) {
    size_t i;
    qsort(k->order, k->nadded, sizeof *k->order, mgt__tok_added_order);
    t->added_id = (uint32_t *)MGT_TOK_MALLOC((k->nadded + 1) * sizeof *t->added_id);
    if (!t->added_id) {
        mgt__tok_err(err, errlen, "%s: out of memory", path);
        return -1;
    }
    memset(t->added_first, 0, sizeof t->added_first);
    for (i = 0; i < k->nadded; i++) {
        t->added_id[i] = k->order[i].id;
        t->added_first[k->order[i].first + 1]++;
    }
    for (i = 0; i < 256; i++) t->added_first[i + 1] += t->added_first[i];
    return 0;
}

static int mgt__tok_load_hf(mgt_tokenizer *t, const char *path, char *err, size_t errlen) {
    json_t *root = mgt__tok_hf_read(path, err, errlen);
    mgt__tok_hf_tokens k;
    int rc = -1;
    if (!root) return -1;
    memset(&k, 0, sizeof k);
    if (mgt__tok_hf_choices(t, root, path, err, errlen) ||
        mgt__tok_hf_members(root, &k, path, err, errlen) || mgt__tok_hf_ids(&k, path, err, errlen))
        goto done;
    k.src = (const char **)MGT_TOK_MALLOC(k.vocab_size * sizeof *k.src);
    k.srclen = (uint32_t *)MGT_TOK_MALLOC(k.vocab_size * sizeof *k.srclen);
    k.from_vocab = (unsigned char *)MGT_TOK_MALLOC(k.vocab_size);
    k.order = (mgt__tok_added *)MGT_TOK_MALLOC((k.nadded + 1) * sizeof *k.order);
    t->off = (uint32_t *)MGT_TOK_MALLOC((k.vocab_size + 1) * sizeof *t->off);
    if (!k.src || !k.srclen || !k.from_vocab || !k.order || !t->off) {
        mgt__tok_err(err, errlen, "%s: out of memory", path);
        goto done;
    }
    memset((void *)k.src, 0, k.vocab_size * sizeof *k.src);
    memset(k.from_vocab, 0, k.vocab_size);
    if (mgt__tok_hf_vocab_sources(&k, path, err, errlen) ||
        mgt__tok_hf_added_sources(&k, path, err, errlen) ||
        mgt__tok_hf_decode_table(t, &k, path, err, errlen) ||
        mgt__tok_hf_merges(t, k.merges, path, err, errlen) ||
        mgt__tok_hf_added_table(t, &k, path, err, errlen))
        goto done;
    t->eot = mgt__tok_hf_doc_start(root, k.added);
    if (t->eot >= (int)k.vocab_size) t->eot = -1;
    rc = 0;
done:
    json_decref(root);
    MGT_TOK_FREE((void *)k.src); MGT_TOK_FREE(k.srclen);
    MGT_TOK_FREE(k.from_vocab); MGT_TOK_FREE(k.order);
    return rc;
}
#endif /* MGT_TOK_HF */

/* ---- BPE ------------------------------------------------------------------ */

static int mgt__tok_cand_less(const mgt__tok_cand *a, const mgt__tok_cand *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void mgt__tok_heap_push(mgt__tok_cand *h, size_t *n, mgt__tok_cand c) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!mgt__tok_cand_less(&c, &h[p])) break;
        h[i] = h[p]; i = p;
    }
    h[i] = c;
}

static mgt__tok_cand mgt__tok_heap_pop(mgt__tok_cand *h, size_t *n) {
    mgt__tok_cand top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && mgt__tok_cand_less(&h[c + 1], &h[c])) c++;
        if (!mgt__tok_cand_less(&h[c], &last)) break;
        h[i] = h[c]; i = c;
    }
    if (*n) h[i] = last;
    return top;
}

static void mgt__tok_try_pair(mgt_tokenizer *t, size_t *nheap, int32_t pos) {
    int32_t nx = t->next[pos];
    uint64_t key;
    uint32_t slot;
    mgt__tok_cand c;
    if (pos < 0 || nx < 0) return;
    key = MGT__TOK_PAIR(t->sym[pos], t->sym[nx]);
    slot = mgt__tok_merge_find(t, key);
    if (slot == 0xFFFFFFFFu) return;
    c.rank = t->mrank[slot]; c.pos = (uint32_t)pos;
    c.left = t->sym[pos]; c.right = t->sym[nx];
    mgt__tok_heap_push(t->heap, nheap, c);
}

/* BPE of one pre-token w[0..n): always merges the lowest-ranked adjacent pair,
   leftmost first. GPT-2 merges all occurrences of the best pair per pass;
   this is the same because a merge only creates pairs that contain the new
   token, and in vocab.bpe every token is created before any merge that uses
   it (checked for GPT-2's file), so those pairs rank later. Output: the ids
   in t->sym, linked from 0 by t->next. */
static int mgt__tok_bpe(mgt_tokenizer *t, const unsigned char *w, size_t n) {
    size_t i, nheap = 0;
    if (n > 0x7FFFFFFF) return -1;
    if (mgt__tok_grow((void **)&t->sym, &t->capsym, n, sizeof *t->sym) ||
        mgt__tok_grow((void **)&t->prev, &t->capprev, n, sizeof *t->prev) ||
        mgt__tok_grow((void **)&t->next, &t->capnext, n, sizeof *t->next))
        return -1;
    if (mgt__tok_grow((void **)&t->heap, &t->capheap, 2 * n + 1, sizeof *t->heap)) return -1;
    for (i = 0; i < n; i++) {
        t->sym[i] = t->byte_id[w[i]];
        t->prev[i] = (int32_t)i - 1;
        t->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    for (i = 0; i + 1 < n; i++) mgt__tok_try_pair(t, &nheap, (int32_t)i);
    while (nheap) {
        mgt__tok_cand c = mgt__tok_heap_pop(t->heap, &nheap);
        int32_t pos = (int32_t)c.pos, nx = t->next[pos];
        uint32_t slot;
        if (t->sym[pos] == MGT__TOK_DEAD || nx < 0 || t->sym[pos] != c.left || t->sym[nx] != c.right)
            continue;                                   /* stale candidate */
        slot = mgt__tok_merge_find(t, MGT__TOK_PAIR(c.left, c.right));
        t->sym[pos] = t->mid[slot];
        t->sym[nx] = MGT__TOK_DEAD;
        t->next[pos] = t->next[nx];
        if (t->next[nx] >= 0) t->prev[t->next[nx]] = pos;
        if (t->prev[pos] >= 0) mgt__tok_try_pair(t, &nheap, t->prev[pos]);
        mgt__tok_try_pair(t, &nheap, pos);
    }
    return 0;
}

static int mgt__tok_push(uint32_t **ids, size_t *n, size_t *cap, const uint32_t *src, size_t k) {
    if (*n + k > *cap && mgt__tok_grow((void **)ids, cap, *n + k, sizeof **ids)) return -1;
    memcpy(*ids + *n, src, k * sizeof *src);
    *n += k;
    return 0;
}

static void mgt__tok_cache_clear(mgt_tokenizer *t) {
    if (t->ctab) memset(t->ctab, 0, (t->cmask + 1) * sizeof *t->ctab);
    t->ncent = 0; t->nckeys = 0; t->ncids = 0;
}

/* Encodes one pre-token through the cache. */
static int mgt__tok_word(mgt_tokenizer *t, const unsigned char *w, size_t len,
                         uint32_t **ids, size_t *n, size_t *cap) {
    uint32_t hash = 0, h = 0;
    size_t n0 = *n;
    int32_t p;
    if (len == 1) return mgt__tok_push(ids, n, cap, &t->byte_id[w[0]], 1);
#ifdef MGT_TOK_HF
    if (t->ignore_merges) {                             /* a word in the vocabulary is its id */
        int id = mgt__tok_vmap_find(&t->vocab, (const char *)w, len);
        if (id >= 0) { uint32_t one = (uint32_t)id; return mgt__tok_push(ids, n, cap, &one, 1); }
    }
#endif
    if (len <= MGT__TOK_CACHE_MAX_WORD && t->ctab) {
        hash = mgt__tok_hash(w, len);
        for (h = hash & t->cmask; t->ctab[h]; h = (h + 1) & t->cmask) {
            const mgt__tok_cache_entry *e = &t->cent[t->ctab[h] - 1];
            if (e->hash == hash && e->key_len == len && memcmp(t->ckeys + e->key_off, w, len) == 0)
                return mgt__tok_push(ids, n, cap, t->cids + e->ids_off, e->n_ids);
        }
    }
    if (mgt__tok_bpe(t, w, len)) return -1;
    for (p = 0; p >= 0; p = t->next[p])
        if (mgt__tok_push(ids, n, cap, &t->sym[p], 1)) return -1;
    if (len <= MGT__TOK_CACHE_MAX_WORD && t->ctab) {
        size_t k = *n - n0;
        mgt__tok_cache_entry *e;
        if (t->ncent >= MGT__TOK_CACHE_MAX_ENTRIES) {
            mgt__tok_cache_clear(t);
            for (h = hash & t->cmask; t->ctab[h]; h = (h + 1) & t->cmask) {}
        }
        if (mgt__tok_grow((void **)&t->ckeys, &t->capckeys, t->nckeys + len, 1) ||
            mgt__tok_grow((void **)&t->cids, &t->capcids, t->ncids + k, sizeof *t->cids))
            return 0;                                   /* no room: just don't cache */
        e = &t->cent[t->ncent];
        e->hash = hash; e->key_off = (uint32_t)t->nckeys; e->key_len = (uint16_t)len;
        e->ids_off = (uint32_t)t->ncids; e->n_ids = (uint16_t)k;
        memcpy(t->ckeys + t->nckeys, w, len); t->nckeys += len;
        memcpy(t->cids + t->ncids, *ids + n0, k * sizeof *t->cids); t->ncids += k;
        t->ctab[h] = ++t->ncent;
    }
    return 0;
}

#ifdef MGT_TOK_HF
/* Splits s[0..n) with pre-tokenizer stage `stage` onwards (Split, behavior Isolated: each match
   and each stretch between matches is a piece for the next stage) and encodes the pieces. */
static int mgt__tok_hf_split(mgt_tokenizer *t, int stage, const unsigned char *s, size_t n,
                             uint32_t **ids, size_t *nids, size_t *cap) {
    size_t piece = 0, from = 0;
    if (n == 0) return 0;
    if (stage == t->nstage) return mgt__tok_word(t, s, n, ids, nids, cap);
    while (from < n) {
        PCRE2_SIZE *ov;
        int rc = t->jit[stage] ? pcre2_jit_match(t->stage[stage], s, n, from, 0, t->match[stage], NULL)
                               : pcre2_match(t->stage[stage], s, n, from, 0, t->match[stage], NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT)           /* the interpreter keeps its state on the heap */
            rc = pcre2_match(t->stage[stage], s, n, from, PCRE2_NO_JIT, t->match[stage], NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) return -1;
        ov = pcre2_get_ovector_pointer(t->match[stage]);
        if (ov[1] == ov[0]) {                           /* an empty match cuts nothing */
            size_t len;
            uint32_t cp;
            if (ov[0] >= n) break;
            len = mgt__tok_utf8(s + ov[0], n - ov[0], &cp);
            from = ov[0] + len;
            continue;
        }
        if (mgt__tok_hf_split(t, stage + 1, s + piece, ov[0] - piece, ids, nids, cap) ||
            mgt__tok_hf_split(t, stage + 1, s + ov[0], ov[1] - ov[0], ids, nids, cap))
            return -1;
        piece = from = ov[1];
    }
    return mgt__tok_hf_split(t, stage + 1, s + piece, n - piece, ids, nids, cap);
}

/* Added tokens are cut out of the text first (leftmost, then longest, as Hugging Face's
   AddedVocabulary); the text between them goes through the pre-tokenizer and BPE. */
static int mgt__tok_hf_encode(mgt_tokenizer *t, const unsigned char *s, size_t len,
                              uint32_t **ids, size_t *n, size_t *cap) {
    size_t i = 0, plain = 0;
    while (i < len) {
        uint32_t a = t->added_first[s[i]], end = t->added_first[s[i] + 1];
        for (; a < end; a++) {
            uint32_t id = t->added_id[a];
            size_t l = t->off[id + 1] - t->off[id];
            if (l <= len - i && memcmp(s + i, t->bytes + t->off[id], l) == 0) break;
        }
        if (a == end) { i++; continue; }
        if (mgt__tok_hf_split(t, 0, s + plain, i - plain, ids, n, cap) ||
            mgt__tok_push(ids, n, cap, &t->added_id[a], 1))
            return -1;
        i += t->off[t->added_id[a] + 1] - t->off[t->added_id[a]];
        plain = i;
    }
    return mgt__tok_hf_split(t, 0, s + plain, len - plain, ids, n, cap);
}
#endif /* MGT_TOK_HF */

/* ---- public API ----------------------------------------------------------- */

static const unsigned char mgt__tok_bytes256[256] = {
    0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,
    32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60,
    61,62,63,64,65,66,67,68,69,70,71,72,73,74,75,76,77,78,79,80,81,82,83,84,85,86,87,88,89,
    90,91,92,93,94,95,96,97,98,99,100,101,102,103,104,105,106,107,108,109,110,111,112,113,
    114,115,116,117,118,119,120,121,122,123,124,125,126,127,128,129,130,131,132,133,134,135,
    136,137,138,139,140,141,142,143,144,145,146,147,148,149,150,151,152,153,154,155,156,157,
    158,159,160,161,162,163,164,165,166,167,168,169,170,171,172,173,174,175,176,177,178,179,
    180,181,182,183,184,185,186,187,188,189,190,191,192,193,194,195,196,197,198,199,200,201,
    202,203,204,205,206,207,208,209,210,211,212,213,214,215,216,217,218,219,220,221,222,223,
    224,225,226,227,228,229,230,231,232,233,234,235,236,237,238,239,240,241,242,243,244,245,
    246,247,248,249,250,251,252,253,254,255};

MGT_TOKDEF int mgt_tok_open(mgt_tokenizer **out, const char *kind, const char *path,
                            char *err, size_t errlen) {
    mgt_tokenizer *t;
    if (err && errlen) err[0] = 0;
    if (!out) { mgt__tok_err(err, errlen, "mgt_tok_open: out is NULL"); return -1; }
    *out = NULL;
    if (!kind || (strcmp(kind, "byte") != 0 && strcmp(kind, "gpt2") != 0 && strcmp(kind, "hf") != 0)) {
        mgt__tok_err(err, errlen, "unknown tokenizer '%s' (valid: byte, gpt2, hf)",
                     kind ? kind : "(null)");
        return -1;
    }
    if (strcmp(kind, "gpt2") == 0 && (!path || !*path)) {
        mgt__tok_err(err, errlen, "gpt2 tokenizer needs a directory with encoder.json and "
                     "vocab.bpe");
        return -1;
    }
    if (strcmp(kind, "hf") == 0) {
#ifdef MGT_TOK_HF
        if (!path || !*path) {
            mgt__tok_err(err, errlen, "hf tokenizer needs the path of a tokenizer.json");
            return -1;
        }
#else
        mgt__tok_err(err, errlen, "the hf tokenizer is not in this build (define MGT_TOK_HF "
                     "beside MGT_TOKENIZER_IMPLEMENTATION and link libpcre2-8 and jansson)");
        return -1;
#endif
    }
    t = (mgt_tokenizer *)MGT_TOK_MALLOC(sizeof *t);
    if (!t) { mgt__tok_err(err, errlen, "out of memory"); return -1; }
    memset(t, 0, sizeof *t);
    if (strcmp(kind, "byte") == 0) {
        int b;
        t->kind = MGT__TOK_BYTE; t->vocab_size = 256; t->eot = -1;
        for (b = 0; b < 256; b++) t->byte_id[b] = (uint32_t)b;
        *out = t;
        return 0;
    }
    t->kind = strcmp(kind, "hf") == 0 ? MGT__TOK_HF : MGT__TOK_GPT2;
#ifdef MGT_TOK_HF
    if (t->kind == MGT__TOK_HF ? mgt__tok_load_hf(t, path, err, errlen)
                               : mgt__tok_load_gpt2(t, path, err, errlen)) {
#else
    if (mgt__tok_load_gpt2(t, path, err, errlen)) {
#endif
        mgt_tok_close(t);
        return -1;
    }
    t->cmask = 2 * MGT__TOK_CACHE_MAX_ENTRIES - 1;      /* cache is optional: no room, no cache */
    t->ctab = (uint32_t *)MGT_TOK_MALLOC((t->cmask + 1) * sizeof *t->ctab);
    t->cent = (mgt__tok_cache_entry *)MGT_TOK_MALLOC(MGT__TOK_CACHE_MAX_ENTRIES * sizeof *t->cent);
    if (!t->ctab || !t->cent) {
        MGT_TOK_FREE(t->ctab); MGT_TOK_FREE(t->cent); t->ctab = NULL; t->cent = NULL;
    } else {
        memset(t->ctab, 0, (t->cmask + 1) * sizeof *t->ctab);
    }
    *out = t;
    return 0;
}

MGT_TOKDEF void mgt_tok_close(mgt_tokenizer *t) {
    if (!t) return;
    MGT_TOK_FREE(t->off); MGT_TOK_FREE(t->bytes);
    MGT_TOK_FREE(t->mkey); MGT_TOK_FREE(t->mrank); MGT_TOK_FREE(t->mid);
    MGT_TOK_FREE(t->ctab); MGT_TOK_FREE(t->cent); MGT_TOK_FREE(t->ckeys); MGT_TOK_FREE(t->cids);
    MGT_TOK_FREE(t->sym); MGT_TOK_FREE(t->prev); MGT_TOK_FREE(t->next); MGT_TOK_FREE(t->heap);
#ifdef MGT_TOK_HF
    {
        int k;
        for (k = 0; k < t->nstage; k++) {
            pcre2_match_data_free(t->match[k]);
            pcre2_code_free(t->stage[k]);
        }
        MGT_TOK_FREE(t->vocab.tab); MGT_TOK_FREE(t->added_id);
    }
#endif
    MGT_TOK_FREE(t);
}

MGT_TOKDEF int mgt_tok_vocab_size(const mgt_tokenizer *t) { return t ? t->vocab_size : -1; }
MGT_TOKDEF int mgt_tok_eot(const mgt_tokenizer *t) { return t ? t->eot : -1; }

MGT_TOKDEF int mgt_tok_encode(mgt_tokenizer *t, const char *text, size_t len,
                              uint32_t **ids, size_t *n, size_t *cap) {
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    if (!t || !ids || !n || !cap || (!text && len)) return -1;
    if (t->kind == MGT__TOK_BYTE) {
        size_t k;
        if (*n + len > *cap && mgt__tok_grow((void **)ids, cap, *n + len, sizeof **ids)) return -1;
        for (k = 0; k < len; k++) (*ids)[*n + k] = s[k];
        *n += len;
        return 0;
    }
#ifdef MGT_TOK_HF
    if (t->kind == MGT__TOK_HF) return mgt__tok_hf_encode(t, s, len, ids, n, cap);
#endif
    while (i < len) {
        size_t k = mgt__tok_pretoken(s, len, i);
        if (mgt__tok_word(t, s + i, k, ids, n, cap)) return -1;
        i += k;
    }
    return 0;
}

MGT_TOKDEF int mgt_tok_decode(const mgt_tokenizer *t, int id, const char **bytes) {
    if (!t || !bytes || id < 0 || id >= t->vocab_size) return -1;
    if (t->kind == MGT__TOK_BYTE) {
        *bytes = (const char *)&mgt__tok_bytes256[id];
        return 1;
    }
    *bytes = t->bytes + t->off[id];
    return (int)(t->off[id + 1] - t->off[id]);
}

#endif /* MGT_TOKENIZER_IMPLEMENTED */
#endif /* MGT_TOKENIZER_IMPLEMENTATION */
