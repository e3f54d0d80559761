#!/usr/bin/env bash
# tests/test_install.sh - `ninja install` into a temporary PREFIX: mgt runs from there, mgt.pc gives
# the flags that build README's embedding example away from this tree, and an interrupted run's
# resume hint names the command as it was typed. Runs the install rule's own command
# (`ninja -t commands install`) rather than a nested ninja, which would share the outer build's log.
set -u
ROOT=$(pwd)
[ -x "$ROOT/mgt" ] || { echo "FAIL - run from the repository root after \`ninja mgt\`"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/mgt_test_install.XXXXXX") || exit 1
export MGT_BASELINES="$T/baselines.tsv" # the sgemm rate mgt train measures is kept here, not in ~/.cache
trap 'rm -rf "$T"' EXIT
PASS=0 FAILS=0
ok() { echo "ok - $*"; PASS=$((PASS + 1)); }
fail() { echo "FAIL - $*"; FAILS=$((FAILS + 1)); }

cmd=$(ninja -t commands install | tail -n 1)
if PREFIX="$T/prefix" bash -c "$cmd" >"$T/install.out" 2>&1 && [ -x "$T/prefix/bin/mgt" ] && [ -f "$T/prefix/include/mgt/mgt.h" ] &&
    [ -f "$T/prefix/include/mgt/tui/tui.h" ] && [ -f "$T/prefix/include/mgt/data/tokenizer.h" ] && [ -f "$T/prefix/lib/pkgconfig/mgt.pc" ]; then
    ok "install puts bin/mgt, include/mgt/{mgt.h,tui/tui.h,data/*.h} and lib/pkgconfig/mgt.pc under PREFIX"
else fail "install: $(cat "$T/install.out")"; fi
if "$T/prefix/bin/mgt" version | grep -q "^mgt "; then ok "the installed mgt runs"; else fail "installed mgt version"; fi
# the MPI library (`ninja mpi`), when built, installed where the installed mgt opens it under mpirun
if [ -f build/libmgt_mpi.so ]; then
    out=$(env -u MGT_MPI_LIBRARY "$T/prefix/bin/mgt" doctor 2>&1)
    if [ -f "$T/prefix/lib/mgt/libmgt_mpi.so" ] && echo "$out" | grep -q "MPI library  *$T/prefix/bin/../lib/mgt/libmgt_mpi.so"; then
        ok "install puts build/libmgt_mpi.so in lib/mgt, where the installed mgt opens it"
    else fail "the installed MPI library: $(ls "$T/prefix/lib/mgt" 2>&1); $(echo "$out" | grep -i "MPI library")"; fi
fi

# the embedding example, built in another folder with nothing but pkg-config's flags
mkdir -p "$T/elsewhere" && cp tests/example_embed.c "$T/elsewhere/prog.c"
flags=$(PKG_CONFIG_PATH="$T/prefix/lib/pkgconfig" pkg-config --cflags --libs mgt 2>&1)
if (cd "$T/elsewhere" && cc -O1 prog.c -o prog $flags) 2>"$T/cc.err"; then ok "cc prog.c \$(pkg-config --cflags --libs mgt) builds the embedding example ($flags)"
else fail "embedding build with '$flags': $(head -c 400 "$T/cc.err")"; fi
python3 -c "print('the cat sat on the mat and the dog ran far away. ' * 400)" >"$T/t.txt"
./mgt prepare --tokenizer byte "$T/t.txt" -o "$T/tiny" >/dev/null 2>&1
sed "s#= ../../build/testdata/#= $T/#" tests/presets/embed.ini >"$T/embed.ini"
if (cd "$T/elsewhere" && ./prog "$T/embed.ini" >out.txt 2>&1) && grep -q "^step 5 loss" "$T/elsewhere/out.txt"; then
    ok "the example trains 5 steps"
else fail "the example: $(tail -3 "$T/elsewhere/out.txt" 2>&1)"; fi
left=$(cd "$T/elsewhere" && ls -A | tr '\n' ' ')
if [ "$left" = "out.txt prog prog.c " ] && [ ! -e "$T/embed_run" ]; then ok "the example wrote no files (no metrics, no folder) unless asked"
else fail "files the example left: $left $(ls -d "$T/embed_run" 2>&1)"; fi

# the resume hint names the command that works: the installed one by its path here
(cd "$T" && python3 -c "print('the cat sat on the mat. ' * 400)" >t.txt && "$T/prefix/bin/mgt" prepare --tokenizer byte t.txt -o tk >/dev/null 2>&1)
cp tests/presets/tiny.ini "$T/"
(cd "$T" && timeout --preserve-status -s INT 2 "$T/prefix/bin/mgt" train "$T/tiny.ini" --no-tui --set train.steps=100000000 --set checkpoint.every=0 \
    --set log.every=100000 >hint.out 2>&1)
rc=$?
if [ "$rc" -eq 130 ] && grep -q "^resume with: $T/prefix/bin/mgt train $T/tiny.ini .*--resume latest$" "$T/hint.out"; then ok "the resume hint names $T/prefix/bin/mgt"
else fail "resume hint: exit $rc; $(tail -2 "$T/hint.out")"; fi

echo "# $PASS passed, $FAILS failed"
[ "$FAILS" -eq 0 ]
