/* mgt.c - the driver: mgt train | sample | check | keys | prepare | bench

   Exit codes: 0 success, 1 failure at run time, 2 bad input (nothing was run), 130 interrupted
   (a checkpoint was written). Only this file turns library errors into exit codes. */
#define MGT_IMPLEMENTATION
#include "mgt.h"
#define MGT_TOKENIZER_IMPLEMENTATION
#include "data/tokenizer.h" /* defines: mgt_tok_open, mgt_tok_encode, mgt_tok_decode */
#define MGT_PREPARE_IMPLEMENTATION
#include "data/prepare.h"   /* defines: mgt_prepare_main */

#include <signal.h> /* defines: sigaction, SIGINT, SIGTERM */
#include <pthread.h> /* defines: pthread_create, pthread_join (the training thread under the dashboard) */
#define MGT_TUI_IMPLEMENTATION
#include "tui/tui.h" /* defines: mgt_tui_open, mgt_tui_frame, mgt_tui_close, mgt_tui_summary */

#ifndef MGT_NO_MAIN

static volatile sig_atomic_t mgt_stop_requested;
static void on_signal(int sig) { (void)sig; mgt_stop_requested = 1; }

static int exit_code(mgt_result r) {
    switch (r) {
    case MGT_OK: return 0;
    case MGT_ERROR_ARGUMENT: case MGT_ERROR_CONFIG: case MGT_ERROR_UNSUPPORTED: case MGT_ERROR_DATA: case MGT_ERROR_CHECKPOINT: return 2;
    default: return 1;
    }
}

static int fail(mgt_result r) {
    fprintf(stderr, "mgt: %s\n", mgt_last_error());
    return exit_code(r);
}

static void print_log(void *user, int level, const char *message) {
    (void)user;
    if (level == MGT_LOG_WARN) fprintf(stderr, "mgt: warning: %s\n", message);
    else printf("  %s\n", message);
    fflush(stdout);
}

static void usage(FILE *f) {
    fprintf(f,
            "mgt " MGT_VERSION_STRING ": train GPT-style transformers from an INI preset\n"
            "\n"
            "usage:\n"
            "  mgt train PRESET [--set section.key=value]... [--resume DIR|FILE|latest] [--no-tui] [--tui-frames N]\n"
            "  mgt sample CHECKPOINT [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K] [--seed S]\n"
            "  mgt check PRESET [--set section.key=value]...    print the resolved preset and the layout\n"
            "  mgt keys [--markdown]                            every preset key with its default and range\n"
            "  mgt prepare --tokenizer byte|gpt2 [--bpe-dir DIR] [--val-fraction F] INPUT... -o PREFIX\n"
            "  mgt bench PRESET [--steps N] [--set section.key=value]...   tokens/s and GFLOP/s\n"
            "  mgt plan PRESET [--gpus N] [--set section.key=value]...     memory and traffic per rank\n"
            "  mgt version\n");
}

/* PRESET plus --set overrides; other options are left to the caller through `extra` */
typedef struct options {
    const char *preset, *resume, *prompt;
    int no_tui, tokens, top_k, steps, markdown;
    double temperature;
    unsigned long long seed;
} options;

static int parse_common(int argc, char **argv, mgt_config *cfg, options *o, int need_preset) {
    int i;
    mgt_result r;
    mgt_config_init(cfg);
    for (i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--set") || !strcmp(a, "--resume") || !strcmp(a, "--steps")) {
            if (i + 1 >= argc) { fprintf(stderr, "mgt: %s needs a value\n", a); return 2; }
            i++;
            if (!strcmp(a, "--resume")) o->resume = argv[i];
            else if (!strcmp(a, "--steps")) o->steps = atoi(argv[i]);
            continue; /* --set is applied after the preset is loaded */
        }
        if (!strcmp(a, "--no-tui")) { o->no_tui = 1; continue; }
        if (a[0] == '-') { fprintf(stderr, "mgt: unknown option %s\n\n", a); usage(stderr); return 2; }
        if (o->preset) { fprintf(stderr, "mgt: one preset at a time (got %s and %s)\n", o->preset, a); return 2; }
        o->preset = a;
    }
    if (need_preset && !o->preset) { fprintf(stderr, "mgt: %s needs a preset file, for example presets/quickstart.ini\n\n", argv[1]); usage(stderr); return 2; }
    if (o->preset && (r = mgt_config_load(cfg, o->preset)) != MGT_OK) return fail(r);
    for (i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--set") && (r = mgt_config_set(cfg, argv[++i])) != MGT_OK) return fail(r);
    if ((r = mgt_config_validate(cfg)) != MGT_OK) return fail(r);
    return 0;
}

