/* kernels/comm_nccl.c: the mgt_comm table over NCCL, for ranks that are threads of a process
   (one process, or each of several under mpirun), one GPU each; its world makes the watchdog every
   host wait of a rank goes through (kernels/watchdog.c) and plugs NCCL's part into it.

   A world is made once per process, from one thread: a unique id (made here, or by the process of
   rank 0 and carried by MPI) and ncclCommInitRankConfig for every rank of this process in one NCCL
   group, non-blocking (config blocking = 0, so no NCCL call ever blocks a host thread),
   each polled with ncclCommGetAsyncError until ready. Each rank thread then makes its mgt_comm,
   which splits the world communicator into one communicator per group the rank belongs to
   (ncclCommSplit, non-blocking too: colour = group id, key = the rank's index in the group, so
   NCCL's rank in the split equals mgt_group.index). ncclCommSplit is collective over the whole
   world: every rank splits its groups in the order of their kinds (mgt_group.kind: TP, DP, PP,
   embedding, world, KV), a rank outside a group of that kind (a middle pipeline stage and the
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

   The watchdog (kernels/watchdog.c): every host wait of a rank, its backend's included, has the
   world's deadline, [parallel] timeout_s. The world registers its part of a wait and of a failure as
   the watchdog's hooks: NCCL's asynchronous errors of the rank's communicators (polled while it
   waits), the call its stream is behind (its group and sequence number) and each rank's last call,
   for the one message; and the abort: every rank's communicators, each under that rank's guard, a
   mutex its thread holds around each of its NCCL calls, so no communicator is freed while another
   thread is inside it. Every other rank's next wait or call then returns that message.

   Statistics: calls and bytes when enqueued; seconds from a pair of timing events around each call
   on the communication stream (waiting for peers included, as on CPU), read at the end of a step
   (mgt_nccl_settle), once the stream is known to be done, so a step's calls cost no host waits. */
#define MGT_CATF /* mgt.h's mgt__catf, which this file shares */
#include "mgt.h" /* defines: mgt_comm, mgt_group, mgt_result, MGT_F32.., MGT_COLL_*, mgt__catf */

#include <cuda_runtime.h> /* defines: cudaStream_t, cudaEvent_t, cudaMemcpyAsync, cudaHostAlloc, cudaEventQuery */
#include <nccl.h>         /* defines: ncclComm_t, ncclCommInitRankConfig, ncclCommSplit, ncclAllReduce.. */
#include <pthread.h>      /* defines: pthread_mutex_t */
#include <stdarg.h>       /* defines: va_list */
#include <stdio.h>        /* defines: vsnprintf */
#include <stdlib.h>       /* defines: calloc, free, getenv, setenv */
#include <string.h>       /* defines: memset, memcpy, strncmp */

#include "comm_nccl.h" /* defines: mgt_nccl_world_create, mgt_nccl_comm_create.. */
#include "watchdog.h"  /* defines: mgt_watchdog_wait, mgt_watchdog_fail, mgt_watchdog_doing, mgt_watchdog_hooks.. */
#include "fake_note.h" /* defines: mgt_cuda_fake_note (the checking fakes' hook; null in the library) */

typedef char mgt__nccl_id_fits[sizeof(ncclUniqueId) == MGT_NCCL_ID_BYTES ? 1 : -1]; /* mgt.h carries the id as bytes */
#define MGT__NCCL_MAX_GROUPS 8 /* kinds of groups a rank belongs to (mgt.h has 7) */
#define MGT__NCCL_TIMED 2048   /* timed calls per step; more are counted, not timed */
#define MGT__NCCL_DEFERRED 16  /* events of deferred calls; a later one stands in for an overwritten one */

typedef struct mgt__nccl mgt__nccl;

/* what the world keeps of each rank (what it does is the watchdog's: kernels/watchdog.c) */
typedef struct mgt__nccl_rank {
    pthread_mutex_t guard; /* held by the rank's thread around each of its NCCL calls, by an abort around
                              aborting its communicators, and around the fields below */
    mgt__nccl *comm;       /* its communicator table, once made */
    ncclComm_t split[MGT__NCCL_MAX_GROUPS];
    int nsplit;
    int dead; /* its communicators were aborted */
    char last_call[200]; /* for a failing rank's message */
    double last_call_s;  /* when it was issued */
    long step_calls;     /* NCCL calls made inside steps, all steps together */
} mgt__nccl_rank;

