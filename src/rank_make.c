/* src/rank_make.c - a rank made and freed: its place and groups, its backend, its buffers and
   activations, its first values */
static void mgt__rank_free(mgt__rank *rk) {
    mgt_backend *be = rk->be;
    const mgt_plan *p = &rk->run->plan;
    int u;
    mgt__unmirror(rk, 0);
    if (be) {
        mgt__enter(be);
        /* the communicator first: it waits for its stream, which may still read the buffers below */
        if (rk->comm && rk->run->world_api->comm_destroy) {
            rk->run->world_api->comm_destroy(rk->run->world, rk->comm);
            rk->comm = NULL;
        }
        size_t full = sizeof(float) * rk->lay.size, sh = sizeof(float) * rk->shard, e = be->elt;
        be->free(be, rk->params, e * rk->lay.size, MGT_MEM_PARAMS);
        be->free(be, rk->pshard, e * rk->shard, MGT_MEM_PARAMS);
        be->free(be, rk->gather[0], e * rk->max_unit, MGT_MEM_BUFFERS);
        be->free(be, rk->gather[1], e * rk->max_unit, MGT_MEM_BUFFERS);
        be->free(be, rk->master, p->zero >= 1 ? sh : full, MGT_MEM_OPTIMIZER);
        be->free(be, rk->grads, full, MGT_MEM_GRADS);
        be->free(be, rk->gshard, sh, MGT_MEM_GRADS);
        be->free(be, rk->unit_gbuf[0], sizeof(float) * rk->max_block, MGT_MEM_GRADS);
        be->free(be, rk->unit_gbuf[1], sizeof(float) * rk->max_block, MGT_MEM_GRADS);
        be->free(be, rk->rs_tmp1, sizeof(float) * rk->max_block / (size_t)p->replicas, MGT_MEM_BUFFERS);
        for (u = 0; u < 2; u++) be->free(be, rk->keep_gbuf[u], sizeof(float) * rk->keep_size[u], MGT_MEM_GRADS);
        be->free(be, rk->rs_tmp, sizeof(float) * rk->max_unit / (size_t)p->replicas, MGT_MEM_BUFFERS);
        be->free(be, rk->m, p->zero >= 1 ? sh : full, MGT_MEM_OPTIMIZER);
        be->free(be, rk->v, p->zero >= 1 ? sh : full, MGT_MEM_OPTIMIZER);
        be->free(be, rk->acts_block, rk->acts_bytes, MGT_MEM_ACTIVATIONS);
        be->free(be, rk->gs_block, rk->gs_bytes, MGT_MEM_ACTIVATIONS);
        be->free(be, rk->dstat, sizeof(double) * (size_t)(2 + rk->run->plan.world), MGT_MEM_BUFFERS);
        if (rk->run->world_api->backend_destroy) rk->run->world_api->backend_destroy(rk->run->world, be);
    }
    MGT_FREE(rk->host_io);
    MGT_FREE(rk->ss_x);
    MGT_FREE(rk->ss_n);
    if (rk->acts) for (u = 0; u < rk->nsets; u++) { MGT_FREE(rk->acts[u].resid); MGT_FREE(rk->acts[u].layer); }
    MGT_FREE(rk->acts);
    MGT_FREE(rk->pipe[0]);
    MGT_FREE(rk->pipe[1]);
    MGT_FREE(rk->unit_param);
    MGT_FREE(rk->unit_grad);
    MGT_FREE(rk->bucket_of_unit);
    MGT_FREE(rk->members);
    mgt__layout_free(&rk->lay);
}


/* every element from (seed, tensor name, global element index): any slice of any layout
   initialises alike; vocabulary padding rows stay zero */
