/* src/checkpoint.c - layout-independent checkpoints: the ranks' slices gathered into global tensors,
   and back */
/* ---- layout-independent checkpoints: gather the ranks' slices into global tensors, and back ---- */

enum { MGT__BUF_PARAMS, MGT__BUF_M, MGT__BUF_V };

/* element `flat` of (tp, pp)'s local fp32 buffer `which`, wherever ZeRO keeps it: the parameters
   are the master weights under 16-bit storage (sharded as the moments), else the compute copy */
static float *mgt__element(mgt_run *r, int which, int tpr, int ppr, int unit, size_t flat, int replica) {
    mgt__rank *rk0 = mgt__rank_at(r, replica, tpr, ppr);
    const mgt__unit *u = &rk0->lay.u[unit];
    int master = which == MGT__BUF_PARAMS && rk0->master;
    int sharded = which == MGT__BUF_PARAMS && !master ? r->plan.zero >= 3 : r->plan.zero >= 1;
    size_t s, d;
    mgt__rank *owner;
#define MGT__BUF(rk) (which == MGT__BUF_PARAMS ? (master ? (rk)->master : (float *)((rk)->params ? (rk)->params : (rk)->pshard)) : which == MGT__BUF_M ? (rk)->m : (rk)->v)
    if (!sharded) return MGT__BUF(rk0) + flat;
    s = u->size / (size_t)r->plan.replicas;
    d = (flat - u->offset) / s;
    owner = mgt__rank_at(r, (int)d, tpr, ppr);
    return MGT__BUF(owner) + u->shard_offset + (flat - u->offset - d * s);
#undef MGT__BUF
}

/* A backend whose memory the host cannot touch (a GPU) has the buffers that host code reads and
   writes element by element (initialisation, checkpoints) copied to host memory in between:
   mgt__mirror swaps a rank's params, pshard, master, m and v for downloaded copies, mgt__unmirror
   uploads them (when `changed`) and swaps back. Calls nest (the outermost pair copies). A no-op
   on the CPU backend. */
static void mgt__mirror_bytes(const mgt__rank *rk, size_t bytes[5]) {
    size_t opt = sizeof(float) * (rk->run->plan.zero >= 1 ? rk->shard : rk->lay.size);
    bytes[0] = rk->be->elt * rk->lay.size;
    bytes[1] = rk->be->elt * rk->shard;
    bytes[2] = bytes[3] = bytes[4] = opt;
}
static void mgt__mirror_swap(mgt__rank *rk, void *ptrs[5]) {
    void *old[5];
    int k;
    old[0] = rk->params; old[1] = rk->pshard; old[2] = rk->master; old[3] = rk->m; old[4] = rk->v;
    rk->params = ptrs[0]; rk->pshard = ptrs[1]; rk->master = (float *)ptrs[2]; rk->m = (float *)ptrs[3]; rk->v = (float *)ptrs[4];
    for (k = 0; k < 5; k++) ptrs[k] = old[k];
}
static void mgt__unmirror(mgt__rank *rk, int changed) {
    size_t bytes[5];
    void *host[5];
    int k;
    if (rk->mirror_depth == 0 || --rk->mirror_depth > 0) return;
    mgt__mirror_bytes(rk, bytes);
    mgt__enter(rk->be);
    for (k = 0; k < 5; k++) host[k] = rk->mirrored[k];
    mgt__mirror_swap(rk, host); /* host[] now holds the host copies, the rank its own buffers */
    for (k = 0; k < 5; k++) {
        if (host[k] && changed) rk->be->upload(rk->be, rk->mirrored[k], host[k], bytes[k]);
        MGT_FREE(host[k]);
        rk->mirrored[k] = NULL;
    }
}
static mgt_result mgt__mirror(mgt__rank *rk) {
    size_t bytes[5];
    void *dev[5], *host[5] = {NULL, NULL, NULL, NULL, NULL};
    int k;
    if (rk->be->host_memory) return MGT_OK;
    if (rk->mirror_depth > 0) {
        rk->mirror_depth++;
        return MGT_OK;
    }
    mgt__mirror_bytes(rk, bytes);
    mgt__enter(rk->be);
    dev[0] = rk->params; dev[1] = rk->pshard; dev[2] = rk->master; dev[3] = rk->m; dev[4] = rk->v;
    for (k = 0; k < 5; k++) {
        if (!dev[k]) continue;
        host[k] = MGT_MALLOC(bytes[k]);
        if (!host[k]) {
            double mib = (double)bytes[k] / 1048576.0;
            while (k-- > 0) MGT_FREE(host[k]);
            return mgt__fail(MGT_ERROR_MEMORY, "out of host memory for a copy of rank %d's parameters (%.1f MiB)", rk->rank, mib);
        }
        rk->be->download(rk->be, host[k], dev[k], bytes[k]);
    }
    mgt__mirror_swap(rk, host); /* host[] now holds the device buffers */
    for (k = 0; k < 5; k++) rk->mirrored[k] = host[k];
    rk->mirror_depth = 1;
    return MGT_OK;
}
static mgt_result mgt__mirror_all(mgt_run *r) {
    int i;
    for (i = r->rank_lo; i < r->rank_hi; i++) {
        mgt_result res = mgt__mirror(&r->ranks[i]);
        if (res != MGT_OK) {
            while (i-- > r->rank_lo) mgt__unmirror(&r->ranks[i], 0);
            return res;
        }
    }
    return MGT_OK;
}
static void mgt__unmirror_all(mgt_run *r, int changed) {
    int i;
    for (i = r->rank_lo; i < r->rank_hi; i++) mgt__unmirror(&r->ranks[i], changed);
}

