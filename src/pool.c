/* src/pool.c - the CPUs a process may use, the thread pool of a rank; bf16 and fp16 conversions */
/* the CPUs this process may run on: its affinity (Cpus_allowed_list, as taskset, numactl and
   mpirun's binding set it), else the online ones; read from /proc so that no feature macro is needed */
MGTDEF int mgt_cpu_count(void) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int n = 0;
    char line[4096];
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f)) {
        const char *p = line + strlen("Cpus_allowed_list:");
        if (strncmp(line, "Cpus_allowed_list:", strlen("Cpus_allowed_list:"))) continue;
        while (*p) { /* "0-3,8,10-11" */
            char *end;
            long lo = strtol(p, &end, 10), hi = lo;
            if (end == p) { p++; continue; }
            p = end;
            if (*p == '-') { hi = strtol(p + 1, &end, 10); p = end; }
            if (hi >= lo) n += (int)(hi - lo + 1);
        }
        break;
    }
    if (f) fclose(f);
    if (n < 1 || (online >= 1 && n > online)) n = online < 1 ? 1 : (int)online;
    return n;
}

/* ---- thread pool: the rank's thread plus helpers, one parallel region at a time --------------- */

typedef void (*mgt__task_fn)(void *ctx, int tid, int nthreads);

/* A region costs two handovers: the workers learn of it, the caller learns they are done. Through
   a futex each is a sleep and a wake-up, 5-20 us, which small models pay a few hundred times a
   step (the nanoGPT shape's 40 ms step spent a fifth of its time there). So a waiting thread first
   spins on the region's counter for about MGT__POOL_SPIN_US and only then sleeps; it spins only
   while the process's pools have no more threads than it has cores (mgt__pool_threads), and
   yields between checks, so that spinning does not keep a core from a thread with work (another
   process's, when several share the machine). */
#define MGT__POOL_SPIN_US 50.0
static int mgt__pool_threads; /* threads of every live pool (the calling threads counted), atomically */
static int mgt__pool_cores;   /* mgt_cpu_count(), read when the first pool starts */

typedef struct mgt__pool {
    int n; /* threads including the calling one */
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    mgt__task_fn fn;
    void *ctx;
    unsigned long generation; /* regions started: atomic; fn and ctx are written before it moves */
    int pending, quit;        /* workers still in the region; atomic */
    int sleepers, caller_asleep; /* under mu, read atomically: who needs a futex wake-up */
} mgt__pool;

typedef struct mgt__worker_arg { mgt__pool *pool; int tid; } mgt__worker_arg;

static void mgt__pool_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}
/* spins, when spinning is allowed, for about MGT__POOL_SPIN_US while the generation is `seen` (a
   worker) or workers are pending (the caller); 1 when that changed, 0 when the thread should sleep */
static int mgt__pool_spin(mgt__pool *p, const unsigned long *gen, unsigned long seen, const int *pending) {
    double until;
    int i;
    if (__atomic_load_n(&mgt__pool_threads, __ATOMIC_RELAXED) > __atomic_load_n(&mgt__pool_cores, __ATOMIC_RELAXED)) return 0;
    until = mgt_now() + MGT__POOL_SPIN_US * 1e-6;
    for (;;) {
        for (i = 0; i < 64; i++) {
            if (gen ? __atomic_load_n(gen, __ATOMIC_ACQUIRE) != seen || __atomic_load_n(&p->quit, __ATOMIC_ACQUIRE)
                    : __atomic_load_n(pending, __ATOMIC_ACQUIRE) == 0)
                return 1;
            mgt__pool_pause();
        }
        if (mgt_now() > until) return 0;
        sched_yield(); /* a runnable thread of this core (another process's, when processes share the cores) goes first */
    }
}

