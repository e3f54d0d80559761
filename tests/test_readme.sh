#!/usr/bin/env bash
# README.md stays true: its key reference is what `mgt keys --markdown` prints from the table in
# mgt.h, its embedding example is tests/example_embed.c (which the suite builds and runs), and no
# relative link of README or docs/ is broken (tests/check_links.py).
# To refresh the table: replace the lines between the keys markers with `./mgt keys --markdown`.
set -u
cd "$(dirname "$0")/.."
status=0
between() { sed -n "/<!-- $1:begin -->/,/<!-- $1:end -->/p" README.md | sed '1d;$d'; }
if diff <(between keys) <(./mgt keys --markdown) > /tmp/mgt_readme_keys.diff; then
  echo "ok - README key reference matches mgt keys --markdown"
else
  echo "FAIL - README key reference is stale:"; cat /tmp/mgt_readme_keys.diff; status=1
fi
if diff <(between embed | sed '1d;$d') tests/example_embed.c > /tmp/mgt_readme_embed.diff; then
  echo "ok - README embedding example is tests/example_embed.c"
else
  echo "FAIL - README embedding example differs from tests/example_embed.c:"; cat /tmp/mgt_readme_embed.diff; status=1
fi
lines=$(wc -l < tests/example_embed.c)
if [ "$lines" -le 30 ]; then echo "ok - the example is $lines lines"; else echo "FAIL - the example is $lines lines"; status=1; fi
# every relative link of README and docs/ leads to a file and a heading; presets' pointers to sections too
if out=$(python3 tests/check_links.py); then echo "ok - $(echo "$out" | tail -1)"
else echo "$out" | sed 's/^FAIL /FAIL - /'; status=1; fi
exit $status
