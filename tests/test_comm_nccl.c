/* tests/test_comm_nccl.c: kernels/comm_nccl.c (mgt_comm over NCCL) on rank threads, linked with the
   checking fakes of cudart and NCCL (tests/fakes/): the groups of a dp 2 x tp 2 x pp 2 grid made as
   mgt.h makes them, every collective in place and out of place, fp32 / bf16 / f64, send/recv
   between pipeline stages, a barrier, host buffers, statistics, an unknown group reported rather
   than crashing, a defer carried by an empty call, and calls after the world's abort. The fakes
   run each stream as a deferred queue and check that buffers are used in stream order, so reading
   a result on the compute stream without the events that comm_nccl.c records would be reported
   by them; the staged host all-gather runs inside a step the fakes watch (no allocation, no
   pageable copy, no unbounded wait there); and a world aborted while a stalled rank's thread is
   inside NCCL (in a child, --stalled-abort) waits for it to leave; a wait wakes within 0.35 ms of
   its event's completion (in a child, --wake). */
#include "kernels/comm_nccl.h" /* defines: mgt_nccl_world_create, mgt_nccl_comm_create.. */
#include "kernels/fake_note.h" /* defines: mgt_cuda_fake_note (the fakes' step brackets) */

#include <cuda_runtime.h> /* defines: cudaMalloc, cudaMemcpy, cudaStreamCreate */
#include <math.h>         /* defines: fabs */
#include <pthread.h>      /* defines: pthread_create */
#include <stdio.h>        /* defines: printf, snprintf */
#include <stdlib.h>       /* defines: malloc, free */
#include <string.h>       /* defines: strstr, strncpy */
#include <sys/wait.h>     /* defines: waitpid */
#include <time.h>         /* defines: nanosleep */
#include <unistd.h>       /* defines: fork, execl, pipe */

#define DP 2
#define TP 2
#define PP 2
#define W (DP * TP * PP)
#define N 1000 /* elements per member: not a multiple of anything NCCL likes */

static int failures, checks;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
/* the condition is evaluated before the lock: it may be a collective that waits for other ranks */
#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        int ok_ = (cond);                                                    \
        pthread_mutex_lock(&mu);                                             \
        checks++;                                                            \
        if (!ok_) {                                                          \
            failures++;                                                      \
            printf("FAIL %s:%d rank %d: %s: ", __FILE__, __LINE__, rank, #cond); \
            printf(__VA_ARGS__);                                             \
            printf("\n");                                                    \
        }                                                                    \
        pthread_mutex_unlock(&mu);                                           \
    } while (0)

static __thread char last_error[1024];
static mgt_result fail(mgt_result r, const char *message) {
    strncpy(last_error, message, sizeof last_error - 1);
    return r;
}

static mgt_nccl_world *world;

/* mgt.h's grid: TP fastest, then DP, then PP; groups of a kind numbered as src/rank_make.c does */
typedef struct grid_rank {
    int rank, tpr, dpr, ppr;
    mgt_group tp, dp, pp, emb, all;
    int members[TP + DP + PP + 2 + W];
} grid_rank;
static void make_group(mgt_group *g, int **cursor, int kind, int place, int size, int index, int stride, int base) {
    int i;
    g->kind = kind;
    g->id = kind * W + place;
    g->size = size;
    g->index = index;
    g->ranks = *cursor;
    for (i = 0; i < size; i++) (*cursor)[i] = base + i * stride;
    *cursor += size;
}
static void grid(grid_rank *g, int rank) {
    int *cur = g->members, last;
    g->rank = rank;
    g->tpr = rank % TP;
    g->dpr = rank / TP % DP;
    g->ppr = rank / (TP * DP);
    last = g->ppr == PP - 1;
    make_group(&g->tp, &cur, MGT_GROUP_TP, rank / TP, TP, g->tpr, 1, rank - g->tpr);
    make_group(&g->dp, &cur, MGT_GROUP_DP, g->ppr * TP + g->tpr, DP, g->dpr, TP, g->ppr * TP * DP + g->tpr);
    make_group(&g->pp, &cur, MGT_GROUP_PP, g->dpr * TP + g->tpr, PP, g->ppr, TP * DP, g->dpr * TP + g->tpr);
    make_group(&g->emb, &cur, MGT_GROUP_EMBEDDING, g->dpr * TP + g->tpr, 2, last ? 1 : 0, (PP - 1) * TP * DP, g->dpr * TP + g->tpr);
    make_group(&g->all, &cur, MGT_GROUP_WORLD, 0, W, rank, 1, 0);
}

