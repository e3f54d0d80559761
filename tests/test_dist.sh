#!/usr/bin/env bash
# tests/test_dist.sh - the bundle `ninja dist` makes (build/mgt-VERSION-linux-x86_64.tar.gz) runs
# where nothing is installed: unpacked into a minimal Debian 12 (debootstrap --variant=minbase: no
# compiler, no -dev package, none of the libraries mgt links beyond the C library) and run there
# with chroot, `ldd` finds every library, `mgt version` prints the version and the x86-64 level of
# the build that runs (the highest the CPU has; MGT_X86_LEVEL caps it), `mgt prepare` makes the
# quick start's shards from text, presets/quickstart.ini trains 30 steps headless to a finite loss
# (validation, checkpoint) on the x86-64-v2 build and on the one the CPU runs, and samples, the dashboard opens in a terminal (script), lib/'s
# libmgt_cuda.so and libmgt_mpi.so, when bundled, are the ones mgt opens, and README's embedding
# example, built on this machine from the bundle's mgt.pc alone, trains in the chroot.
#
# `ninja test_dist` builds the bundle and runs this with MGT_TEST_DIST=1; without it, as in
# `ninja test`, it exits 77 (SKIP). Needs root (chroot, mount) and debootstrap (apt-get install
# debootstrap). The first run makes the Debian in build/dist/debian12-minbase (about 200 MB, from
# $MGT_DEBIAN_MIRROR, default http://deb.debian.org/debian; 35 s here), later runs reuse it.
set -u
cd "$(dirname "$0")/.."
skip() { echo "SKIP $*"; exit 77; }
[ "${MGT_TEST_DIST:-}" = 1 ] || skip "the bundle in a minimal Debian: \`ninja test_dist\` (MGT_TEST_DIST=1; root and debootstrap)"
[ "$(id -u)" -eq 0 ] || skip "test_dist.sh needs root (debootstrap, chroot, mount)"
command -v debootstrap > /dev/null || skip "test_dist.sh needs debootstrap (apt-get install debootstrap)"
version=$(sed -n 's/^#define MGT_VERSION_STRING "\(.*\)"/\1/p' mgt.h)
name=mgt-$version-linux-x86_64
tarball=build/$name.tar.gz
[ -f "$tarball" ] || { echo "FAIL - $tarball is missing: run \`ninja dist\` (or \`ninja test_dist\`)"; exit 1; }
PASS=0 FAILS=0
ok() { echo "ok - $*"; PASS=$((PASS + 1)); }
fail() { echo "FAIL - $*"; FAILS=$((FAILS + 1)); }

root=$PWD/build/dist/debian12-minbase
if [ ! -x "$root/usr/bin/ldd" ]; then
    echo "# debootstrap --variant=minbase bookworm into $root (once; later runs reuse it)"
    rm -rf "$root.tmp"
    debootstrap --variant=minbase bookworm "$root.tmp" "${MGT_DEBIAN_MIRROR:-http://deb.debian.org/debian}" > build/dist/debootstrap.log 2>&1 ||
        { echo "FAIL - debootstrap (build/dist/debootstrap.log): $(tail -n 3 build/dist/debootstrap.log)"; exit 1; }
    mv "$root.tmp" "$root"
fi
W=$root/work # the chroot's /work: the bundle and the runs, fresh each time
cleanup() {
    for m in dev/pts proc; do if mountpoint -q "$root/$m"; then umount -l "$root/$m"; fi; done
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
rm -rf "$W" && mkdir -p "$W/text"
mountpoint -q "$root/proc" || mount -t proc proc "$root/proc" # mgt reads /proc (meminfo, self/exe)
mountpoint -q "$root/dev/pts" || mount --bind /dev/pts "$root/dev/pts" # the dashboard's terminal
# a command in the chroot, in the bundle's folder, with an empty environment but for these
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 MGT_BASELINES=/work/baselines.tsv "$@"; }
in_bundle() { in_root sh -c "cd /work/$name && $1"; }

tools=$(in_root sh -c 'command -v cc gcc clang tcc pkg-config' 2>&1)
devs=$(in_root dpkg-query -W -f '${Package}\n' | grep -c -- '-dev$')
if [ -z "$tools" ] && [ "$devs" -eq 0 ] && ! ls "$root"/usr/lib/x86_64-linux-gnu/libopenblas* "$root"/usr/lib/x86_64-linux-gnu/libinih* > /dev/null 2>&1; then
    ok "the chroot is Debian $(cat "$root/etc/debian_version") minbase: no compiler, no -dev package, no OpenBLAS or inih"
else fail "the chroot is not minimal: tools '$tools', $devs -dev packages, $(ls "$root"/usr/lib/x86_64-linux-gnu/libopenblas* 2>&1 | head -n 1)"; fi