/* copies between the ranks' buffers and global fp32 tensors (one per tensor of the global layout):
   to_global gathers (each element from one rank), else every rank takes its own elements. Under
   16-bit storage the parameters are the master weights (none when sampling), and loading also sets
   the compute copy, rounded, on every rank that holds the element. */
/* under MPI: does this process hold element `flat` of buffer `which` of rank rk's unit (its
   owner's shard, when sharded)? */
static int mgt__element_here(mgt_run *r, int which, const mgt__rank *rk, int unit, size_t flat) {
    const mgt__unit *u = &rk->lay.u[unit];
    int master = which == MGT__BUF_PARAMS && rk->master, owner;
    int sharded = which == MGT__BUF_PARAMS && !master ? r->plan.zero >= 3 : r->plan.zero >= 1;
    if (!sharded) return 1;
    owner = mgt__rank_at(r, (int)((flat - u->offset) / (u->size / (size_t)r->plan.replicas)), rk->tpr, rk->ppr)->rank;
    return owner >= r->rank_lo && owner < r->rank_hi;
}

/* to_global with `here` (under MPI): this process's ranks only, each element it holds marked in
   here[tensor] (replicas hold the same bits, so any one of them will do) */
static void mgt__exchange(mgt_run *r, int which, const mgt__layout *global, float **tensors, int to_global, unsigned char **here) {
    int sixteen = r->dtype != MGT_F32, i, t, g, row, c;
    for (i = r->rank_lo; i < r->rank_hi; i++) {
        mgt__rank *rk = &r->ranks[i];
        int master = which == MGT__BUF_PARAMS && rk->master, has_buf = which != MGT__BUF_PARAMS || master || !sixteen;
        int sharded = which == MGT__BUF_PARAMS && !master ? r->plan.zero >= 3 : r->plan.zero >= 1;
        int copy = !to_global && sixteen && which == MGT__BUF_PARAMS, copy_sharded = r->plan.zero >= 3 && !r->inference;
        if (to_global && rk->replica != 0 && !here) continue;
        for (t = 0; t < rk->lay.n; t++) {
            const mgt__tensor *x = &rk->lay.t[t];
            float *glob = NULL;
            unsigned char *mark = NULL;
            size_t lo, hi, gcols = (size_t)(x->info.ndim == 2 ? x->info.shape[1] : 1);
            if (to_global && x->tied_copy) continue;
            for (g = 0; g < global->n; g++)
                if (!strcmp(global->t[g].info.name, x->info.name)) { glob = tensors[g]; mark = here ? here[g] : NULL; }
            mgt__unit_slice(rk, x->unit, &lo, &hi);
            for (row = 0; row < x->rows; row++) {
                int grow = mgt__global_row(x, row);
                for (c = 0; c < x->cols; c++) {
                    size_t flat = x->offset + (size_t)row * (size_t)x->cols + (size_t)c;
                    size_t gidx = (size_t)grow * gcols + (size_t)(x->col_start + c);
                    int mine = flat >= lo && flat < hi;
                    float value = grow >= 0 && !to_global ? glob[gidx] : 0.0f;
                    if (to_global) {
                        if (grow >= 0 && !mark) glob[gidx] = *mgt__element(r, which, rk->tpr, rk->ppr, x->unit, flat, 0);
                        else if (grow >= 0 && mgt__element_here(r, which, rk, x->unit, flat)) {
                            glob[gidx] = *mgt__element(r, which, rk->tpr, rk->ppr, x->unit, flat, rk->replica);
                            mark[gidx] = 1;
                        }
                        continue;
                    }
                    if (has_buf && (!sharded || mine)) /* a shard takes only its slice */
                        *mgt__element(r, which, rk->tpr, rk->ppr, x->unit, flat, rk->replica) = value;
                    if (copy && !copy_sharded) mgt__store(rk->params, flat, r->dtype, value);
                    else if (copy && mine) mgt__store(rk->pshard, rk->lay.u[x->unit].shard_offset + (flat - lo), r->dtype, value);
                }
            }
        }
    }
}

