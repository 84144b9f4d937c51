#!/usr/bin/env bash
# bench-context.sh - ml-run against llama.cpp as the context grows, same
# weights, same machine, same threads: generation after N positions
# already in the KV cache (depth), and prompt processing of N tokens at
# once, for both programs.  bench-run.sh measures only an empty context
# (tg128) and one 512-token prompt; attention's share grows with N, and
# that is where the two programs may part.  The model is a random-weight
# GGUF from make-bench-gguf.py (by default in SmolLM2-135M's shape, Q8_0,
# whose context is 8192), converted losslessly to .mlb.
#
#   make bench-context            (or MLCORE_BUILD=build bash bench/bench-context.sh)
#   LLAMA_BIN=DIR  llama-bench's directory (else built once, see llama.sh)
#   BENCH_DIR=/tmp where the models and the build go
#   SHAPES=smollm2 TYPES=q8_0 THREADS=2 ROUNDS=3 GEN=32
#   DEPTHS="0 512 1024 2048 4096"     tgGEN@dN: GEN tokens after N positions
#   PROMPTS="128 512 1024 2048 4096"  ppN: a prompt of N tokens alone
#   CACHES="f16 f32"   the KV cache types, each a set of rows (ml-run
#                      --cache-type; llama-bench -ctk -ctv, but its
#                      cache stays f16, its default, in the f32 rows:
#                      llama-bench refuses -ctk f32); f32 is ml-run's
#                      default; q8_0 and q4_0 too (llama-bench then
#                      with -fa 1, which its quantized V cache needs)
#   Depths past the shape's context need a shape that has them:
#   SHAPES=gemma3 or qwen25 (32768; qwen25 attends to all of it in every
#   layer), e.g. DEPTHS="4096 16384" CACHES="f16 q8_0 q4_0" PROMPTS=" "
#
# llama.cpp: `llama-bench -p 0 -n GEN -d N` and `llama-bench -p N -n 0`
# (a llama-bench without -d gives '-' for depths above 0).  ml-run: a
# prompt of N token ids then GEN tokens, from the speeds its last stderr
# line reports ('prompt N tokens, X tokens/s; generation M tokens, Y
# tokens/s').  Every test point runs ROUNDS times, llama.cpp and ml-run in
# turn, and the best of each program is compared, so a noisy neighbour
# hurts neither more.  Each row also gives both programs' speed against
# the machine's limits printed at the start: prompts as a fraction of the
# int8 multiply-add peak (int8peak.c; the matrices' work only, as
# bench-run.sh's pp/peak), generation as a fraction of the bandwidth bound
# of the weights alone (bandwidth.c, the best seen in the run; the KV cache
# a deep token also reads is not in it, so the fraction falls with depth
# by what attention costs), then the 1-minute load average.
# Needs: python3 with numpy and gguf (to make the model).
set -euo pipefail
B=${MLCORE_BUILD:-build}
DIR=${BENCH_DIR:-/tmp}
T=${THREADS:-2}
SHAPES=${SHAPES:-smollm2}
TYPES=${TYPES:-q8_0}
NG=${GEN:-32}
CACHES=${CACHES:-"f16 f32"}
DEPTHS=${DEPTHS:-"0 512 1024 2048 4096"}
PROMPTS=${PROMPTS:-"128 512 1024 2048 4096"}
here=$(cd "$(dirname "$0")" && pwd)

# shellcheck source=bench/llama.sh
. "$here/llama.sh"
# shellcheck source=bench/limits.sh
. "$here/limits.sh"