typedef struct mgt__init_args { mgt__rank *rk; const mgt__tensor *x; } mgt__init_args;
static void mgt__init_task(void *ctx, int tid, int nth) {
    const mgt__init_args *a = (const mgt__init_args *)ctx;
    const mgt__tensor *x = a->x;
    mgt__rank *rk = a->rk;
    uint64_t key = mgt__name_key(x->info.name), seed = (uint64_t)rk->run->plan.cfg.train.seed;
    size_t lo, hi, slo, shi, i, gcols = (size_t)(x->info.ndim == 2 ? x->info.shape[1] : 1);
    int zero3 = rk->run->plan.zero >= 3, master_sharded = rk->run->plan.zero >= 1, dtype = rk->be->dtype;
    mgt__span((size_t)x->rows, tid, nth, 1, &lo, &hi);
    mgt__unit_slice(rk, x->unit, &slo, &shi);
    for (i = lo; i < hi; i++) {
        int grow = mgt__global_row(x, (int)i), c;
        for (c = 0; c < x->cols; c++) {
            size_t flat = x->offset + i * (size_t)x->cols + (size_t)c, gidx = (size_t)grow * gcols + (size_t)(x->col_start + c);
            float v = grow < 0 ? 0.0f : x->init_std > 0 ? (float)(x->init_std * mgt__normal(seed, key, gidx)) : x->init_value;
            size_t in_shard = rk->lay.u[x->unit].shard_offset + (flat - slo);
            int mine = flat >= slo && flat < shi;
            if (rk->master && (!master_sharded || mine)) rk->master[master_sharded ? in_shard : flat] = v;
            if (!zero3) mgt__store(rk->params, flat, dtype, v);
            else if (mine) mgt__store(rk->pshard, in_shard, dtype, v);
        }
    }
}

/* a group of `kind`: size members from `base` every `stride` ranks, this rank at `index`; its id is
   kind x world + `place` (its first member's place among the groups of that kind), the same on
   every member */
static void mgt__make_group(mgt_group *g, int **cursor, int kind, int world, int place, int size, int index, int stride, int base) {
    int i;
    g->kind = kind;
    g->id = kind * world + place;
    g->size = size;
    g->index = index;
    g->ranks = *cursor;
    for (i = 0; i < size; i++) (*cursor)[i] = base + i * stride;
    *cursor += size;
}
/* a rank's groups, all in one place: TP (neighbours), DP (the replicas: dp x cp), PP, the
   embedding pair (first and last stage), the world, the key/value replicas (runs of k neighbouring
   TP ranks) and CP (every tp-th rank of a run of cp x tp) */
static mgt_result mgt__rank_groups(mgt__rank *rk, const mgt_plan *p) {
    int W = p->world, index = rk->rank, k = mgt__kv_replicas(&p->dims, p->tp), R = p->replicas, *cur;
    rk->members = (int *)MGT_MALLOC(sizeof(int) * (size_t)(p->tp + R + p->pp + 2 + W + k + p->cp));
    if (!rk->members) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    cur = rk->members;
    mgt__make_group(&rk->tp_g, &cur, MGT_GROUP_TP, W, index / p->tp, p->tp, rk->tpr, 1, index - rk->tpr);
    mgt__make_group(&rk->dp_g, &cur, MGT_GROUP_DP, W, rk->ppr * p->tp + rk->tpr, R, rk->replica, p->tp, rk->ppr * p->tp * R + rk->tpr);
    mgt__make_group(&rk->pp_g, &cur, MGT_GROUP_PP, W, rk->replica * p->tp + rk->tpr, p->pp, rk->ppr, p->tp * R, rk->replica * p->tp + rk->tpr);
    mgt__make_group(&rk->emb_g, &cur, MGT_GROUP_EMBEDDING, W, rk->replica * p->tp + rk->tpr, p->pp > 1 ? 2 : 1, rk->last && p->pp > 1 ? 1 : 0,
                    (p->pp - 1) * p->tp * R, rk->replica * p->tp + rk->tpr);
    mgt__make_group(&rk->world_g, &cur, MGT_GROUP_WORLD, W, 0, W, index, 1, 0);
    mgt__make_group(&rk->kv_g, &cur, MGT_GROUP_KV, W, index / k, k, rk->tpr % k, 1, index - rk->tpr % k);
    mgt__make_group(&rk->cp_g, &cur, MGT_GROUP_CP, W, index - rk->cpr * p->tp, p->cp, rk->cpr, p->tp, index - rk->cpr * p->tp);
    return MGT_OK;
}

/* the rank's place in the grid: its coordinates and stage, its slice of the model, its groups and
   the shapes of its ops */
