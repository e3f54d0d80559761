/* src/device.c - where ranks go: the CUDA library opened at run time, the device choice, the sgemm
   probe */
/* ---- the CUDA backend library: opened on first use (src/plugin.c) ---------------------------- */

static pthread_mutex_t mgt__cuda_mu = PTHREAD_MUTEX_INITIALIZER;
static const mgt_cuda_api *mgt__cuda_api;
static char mgt__cuda_why[800];

MGTDEF mgt_result mgt_set_error(mgt_result result, const char *message) { return mgt__fail(result, "%s", message ? message : ""); }

/* the CUDA library's notes, through mgt's logger */
static void mgt__cuda_note(void *user, int level, const char *message) {
    (void)user;
    mgt__log(level, "%s", message);
}

MGTDEF void mgt_cuda_use(const mgt_cuda_api *api) {
    pthread_mutex_lock(&mgt__cuda_mu);
    mgt__cuda_api = api;
    if (api && api->set_logger) api->set_logger(mgt__cuda_note, NULL);
    mgt__cuda_why[0] = 0;
    pthread_mutex_unlock(&mgt__cuda_mu);
}

static const mgt__dl_lib mgt__cuda_lib = {"MGT_CUDA_LIBRARY", "libmgt_cuda.so", "mgt_cuda_api_get", "CUDA", "ninja cuda", MGT_CUDA_ABI};

/* NVIDIA's libraries as pip wheels (nvidia-cudnn-cu13, nvidia-nccl-cu13, nvidia-cublas...), where
   PyTorch users have them: site-packages/nvidia/<part>/lib, which no loader path names. When the
   CUDA library cannot load for want of one, each such folder of the Python environments in sight
   ($MGT_NVIDIA_PIP: a folder holding nvidia/; $VIRTUAL_ENV, $CONDA_PREFIX, the environment of the
   first python3 on PATH (an activated or a PATH-only virtualenv), ~/.local, /usr/local, /usr) has
   its libraries opened by path (RTLD_GLOBAL), so the library's needs are met by what is loaded,
   and it is tried again. The folder used, or "" when none had any. */
static char mgt__cuda_pip[512];
/* the environment of the first python3 on PATH: its bin/'s parent, links not followed (a
   virtualenv's python3 links to the system's), or "" */
static void mgt__python_prefix(char *out, size_t cap) {
    const char *path = getenv("PATH");
    out[0] = 0;
    while (path && *path) {
        size_t n = strcspn(path, ":");
        char exe[600];
        snprintf(exe, sizeof exe, "%.*s/python3", (int)n, path);
        if (n && !access(exe, X_OK)) {
            char *slash;
            snprintf(out, cap, "%.*s", (int)n, path);
            slash = strrchr(out, '/');
            if (slash && slash != out) *slash = 0; /* bin's parent */
            return;
        }
        path += n + (path[n] == ':');
    }
}
static int mgt__cuda_preload_pip(void) {
    const char *roots[7];
    char pattern[700], python[600];
    int i, opened = 0;
    size_t k;
    mgt__python_prefix(python, sizeof python);
    roots[0] = getenv("MGT_NVIDIA_PIP");
    roots[1] = getenv("VIRTUAL_ENV");
    roots[2] = getenv("CONDA_PREFIX");
    roots[3] = python;
    roots[4] = getenv("HOME");
    roots[5] = "/usr/local";
    roots[6] = "/usr";
    for (i = 0; i < 7 && !opened; i++) {
        glob_t g;
        if (!roots[i] || !roots[i][0]) continue;
        if (i == 0) snprintf(pattern, sizeof pattern, "%s/nvidia/*/lib/lib*.so.*", roots[i]);
        else snprintf(pattern, sizeof pattern, "%s/%slib/python3*/*-packages/nvidia/*/lib/lib*.so.*", roots[i], i == 4 ? ".local/" : "");
        if (glob(pattern, 0, NULL, &g) != 0) continue;
        for (k = 0; k < g.gl_pathc; k++) /* cudart, cuBLAS(Lt), cuDNN (its engines open each other), NCCL, NVRTC */
            if (dlopen(g.gl_pathv[k], RTLD_NOW | RTLD_GLOBAL)) {
                if (!opened++) {
                    char *nv = strstr(g.gl_pathv[k], "/nvidia/");
                    snprintf(mgt__cuda_pip, sizeof mgt__cuda_pip, "%.*s/nvidia", nv ? (int)(nv - g.gl_pathv[k]) : 0, g.gl_pathv[k]);
                }
            } else
                (void)dlerror();
        globfree(&g);
    }
    return opened;
}

