/* src/sim_search.c - the layout search: every layout of a number of GPUs (or CPU ranks) that fits,
   simulated, fastest first (mgt plan --search, parallel.layout = auto) */

/* GiB the fullest rank of cfg needs on a GPU (the plan, the device's reserve, the attention
   scratch), or -1 when cfg is not a valid layout. On the CPU (host_sync), where the ranks share the
   machine's memory: 0 when the whole run fits it as mgt_run_create checks it (mgt__fit), else -1 */
static double mgt__search_mem(const mgt_config *layout, const mgt_sim_device *d) {
    mgt_config gpu = *layout; /* planned as GPU ranks: flash attention's activations */
    mgt_plan plan;
    int r, c, tp = gpu.parallel.tp, dp = gpu.parallel.dp, pp = gpu.parallel.pp;
    double worst = 0;
    if (d->host_sync) {
        mgt_fit fit;
        gpu.parallel.device = MGT_DEVICE_CPU;
        if (mgt_plan_make(&gpu, &plan) != MGT_OK) return -1;
        mgt__fit(&plan, 0, NULL, 0, &fit);
        return fit.fits || !fit.checked ? 0 : -1;
    }
    gpu.parallel.device = MGT_DEVICE_CUDA;
    if (mgt_plan_make(&gpu, &plan) != MGT_OK) return -1;
    for (r = 0; r < dp * tp * pp; r++) {
        mgt_rank_plan p;
        double used = 0;
        int dpi, tpi, ppi;
        mgt_rank_coords(r, dp, tp, &dpi, &tpi, &ppi);
        if (ppi > 0 && ppi < pp - 1 && (dpi || tpi)) continue; /* one rank per middle stage: they hold alike */
        if (mgt_plan_rank(&plan, r, &p) != MGT_OK) return -1;
        for (c = 0; c < MGT_MEM_COUNT; c++)
            if (c != MGT_MEM_WORKSPACE) used += (double)p.mem[c];
        if (used > worst) worst = used;
    }
    return worst / 1073741824.0 + d->reserve_gib +
           (double)gpu.train.micro_batch * (gpu.model.n_head / tp) * (double)gpu.model.seq_len * sizeof(float) / 1073741824.0;
}
static int mgt__search_faster(const void *a, const void *b) {
    double x = ((const mgt_layout_choice *)a)->tokens_per_s, y = ((const mgt_layout_choice *)b)->tokens_per_s;
    return x < y ? 1 : x > y ? -1 : 0;
}
/* a layout of the search: its config, then what its simulated step came to (the layout search
   simulates its layouts on several threads at once, each step on its own simulated world) */
static const int mgt__search_modes[3] = {MGT_RECOMPUTE_NONE, MGT_RECOMPUTE_SELECTIVE, MGT_RECOMPUTE_FULL}; /* least first */
typedef struct mgt__search_job {
    mgt_config cfg;
    int fallback;               /* > 0: the mode (mgt__search_modes) to try from should the simulator refuse this one */
    mgt_result rc;              /* of mgt_sim_run */
    char why[320];              /* its error */
    mgt_layout_choice choice;   /* its figures, when rc is MGT_OK */
} mgt__search_job;
typedef struct mgt__search_jobs {
    mgt__search_job *job;
    int n, cap, next;
    const mgt_sim_options *opt;
    pthread_mutex_t mu;
} mgt__search_jobs;

/* job's step simulated into its choice */
static void mgt__search_run(mgt__search_job *job, const mgt_sim_options *opt) {
    mgt_sim_result res;
    mgt_layout_choice *c = &job->choice;
    const mgt_config *cfg = &job->cfg;
    int k;
    job->rc = mgt_sim_run(cfg, opt, &res);
    if (job->rc != MGT_OK) { mgt__strlcpy(job->why, mgt_last_error(), sizeof job->why); return; }
    memset(c, 0, sizeof *c);
    c->dp = cfg->parallel.dp; c->tp = cfg->parallel.tp; c->pp = cfg->parallel.pp; c->zero = cfg->parallel.zero;
    c->micro_batch = cfg->train.micro_batch; c->recompute = cfg->train.recompute; c->pp_schedule = cfg->parallel.pp_schedule;
    c->step_s = res.step_s; c->tokens_per_s = res.tokens_per_s; c->mfu = res.mfu; c->mem_gib = res.mem_peak_gib;
    c->bubble_s = res.ranks[0].bubble_s;
    for (k = 0; k < MGT_COLL_COUNT; k++) c->exposed_s += res.ranks[0].exposed_s[k];
    mgt_sim_result_free(&res);
}
static void *mgt__search_worker(void *arg) {
    mgt__search_jobs *q = (mgt__search_jobs *)arg;
    for (;;) {
        int i;
        pthread_mutex_lock(&q->mu);
        i = q->next++;
        pthread_mutex_unlock(&q->mu);
        if (i >= q->n) return NULL;
        mgt__search_run(&q->job[i], q->opt);
    }
}
/* queues cfg; 0 when out of memory */
static int mgt__search_queue(mgt__search_jobs *q, const mgt_config *cfg, int fallback) {
    if (q->n == q->cap) {
        int grown = q->cap ? 2 * q->cap : 64;
        mgt__search_job *g = (mgt__search_job *)MGT_REALLOC(q->job, sizeof *g * (size_t)grown);
        if (!g) return 0;
        q->job = g;
        q->cap = grown;
    }
    q->job[q->n].cfg = *cfg;
    q->job[q->n].fallback = fallback;
    q->job[q->n].rc = MGT_OK;
    q->job[q->n].why[0] = 0;
    q->n++;
    return 1;
}

