#!/usr/bin/env bats
# gguf2mlb.bats - the converter command: help and usage errors, default
# output names, refusing to overwrite or to clobber the input, -o - in a
# pipe, determinism across runs and thread counts, --dry-run, options
# reaching the header, the importance matrix, failures and signals never
# leaving a partial model or a temporary file, and llama.cpp's own GGUFs of
# every architecture (tests/fixtures/models) converting to models that pass
# mlb-verify.  Inputs are written by bash (gguf2mlb.bash), no Python.

bats_require_minimum_version 1.5.0

load helpers
load gguf2mlb

MODELS=${MLCORE_MODELS:-$BATS_TEST_DIRNAME/../fixtures/models}

setup_file() {
    mk_gguf "$BATS_FILE_TMPDIR/q8.gguf" q8_0 64 2 128 256
    mk_gguf "$BATS_FILE_TMPDIR/f16.gguf" f16 64 2 128 256
    mk_gguf "$BATS_FILE_TMPDIR/phi3.gguf" q8_0 64 2 128 256 phi3
    mk_mli "$BATS_FILE_TMPDIR/good.mli" 2 64 128
    mk_mli "$BATS_FILE_TMPDIR/other.mli" 3 64 128
    mk_gguf "$BATS_FILE_TMPDIR/big.gguf" f16 512 4 1536 16384 # 40 MB, for the signals
}

Q8="$BATS_FILE_TMPDIR/q8.gguf"
F16="$BATS_FILE_TMPDIR/f16.gguf"

# in_dir: a private copy of the Q8_0 input in this test's directory; prints its path.
in_dir() {
    cp "$Q8" "$BATS_TEST_TMPDIR/m.gguf" && echo "$BATS_TEST_TMPDIR/m.gguf"
}

# ---------------------------------------------------------------- usage

@test "--help: usage, every option and the defaults on stdout, exit 0" {
    run -0 --separate-stderr gguf2mlb --help
    [[ -z $stderr ]]
    [[ ${lines[0]} == "Usage: gguf2mlb [options] IN.gguf [PART.gguf...]" ]]
    local o
    for o in --output --tokenizer --no-tokenizer --wtype --q8-mask --scale-f16 --scale-f32 \
        --q4-rule --imatrix --threads --dry-run --force --quiet --help --version; do
        [[ $output == *"$o"* ]] || fail_with "--help lacks $o"
    done
    [[ $output == *"m.gguf -> m.mlb"* && $output == *"f16 scales"* ]]
    [[ $output == *"Q4_0 when"*"most weights are stored in 5 bits or fewer"* ]]
    run -0 gguf2mlb -V
    [[ $output == "gguf2mlb (mlcore) "* ]]
}

@test "usage errors: one line and a hint on stderr, exit 2" {
    local args
    while IFS='|' read -r args msg; do
        # shellcheck disable=SC2086 # split the arguments on purpose
        run -2 --separate-stderr gguf2mlb $args
        [[ -z $output ]] || fail_with "$args: stdout: $output"
        [[ ${stderr_lines[0]} == "gguf2mlb: $msg" ]] || fail_with "$args: ${stderr_lines[0]}"
        [[ ${stderr_lines[1]} == "Try 'gguf2mlb --help' for more information." ]]
    done <<EOF
|no input file given
--wtype q5_0 $Q8|--wtype: 'q5_0' is not q8_0, q4_0 or source
--q4-rule best $Q8|--q4-rule: 'best' is not fit or round
--threads 0 $Q8|--threads: 0 is outside 1..1024
--wtype q8_0 --q8-mask w2 $Q8|--q8-mask is for Q4_0 models; a Q8_0 model stores every matrix as Q8_0
--scale-f16 --scale-f32 $Q8|--scale-f16 and --scale-f32 contradict each other
--imatrix x.mli --q4-rule round $Q8|--imatrix needs the fit rule; --q4-rule round cannot use importances
-t a.mlt --no-tokenizer $Q8|--tokenizer and --no-tokenizer contradict each other
-|reading standard input: name the output with -o
-o x.mlb -t x.mlb $Q8|the model and the tokenizer cannot both be 'x.mlb'
EOF
    run -2 --separate-stderr gguf2mlb --q8-mask w7 "$Q8"
    [[ ${stderr_lines[0]} == "gguf2mlb: --q8-mask: "*"w7"* ]]
}

