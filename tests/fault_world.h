/* tests/fault_world.h - the world of rank threads (mgt__world_local) with faults on demand, for tests
   that include the implementation: each CPU rank's backend is the CPU backend with two ops wrapped.
     - a non-finite gradient: at the run's steps nan_from..nan_to (1-based), rank 0's embedding
       backward leaves a NaN in its gradient, as an overflow would;
     - a slow device: rank slow_rank's embedding forward takes slow_s longer (once per micro-batch).
   Create a run with fault_run_create; set the fields of its fault_world at any time between steps. */
#ifndef MGT_TESTS_FAULT_WORLD_H
#define MGT_TESTS_FAULT_WORLD_H

typedef struct fault_world {
    const mgt_run *run;         /* whose step counts (set by fault_run_create) */
    int nan_from, nan_to;       /* 0, 0: none */
    int slow_rank;              /* -1: none */
    double slow_s;
    void *local;                /* the local world inside */
    int world;
} fault_world;

/* every wrapped backend, with its world, rank and CPU ops (the backend table has no user pointer) */
typedef void (*fault_encoder_forward_fn)(mgt_backend *, void *, const int *, const void *, int, int, const void *, int, int, int);
typedef void (*fault_encoder_backward_fn)(mgt_backend *, float *, float *, const void *, const int *, int, int, int, int, int);
static struct fault_backend {
    mgt_backend *be;
    fault_world *w;
    int rank;
    fault_encoder_forward_fn encoder_forward;
    fault_encoder_backward_fn encoder_backward;
} fault_backends[256];
static pthread_mutex_t fault_mu = PTHREAD_MUTEX_INITIALIZER;

static struct fault_backend *fault_backend_of(mgt_backend *be) {
    int i;
    struct fault_backend *f = NULL;
    pthread_mutex_lock(&fault_mu);
    for (i = 0; i < 256 && !f; i++) if (fault_backends[i].be == be) f = &fault_backends[i];
    pthread_mutex_unlock(&fault_mu);
    return f;
}

static void fault_encoder_forward(mgt_backend *be, void *out, const int *tokens, const void *wte, int vocab_start, int vocab_rows, const void *wpe,
                                  int B, int T, int C) {
    struct fault_backend *f = fault_backend_of(be);
    if (f->rank == f->w->slow_rank && f->w->slow_s > 0) {
        struct timespec ts;
        ts.tv_sec = (time_t)f->w->slow_s;
        ts.tv_nsec = (long)((f->w->slow_s - (double)ts.tv_sec) * 1e9);
        nanosleep(&ts, NULL);
    }
    f->encoder_forward(be, out, tokens, wte, vocab_start, vocab_rows, wpe, B, T, C);
}

static void fault_encoder_backward(mgt_backend *be, float *dwte, float *dwpe, const void *dout, const int *tokens, int vocab_start, int vocab_rows,
                                   int B, int T, int C) {
    struct fault_backend *f = fault_backend_of(be);
    const fault_world *w = f->w;
    f->encoder_backward(be, dwte, dwpe, dout, tokens, vocab_start, vocab_rows, B, T, C);
    if (f->rank == 0 && w->run && w->run->step + 1 >= w->nan_from && w->run->step + 1 <= w->nan_to) dwte[0] = NAN;
}

static mgt_result fault_backend(void *world, const mgt__rank_want *want, mgt_backend **out, int *device) {
    fault_world *w = (fault_world *)world;
    int i;
    MGT__TRY(mgt__world_local.backend(w->local, want, out, device));
    pthread_mutex_lock(&fault_mu);
    for (i = 0; i < 256 && fault_backends[i].be; i++) {}
    if (i < 256) {
        fault_backends[i].w = w;
        fault_backends[i].rank = want->rank;
        fault_backends[i].encoder_forward = (*out)->encoder_forward;
        fault_backends[i].encoder_backward = (*out)->encoder_backward;
        fault_backends[i].be = *out;
    }
    pthread_mutex_unlock(&fault_mu);
    if (i == 256) return mgt__fail(MGT_ERROR_ARGUMENT, "fault_world: more than 256 backends at once");
    (*out)->encoder_forward = fault_encoder_forward;
    (*out)->encoder_backward = fault_encoder_backward;
    return MGT_OK;
}
static void fault_backend_destroy(void *world, mgt_backend *be) {
    struct fault_backend *f = fault_backend_of(be);
    if (f) {
        pthread_mutex_lock(&fault_mu);
        f->be = NULL;
        pthread_mutex_unlock(&fault_mu);
    }
    mgt__world_local.backend_destroy(((fault_world *)world)->local, be);
}
static mgt_result fault_comm(void *world, int rank, mgt_backend *be, const mgt_group *const *groups, int ngroups, mgt_comm **out) {
    return mgt__world_local.comm(((fault_world *)world)->local, rank, be, groups, ngroups, out);
}
static void fault_rank_failed(void *world, mgt_comm *c) { mgt__world_local.rank_failed(((fault_world *)world)->local, c); }
static const mgt__world_api fault_world_api = {
    "cpu", 0, 1, NULL, fault_backend, fault_backend_destroy, fault_comm, NULL, NULL, fault_rank_failed, NULL, NULL,
};

/* a run of cfg on a fault world (*w, which outlives the run); exits on failure */
static mgt_run *fault_run_create(const mgt_config *cfg, fault_world *w) {
    mgt__world_args a;
    mgt_run *run = NULL;
    memset(w, 0, sizeof *w);
    w->slow_rank = -1;
    w->world = cfg->parallel.dp * cfg->parallel.tp * cfg->parallel.pp;
    memset(&a, 0, sizeof a);
    a.world = w->world;
    a.count = w->world;
    if (mgt__world_local.create(&a, &w->local) != MGT_OK || mgt__run_create_on(&run, cfg, &fault_world_api, w) != MGT_OK) {
        printf("FAIL create on the fault world: %s\n", mgt_last_error());
        exit(1);
    }
    w->run = run;
    return run;
}
/* after mgt_run_destroy */
static void fault_world_free(fault_world *w) {
    mgt__world_local.destroy(w->local);
    w->local = NULL;
}

#endif
