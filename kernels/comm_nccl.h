/* kernels/comm_nccl.h: mgt_comm over NCCL (kernels/comm_nccl.c), one process, one thread per GPU.

     mgt_nccl_world *w;
     mgt_nccl_world_create(world, devices, fail, &w);          // one thread: ncclCommInitAll
     // then on each rank's thread, with its device current and its compute stream:
     mgt_comm *c;
     mgt_nccl_comm_create(w, rank, stream, groups, ngroups, &c); // ncclCommSplit per kind of group
     ... c->all_reduce(c, &dp_group, grads, n, MGT_BF16) ...
     mgt_nccl_settle(c);                                       // end of step: timings, async errors
     mgt_nccl_comm_destroy(c);                                 // each rank
     mgt_nccl_world_destroy(w);                                // one thread, after all ranks */
#ifndef MGT_COMM_NCCL_H
#define MGT_COMM_NCCL_H

#include "mgt.h" /* defines: mgt_comm, mgt_group, mgt_result */

#ifdef __cplusplus
extern "C" {
#endif

/* sets the calling thread's error message and returns `result` (mgt.h gives its own) */
typedef mgt_result (*mgt_nccl_fail_fn)(mgt_result result, const char *message);

typedef struct mgt_nccl_world mgt_nccl_world;

/* rank i on devices[i]; devices must be distinct (NCCL runs one rank per GPU) */
mgt_result mgt_nccl_world_create(int world, const int *devices, mgt_nccl_fail_fn fail, mgt_nccl_world **out);
/* groups: every group of the rank, in the same order of kinds on every rank (the splits are
   collective over the world); compute_stream: a cudaStream_t that the calls are ordered with.
   On failure *out may still need mgt_nccl_comm_destroy (it is NULL when nothing was made). */
mgt_result mgt_nccl_comm_create(mgt_nccl_world *w, int rank, void *compute_stream, const mgt_group *const *groups, int ngroups,
                                mgt_comm **out);
/* waits for this rank's communication, adds its time to the statistics, reports asynchronous errors */
mgt_result mgt_nccl_settle(mgt_comm *comm);
void mgt_nccl_comm_destroy(mgt_comm *comm);
/* unblocks every rank after an error: every communicator of the world is aborted */
void mgt_nccl_world_abort(mgt_nccl_world *w);
void mgt_nccl_world_destroy(mgt_nccl_world *w);

#ifdef __cplusplus
}
#endif
#endif /* MGT_COMM_NCCL_H */
