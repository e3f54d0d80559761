#!/usr/bin/env python3
"""mgt against PyTorch on the CPU, side by side in one run: trains a benchmark preset's shape (GPT-2:
pre-LayerNorm blocks, causal attention, a 4x GELU MLP, tied embedding; fp32; AdamW) with PyTorch
eager and torch.compile on random tokens, and runs `./mgt bench` of the same preset between them
in fp32 and in bf16 (precision.dtype = bf16: oneDNN's bf16 GEMMs where built), with the same
threads. Rounds interleave every contestant, so a drift in the machine's load hits all alike;
prints each round (with the load average before it) and each ratio's median over the rounds. Not
part of CI (it needs PyTorch from PyPI, and takes minutes).

    pip install torch
    python3 tests/bench_pytorch.py [PRESET...] [--steps N] [--threads N] [--rounds N] [--no-compile]

Defaults: presets/bench_small.ini presets/bench_gpt2_124m.ini, 5 timed steps after 2 warm-up
steps (as `mgt bench`), every core, 3 rounds. Run it from the repository root after `ninja mgt`.
"""
import argparse
import configparser
import math
import os
import re
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        self.ln1 = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C)
        self.fc = nn.Linear(C, 4 * C)
        self.fc_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, NH, C, T, V):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.lnf = nn.LayerNorm(C)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.blocks:
            x = b(x)
        logits = self.lnf(x) @ self.wte.weight.T  # the tied head
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


def preset_shape(path):
    ini = configparser.ConfigParser(inline_comment_prefixes=(";", "#"))
    ini.read(path)
    get = lambda s, k, d: ini.getint(s, k, fallback=d)
    return dict(L=get("model", "n_layer", 4), NH=get("model", "n_head", 4), C=get("model", "d_model", 128),
                T=get("model", "seq_len", 128), V=get("model", "vocab_size", 256), B=get("train", "global_batch", 8))


def torch_tokens_per_s(shape, steps, compiled):
    torch.manual_seed(0)
    model = GPT(shape["L"], shape["NH"], shape["C"], shape["T"], shape["V"])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=False)
    step_fn = model
    if compiled:
        step_fn = torch.compile(model)
    B, T, V = shape["B"], shape["T"], shape["V"]
    data = torch.randint(0, V, (steps + 2, B, T + 1))
    t0 = 0.0
    for i in range(steps + 2):
        if i == 2:
            t0 = time.perf_counter()
        loss = step_fn(data[i, :, :-1], data[i, :, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return steps * B * T / (time.perf_counter() - t0)


def mgt_tokens_per_s(preset, steps, threads, dtype):
    out = subprocess.run(["./mgt", "bench", preset, "--steps", str(steps), "--set", "parallel.threads=%d" % threads,
                          "--set", "precision.dtype=%s" % dtype], capture_output=True, text=True, check=True).stdout
    m = re.search(r"train step: +[0-9.]+ ms, ([0-9]+) tokens/s", out)
    if not m:
        raise SystemExit("mgt bench printed no train step line:\n" + out)
    return float(m.group(1)), out


def median(xs):
    xs = sorted(x for x in xs if x == x)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2 if xs else math.nan


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("presets", nargs="*", default=["presets/bench_small.ini", "presets/bench_gpt2_124m.ini"])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-compile", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print("torch %s, %d threads; %s" % (torch.__version__, a.threads,
          subprocess.run(["./mgt", "version"], capture_output=True, text=True).stdout.strip()))
    cols = ("eager", "compile", "mgt fp32", "mgt bf16")
    ratios = ("fp32/eager", "fp32/compile", "bf16/fp32", "bf16/compile")
    print("%-26s %5s %6s" % ("preset", "round", "load") + "".join(" %12s" % c for c in cols) + "".join(" %12s" % r for r in ratios))
    for preset in a.presets:
        shape = preset_shape(preset)
        per_round = []
        for r in range(a.rounds):
            load = float(open("/proc/loadavg").read().split()[0])
            eager = torch_tokens_per_s(shape, a.steps, False)
            fp32, _ = mgt_tokens_per_s(preset, a.steps, a.threads, "fp32")  # between the two, so load drifts hit all alike
            bf16, _ = mgt_tokens_per_s(preset, a.steps, a.threads, "bf16")
            comp = float("nan") if a.no_compile else torch_tokens_per_s(shape, a.steps, True)
            row = (eager, comp, fp32, bf16, fp32 / eager, fp32 / comp, bf16 / fp32, bf16 / comp)
            per_round.append(row)
            print("%-26s %5d %6.2f" % (preset, r + 1, load) + "".join(" %12.0f" % x for x in row[:4]) + "".join(" %11.2fx" % x for x in row[4:]))
            sys.stdout.flush()
        med = [median([row[k] for row in per_round]) for k in range(8)]
        print("%-26s %5s %6s" % (preset, "median", "") + "".join(" %12.0f" % x for x in med[:4]) + "".join(" %11.2fx" % x for x in med[4:]))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
