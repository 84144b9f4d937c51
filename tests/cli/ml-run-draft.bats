#!/usr/bin/env bats
# ml-run-draft.bats - speculative decoding with a draft model (-md,
# --spec-type draft-simple): the text with a draft model is the text
# without, bit for bit, whatever the sampler, threads, batch, window or
# turn; a draft that is the model itself keeps every greedy guess (its
# context follows the generation); a draft of another vocabulary, a missing
# file or tokenizer, and options that do not go together fail with their
# exit statuses.
bats_require_minimum_version 1.5.0
load helpers

FIX="$BATS_TEST_DIRNAME/../fixtures"

setup_file() {
    # Two quantizations of the same model, as a real draft and target pair
    # would be two sizes of one family.
    local d=$BATS_FILE_TMPDIR
    gguf2mlb -q -o "$d/q8.mlb" -t "$d/q8.mlt" "$FIX/models/llama2/llama2-q8_0.gguf"
    gguf2mlb -q -o "$d/q4.mlb" -t "$d/q4.mlt" "$FIX/models/llama2/llama2-q4_0.gguf"
}

Q8() { echo "$BATS_FILE_TMPDIR/q8.mlb"; }
Q4() { echo "$BATS_FILE_TMPDIR/q4.mlb"; }

# same_with_draft "DRAFT [DRAFT OPTIONS]" ARGS...: the text with the draft
# model guessing is the text without it.
same_with_draft() {
    local draft=$1 plain spec
    shift
    plain=$(ml-run "$@" -q) || fail_with "plain: $*"
    # shellcheck disable=SC2086
    spec=$(ml-run "$@" -q -md $draft) || fail_with "draft: $* -md $draft"
    [[ $spec == "$plain" ]] || fail_with "$* -md $draft: with the draft: $spec / without: $plain"
}

@test "-md: a Q4_0 draft for its Q8_0 model gives the same text, bit for bit, over samplers, threads and batches" {
    local m=(-m "$(Q8)" -p "Once upon a time" -n 100) o
    # the options of both runs | the draft's options
    for o in "--temp 0|" "--temp 0.8 -s 7|" "--temp 1.3 --top-k 0 --top-p 1 --min-p 0 -s 3|" \
        "--temp 0.7 -s 5 --repeat-penalty 1.2 --presence-penalty 0.5|" "--temp 0 -t 2|" \
        "--temp 0 -t 2|-td 1" "--temp 0.8 -s 9 -t 1|--threads-draft 2" "--temp 0 -b 3|" \
        "--temp 0.9 -s 4 -b 2 -t 2|" "--temp 0 -t 2 --cache-type f16|" "--temp 0 --ignore-eos -c 40|" \
        "--temp 0|--spec-draft-n-max 3" "--temp 0.8 -s 2|--spec-draft-n-max 40 --spec-draft-n-min 2" \
        "--temp 0|--spec-type draft-simple" "--temp 0.8 -s 6|--spec-draft-p-min 0.3"; do
        # shellcheck disable=SC2086
        same_with_draft "$(Q4) ${o#*|}" "${m[@]}" ${o%%|*}
    done
    same_with_draft "$(Q4)" "${m[@]}" --temp 0 --ids -p "1 2 3 4"
    same_with_draft "$(Q4)" "${m[@]}" --temp 0 --grammar 'root ::= [a-z ]+ "."'
    same_with_draft "$(Q4)" "${m[@]}" --temp 0.8 -s 1 --chat --chat-template llama2 -p "Hi there"
    # and the other way round, the larger drafting for the smaller
    same_with_draft "$(Q8)" -m "$(Q4)" -p "Once upon a time" -n 100 --temp 0.8 -s 7
    # the Q4_0 draft's guesses are the Q8_0 model's tokens often enough to be kept
    run -0 --separate-stderr ml-run "${m[@]}" --temp 0 --ignore-eos -md "$(Q4)"
    [[ ${stderr_lines[-1]} =~ ^ml-run:\ speculation:\ ([0-9]+)\ tokens\ guessed,\ ([0-9]+)\ kept ]] ||
        fail_with "${stderr_lines[*]}"
    ((BASH_REMATCH[2] > 0)) || fail_with "${stderr_lines[-1]}"
    local all=${BASH_REMATCH[1]}
    # a draft that must be sure guesses less
    run -0 --separate-stderr ml-run "${m[@]}" --temp 0 --ignore-eos -md "$(Q4)" --draft-p-min 0.9
    [[ ${stderr_lines[-1]} =~ ^ml-run:\ speculation:\ ([0-9]+)\ tokens\ guessed ]] ||
        fail_with "${stderr_lines[*]}"
    ((BASH_REMATCH[1] < all)) || fail_with "${stderr_lines[-1]}, without --spec-draft-p-min $all"
}

