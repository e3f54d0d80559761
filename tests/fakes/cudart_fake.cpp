/* cudart_fake.cpp - a checking fake of the CUDA runtime, for running the CUDA backend's host code
   on a machine without a GPU.

   It is compiled against the real cuda_runtime_api.h and defines the real functions inside
   extern "C", so a signature that differs from the header is a compile error ("conflicting
   declaration of C function"), and a function that is not faked here is a link error (nothing
   links libcudart). tests/fakes/fakes.ninja builds libmgt_fakes.a and proves the link error.

   MODEL
   - Devices: MGT_FAKE_DEVICES (default 8) fake H100s with MGT_FAKE_DEVICE_MIB (default 81559) of
     memory each; the current device is per host thread. Device memory is host memory (a
     mapping per allocation), filled with 0xFF bytes (a NaN in every float format) so reading
     what nobody wrote shows; each allocation remembers its device.
   - Streams are deferred queues. cudaMemcpyAsync, cudaMemsetAsync, kernel launches (through the
     SIMT shim's hook, tests/simt/cuda_cpu.h), cuBLAS and NCCL calls only enqueue; a queue runs when
     the host synchronises with it (cudaStreamSynchronize, cudaEventSynchronize,
     cudaDeviceSynchronize, cudaMemcpy, cudaStreamDestroy, and the polls cudaEventQuery and
     cudaStreamQuery, which then answer cudaSuccess) or when an operation that must wait for it
     runs (cudaStreamWaitEvent, the legacy default stream). cudaMemset is asynchronous, on the
     legacy stream. So a host that reads results without synchronising reads stale memory, as it
     may on a GPU.
   - The legacy default stream (0, cudaStreamLegacy) waits for all blocking streams of its device
     and they wait for it (streams made with cudaStreamNonBlocking do not), as in CUDA.
   - cudaMemcpyAsync from pageable host memory reads the source at the call and a copy into
     pageable host memory completes before the call returns, as CUDA's staging does; with pinned
     memory (cudaMallocHost) both are deferred.

   CHECKS (each failure prints "mgt fake <api>: <what>, <where>" on stderr and aborts)
   - every pointer a stream operation uses is a live allocation of the stream's device, inside its
     bounds (memcpy may use any device and host memory, as UVA allows, but must match its kind);
   - hazards: two operations on different streams that touch overlapping bytes, at least one
     writing, with no happens-before between them (stream order, event record/wait, the legacy
     stream, host synchronisation followed by an enqueue, from any host thread: the fakes cannot see
     the host's own joins and barriers). Vector clocks over streams, checked at
     enqueue, so the report names both operations however the queues happen to run. A kernel
     argument counts as the one element it points to (the shim cannot know a kernel's extent);
   - the host touching device memory: each cudaMalloc allocation is a mapping of its own, PROT_NONE
     except while a stream operation that uses it runs, so a device pointer dereferenced on the
     host faults, and a SIGSEGV handler names the allocation ("mgt fake host access: ..."). A kernel
     may touch the whole allocations its pointer arguments point into (pointers hidden inside
     structs fault). MGT_FAKE_NO_PROTECT=1 turns this off;
   - cudaFree/cudaFreeHost of memory that an operation the host has not synchronised with uses
     (stricter than CUDA, whose cudaFree synchronises: the backend must not rely on that);
   - use of a destroyed stream or event, a kernel launched on a stream of another device;
   - lazy loading: a kernel (the function the shim's hook names) is loaded into a device's context by
     its first launch there or by cudaFuncGetAttributes, unless CUDA_MODULE_LOADING=EAGER was set
     when the fakes started; loading one inside a step fails, as it may synchronise the device.
     The libraries' kernels load the same way (cuBLAS, cuBLASLt and cuDNN call load_library_kernel
     with a key for the kernel a call would pick): they cannot be loaded ahead by name, only by a
     first call outside a step (the runtime's untimed warm-up step);
   - deadlock: every thread owning an NCCL rank waits inside the fakes and nothing moves.
   Plain API errors that a correct program can meet return the CUDA error instead and set the
   per-thread last error: cudaErrorInvalidDevice, cudaErrorMemoryAllocation (also injected with
   mgt_fake_fail_malloc_after), cudaErrorNotReady from cudaEventElapsedTime.

   NOT FAKED: graphs and capture, cudaMallocAsync and pools, managed memory, IPC, peer access
   calls, textures, cudaStreamPerThread (aborts): each is a link error or a loud failure. */
#include "fakes.h"     /* defines: mgt_fake_* test hooks */
#include "kernels/fake_note.h" /* defines: mgt_cuda_fake_note, MGT_NOTE_* (what the backend tells the fakes) */
#include "fake_core.h" /* defines: mgtfake::enqueue, mem_use, wait */
#include <cuda_runtime_api.h> /* defines: the declarations faked here */
#include <stdarg.h>  /* defines: va_list */
#include <stdio.h>   /* defines: fprintf, vsnprintf */
#include <signal.h>  /* defines: sigaction, siginfo_t */
#include <stdlib.h>  /* defines: abort, malloc, getenv */
#include <sys/mman.h> /* defines: mmap, mprotect, munmap */
#include <unistd.h>  /* defines: sysconf */
#include <time.h>    /* defines: clock_gettime */
#include <algorithm> /* defines: std::max */
#include <deque>     /* defines: std::deque */
#include <map>       /* defines: std::map */
#include <memory>    /* defines: std::unique_ptr */
#include <set>       /* defines: std::set */
#include <utility>   /* defines: std::pair */

struct CUstream_st;
struct CUevent_st;

namespace mgtfake {

std::mutex mu;
std::condition_variable cv;

void fail(const char *api, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "mgt fake %s: %s\n", api, msg);
    fflush(stderr);
    abort();
}
std::string strf(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return msg;
}