MGTDEF const mgt_cuda_api *mgt_cuda_load(char *why, size_t cap) {
    const mgt_cuda_api *api;
    pthread_mutex_lock(&mgt__cuda_mu);
    if (!mgt__cuda_api && !mgt__cuda_why[0]) {
        char tried[600] = "";
        const char *env = getenv("MGT_CUDA_LIBRARY");
        mgt__cuda_api = (const mgt_cuda_api *)mgt__dl_search(&mgt__cuda_lib, tried, sizeof tried);
        if (!mgt__cuda_api && (strstr(tried, "libcudnn") || strstr(tried, "libnccl") || strstr(tried, "libcublas") || strstr(tried, "libcudart")) &&
            mgt__cuda_preload_pip()) { /* a library it needs is missing: NVIDIA's pip wheels, when a Python environment has them */
            tried[0] = 0;
            mgt__cuda_api = (const mgt_cuda_api *)mgt__dl_search(&mgt__cuda_lib, tried, sizeof tried);
            if (mgt__cuda_api) mgt__log(MGT_LOG_INFO, "CUDA: cuDNN, NCCL and cuBLAS from NVIDIA's pip wheels in %s", mgt__cuda_pip);
        }
        if (mgt__cuda_api && mgt__cuda_api->set_logger) mgt__cuda_api->set_logger(mgt__cuda_note, NULL);
        /* the usual CPU machine, no libmgt_cuda.so anywhere: one short line; one found that cannot
           load (a bundle's lib/libmgt_cuda.so without CUDA's libraries) names what it lacks */
        if (!mgt__cuda_api && (!tried[0] || strstr(tried, "libmgt_cuda.so: cannot open shared object file") == tried) && !(env && env[0]))
            snprintf(mgt__cuda_why, sizeof mgt__cuda_why, "no CUDA library built; `ninja cuda` builds one");
        else if (!mgt__cuda_api)
            snprintf(mgt__cuda_why, sizeof mgt__cuda_why, "the CUDA backend library is not built or cannot load (%s); build it with `ninja cuda`",
                     tried[0] ? tried : "not found");
    }
    api = mgt__cuda_api;
    if (!api && why) mgt__strlcpy(why, mgt__cuda_why, cap);
    pthread_mutex_unlock(&mgt__cuda_mu);
    return api;
}

MGTDEF const char *mgt_cuda_pip_folder(void) { return mgt__cuda_pip; }

/* The CUDA library when a run of cfg goes to GPUs: device cuda or auto, and a GPU for each of its
   `world` ranks; else NULL with why (device cpu: why is empty) */
/* the ranks of a world of `world` that this process runs: world / P under an MPI launcher of P
   processes (a contiguous block each), else all */
static int mgt__local_ranks(int world) {
    int p = mgt_mpi_launcher(NULL, 0);
    return p > 1 && world % p == 0 ? world / p : world;
}

static const mgt_cuda_api *mgt__gpus_for(const mgt_config *cfg, int world, char *why, size_t cap) {
    const mgt_cuda_api *api;
    int devices = 0, need = mgt__local_ranks(world);
    why[0] = 0;
    if (cfg->parallel.device == MGT_DEVICE_CPU) return NULL;
    api = mgt_cuda_load(why, cap);
    if (api && api->probe(&devices, why, cap) != 0) api = NULL;
    if (api && devices < need) {
        char grid[64];
        snprintf(why, cap, "the run needs %d GPUs (%s%s), this machine has %d", need,
                 mgt_grid_text(cfg->parallel.dp, cfg->parallel.cp, cfg->parallel.tp, cfg->parallel.pp, grid, sizeof grid),
                 need < world ? " over the launcher's processes" : "", devices);
        api = NULL;
    }
    return api;
}