@test "-md: the model drafting for itself keeps every greedy guess: the draft's context follows the generation" {
    # No step guesses past -n: every guess is kept.
    run -0 --separate-stderr ml-run -m "$(Q8)" -md "$(Q8)" -p "Once upon a time" -n 120 --temp 0 \
        --ignore-eos --spec-draft-n-max 8
    [[ ${stderr_lines[-1]} =~ ^ml-run:\ speculation:\ ([0-9]+)\ tokens\ guessed,\ ([0-9]+)\ kept ]] ||
        fail_with "${stderr_lines[*]}"
    local guessed=${BASH_REMATCH[1]} kept=${BASH_REMATCH[2]}
    ((kept > 90 && guessed == kept)) || fail_with "${stderr_lines[-1]}"
    # a --spec-draft-n-min above the first step's 4 guesses still guesses
    run -0 --separate-stderr ml-run -m "$(Q8)" -md "$(Q8)" -p "Once upon a time" -n 60 --temp 0 \
        --ignore-eos --spec-draft-n-min 6 --spec-draft-n-max 8
    [[ ${stderr_lines[-1]} =~ ^ml-run:\ speculation:\ ([0-9]+)\ tokens\ guessed,\ ([0-9]+)\ kept ]] ||
        fail_with "${stderr_lines[*]}"
    ((BASH_REMATCH[2] > 40)) || fail_with "${stderr_lines[-1]}"
    # and after a context that filled up, in a batch of 2, on 2 threads
    run -0 --separate-stderr ml-run -m "$(Q8)" -md "$(Q8)" -p "Once upon a time" -n 120 --temp 0 \
        --ignore-eos -c 60 -b 2 -t 2
    [[ ${stderr_lines[-1]} =~ ^ml-run:\ speculation:\ ([0-9]+)\ tokens\ guessed,\ ([0-9]+)\ kept ]] ||
        fail_with "${stderr_lines[*]}"
    ((BASH_REMATCH[2] > 20 && BASH_REMATCH[1] - BASH_REMATCH[2] <= 1)) || fail_with "${stderr_lines[-1]}"
}

@test "-md in a conversation: the draft's context follows the turns, the same text" {
    local turns=$'Hi there\nAnd then?\nOnce more\n' o a b
    for o in "--temp 0 -md $(Q8)" "--temp 0.8 -s 3 -md $(Q4)"; do
        # shellcheck disable=SC2086
        a=$(ml-run -m "$(Q8)" -i --chat-template llama2 -n 30 -q ${o% -md*} <<<"$turns") || fail_with "plain"
        # shellcheck disable=SC2086
        b=$(ml-run -m "$(Q8)" -i --chat-template llama2 -n 30 -q $o <<<"$turns") || fail_with "draft"
        [[ $a == "$b" ]] || fail_with "$o: with the draft: $b / without: $a"
    done
}

@test "-md -v: the draft model's line" {
    run -0 --separate-stderr ml-run -m "$(Q8)" -md "$(Q4)" -p hi -n 4 -v -td 1
    [[ $stderr == *"ml-run: $(Q4): draft model, 2 layers, dim 256, context 256, 1 threads"* ]] ||
        fail_with "$stderr"
}

