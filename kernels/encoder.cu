/* Token + position embedding, vocabulary-parallel (Megatron TP): this rank holds rows
   [vocab_start, vocab_start + vocab_rows) of wte; a token outside them contributes 0 (the rank that
   holds it adds the row in the all-reduce), and wpe is added when given (on one rank only).
     forward   out (B,T,C) = wte[tok - vocab_start] + wpe[t]
     backward  dwte (vocab_rows,C) += dout at each position holding that token   (fp32)
               dwpe (T,C)          += dout summed over the batch                (fp32)
   The gradients are fp32 whatever the storage type (mgt.h's main_grad). Backward is deterministic
   without atomics: each thread owns one gradient element (one channel of dwte, one (t,c) of dwpe)
   and adds the positions into it in order b = 0.., t = 0.., the order of mgt.h's
   mgt__encoder_bwd_task, so the result is the CPU backend's bit for bit (the same fp32 additions in
   the same order). dwte has only C threads of parallelism and adds position by position through
   memory: a sort of positions by token would give more (not done yet). */
#include "common.cuh" // defines: launch macros, floatX conversions, MGT_REQUIRE, MGT_CHECK_LAUNCH

#define MGT_ENCODER_BLOCK 256

template <class floatX>
__global__ void __launch_bounds__(MGT_ENCODER_BLOCK)
mgt_encoder_forward_kernel(floatX *out, const int *tokens, const floatX *wte, int vocab_start, int vocab_rows, const floatX *wpe, int B,
                           int T, int C) {
    size_t n = (size_t)B * (size_t)T * (size_t)C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / (size_t)C, c = i % (size_t)C, t = r % (size_t)T;
        int v = tokens[r] - vocab_start;
        float e = v >= 0 && v < vocab_rows ? mgt_to_f32(wte[(size_t)v * (size_t)C + c]) : 0.0f;
        float p = wpe ? mgt_to_f32(wpe[t * (size_t)C + c]) : 0.0f;
        out[i] = mgt_from_f32<floatX>(e + p);
    }
}

/* one thread per channel c: dwte[v][c] += dout[r][c] for r = 0 .. B*T-1 in order */
template <class floatX>
__global__ void __launch_bounds__(MGT_ENCODER_BLOCK)
mgt_encoder_backward_wte_kernel(float *dwte, const floatX *dout, const int *tokens, int vocab_start, int vocab_rows, int N, int C) {
    int c = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (c >= C) return;
    for (int r = 0; r < N; r++) {
        int v = tokens[r] - vocab_start;
        if (v >= 0 && v < vocab_rows) dwte[(size_t)v * (size_t)C + c] += mgt_to_f32(dout[(size_t)r * (size_t)C + c]);
    }
}

/* one thread per (t,c): dwpe[t][c] += dout[b][t][c] for b = 0 .. B-1 in order */
template <class floatX>
__global__ void __launch_bounds__(MGT_ENCODER_BLOCK) mgt_encoder_backward_wpe_kernel(float *dwpe, const floatX *dout, int B, int T, int C) {
    size_t n = (size_t)T * (size_t)C, stride = n;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float s = dwpe[i];
        for (int b = 0; b < B; b++) s += mgt_to_f32(dout[(size_t)b * stride + i]);
        dwpe[i] = s;
    }
}

template <class floatX>
int mgt_cuda_encoder_forward(floatX *out, const int *tokens, const floatX *wte, int vocab_start, int vocab_rows, const floatX *wpe, int B,
                             int T, int C, cudaStream_t stream) {
    MGT_REQUIRE(B > 0 && T > 0 && C > 0 && vocab_rows >= 0 && vocab_start >= 0);
    MGT_REQUIRE(out && tokens && (wte || vocab_rows == 0));
    MGT_REQUIRE(out != wte && out != wpe);
    size_t n = (size_t)B * (size_t)T * (size_t)C;
    MGT_LAUNCH(mgt_encoder_forward_kernel<floatX>, mgt_grid_for(n, MGT_ENCODER_BLOCK), MGT_ENCODER_BLOCK, 0, stream, out, tokens, wte,
               vocab_start, vocab_rows, wpe, B, T, C);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

template <class floatX>
int mgt_cuda_encoder_backward(float *dwte, float *dwpe, const floatX *dout, const int *tokens, int vocab_start, int vocab_rows, int B,
                              int T, int C, cudaStream_t stream) {
    MGT_REQUIRE(B > 0 && T > 0 && C > 0 && vocab_rows >= 0 && vocab_start >= 0);
    MGT_REQUIRE(dout && tokens && (dwte || vocab_rows == 0));
    MGT_REQUIRE((size_t)B * (size_t)T <= 0x7fffffff);
    MGT_REQUIRE(!dwte || !dwpe || dwte != dwpe);
    MGT_REQUIRE((const void *)dwte != (const void *)dout && (const void *)dwpe != (const void *)dout);
    if (dwte && vocab_rows > 0) {
        MGT_LAUNCH(mgt_encoder_backward_wte_kernel<floatX>, (C + MGT_ENCODER_BLOCK - 1) / MGT_ENCODER_BLOCK, MGT_ENCODER_BLOCK, 0, stream,
                   dwte, dout, tokens, vocab_start, vocab_rows, B * T, C);
        MGT_CHECK_LAUNCH();
    }
    if (dwpe) {
        MGT_LAUNCH(mgt_encoder_backward_wpe_kernel<floatX>, mgt_grid_for((size_t)T * (size_t)C, MGT_ENCODER_BLOCK), MGT_ENCODER_BLOCK, 0,
                   stream, dwpe, dout, B, T, C);
        MGT_CHECK_LAUNCH();
    }
    return MGT_KERNEL_OK;
}

#define MGT_INSTANTIATE(floatX)                                                                                                        \
    template int mgt_cuda_encoder_forward<floatX>(floatX *, const int *, const floatX *, int, int, const floatX *, int, int, int,      \
                                                  cudaStream_t);                                                                     \
    template int mgt_cuda_encoder_backward<floatX>(float *, float *, const floatX *, const int *, int, int, int, int, int, cudaStream_t);
MGT_FOR_EACH_FLOATX(MGT_INSTANTIATE)
