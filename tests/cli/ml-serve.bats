#!/usr/bin/env bats
# ml-serve.bats - the HTTP server through curl and jq: every endpoint, the
# shapes of OpenAI's answers (whole and streamed), the request fields,
# every refusal with its status and error object, the API key, the limits
# (body, headers, idle connections, context), slots (queue, prefix reuse,
# a client that leaves, results independent of concurrency) and a clean
# shutdown.  One server for most tests, started in setup_file on a port
# the system picks; tests that need other options start their own.
bats_require_minimum_version 1.5.0
load helpers
load serve

FIX="$BATS_TEST_DIRNAME/../fixtures"

setup_file() {
    command -v curl >/dev/null || skip "needs curl"
    [[ -x $MLCORE_BUILD/bin/ml-serve ]] || skip "ml-serve is not built here"
    # The Llama 2 tokenizer (32000 ids) on a tiny random model.
    "$MKMODEL" -o "$BATS_FILE_TMPDIR/m.mlb" --seed 3 vocab=32000 wtype=2 scale_f16=1 \
        shared_classifier=1 max_seq=256
    cp "$FIX/tok/llama2.mlt" "$BATS_FILE_TMPDIR/m.mlt"
    # A long context, for requests that must still run while others arrive.
    "$MKMODEL" -o "$BATS_FILE_TMPDIR/long.mlb" --seed 3 vocab=32000 wtype=2 scale_f16=1 \
        shared_classifier=1 max_seq=4096
    cp "$FIX/tok/llama2.mlt" "$BATS_FILE_TMPDIR/long.mlt"
    start_server "$BATS_FILE_TMPDIR/log" -m "$BATS_FILE_TMPDIR/m.mlb" -t 1 --parallel 2 \
        --chat-template llama2
    export URL SERVER_PID
}

teardown_file() {
    [[ -n ${SERVER_PID:-} ]] && stop_server
}

CHAT='{"messages":[{"role":"user","content":"Hello there"}],"max_tokens":12,"temperature":0}'

# ---------------------------------------------------------------- command line

@test "--help, --version, usage errors" {
    run -0 ml-serve --help
    [[ ${lines[0]} == "Usage: ml-serve -m MODEL.mlb [options]" ]]
    has_line '^ +--parallel N +slots' "${lines[@]}"
    has_line '^ +--api-key KEY +require' "${lines[@]}"
    run -0 ml-serve --version
    [[ $output == "ml-serve (mlcore) 0.1.0" ]]
    run -2 --separate-stderr ml-serve
    [[ ${stderr_lines[0]} == "ml-serve: no model given (-m MODEL.mlb)" ]]
    run -2 --separate-stderr ml-serve -m x.mlb --port 70000
    run -2 --separate-stderr ml-serve -m x.mlb --chat-template a --chat-template-file b
    run -3 --separate-stderr ml-serve -m "$BATS_TEST_TMPDIR/none.mlb"
    [[ ${stderr_lines[0]} == "ml-serve: $BATS_TEST_TMPDIR/none.mlb: ML_E_IO: cannot open"* ]]
}

@test "--cache-type f16 (and -ctk, -ctv): served; an unknown type is a usage error; q8_0 and q4_0 need heads of 32" {
    run -2 --separate-stderr ml-serve -m "$BATS_FILE_TMPDIR/m.mlb" --cache-type q4_1
    [[ ${stderr_lines[0]} == "ml-serve: --cache-type: unknown cache type 'q4_1' (expected f32, f16, q8_0 or q4_0)" ]]
    run -2 --separate-stderr ml-serve -m "$BATS_FILE_TMPDIR/m.mlb" -ctv f64
    [[ ${stderr_lines[0]} == "ml-serve: --cache-type-v: unknown cache type 'f64' (expected f32, f16, q8_0 or q4_0)" ]]
    run -4 --separate-stderr ml-serve -m "$BATS_FILE_TMPDIR/m.mlb" -ctv q8_0
    [[ ${stderr_lines[0]} == "ml-serve: $BATS_FILE_TMPDIR/m.mlb: ML_E_UNSUPPORTED: --cache-type-v q8_0: head_dim: 16 (dim / n_heads) is not a multiple of 32, as the blocks of a q8_0 cache need (f16 or f32 fit it)" ]]
    run -0 ml-serve --help
    has_line '^ +--cache-type TYPE +KV cache keys and values: f32 \(default\), f16, q8_0 or q4_0$' "${lines[@]}"
    local body='{"prompt":"Once upon a time","max_tokens":6,"temperature":0}' a b
    start_server "$BATS_TEST_TMPDIR/log" -m "$BATS_FILE_TMPDIR/m.mlb" -t 1 --cache-type f16
    a=$(post /v1/completions "$body")
    b=$(post /v1/completions "$body")
    jq -e '.choices[0].text | length > 0' <<<"$a"
    [[ $(jq .choices <<<"$a") == "$(jq .choices <<<"$b")" ]]
    stop_server
    start_server "$BATS_TEST_TMPDIR/log2" -m "$BATS_FILE_TMPDIR/m.mlb" -t 1 -ctk f16 -ctv f16
    b=$(post /v1/completions "$body")
    [[ $(jq .choices <<<"$a") == "$(jq .choices <<<"$b")" ]]
    stop_server
    # heads of 32: q8_0 keys, q4_0 values, the same text twice, and at 2 threads
    "$MKMODEL" -o "$BATS_TEST_TMPDIR/h32.mlb" --seed 3 vocab=32000 wtype=2 scale_f16=1 \
        shared_classifier=1 max_seq=256 head_dim=32
    cp "$FIX/tok/llama2.mlt" "$BATS_TEST_TMPDIR/h32.mlt"
    start_server "$BATS_TEST_TMPDIR/log3" -m "$BATS_TEST_TMPDIR/h32.mlb" -t 1 -ctk q8_0 -ctv q4_0
    a=$(post /v1/completions "$body")
    b=$(post /v1/completions "$body")
    jq -e '.choices[0].text | length > 0' <<<"$a"
    [[ $(jq .choices <<<"$a") == "$(jq .choices <<<"$b")" ]]
    stop_server
    start_server "$BATS_TEST_TMPDIR/log4" -m "$BATS_TEST_TMPDIR/h32.mlb" -t 2 --cache-type-k q8_0 \
        --cache-type-v q4_0
    b=$(post /v1/completions "$body")
    [[ $(jq .choices <<<"$a") == "$(jq .choices <<<"$b")" ]]
    stop_server
}

# think MLB TEMPLATE FORMAT LOG: a server with that chat template and --reasoning-format.
think_server() {
    start_server "$4" -m "$1" -k "$FIX/tok/qwen3.mlt" -t 1 --chat-template-file \
        "$FIX/chat/templates/$2.jinja" --reasoning-format "$3"
}

