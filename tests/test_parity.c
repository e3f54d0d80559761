/* Parity with PyTorch: tests/fixtures/parity_tiny.safetensors holds a float64 PyTorch reference
   (tests/make_parity_fixture.py) of a tiny GPT-2 (L=2, NH=4, C=64, T=32, V=256, B=4): initial weights,
   logits, loss and every gradient of one batch, and 10 AdamW steps with clipping and the LR schedule.
   mgt computes in float32, so the differences measured here are float32 rounding against an exact
   reference; each tolerance below says why it is what it is. */
#define MGT_IMPLEMENTATION
#include "mgt.h"

#include "parity_util.h" // defines: check, need, scaled_err, load_params, check_batch, check_training, failures

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "tests/fixtures/parity_tiny.safetensors";
    mgt__st_file f;
    mgt_config cfg;
    mgt_run *run;
    mgt__rank *rk;
    char set[256];
    int B, T, t;
    const char *keys[] = {"n_layer", "n_head", "d_model", "seq_len", "vocab_size"};
    const char *train_keys[] = {"lr", "min_lr", "warmup", "weight_decay", "beta1", "beta2", "eps", "grad_clip", "steps"};
    if (mgt__st_open(&f, path) != MGT_OK) { printf("FAIL %s\n", mgt_last_error()); return 1; }
    mgt_config_init(&cfg);
    for (t = 0; t < 5; t++) {
        snprintf(set, sizeof set, "model.%s=%s", keys[t], mgt__st_meta(&f, keys[t]));
        mgt_config_set(&cfg, set);
    }
    for (t = 0; t < 9; t++) {
        snprintf(set, sizeof set, "train.%s=%s", train_keys[t], mgt__st_meta(&f, train_keys[t]));
        mgt_config_set(&cfg, set);
    }
    B = atoi(mgt__st_meta(&f, "batch"));
    T = cfg.model.seq_len;
    snprintf(set, sizeof set, "train.global_batch=%d", B); mgt_config_set(&cfg, set);
    snprintf(set, sizeof set, "train.micro_batch=%d", B); mgt_config_set(&cfg, set);
    mgt_config_set(&cfg, "train.schedule=cosine");
    mgt_config_set(&cfg, "data.train=");
    mgt_config_set(&cfg, "data.val=");
    mgt_config_set(&cfg, "log.metrics=none");
    mgt_config_set(&cfg, "parallel.threads=2");
    if (mgt_run_create(&run, &cfg) != MGT_OK) { printf("FAIL %s\n", mgt_last_error()); return 1; }
    rk = &run->ranks[0];
    load_params(rk, &f, "param.");

    check_batch(&f, rk, B, T, cfg.model.vocab_size, NULL); /* one batch: logits, loss, gradients */

    /* ten AdamW steps from the same initial weights */
    load_params(rk, &f, "param.");
    {
        float **final = (float **)malloc(sizeof(float *) * (size_t)rk->lay.n);
        for (t = 0; t < rk->lay.n; t++) {
            char name[128];
            snprintf(name, sizeof name, "final.%s", rk->lay.t[t].info.name);
            final[t] = (float *)mgt__st_data(&f, need(&f, name, "F32"));
        }
        check_training(&f, run, B, T, final, 1e-5); /* measured 3e-6 */
        free(final);
    }
    mgt_run_destroy(run);
    mgt__st_close(&f);
    printf("%s\n", failures ? "parity: FAILED" : "parity: ok");
    return failures ? 1 : 0;
}
