/* Token + position embedding, vocabulary-parallel (Megatron TP): this rank holds rows
   [vocab_start, vocab_start + vocab_rows) of wte; a token outside them contributes 0 (the rank that
   holds it adds the row in the all-reduce), and wpe is added when given (on one rank only).
     forward   out (B,T,C) = wte[tok - vocab_start] + wpe[t]
     backward  dwte (vocab_rows,C) += dout at each position holding that token   (fp32)
               dwpe (T,C)          += dout summed over the batch                (fp32)
   The gradients are fp32 whatever the storage type (mgt.h's main_grad). Backward is deterministic
   without atomics and adds the positions of each token in order b = 0.., t = 0.., the order of
   mgt.h's mgt__encoder_bwd_task, so the result is the CPU backend's bit for bit (the same fp32
   additions in the same order):
     1. one block sorts the micro-batch's (token, position) pairs (a bitonic sort of 64-bit keys in
        the scratch, positions of tokens outside the slice last; its steps within 4096 keys in shared
        memory, so a micro-batch of 16K positions costs about 6 passes over the keys in L2): each
        token's positions become one run, in position order;
     2. one warp per run start adds that token's rows into its dwte row, lanes over 16-byte packets
        of channels, the run's positions one after another.
   So every dwte row is read and written once per micro-batch and the work spreads over the distinct
   tokens (it was C threads adding B*T positions through memory, one after another).
   Memory-bound: rows and columns as ints (no 64-bit division), 16-byte packets where C and the
   pointers allow (common.cuh). */
#include "common.cuh" // defines: launch macros, floatX conversions, packets, MGT_REQUIRE, MGT_CHECK_LAUNCH

#define MGT_ENCODER_BLOCK 256
#define MGT_ENCODER_WARPS (MGT_ENCODER_BLOCK / MGT_WARP)
#define MGT_ENCODER_SORT_BLOCK 1024
#define MGT_ENCODER_SORT_CHUNK 4096 /* keys sorted in shared memory at once: 32 KiB */
#define MGT_ENCODER_NONE 0xffffffffu /* the token field of a key outside the slice, and of the padding */

/* the sort's length: the next power of two from N */
static inline size_t mgt_encoder_keys(int N) {
    size_t p = 1;
    while (p < (size_t)N) p <<= 1;
    return p;
}

/* one warp per row r = b T + t: out[r] = wte[tok] (in the slice) + wpe[t], packets of E columns when packed */
template <class floatX>
__global__ void __launch_bounds__(MGT_ENCODER_BLOCK)
mgt_encoder_forward_kernel(floatX *out, const int *tokens, const floatX *wte, int vocab_start, int vocab_rows, const floatX *wpe, int N, int T,
                           int C, int packed) {
    const int E = mgt_pack_of<floatX>::n;
    int lane = (int)threadIdx.x % MGT_WARP, warps = (int)(gridDim.x * blockDim.x) / MGT_WARP;
    for (int r = (int)(blockIdx.x * blockDim.x + threadIdx.x) / MGT_WARP; r < N; r += warps) {
        int v = tokens[r] - vocab_start;
        const floatX *e = v >= 0 && v < vocab_rows ? wte + (size_t)v * (size_t)C : nullptr, *p = wpe ? wpe + (size_t)(r % T) * (size_t)C : nullptr;
        floatX *o = out + (size_t)r * (size_t)C;
        if (packed) {
            for (int c = lane * E; c < C; c += MGT_WARP * E) {
                float acc[E]; /* 0 + e + p: the sum e + p, whichever of them is there */
                for (int k = 0; k < E; k++) acc[k] = 0.0f;
                if (e) {
                    mgt_vec<floatX, E> a = mgt_load128<floatX, E>(e + c);
                    for (int k = 0; k < E; k++) acc[k] += mgt_to_f32(a.v[k]);
                }
                if (p) {
                    mgt_vec<floatX, E> b = mgt_load128<floatX, E>(p + c);
                    for (int k = 0; k < E; k++) acc[k] += mgt_to_f32(b.v[k]);
                }
                mgt_vec<floatX, E> y;
                for (int k = 0; k < E; k++) y.v[k] = mgt_from_f32<floatX>(acc[k]);
                mgt_store128<floatX, E>(o + c, y);
            }
        } else {
            for (int c = lane; c < C; c += MGT_WARP)
                o[c] = mgt_from_f32<floatX>((e ? mgt_to_f32(e[c]) : 0.0f) + (p ? mgt_to_f32(p[c]) : 0.0f));
        }
    }
}

