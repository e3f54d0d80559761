/* test_hf_tokenizer.c - checks data/tokenizer.h's "hf" tokenizer (MGT_TOK_HF: a Hugging Face
   tokenizer.json through PCRE2 and jansson) against Hugging Face `tokenizers`:

   - tests/fixtures/hf_llama3ish.json, a byte-level BPE trained with `tokenizers` on Llama 3's
     pre-tokenizer pattern with Llama 3's special tokens, against the ids `tokenizers` gave
     (tests/fixtures/hf_llama3ish_ids.txt; both written by tests/make_hf_tokenizer_fixture.py);
   - GPT-2's tokenizer.json (tests/fixtures/hf_gpt2_skeleton.json with the vocabulary and merges
     of the GPT-2 files filled in) against the gpt2 path's fixture and the gpt2 path itself;
   - malformed files: each refused naming the file and what is wrong, and 3000 random mutations
     of a valid file, none of which may crash (the ASan+UBSan build runs them too);
   - MB/s of both paths on tinyshakespeare.

     ./build/test_hf_tokenizer [BPE_DIR] [TINYSHAKESPEARE]   # from the repository root

   The GPT-2 part reads data/gpt2-bpe, else ../shared/data/gpt2-bpe, and is skipped (said so)
   without them. Exit 0 pass, 1 fail. */
#define MGT_TOK_HF
#define TEST_TOKENIZER_NO_MAIN
#include "test_tokenizer.c"  // defines: CHECK, test_fixture, test_speed, round_trips, read_file

#define LLAMA3ISH "tests/fixtures/hf_llama3ish.json"

static void test_llama3ish(void) {
    static const char bad[] = "\xff\xfe abc \xc3 \xe2\x82 \xed\xa0\x80 caf\xc3\xa9\xc3<|eot_id|\xff";
    mgt_tokenizer *tok = NULL;
    char err[512];
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0;
    const char *b;
    printf("hf: %s (Llama 3's pattern, trained by tokenizers)\n", LLAMA3ISH);
    CHECK(mgt_tok_open(&tok, "hf", LLAMA3ISH, err, sizeof err) == 0, "open: %s", err);
    if (!tok) return;
    CHECK(mgt_tok_vocab_size(tok) == 863, "vocab %d", mgt_tok_vocab_size(tok));
    CHECK(mgt_tok_eot(tok) == 0, "document start %d (the template's <|begin_of_text|>)",
          mgt_tok_eot(tok));
    CHECK(mgt_tok_decode(tok, 4, &b) == 10 && memcmp(b, "<|eot_id|>", 10) == 0, "decode 4");
    CHECK(mgt_tok_decode(tok, 863, &b) == -1, "decode out of range");
    test_fixture(tok, "hf", "tests/fixtures/hf_llama3ish_ids.txt", "", NULL);
    CHECK(mgt_tok_encode(tok, bad, sizeof bad - 1, &ids, &n, &cap) == 0, "encode invalid UTF-8");
    CHECK(round_trips(tok, ids, n, bad, sizeof bad - 1), "invalid UTF-8 round trip");
    free(ids);
    mgt_tok_close(tok);
}

/* GPT-2's tokenizer.json: the skeleton `tokenizers` wrote, with encoder.json as its vocabulary
   and vocab.bpe's lines as "a b" merges (the form of older files, such as the Hub's gpt2). */
