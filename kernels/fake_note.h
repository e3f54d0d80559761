/* kernels/fake_note.h: what the CUDA backend tells the checking fakes (tests/fakes/), and nothing
   else. The fakes define mgt_cuda_fake_note; the backend declares it weak, so in the real library
   (linked with cudart, cuBLAS and NCCL, not the fakes) the symbol is null and nothing is called.

   Where the fakes are linked, the backend (kernels/backend_cuda.cu) brackets every step of a rank
   with STEP_BEGIN / STEP_END on the rank's thread, with its device current, and names each op it
   starts (OP, e.g. "matmul forward (N 256, C 64, OC 192)"); kernels/comm_nccl.c names each NCCL
   call the same way. The fakes then fail any allocation, free, pageable copy, device-wide or
   unbounded host wait, stream/event creation, first NCCL connection or lazy cuBLAS workspace
   inside a step, naming the call and the op, and count the step's host synchronisations. */
#ifndef MGT_KERNELS_FAKE_NOTE_H
#define MGT_KERNELS_FAKE_NOTE_H

#ifdef __cplusplus
extern "C" {
#endif

/* WAITER: the calling thread only waits for events on behalf of the rank of `device`, whose own
   thread keeps the deadline meanwhile (watchdog.c's waiter): its cudaEventSynchronize is no
   unbounded wait of a step */
/* WARM_UP_BEGIN: the untimed warm-up step before the first (ended by STEP_END): a step's rules, but
   the libraries' kernels may load, and it is not counted */
enum { MGT_NOTE_STEP_BEGIN = 1, MGT_NOTE_STEP_END = 2, MGT_NOTE_OP = 3, MGT_NOTE_WAITER = 4, MGT_NOTE_WARM_UP_BEGIN = 5 };

/* device: the CUDA device of the calling rank; label: the op (MGT_NOTE_OP), else NULL */
void mgt_cuda_fake_note(int device, int what, const char *label) __attribute__((weak));

#ifdef __cplusplus
}
#endif
#endif /* MGT_KERNELS_FAKE_NOTE_H */
