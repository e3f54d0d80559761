/* The step simulator (mgt.h section 3d) against published measurements: for each anchor the
   figure, its source, the simulator's prediction (mgt_sim_run, the public API), their ratio and the
   tolerance the ratio must stay in. Each tolerance is justified where it is set. Some anchors are
   in-sample (the figure, or its neighbour in the same table, set the price being checked): they check
   that the price survives the runtime's path to it (buckets, latencies, FLOP counts), not that the
   model predicts; the others predict. Runs in a few seconds (no data is read, nothing is allocated). */
#define MGT_IMPLEMENTATION
#include "mgt.h"
#include <stdio.h>
#include <string.h>

static int failures, anchors;

static void set(mgt_config *cfg, const char *kv) {
    if (mgt_config_set(cfg, kv) != MGT_OK) { printf("FAIL --set %s: %s\n", kv, mgt_last_error()); failures++; }
}

/* one anchor: prints it, and counts it a failure outside [lo, hi] */
static void anchor(const char *name, const char *unit, double published, double predicted, double lo, double hi, const char *source) {
    double ratio = published > 0 ? predicted / published : 0;
    int ok = ratio >= lo && ratio <= hi;
    anchors++;
    if (!ok) failures++;
    printf("%s %-44s published %10.4g %-10s predicted %10.4g  ratio %.3f  tolerance [%.2f, %.2f]\n     source: %s\n", ok ? "ok  " : "FAIL", name,
           published, unit, predicted, ratio, lo, hi, source);
}

static int simulate(const mgt_config *cfg, const char *gpu, mgt_sim_cost_fn cost, void *user, mgt_sim_result *res) {
    mgt_sim_options o;
    mgt_sim_options_init(&o);
    if (mgt_sim_device_find(gpu, 0, &o.device) != MGT_OK) { printf("FAIL device %s: %s\n", gpu, mgt_last_error()); failures++; return 0; }
    o.cost = cost;
    o.cost_user = user;
    if (mgt_sim_run(cfg, &o, res) != MGT_OK) { printf("FAIL mgt_sim_run: %s\n", mgt_last_error()); failures++; return 0; }
    return 1;
}

/* ---- llm.c's GPT-2 124M: bf16, T = 1024, 8 GPUs each with micro-batch 64 (524,288 tokens a step, no
   accumulation), ZeRO-1, cuDNN attention: the flags of llm.c's scripts/run_gpt2_124M.sh (-b 64 -t 1024
   -d 524288 -z 1, USE_CUDNN=1), which mgt's preset follows */
static void gpt2_124m(mgt_config *cfg) {
    mgt_config_init(cfg);
    if (mgt_config_load(cfg, "presets/gpt2_124m_8gpu.ini") != MGT_OK) { printf("FAIL presets/gpt2_124m_8gpu.ini: %s\n", mgt_last_error()); failures++; }
    set(cfg, "data.train=");
    set(cfg, "data.val=");
    set(cfg, "train.micro_batch=64");
    set(cfg, "parallel.zero=1");
}

