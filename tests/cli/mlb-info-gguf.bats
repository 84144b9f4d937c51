#!/usr/bin/env bats
# mlb-info-gguf.bats - mlb-info on GGUF files: the text report (summary,
# metadata, tensor table, conversion), --template, --arrays, --json, the
# format told by the magic (files, standard input, a FIFO, mixed with .mlb
# files), the exit statuses of broken and unsupported files (the same as
# gguf2mlb's), and the comparison with gguf-py's gguf_dump.
#
# What is compared with gguf_dump: for every committed fixture GGUF
# (tests/fixtures/gguf, tests/fixtures/models/*/*.gguf, the gunzipped
# tests/fixtures/vocab/*.gguf.gz), tools/gguf-dump-reference.py ran
# `gguf-dump --json --json-array` and gguf.GGUFReader and wrote, into
# tests/fixtures/gguf/dump/NAME.txt: the version and counts, the alignment,
# the data offset (for files with tensors), every key in file order with its
# type, offset and value (arrays: element types, leaf count, and the values
# themselves up to 16, else the SHA-256 of their JSON), and every tensor's
# name, type, shape, info offset, data offset and size.  The test puts
# `mlb-info --json --arrays` through the same tests/cli/gguf-normalize.sh
# and wants the same bytes.  Needs jq; neither Python nor the network.

bats_require_minimum_version 1.5.0

load helpers

FIX="$BATS_TEST_DIRNAME/../fixtures"
L2="$FIX/models/llama2/llama2-q4_0.gguf" # 29 keys, 21 tensors, no chat template
SMOL="$BATS_FILE_TMPDIR/smollm2.gguf"    # vocabulary only, with a chat template
NORMALIZE="$BATS_TEST_DIRNAME/gguf-normalize.sh"

setup_file() {
    make_fixtures
    gzip -dc "$FIX/vocab/smollm2-135m.gguf.gz" >"$SMOL"
}

# ---------------------------------------------------------------- text

@test "text: the summary of a model GGUF, exit 0, nothing on stderr" {
    run -0 --separate-stderr mlb-info "$L2"
    [[ -z $stderr ]]
    [[ ${lines[0]} == "$L2" ]]
    [[ ${lines[1]} == "  format                 GGUF version 3" ]]
    [[ ${lines[2]} == "  file size              $(file_size "$L2") bytes (579.91 KiB)" ]]
    [[ ${lines[3]} == "  alignment              32" ]]
    [[ ${lines[4]} == "  data offset            10400" ]]
    [[ ${lines[5]} == "  metadata keys          29" ]]
    [[ ${lines[6]} == "  tensors                21, 583424 bytes (569.75 KiB)" ]]
    [[ ${lines[7]} == "metadata (key, type, value)" ]]
}

@test "text: every key with its type and value; arrays by count and first 8 elements" {
    run -0 --separate-stderr mlb-info "$L2"
    has_line '^  general.architecture +string +"llama"$' "${lines[@]}"
    has_line '^  llama.block_count +u32 +2$' "${lines[@]}"
    has_line '^  llama.attention.layer_norm_rms_epsilon +f32 +9.99999975e-06$' "${lines[@]}"
    has_line '^  tokenizer.ggml.add_bos_token +bool +true$' "${lines[@]}"
    has_line '^  tokenizer.ggml.tokens +\[string\] 384 elements: "<unk>", "<s>", "</s>", "<0x00>", "<0x01>", "<0x02>", "<0x03>", "<0x04>", \.\.\.$' "${lines[@]}"
    has_line '^  tokenizer.ggml.token_type +\[i32\] +384 elements: 2, 3, 3, 6, 6, 6, 6, 6, \.\.\.$' "${lines[@]}"
    # 29 keys, each on one line of the metadata part.
    [[ $(sed -n '/^metadata/,/^tensors/p' <<<"$output" | grep -c '^  ') == 29 ]]
}

@test "text: the tensor table (name, type, shape as stored, data offset, bytes)" {
    run -0 --separate-stderr mlb-info "$L2"
    has_line '^tensors ' "${lines[@]}"
    has_line '^  output.weight +Q6_K +\[256, 384\] +10400 +80640$' "${lines[@]}"
    has_line '^  output_norm.weight +F32 +\[256\] +91040 +1024$' "${lines[@]}"
    [[ $(sed -n '/^tensors/,/^conversion/p' <<<"$output" | grep -c '^  [a-z]') == 22 ]] # header + 21
}

