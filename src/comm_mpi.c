/* src/comm_mpi.c - processes (MPI) around the in-process world: the launcher, the MPI library, the two-level communicator (MGT_NO_MPI leaves it out) */
/* ---- communication: processes (MPI) around the in-process world ---------------------------------
   Under an MPI launcher each process runs a contiguous block of `per` ranks (rank / per is its
   process) in an in-process world of the whole world's size, of which only its block makes calls.
   Each rank's mgt_comm is two-level: a group whose members all live in this process, and a
   send/recv between two of them, go through the in-process communicator unchanged. A reduction
   over a group that spans processes is hierarchical (mgt__pcomm_chain): each process's first
   member adds its process's members to the running sum of the processes before it, in the
   in-process communicator's order (member 0 + member 1 + ... in group order, in fp32, rounded
   once), so every result is bit-identical to one process whatever the process count, and one sum
   and one result cross each process boundary. All-gather, broadcast and a group whose processes'
   members are not contiguous are exchanged member to member with MPI.
   Rank threads call MPI themselves (MPI_THREAD_MULTIPLE) with non-blocking sends and receives
   polled against parallel.timeout_s, rather than through one communication thread per process:
   no hand-off, no queue, and each wait keeps its own deadline and its own message. Matching:
   tag = sender * world + receiver on a communicator per kind (collectives, send/recv); between
   one pair, MPI delivers messages of one tag in the order they were posted, and a rank posts in
   program order. Send copies the data and returns (buffered, as the in-process send). Calls are
   counted in the in-process communicator's statistics, which the rank's mgt_comm mirrors. */

/* ---- the launcher: how many processes started this one, from the launcher's environment (read
   also by a program built with MGT_NO_MPI, so that it refuses to run as one of several copies) */

MGTDEF int mgt_mpi_launcher(char *name, size_t cap) {
    /* each launcher's own size variable; Slurm's srun counts only beside a PMI rank of its step
       (SLURM_NTASKS alone is also set inside a batch script, which is one process) */
    static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    const char *v;
    long n;
    size_t i;
    if (name && cap) name[0] = 0;
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (!(v = getenv(sizes[i])) || (n = strtol(v, NULL, 10)) < 1) continue;
        if (name) mgt__strlcpy(name, sizes[i], cap);
        return n > 65536 ? 65536 : (int)n;
    }
    if ((getenv("PMIX_RANK") || getenv("PMI_RANK")) && (v = getenv("SLURM_NTASKS")) && (n = strtol(v, NULL, 10)) >= 1) {
        if (name) mgt__strlcpy(name, "SLURM_NTASKS", cap);
        return n > 65536 ? 65536 : (int)n;
    }
    return 1;
}