float half_to_float(uint16_t h) {
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31u, m = h & 1023u, u;
    if (e == 31) u = s | 0x7f800000u | (m << 13);
    else if (e) u = s | ((e + 112) << 23) | (m << 13);
    else if (!m) u = s;
    else { /* subnormal: normalise */
        e = 113;
        while (!(m & 1024u)) { m <<= 1; e--; }
        u = s | (e << 23) | ((m & 1023u) << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}
uint16_t float_to_half(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(s | 0x7e00u);
    if (a >= 0x477ff000u) return (uint16_t)(s | 0x7c00u); /* rounds to infinity */
    if (a < 0x38800000u) { /* subnormal half: add 0.5 to shift the bits into place, RNE by the FPU */
        float v, bias = 0.5f;
        memcpy(&v, &a, 4);
        v += bias;
        uint32_t r;
        memcpy(&r, &v, 4);
        return (uint16_t)(s | (r - 0x3f000000u));
    }
    uint32_t r = a + 0xc8000fffu + ((a >> 13) & 1u); /* rebias exponent (-112 << 23) and round */
    return (uint16_t)(s | (r >> 13));
}

/* ---- threads, waits, deadlocks ---------------------------------------------------------------- */
struct thread_rec {
    bool waiting = false, gone = false;
    bool waiter = false; /* waits for events for a rank whose thread keeps the deadline (MGT_NOTE_WAITER) */
    int running = 0; /* stream operations this thread is running (a kernel may take a while) */
    std::string what;
};
/* the tables live on the heap and are never freed: a gone thread's record stays readable, a stale
   handle is still recognised, and nothing is destroyed at exit under a thread still using it */
static std::vector<thread_rec *> &threads = *new std::vector<thread_rec *>;
static uint64_t progress_count = 0;
static bool (*owners_stuck)(std::string *) = nullptr;
struct thread_slot {
    thread_rec *rec = nullptr;
    ~thread_slot() {
        if (rec) {
            lock_t lk(mu);
            rec->gone = true;
            cv.notify_all();
        }
    }
};
static thread_local thread_slot self_slot;
static thread_rec *self_rec() { /* mu held */
    if (!self_slot.rec) {
        self_slot.rec = new thread_rec;
        threads.push_back(self_slot.rec);
    }
    return self_slot.rec;
}
const void *thread_token() { return self_rec(); }
/* the thread that selected each device last (cudaSetDevice): a rank's thread, for a communicator no
   thread has called yet (made by ncclCommInitAll on another thread) */
static std::vector<thread_rec *> &device_thread = *new std::vector<thread_rec *>(64, nullptr);
const void *device_owner(int device) { return device >= 0 && device < 64 ? device_thread[(size_t)device] : nullptr; }
bool thread_is_waiting(const void *t) { return static_cast<const thread_rec *>(t)->waiting; }
bool thread_is_gone(const void *t) { return static_cast<const thread_rec *>(t)->gone; }
void set_owner_check(bool (*f)(std::string *)) { owners_stuck = f; }
void progress() {
    progress_count++;
    cv.notify_all();
}
static double now_s() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
void wait(lock_t &lk, const std::function<bool()> &ready, const std::string &what) {
    if (ready()) return;
    static const double timeout = getenv("MGT_FAKE_TIMEOUT_S") ? atof(getenv("MGT_FAKE_TIMEOUT_S")) : 120.0;
    thread_rec *me = self_rec();
    me->waiting = true;
    me->what = what;
    double start = now_s(), quiet_since = start;
    uint64_t seen = progress_count;
    while (!ready()) {
        cv.wait_for(lk, std::chrono::milliseconds(50));
        double t = now_s();
        if (progress_count != seen) { seen = progress_count; quiet_since = t; continue; }
        std::string why, list;
        for (thread_rec *r : threads)
            if (r->waiting) list += "\n  a thread waits for " + r->what;
        /* one quiet second with every rank's owner stuck: nobody can make progress any more */
        bool busy = false; /* a thread running an operation outside any wait is progress to come */
        for (thread_rec *r : threads) busy |= r->running > 0 && !r->waiting;
        if (t - quiet_since > 1.0 && !busy && owners_stuck && owners_stuck(&why)) {
            fail("deadlock", "every rank waits and nothing moves (%s), %s:%s", why.c_str(), what.c_str(), list.c_str());
        }
        if (t - start > timeout)
            fail("timeout", "waited %.0f s (MGT_FAKE_TIMEOUT_S) for %s (not provably a deadlock: %s):%s", timeout,
                 what.c_str(), owners_stuck ? (owners_stuck(&why), why.c_str()) : "no NCCL ranks", list.c_str());
    }
    me->waiting = false;
}

/* ---- the driver's lock --------------------------------------------------------------------------
   cudaMalloc, cudaFree, cudaMallocHost, cudaHostAlloc, cudaFreeHost and copies between the device and
   pageable host memory may synchronise: the driver updates its page tables under a lock of the
   process and waits, holding it, for the device (an allocation or free: every stream of its
   device; a copy: its stream). The fake does both. A thread that makes such a call while a stream of
   its device holds a collective waiting for a rank whose thread then needs the lock (to make the
   same kind of call before it runs its part) deadlocks, as on GPUs, and the deadlock check names
   both. */
static const void *driver_owner = nullptr;
static std::string driver_what;
static void driver_acquire(lock_t &lk, const std::string &what) {
    thread_rec *me = self_rec();
    if (driver_owner != me)
        wait(lk, [] { return driver_owner == nullptr; }, "the driver's lock, held by a thread in " + driver_what + ", for " + what);
    driver_owner = me;
    driver_what = what;
}
static void driver_release() {
    driver_owner = nullptr;
    progress();
}

} // namespace mgtfake

using namespace mgtfake;

/* ---- devices, allocations ------------------------------------------------------------------------ */
typedef std::vector<uint64_t> vclock; /* per stream id: the last of its operations known to have happened */
static void join(vclock &a, const vclock &b) {
    if (a.size() < b.size()) a.resize(b.size(), 0);
    for (size_t i = 0; i < b.size(); i++) a[i] = std::max(a[i], b[i]);
}
static uint64_t at(const vclock &v, int i) { return (size_t)i < v.size() ? v[(size_t)i] : 0; }

struct record { /* one access of one operation to a byte range */
    size_t lo, hi;
    int stream;
    uint64_t seq;
    bool write;
    std::string what;
};
struct alloc {
    char *base;
    size_t bytes;
    int device; /* -1: pinned host memory */
    std::vector<record> recs;
    size_t mapped; /* device memory: its own mapping, PROT_NONE unless an operation on it runs */
    int open;      /* operations running on it now */
};
static std::map<uintptr_t, alloc *> &allocs = *new std::map<uintptr_t, alloc *>; /* by base address */
static int ndevices = -1;
static size_t device_bytes, used_bytes[64];
static long malloc_failures_after = -1;
static bool protect = true; /* MGT_FAKE_NO_PROTECT=1 turns the host-access check off */
/* lazy loading (CUDA_MODULE_LOADING=LAZY, the default since CUDA 12.2): a kernel's code is loaded into
   a device's context at its first launch there, or by cudaFuncGetAttributes; EAGER in the
   environment when the context is made loads every kernel then */
static bool eager_loading = false;
static std::set<std::pair<int, const void *>> &loaded = *new std::set<std::pair<int, const void *>>; /* (device, kernel) */
static const char *const lazy_load_why =
    "CUDA loads a kernel's code at its first use (CUDA_MODULE_LOADING=LAZY, the default since CUDA 12.2), which may synchronise the "
    "device while NCCL kernels spin on another stream: load every kernel when the run is made (cudaFuncGetAttributes on each), or "
    "set CUDA_MODULE_LOADING=EAGER";
static struct sigaction old_segv;
static thread_local int cur_device = 0;
static thread_local cudaError_t last_error = cudaSuccess;

/* per device, under mu: the step its rank is in (the backend's notes, kernels/fake_note.h), the op
   it named last, the sticky error of a faulted kernel, and what its steps did */
struct dev_state {
    bool in_step = false;
    bool warm_up = false; /* the step is the runtime's warm-up (MGT_NOTE_WARM_UP_BEGIN) */
    std::string op = "no op yet";
    cudaError_t sticky = cudaSuccess;
    std::string fault; /* the kernel that faulted */
    mgt_fake_counts cur{}, last{}, total{};
};
static dev_state *const dstate = new dev_state[64]; /* never freed, as the other tables */
static int *const late_launches = new int[64](); /* per device, under mu: NCCL calls its thread has yet to launch */
void mgtfake::late_launch(int device, int delta) {
    if (device >= 0 && device < 64) late_launches[device] += delta;
}
static dev_state &dev(int device) {
    if (device < 0 || device >= 64) fail("device", "device %d is not one of the fake's", device);
    return dstate[device];
}
bool mgtfake::in_step(int device) { return device >= 0 && device < 64 && dstate[device].in_step; }
bool mgtfake::in_warm_up(int device) { return device >= 0 && device < 64 && dstate[device].warm_up; }
std::string mgtfake::step_op(int device) { return dev(device).op; }
cudaError_t mgtfake::device_fault(int device) { return device >= 0 && device < 64 ? dstate[device].sticky : cudaSuccess; }
void mgtfake::step_check(const char *api, int device, const std::string &what, const char *why) {
    if (in_step(device))
        fail(api, "%s on device %d inside a step (during %s): %s", what.c_str(), device, dstate[device].op.c_str(), why);
}
static void count_wait(int device) {
    if (in_step(device)) dstate[device].cur.waits++;
}

static alloc *find_alloc(const void *p);
/* a fault inside device memory: the host (or a kernel, through a pointer that is not one of its
   arguments) touched device memory outside every stream operation on it; anything else goes on to
   the handler there was before */
static void segv(int sig, siginfo_t *si, void *ctx) {
    alloc *a = nullptr;
    if (mu.try_lock()) { /* a fault while mu is held is not an access from host code */
        a = find_alloc(si->si_addr);
        mu.unlock();
    }
    if (a && a->device >= 0) {
        char msg[512];
        int n = snprintf(msg, sizeof msg, "mgt fake host access: device memory at %p (%zu bytes into an allocation of %zu "
                         "bytes, device %d) touched outside any stream operation on it: a device pointer dereferenced "
                         "on the host, or a kernel using memory that is not one of its pointer arguments\n", si->si_addr,
                         (size_t)((char *)si->si_addr - a->base), a->bytes, a->device);
        if (write(2, msg, (size_t)(n < (int)sizeof msg ? n : (int)sizeof msg - 1)) < 0) abort();
        abort();
    }
    sigaction(SIGSEGV, &old_segv, nullptr); /* not ours: fault again under the previous handler */
    (void)sig;
    (void)ctx;
}
static void init_devices() { /* mu held */
    if (ndevices >= 0) return;
    protect = !(getenv("MGT_FAKE_NO_PROTECT") && atoi(getenv("MGT_FAKE_NO_PROTECT")));
    if (protect) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = segv;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigaction(SIGSEGV, &sa, &old_segv);
    }
    const char *loading = getenv("CUDA_MODULE_LOADING");
    eager_loading = loading && !strcmp(loading, "EAGER"); /* read once, as CUDA reads it when it makes the context */
    const char *e = getenv("MGT_FAKE_DEVICES"), *m = getenv("MGT_FAKE_DEVICE_MIB");
    ndevices = e ? atoi(e) : 8;
    if (ndevices < 1 || ndevices > 64) fail("init", "MGT_FAKE_DEVICES=%s: give 1 to 64 devices", e);
    device_bytes = (size_t)(m ? atol(m) : 81559) << 20;
}
int mgtfake::current_device() { return cur_device; }
static cudaError_t err(cudaError_t e) {
    if (e != cudaSuccess) last_error = e;
    return e;
}
static alloc *find_alloc(const void *p) { /* mu held; the allocation containing p */
    auto it = allocs.upper_bound((uintptr_t)p);
    if (it == allocs.begin()) return nullptr;
    --it;
    alloc *a = it->second;
    return (uintptr_t)p < (uintptr_t)a->base + std::max<size_t>(a->bytes, 1) ? a : nullptr;
}
bool mgtfake::is_device_memory(const void *p, int *device) {
    lock_t lk(mu);
    alloc *a = find_alloc(p);
    if (device) *device = a ? a->device : -2; /* -1: pinned host memory, -2: not ours (pageable) */
    return a && a->device >= 0;
}

