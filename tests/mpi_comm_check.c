/* tests/mpi_comm_check.c: the two-level communicator (section 3c2 of mgt.h) against the
   in-process one, bit for bit. Run under mpirun by tests/test_mpi.sh: each process runs the whole
   world of 8 ranks as threads on the in-process communicator (the reference), then its own block
   of ranks on the two-level one, and compares its ranks' results and statistics (calls, bytes).
   Groups: the world, TP-like pairs, a strided group, and one whose group order is not the rank
   order; all-reduce, reduce-scatter (in place too), all-gather (in place too), broadcast from
   every root, barrier, in f32 (values spanning magnitudes, so the order of additions shows), bf16,
   f16 and f64, counts that are odd and larger than one summing pass; send/recv and sendrecv
   rings. Prints one line per process; exit 0 when all pass. Without a launcher it checks one
   process against itself. */
#define MGT_IMPLEMENTATION
#include "mgt.h"

#define W 8
#define NGROUPS 5
enum { COUNT_A = 1, COUNT_B = 1029, COUNT_C = 3001 };

static int group_ranks[NGROUPS][W] = {{0, 1, 2, 3, 4, 5, 6, 7}, {0, 1}, {6, 7}, {0, 2, 4, 6}, {7, 1, 6, 0}};
static int group_size[NGROUPS] = {8, 2, 2, 4, 4};

typedef struct task {
    mgt_comm *comm;
    int rank;
    unsigned char *out; /* everything this rank received, in order */
    size_t used, cap;
    mgt_result result;
} task;

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
static void fill(void *buf, size_t n, int dtype, int rank, uint64_t seed) {
    size_t e;
    for (e = 0; e < n; e++) {
        uint64_t h = mix(seed * 1000003u + (uint64_t)rank * 7919u + e);
        double v = ldexp((double)(h % 2000001) / 1e6 - 1, (int)((h >> 32) % 31) - 15);
        if (dtype == MGT_F32) ((float *)buf)[e] = (float)v;
        else if (dtype == MGT_F64) ((double *)buf)[e] = v;
        else if (dtype == MGT_BF16) ((uint16_t *)buf)[e] = mgt__f32_to_bf16((float)v);
        else ((uint16_t *)buf)[e] = mgt__f32_to_f16((float)(v / 65536));
    }
}
static void keep(task *t, const void *p, size_t bytes) {
    if (t->used + bytes > t->cap) {
        t->cap = 2 * (t->used + bytes);
        t->out = (unsigned char *)realloc(t->out, t->cap);
    }
    memcpy(t->out + t->used, p, bytes);
    t->used += bytes;
}

static void *rank_main(void *arg) {
    task *t = (task *)arg;
    mgt_comm *c = t->comm;
    static const int dtypes[4] = {MGT_F32, MGT_BF16, MGT_F16, MGT_F64};
    static const size_t counts[3] = {COUNT_A, COUNT_B, COUNT_C};
    int gi, di, ci, i, root;
    uint64_t seed = 1;
    t->result = MGT_OK;
    for (gi = 0; gi < NGROUPS; gi++) {
        mgt_group g;
        g.id = gi;
        g.size = group_size[gi];
        g.ranks = group_ranks[gi];
        for (g.index = -1, i = 0; i < g.size; i++) if (g.ranks[i] == t->rank) g.index = i;
        if (g.index < 0) continue;
        for (di = 0; di < 4; di++)
            for (ci = 0; ci < 3; ci++) {
                int dt = dtypes[di];
                size_t n = counts[ci], elt = dt == MGT_F64 ? 8 : dt == MGT_F32 ? 4 : 2, all = n * (size_t)g.size;
                unsigned char *a = (unsigned char *)malloc(all * elt), *b = (unsigned char *)malloc(all * elt);
                mgt_result r;
                seed++;
                fill(a, n, dt, t->rank, seed);
                if ((r = c->all_reduce(c, &g, a, n, dt)) != MGT_OK) goto fail;
                keep(t, a, n * elt);
                fill(a, all, dt, t->rank, seed + 100);
                if ((r = c->reduce_scatter(c, &g, a, b, n, dt)) != MGT_OK) goto fail;
                keep(t, b, n * elt);
                fill(a, all, dt, t->rank, seed + 200); /* in place: recv is this member's own block */
                if ((r = c->reduce_scatter(c, &g, a, a + (size_t)g.index * n * elt, n, dt)) != MGT_OK) goto fail;
                keep(t, a + (size_t)g.index * n * elt, n * elt);
                fill(a, n, dt, t->rank, seed + 300);
                if ((r = c->all_gather(c, &g, a, b, n, dt)) != MGT_OK) goto fail;
                keep(t, b, all * elt);
                fill(b + (size_t)g.index * n * elt, n, dt, t->rank, seed + 400);
                if ((r = c->all_gather(c, &g, b + (size_t)g.index * n * elt, b, n, dt)) != MGT_OK) goto fail;
                keep(t, b, all * elt);
                for (root = 0; root < g.size; root++) {
                    fill(a, n, dt, t->rank, seed + 500 + (uint64_t)root);
                    if ((r = c->broadcast(c, &g, a, n, dt, root)) != MGT_OK) goto fail;
                    keep(t, a, n * elt);
                }
                if ((r = c->barrier(c, &g)) != MGT_OK) goto fail;
                free(a);
                free(b);
                continue;
            fail:
                free(a);
                free(b);
                t->result = r;
                return NULL;
            }
    }
    { /* rings: send then recv, and sendrecv, both ways round */
        float s[COUNT_B], q[COUNT_B];
        int k;
        for (k = 1; k < W; k += 3) {
            fill(s, COUNT_B, MGT_F32, t->rank, 9000 + (uint64_t)k);
            if ((t->result = c->send(c, (t->rank + k) % W, s, COUNT_B, MGT_F32)) != MGT_OK) return NULL;
            if ((t->result = c->recv(c, (t->rank - k + W) % W, q, COUNT_B, MGT_F32)) != MGT_OK) return NULL;
            keep(t, q, sizeof q);
            if ((t->result = c->sendrecv(c, (t->rank - k + W) % W, s, (t->rank + k) % W, q, COUNT_B, MGT_F32)) != MGT_OK) return NULL;
            keep(t, q, sizeof q);
        }
    }
    return NULL;
}

