/* src/folder.c - a run's folder: its checkpoint files (named, listed, pruned, the newest found),
   its lock and the claim that opens its metrics, the preset a checkpoint stores */
/* the step of a checkpoint's file name, which must be exactly what mgt writes (step_%08d.safetensors:
   the folder check and pruning delete files by that name) */
static int mgt__checkpoint_step(const char *name) {
    char canonical[48];
    int step, len = 0;
    if (sscanf(name, "step_%d.safetensors%n", &step, &len) != 1 || len != (int)strlen(name) || step < 0) return -1;
    snprintf(canonical, sizeof canonical, "step_%08d.safetensors", step);
    return strcmp(canonical, name) ? -1 : step;
}

/* what the run holding lock file fd wrote of itself ("process 4242 on host (mgt train ...)"), one line */
static void mgt__lock_owner(int fd, char *owner, size_t cap) {
    ssize_t got = pread(fd, owner, cap - 1, 0);
    owner[got > 0 ? got : 0] = 0;
    owner[strcspn(owner, "\n")] = 0;
}
/* whether another process's run holds folder dir (its mgt.lock locked), that run in owner */
static int mgt__folder_held(const char *dir, char *owner, size_t cap) {
    char lock_path[1100];
    int fd, held = 0, pid = 0;
    snprintf(lock_path, sizeof lock_path, "%s/mgt.lock", dir);
    owner[0] = 0;
    if ((fd = open(lock_path, O_RDONLY | O_CLOEXEC)) < 0) return 0;
    if (flock(fd, LOCK_SH | LOCK_NB) == 0) flock(fd, LOCK_UN);
    else if ((held = errno == EWOULDBLOCK)) mgt__lock_owner(fd, owner, cap);
    close(fd);
    if (sscanf(owner, "process %d", &pid) == 1 && pid == (int)getpid()) held = 0; /* this process's own run */
    return held;
}

MGTDEF mgt_result mgt_checkpoint_latest(const char *dir, char *path, size_t cap) {
    DIR *d;
    struct dirent *e;
    int best = -1;
    if (!dir || !path) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_checkpoint_latest: dir and path are required");
    d = opendir(dir);
    if (!d) return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: no checkpoint folder: %s", dir, strerror(errno));
    while ((e = readdir(d))) {
        int s = mgt__checkpoint_step(e->d_name);
        if (s > best) best = s;
    }
    closedir(d);
    if (best < 0) {
        char hf[1100];
        struct stat st;
        snprintf(hf, sizeof hf, "%s/config.json", dir);
        if (stat(hf, &st) == 0)
            return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: a Hugging Face model folder (config.json), not mgt's checkpoints (step_*.safetensors): "
                             "start a run from its weights with [model] init = %s (--set model.init=%s)", dir, dir, dir);
        if (mgt__folder_held(dir, hf, sizeof hf))
            return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: no checkpoints (step_*.safetensors) in this folder yet: it is in use by a run that has "
                             "written none: %s; wait for its first checkpoint or its end", dir, hf[0] ? hf : "a process that left no name");
        return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: no checkpoints (step_*.safetensors) in this folder", dir);
    }
    snprintf(path, cap, "%s/step_%08d.safetensors", dir, best);
    return MGT_OK;
}

/* the run id stored in a checkpoint (its header only is read); "" when it has none or is unreadable */
static void mgt__checkpoint_run_id(const char *path, char *id, size_t cap) {
    mgt__st_file f;
    const char *v;
    id[0] = 0;
    if (mgt__st_read(&f, path, 1) != MGT_OK) return;
    v = mgt__st_meta(&f, "run_id");
    if (v) mgt__strlcpy(id, v, cap);
    mgt__st_close(&f);
}

/* Whose history a checkpoint in the run's folder is: the run's own when it has the run's id and a
   step in [first, last], where first is 0 for a new run or one resumed from this folder, and the
   resumed step for a run resumed from another folder (what this folder held before then is
   another line of history, even with the same id); last is the run's step. */
typedef struct mgt__history { const char *run_id; int first, last; } mgt__history;
static mgt__history mgt__own_history(const mgt_run *r) {
    mgt__history h;
    h.run_id = r->run_id;
    h.first = r->resumed_elsewhere ? r->step : 0;
    h.last = r->step;
    return h;
}

/* the steps of the checkpoints in dir, newest first, in a growing array the caller frees; mine: 1
   keeps only those of history h, 0 only the others; returns the count, or -1 out of memory */