tar -xzf "$tarball" -C "$W"
B=/work/$name
libs=$(cd "$W/$name/lib" && ls *.so.*)
progs=$(cd "$W/$name/bin" && ls mgt*)
for prog in $progs; do
    lddout=$(in_root ldd "$B/bin/$prog" 2>&1)
    stray=$(echo "$lddout" | awk -v lib="$B/bin/../lib/" '$2 == "=>" && index($3, lib) != 1 { print $1 }' | tr '\n' ' ' | sed 's/ $//')
    if ! echo "$lddout" | grep -q "not found" && [ "$stray" = "libm.so.6 libc.so.6 libgcc_s.so.1" ]; then
        ok "ldd in the chroot finds every library of bin/$prog: $(echo $libs) from the bundle's lib/, $stray from the system"
    else fail "ldd bin/$prog in the chroot: $lddout"; fi
done
# shellcheck disable=SC2086
bad=$(cd "$W/$name/lib" && for l in $libs; do in_root ldd "$B/lib/$l" | grep "not found" | sed "s|^|$l: |"; done)
if [ -z "$bad" ]; then ok "and every bundled library's own dependencies (run path \$ORIGIN)"; else fail "bundled libraries: $bad"; fi

# the level that runs: the highest of v4, v3, v2 this CPU has, and each below it when capped
cpu=v2
for level in v3 v4; do
    if ld=$(/lib64/ld-linux-x86-64.so.2 --help 2> /dev/null) && echo "$ld" | grep -q "x86-64-$level (supported"; then cpu=$level; fi
done
got=$(in_bundle "bin/mgt version" 2>&1)
if [ "$got" = "mgt $version (built for x86-64-$cpu)" ]; then ok "bin/mgt version: $got (the loader says this CPU is $cpu)"
else fail "bin/mgt version printed '$got' on a CPU of level $cpu"; fi
for level in v2 v3 v4; do
    [[ $level < $cpu || $level == "$cpu" ]] || continue
    got=$(in_bundle "MGT_X86_LEVEL=$level bin/mgt version" 2>&1)
    if [ "$got" = "mgt $version (built for x86-64-$level)" ]; then ok "MGT_X86_LEVEL=$level bin/mgt version: $got"
    else fail "MGT_X86_LEVEL=$level bin/mgt version printed '$got'"; fi
done

