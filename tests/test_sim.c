/* The step simulator (mgt.h section 3d) where its schedule is exact: the bubble of a pipeline of
   p equal stages and m micro-batches is (p-1)/(m+p-1) under GPipe and 1F1B; a collective cannot
   complete before its last member issues it; a deferred DP bucket (and a ZeRO-2 reduce-scatter)
   overlaps the backward of later blocks; and a 175B-parameter model on 1024 simulated GPUs runs in
   seconds with bounded memory. Ops are priced by the test where the figure must be exact (only the
   blocks' GEMMs and attention cost time, links are free), by the H100 model elsewhere. */
#define MGT_IMPLEMENTATION
#include "mgt.h"
#include <stdio.h>
#include <string.h>
#include <math.h>

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

static void set(mgt_config *cfg, const char *kv) {
    if (mgt_config_set(cfg, kv) != MGT_OK) { printf("FAIL --set %s: %s\n", kv, mgt_last_error()); failures++; }
}

static int llama; /* 1: small() is a Llama-style model (RMSNorm, RoPE, SwiGLU, 4 query heads on 2 key/value heads, no biases, untied head) */
static int sp;    /* 1: small() with sequence parallelism (parallel.sp = 1), where tp > 1 */

/* a small model whose head GEMM (Vl = 256 columns) differs from every block GEMM (C = 96, 3C, 4C) */
static void small(mgt_config *cfg, int dp, int tp, int pp, int micro_steps, const char *sched) {
    char kv[64];
    mgt_config_init(cfg);
    set(cfg, "model.n_layer=8");
    set(cfg, "model.n_head=4");
    set(cfg, "model.d_model=96");
    if (llama) {
        set(cfg, "model.n_kv_head=2"); set(cfg, "model.norm=rmsnorm"); set(cfg, "model.positions=rope"); set(cfg, "model.mlp=swiglu");
        set(cfg, "model.d_ff=256"); set(cfg, "model.bias=0"); set(cfg, "model.tied_head=0");
    }
    set(cfg, "model.seq_len=32");
    set(cfg, "model.vocab_size=256");
    set(cfg, "train.micro_batch=2");
    set(cfg, "data.train=");
    set(cfg, "data.val=");
    snprintf(kv, sizeof kv, "train.global_batch=%d", 2 * dp * micro_steps); set(cfg, kv);
    snprintf(kv, sizeof kv, "parallel.dp=%d", dp); set(cfg, kv);
    snprintf(kv, sizeof kv, "parallel.tp=%d", tp); set(cfg, kv);
    snprintf(kv, sizeof kv, "parallel.pp=%d", pp); set(cfg, kv);
    snprintf(kv, sizeof kv, "parallel.pp_schedule=%s", sched); set(cfg, kv);
    if (sp && tp > 1) set(cfg, "parallel.sp=1");
}

/* free links, no launches: only what the cost function says takes time */
static void ideal(mgt_sim_options *o) {
    mgt_sim_options_init(o);
    o->device.launch_us = 0;
    o->device.intra_gbps = o->device.inter_gbps = 1e12;
    o->device.intra_lat_us = o->device.inter_lat_us = o->device.step_lat_us = 0;
}

/* 1 ms for each block GEMM and attention call (a block: 5 forward, 5 backward), nothing else;
   rank `slow` (user) twice that */
static double block_cost(void *user, const mgt_sim_op *op, double modelled) {
    int slow = user ? *(const int *)user : -1;
    (void)modelled;
    if ((op->family == MGT_SIM_GEMM && op->n != 256) || op->family == MGT_SIM_ATTENTION) return op->rank == slow ? 2e-3 : 1e-3;
    return 0;
}

/* as block_cost, but a backward op 2 ms: a block's backward is twice its forward, as on GPUs */
static double block_cost_2b(void *user, const mgt_sim_op *op, double modelled) {
    double c = block_cost(user, op, modelled);
    return strstr(op->name, "backward") ? 2 * c : c;
}
/* v > 1: interleaved 1F1B over v chunks per stage (parallel.pp_virtual), with a backward twice a
   forward (the costs its order of communication assumes): the bubble is v times smaller, (p-1)/v
   of a micro-batch's forward and backward (Narayanan et al. 2021, section 2.2) */
