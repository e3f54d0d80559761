/* BLAS under mgt: no threads of its own, a bounded number of calls at once, and out of memory that
   fails instead of hanging. Each case runs in a fresh copy of this program (exec) with a deadline:
   - threads: started with OPENBLAS_NUM_THREADS=4, OpenBLAS's pthreads build has started threads of its
     own before main (one per core beyond the first, up to 3); the first CPU backend stops them and
     only the pool's threads are left (a program that embeds mgt.h, unlike mgt, cannot run itself
     again with OPENBLAS_NUM_THREADS=1)
   - gate: 1000 threads of one pool each run a block of a GEMM at once. OpenBLAS hands every call a
     buffer from a pool it sized when built (Debian: 128, and 512 spare since 0.3.11): with more
     calls inside cblas_sgemm at once it printed "This library was built to support a maximum of
     128 threads" and the process died of SIGSEGV (the 4096-rank limit of parallel.dp x tp x pp).
     This program's own cblas_sgemm (it comes first, then OpenBLAS's) counts the calls in flight,
     each kept 2 ms so that they overlap: at most one per core, where it was every thread
   - oom: with the address space limited (RLIMIT_AS) to what the process maps plus 64 MiB, a
     backend's first GEMM found no room for OpenBLAS's 128 MiB buffer, and OpenBLAS retried the
     allocation forever; now creating the backend fails with MGT_ERROR_MEMORY and the numbers. */
#define _GNU_SOURCE       /* RTLD_NEXT */
#define MGT_IMPLEMENTATION
#include "mgt.h"
#include <dlfcn.h>        /* defines: dlsym, RTLD_NEXT */
#include <signal.h>       /* defines: kill, SIGKILL */
#include <sys/wait.h>     /* defines: waitpid */
#include <sys/resource.h> /* defines: setrlimit */

static int failures;
static void check(int ok, const char *what) {
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok) failures++;
}

/* calls of cblas_sgemm in flight, and the most at once */
static int in_flight, most_in_flight;

