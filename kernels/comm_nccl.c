/* kernels/comm_nccl.c: the mgt_comm table over NCCL, for ranks that are threads of a process
   (one process, or each of several under mpirun), one GPU each, and the watchdog every host wait
   of a rank goes through.

   A world is made once per process, from one thread: a unique id (made here, or by the process of
   rank 0 and carried by MPI) and ncclCommInitRankConfig for every rank of this process in one NCCL
   group, non-blocking (config blocking = 0, so no NCCL call ever blocks a host thread),
   each polled with ncclCommGetAsyncError until ready. Each rank thread then makes its mgt_comm,
   which splits the world communicator into one communicator per group the rank belongs to
   (ncclCommSplit, non-blocking too: colour = group id, key = the rank's index in the group, so
   NCCL's rank in the split equals mgt_group.index). ncclCommSplit is collective over the whole
   world: every rank passes its groups in the same order of kinds (TP, DP, PP, embedding, world, as
   mgt.h makes them), a rank outside a group of that kind (a middle pipeline stage and the
   embedding pair) passes NCCL_SPLIT_NOCOLOR, and kinds whose groups have one member, or the whole
   world, need no split on any rank, so the sequence of calls is the same everywhere. Everything a
   call needs is made here too (events, the staging of host buffers); mgt.h then runs one
   collective on every group and a send/receive with each pipeline neighbour, because NCCL
   connects lazily, allocating and synchronising on first use.

   Ordering: the runtime calls the table from the rank's thread as if each call completed before
   it returned (the contract of mgt.h's local communicator). Here a call is enqueued on the rank's
   communication stream after an event recorded on the compute stream, and the compute stream
   waits on an event recorded after it: whatever the compute stream does next sees the result, and
   the host thread does not wait, so communication overlaps whatever the host enqueues on other
   streams meanwhile. Buffers in host memory (the runtime's few scalars) go through pinned memory
   and a device stage made with the communicator, and the call then waits, because the host reads
   them at once.

   The watchdog: no host wait is unbounded. Each one (an event of the rank's own streams: the end of
   a step, a staged call, an NCCL call still being enqueued) waits with the world's deadline (an
   event: a few queries, then the rank's waiter thread blocks in cudaEventSynchronize and wakes the
   rank when it completes, while the rank checks its deadline every millisecond),
   [parallel] timeout_s, and reads ncclCommGetAsyncError of the rank's communicators and the world's
   abort flag while it waits. The rank that sees a deadline pass, an asynchronous error or a device
   fault writes one message (the rank, its GPU, what it waited for, the NCCL call it is behind with
   its group and sequence number, what every other rank was last doing) and aborts the world:
   every rank's communicators, each under that rank's guard, a mutex its thread holds around each
   of its NCCL calls, so no communicator is freed while another thread is inside it. Every other
   rank's next wait or call then returns that message. The backend (kernels/backend_cuda.cu) waits
   through mgt_nccl_wait and so follows the same rules.

   Statistics: calls and bytes when enqueued; seconds from a pair of timing events around each call
   on the communication stream (waiting for peers included, as on CPU), read at the end of a step
   (mgt_nccl_settle), once the stream is known to be done, so a step's calls cost no host waits. */
#define MGT_CATF /* mgt.h's mgt__catf, which this file shares */
#include "mgt.h" /* defines: mgt_comm, mgt_group, mgt_result, MGT_F32.., MGT_COLL_*, mgt__catf */

#include <cuda_runtime.h> /* defines: cudaStream_t, cudaEvent_t, cudaMemcpyAsync, cudaHostAlloc, cudaEventQuery */
#include <nccl.h>         /* defines: ncclComm_t, ncclCommInitRankConfig, ncclCommSplit, ncclAllReduce.. */
#include <pthread.h>      /* defines: pthread_mutex_t */
#include <sched.h>        /* defines: sched_yield */
#include <stdarg.h>       /* defines: va_list */
#include <stdio.h>        /* defines: vsnprintf */
#include <stdlib.h>       /* defines: calloc, free */
#include <string.h>       /* defines: memset, memcpy */
#include <time.h>         /* defines: clock_gettime, nanosleep */

#include "comm_nccl.h" /* defines: mgt_nccl_world_create, mgt_nccl_comm_create, mgt_nccl_wait.. */
#include "fake_note.h" /* defines: mgt_cuda_fake_note (the checking fakes' hook; null in the library) */

typedef char mgt__nccl_id_fits[sizeof(ncclUniqueId) == MGT_NCCL_ID_BYTES ? 1 : -1]; /* mgt.h carries the id as bytes */
#define MGT__NCCL_MAX_GROUPS 8 /* kinds of groups a rank belongs to (mgt.h has 6) */
#define MGT__NCCL_TIMED 2048   /* timed calls per step; more are counted, not timed */
#define MGT__NCCL_DEFERRED 16  /* events of deferred calls; a later one stands in for an overwritten one */

typedef struct mgt__nccl mgt__nccl;

/* A rank's waits wake when their event completes: after a short spin of queries the event goes to
   this thread, which blocks in cudaEventSynchronize (woken by the driver) and signals; the rank's
   thread meanwhile sleeps on the condition in 1 ms slices to check its deadline, the world's abort
   and NCCL's asynchronous errors. Polling alone, with a growing sleep between queries so as not to
   burn a core, woke up to 1 ms late, three times a step. */
typedef struct mgt__nccl_waiter {
    pthread_t thread;
    int started, quit, device;
    pthread_mutex_t mu;
    pthread_cond_t cv;    /* a new request (to the thread), an answer (to the rank) */
    cudaEvent_t event;    /* the request */
    long asked, answered; /* requests so far, answered so far */
    cudaError_t result;   /* the last answer's */
} mgt__nccl_waiter;

/* what the world keeps of each rank */
typedef struct mgt__nccl_rank {
    pthread_mutex_t guard; /* held by the rank's thread around each of its NCCL calls, by an abort around
                              aborting its communicators, and around the fields below */
    mgt__nccl *comm;       /* its communicator table, once made */
    ncclComm_t split[MGT__NCCL_MAX_GROUPS];
    int nsplit;
    int dead; /* its communicators were aborted */
    /* what it was last doing, for a failing rank's message */
    char doing[240];
    double since;
    char last_call[200];
    double last_call_s;
    int in_step, warm_up; /* warm_up: the untimed warm-up step (its waits get a longer deadline) */
    long step, step_calls; /* steps begun; NCCL calls made inside steps, all steps together */
    size_t nccl_bytes;     /* NCCL's device memory, measured after the warm-up */
    mgt__nccl_waiter waiter;
    void (*finish_op)(void *ctx); /* MGT_CUDA_SYNC=1: the backend's last op waited for before a call */
    void *finish_ctx;
} mgt__nccl_rank;

struct mgt_nccl_world {
    int world;
    int *devices;
    double timeout_s;
    ncclComm_t *comms; /* the world communicator of each rank (the rank's own once it runs) */
    mgt_nccl_fail_fn fail;
    mgt__nccl_rank *ranks;
    pthread_mutex_t mu; /* guards aborting and why */
    int aborted;        /* the communicators are gone (atomic) */
    char why[4096];     /* the failure that aborted the world */
};

typedef struct mgt__nccl_group {
    int id, size, kind;
    ncclComm_t comm; /* NULL for a group of one, the world communicator for the world */
    long *seq;       /* collectives on that communicator so far (shared by the groups on one communicator) */
} mgt__nccl_group;

typedef struct mgt__nccl_timed {
    int coll;
    cudaEvent_t start, end;
    char what[160]; /* the call, for a message: "all-reduce #3 on group 2 (DP, 2 ranks)" */
    double issued_s;
} mgt__nccl_timed;

struct mgt__nccl {
    mgt_comm comm; /* first member: the runtime holds a mgt_comm * */
    mgt_nccl_world *w;
    int device, rank;
    mgt__nccl_group groups[MGT__NCCL_MAX_GROUPS];
    int ngroups;
    long seqs[MGT__NCCL_MAX_GROUPS + 1]; /* per distinct communicator: the world's, then one per split */
    long *sends, *recvs;                 /* per peer: sends and receives so far (their sequence numbers) */
    ncclComm_t wcomm;                    /* the world communicator (send and recv), the world's to destroy */
    cudaStream_t compute, stream;
    cudaEvent_t ready, done, end; /* compute -> communication, communication -> compute, the stream's end */
    int defer_next;               /* the next call does not order the compute after it (mgt_comm.defer) */
    long tickets;                 /* deferred calls so far; call t completes at deferred[t % MGT__NCCL_DEFERRED] */
    cudaEvent_t deferred[MGT__NCCL_DEFERRED];
    mgt__nccl_timed *timed; /* this step's calls, timed when the step settles */
    int ntimed;
    long untimed;
    void *stage, *pinned; /* host buffers' device copy and their pinned copy */
    size_t stage_bytes;
    size_t free_before;   /* the device's free memory before the communicators were made */
    int measured;         /* NCCL's memory measured (at the first settle: after mgt.h's warm-up) */
};

