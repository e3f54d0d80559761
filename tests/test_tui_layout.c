/* tests/test_tui_layout.c - the dashboard's pure parts, without a terminal: the layout of every
   view for 80x24, 120x40, 160x48, 200x60 (and a few odd sizes) with 1, 2, 8 and 64 ranks; key
   handling (views, scrolling, flags); bus-bandwidth factors; number formatting; the rank table's
   columns, the header's progress bar, text cut to a box, the loss chart's range. Regression tests
   are named after the bug they caught (nvtop's habit). */
#define MGT_TUI_IMPLEMENTATION
#define MGT_TUI_LAYOUT_ONLY
#include "tui/tui.h"

#include <stdio.h>
#include <string.h>
#include <math.h>

static int failures;
#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            failures++;                                                       \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);           \
            printf(__VA_ARGS__);                                              \
            printf("\n");                                                     \
        }                                                                     \
    } while (0)

static const char *view_name(int v) { return v == MGT_TUI_OVERVIEW ? "overview" : v == MGT_TUI_RANKS ? "ranks" : "comm"; }

static int overlap(const mgt_tui_rect *a, const mgt_tui_rect *b) {
    if (a->h <= 0 || b->h <= 0) return 0;
    return a->x < b->x + b->w && b->x < a->x + a->w && a->y < b->y + b->h && b->y < a->y + a->h;
}

static void check_layout(int cols, int rows, int nranks, int view) {
    mgt_tui_panes L;
    const mgt_tui_rect *r[7];
    const char *names[7] = {"header", "loss", "throughput", "ranks", "comm", "events", "footer"};
    int i, j, ok, area = 0;
    ok = mgt_tui_layout(cols, rows, nranks, view, &L);
    CHECK(ok == 1 && !L.too_small, "%dx%d %d ranks %s: not laid out", cols, rows, nranks, view_name(view));
    r[0] = &L.header; r[1] = &L.loss; r[2] = &L.throughput; r[3] = &L.ranks; r[4] = &L.comm; r[5] = &L.events; r[6] = &L.footer;
    for (i = 0; i < 7; i++) {
        if (r[i]->h == 0) continue;
        CHECK(r[i]->w > 0 && r[i]->h > 0 && r[i]->x >= 0 && r[i]->y >= 0 && r[i]->x + r[i]->w <= cols && r[i]->y + r[i]->h <= rows,
              "%dx%d %d ranks %s: %s at %d,%d %dx%d is outside the screen", cols, rows, nranks, view_name(view), names[i], r[i]->y, r[i]->x,
              r[i]->w, r[i]->h);
        area += r[i]->w * r[i]->h;
        for (j = i + 1; j < 7; j++)
            CHECK(!overlap(r[i], r[j]), "%dx%d %d ranks %s: %s overlaps %s", cols, rows, nranks, view_name(view), names[i], names[j]);
    }
    CHECK(area == cols * rows, "%dx%d %d ranks %s: windows cover %d of %d cells", cols, rows, nranks, view_name(view), area, cols * rows);
    /* minimum sizes: what each window needs to say anything useful */
    CHECK(L.header.h == 2 && L.footer.h == 1, "%dx%d %s: header %d rows, footer %d", cols, rows, view_name(view), L.header.h, L.footer.h);
    CHECK(L.events.h >= 3 && L.events.w == cols, "%dx%d %d ranks %s: events %dx%d", cols, rows, nranks, view_name(view), L.events.w, L.events.h);
    CHECK(L.ranks.h >= 4 && L.rank_rows >= 1, "%dx%d %d ranks %s: rank table %d rows", cols, rows, nranks, view_name(view), L.ranks.h);
    CHECK(L.ranks.w >= 80, "%dx%d %d ranks %s: rank table %d wide (needs 80)", cols, rows, nranks, view_name(view), L.ranks.w);
    if (view == MGT_TUI_OVERVIEW) {
        CHECK(L.loss.h >= 8 && L.loss.w >= 40, "%dx%d %d ranks: loss chart %dx%d", cols, rows, nranks, L.loss.w, L.loss.h);
        CHECK(L.throughput.h >= 8 && L.throughput.w >= 32, "%dx%d %d ranks: throughput %dx%d", cols, rows, nranks, L.throughput.w, L.throughput.h);
        CHECK(L.throughput.h == L.loss.h && L.loss.w + L.throughput.w == cols, "%dx%d: loss and throughput share a row", cols, rows);
        if (cols >= 160) CHECK(L.comm.h >= 9 && L.comm.w >= 80, "%dx%d %d ranks: communication %dx%d", cols, rows, nranks, L.comm.w, L.comm.h);
        else CHECK(L.comm.h == 0, "%dx%d: no communication table beside the ranks below 160 columns", cols, rows);
    } else {
        CHECK(L.loss.h == 0 && L.throughput.h == 0, "%dx%d %s: no charts", cols, rows, view_name(view));
    }
    if (view == MGT_TUI_COMM) CHECK(L.comm.h >= 9 && L.comm.w == cols, "%dx%d %d ranks: communication %dx%d", cols, rows, nranks, L.comm.w, L.comm.h);
    if (view == MGT_TUI_RANKS) CHECK(L.comm.h == 0, "%dx%d: ranks view has no communication table", cols, rows);
    /* scrolling: every rank fits or the table scrolls exactly far enough */
    CHECK(L.rank_rows == L.ranks.h - 3, "%dx%d: rank rows %d in a window of %d", cols, rows, L.rank_rows, L.ranks.h);
    if (nranks <= L.rank_rows) CHECK(L.max_scroll == 0, "%dx%d %d ranks %s: scrolls by %d though all fit", cols, rows, nranks, view_name(view), L.max_scroll);
    else CHECK(L.max_scroll == nranks - L.rank_rows, "%dx%d %d ranks %s: max scroll %d", cols, rows, nranks, view_name(view), L.max_scroll);
    /* the table does not take more rows than it has ranks */
    CHECK(L.rank_rows <= nranks || view != MGT_TUI_OVERVIEW || cols >= 160, "%dx%d %d ranks: %d empty rank rows", cols, rows, nranks, L.rank_rows - nranks);
    /* the help box lies inside the screen */
    CHECK(L.help.x >= 0 && L.help.y >= 0 && L.help.x + L.help.w <= cols && L.help.y + L.help.h <= rows, "%dx%d: help box outside", cols, rows);
}

