/* test_simt.cpp - the SIMT shim (tests/simt/cuda_cpu.h): the example kernels of tests/simt/simt_examples.cu
   against plain CPU references under forward, reverse and random thread orders; the wrong kernels
   in forked children, which must abort with the right message; NaN-filled shared memory; the cost
   of a context switch. Built plain, with clang++, with ASan+UBSan and with g++ TSan (where a
   kernel that lacks a __syncthreads must draw a TSan data-race report). */
#include "tests/simt/simt_examples.cu" // defines: the simt_* launchers and the shim

#include <math.h>       // defines: fabs, isnan
#include <signal.h>     // defines: SIGABRT
#include <stdio.h>      // defines: printf
#include <string>       // defines: std::string
#include <sys/wait.h>   // defines: waitpid, WIFSIGNALED
#include <time.h>       // defines: clock_gettime
#include <ucontext.h>   // defines: swapcontext (the comparison figure)
#include <unistd.h>     // defines: fork, pipe
#include <vector>       // defines: std::vector

#if defined(MGT__SIMT_ASAN)
#define BUILD "asan+ubsan"
#elif defined(MGT__SIMT_TSAN)
#define BUILD "tsan"
#else
#define BUILD "plain"
#endif

static int failures = 0, checks = 0;
#define CHECK(cond, ...)                                      \
    do {                                                      \
        checks++;                                             \
        if (!(cond)) {                                        \
            failures++;                                       \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);       \
            printf(__VA_ARGS__);                              \
            printf("\n");                                     \
        }                                                     \
    } while (0)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static uint64_t rng_state = 12345;
static float frand(void) { // uniform in [-1, 1)
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}
static std::vector<float> randv(size_t n) {
    std::vector<float> v(n);
    for (float &x : v) x = frand();
    return v;
}
static bool close(double got, double want, double tol) { return fabs(got - want) <= tol * (1.0 + fabs(want)); }

static const char *order_name(int order) {
    return order == MGT_SIMT_FORWARD ? "forward" : order == MGT_SIMT_REVERSE ? "reverse" : "random";
}

/* ---- kernels of this test only (CPU-only cases: recursion, launches without arguments) --------------- */
static int noarg_count;
__global__ void noarg_kernel() { atomicAdd(&noarg_count, 1); }
template <class T, int N> __global__ void scale_kernel(T *out, const T *in, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned active = __activemask();
    if (i < n) out[i] = T(float(in[i]) * s * N + (active == 0xffffffffu ? 0.0f : 1000.0f));
}
template <class T> static void scale(T *out, const T *in, float s, int n) {
    MGT_LAUNCH((scale_kernel<T, 2>), (n + 63) / 64, 64, 0, nullptr, out, in, s, n);
}
// the two halves of a warp wait at different __syncthreads
__global__ void two_sites_kernel(float *out) {
    if (threadIdx.x < 16) __syncthreads();
    else __syncthreads();
    out[threadIdx.x] = 1.0f;
}
// a full mask in a block of 40 threads: the second warp has 8 lanes
__global__ void partial_warp_kernel(float *out) {
    out[threadIdx.x] = __shfl_down_sync(0xffffffffu, 1.0f, 1);
}
static __attribute__((noinline)) int deep(volatile char *p, int depth) {
    volatile char buf[1024];
    buf[0] = (char)depth;
    if (p) buf[1] = p[0];
    return depth > 0 ? deep(buf, depth - 1) + buf[0] : 0;
}
__global__ void overflow_kernel(int *out) { out[threadIdx.x] = deep(nullptr, 1000); } // ~1 MiB of stack
__global__ void shared_oob_kernel(float *out) {
    MGT_SHARED(float, buf, 32);
    buf[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = buf[threadIdx.x + 1]; // thread 31 reads buf[32]
}
static void run_local_bad(int which, float *out) {
    static int iout[64];
    switch (which) {
    case 10: MGT_LAUNCH(two_sites_kernel, 1, 32, 0, nullptr, out); break;
    case 11: MGT_LAUNCH(partial_warp_kernel, 1, 40, 0, nullptr, out); break;
    case 12: MGT_LAUNCH(overflow_kernel, 1, 2, 0, nullptr, iout); break;
    case 13: MGT_LAUNCH(shared_oob_kernel, 1, 32, 0, nullptr, out); break;
    case 14: MGT_LAUNCH(noarg_kernel, dim3(1, 1, 0), 32, 0, nullptr); break;
    }
}
static void test_launch_forms(const char *on) {
    noarg_count = 0;
    MGT_LAUNCH(noarg_kernel, dim3(2, 3), dim3(8, 4), 0, nullptr);
    CHECK(noarg_count == 2 * 3 * 8 * 4, "%s kernel without arguments ran %d threads, want 192", on, noarg_count);
    int n = 100;
    std::vector<float> in = randv(n), out(n);
    scale(out.data(), in.data(), 0.5f, n);
    std::vector<__nv_bfloat16> in16(n), out16(n);
    for (int i = 0; i < n; i++) in16[i] = __float2bfloat16(in[i]);
    scale(out16.data(), in16.data(), 0.5f, n);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        bad += out[i] != in[i] * 0.5f * 2;
        bad += __bfloat162float(out16[i]) != __bfloat162float(__float2bfloat16(__bfloat162float(in16[i]) * 0.5f * 2));
    }
    CHECK(bad == 0, "%s template kernel in parentheses, float and bf16: %d wrong", on, bad);
}

