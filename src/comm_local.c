/* src/comm_local.c - the in-process world of rank threads: collectives, messages, deadlock detection */
/* ---- communication: the in-process world of rank threads ---------------------------------------
   mgt__local_world runs `world` ranks as threads of this process, one mgt_comm each; a rank's
   comm is used by one thread at a time. All shared state sits behind one mutex; each rank sleeps
   on its own condition variable.
   Collectives meet in a rendezvous keyed by (group id, n-th collective of this rank on that
   group). Each member posts its call and its buffer pointers; the first member's call is the one
   the others must match (op, count, dtype, root, group members), otherwise the world fails.
   When the last member arrives, every member works outside the lock on its own part, reading the
   other members' buffers directly: all-reduce sums slice i of all buffers (member 0 + member 1 +
   ... in group order, in fp32, rounded once to the buffer type) and writes it into every buffer;
   reduce-scatter sums block i into its own recv; all-gather and broadcast copy into its own
   buffer. Members then wait for each other before returning, as their buffers are still in use
   until everyone is done. The result therefore does not depend on who arrives first.
   Send copies the data into a message queued for the receiver and returns; recv takes the oldest
   message from that peer, checking count and dtype against the send.
   Deadlocks: a rank waiting in a rendezvous waits for the members that have not arrived yet, a
   rank in recv for its peer. Whenever a rank starts waiting or finishes, the ranks that can still
   get on are marked (running ones, then waiting ones that wait for a marked one, until nothing
   changes); a waiting rank left unmarked can never be released, and the world fails naming every
   such rank's pending call. A failed world answers every pending and later call with
   MGT_ERROR_COMM at once (members already past the rendezvous finish their part first). */

#if defined(__GNUC__) || defined(__clang__)
#define MGT__LCOMM_UNUSED __attribute__((unused)) /* entry points the training code may not call yet */
#else
#define MGT__LCOMM_UNUSED
#endif
#ifndef MGT_COMM_TIMEOUT_S
/* beside MGT_IMPLEMENTATION: seconds one call may wait before the world fails (0: no limit); a
   safety net only, deadlocks are found at once */
#define MGT_COMM_TIMEOUT_S 120
#endif
#define MGT__LCOMM_HISTORY 8   /* calls remembered per rank, for messages */
#define MGT__LCOMM_SHOWN 16    /* group members spelled out in messages */
#define MGT__LCOMM_CHUNK 1024  /* elements summed per pass, in fp32 on the stack */

MGTDEF const char *mgt_coll_name(int coll) {
    static const char *const names[MGT_COLL_COUNT] = {"all-reduce", "reduce-scatter", "all-gather",
                                                      "broadcast",  "send/recv",      "barrier"};
    return coll >= 0 && coll < MGT_COLL_COUNT ? names[coll] : "unknown";
}
MGTDEF const char *mgt_group_kind_name(int kind) {
    static const char *const names[MGT_GROUP_KINDS] = MGT_GROUP_KIND_NAMES;
    return kind >= 0 && kind < MGT_GROUP_KINDS ? names[kind] : "other";
}

typedef struct mgt__local_world mgt__local_world;

typedef struct mgt__lcomm_call { /* one call, as messages describe it */
    long long number;           /* 1-based, counting every call of the rank */
    int coll, is_recv, peer;    /* peer: send/recv */
    int group, size, root;      /* collectives: group id, members, root index (broadcast) */
    int shown[MGT__LCOMM_SHOWN]; /* first members */
    size_t count;
    int dtype;
} mgt__lcomm_call;

typedef struct mgt__lcomm_msg { /* a buffered send; the data follows the struct */
    struct mgt__lcomm_msg *next;
    int from;
    mgt__lcomm_call call; /* the sender's */
    size_t bytes;
} mgt__lcomm_msg;

typedef struct mgt__lcomm_rv { /* one collective of one group */
    struct mgt__lcomm_rv *next;
    int group, size, first_rank;
    long long seq;
    mgt__lcomm_call first; /* the first member's call: the others must match it */
    int *ranks;           /* (size) group order, from the first member */
    unsigned char *here;  /* (size) member i has arrived */
    const void **src;     /* (size) member i's input */
    void **dst;           /* (size) member i's output */
    int arrived, joined, left, finished, complete;
} mgt__lcomm_rv;

enum { MGT__LCOMM_RUNNING, MGT__LCOMM_WAIT_RV, MGT__LCOMM_WAIT_RECV };

typedef struct mgt__lcomm_rank {
    mgt_comm comm;
    mgt__local_world *w;
    pthread_cond_t cv;
    int done, wait, wait_peer; /* wait: MGT__LCOMM_RUNNING or what it waits in */
    mgt__lcomm_rv *rv;          /* the rendezvous waited in */
    long long calls;
    mgt__lcomm_call history[MGT__LCOMM_HISTORY]; /* call n at [(n - 1) % MGT__LCOMM_HISTORY] */
    int *seq_group;                            /* (seq_n) groups used, and their next sequence */
    long long *seq_next;
    int seq_n, seq_cap;
    mgt__lcomm_msg *inbox; /* messages to this rank, oldest first */
} mgt__lcomm_rank;

struct mgt__local_world {
    int world, failed;
    pthread_mutex_t mu;
    mgt__lcomm_rank *ranks; /* (world) */
    mgt__lcomm_rv *rvs;     /* rendezvous in progress */
    unsigned char *mark;   /* (world) scratch, under mu */
    int *live;             /* (world) scratch, under mu */
    char why[4096];        /* the failure, once failed */
};

/* ---- element types */

