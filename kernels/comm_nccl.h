/* kernels/comm_nccl.h: mgt_comm over NCCL (kernels/comm_nccl.c), one process, one thread per GPU,
   and the watchdog that every host wait of a rank (its communicator's and its backend's) goes
   through.

     mgt_nccl_world *w;
     mgt_nccl_world_create(world, 0, world, devices, NULL, timeout_s, fail, &w); // one thread: non-blocking communicators
     // then on each rank's thread, with its device current and its compute stream:
     mgt_comm *c;
     mgt_nccl_comm_create(w, rank, stream, groups, ngroups, &c); // ncclCommSplit per kind of group
     ... c->all_reduce(c, &dp_group, grads, n, MGT_BF16) ...
     mgt_nccl_settle(c);                                       // end of step: timings, async errors
     mgt_nccl_comm_destroy(c);                                 // each rank
     mgt_nccl_world_destroy(w);                                // one thread, after all ranks

   The backend of rank r (kernels/backend_cuda.cu) waits with mgt_nccl_wait(w, r, event, what):
   the same deadline, the same checks of NCCL's asynchronous errors and of the world's abort, and
   on a failure the same one message, naming the rank, its GPU, what it waited for, the collective
   it was behind (its group and sequence number) and what every other rank was last doing. */
#ifndef MGT_COMM_NCCL_H
#define MGT_COMM_NCCL_H

#include <stddef.h> /* defines: size_t */

#include "mgt.h" /* defines: mgt_comm, mgt_group, mgt_result */

#ifdef __cplusplus
extern "C" {
#endif

/* sets the calling thread's error message and returns `result` (mgt.h gives its own) */
typedef mgt_result (*mgt_nccl_fail_fn)(mgt_result result, const char *message);

typedef struct mgt_nccl_world mgt_nccl_world;

/* this process's ranks first..first+count-1 of `world`, rank first+i on devices[i]; devices must be
   distinct (NCCL runs one rank per GPU). unique_id: MGT_NCCL_ID_BYTES from mgt_nccl_unique_id in
   the process of rank 0, which every process joins (ncclCommInitRank; several processes: under
   mpirun), or NULL when this process holds every rank. timeout_s: the longest any host wait of a
   rank may take ([parallel] timeout_s); <= 0: 300 s */
mgt_result mgt_nccl_world_create(int world, int first, int count, const int *devices, const void *unique_id, double timeout_s,
                                 mgt_nccl_fail_fn fail, mgt_nccl_world **out);
/* a new NCCL unique id (ncclGetUniqueId) into id (MGT_NCCL_ID_BYTES) */
mgt_result mgt_nccl_unique_id(void *id, mgt_nccl_fail_fn fail);
/* groups: every group of the rank, in the same order of kinds on every rank (the splits are
   collective over the world): TP, DP, PP, embedding, world, as mgt.h makes them (the order names
   them in messages); compute_stream: a cudaStream_t that the calls are ordered with.
   On failure *out may still need mgt_nccl_comm_destroy (it is NULL when nothing was made). */
mgt_result mgt_nccl_comm_create(mgt_nccl_world *w, int rank, void *compute_stream, const mgt_group *const *groups, int ngroups,
                                mgt_comm **out);
/* waits for this rank's communication, adds its time to the statistics, reports asynchronous errors */
mgt_result mgt_nccl_settle(mgt_comm *comm);
void mgt_nccl_comm_destroy(mgt_comm *comm);
/* after a rank's error: every communicator of the world is aborted, each under its rank's guard
   (never one that another thread is inside), and every rank's next wait or call returns */
void mgt_nccl_world_abort(mgt_nccl_world *w);
void mgt_nccl_world_destroy(mgt_nccl_world *w);

/* ---- the watchdog, for the backend of a rank of the world ---- */

/* the rank that runs on `device`, or -1 */
int mgt_nccl_world_rank(const mgt_nccl_world *w, int device);
double mgt_nccl_timeout(const mgt_nccl_world *w);
/* waits for `event` (a cudaEvent_t of the rank's own streams) until the deadline: polls it, NCCL's
   asynchronous errors of the rank's communicators and the world's abort. `what`: what the host waits
   for ("the step's statistics"). MGT_OK; or the failure, with the one message in `why` (and the
   thread's error): the world is then aborted */
mgt_result mgt_nccl_wait(mgt_nccl_world *w, int rank, void *event, const char *what, char *why, size_t cap);
/* the rank's host is in a step (begin 1), in the warm-up step (2: its calls are not numbered, its
   waits allow 10 x timeout_s, at least 120 s) or between steps (0): what other ranks' messages say of it, and the
   numbering of its calls inside steps */
void mgt_nccl_step(mgt_nccl_world *w, int rank, int begin);
/* the device memory NCCL holds for rank r, measured (cudaMemGetInfo) around the making of its
   communicators and the warm-up that connects them (mgt.h's, ended by the first mgt_nccl_settle);
   0 before that */
size_t mgt_nccl_memory(const mgt_nccl_world *w, int rank);
/* MGT_CUDA_SYNC=1: `finish_op(ctx)` runs before each NCCL call of the rank, so the op its backend
   launched last is waited for (and named, should it fault) before the call meets its error */
void mgt_nccl_before_calls(mgt_nccl_world *w, int rank, void (*finish_op)(void *ctx), void *ctx);
/* a failure the rank's backend found itself (a kernel fault): reported with every rank's state, the
   world aborted; returns `result` with the message in `why` */
mgt_result mgt_nccl_fail(mgt_nccl_world *w, int rank, mgt_result result, const char *reason, char *why, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* MGT_COMM_NCCL_H */
