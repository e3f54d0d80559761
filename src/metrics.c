/* src/metrics.c - metrics.jsonl: a line per logged step and validation, cut back to the resumed
   step and read back as the dashboard's history when a run resumes in its folder */
/* metrics.jsonl of a run resumed from its own folder: the lines of steps after the resumed one
   were trained again, so they go, as does a last line a killed run left unfinished (written to a
   temporary file and renamed over it) */
static mgt_result mgt__metrics_truncate(const char *path, int step) {
    char tmp[sizeof(((mgt_run *)0)->metrics_path) + 8], line[1 << 14];
    FILE *in, *out;
    struct stat st;
    int ok = 1, keep = 1, at_start = 1;
    if (stat(path, &st) || !S_ISREG(st.st_mode)) return MGT_OK; /* none yet, or not a file (a pipe, /dev/null) */
    in = fopen(path, "r");
    if (!in) return mgt__fail(MGT_ERROR_IO, "%s: cannot read: %s", path, strerror(errno));
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    out = fopen(tmp, "w");
    if (!out) { fclose(in); return mgt__fail(MGT_ERROR_IO, "%s: cannot create: %s", tmp, strerror(errno)); }
    while (fgets(line, sizeof line, in)) {
        size_t len = strlen(line);
        int whole = len > 0 && line[len - 1] == '\n', s;
        if (at_start) { /* a line's step decides for it and its continuations (lines longer than the buffer) */
            const char *at = strstr(line, "\"step\":");
            keep = line[0] == '{' && at && sscanf(at, "\"step\":%d", &s) == 1 && s <= step;
        }
        if (!whole && feof(in)) break; /* the unfinished last line of a killed run */
        if (keep) ok &= fputs(line, out) >= 0;
        at_start = whole;
    }
    ok &= !ferror(in);
    fclose(in);
    ok &= fflush(out) == 0 && fsync(fileno(out)) == 0;
    ok &= fclose(out) == 0;
    if (!ok || rename(tmp, path)) {
        int e = errno;
        remove(tmp);
        return mgt__fail(MGT_ERROR_IO, "%s: cannot rewrite for the resumed step %d: %s", path, step, strerror(e));
    }
    return MGT_OK;
}

/* number `key` of a metrics.jsonl line into *v; 0 when the line has none */
static int mgt__jsonl_number(const char *line, const char *key, double *v) {
    char pat[48];
    const char *at;
    snprintf(pat, sizeof pat, "\"%s\":", key);
    return (at = strstr(line, pat)) != NULL && sscanf(at + strlen(pat), "%lf", v) == 1;
}
/* A run resumed in its own folder: the steps its metrics.jsonl holds (up to the resumed step) as
   the first of its published history, so that a reader (the dashboard) draws the whole run and
   its smoothed loss goes on rather than restarting at the resumed step. */
