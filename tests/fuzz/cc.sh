#!/bin/sh
# Compiles one libFuzzer target (build.ninja's fuzz rule): tests/fuzz/cc.sh OUT SOURCE DEPFILE.
# With clang's libFuzzer: clang -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all, the
# repository's warnings, inih and a CBLAS ($BLAS, openblas by default), PCRE2 and jansson (the hf tokenizer). Without it (no clang, or a
# clang without the fuzzer runtime), OUT is a script that prints a SKIP line and exits 77, so the
# build goes on and tests/test_fuzz.sh reports the skip.
out=$1 src=$2 dep=$3
cc=${FUZZ_CC:-clang}
blas=${BLAS:-openblas}
if printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' |
    "$cc" -x c -fsanitize=fuzzer -o "$out.probe" - >/dev/null 2>&1; then
  rm -f "$out.probe"
  # the checks tests/fuzz/ubsan.supp names are recoverable, only so that it can suppress known
  # findings at their place; the targets set halt_on_error=1, so any other report of those checks
  # still stops them (fuzz_util.h), and every other check stops them anyway
  recover=$(sed -n 's/^\([a-z-]*\):.*/\1/p' tests/fuzz/ubsan.supp | sort -u | paste -sd, -)
  exec "$cc" -std=gnu11 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all ${recover:+-fsanitize-recover=$recover} \
    -DFUZZ_UBSAN_SUPP="\"$(pwd)/tests/fuzz/ubsan.supp\"" -fno-omit-frame-pointer \
    -Wall -Wextra -Werror -pthread -I. $(pkg-config --cflags inih "$blas" libpcre2-8 jansson) -MMD -MF "$dep" -o "$out" "$src" \
    $(pkg-config --libs inih "$blas" libpcre2-8 jansson) -lm -pthread
fi
rm -f "$out.probe"
printf '#!/bin/sh\necho "SKIP: %s was built without libFuzzer: %s -fsanitize=fuzzer does not link here"\nexit 77\n' "$out" "$cc" > "$out"
chmod +x "$out"
echo "$out: $src" > "$dep"
