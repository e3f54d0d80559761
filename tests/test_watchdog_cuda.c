/* tests/test_watchdog_cuda.c - a GPU step cannot hang or fail silently (issue 13), proven on the
   CUDA backend's host code (kernels/backend_cuda.cu, kernels/comm_nccl.c, kernels/watchdog.c,
   kernels/plugin_cuda.c), the kernels through the SIMT shim and the checking fakes of cudart,
   cuBLAS and NCCL (tests/fakes), the way build/test_layouts_cuda runs them.

   Each case trains a small layout (dp2, tp2, pp2 1f1b, dp2 zero3) in a child (this program, run
   again with --child), as `mgt train` would, with a fault injected through the fakes' environment
   (tests/fakes/README.md) and [parallel] timeout_s = 3:
     stall       MGT_FAKE_STALL_RANK=1: rank 1 never arrives at its first NCCL call inside a step
     nccl_error  MGT_FAKE_NCCL_ERROR=1: rank 1's first call inside a step fails asynchronously
     fault       MGT_FAKE_KERNEL_FAULT=layernorm_forward:1: rank 1's first LayerNorm kernel faults
     fault_sync  the same with MGT_CUDA_SYNC=1, which names the op and its kernel's launch site
     fault_warm_up the first LayerNorm of the untimed warm-up step faults: reported from the warm-up
                 (which communicates nothing), with the MGT_CUDA_SYNC=1 hint
     nccl_error_wait (dp2) rank 1's last call of the step fails asynchronously: only the wait's
                 checks of ncclCommGetAsyncError can see it, and must, well before the deadline
   and the parent checks: the child exits 1 (what the CLI returns) within timeout_s plus a margin,
   its one message names rank 1, its GPU and the NCCL call the fake stalled or failed (the fake's
   own line says which: its kind and sequence number) with its group, or the faulting op; every rank
   thread has ended (the child counts its threads before the run and after mgt_run_destroy);
   and built with ASan (8 cases) or TSan (3 cases), no report. Without a fault, every step of these layouts does no
   allocation, free, pageable copy or unbounded wait (the fakes would abort), and --syncs prints
   the host synchronisations of a step for GPT-2-shaped models of 2 and 4 layers, 1 and 2
   micro-batches: one download (the gradient norm, the loss, the skip decision) and three waits.

   usage: test_watchdog_cuda [--syncs | --case TEXT | --child LAYOUT]   (--case: the cases whose layout
   or fault name is in TEXT); built with a sanitizer it runs a subset */
#define MGT_IMPLEMENTATION
#include "mgt.h"
#include "train_util.h"
#include "tests/fakes/fakes.h" /* defines: mgt_fake_step_counts */

#include <signal.h>   /* defines: SIGALRM */
#include <sys/wait.h> /* defines: waitpid */

const mgt_cuda_api *mgt_cuda_api_get(void); /* kernels/plugin_cuda.c, linked in */

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif
#ifdef __SANITIZE_THREAD__
#define TSAN 1
#else
#define TSAN 0
#endif
#define TIMEOUT_S 3.0
/* from the fault to the child's exit (the abort, the rank threads' return, the teardown): timed in the
   plain build; a sanitized build checks that the run ends, clean, the fakes running the device's
   remaining work 10-20 times slower there (on the host, inside the waits) */
#define MARGIN_S (SANITIZED ? 120.0 : 6.0)

static char dir[256];

typedef struct layout { const char *name; int dp, tp, pp, zero; } layout;
static const layout layouts[] = {{"dp2", 2, 1, 1, 0}, {"tp2", 1, 2, 1, 0}, {"pp2-1f1b", 1, 1, 2, 0}, {"dp2-zero3", 2, 1, 1, 3}};

