/* Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/), made by the current
   code so they are what mgt really reads and writes:
     config      the repository's presets (good and bad), some with --set assignments after NULs
     shard       token shards (data/prepare.h's writer): byte ids, GPT-2 ids, 32-bit Llama 3 ids,
                 empty, truncated, a wrong magic, a wrong version
     checkpoint  checkpoints of a tiny model (n_layer 1, d_model 8, n_head 1, seq_len 4, vocab 256:
                 the smallest the presets allow with the byte tokenizer) saved by mgt_run_save:
                 fresh, after two steps in fp32, and after one step in fp16 (loss-scale metadata)
     tokenizer   a small byte-level BPE vocabulary (the 256 bytes, some merges, <|endoftext|>) as
                 encoder.json NUL vocab.bpe NUL text, its merges alone (vocab.bpe NUL text),
                 and plain texts
     hf_tokenizer  tokenizer.json NUL text: tests/fixtures/hf_llama3ish.json, and the tokenizer
                 seeds' vocabulary as a GPT-2-style tokenizer.json with ["a", "b"] merges
     init        config.json NUL index NUL weights: tests/fixtures/hf_gpt2 and hf_llama, a shard of
                 hf_llama_sharded with its index, and llm.c's bf16 .bin
   Run from the repository root:  ninja build/fuzz/make_seeds && build/fuzz/make_seeds
   The files are deterministic; commit what changes. */
#define MGT_IMPLEMENTATION
#include "mgt.h"
#define MGT_TOKENIZER_IMPLEMENTATION
#define MGT_PREPARE_IMPLEMENTATION
#include "data/prepare.h" /* defines: mgt_shard_write */
#include <sys/stat.h> /* defines: mkdir */

static char root[1024]; /* the repository root, absolute */

static void die(const char *what, const char *detail) {
    fprintf(stderr, "make_seeds: %s: %s\n", what, detail);
    exit(1);
}

static void put(const char *target, const char *name, const void *data, size_t n) {
    char path[1400];
    FILE *f;
    snprintf(path, sizeof path, "%s/tests/fuzz/corpus/%s", root, target);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/tests/fuzz/corpus/%s/%s", root, target, name);
    f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f)) die(path, strerror(errno));
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    char *buf;
    long len;
    if (!f || fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) die(path, "cannot read");
    buf = (char *)malloc((size_t)len + 1);
    if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) die(path, "cannot read");
    fclose(f);
    *n = (size_t)len;
    return buf;
}

/* ---- config: a preset file, then assignments after NULs ---------------------------------------- */

static void config_seed(const char *name, const char *preset, const char *const *sets, int nsets) {
    char path[1200], out[8192];
    size_t n = 0, len;
    char *text;
    int i;
    if (preset) {
        snprintf(path, sizeof path, "%s/%s", root, preset);
        text = slurp(path, &len);
        if (len > 4096) die(path, "preset too long for a seed");
        memcpy(out, text, len);
        n = len;
        free(text);
    }
    for (i = 0; i < nsets; i++) {
        len = strlen(sets[i]);
        out[n++] = 0;
        memcpy(out + n, sets[i], len);
        n += len;
    }
    put("config", name, out, n);
}

static void config_seeds(void) {
    static const char *presets[] = {"presets/quickstart.ini", "presets/gpt2_124m_1gpu.ini", "presets/gpt2_1558m_tp2_pp2_dp2.ini",
                                    "presets/gpt2_1558m_dp8_zero3.ini", "presets/bench_small.ini", "tests/presets/tiny.ini",
                                    "tests/presets/tui.ini", "tests/presets/bad/batch_dp.ini", "tests/presets/bad/heads.ini",
                                    "tests/presets/bad/not_ini.ini", "tests/presets/bad/unknown_section.ini",
                                    "tests/presets/bad/vocab_gpt2.ini", "tests/presets/bad/out_of_range.ini"};
    static const char *sets_tiny[] = {"train.steps=5", "data.val=", "precision.dtype=fp16", "precision.loss_scale=1024"};
    static const char *sets_layout[] = {"parallel.dp=2", "parallel.tp=2", "parallel.pp=2", "parallel.zero=3"};
    static const char *sets_strings[] = {"data.train=/data/fineweb/train_000001.bin", "checkpoint.dir=runs/x y", "log.metrics=none",
                                         "train.schedule=linear"};
    static const char *sets_floats[] = {"train.lr=6e-4", "train.min_lr=6e-5", "parallel.bucket_mb=0.5", "train.beta2=0.999"};
    char name[64];
    size_t i;
    for (i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        const char *base = strrchr(presets[i], '/') + 1;
        snprintf(name, sizeof name, "%s%s", strstr(presets[i], "/bad/") ? "bad_" : "", base);
        config_seed(name, presets[i], NULL, 0);
    }
    config_seed("tiny_set.ini", "tests/presets/tiny.ini", sets_tiny, 4);
    config_seed("quickstart_layout.ini", "presets/quickstart.ini", sets_layout, 4);
    config_seed("empty_strings.ini", NULL, sets_strings, 4);
    config_seed("empty_floats.ini", NULL, sets_floats, 4);
}

