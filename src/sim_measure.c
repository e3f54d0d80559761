/* src/sim_measure.c - the simulator's cpu device: an op priced by running the CPU backend's op of
   its shape, beside the machine's other ranks */
/* ---- the cpu device: an op priced by running the CPU backend's op of its shape. mgt__sim_replay
   calls op on be with buffers carved from arena (floats; tokens and targets in range), or with
   arena NULL only counts the floats it needs. */
static size_t mgt__sim_replay(mgt_backend *be, const mgt_sim_op *op, float *arena) {
    const long long *a = op->args;
    const char *name = op->name;
    size_t need = 0, i;
    int *ints;
#define MGT__TAKE(n) (need += (size_t)(n), arena ? arena + need - (size_t)(n) : NULL)
    if (!strcmp(name, "encoder_forward") || !strcmp(name, "encoder_backward") || !strcmp(name, "xent_partial") || !strcmp(name, "xent_finish")) {
        long long rows = name[0] == 'e' ? a[0] * a[1] : a[0], vs = a[1 + (name[0] == 'e' ? 2 : 0)], span = name[0] == 'e' ? a[4] : a[3] - a[1];
        ints = (int *)MGT__TAKE(rows);
        for (i = 0; ints && i < (size_t)rows; i++) ints[i] = (int)(vs + (long long)((i * 2654435761u) % (size_t)(span > 0 ? span : 1)));
        if (!strcmp(name, "encoder_forward")) {
            float *out = MGT__TAKE(rows * a[2]), *wte = MGT__TAKE(a[4] * a[2]), *wpe = a[5] ? MGT__TAKE(a[1] * a[2]) : NULL;
            if (arena) be->encoder_forward(be, out, ints, wte, (int)a[3], (int)a[4], wpe, (int)a[0], (int)a[1], (int)a[2]);
        } else if (!strcmp(name, "encoder_backward")) {
            float *dwte = MGT__TAKE(a[4] * a[2]), *dwpe = a[5] ? MGT__TAKE(a[1] * a[2]) : NULL, *dout = MGT__TAKE(rows * a[2]);
            if (arena) be->encoder_backward(be, dwte, dwpe, dout, ints, (int)a[3], (int)a[4], (int)a[0], (int)a[1], (int)a[2]);
        } else if (!strcmp(name, "xent_partial")) {
            float *part = MGT__TAKE(3 * rows), *logits = MGT__TAKE(rows * a[2]);
            if (arena) be->xent_partial(be, part, logits, ints, (int)rows, (int)a[1], (int)a[2], (int)a[3]);
        } else {
            float *parts = MGT__TAKE(3 * rows * a[4]), *logits = MGT__TAKE(rows * a[2]);
            double *losses;
            need += need & 1; /* doubles on 8 bytes */
            losses = (double *)(void *)MGT__TAKE(2 * rows);
            if (arena) be->xent_finish(be, losses, logits, parts, (int)a[4], ints, (int)rows, (int)a[1], (int)a[2], (int)a[3], a[5] ? 1.0f / (float)rows : 0.0f);
        }
    } else if (!strcmp(name, "residual_layernorm_forward")) {
        float *res = MGT__TAKE(a[0] * a[1]), *y = MGT__TAKE(a[0] * a[1]), *x = MGT__TAKE(a[0] * a[1]), *mean = MGT__TAKE(a[0]), *rstd = MGT__TAKE(a[0]);
        float *rb = MGT__TAKE(a[1]), *w = MGT__TAKE(a[1]), *b = MGT__TAKE(a[1]);
        if (arena) be->residual_layernorm_forward(be, res, y, mean, rstd, x, a[2] ? rb : NULL, w, b, (int)a[0], (int)a[1]);
    } else if (!strcmp(name, "layernorm_forward") || !strcmp(name, "layernorm_backward")) {
        float *x = MGT__TAKE(a[0] * a[1]), *y = MGT__TAKE(a[0] * a[1]), *g = MGT__TAKE(a[0] * a[1]), *mean = MGT__TAKE(a[0]), *rstd = MGT__TAKE(a[0]);
        float *w = MGT__TAKE(a[1]), *b = MGT__TAKE(a[1]), *dw = MGT__TAKE(a[1]), *db = MGT__TAKE(a[1]);
        if (arena && name[10] == 'f') be->layernorm_forward(be, y, mean, rstd, x, w, b, (int)a[0], (int)a[1]);
        else if (arena) be->layernorm_backward(be, y, dw, db, g, x, w, mean, rstd, (int)a[0], (int)a[1]);
    } else if (!strcmp(name, "matmul_forward") || !strcmp(name, "matmul_backward")) {
        float *x = MGT__TAKE(a[0] * a[1]), *w = MGT__TAKE(a[1] * a[2]), *y = MGT__TAKE(a[0] * a[2]), *bias = MGT__TAKE(a[2]);
        float *dx = name[7] == 'b' && a[3] ? MGT__TAKE(a[0] * a[1]) : NULL, *dw = name[7] == 'b' && a[5] ? NULL : MGT__TAKE(a[1] * a[2]); /* a[5]: no dW */
        if (arena && name[7] == 'f') be->matmul_forward(be, y, x, w, a[3] ? bias : NULL, (int)a[0], (int)a[1], (int)a[2]);
        else if (arena) be->matmul_backward(be, dx, dw, a[4] ? bias : NULL, y, x, w, (int)a[0], (int)a[1], (int)a[2]);
    } else if (!strcmp(name, "matmul_gelu_forward") || !strcmp(name, "matmul_gelu_backward")) { /* N, C, OC, bias */
        float *x = MGT__TAKE(a[0] * a[1]), *w = MGT__TAKE(a[1] * a[2]), *y = MGT__TAKE(a[0] * a[2]), *pre = MGT__TAKE(a[0] * a[2]);
        float *bias = MGT__TAKE(a[2]), *dw = name[12] == 'b' && a[4] ? NULL : MGT__TAKE(a[1] * a[2]), *dpre = name[12] == 'b' ? MGT__TAKE(a[0] * a[1]) : NULL;
        if (arena && name[12] == 'f') be->matmul_gelu_forward(be, y, pre, x, w, a[3] ? bias : NULL, (int)a[0], (int)a[1], (int)a[2]);
        else if (arena) be->matmul_gelu_backward(be, dpre, dw, a[3] ? bias : NULL, y, x, w, x, (int)a[0], (int)a[1], (int)a[2]); /* pre: any (N,C) */
    } else if (!strcmp(name, "attention_forward") || !strcmp(name, "attention_backward")) { /* B, T, C, NH, NKV */
        long long W = a[2] + 2 * (a[2] / a[3]) * a[4];
        float *qkv = MGT__TAKE(a[0] * a[1] * W), *dqkv = MGT__TAKE(a[0] * a[1] * W), *y = MGT__TAKE(a[0] * a[1] * a[2]);
        float *att = MGT__TAKE(a[0] * a[3] * a[1] * a[1]);
        if (arena && name[10] == 'f') be->attention_forward(be, y, att, qkv, (int)a[0], (int)a[1], (int)a[2], (int)a[3], (int)a[4]);
        else if (arena) be->attention_backward(be, dqkv, y, qkv, y, att, (int)a[0], (int)a[1], (int)a[2], (int)a[3], (int)a[4]); /* out: unread on the CPU */
    } else if (!strcmp(name, "attention_part_forward") || !strcmp(name, "attention_part_backward")) { /* B, T, C, NH, NKV, causal */
        long long KV2 = 2 * (a[2] / a[3]) * a[4], W = a[2] + KV2;
        float *qkv = MGT__TAKE(a[0] * a[1] * W), *kv = MGT__TAKE(a[0] * a[1] * KV2), *dkv = MGT__TAKE(a[0] * a[1] * KV2);
        float *o = MGT__TAKE(a[0] * a[1] * a[2]), *y = MGT__TAKE(a[0] * a[1] * a[2]), *lse = MGT__TAKE(a[0] * a[3] * a[1]);
        if (arena && name[15] == 'f') be->attention_part_forward(be, o, lse, qkv, kv, (int)KV2, (int)a[0], (int)a[1], (int)a[2], (int)a[3], (int)a[4], (int)a[5], 1);
        else if (arena) /* lse: the arena's values, small and finite, as a merged forward's are */
            be->attention_part_backward(be, o, dkv, y, y, lse, qkv, kv, (int)KV2, (int)a[0], (int)a[1], (int)a[2], (int)a[3], (int)a[4], (int)a[5]);
    } else if (!strcmp(name, "copy_cols")) { /* rows, cols, dst dtype, src dtype */
        float *x = MGT__TAKE(a[0] * a[1]), *y = MGT__TAKE(a[0] * a[1]);
        if (arena) be->copy_cols(be, y, (int)a[2], (int)a[1], x, (int)a[3], (int)a[1], (size_t)a[0], (int)a[1]);
    } else if (!strcmp(name, "rmsnorm_forward") || !strcmp(name, "rmsnorm_backward")) { /* N, C */
        float *x = MGT__TAKE(a[0] * a[1]), *y = MGT__TAKE(a[0] * a[1]), *g = MGT__TAKE(a[0] * a[1]), *rstd = MGT__TAKE(a[0]), *w = MGT__TAKE(a[1]);
        float *dw = MGT__TAKE(a[1]);
        if (arena && name[8] == 'f') be->rmsnorm_forward(be, y, rstd, x, w, 1e-5f, (int)a[0], (int)a[1]);
        else if (arena) be->rmsnorm_backward(be, y, dw, g, x, w, rstd, (int)a[0], (int)a[1]);
    } else if (!strcmp(name, "rope_forward") || !strcmp(name, "rope_backward")) { /* B, T, NH, NKV, hs */
        float *qkv = MGT__TAKE(a[0] * a[1] * (a[2] + 2 * a[3]) * a[4]);
        if (arena && name[5] == 'f') be->rope_forward(be, qkv, (int)a[0], (int)a[1], (int)a[2], (int)a[3], (int)a[4], 10000.0f, 0);
        else if (arena) be->rope_backward(be, qkv, (int)a[0], (int)a[1], (int)a[2], (int)a[3], (int)a[4], 10000.0f, 0);
    } else if (!strcmp(name, "swiglu_forward") || !strcmp(name, "swiglu_backward")) { /* N, H */
        float *x = MGT__TAKE(2 * a[0] * a[1]), *dx = MGT__TAKE(2 * a[0] * a[1]), *y = MGT__TAKE(a[0] * a[1]);
        if (arena && name[7] == 'f') be->swiglu_forward(be, y, x, (int)a[0], (int)a[1]);
        else if (arena) be->swiglu_backward(be, dx, x, y, (int)a[0], (int)a[1]);
    } else if (!strcmp(name, "bias_residual") || !strcmp(name, "bias_backward")) {
        float *y = MGT__TAKE(a[0] * a[1]), *x = MGT__TAKE(a[0] * a[1]), *b = MGT__TAKE(a[1]);
        if (arena && name[5] == 'r') be->bias_residual(be, y, x, a[2] ? b : NULL, (int)a[0], (int)a[1]);
        else if (arena) be->bias_backward(be, b, x, (int)a[0], (int)a[1]);
    } else if (!strcmp(name, "adamw")) {
        float *p = MGT__TAKE(a[0]), *g = MGT__TAKE(a[0]), *m = MGT__TAKE(a[0]), *v = MGT__TAKE(a[0]), *copy = a[1] ? MGT__TAKE(a[0]) : NULL;
        if (arena) be->adamw(be, p, copy, g, m, v, (size_t)a[0], 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 0.5f, 0.5f);
    } else if (!strcmp(name, "cast")) {
        float *x = MGT__TAKE(a[0]), *y = MGT__TAKE(a[0]);
        if (arena) be->cast(be, y, (int)a[1], x, (int)a[2], (size_t)a[0]);
    } else if (!strcmp(name, "zero")) {
        float *x = MGT__TAKE((a[0] + 3) / 4);
        if (arena) be->zero(be, x, (size_t)a[0]);
    } else { /* gelu_forward, gelu_backward, add_inplace, scale, sum_squares: n elements */
        float *x = MGT__TAKE(a[0]), *y = MGT__TAKE(a[0]), *g = MGT__TAKE(a[0]);
        if (strcmp(name, "gelu_forward") && strcmp(name, "gelu_backward") && strcmp(name, "add_inplace") && strcmp(name, "scale") &&
            strcmp(name, "sum_squares"))
            return 0; /* not an op of the backend table: the caller prices it by the model */
        if (!arena) {}
        else if (!strcmp(name, "gelu_forward")) be->gelu_forward(be, y, x, (size_t)a[0]);
        else if (!strcmp(name, "gelu_backward")) be->gelu_backward(be, y, x, g, (size_t)a[0]);
        else if (!strcmp(name, "add_inplace")) be->add_inplace(be, y, x, (size_t)a[0]);
        else if (!strcmp(name, "scale")) be->scale(be, y, 0.5f, (size_t)a[0]);
        else (void)be->sum_squares(be, x, (size_t)a[0]);
    }
#undef MGT__TAKE
    return need;
}

