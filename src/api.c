/* src/api.c - making and destroying a run (mgt_run_create, mgt_run_open, mgt_run_destroy), sampling */
static void mgt__new_run_id(char *id, size_t cap) {
    uint64_t x = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, &x, sizeof x) != (ssize_t)sizeof x) x = mgt__mix64((uint64_t)(mgt_now() * 1e9) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)id);
    if (fd >= 0) close(fd);
    snprintf(id, cap, "%016llx", (unsigned long long)x);
}

/* given: a world made by its owner (the simulator's), with its state; NULL: the world this machine
   and launcher give (src/world.c) */
static mgt_result mgt__run_alloc_on(mgt_run **out, const mgt_config *cfg, int inference, const mgt__world_api *given, void *given_world);
static mgt_result mgt__run_alloc(mgt_run **out, const mgt_config *cfg, int inference) { return mgt__run_alloc_on(out, cfg, inference, NULL, NULL); }
static mgt_result mgt__run_alloc_on(mgt_run **out, const mgt_config *cfg, int inference, const mgt__world_api *given, void *given_world) {
    mgt_run *r;
    const mgt_cuda_api *cuda = NULL;
    int i, total, cores;
    *out = NULL;
    r = (mgt_run *)MGT_MALLOC(sizeof *r);
    if (!r) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    memset(r, 0, sizeof *r);
    r->inference = inference;
    r->saved_step = -1;
    r->lock_fd = -1;
    r->processes = 1;
    mgt__new_run_id(r->run_id, sizeof r->run_id);
    r->dtype = cfg->precision.dtype == MGT_DTYPE_BF16 ? MGT_BF16 : cfg->precision.dtype == MGT_DTYPE_FP16 ? MGT_F16 : MGT_F32;
    r->loss_scale = r->dtype == MGT_F16 ? cfg->precision.loss_scale : 1.0;
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->stats_mu, NULL);
    r->created_s = mgt_now();
    r->state = MGT_STATE_STARTING;
    pthread_cond_init(&r->cv_cmd, NULL);
    pthread_cond_init(&r->cv_done, NULL);
    {
        mgt_result res = mgt__plan_make(cfg, &r->plan);
        if (res != MGT_OK) { mgt_run_destroy(r); return res; }
    }
    if (!given) { /* where the ranks go, and whether they fit there, before anything large is allocated (a simulated run allocates nothing) */
        mgt_fit fit;
        mgt_result res = mgt__choose_device(cfg, r->plan.world, &cuda);
        if (res == MGT_OK) res = mgt__fit_on(&r->plan, cuda, inference, &fit);
        if (res != MGT_OK) { mgt_run_destroy(r); return res; }
        if (!fit.fits) {
            mgt__log(MGT_LOG_WARN, "MGT_MEMORY_CHECK=off: %s", fit.text);
            mgt__event(r, MGT_LOG_WARN, "the run does not fit this machine's memory (MGT_MEMORY_CHECK=off): it may fail or swap");
        } else if (fit.host_have > 0 && fit.host_need > 0.5 * fit.host_have / MGT__HOST_SHARE) {
            char need[32], avail[32];
            mgt__fmt_bytes(fit.host_need, need, sizeof need);
            mgt__fmt_bytes(fit.host_have / MGT__HOST_SHARE, avail, sizeof avail);
            mgt__event(r, MGT_LOG_WARN, "the run takes %s of RAM, %.0f%% of what this machine has available (MemAvailable %s): other programs may run short",
                       need, 100 * fit.host_need * MGT__HOST_SHARE / fit.host_have, avail);
        }
    }
    r->rank_lo = 0;
    r->rank_hi = r->plan.world;
    if (!given && !inference && mgt_mpi_launcher(NULL, 0) > 1) { /* this process runs its block of the ranks */
        mgt_result res = mgt_mpi_start(&r->process, &r->processes);
        if (res == MGT_OK)
            res = mgt__mpi_world_create(&r->procs, mgt__mpi_api, r->process, r->processes, r->plan.world, cfg->parallel.timeout_s);
        if (res != MGT_OK) { mgt_run_destroy(r); return res; }
        r->rank_lo = r->process * r->procs->per;
        r->rank_hi = r->rank_lo + r->procs->per;
    }
    /* the one choice of world; everything after asks the table */
    r->world_api = given ? given : cuda ? &mgt__world_nccl : r->procs ? &mgt__world_mpi : &mgt__world_local;
    /* the cores are divided evenly between the ranks of this process, at least one thread each */
    cores = mgt_cpu_count();
    total = cfg->parallel.threads > 0 ? cfg->parallel.threads : cores;
    r->threads_per_rank = total / (r->rank_hi - r->rank_lo) > 0 ? total / (r->rank_hi - r->rank_lo) : 1;
    /* ranks on this machine's cores (not on GPUs, nor simulated): warn where they would only take turns */
    if (!given && !r->world_api->on_gpus && cfg->parallel.threads > cores) /* each op ends when its slowest thread does: spare threads only wait */
        mgt__event(r, MGT_LOG_WARN, "[parallel] threads = %d on %d core%s: a rank's threads meet at every op, so threads beyond the cores only "
                   "wait for each other and a step takes many times longer; set threads = 0 (one per core)", cfg->parallel.threads, cores, cores == 1 ? "" : "s");
    if (!given && !r->world_api->on_gpus && r->rank_hi - r->rank_lo > cores) { /* this process's ranks on its cores */
        char grid[64];
        mgt__event(r, MGT_LOG_WARN, "%d ranks (%s%s) on %d core%s: a rank is at least one thread, so ranks take turns on the cores and a step is slower "
                   "than on fewer ranks", r->rank_hi - r->rank_lo, r->rank_hi - r->rank_lo < r->plan.world ? "this process's, of " : "",
                   mgt_grid_text(r->plan.dp, r->plan.cp, r->plan.tp, r->plan.pp, grid, sizeof grid), cores, cores == 1 ? "" : "s");
    }
    r->ranks = (mgt__rank *)MGT_MALLOC(sizeof(mgt__rank) * (size_t)r->plan.world);
    r->rank_stats = (mgt_rank_stats *)MGT_MALLOC(sizeof(mgt_rank_stats) * (size_t)r->plan.world);
    if (r->rank_stats) memset(r->rank_stats, 0, sizeof(mgt_rank_stats) * (size_t)r->plan.world);
    if (r->ranks) memset(r->ranks, 0, sizeof(mgt__rank) * (size_t)r->plan.world); /* destroy may walk them */
    if (!r->ranks || !r->rank_stats) { mgt_run_destroy(r); return mgt__fail(MGT_ERROR_MEMORY, "out of memory"); }
    {
        mgt_result res = MGT_OK;
        if (r->processes > 1) {
            r->shadow_be = (mgt_backend *)MGT_MALLOC(sizeof(mgt_backend) * (size_t)r->plan.world);
            r->shadow_comm = (mgt_comm *)MGT_MALLOC(sizeof(mgt_comm) * (size_t)r->plan.world);
            if (!r->shadow_be || !r->shadow_comm) res = mgt__fail(MGT_ERROR_MEMORY, "out of memory");
            else {
                memset(r->shadow_be, 0, sizeof(mgt_backend) * (size_t)r->plan.world);
                memset(r->shadow_comm, 0, sizeof(mgt_comm) * (size_t)r->plan.world);
            }
        }
        if (res == MGT_OK && given) r->world = given_world;
        else if (res == MGT_OK) {
            mgt__world_args a;
            a.world = r->plan.world;
            a.first = r->rank_lo;
            a.count = r->rank_hi - r->rank_lo;
            a.timeout_s = cfg->parallel.timeout_s;
            a.procs = r->procs;
            a.cuda = cuda;
            res = r->world_api->create(&a, &r->world);
        }
        if (res != MGT_OK) { mgt_run_destroy(r); return res; }
    }
    for (i = 0; i < r->plan.world; i++) {
        mgt_result res;
        if (i < r->rank_lo || i >= r->rank_hi) { mgt__shadow_rank(r, &r->ranks[i], i); continue; }
        res = mgt__rank_init(r, &r->ranks[i], i);
        if (res != MGT_OK) { mgt_run_destroy(r); return res; }
    }
    if (r->plan.world > 1) {
        for (i = r->rank_lo; i < r->rank_hi; i++)
            if (pthread_create(&r->ranks[i].thread, NULL, mgt__rank_main, &r->ranks[i])) {
                r->started = 1;
                mgt_run_destroy(r);
                return mgt__fail(MGT_ERROR_MEMORY, "cannot start the thread of rank %d", i);
            }
        r->started = 1;
    }
    { /* each rank takes its communicator on its own thread */
        mgt_result res = mgt__run_cmd(r, MGT__CMD_CONNECT, NULL, 0);
        if (res != MGT_OK) { mgt_run_destroy(r); return res; }
    }
    *out = r;
    return MGT_OK;
}

