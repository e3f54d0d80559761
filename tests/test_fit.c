/* mgt_plan_fit: a run that does not fit the machine is refused before anything is allocated, with the
   numbers and what would make it fit. GPUs come from a fake CUDA table (mgt_cuda_use) whose devices
   report the free memory the test chooses and whose NCCL world fails on purpose: a run refused by
   the check never gets there; one that fits does. The CPU side (MemAvailable, ulimit -v) is tested
   from the command line by tests/test_resources.sh. */
#define MGT_IMPLEMENTATION
#include "mgt.h"

static int failures;
static void check(int ok, const char *what) {
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok) failures++;
}

static double gpu_free[8];
static int worlds;
static int fake_probe(int *devices, char *why, size_t cap) { (void)why; (void)cap; *devices = 8; return 0; }
static int fake_info(int device, mgt_gpu_info *out) {
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "fake GPU %d", device);
    out->memory_total = (size_t)80 << 30;
    out->memory_free = (size_t)gpu_free[device];
    return 0;
}
static mgt_result fake_world_create(int world, int first, int count, const int *devices, const void *id, double timeout_s, mgt_fail_fn fail,
                                    void **out) {
    (void)world; (void)first; (void)count; (void)devices; (void)id; (void)timeout_s; (void)out;
    worlds++;
    return fail(MGT_ERROR_DEVICE, "fake: the NCCL world is not made in this test");
}

/* GPT-2 124M on dp GPUs, micro-batches of 16 x 1024 tokens */
static void gpt2(mgt_config *cfg, int dp) {
    char set[64];
    mgt_config_init(cfg);
    mgt_config_set(cfg, "model.n_layer=12");
    mgt_config_set(cfg, "model.n_head=12");
    mgt_config_set(cfg, "model.d_model=768");
    mgt_config_set(cfg, "model.seq_len=1024");
    mgt_config_set(cfg, "model.vocab_size=50304");
    mgt_config_set(cfg, "data.tokenizer=gpt2");
    mgt_config_set(cfg, "data.train=");
    mgt_config_set(cfg, "data.val=");
    mgt_config_set(cfg, "log.metrics=none");
    mgt_config_set(cfg, "parallel.device=cuda");
    mgt_config_set(cfg, "train.global_batch=64");
    mgt_config_set(cfg, "train.micro_batch=16");
    snprintf(set, sizeof set, "parallel.dp=%d", dp);
    mgt_config_set(cfg, set);
}