static size_t mgt__lcomm_elt(int dtype) { return dtype == MGT_F64 ? 8 : dtype == MGT_F32 ? 4 : 2; }
static const char *mgt__lcomm_dtype_name(int dtype) {
    return dtype == MGT_F32 ? "f32" : dtype == MGT_BF16 ? "bf16" : dtype == MGT_F16 ? "f16" : dtype == MGT_F64 ? "f64" : "unknown-dtype";
}
static void mgt__lcomm_load(float *acc, const void *src, size_t n, int dtype) {
    size_t i;
    if (dtype == MGT_F32) { memcpy(acc, src, n * 4); return; }
    if (dtype == MGT_BF16) for (i = 0; i < n; i++) acc[i] = mgt__bf16_to_f32(((const uint16_t *)src)[i]);
    else for (i = 0; i < n; i++) acc[i] = mgt__f16_to_f32(((const uint16_t *)src)[i]);
}
static void mgt__lcomm_add(float *acc, const void *src, size_t n, int dtype) {
    size_t i;
    if (dtype == MGT_F32) for (i = 0; i < n; i++) acc[i] += ((const float *)src)[i];
    else if (dtype == MGT_BF16) for (i = 0; i < n; i++) acc[i] += mgt__bf16_to_f32(((const uint16_t *)src)[i]);
    else for (i = 0; i < n; i++) acc[i] += mgt__f16_to_f32(((const uint16_t *)src)[i]);
}
static void mgt__lcomm_store(void *dst, const float *acc, size_t n, int dtype) {
    size_t i;
    if (dtype == MGT_F32) memcpy(dst, acc, n * 4);
    else if (dtype == MGT_BF16) for (i = 0; i < n; i++) ((uint16_t *)dst)[i] = mgt__f32_to_bf16(acc[i]);
    else for (i = 0; i < n; i++) ((uint16_t *)dst)[i] = mgt__f32_to_f16(acc[i]);
}
/* dst[j][dst_off + e] = src[0][src_off + e] + src[1][src_off + e] + ..., in that order, for every
   j; each pass reads all sources before writing, so a destination may be one of the sources */
static void mgt__lcomm_sum(const void *const *src, int nsrc, size_t src_off, void *const *dst, int ndst,
                          size_t dst_off, size_t count, int dtype) {
    union { float f[MGT__LCOMM_CHUNK]; double d[MGT__LCOMM_CHUNK / 2]; } u;
    float *acc = u.f;
    size_t elt = mgt__lcomm_elt(dtype), done, m, e;
    int j;
    if (dtype == MGT_F64) { /* in fp64, in the same order */
        double *a = u.d;
        for (done = 0; done < count; done += m) {
            m = count - done < MGT__LCOMM_CHUNK / 2 ? count - done : MGT__LCOMM_CHUNK / 2;
            memcpy(a, (const double *)src[0] + src_off + done, m * 8);
            for (j = 1; j < nsrc; j++)
                for (e = 0; e < m; e++) a[e] += ((const double *)src[j])[src_off + done + e];
            for (j = 0; j < ndst; j++) memcpy((double *)dst[j] + dst_off + done, a, m * 8);
        }
        return;
    }
    for (done = 0; done < count; done += m) {
        m = count - done < MGT__LCOMM_CHUNK ? count - done : MGT__LCOMM_CHUNK;
        mgt__lcomm_load(acc, (const char *)src[0] + (src_off + done) * elt, m, dtype);
        for (j = 1; j < nsrc; j++) mgt__lcomm_add(acc, (const char *)src[j] + (src_off + done) * elt, m, dtype);
        for (j = 0; j < ndst; j++) mgt__lcomm_store((char *)dst[j] + (dst_off + done) * elt, acc, m, dtype);
    }
}

/* ---- messages */

static void mgt__lcomm_call_text(const mgt__lcomm_call *k, char *buf, size_t cap) {
    char members[MGT__LCOMM_SHOWN * 12 + 8];
    size_t n = 0;
    int i, shown = k->size < MGT__LCOMM_SHOWN ? k->size : MGT__LCOMM_SHOWN;
    unsigned long long count = (unsigned long long)k->count;
    if (k->coll == MGT_COLL_SEND_RECV) {
        snprintf(buf, cap, "%s(%s %d, %llu %s)", k->is_recv ? "recv" : "send", k->is_recv ? "from" : "to",
                 k->peer, count, mgt__lcomm_dtype_name(k->dtype));
        return;
    }
    members[0] = 0;
    for (i = 0; i < shown; i++) n += (size_t)snprintf(members + n, sizeof members - n, i ? " %d" : "%d", k->shown[i]);
    if (k->size > shown) snprintf(members + n, sizeof members - n, " ...");
    if (k->coll == MGT_COLL_BARRIER)
        snprintf(buf, cap, "barrier(group %d [%s])", k->group, members);
    else if (k->coll == MGT_COLL_BROADCAST)
        snprintf(buf, cap, "broadcast(group %d [%s], %llu %s, root %d)", k->group, members, count,
                 mgt__lcomm_dtype_name(k->dtype), k->root);
    else
        snprintf(buf, cap, "%s(group %d [%s], %llu %s)", mgt_coll_name(k->coll), k->group, members, count,
                 mgt__lcomm_dtype_name(k->dtype));
}
/* "rank 3 called all-reduce(...) as its call #17" */
static void mgt__lcomm_cat_call(char *buf, size_t cap, int rank, const char *verb, const mgt__lcomm_call *k) {
    char text[512];
    mgt__lcomm_call_text(k, text, sizeof text);
    mgt__catf(buf, cap, "rank %d %s %s as its call #%lld", rank, verb, text, k->number);
}
/* the calls of `rank` before call `before` that are still in its history */
static void mgt__lcomm_cat_history(mgt__local_world *w, char *buf, size_t cap, int rank, long long before) {
    const mgt__lcomm_rank *q = &w->ranks[rank];
    long long n, oldest = q->calls - MGT__LCOMM_HISTORY + 1, from = before - 4 > oldest ? before - 4 : oldest;
    char text[512];
    if (from < 1) from = 1;
    if (from >= before) return;
    mgt__catf(buf, cap, "; rank %d's calls before:", rank);
    for (n = from; n < before && n <= q->calls; n++) {
        mgt__lcomm_call_text(&q->history[(n - 1) % MGT__LCOMM_HISTORY], text, sizeof text);
        mgt__catf(buf, cap, " #%lld %s", n, text);
    }
}
/* under mu: the world fails (once) with `why`; everyone waiting wakes up */
static void mgt__lcomm_fail_world(mgt__local_world *w, const char *why) {
    int r;
    if (w->failed) return;
    w->failed = 1;
    snprintf(w->why, sizeof w->why, "%s", why);
    for (r = 0; r < w->world; r++) pthread_cond_broadcast(&w->ranks[r].cv);
}
static mgt_result mgt__lcomm_world_error(mgt__local_world *w) { return mgt__fail(MGT_ERROR_COMM, "%s", w->why); }

