#!/usr/bin/env bash
# Installs what mgt needs on Debian when it is missing, builds it, and prepares the quick-start data
# (the text of Debian's `fortunes` package, byte-tokenized into data/quickstart_{train,val}.bin).
#   ./setup.sh            everything
#   ./setup.sh --no-data  packages and build only (CI)
set -euo pipefail
cd "$(dirname "$0")"

packages="gcc g++ clang ninja-build pkg-config libinih-dev libopenblas-dev libncurses-dev python3 tmux fortunes"
missing=()
for p in $packages; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

ninja

if [ "${1:-}" != "--no-data" ] && [ ! -s data/quickstart_train.bin ]; then
  # fortune text files only: not the .dat indexes, not the .u8 duplicates
  mapfile -t texts < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | sort)
  ./mgt prepare --tokenizer byte "${texts[@]}" -o data/quickstart
fi
