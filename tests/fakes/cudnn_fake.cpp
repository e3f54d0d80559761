/* cudnn_fake.cpp - a checking fake of the cuDNN 9 backend graph API that kernels/attention_cudnn.cpp
   uses for fused causal attention (scaled dot-product attention, forward with Stats and backward).

   Compiled against the real cudnn.h (extern "C" definitions: a signature change is a compile error,
   an unfaked function a link error). Descriptors record their attributes; finalizing one copies
   what it says into a model (tensors, operations, graphs, plans).

   WHAT IT RECOGNISES: an operation graph is served (the engine heuristic returns one configuration)
   only when its operations are, in order, exactly the composite SDPA forward or backward that
   attention_cudnn.cpp builds as cudnn-frontend lowers them (matmul, pointwise MUL/SUB/ADD/DIV/EXP/
   LOG/GEN_INDEX/CMP_GE/BINARY_SELECT/IDENTITY, reductions MAX/ADD, reshapes; the backward with or
   without the reductions of grouped-query attention), on 4-d tensors, with Q, K, V, O of one 16-bit
   type (bf16 or fp16: cuDNN's fused attention has no fp32), a head size that is a multiple of 8 and
   at most 128 (the limits of cuDNN 9's fused flash attention on sm_80..sm_90), and the query heads
   a multiple of the key/value heads. Any other graph gets no configuration, as real cuDNN gives
   none for a pattern no engine fuses. MGT_FAKE_CUDNN_REFUSE=1 makes every execution plan fail to
   finalize (CUDNN_STATUS_NOT_SUPPORTED), as a real cuDNN may refuse a graph the fake accepts.

   WHAT IT COMPUTES: cudnnBackendExecute is a stream operation on the handle's stream that runs the
   graph's operations in order on the CPU in double: virtual tensors live in host buffers (those of
   a 16-bit type rounded to it, as the fused kernel stores P and dS for its tensor-core matmuls),
   non-virtual ones are read and written in device memory in their own type (bf16/fp16 outputs
   rounded to nearest even, Stats and the backward's fp32 tensors in fp32), by-value scalars are
   read from the host when execute is called. Broadcasting: a dimension of 1 is broadcast, and a
   dimension a whole number of times smaller (K and V heads under grouped-query attention) maps
   index i to i / ratio; a reduction sums (or maxes) every input element into the output element
   so mapped. A matmul whose output is in memory in fp32 (the backward's dQ accumulator) adds into
   what that memory holds, as the fused engine adds each key block's part with atomics: a caller
   that does not zero it first gets a wrong dQ (before cuDNN 9.6; from 9.6 the engine zeroes it:
   MGT_FAKE_CUDNN_VERSION picks the version, see fake_version). The plan's workspace is overwritten with NaN (it is scratch), the forward plan needs
   256 KiB and the backward 1 MiB, so a caller that sizes it from the plan is tested.

   CHECKS (abort with "mgt fake <api>: ..."): a descriptor that is not live (never created, or
   destroyed), setting an attribute of a finalized descriptor, an attribute of the wrong type or one
   the descriptor does not have, a descriptor attribute that points to a descriptor not yet
   finalized (the backend API's finalize order), finalizing with a required attribute missing,
   tensors that are not 4-d, with dimensions or strides below 1, a byte alignment that is not a
   power of two, a by-value tensor that is not one element, operations whose shapes do not agree
   (matmul A (.., M, K) x B (.., K, N) -> C (.., M, N), pointwise and reduction broadcasting,
   reshape element counts), two tensors of one graph with the same id but different shapes, a
   virtual tensor read before an operation wrote it; inside a step of the handle's device
   (kernels/fake_note.h), making a handle, a graph, a heuristic or a plan (everything but the
   variant pack is built when the run is created); at execute, a handle on another device, a plan
   or variant pack not finalized, a non-virtual tensor of the graph missing from the variant pack,
   a by-value scalar in device memory, a tensor pointer that is not device memory of the handle's
   device with the bytes its dimensions and strides reach (through the stream operation's checks),
   and a workspace smaller than the plan asked for. */
#include "fake_core.h" /* defines: mgtfake::enqueue, mem_use, fail, step_check, bf16/half conversions */
#include "fakes.h"     /* defines: mgt_fake_cudnn_executions */
#include <cudnn.h>     /* defines: the declarations faked here */
#include <math.h>      /* defines: exp, log, INFINITY, NAN */
#include <stdlib.h>    /* defines: getenv */
#include <map>         /* defines: std::map */
#include <memory>      /* defines: std::shared_ptr */
#include <set>         /* defines: std::set */

using namespace mgtfake;

struct cudnnContext {
    int device;
    cudaStream_t stream;
};
static std::set<cudnnContext *> &handles = *new std::set<cudnnContext *>; /* never freed */