static int run_ranks(task *tasks, int n) {
    pthread_t th[W];
    int i, bad = 0;
    for (i = 0; i < n; i++) pthread_create(&th[i], NULL, rank_main, &tasks[i]);
    for (i = 0; i < n; i++) pthread_join(th[i], NULL);
    for (i = 0; i < n; i++)
        if (tasks[i].result != MGT_OK) { printf("FAIL rank %d: %s\n", tasks[i].rank, mgt_last_error()); bad = 1; }
    return bad;
}

int main(void) {
    int process = 0, processes = 1, per, i, c, bad = 0;
    mgt__local_world *ref;
    mgt__mpi_world *mw = NULL;
    task reft[W], mpit[W];
    char launcher[64];
    memset(reft, 0, sizeof reft);
    memset(mpit, 0, sizeof mpit);
    if (mgt_mpi_launcher(launcher, sizeof launcher) > 1) {
        if (mgt_mpi_start(&process, &processes) != MGT_OK) { printf("FAIL %s\n", mgt_last_error()); return 1; }
    }
    per = W / processes;
    if (mgt__local_world_create(&ref, W) != MGT_OK) return 1;
    for (i = 0; i < W; i++) { reft[i].comm = mgt__local_comm(ref, i); reft[i].rank = i; }
    bad |= run_ranks(reft, W);
    if (processes > 1) {
        if (mgt__mpi_world_create(&mw, mgt__mpi_api, process, processes, W, 60) != MGT_OK) { printf("FAIL %s\n", mgt_last_error()); return 1; }
        for (i = 0; i < per; i++) { mpit[i].comm = mgt__mpi_comm(mw, process * per + i); mpit[i].rank = process * per + i; }
        bad |= run_ranks(mpit, per);
    } else { /* one process: the reference against a second in-process world */
        mgt__local_world *again;
        if (mgt__local_world_create(&again, W) != MGT_OK) return 1;
        for (i = 0; i < W; i++) { mpit[i].comm = mgt__local_comm(again, i); mpit[i].rank = i; }
        bad |= run_ranks(mpit, W);
        for (i = 0; i < per && !bad; i++) {
            task *m = &mpit[i], *rf = &reft[i];
            if (m->used != rf->used || memcmp(m->out, rf->out, m->used)) { printf("FAIL rank %d: results differ\n", m->rank); bad = 1; }
        }
        printf("%s process 0 of 1: %d ranks, %zu bytes of results each identical\n", bad ? "FAIL" : "ok  ", W, reft[0].used);
        mgt__local_world_destroy(again);
        mgt__local_world_destroy(ref);
        return bad;
    }
    for (i = 0; i < per && !bad; i++) {
        task *m = &mpit[i], *rf = &reft[process * per + i];
        if (m->used != rf->used || memcmp(m->out, rf->out, m->used)) {
            size_t k = 0;
            while (k < m->used && k < rf->used && m->out[k] == rf->out[k]) k++;
            printf("FAIL rank %d: results differ from one process at byte %zu of %zu\n", m->rank, k, rf->used);
            bad = 1;
        }
        for (c = 0; c < MGT_COLL_COUNT && !bad; c++)
            if (m->comm->stats.calls[c] != rf->comm->stats.calls[c] || m->comm->stats.bytes[c] != rf->comm->stats.bytes[c]) {
                printf("FAIL rank %d: %s counted %lld calls, %.0f bytes; one process %lld, %.0f\n", m->rank, mgt_coll_name(c),
                       m->comm->stats.calls[c], m->comm->stats.bytes[c], rf->comm->stats.calls[c], rf->comm->stats.bytes[c]);
                bad = 1;
            }
    }
    printf("%s process %d of %d (%s): ranks %d..%d, %zu bytes of results each, identical to one process, calls and bytes counted alike; "
           "%.0f bytes sent to other processes\n", bad ? "FAIL" : "ok  ", process, processes, mw->hosts[process], process * per,
           process * per + per - 1, reft[process * per].used, mw->wire_bytes);
    for (i = 0; i < W; i++) { free(reft[i].out); free(mpit[i].out); }
    mgt__mpi_world_destroy(mw);
    mgt__local_world_destroy(ref);
    return bad;
}
