/* Parity with Hugging Face's Llama: tests/fixtures/parity_llama.safetensors holds a float64
   LlamaForCausalLM (tests/make_llama_fixture.py: L=2, 4 query heads on 2 key/value heads, C=64,
   SwiGLU of 160, T=32, V=256, B=4, RMSNorm, RoPE, no biases, a separate head) with its weights
   under mgt's names, the logits, the loss and every gradient of one batch. mgt computes in float32,
   so the differences are float32 rounding against an exact reference (RoPE's angles are float32 on
   both sides). The optimizer and the schedule are the model-independent part test_parity checks. */
#define MGT_IMPLEMENTATION
#include "mgt.h"

#include "parity_util.h" // defines: check, need, load_params, check_batch, failures

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "tests/fixtures/parity_llama.safetensors";
    static const char *keys[] = {"n_layer", "n_head", "n_kv_head", "d_model", "d_ff", "seq_len", "vocab_size", "norm", "norm_eps",
                                 "positions", "rope_theta", "mlp", "bias", "tied_head"};
    mgt__st_file f;
    mgt_config cfg;
    mgt_run *run;
    mgt__rank *rk;
    char set[256];
    int B, T, V, t;
    if (mgt__st_open(&f, path) != MGT_OK) { printf("FAIL %s\n", mgt_last_error()); return 1; }
    mgt_config_init(&cfg);
    for (t = 0; t < (int)(sizeof keys / sizeof keys[0]); t++) {
        snprintf(set, sizeof set, "model.%s=%s", keys[t], mgt__st_meta(&f, keys[t]));
        if (mgt_config_set(&cfg, set) != MGT_OK) { printf("FAIL %s: %s\n", set, mgt_last_error()); return 1; }
    }
    B = atoi(mgt__st_meta(&f, "batch"));
    T = cfg.model.seq_len;
    V = cfg.model.vocab_size;
    snprintf(set, sizeof set, "train.global_batch=%d", B); mgt_config_set(&cfg, set);
    snprintf(set, sizeof set, "train.micro_batch=%d", B); mgt_config_set(&cfg, set);
    mgt_config_set(&cfg, "data.train=");
    mgt_config_set(&cfg, "data.val=");
    mgt_config_set(&cfg, "log.metrics=none");
    mgt_config_set(&cfg, "parallel.threads=2");
    if (mgt_run_create(&run, &cfg) != MGT_OK) { printf("FAIL %s\n", mgt_last_error()); return 1; }
    rk = &run->ranks[0];
    load_params(rk, &f, "param.");
    check_batch(&f, rk, B, T, V, NULL);
    mgt_run_destroy(run);
    mgt__st_close(&f);
    printf("%s\n", failures ? "parity_llama: FAILED" : "parity_llama: ok");
    return failures ? 1 : 0;
}
