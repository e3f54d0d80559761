/* src/sim.c - the step simulator: its ranks' clocks, the devices it knows, the price of an op */
/* ---- the step simulator: a backend and a communicator that keep clocks ----------------------
   Each rank has three clocks: its host thread (th), its compute stream (tc) and its communication
   stream (tm), in seconds from the start of the step. An op costs the host a launch and runs on
   the compute stream once both are there; a collective starts on the communication stream after
   the compute enqueued before it (NCCL's ordering) and completes when its last member has issued
   it, plus its cost; the compute waits for it, unless the call was deferred, until sync(ticket). A
   send occupies the sender's stream for its cost (buffered: it does not wait for the receiver); a
   receive completes at max(its issue, the send's issue) + the cost. Devices with host_sync (the
   CPU) run everything on the rank's thread, one thing after another. No data is read or written:
   alloc returns addresses inside a reserved range that is never mapped, and host buffers a call
   writes (a gathered norm, downloaded losses) get zeros. */

#define MGT__SIM_TICKETS 64
#define MGT__SIM_PCIE 25e9 /* bytes/s of host-device copies (PCIe 4.0 x16, what one direction achieves) */

typedef struct mgt__sim_world mgt__sim_world;
typedef struct mgt__sim_event { const char *name; double start, dur; int stream; } mgt__sim_event;

typedef struct mgt__sim_rank {
    mgt__sim_world *w;
    int rank;
    mgt_backend be;
    mgt_comm comm;
    double th, tc, tm;              /* host, compute stream, communication stream */
    int tm_coll;                    /* the collective the communication stream ends with */
    int defer_next;
    long long args[6];              /* the shape arguments of the op being charged (MGT__SIM_ARGS) */
    double tensor_frac;             /* and its GEMM part's fraction of the tensor peak (mgt_sim_op.tensor_frac) */
    double host_us;                 /* and its host time beyond the launches (mgt_sim_op.host_us) */
    double serial_us;               /* and its one-SM part (mgt_sim_op.serial_us) */
    long tickets;
    double ticket_end[MGT__SIM_TICKETS];
    int ticket_coll[MGT__SIM_TICKETS];
    int seq_id[8];                  /* calls made on each group so far */
    long seq[8];
    int nseq;
    mgt_sim_rank st;
    mgt__sim_event *ev;             /* the trace, when asked for */
    size_t nev, cap_ev;
} mgt__sim_rank;

typedef struct mgt__sim_slot { int arrived, left, done; double issue, cost, end; } mgt__sim_slot;
typedef struct mgt__sim_group {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int known, nodes, per_node;     /* the nodes its members span, the most members on one of them */
    mgt__sim_slot slot[2];          /* a member cannot be two calls ahead: each call waits for all */
} mgt__sim_group;
typedef struct mgt__sim_msg { int src, taken; double issue, cost; } mgt__sim_msg;
typedef struct mgt__sim_box {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    mgt__sim_msg *msg;
    size_t n, head, cap;
} mgt__sim_box;

typedef struct mgt__sim_measured { const char *op; long long args[6]; int dtype; double sec; } mgt__sim_measured;
typedef struct mgt__sim_meter {     /* a CPU backend and buffers that run ops of the shapes met so far */
    mgt_backend *be;
    size_t wide, scratch;           /* its fp32 workspace for 16-bit ops; attention's per thread */
    int dtype;
    float *arena;
    size_t floats;
} mgt__sim_meter;
struct mgt__sim_world {
    mgt_sim_options opt;
    int world, ngroups, aborted;
    /* the cpu device: ops priced by running the CPU backend's (threads of a rank), once per shape */
    int measure_threads;
    int companions;                 /* the other ranks the machine runs at once, which run the op beside the one timed */
    pthread_mutex_t measure_mu;
    mgt__sim_meter *meters;         /* [0] times, the others are the companions */
    mgt__sim_measured *measured;
    size_t nmeasured, cap_measured;
    long long ops_modelled;
    mgt__sim_rank *ranks;
    mgt__sim_group *groups;
    mgt__sim_box *boxes;
    char *base;                     /* the reserved, never mapped, range the fake pointers lie in */
    size_t span, bump;
    pthread_mutex_t mu;
};

static const char *const mgt__sim_family_names[MGT_SIM_FAMILIES] = {"gemm", "attention", "norm", "elementwise", "embedding", "loss", "optimizer"};
MGTDEF const char *mgt_sim_family_name(int family) { return family >= 0 && family < MGT_SIM_FAMILIES ? mgt__sim_family_names[family] : "?"; }