/* ---- streams and events ------------------------------------------------------------------------ */
struct op {
    uint64_t seq;
    std::vector<std::pair<CUstream_st *, uint64_t>> deps; /* run those streams this far first */
    std::function<bool(int mode)> step; /* RUN_TRY, RUN_BLOCK, RUN_ABANDON (fake_core.h): true once done */
    std::vector<alloc *> opens; /* device memory it may touch: readable while it runs */
    std::string collective; /* an NCCL call (enqueue_step): what it is, for the lazy-loading check */
};
static void set_open(const std::vector<alloc *> &as, int delta) { /* mu held */
    for (alloc *a : as) {
        int before = a->open;
        a->open += delta;
        if (protect && (before == 0) != (a->open == 0) &&
            mprotect(a->base, a->mapped, a->open ? PROT_READ | PROT_WRITE : PROT_NONE) != 0)
            fail("mprotect", "cannot change the protection of %zu bytes at %p", a->mapped, (void *)a->base);
    }
}
struct CUstream_st {
    int id, device;
    bool legacy, nonblocking, destroyed;
    std::deque<op> q;
    uint64_t enq, done;
    bool busy;
    vclock vc; /* what the last enqueued operation happens after */
};
struct CUevent_st {
    int device;
    bool timing, destroyed;
    CUstream_st *s; /* nullptr until recorded */
    uint64_t seq;
    vclock vc;
    double t;
};
static std::vector<CUstream_st *> &streams = *new std::vector<CUstream_st *>; /* by id */
static std::vector<CUstream_st *> &legacy_streams = *new std::vector<CUstream_st *>;
static std::set<CUevent_st *> &events = *new std::set<CUevent_st *>, &dead_events = *new std::set<CUevent_st *>;
/* what the host has synchronised with: one clock for all host threads, since the fakes cannot see
   the host's own joins and barriers (a rank thread synchronises, the main thread frees after join) */
static vclock &host_vc = *new vclock;

static CUstream_st *new_stream(int device, bool legacy, bool nonblocking) {
    CUstream_st *s = new CUstream_st{(int)streams.size(), device, legacy, nonblocking, false, {}, 0, 0, false, {}};
    streams.push_back(s);
    return s;
}
static CUstream_st *resolve(const char *api, cudaStream_t h) { /* mu held */
    init_devices();
    if (h == nullptr || h == cudaStreamLegacy) {
        if (legacy_streams.empty())
            for (int d = 0; d < ndevices; d++) legacy_streams.push_back(new_stream(d, true, false));
        return legacy_streams[(size_t)cur_device];
    }
    if (h == cudaStreamPerThread) fail(api, "cudaStreamPerThread is not faked (the backend uses explicit streams)");
    for (CUstream_st *s : streams)
        if (s == h) {
            if (s->destroyed) fail(api, "stream %d (device %d) was destroyed", s->id, s->device);
            return s;
        }
    fail(api, "%p is not a stream made by cudaStreamCreate", (void *)h);
}
static std::string sname(const CUstream_st *s) {
    return s->legacy ? strf("the default stream of device %d", s->device) : strf("stream %d (device %d)", s->id, s->device);
}

/* run s until operation `seq` is done (mu held; released while an operation runs). mode RUN_BLOCK
   waits where it must (another thread running the queue, a collective's peers); RUN_TRY stops there
   instead and returns false: a host that polls makes the device progress as far as it can. On a
   device whose kernel faulted, operations are abandoned instead of run. */
static thread_local double poll_until = 0; /* a poll's device work ends after this time (0: none) */
static bool run_until(lock_t &lk, CUstream_st *s, uint64_t seq, int mode = RUN_BLOCK) {
    while (s->done < seq) {
        if (mode == RUN_TRY && poll_until > 0 && now_s() > poll_until) return false; /* the poll's share of device time is up */
        if (s->busy) { /* another thread runs it */
            if (mode == RUN_TRY) return false;
            wait(lk, [&] { return !s->busy || s->done >= seq; }, "the queue of " + sname(s) + " that another thread runs");
            continue;
        }
        op &o = s->q.front(); /* stays valid: only the thread that set busy pops it, and pushes keep references */
        s->busy = true;
        while (!o.deps.empty()) {
            std::pair<CUstream_st *, uint64_t> d = o.deps.back();
            if (!run_until(lk, d.first, d.second, mode)) {
                s->busy = false;
                return false;
            }
            o.deps.pop_back();
        }
        thread_rec *me = self_rec();
        int how = dstate[s->device].sticky != cudaSuccess ? RUN_ABANDON : mode;
        me->running++;
        set_open(o.opens, +1);
        lk.unlock();
        bool done = o.step(how);
        if (done) o.step = nullptr; /* release what the operation held (a kernel's arguments) outside the lock */
        lk.lock();
        set_open(o.opens, -1);
        me->running--;
        s->busy = false;
        if (!done) {
            progress();
            return false;
        }
        s->done = o.seq;
        s->q.pop_front();
        progress();
    }
    return true;
}
static void count_wait(int device);
static void sync_stream(lock_t &lk, CUstream_st *s) {
    run_until(lk, s, s->enq);
    join(host_vc, s->vc);
    count_wait(s->device);
}
/* every stream of a device through what is queued now: what the driver may wait for in an
   allocation or a free (the host learns nothing from it: no clock is joined) */
