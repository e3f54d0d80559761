#!/usr/bin/env bash
# Runs the whole suite (`ninja test` builds everything first) and ends with one line:
# "N passed, N failed" (", N skipped" when a test exits 77 because optional data is absent).
set -u
cd "$(dirname "$0")/.."
mkdir -p build/logs/asan build/logs/tsan build/testdata

# a small generated corpus for tests that train from a preset (no download, no shared data)
if [ ! -s build/testdata/tiny_train.bin ]; then
  python3 - > build/testdata/tiny.txt <<'PY' || exit 1
import random
random.seed(7)
words = "the cat sat on a mat and the dog ran far away then it slept under an old tree by the river".split()
print("\n".join(" ".join(random.choice(words) for _ in range(12)) + "." for _ in range(6000)))
PY
  ./mgt prepare --tokenizer byte build/testdata/tiny.txt -o build/testdata/tiny > build/logs/prepare.log 2>&1 || { cat build/logs/prepare.log; exit 1; }
fi

# the oneDNN library (bf16 GEMMs), rebuilt against this mgt.h where oneDNN is installed, and opened
# by the sanitized builds too (they live in build/asan and build/tsan, where it is not beside them)
if [ -f /usr/include/oneapi/dnnl/dnnl.h ]; then
  ninja -j1 onednn > build/logs/onednn.log 2>&1 || { cat build/logs/onednn.log; exit 1; }
  export MGT_ONEDNN_LIBRARY=$PWD/build/libmgt_onednn.so
fi

passed=0 failed=0 skipped=0
run() { # name, command...
  local name=$1; shift
  local log=build/logs/$name.log start end rc
  start=$(date +%s.%N)
  "$@" > "$log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  local secs; secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  if [ $rc -eq 0 ]; then passed=$((passed + 1)); printf 'PASS %-28s %6ss\n' "$name" "$secs"
  elif [ $rc -eq 77 ]; then skipped=$((skipped + 1)); printf 'SKIP %-28s %6ss  %s\n' "$name" "$secs" "$(grep -m1 SKIP "$log")"
  else failed=$((failed + 1)); printf 'FAIL %-28s %6ss  (exit %d, log %s)\n' "$name" "$secs" "$rc" "$log"; tail -n 25 "$log" | sed 's/^/    /'
  fi
}

for t in build/test_*; do
  name=${t#build/}
  case $name in
    test_embed) run "$name" "$t" tests/presets/embed.ini ;;
    test_layouts_cuda) run "$name" "$t" --quick --once ;; # the whole CUDA matrix: ninja layouts_full
    *) run "$name" "$t" ;;
  esac
done
# the sanitized layout matrix runs its quick subset (smaller shapes, fewer steps)
sanitized_args() { case $1 in test_layouts) echo --quick --lean ;; test_sim) echo --quick ;; test_layouts_cuda) echo --quick --once --no-kv ;; esac; }
for t in build/asan/test_*; do [ -x "$t" ] && run "asan/${t#build/asan/}" "$t" $(sanitized_args "${t#build/asan/}"); done
for t in build/tsan/test_*; do [ -x "$t" ] && run "tsan/${t#build/tsan/}" "$t" $(sanitized_args "${t#build/tsan/}"); done
for t in tests/test_*.sh; do [ -x "$t" ] && run "${t#tests/}" "$t"; done

echo "$passed passed, $failed failed$([ $skipped -gt 0 ] && echo ", $skipped skipped")"
[ $failed -eq 0 ]