static void test_layouts(void) {
    static const int sizes[][2] = {{80, 24}, {120, 40}, {200, 60}, {81, 25}, {151, 30}, {152, 30}, {159, 30}, {160, 48}, {300, 100}};
    static const int ranks[] = {1, 2, 8, 64, 3, 1000};
    int s, k, v;
    for (s = 0; s < (int)(sizeof sizes / sizeof sizes[0]); s++)
        for (k = 0; k < (int)(sizeof ranks / sizeof ranks[0]); k++)
            for (v = 0; v < MGT_TUI_VIEWS; v++) check_layout(sizes[s][0], sizes[s][1], ranks[k], v);
}

static void test_specific(void) {
    mgt_tui_panes L;
    /* 64 ranks never fit in 80x24: the table scrolls in every view */
    mgt_tui_layout(80, 24, 64, MGT_TUI_OVERVIEW, &L);
    CHECK(L.max_scroll > 0 && L.rank_rows < 64, "80x24 64 ranks overview: rank rows %d", L.rank_rows);
    mgt_tui_layout(80, 24, 64, MGT_TUI_RANKS, &L);
    CHECK(L.max_scroll > 0, "80x24 64 ranks ranks view: no scrolling");
    /* 8 ranks fit whole in the ranks view of 120x40 and 200x60 */
    mgt_tui_layout(120, 40, 8, MGT_TUI_RANKS, &L);
    CHECK(L.rank_rows >= 8 && L.max_scroll == 0, "120x40 8 ranks: %d rows", L.rank_rows);
    mgt_tui_layout(200, 60, 64, MGT_TUI_RANKS, &L);
    CHECK(L.rank_rows >= 40, "200x60 64 ranks: only %d rows in the ranks view", L.rank_rows);
    /* 2 ranks: the overview gives the chart what the table does not need */
    mgt_tui_layout(80, 24, 2, MGT_TUI_OVERVIEW, &L);
    CHECK(L.ranks.h == 5 && L.loss.h >= 12, "80x24 2 ranks: ranks %d rows, loss %d", L.ranks.h, L.loss.h);
    /* too small: a notice only, never negative sizes */
    CHECK(mgt_tui_layout(79, 24, 2, MGT_TUI_OVERVIEW, &L) == 0 && L.too_small && L.loss.h == 0, "79x24 is too small");
    CHECK(mgt_tui_layout(80, 23, 2, MGT_TUI_OVERVIEW, &L) == 0 && L.too_small, "80x23 is too small");
    CHECK(mgt_tui_layout(10, 1, 2, MGT_TUI_OVERVIEW, &L) == 0 && L.header.h == 1 && L.footer.h == 0, "10x1");
    CHECK(mgt_tui_layout(0, 0, 2, MGT_TUI_OVERVIEW, &L) == 0 && L.header.h == 0, "0x0");
    CHECK(mgt_tui_layout(80, 24, 0, MGT_TUI_OVERVIEW, &L) == 0, "0 ranks");
}

