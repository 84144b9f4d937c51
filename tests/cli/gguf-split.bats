#!/usr/bin/env bats
# gguf-split.bats - models split by llama.cpp's gguf-split
# (NAME-00001-of-00003.gguf ...), read whole by gguf2mlb, ml-quant and
# mlb-info from their first part or from every part named: the same bytes
# out as from the unsplit file, mlb-info's report of the parts, and every
# broken, missing, repeated or foreign part refused with its exact message
# and exit status (the same from the three commands).
#
# Fixtures (tests/fixtures/split, made by tools/make-split-fixtures.py):
# smollm2-q4_0-0000{1,2,3}-of-00003.gguf is
# tests/fixtures/models/smollm2/smollm2-q4_0.gguf split by llama-gguf-split
# (8 + 8 + 4 tensors); align-0000{1,2,3}-of-00003.gguf is
# tests/fixtures/gguf/writer_align.gguf split with the metadata alone in
# part 1 (tensors x and y in parts 2 and 3); bad/*.gguf are parts that
# stand in for one align part.  Each test works in its own directory, on
# copies named m-* (smollm2) and a-* (align), so the messages hold short
# names.

bats_require_minimum_version 1.5.0

load helpers

FIX="$BATS_TEST_DIRNAME/../fixtures"
SPLIT="$FIX/split"
WHOLE="$FIX/models/smollm2/smollm2-q4_0.gguf"
A1=a-00001-of-00003.gguf
A2=a-00002-of-00003.gguf
A3=a-00003-of-00003.gguf
M1=m-00001-of-00003.gguf

setup() {
    cd "$BATS_TEST_TMPDIR" || return 1
    local i
    for i in 1 2 3; do
        cp "$SPLIT/align-0000$i-of-00003.gguf" "a-0000$i-of-00003.gguf"
        cp "$SPLIT/smollm2-q4_0-0000$i-of-00003.gguf" "m-0000$i-of-00003.gguf"
    done
    cp "$WHOLE" whole.gguf
}

# ---------------------------------------------------------------- the same bytes

@test "gguf2mlb from part 1: the .mlb and .mlt of the unsplit file, named by the parts' prefix" {
    run -0 --separate-stderr gguf2mlb -q whole.gguf
    run -0 --separate-stderr gguf2mlb -q "$M1"
    [[ -z $output && -z $stderr ]]
    cmp m.mlb whole.mlb
    cmp m.mlt whole.mlt
    [[ ! -e m-00001-of-00003.mlb ]]
}

@test "gguf2mlb with every part named, and requantized (--wtype q8_0): the same bytes" {
    gguf2mlb -q whole.gguf
    gguf2mlb -q -o listed.mlb "$M1" m-00002-of-00003.gguf m-00003-of-00003.gguf
    cmp listed.mlb whole.mlb
    cmp listed.mlt whole.mlt
    gguf2mlb -q --wtype q8_0 -o w8.mlb whole.gguf
    gguf2mlb -q --wtype q8_0 -o s8.mlb "$M1"
    cmp s8.mlb w8.mlb
}

@test "ml-quant from part 1 or from every part: the bytes of ml-quant from the unsplit file" {
    ml-quant -q -o w.mlb whole.gguf
    ml-quant -q -o s.mlb "$M1"
    cmp s.mlb w.mlb
    ml-quant -q --wtype q8_0 -o w8.mlb whole.gguf
    ml-quant -q --wtype q8_0 -o s8.mlb "$M1" m-00002-of-00003.gguf m-00003-of-00003.gguf
    cmp s8.mlb w8.mlb
}

@test "gguf2mlb --dry-run: the whole model's counts and the size of all its parts" {
    run -0 gguf2mlb -n -o x.mlb "$M1"
    [[ ${lines[1]} == "  GGUF                   version 3, 20 tensors, 29 keys, alignment 32, 78496 bytes in 3 parts" ]]
    # The plan and the output size are the unsplit file's.
    diff <(gguf2mlb -n -o x.mlb whole.gguf | sed -n '/^architecture$/,$p') \
        <(sed -n '/^architecture$/,$p' <<<"$output")
}

# ---------------------------------------------------------------- mlb-info

