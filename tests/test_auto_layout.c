/* parallel.layout = auto (mgt_config_resolve_layout): the layout it writes into the config is the
   fastest of a direct mgt_plan_search that fits the machine, and a run made from it has that many
   ranks. GPUs are a table of fake ones handed to mgt_cuda_use (probe and info only: the search prices
   them as the simulator's H100 and checks their free memory as mgt_run_create would), so the GPU path
   runs here without a GPU; the CPU path runs on this machine's cores. Checked: the choice and the
   runner-up equal the first two of the direct search; a layout that does not fit the GPUs' memory is
   never chosen (the fastest one is made not to fit by 1 byte); pinned keys (--set, or beside auto in a
   preset) are kept and the preset's own are replaced when auto comes from outside it; too few GPUs for
   a layout of all of them falls back to fewer; mgt_run_create refuses a layout not chosen; the CPU's
   choice trains with its ranks. */
#define MGT_IMPLEMENTATION
#include "mgt.h"
#include <stdio.h>
#include <string.h>

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

static void set(mgt_config *cfg, const char *kv) {
    if (mgt_config_set(cfg, kv) != MGT_OK) { printf("FAIL --set %s: %s\n", kv, mgt_last_error()); failures++; }
}

/* ---- fake GPUs: fake_gpus H100s with fake_free bytes free each */
static int fake_gpus = 4;
static double fake_free = 80.0 * 1073741824.0;
static int fake_probe(int *devices, char *why, size_t cap) { (void)why; (void)cap; *devices = fake_gpus; return 0; }
static int fake_info(int device, mgt_gpu_info *out) {
    if (device < 0 || device >= fake_gpus) return -1;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "NVIDIA H100 80GB HBM3");
    out->memory_total = (size_t)(80.0 * 1073741824.0);
    out->memory_free = (size_t)fake_free;
    out->sm_count = 132, out->cc_major = 9;
    return 0;
}
static mgt_cuda_api fake_api;

/* a small model: 4 heads (tp 1, 2, 4), layers for pp, a batch for dp and micro-batches; bf16 on GPUs */
static void small(mgt_config *cfg, int layers, const char *device) {
    char kv[64];
    mgt_config_init(cfg);
    snprintf(kv, sizeof kv, "model.n_layer=%d", layers); set(cfg, kv);
    set(cfg, "model.n_head=4");
    set(cfg, "model.d_model=96");
    set(cfg, "model.seq_len=32");
    set(cfg, "model.vocab_size=256");
    set(cfg, "train.global_batch=16");
    set(cfg, "data.train=");
    set(cfg, "data.val=");
    snprintf(kv, sizeof kv, "parallel.device=%s", device); set(cfg, kv);
    if (!strcmp(device, "cuda")) set(cfg, "precision.dtype=bf16");
}

static int same(const mgt_layout_choice *a, const mgt_layout_choice *b) {
    return a->dp == b->dp && a->tp == b->tp && a->pp == b->pp && a->zero == b->zero && a->micro_batch == b->micro_batch && a->recompute == b->recompute &&
           a->pp_schedule == b->pp_schedule && a->step_s == b->step_s;
}
static void show(const char *what, const mgt_layout_choice *c) {
    printf("%s dp %d tp %d pp %d zero %d micro %d recompute %d schedule %d: PREDICTED %.4f ms, %.0f tokens/s, %.4f GiB\n", what, c->dp, c->tp, c->pp, c->zero,
           c->micro_batch, c->recompute, c->pp_schedule, c->step_s * 1e3, c->tokens_per_s, c->mem_gib);
}

/* the direct search the resolution must agree with: world fake H100s with fake_free each */
static int direct(const mgt_config *cfg, int world, mgt_layout_search *found) {
    mgt_sim_options o;
    mgt_config base = *cfg;
    mgt_sim_options_init(&o);
    if (mgt_sim_device_find("h100", 0, &o.device) != MGT_OK) return 0;
    o.device.mem_gib = fake_free / 1073741824.0;
    o.gpus_per_node = fake_gpus;
    base.parallel.layout = MGT_LAYOUT_MANUAL;
    if (mgt_plan_search(&base, &o, world, found) != MGT_OK || found->count < 2) {
        printf("FAIL direct search: %s (%d layouts)\n", mgt_last_error(), found->count);
        failures++;
        return 0;
    }
    return 1;
}