MGTDEF void mgt_run_destroy(mgt_run *r) {
    int i;
    if (!r) return;
    if (r->started) {
        pthread_mutex_lock(&r->mu);
        r->cmd = MGT__CMD_QUIT;
        r->generation++;
        pthread_cond_broadcast(&r->cv_cmd);
        pthread_mutex_unlock(&r->mu);
        for (i = 0; i < r->plan.world; i++) if (r->ranks[i].thread) pthread_join(r->ranks[i].thread, NULL);
    }
    if (r->has_train) mgt__loader_close(&r->train);
    if (r->has_val) mgt__loader_close(&r->val);
    if (r->metrics) fclose(r->metrics);
    if (r->tensorboard) fclose(r->tensorboard);
    if (r->lock_fd >= 0) { /* releases the folder, leaving no lock file behind (a run that takes it next checks it took the named one) */
        char lock_path[MGT_STR_MAX + 48];
        snprintf(lock_path, sizeof lock_path, "%s/mgt.lock", r->dir);
        unlink(lock_path);
        close(r->lock_fd);
    }
    if (r->ranks) for (i = 0; i < r->plan.world; i++) if (r->ranks[i].run) mgt__rank_free(&r->ranks[i]);
    if (r->world && r->world_api->destroy) r->world_api->destroy(r->world);
    mgt__mpi_world_destroy(r->procs);
    MGT_FREE(r->shadow_be);
    MGT_FREE(r->shadow_comm);
    pthread_mutex_destroy(&r->mu);
    pthread_mutex_destroy(&r->stats_mu);
    MGT_FREE(r->history);
    MGT_FREE(r->events);
    MGT_FREE(r->rank_stats);
    pthread_cond_destroy(&r->cv_cmd);
    pthread_cond_destroy(&r->cv_done);
    MGT_FREE(r->ranks);
    MGT_FREE(r);
}

