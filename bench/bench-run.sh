#!/usr/bin/env bash
# bench-run.sh - ml-run against llama.cpp on the same weights, same machine,
# same threads: generation and prompt-processing tokens/s, generation
# against the memory-bandwidth bound, and peak RSS.  The models are GGUFs
# with random Q8_0 and Q4_0 weights (bench/make-bench-gguf.py) in the shape
# of TinyLlama-1.1B (llama) and of Gemma 3 270M (gemma3: sliding window,
# one KV head of 256, a 262144-token tied classifier), and llama-quantize's
# Q4_K_M, Q5_K_M, Q6_K and IQ4_XS of the Q8_0 one (the files users
# download), each converted losslessly by gguf2mlb's default, so both
# programs read the very same blocks.
#
#   make bench-run                  (or MLCORE_BUILD=build bash bench/bench-run.sh)
#   LLAMA_BIN=DIR   directory holding llama-bench (a llama.cpp build);
#                   without it the script builds llama.cpp from the
#                   llama-cpp-python source package (pip download) once.
#   BENCH_DIR=/tmp  where the models and the build go
#   THREADS=2 SHAPES="tinyllama gemma3" PROMPT=512 GEN=128
#   TYPES="q8_0 q4_0 q4_k_m q5_k_m q6_k iq4_xs"  (llama-quantize types of the q8_0)
#   ROUNDS=3        alternating measurements per model; the best of each
#   IK_LLAMA_BIN=DIR  directory holding ik_llama.cpp's llama-bench (the
#                   K-quants author's fork, a higher anchor on the CPU:
#                   built with cmake from its public repository, see
#                   docs/speed.md); when set, each round runs it too, with
#                   its default and with -rtr 1 (its run-time repacking),
#                   and rows pp$PROMPT/ik and tg$GEN/ik compare mlcore with
#                   its best.  Optional: without it those rows are left out.
#                   Its two runs a round make two draws of a noisy
#                   machine's fast moments, so llama.cpp and ml-run then
#                   run twice a round too: every program gets as many.
#   ISA=avx2        both programs as on an AVX2 machine, on any newer x86
#                   one: llama.cpp built with AVX2 only (llama.sh's
#                   LLAMA_ISA) and mlcore under ML_KERNELS=avx2 (ik_llama.cpp
#                   rows, when asked for, stay as built)
#   (SHAPE=NAME, the older spelling, picks one shape)
# Each row ends with the 1-minute load average when it was measured: on a
# shared machine a number taken under load is not a speed.
# Generation against the bandwidth bound is given three ways: tg/bound
# (the best bandwidth the script saw: pessimistic, the best moment of a
# noisy machine), tg/bw-now (the bandwidth measured just before and after
# the run), and tg/paired (bench-bound.c: the weights read once next to
# every decoded token, in one process: the measure noise moves least);
# read/bw checks that bench-bound's read is as fast as bandwidth.c's;
# tg/no-mmap is ml-run --no-mmap's decode against the mapping's, token by
# token in one process (bench-read.c).
# 2m-pages is the share of each program's model file that a mapping of it
# reaches through 2 MiB pages, in the page cache as the runs found it: a
# file the page cache holds in 4 KiB folios is read more slowly through
# its mapping than one in huge pages, whichever program maps it.
# Prompt processing is compute-bound; pp/peak sets it against the
# machine's int8 multiply-add peak (int8peak.c, printed at the start):
# 2 ops per multiply-add, each prompt token through every matrix but the
# embedding, the classifier once (limits.sh); the aim is 0.40.  pp/rule3
# sets the same work against the fastest rate vpdpbusd on zmm keeps with
# rule 3's float steps (lib/kernels/kernels.h) beside it (int8peak.c's
# rule3-512: well below the peak on CPUs whose float steps compete with
# vpdpbusd for its ports), which no bit-exact kernel can pass.
# Needs: python3 with numpy and gguf, cmake and g++ (to build llama.cpp).
set -euo pipefail
B=${MLCORE_BUILD:-build}
DIR=${BENCH_DIR:-/tmp}
T=${THREADS:-2}
SHAPES=${SHAPES:-${SHAPE:-"tinyllama gemma3"}}
NP=${PROMPT:-512}
NG=${GEN:-128}
TYPES=${TYPES:-"q8_0 q4_0 q4_k_m q5_k_m q6_k iq4_xs"}
here=$(cd "$(dirname "$0")" && pwd)
if [ "${ISA:-native}" = avx2 ]; then
    export LLAMA_ISA=avx2 ML_KERNELS=avx2
fi

# shellcheck source=bench/llama.sh
. "$here/llama.sh"
# shellcheck source=bench/limits.sh
. "$here/limits.sh"

