/* unfaked_call.cpp - must NOT link against libmgt_fakes.a: it calls a cudart, a cuBLAS and an NCCL
   function that the fakes leave out (tests/fakes/link_check.sh checks that each one is an
   undefined reference). This is how a backend call that nobody faked shows up. */
#include <cublas_v2.h>        /* defines: cublasDgemm */
#include <cuda_runtime_api.h> /* defines: cudaGraphLaunch */
#include <nccl.h>             /* defines: ncclReduce */

int main(void) {
    double one = 1.0, x = 0.0;
    cudaGraphLaunch(nullptr, nullptr);
    cublasDgemm(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, &x, 1, &x, 1, &one, &x, 1);
    ncclReduce(&x, &x, 1, ncclFloat64, ncclSum, 0, nullptr, nullptr);
    return 0;
}
