/* Cross-entropy over vocabulary-parallel logits, with exactly the semantics of mgt.h's
   mgt__cpu_xent_partial / mgt__cpu_xent_finish. Each of the tp ranks holds columns
   [vocab_start, vocab_start + Vl) of the logits (N,Vl); columns >= V are padding
   (valid = clamp(V - vocab_start, 0, Vl) of them are real).
     xent_partial  per row: part = (max over valid columns, sum of exp(l - max), the target's logit
                   when this rank holds it else 0); the logits are only read
     xent_finish   with parts (tp,N,3) of all ranks (gathered by the caller): M = max of the maxima
                   of ranks with a nonzero sum, S = sum in rank order (fp64) of sum_k exp(max_k - M),
                   loss = log S + M - sum of target logits (fp64); when grad_scale != 0 the logits
                   become dlogits = (exp(l - M) / S - onehot) * grad_scale, and 0 on the padding.
   The fused classifier (llm.c's): no probabilities are stored. The partial reads each row once (an
   online max and sum: a thread rescales its running sum when its max grows, then the block merges
   the threads' (max, sum) pairs), the finish reads it once more and writes the gradient over it: two
   reads and one write of the logits (the softmax in place took three reads and two writes).
   One block per row; reductions within the block have a fixed order. Memory-bound: rows in 16-byte
   packets where Vl and the pointer allow (common.cuh), no 64-bit division. */
#include "common.cuh" // defines: launch macros, floatX conversions, packets, block sums, MGT_REQUIRE, MGT_CHECK_LAUNCH

#define MGT_XENT_BLOCK 256

__device__ __forceinline__ int mgt_xent_valid(int vocab_start, int Vl, int V) {
    return V - vocab_start < Vl ? (V - vocab_start > 0 ? V - vocab_start : 0) : Vl;
}

/* a running (max, sum of exp(x - max)) takes x; a NaN reaches the sum */
__device__ __forceinline__ void mgt_xent_online(float *mx, float *sum, float x) {
    if (x > *mx) {
        *sum = *sum * expf(*mx - x) + 1.0f;
        *mx = x;
    } else if (*mx > -INFINITY) {
        *sum += expf(x - *mx);
    }
}

/* packets of E columns at lane positions when packed (Vl % E == 0, logits aligned), then the columns after
   the last whole packet of the valid ones */
template <class floatX>
__global__ void __launch_bounds__(MGT_XENT_BLOCK)
mgt_xent_partial_kernel(float *part, const floatX *logits, const int *targets, int vocab_start, int Vl, int V, int packed) {
    const int E = mgt_pack_of<floatX>::n;
    MGT_SHARED(float, scratch, MGT_WARP);
    int row = (int)blockIdx.x, valid = mgt_xent_valid(vocab_start, Vl, V), y = targets[row] - vocab_start;
    const floatX *l = logits + (size_t)row * (size_t)Vl;
    int whole = packed ? valid / E * E : 0;
    float mx = -INFINITY, sum = 0.0f;
    for (int i = (int)threadIdx.x * E; i < whole; i += (int)blockDim.x * E) {
        mgt_vec<floatX, E> x = mgt_load128<floatX, E>(l + i);
        for (int k = 0; k < E; k++) mgt_xent_online(&mx, &sum, mgt_to_f32(x.v[k]));
    }
    for (int i = whole + (int)threadIdx.x; i < valid; i += (int)blockDim.x) mgt_xent_online(&mx, &sum, mgt_to_f32(l[i]));
    float row_max = mgt_block_max(mx, scratch);
    sum = mgt_block_sum(sum > 0.0f ? sum * expf(mx - row_max) : sum, scratch); /* sum 0: a thread without columns (or a NaN, kept) */
    if (threadIdx.x == 0) {
        part[(size_t)row * 3 + 0] = row_max;
        part[(size_t)row * 3 + 1] = sum;
        part[(size_t)row * 3 + 2] = y >= 0 && y < valid ? mgt_to_f32(l[y]) : 0.0f;
    }
}

/* computed for the padding too and then dropped: a branch around it would split the packet's load */
__device__ __forceinline__ float mgt_xent_grad(float l, int i, int valid, int y, float M, float scale, float grad_scale) {
    float d = expf(l - M) * scale;
    return i >= valid ? 0.0f : i == y ? d - grad_scale : d;
}