static mgt_result mgt__rank_place(mgt_run *r, mgt__rank *rk, int index) {
    const mgt_plan *p = &r->plan;
    const mgt_config *cfg = &r->plan.cfg;
    int u;
    memset(rk, 0, sizeof *rk);
    rk->run = r;
    mgt__rank_locate(rk, p, index);
    if (!mgt__layout_alloc(&rk->lay, p)) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    mgt__layout_make(&rk->lay, p, rk->ppr, rk->tpr);
    for (u = 0; u < rk->lay.nu; u++) {
        rk->shard += rk->lay.u[u].size / (size_t)p->replicas;
        if (rk->lay.u[u].size > rk->max_unit) rk->max_unit = rk->lay.u[u].size;
        if (mgt__is_block_unit(rk, u) && rk->lay.u[u].size > rk->max_block) rk->max_block = rk->lay.u[u].size;
    }
    MGT__TRY(mgt__rank_groups(rk, p));
    /* shape of this rank's slice */
    rk->shape.B = r->inference ? 1 : cfg->train.micro_batch;
    rk->shape.cp = r->inference ? 1 : p->cp;
    rk->shape.T = cfg->model.seq_len / rk->shape.cp; /* its share of the sequence: two chunks under context parallelism */
    rk->shape.C = cfg->model.d_model;
    rk->shape.tp = p->tp;
    rk->shape.Cl = cfg->model.d_model / p->tp;
    rk->shape.KVl = mgt__kv_local(&p->dims, p->tp) * p->dims.hs;
    rk->shape.Hl = p->dims.H / p->tp;
    rk->shape.Fl = p->dims.fc / p->tp;
    rk->shape.NHl = cfg->model.n_head / p->tp;
    rk->shape.Vl = p->Vp / p->tp;
    rk->shape.nblocks = rk->nblocks;
    rk->shape.last = rk->last;
    rk->shape.recompute = r->inference ? MGT_RECOMPUTE_NONE : cfg->train.recompute;
    rk->shape.sp = !r->inference && cfg->parallel.sp && p->tp > 1; /* sampling keeps its rows whole */
    rk->shape.first = rk->first;
    rk->shape.chunks = r->inference ? 1 : mgt__plan_chunks(p);
    rk->shape.zb = !r->inference && mgt__plan_zb(p);
    rk->shape.elt = mgt__dtype_size(r->dtype);
    return MGT_OK;
}

/* the rank's backend, from its world; on a GPU, everything a step uses is made now, from the
   largest operands */
static mgt_result mgt__rank_backend(mgt_run *r, mgt__rank *rk) {
    mgt_backend *be;
    {
        mgt__rank_want want;
        want.rank = rk->rank;
        want.dtype = r->dtype;
        want.threads = r->threads_per_rank;
        want.scratch_floats = mgt__att_scratch_floats(&rk->shape);
        want.widen_floats = mgt__widen_floats(&rk->shape, r->threads_per_rank, mgt__cpu_widens_gemms(r->dtype));
        MGT__TRY(r->world_api->backend(r->world, &want, &rk->be, &rk->device));
    }
    be = rk->be;
    mgt__enter(be);
    rk->shape.att_lse = be->att_lse; /* the size of what attention saves */
    if (rk->shape.cp > 1 && (!be->attention_part_forward || !be->attention_part_backward || !be->copy_cols))
        return mgt__fail(MGT_ERROR_CONFIG, "[parallel] cp = %d: the %s backend has no ring attention (attention_part_forward, attention_part_backward, "
                         "copy_cols); set parallel.cp = 1, or device = cpu", rk->shape.cp, be->name);
    rk->host_io = MGT_MALLOC(sizeof(double) * (size_t)rk->shape.B * (size_t)rk->shape.T); /* 2N ints or N doubles */
    if (!rk->host_io) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    if (be->reserve) { /* GPU: everything a step uses, made now from the largest operands */
        mgt_backend_limits lim;
        memset(&lim, 0, sizeof lim);
        lim.B = rk->shape.B;
        lim.T = rk->shape.T;
        lim.C = rk->shape.C;
        lim.NH = rk->shape.NHl;
        lim.hs = rk->shape.NHl > 0 ? rk->shape.Cl / rk->shape.NHl : 0;
        lim.NKV = lim.hs > 0 ? rk->shape.KVl / lim.hs : 0;
        lim.OC = rk->shape.Cl + 2 * rk->shape.KVl > rk->shape.Fl ? rk->shape.Cl + 2 * rk->shape.KVl : rk->shape.Fl;
        lim.norm_tensors = (size_t)rk->lay.n;
        lim.norm_elements = rk->lay.size;
        lim.upload_bytes = sizeof(int) * (size_t)rk->shape.B * (size_t)rk->shape.T;
        lim.uploads = 2 * (r->inference ? 1 : r->plan.micro_steps);
        if (be->reserve(be, &lim) != 0)
            return mgt__fail(MGT_ERROR_MEMORY, "rank %d cannot reserve what its steps use: %s", rk->rank, be->error ? be->error(be) : "?");
    }
    return MGT_OK;
}

/* parameters, gradients and AdamW moments, sharded over DP as the ZeRO stage says, and the step's
   statistics on the device */
