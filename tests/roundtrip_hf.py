#!/usr/bin/env python3
"""mgt -> Hugging Face round trip (issue 16), run by people with transformers installed, not by CI.

For each of tests/fixtures/hf_gpt2 (GPT2LMHeadModel) and hf_llama (LlamaForCausalLM), as a user
fine-tunes a downloaded model:
  1. `mgt train` a preset with [model] init = the fixture folder, a few steps on random tokens,
     validating at the end on one held-out sequence (val shard of exactly seq_len + 1 tokens, so the
     validation loss is that sequence's mean cross-entropy);
  2. `mgt export runs/... -o DIR`;
  3. AutoModelForCausalLM.from_pretrained(DIR) computes the loss of the same sequence in float32
     and float64;
and prints both losses and their difference. Before fine-tuning it also checks that from_pretrained
of the untouched fixture and mgt's step-0 validation agree.

How to run (from the repository root, after `ninja mgt`):  python3 tests/roundtrip_hf.py
Needs: torch, transformers, numpy. Exit 1 when a difference exceeds 1e-5 relative.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from transformers import AutoModelForCausalLM

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MGT = os.path.join(ROOT, "mgt")
V, T, B, STEPS = 128, 16, 4, 5


def shard(path, tokens):
    """llm.c's token shard: 256 int32 header (magic 20240520, version 1, count), then uint16 ids"""
    header = np.zeros(256, dtype=np.int32)
    header[:3] = [20240520, 1, len(tokens)]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype=np.uint16).tobytes())


def hf_loss(folder, seq, dtype):
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).to(dtype).eval()
    x = torch.tensor(seq[:-1]).unsqueeze(0)
    y = torch.tensor(seq[1:]).unsqueeze(0)
    with torch.no_grad():
        logits = model(input_ids=x).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(), y.reshape(-1)).item()


def mgt_val_losses(run_dir):
    out = {}
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            m = json.loads(line)
            if "val_loss" in m:
                out[m["step"]] = m["val_loss"]
    return out


def roundtrip(name, work):
    fixture = os.path.join(ROOT, "tests", "fixtures", name)
    rng = np.random.default_rng(7)
    train, seq = rng.integers(0, V, 20000), [int(t) for t in rng.integers(0, V, T + 1)]
    shard(os.path.join(work, name + "_train.bin"), train)
    shard(os.path.join(work, name + "_val.bin"), seq)
    run_dir = os.path.join(work, "runs", name)
    preset = os.path.join(work, name + ".ini")
    with open(preset, "w") as f:
        f.write(f"""[model]
init = {fixture}
[data]
train = {name}_train.bin
val = {name}_val.bin
tokenizer = hf
tokenizer_json = {os.path.join(ROOT, "tests", "fixtures", "hf_llama3ish.json")}
[train]
steps = {STEPS}
global_batch = {B}
micro_batch = {B}
lr = 1e-3
min_lr = 1e-4
warmup = 1
eval_every = {STEPS}
eval_batches = 1
[checkpoint]
dir = {run_dir}
[log]
metrics = auto
""")
    # step 0: the untouched model, as mgt reads it and as transformers does
    before = os.path.join(work, name + "_step0")
    subprocess.run([MGT, "train", preset, "--no-tui", "--set", "train.steps=1", "--set", "train.eval_every=1",
                    "--set", "train.lr=0", "--set", "train.min_lr=0", "--set", f"checkpoint.dir={before}"], check=True,
                   stdout=subprocess.DEVNULL)
    mgt0 = mgt_val_losses(before)[1]
    hf0 = hf_loss(fixture, seq, torch.float64)
    subprocess.run([MGT, "train", preset, "--no-tui"], check=True, stdout=subprocess.DEVNULL)
    exported = os.path.join(work, name + "_export")
    subprocess.run([MGT, "export", run_dir, "-o", exported], check=True)
    mgt_loss = mgt_val_losses(run_dir)[STEPS]
    hf32, hf64 = hf_loss(exported, seq, torch.float32), hf_loss(exported, seq, torch.float64)
    print(f"{name}: before fine-tuning (lr 0 step): mgt {mgt0:.7f}  transformers (float64) {hf0:.7f}  rel diff {abs(mgt0 - hf0) / hf0:.2e}")
    print(f"{name}: after {STEPS} steps: mgt val loss {mgt_loss:.7f}  from_pretrained(export) float32 {hf32:.7f}  float64 {hf64:.7f}  "
          f"rel diff {abs(mgt_loss - hf64) / hf64:.2e}")
    return max(abs(mgt0 - hf0) / hf0, abs(mgt_loss - hf64) / hf64)


def main():
    if not os.access(MGT, os.X_OK):
        sys.exit("build mgt first: ninja mgt")
    worst = 0.0
    with tempfile.TemporaryDirectory() as work:
        for name in ("hf_gpt2", "hf_llama"):
            worst = max(worst, roundtrip(name, work))
    print(f"worst relative difference {worst:.2e} (float32 mgt against float64 transformers; limit 1e-5)")
    sys.exit(0 if worst <= 1e-5 else 1)


if __name__ == "__main__":
    main()