namespace {
struct attr {
    cudnnBackendAttributeType_t type;
    int64_t n;
    std::vector<char> bytes;
};
struct ten { /* a finalized tensor descriptor */
    int64_t uid, n[4], s[4], align;
    cudnnDataType_t type;
    bool virt, byval;
};
enum op_kind { OP_PW, OP_MM, OP_RED, OP_RESHAPE };
struct op {
    op_kind kind;
    int mode;                /* pointwise mode or reduction operator */
    int64_t axis;            /* GEN_INDEX */
    int x, b, t, y;          /* indexes into graph::tens, -1: none (a matmul: A = x, B = b, C = y) */
};
struct graph {
    std::vector<ten> tens;
    std::vector<op> ops;
    bool served;            /* one of the SDPA patterns */
    int64_t workspace;      /* what its plan asks for */
    std::string name;       /* "forward" or "backward" */
};
struct desc {
    uint32_t magic;
    cudnnBackendDescriptorType_t type;
    bool final;
    int device;
    std::map<int, attr> attrs;
    ten t;                           /* a tensor */
    op o;                            /* an operation (tensor fields index `opt`) */
    std::vector<desc *> opt;         /* an operation's tensors: x, b, t, y */
    std::shared_ptr<graph> g;        /* a graph, heuristic, engine configuration or plan */
    cudnnContext *handle;            /* a graph or plan */
};
const uint32_t MAGIC = 0x63646e6e; /* "cdnn" */
} // namespace

static std::set<desc *> &descs = *new std::set<desc *>;
static long executions; /* cudnnBackendExecute calls enqueued (mgt_fake_cudnn_executions), under mu */

static desc *live(const char *api, void *p) {
    desc *d = (desc *)p;
    if (!p || !descs.count(d) || d->magic != MAGIC) fail(api, "%p is not a live cuDNN backend descriptor (never created, or destroyed)", p);
    return d;
}
static size_t type_bytes(const char *api, cudnnBackendAttributeType_t t) {
    switch (t) {
    case CUDNN_TYPE_HANDLE: return sizeof(cudnnHandle_t);
    case CUDNN_TYPE_DATA_TYPE: return sizeof(cudnnDataType_t);
    case CUDNN_TYPE_BOOLEAN: return sizeof(bool);
    case CUDNN_TYPE_INT64: return sizeof(int64_t);
    case CUDNN_TYPE_FLOAT: return sizeof(float);
    case CUDNN_TYPE_VOID_PTR: return sizeof(void *);
    case CUDNN_TYPE_POINTWISE_MODE: return sizeof(cudnnPointwiseMode_t);
    case CUDNN_TYPE_HEUR_MODE: return sizeof(cudnnBackendHeurMode_t);
    case CUDNN_TYPE_REDUCTION_OPERATOR_TYPE: return sizeof(cudnnReduceTensorOp_t);
    case CUDNN_TYPE_BACKEND_DESCRIPTOR: return sizeof(cudnnBackendDescriptor_t);
    default: fail(api, "attribute type %d is not faked", (int)t);
    }
}

/* the attributes each descriptor type has, with their types; required ones marked */
struct attr_rule {
    cudnnBackendDescriptorType_t desc;
    cudnnBackendAttributeName_t name;
    cudnnBackendAttributeType_t type;
    bool required;
};
static const attr_rule rules[] = {
    {CUDNN_BACKEND_TENSOR_DESCRIPTOR, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, true},
    {CUDNN_BACKEND_TENSOR_DESCRIPTOR, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, true},
    {CUDNN_BACKEND_TENSOR_DESCRIPTOR, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, true},
    {CUDNN_BACKEND_TENSOR_DESCRIPTOR, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, true},
    {CUDNN_BACKEND_TENSOR_DESCRIPTOR, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, true},
    {CUDNN_BACKEND_TENSOR_DESCRIPTOR, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, false},
    {CUDNN_BACKEND_TENSOR_DESCRIPTOR, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, false},
    {CUDNN_BACKEND_POINTWISE_DESCRIPTOR, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, true},
    {CUDNN_BACKEND_POINTWISE_DESCRIPTOR, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, true},
    {CUDNN_BACKEND_POINTWISE_DESCRIPTOR, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, false},
    {CUDNN_BACKEND_MATMUL_DESCRIPTOR, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, true},
    {CUDNN_BACKEND_REDUCTION_DESCRIPTOR, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, true},
    {CUDNN_BACKEND_REDUCTION_DESCRIPTOR, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, true},
    {CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, true},
    {CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, true},
    {CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, false},
    {CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, false},
    {CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, true},
    {CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, true},
    {CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, true},
    {CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, true},
    {CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, true},
    {CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, true},
    {CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, true},
    {CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, true},
    {CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, true},
    {CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, true},
    {CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, false}, /* deprecated in 9 */
    {CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, true},
    {CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, true},
    {CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, true},
    {CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, true},
    {CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, true},
    {CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, true},
    {CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, true},
    {CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, true},
};

static const attr *get(const desc *d, cudnnBackendAttributeName_t name) {
    auto it = d->attrs.find((int)name);
    return it == d->attrs.end() ? nullptr : &it->second;
}
template <class T> static T scalar(const desc *d, cudnnBackendAttributeName_t name, T dflt) {
    const attr *a = get(d, name);
    T v = dflt;
    if (a) memcpy(&v, a->bytes.data(), sizeof v);
    return v;
}
static desc *ref(const desc *d, cudnnBackendAttributeName_t name) { return get(d, name) ? scalar<desc *>(d, name, nullptr) : nullptr; }
static const char *dname(cudnnBackendDescriptorType_t t) {
    switch (t) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: return "a tensor";
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR: return "a pointwise descriptor";
    case CUDNN_BACKEND_MATMUL_DESCRIPTOR: return "a matmul descriptor";
    case CUDNN_BACKEND_REDUCTION_DESCRIPTOR: return "a reduction descriptor";
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: return "a pointwise operation";
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR: return "a matmul operation";
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR: return "a reduction operation";
    case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR: return "a reshape operation";
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: return "an operation graph";
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR: return "an engine heuristic";
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR: return "an engine configuration";
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: return "an execution plan";
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: return "a variant pack";
    default: return nullptr;
    }
}

