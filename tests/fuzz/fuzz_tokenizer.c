/* libFuzzer target: the GPT-2 BPE loader and encoder (data/tokenizer.h).
   Input: encoder.json, vocab.bpe and a text, the parts separated by NUL bytes (the text is the rest,
   NULs included): the two files are written to the target's temporary folder and opened with
   mgt_tok_open("gpt2"); when they load, the text is encoded with them. Besides, the whole input, as
   arbitrary bytes, is encoded with the byte tokenizer and with the real GPT-2 files when they are
   present ($MGT_BPE_DIR, else ../shared/data/gpt2-bpe from the working folder, the repository root;
   without them that part is skipped, with a note at start). For every encoding the target checks
   that each id is below the vocabulary size and that decode(encode(x)) == x, byte for byte.
   Seeds: tests/fuzz/corpus/tokenizer (tests/fuzz/make_seeds.c): a small byte-level vocabulary with
   merges, and texts. Build: `ninja build/fuzz/tokenizer`; run: see README (Tests, fuzzing). */
#define MGT_TOKENIZER_IMPLEMENTATION
#include "data/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

static mgt_tokenizer *byte_tok, *gpt2_tok;

/* encodes text with tok and checks the ids and the round trip */
static void roundtrip(mgt_tokenizer *tok, const char *name, const char *text, size_t len) {
    uint16_t *ids = NULL;
    size_t n = 0, cap = 0, i, at = 0;
    int vocab = mgt_tok_vocab_size(tok);
    if (mgt_tok_encode(tok, text, len, &ids, &n, &cap) != 0) { fprintf(stderr, "%s: encode failed\n", name); abort(); }
    for (i = 0; i < n; i++) {
        const char *bytes;
        int k = mgt_tok_decode(tok, ids[i], &bytes);
        if (ids[i] >= vocab || k < 0) { fprintf(stderr, "%s: id %d of %d is not in the vocabulary (%d)\n", name, (int)ids[i], (int)i, vocab); abort(); }
        if (at + (size_t)k > len || (k && memcmp(text + at, bytes, (size_t)k))) {
            fprintf(stderr, "%s: decode(encode(x)) != x at byte %zu (id %d of %zu)\n", name, at, (int)i, n);
            abort();
        }
        at += (size_t)k;
    }
    if (at != len) { fprintf(stderr, "%s: decode(encode(x)) has %zu bytes, x has %zu\n", name, at, len); abort(); }
    free(ids);
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
    n = fuzz_split(data, size, store, parts, 3, &text_len);
    if (n < 2) return 0;
    fuzz_write("encoder.json", parts[0], strlen(parts[0]), path, sizeof path);
    fuzz_write("vocab.bpe", parts[1], strlen(parts[1]), path, sizeof path);
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
