#!/usr/bin/env python3
"""Writes tests/fixtures/tokenizer_gpt2.txt, the reference GPT-2 encodings that
tests/test_tokenizer.c compares data/tokenizer.h against.

    pip install tokenizers regex
    python3 tests/make_tokenizer_fixture.py [BPE_DIR] [TINYSHAKESPEARE]
    python3 tests/make_tokenizer_fixture.py --unicode-tables   # C tables for data/tokenizer.h

The reference is Hugging Face `tokenizers` (BPE + ByteLevel pre-tokenizer,
add_prefix_space=False) loading the SAME encoder.json and vocab.bpe as the C
test (default ../shared/data/gpt2-bpe). Each encoding is also checked against
OpenAI's original regex-based algorithm (gpt-2/src/encoder.py) when the
`regex` package is installed; the script fails if the two disagree.

The fixture stores the test strings (hex) and their ids, plus only the ids and
an FNV-1a checksum of the first 20000 bytes of tinyshakespeare: the corpus
itself stays out of the repository and the C test reads it from shared data.
"""
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "fixtures", "tokenizer_gpt2.txt")
SHAKESPEARE_BYTES = 20000


def unicode_tables():
    """Prints the \\p{L} and \\p{N} range tables of data/tokenizer.h."""
    import unicodedata

    def ranges(pred):
        out, start = [], None
        for cp in range(0x110000 + 1):
            ok = cp < 0x110000 and pred(unicodedata.category(chr(cp)))
            if ok and start is None:
                start = cp
            elif not ok and start is not None:
                out.append((start, cp - 1))
                start = None
        return out

    for name, pred in (("letter", lambda c: c[0] == "L"), ("number", lambda c: c[0] == "N")):
        rs = ranges(pred)
        print("/* %d ranges: unicodedata %s, categories %s* */"
              % (len(rs), unicodedata.unidata_version, name[0].upper()))
        print("static const uint32_t mgt__tok_%s_ranges[%d] = {" % (name, 2 * len(rs)))
        items = ["0x%X,0x%X" % r for r in rs]
        line = "   "
        for it in items:
            if len(line) + len(it) + 2 > 100:
                print(line)
                line = "   "
            line += " " + it + ","
        print(line)
        print("};")


def fnv1a(data):
    h = 0x811C9DC5
    for b in data:
        h ^= b
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


