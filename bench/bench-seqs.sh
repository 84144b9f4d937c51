#!/usr/bin/env bash
# bench-seqs.sh - aggregate decode tokens/s of 1, 2, 4 and 8 sequences
# decoding side by side (bench/bench-seqs.c: one ml_ctx_eval_seqs call per
# step with a token of every sequence), and the ratio to one sequence.
# Builds bench-seqs against an already built libmlcore.a.
#
#   make bench-seqs                       (or bash bench/bench-seqs.sh)
#   MODEL=m.mlb      the model; default: a TinyLlama-1.1B-shaped Q4_0 model
#                    with random weights (bench/make-bench-gguf.py, needs
#                    numpy and gguf), made once in BENCH_DIR
#   BENCH_DIR=/tmp   THREADS=2 PROMPT=32 GEN=64 ROUNDS=3 MAXSEQ=8
# The model is copied to /dev/shm first when it has room, so that the page
# cache cannot drop pages of it between steps.  Each run prints the load
# average: on a shared machine a number taken under load is not a speed.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${MLCORE_BUILD:-build}
DIR=${BENCH_DIR:-/tmp}
if [ ! -f "$B/libmlcore.a" ]; then
    echo "bench-seqs.sh: $B/libmlcore.a is missing; run make first" >&2
    exit 1
fi
"${CC:-cc}" -O2 -std=c11 -Wall -Wextra -Iinclude bench/bench-seqs.c "$B/libmlcore.a" \
    -lutf8proc -ldeflate -lz -lm -lpthread -o "$B/bench-seqs"
m=${MODEL:-}
if [ -z "$m" ]; then
    . bench/llama.sh
    bench_model "$DIR" tinyllama q4_0
fi
run=$m
shm=/dev/shm/mlcore-bench-seqs.mlb
if [ -d /dev/shm ] && [ "$(df -Pk /dev/shm | awk 'NR == 2 { print $4 }')" -gt $(( $(stat -c %s "$m") / 1024 * 2 )) ]; then
    cp "$m" "$shm" && run=$shm
    trap 'rm -f "$shm"' EXIT
fi
"$B/bench-seqs" "$run" -t "${THREADS:-2}" -p "${PROMPT:-32}" -g "${GEN:-64}" -r "${ROUNDS:-3}" \
    -s "${MAXSEQ:-8}"
