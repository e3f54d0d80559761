/* test_cudnn_graphs.cpp - kernels/attention_cudnn.cpp's SDPA graphs against the real cuDNN 9 library
   (libcudnn.so.9 from the CUDA toolkit), on a machine without a GPU.

   cuDNN validates a backend descriptor on the host when it is finalized: attribute types, required
   attributes, tensor dimensions and strides, what each operation accepts, and an operation graph as a
   whole; none of that needs a device (a handle and the heuristic's engine choice do). This test
   builds the forward and backward graphs of every attention shape the presets use (bf16 and fp16,
   multi-head and grouped-query, head sizes 64 and 128, T = 1024 and an odd T) and requires every
   descriptor, both operation graphs and their engine heuristics to finalize in the real library. A
   wrong matmul is refused there too (the control: the library does check). What it cannot show
   without a GPU: that the heuristic offers a fused engine for these graphs (it offers none without
   device properties; the count is printed). Skips (77) where cuDNN is not installed. */
#include "kernels/attention_cudnn.cpp" /* the graph builder itself: its static helpers */
#include <stdio.h>                     /* defines: printf */

static int checks, failures;
#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        checks++;                                                           \
        if (!(cond)) {                                                      \
            failures++;                                                     \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);          \
            printf(__VA_ARGS__);                                            \
            printf("\n");                                                   \
        }                                                                   \
    } while (0)

struct graph_case {
    const char *what;
    int dtype, B, T, NH, NKV, hs;
};

/* the engine configurations the heuristic offers (0 without a GPU) */
static int64_t configurations(builder *b, desc_t heur) {
    desc_t cfg = make(b, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    int64_t n = -1;
    if (heur && cfg) cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &cfg);
    return n;
}

static void graphs(const graph_case &c) {
    mgt_cudnn_attn *a = new mgt_cudnn_attn(); /* no handle: cudnnCreate needs a GPU */
    builder *b = &a->b;
    b->io = c.dtype == MGT_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
    b->next_uid = UID_VIRTUAL;
    shape s = {c.B, c.T, c.NH, c.NKV, c.hs, (int64_t)(c.NH + 2 * c.NKV) * c.hs};
    forward_graph(b, s);
    size_t fwd_ops = b->ops.size();
    int64_t nf = configurations(b, heuristic(b, "forward"));
    backward_graph(b, s);
    size_t bwd_ops = b->ops.size();
    int64_t nb = configurations(b, heuristic(b, "backward"));
    CHECK(!b->failed, "%s (%s, B %d, T %d, NH %d, NKV %d, hs %d): %s", c.what, c.dtype == MGT_BF16 ? "bf16" : "fp16", c.B, c.T, c.NH, c.NKV, c.hs, b->why);
    if (!b->failed)
        printf("ok   %-30s %s B %d T %d NH %d NKV %d hs %d: %zu + %zu operations, both graphs and heuristics finalized by cuDNN %zu "
               "(engine configurations offered without a GPU: %lld, %lld)\n",
               c.what, c.dtype == MGT_BF16 ? "bf16" : "fp16", c.B, c.T, c.NH, c.NKV, c.hs, fwd_ops, bwd_ops, cudnnGetVersion(), (long long)nf,
               (long long)nb);
    mgt_cudnn_attn_destroy(a);
}

int main() {
    if (cudnnGetVersion() / 10000 != 9) {
        printf("SKIP the cuDNN found is %zu, not 9\n", cudnnGetVersion());
        return 77;
    }
    static const graph_case cases[] = {
        {"GPT-2 124M", MGT_BF16, 16, 1024, 12, 12, 64},     {"GPT-2 350M", MGT_BF16, 16, 1024, 16, 16, 64},
        {"GPT-2 1.5B", MGT_BF16, 8, 1024, 25, 25, 64}, {"Llama 3.2 1B", MGT_BF16, 4, 2048, 32, 8, 64},
        {"Llama 3 8B, tp 8", MGT_BF16, 2, 4096, 4, 1, 128}, {"odd T, fp16", MGT_F16, 3, 77, 4, 2, 32},
    };
    for (const graph_case &c : cases) graphs(c);
    { /* the control: a matmul whose inner dimensions disagree is refused by the library itself */
        builder b = {};
        b.next_uid = UID_VIRTUAL;
        desc_t x = tensor(&b, 1, CUDNN_DATA_BFLOAT16, dense(1, 1, 4, 8), false), y = tensor(&b, 2, CUDNN_DATA_BFLOAT16, dense(1, 1, 16, 8), false);
        desc_t z = tensor(&b, 3, CUDNN_DATA_FLOAT, dense(1, 1, 4, 8), false);
        matmul(&b, x, y, z);
        CHECK(b.failed, "a (4 x 8) x (16 x 8) matmul was finalized");
        if (b.failed) printf("ok   a (4 x 8) x (16 x 8) matmul is refused: %s\n", b.why);
        for (size_t i = b.made.size(); i-- > 0;) cudnnBackendDestroyDescriptor(b.made[i]);
    }
    printf("%d checks, %d failed\n", checks, failures);
    return failures != 0;
}
