/* kernels/attention_cudnn.cpp: causal flash attention in bf16/fp16 through cuDNN 9's fused
   scaled-dot-product attention, built with the backend graph API (cudnn_graph.h) as cudnn-frontend's
   composite SDPA nodes lower it (include/cudnn_frontend/node/scaled_dot_product_flash_attention.h):
   cuDNN's runtime-fusion engines recognise these chains of matmul, pointwise and reduction operations
   and run them as one flash-attention kernel on tensor cores; the T x T tensors below are virtual
   (never in memory). Options as llm.c's attention_cudnn.cpp: causal, scale 1/sqrt(hs), the softmax
   Stats saved for training, bf16/fp16 input and output, fp32 compute.

     forward   S = Q K^T; S *= scale; S = row >= col ? S : -inf; M = max_j S; E = exp(S - M);
               Z = sum_j E; lse = M + log Z (Stats, fp32); P = E / Z; O = P V
     backward  D = sum_d dO * O (fp32, in the workspace); P = exp(select(scale Q K^T - lse));
               dV = P^T dO; dS = scale P (dO V^T - D); dK = dS^T Q; dQ = dS K (through an fp32
               accumulator in the workspace, copied out by an IDENTITY)
   Grouped-query attention: K and V have NKV heads, the matmuls broadcast head h to h / (NH / NKV),
   and dK, dV are summed over each group by a reduction (as the frontend does for GQA).

   Everything is built once by mgt_cudnn_attn_create (the backend's reserve, outside any step); a
   step makes only the variant pack (the pointers) and executes. A graph or plan cuDNN refuses makes
   create return NULL with why, and the backend keeps its own kernel for that shape. */
#include "attention_cudnn.h"

#include <cuda_runtime.h> /* defines: cudaMemsetAsync */
#include <cudnn.h>   /* defines: cudnnBackend*, cudnnCreate, cudnnSetStream, cudnnGetVersion */
#include <dlfcn.h>   /* defines: dlopen */
#include <float.h>   /* defines: FLT_MAX */
#include <math.h>    /* defines: sqrtf, INFINITY */
#include <stdarg.h>  /* defines: va_list */
#include <stdint.h>  /* defines: int64_t */
#include <stdio.h>   /* defines: snprintf */
#include <string.h>  /* defines: strlen */
#include <initializer_list> /* defines: std::initializer_list */
#include <utility>   /* defines: std::pair */
#include <vector>    /* defines: std::vector */

#include "mgt.h" /* defines: MGT_BF16, MGT_F16, mgt_cudnn_attention_serves */

typedef cudnnBackendDescriptor_t desc_t;

/* tensor ids of the variant packs (what the fake and a reader of cuDNN's logs see) */
enum { UID_Q = 1, UID_K, UID_V, UID_O, UID_STATS, UID_SCALE, UID_NEG_INF, UID_DO, UID_DQ, UID_DK, UID_DV, UID_ROWSUM, UID_DQ_ACC, UID_VIRTUAL = 100 };

/* a graph under construction: every descriptor it made (destroyed together), the first failure */
struct builder {
    cudnnHandle_t handle;
    cudnnDataType_t io;
    std::vector<desc_t> made; /* every descriptor */
    std::vector<desc_t> ops;  /* the operations of the graph being built */
    int64_t next_uid;
    char why[256];
    bool failed;
};

static void bfail(builder *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bfail(builder *b, const char *fmt, ...) {
    if (b->failed) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->why, sizeof b->why, fmt, ap);
    va_end(ap);
    b->failed = true;
}
static bool bok(builder *b, cudnnStatus_t st, const char *what) {
    if (st != CUDNN_STATUS_SUCCESS) bfail(b, "%s: %s", what, cudnnGetErrorString(st));
    return !b->failed;
}
static desc_t make(builder *b, cudnnBackendDescriptorType_t type) {
    desc_t d = nullptr;
    if (b->failed || !bok(b, cudnnBackendCreateDescriptor(type, &d), "cudnnBackendCreateDescriptor")) return nullptr;
    b->made.push_back(d);
    return d;
}
static void set(builder *b, desc_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t n, const void *v) {
    if (b->failed) return;
    char what[64];
    snprintf(what, sizeof what, "cudnnBackendSetAttribute (attribute %d)", (int)name);
    bok(b, cudnnBackendSetAttribute(d, name, type, n, v), what);
}
static void setd(builder *b, desc_t d, cudnnBackendAttributeName_t name, desc_t v) { set(b, d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v); }
static desc_t fin(builder *b, desc_t d, const char *what) {
    if (!b->failed) bok(b, cudnnBackendFinalize(d), what);
    return b->failed ? nullptr : d;
}

