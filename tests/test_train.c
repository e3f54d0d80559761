/* Training behaviour on one rank, on a generated corpus:
   - a run stopped at step k and resumed from its checkpoint gives bit-identical losses and weights;
   - full activation recomputation gives the same losses with less activation memory;
   - gradient accumulation (micro_batch < global_batch) gives the losses of one big batch;
   - the data order is a function of (seed, step) alone, and a bad checkpoint is refused;
   - a validation reaches the history, a rank far slower than the others is an event. */
#define MGT_IMPLEMENTATION
#include <pthread.h>

#include "mgt.h"
#include "train_util.h"
#include "fault_world.h"

static char dir[256];


static void base_config(mgt_config *cfg, const char *name) {
    char set[600];
    mgt_config_init(cfg);
    mgt_config_set(cfg, "model.n_layer=2");
    mgt_config_set(cfg, "model.n_head=2");
    mgt_config_set(cfg, "model.d_model=32");
    mgt_config_set(cfg, "model.seq_len=32");
    mgt_config_set(cfg, "train.steps=12");
    mgt_config_set(cfg, "train.global_batch=8");
    mgt_config_set(cfg, "train.micro_batch=4");
    mgt_config_set(cfg, "train.lr=3e-3");
    mgt_config_set(cfg, "train.warmup=3");
    mgt_config_set(cfg, "train.eval_every=0");
    mgt_config_set(cfg, "parallel.threads=2");
    mgt_config_set(cfg, "log.metrics=none");
    snprintf(set, sizeof set, "data.train=%s/corpus.bin", dir);
    mgt_config_set(cfg, set);
    mgt_config_set(cfg, "data.val=");
    snprintf(set, sizeof set, "checkpoint.dir=%s/%s", dir, name);
    mgt_config_set(cfg, set);
}

/* trains steps [from, to) of cfg, writing each step's loss into losses[step] */
static mgt_run *train(const mgt_config *cfg, int to, double *losses, const char *resume) {
    mgt_run *run;
    mgt_stats st;
    if (mgt_run_create(&run, cfg) != MGT_OK) { printf("FAIL create: %s\n", mgt_last_error()); exit(1); }
    if (resume && mgt_run_resume(run, resume) != MGT_OK) { printf("FAIL resume: %s\n", mgt_last_error()); exit(1); }
    mgt_run_stats(run, &st);
    while (st.step < to) {
        if (mgt_run_step(run) != MGT_OK) { printf("FAIL step: %s\n", mgt_last_error()); exit(1); }
        mgt_run_stats(run, &st);
        losses[st.step - 1] = st.loss;
    }
    return run;
}

/* continues run up to step `to` */
static void train_more(mgt_run *run, int to, double *losses) {
    mgt_stats st;
    mgt_run_stats(run, &st);
    while (st.step < to) {
        if (mgt_run_step(run) != MGT_OK) { printf("FAIL step: %s\n", mgt_last_error()); exit(1); }
        mgt_run_stats(run, &st);
        losses[st.step - 1] = st.loss;
    }
}

/* 12 steps, then the state a driver sets when training ends */
static void *train_steps_thread(void *arg) {
    mgt_run *run = (mgt_run *)arg;
    static double losses[12];
    train_more(run, 12, losses);
    mgt_run_set_state(run, MGT_STATE_FINISHED);
    return NULL;
}

static double max_rel_diff(const double *a, const double *b, int n) {
    double e = 0;
    int i;
    for (i = 0; i < n; i++) e = worse_of(e, fabs(a[i] - b[i]) / fabs(b[i]));
    return e;
}