@test "unreadable inputs: missing (3), a directory (3), an .mlb (1, named), phi3 (4, the key)" {
    run -3 --separate-stderr gguf2mlb "$BATS_TEST_TMPDIR/none.gguf"
    [[ $stderr == "gguf2mlb: $BATS_TEST_TMPDIR/none.gguf: ML_E_IO: "*"No such file"* ]]
    run -3 --separate-stderr gguf2mlb -o x.mlb "$BATS_TEST_TMPDIR"
    [[ $stderr == *"ML_E_IO"* ]]
    "$MKMODEL" --preset tiny -o "$BATS_TEST_TMPDIR/t.mlb"
    run -1 --separate-stderr gguf2mlb -o "$BATS_TEST_TMPDIR/x.mlb" "$BATS_TEST_TMPDIR/t.mlb"
    [[ $stderr == "gguf2mlb: $BATS_TEST_TMPDIR/t.mlb: ML_E_FORMAT: "*".mlb"* ]]
    run -4 --separate-stderr gguf2mlb -o "$BATS_TEST_TMPDIR/x.mlb" "$BATS_FILE_TMPDIR/phi3.gguf"
    [[ $stderr == "gguf2mlb: $BATS_FILE_TMPDIR/phi3.gguf: ML_E_UNSUPPORTED: general.architecture (offset "*"): 'phi3' is not supported; gguf2mlb converts llama, "* ]]
    [[ ! -e $BATS_TEST_TMPDIR/x.mlb ]]
    no_temps "$BATS_TEST_TMPDIR"
}

# pooling_type (tools/make-pooling-fixture.py adds qwen3.pooling_type = 3
# to the Qwen 3 fixture): 1-3 kept in the header's pooling, 0 and 4 (rank,
# with a note) left unstated, another value refused naming the key.
@test "pooling_type: kept as the header's pooling; none and rank unstated; an unknown one exits 4" {
    local d=$BATS_TEST_TMPDIR src=$BATS_TEST_DIRNAME/../fixtures/embed/qwen3-q8_0-pool-last.gguf at
    gguf2mlb -q -o "$d/p.mlb" -t "$d/p.mlt" "$src"
    [[ $(mlb-info --json "$d/p.mlb" | jq .header.pooling) == 3 ]]
    gguf2mlb -q -o "$d/n.mlb" -t "$d/n.mlt" "$MODELS/qwen3/qwen3-q8_0.gguf"
    [[ $(mlb-info --json "$d/n.mlb" | jq .header.pooling) == 0 ]]
    # the value: 4 bytes after the key and its u32 type
    at=$(grep -obUa 'qwen3.pooling_type' "$src" | cut -d: -f1)
    at=$((at + 18 + 4))
    cp "$src" "$d/r.gguf"
    patch_hex "$d/r.gguf" "$at" 04000000
    run -0 gguf2mlb -n "$d/r.gguf"
    [[ $output == *"qwen3.pooling_type 4 (rank) is not kept"* ]]
    gguf2mlb -q -o "$d/r.mlb" -t "$d/r.mlt" "$d/r.gguf"
    [[ $(mlb-info --json "$d/r.mlb" | jq .header.pooling) == 0 ]]
    cp "$src" "$d/u.gguf"
    patch_hex "$d/u.gguf" "$at" 07000000
    run -4 --separate-stderr gguf2mlb -o "$d/u.mlb" -t "$d/u.mlt" "$d/u.gguf"
    [[ $stderr == "gguf2mlb: $d/u.gguf: ML_E_UNSUPPORTED: qwen3.pooling_type (offset $at): pooling type 7 "* ]]
    [[ ! -e $d/u.mlb ]]
}

# ---------------------------------------------------------------- outputs