# Peak RSS in MiB of a command (GNU time or /proc fallback not needed: bash
# reads it from getrusage through /usr/bin/time when present).
rss() { /usr/bin/time -f "%M" "$@" 2>&1 >/dev/null | tail -1; }

LB=$(llama_bin "$DIR/mlcore-llama.cpp" llama-bench llama-quantize)
limits_build "$DIR"
# bench-bound: ml-run's decode with the bound measured next to every token
# (see bench-bound.c); it links the library, so it is built from $B.
cc -O2 -std=c11 -I"$here/../include" "$here/bench-bound.c" "$B/libmlcore.a" \
    -lutf8proc -ldeflate -lz -lm -lpthread -o "$DIR/mlcore-bench-bound"
# bench-read: decode from the mapping against --no-mmap's copy, token by
# token in one process (see bench-read.c).
cc -O2 -std=c11 -I"$here/../include" "$here/bench-read.c" "$B/libmlcore.a" \
    -lutf8proc -ldeflate -lz -lm -lpthread -o "$DIR/mlcore-bench-read"
# The kernels the library chooses on this CPU, for the header.
cc -O2 -std=c11 -I"$here/../include" "$here/chosen-kernels.c" "$B/libmlcore.a" \
    -lutf8proc -ldeflate -lz -lm -lpthread -o "$DIR/mlcore-chosen-kernels"
# The bandwidth of a shared machine moves with its neighbours (by tens of
# percent within minutes): it is measured around every run, and each
# program's generation speed is set against the larger of the two
# measurements that frame its run (tg/bw-now), besides the best
# bandwidth seen in the whole script (tg/bound).
bw_best=0 bw_now=0
measure_bw() {
    bw_now=$("$DIR/mlcore-bandwidth" "$T" | awk -v t="$T" '$1 == t { print $2 }')
    bw_best=$(awk -v a="$bw_best" -v b="$bw_now" 'BEGIN { print (b > a ? b : a) }')
}
# The share of FILE's bytes a fresh mapping of it finds as 2 MiB page-cache
# folios (smaps' FilePmdMapped over Rss once populated).
huge_share() {
    python3 - "$1" <<'PY'
import mmap, os, sys
path = os.path.realpath(sys.argv[1])
with open(path, 'rb') as f:
    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    m.madvise(22)  # MADV_POPULATE_READ
    rss = pmd = 0
    mine = False
    for line in open('/proc/self/smaps'):
        w = line.split()
        if w and '-' in w[0] and len(w) >= 5:
            mine = w[-1] == path
        elif mine and w[0] == 'Rss:':
            rss += int(w[1])
        elif mine and w[0] == 'FilePmdMapped:':
            pmd += int(w[1])
    print('%.2f' % (pmd / rss if rss else 0))
PY
}
max() { awk -v a="$1" -v b="$2" 'BEGIN { print (b > a ? b : a) }'; }
IKB=${IK_LLAMA_BIN:-}
if [ -n "$IKB" ] && [ ! -x "$IKB/llama-bench" ]; then
    echo "bench-run: IK_LLAMA_BIN=$IKB has no llama-bench; ik_llama.cpp rows left out" >&2
    IKB=
fi
measure_bw
limits_int8 "$DIR" "$T"
echo "memory read bandwidth, $T threads: $bw_best GB/s (first measurement)"
echo "int8 multiply-add peak, $T threads: $int8_peak GOP/s ($int8_isa; all: $int8_all)$(rule3_note)"
echo "mlcore $("$DIR/mlcore-chosen-kernels")"
printf '%-9s %-6s %-10s %10s %10s %8s\n' shape type test llama.cpp mlcore ratio
load() { cut -d' ' -f1 /proc/loadavg; }

