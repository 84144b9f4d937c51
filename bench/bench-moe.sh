#!/usr/bin/env bash
# bench-moe.sh - ml-run against llama.cpp (and ik_llama.cpp when given) on
# mixtures of experts in real models' full shapes, random weights in the
# types users download: Qwen3-30B-A3B in llama-quantize's Q4_K_M (48
# layers, 128 experts of width 768, 8 used; 18.6 GB) and gpt-oss-20b in
# MXFP4_MOE (24 layers, 32 experts of width 2880, 4 used; 12.1 GB), made
# by bench/make-moe-gguf.py and converted losslessly by gguf2mlb, so both
# programs read the same blocks.  Prompt and generation tokens/s as
# bench-run measures them, generation against the bound of the bytes a
# token reads (its active experts, not the file), and peak RSS.
#
#   make bench-moe                  (or MLCORE_BUILD=build bash bench/bench-moe.sh)
#   MODELS="qwen3moe gpt-oss"  THREADS=2 PROMPT=512 GEN=128 ROUNDS=2
#   BENCH_DIR=/tmp  where the models go: each model needs its GGUF and its
#                   .mlb on disk (37 GB for Qwen3, 24 GB for gpt-oss)
#   LLAMA_BIN=DIR, IK_LLAMA_BIN=DIR as for bench-run
# A file this size and its twin do not both fit a small machine's page
# cache: each program's file is read into it (cat) before the program
# runs, so neither is timed reading a disk.
set -euo pipefail
B=${MLCORE_BUILD:-build}
DIR=${BENCH_DIR:-/tmp}
T=${THREADS:-2}
NP=${PROMPT:-512}
NG=${GEN:-128}
MODELS=${MODELS:-"qwen3moe gpt-oss"}
here=$(cd "$(dirname "$0")" && pwd)

# shellcheck source=bench/llama.sh
. "$here/llama.sh"
# shellcheck source=bench/limits.sh
. "$here/limits.sh"

LB=$(llama_bin "$DIR/mlcore-llama.cpp" llama-bench llama-quantize)
limits_build "$DIR"
IKB=${IK_LLAMA_BIN:-}
if [ -n "$IKB" ] && [ ! -x "$IKB/llama-bench" ]; then
    echo "bench-moe: IK_LLAMA_BIN=$IKB has no llama-bench; ik_llama.cpp rows left out" >&2
    IKB=
fi
max() { awk -v a="$1" -v b="$2" 'BEGIN { print (b > a ? b : a) }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { print (b > 0 ? a / b : 0) }'; }
rss() { /usr/bin/time -f "%M" "$@" 2>&1 >/dev/null | tail -1; }
# The bandwidth is measured around every run (a shared machine's moves by
# tens of percent within minutes): generation is set against the larger
# of the two readings that frame its run (tg/bw-now) and against the best
# of the whole script (tg/bound), as bench-run does.
bw_best=0 bw_now=0
measure_bw() {
    bw_now=$("$DIR/mlcore-bandwidth" "$T" | awk -v t="$T" '$1 == t { print $2 }')
    bw_best=$(max "$bw_best" "$bw_now")
}
# of_bw TPS BW_BEFORE: the share of the framing bandwidth a decode of TPS reads
of_bw() { awk -v t="$1" -v p="$per_tok" -v a="$2" -v b="$bw_now" 'BEGIN { print t * p / ((a > b ? a : b) * 1e9) }'; }

# moe_model NAME: sets g and m to the model's GGUF and .mlb, making them
# once.  Qwen3's Q4_K_M mix is llama-quantize's own, read from its output
# for a 48-layer file of the same names with every width 256 (a minute)
# and drawn at full width.
moe_model() {
    local base="$DIR/mlcore-moe-$1"
    case $1 in
    qwen3moe)
        g=$base-q4_k_m.gguf
        if [ ! -f "$g" ]; then
            python3 "$here/make-moe-gguf.py" "$base-mini.gguf" 48 --mini
            "$LB/llama-quantize" --allow-requantize "$base-mini.gguf" "$base-mini-q4_k_m.gguf" \
                Q4_K_M >/dev/null 2>&1
            python3 "$here/make-moe-gguf.py" "$g.part" 48 --mix "$base-mini-q4_k_m.gguf"
            rm -f "$base-mini.gguf" "$base-mini-q4_k_m.gguf"
            mv "$g.part" "$g"
        fi ;;
    gpt-oss)
        g=$base-mxfp4.gguf
        if [ ! -f "$g" ]; then
            python3 "$here/make-moe-gguf.py" "$g.part" --arch gpt-oss --mxfp4
            mv "$g.part" "$g"
        fi ;;
    *) echo "bench-moe: unknown model $1 (qwen3moe or gpt-oss)" >&2; return 2 ;;
    esac
    m=${g%.gguf}.mlb
    [ -f "$m" ] || "$B/bin/gguf2mlb" "$g" -o "$m" -t "${m%.mlb}.mlt" -q -f
}