static void mgt__history_from_metrics(mgt_run *r) {
    char line[1 << 12];
    FILE *f = fopen(r->metrics_path, "r");
    if (!f) return;
    pthread_mutex_lock(&r->stats_mu);
    if (!r->history) r->history = (mgt_stats *)MGT_MALLOC(sizeof(mgt_stats) * MGT__HISTORY);
    while (r->history && fgets(line, sizeof line, f)) {
        double v;
        mgt_stats st, *last = r->history_n ? &r->history[(r->history_n - 1) % MGT__HISTORY] : NULL;
        if (!strncmp(line, "{\"type\":\"eval\",", 15) && last && mgt__jsonl_number(line, "step", &v) && (int)v == last->step &&
            mgt__jsonl_number(line, "val_loss", &last->val_loss)) {
            last->has_val_loss = 1, last->val_step = last->step;
            continue;
        }
        if (strncmp(line, "{\"type\":\"train\",", 16) || !mgt__jsonl_number(line, "step", &v)) continue;
        memset(&st, 0, sizeof st);
        st.step = (int)v, st.steps = r->plan.cfg.train.steps;
        mgt__jsonl_number(line, "loss", &st.loss);
        mgt__jsonl_number(line, "lr", &st.lr);
        mgt__jsonl_number(line, "grad_norm", &st.grad_norm);
        mgt__jsonl_number(line, "tokens_per_s", &st.tokens_per_s);
        st.samples_per_s = st.tokens_per_s / r->plan.cfg.model.seq_len;
        if (mgt__jsonl_number(line, "step_s", &v)) st.step_ms = v * 1e3;
        st.has_mfu = mgt__jsonl_number(line, "mfu", &st.mfu);
        if (mgt__jsonl_number(line, "tokens", &v)) st.tokens_seen = (long long)v;
        if (last && last->has_val_loss) st.has_val_loss = 1, st.val_loss = last->val_loss, st.val_step = last->val_step;
        r->history[r->history_n++ % MGT__HISTORY] = st;
    }
    pthread_mutex_unlock(&r->stats_mu);
    fclose(f);
}
/* a program that embeds mgt writes no metrics unless asked: empty (the default) and "none" are off */
static int mgt__metrics_on(const mgt_config *c) { return c->log.metrics[0] && strcmp(c->log.metrics, "none"); }
static mgt_result mgt__open_metrics(mgt_run *r) {
    char folder[sizeof r->metrics_path];
    char *slash;
    int continues = r->resumed && !r->resumed_elsewhere; /* the file holds this history up to the resumed step */
    if (r->metrics) { fclose(r->metrics); r->metrics = NULL; }
    MGT__TRY(mgt__tensorboard_open(r));
    if (!mgt__metrics_on(&r->plan.cfg)) return MGT_OK;
    mgt__strlcpy(folder, r->metrics_path, sizeof folder);
    slash = strrchr(folder, '/');
    if (slash && slash != folder) { *slash = 0; MGT__TRY(mgt_mkdirs(folder)); }
    /* a new run, or one resumed from another folder, starts a new file */
    if (continues) MGT__TRY(mgt__metrics_truncate(r->metrics_path, r->step));
    if (continues) mgt__history_from_metrics(r);
    r->metrics = fopen(r->metrics_path, continues ? "a" : "w");
    if (!r->metrics) return mgt__fail(MGT_ERROR_IO, "%s: cannot open for writing: %s", r->metrics_path, strerror(errno));
    if (r->plan.cfg.parallel.layout == MGT_LAYOUT_AUTO) { /* each start of the run says the layout parallel.layout = auto chose for it */
        const mgt_config *c = &r->plan.cfg;
        char schedule[16], recompute[16];
        mgt_config_value_string(c, mgt__find_key("parallel", "pp_schedule"), schedule, sizeof schedule);
        mgt_config_value_string(c, mgt__find_key("train", "recompute"), recompute, sizeof recompute);
        fprintf(r->metrics, "{\"type\":\"layout\",\"step\":%d,\"chosen\":\"auto\",\"dp\":%d,\"cp\":%d,\"tp\":%d,\"pp\":%d,\"zero\":%d,\"pp_schedule\":\"%s\","
                "\"micro_batch\":%d,\"recompute\":\"%s\"}\n", r->step, c->parallel.dp, c->parallel.cp, c->parallel.tp, c->parallel.pp, c->parallel.zero, schedule,
                c->train.micro_batch, recompute);
        fflush(r->metrics);
    }
    return MGT_OK;
}

/* a JSON number, or null where it is not finite (JSON has no inf or nan) */
static void mgt__json_number(FILE *f, const char *key, const char *fmt, double v) {
    fprintf(f, ",\"%s\":", key);
    if (isfinite(v)) fprintf(f, fmt, v);
    else fputs("null", f);
}

/* metrics.jsonl: one JSON object a line, each with a "type" (README, "metrics.jsonl"):
   train (a logged step), eval (a validation), ranks (per-rank figures of a logged step) */
