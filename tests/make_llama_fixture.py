#!/usr/bin/env python3
"""Generate tests/fixtures/parity_llama.safetensors: Hugging Face's LlamaForCausalLM as the reference
for mgt's Llama-family settings (RMSNorm, RoPE, SwiGLU, grouped-query attention, no biases, a
separate LM head).

What it produces
----------------
A tiny random LlamaForCausalLM (transformers, float64, eager attention), its weights renamed to
mgt's tensor names (the map below is the one a Hugging Face loader needs), and one batch:

  config (metadata, strings): the mgt preset keys of the model, batch, generated_by
  param.<mgt name>   float32 weights (norm weights perturbed around 1, so they matter)
  x, y               int32 (B,T) inputs / targets
  logits             float32 (B,T,V)
  loss               float64 (1,) mean cross-entropy of the batch
  grad.<mgt name>    float32 gradient of the mean loss

Hugging Face computes RoPE's angles in float32 even in a float64 model (as mgt does), everything
else here is float64, so the C test measures mgt's float32 rounding against an exact reference.

How to run (whoever regenerates fixtures; CI and the C tests do not need PyTorch)
----------
    pip install torch transformers safetensors numpy
    python3 tests/make_llama_fixture.py
"""
import os

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.numpy import save_file
from transformers import LlamaConfig, LlamaForCausalLM

L, NH, NKV, C, H, T, V, B = 2, 4, 2, 64, 160, 32, 256, 4
THETA, EPS, SEED = 10000.0, 1e-5, 1337
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "parity_llama.safetensors")

torch.manual_seed(SEED)
cfg = LlamaConfig(vocab_size=V, hidden_size=C, intermediate_size=H, num_hidden_layers=L, num_attention_heads=NH,
                  num_key_value_heads=NKV, max_position_embeddings=T, rms_norm_eps=EPS, rope_theta=THETA,
                  tie_word_embeddings=False, attention_bias=False, mlp_bias=False, hidden_act="silu",
                  initializer_range=0.02, attn_implementation="eager")
model = LlamaForCausalLM(cfg).to(torch.float64)
with torch.no_grad():
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"):
            p.copy_(1.0 + 0.1 * torch.randn_like(p))
model.eval()


def to_mgt(hf):
    """mgt's tensors from Hugging Face's (weights or gradients by HF name): q, k, v stacked by rows
    into c_attn, gate then up into c_fc; this is the map a Hugging Face loader needs"""
    out = {"wte": hf["model.embed_tokens.weight"], "ln_f.weight": hf["model.norm.weight"], "lm_head.weight": hf["lm_head.weight"]}
    for i in range(L):
        p, h = "model.layers.%d." % i, "h.%d." % i
        out[h + "ln_1.weight"] = hf[p + "input_layernorm.weight"]
        out[h + "attn.c_attn.weight"] = torch.cat([hf[p + "self_attn.%s_proj.weight" % k] for k in "qkv"], 0)
        out[h + "attn.c_proj.weight"] = hf[p + "self_attn.o_proj.weight"]
        out[h + "ln_2.weight"] = hf[p + "post_attention_layernorm.weight"]
        out[h + "mlp.c_fc.weight"] = torch.cat([hf[p + "mlp.gate_proj.weight"], hf[p + "mlp.up_proj.weight"]], 0)
        out[h + "mlp.c_proj.weight"] = hf[p + "mlp.down_proj.weight"]
    return out


# the weights mgt will load are float32: round them, and run the reference on exactly those
with torch.no_grad():
    for p in model.parameters():
        p.copy_(p.float().double())
gen = torch.Generator().manual_seed(SEED + 1)
tokens = torch.randint(0, V, (B, T + 1), generator=gen)
x, y = tokens[:, :T], tokens[:, 1:]
logits = model(input_ids=x).logits
loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
loss.backward()

tensors = {"param." + k: v.detach().float().numpy() for k, v in to_mgt(dict(model.named_parameters())).items()}
tensors.update({"grad." + k: v.float().numpy() for k, v in to_mgt({n: p.grad for n, p in model.named_parameters()}).items()})
tensors["x"] = x.int().numpy()
tensors["y"] = y.int().numpy()
tensors["logits"] = logits.detach().float().numpy()
tensors["loss"] = np.array([loss.item()], dtype=np.float64)
meta = {"n_layer": str(L), "n_head": str(NH), "n_kv_head": str(NKV), "d_model": str(C), "d_ff": str(H), "seq_len": str(T),
        "vocab_size": str(V), "norm": "rmsnorm", "norm_eps": repr(EPS), "positions": "rope", "rope_theta": repr(THETA),
        "mlp": "swiglu", "bias": "0", "tied_head": "0", "batch": str(B),
        "generated_by": "tests/make_llama_fixture.py, torch %s, transformers %s" % (torch.__version__, __import__("transformers").__version__)}
os.makedirs(os.path.dirname(OUT), exist_ok=True)
save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, OUT, metadata=meta)
print("wrote %s: loss %.6f, %d tensors" % (OUT, loss.item(), len(tensors)))
