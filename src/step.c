/* src/step.c - a rank's optimizer step (ZeRO reductions, the global norm, AdamW), the commands rank
   threads run, a step of the run, statistics and events */
/* ---- the optimizer step on a rank: tied embedding, ZeRO reductions, one global norm, AdamW ---- */

/* the slice [lo, hi) of unit u that this DP rank owns (its ZeRO shard, or its share of the norm) */
static void mgt__unit_slice(const mgt__rank *rk, int u, size_t *lo, size_t *hi) {
    size_t s = rk->lay.u[u].size / (size_t)rk->run->plan.replicas;
    *lo = rk->lay.u[u].offset + (size_t)rk->replica * s;
    *hi = *lo + s;
}
/* element `flat` of this rank's slice of unit u, in whichever buffer holds it (elements of elt bytes) */
static void *mgt__slice_at(mgt__rank *rk, void *full, void *shard, int u, size_t flat, size_t elt) {
    size_t lo, hi;
    if (!shard) return (char *)full + flat * elt;
    mgt__unit_slice(rk, u, &lo, &hi);
    return (char *)shard + (rk->lay.u[u].shard_offset + (flat - lo)) * elt;
}
static float *mgt__slice_ptr(mgt__rank *rk, float *full, float *shard, int u, size_t flat) {
    return (float *)mgt__slice_at(rk, full, shard, u, flat, sizeof(float));
}

/* replicated key/value heads: each replica's k and v rows of c_attn hold the gradient of its own
   query heads only; summed over the kv group, in member order like every sum, once the DP
   reduction is done, so every replica updates alike. Under ZeRO each rank sums its slice (the
   group's members own the same slices: their layouts are alike). At most two calls a block: the
   weight's rows, the bias's. */
static mgt_result mgt__kv_grads(mgt__rank *rk) {
    int u, t, zero = rk->run->plan.zero;
    if (rk->kv_g.size == 1) return MGT_OK;
    for (u = 0; u < rk->lay.nu; u++) {
        size_t lo = rk->lay.u[u].offset, hi = lo + rk->lay.u[u].size;
        if (zero >= 1) mgt__unit_slice(rk, u, &lo, &hi);
        for (t = rk->lay.u[u].first_tensor; t < rk->lay.u[u].first_tensor + rk->lay.u[u].ntensors; t++) {
            const mgt__tensor *x = &rk->lay.t[t];
            size_t a = x->offset + x->kv_from, b = x->offset + mgt__tensor_storage(x);
            if (!x->kv_from) continue;
            a = a > lo ? a : lo;
            b = b < hi ? b : hi;
            if (a < b) MGT__TRY(mgt__all_reduce(rk, &rk->kv_g, mgt__slice_ptr(rk, rk->grads, zero >= 2 ? rk->gshard : NULL, u, a), b - a));
        }
    }
    return MGT_OK;
}

/* sequence parallelism: a norm runs on its TP rank's rows only, so its weight's and bias's gradients
   are partial on each TP rank; summed over TP once a step, after the DP reduction (its DP slice
   under ZeRO), in member order, so every TP rank updates them alike (the row-parallel biases need
   no sum: their gradients come from the gathered rows). One call per run of adjacent norm tensors
   (a block's ln_1, its ln_2, the head's ln_f), the padding between them included: zeros. */
static mgt_result mgt__sp_grads(mgt__rank *rk) {
    int u, t, last, zero = rk->run->plan.zero;
    if (!rk->shape.sp) return MGT_OK;
    for (u = 0; u < rk->lay.nu; u++) {
        size_t lo = rk->lay.u[u].offset, hi = lo + rk->lay.u[u].size;
        if (zero >= 1) mgt__unit_slice(rk, u, &lo, &hi);
        last = rk->lay.u[u].first_tensor + rk->lay.u[u].ntensors;
        for (t = rk->lay.u[u].first_tensor; t < last; t++) {
            size_t a, b;
            if (!rk->lay.t[t].sp_sum) continue;
            a = rk->lay.t[t].offset;
            while (t + 1 < last && rk->lay.t[t + 1].sp_sum) t++;
            b = rk->lay.t[t].offset + mgt__tensor_storage(&rk->lay.t[t]);
            a = a > lo ? a : lo;
            b = b < hi ? b : hi;
            if (a < b) MGT__TRY(mgt__all_reduce(rk, &rk->tp_g, mgt__slice_ptr(rk, rk->grads, zero >= 2 ? rk->gshard : NULL, u, a), b - a));
        }
    }
    return MGT_OK;
}

static mgt_result mgt__reduce_gradients(mgt__rank *rk) {
    const mgt_plan *p = &rk->run->plan;
    int u;
    /* the tied embedding: the first stage's and the last stage's wte gradients are one gradient */
    if (p->pp > 1 && p->dims.tied && (rk->first || rk->last)) {
        int t = rk->first ? 0 : mgt__t_head(rk); /* the embedding's wte, or the head's copy */
        MGT__TRY(mgt__all_reduce(rk, &rk->emb_g, mgt__G(rk, t), mgt__tensor_storage(&rk->lay.t[t])));
    }
    if (p->zero == 1) {
        for (u = 0; u < rk->lay.nu; u++) { /* in place: this rank's slice receives the sum */
            size_t lo, hi;
            mgt__unit_slice(rk, u, &lo, &hi);
            MGT__TRY(rk->comm->reduce_scatter(rk->comm, &rk->dp_g, rk->grads + rk->lay.u[u].offset, rk->grads + lo, hi - lo, MGT_F32));
        }
    } else if (p->zero >= 2) { /* the embedding and head units, kept whole for the tied embedding */
        MGT__TRY(mgt__block_grads_flush(rk, rk->gslot)); /* the older pending block first: the same order of additions */
        MGT__TRY(mgt__block_grads_flush(rk, 1 - rk->gslot));
        for (u = 0; u < rk->lay.nu; u++) {
            size_t s = rk->lay.u[u].size / (size_t)p->replicas;
            if (mgt__is_block_unit(rk, u)) continue;
            MGT__TRY(rk->comm->reduce_scatter(rk->comm, &rk->dp_g, rk->unit_grad[u], rk->rs_tmp, s, MGT_F32));
            rk->be->add_inplace(rk->be, rk->gshard + rk->lay.u[u].shard_offset, rk->rs_tmp, s);
        }
    }
    MGT__TRY(mgt__sp_grads(rk));
    return mgt__kv_grads(rk);
}

/* sum of squares of the gradients this rank counts: its DP slice of every unit, TP-replicated
   tensors on TP rank 0 only, replicated key/value rows on their kv group's first rank only, the
   tied copy of wte never: every parameter exactly once */
