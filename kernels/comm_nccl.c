/* kernels/comm_nccl.c: the mgt_comm table over NCCL, for ranks that are threads of one process,
   one GPU each.

   A world is made once, from one thread, with ncclCommInitAll (one communicator per GPU, rank i on
   devices[i]). Each rank thread then makes its mgt_comm, which splits the world communicator into
   one communicator per group the rank belongs to (ncclCommSplit: colour = group id, key = the
   rank's index in the group, so NCCL's rank in the split equals mgt_group.index). ncclCommSplit is
   collective over the whole world: every rank passes its groups in the same order of kinds (TP,
   DP, PP, embedding, world, as mgt.h makes them), a rank outside a group of that kind (a middle
   pipeline stage and the embedding pair) passes NCCL_SPLIT_NOCOLOR, and kinds whose groups have
   one member, or the whole world, need no split on any rank, so the sequence of calls is the same
   everywhere.

   Ordering: the runtime calls the table from the rank's thread as if each call completed before
   it returned (the contract of mgt.h's local communicator). Here a call is enqueued on the rank's
   communication stream after an event recorded on the compute stream, and the compute stream
   waits on an event recorded after it: whatever the compute stream does next sees the result, and
   the host thread does not wait, so communication overlaps whatever the host enqueues on other
   streams meanwhile. Buffers in host memory (the runtime's few scalars) are staged through device
   memory and the call then waits, because the host reads them at once.

   Statistics: calls and bytes when enqueued; seconds from a pair of timing events around each call
   on the communication stream (waiting for peers included, as on CPU), accumulated when the call
   has completed: mgt_nccl_settle() waits for all of them (the end of a step).

   Errors are reported through the fail callback given to mgt_nccl_world_create (mgt.h passes the
   function that sets the calling thread's mgt_last_error()), naming the call, the group, the rank
   and NCCL's own last error; after an error mgt_nccl_world_abort() unblocks the other ranks. */
#include "mgt.h" /* defines: mgt_comm, mgt_group, mgt_result, MGT_F32.., MGT_COLL_* */

#include <cuda_runtime.h> /* defines: cudaStream_t, cudaEvent_t, cudaMemcpyAsync, cudaPointerGetAttributes */
#include <nccl.h>         /* defines: ncclComm_t, ncclCommInitAll, ncclCommSplit, ncclAllReduce.. */
#include <pthread.h>      /* defines: pthread_mutex_t */
#include <stdarg.h>       /* defines: va_list */
#include <stdio.h>        /* defines: vsnprintf */
#include <stdlib.h>       /* defines: calloc, free */
#include <string.h>       /* defines: memset */

#include "comm_nccl.h" /* defines: mgt_nccl_world_create, mgt_nccl_comm_create.. */

#define MGT__NCCL_MAX_GROUPS 8 /* kinds of groups a rank belongs to (mgt.h has 5) */
#define MGT__NCCL_PENDING 64   /* timed calls in flight per rank before the oldest is waited for */
#define MGT__NCCL_DEFERRED 16  /* events of deferred calls; a later one stands in for an overwritten one */

struct mgt_nccl_world {
    int world;
    int *devices;
    ncclComm_t *comms; /* the world communicator of each rank */
    mgt_nccl_fail_fn fail;
    pthread_mutex_t mu; /* guards splits: every communicator made, for abort */
    ncclComm_t *all;
    int nall, capall;
    int aborted; /* the communicators are gone: calls and destroy must not touch them (atomic) */
};

typedef struct mgt__nccl_group {
    int id, size;
    ncclComm_t comm; /* NULL for a group of one, the world communicator for the world */
} mgt__nccl_group;

typedef struct mgt__nccl_timed {
    int coll;
    cudaEvent_t start, end;
} mgt__nccl_timed;