/* libFuzzer dictionary of the preset reader, from the key table: "[section]", "key = ",
   "section.key=", each choice; written to tests/fuzz/config.dict */
static void dict_entry(FILE *f, const char *text) {
    fputc('"', f);
    for (; *text; text++) {
        unsigned char c = (unsigned char)*text;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f) fprintf(f, "\\x%02x", c);
        else fputc(c, f);
    }
    fputs("\"\n", f);
}
static void config_dict(void) {
    char path[1200], text[200];
    const mgt_key_info *keys;
    int n, i;
    FILE *f;
    static const char *extra[] = {"\n", " ; ", "=", ".", "\n[", "]\n", "1e30", "-1", "0x10", "2147483648", "65536", "4096", "1000000", "nan", "inf",
                                  "\xef\xbb\xbf"};
    snprintf(path, sizeof path, "%s/tests/fuzz/config.dict", root);
    f = fopen(path, "w");
    if (!f) die(path, strerror(errno));
    fprintf(f, "# libFuzzer dictionary of build/fuzz/config, written by tests/fuzz/make_seeds.c from the key table\n");
    keys = mgt_config_keys(&n);
    for (i = 0; i < n; i++) {
        const char *c = keys[i].choices;
        if (i == 0 || strcmp(keys[i].section, keys[i - 1].section)) {
            snprintf(text, sizeof text, "[%s]", keys[i].section);
            dict_entry(f, text);
        }
        snprintf(text, sizeof text, "%s = ", keys[i].name);
        dict_entry(f, text);
        snprintf(text, sizeof text, "%s.%s=", keys[i].section, keys[i].name);
        dict_entry(f, text);
        while (*c) {
            size_t len = strcspn(c, "|");
            snprintf(text, sizeof text, "%.*s", (int)len, c);
            dict_entry(f, text);
            c += len + (c[len] == '|');
        }
    }
    for (i = 0; i < (int)(sizeof extra / sizeof extra[0]); i++) dict_entry(f, extra[i]);
    if (fclose(f)) die(path, strerror(errno));
}

/* ---- shards ------------------------------------------------------------------------------------ */

/* a shard of n `width`-byte tokens written as mgt prepare writes it; then, to make a bad one,
   header word `word` (>= 0) set to `value`, and the file cut to `cut` bytes (>= 0) */
static void shard_seed(const char *name, const uint32_t *tokens, int n, int width, int word, uint32_t value, long cut) {
    char path[1200], err[1400];
    FILE *f;
    put("shard", name, "", 0); /* the folder */
    snprintf(path, sizeof path, "%s/tests/fuzz/corpus/shard/%s", root, name);
    if (mgt_shard_write(path, tokens, (size_t)n, width, err, sizeof err)) die("mgt_shard_write", err);
    if (word >= 0) {
        unsigned char b[4] = {(unsigned char)value, (unsigned char)(value >> 8), (unsigned char)(value >> 16), (unsigned char)(value >> 24)};
        if (!(f = fopen(path, "r+b")) || fseek(f, 4L * word, SEEK_SET) || fwrite(b, 1, 4, f) != 4 || fclose(f)) die(path, strerror(errno));
    }
    if (cut >= 0 && truncate(path, cut)) die(path, strerror(errno));
}