struct dims4 {
    int64_t n[4], s[4];
};
/* a 4-d tensor; virtual ones get a fresh id and are never in memory, by_value ones are host scalars */
static desc_t tensor(builder *b, int64_t uid, cudnnDataType_t type, dims4 d, bool is_virtual, bool by_value = false) {
    desc_t t = make(b, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    int64_t align = 16;
    if (is_virtual) uid = b->next_uid++;
    set(b, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    set(b, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    set(b, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, d.n);
    set(b, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, d.s);
    set(b, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    set(b, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
    if (by_value) set(b, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
    return fin(b, t, "a tensor descriptor");
}
static dims4 dense(int64_t n0, int64_t n1, int64_t n2, int64_t n3) { return {{n0, n1, n2, n3}, {n1 * n2 * n3, n2 * n3, n3, 1}}; }
static dims4 transposed(dims4 d) { /* the last two dimensions swapped, the same memory */
    return {{d.n[0], d.n[1], d.n[3], d.n[2]}, {d.s[0], d.s[1], d.s[3], d.s[2]}};
}
/* a virtual tensor (never in memory) of dimensions d */
static desc_t like(builder *b, dims4 d, cudnnDataType_t type) { return tensor(b, 0, type, d, true); }

/* an operation of the graph: its descriptor attributes (null ones left out), finalized */
typedef std::pair<cudnnBackendAttributeName_t, desc_t> part;
static void operation(builder *b, cudnnBackendDescriptorType_t type, std::initializer_list<part> parts, const char *what) {
    desc_t op = make(b, type);
    for (const part &p : parts)
        if (p.second) setd(b, op, p.first, p.second);
    b->ops.push_back(fin(b, op, what));
}
/* a matmul or reduction descriptor computing in fp32 (a reduction also has its operator) */
static desc_t fp32_desc(builder *b, cudnnBackendDescriptorType_t type, cudnnBackendAttributeName_t comp_attr, const cudnnReduceTensorOp_t *mode) {
    desc_t d = make(b, type);
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    set(b, d, comp_attr, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    if (mode) set(b, d, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, mode);
    return fin(b, d, "a matmul or reduction descriptor");
}

/* y = mode(x, b, t) in fp32 (b, t optional); GEN_INDEX counts along axis */
static void pointwise(builder *b, cudnnPointwiseMode_t mode, desc_t x, desc_t bb, desc_t t, desc_t y, int64_t axis = -1) {
    desc_t pw = make(b, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    cudnnDataType_t prec = mode == CUDNN_POINTWISE_CMP_GE ? CUDNN_DATA_BOOLEAN : mode == CUDNN_POINTWISE_GEN_INDEX ? CUDNN_DATA_INT32 : CUDNN_DATA_FLOAT;
    set(b, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    set(b, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    if (axis >= 0) set(b, pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    fin(b, pw, "a pointwise descriptor");
    operation(b, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR,
              {{CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw}, {CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x}, {CUDNN_ATTR_OPERATION_POINTWISE_BDESC, bb},
               {CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t}, {CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y}},
              "a pointwise operation");
}
static void matmul(builder *b, desc_t a, desc_t bb, desc_t c) {
    desc_t mm = fp32_desc(b, CUDNN_BACKEND_MATMUL_DESCRIPTOR, CUDNN_ATTR_MATMUL_COMP_TYPE, nullptr);
    operation(b, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR,
              {{CUDNN_ATTR_OPERATION_MATMUL_ADESC, a}, {CUDNN_ATTR_OPERATION_MATMUL_BDESC, bb}, {CUDNN_ATTR_OPERATION_MATMUL_CDESC, c},
               {CUDNN_ATTR_OPERATION_MATMUL_DESC, mm}},
              "a matmul operation");
}
static void reduction(builder *b, cudnnReduceTensorOp_t mode, desc_t x, desc_t y) {
    desc_t rd = fp32_desc(b, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, CUDNN_ATTR_REDUCTION_COMP_TYPE, &mode);
    operation(b, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR,
              {{CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x}, {CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y}, {CUDNN_ATTR_OPERATION_REDUCTION_DESC, rd}},
              "a reduction operation");
}
static void reshape(builder *b, desc_t x, desc_t y) {
    operation(b, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, {{CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x}, {CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y}},
              "a reshape operation");
}

/* the shapes of one attention call */
struct shape {
    int64_t B, T, NH, NKV, hs, W; /* W: the width of a qkv row, (NH + 2 NKV) hs */
    dims4 q(int64_t heads) const { return {{B, heads, T, hs}, {T * W, hs, W, 1}}; } /* heads of a qkv row */
    dims4 o() const { return {{B, NH, T, hs}, {T * NH * hs, hs, NH * hs, 1}}; }
    dims4 rows() const { return dense(B, NH, T, 1); }   /* one value per row and head: Stats, D */
    dims4 scores() const { return dense(B, NH, T, T); } /* virtual */
};

/* S = mask(scale Q K^T), the chain both graphs start with (the backward subtracts lse first) */
static desc_t scaled_scores(builder *b, const shape &s, desc_t q, desc_t kt, desc_t scale) {
    desc_t raw = like(b, s.scores(), CUDNN_DATA_FLOAT), scaled = like(b, s.scores(), CUDNN_DATA_FLOAT);
    matmul(b, q, kt, raw);
    pointwise(b, CUDNN_POINTWISE_MUL, raw, scale, nullptr, scaled);
    return scaled;
}
/* row >= col ? x : -inf */
static desc_t causal(builder *b, const shape &s, desc_t x, desc_t neg_inf) {
    desc_t row = like(b, s.scores(), CUDNN_DATA_INT32), col = like(b, s.scores(), CUDNN_DATA_INT32);
    desc_t keep = like(b, s.scores(), CUDNN_DATA_BOOLEAN), y = like(b, s.scores(), CUDNN_DATA_FLOAT);
    pointwise(b, CUDNN_POINTWISE_GEN_INDEX, x, nullptr, nullptr, row, 2);
    pointwise(b, CUDNN_POINTWISE_GEN_INDEX, x, nullptr, nullptr, col, 3);
    pointwise(b, CUDNN_POINTWISE_CMP_GE, row, col, nullptr, keep);
    pointwise(b, CUDNN_POINTWISE_BINARY_SELECT, x, neg_inf, keep, y);
    return y;
}
/* where a matmul writes dK or dV: dst itself, or with grouped-query attention an (B, NH, T, hs)
   virtual tensor that a reduction then sums over each group of heads into dst */
static desc_t per_query_head(builder *b, const shape &s, desc_t dst) {
    return s.NH == s.NKV ? dst : like(b, dense(s.B, s.NH, s.T, s.hs), b->io);
}

static desc_t scalar(builder *b, int64_t uid) { return tensor(b, uid, CUDNN_DATA_FLOAT, dense(1, 1, 1, 1), false, true); }

static void forward_graph(builder *b, const shape &s) {
    desc_t q = tensor(b, UID_Q, b->io, s.q(s.NH), false), kt = tensor(b, UID_K, b->io, transposed(s.q(s.NKV)), false);
    desc_t v = tensor(b, UID_V, b->io, s.q(s.NKV), false), o = tensor(b, UID_O, b->io, s.o(), false);
    desc_t stats = tensor(b, UID_STATS, CUDNN_DATA_FLOAT, s.rows(), false);
    desc_t scale = scalar(b, UID_SCALE), neg_inf = scalar(b, UID_NEG_INF);
    desc_t x = causal(b, s, scaled_scores(b, s, q, kt, scale), neg_inf);
    desc_t mx = like(b, s.rows(), CUDNN_DATA_FLOAT), sub = like(b, s.scores(), CUDNN_DATA_FLOAT), e = like(b, s.scores(), CUDNN_DATA_FLOAT);
    desc_t z = like(b, s.rows(), CUDNN_DATA_FLOAT), logz = like(b, s.rows(), CUDNN_DATA_FLOAT), p = like(b, s.scores(), b->io);
    reduction(b, CUDNN_REDUCE_TENSOR_MAX, x, mx);
    pointwise(b, CUDNN_POINTWISE_SUB, x, mx, nullptr, sub);
    pointwise(b, CUDNN_POINTWISE_EXP, sub, nullptr, nullptr, e);
    reduction(b, CUDNN_REDUCE_TENSOR_ADD, e, z);
    pointwise(b, CUDNN_POINTWISE_LOG, z, nullptr, nullptr, logz);
    pointwise(b, CUDNN_POINTWISE_ADD, mx, logz, nullptr, stats);
    pointwise(b, CUDNN_POINTWISE_DIV, e, z, nullptr, p);
    matmul(b, p, v, o);
}

static void backward_graph(builder *b, const shape &s) {
    desc_t q = tensor(b, UID_Q, b->io, s.q(s.NH), false), kt = tensor(b, UID_K, b->io, transposed(s.q(s.NKV)), false);
    desc_t vt = tensor(b, UID_V, b->io, transposed(s.q(s.NKV)), false), o = tensor(b, UID_O, b->io, s.o(), false);
    desc_t dO = tensor(b, UID_DO, b->io, s.o(), false), stats = tensor(b, UID_STATS, CUDNN_DATA_FLOAT, s.rows(), false);
    desc_t dq = tensor(b, UID_DQ, b->io, s.q(s.NH), false), dk = tensor(b, UID_DK, b->io, s.q(s.NKV), false);
    desc_t dv = tensor(b, UID_DV, b->io, s.q(s.NKV), false);
    desc_t rowsum = tensor(b, UID_ROWSUM, CUDNN_DATA_FLOAT, s.rows(), false);
    desc_t dq_acc = tensor(b, UID_DQ_ACC, CUDNN_DATA_FLOAT, dense(s.B, s.NH, s.T, s.hs), false);
    desc_t scale = scalar(b, UID_SCALE), neg_inf = scalar(b, UID_NEG_INF);
    /* D = sum over the head's channels of dO * O */
    desc_t dout_o = like(b, dense(s.B, s.NH, s.T, s.hs), CUDNN_DATA_FLOAT);
    pointwise(b, CUDNN_POINTWISE_MUL, dO, o, nullptr, dout_o);
    reduction(b, CUDNN_REDUCE_TENSOR_ADD, dout_o, rowsum);
    /* P from the saved Stats */
    desc_t x = scaled_scores(b, s, q, kt, scale), centred = like(b, s.scores(), CUDNN_DATA_FLOAT), p = like(b, s.scores(), CUDNN_DATA_FLOAT);
    pointwise(b, CUDNN_POINTWISE_SUB, x, stats, nullptr, centred);
    pointwise(b, CUDNN_POINTWISE_EXP, causal(b, s, centred, neg_inf), nullptr, nullptr, p);
    /* dV = P^T dO */
    desc_t pt = like(b, transposed(s.scores()), b->io), dv_full = per_query_head(b, s, dv);
    reshape(b, p, pt);
    matmul(b, pt, dO, dv_full);
    if (dv_full != dv) reduction(b, CUDNN_REDUCE_TENSOR_ADD, dv_full, dv);
    /* dS = scale P (dO V^T - D) */
    desc_t dp = like(b, s.scores(), CUDNN_DATA_FLOAT), dpd = like(b, s.scores(), CUDNN_DATA_FLOAT), pdp = like(b, s.scores(), CUDNN_DATA_FLOAT);
    desc_t ds = like(b, s.scores(), CUDNN_DATA_FLOAT);
    matmul(b, dO, vt, dp);
    pointwise(b, CUDNN_POINTWISE_SUB, dp, rowsum, nullptr, dpd);
    pointwise(b, CUDNN_POINTWISE_MUL, dpd, p, nullptr, pdp);
    pointwise(b, CUDNN_POINTWISE_MUL, pdp, scale, nullptr, ds);
    /* dK = dS^T Q */
    desc_t dst = like(b, transposed(s.scores()), b->io), dk_full = per_query_head(b, s, dk);
    reshape(b, ds, dst);
    matmul(b, dst, q, dk_full);
    if (dk_full != dk) reduction(b, CUDNN_REDUCE_TENSOR_ADD, dk_full, dk);
    /* dQ = dS K, accumulated in fp32 */
    desc_t k = like(b, s.q(s.NKV), b->io);
    reshape(b, kt, k);
    matmul(b, ds, k, dq_acc);
    pointwise(b, CUDNN_POINTWISE_IDENTITY, dq_acc, nullptr, nullptr, dq);
}

/* the operation graph of b->ops (with b's handle when it has one: cuDNN 9 finalizes a graph without),
   and cuDNN's engine heuristic for it, finalized */
static desc_t heuristic(builder *b, const char *name) {
    desc_t graph = make(b, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    if (b->handle) set(b, graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &b->handle);
    set(b, graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, (int64_t)b->ops.size(), b->ops.data());
    b->ops.clear();
    char what[96];
    snprintf(what, sizeof what, "the %s operation graph", name);
    fin(b, graph, what);
    desc_t heur = make(b, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    setd(b, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
    set(b, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    snprintf(what, sizeof what, "the %s graph's engine heuristic", name);
    return fin(b, heur, what);
}

/* the heuristic's configurations in order: the first whose execution plan finalizes (cuDNN refuses
   plans per engine) */
static desc_t build_plan(builder *b, const char *name, int64_t *workspace) {
    desc_t heur = heuristic(b, name);
    enum { MAX_CFGS = 8 };
    desc_t cfgs[MAX_CFGS];
    int64_t n = 0;
    for (int i = 0; i < MAX_CFGS; i++) cfgs[i] = make(b, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    if (b->failed || !bok(b, cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, MAX_CFGS, &n, cfgs),
                          "the engine heuristic's results"))
        return nullptr;
    cudnnStatus_t last = CUDNN_STATUS_NOT_SUPPORTED;
    for (int64_t i = 0; i < n; i++) {
        desc_t p = make(b, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        set(b, p, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &b->handle);
        setd(b, p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfgs[i]);
        if (b->failed) return nullptr;
        last = cudnnBackendFinalize(p);
        if (last != CUDNN_STATUS_SUCCESS) continue; /* this engine cannot: try the next */
        int64_t got = 0;
        if (!bok(b, cudnnBackendGetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got, workspace), "a plan's workspace size"))
            return nullptr;
        return p;
    }
    bfail(b, "no execution plan of the %s graph finalizes (%lld engine configurations tried; the last: %s)", name, (long long)n, cudnnGetErrorString(last));
    return nullptr;
}

/* cuDNN compiles some engines at run time with NVRTC, which it opens by soname from its own code, so
   only the loader's default path and LD_LIBRARY_PATH are searched there. Opened once from here, whose
   run path holds the toolkit's library directory (kernels/build_cuda.sh), and kept (RTLD_GLOBAL), it
   is found by that soname when cuDNN asks. The soname when it could not be opened, else NULL. */
static const char *mgt__cudnn_load_nvrtc() {
    static char name[32];
    static const bool loaded = [] {
        snprintf(name, sizeof name, "libnvrtc.so.%d", CUDART_VERSION / 1000);
        return dlopen(name, RTLD_NOW | RTLD_GLOBAL) != nullptr;
    }();
    return loaded ? nullptr : name;
}

struct mgt_cudnn_attn {
    builder b; /* owns every descriptor and the handle */
    shape s;
    float scale, neg_inf;
    bool zero_acc;                            /* the caller zeroes the dQ accumulator (cuDNN before 9.6) */
    desc_t fwd, bwd;                          /* the execution plans */
    cudaStream_t stream;                      /* the handle's: the accumulator is zeroed on it */
    size_t ws_plan, rowsum_at, acc_at, bytes; /* workspace: the plans', then D, then the dq accumulator */
};

static size_t up256(size_t n) { return (n + 255) / 256 * 256; }

extern "C" mgt_cudnn_attn *mgt_cudnn_attn_create(struct CUstream_st *stream, int dtype, int B, int T, int NH, int NKV, int hs, char *why, size_t cap) {
    /* the fused engines' limits (cuDNN 9 developer guide, "Scaled Dot Product Attention": head sizes a
       multiple of 8 up to 128 on sm_80..sm_90; some take 256, 128 is what every one takes), the rule
       mgt.h's plan and simulator price */
    if (dtype == MGT_F32) {
        snprintf(why, cap, "cuDNN's fused attention takes bf16 or fp16 only, not fp32");
        return nullptr;
    }
    if (!mgt_cudnn_attention_serves(dtype, hs, NH, NKV) || B < 1 || T < 1) {
        snprintf(why, cap, "head size %d (cuDNN's fused attention needs a multiple of 8 up to 128), %d query heads on %d key/value heads", hs, NH, NKV);
        return nullptr;
    }
    mgt_cudnn_attn *a = new mgt_cudnn_attn();
    builder *b = &a->b;
    b->io = dtype == MGT_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
    b->next_uid = UID_VIRTUAL;
    a->s = {B, T, NH, NKV, hs, (int64_t)(NH + 2 * NKV) * hs};
    a->scale = 1.0f / sqrtf((float)hs);
    /* by the loaded cuDNN, as cudnn-frontend decides (utils/attn_score_modifiers.h, the SDPA node's
       workspace modifications): before 9.10 the mask value is the float's lowest (-inf turns fully
       masked tiles into NaN there); before 9.6 the caller zeroes the dQ accumulator, from 9.6 the
       engine does (a memset then is 0.2 ms of a GPT-2 step for nothing) */
    size_t version = cudnnGetVersion();
    a->neg_inf = version < 91000 ? -FLT_MAX : -INFINITY;
    a->zero_acc = version < 90600;
    (void)mgt__cudnn_load_nvrtc();
    a->stream = (cudaStream_t)stream;
    int64_t wf = 0, wb = 0;
    if (bok(b, cudnnCreate(&b->handle), "cudnnCreate") && bok(b, cudnnSetStream(b->handle, (cudaStream_t)stream), "cudnnSetStream")) {
        forward_graph(b, a->s);
        a->fwd = build_plan(b, "forward", &wf);
        backward_graph(b, a->s);
        a->bwd = build_plan(b, "backward", &wb);
    }
    if (b->failed) {
        const char *nvrtc = mgt__cudnn_load_nvrtc();
        snprintf(why, cap, "%s", b->why);
        if (nvrtc) /* the engines cuDNN compiles at run time were not there to offer */
            snprintf(why + strlen(why), cap - strlen(why), "; %s could not be opened (cuDNN's runtime-compiled engines need it: add the CUDA toolkit's lib64, "
                     "or a Python environment's nvidia/cuda_nvrtc/lib, to LD_LIBRARY_PATH)", nvrtc);
        mgt_cudnn_attn_destroy(a);
        return nullptr;
    }
    a->ws_plan = up256((size_t)(wf > wb ? wf : wb));
    a->rowsum_at = a->ws_plan;
    a->acc_at = a->rowsum_at + up256((size_t)B * NH * T * sizeof(float));
    a->bytes = a->acc_at + (size_t)B * NH * T * hs * sizeof(float);
    return a;
}

extern "C" int mgt_cudnn_attn_serves(const mgt_cudnn_attn *a, int B, int T, int NH, int NKV, int hs) {
    return a && a->s.B == B && a->s.T == T && a->s.NH == NH && a->s.NKV == NKV && a->s.hs == hs;
}
extern "C" size_t mgt_cudnn_attn_workspace(const mgt_cudnn_attn *a) { return a->bytes; }

/* the variant pack of one call (pointers change per layer), executed on the handle's stream */
static int execute(mgt_cudnn_attn *a, desc_t plan, const int64_t *uids, void *const *ptrs, int64_t n, void *work, const char *name, char *why, size_t cap) {
    desc_t pack = nullptr;
    cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &work);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(pack);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendExecute(a->b.handle, plan, pack);
    if (pack) cudnnBackendDestroyDescriptor(pack);
    if (st != CUDNN_STATUS_SUCCESS) snprintf(why, cap, "cuDNN attention %s (B %lld, T %lld, NH %lld, NKV %lld, hs %lld): %s", name, (long long)a->s.B,
                                              (long long)a->s.T, (long long)a->s.NH, (long long)a->s.NKV, (long long)a->s.hs, cudnnGetErrorString(st));
    return st == CUDNN_STATUS_SUCCESS ? 0 : -1;
}
static void *at(const void *base, int64_t elements) { return (char *)base + elements * 2; } /* bf16/fp16 */

extern "C" int mgt_cudnn_attn_forward(mgt_cudnn_attn *a, void *work, void *out, float *lse, const void *qkv, char *why, size_t cap) {
    const shape &s = a->s;
    int64_t uids[] = {UID_Q, UID_K, UID_V, UID_O, UID_STATS, UID_SCALE, UID_NEG_INF};
    void *ptrs[] = {(void *)qkv, at(qkv, s.NH * s.hs), at(qkv, (s.NH + s.NKV) * s.hs), out, lse, &a->scale, &a->neg_inf};
    return execute(a, a->fwd, uids, ptrs, 7, work, "forward", why, cap);
}

extern "C" int mgt_cudnn_attn_backward(mgt_cudnn_attn *a, void *work, void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse,
                                       char *why, size_t cap) {
    const shape &s = a->s;
    int64_t k = s.NH * s.hs, v = (s.NH + s.NKV) * s.hs;
    int64_t uids[] = {UID_Q, UID_K, UID_V, UID_O, UID_DO, UID_STATS, UID_DQ, UID_DK, UID_DV, UID_ROWSUM, UID_DQ_ACC, UID_SCALE, UID_NEG_INF};
    void *ptrs[] = {(void *)qkv, at(qkv, k), at(qkv, v), (void *)out, (void *)dout, (void *)lse, dqkv, at(dqkv, k), at(dqkv, v),
                    (char *)work + a->rowsum_at, (char *)work + a->acc_at, &a->scale, &a->neg_inf};
    /* the fused backward adds every key block's part of dQ into the fp32 accumulator (atomics), so
       before cuDNN 9.6 it must start at zero each call (TransformerEngine's and cudnn-frontend's memset) */
    size_t acc_bytes = (size_t)s.B * s.NH * s.T * s.hs * sizeof(float);
    cudaError_t ce = a->zero_acc ? cudaMemsetAsync((char *)work + a->acc_at, 0, acc_bytes, a->stream) : cudaSuccess;
    if (ce != cudaSuccess) {
        snprintf(why, cap, "cuDNN attention backward: zeroing the dQ accumulator: %s", cudaGetErrorString(ce));
        return -1;
    }
    return execute(a, a->bwd, uids, ptrs, 13, work, "backward", why, cap);
}

extern "C" void mgt_cudnn_attn_destroy(mgt_cudnn_attn *a) {
    if (!a) return;
    for (size_t i = a->b.made.size(); i-- > 0;) cudnnBackendDestroyDescriptor(a->b.made[i]);
    if (a->b.handle) cudnnDestroy(a->b.handle);
    delete a;
}

extern "C" void *mgt_cudnn_attn_plan(const mgt_cudnn_attn *a, int backward) { return backward ? a->bwd : a->fwd; }
extern "C" void *mgt_cudnn_attn_handle(const mgt_cudnn_attn *a) { return a->b.handle; }
