#!/usr/bin/env bats
# vocab.bats - llama.cpp's vocabulary files through the command line:
# every test vector of its models/ggml-vocab-*.gguf whose pre-tokenizer
# .mlt expresses, converted by gguf2mlb --tokenizer-only and encoded by
# mlt-dump, gives llama.cpp's expected ids (Hugging Face's); every other
# vocabulary there is refused with exit 4, naming its tokenizer model or
# pre-tokenizer (tests/fixtures/vocab, made by tools/make-vocab-ggufs.py).
bats_require_minimum_version 1.5.0
load helpers

V="$BATS_TEST_DIRNAME/../fixtures/vocab"

# Encodes every case of a TSV (tokenizer, name, special, roundtrip, hex,
# ids) in one mlt-dump run (texts NUL-terminated) and compares each line;
# MIN (40 unless given) cases at least.
check_vectors() {
    local gguf=$1 tsv=$2 min=${3:-40} d=$BATS_TEST_TMPDIR
    gzip -dc "$V/$gguf" >"$d/v.gguf"
    gguf2mlb -q -f --tokenizer-only -o "$d/v.mlt" "$d/v.gguf"
    local -a want=()
    : >"$d/texts"
    while IFS=$'\t' read -r _ _ _ _ hex ids; do
        printf '%b\0' "$(sed 's/../\\x&/g' <<<"$hex")" >>"$d/texts"
        want+=("$ids")
    done <"$V/$tsv"
    mapfile -t got < <(mlt-dump --no-bos --null --encode - "$d/v.mlt" <"$d/texts")
    ((${#got[@]} == ${#want[@]})) || fail_with "$gguf: ${#got[@]} results for ${#want[@]} cases"
    local i bad=0
    for i in "${!want[@]}"; do
        [[ ${got[i]} == "${want[i]}" ]] || { bad=$((bad + 1)); echo "case $i: ${got[i]} / ${want[i]}" >&2; }
    done
    ((bad == 0)) || fail_with "$gguf: $bad of ${#want[@]} cases differ"
    ((${#want[@]} >= min)) || fail_with "$gguf: only ${#want[@]} cases"
}

@test "llama-spm (Llama 2 SentencePiece): llama.cpp's vectors" {
    check_vectors ggml-vocab-llama-spm.gguf.gz cases-llama-spm.tsv
}

@test "llama-bpe (Llama 3): llama.cpp's vectors" {
    check_vectors ggml-vocab-llama-bpe.gguf.gz cases-llama-bpe.tsv
}

@test "phi-3: llama.cpp's vectors" {
    check_vectors ggml-vocab-phi-3.gguf.gz cases-phi-3.tsv
}

@test "qwen2: llama.cpp's vectors" {
    check_vectors ggml-vocab-qwen2.gguf.gz cases-qwen2.tsv
}

@test "qwen35: llama.cpp's vectors" {
    check_vectors ggml-vocab-qwen35.gguf.gz cases-qwen35.tsv
}

@test "gpt-2: llama.cpp's vectors" {
    check_vectors ggml-vocab-gpt-2.gguf.gz cases-gpt-2.tsv
}

@test "smollm (SmolLM2's published GGUF): llama.cpp's vectors" {
    check_vectors smollm2-135m.gguf.gz cases-smollm.tsv
}

# o200k (pre "gpt-4o", gpt-oss): cases-X.tsv holds the ids llama.cpp and
# Hugging Face's tokenizers agree on, cases-X-hf.tsv those where llama.cpp's
# rewrite of the regex departs from it and mlcore follows the regex
# (tools/make-o200k-fixtures.py).
@test "gpt-4o (o200k) over Llama 3's vocabulary: llama.cpp's ids, Hugging Face's where they differ" {
    check_vectors gpt-4o-llama3.gguf.gz cases-gpt-4o-llama3.tsv 250
    check_vectors gpt-4o-llama3.gguf.gz cases-gpt-4o-llama3-hf.tsv 1
}

@test "gpt-4o (o200k): the gpt-oss model fixture's vocabulary, harmony's specials as one token each" {
    check_vectors gpt-oss.gguf.gz cases-gpt-oss.tsv 250
    [[ ! -s $V/cases-gpt-oss-hf.tsv ]] || check_vectors gpt-oss.gguf.gz cases-gpt-oss-hf.tsv 1
    local d=$BATS_TEST_TMPDIR
    gzip -dc "$V/gpt-oss.gguf.gz" >"$d/g.gguf"
    gguf2mlb -q --tokenizer-only -o "$d/g.mlt" "$d/g.gguf"
    run -0 mlt-dump --no-bos --encode '<|start|>assistant<|channel|>final<|message|>Hi<|return|>' "$d/g.mlt"
    [[ $output =~ ^386\ [0-9\ ]+\ 385\ [0-9\ ]+\ 388\ [0-9\ ]+\ 383$ ]] || fail_with "$output"
    run -0 mlt-dump "$d/g.mlt"
    [[ $output == *'pre-tokenizer          o200k regex (case-aware words, gpt-oss)'* ]] || fail_with "$output"
}

@test "every other vocabulary of llama.cpp is refused: exit 4, its tokenizer model or pre-tokenizer named" {
    local f name n=0 d=$BATS_TEST_TMPDIR
    for f in "$V"/refused/ggml-vocab-*.gguf; do
        name=${f##*/ggml-vocab-}
        name=${name%.gguf}
        run -4 --separate-stderr gguf2mlb --tokenizer-only -o "$d/$name.mlt" "$f"
        case $name in
        bert-bge) [[ ${stderr_lines[0]} == *'tokenizer model "bert" has no .mlt equivalent'* ]] ;;
        nomic-bert-moe) [[ ${stderr_lines[0]} == *'tokenizer model "t5" has no .mlt equivalent'* ]] ;;
        gemma-4) [[ ${stderr_lines[0]} == *'tokenizer model "gemma4" has no .mlt equivalent'* ]] ;;
        aquila | gpt-neox) [[ ${stderr_lines[0]} == *'tokenizer.ggml.pre: the key is missing: llama.cpp'"'"'s fallback pre-tokenizer "default"'* ]] ;;
        *) [[ ${stderr_lines[0]} == *"pre-tokenizer \"$name\" has no .mlt equivalent"* ]] ;;
        esac || fail_with "$name: ${stderr_lines[0]}"
        [[ ! -e $d/$name.mlt ]]
        n=$((n + 1))
    done
    ((n == 12)) || fail_with "$n refused vocabularies"
}
