#!/usr/bin/env bash
# mgt.h is what the parts under src/ assemble to (src/assemble.py): in the work tree, and in the last
# commit (so a commit that changed a part without mgt.h, or mgt.h by hand, fails CI's clean clone);
# and no part uses a later one beyond the known debt
set -u
cd "$(dirname "$0")/.."
python3 src/assemble.py --check || exit 1
if git rev-parse --is-inside-work-tree > /dev/null 2>&1 && git cat-file -e HEAD:src/assemble.py 2> /dev/null; then
  python3 src/assemble.py --committed || exit 1
fi
# the order of the parts is the layering: no implementation part uses a name only a later part
# defines, beyond the known debt src/assemble.py lists
python3 src/assemble.py --layers || exit 1
# a compiler names the part's file and line
grep -q '^#line 1 "src/step.c"$' mgt.h || { echo "mgt.h has no #line for src/step.c"; exit 1; }
echo "ok   mgt.h is src/'s $(grep -c '^/\* ==== begin src/' mgt.h) parts assembled, in the work tree and the last commit"