# A random model with Qwen 3's vocabulary, made to draw among <think>
# (151667), </think> (151668), "Hi" and " there" (logit_bias, seeded
# sampling): the same text through --reasoning-format none is the
# reference for the split.
@test "reasoning: a think block goes to reasoning_content, whole and streamed; chat_template_kwargs reach the template" {
    local d=$BATS_TEST_TMPDIR
    "$MKMODEL" -o "$d/q.mlb" --seed 5 vocab=151669 wtype=2 scale_f16=1 shared_classifier=1 max_seq=256
    local bias='"logit_bias":{"151667":63,"151668":60,"13048":60,"1052":60}' tmpl raw split i
    for tmpl in Qwen-Qwen3-0.6B deepseek-ai-DeepSeek-R1-Distill-Qwen-32B; do
        think_server "$d/q.mlb" "$tmpl" none "$d/log-none"
        local none_url=$URL none_pid=$SERVER_PID
        think_server "$d/q.mlb" "$tmpl" deepseek "$d/log-ds"
        local reasoned=0
        for i in 1 2 3 4 5 6 7 8; do
            local body="{\"messages\":[{\"role\":\"user\",\"content\":\"Q\"}],\"max_tokens\":10,\"temperature\":2,\"seed\":$i,$bias"
            # (this R1 template opens the think block only with enable_thinking)
            [[ $tmpl == deepseek* ]] && body+=',"chat_template_kwargs":{"enable_thinking":true}'
            raw=$(URL=$none_url post /v1/chat/completions "$body}" | jq -r .choices[0].message.content)
            split=$(post /v1/chat/completions "$body}")
            # the reference: text up to </think> (after an opening <think>,
            # or from the start when the template opened the block), then the rest
            local want_r= want_c=$raw open=0
            [[ $tmpl == deepseek* ]] && open=1
            local t=$raw
            if ((open)) || [[ $t == "<think>"* ]]; then
                ((open)) || t=${t#<think>}
                if [[ $t == *"</think>"* ]]; then
                    want_r=${t%%"</think>"*} want_c=${t#*"</think>"}
                else
                    want_r=$t want_c=
                fi
                want_r=${want_r#"${want_r%%[![:space:]]*}"} want_c=${want_c#"${want_c%%[![:space:]]*}"}
                jq -e --arg r "$want_r" --arg c "$want_c" \
                    '.choices[0].message | .reasoning_content == $r and .content == $c' <<<"$split" ||
                    fail_with "$tmpl: raw '$raw': $(jq -c .choices[0].message <<<"$split")"
                reasoned=$((reasoned + 1))
            else
                jq -e --arg c "$raw" '.choices[0].message | .content == $c and (has("reasoning_content") | not)' <<<"$split" ||
                    fail_with "$tmpl: raw '$raw': $(jq -c .choices[0].message <<<"$split")"
            fi
            # streamed: the deltas add up to the same two parts
            run -0 post /v1/chat/completions "$body,\"stream\":true}" -N
            local ev
            ev=$(grep '^data: {' <<<"$output" | sed 's/^data: //')
            [[ $(jq -sj 'map(.choices[0].delta.reasoning_content // empty) | add // ""' <<<"$ev") == \
               "$(jq -j '.choices[0].message.reasoning_content // ""' <<<"$split")" ]] || fail_with "stream: $ev"
            [[ $(jq -sj 'map(.choices[0].delta.content // empty) | add // ""' <<<"$ev") == \
               "$(jq -j .choices[0].message.content <<<"$split")" ]] || fail_with "stream: $ev"
        done
        stop_server
        SERVER_PID=$none_pid stop_server
        ((reasoned >= 2)) || [[ $tmpl == deepseek* ]] || fail_with "$tmpl: $reasoned of 8 had a think block"
    done
    # enable_thinking reaches Qwen 3's template: false writes an empty think block into the prompt
    think_server "$d/q.mlb" Qwen-Qwen3-0.6B deepseek "$d/log-kw"
    local m='"messages":[{"role":"user","content":"Hi"}],"max_tokens":1'
    local a b
    a=$(post /v1/chat/completions "{$m}" | jq .usage.prompt_tokens)
    b=$(post /v1/chat/completions "{$m,\"chat_template_kwargs\":{\"enable_thinking\":false}}" | jq .usage.prompt_tokens)
    ((b > a)) || fail_with "prompt tokens $a without, $b with enable_thinking false"
    stop_server
    run -2 --separate-stderr ml-serve -m "$d/q.mlb" --reasoning-format r1
    [[ ${stderr_lines[0]} == "ml-serve: --reasoning-format: unknown format 'r1' (expected deepseek, auto or none)" ]]
}

@test "structured output: response_format json_object and llama-server's grammar hold the text to them" {
    local i out m='"messages":[{"role":"user","content":"Give me JSON"}]'
    for i in 1 2 3 4 5; do
        out=$(post /v1/chat/completions "{$m,\"max_tokens\":60,\"temperature\":1.2,\"seed\":$i,\"response_format\":{\"type\":\"json_object\"}}")
        # a whole object when the model ended it; always the start of one
        if [[ $(jq -r .choices[0].finish_reason <<<"$out") == stop ]]; then
            jq -e '.choices[0].message.content | fromjson | type == "object"' <<<"$out" ||
                fail_with "seed $i: $out"
        else
            [[ $(jq -r .choices[0].message.content <<<"$out") == "{"* ]] || fail_with "seed $i: $out"
        fi
    done
    # streamed: the same text
    local whole streamed body="{$m,\"max_tokens\":40,\"temperature\":1.2,\"seed\":2,\"response_format\":{\"type\":\"json_object\"}"
    whole=$(post /v1/chat/completions "$body}" | jq -j .choices[0].message.content)
    streamed=$(post /v1/chat/completions "$body,\"stream\":true}" -N | sed -n 's/^data: {/{/p' |
               jq -sj 'map(.choices[0].delta.content // empty) | add')
    [[ $streamed == "$whole" ]]
    # a grammar on a completion: the text continues the prompt, its first space included
    local g='root ::= " yes" | " no"'
    for i in 1 2 3 4; do
        out=$(post /v1/completions "$(jq -n --arg g "$g" --argjson s "$i" '{prompt: "Is it", max_tokens: 5, temperature: 1.5, seed: $s, grammar: $g}')")
        [[ $(jq -r .choices[0].text <<<"$out") =~ ^\ (yes|no)$ ]] || fail_with "seed $i: $out"
    done
    # n choices, each with a grammar of its own
    post /v1/chat/completions "{$m,\"max_tokens\":3,\"n\":3,\"seed\":1,\"temperature\":1,\"grammar\":\"root ::= [0-9]+\"}" |
        jq -e '[.choices[].message.content | test("^[0-9]+$")] == [true, true, true]'
    refused 400 grammar invalid_grammar "{$m,\"grammar\":\"root ::= x\"}"
    jq -e '.error.message | test("line 1, column 10")' "$BATS_TEST_TMPDIR/body"
    refused 400 grammar invalid_grammar "$(jq -nc --argjson m "[{\"role\":\"user\",\"content\":\"Hi\"}]" '{messages: $m, grammar: "root ::= root \"a\""}')"
    refused 400 grammar invalid_type "{$m,\"grammar\":5}"
    refused 400 grammar invalid_value "{$m,\"grammar\":\"root ::= [a]\",\"response_format\":{\"type\":\"json_object\"}}"
    refused 400 response_format invalid_value "{$m,\"response_format\":{\"type\":\"xml\"}}"
    refused 400 response_format invalid_type "{$m,\"response_format\":\"json\"}"
    # json_schema: the schema as a grammar (make check-json-schema validates
    # a corpus with the jsonschema package; here the shape with jq)
    local schema='{"type":"object","properties":{"ok":{"type":"boolean"},"n":{"type":"integer"},"c":{"enum":["x","y"]}},"required":["ok","c"]}'
    for i in 1 2 3 4; do
        out=$(post /v1/chat/completions "{$m,\"max_tokens\":60,\"temperature\":1,\"seed\":$i,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"t\",\"strict\":true,\"schema\":$schema}}}")
        jq -e '.choices[0].finish_reason == "stop" and (.choices[0].message.content | fromjson |
               (.ok | type) == "boolean" and (.c == "x" or .c == "y") and
               ((has("n") | not) or (.n | type) == "number") and (keys - ["ok", "n", "c"]) == [])' <<<"$out" ||
            fail_with "seed $i: $out"
    done
    local bad
    for bad in '{"type":"string","pattern":"a+"}' '{"type":"string","format":"email"}' \
        '{"type":"object","minProperties":1}' '{"allOf":[{"type":"string"}]}' '{"$ref":"#/$defs/none"}' \
        '{"type":"object","properties":{},"required":["a"]}' '{"type":"thing"}' \
        '{"type":"array","minItems":3,"maxItems":2}' '{"type":"string","maxLength":5000}'; do
        refused 400 response_format invalid_schema "{$m,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a\",\"schema\":$bad}}}"
    done
    # the message names the keyword's place
    refused 400 response_format invalid_schema "{$m,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a\",\"schema\":{\"properties\":{\"a\":{\"type\":\"string\",\"format\":\"email\"}}}}}}"
    jq -e '.error.message == "Invalid value for '"'"'response_format'"'"': json_schema: #/properties/a/format: the format '"'"'email'"'"' is not supported (date, time, date-time and uuid are)"' "$BATS_TEST_TMPDIR/body"
    refused 400 response_format invalid_type "{$m,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a\",\"schema\":[1]}}}"
    refused 400 response_format invalid_type "{$m,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":5}}"
    jq -e '.error.message | test("json_schema")' "$BATS_TEST_TMPDIR/body"
    refused 400 grammar invalid_value "{$m,\"grammar\":\"root ::= [a]\",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a\",\"schema\":{}}}}"
    # a schema nested past the cap
    local deep='{"type":"boolean"}'
    for i in $(seq 70); do deep="{\"type\":\"array\",\"items\":$deep}"; done
    refused 400 response_format invalid_schema "{$m,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a\",\"schema\":$deep}}}"
}

@test "n: choices drawn as requests of their own with seed, seed + 1, ...; whole and streamed" {
    local body='{"prompt":"Once upon a time","max_tokens":6,"temperature":1,"seed":5'
    run -0 post /v1/completions "$body,\"n\":3}"
    local whole=$output i
    jq -e '[.choices[].index] == [0,1,2] and .usage.prompt_tokens == 5 and
           .usage.completion_tokens == 18 and ([.choices[].finish_reason] | unique) == ["length"]' <<<"$whole"
    for i in 0 1 2; do
        [[ $(post /v1/completions "${body/5/$((5 + i))}}" | jq .choices[0].text) == "$(jq ".choices[$i].text" <<<"$whole")" ]]
    done
    (($(jq '[.choices[].text] | unique | length' <<<"$whole") == 3))
    # streamed: each index's deltas add up to the whole answer's choice
    run -0 post /v1/completions "$body,\"n\":3,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" -N
    local events
    events=$(grep '^data: {' <<<"$output" | sed 's/^data: //')
    [[ $(jq -sc 'map(.choices[]?) | group_by(.index) | map(map(.text) | add)' <<<"$events") == \
       "$(jq -c '[.choices[].text]' <<<"$whole")" ]]
    jq -se 'map(select(.usage)) | length == 1 and .[0].usage.completion_tokens == 18' <<<"$events"
    [[ $(tail -n 2 <<<"$output" | head -1) == "data: [DONE]" ]] || [[ $(tail -n 1 <<<"$output") == "data: [DONE]" ]]
    # chat: a role chunk and a finish chunk per choice
    run -0 post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"temperature":1,"seed":9,"n":2,"stream":true}' -N
    events=$(grep '^data: {' <<<"$output" | sed 's/^data: //')
    jq -se '[.[].choices[] | select(.delta.role == "assistant") | .index] == [0,1] and
            ([.[].choices[] | select(.finish_reason) | .index] | sort) == [0,1]' <<<"$events"
    run -0 post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"temperature":1,"seed":9,"n":2}'
    jq -e '(.choices | length) == 2 and .choices[1].index == 1 and (.choices[1].message.content | type) == "string"' <<<"$output"
}

# Several prompts in one completion (OpenAI's array of strings or of
# token-id arrays; lm-evaluation-harness batches so): P x n choices, choice
# p x n + j continuing prompt p, each the one-prompt request with seed +
# its index; usage counts each prompt once, as vLLM does.
@test "several prompts: P x n choices, each the one-prompt request's with seed + its index; whole, streamed, ids" {
    local body='"max_tokens":4,"temperature":1,"seed":5' prompts='["Once upon a time","Hello there"]'
    run -0 post /v1/completions "{\"prompt\":$prompts,$body,\"n\":2}"
    local whole=$output p j one prompt_tokens=0 completion_tokens=0
    jq -e '[.choices[].index] == [0,1,2,3] and .object == "text_completion"' <<<"$whole"
    for p in 0 1; do
        for j in 0 1; do
            one=$(post /v1/completions "{\"prompt\":$(jq -c ".[$p]" <<<"$prompts"),${body/5/$((5 + 2 * p + j))}}")
            jq -e --argjson w "$whole" --argjson i $((2 * p + j)) \
                '$w.choices[$i] == (.choices[0] | .index = $i)' <<<"$one" ||
                fail_with "choice $((2 * p + j)): $(jq -c ".choices[$((2 * p + j))]" <<<"$whole"), alone: $one"
            ((j == 0)) && prompt_tokens=$((prompt_tokens + $(jq .usage.prompt_tokens <<<"$one")))
            completion_tokens=$((completion_tokens + $(jq .usage.completion_tokens <<<"$one")))
        done
    done
    jq -e --argjson p $prompt_tokens --argjson c $completion_tokens \
        '.usage == {prompt_tokens: $p, completion_tokens: $c, total_tokens: ($p + $c)} and $p == 8' <<<"$whole"
    (($(jq '[.choices[].text] | unique | length' <<<"$whole") == 4))
    # streamed: every chunk names one choice; each index's deltas add up to the whole's
    run -0 post /v1/completions "{\"prompt\":$prompts,$body,\"n\":2,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" -N
    local events
    events=$(grep '^data: {' <<<"$output" | sed 's/^data: //')
    jq -se --argjson w "$whole" 'map(select(.usage == null) | .choices | length) | all(. == 1)' <<<"$events"
    [[ $(jq -sc 'map(.choices[]?) | group_by(.index) | map(map(.text) | add)' <<<"$events") == \
       "$(jq -c '[.choices[].text]' <<<"$whole")" ]]
    jq -se --argjson w "$whole" 'map(select(.usage)) | length == 1 and .[0].usage == $w.usage' <<<"$events"
    # the same prompts as token-id arrays (BOS included, as the tokenizer adds it)
    local a b
    a=$(post /tokenize '{"content":"Once upon a time","add_special":true}' | jq -c .tokens)
    b=$(post /tokenize '{"content":"Hello there","add_special":true}' | jq -c .tokens)
    run -0 post /v1/completions "{\"prompt\":[$a,$b],$body,\"n\":2}"
    jq -e --argjson w "$whole" '.choices == $w.choices and .usage == $w.usage' <<<"$output"
    # an array holding one prompt is that prompt
    run -0 post /v1/completions "{\"prompt\":[\"Hello there\"],${body/5/7}}"
    jq -e --argjson w "$whole" '.choices == [$w.choices[2] | .index = 0]' <<<"$output"
}

# lm-evaluation-harness's local-completions scoring a batch: echo,
# logprobs, max_tokens 0; each choice equals its prompt's request alone.
@test "several prompts with echo, logprobs and max_tokens 0: each the one-prompt request's scores" {
    local prompts='["Once upon a time","Hello there, said the fox"]' score='"max_tokens":0,"echo":true,"logprobs":3'
    run -0 post /v1/completions "{\"prompt\":$prompts,$score}"
    local whole=$output p one sum=0
    jq -e '[.choices[].index] == [0,1] and .usage.completion_tokens == 0' <<<"$whole"
    for p in 0 1; do
        one=$(post /v1/completions "{\"prompt\":$(jq -c ".[$p]" <<<"$prompts"),$score}")
        jq -e --argjson w "$whole" --argjson i $p '$w.choices[$i] == (.choices[0] | .index = $i) and
            $w.choices[$i].text == ($w.choices[$i].logprobs.tokens | add | ltrimstr("<s>") | ltrimstr(" "))' <<<"$one" ||
            fail_with "prompt $p: $(jq -c ".choices[$p]" <<<"$whole"), alone: $one"
        sum=$((sum + $(jq .usage.prompt_tokens <<<"$one")))
    done
    jq -e --argjson s $sum '.usage.prompt_tokens == $s and .usage.total_tokens == $s' <<<"$whole"
    # with generated tokens and n 2, streamed: each choice's first chunk is its own prompt's echo
    run -0 post /v1/completions "{\"prompt\":$prompts,\"max_tokens\":2,\"temperature\":0,\"echo\":true,\"n\":2,\"stream\":true}" -N
    grep '^data: {' <<<"$output" | sed 's/^data: //' | jq -se --argjson p "$prompts" '
        [.[].choices[]] | group_by(.index) | map(.[0].text) == [$p[0], $p[0], $p[1], $p[1]]'
}