/* mgt_run_create on a given world (NULL: this machine's); tests wrap the local world's to inject faults */
static mgt_result mgt__run_create_on(mgt_run **out, const mgt_config *cfg, const mgt__world_api *given, void *given_world) {
    mgt_run *r;
    mgt_result res;
    mgt_config resolved;
    if (!out || !cfg) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_create: out and cfg are required");
    *out = NULL;
    resolved = *cfg;
    cfg = &resolved; /* the model keys [model] init gives */
    MGT__TRY(mgt_config_resolve_init(&resolved));
    MGT__TRY(mgt_config_validate(cfg));
    MGT__TRY(mgt__layout_chosen(cfg, "a run"));
    MGT__TRY(mgt__run_alloc_on(&r, cfg, 0, given, given_world));
    if (cfg->model.init[0] && (res = mgt__init_weights(r)) != MGT_OK) { mgt_run_destroy(r); return res; }
    if (cfg->data.train[0]) {
        char name[400];
        res = mgt__loader_open(&r->train, cfg->data.train, mgt__data_key(cfg, "train", name, sizeof name), cfg->model.vocab_size, cfg->model.seq_len,
                               cfg->train.global_batch, (uint64_t)cfg->train.seed, 1);
        if (res != MGT_OK) { mgt_run_destroy(r); return res; }
        r->has_train = 1;
    }
    if (cfg->data.val[0]) {
        char name[400];
        res = mgt__loader_open(&r->val, cfg->data.val, mgt__data_key(cfg, "val", name, sizeof name), cfg->model.vocab_size, cfg->model.seq_len, 1,
                               (uint64_t)cfg->train.seed, 0);
        if (res != MGT_OK) { mgt_run_destroy(r); return res; }
        r->has_val = 1;
        if (r->has_train) { /* validating on shards it also trains on measures memory, not generalisation */
            int a, b;
            for (a = 0; a < r->train.nshards; a++)
                for (b = 0; b < r->val.nshards; b++)
                    if (r->train.shards[a].dev == r->val.shards[b].dev && r->train.shards[a].ino == r->val.shards[b].ino) {
                        mgt__log(MGT_LOG_WARN, "[data] val's shard %d is also [data] train's shard %d: the validation loss is of data the run trains on",
                                 b + 1, a + 1);
                        a = r->train.nshards;
                        break;
                    }
        }
    }
    if (cfg->checkpoint.dir[0]) mgt__strlcpy(r->dir, cfg->checkpoint.dir, sizeof r->dir);
    else {
        const char *base = strrchr(cfg->path, '/');
        char stem[MGT_STR_MAX];
        char *dot;
        mgt__strlcpy(stem, base ? base + 1 : (cfg->path[0] ? cfg->path : "run"), sizeof stem);
        dot = strrchr(stem, '.');
        if (dot && dot != stem) *dot = 0;
        snprintf(r->dir, sizeof r->dir, "runs/%s", stem);
    }
    if (strcmp(cfg->log.metrics, "auto")) mgt__strlcpy(r->metrics_path, cfg->log.metrics, sizeof r->metrics_path);
    else snprintf(r->metrics_path, sizeof r->metrics_path, "%s/metrics.jsonl", r->dir);
    *out = r; /* the folder and metrics.jsonl are taken by mgt_run_claim, after a resume */
    return MGT_OK;
}
/* ---- training: a step, then what follows it (validation, the metrics line, a periodic checkpoint) ---- */