/* ---- kernels against references ------------------------------------------------------------------------ */
static void test_block_sum(const char *on) {
#ifdef MGT__SIMT_TSAN
    const int sizes[] = {32, 256}; // g++ 12's TSan clocks cost O(threads) per barrier and thread
#else
    const int sizes[] = {32, 256, 1024};
#endif
    for (int threads : sizes) {
        int n = threads * 3 - 5, blocks = (n + threads - 1) / threads;
        std::vector<float> in = randv(n), out(blocks, -1.0f);
        simt_block_sum(out.data(), in.data(), n, threads, nullptr);
        for (int b = 0; b < blocks; b++) {
            double want = 0;
            for (int i = b * threads; i < n && i < (b + 1) * threads; i++) want += in[i];
            CHECK(close(out[b], want, 1e-5), "%s block_sum threads %d block %d: %g, want %g", on, threads, b, out[b], want);
        }
    }
}
static void test_warp_ops(const char *on) {
    int n = 256, warps = n / 32;
    std::vector<float> in = randv(n), xsum(n), seg8(n), scan(n), dsum(warps), bcast(n);
    std::vector<unsigned> ballot(warps);
    std::vector<int> anyall(warps);
    in[37] = -150.0f; // warp 1 is not all > -100
    for (int i = 64; i < 96; i++) in[i] = -fabsf(in[i]) - 0.5f; // warp 2: none > 0
    simt_warp_ops(xsum.data(), seg8.data(), scan.data(), dsum.data(), bcast.data(), ballot.data(), anyall.data(),
                  in.data(), n, nullptr);
    for (int w = 0; w < warps; w++) {
        double sum = 0, pre = 0;
        unsigned bal = 0;
        bool any = false, all = true;
        for (int l = 0; l < 32; l++) {
            sum += in[w * 32 + l];
            bal |= (in[w * 32 + l] > 0.0f ? 1u : 0u) << l;
            any |= in[w * 32 + l] > 0.0f;
            all &= in[w * 32 + l] > -100.0f;
        }
        for (int l = 0; l < 32; l++) {
            int i = w * 32 + l;
            double seg = 0;
            for (int k = l & ~7; k < (l & ~7) + 8; k++) seg += in[w * 32 + k];
            pre += in[i];
            CHECK(close(xsum[i], sum, 1e-5), "%s xor sum lane %d: %g, want %g", on, i, xsum[i], sum);
            CHECK(close(seg8[i], seg, 1e-5), "%s width-8 sum lane %d: %g, want %g", on, i, seg8[i], seg);
            CHECK(close(scan[i], pre, 1e-5), "%s scan lane %d: %g, want %g", on, i, scan[i], pre);
            CHECK(bcast[i] == in[w * 32 + 5], "%s broadcast lane %d: %g, want %g", on, i, bcast[i], in[w * 32 + 5]);
        }
        CHECK(close(dsum[w], sum, 1e-5), "%s down sum warp %d: %g, want %g", on, w, dsum[w], sum);
        CHECK(ballot[w] == bal, "%s ballot warp %d: 0x%08x, want 0x%08x", on, w, ballot[w], bal);
        CHECK(anyall[w] == (int)any + 2 * (int)all, "%s any/all warp %d: %d, want %d", on, w, anyall[w],
              (int)any + 2 * (int)all);
    }
}
static void test_softmax(const char *on) {
    int rows = 13, cols = 70; // 13 rows: the last block has 3 idle warps
    std::vector<float> in = randv((size_t)rows * cols), out((size_t)rows * cols, -1.0f);
    for (float &x : in) x *= 8.0f;
    simt_softmax(out.data(), in.data(), rows, cols, nullptr);
    for (int r = 0; r < rows; r++) {
        double m = -1e300, s = 0;
        for (int c = 0; c < cols; c++) m = fmax(m, in[r * cols + c]);
        for (int c = 0; c < cols; c++) s += exp((double)in[r * cols + c] - m);
        for (int c = 0; c < cols; c++) {
            double want = exp((double)in[r * cols + c] - m) / s;
            CHECK(fabs(out[r * cols + c] - want) <= 1e-6 + 1e-5 * want, "%s softmax (%d,%d): %g, want %g", on, r, c,
                  out[r * cols + c], want);
        }
    }
}
static void test_dynamic_shared(const char *on) {
    int n = 200, threads = 64;
    std::vector<float> in = randv(n), out(n, -1.0f);
    std::vector<__nv_bfloat16> out16(n);
    simt_reverse(out.data(), out16.data(), in.data(), n, threads, nullptr);
    for (int i = 0; i < n; i++) {
        int b = i / threads, base = b * threads, len = n - base < threads ? n - base : threads;
        float want = in[base + len - 1 - (i - base)];
        CHECK(out[i] == want, "%s reverse %d: %g, want %g", on, i, out[i], want);
        CHECK(__bfloat162float(out16[i]) == __bfloat162float(__float2bfloat16(want)), "%s bf16 reverse %d", on, i);
    }
    // the element no thread writes reaches the output as NaN, in every block
    std::vector<float> nan_out(3 * 32, 0.0f);
    simt_unwritten(nan_out.data(), 3, 32, nullptr);
    int nans = 0;
    for (float x : nan_out) nans += isnan(x) ? 1 : 0;
    CHECK(nans == 3 * 32, "%s unwritten dynamic shared memory: %d of %d outputs NaN", on, nans, 3 * 32);
}
static void test_2d(const char *on) {
    int rows = 45, cols = 70; // 5 x 3 blocks of 16 x 16, ragged edges
    std::vector<float> in = randv((size_t)rows * cols), out((size_t)rows * cols, -1.0f);
    simt_transpose(out.data(), in.data(), rows, cols, nullptr);
    int bad = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) bad += out[(size_t)c * rows + r] != in[(size_t)r * cols + c];
    CHECK(bad == 0, "%s transpose: %d of %d elements wrong", on, bad, rows * cols);

    dim3 grid(3, 2, 2), block(4, 3, 2);
    int nt = 3 * 2 * 2 * 4 * 3 * 2, count = 0;
    std::vector<int> ids(4 * nt, -1);
    simt_ids(ids.data(), &count, grid, block, nullptr);
    CHECK(count == nt, "%s ids: atomic count %d, want %d", on, count, nt);
    bad = 0;
    for (unsigned bz = 0; bz < 2; bz++)
        for (unsigned by = 0; by < 2; by++)
            for (unsigned bx = 0; bx < 3; bx++)
                for (unsigned tz = 0; tz < 2; tz++)
                    for (unsigned ty = 0; ty < 3; ty++)
                        for (unsigned tx = 0; tx < 4; tx++) {
                            int b = (bz * 2 + by) * 3 + bx, g = b * 24 + (tz * 3 + ty) * 4 + tx;
                            bad += ids[4 * g] != b || ids[4 * g + 1] != (int)(tx + 100 * ty + 10000 * tz) ||
                                   ids[4 * g + 2] != (int)(bx + 100 * by + 10000 * bz) || ids[4 * g + 3] != 4 + 300 + 20000;
                        }
    CHECK(bad == 0, "%s 3D indices: %d of %d threads wrong", on, bad, nt);
}

