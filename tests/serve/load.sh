#!/usr/bin/env bash
# load.sh - `make check-serve-load`: 8 concurrent clients x 20 requests
# against ml-serve --parallel 4 on a tiny fixture model.  Every request
# (its own prompt, seed, length and stream setting) is first run alone on
# an idle server; under load each answer must be complete (the finish
# reason and token count of its run alone) and its text identical.
source "$(dirname "$0")/common.sh"
CLIENTS=${CLIENTS:-8}
REQUESTS=${REQUESTS:-20}

start_server "$WORK/log" -m "$WORK/m.mlb" -t 1 --parallel 4 --queue 64 --chat-template llama2

# body C R: request R of client C; half of them share a system prompt
# (prefix reuse under load), some stream, lengths and seeds vary.
body() {
    local c=$1 r=$2 n=$(((c * 7 + r * 3) % 24 + 4)) stream=false
    ((r % 3 == 0)) && stream=true
    if ((r % 2)); then
        printf '{"messages":[{"role":"system","content":"You are a terse assistant."},{"role":"user","content":"Client %d asks question %d"}],"max_tokens":%d,"temperature":1,"top_k":0,"top_p":1,"min_p":0,"seed":%d,"stream":%s}' \
            "$c" "$r" "$n" "$((c * 100 + r))" "$stream"
    else
        printf '{"prompt":"Client %d, request %d:","max_tokens":%d,"temperature":0.9,"seed":%d,"stop":["zzq"],"stream":%s}' \
            "$c" "$r" "$n" "$((c * 100 + r))" "$stream"
    fi
}

# ask C R OUT: the text, finish reason and completion tokens, one per line.
ask() {
    local b path=/v1/completions
    b=$(body "$1" "$2")
    [[ $b == '{"messages"'* ]] && path=/v1/chat/completions
    if [[ $b == *'"stream":true}' ]]; then
        post "$path" "${b%\}},\"stream_options\":{\"include_usage\":true}}" -N |
            grep '^data: {' | sed 's/^data: //' |
            jq -sj '(map(.choices[0] | (.delta.content // .text // "")) | add), "\n",
                    (map(.choices[0].finish_reason // empty) | .[0]), "\n",
                    .[-1].usage.completion_tokens, "\n"' >"$3"
    else
        post "$path" "$b" | jq -j '(.choices[0] | (.message.content // .text)), "\n",
                                   .choices[0].finish_reason, "\n", .usage.completion_tokens, "\n"' >"$3"
    fi
}

echo "load: $((CLIENTS * REQUESTS)) requests alone"
for ((c = 0; c < CLIENTS; c++)); do
    for ((r = 0; r < REQUESTS; r++)); do
        ask "$c" "$r" "$WORK/alone-$c-$r"
    done
done

echo "load: $CLIENTS clients x $REQUESTS requests at once against --parallel 4"
t0=$SECONDS
pids=()
for ((c = 0; c < CLIENTS; c++)); do
    (for ((r = 0; r < REQUESTS; r++)); do ask "$c" "$r" "$WORK/load-$c-$r"; done) &
    pids+=($!)
done
wait "${pids[@]}" # not the server, which is a child too

bad=0
for ((c = 0; c < CLIENTS; c++)); do
    for ((r = 0; r < REQUESTS; r++)); do
        if ! cmp -s "$WORK/alone-$c-$r" "$WORK/load-$c-$r"; then
            echo "load: client $c request $r differs from its run alone:" >&2
            diff "$WORK/alone-$c-$r" "$WORK/load-$c-$r" >&2 || true
            bad=$((bad + 1))
        elif [[ $(sed -n 2p "$WORK/load-$c-$r") != @(stop|length) ]]; then
            echo "load: client $c request $r is incomplete" >&2
            bad=$((bad + 1))
        fi
    done
done
reused=$(grep -c 'reused), completion' "$WORK/log" || true)
echo "load: $((CLIENTS * REQUESTS - bad)) of $((CLIENTS * REQUESTS)) identical to their runs alone" \
    "($((SECONDS - t0)) s under load; $(grep -Ec '\([1-9][0-9]* reused\)' "$WORK/log") of $reused prompts reused a prefix)"
stop_server
((bad == 0))
