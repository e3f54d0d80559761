/* src/layout_auto.c - a layout chosen for you: parallel.layout = auto resolved into the layout keys by
   the layout search, on this machine's GPUs or cores (mgt_config_resolve_layout); under MGT_NO_SIM a
   stand-in that refuses auto */

#ifndef MGT_NO_SIM
/* the simulator's model of a GPU that names itself `name` ("NVIDIA H100 80GB HBM3"), or NULL (as mgt
   doctor names them: a GH200 is priced as an H200) */
static const char *mgt__layout_gpu_model(const char *name) {
    char up[96];
    size_t i;
    for (i = 0; name[i] && i + 1 < sizeof up; i++) up[i] = (char)(name[i] >= 'a' && name[i] <= 'z' ? name[i] - 32 : name[i]);
    up[i] = 0;
    if (strstr(up, "A100")) return "a100";
    if (strstr(up, "H100")) return "h100";
    if (strstr(up, "H200")) return "h200";
    if (strstr(up, "B200")) return "b200";
    return NULL;
}

/* whether layout c keeps every pinned key of cfg (zero only counts where there is DP, the schedule
   where there is a pipeline: the search tries no others there) */
static int mgt__layout_keeps(const mgt_config *cfg, const int *pinned, const mgt_layout_choice *c) {
    return (!pinned[0] || c->dp == cfg->parallel.dp) && (!pinned[1] || c->tp == cfg->parallel.tp) && (!pinned[2] || c->pp == cfg->parallel.pp) &&
           (!pinned[3] || c->dp == 1 || c->zero == cfg->parallel.zero) && (!pinned[4] || c->pp == 1 || c->pp_schedule == cfg->parallel.pp_schedule) &&
           (!pinned[5] || c->micro_batch == cfg->train.micro_batch) && (!pinned[6] || c->recompute == cfg->train.recompute);
}

/* cfg with layout c (pinned keys keep their values), each chosen key marked as auto's choice */
static void mgt__layout_apply(mgt_config *cfg, const int *pinned, const mgt_layout_choice *c) {
    int v[MGT__LAYOUT_KEYS], k;
    v[0] = c->dp; v[1] = c->tp; v[2] = c->pp; v[3] = c->zero; v[4] = c->pp_schedule; v[5] = c->micro_batch; v[6] = c->recompute;
    for (k = 0; k < MGT__LAYOUT_KEYS; k++) {
        if (pinned[k]) continue;
        if (k == 0) cfg->parallel.dp = v[k];
        else if (k == 1) cfg->parallel.tp = v[k];
        else if (k == 2) cfg->parallel.pp = v[k];
        else if (k == 3) cfg->parallel.zero = v[k];
        else if (k == 4) cfg->parallel.pp_schedule = v[k];
        else if (k == 5) cfg->train.micro_batch = v[k];
        else cfg->train.recompute = v[k];
        cfg->line[mgt__find_key(mgt__layout_keys[k][0], mgt__layout_keys[k][1])] = MGT__FROM_LAYOUT;
    }
}

/* whether cfg with layout c fits this machine as mgt_run_create checks it (api: its GPUs; NULL: the CPU) */
static int mgt__layout_fits(const mgt_config *cfg, const int *pinned, const mgt_layout_choice *c, const mgt_cuda_api *api) {
    mgt_config t = *cfg;
    mgt_plan plan;
    mgt_fit fit;
    mgt__layout_apply(&t, pinned, c);
    t.parallel.layout = MGT_LAYOUT_MANUAL;
    if (mgt_config_validate(&t) != MGT_OK || mgt__plan_make(&t, &plan) != MGT_OK) return 0;
    mgt__fit_on(&plan, api, 0, &fit);
    return fit.fits || !fit.checked;
}

