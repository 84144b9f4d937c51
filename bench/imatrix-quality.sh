#!/usr/bin/env bash
# imatrix-quality.sh - does an importance matrix win back Q4_0's quality, and
# is ours as good as llama.cpp's?  On SmolLM2-135M-Instruct (its public
# GGUF, Q4_1), with public texts on every Debian system: the imatrix corpus
# is five licenses from /usr/share/common-licenses (GPL-2, LGPL-2.1,
# Apache-2.0, MPL-2.0, Artistic), the evaluation text another (GPL-3).
#
# Rows, each from the same source GGUF, every perplexity measured by
# `ml-run --perplexity --ctx 512` (llama-perplexity's scheme) so only the
# weights differ:
#   mlcore  Q8_0                 ml-quant --wtype q8_0
#   mlcore  Q4_0                 ml-quant --wtype q4_0 --q8-mask none
#   mlcore  Q4_0 + imatrix       the same with ml-imatrix's matrix
#   llama   Q4_0                 llama-quantize --pure Q4_0, then gguf2mlb
#                                (a bit-exact copy of its Q4_0 blocks)
#   llama   Q4_0 + imatrix       the same with llama-imatrix's matrix
# and, for the record, llama-perplexity on llama.cpp's own two GGUFs.
# Both importance matrices are collected with the same 8-bit model (the
# source requantized to Q8_0) over the same corpus, in 512-token chunks.
#
#   make bench-imatrix     (or MLCORE_BUILD=build bash bench/imatrix-quality.sh)
#   LLAMA_BIN=DIR          a llama.cpp build (llama-imatrix, llama-quantize,
#                          llama-perplexity); without it, built once like
#                          bench-run.sh does.
#   THREADS=N              default: the number of CPUs
#   REUSE=1                keep the models and matrices of an earlier run
#                          (in $BENCH_DIR/mlcore-imatrix) and only measure
set -euo pipefail
B=$(cd "${MLCORE_BUILD:-build}" && pwd)
DIR=${REAL_MODELS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mlcore-real-models}
T=${THREADS:-$(nproc)}
WORK=${BENCH_DIR:-/tmp}/mlcore-imatrix
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$WORK"

MLCORE_BUILD=$B bash "$here/../tools/real-models.sh" --fetch-only >/dev/null
SRC=$DIR/SmolLM2-135M-Instruct.Q4_1.gguf

. "$here/llama.sh"
L=$(llama_bin "$WORK/llama.cpp" llama-imatrix llama-quantize llama-perplexity)

L_=/usr/share/common-licenses
cat $L_/GPL-2 $L_/LGPL-2.1 $L_/Apache-2.0 $L_/MPL-2.0 $L_/Artistic >"$WORK/corpus.txt"
cp $L_/GPL-3 "$WORK/eval.txt"
cd "$WORK"

q() { "$@" >/dev/null 2>"$WORK/last.log" || { cat "$WORK/last.log" >&2; exit 1; }; }
# mk OUT CMD...: runs CMD, which writes OUT, unless REUSE is set and OUT exists.
mk() { local out=$1; shift; [[ -n ${REUSE:-} && -s $out ]] || q "$@"; }

# The 8-bit model both collectors run, and the tokenizer.
mk smol-q8_0.mlb "$B/bin/ml-quant" "$SRC" --wtype q8_0 -o smol-q8_0.mlb -f -q -t "$T"
mk smol.mlt "$B/bin/gguf2mlb" "$SRC" -o tok-only.mlb -t smol.mlt -f -q
mk smol-q8_0.gguf "$L/llama-quantize" --allow-requantize "$SRC" smol-q8_0.gguf Q8_0 "$T"

echo "collecting (mlcore) ..." >&2
mk ours.mli "$B/bin/ml-imatrix" -m smol-q8_0.mlb -k smol.mlt -f corpus.txt -c 512 -t "$T" -o ours.mli
echo "collecting (llama.cpp) ..." >&2
mk llama.imatrix.gguf "$L/llama-imatrix" -m smol-q8_0.gguf -f corpus.txt -c 512 -t "$T" -o llama.imatrix.gguf \
    --no-ppl

echo "quantizing ..." >&2
mk ours-q4_0.mlb "$B/bin/ml-quant" "$SRC" --wtype q4_0 --q8-mask none -o ours-q4_0.mlb -f -q -t "$T"
mk ours-q4_0-im.mlb "$B/bin/ml-quant" "$SRC" --wtype q4_0 --q8-mask none --imatrix ours.mli -o ours-q4_0-im.mlb \
    -f -q -t "$T"
mk llama-q4_0.gguf "$L/llama-quantize" --allow-requantize --pure "$SRC" llama-q4_0.gguf Q4_0 "$T"
mk llama-q4_0-im.gguf "$L/llama-quantize" --allow-requantize --pure --imatrix llama.imatrix.gguf "$SRC" \
    llama-q4_0-im.gguf Q4_0 "$T"
for f in llama-q4_0 llama-q4_0-im; do
    mk "$f.mlb" "$B/bin/gguf2mlb" "$f.gguf" -o "$f.mlb" --no-tokenizer -f -q
done

ppl() { # MODEL.mlb: ml-run's perplexity of eval.txt
    "$B/bin/ml-run" -m "$1" -k smol.mlt --perplexity eval.txt -c 512 -t "$T" -q 2>/dev/null |
        sed -n 's/.*PPL = \([0-9.]*\) +\/- \([0-9.]*\).*/\1 \2/p'
}
lppl() { # MODEL.gguf: llama-perplexity's
    "$L/llama-perplexity" -m "$1" -f eval.txt -c 512 -t "$T" 2>&1 |
        sed -n 's/.*Final estimate: PPL = \([0-9.]*\) +\/- \([0-9.]*\).*/\1 \2/p'
}

base=$(ppl smol-q8_0.mlb | cut -d' ' -f1)
printf '%-30s %10s %9s %9s\n' "SmolLM2-135M, eval GPL-3" "PPL" "+/-" "vs Q8_0"
row() { printf '%-30s %10s %9s %+8.2f%%\n' "$1" "$2" "$3" \
    "$(echo "$2 $base" | awk '{ print ($1 / $2 - 1) * 100 }')"; }
row "mlcore Q8_0" $(ppl smol-q8_0.mlb)
row "mlcore Q4_0" $(ppl ours-q4_0.mlb)
row "mlcore Q4_0 + imatrix" $(ppl ours-q4_0-im.mlb)
row "llama.cpp Q4_0" $(ppl llama-q4_0.mlb)
row "llama.cpp Q4_0 + imatrix" $(ppl llama-q4_0-im.mlb)
row "  (llama-perplexity) Q4_0" $(lppl llama-q4_0.gguf)
row "  (llama-perplexity) + imatrix" $(lppl llama-q4_0-im.gguf)