static void drain_device(lock_t &lk, int device) {
    for (size_t i = 0; i < streams.size(); i++) {
        CUstream_st *s = streams[i];
        if (s->device == device && !s->destroyed) run_until(lk, s, s->enq);
    }
}
void mgtfake::synchronize(const ticket &t) {
    lock_t lk(mu);
    CUstream_st *s = static_cast<CUstream_st *>(t.stream);
    run_until(lk, s, t.seq);
    join(host_vc, s->vc); /* conservative: the stream's clock may be ahead of t, never behind */
    count_wait(s->device);
}
bool mgtfake::help_run(lock_t &lk, const ticket &t) {
    CUstream_st *s = static_cast<CUstream_st *>(t.stream);
    if (s->done >= t.seq) return true;
    if (s->busy || s->destroyed) return false;
    thread_rec *me = self_rec();
    bool was = me->waiting;
    me->waiting = false;
    bool done = run_until(lk, s, t.seq, RUN_TRY);
    me->waiting = was;
    return done;
}
int mgtfake::stream_device(const char *api, cudaStream_t h) {
    lock_t lk(mu);
    return resolve(api, h)->device;
}

static std::string describe(const record &r) {
    return strf("%s %s on %s (operation #%llu)", r.write ? "writing" : "reading", r.what.c_str(),
                sname(streams[(size_t)r.stream]).c_str(), (unsigned long long)r.seq);
}
/* check and record one access by operation (s, vc) */
static void track(const char *api, CUstream_st *s, const vclock &vc, alloc *a, size_t lo, size_t hi, bool write,
                  const std::string &what) {
    record nr{lo, hi, s->id, at(vc, s->id), write, what};
    std::vector<record> keep;
    for (record &r : a->recs) {
        bool overlap = r.lo < hi && lo < r.hi, before = r.stream == s->id || at(vc, r.stream) >= r.seq;
        if (overlap && (write || r.write) && !before)
            fail(api, "hazard on bytes [%zu, %zu) of an allocation of %zu bytes at %p (device %d): %s and %s, with no "
                 "event or synchronisation between them", std::max(lo, r.lo), std::min(hi, r.hi), a->bytes,
                 (void *)a->base, a->device, describe(r).c_str(), describe(nr).c_str());
        /* a later access that covers r and happens after it stands for r from now on (FastTrack) */
        bool covered = lo <= r.lo && r.hi <= hi && before && (write || !r.write);
        if (!covered) keep.push_back(std::move(r));
    }
    keep.push_back(nr);
    a->recs.swap(keep);
}

static ticket enqueue_op(const char *api, cudaStream_t h, int device, const std::string &what, const std::vector<mem_use> &acc,
                         std::function<bool(int)> step, const std::function<void(const ticket &)> &under_lock,
                         bool collective = false);
ticket mgtfake::enqueue(const char *api, cudaStream_t h, int device, const std::string &what,
                        const std::vector<mem_use> &acc, std::function<void()> run,
                        const std::function<void(const ticket &)> &under_lock) {
    return enqueue_op(api, h, device, what, acc, [run](int mode) {
        if (mode != RUN_ABANDON) run();
        return true;
    }, under_lock);
}
ticket mgtfake::enqueue_step(const char *api, cudaStream_t h, int device, const std::string &what,
                             const std::vector<mem_use> &acc, std::function<bool(int)> step) {
    return enqueue_op(api, h, device, what, acc, std::move(step), nullptr, true);
}
static ticket enqueue_op(const char *api, cudaStream_t h, int device, const std::string &what, const std::vector<mem_use> &acc,
                         std::function<bool(int)> step, const std::function<void(const ticket &)> &under_lock,
                         bool collective) {
    lock_t lk(mu);
    CUstream_st *s = resolve(api, h);
    int want = device == -1 ? cur_device : device == -2 ? s->device : device;
    if (s->device != want)
        fail(api, "%s belongs to device %d, but the call is for device %d, %s", sname(s).c_str(), s->device, want, what.c_str());
    if (s->legacy)
        step_check(api, s->device, what + " on the legacy default stream",
                   "that stream waits for every blocking stream of the device and they for it (use the rank's own streams)");
    if (in_step(s->device)) dstate[s->device].cur.ops++;
    op o;
    join(s->vc, host_vc);
    if (s->legacy) { /* waits for every blocking stream of its device */
        for (CUstream_st *b : streams)
            if (!b->nonblocking && !b->legacy && b->device == s->device) {
                if (b->enq > b->done) o.deps.push_back({b, b->enq});
                join(s->vc, b->vc);
            }
    } else if (!s->nonblocking && !legacy_streams.empty()) {
        CUstream_st *l = legacy_streams[(size_t)s->device];
        o.deps.push_back({l, l->enq});
        join(s->vc, l->vc);
    }
    if (s->vc.size() <= (size_t)s->id) s->vc.resize((size_t)s->id + 1, 0);
    o.seq = s->vc[(size_t)s->id] = ++s->enq;
    for (const mem_use &x : acc) {
        if (!x.p) {
            if (x.bytes) fail(api, "%s is a null pointer, %s on %s", x.role, what.c_str(), sname(s).c_str());
            continue;
        }
        alloc *a = find_alloc(x.p);
        if (!a || (a->device < 0 && !x.any_device)) {
            if (x.any_device) continue; /* pageable host memory: not tracked */
            fail(api, "%s %p is not device memory (a host pointer, or freed), %s on %s", x.role, x.p, what.c_str(),
                 sname(s).c_str());
        }
        if (a->device >= 0 && a->device != s->device && !x.any_device)
            fail(api, "%s %p is memory of device %d, used on %s, %s", x.role, x.p, a->device, sname(s).c_str(),
                 what.c_str());
        size_t lo = (size_t)((const char *)x.p - a->base), hi = lo + (x.bytes ? x.bytes : 1);
        if (hi > a->bytes)
            fail(api, "%s %p + %zu bytes runs %zu bytes past its allocation of %zu bytes (device %d), %s", x.role, x.p,
                 x.bytes, hi - a->bytes, a->bytes, a->device, what.c_str());
        track(api, s, s->vc, a, lo, hi, x.write, x.role + (" of " + what));
        if (a->device >= 0 && std::find(o.opens.begin(), o.opens.end(), a) == o.opens.end()) o.opens.push_back(a);
    }
    o.step = std::move(step);
    if (collective) o.collective = what;
    s->q.push_back(std::move(o));
    ticket t{s, s->enq};
    if (under_lock) under_lock(t);
    return t;
}

/* MGT_FAKE_KERNEL_FAULT=NAME[:R][@warm-up]: the first kernel whose name contains NAME, launched outside
   the warm-up step (with @warm-up: inside it), faults when it runs (on
   device R only, when given), as an illegal memory access would: the device's context keeps the
   error (sticky), its later operations are abandoned, and its calls answer the error */