template <class floatX>
__global__ void __launch_bounds__(MGT_XENT_BLOCK)
mgt_xent_finish_kernel(double *losses, floatX *logits, const float *parts, int tp, const int *targets, int N, int vocab_start, int Vl, int V,
                       float grad_scale, int packed) {
    const int E = mgt_pack_of<floatX>::n;
    MGT_SHARED(float, row_stats, 2);
    int row = (int)blockIdx.x, valid = mgt_xent_valid(vocab_start, Vl, V), y = targets[row] - vocab_start;
    if (threadIdx.x == 0) {
        float M = -INFINITY;
        double S = 0.0, target = 0.0;
        for (int k = 0; k < tp; k++) {
            const float *p = parts + ((size_t)k * (size_t)N + (size_t)row) * 3;
            if (p[1] > 0.0f && p[0] > M) M = p[0];
        }
        for (int k = 0; k < tp; k++) { /* in rank order: the same sum on every rank */
            const float *p = parts + ((size_t)k * (size_t)N + (size_t)row) * 3;
            if (p[1] > 0.0f) S += (double)p[1] * (double)expf(p[0] - M);
            target += (double)p[2];
        }
        losses[row] = log(S) + (double)M - target;
        row_stats[0] = M;
        row_stats[1] = (float)(1.0 / S) * grad_scale;
    }
    if (grad_scale == 0.0f) return; /* the same for the whole block */
    __syncthreads();
    float M = row_stats[0], scale = row_stats[1];
    floatX *l = logits + (size_t)row * (size_t)Vl;
    int whole = packed ? Vl / E * E : 0;
    for (int i = (int)threadIdx.x * E; i < whole; i += (int)blockDim.x * E) {
        mgt_vec<floatX, E> x = mgt_load128<floatX, E>(l + i);
        for (int k = 0; k < E; k++) x.v[k] = mgt_from_f32<floatX>(mgt_xent_grad(mgt_to_f32(x.v[k]), i + k, valid, y, M, scale, grad_scale));
        mgt_store128<floatX, E>(l + i, x);
    }
    for (int i = whole + (int)threadIdx.x; i < Vl; i += (int)blockDim.x)
        l[i] = mgt_from_f32<floatX>(mgt_xent_grad(mgt_to_f32(l[i]), i, valid, y, M, scale, grad_scale));
}

template <class floatX>
int mgt_cuda_xent_partial(float *part, const floatX *logits, const int *targets, int N, int vocab_start, int Vl, int V, cudaStream_t stream) {
    MGT_REQUIRE(N > 0 && Vl > 0 && V > 0 && vocab_start >= 0);
    MGT_REQUIRE(part && logits && targets);
    int packed = Vl % mgt_pack_of<floatX>::n == 0 && mgt_aligned16(logits);
    MGT_LAUNCH(mgt_xent_partial_kernel<floatX>, N, MGT_XENT_BLOCK, 0, stream, part, logits, targets, vocab_start, Vl, V, packed);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

template <class floatX>
int mgt_cuda_xent_finish(double *losses, floatX *logits, const float *parts, int tp, const int *targets, int N, int vocab_start, int Vl, int V,
                         float grad_scale, cudaStream_t stream) {
    MGT_REQUIRE(N > 0 && Vl > 0 && V > 0 && vocab_start >= 0 && tp > 0);
    MGT_REQUIRE(vocab_start % Vl == 0 && vocab_start / Vl < tp); /* this rank's slice is slice vocab_start / Vl of tp */
    MGT_REQUIRE(losses && logits && parts && targets);
    int packed = Vl % mgt_pack_of<floatX>::n == 0 && mgt_aligned16(logits);
    MGT_LAUNCH(mgt_xent_finish_kernel<floatX>, N, MGT_XENT_BLOCK, 0, stream, losses, logits, parts, tp, targets, N, vocab_start, Vl, V,
               grad_scale, packed);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

/* every kernel the launchers above can launch for floatX (launchers.h: loaded when the run is made) */
template <class floatX> void mgt_cuda_crossentropy_kernels(mgt_kernel_list &l) {
    mgt_kernel_list_add(l, mgt_xent_partial_kernel<floatX>);
    mgt_kernel_list_add(l, mgt_xent_finish_kernel<floatX>);
}

#define MGT_INSTANTIATE(floatX)                                                                                              \
    template int mgt_cuda_xent_partial<floatX>(float *, const floatX *, const int *, int, int, int, int, cudaStream_t);      \
    template int mgt_cuda_xent_finish<floatX>(double *, floatX *, const float *, int, const int *, int, int, int, int, float, \
                                              cudaStream_t); \
    template void mgt_cuda_crossentropy_kernels<floatX>(mgt_kernel_list &);
MGT_FOR_EACH_FLOATX(MGT_INSTANTIATE)
