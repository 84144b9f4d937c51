#!/bin/bash
# valgrind-all.sh - every command on every fixture under valgrind's
# memcheck: no invalid read or write, no use of uninitialised memory, no
# definite or indirect leak, on the success paths and on the usual failure
# paths (truncated, wrong and unsupported files).  `make valgrind` runs it;
# it is slow (tens of minutes on two cores), so it is not part of `make
# check`.
#
#   MLCORE_BUILD=$PWD/build bash tools/valgrind-all.sh [FILTER]
#
# FILTER (a grep -E pattern) keeps only the runs whose command line
# matches, e.g. 'mlt-dump' or 'llama2'.  Each run prints "ok", or "FAIL"
# and memcheck's report (valgrind exits 99 on an error) or "STATUS" when
# the command's own exit status is not the one the run was meant to take.
# The exit status is 1 when any run failed.
set -uo pipefail

die() {
    echo "valgrind-all.sh: $*" >&2
    exit 2
}

B=${MLCORE_BUILD:?set MLCORE_BUILD to the build directory (make valgrind does)}
FILTER=${1:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FIX=$ROOT/tests/fixtures
command -v valgrind >/dev/null || die "valgrind is not installed (apt-get install valgrind)"
[[ -x $B/bin/mlb-info && -x $B/tests/mkmodel ]] || die "$B: build the commands and tests/mkmodel first"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/mlcore-valgrind.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export LC_ALL=C

# shellcheck disable=SC2054 # the commas belong to the option values
VG=(valgrind --tool=memcheck -q --leak-check=full --errors-for-leak-kinds=definite,indirect
    --show-leak-kinds=definite,indirect --error-exitcode=99 --num-callers=30)
runs=0 failed=0 odd=0 skipped=0 t0=$SECONDS

# vg WANT [<FILE] CMD ARGS...: runs $B/bin/CMD under memcheck, standard
# input from FILE (default /dev/null), stdout and stderr kept in $WORK.
# WANT is the exit status the run is meant to end with (an extended
# regex: 0, 1, [14]).
vg() {
    local want=$1 in=/dev/null status=0
    shift
    if [[ $1 == '<'* ]]; then
        in=${1#<}
        shift
    fi
    local line="$*"
    [[ $in == /dev/null ]] || line+=" <$in"
    line=${line//$WORK\//}
    line=${line//$ROOT\//}
    if [[ -n $FILTER ]] && ! grep -Eq -- "$FILTER" <<<"$line"; then
        skipped=$((skipped + 1))
        return 0
    fi
    runs=$((runs + 1))
    local log=$WORK/vg.log
    "${VG[@]}" --log-file="$log" "$B/bin/$1" "${@:2}" <"$in" >"$WORK/out" 2>"$WORK/err" || status=$?
    if [[ $status -eq 99 || -s $log ]]; then
        failed=$((failed + 1))
        echo "FAIL   $line"
        sed 's/^/       /' "$log"
    elif ! [[ $status =~ ^($want)$ ]]; then
        odd=$((odd + 1))
        echo "STATUS $line: exit $status, wanted $want"
        head -3 "$WORK/err" | sed 's/^/       /'
    else
        echo "ok     $line"
    fi
}

have() { [[ -x $B/bin/$1 ]]; }

# ---------------------------------------------------------------- every command's --help

for cmd in "$B"/bin/*; do
    vg 0 "$(basename "$cmd")" --help
done

# ---------------------------------------------------------------- .mlb models

"$B/tests/mkmodel" -o "$WORK/default.mlb"
for p in tiny tiny-q4 full; do
    "$B/tests/mkmodel" -o "$WORK/$p.mlb" --preset "$p"
done
MODELS=("$WORK"/default.mlb "$WORK"/tiny.mlb "$WORK"/tiny-q4.mlb "$WORK"/full.mlb "$FIX"/runtime/*.mlb)
for m in "${MODELS[@]}"; do
    vg 0 mlb-info "$m"
    vg 0 mlb-info --json --ctx 64 "$m"
    vg 0 mlb-info --tensors "$m"
    vg 0 mlb-verify "$m"
    vg 0 "<$m" mlb-verify -
    vg 0 mlb-verify --sums "$m"
    cp "$WORK/out" "$WORK/m.sums"
    vg 0 mlb-verify --check "$WORK/m.sums"
done
# several at once, and the failure paths: cut, corrupted, not a model
head -c 5000 "$WORK/tiny.mlb" >"$WORK/cut.mlb"
cp "$WORK/tiny.mlb" "$WORK/bad.mlb"
printf '\005' | dd of="$WORK/bad.mlb" bs=1 seek=4 conv=notrunc status=none # version 5
vg 1 mlb-info "$WORK/tiny.mlb" "$WORK/cut.mlb" "$WORK/bad.mlb" "$FIX/gguf/writer.gguf"
vg 1 mlb-verify "$WORK/tiny.mlb" "$WORK/cut.mlb" "$WORK/bad.mlb" "$FIX/tok/llama2.mlt"
vg 1 "<$WORK/cut.mlb" mlb-verify -
vg 3 mlb-info "$WORK/missing.mlb"
sed 's/^......../00000000/' "$WORK/m.sums" >"$WORK/wrong.sums"
vg 1 mlb-verify --check "$WORK/wrong.sums"

# ---------------------------------------------------------------- ml-run on the runtime fixtures

for m in "$FIX"/runtime/*.mlb; do
    ids=${m%.mlb}.ids
    vg 0 ml-run -q -t 2 -m "$m" --ids -f "$ids" -n 0 --ctx 64 -b 7 --logits "$WORK/l.f32"
    vg 0 ml-run -q -t 2 -m "$m" --ids -p "1 2 3" -n 6 --seed 1 --temp 0.8 --top-k 5 --repeat-penalty 1.1
done
vg 1 ml-run -q -m "$WORK/cut.mlb" --ids -p 1
vg 2 ml-run -q -m "$FIX/runtime/llama-q8.mlb" --ids -p 1 --ctx 100000

# ---------------------------------------------------------------- tokenizers

for t in "$FIX"/tok/*.mlt; do
    vg 0 mlt-dump "$t"
    vg 0 mlt-dump --json "$t"
    vg 0 mlt-dump --encode 'Hello, world! 123 ünïcödé 世界 <s> a  b' "$t"
    vg 0 mlt-dump --decode --skip-bos-eos "$t" 1 2 3 100 1000 2000 255
done
printf 'one line\nand another\n' >"$WORK/text"
vg 0 "<$WORK/text" mlt-dump -l --json --encode - "$FIX/tok/llama2.mlt"
vg 1 mlt-dump "$FIX/runtime/llama-q8.mlb"

# ---------------------------------------------------------------- GGUF conversion, and running the results

for g in "$FIX"/models/*/*.gguf; do
    n=$(basename "$g" .gguf)
    vg 0 gguf2mlb -n "$g"
    vg 0 gguf2mlb -q -f --threads 2 -o "$WORK/$n.mlb" -t "$WORK/$n.mlt" "$g"
    [[ -f $WORK/$n.mlb ]] || continue
    vg 0 ml-run -q -t 2 -m "$WORK/$n.mlb" -k "$WORK/$n.mlt" -p "Hello world" -n 3 --temp 0
done
for g in "$FIX"/gguf/*.gguf; do
    vg '[14]' gguf2mlb -n "$g"
done
for z in "$FIX"/vocab/*.gguf.gz; do
    n=$(basename "$z" .gz)
    gzip -dc "$z" >"$WORK/$n"
    vg '[14]' gguf2mlb -q -o "$WORK/v.mlb" "$WORK/$n"
    rm "$WORK/$n"
done
L2=llama2-q8_0
if [[ -f $WORK/$L2.mlb ]]; then
    for i in $(seq 60); do echo "The quick brown fox jumps over the lazy dog, number $i."; done >"$WORK/corpus"
    vg 0 ml-run -q -t 2 -m "$WORK/$L2.mlb" --perplexity "$WORK/corpus" --ctx 64
    vg 0 "<$WORK/$L2.mlb" mlb-verify -
    vg 0 mlt-dump --vocab "$WORK/$L2.mlt"
    vg 0 mlt-dump --merges --json "$WORK/$L2.mlt"
    vg 0 gguf2mlb -q -f --wtype q4_0 --q8-mask w2 --scale-f32 -o "$WORK/q4.mlb" --no-tokenizer "$FIX/models/llama2/llama2-f16.gguf"
    vg 0 "<$FIX/models/llama2/llama2-q8_0.gguf" gguf2mlb -q -o - --no-tokenizer -
    if have ml-imatrix; then
        vg 0 ml-imatrix -q -t 2 -m "$WORK/$L2.mlb" -f "$WORK/corpus" -c 64 --chunks 2 -o "$WORK/a.mli"
        vg 0 ml-imatrix --show "$WORK/a.mli"
        vg 0 ml-imatrix --merge "$WORK/a.mli" "$WORK/a.mli" -o "$WORK/b.mli"
        vg 0 gguf2mlb -q -f --wtype q4_0 --imatrix "$WORK/a.mli" --no-tokenizer -o "$WORK/q4i.mlb" "$FIX/models/llama2/llama2-f16.gguf"
        if have ml-quant; then
            vg 0 ml-quant -q -f -t 2 --wtype q4_0 --imatrix "$WORK/a.mli" -o "$WORK/rq.mlb" "$WORK/$L2.mlb"
        fi
    fi
    if have ml-quant; then
        vg 0 ml-quant -q -f -t 2 --wtype q4_0 --stats -o "$WORK/rq.mlb" "$FIX/models/llama2/llama2-f16.gguf"
        vg 0 ml-quant -q -f -t 2 --wtype q8_0 -o "$WORK/rq8.mlb" "$WORK/q4.mlb"
        vg 0 ml-quant -n "$WORK/$L2.mlb"
    fi
fi

echo "valgrind-all.sh: $runs runs in $((SECONDS - t0)) s: $((runs - failed - odd)) clean," \
    "$failed with memcheck errors, $odd with another exit status than meant" \
    "${FILTER:+($skipped left out by the filter)}"
[[ $failed -eq 0 && $odd -eq 0 ]]