/* the layout a resolved config holds equals c (the pinned keys aside) */
static int holds(const mgt_config *cfg, const mgt_layout_choice *c) {
    return cfg->parallel.dp == c->dp && cfg->parallel.tp == c->tp && cfg->parallel.pp == c->pp && cfg->train.micro_batch == c->micro_batch &&
           cfg->train.recompute == c->recompute && (c->dp == 1 || cfg->parallel.zero == c->zero) && (c->pp == 1 || cfg->parallel.pp_schedule == c->pp_schedule);
}

/* whether cfg with layout c fits the fake GPUs, as mgt_run_create checks it */
static int fits(const mgt_config *cfg, const mgt_layout_choice *c) {
    mgt_config t = *cfg;
    mgt_fit fit;
    t.parallel.layout = MGT_LAYOUT_MANUAL;
    t.parallel.dp = c->dp; t.parallel.tp = c->tp; t.parallel.pp = c->pp; t.parallel.zero = c->zero;
    t.train.micro_batch = c->micro_batch; t.train.recompute = c->recompute; t.parallel.pp_schedule = c->pp_schedule;
    return mgt_plan_fit(&t, &fit) == MGT_OK && fit.fits;
}

static void gpus(void) {
    mgt_config cfg, again;
    mgt_layout_auto a;
    mgt_layout_search found;
    mgt_run *run;
    int i, chosen_at = -1;
    double t0;
    fake_api.abi = MGT_CUDA_ABI;
    fake_api.probe = fake_probe;
    fake_api.info = fake_info;
    mgt_cuda_use(&fake_api);

    /* 1. every GPU free to hold anything: the choice is the direct search's fastest, the runner-up its second */
    small(&cfg, 8, "cuda");
    set(&cfg, "parallel.layout=auto");
    CHECK(mgt_run_create(&run, &cfg) == MGT_ERROR_CONFIG && strstr(mgt_last_error(), "mgt_config_resolve_layout"),
          "mgt_run_create of a layout not chosen: %s", mgt_last_error());
    t0 = mgt_now();
    if (mgt_config_resolve_layout(&cfg, &a) != MGT_OK) { printf("FAIL resolve on 4 H100s: %s\n", mgt_last_error()); failures++; return; }
    printf("4 fake H100s: %d layouts simulated in %.3f s (the call took %.3f s)\n", a.simulated, a.search_s, mgt_now() - t0);
    show("  chosen   ", &a.chosen);
    show("  runner-up", &a.runner_up);
    CHECK(a.searched && a.on_gpus && a.devices == 4 && !strcmp(a.device, "h100") && a.pinned == 0, "searched %d on_gpus %d devices %d device %s pinned %d",
          a.searched, a.on_gpus, a.devices, a.device, a.pinned);
    CHECK(a.search_s > 0 && a.search_s < 30, "the search took %.2f s", a.search_s);
    if (direct(&cfg, 4, &found)) {
        CHECK(same(&a.chosen, &found.layouts[0]), "the choice is not the direct search's fastest");
        CHECK(a.has_runner_up && same(&a.runner_up, &found.layouts[1]), "the runner-up is not the direct search's second");
        CHECK(a.simulated == found.count, "%d layouts simulated, the direct search %d", a.simulated, found.count);
        CHECK(holds(&cfg, &found.layouts[0]), "the config holds dp %d tp %d pp %d micro %d, not the choice", cfg.parallel.dp, cfg.parallel.tp,
              cfg.parallel.pp, cfg.train.micro_batch);
        mgt_layout_search_free(&found);
    }
    CHECK(cfg.parallel.layout == MGT_LAYOUT_AUTO && mgt_config_validate(&cfg) == MGT_OK, "resolved: layout %d, %s", cfg.parallel.layout, mgt_last_error());
    again = cfg;
    CHECK(mgt_config_resolve_layout(&again, &a) == MGT_OK && !a.searched && !memcmp(&again, &cfg, sizeof cfg), "a second call changed the config");

    /* 2. the fastest layout made not to fit by 1 byte: never chosen; the choice fits, and every faster layout does not */
    {
        mgt_config t;
        mgt_fit fit;
        mgt_layout_choice fastest;
        small(&cfg, 8, "cuda");
        set(&cfg, "parallel.layout=auto");
        if (!direct(&cfg, 4, &found)) return;
        fastest = found.layouts[0];
        t = cfg;
        t.parallel.layout = MGT_LAYOUT_MANUAL;
        t.parallel.dp = fastest.dp; t.parallel.tp = fastest.tp; t.parallel.pp = fastest.pp; t.parallel.zero = fastest.zero;
        t.train.micro_batch = fastest.micro_batch; t.train.recompute = fastest.recompute; t.parallel.pp_schedule = fastest.pp_schedule;
        if (mgt_plan_fit(&t, &fit) != MGT_OK || fit.gpu_need <= 0) { printf("FAIL the fastest's need: %s\n", mgt_last_error()); failures++; return; }
        mgt_layout_search_free(&found);
        fake_free = fit.gpu_need - 1;
        printf("GPUs of %.0f bytes free (the fastest layout needs %.0f):\n", fake_free, fit.gpu_need);
        if (mgt_config_resolve_layout(&cfg, &a) != MGT_OK) { printf("FAIL resolve on small GPUs: %s\n", mgt_last_error()); failures++; }
        else if (direct(&cfg, 4, &found)) {
            show("  chosen   ", &a.chosen);
            CHECK(!same(&a.chosen, &fastest), "the layout that does not fit was chosen");
            CHECK(fits(&cfg, &a.chosen), "the choice does not fit");
            for (i = 0; i < found.count; i++) {
                if (same(&found.layouts[i], &a.chosen)) { chosen_at = i; break; }
                CHECK(!fits(&cfg, &found.layouts[i]), "layout %d of the search, faster than the choice, fits", i);
            }
            CHECK(chosen_at >= 0, "the choice is not a layout of the direct search");
            printf("  the choice is the direct search's layout %d; the %d before it do not fit\n", chosen_at, chosen_at);
            mgt_layout_search_free(&found);
        }
        fake_free = 80.0 * 1073741824.0;
    }

    /* 3. pinned: tp 2 and recompute = full by --set; a preset's dp pinned beside its own auto, replaced by auto from outside it */
    small(&cfg, 8, "cuda");
    set(&cfg, "parallel.layout=auto");
    set(&cfg, "parallel.tp=2");
    if (mgt_config_resolve_layout(&cfg, &a) == MGT_OK && direct(&cfg, 4, &found)) {
        for (i = 0; i < found.count && found.layouts[i].tp != 2; i++) {}
        CHECK(a.pinned == 1 && !strcmp(a.pins, "parallel.tp = 2") && cfg.parallel.tp == 2 && i < found.count && same(&a.chosen, &found.layouts[i]),
              "tp 2 pinned: pins '%s', chose tp %d", a.pins, cfg.parallel.tp);
        mgt_layout_search_free(&found);
    } else CHECK(0, "tp 2 pinned: %s", mgt_last_error());
    small(&cfg, 8, "cuda");
    set(&cfg, "parallel.layout=auto");
    set(&cfg, "train.recompute=full"); /* recompute is tried for every layout then, not only where none does not fit */
    if (mgt_config_resolve_layout(&cfg, &a) == MGT_OK && direct(&cfg, 4, &found)) {
        for (i = 0; i < found.count && found.layouts[i].recompute != 1; i++) {}
        CHECK(cfg.train.recompute == MGT_RECOMPUTE_FULL && a.chosen.recompute == 1 && i < found.count && same(&a.chosen, &found.layouts[i]) &&
              a.eligible >= 10, "recompute = full pinned: chose recompute %d among %d eligible", a.chosen.recompute, a.eligible);
        mgt_layout_search_free(&found);
    } else CHECK(0, "recompute pinned: %s", mgt_last_error());
    {
        static const char *beside = "[model]\nn_layer = 8\nn_head = 4\nd_model = 96\nseq_len = 32\n[train]\nglobal_batch = 16\n"
                                    "[data]\ntrain =\nval =\n[parallel]\ndevice = cuda\nlayout = auto\ndp = 2\n[precision]\ndtype = bf16\n";
        mgt_config_init(&cfg);
        CHECK(mgt_config_load_string(&cfg, beside, "beside.ini") == MGT_OK && mgt_config_resolve_layout(&cfg, &a) == MGT_OK && a.pinned == 1 &&
              cfg.parallel.dp == 2 && a.chosen.dp == 2, "dp = 2 beside auto in the preset: pinned %d, dp %d (%s)", a.pinned, cfg.parallel.dp, mgt_last_error());
        mgt_config_init(&cfg);
        CHECK(mgt_config_load_string(&cfg, "[parallel]\ndp = 3\n", "manual.ini") == MGT_OK, "load");
        small(&again, 8, "cuda");
        cfg.model = again.model; cfg.train.global_batch = 16; cfg.data = again.data; cfg.parallel.device = MGT_DEVICE_CUDA; cfg.precision = again.precision;
        set(&cfg, "parallel.layout=auto"); /* from outside the preset: its dp = 3 (which does not divide the batch) gives way */
        CHECK(mgt_config_validate(&cfg) == MGT_OK && mgt_config_resolve_layout(&cfg, &a) == MGT_OK && a.pinned == 0 && cfg.parallel.dp * cfg.parallel.tp * cfg.parallel.pp == 4,
              "the preset's dp = 3 under auto from --set: pinned %d, %d ranks (%s)", a.pinned, cfg.parallel.dp * cfg.parallel.tp * cfg.parallel.pp, mgt_last_error());
    }

    /* 4. 3 GPUs and 2 layers: no layout of 3 (tp 3 and dp 3 divide nothing, pp 3 has no 3 blocks): the fastest of 2 */
    fake_gpus = 3;
    small(&cfg, 2, "cuda");
    set(&cfg, "parallel.layout=auto");
    if (mgt_config_resolve_layout(&cfg, &a) == MGT_OK && direct(&cfg, 2, &found)) {
        CHECK(cfg.parallel.dp * cfg.parallel.tp * cfg.parallel.pp == 2 && same(&a.chosen, &found.layouts[0]), "3 GPUs: chose %d ranks",
              cfg.parallel.dp * cfg.parallel.tp * cfg.parallel.pp);
        mgt_layout_search_free(&found);
    } else CHECK(0, "3 GPUs: %s", mgt_last_error());
    fake_gpus = 4;
    mgt_cuda_use(NULL);
}

