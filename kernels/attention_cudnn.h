/* kernels/attention_cudnn.h: causal attention in bf16/fp16 through cuDNN's fused scaled-dot-product
   attention (kernels/attention_cudnn.cpp), on the backend's qkv layout (B, T, (NH + 2 NKV) hs),
   [q heads | k heads | v heads]; query head h reads key/value head h / (NH / NKV).

     char why[256];
     mgt_cudnn_attn *a = mgt_cudnn_attn_create(stream, MGT_BF16, B, T, NH, NKV, hs, why, sizeof why);
     if (!a) ... why says what cuDNN (or the shape) refused: use the own kernel (kernels/attention.cu)
     size_t ws = mgt_cudnn_attn_workspace(a);   // device bytes forward and backward need, sized once
     ... inside a step: mgt_cudnn_attn_forward(a, work, out, lse, qkv, why, sizeof why) ...
     mgt_cudnn_attn_destroy(a);

   Both graphs and their execution plans are built by create (a GPU step only executes). lse is the
   forward's Stats, the logsumexp of each row of scaled scores, (B, NH, T) fp32: the layout of
   mgt_backend.att_lse, which the own kernel writes and reads the same way. */
#ifndef MGT_ATTENTION_CUDNN_H
#define MGT_ATTENTION_CUDNN_H

#include <stddef.h> /* defines: size_t */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mgt_cudnn_attn mgt_cudnn_attn;
struct CUstream_st;

/* NULL with why when cuDNN cannot serve the shape (fp32, hs not a multiple of 8 or above 128, NH not
   a multiple of NKV) or refuses a graph or every plan the heuristic offers */
mgt_cudnn_attn *mgt_cudnn_attn_create(struct CUstream_st *stream, int dtype, int B, int T, int NH, int NKV, int hs, char *why, size_t cap);
/* whether a is made for this shape */
int mgt_cudnn_attn_serves(const mgt_cudnn_attn *a, int B, int T, int NH, int NKV, int hs);
/* device bytes of workspace the larger of the two plans needs, with the backward's fp32 row sums
   and dq accumulator */
size_t mgt_cudnn_attn_workspace(const mgt_cudnn_attn *a);
/* 0, or -1 with why; work holds mgt_cudnn_attn_workspace(a) bytes of device memory */
int mgt_cudnn_attn_forward(mgt_cudnn_attn *a, void *work, void *out, float *lse, const void *qkv, char *why, size_t cap);
int mgt_cudnn_attn_backward(mgt_cudnn_attn *a, void *work, void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse, char *why,
                            size_t cap);
void mgt_cudnn_attn_destroy(mgt_cudnn_attn *a);
/* for tests: the forward (0) or backward (1) execution plan, a cudnnBackendDescriptor_t, and the
   handle it runs on, a cudnnHandle_t (test_fakes executes them with variant packs of its own) */
void *mgt_cudnn_attn_plan(const mgt_cudnn_attn *a, int backward);
void *mgt_cudnn_attn_handle(const mgt_cudnn_attn *a);

#ifdef __cplusplus
}
#endif
#endif /* MGT_ATTENTION_CUDNN_H */
