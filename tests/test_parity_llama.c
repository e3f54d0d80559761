/* Parity with Hugging Face's Llama: tests/fixtures/parity_llama.safetensors holds a float64
   LlamaForCausalLM (tests/make_llama_fixture.py: L=2, 4 query heads on 2 key/value heads, C=64,
   SwiGLU of 160, T=32, V=256, B=4, RMSNorm, RoPE, no biases, a separate head) with its weights
   under mgt's names, the logits, the loss and every gradient of one batch. mgt computes in float32,
   so the differences are float32 rounding against an exact reference (RoPE's angles are float32 on
   both sides). The optimizer and the schedule are the model-independent part test_parity checks. */
#define MGT_IMPLEMENTATION
#include "mgt.h"

#include "parity_util.h" // defines: check, need, scaled_err, failures

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "tests/fixtures/parity_llama.safetensors";
    static const char *keys[] = {"n_layer", "n_head", "n_kv_head", "d_model", "d_ff", "seq_len", "vocab_size", "norm", "norm_eps",
                                 "positions", "rope_theta", "mlp", "bias", "tied_head"};
    mgt__st_file f;
    mgt_config cfg;
    mgt_run *run;
    mgt__rank *rk;
    mgt__acts *A;
    char set[256];
    int B, T, V, t, i, v;
    double loss, ref_loss, e = 0, worst = 0;
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
    A = &rk->acts[0];
    for (t = 0; t < rk->lay.n; t++) { /* one rank: local tensors are the global ones (wte and lm_head padded) */
        char name[128];
        snprintf(name, sizeof name, "param.%s", rk->lay.t[t].info.name);
        memcpy(mgt__P(rk, t), mgt__st_data(&f, need(&f, name, "F32")), sizeof(float) * rk->lay.t[t].info.numel);
    }
    {
        const int32_t *x = (const int32_t *)mgt__st_data(&f, need(&f, "x", "I32")), *y = (const int32_t *)mgt__st_data(&f, need(&f, "y", "I32"));
        const float *logits = (const float *)mgt__st_data(&f, need(&f, "logits", "F32"));
        memcpy(&ref_loss, mgt__st_data(&f, need(&f, "loss", "F64")), sizeof ref_loss);
        for (i = 0; i < B * T; i++) { A->inputs[i] = x[i]; A->targets[i] = y[i]; }
        mgt__stage_forward(rk, A); /* logits only: the head without its loss */
        mgt__norm_forward(rk, A->lnf, A->lnf_mean, A->lnf_rstd, A->resid[rk->nblocks], mgt__t_lnf(rk), mgt__t_lnf_bias(rk), B * T);
        rk->be->matmul_forward(rk->be, A->logits, A->lnf, mgt__P(rk, mgt__t_head(rk)), NULL, B * T, rk->shape.C, rk->shape.Vl);
        for (i = 0; i < B * T; i++)
            for (v = 0; v < V; v++) {
                double d = fabs((double)A->logits[(size_t)i * rk->shape.Vl + v] - logits[(size_t)i * V + v]);
                e = d > e ? d : e;
            }
        /* logits are O(1) sums over C=64 products after two blocks: float32 rounding gives ~1e-6 */
        check("logits (absolute)", e, 1e-5);
        rk->be->zero(rk->be, rk->grads, sizeof(float) * rk->lay.size);
        mgt__stage_forward(rk, A);
        mgt__head_forward(rk, A, 1.0f / (float)(B * T), &loss);
        loss /= B * T;
        mgt__stage_backward(rk, A, 1);
        /* a mean of 128 float32 cross-entropies: relative error of order 1e-7 */
        check("loss (relative)", fabs(loss - ref_loss) / ref_loss, 1e-6);
        for (t = 0; t < rk->lay.n; t++) {
            char name[128];
            double err;
            snprintf(name, sizeof name, "grad.%s", rk->lay.t[t].info.name);
            err = scaled_err(mgt__G(rk, t), (const float *)mgt__st_data(&f, need(&f, name, "F32")), rk->lay.t[t].info.numel);
            worst = err > worst ? err : worst;
            if (err > 1e-4) check(name, err, 1e-4);
        }
        /* as test_parity: up to ~20 float32 ops and GEMMs of length <= 256 per gradient, so 1e-4 of
           each tensor's largest gradient leaves a 10x margin over float32 rounding */
        check("every parameter gradient (relative to tensor max)", worst, 1e-4);
    }
    mgt_run_destroy(run);
    mgt__st_close(&f);
    printf("%s\n", failures ? "parity_llama: FAILED" : "parity_llama: ok");
    return failures ? 1 : 0;
}