measure_bw
echo "memory read bandwidth, $T threads: $bw_best GB/s (first measurement)"
printf '%-9s %-10s %10s %10s %8s\n' model test llama.cpp mlcore ratio
ids=$(seq 1 "$NP" | awk '{ printf "%d ", ($1 * 7919) % 31000 + 3 }')
for name in $MODELS; do
    moe_model "$name"
    per_tok=$(decode_bytes "$m")
    l_pp=0 l_tg=0 m_pp=0 m_tg=0 ik_pp=0 ik_tg=0 l_rb=0 m_rb=0
    for _ in $(seq "${ROUNDS:-2}"); do
        cat "$g" >/dev/null
        measure_bw
        before=$bw_now
        json=$("$LB/llama-bench" -m "$g" -t "$T" -p "$NP" -n "$NG" -r 1 -o json 2>/dev/null)
        l_pp=$(max "$l_pp" "$(echo "$json" | bench_ts pp)")
        tg=$(echo "$json" | bench_ts tg)
        l_tg=$(max "$l_tg" "$tg")
        measure_bw
        l_rb=$(max "$l_rb" "$(of_bw "$tg" "$before")")
        if [ -n "$IKB" ]; then # its -rtr repacks into memory: no room for that here
            json=$("$IKB/llama-bench" -m "$g" -t "$T" -p "$NP" -n "$NG" -r 1 -o json 2>/dev/null) && {
                ik_pp=$(max "$ik_pp" "$(echo "$json" | bench_ts pp)")
                ik_tg=$(max "$ik_tg" "$(echo "$json" | bench_ts tg)")
            }
        fi
        cat "$m" >/dev/null
        line=$("$B/bin/ml-run" -m "$m" --ids -p "$ids" -n 0 -t "$T" --ctx $((NP + 8)) 2>&1 >/dev/null | tail -1)
        m_pp=$(max "$m_pp" "$(echo "$line" | sed -n 's/.*prompt [0-9]* tokens, \([0-9.]*\) tokens\/s.*/\1/p')")
        measure_bw
        before=$bw_now
        line=$("$B/bin/ml-run" -m "$m" --ids -p 1 -n "$NG" --ignore-eos --temp 0 -t "$T" \
            --ctx $((NG + 8)) 2>&1 >/dev/null | tail -1)
        tg=$(echo "$line" | sed -n 's/.*generation [0-9]* tokens, \([0-9.]*\) tokens\/s.*/\1/p')
        m_tg=$(max "$m_tg" "$tg")
        measure_bw
        m_rb=$(max "$m_rb" "$(of_bw "$tg" "$before")")
    done
    bound=$(awk -v b="$bw_best" -v p="$per_tok" 'BEGIN { print b * 1e9 / p }')
    printf '%-9s %-10s %10.2f %10.2f %8.2f\n' "$name" "pp$NP" "$l_pp" "$m_pp" "$(ratio "$m_pp" "$l_pp")"
    printf '%-9s %-10s %10.2f %10.2f %8.2f\n' "$name" "tg$NG" "$l_tg" "$m_tg" "$(ratio "$m_tg" "$l_tg")"
    if [ -n "$IKB" ]; then
        printf '%-9s %-10s %10.2f %10.2f %8.2f   (ik_llama.cpp in the first column)\n' \
            "$name" "pp$NP/ik" "$ik_pp" "$m_pp" "$(ratio "$m_pp" "$ik_pp")"
        printf '%-9s %-10s %10.2f %10.2f %8.2f   (ik_llama.cpp in the first column)\n' \
            "$name" "tg$NG/ik" "$ik_tg" "$m_tg" "$(ratio "$m_tg" "$ik_tg")"
    fi
    printf '%-9s %-10s %10.2f %10.2f %8.2f   (bound %.2f tokens/s: %.2f GB a token at %s GB/s, the best seen)\n' \
        "$name" "tg/bound" "$(ratio "$l_tg" "$bound")" "$(ratio "$m_tg" "$bound")" "$(ratio "$m_tg" "$l_tg")" \
        "$bound" "$(awk -v p="$per_tok" 'BEGIN { print p / 1e9 }')" "$bw_best"
    printf '%-9s %-10s %10.2f %10.2f %8.2f   (best round, against the bandwidth measured around the run)\n' \
        "$name" "tg/bw-now" "$l_rb" "$m_rb" "$(ratio "$m_rb" "$l_rb")"
    if [ -x /usr/bin/time ]; then
        cat "$g" >/dev/null
        r_l=$(rss "$LB/llama-bench" -m "$g" -t "$T" -p 0 -n 16 -r 1)
        cat "$m" >/dev/null
        r_m=$(rss "$B/bin/ml-run" -m "$m" --ids -p "1 2 3" -n 16 --ignore-eos -t "$T" --ctx $((NP + NG + 8)) -q)
        printf '%-9s %-10s %10.0f %10.0f %8.2f   (peak RSS, MiB)\n' "$name" "rss" "$((r_l / 1024))" \
            "$((r_m / 1024))" "$(ratio "$r_m" "$r_l")"
    fi
done
