#!/usr/bin/env bash
# bench-threads.sh - ml-run against llama.cpp at each thread count, same
# weights, same machine: prompt (ppPROMPT) and generation (tgGEN) tokens/s
# of both programs, the ratio mlcore / llama.cpp, and each program's
# scaling from the fewest threads (its tokens/s at N threads over its
# tokens/s at the first count, 1 by default).  bench-run.sh measures one
# thread count; this is the same measurement swept over several.
#
#   make bench-threads            (or MLCORE_BUILD=build bash bench/bench-threads.sh)
#   THREADS="1 2 4"  the thread counts, ascending; by default 1, 2, 4, 8 and
#                    16 up to the CPUs this process may run on (nproc), and
#                    nproc itself when it is not among them (12, 32, ...)
#   LLAMA_BIN=DIR    llama-bench's directory (else built once, see llama.sh;
#                    LLAMA_SRC for a machine without a network)
#   BENCH_DIR=/tmp   where the models and the build go
#   SHAPES=tinyllama TYPES="q4_0 q8_0" PROMPT=512 GEN=128
#   ROUNDS=3         rounds; each runs every thread count once, llama.cpp
#                    then ml-run; the best of each program's rounds counts
#
# The models are make-bench-gguf.py's random weights (as bench-run.sh),
# made on the spot, and gguf2mlb's lossless copy of them, so both programs
# read the very same blocks.  llama.cpp: `llama-bench -t N -p PROMPT -n
# GEN -r 1`, pp and tg as it measures them; ml-run: a PROMPT-token prompt
# alone, then GEN tokens from one token, read from its last stderr line.
# A round goes through all thread counts before the next round starts, so
# a noisy stretch of a shared machine falls on one round of several
# counts, not on every round of one.  Each row ends with the highest
# 1-minute load average seen while its count ran: it lags, so it mixes in
# the counts run just before, but above the sweep's largest count
# something else was running, and the row measured a shared machine.
#
# The header records where the run was made: the CPU as lscpu names it
# (family and model on x86), its sockets, cores and threads a core, nproc,
# and the kernels ml-run -v reports choosing for each model (ML_KERNELS
# forces them, as for ml-run).  A scaling column is only meaningful up to
# the machine's physical cores: past them, threads share a core's units.
# Needs: python3 with numpy and gguf (or pyyaml and llama.cpp's gguf-py),
# cmake and g++ (to build llama.cpp), lscpu (util-linux) for the header.
set -euo pipefail
B=${MLCORE_BUILD:-build}
DIR=${BENCH_DIR:-/tmp}
SHAPES=${SHAPES:-${SHAPE:-tinyllama}}
TYPES=${TYPES:-"q4_0 q8_0"}
NP=${PROMPT:-512}
NG=${GEN:-128}
ROUNDS=${ROUNDS:-3}
NPROC=$(nproc)
if [ -z "${THREADS:-}" ]; then
    THREADS=''
    for t in 1 2 4 8 16; do
        [ "$t" -le "$NPROC" ] && THREADS="$THREADS $t"
    done
    case " $THREADS " in *" $NPROC "*) ;; *) THREADS="$THREADS $NPROC" ;; esac
fi
read -r -a TS <<< "$THREADS"
T0=${TS[0]}
here=$(cd "$(dirname "$0")" && pwd)

# shellcheck source=bench/llama.sh
. "$here/llama.sh"

die() { echo "bench-threads: $*" >&2; exit 1; }
[ -x "$B/bin/ml-run" ] || die "no ml-run in $B/bin (MLCORE_BUILD; make first)"
LB=$(llama_bin "$DIR/mlcore-llama.cpp" llama-bench)
[ -x "$LB/llama-bench" ] || die "no llama-bench in $LB (LLAMA_BIN, or the build of llama.sh)"
max() { awk -v a="$1" -v b="$2" 'BEGIN { print (b > a ? b : a) }'; }
div() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
load() { cut -d' ' -f1 /proc/loadavg; }
# lscpu's value of a field ("Model name", "Socket(s)", ...), or '?'.
cpu_field() {
    local v
    v=$(LC_ALL=C lscpu 2>/dev/null | sed -n "s/^$1: *//p" | head -1)
    echo "${v:-?}"
}

# The models first, so that making them weighs on no measurement.
for SHAPE in $SHAPES; do
    for ty in $TYPES; do bench_model "$DIR" "$SHAPE" "$ty"; done
done

