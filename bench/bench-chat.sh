#!/usr/bin/env bash
# bench-chat.sh - what a chat turn costs before the model runs: the 10
# messages of bench/chat-conversation.json rendered through real templates and encoded with the
# messages kept text (ml_chat_render_json + ml_chat_encode), next to Python
# jinja2 + tokenizers (transformers' apply_chat_template), best and first
# of RUNS, the ratio of the bests, and whether the ids are the same.
#
#   MLCORE_BUILD=build bash bench/bench-chat.sh
#   TOKENIZERS=/path/to/testdata/tokenizers RUNS=200 BENCH_DIR=/tmp ...
#
# Needs python3 with jinja2 and tokenizers.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
B=${MLCORE_BUILD:-build}
DIR=${BENCH_DIR:-/tmp}
RUNS=${RUNS:-200}
TOK=${TOKENIZERS:-/work/shared/testdata/tokenizers}
FIX="$here/../tests/fixtures"
tool="$DIR/mlcore-bench-chat"

${CC:-cc} -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -I"$here/../include" "$here/bench-chat.c" \
    "$B/libmlcore.a" -lutf8proc -ldeflate -lz -lm -lpthread -o "$tool"
special() {
    local id
    id=$("$B/bin/mlt-dump" --json "$1" | jq ".$2")
    if [ "$id" -ge 0 ]; then "$B/bin/mlt-dump" --decode "$1" "$id"; fi
}
printf 'bench/chat-conversation.json (system + 9 turns), %s runs\n\n' "$RUNS"
printf '%-10s %-36s %6s %10s %10s %10s %10s %7s  %s\n' tokenizer template ids "ms best" "ms first" \
    "py best" "py first" ratio "same ids"
for pair in qwen3:Qwen-Qwen2.5-7B-Instruct llama3_1:meta-llama-Llama-3.1-8B-Instruct \
    gemma3:google-gemma-3-1b-it; do
    t=${pair%%:*} tpl="$FIX/chat/templates/${pair#*:}.jinja"
    # transformers passes the BOS and EOS pieces, as ml-run --chat does
    jq --arg bos "$(special "$FIX/tok/$t.mlt" bos)" --arg eos "$(special "$FIX/tok/$t.mlt" eos)" \
        '. + {add_generation_prompt: true, bos_token: $bos, eos_token: $eos}' \
        "$here/chat-conversation.json" >"$DIR/mlcore-bench-chat.json"
    read -r cb cf cn ch < <("$tool" "$FIX/tok/$t.mlt" "$tpl" "$DIR/mlcore-bench-chat.json" "$RUNS")
    read -r pb pf pn ph < <(python3 "$here/bench-chat.py" "$TOK/$t/tokenizer.json" "$tpl" \
        "$DIR/mlcore-bench-chat.json" "$RUNS")
    same=yes
    [ "$cn $ch" = "$pn $ph" ] || same="NO ($pn ids)"
    awk -v t="$t" -v tp="${pair#*:}" -v n="$cn" -v cb="$cb" -v cf="$cf" -v pb="$pb" -v pf="$pf" \
        -v same="$same" 'BEGIN { printf "%-10s %-36s %6d %10.3f %10.3f %10.3f %10.3f %6.1fx  %s\n",
        t, tp, n, cb * 1e3, cf * 1e3, pb * 1e3, pf * 1e3, pb / cb, same }'
done
