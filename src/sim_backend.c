/* src/sim_backend.c - the simulator's backend: every op's FLOPs and bytes as formulas of its
   shapes, charged to the compute stream's clock */
/* the compute stream runs op: launched by the host, started when both are there */
static void mgt__sim_run_op(mgt_backend *be, const mgt_sim_op *op) {
    mgt__sim_rank *rk = (mgt__sim_rank *)be->impl;
    const mgt_sim_options *o = &rk->w->opt;
    double sec = rk->w->measure_threads ? mgt__sim_measure(rk->w, be->dtype, op) : mgt__sim_price(&o->device, be->dtype, op), start;
    if (o->family_scale[op->family] > 0) sec *= o->family_scale[op->family]; /* calibrated */
    if (o->cost) sec = o->cost(o->cost_user, op, sec);
    if (o->device.host_sync) {
        start = mgt__sim_max(rk->th, mgt__sim_max(rk->tc, rk->tm));
        sec += op->kernels * o->device.launch_us * 1e-6;
        rk->th = rk->tc = rk->tm = start + sec;
    } else {
        rk->th += op->kernels * o->device.launch_us * 1e-6 + op->host_us * 1e-6;
        if (rk->th > rk->tc) rk->st.host_s += rk->th - rk->tc;
        start = mgt__sim_max(rk->tc, rk->th);
        rk->tc = start + sec;
    }
    rk->st.busy_s[op->family] += sec;
    mgt__sim_trace(rk, op->name, start, sec, 0);
}

/* one entry of the cost table (transc: exp and tanh among the flops' elements) */
static void mgt__sim_charge_t(mgt_backend *be, const char *name, int family, double gemm_flops, double gemm_bytes, double flops, double bytes,
                              double transc, double m, double n, double k, int kernels) {
    mgt_sim_op op;
    mgt__sim_rank *rk = (mgt__sim_rank *)be->impl;
    memcpy(op.args, rk->args, sizeof op.args);
    memset(rk->args, 0, sizeof rk->args);
    op.tensor_frac = rk->tensor_frac;
    rk->tensor_frac = 0;
    op.host_us = rk->host_us;
    rk->host_us = 0;
    op.serial_us = rk->serial_us;
    rk->serial_us = 0;
    op.transcendentals = transc;
    op.name = name;
    op.family = family;
    op.gemm_flops = gemm_flops;
    op.gemm_bytes = gemm_bytes;
    op.flops = flops;
    op.bytes = bytes;
    op.m = m;
    op.n = n;
    op.k = k;
    op.kernels = kernels;
    op.rank = ((mgt__sim_rank *)be->impl)->rank;
    mgt__sim_run_op(be, &op);
}
static void mgt__sim_charge(mgt_backend *be, const char *name, int family, double gemm_flops, double gemm_bytes, double flops, double bytes,
                            double m, double n, double k, int kernels) {
    mgt__sim_charge_t(be, name, family, gemm_flops, gemm_bytes, flops, bytes, 0, m, n, k, kernels);
}

/* A GEMM's fraction of the tensor peak by its shape: gemm_frac (large shapes), times d / (d + gemm_dim)
   for d the smaller of its output's sides (tiles and waves: an assumption), times the K curve: cuBLAS
   bf16 on a B200 with M = 128256, N = 4096 (linkedin/Liger-Kernel pull 1380, its cuBLAS column) took
   0.264, 0.396, 0.685 and 1.336 ms at K = 256, 512, 1024 and 2048: 1019, 1359, 1571 and 1611 TFLOP/s, so
   relative to K = 2048 0.633, 0.844, 0.975 and 1 (each output tile's pipeline fill and epilogue weigh
   more when its K loop is short). The only published K sweep of cuBLAS found, on another chip: the same
   curve is assumed on every GPU (linear in log2 K between the points, 1 from 2048, in proportion to K
   below 256). The old model took d as the smallest of M, N and K alike: 685 TFLOP/s at K = 768 on an
   H100, where this says 632 for GPT-2's forward GEMMs. */
static double mgt__sim_gemm_k(double k) {
    static const double ks[4] = {256, 512, 1024, 2048}, r[4] = {1019.0 / 1611, 1359.0 / 1611, 1571.0 / 1611, 1.0};
    int i;
    if (k >= ks[3]) return 1.0;
    if (k <= ks[0]) return r[0] * k / ks[0];
    for (i = 1; k > ks[i]; i++) {}
    return r[i - 1] + (r[i] - r[i - 1]) * log2(k / ks[i - 1]);
}
static double mgt__sim_gemm_frac(const mgt_sim_device *d, double m, double n, double k) {
    double mn = m < n ? m : n;
    if (d->host_sync) return d->gemm_frac; /* the cpu measures its ops */
    return d->gemm_frac * (mn > 0 ? mn / (mn + d->gemm_dim) : 1.0) * mgt__sim_gemm_k(k);
}
/* the op's GEMMs, each (M, N, K) with 2 M N K FLOPs: their FLOP-weighted fraction of the peak
   (mgt_sim_op.tensor_frac), and `lt` cuBLASLt calls among them. A cuBLASLt call builds its descriptors
   and asks the heuristic for an algorithm each time (kernels/backend_cuda.cu, mgt__gemm_lt): host time
   beyond the launch, MGT__SIM_LT_LAUNCHES launches' worth (5 us at the GPUs' 4 us a launch): NVIDIA/raft
   pull 1736 measured a GEMM's host latency at about 10 us with the heuristic and descriptors made per
   call and about 5 us with them cached */
