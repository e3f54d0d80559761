/* tests/compile_check_tui.c - tui/tui.h compiles on its own terms: C99 -pedantic and C++11, gcc
   and clang, implementation included (mgt.h's declarations only). Built by `ninja checks`. */
#include "mgt.h"
#define MGT_TUI_IMPLEMENTATION
#include "tui/tui.h"

int mgt_tui_compile_check(void);
int mgt_tui_compile_check(void) {
    mgt_tui_panes p;
    mgt_tui_ui ui = {0, 0, 0};
    return mgt_tui_layout(80, 24, 2, MGT_TUI_OVERVIEW, &p) + mgt_tui_key(&ui, 'q', &p);
}