/* ---- the world of GPU ranks talking through NCCL (the table of src/world.c) */
typedef struct mgt__nccl_state {
    const mgt_cuda_api *cuda;     /* the CUDA backend library */
    void *world;                  /* its NCCL world of this process's ranks */
    int first;                    /* this process's first rank, on its GPU 0 */
} mgt__nccl_state;

/* this process's ranks on its GPUs 0.. (one process per node, or a launcher that gives each
   process its own GPUs): under MPI the process of rank 0 makes NCCL's unique id and every process
   takes it from one allgather, then joins the world with its ranks (ncclCommInitRank) */
static mgt_result mgt__world_nccl_create(const mgt__world_args *a, void **world) {
    mgt__nccl_state *s = (mgt__nccl_state *)MGT_MALLOC(sizeof *s);
    const mgt__mpi_world *procs = a->procs;
    int *devices = (int *)MGT_MALLOC(sizeof(int) * (size_t)a->count), i;
    unsigned char mine[MGT_NCCL_ID_BYTES], *ids = procs ? (unsigned char *)MGT_MALLOC(MGT_NCCL_ID_BYTES * (size_t)procs->processes) : NULL;
    mgt_result res = MGT_OK;
    char why[512];
    *world = s;
    if (!s || !devices || (procs && !ids)) res = mgt__fail(MGT_ERROR_MEMORY, "out of memory");
    if (s) {
        s->cuda = a->cuda;
        s->world = NULL;
        s->first = a->first;
    }
    for (i = 0; devices && i < a->count; i++) devices[i] = i;
    if (res == MGT_OK && procs) {
        memset(mine, 0, sizeof mine);
        if (procs->process == 0) res = a->cuda->unique_id(mine, mgt_set_error);
        if (procs->api->allgather(mine, ids, sizeof mine, why, sizeof why) && res == MGT_OK) /* every process calls it, even after a failure */
            res = mgt__fail(MGT_ERROR_COMM, "sending NCCL's unique id from the process of rank 0 to the others: MPI: %s", why);
    }
    if (res == MGT_OK) res = a->cuda->world_create(a->world, a->first, a->count, devices, ids, a->timeout_s, mgt_set_error, &s->world);
    MGT_FREE(devices);
    MGT_FREE(ids);
    return res;
}
/* rank i on its process's GPU i - (its first rank) */
static mgt_result mgt__world_nccl_backend(void *world, const mgt__rank_want *want, mgt_backend **out, int *device) {
    mgt__nccl_state *s = (mgt__nccl_state *)world;
    char why[600];
    *device = want->rank - s->first;
    if (s->cuda->backend_create(s->world, *device, want->dtype, out, why, sizeof why) != 0)
        return mgt__fail(MGT_ERROR_DEVICE, "rank %d cannot start on GPU %d: %s", want->rank, *device, why);
    return MGT_OK;
}
static void mgt__world_nccl_backend_destroy(void *world, mgt_backend *be) { ((mgt__nccl_state *)world)->cuda->backend_destroy(be); }
/* ordered after the backend's stream */
static mgt_result mgt__world_nccl_comm(void *world, int rank, mgt_backend *be, const mgt_group *const *groups, int ngroups, mgt_comm **out) {
    mgt__nccl_state *s = (mgt__nccl_state *)world;
    return s->cuda->comm_create(s->world, rank, s->cuda->backend_stream(be), groups, ngroups, out);
}
static mgt_result mgt__world_nccl_settle(void *world, mgt_comm *c) { return ((mgt__nccl_state *)world)->cuda->comm_settle(c); }
static void mgt__world_nccl_comm_destroy(void *world, mgt_comm *c) { ((mgt__nccl_state *)world)->cuda->comm_destroy(c); }
static void mgt__world_nccl_rank_failed(void *world, mgt_comm *c) {
    mgt__nccl_state *s = (mgt__nccl_state *)world;
    (void)c; /* every rank's pending call returns */
    s->cuda->world_abort(s->world);
}
static void mgt__world_nccl_read_gpu(void *world, int device, mgt_gpu_reading *out) { ((mgt__nccl_state *)world)->cuda->reading(device, out); }
static void mgt__world_nccl_destroy(void *world) {
    mgt__nccl_state *s = (mgt__nccl_state *)world;
    if (s->world) s->cuda->world_destroy(s->world);
    MGT_FREE(s);
}
static const mgt__world_api mgt__world_nccl = {
    "cuda", 1, 1, mgt__world_nccl_create, mgt__world_nccl_backend, mgt__world_nccl_backend_destroy, mgt__world_nccl_comm,
    mgt__world_nccl_settle, mgt__world_nccl_comm_destroy, mgt__world_nccl_rank_failed, mgt__world_nccl_read_gpu, mgt__world_nccl_destroy,
};

