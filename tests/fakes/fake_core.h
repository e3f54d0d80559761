/* fake_core.h - what the three checking fakes share (internal: tests include fakes.h instead).

   The state of every fake lives behind one mutex (mgtfake::mu). Stream operations are enqueued
   with mgtfake::enqueue, which checks each pointer the operation touches (a live allocation of the
   stream's device, inside its bounds) and the cross-stream hazards, then queues the work; the work
   itself runs later, outside the mutex, when something synchronises with the stream or polls it.
   Blocking waits go through mgtfake::wait, which reports a deadlock instead of hanging. */
#ifndef MGT_FAKE_CORE_H
#define MGT_FAKE_CORE_H

#include <cuda_runtime_api.h> /* defines: cudaStream_t, cudaError_t */
#include <stddef.h>           /* defines: size_t */
#include <stdint.h>           /* defines: uint16_t, uint32_t, uint64_t */
#include <string.h>           /* defines: memcpy */
#include <condition_variable> /* defines: std::condition_variable */
#include <functional>         /* defines: std::function */
#include <mutex>              /* defines: std::mutex, std::unique_lock */
#include <set>                /* defines: std::set */
#include <string>             /* defines: std::string */
#include <vector>             /* defines: std::vector */

namespace mgtfake {

/* "mgt fake <api>: <message>" on stderr, then abort(): the one way a checking failure ends */
[[noreturn]] void fail(const char *api, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
std::string strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

extern std::mutex mu;              /* guards every table of the fakes */
extern std::condition_variable cv; /* notified on every bit of progress */
typedef std::unique_lock<std::mutex> lock_t;

/* Block (releasing mu) until ready() holds. `what` describes the wait for a deadlock report: when
   every thread that owns a live NCCL rank is waiting (or gone) and nothing progressed for a while,
   the wait fails with the list of waiters; MGT_FAKE_TIMEOUT_S (default 120) is the last resort. */
void wait(lock_t &lk, const std::function<bool()> &ready, const std::string &what);
void progress(); /* something moved: call with mu held */
/* NCCL's view of ranks for the deadlock check: each live communicator has an owner thread */
void set_owner_check(bool (*all_owners_stuck)(std::string *why));
bool thread_is_waiting(const void *thread_token);
const void *thread_token(); /* identifies the calling thread (mu held) */
const void *device_owner(int device); /* the thread that selected the device last, or NULL (mu held) */
bool thread_is_gone(const void *thread_token);

/* one pointer an operation touches; bytes == 0: a kernel argument, whose extent is unknown (the
   element it points to counts); any_device: memory of any device (and host memory) is allowed */
struct mem_use {
    const void *p;
    size_t bytes;
    bool write;
    const char *role; /* "A", "send buffer", "argument 2"... for messages */
    bool any_device;
};
int current_device();
/* check `acc` for the stream's device and the hazards, then queue `run` on the stream (nullptr or
   cudaStreamLegacy: the legacy default stream of the current device). `device` is the device the
   caller requires the stream to belong to (-1: the current device, -2: any). */
struct ticket {
    void *stream;
    uint64_t seq;
};
ticket enqueue(const char *api, cudaStream_t stream, int device, const std::string &what,
               const std::vector<mem_use> &acc, std::function<void()> run,
               const std::function<void(const ticket &)> &under_lock = nullptr);
/* an operation that may have to wait for other threads (an NCCL call: its peers): step(mode) is
   called, without mu, when the stream reaches it, and again after it returned false.
   RUN_TRY: go as far as possible without waiting, false if not finished (a host poll makes the
   device progress); RUN_BLOCK: finish, waiting (through mgtfake::wait) where needed;
   RUN_ABANDON: the device faulted: end at once without doing the rest (true) */
enum { RUN_TRY = 0, RUN_BLOCK = 1, RUN_ABANDON = 2 };
ticket enqueue_step(const char *api, cudaStream_t stream, int device, const std::string &what,
                    const std::vector<mem_use> &acc, std::function<bool(int mode)> step);
void synchronize(const ticket &t); /* run the stream through t, as the calling host thread */
/* mu held: run the stream through t as far as it can go without waiting, as its device would run
   work already launched whatever its host thread does; the calling thread, which may be inside a
   wait, counts as running meanwhile. True once t is done. */
bool help_run(lock_t &lk, const ticket &t);
int stream_device(const char *api, cudaStream_t stream);
bool is_device_memory(const void *p, int *device); /* a live cudaMalloc allocation */

/* steps (kernels/fake_note.h), with mu held: whether `device` is inside a step of its rank, the op
   its backend named last, and the check that fails a call made inside one */
bool in_step(int device);
bool in_warm_up(int device); /* the step is the runtime's warm-up (MGT_NOTE_WARM_UP_BEGIN) */
std::string step_op(int device);
void step_check(const char *api, int device, const std::string &what, const char *why);
/* with mu held: the kernel a library call picks, named by `key` (its operation, types and epilogue),
   loaded into `device`'s context at its first use, which inside a step fails (lazy loading) */
void load_library_kernel(const char *api, int device, const std::string &key, const std::string &what);
/* with mu held: NCCL's thread will launch (+1) or has launched (-1) a call of `device`; a kernel load
   meanwhile fails, as one beside a queued NCCL call does */
void late_launch(int device, int delta);
/* with mu held: the sticky error of a device one of whose kernels faulted (MGT_FAKE_KERNEL_FAULT),
   or cudaSuccess */
cudaError_t device_fault(int device);

/* 16-bit floats: round to nearest even, NaN kept */
inline float bf16_to_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
inline uint16_t float_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
/* destroys a handle of a library whose live handles are a set (cuBLASLt's, cuDNN's): one that is
   not live (never made, or destroyed already) is a failure */
template <class H> void destroy_handle(std::set<H *> &live, H *h, const char *api, const char *library) {
    lock_t lk(mu);
    if (!live.erase(h)) fail(api, "%p is not a live %s handle", (void *)h, library);
    delete h;
}

float half_to_float(uint16_t h);
uint16_t float_to_half(float f);

} // namespace mgtfake
#endif