static void llmc(void) {
    mgt_config cfg;
    mgt_sim_result res;
    gpt2_124m(&cfg);
    /* 8 x H100: "the llm.c GPT-2 replication needed 45 minutes" for its 10B tokens: 10e9 / 2700 s / 8 =
       463K tokens/s per GPU. The 45 minutes are the whole run: validation every 250 steps, HellaSwag,
       checkpoints and start-up are in them and not in a simulated step, a few per cent that make the
       ratio lean above 1; the minutes are rounded (2%). mgt's kernels follow llm.c's (cuBLASLt
       epilogues, cuDNN attention, the fused classifier) but are not llm.c's. Tolerance 0.85..1.25: the
       model's own error, which these anchors exist to measure, taken as 15% either way, plus up to 10%
       of the run outside the steps above. */
    if (simulate(&cfg, "h100", NULL, NULL, &res)) {
        anchor("llm.c GPT-2 124M, 8 x H100, tokens/s per GPU", "tokens/s", 10e9 / (45 * 60.0) / 8, res.tokens_per_s / res.world, 0.85, 1.25,
               "github.com/KellerJordan/modded-nanogpt README: 'the llm.c GPT-2 replication needed 45 minutes' (10B tokens, 8xH100)");
        printf("     (PREDICTED step %.1f ms, MFU %.1f%%)\n", res.step_s * 1e3, 100 * res.mfu);
        mgt_sim_result_free(&res);
    }
    /* 8 x A100 80GB SXM: "steps in ~300ms/iter" of 524,288 tokens (llm.c's run script; discussion 481
       "in 90 minutes"): 218K tokens/s per GPU. A step time, so no evaluation is in it; "~300" is
       rounded (5%). Tolerance 0.85..1.20: the model's 15% either way, 5% more above for the rounding. */
    if (simulate(&cfg, "a100", NULL, NULL, &res)) {
        anchor("llm.c GPT-2 124M, 8 x A100, tokens/s per GPU", "tokens/s", 524288 / 0.300 / 8, res.tokens_per_s / res.world, 0.85, 1.20,
               "github.com/karpathy/llm.c discussions/481 and scripts/run_gpt2_124M.sh: '8X A100 80GB SXM ... steps in ~300ms/iter'");
        printf("     (PREDICTED step %.1f ms, MFU %.1f%%)\n", res.step_s * 1e3, 100 * res.mfu);
        mgt_sim_result_free(&res);
    }
}

/* ---- cuDNN's SDPA: cudnn-frontend benchmark/sdpa_benchmark_training/results/h200_919_only_cudnn/
   llama3.1_20260227_034703.csv (cuDNN 9.19 on an H200, bf16, causal, batch 1, 64 query heads on 8
   key/value heads, head size 128): forward and backward ms. One layer of a Llama-shaped model of those
   heads is simulated on the h200 and its attention ops' modelled seconds taken through the cost hook */
typedef struct attn_times { double fwd, bwd; } attn_times;
static double attn_cost(void *user, const mgt_sim_op *op, double modelled) {
    attn_times *t = (attn_times *)user;
    if (!strcmp(op->name, "attention_forward")) t->fwd += modelled;
    if (!strcmp(op->name, "attention_backward")) t->bwd += modelled;
    return modelled;
}
static void cudnn_sdpa(void) {
    static const struct { int T; double fwd_ms, bwd_ms; int fitted; } rows[] = {
        {2048, 0.142, 0.464, 1}, {4096, 0.465, 1.450, 1}, {8192, 1.708, 5.083, 0}, {16384, 6.531, 19.002, 0}, {32768, 25.566, 75.688, 1}};
    const char *src = "github.com/NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training/results/h200_919_only_cudnn/llama3.1_20260227_034703.csv";
    int i;
    for (i = 0; i < (int)(sizeof rows / sizeof rows[0]); i++) {
        mgt_config cfg;
        mgt_sim_result res;
        attn_times t = {0, 0};
        char kv[64], name[96];
        mgt_config_init(&cfg);
        set(&cfg, "model.n_layer=1"); set(&cfg, "model.n_head=64"); set(&cfg, "model.n_kv_head=8"); set(&cfg, "model.d_model=8192");
        set(&cfg, "model.norm=rmsnorm"); set(&cfg, "model.positions=rope"); set(&cfg, "model.mlp=swiglu"); set(&cfg, "model.d_ff=256");
        set(&cfg, "model.bias=0"); set(&cfg, "model.vocab_size=256"); set(&cfg, "data.train="); set(&cfg, "data.val=");
        set(&cfg, "train.micro_batch=1"); set(&cfg, "train.global_batch=1"); set(&cfg, "precision.dtype=bf16"); set(&cfg, "parallel.device=cuda");
        snprintf(kv, sizeof kv, "model.seq_len=%d", rows[i].T); set(&cfg, kv);
        if (!simulate(&cfg, "h200", attn_cost, &t, &res)) continue;
        mgt_sim_result_free(&res);
        /* rows[i].fitted: T = 2048 and 4096 set the price (the published rate at 2048 and the fit of its
           fall with T through both) and T = 32768 its cap (the table's rate there), so 3% (the FLOP
           count's (T+1)/T and the table's rounding); 8192 and 16384 are predicted by the fit: 10%, the
           fit's own miss there being 2-3% and the spread of the table's 10 repetitions unpublished */
        snprintf(name, sizeof name, "cuDNN SDPA fwd, hs 128, T %d%s", rows[i].T, rows[i].fitted ? " (in-sample)" : "");
        anchor(name, "ms", rows[i].fwd_ms, t.fwd * 1e3, rows[i].fitted ? 0.97 : 0.90, rows[i].fitted ? 1.03 : 1.10, src);
        snprintf(name, sizeof name, "cuDNN SDPA bwd, hs 128, T %d%s", rows[i].T, rows[i].fitted ? " (in-sample)" : "");
        anchor(name, "ms", rows[i].bwd_ms, t.bwd * 1e3, rows[i].fitted ? 0.97 : 0.90, rows[i].fitted ? 1.03 : 1.10, src);
    }
}