static void shard_seeds(void) {
    uint32_t text[24], gpt2[12] = {15496, 995, 11, 50256, 464, 3797, 3332, 319, 262, 2603, 13, 198},
                       llama3[8] = {128000, 791, 8415, 7731, 389, 264, 5634, 128009};
    const char *s = "the cat sat on a mat.\nab";
    int i;
    for (i = 0; i < 24; i++) text[i] = (uint32_t)(unsigned char)s[i];
    shard_seed("byte_24.bin", text, 24, 2, -1, 0, -1);
    shard_seed("byte_5.bin", text, 5, 2, -1, 0, -1);   /* exactly seq_len + 1 of the targets */
    shard_seed("gpt2_12.bin", gpt2, 12, 2, -1, 0, -1);
    shard_seed("empty.bin", text, 0, 2, -1, 0, -1);
    shard_seed("truncated.bin", text, 24, 2, 2, 30, -1);             /* promises 30 tokens, holds 24 */
    shard_seed("magic.bin", text, 24, 2, 0, MGT_SHARD_MAGIC32, -1);  /* the 32-bit magic, the 16-bit version */
    shard_seed("byte32_24.bin", text, 24, 4, -1, 0, -1);
    shard_seed("llama3_8.bin", llama3, 8, 4, -1, 0, -1);
    shard_seed("truncated32.bin", text, 24, 4, -1, 0, 1024 + 4 * 24 - 2);
    shard_seed("version32.bin", text, 24, 4, 1, MGT_SHARD_VERSION, -1); /* the 16-bit version, the 32-bit magic */
}

/* ---- checkpoints of the tiny model ------------------------------------------------------------ */

static void checkpoint_seed(const char *name, const char *dtype, int steps) {
    mgt_config cfg;
    mgt_run *run;
    char set[64], path[1200], *data;
    uint32_t rows[5 * 2];
    size_t n;
    int i;
    mgt_config_init(&cfg);
    mgt_config_set(&cfg, "model.n_layer=1");
    mgt_config_set(&cfg, "model.n_head=1");
    mgt_config_set(&cfg, "model.d_model=8");
    mgt_config_set(&cfg, "model.seq_len=4");
    mgt_config_set(&cfg, "train.global_batch=2");
    mgt_config_set(&cfg, "train.micro_batch=1");
    mgt_config_set(&cfg, "train.steps=10");
    mgt_config_set(&cfg, "train.warmup=1");
    mgt_config_set(&cfg, "parallel.threads=1");
    mgt_config_set(&cfg, "parallel.device=cpu");
    mgt_config_set(&cfg, "data.train=");
    mgt_config_set(&cfg, "data.val=");
    mgt_config_set(&cfg, "log.metrics=none");
    mgt_config_set(&cfg, "checkpoint.dir=ck"); /* relative: the stored preset names no temporary folder */
    snprintf(set, sizeof set, "precision.dtype=%s", dtype);
    mgt_config_set(&cfg, set);
    if (mgt_run_create(&run, &cfg) != MGT_OK) die("mgt_run_create", mgt_last_error());
    for (i = 0; i < steps; i++) {
        int k;
        for (k = 0; k < 10; k++) rows[k] = (uint32_t)("the cat sat"[(i + k) % 11]);
        if (mgt_run_step_tokens(run, rows) != MGT_OK) die("mgt_run_step_tokens", mgt_last_error());
    }
    if (mgt_run_save(run, path, sizeof path) != MGT_OK) die("mgt_run_save", mgt_last_error());
    mgt_run_destroy(run);
    data = slurp(path, &n);
    put("checkpoint", name, data, n);
    free(data);
    remove(path);
}

static void checkpoint_seeds(void) {
    char tmp[] = "/tmp/mgt_make_seeds_XXXXXX";
    if (!mkdtemp(tmp) || chdir(tmp)) die("mkdtemp", strerror(errno));
    checkpoint_seed("fp32_step0.safetensors", "fp32", 0);
    checkpoint_seed("fp32_step2.safetensors", "fp32", 2);
    checkpoint_seed("fp16_step1.safetensors", "fp16", 1);
    remove("ck/mgt.lock"); /* the run's hold on its folder (mgt_run_claim) */
    rmdir("ck");
    if (chdir(root) || rmdir(tmp)) die(tmp, strerror(errno));
}

/* ---- tokenizer -------------------------------------------------------------------------------- */