int main(void) {
    mgt_cuda_api api;
    mgt_config cfg;
    mgt_fit fit;
    mgt_run *run = NULL;
    mgt_result r;
    char what[1024];
    int i;
    memset(&api, 0, sizeof api);
    api.abi = MGT_CUDA_ABI;
    api.probe = fake_probe;
    api.info = fake_info;
    api.world_create = fake_world_create;
    mgt_cuda_use(&api);

    /* every GPU roomy: fits; the run goes on to make its NCCL world */
    for (i = 0; i < 8; i++) gpu_free[i] = 79.0 * (1 << 30);
    gpt2(&cfg, 2);
    r = mgt_plan_fit(&cfg, &fit);
    printf("     %s\n", fit.text);
    check(r == MGT_OK && fit.fits && fit.checked && fit.device == MGT_DEVICE_CUDA && fit.gpu_rank >= 0 && fit.gpu_need > 0,
          "GPT-2 124M, dp 2, 79 GiB free per GPU: fits, with the rank and the numbers");
    r = mgt_run_create(&run, &cfg);
    check(r == MGT_ERROR_DEVICE && worlds == 1 && strstr(mgt_last_error(), "fake:"), "a run that fits goes on to its devices");

    /* GPU 1 a third free: refused before the NCCL world, naming rank 1, the numbers and levers */
    gpu_free[1] = 12.0 * (1 << 30); /* above the 3.7 GiB of state and reserves, below the 25 GiB the micro-batch needs */
    r = mgt_plan_fit(&cfg, &fit);
    printf("     %s\n", mgt_last_error());
    check(r == MGT_ERROR_CONFIG && !fit.fits && fit.gpu_rank == 1 && fit.gpu_have == gpu_free[1] && fit.gpu_need > fit.gpu_have,
          "one GPU with 12 GiB free: does not fit, the rank of that GPU named");
    snprintf(what, sizeof what, "%s", mgt_last_error());
    check(strstr(what, "rank 1 needs") && strstr(what, "GPU 1 has 12.0 GiB free") && strstr(what, "it fits with") &&
              (strstr(what, "train.micro_batch =") || strstr(what, "train.recompute = full")) && strstr(what, "MGT_MEMORY_CHECK=off"),
          "the message: the rank, its GPU's free memory, a micro-batch or recompute that fits, the override");
    r = mgt_run_create(&run, &cfg);
    check(r == MGT_ERROR_CONFIG && worlds == 1 && !strcmp(mgt_last_error(), what), "mgt_run_create refuses it with the same message, before the NCCL world");

    /* ZeRO and tensor parallelism as levers: all GPUs at 2.5 GiB, micro-batches of 1, recompute */
    for (i = 0; i < 8; i++) gpu_free[i] = 2.5 * (1 << 30);
    mgt_config_set(&cfg, "train.micro_batch=1");
    mgt_config_set(&cfg, "train.recompute=full");
    r = mgt_plan_fit(&cfg, &fit);
    printf("     %s\n", fit.text);
    check(r == MGT_ERROR_CONFIG && (strstr(fit.text, "parallel.zero =") || strstr(fit.text, "parallel.tp =") || strstr(fit.text, "parallel.pp =")),
          "2.5 GiB per GPU at micro-batch 1 with recompute: ZeRO, tp or pp named as what fits");

    /* MGT_MEMORY_CHECK=off: not fitting is reported, not enforced */
    setenv("MGT_MEMORY_CHECK", "off", 1);
    r = mgt_plan_fit(&cfg, &fit);
    check(r == MGT_OK && !fit.fits && !fit.enforced, "MGT_MEMORY_CHECK=off: MGT_OK, fits 0, enforced 0");
    r = mgt_run_create(&run, &cfg);
    check(r == MGT_ERROR_DEVICE && worlds == 2, "MGT_MEMORY_CHECK=off: the run goes on to its devices");
    unsetenv("MGT_MEMORY_CHECK");

    /* a cuda preset with no GPU here: nothing to check against, said so */
    api.probe = NULL;
    mgt_cuda_use(NULL);
    setenv("MGT_CUDA_LIBRARY", "/nonexistent/libmgt_cuda.so", 1);
    r = mgt_plan_fit(&cfg, &fit);
    check(r == MGT_OK && !fit.checked && strstr(fit.text, "not checked"), "device = cuda without GPUs: not checked, and why");

    /* the CPU: 52.8 trillion parameters fit no machine, and no lever helps */
    mgt_config_init(&cfg);
    mgt_config_set(&cfg, "model.n_layer=1024");
    mgt_config_set(&cfg, "model.d_model=65536");
    mgt_config_set(&cfg, "model.n_head=1024");
    mgt_config_set(&cfg, "parallel.device=cpu");
    mgt_config_set(&cfg, "data.train=");
    mgt_config_set(&cfg, "data.val=");
    r = mgt_plan_fit(&cfg, &fit);
    printf("     %s\n", fit.text);
    check(r == MGT_ERROR_CONFIG && !fit.fits && fit.device == MGT_DEVICE_CPU && fit.host_need > 1e15 &&
              strstr(fit.text, "parameters, gradients and optimizer state alone take") && strstr(fit.text, "smaller model"),
          "52.8T parameters on the CPU: does not fit, nothing but a smaller model helps");
    mgt_config_set(&cfg, "model.n_layer=2");
    mgt_config_set(&cfg, "model.d_model=64");
    mgt_config_set(&cfg, "model.n_head=2");
    r = mgt_plan_fit(&cfg, &fit);
    check(r == MGT_OK && fit.fits && strstr(fit.text, ": fits"), "a small model on the CPU fits");
    printf("fit: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}
