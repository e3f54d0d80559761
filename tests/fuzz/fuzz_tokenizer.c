/* libFuzzer target: the GPT-2 BPE loader and encoder (data/tokenizer.h).
   Input, in one of two forms (the first byte tells which):
   - starting with '{': encoder.json, vocab.bpe and a text, the parts separated by NUL bytes (the
     text is the rest, NULs included). The two files are written to the target's temporary folder
     and opened with mgt_tok_open("gpt2"); when they load, the text is encoded with them;
   - otherwise: vocab.bpe and a text, NUL-separated. The target writes the encoder.json these
     merges need (the 256 bytes, then each merged token once, then <|endoftext|>), so that most
     inputs load and the encoder runs on arbitrary merge tables (a fuzzed encoder.json rarely has
     every byte exactly once).
   Besides, the whole input, as arbitrary bytes, is encoded with the byte tokenizer and with the
   real GPT-2 files when they are present ($MGT_BPE_DIR, else ../shared/data/gpt2-bpe from the
   working folder, the repository root; without them that part is skipped, with a note at start).
   For every encoding the target checks that each id is below the vocabulary size and that
   decode(encode(x)) == x, byte for byte.
   Seeds: tests/fuzz/corpus/tokenizer (tests/fuzz/make_seeds.c): a small byte-level vocabulary with
   merges in both forms, and texts. Build: `ninja build/fuzz/tokenizer`; run: see README (Tests,
   fuzzing). */
#define MGT_TOKENIZER_IMPLEMENTATION
#include "data/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

static mgt_tokenizer *byte_tok, *gpt2_tok;

/* GPT-2's byte-level text of byte b, as UTF-8: b when printable, else U+0100 + k for the k-th other */
static size_t byte_char(int b, char *out) {
    int c, k = 0, cp;
#define PRINTABLE(x) (((x) >= 0x21 && (x) <= 0x7E) || ((x) >= 0xA1 && (x) <= 0xAC) || ((x) >= 0xAE && (x) <= 0xFF))
    for (c = 0; c < b; c++) k += !PRINTABLE(c);
    cp = PRINTABLE(b) ? b : 256 + k;
#undef PRINTABLE
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 63));
    return 2;
}

/* a JSON string of s[0..n) into out; returns its length */
static size_t json_string(const char *s, size_t n, char *out) {
    size_t i, o = 0;
    out[o++] = '"';
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') { out[o++] = '\\'; out[o++] = (char)c; }
        else if (c < 0x20) o += (size_t)sprintf(out + o, "\\u%04x", c);
        else out[o++] = (char)c;
    }
    out[o++] = '"';
    return o;
}

/* the encoder.json that vocab.bpe's merges need: every byte, each "left right" line's left+right
   once (in the order of the lines; lines without exactly one space are left for the loader to
   refuse), <|endoftext|>; written to the folder */
static void write_encoder_for(const char *bpe) {
    static char json[(1 << 16) * 7 + 8192], arena[(1 << 16) + 1024];
    static uint32_t set[1 << 17], off[1 << 16], len_of[1 << 16]; /* tokens by hash: index + 1 */
    char path[600];
    size_t o = 0, used = 0, len;
    int n = 0, b;
    const char *line = bpe;
    memset(set, 0, sizeof set);
    json[o++] = '{';
    for (;; line += len + 1) {
        const char *sp = NULL, *tok;
        size_t m, k, i;
        uint32_t h = 2166136261u;
        if (n < 256) { /* the bytes first */
            b = n;
            len = (size_t)-1; /* no line consumed: line += len + 1 stays */
            m = byte_char(b, arena + used);
        } else {
            if (!*line) break;
            len = strcspn(line, "\n");
            k = len && line[len - 1] == '\r' ? len - 1 : len;
            if (line == bpe && line[0] == '#') { if (!line[len]) break; continue; }
            sp = (const char *)memchr(line, ' ', k);
            if (!sp || memchr(sp + 1, ' ', k - (size_t)(sp + 1 - line)) || n >= 65000) { if (!line[len]) break; continue; }
            m = (size_t)(sp - line);
            memcpy(arena + used, line, m);
            memcpy(arena + used + m, sp + 1, k - m - 1);
            m = k - 1;
        }
        tok = arena + used;
        for (i = 0; i < m; i++) h = (h ^ (unsigned char)tok[i]) * 16777619u;
        for (h &= (1u << 17) - 1; set[h]; h = (h + 1) & ((1u << 17) - 1))
            if (len_of[set[h] - 1] == m && !memcmp(arena + off[set[h] - 1], tok, m)) break;
        if (!set[h]) { /* a new token */
            set[h] = (uint32_t)n + 1;
            off[n] = (uint32_t)used;
            len_of[n] = (uint32_t)m;
            used += m;
            o += (size_t)sprintf(json + o, "%s", n ? ", " : "");
            o += json_string(tok, m, json + o);
            o += (size_t)sprintf(json + o, ": %d", n++);
        }
        if (len != (size_t)-1 && !line[len]) break;
    }
    o += (size_t)sprintf(json + o, ", \"<|endoftext|>\": %d}\n", n);
    fuzz_write("encoder.json", json, o, path, sizeof path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *dir = getenv("MGT_BPE_DIR");
    char err[512];
    (void)argc; (void)argv;
    fuzz_tmpdir("tokenizer");
    if (mgt_tok_open(&byte_tok, "byte", NULL, err, sizeof err)) { fprintf(stderr, "%s\n", err); abort(); }
    if (!dir || !*dir) dir = "../shared/data/gpt2-bpe";
    if (mgt_tok_open(&gpt2_tok, "gpt2", dir, err, sizeof err)) {
        fprintf(stderr, "note: the real GPT-2 files are absent (%s); encoding with them is skipped\n", err);
        gpt2_tok = NULL;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char store[(1 << 16) + 8];
    char *parts[3], path[600], err[512];
    size_t text_len = 0;
    int n;
    mgt_tokenizer *tok;
    if (size > 1 << 16) return -1;
    roundtrip(byte_tok, "byte", (const char *)data, size);
    if (gpt2_tok) roundtrip(gpt2_tok, "gpt2 (real files)", (const char *)data, size);
    if (size && data[0] == '{') { /* encoder.json NUL vocab.bpe NUL text */
        n = fuzz_split(data, size, store, parts, 3, &text_len);
        if (n < 2) return 0;
        fuzz_write("encoder.json", parts[0], strlen(parts[0]), path, sizeof path);
        fuzz_write("vocab.bpe", parts[1], strlen(parts[1]), path, sizeof path);
    } else { /* vocab.bpe NUL text, with the encoder.json it needs */
        n = fuzz_split(data, size, store, parts + 1, 2, &text_len) + 1;
        write_encoder_for(parts[1]);
        fuzz_write("vocab.bpe", parts[1], strlen(parts[1]), path, sizeof path);
    }
    err[0] = 0;
    if (mgt_tok_open(&tok, "gpt2", fuzz_dir, err, sizeof err) != 0) {
        if (!err[0]) { fprintf(stderr, "mgt_tok_open failed without a message\n"); abort(); }
        return 0;
    }
    if (mgt_tok_eot(tok) >= mgt_tok_vocab_size(tok)) { fprintf(stderr, "end-of-text id beyond the vocabulary\n"); abort(); }
    if (n == 3) roundtrip(tok, "gpt2 (input files)", parts[2], text_len);
    mgt_tok_close(tok);
    return 0;
}
