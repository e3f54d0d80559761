/* libFuzzer target: what [model] init reads (a Hugging Face folder, llm.c's .bin).
   Input: config.json, NUL, model.safetensors.index.json (empty: none), NUL, then a weights file:
   model.safetensors, or llm.c's .bin when it starts with llm.c's magic. The parts are written to the
   target's temporary folder and read by path as a run reads them: the folder (mgt__src_open for
   the model, mgt_config_resolve_init into a config, and for a valid model of at most a million
   parameters every global tensor through mgt__src_global), and the .bin the same way. The target
   checks that a refusal leaves a message naming what was read, and that a resolved model
   validates or is refused with a message.
   Build: `ninja build/fuzz/init`; run: see README (Tests, fuzzing). */
#define MGT_IMPLEMENTATION
#include "mgt.h"
#include "tests/fuzz/fuzz_util.h"

static void fail(const char *what) { fprintf(stderr, "init: %s\n", what); abort(); }

/* reads init = path as a run would, up to its weights */
static void read_init(const char *path) {
    mgt_config cfg;
    mgt__src *s;
    char set[700];
    mgt_config_init(&cfg);
    snprintf(set, sizeof set, "model.init=%s", path);
    if (mgt_config_set(&cfg, set) != MGT_OK) fail("the init path is refused as a value");
    mgt_config_set(&cfg, "data.tokenizer=hf");
    mgt_config_set(&cfg, "data.tokenizer_json=unused.json");
    if (mgt_config_resolve_init(&cfg) != MGT_OK) {
        if (!mgt_last_error()[0]) fail("a refused init file leaves no message");
        return;
    }
    if (mgt_config_validate(&cfg) != MGT_OK) {
        if (!mgt_last_error()[0]) fail("an invalid resolved model leaves no message");
        return;
    }
    if (mgt__global_params(&cfg) > 1000000) return; /* a valid model too large to read here */
    if (mgt__src_open(&s, path, 1) == MGT_OK) {
        mgt__layout g;
        float **w;
        if (mgt__src_global(s, &cfg, "", &g, &w) == MGT_OK) {
            mgt__free_global(&g, w);
            mgt__layout_free(&g);
        } else if (!mgt_last_error()[0]) fail("refused weights leave no message");
        mgt__src_free(s);
    } else if (!mgt_last_error()[0]) fail("a refused weights file leaves no message");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *store = (char *)malloc(size + 4), *parts[3], path[600];
    size_t last = 0;
    int n = fuzz_split(data, size, store, parts, 3, &last), llmc;
    const char *dir = fuzz_tmpdir("init");
    int32_t magic = 0;
    if (n < 3) { free(store); return 0; }
    if (last >= 4) memcpy(&magic, parts[2], 4);
    llmc = magic == MGT__LLMC_MAGIC;
    fuzz_write("config.json", parts[0], strlen(parts[0]), path, sizeof path);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    unlink(path);
    if (parts[1][0]) fuzz_write("model.safetensors.index.json", parts[1], strlen(parts[1]), path, sizeof path);
    fuzz_write(llmc ? "model.bin" : "model.safetensors", parts[2], last, path, sizeof path);
    read_init(llmc ? path : dir);
    unlink(path);
    free(store);
    return 0;
}
