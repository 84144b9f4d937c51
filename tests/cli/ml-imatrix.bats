#!/usr/bin/env bats
# ml-imatrix.bats - collecting importance matrices (ml-imatrix and ml-run
# --imatrix), their bytes against mli(5)'s layout, invariance to batch and
# threads, --merge, --show, and the errors and exit statuses.
bats_require_minimum_version 1.5.0
load helpers

FIX="$BATS_TEST_DIRNAME/../fixtures"

setup_file() {
    # A real (tiny) Llama 2 converted from its GGUF, and its tokenizer:
    # dim 256, 2 layers, hidden 256, vocab 384, max_seq 256.
    gguf2mlb -q -o "$BATS_FILE_TMPDIR/m.mlb" "$FIX/models/llama2/llama2-q8_0.gguf"
    for i in $(seq 1 400); do printf 'word%d and the %d-th line of text. ' "$i" "$((i * 7))"; done \
        >"$BATS_FILE_TMPDIR/corpus.txt"
    "$MKMODEL" -o "$BATS_FILE_TMPDIR/other.mlb" --preset tiny
}

M() { echo "$BATS_FILE_TMPDIR/m.mlb"; }
C() { echo "$BATS_FILE_TMPDIR/corpus.txt"; }

# u32le / u64le FILE OFFSET: a little-endian integer of a file.
u32le() { od -An -t u4 -j "$2" -N 4 "$1" | tr -d ' '; }
u64le() { od -An -t u8 -j "$2" -N 8 "$1" | tr -d ' '; }

@test "--help, --version, usage errors" {
    run -0 ml-imatrix --help
    [[ ${lines[0]} == "Usage: ml-imatrix -m MODEL.mlb -f CORPUS -o OUT.mli [options]" ]]
    run -0 ml-imatrix --version
    [[ $output == "ml-imatrix (mlcore) 0.1.0" ]]
    run -2 --separate-stderr ml-imatrix -f "$(C)" -o x.mli
    [[ ${stderr_lines[0]} == "ml-imatrix: no model given (-m MODEL.mlb)" ]]
    run -2 --separate-stderr ml-imatrix -m "$(M)" -o x.mli
    [[ ${stderr_lines[0]} == "ml-imatrix: no corpus given (-f FILE)" ]]
    run -2 --separate-stderr ml-imatrix -m "$(M)" -f "$(C)"
    [[ ${stderr_lines[0]} == "ml-imatrix: name the output with -o OUT.mli (or - for standard output)" ]]
    run -2 --separate-stderr ml-imatrix --merge a.mli
    [[ ${stderr_lines[0]} == "ml-imatrix: --merge writes to -o OUT.mli" ]]
    run -2 --separate-stderr ml-imatrix --merge --show a.mli
    run -2 --separate-stderr ml-imatrix -m "$(M)" -f "$(C)" -o x.mli --ctx 1
    run -2 --separate-stderr ml-imatrix -m "$(M)" -f "$(C)" -o x.mli stray
    [[ ${stderr_lines[0]} == "ml-imatrix: unexpected operand 'stray' (the corpus goes after -f)" ]]
}

@test "collects a file with mli(5)'s header and size" {
    cd "$BATS_TEST_TMPDIR"
    run -0 --separate-stderr ml-imatrix -m "$(M)" -f "$(C)" -c 32 --chunks 3 -o a.mli
    [[ ${stderr_lines[0]} == "ml-imatrix: a.mli: 3 chunks of 32 tokens, "*"PPL "*" over 45 tokens" ]]
    [[ $(head -c 4 a.mli) == MLI1 ]]
    [[ $(u32le a.mli 4) == 1 && $(u32le a.mli 8) == 2 && $(u32le a.mli 12) == 256 ]]
    [[ $(u32le a.mli 16) == 256 && $(u32le a.mli 20) == 0 ]]
    [[ $(u64le a.mli 24) == 96 && $(u64le a.mli 32) == 96 ]] # every token, classifier too
    # 40 + 8 x (2 layers x (256 + 256 + 256 + 256) + 256)
    [[ $(stat -c %s a.mli) == $((40 + 8 * (2 * 1024 + 256))) ]]
    run -0 ml-imatrix -q --show a.mli
    [[ ${lines[0]} == "a.mli: n_layers 2, dim 256, hidden_dim 256, q_dim 256; 96 layer tokens, 96 classifier tokens" ]]
    [[ $(grep -c '^[0-9-] ' <<<"$output") == 9 ]] # 2 layers x 4 slots + the classifier
}

@test "the same bytes for any batch size and thread count, and from ml-run --perplexity" {
    cd "$BATS_TEST_TMPDIR"
    ml-imatrix -q -m "$(M)" -f "$(C)" -c 32 -b 32 -t 1 -o a.mli
    ml-imatrix -q -m "$(M)" -f "$(C)" -c 32 -b 5 -t 2 -o b.mli
    cmp a.mli b.mli
    # ml-run --perplexity evaluates the same chunks with every logit.
    ml-run -q -m "$(M)" --perplexity "$(C)" -c 32 -b 7 --imatrix c.mli >/dev/null
    cmp a.mli c.mli
    # Standard output, through a pipe.
    ml-imatrix -q -m "$(M)" -f - -c 32 -o - <"$(C)" | cmp - a.mli
}