/* ---- deadlock detection, under mu */

static int mgt__lcomm_has_msg(const mgt__lcomm_rank *q, int from) {
    const mgt__lcomm_msg *m;
    for (m = q->inbox; m; m = m->next)
        if (m->from == from) return 1;
    return 0;
}
static int mgt__lcomm_blocked(const mgt__local_world *w, int r) {
    const mgt__lcomm_rank *q = &w->ranks[r];
    if (q->done) return 0;
    if (q->wait == MGT__LCOMM_WAIT_RV) return !q->rv->complete;
    if (q->wait == MGT__LCOMM_WAIT_RECV) return !mgt__lcomm_has_msg(q, q->wait_peer);
    return 0;
}
/* does blocked rank r wait for rank p? */
static int mgt__lcomm_waits_for(const mgt__local_world *w, int r, int p) {
    const mgt__lcomm_rank *q = &w->ranks[r];
    int i;
    if (q->wait == MGT__LCOMM_WAIT_RECV) return q->wait_peer == p;
    for (i = 0; i < q->rv->size; i++)
        if (q->rv->ranks[i] == p) return !q->rv->here[i];
    return 0;
}
/* Live ranks: the running ones, then every blocked rank that waits for a live one, to a fixed
   point; blocked ranks left over can never go on. Runs at every wait, so each sweep is linear: a
   rendezvous makes its waiting members live when one of its absent members is, a receive when its
   sender is (comparing every pair of ranks made a step of 2048 CPU ranks take 56 s instead of 1). */
static void mgt__lcomm_check_deadlock(mgt__local_world *w) {
    int r, p, i, changed = 1, dead = 0, first;
    const mgt__lcomm_rv *rv;
    char why[4096];
    for (r = 0; r < w->world; r++) w->live[r] = !w->ranks[r].done && !mgt__lcomm_blocked(w, r);
    while (changed) {
        changed = 0;
        for (rv = w->rvs; rv; rv = rv->next) {
            int absent_live = 0;
            if (rv->complete) continue;
            for (i = 0; i < rv->size && !absent_live; i++) absent_live = !rv->here[i] && w->live[rv->ranks[i]];
            for (i = 0; absent_live && i < rv->size; i++) {
                const mgt__lcomm_rank *q = &w->ranks[p = rv->ranks[i]];
                if (rv->here[i] && !w->live[p] && !q->done && q->wait == MGT__LCOMM_WAIT_RV && q->rv == rv) { w->live[p] = 1; changed = 1; }
            }
        }
        for (r = 0; r < w->world; r++) {
            const mgt__lcomm_rank *q = &w->ranks[r];
            if (!w->live[r] && !q->done && q->wait == MGT__LCOMM_WAIT_RECV && mgt__lcomm_blocked(w, r) && w->live[q->wait_peer]) {
                w->live[r] = 1;
                changed = 1;
            }
        }
    }
    for (r = 0; r < w->world; r++) dead += !w->live[r] && mgt__lcomm_blocked(w, r);
    if (!dead) return;
    snprintf(why, sizeof why, "communication can never complete (deadlock): ");
    for (r = 0, first = 1; r < w->world; r++) {
        const mgt__lcomm_rank *q = &w->ranks[r];
        if (w->live[r] || !mgt__lcomm_blocked(w, r)) continue;
        if (!first) mgt__catf(why, sizeof why, "; ");
        first = 0;
        mgt__lcomm_cat_call(why, sizeof why, r, "waits in", &q->history[(q->calls - 1) % MGT__LCOMM_HISTORY]);
        mgt__catf(why, sizeof why, " for");
        for (p = 0; p < w->world; p++) {
            if (!mgt__lcomm_waits_for(w, r, p)) continue;
            mgt__catf(why, sizeof why, " rank %d", p);
            if (w->ranks[p].done) mgt__catf(why, sizeof why, " (finished after call #%lld)", w->ranks[p].calls);
        }
    }
    for (r = 0; r < w->world; r++)
        if (!w->live[r] && mgt__lcomm_blocked(w, r)) mgt__lcomm_cat_history(w, why, sizeof why, r, w->ranks[r].calls);
    mgt__lcomm_fail_world(w, why);
}

