#!/usr/bin/env bash
# eog-reference.sh - llama.cpp's end-of-generation (EOG) ids of every
# vocabulary fixture, the reference tests/cli/eog.bats holds gguf2mlb's
# chat section to.  Each tests/fixtures/vocab/*.gguf.gz is loaded by
# llama.cpp's llama-tokenize, which reads the vocabulary only (no weights),
# and the ids of the "print_info: EOG token = ID 'TEXT'" lines it logs at
# load are kept: llama-vocab.cpp's final set (EOS, EOT, EOM, the end-marker
# texts and fill-in-middle tokens, after its corrections), in increasing
# order.  The script rewrites tests/fixtures/vocab/eog.tsv: comment lines,
# then one row per fixture, its file name, a tab, and the ids
# comma-separated.  Run it from anywhere, then review with git diff:
#
#   tools/eog-reference.sh                 llama.cpp built once by bench/llama.sh
#                                          in $BENCH_DIR/mlcore-llama.cpp (/tmp)
#   LLAMA_BIN=DIR tools/eog-reference.sh   DIR holds a built llama-tokenize
#
# Needs gzip and llama.cpp (or what bench/llama.sh needs to build it);
# mlcore itself is not used.  The table is written only when every fixture
# loaded and gave at least one id.
set -euo pipefail
export LC_ALL=C
root=$(cd "$(dirname "$0")/.." && pwd)
vocab=$root/tests/fixtures/vocab
out=$vocab/eog.tsv

. "$root/bench/llama.sh"
bin=$(llama_bin "${BENCH_DIR:-/tmp}/mlcore-llama.cpp" llama-tokenize)
tok=$bin/llama-tokenize
if [[ ! -x $tok ]]; then
    echo "eog-reference.sh: no llama-tokenize in $bin" >&2
    exit 1
fi
if ! version=$("$tok" --version 2>&1); then
    echo "eog-reference.sh: $tok --version failed: $version" >&2
    exit 1
fi
version=${version%%$'\n'*}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

{
    echo "# eog.tsv - llama.cpp's end-of-generation ids of each vocabulary fixture here:"
    echo "# fixture, tab, the ids comma-separated in increasing order.  Written by"
    echo "# tools/eog-reference.sh from llama-tokenize's load log (do not edit; rerun"
    echo "# it); tests/cli/eog.bats checks that gguf2mlb --tokenizer-only writes"
    echo "# exactly these ids.  Every row is llama.cpp's output as printed; none is"
    echo "# corrected by hand."
    echo "# llama.cpp: $version"
} >"$tmp/eog.tsv"

n=0
for gz in "$vocab"/*.gguf.gz; do
    name=$(basename "$gz")
    gzip -dc "$gz" >"$tmp/v.gguf"
    # -lv 4: llama.cpp's info lines (the default threshold hides them)
    if ! "$tok" -m "$tmp/v.gguf" -p hi -lv 4 --no-log-timestamps --log-colors off \
        >"$tmp/log" 2>&1; then
        echo "eog-reference.sh: llama-tokenize cannot load $name:" >&2
        tail -n 5 "$tmp/log" >&2
        exit 1
    fi
    ids=$(sed -n "s/^.*print_info: EOG token *= \([0-9][0-9]*\) '.*$/\1/p" "$tmp/log" |
        sort -n | paste -sd, -)
    if [[ -z $ids ]]; then
        echo "eog-reference.sh: $name: llama-tokenize printed no EOG token line" >&2
        exit 1
    fi
    printf '%s\t%s\n' "$name" "$ids" >>"$tmp/eog.tsv"
    n=$((n + 1))
done

mv "$tmp/eog.tsv" "$out"
echo "eog-reference.sh: $n fixtures -> ${out#"$root"/}" >&2