/* one compare-exchange of a bitonic network's stage (k, j) on the pair (i, i ^ j), i the lower, g the
   global index of i: ascending where g & k is 0 */
__device__ __forceinline__ void mgt_bitonic_step(unsigned long long *a, unsigned long long *b, int g, int k) {
    if ((*a > *b) == ((g & k) == 0)) {
        unsigned long long t = *a;
        *a = *b;
        *b = t;
    }
}

/* the stages k_first..k_last (powers of two) of every chunk of `chunk` keys, with the steps j < chunk,
   in shared memory: a chunk is loaded, sorted by those steps, stored */
__device__ __forceinline__ void mgt_bitonic_chunks(unsigned long long *keys, unsigned long long *s, int chunk, int count, int k_first, int k_last) {
    for (int c0 = 0; c0 < count; c0 += chunk) {
        for (int i = (int)threadIdx.x; i < chunk; i += MGT_ENCODER_SORT_BLOCK) s[i] = keys[c0 + i];
        __syncthreads();
        for (int k = k_first; k <= k_last; k <<= 1)
            for (int j = (k >> 1) < chunk ? k >> 1 : chunk >> 1; j > 0; j >>= 1) {
                for (int i = (int)threadIdx.x; i < chunk; i += MGT_ENCODER_SORT_BLOCK)
                    if ((i ^ j) > i) mgt_bitonic_step(&s[i], &s[i ^ j], c0 + i, k); /* each pair belongs to its lower index */
                __syncthreads();
            }
        for (int i = (int)threadIdx.x; i < chunk; i += MGT_ENCODER_SORT_BLOCK) keys[c0 + i] = s[i];
        __syncthreads(); /* the chunk is stored before the next one is loaded over it */
    }
}

/* one block: keys[i] = (token - vocab_start) << 32 | position (MGT_ENCODER_NONE in the high half outside
   the slice and past N), sorted ascending by a bitonic network over the power of two `count`: every
   chunk of MGT_ENCODER_SORT_CHUNK keys sorted in shared memory first, then each larger stage k with its
   steps j >= the chunk in global memory (L2) and the rest chunk by chunk in shared memory again */
static __global__ void __launch_bounds__(MGT_ENCODER_SORT_BLOCK)
mgt_encoder_sort_kernel(unsigned long long *keys, const int *tokens, int vocab_start, int vocab_rows, int N, int count) {
    MGT_SHARED(unsigned long long, s, MGT_ENCODER_SORT_CHUNK);
    int chunk = count < MGT_ENCODER_SORT_CHUNK ? count : MGT_ENCODER_SORT_CHUNK;
    for (int i = (int)threadIdx.x; i < count; i += MGT_ENCODER_SORT_BLOCK) {
        int v = i < N ? tokens[i] - vocab_start : -1;
        unsigned hi = v >= 0 && v < vocab_rows ? (unsigned)v : MGT_ENCODER_NONE;
        keys[i] = (unsigned long long)hi << 32 | (unsigned)i;
    }
    __syncthreads();
    mgt_bitonic_chunks(keys, s, chunk, count, 2, chunk);
    for (int k = 2 * chunk; k <= count; k <<= 1) {
        for (int j = k >> 1; j >= chunk; j >>= 1) {
            for (int i = (int)threadIdx.x; i < count; i += MGT_ENCODER_SORT_BLOCK)
                if ((i ^ j) > i) mgt_bitonic_step(&keys[i], &keys[i ^ j], i, k);
            __syncthreads();
        }
        mgt_bitonic_chunks(keys, s, chunk, count, k, k);
    }
}

/* one warp per sorted index i that starts a run of one token: dwte[v] += dout of the run's positions,
   in position order (packets of E channels when packed) */
