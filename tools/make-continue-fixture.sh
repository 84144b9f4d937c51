#!/usr/bin/env bash
# make-continue-fixture.sh - tests/fixtures/continue/: a tiny Llama-shaped
# GGUF with random Q8_0 weights and a SentencePiece vocabulary that adds a
# ▁ prefix ("▁t0", "▁t1", ..., the byte tokens; bench/make-bench-gguf.py
# --shape tiny), and what llama.cpp's llama-simple prints for a few
# prompts (greedy, 6 tokens): the prompt's pieces after <s>, then the
# generated ones, whose first ▁ is a space after the prompt.  The bats
# tests check that ml-run and ml-serve's completions continue the same way.
#
#   bash tools/make-continue-fixture.sh LLAMA_BIN_DIR
# LLAMA_BIN_DIR holds llama-simple (bench/llama.sh's build: cmake --build
# build --target llama-simple).
set -euo pipefail
bin=${1:?usage: make-continue-fixture.sh LLAMA_BIN_DIR}
cd "$(dirname "$0")/.."
out=tests/fixtures/continue
mkdir -p "$out"
python3 bench/make-bench-gguf.py "$out/tiny-q8_0.gguf" --shape tiny --type q8_0 --seed 1
: >"$out/llama-simple.tsv"
for prompt in "t5 t9 t13 t21" "t1 t2" "t40" "Hello t3"; do
    text=$("$bin/llama-simple" -m "$out/tiny-q8_0.gguf" -n 6 "$prompt" 2>/dev/null)
    printf '%s\t%s\n' "$prompt" "$text" >>"$out/llama-simple.tsv"
done
