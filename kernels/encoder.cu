/* Token + position embedding, vocabulary-parallel (Megatron TP): this rank holds rows
   [vocab_start, vocab_start + vocab_rows) of wte; a token outside them contributes 0 (the rank that
   holds it adds the row in the all-reduce), and wpe is added when given (on one rank only).
     forward   out (B,T,C) = wte[tok - vocab_start] + wpe[t]
     backward  dwte (vocab_rows,C) += dout at each position holding that token
               dwpe (T,C)          += dout summed over the batch
   Backward is deterministic without atomics: each thread owns one gradient element (one channel of
   dwte, one (t,c) of dwpe) and adds the positions in order b = 0.., t = 0.., the order of mgt.h's
   mgt__encoder_bwd_task (so fp32 results equal the CPU backend's bit for bit). For dwte the block
   takes the positions in chunks of MGT_ENCODER_CHUNK and links, in shared memory, each position to
   the next one of the same token in the chunk; a thread then sums a token's positions in fp32 and
   rounds into dwte once per (token, chunk), not once per position (a bf16 row that a frequent token
   hits 1024 times with 0.01 each would stall at 4 instead of reaching 10.25). For fp32 these are
   the same additions in the same order as adding position by position. dwte has only C threads
   of parallelism: a sort of positions by token would give more (not done yet). */
#include "common.cuh" // defines: launch macros, floatX conversions, MGT_REQUIRE, MGT_CHECK_LAUNCH

#define MGT_ENCODER_BLOCK 256
#define MGT_ENCODER_CHUNK 1024 /* positions linked per step of dwte's kernel: 12 KiB of shared memory */

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

/* one thread per channel c: dwte[v][c] += dout[r][c] for r = 0 .. B*T-1 in order, summed in fp32
   per token within each chunk of MGT_ENCODER_CHUNK positions */
template <class floatX>
__global__ void __launch_bounds__(MGT_ENCODER_BLOCK)
mgt_encoder_backward_wte_kernel(floatX *dwte, const floatX *dout, const int *tokens, int vocab_start, int vocab_rows, int N, int C) {
    MGT_SHARED(int, row, MGT_ENCODER_CHUNK);  /* the position's row of dwte, or -1 outside this slice */
    MGT_SHARED(int, next, MGT_ENCODER_CHUNK); /* the next position in the chunk with the same row, or -1 */
    MGT_SHARED(int, head, MGT_ENCODER_CHUNK); /* 1 where no earlier position in the chunk has the row */
    int c = (int)(blockIdx.x * blockDim.x + threadIdx.x); /* threads with c >= C still link positions */
    for (int r0 = 0; r0 < N; r0 += MGT_ENCODER_CHUNK) {
        int n = N - r0 < MGT_ENCODER_CHUNK ? N - r0 : MGT_ENCODER_CHUNK;
        for (int i = (int)threadIdx.x; i < n; i += (int)blockDim.x) {
            int v = tokens[r0 + i] - vocab_start;
            row[i] = v >= 0 && v < vocab_rows ? v : -1;
        }
        __syncthreads();
        for (int i = (int)threadIdx.x; i < n; i += (int)blockDim.x) {
            int v = row[i], j = i - 1, k = i + 1;
            while (j >= 0 && row[j] != v) j--;
            while (k < n && row[k] != v) k++;
            head[i] = j < 0;
            next[i] = k < n ? k : -1;
        }
        __syncthreads();
        if (c < C)
            for (int i = 0; i < n; i++) {
                if (row[i] < 0 || !head[i]) continue;
                floatX *dw = dwte + (size_t)row[i] * (size_t)C + c;
                float s = mgt_to_f32(*dw);
                for (int k = i; k >= 0; k = next[k]) s += mgt_to_f32(dout[(size_t)(r0 + k) * (size_t)C + c]);
                *dw = mgt_from_f32<floatX>(s);
            }
        __syncthreads(); /* the chunk's links are read before the next chunk overwrites them */
    }
}

/* one thread per (t,c): dwpe[t][c] += dout[b][t][c] for b = 0 .. B-1 in order */
template <class floatX>
__global__ void __launch_bounds__(MGT_ENCODER_BLOCK) mgt_encoder_backward_wpe_kernel(floatX *dwpe, const floatX *dout, int B, int T, int C) {
    size_t n = (size_t)T * (size_t)C, stride = n;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float s = mgt_to_f32(dwpe[i]);
        for (int b = 0; b < B; b++) s += mgt_to_f32(dout[(size_t)b * stride + i]);
        dwpe[i] = mgt_from_f32<floatX>(s);
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
int mgt_cuda_encoder_backward(floatX *dwte, floatX *dwpe, const floatX *dout, const int *tokens, int vocab_start, int vocab_rows, int B,
                              int T, int C, cudaStream_t stream) {
    MGT_REQUIRE(B > 0 && T > 0 && C > 0 && vocab_rows >= 0 && vocab_start >= 0);
    MGT_REQUIRE(dout && tokens && (dwte || vocab_rows == 0));
    MGT_REQUIRE((size_t)B * (size_t)T <= 0x7fffffff);
    MGT_REQUIRE(!dwte || !dwpe || dwte != dwpe);
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
    template int mgt_cuda_encoder_backward<floatX>(floatX *, floatX *, const floatX *, const int *, int, int, int, int, int, cudaStream_t);
MGT_FOR_EACH_FLOATX(MGT_INSTANTIATE)