static void bubble_v(int p, int m, const char *sched, int v) {
    mgt_config cfg;
    mgt_sim_options o;
    mgt_sim_result res;
    double tf, tb, expect;
    int i;
    char kv[64];
    small(&cfg, 1, 1, p, m, sched);
    snprintf(kv, sizeof kv, "parallel.pp_virtual=%d", v); set(&cfg, kv);
    ideal(&o);
    o.cost = v > 1 ? block_cost_2b : block_cost;
    if (mgt_sim_run(&cfg, &o, &res) != MGT_OK) { printf("FAIL bubble p=%d m=%d %s: %s\n", p, m, sched, mgt_last_error()); failures++; return; }
    tf = 8 / p * 5e-3; /* a stage's forward of one micro-batch; its backward takes as long (v > 1: twice as long) */
    tb = v > 1 ? 2 * tf : tf;
    expect = (m + (double)(p - 1) / v) * (tf + tb);
    CHECK(fabs(res.step_s - expect) < 1e-9, "%s p=%d m=%d v=%d: step %.6f s, expected (m+(p-1)/v)(tf+tb) = %.6f s", sched, p, m, v, res.step_s, expect);
    for (i = 0; i < res.world; i++) {
        double idle = (res.ranks[i].step_s - res.ranks[i].compute_s) / res.ranks[i].step_s, want = (double)(p - 1) / v / (m + (double)(p - 1) / v);
        CHECK(fabs(res.ranks[i].compute_s - m * (tf + tb)) < 1e-9, "%s p=%d m=%d v=%d rank %d: compute %.6f s, expected %.6f", sched, p, m, v, i,
              res.ranks[i].compute_s, m * (tf + tb));
        CHECK(fabs(idle - want) < 1e-9, "%s p=%d m=%d v=%d rank %d: bubble %.6f, expected ((p-1)/v)/(m+(p-1)/v) = %.6f", sched, p, m, v, i, idle, want);
    }
    printf("bubble %-5s p=%d m=%2d v=%d: step %.1f ms, bubble %.4f (expected %.4f)\n", sched, p, m, v, res.step_s * 1e3,
           (res.ranks[0].step_s - res.ranks[0].compute_s) / res.ranks[0].step_s, (double)(p - 1) / v / (m + (double)(p - 1) / v));
    mgt_sim_result_free(&res);
}
static void bubble(int p, int m, const char *sched) { bubble_v(p, m, sched, 1); }

/* the blocks' GEMMs priced by their FLOPs (1 s per 1e12), nothing else, but a weight-gradient GEMM at
   3/4 of its FLOPs: a block's forward, input-gradient pass (B) and weight-gradient pass (W) then cost
   4 : 4 : 3, the costs zb's order comes from (src/pipeline.c), and 1F1B's whole backward 7. The
   expected steps, in quarters of a stage's forward, are those of the same rules worked
   independently (a Python model of the unit-cost run: pp 2 M 8: 93, pp 4 M 8: 105, pp 4 M 16: 193,
   pp 4 M 3: 53), and 1F1B's (M + p - 1) 11 */
static double gemm_flops_cost(void *user, const mgt_sim_op *op, double modelled) {
    double f;
    (void)user; (void)modelled;
    if (op->family != MGT_SIM_GEMM || op->n == 256) return 0;
    f = op->gemm_flops * 1e-12;
    if (!strcmp(op->name, "matmul_backward") && !op->args[3]) return 0.75 * f;                  /* W alone */
    if (!strcmp(op->name, "matmul_backward") && !op->args[5]) return 0.875 * f;                 /* joint: dinp and dW */
    if (!strcmp(op->name, "matmul_gelu_backward") && !op->args[4]) return 0.875 * f;            /* joint */
    return f;
}
static void bubble_zb(int p, int m, double zb_units) {
    static const char *scheds[2] = {"zb", "1f1b"};
    double step[2] = {0, 0}, tf = 8 / p * 24.0 * 64 * 96 * 96 * 1e-12 / 4; /* a quarter of a stage's forward: 8/p blocks of 2 N 12 C^2 FLOPs, N = 64, C = 96 */
    int k;
    for (k = 0; k < 2; k++) {
        mgt_config cfg;
        mgt_sim_options o;
        mgt_sim_result res;
        double units = k == 0 ? zb_units : 11.0 * (m + p - 1), idle;
        small(&cfg, 1, 1, p, m, scheds[k]);
        ideal(&o);
        o.cost = gemm_flops_cost;
        if (mgt_sim_run(&cfg, &o, &res) != MGT_OK) { printf("FAIL bubble %s p=%d m=%d: %s\n", scheds[k], p, m, mgt_last_error()); failures++; return; }
        step[k] = res.step_s;
        idle = (res.ranks[0].step_s - res.ranks[0].compute_s) / res.ranks[0].step_s;
        CHECK(fabs(res.step_s / (units * tf) - 1) < 1e-9, "%s p=%d m=%d: step %.9f s, expected %.0f quarters of a forward = %.9f s", scheds[k], p, m,
              res.step_s, units, units * tf);
        CHECK(fabs(idle - (units - 11.0 * m) / units) < 1e-9, "%s p=%d m=%d rank 0: bubble %.6f, expected %.6f", scheds[k], p, m, idle,
              (units - 11.0 * m) / units);
        printf("bubble %-5s p=%d m=%2d (F : B : W = 4 : 4 : 3): step %.3f ms, stage 0's bubble %.4f (expected %.4f)\n", scheds[k], p, m, res.step_s * 1e3,
               idle, (units - 11.0 * m) / units);
        mgt_sim_result_free(&res);
    }
    CHECK(step[0] < step[1], "zb p=%d m=%d: step %.6f s, not below 1f1b's %.6f s", p, m, step[0], step[1]);
}