/* the tensors of the whole model, one rank's view with no parallelism: names, global shapes */
static mgt_result mgt__global_layout(const mgt_config *cfg, mgt__layout *lay) {
    mgt_plan one;
    mgt_config c1 = *cfg;
    c1.parallel.dp = c1.parallel.tp = c1.parallel.pp = c1.parallel.cp = 1;
    c1.parallel.pp_virtual = 1;
    MGT__TRY(mgt__plan_make(&c1, &one));
    if (!mgt__layout_alloc(lay, &one)) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    mgt__layout_make(lay, &one, 0, 0);
    return MGT_OK;
}

/* global tensors of buffer `which` (params, m, v), gathered from the ranks; free with MGT_FREE */
/* under MPI: each process takes the elements its ranks hold, and process 0 merges every process's
   into `out` (the others' `out` is only their part) */
static mgt_result mgt__gather_mpi(mgt_run *r, const mgt__layout *g, int which, float **out) {
    mgt__mpi_world *w = r->procs;
    int n = g->n, t, p, nreq = 0, *peer = (int *)MGT_MALLOC(sizeof(int) * 2 * (size_t)n);
    unsigned char **here = (unsigned char **)MGT_MALLOC(sizeof(unsigned char *) * (size_t)n);
    unsigned char **got = (unsigned char **)MGT_MALLOC(sizeof(unsigned char *) * (size_t)n);
    float **theirs = (float **)MGT_MALLOC(sizeof(float *) * (size_t)n);
    void **req = (void **)MGT_MALLOC(sizeof(void *) * 2 * (size_t)n);
    mgt_result res = peer && here && got && theirs && req ? MGT_OK : mgt__fail(MGT_ERROR_MEMORY, "out of memory gathering a checkpoint");
    char why[512], who[64], what[96];
    size_t e;
    for (t = 0; t < n; t++) { if (here) here[t] = NULL; if (got) got[t] = NULL; if (theirs) theirs[t] = NULL; }
    for (t = 0; t < n && res == MGT_OK; t++) {
        size_t numel = g->t[t].info.numel;
        here[t] = (unsigned char *)MGT_MALLOC(numel);
        if (w->process == 0) { got[t] = (unsigned char *)MGT_MALLOC(numel); theirs[t] = (float *)MGT_MALLOC(sizeof(float) * numel); }
        if (!here[t] || (w->process == 0 && (!got[t] || !theirs[t]))) res = mgt__fail(MGT_ERROR_MEMORY, "out of memory gathering a checkpoint");
        else memset(here[t], 0, numel);
    }
    if (res == MGT_OK) mgt__exchange(r, which, g, out, 1, here);
    snprintf(who, sizeof who, "process %d (on %s)", w->process, w->hosts[w->process]);
    snprintf(what, sizeof what, "gathering a checkpoint's %s to process 0", which == MGT__BUF_PARAMS ? "weights" : "optimizer moments");
    for (p = 1; p < w->processes && res == MGT_OK; p++) { /* process 0 takes each process's part in turn; a process sends its own */
        if (w->process != 0 && w->process != p) continue;
        nreq = 0;
        for (t = 0; t < n && res == MGT_OK; t++) {
            size_t numel = g->t[t].info.numel;
            int to = w->process == 0 ? p : 0;
            peer[nreq] = to * w->per;
            req[nreq] = w->process == 0 ? w->api->irecv(theirs[t], sizeof(float) * numel, p, 1, MGT_MPI_STARTUP, why, sizeof why)
                                        : w->api->isend(out[t], sizeof(float) * numel, 0, 1, MGT_MPI_STARTUP, why, sizeof why);
            if (!req[nreq++]) { res = mgt__pcomm_fail(w, why); break; }
            peer[nreq] = to * w->per;
            req[nreq] = w->process == 0 ? w->api->irecv(got[t], numel, p, 1, MGT_MPI_STARTUP, why, sizeof why)
                                        : w->api->isend(here[t], numel, 0, 1, MGT_MPI_STARTUP, why, sizeof why);
            if (!req[nreq++]) res = mgt__pcomm_fail(w, why);
        }
        if (res == MGT_OK) res = mgt__pcomm_wait(w, who, req, peer, nreq, what);
        else
            while (nreq-- > 0) if (req[nreq]) w->api->cancel(req[nreq]);
        for (t = 0; t < n && res == MGT_OK && w->process == 0; t++)
            for (e = 0; e < g->t[t].info.numel; e++)
                if (got[t][e] && !here[t][e]) { out[t][e] = theirs[t][e]; here[t][e] = 1; }
    }
    for (t = 0; t < n && res == MGT_OK && w->process == 0; t++) /* every element held somewhere, or the layout arithmetic is wrong */
        for (e = 0; e < g->t[t].info.numel; e++)
            if (!here[t][e]) { res = mgt__fail(MGT_ERROR_CHECKPOINT, "checkpoint: element %zu of %s held by no process", e, g->t[t].info.name); break; }
    for (t = 0; t < n; t++) {
        if (here) MGT_FREE(here[t]);
        if (got) MGT_FREE(got[t]);
        if (theirs) MGT_FREE(theirs[t]);
    }
    MGT_FREE(here);
    MGT_FREE(got);
    MGT_FREE(theirs);
    MGT_FREE(peer);
    MGT_FREE(req);
    return res;
}

