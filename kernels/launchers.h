/* kernels/launchers.h: the host-side interface of kernels/<op>.cu: error codes, the per-thread
   last error and the launchers (defined in the op files, declared here).

   Included by kernels/common.cuh for the kernels, and by host code that calls the launchers
   without compiling device code (kernels/backend_cuda.cu): that code includes the real CUDA
   headers first (cuda_runtime.h, cuda_bf16.h, cuda_fp16.h), while the kernels, compiled on the CPU,
   take the same names (cudaStream_t, __nv_bfloat16, __half) from the SIMT shim. The shim and the
   real runtime headers cannot share a translation unit (both define dim3), so this header
   includes neither: whoever includes it has cudaStream_t, __nv_bfloat16 and __half already. The
   names and the mangled symbols are the same either way, so the two kinds of objects link. */
#ifndef MGT_KERNELS_LAUNCHERS_H
#define MGT_KERNELS_LAUNCHERS_H

#include <stddef.h> // defines: size_t

/* ---- errors ------------------------------------------------------------------------------------ */

enum {
    MGT_KERNEL_OK = 0,
    MGT_KERNEL_INVALID = -1, /* a precondition of the launcher does not hold (shape, null pointer, alias) */
    MGT_KERNEL_LAUNCH = -2   /* the launch itself failed (cudaGetLastError) */
};

typedef struct mgt_kernel_error {
    int code;
    const char *file;
    int line;
    const char *what; /* the failed condition, or the CUDA error string */
} mgt_kernel_error;

/* the last failure of a launcher on this thread (code 0 when none failed yet) */
inline mgt_kernel_error &mgt_kernel_last_error() {
    static thread_local mgt_kernel_error e = {0, "", 0, ""};
    return e;
}
inline int mgt_kernel_fail(int code, const char *file, int line, const char *what) {
    mgt_kernel_error &e = mgt_kernel_last_error();
    e.code = code;
    e.file = file;
    e.line = line;
    e.what = what;
    return code;
}

/* the launch sites (file and line of each launch's check) since the caller cleared them, per thread:
   with MGT_CUDA_SYNC=1 the backend names the launcher whose kernel faulted */
typedef struct mgt_kernel_sites {
    int n; /* launches since the clear; the first 4 kept */
    const char *file[4];
    int line[4];
} mgt_kernel_sites;
inline mgt_kernel_sites &mgt_kernel_launches() {
    static thread_local mgt_kernel_sites s = {0, {0, 0, 0, 0}, {0, 0, 0, 0}};
    return s;
}
inline void mgt_kernel_note_launch(const char *file, int line) {
    mgt_kernel_sites &s = mgt_kernel_launches();
    if (s.n < 4) {
        s.file[s.n] = file;
        s.line[s.n] = line;
    }
    s.n++;
}

/* ---- the kernels, loaded when the run is made ---------------------------------------------------
   CUDA loads a kernel's code at its first launch (CUDA_MODULE_LOADING=LAZY, the default since CUDA
   12.2), which may synchronise the device: inside a step, with NCCL kernels spinning on another
   stream, a stall. So each op file lists every kernel its launchers can launch for a storage type
   (mgt_cuda_<op>_kernels, beside its instantiations), and the backend loads all of them for the run's
   type and fp32 with cudaFuncGetAttributes when it is made. A kernel missing from its list fails the
   checking fakes (tests/fakes) at its first launch inside a step. */
#define MGT_KERNELS_MAX 256
typedef struct mgt_kernel_list {
    int n; /* kernels added (more than MGT_KERNELS_MAX: the rest were not kept) */
    const void *fn[MGT_KERNELS_MAX];
} mgt_kernel_list;
template <class F> inline void mgt_kernel_list_add(mgt_kernel_list &l, F *kernel) {
    if (l.n < MGT_KERNELS_MAX) l.fn[l.n] = reinterpret_cast<const void *>(kernel); /* what cudaFuncGetAttributes takes */
    l.n++;
}
/* the op files, each with its list: mgt_cuda_<op>_kernels<floatX> (cast: to and from fp32) */
#define MGT_OP_FILES(X) X(adamw) X(attention) X(cast) X(crossentropy) X(encoder) X(gelu) X(layernorm) X(norm) X(residual) X(rmsnorm) X(rope) X(swiglu)
#define MGT_DECLARE_KERNELS(op) template <class floatX> void mgt_cuda_##op##_kernels(mgt_kernel_list &l);
MGT_OP_FILES(MGT_DECLARE_KERNELS)
#undef MGT_DECLARE_KERNELS
/* every op file's kernels for floatX */
template <class floatX> inline void mgt_cuda_kernels(mgt_kernel_list &l) {
#define MGT_ADD_KERNELS(op) mgt_cuda_##op##_kernels<floatX>(l);
    MGT_OP_FILES(MGT_ADD_KERNELS)
#undef MGT_ADD_KERNELS
}

/* ---- launchers (0 = ok, negative = MGT_KERNEL_*) ---------------------------------------------- */

