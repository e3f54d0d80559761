/* mgt.h built with MGT_NO_HF (issue 24): its Hugging Face part (src/weights_hf.c) left out. [model]
   init of a Hugging Face folder and mgt_export are refused with a message naming the switch; init
   from an mgt checkpoint and from llm.c's .bin still load their weights (tiny models: seconds). */
#define MGT_NO_HF
#define MGT_IMPLEMENTATION
#include "mgt.h"

#define FIX "tests/fixtures/"

static int failures;

static void check(const char *what, int ok) {
    printf("%-4s %s\n", ok ? "ok" : "FAIL", what);
    failures += !ok;
}

/* a one-rank run of the defaults, n more keys and [model] init = init (none: ""); NULL when refused */
static mgt_run *run_of(const char *init, const char *const *model, int n) {
    static const char *const fixed[] = {"data.train=", "data.val=", "log.metrics=", "train.global_batch=1", "train.micro_batch=1",
                                        "parallel.threads=1", "checkpoint.dir=build/testdata/no_hf"};
    char set[1400];
    mgt_config c;
    mgt_run *run;
    int i;
    mgt_config_init(&c);
    for (i = 0; i < (int)(sizeof fixed / sizeof fixed[0]); i++) mgt_config_set(&c, fixed[i]);
    for (i = 0; i < n; i++) mgt_config_set(&c, model[i]);
    snprintf(set, sizeof set, "model.init=%s", init);
    mgt_config_set(&c, set);
    return mgt_run_create(&run, &c) == MGT_OK ? run : NULL;
}

/* rank 0's tensor `name` of a one-rank run; NULL when it has none */
static const float *tensor(mgt_run *r, const char *name, size_t *numel) {
    int t;
    for (t = 0; t < r->ranks[0].lay.n; t++)
        if (!strcmp(r->ranks[0].lay.t[t].info.name, name)) {
            *numel = r->ranks[0].lay.t[t].info.numel;
            return mgt__P(&r->ranks[0], t);
        }
    return NULL;
}

int main(void) {
    static const char *const tiny[] = {"model.n_layer=1", "model.d_model=32", "model.n_head=2", "model.seq_len=8"};
    static const char *const tokens128[] = {"data.tokenizer=hf", "data.tokenizer_json=" FIX "hf_llama3ish.json"}; /* the .bin's 128 tokens: not bytes */
    char ck[1400], note[256];
    mgt_run *a, *b;
    mgt_result res;

    a = run_of(FIX "hf_gpt2", tokens128, 2); /* without the switch, this run is created */
    check("[model] init of a Hugging Face folder is refused naming MGT_NO_HF", !a && strstr(mgt_last_error(), "MGT_NO_HF") && strstr(mgt_last_error(), "hf_gpt2"));
    if (!a) printf("     %s\n", mgt_last_error());
    else mgt_run_destroy(a);

    /* a tiny run saved, then a run initialised from its checkpoint: the same weights */
    a = run_of("", tiny, 4);
    if (!a || mgt_run_claim(a, 1) != MGT_OK || mgt_run_save(a, ck, sizeof ck) != MGT_OK) {
        printf("FAIL a tiny run and its checkpoint: %s\n", mgt_last_error());
        return 1;
    }
    b = run_of(ck, NULL, 0);
    if (!b) printf("     %s\n", mgt_last_error());
    else {
        int t, same = a->ranks[0].lay.n == b->ranks[0].lay.n;
        for (t = 0; same && t < a->ranks[0].lay.n; t++)
            same = !memcmp(mgt__P(&a->ranks[0], t), mgt__P(&b->ranks[0], t), sizeof(float) * a->ranks[0].lay.t[t].info.numel);
        check("[model] init of an mgt checkpoint: the checkpoint's weights", same);
        mgt_run_destroy(b);
    }
    check("[model] init of an mgt checkpoint: the run is created", b != NULL);
    mgt_run_destroy(a);

    /* llm.c's .bin: 256 int32 of header, then wte (its vocabulary padded to Vp rows of C) in fp32 */
    a = run_of(FIX "llmc_gpt2.bin", tokens128, 2);
    check("[model] init of llm.c's .bin: the run is created", a != NULL);
    if (!a) printf("     %s\n", mgt_last_error());
    else {
        FILE *f = fopen(FIX "llmc_gpt2.bin", "rb");
        size_t numel = 0;
        const float *wte = tensor(a, "wte", &numel);
        float *want = (float *)malloc(sizeof(float) * (numel ? numel : 1));
        int ok = f && wte && want && !fseek(f, 1024, SEEK_SET) && fread(want, sizeof(float), numel, f) == numel;
        check("[model] init of llm.c's .bin: wte is the file's", ok && !memcmp(wte, want, sizeof(float) * numel));
        if (f) fclose(f);
        free(want);
        mgt_run_destroy(a);
    }

    res = mgt_export(ck, "build/testdata/no_hf_export", note, sizeof note);
    check("mgt_export is refused naming MGT_NO_HF", res != MGT_OK && strstr(mgt_last_error(), "MGT_NO_HF"));
    if (res != MGT_OK) printf("     %s\n", mgt_last_error());

    printf("%s\n", failures ? "no_hf: FAILED" : "no_hf: ok");
    return failures ? 1 : 0;
}