MGTDEF int mgt_mpi_launcher_rank(void) {
    static const char *const ranks[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
    size_t i;
    if (mgt_mpi_launcher(NULL, 0) <= 1) return 0;
    for (i = 0; i < sizeof ranks / sizeof ranks[0]; i++)
        if (getenv(ranks[i])) return atoi(getenv(ranks[i]));
    return getenv("SLURM_PROCID") ? atoi(getenv("SLURM_PROCID")) : 0;
}

typedef struct mgt__pcomm_msg { /* a buffered send in flight; the data follows the struct */
    struct mgt__pcomm_msg *next;
    void *request;
} mgt__pcomm_msg;

typedef struct mgt__pcomm_rank {
    mgt_comm comm;   /* the rank's communicator; stats mirror inner's */
    mgt_comm *inner; /* the rank in the in-process world, which counts every call */
    mgt__mpi_world *w;
    mgt__pcomm_msg *sends;
} mgt__pcomm_rank;

struct mgt__mpi_world {
    const mgt_mpi_api *api;
    int process, processes, per, world;
    double timeout_s;
    mgt__local_world *local;
    mgt__pcomm_rank *ranks; /* (per) this process's */
    char (*hosts)[64];      /* (processes) */
    pthread_mutex_t mu;
    int failed;
    char why[2048];
    int handoff; /* ThreadSanitizer's token for MPI's hand-overs (MGT__MPI_RELEASE) */
    double wire_bytes; /* bytes this process's ranks sent to other processes (under mu): what the network carries */
};

#ifndef MGT_NO_MPI

/* ---- the MPI library: build/libmgt_mpi.so, opened on first use (src/plugin.c) ---------------- */

static char mgt__mpi_host[256]; /* this process's, once MPI has started */
static pthread_mutex_t mgt__mpi_mu = PTHREAD_MUTEX_INITIALIZER;
static const mgt_mpi_api *mgt__mpi_api;
static char mgt__mpi_why[800];
static int mgt__mpi_started, mgt__mpi_aborted, mgt__mpi_process, mgt__mpi_processes = 1;

static const mgt__dl_lib mgt__mpi_lib = {"MGT_MPI_LIBRARY", "libmgt_mpi.so", "mgt_mpi_api_get", "MPI", "ninja mpi", MGT_MPI_ABI};

MGTDEF const mgt_mpi_api *mgt_mpi_load(char *why, size_t cap) {
    const mgt_mpi_api *api;
    pthread_mutex_lock(&mgt__mpi_mu);
    if (!mgt__mpi_api && !mgt__mpi_why[0]) {
        char tried[600] = "";
        mgt__mpi_api = (const mgt_mpi_api *)mgt__dl_search(&mgt__mpi_lib, tried, sizeof tried);
        if (!mgt__mpi_api)
            snprintf(mgt__mpi_why, sizeof mgt__mpi_why, "the MPI library is not built or cannot load (%s); build it with `ninja mpi` (needs mpicc)",
                     tried[0] ? tried : "not found");
    }
    api = mgt__mpi_api;
    if (!api && why) mgt__strlcpy(why, mgt__mpi_why, cap);
    pthread_mutex_unlock(&mgt__mpi_mu);
    return api;
}

MGTDEF void mgt_mpi_use(const mgt_mpi_api *api) {
    pthread_mutex_lock(&mgt__mpi_mu);
    mgt__mpi_api = api;
    mgt__mpi_why[0] = 0;
    pthread_mutex_unlock(&mgt__mpi_mu);
}

/* MPI_Finalize at exit: Open MPI's launcher treats a process that exits without it as failed. Not
   after an abort, whose processes are being killed */
static void mgt__mpi_at_exit(void) {
    if (mgt__mpi_started && !mgt__mpi_aborted) mgt__mpi_api->finalize();
}

MGTDEF mgt_result mgt_mpi_start(int *process, int *processes) {
    char why[800], launcher[64];
    int expected = mgt_mpi_launcher(launcher, sizeof launcher);
    mgt_result r = MGT_OK;
    if (!process || !processes) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_mpi_start: process and processes are required");
    why[0] = 0;
    if (!mgt_mpi_load(why, sizeof why)) return mgt__fail(MGT_ERROR_UNSUPPORTED, "started by an MPI launcher (%s=%d), but %s", launcher, expected, why);
    pthread_mutex_lock(&mgt__mpi_mu);
    if (!mgt__mpi_started) {
        if (mgt__mpi_api->init(&mgt__mpi_process, &mgt__mpi_processes, mgt__mpi_host, sizeof mgt__mpi_host, why, sizeof why))
            r = mgt__fail(MGT_ERROR_COMM, "MPI_Init_thread: %s", why);
        else {
            mgt__mpi_started = 1;
            atexit(mgt__mpi_at_exit);
        }
    }
    *process = mgt__mpi_process;
    *processes = mgt__mpi_processes;
    pthread_mutex_unlock(&mgt__mpi_mu);
    return r;
}

MGTDEF void mgt_mpi_abort(int code) {
    if (!mgt__mpi_started || mgt__mpi_processes < 2) return;
    mgt__mpi_aborted = 1;
    mgt__mpi_api->abort_all(code);
}

/* Between two threads of one process, MPI hands data over inside its own (uninstrumented)
   library: ThreadSanitizer sees the receiver read what another thread wrote with no order
   between them. Under TSan every send and test (MPI moves data for any thread inside any call)
   releases, and a completed wait acquires, the world. */
#if defined(__SANITIZE_THREAD__)
#define MGT__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MGT__TSAN 1
#endif
#endif
#ifdef MGT__TSAN
#ifdef __cplusplus
extern "C" {
#endif
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#ifdef __cplusplus
}
#endif
#define MGT__MPI_RELEASE(w) __tsan_release(&(w)->handoff)
#define MGT__MPI_ACQUIRE(w) __tsan_acquire(&(w)->handoff)
#else
#define MGT__MPI_RELEASE(w) ((void)0)
#define MGT__MPI_ACQUIRE(w) ((void)0)
#endif

static int mgt__pcomm_process_of(const mgt__mpi_world *w, int rank) { return rank / w->per; }

/* an MPI_Isend of a rank's, counted in wire_bytes when it leaves the process */
static void *mgt__pcomm_isend(mgt__mpi_world *w, const void *buf, size_t bytes, int process, int tag, int channel, char *why, size_t cap) {
    void *req;
    MGT__MPI_RELEASE(w);
    req = w->api->isend(buf, bytes, process, tag, channel, why, cap);
    if (req && process != w->process) {
        pthread_mutex_lock(&w->mu);
        w->wire_bytes += (double)bytes;
        pthread_mutex_unlock(&w->mu);
    }
    return req;
}
static int mgt__pcomm_tag(const mgt__mpi_world *w, int from, int to) { return from * w->world + to; }

static int mgt__pcomm_failed(mgt__mpi_world *w) {
    int failed;
    pthread_mutex_lock(&w->mu);
    failed = w->failed;
    pthread_mutex_unlock(&w->mu);
    if (!failed) { /* a rank of this process failed in the in-process world */
        pthread_mutex_lock(&w->local->mu);
        failed = w->local->failed;
        pthread_mutex_unlock(&w->local->mu);
    }
    return failed;
}
static mgt_result mgt__pcomm_fail(mgt__mpi_world *w, const char *why) {
    char copy[2048]; /* why may be the thread's message (mgt_last_error()), which the failure rewrites */
    mgt__strlcpy(copy, why, sizeof copy);
    pthread_mutex_lock(&w->mu);
    if (!w->failed) {
        w->failed = 1;
        mgt__strlcpy(w->why, copy, sizeof w->why);
    }
    pthread_mutex_unlock(&w->mu);
    return mgt__fail(MGT_ERROR_COMM, "%s", copy);
}
static mgt_result mgt__pcomm_world_error(mgt__mpi_world *w) {
    char why[2048];
    pthread_mutex_lock(&w->mu);
    mgt__strlcpy(why, w->failed ? w->why : "", sizeof why);
    pthread_mutex_unlock(&w->mu);
    if (!why[0]) {
        pthread_mutex_lock(&w->local->mu);
        mgt__strlcpy(why, w->local->why, sizeof why);
        pthread_mutex_unlock(&w->local->mu);
    }
    return mgt__fail(MGT_ERROR_COMM, "%s", why);
}

/* waits for n requests (NULL ones are done) until the deadline; who, what and peer (a rank) name a
   late one */
static mgt_result mgt__pcomm_wait(mgt__mpi_world *w, const char *who, void **req, const int *peer, int n, const char *what) {
    double start = mgt_now(), pause = 1e-6, last = start;
    char why[2048], text[512];
    int i, left;
    for (;;) {
        for (i = 0, left = 0; i < n; i++) {
            int done;
            if (!req[i]) continue;
            done = w->api->test(req[i], text, sizeof text);
            MGT__MPI_RELEASE(w); /* MPI may have moved another thread's data during the call */
            if (done < 0) {
                req[i] = NULL;
                snprintf(why, sizeof why, "%s, %s with rank %d (process %d on %s): MPI: %s", who, what, peer[i],
                         mgt__pcomm_process_of(w, peer[i]), w->hosts[mgt__pcomm_process_of(w, peer[i])], text);
                for (i = 0; i < n; i++) if (req[i]) { w->api->cancel(req[i]); req[i] = NULL; }
                return mgt__pcomm_fail(w, why);
            }
            if (done) req[i] = NULL;
            else left++;
        }
        if (!left) {
            MGT__MPI_ACQUIRE(w);
            return MGT_OK;
        }
        { /* polls come every 0.2 ms at most: a gap of seconds means this process did not run (SIGSTOP,
             a suspended machine), not that the peer is late, so the gap does not count against it */
            double now = mgt_now();
            if (now - last > 0.5) start += now - last;
            last = now;
        }
        if (mgt__pcomm_failed(w) || (w->timeout_s > 0 && mgt_now() - start > w->timeout_s)) {
            int timed_out = !mgt__pcomm_failed(w);
            for (i = 0; i < n && !req[i]; i++) {}
            if (timed_out)
                snprintf(why, sizeof why, "%s waited %.0f s (parallel.timeout_s) in %s for rank %d (process %d on %s): that process is "
                         "stalled, lost, or called something else", who, w->timeout_s, what, peer[i], mgt__pcomm_process_of(w, peer[i]),
                         w->hosts[mgt__pcomm_process_of(w, peer[i])]);
            for (i = 0; i < n; i++) if (req[i]) { w->api->cancel(req[i]); req[i] = NULL; }
            return timed_out ? mgt__pcomm_fail(w, why) : mgt__pcomm_world_error(w);
        }
        { /* poll, backing off to 0.2 ms: the cores are the ranks' */
            struct timespec ts;
            ts.tv_sec = 0;
            ts.tv_nsec = (long)(pause * 1e9);
            nanosleep(&ts, NULL);
            if (pause < 2e-4) pause *= 2;
        }
    }
}

/* buffered sends that have completed are freed */
static mgt_result mgt__pcomm_reap(mgt__pcomm_rank *me) {
    mgt__pcomm_msg **p = &me->sends;
    char text[512], why[1024];
    while (*p) {
        int done = me->w->api->test((*p)->request, text, sizeof text);
        if (done) {
            mgt__pcomm_msg *s = *p;
            *p = s->next;
            MGT_FREE(s);
            if (done < 0) {
                snprintf(why, sizeof why, "rank %d: a send to another process failed: MPI: %s", me->comm.rank, text);
                return mgt__pcomm_fail(me->w, why);
            }
        } else p = &(*p)->next;
    }
    return MGT_OK;
}

static int mgt__pcomm_in_process(const mgt__mpi_world *w, const mgt_group *g) {
    int i;
    for (i = 0; i < g->size; i++)
        if (mgt__pcomm_process_of(w, g->ranks[i]) != w->process) return 0;
    return 1;
}

static mgt_result mgt__pcomm_count(mgt__pcomm_rank *me, int coll, double t0, mgt_result r, double bytes) {
    r = mgt__lcomm_finish(me->inner, coll, t0, r, bytes);
    me->comm.stats = me->inner->stats;
    return r;
}

/* a send (is_send) or receive of `bytes` between this rank and rank q on the collective channel,
   appended to req/peer; 0, or -1 with the thread's error set */
static int mgt__pcomm_post(mgt__pcomm_rank *me, int is_send, void *buf, size_t bytes, int q, void **req, int *peer, int *nreq, const char *what) {
    mgt__mpi_world *w = me->w;
    int pq = mgt__pcomm_process_of(w, q), rank = me->comm.rank;
    char text[512];
    req[*nreq] = is_send ? mgt__pcomm_isend(w, buf, bytes, pq, mgt__pcomm_tag(w, rank, q), MGT_MPI_COLLECTIVE, text, sizeof text)
                         : w->api->irecv(buf, bytes, pq, mgt__pcomm_tag(w, q, rank), MGT_MPI_COLLECTIVE, text, sizeof text);
    peer[*nreq] = q;
    if (!req[(*nreq)++]) {
        mgt__fail(MGT_ERROR_COMM, "rank %d: %s: %s: %s", rank, what, is_send ? "MPI_Isend" : "MPI_Irecv", text);
        return -1;
    }
    return 0;
}

/* the runs of a group's members by process, in group order: run k is members first[k] to
   first[k + 1] - 1 (first has size + 1 entries); the number of runs, or 0 when a process's members
   are not contiguous (a group out of rank order) */
static int mgt__pcomm_runs(const mgt__mpi_world *w, const mgt_group *g, int *first) {
    int j, k, runs = 0;
    for (j = 0; j < g->size; j++) {
        int p = mgt__pcomm_process_of(w, g->ranks[j]);
        if (j && p == mgt__pcomm_process_of(w, g->ranks[j - 1])) continue;
        for (k = 0; k < runs; k++)
            if (mgt__pcomm_process_of(w, g->ranks[first[k]]) == p) return 0;
        first[runs++] = j;
    }
    first[runs] = g->size;
    return runs;
}

/* acc (fp32; fp64 for f64) = acc if `have`, else src[0], plus the sources in order: the local
   communicator's arithmetic (mgt__lcomm_sum), cut where a process boundary passes the running sum */
static void mgt__pcomm_add(void *acc, int have, const void *const *src, int nsrc, size_t count, int dtype) {
    int j = 0;
    size_t e;
    if (dtype == MGT_F64) {
        double *a = (double *)acc;
        if (!have) memcpy(a, src[j++], count * 8);
        for (; j < nsrc; j++)
            for (e = 0; e < count; e++) a[e] += ((const double *)src[j])[e];
        return;
    }
    if (!have) mgt__lcomm_load((float *)acc, src[j++], count, dtype);
    for (; j < nsrc; j++) mgt__lcomm_add((float *)acc, src[j], count, dtype);
}

/* all-reduce or reduce-scatter of a group that spans processes, hierarchically and in the
   communicator's order (member 0 + member 1 + ... in fp32, fp64 for f64, rounded once): the first
   member of each process's run (its leader) takes its process's members' inputs, adds them in group
   order to the running sum that the previous process's leader passes it (fp32/fp64, unrounded), and
   passes the sum on; the last leader rounds it and sends each other leader its members' result,
   which the leader hands to them. The bits are one process's; between processes each boundary
   carries one running sum and each process its result, where member to member every member sent
   every member of another process its whole buffer. The leaders' chain is sequential: P processes
   add P - 1 hops of latency, a price worth the traffic at the few processes (nodes) a run spans. */
static mgt_result mgt__pcomm_chain(mgt__pcomm_rank *me, int coll, const mgt_group *g, const void *src, void *dst, size_t count, int dtype,
                                   const int *first, int runs, const char *what) {
    mgt__mpi_world *w = me->w;
    int n = g->size, idx = g->index, run = 0, leader, end, j, nreq = 0, rs = coll == MGT_COLL_REDUCE_SCATTER;
    size_t elt = mgt__lcomm_elt(dtype), wide = dtype == MGT_F64 ? 8 : 4, total = rs ? count * (size_t)n : count, block = count * elt;
    const void *in = rs ? src : (const void *)dst; /* this member's contribution: `total` elements */
    void **req = (void **)MGT_MALLOC(sizeof(void *) * (size_t)(n + runs));
    int *peer = (int *)MGT_MALLOC(sizeof(int) * (size_t)(n + runs));
    const void **from = (const void **)MGT_MALLOC(sizeof(void *) * (size_t)n);
    char *stage = NULL, *acc = NULL, *result = NULL, who[32];
    mgt_result r = MGT_OK;
    snprintf(who, sizeof who, "rank %d", me->comm.rank);
    while (first[run + 1] <= idx) run++;
    leader = first[run];
    end = first[run + 1];
    if (!req || !peer || !from) { r = mgt__fail(MGT_ERROR_MEMORY, "rank %d: out of memory for %s", me->comm.rank, what); goto done; }
    if (idx != leader) { /* its input to its leader, then its result back (one after the other: in place, they overlap) */
        if (mgt__pcomm_post(me, 1, (void *)in, total * elt, g->ranks[leader], req, peer, &nreq, what)) goto failed;
        if ((r = mgt__pcomm_wait(w, who, req, peer, nreq, what)) != MGT_OK) goto done;
        nreq = 0;
        if (mgt__pcomm_post(me, 0, dst, block, g->ranks[leader], req, peer, &nreq, what)) goto failed;
        r = mgt__pcomm_wait(w, who, req, peer, nreq, what);
        goto done;
    }
    stage = (char *)MGT_MALLOC(total * elt * (size_t)(end - leader) + 1);
    acc = (char *)MGT_MALLOC(total * wide + 1);
    result = (char *)MGT_MALLOC(total * elt + 1);
    if (!stage || !acc || !result) { r = mgt__fail(MGT_ERROR_MEMORY, "rank %d: out of memory for %s", me->comm.rank, what); goto done; }
    for (j = leader + 1; j < end; j++) /* this process's members, and the running sum of the processes before */
        if (mgt__pcomm_post(me, 0, stage + (size_t)(j - leader) * total * elt, total * elt, g->ranks[j], req, peer, &nreq, what)) goto failed;
    if (run > 0 && mgt__pcomm_post(me, 0, acc, total * wide, g->ranks[first[run - 1]], req, peer, &nreq, what)) goto failed;
    if ((r = mgt__pcomm_wait(w, who, req, peer, nreq, what)) != MGT_OK) goto done;
    nreq = 0;
    for (j = leader; j < end; j++) from[j - leader] = j == idx ? in : stage + (size_t)(j - leader) * total * elt;
    if (total) mgt__pcomm_add(acc, run > 0, from, end - leader, total, dtype);
    if (run < runs - 1) { /* on to the next process; the result comes from the last */
        if (mgt__pcomm_post(me, 1, acc, total * wide, g->ranks[first[run + 1]], req, peer, &nreq, what) ||
            mgt__pcomm_post(me, 0, result + (rs ? (size_t)leader * block : 0), rs ? (size_t)(end - leader) * block : block, g->ranks[first[runs - 1]], req,
                            peer, &nreq, what))
            goto failed;
        if ((r = mgt__pcomm_wait(w, who, req, peer, nreq, what)) != MGT_OK) goto done;
        nreq = 0;
    } else {
        if (dtype == MGT_F64) memcpy(result, acc, total * 8);
        else if (total) mgt__lcomm_store(result, (const float *)acc, total, dtype);
        for (j = 0; j < runs - 1; j++) /* each other leader its members' blocks */
            if (mgt__pcomm_post(me, 1, result + (rs ? (size_t)first[j] * block : 0), rs ? (size_t)(first[j + 1] - first[j]) * block : block,
                                g->ranks[first[j]], req, peer, &nreq, what))
                goto failed;
    }
    for (j = leader + 1; j < end; j++)
        if (mgt__pcomm_post(me, 1, result + (rs ? (size_t)j * block : 0), block, g->ranks[j], req, peer, &nreq, what)) goto failed;
    if (block) memcpy(dst, result + (rs ? (size_t)idx * block : 0), block);
    r = mgt__pcomm_wait(w, who, req, peer, nreq, what);
    goto done;
failed: /* a post failed: what was posted cannot complete */
    for (j = 0; j < nreq; j++) if (req[j]) w->api->cancel(req[j]);
    r = mgt__pcomm_fail(w, mgt_last_error());
done:
    MGT_FREE(req);
    MGT_FREE(peer);
    MGT_FREE((void *)from);
    MGT_FREE(stage);
    MGT_FREE(acc);
    MGT_FREE(result);
    return r;
}

static mgt_result mgt__pcomm_collective(mgt_comm *c, int coll, const mgt_group *g, const void *src, void *dst, size_t count, int dtype, int root) {
    mgt__pcomm_rank *me = (mgt__pcomm_rank *)c->impl;
    mgt__mpi_world *w = me->w;
    double t0 = mgt_now(), bytes;
    size_t elt = mgt__lcomm_elt(dtype), block = count * elt;
    int n, idx, j, nreq = 0, *peer = NULL;
    void **req = NULL;
    const void **from = NULL;
    char *stage = NULL, what[600];
    mgt__lcomm_call call;
    mgt_result r;
    if (!g || !g->ranks || g->size < 1 || g->index < 0 || g->index >= g->size || g->ranks[g->index] != c->rank)
        return mgt__fail(MGT_ERROR_ARGUMENT, "rank %d: %s: not a member of the group it names", c->rank, mgt_coll_name(coll));
    if (mgt__pcomm_in_process(w, g)) {
        mgt_comm *in = me->inner;
        r = coll == MGT_COLL_ALL_REDUCE       ? in->all_reduce(in, g, dst, count, dtype)
            : coll == MGT_COLL_REDUCE_SCATTER ? in->reduce_scatter(in, g, src, dst, count, dtype)
            : coll == MGT_COLL_ALL_GATHER     ? in->all_gather(in, g, src, dst, count, dtype)
            : coll == MGT_COLL_BROADCAST      ? in->broadcast(in, g, dst, count, dtype, root)
                                              : in->barrier(in, g);
        c->stats = in->stats;
        return r;
    }
    n = g->size;
    idx = g->index;
    if (dtype < MGT_F32 || dtype > MGT_F64 || (coll != MGT_COLL_BARRIER && count && (!src || !dst)) ||
        (coll == MGT_COLL_BROADCAST && (root < 0 || root >= n)))
        return mgt__pcomm_count(me, coll, t0, mgt__fail(MGT_ERROR_ARGUMENT, "rank %d: %s: invalid dtype, buffers or root", c->rank, mgt_coll_name(coll)), 0);
    if (mgt__pcomm_failed(w)) return mgt__pcomm_count(me, coll, t0, mgt__pcomm_world_error(w), 0);
    memset(&call, 0, sizeof call);
    call.coll = coll;
    call.group = g->id;
    call.size = n;
    call.count = count;
    call.dtype = dtype;
    call.root = root;
    for (j = 0; j < n && j < MGT__LCOMM_SHOWN; j++) call.shown[j] = g->ranks[j];
    mgt__lcomm_call_text(&call, what, sizeof what);
    if (coll == MGT_COLL_ALL_REDUCE || coll == MGT_COLL_REDUCE_SCATTER) { /* hierarchically, where each process's members are contiguous */
        int *first = (int *)MGT_MALLOC(sizeof(int) * (size_t)(n + 1)), runs = first ? mgt__pcomm_runs(w, g, first) : 0;
        if (runs) {
            r = mgt__pcomm_chain(me, coll, g, src, dst, count, dtype, first, runs, what);
            MGT_FREE(first);
            goto done;
        }
        MGT_FREE(first);
    }
    req = (void **)MGT_MALLOC(sizeof(void *) * 2 * (size_t)n);
    peer = (int *)MGT_MALLOC(sizeof(int) * 2 * (size_t)n);
    from = (const void **)MGT_MALLOC(sizeof(void *) * (size_t)n);
    if ((coll == MGT_COLL_ALL_REDUCE || coll == MGT_COLL_REDUCE_SCATTER) && block) stage = (char *)MGT_MALLOC(block * (size_t)n);
    if (!req || !peer || !from || ((coll == MGT_COLL_ALL_REDUCE || coll == MGT_COLL_REDUCE_SCATTER) && block && !stage)) {
        r = mgt__fail(MGT_ERROR_MEMORY, "rank %d: out of memory for %s", c->rank, what);
        goto done;
    }
    r = MGT_OK;
    for (j = 0; j < n && r == MGT_OK; j++) {
        int q = g->ranks[j], pq = mgt__pcomm_process_of(w, q);
        const void *out = NULL;
        void *in = NULL;
        size_t out_bytes = block, in_bytes = block;
        char text[512];
        if (j == idx) continue;
        if (coll == MGT_COLL_ALL_REDUCE) { out = dst; in = stage + (size_t)j * block; }
        else if (coll == MGT_COLL_REDUCE_SCATTER) { out = (const char *)src + (size_t)j * block; in = stage + (size_t)j * block; }
        else if (coll == MGT_COLL_ALL_GATHER) { out = src; in = (char *)dst + (size_t)j * block; }
        else if (coll == MGT_COLL_BROADCAST) {
            if (idx == root) { out = dst; in_bytes = 0; }
            else if (j == root) { in = dst; out_bytes = 0; }
            else continue;
        } else { out_bytes = in_bytes = 0; }
        if (coll != MGT_COLL_BROADCAST || idx == root) {
            peer[nreq] = q;
            req[nreq] = mgt__pcomm_isend(w, out ? out : (const void *)&idx, out_bytes, pq, mgt__pcomm_tag(w, c->rank, q), MGT_MPI_COLLECTIVE, text, sizeof text);
            if (!req[nreq++]) r = mgt__fail(MGT_ERROR_COMM, "rank %d: %s: MPI_Isend: %s", c->rank, what, text);
        }
        if (r == MGT_OK && (coll != MGT_COLL_BROADCAST || j == root)) {
            int sink;
            peer[nreq] = q;
            req[nreq] = w->api->irecv(in ? in : (void *)&sink, in_bytes, pq, mgt__pcomm_tag(w, q, c->rank), MGT_MPI_COLLECTIVE, text, sizeof text);
            if (!req[nreq++]) r = mgt__fail(MGT_ERROR_COMM, "rank %d: %s: MPI_Irecv: %s", c->rank, what, text);
        }
    }
    if (r != MGT_OK) { /* the posted ones cannot complete any more */
        for (j = 0; j < nreq; j++) if (req[j]) w->api->cancel(req[j]);
        r = mgt__pcomm_fail(w, mgt_last_error());
        goto done;
    }
    {
        char who[32];
        snprintf(who, sizeof who, "rank %d", c->rank);
        r = mgt__pcomm_wait(w, who, req, peer, nreq, what);
    }
    if (r != MGT_OK) goto done;
    if (coll == MGT_COLL_ALL_REDUCE || coll == MGT_COLL_REDUCE_SCATTER) {
        const void *own = coll == MGT_COLL_ALL_REDUCE ? (const void *)dst : (const void *)((const char *)src + (size_t)idx * block);
        for (j = 0; j < n; j++) from[j] = j == idx ? own : stage + (size_t)j * block;
        if (count) mgt__lcomm_sum(from, n, 0, &dst, 1, 0, count, dtype);
    } else if (coll == MGT_COLL_ALL_GATHER && block && (char *)dst + (size_t)idx * block != (const char *)src)
        memmove((char *)dst + (size_t)idx * block, src, block);
done:
    MGT_FREE(req);
    MGT_FREE(peer);
    MGT_FREE((void *)from);
    MGT_FREE(stage);
    bytes = (double)block * (coll == MGT_COLL_REDUCE_SCATTER || coll == MGT_COLL_ALL_GATHER ? n : 1);
    return mgt__pcomm_count(me, coll, t0, r, coll == MGT_COLL_BARRIER ? 0 : bytes);
}

static mgt_result mgt__pcomm_all_reduce(mgt_comm *c, const mgt_group *g, void *buf, size_t count, int dtype) {
    return mgt__pcomm_collective(c, MGT_COLL_ALL_REDUCE, g, buf, buf, count, dtype, 0);
}
static mgt_result mgt__pcomm_reduce_scatter(mgt_comm *c, const mgt_group *g, const void *send, void *recv, size_t recv_count, int dtype) {
    return mgt__pcomm_collective(c, MGT_COLL_REDUCE_SCATTER, g, send, recv, recv_count, dtype, 0);
}
static mgt_result mgt__pcomm_all_gather(mgt_comm *c, const mgt_group *g, const void *send, void *recv, size_t send_count, int dtype) {
    return mgt__pcomm_collective(c, MGT_COLL_ALL_GATHER, g, send, recv, send_count, dtype, 0);
}
static mgt_result mgt__pcomm_broadcast(mgt_comm *c, const mgt_group *g, void *buf, size_t count, int dtype, int root_index) {
    return mgt__pcomm_collective(c, MGT_COLL_BROADCAST, g, buf, buf, count, dtype, root_index);
}
static mgt_result mgt__pcomm_barrier(mgt_comm *c, const mgt_group *g) {
    return mgt__pcomm_collective(c, MGT_COLL_BARRIER, g, NULL, NULL, 0, MGT_F32, 0);
}

/* what a send and a receive do first: a peer in this process (or none) is the in-process
   communicator's, which checks it; a failed world (after the send's finished sends are freed) or a
   missing buffer fails the call. 1 when the call is over (its result in *r), 0 when it goes to MPI */
static int mgt__pcomm_p2p_begin(mgt_comm *c, int is_recv, int peer, const void *buf, size_t count, int dtype, double t0, mgt_result *r) {
    mgt__pcomm_rank *me = (mgt__pcomm_rank *)c->impl;
    mgt__mpi_world *w = me->w;
    if (peer < 0 || peer >= w->world || mgt__pcomm_process_of(w, peer) == w->process) {
        *r = is_recv ? me->inner->recv(me->inner, peer, (void *)buf, count, dtype) : me->inner->send(me->inner, peer, buf, count, dtype);
        c->stats = me->inner->stats;
        return 1;
    }
    if (!is_recv && (*r = mgt__pcomm_reap(me)) != MGT_OK) *r = mgt__pcomm_count(me, MGT_COLL_SEND_RECV, t0, *r, 0);
    else if (mgt__pcomm_failed(w)) *r = mgt__pcomm_count(me, MGT_COLL_SEND_RECV, t0, mgt__pcomm_world_error(w), 0);
    else if (count && !buf)
        *r = mgt__pcomm_count(me, MGT_COLL_SEND_RECV, t0, mgt__fail(MGT_ERROR_ARGUMENT, "rank %d: %s: no buffer", c->rank, is_recv ? "recv" : "send"), 0);
    else return 0;
    return 1;
}

static mgt_result mgt__pcomm_send(mgt_comm *c, int peer, const void *buf, size_t count, int dtype) {
    mgt__pcomm_rank *me = (mgt__pcomm_rank *)c->impl;
    mgt__mpi_world *w = me->w;
    size_t bytes = count * mgt__lcomm_elt(dtype);
    double t0 = mgt_now();
    mgt__pcomm_msg *s;
    mgt_result r;
    char text[512], why[1024];
    if (mgt__pcomm_p2p_begin(c, 0, peer, buf, count, dtype, t0, &r)) return r;
    s = (mgt__pcomm_msg *)MGT_MALLOC(sizeof *s + bytes);
    if (!s) return mgt__pcomm_count(me, MGT_COLL_SEND_RECV, t0, mgt__fail(MGT_ERROR_MEMORY, "rank %d: out of memory for a send of %zu bytes", c->rank, bytes), 0);
    if (bytes) memcpy(s + 1, buf, bytes);
    s->request = mgt__pcomm_isend(w, s + 1, bytes, mgt__pcomm_process_of(w, peer), mgt__pcomm_tag(w, c->rank, peer), MGT_MPI_P2P, text, sizeof text);
    if (!s->request) {
        MGT_FREE(s);
        snprintf(why, sizeof why, "rank %d: send to rank %d: MPI_Isend: %s", c->rank, peer, text);
        return mgt__pcomm_count(me, MGT_COLL_SEND_RECV, t0, mgt__pcomm_fail(w, why), 0);
    }
    s->next = me->sends;
    me->sends = s;
    return mgt__pcomm_count(me, MGT_COLL_SEND_RECV, t0, MGT_OK, (double)bytes);
}

static mgt_result mgt__pcomm_recv(mgt_comm *c, int peer, void *buf, size_t count, int dtype) {
    mgt__pcomm_rank *me = (mgt__pcomm_rank *)c->impl;
    mgt__mpi_world *w = me->w;
    size_t bytes = count * mgt__lcomm_elt(dtype);
    double t0 = mgt_now();
    void *req;
    mgt_result r;
    char text[512], what[128];
    if (mgt__pcomm_p2p_begin(c, 1, peer, buf, count, dtype, t0, &r)) return r;
    req = w->api->irecv(buf, bytes, mgt__pcomm_process_of(w, peer), mgt__pcomm_tag(w, peer, c->rank), MGT_MPI_P2P, text, sizeof text);
    if (!req) {
        char why[1024];
        snprintf(why, sizeof why, "rank %d: recv from rank %d: MPI_Irecv: %s", c->rank, peer, text);
        return mgt__pcomm_count(me, MGT_COLL_SEND_RECV, t0, mgt__pcomm_fail(w, why), 0);
    }
    snprintf(what, sizeof what, "recv(from %d, %zu %s)", peer, count, mgt__lcomm_dtype_name(dtype));
    {
        char who[32];
        snprintf(who, sizeof who, "rank %d", c->rank);
        r = mgt__pcomm_wait(w, who, &req, &peer, 1, what);
    }
    return mgt__pcomm_count(me, MGT_COLL_SEND_RECV, t0, r, r == MGT_OK ? (double)bytes : 0);
}

/* the send is buffered, so the pair is the send, then the receive */
static mgt_result mgt__pcomm_sendrecv(mgt_comm *c, int send_peer, const void *send, int recv_peer, void *recv, size_t count, int dtype) {
    mgt_result r = mgt__pcomm_send(c, send_peer, send, count, dtype);
    return r == MGT_OK ? mgt__pcomm_recv(c, recv_peer, recv, count, dtype) : r;
}

/* this rank failed: this process's other ranks stop waiting (the in-process world fails them),
   and so do its MPI waits */
static void mgt__pcomm_rank_done(mgt_comm *c) {
    mgt__pcomm_rank *me;
    char why[1024];
    if (!c || !c->impl) return;
    me = (mgt__pcomm_rank *)c->impl;
    mgt__local_rank_done(me->inner);
    snprintf(why, sizeof why, "rank %d (process %d on %s) failed", c->rank, me->w->process, me->w->hosts[me->w->process]);
    mgt__pcomm_fail(me->w, why);
}

static void mgt__mpi_world_destroy(mgt__mpi_world *w) {
    int i;
    if (!w) return;
    for (i = 0; w->ranks && i < w->per; i++) {
        mgt__pcomm_rank *me = &w->ranks[i];
        double until = mgt_now() + 1;
        while (me->sends && mgt_now() < until && mgt__pcomm_reap(me) == MGT_OK) {}
        while (me->sends) { /* never received: the run failed */
            mgt__pcomm_msg *s = me->sends;
            me->sends = s->next;
            w->api->cancel(s->request);
            MGT_FREE(s);
        }
    }
    mgt__local_world_destroy(w->local);
    pthread_mutex_destroy(&w->mu);
    MGT_FREE(w->ranks);
    MGT_FREE(w->hosts);
    MGT_FREE(w);
}

/* `world` ranks over `processes` processes of `api` (started), this one `process`: a contiguous
   block each */
static mgt_result mgt__mpi_world_create(mgt__mpi_world **out, const mgt_mpi_api *api, int process, int processes, int world, double timeout_s) {
    mgt__mpi_world *w;
    mgt_result r;
    char why[512], host[64];
    int i;
    *out = NULL;
    if (processes < 1 || world % processes)
        return mgt__fail(MGT_ERROR_CONFIG, "%d ranks cannot be shared evenly by %d processes: run a multiple of the processes (dp x tp x pp)", world, processes);
    if ((double)world * world - 1 > (double)api->max_tag())
        return mgt__fail(MGT_ERROR_CONFIG, "%d ranks need MPI tags up to %.0f, this MPI's MPI_TAG_UB is %d", world, (double)world * world - 1, api->max_tag());
    w = (mgt__mpi_world *)MGT_MALLOC(sizeof *w);
    if (!w) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    w->api = api;
    w->process = process;
    w->processes = processes;
    w->world = world;
    w->per = world / processes;
    w->timeout_s = timeout_s;
    w->ranks = (mgt__pcomm_rank *)MGT_MALLOC(sizeof(mgt__pcomm_rank) * (size_t)w->per);
    w->hosts = (char(*)[64])MGT_MALLOC(64 * (size_t)processes);
    if (!w->ranks || !w->hosts) { mgt__mpi_world_destroy(w); return mgt__fail(MGT_ERROR_MEMORY, "out of memory"); }
    memset(w->ranks, 0, sizeof(mgt__pcomm_rank) * (size_t)w->per);
    if ((r = mgt__local_world_create(&w->local, world)) != MGT_OK) { mgt__mpi_world_destroy(w); return r; }
    memset(host, 0, sizeof host);
    mgt__strlcpy(host, mgt__mpi_host, sizeof host);
    if (api->allgather(host, w->hosts, sizeof host, why, sizeof why)) {
        mgt__mpi_world_destroy(w);
        return mgt__fail(MGT_ERROR_COMM, "exchanging host names between processes: MPI: %s", why);
    }
    for (i = 0; i < w->per; i++) {
        mgt__pcomm_rank *me = &w->ranks[i];
        me->w = w;
        me->inner = mgt__local_comm(w->local, process * w->per + i);
        me->comm.rank = process * w->per + i;
        me->comm.world = world;
        me->comm.all_reduce = mgt__pcomm_all_reduce;
        me->comm.reduce_scatter = mgt__pcomm_reduce_scatter;
        me->comm.all_gather = mgt__pcomm_all_gather;
        me->comm.broadcast = mgt__pcomm_broadcast;
        me->comm.send = mgt__pcomm_send;
        me->comm.recv = mgt__pcomm_recv;
        me->comm.sendrecv = mgt__pcomm_sendrecv;
        me->comm.barrier = mgt__pcomm_barrier;
        me->comm.impl = me;
    }
    *out = w;
    return MGT_OK;
}

/* this process's rank `rank` (global), or NULL */
static mgt_comm *mgt__mpi_comm(mgt__mpi_world *w, int rank) {
    return w && mgt__pcomm_process_of(w, rank) == w->process && rank >= 0 && rank < w->world ? &w->ranks[rank - w->process * w->per].comm : NULL;
}

/* after a step every process takes alike (reading a checkpoint, claiming the folder): every process
   fails when one did, naming it, so that none trains on waiting for a peer that left. One process
   (w NULL) agrees with itself. */
typedef struct mgt__mpi_outcome { int result; char error[500]; } mgt__mpi_outcome;
static mgt_result mgt__mpi_agree(mgt__mpi_world *w, mgt_result res, const char *doing) {
    mgt__mpi_outcome mine, *all;
    char why[512];
    int p;
    if (!w) return res;
    memset(&mine, 0, sizeof mine);
    mine.result = res;
    if (res != MGT_OK) mgt__strlcpy(mine.error, mgt_last_error(), sizeof mine.error);
    all = (mgt__mpi_outcome *)MGT_MALLOC(sizeof mine * (size_t)w->processes);
    if (!all) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    if (w->api->allgather(&mine, all, sizeof mine, why, sizeof why)) res = mgt__fail(MGT_ERROR_COMM, "%s: MPI: %s", doing, why);
    else
        for (p = 0; p < w->processes && res == MGT_OK; p++)
            if (all[p].result != MGT_OK) res = mgt__fail((mgt_result)all[p].result, "process %d (on %s), %s: %s", p, w->hosts[p], doing, all[p].error);
    MGT_FREE(all);
    return res;
}

/* ---- the world of CPU ranks over MPI processes (the table of src/world.c): the run's processes
   are the world, made before it (they decide which ranks are this process's) */
static mgt_result mgt__world_mpi_create(const mgt__world_args *a, void **world) {
    *world = a->procs;
    return MGT_OK;
}
static mgt_result mgt__world_mpi_comm(void *world, int rank, mgt_backend *be, const mgt_group *const *groups, int ngroups, mgt_comm **out) {
    (void)be, (void)groups, (void)ngroups;
    *out = mgt__mpi_comm((mgt__mpi_world *)world, rank);
    return MGT_OK;
}
static void mgt__world_mpi_rank_failed(void *world, mgt_comm *c) {
    (void)world;
    mgt__pcomm_rank_done(c);
}
static const mgt__world_api mgt__world_mpi = {
    "cpu", 0, 1, mgt__world_mpi_create, mgt__world_cpu_backend, mgt__world_cpu_backend_destroy, mgt__world_mpi_comm,
    NULL, NULL, mgt__world_mpi_rank_failed, NULL, NULL,
};

#else /* MGT_NO_MPI: one process; a launcher of several is refused, and what takes a process's role elsewhere is never reached */

static const mgt_mpi_api *mgt__mpi_api;
MGTDEF const mgt_mpi_api *mgt_mpi_load(char *why, size_t cap) {
    if (why && cap) mgt__strlcpy(why, "this program was built with MGT_NO_MPI (no MPI)", cap);
    return NULL;
}
MGTDEF void mgt_mpi_use(const mgt_mpi_api *api) { (void)api; }
MGTDEF mgt_result mgt_mpi_start(int *process, int *processes) {
    char launcher[64];
    int expected = mgt_mpi_launcher(launcher, sizeof launcher);
    if (!process || !processes) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_mpi_start: process and processes are required");
    *process = 0;
    *processes = 1;
    if (expected <= 1) return MGT_OK;
    return mgt__fail(MGT_ERROR_UNSUPPORTED, "started by an MPI launcher (%s=%d), but this program was built with MGT_NO_MPI: run it as one process, "
                                            "or build it without MGT_NO_MPI", launcher, expected);
}
MGTDEF void mgt_mpi_abort(int code) { (void)code; }
static mgt_result mgt__mpi_world_create(mgt__mpi_world **out, const mgt_mpi_api *api, int process, int processes, int world, double timeout_s) {
    (void)api, (void)process, (void)processes, (void)world, (void)timeout_s;
    *out = NULL;
    return mgt__fail(MGT_ERROR_UNSUPPORTED, "this program was built with MGT_NO_MPI");
}
static void mgt__mpi_world_destroy(mgt__mpi_world *w) { (void)w; }
static mgt_result mgt__mpi_agree(mgt__mpi_world *w, mgt_result res, const char *doing) {
    (void)w, (void)doing;
    return res;
}
static mgt_result mgt__pcomm_fail(mgt__mpi_world *w, const char *why) {
    (void)w;
    return mgt__fail(MGT_ERROR_COMM, "%s", why);
}
static mgt_result mgt__pcomm_wait(mgt__mpi_world *w, const char *who, void **req, const int *peer, int n, const char *what) {
    (void)w, (void)req, (void)peer, (void)n;
    return mgt__fail(MGT_ERROR_COMM, "%s: %s: built with MGT_NO_MPI", who, what);
}
static const mgt__world_api mgt__world_mpi = {"cpu", 0, 1, NULL, mgt__world_cpu_backend, mgt__world_cpu_backend_destroy, NULL, NULL, NULL, NULL, NULL, NULL};

#endif /* MGT_NO_MPI */
