/* AdamW as torch.optim.AdamW (decoupled weight decay, bias-corrected moments), the update of
   mgt.h's mgt__adamw_task, elementwise on n values:
     g = grad * grad_scale           (clipping factor, and 1 / loss scale with fp16)
     m = beta1 m + (1 - beta1) g,  v = beta2 v + (1 - beta2) g^2
     p = p (1 - lr wd) - (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps)
   mgt_cuda_adamw updates fp32 parameters in place. mgt_cuda_adamw_master is mixed precision: the
   update runs on the fp32 master weights and moments of the optimizer shard, reading the fp32
   gradient (mgt.h keeps parameter gradients in fp32 whatever the storage type), and writes the
   parameters the model computes with, rounded to the storage type. Memory-bound: 16-byte packets when
   every pointer is aligned (common.cuh), the rest element by element. */
#include "common.cuh" // defines: launch macros, floatX conversions, packets, MGT_REQUIRE, MGT_CHECK_LAUNCH

#define MGT_ADAMW_BLOCK 256

__device__ __forceinline__ float mgt_adamw_one(float *master, float *m, float *v, float g, float beta1, float beta2, float eps, float step, float sbc2,
                                              float decay) {
    float mi = beta1 * *m + (1.0f - beta1) * g, vi = beta2 * *v + (1.0f - beta2) * g * g;
    *m = mi;
    *v = vi;
    return *master = *master * decay - step * mi / (sqrtf(vi) / sbc2 + eps);
}

/* param_copy may be null (plain fp32 AdamW: master is the parameter). Packets of E = 16 / sizeof(floatX)
   elements [0, packs) (the fp32 arrays in 16-byte pieces, param_copy in one), then elements [packs * E, n) */
template <class floatX>
__global__ void __launch_bounds__(MGT_ADAMW_BLOCK)
mgt_adamw_kernel(floatX *param_copy, float *master, const float *grad, float *m, float *v, size_t n, size_t packs, float beta1, float beta2,
                 float eps, float grad_scale, float step, float sbc2, float decay) {
    const int E = mgt_pack_of<floatX>::n;
    size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t p = first; p < packs; p += stride) {
        size_t i = p * E;
        mgt_vec<float, E> w = mgt_load128<float, E>(master + i), g = mgt_load128<float, E>(grad + i), mi = mgt_load128<float, E>(m + i),
                          vi = mgt_load128<float, E>(v + i);
        mgt_vec<floatX, E> c;
        for (int k = 0; k < E; k++)
            c.v[k] = mgt_from_f32<floatX>(mgt_adamw_one(&w.v[k], &mi.v[k], &vi.v[k], g.v[k] * grad_scale, beta1, beta2, eps, step, sbc2, decay));
        mgt_store128<float, E>(master + i, w);
        mgt_store128<float, E>(m + i, mi);
        mgt_store128<float, E>(v + i, vi);
        if (param_copy) mgt_store128<floatX, E>(param_copy + i, c);
    }
    for (size_t i = packs * E + first; i < n; i += stride) {
        float p = mgt_adamw_one(&master[i], &m[i], &v[i], grad[i] * grad_scale, beta1, beta2, eps, step, sbc2, decay);
        if (param_copy) param_copy[i] = mgt_from_f32<floatX>(p);
    }
}

/* the scalars mgt__adamw_task derives, derived the same way (fp32) on the host */
#define MGT_ADAMW_SCALARS                                 \
    float step = lr / bias_correction1;                   \
    float sbc2 = sqrtf(bias_correction2);                 \
    float decay = 1.0f - lr * weight_decay

int mgt_cuda_adamw(float *param, const float *grad, float *m, float *v, size_t n, float lr, float beta1, float beta2, float eps,
                   float weight_decay, float grad_scale, float bias_correction1, float bias_correction2, cudaStream_t stream) {
    MGT_REQUIRE(n == 0 || (param && grad && m && v));
    MGT_REQUIRE(bias_correction1 > 0.0f && bias_correction2 > 0.0f);
    MGT_REQUIRE(n == 0 || (param != m && param != v && m != v));
    if (n == 0) return MGT_KERNEL_OK;
    MGT_ADAMW_SCALARS;
    size_t packs = mgt_aligned16(param) && mgt_aligned16(grad) && mgt_aligned16(m) && mgt_aligned16(v) ? n / mgt_pack_of<float>::n : 0;
    MGT_LAUNCH(mgt_adamw_kernel<float>, mgt_grid_for(packs ? packs : n, MGT_ADAMW_BLOCK), MGT_ADAMW_BLOCK, 0, stream, (float *)0, param, grad, m, v,
               n, packs, beta1, beta2, eps, grad_scale, step, sbc2, decay);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

template <class floatX>
int mgt_cuda_adamw_master(floatX *param_copy, float *master, const float *grad, float *m, float *v, size_t n, float lr, float beta1,
                          float beta2, float eps, float weight_decay, float grad_scale, float bias_correction1, float bias_correction2,
                          cudaStream_t stream) {
    MGT_REQUIRE(n == 0 || (param_copy && master && grad && m && v));
    MGT_REQUIRE(bias_correction1 > 0.0f && bias_correction2 > 0.0f);
    MGT_REQUIRE(n == 0 || (master != m && master != v && m != v && (void *)param_copy != (void *)master));
    if (n == 0) return MGT_KERNEL_OK;
    MGT_ADAMW_SCALARS;
    size_t packs = mgt_aligned16(param_copy) && mgt_aligned16(master) && mgt_aligned16(grad) && mgt_aligned16(m) && mgt_aligned16(v)
                       ? n / mgt_pack_of<floatX>::n
                       : 0;
    MGT_LAUNCH(mgt_adamw_kernel<floatX>, mgt_grid_for(packs ? packs : n, MGT_ADAMW_BLOCK), MGT_ADAMW_BLOCK, 0, stream, param_copy, master, grad, m,
               v, n, packs, beta1, beta2, eps, grad_scale, step, sbc2, decay);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

#define MGT_INSTANTIATE(floatX)                                                                                                   \
    template int mgt_cuda_adamw_master<floatX>(floatX *, float *, const float *, float *, float *, size_t, float, float, float,   \
                                               float, float, float, float, float, cudaStream_t);
MGT_FOR_EACH_FLOATX(MGT_INSTANTIATE)