@test "mlb-info on part 1: the whole model, split into 3 parts, each part on its line" {
    run -0 --separate-stderr mlb-info -t "$M1"
    [[ -z $stderr ]]
    [[ ${lines[0]} == "$M1" ]]
    [[ ${lines[1]} == "  format                 GGUF version 3" ]]
    [[ ${lines[2]} == "  split                  3 parts (gguf-split), 78496 bytes (76.66 KiB) in all, read as one model" ]]
    [[ ${lines[3]} == "  part 1                 $M1: 46848 bytes, 8 tensors, data offset 8704" ]]
    [[ ${lines[4]} == "  part 2                 m-00002-of-00003.gguf: 17216 bytes, 8 tensors, data offset 576" ]]
    [[ ${lines[5]} == "  part 3                 m-00003-of-00003.gguf: 14432 bytes, 4 tensors, data offset 352" ]]
    [[ ${lines[6]} == "  alignment              32" ]]
    [[ ${lines[9]} == "  tensors                20, 68864 bytes (67.25 KiB)" ]]
    has_line '^tensors \(data offset from the start of the part; ' "${lines[@]}"
    has_line '^  output_norm.weight +F32 +\[64\] +8704 +256 +1$' "${lines[@]}"
    has_line '^  blk.1.ffn_up.weight +Q4_0 +\[64, 128\] +9824 +4608 +3$' "${lines[@]}"
    # The conversion report is the unsplit file's.
    diff <(mlb-info whole.gguf | sed -n '/^conversion/,$p') <(sed -n '/^conversion/,$p' <<<"$output")
}

@test "mlb-info m-*.gguf: the model once; the parts named after part 1 are not described again" {
    run -0 --separate-stderr mlb-info m-*.gguf
    [[ -z $stderr ]]
    [[ $(grep -c '^m-' <<<"$output") == 1 ]]
    # A part named before its part 1 is refused: it is not the first.
    run -1 --separate-stderr mlb-info m-00002-of-00003.gguf "$M1"
    [[ ${stderr_lines[0]} == "mlb-info: m-00002-of-00003.gguf: ML_E_FORMAT: split.no (offset 44): 1: this is part 2 of 3 of a split model; give part 1 ($M1)" ]]
    [[ $(grep -c '^m-' <<<"$output") == 1 ]]
}