/* ---- shapes ---- */
static int64_t extent(const ten &t) { /* elements from the base pointer to the last one, + 1 */
    int64_t e = 1;
    for (int k = 0; k < 4; k++) e += (t.n[k] - 1) * t.s[k];
    return e;
}
static size_t elem_bytes(cudnnDataType_t t) { return t == CUDNN_DATA_BFLOAT16 || t == CUDNN_DATA_HALF ? 2 : t == CUDNN_DATA_BOOLEAN ? 1 : 4; }
static bool maps(int64_t from, int64_t to) { return from == to || from == 1 || (from < to && to % from == 0); } /* broadcast from -> to */
static std::string dims(const ten &t) { return strf("(%lld, %lld, %lld, %lld)", (long long)t.n[0], (long long)t.n[1], (long long)t.n[2], (long long)t.n[3]); }

static void check_op(const char *api, const desc *d) {
    const op &o = d->o;
    const ten &y = d->opt[3]->t;
    auto bcast = [&](const ten &x, const char *role) {
        for (int k = 0; k < 4; k++)
            if (!maps(x.n[k], y.n[k])) fail(api, "%s: %s %s does not broadcast to the output %s", dname(d->type), role, dims(x).c_str(), dims(y).c_str());
    };
    if (o.kind == OP_PW) {
        bcast(d->opt[0]->t, "X");
        if (d->opt[1]) bcast(d->opt[1]->t, "B");
        if (d->opt[2]) bcast(d->opt[2]->t, "T");
        bool binary = o.mode == CUDNN_POINTWISE_ADD || o.mode == CUDNN_POINTWISE_SUB || o.mode == CUDNN_POINTWISE_MUL || o.mode == CUDNN_POINTWISE_DIV ||
                      o.mode == CUDNN_POINTWISE_CMP_GE || o.mode == CUDNN_POINTWISE_BINARY_SELECT;
        if (binary && !d->opt[1]) fail(api, "pointwise mode %d needs a BDESC", o.mode);
        if (o.mode == CUDNN_POINTWISE_BINARY_SELECT && !d->opt[2]) fail(api, "BINARY_SELECT needs a TDESC (the mask)");
        if (o.mode == CUDNN_POINTWISE_GEN_INDEX && (o.axis < 0 || o.axis > 3)) fail(api, "GEN_INDEX needs CUDNN_ATTR_POINTWISE_AXIS in 0..3");
    } else if (o.kind == OP_MM) {
        const ten &a = d->opt[0]->t, &b = d->opt[1]->t;
        if (a.n[3] != b.n[2] || a.n[2] != y.n[2] || b.n[3] != y.n[3])
            fail(api, "shapes do not agree: A %s x B %s -> C %s", dims(a).c_str(), dims(b).c_str(), dims(y).c_str());
        for (int k = 0; k < 2; k++)
            if (!maps(a.n[k], y.n[k]) || !maps(b.n[k], y.n[k]))
                fail(api, "batch dimensions of A %s, B %s do not broadcast to C %s", dims(a).c_str(), dims(b).c_str(), dims(y).c_str());
    } else if (o.kind == OP_RED) {
        const ten &x = d->opt[0]->t;
        for (int k = 0; k < 4; k++)
            if (!maps(y.n[k], x.n[k])) fail(api, "the reduction's output %s does not divide its input %s", dims(y).c_str(), dims(x).c_str());
    } else {
        const ten &x = d->opt[0]->t;
        if (x.n[0] * x.n[1] * x.n[2] * x.n[3] != y.n[0] * y.n[1] * y.n[2] * y.n[3])
            fail(api, "reshape of %s into %s changes the element count", dims(x).c_str(), dims(y).c_str());
    }
}

/* the patterns attention_cudnn.cpp builds: a signature of each operation in order */
static std::string signature(const graph &g) {
    std::string s;
    for (const op &o : g.ops) {
        if (!s.empty()) s += ' ';
        if (o.kind == OP_MM) s += "mm";
        else if (o.kind == OP_RESHAPE) s += "reshape";
        else if (o.kind == OP_RED) s += o.mode == CUDNN_REDUCE_TENSOR_MAX ? "max" : o.mode == CUDNN_REDUCE_TENSOR_ADD ? "sum" : "red?";
        else
            switch (o.mode) {
            case CUDNN_POINTWISE_MUL: s += "mul"; break;
            case CUDNN_POINTWISE_SUB: s += "sub"; break;
            case CUDNN_POINTWISE_ADD: s += "add"; break;
            case CUDNN_POINTWISE_DIV: s += "div"; break;
            case CUDNN_POINTWISE_EXP: s += "exp"; break;
            case CUDNN_POINTWISE_LOG: s += "log"; break;
            case CUDNN_POINTWISE_GEN_INDEX: s += "index"; break;
            case CUDNN_POINTWISE_CMP_GE: s += "ge"; break;
            case CUDNN_POINTWISE_BINARY_SELECT: s += "select"; break;
            case CUDNN_POINTWISE_IDENTITY: s += "copy"; break;
            default: s += "pw?";
            }
    }
    return s;
}
#define MASK "index index ge select"
static const char *const FWD = "mm mul " MASK " max sub exp sum log add div mm";
static const char *const BWD_MHA = "mul sum mm mul sub " MASK " exp reshape mm mm sub mul mul reshape mm reshape mm copy";
static const char *const BWD_GQA = "mul sum mm mul sub " MASK " exp reshape mm sum mm sub mul mul reshape mm sum reshape mm copy";
#undef MASK