/* under mu: one wait; 1 once the safety timeout has passed */
static int mgt__lcomm_sleep(mgt__local_world *w, mgt__lcomm_rank *me, struct timespec *deadline, int *armed) {
#if MGT_COMM_TIMEOUT_S > 0
    if (!*armed) {
        clock_gettime(CLOCK_REALTIME, deadline);
        deadline->tv_sec += MGT_COMM_TIMEOUT_S;
        *armed = 1;
    }
    return pthread_cond_timedwait(&me->cv, &w->mu, deadline) == ETIMEDOUT;
#else
    (void)deadline;
    (void)armed;
    pthread_cond_wait(&me->cv, &w->mu);
    return 0;
#endif
}
static void mgt__lcomm_timeout(mgt__local_world *w, mgt__lcomm_rank *me) {
    char why[1024];
    snprintf(why, sizeof why, "timeout: ");
    mgt__lcomm_cat_call(why, sizeof why, me->comm.rank, "waited", &me->history[(me->calls - 1) % MGT__LCOMM_HISTORY]);
    mgt__catf(why, sizeof why, " for %d s (MGT_COMM_TIMEOUT_S) while other ranks kept running", MGT_COMM_TIMEOUT_S);
    mgt__lcomm_fail_world(w, why);
}

/* ---- calls */

/* under mu: remember the call in the rank's history */
static mgt__lcomm_call *mgt__lcomm_record(mgt__lcomm_rank *me, int coll, int is_recv, const mgt_group *g, size_t count,
                                        int dtype, int root, int peer) {
    mgt__lcomm_call *k = &me->history[me->calls % MGT__LCOMM_HISTORY];
    int i;
    memset(k, 0, sizeof *k);
    k->number = ++me->calls;
    k->coll = coll;
    k->is_recv = is_recv;
    k->peer = peer;
    k->count = count;
    k->dtype = dtype;
    k->root = root;
    if (g) {
        k->group = g->id;
        k->size = g->size;
        for (i = 0; g->ranks && i < g->size && i < MGT__LCOMM_SHOWN; i++) k->shown[i] = g->ranks[i];
    }
    return k;
}
/* under mu: after recording; MGT_OK to go on, else this rank's error (the world has failed) */
static mgt_result mgt__lcomm_enter(mgt__local_world *w, mgt__lcomm_rank *me, const char *invalid) {
    char why[1024];
    if (w->failed) return mgt__lcomm_world_error(w);
    if (invalid || me->done) {
        snprintf(why, sizeof why, "invalid call: ");
        mgt__lcomm_cat_call(why, sizeof why, me->comm.rank, "called", &me->history[(me->calls - 1) % MGT__LCOMM_HISTORY]);
        mgt__catf(why, sizeof why, ": %s", invalid ? invalid : "after mgt__local_rank_done");
        mgt__lcomm_fail_world(w, why);
        return mgt__fail(invalid ? MGT_ERROR_ARGUMENT : MGT_ERROR_COMM, "%s", w->why);
    }
    return MGT_OK;
}
static void mgt__lcomm_check_args(const mgt__lcomm_rank *me, size_t count, int dtype, size_t mult, int bufs_ok,
                                 char *invalid, size_t cap) {
    if (dtype != MGT_F32 && dtype != MGT_BF16 && dtype != MGT_F16 && dtype != MGT_F64)
        snprintf(invalid, cap, "dtype %d is not MGT_F32, MGT_BF16, MGT_F16 or MGT_F64", dtype);
    else if (count > ((size_t)-1 - sizeof(mgt__lcomm_msg)) / mgt__lcomm_elt(dtype) / mult)
        snprintf(invalid, cap, "count %llu is too large", (unsigned long long)count);
    else if (count && !bufs_ok)
        snprintf(invalid, cap, "a buffer is NULL");
    (void)me;
}
static void mgt__lcomm_check_group(mgt__local_world *w, const mgt__lcomm_rank *me, const mgt_group *g, char *invalid,
                                  size_t cap) {
    int i;
    if (!g || !g->ranks) { snprintf(invalid, cap, "no group"); return; }
    if (g->size < 1 || g->size > w->world) { snprintf(invalid, cap, "group size %d is not in 1..%d", g->size, w->world); return; }
    if (g->index < 0 || g->index >= g->size || g->ranks[g->index] != me->comm.rank) {
        snprintf(invalid, cap, "this rank is not member %d of the group", g->index);
        return;
    }
    for (i = 0; i < g->size; i++)
        if (g->ranks[i] < 0 || g->ranks[i] >= w->world) {
            snprintf(invalid, cap, "member %d is rank %d, outside the world of %d", i, g->ranks[i], w->world);
            return;
        }
    for (i = 0; i < g->size && !invalid[0]; i++) {
        if (w->mark[g->ranks[i]]) snprintf(invalid, cap, "rank %d is listed twice", g->ranks[i]);
        w->mark[g->ranks[i]] = 1;
    }
    for (i = 0; i < g->size; i++) w->mark[g->ranks[i]] = 0;
}
/* under mu: the sequence number of this rank's next collective on group id; -1 when out of memory */
static long long mgt__lcomm_next_seq(mgt__lcomm_rank *me, int group) {
    int i;
    for (i = 0; i < me->seq_n; i++)
        if (me->seq_group[i] == group) return me->seq_next[i]++;
    if (me->seq_n == me->seq_cap) {
        int cap = me->seq_cap ? 2 * me->seq_cap : 8;
        int *ids = (int *)MGT_MALLOC(sizeof(int) * (size_t)cap);
        long long *next = (long long *)MGT_MALLOC(sizeof(long long) * (size_t)cap);
        if (!ids || !next) { MGT_FREE(ids); MGT_FREE(next); return -1; }
        if (me->seq_n) {
            memcpy(ids, me->seq_group, sizeof(int) * (size_t)me->seq_n);
            memcpy(next, me->seq_next, sizeof(long long) * (size_t)me->seq_n);
        }
        MGT_FREE(me->seq_group);
        MGT_FREE(me->seq_next);
        me->seq_group = ids;
        me->seq_next = next;
        me->seq_cap = cap;
    }
    me->seq_group[me->seq_n] = group;
    me->seq_next[me->seq_n++] = 1;
    return 0;
}
static mgt__lcomm_rv *mgt__lcomm_rv_new(int size) {
    size_t bytes = sizeof(mgt__lcomm_rv) + (size_t)size * (sizeof(int) + 2 * sizeof(void *) + 1);
    mgt__lcomm_rv *rv = (mgt__lcomm_rv *)MGT_MALLOC(bytes);
    if (!rv) return NULL;
    memset(rv, 0, bytes);
    rv->size = size;
    rv->src = (const void **)(void *)(rv + 1);
    rv->dst = (void **)(rv->src + size);
    rv->ranks = (int *)(void *)(rv->dst + size);
    rv->here = (unsigned char *)(rv->ranks + size);
    return rv;
}
/* under mu: a member is done with rv; the last one frees it */
static void mgt__lcomm_rv_leave(mgt__local_world *w, mgt__lcomm_rv *rv) {
    mgt__lcomm_rv **p;
    if (++rv->left < rv->joined || !(rv->complete || w->failed)) return;
    for (p = &w->rvs; *p != rv; p = &(*p)->next) {}
    *p = rv->next;
    MGT_FREE(rv);
}
static int mgt__lcomm_rv_matches(const mgt__lcomm_rv *rv, const mgt__lcomm_call *k, const mgt_group *g) {
    const mgt__lcomm_call *f = &rv->first;
    int i;
    if (f->coll != k->coll || f->count != k->count || f->dtype != k->dtype || g->size != rv->size) return 0;
    if (k->coll == MGT_COLL_BROADCAST && f->root != k->root) return 0;
    for (i = 0; i < g->size; i++)
        if (g->ranks[i] != rv->ranks[i]) return 0;
    return 1;
}
/* outside mu, once every member has arrived: this member's part of the work */
static void mgt__lcomm_work(const mgt__lcomm_rv *rv, int index, int coll, size_t count, int dtype, int root) {
    size_t elt = mgt__lcomm_elt(dtype), n = (size_t)rv->size, i = (size_t)index;
    size_t j;
    if (coll == MGT_COLL_ALL_REDUCE) { /* slice i of every buffer */
        size_t per = count / n, extra = count % n, lo = per * i + (i < extra ? i : extra);
        mgt__lcomm_sum((const void *const *)rv->dst, rv->size, lo, rv->dst, rv->size, lo, per + (i < extra), dtype);
    } else if (coll == MGT_COLL_REDUCE_SCATTER) { /* block i of every send buffer into my recv */
        mgt__lcomm_sum(rv->src, rv->size, i * count, rv->dst + i, 1, 0, count, dtype);
    } else if (coll == MGT_COLL_ALL_GATHER) {
        for (j = 0; j < n && count; j++) {
            char *to = (char *)rv->dst[i] + j * count * elt;
            if ((const void *)to != rv->src[j]) memcpy(to, rv->src[j], count * elt);
        }
    } else if (coll == MGT_COLL_BROADCAST) {
        if (index != root && count && rv->dst[i] != rv->dst[root]) memcpy(rv->dst[i], rv->dst[root], count * elt);
    }
}
static mgt_result mgt__lcomm_finish(mgt_comm *c, int coll, double t0, mgt_result r, double bytes) {
    c->stats.calls[coll]++;
    c->stats.seconds[coll] += mgt_now() - t0;
    if (r == MGT_OK) c->stats.bytes[coll] += bytes;
    return r;
}