static int mgt__list_checkpoints(const char *dir, const mgt__history *h, int mine, int **steps) {
    int n = 0, cap = 0, i, j;
    DIR *d = opendir(dir);
    struct dirent *e;
    *steps = NULL;
    if (!d) return 0;
    while ((e = readdir(d))) {
        char path[1200], id[40];
        int s = mgt__checkpoint_step(e->d_name);
        if (s < 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        mgt__checkpoint_run_id(path, id, sizeof id);
        if ((!strcmp(id, h->run_id) && s >= h->first && s <= h->last) != mine) continue;
        if (n == cap) {
            int *grown = (int *)MGT_REALLOC(*steps, sizeof(int) * (size_t)(cap = cap ? 2 * cap : 64));
            if (!grown) { closedir(d); MGT_FREE(*steps); *steps = NULL; return -1; }
            *steps = grown;
        }
        (*steps)[n++] = s;
    }
    closedir(d);
    for (i = 1; i < n; i++)
        for (j = i; j > 0 && (*steps)[j] > (*steps)[j - 1]; j--) { int t = (*steps)[j]; (*steps)[j] = (*steps)[j - 1]; (*steps)[j - 1] = t; }
    return n;
}

/* checkpoint.keep: the newest of this run's checkpoints stay; another run's are never touched */
static void mgt__prune_checkpoints(const mgt_run *r) {
    mgt__history h = mgt__own_history(r);
    int *steps, n = mgt__list_checkpoints(r->dir, &h, 1, &steps), i;
    for (i = r->plan.cfg.checkpoint.keep; i < n; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/step_%08d.safetensors", r->dir, steps[i]);
        remove(path);
    }
    MGT_FREE(steps);
}

/* The run's folder holds one line of history: another's checkpoints (another run's, this run's
   from after the step it resumed, or any the folder held before a run resumed from elsewhere
   came) would be taken by --resume latest and pruned alike. Refuses such a folder, or with
   overwrite deletes them (listing again until none is left). */
static mgt_result mgt__check_folder(mgt_run *r, const mgt__history *h, int resumed, int overwrite) {
    char where[300];
    for (;;) {
        int *steps, n = mgt__list_checkpoints(r->dir, h, 0, &steps), i;
        if (n < 0) return mgt__fail(MGT_ERROR_MEMORY, "out of memory listing %s", r->dir);
        if (n == 0) return MGT_OK;
        if (!overwrite) {
            char list[200] = "";
            for (i = n - 1; i >= 0 && strlen(list) < 120; i--)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%sstep_%08d", list[0] ? ", " : "", steps[i]);
            if (i >= 0) snprintf(list + strlen(list), sizeof list - strlen(list), ", ...");
            MGT_FREE(steps);
            mgt__where(&r->plan.cfg, mgt__find_key("checkpoint", "dir"), where, sizeof where);
            if (resumed)
                return mgt__fail(MGT_ERROR_CONFIG, "%s: checkpoint folder %s holds %d checkpoint%s of another run, of another line of this run's history or "
                                 "of steps after %d (%s); training on from step %d would mix two histories: give this run another [checkpoint] dir, "
                                 "or add --overwrite to delete them", where, r->dir, n, n == 1 ? "" : "s", h->last, list, h->last);
            return mgt__fail(MGT_ERROR_CONFIG, "%s: checkpoint folder %s already holds %d checkpoint%s of another run (%s); continue that run with "
                             "--resume latest, train into another [checkpoint] dir, or add --overwrite to delete them and start afresh",
                             where, r->dir, n, n == 1 ? "" : "s", list);
        }
        for (i = 0; i < n; i++) {
            char path[1200];
            snprintf(path, sizeof path, "%s/step_%08d.safetensors", r->dir, steps[i]);
            if (remove(path)) {
                int e = errno;
                MGT_FREE(steps);
                return mgt__fail(MGT_ERROR_IO, "%s: cannot delete (--overwrite): %s", path, strerror(e));
            }
            mgt__log(MGT_LOG_INFO, "--overwrite: deleted %s", path);
        }
        MGT_FREE(steps);
    }
}

/* the lock file's text: who holds the folder, on which machine */
static void mgt__lock_owner_text(char *buf, size_t cap) {
    char cmd[512], host[128] = "?";
    size_t n = 0, i;
    FILE *f = fopen("/proc/self/cmdline", "rb");
    cmd[0] = 0;
    if (f) {
        n = fread(cmd, 1, sizeof cmd - 1, f);
        fclose(f);
        for (i = 0; i + 1 < n; i++) if (!cmd[i]) cmd[i] = ' ';
        cmd[n] = 0;
    }
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    if (snprintf(buf, cap, "process %ld on %s (%s)\n", (long)getpid(), host, cmd[0] ? cmd : "unknown command") >= (int)cap && cap > 1)
        buf[cap - 2] = '\n'; /* a long command line, cut */
}

static mgt_result mgt__claim(mgt_run *r, int overwrite) {
    char lock_path[1200], where[300];
    mgt__history h;
    if (r->inference) return MGT_OK;
    if (r->process > 0) return MGT_OK; /* process 0 holds the folder and writes the records */
    if (!r->claimed) {
        int fd, e, tries = 0;
        DIR *d;
        struct dirent *de;
        struct stat held, named;
        MGT__TRY(mgt_mkdirs(r->dir));
        snprintf(lock_path, sizeof lock_path, "%s/mgt.lock", r->dir);
    again:
        fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0 && errno == EACCES) fd = open(lock_path, O_RDONLY | O_CLOEXEC); /* another user's lock file: flock needs no write */
        if (fd < 0) return mgt__fail(MGT_ERROR_IO, "%s: cannot create the run's lock file: %s", lock_path, strerror(errno));
        if (flock(fd, LOCK_EX | LOCK_NB)) {
            char owner[600];
            e = errno;
            if (e != EWOULDBLOCK) { /* no lock to be had here (some network file systems): say so rather than "in use" */
                close(fd);
                return mgt__fail(MGT_ERROR_IO, "%s: cannot lock: %s; the checkpoint folder must be on a file system with flock (a local disk)", lock_path,
                                 strerror(e));
            }
            mgt__lock_owner(fd, owner, sizeof owner);
            close(fd);
            return mgt__fail(MGT_ERROR_CONFIG, "%s: checkpoint folder %s is in use by another run: %s; wait for it to end, or give this run another [checkpoint] dir",
                             mgt__where(&r->plan.cfg, mgt__find_key("checkpoint", "dir"), where, sizeof where), r->dir, owner[0] ? owner : "a process that left no name");
        }
        /* the run that held it removes the file as it ends: a lock taken on the removed file is no
           lock, so take the one the folder names now */
        if (fstat(fd, &held) || stat(lock_path, &named) || held.st_dev != named.st_dev || held.st_ino != named.st_ino) {
            close(fd);
            if (++tries < 100) goto again;
            return mgt__fail(MGT_ERROR_IO, "%s: the lock file keeps changing under this run", lock_path);
        }
        {
            char owner[600];
            mgt__lock_owner_text(owner, sizeof owner);
            if (ftruncate(fd, 0) || pwrite(fd, owner, strlen(owner), 0) < 0) { /* the lock still holds; only the name is missing */ }
        }
        r->lock_fd = fd;
        r->claimed = 1;
        /* temporary files left by a run that was killed while writing: nobody else writes here now */
        if ((d = opendir(r->dir))) {
            while ((de = readdir(d))) {
                size_t len = strlen(de->d_name);
                if (len > 4 && !strcmp(de->d_name + len - 4, ".tmp") && (!strncmp(de->d_name, "step_", 5) || !strncmp(de->d_name, "metrics", 7))) {
                    char path[1200];
                    snprintf(path, sizeof path, "%s/%s", r->dir, de->d_name);
                    if (!remove(path)) mgt__log(MGT_LOG_INFO, "removed %s, left by a run that stopped while writing it", path);
                }
            }
            closedir(d);
        }
    }
    h = mgt__own_history(r);
    MGT__TRY(mgt__check_folder(r, &h, r->resumed, overwrite));
    return mgt__open_metrics(r);
}