@test "several prompts: an empty array, mixed kinds, an empty prompt, ids out of range, too many: 400" {
    local many
    refused 400 prompt invalid_value '{"prompt":[]}' /v1/completions
    refused 400 prompt invalid_type '{"prompt":["a",[1,2]]}' /v1/completions
    refused 400 prompt invalid_type '{"prompt":[[1,2],"a"]}' /v1/completions
    refused 400 prompt invalid_type '{"prompt":["a",5]}' /v1/completions
    refused 400 prompt invalid_type '{"prompt":[["a"]]}' /v1/completions
    refused 400 prompt invalid_type '{"prompt":[[1],[2,1.5]]}' /v1/completions
    refused 400 prompt invalid_value '{"prompt":["a",""]}' /v1/completions
    refused 400 prompt invalid_value '{"prompt":[""]}' /v1/completions
    refused 400 prompt invalid_value '{"prompt":[[1,2],[]]}' /v1/completions
    refused 400 prompt invalid_value '{"prompt":[[1,2],[1,32000]]}' /v1/completions
    refused 400 prompt invalid_value '{"prompt":[[1,2],[-1]]}' /v1/completions
    many=$(jq -nc '[range(65) | "a"]')
    refused 400 prompt invalid_value "{\"prompt\":$many}" /v1/completions
    jq -e '.error.message == "Invalid value for '\''prompt'\'': expected at most 64 prompts."' "$BATS_TEST_TMPDIR/body"
    refused 400 n invalid_value "{\"prompt\":$(jq -nc '[range(5) | "a"]'),\"n\":13}" /v1/completions
    jq -e '.error.message | startswith("Invalid value for '\''n'\'': 5 prompts with n = 13 make 65 choices")' "$BATS_TEST_TMPDIR/body"
    # the limits themselves are served
    run -0 post /v1/completions "{\"prompt\":$(jq -nc '[range(64) | "a"]'),\"max_tokens\":1}"
    jq -e '[.choices[].index] == [range(64)]' <<<"$output"
    run -0 post /v1/completions "{\"prompt\":$(jq -nc '[range(4) | "a"]'),\"n\":16,\"max_tokens\":1}"
    jq -e '(.choices | length) == 64' <<<"$output"
    # a prompt too long for the context, second of two: named by its index
    refused 400 prompt context_length_exceeded "{\"prompt\":[\"a\",\"$(printf 'word %.0s' {1..300})\"]}" /v1/completions
    jq -e '.error.message | startswith("Prompt 1 has ")' "$BATS_TEST_TMPDIR/body"
}

@test "logprobs: the generated tokens' log-probabilities, whole and streamed, chat and completion" {
    local body='{"prompt":"Once upon a time","max_tokens":6,"temperature":0,"logprobs":3'
    run -0 post /v1/completions "$body}"
    local whole=$output
    # greedy: each token is its step's most likely one; 3 alternatives,
    # sorted; the text is the tokens' texts at their offsets
    jq -e '.choices[0] as $c | $c.logprobs as $l |
        ($l.tokens | length) == 6 and ($l.tokens | add) == $c.text and
        $l.text_offset == ([0] + [foreach $l.tokens[] as $t (0; . + ($t | utf8bytelength); .)])[:6] and
        ([range(6) | $l.top_logprobs[.] | to_entries | length == 3 and
                     (map(.value) | . == (sort | reverse)) and all(.[]; .value <= 0)] | all) and
        ([range(6) | $l.token_logprobs[.] == ($l.top_logprobs[.] | to_entries | .[0].value)] | all)' <<<"$whole"
    jq -e '.choices[0].logprobs.text_offset[0] == 0' <<<"$whole"
    # the first token's against ml-run's logits for the same prompt (log-softmax of the last row)
    ml-run -m "$BATS_FILE_TMPDIR/m.mlb" -p "Once upon a time" -n 0 -q --logits "$BATS_TEST_TMPDIR/l"
    local ref
    ref=$(od -An -v -f -w4 "$BATS_TEST_TMPDIR/l" | tail -n 32000 |
          awk '{ v[NR] = $1; if (NR == 1 || $1 > m) m = $1 } END { for (i in v) s += exp(v[i] - m); printf "%.6f", -log(s) }')
    jq -e --argjson r "$ref" '(.choices[0].logprobs.token_logprobs[0] - $r) | fabs < 1e-4' <<<"$whole" ||
        fail_with "ml-run's logits give $ref: $(jq -c .choices[0].logprobs.token_logprobs <<<"$whole")"
    # streamed: the same entries, spread over the chunks
    run -0 post /v1/completions "$body,\"stream\":true}" -N
    local streamed
    streamed=$(grep '^data: {' <<<"$output" | sed 's/^data: //' | jq -sc 'map(.choices[0].logprobs // empty | .tokens) | add')
    [[ $streamed == "$(jq -c .choices[0].logprobs.tokens <<<"$whole")" ]] || fail_with "streamed $streamed, whole $whole"
    # chat: OpenAI's content entries, top_logprobs as objects
    run -0 post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"temperature":0,"logprobs":true,"top_logprobs":2}'
    jq -e '.choices[0].logprobs as $l | ($l.content | length) == 4 and $l.refusal == null and
        ([$l.content[] | (.token | type) == "string" and (.bytes | length) == (.token | utf8bytelength) and
          (.top_logprobs | length) == 2 and .top_logprobs[0].logprob == .logprob] | all) and
        ([$l.content[].token] | add) == .choices[0].message.content' <<<"$output"
    run -0 post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"temperature":0,"logprobs":true,"stream":true}' -N
    [[ $(grep '^data: {' <<<"$output" | sed 's/^data: //' | jq -sc 'map(.choices[0].logprobs // empty | .content[] | .top_logprobs) | unique') == '[[]]' ]]
    # the logits as the model gave them: a banned token keeps its log-probability
    # (the greedy text repeats one token: the last of its encoding)
    run -0 post /tokenize "{\"content\":$(jq .choices[0].text <<<"$whole")}"
    local id
    id=$(jq '.tokens[-1]' <<<"$output")
    run -0 post /v1/completions "$body,\"max_tokens\":1,\"logit_bias\":{\"$id\":-100}}"
    jq -e --argjson w "$whole" '.choices[0].logprobs.token_logprobs[0] < $w.choices[0].logprobs.token_logprobs[0] and
        .choices[0].logprobs.top_logprobs[0] == $w.choices[0].logprobs.top_logprobs[0]' <<<"$output"
    local m='"messages":[{"role":"user","content":"Hi"}]'
    refused 400 top_logprobs invalid_value "{$m,\"top_logprobs\":2}"
    refused 400 top_logprobs invalid_value "{$m,\"logprobs\":true,\"top_logprobs\":21}"
    refused 400 logprobs invalid_type "{$m,\"logprobs\":1}"
    refused 400 logprobs invalid_value '{"prompt":"a","logprobs":21}' /v1/completions
    refused 400 logprobs invalid_type '{"prompt":"a","logprobs":"5"}' /v1/completions
}

# Drawn at temperature 2 from every token, most tokens are not among
# their step's 2 most likely: the legacy completions API "will always
# return the logprob of the sampled token", so an entry then has 3; a
# chat's top_logprobs stay exactly top_logprobs long.
@test "logprobs N: a completion's top_logprobs add the sampled token (up to N+1), a chat's stay N" {
    local hot='"max_tokens":8,"temperature":2,"top_k":0,"top_p":1,"min_p":0,"seed":11'
    run -0 post /v1/completions "{\"prompt\":\"Once upon a time\",$hot,\"logprobs\":2}"
    local whole=$output
    jq -e '.choices[0].logprobs as $l | [range(8) | $l.top_logprobs[.] as $t | $l.tokens[.] as $k |
          $t[$k] == $l.token_logprobs[.] and
          (($t | length) == 2 or (($t | length) == 3 and ($t | keys_unsorted[2]) == $k and
                                  ($t | [.[]] | .[2] <= (.[:2] | min))))] | all and
        ([range(8) | $l.top_logprobs[.] | length] | any(. == 3))' <<<"$whole" ||
        fail_with "$(jq -c .choices[0].logprobs <<<"$whole")"
    # streamed: the same entries
    run -0 post /v1/completions "{\"prompt\":\"Once upon a time\",$hot,\"logprobs\":2,\"stream\":true}" -N
    [[ $(grep '^data: {' <<<"$output" | sed 's/^data: //' | jq -sc 'map(.choices[0].logprobs // empty | .top_logprobs[]) ') == \
       "$(jq -c .choices[0].logprobs.top_logprobs <<<"$whole")" ]]
    # logprobs 0: the sampled token alone
    run -0 post /v1/completions "{\"prompt\":\"Once upon a time\",$hot,\"logprobs\":0}"
    jq -e '.choices[0].logprobs as $l | [range(8) | $l.top_logprobs[.] == {($l.tokens[.]): $l.token_logprobs[.]}] | all' <<<"$output"
    # a chat's: exactly 2, the sampled token missing from some
    run -0 post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],$hot,\"logprobs\":true,\"top_logprobs\":2}"
    jq -e '.choices[0].logprobs.content as $c | ($c | length) == 8 and
        ([$c[] | (.top_logprobs | length) == 2] | all) and
        ([$c[] | .token as $k | [.top_logprobs[].token] | index($k) == null] | any)' <<<"$output"
}

# ref_logprobs LOGITS "ID ID ...": each token after the first, its
# log-probability under ml-run's row of the token before it (the
# log-softmax of the 32000 logits of that position), one a line.
ref_logprobs() {
    od -An -v -f -w128000 "$1" | awk -v ids="$2" 'BEGIN { n = split(ids, id, " ") }
        NR < n { m = $1; for (i = 2; i <= NF; i++) if ($i > m) m = $i
                 s = 0; for (i = 1; i <= NF; i++) s += exp($i - m)
                 printf "%.9g\n", $(id[NR + 1] + 1) - m - log(s) }'
}

# A prompt of 150 token ids (BOS first): longer than a step's scored chunk
# (128 here), so that its scores come from two steps.
long_ids() {
    local t i
    for i in $(seq 12); do t+="The quick brown fox jumps over the lazy dog, said teacher $i. "; done
    post /tokenize "{\"content\":\"$t\",\"add_special\":true}" | jq -c '.tokens[:150]'
}