static int write_gpt2_json(const char *bpe_dir, const char *out) {
    char path[600], *skel, *enc, *bpe, *cut_v, *cut_m;
    size_t ns, ne, nb, i;
    int first = 1;
    FILE *f;
    snprintf(path, sizeof path, "%s/encoder.json", bpe_dir);
    enc = read_file(path, &ne);
    snprintf(path, sizeof path, "%s/vocab.bpe", bpe_dir);
    bpe = read_file(path, &nb);
    skel = read_file("tests/fixtures/hf_gpt2_skeleton.json", &ns);
    cut_v = skel ? strstr(skel, "\"vocab\":{},\"merges\":[]") : NULL;
    f = fopen(out, "wb");
    if (!enc || !bpe || !cut_v || !f) {
        free(enc); free(bpe); free(skel);
        if (f) fclose(f);
        return -1;
    }
    cut_m = cut_v + strlen("\"vocab\":{},\"merges\":[");
    fwrite(skel, 1, (size_t)(cut_v - skel), f);
    fprintf(f, "\"vocab\":%s,\"merges\":[", enc);
    for (i = 0; i < nb;) {            /* after the #version line; JSON-escape " and \ */
        size_t e = i, k;
        while (e < nb && bpe[e] != '\n') e++;
        if (e > i && i > 0) {
            fputs(first ? "\"" : ",\"", f);
            first = 0;
            for (k = i; k < e; k++) {
                if (bpe[k] == '"' || bpe[k] == '\\') fputc('\\', f);
                fputc(bpe[k], f);
            }
            fputc('"', f);
        }
        i = e + 1;
    }
    fputs(cut_m, f);
    free(enc); free(bpe); free(skel);
    return fclose(f);
}

/* The hf path on GPT-2's tokenizer.json: the gpt2 fixture's ids, and the gpt2 path's ids on all
   of tinyshakespeare; then both paths' speed. */
static void test_gpt2_json(const char *bpe_dir, const char *shakespeare) {
    char json[] = "/tmp/mgt_hf_gpt2_XXXXXX", err[512];
    mgt_tokenizer *hf = NULL, *g2 = NULL;
    size_t len, n1 = 0, c1 = 0, n2 = 0, c2 = 0;
    uint32_t *a = NULL, *b = NULL;
    char *text;
    int fd = mkstemp(json);
    double t0;
    if (fd < 0) { CHECK(0, "mkstemp"); return; }
    close(fd);
    if (write_gpt2_json(bpe_dir, json)) {
        printf("SKIP: hf gpt2: %s/encoder.json or vocab.bpe not found\n", bpe_dir);
        unlink(json);
        return;
    }
    t0 = now_s();
    CHECK(mgt_tok_open(&hf, "hf", json, err, sizeof err) == 0, "open GPT-2's tokenizer.json: %s", err);
    printf("hf gpt2: GPT-2's tokenizer.json (%s) loaded in %.3f s\n", json, now_s() - t0);
    CHECK(mgt_tok_open(&g2, "gpt2", bpe_dir, err, sizeof err) == 0, "open gpt2: %s", err);
    unlink(json);
    if (!hf || !g2) { mgt_tok_close(hf); mgt_tok_close(g2); return; }
    test_gpt2_misc(hf);
    /* the fixture's "<|endoftext|>" is 7 plain tokens: it was made without the special token,
       which tokenizer.json adds (and Hugging Face then encodes as 50256, as here) */
    test_fixture(hf, "hf gpt2", "tests/fixtures/tokenizer_gpt2.txt", shakespeare, "<|endoftext|>");
    CHECK(mgt_tok_encode(hf, "a<|endoftext|>", 14, &a, &n1, &c1) == 0 && n1 == 2 && a[0] == 64 &&
          a[1] == 50256, "<|endoftext|> in the text is the special token");
    n1 = 0;
    text = read_file(shakespeare, &len);
    if (text) {
        CHECK(mgt_tok_encode(hf, text, len, &a, &n1, &c1) == 0 &&
              mgt_tok_encode(g2, text, len, &b, &n2, &c2) == 0, "encode %s", shakespeare);
        CHECK(n1 == n2 && memcmp(a, b, n1 * sizeof *a) == 0,
              "%s: hf gives %zu ids, gpt2 %zu, or other ids", shakespeare, n1, n2);
        printf("hf gpt2: %s: %zu ids, the same as the gpt2 path's\n", shakespeare, n1);
    }
    free(a); free(b); free(text);
    mgt_tok_close(hf); mgt_tok_close(g2);
}

/* MB/s of a freshly opened tokenizer (its word cache empty), then again (warm). */
static void speed(const char *kind, const char *path, const char *label, const char *text) {
    mgt_tokenizer *tok = NULL;
    char err[512];
    if (mgt_tok_open(&tok, kind, path, err, sizeof err) != 0) return;
    test_speed(tok, label, text);
    mgt_tok_close(tok);
}