# the quick start's text: Debian's fortunes when this machine has them (setup.sh), else generated
texts=$(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' 2> /dev/null | sort)
if [ -n "$texts" ]; then
    # shellcheck disable=SC2086
    cp $texts "$W/text/"
else
    python3 -c "import random; random.seed(7); w='the cat sat on a mat and the dog ran far away then it slept under an old tree'.split()
print('\n'.join(' '.join(random.choice(w) for _ in range(12)) + '.' for _ in range(40000)))" > "$W/text/generated.txt"
fi
if in_bundle "bin/mgt prepare --tokenizer byte /work/text/* -o data/quickstart" > "$W/prepare.out" 2>&1 && [ -s "$W/$name/data/quickstart_train.bin" ]; then
    ok "bin/mgt prepare: $(tail -n 1 "$W/prepare.out")"
else fail "bin/mgt prepare: $(tail -n 3 "$W/prepare.out")"; fi

# the quick start on the baseline build and on the one this CPU runs: finite, falling, and the same
# curve (the builds may round differently: FMA)
quick="bin/mgt train presets/quickstart.ini --no-tui --set train.steps=30 --set train.warmup=10 --set train.eval_every=30 --set train.eval_batches=2"
losses=""
for level in v2 $([ "$cpu" != v2 ] && echo "$cpu"); do
    in_bundle "MGT_X86_LEVEL=$level $quick --set checkpoint.dir=runs/quickstart-$level" > "$W/train-$level.out" 2>&1
    rc=$?
    loss=$(sed -n 's/^step 30\/30 | loss \([^ ]*\) .*/\1/p' "$W/train-$level.out")
    if [ $rc -eq 0 ] && awk -v l="$loss" 'BEGIN { exit !(l ~ /^[0-9]+\.[0-9]+$/ && l + 0 < 5.6) }' && grep -q "val" "$W/train-$level.out" &&
        [ -n "$(ls "$W/$name/runs/quickstart-$level/"*.safetensors 2> /dev/null)" ]; then
        ok "the quick start trains 30 steps on x86-64-$level: loss $loss at step 30 (from $(sed -n 's/^step 10\/30 | loss \([^ ]*\) .*/\1/p' "$W/train-$level.out") at step 10), validated, checkpointed"
    else fail "the quick start on x86-64-$level (exit $rc, loss '$loss'): $(tail -n 5 "$W/train-$level.out")"; fi
    losses="$losses $loss"
done
if awk -v l="$losses" 'BEGIN { n = split(l, a, " "); exit !(n == 1 || (a[1] - a[2] < 0.01 * a[1] && a[2] - a[1] < 0.01 * a[1])) }'; then
    [ "$cpu" = v2 ] || ok "the two builds' losses at step 30 agree within 1%:$losses"
else fail "the builds' losses at step 30 differ:$losses"; fi
sample=$(in_bundle "bin/mgt sample runs/quickstart-v2 --tokens 40" 2> "$W/sample.err")
if [ $? -eq 0 ] && [ -n "$sample" ]; then ok "bin/mgt sample runs/quickstart-v2 prints $(printf %s "$sample" | wc -c) bytes"
else fail "bin/mgt sample: $(cat "$W/sample.err")"; fi

# the dashboard: the bundled ncursesw with the chroot's terminfo, in a terminal made by script(1)
in_root sh -c "cd /work/$name && TERM=xterm-256color COLUMNS=100 LINES=30 script -qec 'bin/mgt train presets/quickstart.ini --set train.steps=100000 --set checkpoint.dir=/work/tui_run --tui-frames 5' /dev/null" > "$W/tui.out" 2>&1 < /dev/null
rc=$?
if [ $rc -eq 130 ] && grep -q "resume with: bin/mgt train" "$W/tui.out" && grep -q $'\e\[?1049h' "$W/tui.out"; then
    ok "the dashboard opens in a terminal and closes after 5 frames (exit 130, a checkpoint, the resume hint names bin/mgt)"
else fail "the dashboard (exit $rc): $(tail -n 5 "$W/tui.out" | tr -d '\033' | tail -c 600)"; fi

# the plugins mgt opens are lib/'s (found through the run path): each fails in this chroot for
# what it needs from the machine (CUDA's libraries, MPI), which names them, not libmgt_*.so
if [ -f "$W/$name/lib/libmgt_cuda.so" ]; then
    in_bundle "bin/mgt train presets/quickstart.ini --no-tui --set parallel.device=auto --set train.steps=1 --set checkpoint.dir=/work/cuda_run" > "$W/cuda.out" 2>&1
    if grep -q "device auto: training on the CPU (.*libcu[a-z]*\.so[.0-9]*: cannot open" "$W/cuda.out"; then ok "mgt opens lib/libmgt_cuda.so: $(grep -o 'libcu[a-z]*\.so[.0-9]*: cannot open shared object file' "$W/cuda.out" | head -n 1) (the machine's CUDA)"
    else fail "lib/libmgt_cuda.so: $(grep -m1 'device auto' "$W/cuda.out")"; fi
fi
if [ -f "$W/$name/lib/libmgt_mpi.so" ]; then
    in_bundle "OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 bin/mgt train presets/quickstart.ini --no-tui --set parallel.dp=2 --set train.micro_batch=8 --set checkpoint.dir=/work/mpi_run" > "$W/mpi.out" 2>&1
    if grep -q "libmpi[^ ]*: cannot open" "$W/mpi.out"; then ok "mgt opens lib/libmgt_mpi.so under a launcher: $(grep -o 'libmpi[^ ]*: cannot open shared object file' "$W/mpi.out") (the cluster's MPI)"
    else fail "lib/libmgt_mpi.so: $(tail -n 2 "$W/mpi.out")"; fi
fi

# embedding: README's example built here with nothing but the bundle's mgt.pc (its headers, its
# libraries: the compiler's dependency list says which ini.h and cblas.h), run in the chroot
pc=$W/$name/lib/pkgconfig
flags=$(PKG_CONFIG_PATH='' PKG_CONFIG_LIBDIR="$pc" pkg-config --cflags --libs mgt 2>&1)
# shellcheck disable=SC2086
if cc -O1 -MD -MF "$W/embed.d" tests/example_embed.c -o "$W/embed" $flags 2> "$W/cc.err" &&
    grep -q "$pc/../../include/ini.h" "$W/embed.d" && grep -q "$pc/../../include/cblas.h" "$W/embed.d"; then
    ok "the bundle's mgt.pc builds README's example with its own headers (ini.h, cblas.h) and libraries"
else fail "embedding with '$flags': $(head -c 600 "$W/cc.err") $(grep -o '[^ ]*\(ini\|cblas\)\.h' "$W/embed.d" 2> /dev/null | tr '\n' ' ')"; fi
printf '[model]\nn_layer = 2\nn_head = 2\nd_model = 32\nseq_len = 32\n[data]\ntrain = %s\nval =\n[train]\nsteps = 5\nglobal_batch = 4\nmicro_batch = 2\nwarmup = 2\neval_every = 0\n' \
    "$B/data/quickstart_train.bin" > "$W/embed.ini"
if in_root env LD_LIBRARY_PATH="$B/lib" /work/embed /work/embed.ini > "$W/embed.out" 2>&1 && grep -q "^step 5 loss" "$W/embed.out"; then
    ok "which trains 5 steps in the chroot: $(tail -n 1 "$W/embed.out")"
else fail "the example in the chroot: $(tail -n 3 "$W/embed.out")"; fi

echo "# $PASS passed, $FAILS failed"
[ "$FAILS" -eq 0 ]