static void test_keys(void) {
    mgt_tui_panes L;
    mgt_tui_ui ui;
    int i;
    memset(&ui, 0, sizeof ui);
    mgt_tui_layout(80, 24, 64, MGT_TUI_OVERVIEW, &L);
    CHECK(mgt_tui_key(&ui, 'q', &L) == MGT_TUI_STOP, "q stops");
    CHECK(mgt_tui_key(&ui, 'p', &L) == MGT_TUI_PAUSE, "p pauses");
    CHECK(mgt_tui_key(&ui, 's', &L) == MGT_TUI_SAVE, "s saves");
    CHECK(mgt_tui_key(&ui, 'x', &L) == 0, "unknown keys do nothing");
    CHECK(mgt_tui_key(&ui, 'r', &L) == MGT_TUI_RAW, "r: raw or smoothed loss");
    CHECK(mgt_tui_key(&ui, '\t', &L) == MGT_TUI_REDRAW && ui.view == MGT_TUI_RANKS, "Tab: ranks");
    CHECK(mgt_tui_key(&ui, '\t', &L) == MGT_TUI_REDRAW && ui.view == MGT_TUI_COMM, "Tab: communication");
    CHECK(mgt_tui_key(&ui, '\t', &L) == MGT_TUI_REDRAW && ui.view == MGT_TUI_OVERVIEW, "Tab: overview again");
    CHECK(mgt_tui_key(&ui, 0541 /* KEY_BTAB */, &L) == MGT_TUI_REDRAW && ui.view == MGT_TUI_COMM, "Shift-Tab goes back");
    ui.view = MGT_TUI_OVERVIEW;
    CHECK(mgt_tui_key(&ui, 0403 /* KEY_UP */, &L) == 0 && ui.scroll == 0, "up at the top does nothing");
    CHECK(mgt_tui_key(&ui, 0402 /* KEY_DOWN */, &L) == MGT_TUI_REDRAW && ui.scroll == 1, "down scrolls");
    for (i = 0; i < 200; i++) mgt_tui_key(&ui, 0402, &L);
    CHECK(ui.scroll == L.max_scroll, "scrolling stops at the last rank (%d, max %d)", ui.scroll, L.max_scroll);
    CHECK(mgt_tui_key(&ui, 0406 /* KEY_HOME */, &L) == MGT_TUI_REDRAW && ui.scroll == 0, "Home");
    CHECK(mgt_tui_key(&ui, 0550 /* KEY_END */, &L) == MGT_TUI_REDRAW && ui.scroll == L.max_scroll, "End");
    CHECK(mgt_tui_key(&ui, '\t', &L) == MGT_TUI_REDRAW && ui.scroll == 0, "a new view starts at the top");
    CHECK(mgt_tui_key(&ui, '?', &L) == MGT_TUI_REDRAW && ui.help, "? opens help");
    CHECK(mgt_tui_key(&ui, 'x', &L) == MGT_TUI_REDRAW && !ui.help, "any key closes help");
    ui.help = 1;
    CHECK(mgt_tui_key(&ui, 'q', &L) == MGT_TUI_STOP, "q stops even with help open");
    mgt_tui_layout(80, 24, 2, MGT_TUI_OVERVIEW, &L);
    memset(&ui, 0, sizeof ui);
    CHECK(mgt_tui_key(&ui, 0402, &L) == 0 && ui.scroll == 0, "nothing to scroll with 2 ranks");
}

