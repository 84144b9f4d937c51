#!/usr/bin/env bats
# ml-serve-tools.bats - tool calling: the format each chat template of
# llama.cpp's models/templates writes calls in (found by a probe render),
# the split of a model's reply into content, reasoning and tool_calls for
# every format (whole, and fed in pieces, which must agree: the
# tool-split test program), and ml-serve end to end on a random model
# with each format's template, where tool_choice required or named holds
# the reply to a call that parses and meets the tool's schema; gpt-oss's
# channels on its own vocabulary and template, with its end-of-generation
# ids.
bats_require_minimum_version 1.5.0
load helpers
load serve

FIX="$BATS_TEST_DIRNAME/../fixtures"
T="$FIX/chat/templates"
SPLIT="$MLCORE_BUILD/tests/tool-split"

setup_file() {
    command -v curl >/dev/null || skip "needs curl"
    [[ -x $MLCORE_BUILD/bin/ml-serve && -x $MLCORE_BUILD/tests/tool-split ]] ||
        skip "ml-serve is not built here"
    # The Llama 2 tokenizer (32000 ids) on a tiny random model; Devstral's
    # system prompt needs a long context.
    "$MKMODEL" -o "$BATS_FILE_TMPDIR/m.mlb" --seed 3 vocab=32000 wtype=2 scale_f16=1 \
        shared_classifier=1 max_seq=2048
    cp "$FIX/tok/llama2.mlt" "$BATS_FILE_TMPDIR/m.mlt"
}

teardown() {
    [[ -n ${SERVER_PID:-} ]] && stop_server || true
}

TOOLS='"tools":[{"type":"function","function":{"name":"get_weather","description":"The weather in a city","parameters":{"type":"object","properties":{"city":{"enum":["Paris","Rome"]},"unit":{"enum":["c","f"]}},"required":["city"]}}},{"type":"function","function":{"name":"get_time","description":"The time in a zone","parameters":{"type":"object","properties":{"zone":{"enum":["UTC","CET"]}},"required":["zone"]}}}]'
ASK='"messages":[{"role":"user","content":"What is the weather in Paris?"}]'

# valid_calls JSON: the answer's calls name a tool and their arguments
# meet its schema (the enums above).
valid_calls() {
    jq -e '.choices[0].message.tool_calls | length >= 1 and all(
        (.id | test("^(call_[A-Za-z0-9]{24}|[A-Za-z0-9]{9})$")) and .type == "function" and
        ((.function.arguments | fromjson) as $a |
          (.function.name == "get_weather" and ($a.city == "Paris" or $a.city == "Rome") and
           (($a | keys) - ["city","unit"] | length) == 0) or
          (.function.name == "get_time" and ($a | keys) == ["zone"] and
           ($a.zone == "UTC" or $a.zone == "CET"))))' <<<"$1" >/dev/null || fail_with "$1"
}

@test "the probe finds each template's call format" {
    local want=(
        Qwen-Qwen2.5-7B-Instruct:hermes Qwen-Qwen3-0.6B:hermes Qwen-QwQ-32B:hermes
        NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use:hermes
        NousResearch-Hermes-3-Llama-3.1-8B-tool_use:hermes ibm-granite-granite-4.0:hermes
        meta-llama-Llama-3.1-8B-Instruct:llama3 meta-llama-Llama-3.2-3B-Instruct:llama3
        meta-llama-Llama-3.3-70B-Instruct:llama3
        mistralai-Mistral-Nemo-Instruct-2407:mistral
        Mistral-Small-3.2-24B-Instruct-2506:mistral-args
        unsloth-mistral-Devstral-Small-2507:mistral-args
        mistralai-Ministral-3-14B-Reasoning-2512:mistral-args
        openai-gpt-oss-120b:gpt-oss
        Qwen3-Coder:xml Qwen3.5-4B:xml NVIDIA-Nemotron-3-Nano-30B-A3B-BF16:xml
        SmolLM2-135M-Instruct:generic google-gemma-3-1b-it:generic
        meta-llama-Llama-2-7b-chat-hf:generic GLM-4.6:generic
    )
    local w out
    for w in "${want[@]}"; do
        out=$("$SPLIT" --probe "$T/${w%%:*}.jinja")
        [[ ${out%% *} == "${w#*:}" ]] || fail_with "${w%%:*}: $out"
    done
    # what the template takes: tool messages, arguments as strings
    [[ $("$SPLIT" --probe "$T/Qwen-Qwen2.5-7B-Instruct.jinja") == "hermes renders_tools=1 tool_role=1 string_args=0" ]]
    [[ $("$SPLIT" --probe "$T/Qwen-Qwen3-0.6B.jinja") == "hermes renders_tools=1 tool_role=1 string_args=1" ]]
    [[ $("$SPLIT" --probe "$T/google-gemma-3-1b-it.jinja") == "generic renders_tools=0 tool_role=0 string_args=0" ]]
    [[ $("$SPLIT" --probe "$T/SmolLM2-135M-Instruct.jinja") == "generic renders_tools=0 tool_role=1 string_args=0" ]]
}

