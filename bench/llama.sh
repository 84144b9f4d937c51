# shellcheck shell=bash
# llama.sh - sourced by the bench scripts: where llama.cpp's tools are,
# and the random-weight models both programs run.
#
#   llama_bin DIR TARGET...   prints the directory of llama.cpp's binaries:
#                             $LLAMA_BIN when set, else a build in DIR made
#                             once from the llama-cpp-python source package
#                             (pip download; needs cmake and g++) with at
#                             least the given targets (llama-bench, ...).
#                             With LLAMA_ISA=avx2 the build (DIR/build-avx2)
#                             uses AVX2, FMA and F16C only, no AVX-512 or
#                             VNNI: llama.cpp as it runs on an AVX2 machine
#                             (Zen 2/3, Intel before Ice Lake), measured on
#                             any newer x86 one.
#
#   bench_ts pp|tg            reads llama-bench's JSON (-o json) on stdin and
#                             prints the prompt's (pp) or the generation's
#                             (tg) tokens/s (avg_ts)
#
#   bench_model DIR SHAPE TYPE  sets g and m to DIR/mlcore-bench-SHAPE-TYPE
#                             .gguf and .mlb (+ .mlt), making them once:
#                             make-bench-gguf.py's random weights (q8_0,
#                             q4_0), or llama-quantize's TYPE of the q8_0
#                             one (q4_k_m, q6_k, iq4_xs, ...), and
#                             gguf2mlb's default, lossless conversion of
#                             them (needs $B)
#
# Without a network: the sources are taken, in this order, from DIR itself
# (a llama.cpp tree with its CMakeLists.txt; copy one there without its
# build/, which is native to the machine that made it), from $LLAMA_SRC (a
# llama.cpp source tree, or a downloaded llama_cpp_python-*.tar.gz, e.g.
# fetched elsewhere with `pip download --no-deps --no-binary :all:
# llama-cpp-python`), or from a llama_cpp_python-*.tar.gz already in
# DIR.dl (where pip download puts it); only when none is there does pip
# download it.  bench_model's make-bench-gguf.py needs numpy and the gguf
# package; without the latter it uses the copy in llama.cpp's sources when
# the scripts' build of it is in bench_model's DIR (DIR/mlcore-llama.cpp/
# gguf-py, which also needs pyyaml).
#
# llama.cpp's CMake adds its server and its chat CLI (tools/server,
# tools/cli) only with LLAMA_BUILD_SERVER=ON, so the option is on exactly
# when llama-server or llama-cli is asked for; other builds stay without
# the HTTP server's sources.
llama_bin() {
    local src=$1
    shift
    if [ -n "${LLAMA_BIN:-}" ]; then echo "$LLAMA_BIN"; return; fi
    local t missing='' server=OFF bdir=build isa=(-DGGML_NATIVE=ON)
    if [ "${LLAMA_ISA:-native}" = avx2 ]; then
        bdir=build-avx2
        isa=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
             -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF)
    fi
    for t in "$@"; do
        [ -x "$src/$bdir/bin/$t" ] || missing=1
        case $t in llama-server | llama-cli) server=ON ;; esac
    done
    if [ -n "$missing" ]; then
        echo "building llama.cpp ($*) from the llama-cpp-python source package into $src ..." >&2
        if [ ! -f "$src/CMakeLists.txt" ]; then
            local sdist=${LLAMA_SRC:-}
            if [ -n "$sdist" ] && [ -f "$sdist/CMakeLists.txt" ]; then
                rm -rf "$src" && mkdir -p "$src"
                cp -r "$sdist/." "$src" || return 1
                rm -rf "$src/build" "$src/build-avx2"
            else
                mkdir -p "$src.dl"
                if [ -z "$sdist" ]; then
                    sdist=$(find "$src.dl" -maxdepth 1 -name 'llama_cpp_python-*.tar.gz' | sort -V | tail -1)
                fi
                if [ -z "$sdist" ]; then
                    pip download -q --no-deps --no-binary :all: -d "$src.dl" llama-cpp-python >&2 || return 1
                    sdist=$(find "$src.dl" -maxdepth 1 -name 'llama_cpp_python-*.tar.gz' | sort -V | tail -1)
                fi
                rm -rf "$src" && mkdir -p "$src"
                tar xzf "$sdist" -C "$src.dl" || return 1
                cp -r "$src.dl/$(basename "$sdist" .tar.gz)/vendor/llama.cpp/." "$src" || return 1
            fi
        fi
        # On CPUs with AMX, llama.cpp's AMX kernels die with SIGILL: the
        # tile configuration ggml_tile_config_init builds on the stack can
        # lose the stores that fill it (llama.cpp pull request 26954).  As
        # that pull request does, it is kept in static storage (thread-local
        # here); a source that no longer has the line is left as it is.
        sed -i 's/^\( *alignas(64)\) tile_config_t tc = {};/\1 static thread_local tile_config_t tc = {};/' \
            "$src/ggml/src/ggml-cpu/amx/mmq.cpp" 2>/dev/null || true
        cmake -S "$src" -B "$src/$bdir" -DCMAKE_BUILD_TYPE=Release "${isa[@]}" \
            -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=$server >&2 || return 1
        cmake --build "$src/$bdir" -j"$(nproc)" --target "$@" >&2 || return 1
    fi
    echo "$src/$bdir/bin"
}

bench_ts() {
    python3 -c 'import json,sys; r=json.load(sys.stdin); k="n_prompt" if sys.argv[1]=="pp" else "n_gen"; print([x["avg_ts"] for x in r if x[k]>0][0])' "$1"
}

bench_model() {
    local here
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    g="$1/mlcore-bench-$2-$3.gguf" m="$1/mlcore-bench-$2-$3.mlb"
    case $3 in
    q8_0 | q4_0) ;;
    *) # the types users download: llama-quantize of the random Q8_0, as
        # a user's file is made (from a Q8_0 here, not an F16: the values
        # do not matter for speed, only the blocks' types)
        if [ ! -f "$g" ]; then
            local want=$g
            bench_model "$1" "$2" q8_0
            g=$want m="$1/mlcore-bench-$2-$3.mlb"
            local lq
            lq=$(llama_bin "$1/mlcore-llama.cpp" llama-quantize) || return 1
            "$lq/llama-quantize" --allow-requantize "$1/mlcore-bench-$2-q8_0.gguf" "$g.part" \
                "$(echo "$3" | tr a-z A-Z)" >/dev/null 2>&1 || return 1
            mv "$g.part" "$g"
        fi
        [ -f "$m" ] || "$B/bin/gguf2mlb" "$g" -o "$m" -t "${m%.mlb}.mlt" -q -f
        return
        ;;
    esac
    if [ ! -f "$g" ]; then
        if ! python3 -c 'import gguf' 2>/dev/null && [ -d "$1/mlcore-llama.cpp/gguf-py/gguf" ]; then
            PYTHONPATH="$1/mlcore-llama.cpp/gguf-py${PYTHONPATH:+:$PYTHONPATH}" \
                python3 "$here/make-bench-gguf.py" "$g" --type "$3" --shape "$2"
        else
            python3 "$here/make-bench-gguf.py" "$g" --type "$3" --shape "$2"
        fi
    fi
    [ -f "$m" ] || "$B/bin/gguf2mlb" "$g" -o "$m" -t "${m%.mlb}.mlt" -q -f
}