@test "ml-run --imatrix while generating: the prompt skips the classifier" {
    cd "$BATS_TEST_TMPDIR"
    run -0 ml-run -q -m "$(M)" --ids -p "1 5 9 13 17" -n 4 --temp 0 --imatrix g.mli
    # 5 prompt tokens + 3 generated tokens evaluated (the 4th is not);
    # logits for the prompt's last token and the 3 others.
    [[ $(u64le g.mli 24) == 8 && $(u64le g.mli 32) == 4 ]]
    # A failing run writes nothing.
    run -2 --separate-stderr ml-run -q -m "$(M)" --ids -p "1 5 9 13 17" -c 4 --imatrix h.mli
    [[ ${stderr_lines[0]} == "ml-run: ML_E_INVAL: the prompt has 5 tokens; the context holds 4"* ]]
    [[ ! -e h.mli ]]
}

@test "--merge sums sums and counts; other shapes and bad files are refused" {
    cd "$BATS_TEST_TMPDIR"
    ml-imatrix -q -m "$(M)" -f "$(C)" -c 32 --chunks 2 -o a.mli
    run -0 ml-imatrix --merge a.mli a.mli a.mli -o sum.mli
    [[ $(u64le sum.mli 24) == 192 && $(u64le sum.mli 32) == 192 ]]
    [[ $(stat -c %s sum.mli) == $(stat -c %s a.mli) ]]
    # Another model's shape: named file, field and offset.
    ml-run -q -m "$BATS_FILE_TMPDIR/other.mlb" --ids -p "1 2 3" -n 1 --imatrix o.mli
    run -1 --separate-stderr ml-imatrix --merge a.mli o.mli -o bad.mli
    [[ ${stderr_lines[0]} == "ml-imatrix: o.mli: ML_E_MISMATCH: dim (offset 12): this file has 64, the first file 256" ]]
    [[ ! -e bad.mli ]]
    head -c 100 a.mli >short.mli
    run -1 --separate-stderr ml-imatrix --merge a.mli short.mli -o bad.mli
    [[ ${stderr_lines[0]} == "ml-imatrix: short.mli: ML_E_FORMAT: "* ]]
    { printf 'MLI1\002\000\000\000'; tail -c +9 a.mli; } >v2.mli
    run -4 --separate-stderr ml-imatrix --show v2.mli
    [[ ${stderr_lines[0]} == "ml-imatrix: v2.mli: ML_E_UNSUPPORTED: "*"version 2"* ]]
    run -1 --separate-stderr ml-imatrix --show "$(M)"
    [[ ${stderr_lines[0]} == *"ML_E_FORMAT: "*"this is an .mlb model"* ]]
}

@test "--merge converts llama.cpp's importance matrices (GGUF and .dat) into .mli" {
    cd "$BATS_TEST_TMPDIR"
    Q="$BATS_TEST_DIRNAME/../fixtures/quant"
    # The .mli tools/make-imatrix-fixtures.py wrote from the GGUF with gguf-py.
    ml-imatrix --merge "$Q/llama2.imatrix" -o gguf.mli
    cmp gguf.mli "$Q/llama2-imatrix.mli"
    ml-imatrix --merge "$Q/llama2.imatrix.dat" -o dat.mli
    [[ $(u64le dat.mli 24) == 8 && $(stat -c %s dat.mli) == $(stat -c %s gguf.mli) ]]
    run -0 ml-imatrix --show gguf.mli
    run -1 --separate-stderr ml-imatrix --show "$BATS_TEST_DIRNAME/../fixtures/models/llama2/llama2-q8_0.gguf"
    [[ ${stderr_lines[0]} == *"ML_E_FORMAT: general.type (offset 101): \"model\": a GGUF model, not an importance matrix" ]]
}

@test "a corpus shorter than one chunk, an unwritable output, a bad model" {
    cd "$BATS_TEST_TMPDIR"
    printf 'too short' >short.txt
    run -2 --separate-stderr ml-imatrix -m "$(M)" -f short.txt -c 32 -o a.mli
    [[ ${stderr_lines[0]} == "ml-imatrix: short.txt: ML_E_INVAL: "*"fewer than one chunk of 32 (--ctx)" ]]
    [[ ! -e a.mli ]]
    run -3 --separate-stderr ml-imatrix -m "$(M)" -f "$(C)" -c 32 --chunks 1 -o /nonexistent/a.mli
    [[ ${stderr_lines[0]} == "ml-imatrix: /nonexistent/a.mli: ML_E_IO: "* ]]
    [[ ${#stderr_lines[@]} == 1 ]] # before any work
    run -2 --separate-stderr ml-imatrix -m "$(M)" -f "$(C)" -c 512 -o a.mli
    [[ ${stderr_lines[0]} == *"ML_E_INVAL: --ctx 512 is above the model's max_seq 256" ]]
    if [[ -w /dev/full ]]; then
        run -3 --separate-stderr bash -c 'ml-imatrix -q -m "$1" -f "$2" -c 32 --chunks 1 -o - \
            >/dev/full' _ "$(M)" "$(C)"
        [[ ${stderr_lines[0]} == "ml-imatrix: (stdout): ML_E_IO: "* ]]
    fi
}
