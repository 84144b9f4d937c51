#!/usr/bin/env bash
# make-embed-fixture.sh - tests/fixtures/embed/: llama.cpp's llama-embedding
# on the Qwen 3-shaped fixture (tests/fixtures/models/qwen3/qwen3-q8_0.gguf)
# for each pooling, L2-normalized as llama-server's /v1/embeddings sends
# them; ml-serve's /v1/embeddings must agree (tests/cli/ml-serve.bats).
#
#   bash tools/make-embed-fixture.sh LLAMA_BIN_DIR
# LLAMA_BIN_DIR holds llama-embedding (bench/llama.sh's build: cmake --build
# build --target llama-embedding).
set -euo pipefail
bin=${1:?usage: make-embed-fixture.sh LLAMA_BIN_DIR}
cd "$(dirname "$0")/.."
gguf=tests/fixtures/models/qwen3/qwen3-q8_0.gguf
out=tests/fixtures/embed
mkdir -p "$out"
texts=("Hello world, this is a test." "The quick brown fox jumps over the lazy dog" "x")
for pooling in mean cls last; do
    for i in "${!texts[@]}"; do
        # llama-embedding's asynchronous log sometimes loses its output: retry
        for _ in 1 2 3 4 5 6 7 8; do
            json=$("$bin/llama-embedding" -m "$gguf" -p "${texts[$i]}" --pooling "$pooling" \
                   --embd-normalize 2 --embd-output-format json --log-file /dev/null 2>/dev/null | cat)
            [[ -n $json ]] && break
        done
        [[ -n $json ]] || { echo "llama-embedding printed nothing" >&2; exit 1; }
        jq -c --arg t "${texts[$i]}" '{input: $t, embedding: .data[0].embedding}' <<<"$json"
    done >"$out/qwen3-q8_0-$pooling.jsonl"
done