/* dp 2 with rank 1 twice as slow: rank 0's all-reduces wait for it, so both end together */
static void last_member(void) {
    mgt_config cfg;
    mgt_sim_options o;
    mgt_sim_result res;
    int slow = 1;
    small(&cfg, 2, 1, 1, 2, "1f1b");
    ideal(&o);
    o.cost = block_cost;
    o.cost_user = &slow;
    if (mgt_sim_run(&cfg, &o, &res) != MGT_OK) { printf("FAIL last member: %s\n", mgt_last_error()); failures++; return; }
    CHECK(fabs(res.ranks[1].compute_s - 2 * res.ranks[0].compute_s) < 1e-9, "the slow rank computes %.6f s, the other %.6f s", res.ranks[1].compute_s,
          res.ranks[0].compute_s);
    CHECK(res.ranks[0].step_s >= res.ranks[1].compute_s - 1e-12, "rank 0 ended at %.6f s, before its peer issued the last all-reduce at %.6f s",
          res.ranks[0].step_s, res.ranks[1].compute_s);
    CHECK(fabs(res.ranks[0].exposed_s[MGT_COLL_ALL_REDUCE] - (res.ranks[1].compute_s - res.ranks[0].compute_s)) < 1e-9,
          "rank 0 waited %.6f s in all-reduces, expected its peer's extra %.6f s", res.ranks[0].exposed_s[MGT_COLL_ALL_REDUCE],
          res.ranks[1].compute_s - res.ranks[0].compute_s);
    printf("last member: rank 0 computes %.1f ms, waits %.1f ms for rank 1 in all-reduce, ends at %.1f ms with it\n", res.ranks[0].compute_s * 1e3,
           res.ranks[0].exposed_s[MGT_COLL_ALL_REDUCE] * 1e3, res.ranks[0].step_s * 1e3);
    mgt_sim_result_free(&res);
}

/* GPT-2 124M shapes on 2 H100s between nodes (slow links): the buckets of later blocks reduce while
   earlier blocks compute backward, so the step is shorter than compute plus communication */