static double mgt__local_sumsq(mgt__rank *rk) {
    double sum = 0;
    int u, t, k = 0;
    for (u = 0; u < rk->lay.nu; u++) {
        size_t lo, hi;
        mgt__unit_slice(rk, u, &lo, &hi);
        for (t = rk->lay.u[u].first_tensor; t < rk->lay.u[u].first_tensor + rk->lay.u[u].ntensors; t++) {
            const mgt__tensor *x = &rk->lay.t[t];
            size_t a = x->offset > lo ? x->offset : lo, b = x->offset + mgt__tensor_storage(x) < hi ? x->offset + mgt__tensor_storage(x) : hi;
            if (x->kv_from && rk->kv_g.index != 0 && b > x->offset + x->kv_from) b = x->offset + x->kv_from > a ? x->offset + x->kv_from : a; /* replicas: the first */
            if (a >= b || x->tied_copy || (x->tp_replicated && rk->tpr != 0)) continue;
            if (rk->dstat) { /* listed, for one multi-tensor sum */
                rk->ss_x[k] = mgt__slice_ptr(rk, rk->grads, rk->run->plan.zero >= 2 ? rk->gshard : NULL, u, a);
                rk->ss_n[k++] = b - a;
                continue;
            }
            sum += rk->be->sum_squares(rk->be, mgt__slice_ptr(rk, rk->grads, rk->run->plan.zero >= 2 ? rk->gshard : NULL, u, a), b - a);
        }
    }
    if (rk->dstat) rk->be->sum_squares_many(rk->be, rk->dstat, k, rk->ss_x, rk->ss_n); /* into dstat[0], on the device */
    return sum;
}

/* GPU ranks: this rank's sum of squares (dstat[0]) summed over the world in member order on the device,
   and the step's loss (dstat[1]), copied to the host together: the step's one download */
static mgt_result mgt__device_stats(mgt__rank *rk, double *sumsq) {
    double host[2];
    (void)mgt__local_sumsq(rk);
    if (rk->world_g.size > 1) { /* each rank's double as 2 floats of raw bytes, then summed in member order */
        MGT__TRY(rk->comm->all_gather(rk->comm, &rk->world_g, rk->dstat, rk->dstat + 2, 2, MGT_F32));
        rk->be->sum_doubles(rk->be, rk->dstat, rk->dstat + 2, (size_t)rk->world_g.size, 0);
    }
    rk->be->download(rk->be, host, rk->dstat, sizeof host);
    *sumsq = host[0];
    rk->loss_sum = host[1];
    return MGT_OK;
}

/* the tensors of the next adamw_many call */
typedef struct mgt__adamw_batch {
    int count;
    float *param[MGT_ADAMW_BATCH], *m[MGT_ADAMW_BATCH], *v[MGT_ADAMW_BATCH], weight_decay[MGT_ADAMW_BATCH];
    void *copy[MGT_ADAMW_BATCH];
    const float *grad[MGT_ADAMW_BATCH];
    size_t n[MGT_ADAMW_BATCH];
    float lr, b1, b2, eps, grad_scale, bc1, bc2;
} mgt__adamw_batch;
static void mgt__adamw_flush(mgt__rank *rk, mgt__adamw_batch *bt) {
    if (bt->count)
        rk->be->adamw_many(rk->be, bt->count, bt->param, bt->copy, bt->grad, bt->m, bt->v, bt->n, bt->weight_decay, bt->lr, bt->b1, bt->b2, bt->eps,
                           bt->grad_scale, bt->bc1, bt->bc2);
    bt->count = 0;
}

/* AdamW on this rank's part (step: updates done before this one); grad_scale undoes the loss
   scale and applies clipping. 16-bit storage updates the fp32 master weights and writes the compute
   copy rounded from them; ZeRO 1/2 then all-gather the compute copy in the storage type. The tensors
   go to the backend MGT_ADAMW_BATCH at a time (one launch each on a GPU), and before each ZeRO 1/2
   all-gather, which reads what they wrote. */
static mgt_result mgt__optimizer_step(mgt__rank *rk, double lr, double grad_scale, int step) {
    const mgt_config *cfg = &rk->run->plan.cfg;
    const mgt_plan *p = &rk->run->plan;
    double b1 = cfg->train.beta1, b2 = cfg->train.beta2;
    float bc1 = (float)(1.0 - pow(b1, step + 1)), bc2 = (float)(1.0 - pow(b2, step + 1));
    int u, t, sharded = p->zero >= 1;
    mgt__adamw_batch bt;
    bt.count = 0;
    bt.lr = (float)lr; bt.b1 = (float)b1; bt.b2 = (float)b2; bt.eps = (float)cfg->train.eps; bt.grad_scale = (float)grad_scale; bt.bc1 = bc1; bt.bc2 = bc2;
    for (u = 0; u < rk->lay.nu; u++) {
        size_t lo = rk->lay.u[u].offset, hi = lo + rk->lay.u[u].size;
        if (sharded) mgt__unit_slice(rk, u, &lo, &hi);
        for (t = rk->lay.u[u].first_tensor; t < rk->lay.u[u].first_tensor + rk->lay.u[u].ntensors; t++) {
            const mgt__tensor *x = &rk->lay.t[t];
            size_t a = x->offset > lo ? x->offset : lo, b = x->offset + mgt__tensor_storage(x) < hi ? x->offset + mgt__tensor_storage(x) : hi;
            float *param, *grad, *m, *v;
            void *copy;
            if (a >= b) continue;
            copy = mgt__slice_at(rk, rk->params, p->zero >= 3 ? rk->pshard : NULL, u, a, rk->shape.elt);
            if (rk->master) param = mgt__slice_ptr(rk, rk->master, sharded ? rk->master : NULL, u, a);
            else { param = (float *)copy; copy = NULL; } /* fp32: the compute copy is the master */
            grad = mgt__slice_ptr(rk, rk->grads, p->zero >= 2 ? rk->gshard : NULL, u, a);
            m = mgt__slice_ptr(rk, rk->m, sharded ? rk->m : NULL, u, a);
            v = mgt__slice_ptr(rk, rk->v, sharded ? rk->v : NULL, u, a);
            bt.param[bt.count] = param; bt.copy[bt.count] = copy; bt.grad[bt.count] = grad; bt.m[bt.count] = m; bt.v[bt.count] = v;
            bt.n[bt.count] = b - a;
            bt.weight_decay[bt.count++] = x->decay ? (float)cfg->train.weight_decay : 0.0f;
            if (bt.count == MGT_ADAMW_BATCH) mgt__adamw_flush(rk, &bt);
        }
        if (p->zero == 1 || p->zero == 2) { /* every DP rank gets the updated unit back */
            size_t s = rk->lay.u[u].size / (size_t)p->replicas, e = rk->shape.elt;
            mgt__adamw_flush(rk, &bt);
            MGT__TRY(rk->comm->all_gather(rk->comm, &rk->dp_g, (char *)rk->params + lo * e, (char *)rk->params + rk->lay.u[u].offset * e, s, rk->be->dtype));
        }
    }
    mgt__adamw_flush(rk, &bt);
    return MGT_OK;
}

static void mgt__comm_delta(mgt_comm_stats *out, const mgt_comm_stats *now, const mgt_comm_stats *before) {
    int i;
    for (i = 0; i < MGT_COLL_COUNT; i++) {
        out->calls[i] = now->calls[i] - before->calls[i];
        out->bytes[i] = now->bytes[i] - before->bytes[i];
        out->seconds[i] = now->seconds[i] - before->seconds[i];
    }
}

