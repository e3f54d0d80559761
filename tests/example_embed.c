/* The README's embedding example: load a preset, train a few steps, read the statistics. */
#define MGT_IMPLEMENTATION
#include "mgt.h"

int main(int argc, char **argv) {
    mgt_config cfg;
    mgt_run *run;
    mgt_stats st;
    int i;
    mgt_config_init(&cfg);
    if (mgt_config_load(&cfg, argc > 1 ? argv[1] : "presets/quickstart.ini") != MGT_OK ||
        mgt_run_create(&run, &cfg) != MGT_OK) {
        fprintf(stderr, "%s\n", mgt_last_error());
        return 2;
    }
    for (i = 0; i < 5; i++) {
        if (mgt_run_step(run) != MGT_OK) { fprintf(stderr, "%s\n", mgt_last_error()); return 1; }
        mgt_run_stats(run, &st);
        printf("step %d loss %.4f %.0f tok/s\n", st.step, st.loss, st.tokens_per_s);
    }
    mgt_run_destroy(run);
    return st.loss < 5.6 ? 0 : 1; /* byte-level loss starts near ln(256) = 5.55 and must not blow up */
}