static mgt_result mgt__rank_state(mgt_run *r, mgt__rank *rk) {
    const mgt_plan *p = &r->plan;
    mgt_backend *be = rk->be;
    int u, k, zero = p->zero;
    rk->unit_param = (void **)MGT_MALLOC(sizeof(void *) * (size_t)rk->lay.nu);
    rk->unit_grad = (float **)MGT_MALLOC(sizeof(float *) * (size_t)rk->lay.nu);
    rk->bucket_of_unit = (int *)MGT_MALLOC(sizeof(int) * (size_t)rk->lay.nu);
    if (!rk->unit_param || !rk->unit_grad || !rk->bucket_of_unit) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
#define MGT__ALLOC_AS(type, ptr, bytes, cat) \
    if (!((ptr) = (type)be->alloc(be, (bytes), cat))) return mgt__fail(MGT_ERROR_MEMORY, "out of memory: rank %d needs more for its %s", rk->rank, mgt_mem_category_name(cat));
#define MGT__ALLOC(ptr, floats, cat) MGT__ALLOC_AS(float *, ptr, sizeof(float) * (floats), cat)
    if (zero < 3 || r->inference) { MGT__ALLOC_AS(void *, rk->params, be->elt * rk->lay.size, MGT_MEM_PARAMS) }
    else {
        MGT__ALLOC_AS(void *, rk->pshard, be->elt * rk->shard, MGT_MEM_PARAMS)
        MGT__ALLOC_AS(void *, rk->gather[0], be->elt * rk->max_unit, MGT_MEM_BUFFERS)
        MGT__ALLOC_AS(void *, rk->gather[1], be->elt * rk->max_unit, MGT_MEM_BUFFERS)
    }
    rk->gathered[0] = rk->gathered[1] = -1;
    for (u = 0; u < rk->lay.nu; u++) rk->unit_param[u] = rk->params ? (char *)rk->params + rk->lay.u[u].offset * be->elt : NULL;
    if (!r->inference) {
        if (zero < 2) {
            MGT__ALLOC(rk->grads, rk->lay.size, MGT_MEM_GRADS)
            for (u = 0; u < rk->lay.nu; u++) rk->unit_grad[u] = rk->grads + rk->lay.u[u].offset;
        } else {
            MGT__ALLOC(rk->gshard, rk->shard, MGT_MEM_GRADS)
            if (rk->max_block) {
                MGT__ALLOC(rk->unit_gbuf[0], rk->max_block, MGT_MEM_GRADS)
                MGT__ALLOC(rk->unit_gbuf[1], rk->max_block, MGT_MEM_GRADS)
                MGT__ALLOC(rk->rs_tmp1, rk->max_block / (size_t)p->replicas, MGT_MEM_BUFFERS)
            }
            rk->gpending[0] = rk->gpending[1] = -1;
            MGT__ALLOC(rk->rs_tmp, rk->max_unit / (size_t)p->replicas, MGT_MEM_BUFFERS)
            for (u = 0, k = 0; u < rk->lay.nu; u++) {
                rk->unit_grad[u] = NULL;
                if (mgt__is_block_unit(rk, u)) continue;
                rk->keep_size[k] = rk->lay.u[u].size;
                MGT__ALLOC(rk->keep_gbuf[k], rk->keep_size[k], MGT_MEM_GRADS)
                rk->unit_grad[u] = rk->keep_gbuf[k++];
            }
        }
        MGT__ALLOC(rk->m, zero >= 1 ? rk->shard : rk->lay.size, MGT_MEM_OPTIMIZER)
        MGT__ALLOC(rk->v, zero >= 1 ? rk->shard : rk->lay.size, MGT_MEM_OPTIMIZER)
        if (r->dtype != MGT_F32) MGT__ALLOC(rk->master, zero >= 1 ? rk->shard : rk->lay.size, MGT_MEM_OPTIMIZER)
    }
    if (be->sum_squares_many && be->sum_doubles) { /* the step's statistics, on the device until one download */
        MGT__ALLOC_AS(double *, rk->dstat, sizeof(double) * (size_t)(2 + p->world), MGT_MEM_BUFFERS)
        rk->ss_x = (const float **)MGT_MALLOC(sizeof(float *) * (size_t)rk->lay.n);
        rk->ss_n = (size_t *)MGT_MALLOC(sizeof(size_t) * (size_t)rk->lay.n);
        if (!rk->ss_x || !rk->ss_n) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    }
#undef MGT__ALLOC
#undef MGT__ALLOC_AS
    return MGT_OK;
}