/* One malformed tokenizer.json: refused, with the file and `want` in the message. */
static void refused(const char *dir, const char *json, const char *want) {
    char path[600], err[1024];
    mgt_tokenizer *tok = NULL;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    write_file(path, json);
    CHECK(mgt_tok_open(&tok, "hf", path, err, sizeof err) == -1 && tok == NULL &&
          strncmp(err, path, strlen(path)) == 0 && strstr(err, want),
          "%.60s...: message '%s', want the path and '%s'", json, err, want);
    printf("  %s\n", err + strlen(dir) + 1);
    mgt_tok_close(tok);
    unlink(path);
}

/* A small valid file: bytes as tokens (the 256 byte-level characters), "hi", one merge. */
static char *tiny_json(const char *pre, const char *merges, const char *extra) {
    static char buf[16384];
    size_t o;
    int b, k = 0;
    o = (size_t)snprintf(buf, sizeof buf, "{\"normalizer\":null,\"pre_tokenizer\":%s,"
                         "\"decoder\":{\"type\":\"ByteLevel\"},%s\"model\":{\"type\":\"BPE\","
                         "\"merges\":%s,\"vocab\":{", pre, extra, merges);
    for (b = 0; b < 256; b++) {
        int pr = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        unsigned cp = pr ? (unsigned)b : 256u + (unsigned)k++;
        if (b == '"' || b == '\\') o += (size_t)snprintf(buf + o, sizeof buf - o, "\"\\%c\":%d,", b, b);
        else o += (size_t)snprintf(buf + o, sizeof buf - o, "\"\\u%04x\":%d,", cp, b);
    }
    snprintf(buf + o, sizeof buf - o, "\"hi\":256}}}");
    return buf;
}