#define MGT__SIM_MEASURE_BYTES 2147483648.0 /* buffers an op may take to be measured; a larger one is priced by the model */

/* m ready to run op (need floats of buffers, scratch floats a thread for attention); 0 without memory */
static int mgt__sim_meter_ready(mgt__sim_meter *m, int threads, int dtype, size_t need, size_t scratch) {
    size_t i;
    if (!m->be || m->dtype != dtype || m->wide < need || m->scratch < scratch) {
        if (m->be) mgt__cpu_backend_destroy(m->be);
        m->be = NULL;
        m->wide = need > m->wide ? need : m->wide;
        m->scratch = scratch > m->scratch ? scratch : m->scratch;
        m->dtype = dtype;
        if (mgt__cpu_backend_create_typed(&m->be, threads, m->scratch, dtype, m->wide) != MGT_OK) m->be = NULL;
    }
    if (need > m->floats) {
        MGT_FREE(m->arena);
        m->arena = (float *)MGT_MALLOC(sizeof(float) * need);
        m->floats = m->arena ? need : 0;
    }
    if (!m->be || !m->arena) return 0;
    for (i = 0; i < need; i++) m->arena[i] = 0.01f * (float)(int)(i % 197) - 0.98f; /* fresh, finite, varied: no op's leftovers */
    return 1;
}

