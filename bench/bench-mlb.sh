#!/usr/bin/env bash
# bench-mlb.sh - throughput of mlb-verify and mlb-info on a 1 GiB-class
# synthetic Q8_0 model (TinyLlama-1.1B's shape), next to `cat FILE >
# /dev/null` on the same file.  All runs are warm-cache (the file is read
# once first), so the numbers compare CPU cost per byte, not the disk.
#
#   make bench                      (or: MLCORE_BUILD=build bash bench/bench-mlb.sh)
#   BENCH_DIR=/tmp RUNS=5 ...       where to put the model, runs per tool
set -euo pipefail
B=${MLCORE_BUILD:-build}
DIR=${BENCH_DIR:-/tmp}
RUNS=${RUNS:-3}
M="$DIR/mlcore-bench-tinyllama-q8.mlb"

if [ ! -f "$M" ]; then
    echo "writing $M ..." >&2
    "$B/tests/mkmodel" --preset tinyllama -o "$M"
fi
size=$(stat -c %s "$M")
cat "$M" > /dev/null   # warm the page cache

# best wall time in seconds over $RUNS runs of "$@"
best() {
    local b="" t0 t1 t
    for _ in $(seq "$RUNS"); do
        t0=$(date +%s.%N)
        "$@" > /dev/null
        t1=$(date +%s.%N)
        t=$(awk "BEGIN { print $t1 - $t0 }")
        if [ -z "$b" ] || awk "BEGIN { exit !($t < $b) }"; then b=$t; fi
    done
    echo "$b"
}

catf() { cat "$M"; }
pipe_verify() { cat "$M" | "$B/bin/mlb-verify" -q -; }

t_cat=$(best catf)
printf '%-28s %10s %10s %8s\n' "command" "seconds" "MB/s" "vs cat"
row() {
    local name=$1 t=$2
    awk -v n="$name" -v t="$t" -v s="$size" -v c="$t_cat" \
        'BEGIN { printf "%-28s %10.3f %10.0f %8.2f\n", n, t, s / t / 1e6, c / t }'
}
row "cat FILE > /dev/null" "$t_cat"
row "mlb-info FILE" "$(best "$B/bin/mlb-info" "$M")"
row "mlb-verify FILE" "$(best "$B/bin/mlb-verify" -q "$M")"
row "cat FILE | mlb-verify -" "$(best pipe_verify)"
row "mlb-verify --sums FILE" "$(best "$B/bin/mlb-verify" --sums "$M")"
echo "model: $M, $size bytes; best of $RUNS warm-cache runs" >&2