/* the end of a rank's work: a GPU rank waits for its streams (the step's time is the devices' too)
   and reports the first failure of an op or a collective */
/* the warm-up's communicator: every call returns at once and moves nothing, so no NCCL kernel is in
   flight while the libraries' kernels load (see mgt__warm_up) */
static mgt_result mgt__quiet_all_reduce(mgt_comm *c, const mgt_group *g, void *buf, size_t n, int dt) {
    (void)c; (void)g; (void)buf; (void)n; (void)dt;
    return MGT_OK;
}
static mgt_result mgt__quiet_reduce_scatter(mgt_comm *c, const mgt_group *g, const void *s, void *r, size_t n, int dt) {
    (void)c; (void)g; (void)s; (void)r; (void)n; (void)dt;
    return MGT_OK;
}
static mgt_result mgt__quiet_all_gather(mgt_comm *c, const mgt_group *g, const void *s, void *r, size_t n, int dt) {
    (void)c; (void)g; (void)s; (void)r; (void)n; (void)dt;
    return MGT_OK;
}
static mgt_result mgt__quiet_broadcast(mgt_comm *c, const mgt_group *g, void *buf, size_t n, int dt, int root) {
    (void)c; (void)g; (void)buf; (void)n; (void)dt; (void)root;
    return MGT_OK;
}
static mgt_result mgt__quiet_send(mgt_comm *c, int peer, const void *buf, size_t n, int dt) {
    (void)c; (void)peer; (void)buf; (void)n; (void)dt;
    return MGT_OK;
}
static mgt_result mgt__quiet_recv(mgt_comm *c, int peer, void *buf, size_t n, int dt) {
    (void)c; (void)peer; (void)buf; (void)n; (void)dt;
    return MGT_OK;
}
static mgt_result mgt__quiet_sendrecv(mgt_comm *c, int sp, const void *s, int rp, void *r, size_t n, int dt) {
    (void)c; (void)sp; (void)s; (void)rp; (void)r; (void)n; (void)dt;
    return MGT_OK;
}
static mgt_result mgt__quiet_barrier(mgt_comm *c, const mgt_group *g) {
    (void)c; (void)g;
    return MGT_OK;
}
static mgt_comm mgt__quiet_comm(const mgt_comm *real) {
    mgt_comm q;
    memset(&q, 0, sizeof q);
    q.rank = real->rank;
    q.world = real->world;
    q.all_reduce = mgt__quiet_all_reduce;
    q.reduce_scatter = mgt__quiet_reduce_scatter;
    q.all_gather = mgt__quiet_all_gather;
    q.broadcast = mgt__quiet_broadcast;
    q.send = mgt__quiet_send;
    q.recv = mgt__quiet_recv;
    q.sendrecv = mgt__quiet_sendrecv;
    q.barrier = mgt__quiet_barrier;
    return q; /* defer and sync NULL: every call is complete when it returns */
}
static int mgt__comm_is_quiet(const mgt_comm *c) { return c->all_reduce == mgt__quiet_all_reduce; }

static mgt_result mgt__settle(mgt__rank *rk) {
    const mgt_run *r = rk->run;
    mgt_result comm = r->world_api->settle && !mgt__comm_is_quiet(rk->comm) ? r->world_api->settle(r->world, rk->comm) : MGT_OK;
    const char *e;
    if (rk->be->finish) rk->be->finish(rk->be);
    e = rk->be->error ? rk->be->error(rk->be) : NULL;
    /* the rank's own first fault comes first: a failed kernel also fails the communication after it */
    return e ? mgt__fail(MGT_ERROR_DEVICE, "%s", e) : comm;
}

/* one training step on this rank: the schedule, the reductions, the norm, the update. The loss is
   multiplied by the run's loss scale (1 but in fp16) before backward and the gradients divided by
   it in the update. A non-finite global norm (the same number on every rank) skips the update on
   every rank alike; the run decides what follows. */
/* update 0: the warm-up, a step without the optimizer (weights, moments and totals untouched) */
static mgt_result mgt__rank_train_step(mgt__rank *rk, const uint32_t *rows, int update) {
    struct mgt_run *run = rk->run;
    const mgt_plan *p = &run->plan;
    double t0 = mgt_now(), sumsq, norm, lr, clip = 1.0, loss_scale = run->loss_scale;
    float grad_scale = (float)loss_scale / ((float)run->plan.cfg.train.global_batch * (float)run->plan.cfg.model.seq_len);
    mgt_comm_stats before = rk->comm->stats;
    int u;
    rk->loss_sum = 0;
    rk->ring_s = 0; /* a forward-only pass since the last step used the ring too */
    if (rk->dstat) rk->be->zero(rk->be, rk->dstat, 2 * sizeof(double));
    if (p->zero < 2) rk->be->zero(rk->be, rk->grads, sizeof(float) * rk->lay.size);
    else {
        rk->be->zero(rk->be, rk->gshard, sizeof(float) * rk->shard);
        for (u = 0; u < rk->lay.nu; u++)
            if (!mgt__is_block_unit(rk, u)) rk->be->zero(rk->be, rk->unit_grad[u], sizeof(float) * rk->lay.u[u].size);
    }
    MGT__TRY(mgt__schedule(rk, rows, grad_scale));
    MGT__TRY(mgt__reduce_gradients(rk));
    MGT__TRY(mgt__comm_sync(rk, -1)); /* the deferred buckets and prefetches have arrived */
    if (rk->dstat) MGT__TRY(mgt__device_stats(rk, &sumsq));
    else {
        sumsq = mgt__local_sumsq(rk);
        if (rk->world_g.size > 1) MGT__TRY(mgt__sum_over(rk, &rk->world_g, &sumsq));
    }
    norm = sqrt(sumsq) / loss_scale;
    rk->norm = norm;
    rk->skipped = !isfinite(norm);
    if (!update) {
        MGT__TRY(mgt__settle(rk));
        memset(&rk->comm->stats, 0, sizeof rk->comm->stats); /* the steps' statistics start at zero */
        return MGT_OK;
    }
    if (!rk->skipped) {
        lr = mgt__lr_at(&run->plan.cfg, run->step);
        if (run->plan.cfg.train.grad_clip > 0 && norm > run->plan.cfg.train.grad_clip) clip = run->plan.cfg.train.grad_clip / (norm + 1e-6);
        MGT__TRY(mgt__optimizer_step(rk, lr, clip / loss_scale, run->step - run->skipped));
    }
    MGT__TRY(mgt__settle(rk));
    rk->step_s = mgt_now() - t0;
    mgt__comm_delta(&rk->step_comm, &rk->comm->stats, &before);
    /* the bubble: waiting for pipeline peers, the time in sends and receives but the ring of context
       parallelism's, which is communication. A communicator that times its calls when the step ends
       (NCCL) cannot tell them apart: with cp > 1 they all count as communication there */
    rk->bubble_s = rk->shape.cp == 1 ? rk->step_comm.seconds[MGT_COLL_SEND_RECV] : rk->comm->sync ? 0 : rk->step_comm.seconds[MGT_COLL_SEND_RECV] - rk->ring_s;
    rk->comm_s = 0;
    for (u = 0; u < MGT_COLL_COUNT; u++) rk->comm_s += rk->step_comm.seconds[u];
    rk->comm_s -= rk->bubble_s;
    rk->total_comm_s += rk->comm_s;
    rk->total_bubble_s += rk->bubble_s;
    rk->total_compute_s += rk->step_s - rk->comm_s - rk->bubble_s;
    return MGT_OK;
}

