/* [model] init and `mgt export` against Hugging Face (issue 16). tests/fixtures/hf_gpt2 and hf_llama
   are a GPT2LMHeadModel and a LlamaForCausalLM saved by save_pretrained (tests/make_hf_fixture.py:
   L=2, C=32, T=16, V=128; Llama with 4 query heads on 2 key/value heads, SwiGLU of 88, a separate
   head), each with a float64 reference of one batch (logits, loss, every gradient) and 10 AdamW
   steps. mgt imports each folder as a user does ([model] init = the folder), so Hugging Face's
   names, GPT-2's Conv1D transposes and Llama's q/k/v and gate/up stacking are under test; the
   tolerances are parity_util.h's (float32 against a float64 reference). Then: the sharded copy and
   llm.c's .bin (written by the fixture script, not by mgt) import the same bits, export then
   re-import is bit-identical, config.json has what from_pretrained reads, and each refusal exits 2
   naming the file and the fix. */
#define MGT_IMPLEMENTATION
#include "mgt.h"

#include <sys/wait.h> /* defines: WEXITSTATUS (the mgt command's exit code) */

#include "parity_util.h" // defines: check, need, check_batch, check_training, failures

#define FIX "tests/fixtures/"

/* a one-rank run of init's model with the fixture's training keys; NULL with the error when refused */
static mgt_run *run_of(const char *init, const mgt__st_file *ref, const char *extra) {
    static const char *const train_keys[] = {"lr", "min_lr", "warmup", "schedule", "weight_decay", "beta1", "beta2", "eps", "grad_clip", "steps", "global_batch"};
    static const char *const fixed[] = {"data.train=", "data.val=", "data.tokenizer=hf", "data.tokenizer_json=" FIX "hf_llama3ish.json", "log.metrics=",
                                        "parallel.threads=2"};
    mgt_config cfg;
    char set[1400];
    mgt_run *run;
    int i;
    mgt_config_init(&cfg);
    snprintf(set, sizeof set, "model.init=%s", init);
    mgt_config_set(&cfg, set);
    for (i = 0; i < (int)(sizeof train_keys / sizeof train_keys[0]); i++) {
        snprintf(set, sizeof set, "train.%s=%s", train_keys[i], mgt__st_meta(ref, train_keys[i]));
        if (mgt_config_set(&cfg, set) != MGT_OK) { printf("FAIL %s: %s\n", set, mgt_last_error()); exit(1); }
    }
    snprintf(set, sizeof set, "train.micro_batch=%s", mgt__st_meta(ref, "global_batch"));
    mgt_config_set(&cfg, set);
    for (i = 0; i < (int)(sizeof fixed / sizeof fixed[0]); i++) mgt_config_set(&cfg, fixed[i]);
    if (extra && mgt_config_set(&cfg, extra) != MGT_OK) { printf("FAIL %s: %s\n", extra, mgt_last_error()); exit(1); }
    return mgt_run_create(&run, &cfg) == MGT_OK ? run : NULL;
}

/* the reference's tensors `prefix`<Hugging Face name> in mgt's layout, one per rank-0 tensor, through
   the importer's own name map (what the logits and the loss check independently) */
static float **reference(const char *dir, const mgt_config *cfg, const char *prefix, mgt__layout *g) {
    mgt__src *s;
    float **out;
    char path[256];
    if (mgt__src_open(&s, dir, 0) != MGT_OK) { printf("FAIL %s\n", mgt_last_error()); exit(1); }
    s->files = (mgt__st_file *)calloc(1, sizeof *s->files);
    snprintf(path, sizeof path, "%s/reference.safetensors", dir);
    if (mgt__st_open(&s->files[0], path) != MGT_OK) { printf("FAIL %s\n", mgt_last_error()); exit(1); }
    s->nfiles = 1;
    if (mgt__src_global(s, cfg, prefix, g, &out) != MGT_OK) { printf("FAIL %s\n", mgt_last_error()); exit(1); }
    mgt__src_free(s);
    return out;
}