typedef struct mgt__nccl {
    mgt_comm comm; /* first member: the runtime holds a mgt_comm * */
    mgt_nccl_world *w;
    int device;
    mgt__nccl_group groups[MGT__NCCL_MAX_GROUPS];
    int ngroups;
    ncclComm_t wcomm; /* the world communicator (send and recv), the world's to destroy */
    cudaStream_t compute, stream;
    cudaEvent_t ready, done; /* compute -> communication, communication -> compute */
    int defer_next;          /* the next call does not order the compute after it (mgt_comm.defer) */
    long tickets;            /* deferred calls so far; call t completes at deferred[t % MGT__NCCL_DEFERRED] */
    cudaEvent_t deferred[MGT__NCCL_DEFERRED];
    mgt__nccl_timed timed[MGT__NCCL_PENDING];
    int timed_head, timed_count;
    void *stage; /* device copy of host buffers */
    size_t stage_bytes;
} mgt__nccl;

/* ---- errors */

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

#define MGT__CUDA_TRY(c, what, call)                                                                              \
    do {                                                                                                           \
        cudaError_t mgt__e = (call);                                                                               \
        if (mgt__e != cudaSuccess)                                                                                 \
            return mgt__nccl_report((c)->w->fail, "%s on rank %d (device %d): %s (%s)", what, (c)->comm.rank,     \
                                    (c)->device, cudaGetErrorString(mgt__e), #call);                               \
    } while (0)
#define MGT__NCCL_TRY(c, what, group, comm_, call)                                                                \
    do {                                                                                                           \
        ncclResult_t mgt__r = (call);                                                                              \
        if (mgt__r != ncclSuccess)                                                                                 \
            return mgt__nccl_report((c)->w->fail, "NCCL %s on group %d, rank %d (device %d): %s", what, group,    \
                                    (c)->comm.rank, (c)->device, mgt__nccl_why(comm_, mgt__r));                    \
    } while (0)

/* ---- element types and sizes */

static ncclDataType_t mgt__nccl_type(int dtype) {
    return dtype == MGT_F64 ? ncclFloat64 : dtype == MGT_BF16 ? ncclBfloat16 : dtype == MGT_F16 ? ncclFloat16 : ncclFloat32;
}
static size_t mgt__nccl_elt(int dtype) { return dtype == MGT_F64 ? 8 : dtype == MGT_F32 ? 4 : 2; }

/* ---- timing */

static void mgt__nccl_account(mgt__nccl *c, const mgt__nccl_timed *t) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, t->start, t->end) == cudaSuccess) c->comm.stats.seconds[t->coll] += ms / 1000.0;
}
/* adds the time of completed calls; `wait`: waits for all of them */
static mgt_result mgt__nccl_collect(mgt__nccl *c, int wait) {
    while (c->timed_count > 0) {
        mgt__nccl_timed *t = &c->timed[c->timed_head];
        if (wait) MGT__CUDA_TRY(c, "waiting for communication", cudaEventSynchronize(t->end));
        else if (cudaEventQuery(t->end) != cudaSuccess) {
            (void)cudaGetLastError(); /* not ready is no error, but may stay as the last error and fail the next launch check */
            break;
        }
        mgt__nccl_account(c, t);
        c->timed_head = (c->timed_head + 1) % MGT__NCCL_PENDING;
        c->timed_count--;
    }
    return MGT_OK;
}

/* ---- a call: after the compute stream's work, before its next work */

/* after mgt_nccl_world_abort the communicators are freed: a rank that reaches its next call fails
   it instead (one caught inside a call when the abort came is what ncclCommAbort unblocks) */
static int mgt__nccl_aborted(const mgt__nccl *c) { return __atomic_load_n(&c->w->aborted, __ATOMIC_ACQUIRE); }
static mgt_result mgt__nccl_gone(mgt__nccl *c) {
    return mgt__nccl_report(c->w->fail, "NCCL on rank %d (device %d): the world was aborted after another rank's error", c->comm.rank, c->device);
}

/* a call with nothing to move: done, and a defer before it applies to none (the next call must
   not inherit it, or the compute would read that call's result too early) */
static mgt_result mgt__nccl_nothing(mgt__nccl *c) {
    c->defer_next = 0;
    return MGT_OK;
}

