/* The layout-equivalence matrix: a tiny GPT (L=4, NH=4, C=64, T=32, V=256) trained on a generated
   corpus with AdamW, clipping and warmup under every parallel layout must give, step by step, the
   losses of one rank (1e-5 relative) and, at the end, its weights. Also: checkpoints move between
   layouts (dp2-zero3 -> tp2-pp2 -> 1 rank) and continue as the uninterrupted run would; and with
   bf16 storage a subset (dp, ZeRO 1/2/3, tp, pp with both schedules, a mixture) follows one bf16
   rank within a bound derived below.

   Built a second time as build/test_layouts_cuda (-DMGT_TEST_CUDA, kernels/cuda.ninja): the
   layouts then run on the CUDA backend (kernels/backend_cuda.cu with the kernels of
   kernels/<op>.cu through the SIMT shim, NCCL through kernels/comm_nccl.c), linked against the
   checking fakes of cudart, cuBLAS and NCCL, and must follow the same one-rank CPU runs within the
   same bounds, plus the one-rank layout itself on the GPU.

   usage: test_layouts [--quick [--once [--no-kv]]] [--lean] [--only TEXT]   (--quick: smaller shapes and 6
   steps, for the sanitizers; --once: the matrix without gradient accumulation only and without the
   4-way layouts of one kind, and the Llama model on one GPU and the layouts that mix all three kinds
   of parallelism, for the slowest of them (the CUDA backend on the fakes); --no-kv: without the
   replicated key/value heads either, and the scale features in GPT-2 fp32 only (the sanitized CUDA run);
   --lean (anywhere; implied by --no-kv): the scale features in GPT-2 fp32 only, one 8-rank mixture, and
   of the bf16 subsets ZeRO 3, tp, pp and the mixtures (the sanitized runs: what they look for, races
   and memory errors, is in code every model, type and ZeRO stage shares; the plain runs cover those);
   --only: just the matrix layouts whose name contains TEXT, e.g. dp2-tp1-pp1-z3, without the
   checkpoint and bf16 parts: one layout to look at while working on it) */
#define MGT_IMPLEMENTATION
#include "mgt.h"
#include "train_util.h"

#ifdef MGT_TEST_CUDA
const mgt_cuda_api *mgt_cuda_api_get(void); /* kernels/plugin_cuda.c, linked in */
long mgt_fake_cudnn_executions(void);        /* tests/fakes/cudnn_fake.cpp: the fused attention graphs it ran */
static const char *device = "cuda";         /* of the layouts under test; references run on the CPU */
static int gpu_runs;                        /* runs whose ranks all reported their GPU */
#else
static const char *device = "cpu";
#endif

static char dir[256];

/* bf16 against one bf16 rank. Layouts round the same values at different points: a TP all-reduce
   rounds the sum of two partial products once where one rank rounds the whole product; DP and ZeRO
   add fp32 gradients in another order, and a master weight 1e-9 away from a bf16 rounding boundary
   then rounds to the neighbouring value. Activations differ by about one unit roundoff (u = 2^-8)
   here and there; the loss averages them over 256 tokens (measured 1e-5 at step 1) and trajectories
   separate as steps go (measured at most 4.9e-3 over 20 steps, 1.2e-5 over the 6 quick ones), the
   RMS difference of all weights at most 4.4e-3. Bound both at 4u = 2^-6 (1.6e-2): a 3x margin over
   what was measured, far below what a wrong shard, a missed rounding or a stale copy gives (the
   losses then leave the curve by tenths). */
#define BF16_LOSS_TOL (1.0 / 64)
#define BF16_WEIGHT_TOL (1.0 / 64)
static int steps = 20;
/* 1: the Llama-style model (RMSNorm, RoPE, SwiGLU, grouped-query attention with 8 query heads on 4
   key/value heads, no biases, a separate LM head) instead of GPT-2's */
static int llama;
/* the Llama model's key/value heads: 4 (tp 4 splits them), or 2 (tp 4 replicates each on two ranks) */
static int kv_heads = 4;

typedef struct layout { int dp, tp, pp, zero; const char *sched; } layout;

/* settings applied after the layout's, while not NULL: space-separated key=value (the scale features' runs) */
static const char *extra_set;

/* The scale features: layouts with settings beyond dp, tp, pp, zero and the schedule, each against
   one rank of the same model and dtype (GPT-2 and Llama, fp32 and bf16) within the matrix's bounds.
   `once`: also in --once runs (the CUDA backend on the fakes). */
