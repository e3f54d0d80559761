/* Cross-entropy over vocabulary-parallel logits, with exactly the semantics of mgt.h's
   mgt__cpu_xent_partial / mgt__cpu_xent_finish. Each of the tp ranks holds columns
   [vocab_start, vocab_start + Vl) of the logits (N,Vl); columns >= V are padding
   (valid = clamp(V - vocab_start, 0, Vl) of them are real).
     xent_partial  per row: part = (max over valid columns, sum of exp(l - max), the target's logit
                   when this rank holds it else 0); the valid logits become exp(l - max), the
                   padding is left as it is
     xent_finish   with parts (tp,N,3) of all ranks (gathered by the caller): M = max of the maxima
                   of ranks with a nonzero sum, S = sum in rank order (fp64) of sum_k exp(max_k - M),
                   loss = log S + M - sum of target logits (fp64); when grad_scale != 0 the logits
                   become dlogits = (exp(l - max_me) * exp(max_me - M) / S - onehot) * grad_scale,
                   and 0 on the padding. This rank's index is vocab_start / Vl.
   One block per row; reductions within the block have a fixed order. */
#include "common.cuh" // defines: launch macros, floatX conversions, block sums, MGT_REQUIRE, MGT_CHECK_LAUNCH

#define MGT_XENT_BLOCK 256

__device__ __forceinline__ int mgt_xent_valid(int vocab_start, int Vl, int V) {
    return V - vocab_start < Vl ? (V - vocab_start > 0 ? V - vocab_start : 0) : Vl;
}

template <class floatX>
__global__ void __launch_bounds__(MGT_XENT_BLOCK)
mgt_xent_partial_kernel(float *part, floatX *logits, const int *targets, int vocab_start, int Vl, int V) {
    MGT_SHARED(float, scratch, MGT_WARP);
    int row = (int)blockIdx.x, valid = mgt_xent_valid(vocab_start, Vl, V), y = targets[row] - vocab_start;
    floatX *l = logits + (size_t)row * (size_t)Vl;
    float target = threadIdx.x == 0 && y >= 0 && y < valid ? mgt_to_f32(l[y]) : 0.0f; /* read before the block overwrites l */
    float mx = -INFINITY;
    for (int i = (int)threadIdx.x; i < valid; i += (int)blockDim.x) mx = fmaxf(mx, mgt_to_f32(l[i]));
    mx = mgt_block_max(mx, scratch);
    float sum = 0.0f;
    for (int i = (int)threadIdx.x; i < valid; i += (int)blockDim.x) {
        float e = expf(mgt_to_f32(l[i]) - mx);
        l[i] = mgt_from_f32<floatX>(e);
        sum += e;
    }
    sum = mgt_block_sum(sum, scratch);
    if (threadIdx.x == 0) {
        part[(size_t)row * 3 + 0] = mx;
        part[(size_t)row * 3 + 1] = sum;
        part[(size_t)row * 3 + 2] = target;
    }
}

template <class floatX>
__global__ void __launch_bounds__(MGT_XENT_BLOCK)
mgt_xent_finish_kernel(double *losses, floatX *logits, const float *parts, int tp, const int *targets, int N, int vocab_start, int Vl, int V,
                       int me, float grad_scale) {
    MGT_SHARED(float, row_scale, 1);
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
        row_scale[0] = grad_scale != 0.0f ? (float)((double)expf(parts[((size_t)me * (size_t)N + (size_t)row) * 3] - M) / S) * grad_scale : 0.0f;
    }
    if (grad_scale == 0.0f) return; /* the same for the whole block */
    __syncthreads();
    float scale = row_scale[0];
    floatX *l = logits + (size_t)row * (size_t)Vl;
    for (int i = (int)threadIdx.x; i < Vl; i += (int)blockDim.x) {
        float d = 0.0f;
        if (i < valid) {
            d = mgt_to_f32(l[i]) * scale;
            if (i == y) d -= grad_scale;
        }
        l[i] = mgt_from_f32<floatX>(d);
    }
}

template <class floatX>
int mgt_cuda_xent_partial(float *part, floatX *logits, const int *targets, int N, int vocab_start, int Vl, int V, cudaStream_t stream) {
    MGT_REQUIRE(N > 0 && Vl > 0 && V > 0 && vocab_start >= 0);
    MGT_REQUIRE(part && logits && targets);
    MGT_LAUNCH(mgt_xent_partial_kernel<floatX>, N, MGT_XENT_BLOCK, 0, stream, part, logits, targets, vocab_start, Vl, V);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

template <class floatX>
int mgt_cuda_xent_finish(double *losses, floatX *logits, const float *parts, int tp, const int *targets, int N, int vocab_start, int Vl, int V,
                         float grad_scale, cudaStream_t stream) {
    MGT_REQUIRE(N > 0 && Vl > 0 && V > 0 && vocab_start >= 0 && tp > 0);
    MGT_REQUIRE(vocab_start % Vl == 0 && vocab_start / Vl < tp); /* this rank's slice is slice vocab_start / Vl of tp */
    MGT_REQUIRE(losses && logits && parts && targets);
    MGT_LAUNCH(mgt_xent_finish_kernel<floatX>, N, MGT_XENT_BLOCK, 0, stream, losses, logits, parts, tp, targets, N, vocab_start, Vl, V,
               vocab_start / Vl, grad_scale);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

#define MGT_INSTANTIATE(floatX)                                                                                              \
    template int mgt_cuda_xent_partial<floatX>(float *, floatX *, const int *, int, int, int, int, cudaStream_t);            \
    template int mgt_cuda_xent_finish<floatX>(double *, floatX *, const float *, int, const int *, int, int, int, int, float, \
                                              cudaStream_t);
MGT_FOR_EACH_FLOATX(MGT_INSTANTIATE)