static mgt_result mgt__lcomm_collective(mgt_comm *c, int coll, const mgt_group *g, const void *src, void *dst,
                                       size_t count, int dtype, int root) {
    double t0 = mgt_now(), bytes;
    mgt__lcomm_rank *me;
    mgt__local_world *w;
    mgt__lcomm_rv *rv;
    mgt__lcomm_call call;
    mgt_result r;
    char invalid[256], why[2048];
    struct timespec deadline;
    int i, n, armed = 0, timed_out = 0;
    long long seq;
    if (!c || !c->impl) return mgt__fail(MGT_ERROR_ARGUMENT, "%s: no communicator", mgt_coll_name(coll));
    me = (mgt__lcomm_rank *)c->impl;
    w = me->w;
    invalid[0] = 0;
    pthread_mutex_lock(&w->mu);
    call = *mgt__lcomm_record(me, coll, 0, g, count, dtype, root, -1);
    mgt__lcomm_check_group(w, me, g, invalid, sizeof invalid);
    if (!invalid[0])
        mgt__lcomm_check_args(me, count, dtype, (size_t)g->size, coll == MGT_COLL_BARRIER || (dst && src), invalid,
                              sizeof invalid);
    if (!invalid[0] && coll == MGT_COLL_BROADCAST && (root < 0 || root >= g->size))
        snprintf(invalid, sizeof invalid, "root %d is not a member index in 0..%d", root, g->size - 1);
    r = mgt__lcomm_enter(w, me, invalid[0] ? invalid : NULL);
    if (r != MGT_OK) { pthread_mutex_unlock(&w->mu); return mgt__lcomm_finish(c, coll, t0, r, 0); }
    n = g->size;
    bytes = (double)count * (double)mgt__lcomm_elt(dtype) * (coll == MGT_COLL_REDUCE_SCATTER || coll == MGT_COLL_ALL_GATHER ? n : 1);
    if (coll == MGT_COLL_BARRIER) bytes = 0;
    if (n == 1) { /* nothing to wait for */
        pthread_mutex_unlock(&w->mu);
        if ((coll == MGT_COLL_REDUCE_SCATTER || coll == MGT_COLL_ALL_GATHER) && count && src != dst)
            memmove(dst, src, count * mgt__lcomm_elt(dtype));
        return mgt__lcomm_finish(c, coll, t0, MGT_OK, bytes);
    }
    seq = mgt__lcomm_next_seq(me, g->id);
    for (rv = w->rvs; rv && !(rv->group == g->id && rv->seq == seq); rv = rv->next) {}
    if (seq < 0 || (!rv && !(rv = mgt__lcomm_rv_new(n)))) {
        snprintf(why, sizeof why, "out of memory: ");
        mgt__lcomm_cat_call(why, sizeof why, me->comm.rank, "called", &call);
        mgt__lcomm_fail_world(w, why);
        r = mgt__lcomm_world_error(w);
        pthread_mutex_unlock(&w->mu);
        return mgt__lcomm_finish(c, coll, t0, r, 0);
    }
    if (rv->joined == 0) { /* new: this member's call is the reference */
        rv->group = g->id;
        rv->seq = seq;
        rv->first = call;
        rv->first_rank = me->comm.rank;
        memcpy(rv->ranks, g->ranks, sizeof(int) * (size_t)n);
        rv->next = w->rvs;
        w->rvs = rv;
    } else if (!mgt__lcomm_rv_matches(rv, &call, g)) {
        snprintf(why, sizeof why, "mismatched collectives (the members of a group must make the same calls in the same order): ");
        mgt__lcomm_cat_call(why, sizeof why, rv->first_rank, "called", &rv->first);
        mgt__catf(why, sizeof why, ", ");
        mgt__lcomm_cat_call(why, sizeof why, me->comm.rank, "called", &call);
        mgt__lcomm_cat_history(w, why, sizeof why, rv->first_rank, rv->first.number);
        mgt__lcomm_cat_history(w, why, sizeof why, me->comm.rank, call.number);
        mgt__lcomm_fail_world(w, why);
        r = mgt__lcomm_world_error(w);
        pthread_mutex_unlock(&w->mu);
        return mgt__lcomm_finish(c, coll, t0, r, 0);
    }
    rv->here[g->index] = 1;
    rv->src[g->index] = src;
    rv->dst[g->index] = dst;
    rv->joined++;
    if (++rv->arrived == n) {
        rv->complete = 1;
        for (i = 0; i < n; i++) pthread_cond_broadcast(&w->ranks[rv->ranks[i]].cv);
    } else {
        me->wait = MGT__LCOMM_WAIT_RV;
        me->rv = rv;
        mgt__lcomm_check_deadlock(w);
        while (!rv->complete && !w->failed) {
            if (timed_out) mgt__lcomm_timeout(w, me);
            else timed_out = mgt__lcomm_sleep(w, me, &deadline, &armed);
        }
        me->wait = MGT__LCOMM_RUNNING;
        me->rv = NULL;
        if (!rv->complete) { /* failed: nobody touches this member's buffers any more */
            mgt__lcomm_rv_leave(w, rv);
            r = mgt__lcomm_world_error(w);
            pthread_mutex_unlock(&w->mu);
            return mgt__lcomm_finish(c, coll, t0, r, 0);
        }
    }
    pthread_mutex_unlock(&w->mu);
    mgt__lcomm_work(rv, g->index, coll, count, dtype, root);
    pthread_mutex_lock(&w->mu);
    if (++rv->finished == n)
        for (i = 0; i < n; i++) pthread_cond_broadcast(&w->ranks[rv->ranks[i]].cv);
    while (rv->finished < n) pthread_cond_wait(&me->cv, &w->mu); /* the others still use my buffers */
    mgt__lcomm_rv_leave(w, rv);
    pthread_mutex_unlock(&w->mu);
    return mgt__lcomm_finish(c, coll, t0, MGT_OK, bytes);
}

