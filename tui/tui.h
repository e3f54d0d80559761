/* tui.h - the mgt dashboard: a live ncurses view over a run's published statistics - MIT licence

   USAGE
     Define MGT_TUI_IMPLEMENTATION in exactly one C file, after including mgt.h:

        #include "mgt.h"
        #define MGT_TUI_IMPLEMENTATION
        #include "tui/tui.h"

     Link with ncursesw (`pkg-config --libs ncursesw`). With MGT_TUI_LAYOUT_ONLY defined as well,
     only the pure parts are compiled (layout, key handling, number formatting, bandwidth
     arithmetic): no ncurses and no mgt.h needed, which is how tests/test_tui_layout.c uses it.

   WHAT IT IS
     A view (htop's update/display split): it reads what the run publishes (mgt_run_snapshot,
     mgt_run_config) and never calls into training.
     Keys come back as flags (MGT_TUI_STOP, MGT_TUI_PAUSE, MGT_TUI_SAVE); the driver acts on them.

   THE LOOP (mgt_tui_frame, one call per frame)
     handle a resize; refresh the data when refresh_s has passed; draw every window into its
     buffer (wnoutrefresh); one doupdate(); wait for a key with a timeout of frame_ms.

   OPTIONS
     MGT_TUI_LAYOUT_ONLY  beside MGT_TUI_IMPLEMENTATION: only the pure functions (no ncurses)

   ENVIRONMENT
     NO_COLOR=1           no colours (no-color.org)
     MGT_TUI_DEBUG=1      the summary adds the dashboard's own figures (frames drawn, its CPU time)
*/
#ifndef MGT_TUI_H_INCLUDED
#define MGT_TUI_H_INCLUDED

#include <stddef.h> /* defines: size_t */

#ifdef __cplusplus
extern "C" {
#endif

#define MGT_TUI_MIN_COLS 80 /* the smallest terminal the layout fills; smaller shows a notice */
#define MGT_TUI_MIN_ROWS 24

enum { MGT_TUI_OVERVIEW, MGT_TUI_RANKS, MGT_TUI_COMM, MGT_TUI_VIEWS };

/* flags returned by key handling and by mgt_tui_frame */
enum {
    MGT_TUI_STOP = 1,    /* q: stop after the current step, checkpoint, exit */
    MGT_TUI_PAUSE = 2,   /* p: pause or resume (a toggle; the driver keeps the state) */
    MGT_TUI_SAVE = 4,    /* s: checkpoint now */
    MGT_TUI_REDRAW = 8,  /* the view changed (Tab, scroll, help): draw again */
    MGT_TUI_CLOSED = 16, /* the frame limit was reached */
    MGT_TUI_DREW = 32,   /* mgt_tui_frame drew the screen (the data, the view or the size changed) */
    MGT_TUI_RAW = 64     /* r: the loss chart switches between the smoothed curve and the raw losses
                            (mgt_tui_frame acts on it and does not return it) */
};
#define MGT_TUI_MESSAGE_S 5.0 /* seconds a footer message stays (htop's are a few seconds too) */
#define MGT_TUI_SMOOTHING 0.9 /* the loss curve's EMA weight of the past */

typedef struct mgt_tui_rect { int y, x, h, w; } mgt_tui_rect; /* h == 0: not shown */

/* Windows of one view. Overview: header, loss chart, throughput, ranks (compact), communication
   (only from 160 columns), events, footer. Ranks: header, the full rank table, events, footer.
   Communication: header, the table per collective, per-rank communication times, events, footer.
   The help box lies over the others when shown. */
typedef struct mgt_tui_panes {
    int cols, rows, nranks, view;
    int too_small;        /* below MGT_TUI_MIN_COLS x MGT_TUI_MIN_ROWS: only a notice is drawn */
    mgt_tui_rect header, loss, throughput, ranks, comm, events, footer, help;
    int rank_rows;        /* rank rows the ranks window shows at once */
    int max_scroll;       /* nranks - rank_rows, at least 0 */
} mgt_tui_panes;

/* Pure: the windows for a terminal of cols x rows and nranks ranks. Returns 1, or 0 when the
   terminal is too small (out->too_small is set and only header/footer are placed). */
int mgt_tui_layout(int cols, int rows, int nranks, int view, mgt_tui_panes *out);

/* The part of the view state that keys change (pure, testable without a terminal). */
typedef struct mgt_tui_ui {
    int view, scroll, help;
} mgt_tui_ui;
/* Pure: applies one key (ncurses key code or character) to ui; returns MGT_TUI_* flags. */
int mgt_tui_key(mgt_tui_ui *ui, int key, const mgt_tui_panes *layout);

/* Bus-bandwidth factor of a collective over n members (NCCL's nccl-tests conventions):
   all-reduce 2(n-1)/n, reduce-scatter and all-gather (n-1)/n, broadcast and send/recv 1. */
double mgt_tui_busbw_factor(int coll, int n);

/* Memory in IEC units: "0B", "512B", "812KiB", "12.3MiB", "1.50GiB": at most 7 characters */
void mgt_tui_fmt_bytes(double bytes, char *out, size_t cap);
/* The same in at most 6 characters (2 significant digits from 10 up): "1.4MiB", "14MiB", "812KiB" */
void mgt_tui_fmt_bytes_short(double bytes, char *out, size_t cap);
/* "12.3k", "4.56M": at most 6 characters; the caller names what is counted */
void mgt_tui_fmt_count(double v, char *out, size_t cap);
/* the run's clock, always h:mm:ss: "0:00:05", "1:02:03" */
void mgt_tui_fmt_duration(double seconds, char *out, size_t cap);
/* a step time in at most 8 characters: "0.85 ms", "45.6 ms", "812.3 ms", "1.23 s", "123 s" */
void mgt_tui_fmt_ms(double ms, char *out, size_t cap);
/* a count with its noun: "1 rank", "8 ranks" */
void mgt_tui_fmt_n(long long n, const char *one, const char *many, char *out, size_t cap);
/* what one rank computes per step: "1 micro-batch x 4 seq", "2 micro-batches x 8 seq" */
void mgt_tui_fmt_micro(int micro_steps, int micro_batch, char *out, size_t cap);
/* Text cut to width columns (UTF-8 characters counted as one column each): when too long, the last
   word holding a '/' (a path) loses its front, from a '/' where one falls right ("step 20:
   checkpoint .../runs/x/step_00000020.safetensors"), else the text its end; "..." is one U+2026
   character when utf8. Returns the columns written. */
int mgt_tui_fit(const char *text, int width, int utf8, char *out, size_t cap);
/* The first of n alternatives (richest first) that fits in width columns, else the last cut to
   fit (mgt_tui_fit). Returns the index of the one taken. */
int mgt_tui_pick(const char *const *alternatives, int n, int width, int utf8, char *out, size_t cap);
/* The progress bar's width in the header's second line of a terminal cols wide: the same in every
   view (the line's other fields are written at their widest widths) */
int mgt_tui_progress_width(int cols, int steps);
/* The rank table's columns for a window w columns wide: their names (written from the window's
   column 1) and the width of the compute/comm/bubble bar. Returns the form: 0 memory per category
   now (buffers and workspace as one), 1 also the shares in percent and each category apart, 2
   current/peak of each and the GPU's power and temperature. */
int mgt_tui_rank_columns(int w, int *barw, char *header, size_t cap);
/* The loss curve TensorBoard draws: an exponential moving average debiased for its start (alpha
   0.9: the weight of the past); non-finite losses are skipped (out holds the last average, NAN
   before any). out may be raw. */
void mgt_tui_smooth(const float *raw, int n, double alpha, float *out);
/* The loss chart's y range for the values drawn (the smoothed curve, one value per dot column):
   from the lowest to the median plus twice the median's distance from it, so a warmup spike of
   less than half the window is cut off at the top, and always up to the highest value of the last
   quarter (a late rise stays in view); 5% of margin either side. */
void mgt_tui_loss_range(const float *v, int n, double *lo, double *hi);

#ifndef MGT_TUI_LAYOUT_ONLY
struct mgt_run;
typedef struct mgt_tui mgt_tui;
typedef struct mgt_tui_options {
    double refresh_s;     /* data refresh interval; 0 = 0.5 s */
    int frame_ms;         /* key wait per frame; 0 = 100 ms */
    int max_frames;       /* 0 = unlimited; else mgt_tui_frame returns MGT_TUI_CLOSED after it */
    int ascii;            /* 1: no Unicode even in a UTF-8 locale */
    int mono;             /* 1: no colours (also when NO_COLOR is set and not empty) */
    const char *preset;   /* shown in the header */
    double base_tokens_per_s; /* a single rank's measured tokens/s on the same model (mgt bench); 0: speedup n/a */
} mgt_tui_options;

/* Takes the terminal (initscr). run must outlive the dashboard. Returns 0, or -1 with no change
   to the terminal when it cannot be opened. */
int mgt_tui_open(mgt_tui **out, const struct mgt_run *run, const mgt_tui_options *opt);
/* Reads the published statistics now (a frame does it when refresh_s has passed). */
void mgt_tui_refresh(mgt_tui *t);
/* One frame; returns MGT_TUI_* flags of the keys pressed (and MGT_TUI_CLOSED at the limit). */
int mgt_tui_frame(mgt_tui *t);
/* A line for the footer (what the driver did: "checkpoint requested", "paused"); it clears after
   MGT_TUI_MESSAGE_S seconds. */
void mgt_tui_message(mgt_tui *t, const char *text);
/* The driver is stopping the run before its end (q, Ctrl-C, the frame limit): the header shows
   STOPPING and the summary the state "stopped" unless the run finished or failed. */
void mgt_tui_stopping(mgt_tui *t);
/* Gives the terminal back (endwin) and frees the dashboard. */
void mgt_tui_close(mgt_tui *t);
/* The last screen's key figures, a few lines, for stdout after the dashboard closed. With
   MGT_TUI_DEBUG=1 in the environment a line more: the frames drawn and the CPU time the
   dashboard's thread used (call it on that thread). */
void mgt_tui_summary(const mgt_tui *t, char *out, size_t cap);
/* For crash-signal handlers: gives the terminal back if a dashboard holds it. */
void mgt_tui_restore_terminal(void);
#endif

#ifdef __cplusplus
}
#endif
#endif /* MGT_TUI_H_INCLUDED */

/* ============================================================================================== */
#ifdef MGT_TUI_IMPLEMENTATION
#ifndef MGT_TUI__IMPLEMENTED
#define MGT_TUI__IMPLEMENTED

#include <stdio.h>  /* defines: snprintf */
#include <string.h> /* defines: memset, strlen */
#include <stdlib.h> /* defines: malloc, realloc, qsort, free, getenv, setenv */
#include <math.h>   /* defines: isfinite, fabs, NAN, HUGE_VAL */