/* The devices: dense peaks (no structured sparsity), per GPU; sources in docs/simulator.md.
   Achievable fractions and latencies are assumptions, stated there too, except where a source is named:
   - link_frac 0.82: NCCL's protocol overhead on NVLink, "450GB/s is the line rate. With the protocol
     overhead (~20%) NCCL can get an effective NVLink bandwidth of 370GB/s" (S. Jeaugey, NCCL maintainer,
     github.com/NVIDIA/nccl-tests/issues/212); the same overhead assumed on the other links.
   - nvls_gbps 275: an all-reduce inside an H100/H200 node goes through NVLink SHARP by default, "On 8
     GPUs, you should reach a peak busBw of ~480GB/s (algbw ~275GB/s)" (same thread; nccl-tests issue
     290: 476 GB/s measured, "in the expected range for H100"). A100 has no NVLS; for B200 no published
     figure was found, so it keeps the ring.
   - transc_gps: exp2/tanh run on the special function units, 16 results per clock per SM on compute
     capability 8.0 and 9.0 (CUDA C++ Programming Guide, "Arithmetic Instructions" throughput table),
     times SMs and clock; B200 assumed alike.
   - clock_ghz: the clock the datasheet's dense BF16 peak implies (peak / (SMs x dense FLOP per clock
     per SM: 2048 on A100, 4096 on H100, 8192 assumed on B200)): 1.41, 1.83, 1.86 GHz.
   name title {TF32, BF16, FP16 TFLOP/s} fp32 TFLOP/s, GB/s, GiB, gemm_frac, gemm_dim, vector_frac,
   mem_frac, launch us, NVLink GB/s, NIC GB/s, latency inside/between nodes us, per ring step us,
   link_frac, reserve GiB, host_sync, exp/tanh G/s (0: vector_tflops / 4), SMs, clock GHz, NVLS GB/s */
static mgt_sim_device mgt__sim_table[] = {
    {"a100", "NVIDIA A100 SXM4 80GB", {156, 312, 312}, 19.5, 2039, 80, 0.80, 64, 0.5, 0.80, 4, 300, 25, 10, 20, 0.5, 0.82, 1.0, 0, 16 * 108 * 1.41, 108, 1.41, 0},
    {"h100", "NVIDIA H100 SXM5 80GB", {494.7, 989.4, 989.4}, 66.9, 3350, 80, 0.75, 64, 0.5, 0.85, 4, 450, 50, 10, 20, 0.5, 0.82, 1.0, 0, 16 * 132 * 1.83, 132, 1.83,
     275},
    {"h200", "NVIDIA H200 SXM 141GB", {494.7, 989.4, 989.4}, 66.9, 4800, 141, 0.75, 64, 0.5, 0.85, 4, 450, 50, 10, 20, 0.5, 0.82, 1.0, 0, 16 * 132 * 1.83, 132, 1.83,
     275},
    {"b200", "NVIDIA B200 (HGX) 180GB", {1100, 2250, 2250}, 75, 7700, 180, 0.70, 64, 0.5, 0.85, 4, 900, 50, 10, 20, 0.5, 0.82, 1.0, 0, 16 * 148 * 1.86, 148, 1.86, 0},
    {"cpu", "this machine (measured)", {0, 0, 0}, 0, 0, 0, 1.0, 0, 1.0, 1.0, 2, 0, 0, 2, 2, 0.2, 1.0, 0, 1, 0, 0, 0, 0},
};
enum { MGT__SIM_NDEVICES = (int)(sizeof mgt__sim_table / sizeof mgt__sim_table[0]) };
static pthread_mutex_t mgt__sim_cpu_mu = PTHREAD_MUTEX_INITIALIZER;
static int mgt__sim_cpu_threads; /* the thread count the cpu entry was measured with, 0 none */

MGTDEF int mgt_sim_devices(const mgt_sim_device **table) {
    if (table) *table = mgt__sim_table;
    return MGT__SIM_NDEVICES;
}

/* bytes/s of memcpy over `bytes`, the median of a few repetitions on the calling thread */
static double mgt__sim_copy_rate(size_t bytes) {
    char *a = (char *)MGT_MALLOC(bytes), *b = (char *)MGT_MALLOC(bytes);
    double rates[9];
    int i, j, n = 9;
    if (!a || !b) { MGT_FREE(a); MGT_FREE(b); return 0; }
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    for (i = 0; i < n; i++) {
        double t0 = mgt_now(), dt;
        memcpy(i % 2 ? a : b, i % 2 ? b : a, bytes);
        dt = mgt_now() - t0;
        rates[i] = dt > 0 ? (double)bytes / dt : 0;
    }
    for (i = 1; i < n; i++)
        for (j = i; j > 0 && rates[j] < rates[j - 1]; j--) { double t = rates[j]; rates[j] = rates[j - 1]; rates[j - 1] = t; }
    MGT_FREE(a);
    MGT_FREE(b);
    return rates[n / 2];
}