static void format_bytes(double b, char *out, size_t cap) {
    if (b >= 1073741824.0) snprintf(out, cap, "%.2f GiB", b / 1073741824.0);
    else if (b >= 1048576.0) snprintf(out, cap, "%.1f MiB", b / 1048576.0);
    else snprintf(out, cap, "%.0f KiB", b / 1024.0);
}

/* ---- mgt train under the dashboard: training on a thread of its own, the view on the main one ---- */

typedef struct train_ctl {
    mgt_run *run;
    int stop, pause, save, done; /* requests from the main thread, and the thread's end (atomics) */
    mgt_result result;
    char error[1024];
} train_ctl;

static void *train_thread(void *arg) {
    train_ctl *c = (train_ctl *)arg;
    mgt_stats st;
    mgt_result r = MGT_OK;
    struct timespec nap = {0, 20 * 1000 * 1000};
    mgt_run_stats(c->run, &st);
    while (st.step < st.steps && !__atomic_load_n(&c->stop, __ATOMIC_SEQ_CST)) {
        if (__atomic_exchange_n(&c->save, 0, __ATOMIC_SEQ_CST)) {
            char path[1200];
            if ((r = mgt_run_save(c->run, path, sizeof path)) != MGT_OK) break;
        }
        if (__atomic_load_n(&c->pause, __ATOMIC_SEQ_CST)) {
            if (mgt_run_state(c->run) != MGT_STATE_PAUSED) mgt_run_set_state(c->run, MGT_STATE_PAUSED);
            nanosleep(&nap, NULL);
            continue;
        }
        if (mgt_run_state(c->run) == MGT_STATE_PAUSED) mgt_run_set_state(c->run, MGT_STATE_RUNNING);
        if ((r = mgt_run_step(c->run)) != MGT_OK) break;
        mgt_run_stats(c->run, &st);
    }
    if (r != MGT_OK) snprintf(c->error, sizeof c->error, "%s", mgt_last_error()); /* the message is per thread */
    c->result = r;
    mgt_run_set_state(c->run, r != MGT_OK ? MGT_STATE_FAILED : st.step >= st.steps ? MGT_STATE_FINISHED : MGT_STATE_RUNNING);
    __atomic_store_n(&c->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* warnings that arrive while the dashboard holds the terminal are printed after it closes (the
   events pane shows them meanwhile); information goes to the events pane only */
static pthread_mutex_t tui_log_mu = PTHREAD_MUTEX_INITIALIZER;
static char tui_log_text[4096];
static void tui_log(void *user, int level, const char *message) {
    size_t n;
    (void)user;
    if (level != MGT_LOG_WARN) return;
    pthread_mutex_lock(&tui_log_mu);
    n = strlen(tui_log_text);
    if (n + strlen(message) + 20 < sizeof tui_log_text) snprintf(tui_log_text + n, sizeof tui_log_text - n, "mgt: warning: %s\n", message);
    pthread_mutex_unlock(&tui_log_mu);
}

/* crash signals give the terminal back, then take their default course (a core, the exit status) */
static const int crash_signals[] = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL};
static void on_crash(int sig) {
    mgt_tui_restore_terminal();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Runs training to the end (or until q, Ctrl-C, SIGTERM, the frame limit) with the dashboard.
   Returns 0 (*interrupted set when it stopped early), 1 on a training error (message printed),
   or -1 when no dashboard could be opened (nothing was run). */
static int train_dashboard(mgt_run *run, const char *preset, int max_frames, int *interrupted) {
    train_ctl c;
    pthread_t th;
    mgt_tui *t;
    mgt_tui_options opt;
    struct sigaction sa, old[sizeof crash_signals / sizeof crash_signals[0]];
    char summary[1024];
    int paused = 0, stopping = 0, i;
    mgt_stats st;
    memset(&c, 0, sizeof c);
    memset(&opt, 0, sizeof opt);
    c.run = run;
    opt.preset = preset;
    opt.max_frames = max_frames;
    if (mgt_tui_open(&t, run, &opt) != 0) return -1;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_crash;
    sa.sa_flags = (int)SA_RESETHAND;
    for (i = 0; i < (int)(sizeof crash_signals / sizeof crash_signals[0]); i++) sigaction(crash_signals[i], &sa, &old[i]);
    atexit(mgt_tui_restore_terminal);
    mgt_set_logger(tui_log, NULL);
    if (pthread_create(&th, NULL, train_thread, &c) != 0) {
        mgt_tui_close(t);
        mgt_set_logger(print_log, NULL);
        fprintf(stderr, "mgt: cannot start the training thread\n");
        return 1;
    }
    while (!__atomic_load_n(&c.done, __ATOMIC_SEQ_CST)) {
        int flags = mgt_tui_frame(t);
        if (mgt_stop_requested || (flags & (MGT_TUI_STOP | MGT_TUI_CLOSED))) {
            if (!stopping) mgt_tui_message(t, "stopping after this step; a checkpoint follows");
            stopping = 1;
            __atomic_store_n(&c.stop, 1, __ATOMIC_SEQ_CST);
        }
        if ((flags & MGT_TUI_PAUSE) && !stopping) {
            paused = !paused;
            __atomic_store_n(&c.pause, paused, __ATOMIC_SEQ_CST);
            mgt_tui_message(t, paused ? "paused after this step: p resumes" : "resumed");
        }
        if (flags & MGT_TUI_SAVE) {
            __atomic_store_n(&c.save, 1, __ATOMIC_SEQ_CST);
            mgt_tui_message(t, "checkpoint requested: written before the next step");
        }
    }
    pthread_join(th, NULL);
    mgt_tui_refresh(t);
    mgt_tui_summary(t, summary, sizeof summary);
    mgt_tui_close(t);
    for (i = 0; i < (int)(sizeof crash_signals / sizeof crash_signals[0]); i++) sigaction(crash_signals[i], &old[i], NULL);
    mgt_set_logger(print_log, NULL);
    fputs(summary, stdout);
    fputs(tui_log_text, stderr);
    fflush(stdout);
    if (c.result != MGT_OK) {
        char path[1200];
        fprintf(stderr, "mgt: %s\n", c.error);
        if (mgt_checkpoint_latest(mgt_run_dir(run), path, sizeof path) == MGT_OK) fprintf(stderr, "mgt: the newest checkpoint is %s\n", path);
        return 1;
    }
    mgt_run_stats(run, &st);
    *interrupted = st.step < st.steps;
    return 0;
}

static int cmd_train(int argc, char **argv) {
    mgt_config cfg;
    options o;
    mgt_run *run;
    mgt_result r;
    mgt_stats st;
    char path[1200], mem[32];
    struct sigaction sa;
    int rc, interrupted = 0, start_step, tui_frames = 0, i, nargs = 0;
    char **args = (char **)malloc(sizeof(char *) * (size_t)(argc + 1));
    if (!args) return 1;
    for (i = 0; i < argc; i++) { /* --tui-frames N is the driver's, not a preset option */
        if (i >= 2 && !strcmp(argv[i], "--tui-frames") && i + 1 < argc) { tui_frames = atoi(argv[++i]); continue; }
        args[nargs++] = argv[i];
    }
    args[nargs] = NULL;
    argc = nargs;
    argv = args; /* freed at exit */
    memset(&o, 0, sizeof o);
    if ((rc = parse_common(argc, argv, &cfg, &o, 1))) return rc;
    mgt_set_logger(print_log, NULL);
    if ((r = mgt_run_create(&run, &cfg)) != MGT_OK) return fail(r);
    if (o.resume && (r = mgt_run_resume(run, o.resume)) != MGT_OK) { mgt_run_destroy(run); return fail(r); }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    mgt_run_stats(run, &st);
    start_step = st.step;
    format_bytes((double)(st.mem_current[MGT_MEM_PARAMS] + st.mem_current[MGT_MEM_GRADS] + st.mem_current[MGT_MEM_OPTIMIZER] +
                          st.mem_current[MGT_MEM_ACTIVATIONS] + st.mem_current[MGT_MEM_WORKSPACE]), mem, sizeof mem);
    rc = cfg.parallel.dp * cfg.parallel.tp * cfg.parallel.pp;
    printf("mgt %s | %s | %.2fM parameters | %d rank%s, cpu, %d threads | %d x %d tokens per step | %s | %s\n", MGT_VERSION_STRING, o.preset,
           (double)st.params / 1e6, rc, rc == 1 ? "" : "s", st.threads, cfg.train.global_batch, cfg.model.seq_len, mem, mgt_run_dir(run));
    if (start_step > 0) printf("resuming at step %d of %d\n", start_step, cfg.train.steps);
    fflush(stdout);
    /* the dashboard when both ends are a terminal, unless --no-tui; the log otherwise */
    if (!o.no_tui && isatty(0) && isatty(1) && getenv("TERM") && strcmp(getenv("TERM"), "dumb")) {
        rc = train_dashboard(run, o.preset, tui_frames, &interrupted);
        if (rc > 0) { mgt_run_destroy(run); return 1; }
        if (rc == 0) st.step = cfg.train.steps; /* skips the log loop */
    }
    while (st.step < cfg.train.steps) {
        if (mgt_stop_requested) { interrupted = 1; break; }
        if ((r = mgt_run_step(run)) != MGT_OK) {
            fprintf(stderr, "mgt: %s\n", mgt_last_error());
            if (mgt_checkpoint_latest(mgt_run_dir(run), path, sizeof path) == MGT_OK)
                fprintf(stderr, "mgt: the newest checkpoint is %s\n", path);
            mgt_run_destroy(run);
            return 1;
        }
        mgt_run_stats(run, &st);
        if (st.step % cfg.log.every == 0 || st.step == cfg.train.steps || st.step == start_step + 1) {
            printf("step %d/%d | loss %.4f | lr %.2e | norm %.2f | %.0f tok/s | %.1f ms\n", st.step, st.steps, st.loss, st.lr, st.grad_norm,
                   st.tokens_per_s, st.step_ms);
            fflush(stdout);
        }
    }
    if ((r = mgt_run_save(run, path, sizeof path)) != MGT_OK) { mgt_run_destroy(run); return fail(r); }
    mgt_run_stats(run, &st);
    format_bytes((double)(st.mem_peak[MGT_MEM_ACTIVATIONS]), mem, sizeof mem);
    if (interrupted) {
        printf("interrupted at step %d: checkpoint %s\nresume with: mgt train", st.step, path);
        for (rc = 2; rc < argc; rc++) { /* the same command, with --resume latest */
            if (!strcmp(argv[rc], "--resume")) { rc++; continue; }
            printf(strpbrk(argv[rc], " \t'\"$") ? " '%s'" : " %s", argv[rc]);
        }
        printf(" --resume latest\n");
        mgt_run_destroy(run);
        return 130;
    }
    printf("done: %d steps, final loss %.4f%s, %.1f s in steps, activations %s; checkpoint %s\n", st.step, st.loss,
           st.has_val_loss ? "" : "", st.elapsed_s, mem, path);
    if (st.has_val_loss) printf("val loss %.4f at step %d\n", st.val_loss, st.val_step);
    mgt_run_destroy(run);
    return 0;
}

static int cmd_sample(int argc, char **argv) {
    const char *checkpoint = NULL, *prompt = "";
    int tokens = 200, top_k = 0, i, n, rc = 0;
    double temperature = 1.0;
    unsigned long long seed = 1;
    mgt_run *run;
    mgt_result r;
    mgt_tokenizer *tok;
    char err[512];
    const mgt_config *cfg;
    uint16_t *ids = NULL;
    size_t n_ids = 0, cap = 0;
    int *prompt_ids, *out;
    for (i = 2; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "--prompt") && has) prompt = argv[++i];
        else if (!strcmp(a, "--tokens") && has) tokens = atoi(argv[++i]);
        else if (!strcmp(a, "--temperature") && has) temperature = atof(argv[++i]);
        else if (!strcmp(a, "--top-k") && has) top_k = atoi(argv[++i]);
        else if (!strcmp(a, "--seed") && has) seed = strtoull(argv[++i], NULL, 10);
        else if (a[0] == '-') { fprintf(stderr, "mgt sample: unknown option or missing value: %s\n\n", a); usage(stderr); return 2; }
        else checkpoint = a;
    }
    if (!checkpoint) { fprintf(stderr, "mgt sample: needs a checkpoint file or folder, for example runs/quickstart\n"); return 2; }
    if (tokens < 0 || temperature < 0 || top_k < 0) { fprintf(stderr, "mgt sample: --tokens, --temperature and --top-k must not be negative\n"); return 2; }
    if ((r = mgt_run_open(&run, checkpoint, 0)) != MGT_OK) return fail(r);
    cfg = mgt_run_config(run);
    if (mgt_tok_open(&tok, cfg->data.tokenizer == MGT_TOKENIZER_GPT2 ? "gpt2" : "byte", cfg->data.bpe_dir, err, sizeof err)) {
        fprintf(stderr, "mgt sample: %s\n", err);
        mgt_run_destroy(run);
        return 2;
    }
    if (mgt_tok_encode(tok, prompt, strlen(prompt), &ids, &n_ids, &cap)) { fprintf(stderr, "mgt sample: out of memory\n"); return 1; }
    prompt_ids = (int *)malloc(sizeof(int) * (n_ids + 1));
    out = (int *)malloc(sizeof(int) * (size_t)(tokens + 1));
    for (i = 0; i < (int)n_ids; i++) prompt_ids[i] = ids[i];
    if (n_ids == 0) prompt_ids[n_ids++] = mgt_tok_eot(tok) >= 0 ? mgt_tok_eot(tok) : '\n'; /* start of a document */
    n = mgt_run_generate(run, prompt_ids, (int)n_ids, out, tokens, temperature, top_k, seed);
    if (n < 0) rc = fail(MGT_ERROR_ARGUMENT);
    fputs(prompt, stdout);
    for (i = 0; i < n; i++) {
        const char *bytes;
        int len = mgt_tok_decode(tok, out[i], &bytes);
        if (len > 0) fwrite(bytes, 1, (size_t)len, stdout);
    }
    fputc('\n', stdout);
    free(ids);
    free(prompt_ids);
    free(out);
    mgt_tok_close(tok);
    mgt_run_destroy(run);
    return rc;
}

