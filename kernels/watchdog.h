/* kernels/watchdog.h: the deadline of every host wait of a process's GPU ranks (kernels/watchdog.c),
   shared by each rank's backend (kernels/backend_cuda.cu) and its communicator (kernels/comm_nccl.c),
   so that neither includes the other.

     mgt_watchdog *wd;
     mgt_watchdog_create(world, devices, timeout_s, fail, &wd); // devices[r]: rank r's GPU, -1 in another process
     mgt_watchdog_set_hooks(wd, &hooks);                        // the communicator's part of a wait and of a failure
     // then on each rank's thread, with its device current:
     mgt_watchdog_step(wd, rank, 1);                            // a step begins (2: the warm-up step; 0: it ended)
     mgt_watchdog_wait(wd, rank, event, "the step's statistics", why, sizeof why);
     mgt_watchdog_destroy(wd);                                  // one thread, after all ranks

   The world's state: its deadline ([parallel] timeout_s), whether it was stopped, and what each rank
   was last doing. A wait polls its event until the deadline, with the world's abort flag and the
   hooks' poll (NCCL's asynchronous errors of the rank's communicators). The rank that sees a deadline
   pass, an asynchronous error or a device fault writes one message (the rank, its GPU, what it waited
   for, what its stream is behind, what every rank was last doing) and stops the world: the abort hook
   then aborts every communicator, and every other rank's next wait or call returns that message. */
#ifndef MGT_KERNELS_WATCHDOG_H
#define MGT_KERNELS_WATCHDOG_H

#include <stddef.h> /* defines: size_t */

#include "mgt.h" /* defines: mgt_result, mgt_fail_fn */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mgt_watchdog mgt_watchdog;

/* what the communicator adds; each may be NULL. Called on the thread of the rank that waits or fails,
   holding no lock of the watchdog but abort, which runs once, under the world's lock */
typedef struct mgt_watchdog_hooks {
    void *ctx;
    /* rank r's asynchronous errors, polled every millisecond of its waits: 0 (none); else the reason
       is written ("NCCL reported an asynchronous error on ...") and 1 returned, or 2 when it is a
       CUDA error under NCCL (the device's own error is then reported instead, when the event has one) */
    int (*poll)(void *ctx, int rank, char *reason, size_t cap);
    /* appends to the failing rank's message what its stream is behind */
    void (*behind)(void *ctx, int rank, char *msg, size_t cap, double now);
    /* appends to another rank's state in the message (it begins with what that rank was doing) its last call */
    void (*last_call)(void *ctx, int rank, char *state, size_t cap);
    /* the world stops: every rank's pending call must return */
    void (*abort)(void *ctx);
} mgt_watchdog_hooks;

/* world ranks, rank r on devices[r] (-1: a rank of another process); timeout_s <= 0: 300 s */
mgt_result mgt_watchdog_create(int world, const int *devices, double timeout_s, mgt_fail_fn fail, mgt_watchdog **out);
void mgt_watchdog_set_hooks(mgt_watchdog *wd, const mgt_watchdog_hooks *hooks);
/* each rank's waiter thread is joined within timeout_s, or left to the process's end */
void mgt_watchdog_destroy(mgt_watchdog *wd);

/* the rank that runs on `device`, or -1 */
int mgt_watchdog_rank(const mgt_watchdog *wd, int device);
/* [parallel] timeout_s; 300 s for a NULL watchdog (a backend of its own) */
double mgt_watchdog_timeout(const mgt_watchdog *wd);

/* waits for `event` (a cudaEvent_t of the rank's own streams) until the deadline: polls it, the
   hooks' poll and the world's abort. `what`: what the host waits for ("the step's statistics").
   MGT_OK; or the failure, with the one message in `why` (and the thread's error): the world is then
   stopped */
mgt_result mgt_watchdog_wait(mgt_watchdog *wd, int rank, void *event, const char *what, char *why, size_t cap);
/* the rank's host is in a step (begin 1), in the warm-up step (2: its waits allow 10 x timeout_s, at
   least 120 s) or between steps (0): what other ranks' messages say of it */
void mgt_watchdog_step(mgt_watchdog *wd, int rank, int begin);
/* 1 when the rank is in a step (the warm-up step included), with the steps begun in *step */
int mgt_watchdog_in_step(mgt_watchdog *wd, int rank, long *step);
/* what the rank's host does now (its own thread), for other ranks' messages; since: when it began
   (mgt_watchdog_now(); earlier for a later stage of the same thing), the age a message gives */
void mgt_watchdog_doing(mgt_watchdog *wd, int rank, double since, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* the longest a wait of the rank may take now, and its name for a message */
double mgt_watchdog_deadline(const mgt_watchdog *wd, int rank);
const char *mgt_watchdog_deadline_name(const mgt_watchdog *wd, int rank);

/* a failure seen by the rank (on its thread, holding no lock the hooks take): the one message
   "rank R (GPU G): <fmt>", what the rank is behind, what every rank was last doing, then `tail`;
   the world is stopped. Returns `result` with the message in `why` (and the thread's error); after
   another rank's failure, MGT_ERROR_COMM with that rank's message */
mgt_result mgt_watchdog_fail(mgt_watchdog *wd, int rank, mgt_result result, char *why, size_t cap, const char *tail, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
/* a rank that finds the world stopped by another: MGT_ERROR_COMM with that rank's message */
mgt_result mgt_watchdog_stopped(mgt_watchdog *wd, char *why, size_t cap);
int mgt_watchdog_aborted(const mgt_watchdog *wd);
/* stops the world (once): the flag, then the abort hook */
void mgt_watchdog_abort(mgt_watchdog *wd);

/* MGT_CUDA_SYNC=1: every op and call is waited for, so a failure names it */
int mgt_watchdog_sync_mode(void);
/* seconds on the watchdog's clock (CLOCK_MONOTONIC) */
double mgt_watchdog_now(void);
/* a short pause in a poll: yields first, then sleeps up to 1 ms (polls that no event signals) */
void mgt_watchdog_pause(int *spins);

/* ---- what a rank's backend and its communicator tell each other through the watchdog ---- */

/* the backend: under MGT_CUDA_SYNC=1, `finish_op(ctx)` waits for the op it launched last */
void mgt_watchdog_set_last_op(mgt_watchdog *wd, int rank, void (*finish_op)(void *ctx), void *ctx);
/* the communicator, before each call: under MGT_CUDA_SYNC=1 the backend's last op is waited for, so
   a fault in it is named before the call meets its error. 1 when it ran and the world is stopped since */
int mgt_watchdog_finish_last_op(mgt_watchdog *wd, int rank);
/* the device memory the communicator holds for the rank (measured by it), which the backend counts
   among its buffers; 0 until set */
void mgt_watchdog_set_comm_memory(mgt_watchdog *wd, int rank, size_t bytes);
size_t mgt_watchdog_comm_memory(mgt_watchdog *wd, int rank);

#ifdef __cplusplus
}
#endif
#endif /* MGT_KERNELS_WATCHDOG_H */