ids=$(seq 1 "$NP" | awk '{ printf "%d ", ($1 * 7919) % 31000 + 3 }')
for SHAPE in $SHAPES; do
for ty in $TYPES; do
    bench_model "$DIR" "$SHAPE" "$ty"
    cat "$g" > /dev/null; cat "$m" > /dev/null
    per_tok=$(decode_bytes "$m") # bytes of weights read per generated token
    read -r w_tok w_cls < <(matmul_weights "$m")
    # ROUNDS rounds, each: bandwidth, llama.cpp once, ml-run once, as
    # llama-bench measures them (pp = a 512-token prompt alone, tg = 128
    # tokens generated from an empty context); the best of each program's
    # rounds is compared, so a noisy neighbour hurts neither more.
    l_pp=0 l_tg=0 best_pp=0 best_tg=0 l_rb=0 m_rb=0 ik_pp=0 ik_tg=0
    draws=1
    [ -n "$IKB" ] && draws=2 # ik_llama.cpp's default and -rtr 1
    for _ in $(seq "${ROUNDS:-3}"); do
        measure_bw
        r_tg=0 # the round's best, for l_rb
        for _ in $(seq "$draws"); do
            json=$("$LB/llama-bench" -m "$g" -t "$T" -p "$NP" -n "$NG" -r 1 -o json 2>/dev/null)
            l_pp=$(max "$l_pp" "$(echo "$json" | bench_ts pp)")
            r_tg=$(max "$r_tg" "$(echo "$json" | bench_ts tg)")
        done
        l_tg=$(max "$l_tg" "$r_tg")
        tg=$r_tg
        if [ -n "$IKB" ]; then
            for rtr in 0 1; do
                json=$("$IKB/llama-bench" -m "$g" -t "$T" -p "$NP" -n "$NG" -r 1 -rtr "$rtr" \
                    -o json 2>/dev/null) || continue
                ik_pp=$(max "$ik_pp" "$(echo "$json" | bench_ts pp)")
                ik_tg=$(max "$ik_tg" "$(echo "$json" | bench_ts tg)")
            done
        fi
        bw_before=$bw_now
        measure_bw
        bw_frame=$(max "$bw_before" "$bw_now")
        l_rb=$(max "$l_rb" "$(awk -v t="$tg" -v p="$per_tok" -v b="$bw_frame" 'BEGIN { print t * p / (b * 1e9) }')")
        bw_before=$bw_now
        m_tg=0
        for _ in $(seq "$draws"); do
            line=$("$B/bin/ml-run" -m "$m" --ids -p "$ids" -n 0 -t "$T" --ctx $((NP + 8)) 2>&1 >/dev/null | tail -1)
            pp=$(echo "$line" | sed -n 's/.*prompt [0-9]* tokens, \([0-9.]*\) tokens\/s.*/\1/p')
            line=$("$B/bin/ml-run" -m "$m" --ids -p 1 -n "$NG" --ignore-eos --temp 0 -t "$T" \
                --ctx $((NG + 8)) 2>&1 >/dev/null | tail -1)
            tg=$(echo "$line" | sed -n 's/.*generation [0-9]* tokens, \([0-9.]*\) tokens\/s.*/\1/p')
            best_pp=$(max "$best_pp" "$pp")
            m_tg=$(max "$m_tg" "$tg")
        done
        best_tg=$(max "$best_tg" "$m_tg")
        tg=$m_tg
        measure_bw
        bw_frame=$(max "$bw_before" "$bw_now")
        m_rb=$(max "$m_rb" "$(awk -v t="$tg" -v p="$per_tok" -v b="$bw_frame" 'BEGIN { print t * p / (b * 1e9) }')")
    done
    bw=$bw_best
    bound=$(awk -v b="$bw" -v p="$per_tok" 'BEGIN { print b * 1e9 / p }')
    printf '%-9s %-6s %-10s %10.2f %10.2f %8.2f   (load %s)\n' "$SHAPE" "$ty" "pp$NP" "$l_pp" "$best_pp" "$(awk -v a="$best_pp" -v b="$l_pp" 'BEGIN{print a/b}')" "$(load)"
    l_pk=$(pp_of_peak "$l_pp" "$NP" "$w_tok" "$w_cls") m_pk=$(pp_of_peak "$best_pp" "$NP" "$w_tok" "$w_cls")
    printf '%-9s %-6s %-10s %10.2f %10.2f %8.2f   (of %s GOP/s int8 peak: %.2f G multiply-adds per token; aim 0.40)\n' \
        "$SHAPE" "$ty" "pp/peak" "$l_pk" "$m_pk" "$(awk -v a="$best_pp" -v b="$l_pp" 'BEGIN{print a/b}')" \
        "$int8_peak" "$(awk -v w="$w_tok" -v c="$w_cls" -v p="$NP" 'BEGIN{print (w * p + c) / p / 1e9}')"
    if [ -n "$int8_rule3" ]; then
        printf '%-9s %-6s %-10s %10.2f %10.2f %8.2f   (of %s GOP/s, vpdpbusd with rule 3'"'"'s float steps: the tiles'"'"' ceiling)\n' \
            "$SHAPE" "$ty" "pp/rule3" "$(pp_of_peak "$l_pp" "$NP" "$w_tok" "$w_cls" "$int8_rule3")" \
            "$(pp_of_peak "$best_pp" "$NP" "$w_tok" "$w_cls" "$int8_rule3")" \
            "$(awk -v a="$best_pp" -v b="$l_pp" 'BEGIN{print a/b}')" "$int8_rule3"
    fi
    printf '%-9s %-6s %-10s %10.2f %10.2f %8.2f   (load %s)\n' "$SHAPE" "$ty" "tg$NG" "$l_tg" "$best_tg" "$(awk -v a="$best_tg" -v b="$l_tg" 'BEGIN{print a/b}')" "$(load)"
    if [ -n "$IKB" ]; then
        printf '%-9s %-6s %-10s %10.2f %10.2f %8.2f   (ik_llama.cpp in the first column: best of its default and -rtr 1)\n' \
            "$SHAPE" "$ty" "pp$NP/ik" "$ik_pp" "$best_pp" "$(awk -v a="$best_pp" -v b="$ik_pp" 'BEGIN{print (b > 0 ? a / b : 0)}')"
        printf '%-9s %-6s %-10s %10.2f %10.2f %8.2f   (ik_llama.cpp in the first column: best of its default and -rtr 1)\n' \
            "$SHAPE" "$ty" "tg$NG/ik" "$ik_tg" "$best_tg" "$(awk -v a="$best_tg" -v b="$ik_tg" 'BEGIN{print (b > 0 ? a / b : 0)}')"
    fi
    printf '%-9s %-6s %-10s %10.2f %10.2f %8.2f   (bound %.2f tokens/s: %.2f GB/token at %s GB/s)\n' "$SHAPE" "$ty" "tg/bound" \
        "$(awk -v a="$l_tg" -v b="$bound" 'BEGIN{print a/b}')" "$(awk -v a="$best_tg" -v b="$bound" 'BEGIN{print a/b}')" \
        "$(awk -v a="$best_tg" -v b="$l_tg" 'BEGIN{print a/b}')" "$bound" "$(awk -v p="$per_tok" 'BEGIN{print p/1e9}')" "$bw"
    printf '%-9s %-6s %-10s %10.2f %10.2f %8.2f   (best round, against the bandwidth measured around the run)\n' "$SHAPE" "$ty" "tg/bw-now" \
        "$l_rb" "$m_rb" "$(awk -v a="$m_rb" -v b="$l_rb" 'BEGIN{print a/b}')"
    # The paired measure: mlcore alone (llama-bench cannot be interleaved
    # with reads token by token), positions 0..NG-1 as tg$NG, four times
    # over (twice over spread 0.80-0.93 between runs, four times 0.88-0.92).
    pb=$("$DIR/mlcore-bench-bound" "$m" -t "$T" -n $((4 * NG)) -g "$NG")
    kv() { echo "$pb" | awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }'; }
    printf '%-9s %-6s %-10s %10s %10.2f %8s   (%s tokens/s against a bound of %s at %s GB/s, read next to each token; median pair %s)\n' \
        "$SHAPE" "$ty" "tg/paired" "-" "$(kv ratio)" "" "$(kv tokens_per_s)" "$(kv bound_tokens_per_s)" \
        "$(kv read_gb_per_s)" "$(kv ratio_median)"
    # The paired bound holds only if its read is as fast as reading memory
    # gets: its fastest read of the weights' pages against bandwidth.c's
    # best of the run (about 1 or above; far below, the bound is not one).
    printf '%-9s %-6s %-10s %10s %10.2f %8s   (bench-bound'"'"'s fastest read, %s GB/s with %s loads, against bandwidth.c'"'"'s best, %s GB/s)\n' \
        "$SHAPE" "$ty" "read/bw" "-" "$(awk -v a="$(kv read_best_gb_per_s)" -v b="$bw_best" 'BEGIN{print a/b}')" "" \
        "$(kv read_best_gb_per_s)" "$(kv read_with)" "$bw_best"
    # --no-mmap's decode against the mapping's, paired token by token
    # (llama.cpp's own -lm none gains too, so this is not set against it).
    pr=$("$DIR/mlcore-bench-read" "$m" -t "$T" -n $((2 * NG)))
    kr() { echo "$pr" | awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }'; }
    printf '%-9s %-6s %-10s %10s %10.2f %8s   (ml-run --no-mmap against the mapping, token by token in one process: %s against %s tokens/s)\n' \
        "$SHAPE" "$ty" "tg/no-mmap" "-" "$(kr ratio)" "" "$(kr read_tokens_per_s)" "$(kr mapped_tokens_per_s)"
    printf '%-9s %-6s %-10s %10.2f %10.2f %8s   (share of the model file mapped through 2 MiB pages)\n' \
        "$SHAPE" "$ty" "2m-pages" "$(huge_share "$g")" "$(huge_share "$m")" ""
    if [ -x /usr/bin/time ]; then
        r_l=$(rss "$LB/llama-bench" -m "$g" -t "$T" -p 0 -n 16 -r 1)
        r_m=$(rss "$B/bin/ml-run" -m "$m" --ids -p "1 2 3" -n 16 --ignore-eos -t "$T" --ctx $((NP + NG + 8)) -q)
        printf '%-9s %-6s %-10s %10.0f %10.0f %8.2f   (peak RSS, MiB)\n' "$SHAPE" "$ty" "rss" "$((r_l / 1024))" "$((r_m / 1024))" "$(awk -v a="$r_m" -v b="$r_l" 'BEGIN{print a/b}')"
    fi
done
done