static mgt_result mgt__claim_once(mgt_run *r) { return r->claimed || r->inference ? MGT_OK : mgt__claim(r, 0); }
/* before a step: a run that will write metrics or checkpoints takes its folder before it trains
   (a run that writes nothing, as `mgt bench`'s, takes it only if it saves) */
static mgt_result mgt__claim_before_step(mgt_run *r) {
    return mgt__metrics_on(&r->plan.cfg) || r->plan.cfg.log.tensorboard[0] || r->plan.cfg.checkpoint.every > 0 ? mgt__claim_once(r) : MGT_OK;
}

MGTDEF mgt_result mgt_run_claim(mgt_run *r, int overwrite) {
    if (!r) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_claim: run is NULL");
    if (r->inference) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_run_claim: this run was opened for sampling only");
    return mgt__mpi_agree(r->procs, mgt__claim(r, overwrite), "claiming the checkpoint folder");
}

static mgt_result mgt__resolve_checkpoint(const char *what, const char *dir, char *path, size_t cap) {
    struct stat st;
    if (!strcmp(what, "latest")) return mgt_checkpoint_latest(dir, path, cap);
    if (stat(what, &st)) return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: no such checkpoint file or folder", what);
    if (S_ISDIR(st.st_mode)) return mgt_checkpoint_latest(what, path, cap);
    mgt__strlcpy(path, what, cap);
    return MGT_OK;
}

/* ---- the preset a checkpoint stores: every key exactly ----------------------------------------
   A JSON object of "section.key": "value" strings, each value as mgt_config_value_string gives it
   (floats in the shortest text that reads back to the same double), in the order of the key table:
   {"model.n_layer":"2",...,"log.metrics":""}. Every value any valid config holds comes back
   byte for byte, where INI text (mgt_config_format, for reading) would strip spaces, cut at ';'
   and split long lines. Restoring checks each value as a preset line is checked. */