LB=$(llama_bin "$DIR/mlcore-llama.cpp" llama-bench)
has_depth=0
# The help is read whole first: under pipefail, `grep -q` closing the pipe
# early made llama-bench die of SIGPIPE now and then, and the depth rows
# came out '-' though this llama-bench has -d.
help=$("$LB/llama-bench" --help 2>&1 || true)
case $help in *--n-depth*) has_depth=1 ;; esac
limits_build "$DIR"
bw_best=0
measure_bw() {
    local bw
    bw=$("$DIR/mlcore-bandwidth" "$T" | awk -v t="$T" '$1 == t { print $2 }')
    bw_best=$(max "$bw_best" "$bw")
}
max() { awk -v a="$1" -v b="$2" 'BEGIN { print (b > a ? b : a) }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
load() { cut -d' ' -f1 /proc/loadavg; }
ids() { seq 1 "$1" | awk '{ printf "%d ", ($1 * 7919) % 31000 + 3 }'; }

# llama-bench's tokens/s for one test (its JSON: one entry per test).
llama_ts() {
    local kv_args=()
    [ "$kv" = f32 ] || kv_args=(-ctk "$kv" -ctv "$kv")
    # llama.cpp quantizes its V cache only with flash attention on
    case $kv in q*) kv_args+=(-fa 1) ;; esac
    "$LB/llama-bench" -m "$g" -t "$T" "${kv_args[@]}" -r 1 -o json "$@" 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["avg_ts"])'
}
# ml-run's prompt (pp) or generation (tg) tokens/s from its last line.
mlrun_ts() {
    local what=$1 n_prompt=$2 n_gen=$3 line
    line=$("$B/bin/ml-run" -m "$m" --ids -p "$(ids "$n_prompt")" -n "$n_gen" --ignore-eos \
        --temp 0 -t "$T" --cache-type "$kv" --ctx $((n_prompt + n_gen + 40)) 2>&1 >/dev/null | tail -1)
    case $what in
    pp) echo "$line" | sed -n 's/.*prompt [0-9]* tokens, \([0-9.]*\) tokens\/s.*/\1/p' ;;
    tg) echo "$line" | sed -n 's/.*generation [0-9]* tokens, \([0-9.]*\) tokens\/s.*/\1/p' ;;
    esac
}

measure_bw
limits_int8 "$DIR" "$T"
echo "memory read bandwidth, $T threads: $bw_best GB/s (first measurement)"
echo "int8 multiply-add peak, $T threads: $int8_peak GOP/s ($int8_isa; all: $int8_all)$(rule3_note)"
printf '%-9s %-9s %-12s %10s %10s %8s\n' shape type/kv test llama.cpp mlcore ratio

for SHAPE in $SHAPES; do
for ty in $TYPES; do
    bench_model "$DIR" "$SHAPE" "$ty"
    cat "$g" "$m" > /dev/null
    per_tok=$(decode_bytes "$m")
    read -r w_tok w_cls < <(matmul_weights "$m")
    for kv in $CACHES; do
    for n in $PROMPTS; do
        l=0 r=0
        for _ in $(seq "${ROUNDS:-3}"); do
            measure_bw
            l=$(max "$l" "$(llama_ts -p "$n" -n 0)")
            r=$(max "$r" "$(mlrun_ts pp "$n" 0)")
        done
        printf '%-9s %-9s %-12s %10.2f %10.2f %8s   (of int8 peak: %s, %s; load %s)\n' \
            "$SHAPE" "$ty/$kv" "pp$n" "$l" "$r" "$(ratio "$r" "$l")" \
            "$(pp_of_peak "$l" "$n" "$w_tok" "$w_cls")" "$(pp_of_peak "$r" "$n" "$w_tok" "$w_cls")" "$(load)"
    done
    for d in $DEPTHS; do
        l=0 r=0
        for _ in $(seq "${ROUNDS:-3}"); do
            measure_bw
            if [ "$d" -eq 0 ]; then
                l=$(max "$l" "$(llama_ts -p 0 -n "$NG")")
            elif [ "$has_depth" = 1 ]; then
                l=$(max "$l" "$(llama_ts -p 0 -n "$NG" -d "$d")")
            fi
            # Depth 0 is a one-token prompt (ml-run needs one), as bench-run.sh.
            r=$(max "$r" "$(mlrun_ts tg $((d > 0 ? d : 1)) "$NG")")
        done
        bound=$(awk -v b="$bw_best" -v p="$per_tok" 'BEGIN { print b * 1e9 / p }')
        printf '%-9s %-9s %-12s %10s %10.2f %8s   (of the weights'"'"' bound, %.1f tokens/s at %s GB/s: %s, %s; load %s)\n' \
            "$SHAPE" "$ty/$kv" "tg$NG@d$d" "$(awk -v a="$l" 'BEGIN { if (a > 0) printf "%.2f", a; else print "-" }')" \
            "$r" "$(ratio "$r" "$l")" "$bound" "$bw_best" "$(ratio "$l" "$bound")" "$(ratio "$r" "$bound")" "$(load)"
    done
    done
done
done
echo "memory read bandwidth, $T threads: $bw_best GB/s (the best seen)"