/* GPT-2's byte-level text of byte b: b itself when printable, else U+0100 + k for the k-th other */
static int byte_char(int b) {
    int c, k = 0;
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) return b;
    for (c = 0; c < b; c++) if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))) k++;
    return 256 + k;
}
static size_t utf8(int cp, char *out) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 63));
    return 2;
}
/* a word's byte-level text */
static size_t word_chars(const char *w, char *out) {
    size_t n = 0;
    for (; *w; w++) n += utf8(byte_char((unsigned char)*w), out + n);
    return n;
}

/* hf_tokenizer: tokenizer.json NUL text. The Llama 3-style fixture, and encoder (the tokenizer
   seeds' encoder.json) as a GPT-2-style tokenizer.json with its merges as ["a", "b"] pairs */
static void hf_tokenizer_seeds(const char *encoder, const char *const *texts, int ntexts, const char *(*merges)[2], int nmerges) {
    static char seed[65536];
    size_t n, k, len, fixture_len;
    char *fixture = slurp("tests/fixtures/hf_llama3ish.json", &fixture_len);
    char chars[64], name[32];
    int i;
    for (i = 0; i < 2; i++) {
        len = strlen(texts[i]);
        if (fixture_len + 1 + len > sizeof seed) die("hf_llama3ish.json", "too large for a seed");
        memcpy(seed, fixture, fixture_len);
        seed[fixture_len] = 0;
        memcpy(seed + fixture_len + 1, texts[i], len);
        snprintf(name, sizeof name, "llama3ish_%d", i);
        put("hf_tokenizer", name, seed, fixture_len + 1 + len);
    }
    free(fixture);
    n = (size_t)snprintf(seed, sizeof seed, "{\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                         "\"use_regex\":true},\"decoder\":{\"type\":\"ByteLevel\"},\"added_tokens\":[{\"id\":%d,\"content\":"
                         "\"<|endoftext|>\",\"special\":true}],\"model\":{\"type\":\"BPE\",\"merges\":[", 256 + nmerges);
    for (i = 0; i < nmerges; i++) {
        seed[n++] = i ? ',' : '[';
        if (i) seed[n++] = '[';
        k = word_chars(merges[i][0], chars);
        n += (size_t)snprintf(seed + n, sizeof seed - n, "\"%.*s\",", (int)k, chars);
        k = word_chars(merges[i][1], chars);
        n += (size_t)snprintf(seed + n, sizeof seed - n, "\"%.*s\"]", (int)k, chars);
    }
    n += (size_t)snprintf(seed + n, sizeof seed - n, "],\"vocab\":%s}}", encoder);
    while (seed[n - 1] == '\n' || seed[n - 1] == '}') n--;         /* encoder.json's own "}\n" ... */
    n += (size_t)snprintf(seed + n, sizeof seed - n, "}}}");        /* ... closed with model's and the file's */
    for (i = 0; i < ntexts; i++) {
        len = strlen(texts[i]);
        memcpy(seed + n + 1, texts[i], len);
        seed[n] = 0;
        snprintf(name, sizeof name, "gpt2ish_%d", i);
        put("hf_tokenizer", name, seed, n + 1 + len);
    }
}

