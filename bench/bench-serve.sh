#!/usr/bin/env bash
# bench-serve.sh - ml-serve against llama-server on the same weights, same
# threads, same slots, same machine, in one run: single-stream generation
# tokens/s, aggregate tokens/s of STREAMS concurrent streams (and its
# ratio to single-stream), time to the first token of a 512-token prompt,
# and the same 512-token "system prompt" sent twice (the second should
# evaluate only what follows it).  The client is bench/bench-serve.py
# (streaming /v1/completions, token-id prompts, ignore_eos, temperature
# 0).  The models are bench/make-bench-gguf.py's random-weight GGUFs,
# converted losslessly by gguf2mlb, so both servers read the same blocks.
#
#   make bench-serve            (or MLCORE_BUILD=build bash bench/bench-serve.sh)
#   LLAMA_BIN=DIR   directory holding llama-server (else built once from the
#                   llama-cpp-python source package, as bench-run.sh does)
#   BENCH_DIR=/tmp  where the models and the build go
#   THREADS=2 PARALLEL=4 STREAMS=4 GEN=128 PROMPT=512 CTX=1024 (per slot)
#   SHAPES="tinyllama" TYPES="q4_0"   ROUNDS=3 (alternating; best of each)
# Each row ends with the 1-minute load average after its last round: a
# number taken under load is not a speed.
set -euo pipefail
B=${MLCORE_BUILD:-build}
DIR=${BENCH_DIR:-/tmp}
T=${THREADS:-2}
NP=${PARALLEL:-4}
NS=${STREAMS:-4}
NG=${GEN:-128}
PL=${PROMPT:-512}
CTX=${CTX:-1024}
SHAPES=${SHAPES:-tinyllama}
TYPES=${TYPES:-q4_0}
here=$(cd "$(dirname "$0")" && pwd)

# shellcheck source=bench/llama.sh
. "$here/llama.sh"
# shellcheck source=bench/serve.sh
. "$here/serve.sh"

LB=$(llama_bin "$DIR/mlcore-llama.cpp" llama-server)
cc -O2 -pthread "$here/bandwidth.c" -o "$DIR/mlcore-bandwidth"
load() { cut -d' ' -f1 /proc/loadavg; }
max() { awk -v a="$1" -v b="$2" 'BEGIN { print (b > a ? b : a) }'; }
min() { awk -v a="$1" -v b="$2" 'BEGIN { print (a == 0 || b < a ? b : a) }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

# measure NAME COMMAND...: starts the server (with "--host 127.0.0.1 --port
# P" appended; its log in $DIR/mlcore-bench-serve-NAME.log), runs the
# client, stops it; prints the client's lines.
measure() {
    local port log="$DIR/mlcore-bench-serve-$1.log"
    shift
    port=$(free_port)
    "$@" --host 127.0.0.1 --port "$port" >"$log" 2>&1 &
    local pid=$!
    wait_health "http://127.0.0.1:$port" "$pid" "$log"
    python3 "$here/bench-serve.py" "http://127.0.0.1:$port" --streams "$NS" --gen "$NG" \
        --prompt "$PL" --vocab "$vocab" || { kill "$pid"; return 1; }
    kill "$pid"
    wait "$pid" 2>/dev/null || true
}

bw=$("$DIR/mlcore-bandwidth" "$T" | awk -v t="$T" '$1 == t { print $2 }')
echo "memory read bandwidth, $T threads: $bw GB/s; $NP slots, $NS streams of $NG tokens, $PL-token prompts"
printf '%-9s %-6s %-22s %12s %12s %8s\n' shape type test llama-server ml-serve ratio

for SHAPE in $SHAPES; do
for ty in $TYPES; do
    bench_model "$DIR" "$SHAPE" "$ty"
    cat "$g" >/dev/null; cat "$m" >/dev/null
    vocab=$("$B/bin/mlb-info" --json "$m" | python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["vocab"])')
    declare -A best=()
    for _ in $(seq "${ROUNDS:-3}"); do
        # llama-server's context is shared by its slots: NP x CTX holds CTX each.
        for prog in llama mlcore; do
            if [ $prog = llama ]; then
                out=$(measure llama "$LB/llama-server" -m "$g" -t "$T" -tb "$T" -np "$NP" \
                    -c $((NP * CTX)) --no-webui)
            else
                out=$(measure mlcore "$B/bin/ml-serve" -m "$m" -t "$T" --parallel "$NP" --ctx "$CTX")
            fi
            while read -r k v; do
                case $k in
                *_tps) best[$prog.$k]=$(max "${best[$prog.$k]:-0}" "$v") ;;
                *) best[$prog.$k]=$(min "${best[$prog.$k]:-0}" "$v") ;;
                esac
            done <<<"$out"
        done
    done
    row() { # test key higher-is-better
        local l=${best[llama.$2]} m=${best[mlcore.$2]} r
        if [ "$3" = 1 ]; then r=$(ratio "$m" "$l"); else r=$(ratio "$l" "$m"); fi
        printf '%-9s %-6s %-22s %12.2f %12.2f %8s   (load %s)\n' "$SHAPE" "$ty" "$1" "$l" "$m" "$r" "$(load)"
    }
    row "single tokens/s" single_tps 1
    row "$NS streams tokens/s" aggregate_tps 1
    printf '%-9s %-6s %-22s %12s %12s %8s   (each server against itself)\n' "$SHAPE" "$ty" \
        "$NS streams / single" "$(ratio "${best[llama.aggregate_tps]}" "${best[llama.single_tps]}")" \
        "$(ratio "${best[mlcore.aggregate_tps]}" "${best[mlcore.single_tps]}")" "-"
    row "TTFT $PL-token ms" ttft_ms 0
    row "system prompt 1st ms" sys1_ms 0
    row "system prompt 2nd ms" sys2_ms 0
    unset best
done
done
echo "ratio: ml-serve's advantage (tokens/s: ml-serve / llama-server; ms: llama-server / ml-serve)"
