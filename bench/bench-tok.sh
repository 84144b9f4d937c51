#!/usr/bin/env bash
# bench-tok.sh - encoding throughput of the tokenizer (MB/s, one thread) on
# about 3.5 MB of mixed English, C code and CJK text, side by side with the
# Python tokenizers package (the Hugging Face Rust library, the reference)
# on the same vocabulary, and the ratio.  Both count only the encoding
# (files loaded first), best of RUNS; the ids are compared (count and an
# FNV-1a checksum) and the last column says whether they are the same.
#
#   MLCORE_BUILD=build bash bench/bench-tok.sh
#   TOKENIZERS=/path/to/testdata/tokenizers RUNS=3 BENCH_DIR=/tmp ...
#
# Needs python3 with the tokenizers package, and the tokenizer.json files
# of /work/shared/testdata/tokenizers (or TOKENIZERS).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
B=${MLCORE_BUILD:-build}
DIR=${BENCH_DIR:-/tmp}
RUNS=${RUNS:-3}
TOK=${TOKENIZERS:-/work/shared/testdata/tokenizers}
FIX="$here/../tests/fixtures/tok"
corpus="$DIR/mlcore-bench-tok.txt"
tool="$DIR/mlcore-bench-tok"

${CC:-cc} -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -I"$here/../include" "$here/bench-tok.c" \
    "$B/libmlcore.a" -lutf8proc -ldeflate -lz -lm -lpthread -o "$tool"
python3 "$here/bench-tok.py" corpus "$corpus"
size=$(stat -c %s "$corpus")
printf 'corpus: %s bytes of English, C and CJK text; %s runs, best time\n\n' "$size" "$RUNS"
printf '%-10s %10s %10s %10s %10s %8s  %s\n' tokenizer ids "mlcore s" "MB/s" "HF MB/s" ratio "same ids"
for t in llama3_1 qwen3 gemma3 mistral llama2; do
    read -r cs cn cf < <("$tool" "$FIX/$t.mlt" "$corpus" "$RUNS")
    read -r hs hn hf < <(RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false \
        python3 "$here/bench-tok.py" hf "$TOK/$t/tokenizer.json" "$corpus")
    same=yes
    [ "$cn $cf" = "$hn $hf" ] || same="NO ($hn ids)"
    awk -v t="$t" -v n="$cn" -v cs="$cs" -v hs="$hs" -v sz="$size" -v same="$same" 'BEGIN {
        printf "%-10s %10d %10.3f %10.2f %10.2f %7.1fx  %s\n", t, n, cs, sz / cs / 1e6, sz / hs / 1e6, hs / cs, same }'
done