template <class floatX, int E>
__global__ void __launch_bounds__(MGT_ENCODER_BLOCK)
mgt_encoder_backward_wte_kernel(float *dwte, const floatX *dout, const unsigned long long *keys, int N, int C) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x) / MGT_WARP, lane = (int)threadIdx.x % MGT_WARP;
    if (i >= N) return; /* whole warps */
    unsigned v = (unsigned)(keys[i] >> 32);
    if (v == MGT_ENCODER_NONE || (i > 0 && (unsigned)(keys[i - 1] >> 32) == v)) return;
    float *g = dwte + (size_t)v * (size_t)C;
    for (int c = lane * E; c < C; c += MGT_WARP * E) {
        float acc[E];
        if constexpr (E > 1) {
            mgt_vec<float, E> a = mgt_load128<float, E>(g + c);
            for (int k = 0; k < E; k++) acc[k] = a.v[k];
        } else {
            acc[0] = g[c];
        }
        for (int j = i; j < N && (unsigned)(keys[j] >> 32) == v; j++) {
            const floatX *d = dout + (size_t)(unsigned)(keys[j] & 0xffffffffu) * (size_t)C + c;
            if constexpr (E > 1) {
                mgt_vec<floatX, E> x = mgt_load128<floatX, E>(d);
                for (int k = 0; k < E; k++) acc[k] += mgt_to_f32(x.v[k]);
            } else {
                acc[0] += mgt_to_f32(d[0]);
            }
        }
        if constexpr (E > 1) {
            mgt_vec<float, E> a;
            for (int k = 0; k < E; k++) a.v[k] = acc[k];
            mgt_store128<float, E>(g + c, a);
        } else {
            g[c] = acc[0];
        }
    }
}

/* one thread per E consecutive (t,c) (E = 1 unless packed): dwpe[t][c] += dout[b][t][c] for b = 0 .. B-1 in order */
template <class floatX, int E>
__global__ void __launch_bounds__(MGT_ENCODER_BLOCK) mgt_encoder_backward_wpe_kernel(float *dwpe, const floatX *dout, int B, size_t TC) {
    for (size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * E; i < TC; i += (size_t)gridDim.x * blockDim.x * E) {
        float s[E];
        for (int k = 0; k < E; k++) s[k] = dwpe[i + k];
        for (int b = 0; b < B; b++) {
            if constexpr (E > 1) {
                mgt_vec<floatX, E> x = mgt_load128<floatX, E>(dout + (size_t)b * TC + i);
                for (int k = 0; k < E; k++) s[k] += mgt_to_f32(x.v[k]);
            } else {
                s[0] += mgt_to_f32(dout[(size_t)b * TC + i]);
            }
        }
        for (int k = 0; k < E; k++) dwpe[i + k] = s[k];
    }
}

size_t mgt_cuda_encoder_backward_scratch(int N) { return N > 0 ? mgt_encoder_keys(N) * sizeof(unsigned long long) : 0; }