/* where a run's ranks go: the CPU, or one GPU each (device cuda, or auto when GPUs work). Sets
   *cuda (NULL: CPU); a run that asked for cuda and cannot have it fails with what to do. */
static mgt_result mgt__choose_device(const mgt_config *cfg, int world, const mgt_cuda_api **cuda) {
    char why[900], where[300];
    *cuda = mgt__gpus_for(cfg, world, why, sizeof why);
    if (*cuda || cfg->parallel.device == MGT_DEVICE_CPU) return MGT_OK;
    if (cfg->parallel.device == MGT_DEVICE_CUDA)
        return mgt__fail(MGT_ERROR_UNSUPPORTED, "%s: [parallel] device = cuda, but no usable GPU: %s; set device = cpu (or auto) to train on the CPU",
                         mgt__where(cfg, mgt__find_key("parallel", "device"), where, sizeof where), why);
    /* the usual CPU machine, which never built the CUDA library, hears nothing of it on every run */
    if (strncmp(why, "no CUDA library built", 21)) mgt__log(MGT_LOG_INFO, "device auto: training on the CPU (%s)", why);
    return MGT_OK;
}

MGTDEF int mgt_device_for(const mgt_config *cfg, char *why, size_t cap) {
    char w[1024];
    const mgt_cuda_api *api = mgt__gpus_for(cfg, mgt_config_ranks(cfg), w, sizeof w);
    if (why) mgt__strlcpy(why, api ? "" : w, cap);
    return api != NULL;
}

/* the fit of a planned run on the CPU (api NULL) or on the GPUs of api, one rank each */
static mgt_result mgt__fit_on(const mgt_plan *plan, const mgt_cuda_api *api, int inference, mgt_fit *out) {
    double *free_bytes = NULL;
    int world = plan->world, i, local = mgt__local_ranks(world);
    mgt_result res;
    if (api) {
        free_bytes = (double *)MGT_MALLOC(sizeof(double) * (size_t)world);
        if (!free_bytes) return mgt__fail(MGT_ERROR_MEMORY, "out of memory");
        for (i = 0; i < world; i++) { /* rank i on GPU i % local of its process's machine */
            mgt_gpu_info info;
            free_bytes[i] = api->info(i % local, &info) == 0 && info.memory_free > 0 ? (double)info.memory_free : -1;
        }
    }
    res = mgt__fit(plan, inference, free_bytes, api ? world : 0, out);
    MGT_FREE(free_bytes);
    return res;
}

