/* bench_tui.c - what drawing the dashboard costs training, measured inside one run. A benchmark,
   not part of the suite: tests/bench_tui.sh runs it in a terminal (tmux) and scales its figures.

     build/bench_tui [--window W] [--pairs N] [--aa] [--refresh-ms MS] PRESET [--set section.key=value]...

   Separate runs on a shared machine differ by more than the 1% to resolve, so the training thread
   alternates windows of W seconds (1) in which the dashboard draws and in which its thread only
   waits, N pairs (150) in a random order within each pair, and compares the mean step time of the
   two windows of each pair: neighbours in time share the machine's load. After a warm-up window and
   N pairs the run stops (q or Ctrl-C stop it sooner). --aa makes both windows of a pair quiet: the
   statistic's own noise. --refresh-ms MS makes the dashboard read and draw every MS ms, so that the
   cost of one screen stands out of the noise.

   The loop is mgt train's under the dashboard (training on a thread of its own, the view on the
   main one), through mgt.h's and tui/tui.h's public API. It prints the dashboard's summary (with
   MGT_TUI_DEBUG=1 its own CPU time too), then three lines "dashboard A/B: ...". Exit 0; 2 for a
   wrong argument or preset, or no terminal; 1 when a step failed. */
#define MGT_IMPLEMENTATION
#include "mgt.h" /* defines: mgt_run_create, mgt_run_step, mgt_run_stats, mgt_now */
#define MGT_TUI_IMPLEMENTATION
#include "tui/tui.h" /* defines: mgt_tui_open, mgt_tui_frame, mgt_tui_summary */

#include <math.h>    /* defines: sqrt */
#include <pthread.h> /* defines: pthread_create, pthread_cond_timedwait */
#include <signal.h>  /* defines: sigaction, SIGINT, SIGTERM */
#include <stdio.h>   /* defines: printf, fprintf */
#include <stdlib.h>  /* defines: strtod, strtol, calloc */
#include <string.h>  /* defines: strcmp, memset */
#include <time.h>    /* defines: clock_gettime, time */
#include <unistd.h>  /* defines: getpid */

#define AB_MAX_PAIRS 4096

typedef struct bench {
    mgt_run *run;
    double window_s, start, sum;   /* the current window: its start and the time of its steps */
    double draw_s;                 /* time in windows that draw (the warm-up included) */
    int draws;                     /* screens the dashboard drew in all (MGT_TUI_DREW) */
    int pairs, aa, pair, half, count, kind, draw_first, warm;
    unsigned rng;
    int stop, done, quiet;         /* atomics: the main thread's request, the training thread's end,
                                      a quiet window (the dashboard must not draw) */
    pthread_mutex_t mu;            /* with cv: the end of a quiet window wakes the dashboard */
    pthread_cond_t cv;
    mgt_result result;
    char error[1024];
    double ms[AB_MAX_PAIRS][2];    /* mean step time (ms) of each pair's window: [0] drawing, [1] quiet */
} bench;

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { (void)sig; stop_requested = 1; }

/* Called before each step: closes the window when W seconds have passed, opens the next. Returns 1
   when the last pair is complete. */
static int ab_next(bench *b) {
    double now = mgt_now();
    if (b->start == 0) { b->start = now; b->warm = 1; return 0; } /* the warm-up window: drawing */
    if (now - b->start < b->window_s || b->count == 0) return 0;  /* a window holds at least one step */
    if (b->warm || (!b->aa && b->kind == 0)) b->draw_s += now - b->start;
    if (!b->warm) b->ms[b->pair][b->kind] = 1e3 * b->sum / b->count;
    if (!b->warm && ++b->half == 2) { b->half = 0; b->pair++; }
    if (b->pair >= b->pairs) return 1;
    if (b->warm || b->half == 0) { /* a new pair: which window comes first is a coin flip */
        b->rng = b->rng * 1103515245u + 12345u;
        b->draw_first = (b->rng >> 16) & 1;
    }
    b->warm = 0;
    b->kind = (b->half == 0) == b->draw_first ? 0 : 1;
    b->start = now;
    b->sum = 0;
    b->count = 0;
    pthread_mutex_lock(&b->mu);
    __atomic_store_n(&b->quiet, b->aa || b->kind == 1, __ATOMIC_SEQ_CST);
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return 0;
}

/* The dashboard's side of a quiet window: blocked until it ends, waking every 100 ms as a frame's
   key wait does (for Ctrl-C), so the two kinds of window differ by the drawing alone. */
static void ab_wait_quiet(bench *b) {
    struct timespec until;
    pthread_mutex_lock(&b->mu);
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 100 * 1000 * 1000;
    if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
    if (__atomic_load_n(&b->quiet, __ATOMIC_SEQ_CST)) pthread_cond_timedwait(&b->cv, &b->mu, &until);
    pthread_mutex_unlock(&b->mu);
}

