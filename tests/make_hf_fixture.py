#!/usr/bin/env python3
"""Generate tests/fixtures/hf_gpt2/ and tests/fixtures/hf_llama/: Hugging Face models for mgt's
import, fine-tuning and export (issue 16).

What it produces, for each of GPT2LMHeadModel and LlamaForCausalLM (tiny random models made by
`transformers` itself, so the files are exactly what users download):

  <dir>/config.json, <dir>/model.safetensors   save_pretrained (float32, safetensors)
  hf_llama_sharded/                            hf_llama's weights, save_pretrained(max_shard_size="40KB"):
                                               model-0000N-of-0000M.safetensors + model.safetensors.index.json
  llmc_gpt2.bin                                hf_gpt2's weights in llm.c's gpt2_124M.bin layout (version 3,
                                               float32, vocabulary padded by 64 rows that mgt must ignore)
  llmc_gpt2_bf16.bin                           the same as version 5 (bfloat16)
  <dir>/reference.safetensors                  computed in float64 from those float32 weights:
      x, y           int32 (B,T) batch 0 inputs / targets
      logits         float32 (B,T,V) forward on batch 0
      loss           float64 (1,) mean cross-entropy on batch 0
      grad.<name>    float32 gradient of the loss w.r.t. every parameter (Hugging Face names)
      train_x/y      int32 (STEPS,B,T) batches of the AdamW steps
      train_loss     float64 (STEPS,) loss of step s's forward (before its update)
      train_lr       float64 (STEPS,) learning rate of step s
      final.<name>   float32 parameters after the last update
  with metadata: the training hyperparameters, as mgt's [train] keys.

The training is mgt's: torch.optim.AdamW with weight decay on matrices and embeddings only,
gradients clipped to a global norm, a linear warmup then cosine to min_lr. Tied GPT-2 head:
lm_head.weight is transformer.wte.weight and is not a separate parameter.

How to run:  pip install torch transformers safetensors numpy && python3 tests/make_hf_fixture.py
The outputs are committed; CI and the C tests never need PyTorch.
"""
import json
import math
import os

import numpy as np
import torch
from safetensors.numpy import save_file
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

B, T, V, STEPS = 4, 16, 128, 10
LR, MIN_LR, WARMUP, WD, BETA1, BETA2, EPS, GRAD_CLIP = 1e-2, 1e-3, 3, 0.1, 0.9, 0.95, 1e-8, 1.0
SEED = 1337
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def lr_at(s):
    if s < WARMUP:
        return LR * (s + 1) / WARMUP
    return MIN_LR + 0.5 * (1.0 + math.cos(math.pi * (s - WARMUP) / (STEPS - WARMUP))) * (LR - MIN_LR)


def batches():
    g = torch.Generator().manual_seed(SEED + 1)
    rows = torch.randint(0, V, (STEPS, B, T + 1), generator=g)
    return rows[:, :, :-1].contiguous(), rows[:, :, 1:].contiguous()


def loss_of(model, x, y):
    logits = model(input_ids=x).logits
    return logits, torch.nn.functional.cross_entropy(logits.reshape(-1, V), y.reshape(-1))


def f32(t):
    return np.ascontiguousarray(t.detach().to(torch.float32).numpy())