/* after a step: validate when due, write the metrics line, checkpoint when due */
static mgt_result mgt__after_step(mgt_run *r) {
    const mgt_config *cfg = &r->plan.cfg;
    int evaluated = 0;
    if (r->has_val && cfg->train.eval_every > 0 && (r->step % cfg->train.eval_every == 0 || r->step == cfg->train.steps)) {
        double vl;
        MGT__TRY(mgt_run_eval(r, &vl));
        evaluated = 1;
    }
    MGT__TRY(mgt__metrics_line(r, r->step % cfg->log.every == 0 || r->step == cfg->train.steps, evaluated));
    if (cfg->checkpoint.every > 0 && r->step % cfg->checkpoint.every == 0) return mgt_run_save(r, NULL, 0);
    return MGT_OK;
}

MGTDEF mgt_result mgt_run_step(mgt_run *r) {
    if (!r) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_step: run is NULL");
    if (r->inference) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_step: this run was opened for sampling only");
    if (!r->has_train) return mgt__fail(MGT_ERROR_CONFIG, "[data] train is empty: set it to a token shard");
    MGT__TRY(mgt__claim_before_step(r));
    MGT__TRY(mgt__train_step(r, mgt__loader_get(&r->train, r->step)));
    return mgt__after_step(r);
}

MGTDEF mgt_result mgt_run_step_tokens(mgt_run *r, const uint32_t *rows) {
    int i, n;
    if (!r || !rows) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_step_tokens: run and rows are required");
    if (r->inference) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_step_tokens: this run was opened for sampling only");
    n = r->plan.cfg.train.global_batch * (r->plan.cfg.model.seq_len + 1);
    for (i = 0; i < n; i++)
        if (rows[i] >= (uint32_t)r->plan.cfg.model.vocab_size)
            return mgt__fail(MGT_ERROR_DATA, "mgt_run_step_tokens: token %lu at %d is beyond vocab_size %d", (unsigned long)rows[i], i, r->plan.cfg.model.vocab_size);
    MGT__TRY(mgt__claim_before_step(r));
    MGT__TRY(mgt__train_step(r, rows));
    return mgt__after_step(r);
}

MGTDEF mgt_result mgt_run_create(mgt_run **out, const mgt_config *cfg) { return mgt__run_create_on(out, cfg, NULL, NULL); }

MGTDEF mgt_result mgt_run_open(mgt_run **out, const char *checkpoint, int threads) {
    mgt_config cfg;
    mgt_run *r;
    mgt_result res;
    if (!out || !checkpoint) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_open: out and checkpoint are required");
    *out = NULL;
    MGT__TRY(mgt_checkpoint_config(checkpoint, &cfg));
    if (threads > 0) cfg.parallel.threads = threads;
    cfg.parallel.dp = cfg.parallel.tp = cfg.parallel.pp = cfg.parallel.cp = 1; /* sampling runs on one rank, whatever trained it */
    cfg.parallel.pp_virtual = 1;
    cfg.parallel.zero = cfg.parallel.sp = 0;
    MGT__TRY(mgt__run_alloc(&r, &cfg, 1));
    res = mgt_run_resume(r, checkpoint);
    if (res != MGT_OK) { mgt_run_destroy(r); return res; }
    *out = r;
    return MGT_OK;
}