# split FORMAT TEXT JQ: the split of TEXT meets JQ (tool-split itself
# checks that every piece size gives the same).
split() {
    local out
    out=$(printf '%s' "$2" | "$SPLIT" "$1") || fail_with "$1: $2"
    jq -e "$3" <<<"$out" >/dev/null || fail_with "$1: $2 -> $out"
}

@test "replies split into content, reasoning and tool_calls, for every format" {
    local c1='(.tool_calls | length) == 1'
    split hermes $'Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' \
        "$c1 and .content == \"Let me look.\\n\" and .tool_calls[0].function == {name: \"get_weather\", arguments: \"{\\\"city\\\":\\\"Paris\\\"}\"}"
    split hermes '<tool_call>{"name": "a", "arguments": "{\"x\": 1}"}</tool_call><tool_call>{"name": "b", "arguments": {}}</tool_call>' \
        '[.tool_calls[].function] == [{name: "a", arguments: "{\"x\": 1}"}, {name: "b", arguments: "{}"}] and .content == ""'
    # a call that does not parse stays text
    split hermes 'x <tool_call>{"name": "a", "argu' '.tool_calls == [] and .content == "x <tool_call>{\"name\": \"a\", \"argu"'
    split hermes 'no calls <tool_ here' '.tool_calls == [] and .content == "no calls <tool_ here"'
    split llama3 '{"name": "get_time", "parameters": {"zone": "UTC"}}' \
        "$c1 and .content == \"\" and .tool_calls[0].function == {name: \"get_time\", arguments: \"{\\\"zone\\\":\\\"UTC\\\"}\"}"
    split llama3 '<|python_tag|>brave_search.call(query="weather in Paris")' \
        "$c1 and .tool_calls[0].function == {name: \"brave_search\", arguments: \"{\\\"query\\\":\\\"weather in Paris\\\"}\"}"
    split llama3 '{"answer": 42} is JSON, not a call' '.tool_calls == [] and .content == "{\"answer\": 42} is JSON, not a call"'
    split llama3 'Hello {"name": "x"}' '.tool_calls == [] and .content == "Hello {\"name\": \"x\"}"'
    split mistral 'Sure.[TOOL_CALLS][{"name": "a", "arguments": {"k": [1, 2]}, "id": "abcDEF123"}, {"name": "b", "arguments": {}}]' \
        '(.tool_calls | length) == 2 and .content == "Sure." and .tool_calls[0].id == "abcDEF123" and (.tool_calls[1].id | test("^[A-Za-z0-9]{9}$")) and .tool_calls[0].function.arguments == "{\"k\":[1,2]}"'
    split mistral '[TOOL_CALLS][{"name": 5}]' '.tool_calls == [] and .content == "[TOOL_CALLS][{\"name\": 5}]"'
    split mistral-args '[TOOL_CALLS]get_weather[ARGS]{"city": "Rome"}[TOOL_CALLS]get_time[CALL_ID]abcdefghi[ARGS]{"zone": "CET"}' \
        '[.tool_calls[] | [.function.name, .function.arguments]] == [["get_weather", "{\"city\":\"Rome\"}"], ["get_time", "{\"zone\":\"CET\"}"]] and .tool_calls[1].id == "abcdefghi"'
    split gpt-oss '<|channel|>analysis<|message|>The user wants weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>' \
        "$c1 and .reasoning == \"The user wants weather.\" and .content == \"\" and .tool_calls[0].function.name == \"get_weather\""
    split gpt-oss '<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>Hello!' \
        '.tool_calls == [] and .reasoning == "Easy." and .content == "Hello!"'
    split gpt-oss 'no channels' '.content == "no channels" and .reasoning == ""'
    # several messages: reasoning, a preamble, a call; a channel right after a body
    split gpt-oss '<|channel|>analysis<|message|>A<|end|><|start|>assistant<|channel|>analysis<|message|>B<|end|><|start|>assistant<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"x": 1}<|call|>' \
        "$c1 and .reasoning == \"AB\" and .content == \"Checking.\" and .tool_calls[0].function == {name: \"f\", arguments: \"{\\\"x\\\":1}\"}"
    split gpt-oss '<|channel|>analysis<|message|>t<|channel|>final<|message|>ok' '.reasoning == "t" and .content == "ok"'
    split gpt-oss '<|channel|>final<|message|>Hi <|chan' '.content == "Hi <|chan"'
    split gpt-oss 'x<|channel|>analysis' '.content == "x<|channel|>analysis"'
    split gpt-oss '<|channel|>commentary to=functions.f<|message|>{bad' '.tool_calls == [] and .content == "{bad"'
    split xml $'Checking.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=opts>\n{"a": [1]}\n</parameter>\n</function>\n</tool_call>' \
        "$c1 and .content == \"Checking.\\n\" and .tool_calls[0].function == {name: \"get_weather\", arguments: \"{\\\"city\\\":\\\"Paris\\\",\\\"days\\\":3,\\\"opts\\\":{\\\"a\\\":[1]}}\"}"
    split xml $'<tool_call>\n<function=a>\n</function>\n</tool_call>\n<tool_call>\n<function=b>\n<parameter=x>\ntwo\nlines\n</parameter>\n</function>\n</tool_call>' \
        '[.tool_calls[].function] == [{name: "a", arguments: "{}"}, {name: "b", arguments: "{\"x\":\"two\\nlines\"}"}]'
    split xml $'<tool_call>\n<function=a>\n<parameter=x>\nno end' '.tool_calls == [] and .content == "<tool_call>\n<function=a>\n<parameter=x>\nno end"'
    split generic '{"tool_call": {"name": "get_time", "arguments": {"zone": "UTC"}}}' "$c1 and .content == \"\""
    split generic '{"tool_calls": [{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": null}}]}' '(.tool_calls | length) == 2'
    split generic '{"response": "It is sunny."}' '.tool_calls == [] and .content == "It is sunny."'
    split generic '{"response": "cut' '.tool_calls == [] and .content == "{\"response\": \"cut"'
}