/* exp per second of the CPU backend's vectorised mgt__expf on the calling thread (the median of a few runs) */
static double mgt__sim_exp_rate(void) {
    enum { n = 1 << 16 };
    float *x = (float *)MGT_MALLOC(sizeof(float) * n);
    double rates[7], sink = 0;
    int i, r, j;
    if (!x) return 0;
    for (i = 0; i < n; i++) x[i] = -8.0f + 8.0f * (float)i / n;
    for (r = 0; r < 7; r++) {
        double t0 = mgt_now(), dt;
        for (j = 0; j < 16; j++) {
            for (i = 0; i < n; i++) x[i] = mgt__expf(x[i]) - 1.0f;
            sink += x[j];
        }
        dt = mgt_now() - t0;
        rates[r] = dt > 0 ? 16.0 * n / dt : 0;
    }
    for (i = 1; i < 7; i++)
        for (j = i; j > 0 && rates[j] < rates[j - 1]; j--) { double t = rates[j]; rates[j] = rates[j - 1]; rates[j - 1] = t; }
    MGT_FREE(x);
    return sink == sink ? rates[3] : rates[3]; /* sink keeps the loop */
}

MGTDEF mgt_result mgt_sim_device_find(const char *name, int threads, mgt_sim_device *out) {
    int i, j;
    if (!name || !out) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_sim_device_find: name and out are required");
    for (i = 0; i < MGT__SIM_NDEVICES; i++) {
        const char *a = name, *b = mgt__sim_table[i].name;
        for (j = 0; a[j] && b[j] && (a[j] | 0x20) == (b[j] | 0x20); j++) {}
        if (a[j] || b[j]) continue;
        if (mgt__sim_table[i].host_sync) { /* this machine: measured once per thread count */
            mgt_sim_device *d = &mgt__sim_table[i];
            if (threads < 1) threads = mgt_cpu_count();
            pthread_mutex_lock(&mgt__sim_cpu_mu);
            if (mgt__sim_cpu_threads != threads) {
                double gf = mgt_cpu_sgemm_gflops(threads, 0.3), copy = mgt__sim_copy_rate((size_t)64 << 20);
                d->tensor_tflops[0] = d->tensor_tflops[1] = d->tensor_tflops[2] = gf * 1e-3;
                d->vector_tflops = gf * 1e-3 / 8; /* loops that vectorise, without the GEMM's reuse */
                d->mem_gbps = copy * 2e-9;        /* memcpy reads and writes each byte */
                d->intra_gbps = d->inter_gbps = copy * 1e-9;
                d->mem_gib = 0;
                d->transc_gps = mgt__sim_exp_rate() * threads * 1e-9;
                mgt__sim_cpu_threads = threads;
            }
            *out = *d;
            pthread_mutex_unlock(&mgt__sim_cpu_mu);
        } else
            *out = mgt__sim_table[i];
        return MGT_OK;
    }
    return mgt__fail(MGT_ERROR_ARGUMENT, "unknown device '%s' (a100, h100, h200, b200 or cpu)", name);
}

MGTDEF void mgt_sim_options_init(mgt_sim_options *opt) {
    if (!opt) return;
    memset(opt, 0, sizeof *opt);
    opt->device = mgt__sim_table[1];
    opt->gpus_per_node = 8;
}

/* ---- prices */

static double mgt__sim_max(double a, double b) { return a > b ? a : b; }

/* seconds of op on the device, storage type dtype: the GEMM part's roofline plus the rest's */
static double mgt__sim_price(const mgt_sim_device *d, int dtype, const mgt_sim_op *op) {
    double t = 0, bw = d->mem_gbps * 1e9 * d->mem_frac;
    if (op->gemm_flops > 0 || op->gemm_bytes > 0) {
        double dmin = op->m < op->n ? op->m : op->n, eff;
        dmin = op->k < dmin ? op->k : dmin;
        eff = op->tensor_frac > 0 ? op->tensor_frac : d->gemm_frac * (dmin > 0 ? dmin / (dmin + d->gemm_dim) : 1.0);
        t += mgt__sim_max(op->gemm_flops / (d->tensor_tflops[dtype >= 0 && dtype < 3 ? dtype : 0] * 1e12 * eff), op->gemm_bytes / bw);
    }
    if (op->flops > 0 || op->bytes > 0) {
        double transc = d->transc_gps > 0 ? d->transc_gps * 1e9 : d->vector_tflops * 1e12 / 4;
        t += mgt__sim_max(op->flops / (d->vector_tflops * 1e12 * d->vector_frac) + op->transcendentals / transc, op->bytes / bw);
    }
    return t + op->serial_us * 1e-6;
}

static void mgt__sim_trace(mgt__sim_rank *rk, const char *name, double start, double dur, int stream) {
    if (!rk->w->opt.trace || dur <= 0) return;
    if (rk->nev == rk->cap_ev) {
        size_t cap = rk->cap_ev ? 2 * rk->cap_ev : 1024;
        mgt__sim_event *p = (mgt__sim_event *)MGT_REALLOC(rk->ev, sizeof *p * cap);
        if (!p) return; /* the trace is best effort */
        rk->ev = p;
        rk->cap_ev = cap;
    }
    rk->ev[rk->nev].name = name;
    rk->ev[rk->nev].start = start;
    rk->ev[rk->nev].dur = dur;
    rk->ev[rk->nev++].stream = stream;
}