static mgt_result mgt__nccl_begin(mgt__nccl *c, int coll, mgt__nccl_timed **t) {
    if (mgt__nccl_aborted(c)) return mgt__nccl_gone(c);
    if (c->timed_count == MGT__NCCL_PENDING) { /* the oldest must be done to reuse its events */
        mgt__nccl_timed *old = &c->timed[c->timed_head];
        MGT__CUDA_TRY(c, "waiting for communication", cudaEventSynchronize(old->end));
        mgt__nccl_account(c, old);
        c->timed_head = (c->timed_head + 1) % MGT__NCCL_PENDING;
        c->timed_count--;
    }
    *t = &c->timed[(c->timed_head + c->timed_count) % MGT__NCCL_PENDING];
    (*t)->coll = coll;
    MGT__CUDA_TRY(c, "ordering communication after compute", cudaEventRecord(c->ready, c->compute));
    MGT__CUDA_TRY(c, "ordering communication after compute", cudaStreamWaitEvent(c->stream, c->ready, 0));
    MGT__CUDA_TRY(c, "timing communication", cudaEventRecord((*t)->start, c->stream));
    return MGT_OK;
}
static mgt_result mgt__nccl_end(mgt__nccl *c, mgt__nccl_timed *t, double bytes) {
    MGT__CUDA_TRY(c, "timing communication", cudaEventRecord(t->end, c->stream));
    c->timed_count++;
    if (c->defer_next) { /* the compute goes on; mgt__nccl_sync orders it later */
        c->defer_next = 0;
        MGT__CUDA_TRY(c, "marking deferred communication", cudaEventRecord(c->deferred[(c->tickets - 1) % MGT__NCCL_DEFERRED], c->stream));
    } else {
        MGT__CUDA_TRY(c, "ordering compute after communication", cudaEventRecord(c->done, c->stream));
        MGT__CUDA_TRY(c, "ordering compute after communication", cudaStreamWaitEvent(c->compute, c->done, 0));
    }
    c->comm.stats.calls[t->coll]++;
    c->comm.stats.bytes[t->coll] += bytes;
    return mgt__nccl_collect(c, 0);
}

