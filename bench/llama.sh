# shellcheck shell=bash
# llama.sh - sourced by the bench scripts: where llama.cpp's tools are,
# and the random-weight models both programs run.
#
#   llama_bin DIR TARGET...   prints the directory of llama.cpp's binaries:
#                             $LLAMA_BIN when set, else a build in DIR made
#                             once from the llama-cpp-python source package
#                             (pip download; needs cmake and g++) with at
#                             least the given targets (llama-bench, ...).
#
#   bench_model DIR SHAPE TYPE  sets g and m to DIR/mlcore-bench-SHAPE-TYPE
#                             .gguf and .mlb (+ .mlt), making them once:
#                             make-bench-gguf.py's random weights, and
#                             gguf2mlb's lossless copy of them (needs $B)
#
# llama.cpp's CMake adds its server and its chat CLI (tools/server,
# tools/cli) only with LLAMA_BUILD_SERVER=ON, so the option is on exactly
# when llama-server or llama-cli is asked for; other builds stay without
# the HTTP server's sources.
llama_bin() {
    local src=$1
    shift
    if [ -n "${LLAMA_BIN:-}" ]; then echo "$LLAMA_BIN"; return; fi
    local t missing='' server=OFF
    for t in "$@"; do
        [ -x "$src/build/bin/$t" ] || missing=1
        case $t in llama-server | llama-cli) server=ON ;; esac
    done
    if [ -n "$missing" ]; then
        echo "building llama.cpp ($*) from the llama-cpp-python source package into $src ..." >&2
        if [ ! -f "$src/CMakeLists.txt" ]; then
            mkdir -p "$src.dl"
            pip download -q --no-deps --no-binary :all: -d "$src.dl" llama-cpp-python >&2
            rm -rf "$src" && mkdir -p "$src"
            tar xzf "$src.dl"/llama_cpp_python-*.tar.gz -C "$src.dl"
            cp -r "$src.dl"/llama_cpp_python-*/vendor/llama.cpp/. "$src"
        fi
        cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
            -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=$server >&2
        cmake --build "$src/build" -j"$(nproc)" --target "$@" >&2
    fi
    echo "$src/build/bin"
}

bench_model() {
    local here
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    g="$1/mlcore-bench-$2-$3.gguf" m="$1/mlcore-bench-$2-$3.mlb"
    [ -f "$g" ] || python3 "$here/make-bench-gguf.py" "$g" --type "$3" --shape "$2"
    [ -f "$m" ] || "$B/bin/gguf2mlb" "$g" -o "$m" -t "${m%.mlb}.mlt" -q -f
}