/* ---- 16-bit conversions (host side of the shim) ------------------------------------------------------------ */
static void test_half_types(void) {
    struct { float f; unsigned short bf, h; } cases[] = {
        {1.0f, 0x3f80, 0x3c00}, {-2.0f, 0xc000, 0xc000}, {0.0f, 0, 0}, {65504.0f, 0x4780, 0x7bff},
        {65520.0f, 0x4780, 0x7c00}, {1e-8f, 0x322c, 0x0000}, {6.0e-8f, 0x3381, 0x0001}, {1.00390625f, 0x3f80, 0x3c04},
        {1.01171875f, 0x3f82, 0x3c0c}, {INFINITY, 0x7f80, 0x7c00}, {3.0e-5f, 0x37fc, 0x01f7},
    };
    for (auto &c : cases) {
        unsigned short bf = __bfloat16_as_ushort(__float2bfloat16(c.f)), h = __half_as_ushort(__float2half(c.f));
        CHECK(bf == c.bf, "bf16(%g) = 0x%04x, want 0x%04x", c.f, bf, c.bf);
        CHECK(h == c.h, "half(%g) = 0x%04x, want 0x%04x", c.f, h, c.h);
    }
    CHECK(isnan(__bfloat162float(__float2bfloat16(NAN))) && isnan(__half2float(__float2half(NAN))), "NaN survives");
    // every half value round-trips through float
    int bad = 0;
    for (unsigned u = 0; u < 65536; u++) {
        __half h = __ushort_as_half((unsigned short)u);
        float f = __half2float(h);
        if (!isnan(f) && __half_as_ushort(__float2half(f)) != u) bad++;
    }
    CHECK(bad == 0, "%d half values do not round-trip", bad);
}

