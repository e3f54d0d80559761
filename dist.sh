#!/usr/bin/env bash
# dist.sh MGT [MGT-LEVEL...]: what `ninja dist` runs. Makes build/mgt-VERSION-linux-x86_64.tar.gz,
# one folder mgt-VERSION-linux-x86_64/ that runs on an x86-64 Linux where nothing can be installed:
#   bin/mgt        MGT, the program built for x86-64-v2 (build.ninja: build/dist/mgt), which runs
#   bin/mgt-x86-64-v4, -v3   the MGT-LEVELs, the same built for those levels, where the CPU has them;
#                  all with the run path $ORIGIN/../lib
#   lib/           the libraries it links beyond a base system (from ldd, below), each the real file
#                  under its SONAME with the run path $ORIGIN; libmgt_cuda.so and libmgt_mpi.so
#                  when `ninja cuda` / `ninja mpi` built them (mgt opens them through its run path)
#   include/, lib/pkgconfig/mgt.pc   what `ninja install` installs (its own command, run here), with
#                  a relocatable prefix, and the inih and CBLAS headers mgt.h includes, so that
#                  `pkg-config --cflags --libs mgt` builds a program that embeds mgt with no -dev package
#   presets/, data/ (empty: the quick start's shards go there), README
# The base system, never bundled: the C library (libc, libm, libpthread, libdl, librt, libutil,
# libresolv, ld-linux), libgcc_s and libstdc++. Everything else ldd lists is bundled, so a new
# dependency is bundled without editing this file. The plugins' own dependencies are not: MPI must
# be the cluster's (its launcher's), CUDA's libraries the machine's toolkit.
# Fails when a library cannot be found, and when the tarball is over 40 MiB without libmgt_cuda.so.
set -euo pipefail
cd "$(dirname "$0")"
exe=${1:?usage: dist.sh MGT [MGT-LEVEL...] (the programs built for the bundle: build/dist/mgt*)}
shift
command -v patchelf > /dev/null || { echo "dist.sh: needs patchelf to set the bundled libraries' run path (apt-get install patchelf)" >&2; exit 1; }
base='^(linux-vdso|ld-linux-x86-64|libc|libm|libpthread|libdl|librt|libutil|libresolv|libgcc_s|libstdc\+\+)\.so'
limit=$((40 * 1024 * 1024))

version=$(sed -n 's/^#define MGT_VERSION_STRING "\(.*\)"/\1/p' mgt.h)
name=mgt-$version-linux-x86_64
stage=$PWD/build/dist/$name
tarball=build/$name.tar.gz
rm -rf "$stage"
mkdir -p "$stage"

# what `ninja install` installs, by its own command (as tests/test_install.sh runs it), then the
# bundle's program in place of the one built for this CPU
PREFIX=$stage DESTDIR='' bash -c "$(ninja -t commands install | tail -n 1)" > /dev/null
rm -rf "$stage/lib/mgt" # the bundle keeps its plugins in lib/, on its program's run path (below)
install -m 755 "$exe" "$stage/bin/mgt"
for level in "$@"; do install -m 755 "$level" "$stage/bin/"; done

# the libraries: ldd's list without the base system
lib=$stage/lib
missing=$(ldd "$exe" | awk '/not found/ { print $1 }')
[ -z "$missing" ] || { echo "dist.sh: $exe needs libraries this machine lacks: $missing" >&2; exit 1; }
bundled=()
while read -r soname path; do
    [[ $soname =~ $base ]] && continue
    real=$(readlink -f "$path")
    soname=$(patchelf --print-soname "$real" 2> /dev/null || true)
    [ -n "$soname" ] || soname=$(basename "$path")
    install -m 644 "$real" "$lib/$soname"
    patchelf --force-rpath --set-rpath '$ORIGIN' "$lib/$soname"
    bundled+=("$soname")
done < <(ldd "$exe" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }')
for plugin in build/libmgt_cuda.so build/libmgt_mpi.so; do
    if [ -f "$plugin" ]; then install -m 755 "$plugin" "$lib/"; fi
done
# every library outside the base system now resolves into lib/ (DT_RPATH comes before the cache)
for prog in "$stage"/bin/mgt*; do
    while read -r soname path; do
        if ! [[ $soname =~ $base ]] && [ "$(dirname "$(readlink -f "$path")")" != "$lib" ]; then
            echo "dist.sh: the bundle's $(basename "$prog") takes $soname from ${path:-nowhere}, not from lib/" >&2
            exit 1
        fi
    done < <(env -u LD_LIBRARY_PATH ldd "$prog" | awk '$2 == "=>" { print $1, $3 }')
done
grep -q DYNAMIC_ARCH "$lib"/libopenblas.so.* 2> /dev/null ||
    echo "dist.sh: note: the bundled BLAS is not OpenBLAS built with DYNAMIC_ARCH: its kernels are fixed at build time" >&2

