#!/usr/bin/env python3
"""src/assemble.py - writes mgt.h from the parts under src/, in the order of PARTS.

mgt ships one header; it is edited as parts, one concern each (sqlite's amalgamation, miniaudio's
assembled file). Each part opens with a comment "/* src/NAME - what it holds */"; mgt.h opens with
the list of parts made from those comments, and each part is framed by begin/end markers and a
#line directive, so a compiler's message names the part's file and line.

  src/assemble.py            write mgt.h (only when its text changes)
  src/assemble.py --depfile FILE  the same, and FILE lists the parts for ninja (build.ninja runs this)
  src/assemble.py --check    exit 1 when mgt.h is not what the parts assemble to
  src/assemble.py --committed  the same for the last commit (git show HEAD:...), whatever the work tree
  src/assemble.py --layers   exit 1 when an implementation part uses a function, macro or type that
                             only a later part defines (the order is the layering), beyond the
                             known ones listed in KNOWN_BACK_REFERENCES, or when docs/design.md's
                             map of the parts is not the parts'
  src/assemble.py --map      write that map into docs/design.md (between its markers)

Writing refuses an mgt.h edited by hand (newer than every part and not what they assemble to): the
edit belongs in its part, and writing would lose it.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the order is the file's: the public API, then the implementation from its base up
PARTS = [
    "mgt_api.h", "catf.h", "impl_begin.h", "base.c", "plugin.c", "config.c", "pool.c", "blas.c", "backend_cpu.c", "world.c", "model.c", "data.c",
    "safetensors.c", "comm_local.c", "comm_mpi.c", "run.c", "rank.c", "pipeline.c", "step.c", "tensorboard.c", "metrics.c", "folder.c", "checkpoint.c", "rank_make.c",
    "weights.c", "weights_hf.c", "weights_init.c", "plan.c", "device.c", "api.c",
    "sim.c", "sim_measure.c", "sim_backend.c", "sim_comm.c", "sim_calibration.c", "sim_search.c", "layout_auto.c", "impl_end.h",
]
# optional parts, stb-style: each is compiled unless its switch is defined (mgt.h's OPTIONS)
OPTIONAL = {"weights_hf.c": "MGT_NO_HF",
            "sim.c": "MGT_NO_SIM", "sim_measure.c": "MGT_NO_SIM", "sim_backend.c": "MGT_NO_SIM", "sim_comm.c": "MGT_NO_SIM",
            "sim_calibration.c": "MGT_NO_SIM", "sim_search.c": "MGT_NO_SIM"}
HEAD_RE = re.compile(r"/\* src/(\S+) - (.*?)\*/", re.S)
# uses of a later part's name, through a forward declaration, allowed by name: none is left (issue 24
# paid the last four down); a new one fails --layers
KNOWN_BACK_REFERENCES = set()


def describe(name, text):
    m = HEAD_RE.match(text)
    if not m or m.group(1) != name:
        sys.exit("src/%s: line 1 must open its description: /* src/%s - what it holds */" % (name, name))
    return " ".join(m.group(2).split())


def wrap(text, width, indent):
    out, line = [], ""
    for word in text.split():
        if line and len(indent) + len(line) + 1 + len(word) > width:
            out.append(line)
            line = word
        else:
            line = word if not line else line + " " + word
    out.append(line)
    return ("\n" + indent).join(out)


def assemble(read):
    texts = [(name, read("src/" + name)) for name in PARTS]
    pad = max(len("src/" + n) for n in PARTS) + 2
    out = ["/* mgt.h - assembled by src/assemble.py from the parts under src/: edit a part, then run `ninja`",
           "   (or src/assemble.py), which writes this file again. A compiler names the part's file and line.",
           "",
           "   PARTS (in this order: the public API, then the implementation from its base up)"]
    for name, text in texts:
        out.append("     " + ("src/" + name).ljust(pad) + wrap(describe(name, text), 110, " " * (5 + pad)))
    out.append("*/")
    for name, text in texts:
        if not text.endswith("\n"):
            text += "\n"
        out.append("/* ==== begin src/%s ==== */" % name)
        if name in OPTIONAL:
            out.append("#ifndef %s" % OPTIONAL[name])
        out.append('#line 1 "src/%s"' % name)
        out.append(text.rstrip("\n"))
        if name in OPTIONAL:
            out.append("#endif /* %s */" % OPTIONAL[name])
        out.append("/* ==== end src/%s ==== */" % name)
    return "\n".join(out) + "\n"


def code_of(text):
    """text without comments and string literals (names in them are no uses)"""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', text)


def back_references(read):
    """(part, name, defining part) for each name an implementation part uses that a later part defines"""
    defined, code = {}, {}
    for name in PARTS:
        c = code_of(read("src/" + name))
        code[name] = c
        for pattern in (r"^(?:static |MGTDEF |MGT__PRINTF\([^)]*\) static )[^;{=]*?\b(mgt_{1,2}\w+)\s*\([^;]*?\)\s*\{",
                        r"^#define (MGT_\w+|mgt_\w+)", r"^\}\s*(mgt_{1,2}\w+);"):
            for m in re.finditer(pattern, c, re.M | re.S):
                defined.setdefault(m.group(1), name)
    order = {name: i for i, name in enumerate(PARTS)}
    found = []
    for name in PARTS[1:]:  # the public part declares everything the others define
        for used in sorted(set(re.findall(r"\b(mgt_{1,2}\w+|MGT_\w+)\b", code[name]))):
            where = defined.get(used)
            if where and order[where] > order[name]:
                found.append((name, used, where))
    return found


MAP_BEGIN = "<!-- the parts map: written by src/assemble.py --map from PARTS and each part's first line -->"
MAP_END = "<!-- end of the parts map -->"


def parts_map(read):
    """docs/design.md's map of the parts: each part's concern, and the later parts' names it still uses"""
    later = {}
    for part, used in sorted(KNOWN_BACK_REFERENCES):
        later.setdefault(part, []).append("`%s`" % used)
    rows = ["| part | what it owns | may use |", "|---|---|---|"]
    for i, name in enumerate(PARTS):
        uses = "its own declarations" if i == 0 else "the parts above"
        if name in later:
            uses += "; of later parts, still: " + ", ".join(later[name])
        rows.append("| `src/%s` | %s | %s |" % (name, describe(name, read("src/" + name)).replace("|", "\\|"), uses))
    return MAP_BEGIN + "\n" + "\n".join(rows) + "\n" + MAP_END