static void config(mgt_config *cfg, const layout *l, int n_layer, int d_model, int seq_len, int vocab, int micro, int steps) {
    char set[600];
    mgt_config_init(cfg);
    mgt_config_set(cfg, "parallel.device=cuda");
    snprintf(set, sizeof set, "model.n_layer=%d", n_layer); mgt_config_set(cfg, set);
    mgt_config_set(cfg, "model.n_head=4");
    snprintf(set, sizeof set, "model.d_model=%d", d_model); mgt_config_set(cfg, set);
    snprintf(set, sizeof set, "model.seq_len=%d", seq_len); mgt_config_set(cfg, set);
    snprintf(set, sizeof set, "model.vocab_size=%d", vocab); mgt_config_set(cfg, set);
    snprintf(set, sizeof set, "train.steps=%d", steps); mgt_config_set(cfg, set);
    snprintf(set, sizeof set, "train.global_batch=%d", 4 * l->dp); mgt_config_set(cfg, set);
    snprintf(set, sizeof set, "train.micro_batch=%d", 4 / micro); mgt_config_set(cfg, set);
    mgt_config_set(cfg, "train.warmup=1");
    mgt_config_set(cfg, "train.eval_every=0");
    mgt_config_set(cfg, "log.metrics=");
    mgt_config_set(cfg, "parallel.bucket_mb=0.001"); /* a bucket per unit: deferred collectives in backward */
    snprintf(set, sizeof set, "parallel.timeout_s=%g", TIMEOUT_S); mgt_config_set(cfg, set);
    snprintf(set, sizeof set, "parallel.dp=%d", l->dp); mgt_config_set(cfg, set);
    snprintf(set, sizeof set, "parallel.tp=%d", l->tp); mgt_config_set(cfg, set);
    snprintf(set, sizeof set, "parallel.pp=%d", l->pp); mgt_config_set(cfg, set);
    snprintf(set, sizeof set, "parallel.zero=%d", l->zero); mgt_config_set(cfg, set);
    mgt_config_set(cfg, "parallel.pp_schedule=1f1b");
    snprintf(set, sizeof set, "data.train=%s/corpus.bin", dir); mgt_config_set(cfg, set);
    mgt_config_set(cfg, "data.val=");
    snprintf(set, sizeof set, "checkpoint.dir=%s/%s", dir, l->name); mgt_config_set(cfg, set);
}

static int threads_now(void) { /* this process's threads */
    char line[256];
    int n = -1;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "Threads:", 8)) n = atoi(line + 8);
    if (f) fclose(f);
    return n;
}

/* --child LAYOUT: what `mgt train` does with the run, printing what it prints; exit 1 on a failure */
static int child(const char *name) {
    const layout *l = NULL;
    mgt_config cfg;
    mgt_run *run;
    mgt_result r = MGT_OK;
    int i, before;
    for (i = 0; i < (int)(sizeof layouts / sizeof layouts[0]); i++)
        if (!strcmp(layouts[i].name, name)) l = &layouts[i];
    if (!l) return 2;
    alarm(SANITIZED ? 400u : (unsigned)(3 * TIMEOUT_S + 60)); /* a hang ends here, by a signal the parent reports */
    config(&cfg, l, 2, 32, 16, 256, 1, 3);
    before = threads_now();
    if (mgt_run_create(&run, &cfg) != MGT_OK) {
        fprintf(stderr, "mgt: %s\n", mgt_last_error());
        return 1;
    }
    while (run->step < cfg.train.steps && (r = mgt_run_step(run)) == MGT_OK) printf("step %d: loss %.4f\n", run->step, run->loss);
    if (r != MGT_OK) fprintf(stderr, "mgt: %s\n", mgt_last_error());
    mgt_run_destroy(run);
    printf("threads: %d before the run, %d after it\n", before, threads_now());
    return r == MGT_OK ? 0 : 1;
}

/* the fake's line naming the NCCL call it stalled or failed, as comm_nccl.c names calls:
   "all-reduce #2", "recv #1" */
static int injected_call(const char *out, char *call, size_t cap) {
    static const char *apis[][2] = {{"ncclAllReduce", "all-reduce"}, {"ncclAllGather", "all-gather"}, {"ncclReduceScatter", "reduce-scatter"},
                                    {"ncclBroadcast", "broadcast"},   {"ncclSend", "send"},            {"ncclRecv", "recv"}};
    const char *p = strstr(out, "inside steps, "), *hash;
    size_t i;
    if (!p) return 0;
    p += strlen("inside steps, ");
    hash = strstr(p, " #");
    for (i = 0; hash && i < sizeof apis / sizeof apis[0]; i++)
        if (!strncmp(p, apis[i][0], strlen(apis[i][0])) && (size_t)(hash - p) == strlen(apis[i][0])) {
            snprintf(call, cap, "%s #%ld", apis[i][1], strtol(hash + 2, NULL, 10));
            return 1;
        }
    return 0;
}

