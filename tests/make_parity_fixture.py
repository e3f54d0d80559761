#!/usr/bin/env python3
"""Generate tests/fixtures/parity_tiny.safetensors: a PyTorch reference for mgt.

What it produces
----------------
A small safetensors file that the C implementation's parity test loads and
compares against. Everything is computed in float64 with a plain, independent
PyTorch implementation of a GPT-2 style model (llm.c layout; weights in the
nn.Linear (out, in) convention, y = x @ W.T + b), then stored as float32
unless noted:

  config (metadata, strings): n_layer=2 n_head=4 d_model=64 seq_len=32
      vocab_size=256 batch=4 steps=10 lr min_lr warmup schedule weight_decay
      beta1 beta2 eps grad_clip generated_by
  param.<name>   initial weights (seeded torch.Generator(1337))
  x, y           int32 (B,T) batch 0 inputs / targets (byte-level tokens)
  logits         float32 (B,T,V) forward on batch 0 with the initial weights
  loss           float64 (1,)   mean cross-entropy on batch 0
  grad.<name>    float32 gradient of the mean loss w.r.t. every parameter
  train_x/y      int32 (10,B,T) batches of the 10 AdamW steps
  train_loss     float64 (10,)  loss of step s's forward (before its update)
  train_lr       float64 (10,)  learning rate used at step s
  train_norm     float64 (10,)  global grad L2 norm before clipping
  train_clipped  int32 (10,)    1 if the gradient was clipped at step s
  final.<name>   float32 parameters after the 10th update

How to run
----------
    pip install torch safetensors numpy
    python3 tests/make_parity_fixture.py

The output file is committed to the repository; CI and the C tests do NOT
need PyTorch, only this script does (to regenerate the fixture).
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.numpy import save_file

torch.set_default_dtype(torch.float64)

# ----------------------------------------------------------------- config
L, NH, C, T, V, B = 2, 4, 64, 32, 256, 4
STEPS = 10
LR, MIN_LR, WARMUP, SCHEDULE = 1e-2, 1e-3, 3, "cosine"
WD, BETA1, BETA2, EPS = 0.1, 0.9, 0.95, 1e-8
GRAD_CLIP = 1.0  # chosen so clipping triggers on some steps but not all
LN_EPS = 1e-5
SEED = 1337

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                   "fixtures", "parity_tiny.safetensors")

# ------------------------------------------------------------------- data
# Public-domain text: opening of the US Declaration of Independence (1776).
TEXT = """\
When in the Course of human events, it becomes necessary for one people to \
dissolve the political bands which have connected them with another, and to \
assume among the powers of the earth, the separate and equal station to which \
the Laws of Nature and of Nature's God entitle them, a decent respect to the \
opinions of mankind requires that they should declare the causes which impel \
them to the separation.
We hold these truths to be self-evident, that all men are created equal, that \
they are endowed by their Creator with certain unalienable Rights, that among \
these are Life, Liberty and the pursuit of Happiness.--That to secure these \
rights, Governments are instituted among Men, deriving their just powers from \
the consent of the governed, --That whenever any Form of Government becomes \
destructive of these ends, it is the Right of the People to alter or to \
abolish it, and to institute new Government, laying its foundation on such \
principles and organizing its powers in such form, as to them shall seem most \
likely to effect their Safety and Happiness. Prudence, indeed, will dictate \
that Governments long established should not be changed for light and \
transient causes; and accordingly all experience hath shewn, that mankind are \
more disposed to suffer, while evils are sufferable, than to right themselves \
by abolishing the forms to which they are accustomed. But when a long train of \
abuses and usurpations, pursuing invariably the same Object evinces a design \
to reduce them under absolute Despotism, it is their right, it is their duty, \
to throw off such Government, and to provide new Guards for their future \
security.--Such has been the patient sufferance of these Colonies; and such is \
now the necessity which constrains them to alter their former Systems of \
Government. The history of the present King of Great Britain is a history of \
repeated injuries and usurpations, all having in direct object the \
establishment of an absolute Tyranny over these States. To prove this, let \
Facts be submitted to a candid world.
He has refused his Assent to Laws, the most wholesome and necessary for the \
public good.
He has forbidden his Governors to pass Laws of immediate and pressing \
importance, unless suspended in their operation till his Assent should be \
obtained; and when so suspended, he has utterly neglected to attend to them.
He has refused to pass other Laws for the accommodation of large districts of \
people, unless those people would relinquish the right of Representation in \
the Legislature, a right inestimable to them and formidable to tyrants only.
He has called together legislative bodies at places unusual, uncomfortable, \
and distant from the depository of their public Records, for the sole purpose \
of fatiguing them into compliance with his measures.
He has dissolved Representative Houses repeatedly, for opposing with manly \
firmness his invasions on the rights of the people.
He has refused for a long time, after such dissolutions, to cause others to be \
elected; whereby the Legislative powers, incapable of Annihilation, have \
returned to the People at large for their exercise; the State remaining in \
the mean time exposed to all the dangers of invasion from without, and \
convulsions within.
"""
DATA = TEXT.encode("ascii")
assert len(DATA) >= 11 * B * (T + 1), len(DATA)


def get_batch(k):
    """Batch k: row b starts at offset ((k*B + b) * 97) mod (len - T - 1)."""
    n = len(DATA) - T - 1
    xs, ys = [], []
    for b in range(B):
        o = ((k * B + b) * 97) % n
        xs.append(list(DATA[o:o + T]))
        ys.append(list(DATA[o + 1:o + T + 1]))
    return torch.tensor(xs, dtype=torch.long), torch.tensor(ys, dtype=torch.long)


# ----------------------------------------------------------------- params
def param_specs():
    """(name, shape, kind) in the canonical order (also the init draw order)."""
    specs = [("wte", (V, C), "w"), ("wpe", (T, C), "wpe")]
    for l in range(L):
        p = f"h.{l}."
        specs += [
            (p + "ln_1.weight", (C,), "lnw"),
            (p + "ln_1.bias", (C,), "b"),
            (p + "attn.c_attn.weight", (3 * C, C), "w"),
            (p + "attn.c_attn.bias", (3 * C,), "b"),
            (p + "attn.c_proj.weight", (C, C), "proj"),
            (p + "attn.c_proj.bias", (C,), "b"),
            (p + "ln_2.weight", (C,), "lnw"),
            (p + "ln_2.bias", (C,), "b"),
            (p + "mlp.c_fc.weight", (4 * C, C), "w"),
            (p + "mlp.c_fc.bias", (4 * C,), "b"),
            (p + "mlp.c_proj.weight", (C, 4 * C), "proj"),
            (p + "mlp.c_proj.bias", (C,), "b"),
        ]
    specs += [("ln_f.weight", (C,), "lnw"), ("ln_f.bias", (C,), "b")]
    return specs


def init_params():
    g = torch.Generator().manual_seed(SEED)
    params = {}
    for name, shape, kind in param_specs():
        z = torch.randn(shape, generator=g, dtype=torch.float64)
        if kind == "w":
            t = 0.02 * z
        elif kind == "wpe":
            t = 0.01 * z
        elif kind == "proj":
            t = (0.02 / math.sqrt(2 * L)) * z
        elif kind == "b":
            t = 0.02 * z
        elif kind == "lnw":
            t = 1.0 + 0.1 * z
        else:
            raise ValueError(kind)
        params[name] = t.clone()
    return params


# ------------------------------------------------------------------ model
def layernorm(x, w, b):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)  # biased variance
    return (x - mean) / torch.sqrt(var + LN_EPS) * w + b


def gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def linear(x, w, b=None):
    y = x @ w.T
    return y if b is None else y + b


def attention(x, w, b, pw, pb):
    Bx, Tx, Cx = x.shape
    hs = Cx // NH
    qkv = linear(x, w, b)                      # (B,T,3C): [q | k | v]
    q, k, v = qkv.split(Cx, dim=-1)
    # head h uses channels h*hs .. h*hs+hs-1
    q = q.view(Bx, Tx, NH, hs).transpose(1, 2)  # (B,NH,T,hs)
    k = k.view(Bx, Tx, NH, hs).transpose(1, 2)
    v = v.view(Bx, Tx, NH, hs).transpose(1, 2)
    att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
    mask = torch.ones(Tx, Tx, dtype=torch.bool).tril()
    att = att.masked_fill(~mask, float("-inf"))
    att = torch.softmax(att, dim=-1)
    y = att @ v                                 # (B,NH,T,hs)
    y = y.transpose(1, 2).contiguous().view(Bx, Tx, Cx)
    return linear(y, pw, pb)


def forward(P, x, y):
    Bx, Tx = x.shape
    h = P["wte"][x] + P["wpe"][torch.arange(Tx)]
    for l in range(L):
        p = f"h.{l}."
        ln1 = layernorm(h, P[p + "ln_1.weight"], P[p + "ln_1.bias"])
        a = h + attention(ln1, P[p + "attn.c_attn.weight"], P[p + "attn.c_attn.bias"],
                          P[p + "attn.c_proj.weight"], P[p + "attn.c_proj.bias"])
        ln2 = layernorm(a, P[p + "ln_2.weight"], P[p + "ln_2.bias"])
        m = linear(gelu(linear(ln2, P[p + "mlp.c_fc.weight"], P[p + "mlp.c_fc.bias"])),
                   P[p + "mlp.c_proj.weight"], P[p + "mlp.c_proj.bias"])
        h = a + m
    hf = layernorm(h, P["ln_f.weight"], P["ln_f.bias"])
    logits = hf @ P["wte"].T                    # tied head, no bias
    loss = F.cross_entropy(logits.view(-1, V), y.view(-1))  # mean over B*T
    return logits, loss


def loss_and_grads(P, x, y):
    Q = {k: v.detach().clone().requires_grad_(True) for k, v in P.items()}
    logits, loss = forward(Q, x, y)
    loss.backward()
    return logits.detach(), loss.detach(), {k: Q[k].grad.detach().clone() for k in Q}


# --------------------------------------------------------------- training
def lr_at(s):
    if s < WARMUP:
        return LR * (s + 1) / WARMUP
    ratio = (s - WARMUP) / (STEPS - WARMUP)
    if SCHEDULE == "cosine":
        return MIN_LR + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (LR - MIN_LR)
    if SCHEDULE == "linear":
        return LR - ratio * (LR - MIN_LR)
    return LR


def train(P0, grad_clip):
    P = {k: v.clone() for k, v in P0.items()}
    m = {k: torch.zeros_like(v) for k, v in P.items()}
    v2 = {k: torch.zeros_like(v) for k, v in P.items()}
    rec = {"x": [], "y": [], "loss": [], "lr": [], "norm": [], "clipped": []}
    for s in range(STEPS):
        x, y = get_batch(s)
        _, loss, G = loss_and_grads(P, x, y)
        norm = math.sqrt(sum(float((g * g).sum()) for g in G.values()))
        clipped = norm > grad_clip
        if clipped:
            scale = grad_clip / (norm + 1e-6)
            G = {k: g * scale for k, g in G.items()}
        lr = lr_at(s)
        t = s + 1
        for k in P:
            g = G[k]
            if P[k].dim() >= 2:
                P[k] = P[k] - lr * WD * P[k]
            m[k] = BETA1 * m[k] + (1 - BETA1) * g
            v2[k] = BETA2 * v2[k] + (1 - BETA2) * g * g
            mhat = m[k] / (1 - BETA1 ** t)
            vhat = v2[k] / (1 - BETA2 ** t)
            P[k] = P[k] - lr * mhat / (torch.sqrt(vhat) + EPS)
        for key, val in (("x", x), ("y", y), ("loss", float(loss)), ("lr", lr),
                         ("norm", norm), ("clipped", int(clipped))):
            rec[key].append(val)
    return P, rec


def train_torch_reference(P0, grad_clip):
    """Same loop with torch.optim.AdamW + clip_grad_norm_, as a cross-check."""
    Q = {k: v.clone().requires_grad_(True) for k, v in P0.items()}
    decay = [Q[k] for k in Q if Q[k].dim() >= 2]
    nodecay = [Q[k] for k in Q if Q[k].dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD},
                             {"params": nodecay, "weight_decay": 0.0}],
                            lr=LR, betas=(BETA1, BETA2), eps=EPS, foreach=False)
    for s in range(STEPS):
        x, y = get_batch(s)
        opt.zero_grad(set_to_none=True)
        _, loss = forward(Q, x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(Q.values()), grad_clip)
        for grp in opt.param_groups:
            grp["lr"] = lr_at(s)
        opt.step()
    return {k: v.detach() for k, v in Q.items()}


# ------------------------------------------------------------------ checks
def finite_difference_check(P, x, y, G):
    """Central differences on a few elements of several parameters."""
    h = 1e-6
    probes = [("wte", (int(x[0, 3]), 5)), ("wpe", (7, 11)),
              ("h.0.attn.c_attn.weight", (70, 3)), ("h.0.attn.c_attn.bias", (150,)),
              ("h.1.attn.c_proj.weight", (9, 40)), ("h.1.mlp.c_fc.weight", (200, 17)),
              ("h.0.mlp.c_proj.bias", (33,)), ("h.1.ln_1.weight", (12,)),
              ("h.0.ln_2.bias", (50,)), ("ln_f.weight", (63,)), ("ln_f.bias", (0,))]
    for name, idx in probes:
        Pp = {k: v.clone() for k, v in P.items()}
        Pm = {k: v.clone() for k, v in P.items()}
        Pp[name][idx] += h
        Pm[name][idx] -= h
        with torch.no_grad():
            fd = (float(forward(Pp, x, y)[1]) - float(forward(Pm, x, y)[1])) / (2 * h)
        an = float(G[name][idx])
        assert abs(fd - an) <= 1e-7 + 1e-5 * abs(an), (name, idx, fd, an)
    # torch.autograd.gradcheck on two small whole tensors
    for name in ("ln_f.bias", "h.1.mlp.c_proj.bias"):
        def f(t, name=name):
            Q = dict(P)
            Q[name] = t
            return forward(Q, x, y)[1]
        assert torch.autograd.gradcheck(f, (P[name].clone().requires_grad_(True),),
                                        eps=1e-6, atol=1e-7, rtol=1e-5)


def f32(t):
    return np.ascontiguousarray(t.detach().to(torch.float32).numpy())


def main():
    P0 = init_params()
    x0, y0 = get_batch(0)
    logits, loss, G = loss_and_grads(P0, x0, y0)
    finite_difference_check(P0, x0, y0, G)
    print(f"batch0 loss {float(loss):.6f}  (ln V = {math.log(V):.6f})")

    Pf, rec = train(P0, GRAD_CLIP)
    assert abs(rec["loss"][0] - float(loss)) < 1e-12
    Pt = train_torch_reference(P0, GRAD_CLIP)
    for k in Pf:
        assert torch.allclose(Pf[k], Pt[k], rtol=1e-9, atol=1e-12), k

    print(f"grad_clip G = {GRAD_CLIP}")
    for s in range(STEPS):
        print(f"step {s}: loss {rec['loss'][s]:.6f}  lr {rec['lr'][s]:.6e}  "
              f"norm {rec['norm'][s]:.6f}  clipped {rec['clipped'][s]}")
    assert 0 < sum(rec["clipped"]) < STEPS, "pick GRAD_CLIP so only some steps clip"
    assert rec["loss"][-1] < rec["loss"][0], "loss should decrease"

    T_ = {}
    for k in P0:
        T_["param." + k] = f32(P0[k])
    T_["x"] = x0.numpy().astype(np.int32)
    T_["y"] = y0.numpy().astype(np.int32)
    T_["logits"] = f32(logits)
    T_["loss"] = np.array([float(loss)], dtype=np.float64)
    for k in G:
        T_["grad." + k] = f32(G[k])
    T_["train_x"] = torch.stack(rec["x"]).numpy().astype(np.int32)
    T_["train_y"] = torch.stack(rec["y"]).numpy().astype(np.int32)
    T_["train_loss"] = np.array(rec["loss"], dtype=np.float64)
    T_["train_lr"] = np.array(rec["lr"], dtype=np.float64)
    T_["train_norm"] = np.array(rec["norm"], dtype=np.float64)
    T_["train_clipped"] = np.array(rec["clipped"], dtype=np.int32)
    for k in Pf:
        T_["final." + k] = f32(Pf[k])

    meta = {
        "n_layer": str(L), "n_head": str(NH), "d_model": str(C), "seq_len": str(T),
        "vocab_size": str(V), "batch": str(B), "steps": str(STEPS),
        "lr": repr(LR), "min_lr": repr(MIN_LR), "warmup": str(WARMUP),
        "schedule": SCHEDULE, "weight_decay": repr(WD), "beta1": repr(BETA1),
        "beta2": repr(BETA2), "eps": repr(EPS), "grad_clip": repr(GRAD_CLIP),
        "generated_by": f"tests/make_parity_fixture.py (torch {torch.__version__})",
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(T_, OUT, metadata=meta)

    # reload and verify shapes / dtypes
    expect = {}
    for name, shape, _ in param_specs():
        for pre in ("param.", "grad.", "final."):
            expect[pre + name] = (shape, np.float32)
    expect.update({
        "x": ((B, T), np.int32), "y": ((B, T), np.int32),
        "logits": ((B, T, V), np.float32), "loss": ((1,), np.float64),
        "train_x": ((STEPS, B, T), np.int32), "train_y": ((STEPS, B, T), np.int32),
        "train_loss": ((STEPS,), np.float64), "train_lr": ((STEPS,), np.float64),
        "train_norm": ((STEPS,), np.float64), "train_clipped": ((STEPS,), np.int32),
    })
    with safe_open(OUT, framework="np") as f:
        assert set(f.keys()) == set(expect), set(f.keys()) ^ set(expect)
        assert f.metadata() == meta
        for k, (shape, dt) in expect.items():
            a = f.get_tensor(k)
            assert a.shape == tuple(shape) and a.dtype == dt, (k, a.shape, a.dtype)
            np.testing.assert_array_equal(a, T_[k])
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes, {len(expect)} tensors)")


if __name__ == "__main__":
    sys.exit(main())
