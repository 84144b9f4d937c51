#!/bin/bash
# fixture-digest.sh - one SHA-256 line for everything the commands compute
# from the committed fixtures: the logits of every runtime fixture (every
# kernel variant this CPU runs, one and two threads, batch 1 and 256),
# greedy continuations, perplexity lines, every model GGUF converted
# (model and tokenizer bytes, and their logits), requantized models and
# importance matrices.  A change that must not change behaviour (a
# restructuring) prints the same lines before and after:
#
#   MLCORE_BUILD=$PWD/build bash tools/fixture-digest.sh > before.txt
#   ... change, rebuild ...
#   MLCORE_BUILD=$PWD/build bash tools/fixture-digest.sh | diff before.txt -
#
# Nothing is compared here: the output is the evidence, diff is the check.
set -euo pipefail
cd "$(dirname "$0")/.."

B=${MLCORE_BUILD:-$PWD/build}
PATH="$B/bin:$PATH"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

digest() { # digest NAME FILE
    printf '%s  %s\n' "$(sha256sum <"$2" | cut -c1-64)" "$1"
}

variants=()
for v in scalar avx2 avx512 amx neon neondot; do
    ML_KERNELS=$v ml-run -q -m tests/fixtures/runtime/llama-q8.mlb --ids -p 1 -n 0 \
        >/dev/null 2>&1 && variants+=("$v")
done
echo "# kernel variants: ${variants[*]}"

for m in tests/fixtures/runtime/*.mlb; do
    name=$(basename "$m" .mlb)
    ids=${m%.mlb}.ids
    for v in "${variants[@]}"; do
        for t in 1 2; do
            for b in 1 256; do
                ML_KERNELS=$v ml-run -q -m "$m" --ids -f "$ids" -n 0 -t "$t" -b "$b" \
                    --logits "$tmp/l.f32" >/dev/null
                digest "runtime/$name logits $v t$t b$b" "$tmp/l.f32"
            done
        done
    done
    head -n 8 "$ids" | ml-run -q -m "$m" --ids -n 24 --temp 0 -t 2 >"$tmp/gen"
    digest "runtime/$name greedy 24" "$tmp/gen"
    head -n 8 "$ids" | ml-run -q -m "$m" --ids -n 24 --temp 0.9 -s 7 -t 2 >"$tmp/gen"
    digest "runtime/$name sampled 24 seed 7" "$tmp/gen"
    ml-quant -q -f --wtype q4_0 -o "$tmp/q.mlb" "$m" 2>/dev/null
    digest "runtime/$name ml-quant q4_0" "$tmp/q.mlb"
done

for g in tests/fixtures/models/*/*.gguf; do
    name=${g#tests/fixtures/models/}
    gguf2mlb -q -f -o "$tmp/m.mlb" -t "$tmp/m.mlt" "$g" 2>/dev/null || {
        echo "refused  $name"
        continue
    }
    digest "$name gguf2mlb model" "$tmp/m.mlb"
    digest "$name gguf2mlb tokenizer" "$tmp/m.mlt"
    # A model the runtime refuses (block types it has no kernels for)
    # says so, with ml-run's exit status, and the digest goes on.
    rc=0
    echo "Hello world, the quick brown fox." | ml-run -q -m "$tmp/m.mlb" -k "$tmp/m.mlt" -n 8 \
        --temp 0 --logits "$tmp/l.f32" >"$tmp/gen" 2>/dev/null || rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "not run (ml-run exit $rc)  $name"
        continue
    fi
    digest "$name logits" "$tmp/l.f32"
    digest "$name greedy 8" "$tmp/gen"
done

corpus=/usr/share/common-licenses/GPL-3
gguf2mlb -q -f -o "$tmp/m.mlb" -t "$tmp/m.mlt" tests/fixtures/models/llama2/llama2-q8_0.gguf
head -c 20000 "$corpus" >"$tmp/corpus"
# (the result line names the text: the temporary folder's name is cut)
ml-run -q -m "$tmp/m.mlb" --perplexity "$tmp/corpus" --ctx 64 -t 2 | sed "s|$tmp/||" >"$tmp/ppl"
digest "llama2-q8_0 perplexity (GPL-3 20 kB, ctx 64)" "$tmp/ppl"
ml-imatrix -q -m "$tmp/m.mlb" -f "$tmp/corpus" -c 64 -o "$tmp/a.mli"
digest "llama2-q8_0 ml-imatrix" "$tmp/a.mli"
