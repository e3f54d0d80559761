/* fakes.h - test-only hooks of the checking fakes of cudart, cuBLAS, cuDNN and NCCL (tests/fakes/).

   A program links build/fakes/libmgt_fakes.a instead of libcudart, libcublas, libcudnn and libnccl and
   includes the real CUDA headers; it needs this header only to reach into the fakes. What the
   fakes model and check is described at the top of cudart_fake.cpp, cublas_fake.cpp and
   nccl_fake.cpp. Every checking failure prints one line, "mgt fake <api>: <what>, <where>", on
   stderr and aborts, so a test that provokes one runs it in a child process and reads the line.

   Environment: MGT_FAKE_DEVICES (default 8), MGT_FAKE_DEVICE_MIB (default 81559, an H100's),
   MGT_FAKE_TIMEOUT_S (default 120: the last resort when a wait is not a provable deadlock), and
   the fault injectors MGT_FAKE_STALL_RANK, MGT_FAKE_STALL_CALL, MGT_FAKE_NCCL_ERROR,
   MGT_FAKE_KERNEL_FAULT and MGT_FAKE_CUDNN_REFUSE (tests/fakes/README.md). */
#ifndef MGT_FAKES_H
#define MGT_FAKES_H

#include <stddef.h> /* defines: size_t */

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st;

/* the next n cudaMalloc/cudaMallocHost calls succeed, the ones after fail with
   cudaErrorMemoryAllocation (n < 0: never fail; the default) */
void mgt_fake_fail_malloc_after(long n);
/* live cudaMalloc allocations of a device (-1: cudaMallocHost memory) */
size_t mgt_fake_live_allocations(int device);
/* operations enqueued on a stream and not run yet (0 or NULL: the current device's legacy stream) */
size_t mgt_fake_queued(struct CUstream_st *stream);

/* what a device did inside the steps its backend bracketed (kernels/fake_note.h) */
typedef struct mgt_fake_counts {
    long steps;          /* steps ended */
    long d2h, d2h_bytes; /* copies from the device to host memory */
    long h2d, h2d_bytes; /* and from host memory to the device */
    long waits;          /* host synchronisations: a cudaEventQuery or cudaStreamQuery that answered
                            cudaSuccess, a cudaEvent/Stream/DeviceSynchronize */
    long polls;          /* queries that answered cudaErrorNotReady (a wait in progress) */
    long ops;            /* stream operations enqueued: kernels, GEMMs, copies, NCCL calls, events */
} mgt_fake_counts;
/* the device's counts of its last step (last) and of all its steps so far (total); either may be NULL */
void mgt_fake_step_counts(int device, mgt_fake_counts *last, mgt_fake_counts *total);

/* cudnnBackendExecute calls so far (the fused attention graphs the cuDNN fake ran) */
long mgt_fake_cudnn_executions(void);

#ifdef __cplusplus
}
#endif
#endif
