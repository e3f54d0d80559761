/* src/run.c - the run's state (mgt_run), the learning-rate schedule, folders made, and what a run
   says of itself (mgt_run_config, _plan, _dir, _process) */
/* ---- runs: the ranks of a layout, driven from the caller's thread ---------------------------- */

enum { MGT__CMD_NONE, MGT__CMD_CONNECT, MGT__CMD_WARM_UP, MGT__CMD_STEP, MGT__CMD_FORWARD, MGT__CMD_QUIT };
#define MGT__HISTORY 65536 /* steps of statistics kept for readers */

typedef struct mgt__rank mgt__rank;
struct mgt_run {
    mgt_plan plan;
    mgt__rank *ranks;
    const mgt__world_api *world_api; /* where the ranks live and how they reach each other (src/world.c) */
    void *world;                     /* and that world's state */
    mgt__mpi_world *procs;           /* the processes under an MPI launcher (src/comm_mpi.c), NULL for one */
    int process, processes;          /* this one, and how many (1 without MPI) */
    int rank_lo, rank_hi;            /* this process's ranks: all of them but under MPI */
    mgt_backend *shadow_be;          /* (world) under MPI: what the other processes' ranks report */
    mgt_comm *shadow_comm;           /* (world) and their communication statistics */
    int stop_asked, stop_agreed;     /* mgt_run_request_stop here; under MPI, asked by any process */
    int warmed_up;                   /* the untimed warm-up step has run (GPU ranks) */
    double gpu_read_s;               /* when the GPUs were last read */
    int inference, threads_per_rank;
    mgt__loader train, val;
    int has_train, has_val;
    int step;                        /* optimizer steps done (skipped ones included) */
    int dtype;                       /* storage type: MGT_F32, MGT_BF16 or MGT_F16 */
    double loss_scale;               /* the loss is multiplied by it before backward: 1 but in fp16 */
    int skipped, skipped_in_row;     /* steps whose update was skipped: in all, and the latest run of them */
    int good_steps;                  /* fp16: finite steps since the scale last changed */
    int last_skipped;
    int saved_step;                  /* step of the newest checkpoint written or loaded, -1 none */
    char saved_path[1200];           /* and its file */
    char run_id[17];                 /* 16 hex digits, stored in its checkpoints; a resumed run keeps the
                                        checkpoint's, so pruning and the folder check know their own */
    int resumed;                     /* continues a checkpoint (mgt_run_resume) */
    int resumed_elsewhere;           /* from a checkpoint in another folder than dir */
    int claimed, lock_fd;            /* holds its checkpoint folder (mgt_run_claim): the flock'd mgt.lock */
    double peak_per_rank;            /* mgt_run_set_peak's GFLOP/s, used when the preset states none */
    char peak_source[64];
    double peak_seen;                /* a step's GFLOP/s per rank that beat the peak above (0: none did): MFU's peak from then on */
    char peak_seen_source[64];
    double loss, lr, grad_norm, step_s, val_loss, elapsed_s;
    int has_val_loss, val_step;
    long long tokens_seen;
    char dir[MGT_STR_MAX + 32], metrics_path[MGT_STR_MAX + 64];
    FILE *metrics;
    FILE *tensorboard;               /* the event file of [log] tensorboard, or NULL */
    /* statistics published for readers on other threads, behind stats_mu */
    pthread_mutex_t stats_mu;
    mgt_stats *history;           /* a ring of the last MGT__HISTORY steps */
    int history_n;                /* steps published */
    mgt_rank_stats *rank_stats;
    mgt_event *events;
    int events_n, events_cap;
    int state;
    double created_s;
    /* the command the rank threads run, and its arguments */
    pthread_mutex_t mu;
    pthread_cond_t cv_cmd, cv_done;
    int cmd, pending, started;
    unsigned long generation;
    const uint32_t *cmd_rows;
    int cmd_micro;
};

/* ---- schedule and checkpoint files ------------------------------------------------------------ */

static double mgt__lr_at(const mgt_config *cfg, int step) {
    const double lr = cfg->train.lr, min_lr = cfg->train.min_lr;
    int warmup = cfg->train.warmup, steps = cfg->train.steps;
    double ratio;
    if (step < warmup) return lr * (double)(step + 1) / (double)warmup;
    if (steps <= warmup || cfg->train.schedule == MGT_SCHEDULE_CONSTANT) return lr;
    ratio = (double)(step - warmup) / (double)(steps - warmup);
    if (ratio > 1) ratio = 1;
    if (cfg->train.schedule == MGT_SCHEDULE_LINEAR) return lr - ratio * (lr - min_lr);
    return min_lr + 0.5 * (1.0 + cos(3.14159265358979323846 * ratio)) * (lr - min_lr);
}

MGTDEF mgt_result mgt_mkdirs(const char *path) {
    char tmp[1024];
    size_t i, n = strlen(path);
    if (n >= sizeof tmp) return mgt__fail(MGT_ERROR_IO, "%s: path too long", path);
    memcpy(tmp, path, n + 1);
    for (i = 1; i <= n; i++) {
        if (tmp[i] == '/' || tmp[i] == 0) {
            char c = tmp[i];
            tmp[i] = 0;
            if (mkdir(tmp, 0777) && errno != EEXIST) return mgt__fail(MGT_ERROR_IO, "%s: cannot create folder: %s", tmp, strerror(errno));
            tmp[i] = c;
        }
    }
    return MGT_OK;
}

/* ---- what a run says of itself ---- */
MGTDEF const mgt_config *mgt_run_config(const mgt_run *r) { return r ? &r->plan.cfg : NULL; }
MGTDEF const char *mgt_run_device(const mgt_run *r) { return r ? r->world_api->device : "cpu"; }
MGTDEF const mgt_plan *mgt_run_plan(const mgt_run *r) { return &r->plan; }
MGTDEF void mgt_run_request_stop(mgt_run *r) { if (r) r->stop_asked = 1; }
MGTDEF int mgt_run_stop_agreed(const mgt_run *r) { return r && (r->processes > 1 ? r->stop_agreed : r->stop_asked); }
MGTDEF int mgt_run_process(const mgt_run *r, int *processes) {
    if (processes) *processes = r ? r->processes : 1;
    return r ? r->process : 0;
}
MGTDEF const char *mgt_run_dir(const mgt_run *r) { return r ? r->dir : NULL; }