/* ---- the wrong kernels, each in a forked child ------------------------------------------------------------ */
/* want_signal: 0 = SIGABRT, -1 = killed by another signal or a sanitizer's non-zero exit */
static void expect_abort(const char *what, int which, int threads, int order, const char *want1, const char *want2,
                         int want_signal = 0) {
    int fds[2];
    if (pipe(fds) != 0) { perror("pipe"); exit(1); }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        mgt_simt_set_order(order, 7);
        std::vector<float> out(1024), in(1024, 1.0f);
        if (which >= 10) run_local_bad(which, out.data());
        else simt_bad(which, out.data(), in.data(), threads, nullptr);
        fprintf(stderr, "(the kernel returned)\n");
        _exit(0);
    }
    close(fds[1]);
    std::string text;
    char buf[4096];
    ssize_t k;
    while ((k = read(fds[0], buf, sizeof buf)) > 0) text.append(buf, (size_t)k);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    bool aborted = WIFSIGNALED(status) && WTERMSIG(status) == (want_signal ? want_signal : SIGABRT);
    if (want_signal == -1) aborted = (WIFSIGNALED(status) && WTERMSIG(status) != SIGABRT) || (WIFEXITED(status) && WEXITSTATUS(status) != 0);
    bool said = text.find(want1) != std::string::npos && (!want2 || text.find(want2) != std::string::npos);
    CHECK(aborted && said, "%s (%s): aborted %d, message:\n%s", what, order_name(order), aborted, text.c_str());
    if (order == MGT_SIMT_FORWARD) { // the line that says it, cut at 200 characters
        size_t at = *want1 ? text.find(want1) : std::string::npos;
        at = at == std::string::npos ? 0 : text.rfind('\n', at) + 1;
        size_t nl = text.find('\n', at);
        std::string line = text.substr(at, nl == std::string::npos ? 200 : (nl - at < 200 ? nl - at : 200));
        if (line.empty()) line = "(no message) killed by signal " + std::to_string(WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        printf("  %-22s %s\n", what, line.c_str());
    }
}