@test "the grammar of a request's calls: one rule set per tool, bad schemas refused by name" {
    local body="{$ASK,$TOOLS,\"tool_choice\":\"required\"}" g
    g=$(printf '%s' "$body" | "$SPLIT" --grammar hermes)
    [[ $g == *'schema0 ::= '* && $g == *'schema1 ::= '* && $g == *'answer ::= one ("\n" one)*'* ]] || fail_with "$g"
    g=$(printf '%s' "${body%\}},\"parallel_tool_calls\":false}" | "$SPLIT" --grammar hermes)
    [[ $g == *$'\nanswer ::= one' ]] || fail_with "$g"
    # auto with a format of the model's own: no grammar
    g=$(printf '%s' "{$ASK,$TOOLS}" | "$SPLIT" --grammar hermes)
    [[ -z $g ]]
    # auto with ours: a call or a response
    g=$(printf '%s' "{$ASK,$TOOLS}" | "$SPLIT" --grammar generic)
    [[ $g == *'answer ::= calls | "{\"response\": " text "}"'* ]] || fail_with "$g"
    # the XML format: parameters in order, required ones always, strings raw
    local xb="{$ASK,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"n\":{\"type\":\"integer\"}},\"required\":[\"city\"]}}}],\"tool_choice\":\"required\"}"
    local call=$'<tool_call>\n<function=f>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>'
    [[ $(printf '%s' "$xb" | "$SPLIT" --grammar xml - "$call") == match ]]
    [[ $(printf '%s' "$xb" | "$SPLIT" --grammar xml - "${call/Paris/Paris<b>}") == "no match" ]]
    [[ $(printf '%s' "$xb" | "$SPLIT" --grammar xml - $'<tool_call>\n<function=f>\n<parameter=n>\n1\n</parameter>\n</function>\n</tool_call>') == "no match" ]]
    # a think block the prompt left open is ended first, then the call
    [[ $(printf '%s' "$xb" | "$SPLIT" --grammar xml think $'Let me see.</think>\n\n'"$call") == match ]]
    [[ $(printf '%s' "$xb" | "$SPLIT" --grammar xml think "$call") == "no match" ]]
    [[ $(printf '%s' "$xb" | "$SPLIT" --grammar xml think $'a</b></think>\n'"$call") == "no match" ]]
    g=$(printf '%s' "{$ASK,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"not\":{}}}}],\"tool_choice\":\"required\"}" | "$SPLIT" --grammar hermes)
    [[ $g == "400 tools Invalid value for 'tools': json_schema: "*"'not'"* ]] || fail_with "$g"
}