@test "default output: m.gguf -> m.mlb beside it, valid, nothing on stdout, no temporaries" {
    local in
    in=$(in_dir)
    run -0 --separate-stderr gguf2mlb --no-tokenizer "$in"
    [[ -z $output && -z $stderr ]]
    run -0 mlb-verify "$BATS_TEST_TMPDIR/m.mlb"
    [[ $output == "$BATS_TEST_TMPDIR/m.mlb: OK, 21 tensors, "* ]]
    no_temps "$BATS_TEST_TMPDIR"
    # A Q8_0 GGUF becomes Q8_0 with f16 scales, copied (lossless).
    run -0 mlb-info --json "$BATS_TEST_TMPDIR/m.mlb"
    [[ $(jq -c '.header | [.wtype, .scale_f16, .q8_mask, .dim, .n_layers, .vocab]' <<<"$output") == "[1,1,0,64,2,256]" ]]
    # A name without .gguf gets .mlb appended.
    cp "$in" "$BATS_TEST_TMPDIR/model.bin"
    run -0 gguf2mlb -q --no-tokenizer "$BATS_TEST_TMPDIR/model.bin"
    [[ -f $BATS_TEST_TMPDIR/model.bin.mlb ]]
}

@test "an existing output is kept without -f (exit 2); -f replaces it; the input is never the output" {
    local in out="$BATS_TEST_TMPDIR/m.mlb"
    in=$(in_dir)
    echo keep >"$out"
    run -2 --separate-stderr gguf2mlb --no-tokenizer "$in"
    [[ $stderr == "gguf2mlb: $out: exists; use -f to overwrite it" ]]
    [[ $(cat "$out") == keep ]]
    run -0 gguf2mlb -f --no-tokenizer "$in"
    run -0 mlb-verify -q "$out"
    run -2 --separate-stderr gguf2mlb -f --no-tokenizer -o "$in" "$in"
    [[ $stderr == "gguf2mlb: $in: is the input file; choose another output" ]]
    cmp "$in" "$Q8"
    no_temps "$BATS_TEST_TMPDIR"
}

@test "-o - writes the model to stdout: the same bytes, and mlb-verify - accepts the pipe" {
    local f="$BATS_TEST_TMPDIR/f.mlb" s="$BATS_TEST_TMPDIR/s.mlb"
    gguf2mlb -q --no-tokenizer -o "$f" "$Q8"
    gguf2mlb -q -o - "$Q8" >"$s"
    cmp "$f" "$s"
    run -0 bash -c 'gguf2mlb -o - "$1" | mlb-verify -' _ "$Q8"
    [[ $output == "(stdin): OK, 21 tensors, "* ]]
    # Standard input too.
    run -0 bash -c 'gguf2mlb -o - - <"$1" | cmp - "$2"' _ "$Q8" "$f"
    # A failed write to stdout: exit 3.
    run -3 --separate-stderr bash -c 'gguf2mlb -o - "$1" >/dev/full' _ "$Q8"
    [[ $stderr == *"ML_E_IO"* ]]
}

@test "deterministic: the same bytes on every run and for 1, 2 and 7 threads (F16 -> Q4_0 fit)" {
    local t ref="$BATS_TEST_TMPDIR/ref.mlb"
    gguf2mlb -q --no-tokenizer --wtype q4_0 --threads 1 -o "$ref" "$F16"
    for t in 1 2 7; do
        gguf2mlb -q -f --no-tokenizer --wtype q4_0 --threads "$t" -o "$BATS_TEST_TMPDIR/t$t.mlb" "$F16"
        cmp "$ref" "$BATS_TEST_TMPDIR/t$t.mlb"
    done
    run -0 mlb-info --json "$ref"
    [[ $(jq -c '.header | [.wtype, .q8_mask, .scale_f16]' <<<"$output") == "[2,0,1]" ]]
}

@test "options reach the header: --wtype, --q8-mask, --scale-f32, --q4-rule" {
    local o="$BATS_TEST_TMPDIR/o.mlb"
    gguf2mlb -q --no-tokenizer --wtype q4_0 --q8-mask tok_emb,w2 --scale-f32 -o "$o" "$Q8"
    run -0 mlb-info --json "$o"
    [[ $(jq -c '.header | [.wtype, .q8_mask, .scale_f16]' <<<"$output") == "[2,65,0]" ]]
    [[ $(jq -r '.tensors[] | select(.name == "blk.0.w2") | .type' <<<"$output") == Q8_0 ]]
    [[ $(jq -r '.tensors[] | select(.name == "blk.0.w1") | .type' <<<"$output") == Q4_0 ]]
    # fit and round give different Q4_0 from the same floats
    gguf2mlb -q --no-tokenizer --wtype q4_0 --q4-rule fit -o "$BATS_TEST_TMPDIR/fit.mlb" "$F16"
    gguf2mlb -q --no-tokenizer --wtype q4_0 --q4-rule round -o "$BATS_TEST_TMPDIR/round.mlb" "$F16"
    ! cmp -s "$BATS_TEST_TMPDIR/fit.mlb" "$BATS_TEST_TMPDIR/round.mlb"
}