static void test_numbers(void) {
    char b[32];
    CHECK(mgt_tui_busbw_factor(0, 8) == 2.0 * 7 / 8, "all-reduce factor");
    CHECK(mgt_tui_busbw_factor(1, 4) == 0.75 && mgt_tui_busbw_factor(2, 4) == 0.75, "reduce-scatter, all-gather factor");
    CHECK(mgt_tui_busbw_factor(3, 8) == 1.0 && mgt_tui_busbw_factor(4, 2) == 1.0, "broadcast, send/recv factor");
    CHECK(mgt_tui_busbw_factor(0, 1) == 0.0, "one member moves nothing");
    mgt_tui_fmt_bytes(0, b, sizeof b); CHECK(!strcmp(b, "0B"), "%s", b);
    mgt_tui_fmt_bytes(512, b, sizeof b); CHECK(!strcmp(b, "512B"), "%s", b);
    mgt_tui_fmt_count(187654, b, sizeof b); CHECK(!strcmp(b, "188k"), "%s", b);
    mgt_tui_fmt_count(5.88e3, b, sizeof b); CHECK(!strcmp(b, "5.88k"), "%s", b);
    mgt_tui_fmt_count(12, b, sizeof b); CHECK(!strcmp(b, "12.0"), "%s", b);
    /* one format for every time on the screen (the run's clock): h:mm:ss */
    mgt_tui_fmt_duration(5, b, sizeof b); CHECK(!strcmp(b, "0:00:05"), "%s", b);
    mgt_tui_fmt_duration(59.6, b, sizeof b); CHECK(!strcmp(b, "0:01:00"), "%s", b);
    mgt_tui_fmt_duration(3723, b, sizeof b); CHECK(!strcmp(b, "1:02:03"), "%s", b);
    mgt_tui_fmt_duration(-1, b, sizeof b); CHECK(!strcmp(b, "0:00:00"), "%s", b);
}

/* issue 12.1: "params 3.21M 46.6M 0B" read as parameter counts; memory now carries B/KiB/MiB/GiB */
static void test_memory_columns_without_units(void) {
    static const struct { double bytes; const char *full, *shrt; } cases[] = {
        {0, "0B", "0B"}, {512, "512B", "512B"}, {1023, "1023B", "1023B"}, {136 * 1024., "136KiB", "136KiB"},
        {4096, "4.00KiB", "4.0KiB"}, {1.5 * 1048576, "1.50MiB", "1.5MiB"}, {3.21 * 1048576, "3.21MiB", "3.2MiB"},
        {46.6 * 1048576, "46.6MiB", "47MiB"}, {80.0 * 1073741824.0, "80.0GiB", "80GiB"}, {1023.9 * 1048576, "1.00GiB", "1.0GiB"},
    };
    char b[32];
    int i;
    double x;
    for (i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        mgt_tui_fmt_bytes(cases[i].bytes, b, sizeof b);
        CHECK(!strcmp(b, cases[i].full), "%.0f bytes: %s, expected %s", cases[i].bytes, b, cases[i].full);
        mgt_tui_fmt_bytes_short(cases[i].bytes, b, sizeof b);
        CHECK(!strcmp(b, cases[i].shrt), "%.0f bytes (short): %s, expected %s", cases[i].bytes, b, cases[i].shrt);
    }
    for (x = 1; x < 1e16; x *= 1.37) { /* the table's column widths hold every size, and every size names its unit */
        mgt_tui_fmt_bytes(x, b, sizeof b);
        CHECK(strlen(b) <= 7 && b[strlen(b) - 1] == 'B', "%.0f bytes: %s", x, b);
        mgt_tui_fmt_bytes_short(x, b, sizeof b);
        CHECK(strlen(b) <= 6 && b[strlen(b) - 1] == 'B', "%.0f bytes (short): %s", x, b);
    }
}

/* issue 12.1: the header's "mb1" read as "micro_batch 1" where the preset said 4 */
static void test_header_mb1_reads_as_micro_batch(void) {
    char b[64];
    mgt_tui_fmt_micro(1, 4, b, sizeof b); CHECK(!strcmp(b, "1 micro-batch x 4 seq"), "%s", b);
    mgt_tui_fmt_micro(2, 8, b, sizeof b); CHECK(!strcmp(b, "2 micro-batches x 8 seq"), "%s", b);
}

/* issue 12.3: "(1 ranks)" */
static void test_one_ranks(void) {
    char b[32];
    mgt_tui_fmt_n(1, "rank", "ranks", b, sizeof b); CHECK(!strcmp(b, "1 rank"), "%s", b);
    mgt_tui_fmt_n(8, "rank", "ranks", b, sizeof b); CHECK(!strcmp(b, "8 ranks"), "%s", b);
    mgt_tui_fmt_n(0, "rank", "ranks", b, sizeof b); CHECK(!strcmp(b, "0 ranks"), "%s", b);
}

