/* tests/test_no_mpi.c - mgt.h built with MGT_NO_MPI (issue 24: optional parts): ranks in one
   process still train (the in-process world), and a run started as one of several processes of
   an MPI launcher is refused with a message naming the switch, rather than training as one of N
   independent copies or failing for want of an MPI library. */
#define MGT_NO_MPI
#define MGT_IMPLEMENTATION
#include "mgt.h"
#include "train_util.h"

static char dir[256];

int main(void) {
    mgt_config cfg;
    mgt_run *run = NULL;
    mgt_stats st;
    char set[600];
    mgt_result r;
    make_workdir(dir, sizeof dir, "no_mpi", 20000, 7);
    mgt_config_init(&cfg);
    mgt_config_set(&cfg, "model.n_layer=2");
    mgt_config_set(&cfg, "model.n_head=2");
    mgt_config_set(&cfg, "model.d_model=32");
    mgt_config_set(&cfg, "model.seq_len=32");
    mgt_config_set(&cfg, "train.global_batch=8");
    mgt_config_set(&cfg, "train.micro_batch=2");
    mgt_config_set(&cfg, "parallel.dp=2");
    mgt_config_set(&cfg, "parallel.threads=2");
    mgt_config_set(&cfg, "log.metrics=none");
    mgt_config_set(&cfg, "data.val=");
    snprintf(set, sizeof set, "data.train=%s/corpus.bin", dir);
    mgt_config_set(&cfg, set);
    snprintf(set, sizeof set, "checkpoint.dir=%s/run", dir);
    mgt_config_set(&cfg, set);

    r = mgt_run_create(&run, &cfg);
    if (r == MGT_OK) r = mgt_run_step(run);
    mgt_run_stats(run, &st);
    check(r == MGT_OK && st.step == 1 && isfinite(st.loss), "two ranks in one process train without MPI: step %d, loss %.4f%s%s", st.step, st.loss,
          r == MGT_OK ? "" : ": ", r == MGT_OK ? "" : mgt_last_error());
    mgt_run_destroy(run);
    run = NULL;

    setenv("OMPI_COMM_WORLD_SIZE", "2", 1); /* as Open MPI's mpirun -np 2 starts each process */
    setenv("OMPI_COMM_WORLD_RANK", "0", 1);
    r = mgt_run_create(&run, &cfg);
    check(r == MGT_ERROR_UNSUPPORTED && strstr(mgt_last_error(), "built with MGT_NO_MPI") && strstr(mgt_last_error(), "OMPI_COMM_WORLD_SIZE=2"),
          "under an MPI launcher of 2 processes the run is refused: %s", r == MGT_OK ? "(it was created)" : mgt_last_error());
    mgt_run_destroy(run);
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("OMPI_COMM_WORLD_RANK");
    return finish(dir, "no_mpi");
}