static float *device_floats(const float *host, size_t n) {
    float *d = NULL;
    cudaMalloc((void **)&d, n * sizeof(float));
    cudaMemcpy(d, host, n * sizeof(float), cudaMemcpyHostToDevice);
    return d;
}
/* the device buffer after the compute stream's work, as the runtime would see it */
static void to_host(float *host, const float *d, size_t n, cudaStream_t compute) {
    cudaStreamSynchronize(compute);
    cudaMemcpy(host, d, n * sizeof(float), cudaMemcpyDeviceToHost);
}
static float value(int rank, int i) { return (float)(rank + 1) + 0.25f * (float)(i % 7); } /* exact in fp32 sums */

static void *rank_main(void *arg) {
    int rank = (int)(size_t)arg, i, j, bad;
    grid_rank g;
    const mgt_group *groups[5];
    cudaStream_t compute;
    mgt_comm *c = NULL;
    float host[N * W], want;
    float *d;
    mgt_result r;
    grid(&g, rank);
    groups[0] = &g.tp; groups[1] = &g.dp; groups[2] = &g.pp; groups[3] = &g.emb; groups[4] = &g.all;
    if (rank % 2) { /* in another order than the even ranks': the splits go by kind, not by place in the list */
        const mgt_group *t;
        for (i = 0; i < 2; i++) t = groups[i], groups[i] = groups[4 - i], groups[4 - i] = t;
    }
    cudaSetDevice(rank);
    cudaStreamCreate(&compute);
    r = mgt_nccl_comm_create(world, rank, compute, groups, 5, &c);
    CHECK(r == MGT_OK, "comm_create: %s", last_error);
    if (r != MGT_OK) { mgt_nccl_comm_destroy(c); return NULL; }

    /* all-reduce over TP, in place */
    for (i = 0; i < N; i++) host[i] = value(rank, i);
    d = device_floats(host, N);
    CHECK(c->all_reduce(c, &g.tp, d, N, MGT_F32) == MGT_OK, "%s", last_error);
    /* a call that polls (an event, a communicator in progress) clears the cudaErrorNotReady that the
       fake, as runtimes may, leaves as the last error: a kernel launched next would take it for its own */
    CHECK(cudaPeekAtLastError() == cudaSuccess, "the last error after a collective: %s", cudaGetErrorName(cudaPeekAtLastError()));
    to_host(host, d, N, compute);
    for (i = 0, bad = 0; i < N; i++) {
        for (want = 0, j = 0; j < TP; j++) want += value(g.tp.ranks[j], i);
        bad += host[i] != want;
    }
    CHECK(!bad, "%d elements of the TP all-reduce wrong", bad);
    cudaFree(d);

    /* reduce-scatter over DP, out of place and in place (recv = send + index * count) */
    for (i = 0; i < N * DP; i++) host[i] = value(rank, i);
    d = device_floats(host, N * DP);
    {
        float *recv = NULL;
        cudaMalloc((void **)&recv, N * sizeof(float));
        CHECK(c->reduce_scatter(c, &g.dp, d, recv, N, MGT_F32) == MGT_OK, "%s", last_error);
        CHECK(c->reduce_scatter(c, &g.dp, d, d + (size_t)g.dp.index * N, N, MGT_F32) == MGT_OK, "%s", last_error);
        to_host(host, recv, N, compute);
        for (i = 0, bad = 0; i < N; i++) {
            for (want = 0, j = 0; j < DP; j++) want += value(g.dp.ranks[j], g.dp.index * N + i);
            bad += host[i] != want;
        }
        CHECK(!bad, "%d elements of the DP reduce-scatter wrong", bad);
        to_host(host, d + (size_t)g.dp.index * N, N, compute);
        for (i = 0, bad = 0; i < N; i++) {
            for (want = 0, j = 0; j < DP; j++) want += value(g.dp.ranks[j], g.dp.index * N + i);
            bad += host[i] != want;
        }
        CHECK(!bad, "%d elements of the in-place DP reduce-scatter wrong", bad);
        cudaFree(recv);
    }
    cudaFree(d);

    /* all-gather over DP, in place (send = recv + index * count) */
    for (i = 0; i < N * DP; i++) host[i] = -1.0f;
    for (i = 0; i < N; i++) host[g.dp.index * N + i] = value(rank, i);
    d = device_floats(host, N * DP);
    CHECK(c->all_gather(c, &g.dp, d + (size_t)g.dp.index * N, d, N, MGT_F32) == MGT_OK, "%s", last_error);
    to_host(host, d, N * DP, compute);
    for (i = 0, bad = 0; i < N * DP; i++) bad += host[i] != value(g.dp.ranks[i / N], i % N);
    CHECK(!bad, "%d elements of the DP all-gather wrong", bad);
    cudaFree(d);

    /* broadcast over PP from the last stage */
    for (i = 0; i < N; i++) host[i] = value(rank, i);
    d = device_floats(host, N);
    CHECK(c->broadcast(c, &g.pp, d, N, MGT_F32, PP - 1) == MGT_OK, "%s", last_error);
    to_host(host, d, N, compute);
    for (i = 0, bad = 0; i < N; i++) bad += host[i] != value(g.pp.ranks[PP - 1], i);
    CHECK(!bad, "%d elements of the PP broadcast wrong", bad);
    cudaFree(d);

    /* the embedding pair: first and last stage only */
    if (g.ppr == 0 || g.ppr == PP - 1) {
        for (i = 0; i < N; i++) host[i] = value(rank, i);
        d = device_floats(host, N);
        CHECK(c->all_reduce(c, &g.emb, d, N, MGT_F32) == MGT_OK, "%s", last_error);
        to_host(host, d, N, compute);
        for (i = 0, bad = 0; i < N; i++) bad += host[i] != value(g.emb.ranks[0], i) + value(g.emb.ranks[1], i);
        CHECK(!bad, "%d elements of the embedding all-reduce wrong", bad);
        cudaFree(d);
    }

    /* send/recv: stage 0 sends activations to stage 1 of its pipeline */
    d = NULL;
    cudaMalloc((void **)&d, N * sizeof(float));
    if (g.ppr == 0) {
        for (i = 0; i < N; i++) host[i] = value(rank, i) * 2.0f;
        cudaMemcpy(d, host, N * sizeof(float), cudaMemcpyHostToDevice);
        CHECK(c->send(c, g.pp.ranks[1], d, N, MGT_F32) == MGT_OK, "%s", last_error);
    } else {
        CHECK(c->recv(c, g.pp.ranks[0], d, N, MGT_F32) == MGT_OK, "%s", last_error);
        to_host(host, d, N, compute);
        for (i = 0, bad = 0; i < N; i++) bad += host[i] != value(g.pp.ranks[0], i) * 2.0f;
        CHECK(!bad, "%d elements received wrong", bad);
    }
    cudaStreamSynchronize(compute); /* the send has left before its buffer is freed */
    cudaFree(d);

    /* bf16 all-reduce over the world: small integers are exact in bf16 */
    {
        unsigned short h16[64], *d16 = NULL;
        for (i = 0; i < 64; i++) { float f = (float)(i % 4); unsigned u; memcpy(&u, &f, 4); h16[i] = (unsigned short)(u >> 16); }
        cudaMalloc((void **)&d16, sizeof h16);
        cudaMemcpy(d16, h16, sizeof h16, cudaMemcpyHostToDevice);
        CHECK(c->all_reduce(c, &g.all, d16, 64, MGT_BF16) == MGT_OK, "%s", last_error);
        cudaStreamSynchronize(compute);
        cudaMemcpy(h16, d16, sizeof h16, cudaMemcpyDeviceToHost);
        for (i = 0, bad = 0; i < 64; i++) { unsigned u = (unsigned)h16[i] << 16; float f; memcpy(&f, &u, 4); bad += f != (float)(W * (i % 4)); }
        CHECK(!bad, "%d bf16 sums wrong", bad);
        cudaFree(d16);
    }

    /* host buffers, as mgt.h's sum of doubles over a group: all-gathered through the stage, which was
       made with the communicator: inside a step (the fakes fail an allocation or a pageable copy there) */
    {
        double mine = 0.1 * (rank + 1), all[W];
        mgt_cuda_fake_note(rank, MGT_NOTE_STEP_BEGIN, NULL);
        CHECK(c->all_gather(c, &g.all, &mine, all, 1, MGT_F64) == MGT_OK, "%s", last_error);
        mgt_cuda_fake_note(rank, MGT_NOTE_STEP_END, NULL);
        for (i = 0, bad = 0; i < W; i++) bad += all[i] != 0.1 * (i + 1);
        CHECK(!bad, "%d gathered doubles wrong", bad);
    }
    CHECK(c->barrier(c, &g.all) == MGT_OK, "%s", last_error);

    /* a group the communicator was not made with */
    {
        mgt_group other = g.tp;
        other.id = 99 * W;
        d = NULL;
        cudaMalloc((void **)&d, sizeof(float));
        CHECK(c->all_reduce(c, &other, d, 1, MGT_F32) == MGT_ERROR_COMM && strstr(last_error, "was not given this group"), "%s", last_error);
        cudaFree(d);
    }

    CHECK(mgt_nccl_settle(c) == MGT_OK, "%s", last_error);
    /* statistics: what the runtime shows per collective */
    CHECK(c->stats.calls[MGT_COLL_ALL_REDUCE] == 2 + (g.ppr == 0 || g.ppr == PP - 1), "all-reduce calls %lld", c->stats.calls[MGT_COLL_ALL_REDUCE]);
    CHECK(c->stats.calls[MGT_COLL_REDUCE_SCATTER] == 2 && c->stats.bytes[MGT_COLL_REDUCE_SCATTER] == 2.0 * N * DP * 4, "reduce-scatter %lld calls %g bytes",
          c->stats.calls[MGT_COLL_REDUCE_SCATTER], c->stats.bytes[MGT_COLL_REDUCE_SCATTER]);
    CHECK(c->stats.calls[MGT_COLL_ALL_GATHER] == 2 && c->stats.bytes[MGT_COLL_ALL_GATHER] == (double)N * DP * 4 + 8.0 * W, "all-gather %g bytes",
          c->stats.bytes[MGT_COLL_ALL_GATHER]);
    CHECK(c->stats.calls[MGT_COLL_SEND_RECV] == 1 && c->stats.bytes[MGT_COLL_SEND_RECV] == N * 4.0, "send/recv %g bytes", c->stats.bytes[MGT_COLL_SEND_RECV]);
    CHECK(c->stats.calls[MGT_COLL_BARRIER] == 1, "barrier calls");
    for (i = 0, bad = 0; i < MGT_COLL_COUNT; i++) bad += !(c->stats.seconds[i] >= 0);
    CHECK(!bad, "seconds are times");

    /* a defer applies to the next call that moves data: one of zero elements takes it with it, so
       the call after it orders the compute stream after itself (else the fakes report reading d) */
    for (i = 0; i < N; i++) host[i] = value(rank, i);
    d = device_floats(host, N);
    (void)c->defer(c);
    CHECK(c->all_reduce(c, &g.tp, d, 0, MGT_F32) == MGT_OK, "%s", last_error);
    CHECK(c->all_reduce(c, &g.tp, d, N, MGT_F32) == MGT_OK, "%s", last_error);
    to_host(host, d, N, compute);
    CHECK(host[3] == value(g.tp.ranks[0], 3) + value(g.tp.ranks[1], 3), "the all-reduce after an empty deferred one: %g", host[3]);
    cudaFree(d);
    mgt_nccl_comm_destroy(c);
    cudaStreamDestroy(compute);
    return NULL;
}