#define MGT__SIM_LT_LAUNCHES 1.25
static void mgt__sim_gemms(mgt_backend *be, int count, const double *mnk, int lt) {
    mgt__sim_rank *rk = (mgt__sim_rank *)be->impl;
    const mgt_sim_device *d = &rk->w->opt.device;
    double flops = 0, t = 0;
    int i;
    for (i = 0; i < count; i++) {
        double f = mnk[3 * i] * mnk[3 * i + 1] * mnk[3 * i + 2];
        flops += f;
        t += f / mgt__sim_gemm_frac(d, mnk[3 * i], mnk[3 * i + 1], mnk[3 * i + 2]);
    }
    rk->tensor_frac = t > 0 ? flops / t : 0;
    rk->host_us = d->host_sync ? 0 : lt * MGT__SIM_LT_LAUNCHES * d->launch_us;
}

/* ---- the backend: every op's FLOPs and bytes as formulas of its shapes (N = B*T rows, e = the
   storage type's bytes, fp32 parameter gradients and statistics), as the CUDA backend runs them. */
#define MGT__SIM_E ((double)be->elt)
#define MGT__SIM_ARGS(a0, a1, a2, a3, a4, a5)                                                                         \
    do {                                                                                                                \
        long long *args_ = ((mgt__sim_rank *)be->impl)->args;                                                          \
        args_[0] = (a0); args_[1] = (a1); args_[2] = (a2); args_[3] = (a3); args_[4] = (a4); args_[5] = (a5);          \
    } while (0)
static void mgt__sim_encoder_forward(mgt_backend *be, void *out, const int *tokens, const void *wte, int vs, int vr, const void *wpe, int B, int T, int C) {
    double N = (double)B * T;
    (void)out; (void)tokens; (void)wte; (void)vs; (void)vr;
    MGT__SIM_ARGS(B, T, C, vs, vr, wpe != NULL);
    mgt__sim_charge(be, "encoder_forward", MGT_SIM_EMBEDDING, 0, 0, N * C, N * 4 + N * C * MGT__SIM_E * (wpe ? 3 : 2), 0, 0, 0, 1);
}
/* the CUDA backend's embedding backward (kernels/encoder.cu): one block of 1024 threads sorts the
   (token, position) keys, a bitonic network of P = the next power of two from N keys, log2 P (log2 P +
   1) / 2 steps, each visiting every index once (a thread per index, 16 indices a thread at P = 16384),
   then a warp per distinct token (at most min(N, vr)) reads and writes its fp32 row once and reads its
   positions' dout; dwpe reads dout again and its own (T,C). The sort runs on one SM alone and is
   priced by its shared-memory traffic: every visited index reads its 8-byte key once and about half
   the keys are written back after a swap, 12 bytes an index at 128 bytes a clock (32 banks of 4 bytes:
   the CUDA C++ Programming Guide, shared memory of compute capability 8.x and 9.x; B200 assumed alike).
   The instructions it issues take less: about 9 an index (an estimate from mgt_bitonic_chunks' loop:
   the index, its partner and the test for all; the loads, the compare and the swap for the half that
   owns a pair) at 128 a clock (4 warp schedulers). 16384 keys on an H100: 105 steps, 88 us, where the
   old price (4 operations a compare-exchange at one SM's share of the vector rate) said 14 us. Its
   passes over the keys in memory are in the bytes. */
#define MGT__SIM_SORT_BYTES 12.0
static void mgt__sim_encoder_backward(mgt_backend *be, float *dwte, float *dwpe, const void *dout, const int *tokens, int vs, int vr, int B, int T, int C) {
    mgt__sim_rank *rk = (mgt__sim_rank *)be->impl;
    const mgt_sim_device *d = &rk->w->opt.device;
    double N = (double)B * T, P = 1, steps, rows = N < vr ? N : (double)vr;
    (void)dwte; (void)dout; (void)tokens; (void)vs;
    while (P < N) P *= 2;
    steps = log2(P) * (log2(P) + 1) / 2;
    MGT__SIM_ARGS(B, T, C, vs, vr, dwpe != NULL);
    if (d->clock_ghz > 0) rk->serial_us = steps * P * MGT__SIM_SORT_BYTES / (128.0 * d->clock_ghz * 1e3);
    mgt__sim_charge(be, "encoder_backward", MGT_SIM_EMBEDDING, 0, 0, N * C + (dwpe ? N * C : 0),
                    N * 4 + 8 * P + N * C * MGT__SIM_E + 8 * rows * C + (dwpe ? N * C * MGT__SIM_E + 8.0 * T * C : 0), 0, 0, 0, dwpe ? 3 : 2);
}
static void mgt__sim_layernorm_forward(mgt_backend *be, void *out, float *mean, float *rstd, const void *inp, const void *w, const void *b, int N, int C) {
    (void)out; (void)mean; (void)rstd; (void)inp; (void)w; (void)b;
    MGT__SIM_ARGS(N, C, 0, 0, 0, 0);
    mgt__sim_charge(be, "layernorm_forward", MGT_SIM_NORM, 0, 0, 8.0 * N * C, 2.0 * N * C * MGT__SIM_E + 8.0 * N + 2.0 * C * MGT__SIM_E, 0, 0, 0, 1);
}
/* one kernel (kernels/layernorm.cu): parts = min(N, 128) blocks of 512 threads, one per SM, so its
   rows stream through at most 128 of the SMs (an H100 has 132: the bandwidth in proportion, an
   assumption that an SM's share of the bandwidth is what its loads can pull); a warp per row reads dout,
   inp and dinp and writes dinp; the block's partial sums of dweight and dbias read its rows of dout and
   inp again (counted as DRAM: a part's rows may have left L2), each part writes 2 C fp32 partials; then
   the last block alone adds the parts' partials (2 C parts floats, from L2) into dweight and dbias: one
   SM, priced at its share of the device's bandwidth (an estimate: 512 threads with a load or two each in
   flight over L2's latency pull about that much), 36 us for C = 768 on an H100 */