static mgt_result mgt__lcomm_all_reduce(mgt_comm *c, const mgt_group *g, void *buf, size_t count, int dtype) {
    return mgt__lcomm_collective(c, MGT_COLL_ALL_REDUCE, g, buf, buf, count, dtype, 0);
}
static mgt_result mgt__lcomm_reduce_scatter(mgt_comm *c, const mgt_group *g, const void *send, void *recv,
                                           size_t recv_count, int dtype) {
    return mgt__lcomm_collective(c, MGT_COLL_REDUCE_SCATTER, g, send, recv, recv_count, dtype, 0);
}
static mgt_result mgt__lcomm_all_gather(mgt_comm *c, const mgt_group *g, const void *send, void *recv,
                                       size_t send_count, int dtype) {
    return mgt__lcomm_collective(c, MGT_COLL_ALL_GATHER, g, send, recv, send_count, dtype, 0);
}
static mgt_result mgt__lcomm_broadcast(mgt_comm *c, const mgt_group *g, void *buf, size_t count, int dtype,
                                      int root_index) {
    return mgt__lcomm_collective(c, MGT_COLL_BROADCAST, g, buf, buf, count, dtype, root_index);
}
static mgt_result mgt__lcomm_barrier(mgt_comm *c, const mgt_group *g) {
    return mgt__lcomm_collective(c, MGT_COLL_BARRIER, g, NULL, NULL, 0, MGT_F32, 0);
}