/* after one rank's error mgt_nccl_world_abort frees every communicator: the other ranks' next
   calls and their settle fail with the reason instead of using freed communicators */
static pthread_barrier_t abort_barrier;
static void *abort_main(void *arg) {
    int rank = (int)(size_t)arg;
    grid_rank g;
    const mgt_group *groups[5];
    cudaStream_t compute;
    mgt_comm *c = NULL;
    float *d = NULL;
    grid(&g, rank);
    groups[0] = &g.tp; groups[1] = &g.dp; groups[2] = &g.pp; groups[3] = &g.emb; groups[4] = &g.all;
    cudaSetDevice(rank);
    cudaStreamCreate(&compute);
    CHECK(mgt_nccl_comm_create(world, rank, compute, groups, 5, &c) == MGT_OK, "comm_create: %s", last_error);
    cudaMalloc((void **)&d, N * sizeof(float));
    pthread_barrier_wait(&abort_barrier);
    if (rank == 0) mgt_nccl_world_abort(world);
    pthread_barrier_wait(&abort_barrier);
    CHECK(c->all_reduce(c, &g.dp, d, N, MGT_F32) == MGT_ERROR_COMM && strstr(last_error, "aborted"), "all-reduce after the abort: %s", last_error);
    CHECK(c->send(c, g.pp.ranks[1 - g.ppr], d, N, MGT_F32) == MGT_ERROR_COMM, "send after the abort: %s", last_error);
    CHECK(mgt_nccl_settle(c) == MGT_ERROR_COMM && strstr(last_error, "aborted"), "settle after the abort: %s", last_error);
    cudaFree(d);
    mgt_nccl_comm_destroy(c);
    cudaStreamDestroy(compute);
    return NULL;
}