typedef struct feature_layout { layout l; const char *set; int once; } feature_layout;
static const feature_layout features[] = {
    /* recompute = selective: the norms and GELU/SwiGLU rebuilt in backward */
    {{1, 1, 1, 0, "1f1b"}, "train.recompute=selective", 1},
    {{1, 2, 2, 0, "1f1b"}, "train.recompute=selective", 0},
    {{2, 2, 2, 3, "gpipe"}, "train.recompute=selective", 0},
    /* sequence parallelism: norms and residual on 1/tp of the rows; with ZeRO, pipelines (rows sent
       are the rank's 1/tp) and full recompute (the block forward's collectives rerun in backward) */
    {{1, 2, 1, 0, "1f1b"}, "parallel.sp=1", 1},
    {{1, 4, 1, 0, "1f1b"}, "parallel.sp=1", 0},
    {{2, 2, 1, 2, "1f1b"}, "parallel.sp=1", 0},
    {{1, 2, 2, 0, "1f1b"}, "parallel.sp=1", 0},
    {{2, 2, 2, 3, "1f1b"}, "parallel.sp=1", 1},
    {{1, 2, 1, 0, "1f1b"}, "parallel.sp=1 train.recompute=full", 0},
    {{1, 2, 2, 0, "1f1b"}, "parallel.sp=1 train.recompute=selective", 0},
    /* interleaved 1F1B (parallel.pp_virtual): M = global_batch / (micro_batch x dp) a multiple of pp; M > pp accumulates */
    {{1, 1, 2, 0, "1f1b"}, "parallel.pp_virtual=2 train.micro_batch=4", 1},
    {{1, 1, 2, 0, "1f1b"}, "parallel.pp_virtual=2 train.micro_batch=1", 0},
    {{2, 1, 2, 1, "1f1b"}, "parallel.pp_virtual=2 train.micro_batch=1", 0},
    {{2, 1, 2, 3, "1f1b"}, "parallel.pp_virtual=2 train.micro_batch=2", 0},
    {{1, 2, 2, 0, "1f1b"}, "parallel.pp_virtual=2 train.micro_batch=2", 0},
    {{1, 1, 2, 0, "1f1b"}, "parallel.pp_virtual=2 train.micro_batch=2 train.recompute=full", 0},
    /* 8 blocks: in bf16 GPT-2's accumulation alone (one rank, micro_batch 2 against 8) moves the weights 1.2e-2 over 20 steps, near
       the bound; the schedule adds nothing (pp 4 1F1B gives the same figures) */
    {{1, 1, 4, 0, "1f1b"}, "model.n_layer=8 parallel.pp_virtual=2 train.micro_batch=1", 0},
    /* and with sequence parallelism (the pipeline moves the rank's 1/tp of the rows) and selective recompute */
    {{1, 2, 2, 0, "1f1b"}, "parallel.pp_virtual=2 parallel.sp=1 train.micro_batch=2", 0},
    {{1, 1, 2, 0, "1f1b"}, "parallel.pp_virtual=2 train.micro_batch=2 train.recompute=selective", 0},
    /* context parallelism: the sequence in 2 cp chunks, attention a ring; the grid tp, cp, dp, pp (gradients summed over dp x cp,
       ZeRO sharded over them), with sequence parallelism inside the chunks, pipelines, recompute */
    {{1, 1, 1, 0, "1f1b"}, "parallel.cp=2", 1},
    {{1, 1, 1, 0, "1f1b"}, "parallel.cp=4", 0},
    {{2, 2, 1, 2, "1f1b"}, "parallel.cp=2", 0},
    {{1, 1, 2, 0, "1f1b"}, "parallel.cp=2", 0},
    {{2, 1, 1, 3, "1f1b"}, "parallel.cp=2", 0},
    {{1, 2, 1, 0, "1f1b"}, "parallel.cp=2 parallel.sp=1 train.recompute=full", 0},
    {{1, 1, 2, 0, "1f1b"}, "parallel.cp=2 train.recompute=selective", 0},
    /* zero-bubble ZB-H1 (pp_schedule = zb): the backward split into B and deferred W, 8 micro-batches of 1 (W's held
       across several); with data parallelism the DP buckets wait for the last W (ZeRO 0) or the step's end (ZeRO 1); with
       sequence parallelism W gathers the norms' outputs again, and selective recompute rebuilds them for W */
    {{1, 1, 2, 0, "zb"}, "train.micro_batch=1", 1},
    {{1, 1, 4, 0, "zb"}, "train.micro_batch=1", 0},
    {{2, 1, 2, 0, "zb"}, "train.micro_batch=1", 0},
    {{2, 1, 2, 1, "zb"}, "train.micro_batch=2", 0},
    {{1, 2, 2, 0, "zb"}, "parallel.sp=1 train.recompute=selective train.micro_batch=2", 0},
    {{1, 1, 2, 0, "zb"}, "parallel.cp=2 train.micro_batch=1", 0}, /* and context parallelism: B runs the ring's backward */
    {{0, 0, 0, 0, NULL}, NULL, 0}, /* the end */
};