/* the global tensors from this process's ranks, and from the other processes' under MPI */
static mgt_result mgt__gather_processes(mgt_run *r, const mgt__layout *g, int which, float **out) {
    if (r->procs) return mgt__gather_mpi(r, g, which, out);
    mgt__exchange(r, which, g, out, 1, NULL);
    return MGT_OK;
}

static float **mgt__gather_global(mgt_run *r, const mgt__layout *g, int which) {
    float **out = (float **)MGT_MALLOC(sizeof(float *) * (size_t)g->n);
    int t;
    if (!out) return NULL;
    for (t = 0; t < g->n; t++) out[t] = (float *)MGT_MALLOC(sizeof(float) * g->t[t].info.numel);
    for (t = 0; t < g->n; t++) if (!out[t]) { while (t < g->n) out[t++] = NULL; return out; }
    if (mgt__mirror_all(r) != MGT_OK) {
        for (t = 0; t < g->n; t++) MGT_FREE(out[t]);
        MGT_FREE(out);
        return NULL;
    }
    if (mgt__gather_processes(r, g, which, out) != MGT_OK) {
        for (t = 0; t < g->n; t++) MGT_FREE(out[t]);
        MGT_FREE(out);
        out = NULL;
    }
    mgt__unmirror_all(r, 0);
    return out;
}
static void mgt__free_global(const mgt__layout *g, float **tensors) {
    int t;
    if (!tensors) return;
    for (t = 0; t < g->n; t++) MGT_FREE(tensors[t]);
    MGT_FREE(tensors);
}