/* forward only over rows (count micro-batches of this DP rank): the summed loss on the last stage */
static mgt_result mgt__rank_forward_only(mgt__rank *rk, const uint32_t *rows, int micro_batches) {
    int m;
    rk->loss_sum = 0;
    if (rk->dstat) rk->be->zero(rk->be, rk->dstat + 1, sizeof(double));
    if (rk->shape.chunks > 1) /* interleaved: through the chunks in their order (validation's micro_batches are the step's) */
        MGT__TRY(mgt__run_pipe_actions(rk, rk->pipe[1], rk->npipe[1], rows, 0.0f));
    else
        for (m = 0; m < micro_batches; m++) MGT__TRY(mgt__micro_forward(rk, rows, m, 0.0f, 0, 1));
    if (rk->dstat && rk->last) rk->be->download(rk->be, &rk->loss_sum, rk->dstat + 1, sizeof(double)); /* one download */
    return mgt__settle(rk);
}



/* the rank of a replica (dpr x cp + cpr), TP rank and stage */
static mgt__rank *mgt__rank_at(mgt_run *r, int replica, int tpr, int ppr) { return &r->ranks[mgt_rank_at(replica, tpr, ppr, r->plan.replicas, r->plan.tp)]; }

/* the rank's communicator from its world, made on its own thread beside the others' (NCCL's group
   splits are collective) */
static mgt_result mgt__rank_connect(mgt__rank *rk) {
    mgt_run *r = rk->run;
    const mgt_group *groups[7];
    int i, s, dt = rk->be->dtype;
    char *buf;
    groups[0] = &rk->tp_g; groups[1] = &rk->dp_g; groups[2] = &rk->pp_g; groups[3] = &rk->emb_g; groups[4] = &rk->world_g; groups[5] = &rk->kv_g; groups[6] = &rk->cp_g;
    MGT__TRY(r->world_api->comm(r->world, rk->rank, rk->be, groups, 7, &rk->comm));
    if (!r->world_api->on_gpus) return MGT_OK;
    /* NCCL connects on first use, allocating and synchronising: one collective on every group and a
       send/receive with each pipeline neighbour and around the context-parallel ring, now, so that no
       step does anything for the first time */
    buf = (char *)rk->acts[0].resid[0]; /* at least two elements of the storage type */
    for (i = 0; i < 7; i++)
        if (groups[i]->size > 1 && groups[i]->ranks[groups[i]->index] == rk->rank) MGT__TRY(rk->comm->barrier(rk->comm, groups[i]));
    for (s = 0; s + 1 < r->plan.pp; s++) /* pairs in stage order: no cycle of waits */
        if (rk->ppr == s || rk->ppr == s + 1) {
            int peer = rk->pp_g.ranks[rk->ppr == s ? s + 1 : s];
            MGT__TRY(rk->comm->sendrecv(rk->comm, peer, buf, peer, buf + rk->be->elt, 1, dt));
        }
    if (rk->shape.chunks > 1 && r->plan.pp > 2 && (rk->first || rk->last)) { /* interleaved: the last stage also sends to the first, last */
        int peer = rk->pp_g.ranks[rk->first ? r->plan.pp - 1 : 0];
        MGT__TRY(rk->comm->sendrecv(rk->comm, peer, buf, peer, buf + rk->be->elt, 1, dt));
    }
    if (rk->cp_g.size > 1) /* the ring of attention (a CP group is one stage's: after the pipeline's pairs, no cycle of waits) */
        MGT__TRY(rk->comm->sendrecv(rk->comm, mgt__cp_next(rk), buf, mgt__cp_prev(rk), buf + rk->be->elt, 1, dt));
    if (r->world_api->settle) MGT__TRY(r->world_api->settle(r->world, rk->comm));
    memset(&rk->comm->stats, 0, sizeof rk->comm->stats); /* the steps' statistics start at zero */
    return MGT_OK;
}

static void mgt__enter(mgt_backend *be) { if (be->enter) be->enter(be); }

static mgt_result mgt__rank_run_cmd(mgt__rank *rk) {
    mgt_run *r = rk->run;
    mgt_result res;
    mgt__enter(rk->be);
    if (r->cmd == MGT__CMD_CONNECT) return mgt__rank_connect(rk);
    if (r->cmd != MGT__CMD_STEP && r->cmd != MGT__CMD_FORWARD && r->cmd != MGT__CMD_WARM_UP) return MGT_OK;
    /* a step: nothing is made or waited for without a deadline until its end (2: the warm-up step) */
    if (rk->be->step) rk->be->step(rk->be, r->cmd == MGT__CMD_WARM_UP ? 2 : 1);
    if (r->cmd == MGT__CMD_FORWARD) res = mgt__rank_forward_only(rk, r->cmd_rows, r->cmd_micro);
    else if (r->cmd == MGT__CMD_WARM_UP) {
        mgt_comm *real = rk->comm, quiet = mgt__quiet_comm(real);
        rk->comm = &quiet;
        res = mgt__rank_train_step(rk, r->cmd_rows, 0);
        rk->comm = real;
    } else res = mgt__rank_train_step(rk, r->cmd_rows, 1);
    if (rk->be->step) rk->be->step(rk->be, 0);
    return res;
}

static void *mgt__rank_main(void *arg) {
    mgt__rank *rk = (mgt__rank *)arg;
    mgt_run *r = rk->run;
    unsigned long seen = 0;
    for (;;) {
        int cmd;
        pthread_mutex_lock(&r->mu);
        while (r->generation == seen) pthread_cond_wait(&r->cv_cmd, &r->mu);
        seen = r->generation;
        cmd = r->cmd;
        pthread_mutex_unlock(&r->mu);
        if (cmd == MGT__CMD_QUIT) return NULL;
        rk->result = mgt__rank_run_cmd(rk);
        if (rk->result != MGT_OK) {
            mgt__strlcpy(rk->error, mgt_last_error(), sizeof rk->error);
            /* peers waiting on this rank fail instead of hanging */
            r->world_api->rank_failed(r->world, rk->comm);
        }
        pthread_mutex_lock(&r->mu);
        if (--r->pending == 0) pthread_cond_signal(&r->cv_done);
        pthread_mutex_unlock(&r->mu);
    }
}

/* under MPI, after each command: what the driver reads of a rank (its loss, norm, times, memory,
   communication, result), from every process to every process, so each one's driver sees the
   whole world as a single process's does */
typedef struct mgt__rank_report {
    double loss_sum, norm, step_s, comm_s, bubble_s, total_compute_s, total_comm_s, total_bubble_s;
    mgt_comm_stats step_comm, comm;
    size_t mem_current[MGT_MEM_COUNT], mem_peak[MGT_MEM_COUNT];
    int skipped, result, stop; /* stop: its process asked for one */
    char error[512];
} mgt__rank_report;