struct mgt_nccl_world {
    int world;
    int *devices;
    ncclComm_t *comms; /* the world communicator of each rank (the rank's own once it runs) */
    mgt_nccl_fail_fn fail;
    mgt__nccl_rank *ranks;
    mgt_watchdog *wd; /* the deadline of every wait of its ranks, what each does, whether the world stopped */
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

/* ---- messages ---- */

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
    static const char *const names[MGT_GROUP_KINDS] = MGT_GROUP_KIND_NAMES;
    return kind >= 0 && kind < MGT_GROUP_KINDS ? names[kind] : "other";
}

/* a CUDA error under NCCL: a kernel of this rank may have faulted earlier */
static const char *mgt__nccl_cuda_hint(void) {
    return mgt_watchdog_sync_mode() ? NULL : ". A CUDA error under NCCL: an earlier kernel of this rank may have faulted; MGT_CUDA_SYNC=1 waits for every op and names it";
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

/* ---- the watchdog's hooks (kernels/watchdog.h): NCCL's part of a wait and of the one message ---- */

static int mgt__nccl_poll(void *ctx, int r, char *reason, size_t cap) {
    mgt_nccl_world *w = (mgt_nccl_world *)ctx;
    mgt__nccl *c = w->ranks[r].comm;
    int gi;
    ncclResult_t e = mgt__nccl_async(w, r, &gi);
    ncclComm_t comm;
    if (e == ncclSuccess) return 0;
    comm = gi >= 0 ? c->groups[gi].comm : w->comms[r];
    snprintf(reason, cap, "NCCL reported an asynchronous error on %s%d (%s): %s (%s)", gi >= 0 ? "group " : "the world communicator of rank ",
             gi >= 0 ? c->groups[gi].id : r, gi >= 0 ? mgt__nccl_kind(c->groups[gi].kind) : "world", mgt__nccl_why(comm, e), ncclGetErrorString(e));
    return e == ncclUnhandledCudaError ? 2 : 1; /* 2: NCCL saw this rank's device fault */
}
/* the oldest call of this rank that has not completed: what its stream is behind */
static void mgt__nccl_behind(void *ctx, int r, char *msg, size_t cap, double t) {
    mgt__nccl *c = ((mgt_nccl_world *)ctx)->ranks[r].comm;
    int i;
    for (i = 0; c && i < c->ntimed; i++) {
        cudaError_t q = cudaEventQuery(c->timed[i].end);
        (void)cudaGetLastError();
        if (q != cudaSuccess) {
            mgt__catf(msg, cap, ", behind NCCL %s, issued %.1f s before", c->timed[i].what, t - c->timed[i].issued_s);
            break;
        }
    }
}
/* a rank's last call, unless its state already names it (while issuing it) */
static void mgt__nccl_last_call(void *ctx, int r, char *state, size_t cap) {
    mgt__nccl_rank *o = &((mgt_nccl_world *)ctx)->ranks[r];
    pthread_mutex_lock(&o->guard);
    if (o->last_call[0] && strncmp(state, "issu", 4)) mgt__catf(state, cap, ", its last NCCL call %.190s", o->last_call);
    pthread_mutex_unlock(&o->guard);
}
/* after an error on one rank: the others may wait for it inside NCCL. Every rank's communicators are
   aborted under that rank's guard, which its thread holds around each of its NCCL calls: none is
   freed while its thread is inside it, and the rank's thread checks `dead` before its next call */
static void mgt__nccl_abort(void *ctx) {
    mgt_nccl_world *w = (mgt_nccl_world *)ctx;
    int i, j;
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
}

/* ---- NCCL calls: each under the rank's guard; a non-blocking communicator that answers
   ncclInProgress is polled until it has enqueued the call, within the deadline ---- */

/* enter: the guard is taken unless the world was aborted (then MGT_ERROR_COMM with the message) */
static mgt_result mgt__nccl_enter(mgt__nccl *c) {
    mgt__nccl_rank *me = &c->w->ranks[c->rank];
    pthread_mutex_lock(&me->guard);
    if (me->dead || mgt_watchdog_aborted(c->w->wd)) {
        pthread_mutex_unlock(&me->guard);
        return mgt_watchdog_stopped(c->w->wd, NULL, 0);
    }
    return MGT_OK;
}
static void mgt__nccl_leave(mgt__nccl *c) { pthread_mutex_unlock(&c->w->ranks[c->rank].guard); }

/* after a call on comm that answered r: done, or polled until comm leaves ncclInProgress */
static mgt_result mgt__nccl_finish(mgt__nccl *c, ncclComm_t comm, ncclResult_t r, const char *what) {
    mgt_watchdog *wd = c->w->wd;
    double start = mgt_watchdog_now();
    int spins = 0;
    if (r == ncclSuccess) return MGT_OK;
    while (r == ncclInProgress) {
        if (mgt_watchdog_aborted(wd)) return mgt_watchdog_stopped(wd, NULL, 0);
        if (mgt_watchdog_now() - start > mgt_watchdog_deadline(wd, c->rank))
            return mgt_watchdog_fail(wd, c->rank, MGT_ERROR_COMM, NULL, 0, NULL, "NCCL %s stayed in progress (ncclInProgress: not enqueued) for %.1f s (%s)", what,
                                     mgt_watchdog_now() - start, mgt_watchdog_deadline_name(wd, c->rank));
        mgt_watchdog_pause(&spins);
        if (mgt__nccl_enter(c) != MGT_OK) return MGT_ERROR_COMM;
        if (ncclCommGetAsyncError(comm, &r) != ncclSuccess) r = ncclInternalError;
        mgt__nccl_leave(c);
    }
    if (r == ncclSuccess) return MGT_OK;
    if (r == ncclUnhandledCudaError) { /* a kernel of this rank faulted (the device's sticky error): say which error, and how to find the op */
        cudaError_t ce = cudaStreamQuery(c->stream);
        (void)cudaGetLastError();
        if (ce != cudaSuccess && ce != cudaErrorNotReady)
            return mgt_watchdog_fail(wd, c->rank, MGT_ERROR_DEVICE, NULL, 0, mgt__nccl_cuda_hint(), "NCCL %s failed: %s (%s); the device failed (%s: %s)", what,
                                     mgt__nccl_why(comm, r), ncclGetErrorString(r), cudaGetErrorName(ce), cudaGetErrorString(ce));
    }
    return mgt_watchdog_fail(wd, c->rank, MGT_ERROR_COMM, NULL, 0, r == ncclUnhandledCudaError ? mgt__nccl_cuda_hint() : NULL, "NCCL %s failed: %s (%s)", what,
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

/* names the call (for the fakes, the rank's state and a later message), orders the communication
   stream after the compute and starts its timing; the guard is held from here to mgt__nccl_end */
static mgt_result mgt__nccl_begin(mgt__nccl *c, int coll, const char *what) {
    mgt__nccl_rank *me = &c->w->ranks[c->rank];
    mgt__nccl_timed *t = c->ntimed < MGT__NCCL_TIMED ? &c->timed[c->ntimed] : NULL;
    double now = mgt_watchdog_now();
    char doing[240];
    long step;
    int in_step;
    mgt_watchdog_finish_last_op(c->w->wd, c->rank); /* MGT_CUDA_SYNC=1: a fault in the backend's last op named first */
    if (mgt__nccl_enter(c) != MGT_OK) return MGT_ERROR_COMM;
    in_step = mgt_watchdog_in_step(c->w->wd, c->rank, &step);
    if (in_step) me->step_calls++; /* the warm-up step calls nothing: its communicator is quiet */
    snprintf(me->last_call, sizeof me->last_call, "%.159s", what);
    if (in_step) mgt__catf(me->last_call, sizeof me->last_call, " (call %ld in steps, step %ld)", me->step_calls, step);
    me->last_call_s = now;
    snprintf(doing, sizeof doing, "issuing %.200s", me->last_call);
    mgt_watchdog_doing(c->w->wd, c->rank, now, "%s", doing);
    if (mgt_cuda_fake_note) mgt_cuda_fake_note(c->device, MGT_NOTE_OP, doing);
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
            return mgt_watchdog_fail(c->w->wd, c->rank, MGT_ERROR_COMM, NULL, 0, r == ncclUnhandledCudaError ? mgt__nccl_cuda_hint() : NULL,
                                     "NCCL reported an asynchronous error (%s: %s), found issuing %s", ncclGetErrorString(async),
                                     mgt__nccl_why(comm, async), what);
        return mgt_watchdog_fail(c->w->wd, c->rank, MGT_ERROR_COMM, NULL, 0, r == ncclUnhandledCudaError ? mgt__nccl_cuda_hint() : NULL,
                                 "NCCL %s failed: %s (%s)", what, mgt__nccl_why(comm, r), ncclGetErrorString(r));
    }
    c->comm.stats.calls[coll]++;
    c->comm.stats.bytes[coll] += bytes;
    if (r == ncclInProgress) mgt_watchdog_doing(c->w->wd, c->rank, me->last_call_s, "issuing %.200s", me->last_call);
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
    mgt_watchdog_doing(c->w->wd, c->rank, me->last_call_s, "enqueueing after %.200s", what);
    mgt__nccl_leave(c);
    if (mgt_watchdog_sync_mode()) { /* MGT_CUDA_SYNC=1: the call is waited for, so a failure names it */
        char waited[200];
        snprintf(waited, sizeof waited, "NCCL %.160s to finish (MGT_CUDA_SYNC=1)", what);
        MGT__CUDA_TRY(c, "marking the end of a call", cudaEventRecord(c->end, c->stream));
        return mgt_watchdog_wait(c->w->wd, c->rank, c->end, waited, NULL, 0);
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
        if (mgt_watchdog_wait(c->w->wd, c->rank, c->end, what, NULL, 0) != MGT_OK) return MGT_ERROR_COMM;
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
    if (mgt_watchdog_finish_last_op(c->w->wd, c->rank)) return mgt_watchdog_stopped(c->w->wd, NULL, 0);
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
    mgt_watchdog_destroy(w->wd);
    if (w->ranks)
        for (i = 0; i < w->world; i++) pthread_mutex_destroy(&w->ranks[i].guard);
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
    mgt_watchdog_hooks hooks = {NULL, mgt__nccl_poll, mgt__nccl_behind, mgt__nccl_last_call, mgt__nccl_abort};
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
    w->world = world;
    w->fail = fail;
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
        pthread_mutex_init(&w->ranks[i].guard, NULL);
    }
    if (mgt_watchdog_create(world, w->devices, timeout_s, fail, &w->wd) != MGT_OK) {
        mgt__nccl_world_free(w);
        return MGT_ERROR_MEMORY;
    }
    hooks.ctx = w;
    mgt_watchdog_set_hooks(w->wd, &hooks);
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
    start = mgt_watchdog_now();
    for (i = first; i < end && r == ncclSuccess; i++) {
        ncclResult_t st = ncclInProgress;
        while (w->comms[i] && ncclCommGetAsyncError(w->comms[i], &st) == ncclSuccess && st == ncclInProgress) {
            if (mgt_watchdog_now() - start > mgt_watchdog_timeout(w->wd)) break;
            mgt_watchdog_pause(&spins);
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

mgt_watchdog *mgt_nccl_watchdog(mgt_nccl_world *w) { return w ? w->wd : NULL; }

/* a non-blocking split (or its parent) until it is ready, within the deadline */
static mgt_result mgt__nccl_ready(mgt__nccl *c, ncclComm_t comm, const char *what) {
    return mgt__nccl_finish(c, comm, ncclInProgress, what);
}

mgt_result mgt_nccl_comm_create(mgt_nccl_world *w, int rank, void *compute_stream, const mgt_group *const *groups, int ngroups, mgt_comm **out) {
    mgt__nccl *c = (mgt__nccl *)calloc(1, sizeof *c);
    mgt__nccl_rank *me;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    int i, kind, nseq = 1;
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
    for (i = 0; i < ngroups; i++) { /* at most one group of each kind: the splits below go by kind */
        int j, twice = 0;
        for (j = 0; j < i; j++) twice |= groups[j]->kind == groups[i]->kind;
        if (twice || groups[i]->kind < 0 || groups[i]->kind >= MGT_GROUP_KINDS)
            return mgt__nccl_report(w->fail, "NCCL communicator for rank %d: group %d is of kind %d, which %s", rank, groups[i]->id, groups[i]->kind,
                                    twice ? "another of its groups has" : "is not an MGT_GROUP_* kind");
    }
    for (kind = 0; kind < MGT_GROUP_KINDS; kind++) { /* in the order of kinds, the same on every rank whatever the order of `groups` */
        const mgt_group *g = NULL;
        mgt__nccl_group *gr;
        int member;
        ncclResult_t r;
        mgt_result res;
        for (i = 0; i < ngroups; i++)
            if (groups[i]->kind == kind) g = groups[i];
        if (!g) continue;
        gr = &c->groups[c->ngroups++];
        member = g->ranks[g->index] == rank;
        gr->id = g->id;
        gr->size = g->size;
        gr->kind = kind;
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
    mgt_watchdog_doing(w->wd, rank, mgt_watchdog_now(), "made its communicators");
    return MGT_OK;
}

mgt_result mgt_nccl_settle(mgt_comm *cm) {
    mgt__nccl *c = (mgt__nccl *)cm;
    int i;
    mgt_watchdog_finish_last_op(c->w->wd, c->rank);
    if (mgt_watchdog_aborted(c->w->wd)) return mgt_watchdog_stopped(c->w->wd, NULL, 0);
    MGT__CUDA_TRY(c, "marking the end of communication", cudaEventRecord(c->end, c->stream));
    if (mgt_watchdog_wait(c->w->wd, c->rank, c->end, "the work of its communication stream", NULL, 0) != MGT_OK) return MGT_ERROR_COMM;
    for (i = 0; i < c->ntimed; i++) { /* all done: the stream's end is after them */
        float ms = 0;
        if (cudaEventElapsedTime(&ms, c->timed[i].start, c->timed[i].end) == cudaSuccess) c->comm.stats.seconds[c->timed[i].coll] += ms / 1000.0;
        else (void)cudaGetLastError();
    }
    c->ntimed = 0;
    if (!c->measured) { /* NCCL allocates as it connects: measured once, after the warm-up */
        size_t now = 0, total = 0;
        c->measured = 1;
        if (cudaMemGetInfo(&now, &total) == cudaSuccess && c->free_before > now + c->stage_bytes)
            mgt_watchdog_set_comm_memory(c->w->wd, c->rank, c->free_before - now - c->stage_bytes); /* the backend counts it */
        else
            (void)cudaGetLastError();
    }
    {
        int gi;
        ncclResult_t e = mgt__nccl_async(c->w, c->rank, &gi); /* network and peer failures arrive asynchronously */
        if (e != ncclSuccess)
            return mgt_watchdog_fail(c->w->wd, c->rank, MGT_ERROR_COMM, NULL, 0, NULL, "NCCL reported an asynchronous error on group %d: %s (%s)",
                                     gi >= 0 ? c->groups[gi].id : -1, mgt__nccl_why(gi >= 0 ? c->groups[gi].comm : c->wcomm, e), ncclGetErrorString(e));
    }
    return MGT_OK;
}

/* a communicator ended: flushed (non-blocking: polled, within the deadline) then freed, or aborted */
static void mgt__nccl_close(ncclComm_t comm, double timeout_s) {
    double start = mgt_watchdog_now();
    int spins = 0;
    ncclResult_t r = ncclCommFinalize(comm);
    if (r == ncclSuccess || r == ncclInProgress) { /* done when its state leaves ncclInProgress */
        r = ncclInProgress;
        while (ncclCommGetAsyncError(comm, &r) == ncclSuccess && r == ncclInProgress && mgt_watchdog_now() - start <= timeout_s)
            mgt_watchdog_pause(&spins);
    }
    if (r == ncclSuccess) ncclCommDestroy(comm);
    else ncclCommAbort(comm);
}

/* the stream's queued work finishes, or the deadline passes: destroying it then is allowed (CUDA
   completes the work), the memory it may use is then leaked rather than freed under it */
static int mgt__nccl_drain(mgt__nccl *c) {
    double start = mgt_watchdog_now();
    int spins = 0;
    if (!c->stream || !c->end || cudaEventRecord(c->end, c->stream) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    for (;;) {
        cudaError_t q = cudaEventQuery(c->end);
        if (q == cudaSuccess) return 1;
        (void)cudaGetLastError();
        if (q != cudaErrorNotReady || mgt_watchdog_now() - start > mgt_watchdog_timeout(c->w->wd)) return 0;
        mgt_watchdog_pause(&spins);
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
    if (!me->dead && !mgt_watchdog_aborted(c->w->wd)) { /* the world communicator belongs to the world */
        for (i = 0; i < me->nsplit; i++) mgt__nccl_close(me->split[i], mgt_watchdog_timeout(c->w->wd));
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

void mgt_nccl_world_abort(mgt_nccl_world *w) { mgt_watchdog_abort(w->wd); } /* through the watchdog: its flag, then mgt__nccl_abort */

void mgt_nccl_world_destroy(mgt_nccl_world *w) {
    int i;
    if (!w) return;
    for (i = 0; i < w->world; i++)
        if (w->comms[i]) mgt__nccl_close(w->comms[i], mgt_watchdog_timeout(w->wd));
    mgt__nccl_world_free(w);
}
