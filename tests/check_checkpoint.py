#!/usr/bin/env python3
"""Reads an mgt checkpoint with the Python `safetensors` package (an independent reader of the
format) and, when PyTorch is there, recomputes a loss with the plain PyTorch GPT-2 of
tests/make_parity_fixture.py from the checkpoint's weights.

    pip install safetensors numpy [torch]
    python3 tests/check_checkpoint.py runs/quickstart/step_00001000.safetensors [data/quickstart_val.bin]

CI does not need it; README records what it printed."""
import configparser
import json
import sys

import numpy as np
from safetensors import safe_open


def main():
    path = sys.argv[1]
    with safe_open(path, framework="numpy") as f:
        meta = f.metadata()
        names = list(f.keys())
        tensors = {k: f.get_tensor(k) for k in names}
    assert meta["format"] == "mgt-checkpoint-2", meta.get("format")
    if meta["preset"].startswith("{"):  # every key as "section.key": "value"
        preset = json.loads(meta["preset"])
        getint = lambda section, key: int(preset[section + "." + key])
    else:  # checkpoints from before the JSON preset: INI text
        ini = configparser.ConfigParser(inline_comment_prefixes=(";",))
        ini.read_string(meta["preset"])
        getint = ini.getint
    L = getint("model", "n_layer")
    C = getint("model", "d_model")
    V = getint("model", "vocab_size")
    T = getint("model", "seq_len")
    weights = [n for n in names if not n.startswith("optim.")]
    assert tensors["wte"].shape == (V, C) and tensors["wpe"].shape == (T, C)
    assert len(weights) == 2 + 12 * L + 2, len(weights)
    for n in weights:
        assert tensors["optim.m." + n].shape == tensors[n].shape and tensors["optim.v." + n].shape == tensors[n].shape
        assert np.isfinite(tensors[n]).all(), n
    print(f"{path}: step {meta['step']}, {len(weights)} weight tensors, "
          f"{sum(t.size for n, t in tensors.items() if not n.startswith('optim.')):,} parameters, all finite; "
          f"train loss at save {float(meta['train_loss']):.4f}")
    if len(sys.argv) > 2:
        try:
            import torch
            sys.path.insert(0, "tests")
            import make_parity_fixture as ref  # the fixture's independent GPT-2
            ref.L, ref.NH, ref.V = L, getint("model", "n_head"), V
        except ImportError as e:
            print(f"(no loss check: {e})")
            return
        tokens = np.fromfile(sys.argv[2], dtype=np.uint16, offset=1024)
        rng = np.random.default_rng(0)
        starts = rng.integers(0, len(tokens) - T - 1, size=8)
        x = torch.tensor(np.stack([tokens[s:s + T] for s in starts]).astype(np.int64))
        y = torch.tensor(np.stack([tokens[s + 1:s + T + 1] for s in starts]).astype(np.int64))
        params = {n: torch.tensor(tensors[n], dtype=torch.float64) for n in weights}
        _, loss = ref.forward(params, x, y)
        print(f"PyTorch loss of the checkpoint on 8 random windows of {sys.argv[2]}: {float(loss):.4f}")


if __name__ == "__main__":
    main()