static mgt_result mgt__share_ranks(mgt_run *r) {
    int per = r->rank_hi - r->rank_lo, i;
    size_t bytes = sizeof(mgt__rank_report) * (size_t)per;
    mgt__rank_report *all, *mine;
    char why[512];
    if (r->processes == 1) return MGT_OK; /* one process has every rank's */
    all = (mgt__rank_report *)MGT_MALLOC(bytes * (size_t)r->processes);
    if (!all) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    for (i = r->rank_lo; i < r->rank_hi; i++) /* a failed rank fails the run now; its process ends the job */
        if (r->ranks[i].result != MGT_OK) { MGT_FREE(all); return MGT_OK; }
    mine = all + r->rank_lo;
    memset(mine, 0, bytes);
    for (i = 0; i < per; i++) {
        const mgt__rank *rk = &r->ranks[r->rank_lo + i];
        mgt__rank_report *o = &mine[i];
        o->loss_sum = rk->loss_sum;
        o->norm = rk->norm;
        o->step_s = rk->step_s;
        o->comm_s = rk->comm_s;
        o->bubble_s = rk->bubble_s;
        o->total_compute_s = rk->total_compute_s;
        o->total_comm_s = rk->total_comm_s;
        o->total_bubble_s = rk->total_bubble_s;
        o->step_comm = rk->step_comm;
        o->comm = rk->comm->stats;
        memcpy(o->mem_current, rk->be->mem_current, sizeof o->mem_current);
        memcpy(o->mem_peak, rk->be->mem_peak, sizeof o->mem_peak);
        o->skipped = rk->skipped;
        o->result = rk->result;
        o->stop = r->stop_asked;
        mgt__strlcpy(o->error, rk->error, sizeof o->error);
    }
    { /* to and from every other process, against parallel.timeout_s (a lost process is named) */
        mgt__mpi_world *w = r->procs;
        int n = 0, p, *peer = (int *)MGT_MALLOC(sizeof(int) * 2 * (size_t)w->processes);
        void **req = (void **)MGT_MALLOC(sizeof(void *) * 2 * (size_t)w->processes);
        char who[48];
        mgt_result res = peer && req ? MGT_OK : mgt__fail(MGT_ERROR_MEMORY, "out of memory");
        for (p = 0; p < w->processes && res == MGT_OK; p++) {
            if (p == w->process) continue;
            peer[n] = p * per;
            if (!(req[n++] = w->api->isend(mine, bytes, p, 0, MGT_MPI_STARTUP, why, sizeof why))) res = mgt__pcomm_fail(w, why);
            peer[n] = p * per;
            if (res == MGT_OK && !(req[n++] = w->api->irecv(all + (size_t)p * per, bytes, p, 0, MGT_MPI_STARTUP, why, sizeof why)))
                res = mgt__pcomm_fail(w, why);
        }
        snprintf(who, sizeof who, "process %d (on %s)", w->process, w->hosts[w->process]);
        if (res == MGT_OK) res = mgt__pcomm_wait(w, who, req, peer, n, "sharing the ranks' results after a step");
        else
            while (n-- > 0) if (req[n]) w->api->cancel(req[n]);
        MGT_FREE(peer);
        MGT_FREE(req);
        if (res != MGT_OK) { MGT_FREE(all); return res; }
    }
    for (i = 0; i < r->plan.world; i++) {
        mgt__rank *rk = &r->ranks[i];
        const mgt__rank_report *o = &all[i];
        if (o->stop) r->stop_agreed = 1;
        if (i >= r->rank_lo && i < r->rank_hi) continue;
        rk->loss_sum = o->loss_sum;
        rk->norm = o->norm;
        rk->step_s = o->step_s;
        rk->comm_s = o->comm_s;
        rk->bubble_s = o->bubble_s;
        rk->total_compute_s = o->total_compute_s;
        rk->total_comm_s = o->total_comm_s;
        rk->total_bubble_s = o->total_bubble_s;
        rk->step_comm = o->step_comm;
        rk->comm->stats = o->comm;
        memcpy(rk->be->mem_current, o->mem_current, sizeof o->mem_current);
        memcpy(rk->be->mem_peak, o->mem_peak, sizeof o->mem_peak);
        rk->skipped = o->skipped;
        rk->result = (mgt_result)o->result;
        if (o->result != MGT_OK)
            snprintf(rk->error, sizeof rk->error, "(process %d on %s) %s", i / per, r->procs->hosts[i / per], o->error);
    }
    MGT_FREE(all);
    return MGT_OK;
}

/* a rank of another process, as this one's driver sees it: its coordinates and what it reports */
static void mgt__shadow_rank(mgt_run *r, mgt__rank *rk, int index) {
    const mgt_plan *p = &r->plan;
    memset(rk, 0, sizeof *rk); /* run stays NULL: nothing of it is freed */
    mgt__rank_locate(rk, p, index);
    rk->device = r->world_api->on_gpus ? index % (r->rank_hi - r->rank_lo) : -1; /* its process's GPU, as this process's ranks have theirs */
    rk->be = &r->shadow_be[index];
    rk->be->name = "cpu";
    rk->comm = &r->shadow_comm[index];
    rk->comm->rank = index;
    rk->comm->world = p->world;
}

/* rank i's error, said as rank i's (once: a message that names the rank already is kept as it is) */
static mgt_result mgt__rank_fail(const mgt_run *r, int i) {
    char tag[32];
    int n = snprintf(tag, sizeof tag, "rank %d", i);
    const char *e = r->ranks[i].error;
    if (!strncmp(e, tag, (size_t)n) && (e[n] == ' ' || e[n] == ':')) return mgt__fail(r->ranks[i].result, "%s", e);
    return mgt__fail(r->ranks[i].result, "rank %d: %s", i, e);
}

/* runs the command on every rank (on the calling thread when there is one rank) and returns the
   first error, with the failing rank's message */
static mgt_result mgt__run_cmd(mgt_run *r, int cmd, const uint32_t *rows, int micro) {
    int i;
    r->cmd = cmd;
    r->cmd_rows = rows;
    r->cmd_micro = micro;
    if (r->plan.world == 1) {
        r->ranks[0].result = mgt__rank_run_cmd(&r->ranks[0]);
        return r->ranks[0].result;
    }
    pthread_mutex_lock(&r->mu);
    r->pending = r->rank_hi - r->rank_lo;
    r->generation++;
    pthread_cond_broadcast(&r->cv_cmd);
    while (r->pending) pthread_cond_wait(&r->cv_done, &r->mu);
    pthread_mutex_unlock(&r->mu);
    MGT__TRY(mgt__share_ranks(r));
    for (i = 0; i < r->plan.world; i++) /* a root cause rather than its echo on the peers */
        if (r->ranks[i].result != MGT_OK && r->ranks[i].result != MGT_ERROR_COMM) return mgt__rank_fail(r, i);
    for (i = 0; i < r->plan.world; i++)
        if (r->ranks[i].result != MGT_OK) return mgt__rank_fail(r, i);
    return MGT_OK;
}

