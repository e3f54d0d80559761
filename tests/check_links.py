#!/usr/bin/env python3
"""tests/check_links.py - every relative link of README.md and docs/*.md leads somewhere: the file
exists (relative to the page that links it, as GitHub resolves it) and a #fragment names one of
its headings (GitHub's anchors: lower case, punctuation dropped, spaces to hyphens). Also the
sections that presets name (README ("Title"), docs/X.md ("Title")) exist. Prints each broken link with its
page and line; exit 1 when there is one."""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)", re.S)


def anchors(path):
    """the anchors GitHub makes for a markdown file's headings"""
    seen, out = {}, set()
    in_code = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                in_code = not in_code
            if in_code:
                continue
            m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            text = re.sub(r"`|\*\*|\*|_(?=\w)|(?<=\w)_", "", m.group(1))
            text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
            slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else "%s-%d" % (slug, n))
    return out


def main():
    pages = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    broken, checked = [], 0
    for page in pages:
        with open(page, encoding="utf-8") as f:
            text = f.read()
        # code blocks hold no links: blank them, keeping the lines (a link's text may span lines)
        text = re.sub(r"```.*?```", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
        for m in LINK.finditer(text):
            target, no = m.group(1), text.count("\n", 0, m.start()) + 1
            if re.match(r"[a-z]+:", target):
                continue  # another site: not checked here (no network in CI)
            checked += 1
            path, _, frag = target.partition("#")
            where = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            rel = os.path.relpath(page, ROOT)
            if not os.path.exists(where):
                broken.append("%s:%d: %s: no such file (%s)" % (rel, no, target, os.path.relpath(where, ROOT)))
            elif frag and where.endswith(".md") and frag not in anchors(where):
                broken.append("%s:%d: %s: %s has no heading with the anchor #%s" % (rel, no, target, os.path.relpath(where, ROOT), frag))
    # presets that point at a page's section by its title: README ("Title") or docs/X.md ("Title")
    for preset in sorted(glob.glob(os.path.join(ROOT, "presets", "*.ini"))):
        with open(preset, encoding="utf-8") as f:
            for no, line in enumerate(f, 1):
                for page, title in re.findall(r'(README|docs/[\w.]+\.md) \("([^"]+)"\)', line):
                    checked += 1
                    path = os.path.join(ROOT, "README.md" if page == "README" else page)
                    slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
                    if not os.path.exists(path) or slug not in anchors(path):
                        broken.append("%s:%d: %s has no section \"%s\"" % (os.path.relpath(preset, ROOT), no, page, title))
    for b in broken:
        print("FAIL " + b)
    print("%d links checked, %d broken" % (checked, len(broken)))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
