/* parity_util.h - what the PyTorch parity tests share (included after mgt.h's implementation): checks
   against a fixture, and one batch's logits, loss and gradients */
#ifndef MGT_PARITY_UTIL_H
#define MGT_PARITY_UTIL_H

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

/* one batch of the fixture (x, y) through rank 0 of a one-rank run: its logits, its mean loss and
   every parameter gradient against the fixture's (logits, loss, grad.<name>) */
static void check_batch(const mgt__st_file *f, mgt__rank *rk, int B, int T, int V) {
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
        err = scaled_err(mgt__G(rk, t), (const float *)mgt__st_data(f, need(f, name, "F32")), rk->lay.t[t].info.numel);
        worst = err > worst ? err : worst;
        if (err > 1e-4) check(name, err, 1e-4);
    }
    /* gradients pass through up to ~20 float32 ops and GEMMs of length <= 256: relative to each
       tensor's largest gradient, 1e-4 leaves a 10x margin over what float32 rounding gives */
    check("every parameter gradient (relative to tensor max)", worst, 1e-4);
}

#endif