/* the summed loss of the last stage, over DP and CP ranks in order: the same number whatever the layout */
static double mgt__gather_loss(mgt_run *r) {
    double sum = 0;
    int d;
    for (d = 0; d < r->plan.replicas; d++) sum += mgt__rank_at(r, d, 0, r->plan.pp - 1)->loss_sum;
    return sum;
}


MGTDEF const char *mgt_state_name(int state) {
    static const char *names[] = {"starting", "running", "paused", "evaluating", "checkpointing", "finished", "failed"};
    return state >= 0 && state <= MGT_STATE_FAILED ? names[state] : "?";
}

/* an event for readers (and the logger): validations, checkpoints, warnings */
MGT__PRINTF(3, 4) static void mgt__event(mgt_run *r, int level, const char *fmt, ...) {
    mgt_event e;
    va_list ap;
    memset(&e, 0, sizeof e);
    e.step = r->step;
    e.level = level;
    e.time_s = mgt_now() - r->created_s;
    va_start(ap, fmt);
    vsnprintf(e.text, sizeof e.text, fmt, ap);
    va_end(ap);
    mgt__log(level, "%s", e.text);
    pthread_mutex_lock(&r->stats_mu);
    if (r->events_n == r->events_cap) {
        int cap = r->events_cap ? 2 * r->events_cap : 64;
        mgt_event *p = (mgt_event *)MGT_REALLOC(r->events, sizeof *p * (size_t)cap);
        if (p) { r->events = p; r->events_cap = cap; }
    }
    if (r->events_n < r->events_cap) r->events[r->events_n++] = e;
    pthread_mutex_unlock(&r->stats_mu);
}

static double mgt__flops_per_token(const mgt_run *r) {
    return 6.0 * (double)r->plan.params + 12.0 * r->plan.cfg.model.n_layer * (double)r->plan.cfg.model.seq_len * r->plan.cfg.model.d_model;
}

/* MFU cannot pass 100%: a step faster than the peak MFU is reckoned against (a measured sgemm, taken
   on a busy machine or on one GEMM shape, or the preset's) proves the peak low. From then on MFU is
   against the fastest step of the run, and the first such step says so in an event. */
static void mgt__peak_check(mgt_run *r) {
    double stated = r->plan.cfg.parallel.peak_gflops > 0 ? r->plan.cfg.parallel.peak_gflops : r->peak_per_rank, now;
    if (stated <= 0 || r->step_s <= 0) return;
    now = (double)r->plan.cfg.train.global_batch * r->plan.cfg.model.seq_len / r->step_s * mgt__flops_per_token(r) * 1e-9 / r->plan.world;
    if (now <= stated || now <= r->peak_seen) return;
    if (r->peak_seen <= 0)
        mgt__event(r, MGT_LOG_WARN, "step %d ran at %.1f GFLOP/s per rank, above the peak MFU was reckoned against (%.1f, %s): MFU is against "
                   "the fastest step from now on", r->step, now, stated, r->plan.cfg.parallel.peak_gflops > 0 ? "[parallel] peak_gflops" : r->peak_source);
    r->peak_seen = now;
    snprintf(r->peak_seen_source, sizeof r->peak_seen_source, "the fastest step of this run, step %d", r->step);
}


/* GPU ranks, before their first step or forward pass: one untimed step without the optimizer or
   communication. CUDA loads a kernel at its first launch (lazy loading, the default since 12.2),
   which may synchronise the device while NCCL kernels spin waiting for peers that are loading too;
   mgt's own kernels are loaded when the backend is made, but cuBLAS's and cuDNN's can only be loaded
   by running them, which the warm-up does (step(be, 2): the step's rules, but loads allowed and
   waits of 10 x timeout_s, at least 120 s), so that no step loads anything. Its communicator is
   quiet (every call returns at once, moving nothing): no NCCL kernel is in flight while a kernel
   loads, and the values it computes (from unreduced, unreceived buffers) are thrown away. NCCL
   itself is connected already (mgt__rank_connect). */
static mgt_result mgt__warm_up(mgt_run *r, const uint32_t *rows) {
    double t0 = mgt_now();
    if (!r->world_api->on_gpus || r->warmed_up) return MGT_OK;
    r->warmed_up = 1;
    MGT__TRY(mgt__run_cmd(r, MGT__CMD_WARM_UP, rows, 0));
    mgt__event(r, MGT_LOG_INFO, "warm-up step (not counted): %.2f s, the libraries' kernels loaded", mgt_now() - t0);
    return MGT_OK;
}

static void mgt__fill_rank_stats(mgt_run *r, int i, mgt_rank_stats *o) {
    mgt__rank *rk = &r->ranks[i];
    int c;
    memset(o, 0, sizeof *o);
    o->step = r->step;
    o->rank = i;
    o->dp = rk->dpr;
    o->tp = rk->tpr;
    o->pp = rk->ppr;
    o->first_block = rk->l0;
    o->last_block = mgt__stage_layer(&r->plan, rk->ppr, rk->nblocks - 1); /* with pp_virtual > 1 the blocks between are not all its own */
    if (rk->device >= 0) snprintf(o->device, sizeof o->device, "cuda:%d", rk->device);
    else mgt__strlcpy(o->device, rk->be->name, sizeof o->device);
    o->gpu_util = rk->gpu.util_pct;
    o->gpu_power_w = rk->gpu.power_w;
    o->gpu_temp_c = rk->gpu.temp_c;
    o->gpu_mem_used = rk->gpu.memory_used;
    o->gpu_mem_total = rk->gpu.memory_total;
    o->has_gpu_util = rk->gpu.has_util;
    o->has_gpu_power = rk->gpu.has_power;
    o->has_gpu_temp = rk->gpu.has_temp;
    o->has_gpu_mem = rk->gpu.has_memory;
    o->step_s = rk->step_s;
    o->comm_s = rk->comm_s;
    o->bubble_s = rk->bubble_s;
    o->compute_s = rk->step_s - rk->comm_s - rk->bubble_s;
    o->total_compute_s = rk->total_compute_s;
    o->total_comm_s = rk->total_comm_s;
    o->total_bubble_s = rk->total_bubble_s;
    for (c = 0; c < MGT_COLL_COUNT; c++) {
        o->calls[c] = rk->step_comm.calls[c];
        o->bytes[c] = rk->step_comm.bytes[c];
        o->seconds[c] = rk->step_comm.seconds[c];
        o->total_calls[c] = rk->comm->stats.calls[c];
        o->total_bytes[c] = rk->comm->stats.bytes[c];
        o->total_seconds[c] = rk->comm->stats.seconds[c];
    }
    memcpy(o->mem_current, rk->be->mem_current, sizeof o->mem_current);
    memcpy(o->mem_peak, rk->be->mem_peak, sizeof o->mem_peak);
}

/* after each step: the run's statistics into the history, the ranks' into their table, and
   warnings about what a person would want to know */