static void overlap(int zero) {
    mgt_config cfg;
    mgt_sim_options o;
    mgt_sim_result res;
    char kv[64];
    double comm = 0;
    int c, coll = zero ? MGT_COLL_REDUCE_SCATTER : MGT_COLL_ALL_REDUCE;
    mgt_config_init(&cfg);
    set(&cfg, "model.n_layer=12"); set(&cfg, "model.n_head=12"); set(&cfg, "model.d_model=768"); set(&cfg, "model.seq_len=1024");
    set(&cfg, "model.vocab_size=50257"); set(&cfg, "train.micro_batch=8"); set(&cfg, "train.global_batch=16"); set(&cfg, "parallel.dp=2");
    set(&cfg, "precision.dtype=bf16"); set(&cfg, "data.train="); set(&cfg, "data.val=");
    snprintf(kv, sizeof kv, "parallel.zero=%d", zero); set(&cfg, kv);
    mgt_sim_options_init(&o);
    o.gpus_per_node = 1;
    if (mgt_sim_run(&cfg, &o, &res) != MGT_OK) { printf("FAIL overlap: %s\n", mgt_last_error()); failures++; return; }
    for (c = 0; c < MGT_COLL_COUNT; c++) comm += res.ranks[0].comm_s[c];
    CHECK(res.step_s < res.ranks[0].compute_s + comm - 1e-6, "zero %d: step %.3f ms is not below compute %.3f + communication %.3f ms", zero, res.step_s * 1e3,
          res.ranks[0].compute_s * 1e3, comm * 1e3);
    CHECK(res.ranks[0].exposed_s[coll] < 0.9 * res.ranks[0].comm_s[coll], "zero %d: %s exposed %.3f of %.3f ms: no overlap", zero, mgt_coll_name(coll),
          res.ranks[0].exposed_s[coll] * 1e3, res.ranks[0].comm_s[coll] * 1e3);
    printf("overlap zero %d: step %.2f ms < compute %.2f + communication %.2f ms (%s %.2f ms, %.2f exposed)\n", zero, res.step_s * 1e3,
           res.ranks[0].compute_s * 1e3, comm * 1e3, mgt_coll_name(coll), res.ranks[0].comm_s[coll] * 1e3, res.ranks[0].exposed_s[coll] * 1e3);
    mgt_sim_result_free(&res);
}

/* GPT-3 175B (96 x 12288, 2048 tokens) on 1024 H100s: tp 8 x pp 16 x dp 8 */
static long peak_rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) kib = atol(line + 6);
    if (f) fclose(f);
    return kib;
}
static void gpt3(void) {
    mgt_config cfg;
    mgt_sim_options o;
    mgt_sim_result res;
    long rss;
    mgt_config_init(&cfg);
    set(&cfg, "model.n_layer=96"); set(&cfg, "model.n_head=96"); set(&cfg, "model.d_model=12288"); set(&cfg, "model.seq_len=2048");
    set(&cfg, "model.vocab_size=50257"); set(&cfg, "train.micro_batch=1"); set(&cfg, "train.global_batch=128");
    set(&cfg, "parallel.dp=8"); set(&cfg, "parallel.tp=8"); set(&cfg, "parallel.pp=16"); set(&cfg, "parallel.zero=1");
    set(&cfg, "train.recompute=full"); set(&cfg, "precision.dtype=bf16"); set(&cfg, "data.train="); set(&cfg, "data.val=");
    mgt_sim_options_init(&o);
    if (mgt_sim_run(&cfg, &o, &res) != MGT_OK) { printf("FAIL 175B: %s\n", mgt_last_error()); failures++; return; }
    rss = peak_rss_kib();
    CHECK(res.world == 1024, "world %d", res.world);
    CHECK(res.wall_s < 60, "the simulation took %.1f s", res.wall_s);
    CHECK(rss > 0 && rss < 2L * 1024 * 1024, "peak resident memory %ld KiB", rss);
    CHECK(res.mfu > 0.05 && res.mfu < 0.8, "MFU %.3f", res.mfu);
    CHECK(res.mem_peak_gib > 5 && res.mem_peak_gib < 80, "memory per GPU %.1f GiB", res.mem_peak_gib);
    printf("175B on 1024 H100 (tp 8, pp 16, dp 8, ZeRO 1, recompute): PREDICTED step %.2f s, %.0f tokens/s, MFU %.1f%%, %.1f GiB per GPU; "
           "simulated in %.1f s, peak RSS %.0f MiB\n",
           res.step_s, res.tokens_per_s, 100 * res.mfu, res.mem_peak_gib, res.wall_s, rss / 1024.0);
    mgt_sim_result_free(&res);
}

/* every layout the CPU backend trains simulates, and each rank's memory by category is what the
   closed-form plan (mgt_plan_rank) of GPU ranks says the runtime allocates (the workspace aside);
   on the cpu device every op the runtime calls is run to price it (none falls back to the model,
   which an op missing from the replay would) */