/* encoder.cu: vocabulary-parallel token + position embedding */
template <class floatX> /* out (B,T,C) = wte[tok - vocab_start] for tok in [vocab_start, vocab_start + vocab_rows), else 0; + wpe[t] when wpe */
int mgt_cuda_encoder_forward(floatX *out, const int *tokens, const floatX *wte, int vocab_start, int vocab_rows, const floatX *wpe, int B, int T,
                             int C, cudaStream_t stream);
/* bytes of scratch that mgt_cuda_encoder_backward needs for N = B*T positions (the sort's keys) */
size_t mgt_cuda_encoder_backward_scratch(int N);
template <class floatX> /* dwte (vocab_rows,C) += and dwpe (T,C) += (when dwpe) in fp32, positions added in order */
int mgt_cuda_encoder_backward(float *dwte, float *dwpe, void *scratch, const floatX *dout, const int *tokens, int vocab_start, int vocab_rows, int B,
                              int T, int C, cudaStream_t stream);

/* layernorm.cu: eps 1e-5; mean and rstd (N) in fp32 */
template <class floatX>
int mgt_cuda_layernorm_forward(floatX *out, float *mean, float *rstd, const floatX *inp, const floatX *weight, const floatX *bias, int N, int C,
                               cudaStream_t stream);
template <class floatX> /* res (N,C) += residual (N,C) + res_bias (C), then out = LayerNorm(res): one kernel (residual may be res) */
int mgt_cuda_residual_layernorm_forward(floatX *res, floatX *out, float *mean, float *rstd, const floatX *residual, const floatX *res_bias,
                                        const floatX *weight, const floatX *bias, int N, int C, cudaStream_t stream);
/* bytes of scratch that mgt_cuda_layernorm_backward needs for (N, C) */
size_t mgt_cuda_layernorm_backward_scratch(int N, int C);
template <class floatX> /* dinp (N,C) +=, dweight (C) += and dbias (C) += in fp32, one kernel; ticket: a device word that is 0 (and left 0) */
int mgt_cuda_layernorm_backward(floatX *dinp, float *dweight, float *dbias, float *scratch, unsigned *ticket, const floatX *dout, const floatX *inp,
                                const floatX *weight, const float *mean, const float *rstd, int N, int C, cudaStream_t stream);

/* attention.cu: causal flash attention on the (B,T,W) qkv layout, W = (NH + 2 NKV) hs: q heads, then k
   heads, then v heads; query head h reads key/value head h / (NH / NKV); hs <= 128; scale 1/sqrt(hs) */
template <class floatX> /* out (B,T,NH hs); lse (B,NH,T) fp32: the logsumexp of each row of scaled scores, all the backward needs */
int mgt_cuda_attention_forward(floatX *out, float *lse, const floatX *qkv, int B, int T, int NH, int NKV, int hs, cudaStream_t stream);
/* bytes of scratch that mgt_cuda_attention_backward needs: one fp32 per row and head */
size_t mgt_cuda_attention_backward_scratch(int B, int T, int NH);
template <class floatX> /* dqkv (B,T,W) written, not added (dk, dv summed over each group's query heads); out and lse are the forward's */
int mgt_cuda_attention_backward(floatX *dqkv, float *scratch, const floatX *dout, const floatX *qkv, const floatX *out, const float *lse, int B, int T,
                                int NH, int NKV, int hs, cudaStream_t stream);

/* gelu.cu: tanh approximation */
template <class floatX> int mgt_cuda_gelu_forward(floatX *out, const floatX *inp, size_t n, cudaStream_t stream);
template <class floatX> /* dinp = gelu'(inp) * dout (dinp may alias inp or dout) */
int mgt_cuda_gelu_backward(floatX *dinp, const floatX *inp, const floatX *dout, size_t n, cudaStream_t stream);

/* residual.cu */
/* y += x; the backend table's add_inplace is the float one (gradient shards) */
template <class floatX> int mgt_cuda_add_inplace(floatX *y, const floatX *x, size_t n, cudaStream_t stream);
template <class floatX> /* out (N,C) += residual (N,C) + bias (C); residual NULL: out += bias */
int mgt_cuda_bias_residual(floatX *out, const floatX *residual, const floatX *bias, int N, int C, cudaStream_t stream);
size_t mgt_cuda_bias_backward_scratch(int N, int C);
template <class floatX> /* dbias (C) += column sums of dout (N,C) in fp32, in a fixed order */
int mgt_cuda_bias_backward(float *dbias, float *scratch, const floatX *dout, int N, int C, cudaStream_t stream);

/* crossentropy.cu: vocabulary-parallel, the semantics of mgt.h's xent_partial / xent_finish */
template <class floatX> /* part (N,3) = (max, sum exp(l - max), target logit or 0), one read of the logits (N,Vl) */
int mgt_cuda_xent_partial(float *part, const floatX *logits, const int *targets, int N, int vocab_start, int Vl, int V, cudaStream_t stream);
template <class floatX> /* losses (N) from parts (tp,N,3); logits become (softmax - onehot) * grad_scale when grad_scale != 0 (one read, one write) */
int mgt_cuda_xent_finish(double *losses, floatX *logits, const float *parts, int tp, const int *targets, int N, int vocab_start, int Vl,
                         int V, float grad_scale, cudaStream_t stream);

