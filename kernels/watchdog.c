/* kernels/watchdog.c: no host wait of a GPU rank is unbounded (kernels/watchdog.h).

   Each wait (an event of the rank's own streams: the end of a step, a staged call, an NCCL call
   still being enqueued) has the world's deadline, [parallel] timeout_s: a few queries of the event,
   then the rank's waiter thread blocks in cudaEventSynchronize and wakes the rank when it completes,
   while the rank checks its deadline, the world's abort flag and the hooks' poll (NCCL's asynchronous
   errors of its communicators) every millisecond. The rank that sees a deadline pass, an asynchronous
   error or a device fault writes one message (the rank, its GPU, what it waited for, what its stream
   is behind, what every other rank was last doing) and stops the world through the abort hook. Every
   other rank's next wait or call then returns that message. */
#define MGT_CATF /* mgt.h's mgt__catf, which this file shares */
#include "mgt.h" /* defines: mgt_result, mgt_fail_fn, MGT_ERROR_COMM, MGT_ERROR_DEVICE, mgt__catf */

#include <cuda_runtime.h> /* defines: cudaEvent_t, cudaEventQuery, cudaEventSynchronize, cudaSetDevice */
#include <pthread.h>      /* defines: pthread_mutex_t, pthread_cond_t, pthread_create */
#include <sched.h>        /* defines: sched_yield */
#include <stdarg.h>       /* defines: va_list */
#include <stdio.h>        /* defines: snprintf, vsnprintf */
#include <stdlib.h>       /* defines: calloc, free, getenv */
#include <string.h>       /* defines: memcpy, strcmp */
#include <time.h>         /* defines: clock_gettime, nanosleep */

#include "watchdog.h"  /* defines: mgt_watchdog_create, mgt_watchdog_wait, mgt_watchdog_fail.. */
#include "fake_note.h" /* defines: mgt_cuda_fake_note (the checking fakes' hook; null in the library) */

/* A rank's waits wake when their event completes: after a short spin of queries the event goes to
   this thread, which blocks in cudaEventSynchronize (woken by the driver) and signals; the rank's
   thread meanwhile sleeps on the condition in 1 ms slices to check its deadline, the world's abort
   and NCCL's asynchronous errors. Polling alone, with a growing sleep between queries so as not to
   burn a core, woke up to 1 ms late, three times a step. */
typedef struct mgt__waiter {
    pthread_t thread;
    int started, quit, device;
    pthread_mutex_t mu;
    pthread_cond_t cv;    /* a new request (to the thread), an answer (to the rank) */
    cudaEvent_t event;    /* the request */
    long asked, answered; /* requests so far, answered so far */
    cudaError_t result;   /* the last answer's */
} mgt__waiter;

/* what the world keeps of each rank */
typedef struct mgt__watched {
    pthread_mutex_t mu; /* around the fields below */
    /* what it was last doing, for a failing rank's message */
    char doing[240];
    double since;
    int in_step, warm_up; /* warm_up: the untimed warm-up step (its waits get a longer deadline) */
    long step;            /* steps begun */
    size_t comm_bytes;    /* the communicator's device memory, measured after the warm-up */
    mgt__waiter waiter;
    void (*finish_op)(void *ctx); /* MGT_CUDA_SYNC=1: the backend's last op waited for before a call */
    void *finish_ctx;
} mgt__watched;

struct mgt_watchdog {
    int world;
    int *devices;
    double timeout_s;
    mgt_fail_fn fail;
    mgt_watchdog_hooks hooks;
    mgt__watched *ranks;
    pthread_mutex_t mu; /* guards stopping and why */
    int aborted;        /* the world is stopped (atomic) */
    char why[4096];     /* the failure that stopped it */
};

/* ---- clocks, modes ---- */

double mgt_watchdog_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int mgt_watchdog_sync_mode(void) {
    static int mode = -1;
    if (__atomic_load_n(&mode, __ATOMIC_RELAXED) < 0) {
        const char *e = getenv("MGT_CUDA_SYNC");
        __atomic_store_n(&mode, e && *e && strcmp(e, "0") != 0, __ATOMIC_RELAXED);
    }
    return __atomic_load_n(&mode, __ATOMIC_RELAXED);
}