static void layouts(void) {
    static const struct { int dp, tp, pp, zero, recompute, micro; const char *sched, *dtype; } L[] = {
        {1, 1, 1, 0, 0, 4, "1f1b", "fp32"}, {1, 1, 1, 0, 0, 1, "1f1b", "bf16"}, {2, 1, 1, 0, 0, 2, "1f1b", "fp32"}, {2, 1, 1, 1, 0, 2, "1f1b", "bf16"},
        {2, 1, 1, 2, 0, 1, "1f1b", "fp16"}, {2, 1, 1, 3, 1, 2, "1f1b", "bf16"}, {1, 2, 1, 0, 0, 4, "1f1b", "fp32"}, {1, 1, 2, 0, 0, 1, "1f1b", "fp32"},
        {1, 1, 2, 0, 0, 1, "gpipe", "bf16"}, {2, 2, 2, 1, 1, 1, "1f1b", "bf16"}, {2, 2, 2, 3, 0, 1, "gpipe", "fp32"}, {1, 2, 4, 0, 1, 1, "1f1b", "fp32"},
        {2, 4, 1, 2, 0, 1, "1f1b", "bf16"}, /* Llama: tp 4 over 2 key/value heads, replicated on pairs of ranks */
        {2, 2, 2, 1, MGT_RECOMPUTE_SELECTIVE, 1, "1f1b", "bf16"},
        {1, 1, 2, 0, 0, 1, "1f1b-v2", "fp32"}, {2, 2, 2, 1, 1, 1, "1f1b-v2", "bf16"}, {2, 1, 2, 3, 0, 2, "1f1b-v2", "fp32"}, /* interleaved, 2 chunks a stage */
        {1, 1, 1, 0, 0, 4, "1f1b-cp2", "fp32"}, {2, 2, 1, 3, 0, 1, "1f1b-cp2", "bf16"}, {1, 1, 2, 0, 1, 2, "1f1b-cp2", "bf16"}, /* context parallel, cp 2 */
        {1, 1, 2, 0, 0, 1, "zb", "fp32"}, {2, 2, 2, 1, MGT_RECOMPUTE_SELECTIVE, 1, "zb", "bf16"}, {1, 1, 4, 0, 0, 1, "zb", "bf16"}, /* zero-bubble */
    };
    size_t i;
    mgt_sim_device cpu;
    if (mgt_sim_device_find("cpu", 2, &cpu) != MGT_OK) { printf("FAIL device cpu: %s\n", mgt_last_error()); failures++; return; }
    for (i = 0; i < sizeof L / sizeof L[0]; i++) {
        mgt_config cfg;
        mgt_sim_options o;
        mgt_sim_result res;
        char kv[64];
        int r, c;
        if (sp && L[i].tp == 1) continue; /* sequence parallelism: the layouts with tp > 1 */
        small(&cfg, L[i].dp, L[i].tp, L[i].pp, 1, strncmp(L[i].sched, "1f1b-", 5) ? L[i].sched : "1f1b");
        set(&cfg, strcmp(L[i].sched, "1f1b-v2") ? "parallel.pp_virtual=1" : "parallel.pp_virtual=2");
        set(&cfg, strcmp(L[i].sched, "1f1b-cp2") ? "parallel.cp=1" : "parallel.cp=2");
        snprintf(kv, sizeof kv, "train.micro_batch=%d", L[i].micro); set(&cfg, kv);
        set(&cfg, "train.global_batch=8");
        snprintf(kv, sizeof kv, "parallel.zero=%d", L[i].zero); set(&cfg, kv);
        snprintf(kv, sizeof kv, "precision.dtype=%s", L[i].dtype); set(&cfg, kv);
        snprintf(kv, sizeof kv, "train.recompute=%s", mgt_recompute_name(L[i].recompute)); set(&cfg, kv);
        mgt_sim_options_init(&o);
        o.gpus_per_node = 2;
        if (mgt_sim_run(&cfg, &o, &res) != MGT_OK) {
            printf("FAIL layout dp %d tp %d pp %d zero %d %s: %s\n", L[i].dp, L[i].tp, L[i].pp, L[i].zero, L[i].sched, mgt_last_error());
            failures++;
            continue;
        }
        for (r = 0; r < res.world; r++) {
            mgt_rank_plan p;
            mgt_config gpu = cfg; /* the simulator is the CUDA backend: flash attention's activations */
            mgt_plan plan;
            gpu.parallel.device = MGT_DEVICE_CUDA;
            if (mgt_plan_make(&gpu, &plan) != MGT_OK || mgt_plan_rank(&plan, r, &p) != MGT_OK) memset(&p, 0, sizeof p);
            CHECK(res.ranks[r].step_s > 0 && res.ranks[r].step_s >= res.ranks[r].compute_s - 1e-12, "layout %zu rank %d: step %g, compute %g", i, r,
                  res.ranks[r].step_s, res.ranks[r].compute_s);
            /* the replicated key/value heads' gradient sums are counted as the plan counts them */
            CHECK(!llama || L[i].tp < 4 || res.ranks[r].bytes[MGT_COLL_ALL_REDUCE] == p.bytes[MGT_COLL_ALL_REDUCE],
                  "layout %zu rank %d: all-reduce %.0f bytes simulated, %.0f planned", i, r, res.ranks[r].bytes[MGT_COLL_ALL_REDUCE], p.bytes[MGT_COLL_ALL_REDUCE]);
            /* the pipeline's sends and receives (interleaved: every chunk's) as the plan counts them */
            CHECK(res.ranks[r].bytes[MGT_COLL_SEND_RECV] == p.bytes[MGT_COLL_SEND_RECV], "layout %zu rank %d: send/recv %.0f bytes simulated, %.0f planned", i, r,
                  res.ranks[r].bytes[MGT_COLL_SEND_RECV], p.bytes[MGT_COLL_SEND_RECV]);
            for (c = 0; (sp || cfg.parallel.cp > 1) && c < MGT_COLL_COUNT; c++) /* sequence and context parallelism: every collective's bytes as planned */
                CHECK(res.ranks[r].bytes[c] == p.bytes[c], "layout %zu sp rank %d: %s %.0f bytes simulated, %.0f planned", i, r, mgt_coll_name(c),
                      res.ranks[r].bytes[c], p.bytes[c]);
            for (c = 0; c < MGT_MEM_COUNT; c++)
                if (c != MGT_MEM_WORKSPACE)
                    CHECK(res.ranks[r].mem_peak[c] >= p.mem[c] && res.ranks[r].mem_peak[c] <= p.mem[c] + 4096 + p.mem[c] / 50,
                          "layout %zu rank %d: %s %zu bytes simulated, %zu planned", i, r, mgt_mem_category_name(c), res.ranks[r].mem_peak[c], p.mem[c]);
        }
        printf("%slayout dp %d tp %d pp %d zero %d %-5s %s %s%s: PREDICTED step %.3f ms on H100, memory%s as planned", llama ? "llama " : "", L[i].dp, L[i].tp,
               L[i].pp, L[i].zero, L[i].sched, L[i].dtype, L[i].recompute ? mgt_recompute_name(L[i].recompute) : "", sp ? " sp" : "", res.step_s * 1e3,
               sp ? " and traffic" : "");
        mgt_sim_result_free(&res);
        o.device = cpu;
        if (mgt_sim_run(&cfg, &o, &res) != MGT_OK) {
            printf("\nFAIL layout %zu on the cpu device: %s\n", i, mgt_last_error());
            failures++;
            continue;
        }
        CHECK(res.ops_modelled == 0 && res.shapes_measured >= 10 && res.step_s > 0, "layout %zu on cpu: %lld ops priced by the model, %d shapes run, step %g",
              i, res.ops_modelled, res.shapes_measured, res.step_s);
        printf("; %.3f ms on this CPU (%d op shapes run)\n", res.step_s * 1e3, res.shapes_measured);
        mgt_sim_result_free(&res);
    }
}

