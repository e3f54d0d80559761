/* AdamW as torch.optim.AdamW (decoupled weight decay, bias-corrected moments), the update of
   mgt.h's mgt__adamw_task, elementwise on n values:
     g = grad * grad_scale           (clipping factor, and 1 / loss scale with fp16)
     m = beta1 m + (1 - beta1) g,  v = beta2 v + (1 - beta2) g^2
     p = p (1 - lr wd) - (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps)
   mgt_cuda_adamw updates fp32 parameters in place. mgt_cuda_adamw_master is mixed precision: the
   update runs on the fp32 master weights and moments of the optimizer shard, reading the fp32
   gradient (mgt.h keeps parameter gradients in fp32 whatever the storage type), and writes the
   parameters the model computes with, rounded to the storage type. */
#include "common.cuh" // defines: launch macros, floatX conversions, MGT_REQUIRE, MGT_CHECK_LAUNCH

#define MGT_ADAMW_BLOCK 256

/* param_copy may be null (plain fp32 AdamW: master is the parameter) */
template <class floatX>
__global__ void __launch_bounds__(MGT_ADAMW_BLOCK)
mgt_adamw_kernel(floatX *param_copy, float *master, const float *grad, float *m, float *v, size_t n, float beta1, float beta2, float eps,
                 float grad_scale, float step, float sbc2, float decay) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float g = grad[i] * grad_scale;
        float mi = beta1 * m[i] + (1.0f - beta1) * g, vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        float p = master[i] * decay - step * mi / (sqrtf(vi) / sbc2 + eps);
        m[i] = mi;
        v[i] = vi;
        master[i] = p;
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
    MGT_LAUNCH(mgt_adamw_kernel<float>, mgt_grid_for(n, MGT_ADAMW_BLOCK), MGT_ADAMW_BLOCK, 0, stream, (float *)0, param, grad, m, v, n, beta1,
               beta2, eps, grad_scale, step, sbc2, decay);
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
    MGT_LAUNCH(mgt_adamw_kernel<floatX>, mgt_grid_for(n, MGT_ADAMW_BLOCK), MGT_ADAMW_BLOCK, 0, stream, param_copy, master, grad, m, v, n,
               beta1, beta2, eps, grad_scale, step, sbc2, decay);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

#define MGT_INSTANTIATE(floatX)                                                                                                   \
    template int mgt_cuda_adamw_master<floatX>(floatX *, float *, const float *, float *, float *, size_t, float, float, float,   \
                                               float, float, float, float, float, cudaStream_t);
MGT_FOR_EACH_FLOATX(MGT_INSTANTIATE)
