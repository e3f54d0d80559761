/* src/world.c - the world table: where a run's ranks live and how they reach each other */
/* ---- worlds ------------------------------------------------------------------------------------
   A run's ranks live in one world, which makes each rank's backend and communicator and wakes the
   others when one fails. Four fill the table: rank threads of this process (mgt__world_local,
   src/comm_local.c), MPI processes around CPU ranks (mgt__world_mpi, src/comm_mpi.c), ranks on
   GPUs talking through NCCL (mgt__world_nccl, src/device.c) and the step simulator
   (mgt__world_sim, src/sim_comm.c). A run holds one and never asks which; a new transport fills
   one more. The processes around the ranks (one, or MPI's) are apart from the world: the run's
   `procs`, NULL for one process, which a world may use (NCCL shares its unique id through it). */

typedef struct mgt__mpi_world mgt__mpi_world;

typedef struct mgt__world_args { /* what a world is made from */
    int world, first, count;      /* ranks in all; this process's are first .. first + count - 1 */
    double timeout_s;             /* [parallel] timeout_s */
    mgt__mpi_world *procs;        /* the processes around them, or NULL for one */
    const mgt_cuda_api *cuda;     /* a GPU world's CUDA backend library */
} mgt__world_args;

typedef struct mgt__rank_want { /* what a rank's backend is made for */
    int rank, dtype, threads;     /* threads: a CPU rank's */
    size_t scratch_floats;        /* a CPU rank's attention scratch */
    size_t widen_floats;          /* and its widest operand in fp32 (bf16 and fp16 storage) */
} mgt__rank_want;

typedef struct mgt__world_api {
    const char *device;           /* what mgt_run_device says: "cpu" or "cuda" */
    /* ranks on GPUs: every group is used once when a rank connects (NCCL connects lazily), an
       untimed warm-up step loads the kernels, and the GPUs are read for the dashboard */
    int on_gpus;
    int holds_values;             /* 0: buffers hold nothing (simulated), nothing to initialise */
    mgt_result (*create)(const mgt__world_args *a, void **world); /* NULL: made by its owner */
    /* a rank's backend, and the GPU it is on (-1: none) */
    mgt_result (*backend)(void *world, const mgt__rank_want *want, mgt_backend **out, int *device);
    void (*backend_destroy)(void *world, mgt_backend *be); /* NULL: the world's own */
    /* a rank's communicator, made on the rank's thread beside the others' (NCCL's splits are collective) */
    mgt_result (*comm)(void *world, int rank, mgt_backend *be, const mgt_group *const *groups, int ngroups, mgt_comm **out);
    mgt_result (*settle)(void *world, mgt_comm *c);   /* waits for what the rank enqueued; NULL: calls complete when they return */
    void (*comm_destroy)(void *world, mgt_comm *c);   /* NULL: the world's own */
    void (*rank_failed)(void *world, mgt_comm *c);    /* a rank failed: peers waiting on it return an error */
    void (*read_gpu)(void *world, int device, mgt_gpu_reading *out); /* NULL: no GPUs */
    void (*destroy)(void *world);                     /* NULL: its owner's */
} mgt__world_api;

/* a CPU rank's backend, for the worlds of CPU ranks */
static mgt_result mgt__world_cpu_backend(void *world, const mgt__rank_want *want, mgt_backend **out, int *device) {
    (void)world;
    *device = -1;
    return mgt__cpu_backend_create_typed(out, want->threads, want->scratch_floats, want->dtype, want->widen_floats);
}
static void mgt__world_cpu_backend_destroy(void *world, mgt_backend *be) {
    (void)world;
    mgt__cpu_backend_destroy(be);
}
