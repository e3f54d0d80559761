/* tests/test_tui_layout.c - the dashboard's pure parts, without a terminal: the layout of every
   view for 80x24, 120x40, 200x60 (and a few odd sizes) with 1, 2, 8 and 64 ranks; key handling
   (views, scrolling, flags); bus-bandwidth factors; number formatting. */
#define MGT_TUI_IMPLEMENTATION
#define MGT_TUI_LAYOUT_ONLY
#include "tui/tui.h"

#include <stdio.h>
#include <string.h>

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
    CHECK(L.ranks.w >= 71, "%dx%d %d ranks %s: rank table %d wide (needs 71)", cols, rows, nranks, view_name(view), L.ranks.w);
    if (view == MGT_TUI_OVERVIEW) {
        CHECK(L.loss.h >= 8 && L.loss.w >= 40, "%dx%d %d ranks: loss chart %dx%d", cols, rows, nranks, L.loss.w, L.loss.h);
        CHECK(L.throughput.h >= 8 && L.throughput.w >= 32, "%dx%d %d ranks: throughput %dx%d", cols, rows, nranks, L.throughput.w, L.throughput.h);
        CHECK(L.throughput.h == L.loss.h && L.loss.w + L.throughput.w == cols, "%dx%d: loss and throughput share a row", cols, rows);
        if (cols >= 152) CHECK(L.comm.h >= 9 && L.comm.w >= 80, "%dx%d %d ranks: communication %dx%d", cols, rows, nranks, L.comm.w, L.comm.h);
        else CHECK(L.comm.h == 0, "%dx%d: no communication table beside the ranks below 152 columns", cols, rows);
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
    CHECK(L.rank_rows <= nranks || view != MGT_TUI_OVERVIEW || cols >= 152, "%dx%d %d ranks: %d empty rank rows", cols, rows, nranks, L.rank_rows - nranks);
    /* the help box lies inside the screen */
    CHECK(L.help.x >= 0 && L.help.y >= 0 && L.help.x + L.help.w <= cols && L.help.y + L.help.h <= rows, "%dx%d: help box outside", cols, rows);
}

static void test_layouts(void) {
    static const int sizes[][2] = {{80, 24}, {120, 40}, {200, 60}, {81, 25}, {151, 30}, {152, 30}, {160, 48}, {300, 100}};
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
    mgt_tui_fmt_bytes(512, b, sizeof b); CHECK(!strcmp(b, "512B"), "%s", b);
    mgt_tui_fmt_bytes(136 * 1024, b, sizeof b); CHECK(!strcmp(b, "136K"), "%s", b);
    mgt_tui_fmt_bytes(1.5 * 1048576, b, sizeof b); CHECK(!strcmp(b, "1.50M"), "%s", b);
    mgt_tui_fmt_bytes(80.0 * 1073741824.0, b, sizeof b); CHECK(!strcmp(b, "80.0G"), "%s", b);
    mgt_tui_fmt_bytes(1023.9 * 1048576, b, sizeof b); CHECK(strlen(b) <= 5, "%s", b);
    mgt_tui_fmt_count(187654, b, sizeof b); CHECK(!strcmp(b, "188k"), "%s", b);
    mgt_tui_fmt_count(5.88e3, b, sizeof b); CHECK(!strcmp(b, "5.88k"), "%s", b);
    mgt_tui_fmt_count(12, b, sizeof b); CHECK(!strcmp(b, "12.0"), "%s", b);
    mgt_tui_fmt_duration(59.6, b, sizeof b); CHECK(!strcmp(b, "1:00"), "%s", b);
    mgt_tui_fmt_duration(3723, b, sizeof b); CHECK(!strcmp(b, "1:02:03"), "%s", b);
    mgt_tui_fmt_duration(-1, b, sizeof b); CHECK(!strcmp(b, "0:00"), "%s", b);
}

int main(void) {
    test_layouts();
    test_specific();
    test_keys();
    test_numbers();
    if (failures) { printf("%d failures\n", failures); return 1; }
    printf("test_tui_layout: layouts of 8 sizes x 6 rank counts x 3 views, keys, bandwidth factors, formats: ok\n");
    return 0;
}
