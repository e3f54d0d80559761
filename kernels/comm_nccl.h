/* kernels/comm_nccl.h: mgt_comm over NCCL (kernels/comm_nccl.c), one process, one thread per GPU.

     mgt_nccl_world *w;
     mgt_nccl_world_create(world, 0, world, devices, NULL, timeout_s, fail, &w); // one thread: non-blocking communicators
     // then on each rank's thread, with its device current and its compute stream:
     mgt_comm *c;
     mgt_nccl_comm_create(w, rank, stream, groups, ngroups, &c); // ncclCommSplit per kind of group
     ... c->all_reduce(c, &dp_group, grads, n, MGT_BF16) ...
     mgt_nccl_settle(c);                                       // end of step: timings, async errors
     mgt_nccl_comm_destroy(c);                                 // each rank
     mgt_nccl_world_destroy(w);                                // one thread, after all ranks

   The world makes the watchdog (kernels/watchdog.h) that every host wait of its ranks goes through,
   the communicators' and their backends' (kernels/backend_cuda.cu, given mgt_nccl_watchdog(w)): the
   same deadline, the same checks of NCCL's asynchronous errors and of the world's abort, and on a
   failure the same one message, naming the rank, its GPU, what it waited for, the collective it was
   behind (its group and sequence number) and what every other rank was last doing. */
#ifndef MGT_COMM_NCCL_H
#define MGT_COMM_NCCL_H

#include "mgt.h"      /* defines: mgt_comm, mgt_group, mgt_result */
#include "watchdog.h" /* defines: mgt_watchdog */

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
/* groups: every group of the rank, at most one of each kind (mgt_group.kind; the splits are
   collective over the world and go in the order of kinds on every rank, whatever the order here);
   compute_stream: a cudaStream_t that the calls are ordered with.
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
/* the watchdog of the world's ranks, for their backends (NULL for a NULL world) */
mgt_watchdog *mgt_nccl_watchdog(mgt_nccl_world *w);

#ifdef __cplusplus
}
#endif
#endif /* MGT_COMM_NCCL_H */