static int mgt__nccl_on_device(const void *p) {
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError(); /* older runtimes flag host pointers as an error: not sticky, clear it */
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

/* device memory for `bytes` of host data */
static mgt_result mgt__nccl_stage(mgt__nccl *c, size_t bytes) {
    if (bytes <= c->stage_bytes) return MGT_OK;
    if (c->stage) MGT__CUDA_TRY(c, "staging a host buffer", cudaFree(c->stage));
    c->stage = NULL;
    c->stage_bytes = 0;
    MGT__CUDA_TRY(c, "staging a host buffer", cudaMalloc(&c->stage, bytes));
    c->stage_bytes = bytes;
    return MGT_OK;
}

static mgt__nccl_group *mgt__nccl_find(mgt__nccl *c, const mgt_group *g) {
    int i;
    for (i = 0; i < c->ngroups; i++)
        if (c->groups[i].id == g->id) return &c->groups[i];
    return NULL;
}

/* One collective over g. in/out: the caller's buffers (out NULL for in-place); in_bytes and
   out_bytes their sizes; host buffers go through the stage: [in | out] */
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
    mgt__nccl_timed *t;
    const void *in = k->in;
    void *out = k->out ? k->out : (void *)k->in;
    int host = !mgt__nccl_on_device(k->in) || (k->out && !mgt__nccl_on_device(k->out));
    ncclDataType_t type = mgt__nccl_type(k->dtype);
    if (!k->count) return mgt__nccl_nothing(c);
    if (!gr)
        return mgt__nccl_report(c->w->fail, "NCCL %s on group %d from rank %d: the rank was not given this group when its communicator was made",
                                k->name, k->g->id, c->comm.rank);
    if (host) {
        size_t off = (k->in_bytes + 255) / 256 * 256; /* keep the output aligned */
        mgt_result r = mgt__nccl_stage(c, off + k->out_bytes);
        if (r != MGT_OK) return r;
        MGT__CUDA_TRY(c, "staging a host buffer", cudaStreamSynchronize(c->compute)); /* the host wrote it */
        MGT__CUDA_TRY(c, "staging a host buffer", cudaMemcpyAsync(c->stage, k->in, k->in_bytes, cudaMemcpyHostToDevice, c->stream));
        in = c->stage;
        out = k->out ? (char *)c->stage + off : c->stage;
    }
    if (mgt__nccl_begin(c, k->coll, &t) != MGT_OK) return MGT_ERROR_COMM;
    if (!gr->comm) { /* a group of one: the result is the input */
        if (out != in) MGT__CUDA_TRY(c, "a collective of one", cudaMemcpyAsync(out, in, k->in_bytes, cudaMemcpyDeviceToDevice, c->stream));
    } else if (k->coll == MGT_COLL_ALL_REDUCE || k->coll == MGT_COLL_BARRIER) {
        MGT__NCCL_TRY(c, k->name, k->g->id, gr->comm, ncclAllReduce(in, out, k->count, type, ncclSum, gr->comm, c->stream));
    } else if (k->coll == MGT_COLL_REDUCE_SCATTER) {
        MGT__NCCL_TRY(c, k->name, k->g->id, gr->comm, ncclReduceScatter(in, out, k->count, type, ncclSum, gr->comm, c->stream));
    } else if (k->coll == MGT_COLL_ALL_GATHER) {
        MGT__NCCL_TRY(c, k->name, k->g->id, gr->comm, ncclAllGather(in, out, k->count, type, gr->comm, c->stream));
    } else { /* broadcast */
        MGT__NCCL_TRY(c, k->name, k->g->id, gr->comm, ncclBroadcast(in, out, k->count, type, k->root, gr->comm, c->stream));
    }
    if (mgt__nccl_end(c, t, k->bytes) != MGT_OK) return MGT_ERROR_COMM;
    if (host) {
        void *dst = k->out ? k->out : (void *)k->in;
        MGT__CUDA_TRY(c, "staging a host buffer", cudaMemcpyAsync(dst, out, k->out ? k->out_bytes : k->in_bytes, cudaMemcpyDeviceToHost, c->stream));
        MGT__CUDA_TRY(c, "staging a host buffer", cudaStreamSynchronize(c->stream));
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
    mgt__nccl_timed *t;
    ncclComm_t wc = c->wcomm;
    size_t b = count * mgt__nccl_elt(dtype);
    if (!count) return mgt__nccl_nothing(c);
    if (!mgt__nccl_on_device(buf))
        return mgt__nccl_report(c->w->fail, "NCCL %s from rank %d to rank %d: the buffer %p is not device memory", is_send ? "send" : "recv",
                                is_send ? cm->rank : peer, is_send ? peer : cm->rank, buf);
    if (mgt__nccl_begin(c, MGT_COLL_SEND_RECV, &t) != MGT_OK) return MGT_ERROR_COMM;
    if (is_send) MGT__NCCL_TRY(c, "send", -1, wc, ncclSend(buf, count, mgt__nccl_type(dtype), peer, wc, c->stream));
    else MGT__NCCL_TRY(c, "recv", -1, wc, ncclRecv(buf, count, mgt__nccl_type(dtype), peer, wc, c->stream));
    return mgt__nccl_end(c, t, (double)b);
}
/* one NCCL group: both proceed together, so two ranks that each send to the other cannot deadlock */
static mgt_result mgt__nccl_sendrecv(mgt_comm *cm, int send_peer, const void *send, int recv_peer, void *recv, size_t count, int dtype) {
    mgt__nccl *c = (mgt__nccl *)cm;
    mgt__nccl_timed *t;
    ncclComm_t wc = c->wcomm;
    size_t b = count * mgt__nccl_elt(dtype);
    ncclResult_t rs, rr, re;
    if (!count) return mgt__nccl_nothing(c);
    if (!mgt__nccl_on_device(send) || !mgt__nccl_on_device(recv))
        return mgt__nccl_report(c->w->fail, "NCCL sendrecv on rank %d (to %d, from %d): the buffers %p and %p must be device memory", cm->rank, send_peer,
                                recv_peer, send, recv);
    if (mgt__nccl_begin(c, MGT_COLL_SEND_RECV, &t) != MGT_OK) return MGT_ERROR_COMM;
    MGT__NCCL_TRY(c, "group start", -1, wc, ncclGroupStart());
    rs = ncclSend(send, count, mgt__nccl_type(dtype), send_peer, wc, c->stream);
    rr = ncclRecv(recv, count, mgt__nccl_type(dtype), recv_peer, wc, c->stream);
    re = ncclGroupEnd(); /* always: a group left open would swallow the next calls */
    MGT__NCCL_TRY(c, "send (in a sendrecv)", -1, wc, rs);
    MGT__NCCL_TRY(c, "recv (in a sendrecv)", -1, wc, rr);
    MGT__NCCL_TRY(c, "group end", -1, wc, re);
    c->comm.stats.calls[MGT_COLL_SEND_RECV]++; /* a send and a receive, as the local communicator counts them */
    return mgt__nccl_end(c, t, 2.0 * (double)b);
}
static mgt_result mgt__nccl_send(mgt_comm *cm, int peer, const void *buf, size_t count, int dtype) {
    return mgt__nccl_p2p(cm, 1, peer, (void *)buf, count, dtype);
}
static mgt_result mgt__nccl_recv(mgt_comm *cm, int peer, void *buf, size_t count, int dtype) {
    return mgt__nccl_p2p(cm, 0, peer, buf, count, dtype);
}

/* ---- worlds and ranks */

mgt_result mgt_nccl_world_create(int world, const int *devices, mgt_nccl_fail_fn fail, mgt_nccl_world **out) {
    mgt_nccl_world *w = (mgt_nccl_world *)calloc(1, sizeof *w);
    ncclResult_t r;
    int i;
    *out = NULL;
    if (!w || !(w->devices = (int *)calloc((size_t)world, sizeof(int))) || !(w->comms = (ncclComm_t *)calloc((size_t)world, sizeof(ncclComm_t)))) {
        if (w) free(w->devices);
        free(w);
        return fail(MGT_ERROR_MEMORY, "out of memory");
    }
    w->world = world;
    w->fail = fail;
    pthread_mutex_init(&w->mu, NULL);
    for (i = 0; i < world; i++) w->devices[i] = devices[i];
    r = ncclCommInitAll(w->comms, world, w->devices);
    if (r != ncclSuccess) {
        mgt_result res = mgt__nccl_report(fail, "NCCL could not start on %d GPU%s (ncclCommInitAll): %s", world, world == 1 ? "" : "s",
                                          ncclGetErrorString(r));
        pthread_mutex_destroy(&w->mu);
        free(w->comms);
        free(w->devices);
        free(w);
        return res;
    }
    *out = w;
    return MGT_OK;
}

static mgt_result mgt__nccl_remember(mgt_nccl_world *w, ncclComm_t comm) {
    pthread_mutex_lock(&w->mu);
    if (w->nall == w->capall) {
        int cap = w->capall ? 2 * w->capall : 64;
        ncclComm_t *all = (ncclComm_t *)realloc(w->all, sizeof(ncclComm_t) * (size_t)cap);
        if (!all) {
            pthread_mutex_unlock(&w->mu);
            return w->fail(MGT_ERROR_MEMORY, "out of memory");
        }
        w->all = all;
        w->capall = cap;
    }
    w->all[w->nall++] = comm;
    pthread_mutex_unlock(&w->mu);
    return MGT_OK;
}

mgt_result mgt_nccl_comm_create(mgt_nccl_world *w, int rank, void *compute_stream, const mgt_group *const *groups, int ngroups, mgt_comm **out) {
    mgt__nccl *c = (mgt__nccl *)calloc(1, sizeof *c);
    int i;
    *out = NULL;
    if (!c) return w->fail(MGT_ERROR_MEMORY, "out of memory");
    if (ngroups > MGT__NCCL_MAX_GROUPS) {
        free(c);
        return mgt__nccl_report(w->fail, "NCCL communicator for rank %d: %d kinds of groups, at most %d", rank, ngroups, MGT__NCCL_MAX_GROUPS);
    }
    c->w = w;
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
    MGT__CUDA_TRY(c, "selecting the device", cudaSetDevice(c->device));
    MGT__CUDA_TRY(c, "making the communication stream", cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    MGT__CUDA_TRY(c, "making events", cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming));
    MGT__CUDA_TRY(c, "making events", cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming));
    for (i = 0; i < MGT__NCCL_DEFERRED; i++) MGT__CUDA_TRY(c, "making events", cudaEventCreateWithFlags(&c->deferred[i], cudaEventDisableTiming));
    for (i = 0; i < MGT__NCCL_PENDING; i++) {
        MGT__CUDA_TRY(c, "making timing events", cudaEventCreate(&c->timed[i].start));
        MGT__CUDA_TRY(c, "making timing events", cudaEventCreate(&c->timed[i].end));
    }
    for (i = 0; i < ngroups; i++) {
        const mgt_group *g = groups[i];
        mgt__nccl_group *gr = &c->groups[c->ngroups++];
        int member = g->ranks[g->index] == rank;
        gr->id = g->id;
        gr->size = g->size;
        if (g->size == 1) continue;
        if (g->size == w->world) { gr->comm = c->wcomm; continue; }
        MGT__NCCL_TRY(c, "split", g->id, c->wcomm, ncclCommSplit(c->wcomm, member ? g->id : NCCL_SPLIT_NOCOLOR, g->index, &gr->comm, NULL));
        if (!member) { c->ngroups--; continue; } /* NCCL gives no communicator to a rank outside */
        if (mgt__nccl_remember(w, gr->comm) != MGT_OK) return MGT_ERROR_MEMORY;
    }
    return MGT_OK;
}