static void tokenizer_seeds(void) {
    /* merges in rank order; every merged token is created before it is used */
    static const char *merges[][2] = {{"t", "h"}, {"th", "e"}, {" ", "the"}, {"a", "t"}, {" ", "c"}, {" c", "at"},
                                      {" ", "s"}, {" s", "at"}, {"o", "n"}, {" ", "on"}, {"e", "r"}, {"'", "s"}, {"1", "2"}};
    static const char *texts[] = {"the cat sat on the mat", "Hello world! It's 12 o'clock.\n\n  spaces   and\ttabs",
                                  "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 \xff\xfe broken \xe2\x82",
                                  "they're we've I'll he'd you'm 'S"};
    static char buf[32768];
    char chars[64];
    size_t n = 0, k, bpe;
    int id = 0, i;
    n += (size_t)snprintf(buf + n, sizeof buf - n, "{");
    for (i = 0; i < 256; i++) { /* the bytes: the odd ones as \u escapes, as GPT-2's file has them */
        int cp = byte_char(i);
        if (cp >= 256 || i == '"' || i == '\\') n += (size_t)snprintf(buf + n, sizeof buf - n, "%s\"\\u%04x\": %d", i ? ", " : "", cp, id++);
        else {
            k = utf8(cp, chars);
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s\"%.*s\": %d", i ? ", " : "", (int)k, chars, id++);
        }
    }
    for (i = 0; i < (int)(sizeof merges / sizeof merges[0]); i++) {
        char both[32];
        snprintf(both, sizeof both, "%s%s", merges[i][0], merges[i][1]);
        k = word_chars(both, chars);
        n += (size_t)snprintf(buf + n, sizeof buf - n, ", \"%.*s\": %d", (int)k, chars, id++);
    }
    n += (size_t)snprintf(buf + n, sizeof buf - n, ", \"<|endoftext|>\": %d}\n", id++);
    buf[n++] = 0;
    bpe = n;
    n += (size_t)snprintf(buf + n, sizeof buf - n, "#version: 0.2\n");
    for (i = 0; i < (int)(sizeof merges / sizeof merges[0]); i++) {
        k = word_chars(merges[i][0], chars);
        memcpy(buf + n, chars, k);
        n += k;
        buf[n++] = ' ';
        k = word_chars(merges[i][1], chars);
        memcpy(buf + n, chars, k);
        n += k;
        buf[n++] = '\n';
    }
    buf[n++] = 0;
    for (i = 0; i < (int)(sizeof texts / sizeof texts[0]); i++) {
        char name[32], text_name[32];
        size_t len = strlen(texts[i]);
        static char seed[32768 + 128];
        memcpy(seed, buf, n);
        memcpy(seed + n, texts[i], len);
        snprintf(name, sizeof name, "vocab_%d", i);
        put("tokenizer", name, seed, n + len);
        if (i < 2) { /* vocab.bpe NUL text: the target writes encoder.json */
            snprintf(name, sizeof name, "merges_%d", i);
            put("tokenizer", name, seed + bpe, n - bpe + len);
        }
        snprintf(text_name, sizeof text_name, "text_%d", i);
        put("tokenizer", text_name, texts[i], len);
    }
    hf_tokenizer_seeds(buf, texts, (int)(sizeof texts / sizeof texts[0]), merges, (int)(sizeof merges / sizeof merges[0]));
}

/* ---- init: config.json NUL index NUL weights ------------------------------------------------------ */

/* config.json, an index (or none) and a weights file, joined by NULs */
static void init_seed(const char *name, const char *config, const char *index, const char *weights) {
    size_t nc, ni = 0, nw, at;
    char *c = slurp(config, &nc), *i = index ? slurp(index, &ni) : NULL, *w = slurp(weights, &nw), *buf = (char *)malloc(nc + ni + nw + 2);
    memcpy(buf, c, nc);
    buf[nc] = 0;
    if (ni) memcpy(buf + nc + 1, i, ni);
    at = nc + 1 + ni;
    buf[at] = 0;
    memcpy(buf + at + 1, w, nw);
    put("init", name, buf, at + 1 + nw);
    free(c);
    free(i);
    free(w);
    free(buf);
}

static void init_seeds(void) {
    init_seed("hf_gpt2", "tests/fixtures/hf_gpt2/config.json", NULL, "tests/fixtures/hf_gpt2/model.safetensors");
    init_seed("hf_llama", "tests/fixtures/hf_llama/config.json", NULL, "tests/fixtures/hf_llama/model.safetensors");
    init_seed("hf_llama_shard", "tests/fixtures/hf_llama_sharded/config.json", "tests/fixtures/hf_llama_sharded/model.safetensors.index.json",
              "tests/fixtures/hf_llama_sharded/model-00004-of-00004.safetensors");
    init_seed("llmc_bf16", "tests/fixtures/hf_gpt2/config.json", NULL, "tests/fixtures/llmc_gpt2_bf16.bin");
}

int main(void) {
    char dir[1100];
    if (!getcwd(root, sizeof root)) die("getcwd", strerror(errno));
    snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus", root);
    if (mkdir(dir, 0777) && errno != EEXIST) die(dir, strerror(errno));
    config_seeds();
    config_dict();
    shard_seeds();
    tokenizer_seeds();
    checkpoint_seeds();
    init_seeds();
    return 0;
}