/* calibration's round trip: times written for a shape (each family a known multiple of its prediction)
   are read back, and the calibrated simulator predicts exactly them for that shape; another micro-batch
   of the same model is rescaled family by family; a malformed file is refused naming its line */
static void calibration(void) {
    static const char *path = "build/test_sim_calibration.ini";
    static const double factor[MGT_SIM_FAMILIES] = {1.3, 0.8, 2.0, 1.1, 3.0, 0.9, -1}; /* the optimizer not measured */
    static mgt_sim_calibration cal;
    mgt_config cfg, other;
    mgt_sim_options o, calibrated;
    mgt_sim_result base, res, base2, res2;
    double measured[MGT_SIM_FAMILIES];
    FILE *f;
    int c;
    small(&cfg, 1, 1, 1, 1, "1f1b");
    set(&cfg, "precision.dtype=bf16");
    mgt_sim_options_init(&o);
    if (mgt_sim_run(&cfg, &o, &base) != MGT_OK) { CHECK(0, "mgt_sim_run: %s", mgt_last_error()); return; }
    for (c = 0; c < MGT_SIM_FAMILIES; c++) measured[c] = factor[c] < 0 ? -1 : factor[c] * base.ranks[0].busy_s[c];
    CHECK(mgt_sim_calibration_write(path, "NVIDIA H100 80GB HBM3", &cfg, measured) == MGT_OK, "write: %s", mgt_last_error());
    CHECK(mgt_sim_calibration_read(path, &cal) == MGT_OK, "read: %s", mgt_last_error());
    CHECK(!strcmp(cal.gpu, "NVIDIA H100 80GB HBM3"), "gpu '%s'", cal.gpu);
    calibrated = o;
    CHECK(mgt_sim_calibrate(&cal, &calibrated) == MGT_OK, "calibrate: %s", mgt_last_error());
    if (mgt_sim_run(&cfg, &calibrated, &res) == MGT_OK) {
        for (c = 0; c < MGT_SIM_FAMILIES; c++) {
            double want = factor[c] < 0 ? base.ranks[0].busy_s[c] : measured[c], got = res.ranks[0].busy_s[c];
            CHECK(fabs(got - want) <= 1e-6 * want, "calibrated %s: %.9f s, measured %.9f s", mgt_sim_family_name(c), got, want);
        }
        printf("calibration round trip: %s x%.2f .. %s x%.2f reproduced (%.3f ms of gemm)\n", mgt_sim_family_name(0), cal.scale[0],
               mgt_sim_family_name(MGT_SIM_FAMILIES - 2), cal.scale[MGT_SIM_FAMILIES - 2], res.ranks[0].busy_s[0] * 1e3);
        mgt_sim_result_free(&res);
    } else CHECK(0, "calibrated run: %s", mgt_last_error());
    other = cfg; /* 4 times the micro-batch: each family rescaled by the same factor */
    set(&other, "train.micro_batch=8");
    set(&other, "train.global_batch=8");
    if (mgt_sim_run(&other, &o, &base2) == MGT_OK && mgt_sim_run(&other, &calibrated, &res2) == MGT_OK) {
        for (c = 0; c < MGT_SIM_FAMILIES; c++) {
            double want = (factor[c] < 0 ? 1 : factor[c]) * base2.ranks[0].busy_s[c];
            CHECK(fabs(res2.ranks[0].busy_s[c] - want) <= 1e-6 * want, "micro-batch 8, %s: %.9f s, expected %.9f s", mgt_sim_family_name(c),
                  res2.ranks[0].busy_s[c], want);
        }
        mgt_sim_result_free(&base2);
        mgt_sim_result_free(&res2);
    } else CHECK(0, "micro-batch 8: %s", mgt_last_error());
    mgt_sim_result_free(&base);
    if ((f = fopen(path, "w"))) { /* a malformed time on line 3 */
        fprintf(f, "[calibration]\ngpu = x\ngemm = fast\n[model]\nn_layer = 2\n");
        fclose(f);
    }
    CHECK(mgt_sim_calibration_read(path, &cal) != MGT_OK && strstr(mgt_last_error(), "build/test_sim_calibration.ini:3: gemm = 'fast': milliseconds"),
          "malformed time: %s", mgt_last_error());
    if ((f = fopen(path, "w"))) { /* a wrong shape key on line 4 */
        fprintf(f, "[calibration]\ngpu = x\ngemm = 1\n[model]\nn_layers = 2\n");
        fclose(f);
    }
    CHECK(mgt_sim_calibration_read(path, &cal) != MGT_OK && strstr(mgt_last_error(), "build/test_sim_calibration.ini:5:"), "wrong key: %s", mgt_last_error());
    remove(path);
}