def make(name, model):
    out = os.path.join(HERE, name)
    model.save_pretrained(out, safe_serialization=True)  # float32 weights, as users get them
    if name == "hf_llama":  # the same weights in shards (model.safetensors.index.json), as large models are published
        model.save_pretrained(out + "_sharded", safe_serialization=True, max_shard_size="40KB")
    if name == "hf_gpt2":
        write_llmc(os.path.join(HERE, "llmc_gpt2.bin"), model, V + 64, 3)
        write_llmc(os.path.join(HERE, "llmc_gpt2_bf16.bin"), model, V + 64, 5)
    model = model.to(torch.float64)
    xs, ys = batches()
    params = dict(model.named_parameters())  # tied weights appear once
    logits, loss = loss_of(model, xs[0], ys[0])
    loss.backward()
    ref = {"x": xs[0].to(torch.int32).numpy(), "y": ys[0].to(torch.int32).numpy(), "logits": f32(logits),
           "loss": np.array([loss.item()], dtype=np.float64)}
    ref.update({"grad." + k: f32(p.grad) for k, p in params.items()})
    model.zero_grad(set_to_none=True)
    decay = [p for p in params.values() if p.dim() >= 2]
    rest = [p for p in params.values() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD}, {"params": rest, "weight_decay": 0.0}],
                            lr=LR, betas=(BETA1, BETA2), eps=EPS, foreach=False)
    losses, lrs = [], []
    for s in range(STEPS):
        opt.zero_grad(set_to_none=True)
        _, loss = loss_of(model, xs[s], ys[s])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), GRAD_CLIP)
        for grp in opt.param_groups:
            grp["lr"] = lr_at(s)
        opt.step()
        losses.append(float(loss))
        lrs.append(lr_at(s))
    ref.update({"final." + k: f32(p) for k, p in params.items()})
    ref.update({"train_x": xs.to(torch.int32).numpy(), "train_y": ys.to(torch.int32).numpy(),
                "train_loss": np.array(losses, dtype=np.float64), "train_lr": np.array(lrs, dtype=np.float64)})
    meta = {"steps": str(STEPS), "global_batch": str(B), "seq_len": str(T), "lr": repr(LR), "min_lr": repr(MIN_LR),
            "warmup": str(WARMUP), "schedule": "cosine", "weight_decay": repr(WD), "beta1": repr(BETA1),
            "beta2": repr(BETA2), "eps": repr(EPS), "grad_clip": repr(GRAD_CLIP),
            "generated_by": "tests/make_hf_fixture.py, transformers " + __import__("transformers").__version__}
    save_file(ref, os.path.join(out, "reference.safetensors"), metadata=meta)
    print(f"{name}: {sum(p.numel() for p in params.values())} parameters, loss {ref['loss'][0]:.6f} "
          f"(ln V = {math.log(V):.6f}), after {STEPS} steps {losses[-1]:.6f}")


def write_llmc(path, model, padded_vocab, version):
    """llm.c's gpt2_124M.bin layout (train_gpt2.py's write_model: version 3 float32, 5 bfloat16), written
    here from the Hugging Face tensors independently of mgt's reader: a 256-int32 header, then
    wte padded to padded_vocab rows, wpe, and the per-layer tensors stacked over layers in llm.c's
    order, Conv1D weights transposed to (out, in)."""
    sd = {k: v.detach().to(torch.float32) for k, v in model.state_dict().items()}
    cfg = model.config
    L, C = cfg.n_layer, cfg.n_embd
    header = np.zeros(256, dtype=np.int32)
    header[:8] = [20240326, version, cfg.n_positions, cfg.vocab_size, L, cfg.n_head, C, padded_vocab]
    wte = sd["transformer.wte.weight"]
    pad = torch.full((padded_vocab - cfg.vocab_size, C), 7.0)  # llm.c pads with zeros; anything here must be ignored
    layer = lambda name, t=False: torch.stack([sd["transformer.h.%d.%s" % (i, name)].t() if t else sd["transformer.h.%d.%s" % (i, name)]
                                               for i in range(L)])
    tensors = [torch.cat([wte, pad]), sd["transformer.wpe.weight"], layer("ln_1.weight"), layer("ln_1.bias"),
               layer("attn.c_attn.weight", True), layer("attn.c_attn.bias"), layer("attn.c_proj.weight", True),
               layer("attn.c_proj.bias"), layer("ln_2.weight"), layer("ln_2.bias"), layer("mlp.c_fc.weight", True),
               layer("mlp.c_fc.bias"), layer("mlp.c_proj.weight", True), layer("mlp.c_proj.bias"),
               sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"]]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        for t in tensors:
            if version == 3:
                f.write(t.contiguous().numpy().astype("<f4").tobytes())
            else:  # bfloat16, rounded to nearest even by torch
                f.write(t.contiguous().to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes())


def main():
    torch.manual_seed(SEED)
    make("hf_gpt2", GPT2LMHeadModel(GPT2Config(
        vocab_size=V, n_positions=T, n_embd=32, n_layer=2, n_head=4, activation_function="gelu_new",
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5, attn_implementation="eager")))
    torch.manual_seed(SEED)
    make("hf_llama", LlamaForCausalLM(LlamaConfig(
        vocab_size=V, hidden_size=32, intermediate_size=88, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=T, rms_norm_eps=1e-5, rope_theta=10000.0,
        hidden_act="silu", tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
        attention_dropout=0.0, attn_implementation="eager")))
    for name in ("hf_gpt2", "hf_llama"):
        with open(os.path.join(HERE, name, "config.json")) as f:
            print(name, json.load(f)["architectures"])


if __name__ == "__main__":
    main()
