/* parity_util.h - what the PyTorch parity tests share (included after mgt.h's implementation): checks
   against a fixture, one batch's logits, loss and gradients, and AdamW steps with their final
   weights (test_parity, test_parity_llama and test_init use them; inline: not every test uses all) */
#ifndef MGT_PARITY_UTIL_H
#define MGT_PARITY_UTIL_H
#include "worst.h" /* defines: worse_of */

static int failures;

static void check(const char *what, double err, double tol) {
    int ok = err <= tol && err == err;
    printf("%-4s %-44s max err %.3e (tolerance %.1e)\n", ok ? "ok" : "FAIL", what, err, tol);
    if (!ok) failures++;
}

static const mgt__st_tensor *need(const mgt__st_file *f, const char *name, const char *dtype) {
    const mgt__st_tensor *t = mgt__st_find(f, name);
    if (!t || strcmp(t->dtype, dtype)) {
        printf("FAIL fixture has no %s tensor %s\n", dtype, name);
        exit(1);
    }
    return t;
}

/* max |a - b| over a tensor, divided by the largest |b| in it: errors relative to the tensor's scale */
static double scaled_err(const float *a, const float *b, size_t n) {
    double e = 0, scale = 1e-30;
    size_t i;
    for (i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        e = d > e ? d : e;
        scale = fabs((double)b[i]) > scale ? fabs((double)b[i]) : scale;
    }
    return e / scale;
}

/* the fixture's weights (prefix + mgt's name) into rank 0 of a one-rank run: its local tensors are
   the global ones, wte and lm_head padded */
static inline void load_params(mgt__rank *rk, const mgt__st_file *f, const char *prefix) {
    int t;
    for (t = 0; t < rk->lay.n; t++) {
        char name[128];
        snprintf(name, sizeof name, "%s%s", prefix, rk->lay.t[t].info.name);
        memcpy(mgt__P(rk, t), mgt__st_data(f, need(f, name, "F32")), sizeof(float) * rk->lay.t[t].info.numel);
    }
}

/* one batch of the fixture (x, y) through rank 0 of a one-rank run: its logits, its mean loss and
   every parameter gradient against the fixture's (logits, loss, and grads[t] for rank 0's tensor t,
   or, with grads NULL, grad.<mgt's name>) */
static void check_batch(const mgt__st_file *f, mgt__rank *rk, int B, int T, int V, float *const *grads) {
    const int32_t *x = (const int32_t *)mgt__st_data(f, need(f, "x", "I32")), *y = (const int32_t *)mgt__st_data(f, need(f, "y", "I32"));
    const float *logits = (const float *)mgt__st_data(f, need(f, "logits", "F32"));
    mgt__acts *A = &rk->acts[0];
    double ref_loss, loss, e = 0, worst = 0;
    int i, v, t;
    memcpy(&ref_loss, mgt__st_data(f, need(f, "loss", "F64")), sizeof ref_loss);
    for (i = 0; i < B * T; i++) { A->inputs[i] = x[i]; A->targets[i] = y[i]; }
    mgt__stage_forward(rk, A); /* logits only: the head without its loss */
    mgt__norm_forward(rk, A->lnf, A->lnf_mean, A->lnf_rstd, A->resid[rk->nblocks], mgt__t_lnf(rk), mgt__t_lnf_bias(rk), B * T);
    rk->be->matmul_forward(rk->be, A->logits, A->lnf, mgt__P(rk, mgt__t_head(rk)), NULL, B * T, rk->shape.C, rk->shape.Vl);
    for (i = 0; i < B * T; i++)
        for (v = 0; v < V; v++) {
            double d = fabs((double)A->logits[(size_t)i * rk->shape.Vl + v] - logits[(size_t)i * V + v]);
            e = d > e ? d : e;
        }
    /* logits are O(1) sums over C=64 products after two blocks: float32 rounding gives ~1e-6 */
    check("logits (absolute)", e, 1e-5);
    rk->be->zero(rk->be, rk->grads, sizeof(float) * rk->lay.size);
    mgt__stage_forward(rk, A);
    mgt__head_forward(rk, A, 1.0f / (float)(B * T), &loss);
    loss /= B * T;
    mgt__stage_backward(rk, A, 1);
    /* a mean of 128 float32 cross-entropies: relative error of order 1e-7 */
    check("loss (relative)", fabs(loss - ref_loss) / ref_loss, 1e-6);
    for (t = 0; t < rk->lay.n; t++) {
        char name[128];
        double err;
        snprintf(name, sizeof name, "grad.%s", rk->lay.t[t].info.name);
        err = scaled_err(mgt__G(rk, t), grads ? grads[t] : (const float *)mgt__st_data(f, need(f, name, "F32")), rk->lay.t[t].info.numel);
        worst = err > worst ? err : worst;
        if (err > 1e-4) check(name, err, 1e-4);
    }
    /* gradients pass through up to ~20 float32 ops and GEMMs of length <= 256: relative to each
       tensor's largest gradient, 1e-4 leaves a 10x margin over what float32 rounding gives */
    check("every parameter gradient (relative to tensor max)", worst, 1e-4);
}