static int cols_of(const char *s) { int n = 0; for (; *s; s++) n += ((unsigned char)*s & 0xc0) != 0x80; return n; }
static int ends_with(const char *s, const char *tail) { size_t a = strlen(s), b = strlen(tail); return a >= b && !strcmp(s + a - b, tail); }

/* issue 12.3: at 80 columns "step 20: checkpoint <a long path>" ran over the events box's right
   border; text is now cut to the box, a path keeping its tail */
static void test_checkpoint_path_overwrites_events_border(void) {
    const char *ev = "step 20: checkpoint /home/someone/experiments/2024/a-long-folder-name/runs/x/step_00000020.safetensors";
    char b[512];
    int w, n;
    /* the events box at 80 columns: 78 inside, 10 for the time */
    n = mgt_tui_fit(ev, 68, 1, b, sizeof b);
    CHECK(n <= 68 && cols_of(b) <= 68, "fits 68 columns: %d: %s", cols_of(b), b);
    CHECK(!strncmp(b, "step 20: checkpoint \xe2\x80\xa6/", 24), "keeps the words before the path, then ...: %s", b);
    CHECK(ends_with(b, "/runs/x/step_00000020.safetensors"), "keeps the path's tail: %s", b);
    mgt_tui_fit(ev, 68, 0, b, sizeof b);
    CHECK(cols_of(b) <= 68 && !strncmp(b, "step 20: checkpoint .../", 24) && ends_with(b, "step_00000020.safetensors"), "ASCII: %s", b);
    for (w = 0; w < 120; w++) { /* every width: never more than asked, the file name while it fits */
        n = mgt_tui_fit(ev, w, 1, b, sizeof b);
        CHECK(cols_of(b) <= w && n == cols_of(b), "width %d: %d columns (%d returned): %s", w, cols_of(b), n, b);
        if (w >= 60) CHECK(ends_with(b, "step_00000020.safetensors"), "width %d: the file name is lost: %s", w, b);
        n = mgt_tui_fit(ev, w, 0, b, sizeof b);
        CHECK(cols_of(b) <= w && n == cols_of(b), "ASCII width %d: %d columns: %s", w, cols_of(b), b);
    }
    mgt_tui_fit("short", 68, 1, b, sizeof b); CHECK(!strcmp(b, "short"), "short text unchanged: %s", b);
    mgt_tui_fit("no path in this rather long sentence at all", 20, 1, b, sizeof b);
    CHECK(!strcmp(b, "no path in this rat\xe2\x80\xa6"), "no path: cut at the end: %s", b);
    mgt_tui_fit("\xce\xbb\xce\xbb\xce\xbb\xce\xbb", 3, 1, b, sizeof b); /* UTF-8 is counted in characters */
    CHECK(!strcmp(b, "\xce\xbb\xce\xbb\xe2\x80\xa6"), "UTF-8: %s", b);
    {
        const char *alts[] = {"a long first choice", "shorter", "tiny"};
        CHECK(mgt_tui_pick(alts, 3, 40, 1, b, sizeof b) == 0 && !strcmp(b, alts[0]), "pick: the first that fits");
        CHECK(mgt_tui_pick(alts, 3, 10, 1, b, sizeof b) == 1 && !strcmp(b, "shorter"), "pick: the second");
        CHECK(mgt_tui_pick(alts, 3, 3, 1, b, sizeof b) == 2 && cols_of(b) == 3, "pick: the last, cut: %s", b);
    }
}

/* issue 12.3: at 120 columns the rank table's column names were cut to "buffe works"; every name
   now fits whole (or is a deliberate abbreviation) at every width */
