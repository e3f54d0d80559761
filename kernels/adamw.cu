/* AdamW as torch.optim.AdamW (decoupled weight decay, bias-corrected moments), the update of
   mgt.h's mgt__adamw_task, elementwise on n values:
     g = grad * grad_scale           (clipping factor, and 1 / loss scale with fp16)
     m = beta1 m + (1 - beta1) g,  v = beta2 v + (1 - beta2) g^2
     p = p (1 - lr wd) - (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps)
   mgt_cuda_adamw updates fp32 parameters in place. mgt_cuda_adamw_master is mixed precision: the
   update runs on the fp32 master weights and moments of the optimizer shard, reading the fp32
   gradient (mgt.h keeps parameter gradients in fp32 whatever the storage type), and writes the
   parameters the model computes with, rounded to the storage type. mgt_cuda_adamw_many updates up to
   MGT_ADAMW_MANY tensors (each fp32 or with a copy, its own weight decay) in one launch, the same
   arithmetic element by element. Memory-bound: 16-byte packets when
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

/* the multi-tensor launch's parameters: per tensor its work units (packets, then single elements) from
   first[k], so that a unit finds its tensor by a scan over at most MGT_ADAMW_MANY entries */
struct mgt_adamw_list {
    mgt_adamw_tensor t[MGT_ADAMW_MANY];
    size_t first[MGT_ADAMW_MANY + 1], packs[MGT_ADAMW_MANY];
    float decay[MGT_ADAMW_MANY];
    int count;
#ifndef __CUDACC__
    /* the shim's checking fakes: the device memory this launch reads and writes (tests/simt/cuda_cpu.h) */
    void simt_pointers(const void **ptrs, unsigned char *writes, int &n) const {
        for (int k = 0; k < count; k++) {
            const void *p[5] = {t[k].master, t[k].copy, t[k].grad, t[k].m, t[k].v};
            for (int j = 0; j < 5; j++)
                if (p[j]) {
                    ptrs[n] = p[j];
                    writes[n++] = j != 2; /* all but the gradient are written */
                }
        }
    }
#endif
};

/* unit u of the list: a packet of E elements of tensor k, or one element after its packets. The list is
   read in place from the parameter space (__grid_constant__: indexed without a copy to local memory) */
template <class floatX>
__global__ void __launch_bounds__(MGT_ADAMW_BLOCK)
mgt_adamw_many_kernel(const __grid_constant__ mgt_adamw_list list, float beta1, float beta2, float eps, float grad_scale, float step, float sbc2) {
    const int E = mgt_pack_of<floatX>::n;
    size_t units = list.first[list.count], stride = (size_t)gridDim.x * blockDim.x;
    for (size_t u = (size_t)blockIdx.x * blockDim.x + threadIdx.x; u < units; u += stride) {
        int k = 0;
        while (u >= list.first[k + 1]) k++;
        const mgt_adamw_tensor &t = list.t[k];
        size_t local = u - list.first[k];
        floatX *copy = (floatX *)t.copy;
        float decay = list.decay[k];
        if (local < list.packs[k]) {
            size_t i = local * E;
            mgt_vec<float, E> w = mgt_load128<float, E>(t.master + i), g = mgt_load128<float, E>(t.grad + i), mi = mgt_load128<float, E>(t.m + i),
                              vi = mgt_load128<float, E>(t.v + i);
            mgt_vec<floatX, E> c;
            for (int e = 0; e < E; e++)
                c.v[e] = mgt_from_f32<floatX>(mgt_adamw_one(&w.v[e], &mi.v[e], &vi.v[e], g.v[e] * grad_scale, beta1, beta2, eps, step, sbc2, decay));
            mgt_store128<float, E>(t.master + i, w);
            mgt_store128<float, E>(t.m + i, mi);
            mgt_store128<float, E>(t.v + i, vi);
            if (copy) mgt_store128<floatX, E>(copy + i, c);
        } else {
            size_t i = list.packs[k] * E + (local - list.packs[k]);
            float p = mgt_adamw_one(&t.master[i], &t.m[i], &t.v[i], t.grad[i] * grad_scale, beta1, beta2, eps, step, sbc2, decay);
            if (copy) copy[i] = mgt_from_f32<floatX>(p);
        }
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

template <class floatX>
int mgt_cuda_adamw_many(const mgt_adamw_tensor *tensors, int count, float lr, float beta1, float beta2, float eps, float grad_scale,
                        float bias_correction1, float bias_correction2, cudaStream_t stream) {
    const int E = mgt_pack_of<floatX>::n;
    MGT_REQUIRE(count >= 0 && count <= MGT_ADAMW_MANY && (count == 0 || tensors));
    MGT_REQUIRE(bias_correction1 > 0.0f && bias_correction2 > 0.0f);
    mgt_adamw_list list;
    memset(&list, 0, sizeof list);
    list.count = count;
    for (int k = 0; k < count; k++) {
        const mgt_adamw_tensor &t = tensors[k];
        MGT_REQUIRE(t.n == 0 || (t.master && t.grad && t.m && t.v));
        MGT_REQUIRE(t.n == 0 || (t.master != t.m && t.master != t.v && t.m != t.v && t.copy != (void *)t.master));
        bool packed = mgt_aligned16(t.master) && mgt_aligned16(t.grad) && mgt_aligned16(t.m) && mgt_aligned16(t.v) && mgt_aligned16(t.copy);
        list.t[k] = t;
        list.packs[k] = packed ? t.n / E : 0;
        list.first[k + 1] = list.first[k] + list.packs[k] + (t.n - list.packs[k] * E);
        list.decay[k] = 1.0f - lr * t.weight_decay; /* as MGT_ADAMW_SCALARS */
    }
    if (list.first[count] == 0) return MGT_KERNEL_OK;
    float step = lr / bias_correction1, sbc2 = sqrtf(bias_correction2);
    MGT_LAUNCH(mgt_adamw_many_kernel<floatX>, mgt_grid_for(list.first[count], MGT_ADAMW_BLOCK), MGT_ADAMW_BLOCK, 0, stream, list, beta1, beta2, eps,
               grad_scale, step, sbc2);
    MGT_CHECK_LAUNCH();
    return MGT_KERNEL_OK;
}

/* every kernel the launchers above can launch for floatX (launchers.h: loaded when the run is made) */
template <class floatX> void mgt_cuda_adamw_kernels(mgt_kernel_list &l) {
    mgt_kernel_list_add(l, mgt_adamw_kernel<floatX>);
    mgt_kernel_list_add(l, mgt_adamw_many_kernel<floatX>);
}

#define MGT_INSTANTIATE(floatX)                                                                                                   \
    template int mgt_cuda_adamw_master<floatX>(floatX *, float *, const float *, float *, float *, size_t, float, float, float,   \
                                               float, float, float, float, float, cudaStream_t);                          \
    template int mgt_cuda_adamw_many<floatX>(const mgt_adamw_tensor *, int, float, float, float, float, float, float, float, cudaStream_t); \
    template void mgt_cuda_adamw_kernels<floatX>(mgt_kernel_list &);
MGT_FOR_EACH_FLOATX(MGT_INSTANTIATE)