/* path made absolute against the working directory, in place; left as it is when it does not fit */
static void mgt__absolute_path(char *path, size_t cap) {
    char where[4096];
    size_t n;
    if (path[0] == '/' || !path[0] || !getcwd(where, sizeof where) || strlen(where) + 1 + strlen(path) >= cap) return;
    n = strlen(where);
    where[n] = '/';
    mgt__strlcpy(where + n + 1, path, sizeof where - n - 1);
    mgt__strlcpy(path, where, cap);
}
MGTDEF mgt_result mgt_run_save(mgt_run *r, char *path_out, size_t cap) {
    char path[1200], step_text[32], seed_text[32], tokens_text[32], loss_text[64], skipped_text[64], scale_text[64], wall_text[64], steps_text[64];
    char *preset = NULL;
    mgt__st_out *out = NULL;
    mgt__layout g;
    float **bufs[3] = {NULL, NULL, NULL};
    int i, k, n = 0, bytes_preset = 1 << 16, ok = 1, state;
    mgt_result res;
    const char *meta[22];
    static const char *prefix[3] = {"", "optim.m.", "optim.v."};
    if (!r) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_save: run is NULL");
    if (r->inference) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_save: this run was opened for sampling only");
    snprintf(path, sizeof path, "%s/step_%08d.safetensors", r->dir, r->step);
    if (path_out) mgt__strlcpy(path_out, path, cap);
    /* this step is saved already when its file is this folder's (a run resumed from another
       folder and not trained further is saved here too); under MPI every process decides alike,
       without looking at a file only process 0's machine may see */
    if (r->saved_step == r->step && !strcmp(r->saved_path, path) && (r->processes > 1 || !access(path, F_OK))) return MGT_OK;
    MGT__TRY(mgt__claim_once(r));
    MGT__TRY(mgt__global_layout(&r->plan.cfg, &g));
    state = mgt_run_state(r);
    mgt_run_set_state(r, MGT_STATE_CHECKPOINTING);
    res = mgt__mirror_all(r);
    if (res != MGT_OK) {
        mgt__layout_free(&g);
        mgt_run_set_state(r, state);
        return res;
    }
    for (k = 0; k < 3; k++) {
        bufs[k] = mgt__gather_global(r, &g, k);
        for (i = 0; ok && i < g.n; i++) ok = bufs[k] && bufs[k][i];
    }
    mgt__unmirror_all(r, 0);
    if (r->process > 0) { /* its part is with process 0, which writes the file */
        for (k = 0; k < 3; k++) mgt__free_global(&g, bufs[k]);
        mgt__layout_free(&g);
        mgt_run_set_state(r, state);
        if (!ok) return mgt__fail(MGT_ERROR_CHECKPOINT, "checkpoint of step %d: %s", r->step, mgt_last_error());
        r->saved_step = r->step;
        mgt__strlcpy(r->saved_path, path, sizeof r->saved_path);
        return MGT_OK;
    }
    out = (mgt__st_out *)MGT_MALLOC(sizeof *out * (size_t)g.n * 3);
    preset = (char *)MGT_MALLOC((size_t)bytes_preset);
    if (!ok || !out || !preset) res = mgt__fail(MGT_ERROR_MEMORY, "out of memory saving a checkpoint");
    else {
        mgt_config stored = r->plan.cfg;
        /* the tokenizer's files by their absolute path, so `mgt sample` decodes from any folder */
        if (stored.data.tokenizer == MGT_TOKENIZER_GPT2) mgt__absolute_path(stored.data.bpe_dir, sizeof stored.data.bpe_dir);
        if (stored.data.tokenizer == MGT_TOKENIZER_HF) mgt__absolute_path(stored.data.tokenizer_json, sizeof stored.data.tokenizer_json);
        mgt__absolute_path(stored.model.init, sizeof stored.model.init);
        ok = mgt__config_store(&stored, preset, (size_t)bytes_preset) >= 0; /* 64 KiB: every value 255 escaped bytes is ~30 */
        for (k = 0; k < 3; k++)
            for (i = 0; i < g.n; i++) {
                char *name = (char *)MGT_MALLOC(96);
                if (!name) { ok = 0; break; }
                snprintf(name, 96, "%s%s", prefix[k], g.t[i].info.name);
                out[n].name = name;
                out[n].data = bufs[k][i];
                out[n].dtype = "F32";
                out[n].ndim = g.t[i].info.ndim;
                out[n].shape[0] = g.t[i].info.shape[0];
                out[n].shape[1] = g.t[i].info.shape[1];
                out[n].bytes = sizeof(float) * g.t[i].info.numel;
                n++;
            }
        snprintf(step_text, sizeof step_text, "%d", r->step);
        snprintf(seed_text, sizeof seed_text, "%d", r->plan.cfg.train.seed);
        snprintf(tokens_text, sizeof tokens_text, "%lld", r->tokens_seen);
        snprintf(loss_text, sizeof loss_text, "%.17g", r->loss);
        meta[0] = "format"; meta[1] = MGT__CHECKPOINT_FORMAT;
        meta[2] = "step"; meta[3] = step_text;
        meta[4] = "seed"; meta[5] = seed_text;
        meta[6] = "tokens_seen"; meta[7] = tokens_text;
        meta[8] = "train_loss"; meta[9] = loss_text;
        meta[10] = "preset"; meta[11] = preset;
        /* updates skipped in all and fp16's finite steps since the scale changed ("skipped good"):
           AdamW's bias correction and the scale's window continue exactly; the weights saved are the
           fp32 master weights, so any storage type resumes any other */
        snprintf(skipped_text, sizeof skipped_text, "%d %d", r->skipped, r->good_steps);
        snprintf(scale_text, sizeof scale_text, "%.17g", r->loss_scale);
        meta[12] = "skipped_steps"; meta[13] = skipped_text;
        meta[14] = "run_id"; meta[15] = r->run_id;
        /* the run's clocks, so that a resumed run's elapsed time and events go on from here */
        snprintf(wall_text, sizeof wall_text, "%.3f", mgt_now() - r->created_s);
        snprintf(steps_text, sizeof steps_text, "%.6f", r->elapsed_s);
        meta[16] = "elapsed_s"; meta[17] = wall_text;
        meta[18] = "step_time_s"; meta[19] = steps_text;
        meta[20] = "loss_scale"; meta[21] = scale_text;
        res = ok ? mgt__st_write(path, out, n, meta, r->dtype == MGT_F16 ? 11 : 10) : mgt__fail(MGT_ERROR_MEMORY, "out of memory saving a checkpoint");
    }
    for (i = 0; i < n; i++) MGT_FREE((void *)out[i].name);
    MGT_FREE(out);
    MGT_FREE(preset);
    for (k = 0; k < 3; k++) mgt__free_global(&g, bufs[k]);
    mgt__layout_free(&g);
    mgt_run_set_state(r, state);
    if (res != MGT_OK) return res;
    r->saved_step = r->step;
    mgt__strlcpy(r->saved_path, path, sizeof r->saved_path);
    mgt__prune_checkpoints(r);
    mgt__event(r, MGT_LOG_INFO, "step %d: checkpoint %s", r->step, path);
    return MGT_OK;
}

