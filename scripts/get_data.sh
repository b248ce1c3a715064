#!/usr/bin/env bash
# Downloads the public text corpora that the docs' examples use into data/ (git-ignored):
#
#   data/tinyshakespeare.txt   tinyshakespeare (Karpathy's char-rnn, about 1.1 MB)
#
# Usage: bash scripts/get_data.sh        (from anywhere; files go to data/ at the repository root)
# A file that is already there is kept. Needs curl or wget. Without network access it says what to use
# instead and exits with status 1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

url="https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
out="data/tinyshakespeare.txt"

if [[ -s "$out" ]]; then
  echo "get_data.sh: $out is already there ($(wc -c <"$out") bytes); delete it to download it again"
  exit 0
fi

no_corpus() {
  cat >&2 <<EOF
get_data.sh: could not download $url
  ($1)
Without it, use instead:
  * any UTF-8 text file of about 1 MB or more, e.g. a book from Project Gutenberg saved as plain text:
      build/tools/fbt train --data path/to/book.txt ...
    (paragraphs separated by blank lines become documents; see docs/training.md, section 4), or
  * a built-in task, which needs no file:
      build/tools/fbt train --data task:addition ...
    (also task:state_tracking, task:multihop, task:running_sum, task:permutation, task:brackets).
EOF
  exit 1
}

mkdir -p data
tmp="$out.tmp"
trap 'rm -f "$tmp"' EXIT
if command -v curl >/dev/null 2>&1; then
  curl -fsSL --connect-timeout 20 --retry 2 -o "$tmp" "$url" || no_corpus "curl failed: no network access, or the address did not answer"
elif command -v wget >/dev/null 2>&1; then
  wget -q --timeout=20 --tries=3 -O "$tmp" "$url" || no_corpus "wget failed: no network access, or the address did not answer"
else
  no_corpus "neither curl nor wget is installed"
fi
if [[ ! -s "$tmp" ]]; then
  no_corpus "the download was empty"
fi
mv "$tmp" "$out"
echo "get_data.sh: wrote $out ($(wc -c <"$out") bytes)"
