#!/usr/bin/env bats
# ml-serve-spec.bats - ml-serve's speculative decoding (--spec-type
# ngram-simple): every answer is the answer of a server without it, bit
# for bit, whatever the sampler, the fields and the other requests beside
# it; guesses are kept where the text repeats; what the model cannot take
# back is served plainly, with a warning; the options' usage errors.
bats_require_minimum_version 1.5.0
load helpers
load serve

FIX="$BATS_TEST_DIRNAME/../fixtures"
SPEC=(--spec-type ngram-simple --spec-ngram-simple-size-n 2 --spec-draft-n-max 8)

setup_file() {
    command -v curl >/dev/null || skip "needs curl"
    [[ -x $MLCORE_BUILD/bin/ml-serve ]] || skip "ml-serve is not built here"
    "$MKMODEL" -o "$BATS_FILE_TMPDIR/m.mlb" --seed 3 vocab=32000 wtype=2 scale_f16=1 \
        shared_classifier=1 max_seq=512
    cp "$FIX/tok/llama2.mlt" "$BATS_FILE_TMPDIR/m.mlt"
}

teardown() {
    [[ -n ${SERVER_PID:-} ]] && stop_server
    [[ -n ${PLAIN_PID:-} ]] && kill "$PLAIN_PID" 2>/dev/null && wait "$PLAIN_PID"
    return 0
}

# The requests: completions and chats, greedy and sampled, penalties,
# several choices with log-probabilities, a stop string, a grammar, a
# context that fills.
BODIES=(
    '{"prompt":"Once upon a time there was","max_tokens":150,"temperature":0}'
    '{"prompt":"The cat","max_tokens":100,"temperature":0.7,"seed":5,"presence_penalty":0.5,"frequency_penalty":0.3,"n":2,"logprobs":2}'
    '{"prompt":"A B C","max_tokens":120,"temperature":1.3,"seed":9,"top_k":0,"top_p":1,"min_p":0}'
    '{"prompt":"x","max_tokens":200,"temperature":0,"stop":["zz"],"logit_bias":{"13":-2}}'
    'chat:{"messages":[{"role":"user","content":"Hello there"}],"max_tokens":90,"temperature":0.9,"seed":3}'
    'chat:{"messages":[{"role":"user","content":"Give me JSON"}],"max_tokens":60,"temperature":0,"response_format":{"type":"json_object"}}'
    '{"prompt":"Long","max_tokens":600,"temperature":0}'
)

# answer URL BODY: the choices' texts, log-probabilities and finish reasons.
answer() {
    local url=$1 body=$2 ep=/v1/completions
    if [[ $body == chat:* ]]; then
        ep=/v1/chat/completions body=${body#chat:}
    fi
    curl -s "$url$ep" -H 'Content-Type: application/json' --data-binary "$body" |
        jq -c '[.choices[] | (.text // .message.content), .logprobs, .finish_reason]'
}

# same_answers ARGS...: a server with ARGS and speculation answers every
# request of BODIES, sent at once, as a server with ARGS alone answers
# them one by one.
same_answers() {
    local d=$BATS_TEST_TMPDIR i pids=()
    start_server "$d/plain.log" "$@"
    local plain=$URL
    PLAIN_PID=$SERVER_PID
    start_server "$d/spec.log" "$@" "${SPEC[@]}"
    for i in "${!BODIES[@]}"; do
        answer "$URL" "${BODIES[$i]}" >"$d/spec$i" &
        pids+=($!)
    done
    wait "${pids[@]}"
    for i in "${!BODIES[@]}"; do
        answer "$plain" "${BODIES[$i]}" >"$d/plain$i"
        [[ -s $d/plain$i && $(cat "$d/plain$i") != "[]" ]] || fail_with "no answer to ${BODIES[$i]}"
        cmp -s "$d/spec$i" "$d/plain$i" ||
            fail_with "$* ${BODIES[$i]}: with speculation $(cat "$d/spec$i") / without $(cat "$d/plain$i")"
    done
}

@test "--spec-type ngram-simple: every answer is the answer without it, requests side by side" {
    local m=$BATS_FILE_TMPDIR/m.mlb
    same_answers -m "$m" --chat-template llama2 -t 2 --parallel 3
    # the random model repeats itself: most guesses are kept
    local drafted accepted
    drafted=$(curl -s "$URL/metrics" | sed -n 's/^llamacpp:draft_tokens_total //p')
    accepted=$(curl -s "$URL/metrics" | sed -n 's/^llamacpp:draft_tokens_accepted_total //p')
    ((accepted > 200 && accepted <= drafted)) || fail_with "guessed $drafted, kept $accepted"
    stop_server
    kill "$PLAIN_PID" && wait "$PLAIN_PID" || true
    PLAIN_PID=
    same_answers -m "$m" --chat-template llama2 -t 1 --parallel 1 --cache-type f16
    [[ $(curl -s "$URL/metrics" | sed -n 's/^llamacpp:draft_tokens_accepted_total //p') -gt 0 ]]
}

@test "--spec-type: a sliding window gives the same answers; linear attention is served plainly, with a warning" {
    local d=$BATS_TEST_TMPDIR
    gguf2mlb -q -o "$d/g.mlb" -t "$d/g.mlt" "$FIX/models/gemma3/gemma3-q8_0.gguf"
    BODIES=('{"prompt":"The cat","max_tokens":150,"temperature":0}'
        '{"prompt":"The dog","max_tokens":100,"temperature":0.9,"seed":11}')
    same_answers -m "$d/g.mlb" -c 64 --parallel 2
    stop_server
    kill "$PLAIN_PID" && wait "$PLAIN_PID" || true
    PLAIN_PID=
    gguf2mlb -q -o "$d/l.mlb" -t "$d/l.mlt" "$FIX/models/qwen35/qwen35-q8_0.gguf"
    BODIES=('{"prompt":"The cat","max_tokens":60,"temperature":0}')
    same_answers -m "$d/l.mlb"
    grep -qx "ml-serve: $d/l.mlb: --spec-type: the model's linear-attention state cannot be taken back; generating without speculation" "$d/spec.log" ||
        fail_with "$(cat "$d/spec.log")"
    [[ $(curl -s "$URL/metrics" | sed -n 's/^llamacpp:draft_tokens_total //p') == 0 ]]
}

@test "--spec-type: usage errors, exit 2" {
    local m=$BATS_FILE_TMPDIR/m.mlb
    run -2 --separate-stderr ml-serve -m "$m" --spec-type draft
    [[ ${stderr_lines[0]} == "ml-serve: --spec-type: 'draft' is not supported (ngram-simple and draft-simple are)" ]]
    run -2 --separate-stderr ml-serve -m "$m" --spec-draft-n-max 4
    [[ ${stderr_lines[0]} == "ml-serve: --spec-draft-n-max, --spec-draft-n-min and --spec-ngram-simple-* need --spec-type" ]]
    run -2 --separate-stderr ml-serve -m "$m" --spec-type ngram-simple --spec-draft-n-max 4 --spec-draft-n-min 5
    [[ ${stderr_lines[0]} == "ml-serve: --spec-draft-n-min 5 is above the draft's most, 4" ]]
    run -2 --separate-stderr ml-serve -m "$m" --spec-type ngram-simple --spec-ngram-simple-size-n 0
    [[ ${stderr_lines[0]} == "ml-serve: --spec-ngram-simple-size-n: 0 is outside 1..1024" ]] ||
        fail_with "${stderr_lines[0]}"
}