static void mgt__sim_layernorm_backward(mgt_backend *be, void *dinp, float *dw, float *db, const void *dout, const void *inp, const void *w, const float *mean,
                                        const float *rstd, int N, int C) {
    mgt__sim_rank *rk = (mgt__sim_rank *)be->impl;
    const mgt_sim_device *d = &rk->w->opt.device;
    double parts = N < 128 ? N : 128, share = d->sms > parts ? d->sms / parts : 1.0;
    (void)dinp; (void)dw; (void)db; (void)dout; (void)inp; (void)w; (void)mean; (void)rstd;
    MGT__SIM_ARGS(N, C, 0, 0, 0, 0);
    if (d->sms > 0) rk->serial_us = (2.0 * parts * C * 4 + 16.0 * C) / (d->mem_gbps * 1e3 * d->mem_frac / d->sms);
    mgt__sim_charge(be, "layernorm_backward", MGT_SIM_NORM, 0, 0, 16.0 * N * C, (6.0 * N * C * MGT__SIM_E + 16.0 * N + 2 * parts * 4.0 * C) * share, 0, 0,
                    0, 1);
}
static void mgt__sim_matmul_forward(mgt_backend *be, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    double n = N, c = C, oc = OC, g[3];
    (void)out; (void)inp; (void)w;
    g[0] = n; g[1] = oc; g[2] = c;
    MGT__SIM_ARGS(N, C, OC, bias != NULL, 0, 0);
    mgt__sim_gemms(be, 1, g, bias != NULL);
    mgt__sim_charge(be, "matmul_forward", MGT_SIM_GEMM, 2 * n * c * oc, (n * c + c * oc + n * oc + (bias ? oc : 0)) * MGT__SIM_E, 0, 0, n, oc, c, 1);
}
/* a linear layer's backward GEMMs (M, N, K): dW (C x OC over the N rows), then dinp (N x C over OC) */
static void mgt__sim_linear_gemms(double *g, double n, double c, double oc) {
    g[0] = c; g[1] = oc; g[2] = n;
    g[3] = n; g[4] = c; g[5] = oc;
}
#define MGT__SIM_BGRAD_BYTES(oc) (12 * (oc)) /* the BGRADB epilogue's fp32 vector written, read and added into dbias */
static void mgt__sim_matmul_backward(mgt_backend *be, void *dinp, float *dw, float *db, const void *dout, const void *inp, const void *w, int N, int C,
                                     int OC) {
    double n = N, c = C, oc = OC, k = (dinp ? 1 : 0) + (dw ? 1 : 0), g[6];
    (void)dout; (void)inp; (void)w;
    if (!dw) db = NULL; /* the bias gradient comes with the weight's */
    mgt__sim_linear_gemms(g, n, c, oc);
    MGT__SIM_ARGS(N, C, OC, dinp != NULL, db != NULL, dw == NULL);
    mgt__sim_gemms(be, (int)k, dw ? g : g + 3, db != NULL); /* g: the dW GEMM, then dinp's */
    mgt__sim_charge(be, "matmul_backward", MGT_SIM_GEMM, k * 2 * n * c * oc,
                    (k * n * oc + c * oc + (dw ? n * c : 0) + (dinp ? n * c : 0)) * MGT__SIM_E + (dw ? 8 * c * oc : 0), db ? n * oc : 0,
                    db ? MGT__SIM_BGRAD_BYTES(oc) : 0, n, oc, c, (int)k + (db ? 1 : 0));
}
/* cuBLASLt's epilogues (kernels/backend_cuda.cu): the GELU forward writes pre and gelu(pre) as the
   GEMM's tiles are stored (no pass over pre); the backward's dX GEMM reads pre and applies gelu'
   (DGELU); a bias gradient is the dW GEMM's BGRADB reduction of dout (no pass over dout), written
   as fp32 and added into dbias by a small kernel */