/* s with its first `from` replaced by `to` (a static buffer). */
static char *replaced(const char *s, const char *from, const char *to) {
    static char out[20000];
    const char *at = strstr(s, from);
    if (!at) { snprintf(out, sizeof out, "%s", s); return out; }
    snprintf(out, sizeof out, "%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
    return out;
}

static void test_malformed(void) {
    static const char bl[] = "{\"type\":\"ByteLevel\",\"use_regex\":true}";
    char dir[] = "/tmp/mgt_hf_XXXXXX", err[512], path[600];
    mgt_tokenizer *tok = NULL;
    printf("hf: malformed tokenizer.json files are refused, naming the file and what is wrong\n");
    if (!mkdtemp(dir)) { CHECK(0, "mkdtemp"); return; }
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    write_file(path, tiny_json(bl, "[\"h i\"]", ""));
    CHECK(mgt_tok_open(&tok, "hf", path, err, sizeof err) == 0, "the tiny file: %s", err);
    if (tok) {
        uint32_t *ids = NULL;
        size_t n = 0, cap = 0;
        CHECK(mgt_tok_encode(tok, "hi hi", 5, &ids, &n, &cap) == 0 && n == 3 && ids[0] == 256 &&
              ids[1] == ' ' && ids[2] == 256 && mgt_tok_eot(tok) == -1, "tiny encode");
        free(ids);
        mgt_tok_close(tok);
    }
    /* a literal Split ({"String": "i"}, Isolated) before ByteLevel: "hi" is cut into "h" "i" */
    write_file(path, tiny_json("{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
                               "{\"String\":\"i\"},\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\",\"use_regex\":false}]}",
                               "[[\"h\",\"i\"]]", ""));
    CHECK(mgt_tok_open(&tok, "hf", path, err, sizeof err) == 0, "literal split: %s", err);
    if (tok) {
        uint32_t *ids = NULL;
        size_t n = 0, cap = 0;
        CHECK(mgt_tok_encode(tok, "hi", 2, &ids, &n, &cap) == 0 && n == 2 && ids[0] == 'h' && ids[1] == 'i',
              "a literal split pattern: %zu ids", n);
        free(ids);
        mgt_tok_close(tok);
    }
    CHECK(mgt_tok_open(&tok, "hf", dir, err, sizeof err) == -1 && strstr(err, "is a folder"),
          "a folder: %s", err);
    CHECK(mgt_tok_open(&tok, "hf", "", err, sizeof err) == -1 && strstr(err, "needs the path"),
          "no path: %s", err);
    refused(dir, "{\"model\": {\"vocab\": {\"a\": 0}", "malformed JSON at line 1, column 28: '}' expected");
    refused(dir, "", "malformed JSON at line 1");
    refused(dir, "[1, 2]", "the top level is an array, not an object");
    refused(dir, "{\"a\": 1, \"a\": 2}", "malformed JSON");                   /* duplicate key */
    refused(dir, "{\"decoder\":{\"type\":\"ByteLevel\"},\"pre_tokenizer\":{\"type\":\"ByteLevel\"}}",
            "model is null: mgt reads byte-level BPE models");
    refused(dir, "{\"model\":{\"type\":\"WordPiece\"}}", "model is of type WordPiece");
    refused(dir, "{\"model\":{\"type\":\"BPE\"},\"normalizer\":{\"type\":\"NFC\"}}",
            "normalizer NFC is not supported");
    refused(dir, tiny_json(bl, "[\"h j\"]", ""), "model.merges[0] \"h\" + \"j\": a side or the merged token");
    refused(dir, tiny_json(bl, "[\"h i\", 7]", ""), "model.merges[1] is a number");
    refused(dir, tiny_json(bl, "[\"hi\"]", ""), "model.merges[0] is a string, not \"a b\"");
    refused(dir, tiny_json(bl, "[[\"h\",\"i\",\"x\"]]", ""), "model.merges[0] is an array");
    refused(dir, tiny_json(bl, "{}", ""), "model.merges is an object, not a list");
    refused(dir, tiny_json("{\"type\":\"Metaspace\"}", "[]", ""), "pre-tokenizer Metaspace is not supported");
    refused(dir, tiny_json("{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\"}", "[]", ""),
            "pre_tokenizer.pattern: the pattern does not compile with PCRE2 at offset 1");
    refused(dir, tiny_json("{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},\"behavior\":\"Removed\"}", "[]", ""),
            "behavior Removed: mgt reads Split with behavior Isolated");
    refused(dir, tiny_json("{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},\"behavior\":\"Isolated\"}", "[]", ""),
            "pre_tokenizer has no ByteLevel");
    refused(dir, tiny_json("{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"ByteLevel\"},{\"type\":\"Digits\"}]}", "[]", ""),
            "pre_tokenizer.pretokenizers[1]: a Digits pre-tokenizer after ByteLevel");
    refused(dir, tiny_json("{\"type\":\"ByteLevel\",\"add_prefix_space\":true}", "[]", ""),
            "add_prefix_space true");
    refused(dir, tiny_json(bl, "[]", "\"added_tokens\":[{\"id\":16777216,\"content\":\"x\"}],"),
            "added_tokens[0]: id is out of range: ids are integers 0 .. 16777215");
    refused(dir, tiny_json(bl, "[]", "\"added_tokens\":[{\"id\":\"3\",\"content\":\"x\"}],"),
            "added_tokens[0]: id is a string");
    refused(dir, tiny_json(bl, "[]", "\"added_tokens\":[{\"id\":300,\"content\":\"\"}],"),
            "added_tokens[0]: content is empty");
    refused(dir, tiny_json(bl, "[]", "\"added_tokens\":[{\"id\":300,\"content\":\"<m>\",\"lstrip\":true}],"),
            "added_tokens[0] \"<m>\": lstrip, rstrip or single_word is set");
    refused(dir, tiny_json(bl, "[]", "\"added_tokens\":[{\"id\":256,\"content\":\"ho\"}],"),
            "added_tokens[0]: \"ho\" has id 256, which model.vocab gives to another token");
    refused(dir, tiny_json(bl, "[]", "\"added_tokens\":{},"), "added_tokens is an object, not a list");
    {   /* a vocabulary that is not byte-level, an id twice, a byte missing, ids out of range */
        char *j = tiny_json(bl, "[]", ""), *hi = strstr(j, "\"hi\":256");
        hi[1] = ' ';
        refused(dir, j, "model.vocab: \" i\" (id 256) is not a byte-level string");
        hi[1] = 'h'; hi[6] = '5'; hi[7] = '5';
        refused(dir, j, "model.vocab: id 255 is given to");
        refused(dir, replaced(tiny_json(bl, "[]", ""), "\"\\u0041\":65", "\"\\u0068\":65"),
                "duplicate object key");                      /* byte A's token a second "h" */
        refused(dir, replaced(tiny_json(bl, "[]", ""), "\"\\u0041\":65", "\"AA\":65"),
                "no token for byte 65");
        j = tiny_json(bl, "[]", ""); hi = strstr(j, "\"hi\":256");
        memcpy(hi + 5, "-56", 3);
        refused(dir, j, "model.vocab: token \"hi\" has id -56: ids are integers 0 .. 16777215");
        refused(dir, replaced(tiny_json(bl, "[]", ""), "\"hi\":256", "\"hi\":2.5"),
                "model.vocab: token \"hi\" has an id that is a number: ids are integers");
    }
    refused(dir, "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"decoder\":null}",
            "decoder is null, not ByteLevel");
    refused(dir, "{\"model\":{\"type\":\"BPE\",\"byte_fallback\":true}}", "byte_fallback");
    rmdir(dir);
}

/* Random mutations of the Llama 3-ish file (bytes changed, inserted, cut; 3000 files): each is
   refused with a message naming the file, or loads and round-trips a text. Never a crash. */
static void test_mutations(void) {
    static const char text[] = "Hello, world! 123 <|eot_id|> caf\xc3\xa9 \xe4\xb8\xad\n\n  x";
    static const char magic[] = "{}[]\",:\\0123456789.-etrufalsn \x01\xc3\xa9";
    char path[] = "/tmp/mgt_hf_mut_XXXXXX", err[1024];
    size_t n, i;
    char *orig = read_file(LLAMA3ISH, &n), *buf;
    uint64_t state = 20240520;
    int fd = mkstemp(path), loaded = 0, round;
    if (!orig || fd < 0) { CHECK(0, "read %s / mkstemp", LLAMA3ISH); free(orig); return; }
    close(fd);
    buf = (char *)malloc(n + 64);
    for (round = 0; round < 3000; round++) {
        size_t len = n, k, edits;
        FILE *f;
        mgt_tokenizer *tok = NULL;
        memcpy(buf, orig, n);
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        edits = 1 + (state >> 60) % 4;
        for (k = 0; k < edits; k++) {
            size_t at;
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            at = (size_t)(state >> 33) % len;
            switch ((state >> 20) % 4) {
            case 0: buf[at] = magic[(state >> 8) % (sizeof magic - 1)]; break;
            case 1: if (len < n + 60) { memmove(buf + at + 1, buf + at, len - at); buf[at] = magic[(state >> 8) % (sizeof magic - 1)]; len++; } break;
            case 2: memmove(buf + at, buf + at + 1, len - at - 1); len--; break;
            default: if ((state >> 8) % 8 == 0) len = at + 1; else buf[at] ^= (char)(1 << ((state >> 8) % 8));
            }
        }
        f = fopen(path, "wb");
        fwrite(buf, 1, len, f);
        fclose(f);
        if (mgt_tok_open(&tok, "hf", path, err, sizeof err) == 0) {
            uint32_t *ids = NULL;
            size_t m = 0, cap = 0;
            loaded++;
            CHECK(mgt_tok_encode(tok, text, sizeof text - 1, &ids, &m, &cap) == 0, "encode (round %d)", round);
            for (i = 0; i < m; i++) CHECK(ids[i] < (uint32_t)mgt_tok_vocab_size(tok), "id %u out of range", (unsigned)ids[i]);
            free(ids);
            mgt_tok_close(tok);
        } else {
            CHECK(strncmp(err, path, strlen(path)) == 0 && strlen(err) > strlen(path) + 4,
                  "round %d: message '%s' does not name the file", round, err);
        }
    }
    printf("hf: 3000 mutated files: %d loaded and encoded, %d refused with a message\n", loaded,
           3000 - loaded);
    unlink(path);
    free(buf); free(orig);
}

/* The Llama 3-style fixture with every id moved up by 100000, past 16 bits as Llama 3's 128,256
   ids are (the ids below are unused): the same texts give the same ids plus 100000. */
static void test_big_ids(const char *shakespeare) {
    enum { SHIFT = 100000 };
    static const char *texts[] = {"<|begin_of_text|>Hello, world! It's 12345 caf\xc3\xa9.\n\n",
                                  "a<|eot_id|><|eot_id|>b \xe4\xb8\xad\xf0\x9f\x98\x80 'LL x\xe1\xa0\x8e y"};
    char path[] = "/tmp/mgt_hf_big_XXXXXX", err[512];
    json_error_t jerr;
    json_t *root = json_load_file(LLAMA3ISH, 0, &jerr), *v, *ids;
    const char *key;
    size_t k, len = 0;
    mgt_tokenizer *small = NULL, *big = NULL;
    char *text = read_file(shakespeare, &len);
    int fd = mkstemp(path), ok = 1;
    printf("hf: ids past 16 bits (the fixture's ids + %d)\n", SHIFT);
    if (!root || fd < 0) { CHECK(0, "load %s: %s", LLAMA3ISH, jerr.text); free(text); return; }
    close(fd);
    json_object_foreach(json_object_get(json_object_get(root, "model"), "vocab"), key, v)
        json_integer_set(v, json_integer_value(v) + SHIFT);
    json_array_foreach(json_object_get(root, "added_tokens"), k, v)
        json_integer_set(json_object_get(v, "id"), json_integer_value(json_object_get(v, "id")) + SHIFT);
    ids = json_object_get(json_object_get(json_object_get(json_array_get(json_object_get(json_object_get(
        root, "post_processor"), "processors"), 1), "special_tokens"), "<|begin_of_text|>"), "ids");
    json_integer_set(json_array_get(ids, 0), json_integer_value(json_array_get(ids, 0)) + SHIFT);
    CHECK(json_dump_file(root, path, 0) == 0, "write %s", path);
    json_decref(root);
    CHECK(mgt_tok_open(&small, "hf", LLAMA3ISH, err, sizeof err) == 0, "%s", err);
    CHECK(mgt_tok_open(&big, "hf", path, err, sizeof err) == 0, "%s", err);
    unlink(path);
    if (small && big) {
        CHECK(mgt_tok_vocab_size(big) == 863 + SHIFT && mgt_tok_eot(big) == SHIFT, "vocab %d, start %d",
              mgt_tok_vocab_size(big), mgt_tok_eot(big));
        for (k = 0; k < 3; k++) {
            const char *t = k < 2 ? texts[k] : text;
            size_t tl = k < 2 ? strlen(texts[k]) : (len < 200000 ? len : 200000), na = 0, nb = 0, ca = 0, cb = 0, i;
            uint32_t *a = NULL, *b = NULL;
            if (!t) continue;
            CHECK(mgt_tok_encode(small, t, tl, &a, &na, &ca) == 0 && mgt_tok_encode(big, t, tl, &b, &nb, &cb) == 0, "encode");
            ok &= na == nb;
            for (i = 0; ok && i < na; i++) ok &= b[i] == a[i] + SHIFT;
            CHECK(ok, "text %zu: the shifted file gives other ids", k);
            CHECK(round_trips(big, b, nb, t, tl), "text %zu: round trip", k);
            free(a); free(b);
        }
    }
    mgt_tok_close(small); mgt_tok_close(big); free(text);
}

int main(int argc, char **argv) {
    const char *bpe_dir = argc > 1 ? argv[1] : access("data/gpt2-bpe/encoder.json", R_OK) == 0 ? "data/gpt2-bpe" : "../shared/data/gpt2-bpe";
    const char *shakespeare = argc > 2 ? argv[2] : "../shared/data/tinyshakespeare/input.txt";
    char json[] = "/tmp/mgt_hf_speed_XXXXXX";
    int fd = mkstemp(json);
    if (fd >= 0) close(fd);
    test_byte();
    test_errors();
    test_llama3ish();
    test_malformed();
    test_mutations();
    test_big_ids(shakespeare);
    test_gpt2_json(bpe_dir, shakespeare);
    speed("gpt2", bpe_dir, "gpt2", shakespeare);
    if (write_gpt2_json(bpe_dir, json) == 0) speed("hf", json, "hf gpt2", shakespeare);
    unlink(json);
    speed("hf", LLAMA3ISH, "hf llama3ish", shakespeare);
    if (failures) { printf("%d FAILED\n", failures); return 1; }
    printf("all hf tokenizer tests passed\n");
    return 0;
}
