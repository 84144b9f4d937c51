#!/usr/bin/env bash
# bench-kernels.sh - builds bench/bench-kernels.c against an already built
# libmlcore.a (no make needed) and runs it; see the top of bench-kernels.c
# for what it measures.
#
#   bash bench/bench-kernels.sh [-s SECONDS] [-r mean|best] [-m ROWSxCOLS]... [-t TYPES] [VARIANT...]
#   (TYPES: q8_0,q4_0 by default; q4_k,q5_k,q6_k,iq4_xs,q4_1,q5_0,q5_1,iq4_nl,mxfp4 too)
#   MLCORE_BUILD=build-clang bash bench/bench-kernels.sh avx2
set -euo pipefail
cd "$(dirname "$0")/.."
B=${MLCORE_BUILD:-build}
CC=${CC:-cc}
if [ ! -f "$B/libmlcore.a" ]; then
    echo "bench-kernels.sh: $B/libmlcore.a is missing; run make first" >&2
    exit 1
fi
"$CC" -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Wall -Wextra \
    -Iinclude -Ilib bench/bench-kernels.c "$B/libmlcore.a" -ldeflate -lz -lm -lpthread \
    -o "$B/bench-kernels"
exec "$B/bench-kernels" "$@"