@test "echo: the prompt before the text, its tokens' log-probabilities ml-run's logits' (the first null)" {
    local ids ref echoed plain
    ids=$(long_ids)
    [[ $(jq length <<<"$ids") == 150 ]]
    ml-run -m "$BATS_FILE_TMPDIR/m.mlb" --ids -p "$(jq -r 'join(" ")' <<<"$ids")" -n 0 -q \
        --logits "$BATS_TEST_TMPDIR/l"
    ref=$(ref_logprobs "$BATS_TEST_TMPDIR/l" "$(jq -r 'join(" ")' <<<"$ids")" | jq -sc .)
    [[ $(jq length <<<"$ref") == 149 ]]
    run -0 post /v1/completions "{\"prompt\":$ids,\"max_tokens\":3,\"temperature\":0,\"echo\":true,\"logprobs\":2}"
    echoed=$output
    jq -e --argjson r "$ref" '.choices[0].logprobs as $l | ($l.tokens | length) == 153 and
        $l.token_logprobs[0] == null and $l.top_logprobs[0] == null and
        ([range(149) | ($l.token_logprobs[. + 1] - $r[.]) | fabs < 1e-5] | all) and
        ([range(1; 153) | $l.top_logprobs[.] as $t | $t[$l.tokens[.]] == $l.token_logprobs[.] and
          ($t | length == 2 or length == 3) and ($t | map(.) | . == (sort | reverse))] | all) and
        .usage.prompt_tokens == 150 and .usage.completion_tokens == 3' <<<"$echoed" ||
        fail_with "ml-run's rows give $ref: $(jq -c .choices[0].logprobs.token_logprobs <<<"$echoed")"
    # The generated part: the text, tokens and log-probabilities of the same
    # request without echo, its offsets after the echoed text.
    run -0 post /v1/completions "{\"prompt\":$ids,\"max_tokens\":3,\"temperature\":0,\"logprobs\":2}"
    plain=$output
    run -0 post /detokenize "{\"tokens\":$(jq -c '.[1:]' <<<"$ids")}"
    local prompt
    prompt=$(jq -r .content <<<"$output")
    jq -e --argjson p "$plain" --arg prompt "$prompt" '.choices[0] as $c | $p.choices[0] as $q |
        $c.text == $prompt + $q.text and
        $c.logprobs.tokens[150:] == $q.logprobs.tokens and
        $c.logprobs.token_logprobs[150:] == $q.logprobs.token_logprobs and
        $c.logprobs.top_logprobs[150:] == $q.logprobs.top_logprobs and
        $c.logprobs.text_offset[150:] == ($q.logprobs.text_offset | map(. + ($prompt | utf8bytelength)))' <<<"$echoed"
    # text_offset: each prompt token's text where it stands in the echoed
    # text (the first word's ▁ space at 0), then the generated tokens'.
    jq -e '.choices[0] as $c | $c.logprobs as $l |
        ([range(2; 150) | $c.text[$l.text_offset[.]:][:($l.tokens[.] | length)] == $l.tokens[.]] | all) and
        $l.text_offset[0] == 0 and $l.text_offset[1] == 0 and
        ($l.text_offset | . == sort)' <<<"$echoed"
    # without logprobs: the text alone
    run -0 post /v1/completions "{\"prompt\":$ids,\"max_tokens\":3,\"temperature\":0,\"echo\":true}"
    jq -e --argjson e "$echoed" '.choices[0].text == $e.choices[0].text and .choices[0].logprobs == null' <<<"$output"
    # a written prompt comes back as written
    run -0 post /v1/completions '{"prompt":"Once upon a time","max_tokens":2,"temperature":0,"echo":true,"logprobs":1}'
    jq -e '(.choices[0].text | startswith("Once upon a time")) and
        .choices[0].logprobs.tokens[:5] == ["<s>", " Once", " upon", " a", " time"] and
        .choices[0].logprobs.text_offset[:7] == [0, 0, 4, 9, 11, 16, 16 + (.choices[0].logprobs.tokens[5] | utf8bytelength)]' <<<"$output"
}

# lm-evaluation-harness's local-completions: prompts as lists of token
# ids, echo, logprobs 1, max_tokens 0 or 1; the prompt only scored.
@test "echo with max_tokens 0: only the prompt, scored as ml-run --perplexity scores it" {
    local t="" i ids
    for i in $(seq 5); do t+="The quick brown fox jumps over the lazy dog, said the teacher number $i."$'\n'; done
    printf '%s' "$t" >"$BATS_TEST_TMPDIR/t.txt"
    ids=$(post /tokenize "{\"content\":$(jq -Rs . <"$BATS_TEST_TMPDIR/t.txt"),\"add_special\":true}" | jq -c '.tokens[:64]')
    run -0 post /v1/completions "{\"prompt\":[$ids],\"max_tokens\":0,\"temperature\":0,\"echo\":true,\"logprobs\":1,\"seed\":1234}"
    local whole=$output
    jq -e '.choices[0].finish_reason == "length" and .usage.completion_tokens == 0 and
        .usage.prompt_tokens == 64 and (.choices[0].logprobs.tokens | length) == 64 and
        .choices[0].logprobs.token_logprobs[0] == null and
        ([.choices[0].logprobs.token_logprobs[1:][] | type == "number" and . < 0] | all)' <<<"$whole"
    # One chunk of 64 tokens (BOS first), its second half scored: the same
    # perplexity from the echoed log-probabilities of tokens 33..63.
    run -0 ml-run -m "$BATS_FILE_TMPDIR/m.mlb" --perplexity "$BATS_TEST_TMPDIR/t.txt" --ctx 64 -q
    [[ $output == *": 1 chunks of 64 tokens, 31 scored: PPL = "* ]]
    local ppl=${output##*PPL = }
    ppl=${ppl%% *}
    jq -e --argjson p "$ppl" '.choices[0].logprobs.token_logprobs[33:] | (map(-.) | add / length) - ($p | log) | fabs < 1e-5' <<<"$whole" ||
        fail_with "ml-run: PPL $ppl; the echo's: $(jq '.choices[0].logprobs.token_logprobs[33:] | (map(-.) | add / length) | exp' <<<"$whole")"
    # max_tokens 1 (lm-eval's): the same scores, one token after them
    run -0 post /v1/completions "{\"prompt\":[$ids],\"max_tokens\":1,\"temperature\":0,\"echo\":true,\"logprobs\":1}"
    jq -e --argjson w "$whole" '(.choices[0].logprobs.tokens | length) == 65 and
        .choices[0].logprobs.token_logprobs[:64] == $w.choices[0].logprobs.token_logprobs and
        .choices[0].logprobs.top_logprobs[:64] == $w.choices[0].logprobs.top_logprobs' <<<"$output"
    # streamed: the echo is the first chunk, then the finish
    run -0 post /v1/completions "{\"prompt\":$ids,\"max_tokens\":0,\"echo\":true,\"logprobs\":1,\"stream\":true}" -N
    grep '^data: {' <<<"$output" | sed 's/^data: //' | jq -se --argjson w "$whole" 'length == 2 and
        .[0].choices[0].text == $w.choices[0].text and .[0].choices[0].logprobs == $w.choices[0].logprobs and
        .[0].choices[0].finish_reason == null and .[1].choices[0].finish_reason == "length"'
    # without echo, max_tokens 0 asks for nothing
    refused 400 max_tokens invalid_value "{\"prompt\":$ids,\"max_tokens\":0}" /v1/completions
}

@test "echo streamed: the prompt's chunk first with its logprobs, then the text's" {
    local body='{"prompt":"Once upon a time","max_tokens":4,"temperature":0,"echo":true,"logprobs":2'
    local whole events
    whole=$(post /v1/completions "$body}")
    run -0 post /v1/completions "$body,\"stream\":true}" -N
    events=$(grep '^data: {' <<<"$output" | sed 's/^data: //')
    jq -se --argjson w "$whole" '.[0].choices[0].text == "Once upon a time" and
        (.[0].choices[0].logprobs.tokens | length) == 5 and .[0].choices[0].logprobs.token_logprobs[0] == null and
        (map(.choices[0].text) | add) == $w.choices[0].text and
        (map(.choices[0].logprobs // empty) | {tokens: map(.tokens[]), token_logprobs: map(.token_logprobs[]),
          top_logprobs: map(.top_logprobs[]), text_offset: map(.text_offset[])}) == $w.choices[0].logprobs' <<<"$events" ||
        fail_with "whole $whole, streamed $events"
    # n choices: each echoes the prompt with its scores
    run -0 post /v1/completions '{"prompt":"Once upon a time","max_tokens":2,"temperature":1,"seed":5,"n":2,"echo":true,"logprobs":1}'
    jq -e '(.choices | length) == 2 and
        ([.choices[] | .text | startswith("Once upon a time")] | all) and
        .choices[0].logprobs.token_logprobs[:5] == .choices[1].logprobs.token_logprobs[:5] and
        .usage.completion_tokens == 4' <<<"$output"
    local m='"prompt":"Hi","max_tokens":2'
    refused 400 echo invalid_type "{$m,\"echo\":\"yes\"}" /v1/completions
    refused 400 echo invalid_type "{$m,\"echo\":1}" /v1/completions
    refused 400 max_tokens invalid_value "{$m,\"echo\":true,\"max_tokens\":-1}" /v1/completions
    refused 400 echo unknown_parameter '{"messages":[{"role":"user","content":"Hi"}],"echo":true}'
}

# The scores of a prompt do not depend on the other slot (which keeps its
# own bits), nor on a cached prefix: a scoring request evaluates all of
# its prompt.
@test "echo's scores: the same alone, with another slot generating, and again (no prefix reused)" {
    local ids alone again together gen_alone gen_together
    local gen='{"prompt":"Once upon a time","max_tokens":240,"ignore_eos":true,"temperature":0,"logprobs":1,"stream":true}'
    ids=$(long_ids)
    local body="{\"prompt\":$ids,\"max_tokens\":4,\"temperature\":0,\"echo\":true,\"logprobs\":5}"
    local line='prompt 150 tokens (0 reused), completion 4 tokens' before end=$((SECONDS + 300))
    before=$(grep -cF "$line" "$BATS_FILE_TMPDIR/log" || true)
    alone=$(post /v1/completions "$body" | jq -c .choices)
    gen_alone=$(post /v1/completions "$gen" -N | grep '^data: {' | sed 's/^data: //' |
                jq -sc 'map(.choices[0].logprobs // empty | .token_logprobs[])')
    again=$(post /v1/completions "$body" | jq -c .choices)
    [[ $again == "$alone" ]]
    until (($(grep -cF "$line" "$BATS_FILE_TMPDIR/log" || true) >= before + 2)); do
        ((SECONDS < end)) || fail_with "the second request reused a prefix: $(cat "$BATS_FILE_TMPDIR/log")"
        sleep 0.01
    done
    stream_until_text "$BATS_FILE_TMPDIR/log" "$BATS_TEST_TMPDIR/g" "$gen"
    together=$(post /v1/completions "$body" | jq -c .choices)
    wait "$STREAM_PID"
    gen_together=$(grep '^data: {' "$BATS_TEST_TMPDIR/g" | sed 's/^data: //' |
                   jq -sc 'map(.choices[0].logprobs // empty | .token_logprobs[])')
    [[ $together == "$alone" ]] || fail_with "alone $alone, together $together"
    [[ $gen_together == "$gen_alone" ]]
    # It takes the slot used longest ago, not the one holding its start,
    # which the next request with that start still finds.
    local kept='Kept for later: the slot holds this prefix' n
    n=$(post /tokenize "{\"content\":\"$kept\",\"add_special\":true}" | jq '.tokens | length')
    post /v1/completions "{\"prompt\":\"$kept\",\"max_tokens\":2,\"temperature\":0}" >/dev/null
    post /v1/completions "{\"prompt\":\"Kept for something else\",\"max_tokens\":1,\"echo\":true,\"logprobs\":1}" >/dev/null
    post /v1/completions "{\"prompt\":\"$kept\",\"max_tokens\":2,\"temperature\":0}" >/dev/null
    wait_for_log "$BATS_FILE_TMPDIR/log" "prompt $n tokens \\($((n - 1)) reused\\), completion 2 tokens"
}

# A model whose GGUF states its pooling (tools/make-pooling-fixture.py:
# the Qwen 3 fixture with pooling_type 3, last) pools so without
# --pooling, as llama-server does; --pooling still overrides it.
@test "POST /v1/embeddings: the model's pooling (pooling_type, kept in the .mlb) without --pooling" {
    local d=$BATS_TEST_TMPDIR line
    gguf2mlb -q -o "$d/p.mlb" -t "$d/p.mlt" "$FIX/embed/qwen3-q8_0-pool-last.gguf"
    start_server "$d/log" -m "$d/p.mlb" -t 1 --embeddings
    line=$(head -n 1 "$FIX/embed/qwen3-q8_0-last.jsonl")
    post /v1/embeddings "$(jq -c '{input: .input}' <<<"$line")" |
        jq -e --argjson ref "$line" '[.data[0].embedding, $ref.embedding] | transpose |
            (map(.[0] * .[1]) | add) > 0.9995'
    stop_server
    start_server "$d/log2" -m "$d/p.mlb" -t 1 --embeddings --pooling mean
    line=$(head -n 1 "$FIX/embed/qwen3-q8_0-mean.jsonl")
    post /v1/embeddings "$(jq -c '{input: .input}' <<<"$line")" |
        jq -e --argjson ref "$line" '[.data[0].embedding, $ref.embedding] | transpose |
            (map(.[0] * .[1]) | add) > 0.9995'
    stop_server
}

# tests/fixtures/embed (tools/make-embed-fixture.sh): llama-embedding's
# vectors for the Qwen 3-shaped fixture, each pooling; ours agree to the
# activations' quantization (cosine above 0.9995, no component off by 0.02).
@test "POST /v1/embeddings with --embeddings: llama.cpp's vectors for mean, cls and last pooling" {
    local d=$BATS_TEST_TMPDIR p line
    gguf2mlb -q -o "$d/q.mlb" -t "$d/q.mlt" "$FIX/models/qwen3/qwen3-q8_0.gguf"
    for p in mean cls last; do
        start_server "$d/log-$p" -m "$d/q.mlb" -t 1 --embeddings --pooling "$p"
        while read -r line; do
            post /v1/embeddings "$(jq -c '{input: .input}' <<<"$line")" |
                jq -e --argjson ref "$line" '.object == "list" and .data[0].object == "embedding" and
                    .data[0].index == 0 and (.usage.prompt_tokens | . > 0) and
                    ([.data[0].embedding, $ref.embedding] | transpose |
                     (map(.[0] * .[1]) | add) > 0.9995 and (map(.[0] - .[1] | fabs) | max) < 0.02)' ||
                fail_with "$p: $(jq -c .input <<<"$line")"
        done <"$FIX/embed/qwen3-q8_0-$p.jsonl"
        [[ $p == last ]] || stop_server
    done
    # several inputs: each as alone, in order; token ids as their text's
    local one two both ids
    one=$(post /v1/embeddings '{"input":"Hello world"}' | jq -c .data[0].embedding)
    two=$(post /v1/embeddings '{"input":"x y z"}' | jq -c .data[0].embedding)
    both=$(post /v1/embeddings '{"input":["Hello world","x y z"],"encoding_format":"float"}')
    jq -e --argjson a "$one" --argjson b "$two" '[.data[].index] == [0,1] and
        .data[0].embedding == $a and .data[1].embedding == $b' <<<"$both"
    ids=$(post /tokenize '{"content":"Hello world","add_special":true}' | jq -c .tokens)
    [[ $(post /v1/embeddings "{\"input\":$ids}" | jq -c .data[0].embedding) == "$one" ]]
    [[ $(post /v1/embeddings "{\"input\":[$ids,$ids]}" | jq -c '[.data[].embedding] | unique | length') == 1 ]]
    # base64: the same float32 values, little-endian
    post /v1/embeddings '{"input":"Hello world","encoding_format":"base64"}' | jq -r .data[0].embedding |
        base64 -d >"$d/b64"
    (($(stat -c %s "$d/b64") == 64 * 4))
    paste <(od -An -v -t f4 -w4 "$d/b64") <(jq -r '.[]' <<<"$one") |
        awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-6 * ($2 < 0 ? -$2 : $2) + 1e-12) bad = 1 }
             END { exit bad || NR != 64 }'
    # a vector of unit length
    jq -e 'map(. * .) | add | . > 0.99999 and . < 1.00001' <<<"$one"
    refused 400 input missing_required_parameter '{}' /v1/embeddings
    refused 400 input invalid_value '{"input":""}' /v1/embeddings
    refused 400 input invalid_type '{"input":5}' /v1/embeddings
    refused 400 input invalid_value '{"input":[1,999999]}' /v1/embeddings
    refused 400 input invalid_type '{"input":["a",5]}' /v1/embeddings
    refused 400 encoding_format invalid_value '{"input":"a","encoding_format":"hex"}' /v1/embeddings
    refused 400 dimensions invalid_value '{"input":"a","dimensions":32}' /v1/embeddings
    refused 400 messages unknown_parameter '{"input":"a","messages":[]}' /v1/embeddings
    run -0 post /v1/embeddings '{"input":"a","dimensions":64,"model":"q","user":"u"}'
    stop_server
    # without --embeddings: 501, named
    start_server "$d/log-no" -m "$d/q.mlb" -t 1
    refused 501 - not_supported '{"input":"a"}' /v1/embeddings
    stop_server
    run -2 --separate-stderr ml-serve -m "$d/q.mlb" --pooling rank
    [[ ${stderr_lines[0]} == "ml-serve: --pooling: unknown pooling 'rank' (expected mean, cls or last)" ]]
}