/* ---- NCCL all-reduce on 8 x H100 SXM (NVLink 4, NVSwitch): bus bandwidth at large sizes. A dp 8 step
   of GPT-2 1.5B with one gradient bucket (6.2 GB of fp32 gradients in one all-reduce) on the h100;
   busbw = (bytes / seconds) x 2 (n-1) / n, as nccl-tests reports it. In-sample (the NVLS price is this
   thread's algorithm bandwidth): 5%, for the per-call latency and the step's small all-reduces */
static void nccl_allreduce(void) {
    mgt_config cfg;
    mgt_sim_result res;
    mgt_config_init(&cfg);
    if (mgt_config_load(&cfg, "presets/gpt2_1558m_dp8_zero3.ini") != MGT_OK) { printf("FAIL preset: %s\n", mgt_last_error()); failures++; return; }
    set(&cfg, "data.train="); set(&cfg, "data.val="); set(&cfg, "parallel.zero=0"); set(&cfg, "parallel.bucket_mb=65536");
    set(&cfg, "train.micro_batch=1"); set(&cfg, "train.global_batch=8");
    if (!simulate(&cfg, "h100", NULL, NULL, &res)) return;
    {
        const mgt_sim_rank *k = &res.ranks[0];
        double busbw = k->comm_s[MGT_COLL_ALL_REDUCE] > 0 ? k->bytes[MGT_COLL_ALL_REDUCE] / k->comm_s[MGT_COLL_ALL_REDUCE] * 2 * 7 / 8 * 1e-9 : 0;
        anchor("NCCL all-reduce busbw, 8 x H100 NVLink (in-sample)", "GB/s", 480, busbw, 0.95, 1.05,
               "github.com/NVIDIA/nccl-tests/issues/212 (S. Jeaugey: '~480GB/s (algbw ~275GB/s)' on 8 GPUs; issue 290: 476 GB/s measured)");
        printf("     (%.2f GB in %lld all-reduce calls, %.2f ms on the communication stream)\n", k->bytes[MGT_COLL_ALL_REDUCE] * 1e-9,
               k->calls[MGT_COLL_ALL_REDUCE], k->comm_s[MGT_COLL_ALL_REDUCE] * 1e3);
    }
    mgt_sim_result_free(&res);
}

int main(void) {
    double t0 = mgt_now();
    printf("the step simulator against published measurements (ratio = predicted / published)\n\n");
    llmc();
    cudnn_sdpa();
    nccl_allreduce();
    printf("\n%d anchors, %d outside their tolerance, in %.1f s\n", anchors, failures, mgt_now() - t0);
    printf("test_sim_anchors: %s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
