#!/usr/bin/env bats
# ml-serve-spec.bats - ml-serve's speculative decoding (--spec-type
# ngram-simple, and a draft model: -md): every answer is the answer of a
# server without it, bit for bit, whatever the sampler, the fields and the
# other requests beside it; guesses are kept where the text repeats or the
# draft agrees; what the model or the draft cannot take back is served
# plainly, with a warning; a draft of another vocabulary is refused; the
# options' usage errors.
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
    # two quantizations of one model, as a draft and its model
    gguf2mlb -q -o "$BATS_FILE_TMPDIR/q8.mlb" -t "$BATS_FILE_TMPDIR/q8.mlt" \
        "$FIX/models/llama2/llama2-q8_0.gguf"
    gguf2mlb -q -o "$BATS_FILE_TMPDIR/q4.mlb" -t "$BATS_FILE_TMPDIR/q4.mlt" \
        "$FIX/models/llama2/llama2-q4_0.gguf"
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

# metric NAME: the server's llamacpp:NAME now.
metric() {
    curl -s "$URL/metrics" | sed -n "s/^llamacpp:$1 //p"
}

# restart: the two servers of same_answers stopped, for the next call.
restart() {
    stop_server
    kill "$PLAIN_PID" && wait "$PLAIN_PID" || true
    PLAIN_PID=
}

@test "-md: a Q4_0 draft for its Q8_0 model: every answer is the answer without it, requests side by side" {
    local q8=$BATS_FILE_TMPDIR/q8.mlb q4=$BATS_FILE_TMPDIR/q4.mlb drafted accepted
    # the fixture's context is 256 positions
    BODIES=("${BODIES[@]:0:6}" '{"prompt":"Long","max_tokens":230,"temperature":0}')
    local SPEC=(-md "$q4" --spec-draft-n-max 6)
    same_answers -m "$q8" --chat-template llama2 -t 2 --parallel 3
    grep -qx "ml-serve: $q4: draft model, 2 layers, dim 256, context 256, 2 threads" "$BATS_TEST_TMPDIR/spec.log" ||
        fail_with "$(cat "$BATS_TEST_TMPDIR/spec.log")"
    # the draft's guesses are the model's tokens often enough to be kept
    drafted=$(metric draft_tokens_total) accepted=$(metric draft_tokens_accepted_total)
    ((accepted > 0 && accepted < drafted)) || fail_with "guessed $drafted, kept $accepted"
    restart
    SPEC=(--model-draft "$q4" -td 1 --spec-draft-p-min 0.3 --spec-draft-n-min 2)
    same_answers -m "$q8" --chat-template llama2 -t 1 --parallel 2 --cache-type f16
    [[ $(metric draft_tokens_accepted_total) -gt 0 ]] || fail_with "nothing kept"
    restart
    # and the other way round, the larger drafting for the smaller
    SPEC=(-md "$q8" --spec-type draft-simple)
    same_answers -m "$q4" --chat-template llama2 -t 2 --parallel 1
}

@test "-md: the model drafting for itself keeps every greedy guess; its sequences follow the slots" {
    # a trained model (the random one's next token hangs on its last
    # alone, so that a draft out of step would still guess right)
    local m=$BATS_FILE_TMPDIR/q8.mlb drafted accepted i
    BODIES=('{"prompt":"Once upon a time there was","max_tokens":120,"temperature":0}'
        '{"prompt":"The cat","max_tokens":100,"temperature":0}'
        'chat:{"messages":[{"role":"user","content":"Hello there"}],"max_tokens":80,"temperature":0}')
    local SPEC=(-md "$m" --spec-draft-n-max 8)
    same_answers -m "$m" --chat-template llama2 -t 2 --parallel 2
    # and again, the slots' caches (and the draft's) reused and taken back
    for i in "${!BODIES[@]}"; do
        answer "$URL" "${BODIES[$i]}" >/dev/null
    done
    drafted=$(metric draft_tokens_total) accepted=$(metric draft_tokens_accepted_total)
    # no step guesses past max_tokens; a request that ends at an end of
    # generation may have guessed past it (8 at most)
    ((accepted > 300 && drafted - accepted <= 6 * 8)) || fail_with "guessed $drafted, kept $accepted"
}