/* are the weights of two one-rank runs the same bits? */
static int same_weights(mgt_run *a, mgt_run *b) {
    mgt__rank *x = &a->ranks[0], *y = &b->ranks[0];
    int t;
    if (x->lay.n != y->lay.n) return 0;
    for (t = 0; t < x->lay.n; t++)
        if (memcmp(mgt__P(x, t), mgt__P(y, t), sizeof(float) * x->lay.t[t].info.numel)) {
            printf("     %s differs\n", x->lay.t[t].info.name);
            return 0;
        }
    return 1;
}

/* import, one batch, 10 AdamW steps; then save, export, re-import and compare */
static void parity(const char *name) {
    char dir[256], path[1400], out[256], note[1024], ckpt[1400], set[300];
    mgt__st_file ref;
    mgt__layout g;
    float **grads, **final;
    mgt_run *run, *back;
    mgt__rank *rk;
    printf("---- %s\n", name);
    snprintf(dir, sizeof dir, FIX "%s", name);
    snprintf(path, sizeof path, "%s/reference.safetensors", dir);
    if (mgt__st_open(&ref, path) != MGT_OK) { printf("FAIL %s\n", mgt_last_error()); exit(1); }
    snprintf(set, sizeof set, "checkpoint.dir=build/testdata/init_%s", name);
    if (!(run = run_of(dir, &ref, set))) { printf("FAIL %s: %s\n", dir, mgt_last_error()); exit(1); }
    rk = &run->ranks[0];
    grads = reference(dir, &run->plan.cfg, "grad.", &g);
    check_batch(&ref, rk, run->plan.cfg.train.global_batch, run->plan.cfg.model.seq_len, run->plan.cfg.model.vocab_size, grads);
    mgt__free_global(&g, grads);
    mgt__layout_free(&g);
    final = reference(dir, &run->plan.cfg, "final.", &g);
    /* measured RMS errors of the final weights: Llama 2.7e-7, GPT-2 1.2e-5, GPT-2's spread over every
       tensor (largest in wte, mlp.c_fc and attn.c_attn, none standing out) while its step-0 logits,
       loss and gradients match as closely as Llama's: float32 drift along this trajectory, not a
       mapping (a wrong transpose or split is O(1) at step 0; a missed weight decay moves the RMS
       by ~1e-3). GPT-2 is allowed 3e-5, Llama parity_util.h's 1e-5 */
    check_training(&ref, run, run->plan.cfg.train.global_batch, run->plan.cfg.model.seq_len, final, strstr(name, "gpt2") ? 3e-5 : 1e-5);
    mgt__free_global(&g, final);
    mgt__layout_free(&g);

    /* the trained weights out to Hugging Face's form and back: the same bits */
    if (mgt_run_claim(run, 1) != MGT_OK || mgt_run_save(run, ckpt, sizeof ckpt) != MGT_OK) { printf("FAIL save: %s\n", mgt_last_error()); exit(1); }
    snprintf(out, sizeof out, "build/testdata/init_%s_export", name);
    if (mgt_export(ckpt, out, note, sizeof note) != MGT_OK) { printf("FAIL export: %s\n", mgt_last_error()); exit(1); }
    printf("     %s\n", note);
    back = run_of(out, &ref, NULL);
    if (!back) { printf("FAIL re-import of %s: %s\n", out, mgt_last_error()); exit(1); }
    check("export then re-import: weights that differ", !same_weights(run, back), 0);
    mgt_run_destroy(back);
    snprintf(path, sizeof path, "build/testdata/init_%s", name);
    back = run_of(path, &ref, NULL); /* an mgt run folder: its newest checkpoint's weights, not its step */
    if (!back) { printf("FAIL init from run folder %s: %s\n", path, mgt_last_error()); exit(1); }
    check("init from the run folder: weights that differ", !same_weights(run, back), 0);
    check("init from the run folder: starts at step 0", back->step, 0);
    { /* config.json: what from_pretrained needs to build the model */
        static const char *const gpt2[] = {"architectures", "model_type", "vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner",
                                           "activation_function", "layer_norm_epsilon", "tie_word_embeddings"};
        static const char *const llama[] = {"architectures", "model_type", "vocab_size", "max_position_embeddings", "hidden_size", "intermediate_size",
                                            "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "rms_norm_eps", "rope_theta", "hidden_act",
                                            "attention_bias", "mlp_bias", "tie_word_embeddings"};
        int is_gpt2 = strstr(name, "gpt2") != NULL, i, n = is_gpt2 ? 11 : 15, missing = 0;
        char why[256], v[64], *json;
        snprintf(path, sizeof path, "%s/config.json", out);
        json = mgt__read_text(path, why, sizeof why);
        for (i = 0; i < n; i++)
            if (!json || !mgt__json_member(json, is_gpt2 ? gpt2[i] : llama[i])) { printf("     config.json lacks %s\n", is_gpt2 ? gpt2[i] : llama[i]); missing++; }
        check("config.json: fields from_pretrained reads that are missing", missing, 0);
        check("config.json: model_type", !(mgt__json_text(json, "model_type", v, sizeof v) && !strcmp(v, is_gpt2 ? "gpt2" : "llama")), 0);
        free(json);
        snprintf(path, sizeof path, "%s/tokenizer.json", out);
        check("tokenizer.json copied (the run's hf tokenizer)", access(path, F_OK) != 0, 0);
    }
    mgt_run_destroy(back);
    mgt_run_destroy(run);
    mgt__st_close(&ref);
}