void mgt_watchdog_pause(int *spins) {
    if (++*spins < 64) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, *spins < 1000 ? 20000L : 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- the world's state: stopped, and what each rank does ---- */

int mgt_watchdog_aborted(const mgt_watchdog *wd) { return __atomic_load_n(&wd->aborted, __ATOMIC_ACQUIRE); }

void mgt_watchdog_doing(mgt_watchdog *wd, int r, double since, const char *fmt, ...) {
    mgt__watched *me = &wd->ranks[r];
    va_list ap;
    pthread_mutex_lock(&me->mu);
    va_start(ap, fmt);
    vsnprintf(me->doing, sizeof me->doing, fmt, ap);
    va_end(ap);
    me->since = since;
    pthread_mutex_unlock(&me->mu);
}

/* what every rank was last doing, ranks in the same state together (mgt.h and the CLI keep about
   1000 characters of a message: 8 ranks must fit) */
static void mgt__watchdog_ranks_state(mgt_watchdog *wd, char *msg, size_t cap, double t) {
    int n = wd->world, i, j;
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
        mgt__watched *o = &wd->ranks[i];
        pthread_mutex_lock(&o->mu);
        snprintf(key[i], 420, "%.200s", o->doing[0] ? o->doing : "had not started");
        age[i] = o->since > 0 && t > o->since ? t - o->since : 0.0;
        pthread_mutex_unlock(&o->mu);
        if (wd->hooks.last_call) wd->hooks.last_call(wd->hooks.ctx, i, key[i], 420); /* outside the rank's lock: the hook takes its own */
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

mgt_result mgt_watchdog_fail(mgt_watchdog *wd, int r, mgt_result result, char *why, size_t cap, const char *tail, const char *fmt, ...) {
    char msg[4096] = "", reason[1024];
    double t = mgt_watchdog_now();
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    if (mgt_watchdog_aborted(wd)) { /* another rank was first: its message stands */
        pthread_mutex_lock(&wd->mu);
        snprintf(msg, sizeof msg, "stopped with the world: %.4000s", wd->why[0] ? wd->why : "another rank failed");
        pthread_mutex_unlock(&wd->mu);
        if (why) snprintf(why, cap, "%s", msg);
        return wd->fail(MGT_ERROR_COMM, msg);
    }
    mgt__catf(msg, sizeof msg, "rank %d (GPU %d): %s", r, wd->devices[r], reason);
    if (wd->hooks.behind) wd->hooks.behind(wd->hooks.ctx, r, msg, sizeof msg, t);
    mgt__watchdog_ranks_state(wd, msg, sizeof msg, t);
    mgt__catf(msg, sizeof msg, " every rank is stopped (the communicators aborted); nothing after the last checkpoint is saved%s", tail ? tail : "");
    pthread_mutex_lock(&wd->mu);
    if (!wd->why[0]) snprintf(wd->why, sizeof wd->why, "%.4095s", msg);
    else { /* another rank failed at the same moment and was first: its message stands */
        char first[4096];
        snprintf(first, sizeof first, "%.4095s", wd->why);
        snprintf(msg, sizeof msg, "stopped with the world: %.4000s", first);
        result = MGT_ERROR_COMM;
    }
    pthread_mutex_unlock(&wd->mu);
    mgt_watchdog_abort(wd);
    if (why) snprintf(why, cap, "%.4095s", msg);
    return wd->fail(result, msg);
}

mgt_result mgt_watchdog_stopped(mgt_watchdog *wd, char *why, size_t cap) {
    char msg[4200];
    pthread_mutex_lock(&wd->mu);
    snprintf(msg, sizeof msg, "stopped with the world: %.4096s", wd->why[0] ? wd->why : "another rank failed and aborted every communicator");
    pthread_mutex_unlock(&wd->mu);
    if (why) snprintf(why, cap, "%s", msg);
    return wd->fail(MGT_ERROR_COMM, msg);
}

/* under the world's lock, so a second abort returns only once the first has aborted everything */
void mgt_watchdog_abort(mgt_watchdog *wd) {
    pthread_mutex_lock(&wd->mu);
    if (!wd->aborted) {
        __atomic_store_n(&wd->aborted, 1, __ATOMIC_RELEASE);
        if (wd->hooks.abort) wd->hooks.abort(wd->hooks.ctx);
    }
    pthread_mutex_unlock(&wd->mu);
}

/* a wait's deadline on rank r's thread: [parallel] timeout_s; in the warm-up step ten times that and
   at least 2 minutes, as loading a library's kernels (and cuDNN's runtime compilation of an engine)
   takes seconds each */
double mgt_watchdog_deadline(const mgt_watchdog *wd, int r) {
    return !wd->ranks[r].warm_up ? wd->timeout_s : 10 * wd->timeout_s > 120.0 ? 10 * wd->timeout_s : 120.0;
}
const char *mgt_watchdog_deadline_name(const mgt_watchdog *wd, int r) {
    return wd->ranks[r].warm_up ? "the warm-up step's deadline: 10 x [parallel] timeout_s, at least 120 s" : "[parallel] timeout_s";
}

/* ---- the waiter ---- */

static void *mgt__waiter_main(void *arg) {
    mgt__waiter *wt = (mgt__waiter *)arg;
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
static long mgt__waiter_ask(mgt_watchdog *wd, int r, cudaEvent_t event) {
    mgt__waiter *wt = &wd->ranks[r].waiter;
    long ticket = 0;
    pthread_mutex_lock(&wt->mu);
    if (!wt->started && !wt->quit) wt->started = pthread_create(&wt->thread, NULL, mgt__waiter_main, wt) == 0;
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
static int mgt__waiter_answer(mgt_watchdog *wd, int r, long ticket, const struct timespec *until, cudaError_t *result) {
    mgt__waiter *wt = &wd->ranks[r].waiter;
    int done;
    pthread_mutex_lock(&wt->mu);
    if (wt->answered < ticket) pthread_cond_timedwait(&wt->cv, &wt->mu, until);
    done = wt->answered >= ticket;
    if (done) *result = wt->result;
    pthread_mutex_unlock(&wt->mu);
    return done;
}
/* the waiter ends (the watchdog's destroy): joined once its last request is answered, within
   timeout_s; a waiter still inside cudaEventSynchronize then (a device that never completes) is left
   to the process's end */
static void mgt__waiter_end(mgt__waiter *wt, double timeout_s) {
    double start = mgt_watchdog_now();
    int idle;
    pthread_mutex_lock(&wt->mu);
    wt->quit = 1;
    pthread_cond_broadcast(&wt->cv);
    while (wt->started && wt->answered != wt->asked && mgt_watchdog_now() - start <= timeout_s) {
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

/* ---- waits ---- */

/* the device of rank r failed (a kernel faulted: the sticky error q) while it waited for `what` */
static mgt_result mgt__watchdog_device_failed(mgt_watchdog *wd, int r, cudaError_t q, const char *what, char *why, size_t cap) {
    return mgt_watchdog_fail(wd, r, MGT_ERROR_DEVICE, why, cap,
                             mgt_watchdog_sync_mode() ? NULL : ". The failing op is not known: MGT_CUDA_SYNC=1 waits for every op and names it",
                             "the device failed (%s: %s)%s while waiting for %s", cudaGetErrorName(q), cudaGetErrorString(q),
                             wd->ranks[r].warm_up ? " in the warm-up step" : "", what);
}

mgt_result mgt_watchdog_wait(mgt_watchdog *wd, int r, void *event, const char *what, char *why, size_t cap) {
    double start = mgt_watchdog_now(), next_check = start;
    int spins = 0;
    long ticket = 0;
    mgt_watchdog_doing(wd, r, start, "waiting for %s", what);
    for (;;) {
        cudaError_t q = cudaErrorNotReady;
        double t;
        if (mgt_watchdog_aborted(wd)) return mgt_watchdog_stopped(wd, why, cap);
        if (ticket) { /* the waiter has it: sleep until it answers, 1 ms at most between checks */
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += 1000000L;
            if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
            if (!mgt__waiter_answer(wd, r, ticket, &until, &q)) q = cudaErrorNotReady;
        } else {
            q = cudaEventQuery((cudaEvent_t)event);
            (void)cudaGetLastError(); /* not ready is no error, but may stay as the last error and fail the next launch check */
        }
        if (q == cudaSuccess) {
            mgt_watchdog_doing(wd, r, mgt_watchdog_now(), "running, after %s", what);
            return MGT_OK;
        }
        if (q != cudaErrorNotReady) return mgt__watchdog_device_failed(wd, r, q, what, why, cap);
        t = mgt_watchdog_now();
        if (t >= next_check && wd->hooks.poll) {
            char reason[1024];
            int found = wd->hooks.poll(wd->hooks.ctx, r, reason, sizeof reason);
            next_check = t + 0.001;
            if (found == 2) { /* NCCL saw this rank's device fault first: the device's own error says it */
                cudaError_t ce = cudaEventQuery((cudaEvent_t)event);
                (void)cudaGetLastError();
                if (ce != cudaSuccess && ce != cudaErrorNotReady) return mgt__watchdog_device_failed(wd, r, ce, what, why, cap);
            }
            if (found) return mgt_watchdog_fail(wd, r, MGT_ERROR_COMM, why, cap, NULL, "%s, while waiting for %s", reason, what);
        }
        if (t - start > mgt_watchdog_deadline(wd, r))
            return mgt_watchdog_fail(wd, r, MGT_ERROR_COMM, why, cap, NULL, "waited %.1f s (%s) for %s", t - start, mgt_watchdog_deadline_name(wd, r), what);
        if (!ticket && ++spins >= 64) ticket = mgt__waiter_ask(wd, r, (cudaEvent_t)event); /* after ~64 yields: a short wait costs no handover */
        if (!ticket) mgt_watchdog_pause(&spins);
    }
}

/* ---- steps ---- */

void mgt_watchdog_step(mgt_watchdog *wd, int r, int begin) {
    mgt__watched *me = &wd->ranks[r];
    pthread_mutex_lock(&me->mu);
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
    me->since = mgt_watchdog_now();
    pthread_mutex_unlock(&me->mu);
}

int mgt_watchdog_in_step(mgt_watchdog *wd, int r, long *step) {
    mgt__watched *me = &wd->ranks[r];
    int in;
    pthread_mutex_lock(&me->mu);
    in = me->in_step;
    *step = me->step;
    pthread_mutex_unlock(&me->mu);
    return in;
}

/* ---- between a rank's backend and its communicator ---- */

void mgt_watchdog_set_last_op(mgt_watchdog *wd, int r, void (*finish_op)(void *ctx), void *ctx) {
    wd->ranks[r].finish_op = finish_op;
    wd->ranks[r].finish_ctx = ctx;
}

int mgt_watchdog_finish_last_op(mgt_watchdog *wd, int r) {
    mgt__watched *me = &wd->ranks[r];
    if (!me->finish_op || !mgt_watchdog_sync_mode()) return 0;
    me->finish_op(me->finish_ctx);
    return mgt_watchdog_aborted(wd);
}

void mgt_watchdog_set_comm_memory(mgt_watchdog *wd, int r, size_t bytes) {
    mgt__watched *me = &wd->ranks[r];
    pthread_mutex_lock(&me->mu);
    me->comm_bytes = bytes;
    pthread_mutex_unlock(&me->mu);
}

size_t mgt_watchdog_comm_memory(mgt_watchdog *wd, int r) {
    mgt__watched *me = &wd->ranks[r];
    size_t n;
    pthread_mutex_lock(&me->mu);
    n = me->comm_bytes;
    pthread_mutex_unlock(&me->mu);
    return n;
}

/* ---- the world ---- */

int mgt_watchdog_rank(const mgt_watchdog *wd, int device) {
    int i;
    for (i = 0; wd && device >= 0 && i < wd->world; i++)
        if (wd->devices[i] == device) return i;
    return -1;
}
double mgt_watchdog_timeout(const mgt_watchdog *wd) { return wd ? wd->timeout_s : 300.0; }

void mgt_watchdog_set_hooks(mgt_watchdog *wd, const mgt_watchdog_hooks *hooks) { wd->hooks = *hooks; }

mgt_result mgt_watchdog_create(int world, const int *devices, double timeout_s, mgt_fail_fn fail, mgt_watchdog **out) {
    mgt_watchdog *wd = (mgt_watchdog *)calloc(1, sizeof *wd);
    int i;
    *out = NULL;
    if (!wd) return fail(MGT_ERROR_MEMORY, "out of memory");
    wd->devices = (int *)calloc((size_t)world, sizeof(int));
    wd->ranks = (mgt__watched *)calloc((size_t)world, sizeof(mgt__watched));
    if (!wd->devices || !wd->ranks) {
        free(wd->devices);
        free(wd->ranks);
        free(wd);
        return fail(MGT_ERROR_MEMORY, "out of memory");
    }
    pthread_mutex_init(&wd->mu, NULL);
    wd->world = world;
    wd->fail = fail;
    wd->timeout_s = timeout_s > 0 ? timeout_s : 300.0;
    memcpy(wd->devices, devices, sizeof(int) * (size_t)world);
    for (i = 0; i < world; i++) {
        if (devices[i] < 0) snprintf(wd->ranks[i].doing, sizeof wd->ranks[i].doing, "in another process");
        pthread_mutex_init(&wd->ranks[i].mu, NULL);
        pthread_mutex_init(&wd->ranks[i].waiter.mu, NULL);
        pthread_cond_init(&wd->ranks[i].waiter.cv, NULL);
        wd->ranks[i].waiter.device = devices[i];
    }
    *out = wd;
    return MGT_OK;
}

void mgt_watchdog_destroy(mgt_watchdog *wd) {
    int i;
    if (!wd) return;
    for (i = 0; i < wd->world; i++) {
        mgt__waiter_end(&wd->ranks[i].waiter, wd->timeout_s);
        pthread_mutex_destroy(&wd->ranks[i].mu);
        pthread_mutex_destroy(&wd->ranks[i].waiter.mu);
        pthread_cond_destroy(&wd->ranks[i].waiter.cv);
    }
    pthread_mutex_destroy(&wd->mu);
    free(wd->ranks);
    free(wd->devices);
    free(wd);
}