/* ---- clocks, messages ---- */

static double mgt__nccl_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static mgt_result mgt__nccl_report(mgt_nccl_fail_fn fail, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return fail(MGT_ERROR_COMM, msg);
}
/* NCCL's message for a failed call on comm: its last error when it has one, else the code's */
static const char *mgt__nccl_why(ncclComm_t comm, ncclResult_t r) {
    const char *last = comm ? ncclGetLastError(comm) : NULL;
    return last && *last ? last : ncclGetErrorString(r);
}
static const char *mgt__nccl_kind(int kind) {
    static const char *names[] = {"TP", "DP", "PP", "embedding", "world", "kv"};
    return kind >= 0 && kind < 6 ? names[kind] : "other";
}

/* ---- the world's state: aborted, and what each rank does ---- */

static int mgt__nccl_world_aborted(const mgt_nccl_world *w) { return __atomic_load_n(&w->aborted, __ATOMIC_ACQUIRE); }

/* what rank r's host does now (its own thread) */
static void mgt__nccl_doing(mgt_nccl_world *w, int r, const char *fmt, ...) {
    mgt__nccl_rank *me = &w->ranks[r];
    va_list ap;
    pthread_mutex_lock(&me->guard);
    va_start(ap, fmt);
    vsnprintf(me->doing, sizeof me->doing, fmt, ap);
    va_end(ap);
    me->since = mgt__nccl_now();
    pthread_mutex_unlock(&me->guard);
}

/* what every rank was last doing, ranks in the same state together (mgt.h and the CLI keep about
   1000 characters of a message: 8 ranks must fit) */
static void mgt__nccl_ranks_state(mgt_nccl_world *w, char *msg, size_t cap, double t) {
    int n = w->world, i, j;
    char (*key)[420] = (char (*)[420])calloc((size_t)n, 420);
    double *age = (double *)calloc((size_t)n, sizeof(double));
    unsigned char *done = (unsigned char *)calloc((size_t)n, 1);
    if (!key || !age || !done) {
        free(key);
        free(age);
        free(done);
        return;
    }
    for (i = 0; i < n; i++) {
        mgt__nccl_rank *o = &w->ranks[i];
        pthread_mutex_lock(&o->guard);
        snprintf(key[i], 420, "%.200s", o->doing[0] ? o->doing : "had not started");
        if (o->last_call[0] && strncmp(o->doing, "issu", 4)) mgt__catf(key[i], 420, ", its last NCCL call %.190s", o->last_call);
        age[i] = o->since > 0 && t > o->since ? t - o->since : 0.0;
        pthread_mutex_unlock(&o->guard);
    }
    mgt__catf(msg, cap, ". The ranks were last:");
    for (i = 0; i < n; i++) {
        double oldest = age[i];
        int count = 0, last = -2, run = 0;
        if (done[i]) continue;
        for (j = i; j < n; j++)
            if (!done[j] && !strcmp(key[j], key[i])) count++;
        mgt__catf(msg, cap, " rank%s", count > 1 ? "s" : "");
        for (j = i; j < n; j++) { /* the ranks as ranges: 0, 2-7 */
            if (done[j] || strcmp(key[j], key[i])) continue;
            done[j] = 1;
            if (age[j] > oldest) oldest = age[j];
            if (j == last + 1) { run++; last = j; continue; }
            if (run) mgt__catf(msg, cap, "-%d", last);
            mgt__catf(msg, cap, "%s%d", last == -2 ? " " : ", ", j);
            last = j;
            run = 0;
        }
        if (run) mgt__catf(msg, cap, "-%d", last);
        mgt__catf(msg, cap, " %s (%.1f s);", key[i], oldest);
    }
    free(key);
    free(age);
    free(done);
}

/* the one message of a failure seen by rank r; then the world is aborted. Called on rank r's thread,
   holding no guard. */
static mgt_result mgt__nccl_failure(mgt_nccl_world *w, int r, mgt_result result, char *why, size_t cap, const char *tail, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
static mgt_result mgt__nccl_failure(mgt_nccl_world *w, int r, mgt_result result, char *why, size_t cap, const char *tail, const char *fmt, ...) {
    char msg[4096] = "", reason[1024];
    double t = mgt__nccl_now();
    mgt__nccl *c = w->ranks[r].comm;
    int i;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    if (mgt__nccl_world_aborted(w)) { /* another rank was first: its message stands */
        pthread_mutex_lock(&w->mu);
        snprintf(msg, sizeof msg, "stopped with the world: %.4000s", w->why[0] ? w->why : "another rank failed");
        pthread_mutex_unlock(&w->mu);
        if (why) snprintf(why, cap, "%s", msg);
        return w->fail(MGT_ERROR_COMM, msg);
    }
    mgt__catf(msg, sizeof msg, "rank %d (GPU %d): %s", r, w->devices[r], reason);
    if (c) { /* the oldest call of this rank that has not completed: what its stream is behind */
        for (i = 0; i < c->ntimed; i++) {
            cudaError_t q = cudaEventQuery(c->timed[i].end);
            (void)cudaGetLastError();
            if (q != cudaSuccess) {
                mgt__catf(msg, sizeof msg, ", behind NCCL %s, issued %.1f s before", c->timed[i].what, t - c->timed[i].issued_s);
                break;
            }
        }
    }
    mgt__nccl_ranks_state(w, msg, sizeof msg, t);
    mgt__catf(msg, sizeof msg, " every rank is stopped (the communicators aborted); nothing after the last checkpoint is saved%s", tail ? tail : "");
    pthread_mutex_lock(&w->mu);
    if (!w->why[0]) snprintf(w->why, sizeof w->why, "%.4095s", msg);
    else { /* another rank failed at the same moment and was first: its message stands */
        char first[4096];
        snprintf(first, sizeof first, "%.4095s", w->why);
        snprintf(msg, sizeof msg, "stopped with the world: %.4000s", first);
        result = MGT_ERROR_COMM;
    }
    pthread_mutex_unlock(&w->mu);
    mgt_nccl_world_abort(w);
    if (why) snprintf(why, cap, "%.4095s", msg);
    return w->fail(result, msg);
}
/* a rank that finds the world aborted by another: that rank's message */
static mgt_result mgt__nccl_echo(mgt_nccl_world *w, char *why, size_t cap) {
    char msg[4200];
    pthread_mutex_lock(&w->mu);
    snprintf(msg, sizeof msg, "stopped with the world: %.4096s", w->why[0] ? w->why : "another rank failed and aborted every communicator");
    pthread_mutex_unlock(&w->mu);
    if (why) snprintf(why, cap, "%s", msg);
    return w->fail(MGT_ERROR_COMM, msg);
}

/* a wait's deadline on rank r's thread: [parallel] timeout_s; in the warm-up step ten times that and
   at least 2 minutes, as loading a library's kernels (and cuDNN's runtime compilation of an engine)
   takes seconds each */
static double mgt__nccl_deadline(const mgt_nccl_world *w, int r) { return !w->ranks[r].warm_up ? w->timeout_s : 10 * w->timeout_s > 120.0 ? 10 * w->timeout_s : 120.0; }
static const char *mgt__nccl_deadline_name(const mgt_nccl_world *w, int r) {
    return w->ranks[r].warm_up ? "the warm-up step's deadline: 10 x [parallel] timeout_s, at least 120 s" : "[parallel] timeout_s";
}

/* MGT_CUDA_SYNC=1: every op (and NCCL call) is waited for, so a failure names it */
static int mgt__nccl_sync_mode(void) {
    static int mode = -1;
    if (__atomic_load_n(&mode, __ATOMIC_RELAXED) < 0) {
        const char *e = getenv("MGT_CUDA_SYNC");
        __atomic_store_n(&mode, e && *e && strcmp(e, "0") != 0, __ATOMIC_RELAXED);
    }
    return __atomic_load_n(&mode, __ATOMIC_RELAXED);
}

/* a CUDA error under NCCL: a kernel of this rank may have faulted earlier */
static const char *mgt__nccl_cuda_hint(void) {
    return mgt__nccl_sync_mode() ? NULL : ". A CUDA error under NCCL: an earlier kernel of this rank may have faulted; MGT_CUDA_SYNC=1 waits for every op and names it";
}

/* NCCL's asynchronous errors of rank r's communicators: ncclSuccess, or the first error (with its
   group in *gi, -1 for the world communicator) */
static ncclResult_t mgt__nccl_async(mgt_nccl_world *w, int r, int *gi) {
    mgt__nccl_rank *me = &w->ranks[r];
    mgt__nccl *c = me->comm;
    ncclResult_t bad = ncclSuccess;
    int i;
    *gi = -1;
    pthread_mutex_lock(&me->guard);
    if (!me->dead) {
        ncclResult_t e = ncclSuccess;
        if (w->comms[r] && ncclCommGetAsyncError(w->comms[r], &e) == ncclSuccess && e != ncclSuccess && e != ncclInProgress) bad = e;
        for (i = 0; c && bad == ncclSuccess && i < c->ngroups; i++)
            if (c->groups[i].comm && c->groups[i].comm != w->comms[r] && ncclCommGetAsyncError(c->groups[i].comm, &e) == ncclSuccess &&
                e != ncclSuccess && e != ncclInProgress) {
                bad = e;
                *gi = i;
            }
    }
    pthread_mutex_unlock(&me->guard);
    return bad;
}

/* a short pause in a poll: yields first, then sleeps up to 1 ms (the polls of communicators in
   progress, which no event signals) */
static void mgt__nccl_pause(int *spins) {
    if (++*spins < 64) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, *spins < 1000 ? 20000L : 1000000L};
    nanosleep(&ts, NULL);
}

