/* libFuzzer target: the hf tokenizer (data/tokenizer.h with MGT_TOK_HF): a Hugging Face
   tokenizer.json read with jansson, its patterns compiled by PCRE2.
   Input: tokenizer.json, a NUL byte, then a text (the rest, NULs included). The file is written to
   the target's temporary folder and opened with mgt_tok_open("hf"); a refusal must come with a
   message that names the file; a file that loads encodes the text, and every id must be below the
   vocabulary size and decode(encode(x)) == x, byte for byte.
   Seeds: tests/fuzz/corpus/hf_tokenizer (tests/fuzz/make_seeds.c): the Llama 3-style fixture
   tests/fixtures/hf_llama3ish.json and a GPT-2-style file of byte tokens, with texts. Build:
   `ninja build/fuzz/hf_tokenizer`; run: see docs/testing.md (fuzzing). */
#define MGT_TOKENIZER_IMPLEMENTATION
#define MGT_TOK_HF
#include "data/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    fuzz_tmpdir("hf_tokenizer");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char store[(1 << 20) + 8];
    char *parts[2], path[600], err[1024];
    size_t text_len = 0;
    int n;
    mgt_tokenizer *tok;
    if (size > 1 << 20) return -1;
    n = fuzz_split(data, size, store, parts, 2, &text_len);
    fuzz_write("tokenizer.json", parts[0], strlen(parts[0]), path, sizeof path);
    err[0] = 0;
    if (mgt_tok_open(&tok, "hf", path, err, sizeof err) != 0) {
        if (strncmp(err, path, strlen(path)) != 0) { fprintf(stderr, "a refusal that does not name the file: '%s'\n", err); abort(); }
        return 0;
    }
    if (mgt_tok_eot(tok) >= mgt_tok_vocab_size(tok)) { fprintf(stderr, "document-start id beyond the vocabulary\n"); abort(); }
    if (n == 2) roundtrip(tok, "hf", parts[1], text_len);
    mgt_tok_close(tok);
    return 0;
}
