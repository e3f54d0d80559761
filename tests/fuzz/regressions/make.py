#!/usr/bin/env python3
"""Writes the reproducers of tests/fuzz/regressions/ (README.md there says what each shows).

The checkpoint ones start from the seed tests/fuzz/corpus/checkpoint/fp32_step0.safetensors and
change one thing each. Run from the repository root: python3 tests/fuzz/regressions/make.py
"""
import json
import struct

SEED = "tests/fuzz/corpus/checkpoint/fp32_step0.safetensors"
OUT = "tests/fuzz/regressions/"


def read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]


def write(name, header, data, pad=8):
    h = json.dumps(header, separators=(",", ":")).encode()
    while pad and len(h) % pad:
        h += b" "
    open(OUT + name, "wb").write(struct.pack("<Q", len(h)) + h + data)


def params_only(header, data):
    """the tensors a sampling run reads (no optimizer moments), and no checksum"""
    meta = dict(header["__metadata__"])
    meta.pop("checksum", None)
    out, blob = {"__metadata__": meta}, b""
    for name, t in header.items():
        if name == "__metadata__" or name.startswith("optim."):
            continue
        b, e = t["data_offsets"]
        out[name] = {"dtype": t["dtype"], "shape": t["shape"], "data_offsets": [len(blob), len(blob) + e - b]}
        blob += data[b:e]
    return out, blob


header, data = read(SEED)
nocheck = dict(header)
nocheck["__metadata__"] = {k: v for k, v in header["__metadata__"].items() if k != "checksum"}

# sampling a checkpoint of NaN weights: GELU on NaN reaches mgt__expf's (int32_t) conversion
h, d = params_only(header, data)
b, e = h["wte"]["data_offsets"]
d = d[:b] + struct.pack("<f", float("nan")) * ((e - b) // 4) + d[e:]
write("checkpoint/nan_weights.safetensors", h, d)

# a header whose length is not a multiple of 4 (safetensors allows it): tensors read as float
# from an address that is not 4-aligned
h, d = params_only(header, data)
enc = json.dumps(h, separators=(",", ":")).encode()
if len(enc) % 4 == 0:
    h["__metadata__"]["pad"] = "x"
write("checkpoint/misaligned.safetensors", h, d, pad=0)

# metadata that resume takes as it is: the next step overflows a counter
h = json.loads(json.dumps(nocheck))
h["__metadata__"]["tokens_seen"] = "9223372036854775807"
write("checkpoint/tokens_seen_max.safetensors", h, data)
h = json.loads(json.dumps(nocheck))
h["__metadata__"]["step"] = "2147483647"
write("checkpoint/step_max.safetensors", h, data)

# presets: the first part is INI text, the others --set assignments (NUL-separated)
config = {
    "validate_batch_overflow": b"[train]\nmicro_batch = 1000000\n[parallel]\ndp = 4096\n",
    "roundtrip_trailing_space": b"\0checkpoint.dir=runs/x ",
    "roundtrip_semicolon": b"\0data.val=a ; b",
    "roundtrip_newline": b"\0log.metrics=m.jsonl\n[model]\nn_layer = 2",
    "roundtrip_long_value": b"[data]\ntrain = " + b"d/" * 74 + b"x.bin\n",
}
for name, text in config.items():
    open(OUT + "config/" + name, "wb").write(text)

# [model] init: config.json, NUL, index JSON (empty), NUL, the weights file (issue 25)
import os
os.makedirs(OUT + "init", exist_ok=True)
# llm.c's header with 1 << 30 layers and channels: its tensor sizes overflowed 64 bits
hdr = [20240326, 3, 1024, 50257, 1 << 30, 1 << 10, 1 << 30, 50304] + [0] * 248
open(OUT + "init/llmc_huge_header", "wb").write(b"\0\0" + struct.pack("<256i", *hdr))
# a Llama config.json whose head_dim x n_head wrapped to d_model in an int (536870920 x 8 = 64 mod 2^32)
cfg = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2, "num_attention_heads": 8, "hidden_size": 64,
       "head_dim": 536870920, "intermediate_size": 128, "vocab_size": 256, "max_position_embeddings": 64}
open(OUT + "init/head_dim_wraps", "wb").write(json.dumps(cfg).encode() + b"\0\0")