static int mgt__config_store(const mgt_config *cfg, char *out, size_t cap) { /* length, or -1 when cap is too small */
    mgt__buf b;
    char name[80], value[MGT_STR_MAX + 64];
    int i, n;
    memset(&b, 0, sizeof b);
    mgt__buf_str(&b, "{");
    for (i = 0; i < MGT_CONFIG_NKEYS; i++) {
        snprintf(name, sizeof name, "%s.%s", mgt__keys[i].info.section, mgt__keys[i].info.name);
        mgt_config_value_string(cfg, i, value, sizeof value);
        if (i) mgt__buf_str(&b, ",");
        mgt__buf_json_string(&b, name);
        mgt__buf_str(&b, ":");
        mgt__buf_json_string(&b, value);
    }
    mgt__buf_str(&b, "}");
    n = !b.oom && b.n < cap ? (int)b.n : -1;
    if (n >= 0) memcpy(out, b.p, b.n + 1);
    MGT_FREE(b.p);
    return n;
}

static mgt_result mgt__config_restore(mgt_config *cfg, const char *json, const char *name) {
    const char *p = json;
    int seen[MGT_CONFIG_NKEYS], first = 1;
    mgt_result r = MGT_OK;
    memset(seen, 0, sizeof seen);
    mgt__strlcpy(cfg->path, name, sizeof cfg->path);
    if (!mgt__json_expect(&p, '{')) return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: the stored preset is not a JSON object", name);
    for (;;) {
        mgt__buf k, v;
        char why[512], *dot;
        int key;
        mgt__json_ws(&p);
        if (*p == '}') { p++; break; }
        if (!first && !mgt__json_expect(&p, ',')) return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: the stored preset is malformed near byte %d", name, (int)(p - json));
        first = 0;
        memset(&k, 0, sizeof k);
        memset(&v, 0, sizeof v);
        if (!mgt__json_string(&p, &k) || !mgt__json_expect(&p, ':') || !mgt__json_string(&p, &v) || strlen(k.p) != k.n || strlen(v.p) != v.n) {
            MGT_FREE(k.p);
            MGT_FREE(v.p);
            return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: the stored preset is malformed near byte %d", name, (int)(p - json));
        }
        dot = strchr(k.p, '.');
        if (dot) *dot = 0;
        key = dot ? mgt__find_key(k.p, dot + 1) : -1;
        if (dot) *dot = '.';
        if (key < 0) r = mgt__fail(MGT_ERROR_CHECKPOINT, "%s: the stored preset has the key '%s', unknown to mgt %s", name, k.p, MGT_VERSION_STRING);
        else if (seen[key]) r = mgt__fail(MGT_ERROR_CHECKPOINT, "%s: the stored preset has '%s' twice", name, k.p);
        else if (!mgt__set_value(cfg, key, v.p, why, sizeof why)) r = mgt__fail(MGT_ERROR_CHECKPOINT, "%s: the stored preset's %s: %s", name, k.p, why);
        else { seen[key] = 1; cfg->line[key] = 0; }
        MGT_FREE(k.p);
        MGT_FREE(v.p);
        if (r != MGT_OK) return r;
    }
    mgt__json_ws(&p);
    if (*p) return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: the stored preset has text after its end (byte %d)", name, (int)(p - json));
    return MGT_OK;
}

MGTDEF mgt_result mgt_checkpoint_config(const char *checkpoint, mgt_config *cfg) {
    mgt__st_file f;
    const char *preset;
    mgt_result res;
    char path[1200];
    if (!checkpoint || !cfg) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_checkpoint_config: checkpoint and cfg are required");
    res = mgt__resolve_checkpoint(checkpoint, ".", path, sizeof path);
    if (res != MGT_OK) return res;
    res = mgt__checkpoint_open(&f, path);
    if (res != MGT_OK) return res;
    preset = mgt__st_meta(&f, "preset");
    mgt_config_init(cfg);
    res = preset && preset[0] == '{' ? mgt__config_restore(cfg, preset, path)
                                     : mgt__fail(MGT_ERROR_CHECKPOINT, "%s: has no preset (a JSON object) in its metadata", path);
    mgt__st_close(&f);
    if (res == MGT_OK && mgt_config_validate(cfg) != MGT_OK) { /* as `mgt train` would refuse it */
        char why[1024];
        mgt__strlcpy(why, mgt_last_error(), sizeof why);
        return mgt__fail(MGT_ERROR_CHECKPOINT, "%s: the preset stored in it is not valid: %s", path, why);
    }
    return res;
}
