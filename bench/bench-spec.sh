#!/usr/bin/env bash
# bench-spec.sh - speculative decoding (issue 41) on the real
# SmolLM2-135M-Instruct, ml-run against itself and against llama.cpp's
# same speculation on the same GGUF.  Four tasks: three where text repeats
# (rewrite a code block with one change, quote a passage, continue a
# list) and a free story, where guesses mostly miss and speculation must
# cost little.  Each row: ml-run's plain decode, ml-run --spec-type
# ngram-simple (tokens/s, guessed, kept), llama-speculative-simple
# --spec-type ngram-simple (tokens/s, drafted, accepted), and the ratios.
# Both programs get the same prompt text, greedy sampling, the same n-gram
# sizes and GEN tokens past end-of-generation (--ignore-eos), so they do
# the same number of steps; their texts may differ where the two
# tokenizers or the two programs' rounding part.
#
#   make bench-spec        (or MLCORE_BUILD=build bash bench/bench-spec.sh)
#   LLAMA_BIN=DIR          llama-speculative-simple's directory (else built once, llama.sh)
#   BENCH_DIR=/tmp         where the converted model and the build go
#   THREADS=2 ROUNDS=3 GEN=256 SIZE_N=3 DRAFT_MAX=48
#
# Rounds alternate the programs and the best of each is compared.
#
# Then the same tasks through ml-serve (one stream, /v1/completions, as an
# application sends them; bench-spec-serve.py): plain, --spec-type
# ngram-simple, and -md with SmolLM2's Q4_0 drafting for the same model
# (the mechanics and the acceptance; a draft as costly as its target
# cannot gain), tokens/s and the ratios to plain; the texts must be
# plain's (the script fails otherwise).  SERVE=0 leaves them out.
set -euo pipefail
B=${MLCORE_BUILD:-build}
DIR=${BENCH_DIR:-/tmp}
T=${THREADS:-2}
NG=${GEN:-256}
SN=${SIZE_N:-3}
DMAX=${DRAFT_MAX:-48}
here=$(cd "$(dirname "$0")" && pwd)

# shellcheck source=bench/llama.sh
. "$here/llama.sh"
# shellcheck source=bench/serve.sh
. "$here/serve.sh"

LB=$(llama_bin "$DIR/mlcore-llama.cpp" llama-speculative-simple)
RM=${REAL_MODELS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mlcore-real-models}
MLCORE_BUILD=$B bash "$here/../tools/real-models.sh" --fetch-only >/dev/null
G=$RM/SmolLM2-135M-Instruct.Q4_1.gguf
M=$DIR/mlcore-bench-spec-smollm2.mlb
[ -f "$M" ] || "$B/bin/gguf2mlb" -q -f -o "$M" -t "${M%.mlb}.mlt" "$G"

code='def total(values):
    result = 0
    for value in values:
        if value > 0:
            result += value
        else:
            result -= value
    return result


def average(values):
    if not values:
        return 0
    return total(values) / len(values)


def largest(values):
    best = values[0]
    for value in values[1:]:
        if value > best:
            best = value
    return best
'
passage='The river rises in the hills to the north and runs south through farmland for about forty miles before it reaches the sea. In spring it floods the lower fields, and the farmers plant late. In summer it is slow and warm, and children swim in it below the old mill. In autumn the leaves turn it brown, and in winter it sometimes freezes at the edges.'
prompts=(
    "Here is a Python module:

$code
Here is the same module with the function total renamed to absolute_sum, everything else unchanged:

"
    "$passage

Question: What does the text say about the river in each season? Answer by quoting the text.
Answer: \"The river rises"
    "A list of fruits:
1. apple
2. banana
3. cherry
4. date
5. elderberry
6. fig
7. grape
8. honeydew
9. kiwi
10. lemon
The same list, written again:
1."
    "Once upon a time, in a small village by the sea, there lived"
)
names=(code quote list story)

best() { printf '%s\n' "$@" | sort -g | tail -1; }