static void *mgt__nccl_waiter_main(void *arg) {
    mgt__nccl_waiter *wt = (mgt__nccl_waiter *)arg;
    if (cudaSetDevice(wt->device) != cudaSuccess) (void)cudaGetLastError();
    if (mgt_cuda_fake_note) mgt_cuda_fake_note(wt->device, MGT_NOTE_WAITER, NULL);
    pthread_mutex_lock(&wt->mu);
    for (;;) {
        cudaEvent_t e;
        cudaError_t q;
        while (!wt->quit && wt->answered == wt->asked) pthread_cond_wait(&wt->cv, &wt->mu);
        if (wt->quit) break;
        e = wt->event;
        pthread_mutex_unlock(&wt->mu);
        q = cudaEventSynchronize(e);
        if (q != cudaSuccess) (void)cudaGetLastError();
        pthread_mutex_lock(&wt->mu);
        wt->result = q;
        wt->answered = wt->asked;
        pthread_cond_broadcast(&wt->cv);
    }
    pthread_mutex_unlock(&wt->mu);
    return NULL;
}
/* hands `event` to rank r's waiter: its ticket, or 0 when the waiter is still on an earlier event (a
   wait that failed at its deadline): then the caller keeps polling */
static long mgt__nccl_waiter_ask(mgt_nccl_world *w, int r, cudaEvent_t event) {
    mgt__nccl_waiter *wt = &w->ranks[r].waiter;
    long ticket = 0;
    pthread_mutex_lock(&wt->mu);
    if (!wt->started && !wt->quit) wt->started = pthread_create(&wt->thread, NULL, mgt__nccl_waiter_main, wt) == 0;
    if (wt->started && wt->answered == wt->asked) {
        wt->event = event;
        ticket = ++wt->asked;
        pthread_cond_broadcast(&wt->cv);
    }
    pthread_mutex_unlock(&wt->mu);
    return ticket;
}
/* up to `until` (CLOCK_REALTIME, as the condition's clock) for the answer to ticket: 1 and its result,
   or 0 */
static int mgt__nccl_waiter_answer(mgt_nccl_world *w, int r, long ticket, const struct timespec *until, cudaError_t *result) {
    mgt__nccl_waiter *wt = &w->ranks[r].waiter;
    int done;
    pthread_mutex_lock(&wt->mu);
    if (wt->answered < ticket) pthread_cond_timedwait(&wt->cv, &wt->mu, until);
    done = wt->answered >= ticket;
    if (done) *result = wt->result;
    pthread_mutex_unlock(&wt->mu);
    return done;
}
/* the waiter ends (world destroy): joined once its last request is answered, within timeout_s; a
   waiter still inside cudaEventSynchronize then (a device that never completes) is left to the
   process's end */
static void mgt__nccl_waiter_end(mgt__nccl_waiter *wt, double timeout_s) {
    double start = mgt__nccl_now();
    int idle;
    pthread_mutex_lock(&wt->mu);
    wt->quit = 1;
    pthread_cond_broadcast(&wt->cv);
    while (wt->started && wt->answered != wt->asked && mgt__nccl_now() - start <= timeout_s) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 10000000L;
        if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&wt->cv, &wt->mu, &until);
    }
    idle = wt->answered == wt->asked;
    pthread_mutex_unlock(&wt->mu);
    if (!wt->started) return;
    if (idle) pthread_join(wt->thread, NULL);
    else pthread_detach(wt->thread);
}

/* the device of rank r failed (a kernel faulted: the sticky error q) while it waited for `what` */
static mgt_result mgt__nccl_device_failed(mgt_nccl_world *w, int r, cudaError_t q, const char *what, char *why, size_t cap) {
    return mgt__nccl_failure(w, r, MGT_ERROR_DEVICE, why, cap,
                             mgt__nccl_sync_mode() ? NULL : ". The failing op is not known: MGT_CUDA_SYNC=1 waits for every op and names it",
                             "the device failed (%s: %s)%s while waiting for %s", cudaGetErrorName(q), cudaGetErrorString(q),
                             w->ranks[r].warm_up ? " in the warm-up step" : "", what);
}

mgt_result mgt_nccl_wait(mgt_nccl_world *w, int r, void *event, const char *what, char *why, size_t cap) {
    double start = mgt__nccl_now(), next_check = start;
    int spins = 0;
    long ticket = 0;
    mgt__nccl_doing(w, r, "waiting for %s", what);
    for (;;) {
        cudaError_t q = cudaErrorNotReady;
        double t;
        if (mgt__nccl_world_aborted(w)) return mgt__nccl_echo(w, why, cap);
        if (ticket) { /* the waiter has it: sleep until it answers, 1 ms at most between checks */
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += 1000000L;
            if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
            if (!mgt__nccl_waiter_answer(w, r, ticket, &until, &q)) q = cudaErrorNotReady;
        } else {
            q = cudaEventQuery((cudaEvent_t)event);
            (void)cudaGetLastError(); /* not ready is no error, but may stay as the last error and fail the next launch check */
        }
        if (q == cudaSuccess) {
            mgt__nccl_doing(w, r, "running, after %s", what);
            return MGT_OK;
        }
        if (q != cudaErrorNotReady) return mgt__nccl_device_failed(w, r, q, what, why, cap);
        t = mgt__nccl_now();
        if (t >= next_check) {
            int gi;
            ncclResult_t e = mgt__nccl_async(w, r, &gi);
            next_check = t + 0.001;
            if (e == ncclUnhandledCudaError) { /* NCCL saw this rank's device fault first: the device's own error says it */
                cudaError_t ce = cudaEventQuery((cudaEvent_t)event);
                (void)cudaGetLastError();
                if (ce != cudaSuccess && ce != cudaErrorNotReady) return mgt__nccl_device_failed(w, r, ce, what, why, cap);
            }
            if (e != ncclSuccess) {
                mgt__nccl *c = w->ranks[r].comm;
                ncclComm_t comm = gi >= 0 ? c->groups[gi].comm : w->comms[r];
                return mgt__nccl_failure(w, r, MGT_ERROR_COMM, why, cap, NULL, "NCCL reported an asynchronous error on %s%d (%s): %s (%s), while waiting for %s",
                                         gi >= 0 ? "group " : "the world communicator of rank ", gi >= 0 ? c->groups[gi].id : r,
                                         gi >= 0 ? mgt__nccl_kind(c->groups[gi].kind) : "world", mgt__nccl_why(comm, e), ncclGetErrorString(e), what);
            }
        }
        if (t - start > mgt__nccl_deadline(w, r))
            return mgt__nccl_failure(w, r, MGT_ERROR_COMM, why, cap, NULL, "waited %.1f s (%s) for %s", t - start, mgt__nccl_deadline_name(w, r), what);
        if (!ticket && ++spins >= 64) ticket = mgt__nccl_waiter_ask(w, r, (cudaEvent_t)event); /* after ~64 yields: a short wait costs no handover */
        if (!ticket) mgt__nccl_pause(&spins);
    }
}

/* ---- NCCL calls: each under the rank's guard; a non-blocking communicator that answers
   ncclInProgress is polled until it has enqueued the call, within the deadline ---- */