MGTDEF mgt_result mgt_plan_fit(const mgt_config *cfg, mgt_fit *out) {
    const mgt_cuda_api *api;
    mgt_plan plan;
    char why[900];
    if (!cfg || !out) return mgt__fail(MGT_ERROR_ARGUMENT, "mgt_plan_fit: cfg and out are required");
    memset(out, 0, sizeof *out);
    MGT__TRY(mgt_config_validate(cfg));
    MGT__TRY(mgt__layout_chosen(cfg, "the memory check"));
    MGT__TRY(mgt__plan_make(cfg, &plan));
    api = mgt__gpus_for(cfg, mgt_config_ranks(cfg), why, sizeof why);
    if (!api && cfg->parallel.device == MGT_DEVICE_CUDA) { /* the run itself would stop at its device */
        out->device = MGT_DEVICE_CUDA;
        out->fits = 1;
        out->gpu_rank = -1;
        snprintf(out->text, sizeof out->text, "GPU memory not checked: no usable GPU here (%s)", why);
        return MGT_OK;
    }
    return mgt__fit_on(&plan, api, 0, out);
}

/* GFLOP/s of 1024^3 GEMMs on a pool of `threads`: sgemm (bf16 0), or bf16 through oneDNN (0 when
   a bf16 backend would widen to sgemm instead); the median of repetitions over about `seconds` */
static double mgt__cpu_gemm_gflops(int bf16, int threads, double seconds) {
    const int n = 1024;
    const size_t elt = bf16 ? 2 : 4;
    mgt_backend *be;
    void *a, *b, *c;
    double rates[256], t_all = 0;
    int reps = 0, i, j;
    if (threads <= 0 || threads > 4096) threads = mgt_cpu_count();
    if (mgt__cpu_backend_create_typed(&be, threads, 0, bf16 ? MGT_BF16 : MGT_F32, 0) != MGT_OK) return 0;
    if (bf16 && !((mgt__cpu *)be->impl)->onednn) { mgt__cpu_backend_destroy(be); return 0; }
    a = MGT_MALLOC(elt * (size_t)n * n);
    b = MGT_MALLOC(elt * (size_t)n * n);
    c = MGT_MALLOC(elt * (size_t)n * n);
    if (a && b && c) {
        for (i = 0; i < n * n; i++) {
            float x = (float)(i % 7) * 0.1f, y = (float)(i % 5) * 0.1f;
            if (bf16) ((uint16_t *)a)[i] = mgt__f32_to_bf16(x), ((uint16_t *)b)[i] = mgt__f32_to_bf16(y);
            else ((float *)a)[i] = x, ((float *)b)[i] = y;
        }
        for (i = -1; i < 256 && (i < 3 || t_all < seconds); i++) { /* i = -1 warms caches, BLAS buffers and oneDNN's plan */
            double t0 = mgt_now(), dt;
            be->matmul_forward(be, c, a, b, NULL, n, n, n); /* c = a b^T */
            dt = mgt_now() - t0;
            if (i < 0) continue;
            t_all += dt;
            rates[reps++] = 2.0 * n * n * (double)n / dt * 1e-9;
        }
        for (i = 1; i < reps; i++) /* the median: a shared machine's slow repetitions do not pull it down */
            for (j = i; j > 0 && rates[j] < rates[j - 1]; j--) { double t = rates[j]; rates[j] = rates[j - 1]; rates[j - 1] = t; }
    }
    MGT_FREE(a); MGT_FREE(b); MGT_FREE(c);
    mgt__cpu_backend_destroy(be);
    return reps ? rates[reps / 2] : 0;
}
MGTDEF double mgt_cpu_sgemm_gflops(int threads, double seconds) { return mgt__cpu_gemm_gflops(0, threads, seconds); }
MGTDEF double mgt_cpu_bf16_gemm_gflops(int threads, double seconds) { return mgt__cpu_gemm_gflops(1, threads, seconds); }

MGTDEF void mgt_run_set_peak(mgt_run *r, double gflops_per_rank, const char *source) {
    if (!r) return;
    r->peak_per_rank = gflops_per_rank > 0 && isfinite(gflops_per_rank) ? gflops_per_rank : 0;
    mgt__strlcpy(r->peak_source, source ? source : "", sizeof r->peak_source);
}

/* 64 random bits (the kernel's; else time, process and address), as 16 hex digits */
