/* Parity with PyTorch: tests/fixtures/parity_tiny.safetensors holds a float64 PyTorch reference
   (tests/make_parity_fixture.py) of a tiny GPT-2 (L=2, NH=4, C=64, T=32, V=256, B=4): initial weights,
   logits, loss and every gradient of one batch, and 10 AdamW steps with clipping and the LR schedule.
   mgt computes in float32, so the differences measured here are float32 rounding against an exact
   reference; each tolerance below says why it is what it is. */
#define MGT_IMPLEMENTATION
#include "mgt.h"

#include "parity_util.h" // defines: check, need, scaled_err, failures

/* rows (B, T+1) from inputs x and targets y = x shifted by one */
static void rows_from(uint32_t *rows, const int32_t *x, const int32_t *y, int B, int T) {
    int b, t;
    for (b = 0; b < B; b++) {
        for (t = 0; t < T; t++) rows[b * (T + 1) + t] = (uint32_t)x[b * T + t];
        rows[b * (T + 1) + T] = (uint32_t)y[b * T + T - 1];
    }
}

/* the fixture's weights into rank 0 (one rank: local tensors are the global ones, wte padded) */
static void load_params(mgt__rank *rk, const mgt__st_file *f, const char *prefix) {
    int t;
    for (t = 0; t < rk->lay.n; t++) {
        char name[128];
        snprintf(name, sizeof name, "%s%s", prefix, rk->lay.t[t].info.name);
        memcpy(mgt__P(rk, t), mgt__st_data(f, need(f, name, "F32")), sizeof(float) * rk->lay.t[t].info.numel);
    }
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "tests/fixtures/parity_tiny.safetensors";
    mgt__st_file f;
    mgt_config cfg;
    mgt_run *run;
    mgt__rank *rk;
    char set[256];
    int B, T, t, s;
    double worst;
    uint32_t *rows;
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

    check_batch(&f, rk, B, T, cfg.model.vocab_size); /* one batch: logits, loss, gradients */

    /* ten AdamW steps from the same initial weights */
    {
        const int32_t *tx = (const int32_t *)mgt__st_data(&f, need(&f, "train_x", "I32"));
        const int32_t *ty = (const int32_t *)mgt__st_data(&f, need(&f, "train_y", "I32"));
        const double *tl = (const double *)mgt__st_data(&f, need(&f, "train_loss", "F64"));
        const double *tlr = (const double *)mgt__st_data(&f, need(&f, "train_lr", "F64"));
        const double *tn = (const double *)mgt__st_data(&f, need(&f, "train_norm", "F64"));
        const int32_t *tc = (const int32_t *)mgt__st_data(&f, need(&f, "train_clipped", "I32"));
        double el = 0, elr = 0, en0 = 0, en = 0, sq_err = 0, sq_ref = 0;
        int clip_mismatch = 0;
        rows = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)B * (size_t)(T + 1));
        load_params(rk, &f, "param.");
        for (s = 0; s < 10; s++) {
            rows_from(rows, tx + (size_t)s * B * T, ty + (size_t)s * B * T, B, T);
            if (mgt_run_step_tokens(run, rows) != MGT_OK) { printf("FAIL step %d: %s\n", s, mgt_last_error()); return 1; }
            printf("     step %d: loss %.7f (torch %.7f)  lr %.6e  norm %.6f (torch %.6f)  clipped %d\n", s, run->loss, tl[s], run->lr,
                   run->grad_norm, tn[s], tc[s]);
            el = fmax(el, fabs(run->loss - tl[s]) / tl[s]);
            elr = fmax(elr, fabs(run->lr - tlr[s]) / tlr[s]);
            if (s == 0) en0 = fabs(run->grad_norm - tn[s]) / tn[s];
            en = fmax(en, fabs(run->grad_norm - tn[s]) / tn[s]);
            clip_mismatch += (run->grad_norm > cfg.train.grad_clip) != (tc[s] != 0);
        }
        /* float32 training drifts from the float64 reference a little each step; the issue asks
           for 1e-5 relative on the losses (measured: ~1e-7) */
        check("10 training losses (relative)", el, 1e-5);
        check("learning-rate schedule (relative)", elr, 1e-12);
        /* step 0 sees the same weights as the reference: float32 rounding of the gradients only */
        check("gradient norm at step 0 (relative)", en0, 5e-6);
        /* later steps see weights that drifted by the amplification described below */
        check("gradient norms of all 10 steps (relative)", en, 1e-4);
        check("clipping decisions that differ", clip_mismatch, 0);
        worst = 0;
        for (t = 0; t < rk->lay.n; t++) {
            char name[128];
            const float *ref;
            size_t i;
            double err;
            snprintf(name, sizeof name, "final.%s", rk->lay.t[t].info.name);
            ref = (const float *)mgt__st_data(&f, need(&f, name, "F32"));
            err = scaled_err(mgt__P(rk, t), ref, rk->lay.t[t].info.numel);
            worst = err > worst ? err : worst;
            for (i = 0; i < rk->lay.t[t].info.numel; i++) {
                double d = (double)mgt__P(rk, t)[i] - ref[i];
                sq_err += d * d;
                sq_ref += (double)ref[i] * ref[i];
            }
        }
        /* Adam's update lr * m / sqrt(v) is about lr whatever the gradient's size, so an element whose
           gradient is near zero (the key biases' is exactly zero in exact arithmetic, some weights'
           is below 1e-8) moves by amplified rounding noise, up to the sum of learning rates (0.061).
           So the worst element is bounded loosely, and the RMS over all weights, which any real bug
           would move, tightly. */
        check("final parameters, worst element (relative to tensor max)", worst, 2e-3);
        check("final parameters, RMS error / RMS weight", sqrt(sq_err / sq_ref), 1e-5);
        free(rows);
    }
    mgt_run_destroy(run);
    mgt__st_close(&f);
    printf("%s\n", failures ? "parity: FAILED" : "parity: ok");
    return failures ? 1 : 0;
}
