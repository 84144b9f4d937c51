#!/usr/bin/env bats
# ml-run.bats - generation, logits and perplexity through the command: the
# conventions, reproducibility (greedy, seeds, threads, batches, kernels),
# the logits file against the committed numpy reference, the limits of the
# context, and the tokenizer beside the model.
bats_require_minimum_version 1.5.0
load helpers

FIX="$BATS_TEST_DIRNAME/../fixtures"

setup_file() {
    # A model whose vocabulary fits the Llama 2 tokenizer (32000 ids).
    "$MKMODEL" -o "$BATS_FILE_TMPDIR/m.mlb" --seed 3 vocab=32000 wtype=2 scale_f16=1 \
        shared_classifier=1 max_seq=256
    cp "$FIX/tok/llama2.mlt" "$BATS_FILE_TMPDIR/m.mlt"
}

M() { echo "$BATS_FILE_TMPDIR/m.mlb"; }

@test "--help, --version, usage errors" {
    run -0 ml-run --help
    [[ ${lines[0]} == "Usage: ml-run -m MODEL.mlb [options]" ]]
    run -0 ml-run --version
    [[ $output == "ml-run (mlcore) 0.1.0" ]]
    run -2 --separate-stderr ml-run -p hi
    [[ ${stderr_lines[0]} == "ml-run: no model given (-m MODEL.mlb)" ]]
    run -2 --separate-stderr ml-run -m "$(M)" --temp x
    [[ ${stderr_lines[0]} == "ml-run: --temp: 'x' is not a number in [0, 100]" ]]
    run -2 --separate-stderr ml-run -m "$(M)" -p a -f b
    run -2 --separate-stderr ml-run -m "$(M)" stray
    [[ ${stderr_lines[0]} == "ml-run: unexpected operand 'stray' (the prompt goes after -p)" ]]
}

@test "--cache-type f16 (and -ctk, -ctv): the same bits for every thread count and batch; unknown types are usage errors" {
    run -2 --separate-stderr ml-run -m "$(M)" -p hi --cache-type q5_0
    [[ ${stderr_lines[0]} == "ml-run: --cache-type: unknown cache type 'q5_0' (expected f32, f16, q8_0 or q4_0)" ]]
    run -2 --separate-stderr ml-run -m "$(M)" -p hi -ctk F16
    [[ ${stderr_lines[0]} == "ml-run: --cache-type-k: unknown cache type 'F16' (expected f32, f16, q8_0 or q4_0)" ]]
    run -2 --separate-stderr ml-run -m "$(M)" -p hi --cache-type-v ""
    [[ ${stderr_lines[0]} == "ml-run: --cache-type-v: unknown cache type '' (expected f32, f16, q8_0 or q4_0)" ]]
    run -0 ml-run --help
    has_line '^ +--cache-type TYPE +KV cache keys and values: f32 \(default\), f16, q8_0 or q4_0$' "${lines[@]}"
    has_line '^ +\(also -ctk\)' "${lines[@]}"
    local ids="1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17"
    ml-run -m "$(M)" --ids -p "$ids" -n 0 --cache-type f16 --logits "$BATS_TEST_TMPDIR/a" -t 1 -q
    ml-run -m "$(M)" --ids -p "$ids" -n 0 -ctk f16 -ctv f16 --logits "$BATS_TEST_TMPDIR/b" -t 2 -b 3 -q
    ml-run -m "$(M)" --ids -p "$ids" -n 0 --cache-type f32 --logits "$BATS_TEST_TMPDIR/c" -q
    cmp "$BATS_TEST_TMPDIR/a" "$BATS_TEST_TMPDIR/b"
    ! cmp -s "$BATS_TEST_TMPDIR/a" "$BATS_TEST_TMPDIR/c"
    run -0 --separate-stderr ml-run -m "$(M)" -p hi -n 1 --cache-type-k f16 -v
    [[ ${stderr_lines[0]} == *", cache f16/f32, "* ]]
}

@test "--cache-type q8_0, q4_0 (and -ctk, -ctv): the same bits for every thread count and batch; -v prints the bytes per position" {
    local d=$BATS_TEST_TMPDIR ids="1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25"
    # heads of 32: two layers, two KV heads, so 64 keys and 64 values a layer
    "$MKMODEL" -o "$d/h32.mlb" --seed 5 head_dim=32 wtype=2 scale_f16=1
    for t in q8_0 q4_0; do
        ml-run -m "$d/h32.mlb" --ids -p "$ids" -n 0 --cache-type $t --logits "$d/$t.a" -t 1 -q
        ml-run -m "$d/h32.mlb" --ids -p "$ids" -n 0 -ctk $t -ctv $t --logits "$d/$t.b" -t 2 -b 3 -q
        cmp "$d/$t.a" "$d/$t.b"
        ml-run -m "$d/h32.mlb" --ids -p "$ids" -n 0 --cache-type-k $t --cache-type-v $t \
            --logits "$d/$t.c" -t 3 -b 1 -q
        cmp "$d/$t.a" "$d/$t.c"
    done
    ml-run -m "$d/h32.mlb" --ids -p "$ids" -n 0 --cache-type f16 --logits "$d/f16" -q
    ! cmp -s "$d/q8_0.a" "$d/q4_0.a"
    ! cmp -s "$d/q8_0.a" "$d/f16"
    # a Q8_0 block of 32 is 36 bytes, a Q4_0 one 20: (2 x 36 + 2 x 20) x 2 layers
    run -0 --separate-stderr ml-run -m "$d/h32.mlb" --ids -p "1 2" -n 1 -ctk q8_0 -ctv q4_0 -v -c 64
    [[ ${stderr_lines[0]} == *", cache q8_0/q4_0, "* ]]
    [[ ${stderr_lines[2]} == "ml-run: KV cache q8_0/q4_0: 224 bytes per position, 14336 bytes for 64 positions (with recurrent state)" ]]
    run -0 --separate-stderr ml-run -m "$d/h32.mlb" --ids -p "1 2" -n 1 -v -c 64
    [[ ${stderr_lines[2]} == "ml-run: KV cache f32/f32: 1024 bytes per position, 65536 bytes for 64 positions (with recurrent state)" ]]
}