#ifdef OPENBLAS_CONST /* OpenBLAS's cblas.h: this definition comes before the library's */
void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, blasint M, blasint N, blasint K, float alpha,
                 const float *A, blasint lda, const float *B, blasint ldb, float beta, float *C, blasint ldc) {
    typedef void (*sgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint, float, const float *, blasint,
                             const float *, blasint, float, float *, blasint);
    static sgemm_fn real;
    struct timespec hold = {0, 2 * 1000 * 1000};
    int now = __atomic_add_fetch(&in_flight, 1, __ATOMIC_SEQ_CST), most = __atomic_load_n(&most_in_flight, __ATOMIC_SEQ_CST);
    while (now > most && !__atomic_compare_exchange_n(&most_in_flight, &most, now, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
    if (!real) {
        void *sym = dlsym(RTLD_NEXT, "cblas_sgemm");
        memcpy(&real, &sym, sizeof real);
    }
    nanosleep(&hold, NULL);
    real(order, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    __atomic_sub_fetch(&in_flight, 1, __ATOMIC_SEQ_CST);
}
#define COUNTS_CALLS 1
#else
#define COUNTS_CALLS 0
#endif

static double mapped_bytes(void) { /* VmSize */
    unsigned long long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) { if (fscanf(f, "%llu", &pages) != 1) pages = 0; fclose(f); }
    return (double)pages * (double)sysconf(_SC_PAGESIZE);
}

static int tasks(void) { /* threads of this process */
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;
    if (!d) return -1;
    while ((e = readdir(d))) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* C (M x N) = A (M x K) B^T on a backend of `threads` threads; 0 when C is right */
static int gemm_on(int threads, int M, int N, int K) {
    mgt_backend *be;
    float *A, *B, *C;
    int i, bad = 0;
    if (mgt__cpu_backend_create_typed(&be, threads, 0, MGT_F32, 0) != MGT_OK) { printf("     %s\n", mgt_last_error()); return 1; }
    A = (float *)calloc((size_t)M * (size_t)K, sizeof(float));
    B = (float *)calloc((size_t)N * (size_t)K, sizeof(float));
    C = (float *)calloc((size_t)M * (size_t)N, sizeof(float));
    if (!A || !B || !C) return 1;
    for (i = 0; i < M; i++) A[(size_t)i * (size_t)K] = (float)(i % 7);
    for (i = 0; i < N; i++) B[(size_t)i * (size_t)K] = 1.0f;
    mgt__gemm(be, 0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N, NULL);
    for (i = 0; i < M; i++) bad += C[(size_t)i * (size_t)N + (size_t)(i % N)] != (float)(i % 7);
    free(A); free(B); free(C);
    mgt__cpu_backend_destroy(be);
    return bad != 0;
}

static int child(const char *which) {
    if (!strcmp(which, "threads")) {
        int before = tasks(), after, started = openblas_get_num_threads() - 1, rc;
        mgt_backend *be;
        printf("     OpenBLAS started %d thread%s before main: %d threads in the process\n", started, started == 1 ? "" : "s", before);
        if (started < 1) { printf("SKIP one core, or a BLAS without threads: nothing to stop\n"); return 77; }
        rc = mgt__cpu_backend_create_typed(&be, 2, 0, MGT_F32, 0) != MGT_OK;
        after = tasks();
        printf("     after the first CPU backend of 2 threads: %d threads (the caller and the pool's one)\n", after);
        if (!rc) mgt__cpu_backend_destroy(be);
        return rc || after != 2;
    }
    if (!strcmp(which, "gate")) {
        int bad = gemm_on(1000, 1000 * 16, 256, 256); /* 16 rows each */
        printf("     %d calls of cblas_sgemm at most at once, on %d cores%s\n", most_in_flight, mgt_cpu_count(), COUNTS_CALLS ? "" : " (not counted: not OpenBLAS)");
        return bad || most_in_flight > mgt_cpu_count();
    }
    if (!strcmp(which, "oom")) {
        double mapped = mapped_bytes();
        struct rlimit lim;
        mgt_backend *be;
        lim.rlim_cur = lim.rlim_max = (rlim_t)mapped + ((rlim_t)64 << 20);
        if (setrlimit(RLIMIT_AS, &lim)) { perror("setrlimit"); return 1; }
        if (mgt__cpu_backend_create_typed(&be, 2, 0, MGT_F32, 0) != MGT_OK) {
            printf("     %s\n", mgt_last_error());
            return strstr(mgt_last_error(), "out of memory") && strstr(mgt_last_error(), "ulimit -v") ? 3 : 1;
        }
        printf("     the backend was created; its first GEMM follows\n");
        fflush(stdout);
        return gemm_on(2, 256, 256, 256) ? 1 : 4; /* 4: the GEMM ran (there was room after all) */
    }
    return 1;
}

/* runs this program on one case, killed after `limit` seconds; its exit status, or 128 + signal,
   or -1 when it had to be killed */
static int run_case(const char *self, const char *which, double limit, const char *openblas_threads) {
    pid_t pid = fork();
    int status;
    double t0 = mgt_now();
    if (pid == 0) {
        char *argv[4];
        argv[0] = (char *)self; argv[1] = (char *)"--case"; argv[2] = (char *)which; argv[3] = NULL;
        if (openblas_threads) setenv("OPENBLAS_NUM_THREADS", openblas_threads, 1);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    if (pid < 0) return -2;
    for (;;) {
        struct timespec nap = {0, 20 * 1000 * 1000};
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (mgt_now() - t0 > limit) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            printf("     still running after %.0f s: killed\n", limit);
            return -1;
        }
        nanosleep(&nap, NULL);
    }
    printf("     %s: %s %d after %.2f s\n", which, WIFEXITED(status) ? "exit" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
           mgt_now() - t0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(int argc, char **argv) {
    int rc;
    float one = 1.0f;
    setvbuf(stdout, NULL, _IONBF, 0);
    if (cblas_sdot(1, &one, 1, &one, 1) != 1.0f) return 1; /* links the BLAS (this file's cblas_sgemm comes first) */
    if (argc == 3 && !strcmp(argv[1], "--case")) return child(argv[2]);
    rc = run_case(argv[0], "threads", 30, "4");
    if (rc == 77) printf("SKIP OpenBLAS's own threads: none were started here\n");
    else check(rc == 0, "OpenBLAS's own threads, started before main, are stopped by the first CPU backend");
    check(run_case(argv[0], "gate", 60, "1") == 0, "1000 threads of one pool: at most one BLAS call per core at once, the GEMM right");
    rc = run_case(argv[0], "oom", 30, "1");
    check(rc == 3 || rc == 4, "no room in the address space for OpenBLAS's buffer: an error with the numbers, within seconds, not a hang");
    printf("blas: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}