def design_with_map(read):
    """docs/design.md with its map as the parts are now, and whether the map was there"""
    doc = read("docs/design.md")
    a, b = doc.find(MAP_BEGIN), doc.find(MAP_END)
    if a < 0 or b < a:
        return doc, False
    return doc[:a] + parts_map(read) + doc[b + len(MAP_END):], True


def from_tree(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def from_head(path):
    return subprocess.run(["git", "-C", ROOT, "show", "HEAD:" + path], check=True, capture_output=True, text=True).stdout


def first_difference(a, b):
    al, bl = a.split("\n"), b.split("\n")
    for i, (x, y) in enumerate(zip(al, bl)):
        if x != y:
            return i + 1
    return min(len(al), len(bl)) + 1


def main(argv):
    target = os.path.join(ROOT, "mgt.h")
    if len(argv) == 2 and argv[1] == "--layers":
        found = back_references(from_tree)
        new = [f for f in found if (f[0], f[1]) not in KNOWN_BACK_REFERENCES]
        for part, used, where in new:
            print("src/%s uses %s, which the later src/%s defines: move one of them so that no part uses a later one" % (part, used, where))
        paid = KNOWN_BACK_REFERENCES - {(f[0], f[1]) for f in found}
        for part, used in sorted(paid):
            print("src/%s no longer uses %s of a later part: take it out of KNOWN_BACK_REFERENCES" % (part, used))
        print("%d uses of a later part's name (%d known, %d new)" % (len(found), len(found) - len(new), len(new)))
        doc, has_map = design_with_map(from_tree)
        stale = not has_map or doc != from_tree("docs/design.md")
        if stale:
            print("docs/design.md's map of the parts is %s: run src/assemble.py --map" % ("missing" if not has_map else "not the parts' (a part, its first line or a known use changed)"))
        return 1 if new or paid or stale else 0
    if len(argv) == 2 and argv[1] == "--map":
        doc, has_map = design_with_map(from_tree)
        if not has_map:
            sys.exit("docs/design.md has no map markers: put %s and %s where the map goes" % (MAP_BEGIN, MAP_END))
        with open(os.path.join(ROOT, "docs/design.md"), "w", encoding="utf-8") as f:
            f.write(doc)
        return 0
    if len(argv) > 1 and argv[1] in ("--check", "--committed"):
        head = argv[1] == "--committed"
        read = from_head if head else from_tree
        want, have = assemble(read), read("mgt.h")
        if want != have:
            where = "the last commit's" if head else "the work tree's"
            sys.exit("%s mgt.h is not what src/ assembles to (first difference at its line %d): edit the part under src/, "
                     "run src/assemble.py (or ninja) and commit both" % (where, first_difference(want, have)))
        return 0
    if len(argv) == 3 and argv[1] == "--depfile":
        with open(argv[2], "w", encoding="utf-8") as f:
            f.write("mgt.h: " + " ".join("src/" + n for n in PARTS) + "\n")
    elif len(argv) > 1:
        sys.exit(__doc__)
    want = assemble(from_tree)
    have = from_tree("mgt.h") if os.path.exists(target) else None
    if have == want:
        return 0
    if have is not None:
        newest_part = max(os.path.getmtime(os.path.join(ROOT, "src", n)) for n in PARTS)
        if os.path.getmtime(target) > newest_part:
            sys.exit("mgt.h was edited after its parts (first difference at its line %d): move the edit into its part under "
                     "src/ (the markers name it); writing mgt.h now would lose it" % first_difference(want, have))
    tmp = target + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(want)
    os.replace(tmp, target)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
