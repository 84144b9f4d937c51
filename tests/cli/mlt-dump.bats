#!/usr/bin/env bats
# mlt-dump.bats - the header summary, --vocab, --merges, --encode (text,
# standard input, --lines, BOS options), --decode (operands, standard
# input, streaming repair), --json, pipes between them, and errors: exit
# statuses and the error line for missing, malformed and unsupported files
# and for usage mistakes.  Fixtures: tests/fixtures/tok (tools/json2mlt.py).

bats_require_minimum_version 1.5.0

load helpers

FIX="$BATS_TEST_DIRNAME/../fixtures/tok"
L3="$FIX/llama3_1.mlt"
L2="$FIX/llama2.mlt"
GEMMA="$FIX/gemma3.mlt"

# ---------------------------------------------------------------- header

@test "header summary of llama3_1" {
    run -0 --separate-stderr mlt-dump "$L3"
    [[ -z $stderr ]]
    [[ ${lines[0]} == "$L3" ]]
    [[ ${lines[1]} == "  format                 .mlt version 1" ]]
    [[ ${lines[2]} == "  file size              4841885 bytes" ]]
    [[ ${lines[3]} == "  kind                   2               byte-level BPE" ]]
    [[ ${lines[4]} == "  n_vocab                128256          128000 normal, 256 added, 0 byte" ]]
    [[ ${lines[5]} == "  n_merges               280147" ]]
    [[ ${lines[6]} == "  bos                    128000          <|begin_of_text|> (beginning of sequence)" ]]
    [[ ${lines[7]} == "  eos                    128009          <|eot_id|> (end of sequence)" ]]
    [[ ${lines[8]} == "  flags                  3               add_bos ignore_merges" ]]
    [[ ${lines[9]} == "  pre-tokenizer          Llama 3 regex" ]]
    # no chat section (json2mlt.py writes none): EOS ends a generation, no template
    [[ ${lines[11]} == "  end of generation      1               128009 <|eot_id|>" ]]
    [[ ${lines[12]} == "  chat templates         0               none" ]]
    [[ ${#lines[@]} -eq 13 ]]
}

@test "header summary of gemma3 names the no_prefix extension and byte tokens" {
    run -0 mlt-dump "$GEMMA"
    [[ ${lines[4]} == "  n_vocab                262145          255474 normal, 6415 added, 256 byte" ]]
    [[ ${lines[8]} == "  flags                  129             add_bos no_prefix" ]]
    [[ ${lines[9]} == "  pre-tokenizer          none; spaces as ▁, no prefix" ]]
}

@test "--json header; standard input is (stdin)" {
    run -0 bash -c "cat '$FIX/qwen3.mlt' | mlt-dump --json -"
    jq -e '.file == "(stdin)" and .kind == 2 and .n_vocab == 151669 and .n_merges == 151387
        and .bos == -1 and .eos == 151645 and .flags == 24 and .flag_names == "nfc single_digits"
        and .normal == 151643 and .added == 26 and .byte == 0' <<<"$output"
}

# ---------------------------------------------------------------- vocab, merges

@test "the chat section: end-of-generation ids and templates in the summary and --json; --print-template" {
    local d=$BATS_TEST_TMPDIR
    run -0 gguf2mlb -q -o "$d/m.mlb" "$BATS_TEST_DIRNAME/../fixtures/models/qwen3/qwen3-q8_0.gguf"
    run -0 mlt-dump "$d/m.mlt"
    [[ ${lines[8]} == "  flags                  536             nfc single_digits chat" ]]
    [[ ${lines[11]} == "  end of generation      2               381 <|endoftext|>, 383 <|im_end|>" ]]
    [[ ${lines[12]} == "  chat templates         0               none" ]]
    run -0 mlt-dump --json "$d/m.mlt"
    [[ $(jq -c '[.eog[].id]' <<<"$output") == "[381,383]" ]]
    [[ $(jq -c '.eog[1].piece' <<<"$output") == '"<|im_end|>"' ]]
    [[ $(jq -c '.templates' <<<"$output") == "[]" ]]
    run -1 --separate-stderr mlt-dump --print-template default "$d/m.mlt"
    [[ $stderr == "mlt-dump: $d/m.mlt: ML_E_INVAL: no chat template named 'default' (the tokenizer has none)" ]]
    [[ -z $output ]]
}

@test "--render: a conversation as the model's template writes it; --template FILE as jinja2 renders it" {
    local d=$BATS_TEST_TMPDIR c="$BATS_TEST_DIRNAME/../fixtures/chat"
    gzip -dc "$BATS_TEST_DIRNAME/../fixtures/vocab/smollm2-135m.gguf.gz" >"$d/smol.gguf"
    run -0 gguf2mlb --tokenizer-only "$d/smol.gguf"
    echo '[{"role":"user","content":"Hi"}]' >"$d/m.json"
    run -0 mlt-dump --render "$d/m.json" "$d/smol.mlt"
    [[ $output == $'<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant' ]]
    run -0 mlt-dump --render "$d/m.json" --no-generation-prompt "$d/smol.mlt"
    [[ $output == *$'user\nHi<|im_end|>' ]]
    # the object form, whose own variables win; standard input
    run -0 bash -c 'echo "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"add_generation_prompt\":false}" | mlt-dump --render - "$1"' _ "$d/smol.mlt"
    [[ $output == *$'user\nHi<|im_end|>' ]]
    # another template, byte for byte what jinja2 made of it (the golden renders)
    local t conv
    for t in Qwen-Qwen2.5-7B-Instruct google-gemma-2-2b-it mistralai-Mistral-Nemo-Instruct-2407; do
        for conv in multi_turn system_user template_syntax; do
            [[ -f $c/golden/$t/$conv.txt ]] || continue
            mlt-dump --render "$c/vars/$conv.json" --template "$c/templates/$t.jinja" "$d/smol.mlt" >"$d/out"
            cmp "$d/out" "$c/golden/$t/$conv.txt" || fail_with "$t / $conv differs"
        done
    done
    # errors: bad JSON (exit 1, the offset in the file), a template refusing the roles, no template
    printf '[{"role":"user"' >"$d/bad.json"
    run -1 --separate-stderr mlt-dump --render "$d/bad.json" "$d/smol.mlt"
    [[ $stderr == "mlt-dump: $d/bad.json: ML_E_INVAL: vars (offset "*"): JSON: "* ]]
    printf '{%% if x %%}' >"$d/bad.jinja"
    run -1 --separate-stderr mlt-dump --render "$d/m.json" --template "$d/bad.jinja" "$d/smol.mlt"
    [[ $stderr == "mlt-dump: $d/bad.jinja: ML_E_FORMAT: template (offset "*"): line 1, column "* ]]
    echo '[{"role":"user","content":"a"},{"role":"user","content":"b"}]' >"$d/two.json"
    run -1 --separate-stderr mlt-dump --render "$d/two.json" --template "$c/templates/google-gemma-2-2b-it.jinja" "$d/smol.mlt"
    [[ $stderr == *"ML_E_INVAL"*"alternate"* ]]
    run -1 --separate-stderr mlt-dump --render "$d/m.json" "$L2"
    [[ $stderr == "mlt-dump: $L2: ML_E_INVAL: the tokenizer has no chat template (give one: --chat-template NAME, one of chatml, llama2, llama3, mistral, mistral-v1, gemma, phi3, zephyr, or --chat-template-file FILE)" ]]
    run -2 --separate-stderr mlt-dump --template "$d/bad.jinja" "$L2"
    [[ ${stderr_lines[0]} == "mlt-dump: --template, --chat-template, --no-generation-prompt and --ids go with --render" ]]
}

@test "--render --chat-template NAME: a built-in for a tokenizer without a template, or one of its own" {
    local d=$BATS_TEST_TMPDIR c="$BATS_TEST_DIRNAME/../fixtures/chat"
    # Llama 2's tokenizer has none: the built-in ChatML renders as OpenHermes' own template
    mlt-dump --render "$c/vars/system_user.json" --chat-template chatml "$L2" >"$d/out"
    cmp "$d/out" "$c/golden/teknium-OpenHermes-2.5-Mistral-7B/system_user.txt"
    mlt-dump --render "$c/vars/multi_turn.json" --chat-template llama3 "$L2" >"$d/out"
    cmp "$d/out" "$c/golden/meta-llama-Meta-Llama-3-8B-Instruct/multi_turn.txt"
    # a name the tokenizer has wins over a built-in of that name
    gzip -dc "$BATS_TEST_DIRNAME/../fixtures/vocab/smollm2-135m.gguf.gz" >"$d/smol.gguf"
    gguf2mlb --tokenizer-only "$d/smol.gguf" 2>/dev/null
    run -0 mlt-dump --render "$c/vars/user_only.json" --chat-template default "$d/smol.mlt"
    [[ $output == *"<|im_start|>user"* ]]
    run -2 --separate-stderr mlt-dump --render "$c/vars/user_only.json" --chat-template nosuch "$L2"
    [[ ${stderr_lines[0]} == "mlt-dump: --chat-template: 'nosuch' is neither a template of "*" nor a built-in (chatml, llama2, llama3, mistral, mistral-v1, gemma, phi3, zephyr)" ]]
    run -2 --separate-stderr mlt-dump --render "$c/vars/user_only.json" --chat-template chatml --template "$d/out" "$L2"
    [[ ${stderr_lines[0]} == "mlt-dump: --template and --chat-template exclude each other" ]]
    # --ids: the conversation's ids (without marker text in it, those of the
    # rendered text encoded as a whole, no BOS); -j as {"ids": [...]}
    run -0 mlt-dump --render "$c/vars/multi_turn.json" --ids "$d/smol.mlt"
    local ids=$output
    run -0 bash -c 'mlt-dump --render "$1" "$2" | mlt-dump --no-bos --encode - "$2"' _ "$c/vars/multi_turn.json" "$d/smol.mlt"
    [[ $output == "$ids" ]]
    run -0 mlt-dump --render "$c/vars/multi_turn.json" --ids -j "$d/smol.mlt"
    [[ $(jq -r '.ids | map(tostring) | join(" ")' <<<"$output") == "$ids" ]]
    run -2 --separate-stderr mlt-dump --ids "$d/smol.mlt"
    [[ ${stderr_lines[0]} == "mlt-dump: --template, --chat-template, --no-generation-prompt and --ids go with --render" ]]
}

@test "--vocab: id, attr, piece with control bytes escaped" {
    run -0 mlt-dump --vocab "$L3"
    [[ ${#lines[@]} -eq 128256 ]]
    [[ ${lines[0]} == $'0\tnormal\t!' ]]
    [[ ${lines[198]} == $'198\tnormal\t\\n' ]]
    [[ ${lines[220]} == $'220\tnormal\t ' ]]
    [[ ${lines[128000]} == $'128000\tadded\t<|begin_of_text|>' ]]
    run -0 mlt-dump --vocab "$L2"
    [[ ${lines[3]} == $'3\tbyte\t\\x00' ]]
    [[ ${lines[95]} == $'95\tbyte\t\\\\' ]]
    [[ ${lines[29871]} == $'29871\tnormal\t▁' ]]
}

@test "--vocab composes with grep; --json has the exact bytes in hex" {
    run -0 bash -c "mlt-dump --vocab '$L3' | grep -P '\tHello\$'"
    [[ $output == $'9906\tnormal\tHello' ]]
    run -0 bash -c "mlt-dump --vocab --json '$L2' | sed -n 4p"
    jq -e '.id == 3 and .attr == "byte" and .hex == "00"' <<<"$output"
}

@test "--merges: rank, ids and pieces" {
    run -0 bash -c "mlt-dump --merges '$L2' | head -2"
    [[ ${lines[0]} == $'0\t29871\t29873\t260\t▁\tt\t▁t' ]]
    [[ ${lines[1]} == $'1\t29872\t29878\t261\te\tr\ter' ]]
    run -0 bash -c "mlt-dump --merges --json '$L2' | head -1"
    [[ $output == '{"rank":0,"left":29871,"right":29873,"merged":260}' ]]
}

# ---------------------------------------------------------------- encode

@test "--encode TEXT, with the tokenizer's own BOS, --no-bos and --bos" {
    run -0 mlt-dump --encode "Hello world" "$L3"
    [[ $output == "128000 9906 1917" ]]
    run -0 mlt-dump --no-bos --encode "Hello world" "$L3"
    [[ $output == "9906 1917" ]]
    run -0 mlt-dump --encode "Hello world" "$FIX/llama3.mlt"
    [[ $output == "9906 1917" ]]
    run -0 mlt-dump --bos --encode "Hello world" "$FIX/llama3.mlt"
    [[ $output == "128000 9906 1917" ]]
    run -0 mlt-dump --encode "a</s>b" "$L2"
    [[ $output == "1 263 2 289" ]]
}

@test "--encode - reads standard input; --lines gives one line per line" {
    run -0 bash -c "echo hi | mlt-dump --no-bos --encode - '$L3'"
    [[ $output == "6151 198" ]]
    run -0 bash -c "printf 'Hello world\nhi\n\n' | mlt-dump -l --encode - '$L3'"
    [[ ${#lines[@]} -eq 3 ]]
    [[ ${lines[0]} == "128000 9906 1917" ]]
    [[ ${lines[1]} == "128000 6151" ]]
    [[ ${lines[2]} == "128000" ]]
    run -0 mlt-dump --json --encode "Hello" "$FIX/qwen3.mlt"
    [[ $output == '{"ids":[9707]}' ]]
}

@test "invalid UTF-8 is encoded as U+FFFD" {
    run -0 bash -c "printf 'a\\xffb' | mlt-dump --no-bos --encode - '$L3'"
    want=$(mlt-dump --no-bos --encode $'a\xef\xbf\xbdb' "$L3")
    [[ $output == "$want" ]]
}

# ---------------------------------------------------------------- decode

@test "--decode ID...: the file may stand before or after the ids" {
    run -0 mlt-dump --decode "$L3" 128000 9906 1917
    [[ $output == "<|begin_of_text|>Hello world" ]]
    run -0 mlt-dump --decode 9906 1917 "$L3"
    [[ $output == "Hello world" ]]
    run -0 mlt-dump --decode --skip-bos-eos "$L3" 128000 9906 128009
    [[ $output == "Hello" ]]
}

@test "--decode reads ids from standard input: encode | decode gives the text back" {
    text='Grüße, 世界! 👋  code: x += 1'
    for f in llama3_1 qwen3 gemma3 mistral llama2; do
        run -0 bash -c "mlt-dump --encode '$text' '$FIX/$f.mlt' | mlt-dump --decode --skip-bos-eos '$FIX/$f.mlt'"
        [[ $output == "$text" ]] || fail_with "$f: $output"
    done
}

@test "--decode: SentencePiece spaces, --keep-space, byte tokens, repair" {
    run -0 mlt-dump --decode "$L2" 15043 3186
    [[ $output == "Hello world" ]]
    run -0 mlt-dump --decode --keep-space "$L2" 15043 3186
    [[ $output == " Hello world" ]]
    # <0xE2> <0x82> <0xAC> is the euro sign; <0xE2> alone is repaired.
    run -0 mlt-dump --decode "$L2" 229 133 175
    [[ $output == "€" ]]
    run -0 mlt-dump --decode "$L2" 229 263
    [[ $output == $'\xef\xbf\xbd a' ]]
    run -0 mlt-dump --json --decode "$L2" 15043
    [[ $output == '{"text":"Hello"}' ]]
}

@test "--decode: an id beyond the vocabulary is an error (exit 2)" {
    run -2 --separate-stderr mlt-dump --decode "$L2" 15043 32000
    [[ $stderr == "mlt-dump: $L2: ML_E_INVAL: token id 32000 is not below n_vocab 32000" ]]
}

# ---------------------------------------------------------------- errors

@test "missing file: exit 3" {
    run -3 --separate-stderr mlt-dump "$BATS_TEST_TMPDIR/none.mlt"
    [[ $stderr == "mlt-dump: $BATS_TEST_TMPDIR/none.mlt: ML_E_IO: cannot open: No such file or directory" ]]
}

@test "wrong files: a model, a JSON file; exit 1 with the field and offset" {
    f="$BATS_TEST_TMPDIR/m.mlt"
    printf 'MLB1\1\0\0\0' > "$f"
    head -c 100 /dev/zero >> "$f"
    run -1 --separate-stderr mlt-dump "$f"
    [[ $stderr == "mlt-dump: $f: ML_E_FORMAT: magic (offset 0): \"MLB1\" is not \"MLT1\": this is an .mlb model, not a tokenizer" ]]
    printf '{"version": "1.0"}' > "$f"
    run -1 --separate-stderr mlt-dump "$f"
    [[ $stderr == *'this looks like JSON (a tokenizer.json?); convert it with tools/json2mlt.py' ]]
}

@test "unknown flag bit, newer version, truncation, trailing bytes: exit 1" {
    f=$(mutant "$L2" x.mlt)
    put_u32 "$f" 28 $((1 | 4096))
    run -1 --separate-stderr mlt-dump "$f"
    [[ $stderr == "mlt-dump: $f: ML_E_FORMAT: flags (offset 28): 0x1001 has unknown bits 0x1000 (this build knows 0xfff)" ]]
    f=$(mutant "$L2" y.mlt)
    put_u32 "$f" 4 2
    run -1 --separate-stderr mlt-dump "$f"
    [[ $stderr == "mlt-dump: $f: ML_E_FORMAT: version (offset 4): 2 is not 1 (this build reads version 1)" ]]
    f="$BATS_TEST_TMPDIR/z.mlt"
    head -c 1000000 "$L2" > "$f"
    run -1 --separate-stderr mlt-dump "$f"
    [[ $stderr == "mlt-dump: $f: ML_E_FORMAT: n_merges (offset 16): 61249 merges need 734988 bytes, "* ]]
    f=$(mutant "$L2" t.mlt)
    printf 'x' >> "$f"
    run -1 --separate-stderr mlt-dump "$f"
    [[ $stderr == "mlt-dump: $f: ML_E_FORMAT: merges (offset 1104659): 1 bytes after the last merge" ]]
}

@test "usage errors: exit 2 with a hint" {
    run -2 --separate-stderr mlt-dump
    [[ ${stderr_lines[0]} == "mlt-dump: no FILE given" ]]
    [[ ${stderr_lines[1]} == "Try 'mlt-dump --help' for more information." ]]
    run -2 --separate-stderr mlt-dump --vocab --merges "$L2"
    [[ ${stderr_lines[0]} == "mlt-dump: --vocab, --merges, --encode, --decode, --print-template and --render exclude each other" ]]
    run -2 --separate-stderr mlt-dump --lines "$L2"
    [[ ${stderr_lines[0]} == "mlt-dump: --lines and --null go with --encode" ]]
    run -2 --separate-stderr mlt-dump --encode - -
    [[ ${stderr_lines[0]} == "mlt-dump: the text and the tokenizer cannot both come from standard input" ]]
    run -2 --separate-stderr mlt-dump "$L2" 12
    [[ ${stderr_lines[0]} == "mlt-dump: one FILE only (extra operand '12')" ]]
    run -2 --separate-stderr mlt-dump "$L2" "$L3"
    [[ ${stderr_lines[0]} == "mlt-dump: one FILE only (extra operand '$L3')" ]]
}

@test "--help lists every option; --version" {
    run -0 mlt-dump --help
    [[ ${lines[0]} == "Usage: mlt-dump [options] FILE [ID...]" ]]
    for o in vocab merges encode decode lines json bos no-bos skip-bos-eos keep-space; do
        has_line "--$o" "${lines[@]}"
        m=$(printf '%s' "--$o" | sed 's/-/\\-/g')
        grep -qF -- "$m" "$BATS_TEST_DIRNAME/../../man/mlt-dump.1" || fail_with "--$o not in mlt-dump(1)"
    done
    run -0 mlt-dump --version
    [[ $output == "mlt-dump (mlcore) "* ]]
}

@test "a full stdout is an I/O error (exit 3)" {
    run -3 --separate-stderr bash -c "mlt-dump --vocab '$L2' > /dev/full"
    [[ $stderr == "mlt-dump: (stdout): ML_E_IO: write error: No space left on device" ]]
}