printf 'threads %s, %s tokens a task, n-gram %s, at most %s guesses a step\n' "$T" "$NG" "$SN" "$DMAX"
printf '%-6s %9s %9s %13s %9s %13s %10s %10s\n' task plain spec kept/guessed llama acc/drafted spec/plain spec/llama
for i in "${!prompts[@]}"; do
    p=${prompts[$i]}
    pl=() sp=() ll=() kept='' acc=''
    for _ in $(seq "${ROUNDS:-3}"); do
        line=$("$B/bin/ml-run" -m "$M" -p "$p" -n "$NG" --ignore-eos --temp 0 -t "$T" 2>&1 >/dev/null | tail -1)
        pl+=("$(echo "$line" | sed -n 's/.*generation [0-9]* tokens, \([0-9.]*\) tokens\/s.*/\1/p')")
        out=$("$B/bin/ml-run" -m "$M" -p "$p" -n "$NG" --ignore-eos --temp 0 -t "$T" \
            --spec-type ngram-simple --spec-ngram-simple-size-n "$SN" --spec-draft-n-max "$DMAX" 2>&1 >/dev/null)
        sp+=("$(echo "$out" | sed -n 's/.*generation [0-9]* tokens, \([0-9.]*\) tokens\/s.*/\1/p' | tail -1)")
        kept=$(echo "$out" | sed -n 's/.*speculation: \([0-9]*\) tokens guessed, \([0-9]*\) kept.*/\2\/\1/p')
        out=$("$LB/llama-speculative-simple" -m "$G" -p "$p" -n "$NG" --ignore-eos --temp 0 -t "$T" \
            --spec-type ngram-simple --spec-ngram-simple-size-n "$SN" --spec-draft-n-max "$DMAX" 2>&1 || true)
        ll+=("$(echo "$out" | sed -n 's/.*decoded *[0-9]* tokens in .* speed: *\([0-9.]*\) t\/s.*/\1/p')")
        acc=$(echo "$out" | awk '/n_accept/ {a=$NF} /n_drafted/ {d=$NF} END {print a "/" d}')
    done
    bp=$(best "${pl[@]}") bs=$(best "${sp[@]}") bl=$(best "${ll[@]}")
    printf '%-6s %9.2f %9.2f %13s %9.2f %13s %10.2f %10.2f\n' "${names[$i]}" "$bp" "$bs" "$kept" \
        "$bl" "$acc" "$(awk -v a="$bs" -v b="$bp" 'BEGIN{print a/b}')" \
        "$(awk -v a="$bs" -v b="$bl" 'BEGIN{print (b > 0 ? a/b : 0)}')"
done

[ "${SERVE:-1}" = 0 ] && exit 0
D=$DIR/mlcore-bench-spec-smollm2-q4_0.mlb
[ -f "$D" ] || "$B/bin/gguf2mlb" -q -f --wtype q4_0 -o "$D" -t "${D%.mlb}.mlt" "$G"
tasks=()
for i in "${!prompts[@]}"; do
    printf '%s' "${prompts[$i]}" >"$DIR/mlcore-bench-spec-${names[$i]}.txt"
    tasks+=("${names[$i]}=$DIR/mlcore-bench-spec-${names[$i]}.txt")
done
# serve NAME OPTION...: ml-serve with the options, the tasks through it;
# its lines and texts in mlcore-bench-spec-serve-NAME.log.out and .texts.
serve() {
    local port log="$DIR/mlcore-bench-spec-serve-$1.log"
    shift
    port=$(free_port)
    "$B/bin/ml-serve" -m "$M" -t "$T" --parallel 1 --host 127.0.0.1 --port "$port" "$@" >"$log" 2>&1 &
    local pid=$!
    wait_health "http://127.0.0.1:$port" "$pid" "$log"
    python3 "$here/bench-spec-serve.py" "http://127.0.0.1:$port" --gen "$NG" --rounds "${ROUNDS:-3}" \
        "${tasks[@]}" >"$log.out" 2>"$log.texts" || { kill "$pid"; return 1; }
    kill "$pid"
    wait "$pid" 2>/dev/null || true
}
serve plain
serve ngram --spec-type ngram-simple --spec-ngram-simple-size-n "$SN" --spec-draft-n-max "$DMAX"
serve draft -md "$D"
for v in ngram draft; do
    cmp -s "$DIR/mlcore-bench-spec-serve-plain.log.texts" "$DIR/mlcore-bench-spec-serve-$v.log.texts" || {
        echo "bench-spec: ml-serve's texts with $v speculation differ from plain's" >&2
        exit 1
    }
done
tps() { awk -v k="$2" '$1 == k { print $2 }' "$DIR/mlcore-bench-spec-serve-$1.log.out"; }
printf '\nml-serve, one stream (the texts are plain'"'"'s, checked)\n'
printf '%-6s %9s %9s %9s %11s %11s\n' task plain ngram draft ngram/plain draft/plain
for n in "${names[@]}"; do
    p=$(tps plain "$n") g=$(tps ngram "$n") d=$(tps draft "$n")
    printf '%-6s %9.2f %9.2f %9.2f %11.2f %11.2f\n' "$n" "$p" "$g" "$d" \
        "$(awk -v a="$g" -v b="$p" 'BEGIN{print a/b}')" "$(awk -v a="$d" -v b="$p" 'BEGIN{print a/b}')"
done
