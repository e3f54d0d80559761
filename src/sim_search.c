/* src/sim_search.c - the layout search: every layout of a number of GPUs that fits, simulated,
   fastest first (mgt plan --search) */

/* GiB the fullest rank of cfg needs on a GPU (the plan, the device's reserve, the attention
   scratch), or -1 when cfg is not a valid layout */
static double mgt__search_mem(const mgt_config *layout, const mgt_sim_device *d) {
    mgt_config gpu = *layout; /* planned as GPU ranks: flash attention's activations */
    mgt_plan plan;
    int r, c, tp = gpu.parallel.tp, dp = gpu.parallel.dp, pp = gpu.parallel.pp;
    double worst = 0;
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
/* appends one simulated layout; 0 when out of memory */
static int mgt__search_add(mgt_layout_search *s, int *cap, const mgt_config *cfg, const mgt_sim_result *res) {
    mgt_layout_choice *c;
    int k;
    if (s->count == *cap) {
        int grown = *cap ? 2 * *cap : 64;
        mgt_layout_choice *g = (mgt_layout_choice *)MGT_MALLOC(sizeof *g * (size_t)grown);
        if (!g) return 0;
        if (s->count) memcpy(g, s->layouts, sizeof *g * (size_t)s->count);
        MGT_FREE(s->layouts);
        s->layouts = g;
        *cap = grown;
    }
    c = &s->layouts[s->count++];
    memset(c, 0, sizeof *c);
    c->dp = cfg->parallel.dp; c->tp = cfg->parallel.tp; c->pp = cfg->parallel.pp; c->zero = cfg->parallel.zero;
    c->micro_batch = cfg->train.micro_batch; c->recompute = cfg->train.recompute; c->pp_schedule = cfg->parallel.pp_schedule;
    c->step_s = res->step_s; c->tokens_per_s = res->tokens_per_s; c->mfu = res->mfu; c->mem_gib = res->mem_peak_gib;
    c->bubble_s = res->ranks[0].bubble_s;
    for (k = 0; k < MGT_COLL_COUNT; k++) c->exposed_s += res->ranks[0].exposed_s[k];
    return 1;
}

MGTDEF mgt_result mgt_plan_search(const mgt_config *base, const mgt_sim_options *opt, int world, mgt_layout_search *out) {
    int cap = 0, tp, pp, zero, micro, k, sched, per_node;
    double t0 = mgt_now();
    if (!base || !opt || !out) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_plan_search: base, opt and out are required");
    memset(out, 0, sizeof *out);
    if (opt->device.host_sync) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_plan_search: the search is for GPUs, not '%s'", opt->device.name);
    if (world < 1) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_plan_search: %d GPUs", world);
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
                            static const int modes[3] = {MGT_RECOMPUTE_NONE, MGT_RECOMPUTE_SELECTIVE, MGT_RECOMPUTE_FULL};
                            mgt_config cfg = *base;
                            mgt_sim_result res;
                            double mem;
                            cfg.parallel.dp = dp; cfg.parallel.tp = tp; cfg.parallel.pp = pp; cfg.parallel.zero = zero;
                            cfg.train.micro_batch = micro; cfg.train.recompute = modes[k]; cfg.parallel.pp_schedule = sched;
                            mem = mgt__search_mem(&cfg, &opt->device);
                            if (mem < 0 || mem > opt->device.mem_gib) continue;
                            if (mgt_sim_run(&cfg, opt, &res) != MGT_OK) { out->failed++; continue; }
                            if (!mgt__search_add(out, &cap, &cfg, &res)) {
                                mgt_sim_result_free(&res);
                                mgt_layout_search_free(out);
                                return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
                            }
                            mgt_sim_result_free(&res);
                            break; /* more recompute only pays where it lets a micro-batch fit */
                        }
                }
        }
    }
    if (out->count) qsort(out->layouts, (size_t)out->count, sizeof *out->layouts, mgt__search_faster);
    out->wall_s = mgt_now() - t0;
    return MGT_OK;
}
MGTDEF void mgt_layout_search_free(mgt_layout_search *search) {
    if (!search) return;
    MGT_FREE(search->layouts);
    memset(search, 0, sizeof *search);
}