@test "text: what gguf2mlb would make of it, the same plan as gguf2mlb --dry-run" {
    run -0 --separate-stderr mlb-info "$L2"
    has_line '^  convertible +yes$' "${lines[@]}"
    has_line '^  architecture +llama: ' "${lines[@]}"
    # Q4_0 matrices and a Q6_K classifier: each keeps its type (wtype 3).
    has_line '^  weights +per-matrix types \(type table\), f16 scales, fit rule$' "${lines[@]}"
    has_line '^  types +Q4_0 15, F32 5, Q6_K 1$' "${lines[@]}"
    has_line '^  tokenizer +"llama" \(pre "default"\), 384 tokens, 55 merges, 0 chat templates$' "${lines[@]}"
    local size
    size=$(gguf2mlb -n "$L2" | sed -n '/^output$/{n;p}' | awk '{print $2}')
    has_line "^  output size +$size bytes " "${lines[@]}"
    # The plan lines are gguf2mlb --dry-run's, byte for byte.
    diff <(sed -n '/^plan /,/ arrays, /p' <<<"$output") \
        <(gguf2mlb -n "$L2" | sed -n '/^plan /,/ arrays, /p')
}

@test "text: a long string shows its size and first line; --template prints it whole" {
    run -0 --separate-stderr mlb-info "$SMOL"
    has_line '^  tokenizer.chat_template +string +[0-9]+ bytes, [0-9]+ lines, first: "' "${lines[@]}"
    local tmpl
    tmpl=$(mlb-info --json "$SMOL" | jq -r '.metadata["tokenizer.chat_template"].value')
    [[ $output != *"$tmpl"* ]]
    run -0 --separate-stderr mlb-info --template "$SMOL"
    has_line '^  tokenizer.chat_template +string +[0-9]+ bytes, [0-9]+ lines:$' "${lines[@]}"
    [[ $output == *"$tmpl"* ]]
}

@test "text: --arrays prints every element" {
    run -0 --separate-stderr mlb-info --arrays "$L2"
    local line
    line=$(grep '^  tokenizer.ggml.token_type ' <<<"$output")
    [[ $line != *'...'* ]]
    [[ $(tr -cd ',' <<<"${line#*elements: }" | wc -c) == 383 ]]
}

@test "text: a vocabulary-only GGUF: no model, the tokenizer it converts to, exit 0" {
    run -0 --separate-stderr mlb-info "$SMOL"
    [[ -z $stderr ]]
    has_line '^  convertible +no: no tensors, so no model \(gguf2mlb --tokenizer-only converts a vocabulary-only GGUF\)$' "${lines[@]}"
    has_line '^  tokenizer +"gpt2" \(pre "smollm"\), 49152 tokens, 48900 merges, 1 chat template$' "${lines[@]}"
}

# ---------------------------------------------------------------- JSON