static void mgt__publish(mgt_run *r) {
    mgt_stats st;
    int i, slowest = 0;
    double mean = 0;
    mgt_run_stats(r, &st);
    if (r->world_api->read_gpu && mgt_now() - r->gpu_read_s >= 0.5) { /* NVML's counters move slower than steps */
        for (i = r->rank_lo; i < r->rank_hi; i++) r->world_api->read_gpu(r->world, r->ranks[i].device, &r->ranks[i].gpu);
        r->gpu_read_s = mgt_now();
    }
    pthread_mutex_lock(&r->stats_mu);
    if (!r->history) r->history = (mgt_stats *)MGT_MALLOC(sizeof(mgt_stats) * MGT__HISTORY);
    if (r->history) r->history[r->history_n++ % MGT__HISTORY] = st;
    for (i = 0; i < r->plan.world; i++) mgt__fill_rank_stats(r, i, &r->rank_stats[i]);
    pthread_mutex_unlock(&r->stats_mu);
    for (i = 0; i < r->plan.world; i++) {
        double busy = r->ranks[i].step_s - r->ranks[i].comm_s - r->ranks[i].bubble_s;
        mean += busy / r->plan.world;
        if (busy > r->ranks[slowest].step_s - r->ranks[slowest].comm_s - r->ranks[slowest].bubble_s) slowest = i;
    }
    if (r->history && r->history_n >= 21) { /* a loss spike: well above the mean of the 20 steps before */
        double m = 0;
        for (i = r->history_n - 21; i < r->history_n - 1; i++) m += r->history[i % MGT__HISTORY].loss / 20.0;
        if (isfinite(st.loss) && st.loss > 1.5 * m && st.loss > m + 0.5) mgt__event(r, MGT_LOG_WARN, "step %d: loss spike: %.4f after a mean of %.4f", st.step, st.loss, m);
    }
    if (r->plan.world > 1 && mean > 0.01) {
        double busy = r->ranks[slowest].step_s - r->ranks[slowest].comm_s - r->ranks[slowest].bubble_s;
        if (busy > 1.5 * mean)
            mgt__event(r, MGT_LOG_WARN, "step %d: rank %d computed for %.1f ms, %.1fx the mean of %.1f ms (warned above 1.5x)", st.step, slowest, busy * 1e3,
                       busy / mean, mean * 1e3);
    }
}

MGTDEF void mgt_run_snapshot(const mgt_run *r, mgt_snapshot *s) {
    mgt_run *w = (mgt_run *)r; /* the lock is the only thing touched */
    int i, from;
    if (!s) return;
    s->state = MGT_STATE_FAILED;
    s->history_first = s->history_from;
    s->history_n = s->ranks_n = s->events_n = 0;
    if (!r) return;
    pthread_mutex_lock(&w->stats_mu);
    s->state = r->state;
    s->time_s = mgt_now() - r->created_s;
    from = s->history_from < r->history_n - MGT__HISTORY ? r->history_n - MGT__HISTORY : s->history_from; /* overwritten: the oldest kept */
    if (from < 0) from = 0;
    s->history_first = from;
    for (; s->history && from + s->history_n < r->history_n && s->history_n < s->history_max; s->history_n++)
        s->history[s->history_n] = r->history[(from + s->history_n) % MGT__HISTORY];
    s->ranks_n = r->plan.world;
    for (i = 0; s->ranks && i < s->ranks_max && i < r->plan.world; i++) s->ranks[i] = r->rank_stats[i];
    for (; s->events && s->events_from >= 0 && s->events_from + s->events_n < r->events_n && s->events_n < s->events_max; s->events_n++)
        s->events[s->events_n] = r->events[s->events_from + s->events_n];
    pthread_mutex_unlock(&w->stats_mu);
}
MGTDEF int mgt_run_state(const mgt_run *r) {
    int s;
    mgt_run *w = (mgt_run *)r;
    if (!r) return MGT_STATE_FAILED;
    pthread_mutex_lock(&w->stats_mu);
    s = r->state;
    pthread_mutex_unlock(&w->stats_mu);
    return s;
}
MGTDEF void mgt_run_set_state(mgt_run *r, int state) {
    if (!r) return;
    pthread_mutex_lock(&r->stats_mu);
    r->state = state;
    pthread_mutex_unlock(&r->stats_mu);
}

/* One step on every rank. A non-finite gradient norm skips the update on all ranks (they computed
   the same norm): fp16 halves the loss scale, and doubles it after loss_scale_window finite steps;
   bf16 and fp32 fail after max_skipped skipped steps in a row, fp16 when the scale would fall below 1.
   A skipped step still consumes its batch and counts as a step (the schedule and the data order do
   not depend on skips); AdamW's bias correction counts the updates. */
static mgt_result mgt__train_step(mgt_run *r, const uint32_t *rows) {
    double t0 = mgt_now();
    int GB = r->plan.cfg.train.global_batch, T = r->plan.cfg.model.seq_len, fp16 = r->dtype == MGT_F16;
    MGT__TRY(mgt__warm_up(r, rows));
    t0 = mgt_now();
    if (mgt_run_state(r) == MGT_STATE_STARTING) mgt_run_set_state(r, MGT_STATE_RUNNING);
    MGT__TRY(mgt__run_cmd(r, MGT__CMD_STEP, rows, 0));
    r->loss = mgt__gather_loss(r) / ((double)GB * T);
    r->grad_norm = r->ranks[0].norm;
    r->lr = mgt__lr_at(&r->plan.cfg, r->step);
    r->last_skipped = r->ranks[0].skipped;
    if (!r->last_skipped && !isfinite(r->loss)) {
        mgt__event(r, MGT_LOG_WARN, "step %d: loss %g is not finite", r->step + 1, r->loss);
        return mgt__fail(MGT_ERROR_NUMERIC, "step %d: loss %g with a finite gradient norm (lower [train] lr or raise warmup)", r->step + 1, r->loss);
    }
    r->step++;
    r->tokens_seen += (long long)GB * T;
    r->step_s = mgt_now() - t0;
    r->elapsed_s += r->step_s;
    mgt__peak_check(r);
    if (r->last_skipped) {
        double before = r->loss_scale;
        r->skipped++;
        r->skipped_in_row++;
        r->good_steps = 0;
        if (fp16) r->loss_scale = before / 2;
        mgt__publish(r);
        if (fp16)
            mgt__event(r, MGT_LOG_WARN, "step %d: gradient norm %g at loss scale %g: update skipped, loss scale now %g", r->step, r->grad_norm, before, r->loss_scale);
        else
            mgt__event(r, MGT_LOG_WARN, "step %d: gradient norm %g: update skipped (%d in a row)", r->step, r->grad_norm, r->skipped_in_row);
        if (fp16 && r->loss_scale < 1)
            return mgt__fail(MGT_ERROR_NUMERIC, "step %d: the gradients are not finite even at loss scale 1 (%d steps skipped in a row); lower [train] lr or raise warmup",
                             r->step, r->skipped_in_row);
        if (!fp16 && r->skipped_in_row >= r->plan.cfg.precision.max_skipped)
            return mgt__fail(MGT_ERROR_NUMERIC, "step %d: %d steps in a row with a non-finite gradient norm ([precision] max_skipped = %d); lower [train] lr or raise warmup",
                             r->step, r->skipped_in_row, r->plan.cfg.precision.max_skipped);
        return MGT_OK;
    }
    r->skipped_in_row = 0;
    if (fp16 && ++r->good_steps >= r->plan.cfg.precision.loss_scale_window && r->loss_scale < ldexp(1.0, 100)) { /* far below FLT_MAX: the float scale stays finite */
        r->loss_scale *= 2;
        r->good_steps = 0;
        mgt__event(r, MGT_LOG_INFO, "step %d: %d steps without overflow: loss scale now %g", r->step, r->plan.cfg.precision.loss_scale_window, r->loss_scale);
    }
    mgt__publish(r);
    return MGT_OK;
}