# tests/fixtures/continue (tools/make-continue-fixture.sh): what llama.cpp
# prints for a prompt on a SentencePiece vocabulary with a ▁ prefix; up to
# its first byte that is not ASCII (a token of a partial character, which
# llama-simple prints raw).
@test "a completion continues its prompt: the first token's ▁ is a space, as in llama.cpp" {
    local d=$BATS_TEST_TMPDIR
    gguf2mlb -q -o "$d/tiny.mlb" -t "$d/tiny.mlt" "$FIX/continue/tiny-q8_0.gguf"
    start_server "$d/log" -m "$d/tiny.mlb" -t 1
    local prompt want got n=0 spaced=0
    while IFS=$'\t' read -r prompt want; do
        got=$(post /v1/completions "{\"prompt\":$(jq -Rn --arg p "$prompt" '$p'),\"max_tokens\":6,\"temperature\":0}" |
              jq -j .choices[0].text)
        want=$(LC_ALL=C sed 's/[\x80-\xff].*//' <<<"$want")
        got=$(LC_ALL=C sed 's/[\x80-\xff].*//' <<<"<s> $prompt$got")
        [[ $got == "$want" ]] || fail_with "$prompt: '$got', llama.cpp '$want'"
        [[ $want == "<s> $prompt "* ]] && spaced=$((spaced + 1)) # the case this is about
        n=$((n + 1))
    done <"$FIX/continue/llama-simple.tsv"
    ((n == 4 && spaced == 3))
    stop_server
}

@test "--no-mmap: the model read into memory serves the same completions" {
    run -0 ml-serve --help
    has_line '^ +--no-mmap +read the model into memory' "${lines[@]}"
    run -3 --separate-stderr ml-serve -m "$BATS_TEST_TMPDIR/none.mlb" --no-mmap
    [[ ${stderr_lines[0]} == "ml-serve: $BATS_TEST_TMPDIR/none.mlb: ML_E_IO: cannot open"* ]]
    head -c 1000 "$BATS_FILE_TMPDIR/m.mlb" > "$BATS_TEST_TMPDIR/cut.mlb"
    run -1 --separate-stderr ml-serve -m "$BATS_TEST_TMPDIR/cut.mlb" --no-mmap
    [[ ${stderr_lines[0]} == "ml-serve: $BATS_TEST_TMPDIR/cut.mlb: ML_E_FORMAT: "* ]]
    local body='{"prompt":"Once upon a time","max_tokens":6,"temperature":0}' a b
    start_server "$BATS_TEST_TMPDIR/log" -m "$BATS_FILE_TMPDIR/m.mlb" -t 1
    a=$(post /v1/completions "$body")
    stop_server
    start_server "$BATS_TEST_TMPDIR/log2" -m "$BATS_FILE_TMPDIR/m.mlb" -t 1 --no-mmap
    b=$(post /v1/completions "$body")
    stop_server
    jq -e '.choices[0].text | length > 0' <<<"$a"
    [[ $(jq .choices <<<"$a") == "$(jq .choices <<<"$b")" ]]
}