# serve OPTION...: ml-serve on the random model.
# A log of its own each time: start_server waits for the "listening" line
# of its log, which an earlier server's would fake.
serve() {
    start_server "$(mktemp "$BATS_TEST_TMPDIR/log.XXXXXX")" -m "$BATS_FILE_TMPDIR/m.mlb" -t 1 "$@"
}

@test "required and named calls parse and meet the schema, in every format" {
    local t out seed
    for t in Qwen-Qwen2.5-7B-Instruct meta-llama-Llama-3.1-8B-Instruct \
        mistralai-Mistral-Nemo-Instruct-2407 unsloth-mistral-Devstral-Small-2507 \
        openai-gpt-oss-120b google-gemma-3-1b-it Qwen3-Coder Qwen3.5-4B; do
        serve --chat-template-file "$T/$t.jinja"
        for seed in 1 2; do
            # (Qwen 3.5 thinks unless told not to: a random model's
            # thoughts never end)
            out=$(post /v1/chat/completions "{$ASK,$TOOLS,\"tool_choice\":\"required\",\"parallel_tool_calls\":false,\"max_tokens\":200,\"seed\":$seed,\"chat_template_kwargs\":{\"enable_thinking\":false}}")
            valid_calls "$out"
            jq -e '.choices[0].finish_reason == "tool_calls" and .choices[0].message.content == null and
                   (.choices[0].message.tool_calls | length) == 1' <<<"$out" >/dev/null || fail_with "$t: $out"
            out=$(post /v1/chat/completions "{$ASK,$TOOLS,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_time\"}},\"max_tokens\":300,\"parallel_tool_calls\":false,\"seed\":$seed,\"chat_template_kwargs\":{\"enable_thinking\":false}}")
            valid_calls "$out"
            jq -e '[.choices[0].message.tool_calls[].function.name] == ["get_time"]' <<<"$out" >/dev/null ||
                fail_with "$t: $out"
        done
        stop_server
    done
}

@test "a streamed call: the same call as the whole answer, in OpenAI's deltas" {
    serve --chat-template-file "$T/Qwen-Qwen2.5-7B-Instruct.jinja"
    local body="{$ASK,$TOOLS,\"tool_choice\":\"required\",\"parallel_tool_calls\":false,\"max_tokens\":200,\"seed\":3" whole events
    whole=$(post /v1/chat/completions "$body}")
    valid_calls "$whole"
    events=$(post /v1/chat/completions "$body,\"stream\":true}" -N | sed -n 's/^data: {/{/p')
    # one delta carries the call (index, id, type, name, arguments); the
    # last chunk says tool_calls
    jq -se --argjson w "$whole" '
        [.[].choices[0].delta.tool_calls // empty | .[]] as $d |
        ($d | length) == 1 and $d[0].index == 0 and $d[0].type == "function" and
        ($d[0].id | test("^call_")) and
        $d[0].function == $w.choices[0].message.tool_calls[0].function and
        .[-1].choices[0].finish_reason == "tool_calls" and
        ([.[].choices[0].delta.content // empty] | join("")) == ""' <<<"$events" >/dev/null ||
        fail_with "$events"
}

@test "our own format for templates without one: a call or a response, always JSON" {
    serve --chat-template-file "$T/SmolLM2-135M-Instruct.jinja"
    local seed out calls=0 answers=0
    for seed in 1 2 3 4 5 6; do
        out=$(post /v1/chat/completions "{$ASK,$TOOLS,\"parallel_tool_calls\":false,\"max_tokens\":400,\"temperature\":1,\"seed\":$seed}")
        case $(jq -r .choices[0].finish_reason <<<"$out") in
        tool_calls) valid_calls "$out"; calls=$((calls + 1)) ;;
        stop) jq -e '.choices[0].message.content | type == "string"' <<<"$out" >/dev/null || fail_with "$out"
              answers=$((answers + 1)) ;;
        length) ;; # a long response cut short stays its JSON text
        *) fail_with "$out" ;;
        esac
    done
    ((calls + answers > 0)) || fail_with "no reply ended within 400 tokens"
    # the tools are described in a system message of ours
    out=$(post /v1/chat/completions "{$ASK,$TOOLS,\"tool_choice\":\"required\",\"max_tokens\":1}" -o /dev/null -w '%{http_code}')
    [[ $out == 200 ]]
}