MGTDEF int mgt_run_generate(mgt_run *r, const int *prompt, int n_prompt, int *out, int max_new, double temperature, int top_k, uint64_t seed) {
    int *ctx, n = n_prompt, i, j, V;
    float *probs, *logits;
    void *raw;
    mgt__rank *rk;
    if (!r || !prompt || n_prompt < 1 || !out || max_new < 0 || r->plan.world != 1) {
        mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_generate: needs a one-rank run, a prompt of at least one token, out and max_new >= 0");
        return -1;
    }
    rk = &r->ranks[0];
    V = r->plan.cfg.model.vocab_size;
    ctx = (int *)MGT_MALLOC(sizeof(int) * (size_t)(n_prompt + max_new + 1));
    probs = (float *)MGT_MALLOC(sizeof(float) * (size_t)V);
    logits = (float *)MGT_MALLOC(sizeof(float) * (size_t)rk->shape.Vl); /* the last row in fp32 */
    raw = MGT_MALLOC(rk->shape.elt * (size_t)rk->shape.Vl);              /* and as stored */
    if (!ctx || !probs || !logits || !raw) {
        MGT_FREE(ctx); MGT_FREE(probs); MGT_FREE(logits); MGT_FREE(raw);
        mgt__fail(MGT_ERROR_MEMORY, "out of memory");
        return -1;
    }
    memcpy(ctx, prompt, sizeof(int) * (size_t)n_prompt);
    for (i = 0; i < max_new; i++) {
        int start = n > r->plan.cfg.model.seq_len ? n - r->plan.cfg.model.seq_len : 0, len = n - start, pick = 0, T = rk->shape.T, B0;
        mgt__acts *A = &rk->acts[0];
        double total = 0, u, acc = 0, mx = -1e30, kth = -1e30;
        mgt__enter(rk->be);
        rk->be->upload(rk->be, A->inputs, ctx + start, sizeof(int) * (size_t)len);
        B0 = rk->shape.B;
        rk->shape.B = 1;
        rk->shape.T = len; /* the buffers are sized for seq_len; a shorter context uses a prefix */
        mgt__stage_forward(rk, A);
        mgt__norm_forward(rk, A->lnf, A->lnf_mean, A->lnf_rstd, A->resid[rk->nblocks], mgt__t_lnf(rk), mgt__t_lnf_bias(rk), len);
        rk->be->matmul_forward(rk->be, A->logits, A->lnf, mgt__P(rk, mgt__t_head(rk)), NULL, len, rk->shape.C, rk->shape.Vl);
        rk->shape.T = T;
        rk->shape.B = B0;
        rk->be->download(rk->be, raw, (const char *)A->logits + (size_t)(len - 1) * (size_t)rk->shape.Vl * rk->shape.elt,
                         (size_t)rk->shape.Vl * rk->shape.elt);
        for (j = 0; j < rk->shape.Vl; j++) logits[j] = mgt__load(raw, (size_t)j, rk->be->dtype);
        if (rk->be->error && rk->be->error(rk->be)) {
            mgt__fail(MGT_ERROR_DEVICE, "%s", rk->be->error(rk->be));
            max_new = -1;
            break;
        }
        for (j = 0; j < V; j++) mx = logits[j] > mx ? logits[j] : mx;
        if (top_k > 0 && top_k < V) { /* the k-th largest logit: partial selection over a copy */
            int k;
            for (j = 0; j < V; j++) probs[j] = logits[j];
            for (k = 0; k < top_k; k++) {
                int best = k;
                for (j = k + 1; j < V; j++) if (probs[j] > probs[best]) best = j;
                { float t = probs[k]; probs[k] = probs[best]; probs[best] = t; }
            }
            kth = probs[top_k - 1];
        }
        for (j = 0; j < V; j++) {
            double p = logits[j] < kth ? 0.0 : (temperature > 0 ? exp((logits[j] - mx) / temperature) : (logits[j] == mx ? 1.0 : 0.0));
            probs[j] = (float)p;
            total += p;
        }
        u = mgt__uniform(mgt_hash3(seed, 0x73616d70, (uint64_t)i)) * total;
        for (j = 0; j < V; j++) { acc += probs[j]; pick = j; if (acc >= u && probs[j] > 0) break; }
        ctx[n++] = pick;
        out[i] = pick;
    }
    MGT_FREE(ctx);
    MGT_FREE(probs);
    MGT_FREE(logits);
    MGT_FREE(raw);
    return max_new;
}