/* mean loss over `count` global batches of rows (count x global_batch, T+1), without training */
static mgt_result mgt__forward_loss(mgt_run *r, const uint32_t *rows, int count, double *loss) {
    int j, GB = r->plan.cfg.train.global_batch, T = r->plan.cfg.model.seq_len;
    double sum = 0;
    MGT__TRY(mgt__warm_up(r, rows));
    for (j = 0; j < count; j++) {
        MGT__TRY(mgt__run_cmd(r, MGT__CMD_FORWARD, rows + (size_t)j * GB * (T + 1), r->plan.micro_steps));
        sum += mgt__gather_loss(r);
    }
    *loss = sum / ((double)count * GB * T);
    return MGT_OK;
}

MGTDEF int mgt_run_profile(mgt_run *r, int on, double *family_seconds) {
    int i, steps = 0;
    if (family_seconds) memset(family_seconds, 0, sizeof(double) * MGT_SIM_FAMILIES);
    if (!r) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_profile: run is NULL"), -1;
    for (i = r->rank_lo; i < r->rank_hi; i++) {
        mgt_backend *be = r->ranks[i].be;
        int n;
        if (!be || !be->profile) continue;
        mgt__enter(be);
        n = be->profile(be, on, i == 0 ? family_seconds : NULL);
        if (n < 0) return mgt__fail(MGT_ERROR_DEVICE, "mgt_run_profile: rank %d: %s", i, be->error && be->error(be) ? be->error(be) : "failed"), -1;
        if (i == 0) steps = n;
    }
    return steps;
}

MGTDEF mgt_result mgt_run_loss(mgt_run *r, const uint32_t *rows, int count, double *loss) {
    if (!r || !rows || !loss || count < 1 || r->inference) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_loss: run, rows, count >= 1 and loss are required");
    return mgt__forward_loss(r, rows, count, loss);
}

MGTDEF mgt_result mgt_run_eval(mgt_run *r, double *val_loss) {
    int j, n, T, GB, state;
    uint32_t *rows;
    mgt_result res;
    if (!r || !val_loss) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_eval: run and val_loss are required");
    if (!r->has_val) return mgt__fail(MGT_ERROR_CONFIG, "[data] val is empty: set it to a validation shard");
    T = r->plan.cfg.model.seq_len;
    GB = r->plan.cfg.train.global_batch;
    n = r->plan.cfg.train.eval_batches * GB; /* the same sequences whatever the layout */
    rows = (uint32_t *)MGT_MALLOC(sizeof(uint32_t) * (size_t)n * (size_t)(T + 1));
    if (!rows) return mgt__fail(MGT_ERROR_MEMORY, "out of memory for validation batches");
    for (j = 0; j < n; j++) mgt__loader_sequence(&r->val, MGT__STREAM_VAL, 0, (uint64_t)j, rows + (size_t)j * (size_t)(T + 1));
    state = mgt_run_state(r);
    mgt_run_set_state(r, MGT_STATE_EVALUATING);
    res = mgt__forward_loss(r, rows, r->plan.cfg.train.eval_batches, &r->val_loss);
    mgt_run_set_state(r, state);
    MGT_FREE(rows);
    MGT__TRY(res);
    r->has_val_loss = 1;
    r->val_step = r->step;
    *val_loss = r->val_loss;
    pthread_mutex_lock(&r->stats_mu); /* the step was published before this validation: again, with it */
    if (r->history && r->history_n > 0 && r->history[(r->history_n - 1) % MGT__HISTORY].step == r->step) {
        mgt_stats st = r->history[(r->history_n - 1) % MGT__HISTORY];
        st.val_loss = r->val_loss;
        st.has_val_loss = 1;
        st.val_step = r->step;
        r->history[r->history_n++ % MGT__HISTORY] = st;
    }
    pthread_mutex_unlock(&r->stats_mu);
    mgt__event(r, MGT_LOG_INFO, "step %d: val loss %.4f", r->step, r->val_loss);
    return MGT_OK;
}

MGTDEF void mgt_run_stats(const mgt_run *r, mgt_stats *st) {
    int i, c;
    if (!st) return;
    memset(st, 0, sizeof *st);
    if (!r) return;
    st->step = r->step;
    st->steps = r->plan.cfg.train.steps;
    st->loss = r->loss;
    st->val_loss = r->val_loss;
    st->has_val_loss = r->has_val_loss;
    st->val_step = r->val_step;
    st->lr = r->lr;
    st->grad_norm = r->grad_norm;
    st->step_ms = r->step_s * 1e3;
    st->tokens_per_s = r->step_s > 0 ? (double)r->plan.cfg.train.global_batch * r->plan.cfg.model.seq_len / r->step_s : 0;
    st->samples_per_s = r->step_s > 0 ? (double)r->plan.cfg.train.global_batch / r->step_s : 0;
    st->flops_per_token = mgt__flops_per_token(r);
    st->gflops = st->tokens_per_s * st->flops_per_token * 1e-9;
    st->peak_gflops = (r->peak_seen > 0 ? r->peak_seen : r->plan.cfg.parallel.peak_gflops > 0 ? r->plan.cfg.parallel.peak_gflops : r->peak_per_rank) * r->plan.world;
    mgt__strlcpy(st->peak_source, r->peak_seen > 0 ? r->peak_seen_source : r->plan.cfg.parallel.peak_gflops > 0 ? "preset" : r->peak_per_rank > 0 ? r->peak_source : "",
                 sizeof st->peak_source);
    st->has_mfu = st->peak_gflops > 0 && st->gflops > 0; /* against the peak the preset states, or one measured */
    st->mfu = st->has_mfu ? st->gflops / st->peak_gflops : 0;
    st->tokens_seen = r->tokens_seen;
    st->params = r->plan.params;
    for (i = 0; i < r->plan.world; i++) /* the busiest rank: what a device must hold */
        for (c = 0; c < MGT_MEM_COUNT; c++) {
            if (r->ranks[i].be->mem_current[c] > st->mem_current[c]) st->mem_current[c] = r->ranks[i].be->mem_current[c];
            if (r->ranks[i].be->mem_peak[c] > st->mem_peak[c]) st->mem_peak[c] = r->ranks[i].be->mem_peak[c];
        }
    st->threads = r->threads_per_rank * r->plan.world;
    st->elapsed_s = r->elapsed_s;
    st->dtype = r->plan.cfg.precision.dtype;
    st->loss_scale = r->loss_scale;
    st->skipped_steps = r->skipped;
    st->step_skipped = r->last_skipped;
}