static bool kernel_faults(int device, const std::string &name, bool warm_up) {
    static const char *env = getenv("MGT_FAKE_KERNEL_FAULT");
    if (!env || !*env) return false;
    std::string want = env;
    static const std::string in_warm = "@warm-up";
    bool for_warm_up = want.size() > in_warm.size() && !want.compare(want.size() - in_warm.size(), in_warm.size(), in_warm);
    if (for_warm_up) want.resize(want.size() - in_warm.size());
    if (warm_up != for_warm_up) return false;
    int only = -1;
    size_t colon = want.rfind(':');
    if (colon != std::string::npos) {
        only = atoi(want.c_str() + colon + 1);
        want.resize(colon);
    }
    if (name.find(want) == std::string::npos || (only >= 0 && only != device)) return false;
    lock_t lk(mu);
    dev_state &d = dev(device);
    if (d.sticky != cudaSuccess) return true;
    d.sticky = cudaErrorIllegalAddress;
    d.fault = name;
    fprintf(stderr, "mgt fake: kernel %s faults on device %d (MGT_FAKE_KERNEL_FAULT=%s), during %s\n", name.c_str(), device, env,
            d.op.c_str());
    progress();
    return true;
}

/* the shim's hook (tests/simt/cuda_cpu.h): MGT_LAUNCH hands its launch here when the fakes are linked */
/* mu held: loads `func` into the context of `device` if it is not loaded yet, which inside a step fails */
/* mu held: an NCCL call of `device` not finished yet (queued on a stream, or still to be launched by
   NCCL's thread): what it is, or "" */
static std::string collective_in_flight(int device) {
    for (CUstream_st *s : streams)
        if (s->device == device && !s->destroyed)
            for (const op &o : s->q)
                if (!o.collective.empty()) return o.collective + " on " + sname(s);
    return late_launches[device] > 0 ? "an NCCL call that NCCL's thread has yet to launch" : "";
}
/* mu held: a load inside a step fails; the warm-up step is where the libraries' kernels load, but
   never beside an NCCL kernel: the load may synchronise the device, and that kernel waits for peers
   that may be loading too (CUDA's lazy-loading guide: a kernel spinning until another runs deadlocks) */
static void load_checks(const char *api, int device, const std::string &what, const char *why) {
    if (!in_warm_up(device)) step_check(api, device, what, why);
    std::string nccl = collective_in_flight(device);
    if (!nccl.empty())
        fail(api, "%s on device %d (during %s) while an NCCL kernel is in flight there (%s): loading a kernel may "
             "synchronise the device, and the NCCL kernel waits for peers that may be loading too, a deadlock (load with no "
             "collective in flight: the warm-up step computes without communicating)", what.c_str(), device,
             dstate[device].op.c_str(), nccl.c_str());
}
static void load_kernel(const char *api, int device, const void *func, const std::string &what) {
    init_devices();
    if (eager_loading || loaded.count({device, func})) return;
    load_checks(api, device, what, lazy_load_why);
    loaded.insert({device, func});
}
void mgtfake::load_library_kernel(const char *api, int device, const std::string &key, const std::string &what) {
    init_devices();
    static std::set<std::pair<int, std::string>> &library = *new std::set<std::pair<int, std::string>>;
    if (eager_loading || library.count({device, key})) return;
    load_checks(api, device, what + " (its library kernel is not loaded yet: the first such call)",
               "CUDA loads a library's kernel at its first launch (CUDA_MODULE_LOADING=LAZY, the default since CUDA 12.2), which may "
               "synchronise the device while NCCL kernels spin on another stream; cuBLAS and cuDNN kernels cannot be loaded by "
               "name: run one untimed warm-up step first (MGT_NOTE_WARM_UP_BEGIN), or set CUDA_MODULE_LOADING=EAGER");
    library.insert({device, key});
}
extern "C" void mgt_simt_launch_hook(cudaStream_t stream, const char *kernel, const void *func, void (*run)(void *),
                                     void (*drop)(void *), void *ctx, int nptrs, const void *const *ptrs, const unsigned char *writes) {
    std::vector<mem_use> acc;
    static const char *names[] = {"argument 1", "argument 2", "argument 3", "argument 4", "argument 5", "argument 6",
                                  "argument 7", "argument 8", "argument 9", "argument 10+"};
    for (int i = 0; i < nptrs; i++) acc.push_back({ptrs[i], 0, writes[i] != 0, names[std::min(i, 9)], false});
    std::shared_ptr<void> hold(ctx, drop); /* freed with the queued function, even if never run */
    int device = stream_device("kernel launch", stream);
    std::string name = kernel;
    bool warm_up;
    {
        lock_t lk(mu);
        load_kernel("kernel launch", device, func, strf("the first launch of kernel %s (not loaded yet)", kernel));
        warm_up = in_warm_up(device);
    }
    enqueue_op("kernel launch", stream, -1, strf("kernel %s", kernel), acc, [run, hold, device, name, warm_up](int mode) {
        if (mode != RUN_ABANDON && !kernel_faults(device, name, warm_up)) run(hold.get());
        return true;
    }, nullptr);
}

/* ---- the API ------------------------------------------------------------------------------------ */
extern "C" {

cudaError_t cudaGetDeviceCount(int *count) {
    lock_t lk(mu);
    init_devices();
    if (!count) return err(cudaErrorInvalidValue);
    *count = ndevices;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
    lock_t lk(mu);
    init_devices();
    if (device < 0 || device >= ndevices) return err(cudaErrorInvalidDevice);
    cur_device = device;
    device_thread[(size_t)device] = self_rec();
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int *device) {
    if (!device) return err(cudaErrorInvalidValue);
    *device = cur_device;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device) {
    lock_t lk(mu);
    init_devices();
    if (!p) return err(cudaErrorInvalidValue);
    if (device < 0 || device >= ndevices) return err(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "mgt fake NVIDIA H100 80GB HBM3 (%d)", device);
    p->uuid.bytes[0] = (char)device;
    p->totalGlobalMem = device_bytes;
    p->sharedMemPerBlock = 48 << 10;
    p->sharedMemPerBlockOptin = 227 << 10;
    p->sharedMemPerMultiprocessor = 228 << 10;
    p->regsPerBlock = p->regsPerMultiprocessor = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->totalConstMem = 64 << 10;
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 132;
    p->maxThreadsPerMultiProcessor = 2048;
    p->maxBlocksPerMultiProcessor = 32;
    p->l2CacheSize = 50 << 20;
    p->memoryBusWidth = 5120;
    p->concurrentKernels = p->unifiedAddressing = p->canMapHostMemory = p->managedMemory = 1;
    p->asyncEngineCount = 3;
    p->pciBusID = 0x18 + device;
    p->cooperativeLaunch = p->clusterLaunch = 1;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device) {
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, device);
    if (e != cudaSuccess || !value) return err(e != cudaSuccess ? e : cudaErrorInvalidValue);
    switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = p.maxThreadsPerMultiProcessor; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = (int)p.sharedMemPerBlock; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)p.sharedMemPerBlockOptin; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = (int)p.sharedMemPerMultiprocessor; break;
    case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
    case cudaDevAttrClockRate: *value = 1980000; break;       /* kHz: an H100 SXM's boost clock */
    case cudaDevAttrMemoryClockRate: *value = 2619000; break; /* kHz: its HBM3 */
    case cudaDevAttrEccEnabled: *value = 1; break;
    default: fail("cudaDeviceGetAttribute", "attribute %d is not faked", (int)attr);
    }
    return cudaSuccess;
}
cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer) { /* every fake GPU reaches every other (one NVSwitch) */
    int n = 0;
    cudaGetDeviceCount(&n);
    if (!can || device < 0 || device >= n || peer < 0 || peer >= n) return err(cudaErrorInvalidDevice);
    *can = device != peer;
    return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int *v) {
    if (!v) return err(cudaErrorInvalidValue);
    *v = CUDART_VERSION;
    return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int *v) {
    if (!v) return err(cudaErrorInvalidValue);
    *v = CUDART_VERSION;
    return cudaSuccess;
}
cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value) {
    /* the shim checks a launch's dynamic shared memory against the same 227 KiB itself */
    if (!func) return err(cudaErrorInvalidDeviceFunction);
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize && (value < 0 || value > 227 * 1024))
        return err(cudaErrorInvalidValue);
    return cudaSuccess;
}
cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func) {
    lock_t lk(mu);
    if (!attr) return err(cudaErrorInvalidValue);
    if (!func) return err(cudaErrorInvalidDeviceFunction);
    load_kernel("cudaFuncGetAttributes", cur_device, func, "loading a kernel");
    memset(attr, 0, sizeof *attr); /* an H100's answer for a small kernel */
    attr->maxThreadsPerBlock = 1024;
    attr->numRegs = 32;
    attr->ptxVersion = attr->binaryVersion = 90;
    attr->maxDynamicSharedSizeBytes = 48 << 10;
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total) {
    lock_t lk(mu);
    init_devices();
    if (!free_bytes || !total) return err(cudaErrorInvalidValue);
    *total = device_bytes;
    *free_bytes = device_bytes - used_bytes[cur_device];
    return cudaSuccess;
}