# embedding without -dev packages: mgt.h's own includes (ini.h; cblas.h and what it includes),
# link names for -linih -lopenblas, and mgt.pc relative to where it lies
for dir in $(pkg-config --cflags-only-I inih openblas | sed 's/-I//g') /usr/include; do
    for h in ini.h cblas.h openblas_config.h; do
        if [ -f "$dir/$h" ] && [ ! -f "$stage/include/$h" ]; then install -m 644 "$dir/$h" "$stage/include/"; fi
    done
done
for l in inih openblas; do
    so=$(cd "$lib" && ls lib$l.so.* | head -n 1)
    ln -s "$so" "$lib/lib$l.so"
done
sed -i -e 's|^prefix=.*|prefix=${pcfiledir}/../..\nlibdir=${prefix}/lib|' -e '/^Requires:/d' \
    -e 's|^Cflags: \(.*\)|Cflags: \1 -I${prefix}/include|' \
    -e 's|^Libs: \(.*\)|Libs: -L${libdir} -Wl,-rpath,${libdir} -linih -lopenblas \1|' "$lib/pkgconfig/mgt.pc"

mkdir -p "$stage/presets" "$stage/data"
cp presets/*.ini "$stage/presets/"
plugins=""
if [ -f "$lib/libmgt_cuda.so" ]; then plugins+="lib/libmgt_cuda.so is the CUDA backend: it needs the machine's driver, and cuBLAS, cuDNN 9 and NCCL
from its CUDA toolkit on the loader's path (LD_LIBRARY_PATH, or module load cuda).
"; fi
if [ -f "$lib/libmgt_mpi.so" ]; then plugins+="lib/libmgt_mpi.so is opened under mpirun or srun; it needs the MPI it was built against
(libmpi) on the loader's path: rebuild it (\`ninja mpi\` in the source) against the cluster's MPI.
"; fi
glibc=$(objdump -T "$stage/bin/mgt" "$lib"/*.so* 2> /dev/null | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -n 1)
cat > "$stage/README" << EOF
mgt $version for x86-64 Linux: trains GPT-style transformers from an INI preset, with nothing to
install. Needs glibc $glibc or newer and an x86-64-v2 CPU (SSE4.2, any x86-64 server since 2009).

  bin/mgt version
  bin/mgt prepare --tokenizer byte YOUR_TEXT.txt -o data/quickstart
  bin/mgt train presets/quickstart.ini --no-tui     (or in a terminal, with the dashboard)
  bin/mgt sample runs/quickstart --tokens 300

Presets name their data relative to themselves (presets/quickstart.ini: ../data/quickstart_*.bin);
runs/ goes in the current folder. \`bin/mgt help\` lists the commands, \`bin/mgt keys\` every preset key.

lib/ holds the libraries mgt links that a base system lacks: ${bundled[*]}.
bin/mgt finds them through its run path (\$ORIGIN/../lib, which LD_LIBRARY_PATH does not override).
bin/mgt is compiled for x86-64-v2 and runs $(cd "$stage/bin" && ls mgt-* 2> /dev/null | tr '\n' ' ')instead where the CPU
has that level (\`bin/mgt version\` says which runs; MGT_X86_LEVEL=v2 or v3 caps it). The matrix
products are OpenBLAS's ($(grep -ao 'OpenBLAS [0-9][0-9.]*[0-9]' "$lib"/libopenblas.so.* | head -n 1)), which chooses its kernels for the CPU at run
time; a CPU newer than it gets its generic kernels, and mgt then sets OPENBLAS_CORETYPE to SkylakeX
or Haswell by the CPU's instructions (\`bin/mgt doctor\` says so; set it yourself to choose).
${plugins}
Embedding: include/mgt/mgt.h and lib/pkgconfig/mgt.pc,
  PKG_CONFIG_PATH=\$PWD/lib/pkgconfig cc -O3 prog.c \$(pkg-config --cflags --libs mgt)
The guide is README.md in mgt's source.
EOF

rm -f "$tarball"
tar -C build/dist --sort=name --owner=0 --group=0 --numeric-owner -cf - "$name" | gzip -n -9 > "$tarball.tmp"
mv "$tarball.tmp" "$tarball"
size=$(stat -c %s "$tarball")
without_cuda=$size
if [ -f "$lib/libmgt_cuda.so" ]; then
    without_cuda=$(tar -C build/dist --sort=name --owner=0 --group=0 --numeric-owner --exclude=libmgt_cuda.so -cf - "$name" | gzip -n -9 | wc -c)
fi
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
echo "$tarball: $(mib "$size")$([ "$size" != "$without_cuda" ] && echo ", $(mib "$without_cuda") without libmgt_cuda.so"); bundled: ${bundled[*]} $(cd "$lib" && ls libmgt_*.so 2> /dev/null | tr '\n' ' ')"
if [ "$without_cuda" -gt "$limit" ]; then
    echo "dist.sh: $tarball is $(mib "$without_cuda") without the CUDA library, over the 40 MiB limit" >&2
    exit 1
fi
