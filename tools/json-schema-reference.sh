#!/bin/bash
# json-schema-reference.sh - mlcore's JSON Schema to GBNF against
# llama.cpp's json_schema_to_grammar (tools/json-schema-reference.py says
# what is compared).  Needs a llama.cpp checkout built with its common
# library (build/bin/libllama-common.so) and the jsonschema package.
#
#   MLCORE_BUILD=build tools/json-schema-reference.sh [LLAMA_CPP_DIR]
#
# (make all first: the helper links the build's objects.)
set -euo pipefail
LLAMA=${1:-/tmp/mlcore-llama.cpp}
: "${MLCORE_BUILD:?set MLCORE_BUILD to the build directory}"
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O1 -Iinclude -Icmd/common $(pkg-config --cflags jansson) tools/json-schema-reference.c \
    "$MLCORE_BUILD"/cmd/common/json_schema*.o "$MLCORE_BUILD/libmlcore.a" \
    $(pkg-config --libs jansson) -lutf8proc -ldeflate -lz -lm -lpthread -o "$work/json-schema-reference"
c++ -std=c++17 -O1 -I"$LLAMA/common" -I"$LLAMA/include" -I"$LLAMA/vendor" -I"$LLAMA/ggml/include" \
    tools/json-schema-llama.cpp -L"$LLAMA/build/bin" -lllama-common \
    -Wl,-rpath,"$LLAMA/build/bin" -o "$work/json-schema-llama"
python3 tools/json-schema-reference.py "$work" "$LLAMA"
