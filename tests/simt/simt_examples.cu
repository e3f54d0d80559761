/* simt_examples.cu - kernels written against the contract of cuda_cpu.h: tests/test_simt.cpp runs
   them on the CPU through the shim, and `build/simt_nvcc_check.o` compiles them with nvcc, so the
   contract stays valid CUDA. The last group are deliberately wrong kernels that the shim must
   catch (each is launched only in a forked child of the test). */
#include "cuda_cpu.h" // defines: the CUDA contract (nvcc: real CUDA), MGT_SHARED, MGT_LAUNCH

/* ---- block reduction: shared memory and __syncthreads ----------------------------------------------- */
// out (gridDim.x): the sum of each block's blockDim.x consecutive inputs; in (n); blockDim.x a power of 2
__global__ void simt_block_sum_kernel(float *out, const float *in, int n) {
    MGT_SHARED(float, buf, 1024);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    buf[threadIdx.x] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) buf[threadIdx.x] += buf[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = buf[0];
}
void simt_block_sum(float *out, const float *in, int n, int threads, cudaStream_t stream) {
    MGT_LAUNCH(simt_block_sum_kernel, (n + threads - 1) / threads, threads, 0, stream, out, in, n);
}

/* ---- warp intrinsics -------------------------------------------------------------------------------- */
// all (n) with n = gridDim.x * blockDim.x, blockDim.x a multiple of 32:
// xsum: the warp's sum in every lane (__shfl_xor_sync); seg8: the sum of each 8-lane segment (width 8);
// scan: inclusive prefix sum within the warp (__shfl_up_sync); dsum (warps): lane 0's
// __shfl_down_sync sum; bcast: lane 5's value (__shfl_sync); ballot (warps): lanes with in > 0;
// anyall (warps): any(in > 0) + 2 * all(in > -100)
__global__ void simt_warp_ops_kernel(float *xsum, float *seg8, float *scan, float *dsum, float *bcast,
                                     unsigned *ballot, int *anyall, const float *in) {
    int i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x % warpSize;
    int warp = i / warpSize;
    float v = in[i], x = v, s = v, d = v, p = v;
    for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
    for (int o = 4; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o, 8);
    for (int o = 16; o > 0; o /= 2) d += __shfl_down_sync(0xffffffffu, d, o);
    for (int o = 1; o < 32; o *= 2) {
        float up = __shfl_up_sync(0xffffffffu, p, o);
        if (lane >= o) p += up;
    }
    float b = __shfl_sync(0xffffffffu, v, 5);
    unsigned bal = __ballot_sync(0xffffffffu, v > 0.0f);
    int any = __any_sync(0xffffffffu, v > 0.0f), all = __all_sync(0xffffffffu, v > -100.0f);
    __syncwarp();
    xsum[i] = x;
    seg8[i] = s;
    scan[i] = p;
    bcast[i] = b;
    if (lane == 0) {
        dsum[warp] = d;
        ballot[warp] = bal;
        anyall[warp] = any + 2 * all;
    }
}
void simt_warp_ops(float *xsum, float *seg8, float *scan, float *dsum, float *bcast, unsigned *ballot, int *anyall,
                   const float *in, int n, cudaStream_t stream) {
    MGT_LAUNCH(simt_warp_ops_kernel, n / 64, 64, 0, stream, xsum, seg8, scan, dsum, bcast, ballot, anyall, in);
}

/* ---- softmax: one warp per row ---------------------------------------------------------------------- */
// out, in (rows, cols); 4 warps per block
__global__ void simt_softmax_kernel(float *out, const float *in, int rows, int cols) {
    int row = blockIdx.x * (blockDim.x / warpSize) + threadIdx.x / warpSize, lane = threadIdx.x % warpSize;
    if (row >= rows) return; // whole warps leave together: no barrier follows
    const float *x = in + (size_t)row * cols;
    float m = -INFINITY;
    for (int c = lane; c < cols; c += warpSize) m = fmaxf(m, x[c]);
    for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float sum = 0.0f;
    for (int c = lane; c < cols; c += warpSize) sum += expf(x[c] - m);
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    float inv = 1.0f / sum;
    for (int c = lane; c < cols; c += warpSize) out[(size_t)row * cols + c] = expf(x[c] - m) * inv;
}
void simt_softmax(float *out, const float *in, int rows, int cols, cudaStream_t stream) {
    MGT_LAUNCH(simt_softmax_kernel, (rows + 3) / 4, 128, 0, stream, out, in, rows, cols);
}