/* whether a fused engine serves the graph: one of the patterns, on Q (the first matmul's A), K
   (its B) and V of a 16-bit type with a head size cuDNN's flash attention takes */
static bool serve(graph &g) {
    std::string sig = signature(g);
    g.name = sig == FWD ? "forward" : sig == BWD_MHA || sig == BWD_GQA ? "backward" : "";
    if (g.name.empty()) return false;
    const op *mm = nullptr;
    for (const op &o : g.ops)
        if (o.kind == OP_MM) { mm = &o; break; }
    const ten &q = g.tens[mm->x], &k = g.tens[mm->b];
    int64_t hs = q.n[3];
    if (q.type != k.type || (q.type != CUDNN_DATA_BFLOAT16 && q.type != CUDNN_DATA_HALF)) return false;
    if (hs % 8 != 0 || hs > 128 || q.n[1] % k.n[1] != 0) return false;
    for (const ten &t : g.tens)
        if (!t.virt && !t.byval && (t.s[3] != 1 && t.s[2] != 1)) return false; /* one dimension contiguous */
    g.workspace = g.name == "forward" ? 256 << 10 : 1 << 20;
    return true;
}

/* ---- execution: the graph's operations in order, in double ---- */
struct run_state {
    std::shared_ptr<graph> g;
    std::vector<void *> ptr;              /* per tensor: device memory (non-virtual) */
    std::vector<double> byval;            /* per tensor: the by-value scalar */
    std::vector<std::vector<double>> buf; /* per tensor: a virtual tensor's values, by its strides */
    std::vector<bool> written;
    bool nan_tiles = false; /* a -inf mask value before cuDNN 9.10 (see fake_version) */
};
/* the cuDNN version the fake stands for: MGT_FAKE_CUDNN_VERSION (e.g. 90500), default the headers'.
   Two behaviours follow it, as cudnn-frontend's SDPA lowering tells them apart: before 9.6 the
   backward adds into the dQ accumulator as it finds it (the caller zeroes it: frontend's
   workspace memset), from 9.6 the engine zeroes it itself; before 9.10 a mask value of -inf
   turns fully masked tiles into NaN (frontend passes the float's lowest there) */