static void mgt__sim_matmul_gelu_forward(mgt_backend *be, void *out, void *pre, const void *inp, const void *w, const void *bias, int N, int C, int OC) {
    double n = N, c = C, oc = OC, g[3];
    (void)out; (void)pre; (void)inp; (void)w;
    g[0] = n; g[1] = oc; g[2] = c;
    MGT__SIM_ARGS(N, C, OC, bias != NULL, 0, 0);
    mgt__sim_gemms(be, 1, g, 1);
    mgt__sim_charge_t(be, "matmul_gelu_forward", MGT_SIM_GEMM, 2 * n * c * oc, (n * c + c * oc + 2 * n * oc + (bias ? oc : 0)) * MGT__SIM_E, 10 * n * oc,
                      0, n * oc, n, oc, c, 1);
}
static void mgt__sim_matmul_gelu_backward(mgt_backend *be, void *dpre, float *dw, float *db, const void *dout, const void *inp, const void *w,
                                          const void *pre, int N, int C, int OC) {
    double n = N, c = C, oc = OC, g[6];
    (void)dpre; (void)dout; (void)inp; (void)w; (void)pre;
    if (!dw) db = NULL; /* the input gradient only (zero-bubble's B): the DGELU GEMM */
    mgt__sim_linear_gemms(g, n, c, oc);
    MGT__SIM_ARGS(N, C, OC, db != NULL, dw == NULL, 0);
    mgt__sim_gemms(be, dw ? 2 : 1, dw ? g : g + 3, 1 + (db != NULL));
    mgt__sim_charge_t(be, "matmul_gelu_backward", MGT_SIM_GEMM, (dw ? 4 : 2) * n * c * oc,
                      ((dw ? 2 : 1) * n * oc + (dw ? 3 : 2) * n * c + c * oc) * MGT__SIM_E + (dw ? 8 * c * oc : 0), 15 * n * c + (db ? n * oc : 0),
                      db ? MGT__SIM_BGRAD_BYTES(oc) : 0, n * c, n, oc, c, (dw ? 2 : 1) + (db ? 1 : 0));
}
/* Attention on a GPU in bf16/fp16, where cuDNN serves the shape (mgt_cudnn_attention_serves), is
   cuDNN's fused flash attention on tensor cores: the causal half of the scores, 4 hs FLOPs per
   (query, key) pair forward (q.k, p v) and 2.5 times that backward (q.k, dout.v, p^T dout, ds^T q,
   ds k), at a fraction of the tensor peak published for it: NVIDIA's cuDNN 9.19 SDPA training
   benchmark on an H200 (cudnn-frontend benchmark/sdpa_benchmark_training/results/h200_919_only_cudnn;
   an H200's bf16 tensor peak is the H100 SXM's 989 TFLOP/s), causal, bf16: head size 128 at T = 2048,
   forward 484 and backward 370 TFLOP/s (49% and 37%); head size 64 (the GPT-OSS shape, a 1024-key
   window at T = 2048) 310 and 264 TFLOP/s (31% and 27%), both scaled to the sequence's length by
   mgt__sim_cudnn_attention_frac. Between 64 and 128 linear in hs, below 64
   in proportion to hs (a smaller head does less work per tile it loads); the same fractions on other
   devices. Its traffic is the tensors, O(B T C), the fp32 Stats and row sums, and the backward's fp32
   dq accumulator (written and read). Elsewhere, flash attention (kernels/attention.cu) on CUDA cores: each (batch, head)
   computes the causal triangle of 32 x 32 tiles, diagonal tiles whole, W pairs of a query and a key;
   the forward does 2 products of hs per pair (q.k, p v), the backward 7 (q.k, dout.v, p dout, ds q
   in the key-tile kernel; q.k, dout.v, ds k in the query-tile kernel: no atomics, so it recomputes
   the scores), at the vector rate (fp32 FMA, not tensor cores); memory traffic is the tensors
   themselves, O(B T C) plus fp32 per row and head (K and V tiles re-read by every query tile are
   assumed to hit L2; under grouped-query attention KV = NKV hs channels each). On the CPU
   (host_sync) it is the CPU backend's: GEMMs over the whole T x T scores, materialised, with a
   softmax between them. */
static double mgt__sim_attention_pairs(int B, int T, int NH) {
    double tiles = (double)((T + 31) / 32);
    return (double)B * NH * 1024.0 * tiles * (tiles + 1) / 2;
}
static int mgt__sim_on_cpu(mgt_backend *be) { return ((mgt__sim_rank *)be->impl)->w->opt.device.host_sync; }
/* cuDNN's rate falls at short sequences: per query tile it loads Q and writes O (and the backward its
   dq, dk, dv) whatever the keys, and the diagonal tile is half masked. The H200 table (llama3.1 rows:
   causal, bf16, head size 128, batch 1, 64 query heads) has forward 0.142 ms at T = 2048 and 0.465 ms at
   T = 4096, backward 0.464 and 1.450 ms: a time a T^2 + b T through both gives the rate's shape
   T / (T + T0), T0 = b / a = 1165 forward and 1593 backward (the same fit predicts 665 and 551 TFLOP/s
   at T = 8192, where the table has 644 and 541). The published rates are scaled by it from the causal
   length each was measured at: T = 2048 for head size 128; the GPT-OSS rows' 1024-key window at T = 2048
   attends 768 keys per query on average, as a causal T = 1536 does, so 1536 for head size 64. Never above
   the table's longest sequences (688 and 581 TFLOP/s at T = 32768 for 128; 358 and 299 for 64) */