/* context parallelism on a GPU: the ring's attention blocks priced as kernels/ring_attention.cu runs
   them. Per rank and layer (cp 2, chunks 0 and 3 on rank 0, 1 and 2 on rank 1): a causal block for
   each own chunk and a whole block for each earlier chunk it sees (rank 0: q3 on k0, k1, k2; rank 1:
   q1 on k0, q2 on k1 and k0), 5 on either rank (the mirrored chunks' load balance), the first block
   of each query chunk written, the others merged (o and lse read too). A block's pairs are whole 32 x 32 tiles: the causal triangle (diagonal tiles
   whole) or every tile; 4 hs + 8 FLOPs per pair forward in 1 kernel, 14 hs + 16 backward (and the
   row sums) in 3 */
typedef struct ring_seen { int fwd[2], bwd[2], causal[2], first[2], bad; } ring_seen;
static double ring_cost(void *user, const mgt_sim_op *op, double modelled) {
    ring_seen *s = (ring_seen *)user;
    int fwd = !strcmp(op->name, "attention_part_forward"), r = op->rank;
    double B = (double)op->args[0], T = (double)op->args[1], C = (double)op->args[2], NH = (double)op->args[3], NKV = (double)op->args[4];
    double hs = C / NH, tiles = (double)(((int)T + 31) / 32), N = B * T, rows = B * NH * T, e = 4; /* fp32 */
    double W = B * NH * 1024 * (op->args[5] ? tiles * (tiles + 1) / 2 : tiles * tiles), io = (N * C + 2 * N * hs * NKV) * e;
    if (!fwd && strcmp(op->name, "attention_part_backward")) return modelled;
    if (r < 0 || r > 1) { s->bad++; return modelled; }
    s->causal[r] += op->args[5] != 0;
    if (fwd) {
        s->fwd[r]++;
        s->first[r] += op->bytes == io + 4 * (N * C + rows);
        if (op->flops != 4 * W * hs + 8 * W || op->kernels != 1 || (op->bytes != io + 4 * (N * C + rows) && op->bytes != io + 8 * (N * C + rows))) s->bad++;
    } else {
        s->bwd[r]++;
        if (op->flops != 2 * N * C + 14 * W * hs + 16 * W || op->kernels != 3) s->bad++;
    }
    return modelled;
}
static void ring_attention_prices(void) {
    mgt_config cfg;
    mgt_sim_options o;
    mgt_sim_result res;
    ring_seen seen;
    int L = 8, r;
    memset(&seen, 0, sizeof seen);
    small(&cfg, 1, 1, 1, 1, "1f1b");
    set(&cfg, "model.seq_len=200"); /* chunks of 50: 2 tiles, the last one partial (a whole block is 4 tiles, a causal one 3) */
    set(&cfg, "parallel.cp=2");
    mgt_sim_options_init(&o);
    o.cost = ring_cost;
    o.cost_user = &seen;
    if (mgt_sim_run(&cfg, &o, &res) != MGT_OK) { printf("FAIL ring attention prices: %s\n", mgt_last_error()); failures++; return; }
    CHECK(seen.bad == 0, "ring attention: %d blocks priced unlike kernels/ring_attention.cu's kernels", seen.bad);
    for (r = 0; r < 2; r++) {
        int fwd = 5; /* blocks a rank's queries attend to, per layer */
        CHECK(seen.fwd[r] == fwd * L && seen.bwd[r] == fwd * L && seen.causal[r] == 2 * 2 * L && seen.first[r] == 2 * L,
              "ring attention rank %d: %d forward, %d backward blocks (%d causal, %d first); expected %d, %d (%d, %d)", r, seen.fwd[r], seen.bwd[r],
              seen.causal[r], seen.first[r], fwd * L, fwd * L, 2 * 2 * L, 2 * L);
    }
    printf("ring attention (cp 2, H100 model): per layer %d and %d blocks on ranks 0 and 1, priced as the kernels; PREDICTED step %.3f ms\n",
           seen.fwd[0] / L, seen.fwd[1] / L, res.step_s * 1e3);
    mgt_sim_result_free(&res);
}