static void *mgt__worker(void *arg) {
    mgt__worker_arg *wa = (mgt__worker_arg *)arg;
    mgt__pool *p = wa->pool;
    int tid = wa->tid;
    unsigned long seen = 0;
    MGT_FREE(wa);
    for (;;) {
        mgt__task_fn fn;
        void *ctx;
        if (!mgt__pool_spin(p, &p->generation, seen, NULL)) {
            pthread_mutex_lock(&p->mu);
            /* sleepers, then the counter (both sequentially consistent), against the caller's
               counter, then sleepers: one of the two sees the other, so no wake-up is lost */
            __atomic_add_fetch(&p->sleepers, 1, __ATOMIC_SEQ_CST);
            while (__atomic_load_n(&p->generation, __ATOMIC_SEQ_CST) == seen && !__atomic_load_n(&p->quit, __ATOMIC_SEQ_CST))
                pthread_cond_wait(&p->wake, &p->mu);
            __atomic_sub_fetch(&p->sleepers, 1, __ATOMIC_SEQ_CST);
            pthread_mutex_unlock(&p->mu);
        }
        if (__atomic_load_n(&p->quit, __ATOMIC_ACQUIRE)) return NULL;
        seen = __atomic_load_n(&p->generation, __ATOMIC_ACQUIRE);
        fn = p->fn;
        ctx = p->ctx;
        fn(ctx, tid, p->n);
        if (__atomic_sub_fetch(&p->pending, 1, __ATOMIC_SEQ_CST) == 0 && __atomic_load_n(&p->caller_asleep, __ATOMIC_SEQ_CST)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

static int mgt__pool_init(mgt__pool *p, int n) {
    int i;
    memset(p, 0, sizeof *p);
    p->n = n < 1 ? 1 : n;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    p->threads = (pthread_t *)MGT_MALLOC(sizeof(pthread_t) * (size_t)p->n);
    if (!p->threads) return 0;
    if (!__atomic_load_n(&mgt__pool_cores, __ATOMIC_RELAXED)) __atomic_store_n(&mgt__pool_cores, mgt_cpu_count(), __ATOMIC_RELAXED);
    __atomic_add_fetch(&mgt__pool_threads, p->n, __ATOMIC_RELAXED);
    for (i = 1; i < p->n; i++) {
        mgt__worker_arg *wa = (mgt__worker_arg *)MGT_MALLOC(sizeof *wa);
        if (!wa) return 0;
        wa->pool = p;
        wa->tid = i;
        if (pthread_create(&p->threads[i], NULL, mgt__worker, wa)) {
            MGT_FREE(wa);
            __atomic_sub_fetch(&mgt__pool_threads, p->n - i, __ATOMIC_RELAXED);
            p->n = i;
            return 0;
        }
    }
    return 1;
}

static void mgt__pool_destroy(mgt__pool *p) {
    int i;
    if (!p->threads) return;
    pthread_mutex_lock(&p->mu);
    __atomic_store_n(&p->quit, 1, __ATOMIC_SEQ_CST);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    __atomic_sub_fetch(&mgt__pool_threads, p->n, __ATOMIC_RELAXED);
    MGT_FREE(p->threads);
    p->threads = NULL;
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
}

/* runs fn(ctx, tid, n) on every thread of the pool and returns when all are done */
static void mgt__pool_run(mgt__pool *p, mgt__task_fn fn, void *ctx) {
    if (p->n == 1) { fn(ctx, 0, 1); return; }
    p->fn = fn;
    p->ctx = ctx;
    __atomic_store_n(&p->pending, p->n - 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&p->generation, 1, __ATOMIC_SEQ_CST); /* releases fn, ctx and pending */
    if (__atomic_load_n(&p->sleepers, __ATOMIC_SEQ_CST)) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    fn(ctx, 0, p->n);
    if (!mgt__pool_spin(p, NULL, 0, &p->pending)) {
        pthread_mutex_lock(&p->mu);
        __atomic_store_n(&p->caller_asleep, 1, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&p->pending, __ATOMIC_SEQ_CST)) pthread_cond_wait(&p->done, &p->mu);
        __atomic_store_n(&p->caller_asleep, 0, __ATOMIC_SEQ_CST);
        pthread_mutex_unlock(&p->mu);
    }
}

/* [lo, hi) of n items for thread tid of nth, in chunks that are multiples of align */
static void mgt__span(size_t n, int tid, int nth, size_t align, size_t *lo, size_t *hi) {
    size_t chunks = (n + align - 1) / align, per = chunks / (size_t)nth, extra = chunks % (size_t)nth;
    size_t c0 = (size_t)tid * per + ((size_t)tid < extra ? (size_t)tid : extra);
    size_t c1 = c0 + per + ((size_t)tid < extra ? 1 : 0);
    *lo = c0 * align < n ? c0 * align : n;
    *hi = c1 * align < n ? c1 * align : n;
}

/* ---- 16-bit floats: bf16 (fp32 with the low 16 bits dropped) and IEEE fp16, rounded to nearest even ---- */

static float mgt__bits_f32(uint32_t x) { float f; memcpy(&f, &x, 4); return f; }
static uint32_t mgt__f32_bits(float f) { uint32_t x; memcpy(&x, &f, 4); return x; }
static float mgt__bf16_to_f32(uint16_t h) { return mgt__bits_f32((uint32_t)h << 16); }
static uint16_t mgt__f32_to_bf16(float f) { /* round to nearest even; NaN stays NaN */
    uint32_t x = mgt__f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
static float mgt__f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f) return mgt__bits_f32(sign | 0x7f800000u | (mant << 13));
    if (exp) return mgt__bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
    return mgt__bits_f32(sign | mgt__f32_bits((float)mant * (1.0f / 16777216.0f))); /* subnormal */
}
static uint16_t mgt__f32_to_f16(float f) { /* round to nearest even, overflow to inf, NaN stays NaN */
    uint32_t x = mgt__f32_bits(f), sign = (x >> 16) & 0x8000u, o;
    x &= 0x7fffffffu;
    if (x >= 0x47800000u) { /* 65536 and up, inf, NaN */
        o = x > 0x7f800000u ? 0x7e00u : 0x7c00u;
    } else if (x < 0x38800000u) { /* below 2^-14: subnormal or zero; the fp32 addition rounds */
        const uint32_t magic = 126u << 23; /* 0.5: aligns the 10 mantissa bits at the bottom */
        o = mgt__f32_bits(mgt__bits_f32(x) + mgt__bits_f32(magic)) - magic;
    } else { /* normal; a carry out of the mantissa rounds up to the next binade or to inf */
        x += 0xfffu + ((x >> 13) & 1u) - (112u << 23);
        o = x >> 13;
    }
    return (uint16_t)(o | sign);
}