static double mgt__sim_cudnn_attention_frac(double hs, double T, int backward) {
    double t0 = backward ? 1593.0 : 1165.0, g = T / (T + t0);
    double f64 = (backward ? 264.0 : 310.0) / 989 * g / (1536.0 / (1536.0 + t0)), f128 = (backward ? 370.0 : 484.0) / 989 * g / (2048.0 / (2048.0 + t0));
    double m64 = (backward ? 299.0 : 358.0) / 989, m128 = (backward ? 581.0 : 688.0) / 989;
    f64 = f64 < m64 ? f64 : m64;
    f128 = f128 < m128 ? f128 : m128;
    if (hs >= 128) return f128;
    return hs >= 64 ? f64 + (f128 - f64) * (hs - 64) / 64 : f64 * hs / 64;
}
/* cuDNN's attention: the forward's FLOPs on the causal pairs, charged at its fraction of the peak */
static int mgt__sim_cudnn_attention(mgt_backend *be, const char *name, int backward, int B, int T, int C, int NH, int NKV, double bytes, int kernels) {
    int hs = NH > 0 ? C / NH : 0;
    double pairs = (double)B * NH * T * (T + 1.0) / 2;
    if (mgt__sim_on_cpu(be) || !mgt_cudnn_attention_serves(be->dtype, hs, NH, NKV)) return 0;
    ((mgt__sim_rank *)be->impl)->tensor_frac = mgt__sim_cudnn_attention_frac(hs, T, backward);
    mgt__sim_charge_t(be, name, MGT_SIM_ATTENTION, (backward ? 2.5 : 1.0) * 4 * pairs * hs, bytes, 0, 0, 0, T, T, hs, kernels);
    return 1;
}
static void mgt__sim_attention_forward(mgt_backend *be, void *out, void *att, const void *qkv, int B, int T, int C, int NH, int NKV) {
    double N = (double)B * T, W = mgt__sim_attention_pairs(B, T, NH), hs = C / (double)NH, e = MGT__SIM_E, rows = (double)B * NH * T;
    double S = (double)B * NH * T * T, KV = hs * NKV; /* S: the scores, on the CPU */
    (void)out; (void)att; (void)qkv;
    MGT__SIM_ARGS(B, T, C, NH, NKV, 0);
    if (mgt__sim_cudnn_attention(be, "attention_forward", 0, B, T, C, NH, NKV, (2 * N * C + 2 * N * KV) * e + 4 * rows, 1)) return;
    if (mgt__sim_on_cpu(be))
        mgt__sim_charge_t(be, "attention_forward", MGT_SIM_ATTENTION, 4 * N * T * C, (2 * N * C + 2 * N * KV + 2 * S) * e, 5 * S, 2 * S * e, S, T, T,
                          hs, 3);
    else
        mgt__sim_charge_t(be, "attention_forward", MGT_SIM_ATTENTION, 0, 0, 4 * W * hs + 8 * W, (2 * N * C + 2 * N * KV) * e + 4 * rows, W, 0, 0, 0, 1);
}
static void mgt__sim_attention_backward(mgt_backend *be, void *dqkv, const void *dout, const void *qkv, const void *out, const void *att, int B, int T, int C,
                                        int NH, int NKV) {
    double N = (double)B * T, W = mgt__sim_attention_pairs(B, T, NH), hs = C / (double)NH, e = MGT__SIM_E, rows = (double)B * NH * T;
    double S = (double)B * NH * T * T, KV = hs * NKV;
    (void)dqkv; (void)dout; (void)qkv; (void)out; (void)att;
    MGT__SIM_ARGS(B, T, C, NH, NKV, 0);
    /* cuDNN: the row sums (dout . out), the fused kernel (q, k, v, dout, Stats read; dk, dv written; dq
       accumulated in fp32: 4 bytes written and read back per element), dq converted */
    if (mgt__sim_cudnn_attention(be, "attention_backward", 1, B, T, C, NH, NKV, (4 * N * C + 4 * N * KV) * e + 8 * rows + 8 * N * C, 3)) return;
    if (mgt__sim_on_cpu(be))
        mgt__sim_charge(be, "attention_backward", MGT_SIM_ATTENTION, 8 * N * T * C, (4 * N * C + 4 * N * KV + 4 * S) * e, 4 * S, 3 * S * e, T, T, hs, 5);
    else /* the row sums (dout . out), then the two kernels, each reading q, k, v, dout, lse and the row sums; dq, dk, dv written */
        mgt__sim_charge_t(be, "attention_backward", MGT_SIM_ATTENTION, 0, 0, 2 * N * C + 14 * W * hs + 16 * W,
                          (2 * N * C + 2 * (2 * N * C + 2 * N * KV) + N * C + 2 * N * KV) * e + 20 * rows, 2 * W, 0, 0, 0, 3);
}
/* one block of ring attention (context parallelism). On the CPU (host_sync) the CPU backend's: the
   block's scores materialised by GEMMs, the output and log-sum-exp merged in fp32, the backward's dq
   and dk, dv accumulated in fp32. On a GPU the CUDA backend's kernels/ring_attention.cu, attention.cu's
   flash attention on CUDA cores whatever the storage type (cuDNN's fused kernel cannot merge into a
   running output): 32 x 32 tiles per (batch, head), the causal triangle (diagonal tiles whole) or
   every tile of a whole block, W pairs; the forward does 2 products of hs per pair (q.k, p v), one
   kernel, reading q, k and v once (K and V tiles re-read by every query tile are assumed to hit L2)
   and writing o and lse in fp32, reading them too when it merges (not the first block); the backward
   is 3 kernels: the row sums D = dout . out (both read, D written), then one over key tiles (q.k,
   dout.v, p^T dout, ds^T q: 4 products) and one over query tiles (q.k, dout.v, ds k: 3), each reading
   q, dout, k, v, lse and D, adding into dk, dv and into dq in fp32 (read and written) */