@test "--cache-type q8_0 or q4_0 with a head size that is not a multiple of 32: exit 4, naming the option and head_dim" {
    local why="head_dim: 16 (dim / n_heads) is not a multiple of 32, as the blocks of a"
    run -4 --separate-stderr ml-run -m "$(M)" --ids -p "1 2" --cache-type q8_0
    [[ ${stderr_lines[0]} == "ml-run: $(M): ML_E_UNSUPPORTED: --cache-type q8_0: $why q8_0 cache need (f16 or f32 fit it)" ]]
    [[ -z $output ]]
    run -4 --separate-stderr ml-run -m "$(M)" --ids -p "1 2" -ctk q4_0 -ctv q8_0
    [[ ${stderr_lines[0]} == "ml-run: $(M): ML_E_UNSUPPORTED: --cache-type-k q4_0: $why q4_0 cache need (f16 or f32 fit it)" ]]
    run -4 --separate-stderr ml-run -m "$(M)" --ids -p "1 2" -ctk f16 --cache-type-v q4_0
    [[ ${stderr_lines[0]} == "ml-run: $(M): ML_E_UNSUPPORTED: --cache-type-v q4_0: $why q4_0 cache need (f16 or f32 fit it)" ]]
    run -4 --separate-stderr ml-run -m "$(M)" --perplexity /dev/null --cache-type q4_0
    [[ ${stderr_lines[0]} == "ml-run: $(M): ML_E_UNSUPPORTED: --cache-type q4_0: $why q4_0 cache need (f16 or f32 fit it)" ]]
}

@test "--no-mmap: the model read into memory gives the same logits and text; its errors are the mapping's" {
    run -0 ml-run --help
    has_line '^ +--no-mmap +read the model into memory' "${lines[@]}"
    local ids="1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17"
    ml-run -m "$(M)" --ids -p "$ids" -n 0 --logits "$BATS_TEST_TMPDIR/a" -q
    ml-run -m "$(M)" --ids -p "$ids" -n 0 --logits "$BATS_TEST_TMPDIR/b" -q --no-mmap
    cmp "$BATS_TEST_TMPDIR/a" "$BATS_TEST_TMPDIR/b"
    run -0 --separate-stderr ml-run -m "$(M)" -p "Once upon a time" -n 8 --temp 0
    local want=$output
    run -0 --separate-stderr ml-run -m "$(M)" -p "Once upon a time" -n 8 --temp 0 --no-mmap
    [[ $output == "$want" ]]
    run -3 --separate-stderr ml-run -m "$BATS_TEST_TMPDIR/none.mlb" -p hi --no-mmap
    [[ ${stderr_lines[0]} == "ml-run: $BATS_TEST_TMPDIR/none.mlb: ML_E_IO: cannot open"* ]]
    head -c 1000 "$(M)" > "$BATS_TEST_TMPDIR/cut.mlb"
    run -1 --separate-stderr ml-run -m "$BATS_TEST_TMPDIR/cut.mlb" --ids -p 1 -n 1
    local mapped=${stderr_lines[0]}
    [[ $mapped == "ml-run: $BATS_TEST_TMPDIR/cut.mlb: ML_E_FORMAT: "* ]]
    run -1 --separate-stderr ml-run -m "$BATS_TEST_TMPDIR/cut.mlb" --ids -p 1 -n 1 --no-mmap
    [[ ${stderr_lines[0]} == "$mapped" ]]
}

@test "missing or invalid model and tokenizer" {
    run -3 --separate-stderr ml-run -m "$BATS_TEST_TMPDIR/none.mlb" -p hi
    [[ ${stderr_lines[0]} == "ml-run: $BATS_TEST_TMPDIR/none.mlb: ML_E_IO: cannot open"* ]]
    printf 'GGUF' > "$BATS_TEST_TMPDIR/x.mlb"
    run -1 --separate-stderr ml-run -m "$BATS_TEST_TMPDIR/x.mlb" -p hi
    [[ ${stderr_lines[0]} == *"ML_E_FORMAT"* ]]
    "$MKMODEL" -o "$BATS_TEST_TMPDIR/small.mlb"
    run -3 --separate-stderr ml-run -m "$BATS_TEST_TMPDIR/small.mlb" -p hi
    [[ ${stderr_lines[0]} == "ml-run: $BATS_TEST_TMPDIR/small.mlt: ML_E_IO: cannot open: "* ]]
    [[ ${stderr_lines[1]} == "ml-run: hint: give the tokenizer with -k FILE.mlt, or the prompt as ids with --ids" ]]
    # A tokenizer larger than the model's vocabulary.
    run -1 --separate-stderr ml-run -m "$BATS_TEST_TMPDIR/small.mlb" -k "$FIX/tok/llama2.mlt" -p hi
    [[ ${stderr_lines[0]} == *"ML_E_SHAPE: n_vocab (offset 12): the tokenizer has 32000 tokens"* ]]
}

@test "greedy generation is reproducible and independent of threads and batch" {
    run -0 --separate-stderr ml-run -m "$(M)" -p "Once upon a time" -n 12 --temp 0 -t 1
    local want=$output
    [[ -n $want ]]
    run -0 --separate-stderr ml-run -m "$(M)" -p "Once upon a time" -n 12 --temp 0 -t 2 -b 1
    [[ $output == "$want" ]]
    [[ $stderr == *"ml-run: load "*" s; prompt "*" tokens, "*"tokens/s; generation 12 tokens"* ]]
    run -0 --separate-stderr ml-run -m "$(M)" -p "Once upon a time" -n 12 --temp 0 -q
    [[ $output == "$want" && -z $stderr ]]
    # The tokenizer given explicitly, and the prompt from a file and stdin.
    printf 'Once upon a time' > "$BATS_TEST_TMPDIR/p.txt"
    run -0 ml-run -m "$(M)" -k "$BATS_FILE_TMPDIR/m.mlt" -f "$BATS_TEST_TMPDIR/p.txt" -n 12 --temp 0 -q
    [[ $output == "$want" ]]
    run -0 ml-run -m "$(M)" -n 12 --temp 0 -q < "$BATS_TEST_TMPDIR/p.txt"
    [[ $output == "$want" ]]
}

@test "a fixed seed reproduces sampling; another seed differs" {
    run -0 ml-run -m "$(M)" -p "x" -n 24 --seed 7 --temp 1.5 --top-k 0 --top-p 1 --min-p 0 -q
    local a=$output
    run -0 ml-run -m "$(M)" -p "x" -n 24 --seed 7 --temp 1.5 --top-k 0 --top-p 1 --min-p 0 -q -t 2
    [[ $output == "$a" ]]
    run -0 ml-run -m "$(M)" -p "x" -n 24 --seed 8 --temp 1.5 --top-k 0 --top-p 1 --min-p 0 -q
    [[ $output != "$a" ]]
}