static void config(mgt_config *cfg, const layout *l, int accumulate, const char *name, int quick, const char *dtype) {
    char set[600];
    int reference = l->dp * l->tp * l->pp == 1 && strstr(name, "one");
    mgt_config_init(cfg);
    snprintf(set, sizeof set, "parallel.device=%s", reference ? "cpu" : device); mgt_config_set(cfg, set);
    snprintf(set, sizeof set, "precision.dtype=%s", dtype); mgt_config_set(cfg, set);
    mgt_config_set(cfg, "model.n_layer=4");
    mgt_config_set(cfg, "model.n_head=4");
    mgt_config_set(cfg, quick ? "model.d_model=32" : "model.d_model=64");
    if (llama) {
        mgt_config_set(cfg, "model.n_head=8");
        snprintf(set, sizeof set, "model.n_kv_head=%d", kv_heads); mgt_config_set(cfg, set);
        mgt_config_set(cfg, "model.norm=rmsnorm");
        mgt_config_set(cfg, "model.positions=rope");
        mgt_config_set(cfg, "model.mlp=swiglu");
        mgt_config_set(cfg, quick ? "model.d_ff=88" : "model.d_ff=168"); /* 8/3 d_model, a multiple of tp = 4 */
        mgt_config_set(cfg, "model.bias=0");
        mgt_config_set(cfg, "model.tied_head=0");
    }
    mgt_config_set(cfg, quick ? "model.seq_len=16" : "model.seq_len=32");
    snprintf(set, sizeof set, "train.steps=%d", steps);
    mgt_config_set(cfg, set);
    mgt_config_set(cfg, "train.global_batch=8");
    snprintf(set, sizeof set, "train.micro_batch=%d", 8 / l->dp / (accumulate ? 2 : 1));
    mgt_config_set(cfg, set);
    mgt_config_set(cfg, "train.lr=3e-3");
    mgt_config_set(cfg, "train.warmup=5");
    mgt_config_set(cfg, "train.grad_clip=1.0");
    mgt_config_set(cfg, "train.eval_every=0");
    mgt_config_set(cfg, "log.metrics=none");
    mgt_config_set(cfg, "parallel.threads=2");
    mgt_config_set(cfg, "parallel.bucket_mb=0.001"); /* a bucket per unit: every DP bucket path runs */
    snprintf(set, sizeof set, "parallel.dp=%d", l->dp); mgt_config_set(cfg, set);
    snprintf(set, sizeof set, "parallel.tp=%d", l->tp); mgt_config_set(cfg, set);
    snprintf(set, sizeof set, "parallel.pp=%d", l->pp); mgt_config_set(cfg, set);
    snprintf(set, sizeof set, "parallel.zero=%d", l->zero); mgt_config_set(cfg, set);
    snprintf(set, sizeof set, "parallel.pp_schedule=%s", l->sched); mgt_config_set(cfg, set);
    snprintf(set, sizeof set, "data.train=%s/corpus.bin", dir); mgt_config_set(cfg, set);
    mgt_config_set(cfg, "data.val=");
    snprintf(set, sizeof set, "checkpoint.dir=%s/%s", dir, name); mgt_config_set(cfg, set);
    if (extra_set) {
        const char *p = extra_set;
        while (*p) {
            size_t k = strcspn(p, " ");
            snprintf(set, sizeof set, "%.*s", (int)k, p);
            if (k && mgt_config_set(cfg, set) != MGT_OK) { printf("FAIL %s: %s\n", set, mgt_last_error()); exit(1); }
            p += k + (p[k] == ' ');
        }
    }
}



/* trains up to step `to`, recording losses[step-1]; optionally resumes first and saves at the end */
static mgt_run *train(const mgt_config *cfg, int to, double *losses, const char *resume) {
    mgt_run *run;
    if (mgt_run_create(&run, cfg) != MGT_OK) { printf("FAIL create: %s\n", mgt_last_error()); exit(1); }
    if (resume && mgt_run_resume(run, resume) != MGT_OK) { printf("FAIL resume: %s\n", mgt_last_error()); exit(1); }
    while (run->step < to) {
        if (mgt_run_step(run) != MGT_OK) { printf("FAIL step %d: %s\n", run->step + 1, mgt_last_error()); exit(1); }
        losses[run->step - 1] = run->loss;
    }
#ifdef MGT_TEST_CUDA
    if (cfg->parallel.device == MGT_DEVICE_CUDA) { /* every rank really ran on its "GPU" */
        mgt_rank_stats rs[8];
        int n = published(run, NULL, 0, rs, 8, NULL, 0).ranks_n, i;
        for (i = 0; i < n; i++) {
            char want[32];
            snprintf(want, sizeof want, "cuda:%d", i);
            if (strcmp(rs[i].device, want) || !rs[i].mem_current[MGT_MEM_PARAMS]) {
                printf("FAIL rank %d ran on %s with %zu bytes of parameters, not on %s\n", i, rs[i].device, rs[i].mem_current[MGT_MEM_PARAMS], want);
                failures++;
            }
        }
        gpu_runs++;
    }
#endif
    return run;
}

/* largest difference of the global weights, relative to each tensor's largest weight; with rms,
   the RMS difference of all weights relative to their RMS */
static double weight_diff_by(mgt_run *a, mgt_run *b, int rms) {
    mgt__layout g;
    float **wa, **wb;
    double worst = 0;
    int t;
    size_t i;
    mgt__global_layout(&a->plan.cfg, &g);
    wa = mgt__gather_global(a, &g, MGT__BUF_PARAMS);
    wb = mgt__gather_global(b, &g, MGT__BUF_PARAMS);
    double tse = 0, tss = 1e-30;
    for (t = 0; t < g.n; t++) {
        double e = 0, scale = 1e-30, se = 0, ss = 1e-30;
        for (i = 0; i < g.t[t].info.numel; i++) {
            double d = (double)wa[t][i] - wb[t][i];
            e = worse_of(e, fabs(d));
            scale = fmax(scale, fabs((double)wb[t][i]));
            se += d * d;
            ss += (double)wb[t][i] * wb[t][i];
        }
        worst = fmax(worst, e / scale);
        tse += se;
        tss += ss;
    }
    if (rms) worst = sqrt(tse / tss);
    mgt__free_global(&g, wa);
    mgt__free_global(&g, wb);
    mgt__layout_free(&g);
    return worst;
}
static double weight_diff(mgt_run *a, mgt_run *b) { return weight_diff_by(a, b, 0); }

#ifndef MGT_TEST_CUDA
/* replicated key/value heads: every replica holds the same bits as its kv group's first rank (the
   parameters are host memory on CPU ranks only); returns the replicated elements compared, -1 on a
   difference */