@test "a port in use: exit 3 with the reason" {
    local port=${URL##*:}
    run -3 --separate-stderr ml-serve -m "$BATS_FILE_TMPDIR/m.mlb" --port "$port"
    [[ ${stderr_lines[-1]} == "ml-serve: ML_E_IO: cannot listen on 127.0.0.1 port $port"* ]]
}

# ---------------------------------------------------------------- endpoints

@test "GET /health and /v1/models" {
    run -0 curl -sf "$URL/health"
    [[ $output == '{"status":"ok"}' ]]
    run -0 curl -sf "$URL/v1/models"
    jq -e '.object == "list" and (.data | length) == 1 and .data[0].id == "m" and
           .data[0].object == "model" and (.data[0].created | type) == "number"' <<<"$output"
}

@test "/tokenize and /detokenize (llama-server's shapes)" {
    run -0 post /tokenize '{"content":"Hello world"}'
    [[ $output == '{"tokens":[15043,3186]}' ]]
    run -0 post /tokenize '{"content":"Hello world","add_special":true}'
    [[ $output == '{"tokens":[1,15043,3186]}' ]]
    run -0 post /detokenize '{"tokens":[15043,3186]}'
    [[ $output == '{"content":"Hello world"}' ]]
    run -0 post /detokenize '{"tokens":[]}'
    [[ $output == '{"content":""}' ]]
    [[ $(status POST /detokenize -d '{"tokens":[32000]}') == 400 ]]
    jq -e '.error.param == "tokens" and .error.code == "invalid_value"' "$BATS_TEST_TMPDIR/body"
    [[ $(status POST /tokenize -d '{}') == 400 ]]
    jq -e '.error.code == "missing_required_parameter"' "$BATS_TEST_TMPDIR/body"
    [[ $(status POST /tokenize -d '{"text":"x"}') == 400 ]]
    jq -e '.error.param == "text" and .error.code == "unknown_parameter"' "$BATS_TEST_TMPDIR/body"
}

@test "POST /v1/chat/completions: OpenAI's chat.completion" {
    run -0 post /v1/chat/completions "$CHAT"
    jq -e '(.id | startswith("chatcmpl-")) and .object == "chat.completion" and
           (.created | type) == "number" and .model == "m" and (.choices | length) == 1 and
           .choices[0].index == 0 and .choices[0].message.role == "assistant" and
           (.choices[0].message.content | type) == "string" and
           .choices[0].finish_reason == "length" and .usage.completion_tokens == 12 and
           .usage.total_tokens == .usage.prompt_tokens + 12' <<<"$output"
    # The prompt is the llama2 template's: [INST] Hello there [/INST] after BOS.
    local n
    n=$(post /tokenize '{"content":"<s>[INST] Hello there [/INST]"}' | jq '.tokens | length')
    [[ $(jq .usage.prompt_tokens <<<"$output") == "$n" ]]
    # Greedy is reproducible.
    local first=$output
    run -0 post /v1/chat/completions "$CHAT"
    [[ $(jq .choices <<<"$output") == "$(jq .choices <<<"$first")" ]]
}

@test "POST /v1/completions: OpenAI's text_completion; max_completion_tokens" {
    run -0 post /v1/completions '{"prompt":"Once upon a time","max_tokens":10,"temperature":0}'
    jq -e '(.id | startswith("cmpl-")) and .object == "text_completion" and
           (.choices[0].text | type) == "string" and .choices[0].finish_reason == "length" and
           .usage.prompt_tokens == 5 and .usage.completion_tokens == 10' <<<"$output"
    local text
    text=$(jq -r .choices[0].text <<<"$output")
    # The same as ml-run generates greedily from the same prompt.
    run -0 ml-run -m "$BATS_FILE_TMPDIR/m.mlb" -p "Once upon a time" -n 10 --temp 0 -q
    [[ $output == "$text" ]]
    run -0 post /v1/completions '{"prompt":["Once upon a time"],"max_completion_tokens":3,"temperature":0}'
    jq -e '.usage.completion_tokens == 3' <<<"$output"
    # A prompt of token ids (OpenAI's other form), taken as given: the
    # text's ids (BOS included) give the same completion.
    local ids
    ids=$(post /tokenize '{"content":"Once upon a time","add_special":true}' | jq -c .tokens)
    run -0 post /v1/completions "{\"prompt\":$ids,\"max_tokens\":10,\"temperature\":0}"
    jq -e --arg t "$text" '.choices[0].text == $t and .usage.prompt_tokens == 5' <<<"$output"
    run -0 post /v1/completions "{\"prompt\":[$ids],\"max_tokens\":10,\"temperature\":0}"
    jq -e --arg t "$text" '.choices[0].text == $t' <<<"$output"
    [[ $(status POST /v1/completions -d '{"prompt":[1,32000]}') == 400 ]]
    jq -e '.error.param == "prompt" and .error.code == "invalid_value"' "$BATS_TEST_TMPDIR/body"
    [[ $(status POST /v1/completions -d '{"prompt":[1,"a"]}') == 400 ]]
    jq -e '.error.param == "prompt" and .error.code == "invalid_type"' "$BATS_TEST_TMPDIR/body"
}

@test "stream: chunks with the role first, content deltas, finish_reason, [DONE]" {
    run -0 post /v1/chat/completions "$CHAT"
    local whole
    whole=$(jq -r .choices[0].message.content <<<"$output")
    post /v1/chat/completions "${CHAT%\}},\"stream\":true}" -N >"$BATS_TEST_TMPDIR/sse"
    # Every event is "data: ..." followed by an empty line; the last is [DONE].
    run -0 awk 'NR % 2 == 1 && !/^data: / { bad = 1 } NR % 2 == 0 && $0 != "" { bad = 1 }
                END { exit bad }' "$BATS_TEST_TMPDIR/sse"
    [[ $(grep -v '^$' "$BATS_TEST_TMPDIR/sse" | tail -1) == "data: [DONE]" ]]
    grep '^data: {' "$BATS_TEST_TMPDIR/sse" | sed 's/^data: //' >"$BATS_TEST_TMPDIR/chunks"
    jq -se 'all(.object == "chat.completion.chunk") and (map(.id) | unique | length) == 1 and
            .[0].choices[0].delta == {"role":"assistant","content":""} and
            .[-1].choices[0].delta == {} and .[-1].choices[0].finish_reason == "length" and
            all(.[:-1][]; .choices[0].finish_reason == null)' "$BATS_TEST_TMPDIR/chunks"
    [[ $(jq -sj '.[1:-1] | map(.choices[0].delta.content) | add' "$BATS_TEST_TMPDIR/chunks") == "$whole" ]]
}

@test "stream of /v1/completions, and the usage chunk of stream_options" {
    run -0 post /v1/completions '{"prompt":"Once upon a time","max_tokens":6,"temperature":0}'
    local whole
    whole=$(jq -r .choices[0].text <<<"$output")
    post /v1/completions '{"prompt":"Once upon a time","max_tokens":6,"temperature":0,"stream":true,
        "stream_options":{"include_usage":true}}' -N | grep '^data: {' | sed 's/^data: //' \
        >"$BATS_TEST_TMPDIR/chunks"
    jq -se 'all(.object == "text_completion") and .[-2].choices[0].finish_reason == "length" and
            .[-1].choices == [] and .[-1].usage.completion_tokens == 6 and
            .[-1].usage.prompt_tokens == 5' "$BATS_TEST_TMPDIR/chunks"
    [[ $(jq -sj '.[:-2] | map(.choices[0].text) | add' "$BATS_TEST_TMPDIR/chunks") == "$whole" ]]
}

@test "stop strings: the text ends before one, which is not sent (whole and streamed)" {
    local body='{"prompt":"Once upon a time","max_tokens":10,"temperature":0' full cut stop
    full=$(post /v1/completions "$body}" | jq -r .choices[0].text)
    [[ ${#full} -ge 6 ]]
    stop=${full:3:2}
    cut=${full%%"$stop"*}
    run -0 post /v1/completions "$body,\"stop\":$(jq -Rn --arg s "$stop" '$s')}"
    jq -e --arg t "$cut" '.choices[0].text == $t and .choices[0].finish_reason == "stop"' <<<"$output"
    run -0 post /v1/completions "$body,\"stop\":[\"never here\",$(jq -Rn --arg s "$stop" '$s')],\"stream\":true}" -N
    [[ $(grep '^data: {' <<<"$output" | sed 's/^data: //' | jq -sj 'map(.choices[0].text) | add') == "$cut" ]]
    # A stop string that never appears changes nothing.
    run -0 post /v1/completions "$body,\"stop\":\"never here\"}"
    jq -e --arg t "$full" '.choices[0].text == $t and .choices[0].finish_reason == "length"' <<<"$output"
}

@test "sampling fields: a fixed seed reproduces, fields at their defaults change nothing" {
    local body='{"prompt":"Once upon a time","max_tokens":12,"temperature":1.5,"top_k":0,"top_p":1,"min_p":0,"seed":42'
    local a b
    a=$(post /v1/completions "$body}" | jq -r .choices[0].text)
    b=$(post /v1/completions "$body,\"model\":\"gpt-4o\",\"user\":\"u\",\"n\":1,\"presence_penalty\":0,\"frequency_penalty\":0,\"logprobs\":false,\"logit_bias\":{},\"echo\":false,\"best_of\":1,\"suffix\":null}" | jq -r .choices[0].text)
    [[ $a == "$b" ]]
    run -0 post /v1/completions "${body/42/43}}"
    [[ $(jq -r .choices[0].text <<<"$output") != "$a" ]]
}

@test "max_tokens is capped by the context; a prompt that fills it is refused" {
    run -0 post /v1/completions '{"prompt":"Once upon a time","max_tokens":100000,"temperature":0}'
    jq -e '.usage.completion_tokens == 256 - 5 and .choices[0].finish_reason == "length"' <<<"$output"
    local long
    long=$(printf 'word %.0s' {1..300})
    [[ $(status POST /v1/completions -d "{\"prompt\":\"$long\"}") == 400 ]]
    jq -e '.error.code == "context_length_exceeded" and .error.param == "prompt"' "$BATS_TEST_TMPDIR/body"
}

# metric NAME: its value in the last GET /metrics (saved in $BATS_TEST_TMPDIR/metrics).
metric() {
    awk -v n="llamacpp:$1" '$1 == n { print $2 }' "$BATS_TEST_TMPDIR/metrics"
}

@test "GET /metrics: llama-server's metrics in Prometheus's text format" {
    [[ $(status GET /metrics) == 200 ]]
    local m=$BATS_TEST_TMPDIR/metrics
    mv "$BATS_TEST_TMPDIR/body" "$m"
    run -0 curl -s -D - -o /dev/null "$URL/metrics"
    has_line $'^Content-Type: text/plain; version=0.0.4; charset=utf-8\r$' "${lines[@]}"
    # every value line has its HELP and TYPE lines, and is a number
    local names
    names=$(grep -v '^#' "$m" | awk '{ print $1 }')
    (($(wc -l <<<"$names") == 14))
    # without --spec-type nothing is guessed
    [[ $(metric draft_tokens_total) == 0 && $(metric draft_tokens_accepted_total) == 0 ]]
    local n
    for n in $names; do
        grep -q "^# HELP $n " "$m" && grep -Eq "^# TYPE $n (counter|gauge)$" "$m" || fail_with "$n"
        grep -Eq "^$n [0-9.e+-]+$" "$m" || fail_with "$(grep "^$n " "$m")"
    done
    local p0 t0 d0 u
    p0=$(metric prompt_tokens_total) t0=$(metric tokens_predicted_total) d0=$(metric n_decode_total)
    u=$(post /v1/completions '{"prompt":"A prompt no other test sends, 8231","max_tokens":7,"temperature":0,"ignore_eos":true}' | jq .usage)
    jq -e '.completion_tokens == 7' <<<"$u"
    status GET /metrics >/dev/null
    mv "$BATS_TEST_TMPDIR/body" "$m"
    (($(metric tokens_predicted_total) == t0 + 7))
    local fed=$(($(metric prompt_tokens_total) - p0))
    ((fed >= 1 && fed <= $(jq .prompt_tokens <<<"$u")))
    (($(metric n_decode_total) >= d0 + 7))
    (($(metric requests_processing) == 0 && $(metric requests_deferred) == 0))
    (($(metric kv_cache_tokens) > 0))
    awk '$1 == "llamacpp:kv_cache_usage_ratio" && $2 > 0 && $2 <= 1 { ok = 1 } END { exit !ok }' "$m"
}

# ---------------------------------------------------------------- refusals

# refused STATUS PARAM CODE BODY [PATH]: the request gets STATUS and
# OpenAI's error object with that param and code (- for null).
refused() {
    local want=$1 param=$2 code=$3 body=$4 path=${5:-/v1/chat/completions} got
    got=$(status POST "$path" -H 'Content-Type: application/json' --data-binary "$body")
    [[ $got == "$want" ]] || fail_with "$body: status $got, not $want: $(cat "$BATS_TEST_TMPDIR/body")"
    jq -e --arg p "$param" --arg c "$code" '
        (.error | keys) == ["code","message","param","type"] and
        (.error.message | length) > 0 and (.error.type | type) == "string" and
        .error.param == (if $p == "-" then null else $p end) and
        .error.code == (if $c == "-" then null else $c end)' "$BATS_TEST_TMPDIR/body" ||
        fail_with "$body: $(cat "$BATS_TEST_TMPDIR/body")"
}

@test "wrong types and values: 400 with OpenAI's error object" {
    local m='"messages":[{"role":"user","content":"Hi"}]'
    refused 400 temperature invalid_type "{$m,\"temperature\":\"hot\"}"
    refused 400 temperature invalid_value "{$m,\"temperature\":3}"
    refused 400 top_p invalid_value "{$m,\"top_p\":1.5}"
    refused 400 top_k invalid_type "{$m,\"top_k\":1.5}"
    refused 400 max_tokens invalid_value "{$m,\"max_tokens\":0}"
    refused 400 max_completion_tokens invalid_type "{$m,\"max_completion_tokens\":\"8\"}"
    refused 400 seed invalid_type "{$m,\"seed\":1.5}"
    refused 400 n invalid_value "{$m,\"n\":17}"
    refused 400 n invalid_value "{$m,\"n\":0}"
    refused 400 stream invalid_type "{$m,\"stream\":1}"
    refused 400 stop invalid_type "{$m,\"stop\":5}"
    refused 400 stop invalid_type "{$m,\"stop\":[\"a\",5]}"
    refused 400 stop invalid_value "{$m,\"stop\":\"\"}"
    refused 400 presence_penalty invalid_value "{$m,\"presence_penalty\":2.5}"
    refused 400 frequency_penalty invalid_type "{$m,\"frequency_penalty\":\"1\"}"
    refused 400 logit_bias invalid_type "{$m,\"logit_bias\":5}"
    refused 400 logit_bias invalid_value "{$m,\"logit_bias\":{\"x\":1}}"
    refused 400 logit_bias invalid_value "{$m,\"logit_bias\":{\"32000\":1}}"
    refused 400 logit_bias invalid_value "{$m,\"logit_bias\":{\"5\":101}}"
    refused 400 logit_bias invalid_value "{$m,\"logit_bias\":[[5]]}"
    refused 400 model invalid_type "{$m,\"model\":5}"
    refused 400 reasoning_effort invalid_value "{$m,\"reasoning_effort\":\"max\"}"
    refused 400 chat_template_kwargs invalid_type "{$m,\"chat_template_kwargs\":[1]}"
    refused 400 chat_template_kwargs invalid_value "{$m,\"chat_template_kwargs\":{\"messages\":[]}}"
    refused 400 messages missing_required_parameter '{"max_tokens":3}'
    refused 400 messages invalid_type '{"messages":"Hi"}'
    refused 400 messages invalid_value '{"messages":[]}'
    refused 400 messages.role invalid_type '{"messages":[{"content":"Hi"}]}'
    refused 400 messages.content invalid_type '{"messages":[{"role":"user","content":5}]}'
    refused 400 messages.content unsupported_parameter \
        '{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}'
    refused 400 prompt missing_required_parameter '{"max_tokens":3}' /v1/completions
    refused 400 prompt invalid_type '{"prompt":7}' /v1/completions
    # tools (ml-serve-tools.bats has the calls themselves)
    local f='{"type":"function","function":{"name":"f"}}'
    refused 400 tools invalid_type "{$m,\"tools\":{}}"
    refused 400 tools invalid_type "{$m,\"tools\":[5]}"
    refused 400 tools.type invalid_value "{$m,\"tools\":[{\"type\":\"code\",\"function\":{\"name\":\"f\"}}]}"
    refused 400 tools invalid_value "{$m,\"tools\":[{\"type\":\"function\"}]}"
    refused 400 tools invalid_value "{$m,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"},\"x\":1}]}"
    refused 400 tools.function invalid_value "{$m,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"x\":1}}]}"
    refused 400 tools.function.name invalid_value "{$m,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]}"
    refused 400 tools.function.name invalid_value "{$m,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"$(printf 'x%.0s' {1..65})\"}}]}"
    refused 400 tools.function.description invalid_type "{$m,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":5}}]}"
    refused 400 tools.function.parameters invalid_type "{$m,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":[]}}]}"
    refused 400 tools.function.strict invalid_type "{$m,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"strict\":1}}]}"
    refused 400 tools invalid_value "{$m,\"tools\":[$f,$f]}"
    refused 400 tools invalid_value "{$m,\"tools\":[$(for i in $(seq 129); do printf '{"type":"function","function":{"name":"f%d"}},' "$i"; done | sed 's/,$//')]}"
    refused 400 tools invalid_schema "{$m,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"if\":{}}}}]}"
    refused 400 tool_choice invalid_value "{$m,\"tool_choice\":\"required\"}"
    refused 400 tool_choice invalid_value "{$m,\"tools\":[$f],\"tool_choice\":\"always\"}"
    refused 400 tool_choice invalid_value "{$m,\"tools\":[$f],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g\"}}}"
    refused 400 tool_choice invalid_value "{$m,\"tools\":[$f],\"tool_choice\":{\"function\":{\"name\":\"f\"}}}"
    refused 400 parallel_tool_calls invalid_type "{$m,\"tools\":[$f],\"parallel_tool_calls\":1}"
    refused 400 response_format invalid_value "{$m,\"tools\":[$f],\"response_format\":{\"type\":\"json_object\"}}"
    refused 400 grammar invalid_value "{$m,\"tools\":[$f],\"grammar\":\"root ::= [a]\"}"
    local call='{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}'
    refused 400 messages.tool_calls invalid_type "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":{}}]}"
    refused 400 messages.tool_calls.function invalid_type "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\"}]}]}"
    refused 400 messages.tool_calls.type invalid_value "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"x\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}]}"
    refused 400 messages.tool_calls.function.name invalid_type "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"arguments\":\"{}\"}}]}]}"
    refused 400 messages.tool_calls.function.arguments invalid_type "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":5}}]}]}"
    refused 400 messages.tool_calls.id invalid_type "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":5,\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}]}"
    refused 400 messages.tool_call_id invalid_type "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},$call,{\"role\":\"tool\",\"tool_call_id\":5,\"content\":\"x\"}]}"
    # The llama2 template's own refusal (roles must alternate).
    refused 400 messages template_error \
        '{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}'
}