/* the DP buckets, and the activations of the micro-batches in flight */
static mgt_result mgt__rank_activations(mgt_run *r, mgt__rank *rk) {
    const mgt_plan *p = &r->plan;
    const mgt_config *cfg = &r->plan.cfg;
    mgt_backend *be = rk->be;
    int u, k, M = p->micro_steps;
    size_t bucket_floats, in_bucket = 0;
    /* DP buckets: consecutive units in the order backward finishes them, about bucket_mb each */
    bucket_floats = (size_t)(cfg->parallel.bucket_mb * 1048576.0 / sizeof(float));
    for (u = rk->lay.nu - 1, k = 0; u >= 0; u--) {
        if (in_bucket > 0 && in_bucket + rk->lay.u[u].size > bucket_floats) { k++; in_bucket = 0; }
        rk->bucket_of_unit[u] = k;
        in_bucket += rk->lay.u[u].size;
    }
    /* activations: one set per micro-batch in flight (GPipe: all of them; 1F1B: pp - stage) */
    rk->nsets = r->inference || p->pp == 1 ? 1 : cfg->parallel.pp_schedule == 1 ? M : (p->pp - rk->ppr < M ? p->pp - rk->ppr : M);
    if (!r->inference && (rk->shape.chunks > 1 || rk->shape.zb)) /* interleaved or zb: the sets its actions need, the plan's count */
        MGT__TRY(mgt__interleaved_plan(p, rk->ppr, &rk->pipe[0], &rk->npipe[0], &rk->pipe[1], &rk->npipe[1], &rk->nsets));
    rk->acts = (mgt__acts *)MGT_MALLOC(sizeof(mgt__acts) * (size_t)rk->nsets);
    if (!rk->acts) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    memset(rk->acts, 0, sizeof(mgt__acts) * (size_t)rk->nsets);
    for (k = 0; k < rk->nsets; k++) {
        rk->acts[k].resid = (void **)MGT_MALLOC(sizeof(void *) * (size_t)(rk->nblocks + 1));
        rk->acts[k].layer = (mgt__layer_acts *)MGT_MALLOC(sizeof(mgt__layer_acts) * (size_t)(rk->nblocks + 1));
        if (!rk->acts[k].resid || !rk->acts[k].layer) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    }
    {
        size_t one = mgt__acts_layout(&rk->acts[0], NULL, &rk->shape);
        rk->acts_bytes = one * (size_t)rk->nsets;
        rk->acts_block = be->alloc(be, rk->acts_bytes, MGT_MEM_ACTIVATIONS);
        if (!rk->acts_block)
            return mgt__fail(MGT_ERROR_MEMORY, "out of memory: rank %d needs %.1f MiB of activations; lower [train] micro_batch or use recompute = full",
                             rk->rank, (double)rk->acts_bytes / 1048576.0);
        for (k = 0; k < rk->nsets; k++) mgt__acts_layout(&rk->acts[k], (char *)rk->acts_block + (size_t)k * one, &rk->shape);
    }
    if (!r->inference) {
        rk->gs_bytes = mgt__scratch_layout(&rk->gs, NULL, &rk->shape);
        rk->gs_block = be->alloc(be, rk->gs_bytes, MGT_MEM_ACTIVATIONS);
        if (!rk->gs_block) return mgt__fail(MGT_ERROR_MEMORY, "out of memory for gradient scratch");
        mgt__scratch_layout(&rk->gs, (char *)rk->gs_block, &rk->shape);
    }
    return MGT_OK;
}

/* first values from (seed, tensor name, element): CPU ranks with their threads, GPU ranks in a host
   copy, one thread each */
static mgt_result mgt__rank_first_values(mgt__rank *rk) {
    mgt_backend *be = rk->be;
    int t;
    MGT__TRY(mgt__mirror(rk));
    for (t = 0; t < rk->lay.n; t++) {
        mgt__init_args a;
        a.rk = rk;
        a.x = &rk->lay.t[t];
        if (be->host_memory) mgt__pool_run(MGT__POOL(be), mgt__init_task, &a);
        else mgt__init_task(&a, 0, 1);
    }
    mgt__unmirror(rk, 1);
    return MGT_OK;
}

static mgt_result mgt__rank_init(mgt_run *r, mgt__rank *rk, int index) {
    MGT__TRY(mgt__rank_place(r, rk, index));
    MGT__TRY(mgt__rank_backend(r, rk));
    MGT__TRY(mgt__rank_state(r, rk));
    MGT__TRY(mgt__rank_activations(r, rk));
    return r->world_api->holds_values ? mgt__rank_first_values(rk) : MGT_OK; /* simulated ranks hold nothing */
}