static size_t fake_version() {
    static const char *e = getenv("MGT_FAKE_CUDNN_VERSION");
    return e && *e ? (size_t)strtoul(e, nullptr, 10) : (size_t)CUDNN_VERSION;
}
static double rnd(cudnnDataType_t t, double v) {
    if (t == CUDNN_DATA_BFLOAT16) return bf16_to_float(float_to_bf16((float)v));
    if (t == CUDNN_DATA_HALF) return half_to_float(float_to_half((float)v));
    return v;
}
static double load(run_state &r, int i, int64_t off) {
    const ten &t = r.g->tens[i];
    if (t.byval) return r.byval[i];
    if (t.virt) {
        if (!r.written[i]) fail("cudnnBackendExecute", "virtual tensor %lld is read before an operation writes it", (long long)t.uid);
        return r.buf[i][off];
    }
    const void *p = r.ptr[i];
    if (t.type == CUDNN_DATA_FLOAT) return ((const float *)p)[off];
    uint16_t h = ((const uint16_t *)p)[off];
    return t.type == CUDNN_DATA_BFLOAT16 ? bf16_to_float(h) : half_to_float(h);
}
static void store(run_state &r, int i, int64_t off, double v) {
    const ten &t = r.g->tens[i];
    if (t.virt) { r.buf[i][off] = rnd(t.type, v); return; }
    void *p = r.ptr[i];
    if (t.type == CUDNN_DATA_FLOAT) ((float *)p)[off] = (float)v;
    else ((uint16_t *)p)[off] = t.type == CUDNN_DATA_BFLOAT16 ? float_to_bf16((float)v) : float_to_half((float)v);
}
static int64_t offset(const ten &t, const int64_t *idx) { return idx[0] * t.s[0] + idx[1] * t.s[1] + idx[2] * t.s[2] + idx[3] * t.s[3]; }
/* idx of the output (dims to) read from an input of dims t.n: broadcast or grouped */
static int64_t offset_from(const ten &t, const int64_t *idx, const int64_t *to) {
    int64_t j[4];
    for (int k = 0; k < 4; k++) j[k] = t.n[k] == 1 ? 0 : idx[k] * t.n[k] / to[k];
    return offset(t, j);
}
static void each(const int64_t *n, const std::function<void(const int64_t *)> &f) {
    int64_t i[4];
    for (i[0] = 0; i[0] < n[0]; i[0]++)
        for (i[1] = 0; i[1] < n[1]; i[1]++)
            for (i[2] = 0; i[2] < n[2]; i[2]++)
                for (i[3] = 0; i[3] < n[3]; i[3]++) f(i);
}
static void run_graph(run_state &r) {
    const graph &g = *r.g;
    for (const op &o : g.ops) {
        const ten &y = g.tens[o.y];
        if (y.virt) r.buf[o.y].assign((size_t)extent(y), 0.0);
        if (o.kind == OP_PW) {
            const ten &x = g.tens[o.x];
            each(y.n, [&](const int64_t *i) {
                double a = load(r, o.x, offset_from(x, i, y.n)), b = o.b >= 0 ? load(r, o.b, offset_from(g.tens[o.b], i, y.n)) : 0, v = 0;
                switch (o.mode) {
                case CUDNN_POINTWISE_MUL: v = a * b; break;
                case CUDNN_POINTWISE_SUB: v = a - b; break;
                case CUDNN_POINTWISE_ADD: v = a + b; break;
                case CUDNN_POINTWISE_DIV: v = a / b; break;
                case CUDNN_POINTWISE_EXP: v = exp(a); break;
                case CUDNN_POINTWISE_LOG: v = log(a); break;
                case CUDNN_POINTWISE_IDENTITY: v = a; break;
                case CUDNN_POINTWISE_GEN_INDEX: v = (double)i[o.axis]; break;
                case CUDNN_POINTWISE_CMP_GE: v = a >= b; break;
                case CUDNN_POINTWISE_BINARY_SELECT: v = load(r, o.t, offset_from(g.tens[o.t], i, y.n)) != 0 ? a : b; break;
                default: fail("cudnnBackendExecute", "pointwise mode %d is not faked", o.mode);
                }
                store(r, o.y, offset(y, i), v);
            });
        } else if (o.kind == OP_MM) {
            const ten &a = g.tens[o.x], &b = g.tens[o.b];
            each(y.n, [&](const int64_t *i) {
                int64_t ia[4] = {i[0], i[1], i[2], 0}, ib[4] = {i[0], i[1], 0, i[3]}, na[4] = {y.n[0], y.n[1], a.n[2], a.n[3]},
                        nb[4] = {y.n[0], y.n[1], b.n[2], b.n[3]};
                double sum = 0;
                for (int64_t k = 0; k < a.n[3]; k++) {
                    ia[3] = k;
                    ib[2] = k;
                    sum += load(r, o.x, offset_from(a, ia, na)) * load(r, o.b, offset_from(b, ib, nb));
                }
                /* a matmul into memory in fp32 is the dQ accumulator: the fused engine adds each key
                   block's part into it, so whatever it held before is in the result */
                if (!y.virt && y.type == CUDNN_DATA_FLOAT && fake_version() < 90600) sum += load(r, o.y, offset(y, i));
                store(r, o.y, offset(y, i), sum);
            });
        } else if (o.kind == OP_RED) {
            const ten &x = g.tens[o.x];
            bool mx = o.mode == CUDNN_REDUCE_TENSOR_MAX;
            std::map<int64_t, double> acc; /* by output offset, in order of the input */
            each(x.n, [&](const int64_t *i) {
                int64_t at = offset_from(y, i, x.n);
                double v = load(r, o.x, offset(x, i));
                auto it = acc.find(at);
                if (it == acc.end()) acc[at] = v;
                else it->second = mx ? (v > it->second ? v : it->second) : it->second + v;
            });
            for (auto &kv : acc) store(r, o.y, kv.first, kv.second);
        } else { /* reshape: the same memory, read through the output's strides */
            each(y.n, [&](const int64_t *i) { store(r, o.y, offset(y, i), load(r, o.x, offset(y, i))); });
        }
        r.written[o.y] = true;
    }
    if (r.nan_tiles) /* the NaN of the fully masked tiles reaches every output */
        for (const op &o : g.ops)
            if (!g.tens[o.y].virt)
                each(g.tens[o.y].n, [&](const int64_t *i) { store(r, o.y, offset(g.tens[o.y], i), NAN); });
}