static mgt_tui_rect mgt_tui__rect(int y, int x, int h, int w) {
    mgt_tui_rect r;
    r.y = y; r.x = x; r.h = h; r.w = w;
    return r;
}
static int mgt_tui__min(int a, int b) { return a < b ? a : b; }
static int mgt_tui__max(int a, int b) { return a > b ? a : b; }
static int mgt_tui__clamp(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

int mgt_tui_layout(int cols, int rows, int nranks, int view, mgt_tui_panes *L) {
    int top = 2, avail, ev_h, body, need = mgt_tui__max(nranks, 1) + 3; /* border, column names, border */
    const int comm_need = 9; /* 5 collectives + names + note + 2 borders */
    memset(L, 0, sizeof *L);
    L->cols = cols; L->rows = rows; L->nranks = nranks;
    L->view = mgt_tui__clamp(view, 0, MGT_TUI_VIEWS - 1);
    if (cols < 1 || rows < 1) { L->too_small = 1; return 0; }
    L->header = mgt_tui__rect(0, 0, mgt_tui__min(2, rows), cols);
    if (cols < MGT_TUI_MIN_COLS || rows < MGT_TUI_MIN_ROWS || nranks < 1) {
        L->too_small = 1;
        if (rows > 2) L->footer = mgt_tui__rect(rows - 1, 0, 1, cols);
        return 0;
    }
    L->footer = mgt_tui__rect(rows - 1, 0, 1, cols);
    avail = rows - 3;
    ev_h = mgt_tui__clamp(avail / 5, 4, 12);
    body = avail - ev_h;
    if (L->view == MGT_TUI_OVERVIEW) {
        int wide = cols >= 160, bottom, chart_h, thr_w;
        /* the rank table takes what it needs up to 2/5 of the body (at least one row), the
           communication table beside it from 160 columns (both then at least 80 wide), the charts
           the rest */
        bottom = mgt_tui__min(wide ? mgt_tui__max(need, comm_need) : need, mgt_tui__max(wide ? comm_need : 4, body * 2 / 5));
        chart_h = body - bottom;
        thr_w = mgt_tui__clamp(cols * 2 / 5, 32, 64);
        L->loss = mgt_tui__rect(top, 0, chart_h, cols - thr_w);
        L->throughput = mgt_tui__rect(top, cols - thr_w, chart_h, thr_w);
        if (wide) {
            int comm_w = mgt_tui__clamp(cols * 9 / 20, 80, 96);
            L->ranks = mgt_tui__rect(top + chart_h, 0, bottom, cols - comm_w);
            L->comm = mgt_tui__rect(top + chart_h, cols - comm_w, bottom, comm_w);
        } else {
            L->ranks = mgt_tui__rect(top + chart_h, 0, bottom, cols);
        }
        L->events = mgt_tui__rect(top + body, 0, ev_h, cols);
    } else if (L->view == MGT_TUI_RANKS) {
        int h = mgt_tui__min(need, body);
        L->ranks = mgt_tui__rect(top, 0, h, cols);
        L->events = mgt_tui__rect(top + h, 0, avail - h, cols);
    } else {
        int h;
        L->comm = mgt_tui__rect(top, 0, comm_need, cols);
        h = mgt_tui__min(need, body - comm_need);
        L->ranks = mgt_tui__rect(top + comm_need, 0, h, cols);
        L->events = mgt_tui__rect(top + comm_need + h, 0, avail - comm_need - h, cols);
    }
    L->rank_rows = L->ranks.h - 3;
    L->max_scroll = mgt_tui__max(0, nranks - L->rank_rows);
    L->help = mgt_tui__rect((rows - 20) / 2, (cols - 64) / 2, 20, 64);
    return 1;
}

#ifndef MGT_TUI_LAYOUT_ONLY
#define NCURSES_WIDECHAR 1
#define NCURSES_NOMACROS /* functions, not macros named erase, clear, timeout... */
#include <curses.h>      /* defines: initscr, newwin, wnoutrefresh, doupdate, wgetch (ncursesw) */
#define MGT_TUI__KEY_UP KEY_UP
#define MGT_TUI__KEY_DOWN KEY_DOWN
#define MGT_TUI__KEY_PPAGE KEY_PPAGE
#define MGT_TUI__KEY_NPAGE KEY_NPAGE
#define MGT_TUI__KEY_HOME KEY_HOME
#define MGT_TUI__KEY_END KEY_END
#define MGT_TUI__KEY_BTAB KEY_BTAB
#else
#define MGT_TUI__KEY_UP 0403 /* ncurses' codes, so the pure handler is the same with or without it */
#define MGT_TUI__KEY_DOWN 0402
#define MGT_TUI__KEY_PPAGE 0523
#define MGT_TUI__KEY_NPAGE 0522
#define MGT_TUI__KEY_HOME 0406
#define MGT_TUI__KEY_END 0550
#define MGT_TUI__KEY_BTAB 0541
#endif

int mgt_tui_key(mgt_tui_ui *ui, int key, const mgt_tui_panes *L) {
    int page = L && L->rank_rows > 1 ? L->rank_rows - 1 : 1, max = L ? L->max_scroll : 0, before = ui->scroll;
    if (ui->help && key != '?' && key != 'q' && key != 'Q' && key >= 0) { ui->help = 0; return MGT_TUI_REDRAW; }
    switch (key) {
    case 'q': case 'Q': return MGT_TUI_STOP;
    case 'p': case 'P': case ' ': return MGT_TUI_PAUSE;
    case 's': case 'S': return MGT_TUI_SAVE;
    case '?': case 'h': ui->help = !ui->help; return MGT_TUI_REDRAW;
    case 'r': case 'R': return MGT_TUI_RAW;
    case '\t': ui->view = (ui->view + 1) % MGT_TUI_VIEWS; ui->scroll = 0; return MGT_TUI_REDRAW;
    case MGT_TUI__KEY_BTAB: ui->view = (ui->view + MGT_TUI_VIEWS - 1) % MGT_TUI_VIEWS; ui->scroll = 0; return MGT_TUI_REDRAW;
    case '1': case '2': case '3': ui->view = key - '1'; ui->scroll = 0; return MGT_TUI_REDRAW;
    case MGT_TUI__KEY_UP: case 'k': ui->scroll--; break;
    case MGT_TUI__KEY_DOWN: case 'j': ui->scroll++; break;
    case MGT_TUI__KEY_PPAGE: ui->scroll -= page; break;
    case MGT_TUI__KEY_NPAGE: ui->scroll += page; break;
    case MGT_TUI__KEY_HOME: ui->scroll = 0; break;
    case MGT_TUI__KEY_END: ui->scroll = max; break;
    default: return 0;
    }
    ui->scroll = mgt_tui__clamp(ui->scroll, 0, max);
    return ui->scroll != before ? MGT_TUI_REDRAW : 0;
}

double mgt_tui_busbw_factor(int coll, int n) {
    if (n < 1) n = 1;
    switch (coll) {
    case 0: return 2.0 * (n - 1) / n;   /* all-reduce */
    case 1: case 2: return (double)(n - 1) / n; /* reduce-scatter, all-gather */
    default: return 1.0;                /* broadcast, send/recv */
    }
}

static void mgt_tui__bytes(double b, char *out, size_t cap, int digits) {
    static const char *unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    if (!(b >= 0)) b = 0;
    if (b < 1023.5) { snprintf(out, cap, "%.0fB", b); return; }
    b /= 1024;
    while (b >= 999.5 && u < 4) { b /= 1024; u++; }
    if (b >= 99.5 || (digits == 2 && b >= 9.95)) snprintf(out, cap, "%.0f%s", b, unit[u]);
    else if (b >= 9.95 || digits == 2) snprintf(out, cap, "%.1f%s", b, unit[u]);
    else snprintf(out, cap, "%.2f%s", b, unit[u]);
}
void mgt_tui_fmt_bytes(double b, char *out, size_t cap) { mgt_tui__bytes(b, out, cap, 3); }
void mgt_tui_fmt_bytes_short(double b, char *out, size_t cap) { mgt_tui__bytes(b, out, cap, 2); }

void mgt_tui_fmt_count(double v, char *out, size_t cap) {
    const char *unit = " kMGT";
    int u = 0;
    while (v >= 999.5 && u < 4) { v /= 1000; u++; }
    if (u == 0) snprintf(out, cap, v >= 99.5 ? "%.0f" : v >= 9.95 ? "%.1f" : "%.2f", v);
    else snprintf(out, cap, v >= 99.5 ? "%.0f%c" : v >= 9.95 ? "%.1f%c" : "%.2f%c", v, unit[u]);
}

void mgt_tui_fmt_duration(double s, char *out, size_t cap) {
    long t = s > 0 && s < 1e9 ? (long)(s + 0.5) : 0;
    snprintf(out, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

void mgt_tui_fmt_ms(double ms, char *out, size_t cap) {
    if (!(ms >= 0)) snprintf(out, cap, "n/a");
    else if (ms < 9.995) snprintf(out, cap, "%.2f ms", ms);
    else if (ms < 999.95) snprintf(out, cap, "%.1f ms", ms);
    else if (ms < 9995) snprintf(out, cap, "%.2f s", ms / 1e3);
    else if (ms < 99950) snprintf(out, cap, "%.1f s", ms / 1e3);
    else if (ms < 99999500) snprintf(out, cap, "%.0f s", ms / 1e3);
    else snprintf(out, cap, ">1e5 s");
}

void mgt_tui_fmt_n(long long n, const char *one, const char *many, char *out, size_t cap) {
    snprintf(out, cap, "%lld %s", n, n == 1 ? one : many);
}

void mgt_tui_fmt_micro(int micro_steps, int micro_batch, char *out, size_t cap) {
    snprintf(out, cap, "%d micro-batch%s x %d seq", micro_steps, micro_steps == 1 ? "" : "es", micro_batch);
}

/* columns of the first nbytes bytes of a UTF-8 string: one per character */
static int mgt_tui__cols(const char *s, size_t nbytes) {
    int n = 0;
    size_t i;
    for (i = 0; i < nbytes && s[i]; i++) if (((unsigned char)s[i] & 0xc0) != 0x80) n++;
    return n;
}
/* the byte offset after cols characters */
static size_t mgt_tui__skip(const char *s, int cols) {
    size_t i = 0;
    while (s[i] && cols > 0) {
        i++;
        while (((unsigned char)s[i] & 0xc0) == 0x80) i++;
        cols--;
    }
    return i;
}

int mgt_tui_fit(const char *in, int width, int utf8, char *out, size_t cap) {
    const char *dots = utf8 ? "\xe2\x80\xa6" : "...";
    int ndots = utf8 ? 1 : 3, n = mgt_tui__cols(in, strlen(in)), excess = n - width;
    size_t len = strlen(in), tok = len, tend = len, i, cut;
    if (!cap) return 0;
    out[0] = 0;
    if (width <= 0) return 0;
    if (excess <= 0) { snprintf(out, cap, "%s", in); return n; }
    /* the last word with a '/': [tok, tend) */
    for (i = len; i > 0; i--) {
        size_t b = i - 1, e;
        if (in[b] != '/') continue;
        while (b > 0 && in[b - 1] != ' ') b--;
        e = i;
        while (in[e] && in[e] != ' ') e++;
        tok = b;
        tend = e;
        break;
    }
    if (tok < len) {
        int tcols = mgt_tui__cols(in + tok, tend - tok), keep = tcols - excess - ndots; /* columns of the word's tail kept */
        if (keep >= 8) {
            size_t from = tok + mgt_tui__skip(in + tok, tcols - keep), slash;
            for (slash = from; slash < tend && in[slash] != '/'; slash++) {}
            if (slash < tend && tend - slash >= 8) from = slash; /* the tail starts at a folder */
            snprintf(out, cap, "%.*s%s%s", (int)tok, in, dots, in + from);
            return mgt_tui__cols(out, strlen(out));
        }
    }
    if (width <= ndots) { cut = mgt_tui__skip(in, width); snprintf(out, cap, "%.*s", (int)cut, in); return width; }
    cut = mgt_tui__skip(in, width - ndots);
    snprintf(out, cap, "%.*s%s", (int)cut, in, dots);
    return width;
}

int mgt_tui_pick(const char *const *alt, int n, int width, int utf8, char *out, size_t cap) {
    int i;
    for (i = 0; i < n; i++)
        if (mgt_tui__cols(alt[i], strlen(alt[i])) <= width) { snprintf(out, cap, "%s", alt[i]); return i; }
    mgt_tui_fit(n > 0 ? alt[n - 1] : "", width, utf8, out, cap);
    return n - 1;
}

/* the header's second line: " step <step>/<steps> [bar] <pct>% | elapsed h:mm:ss | ETA h:mm:ss | <view>" */
#define MGT_TUI__PROGRESS_TAIL " 100.0% | elapsed 0:00:00 | ETA 0:00:00 | overview" /* the longest view name */
int mgt_tui_progress_width(int cols, int steps) {
    char head[48];
    int n = snprintf(head, sizeof head, " step %d/%d ", steps, steps);
    return mgt_tui__clamp(cols - n - 2 - (int)strlen(MGT_TUI__PROGRESS_TAIL) - 1, 5, 80);
}

/* rank table: the row starts with a marker column (! on the rank that computed longest), then
   "rank dp tp pp dev" (19 columns from column 1), a space, the bar from column 21, the fields */
#define MGT_TUI__BAR_X 21
static const char *const mgt_tui__mem_short[6] = {"param", "grads", "optim", "activ", "buf+w", ""};
static const char *const mgt_tui__mem_mid[6] = {"params", "grads", "optim", "activ", "buffers", "work"};
static const char *const mgt_tui__mem_long[6] = {"params", "grads", "optimizer", "activations", "buffers", "workspace"};
static int mgt_tui__rank_fields(int form) { /* the fields' width after the bar */
    return form == 2 ? 15 + 6 * 14 + 8 + 16 : form == 1 ? 15 + 6 * 8 + 8 + 5 : 5 * 7 + 7 + 5;
}
int mgt_tui_rank_columns(int w, int *barw, char *h, size_t cap) {
    int form = 2, room, n, c;
    for (; form > 0; form--) {
        room = w - 1 - MGT_TUI__BAR_X - mgt_tui__rank_fields(form);
        if (room >= (form == 2 ? 15 : 12)) break;
    }
    room = w - 1 - MGT_TUI__BAR_X - mgt_tui__rank_fields(form);
    *barw = mgt_tui__clamp(room, 4, 40);
    if (!cap) return form;
    n = snprintf(h, cap, " rank dp tp pp dev %-*s", *barw, *barw >= 19 ? "compute/comm/bubble" : *barw >= 11 ? "cmp/com/bub" : "c/c/b");
    if (form > 0 && n > 0 && (size_t)n < cap) n += snprintf(h + n, cap - (size_t)n, " cmp%% com%% bub%%");
    for (c = 0; c < (form ? 6 : 5) && n > 0 && (size_t)n < cap; c++)
        n += snprintf(h + n, cap - (size_t)n, form == 2 ? " %13s" : form == 1 ? " %7s" : " %6s", form == 2 ? mgt_tui__mem_long[c] : form == 1 ? mgt_tui__mem_mid[c] : mgt_tui__mem_short[c]);
    if (n > 0 && (size_t)n < cap) snprintf(h + n, cap - (size_t)n, form == 2 ? " %7s  gpu power temp" : form == 1 ? " %7s  gpu" : " %6s  gpu", "peak");
    return form;
}

void mgt_tui_smooth(const float *raw, int n, double alpha, float *out) {
    double acc = 0, weight = 0;
    int i;
    for (i = 0; i < n; i++) {
        double x = raw[i];
        if (isfinite(x)) { acc = alpha * acc + (1 - alpha) * x; weight = alpha * weight + (1 - alpha); }
        out[i] = weight > 0 ? (float)(acc / weight) : (float)NAN;
    }
}

static int mgt_tui__cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}
void mgt_tui_loss_range(const float *v, int n, double *lo, double *hi) {
    float *s = n > 0 ? (float *)malloc(sizeof *s * (size_t)n) : NULL;
    int i, k = 0;
    double med, span, tail_max = -HUGE_VAL;
    *lo = 0; *hi = 1;
    for (i = 0; i < n; i++) {
        if (!isfinite(v[i])) continue;
        if (s) s[k] = v[i];
        k++;
        if (i >= n - n / 4 - 1 && v[i] > tail_max) tail_max = v[i];
    }
    if (!s || k == 0) { free(s); return; }
    qsort(s, (size_t)k, sizeof *s, mgt_tui__cmp_float);
    med = k % 2 ? s[k / 2] : 0.5 * ((double)s[k / 2 - 1] + s[k / 2]);
    *lo = s[0];
    *hi = med + 2 * (med - *lo);
    if (*hi > s[k - 1]) *hi = s[k - 1];
    if (tail_max > *hi) *hi = tail_max;
    free(s);
    span = *hi - *lo;
    if (span < 1e-3 * (fabs(med) > 1 ? fabs(med) : 1)) { /* flat: a range around it */
        double pad = 5e-4 * (fabs(med) > 1 ? fabs(med) : 1);
        *lo -= pad; *hi += pad;
    } else {
        *lo -= 0.05 * span; *hi += 0.05 * span;
    }
}

#ifndef MGT_TUI_LAYOUT_ONLY
/* ---- the dashboard (ncursesw) ------------------------------------------------------------------ */
#include <locale.h>  /* defines: setlocale */
#include <langinfo.h> /* defines: nl_langinfo, CODESET */
#include <time.h>    /* defines: clock_gettime */
#include <unistd.h>  /* defines: isatty */

#ifndef MGT_H_INCLUDED
#error "include mgt.h before tui/tui.h"
#endif

enum { MGT_TUI__W_HEADER, MGT_TUI__W_LOSS, MGT_TUI__W_THR, MGT_TUI__W_RANKS, MGT_TUI__W_COMM, MGT_TUI__W_EVENTS,
       MGT_TUI__W_FOOTER, MGT_TUI__W_HELP, MGT_TUI__NWIN };
enum { MGT_TUI__C_TITLE = 1, MGT_TUI__C_GOOD, MGT_TUI__C_COMM, MGT_TUI__C_BAD, MGT_TUI__C_VAL, MGT_TUI__C_DIM, MGT_TUI__C_BAR };

typedef struct mgt_tui__point { /* one published step, what the charts need */
    int step;
    float loss, sm, tok_s, samp_s, step_ms, mfu; /* sm: the smoothed loss (mgt_tui_smooth) */
    unsigned char has_mfu;
} mgt_tui__point;
typedef struct mgt_tui__val { int step; float loss; } mgt_tui__val;

#define MGT_TUI__EVENTS 64
struct mgt_tui {
    const mgt_run *run;
    mgt_config cfg;
    mgt_tui_options opt;
    int utf8, color;
    mgt_tui_ui ui;
    mgt_tui_panes L;
    WINDOW *w[MGT_TUI__NWIN];
    int cols, rows;
    mgt_tui__point *pts;
    int npts, cap, nhist;     /* points kept; history entries read */
    mgt_tui__val *vals;
    int nvals, vcap, last_val_step;
    mgt_stats last;
    int has_last, state, nranks;
    mgt_rank_stats *ranks;
    mgt_event ev[MGT_TUI__EVENTS];
    int nev;                  /* events read in all; the newest MGT_TUI__EVENTS are in ev */
    double best, ema, ema_acc, ema_w; /* ema: the smoothed loss now (mgt_tui_smooth's average, kept step by step) */
    double t_open, t_refresh, cpu_open; /* cpu_open: CPU time of the dashboard's thread */
    double run_time_open; /* the run's clock when the dashboard opened (mgt_snapshot.time_s): the
                             header's elapsed time and the summary count on from it */
    int frames, dirty, draws;
    int stopping, raw, debug;  /* raw: the loss chart shows raw losses (r) */
    char message[160];
    double message_t;          /* when the message was set (mgt_tui__now) */
};

static mgt_tui *mgt_tui__active;
static double mgt_tui__cpu(void) { /* CPU seconds of the calling thread: what drawing costs */
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
} /* the dashboard holding the terminal, for signal handlers */

static double mgt_tui__now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void mgt_tui_restore_terminal(void) {
    if (mgt_tui__active && !isendwin()) endwin();
}

static void mgt_tui__windows(mgt_tui *t) {
    const mgt_tui_rect *r[MGT_TUI__NWIN];
    int i;
    r[MGT_TUI__W_HEADER] = &t->L.header; r[MGT_TUI__W_LOSS] = &t->L.loss; r[MGT_TUI__W_THR] = &t->L.throughput;
    r[MGT_TUI__W_RANKS] = &t->L.ranks; r[MGT_TUI__W_COMM] = &t->L.comm; r[MGT_TUI__W_EVENTS] = &t->L.events;
    r[MGT_TUI__W_FOOTER] = &t->L.footer; r[MGT_TUI__W_HELP] = &t->L.help;
    for (i = 0; i < MGT_TUI__NWIN; i++) {
        if (t->w[i]) delwin(t->w[i]);
        t->w[i] = NULL;
        if (r[i]->h > 0 && r[i]->w > 0 && !(i == MGT_TUI__W_HELP && t->L.too_small)) t->w[i] = newwin(r[i]->h, r[i]->w, r[i]->y, r[i]->x);
    }
}

static void mgt_tui__relayout(mgt_tui *t) {
    getmaxyx(stdscr, t->rows, t->cols);
    mgt_tui_layout(t->cols, t->rows, t->nranks, t->ui.view, &t->L);
    t->ui.scroll = mgt_tui__clamp(t->ui.scroll, 0, t->L.max_scroll);
    mgt_tui__windows(t);
    werase(stdscr); /* what the old layout left between and under the new windows */
    wnoutrefresh(stdscr);
    clearok(curscr, TRUE); /* the next doupdate repaints the whole terminal */
    t->dirty = 1;
}

int mgt_tui_open(mgt_tui **out, const mgt_run *run, const mgt_tui_options *opt) {
    mgt_tui *t;
    const char *cs;
    *out = NULL;
    if (!run || !isatty(0) || !isatty(1)) return -1;
    t = (mgt_tui *)calloc(1, sizeof *t);
    if (!t) return -1;
    t->run = run;
    t->cfg = *mgt_run_config(run);
    if (opt) t->opt = *opt;
    if (t->opt.refresh_s <= 0) t->opt.refresh_s = 0.5;
    if (t->opt.frame_ms <= 0) t->opt.frame_ms = 100;
    {
        mgt_snapshot count;
        memset(&count, 0, sizeof count);
        mgt_run_snapshot(run, &count);
        t->nranks = count.ranks_n > 0 ? count.ranks_n : 1;
        t->run_time_open = count.time_s;
    }
    t->ranks = (mgt_rank_stats *)calloc((size_t)t->nranks, sizeof *t->ranks);
    if (!t->ranks) { free(t); return -1; }
    setlocale(LC_ALL, "");
    cs = nl_langinfo(CODESET);
    t->utf8 = !t->opt.ascii && cs && (!strcmp(cs, "UTF-8") || !strcmp(cs, "utf8"));
    if (t->utf8) setenv("NCURSES_NO_UTF8_ACS", "1", 0); /* lines as Unicode, not the terminal's ACS */
    if (!newterm(NULL, stdout, stdin)) { free(t->ranks); free(t); return -1; }
    mgt_tui__active = t;
    cbreak();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    curs_set(0);
    t->color = !t->opt.mono && !(getenv("NO_COLOR") && getenv("NO_COLOR")[0]) && has_colors(); /* no-color.org */
    if (t->color) {
        start_color();
        use_default_colors();
        init_pair(MGT_TUI__C_TITLE, COLOR_CYAN, -1);
        init_pair(MGT_TUI__C_GOOD, COLOR_GREEN, -1);
        init_pair(MGT_TUI__C_COMM, COLOR_YELLOW, -1);
        init_pair(MGT_TUI__C_BAD, COLOR_RED, -1);
        init_pair(MGT_TUI__C_VAL, COLOR_MAGENTA, -1);
        init_pair(MGT_TUI__C_DIM, COLOR_BLUE, -1);
        init_pair(MGT_TUI__C_BAR, COLOR_BLACK, COLOR_CYAN);
    }
    wtimeout(stdscr, t->opt.frame_ms);
    t->best = 1e300;
    t->last_val_step = -1;
    t->t_open = mgt_tui__now();
    t->cpu_open = mgt_tui__cpu();
    t->debug = getenv("MGT_TUI_DEBUG") && !strcmp(getenv("MGT_TUI_DEBUG"), "1");
    t->t_refresh = -1e9;
    mgt_tui__relayout(t);
    *out = t;
    return 0;
}

void mgt_tui_close(mgt_tui *t) {
    int i;
    if (!t) return;
    for (i = 0; i < MGT_TUI__NWIN; i++) if (t->w[i]) delwin(t->w[i]);
    if (!isendwin()) endwin();
    mgt_tui__active = NULL;
    free(t->pts);
    free(t->vals);
    free(t->ranks);
    free(t);
}

void mgt_tui_message(mgt_tui *t, const char *text) {
    if (!t) return;
    snprintf(t->message, sizeof t->message, "%s", text ? text : "");
    t->message_t = mgt_tui__now();
    t->dirty = 1;
}

void mgt_tui_stopping(mgt_tui *t) {
    if (!t) return;
    t->stopping = 1;
    t->dirty = 1;
}

/* the run's clock: seconds since the run was created (mgt_event.time_s) */
static double mgt_tui__clock(const mgt_tui *t) { return t->run_time_open + (mgt_tui__now() - t->t_open); }

/* a validation point of a history entry, once per validated step */
static void mgt_tui__take_val(mgt_tui *t, const mgt_stats *s) {
    if (!s->has_val_loss || s->val_step == t->last_val_step) return;
    if (t->nvals == t->vcap) {
        int cap = t->vcap ? 2 * t->vcap : 64;
        mgt_tui__val *q = (mgt_tui__val *)realloc(t->vals, sizeof *q * (size_t)cap);
        if (q) { t->vals = q; t->vcap = cap; }
    }
    if (t->nvals < t->vcap) { t->vals[t->nvals].step = s->val_step; t->vals[t->nvals].loss = (float)s->val_loss; t->nvals++; }
    t->last_val_step = s->val_step;
}

/* one step's published statistics into the chart's points, the smoothed loss and the last values */
static void mgt_tui__take_step(mgt_tui *t, const mgt_stats *s) {
    mgt_tui__point *p;
    if (t->npts > 0 && s->step <= t->pts[t->npts - 1].step) { /* read twice after the ring wrapped, or again with a validation */
        if (s->step == t->pts[t->npts - 1].step) {
            mgt_tui__take_val(t, s);
            t->last = *s;
        }
        return;
    }
    if (t->npts == t->cap) {
        int cap = t->cap ? 2 * t->cap : 1024;
        mgt_tui__point *q = (mgt_tui__point *)realloc(t->pts, sizeof *q * (size_t)cap);
        if (!q) return; /* out of memory: the chart misses this point, the rest of the screen goes on */
        t->pts = q; t->cap = cap;
    }
    p = &t->pts[t->npts++];
    p->step = s->step;
    p->loss = (float)s->loss;
    p->tok_s = (float)s->tokens_per_s;
    p->samp_s = (float)s->samples_per_s;
    p->step_ms = (float)s->step_ms;
    p->mfu = (float)s->mfu;
    p->has_mfu = (unsigned char)(s->has_mfu != 0);
    if (isfinite(s->loss)) { /* as mgt_tui_smooth, one step at a time */
        if (s->loss < t->best) t->best = s->loss;
        t->ema_acc = MGT_TUI_SMOOTHING * t->ema_acc + (1 - MGT_TUI_SMOOTHING) * s->loss;
        t->ema_w = MGT_TUI_SMOOTHING * t->ema_w + (1 - MGT_TUI_SMOOTHING);
        t->ema = t->ema_acc / t->ema_w;
    }
    p->sm = t->ema_w > 0 ? (float)t->ema : (float)NAN;
    mgt_tui__take_val(t, s);
    t->last = *s;
    t->has_last = 1;
}

/* new history entries, the ranks' latest statistics, new events and the state, all of one moment
   (mgt_run_snapshot): the screen never shows "paused" beside a step that is about to change, nor a
   rank table a step ahead of the chart */
void mgt_tui_refresh(mgt_tui *t) {
    mgt_stats buf[64];
    mgt_event ev[16];
    mgt_snapshot s;
    int i;
    do {
        memset(&s, 0, sizeof s);
        s.history_from = t->nhist;
        s.history = buf;
        s.history_max = 64;
        s.ranks = t->ranks;
        s.ranks_max = t->nranks;
        s.events_from = t->nev;
        s.events = ev;
        s.events_max = 16;
        mgt_run_snapshot(t->run, &s);
        for (i = 0; i < s.history_n; i++) mgt_tui__take_step(t, &buf[i]);
        t->nhist = s.history_first + s.history_n;
        for (i = 0; i < s.events_n; i++) t->ev[(t->nev + i) % MGT_TUI__EVENTS] = ev[i]; /* keep the newest MGT_TUI__EVENTS in a ring */
        t->nev += s.events_n;
    } while (s.history_n == s.history_max || s.events_n == s.events_max); /* behind: read on */
    t->state = s.state;
    t->dirty = 1;
}

/* ---- drawing helpers ---- */
static void mgt_tui__attr(mgt_tui *t, WINDOW *w, int pair, int on) {
    attr_t a = t->color ? (attr_t)COLOR_PAIR(pair) : (pair == MGT_TUI__C_BAD || pair == MGT_TUI__C_TITLE ? A_BOLD : pair == MGT_TUI__C_BAR ? A_REVERSE : A_NORMAL);
    if (on) wattron(w, a); else wattroff(w, a);
}

/* a string from column x, cut (mgt_tui_fit) to end before column `end` */
static void mgt_tui__put_to(mgt_tui *t, WINDOW *w, int y, int x, int end, const char *s) {
    char buf[640];
    if (y < 0 || y >= getmaxy(w) || end - x <= 0) return;
    mgt_tui_fit(s, end - x, t->utf8, buf, sizeof buf);
    mvwaddstr(w, y, x, buf);
}
/* inside a box: before its right border */
static void mgt_tui__put(mgt_tui *t, WINDOW *w, int y, int x, const char *s) { mgt_tui__put_to(t, w, y, x, getmaxx(w) - 1, s); }
/* in a window without a border (header, footer): to its last column */
static void mgt_tui__put_all(mgt_tui *t, WINDOW *w, int y, int x, const char *s) { mgt_tui__put_to(t, w, y, x, getmaxx(w), s); }

static void mgt_tui__box(mgt_tui *t, WINDOW *w, const char *title) {
    char buf[200];
    if (t->color) wattron(w, COLOR_PAIR(MGT_TUI__C_DIM));
    if (t->utf8) box(w, 0, 0);
    else wborder(w, '|', '|', '-', '-', '+', '+', '+', '+'); /* no line-drawing charset outside UTF-8 */
    if (t->color) wattroff(w, COLOR_PAIR(MGT_TUI__C_DIM));
    snprintf(buf, sizeof buf, " %s ", title);
    mgt_tui__attr(t, w, MGT_TUI__C_TITLE, 1);
    wattron(w, A_BOLD);
    mgt_tui__put_to(t, w, 0, 2, getmaxx(w) - 2, buf);
    wattroff(w, A_BOLD);
    mgt_tui__attr(t, w, MGT_TUI__C_TITLE, 0);
}

/* a sparkline of values (the newest at the right) in width cells */
static void mgt_tui__spark(mgt_tui *t, WINDOW *w, int y, int x, int width, const float *v, int stride_bytes, int n) {
    static const char *blocks[8] = {"\xe2\x96\x81", "\xe2\x96\x82", "\xe2\x96\x83", "\xe2\x96\x84", "\xe2\x96\x85", "\xe2\x96\x86", "\xe2\x96\x87", "\xe2\x96\x88"};
    static const char ascii[] = "_.-:=+*#";
    float lo = 0, hi = 0;
    int i, first = n > width ? n - width : 0, k = 0;
#define MGT_TUI__V(i) (*(const float *)((const char *)v + (size_t)(i) * (size_t)stride_bytes))
    for (i = first; i < n; i++) {
        float a = MGT_TUI__V(i);
        if (!isfinite(a)) continue;
        if (!k++ ) lo = hi = a;
        if (a < lo) lo = a;
        if (a > hi) hi = a;
    }
    mgt_tui__attr(t, w, MGT_TUI__C_GOOD, 1);
    for (i = first; i < n; i++) {
        float a = MGT_TUI__V(i);
        int lvl = hi > lo && isfinite(a) ? (int)((a - lo) / (hi - lo) * 7.0f + 0.5f) : 3;
        lvl = mgt_tui__clamp(lvl, 0, 7);
        if (t->utf8) mvwaddstr(w, y, x + i - first, blocks[lvl]);
        else mvwaddch(w, y, x + i - first, (chtype)ascii[lvl]);
    }
    mgt_tui__attr(t, w, MGT_TUI__C_GOOD, 0);
#undef MGT_TUI__V
}

static const char *mgt_tui__view_name(int view) { return view == MGT_TUI_OVERVIEW ? "overview" : view == MGT_TUI_RANKS ? "ranks" : "comm"; }

/* micro-batches per step and rank */
static int mgt_tui__micro_steps(const mgt_config *c) {
    return c->train.micro_batch > 0 && c->parallel.dp > 0 ? c->train.global_batch / (c->parallel.dp * c->train.micro_batch) : 1;
}

/* the pipeline schedule's name, as the preset says it */
static const char *mgt_tui__schedule(const mgt_config *c) {
    static const char *names[] = {"1f1b", "gpipe", "zb"};
    return c->parallel.pp_schedule >= 0 && c->parallel.pp_schedule < 3 ? names[c->parallel.pp_schedule] : "?";
}

/* ---- windows ---- */
static void mgt_tui__draw_header(mgt_tui *t) {
    WINDOW *w = t->w[MGT_TUI__W_HEADER];
    const mgt_config *c = &t->cfg;
    static const char *dtypes[] = {"fp32", "bf16", "fp16"};
    char alt[5][512], line[512], st[32], el[32], eta[32], micro[64], nr[32], lay[96], lay_short[96], cps[16];
    const char *alts[5], *preset = t->opt.preset ? t->opt.preset : "(preset)", *base, *dev = mgt_run_device(t->run), *dt;
    int step = t->has_last ? t->last.step : 0, steps = t->cfg.train.steps, barw, fill, i, k, zero, stopping;
    double frac = steps > 0 ? (double)step / steps : 0, per_step;
    if (!w) return;
    werase(w);
    zero = c->parallel.dp * c->parallel.cp > 1 ? c->parallel.zero : 0; /* as the plan has it: ZeRO over one replica changes nothing */
    base = strrchr(preset, '/') ? strrchr(preset, '/') + 1 : preset;
    dt = dtypes[c->precision.dtype >= 0 && c->precision.dtype < 3 ? c->precision.dtype : 0];
    mgt_tui_fmt_micro(mgt_tui__micro_steps(c), c->train.micro_batch, micro, sizeof micro);
    mgt_tui_fmt_n(t->nranks, "rank", "ranks", nr, sizeof nr);
    cps[0] = 0;
    if (c->parallel.cp > 1) snprintf(cps, sizeof cps, " cp%d", c->parallel.cp); /* context parallelism, where there is some */
    snprintf(lay, sizeof lay, "dp%d%s tp%d pp%d zero%d %s", c->parallel.dp, cps, c->parallel.tp, c->parallel.pp, zero, mgt_tui__schedule(c));
    /* narrow: the ZeRO stage and the pipeline schedule only where they do something */
    k = snprintf(lay_short, sizeof lay_short, "dp%d%s tp%d pp%d", c->parallel.dp, cps, c->parallel.tp, c->parallel.pp);
    if (zero && k > 0 && (size_t)k < sizeof lay_short) k += snprintf(lay_short + k, sizeof lay_short - (size_t)k, " zero%d", zero);
    if (c->parallel.pp > 1 && k > 0 && (size_t)k < sizeof lay_short) snprintf(lay_short + k, sizeof lay_short - (size_t)k, " %s", mgt_tui__schedule(c));
    snprintf(alt[0], sizeof alt[0], " mgt %s | %s | %s | %s: %s | %s | %s", MGT_VERSION_STRING, preset, dev, nr, lay, micro, dt);
    snprintf(alt[1], sizeof alt[1], " %s | %s | %s: %s | %s | %s", base, dev, nr, lay, micro, dt);
    snprintf(alt[2], sizeof alt[2], " %s | %s | %s: %s | %s | %s", base, dev, nr, lay_short, micro, dt);
    snprintf(alt[3], sizeof alt[3], " %s | %s | %s | %s | %s", base, dev, lay_short, micro, dt); /* the rank count is dp x tp x pp, and in the ranks box's title */
    snprintf(alt[4], sizeof alt[4], " %s | %s: %s | %s | %s", dev, nr, lay_short, micro, dt);
    for (i = 0; i < 5; i++) alts[i] = alt[i];
    stopping = t->stopping && t->state != MGT_STATE_FINISHED && t->state != MGT_STATE_FAILED;
    snprintf(st, sizeof st, " %s ", stopping ? "stopping" : mgt_state_name(t->state));
    for (k = 0; st[k]; k++) if (st[k] >= 'a' && st[k] <= 'z') st[k] = (char)(st[k] - 32);
    mgt_tui_pick(alts, 5, t->cols - (int)strlen(st) - 1, t->utf8, line, sizeof line);
    mgt_tui__attr(t, w, MGT_TUI__C_BAR, 1);
    wmove(w, 0, 0);
    for (i = 0; i < t->cols; i++) waddch(w, ' ');
    mgt_tui__put_all(t, w, 0, 0, line);
    {
        int pair = t->state == MGT_STATE_FAILED ? MGT_TUI__C_BAD : t->state == MGT_STATE_PAUSED || stopping ? MGT_TUI__C_COMM : MGT_TUI__C_GOOD;
        mgt_tui__attr(t, w, MGT_TUI__C_BAR, 0);
        wattron(w, A_BOLD | A_REVERSE);
        mgt_tui__attr(t, w, pair, 1);
        mgt_tui__put_all(t, w, 0, mgt_tui__max(0, t->cols - (int)strlen(st)), st);
        mgt_tui__attr(t, w, pair, 0);
        wattroff(w, A_BOLD | A_REVERSE);
    }
    /* the second line: every field at a fixed width, so the bar is as wide in every view */
    per_step = t->has_last && t->npts > 0 ? t->last.elapsed_s / t->npts : 0;
    mgt_tui_fmt_duration(mgt_tui__clock(t), el, sizeof el);
    if (per_step > 0 && t->state != MGT_STATE_FINISHED) mgt_tui_fmt_duration(per_step * (steps - step), eta, sizeof eta);
    else snprintf(eta, sizeof eta, "n/a");
    barw = mgt_tui_progress_width(t->cols, steps);
    k = snprintf(line, sizeof line, " step %*d/%d ", snprintf(NULL, 0, "%d", steps), step, steps);
    mgt_tui__put_all(t, w, 1, 0, line);
    fill = (int)(frac * barw + 0.5);
    wmove(w, 1, k);
    waddch(w, '[');
    mgt_tui__attr(t, w, MGT_TUI__C_GOOD, 1);
    for (i = 0; i < barw; i++) {
        if (t->utf8) waddstr(w, i < fill ? "\xe2\x96\x88" : "\xe2\x96\x91");
        else waddch(w, i < fill ? '#' : '.');
    }
    mgt_tui__attr(t, w, MGT_TUI__C_GOOD, 0);
    waddch(w, ']');
    snprintf(line, sizeof line, " %5.1f%% | elapsed %7s | ETA %7s | %s", 100 * frac, el, eta, mgt_tui__view_name(t->ui.view));
    mgt_tui__put_all(t, w, 1, k + barw + 2, line);
    wnoutrefresh(w);
}

static void mgt_tui__axis(char *out, size_t cap, double v, double span) { /* 6 characters whatever the size */
    if (fabs(v) < 9.99995 && span < 0.02) snprintf(out, cap, "%6.4f", v);
    else if (fabs(v) < 99.9995) snprintf(out, cap, "%6.3f", v);
    else if (fabs(v) < 9999.5) snprintf(out, cap, "%6.1f", v);
    else snprintf(out, cap, "%6.0e", v);
}

static void mgt_tui__draw_loss(mgt_tui *t) {
    WINDOW *w = t->w[MGT_TUI__W_LOSS];
    char buf[160], a[32], b[32];
    int H, W, gw, gh, i, x0 = 9, first, last, px, prev_py = -1; /* x0: the border, a space, 6 of label, a space */
    double lo, hi, top = -HUGE_VAL; /* top: the highest value drawn, shown when it lies above the range */
    unsigned char *grid;
    float *col;
    if (!w) return;
    werase(w);
    mgt_tui__box(t, w, t->raw ? "train loss, raw (r: smoothed)" : "train loss, smoothed (r: raw)");
    getmaxyx(w, H, W);
    if (t->has_last) {
        snprintf(buf, sizeof buf, "now %.4f  best %.4f  smoothed %.4f", t->last.loss, t->best, t->ema);
        mgt_tui__put(t, w, 1, 2, buf);
    }
    gh = H - 4; /* rows of the plot: below the border and the figures, above the x labels and the border */
    gw = W - x0 - 2;
    if (t->npts < 1 || gh < 2 || gw < 4) {
        mgt_tui__put(t, w, 2, 2, "waiting for the first step...");
        wnoutrefresh(w);
        return;
    }
    first = t->pts[0].step;
    last = t->pts[t->npts - 1].step;
    {
        int sx = t->utf8 ? 2 : 1, sy = t->utf8 ? 4 : 3, DW = gw * sx, DH = gh * sy, cy, cx;
        grid = (unsigned char *)calloc((size_t)DW * (size_t)DH, 1);
        col = (float *)malloc(sizeof *col * (size_t)DW);
        if (!grid || !col) { free(grid); free(col); wnoutrefresh(w); return; }
        for (px = 0; px < DW; px++) { /* the mean (smoothed or raw) loss of the steps that fall in this dot column */
            double s = 0;
            int cnt = 0, j, lo_i, hi_i;
            lo_i = (int)((double)px * t->npts / DW);
            hi_i = mgt_tui__max(lo_i + 1, (int)((double)(px + 1) * t->npts / DW));
            for (j = lo_i; j < hi_i && j < t->npts; j++) {
                float v = t->raw ? t->pts[j].loss : t->pts[j].sm;
                if (isfinite(v)) { s += v; cnt++; }
            }
            col[px] = cnt ? (float)(s / cnt) : (float)NAN;
        }
        mgt_tui_loss_range(col, DW, &lo, &hi);
        for (px = 0; px < DW; px++) {
            int py;
            if (!isfinite(col[px])) continue;
            if (col[px] > top) top = col[px];
            py = (int)((hi - col[px]) / (hi - lo) * (DH - 1) + 0.5);
            if (py < 0) { prev_py = -2; continue; } /* above the range (a warmup spike): not drawn */
            py = mgt_tui__min(py, DH - 1);
            if (prev_py != -1) { /* join to the previous column, or to the top where the curve comes down into view */
                int y, y0 = mgt_tui__min(mgt_tui__max(prev_py, 0), py), y1 = mgt_tui__max(prev_py, py);
                for (y = y0; y <= y1; y++) grid[(size_t)y * DW + px] = 1;
            }
            grid[(size_t)py * DW + px] = 1;
            prev_py = py;
        }
        free(col);
        mgt_tui__attr(t, w, MGT_TUI__C_TITLE, 1);
        for (cy = 0; cy < gh; cy++)
            for (cx = 0; cx < gw; cx++) {
                int dy, dx, bits = 0;
                for (dy = 0; dy < sy; dy++)
                    for (dx = 0; dx < sx; dx++)
                        if (grid[(size_t)(cy * sy + dy) * DW + cx * sx + dx]) {
                            static const int braille[4][2] = {{0x01, 0x08}, {0x02, 0x10}, {0x04, 0x20}, {0x40, 0x80}};
                            bits |= t->utf8 ? braille[dy][dx] : 1 << dy;
                        }
                if (!bits) continue;
                if (t->utf8) {
                    int cp = 0x2800 + bits;
                    char u[4];
                    u[0] = (char)(0xe0 | (cp >> 12)); u[1] = (char)(0x80 | ((cp >> 6) & 0x3f)); u[2] = (char)(0x80 | (cp & 0x3f)); u[3] = 0;
                    mvwaddstr(w, 2 + cy, x0 + cx, u);
                } else {
                    mvwaddch(w, 2 + cy, x0 + cx, (chtype)(bits == 1 ? '\'' : bits == 2 ? '-' : bits == 4 ? '.' : ':'));
                }
            }
        mgt_tui__attr(t, w, MGT_TUI__C_TITLE, 0);
        free(grid);
    }
    /* y labels (drawn after the curve: a clipped curve runs along the top) */
    mgt_tui__axis(a, sizeof a, hi, hi - lo); mgt_tui__put(t, w, 2, 2, a);
    mgt_tui__axis(a, sizeof a, (lo + hi) / 2, hi - lo); mgt_tui__put(t, w, 2 + (gh - 1) / 2, 2, a);
    mgt_tui__axis(a, sizeof a, lo, hi - lo); mgt_tui__put(t, w, 1 + gh, 2, a);
    /* x labels */
    snprintf(a, sizeof a, "%d", first);
    snprintf(b, sizeof b, "%d", last);
    mgt_tui__put(t, w, gh + 2, x0, a);
    mgt_tui__put(t, w, gh + 2, x0 + gw - (int)strlen(b), b);
    mgt_tui__put(t, w, gh + 2, x0 + gw / 2 - 2, "step");
    /* validation points inside the range */
    mgt_tui__attr(t, w, MGT_TUI__C_VAL, 1);
    wattron(w, A_BOLD);
    for (i = 0; i < t->nvals; i++) {
        int cx = last > first ? (int)((double)(t->vals[i].step - first) / (last - first) * (gw - 1) + 0.5) : gw - 1;
        int cy = (int)((hi - t->vals[i].loss) / (hi - lo) * (gh - 1) + 0.5);
        if (cx < 0 || cx >= gw || cy < 0 || cy >= gh) continue;
        if (t->utf8) mvwaddstr(w, 2 + cy, x0 + cx, "\xe2\x97\x86"); /* a diamond */
        else mvwaddch(w, 2 + cy, x0 + cx, 'o');
    }
    wattroff(w, A_BOLD);
    if (t->nvals > 0) {
        snprintf(buf, sizeof buf, " val %.4f @%d ", t->vals[t->nvals - 1].loss, t->vals[t->nvals - 1].step);
        mgt_tui__put_to(t, w, H - 1, mgt_tui__max(2, W - (int)strlen(buf) - 2), W - 2, buf);
    }
    mgt_tui__attr(t, w, MGT_TUI__C_VAL, 0);
    if (top > hi) { /* the part of the curve above the range is not drawn: say how high it went */
        snprintf(buf, sizeof buf, " cut above: max %.4g ", top);
        mgt_tui__put_to(t, w, H - 1, 2, W / 2, buf);
    }
    wnoutrefresh(w);
}

/* The speedup over one rank: tokens/s of the last (up to) 50 steps, from their mean step time (one
   step's figure jumps with the machine's load), over the driver's measured single-rank tokens/s.
   0 when unknown. */
static double mgt_tui__speedup(const mgt_tui *t) {
    double ms = 0;
    int i, n = 0;
    if (!(t->opt.base_tokens_per_s > 0) || t->npts < 1) return 0;
    for (i = t->npts - 1; i >= 0 && n < 50; i--, n++) ms += t->pts[i].step_ms;
    if (!(ms > 0)) return 0;
    return (double)t->cfg.train.global_batch * t->cfg.model.seq_len * 1e3 * n / ms / t->opt.base_tokens_per_s;
}

static void mgt_tui__draw_throughput(mgt_tui *t) {
    WINDOW *w = t->w[MGT_TUI__W_THR];
    int H, W, y = 1;
    char v[32], line[96];
    const mgt_stats *s = &t->last;
    if (!w) return;
    werase(w);
    mgt_tui__box(t, w, "throughput");
    getmaxyx(w, H, W);
    if (!t->has_last) { mgt_tui__put(t, w, 1, 2, "n/a until the first step"); wnoutrefresh(w); return; }
    /* label (10) and value (8) from column 2, a space, the sparkline from column 22 to the border;
       a longer value pushes the sparkline right, never touches it */
#define MGT_TUI__ROW(label, text, field, show)                                                            \
    if (y < H - 1) {                                                                                      \
        int sx_;                                                                                          \
        snprintf(line, sizeof line, "%-10s %8s", label, text);                                           \
        mgt_tui__put(t, w, y, 2, line);                                                                   \
        sx_ = mgt_tui__max(22, 2 + (int)strlen(line) + 1);                                               \
        if (show && W - 1 - sx_ > 2) mgt_tui__spark(t, w, y, sx_, W - 1 - sx_, &t->pts[0].field, (int)sizeof(mgt_tui__point), t->npts); \
        y++;                                                                                              \
    }
    mgt_tui_fmt_count(s->tokens_per_s, v, sizeof v);
    MGT_TUI__ROW("tokens/s", v, tok_s, 1)
    mgt_tui_fmt_count(s->samples_per_s, v, sizeof v);
    MGT_TUI__ROW("samples/s", v, samp_s, 1)
    mgt_tui_fmt_ms(s->step_ms, v, sizeof v);
    MGT_TUI__ROW("step", v, step_ms, 1)
    if (s->has_mfu) snprintf(v, sizeof v, "%.1f%%", 100 * s->mfu);
    else snprintf(v, sizeof v, "n/a");
    MGT_TUI__ROW("MFU", v, mfu, s->has_mfu)
#undef MGT_TUI__ROW
    if (y < H - 1) { mgt_tui_fmt_count(s->gflops, v, sizeof v); snprintf(line, sizeof line, "%-10s %8s GFLOP/s", "compute", v); mgt_tui__put(t, w, y++, 2, line); }
    if (y < H - 1) { mgt_tui_fmt_count((double)s->tokens_seen, v, sizeof v); snprintf(line, sizeof line, "%-10s %8s tokens", "seen", v); mgt_tui__put(t, w, y++, 2, line); }
    if (y < H - 1) { snprintf(line, sizeof line, "%-10s %8.2e", "lr", s->lr); mgt_tui__put(t, w, y++, 2, line); }
    if (y < H - 1) { snprintf(line, sizeof line, "%-10s %8.3f", "grad norm", s->grad_norm); mgt_tui__put(t, w, y++, 2, line); }
    if (y < H - 1) { /* measured against a single rank when the driver has a measurement of one, else unknown */
        double x = mgt_tui__speedup(t);
        if (x > 0) snprintf(v, sizeof v, "%.2fx", x);
        else snprintf(v, sizeof v, "n/a");
        snprintf(line, sizeof line, "%-10s %8s%s", "speedup", v, x > 0 && W >= 46 ? " over 1 rank (bench)" : "");
        mgt_tui__put(t, w, y++, 2, line);
    }
    wnoutrefresh(w);
}

static int mgt_tui__straggler(const mgt_tui *t) { /* the rank that computed longest in the last step */
    int i, s = 0;
    for (i = 1; i < t->nranks; i++) if (t->ranks[i].compute_s > t->ranks[s].compute_s) s = i;
    return s;
}

/* the stacked compute / communication / bubble bar of one rank */
static void mgt_tui__bar(mgt_tui *t, WINDOW *w, int y, int x, int width, const mgt_rank_stats *r) {
    double tot = r->compute_s + r->comm_s + r->bubble_s;
    int nc = 0, nm = 0, i;
    if (tot > 0) {
        nc = (int)(r->compute_s / tot * width + 0.5);
        nm = (int)((r->compute_s + r->comm_s) / tot * width + 0.5) - nc;
    }
    wmove(w, y, x);
    for (i = 0; i < width; i++) {
        int seg = tot <= 0 ? 3 : i < nc ? 0 : i < nc + nm ? 1 : 2;
        int pair = seg == 0 ? MGT_TUI__C_GOOD : seg == 1 ? MGT_TUI__C_COMM : seg == 2 ? MGT_TUI__C_BAD : MGT_TUI__C_DIM;
        mgt_tui__attr(t, w, pair, 1);
        if (t->utf8) /* distinct glyphs as well as colours: readable in monochrome and in screenshots */ waddstr(w, seg == 0 ? "\xe2\x96\x88" : seg == 1 ? "\xe2\x96\x92" : seg == 2 ? "\xe2\x96\x91" : "\xc2\xb7");
        else waddch(w, (chtype)(seg == 0 ? '#' : seg == 1 ? '=' : seg == 2 ? '-' : '.'));
        mgt_tui__attr(t, w, pair, 0);
    }
}

static void mgt_tui__draw_ranks(mgt_tui *t) {
    WINDOW *w = t->w[MGT_TUI__W_RANKS];
    int H, W, row, barw, form, slow = mgt_tui__straggler(t), comm_view = t->ui.view == MGT_TUI_COMM, c;
    char line[600], a[40], b[16], title[128], nr[32];
    if (!w) return;
    werase(w);
    mgt_tui_fmt_n(t->nranks, "rank", "ranks", nr, sizeof nr);
    if (comm_view) snprintf(title, sizeof title, "ms per collective in the last step, by rank; < marks the slowest (%s)", nr);
    else snprintf(title, sizeof title, "ranks (%d)", t->nranks);
    mgt_tui__box(t, w, title);
    getmaxyx(w, H, W);
    if (t->L.max_scroll > 0) {
        snprintf(line, sizeof line, " %d-%d of %d, arrows scroll ", t->ui.scroll, mgt_tui__min(t->nranks, t->ui.scroll + t->L.rank_rows) - 1, t->nranks);
        mgt_tui__put_to(t, w, H - 1, mgt_tui__max(2, W - (int)strlen(line) - 2), W - 2, line);
    }
    if (comm_view) {
        int n = 0;
        static const char *short_names[MGT_COLL_BARRIER] = {"all-red", "red-scat", "all-gath", "bcast", "snd/rcv"};
        n += snprintf(line + n, sizeof line - (size_t)n, "rank dp tp pp ");
        for (c = 0; c < MGT_COLL_BARRIER; c++) n += snprintf(line + n, sizeof line - (size_t)n, "%8s ", short_names[c]);
        snprintf(line + n, sizeof line - (size_t)n, " comm%% bub%%");
        wattron(w, A_BOLD); mgt_tui__put(t, w, 1, 1, line); wattroff(w, A_BOLD);
        for (row = 0; row < t->L.rank_rows && t->ui.scroll + row < t->nranks; row++) {
            const mgt_rank_stats *r = &t->ranks[t->ui.scroll + row];
            double tot = r->compute_s + r->comm_s + r->bubble_s;
            n = snprintf(line, sizeof line, "%4d %2d %2d %2d ", r->rank, r->dp, r->tp, r->pp);
            for (c = 0; c < MGT_COLL_BARRIER; c++) {
                int k, max = 1;
                for (k = 0; k < t->nranks; k++) if (t->ranks[k].seconds[c] > r->seconds[c]) max = 0;
                if (r->calls[c] == 0) n += snprintf(line + n, sizeof line - (size_t)n, "%8s ", "-");
                else n += snprintf(line + n, sizeof line - (size_t)n, "%8.2f%c", r->seconds[c] * 1e3, max && t->nranks > 1 ? '<' : ' ');
            }
            snprintf(line + n, sizeof line - (size_t)n, " %5.1f %4.1f", tot > 0 ? 100 * r->comm_s / tot : 0, tot > 0 ? 100 * r->bubble_s / tot : 0);
            mgt_tui__put(t, w, 2 + row, 1, line);
        }
        wnoutrefresh(w);
        return;
    }
    /* the columns (mgt_tui_rank_columns): a marker column, rank dp tp pp device, the bar, then form
       0: memory now by category (buffers + workspace as one), the peak, GPU utilisation; 1: also
       the shares in percent and each category apart; 2: current/peak of each category and the
       GPU's power and temperature */
    form = mgt_tui_rank_columns(W, &barw, line, sizeof line);
    wattron(w, A_BOLD); mgt_tui__put(t, w, 1, 1, line); wattroff(w, A_BOLD);
    for (row = 0; row < t->L.rank_rows && t->ui.scroll + row < t->nranks; row++) {
        const mgt_rank_stats *r = &t->ranks[t->ui.scroll + row];
        double tot = r->compute_s + r->comm_s + r->bubble_s;
        size_t peak = 0;
        int n = 0, y = 2 + row, marked = t->nranks > 1 && r->rank == slow && tot > 0, ncat = form ? MGT_MEM_COUNT : MGT_MEM_WORKSPACE;
        if (!strncmp(r->device, "cuda:", 5)) snprintf(a, sizeof a, "%s%s", strlen(r->device) > 6 ? "g" : "gpu", r->device + 5); /* gpu3, g12 */
        else snprintf(a, sizeof a, "%s", r->device[0] ? r->device : "?");
        if (marked) { mgt_tui__attr(t, w, MGT_TUI__C_BAD, 1); wattron(w, A_BOLD); mgt_tui__put(t, w, y, 1, "!"); }
        snprintf(line, sizeof line, "%4d %2d %2d %2d %-4.4s", r->rank, r->dp, r->tp, r->pp, a);
        mgt_tui__put(t, w, y, 2, line);
        if (marked) { mgt_tui__attr(t, w, MGT_TUI__C_BAD, 0); wattroff(w, A_BOLD); }
        if (MGT_TUI__BAR_X + barw < W - 1) mgt_tui__bar(t, w, y, MGT_TUI__BAR_X, barw, r);
        line[0] = 0;
        if (form > 0)
            n = snprintf(line, sizeof line, " %4.0f %4.0f %4.0f", tot > 0 ? 100 * r->compute_s / tot : 0, tot > 0 ? 100 * r->comm_s / tot : 0,
                         tot > 0 ? 100 * r->bubble_s / tot : 0);
        for (c = 0; c < MGT_MEM_COUNT; c++) peak += r->mem_peak[c];
        for (c = 0; c < ncat; c++) {
            double cur = (double)r->mem_current[c];
            if (!form && c == MGT_MEM_BUFFERS) cur += (double)r->mem_current[MGT_MEM_WORKSPACE];
            if (form == 2) {
                mgt_tui_fmt_bytes_short(cur, a, sizeof a);
                mgt_tui_fmt_bytes_short((double)r->mem_peak[c], b, sizeof b);
                n += snprintf(line + n, sizeof line - (size_t)n, " %6s/%-6s", a, b);
            } else {
                if (form == 1) mgt_tui_fmt_bytes(cur, a, sizeof a);
                else mgt_tui_fmt_bytes_short(cur, a, sizeof a);
                n += snprintf(line + n, sizeof line - (size_t)n, form == 1 ? " %7s" : " %6s", a);
            }
        }
        if (form) mgt_tui_fmt_bytes((double)peak, a, sizeof a);
        else mgt_tui_fmt_bytes_short((double)peak, a, sizeof a);
        if (r->has_gpu_util) snprintf(b, sizeof b, "%3.0f%%", r->gpu_util);
        else snprintf(b, sizeof b, "n/a");
        n += snprintf(line + n, sizeof line - (size_t)n, form ? " %7s %4s" : " %6s %4s", a, b);
        if (form == 2) {
            char pw[16], tc[16];
            if (r->has_gpu_power) snprintf(pw, sizeof pw, "%4.0fW", r->gpu_power_w);
            else snprintf(pw, sizeof pw, "n/a");
            if (r->has_gpu_temp) snprintf(tc, sizeof tc, "%3.0fC", r->gpu_temp_c);
            else snprintf(tc, sizeof tc, "n/a");
            snprintf(line + n, sizeof line - (size_t)n, " %5s %4s", pw, tc);
        }
        mgt_tui__put(t, w, y, MGT_TUI__BAR_X + barw, line);
    }
    wnoutrefresh(w);
}

/* the group size a collective most likely ran over, from the layout (stated in the table) */
static int mgt_tui__group(const mgt_tui *t, int coll) {
    const mgt_config *c = &t->cfg;
    int replicas = c->parallel.dp * c->parallel.cp; /* the gradients' group */
    if (coll == MGT_COLL_REDUCE_SCATTER || coll == MGT_COLL_ALL_GATHER) return replicas > 1 ? replicas : c->parallel.tp;
    if (coll == MGT_COLL_ALL_REDUCE) return replicas > 1 ? replicas : c->parallel.tp > 1 ? c->parallel.tp : t->nranks;
    if (coll == MGT_COLL_SEND_RECV) return 2;
    return t->nranks;
}

static void mgt_tui__draw_comm(mgt_tui *t) {
    WINDOW *w = t->w[MGT_TUI__W_COMM];
    int H, c, y = 2;
    char line[300], by[16], cl[24];
    if (!w) return;
    werase(w);
    mgt_tui__box(t, w, "communication, per step");
    H = getmaxy(w);
    wattron(w, A_BOLD);
    mgt_tui__put(t, w, 1, 1, "collective      calls   bytes  ms/step algbw GB/s busbw GB/s   n  slowest");
    wattroff(w, A_BOLD);
    for (c = 0; c < MGT_COLL_BARRIER && y < H - 2; c++, y++) {
        long long calls = 0;
        double bytes = 0, secs = 0, maxs = -1;
        int k, users = 0, slow = -1, n = mgt_tui__group(t, c);
        for (k = 0; k < t->nranks; k++) {
            const mgt_rank_stats *r = &t->ranks[k];
            if (r->calls[c] <= 0) continue;
            users++;
            if (r->calls[c] > calls) calls = r->calls[c];
            bytes += r->bytes[c];
            secs += r->seconds[c];
            if (r->seconds[c] > maxs) { maxs = r->seconds[c]; slow = k; }
        }
        if (!users) {
            snprintf(line, sizeof line, "%-14s %6d %7s %8s %10s %10s", mgt_coll_name(c), 0, "-", "-", "-", "-");
            mgt_tui__attr(t, w, MGT_TUI__C_DIM, 1);
            mgt_tui__put(t, w, y, 1, line);
            mgt_tui__attr(t, w, MGT_TUI__C_DIM, 0);
            continue;
        }
        bytes /= users; /* per rank */
        secs /= users;
        mgt_tui_fmt_bytes(bytes, by, sizeof by);
        if (calls < 1000) snprintf(cl, sizeof cl, "%lld", calls);
        else mgt_tui_fmt_count((double)calls, cl, sizeof cl);
        {
            double alg = secs > 0 ? bytes / secs / 1e9 : 0, bus = alg * mgt_tui_busbw_factor(c, n);
            char ms[40];
            snprintf(ms, sizeof ms, "r%d %.2fms", slow, maxs * 1e3);
            snprintf(line, sizeof line, "%-14s %6s %7s %8.2f %10.3f %10.3f %3d  %s", mgt_coll_name(c), cl, by, secs * 1e3, alg, bus, n, ms);
        }
        mgt_tui__put(t, w, y, 1, line);
    }
    mgt_tui__attr(t, w, MGT_TUI__C_DIM, 1);
    mgt_tui__put(t, w, H - 2, 1, "means over calling ranks; busbw = algbw x NCCL factor, n = dp (or tp)");
    mgt_tui__attr(t, w, MGT_TUI__C_DIM, 0);
    wnoutrefresh(w);
}

static void mgt_tui__draw_events(mgt_tui *t) {
    WINDOW *w = t->w[MGT_TUI__W_EVENTS];
    int H, rows, i, first;
    char line[300];
    if (!w) return;
    werase(w);
    mgt_tui__box(t, w, "events");
    H = getmaxy(w);
    rows = H - 2;
    first = mgt_tui__max(mgt_tui__max(0, t->nev - MGT_TUI__EVENTS), t->nev - rows);
    if (t->nev == 0) mgt_tui__put(t, w, 1, 2, "none yet (validations, checkpoints and warnings appear here)");
    for (i = first; i < t->nev; i++) {
        const mgt_event *e = &t->ev[i % MGT_TUI__EVENTS];
        char tm[32];
        mgt_tui_fmt_duration(e->time_s, tm, sizeof tm); /* the run's clock, as the header's elapsed */
        snprintf(line, sizeof line, "%8s  %s%s", tm, e->level == MGT_LOG_WARN ? "warning: " : "", e->text);
        if (e->level == MGT_LOG_WARN) mgt_tui__attr(t, w, MGT_TUI__C_BAD, 1);
        mgt_tui__put(t, w, 1 + i - first, 1, line); /* a long path keeps its tail, inside the border */
        if (e->level == MGT_LOG_WARN) mgt_tui__attr(t, w, MGT_TUI__C_BAD, 0);
    }
    wnoutrefresh(w);
}

static void mgt_tui__draw_footer(mgt_tui *t) {
    WINDOW *w = t->w[MGT_TUI__W_FOOTER];
    char keys[160], line[300];
    int kw;
    if (!w) return;
    werase(w);
    kw = snprintf(keys, sizeof keys, " q stop  p %s  s checkpoint  Tab view  arrows scroll  ? help ", t->state == MGT_STATE_PAUSED ? "resume" : "pause");
    if (t->message[0] && kw + 2 + (int)strlen(t->message) > t->cols) kw = 0; /* a message too long to sit beside the keys takes their place for a while */
    if (kw) {
        wattron(w, A_REVERSE);
        mgt_tui__put_all(t, w, 0, 0, keys);
        wattroff(w, A_REVERSE);
    }
    if (t->message[0]) {
        snprintf(line, sizeof line, "%s%s", kw ? "  " : " ", t->message);
        wattron(w, A_BOLD);
        mgt_tui__put_all(t, w, 0, kw, line);
        wattroff(w, A_BOLD);
    }
    wnoutrefresh(w);
}

static void mgt_tui__draw_help(mgt_tui *t) {
    WINDOW *w = t->w[MGT_TUI__W_HELP];
    static const char *lines[] = {
        "q        stop after this step, checkpoint, exit",
        "p/space  pause or resume training",
        "s        write a checkpoint now",
        "Tab      next view: overview, ranks, communication",
        "1 2 3    overview / ranks / communication",
        "arrows   scroll the rank table (PgUp/PgDn, Home/End)",
        "r        loss chart: smoothed (EMA 0.9) or raw losses",
        "?        this help; any key closes it",
        "",
        "bar: compute | communication | bubble (pipeline wait)",
        "! marks the rank that computed longest last step",
        "memory (B, KiB, MiB, GiB): params, grads, optim(izer),",
        "  activ(ations), buffers, work(space), buf+w; peak: all",
        "n/a: not measured here (MFU without a peak, GPU on CPU)",
        "busbw: NCCL factors, all-reduce 2(n-1)/n, rs/ag (n-1)/n",
        "times: h:mm:ss since the run started (header, events)",
    };
    int i;
    if (!w || !t->ui.help) return;
    werase(w);
    mgt_tui__box(t, w, "help");
    for (i = 0; i < (int)(sizeof lines / sizeof lines[0]); i++) mgt_tui__put(t, w, 2 + i, 3, lines[i]);
    wnoutrefresh(w);
}

static void mgt_tui__draw(mgt_tui *t) {
    if (t->L.too_small) {
        char line[120];
        werase(stdscr);
        snprintf(line, sizeof line, "mgt: the dashboard needs %dx%d (this terminal is %dx%d); step %d/%d, loss %.4f", MGT_TUI_MIN_COLS,
                 MGT_TUI_MIN_ROWS, t->cols, t->rows, t->has_last ? t->last.step : 0, t->cfg.train.steps, t->has_last ? t->last.loss : 0.0);
        mgt_tui__put_all(t, stdscr, 0, 0, line);
        mgt_tui__put_all(t, stdscr, 1, 0, "q stops, p pauses, s checkpoints");
        wnoutrefresh(stdscr);
        doupdate();
        return;
    }
    mgt_tui__draw_header(t);
    mgt_tui__draw_loss(t);
    mgt_tui__draw_throughput(t);
    mgt_tui__draw_ranks(t);
    mgt_tui__draw_comm(t);
    mgt_tui__draw_events(t);
    mgt_tui__draw_footer(t);
    mgt_tui__draw_help(t);
    doupdate();
}

int mgt_tui_frame(mgt_tui *t) {
    int flags = 0, ch, view;
    double now;
    if (!t) return MGT_TUI_CLOSED;
    now = mgt_tui__now();
    if (now - t->t_refresh >= t->opt.refresh_s) {
        mgt_tui_refresh(t);
        t->t_refresh = now;
    }
    if (t->message[0] && now - t->message_t >= MGT_TUI_MESSAGE_S) { /* messages expire, as htop's do */
        t->message[0] = 0;
        t->dirty = 1;
    }
    if (t->dirty) {
        mgt_tui__draw(t);
        t->dirty = 0;
        t->draws++;
        flags |= MGT_TUI_DREW;
    }
    t->frames++;
    view = t->ui.view;
    ch = wgetch(stdscr); /* waits up to frame_ms */
    while (ch != ERR) {
        if (ch == KEY_RESIZE) mgt_tui__relayout(t);
        else {
            int f = mgt_tui_key(&t->ui, ch, &t->L);
            if (f & MGT_TUI_RAW) { t->raw = !t->raw; t->dirty = 1; }
            flags |= f & ~(MGT_TUI_REDRAW | MGT_TUI_RAW);
            if (f & MGT_TUI_REDRAW) t->dirty = 1;
        }
        wtimeout(stdscr, 0);
        ch = wgetch(stdscr);
        wtimeout(stdscr, t->opt.frame_ms);
    }
    if (t->ui.view != view) mgt_tui__relayout(t);
    if (t->ui.help && t->dirty) touchwin(t->w[MGT_TUI__W_HELP] ? t->w[MGT_TUI__W_HELP] : stdscr);
    if (t->dirty && !t->ui.help) { /* the help box covered the others: let them be drawn whole */
        int i;
        for (i = 0; i < MGT_TUI__NWIN; i++) if (t->w[i]) touchwin(t->w[i]);
    }
    if (t->opt.max_frames > 0 && t->frames >= t->opt.max_frames) flags |= MGT_TUI_CLOSED;
    return flags;
}

void mgt_tui_summary(const mgt_tui *t, char *out, size_t cap) {
    char tok[16], el[32], mfu[16], speedup[24], ms[16], micro[64], nr[32], cps[24];
    const mgt_config *c;
    const char *state;
    int n, zero;
    if (!t || !cap) return;
    c = &t->cfg;
    zero = c->parallel.dp * c->parallel.cp > 1 ? c->parallel.zero : 0;
    snprintf(cps, sizeof cps, "cp %d x ", c->parallel.cp);
    if (!t->has_last) { snprintf(out, cap, "dashboard closed before the first step finished\n"); return; }
    /* a run the driver stopped before its end was interrupted, whatever the run's state says */
    state = t->stopping && t->state != MGT_STATE_FINISHED && t->state != MGT_STATE_FAILED ? "stopped" : mgt_state_name(t->state);
    if (t->last.has_mfu) snprintf(mfu, sizeof mfu, "%.1f%%", 100 * t->last.mfu);
    else snprintf(mfu, sizeof mfu, "n/a");
    if (mgt_tui__speedup(t) > 0) snprintf(speedup, sizeof speedup, "%.2fx", mgt_tui__speedup(t));
    else snprintf(speedup, sizeof speedup, "n/a");
    mgt_tui_fmt_count(t->last.tokens_per_s, tok, sizeof tok);
    mgt_tui_fmt_ms(t->last.step_ms, ms, sizeof ms);
    mgt_tui_fmt_duration(mgt_tui__clock(t), el, sizeof el);
    mgt_tui_fmt_micro(mgt_tui__micro_steps(c), c->train.micro_batch, micro, sizeof micro);
    mgt_tui_fmt_n(t->nranks, "rank", "ranks", nr, sizeof nr);
    n = snprintf(out, cap, "dashboard: step %d/%d (%s) | loss %.4f, best %.4f, smoothed %.4f", t->last.step, t->cfg.train.steps, state,
                 t->last.loss, t->best, t->ema);
    if (n > 0 && (size_t)n < cap && t->nvals > 0)
        n += snprintf(out + n, cap - (size_t)n, ", val %.4f at step %d", t->vals[t->nvals - 1].loss, t->vals[t->nvals - 1].step);
    if (n > 0 && (size_t)n < cap)
        n += snprintf(out + n, cap - (size_t)n, "\ndashboard: %s tokens/s, %s/step, MFU %s, speedup %s | %s elapsed | %s: dp %d x %stp %d x pp %d, zero %d, %s, %s\n",
                      tok, ms, mfu, speedup, el, nr, c->parallel.dp, c->parallel.cp > 1 ? cps : "", c->parallel.tp, c->parallel.pp, zero,
                      mgt_tui__schedule(c), micro);
    if (t->debug && n > 0 && (size_t)n < cap) { /* MGT_TUI_DEBUG=1; on the dashboard's thread, its CPU time is the cost of drawing */
        double cpu = mgt_tui__cpu() - t->cpu_open, wall = mgt_tui__now() - t->t_open;
        n += snprintf(out + n, cap - (size_t)n, "dashboard: %d frames (%d drawn), %.3f s of CPU in %.1f s (%.2f%% of one core)\n", t->frames, t->draws, cpu, wall,
                      wall > 0 ? 100 * cpu / wall : 0.0);
    }
    (void)n;
}
#endif /* MGT_TUI_LAYOUT_ONLY */

#endif /* MGT_TUI__IMPLEMENTED */
#endif /* MGT_TUI_IMPLEMENTATION */