static int cmd_check(int argc, char **argv) {
    mgt_config cfg;
    options o;
    mgt__plan plan;
    mgt__layout lay;
    int rc, i, u, threads;
    char text[16384];
    memset(&o, 0, sizeof o);
    if ((rc = parse_common(argc, argv, &cfg, &o, 1))) return rc;
    if (cfg.data.train[0]) {
        size_t n;
        mgt_result r = mgt_shard_check(cfg.data.train, cfg.model.vocab_size, &n);
        if (r != MGT_OK) return fail(r);
        if (n < (size_t)cfg.model.seq_len + 1) { fprintf(stderr, "mgt: %s has %zu tokens, fewer than seq_len + 1\n", cfg.data.train, n); return 2; }
    }
    if (cfg.data.val[0]) {
        mgt_result r = mgt_shard_check(cfg.data.val, cfg.model.vocab_size, NULL);
        if (r != MGT_OK) return fail(r);
    }
    mgt_config_format(&cfg, text, sizeof text);
    printf("; %s, resolved\n%s\n", o.preset, text);
    mgt__plan_make(&cfg, &plan);
    threads = cfg.parallel.threads ? cfg.parallel.threads : mgt__cpu_count();
    printf("; layout\n");
    printf("ranks          %d = dp %d x tp %d x pp %d (TP fastest, then DP, then PP), zero %d, schedule %s, device cpu\n", plan.world, plan.dp, plan.tp,
           plan.pp, plan.zero, cfg.parallel.pp_schedule ? "gpipe" : "1f1b");
    printf("threads        %d per rank (%d in all)\n", threads / plan.world > 0 ? threads / plan.world : 1, threads);
    printf("batch          %d sequences of %d tokens = %d micro-batches of %d per DP rank (gradient accumulation %s)\n", cfg.train.global_batch,
           cfg.model.seq_len, plan.micro_steps, cfg.train.micro_batch, plan.micro_steps > 1 ? "on" : "off");
    printf("parameters     %zu (%.2fM); vocabulary padded to %d rows, %d per TP rank\n", mgt__global_params(&cfg), (double)mgt__global_params(&cfg) / 1e6,
           plan.Vp, plan.Vp / plan.tp);
    printf("stages        ");
    for (i = 0; i < plan.pp; i++) printf(" %d: blocks %d-%d%s%s;", i, plan.stage_first[i], plan.stage_first[i + 1] - 1, i == 0 ? " +embedding" : "",
                                         i == plan.pp - 1 ? " +head" : "");
    printf("\n\n rank  dp tp pp  blocks   local params  shard (1/dp)  tensors\n");
    if (!mgt__layout_alloc(&lay, &cfg, &plan)) return 1;
    for (i = 0; i < plan.world; i++) {
        int tpr = i % plan.tp, dpr = (i / plan.tp) % plan.dp, ppr = i / (plan.tp * plan.dp);
        size_t shard = 0;
        mgt__layout_make(&lay, &cfg, &plan, ppr, tpr);
        for (u = 0; u < lay.nu; u++) shard += lay.u[u].size / (size_t)plan.dp;
        printf("%5d %3d %2d %2d  %3d-%-3d  %12zu  %12zu  %d%s%s\n", i, dpr, tpr, ppr, plan.stage_first[ppr], plan.stage_first[ppr + 1] - 1, lay.size,
               plan.zero ? shard : lay.size, lay.n, ppr == 0 ? " +embedding" : "", ppr == plan.pp - 1 ? " +head" : "");
    }
    mgt__layout_free(&lay);
    return 0;
}