static long replicas_alike(mgt_run *run) {
    long n = 0;
    int i, t;
    for (i = 0; i < run->plan.world; i++) {
        mgt__rank *a = &run->ranks[i], *lead = &run->ranks[a->kv_g.ranks[0]];
        for (t = 0; t < a->lay.n && a != lead; t++) {
            const mgt__tensor *x = &a->lay.t[t];
            size_t k = mgt__tensor_storage(x) - x->kv_from;
            if (!x->kv_from) continue;
            if (memcmp(mgt__P(a, t) + x->kv_from, mgt__P(lead, t) + x->kv_from, sizeof(float) * k)) return -1;
            n += (long)k;
        }
    }
    return n;
}
#endif

/* the scale features' layouts against one rank: GPT-2 and Llama, fp32 and bf16 (lean: GPT-2 in fp32
   only, for the sanitized CUDA run's budget); returns the runs */
static int feature_runs(int quick, int once, int lean, const char *only) {
    static const char *dtypes[2] = {"fp32", "bf16"};
    mgt_config cfg;
    double base[40], got[40];
    int runs = 0, dt, i, s;
    for (llama = 0; llama < (lean ? 1 : 2); llama++)
        for (dt = 0; dt < (lean ? 1 : 2); dt++) {
            mgt_run *ref = NULL, *run;
            if (once && llama != dt) continue; /* --once: GPT-2 in fp32 and Llama in bf16, both models and both types */
            char refname[160], ref_model[128] = "";
            for (i = 0; features[i].set; i++) {
                const feature_layout *f = &features[i];
                const layout *l = &f->l;
                double e = 0, w, loss_tol = dt ? BF16_LOSS_TOL : 1e-5, weight_tol = dt ? BF16_WEIGHT_TOL : 1e-3;
                char name[160], *c;
                if (once && !f->once) continue;
                snprintf(name, sizeof name, "%s%s-dp%d-tp%d-pp%d-z%d-%s-%s", llama ? "llama-" : "", dtypes[dt], l->dp, l->tp, l->pp, l->zero, l->sched, f->set);
                for (c = name; *c; c++)
                    if (*c == ' ' || *c == '=' || *c == '/') *c = '_';
                if (only && !strstr(name, only)) continue;
                { /* settings that begin with "model." change the model: the one-rank reference takes them too */
                    char model[128] = "";
                    const char *p = f->set;
                    while (!strncmp(p, "model.", 6)) {
                        size_t k = strcspn(p, " ");
                        snprintf(model + strlen(model), sizeof model - strlen(model), "%s%.*s", model[0] ? " " : "", (int)k, p);
                        p += k + (p[k] == ' ');
                    }
                    if (ref && strcmp(model, ref_model)) { mgt_run_destroy(ref); ref = NULL; }
                    if (!ref) {
                        static const layout one = {1, 1, 1, 0, "1f1b"};
                        snprintf(refname, sizeof refname, "feature-one-%s-%s%s%s", llama ? "llama" : "gpt2", dtypes[dt], model[0] ? "-" : "", model);
                        for (c = refname; *c; c++)
                            if (*c == ' ' || *c == '=' || *c == '/') *c = '_';
                        extra_set = model[0] ? model : NULL;
                        config(&cfg, &one, 0, refname, quick, dtypes[dt]);
                        extra_set = NULL;
                        ref = train(&cfg, steps, base, NULL);
                        snprintf(ref_model, sizeof ref_model, "%s", model);
                    }
                }
                extra_set = f->set;
                config(&cfg, l, 0, name, quick, dtypes[dt]);
                extra_set = NULL;
                run = train(&cfg, steps, got, NULL);
                for (s = 0; s < steps; s++) e = worse_of(e, fabs(got[s] - base[s]) / base[s]);
                w = weight_diff_by(run, ref, dt);
                check(e <= loss_tol && w <= weight_tol, "%-28s %d ranks: max loss difference %.2e, max weight difference %.2e", name,
                      l->dp * l->tp * l->pp * cfg.parallel.cp, e, w);
                mgt_run_destroy(run);
                runs++;
            }
            if (ref) mgt_run_destroy(ref);
        }
    llama = 0;
    return runs;
}

/* a checkpoint moved across three layouts (each with its settings, NULL for none), a third of the
   steps under each, against the uninterrupted one-rank run (reference `one_name`) of the same model:
   the largest relative difference of a step's loss */
static double moved_checkpoint_error(const char *name, const char *one_name, const layout *l1, const char *set1, const layout *l2, const char *set2,
                                     const layout *l3, const char *set3, int quick) {
    static const layout one = {1, 1, 1, 0, "1f1b"};
    const layout *legs[3] = {l1, l2, l3};
    const char *sets[3] = {set1, set2, set3};
    double base[40], got[40], e = 0;
    mgt_config cfg;
    mgt_run *run;
    int k, s, third = steps / 3;
    config(&cfg, &one, 0, one_name, quick, "fp32");
    mgt_run_destroy(train(&cfg, steps, base, NULL));
    for (k = 0; k < 3; k++) {
        extra_set = sets[k];
        config(&cfg, legs[k], 0, name, quick, "fp32");
        extra_set = NULL;
        run = train(&cfg, k == 2 ? steps : (k + 1) * third, got, k ? "latest" : NULL);
        if (k < 2) mgt_run_save(run, NULL, 0);
        mgt_run_destroy(run);
    }
    for (s = 0; s < steps; s++) e = worse_of(e, fabs(got[s] - base[s]) / base[s]);
    return e;
}