# Every field of OpenAI's chat and completion request schemas (and the
# llama.cpp fields this server reads), each with a value that asks for
# something: honoured (200) or refused with a 400 naming it.  A field
# OpenAI adds goes here with what ml-serve does with it.
@test "every request field is honoured or refused by name, never ignored" {
    local m='"messages":[{"role":"user","content":"Hi"}],"max_tokens":2'
    local p='"prompt":"Hi","max_tokens":2'
    local honoured_chat=(
        '"model":"x"' '"max_tokens":3' '"max_completion_tokens":3' '"temperature":0.5'
        '"top_p":0.5' '"top_k":5' '"min_p":0.1' '"n":1' '"seed":7' '"stop":"x"' '"stream":false'
        '"stream_options":{"include_usage":true}' '"presence_penalty":1' '"frequency_penalty":1'
        '"logit_bias":{"5":-100}' '"ignore_eos":true' '"user":"u"' '"safety_identifier":"s"'
        '"prompt_cache_key":"k"' '"parallel_tool_calls":false' '"logprobs":true'
        '"logprobs":true,"top_logprobs":2' '"reasoning_effort":"low"'
        '"response_format":{"type":"json_object"}' '"response_format":{"type":"text"}'
        '"grammar":"root ::= [a-z]+"'
        '"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"boolean"}}}'
        '"chat_template_kwargs":{"enable_thinking":false}'
        '"tools":[{"type":"function","function":{"name":"f"}}]'
        '"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"'
        '"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"'
    )
    local refused_chat=(
        '"functions":[{"name":"f"}]' '"function_call":{"name":"f"}'
        '"modalities":["text","audio"]'
        '"audio":{"voice":"alloy","format":"wav"}' '"prediction":{"type":"content","content":"x"}'
        '"verbosity":"low"' '"web_search_options":{}' '"store":true'
        '"metadata":{"a":"b"}' '"service_tier":"flex"'
    )
    local honoured_completion=(
        '"model":"x"' '"temperature":0.5' '"top_p":0.5' '"n":1' '"seed":7' '"stop":["x"]'
        '"stream":false' '"presence_penalty":-1' '"frequency_penalty":0.5' '"logit_bias":{"5":10}'
        '"user":"u"' '"best_of":1' '"echo":false' '"echo":true' '"logprobs":0' '"logprobs":2'
        '"suffix":""' '"echo":true,"logprobs":1'
    )
    local refused_completion=('"suffix":"end"' '"best_of":2')
    local f
    for f in "${honoured_chat[@]}"; do
        run -0 post /v1/chat/completions "{$m,$f}"
        jq -e '.choices[0].message.role == "assistant"' <<<"$output" || fail_with "$f: $output"
    done
    for f in "${refused_chat[@]}"; do
        refused 400 "$(jq -r 'keys[0]' <<<"{$f}")" unsupported_parameter "{$m,$f}"
    done
    for f in "${honoured_completion[@]}"; do
        run -0 post /v1/completions "{$p,$f}"
        jq -e '.choices[0].text | type == "string"' <<<"$output" || fail_with "$f: $output"
    done
    for f in "${refused_completion[@]}"; do
        refused 400 "$(jq -r 'keys[0]' <<<"{$f}")" unsupported_parameter "{$p,$f}" /v1/completions
    done
    # Chat fields on a completion, unknown names: OpenAI's unknown_parameter.
    refused 400 frobnicate unknown_parameter "{$m,\"frobnicate\":{\"x\":1}}"
    refused 400 messages unknown_parameter "{$p,$m}" /v1/completions
    refused 400 tools unknown_parameter "{$p,\"tools\":[]}" /v1/completions
    refused 400 cache_prompt unknown_parameter '{"content":"a","cache_prompt":true}' /tokenize
    # null is absent.
    run -0 post /v1/chat/completions "{$m,\"tools\":null,\"response_format\":null,\"audio\":null}"
}

# The same model and options through ml-run give the same greedy text.
@test "logit_bias bans and favours tokens; the penalties work as ml-run's" {
    local body='{"prompt":"Once upon a time","max_tokens":8,"temperature":0'
    local m=(-m "$BATS_FILE_TMPDIR/m.mlb" -p "Once upon a time" -n 8 --temp 0 -q)
    local plain last banned
    plain=$(post /v1/completions "$body}" | jq -r .choices[0].text)
    [[ $plain == "$(ml-run "${m[@]}")" ]]
    # The text repeats one token: the last of its encoding.
    last=$(post /tokenize "{\"content\":$(jq -Rn --arg t "$plain" '$t')}" | jq '.tokens[-1]')
    banned=$(post /v1/completions "$body,\"logit_bias\":{\"$last\":-100}}" | jq -r .choices[0].text)
    [[ $banned != "$plain" && $banned == "$(ml-run "${m[@]}" --logit-bias "$last-inf")" ]]
    # llama-server's [[id, false]] bans too.
    [[ $(post /v1/completions "$body,\"logit_bias\":[[$last,false]]}" | jq -r .choices[0].text) == "$banned" ]]
    # A bias of 100 on one token: the greedy text is that token again and again.
    run -0 post /v1/completions "$body,\"max_tokens\":3,\"logit_bias\":{\"1000\":100}}"
    [[ $(jq -r .choices[0].text <<<"$output") == "$(post /detokenize '{"tokens":[1000,1000,1000]}' | jq -r .content)" ]]
    [[ $(jq -r .choices[0].text <<<"$output") == "$(ml-run "${m[@]}" -n 3 -l 1000+100)" ]]
    local f p
    f=$(post /v1/completions "$body,\"frequency_penalty\":2}" | jq -r .choices[0].text)
    [[ $f != "$plain" && $f == "$(ml-run "${m[@]}" --frequency-penalty 2)" ]]
    p=$(post /v1/completions "$body,\"presence_penalty\":1.5}" | jq -r .choices[0].text)
    [[ $p != "$plain" && $p == "$(ml-run "${m[@]}" --presence-penalty 1.5)" ]]
}

@test "malformed JSON, bad UTF-8, a body that is not an object: 400" {
    refused 400 - invalid_json '{"messages":'
    refused 400 - invalid_json ''
    refused 400 - invalid_json "$(printf '{"prompt":"\xff\xfe"}')" /v1/completions
    refused 400 - invalid_json "$(printf '{"prompt":"\xc3"}')" /v1/completions
    refused 400 - invalid_json '{"prompt":"a\u0000b"}' /v1/completions
    refused 400 body invalid_type '[1,2]'
    refused 400 - invalid_json '{"prompt":"x","max_tokens":99999999999999999999999}' /v1/completions
    # The server is still there.
    run -0 curl -sf "$URL/health"
}

@test "unknown paths 404, wrong methods 405, too large bodies 413, huge headers refused" {
    [[ $(status GET /v1/nothing) == 404 ]]
    jq -e '.error.code == "not_found"' "$BATS_TEST_TMPDIR/body"
    [[ $(status GET /v1/chat/completions) == 405 ]]
    [[ $(status POST /health -d '{}') == 405 ]]
    head -c 1100000 /dev/zero | tr '\0' 'a' >"$BATS_TEST_TMPDIR/big"
    [[ $(status POST /v1/completions --data-binary "@$BATS_TEST_TMPDIR/big") == 413 ]]
    jq -e '.error.code == "body_too_large"' "$BATS_TEST_TMPDIR/body"
    # The same without Content-Length (chunked): read to its end, then 413.
    [[ $(status POST /v1/completions -H 'Transfer-Encoding: chunked' \
        --data-binary "@$BATS_TEST_TMPDIR/big") == 413 ]]
    jq -e '.error.code == "body_too_large"' "$BATS_TEST_TMPDIR/body"
    # A chunked body past 16 times the limit is not read on: the
    # connection is closed (curl saw "100 Continue" or nothing).
    head -c 20000000 /dev/zero | tr '\0' 'a' >"$BATS_TEST_TMPDIR/huge"
    run curl -s -o /dev/null -w '%{http_code}' -H 'Transfer-Encoding: chunked' \
        --data-binary "@$BATS_TEST_TMPDIR/huge" "$URL/v1/completions"
    [[ $output == 100 || $output == 000 ]] || fail_with "status $output"
    # Headers beyond the connection's 64 KiB.
    local h
    h=$(head -c 70000 /dev/zero | tr '\0' 'h')
    run curl -s -o /dev/null -w '%{http_code}' -H "X-Big: $h" "$URL/health"
    [[ $output =~ ^4[0-9][0-9]$ || $output == 000 ]]
    run -0 curl -sf "$URL/health"
}