#ifdef MGT__SIMT_TSAN
/* the kernel without its __syncthreads: TSan must see the race between two threads of the block */
static void expect_tsan_race(void) {
    int fds[2];
    if (pipe(fds) != 0) { perror("pipe"); exit(1); }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        std::vector<float> out(256), in(256, 1.0f);
        simt_bad(4, out.data(), in.data(), 256, nullptr);
        _exit(0);
    }
    close(fds[1]);
    std::string text;
    char buf[4096];
    ssize_t k;
    while ((k = read(fds[0], buf, sizeof buf)) > 0) text.append(buf, (size_t)k);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    bool race = text.find("ThreadSanitizer: data race") != std::string::npos &&
                text.find("simt_bad_race_kernel") != std::string::npos;
    CHECK(race, "the kernel without __syncthreads drew no TSan data race report:\n%s", text.c_str());
    printf("  tsan: the kernel without __syncthreads %s\n", race ? "draws a data-race report in simt_bad_race_kernel" : "was NOT reported");
}
#endif

/* ---- cost of a switch ----------------------------------------------------------------------------------- */
#if !defined(MGT__SIMT_ASAN) && !defined(MGT__SIMT_TSAN)
static void *raw_main_sp, *raw_fiber_sp;
static volatile long raw_count;
static void raw_fiber(void *) {
    for (;;) {
        raw_count++;
        mgt__simt_switch(&raw_fiber_sp, raw_main_sp);
    }
}
static ucontext_t uc_main, uc_fiber;
static void uc_fiber_fn(void) {
    for (;;) swapcontext(&uc_fiber, &uc_main);
}
static void bench_raw(void) {
    /* the bare assembly switch, two fibers ping-ponging */
    static char stack[65536] __attribute__((aligned(16)));
    uint64_t *f = (uint64_t *)(stack + sizeof stack - 16 - 64);
    unsigned mx, cw = 0;
    __asm__ volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(mx), "=m"(cw));
    f[0] = (uint64_t)mx | (uint64_t)cw << 32;
    f[1] = f[2] = f[5] = f[6] = 0;
    f[3] = (uint64_t)(uintptr_t)&raw_fiber;
    f[4] = 0;
    f[7] = (uint64_t)(uintptr_t)&mgt__simt_trampoline;
    raw_fiber_sp = f;
    const long iters = 2000000;
    double t0 = now_s();
    for (long i = 0; i < iters; i++) mgt__simt_switch(&raw_main_sp, raw_fiber_sp);
    double asm_ns = (now_s() - t0) / (2.0 * iters) * 1e9;
    CHECK(raw_count == iters, "raw switch ran the fiber %ld times, want %ld", (long)raw_count, iters);

    static char ustack[65536];
    getcontext(&uc_fiber);
    uc_fiber.uc_stack.ss_sp = ustack;
    uc_fiber.uc_stack.ss_size = sizeof ustack;
    uc_fiber.uc_link = nullptr;
    makecontext(&uc_fiber, uc_fiber_fn, 0);
    const long uiters = 200000;
    t0 = now_s();
    for (long i = 0; i < uiters; i++) swapcontext(&uc_main, &uc_fiber);
    double uc_ns = (now_s() - t0) / (2.0 * uiters) * 1e9;
    printf("  context switch: %.1f ns (assembly, bare), %.1f ns (ucontext swapcontext, %.0fx)\n", asm_ns, uc_ns,
           uc_ns / asm_ns);
}
#endif
static void bench_shim(void) {
    /* through the scheduler: two lanes meeting at __syncwarp, and a 256-thread block at __syncthreads */
    std::vector<int> out(256);
    int iters = 200000;
#if defined(MGT__SIMT_ASAN) || defined(MGT__SIMT_TSAN)
    iters = 10000;
#endif
    mgt_simt_set_order(MGT_SIMT_FORWARD, 0);
    unsigned long long s0 = mgt_simt_switch_count();
    double t0 = now_s();
    simt_barrier_loop(out.data(), 2, iters, 1, nullptr);
    double dt = now_s() - t0;
    unsigned long long sw = mgt_simt_switch_count() - s0;
    CHECK(out[1] == (int)((long long)iters * (iters - 1) / 2), "barrier loop result");
    printf("  __syncwarp, 2 lanes:      %.1f ns per switch (%llu switches, scheduler included)\n", dt / sw * 1e9, sw);
    int biters = iters / 100;
    s0 = mgt_simt_switch_count();
    t0 = now_s();
    simt_barrier_loop(out.data(), 256, biters, 0, nullptr);
    dt = now_s() - t0;
    sw = mgt_simt_switch_count() - s0;
    printf("  __syncthreads, 256 threads: %.1f ns per switch, %.2f us per block-wide barrier\n", dt / sw * 1e9,
           dt / biters * 1e6);
}