@test "mlb-info --json: one object, its parts, each tensor's part; the unsplit file's tensors" {
    run -0 --separate-stderr mlb-info --json "$M1"
    [[ ${#lines[@]} == 1 ]]
    jq -e --arg m "$M1" '.file == $m and .tensor_count == 20 and (.tensors | length) == 20 and
        (.parts | length) == 3 and .parts[0] == {file: $m, version: 3, size: 46848, alignment: 32,
            data_offset: 8704, first_tensor: 0, tensor_count: 8} and
        .parts[2].file == "m-00003-of-00003.gguf" and .parts[2].first_tensor == 16 and
        ([.tensors[].part] == [0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,2,2,2,2]) and
        .conversion.convertible' <<<"$output"
    diff <(mlb-info --json whole.gguf | jq -c '.tensors[] | [.name, .type, .shape, .bytes]') \
        <(jq -c '.tensors[] | [.name, .type, .shape, .bytes]' <<<"$output")
}

@test "mlb-info: the metadata alone in part 1; parts 2 and 3 keep their own alignment" {
    run -1 --separate-stderr mlb-info -t "$A1"
    [[ ${lines[2]} == "  split                  3 parts (gguf-split), 576 bytes in all, read as one model" ]]
    [[ ${lines[3]} == "  part 1                 $A1: 192 bytes, 0 tensors, data offset 184" ]]
    [[ ${lines[4]} == "  part 2                 $A2: 192 bytes, 1 tensor, data offset 160" ]]
    [[ ${lines[6]} == "  alignment              64" ]]
    has_line '^  x +F32 +\[5\] +160 +20 +2$' "${lines[@]}"
    has_line '^  y +F32 +\[3\] +160 +12 +3$' "${lines[@]}"
    # Not a model (no llama.* keys): the status is gguf2mlb's.
    [[ $stderr == "mlb-info: $A1: ML_E_FORMAT: llama.block_count: required key is missing" ]]
}

@test "split.count 0 (a file merged by gguf-split): an ordinary file" {
    run -1 mlb-info "$SPLIT/merged.gguf"
    [[ ${lines[1]} == "  format                 GGUF version 3" ]]
    [[ ${lines[2]} == "  file size              288 bytes" ]]
}

# ---------------------------------------------------------------- refusals

# refuse STATUS MESSAGE ARGS...: gguf2mlb, mlb-info and ml-quant on ARGS
# (mlb-info on the first alone) exit STATUS with "PROG: MESSAGE" on
# stderr and nothing else; no output file is left.
refuse() {
    local status=$1 msg=$2
    shift 2
    run "-$status" --separate-stderr gguf2mlb -q -o out.mlb "$@"
    [[ $stderr == "gguf2mlb: $msg" ]] || fail_with "gguf2mlb: $stderr"
    run "-$status" --separate-stderr ml-quant -q -o out.mlb "$@"
    [[ $stderr == "ml-quant: $msg" ]] || fail_with "ml-quant: $stderr"
    [[ ! -e out.mlb && ! -e out.mlt ]]
    if (($# == 1)); then
        run "-$status" --separate-stderr mlb-info "$@"
        [[ $stderr == "mlb-info: $msg" && -z $output ]] || fail_with "mlb-info: $stderr"
    fi
}

@test "a missing part: exit 3, the part named" {
    rm "$A2"
    refuse 3 "$A1: ML_E_IO: part 2 of 3 ($A2): cannot open: No such file or directory" "$A1"
}

@test "a part of another split (split.count differs): exit 1" {
    cp "$SPLIT/bad/count4.gguf" "$A2"
    refuse 1 "$A1: ML_E_FORMAT: part 2 of 3 ($A2): split.count (offset 69): 4, but part 1 ($A1) says 3: a part of another split?" "$A1"
}

@test "a part given twice (the same split.no in two files, or one file named twice): exit 1" {
    cp "$A2" "$A3"
    refuse 1 "$A1: ML_E_FORMAT: part 3 of 3 ($A3): split.no (offset 44): 1, the number of part 2 ($A2): the same part given twice?" "$A1"
    cp "$SPLIT/align-00003-of-00003.gguf" "$A3"
    refuse 1 "$A1: ML_E_FORMAT: part 3 of 3 ($A2): split.no (offset 44): 1, the number of part 2 ($A2): the same part given twice?" "$A1" "$A2" "$A2"
}

@test "a part of another model (split.tensors.count differs): exit 1" {
    cp "$SPLIT/bad/other-model.gguf" "$A2"
    refuse 1 "$A1: ML_E_FORMAT: part 2 of 3 ($A2): split.tensors.count (offset 102): 5, but part 1 ($A1) says 2: a part of another model?" "$A1"
}

@test "fewer tensors in the parts than split.tensors.count: exit 1" {
    cp "$SPLIT/bad/empty.gguf" "$A3"
    refuse 1 "$A1: ML_E_FORMAT: split.tensors.count (offset 155): 2, but the 3 parts hold 1 tensor" "$A1"
}

@test "a tensor in two parts: exit 1, both parts and offsets named" {
    cp "$SPLIT/bad/twice.gguf" "$A3"
    refuse 1 "$A1: ML_E_FORMAT: part 3 of 3 ($A3): x (offset 106): tensor also in part 2 ($A2) at offset 106" "$A1"
}

@test "a part other than the first given first: exit 1, with the name of part 1" {
    refuse 1 "$A2: ML_E_FORMAT: split.no (offset 44): 1: this is part 2 of 3 of a split model; give part 1 ($A1)" "$A2"
    refuse 1 "$A2: ML_E_FORMAT: split.no (offset 44): 1: this is part 2 of 3 of a split model; give part 1 ($A1)" "$A2" "$A1" "$A3"
}

@test "parts named out of order: exit 1" {
    refuse 1 "$A1: ML_E_FORMAT: part 2 of 3 ($A3): split.no (offset 44): 2 where part 2 (split.no 1) belongs: parts out of order?" "$A1" "$A3" "$A2"
}

@test "a part without split.no, or without any split key: exit 1" {
    cp "$SPLIT/bad/no-number.gguf" "$A2"
    refuse 1 "$A1: ML_E_FORMAT: part 2 of 3 ($A2): split.no: required key is missing" "$A1"
    cp "$FIX/gguf/writer_align.gguf" "$A2"
    refuse 1 "$A1: ML_E_FORMAT: part 2 of 3 ($A2): split.count: missing: this file is not a part of a split model" "$A1"
}

@test "metadata in a later part is not read (as in llama.cpp): the model is part 1's" {
    cp "$SPLIT/bad/meta.gguf" "$A2"
    run -1 --separate-stderr mlb-info --json "$A1"
    jq -e '.metadata["general.architecture"].value == "llama" and
        (.metadata | has("meta.only_here") | not) and .tensor_count == 2' <<<"$output"
}

@test "part 1 renamed: exit 1 (the other parts cannot be found); naming every part reads it" {
    mv "$A1" model.gguf
    refuse 1 "model.gguf: ML_E_FORMAT: split.count (offset 182): part 1 of 3 of a split model, but the name does not end in -00001-of-00003.gguf, so the other parts cannot be found (name every part, in order)" model.gguf
    run -1 --separate-stderr gguf2mlb -q -o out.mlb model.gguf "$A2" "$A3"
    [[ $stderr == "gguf2mlb: model.gguf: ML_E_FORMAT: llama.block_count: required key is missing" ]]
    mv "$M1" model.gguf
    gguf2mlb -q -o listed.mlb model.gguf m-00002-of-00003.gguf m-00003-of-00003.gguf
    gguf2mlb -q whole.gguf
    cmp listed.mlb whole.mlb
}

@test "fewer parts named than split.count: exit 2" {
    refuse 2 "$A1: ML_E_INVAL: split.count (offset 182): 3 parts, but 2 files given" "$A1" "$A2"
}

@test "several files that are not parts of one split model: exit 2" {
    run -2 --separate-stderr gguf2mlb -q -o out.mlb whole.gguf whole.gguf
    [[ $stderr == "gguf2mlb: whole.gguf: ML_E_INVAL: split.count: 2 files given, but whole.gguf is not a part of a split model (no split.count)" ]]
    gguf2mlb -q whole.gguf
    run -2 --separate-stderr ml-quant -q -o out.mlb whole.mlb whole.mlb
    [[ $stderr == "ml-quant: whole.mlb: ML_E_INVAL: one input at a time ('whole.mlb' is extra): only the parts of a split GGUF are named together" ]]
    [[ ! -e out.mlb ]]
}

@test "part 1 from standard input: exit 4, its other parts cannot be found" {
    local msg="(stdin): ML_E_UNSUPPORTED: split.count (offset 182): part 1 of 3 of a split model, not read from a file: the other parts cannot be found (give the file's name)"
    run -4 --separate-stderr gguf2mlb -q -o out.mlb - <"$A1"
    [[ $stderr == "gguf2mlb: $msg" ]]
    run -4 --separate-stderr mlb-info - <"$A1"
    [[ $stderr == "mlb-info: $msg" ]]
    run -4 --separate-stderr ml-quant -q -o out.mlb - <"$A1"
    [[ $stderr == "ml-quant: $msg" ]]
}

@test "split.no beyond split.count, split.count beyond 65535, a one-part model's wrong tensor count: exit 1" {
    cp "$SPLIT/bad/no-beyond.gguf" b-00001-of-00003.gguf
    refuse 1 "b-00001-of-00003.gguf: ML_E_FORMAT: split.no (offset 89): 3 is not below split.count 3" b-00001-of-00003.gguf
    cp "$SPLIT/bad/huge-count.gguf" h.gguf
    refuse 1 "h.gguf: ML_E_FORMAT: split.count (offset 114): 65536 parts: gguf-split writes at most 65535" h.gguf
    cp "$SPLIT/bad/single-00001-of-00001.gguf" s-00001-of-00001.gguf
    refuse 1 "s-00001-of-00001.gguf: ML_E_FORMAT: split.tensors.count (offset 147): 3, but the file holds 2 tensors" s-00001-of-00001.gguf
}

@test "an output that is a later part of the input is refused (exit 2); the part is left as it was" {
    run -2 --separate-stderr gguf2mlb -q -f -o m-00002-of-00003.gguf "$M1"
    [[ $stderr == "gguf2mlb: m-00002-of-00003.gguf: is the input file; choose another output" ]]
    run -2 --separate-stderr gguf2mlb -q -f -t m-00003-of-00003.gguf -o m.mlb "$M1"
    [[ $stderr == "gguf2mlb: m-00003-of-00003.gguf: is the input file; choose another output" ]]
    run -2 --separate-stderr ml-quant -q -f -o m-00003-of-00003.gguf "$M1"
    [[ $stderr == "ml-quant: m-00003-of-00003.gguf: is the input file; choose another output" ]]
    cmp m-00002-of-00003.gguf "$SPLIT/smollm2-q4_0-00002-of-00003.gguf"
    cmp m-00003-of-00003.gguf "$SPLIT/smollm2-q4_0-00003-of-00003.gguf"
    [[ ! -e m.mlb ]]
}