@test "-md: a draft of a shorter context guesses while a slot's tokens fit it; the answers stay the same" {
    local d=$BATS_TEST_TMPDIR m=$BATS_FILE_TMPDIR/m.mlb
    # another random model of the same vocabulary: its guesses mostly miss
    "$MKMODEL" -o "$d/short.mlb" --seed 5 vocab=32000 wtype=2 scale_f16=1 shared_classifier=1 \
        max_seq=64
    cp "$FIX/tok/llama2.mlt" "$d/short.mlt"
    BODIES=('{"prompt":"Once upon a time there was","max_tokens":150,"temperature":0}'
        '{"prompt":"The cat","max_tokens":120,"temperature":0.8,"seed":4}')
    local SPEC=(-md "$d/short.mlb")
    same_answers -m "$m" --chat-template llama2 --parallel 2 -c 200
    grep -qx "ml-serve: $d/short.mlb: draft model, 2 layers, dim 64, context 64, [0-9]* threads" "$d/spec.log" ||
        fail_with "$(cat "$d/spec.log")"
    [[ $(metric draft_tokens_total) -gt 0 ]] || fail_with "no guesses"
}

@test "-md: sliding windows give the same answers; a linear-attention draft is served plainly, with a warning" {
    local d=$BATS_TEST_TMPDIR
    gguf2mlb -q -o "$d/g8.mlb" -t "$d/g8.mlt" "$FIX/models/gemma3/gemma3-q8_0.gguf"
    gguf2mlb -q -o "$d/g4.mlb" -t "$d/g4.mlt" "$FIX/models/gemma3/gemma3-q4_0.gguf"
    BODIES=('{"prompt":"The cat","max_tokens":150,"temperature":0}'
        '{"prompt":"The dog","max_tokens":100,"temperature":0.9,"seed":11}')
    local SPEC=(-md "$d/g4.mlb")
    same_answers -m "$d/g8.mlb" -c 64 --parallel 2
    restart
    # Qwen3.5's tokens are the Qwen3 fixture's; its layers are linear
    gguf2mlb -q -o "$d/q.mlb" -t "$d/q.mlt" "$FIX/models/qwen3/qwen3-q8_0.gguf"
    gguf2mlb -q -o "$d/l.mlb" -t "$d/l.mlt" "$FIX/models/qwen35/qwen35-q8_0.gguf"
    BODIES=('{"prompt":"The cat","max_tokens":40,"temperature":0}')
    SPEC=(-md "$d/l.mlb")
    same_answers -m "$d/q.mlb"
    grep -qx "ml-serve: $d/l.mlb: --model-draft: the draft model's linear-attention state cannot be taken back; generating without speculation" "$d/spec.log" ||
        fail_with "$(cat "$d/spec.log")"
    [[ $(metric draft_tokens_total) == 0 ]]
    restart
    SPEC=(-md "$d/q.mlb")
    same_answers -m "$d/l.mlb"
    grep -qx "ml-serve: $d/l.mlb: --model-draft: the model's linear-attention state cannot be taken back; generating without speculation" "$d/spec.log" ||
        fail_with "$(cat "$d/spec.log")"
    [[ $(metric draft_tokens_total) == 0 ]]
}