int main(void) {
    mgt_config cfg;
    mgt_run *full, *first, *second, *run;
    double losses_full[12], losses_resumed[12], losses_recompute[12], losses_accum[12];
    char path[1200], file[600];
    mgt_stats st_full, st_re;
    int same_weights;

    make_workdir(dir, sizeof dir, "test_train", 200000, 1);

    /* 1. resume is bit-exact */
    base_config(&cfg, "full");
    full = train(&cfg, 12, losses_full, NULL);
    check(mgt_run_save(full, NULL, 0) == MGT_OK, "uninterrupted run saved at step 12");
    base_config(&cfg, "split");
    first = train(&cfg, 5, losses_resumed, NULL);
    check(mgt_run_save(first, path, sizeof path) == MGT_OK, "checkpoint at step 5: %s", path);
    mgt_run_destroy(first);
    second = train(&cfg, 12, losses_resumed, "latest");
    check(!memcmp(losses_full, losses_resumed, sizeof losses_full), "resumed at step 5: losses of steps 1..12 bit-identical to the uninterrupted run (last %.9f vs %.9f)",
          losses_resumed[11], losses_full[11]);
    {
        mgt__rank *a = &full->ranks[0], *b = &second->ranks[0];
        size_t bytes = sizeof(float) * a->lay.size;
        same_weights = !memcmp(a->params, b->params, bytes) && !memcmp(a->m, b->m, bytes) && !memcmp(a->v, b->v, bytes);
    }
    check(same_weights, "resumed run's weights and AdamW moments bit-identical after step 12");
    check(losses_full[11] < losses_full[0] - 0.5, "the model learns: loss %.3f -> %.3f", losses_full[0], losses_full[11]);
    mgt_run_stats(full, &st_full);
    mgt_run_destroy(second);

    /* 1b. sampling from a training run leaves its training unchanged */
    {
        double l1[12], l2[12];
        int prompt[1] = {'t'}, out[8];
        mgt_run *g1, *g2;
        base_config(&cfg, "gen1");
        g1 = train(&cfg, 3, l1, NULL);
        base_config(&cfg, "gen2");
        g2 = train(&cfg, 3, l2, NULL);
        check(mgt_run_generate(g2, prompt, 1, out, 8, 1.0, 0, 1) == 8, "generated 8 tokens from a training run");
        while (g1->step < 6) { mgt_run_step(g1); l1[g1->step - 1] = g1->loss; }
        while (g2->step < 6) { mgt_run_step(g2); l2[g2->step - 1] = g2->loss; }
        check(!memcmp(l1, l2, 6 * sizeof(double)), "training after sampling: losses bit-identical to a run that never sampled (%.6f)", l2[5]);
        mgt_run_destroy(g1);
        mgt_run_destroy(g2);
    }

    /* 2. recomputation: the same arithmetic in the same order, so the same bits, in less memory */
    base_config(&cfg, "recompute");
    mgt_config_set(&cfg, "train.recompute=full");
    mgt_config_set(&cfg, "model.n_layer=4");
    run = train(&cfg, 3, losses_recompute, NULL);
    mgt_run_stats(run, &st_re);
    mgt_run_destroy(run);
    base_config(&cfg, "norecompute");
    mgt_config_set(&cfg, "model.n_layer=4");
    run = train(&cfg, 3, losses_accum, NULL);
    mgt_run_stats(run, &st_full);
    mgt_run_destroy(run);
    check(!memcmp(losses_recompute, losses_accum, 3 * sizeof(double)), "recompute=full: losses bit-identical to recompute=none (%.9f)", losses_recompute[2]);
    check(st_re.mem_peak[MGT_MEM_ACTIVATIONS] * 2 < st_full.mem_peak[MGT_MEM_ACTIVATIONS],
          "recompute=full: activation memory %.2f MiB vs %.2f MiB without (4 layers)", st_re.mem_peak[MGT_MEM_ACTIVATIONS] / 1048576.0,
          st_full.mem_peak[MGT_MEM_ACTIVATIONS] / 1048576.0);
    /* selective: the norms and GELU again, from the same inputs through the same CPU loops (the
       fused residual + LayerNorm normalises the stored sum as LayerNorm alone does), so the same bits;
       its memory lies between: the GEMMs' and attention's outputs stay, per block */
    {
        double losses_selective[3];
        mgt_stats st_sel;
        base_config(&cfg, "selective");
        mgt_config_set(&cfg, "train.recompute=selective");
        mgt_config_set(&cfg, "model.n_layer=4");
        run = train(&cfg, 3, losses_selective, NULL);
        mgt_run_stats(run, &st_sel);
        mgt_run_destroy(run);
        check(!memcmp(losses_selective, losses_accum, 3 * sizeof(double)), "recompute=selective: losses bit-identical to recompute=none (%.9f)",
              losses_selective[2]);
        check(st_sel.mem_peak[MGT_MEM_ACTIVATIONS] < st_full.mem_peak[MGT_MEM_ACTIVATIONS] && st_sel.mem_peak[MGT_MEM_ACTIVATIONS] > st_re.mem_peak[MGT_MEM_ACTIVATIONS],
              "recompute=selective: activation memory %.2f MiB, between full's and none's", st_sel.mem_peak[MGT_MEM_ACTIVATIONS] / 1048576.0);
    }

    /* 3. gradient accumulation: 4 micro-batches of 2 = 1 batch of 8, to summation-order rounding */
    base_config(&cfg, "accum");
    mgt_config_set(&cfg, "train.micro_batch=2");
    run = train(&cfg, 12, losses_accum, NULL);
    mgt_run_destroy(run);
    check(max_rel_diff(losses_accum, losses_full, 12) < 1e-5, "micro_batch 2 x 4 vs 4 x 2: max relative loss difference %.2e over 12 steps (< 1e-5)",
          max_rel_diff(losses_accum, losses_full, 12));
    base_config(&cfg, "onebatch");
    mgt_config_set(&cfg, "train.micro_batch=8");
    run = train(&cfg, 12, losses_accum, NULL);
    mgt_run_destroy(run);
    check(max_rel_diff(losses_accum, losses_full, 12) < 1e-5, "micro_batch 8 x 1 vs 4 x 2: max relative loss difference %.2e (< 1e-5)",
          max_rel_diff(losses_accum, losses_full, 12));

    /* 4. the checkpoint is refused when damaged, and when written for another model */
    {
        FILE *f;
        long size;
        unsigned char byte;
        snprintf(file, sizeof file, "%s/full/step_00000012.safetensors", dir);
        f = fopen(file, "r+b");
        fseek(f, 0, SEEK_END);
        size = ftell(f);
        fseek(f, size - 5, SEEK_SET);
        byte = (unsigned char)fgetc(f);
        fseek(f, size - 5, SEEK_SET);
        fputc(byte ^ 1, f);
        fclose(f);
        base_config(&cfg, "full");
        mgt_run_create(&run, &cfg);
        check(mgt_run_resume(run, file) == MGT_ERROR_CHECKPOINT && strstr(mgt_last_error(), "checksum"), "damaged checkpoint refused: %s", mgt_last_error());
        mgt_run_destroy(run);
        snprintf(file, sizeof file, "%s/split", dir);
        base_config(&cfg, "other");
        mgt_config_set(&cfg, "model.d_model=64");
        mgt_run_create(&run, &cfg);
        check(mgt_run_resume(run, file) == MGT_ERROR_CHECKPOINT && strstr(mgt_last_error(), "shape") == NULL && strstr(mgt_last_error(), "[") != NULL,
              "checkpoint of another model refused: %s", mgt_last_error());
        mgt_run_destroy(run);
    }
    mgt_run_destroy(full);

    /* 5. checkpoints keep only the newest `keep` */
    {
        int count = 0;
        DIR *d;
        struct dirent *e;
        base_config(&cfg, "keep");
        mgt_config_set(&cfg, "checkpoint.every=2");
        mgt_config_set(&cfg, "checkpoint.keep=2");
        run = train(&cfg, 8, losses_accum, NULL);
        mgt_run_destroy(run);
        snprintf(file, sizeof file, "%s/keep", dir);
        d = opendir(file);
        while ((e = readdir(d))) count += mgt__checkpoint_step(e->d_name) >= 0;
        closedir(d);
        check(count == 2 && mgt_checkpoint_latest(file, path, sizeof path) == MGT_OK && strstr(path, "step_00000008"),
              "checkpoint.every=2 keep=2: %d files kept, newest %s", count, path);
    }
    /* a validation after the step was published reaches readers of the history (a dashboard's
       last screen showed the validation before it) */
    {
        mgt_stats h[8];
        double val = 0;
        int n;
        memset(h, 0, sizeof h);
        char set[600];
        base_config(&cfg, "val");
        snprintf(set, sizeof set, "data.val=%s/corpus.bin", dir);
        mgt_config_set(&cfg, set);
        run = train(&cfg, 3, losses_accum, NULL);
        n = published(run, h, 8, NULL, 0, NULL, 0).history_n;
        check(n == 3 && !h[2].has_val_loss, "history before validating: %d entries, the last without val_loss", n);
        if (mgt_run_eval(run, &val) != MGT_OK) printf("FAIL eval: %s\n", mgt_last_error());
        n = published(run, h, 8, NULL, 0, NULL, 0).history_n;
        check(n == 4 && h[3].step == 3 && h[3].has_val_loss && h[3].val_step == 3 && h[3].val_loss == val && h[3].loss == h[2].loss,
              "validation at step 3 published again with the step: %d entries, the last step %d, val %.4f at step %d", n, h[n > 0 ? n - 1 : 0].step,
              h[n > 0 ? n - 1 : 0].val_loss, h[n > 0 ? n - 1 : 0].val_step);
        mgt_run_destroy(run);
    }

    /* a reader on another thread (a dashboard) sees one moment: in every snapshot taken while two
       ranks train, the ranks' statistics are of the last step the history holds, and the state is
       not yet finished before the last step */
    {
        mgt_stats h[64];
        mgt_rank_stats rs[2];
        mgt_snapshot s;
        pthread_t thread;
        int reads = 0, mixed = 0, from = 0, last = 0, done = 0;
        base_config(&cfg, "snapshot");
        mgt_config_set(&cfg, "parallel.dp=2");
        run = train(&cfg, 0, losses_accum, NULL);
        pthread_create(&thread, NULL, train_steps_thread, run);
        while (!done) {
            memset(&s, 0, sizeof s);
            s.history_from = from;
            s.history = h;
            s.history_max = 64;
            s.ranks = rs;
            s.ranks_max = 2;
            mgt_run_snapshot(run, &s);
            from = s.history_first + s.history_n;
            if (s.history_n) last = h[s.history_n - 1].step;
            done = s.state == MGT_STATE_FINISHED;
            if (last && (rs[0].step != last || rs[1].step != last || (done && last != 12))) {
                if (!mixed++) printf("     mixed: history at step %d, ranks at %d and %d, %s\n", last, rs[0].step, rs[1].step, mgt_state_name(s.state));
            }
            reads += s.history_n > 0;
        }
        pthread_join(thread, NULL);
        check(!mixed && last == 12 && reads > 0, "snapshots of one moment while training: %d with new steps, %d mixed, the last at step %d", reads, mixed, last);
        mgt_run_destroy(run);
    }

    /* one of two DP ranks slower by s each step, with c the compute of a step: the other waits in
       the all-reduce, so rank 1 computes c + s against a mean of c + s/2, over the warning's 1.5x
       when s > 2c. s = 6c (at least 40 ms) gives 1.75x whatever the machine's speed (a fixed 40 ms
       was not enough under TSan on a loaded machine) */
    {
        mgt_event ev[64];
        mgt_rank_stats rs[2];
        fault_world fw;
        int n, i, warned = 0, false_alarm = 0;
        double slow_s = 0.04;
        base_config(&cfg, "slow");
        mgt_config_set(&cfg, "parallel.dp=2");
        run = fault_run_create(&cfg, &fw);
        train_more(run, 3, losses_accum);
        n = published(run, NULL, 0, NULL, 0, ev, 64).events_n;
        for (i = 0; i < n; i++) false_alarm += strstr(ev[i].text, "computed for") != NULL;
        n = published(run, NULL, 0, rs, 2, NULL, 0).ranks_n;
        for (i = 0; i < n; i++)
            if (6 * rs[i].compute_s > slow_s) slow_s = 6 * rs[i].compute_s;
        fw.slow_rank = 1;
        fw.slow_s = slow_s / run->plan.micro_steps; /* its embedding forward runs once per micro-batch */
        train_more(run, 6, losses_accum);
        fw.slow_rank = -1;
        n = published(run, NULL, 0, NULL, 0, ev, 64).events_n;
        for (i = 0; i < n; i++) warned += strstr(ev[i].text, "rank 1 computed for") != NULL;
        check(!false_alarm && warned >= 2, "a rank %.0f ms slower: %d slow-rank warnings in 6 steps (%d before, when both were alike)%s%s", slow_s * 1e3, warned,
              false_alarm, n ? ": " : "", n ? ev[n - 1].text : "");
        mgt_run_destroy(run);
        fault_world_free(&fw);
    }

    /* MFU cannot pass 100%: against a peak far below what a step does (a sgemm measured on a busy
       machine), the first step raises it to its own rate, says so, and MFU stays at most 1 */
    {
        mgt_event ev[64];
        mgt_stats st;
        int n, i, said = 0;
        base_config(&cfg, "peak");
        run = train(&cfg, 0, losses_accum, NULL);
        mgt_run_set_peak(run, 1e-6, "a test's low peak");
        train_more(run, 3, losses_accum);
        mgt_run_stats(run, &st);
        n = published(run, NULL, 0, NULL, 0, ev, 64).events_n;
        for (i = 0; i < n; i++) said += strstr(ev[i].text, "above the peak MFU was reckoned against (0.0, a test's low peak)") != NULL;
        check(st.has_mfu && st.mfu <= 1.0 && st.mfu > 0.1 && said == 1 && !strncmp(st.peak_source, "the fastest step of this run, step ", 35),
              "a step beats the peak: MFU %.3f against %.3g GFLOP/s (%s), %d event", st.mfu, st.peak_gflops, st.peak_source, said);
        mgt_run_destroy(run);
    }

    return finish(dir, "train");
}