template <class floatX>
int mgt_cuda_encoder_forward(floatX *out, const int *tokens, const floatX *wte, int vocab_start, int vocab_rows, const floatX *wpe, int B,
                             int T, int C, cudaStream_t stream) {
    MGT_REQUIRE(B > 0 && T > 0 && C > 0 && vocab_rows >= 0 && vocab_start >= 0);
    MGT_REQUIRE(out && tokens && (wte || vocab_rows == 0));
    MGT_REQUIRE(out != wte && out != wpe);
    MGT_REQUIRE((size_t)B * (size_t)T <= 0x7fffffff);
    int N = B * T, packed = C % mgt_pack_of<floatX>::n == 0 && mgt_aligned16(out) && mgt_aligned16(wte) && mgt_aligned16(wpe);
    MGT_LAUNCH(mgt_encoder_forward_kernel<floatX>, mgt_grid_for((size_t)N, MGT_ENCODER_WARPS, 8192), MGT_ENCODER_BLOCK, 0, stream, out, tokens, wte,
               vocab_start, vocab_rows, wpe, N, T, C, packed);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

template <class floatX>
int mgt_cuda_encoder_backward(float *dwte, float *dwpe, void *scratch, const floatX *dout, const int *tokens, int vocab_start, int vocab_rows, int B,
                              int T, int C, cudaStream_t stream) {
    const int E = mgt_pack_of<floatX>::n;
    MGT_REQUIRE(B > 0 && T > 0 && C > 0 && vocab_rows >= 0 && vocab_start >= 0);
    MGT_REQUIRE(dout && tokens && (dwte || vocab_rows == 0));
    MGT_REQUIRE((size_t)B * (size_t)T <= 0x40000000); /* the sort's length fits an int */
    MGT_REQUIRE(!dwte || !dwpe || dwte != dwpe);
    MGT_REQUIRE((const void *)dwte != (const void *)dout && (const void *)dwpe != (const void *)dout);
    MGT_REQUIRE(!dwte || vocab_rows == 0 || (scratch && scratch != (void *)dwte && scratch != (const void *)dout && scratch != (const void *)tokens));
    int N = B * T;
    if (dwte && vocab_rows > 0) {
        unsigned long long *keys = (unsigned long long *)scratch;
        int packed = C % E == 0 && mgt_aligned16(dwte) && mgt_aligned16(dout);
        MGT_LAUNCH(mgt_encoder_sort_kernel, 1, MGT_ENCODER_SORT_BLOCK, 0, stream, keys, tokens, vocab_start, vocab_rows, N, (int)mgt_encoder_keys(N));
        MGT_CHECK_LAUNCH();
        void (*encoder_backward_wte_kernel)(float *, const floatX *, const unsigned long long *, int, int) =
            packed ? mgt_encoder_backward_wte_kernel<floatX, E> : mgt_encoder_backward_wte_kernel<floatX, 1>;
        MGT_LAUNCH(encoder_backward_wte_kernel, (N + MGT_ENCODER_WARPS - 1) / MGT_ENCODER_WARPS, MGT_ENCODER_BLOCK, 0, stream, dwte, dout, (const unsigned long long *)keys, N,
                   C);
        MGT_CHECK_LAUNCH();
    }
    if (dwpe) {
        size_t TC = (size_t)T * (size_t)C;
        int packed = TC % E == 0 && mgt_aligned16(dwpe) && mgt_aligned16(dout);
        void (*encoder_backward_wpe_kernel)(float *, const floatX *, int, size_t) = packed ? mgt_encoder_backward_wpe_kernel<floatX, E> : mgt_encoder_backward_wpe_kernel<floatX, 1>;
        MGT_LAUNCH(encoder_backward_wpe_kernel, mgt_grid_for(packed ? TC / E : TC, MGT_ENCODER_BLOCK), MGT_ENCODER_BLOCK, 0, stream, dwpe, dout, B, TC);
        MGT_CHECK_LAUNCH();
    }
    return MGT_KERNEL_OK;
}

/* every kernel the launchers above can launch for floatX (launchers.h: loaded when the run is made) */
template <class floatX> void mgt_cuda_encoder_kernels(mgt_kernel_list &l) {
    const int E = mgt_pack_of<floatX>::n;
    mgt_kernel_list_add(l, mgt_encoder_forward_kernel<floatX>);
    mgt_kernel_list_add(l, mgt_encoder_sort_kernel);
    mgt_kernel_list_add(l, mgt_encoder_backward_wte_kernel<floatX, E>);
    mgt_kernel_list_add(l, mgt_encoder_backward_wte_kernel<floatX, 1>);
    mgt_kernel_list_add(l, mgt_encoder_backward_wpe_kernel<floatX, E>);
    mgt_kernel_list_add(l, mgt_encoder_backward_wpe_kernel<floatX, 1>);
}

#define MGT_INSTANTIATE(floatX)                                                                                                        \
    template int mgt_cuda_encoder_forward<floatX>(floatX *, const int *, const floatX *, int, int, const floatX *, int, int, int,      \
                                                  cudaStream_t);                                                                     \
    template int mgt_cuda_encoder_backward<floatX>(float *, float *, void *, const floatX *, const int *, int, int, int, int, int, cudaStream_t); \
    template void mgt_cuda_encoder_kernels<floatX>(mgt_kernel_list &);
MGT_FOR_EACH_FLOATX(MGT_INSTANTIATE)