int main(void) {
    double t0 = now_s();
    printf("test_simt (%s build)\n", BUILD);
    test_half_types();
    const int orders[][2] = {{MGT_SIMT_FORWARD, 0}, {MGT_SIMT_REVERSE, 0}, {MGT_SIMT_RANDOM, 1}, {MGT_SIMT_RANDOM, 2}};
    for (auto &o : orders) {
        char on[32];
        snprintf(on, sizeof on, "%s/%d", order_name(o[0]), o[1]);
        mgt_simt_set_order(o[0], (unsigned long long)o[1]);
        int before = failures;
        double t1 = now_s();
        test_block_sum(on);
        test_warp_ops(on);
        test_softmax(on);
        test_dynamic_shared(on);
        test_2d(on);
        test_launch_forms(on);
        printf("  kernels under %-10s %s (%.2f s)\n", on, failures == before ? "match their references" : "FAIL",
               now_s() - t1);
    }
    printf("negative tests (each in a forked child):\n");
    for (int order : {MGT_SIMT_FORWARD, MGT_SIMT_REVERSE, MGT_SIMT_RANDOM}) {
        expect_abort("divergent barrier", 0, 32, order, "divergent __syncthreads in kernel simt_bad_divergent_kernel",
                     "block (0,0,0)");
        expect_abort("wrong shuffle mask", 1, 32, order, "mismatched warp mask in kernel simt_bad_mask_kernel",
                     "0x0000ffff");
        expect_abort("differing shuffle masks", 2, 32, order, "mismatched warp mask in kernel simt_bad_mask2_kernel",
                     nullptr);
        expect_abort("deadlock", 3, 64, order, "deadlock in kernel simt_bad_deadlock_kernel", "__syncwarp");
        expect_abort("two barrier sites", 10, 32, order, "divergent __syncthreads in kernel two_sites_kernel",
                     "while thread");
        expect_abort("mask beyond the block", 11, 40, order, "mismatched warp mask in kernel partial_warp_kernel",
                     "do not exist");
    }
    expect_abort("bad launch", 14, 32, MGT_SIMT_FORWARD, "bad launch of kernel noarg_kernel", "grid (1,1,0)");
#if defined(MGT__SIMT_ASAN)
    expect_abort("stack overflow", 12, 2, MGT_SIMT_FORWARD, "stack-overflow", nullptr, -1);
    // MGT_SHARED is a real array, so UBSan's bounds check sees it first (ASan's redzone is behind it)
    expect_abort("shared out of bounds", 13, 32, MGT_SIMT_FORWARD, "out of bounds for type 'float [32]'", nullptr, -1);
#elif !defined(MGT__SIMT_TSAN)
    expect_abort("stack overflow", 12, 2, MGT_SIMT_FORWARD, "", nullptr, SIGSEGV);
#endif
#ifdef MGT__SIMT_TSAN
    expect_tsan_race();
#endif
#if !defined(MGT__SIMT_ASAN) && !defined(MGT__SIMT_TSAN)
    bench_raw();
#endif
    bench_shim();
    printf("%d checks, %d failed, %.1f s\n", checks, failures, now_s() - t0);
    return failures ? 1 : 0;
}