@test "-md: sliding windows give the same text; a linear-attention draft or model generates without speculation" {
    local d=$BATS_TEST_TMPDIR
    gguf2mlb -q -o "$d/g8.mlb" -t "$d/g8.mlt" "$FIX/models/gemma3/gemma3-q8_0.gguf"
    gguf2mlb -q -o "$d/g4.mlb" -t "$d/g4.mlt" "$FIX/models/gemma3/gemma3-q4_0.gguf"
    same_with_draft "$d/g4.mlb" -m "$d/g8.mlb" -p "The cat" -n 150 --temp 0
    same_with_draft "$d/g4.mlb" -m "$d/g8.mlb" -p "The cat" -n 150 --temp 0.9 -s 11 -c 64
    # Qwen3.5's tokens are the Qwen3 fixture's; its layers are linear
    gguf2mlb -q -o "$d/q.mlb" -t "$d/q.mlt" "$FIX/models/qwen3/qwen3-q8_0.gguf"
    gguf2mlb -q -o "$d/l.mlb" -t "$d/l.mlt" "$FIX/models/qwen35/qwen35-q8_0.gguf"
    same_with_draft "$d/l.mlb" -m "$d/q.mlb" -p "The cat" -n 40 --temp 0
    run -0 --separate-stderr ml-run -m "$d/q.mlb" -md "$d/l.mlb" -p "The cat" -n 4 -q
    [[ ${stderr_lines[0]} == "ml-run: $d/l.mlb: --model-draft: the draft model's linear-attention state cannot be taken back; generating without speculation" ]] ||
        fail_with "${stderr_lines[*]}"
    run -0 --separate-stderr ml-run -m "$d/l.mlb" -md "$d/q.mlb" -p "The cat" -n 4 -q
    [[ ${stderr_lines[0]} == "ml-run: $d/l.mlb: --model-draft: the model's linear-attention state cannot be taken back; generating without speculation" ]] ||
        fail_with "${stderr_lines[*]}"
}

@test "-md: another vocabulary is refused (1); a missing draft or tokenizer (3)" {
    local d=$BATS_TEST_TMPDIR
    # one model file beside Llama 2's tokenizer and beside Mistral's, both
    # of 32000 tokens: they part at token 260
    "$MKMODEL" -o "$d/m.mlb" --seed 3 vocab=32000 wtype=2 scale_f16=1 shared_classifier=1 max_seq=256
    cp "$FIX/tok/llama2.mlt" "$d/m.mlt"
    cp "$d/m.mlb" "$d/v.mlb"
    cp "$FIX/tok/mistral.mlt" "$d/v.mlt"
    run -1 --separate-stderr ml-run -m "$d/m.mlb" -md "$d/v.mlb" -p hi -n 4
    [[ ${stderr_lines[0]} == "ml-run: $d/v.mlt: ML_E_MISMATCH: tokens (offset 1606): token 260 differs from the other tokenizer's (piece or attribute); a draft model must share the model's vocabulary" ]] ||
        fail_with "${stderr_lines[*]}"
    # another number of logit rows
    run -1 --separate-stderr ml-run -m "$d/m.mlb" -md "$(Q4)" -p hi -n 4
    [[ ${stderr_lines[0]} == "ml-run: $(Q4): ML_E_MISMATCH: the draft model has 384 tokens, the model 32000; a draft model must share the model's vocabulary" ]] ||
        fail_with "${stderr_lines[*]}"
    # another kind of tokenizer under the same model
    cp "$FIX/tok/llama3.mlt" "$d/v.mlt"
    run -1 --separate-stderr ml-run -m "$d/m.mlb" -md "$d/v.mlb" -p hi -n 4
    [[ ${stderr_lines[0]} == "ml-run: $d/v.mlt: ML_E_MISMATCH: kind (offset 8): kind 2, the other tokenizer's 1; a draft model must share the model's vocabulary" ]] ||
        fail_with "${stderr_lines[*]}"
    run -3 --separate-stderr ml-run -m "$(Q8)" -md "$d/none.mlb" -p hi
    [[ ${stderr_lines[0]} == "ml-run: $d/none.mlb: ML_E_IO: cannot open: No such file or directory" ]] ||
        fail_with "${stderr_lines[*]}"
    cp "$(Q4)" "$d/alone.mlb"
    run -3 --separate-stderr ml-run -m "$(Q8)" -md "$d/alone.mlb" -p hi
    [[ ${stderr_lines[0]} == "ml-run: $d/alone.mlt: ML_E_IO: cannot open: No such file or directory" ]] ||
        fail_with "${stderr_lines[*]}"
    [[ ${stderr_lines[1]} == "ml-run: hint: a draft model's tokenizer lies beside it (gguf2mlb -t), to show that it shares the model's vocabulary" ]]
    # with --ids the model's tokenizer is still needed, to check the draft's
    cp "$(Q8)" "$d/bare.mlb"
    run -3 --separate-stderr ml-run -m "$d/bare.mlb" -md "$(Q4)" --ids -p "1 2"
    [[ ${stderr_lines[0]} == "ml-run: $d/bare.mlt: ML_E_IO: cannot open: No such file or directory" ]] ||
        fail_with "${stderr_lines[*]}"
    printf 'not a model' > "$d/junk.mlb"
    run -1 --separate-stderr ml-run -m "$(Q8)" -md "$d/junk.mlb" -p hi
    [[ ${stderr_lines[0]} == "ml-run: $d/junk.mlb: ML_E_FORMAT: "* ]] || fail_with "${stderr_lines[*]}"
}