static void test_rank_headers_cut_at_120_columns(void) {
    static const char *names[] = {"rank", "dp", "tp", "pp", "dev", "compute/comm/bubble", "cmp/com/bub", "c/c/b", "cmp%", "com%", "bub%", "param",
                                  "params", "grads", "optim", "optimizer", "activ", "activations", "buf+w", "buffers", "work", "workspace",
                                  "peak", "gpu", "power", "temp"};
    char h[600], word[64];
    int W, barw, form, k;
    for (W = 80; W <= 300; W++) {
        const char *p;
        form = mgt_tui_rank_columns(W, &barw, h, sizeof h);
        CHECK(1 + (int)strlen(h) <= W - 1, "W %d: the names (%d) run over the border: %s", W, (int)strlen(h), h);
        CHECK(MGT_TUI__BAR_X + barw + mgt_tui__rank_fields(form) <= W - 1, "W %d form %d: a row (%d) runs over the border", W, form,
              MGT_TUI__BAR_X + barw + mgt_tui__rank_fields(form));
        CHECK(barw >= 10, "W %d: bar %d", W, barw);
        for (p = h; *p;) { /* every word is a whole column name */
            int n = 0, known = 0;
            while (*p == ' ') p++;
            while (*p && *p != ' ' && n < 63) word[n++] = *p++;
            word[n] = 0;
            if (!n) break;
            for (k = 0; k < (int)(sizeof names / sizeof names[0]); k++) known |= !strcmp(word, names[k]);
            CHECK(known, "W %d: column name '%s' is cut: %s", W, word, h);
        }
    }
    /* what the layouts give the rank table: 120x40 (118 wide, was "buffe works"), 80 (80), 160x48 overview (80), ranks view (160), 200 overview (110) */
    form = mgt_tui_rank_columns(120, &barw, h, sizeof h);
    CHECK(form == 1 && strstr(h, " buffers ") && strstr(h, " work ") && !strstr(h, "buffe "), "120 columns: %s", h);
    CHECK(mgt_tui_rank_columns(80, &barw, h, sizeof h) == 0 && strstr(h, "buf+w"), "80 columns: %s", h);
    CHECK(mgt_tui_rank_columns(160, &barw, h, sizeof h) == 2 && strstr(h, "workspace"), "160 columns: %s", h);
}

/* issue 12.3: the progress bar was 15, 18 and 10 cells wide at 80 columns in the overview, ranks and
   communication views (its width came from what followed it, the view's name) */
static void test_progress_bar_changes_width_between_views(void) {
    static const int steps[] = {1, 20, 999, 1200, 100000, 9999999};
    int cols, i;
    for (cols = 80; cols <= 300; cols++)
        for (i = 0; i < 6; i++) {
            char head[64];
            int bw = mgt_tui_progress_width(cols, steps[i]), n = snprintf(head, sizeof head, " step %d/%d ", steps[i], steps[i]);
            int len = n + 2 + bw + (int)strlen(MGT_TUI__PROGRESS_TAIL);
            CHECK(len <= cols || bw == 5, "%d columns, %d steps: the line is %d", cols, steps[i], len);
            CHECK(bw >= 5, "%d columns: bar %d", cols, bw);
        }
    /* the tail is written at its widest: the longest view name and h:mm:ss */
    CHECK(strstr(MGT_TUI__PROGRESS_TAIL, "| overview") && strstr(MGT_TUI__PROGRESS_TAIL, "0:00:00 |"), "%s", MGT_TUI__PROGRESS_TAIL);
}

/* issue 12.3: a sparkline glued to its number: a step of 1000 ms or more ("1234.5 ms") filled the
   value's 8 columns and the space before the sparkline */
static void test_sparkline_glued_to_step_time(void) {
    char b[32];
    double ms;
    mgt_tui_fmt_ms(1.2, b, sizeof b); CHECK(!strcmp(b, "1.20 ms"), "%s", b);
    mgt_tui_fmt_ms(45.6, b, sizeof b); CHECK(!strcmp(b, "45.6 ms"), "%s", b);
    mgt_tui_fmt_ms(1234.5, b, sizeof b); CHECK(!strcmp(b, "1.23 s"), "%s", b);
    mgt_tui_fmt_ms(-1, b, sizeof b); CHECK(!strcmp(b, "n/a"), "%s", b);
    for (ms = 1e-3; ms < 1e12; ms *= 1.1) { mgt_tui_fmt_ms(ms, b, sizeof b); CHECK(strlen(b) <= 8, "%g ms: %s", ms, b); }
}

/* issue 12.4: the loss chart spanned every loss so far, so after a warmup spike from 10.9 the slow
   decline below 3.2 was a flat line along the bottom */