/* the run state a checkpoint's metadata holds, each number parsed strictly and range-checked */
typedef struct mgt__resume_meta {
    long long step, seed, tokens, skipped, good;
    double loss_scale, elapsed_s, step_time_s; /* the clocks: 0 in checkpoints written before them */
    int has_scale;
    const char *run_id;
} mgt__resume_meta;
/* an optional non-negative number of the metadata; 0 when absent, -1 when malformed */
static double mgt__meta_seconds(const mgt__st_file *f, const char *key) {
    const char *v = mgt__st_meta(f, key);
    char *end;
    double x;
    if (!v) return 0;
    x = strtod(v, &end);
    return end == v || *end || !(x >= 0 && x < 1e12) ? -1 : x;
}
static mgt_result mgt__resume_meta_read(const mgt__st_file *f, const char *path, mgt__resume_meta *m) {
    const char *skipped = mgt__st_meta(f, "skipped_steps"), *scale = mgt__st_meta(f, "loss_scale"), *bad = NULL;
    memset(m, 0, sizeof *m);
    if (!mgt__meta_int(f, "step", 0, 2000000000, &m->step)) bad = "step";
    else if (!mgt__meta_int(f, "seed", 0, 2147483647, &m->seed)) bad = "seed";
    else if (!mgt__meta_int(f, "tokens_seen", 0, (long long)1 << 62, &m->tokens)) bad = "tokens_seen";
    else if (!(m->run_id = mgt__st_meta(f, "run_id")) || strlen(m->run_id) != 16 || strspn(m->run_id, "0123456789abcdef") != 16) bad = "run_id";
    else {
        int a = 0, b = 0, len = -1;
        if (!skipped || sscanf(skipped, "%d %d%n", &a, &b, &len) != 2 || len != (int)strlen(skipped) || a < 0 || a > m->step || b < 0 ||
            skipped[0] < '0' || skipped[0] > '9')
            bad = "skipped_steps";
        m->skipped = a;
        m->good = b;
    }
    if (!bad && (m->elapsed_s = mgt__meta_seconds(f, "elapsed_s")) < 0) bad = "elapsed_s";
    if (!bad && (m->step_time_s = mgt__meta_seconds(f, "step_time_s")) < 0) bad = "step_time_s";
    if (!bad && scale) { /* an fp16 run's dynamic loss scale: a power of two in [1, 2^100] */
        char *end;
        int e;
        m->loss_scale = strtod(scale, &end);
        if (end == scale || *end || !(m->loss_scale >= 1 && m->loss_scale <= ldexp(1.0, 100)) || frexp(m->loss_scale, &e) != 0.5) bad = "loss_scale";
        m->has_scale = 1;
    }
    if (bad) {
        const char *v = mgt__st_meta(f, bad);
        return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: metadata \"%s\" is %s%s%s, not a valid value; the file was not written by mgt or is damaged", path, bad,
                         v ? "\"" : "missing", v ? v : "", v ? "\"" : "");
    }
    return MGT_OK;
}