static cudaError_t do_malloc(const char *api, void **p, size_t bytes, int device) {
    lock_t lk(mu);
    init_devices();
    if (!p) return err(cudaErrorInvalidValue);
    *p = nullptr;
    step_check(api, cur_device, strf("%s of %zu bytes", api, bytes),
               "an allocation may wait for every stream of the device (make it when the run is created)");
    if (device_fault(cur_device) != cudaSuccess) return err(device_fault(cur_device));
    driver_acquire(lk, strf("%s of %zu bytes on device %d", api, bytes, cur_device));
    drain_device(lk, cur_device); /* the driver may wait for the device */
    driver_release();
    if (malloc_failures_after == 0) return err(cudaErrorMemoryAllocation);
    if (malloc_failures_after > 0) malloc_failures_after--;
    if (device >= 0 && bytes > device_bytes - used_bytes[device]) return err(cudaErrorMemoryAllocation);
    /* device memory: a mapping of its own (page aligned, so also cudaMalloc's 256), every byte 0xFF
       (NaN) so unwritten memory shows, then no access until an operation on it runs */
    size_t page = (size_t)sysconf(_SC_PAGESIZE), mapped = (std::max<size_t>(bytes, 1) + page - 1) & ~(page - 1);
    char *m;
    if (device >= 0) {
        m = (char *)mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) return err(cudaErrorMemoryAllocation);
    } else if (!(m = (char *)aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) & ~(size_t)255)))
        return err(cudaErrorMemoryAllocation);
    memset(m, 0xff, device >= 0 ? mapped : bytes);
    if (device >= 0 && protect && mprotect(m, mapped, PROT_NONE) != 0) fail("cudaMalloc", "mprotect failed");
    allocs[(uintptr_t)m] = new alloc{m, bytes, device, {}, mapped, 0};
    if (device >= 0) used_bytes[device] += bytes;
    *p = m;
    return cudaSuccess;
}
static cudaError_t do_free(const char *api, void *p, bool device) {
    lock_t lk(mu);
    if (!p) return cudaSuccess;
    {
        alloc *a = find_alloc(p);
        int d = a && a->device >= 0 ? a->device : cur_device;
        step_check(api, d, strf("%s of %p", api, p), "a free may wait for every stream of the device (free when the run ends)");
    }
    auto it = allocs.find((uintptr_t)p);
    if (it == allocs.end() || (it->second->device >= 0) != device) {
        alloc *a = find_alloc(p);
        fail(api, "%p is not %s%s", p, device ? "a live cudaMalloc allocation" : "live cudaMallocHost memory",
             a ? strf(" (it is %zu bytes into one of %zu bytes)", (size_t)((char *)p - a->base), a->bytes).c_str() : "");
    }
    alloc *a = it->second;
    for (const record &r : a->recs)
        if (at(host_vc, r.stream) < r.seq)
            fail(api, "%p (%zu bytes, %s) is still in use: %s, which the host has not synchronised with", p, a->bytes,
                 a->device >= 0 ? strf("device %d", a->device).c_str() : "pinned host", describe(r).c_str());
    {
        int d = a->device >= 0 ? a->device : cur_device;
        driver_acquire(lk, strf("%s of %zu bytes on device %d", api, a->bytes, d));
        drain_device(lk, d); /* the driver may wait for the device */
        driver_release();
        it = allocs.find((uintptr_t)p); /* the table may have changed while mu was released */
        if (it == allocs.end()) fail(api, "%p was freed by another thread meanwhile", p);
    }
    if (a->device >= 0) {
        used_bytes[a->device] -= a->bytes;
        munmap(a->base, a->mapped); /* a stale pointer now faults */
    } else
        free(a->base);
    allocs.erase(it);
    delete a;
    return cudaSuccess;
}
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attr, const void *p) {
    if (!attr) return err(cudaErrorInvalidValue);
    lock_t lk(mu);
    alloc *a = find_alloc(p);
    memset(attr, 0, sizeof *attr);
    attr->type = !a ? cudaMemoryTypeUnregistered : a->device >= 0 ? cudaMemoryTypeDevice : cudaMemoryTypeHost;
    attr->device = a && a->device >= 0 ? a->device : a ? cur_device : -2;
    if (a) attr->devicePointer = (void *)p; /* one address space, as with UVA */
    if (a && a->device < 0) attr->hostPointer = (void *)p;
    return cudaSuccess;
}
cudaError_t cudaMalloc(void **p, size_t bytes) { return do_malloc("cudaMalloc", p, bytes, cur_device); }
cudaError_t cudaFree(void *p) { return do_free("cudaFree", p, true); }
cudaError_t cudaMallocHost(void **p, size_t bytes) { return do_malloc("cudaMallocHost", p, bytes, -1); }
cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned int flags) {
    if (flags & ~(unsigned)cudaHostAllocPortable) return err(cudaErrorInvalidValue); /* mapped and write-combined are not faked */
    return do_malloc("cudaHostAlloc", p, bytes, -1);
}
cudaError_t cudaFreeHost(void *p) { return do_free("cudaFreeHost", p, false); }

static const char *kind_name(cudaMemcpyKind k) {
    switch (k) {
    case cudaMemcpyHostToHost: return "cudaMemcpyHostToHost";
    case cudaMemcpyHostToDevice: return "cudaMemcpyHostToDevice";
    case cudaMemcpyDeviceToHost: return "cudaMemcpyDeviceToHost";
    case cudaMemcpyDeviceToDevice: return "cudaMemcpyDeviceToDevice";
    default: return "cudaMemcpyDefault";
    }
}
/* a copy: checked, counted, and for pageable host memory done as the driver does it (under its lock:
   the stream drained before a copy from pageable memory, which is staged at the call; a copy into
   pageable memory complete before the call returns). `sync`: cudaMemcpy, complete on return. */