static mgt_result mgt__metrics_line(mgt_run *r, int train_line, int eval_line) {
    mgt_stats st;
    FILE *f = r->metrics;
    double elapsed = mgt_now() - r->created_s;
    size_t peak = 0;
    int c;
    if (!train_line && !eval_line) return MGT_OK;
    mgt_run_stats(r, &st);
    mgt__tensorboard_step(r, &st, train_line, eval_line);
    if (!f) return MGT_OK;
    for (c = 0; c < MGT_MEM_COUNT; c++) peak += st.mem_peak[c];
    if (train_line) {
        fprintf(f, "{\"type\":\"train\",\"step\":%d", st.step);
        mgt__json_number(f, "loss", "%.6f", st.loss);
        mgt__json_number(f, "lr", "%.6e", st.lr);
        mgt__json_number(f, "grad_norm", "%.6f", st.grad_norm);
        if (st.step_skipped) fputs(",\"skipped\":true", f);
        if (r->dtype == MGT_F16) mgt__json_number(f, "loss_scale", "%g", st.loss_scale);
        fprintf(f, ",\"tokens\":%lld", st.tokens_seen);
        mgt__json_number(f, "tokens_per_s", "%.1f", st.tokens_per_s);
        mgt__json_number(f, "step_s", "%.6f", st.step_ms / 1e3);
        if (st.has_mfu) mgt__json_number(f, "mfu", "%.4f", st.mfu);
        fprintf(f, ",\"mem_peak\":%zu", peak);
        mgt__json_number(f, "elapsed_s", "%.3f", elapsed);
        fputs("}\n", f);
    }
    if (train_line && r->plan.world > 1) {
        int i;
        fprintf(f, "{\"type\":\"ranks\",\"step\":%d", st.step);
        mgt__json_number(f, "elapsed_s", "%.3f", elapsed);
        fputs(",\"ranks\":[", f);
        for (i = 0; i < r->plan.world; i++) {
            mgt_rank_stats rs;
            mgt__fill_rank_stats(r, i, &rs);
            fprintf(f, "%s{\"rank\":%d,\"dp\":%d,\"tp\":%d,\"pp\":%d,\"step_s\":%.6f,\"compute_s\":%.6f,\"comm_s\":%.6f,\"bubble_s\":%.6f,\"comm\":{",
                    i ? "," : "", i, rs.dp, rs.tp, rs.pp, rs.step_s, rs.compute_s, rs.comm_s, rs.bubble_s);
            for (c = 0; c < MGT_COLL_COUNT; c++)
                fprintf(f, "%s\"%s\":{\"calls\":%lld,\"bytes\":%.0f,\"s\":%.6f}", c ? "," : "", mgt_coll_name(c), rs.calls[c], rs.bytes[c], rs.seconds[c]);
            fputs("},\"mem_peak\":{", f);
            for (c = 0; c < MGT_MEM_COUNT; c++) fprintf(f, "%s\"%s\":%zu", c ? "," : "", mgt_mem_category_name(c), rs.mem_peak[c]);
            fputs("}}", f);
        }
        fputs("]}\n", f);
    }
    if (eval_line) {
        fprintf(f, "{\"type\":\"eval\",\"step\":%d", st.step);
        mgt__json_number(f, "val_loss", "%.6f", st.val_loss);
        fprintf(f, ",\"tokens\":%lld", st.tokens_seen);
        mgt__json_number(f, "elapsed_s", "%.3f", elapsed);
        fputs("}\n", f);
    }
    if (fflush(f) || ferror(f)) { /* metrics are a record of the run, not the run: warn once and train on */
        mgt__event(r, MGT_LOG_WARN, "step %d: cannot write %s: %s; training goes on without metrics lines", st.step, r->metrics_path, strerror(errno));
        fclose(f);
        r->metrics = NULL;
    }
    return MGT_OK;
}