@test "--api-key: 401 without 'Authorization: Bearer KEY'; /health stays open" {
    start_server "$BATS_TEST_TMPDIR/log" -m "$BATS_FILE_TMPDIR/m.mlb" -t 1 --api-key s3cret
    [[ $(status GET /v1/models) == 401 ]]
    jq -e '.error.code == "invalid_api_key" and .error.type == "invalid_request_error"' "$BATS_TEST_TMPDIR/body"
    [[ $(status GET /v1/models -H 'Authorization: Bearer wrong') == 401 ]]
    [[ $(status GET /v1/models -H 'Authorization: s3cret') == 401 ]]
    [[ $(status POST /v1/completions -d '{"prompt":"a","max_tokens":1}') == 401 ]]
    [[ $(status GET /v1/models -H 'Authorization: Bearer s3cret') == 200 ]]
    [[ $(status GET /metrics) == 401 ]]
    [[ $(status GET /metrics -H 'Authorization: Bearer s3cret') == 200 ]]
    [[ $(status POST /v1/completions -H 'Authorization: Bearer s3cret' -d '{"prompt":"a","max_tokens":1}') == 200 ]]
    [[ $(status GET /health) == 200 ]]
    # Without a chat template the chat endpoint is refused, the rest served.
    [[ $(status POST /v1/chat/completions -H 'Authorization: Bearer s3cret' -d "$CHAT") == 400 ]]
    jq -e '.error.code == "no_chat_template"' "$BATS_TEST_TMPDIR/body"
    stop_server
    grep -q 'the tokenizer has no chat template' "$BATS_TEST_TMPDIR/log"
}

@test "one log line per request on stderr" {
    curl -s "$URL/v1/models" >/dev/null
    post /v1/completions '{"prompt":"Once upon a time","max_tokens":2}' >/dev/null
    wait_for_log "$BATS_FILE_TMPDIR/log" '^ml-serve: 127\.0\.0\.1 POST /v1/completions 200 [0-9.]+ s, prompt 5 tokens \([0-9]+ reused\), completion 2 tokens$'
    grep -Eq '^ml-serve: 127\.0\.0\.1 GET /v1/models 200 [0-9.]+ s$' "$BATS_FILE_TMPDIR/log"
}

# ---------------------------------------------------------------- slots

@test "a prompt that starts with a slot's tokens reuses them, with the same result" {
    local body='{"messages":[{"role":"user","content":"The same question, asked twice over"}],"max_tokens":5,"temperature":0}'
    local a b n
    a=$(post /v1/chat/completions "$body")
    b=$(post /v1/chat/completions "$body")
    [[ $(jq .choices <<<"$a") == "$(jq .choices <<<"$b")" ]]
    n=$(jq .usage.prompt_tokens <<<"$a")
    wait_for_log "$BATS_FILE_TMPDIR/log" "prompt $n tokens \\($((n - 1)) reused\\), completion 5 tokens"
}

@test "results do not depend on concurrency: 4 seeded requests at once equal each alone" {
    local i
    for i in 1 2 3 4; do
        post /v1/completions "{\"prompt\":\"Request $i says\",\"max_tokens\":16,\"temperature\":1,\"top_k\":0,\"top_p\":1,\"min_p\":0,\"seed\":$i}" \
            | jq -r .choices[0].text >"$BATS_TEST_TMPDIR/alone$i"
    done
    for i in 1 2 3 4; do
        post /v1/completions "{\"prompt\":\"Request $i says\",\"max_tokens\":16,\"temperature\":1,\"top_k\":0,\"top_p\":1,\"min_p\":0,\"seed\":$i}" \
            | jq -r .choices[0].text >"$BATS_TEST_TMPDIR/together$i" &
    done
    wait
    for i in 1 2 3 4; do
        cmp "$BATS_TEST_TMPDIR/alone$i" "$BATS_TEST_TMPDIR/together$i"
    done
}

# stream_until_text LOG OUT BODY: starts a stream in the background
# (STREAM_PID) and waits until its first text has arrived in OUT.
stream_until_text() {
    local out=$2 end=$((SECONDS + 300))
    : >"$out"
    curl -s -N -H 'Content-Type: application/json' --data-binary "$3" "$URL/v1/completions" \
        >"$out" &
    STREAM_PID=$!
    until [[ $(grep -c '^data: {' "$out") -ge 2 ]]; do
        ((SECONDS < end)) || fail_with "no text streamed after 300 s" || return 1
        sleep 0.005
    done
}

@test "busy slots: 503 when the queue is full; a client that leaves frees its slot" {
    start_server "$BATS_TEST_TMPDIR/log" -m "$BATS_FILE_TMPDIR/long.mlb" -t 1 --parallel 1 --queue 0
    local long='{"prompt":"Once upon a time","temperature":0,"stream":true}'
    stream_until_text "$BATS_TEST_TMPDIR/log" "$BATS_TEST_TMPDIR/a" "$long"
    [[ $(status POST /v1/completions -d '{"prompt":"b","max_tokens":1}') == 503 ]]
    jq -e '.error.code == "queue_full" and .error.type == "server_error"' "$BATS_TEST_TMPDIR/body"
    # The client goes away mid-stream: its generation ends, the slot is free.
    kill "$STREAM_PID"
    wait "$STREAM_PID" || true
    wait_for_log "$BATS_TEST_TMPDIR/log" 'POST /v1/completions 200 .*completion [0-9]+ tokens so far \((error|client closed)\)$'
    local n
    n=$(sed -n 's/.*completion \([0-9]*\) tokens so far.*/\1/p' "$BATS_TEST_TMPDIR/log")
    ((n < 4096 - 5))
    local end=$((SECONDS + 300)) got
    until got=$(status POST /v1/completions -d '{"prompt":"b","max_tokens":1}') && [[ $got == 200 ]]; do
        [[ $got == 503 ]] && ((SECONDS < end)) || fail_with "status $got"
    done
    # n choices need n places, and this server has one: never, so a 400
    [[ $(status POST /v1/completions -d '{"prompt":"b","max_tokens":1000,"n":2}') == 400 ]]
    jq -e '.error.param == "n" and .error.code == "invalid_value" and
           (.error.message | contains("at most 1 at once"))' "$BATS_TEST_TMPDIR/body"
    (($(grep -c 'POST /v1/completions 200 .*completion 1 tokens$' "$BATS_TEST_TMPDIR/log") >= 1))
    stop_server
}

@test "busy slots: choices beyond the slots and the queue are a 400; ones that fit only later a 503 that leaves nothing queued" {
    start_server "$BATS_TEST_TMPDIR/log" -m "$BATS_FILE_TMPDIR/long.mlb" -t 1 --parallel 1 --queue 1
    [[ $(status POST /v1/completions -d '{"prompt":"b","max_tokens":1,"n":3}') == 400 ]]
    jq -e '.error.param == "n" and .error.code == "invalid_value" and
           (.error.message | contains("3 choices") and contains("at most 2 at once"))' \
        "$BATS_TEST_TMPDIR/body"
    [[ $(status POST /v1/completions -d '{"prompt":["a","b","c"],"max_tokens":1}') == 400 ]]
    jq -e '.error.param == "prompt" and .error.code == "invalid_value"' "$BATS_TEST_TMPDIR/body"
    local long='{"prompt":"Once upon a time","temperature":0,"stream":true}'
    stream_until_text "$BATS_TEST_TMPDIR/log" "$BATS_TEST_TMPDIR/a" "$long"
    # two places, one busy: the first choice is queued, the second finds
    # none, and the first is withdrawn
    [[ $(status POST /v1/completions -d '{"prompt":"b","max_tokens":1000,"n":2}') == 503 ]]
    jq -e '.error.code == "queue_full"' "$BATS_TEST_TMPDIR/body"
    kill "$STREAM_PID"
    wait "$STREAM_PID" || true
    # nothing of the withdrawn request runs: the next request is served
    # (1 token), and no 1000-token completion appears in the log
    local end=$((SECONDS + 300)) got
    until got=$(status POST /v1/completions -d '{"prompt":"b","max_tokens":1}') && [[ $got == 200 ]]; do
        [[ $got == 503 ]] && ((SECONDS < end)) || fail_with "status $got"
    done
    grep -q 'POST /v1/completions 200 .*completion 1 tokens$' "$BATS_TEST_TMPDIR/log"
    if grep -q 'completion 1000 tokens' "$BATS_TEST_TMPDIR/log"; then
        fail_with "the withdrawn request ran"
    fi
    stop_server
}

@test "an idle connection is dropped after --timeout; a slow request does not hold the server" {
    start_server "$BATS_TEST_TMPDIR/log" -m "$BATS_FILE_TMPDIR/m.mlb" -t 1 --timeout 1
    local port=${URL##*:}
    exec 5<>"/dev/tcp/127.0.0.1/$port"
    printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"pro' >&5
    # The server closes the connection: the read ends (within the bound).
    run timeout 60 cat <&5
    [[ $status -eq 0 ]]
    exec 5>&-
    run -0 curl -sf "$URL/health"
    stop_server
}

@test "a generation longer than --timeout is not cut off, nor is a request waiting for a slot" {
    start_server "$BATS_TEST_TMPDIR/log" -m "$BATS_FILE_TMPDIR/long.mlb" -t 1 --parallel 1 --timeout 1
    # Three requests of 4000 tokens on one slot: the last waits for the
    # other two, each silent on its connection until its answer is whole.
    local i pids=()
    for i in 1 2 3; do
        post /v1/completions '{"prompt":"a","max_tokens":4000,"ignore_eos":true,"temperature":0}' \
            >"$BATS_TEST_TMPDIR/r$i" &
        pids+=($!)
    done
    wait "${pids[@]}"
    for i in 1 2 3; do
        jq -e '.usage.completion_tokens == 4000 and .choices[0].finish_reason == "length"' \
            "$BATS_TEST_TMPDIR/r$i" || fail_with "answer $i: $(head -c 300 "$BATS_TEST_TMPDIR/r$i")"
    done
    stop_server
    [[ $(grep -c 'POST /v1/completions 200 ' "$BATS_TEST_TMPDIR/log") == 3 ]]
    ! grep -q 'timed out' "$BATS_TEST_TMPDIR/log"
}

@test "ignore_eos (llama-server's): no end-of-generation token is drawn" {
    # The fixture Qwen3 (vocabulary 384): seed 4 draws <|im_end|> early.
    gguf2mlb -q -o "$BATS_TEST_TMPDIR/q.mlb" "$FIX/models/qwen3/qwen3-q8_0.gguf"
    start_server "$BATS_TEST_TMPDIR/log" -m "$BATS_TEST_TMPDIR/q.mlb" -t 1
    local req='{"prompt":"Hello","max_tokens":200,"seed":4,"temperature":1.5,"top_k":0,"top_p":1,"min_p":0'
    run -0 post /v1/completions "$req}"
    jq -e '.usage.completion_tokens < 200 and .choices[0].finish_reason == "stop"' <<<"$output"
    run -0 post /v1/completions "$req,\"ignore_eos\":false}"
    jq -e '.usage.completion_tokens < 200 and .choices[0].finish_reason == "stop"' <<<"$output"
    run -0 post /v1/completions "$req,\"ignore_eos\":true}"
    jq -e '.usage.completion_tokens == 200 and .choices[0].finish_reason == "length"' <<<"$output"
    [[ $(status POST /v1/completions -d '{"prompt":"a","ignore_eos":1}') == 400 ]]
    jq -e '.error.param == "ignore_eos" and .error.code == "invalid_type"' "$BATS_TEST_TMPDIR/body"
    stop_server
}

@test "SIGTERM: no new connections, the running stream ends with [DONE], exit 0" {
    start_server "$BATS_TEST_TMPDIR/log" -m "$BATS_FILE_TMPDIR/long.mlb" -t 1
    stream_until_text "$BATS_TEST_TMPDIR/log" "$BATS_TEST_TMPDIR/a" \
        '{"prompt":"Once upon a time","temperature":0,"max_tokens":400,"stream":true}'
    kill -TERM "$SERVER_PID"
    wait "$STREAM_PID"
    [[ $(tail -2 "$BATS_TEST_TMPDIR/a" | head -1) == "data: [DONE]" ]]
    grep '^data: {' "$BATS_TEST_TMPDIR/a" | sed 's/^data: //' | jq -se '.[-1].choices[0].finish_reason == "length"'
    run -0 wait "$SERVER_PID"
    grep -q '^ml-serve: stopped$' "$BATS_TEST_TMPDIR/log"
    run ! curl -s "$URL/health"
}