typedef struct mgt__sim_companion { mgt__sim_meter *m; const mgt_sim_op *op; volatile int *stop; pthread_mutex_t *mu; } mgt__sim_companion;
static void *mgt__sim_companion_main(void *arg) { /* another rank of the machine, running the same op meanwhile */
    mgt__sim_companion *c = (mgt__sim_companion *)arg;
    for (;;) {
        int stop;
        pthread_mutex_lock(c->mu);
        stop = *c->stop;
        pthread_mutex_unlock(c->mu);
        if (stop) return NULL;
        mgt__sim_replay(c->m->be, c->op, c->m->arena);
    }
}

/* Measurements shared by the simulated steps of a layout search (parallel.layout = auto): an op shape
   run with the same threads beside the same number of companions costs what it measured once, so the
   search's ZeRO stages and schedules of a layout run no op twice. Counted: a search turns it on and
   off around itself (mgt__sim_share(1), (0)); off, every simulated step measures its own. */
typedef struct mgt__sim_shared { mgt__sim_measured m; int threads, companions; } mgt__sim_shared;
static pthread_mutex_t mgt__sim_share_mu = PTHREAD_MUTEX_INITIALIZER;
static mgt__sim_shared *mgt__sim_shares;
static size_t mgt__sim_nshares, mgt__sim_cap_shares;
static int mgt__sim_sharing;
static void mgt__sim_share(int on) {
    pthread_mutex_lock(&mgt__sim_share_mu);
    mgt__sim_sharing += on ? 1 : -1;
    if (mgt__sim_sharing <= 0) {
        MGT_FREE(mgt__sim_shares);
        mgt__sim_shares = NULL;
        mgt__sim_nshares = mgt__sim_cap_shares = 0;
        mgt__sim_sharing = 0;
    }
    pthread_mutex_unlock(&mgt__sim_share_mu);
}
/* the shared measurement of op for w's ranks (1, *sec), or 0; with sec NULL, adds *m */
static int mgt__sim_shared_find(const mgt__sim_world *w, int dtype, const mgt_sim_op *op, double *sec, const mgt__sim_measured *add) {
    size_t i;
    int found = 0;
    pthread_mutex_lock(&mgt__sim_share_mu);
    if (mgt__sim_sharing && add) {
        if (mgt__sim_nshares == mgt__sim_cap_shares) {
            size_t cap = mgt__sim_cap_shares ? 2 * mgt__sim_cap_shares : 256;
            mgt__sim_shared *p = (mgt__sim_shared *)MGT_REALLOC(mgt__sim_shares, sizeof *p * cap);
            if (p) { mgt__sim_shares = p; mgt__sim_cap_shares = cap; }
        }
        if (mgt__sim_nshares < mgt__sim_cap_shares) {
            mgt__sim_shared *s = &mgt__sim_shares[mgt__sim_nshares++];
            s->m = *add;
            s->threads = w->measure_threads;
            s->companions = w->companions;
        }
    }
    for (i = 0; mgt__sim_sharing && !add && i < mgt__sim_nshares && !found; i++) {
        const mgt__sim_shared *s = &mgt__sim_shares[i];
        if (s->threads == w->measure_threads && s->companions == w->companions && s->m.dtype == dtype && !strcmp(s->m.op, op->name) &&
            !memcmp(s->m.args, op->args, sizeof op->args)) {
            *sec = s->m.sec;
            found = 1;
        }
    }
    pthread_mutex_unlock(&mgt__sim_share_mu);
    return found;
}