MGTDEF mgt_result mgt_plan_search(const mgt_config *base, const mgt_sim_options *opt, int world, mgt_layout_search *out) {
    int tp, pp, zero, micro, k, sched, per_node, i, threads, started = 0;
    double t0 = mgt_now();
    mgt_result last_rc = MGT_OK;
    char last_why[320] = "";
    mgt__search_jobs q;
    pthread_t tid[64];
    if (!base || !opt || !out) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_plan_search: base, opt and out are required");
    memset(out, 0, sizeof *out);
    if (world < 1) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_plan_search: %d GPUs", world);
    if (base->parallel.cp > 1)
        return mgt__fail(MGT_ERROR_CONFIG, "the layout search does not choose context parallelism: [parallel] cp = %d; plan the layout with cp as it is "
                         "(mgt plan without --search), or search with cp = 1", base->parallel.cp);
    memset(&q, 0, sizeof q);
    per_node = opt->gpus_per_node > 0 ? opt->gpus_per_node : world;
    for (tp = 1; tp <= world && tp <= per_node; tp++) {
        if (world % tp || base->model.n_head % tp) continue;
        for (pp = 1; pp <= world / tp && pp <= base->model.n_layer && pp <= MGT_MAX_PP; pp++) {
            int dp = world / tp / pp;
            if ((world / tp) % pp || base->train.global_batch % dp) continue;
            for (zero = 0; zero <= (dp > 1 ? 3 : 0); zero++)
                for (micro = base->train.global_batch / dp; micro >= 1; micro--) {
                    if ((base->train.global_batch / dp) % micro) continue;
                    for (sched = 0; sched < (pp > 1 ? 2 : 1); sched++)
                        for (k = 0; k < 3; k++) { /* the least recompute that fits: none, selective, full */
                            mgt_config cfg = *base;
                            double mem;
                            /* only the least, unless base asks for recompute (an auto layout's pinned recompute): then each that fits */
                            int only = base->train.recompute == MGT_RECOMPUTE_NONE;
                            cfg.parallel.dp = dp; cfg.parallel.tp = tp; cfg.parallel.pp = pp; cfg.parallel.zero = zero;
                            cfg.train.micro_batch = micro; cfg.train.recompute = mgt__search_modes[k]; cfg.parallel.pp_schedule = sched;
                            cfg.parallel.layout = MGT_LAYOUT_MANUAL; /* a layout of its own, checked as such */
                            cfg.parallel.pp_virtual = 1; /* the search compares plain schedules */
                            mem = mgt__search_mem(&cfg, &opt->device);
                            if (mem < 0 || mem > opt->device.mem_gib) continue;
                            /* refused by the simulator, the next mode is tried (mgt__search_job.fallback) */
                            if (!mgt__search_queue(&q, &cfg, only ? k + 1 : 0)) { MGT_FREE(q.job); return mgt__fail(MGT_ERROR_MEMORY, "out of memory"); }
                            if (only) break; /* more recompute only pays where it lets a micro-batch fit */
                        }
                }
        }
    }
    /* simulated on a thread a core (the cpu device one at a time: it measures its ops on the cores),
       at most 4096 simulated ranks at once; the list is the same in any order of completion */
    threads = opt->device.host_sync ? 1 : mgt_cpu_count();
    if (threads > 64) threads = 64;
    if (threads > 4096 / world) threads = 4096 / world > 0 ? 4096 / world : 1;
    if (threads > q.n) threads = q.n;
    q.opt = opt;
    pthread_mutex_init(&q.mu, NULL);
    for (i = 1; i < threads; i++)
        if (pthread_create(&tid[i], NULL, mgt__search_worker, &q) == 0) started = i;
        else break;
    mgt__search_worker(&q);
    for (i = 1; i <= started; i++) pthread_join(tid[i], NULL);
    pthread_mutex_destroy(&q.mu);
    out->layouts = (mgt_layout_choice *)MGT_MALLOC(sizeof *out->layouts * (size_t)(q.n > 0 ? q.n : 1));
    if (!out->layouts) { MGT_FREE(q.job); return mgt__fail(MGT_ERROR_MEMORY, "out of memory"); }
    for (i = 0; i < q.n; i++) { /* in the order of the loops above */
        mgt__search_job *j = &q.job[i];
        if (j->rc != MGT_OK && j->fallback) { /* refused: the next recompute that fits, as the loops above would have */
            int m;
            for (m = j->fallback; m < 3 && j->rc != MGT_OK; m++) {
                double mem;
                j->cfg.train.recompute = mgt__search_modes[m];
                mem = mgt__search_mem(&j->cfg, &opt->device);
                if (mem < 0 || mem > opt->device.mem_gib) continue;
                out->failed++;
                last_rc = j->rc;
                mgt__strlcpy(last_why, j->why, sizeof last_why);
                mgt__search_run(j, opt);
            }
        }
        if (j->rc == MGT_OK) out->layouts[out->count++] = j->choice;
        else {
            out->failed++;
            last_rc = j->rc;
            mgt__strlcpy(last_why, j->why, sizeof last_why);
        }
    }
    if (last_rc != MGT_OK) mgt__fail(last_rc, "%s", last_why); /* mgt_last_error says why, for the last */
    MGT_FREE(q.job);
    if (out->count) qsort(out->layouts, (size_t)out->count, sizeof *out->layouts, mgt__search_faster);
    out->wall_s = mgt_now() - t0;
    return MGT_OK;
}
MGTDEF void mgt_layout_search_free(mgt_layout_search *search) {
    if (!search) return;
    MGT_FREE(search->layouts);
    memset(search, 0, sizeof *search);
}
