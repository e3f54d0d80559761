/* tests/test_comm.c: the in-process communicator (mgt_comm over rank threads).
   Collectives for every world size 1..8 and group size, counts, dtypes and in-place forms against
   a sequential reference in group order, bit for bit, under random timing; concurrent groups
   (TP/DP/PP layouts of 8 ranks); send/recv chains and rings; exact statistics; and every kind of
   misuse (mismatched count, op, root, dtype, cross-group deadlocks, recv from a finished rank,
   send/recv mismatches) reported as MGT_ERROR_COMM on the ranks involved, quickly, naming the
   calls. One line per check; exit status 0 when all pass. A watchdog turns a hang into a failure.
   Build: gcc -std=gnu11 -O2 -g -Wall -Wextra -Werror -pthread -I. $(pkg-config --cflags inih openblas)
          -o build/test_comm tests/test_comm.c $(pkg-config --libs inih openblas) -lm */
#define MGT_IMPLEMENTATION
#include "mgt.h"

#include <sched.h>  /* defines: sched_yield */
#include <signal.h> /* defines: signal, SIGALRM */

/* ---- checks */

static int test_failures, test_checks;

MGT__PRINTF(2, 3) static void check(int ok, const char *fmt, ...) {
    va_list ap;
    test_checks++;
    if (!ok) test_failures++;
    printf("%s ", ok ? "ok  " : "FAIL");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

static void on_alarm(int sig) {
    static const char text[] = "FAIL watchdog: the test hung\n";
    (void)sig;
    if (write(2, text, sizeof text - 1) < 0) {}
    _exit(1);
}

/* ---- values */

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
static uint64_t next_random(uint64_t *state) { return mix(*state += 0x632be59bd9b4e019ull); }

/* element e of rank r's data for `seed`, a value that the dtype represents exactly, small
   enough that sums of 8 are exact in bf16 and f16; f32 and f64 values span magnitudes, so the
   order of the additions matters */
static double value(uint64_t seed, int dtype, int rank, size_t e) {
    uint64_t h = mix(seed * 1000003u + (uint64_t)rank * 7919u + e * 0x100000001b3ull);
    if (dtype == MGT_F64) { /* sign, exponent 2^-20..2^20, 52 random mantissa bits */
        uint64_t bits = (h & 0x800fffffffffffffull) | (uint64_t)(1003 + (h >> 52) % 41) << 52;
        double d;
        memcpy(&d, &bits, 8);
        return d;
    }
    if (dtype == MGT_F32) { /* sign, exponent 2^-20..2^20, 23 random mantissa bits */
        uint32_t bits = (uint32_t)(h & 0x807fffffu) | (uint32_t)(107 + (h >> 40) % 41) << 23;
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
    if (dtype == MGT_BF16) return (float)((int)(h % 31) - 15); /* |sum of 8| <= 120 < 2^8 */
    return (float)((int)(h % 201) - 100) * 0.5f;                 /* |sum of 8| <= 400, halves: exact */
}
static uint16_t exact_f16(float v) { /* only for values f16 represents exactly (normal range or 0) */
    int e;
    float m;
    uint16_t sign = v < 0 ? 0x8000 : 0;
    if (v == 0) return sign;
    m = frexpf(fabsf(v), &e); /* v = m 2^e, m in [0.5, 1) */
    return (uint16_t)(sign | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)((m * 2 - 1) * 1024));
}
static void put(void *buf, size_t i, int dtype, double v) {
    float f = (float)v;
    if (dtype == MGT_F64) ((double *)buf)[i] = v;
    else if (dtype == MGT_F32) ((float *)buf)[i] = f;
    else if (dtype == MGT_BF16) { uint32_t x; memcpy(&x, &f, 4); ((uint16_t *)buf)[i] = (uint16_t)(x >> 16); }
    else ((uint16_t *)buf)[i] = exact_f16(f);
}
/* the reference's next addition: fp64 for f64, fp32 otherwise */
static double add(int dtype, double s, double v) { return dtype == MGT_F64 ? s + v : (double)((float)s + (float)v); }
static size_t elt_size(int dtype) { return dtype == MGT_F64 ? 8 : dtype == MGT_F32 ? 4 : 2; }
static const char *dtype_name(int dtype) {
    return dtype == MGT_F64 ? "f64" : dtype == MGT_F32 ? "f32" : dtype == MGT_BF16 ? "bf16" : "f16";
}

/* ---- rank threads */

typedef struct rank_ctx rank_ctx;
typedef void (*rank_fn)(rank_ctx *t);
struct rank_ctx {
    mgt_comm *c;
    int rank, world, jitter;
    uint64_t rng;
    const void *arg;
    rank_fn fn;
    int bad;           /* failed checks on this rank */
    char note[600];    /* the first one */
    mgt_result rc[4];  /* results of the calls under test (error cases) */
    char msg[4][1100]; /* their messages */
    double seconds[4]; /* how long they took */
    long long ops;     /* calls that succeeded */
};

static void *rank_main(void *p) {
    rank_ctx *t = (rank_ctx *)p;
    t->fn(t);
    mgt__local_rank_done(t->c);
    return NULL;
}
/* runs fn on `world` rank threads; returns the wall time */
static double run_world(int world, rank_fn fn, const void *arg, int jitter, uint64_t seed, rank_ctx *t) {
    mgt__local_world *w;
    pthread_t th[8];
    double t0 = mgt_now();
    int r;
    if (mgt__local_world_create(&w, world) != MGT_OK) { check(0, "world of %d: %s", world, mgt_last_error()); return 0; }
    for (r = 0; r < world; r++) {
        memset(&t[r], 0, sizeof t[r]);
        t[r].c = mgt__local_comm(w, r);
        t[r].rank = r;
        t[r].world = world;
        t[r].jitter = jitter;
        t[r].rng = mix(seed * 31 + (uint64_t)r);
        t[r].arg = arg;
        t[r].fn = fn;
    }
    for (r = 0; r < world; r++) pthread_create(&th[r], NULL, rank_main, &t[r]);
    for (r = 0; r < world; r++) pthread_join(th[r], NULL);
    mgt__local_world_destroy(w);
    return mgt_now() - t0;
}
MGT__PRINTF(2, 3) static void rank_bad(rank_ctx *t, const char *fmt, ...) {
    va_list ap;
    if (t->bad++) return;
    va_start(ap, fmt);
    vsnprintf(t->note, sizeof t->note, fmt, ap);
    va_end(ap);
}
static void jitter(rank_ctx *t) {
    uint64_t r;
    if (!t->jitter) return;
    r = next_random(&t->rng);
    if (r % 8 < 3) sched_yield();
    else if (r % 8 == 3) {
        struct timespec ts;
        ts.tv_sec = 0;
        ts.tv_nsec = (long)((r >> 8) % 30000);
        nanosleep(&ts, NULL);
    }
}
/* first failure over the ranks, or NULL */
static const char *ranks_bad(rank_ctx *t, int world) {
    int r;
    for (r = 0; r < world; r++)
        if (t[r].bad) return t[r].note;
    return NULL;
}

/* ---- one collective, checked against the sequential reference in group order */

enum { OP_ALL_REDUCE, OP_REDUCE_SCATTER, OP_REDUCE_SCATTER_INPLACE, OP_ALL_GATHER, OP_ALL_GATHER_INPLACE, OP_BROADCAST, OP_BARRIER, OP_COUNT };
static const char *op_name[OP_COUNT] = {"all-reduce", "reduce-scatter", "reduce-scatter in place", "all-gather",
                                        "all-gather in place", "broadcast", "barrier"};

/* buffers big enough for 8 x 65537 elements */
#define BIG (8 * 65537 + 8)
typedef struct rank_bufs {
    double a[BIG], b[BIG], want[BIG];
} rank_bufs;

static void do_collective(rank_ctx *t, rank_bufs *bf, const mgt_group *g, int op, size_t count, int dtype, int root,
                          uint64_t seed) {
    mgt_comm *c = t->c;
    size_t elt = elt_size(dtype), e, n = (size_t)g->size, me = (size_t)g->index, total = 0;
    void *a = bf->a, *b = bf->b, *want = bf->want, *out = a;
    mgt_result r = MGT_OK;
    int j;
    if (op == OP_ALL_REDUCE) {
        for (e = 0; e < count; e++) {
            double s = value(seed, dtype, g->ranks[0], e);
            for (j = 1; j < g->size; j++) s = add(dtype, s, value(seed, dtype, g->ranks[j], e));
            put(a, e, dtype, value(seed, dtype, c->rank, e));
            put(want, e, dtype, s);
        }
        total = count;
        r = c->all_reduce(c, g, a, count, dtype);
    } else if (op == OP_REDUCE_SCATTER || op == OP_REDUCE_SCATTER_INPLACE) {
        for (e = 0; e < n * count; e++) put(a, e, dtype, value(seed, dtype, c->rank, e));
        for (e = 0; e < count; e++) {
            double s = value(seed, dtype, g->ranks[0], me * count + e);
            for (j = 1; j < g->size; j++) s = add(dtype, s, value(seed, dtype, g->ranks[j], me * count + e));
            put(want, e, dtype, s);
        }
        total = count;
        out = op == OP_REDUCE_SCATTER ? b : (char *)a + me * count * elt;
        r = c->reduce_scatter(c, g, a, out, count, dtype);
    } else if (op == OP_ALL_GATHER || op == OP_ALL_GATHER_INPLACE) {
        void *send = op == OP_ALL_GATHER ? b : (char *)a + me * count * elt;
        for (e = 0; e < n * count; e++) put(a, e, dtype, -7.0f); /* garbage to be overwritten */
        for (e = 0; e < count; e++) put(send, e, dtype, value(seed, dtype, c->rank, e));
        for (j = 0; j < g->size; j++)
            for (e = 0; e < count; e++) put(want, (size_t)j * count + e, dtype, value(seed, dtype, g->ranks[j], e));
        total = n * count;
        r = c->all_gather(c, g, send, a, count, dtype);
    } else if (op == OP_BROADCAST) {
        for (e = 0; e < count; e++) {
            put(a, e, dtype, (int)me == root ? value(seed, dtype, c->rank, e) : -3.0f);
            put(want, e, dtype, value(seed, dtype, g->ranks[root], e));
        }
        total = count;
        r = c->broadcast(c, g, a, count, dtype, root);
    } else {
        r = c->barrier(c, g);
    }
    if (r != MGT_OK) {
        rank_bad(t, "rank %d: %s of %zu %s in group %d (size %d): %s", c->rank, op_name[op], count, dtype_name(dtype), g->id,
                 g->size, mgt_last_error());
        return;
    }
    t->ops++;
    if (total && memcmp(out, want, total * elt) != 0) {
        for (e = 0; e < total && !memcmp((char *)out + e * elt, (char *)want + e * elt, elt); e++) {}
        rank_bad(t, "rank %d: %s of %zu %s in group %d (size %d, member %d): element %zu differs from the reference",
                 c->rank, op_name[op], count, dtype_name(dtype), g->id, g->size, g->index, e);
    }
}

/* ---- 1. every collective, world sizes 1..8, every group size */

typedef struct sweep_arg {
    int group_size, reps;
    int perm[8];
    uint64_t seed;
} sweep_arg;
static const size_t sweep_counts[] = {0, 1, 3, 17, 1000, 65537};

static void sweep_rank(rank_ctx *t) {
    const sweep_arg *a = (const sweep_arg *)t->arg;
    rank_bufs *bf = (rank_bufs *)malloc(sizeof *bf);
    int ranks[8], pos = 0, i, start, op, dtype, rep, k = 0;
    mgt_group g;
    size_t ci;
    for (i = 0; i < t->world; i++)
        if (a->perm[i] == t->rank) pos = i;
    start = pos / a->group_size * a->group_size;
    g.id = 100 * a->group_size + pos / a->group_size;
    g.size = start + a->group_size <= t->world ? a->group_size : t->world - start;
    g.index = pos - start;
    for (i = 0; i < g.size; i++) ranks[i] = a->perm[start + i];
    g.ranks = ranks;
    for (rep = 0; rep < a->reps; rep++)
        for (ci = 0; ci < sizeof sweep_counts / sizeof *sweep_counts; ci++) {
            if (rep && sweep_counts[ci] > 1000) continue; /* repeats vary the timing on small counts */
            for (dtype = MGT_F32; dtype <= MGT_F64; dtype++)
                for (op = 0; op < OP_COUNT; op++, k++) {
                    /* the large count in one dtype per layout, a different one from layout to layout */
                    if (sweep_counts[ci] > 1000 && dtype != (t->world + a->group_size) % 4) continue;
                    jitter(t);
                    do_collective(t, bf, &g, op, sweep_counts[ci], dtype, k % g.size, a->seed + (uint64_t)k);
                }
        }
    free(bf);
}

static void test_sweep(void) {
    rank_ctx t[8];
    int world, s, i;
    double secs = 0;
    for (world = 1; world <= 8; world++) {
        const char *bad = NULL;
        long long ops = 0;
        for (s = 1; s <= world; s++) {
            sweep_arg a;
            uint64_t rng = (uint64_t)(world * 10 + s);
            a.group_size = s;
            a.reps = 3;
            a.seed = (uint64_t)(world * 100 + s);
            for (i = 0; i < world; i++) a.perm[i] = i;
            for (i = world - 1; i > 0; i--) { /* group order differs from rank order */
                int j = (int)(next_random(&rng) % (uint64_t)(i + 1)), tmp = a.perm[i];
                a.perm[i] = a.perm[j];
                a.perm[j] = tmp;
            }
            secs += run_world(world, sweep_rank, &a, 1, a.seed, t);
            if (!bad) bad = ranks_bad(t, world);
            for (i = 0; i < world; i++) ops += t[i].ops;
        }
        check(!bad, "collectives, world %d, groups of every size 1..%d, counts 0..1000 in f32/bf16/f16/f64 and 65537 in one of them, in place, random timing (%lld calls)%s%s",
              world, world, ops, bad ? ": " : "", bad ? bad : "");
    }
    printf("     (sweep took %.2f s)\n", secs);
}

/* ---- 2. rounding of bf16 and f16 sums */

typedef struct round_case {
    int dtype, n;
    uint16_t in[3], want;
    const char *what;
} round_case;
static const round_case round_cases[] = {
    {MGT_BF16, 2, {0x3f80, 0x3b80, 0}, 0x3f80, "bf16 1 + 2^-8: tie to even (down)"},
    {MGT_BF16, 2, {0x3f81, 0x3b80, 0}, 0x3f82, "bf16 (1 + 2^-7) + 2^-8: tie to even (up)"},
    {MGT_BF16, 2, {0x3f80, 0x3bc0, 0}, 0x3f81, "bf16 1 + 1.5 2^-8: to nearest"},
    {MGT_BF16, 3, {0x3f80, 0x3b80, 0x3b00}, 0x3f81, "bf16 1 + 2^-8 + 2^-9: summed in fp32, rounded once"},
    {MGT_BF16, 2, {0xbf80, 0xbb80, 0}, 0xbf80, "bf16 -1 - 2^-8: tie to even, negative"},
    {MGT_F16, 2, {0x3c00, 0x1000, 0}, 0x3c00, "f16 1 + 2^-11: tie to even (down)"},
    {MGT_F16, 2, {0x3c01, 0x1000, 0}, 0x3c02, "f16 (1 + 2^-10) + 2^-11: tie to even (up)"},
    {MGT_F16, 3, {0x3c00, 0x1000, 0x0c00}, 0x3c01, "f16 1 + 2^-11 + 2^-12: summed in fp32, rounded once"},
    {MGT_F16, 2, {0x0001, 0x0001, 0}, 0x0002, "f16 subnormals 2^-24 + 2^-24"},
    {MGT_F16, 2, {0x7bff, 0x4800, 0}, 0x7bff, "f16 65504 + 8: stays at the largest finite"},
    {MGT_F16, 2, {0x7bff, 0x4c00, 0}, 0x7c00, "f16 65504 + 16: tie rounds to even, infinity"},
    {MGT_F16, 2, {0x7a00, 0x7a00, 0}, 0x7c00, "f16 49152 + 49152: overflow to infinity"},
};
static void round_rank(rank_ctx *t) {
    const round_case *k = (const round_case *)t->arg;
    int ranks[3] = {0, 1, 2};
    mgt_group g;
    uint16_t v = k->in[t->rank];
    g.id = 1;
    g.size = k->n;
    g.index = t->rank;
    g.ranks = ranks;
    if (t->c->all_reduce(t->c, &g, &v, 1, k->dtype) != MGT_OK) rank_bad(t, "%s", mgt_last_error());
    else if (v != k->want) rank_bad(t, "rank %d got 0x%04x, want 0x%04x", t->rank, v, k->want);
}
static void test_rounding(void) {
    rank_ctx t[8];
    size_t i;
    for (i = 0; i < sizeof round_cases / sizeof *round_cases; i++) {
        const char *bad;
        run_world(round_cases[i].n, round_rank, &round_cases[i], 0, 1, t);
        bad = ranks_bad(t, round_cases[i].n);
        check(!bad, "rounding: %s%s%s", round_cases[i].what, bad ? ": " : "", bad ? bad : "");
    }
}

/* ---- 3. concurrent groups: TP pairs, DP groups, PP pairs of 8 ranks, interleaved */

typedef struct layout_arg {
    int tp, dp, pp, iters;
} layout_arg;
static void layout_rank(rank_ctx *t) {
    const layout_arg *a = (const layout_arg *)t->arg;
    rank_bufs *bf = (rank_bufs *)malloc(sizeof *bf);
    int r = t->rank, tp = r % a->tp, dp = r / a->tp % a->dp, pp = r / (a->tp * a->dp), i, it;
    int tp_ranks[8], dp_ranks[8], pp_ranks[8], all_ranks[8];
    mgt_group tg, dg, pg, wg;
    for (i = 0; i < a->tp; i++) tp_ranks[i] = i + a->tp * (dp + a->dp * pp);
    for (i = 0; i < a->dp; i++) dp_ranks[i] = tp + a->tp * (a->dp - 1 - i + a->dp * pp); /* listed in reverse */
    for (i = 0; i < a->pp; i++) pp_ranks[i] = tp + a->tp * (dp + a->dp * i);
    for (i = 0; i < t->world; i++) all_ranks[i] = i;
    tg.id = 1000 + dp + a->dp * pp, tg.size = a->tp, tg.index = tp, tg.ranks = tp_ranks;
    dg.id = 2000 + tp + a->tp * pp, dg.size = a->dp, dg.index = a->dp - 1 - dp, dg.ranks = dp_ranks;
    pg.id = 3000 + tp + a->tp * dp, pg.size = a->pp, pg.index = pp, pg.ranks = pp_ranks;
    wg.id = 0, wg.size = t->world, wg.index = r, wg.ranks = all_ranks;
    for (it = 0; it < a->iters && !t->bad; it++) {
        uint64_t seed = 77 + (uint64_t)it * 16;
        size_t count = 1000 + (size_t)it * 37;
        do_collective(t, bf, &tg, OP_ALL_REDUCE, count, MGT_F32, 0, seed);
        jitter(t);
        do_collective(t, bf, &dg, OP_REDUCE_SCATTER_INPLACE, count / 4, MGT_BF16, 0, seed + 1);
        if (a->pp > 1) { /* activations forward, gradients back */
            float *x = (float *)bf->b;
            size_t e;
            mgt_result rc = MGT_OK;
            if (pp > 0) {
                rc = t->c->recv(t->c, pp_ranks[pp - 1], x, count, MGT_F32);
                for (e = 0; e < count && rc == MGT_OK; e++)
                    if (x[e] != value(seed + 2, MGT_F32, pp_ranks[pp - 1], e)) { rank_bad(t, "rank %d: pipeline message %d differs", r, it); break; }
            }
            for (e = 0; e < count; e++) x[e] = (float)value(seed + 2, MGT_F32, r, e);
            if (rc == MGT_OK && pp < a->pp - 1) rc = t->c->send(t->c, pp_ranks[pp + 1], x, count, MGT_F32);
            if (rc != MGT_OK) rank_bad(t, "rank %d: pipeline: %s", r, mgt_last_error());
        }
        jitter(t);
        do_collective(t, bf, &dg, OP_ALL_GATHER_INPLACE, count / 8, MGT_F16, 0, seed + 3);
        do_collective(t, bf, &tg, OP_BROADCAST, 333, MGT_F32, it % a->tp, seed + 4);
        if (a->pp > 1) do_collective(t, bf, &pg, OP_ALL_REDUCE, 5, MGT_F32, 0, seed + 5); /* tied embedding */
        jitter(t);
        if (it % 5 == 0) do_collective(t, bf, &wg, OP_ALL_REDUCE, 65, MGT_BF16, 0, seed + 6);
    }
    free(bf);
}
static void test_layouts(void) {
    static const layout_arg layouts[] = {{2, 2, 2, 30}, {2, 4, 1, 30}, {4, 2, 1, 20}, {1, 2, 4, 20}};
    rank_ctx t[8];
    size_t i;
    for (i = 0; i < sizeof layouts / sizeof *layouts; i++) {
        double secs = run_world(8, layout_rank, &layouts[i], 1, 5 + i, t);
        const char *bad = ranks_bad(t, 8);
        check(!bad, "concurrent groups, 8 ranks as tp %d x dp %d x pp %d, %d interleaved steps (%.2f s)%s%s", layouts[i].tp,
              layouts[i].dp, layouts[i].pp, layouts[i].iters, secs, bad ? ": " : "", bad ? bad : "");
    }
}

/* ---- 4. send/recv: rings both ways, chains, to self */

static size_t msg_count(int k) { static const size_t c[] = {0, 1, 3, 17, 1000, 65537}; return c[k % 6]; }
static int check_msg(rank_ctx *t, const void *buf, size_t count, int dtype, uint64_t seed, int from) {
    size_t e;
    uint16_t h;
    for (e = 0; e < count; e++) {
        double v = value(seed, dtype, from, e);
        if (dtype == MGT_F64 ? ((const double *)buf)[e] != v : dtype == MGT_F32 ? ((const float *)buf)[e] != (float)v
                                                              : (put(&h, 0, dtype, v), ((const uint16_t *)buf)[e] != h)) {
            rank_bad(t, "rank %d: message from %d (seed %llu), element %zu differs", t->rank, from, (unsigned long long)seed, e);
            return 0;
        }
    }
    return 1;
}
static void fill_msg(void *buf, size_t count, int dtype, uint64_t seed, int from) {
    size_t e;
    for (e = 0; e < count; e++) put(buf, e, dtype, value(seed, dtype, from, e));
}
static void ring_rank(rank_ctx *t) {
    double *buf = (double *)malloc(sizeof(double) * 65537);
    int r = t->rank, W = t->world, next = (r + 1) % W, prev = (r + W - 1) % W, k;
    for (k = 0; k < 6 && !t->bad; k++) { /* all sends first: they are buffered */
        fill_msg(buf, msg_count(k), k % 4, 10 + (uint64_t)k, r);
        if (t->c->send(t->c, next, buf, msg_count(k), k % 4) != MGT_OK) rank_bad(t, "rank %d: send: %s", r, mgt_last_error());
        jitter(t);
        fill_msg(buf, msg_count(k + 1), k % 4, 20 + (uint64_t)k, r);
        if (t->c->send(t->c, prev, buf, msg_count(k + 1), k % 4) != MGT_OK) rank_bad(t, "rank %d: send: %s", r, mgt_last_error());
    }
    for (k = 0; k < 12 && !t->bad; k++) { /* in order per pair, whatever the interleaving */
        int from_next = W > 2 ? !(k & 1) : (k & 1); /* with 2 ranks, next and prev are one queue */
        size_t n = msg_count(k / 2 + from_next);
        uint64_t seed = (from_next ? 20 : 10) + (uint64_t)(k / 2);
        if (k & 1) jitter(t);
        if (t->c->recv(t->c, from_next ? next : prev, buf, n, k / 2 % 4) != MGT_OK) rank_bad(t, "rank %d: recv: %s", r, mgt_last_error());
        else check_msg(t, buf, n, k / 2 % 4, seed, from_next ? next : prev);
    }
    for (k = 0; k < 3 && !t->bad; k++) { /* to self */
        fill_msg(buf, 17, MGT_F32, 30 + (uint64_t)k, r);
        if (t->c->send(t->c, r, buf, 17, MGT_F32) != MGT_OK) rank_bad(t, "rank %d: send to self: %s", r, mgt_last_error());
    }
    for (k = 0; k < 3 && !t->bad; k++) {
        if (t->c->recv(t->c, r, buf, 17, MGT_F32) != MGT_OK) rank_bad(t, "rank %d: recv from self: %s", r, mgt_last_error());
        else check_msg(t, buf, 17, MGT_F32, 30 + (uint64_t)k, r);
    }
    free(buf);
}
static void chain_rank(rank_ctx *t) { /* rank 0 -> 1 -> ... -> last, each message passed on, then back */
    double *buf = (double *)malloc(sizeof(double) * 65537);
    int r = t->rank, W = t->world, k;
    for (k = 0; k < 12 && !t->bad; k++) {
        size_t n = msg_count(k);
        int dtype = k % 4;
        if (r == 0) fill_msg(buf, n, dtype, 40 + (uint64_t)k, 0);
        else if (t->c->recv(t->c, r - 1, buf, n, dtype) != MGT_OK) { rank_bad(t, "rank %d: recv: %s", r, mgt_last_error()); break; }
        else if (!check_msg(t, buf, n, dtype, 40 + (uint64_t)k, 0)) break;
        jitter(t);
        if (r < W - 1 && t->c->send(t->c, r + 1, buf, n, dtype) != MGT_OK) { rank_bad(t, "rank %d: send: %s", r, mgt_last_error()); break; }
        if (r == W - 1 && W > 1 && t->c->send(t->c, 0, buf, n, dtype) != MGT_OK) { rank_bad(t, "rank %d: send: %s", r, mgt_last_error()); break; }
        if (r == 0 && W > 1) {
            if (t->c->recv(t->c, W - 1, buf, n, dtype) != MGT_OK) { rank_bad(t, "rank 0: recv: %s", mgt_last_error()); break; }
            check_msg(t, buf, n, dtype, 40 + (uint64_t)k, 0);
        }
    }
    free(buf);
}
static void test_send_recv(void) {
    rank_ctx t[8];
    int world, rep;
    for (world = 1; world <= 8; world++) {
        const char *bad = NULL;
        for (rep = 0; rep < 2 && !bad; rep++) {
            run_world(world, ring_rank, NULL, 1, (uint64_t)(world * 3 + rep), t);
            bad = ranks_bad(t, world);
        }
        check(!bad, "send/recv ring, %d ranks, buffered both ways, counts 0..65537, every dtype, to self%s%s", world,
              bad ? ": " : "", bad ? bad : "");
    }
    for (world = 1; world <= 8; world += 3) {
        const char *bad;
        run_world(world, chain_rank, NULL, 1, 9, t);
        bad = ranks_bad(t, world);
        check(!bad, "send/recv chain, %d ranks, around and back to rank 0%s%s", world, bad ? ": " : "", bad ? bad : "");
    }
}

/* ---- 5. statistics */

static void stats_rank(rank_ctx *t) {
    mgt_comm *c = t->c;
    int all[4] = {0, 1, 2, 3}, pair[2] = {t->rank & ~1, t->rank | 1}, i;
    float x[64];
    mgt_group g4, g2;
    memset(x, 0, sizeof x);
    g4.id = 1, g4.size = 4, g4.index = t->rank, g4.ranks = all;
    g2.id = 2 + t->rank / 2, g2.size = 2, g2.index = t->rank & 1, g2.ranks = pair;
    if (c->all_reduce(c, &g4, x, 10, MGT_F32) || c->all_reduce(c, &g2, x, 10, MGT_F32) ||
        c->reduce_scatter(c, &g4, x, x + 40, 5, MGT_BF16) || c->all_gather(c, &g2, x, x + 20, 3, MGT_F16) ||
        c->broadcast(c, &g4, x, 7, MGT_F32, 2) || c->send(c, t->rank ^ 1, x, 9, MGT_F32) ||
        c->recv(c, t->rank ^ 1, x, 9, MGT_F32) || c->barrier(c, &g4) || c->barrier(c, &g2) || c->barrier(c, &g4))
        rank_bad(t, "rank %d: %s", t->rank, mgt_last_error());
    {
        static const long long calls[MGT_COLL_COUNT] = {2, 1, 1, 1, 2, 3};
        static const double bytes[MGT_COLL_COUNT] = {80, 40, 12, 28, 72, 0};
        for (i = 0; i < MGT_COLL_COUNT; i++)
            if (c->stats.calls[i] != calls[i] || c->stats.bytes[i] != bytes[i] || !(c->stats.seconds[i] >= 0 && c->stats.seconds[i] < 30))
                rank_bad(t, "rank %d: %s: %lld calls, %g bytes, %g s; want %lld calls, %g bytes", t->rank, mgt_coll_name(i),
                         c->stats.calls[i], c->stats.bytes[i], c->stats.seconds[i], calls[i], bytes[i]);
    }
}
static void test_stats(void) {
    rank_ctx t[8];
    const char *bad;
    run_world(4, stats_rank, NULL, 1, 3, t);
    bad = ranks_bad(t, 4);
    check(!bad, "statistics: calls and bytes per type exact, seconds counted%s%s", bad ? ": " : "", bad ? bad : "");
    check(!strcmp(mgt_coll_name(MGT_COLL_ALL_REDUCE), "all-reduce") && !strcmp(mgt_coll_name(MGT_COLL_SEND_RECV), "send/recv") &&
              !strcmp(mgt_coll_name(MGT_COLL_BARRIER), "barrier") && !strcmp(mgt_coll_name(99), "unknown"),
          "mgt_coll_name");
}

/* ---- 6. misuse: errors on the ranks involved, quickly, naming the calls */

enum { BAD_COUNT, BAD_OP, BAD_ROOT, BAD_DTYPE, BAD_LATE_MEMBER, BAD_CROSS_GROUPS, BAD_CYCLE3, BAD_PARTIAL_DEADLOCK,
       BAD_RECV_FINISHED, BAD_RECV_RECV, BAD_MEMBER_FINISHED, BAD_SEND_COUNT, BAD_SEND_DTYPE, BAD_ARGUMENT };
typedef struct bad_case {
    int kind, world;
    const char *what;
    int involved;          /* bit mask of ranks that must get the error */
    mgt_result want;       /* on the lowest involved rank; the others get MGT_ERROR_COMM */
    const char *needle[3]; /* in every involved rank's message */
} bad_case;
static const bad_case bad_cases[] = {
    {BAD_COUNT, 2, "different count", 3, MGT_ERROR_COMM,
     {"rank 0 called all-reduce(group 7 [0 1], 1024 f32) as its call #3", "rank 1 called all-reduce(group 7 [0 1], 512 f32) as its call #3", NULL}},
    {BAD_OP, 4, "different op", 10, MGT_ERROR_COMM,
     {"rank 1 called all-reduce(group 3 [1 3], 1024 f32) as its call #3", "rank 3 called all-gather(group 3 [1 3], 512 f32) as its call #3", NULL}},
    {BAD_ROOT, 2, "different root", 3, MGT_ERROR_COMM,
     {"rank 0 called broadcast(group 7 [0 1], 16 f32, root 0) as its call #3", "rank 1 called broadcast(group 7 [0 1], 16 f32, root 1) as its call #3", NULL}},
    {BAD_DTYPE, 2, "different dtype", 3, MGT_ERROR_COMM,
     {"rank 0 called all-reduce(group 7 [0 1], 16 f32) as its call #3", "rank 1 called all-reduce(group 7 [0 1], 16 bf16) as its call #3", NULL}},
    {BAD_LATE_MEMBER, 4, "different count, two members arriving late", 15, MGT_ERROR_COMM,
     {"rank 0 called all-reduce(group 9 [0 1 2 3], 8 f32) as its call #1", "rank 1 called all-reduce(group 9 [0 1 2 3], 9 f32) as its call #1", NULL}},
    {BAD_CROSS_GROUPS, 2, "deadlock across two groups", 3, MGT_ERROR_COMM,
     {"deadlock", "rank 0 waits in all-reduce(group 1 [0 1], 8 f32) as its call #2 for rank 1", "rank 1 waits in all-reduce(group 2 [0 1], 8 f32) as its call #2 for rank 0"}},
    {BAD_CYCLE3, 3, "deadlock around three groups", 7, MGT_ERROR_COMM,
     {"rank 0 waits in barrier(group 10 [0 1]) as its call #1 for rank 1", "rank 1 waits in barrier(group 11 [1 2]) as its call #1 for rank 2",
      "rank 2 waits in barrier(group 12 [2 0]) as its call #1 for rank 0"}},
    {BAD_PARTIAL_DEADLOCK, 4, "deadlock of two ranks while two others keep working", 15, MGT_ERROR_COMM,
     {"rank 0 waits in all-reduce(group 1 [0 1], 8 f32) as its call #2 for rank 1", "rank 1 waits in all-reduce(group 2 [0 1], 8 f32) as its call #2 for rank 0", NULL}},
    {BAD_RECV_FINISHED, 2, "recv from a finished rank", 1, MGT_ERROR_COMM,
     {"rank 0 waits in recv(from 1, 10 f32) as its call #1 for rank 1 (finished after call #1)", NULL, NULL}},
    {BAD_RECV_RECV, 2, "recv from each other", 3, MGT_ERROR_COMM,
     {"rank 0 waits in recv(from 1, 4 f32) as its call #1 for rank 1", "rank 1 waits in recv(from 0, 4 f32) as its call #1 for rank 0", NULL}},
    {BAD_MEMBER_FINISHED, 2, "collective with a finished member", 1, MGT_ERROR_COMM,
     {"rank 0 waits in all-reduce(group 7 [0 1], 4 f32) as its call #1 for rank 1 (finished after call #0)", NULL, NULL}},
    {BAD_SEND_COUNT, 2, "send/recv with different counts", 3, MGT_ERROR_COMM,
     {"rank 0 called send(to 1, 10 f32) as its call #1", "rank 1 called recv(from 0, 12 f32) as its call #1", NULL}},
    {BAD_SEND_DTYPE, 2, "send/recv with different dtypes", 3, MGT_ERROR_COMM,
     {"rank 0 called send(to 1, 10 f32) as its call #1", "rank 1 called recv(from 0, 10 bf16) as its call #1", NULL}},
    {BAD_ARGUMENT, 2, "invalid dtype", 3, MGT_ERROR_ARGUMENT,
     {"rank 0 called all-reduce(group 7 [0 1], 4 unknown-dtype) as its call #1", "dtype 5", NULL}},
};

/* call i of the rank under test: result, message and time kept */
#define TRY(i, call)                                                              \
    do {                                                                          \
        double t0_ = mgt_now();                                                  \
        t->rc[i] = (call);                                                        \
        t->seconds[i] = mgt_now() - t0_;                                         \
        snprintf(t->msg[i], sizeof t->msg[i], "%s", t->rc[i] ? mgt_last_error() : ""); \
    } while (0)

static void bad_rank(rank_ctx *t) {
    const bad_case *k = (const bad_case *)t->arg;
    mgt_comm *c = t->c;
    int r = t->rank, pair[2] = {0, 1}, odd[2] = {1, 3}, all[4] = {0, 1, 2, 3}, cyc[3][2] = {{0, 1}, {1, 2}, {2, 0}};
    float x[2048];
    mgt_group g, h;
    memset(x, 0, sizeof x);
    g.id = 7, g.size = 2, g.index = r & 1, g.ranks = pair;
    h = g;
    switch (k->kind) {
    case BAD_COUNT: case BAD_ROOT: case BAD_DTYPE:
        if (c->all_reduce(c, &g, x, 4, MGT_F32) || c->all_reduce(c, &g, x, 4, MGT_F32)) rank_bad(t, "%s", mgt_last_error());
        if (k->kind == BAD_COUNT) TRY(0, c->all_reduce(c, &g, x, r ? 512 : 1024, MGT_F32));
        if (k->kind == BAD_ROOT) TRY(0, c->broadcast(c, &g, x, 16, MGT_F32, r));
        if (k->kind == BAD_DTYPE) TRY(0, c->all_reduce(c, &g, x, 16, r ? MGT_BF16 : MGT_F32));
        TRY(1, c->all_reduce(c, &g, x, 4, MGT_F32)); /* the world has failed: at once */
        break;
    case BAD_OP:
        if (r == 0 || r == 2) break;
        g.id = 3, g.index = r / 2, g.ranks = odd;
        if (c->all_reduce(c, &g, x, 4, MGT_F32) || c->all_reduce(c, &g, x, 4, MGT_F32)) rank_bad(t, "%s", mgt_last_error());
        if (r == 1) TRY(0, c->all_reduce(c, &g, x, 1024, MGT_F32));
        else TRY(0, c->all_gather(c, &g, x, x + 512, 512, MGT_F32));
        break;
    case BAD_LATE_MEMBER:
        g.id = 9, g.size = 4, g.index = r, g.ranks = all;
        if (r == 1) { struct timespec ts = {0, 20000000}; nanosleep(&ts, NULL); } /* rank 0 first */
        if (r >= 2) { struct timespec ts = {0, 60000000}; nanosleep(&ts, NULL); } /* after the mismatch */
        TRY(0, c->all_reduce(c, &g, x, r == 1 ? 9 : 8, MGT_F32));
        break;
    case BAD_CROSS_GROUPS: case BAD_PARTIAL_DEADLOCK:
        if (r >= 2) { /* keeps working until the world fails */
            int pr[2] = {2, 3};
            mgt_group q;
            double t0 = mgt_now();
            q.id = 5, q.size = 2, q.index = r - 2, q.ranks = pr;
            do TRY(0, c->all_reduce(c, &q, x, 8, MGT_F32));
            while (t->rc[0] == MGT_OK && mgt_now() - t0 < 20);
            break;
        }
        if (c->all_reduce(c, &g, x, 8, MGT_F32)) rank_bad(t, "%s", mgt_last_error());
        g.id = 1, h.id = 2;
        TRY(0, c->all_reduce(c, r == 0 ? &g : &h, x, 8, MGT_F32));
        TRY(1, c->all_reduce(c, r == 0 ? &h : &g, x, 8, MGT_F32));
        break;
    case BAD_CYCLE3:
        g.id = 10 + r, g.index = 0, g.ranks = cyc[r];
        TRY(0, c->barrier(c, &g));
        break;
    case BAD_RECV_FINISHED:
        if (r == 1) {
            int me = 1;
            h.id = 50, h.size = 1, h.index = 0, h.ranks = &me;
            if (c->barrier(c, &h)) rank_bad(t, "%s", mgt_last_error());
            break;
        }
        { struct timespec ts = {0, 20000000}; nanosleep(&ts, NULL); } /* usually after rank 1 finished */
        TRY(0, c->recv(c, 1, x, 10, MGT_F32));
        break;
    case BAD_RECV_RECV:
        TRY(0, c->recv(c, r ^ 1, x, 4, MGT_F32));
        break;
    case BAD_MEMBER_FINISHED:
        if (r == 0) TRY(0, c->all_reduce(c, &g, x, 4, MGT_F32));
        break;
    case BAD_SEND_COUNT: case BAD_SEND_DTYPE:
        if (r == 0) TRY(0, c->send(c, 1, x, 10, MGT_F32));
        else TRY(0, c->recv(c, 0, x, k->kind == BAD_SEND_COUNT ? 12 : 10, k->kind == BAD_SEND_COUNT ? MGT_F32 : MGT_BF16));
        if (r == 0) TRY(0, c->barrier(c, &g)); /* rank 0 learns of the failure here */
        break;
    case BAD_ARGUMENT:
        if (r == 1) { struct timespec ts = {0, 10000000}; nanosleep(&ts, NULL); }
        TRY(0, c->all_reduce(c, &g, x, 4, r == 0 ? 5 : MGT_F32));
        break;
    }
}

static void test_bad(void) {
    rank_ctx t[8];
    size_t i;
    int r, j, lowest;
    for (i = 0; i < sizeof bad_cases / sizeof *bad_cases; i++) {
        const bad_case *k = &bad_cases[i];
        double secs = run_world(k->world, bad_rank, k, 0, 1, t);
        char why[1400] = "";
        const char *bad = ranks_bad(t, k->world);
        if (bad) snprintf(why, sizeof why, "%s", bad);
        for (lowest = 0; !(k->involved >> lowest & 1); lowest++) {}
        for (r = 0; r < k->world && !why[0]; r++) {
            mgt_result want = r == lowest ? k->want : MGT_ERROR_COMM;
            if (!(k->involved >> r & 1)) continue;
            if (t[r].rc[0] != want) {
                snprintf(why, sizeof why, "rank %d returned %d (%s), want %d", r, t[r].rc[0], t[r].msg[0], want);
                break;
            }
            for (j = 0; j < 3; j++)
                if (k->needle[j] && !strstr(t[r].msg[0], k->needle[j])) {
                    snprintf(why, sizeof why, "rank %d's message lacks \"%s\": %s", r, k->needle[j], t[r].msg[0]);
                    break;
                }
            if (!why[0] && (k->kind == BAD_COUNT || k->kind == BAD_ROOT || k->kind == BAD_DTYPE) && (t[r].rc[1] != MGT_ERROR_COMM || t[r].seconds[1] > 1))
                snprintf(why, sizeof why, "rank %d: the call after the failure returned %d after %.3f s", r, t[r].rc[1], t[r].seconds[1]);
        }
        check(!why[0] && secs < 5, "misuse: %s -> error on every rank involved in %.3f s%s%s", k->what, secs,
              why[0] ? ": " : "", why);
        if (i == 0 || k->kind == BAD_CROSS_GROUPS || k->kind == BAD_RECV_FINISHED) printf("     (rank 0: %s)\n", t[0].msg[0]);
    }
}

int main(void) {
    double t0 = mgt_now();
    signal(SIGALRM, on_alarm);
    alarm(240);
    test_rounding();
    test_stats();
    test_bad();
    test_send_recv();
    test_layouts();
    test_sweep();
    printf("%d of %d checks passed in %.2f s\n", test_checks - test_failures, test_checks, mgt_now() - t0);
    return test_failures ? 1 : 0;
}