/* ---- dynamic shared memory -------------------------------------------------------------------------- */
// out, in (n): each block reverses its blockDim.x elements through dynamic shared memory; the
// bf16 copy out16 (n) checks the 16-bit conversions in a kernel
__global__ void simt_reverse_kernel(float *out, __nv_bfloat16 *out16, const float *in, int n) {
    MGT_DYNAMIC_SHARED(float, tmp);
    int base = blockIdx.x * blockDim.x, t = threadIdx.x;
    if (base + t < n) tmp[t] = in[base + t];
    __syncthreads();
    int len = min(n - base, (int)blockDim.x);
    if (t < len) {
        out[base + t] = tmp[len - 1 - t];
        out16[base + t] = __float2bfloat16(__bfloat162float(__float2bfloat16(tmp[len - 1 - t])));
    }
}
void simt_reverse(float *out, __nv_bfloat16 *out16, const float *in, int n, int threads, cudaStream_t stream) {
    MGT_LAUNCH(simt_reverse_kernel, (n + threads - 1) / threads, threads, threads * sizeof(float), stream, out, out16,
               in, n);
}
// out (gridDim.x * blockDim.x): reads the last dynamic shared element, which no thread writes: NaN
__global__ void simt_unwritten_kernel(float *out) {
    MGT_DYNAMIC_SHARED(float, tmp);
    if (threadIdx.x + 1 < blockDim.x) tmp[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = tmp[threadIdx.x] + tmp[blockDim.x - 1];
}
void simt_unwritten(float *out, int blocks, int threads, cudaStream_t stream) {
    MGT_LAUNCH(simt_unwritten_kernel, blocks, threads, threads * sizeof(float), stream, out);
}

/* ---- 2D blocks over a 2D grid: a tiled transpose ------------------------------------------------------ */
// out (cols, rows), in (rows, cols); 16 x 16 blocks
__global__ void simt_transpose_kernel(float *out, const float *in, int rows, int cols) {
    MGT_SHARED(float, tile, 16 * 17); // 17: the padding that avoids bank conflicts on a GPU
    int c = blockIdx.x * 16 + threadIdx.x, r = blockIdx.y * 16 + threadIdx.y;
    if (r < rows && c < cols) tile[threadIdx.y * 17 + threadIdx.x] = in[(size_t)r * cols + c];
    __syncthreads();
    int oc = blockIdx.y * 16 + threadIdx.x, orow = blockIdx.x * 16 + threadIdx.y; // out row = in column
    if (orow < cols && oc < rows) out[(size_t)orow * rows + oc] = tile[threadIdx.x * 17 + threadIdx.y];
}
void simt_transpose(float *out, const float *in, int rows, int cols, cudaStream_t stream) {
    dim3 grid((cols + 15) / 16, (rows + 15) / 16), block(16, 16);
    MGT_LAUNCH(simt_transpose_kernel, grid, block, 0, stream, out, in, rows, cols);
}
// ids (4 * threads): every thread of a 3D grid of 3D blocks writes its indices and an atomic count
__global__ void simt_ids_kernel(int *ids, int *count) {
    int b = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    int t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    int g = b * blockDim.x * blockDim.y * blockDim.z + t;
    ids[4 * g + 0] = b;
    ids[4 * g + 1] = threadIdx.x + 100 * threadIdx.y + 10000 * threadIdx.z;
    ids[4 * g + 2] = blockIdx.x + 100 * blockIdx.y + 10000 * blockIdx.z;
    ids[4 * g + 3] = blockDim.x + 100 * blockDim.y + 10000 * blockDim.z;
    atomicAdd(count, 1);
}
void simt_ids(int *ids, int *count, dim3 grid, dim3 block, cudaStream_t stream) {
    MGT_LAUNCH(simt_ids_kernel, grid, block, 0, stream, ids, count);
}

/* ---- a cost probe: `iters` barriers (and warp barriers) per thread --------------------------------- */
__global__ void simt_barrier_loop_kernel(int *out, int iters, int warp_only) {
    int acc = 0;
    for (int k = 0; k < iters; k++) {
        if (warp_only) __syncwarp(3u);
        else __syncthreads();
        acc += k;
    }
    out[threadIdx.x] = acc;
}
void simt_barrier_loop(int *out, int threads, int iters, int warp_only, cudaStream_t stream) {
    MGT_LAUNCH(simt_barrier_loop_kernel, 1, threads, 0, stream, out, iters, warp_only);
}

/* ---- wrong kernels: each must be caught --------------------------------------------------------------- */
// only half the warp reaches the barrier
__global__ void simt_bad_divergent_kernel(float *out) {
    if (threadIdx.x < 16) __syncthreads();
    out[threadIdx.x] = 1.0f;
}
// a shuffle whose mask leaves out half of the lanes that call it
__global__ void simt_bad_mask_kernel(float *out) {
    float v = (float)threadIdx.x;
    v += __shfl_xor_sync(0x0000ffffu, v, 1);
    out[threadIdx.x] = v;
}
// lanes 0-15 name the whole warp, lanes 16-31 only themselves
__global__ void simt_bad_mask2_kernel(float *out) {
    float v = (float)threadIdx.x;
    v += __shfl_xor_sync(threadIdx.x < 16 ? 0xffffffffu : 0xffff0000u, v, 1);
    out[threadIdx.x] = v;
}
// thread 0 waits for its warp while the others wait for the block
__global__ void simt_bad_deadlock_kernel(float *out) {
    if (threadIdx.x == 0) __syncwarp();
    else __syncthreads();
    out[threadIdx.x] = 1.0f;
}
// the missing __syncthreads between writing and reading shared memory
__global__ void simt_bad_race_kernel(float *out, const float *in) {
    MGT_SHARED(float, buf, 256);
    buf[threadIdx.x] = in[threadIdx.x];
    out[threadIdx.x] = buf[(threadIdx.x + 1) % blockDim.x];
}
void simt_bad(int which, float *out, const float *in, int threads, cudaStream_t stream) {
    switch (which) {
    case 0: MGT_LAUNCH(simt_bad_divergent_kernel, 1, threads, 0, stream, out); break;
    case 1: MGT_LAUNCH(simt_bad_mask_kernel, 1, threads, 0, stream, out); break;
    case 2: MGT_LAUNCH(simt_bad_mask2_kernel, 1, threads, 0, stream, out); break;
    case 3: MGT_LAUNCH(simt_bad_deadlock_kernel, 1, threads, 0, stream, out); break;
    default: MGT_LAUNCH(simt_bad_race_kernel, 1, threads, 0, stream, out, in); break;
    }
}