class OpenAIEncoder:
    """OpenAI's gpt-2/src/encoder.py, reduced to encode()."""

    def __init__(self, bpe_dir):
        import regex
        self.encoder = json.load(open(os.path.join(bpe_dir, "encoder.json"), encoding="utf-8"))
        lines = open(os.path.join(bpe_dir, "vocab.bpe"), encoding="utf-8").read().split("\n")[1:-1]
        self.ranks = {tuple(l.split()): i for i, l in enumerate(lines)}
        bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
            + list(range(ord("®"), ord("ÿ") + 1))
        cs, n = bs[:], 0
        for b in range(256):
            if b not in bs:
                bs.append(b)
                cs.append(256 + n)
                n += 1
        self.byte_encoder = dict(zip(bs, map(chr, cs)))
        self.pat = regex.compile(
            r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")

    def bpe(self, token):
        word = tuple(token)
        while len(word) > 1:
            pairs = set(zip(word, word[1:]))
            bigram = min(pairs, key=lambda p: self.ranks.get(p, float("inf")))
            if bigram not in self.ranks:
                break
            first, second = bigram
            new, i = [], 0
            while i < len(word):
                if i < len(word) - 1 and word[i] == first and word[i + 1] == second:
                    new.append(first + second)
                    i += 2
                else:
                    new.append(word[i])
                    i += 1
            word = tuple(new)
        return word

    def encode(self, text):
        ids = []
        for tok in self.pat.findall(text):
            tok = "".join(self.byte_encoder[b] for b in tok.encode("utf-8"))
            ids.extend(self.encoder[t] for t in self.bpe(tok))
        return ids


def test_strings():
    s = [
        "Hello world",
        "Hello, world! How are you today?",
        "",
        " ",
        "a",
        "  leading spaces",
        "trailing spaces   ",
        "a  b   c    d",
        "tabs\tand\t\ttabs",
        "line\nbreaks\n\nand\n\n\nmore\n",
        "mixed \t\n \n\t  whitespace \t",
        "\n\n\n",
        "   \n   ",
        "x\r\ny\r\n",
        "I'm sure they'll say we've done what you're doing and he'd know it's John's",
        "IT'S DON'T I'M WE'LL 'S 'T",
        "''''' '' 's 't 're 've 'm 'll 'd 'x",
        "don't won't can't shouldn't y'all rock'n'roll",
        "12345678901234567890 1 22 333 4444 55555",
        "3.14159 2,718 $1,000,000.00 50% 1e-10 0x1F",
        "version 1.2.3-rc4 on 2024-05-20 at 12:34:56",
        "foo123bar 123abc abc123",
        "!!! ??? ... --- ___ === +++ *** ### @@@",
        "(a) [b] {c} <d> \"quoted\" `code`",
        "def f(x):\n    return x ** 2  # square\n",
        "https://example.com/path?query=1&b=2#frag",
        "<|endoftext|>",
        "café naïve résumé Ünïcödé façade",
        "Ελληνικά και Русский текст",
        "日本語のテキストです。中文测试。한국어 텍스트",
        "emoji 😀 👍🏽 🎉🎉 👨‍👩‍👧",
        "e\u0301 a\u0308 combining\u0301 marks",
        "עברית العربية हिन्दी ไทย",
        "١٢٣ ٤٥٦ arabic-indic digits",
        "Roman Ⅻ Ⅳ fractions ½ ¾ superscripts x² y³",
        "nbsp\u00a0here ideographic\u3000space line\u2028sep nel\u0085x",
        "zero\u200bwidth joiner\u200dtest",
        "\u00ad soft hyphen and \u00a9 \u00ae \u2122",
        "ÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏÐÑÒÓÔÕÖ×ØÙÚÛÜÝÞßàáâãäåæçèéêëìíîïðñòóôõö÷øùúûüýþÿ",
        "control\x01\x02\x7fchars",
        " " * 40 + "x",
        "\t" * 9 + "\n" * 7,
        "9" * 200,
        "a" * 300,
        "The quick brown fox jumps over the lazy dog. " * 3,
    ]
    # Random mixtures of the characters that decide pre-tokenisation.
    rng = random.Random(20240520)
    pool = list("aZ zé9 '\t\n\r.,!?-_sStTmdlrev") + ["  ", "'s", "'ll", "é", "中", "😀",
                                                    "\u00a0", "\u3000", "1", "½", "\u0301"]
    for _ in range(60):
        s.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 40))))
    return s


def main():
    if "--unicode-tables" in sys.argv:
        unicode_tables()
        return
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    bpe_dir = args[0] if len(args) > 0 else os.path.join(ROOT, "..", "shared", "data", "gpt2-bpe")
    shakespeare = args[1] if len(args) > 1 else os.path.join(
        ROOT, "..", "shared", "data", "tinyshakespeare", "input.txt")

    import tokenizers
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders
    tok = Tokenizer(models.BPE.from_file(os.path.join(bpe_dir, "encoder.json"),
                                         os.path.join(bpe_dir, "vocab.bpe")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()

    try:
        oai = OpenAIEncoder(bpe_dir)
    except ImportError:
        oai = None
        print("note: `regex` not installed, skipping the check against OpenAI's algorithm")

    def encode(text):
        ids = tok.encode(text).ids if text else []
        if oai is not None and oai.encode(text) != ids:
            sys.exit("reference mismatch (tokenizers vs OpenAI) on %r" % text)
        return ids

    lines = ["# GPT-2 BPE reference ids for tests/test_tokenizer.c.",
             "# Generated by tests/make_tokenizer_fixture.py with tokenizers %s%s; do not edit."
             % (tokenizers.__version__, " (checked against OpenAI's regex algorithm)" if oai else ""),
             "# case <name> / text <utf-8 hex> / ids <ids...>; file <name> <bytes> <fnv1a32> / ids"]
    ntok = 0
    for i, s in enumerate(test_strings()):
        ids = encode(s)
        ntok += len(ids)
        lines.append("case %d" % i)
        lines.append("text " + s.encode("utf-8").hex())
        lines.append("ids " + " ".join(map(str, ids)))
    data = open(shakespeare, "rb").read()[:SHAKESPEARE_BYTES]
    ids = encode(data.decode("utf-8"))
    lines.append("file tinyshakespeare %d %08x" % (len(data), fnv1a(data)))
    lines.append("ids " + " ".join(map(str, ids)))
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s: %d cases (%d ids), tinyshakespeare %d bytes -> %d ids, %d bytes"
          % (os.path.relpath(OUT), len(test_strings()), ntok, len(data), len(ids), os.path.getsize(OUT)))


if __name__ == "__main__":
    main()