static cudaError_t memcpy_call(const char *api, void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t s,
                               bool sync) {
    int ddev = -2, sdev = -2;
    bool dd = is_device_memory(dst, &ddev), sd = is_device_memory(src, &sdev);
    bool want_dd = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    bool want_sd = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (kind != cudaMemcpyDefault && (dd != want_dd || sd != want_sd))
        fail(api, "%s of %zu bytes from %s %p to %s %p", kind_name(kind), n, sd ? "device memory" : "host memory", src,
             dd ? "device memory" : "host memory", dst);
    std::string what = strf("%s of %zu bytes", kind_name(kind), n);
    std::vector<mem_use> acc = {{src, n, false, "source", true}, {dst, n, true, "destination", true}};
    /* a copy may go to a stream of another device than the current one (CUDA's programming guide) */
    int device = stream_device(api, s);
    bool pageable = (sd != dd) && (sd ? ddev == -2 : sdev == -2); /* between the device and pageable host memory */
    {
        lock_t lk(mu);
        if (device_fault(device) != cudaSuccess) return err(device_fault(device));
        if (pageable)
            step_check(api, device, what + strf(" %s pageable host memory", sd ? "into" : "from"),
                       "the driver stages it under a lock of the process and waits for the stream (use pinned memory: cudaHostAlloc)");
        if (in_step(device) && n > 0 && sd && !dd) dstate[device].cur.d2h++, dstate[device].cur.d2h_bytes += (long)n;
        if (in_step(device) && n > 0 && dd && !sd) dstate[device].cur.h2d++, dstate[device].cur.h2d_bytes += (long)n;
        if (pageable && n > 0) {
            driver_acquire(lk, what + strf(" on device %d", device));
            if (!sd) run_until(lk, resolve(api, s), resolve(api, s)->enq); /* a stream sync before the copy */
        }
    }
    ticket t;
    if (n == 0) t = enqueue(api, s, -2, what, {}, [] {});
    else if (sdev == -2) { /* pageable source: staged at the call */
        std::shared_ptr<char> stage((char *)malloc(n), free);
        if (!stage) fail(api, "out of host memory staging %zu bytes", n);
        memcpy(stage.get(), src, n);
        t = enqueue(api, s, -2, what, acc, [dst, stage, n] { memcpy(dst, stage.get(), n); });
    } else
        t = enqueue(api, s, -2, what, acc, [dst, src, n] { memmove(dst, src, n); });
    if (sync || (pageable && sd && n > 0) || (!sd && !dd && n > 0)) synchronize(t); /* into pageable memory, host to host: complete on return */
    lock_t lk(mu);
    if (pageable && n > 0) driver_release();
    return device_fault(device) != cudaSuccess ? err(device_fault(device)) : cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t s) {
    return memcpy_call("cudaMemcpyAsync", dst, src, n, kind, s, false);
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind) {
    return memcpy_call("cudaMemcpy", dst, src, n, kind, nullptr, true);
}
cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_device, const void *src, int src_device, size_t n, cudaStream_t s) {
    int dd = -2, sd = -2;
    is_device_memory(dst, &dd);
    is_device_memory(src, &sd);
    if (dd != dst_device || sd != src_device)
        fail("cudaMemcpyPeerAsync", "destination %p is on device %d, not %d, or source %p on device %d, not %d", dst, dd,
             dst_device, src, sd, src_device);
    return cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s);
}
cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t s) {
    {
        int device = stream_device("cudaMemsetAsync", s);
        lock_t lk(mu);
        if (device_fault(device) != cudaSuccess) return err(device_fault(device));
    }
    enqueue("cudaMemsetAsync", s, -1, strf("cudaMemsetAsync of %zu bytes", n), {{p, n, true, "destination", false}},
            [p, value, n] { memset(p, value, n); });
    return cudaSuccess;
}
cudaError_t cudaMemset(void *p, int value, size_t n) {
    /* on the legacy stream, so it is ordered with later work there and with blocking streams */
    enqueue("cudaMemset", nullptr, -1, strf("cudaMemset of %zu bytes", n), {{p, n, true, "destination", false}},
            [p, value, n] { memset(p, value, n); });
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned int flags) {
    if (!out || (flags & ~(unsigned)cudaStreamNonBlocking)) return err(cudaErrorInvalidValue);
    lock_t lk(mu);
    resolve("cudaStreamCreate", nullptr); /* the legacy streams exist first */
    step_check("cudaStreamCreate", cur_device, "making a stream", "everything a step uses is made when the run is created");
    *out = new_stream(cur_device, false, flags & cudaStreamNonBlocking);
    return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t *out) { return cudaStreamCreateWithFlags(out, cudaStreamDefault); }
cudaError_t cudaStreamDestroy(cudaStream_t h) {
    lock_t lk(mu);
    CUstream_st *s = resolve("cudaStreamDestroy", h);
    if (s->legacy) fail("cudaStreamDestroy", "the default stream cannot be destroyed");
    step_check("cudaStreamDestroy", s->device, "destroying " + sname(s), "streams live as long as the run");
    run_until(lk, s, s->enq); /* CUDA finishes the queued work; the host does not wait for it */
    s->destroyed = true;
    return cudaSuccess;
}
static const char *unbounded_wait =
    "an unbounded host wait (a stalled peer hangs it for ever): poll an event of the rank's own streams with a deadline";
cudaError_t cudaStreamSynchronize(cudaStream_t h) {
    lock_t lk(mu);
    CUstream_st *s = resolve("cudaStreamSynchronize", h);
    step_check("cudaStreamSynchronize", s->device, "cudaStreamSynchronize of " + sname(s), unbounded_wait);
    sync_stream(lk, s);
    return device_fault(s->device) != cudaSuccess ? err(device_fault(s->device)) : cudaSuccess;
}
cudaError_t cudaStreamQuery(cudaStream_t h) {
    /* as cudaEventQuery: cudaErrorNotReady while operations are queued (the device progresses) */
    lock_t lk(mu);
    CUstream_st *s = resolve("cudaStreamQuery", h);
    if (s->enq > s->done) {
        poll_until = now_s() + 0.002;
        run_until(lk, s, s->enq, RUN_TRY);
        poll_until = 0;
        if (in_step(s->device)) dstate[s->device].cur.polls++;
        return err(device_fault(s->device) != cudaSuccess ? device_fault(s->device) : cudaErrorNotReady);
    }
    if (device_fault(s->device) != cudaSuccess) return err(device_fault(s->device));
    join(host_vc, s->vc); /* empty: the host is joined with it */
    count_wait(s->device);
    return cudaSuccess;
}
cudaError_t cudaStreamGetDevice(cudaStream_t h, int *device) {
    if (!device) return err(cudaErrorInvalidValue);
    *device = stream_device("cudaStreamGetDevice", h);
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) {
    lock_t lk(mu);
    resolve("cudaDeviceSynchronize", nullptr);
    step_check("cudaDeviceSynchronize", cur_device, "cudaDeviceSynchronize",
               "it waits for every stream of the device, the communication stream's collectives included, without a deadline");
    for (size_t i = 0; i < streams.size(); i++)
        if (streams[i]->device == cur_device && !streams[i]->destroyed) sync_stream(lk, streams[i]);
    return device_fault(cur_device) != cudaSuccess ? err(device_fault(cur_device)) : cudaSuccess;
}
cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *data) {
    if (!fn) return err(cudaErrorInvalidValue);
    enqueue("cudaLaunchHostFunc", s, -1, "a host function", {}, [fn, data] { fn(data); });
    return cudaSuccess;
}