@test "--imatrix: a fitting .mli changes the Q4_0 fit; another model's is refused (exit 1, named)" {
    local a="$BATS_TEST_TMPDIR/a.mlb" b="$BATS_TEST_TMPDIR/b.mlb"
    gguf2mlb -q --no-tokenizer --wtype q4_0 -o "$a" "$F16"
    gguf2mlb -q --no-tokenizer --wtype q4_0 --imatrix "$BATS_FILE_TMPDIR/good.mli" -o "$b" "$F16"
    run -0 mlb-verify -q "$b"
    # every importance is 1, but the weighting becomes sqrt(s^2 + x^2) instead of x^2
    ! cmp -s "$a" "$b"
    run -1 --separate-stderr gguf2mlb --no-tokenizer --wtype q4_0 --imatrix "$BATS_FILE_TMPDIR/other.mli" -o "$BATS_TEST_TMPDIR/c.mlb" "$F16"
    [[ $stderr == "gguf2mlb: $BATS_FILE_TMPDIR/other.mli: ML_E_MISMATCH: n_layers (offset 8): the importance matrix has 3, the model 2" ]]
    head -c 100 "$BATS_FILE_TMPDIR/good.mli" >"$BATS_TEST_TMPDIR/cut.mli"
    run -1 --separate-stderr gguf2mlb --no-tokenizer --wtype q4_0 --imatrix "$BATS_TEST_TMPDIR/cut.mli" -o "$BATS_TEST_TMPDIR/c.mlb" "$F16"
    [[ $stderr == "gguf2mlb: $BATS_TEST_TMPDIR/cut.mli: ML_E_FORMAT: "* ]]
    [[ ! -e $BATS_TEST_TMPDIR/c.mlb ]]
}

@test "a progress line on stderr when it is a terminal, erased at the end; none with -q or without a terminal" {
    command -v script >/dev/null || fail_with "script(1) (util-linux) is needed"
    local out="$BATS_TEST_TMPDIR/p.mlb"
    run -0 script -qec "gguf2mlb --no-tokenizer --wtype q4_0 -o '$out' '$F16'" /dev/null
    [[ $output == $'\r'"gguf2mlb: $out: "*"% ("*" GB)"*$'\r\e[K' ]] || fail_with "$(od -c <<<"$output" | head)"
    run -0 script -qec "gguf2mlb -q -f --no-tokenizer --wtype q4_0 -o '$out' '$F16'" /dev/null
    [[ -z $output ]]
    run -0 --separate-stderr gguf2mlb -f --no-tokenizer --wtype q4_0 -o "$out" "$F16"
    [[ -z $stderr ]]
}

# ---------------------------------------------------------------- --dry-run

@test "--dry-run: metadata, architecture, header, plan and size on stdout; no file written" {
    local in
    in=$(in_dir)
    run -0 --separate-stderr gguf2mlb --dry-run "$in"
    [[ -z $stderr ]]
    has_line '^metadata$' "${lines[@]}"
    has_line '^  general\.architecture +string +"llama"$' "${lines[@]}"
    has_line '^  llama\.embedding_length +u32 +64$' "${lines[@]}"
    has_line '^architecture$' "${lines[@]}"
    has_line '^  llama +Llama 2/3' "${lines[@]}"
    has_line '^  dim +64 ' "${lines[@]}"
    has_line '^  wtype +1 ' "${lines[@]}"
    has_line '^  token_embd\.weight +tok_emb +Q8_0 +Q8_0 +\[256, 64\] +copy \[lossless\]$' "${lines[@]}"
    has_line '^  blk\.1\.attn_q\.weight +blk\.1\.wq +Q8_0 +Q8_0 +\[64, 64\] +copy \[lossless\]$' "${lines[@]}"
    has_line '^  21 arrays, 21 lossless$' "${lines[@]}"
    [[ ! -e $BATS_TEST_TMPDIR/m.mlb && ! -e $BATS_TEST_TMPDIR/m.mlt ]]
    no_temps "$BATS_TEST_TMPDIR"
    # The size it announces is the size written.
    local size
    size=$(awk '/^output$/ { getline; print $2 }' <<<"$output")
    gguf2mlb -q --no-tokenizer "$in"
    [[ $size == $(file_size "$BATS_TEST_TMPDIR/m.mlb") ]]
    # F16 to Q4_0: quantized, not lossless.
    run -0 gguf2mlb -n --wtype q4_0 "$F16"
    has_line '^  blk\.0\.ffn_up\.weight +blk\.0\.w3 +F16 +Q4_0 +\[128, 64\] +quantize F16 -> Q4_0 \(fit\)$' "${lines[@]}"
    has_line '^  21 arrays, 5 lossless$' "${lines[@]}"
}

