/* kernels/backend_cuda.h: the mgt_backend table on one GPU (kernels/backend_cuda.cu).

     mgt_backend *be;
     char why[512];
     if (mgt_cuda_backend_create(wd, device, MGT_BF16, &be, why, sizeof why) != 0) ... why says what failed
     be->reserve(be, &limits);  // everything a step uses, from the largest operands
     ... be->step(be, 1); the runtime calls be->matmul_forward(be, ...) etc., enqueued on the
         backend's stream ...; be->finish(be); be->step(be, 0);
     if (be->error(be)) ... the first failure since creation (ops after it do nothing)
     mgt_cuda_backend_destroy(be);

   wd: the watchdog (kernels/watchdog.h) of the world whose rank runs on `device`, which every host
   wait of the backend goes through; NULL for a backend of its own (a deadline of 300 s). */
#ifndef MGT_BACKEND_CUDA_H
#define MGT_BACKEND_CUDA_H

#include <stddef.h> /* defines: size_t */

#include "mgt.h"       /* defines: mgt_backend, MGT_F32, MGT_BF16, MGT_F16 */
#include "watchdog.h"  /* defines: mgt_watchdog */

#ifdef __cplusplus
extern "C" {
#endif

/* 0, or -1 with why */
int mgt_cuda_backend_create(mgt_watchdog *wd, int device, int dtype, mgt_backend **out, char *why, size_t cap);
void mgt_cuda_backend_destroy(mgt_backend *be);
/* where the library's notes go (mgt's logger, through the plugin table); none until set */
void mgt_cuda_set_logger(mgt_log_fn log, void *user);
/* the cudaStream_t every op is enqueued on (for the communicator's events) */
void *mgt_cuda_backend_stream(mgt_backend *be);

#ifdef __cplusplus
}
#endif
#endif /* MGT_BACKEND_CUDA_H */