static void test_loss_chart_flat_after_warmup(void) {
    enum { N = 2000, DW = 140 };
    static float raw[N], sm[N], col[DW];
    double lo, hi, rmin = 1e9, rmax = -1e9;
    unsigned r = 12345;
    int i, px;
    for (i = 0; i < N; i++) { /* 10.9 falling to 3.2 within 60 steps, then 3.2 -> 2.9 slowly, with noise */
        double base = i < 60 ? 3.2 + 7.7 * exp(-i / 12.0) : 3.2 - 0.3 * (i - 60) / (N - 60.0);
        r = r * 1103515245u + 12345u;
        raw[i] = (float)(base + 0.04 * (((r >> 16) & 1023) / 1023.0 - 0.5));
        if (raw[i] < rmin) rmin = raw[i];
        if (raw[i] > rmax) rmax = raw[i];
    }
    /* the old range: every raw loss, the decline a few percent of the chart's height */
    CHECK((3.2 - 2.9) / (rmax - rmin) < 0.05, "the old range is %.3f..%.3f", rmin, rmax);
    mgt_tui_smooth(raw, N, MGT_TUI_SMOOTHING, sm);
    CHECK(fabs(sm[0] - raw[0]) < 1e-6, "debiased: the first smoothed value is the first loss (%f, %f)", sm[0], raw[0]);
    for (px = 0; px < DW; px++) { /* the chart's dot columns: the mean of the smoothed steps in each */
        int a = px * N / DW, b = (px + 1) * N / DW, j;
        double s = 0;
        for (j = a; j < b; j++) s += sm[j];
        col[px] = (float)(s / (b - a));
    }
    mgt_tui_loss_range(col, DW, &lo, &hi);
    CHECK(lo <= 2.92 && lo > 2.8, "lo %.3f: the lowest smoothed value in view, with a margin", lo);
    CHECK(hi >= 3.2 && hi < 3.6, "hi %.3f: the spike cut off, the decline from 3.2 in view", hi);
    CHECK((3.2 - 2.9) / (hi - lo) >= 0.5, "the decline takes %.0f%% of the height", 100 * (3.2 - 2.9) / (hi - lo));
    /* a late rise stays in view */
    for (px = DW - 10; px < DW; px++) col[px] = 5.0f;
    mgt_tui_loss_range(col, DW, &lo, &hi);
    CHECK(hi >= 5.0, "a rise at the end is cut off: hi %.3f", hi);
    /* early in the run (the spike is most of it) the spike is what is shown */
    mgt_tui_loss_range(sm, 40, &lo, &hi);
    CHECK(hi > 6 && lo < sm[39], "early: %.3f..%.3f", lo, hi);
    /* flat, one value, none, non-finite */
    for (i = 0; i < 10; i++) col[i] = 2.5f;
    mgt_tui_loss_range(col, 10, &lo, &hi); CHECK(lo < 2.5 && hi > 2.5 && hi - lo < 0.01, "flat: %f..%f", lo, hi);
    mgt_tui_loss_range(col, 1, &lo, &hi); CHECK(lo < 2.5 && hi > 2.5, "one value: %f..%f", lo, hi);
    mgt_tui_loss_range(col, 0, &lo, &hi); CHECK(lo < hi, "none: %f..%f", lo, hi);
    col[0] = (float)NAN; col[1] = (float)INFINITY;
    mgt_tui_loss_range(col, 3, &lo, &hi); CHECK(isfinite(lo) && isfinite(hi) && lo < 2.5 && hi > 2.5, "non-finite skipped: %f..%f", lo, hi);
    raw[0] = (float)NAN; raw[1] = 4; raw[2] = (float)NAN;
    mgt_tui_smooth(raw, 3, 0.9, sm);
    CHECK(isnan(sm[0]) && sm[1] == 4 && sm[2] == 4, "smooth skips non-finite: %f %f %f", sm[0], sm[1], sm[2]);
}

int main(void) {
    test_layouts();
    test_specific();
    test_keys();
    test_numbers();
    test_memory_columns_without_units();
    test_header_mb1_reads_as_micro_batch();
    test_one_ranks();
    test_checkpoint_path_overwrites_events_border();
    test_rank_headers_cut_at_120_columns();
    test_progress_bar_changes_width_between_views();
    test_sparkline_glued_to_step_time();
    test_loss_chart_flat_after_warmup();
    if (failures) { printf("%d failures\n", failures); return 1; }
    printf("test_tui_layout: layouts of 9 sizes x 6 rank counts x 3 views, keys, bandwidth factors, formats, rank columns, progress bar, fitting, loss range: ok\n");
    return 0;
}