/* the CPU: layouts of 1 and 2 ranks (parallel.threads = 2) priced by running their ops; the run made
   from the choice has its ranks and trains a step */
static void cpu(void) {
    mgt_config cfg;
    mgt_layout_auto a;
    mgt_run *run;
    uint32_t rows[16 * 33];
    int i;
    small(&cfg, 2, "cpu");
    set(&cfg, "parallel.threads=2");
    set(&cfg, "parallel.layout=auto");
    if (mgt_config_resolve_layout(&cfg, &a) != MGT_OK) { printf("FAIL resolve on the CPU: %s\n", mgt_last_error()); failures++; return; }
    printf("CPU, 2 threads: %d layouts simulated in %.3f s\n", a.simulated, a.search_s);
    show("  chosen   ", &a.chosen);
    show("  runner-up", &a.runner_up);
    CHECK(!a.on_gpus && !strcmp(a.device, "cpu") && a.devices == 2 && a.has_runner_up && a.simulated >= 10, "cpu search: device %s, %d devices, %d simulated",
          a.device, a.devices, a.simulated);
    CHECK(a.chosen.tokens_per_s >= a.runner_up.tokens_per_s && a.chosen.dp * a.chosen.tp * a.chosen.pp <= 2, "choice and runner-up out of order");
    CHECK(holds(&cfg, &a.chosen), "the config does not hold the choice");
    if (mgt_run_create(&run, &cfg) != MGT_OK) { printf("FAIL run of the choice: %s\n", mgt_last_error()); failures++; return; }
    CHECK(mgt_run_plan(run)->world == a.chosen.dp * a.chosen.tp * a.chosen.pp && mgt_run_plan(run)->dp == a.chosen.dp &&
          mgt_run_plan(run)->tp == a.chosen.tp && mgt_run_plan(run)->pp == a.chosen.pp, "the run has %d ranks", mgt_run_plan(run)->world);
    for (i = 0; i < 16 * 33; i++) rows[i] = (uint32_t)((i * 7) % 256);
    CHECK(mgt_run_step_tokens(run, rows) == MGT_OK, "a step of the choice: %s", mgt_last_error());
    mgt_run_destroy(run);
}

int main(void) {
    gpus();
    cpu();
    if (failures) { printf("test_auto_layout: %d failures\n", failures); return 1; }
    printf("test_auto_layout: ok\n");
    return 0;
}