/* mgt plan PRESET [--gpus N]: what each rank holds and moves per step, from the closed-form plan */
static int cmd_plan(int argc, char **argv) {
    mgt_config cfg;
    options o;
    int rc, i, c, gpus = 0, world;
    double total[MGT_COLL_COUNT] = {0};
    char mem[MGT_MEM_COUNT][16], set[64];
    for (i = 2; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--gpus")) { gpus = atoi(argv[i + 1]); argv[i] = argv[i + 1] = (char *)"--no-tui"; }
    memset(&o, 0, sizeof o);
    if ((rc = parse_common(argc, argv, &cfg, &o, 1))) return rc;
    world = cfg.parallel.dp * cfg.parallel.tp * cfg.parallel.pp;
    if (gpus > 0 && gpus != world) { /* fill the machine with data parallelism */
        if (gpus % (cfg.parallel.tp * cfg.parallel.pp)) {
            fprintf(stderr, "mgt plan: --gpus %d does not divide by tp x pp = %d\n", gpus, cfg.parallel.tp * cfg.parallel.pp);
            return 2;
        }
        snprintf(set, sizeof set, "parallel.dp=%d", gpus / (cfg.parallel.tp * cfg.parallel.pp));
        if (mgt_config_set(&cfg, set) != MGT_OK || mgt_config_validate(&cfg) != MGT_OK) return fail(MGT_ERROR_CONFIG);
        world = gpus;
    }
    printf("plan of %s: %d ranks = dp %d x tp %d x pp %d, zero %d, %s, micro_batch %d, recompute %s\n\n", o.preset, world, cfg.parallel.dp, cfg.parallel.tp,
           cfg.parallel.pp, cfg.parallel.dp > 1 ? cfg.parallel.zero : 0, cfg.parallel.pp_schedule ? "gpipe" : "1f1b", cfg.train.micro_batch,
           cfg.train.recompute ? "full" : "none");
    printf(" rank  dp tp pp  blocks      params      grads  optimizer  activations    buffers      total\n");
    for (i = 0; i < world; i++) {
        mgt_rank_plan p;
        size_t sum = 0;
        if (mgt_plan_rank(&cfg, i, &p) != MGT_OK) return fail(MGT_ERROR_CONFIG);
        for (c = 0; c < MGT_MEM_COUNT; c++) { format_bytes((double)p.mem[c], mem[c], sizeof mem[c]); sum += p.mem[c]; }
        for (c = 0; c < MGT_COLL_COUNT; c++) total[c] += p.bytes[c];
        if (world > 16 && i >= 8 && i < world - 8) { if (i == 8) printf("  ...\n"); continue; }
        format_bytes((double)sum, set, sizeof set);
        printf("%5d %3d %2d %2d  %3d-%-3d %11s %10s %10s %12s %10s %10s\n", i, p.dp, p.tp, p.pp, p.first_block, p.last_block, mem[MGT_MEM_PARAMS],
               mem[MGT_MEM_GRADS], mem[MGT_MEM_OPTIMIZER], mem[MGT_MEM_ACTIVATIONS], mem[MGT_MEM_BUFFERS], set);
    }
    printf("\nbytes moved per step, all ranks (each rank counts what it sends or receives):\n");
    for (c = 0; c < MGT_COLL_COUNT; c++) {
        format_bytes(total[c], set, sizeof set);
        if (total[c] > 0) printf("  %-15s %s\n", mgt_coll_name(c), set);
    }
    return 0;
}

static int cmd_keys(int argc, char **argv) {
    int n, i, markdown = argc > 2 && !strcmp(argv[2], "--markdown");
    const mgt_key_info *k = mgt_config_keys(&n);
    if (markdown) printf("| key | type | default | valid | meaning |\n|---|---|---|---|---|\n");
    for (i = 0; i < n; i++) {
        char valid[64];
        if (k[i].choices[0]) snprintf(valid, sizeof valid, "%s", k[i].choices);
        else if (!strcmp(k[i].type, "STR")) snprintf(valid, sizeof valid, "path");
        else snprintf(valid, sizeof valid, "%g..%g", k[i].min, k[i].max);
        char name[80];
        snprintf(name, sizeof name, "%s.%s", k[i].section, k[i].name);
        if (markdown) printf("| `%s` | %s | `%s` | %s | %s |\n", name, k[i].type, k[i].def, valid, k[i].help);
        else printf("%-22s %-5s %-26s %-22s %s\n", name, k[i].type, k[i].def[0] ? k[i].def : "\"\"", valid, k[i].help);
    }
    return 0;
}

/* GFLOP/s of an n x n x n sgemm: on the calling thread alone, or split over the run's threads */
static double bench_sgemm(mgt_backend *be, int n, int pooled) {
    float *a = (float *)calloc((size_t)n * (size_t)n, sizeof(float)), *b = (float *)calloc((size_t)n * (size_t)n, sizeof(float));
    float *c = (float *)calloc((size_t)n * (size_t)n, sizeof(float));
    double t0, t = 0, flops = 2.0 * n * n * (double)n;
    int reps = 0, i;
    for (i = 0; i < n * n; i++) { a[i] = (float)(i % 7) * 0.1f; b[i] = (float)(i % 5) * 0.1f; }
    do {
        t0 = mgt__now();
        if (pooled) mgt__gemm(be, 0, 1, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n, NULL);
        else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        if (reps++ > 0) t += mgt__now() - t0; /* the first call warms caches and BLAS buffers */
    } while (t < 0.5 || reps < 4);
    free(a); free(b); free(c);
    return flops * (reps - 1) / t * 1e-9;
}

static int cmd_bench(int argc, char **argv) {
    mgt_config cfg;
    options o;
    mgt_run *run;
    mgt_result r;
    mgt_stats st;
    int rc, i, steps, warmup = 2, rows, vocab;
    uint16_t *tokens;
    double t0, elapsed, tok_s, gflops, sgemm1, sgemmN;
    memset(&o, 0, sizeof o);
    if ((rc = parse_common(argc, argv, &cfg, &o, 1))) return rc;
    steps = o.steps > 0 ? o.steps : 5;
    cfg.data.train[0] = cfg.data.val[0] = 0;  /* synthetic tokens: the benchmark needs no data */
    mgt__strlcpy(cfg.log.metrics, "none", sizeof cfg.log.metrics);
    cfg.checkpoint.every = 0;
    cfg.train.steps = warmup + steps;
    if ((r = mgt_run_create(&run, &cfg)) != MGT_OK) return fail(r);
    mgt_run_stats(run, &st);
    printf("bench %s: %.2fM parameters, L=%d NH=%d C=%d T=%d V=%d, batch %d (micro %d), recompute %s, %d threads\n", o.preset, (double)st.params / 1e6,
           cfg.model.n_layer, cfg.model.n_head, cfg.model.d_model, cfg.model.seq_len, cfg.model.vocab_size, cfg.train.global_batch,
           cfg.train.micro_batch, cfg.train.recompute ? "full" : "none", st.threads);
    fflush(stdout);
    sgemm1 = bench_sgemm(run->ranks[0].be, 1024, 0);
    sgemmN = bench_sgemm(run->ranks[0].be, 1024, 1);
    printf("sgemm 1024^3:   %.1f GFLOP/s on 1 thread, %.1f GFLOP/s on %d threads\n", sgemm1, sgemmN, st.threads);
    fflush(stdout);
    rows = cfg.train.global_batch * (cfg.model.seq_len + 1);
    vocab = cfg.data.tokenizer == MGT_TOKENIZER_GPT2 ? 50257 : 256;
    tokens = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)rows);
    for (i = 0; i < rows; i++) tokens[i] = (uint16_t)(mgt__hash3(7, 11, (uint64_t)i) % (uint64_t)vocab);
    t0 = 0;
    for (i = 0; i < warmup + steps; i++) {
        if (i == warmup) t0 = mgt__now();
        if ((r = mgt_run_step_tokens(run, tokens)) != MGT_OK) { free(tokens); mgt_run_destroy(run); return fail(r); }
    }
    elapsed = mgt__now() - t0;
    mgt_run_stats(run, &st);
    tok_s = (double)steps * cfg.train.global_batch * cfg.model.seq_len / elapsed;
    gflops = tok_s * st.flops_per_token * 1e-9;
    printf("train step:     %.1f ms, %.0f tokens/s, %.1f GFLOP/s (%.0f MFLOP per token), %.0f%% of the %d-thread sgemm\n",
           elapsed / steps * 1e3, tok_s, gflops, st.flops_per_token * 1e-6, 100.0 * gflops / sgemmN, st.threads);
    printf("memory peak:    params %.1f MiB, grads %.1f MiB, optimizer %.1f MiB, activations %.1f MiB\n",
           st.mem_peak[MGT_MEM_PARAMS] / 1048576.0, st.mem_peak[MGT_MEM_GRADS] / 1048576.0, st.mem_peak[MGT_MEM_OPTIMIZER] / 1048576.0,
           st.mem_peak[MGT_MEM_ACTIVATIONS] / 1048576.0);
    free(tokens);
    mgt_run_destroy(run);
    return 0;
}

int main(int argc, char **argv) {
    const char *cmd = argc > 1 ? argv[1] : "";
    if (!strcmp(cmd, "train")) return cmd_train(argc, argv);
    if (!strcmp(cmd, "sample")) return cmd_sample(argc, argv);
    if (!strcmp(cmd, "check")) return cmd_check(argc, argv);
    if (!strcmp(cmd, "keys")) return cmd_keys(argc, argv);
    if (!strcmp(cmd, "prepare")) return mgt_prepare_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc, argv);
    if (!strcmp(cmd, "plan")) return cmd_plan(argc, argv);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) { printf("mgt %s\n", MGT_VERSION_STRING); return 0; }
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) { usage(stdout); return 0; }
    if (cmd[0]) fprintf(stderr, "mgt: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return 2;
}
#endif /* MGT_NO_MAIN */