cpu=$(cpu_field 'Model name')
[ "$cpu" = '?' ] && cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
case $(uname -m) in
x86_64) cpu="$cpu (family $(cpu_field 'CPU family') model $(cpu_field 'Model'))" ;;
esac
echo "machine: $(uname -m), $cpu; $(cpu_field 'Socket(s)') socket(s), $(cpu_field 'Core(s) per socket') cores a socket, $(cpu_field 'Thread(s) per core') threads a core; nproc $NPROC"
# Which llama.cpp: a build from a source package says "unknown" for its
# commit, so the package it came from is named too.
sdist=''
[ -n "${LLAMA_BIN:-}" ] || sdist=$(find "$DIR/mlcore-llama.cpp.dl" -maxdepth 1 -name 'llama_cpp_python-*.tar.gz' 2>/dev/null | sort -V | tail -1)
echo "mlcore: $(git -C "$here/.." describe --always --dirty 2>/dev/null || echo '?'), $B/bin/ml-run${ML_KERNELS:+ with ML_KERNELS=$ML_KERNELS}"
echo "llama.cpp: $LB/llama-bench${sdist:+, built from $(basename "$sdist")}${LLAMA_SRC:+ (LLAMA_SRC=$LLAMA_SRC)}"
for SHAPE in $SHAPES; do
    for ty in $TYPES; do
        bench_model "$DIR" "$SHAPE" "$ty"
        v=$("$B/bin/ml-run" -m "$m" --ids -p 1 -n 1 -t "$T0" -v 2>&1 >/dev/null | head -1)
        k=$(echo "$v" | sed -n 's/.* threads, \(kernels .*\), seed .*/\1/p')
        echo "ml-run -v, $SHAPE $ty: ${k:-$v}"
    done
done
echo "threads: ${TS[*]}; pp$NP and tg$NG; best of $ROUNDS alternating rounds; scale = tokens/s at N threads / at $T0"

ids=$(seq 1 "$NP" | awk '{ printf "%d ", ($1 * 7919) % 31000 + 3 }')
build_commit=''
printf '\n%-9s %-6s %-6s %7s %10s %10s %7s %9s %9s\n' shape type test threads llama.cpp mlcore ratio l.scale m.scale
for SHAPE in $SHAPES; do
for ty in $TYPES; do
    bench_model "$DIR" "$SHAPE" "$ty"
    cat "$g" > /dev/null; cat "$m" > /dev/null
    # Per thread count: the best of each program's rounds, and the highest
    # load seen around its runs.
    declare -A l_pp=() l_tg=() m_pp=() m_tg=() ld=()
    for t in "${TS[@]}"; do l_pp[$t]=0 l_tg[$t]=0 m_pp[$t]=0 m_tg[$t]=0 ld[$t]=0; done
    for r in $(seq "$ROUNDS"); do
        echo "  $SHAPE $ty: round $r of $ROUNDS ..." >&2
        for t in "${TS[@]}"; do
            json=$("$LB/llama-bench" -m "$g" -t "$t" -p "$NP" -n "$NG" -r 1 -o json 2>"$DIR/mlcore-llama-bench.err") ||
                die "llama-bench failed (exit status $?; 132 is SIGILL, see llama.sh on AMX): $LB/llama-bench" \
                    "-m $g -t $t -p $NP -n $NG -r 1; its stderr is in $DIR/mlcore-llama-bench.err"
            read -r pp tg bc < <(echo "$json" | python3 -c '
import json, sys
r = json.load(sys.stdin)
pp = [x["avg_ts"] for x in r if x["n_prompt"] > 0][0]
tg = [x["avg_ts"] for x in r if x["n_gen"] > 0][0]
print(pp, tg, "%s(%s)" % (r[0].get("build_commit", "?"), r[0].get("build_number", "?")))')
            [ -n "${tg:-}" ] || die "llama-bench's speeds not found in: $json"
            build_commit=$bc
            l_pp[$t]=$(max "${l_pp[$t]}" "$pp") l_tg[$t]=$(max "${l_tg[$t]}" "$tg")
            ld[$t]=$(max "${ld[$t]}" "$(load)")
            line=$("$B/bin/ml-run" -m "$m" --ids -p "$ids" -n 0 -t "$t" --ctx $((NP + 8)) 2>&1 >/dev/null | tail -1)
            pp=$(echo "$line" | sed -n 's/.*prompt [0-9]* tokens, \([0-9.]*\) tokens\/s.*/\1/p')
            [ -n "$pp" ] || die "ml-run's prompt speed not found in: $line"
            line=$("$B/bin/ml-run" -m "$m" --ids -p 1 -n "$NG" --ignore-eos --temp 0 -t "$t" \
                --ctx $((NG + 8)) 2>&1 >/dev/null | tail -1)
            tg=$(echo "$line" | sed -n 's/.*generation [0-9]* tokens, \([0-9.]*\) tokens\/s.*/\1/p')
            [ -n "$tg" ] || die "ml-run's generation speed not found in: $line"
            m_pp[$t]=$(max "${m_pp[$t]}" "$pp") m_tg[$t]=$(max "${m_tg[$t]}" "$tg")
            ld[$t]=$(max "${ld[$t]}" "$(load)")
        done
    done
    for test in pp tg; do
        for t in "${TS[@]}"; do
            if [ "$test" = pp ]; then
                l=${l_pp[$t]} mc=${m_pp[$t]} l0=${l_pp[$T0]} m0=${m_pp[$T0]} name=pp$NP
            else
                l=${l_tg[$t]} mc=${m_tg[$t]} l0=${l_tg[$T0]} m0=${m_tg[$T0]} name=tg$NG
            fi
            printf '%-9s %-6s %-6s %7s %10.2f %10.2f %7s %9s %9s   (load %s)\n' "$SHAPE" "$ty" "$name" "$t" \
                "$l" "$mc" "$(div "$mc" "$l")" "$(div "$l" "$l0")" "$(div "$mc" "$m0")" "${ld[$t]}"
        done
    done
    unset l_pp l_tg m_pp m_tg ld
done
done
echo "llama.cpp build: $build_commit"