MGTDEF mgt_result mgt_config_resolve_layout(mgt_config *cfg, mgt_layout_auto *out) {
    const mgt_cuda_api *api = NULL;
    mgt_sim_options o;
    mgt_config base;
    int pinned[MGT__LAYOUT_KEYS], k, gpus = 0, threads, worlds[32], nworlds = 0, w, have = 0, fixed_world = 0, processes;
    double t0 = mgt_now();
    char why[900] = "", where[300];
    if (!cfg || !out) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_config_resolve_layout: cfg and out are required");
    memset(out, 0, sizeof *out);
    if (!mgt__layout_unresolved(cfg)) return MGT_OK; /* manual, or chosen already */
    MGT__TRY(mgt_config_resolve_init(cfg)); /* the model the layouts are of */
    MGT__TRY(mgt_config_validate(cfg));
    mgt__where(cfg, mgt__find_key("parallel", "layout"), where, sizeof where);
    if ((processes = mgt_mpi_launcher(NULL, 0)) > 1) /* each process would choose by itself, and on the CPU measure differently */
        return mgt__fail(MGT_ERROR_UNSUPPORTED, "%s: [parallel] layout = auto under an MPI launcher of %d processes: not supported; set the layout "
                         "(`mgt plan PRESET --gpu NAME --gpus N --search` lists the fastest)", where, processes);
    for (k = 0; k < MGT__LAYOUT_KEYS; k++) {
        pinned[k] = mgt__layout_pinned(cfg, mgt__find_key(mgt__layout_keys[k][0], mgt__layout_keys[k][1]));
        if (pinned[k]) {
            char value[32];
            mgt_config_value_string(cfg, mgt__find_key(mgt__layout_keys[k][0], mgt__layout_keys[k][1]), value, sizeof value);
            mgt__catf(out->pins, sizeof out->pins, "%s%s.%s = %s", out->pinned++ ? ", " : "", mgt__layout_keys[k][0], mgt__layout_keys[k][1], value);
        }
    }
    base = *cfg;
    base.parallel.layout = MGT_LAYOUT_MANUAL;
    mgt_sim_options_init(&o);
    /* where the ranks go: GPUs where the CUDA library finds them (device cuda or auto), else the CPU */
    if (cfg->parallel.device != MGT_DEVICE_CPU) {
        api = mgt_cuda_load(why, sizeof why);
        if (api && (api->probe(&gpus, why, sizeof why) != 0 || gpus < 1)) api = NULL;
        if (!api && cfg->parallel.device == MGT_DEVICE_CUDA)
            return mgt__fail(MGT_ERROR_UNSUPPORTED, "%s: [parallel] layout = auto with device = cuda, but no usable GPU: %s", where, why[0] ? why : "none found");
    }
    if (api) { /* every GPU visible, priced as the simulator's model of its name, with the least free memory of them */
        double least = -1;
        const char *model = NULL;
        mgt_gpu_info info;
        for (k = 0; k < gpus; k++) {
            memset(&info, 0, sizeof info);
            if (api->info(k, &info) != 0) return mgt__fail(MGT_ERROR_DEVICE, "%s: parallel.layout = auto: cannot read GPU %d", where, k);
            if (!(model = mgt__layout_gpu_model(info.name)))
                return mgt__fail(MGT_ERROR_UNSUPPORTED, "%s: [parallel] layout = auto: the step simulator has no model of GPU %d, %s (it knows A100, H100, H200 "
                                 "and B200); set the layout (parallel.layout = manual)", where, k, info.name);
            if (least < 0 || (double)info.memory_free < least) least = (double)info.memory_free;
        }
        MGT__TRY(mgt_sim_device_find(model, 0, &o.device));
        o.device.mem_gib = least / 1073741824.0;
        o.gpus_per_node = gpus;
        out->on_gpus = 1;
        out->devices = gpus;
    } else { /* ranks are threads sharing the cores: the cpu device runs each op of each shape to price it */
        threads = cfg->parallel.threads > 0 ? cfg->parallel.threads : mgt_cpu_count();
        MGT__TRY(mgt_sim_device_find("cpu", threads, &o.device));
        out->devices = threads;
    }
    mgt__strlcpy(out->device, o.device.name, sizeof out->device);
    mgt__strlcpy(out->title, o.device.title, sizeof out->title);
    if (pinned[0] && pinned[1] && pinned[2]) { /* the pins say how many ranks */
        fixed_world = mgt_config_ranks(cfg);
        if (api && fixed_world > gpus)
            return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] layout = auto with dp x tp x pp pinned to %d ranks (%s), on %d GPUs", where, fixed_world, out->pins, gpus);
        worlds[nworlds++] = fixed_world;
    } else if (api) /* all the GPUs; fewer only where no layout of all of them fits (the loop below stops at the first that has one) */
        for (w = gpus; w >= 1 && nworlds < 32; w--) worlds[nworlds++] = w;
    else { /* 1, 2, 4, ... ranks and the threads themselves: each rank at least a thread, the threads divided between them */
        for (w = 1; w <= out->devices && nworlds < 31; w *= 2) worlds[nworlds++] = w;
        if (worlds[nworlds - 1] != out->devices) worlds[nworlds++] = out->devices;
    }
    for (w = 0; w < nworlds; w++) {
        mgt_layout_search found;
        mgt_sim_options ow = o;
        int i;
        if (!api) { /* a rank's share of the machine's peak, as mgt plan --gpu cpu reckons MFU */
            for (i = 0; i < 3; i++) ow.device.tensor_tflops[i] /= worlds[w];
            ow.device.vector_tflops /= worlds[w];
            ow.device.transc_gps /= worlds[w];
            ow.gpus_per_node = worlds[w];
        }
        if (!api) mgt__sim_share(1); /* the CPU: an op shape measured once for the whole search, per rank count */
        {
            mgt_result res = mgt_plan_search(&base, &ow, worlds[w], &found);
            if (!api) mgt__sim_share(0);
            MGT__TRY(res);
        }
        out->simulated += found.count;
        for (i = 0; i < found.count; i++) { /* fastest first: the first two that keep the pins and fit as the run will check */
            const mgt_layout_choice *c = &found.layouts[i];
            if (!mgt__layout_keeps(cfg, pinned, c)) continue;
            out->eligible++;
            if (have == 2 && c->tokens_per_s <= out->runner_up.tokens_per_s) continue;
            if (!mgt__layout_fits(cfg, pinned, c, api)) continue;
            if (!have || c->tokens_per_s > out->chosen.tokens_per_s) {
                if (have) out->runner_up = out->chosen;
                out->chosen = *c;
                have = have ? 2 : 1;
            } else if (have == 1 || c->tokens_per_s > out->runner_up.tokens_per_s) {
                out->runner_up = *c;
                have = 2;
            }
        }
        mgt_layout_search_free(&found);
        if (api && have) break; /* GPUs: the most GPUs that hold a layout */
    }
    out->has_runner_up = have == 2;
    out->search_s = mgt_now() - t0;
    if (!have)
        return mgt__fail(MGT_ERROR_CONFIG, "%s: [parallel] layout = auto: no layout of up to %d %s fits%s%s (%d simulated; global batch %d); %s",
                         where, out->devices, api ? o.device.title : "CPU threads", out->pinned ? " with " : "", out->pins, out->simulated,
                         cfg->train.global_batch, out->pinned ? "pin fewer layout keys, or train a smaller model" : "train a smaller model, or on a machine with more memory");
    mgt__layout_apply(cfg, pinned, &out->chosen);
    cfg->line[mgt__find_key("parallel", "layout")] = MGT__FROM_LAYOUT;
    out->searched = 1;
    return mgt_config_validate(cfg);
}
#else
MGTDEF mgt_result mgt_config_resolve_layout(mgt_config *cfg, mgt_layout_auto *out) {
    if (!cfg || !out) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_config_resolve_layout: cfg and out are required");
    memset(out, 0, sizeof *out);
    if (!mgt__layout_unresolved(cfg)) return MGT_OK;
    return mgt__fail(MGT_ERROR_UNSUPPORTED, "[parallel] layout = auto needs the step simulator, which this build leaves out (MGT_NO_SIM); set the layout");
}
#endif