/* the abort's order: rank 1 stalls in its first call of a step (MGT_FAKE_STALL_RANK=1, set by the
   parent: the fakes read it once) and polls ncclCommGetAsyncError, inside NCCL most of the time (the
   fake's progress engine takes a millisecond there); rank 0 aborts the world meanwhile. The abort
   takes each rank's guard, so it waits for rank 1's thread to leave NCCL; without it the fakes report
   a communicator aborted under a thread inside it. Run as this program's --stalled-abort child. */
static void *stalled_main(void *arg) {
    int rank = (int)(size_t)arg;
    grid_rank g;
    const mgt_group *groups[5];
    cudaStream_t compute;
    mgt_comm *c = NULL;
    float *d = NULL;
    grid(&g, rank);
    groups[0] = &g.tp; groups[1] = &g.dp; groups[2] = &g.pp; groups[3] = &g.emb; groups[4] = &g.all;
    cudaSetDevice(rank);
    cudaStreamCreate(&compute);
    CHECK(mgt_nccl_comm_create(world, rank, compute, groups, 5, &c) == MGT_OK, "comm_create: %s", last_error);
    cudaMalloc((void **)&d, N * sizeof(float));
    CHECK(c->barrier(c, &g.tp) == MGT_OK, "the TP group's warm-up: %s", last_error); /* connected before the step */
    pthread_barrier_wait(&abort_barrier);
    if (rank == 1) {
        mgt_result r;
        mgt_cuda_fake_note(rank, MGT_NOTE_STEP_BEGIN, NULL);
        r = c->all_reduce(c, &g.tp, d, N, MGT_F32); /* stalls until the abort */
        mgt_cuda_fake_note(rank, MGT_NOTE_STEP_END, NULL);
        CHECK(r == MGT_ERROR_COMM && strstr(last_error, "stopped with the world"), "the stalled call after the abort: %s", last_error);
        printf("rank 1 returned: %s\n", last_error);
    } else if (rank == 0) {
        struct timespec ts = {0, 300000000L};
        nanosleep(&ts, NULL);
        mgt_nccl_world_abort(world);
    }
    pthread_barrier_wait(&abort_barrier);
    cudaFree(d);
    mgt_nccl_comm_destroy(c);
    cudaStreamDestroy(compute);
    return NULL;
}
static int stalled_abort(void) {
    pthread_t t[W];
    int devices[W], i, rank = -1;
    for (i = 0; i < W; i++) devices[i] = i;
    CHECK(mgt_nccl_world_create(W, 0, W, devices, NULL, 60.0, fail, &world) == MGT_OK, "world: %s", last_error);
    pthread_barrier_init(&abort_barrier, NULL, W);
    for (i = 0; i < W; i++) pthread_create(&t[i], NULL, stalled_main, (void *)(size_t)i);
    for (i = 0; i < W; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&abort_barrier);
    mgt_nccl_world_destroy(world);
    return failures ? 1 : 0;
}
/* A wait wakes when its event completes (issue 22, defect 6): rank 0 waits inside a step for an
   all-reduce whose peer arrives 150 ms later; from rank 1's call to rank 0's return, over 9 tries.
   Polling with a sleep that grows to 1 ms woke 0.5 ms late or more (uniform over the last sleep,
   and the fake's poll takes its share); a wait handed to a thread in cudaEventSynchronize wakes in
   tens of microseconds. The bound, 0.35 ms on the median, leaves room for a busy 2-core machine's
   scheduling (a wake-up that waits for a core is an outlier the median ignores); under a sanitizer
   (every lock and wake-up several times slower) the figure is printed, not checked. Run as this
   program's --wake child with MGT_FAKE_NCCL_LATE=0, so that no call of rank 1's is launched late
   (its call would then take a millisecond of polling, which is not the wait's). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif
#define WAKE_TRIES 9
static pthread_barrier_t wake_barrier;
static double wake_called[WAKE_TRIES], wake_returned[WAKE_TRIES];
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static void *wake_main(void *arg) {
    int rank = (int)(size_t)arg, i;
    int members[2] = {0, 1};
    mgt_group all = {0};
    const mgt_group *groups[1];
    cudaStream_t compute;
    cudaEvent_t done;
    mgt_comm *c = NULL;
    float *d = NULL;
    all.id = 0, all.size = 2, all.index = rank, all.ranks = members, all.kind = MGT_GROUP_WORLD;
    groups[0] = &all;
    cudaSetDevice(rank);
    cudaStreamCreate(&compute);
    cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
    CHECK(mgt_nccl_comm_create(world, rank, compute, groups, 1, &c) == MGT_OK, "comm_create: %s", last_error);
    cudaMalloc((void **)&d, N * sizeof(float));
    cudaMemsetAsync(d, 0, N * sizeof(float), compute);
    CHECK(c->all_reduce(c, &all, d, N, MGT_F32) == MGT_OK, "the warm-up: %s", last_error); /* connected before the steps */
    CHECK(mgt_nccl_settle(c) == MGT_OK, "settle: %s", last_error);
    for (i = 0; i < WAKE_TRIES; i++) {
        pthread_barrier_wait(&wake_barrier);
        mgt_cuda_fake_note(rank, MGT_NOTE_STEP_BEGIN, NULL);
        if (rank == 1) {
            struct timespec ts = {0, 150000000L};
            nanosleep(&ts, NULL);
        }
        if (rank == 1) wake_called[i] = now_s(); /* its part can complete rank 0's before the call returns */
        CHECK(c->all_reduce(c, &all, d, N, MGT_F32) == MGT_OK, "all-reduce: %s", last_error);
        cudaEventRecord(done, compute);
        CHECK(mgt_watchdog_wait(mgt_nccl_watchdog(world), rank, done, "the all-reduce", NULL, 0) == MGT_OK, "wait: %s", last_error);
        if (rank == 0) wake_returned[i] = now_s();
        mgt_cuda_fake_note(rank, MGT_NOTE_STEP_END, NULL);
    }
    cudaFree(d);
    mgt_nccl_comm_destroy(c);
    cudaEventDestroy(done);
    cudaStreamDestroy(compute);
    return NULL;
}
static int wake_on_completion(void) {
    pthread_t t[2];
    int devices[2] = {0, 1}, i, rank = -1;
    double late[WAKE_TRIES], median;
    CHECK(mgt_nccl_world_create(2, 0, 2, devices, NULL, 60.0, fail, &world) == MGT_OK, "world: %s", last_error);
    pthread_barrier_init(&wake_barrier, NULL, 2);
    for (i = 0; i < 2; i++) pthread_create(&t[i], NULL, wake_main, (void *)(size_t)i);
    for (i = 0; i < 2; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&wake_barrier);
    mgt_nccl_world_destroy(world);
    printf("a wait woke after its peer's call (ms):");
    for (i = 0; i < WAKE_TRIES; i++) { /* sorted by insertion */
        int j = i;
        double x = wake_returned[i] - wake_called[i];
        printf(" %.3f", 1e3 * x);
        for (; j > 0 && late[j - 1] > x; j--) late[j] = late[j - 1];
        late[j] = x;
    }
    median = late[WAKE_TRIES / 2];
    printf("; median %.3f ms%s\n", 1e3 * median, SANITIZED ? ", not checked under a sanitizer" : "");
    CHECK(SANITIZED || median < 0.35e-3, "a wait woke %.3f ms (the median) after its peer's call: it does not wake on completion", 1e3 * median);
    return failures ? 1 : 0;
}
/* runs this program with `flag` and env=value, its output into out; its wait status */
static int run_child(const char *self, const char *flag, const char *env, const char *value, char *out, size_t cap) {
    int fd[2], status = 0;
    ssize_t n = 0, k;
    pid_t pid;
    out[0] = 0;
    if (pipe(fd) != 0) return -1;
    pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        dup2(fd[1], 2);
        close(fd[0]);
        close(fd[1]);
        setenv(env, value, 1);
        execl(self, self, flag, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    while (n < (ssize_t)cap - 1 && (k = read(fd[0], out + n, cap - 1 - (size_t)n)) > 0) n += k;
    out[n] = 0;
    close(fd[0]);
    waitpid(pid, &status, 0);
    return status;
}
/* runs this program as --stalled-abort with MGT_FAKE_STALL_RANK=1 and reads what it says */
static void expect_stalled_abort(const char *self) {
    int rank = -1;
    char out[8192];
    int status = run_child(self, "--stalled-abort", "MGT_FAKE_STALL_RANK", "1", out, sizeof out);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && strstr(out, "rank 1 returned: stopped with the world"),
          "a stalled rank inside NCCL, the world aborted by another (status %d):\n%s", status, out);
}
/* runs this program as --wake with MGT_FAKE_NCCL_LATE=0 and passes on what it printed. The bound is
   on a mechanism, not a speed: a busy machine can delay a wake-up past it by chance (a clean-clone
   run beside other work measured a 0.574 ms median once), so up to three runs, and one must pass;
   a wait that polls (1.76 ms median, the old code) fails all three */