/* runs the mgt program; its exit code, its stderr in err */
static int mgt_cmd(const char *args, char *err, size_t cap) {
    char cmd[2048];
    FILE *p;
    size_t n;
    int status;
    snprintf(cmd, sizeof cmd, "./mgt %s 2>&1 >/dev/null", args);
    p = popen(cmd, "r");
    n = p ? fread(err, 1, cap - 1, p) : 0;
    err[n] = 0;
    status = p ? pclose(p) : -1;
    return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* a refusal: exit 2, and the message has each of the words */
static void refused(const char *what, const char *args, const char *w1, const char *w2, const char *w3) {
    char err[4096];
    int rc = mgt_cmd(args, err, sizeof err);
    int ok = rc == 2 && strstr(err, w1) && strstr(err, w2) && strstr(err, w3);
    printf("%-4s refuses %s: exit %d: %s", ok ? "ok" : "FAIL", what, rc, err);
    if (!ok) printf("     (wanted exit 2 and '%s', '%s', '%s')\n", w1, w2, w3);
    failures += !ok;
}

/* a folder beside the fixture with its config.json edited (from -> to) and its tensors filtered */
static void broken_copy(const char *dir, const char *from, const char *to, const char *drop, const char *shrink) {
    char path[512], why[256], *json, *at;
    mgt__st_file f;
    mgt__st_out *out;
    int i, n = 0;
    FILE *fp;
    mgt_mkdirs(dir);
    json = mgt__read_text(FIX "hf_gpt2/config.json", why, sizeof why);
    snprintf(path, sizeof path, "%s/config.json", dir);
    fp = fopen(path, "w");
    at = from ? strstr(json, from) : NULL;
    if (at) { fwrite(json, 1, (size_t)(at - json), fp); fputs(to, fp); fputs(at + strlen(from), fp); }
    else fputs(json, fp);
    fclose(fp);
    free(json);
    mgt__st_open(&f, FIX "hf_gpt2/model.safetensors");
    out = (mgt__st_out *)calloc((size_t)f.n, sizeof *out);
    for (i = 0; i < f.n; i++) {
        if (drop && !strcmp(f.t[i].name, drop)) continue;
        out[n].name = f.t[i].name;
        out[n].data = mgt__st_data(&f, &f.t[i]);
        out[n].dtype = "F32";
        out[n].ndim = f.t[i].ndim;
        out[n].shape[0] = f.t[i].shape[0];
        out[n].shape[1] = f.t[i].shape[1];
        out[n].bytes = f.t[i].end - f.t[i].begin;
        if (shrink && !strcmp(f.t[i].name, shrink)) { out[n].shape[0] /= 2; out[n].bytes /= 2; } /* half its rows */
        n++;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    mgt__st_write(path, out, n, NULL, 0);
    free(out);
    mgt__st_close(&f);
}

int main(void) {
    mgt__st_file ref;
    mgt_run *a, *b;
    const char *train = "--set data.train= --set data.val= --set data.tokenizer=hf --set data.tokenizer_json=" FIX "hf_llama3ish.json";
    char args[2048];
    if (access("./mgt", X_OK)) { printf("FAIL ./mgt is not built (ninja mgt)\n"); return 1; }
    parity("hf_gpt2");
    parity("hf_llama");

    printf("---- the same weights from other files\n");
    if (mgt__st_open(&ref, FIX "hf_llama/reference.safetensors") != MGT_OK) { printf("FAIL %s\n", mgt_last_error()); return 1; }
    a = run_of(FIX "hf_llama", &ref, NULL);
    b = run_of(FIX "hf_llama_sharded", &ref, NULL);
    if (!a || !b) { printf("FAIL %s\n", mgt_last_error()); return 1; }
    check("sharded folder (index.json, 4 shards): weights that differ", !same_weights(a, b), 0);
    mgt_run_destroy(b);
    { /* 8 ranks (tp 2: q and k/v heads, gate/up split; pp 2; dp 2 under ZeRO-3) in bf16 each take their
         slice of the fp32 master weights: gathered, they are the one-rank weights */
        static const char *const layout[] = {"parallel.pp=2", "parallel.dp=2", "parallel.zero=3", "precision.dtype=bf16", "train.micro_batch=2"};
        mgt_config c = a->plan.cfg;
        int i;
        mgt_config_set(&c, "parallel.tp=2");
        for (i = 0; i < 5; i++) mgt_config_set(&c, layout[i]);
        if (mgt_run_create(&b, &c) != MGT_OK) { printf("FAIL tp 2 pp 2 dp 2 zero 3 bf16: %s\n", mgt_last_error()); return 1; }
    }
    {
        mgt__layout g;
        float **w;
        int t, differ = 0;
        mgt__global_layout(&b->plan.cfg, &g);
        w = mgt__gather_global(b, &g, MGT__BUF_PARAMS);
        for (t = 0; t < g.n; t++) differ += memcmp(w[t], mgt__P(&a->ranks[0], t), sizeof(float) * g.t[t].info.numel) != 0;
        check("tp 2 x pp 2 x dp 2, ZeRO-3, bf16: tensors that differ from one rank's, gathered", differ, 0);
        mgt__free_global(&g, w);
        mgt__layout_free(&g);
    }
    mgt_run_destroy(b);
    mgt_run_destroy(a);
    mgt__st_close(&ref);
    if (mgt__st_open(&ref, FIX "hf_gpt2/reference.safetensors") != MGT_OK) { printf("FAIL %s\n", mgt_last_error()); return 1; }
    a = run_of(FIX "hf_gpt2", &ref, NULL);
    b = run_of(FIX "llmc_gpt2.bin", &ref, NULL);
    if (!a || !b) { printf("FAIL %s\n", mgt_last_error()); return 1; }
    check("llm.c .bin (vocabulary padded 128 -> 192): weights that differ", !same_weights(a, b), 0);
    mgt_run_destroy(b);
    b = run_of(FIX "llmc_gpt2_bf16.bin", &ref, NULL);
    if (!b) { printf("FAIL %s\n", mgt_last_error()); return 1; }
    { /* version 5: each weight is the float32 one rounded to bfloat16 (torch's rounding, nearest even) */
        int t, differ = 0;
        size_t i;
        for (t = 0; t < a->ranks[0].lay.n; t++)
            for (i = 0; i < a->ranks[0].lay.t[t].info.numel; i++)
                differ += mgt__P(&b->ranks[0], t)[i] != mgt__bf16_to_f32(mgt__f32_to_bf16(mgt__P(&a->ranks[0], t)[i]));
        check("llm.c .bin version 5 (bf16): weights that are not the rounded float32 ones", differ, 0);
    }
    mgt_run_destroy(b);
    mgt_run_destroy(a);
    mgt__st_close(&ref);

    printf("---- refusals\n");
    snprintf(args, sizeof args, "check tests/presets/init_conflict.ini %s", train);
    refused("a key the preset sets otherwise", args, "init_conflict.ini:", "n_layer", "remove n_layer from the preset");
    broken_copy("build/testdata/init_bert", "GPT2LMHeadModel", "BertModel", NULL, NULL);
    snprintf(args, sizeof args, "check tests/presets/init_conflict.ini %s --set model.n_layer=2 --set model.init=build/testdata/init_bert", train);
    refused("an unknown architecture", args, "init_bert/config.json", "BertModel", "GPT2LMHeadModel or LlamaForCausalLM");
    broken_copy("build/testdata/init_missing", NULL, NULL, "transformer.h.1.mlp.c_fc.weight", NULL);
    snprintf(args, sizeof args, "bench tests/presets/init_conflict.ini --steps 1 %s --set model.n_layer=2 --set model.init=build/testdata/init_missing", train);
    refused("a missing tensor", args, "init_missing", "transformer.h.1.mlp.c_fc.weight", "save_pretrained");
    broken_copy("build/testdata/init_shape", NULL, NULL, NULL, "transformer.wpe.weight");
    snprintf(args, sizeof args, "bench tests/presets/init_conflict.ini --steps 1 %s --set model.n_layer=2 --set model.init=build/testdata/init_shape", train);
    refused("a tensor of the wrong shape", args, "init_shape", "transformer.wpe.weight", "[8,32]");
    /* a config.json its safetensors contradict: mgt check refuses it (mgt train did so only after
       allocating the run) */
    broken_copy("build/testdata/init_disagree", "\"n_embd\": 32", "\"n_embd\": 64", NULL, NULL);
    snprintf(args, sizeof args, "check tests/presets/init_conflict.ini %s --set model.n_layer=2 --set model.init=build/testdata/init_disagree", train);
    refused("by mgt check, a config.json (n_embd 64) that its model.safetensors (32) contradicts", args, "init_disagree", "has shape [128,32]",
            "config.json's model needs [128,64]");
    { /* a model between the two families (layernorm with rope) has no Hugging Face class */
        static const char *const keys[] = {"data.train=", "data.val=", "log.metrics=", "model.positions=rope", "model.n_layer=1", "model.d_model=32",
                                           "model.n_head=2", "model.seq_len=8", "train.global_batch=1", "train.micro_batch=1", "parallel.threads=1",
                                           "checkpoint.dir=build/testdata/init_mixed"};
        mgt_config c;
        char ck[1400];
        int i;
        mgt_config_init(&c);
        for (i = 0; i < (int)(sizeof keys / sizeof keys[0]); i++) mgt_config_set(&c, keys[i]);
        if (mgt_run_create(&a, &c) != MGT_OK || mgt_run_claim(a, 1) != MGT_OK || mgt_run_save(a, ck, sizeof ck) != MGT_OK) {
            printf("FAIL %s\n", mgt_last_error());
            return 1;
        }
        mgt_run_destroy(a);
        snprintf(args, sizeof args, "export %s -o build/testdata/init_none", ck);
        refused("exporting a model Hugging Face has no class for", args, "positions = rope", "has no class", "step_00000000.safetensors");
    }
    printf("%s\n", failures ? "init: FAILED" : "init: ok");
    return failures ? 1 : 0;
}