@test "--ids: ids in, ids out, no tokenizer needed" {
    "$MKMODEL" -o "$BATS_TEST_TMPDIR/s.mlb"
    run -0 --separate-stderr ml-run -m "$BATS_TEST_TMPDIR/s.mlb" --ids -p "1 2, 3" -n 6 --temp 0 -q
    [[ $output =~ ^[0-9]+( [0-9]+){5}$ ]]
    run -2 --separate-stderr ml-run -m "$BATS_TEST_TMPDIR/s.mlb" --ids -p "1 999" -n 6
    [[ ${stderr_lines[0]} == "ml-run: --ids: '999' is not a token id below 256" ]]
}

@test "generation ends at every end-of-generation token, which is never printed; --ignore-eos forbids them" {
    local d=$BATS_TEST_TMPDIR
    # The fixture Qwen3: EOS <|endoftext|> (381) and <|im_end|> (383) end a
    # generation; greedy, the prompt 5 383 continues with 383.
    run -0 gguf2mlb -q -o "$d/q.mlb" "$FIX/models/qwen3/qwen3-q8_0.gguf"
    run -0 --separate-stderr ml-run -m "$d/q.mlb" --ids -p "5 383" -n 12 --temp 0
    [[ -z $output ]]
    [[ $stderr == *"generation 0 tokens"* ]]
    # --ignore-eos: the end tokens cannot be drawn
    run -0 --separate-stderr ml-run -m "$d/q.mlb" --ids -p "5 383" -n 12 --temp 0 --ignore-eos
    read -ra ids <<<"$output"
    [[ ${#ids[@]} -eq 12 ]]
    for id in "${ids[@]}"; do [[ $id != 381 && $id != 383 ]] || fail_with "$id generated"; done
    # the same as text: nothing printed for the end token
    run -0 --separate-stderr ml-run -m "$d/q.mlb" -p "hello" -n 8 --temp 0 -q
    local text=$output
    run -0 mlt-dump --encode "hello" "$d/q.mlt"
    run -0 --separate-stderr ml-run -m "$d/q.mlb" --ids -p "$output" -n 8 --temp 0 -q
    read -ra ids <<<"$output"
    run -0 mlt-dump --decode "$d/q.mlt" "${ids[@]}"
    [[ $output == "$text" ]]
    # without a tokenizer, --ids knows no end: 383 is an id like any other
    rm "$d/q.mlt"
    run -0 --separate-stderr ml-run -m "$d/q.mlb" --ids -p "5 383" -n 3 --temp 0
    [[ $output == "383 383 383" ]]
}

@test "--stop / -r: the text ends before the first stop string, which is never printed" {
    local sampling=(--temp 1.5 -s 5 --top-k 0 --top-p 1 --min-p 0 -q)
    run -0 ml-run -m "$(M)" -p "Once" -n 48 "${sampling[@]}"
    local text=$output
    (( ${#text} > 40 )) || fail_with "too short a text: '$text'"
    # a stop string from the middle of the text: everything before its
    # first occurrence, nothing after
    local stop=${text:20:3} want=${text%%"${text:20:3}"*}
    run -0 ml-run -m "$(M)" -p "Once" -n 48 "${sampling[@]}" --stop "$stop"
    [[ $output == "$want" ]] || fail_with "stop '$stop': '$output', expected '$want'"
    run -0 ml-run -m "$(M)" -p "Once" -n 48 "${sampling[@]}" -r "no such text" -r "$stop"
    [[ $output == "$want" ]]
    run -0 ml-run -m "$(M)" -p "Once" -n 48 "${sampling[@]}" --reverse-prompt "$stop"
    [[ $output == "$want" ]]
    # a stop string that never comes: the whole text, its start held back
    # and released at the end
    run -0 ml-run -m "$(M)" -p "Once" -n 48 "${sampling[@]}" -r "${text:0:2}zzzz"
    [[ $output == "$text" ]]
    run -2 --separate-stderr ml-run -m "$(M)" --ids -p "1 2" -r x
    [[ ${stderr_lines[0]} == "ml-run: --stop works on generated text (not with --ids, --perplexity or --logits)" ]]
    run -2 --separate-stderr ml-run -m "$(M)" -p hi -r ""
    [[ ${stderr_lines[0]} == "ml-run: --stop: an empty stop string" ]]
}

# tests/fixtures/continue (tools/make-continue-fixture.sh): what llama.cpp
# prints for a prompt on a SentencePiece vocabulary with a ▁ prefix, up to
# its first byte that is not ASCII (a partial character, printed raw).
@test "the text continues the prompt: the first token's ▁ is a space, as in llama.cpp" {
    local d=$BATS_TEST_TMPDIR prompt want got n=0 spaced=0
    gguf2mlb -q -o "$d/tiny.mlb" -t "$d/tiny.mlt" "$FIX/continue/tiny-q8_0.gguf"
    while IFS=$'\t' read -r prompt want; do
        got=$(ml-run -m "$d/tiny.mlb" -p "$prompt" -n 6 --temp 0 -q)
        want=$(LC_ALL=C sed 's/[\x80-\xff].*//' <<<"$want")
        got=$(LC_ALL=C sed 's/[\x80-\xff].*//' <<<"<s> $prompt$got")
        [[ $got == "$want" ]] || fail_with "$prompt: '$got', llama.cpp '$want'"
        [[ $want == "<s> $prompt "* ]] && spaced=$((spaced + 1))
        n=$((n + 1))
    done <"$FIX/continue/llama-simple.tsv"
    ((n == 4 && spaced == 3))
    # a grammar sees that space too: words of " t" and digits, from the first
    run -0 ml-run -m "$d/tiny.mlb" -p "t1 t2" -n 5 --temp 0 -q --grammar 'root ::= (" t" [0-9]+)+'
    [[ $output =~ ^(\ t[0-9]+)+$ ]] || fail_with "'$output'"
    run -0 ml-run -m "$d/tiny.mlb" -p "t1 t2" -n 5 --temp 0 -q --grammar 'root ::= "t" [0-9]+'
    [[ $output == "" ]] || [[ $output =~ ^t[0-9]+$ ]] || fail_with "'$output'"
}

@test "--presence-penalty, --frequency-penalty, --logit-bias (-l) as llama.cpp spells them" {
    run -0 ml-run -m "$(M)" -p "Hi" -n 12 --temp 0 -q
    local plain=$output
    run -0 ml-run -m "$(M)" -p "Hi" -n 12 --temp 0 -q --frequency-penalty 2
    [[ $output != "$plain" ]]
    # --repeat-last-n 0 turns every penalty off
    run -0 ml-run -m "$(M)" -p "Hi" -n 12 --temp 0 -q --presence-penalty 2 --frequency-penalty 2 --repeat-last-n 0
    [[ $output == "$plain" ]]
    # the first generated id, banned: another text; favoured: it, again and again
    run -0 ml-run -m "$(M)" --ids -p "1 100 200" -n 3 --temp 0 -q --ignore-eos
    local first=${output%% *}
    run -0 ml-run -m "$(M)" --ids -p "1 100 200" -n 3 --temp 0 -q --ignore-eos -l "$first-inf"
    [[ ${output%% *} != "$first" ]]
    run -0 ml-run -m "$(M)" --ids -p "1 100 200" -n 3 --temp 0 -q --ignore-eos --logit-bias 7+100
    [[ $output == "7 7 7" ]]
    run -0 ml-run -m "$(M)" --ids -p "1 100 200" -n 3 --temp 0 -q --ignore-eos -l 7+100 -l 7-200
    [[ $output != "7 7 7" ]]
    local bad
    for bad in 7 7+ +7 7*2 x+1 7+1x 7+nan 7+inf 99999999999+1; do
        run -2 --separate-stderr ml-run -m "$(M)" -p hi -l "$bad"
        [[ ${stderr_lines[0]} == "ml-run: --logit-bias: '$bad'"* ]] || fail_with "$bad: ${stderr_lines[0]}"
    done
    run -2 --separate-stderr ml-run -m "$(M)" -p hi --presence-penalty 3
    [[ ${stderr_lines[0]} == "ml-run: --presence-penalty: '3' is not a number in [-2, 2]" ]]
    run -2 --separate-stderr ml-run -m "$(M)" -p hi --frequency-penalty -2.5
    [[ ${stderr_lines[0]} == "ml-run: --frequency-penalty: '-2.5' is not a number in [-2, 2]" ]]
    # an id the model does not have: the generator's refusal, naming it
    run -2 --separate-stderr ml-run -m "$(M)" -p hi -l 4000000000+1
    [[ ${stderr_lines[0]} == *"ML_E_INVAL: logit bias for token 4000000000"* ]] || fail_with "${stderr_lines[0]}"
}

@test "llama.cpp's spellings and escapes: --predict, --ctx-size, --batch-size, --temperature, --repeat-last-n, -e" {
    run -0 ml-run -m "$(M)" -p "Hi" -n 12 --temp 0.7 -s 3 -c 64 -b 8 -q
    local want=$output
    run -0 ml-run -m "$(M)" -p "Hi" --predict 12 --temperature 0.7 -s 3 --ctx-size 64 --batch-size 8 -q
    [[ $output == "$want" ]]
    # --repeat-last-n 0 turns the penalty off: the same text as without one
    run -0 ml-run -m "$(M)" -p "Hi" -n 12 --temp 0 --repeat-penalty 1.5 --repeat-last-n 0 -q
    local off=$output
    run -0 ml-run -m "$(M)" -p "Hi" -n 12 --temp 0 -q
    [[ $output == "$off" ]]
    run -0 ml-run -m "$(M)" -p "Hi" -n 12 --temp 0 --repeat-penalty 1.5 --repeat-last-n 8 -q
    [[ $output != "$off" ]]
    # escapes are turned into bytes by default, as in llama.cpp; -e says so
    # (the prompts compared through their logits)
    local d=$BATS_TEST_TMPDIR
    run -0 ml-run -m "$(M)" -p 'a\nb\x41\t"' -n 0 -q --logits "$d/esc"
    run -0 ml-run -m "$(M)" --no-escape -p $'a\nbA\t"' -n 0 -q --logits "$d/bytes"
    cmp "$d/esc" "$d/bytes"
    run -0 ml-run -m "$(M)" -e -p 'a\nb\x41\t"' -n 0 -q --logits "$d/e"
    cmp "$d/esc" "$d/e"
    # --no-escape keeps the backslashes: another prompt
    run -0 ml-run -m "$(M)" --no-escape -p 'a\nb\x41\t"' -n 0 -q --logits "$d/raw"
    ! cmp -s "$d/esc" "$d/raw"
    run -0 ml-run -m "$(M)" --help
    has_line '^ +\(also --ctx-size\)$' "${lines[@]}"
}

@test "--logits: one row per evaluated position; kernels, threads and batches change no bit" {
    local f n
    for f in "$FIX"/runtime/*.mlb; do
        n=$(basename "$f" .mlb)
        run -0 ml-run -m "$f" --ids -f "$FIX/runtime/$n.ids" -n 0 --ctx 64 --logits "$BATS_TEST_TMPDIR/$n.f32" -q
        [[ $(stat -c %s "$BATS_TEST_TMPDIR/$n.f32") == $(stat -c %s "$FIX/runtime/$n.f32") ]]
        # Kernels and threads change nothing, bit for bit.
        # Batches of 5 tokens, and one of all 40 (the AMX tiles take 32 up).
        for k in scalar avx2 avx512 amx neon neondot; do
            for b in 5 40; do
                ML_KERNELS=$k ml-run -m "$f" --ids -f "$FIX/runtime/$n.ids" -n 0 --ctx 64 \
                    --logits "$BATS_TEST_TMPDIR/$n.$k" -q -t 2 -b $b 2>/dev/null || continue
                cmp "$BATS_TEST_TMPDIR/$n.f32" "$BATS_TEST_TMPDIR/$n.$k"
            done
        done
    done
    # Generated tokens add rows: 3 prompt + 4 generated, the last unevaluated.
    run -0 ml-run -m "$FIX/runtime/llama-q8.mlb" --ids -p "1 2 3" -n 4 --temp 0 --logits "$BATS_TEST_TMPDIR/g.f32" -q
    [[ $(stat -c %s "$BATS_TEST_TMPDIR/g.f32") == $((6 * 96 * 4)) ]]
}

@test "-v: the kernel variant and the float math that comes with it" {
    local m="$FIX/runtime/llama-q8.mlb" k want
    ML_KERNELS=scalar run -0 --separate-stderr ml-run -v -m "$m" --ids -p "1 2 3" -n 2 -q
    [[ ${stderr_lines[0]} =~ ^"ml-run: $m: 2 layers, dim 64, vocab 96, context 128, cache f32/f32, "[0-9]+" threads, kernels scalar, float math scalar, prefetch "(near|far|far-k)", seed "[0-9]+$ ]]
    # Each variant this build and CPU run: AVX2's float math with the AVX2
    # kernels, AVX-512's with the AVX-512 and AMX ones, the reference with
    # NEON's (no NEON float math yet).
    for k in avx2:avx2 avx512vnni-lanes:avx512 avx512vnni:avx512 amx:avx512 neon:scalar neondot:scalar; do
        ML_KERNELS=${k%%:*} ml-run -q -m "$m" --ids -p 1 -n 0 2>/dev/null || continue
        want="kernels ${k%%:*}, float math ${k#*:}, prefetch"
        ML_KERNELS=${k%%:*} run -0 --separate-stderr ml-run -v -m "$m" --ids -p "1 2 3" -n 2 -q
        [[ ${stderr_lines[0]} == *", $want "* ]]
    done
}

@test "ML_PREFETCH: near, far or far-k, the same bits; -v names it; another value is refused" {
    local m="$FIX/runtime/llama-q4.mlb" d=$BATS_TEST_TMPDIR p
    # Q4_0 and the K-quants (llama2's Q4_K_M holds Q4_K and Q6_K rows),
    # whose distances the three profiles set differently.
    gguf2mlb -q -o "$d/k.mlb" -t "$d/k.mlt" "$FIX/models/llama2/llama2-q4_k_m.gguf"
    for p in near far far-k; do
        ML_PREFETCH=$p run -0 --separate-stderr ml-run -v -m "$m" --ids -p "1 2 3" -n 2 -q
        [[ ${stderr_lines[0]} == *", prefetch $p, seed "* ]]
        ML_PREFETCH=$p ml-run -m "$m" --ids -f "$FIX/runtime/llama-q4.ids" -n 0 --ctx 64 --logits "$d/$p" -q -t 2
        ML_PREFETCH=$p ml-run -m "$d/k.mlb" --ids -p "1 5 9 14 20 27" -n 0 --logits "$d/k-$p" -q -t 2
    done
    cmp "$d/near" "$d/far"
    cmp "$d/near" "$d/far-k"
    cmp "$d/k-near" "$d/k-far"
    cmp "$d/k-near" "$d/k-far-k"
    ML_PREFETCH=auto run -0 --separate-stderr ml-run -v -m "$m" --ids -p 1 -n 1 -q
    [[ ${stderr_lines[0]} =~ ", prefetch "(near|far|far-k)", seed " ]]
    for p in farther far-; do
        ML_PREFETCH=$p run -2 --separate-stderr ml-run -m "$m" --ids -p 1
        [[ ${stderr_lines[0]} == "ml-run: $m: ML_E_INVAL: ML_PREFETCH: unknown prefetch profile (expected near, far, far-k or auto)" ]]
        [[ -z $output ]]
    done
}

@test "ML_KERNELS=VARIANT,KERNEL=VARIANT: a kernel's own variant, the same bits; -v names each" {
    local m="$FIX/runtime/llama-q4.mlb" d=$BATS_TEST_TMPDIR k b
    for b in 5 40; do
        ML_KERNELS=scalar ml-run -m "$m" --ids -f "$FIX/runtime/llama-q4.ids" -n 0 --ctx 64 --logits "$d/ref$b" -q -b $b
    done
    for k in avx2 avx512 amx neon neondot; do
        ML_KERNELS=$k ml-run -q -m "$m" --ids -p 1 -n 0 2>/dev/null || continue
        for b in 5 40; do
            ML_KERNELS=$k,matvec_q4_0=scalar,fmath=scalar ml-run -m "$m" --ids -f "$FIX/runtime/llama-q4.ids" \
                -n 0 --ctx 64 --logits "$d/$k$b" -q -t 2 -b $b
            cmp "$d/ref$b" "$d/$k$b"
            ML_KERNELS=scalar,matmul_q4_0=$k,matvec_q8_0=$k ml-run -m "$m" --ids -f "$FIX/runtime/llama-q4.ids" \
                -n 0 --ctx 64 --logits "$d/s$k$b" -q -t 2 -b $b
            cmp "$d/ref$b" "$d/s$k$b"
        done
        ML_KERNELS=scalar,matmul_q4_0=$k run -0 --separate-stderr ml-run -v -m "$m" --ids -p "1 2 3" -n 2 -q
        [[ ${stderr_lines[0]} == *", kernels scalar, float math scalar, "* ]]
        [[ ${stderr_lines[1]} == "ml-run: kernels by operation: quantize_q8_0=scalar matvec_q8_0=scalar matvec_q4_0=scalar matmul_q8_0=scalar matmul_q4_0=$k"*" fmath=scalar" ]]
    done
    ML_KERNELS=scalar,frob=avx2 run -2 --separate-stderr ml-run -m "$m" --ids -p 1
    [[ ${stderr_lines[0]} == *"ML_KERNELS: unknown kernel variant"* ]]
}

@test "the context: a prompt too long, generation up to the end, above max_seq" {
    "$MKMODEL" -o "$BATS_TEST_TMPDIR/s.mlb"
    run -2 --separate-stderr ml-run -m "$BATS_TEST_TMPDIR/s.mlb" --ids -p "1 2 3 4 5" --ctx 4
    [[ ${stderr_lines[0]} == "ml-run: ML_E_INVAL: the prompt has 5 tokens; the context holds 4 (raise --ctx, at most max_seq 256)" ]]
    run -0 --separate-stderr ml-run -m "$BATS_TEST_TMPDIR/s.mlb" --ids -p "1 2 3" --ctx 6 -n 50 --temp 0 -q
    [[ $output =~ ^[0-9]+( [0-9]+){3}$ ]]
    [[ ${stderr_lines[0]} == "ml-run: the context is full (6 positions; --ctx); stopping" ]]
    run -2 --separate-stderr ml-run -m "$BATS_TEST_TMPDIR/s.mlb" --ids -p 1 --ctx 257
    [[ ${stderr_lines[0]} == "ml-run: $BATS_TEST_TMPDIR/s.mlb: ML_E_INVAL: max_seq (offset 32): a context of 257 is above the model's 256" ]]
    ML_KERNELS=frob run -2 --separate-stderr ml-run -m "$BATS_TEST_TMPDIR/s.mlb" --ids -p 1
    [[ ${stderr_lines[0]} == *"ML_KERNELS"* ]]
}

@test "--perplexity: chunks, the result line, too short a text" {
    for i in $(seq 200); do echo "The quick brown fox jumps over the lazy dog number $i."; done > "$BATS_TEST_TMPDIR/t.txt"
    run -0 --separate-stderr ml-run -m "$(M)" --perplexity "$BATS_TEST_TMPDIR/t.txt" --ctx 128 -q
    [[ $output =~ ^$BATS_TEST_TMPDIR/t.txt:\ [0-9]+\ chunks\ of\ 128\ tokens,\ [0-9]+\ scored:\ PPL\ =\ [0-9.]+\ \+/-\ [0-9.]+$ ]]
    local a=$output
    run -0 ml-run -m "$(M)" --perplexity "$BATS_TEST_TMPDIR/t.txt" --ctx 128 -q -t 2 -b 16
    [[ $output == "$a" ]]
    echo "short" > "$BATS_TEST_TMPDIR/s.txt"
    run -2 --separate-stderr ml-run -m "$(M)" --perplexity "$BATS_TEST_TMPDIR/s.txt" --ctx 128
    [[ ${stderr_lines[0]} == *"ML_E_INVAL: "*"fewer than one chunk of 128 (--ctx)" ]]
    run -2 --separate-stderr ml-run -m "$(M)" --perplexity "$BATS_TEST_TMPDIR/s.txt" -p x
}

@test "a closed stdout ends generation quietly; /dev/full is an error" {
    run -0 --separate-stderr bash -c 'ml-run -m "$1" -p "x" -n 200 --temp 0 -q --ignore-eos | head -c 1 > /dev/null; exit ${PIPESTATUS[0]}' _ "$(M)"
    [[ -z $stderr ]]
    run -3 --separate-stderr bash -c 'ml-run -m "$1" -p "x" -n 5 --temp 0 -q --ignore-eos > /dev/full' _ "$(M)"
    [[ $stderr == *"ML_E_IO: write error"* ]]
}

@test "a model that keeps its GGUF's block types runs, the same bits on any kernels and threads" {
    local d=$BATS_TEST_TMPDIR
    gguf2mlb -f -q "$FIX/models/llama2/llama2-q4_k_m.gguf" -o "$d/k.mlb" -t "$d/k.mlt"
    run -0 mlb-info "$d/k.mlb"
    [[ $output == *"per-matrix types (type table)"* ]] || fail_with "$output"
    run -0 --separate-stderr ml-run -m "$d/k.mlb" --logits "$d/a.f32" -p "hello world" -n 0 -t 1
    ML_KERNELS=scalar run -0 --separate-stderr ml-run -m "$d/k.mlb" --logits "$d/b.f32" -p "hello world" -n 0 -t 2
    cmp "$d/a.f32" "$d/b.f32"
    run -0 --separate-stderr ml-run -m "$d/k.mlb" -p hi -n 8 --temp 0 --ignore-eos -q
    local first=$output
    ML_KERNELS=scalar run -0 --separate-stderr ml-run -m "$d/k.mlb" -p hi -n 8 --temp 0 --ignore-eos -q -t 1
    [[ $output == "$first" ]]
    # ml-imatrix collects from it too.
    echo "some text to collect from" >"$d/corpus.txt"
    run -0 --separate-stderr ml-imatrix -m "$d/k.mlb" -f "$d/corpus.txt" -o "$d/k.mli" -c 16
    [[ -s $d/k.mli ]]
}

@test "ML_KERNELS: a K prompt's rows or its tokens in the lanes (avx512, avx512lanes), the same bits; -v names each" {
    local d=$BATS_TEST_TMPDIR ids k b
    ML_KERNELS=avx512lanes ml-run -q -m "$FIX/runtime/llama-q4.mlb" --ids -p 1 -n 0 2>/dev/null ||
        skip "this CPU has no AVX-512 VNNI"
    gguf2mlb -f -q "$FIX/models/llama2/llama2-q4_k_m.gguf" -o "$d/k.mlb" -t "$d/k.mlt"
    ids=$(seq 3 42 | tr '\n' ' ')
    ML_KERNELS=scalar ml-run -m "$d/k.mlb" --ids -p "$ids" -n 0 --logits "$d/ref" -q -b 40
    # 17 and 40 tokens a batch: the rows in the lanes from 17 on (avx512), the tokens (avx512lanes)
    for k in avx512 avx512lanes avx512,matmul_blk=avx512lanes avx512lanes,matmul_blk=avx512; do
        for b in 17 40; do
            ML_KERNELS=$k ml-run -m "$d/k.mlb" --ids -p "$ids" -n 0 --logits "$d/out" -q -t 2 -b $b
            cmp "$d/ref" "$d/out"
        done
    done
    ML_KERNELS=avx512,matmul_blk=avx512lanes run -0 --separate-stderr ml-run -v -m "$d/k.mlb" --ids -p "1 2 3" -n 1 -q
    [[ ${stderr_lines[1]} == *" matvec_blk=avx512vnni matmul_blk=avx512vnni-lanes fmath=avx512vnni" ]]
    ML_KERNELS=avx512lanes run -0 --separate-stderr ml-run -v -m "$d/k.mlb" --ids -p "1 2 3" -n 1 -q
    [[ ${stderr_lines[0]} == *", kernels avx512vnni-lanes, float math avx512, "* ]]
}

@test "--grammar, --grammar-file: the text follows the grammar, the same on any threads and batch; bad grammars fail at their line and column" {
    run -0 --separate-stderr ml-run -m "$(M)" -p Hello -n 20 --temp 0 -q --grammar 'root ::= "yes" | "no"'
    [[ $output == yes || $output == no ]]
    # sampled, so that many tokens are tried: every text is digits and commas
    printf 'root ::= num ("," num)*\nnum ::= [0-9]+ # digits\n' > "$BATS_TEST_TMPDIR/digits.gbnf"
    for seed in 1 2 3 4 5; do
        run -0 --separate-stderr ml-run -m "$(M)" -p Hello -n 24 --seed $seed -q \
            --grammar-file "$BATS_TEST_TMPDIR/digits.gbnf"
        [[ $output =~ ^[0-9]+(,[0-9]+)*,?$ ]]
        a=$output
        run -0 --separate-stderr ml-run -m "$(M)" -p Hello -n 24 --seed $seed -q -t 3 -b 1 \
            --grammar-file "$BATS_TEST_TMPDIR/digits.gbnf"
        [[ $output == "$a" ]]
    done
    run -1 --separate-stderr ml-run -m "$(M)" -p hi --grammar 'root ::= x'
    [[ ${stderr_lines[0]} == "ml-run: --grammar: ML_E_FORMAT: line 1, column 10 (offset 9): undefined rule 'x'" ]]
    run -1 --separate-stderr ml-run -m "$(M)" -p hi --grammar $'root ::= "a"\n  "b"'
    [[ ${stderr_lines[0]} == "ml-run: --grammar: ML_E_FORMAT: line 2, column 3 (offset 15): expected a rule name, found '\"'" ]]
    printf 'root ::= x "a"\nx ::= root | ""\n' > "$BATS_TEST_TMPDIR/left.gbnf"
    run -4 --separate-stderr ml-run -m "$(M)" -p hi --grammar-file "$BATS_TEST_TMPDIR/left.gbnf"
    [[ ${stderr_lines[0]} == "ml-run: $BATS_TEST_TMPDIR/left.gbnf: ML_E_UNSUPPORTED: line 1, column 1 (offset 0): rule 'root' is left-recursive (it can reach itself before a character)" ]]
    run -3 --separate-stderr ml-run -m "$(M)" -p hi --grammar-file "$BATS_TEST_TMPDIR/none"
    [[ ${stderr_lines[0]} == "ml-run: $BATS_TEST_TMPDIR/none: ML_E_IO: cannot open: No such file or directory" ]]
    run -2 --separate-stderr ml-run -m "$(M)" -p hi --grammar 'root ::= "a"' --grammar-file x
    [[ ${stderr_lines[0]} == "ml-run: --grammar and --grammar-file exclude each other" ]]
    run -2 --separate-stderr ml-run -m "$(M)" --ids -p 1 --grammar 'root ::= "a"'
    [[ ${stderr_lines[0]} == "ml-run: --grammar works on generated text (not with --ids, --perplexity, --logits or --imatrix)" ]]
}

# --spec-type: the text with speculation is the text without, whatever the
# sampler, threads, batch, cache window or constraint; what the model
# cannot take back is generated plainly, with a warning.
same_with_spec() {
    local plain spec
    plain=$(ml-run "$@" -q) || fail_with "plain: $*"
    spec=$(ml-run "$@" -q --spec-type ngram-simple --spec-ngram-simple-size-n 2 \
        --spec-draft-n-max 8) || fail_with "spec: $*"
    [[ $spec == "$plain" ]] || fail_with "$*: with speculation: $spec / without: $plain"
}

@test "--spec-type ngram-simple: the same text, bit for bit, and guesses kept" {
    local m=(-m "$(M)" -p "Once upon a time" -n 120) o
    for o in "--temp 0" "--temp 0.8 -s 7" "--temp 1.3 --top-k 0 --top-p 1 --min-p 0 -s 3" \
        "--temp 0.7 -s 5 --repeat-penalty 1.2 --presence-penalty 0.5" "--temp 0 -t 2" \
        "--temp 0 -b 3" "--temp 0 -t 2 --cache-type f16" "--temp 0 --ignore-eos -c 40"; do
        # shellcheck disable=SC2086
        same_with_spec "${m[@]}" $o
    done
    same_with_spec "${m[@]}" --temp 0 --ids -p "1 2 3 4"
    same_with_spec "${m[@]}" --temp 0 --grammar 'root ::= [a-z ]+ "."'
    same_with_spec "${m[@]}" --temp 0 --chat --chat-template llama2 -p "Hi there"
    # the random model repeats itself: most guesses are kept
    run -0 --separate-stderr ml-run "${m[@]}" --temp 0 --spec-type ngram-simple --spec-ngram-simple-size-n 2
    [[ ${stderr_lines[-1]} =~ ^ml-run:\ speculation:\ ([0-9]+)\ tokens\ guessed,\ ([0-9]+)\ kept ]] ||
        fail_with "${stderr_lines[*]}"
    ((BASH_REMATCH[2] > 40)) || fail_with "${stderr_lines[-1]}"
    # a --spec-draft-n-min above the first step's 4 guesses (or a miss's
    # back-off) still guesses, and the text is the same
    run -0 --separate-stderr ml-run "${m[@]}" --temp 0 --spec-type ngram-simple \
        --spec-ngram-simple-size-n 2 --spec-draft-n-min 6 --spec-draft-n-max 8
    [[ ${stderr_lines[-1]} =~ ^ml-run:\ speculation:\ ([0-9]+)\ tokens\ guessed,\ ([0-9]+)\ kept ]] ||
        fail_with "${stderr_lines[*]}"
    ((BASH_REMATCH[2] > 0)) || fail_with "${stderr_lines[-1]}"
    local text=$output
    run -0 --separate-stderr ml-run "${m[@]}" --temp 0
    [[ $output == "$text" ]] || fail_with "with speculation: $text / without: $output"
}

# spec_counts OPTIONS...: ml-run's text in $output, its speculation line's
# counts in $guessed and $kept.
spec_counts() {
    run -0 --separate-stderr ml-run "$@"
    [[ ${stderr_lines[-1]} =~ ^ml-run:\ speculation:\ ([0-9]+)\ tokens\ guessed,\ ([0-9]+)\ kept ]] ||
        fail_with "${stderr_lines[*]}"
    guessed=${BASH_REMATCH[1]} kept=${BASH_REMATCH[2]}
}

@test "--spec-type ngram-simple: guesses fill the tokens a step computes at once" {
    # Q4_1 matrices and a Q6_K classifier, whose products work on sixteen
    # tokens at once with AVX-512 (ml_ctx_step_group): more guesses a
    # step there than with the scalar kernels, the same text
    local d=$BATS_TEST_TMPDIR m=(-p "Once upon a time" -n 120 --temp 0 --ignore-eos) plain
    gguf2mlb -q -o "$d/q41.mlb" -t "$d/q41.mlt" "$FIX/models/llama2/llama2-q4_1.gguf"
    plain=$(ml-run -m "$d/q41.mlb" "${m[@]}" -q)
    local spec=(-m "$d/q41.mlb" "${m[@]}" --spec-type ngram-simple --spec-ngram-simple-size-n 2)
    local guessed kept scalar
    ML_KERNELS=scalar spec_counts "${spec[@]}"
    [[ $output == "$plain" ]] || fail_with "scalar, with speculation: $output / without: $plain"
    scalar=$guessed
    ML_KERNELS=avx512 ml-run -m "$d/q41.mlb" -p hi -n 1 -q >/dev/null 2>&1 ||
        skip "no AVX-512 VNNI here"
    ML_KERNELS=avx512 spec_counts "${spec[@]}"
    [[ $output == "$plain" ]] || fail_with "avx512, with speculation: $output / without: $plain"
    ((guessed > scalar)) || fail_with "guessed: avx512 $guessed, scalar $scalar"
}

@test "--spec-type: sliding windows and linear attention give the same text" {
    local d=$BATS_TEST_TMPDIR
    gguf2mlb -q -o "$d/g.mlb" -t "$d/g.mlt" "$FIX/models/gemma3/gemma3-q8_0.gguf"
    same_with_spec -m "$d/g.mlb" -p "The cat" -n 150 --temp 0
    same_with_spec -m "$d/g.mlb" -p "The cat" -n 150 --temp 0.9 -s 11 -c 64
    gguf2mlb -q -o "$d/l.mlb" -t "$d/l.mlt" "$FIX/models/qwen35/qwen35-q8_0.gguf"
    same_with_spec -m "$d/l.mlb" -p "The cat" -n 60 --temp 0
    run -0 --separate-stderr ml-run -m "$d/l.mlb" -p "The cat" -n 4 --spec-type ngram-simple -q
    [[ ${stderr_lines[0]} == "ml-run: $d/l.mlb: --spec-type: the model's linear-attention state cannot be taken back; generating without speculation" ]] ||
        fail_with "${stderr_lines[*]}"
}

@test "--spec-type: usage errors" {
    run -2 --separate-stderr ml-run -m "$(M)" -p hi --spec-type draft
    [[ ${stderr_lines[0]} == "ml-run: --spec-type: 'draft' is not supported (ngram-simple and draft-simple are)" ]]
    run -2 --separate-stderr ml-run -m "$(M)" -p hi --spec-draft-n-max 4
    [[ ${stderr_lines[0]} == "ml-run: --spec-draft-n-max, --spec-draft-n-min and --spec-ngram-simple-* need --spec-type" ]]
    run -2 --separate-stderr ml-run -m "$(M)" -p hi --spec-type ngram-simple --spec-draft-n-max 4 --spec-draft-n-min 5
    [[ ${stderr_lines[0]} == "ml-run: --spec-draft-n-min 5 is above the draft's most, 4" ]]
    run -2 --separate-stderr ml-run -m "$(M)" -p hi --spec-type ngram-simple --spec-ngram-simple-size-n 0
    run -2 --separate-stderr ml-run -m "$(M)" -p hi --spec-type ngram-simple --spec-draft-n-max 2000
    run -2 --separate-stderr ml-run -m "$(M)" --perplexity /dev/null --spec-type ngram-simple
    [[ ${stderr_lines[0]} == "ml-run: --spec-type speculates on generated tokens (not with --perplexity, --logits or --imatrix, which see every evaluated position)" ]]
}

@test "--json-schema, --json-schema-file: every text is JSON the schema accepts (checked with jq); bad schemas fail naming the keyword's place" {
    local schema='{"type":"object","properties":{"n":{"type":"integer","minimum":3,"maximum":7},"d":{"type":"string","format":"date"},"c":{"type":"string","pattern":"^[a-c]{2}x?$"},"t":{"prefixItems":[{"type":"boolean"},{"enum":["u","v"]}]}},"required":["n","d","c","t"]}'
    for seed in 1 2 3 4; do
        run -0 --separate-stderr ml-run -m "$(M)" -p Hello -n 80 --seed $seed -q --json-schema "$schema"
        jq -e '(keys == ["c","d","n","t"]) and (.n >= 3 and .n <= 7) and (.n | floor == .) and
               (.d | test("^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$")) and
               (.c | test("^[a-c]{2}x?$")) and (.t | length == 2) and (.t[0] | type == "boolean") and
               (.t[1] == "u" or .t[1] == "v")' <<<"$output" || fail_with "seed $seed: $output"
    done
    printf '%s' '{"type":"array","items":{"type":"integer","exclusiveMinimum":-3,"exclusiveMaximum":3},"minItems":2,"maxItems":4}' \
        >"$BATS_TEST_TMPDIR/s.json"
    run -0 --separate-stderr ml-run -m "$(M)" -p Hello -n 40 --seed 5 -q --json-schema-file "$BATS_TEST_TMPDIR/s.json"
    jq -e 'length >= 2 and length <= 4 and all(.[]; . > -3 and . < 3 and floor == .)' <<<"$output" ||
        fail_with "$output"
    run -0 --separate-stderr ml-run -m "$(M)" -p Hello -n 40 --seed 6 -q \
        --json-schema '{"type":"number","exclusiveMinimum":-2,"maximum":1}'
    jq -e 'type == "number" and . > -2 and . <= 1' <<<"$output" || fail_with "$output"
    # not JSON, not a schema: 1; a keyword the grammar cannot keep: 4; a missing file: 3
    run -1 --separate-stderr ml-run -m "$(M)" -p hi --json-schema '{"type":'
    [[ ${stderr_lines[0]} == "ml-run: --json-schema: ML_E_FORMAT: line 1, column 8: unexpected token near end of file" ]]
    run -1 --separate-stderr ml-run -m "$(M)" -p hi --json-schema '{"properties":{"a":{"required":"a"}}}'
    [[ ${stderr_lines[0]} == "ml-run: --json-schema: ML_E_FORMAT: #/properties/a/required: 'required' must be a list of names" ]]
    run -4 --separate-stderr ml-run -m "$(M)" -p hi --json-schema '{"type":"string","format":"email"}'
    [[ ${stderr_lines[0]} == "ml-run: --json-schema: ML_E_UNSUPPORTED: #/format: the format 'email' is not supported (date, time, date-time and uuid are)" ]]
    printf '{"items":{"type":"object","minProperties":1}}' >"$BATS_TEST_TMPDIR/bad.json"
    run -4 --separate-stderr ml-run -m "$(M)" -p hi --json-schema-file "$BATS_TEST_TMPDIR/bad.json"
    [[ ${stderr_lines[0]} == "ml-run: $BATS_TEST_TMPDIR/bad.json: ML_E_UNSUPPORTED: #/items/minProperties: the keyword 'minProperties' is not supported" ]]
    run -3 --separate-stderr ml-run -m "$(M)" -p hi --json-schema-file "$BATS_TEST_TMPDIR/none"
    [[ ${stderr_lines[0]} == "ml-run: $BATS_TEST_TMPDIR/none: ML_E_IO: cannot open: No such file or directory" ]]
    # one constraint at a time, on generated text only
    run -2 --separate-stderr ml-run -m "$(M)" -p hi --grammar 'root ::= "a"' --json-schema '{}'
    [[ ${stderr_lines[0]} == "ml-run: --grammar and --json-schema exclude each other" ]]
    run -2 --separate-stderr ml-run -m "$(M)" -p hi --grammar-file x --json-schema-file y
    [[ ${stderr_lines[0]} == "ml-run: --grammar-file and --json-schema-file exclude each other" ]]
    run -2 --separate-stderr ml-run -m "$(M)" -p hi --json-schema '{}' --json-schema-file y
    [[ ${stderr_lines[0]} == "ml-run: --json-schema and --json-schema-file exclude each other" ]]
    run -2 --separate-stderr ml-run -m "$(M)" --perplexity x --json-schema '{}'
    [[ ${stderr_lines[0]} == "ml-run: --json-schema works on generated text (not with --ids, --perplexity, --logits or --imatrix)" ]]
}