int main(int argc, char **argv) {
    int big = !(argc > 1 && !strcmp(argv[1], "--quick"));
    bubble(4, 8, "gpipe");
    bubble(4, 8, "1f1b");
    bubble(2, 5, "gpipe");
    bubble(4, 3, "1f1b");
    bubble(8, 16, "1f1b");
    bubble_v(2, 8, "1f1b", 2);
    bubble_v(4, 8, "1f1b", 2);
    bubble_v(2, 8, "1f1b", 4);
    bubble_v(4, 16, "1f1b", 2);
    bubble_zb(2, 8, 93);
    bubble_zb(4, 8, 105);
    bubble_zb(4, 16, 193);
    bubble_zb(4, 3, 53); /* fewer micro-batches than stages */
    last_member();
    overlap(0);
    overlap(2);
    layouts();
    llama = 1; /* the same layouts on the Llama family's ops and shapes */
    layouts();
    llama = 0;
    sp = 1; /* sequence parallelism on the layouts with tp > 1, GPT-2 and Llama */
    layouts();
    llama = 1;
    layouts();
    llama = sp = 0;
    ring_attention_prices();
    calibration();
    if (big) gpt3();
    if (failures) { printf("test_sim: %d failures\n", failures); return 1; }
    printf("test_sim: ok\n");
    return 0;
}