static mgt_result mgt__lcomm_send(mgt_comm *c, int peer, const void *buf, size_t count, int dtype) {
    double t0 = mgt_now();
    mgt__lcomm_rank *me;
    mgt__local_world *w;
    mgt__lcomm_msg *m = NULL, **tail;
    mgt__lcomm_call *k;
    mgt_result r;
    char invalid[256], why[2048];
    size_t bytes = 0;
    if (!c || !c->impl) return mgt__fail(MGT_ERROR_ARGUMENT, "send: no communicator");
    me = (mgt__lcomm_rank *)c->impl;
    w = me->w;
    invalid[0] = 0;
    mgt__lcomm_check_args(me, count, dtype, 1, buf != NULL, invalid, sizeof invalid);
    if (!invalid[0] && (peer < 0 || peer >= w->world)) snprintf(invalid, sizeof invalid, "peer %d is outside the world of %d", peer, w->world);
    if (!invalid[0]) {
        bytes = count * mgt__lcomm_elt(dtype);
        m = (mgt__lcomm_msg *)MGT_MALLOC(sizeof *m + bytes);
        if (m && bytes) memcpy(m + 1, buf, bytes);
    }
    pthread_mutex_lock(&w->mu);
    k = mgt__lcomm_record(me, MGT_COLL_SEND_RECV, 0, NULL, count, dtype, 0, peer);
    r = mgt__lcomm_enter(w, me, invalid[0] ? invalid : NULL);
    if (r == MGT_OK && (!m || w->ranks[peer].done)) {
        snprintf(why, sizeof why, "%s: ", m ? "send to a finished rank" : "out of memory");
        mgt__lcomm_cat_call(why, sizeof why, me->comm.rank, "called", k);
        if (m) mgt__catf(why, sizeof why, ", but rank %d has finished after call #%lld", peer, w->ranks[peer].calls);
        mgt__lcomm_fail_world(w, why);
        r = mgt__lcomm_world_error(w);
    }
    if (r == MGT_OK) {
        m->next = NULL;
        m->from = me->comm.rank;
        m->call = *k;
        m->bytes = bytes;
        for (tail = &w->ranks[peer].inbox; *tail; tail = &(*tail)->next) {}
        *tail = m;
        m = NULL;
        pthread_cond_broadcast(&w->ranks[peer].cv);
    }
    pthread_mutex_unlock(&w->mu);
    MGT_FREE(m);
    return mgt__lcomm_finish(c, MGT_COLL_SEND_RECV, t0, r, (double)bytes);
}

static mgt_result mgt__lcomm_recv(mgt_comm *c, int peer, void *buf, size_t count, int dtype);
/* the send is buffered here, so the pair is the send, then the receive */
static mgt_result mgt__lcomm_sendrecv(mgt_comm *c, int send_peer, const void *send, int recv_peer, void *recv, size_t count, int dtype) {
    mgt_result r = mgt__lcomm_send(c, send_peer, send, count, dtype);
    return r == MGT_OK ? mgt__lcomm_recv(c, recv_peer, recv, count, dtype) : r;
}

static mgt_result mgt__lcomm_recv(mgt_comm *c, int peer, void *buf, size_t count, int dtype) {
    double t0 = mgt_now();
    mgt__lcomm_rank *me;
    mgt__local_world *w;
    mgt__lcomm_msg *m = NULL, **p;
    mgt__lcomm_call call;
    mgt_result r;
    char invalid[256], why[2048];
    struct timespec deadline;
    int armed = 0, timed_out = 0;
    if (!c || !c->impl) return mgt__fail(MGT_ERROR_ARGUMENT, "recv: no communicator");
    me = (mgt__lcomm_rank *)c->impl;
    w = me->w;
    invalid[0] = 0;
    mgt__lcomm_check_args(me, count, dtype, 1, buf != NULL, invalid, sizeof invalid);
    if (!invalid[0] && (peer < 0 || peer >= w->world)) snprintf(invalid, sizeof invalid, "peer %d is outside the world of %d", peer, w->world);
    pthread_mutex_lock(&w->mu);
    call = *mgt__lcomm_record(me, MGT_COLL_SEND_RECV, 1, NULL, count, dtype, 0, peer);
    r = mgt__lcomm_enter(w, me, invalid[0] ? invalid : NULL);
    while (r == MGT_OK) {
        if (w->failed) { r = mgt__lcomm_world_error(w); break; }
        for (p = &me->inbox; *p && (*p)->from != peer; p = &(*p)->next) {}
        if (*p) {
            if ((*p)->call.count != count || (*p)->call.dtype != dtype) {
                snprintf(why, sizeof why, "mismatched send/recv: ");
                mgt__lcomm_cat_call(why, sizeof why, peer, "called", &(*p)->call);
                mgt__catf(why, sizeof why, ", ");
                mgt__lcomm_cat_call(why, sizeof why, me->comm.rank, "called", &call);
                mgt__lcomm_fail_world(w, why);
                continue;
            }
            m = *p;
            *p = m->next;
            break;
        }
        if (timed_out) { mgt__lcomm_timeout(w, me); continue; }
        me->wait = MGT__LCOMM_WAIT_RECV;
        me->wait_peer = peer;
        mgt__lcomm_check_deadlock(w);
        if (!w->failed) timed_out = mgt__lcomm_sleep(w, me, &deadline, &armed);
        me->wait = MGT__LCOMM_RUNNING;
    }
    pthread_mutex_unlock(&w->mu);
    if (m) {
        if (m->bytes) memcpy(buf, m + 1, m->bytes);
        MGT_FREE(m);
    }
    return mgt__lcomm_finish(c, MGT_COLL_SEND_RECV, t0, r, r == MGT_OK ? (double)count * (double)mgt__lcomm_elt(dtype) : 0);
}