extern "C" {

long mgt_fake_cudnn_executions(void) {
    lock_t lk(mu);
    return executions;
}
size_t cudnnGetVersion(void) { return fake_version(); }
const char *cudnnGetErrorString(cudnnStatus_t st) {
    switch (st) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    default: return "a cuDNN error (the fake names only the ones it returns)";
    }
}
cudnnStatus_t cudnnCreate(cudnnHandle_t *out) {
    if (!out) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    lock_t lk(mu);
    step_check("cudnnCreate", current_device(), "making a cuDNN handle", "handles are made when the run is created");
    cudnnContext *h = new cudnnContext{current_device(), nullptr};
    handles.insert(h);
    *out = h;
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroy(cudnnHandle_t h) {
    destroy_handle(handles, h, "cudnnDestroy", "cuDNN");
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s) {
    {
        lock_t lk(mu);
        if (!handles.count(h)) fail("cudnnSetStream", "%p is not a live cuDNN handle", (void *)h);
    }
    int dev = stream_device("cudnnSetStream", s);
    if (dev != h->device) fail("cudnnSetStream", "the stream belongs to device %d, the handle to device %d", dev, h->device);
    h->stream = s;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t *out) {
    const char *api = "cudnnBackendCreateDescriptor";
    if (!out) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    if (!dname(type) && type != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR) fail(api, "descriptor type %d is not faked", (int)type);
    lock_t lk(mu);
    if (type != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
        step_check(api, current_device(), strf("making %s", dname(type)), "graphs and plans are built when the run is created; a step only executes");
    desc *d = new desc();
    d->magic = MAGIC;
    d->type = type;
    d->device = current_device();
    descs.insert(d);
    *out = d;
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t p) {
    lock_t lk(mu);
    desc *d = live("cudnnBackendDestroyDescriptor", p);
    descs.erase(d);
    d->magic = 0;
    delete d;
    return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t p, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t n,
                                       const void *v) {
    const char *api = "cudnnBackendSetAttribute";
    lock_t lk(mu);
    desc *d = live(api, p);
    if (d->final) fail(api, "attribute %d of %s that is already finalized (cuDNN answers CUDNN_STATUS_NOT_SUPPORTED)", (int)name, dname(d->type));
    const attr_rule *rule = nullptr;
    for (const attr_rule &r : rules)
        if (r.desc == d->type && r.name == name) rule = &r;
    if (!rule) fail(api, "%s has no attribute %d (or the fake does not model it)", dname(d->type), (int)name);
    if (rule->type != type) fail(api, "attribute %d of %s takes type %d, not %d (CUDNN_STATUS_BAD_PARAM)", (int)name, dname(d->type), (int)rule->type, (int)type);
    if (n < 1 || !v) fail(api, "attribute %d of %s: %lld elements at %p", (int)name, dname(d->type), (long long)n, v);
    if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR)
        for (int64_t i = 0; i < n; i++) {
            desc *e = live(api, ((void *const *)v)[i]);
            if (!e->final)
                fail(api, "attribute %d of %s points to %s that is not finalized (finalize the parts first: CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED)",
                     (int)name, dname(d->type), dname(e->type));
        }
    if (type == CUDNN_TYPE_HANDLE && !handles.count(*(cudnnContext *const *)v)) fail(api, "attribute %d: not a live cuDNN handle", (int)name);
    attr a{type, n, std::vector<char>((const char *)v, (const char *)v + (size_t)n * type_bytes(api, type))};
    d->attrs[(int)name] = a;
    return CUDNN_STATUS_SUCCESS;
}

static void finalize_tensor(const char *api, desc *d) {
    ten &t = d->t;
    const attr *nd = get(d, CUDNN_ATTR_TENSOR_DIMENSIONS), *st = get(d, CUDNN_ATTR_TENSOR_STRIDES);
    if (nd->n != 4 || st->n != 4) fail(api, "a tensor of %lld dimensions and %lld strides (the fake models 4-d tensors, as attention uses)", (long long)nd->n, (long long)st->n);
    memcpy(t.n, nd->bytes.data(), sizeof t.n);
    memcpy(t.s, st->bytes.data(), sizeof t.s);
    t.uid = scalar<int64_t>(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, 0);
    t.type = scalar<cudnnDataType_t>(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_DATA_FLOAT);
    t.align = scalar<int64_t>(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 0);
    t.virt = scalar<bool>(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, false);
    t.byval = scalar<bool>(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, false);
    for (int k = 0; k < 4; k++)
        if (t.n[k] < 1 || t.s[k] < 1) fail(api, "tensor %lld: dimensions %s, a stride or dimension below 1 (CUDNN_STATUS_BAD_PARAM)", (long long)t.uid, dims(t).c_str());
    if (t.align < 1 || (t.align & (t.align - 1))) fail(api, "tensor %lld: byte alignment %lld is not a power of two", (long long)t.uid, (long long)t.align);
    if (t.byval && (extent(t) != 1 || t.virt)) fail(api, "tensor %lld: a by-value tensor must be one element and not virtual", (long long)t.uid);
    if (t.type != CUDNN_DATA_FLOAT && t.type != CUDNN_DATA_BFLOAT16 && t.type != CUDNN_DATA_HALF && t.type != CUDNN_DATA_INT32 && t.type != CUDNN_DATA_BOOLEAN)
        fail(api, "tensor %lld: data type %d is not faked", (long long)t.uid, (int)t.type);
}
static void finalize_op(const char *api, desc *d) {
    op &o = d->o;
    o.axis = -1;
    o.x = o.b = o.t = o.y = -1;
    desc *x = nullptr, *b = nullptr, *t = nullptr, *y = nullptr;
    if (d->type == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR) {
        desc *pw = ref(d, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR);
        if (pw->type != CUDNN_BACKEND_POINTWISE_DESCRIPTOR) fail(api, "PW_DESCRIPTOR is %s", dname(pw->type));
        o.kind = OP_PW;
        o.mode = (int)scalar<cudnnPointwiseMode_t>(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_POINTWISE_IDENTITY);
        o.axis = scalar<int64_t>(pw, CUDNN_ATTR_POINTWISE_AXIS, -1);
        x = ref(d, CUDNN_ATTR_OPERATION_POINTWISE_XDESC), b = ref(d, CUDNN_ATTR_OPERATION_POINTWISE_BDESC);
        t = ref(d, CUDNN_ATTR_OPERATION_POINTWISE_TDESC), y = ref(d, CUDNN_ATTR_OPERATION_POINTWISE_YDESC);
    } else if (d->type == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR) {
        o.kind = OP_MM;
        o.mode = 0;
        x = ref(d, CUDNN_ATTR_OPERATION_MATMUL_ADESC), b = ref(d, CUDNN_ATTR_OPERATION_MATMUL_BDESC), y = ref(d, CUDNN_ATTR_OPERATION_MATMUL_CDESC);
        if (ref(d, CUDNN_ATTR_OPERATION_MATMUL_DESC)->type != CUDNN_BACKEND_MATMUL_DESCRIPTOR) fail(api, "MATMUL_DESC is not a matmul descriptor");
    } else if (d->type == CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR) {
        desc *rd = ref(d, CUDNN_ATTR_OPERATION_REDUCTION_DESC);
        if (rd->type != CUDNN_BACKEND_REDUCTION_DESCRIPTOR) fail(api, "REDUCTION_DESC is %s", dname(rd->type));
        o.kind = OP_RED;
        o.mode = (int)scalar<cudnnReduceTensorOp_t>(rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_REDUCE_TENSOR_ADD);
        if (o.mode != CUDNN_REDUCE_TENSOR_ADD && o.mode != CUDNN_REDUCE_TENSOR_MAX) fail(api, "reduction operator %d is not faked", o.mode);
        x = ref(d, CUDNN_ATTR_OPERATION_REDUCTION_XDESC), y = ref(d, CUDNN_ATTR_OPERATION_REDUCTION_YDESC);
    } else {
        o.kind = OP_RESHAPE;
        o.mode = 0;
        x = ref(d, CUDNN_ATTR_OPERATION_RESHAPE_XDESC), y = ref(d, CUDNN_ATTR_OPERATION_RESHAPE_YDESC);
    }
    for (desc *e : {x, b, t, y})
        if (e && e->type != CUDNN_BACKEND_TENSOR_DESCRIPTOR) fail(api, "%s takes tensors, not %s", dname(d->type), dname(e->type));
    d->opt = {x, b, t, y};
    check_op(api, d);
}
static void finalize_graph(const char *api, desc *d) {
    const attr *ops = get(d, CUDNN_ATTR_OPERATIONGRAPH_OPS);
    auto g = std::make_shared<graph>();
    std::map<int64_t, int> by_uid;
    for (int64_t i = 0; i < ops->n; i++) {
        desc *od = ((desc *const *)ops->bytes.data())[i];
        if (od->type < CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR || !od->opt.size()) fail(api, "operation %lld is %s, not an operation", (long long)i, dname(od->type));
        op o = od->o;
        int *slots[4] = {&o.x, &o.b, &o.t, &o.y};
        for (int k = 0; k < 4; k++) {
            desc *td = od->opt[k];
            if (!td) continue;
            auto it = by_uid.find(td->t.uid);
            if (it == by_uid.end()) {
                by_uid[td->t.uid] = (int)g->tens.size();
                g->tens.push_back(td->t);
                *slots[k] = (int)g->tens.size() - 1;
            } else {
                const ten &a = g->tens[it->second], &b = td->t;
                if (memcmp(a.n, b.n, sizeof a.n) || memcmp(a.s, b.s, sizeof a.s) || a.type != b.type || a.virt != b.virt)
                    fail(api, "two tensors with id %lld differ (%s and %s): ids must be unique in a graph", (long long)b.uid, dims(a).c_str(), dims(b).c_str());
                *slots[k] = it->second;
            }
        }
        g->ops.push_back(o);
    }
    d->handle = scalar<cudnnContext *>(d, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, nullptr);
    g->served = serve(*g);
    d->g = g;
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t p) {
    const char *api = "cudnnBackendFinalize";
    lock_t lk(mu);
    desc *d = live(api, p);
    if (d->final) fail(api, "%s is finalized twice", dname(d->type));
    for (const attr_rule &r : rules)
        if (r.desc == d->type && r.required && !get(d, r.name))
            fail(api, "%s without its required attribute %d (CUDNN_STATUS_BAD_PARAM)", dname(d->type), (int)r.name);
    switch (d->type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: finalize_tensor(api, d); break;
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR:
        if (scalar<cudnnPointwiseMode_t>(d, CUDNN_ATTR_POINTWISE_MODE, CUDNN_POINTWISE_ADD) == CUDNN_POINTWISE_GEN_INDEX && !get(d, CUDNN_ATTR_POINTWISE_AXIS))
            fail(api, "a GEN_INDEX pointwise descriptor without CUDNN_ATTR_POINTWISE_AXIS");
        break;
    case CUDNN_BACKEND_MATMUL_DESCRIPTOR:
    case CUDNN_BACKEND_REDUCTION_DESCRIPTOR: break;
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR: finalize_op(api, d); break;
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
        step_check(api, d->device, "finalizing an operation graph", "graphs are built when the run is created");
        finalize_graph(api, d);
        break;
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR: {
        desc *g = ref(d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH);
        if (g->type != CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR) fail(api, "the heuristic's OPERATION_GRAPH is %s", dname(g->type));
        step_check(api, d->device, "running an engine heuristic", "plans are chosen when the run is created");
        d->g = g->g;
        d->handle = g->handle;
        break;
    }
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR: fail(api, "the fake's engine configurations come finalized from the heuristic's results");
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: {
        desc *cfg = ref(d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG);
        if (cfg->type != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR || !cfg->g) fail(api, "the plan's ENGINE_CONFIG is not one of the heuristic's results");
        step_check(api, d->device, "finalizing an execution plan", "plans are built when the run is created");
        const char *refuse = getenv("MGT_FAKE_CUDNN_REFUSE");
        if (refuse && *refuse == '1') return CUDNN_STATUS_NOT_SUPPORTED; /* stays unfinalized, as a refused plan does */
        d->g = cfg->g;
        d->handle = scalar<cudnnContext *>(d, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, nullptr);
        break;
    }
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
        if (get(d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS)->n != get(d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS)->n)
            fail(api, "a variant pack with %lld ids and %lld pointers", (long long)get(d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS)->n,
                 (long long)get(d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS)->n);
        break;
    default: fail(api, "finalizing descriptor type %d is not faked", (int)d->type);
    }
    d->final = true;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const p, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t requested,
                                       int64_t *count, void *out) {
    const char *api = "cudnnBackendGetAttribute";
    lock_t lk(mu);
    desc *d = live(api, p);
    if (!d->final) fail(api, "attribute %d of %s that is not finalized", (int)name, dname(d->type));
    if (d->type == CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR && name == CUDNN_ATTR_ENGINEHEUR_RESULTS && type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
        int64_t n = d->g->served ? 1 : 0; /* one engine fuses the pattern; none any other graph */
        if (count) *count = n;
        for (int64_t i = 0; i < n && i < requested; i++) {
            desc *cfg = live(api, ((void **)out)[i]);
            if (cfg->type != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR || cfg->final) fail(api, "result %lld must be a new engine configuration descriptor", (long long)i);
            cfg->g = d->g;
            cfg->final = true;
        }
        return CUDNN_STATUS_SUCCESS;
    }
    if (d->type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR && name == CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE && type == CUDNN_TYPE_INT64 && requested >= 1) {
        if (count) *count = 1;
        *(int64_t *)out = d->g->workspace;
        return CUDNN_STATUS_SUCCESS;
    }
    fail(api, "attribute %d (type %d) of %s is not faked", (int)name, (int)type, dname(d->type));
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t h, cudnnBackendDescriptor_t plan_p, cudnnBackendDescriptor_t pack_p) {
    const char *api = "cudnnBackendExecute";
    auto r = std::make_shared<run_state>();
    std::vector<mem_use> acc;
    std::string what;
    std::vector<std::pair<size_t, void *>> byvals;
    void *ws = nullptr;
    int64_t wsn = 0;
    {
        lock_t lk(mu);
        if (!handles.count(h)) fail(api, "%p is not a live cuDNN handle", (void *)h);
        if (h->device != current_device()) fail(api, "the handle belongs to device %d but the current device is %d", h->device, current_device());
        desc *plan = live(api, plan_p), *pack = live(api, pack_p);
        if (plan->type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR || !plan->final) fail(api, "the plan is %s, finalized %d", dname(plan->type), (int)plan->final);
        if (pack->type != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR || !pack->final) fail(api, "the variant pack is %s, finalized %d", dname(pack->type), (int)pack->final);
        const attr *uids = get(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS), *ptrs = get(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
        ws = scalar<void *>(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, nullptr);
        r->g = plan->g;
        const graph &g = *r->g;
        what = strf("cudnnBackendExecute(SDPA %s, B %lld, heads %lld, T %lld, hs %lld)", g.name.c_str(), (long long)g.tens[0].n[0], (long long)g.tens[0].n[1],
                    (long long)g.tens[0].n[2], (long long)g.tens[0].n[3]);
        load_library_kernel(api, h->device, what, what); /* an engine's kernel loads at its first execution */
        size_t nt = g.tens.size();
        r->ptr.assign(nt, nullptr);
        r->byval.assign(nt, 0.0);
        r->buf.resize(nt);
        r->written.assign(nt, false);
        std::vector<bool> is_out(nt, false);
        for (const op &o : g.ops) is_out[(size_t)o.y] = true;
        for (size_t i = 0; i < nt; i++) {
            const ten &t = g.tens[i];
            if (t.virt) continue;
            void *p = nullptr;
            for (int64_t k = 0; k < uids->n; k++)
                if (((const int64_t *)uids->bytes.data())[k] == t.uid) p = ((void *const *)ptrs->bytes.data())[k];
            if (!p) fail(api, "%s: tensor %lld %s of the graph has no pointer in the variant pack", what.c_str(), (long long)t.uid, dims(t).c_str());
            if (t.byval) {
                byvals.push_back({i, p});
                continue;
            }
            if ((uintptr_t)p % (uintptr_t)t.align) fail(api, "%s: tensor %lld at %p is not aligned to its %lld bytes", what.c_str(), (long long)t.uid, p, (long long)t.align);
            r->ptr[i] = p;
            r->written[i] = true;
            acc.push_back({p, (size_t)extent(t) * elem_bytes(t.type), is_out[i], is_out[i] ? "an output of the variant pack" : "an input of the variant pack", false});
        }
        if (g.workspace > 0) {
            if (!ws) fail(api, "%s: the plan needs %lld bytes of workspace and the variant pack has none", what.c_str(), (long long)g.workspace);
            acc.push_back({ws, (size_t)g.workspace, true, "the workspace (the plan's CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)", false});
        }
        wsn = g.workspace;
        executions++;
    }
    for (auto &bv : byvals) { /* (is_device_memory takes the fakes' lock) */
        if (is_device_memory(bv.second, nullptr))
            fail(api, "%s: by-value tensor %lld points to device memory (cuDNN reads it on the host)", what.c_str(), (long long)r->g->tens[bv.first].uid);
        r->byval[bv.first] = *(const float *)bv.second; /* read when execute is called, as cuDNN does */
        if (isinf(r->byval[bv.first]) && r->byval[bv.first] < 0 && fake_version() < 91000) r->nan_tiles = true;
    }
    enqueue(api, h->stream, h->device, what, acc, [r, ws, wsn] {
        if (ws)
            for (int64_t i = 0; i < wsn / 4; i++) ((float *)ws)[i] = NAN; /* scratch: whatever the plan left there */
        run_graph(*r);
    });
    return CUDNN_STATUS_SUCCESS;
}

} // extern "C"