/* enter: the guard is taken unless the world was aborted (then MGT_ERROR_COMM with the message) */
static mgt_result mgt__nccl_enter(mgt__nccl *c) {
    mgt__nccl_rank *me = &c->w->ranks[c->rank];
    pthread_mutex_lock(&me->guard);
    if (me->dead || mgt__nccl_world_aborted(c->w)) {
        pthread_mutex_unlock(&me->guard);
        return mgt__nccl_echo(c->w, NULL, 0);
    }
    return MGT_OK;
}
static void mgt__nccl_leave(mgt__nccl *c) { pthread_mutex_unlock(&c->w->ranks[c->rank].guard); }

/* after a call on comm that answered r: done, or polled until comm leaves ncclInProgress */
static mgt_result mgt__nccl_finish(mgt__nccl *c, ncclComm_t comm, ncclResult_t r, const char *what) {
    mgt_nccl_world *w = c->w;
    double start = mgt__nccl_now();
    int spins = 0;
    if (r == ncclSuccess) return MGT_OK;
    while (r == ncclInProgress) {
        if (mgt__nccl_world_aborted(w)) return mgt__nccl_echo(w, NULL, 0);
        if (mgt__nccl_now() - start > mgt__nccl_deadline(w, c->rank))
            return mgt__nccl_failure(w, c->rank, MGT_ERROR_COMM, NULL, 0, NULL, "NCCL %s stayed in progress (ncclInProgress: not enqueued) for %.1f s (%s)", what,
                                     mgt__nccl_now() - start, mgt__nccl_deadline_name(w, c->rank));
        mgt__nccl_pause(&spins);
        if (mgt__nccl_enter(c) != MGT_OK) return MGT_ERROR_COMM;
        if (ncclCommGetAsyncError(comm, &r) != ncclSuccess) r = ncclInternalError;
        mgt__nccl_leave(c);
    }
    if (r == ncclSuccess) return MGT_OK;
    if (r == ncclUnhandledCudaError) { /* a kernel of this rank faulted (the device's sticky error): say which error, and how to find the op */
        cudaError_t ce = cudaStreamQuery(c->stream);
        (void)cudaGetLastError();
        if (ce != cudaSuccess && ce != cudaErrorNotReady)
            return mgt__nccl_failure(w, c->rank, MGT_ERROR_DEVICE, NULL, 0, mgt__nccl_cuda_hint(), "NCCL %s failed: %s (%s); the device failed (%s: %s)", what,
                                     mgt__nccl_why(comm, r), ncclGetErrorString(r), cudaGetErrorName(ce), cudaGetErrorString(ce));
    }
    return mgt__nccl_failure(w, c->rank, MGT_ERROR_COMM, NULL, 0, r == ncclUnhandledCudaError ? mgt__nccl_cuda_hint() : NULL, "NCCL %s failed: %s (%s)", what,
                             mgt__nccl_why(comm, r), ncclGetErrorString(r));
}