@test "-md: another vocabulary is refused at start-up (1); a missing draft or tokenizer (3)" {
    local d=$BATS_TEST_TMPDIR m=$BATS_FILE_TMPDIR/m.mlb q4=$BATS_FILE_TMPDIR/q4.mlb
    # the model beside Mistral's tokenizer, of 32000 tokens too: it parts
    # from Llama 2's at token 260
    cp "$m" "$d/v.mlb"
    cp "$FIX/tok/mistral.mlt" "$d/v.mlt"
    run -1 --separate-stderr ml-serve -m "$m" --chat-template llama2 --port 0 -md "$d/v.mlb"
    [[ ${stderr_lines[0]} == "ml-serve: $d/v.mlt: ML_E_MISMATCH: tokens (offset 1606): token 260 differs from the other tokenizer's (piece or attribute); a draft model must share the model's vocabulary" ]] ||
        fail_with "${stderr_lines[*]}"
    # another number of logit rows
    run -1 --separate-stderr ml-serve -m "$m" --chat-template llama2 --port 0 -md "$q4"
    [[ ${stderr_lines[0]} == "ml-serve: $q4: ML_E_MISMATCH: the draft model has 384 tokens, the model 32000; a draft model must share the model's vocabulary" ]] ||
        fail_with "${stderr_lines[*]}"
    # another kind of tokenizer under the same model
    cp "$FIX/tok/llama3.mlt" "$d/v.mlt"
    run -1 --separate-stderr ml-serve -m "$m" --chat-template llama2 --port 0 -md "$d/v.mlb"
    [[ ${stderr_lines[0]} == "ml-serve: $d/v.mlt: ML_E_MISMATCH: kind (offset 8): kind 2, the other tokenizer's 1; a draft model must share the model's vocabulary" ]] ||
        fail_with "${stderr_lines[*]}"
    run -3 --separate-stderr ml-serve -m "$m" --chat-template llama2 --port 0 -md "$d/none.mlb"
    [[ ${stderr_lines[0]} == "ml-serve: $d/none.mlb: ML_E_IO: cannot open: No such file or directory" ]] ||
        fail_with "${stderr_lines[*]}"
    cp "$q4" "$d/alone.mlb"
    run -3 --separate-stderr ml-serve -m "$BATS_FILE_TMPDIR/q8.mlb" --chat-template llama2 --port 0 -md "$d/alone.mlb"
    [[ ${stderr_lines[0]} == "ml-serve: $d/alone.mlt: ML_E_IO: cannot open: No such file or directory" ]] ||
        fail_with "${stderr_lines[*]}"
    [[ ${stderr_lines[1]} == "ml-serve: hint: a draft model's tokenizer lies beside it (gguf2mlb -t), to show that it shares the model's vocabulary" ]]
    printf 'not a model' >"$d/junk.mlb"
    run -1 --separate-stderr ml-serve -m "$m" --chat-template llama2 --port 0 -md "$d/junk.mlb"
    [[ ${stderr_lines[0]} == "ml-serve: $d/junk.mlb: ML_E_FORMAT: "* ]] || fail_with "${stderr_lines[*]}"
}

@test "-md: usage errors, exit 2" {
    local m=$BATS_FILE_TMPDIR/m.mlb
    run -2 --separate-stderr ml-serve -m "$m" -md "$m" --spec-type ngram-simple
    [[ ${stderr_lines[0]} == "ml-serve: --model-draft guesses with a model (--spec-type draft-simple), not with --spec-type ngram-simple" ]]
    run -2 --separate-stderr ml-serve -m "$m" --spec-type draft-simple
    [[ ${stderr_lines[0]} == "ml-serve: --spec-type draft-simple needs a draft model (-md FILE)" ]]
    run -2 --separate-stderr ml-serve -m "$m" -td 2
    [[ ${stderr_lines[0]} == "ml-serve: --threads-draft needs a draft model (-md FILE)" ]]
    run -2 --separate-stderr ml-serve -m "$m" --draft-p-min 0.5
    [[ ${stderr_lines[0]} == "ml-serve: --spec-draft-p-min needs a draft model (-md FILE)" ]]
    run -2 --separate-stderr ml-serve -m "$m" -md "$m" --spec-draft-p-min 1.5
    [[ ${stderr_lines[0]} == "ml-serve: --spec-draft-p-min: '1.5' is not a number in [0, 1]" ]]
    run -2 --separate-stderr ml-serve -m "$m" -md "$m" --spec-ngram-simple-size-n 3
    [[ ${stderr_lines[0]} == "ml-serve: --spec-ngram-simple-size-n and -size-m are ngram-simple's, not a draft model's" ]]
    run -2 --separate-stderr ml-serve -m "$m" -md "$m" --spec-draft-n-max 4 --spec-draft-n-min 5
    [[ ${stderr_lines[0]} == "ml-serve: --spec-draft-n-min 5 is above the draft's most, 4" ]]
    run -2 --separate-stderr ml-serve -m "$m" -md "$m" --threads-draft 0
    run -2 --separate-stderr ml-serve -m "$m" -md
    run -0 ml-serve --help
    [[ $output == *"--model-draft FILE"*"(also -md"*"--threads-draft N"*"(also -td"*"--spec-draft-p-min P"* ]] ||
        fail_with "$output"
}