/* rows (B, T+1) from inputs x and targets y = x shifted by one */
static inline void rows_from(uint32_t *rows, const int32_t *x, const int32_t *y, int B, int T) {
    int b, t;
    for (b = 0; b < B; b++) {
        for (t = 0; t < T; t++) rows[b * (T + 1) + t] = (uint32_t)x[b * T + t];
        rows[b * (T + 1) + T] = (uint32_t)y[b * T + T - 1];
    }
}

/* AdamW steps (the fixture's train_loss count) from the run's weights on the fixture's train_x/y:
   losses and learning rates against train_loss/train_lr, gradient norms and clipping against
   train_norm/train_clipped where the fixture has them, and the final weights of rank 0's tensor t
   against final[t]; rms_tol: the RMS error allowed, which depends on how the fixture's trajectory
   amplifies float32 rounding (see the callers) */
static inline void check_training(const mgt__st_file *f, mgt_run *run, int B, int T, float *const *final, double rms_tol) {
    const mgt__st_tensor *loss_t = need(f, "train_loss", "F64");
    const int32_t *tx = (const int32_t *)mgt__st_data(f, need(f, "train_x", "I32"));
    const int32_t *ty = (const int32_t *)mgt__st_data(f, need(f, "train_y", "I32"));
    const double *tl = (const double *)mgt__st_data(f, loss_t);
    const double *tlr = (const double *)mgt__st_data(f, need(f, "train_lr", "F64"));
    const mgt__st_tensor *norm_t = mgt__st_find(f, "train_norm"), *clip_t = mgt__st_find(f, "train_clipped");
    const double *tn = norm_t ? (const double *)mgt__st_data(f, norm_t) : NULL;
    const int32_t *tc = clip_t ? (const int32_t *)mgt__st_data(f, clip_t) : NULL;
    mgt__rank *rk = &run->ranks[0];
    double el = 0, elr = 0, en0 = 0, en = 0, sq_err = 0, sq_ref = 0, worst = 0;
    int clip_mismatch = 0, s, t, steps = (int)loss_t->shape[0];
    uint32_t *rows = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)B * (size_t)(T + 1));
    for (s = 0; s < steps; s++) {
        rows_from(rows, tx + (size_t)s * B * T, ty + (size_t)s * B * T, B, T);
        if (mgt_run_step_tokens(run, rows) != MGT_OK) { printf("FAIL step %d: %s\n", s, mgt_last_error()); exit(1); }
        printf("     step %d: loss %.7f (torch %.7f)  lr %.6e  norm %.6f", s, run->loss, tl[s], run->lr, run->grad_norm);
        if (tn) printf(" (torch %.6f)  clipped %d", tn[s], tc[s]);
        printf("\n");
        el = worse_of(el, fabs(run->loss - tl[s]) / tl[s]);
        elr = worse_of(elr, fabs(run->lr - tlr[s]) / tlr[s]);
        if (tn && s == 0) en0 = fabs(run->grad_norm - tn[s]) / tn[s];
        if (tn) en = worse_of(en, fabs(run->grad_norm - tn[s]) / tn[s]);
        if (tc) clip_mismatch += (run->grad_norm > run->plan.cfg.train.grad_clip) != (tc[s] != 0);
    }
    free(rows);
    /* float32 training drifts from the float64 reference a little each step; the issue asks
       for 1e-5 relative on the losses (measured: ~1e-7) */
    check("training losses (relative)", el, 1e-5);
    check("learning-rate schedule (relative)", elr, 1e-12);
    if (tn) {
        /* step 0 sees the same weights as the reference: float32 rounding of the gradients only */
        check("gradient norm at step 0 (relative)", en0, 5e-6);
        /* later steps see weights that drifted by the amplification described below */
        check("gradient norms of all steps (relative)", en, 1e-4);
        check("clipping decisions that differ", clip_mismatch, 0);
    }
    for (t = 0; t < rk->lay.n; t++) {
        size_t i, n = rk->lay.t[t].info.numel;
        double err = scaled_err(mgt__P(rk, t), final[t], n);
        worst = err > worst ? err : worst;
        for (i = 0; i < n; i++) {
            double d = (double)mgt__P(rk, t)[i] - final[t][i];
            sq_err += d * d;
            sq_ref += (double)final[t][i] * final[t][i];
        }
    }
    /* Adam's update lr * m / sqrt(v) is about lr whatever the gradient's size, so an element whose
       gradient is near zero (the key biases' is exactly zero in exact arithmetic, some weights'
       is below 1e-8) moves by amplified rounding noise, up to the sum of learning rates (0.061).
       So the worst element is bounded loosely, and the RMS over all weights, which any real bug
       would move (a missed weight decay moves it by ~1e-3), tightly. */
    check("final parameters, worst element (relative to tensor max)", worst, 2e-3);
    check("final parameters, RMS error / RMS weight", sqrt(sq_err / sq_ref), rms_tol);
}

#endif