# ---------------------------------------------------------------- failures

@test "a failed write (file size limit) leaves neither the model nor a temporary file (exit 3)" {
    local in
    in=$(in_dir)
    run -3 --separate-stderr bash -c 'trap "" XFSZ; ulimit -f 64; gguf2mlb --no-tokenizer "$1"' _ "$in"
    [[ $stderr == "gguf2mlb: "*"ML_E_IO: "*"File too large"* ]]
    [[ ! -e $BATS_TEST_TMPDIR/m.mlb ]]
    no_temps "$BATS_TEST_TMPDIR"
    # A missing directory: exit 3, said plainly.
    run -3 --separate-stderr gguf2mlb --no-tokenizer -o "$BATS_TEST_TMPDIR/no/such/dir/m.mlb" "$in"
    [[ $stderr == *"ML_E_IO: cannot create a temporary file beside the output: No such file or directory" ]]
}

@test "a truncated GGUF: exit 1, no output" {
    head -c 5000 "$Q8" >"$BATS_TEST_TMPDIR/cut.gguf"
    run -1 --separate-stderr gguf2mlb --no-tokenizer "$BATS_TEST_TMPDIR/cut.gguf"
    [[ $stderr == "gguf2mlb: $BATS_TEST_TMPDIR/cut.gguf: ML_E_FORMAT: "* ]]
    [[ ! -e $BATS_TEST_TMPDIR/cut.mlb ]]
    no_temps "$BATS_TEST_TMPDIR"
}

# interrupt SIGNAL: starts a conversion of a 40 MB F16 GGUF, freezes it as
# soon as its temporary file exists, delivers SIGNAL, lets it run; it must
# end by that signal with neither the model nor the temporary file left.
interrupt() {
    local sig=$1 big="$BATS_FILE_TMPDIR/big.gguf" out="$BATS_TEST_TMPDIR/big.mlb" pid status=0
    gguf2mlb --no-tokenizer --wtype q4_0 --threads 1 -o "$out" "$big" &
    pid=$!
    wait_for_file "$out.tmp.*" "$pid"
    kill "-$sig" "$pid"
    kill -CONT "$pid"
    wait "$pid" || status=$?
    [[ $status -eq $((128 + $(kill -l "$sig"))) ]] || fail_with "exit status $status"
    [[ ! -e $out ]]
    no_temps "$BATS_TEST_TMPDIR"
}

@test "SIGINT (Ctrl-C) removes the temporary file and ends by the signal" {
    interrupt INT
}

@test "SIGTERM too" {
    interrupt TERM
}

# ---------------------------------------------------------------- tokenizer