@test "history: calls and results rendered through each template; none shows no tools" {
    # two calls and their two results: one user turn for templates
    # without a tool role (Gemma's and Llama 2's turns must alternate)
    local hist='"messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":null,"tool_calls":[{"id":"abcdefghi","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},{"id":"bcdefghij","type":"function","function":{"name":"get_time","arguments":"{\"zone\": \"CET\"}"}}]},{"role":"tool","tool_call_id":"abcdefghi","name":"get_weather","content":"21 C"},{"role":"tool","tool_call_id":"bcdefghij","name":"get_time","content":"12:00"}]'
    local t out
    # Llama 3.1's template takes one call a turn, and says so: a 400
    serve --chat-template-file "$T/meta-llama-Llama-3.1-8B-Instruct.jinja"
    out=$(post /v1/chat/completions "{$hist,$TOOLS,\"max_tokens\":4}")
    jq -e '.error.code == "template_error" and (.error.message | test("single tool-calls"))' <<<"$out" >/dev/null ||
        fail_with "$out"
    out=$(post /v1/chat/completions "{$(jq -c '.messages[1].tool_calls |= .[:1] | del(.messages[3]) | {messages} | tostring[1:-1]' <<<"{$hist}" | jq -r .),$TOOLS,\"max_tokens\":4}")
    jq -e '.choices[0].message.role == "assistant"' <<<"$out" >/dev/null || fail_with "$out"
    stop_server
    for t in Qwen-Qwen2.5-7B-Instruct \
        mistralai-Mistral-Nemo-Instruct-2407 google-gemma-3-1b-it SmolLM2-135M-Instruct Qwen3-Coder \
        meta-llama-Llama-2-7b-chat-hf; do
        serve --chat-template-file "$T/$t.jinja"
        out=$(post /v1/chat/completions "{$hist,$TOOLS,\"max_tokens\":4,\"seed\":1}")
        jq -e '.choices[0].message.role == "assistant"' <<<"$out" >/dev/null || fail_with "$t: $out"
        # tool_choice none: no tools in the prompt, so it is shorter
        local with without
        with=$(jq .usage.prompt_tokens <<<"$out")
        without=$(post /v1/chat/completions "{$hist,$TOOLS,\"tool_choice\":\"none\",\"max_tokens\":4}" | jq .usage.prompt_tokens)
        ((without < with)) || fail_with "$t: $without tokens without tools, $with with"
        stop_server
    done
}

