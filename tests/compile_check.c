/* Compiles mgt.h with its implementation under the flags build.ninja gives (C99, C++, MGT_STATIC),
   and uses a few declarations so that MGT_STATIC does not leave them unused. */
#define MGT_IMPLEMENTATION
#include "mgt.h"
#include "mgt.h" /* a second include must be harmless */

int mgt_compile_check(void);
int mgt_compile_check(void) {
    mgt_config cfg;
    mgt_run *run = NULL;
    mgt_stats st;
    mgt_config_init(&cfg);
    if (mgt_config_set(&cfg, "train.steps=1") != MGT_OK) return 1;
    if (mgt_config_validate(&cfg) != MGT_OK) return 2;
    if (mgt_run_create(&run, &cfg) == MGT_OK) {
        mgt_run_step(run);
        mgt_run_stats(run, &st);
        mgt_run_destroy(run);
    }
    return (int)strlen(mgt_last_error()) + (int)strlen(mgt_result_string(MGT_OK));
}