@test "the tokenizer: written beside the model by default, -t elsewhere, with -o -; none with --no-tokenizer" {
    local src="$MODELS/llama2/llama2-q8_0.gguf" in="$BATS_TEST_TMPDIR/l.gguf"
    [[ -f $src ]] || fail_with "no fixture $src"
    cp "$src" "$in"
    run -0 --separate-stderr gguf2mlb "$in"
    [[ -z $stderr ]]
    run -0 mlt-dump "$BATS_TEST_TMPDIR/l.mlt"
    run -0 mlb-verify -q "$BATS_TEST_TMPDIR/l.mlb"
    gguf2mlb -o - -t "$BATS_TEST_TMPDIR/t.mlt" "$in" | cmp - "$BATS_TEST_TMPDIR/l.mlb"
    cmp "$BATS_TEST_TMPDIR/t.mlt" "$BATS_TEST_TMPDIR/l.mlt"
    rm "$BATS_TEST_TMPDIR"/l.ml?
    run -0 gguf2mlb --no-tokenizer "$in"
    [[ -f $BATS_TEST_TMPDIR/l.mlb && ! -e $BATS_TEST_TMPDIR/l.mlt ]]
    # --dry-run describes it.
    run -0 gguf2mlb -n "$in"
    has_line '^  .*/l\.mlt +tokenizer: tokenizer\.ggml\.model "llama" \(pre "default"\), kind 1, 384 tokens' "${lines[@]}"
    no_temps "$BATS_TEST_TMPDIR"
}

@test "no vocabulary: -t fails naming the key (exit 1, nothing written); by default a warning, -q silences it" {
    local in
    in=$(in_dir)
    run -1 --separate-stderr gguf2mlb -t "$BATS_TEST_TMPDIR/x.mlt" "$in"
    [[ $stderr == "gguf2mlb: $in: ML_E_FORMAT: tokenizer.ggml.model: required key is missing" ]]
    [[ ! -e $BATS_TEST_TMPDIR/x.mlt && ! -e $BATS_TEST_TMPDIR/m.mlb ]]
    run -0 --separate-stderr gguf2mlb "$in"
    [[ $stderr == "gguf2mlb: $in: no tokenizer written: ML_E_FORMAT: tokenizer.ggml.model: required key is missing" ]]
    [[ -f $BATS_TEST_TMPDIR/m.mlb && ! -e $BATS_TEST_TMPDIR/m.mlt ]]
    run -0 --separate-stderr gguf2mlb -q -f "$in"
    [[ -z $stderr ]]
    no_temps "$BATS_TEST_TMPDIR"
}

# ---------------------------------------------------------------- llama.cpp's GGUFs