typedef struct fault_case { const char *name, *env[2]; } fault_case;
static const fault_case cases[] = {
    {"stall", {"MGT_FAKE_STALL_RANK=1", NULL}},
    {"nccl_error", {"MGT_FAKE_NCCL_ERROR=1", NULL}},
    {"fault", {"MGT_FAKE_KERNEL_FAULT=layernorm_forward:1", NULL}},
    {"fault_sync", {"MGT_FAKE_KERNEL_FAULT=layernorm_forward:1", "MGT_CUDA_SYNC=1"}},
    /* dp2 only: the step's last call (the world's all-gather of the norm) fails asynchronously; no later
       call finds it, the wait for the statistics must, long before its deadline */
    {"nccl_error_wait", {"MGT_FAKE_NCCL_ERROR=1", "MGT_FAKE_STALL_CALL=5"}},
    /* the first LayerNorm of the warm-up step faults: found there, before any step, as in a step */
    {"fault_warm_up", {"MGT_FAKE_KERNEL_FAULT=layernorm_forward:1@warm-up", NULL}},
};

static void run_case(const char *self, const layout *l, const fault_case *f) {
    int fd[2], status = 0, ok, threads_ok, before = -1, after = -2;
    pid_t pid;
    char buf[4096], call[64] = "", *th;
    ssize_t k;
    double t0 = mgt_now(), t_fault = 0, secs;
    size_t n = 0, cap = 1 << 16;
    char *out = (char *)malloc(cap);
    if (pipe(fd) != 0 || !out) { perror("pipe"); exit(1); }
    pid = fork();
    if (pid == 0) {
        int i;
        dup2(fd[1], 1);
        dup2(fd[1], 2);
        close(fd[0]);
        close(fd[1]);
        for (i = 0; i < 2 && f->env[i]; i++) { /* NAME=VALUE */
            char name[64];
            const char *eq = strchr(f->env[i], '=');
            snprintf(name, sizeof name, "%.*s", (int)(eq - f->env[i]), f->env[i]);
            setenv(name, eq + 1, 1);
        }
        execl(self, self, "--child", l->name, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    while ((k = read(fd[0], buf, sizeof buf)) > 0) {
        if (n + (size_t)k + 1 > cap) out = (char *)realloc(out, cap = 2 * (cap + (size_t)k));
        memcpy(out + n, buf, (size_t)k);
        n += (size_t)k;
        out[n] = 0;
        if (!t_fault && strstr(out, "mgt fake: ")) t_fault = mgt_now(); /* the fake's line when it injects the fault */
    }
    out[n] = 0;
    close(fd[0]);
    waitpid(pid, &status, 0);
    secs = mgt_now() - (t_fault ? t_fault : t0);
    th = strstr(out, "threads: ");
    if (th) sscanf(th, "threads: %d before the run, %d after it", &before, &after);
    threads_ok = before > 0 && after == before;
    ok = WIFEXITED(status) && WEXITSTATUS(status) == 1 && t_fault && secs < TIMEOUT_S + MARGIN_S && threads_ok && !strstr(out, "Sanitizer") &&
         strstr(out, "mgt: ");
    if (strcmp(f->name, "stall")) ok = ok && strstr(out, "rank 1 (GPU 1)"); /* the rank that failed reports it */
    if (!strcmp(f->name, "nccl_error_wait"))
        ok = ok && injected_call(out, call, sizeof call) && strstr(out, call) && strstr(out, "asynchronous error") &&
             strstr(out, "while waiting for") && secs < 1.5;
    else if (!strcmp(f->name, "stall") || !strcmp(f->name, "nccl_error")) {
        char stuck[96], issuing[96];
        ok = ok && injected_call(out, call, sizeof call) && strstr(out, call);
        /* the stalled rank is named: it reports its own call still in progress, or another rank's
           message lists it as issuing that call */
        snprintf(stuck, sizeof stuck, "rank 1 (GPU 1): NCCL %s", call);
        snprintf(issuing, sizeof issuing, "rank 1 issuing %s", call);
        if (!strcmp(f->name, "stall")) ok = ok && (strstr(out, stuck) || strstr(out, issuing));
        else ok = ok && strstr(out, "asynchronous error") && strstr(out, "MGT_FAKE_NCCL_ERROR");
        if (l->pp == 1) { /* a collective: its group is named too */
            char group[32];
            snprintf(group, sizeof group, "on group %d (", l->tp > 1 ? 0 : 1 * 2 + 0); /* mgt.h's ids: TP 0*W + .., DP 1*W + .. */
            ok = ok && strstr(out, group);
        }
    } else if (!strcmp(f->name, "fault"))
        ok = ok && strstr(out, "cudaErrorIllegalAddress") && strstr(out, "MGT_CUDA_SYNC=1");
    else if (!strcmp(f->name, "fault_warm_up"))
        ok = ok && strstr(out, "cudaErrorIllegalAddress") && strstr(out, "MGT_CUDA_SYNC=1") && strstr(out, ") in the warm-up step while") &&
             !strstr(out, "in steps");
    else
        ok = ok && strstr(out, "cudaErrorIllegalAddress") && strstr(out, "layernorm forward (N ") && strstr(out, "kernels/layernorm.cu:");
    check(ok, "%-10s %-11s exit %d %.1f s after the fault (timeout_s %g), threads %d -> %d%s%s", l->name, f->name,
          WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status), secs, TIMEOUT_S, before, after, call[0] ? ", the fake's call: " : "",
          call);
    { /* the message, for the record */
        char *m = strstr(out, "mgt: ");
        char *e = m ? strchr(m, '\n') : NULL;
        if (m) printf("     %.*s\n", e ? (int)(e - m) : (int)strlen(m), m);
    }
    if (!ok) printf("---- output:\n%s----\n", out);
    free(out);
}

/* the host synchronisations of a step, as the fake counts them, for GPT-2-shaped models */
static void syncs(void) {
    static const layout one = {"one", 1, 1, 1, 0}, dp2 = {"dp2", 2, 1, 1, 0};
    const layout *ls[2] = {&one, &dp2};
    int li, L, M;
    long d2h0 = -1, waits0 = -1;
    for (li = 0; li < 2; li++)
        for (L = 2; L <= 4; L += 2)
            for (M = 1; M <= 2; M++) {
                mgt_config cfg;
                mgt_run *run;
                mgt_fake_counts last;
                int ok = 1;
                /* GPT-2's shape scaled down: 12 heads, d_model 768 -> 48, seq_len 1024 -> 16, vocabulary 50257 -> 503 */
                config(&cfg, ls[li], L, 48, 16, 503, M, 2);
                mgt_config_set(&cfg, "model.n_head=12");
                mgt_config_set(&cfg, "parallel.timeout_s=600"); /* the fakes run the device's work inside the host's waits: slowly */
                if (mgt_run_create(&run, &cfg) != MGT_OK) { printf("FAIL create: %s\n", mgt_last_error()); failures++; return; }
                while (run->step < cfg.train.steps && ok) ok = mgt_run_step(run) == MGT_OK;
                if (!ok) { printf("FAIL step: %s\n", mgt_last_error()); failures++; }
                mgt_fake_step_counts(0, &last, NULL);
                if (d2h0 < 0) { d2h0 = last.d2h; waits0 = last.waits; }
                check(ok && last.d2h == 1 && last.d2h == d2h0 && last.waits == waits0,
                      "%-3s %d layers, %d micro-batch%s: a step of rank 0 copied %ld time%s to the host (%ld bytes) and waited %ld times (%ld polls), "
                      "%ld operations",
                      ls[li]->name, L, M, M > 1 ? "es" : "", last.d2h, last.d2h == 1 ? "" : "s", last.d2h_bytes, last.waits, last.polls, last.ops);
                mgt_run_destroy(run);
            }
}

int main(int argc, char **argv) {
    int i, j;
    if (argc == 3 && !strcmp(argv[1], "--child")) {
        strcpy(dir, getenv("MGT_WATCHDOG_DIR") ? getenv("MGT_WATCHDOG_DIR") : "/tmp");
        mgt_cuda_use(mgt_cuda_api_get());
        return child(argv[2]);
    }
    mgt_cuda_use(mgt_cuda_api_get());
    make_workdir(dir, sizeof dir, "test_watchdog", 100000, 5);
    setenv("MGT_WATCHDOG_DIR", dir, 1);
    if (argc == 2 && !strcmp(argv[1], "--syncs")) {
        syncs();
        return finish(dir, "watchdog syncs");
    }
    if (!SANITIZED && argc == 1) syncs();
    for (i = 0; i < (int)(sizeof layouts / sizeof layouts[0]); i++)
        for (j = 0; j < (int)(sizeof cases / sizeof cases[0]); j++) {
            if (argc == 3 && !strcmp(argv[1], "--case") && !strstr(argv[2], layouts[i].name) && !strstr(argv[2], cases[j].name)) continue;
            if (!strcmp(cases[j].name, "nccl_error_wait") && strcmp(layouts[i].name, "dp2")) continue;
            /* ASan: every layout stalls, and one other fault each */
            if (SANITIZED && !TSAN && argc == 1 && j > 0 && j != 1 + i % 4) continue;
            /* TSan (the slowest): three cases */
            if (TSAN && argc == 1 && !(i == 3 && j == 0) && !(i == 2 && j == 1) && !(i == 1 && j == 3)) continue;
            run_case(argv[0], &layouts[i], &cases[j]);
        }
    return finish(dir, "watchdog");
}