static void expect_wake(const char *self) {
    int rank = -1, run, status = 0;
    char out[8192];
    for (run = 1; run <= 3; run++) {
        status = run_child(self, "--wake", "MGT_FAKE_NCCL_LATE", "0", out, sizeof out);
        printf("%s", out);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && strstr(out, "a wait woke")) break;
        if (run < 3) printf("(run %d of 3 missed the bound: again)\n", run);
    }
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && strstr(out, "a wait woke"), "--wake, 3 runs (status %d)", status);
}

int main(int argc, char **argv) {
    pthread_t t[W];
    int devices[W], i, rank = -1;
    mgt_result r;
    if (argc == 2 && !strcmp(argv[1], "--stalled-abort")) return stalled_abort();
    if (argc == 2 && !strcmp(argv[1], "--wake")) return wake_on_completion();
    for (i = 0; i < W; i++) devices[i] = i;
    r = mgt_nccl_world_create(W, 0, W, devices, NULL, 60.0, fail, &world);
    CHECK(r == MGT_OK, "world: %s", last_error);
    if (r != MGT_OK) return 1;
    for (i = 0; i < W; i++) pthread_create(&t[i], NULL, rank_main, (void *)(size_t)i);
    for (i = 0; i < W; i++) pthread_join(t[i], NULL);
    mgt_nccl_world_destroy(world);

    CHECK(mgt_nccl_world_create(W, 0, W, devices, NULL, 60.0, fail, &world) == MGT_OK, "second world: %s", last_error);
    pthread_barrier_init(&abort_barrier, NULL, W);
    for (i = 0; i < W; i++) pthread_create(&t[i], NULL, abort_main, (void *)(size_t)i);
    for (i = 0; i < W; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&abort_barrier);
    mgt_nccl_world_destroy(world);
    expect_stalled_abort(argv[0]);
    expect_wake(argv[0]);
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