@test "every fixture GGUF made by llama.cpp converts and passes mlb-verify" {
    local g n=0 out
    for g in "$MODELS"/*/*.gguf; do
        [[ -f $g ]] || continue
        out="$BATS_TEST_TMPDIR/$(basename "$g" .gguf).mlb"
        run -0 --separate-stderr gguf2mlb -q --no-tokenizer -o "$out" "$g"
        run -0 mlb-verify -q "$out" || fail_with "$g"
        n=$((n + 1))
    done
    [[ $n -ge 20 ]] || fail_with "only $n fixture GGUFs under $MODELS"
}

@test "--tokenizer-only: the .mlt of a vocabulary-only GGUF, with its chat template and end-of-generation ids" {
    local d=$BATS_TEST_TMPDIR v="$BATS_TEST_DIRNAME/../fixtures/vocab"
    gzip -dc "$v/smollm2-135m.gguf.gz" >"$d/smol.gguf"
    run -0 --separate-stderr gguf2mlb --tokenizer-only "$d/smol.gguf"
    [[ -z $output && -z $stderr ]]
    [[ -f $d/smol.mlt && ! -e $d/smol.mlb ]]
    no_temps "$d"
    run -0 mlt-dump "$d/smol.mlt"
    has_line '^  end of generation      3               0 <\|endoftext\|>, 2 <\|im_end\|>, 4 <reponame>$' "${lines[@]}"
    has_line '^  chat templates         1               default \(368 bytes\)$' "${lines[@]}"
    # the template as the GGUF holds it, byte for byte
    run -0 mlt-dump --print-template default "$d/smol.mlt"
    local text=$output
    [[ $text == "{% for message in messages %}"* ]]
    grep -qaF -- "$(head -c 60 <<<"$text")" "$d/smol.gguf"
    run -0 mlt-dump --json --print-template default "$d/smol.mlt"
    [[ $(jq -r .text <<<"$output") == "$text" ]]
    [[ $(mlt-dump --print-template default "$d/smol.mlt" | wc -c) -eq 368 ]]
    # it encodes as the committed cases say (Hugging Face's ids)
    local tok name special roundtrip hex ids n=0
    while IFS=$'\t' read -r tok name special roundtrip hex ids; do
        [[ -n $hex ]] || continue
        printf '%b' "$(sed 's/../\\x&/g' <<<"$hex")" >"$d/case"
        run -0 bash -c 'mlt-dump --no-bos --encode - "$1" <"$2"' _ "$d/smol.mlt" "$d/case"
        [[ $output == "$ids" ]] || fail_with "$name: $output, expected $ids"
        n=$((n + 1))
    done < <(head -n 12 "$v/cases-smollm.tsv")
    ((n >= 8))
    # -t names it; it must not exist without -f
    run -0 gguf2mlb --tokenizer-only -t "$d/other.mlt" "$d/smol.gguf"
    cmp "$d/smol.mlt" "$d/other.mlt"
    run -2 --separate-stderr gguf2mlb --tokenizer-only -t "$d/other.mlt" "$d/smol.gguf"
    run -0 gguf2mlb -f --tokenizer-only -t "$d/other.mlt" "$d/smol.gguf"
    # -o names it too (the one output); usage errors
    run -0 gguf2mlb --tokenizer-only -o "$d/o.mlt" "$d/smol.gguf"
    cmp "$d/smol.mlt" "$d/o.mlt"
    run -2 --separate-stderr gguf2mlb --tokenizer-only -o "$d/x.mlt" -t "$d/y.mlt" "$d/smol.gguf"
    [[ ${stderr_lines[0]} == "gguf2mlb: --tokenizer-only writes one file: -o or -t, not both" ]]
    run -2 --separate-stderr gguf2mlb --tokenizer-only --dry-run "$d/smol.gguf"
    [[ ${stderr_lines[0]} == "gguf2mlb: --tokenizer-only goes with neither --no-tokenizer nor --dry-run" ]]
    run -2 --separate-stderr gguf2mlb --tokenizer-only - <"$d/smol.gguf"
    [[ ${stderr_lines[0]} == "gguf2mlb: reading standard input: name the tokenizer with -t" ]]
    run -0 --separate-stderr gguf2mlb --tokenizer-only -t "$d/stdin.mlt" - <"$d/smol.gguf"
    cmp "$d/smol.mlt" "$d/stdin.mlt"
    # a GGUF without a vocabulary: exit 1 naming the key
    run -1 --separate-stderr gguf2mlb --tokenizer-only -t "$d/none.mlt" "$F16"
    [[ ${stderr_lines[0]} == "gguf2mlb: $F16: ML_E_FORMAT: tokenizer.ggml."* ]]
    [[ ! -e $d/none.mlt ]]
}

@test "a default that requantizes to Q4_0 says so in one line, and which option keeps the quality" {
    local m="$BATS_TEST_DIRNAME/../fixtures/models/llama2"
    # Q4_1 and Q6_K matrices are kept by default (wtype 3): nothing is
    # requantized, no note.
    run -0 --separate-stderr gguf2mlb -n "$m/llama2-q4_1.gguf"
    [[ -z $stderr ]]
    has_line '^  wtype +3 ' "${lines[@]}"
    has_line '^  blk.0.attn_q.weight +blk.0.wq +Q4_1 +Q4_1 .* copy \[lossless\]$' "${lines[@]}"
    # --wtype q4_0 requantizes on request: no note either.
    run -0 --separate-stderr gguf2mlb -n --wtype q4_0 "$m/llama2-q4_1.gguf"
    [[ -z $stderr ]]
    has_line '^  blk.0.attn_q.weight +blk.0.wq +Q4_1 +Q4_0 .* quantize Q4_1 -> Q4_0 \(fit\)$' "${lines[@]}"
    local q4 q8 src
    q4=$(gguf2mlb -n --wtype q4_0 "$m/llama2-q4_1.gguf" | sed -n '/^output$/{n;p}' | awk '{print $2}')
    q8=$(gguf2mlb -n --wtype q8_0 "$m/llama2-q4_1.gguf" | sed -n '/^output$/{n;p}' | awk '{print $2}')
    src=$(gguf2mlb -n "$m/llama2-q4_1.gguf" | sed -n '/^output$/{n;p}' | awk '{print $2}')
    (( q8 > src && src > q4 )) || fail_with "q8 $q8, source $src, q4 $q4 bytes"
    # a source already Q8_0 needs no note
    run -0 --separate-stderr gguf2mlb -n "$m/llama2-q8_0.gguf"
    [[ -z $stderr ]]
}