#define MGT__CUDA_TRY(c, what, call)                                                                              \
    do {                                                                                                           \
        cudaError_t mgt__e = (call);                                                                               \
        if (mgt__e != cudaSuccess)                                                                                 \
            return mgt__nccl_report((c)->w->fail, "%s on rank %d (device %d): %s (%s)", what, (c)->comm.rank,     \
                                    (c)->device, cudaGetErrorString(mgt__e), #call);                               \
    } while (0)

/* ---- element types and sizes */

static ncclDataType_t mgt__nccl_type(int dtype) {
    return dtype == MGT_F64 ? ncclFloat64 : dtype == MGT_BF16 ? ncclBfloat16 : dtype == MGT_F16 ? ncclFloat16 : ncclFloat32;
}
static size_t mgt__nccl_elt(int dtype) { return dtype == MGT_F64 ? 8 : dtype == MGT_F32 ? 4 : 2; }

/* ---- a call: after the compute stream's work, before its next work */

/* a call with nothing to move: done, and a defer before it applies to none (the next call must
   not inherit it, or the compute would read that call's result too early) */
static mgt_result mgt__nccl_nothing(mgt__nccl *c) {
    c->defer_next = 0;
    return MGT_OK;
}

/* MGT_CUDA_SYNC=1: the backend's last op waited for before the stream is ordered after it, so a fault
   in it is reported naming it (the world is then aborted, and the call returns that message) */
static int mgt__nccl_finish_op(mgt__nccl *c) { /* 1 when it ran and the world is aborted since */
    mgt__nccl_rank *me = &c->w->ranks[c->rank];
    if (!me->finish_op || !mgt__nccl_sync_mode()) return 0;
    me->finish_op(me->finish_ctx);
    return mgt__nccl_world_aborted(c->w);
}

/* names the call (for the fakes, the rank's state and a later message), orders the communication
   stream after the compute and starts its timing; the guard is held from here to mgt__nccl_end */
static mgt_result mgt__nccl_begin(mgt__nccl *c, int coll, const char *what) {
    mgt__nccl_rank *me = &c->w->ranks[c->rank];
    mgt__nccl_timed *t = c->ntimed < MGT__NCCL_TIMED ? &c->timed[c->ntimed] : NULL;
    double now = mgt__nccl_now();
    mgt__nccl_finish_op(c);
    if (mgt__nccl_enter(c) != MGT_OK) return MGT_ERROR_COMM;
    if (me->in_step) me->step_calls++; /* the warm-up step calls nothing: its communicator is quiet */
    snprintf(me->last_call, sizeof me->last_call, "%.159s", what);
    if (me->in_step) mgt__catf(me->last_call, sizeof me->last_call, " (call %ld in steps, step %ld)", me->step_calls, me->step);
    me->last_call_s = now;
    snprintf(me->doing, sizeof me->doing, "issuing %.200s", me->last_call);
    me->since = now;
    if (mgt_cuda_fake_note) mgt_cuda_fake_note(c->device, MGT_NOTE_OP, me->doing);
    if (t) {
        t->coll = coll;
        snprintf(t->what, sizeof t->what, "%.159s", me->last_call);
        t->issued_s = now;
    }
#define MGT__TRY_IN(what_, call)                                                                                   \
    do {                                                                                                          \
        cudaError_t mgt__e = (call);                                                                              \
        if (mgt__e != cudaSuccess) {                                                                              \
            mgt__nccl_leave(c);                                                                                   \
            return mgt__nccl_report(c->w->fail, "%s on rank %d (device %d): %s (%s)", what_, c->comm.rank, c->device, \
                                    cudaGetErrorString(mgt__e), #call);                                           \
        }                                                                                                         \
    } while (0)
    MGT__TRY_IN("ordering communication after compute", cudaEventRecord(c->ready, c->compute));
    MGT__TRY_IN("ordering communication after compute", cudaStreamWaitEvent(c->stream, c->ready, 0));
    if (t) MGT__TRY_IN("timing communication", cudaEventRecord(t->start, c->stream));
    return MGT_OK;
}
/* after the NCCL call (still under the guard): an error is reported; else the call is waited for until
   NCCL has enqueued it (a non-blocking communicator that connects, or launches from its own thread,
   answers ncclInProgress and puts the work on the stream only later: src/group.cc), and only then
   is the compute stream ordered after it and its timing closed. Ordering before that point would
   order the compute after nothing, and it would read a buffer before the collective writes it. */
static mgt_result mgt__nccl_end(mgt__nccl *c, int coll, double bytes, ncclComm_t comm, ncclResult_t r, const char *what) {
    mgt__nccl_rank *me = &c->w->ranks[c->rank];
    mgt__nccl_timed *t = c->ntimed < MGT__NCCL_TIMED ? &c->timed[c->ntimed] : NULL;
    if (r != ncclSuccess && r != ncclInProgress) {
        ncclResult_t async = ncclSuccess;
        if (comm) ncclCommGetAsyncError(comm, &async);
        mgt__nccl_leave(c);
        if (async != ncclSuccess && async != ncclInProgress) /* the communicator failed earlier, asynchronously */
            return mgt__nccl_failure(c->w, c->rank, MGT_ERROR_COMM, NULL, 0, r == ncclUnhandledCudaError ? mgt__nccl_cuda_hint() : NULL,
                                     "NCCL reported an asynchronous error (%s: %s), found issuing %s", ncclGetErrorString(async),
                                     mgt__nccl_why(comm, async), what);
        return mgt__nccl_failure(c->w, c->rank, MGT_ERROR_COMM, NULL, 0, r == ncclUnhandledCudaError ? mgt__nccl_cuda_hint() : NULL,
                                 "NCCL %s failed: %s (%s)", what, mgt__nccl_why(comm, r), ncclGetErrorString(r));
    }
    c->comm.stats.calls[coll]++;
    c->comm.stats.bytes[coll] += bytes;
    if (r == ncclInProgress) snprintf(me->doing, sizeof me->doing, "issuing %.200s", me->last_call);
    mgt__nccl_leave(c);
    if (mgt__nccl_finish(c, comm, r, what) != MGT_OK) return MGT_ERROR_COMM;
    if (mgt__nccl_enter(c) != MGT_OK) return MGT_ERROR_COMM;
    /* MGT__TRY_IN: mgt__nccl_begin's, which leaves the guard on a failure */
    if (t) {
        MGT__TRY_IN("timing communication", cudaEventRecord(t->end, c->stream));
        c->ntimed++;
    } else
        c->untimed++;
    if (c->defer_next) { /* the compute goes on; mgt__nccl_sync orders it later */
        c->defer_next = 0;
        MGT__TRY_IN("marking deferred communication", cudaEventRecord(c->deferred[(c->tickets - 1) % MGT__NCCL_DEFERRED], c->stream));
    } else {
        MGT__TRY_IN("ordering compute after communication", cudaEventRecord(c->done, c->stream));
        MGT__TRY_IN("ordering compute after communication", cudaStreamWaitEvent(c->compute, c->done, 0));
    }
#undef MGT__TRY_IN
    snprintf(me->doing, sizeof me->doing, "enqueueing after %.200s", what);
    mgt__nccl_leave(c);
    if (mgt__nccl_sync_mode()) { /* MGT_CUDA_SYNC=1: the call is waited for, so a failure names it */
        char waited[200];
        snprintf(waited, sizeof waited, "NCCL %.160s to finish (MGT_CUDA_SYNC=1)", what);
        MGT__CUDA_TRY(c, "marking the end of a call", cudaEventRecord(c->end, c->stream));
        return mgt_nccl_wait(c->w, c->rank, c->end, waited, NULL, 0);
    }
    return MGT_OK;
}

static int mgt__nccl_on_device(const void *p) {
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError(); /* older runtimes flag host pointers as an error: not sticky, clear it */
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

static mgt__nccl_group *mgt__nccl_find(mgt__nccl *c, const mgt_group *g) {
    int i;
    for (i = 0; i < c->ngroups; i++)
        if (c->groups[i].id == g->id) return &c->groups[i];
    return NULL;
}

/* One collective over g. in/out: the caller's buffers (out NULL for in-place); in_bytes and
   out_bytes their sizes; host buffers go through the pinned copy and the stage: [in | out] */
typedef struct mgt__nccl_call {
    int coll;
    const char *name;
    const mgt_group *g;
    const void *in;
    void *out;
    size_t in_bytes, out_bytes, count;
    int dtype, root;
    double bytes; /* what the statistics count */
} mgt__nccl_call;

static mgt_result mgt__nccl_run(mgt__nccl *c, const mgt__nccl_call *k) {
    mgt__nccl_group *gr = mgt__nccl_find(c, k->g);
    const void *in = k->in;
    void *out = k->out ? k->out : (void *)k->in;
    int host = !mgt__nccl_on_device(k->in) || (k->out && !mgt__nccl_on_device(k->out));
    ncclDataType_t type = mgt__nccl_type(k->dtype);
    size_t off = (k->in_bytes + 255) / 256 * 256; /* keep the staged output aligned */
    char what[160];
    ncclResult_t r = ncclSuccess;
    mgt_result res;
    if (!k->count) return mgt__nccl_nothing(c);
    if (!gr)
        return mgt__nccl_report(c->w->fail, "NCCL %s on group %d from rank %d: the rank was not given this group when its communicator was made",
                                k->name, k->g->id, c->comm.rank);
    if (host && off + k->out_bytes > c->stage_bytes)
        return mgt__nccl_report(c->w->fail, "NCCL %s on group %d from rank %d: %zu bytes of host buffers, more than the %zu staged when the run was made",
                                k->name, k->g->id, c->comm.rank, off + k->out_bytes, c->stage_bytes);
    snprintf(what, sizeof what, "%s #%ld on group %d (%s)", k->name, gr->seq ? *gr->seq : 0L, gr->id, mgt__nccl_kind(gr->kind));
    if (gr->seq) ++*gr->seq;
    if (host) memcpy(c->pinned, k->in, k->in_bytes); /* the host's data, in memory the copy can read asynchronously */
    if (mgt__nccl_begin(c, k->coll, what) != MGT_OK) return MGT_ERROR_COMM;
    if (host) {
        cudaError_t e = cudaMemcpyAsync(c->stage, c->pinned, k->in_bytes, cudaMemcpyHostToDevice, c->stream);
        if (e != cudaSuccess) {
            mgt__nccl_leave(c);
            return mgt__nccl_report(c->w->fail, "staging a host buffer on rank %d (device %d): %s", c->comm.rank, c->device, cudaGetErrorString(e));
        }
        in = c->stage;
        out = k->out ? (char *)c->stage + off : c->stage;
    }
    if (!gr->comm) { /* a group of one: the result is the input */
        if (out != in && cudaMemcpyAsync(out, in, k->in_bytes, cudaMemcpyDeviceToDevice, c->stream) != cudaSuccess) r = ncclUnhandledCudaError;
    } else if (k->coll == MGT_COLL_ALL_REDUCE || k->coll == MGT_COLL_BARRIER)
        r = ncclAllReduce(in, out, k->count, type, ncclSum, gr->comm, c->stream);
    else if (k->coll == MGT_COLL_REDUCE_SCATTER)
        r = ncclReduceScatter(in, out, k->count, type, ncclSum, gr->comm, c->stream);
    else if (k->coll == MGT_COLL_ALL_GATHER)
        r = ncclAllGather(in, out, k->count, type, gr->comm, c->stream);
    else /* broadcast */
        r = ncclBroadcast(in, out, k->count, type, k->root, gr->comm, c->stream);
    res = mgt__nccl_end(c, k->coll, k->bytes, gr->comm, r, what);
    if (res != MGT_OK) return res;
    if (host) { /* the host reads the result at once: copied back to pinned memory, then waited for */
        void *dst = k->out ? k->out : (void *)k->in;
        size_t n = k->out ? k->out_bytes : k->in_bytes;
        MGT__CUDA_TRY(c, "staging a host buffer", cudaMemcpyAsync(c->pinned, out, n, cudaMemcpyDeviceToHost, c->stream));
        MGT__CUDA_TRY(c, "staging a host buffer", cudaEventRecord(c->end, c->stream));
        if (mgt_nccl_wait(c->w, c->rank, c->end, what, NULL, 0) != MGT_OK) return MGT_ERROR_COMM;
        memcpy(dst, c->pinned, n);
    }
    return MGT_OK;
}

/* ---- the table */

static mgt_result mgt__nccl_all_reduce(mgt_comm *cm, const mgt_group *g, void *buf, size_t count, int dtype) {
    size_t b = count * mgt__nccl_elt(dtype);
    mgt__nccl_call k = {MGT_COLL_ALL_REDUCE, "all-reduce", g, buf, NULL, b, 0, count, dtype, 0, (double)b};
    return mgt__nccl_run((mgt__nccl *)cm, &k);
}
static mgt_result mgt__nccl_reduce_scatter(mgt_comm *cm, const mgt_group *g, const void *send, void *recv, size_t recv_count, int dtype) {
    size_t b = recv_count * mgt__nccl_elt(dtype);
    mgt__nccl_call k = {MGT_COLL_REDUCE_SCATTER, "reduce-scatter", g, send, recv, b * (size_t)g->size, b, recv_count, dtype, 0,
                        (double)(b * (size_t)g->size)};
    return mgt__nccl_run((mgt__nccl *)cm, &k);
}
static mgt_result mgt__nccl_all_gather(mgt_comm *cm, const mgt_group *g, const void *send, void *recv, size_t send_count, int dtype) {
    size_t b = send_count * mgt__nccl_elt(dtype);
    mgt__nccl_call k = {MGT_COLL_ALL_GATHER, "all-gather", g, send, recv, b, b * (size_t)g->size, send_count, dtype, 0,
                        (double)(b * (size_t)g->size)};
    return mgt__nccl_run((mgt__nccl *)cm, &k);
}
static mgt_result mgt__nccl_broadcast(mgt_comm *cm, const mgt_group *g, void *buf, size_t count, int dtype, int root_index) {
    size_t b = count * mgt__nccl_elt(dtype);
    mgt__nccl_call k = {MGT_COLL_BROADCAST, "broadcast", g, buf, NULL, b, 0, count, dtype, root_index, (double)b};
    return mgt__nccl_run((mgt__nccl *)cm, &k);
}
/* NCCL has no barrier: a one-element all-reduce that the host waits for */
static mgt_result mgt__nccl_barrier(mgt_comm *cm, const mgt_group *g) {
    mgt__nccl *c = (mgt__nccl *)cm;
    float one = 1.0f;
    mgt__nccl_call k = {MGT_COLL_BARRIER, "barrier", g, &one, NULL, sizeof one, 0, 1, MGT_F32, 0, 0};
    mgt_result r = mgt__nccl_run(c, &k);
    if (r == MGT_OK && one != (float)g->size)
        return mgt__nccl_report(c->w->fail, "NCCL barrier on group %d, rank %d: %g members arrived of %d", g->id, cm->rank, one, g->size);
    return r;
}

/* mgt_comm.defer and .sync: a deferred call leaves the compute stream free (a DP bucket reduced
   while backward goes on, a ZeRO-3 prefetch gathered while this unit computes); sync makes the
   compute wait for everything on the communication stream so far */
static long mgt__nccl_defer(mgt_comm *cm) {
    mgt__nccl *c = (mgt__nccl *)cm;
    c->defer_next = 1;
    return c->tickets++;
}
/* a ticket's event may since have been recorded again by a later deferred call: waiting for that
   later point of the same stream is later than needed, never too early */
static mgt_result mgt__nccl_sync(mgt_comm *cm, long ticket) {
    mgt__nccl *c = (mgt__nccl *)cm;
    cudaEvent_t e = c->done;
    if (mgt__nccl_finish_op(c)) return mgt__nccl_echo(c->w, NULL, 0);
    if (ticket >= 0 && ticket < c->tickets) e = c->deferred[ticket % MGT__NCCL_DEFERRED];
    else MGT__CUDA_TRY(c, "ordering compute after communication", cudaEventRecord(c->done, c->stream));
    MGT__CUDA_TRY(c, "ordering compute after communication", cudaStreamWaitEvent(c->compute, e, 0));
    return MGT_OK;
}

/* send and recv go over the world communicator, peer = global rank. NCCL's send completes when the
   peer receives (unlike the local communicator's buffered send), which the pipeline schedule must
   respect: every send is matched by a receive the peer posts without waiting for this rank, or
   goes with this rank's receive in one sendrecv. */
static mgt_result mgt__nccl_p2p(mgt_comm *cm, int is_send, int peer, void *buf, size_t count, int dtype) {
    mgt__nccl *c = (mgt__nccl *)cm;
    ncclComm_t wc = c->wcomm;
    size_t b = count * mgt__nccl_elt(dtype);
    char what[160];
    ncclResult_t r;
    if (!count) return mgt__nccl_nothing(c);
    if (peer < 0 || peer >= c->w->world || peer == cm->rank)
        return mgt__nccl_report(c->w->fail, "NCCL %s on rank %d: peer %d is not another rank of the %d", is_send ? "send" : "recv", cm->rank, peer,
                                c->w->world);
    if (!mgt__nccl_on_device(buf))
        return mgt__nccl_report(c->w->fail, "NCCL %s from rank %d to rank %d: the buffer %p is not device memory", is_send ? "send" : "recv",
                                is_send ? cm->rank : peer, is_send ? peer : cm->rank, buf);
    if (is_send) snprintf(what, sizeof what, "send #%ld to rank %d", c->sends[peer]++, peer);
    else snprintf(what, sizeof what, "recv #%ld from rank %d", c->recvs[peer]++, peer);
    if (mgt__nccl_begin(c, MGT_COLL_SEND_RECV, what) != MGT_OK) return MGT_ERROR_COMM;
    if (is_send) r = ncclSend(buf, count, mgt__nccl_type(dtype), peer, wc, c->stream);
    else r = ncclRecv(buf, count, mgt__nccl_type(dtype), peer, wc, c->stream);
    return mgt__nccl_end(c, MGT_COLL_SEND_RECV, (double)b, wc, r, what);
}
/* one NCCL group: both proceed together, so two ranks that each send to the other cannot deadlock */
static mgt_result mgt__nccl_sendrecv(mgt_comm *cm, int send_peer, const void *send, int recv_peer, void *recv, size_t count, int dtype) {
    mgt__nccl *c = (mgt__nccl *)cm;
    ncclComm_t wc = c->wcomm;
    size_t b = count * mgt__nccl_elt(dtype);
    ncclResult_t rs, rr, re;
    char what[160];
    if (!count) return mgt__nccl_nothing(c);
    if (send_peer < 0 || send_peer >= c->w->world || recv_peer < 0 || recv_peer >= c->w->world || send_peer == cm->rank || recv_peer == cm->rank)
        return mgt__nccl_report(c->w->fail, "NCCL sendrecv on rank %d: peers %d and %d must be other ranks of the %d", cm->rank, send_peer, recv_peer,
                                c->w->world);
    if (!mgt__nccl_on_device(send) || !mgt__nccl_on_device(recv))
        return mgt__nccl_report(c->w->fail, "NCCL sendrecv on rank %d (to %d, from %d): the buffers %p and %p must be device memory", cm->rank, send_peer,
                                recv_peer, send, recv);
    snprintf(what, sizeof what, "sendrecv (send #%ld to rank %d, recv #%ld from rank %d)", c->sends[send_peer], send_peer, c->recvs[recv_peer],
             recv_peer);
    c->sends[send_peer]++;
    c->recvs[recv_peer]++;
    if (mgt__nccl_begin(c, MGT_COLL_SEND_RECV, what) != MGT_OK) return MGT_ERROR_COMM;
    ncclGroupStart();
    rs = ncclSend(send, count, mgt__nccl_type(dtype), send_peer, wc, c->stream);
    rr = ncclRecv(recv, count, mgt__nccl_type(dtype), recv_peer, wc, c->stream);
    re = ncclGroupEnd(); /* always: a group left open would swallow the next calls */
    c->comm.stats.calls[MGT_COLL_SEND_RECV]++; /* a send and a receive, as the local communicator counts them */
    return mgt__nccl_end(c, MGT_COLL_SEND_RECV, 2.0 * (double)b, wc,
                         rs != ncclSuccess && rs != ncclInProgress ? rs : rr != ncclSuccess && rr != ncclInProgress ? rr : re, what);
}
static mgt_result mgt__nccl_send(mgt_comm *cm, int peer, const void *buf, size_t count, int dtype) {
    return mgt__nccl_p2p(cm, 1, peer, (void *)buf, count, dtype);
}
static mgt_result mgt__nccl_recv(mgt_comm *cm, int peer, void *buf, size_t count, int dtype) {
    return mgt__nccl_p2p(cm, 0, peer, buf, count, dtype);
}

/* ---- worlds and ranks */

static void mgt__nccl_world_free(mgt_nccl_world *w) {
    int i;
    if (!w) return;
    if (w->ranks)
        for (i = 0; i < w->world; i++) {
            mgt__nccl_waiter_end(&w->ranks[i].waiter, w->timeout_s);
            pthread_mutex_destroy(&w->ranks[i].guard);
            pthread_mutex_destroy(&w->ranks[i].waiter.mu);
            pthread_cond_destroy(&w->ranks[i].waiter.cv);
        }
    pthread_mutex_destroy(&w->mu);
    free(w->ranks);
    free(w->comms);
    free(w->devices);
    free(w);
}

mgt_result mgt_nccl_unique_id(void *id, mgt_nccl_fail_fn fail) {
    ncclUniqueId u;
    ncclResult_t r = ncclGetUniqueId(&u);
    if (r != ncclSuccess) return mgt__nccl_report(fail, "ncclGetUniqueId: %s", ncclGetErrorString(r));
    memcpy(id, &u, sizeof u);
    return MGT_OK;
}

mgt_result mgt_nccl_world_create(int world, int first, int count, const int *devices, const void *unique_id, double timeout_s,
                                 mgt_nccl_fail_fn fail, mgt_nccl_world **out) {
    mgt_nccl_world *w;
    ncclUniqueId id;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    ncclResult_t r = ncclSuccess;
    double start;
    int i, spins = 0, prev = 0, end = first + count;
    *out = NULL;
    if (first < 0 || count < 1 || end > world || (!unique_id && count != world))
        return mgt__nccl_report(fail, "NCCL world of %d ranks: this process's ranks %d..%d are not inside it, or have no unique id from the "
                                "process of rank 0", world, first, end - 1);
    w = (mgt_nccl_world *)calloc(1, sizeof *w);
    if (!w) return fail(MGT_ERROR_MEMORY, "out of memory");
    pthread_mutex_init(&w->mu, NULL);
    w->world = world;
    w->fail = fail;
    w->timeout_s = timeout_s > 0 ? timeout_s : 300.0;
    w->devices = (int *)calloc((size_t)world, sizeof(int));
    w->comms = (ncclComm_t *)calloc((size_t)world, sizeof(ncclComm_t));
    w->ranks = (mgt__nccl_rank *)calloc((size_t)world, sizeof(mgt__nccl_rank));
    if (!w->devices || !w->comms || !w->ranks) {
        free(w->ranks);
        w->ranks = NULL;
        mgt__nccl_world_free(w);
        return fail(MGT_ERROR_MEMORY, "out of memory");
    }
    for (i = 0; i < world; i++) {
        w->devices[i] = i >= first && i < end ? devices[i - first] : -1;
        if (w->devices[i] < 0) snprintf(w->ranks[i].doing, sizeof w->ranks[i].doing, "in another process");
        pthread_mutex_init(&w->ranks[i].guard, NULL);
        pthread_mutex_init(&w->ranks[i].waiter.mu, NULL);
        w->ranks[i].waiter.device = w->devices[i];
        pthread_cond_init(&w->ranks[i].waiter.cv, NULL);
    }
    /* NCCL 2.22 and later connect each algorithm (ring, tree, NVLS...) at its first use
       (NCCL_RUNTIME_CONNECT=1, the default): step 1's first bucket-sized all-reduce, its first
       reduce-scatter and all-gather would allocate and set up proxies inside the step, which mgt
       forbids, and no warm-up of a few elements selects the algorithms a step's sizes do. 0 connects
       everything when the communicators are made. NCCL reads it once, at its first communicator, so
       it is set before that; a value the user set stands (then step 1 connects, slowly but safely). */
    if (!getenv("NCCL_RUNTIME_CONNECT")) setenv("NCCL_RUNTIME_CONNECT", "0", 0);
    /* this process's ranks from this thread, in one group; non-blocking, so polled until every rank
       is ready (ranks of other processes join the same id from theirs) */
    config.blocking = 0;
    cudaGetDevice(&prev);
    if (unique_id) memcpy(&id, unique_id, sizeof id);
    else r = ncclGetUniqueId(&id);
    if (r == ncclSuccess) {
        ncclGroupStart();
        for (i = first; i < end && r == ncclSuccess; i++) {
            cudaSetDevice(w->devices[i]);
            r = ncclCommInitRankConfig(&w->comms[i], world, id, i, &config);
            if (r == ncclInProgress) r = ncclSuccess;
        }
        if (ncclGroupEnd() == ncclSuccess || r != ncclSuccess) {}
    }
    cudaSetDevice(prev);
    start = mgt__nccl_now();
    for (i = first; i < end && r == ncclSuccess; i++) {
        ncclResult_t st = ncclInProgress;
        while (w->comms[i] && ncclCommGetAsyncError(w->comms[i], &st) == ncclSuccess && st == ncclInProgress) {
            if (mgt__nccl_now() - start > w->timeout_s) break;
            mgt__nccl_pause(&spins);
        }
        if (!w->comms[i] || st != ncclSuccess) r = w->comms[i] ? st : ncclInternalError;
    }
    if (r != ncclSuccess) {
        mgt_result res = mgt__nccl_report(fail, "NCCL could not start on %d GPU%s (ncclCommInitRankConfig): %s", world, world == 1 ? "" : "s",
                                          r == ncclInProgress ? "still in progress after [parallel] timeout_s" : ncclGetErrorString(r));
        for (i = first; i < end; i++)
            if (w->comms[i]) ncclCommAbort(w->comms[i]);
        mgt__nccl_world_free(w);
        return res;
    }
    *out = w;
    return MGT_OK;
}

int mgt_nccl_world_rank(const mgt_nccl_world *w, int device) {
    int i;
    for (i = 0; w && device >= 0 && i < w->world; i++)
        if (w->devices[i] == device) return i;
    return -1;
}
double mgt_nccl_timeout(const mgt_nccl_world *w) { return w ? w->timeout_s : 300.0; }

void mgt_nccl_step(mgt_nccl_world *w, int r, int begin) {
    mgt__nccl_rank *me = &w->ranks[r];
    pthread_mutex_lock(&me->guard);
    me->in_step = begin != 0;
    me->warm_up = begin == 2;
    if (begin == 2)
        snprintf(me->doing, sizeof me->doing, "in the warm-up step");
    else if (begin) {
        me->step++;
        snprintf(me->doing, sizeof me->doing, "in step %ld", me->step);
    } else if (me->step == 0)
        snprintf(me->doing, sizeof me->doing, "done with the warm-up step");
    else
        snprintf(me->doing, sizeof me->doing, "done with step %ld", me->step);
    me->since = mgt__nccl_now();
    pthread_mutex_unlock(&me->guard);
}

void mgt_nccl_before_calls(mgt_nccl_world *w, int r, void (*finish_op)(void *ctx), void *ctx) {
    w->ranks[r].finish_op = finish_op;
    w->ranks[r].finish_ctx = ctx;
}

size_t mgt_nccl_memory(const mgt_nccl_world *w, int r) {
    size_t n;
    mgt__nccl_rank *me = &((mgt_nccl_world *)w)->ranks[r];
    pthread_mutex_lock(&me->guard);
    n = me->nccl_bytes;
    pthread_mutex_unlock(&me->guard);
    return n;
}

mgt_result mgt_nccl_fail(mgt_nccl_world *w, int r, mgt_result result, const char *reason, char *why, size_t cap) {
    return mgt__nccl_failure(w, r, result, why, cap, NULL, "%s", reason);
}

/* a non-blocking split (or its parent) until it is ready, within the deadline */
static mgt_result mgt__nccl_ready(mgt__nccl *c, ncclComm_t comm, const char *what) {
    return mgt__nccl_finish(c, comm, ncclInProgress, what);
}

mgt_result mgt_nccl_comm_create(mgt_nccl_world *w, int rank, void *compute_stream, const mgt_group *const *groups, int ngroups, mgt_comm **out) {
    mgt__nccl *c = (mgt__nccl *)calloc(1, sizeof *c);
    mgt__nccl_rank *me;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    int i, nseq = 1;
    *out = NULL;
    if (!c) return w->fail(MGT_ERROR_MEMORY, "out of memory");
    if (ngroups > MGT__NCCL_MAX_GROUPS || rank < 0 || rank >= w->world) {
        free(c);
        return mgt__nccl_report(w->fail, "NCCL communicator for rank %d of %d: %d kinds of groups, at most %d", rank, w->world, ngroups,
                                MGT__NCCL_MAX_GROUPS);
    }
    me = &w->ranks[rank];
    c->w = w;
    c->rank = rank;
    c->device = w->devices[rank];
    c->compute = (cudaStream_t)compute_stream;
    c->wcomm = w->comms[rank];
    c->comm.rank = rank;
    c->comm.world = w->world;
    c->comm.all_reduce = mgt__nccl_all_reduce;
    c->comm.reduce_scatter = mgt__nccl_reduce_scatter;
    c->comm.all_gather = mgt__nccl_all_gather;
    c->comm.broadcast = mgt__nccl_broadcast;
    c->comm.send = mgt__nccl_send;
    c->comm.sendrecv = mgt__nccl_sendrecv;
    c->comm.defer = mgt__nccl_defer;
    c->comm.sync = mgt__nccl_sync;
    c->comm.recv = mgt__nccl_recv;
    c->comm.barrier = mgt__nccl_barrier;
    c->comm.impl = c;
    *out = &c->comm; /* from here on mgt_nccl_comm_destroy frees what was made */
    c->sends = (long *)calloc((size_t)w->world, sizeof(long));
    c->recvs = (long *)calloc((size_t)w->world, sizeof(long));
    c->timed = (mgt__nccl_timed *)calloc(MGT__NCCL_TIMED, sizeof(mgt__nccl_timed));
    if (!c->sends || !c->recvs || !c->timed) return w->fail(MGT_ERROR_MEMORY, "out of memory");
    pthread_mutex_lock(&me->guard);
    me->comm = c;
    pthread_mutex_unlock(&me->guard);
    /* everything a call uses, made now: streams, events, the staging of host buffers */
    MGT__CUDA_TRY(c, "selecting the device", cudaSetDevice(c->device));
    {
        size_t total = 0;
        if (cudaMemGetInfo(&c->free_before, &total) != cudaSuccess) (void)cudaGetLastError();
    }
    MGT__CUDA_TRY(c, "making the communication stream", cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    MGT__CUDA_TRY(c, "making events", cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming));
    MGT__CUDA_TRY(c, "making events", cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming));
    MGT__CUDA_TRY(c, "making events", cudaEventCreateWithFlags(&c->end, cudaEventDisableTiming));
    for (i = 0; i < MGT__NCCL_DEFERRED; i++) MGT__CUDA_TRY(c, "making events", cudaEventCreateWithFlags(&c->deferred[i], cudaEventDisableTiming));
    for (i = 0; i < MGT__NCCL_TIMED; i++) {
        MGT__CUDA_TRY(c, "making timing events", cudaEventCreate(&c->timed[i].start));
        MGT__CUDA_TRY(c, "making timing events", cudaEventCreate(&c->timed[i].end));
    }
    c->stage_bytes = 4096 + 16 * (size_t)w->world; /* the runtime's host buffers: a scalar, or a double per rank */
    MGT__CUDA_TRY(c, "staging host buffers", cudaMalloc(&c->stage, c->stage_bytes));
    MGT__CUDA_TRY(c, "staging host buffers", cudaHostAlloc(&c->pinned, c->stage_bytes, cudaHostAllocDefault));
    c->seqs[0] = 0; /* the world communicator's */
    config.blocking = 0;
    for (i = 0; i < ngroups; i++) {
        const mgt_group *g = groups[i];
        mgt__nccl_group *gr = &c->groups[c->ngroups++];
        int member = g->ranks[g->index] == rank;
        ncclResult_t r;
        mgt_result res;
        gr->id = g->id;
        gr->size = g->size;
        gr->kind = i;
        if (g->size == 1) continue;
        if (g->size == w->world) {
            gr->comm = c->wcomm;
            gr->seq = &c->seqs[0];
            continue;
        }
        if (mgt__nccl_enter(c) != MGT_OK) return MGT_ERROR_COMM;
        r = ncclCommSplit(c->wcomm, member ? g->id : NCCL_SPLIT_NOCOLOR, g->index, &gr->comm, &config);
        if (gr->comm && (r == ncclSuccess || r == ncclInProgress)) me->split[me->nsplit++] = gr->comm; /* the world aborts it */
        mgt__nccl_leave(c);
        if (r != ncclSuccess && r != ncclInProgress)
            return mgt__nccl_report(w->fail, "NCCL split for group %d, rank %d (device %d): %s", g->id, rank, c->device, mgt__nccl_why(c->wcomm, r));
        res = mgt__nccl_ready(c, c->wcomm, "ncclCommSplit (the world communicator)");
        if (res == MGT_OK && gr->comm) res = mgt__nccl_ready(c, gr->comm, "ncclCommSplit");
        if (res != MGT_OK) return res;
        if (!member || !gr->comm) { c->ngroups--; continue; } /* NCCL gives no communicator to a rank outside */
        gr->seq = &c->seqs[nseq++];
    }
    mgt__nccl_doing(w, rank, "made its communicators");
    return MGT_OK;
}

mgt_result mgt_nccl_settle(mgt_comm *cm) {
    mgt__nccl *c = (mgt__nccl *)cm;
    int i;
    mgt__nccl_finish_op(c);
    if (mgt__nccl_world_aborted(c->w)) return mgt__nccl_echo(c->w, NULL, 0);
    MGT__CUDA_TRY(c, "marking the end of communication", cudaEventRecord(c->end, c->stream));
    if (mgt_nccl_wait(c->w, c->rank, c->end, "the work of its communication stream", NULL, 0) != MGT_OK) return MGT_ERROR_COMM;
    for (i = 0; i < c->ntimed; i++) { /* all done: the stream's end is after them */
        float ms = 0;
        if (cudaEventElapsedTime(&ms, c->timed[i].start, c->timed[i].end) == cudaSuccess) c->comm.stats.seconds[c->timed[i].coll] += ms / 1000.0;
        else (void)cudaGetLastError();
    }
    c->ntimed = 0;
    if (!c->measured) { /* NCCL allocates as it connects: measured once, after the warm-up */
        size_t now = 0, total = 0;
        mgt__nccl_rank *me = &c->w->ranks[c->rank];
        c->measured = 1;
        if (cudaMemGetInfo(&now, &total) == cudaSuccess && c->free_before > now + c->stage_bytes) {
            pthread_mutex_lock(&me->guard);
            me->nccl_bytes = c->free_before - now - c->stage_bytes;
            pthread_mutex_unlock(&me->guard);
        } else
            (void)cudaGetLastError();
    }
    {
        int gi;
        ncclResult_t e = mgt__nccl_async(c->w, c->rank, &gi); /* network and peer failures arrive asynchronously */
        if (e != ncclSuccess)
            return mgt__nccl_failure(c->w, c->rank, MGT_ERROR_COMM, NULL, 0, NULL, "NCCL reported an asynchronous error on group %d: %s (%s)",
                                     gi >= 0 ? c->groups[gi].id : -1, mgt__nccl_why(gi >= 0 ? c->groups[gi].comm : c->wcomm, e), ncclGetErrorString(e));
    }
    return MGT_OK;
}

/* a communicator ended: flushed (non-blocking: polled, within the deadline) then freed, or aborted */
static void mgt__nccl_close(ncclComm_t comm, double timeout_s) {
    double start = mgt__nccl_now();
    int spins = 0;
    ncclResult_t r = ncclCommFinalize(comm);
    if (r == ncclSuccess || r == ncclInProgress) { /* done when its state leaves ncclInProgress */
        r = ncclInProgress;
        while (ncclCommGetAsyncError(comm, &r) == ncclSuccess && r == ncclInProgress && mgt__nccl_now() - start <= timeout_s)
            mgt__nccl_pause(&spins);
    }
    if (r == ncclSuccess) ncclCommDestroy(comm);
    else ncclCommAbort(comm);
}

/* the stream's queued work finishes, or the deadline passes: destroying it then is allowed (CUDA
   completes the work), the memory it may use is then leaked rather than freed under it */
static int mgt__nccl_drain(mgt__nccl *c) {
    double start = mgt__nccl_now();
    int spins = 0;
    if (!c->stream || !c->end || cudaEventRecord(c->end, c->stream) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    for (;;) {
        cudaError_t q = cudaEventQuery(c->end);
        if (q == cudaSuccess) return 1;
        (void)cudaGetLastError();
        if (q != cudaErrorNotReady || mgt__nccl_now() - start > c->w->timeout_s) return 0;
        mgt__nccl_pause(&spins);
    }
}

void mgt_nccl_comm_destroy(mgt_comm *cm) {
    mgt__nccl *c = (mgt__nccl *)cm;
    mgt__nccl_rank *me;
    int i, drained;
    if (!c) return;
    me = &c->w->ranks[c->rank];
    cudaSetDevice(c->device);
    drained = mgt__nccl_drain(c);
    pthread_mutex_lock(&me->guard);
    if (!me->dead && !mgt__nccl_world_aborted(c->w)) { /* the world communicator belongs to the world */
        for (i = 0; i < me->nsplit; i++) mgt__nccl_close(me->split[i], c->w->timeout_s);
        me->nsplit = 0;
    }
    me->comm = NULL;
    pthread_mutex_unlock(&me->guard);
    for (i = 0; c->timed && i < MGT__NCCL_TIMED; i++) {
        if (c->timed[i].start) cudaEventDestroy(c->timed[i].start);
        if (c->timed[i].end) cudaEventDestroy(c->timed[i].end);
    }
    if (c->ready) cudaEventDestroy(c->ready);
    if (c->done) cudaEventDestroy(c->done);
    if (c->end) cudaEventDestroy(c->end);
    for (i = 0; i < MGT__NCCL_DEFERRED; i++)
        if (c->deferred[i]) cudaEventDestroy(c->deferred[i]);
    if (c->stream) cudaStreamDestroy(c->stream);
    if (drained) {
        if (c->stage) cudaFree(c->stage);
        if (c->pinned) cudaFreeHost(c->pinned);
    }
    free(c->timed);
    free(c->sends);
    free(c->recvs);
    free(c);
}

/* after an error on one rank: the others may wait for it inside NCCL. Every rank's communicators are
   aborted under that rank's guard, which its thread holds around each of its NCCL calls: none is
   freed while its thread is inside it, and the rank's thread checks `dead` before its next call */
void mgt_nccl_world_abort(mgt_nccl_world *w) {
    int i, j;
    pthread_mutex_lock(&w->mu);
    if (w->aborted) { pthread_mutex_unlock(&w->mu); return; }
    __atomic_store_n(&w->aborted, 1, __ATOMIC_RELEASE);
    for (i = 0; i < w->world; i++) {
        mgt__nccl_rank *o = &w->ranks[i];
        pthread_mutex_lock(&o->guard);
        if (!o->dead) {
            for (j = 0; j < o->nsplit; j++) ncclCommAbort(o->split[j]);
            o->nsplit = 0;
            if (w->comms[i]) ncclCommAbort(w->comms[i]);
            w->comms[i] = NULL;
            o->dead = 1;
        }
        pthread_mutex_unlock(&o->guard);
    }
    pthread_mutex_unlock(&w->mu);
}

void mgt_nccl_world_destroy(mgt_nccl_world *w) {
    int i;
    if (!w) return;
    for (i = 0; i < w->world; i++)
        if (w->comms[i]) mgt__nccl_close(w->comms[i], w->timeout_s);
    mgt__nccl_world_free(w);
}