static double mgt__sim_attention_part_pairs(int B, int T, int NH, int causal) {
    double tiles = (double)((T + 31) / 32);
    return causal ? mgt__sim_attention_pairs(B, T, NH) : (double)B * NH * 1024.0 * tiles * tiles;
}
static void mgt__sim_attention_part(mgt_backend *be, const char *name, int backward, int B, int T, int C, int NH, int NKV, int causal, int first) {
    double N = (double)B * T, hs = C / (double)NH, e = MGT__SIM_E, rows = (double)B * NH * T, KV = hs * NKV;
    double S = (double)B * NH * T * T, W = mgt__sim_attention_part_pairs(B, T, NH, causal);
    MGT__SIM_ARGS(B, T, C, NH, NKV, causal);
    if (mgt__sim_on_cpu(be)) {
        if (!backward)
            mgt__sim_charge_t(be, name, MGT_SIM_ATTENTION, 4 * N * T * C, (N * C + 2 * N * KV + 2 * S) * e + 8 * N * C, 5 * S, 2 * S * 4, S, T, T, hs, 3);
        else
            mgt__sim_charge(be, name, MGT_SIM_ATTENTION, 8 * N * T * C, (3 * N * C + 2 * N * KV) * e + 8 * (N * C + 2 * N * KV) + 8 * S, 4 * S, 3 * S * 4,
                            T, T, hs, 5);
    } else if (!backward) /* q, k, v read; o and lse written, and read first when merged */
        mgt__sim_charge_t(be, name, MGT_SIM_ATTENTION, 0, 0, 4 * W * hs + 8 * W, (N * C + 2 * N * KV) * e + (first ? 4 : 8) * (N * C + rows), W, 0, 0, 0, 1);
    else /* D: dout and out read, D written; then each of the two kernels reads q, dout, k, v, lse and D; dk, dv and dq read and written */
        mgt__sim_charge_t(be, name, MGT_SIM_ATTENTION, 0, 0, 2 * N * C + 14 * W * hs + 16 * W,
                          (2 * N * C + 2 * (2 * N * C + 2 * N * KV)) * e + 4 * rows + 2 * 8 * rows + 8 * (N * C + 2 * N * KV), 2 * W, 0, 0, 0, 3);
}
static void mgt__sim_attention_part_forward(mgt_backend *be, float *o, float *lse, const void *qkv, const void *kv, int ks, int B, int T, int C, int NH,
                                            int NKV, int causal, int first) {
    (void)o; (void)lse; (void)qkv; (void)kv; (void)ks;
    mgt__sim_attention_part(be, "attention_part_forward", 0, B, T, C, NH, NKV, causal, first);
}
static void mgt__sim_attention_part_backward(mgt_backend *be, float *dq, float *dkv, const void *dout, const void *out, const float *lse, const void *qkv,
                                             const void *kv, int ks, int B, int T, int C, int NH, int NKV, int causal) {
    (void)dq; (void)dkv; (void)dout; (void)out; (void)lse; (void)qkv; (void)kv; (void)ks;
    mgt__sim_attention_part(be, "attention_part_backward", 1, B, T, C, NH, NKV, causal, 0);
}
static void mgt__sim_copy_cols(mgt_backend *be, void *dst, int dt, int ds, const void *src, int st, int ss, size_t rows, int cols) {
    double n = (double)rows * cols;
    (void)dst; (void)ds; (void)src; (void)ss;
    MGT__SIM_ARGS((long long)rows, cols, dt, st, 0, 0);
    mgt__sim_charge(be, "copy_cols", MGT_SIM_ELEMENTWISE, 0, 0, n, n * (double)(mgt__dtype_size(dt) + mgt__dtype_size(st)), 0, 0, 0, 1);
}
/* the Llama family's ops: memory-bound, one kernel each (the CUDA backend's rmsnorm.cu, rope.cu, swiglu.cu) */
static void mgt__sim_rmsnorm_forward(mgt_backend *be, void *out, float *rstd, const void *inp, const void *w, float eps, int N, int C) {
    (void)out; (void)rstd; (void)inp; (void)w; (void)eps;
    MGT__SIM_ARGS(N, C, 0, 0, 0, 0);
    mgt__sim_charge(be, "rmsnorm_forward", MGT_SIM_NORM, 0, 0, 4.0 * N * C, 2.0 * N * C * MGT__SIM_E + 4.0 * N + (double)C * MGT__SIM_E, 0, 0, 0, 1);
}
static void mgt__sim_rmsnorm_backward(mgt_backend *be, void *dinp, float *dw, const void *dout, const void *inp, const void *w, const float *rstd, int N,
                                      int C) {
    (void)dinp; (void)dw; (void)dout; (void)inp; (void)w; (void)rstd;
    MGT__SIM_ARGS(N, C, 0, 0, 0, 0);
    mgt__sim_charge(be, "rmsnorm_backward", MGT_SIM_NORM, 0, 0, 10.0 * N * C, 4.0 * N * C * MGT__SIM_E + 4.0 * N + 8.0 * C, 0, 0, 0, 2);
}
static void mgt__sim_rope(mgt_backend *be, const char *name, int B, int T, int NH, int NKV, int hs) {
    double N = (double)B * T, n = N * (NH + NKV) * hs; /* the q and k channels, turned in place */
    MGT__SIM_ARGS(B, T, NH, NKV, hs, 0);
    mgt__sim_charge_t(be, name, MGT_SIM_ELEMENTWISE, 0, 0, 3.0 * n, 2.0 * n * MGT__SIM_E, N * hs, 0, 0, 0, 1);
}
static void mgt__sim_rope_forward(mgt_backend *be, void *qkv, int B, int T, int NH, int NKV, int hs, float theta, int pos0) {
    (void)qkv; (void)theta; (void)pos0;
    mgt__sim_rope(be, "rope_forward", B, T, NH, NKV, hs);
}
static void mgt__sim_rope_backward(mgt_backend *be, void *dqkv, int B, int T, int NH, int NKV, int hs, float theta, int pos0) {
    (void)dqkv; (void)theta; (void)pos0;
    mgt__sim_rope(be, "rope_backward", B, T, NH, NKV, hs);
}
static void mgt__sim_swiglu_forward(mgt_backend *be, void *out, const void *inp, int N, int H) {
    double n = (double)N * H;
    (void)out; (void)inp;
    MGT__SIM_ARGS(N, H, 0, 0, 0, 0);
    mgt__sim_charge_t(be, "swiglu_forward", MGT_SIM_ELEMENTWISE, 0, 0, 5.0 * n, 3.0 * n * MGT__SIM_E, n, 0, 0, 0, 1);
}
static void mgt__sim_swiglu_backward(mgt_backend *be, void *dinp, const void *inp, const void *dout, int N, int H) {
    double n = (double)N * H;
    (void)dinp; (void)inp; (void)dout;
    MGT__SIM_ARGS(N, H, 0, 0, 0, 0);
    mgt__sim_charge_t(be, "swiglu_backward", MGT_SIM_ELEMENTWISE, 0, 0, 10.0 * n, 5.0 * n * MGT__SIM_E, n, 0, 0, 0, 1);
}
static void mgt__sim_gelu_forward(mgt_backend *be, void *out, const void *inp, size_t n) {
    (void)out; (void)inp;
    MGT__SIM_ARGS((long long)n, 0, 0, 0, 0, 0);
    mgt__sim_charge_t(be, "gelu_forward", MGT_SIM_ELEMENTWISE, 0, 0, 10.0 * (double)n, 2.0 * (double)n * MGT__SIM_E, (double)n, 0, 0, 0, 1);
}
static void mgt__sim_gelu_backward(mgt_backend *be, void *dinp, const void *inp, const void *dout, size_t n) {
    (void)dinp; (void)inp; (void)dout;
    MGT__SIM_ARGS((long long)n, 0, 0, 0, 0, 0);
    mgt__sim_charge_t(be, "gelu_backward", MGT_SIM_ELEMENTWISE, 0, 0, 15.0 * (double)n, 3.0 * (double)n * MGT__SIM_E, (double)n, 0, 0, 0, 1);
}
static void mgt__sim_add_inplace(mgt_backend *be, float *y, const float *x, size_t n) {
    (void)y; (void)x;
    MGT__SIM_ARGS((long long)n, 0, 0, 0, 0, 0);
    mgt__sim_charge(be, "add_inplace", MGT_SIM_ELEMENTWISE, 0, 0, (double)n, 12.0 * (double)n, 0, 0, 0, 1);
}
static void mgt__sim_bias_residual(mgt_backend *be, void *out, const void *res, const void *bias, int N, int C) {
    (void)out; (void)res;
    MGT__SIM_ARGS(N, C, bias != NULL, 0, 0, 0);
    mgt__sim_charge(be, "bias_residual", MGT_SIM_ELEMENTWISE, 0, 0, (bias ? 2.0 : 1.0) * N * C, (3.0 * N * C + (bias ? C : 0)) * MGT__SIM_E, 0, 0, 0, 1);
}
/* one kernel: reads res and residual, writes res and out (the LayerNorm reads res back from L1) */
static void mgt__sim_residual_layernorm_forward(mgt_backend *be, void *res, void *out, float *mean, float *rstd, const void *residual, const void *rb,
                                                const void *w, const void *b, int N, int C) {
    (void)res; (void)out; (void)mean; (void)rstd; (void)residual; (void)rb; (void)w; (void)b;
    MGT__SIM_ARGS(N, C, rb != NULL, 0, 0, 0);
    mgt__sim_charge(be, "residual_layernorm_forward", MGT_SIM_NORM, 0, 0, 10.0 * N * C, 4.0 * N * C * MGT__SIM_E + 8.0 * N + 3.0 * C * MGT__SIM_E, 0, 0, 0,
                    1);
}
static void mgt__sim_bias_backward(mgt_backend *be, float *dbias, const void *dout, int N, int C) {
    (void)dbias; (void)dout;
    MGT__SIM_ARGS(N, C, 0, 0, 0, 0);
    mgt__sim_charge(be, "bias_backward", MGT_SIM_ELEMENTWISE, 0, 0, (double)N * C, (double)N * C * MGT__SIM_E + 8.0 * C, 0, 0, 0, 1);
}
static void mgt__sim_xent_partial(mgt_backend *be, float *part, void *logits, const int *targets, int N, int vs, int Vl, int V) {
    (void)part; (void)logits; (void)targets; (void)vs; (void)V;
    /* the fused classifier: one read of the logits (an online max and sum), nothing written but the partials */
    MGT__SIM_ARGS(N, vs, Vl, V, 0, 0);
    mgt__sim_charge_t(be, "xent_partial", MGT_SIM_LOSS, 0, 0, 4.0 * N * Vl, (double)N * Vl * MGT__SIM_E + 16.0 * N, (double)N * Vl, 0, 0, 0, 1);
}
static void mgt__sim_xent_finish(mgt_backend *be, double *losses, void *logits, const float *parts, int tp, const int *targets, int N, int vs, int Vl, int V,
                                 float grad_scale) {
    (void)losses; (void)logits; (void)parts; (void)targets; (void)vs; (void)V;
    /* the gradient exp(l - M) / S - onehot: one read and one write of the logits, an exp each */
    MGT__SIM_ARGS(N, vs, Vl, V, tp, grad_scale != 0);
    mgt__sim_charge_t(be, "xent_finish", MGT_SIM_LOSS, 0, 0, grad_scale != 0 ? 3.0 * N * Vl : 4.0 * N * tp,
                      (grad_scale != 0 ? 2.0 * N * Vl * MGT__SIM_E : 0) + 12.0 * N * tp + 12.0 * N, grad_scale != 0 ? (double)N * Vl : 0, 0, 0, 0, 1);
}
static double mgt__sim_sum_squares(mgt_backend *be, const float *x, size_t n) {
    mgt__sim_rank *rk = (mgt__sim_rank *)be->impl;
    (void)x;
    MGT__SIM_ARGS((long long)n, 0, 0, 0, 0, 0);
    mgt__sim_charge(be, "sum_squares", MGT_SIM_OPTIMIZER, 0, 0, 2.0 * (double)n, 4.0 * (double)n, 0, 0, 0, 1);
    rk->th = mgt__sim_max(rk->th, rk->tc); /* the host reads the result */
    return 0.0;
}
static void mgt__sim_adamw(mgt_backend *be, float *param, void *copy, const float *grad, float *m, float *v, size_t n, float lr, float b1, float b2, float eps,
                           float wd, float gs, float bc1, float bc2) {
    (void)param; (void)grad; (void)m; (void)v; (void)lr; (void)b1; (void)b2; (void)eps; (void)wd; (void)gs; (void)bc1; (void)bc2;
    MGT__SIM_ARGS((long long)n, copy != NULL, 0, 0, 0, 0);
    mgt__sim_charge(be, "adamw", MGT_SIM_OPTIMIZER, 0, 0, 15.0 * (double)n, (28.0 + (copy ? MGT__SIM_E : 0)) * (double)n, 0, 0, 0, 1);
}
/* one kernel over every tensor of the call */
static void mgt__sim_adamw_many(mgt_backend *be, int count, float *const *param, void *const *copy, const float *const *grad, float *const *m,
                                float *const *v, const size_t *n, const float *wd, float lr, float b1, float b2, float eps, float gs, float bc1, float bc2) {
    double elements = 0, bytes = 0;
    int k;
    (void)param; (void)grad; (void)m; (void)v; (void)wd; (void)lr; (void)b1; (void)b2; (void)eps; (void)gs; (void)bc1; (void)bc2;
    for (k = 0; k < count; k++) {
        elements += (double)n[k];
        bytes += (28.0 + (copy[k] ? MGT__SIM_E : 0)) * (double)n[k];
    }
    MGT__SIM_ARGS((long long)elements, count > 0 && copy[0] != NULL, 0, 0, 0, 0); /* on the cpu, run as one AdamW of all the elements */
    mgt__sim_charge(be, "adamw", MGT_SIM_OPTIMIZER, 0, 0, 15.0 * elements, bytes, 0, 0, 0, 1);
}
static void mgt__sim_scale(mgt_backend *be, float *x, float f, size_t n) {
    (void)x; (void)f;
    MGT__SIM_ARGS((long long)n, 0, 0, 0, 0, 0);
    mgt__sim_charge(be, "scale", MGT_SIM_ELEMENTWISE, 0, 0, (double)n, 8.0 * (double)n, 0, 0, 0, 1);
}
static void mgt__sim_zero(mgt_backend *be, void *x, size_t bytes) {
    (void)x;
    MGT__SIM_ARGS((long long)bytes, 0, 0, 0, 0, 0);
    mgt__sim_charge(be, "zero", MGT_SIM_ELEMENTWISE, 0, 0, 0, (double)bytes, 0, 0, 0, 1);
}
static void mgt__sim_cast(mgt_backend *be, void *dst, int dt, const void *src, int st, size_t n) {
    (void)dst; (void)src;
    MGT__SIM_ARGS((long long)n, dt, st, 0, 0, 0);
    mgt__sim_charge(be, "cast", MGT_SIM_ELEMENTWISE, 0, 0, (double)n, (double)n * (double)(mgt__dtype_size(dt) + mgt__dtype_size(st)), 0, 0, 0, 1);
}
#undef MGT__SIM_E
#undef MGT__SIM_ARGS