mgt_result mgt_nccl_settle(mgt_comm *cm) {
    mgt__nccl *c = (mgt__nccl *)cm;
    int i;
    MGT__CUDA_TRY(c, "waiting for communication", cudaStreamSynchronize(c->stream));
    if (mgt__nccl_collect(c, 1) != MGT_OK) return MGT_ERROR_COMM;
    if (mgt__nccl_aborted(c)) return mgt__nccl_gone(c);
    for (i = 0; i < c->ngroups; i++) { /* network and peer failures arrive asynchronously */
        ncclResult_t async = ncclSuccess;
        if (c->groups[i].comm && ncclCommGetAsyncError(c->groups[i].comm, &async) == ncclSuccess && async != ncclSuccess)
            return mgt__nccl_report(c->w->fail, "NCCL on group %d, rank %d (device %d): %s", c->groups[i].id, cm->rank, c->device,
                                    mgt__nccl_why(c->groups[i].comm, async));
    }
    return MGT_OK;
}

void mgt_nccl_comm_destroy(mgt_comm *cm) {
    mgt__nccl *c = (mgt__nccl *)cm;
    int i;
    if (!c) return;
    if (c->stream) cudaStreamSynchronize(c->stream);
    for (i = 0; i < c->ngroups && !mgt__nccl_aborted(c); i++) /* the world communicator belongs to the world */
        if (c->groups[i].comm && c->groups[i].comm != c->wcomm) ncclCommDestroy(c->groups[i].comm);
    for (i = 0; i < MGT__NCCL_PENDING; i++) {
        if (c->timed[i].start) cudaEventDestroy(c->timed[i].start);
        if (c->timed[i].end) cudaEventDestroy(c->timed[i].end);
    }
    if (c->ready) cudaEventDestroy(c->ready);
    if (c->done) cudaEventDestroy(c->done);
    for (i = 0; i < MGT__NCCL_DEFERRED; i++)
        if (c->deferred[i]) cudaEventDestroy(c->deferred[i]);
    if (c->stream) cudaStreamDestroy(c->stream);
    if (c->stage) cudaFree(c->stage);
    free(c);
}

/* after an error on one rank: the others may be blocked inside NCCL waiting for it */
void mgt_nccl_world_abort(mgt_nccl_world *w) {
    int i;
    pthread_mutex_lock(&w->mu);
    if (w->aborted) { pthread_mutex_unlock(&w->mu); return; }
    __atomic_store_n(&w->aborted, 1, __ATOMIC_RELEASE);
    for (i = 0; i < w->nall; i++) ncclCommAbort(w->all[i]);
    w->nall = 0;
    for (i = 0; i < w->world; i++)
        if (w->comms[i]) { ncclCommAbort(w->comms[i]); w->comms[i] = NULL; }
    pthread_mutex_unlock(&w->mu);
}

void mgt_nccl_world_destroy(mgt_nccl_world *w) {
    int i;
    if (!w) return;
    for (i = 0; i < w->world; i++)
        if (w->comms[i]) ncclCommDestroy(w->comms[i]);
    pthread_mutex_destroy(&w->mu);
    free(w->all);
    free(w->comms);
    free(w->devices);
    free(w);
}