/* seconds of op on this machine: the CPU backend's op of its shape and storage type, run by the
   threads of a rank while the machine's other ranks run it too (they share memory bandwidth and
   the cores' clock), the median of three runs after one that warms caches; measured once per
   shape. Ops without a replay (a copy), or whose buffers would pass MGT__SIM_MEASURE_BYTES, are
   priced by the model. */
static double mgt__sim_measure(mgt__sim_world *w, int dtype, const mgt_sim_op *op) {
    size_t i, need;
    double times[3], sec;
    int r, j, k, ready, started = 0;
    volatile int stop = 0;
    pthread_mutex_t stop_mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_t tid[64];
    mgt__sim_companion comp[64];
    pthread_mutex_lock(&w->measure_mu);
    for (i = 0; i < w->nmeasured; i++)
        if (w->measured[i].dtype == dtype && !strcmp(w->measured[i].op, op->name) && !memcmp(w->measured[i].args, op->args, sizeof op->args)) {
            sec = w->measured[i].sec;
            pthread_mutex_unlock(&w->measure_mu);
            return sec;
        }
    if (mgt__sim_shared_find(w, dtype, op, &sec, NULL)) { /* another step of the search ran it */
        pthread_mutex_unlock(&w->measure_mu);
        return sec;
    }
    need = mgt__sim_replay(NULL, op, NULL);
    ready = need > 0 && (double)need * sizeof(float) * (w->companions + 1) <= MGT__SIM_MEASURE_BYTES;
    for (j = 0; ready && j <= w->companions; j++)
        ready = mgt__sim_meter_ready(&w->meters[j], w->measure_threads, dtype, need,
                                     !strncmp(op->name, "attention", 9) ? 2 * (size_t)(op->args[1] * op->args[1]) : 0);
    if (!ready) { /* nothing to run, or no memory to run it: the model */
        w->ops_modelled++;
        pthread_mutex_unlock(&w->measure_mu);
        return mgt__sim_price(&w->opt.device, dtype, op);
    }
    for (j = 1; j <= w->companions; j++) {
        comp[j].m = &w->meters[j];
        comp[j].op = op;
        comp[j].stop = &stop;
        comp[j].mu = &stop_mu;
        if (pthread_create(&tid[j], NULL, mgt__sim_companion_main, &comp[j])) break;
        started = j;
    }
    mgt__sim_replay(w->meters[0].be, op, w->meters[0].arena);
    for (r = 0; r < 3; r++) {
        double t0 = mgt_now();
        mgt__sim_replay(w->meters[0].be, op, w->meters[0].arena);
        times[r] = mgt_now() - t0;
    }
    pthread_mutex_lock(&stop_mu);
    stop = 1;
    pthread_mutex_unlock(&stop_mu);
    for (j = 1; j <= started; j++) pthread_join(tid[j], NULL);
    pthread_mutex_destroy(&stop_mu);
    for (j = 1; j < 3; j++)
        for (k = j; k > 0 && times[k] < times[k - 1]; k--) { double t = times[k]; times[k] = times[k - 1]; times[k - 1] = t; }
    sec = times[1];
    if (w->nmeasured == w->cap_measured) {
        size_t cap = w->cap_measured ? 2 * w->cap_measured : 64;
        mgt__sim_measured *p = (mgt__sim_measured *)MGT_REALLOC(w->measured, sizeof *p * cap);
        if (p) { w->measured = p; w->cap_measured = cap; }
    }
    if (w->nmeasured < w->cap_measured) {
        mgt__sim_measured *m = &w->measured[w->nmeasured++];
        m->op = op->name;
        memcpy(m->args, op->args, sizeof m->args);
        m->dtype = dtype;
        m->sec = sec;
        mgt__sim_shared_find(w, dtype, op, NULL, m);
    }
    pthread_mutex_unlock(&w->measure_mu);
    return sec;
}
