#!/bin/bash
# test-times.sh - how long every test takes, and how far each is from its
# timeout: the audit that keeps the suite passing on slower machines.
# `make test-times` runs it.
#
#   MLCORE_BUILD=$PWD/build bash tools/test-times.sh [N]
#
# Runs the unit tests once with libcheck's XML log and prints the N
# slowest test cases (default 15): the longest single test of the case
# (libcheck times each test, and each iteration of a loop test, against
# the case's timeout), the case's total, and the headroom (timeout divided
# by the longest test).  Then runs the bats suites with timing and prints
# the N slowest tests (bats has no timeout: nothing there waits for a
# fixed time).  Times are wall-clock, so run it on a quiet machine, or
# on a loaded one on purpose to see what a slower machine sees.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${1:-15}
B=${MLCORE_BUILD:-$PWD/build}
TIMEOUT=$(sed -n 's/^#define TEST_TIMEOUT_S "\([0-9]*\)"$/\1/p' tests/unit/main.c)
[[ -n $TIMEOUT ]] || { echo "test-times.sh: no TEST_TIMEOUT_S in tests/unit/main.c" >&2; exit 2; }
TIMEOUT=$(awk -v t="${CK_DEFAULT_TIMEOUT:-$TIMEOUT}" -v m="${CK_TIMEOUT_MULTIPLIER:-1}" 'BEGIN { print t * m }')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

start=$(date +%s.%N)
CK_XML_LOG_FILE_NAME="$tmp/unit.xml" "$B/tests/unit-tests" >"$tmp/unit.out" 2>&1 || {
    cat "$tmp/unit.out" >&2
    exit 1
}
end=$(date +%s.%N)
printf 'unit tests: %s, %.1f s wall; every case times out after %s s\n' \
    "$(tail -1 "$tmp/unit.out")" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "$TIMEOUT"
printf '%-28s %6s %9s %9s %9s\n' "suite/case" tests "max (s)" "total (s)" headroom
# One <test> element: <id>, <duration>, <description> (the case's name)
# on lines of their own, within the <suite> whose <title> precedes them.
awk -v timeout="$TIMEOUT" '
    /<title>/       { gsub(/.*<title>|<\/title>.*/, ""); suite = $0 }
    /<duration>/    { gsub(/.*<duration>|<\/duration>.*/, ""); d = $0 + 0 }
    /<description>/ { gsub(/.*<description>|<\/description>.*/, "")
                      k = suite "/" $0; n[k]++; tot[k] += d; if (d > max[k]) max[k] = d }
    END { for (k in n) printf "%-28s %6d %9.3f %9.2f %8.0fx\n", k, n[k], max[k], tot[k], timeout / (max[k] > 0.001 ? max[k] : 0.001) }
' "$tmp/unit.xml" | sort -k3,3 -g -r | head -n "$N"

echo
start=$(date +%s.%N)
MLCORE_BUILD="$B" bats -T tests/cli >"$tmp/bats.out" 2>&1 || {
    grep -v '^ok ' "$tmp/bats.out" >&2
    exit 1
}
end=$(date +%s.%N)
printf 'bats: %s tests, %.1f s wall; slowest:\n' "$(grep -c '^ok ' "$tmp/bats.out")" \
    "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')"
sed -n 's/^ok [0-9]* \(.*\) in \([0-9]*\)ms$/\2 \1/p' "$tmp/bats.out" | sort -n -r | head -n "$N" |
    awk '{ ms = $1; $1 = ""; printf "%8.3f s %s\n", ms / 1000, $0 }'