static CUevent_st *event(const char *api, cudaEvent_t e) {
    CUevent_st *ev = (CUevent_st *)e;
    if (dead_events.count(ev)) fail(api, "event %p was destroyed", (void *)e);
    if (!events.count(ev)) fail(api, "%p is not an event made by cudaEventCreate", (void *)e);
    return ev;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *out, unsigned int flags) {
    if (!out) return err(cudaErrorInvalidValue);
    lock_t lk(mu);
    step_check("cudaEventCreate", cur_device, "making an event", "everything a step uses is made when the run is created");
    CUevent_st *e = new CUevent_st{cur_device, !(flags & cudaEventDisableTiming), false, nullptr, 0, {}, 0.0};
    events.insert(e);
    *out = (cudaEvent_t)e;
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *out) { return cudaEventCreateWithFlags(out, cudaEventDefault); }
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    lock_t lk(mu);
    CUevent_st *ev = event("cudaEventDestroy", e);
    step_check("cudaEventDestroy", ev->device, "destroying an event", "events live as long as the run");
    events.erase(ev);
    dead_events.insert(ev); /* kept, so a later use is reported rather than undefined */
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t h) {
    CUevent_st *ev;
    {
        lock_t lk(mu);
        ev = event("cudaEventRecord", e);
        if (device_fault(ev->device) != cudaSuccess) return err(device_fault(ev->device));
    }
    auto seq = std::make_shared<uint64_t>(0);
    enqueue("cudaEventRecord", h, ev->device, "cudaEventRecord", {}, [ev, seq] {
        lock_t lk(mu); /* the time it runs, if it is still the event's latest record */
        if (ev->seq == *seq) ev->t = now_s();
    }, [ev, seq](const ticket &t) {
        CUstream_st *s = static_cast<CUstream_st *>(t.stream);
        ev->s = s;
        ev->seq = *seq = t.seq;
        ev->vc = s->vc;
    });
    return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t h, cudaEvent_t e, unsigned int flags) {
    CUevent_st *ev;
    {
        lock_t lk(mu);
        ev = event("cudaStreamWaitEvent", e);
        if (flags) return err(cudaErrorInvalidValue);
        if (!ev->s) return cudaSuccess; /* never recorded: nothing to wait for, as in CUDA */
    }
    /* an empty operation that runs the event's stream through the record first; later operations
       of this stream see the event's clock */
    int dev = stream_device("cudaStreamWaitEvent", h);
    enqueue("cudaStreamWaitEvent", h, dev, "cudaStreamWaitEvent", {}, [] {}, [ev](const ticket &t) {
        CUstream_st *s = static_cast<CUstream_st *>(t.stream);
        if (ev->s != s) s->q.back().deps.push_back({ev->s, ev->seq});
        join(s->vc, ev->vc);
    });
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    lock_t lk(mu);
    CUevent_st *ev = event("cudaEventSynchronize", e);
    if (!self_rec()->waiter) step_check("cudaEventSynchronize", ev->device, "cudaEventSynchronize", unbounded_wait);
    if (!ev->s) return cudaSuccess;
    run_until(lk, ev->s, ev->seq);
    join(host_vc, ev->vc);
    count_wait(ev->device);
    return device_fault(ev->device) != cudaSuccess ? err(device_fault(ev->device)) : cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
    /* complete: the host has seen it, so what it enqueues next happens after it, as on a GPU. Not
       complete: cudaErrorNotReady, left as the last error too (some runtimes do; a caller must clear
       it, or its next launch check fails). The query makes the device progress (the fake has no
       device of its own): it runs the event's stream as far as it can without waiting for other
       threads, but answers what the host could see at the call, so one query never completes work
       it finds pending: a poll that answered from the queue it ran would order the host after it and
       hide a missing wait from the hazard check (a removed cudaStreamWaitEvent in comm_nccl.c passed
       while it did). A wait loop's next query sees what this one ran. A poll runs about 2 ms of
       operations at most, so a host that polls with a deadline checks it between them. */
    lock_t lk(mu);
    CUevent_st *ev = event("cudaEventQuery", e);
    if (!ev->s) return cudaSuccess;
    if (ev->s->done < ev->seq) {
        poll_until = now_s() + 0.002; /* about 2 ms of device work per poll: the host's deadline is checked between polls */
        run_until(lk, ev->s, ev->seq, RUN_TRY);
        poll_until = 0;
        if (in_step(ev->device)) dstate[ev->device].cur.polls++;
        return err(device_fault(ev->device) != cudaSuccess ? device_fault(ev->device) : cudaErrorNotReady);
    }
    if (device_fault(ev->device) != cudaSuccess) return err(device_fault(ev->device));
    join(host_vc, ev->vc);
    count_wait(ev->device);
    return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    lock_t lk(mu);
    CUevent_st *a = event("cudaEventElapsedTime", start), *b = event("cudaEventElapsedTime", end);
    if (!ms) return err(cudaErrorInvalidValue);
    if (!a->timing || !b->timing) return err(cudaErrorInvalidResourceHandle);
    if (!a->s || !b->s || a->s->done < a->seq || b->s->done < b->seq) return err(cudaErrorNotReady);
    *ms = (float)((b->t - a->t) * 1e3);
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    {
        lock_t lk(mu);
        if (device_fault(cur_device) != cudaSuccess) return device_fault(cur_device); /* sticky: never cleared */
    }
    return e;
}
cudaError_t cudaPeekAtLastError(void) {
    lock_t lk(mu);
    return device_fault(cur_device) != cudaSuccess ? device_fault(cur_device) : last_error;
}
const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    default: return "cudaErrorUnknown (not produced by the fake)";
    }
}
const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorInvalidDeviceFunction: return "invalid device function";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    default: return "unknown error (not produced by the fake)";
    }
}

/* ---- test hooks (fakes.h) ------------------------------------------------------------------------ */
void mgt_fake_fail_malloc_after(long n) {
    lock_t lk(mu);
    malloc_failures_after = n;
}
size_t mgt_fake_live_allocations(int device) {
    lock_t lk(mu);
    size_t n = 0;
    for (auto &kv : allocs) n += kv.second->device == device;
    return n;
}
size_t mgt_fake_queued(cudaStream_t h) {
    lock_t lk(mu);
    CUstream_st *s = resolve("mgt_fake_queued", h);
    return (size_t)(s->enq - s->done);
}
void mgt_fake_step_counts(int device, mgt_fake_counts *last, mgt_fake_counts *total) {
    lock_t lk(mu);
    if (last) *last = dev(device).last;
    if (total) *total = dev(device).total;
}

/* the backend's notes (kernels/fake_note.h) */
void mgt_cuda_fake_note(int device, int what, const char *label) {
    lock_t lk(mu);
    init_devices();
    dev_state &d = dev(device);
    if (what == MGT_NOTE_STEP_BEGIN || what == MGT_NOTE_WARM_UP_BEGIN) {
        if (d.in_step) fail("mgt_cuda_fake_note", "device %d begins a step inside a step (during %s)", device, d.op.c_str());
        d.in_step = true;
        d.warm_up = what == MGT_NOTE_WARM_UP_BEGIN;
        d.cur = mgt_fake_counts{};
        d.op = d.warm_up ? "the start of the warm-up step" : "the start of a step";
    } else if (what == MGT_NOTE_STEP_END && d.warm_up) { /* not counted */
        d.in_step = d.warm_up = false;
        d.op = "no step";
    } else if (what == MGT_NOTE_STEP_END) {
        if (!d.in_step) fail("mgt_cuda_fake_note", "device %d ends a step it did not begin", device);
        d.in_step = false;
        d.cur.steps = 1;
        d.last = d.cur;
        d.total.steps++;
        d.total.d2h += d.cur.d2h, d.total.d2h_bytes += d.cur.d2h_bytes, d.total.h2d += d.cur.h2d, d.total.h2d_bytes += d.cur.h2d_bytes;
        d.total.waits += d.cur.waits, d.total.polls += d.cur.polls, d.total.ops += d.cur.ops;
        d.op = "no step";
    } else if (what == MGT_NOTE_OP && label)
        d.op = label;
    else if (what == MGT_NOTE_WAITER)
        self_rec()->waiter = true;
}

} /* extern "C" */