@test "-md: usage errors" {
    run -2 --separate-stderr ml-run -m "$(Q8)" -p hi -md "$(Q4)" --spec-type ngram-simple
    [[ ${stderr_lines[0]} == "ml-run: --model-draft guesses with a model (--spec-type draft-simple), not with --spec-type ngram-simple" ]]
    run -2 --separate-stderr ml-run -m "$(Q8)" -p hi --spec-type draft-simple
    [[ ${stderr_lines[0]} == "ml-run: --spec-type draft-simple needs a draft model (-md FILE)" ]]
    run -2 --separate-stderr ml-run -m "$(Q8)" -p hi -td 2
    [[ ${stderr_lines[0]} == "ml-run: --threads-draft needs a draft model (-md FILE)" ]]
    run -2 --separate-stderr ml-run -m "$(Q8)" -p hi -md "$(Q4)" --spec-ngram-simple-size-n 3
    [[ ${stderr_lines[0]} == "ml-run: --spec-ngram-simple-size-n and -size-m are ngram-simple's, not a draft model's" ]]
    run -2 --separate-stderr ml-run -m "$(Q8)" --perplexity /dev/null -md "$(Q4)"
    [[ ${stderr_lines[0]} == "ml-run: --model-draft speculates on generated tokens (not with --perplexity, --logits or --imatrix, which see every evaluated position)" ]]
    run -2 --separate-stderr ml-run -m "$(Q8)" -p hi -md "$(Q4)" --spec-draft-n-max 4 --spec-draft-n-min 5
    [[ ${stderr_lines[0]} == "ml-run: --spec-draft-n-min 5 is above the draft's most, 4" ]]
    run -2 --separate-stderr ml-run -m "$(Q8)" -p hi --spec-draft-p-min 0.5
    [[ ${stderr_lines[0]} == "ml-run: --spec-draft-p-min needs a draft model (-md FILE)" ]]
    run -2 --separate-stderr ml-run -m "$(Q8)" -p hi -md "$(Q4)" --spec-draft-p-min 1.5
    [[ ${stderr_lines[0]} == "ml-run: --spec-draft-p-min: '1.5' is not a number in [0, 1]" ]]
    run -2 --separate-stderr ml-run -m "$(Q8)" -p hi -md "$(Q4)" -td 0
    run -2 --separate-stderr ml-run -m "$(Q8)" -p hi -md
    run -0 ml-run --help
    [[ $output == *"--model-draft FILE"*"(also -md)"* ]] || fail_with "$output"
}