/* t(0.975, df): within 1% for df >= 4 (2.571 at 5: 2.55) */
static double t975(int df) { return df < 1 ? 0 : 1.96 + 2.37 / df + 2.8 / ((double)df * df); }

/* The paired statistic: per pair, drawing's step time over quiet's, minus 1. The mean with a 95%
   confidence interval (Student t over the pairs), and, because a burst of other work on the machine
   makes a few pairs far off in either direction (the random order makes them symmetric, so they
   widen the interval without biasing it), the 20%-trimmed mean with Yuen's interval (winsorized
   variance, t with n - 2g - 1 degrees of freedom), and the median. Trimming is over pairs, never
   over steps: every window holds screens drawn, so no pair is free of the cost being measured. */
static void ab_report(const bench *b) {
    static double r[AB_MAX_PAIRS];
    double sum = 0, ss = 0, d0 = 0, d1 = 0, mean, sd, half, x, tm = 0, wm = 0, ws = 0, se;
    int n = b->pair, i, j, g, h;
    if (n < 5) { printf("dashboard A/B: %d pair%s complete, too few for a figure\n", n, n == 1 ? "" : "s"); return; }
    for (i = 0; i < n; i++) {
        r[i] = b->ms[i][0] / b->ms[i][1] - 1;
        sum += r[i]; d0 += b->ms[i][0]; d1 += b->ms[i][1];
    }
    mean = sum / n;
    for (i = 0; i < n; i++) ss += (r[i] - mean) * (r[i] - mean);
    sd = sqrt(ss / (n - 1));
    half = t975(n - 1) * sd / sqrt(n);
    for (i = 1; i < n; i++) for (j = i; j > 0 && r[j] < r[j - 1]; j--) { x = r[j]; r[j] = r[j - 1]; r[j - 1] = x; }
    g = n / 5;
    h = n - 2 * g;
    for (i = g; i < n - g; i++) tm += r[i];
    tm /= h;
    for (i = 0; i < n; i++) wm += r[i < g ? g : i >= n - g ? n - g - 1 : i];
    wm /= n;
    for (i = 0; i < n; i++) { x = r[i < g ? g : i >= n - g ? n - g - 1 : i] - wm; ws += x * x; }
    se = sqrt(ws / (n - 1)) / ((double)h / n * sqrt(n));
    printf("dashboard A/B: %d pairs of %.1f s windows%s, %.2f screens drawn per s: step time %.3f ms %s, %.3f ms quiet\n", n, b->window_s,
           b->aa ? " (AA: both windows quiet)" : "", b->draw_s > 0 ? b->draws / b->draw_s : 0.0, d0 / n, b->aa ? "'drawing'" : "drawing", d1 / n);
    printf("dashboard A/B: mean: drawing costs %+.2f%% of step time (95%% CI %+.2f%% .. %+.2f%%), sd of a pair %.2f%%\n", 100 * mean,
           100 * (mean - half), 100 * (mean + half), 100 * sd);
    printf("dashboard A/B: 20%%-trimmed mean: drawing costs %+.2f%% of step time (95%% CI %+.2f%% .. %+.2f%%); median %+.2f%%\n", 100 * tm,
           100 * (tm - t975(h - 1) * se), 100 * (tm + t975(h - 1) * se), 100 * (n % 2 ? r[n / 2] : (r[n / 2 - 1] + r[n / 2]) / 2));
}