/* adamw.cu: mgt.h's AdamW (torch.optim.AdamW); grad_scale multiplies the gradient (clipping, 1/loss scale) */
int mgt_cuda_adamw(float *param, const float *grad, float *m, float *v, size_t n, float lr, float beta1, float beta2, float eps,
                   float weight_decay, float grad_scale, float bias_correction1, float bias_correction2, cudaStream_t stream);
template <class floatX> /* the update on fp32 master weights and moments from the fp32 grad, writing param_copy = round(master) */
int mgt_cuda_adamw_master(floatX *param_copy, float *master, const float *grad, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                          float eps, float weight_decay, float grad_scale, float bias_correction1, float bias_correction2,
                          cudaStream_t stream);

/* the multi-tensor AdamW: up to MGT_ADAMW_MANY tensors in one launch, their pointers passed by value as
   the kernel's parameters (about 2.3 KiB, under CUDA's 4 KiB); each tensor as mgt_cuda_adamw_master
   (copy NULL: fp32, master is the parameter) with its own weight decay */
#define MGT_ADAMW_MANY 32
typedef struct mgt_adamw_tensor {
    float *master;
    void *copy; /* floatX, or NULL */
    const float *grad;
    float *m, *v;
    size_t n;
    float weight_decay;
} mgt_adamw_tensor;
template <class floatX>
int mgt_cuda_adamw_many(const mgt_adamw_tensor *tensors, int count, float lr, float beta1, float beta2, float eps, float grad_scale,
                        float bias_correction1, float bias_correction2, cudaStream_t stream);

/* cast.cu: between fp32 and the 16-bit types (round to nearest even) */
template <class D, class S> int mgt_cuda_cast(D *dst, const S *src, size_t n, cudaStream_t stream);

/* norm.cu: sum of squares in fixed blocks of MGT_SS_BLOCK elements, each in fp64, added in block order;
   the backend table's sum_squares and scale are the float ones (gradients) */
#define MGT_SS_BLOCK 65536
size_t mgt_cuda_sum_squares_scratch(size_t n);
template <class floatX> /* *out (one double in device memory) = sum of x[i]^2 */
int mgt_cuda_sum_squares(double *out, double *scratch, const floatX *x, size_t n, cudaStream_t stream);
/* a multi-tensor sum of squares: each tensor's block sums into its own part of one array of
   chunks, mgt_cuda_sum_squares_chunks(n) of them (no host wait), then mgt_cuda_sum_doubles over the
   whole array: one result for every tensor, in a fixed order */
size_t mgt_cuda_sum_squares_chunks(size_t n);
template <class floatX> int mgt_cuda_sum_squares_blocks(double *chunks, const floatX *x, size_t n, cudaStream_t stream);
/* *out = (accumulate ? *out : 0) + the sum of x[0..n) in a fixed order (one block: a tree over its threads) */
int mgt_cuda_sum_doubles(double *out, const double *x, size_t n, int accumulate, cudaStream_t stream);
template <class floatX> int mgt_cuda_scale(floatX *x, float factor, size_t n, cudaStream_t stream); /* x *= factor */

/* the Llama family's op families: rmsnorm.cu, rope.cu, swiglu.cu (mgt.h's backend table says what each computes) */
template <class floatX> /* rstd (N) in fp32 */
int mgt_cuda_rmsnorm_forward(floatX *out, float *rstd, const floatX *inp, const floatX *weight, float eps, int N, int C, cudaStream_t stream);
/* bytes of scratch that mgt_cuda_rmsnorm_backward needs for (N, C) */
size_t mgt_cuda_rmsnorm_backward_scratch(int N, int C);
template <class floatX> /* dinp (N,C) +=, dweight (C) += in fp32, in a fixed order */
int mgt_cuda_rmsnorm_backward(floatX *dinp, float *dweight, float *scratch, const floatX *dout, const floatX *inp, const floatX *weight,
                              const float *rstd, int N, int C, cudaStream_t stream);
template <class floatX> /* in place on the q and k heads of qkv (B,T,(NH + 2 NKV) hs) */
int mgt_cuda_rope_forward(floatX *qkv, int B, int T, int NH, int NKV, int hs, float theta, int pos0, cudaStream_t stream);
template <class floatX> int mgt_cuda_rope_backward(floatX *dqkv, int B, int T, int NH, int NKV, int hs, float theta, int pos0, cudaStream_t stream);
template <class floatX> /* out (N,H) = silu(inp[:, :H]) * inp[:, H:] */
int mgt_cuda_swiglu_forward(floatX *out, const floatX *inp, int N, int H, cudaStream_t stream);
template <class floatX> /* dinp (N,2H) written */
int mgt_cuda_swiglu_backward(floatX *dinp, const floatX *inp, const floatX *dout, int N, int H, cudaStream_t stream);

#endif /* MGT_KERNELS_LAUNCHERS_H */