@test "--json: one object on one line with the summary, metadata, tensors and conversion" {
    run -0 --separate-stderr mlb-info --json "$L2"
    [[ ${#lines[@]} == 1 ]]
    jq -e --arg f "$L2" --argjson size "$(file_size "$L2")" '
        .file == $f and .format == "gguf" and .version == 3 and .size == $size and
        .alignment == 32 and .data_offset == 10400 and .kv_count == 29 and .tensor_count == 21 and
        (.metadata | length) == 29 and
        .metadata["general.architecture"] == {type: "string", offset: 24, value: "llama"} and
        .metadata["llama.block_count"].value == 2 and
        .metadata["tokenizer.ggml.add_bos_token"].value == true and
        (.metadata["tokenizer.ggml.tokens"] | .type == "array" and .elem_type == "string" and
            .count == 384 and (.values | length) == 384 and .values[1] == "<s>" and
            has("truncated") == false) and
        .tensors[0] == {name: "output.weight", type: "Q6_K", shape: [256, 384], offset: 0,
                        file_offset: 10400, info_offset: 9180, bytes: 80640, part: 0} and
        .parts == [{file: $f, version: 3, size: $size, alignment: 32, data_offset: 10400,
                    first_tensor: 0, tensor_count: 21}] and
        (.conversion | .convertible and .model and .architecture == "llama" and
            .wtype == "table" and .scale_f16 and .q4_rule == "fit" and (.arrays | length) == 21 and
            .arrays[0].source == "token_embd.weight" and .arrays[0].name == "tok_emb" and
            .tokenizer.convertible and .tokenizer.tokens == 384)' <<<"$output"
    # The output size is gguf2mlb's.
    [[ $(jq .conversion.size <<<"$output") == $(gguf2mlb -n "$L2" | sed -n '/^output$/{n;p}' | awk '{print $2}') ]]
}

@test "--json: arrays above 1024 elements are cut to 16 and marked, whole with --arrays" {
    run -0 --separate-stderr mlb-info --json "$SMOL"
    jq -e '.metadata["tokenizer.ggml.tokens"] | .count == 49152 and (.values | length) == 16
           and .truncated == true' <<<"$output"
    jq -e '.metadata["tokenizer.chat_template"].value | length > 72' <<<"$output"
    jq -e '.conversion | .convertible == false and .model == false and .tokenizer.tokens == 49152' \
        <<<"$output"
    run -0 --separate-stderr mlb-info --json --arrays "$SMOL"
    jq -e '.metadata["tokenizer.ggml.tokens"] | (.values | length) == 49152 and has("truncated") == false' \
        <<<"$output"
}

@test "--json: every value type exactly, nested arrays as objects (writer.gguf)" {
    run -1 --separate-stderr mlb-info --json "$FIX/gguf/writer.gguf"
    jq -e '.metadata as $m |
        $m["t.u32"].value == 4000000000 and $m["t.i8"].value == -100 and
        $m["t.f32"].value == 0.15625 and $m["t.f64"].value == -2.5e-300 and
        $m["t.str"].value == "héllo, wörld" and $m["t.arr.bool"].values == [true, false, true] and
        $m["t.arr.nested"].values[0] == {type: "array", elem_type: "i32", count: 3, values: [1, 2, 3]}' \
        <<<"$output"
    # u64 and i64 are written as exact integers (jq would round them).
    [[ $output == *'"t.u64":{"type":"u64","offset":262,"value":18000000000000000000}'* ]]
    [[ $output == *'"values":[0,1,18446744073709551615]'* ]]
}

# ---------------------------------------------------------------- inputs

@test "the format is told by the magic: standard input, a FIFO, and .mlb files beside GGUFs" {
    local want
    want=$(mlb-info "$L2" | tail -n +2)
    run -0 --separate-stderr mlb-info - <"$L2"
    [[ ${lines[0]} == "(stdin)" && $(tail -n +2 <<<"$output") == "$want" ]]
    run -0 --separate-stderr bash -c 'cat "$1" | mlb-info --json -' _ "$L2"
    [[ $(jq -r .file <<<"$output") == "(stdin)" && $(jq .tensor_count <<<"$output") == 21 ]]
    mkfifo "$BATS_TEST_TMPDIR/fifo"
    cat "$L2" >"$BATS_TEST_TMPDIR/fifo" &
    run -0 --separate-stderr mlb-info "$BATS_TEST_TMPDIR/fifo"
    [[ $(tail -n +2 <<<"$output") == "$want" ]]
    # An .mlb keeps its report; JSON of both is a stream of two objects.
    run -0 --separate-stderr mlb-info --json "$TINY" "$L2"
    [[ ${#lines[@]} == 2 ]]
    [[ $(jq -r '.format // "mlb"' <<<"$output" | paste -sd,) == "mlb,gguf" ]]
    run -0 --separate-stderr mlb-info - <"$TINY"
    [[ ${lines[1]} == "  format                 .mlb version 1" ]]
}

# ---------------------------------------------------------------- errors

@test "a truncated GGUF exits 1 naming the field and its offset, and prints nothing" {
    local f="$BATS_TEST_TMPDIR/t.gguf"
    head -c 9000 "$L2" >"$f"
    run -1 --separate-stderr mlb-info "$f"
    [[ -z $output ]]
    [[ $stderr == "mlb-info: $f: ML_E_FORMAT: kv[24] (offset 8980): key length 28 exceeds the 12 bytes left in the file" ]]
    head -c 100000 "$L2" >"$f"
    run -1 --separate-stderr mlb-info --json "$f"
    [[ -z $output ]]
    [[ $stderr == "mlb-info: $f: ML_E_FORMAT: "*" (offset "*"): "*"100000"* ]]
    # The same from a pipe.
    run -1 --separate-stderr mlb-info - <"$f"
    [[ $stderr == "mlb-info: (stdin): ML_E_FORMAT: "* ]]
}

@test "a bad magic is not a GGUF: the .mlb loader says what it is not (exit 1)" {
    local f
    f=$(mutant "$L2")
    patch_hex "$f" 0 67677566 # "gguf"
    run -1 --separate-stderr mlb-info "$f"
    [[ -z $output ]]
    [[ $stderr == "mlb-info: $f: ML_E_FORMAT: magic (offset 0): \"gguf\" is not \"MLB1\": not an .mlb model" ]]
}

@test "a GGUF version this reader does not know, or a removed tensor type, exits 4" {
    local f
    f=$(mutant "$L2")
    patch_hex "$f" 4 04000000
    run -4 --separate-stderr mlb-info "$f"
    [[ -z $output && $stderr == "mlb-info: $f: ML_E_UNSUPPORTED: version (offset 4): "* ]]
    # output_norm.weight's type (info at 9233: 8 + 18 name bytes, n_dims, one dim) -> 4, removed.
    f=$(mutant "$L2" t.gguf)
    patch_hex "$f" 9271 04000000
    run -4 --separate-stderr mlb-info "$f"
    [[ -z $output && $stderr == "mlb-info: $f: ML_E_UNSUPPORTED: output_norm.weight (offset "* ]]
}

@test "an unsupported architecture or tensor type: the report, then exit 4 as gguf2mlb" {
    local f
    f=$(mutant "$L2")
    patch_hex "$f" 64 6c78616d61 # general.architecture's value "llama" -> "lxama"
    run -4 --separate-stderr mlb-info "$f"
    has_line '^  convertible +no: ML_E_UNSUPPORTED: general.architecture \(offset 64\): '"'lxama'"' is not supported' "${lines[@]}"
    [[ $stderr == "mlb-info: $f: ML_E_UNSUPPORTED: general.architecture (offset 64): 'lxama' is not supported"* ]]
    run -4 gguf2mlb -n "$f"
    run -4 --separate-stderr mlb-info --json "$f"
    jq -e '.conversion | .convertible == false and .status == "ML_E_UNSUPPORTED" and
           .exit_status == 4 and .field == "general.architecture" and .offset == 64' <<<"$output"
    # output_norm.weight as I32: the reader lists it, the converter cannot.
    f=$(mutant "$L2" i32.gguf)
    patch_hex "$f" 9271 1a000000
    run -4 --separate-stderr mlb-info "$f"
    has_line '^  output_norm.weight +I32 +\[256\] ' "${lines[@]}"
    [[ $stderr == "mlb-info: $f: ML_E_UNSUPPORTED: output_norm.weight (offset 9233): tensor type I32 cannot be converted"* ]]
    run -4 gguf2mlb -n "$f"
}

@test "a GGUF missing a required key: the report, then exit 1 as gguf2mlb" {
    run -1 --separate-stderr mlb-info "$FIX/gguf/writer.gguf"
    has_line '^  convertible +no: ML_E_FORMAT: llama.block_count: required key is missing$' "${lines[@]}"
    [[ $stderr == "mlb-info: $FIX/gguf/writer.gguf: ML_E_FORMAT: llama.block_count: required key is missing" ]]
    run -1 gguf2mlb -n "$FIX/gguf/writer.gguf"
}

# ---------------------------------------------------------------- gguf_dump

@test "mlb-info --json --arrays agrees with gguf_dump on every fixture GGUF (see the top)" {
    local f name path n=0 d="$BATS_TEST_TMPDIR"
    for f in "$FIX"/gguf/*.gguf "$FIX"/models/*/*.gguf "$FIX"/vocab/*.gguf.gz; do
        case $f in
        */fixtures/gguf/*) name=gguf-$(basename "$f" .gguf) path=$f ;;
        */fixtures/models/*) name=models-$(basename "$f" .gguf) path=$f ;;
        *) name=vocab-$(basename "$f" .gguf.gz) path=$d/v.gguf && gzip -dc "$f" >"$path" ;;
        esac
        # The status is the conversion's (writer.gguf: 1); the JSON is whole anyway.
        mlb-info --json --arrays "$path" 2>/dev/null | "$NORMALIZE" >"$d/got.txt"
        diff "$FIX/gguf/dump/$name.txt" "$d/got.txt" || fail_with "$name differs from gguf_dump"
        n=$((n + 1))
    done
    # Every expectation was compared: none is left over, none missing.
    [[ $n == $(find "$FIX/gguf/dump" -maxdepth 1 -name '*.txt' | wc -l) ]]
}