MGTDEF mgt_result mgt_run_resume(mgt_run *r, const char *what) {
    char path[1200];
    mgt__st_file f;
    mgt__layout g;
    mgt__resume_meta meta;
    mgt_result res = MGT_OK;
    float **tensors, **copies = NULL;
    int k, t, elsewhere;
    static const char *prefix[3] = {"", "optim.m.", "optim.v."};
    if (!r || !what) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_resume: run and checkpoint are required");
    MGT__TRY(mgt__resolve_checkpoint(what, r->dir, path, sizeof path));
    MGT__TRY(mgt__checkpoint_open(&f, path));
    if ((res = mgt__resume_meta_read(&f, path, &meta)) != MGT_OK) { mgt__st_close(&f); return res; }
    { /* is the checkpoint in the run's own folder (the same folder, however it is named)? */
        char folder[1200];
        struct stat a, b;
        const char *slash = strrchr(path, '/');
        snprintf(folder, sizeof folder, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
        elsewhere = stat(folder, &a) || stat(r->dir, &b) || a.st_dev != b.st_dev || a.st_ino != b.st_ino;
    }
    if (r->claimed) { /* a run that holds its folder checks it for the history it would continue before changing anything */
        mgt__history h;
        h.run_id = meta.run_id;
        h.first = elsewhere ? (int)meta.step : 0;
        h.last = (int)meta.step;
        if ((res = mgt__check_folder(r, &h, 1, 0)) != MGT_OK) { mgt__st_close(&f); return res; }
    }
    if ((res = mgt__global_layout(&r->plan.cfg, &g)) != MGT_OK) { mgt__st_close(&f); return res; }
    tensors = (float **)MGT_MALLOC(sizeof(float *) * (size_t)g.n);
    copies = (float **)MGT_MALLOC(sizeof(float *) * (size_t)g.n);
    if (copies) memset(copies, 0, sizeof(float *) * (size_t)g.n);
    if (tensors && copies) res = mgt__mirror_all(r);
    for (k = 0; k < (r->inference ? 1 : 3) && res == MGT_OK && tensors && copies; k++) {
        for (t = 0; t < g.n && res == MGT_OK; t++) { /* check every tensor before changing anything */
            const mgt_tensor_info *x = &g.t[t].info;
            char name[128];
            const mgt__st_tensor *s;
            snprintf(name, sizeof name, "%s%s", prefix[k], x->name);
            s = mgt__st_find(&f, name);
            if (!s) res = mgt__fail(MGT_ERROR_CHECKPOINT, "%s: has no tensor '%s'; it was written for another model", path, name);
            else if (strcmp(s->dtype, "F32") || s->ndim != x->ndim || s->shape[0] != x->shape[0] || (x->ndim == 2 && s->shape[1] != x->shape[1]) ||
                     s->end - s->begin != sizeof(float) * x->numel)
                res = mgt__fail(MGT_ERROR_CHECKPOINT, "%s: tensor '%s' is %s [%lld,%lld] but the preset's model needs F32 [%d,%d]; use the preset the run was trained with",
                                path, name, s->dtype, s->shape[0], s->ndim > 1 ? s->shape[1] : 0, x->shape[0], x->shape[1]);
            else if (s->begin % sizeof(float)) { /* an offset safetensors allows but a float load does not: read a copy */
                MGT_FREE(copies[t]);
                copies[t] = (float *)MGT_MALLOC(sizeof(float) * x->numel);
                if (!copies[t]) res = mgt__fail(MGT_ERROR_MEMORY, "out of memory");
                else memcpy(copies[t], mgt__st_data(&f, s), sizeof(float) * x->numel);
                tensors[t] = copies[t];
            } else tensors[t] = (float *)(void *)mgt__st_data(&f, s);
        }
        if (res == MGT_OK) mgt__exchange(r, k, &g, tensors, 0, NULL);
    }
    mgt__unmirror_all(r, res == MGT_OK);
    if (!tensors || !copies) res = mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    if (res == MGT_OK) {
        r->step = (int)meta.step;
        r->saved_step = r->step;
        mgt__strlcpy(r->saved_path, path, sizeof r->saved_path);
        mgt__strlcpy(r->run_id, meta.run_id, sizeof r->run_id);
        r->resumed = 1;
        r->resumed_elsewhere = elsewhere;
        r->tokens_seen = meta.tokens;
        r->elapsed_s = meta.step_time_s;
        r->created_s = mgt_now() - meta.elapsed_s; /* the run's clock goes on from the checkpoint's */
        r->skipped = (int)meta.skipped;
        r->good_steps = (int)meta.good;
        r->skipped_in_row = 0;
        if (r->dtype == MGT_F16 && meta.has_scale) r->loss_scale = meta.loss_scale; /* an fp16 run's scale; others start afresh */
        else if (r->dtype == MGT_F16) r->good_steps = 0;
        if (meta.seed != r->plan.cfg.train.seed)
            mgt__log(MGT_LOG_WARN, "%s was trained with seed %lld, this preset has %d: the data order changes", path, meta.seed, r->plan.cfg.train.seed);
        mgt__event(r, MGT_LOG_INFO, "resumed from %s at step %d", path, r->step);
    }
    if (copies) for (t = 0; t < g.n; t++) MGT_FREE(copies[t]);
    MGT_FREE(copies);
    MGT_FREE(tensors);
    mgt__layout_free(&g);
    mgt__st_close(&f);
    if (res == MGT_OK && r->claimed) res = mgt__open_metrics(r); /* its metrics continue this history */
    res = mgt__mpi_agree(r->procs, res, "resuming");
    return res;
}