/* memory: counted, and answered with an address that is never mapped */
static void *mgt__sim_alloc(mgt_backend *be, size_t bytes, int category) {
    mgt__sim_rank *rk = (mgt__sim_rank *)be->impl;
    mgt__sim_world *w = rk->w;
    size_t at;
    if (category < 0 || category >= MGT_MEM_COUNT) return NULL;
    pthread_mutex_lock(&w->mu);
    bytes = (bytes + 255) & ~(size_t)255;
    if (w->bump + bytes > w->span) w->bump = 0; /* addresses are reused: nothing is ever stored */
    at = bytes > w->span ? 0 : w->bump;
    w->bump += bytes > w->span ? 0 : bytes;
    pthread_mutex_unlock(&w->mu);
    be->mem_current[category] += bytes;
    if (be->mem_current[category] > be->mem_peak[category]) be->mem_peak[category] = be->mem_current[category];
    return w->base + at;
}
static void mgt__sim_free(mgt_backend *be, void *ptr, size_t bytes, int category) {
    if (!ptr || category < 0 || category >= MGT_MEM_COUNT) return;
    bytes = (bytes + 255) & ~(size_t)255;
    be->mem_current[category] -= bytes < be->mem_current[category] ? bytes : be->mem_current[category];
}
static int mgt__sim_is_device(const mgt__sim_world *w, const void *p) {
    return (const char *)p >= w->base && (const char *)p < w->base + w->span;
}
/* seconds of a copy between host and device memory (PCIe; memory on the CPU), as the cost function says */
static double mgt__sim_copy_cost(mgt__sim_rank *rk, const char *name, size_t bytes) {
    const mgt_sim_options *o = &rk->w->opt;
    mgt_sim_op op;
    double sec = (double)bytes / (o->device.host_sync ? o->device.mem_gbps * 1e9 : MGT__SIM_PCIE);
    memset(&op, 0, sizeof op);
    op.name = name;
    op.family = MGT_SIM_ELEMENTWISE;
    op.bytes = (double)bytes;
    op.kernels = 1;
    op.rank = rk->rank;
    return o->cost ? o->cost(o->cost_user, &op, sec) : sec;
}
static void mgt__sim_upload(mgt_backend *be, void *dst, const void *src, size_t bytes) {
    mgt__sim_rank *rk = (mgt__sim_rank *)be->impl;
    double sec = mgt__sim_copy_cost(rk, "upload", bytes);
    (void)dst; (void)src;
    if (rk->w->opt.device.host_sync) { rk->th = rk->tc = rk->tm = mgt__sim_max(rk->th, rk->tc) + sec; return; }
    rk->th += rk->w->opt.device.launch_us * 1e-6;
    rk->tc = mgt__sim_max(rk->tc, rk->th) + sec;
}
static void mgt__sim_download(mgt_backend *be, void *host_dst, const void *src, size_t bytes) {
    mgt__sim_rank *rk = (mgt__sim_rank *)be->impl;
    (void)src;
    if (host_dst && !mgt__sim_is_device(rk->w, host_dst)) memset(host_dst, 0, bytes); /* the host reads zeros */
    rk->th = mgt__sim_max(rk->th, rk->tc) + mgt__sim_copy_cost(rk, "download", bytes);
    if (rk->w->opt.device.host_sync) rk->tc = rk->tm = rk->th;
}
static void mgt__sim_finish(mgt_backend *be) {
    mgt__sim_rank *rk = (mgt__sim_rank *)be->impl;
    double t = mgt__sim_max(rk->th, mgt__sim_max(rk->tc, rk->tm));
    rk->th = rk->tc = rk->tm = t;
}