/* ---- the world */

MGT__LCOMM_UNUSED static void mgt__local_world_destroy(mgt__local_world *w) {
    int r;
    if (!w) return;
    while (w->rvs) {
        mgt__lcomm_rv *rv = w->rvs;
        w->rvs = rv->next;
        MGT_FREE(rv);
    }
    for (r = 0; w->ranks && r < w->world; r++) {
        mgt__lcomm_rank *q = &w->ranks[r];
        while (q->inbox) {
            mgt__lcomm_msg *m = q->inbox;
            q->inbox = m->next;
            MGT_FREE(m);
        }
        MGT_FREE(q->seq_group);
        MGT_FREE(q->seq_next);
        pthread_cond_destroy(&q->cv);
    }
    pthread_mutex_destroy(&w->mu);
    MGT_FREE(w->ranks);
    MGT_FREE(w->mark);
    MGT_FREE(w->live);
    MGT_FREE(w);
}

MGT__LCOMM_UNUSED static mgt_result mgt__local_world_create(mgt__local_world **out, int world) {
    mgt__local_world *w;
    int r;
    if (!out) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt__local_world_create: out is required");
    *out = NULL;
    if (world < 1 || world > 65536) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt__local_world_create: world = %d is not in 1..65536", world);
    w = (mgt__local_world *)MGT_MALLOC(sizeof *w);
    if (!w) return mgt__fail(MGT_ERROR_MEMORY, "out of memory for a world of %d ranks", world);
    memset(w, 0, sizeof *w);
    w->ranks = (mgt__lcomm_rank *)MGT_MALLOC(sizeof(mgt__lcomm_rank) * (size_t)world);
    w->mark = (unsigned char *)MGT_MALLOC((size_t)world);
    w->live = (int *)MGT_MALLOC(sizeof(int) * (size_t)world);
    if (!w->ranks || !w->mark || !w->live) {
        MGT_FREE(w->ranks);
        MGT_FREE(w->mark);
        MGT_FREE(w->live);
        MGT_FREE(w);
        return mgt__fail(MGT_ERROR_MEMORY, "out of memory for a world of %d ranks", world);
    }
    memset(w->ranks, 0, sizeof(mgt__lcomm_rank) * (size_t)world);
    memset(w->mark, 0, (size_t)world);
    w->world = world;
    pthread_mutex_init(&w->mu, NULL);
    for (r = 0; r < world; r++) {
        mgt__lcomm_rank *q = &w->ranks[r];
        q->w = w;
        pthread_cond_init(&q->cv, NULL);
        q->comm.rank = r;
        q->comm.world = world;
        q->comm.all_reduce = mgt__lcomm_all_reduce;
        q->comm.reduce_scatter = mgt__lcomm_reduce_scatter;
        q->comm.all_gather = mgt__lcomm_all_gather;
        q->comm.broadcast = mgt__lcomm_broadcast;
        q->comm.send = mgt__lcomm_send;
        q->comm.sendrecv = mgt__lcomm_sendrecv;
        q->comm.recv = mgt__lcomm_recv;
        q->comm.barrier = mgt__lcomm_barrier;
        q->comm.impl = q;
    }
    *out = w;
    return MGT_OK;
}

MGT__LCOMM_UNUSED static mgt_comm *mgt__local_comm(mgt__local_world *w, int rank) {
    return w && rank >= 0 && rank < w->world ? &w->ranks[rank].comm : NULL;
}

/* this rank will make no more calls (it finished or failed): peers waiting for it get an error */
MGT__LCOMM_UNUSED static void mgt__local_rank_done(mgt_comm *c) {
    mgt__lcomm_rank *me;
    mgt__local_world *w;
    char why[2048];
    if (!c || !c->impl) return;
    me = (mgt__lcomm_rank *)c->impl;
    w = me->w;
    pthread_mutex_lock(&w->mu);
    if (!me->done) {
        me->done = 1;
        me->wait = MGT__LCOMM_RUNNING;
        if (!w->failed && me->inbox) {
            snprintf(why, sizeof why, "rank %d finished after call #%lld without receiving what ", me->comm.rank, me->calls);
            mgt__lcomm_cat_call(why, sizeof why, me->inbox->from, "sent in", &me->inbox->call);
            mgt__lcomm_fail_world(w, why);
        } else if (!w->failed) {
            mgt__lcomm_check_deadlock(w);
        }
    }
    pthread_mutex_unlock(&w->mu);
}


/* ---- the world of rank threads in this process (the table of src/world.c) */
static mgt_result mgt__world_local_create(const mgt__world_args *a, void **world) {
    mgt__local_world *w = NULL;
    mgt_result res = mgt__local_world_create(&w, a->world);
    *world = w;
    return res;
}
static mgt_result mgt__world_local_comm(void *world, int rank, mgt_backend *be, const mgt_group *const *groups, int ngroups, mgt_comm **out) {
    (void)be, (void)groups, (void)ngroups;
    *out = mgt__local_comm((mgt__local_world *)world, rank);
    return MGT_OK;
}
static void mgt__world_local_rank_failed(void *world, mgt_comm *c) {
    (void)world;
    mgt__local_rank_done(c);
}
static void mgt__world_local_destroy(void *world) { mgt__local_world_destroy((mgt__local_world *)world); }
static const mgt__world_api mgt__world_local = {
    "cpu", 0, 1, mgt__world_local_create, mgt__world_cpu_backend, mgt__world_cpu_backend_destroy, mgt__world_local_comm,
    NULL, NULL, mgt__world_local_rank_failed, NULL, mgt__world_local_destroy,
};
