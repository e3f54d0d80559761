/* fake_kernels.cpp - kernels for tests/test_fakes.cpp, compiled through the SIMT shim. They live
   in their own file because the shim defines dim3 and friends itself, which the real
   cuda_runtime_api.h that the test includes also defines. */
#include "tests/simt/cuda_cpu.h" /* defines: __global__, MGT_LAUNCH, threadIdx, cudaStream_t */

__global__ void fake_axpy_kernel(float *y, const float *x, float a, int n) { // (n), (n)
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) y[i] += a * x[i];
}
__global__ void fake_fill_kernel(float *y, float v, int n) { // (n)
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) y[i] = v;
}
void fake_axpy(float *y, const float *x, float a, int n, cudaStream_t s) {
    MGT_LAUNCH(fake_axpy_kernel, (n + 127) / 128, 128, 0, s, y, x, a, n);
}
void fake_fill(float *y, float v, int n, cudaStream_t s) {
    MGT_LAUNCH(fake_fill_kernel, (n + 127) / 128, 128, 0, s, y, v, n);
}
/* the two kernels as cudaFuncGetAttributes takes them (a test loads them before launching inside a step) */
void fake_kernel_functions(const void **fn) {
    fn[0] = reinterpret_cast<const void *>(fake_axpy_kernel);
    fn[1] = reinterpret_cast<const void *>(fake_fill_kernel);
}
