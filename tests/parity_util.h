/* parity_util.h - what the PyTorch parity tests share (included after mgt.h's implementation) */
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

#endif