int main(int argc, char **argv) {
    static const layout all[] = {
        {2, 1, 1, 0, "1f1b"}, {4, 1, 1, 0, "1f1b"}, {2, 1, 1, 1, "1f1b"}, {2, 1, 1, 2, "1f1b"}, {2, 1, 1, 3, "1f1b"},
        {1, 2, 1, 0, "1f1b"}, {1, 4, 1, 0, "1f1b"}, {1, 1, 2, 0, "gpipe"}, {1, 1, 2, 0, "1f1b"}, {1, 1, 4, 0, "gpipe"},
        {1, 1, 4, 0, "1f1b"}, {2, 2, 1, 0, "1f1b"}, {1, 2, 2, 0, "1f1b"}, {2, 1, 2, 1, "1f1b"}, {2, 2, 2, 1, "1f1b"},
        {2, 2, 2, 3, "1f1b"}, {2, 2, 2, 2, "gpipe"}, {2, 1, 2, 3, "gpipe"},
    };
    const layout one = {1, 1, 1, 0, "1f1b"};
    const layout *list = all;
    int n = (int)(sizeof all / sizeof all[0]), quick = argc > 1 && !strcmp(argv[1], "--quick"), i, acc, s;
    int passes = argc > 2 && !strcmp(argv[2], "--once") ? 1 : 2, llama_runs = 0, kv_runs = 0, matrix_runs = 0, bf16_runs = 0, kinds;
    int kv = !(argc > 3 && !strcmp(argv[3], "--no-kv")), feature_count, lean = !kv;
    const char *only = NULL;
    for (i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--only")) only = argv[i + 1];
    for (i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--lean")) lean = 1;
    double base[40], got[40];
    mgt_config cfg;
    mgt_run *ref, *run;
    if (quick) steps = 6; /* every layout, smaller shapes: for the sanitizers */
#ifdef MGT_TEST_CUDA
    {
        static layout with_one[sizeof all / sizeof all[0] + 1];
        with_one[0] = one; /* one GPU against the CPU first */
        memcpy(with_one + 1, all, sizeof all);
        list = with_one;
        n++;
        mgt_cuda_use(mgt_cuda_api_get());
    }
#endif
    make_workdir(dir, sizeof dir, "test_layouts", 100000, 3);

    for (acc = 0; acc < passes; acc++) {
        config(&cfg, &one, acc, "one", quick, "fp32");
        ref = train(&cfg, steps, base, NULL);
        printf("     1 rank%s: loss %.6f -> %.6f over %d steps\n", acc ? ", accumulation 2" : "", base[0], base[steps - 1], steps);
        for (i = 0; i < n; i++) {
            const layout *l = &list[i];
            double e = 0, w;
            char name[64];
            snprintf(name, sizeof name, "dp%d-tp%d-pp%d-z%d-%s-a%d", l->dp, l->tp, l->pp, l->zero, l->sched, acc);
            if (only && !strstr(name, only)) continue;
            /* --once: not the 4-way layouts of one kind (their 2-way ones run the same code) */
            if (passes == 1 && l->dp * l->tp * l->pp == 4 && (l->dp > 1) + (l->tp > 1) + (l->pp > 1) == 1) continue;
            /* --lean: one 8-rank mixture (its ZeRO 3 and GPipe run on fewer ranks too) */
            if (lean && l->dp * l->tp * l->pp == 8 && (l->zero != 1 || strcmp(l->sched, "1f1b"))) continue;
            matrix_runs++;
            config(&cfg, l, acc, name, quick, "fp32");
#ifdef MGT_TEST_CUDA
            /* one layout without cuBLASLt's epilogues (the fake's heuristic offers none for BIAS,
               GELU_AUX, DGELU, BGRADB): the backend's GEMMs and kernels apart, the same bounds */
            setenv("MGT_FAKE_LT_NO_ALGO", strcmp(name, "dp1-tp2-pp1-z0-1f1b-a1") ? "0" : "1", 1);
            if (!strcmp(getenv("MGT_FAKE_LT_NO_ALGO"), "1")) printf("     %s: cuBLASLt without its epilogues (bias, GELU, bias gradient)\n", name);
#endif
            run = train(&cfg, steps, got, NULL);
            for (s = 0; s < steps; s++) e = worse_of(e, fabs(got[s] - base[s]) / base[s]);
            w = weight_diff(run, ref);
            /* losses: reduction order only (1e-5, the bound); weights: Adam turns rounding of
               near-zero gradients into steps of about lr, so 1e-3 of each tensor's scale */
            check(e <= 1e-5 && w <= 1e-3, "%-28s %d ranks, accumulation %s: max loss difference %.2e, max weight difference %.2e", name,
                  l->dp * l->tp * l->pp, acc ? "on " : "off", e, w);
            mgt_run_destroy(run);
        }
        mgt_run_destroy(ref);
    }
    /* the Llama-style model under every layout, without accumulation (its paths are GPT-2's): TP
       splits its query and key/value heads and SwiGLU's gate and up columns, the untied head needs
       no all-reduce between the first and last stage */
    llama = 1;
    config(&cfg, &one, 0, "llama-one", quick, "fp32");
    ref = train(&cfg, steps, base, NULL);
    printf("     1 rank llama: loss %.6f -> %.6f over %d steps\n", base[0], base[steps - 1], steps);
    for (i = 0; i < n; i++) {
        const layout *l = &list[i];
        double e = 0, w;
        char name[64];
        snprintf(name, sizeof name, "llama-dp%d-tp%d-pp%d-z%d-%s", l->dp, l->tp, l->pp, l->zero, l->sched);
        if (only && !strstr(name, only)) continue;
        kinds = (l->dp > 1) + (l->tp > 1) + (l->pp > 1);
        if (passes == 1 && kinds > 0 && kinds < 3) continue; /* --once: one GPU and the mixtures of all three kinds only */
        if (lean && kinds == 3 && l->zero != 1) continue;      /* --lean: of those, the ZeRO 1 one */
        llama_runs++;
        config(&cfg, l, 0, name, quick, "fp32");
        run = train(&cfg, steps, got, NULL);
        for (s = 0; s < steps; s++) e = worse_of(e, fabs(got[s] - base[s]) / base[s]);
        w = weight_diff(run, ref);
        check(e <= 1e-5 && w <= 1e-3, "%-28s %d ranks: max loss difference %.2e, max weight difference %.2e", name, l->dp * l->tp * l->pp, e, w);
        mgt_run_destroy(run);
    }
    mgt_run_destroy(ref);
    /* tp 4 over 2 key/value heads: each rank holds the head its two query heads read, the pairs of
       replicas sum their gradients (here ZeRO 2's slices of them); they match one rank as every
       layout does, and a checkpoint moves tp 4 -> 1 rank -> tp 4 (one global copy of each head).
       Not with --no-kv (the sanitized CUDA run, where it would cost 20 s of CI's budget: the plain
       CUDA run and the sanitized CPU runs have it) */
    kv_heads = 2;
    if (kv && (!only || strstr("kv2-tp4", only))) {
        static const layout l = {2, 4, 1, 2, "1f1b"}, tp4 = {1, 4, 1, 0, "1f1b"};
        int third = steps / 3;
        char name[64];
        double e = 0, w;
        snprintf(name, sizeof name, "llama-kv2-dp%d-tp4-pp1-z%d", l.dp, l.zero);
        config(&cfg, &one, 0, "kv2-one", quick, "fp32");
        ref = train(&cfg, steps, base, NULL);
        config(&cfg, &l, 0, name, quick, "fp32");
        run = train(&cfg, steps, got, NULL);
        for (s = 0; s < steps; s++) e = worse_of(e, fabs(got[s] - base[s]) / base[s]);
        w = weight_diff(run, ref);
        check(e <= 1e-5 && w <= 1e-3, "%-28s %d ranks, key/value heads replicated twice: max loss difference %.2e, max weight difference %.2e", name,
              l.dp * l.tp, e, w);
#ifndef MGT_TEST_CUDA
        {
            long alike = replicas_alike(run);
            check(alike > 0, "%-28s the replicas of each key/value head hold the same bits (%ld elements compared)", name, alike);
        }
#endif
        mgt_run_destroy(run);
        mgt_run_destroy(ref);
        kv_runs = 4;
        config(&cfg, &tp4, 0, "kv2_moving", quick, "fp32");
        run = train(&cfg, third, got, NULL);
        mgt_run_save(run, NULL, 0);
        mgt_run_destroy(run);
        config(&cfg, &one, 0, "kv2_moving", quick, "fp32");
        run = train(&cfg, 2 * third, got, "latest");
        mgt_run_save(run, NULL, 0);
        mgt_run_destroy(run);
        config(&cfg, &tp4, 0, "kv2_moving", quick, "fp32");
        run = train(&cfg, steps, got, "latest");
#ifndef MGT_TEST_CUDA
        check(replicas_alike(run) > 0, "kv2_moving: after the move back to tp 4 the replicas hold the same bits");
#endif
        mgt_run_destroy(run);
        for (e = 0, s = 0; s < steps; s++) e = worse_of(e, fabs(got[s] - base[s]) / base[s]);
        check(e <= 1e-5, "llama kv2 checkpoint moved tp4 -> 1 rank -> tp4 at steps %d and %d: max loss difference %.2e over %d steps", third, 2 * third,
              e, steps);
    }
    kv_heads = 4;
    llama = 0;
    feature_count = feature_runs(quick, passes == 1, lean, only);
#ifndef MGT_TEST_CUDA
    /* a checkpoint of zero-bubble pp 2 x dp 2 ZeRO 1 (saved after the step's deferred W's) resumes under
       one rank, GPT-2 and Llama; with --only, when TEXT is in "zb-checkpoint" */
    for (llama = 0; llama < 2 && (!only || strstr("zb-checkpoint", only)); llama++) {
        const layout z = {2, 1, 2, 1, "zb"};
        const char *name = llama ? "llama_zb_to_one" : "zb_to_one";
        int third = steps / 3;
        double e = 0;
        config(&cfg, &one, 0, llama ? "llama_one_zb" : "one_zb", quick, "fp32");
        ref = train(&cfg, steps, base, NULL);
        mgt_run_destroy(ref);
        extra_set = "train.micro_batch=1";
        config(&cfg, &z, 0, name, quick, "fp32");
        extra_set = NULL;
        run = train(&cfg, third, got, NULL);
        mgt_run_save(run, NULL, 0);
        mgt_run_destroy(run);
        config(&cfg, &one, 0, name, quick, "fp32");
        run = train(&cfg, steps, got, "latest");
        mgt_run_destroy(run);
        for (s = 0; s < steps; s++) e = worse_of(e, fabs(got[s] - base[s]) / base[s]);
        check(e <= 1e-5, "%scheckpoint of zb pp2 dp2 zero1 at step %d resumed under 1 rank: max loss difference %.2e over %d steps", llama ? "llama " : "",
              third, e, steps);
    }
    llama = 0;
#endif
    if (only) return finish(dir, "layouts");

    /* a checkpoint of one layout resumes under another: dp2-zero3 -> tp2-pp2 -> 1 rank, GPT-2 and Llama */
    for (llama = 0; llama < 2; llama++) {
        const layout a = {2, 1, 1, 3, "1f1b"}, b = {1, 2, 2, 0, "1f1b"};
        int third = steps / 3;
        double e = moved_checkpoint_error(llama ? "llama_moving" : "moving", llama ? "llama_one_again" : "one_again", &a, NULL, &b, NULL, &one, NULL, quick);
        check(e <= 1e-5, "%scheckpoint moved dp2-zero3 -> tp2-pp2 -> 1 rank at steps %d and %d: max loss difference %.2e over %d steps",
              llama ? "llama " : "", third, 2 * third, e, steps);
    }
    llama = 0;
#ifndef MGT_TEST_CUDA /* the CPU build only: a checkpoint is the same gather on either backend, and the CUDA runs on the fakes are the suite's slowest */
    /* a checkpoint of interleaved 1F1B (pp 2 x 2 chunks: stage 0 holds blocks 0 and 2) resumes under
       one rank and under plain pp 2, GPT-2 and Llama */
    for (llama = 0; llama < 2; llama++) {
        const layout v = {1, 1, 2, 0, "1f1b"};
        int third = steps / 3, k;
        config(&cfg, &one, 0, llama ? "llama_one_v" : "one_v", quick, "fp32");
        ref = train(&cfg, steps, base, NULL);
        mgt_run_destroy(ref);
        for (k = 0; k < 2; k++) {
            const char *name = k ? (llama ? "llama_v2_to_pp2" : "v2_to_pp2") : (llama ? "llama_v2_to_one" : "v2_to_one");
            double e = 0;
            extra_set = "parallel.pp_virtual=2 train.micro_batch=2";
            config(&cfg, &v, 0, name, quick, "fp32");
            extra_set = NULL;
            run = train(&cfg, third, got, NULL);
            mgt_run_save(run, NULL, 0);
            mgt_run_destroy(run);
            config(&cfg, k ? &v : &one, 0, name, quick, "fp32");
            run = train(&cfg, steps, got, "latest");
            mgt_run_destroy(run);
            for (s = 0; s < steps; s++) e = worse_of(e, fabs(got[s] - base[s]) / base[s]);
            check(e <= 1e-5, "%scheckpoint of pp2 x 2 chunks at step %d resumed under %s: max loss difference %.2e over %d steps", llama ? "llama " : "", third,
                  k ? "pp2" : "1 rank", e, steps);
        }
    }
    /* sequence parallelism and selective recompute change what moves, not what is stored: a checkpoint
       of tp2 sp selective resumes under one rank, then under dp2 x tp2 ZeRO 3 with sp, GPT-2 and Llama */
    for (llama = 0; llama < 2; llama++) {
        const layout tp2 = {1, 2, 1, 0, "1f1b"}, dptp = {2, 2, 1, 3, "1f1b"};
        int third = steps / 3;
        double e = moved_checkpoint_error(llama ? "llama_sp_moving" : "sp_moving", llama ? "llama_one_sp" : "one_sp", &tp2,
                                          "parallel.sp=1 train.recompute=selective", &one, NULL, &dptp, "parallel.sp=1", quick);
        check(e <= 1e-5, "%scheckpoint moved tp2 sp selective -> 1 rank -> dp2 tp2 zero3 sp at steps %d and %d: max loss difference %.2e over %d steps",
              llama ? "llama " : "", third, 2 * third, e, steps);
    }
    /* context parallelism changes where a sequence's rows are, not what is stored (the parameters are
       whole on every CP rank, ZeRO shards them over dp x cp): a checkpoint of cp2 ZeRO 3 resumes under
       one rank, then under tp2 x cp2 with a pipeline, GPT-2 and Llama */
    for (llama = 0; llama < 2; llama++) {
        const layout z3 = {1, 1, 1, 3, "1f1b"}, tppp = {1, 2, 2, 0, "1f1b"};
        int third = steps / 3;
        double e = moved_checkpoint_error(llama ? "llama_cp_moving" : "cp_moving", llama ? "llama_one_cp" : "one_cp", &z3, "parallel.cp=2", &one, NULL,
                                          &tppp, "parallel.cp=2", quick);
        check(e <= 1e-5, "%scheckpoint moved cp2 zero3 -> 1 rank -> cp2 tp2 pp2 at steps %d and %d: max loss difference %.2e over %d steps",
              llama ? "llama " : "", third, 2 * third, e, steps);
    }
    llama = 0;
#endif
    /* bf16 storage (fp32 master weights and gradients): a subset covering dp, ZeRO 1/2/3, tp, pp with
       both schedules and a mixture, against one bf16 rank */
    {
        static const layout sub[] = {
#ifdef MGT_TEST_CUDA
            {1, 1, 1, 0, "1f1b"},
#endif
            {2, 1, 1, 0, "1f1b"}, {2, 1, 1, 1, "1f1b"}, {2, 1, 1, 2, "1f1b"}, {2, 1, 1, 3, "1f1b"}, {1, 2, 1, 0, "1f1b"},
            {1, 1, 2, 0, "gpipe"}, {1, 1, 2, 0, "1f1b"}, {2, 2, 2, 1, "1f1b"}, {2, 1, 2, 3, "gpipe"},
        };
        double worst_loss = 0, worst_w = 0;
#ifdef MGT_TEST_CUDA
        long cudnn_start = mgt_fake_cudnn_executions();
#endif
        config(&cfg, &one, 0, "one_bf16", quick, "bf16");
        ref = train(&cfg, steps, base, NULL);
        printf("     1 rank bf16: loss %.6f -> %.6f over %d steps\n", base[0], base[steps - 1], steps);
        for (i = 0; i < (int)(sizeof sub / sizeof sub[0]); i++) {
            const layout *l = &sub[i];
            double e = 0, w;
            char name[64];
            /* --lean: the 16-bit sizes of ZeRO 3's shards, tp, pp and the mixture (the sanitizers' concern) */
            if (lean && ((l->dp > 1 && l->tp == 1 && l->pp == 1 && l->zero != 3) || !strcmp(l->sched, "gpipe"))) continue;
            bf16_runs++;
            snprintf(name, sizeof name, "bf16-dp%d-tp%d-pp%d-z%d-%s", l->dp, l->tp, l->pp, l->zero, l->sched);
            config(&cfg, l, 0, name, quick, "bf16");
            run = train(&cfg, steps, got, NULL);
            for (s = 0; s < steps; s++) e = worse_of(e, fabs(got[s] - base[s]) / base[s]);
            w = weight_diff_by(run, ref, 1);
            worst_loss = fmax(worst_loss, e);
            worst_w = fmax(worst_w, w);
            check(e <= BF16_LOSS_TOL && w <= BF16_WEIGHT_TOL, "%-28s %d ranks: max loss difference %.2e, max weight difference %.2e", name,
                  l->dp * l->tp * l->pp, e, w);
            mgt_run_destroy(run);
        }
#ifdef MGT_TEST_CUDA
        { /* the GPU runs above ran attention through cuDNN's fused graphs (the cuDNN fake counts them); a
             cuDNN that refuses every plan (MGT_FAKE_CUDNN_REFUSE=1, as a real one may refuse what the fake
             accepts) leaves the backend's own kernel, after a notice, within the same bounds */
            long ran = mgt_fake_cudnn_executions(), after;
            double e = 0, w;
            setenv("MGT_FAKE_CUDNN_REFUSE", "1", 1);
            config(&cfg, &one, 0, "bf16-cudnn-refused", quick, "bf16");
            run = train(&cfg, steps, got, NULL);
            unsetenv("MGT_FAKE_CUDNN_REFUSE");
            after = mgt_fake_cudnn_executions();
            for (s = 0; s < steps; s++) e = worse_of(e, fabs(got[s] - base[s]) / base[s]);
            w = weight_diff_by(run, ref, 1);
            check(ran > cudnn_start && after == ran && e <= BF16_LOSS_TOL && w <= BF16_WEIGHT_TOL,
                  "bf16 attention: %ld cuDNN executions in the subset, %ld with every plan refused (the own kernel): max loss difference %.2e, "
                  "max weight difference %.2e", ran - cudnn_start, after - ran, e, w);
            mgt_run_destroy(run);
        }
#endif
        mgt_run_destroy(ref);
        printf("     bf16 spread over the subset: loss %.2e, weights %.2e\n", worst_loss, worst_w);
    }
    /* the Llama-style model in bf16 (RMSNorm, RoPE and SwiGLU round as GPT-2's ops do): dp with
       ZeRO 3, tp (heads and gate/up columns split), pp, against one bf16 rank, the same bounds */
    {
        static const layout sub[] = {{2, 1, 1, 3, "1f1b"}, {1, 2, 1, 0, "1f1b"}, {1, 1, 2, 0, "1f1b"}, {2, 2, 2, 1, "1f1b"}};
        llama = 1;
        config(&cfg, &one, 0, "llama_one_bf16", quick, "bf16");
        ref = train(&cfg, steps, base, NULL);
        for (i = 0; i < (int)(sizeof sub / sizeof sub[0]); i++) {
            const layout *l = &sub[i];
            double e = 0, w;
            char name[64];
            if (lean && l->dp * l->tp * l->pp < 8) continue; /* --lean: the mixture */
            bf16_runs++;
            snprintf(name, sizeof name, "llama-bf16-dp%d-tp%d-pp%d-z%d", l->dp, l->tp, l->pp, l->zero);
            config(&cfg, l, 0, name, quick, "bf16");
            run = train(&cfg, steps, got, NULL);
            for (s = 0; s < steps; s++) e = worse_of(e, fabs(got[s] - base[s]) / base[s]);
            w = weight_diff_by(run, ref, 1);
            check(e <= BF16_LOSS_TOL && w <= BF16_WEIGHT_TOL, "%-28s %d ranks: max loss difference %.2e, max weight difference %.2e", name,
                  l->dp * l->tp * l->pp, e, w);
            mgt_run_destroy(run);
        }
        mgt_run_destroy(ref);
        llama = 0;
    }
#ifdef MGT_TEST_CUDA
    check(gpu_runs == matrix_runs + llama_runs + kv_runs + feature_count + 6 + bf16_runs + 1,
          "%d runs on the CUDA backend (the matrix %s, the Llama matrix, replicated key/value heads, the moving checkpoints, the bf16 subsets, cuDNN refused)",
          gpu_runs, passes == 2 ? "twice" : "once");
#else
    (void)llama_runs;
    (void)kv_runs;
    (void)feature_count;
#endif
    return finish(dir, "layouts");
}