static void *train_thread(void *arg) {
    bench *b = (bench *)arg;
    mgt_stats st;
    mgt_result r = MGT_OK;
    double t0;
    mgt_run_stats(b->run, &st);
    while (st.step < st.steps && !__atomic_load_n(&b->stop, __ATOMIC_SEQ_CST) && !ab_next(b)) {
        t0 = mgt_now();
        if ((r = mgt_run_step(b->run)) != MGT_OK) break;
        b->sum += mgt_now() - t0;
        b->count++;
        mgt_run_stats(b->run, &st);
    }
    __atomic_store_n(&b->quiet, 0, __ATOMIC_SEQ_CST);
    if (r != MGT_OK) snprintf(b->error, sizeof b->error, "%s", mgt_last_error()); /* the message is per thread */
    b->result = r;
    mgt_run_set_state(b->run, r != MGT_OK ? MGT_STATE_FAILED : st.step >= st.steps ? MGT_STATE_FINISHED : MGT_STATE_RUNNING);
    __atomic_store_n(&b->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* Training on its thread under the dashboard until the last pair (or q, Ctrl-C); then the summary
   and the figures. Exit status. */
static int run_dashboard(bench *b, const char *preset, int refresh_ms) {
    mgt_tui *t;
    mgt_tui_options opt;
    pthread_t th;
    mgt_stats st;
    char summary[1024];
    memset(&opt, 0, sizeof opt);
    opt.preset = preset;
    if (refresh_ms > 0) {
        opt.refresh_s = refresh_ms * 1e-3;
        opt.frame_ms = refresh_ms < 100 ? refresh_ms : 0;
    }
    if (mgt_tui_open(&t, b->run, &opt) != 0) {
        fprintf(stderr, "bench_tui: no dashboard: it needs a terminal (tests/bench_tui.sh runs it in tmux)\n");
        return 2;
    }
    if (pthread_create(&th, NULL, train_thread, b) != 0) {
        mgt_tui_close(t);
        fprintf(stderr, "bench_tui: cannot start the training thread\n");
        return 1;
    }
    while (!__atomic_load_n(&b->done, __ATOMIC_SEQ_CST)) {
        int flags;
        if (__atomic_load_n(&b->quiet, __ATOMIC_SEQ_CST)) { /* a window without the dashboard */
            ab_wait_quiet(b);
        } else {
            flags = mgt_tui_frame(t);
            if (flags & MGT_TUI_DREW) b->draws++;
            if (flags & (MGT_TUI_STOP | MGT_TUI_CLOSED)) stop_requested = 1;
        }
        if (stop_requested) __atomic_store_n(&b->stop, 1, __ATOMIC_SEQ_CST);
    }
    pthread_join(th, NULL);
    mgt_run_stats(b->run, &st);
    if (st.step < st.steps) mgt_tui_stopping(t);
    mgt_tui_refresh(t);
    mgt_tui_summary(t, summary, sizeof summary);
    mgt_tui_close(t);
    fputs(summary, stdout);
    ab_report(b);
    if (b->result != MGT_OK) {
        fprintf(stderr, "bench_tui: %s\n", b->error);
        return 1;
    }
    return 0;
}

/* the number of option argv[i] into *out, within lo..hi; 0 (said) when it is missing or wrong */
static int number(int argc, char **argv, int i, double lo, double hi, double *out) {
    char *end;
    if (i + 1 >= argc) { fprintf(stderr, "bench_tui: %s needs a value\n", argv[i]); return 0; }
    *out = strtod(argv[i + 1], &end);
    if (end == argv[i + 1] || *end || !(*out >= lo && *out <= hi)) {
        fprintf(stderr, "bench_tui: %s '%s': valid %g..%g\n", argv[i], argv[i + 1], lo, hi);
        return 0;
    }
    return 1;
}

/* The options into b and *refresh_ms, the preset and its --set overrides into cfg. 0, or 2 (said). */
static int parse(int argc, char **argv, bench *b, int *refresh_ms, const char **preset, mgt_config *cfg) {
    int i;
    double v;
    mgt_config_init(cfg);
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--window")) { if (!number(argc, argv, i++, 1e-3, 3600, &b->window_s)) return 2; }
        else if (!strcmp(argv[i], "--pairs")) { if (!number(argc, argv, i++, 2, AB_MAX_PAIRS, &v)) return 2; b->pairs = (int)v; }
        else if (!strcmp(argv[i], "--refresh-ms")) { if (!number(argc, argv, i++, 1, 60000, &v)) return 2; *refresh_ms = (int)v; }
        else if (!strcmp(argv[i], "--aa")) b->aa = 1;
        else if (!strcmp(argv[i], "--set") && i + 1 < argc) i++; /* applied after the preset */
        else if (argv[i][0] != '-' && !*preset) *preset = argv[i];
        else { fprintf(stderr, "bench_tui: unexpected argument %s (usage: tests/bench_tui.c's first lines)\n", argv[i]); return 2; }
    }
    if (!*preset) { fprintf(stderr, "bench_tui: no preset (usage: tests/bench_tui.c's first lines)\n"); return 2; }
    if (mgt_config_load(cfg, *preset) != MGT_OK) goto refused;
    for (i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--set") && mgt_config_set(cfg, argv[++i]) != MGT_OK) goto refused;
    if (mgt_config_resolve_init(cfg) != MGT_OK || mgt_config_validate(cfg) != MGT_OK) goto refused;
    return 0;
refused:
    fprintf(stderr, "bench_tui: %s\n", mgt_last_error());
    return 2;
}

int main(int argc, char **argv) {
    static bench b; /* its table of pair times is large */
    mgt_config cfg;
    const char *preset = NULL;
    struct sigaction sa;
    int refresh_ms = 0, rc;
    b.window_s = 1;
    b.pairs = 150;
    if ((rc = parse(argc, argv, &b, &refresh_ms, &preset, &cfg)) != 0) return rc;
    if (mgt_run_create(&b.run, &cfg) != MGT_OK) { /* its first step takes the checkpoint folder */
        fprintf(stderr, "bench_tui: %s\n", mgt_last_error());
        return 2;
    }
    b.rng = (unsigned)time(NULL) ^ (unsigned)getpid();
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    rc = run_dashboard(&b, preset, refresh_ms);
    pthread_mutex_destroy(&b.mu);
    pthread_cond_destroy(&b.cv);
    mgt_run_destroy(b.run);
    return rc;
}