# A random model with gpt-oss's vocabulary fixture of real size
# (tests/fixtures/vocab/gpt-4o-llama3: harmony's specials after Llama 3's
# 128,000 tokens, gpt-oss's template), made to draw among harmony's markers
# and a few words (logit_bias, seeded sampling).  The text the server gives
# with --reasoning-format none, split by tool-split, is the reference: with
# the reasoning split on (no tools asked for) the reply has the same parts,
# whole and streamed.  <|end|> does not end a reply (it shows in the text),
# <|return|> does (finish_reason stop, never in the text).
@test "gpt-oss: analysis to reasoning_content, final to content, whole and streamed; <|return|> ends a reply, <|end|> does not" {
    local d=$BATS_TEST_TMPDIR w id bias='' seed raw ref whole ev
    gzip -dc "$FIX/vocab/gpt-4o-llama3.gguf.gz" >"$d/v.gguf"
    gguf2mlb -q --tokenizer-only -o "$d/g.mlt" "$d/v.gguf"
    "$MKMODEL" -o "$d/g.mlb" --seed 7 vocab=128009 wtype=2 scale_f16=1 shared_classifier=1 max_seq=256
    for w in '<|channel|>' analysis final '<|message|>' Hi '<|end|>' '<|start|>' '<|return|>'; do
        id=$(mlt-dump --no-bos --encode "$w" "$d/g.mlt")
        [[ $id =~ ^[0-9]+$ ]] || fail_with "$w is not one token: $id"
        bias+="${bias:+,}\"$id\":$([[ $w == '<|return|>' ]] && echo 59 || echo 60)"
    done
    # The template writes today's date into the prompt, and the seeded
    # replies follow the prompt: a fixed date keeps them the same every day.
    sed 's/strftime_now("%Y-%m-%d")/"2026-12-07"/' "$T/openai-gpt-oss-120b.jinja" >"$d/gpt-oss.jinja"
    ! grep -q strftime_now "$d/gpt-oss.jinja" || fail_with "the template's date was not fixed"
    start_server "$d/log-none" -m "$d/g.mlb" -t 1 --reasoning-format none \
        --chat-template-file "$d/gpt-oss.jinja"
    local none_url=$URL none_pid=$SERVER_PID
    start_server "$d/log-split" -m "$d/g.mlb" -t 1 --chat-template-file "$d/gpt-oss.jinja"
    local reasoned=0 answered=0 ended=0 went_on=0
    for seed in 1 2 3 4 5 6 7 8 9 10; do
        local body="{\"messages\":[{\"role\":\"user\",\"content\":\"Q\"}],\"max_tokens\":24,\"temperature\":2,\"seed\":$seed,\"logit_bias\":{$bias}"
        whole=$(URL=$none_url post /v1/chat/completions "$body}")
        raw=$(jq -r .choices[0].message.content <<<"$whole")
        [[ $raw != *'<|return|>'* ]] || fail_with "<|return|> in the text: $whole"
        case $(jq -r .choices[0].finish_reason <<<"$whole") in
        stop) ended=$((ended + 1)) ;;
        length) ;;
        *) fail_with "$whole" ;;
        esac
        [[ $raw == *'<|end|>'?* ]] && went_on=$((went_on + 1))
        ref=$(printf '%s' "$raw" | "$SPLIT" gpt-oss)
        whole=$(post /v1/chat/completions "$body}")
        jq -e --argjson r "$ref" '.choices[0].message |
            (.reasoning_content // "") == $r.reasoning and (.content // "") == $r.content' \
            <<<"$whole" >/dev/null || fail_with "seed $seed: raw '$raw': $(jq -c .choices[0].message <<<"$whole"), reference $ref"
        [[ $(jq -r .reasoning <<<"$ref") ]] && reasoned=$((reasoned + 1))
        [[ $(jq -r .content <<<"$ref") && $(jq -r .content <<<"$ref") != "$raw" ]] && answered=$((answered + 1))
        # streamed: the deltas add up to the same two parts
        ev=$(post /v1/chat/completions "$body,\"stream\":true}" -N | sed -n 's/^data: {/{/p')
        [[ $(jq -sj 'map(.choices[0].delta.reasoning_content // empty) | add // ""' <<<"$ev") == \
           "$(jq -j .reasoning <<<"$ref")" ]] || fail_with "seed $seed stream: $ev"
        [[ $(jq -sj 'map(.choices[0].delta.content // empty) | add // ""' <<<"$ev") == \
           "$(jq -j .content <<<"$ref")" ]] || fail_with "seed $seed stream: $ev"
    done
    stop_server
    SERVER_PID=$none_pid stop_server
    ((reasoned >= 2 && answered >= 2 && ended >= 1 && went_on >= 1)) ||
        fail_with "of 10 replies $reasoned reasoned, $answered answered in a channel, $ended ended by <|return|>, $went_on went on after <|end|>"
}

# gpt-oss's template writes an assistant turn's analysis from "thinking";
# a client sends back the reasoning_content it got, which must count the
# same (prompt_tokens: the same as with thinking, more than without).
@test "gpt-oss: an assistant turn's reasoning_content reaches the template as its thinking" {
    serve --chat-template-file "$T/openai-gpt-oss-120b.jinja"
    local call='{"id":"abcdefghi","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}'
    local r='The user wants the weather in Paris, so I call the tool.' k n=() body
    for k in none reasoning_content thinking; do
        local extra=
        [[ $k != none ]] && extra="\"$k\":\"$r\","
        body="{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},{\"role\":\"assistant\",\"content\":\"\",$extra\"tool_calls\":[$call]},{\"role\":\"tool\",\"tool_call_id\":\"abcdefghi\",\"content\":\"21 C\"}],$TOOLS,\"max_tokens\":1}"
        n+=("$(post /v1/chat/completions "$body" | jq -e .usage.prompt_tokens)") || fail_with "$k: $body"
    done
    ((n[1] > n[0] && n[1] == n[2])) || fail_with "prompt tokens: none ${n[0]}, reasoning_content ${n[1]}, thinking ${n[2]}"
}
