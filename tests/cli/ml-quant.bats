#!/usr/bin/env bats
# ml-quant.bats - requantizing from a GGUF (the same bytes as gguf2mlb) and
# from an .mlb (copies, exact re-encodings, second quantizations with a
# warning), llama.cpp's mixes (--wtype q4_k_m, ...), --imatrix, --stats,
# determinism, and the errors.
bats_require_minimum_version 1.5.0
load helpers

FIX="$BATS_TEST_DIRNAME/../fixtures"
G="$FIX/models/llama2/llama2-q8_0.gguf"

MODELS="$FIX/models"
F32="$MODELS/llama2/llama2-f32.gguf"

# RMS difference of two files of f32 logits.
rms_diff() {
    paste <(od -An -v -tf4 -w4 "$1") <(od -An -v -tf4 -w4 "$2") |
        awk '{ d = $1 - $2; s += d * d; n++ } END { printf "%.6g\n", sqrt(s / n) }'
}

# The logits of model $1 (tokenizer $2) on a fixed prompt into $3.
logits() {
    ml-run -q -m "$1" -k "$2" --ids -p "1 5 9 13 17 21 25 29 33 37 41 45" -n 0 -t 1 --logits "$3"
}

setup_file() {
    make_fixtures
    gguf2mlb -q --no-tokenizer -o "$BATS_FILE_TMPDIR/m.mlb" "$G"
    gguf2mlb -q -o "$BATS_FILE_TMPDIR/tok.mlb" -t "$BATS_FILE_TMPDIR/m.mlt" "$G"
    for i in $(seq 1 200); do printf 'word%d and the %d-th line of text. ' "$i" "$((i * 7))"; done \
        >"$BATS_FILE_TMPDIR/corpus.txt"
    ml-imatrix -q -m "$BATS_FILE_TMPDIR/m.mlb" -k "$BATS_FILE_TMPDIR/m.mlt" \
        -f "$BATS_FILE_TMPDIR/corpus.txt" -c 64 -o "$BATS_FILE_TMPDIR/m.mli"
}

@test "--help, --version, usage errors" {
    run -0 ml-quant --help
    [[ ${lines[0]} == "Usage: ml-quant IN.gguf [PART.gguf...]|IN.mlb -o OUT.mlb [options]" ]]
    run -0 ml-quant --version
    [[ $output == "ml-quant (mlcore) 0.1.0" ]]
    run -2 --separate-stderr ml-quant "$G"
    [[ ${stderr_lines[0]} == "ml-quant: name the output with -o OUT.mlb (or - for standard output)" ]]
    run -2 --separate-stderr ml-quant "$G" -o x.mlb --wtype q5_0
    [[ ${stderr_lines[0]} == "ml-quant: --wtype: 'q5_0' is not q8_0, q4_0, source, q4_k_m, q5_k_m, q6_k or iq4_xs" ]]
    run -2 --separate-stderr ml-quant "$G" -o x.mlb --wtype q4_k_s
    [[ ${stderr_lines[0]} == "ml-quant: --wtype: 'q4_k_s' is not q8_0, q4_0, source, q4_k_m, q5_k_m, q6_k or iq4_xs" ]]
    run -2 --separate-stderr ml-quant "$G" -o x.mlb --wtype q4_k_m --q8-mask wo
    [[ ${stderr_lines[0]} == "ml-quant: --q8-mask is for Q4_0 models; --wtype Q4_K_M chooses every matrix's type" ]]
    run -2 --separate-stderr ml-quant "$G" -o x.mlb --wtype q6_k --q4-rule fit
    run -2 --separate-stderr ml-quant "$G" -o x.mlb --allow-requantize
    [[ ${stderr_lines[0]} == "ml-quant: --allow-requantize is for the mixes (--wtype q4_k_m, ...)" ]]
    run -2 --separate-stderr ml-quant "$G" -o x.mlb --wtype q8_0 --q8-mask wo
    run -2 --separate-stderr ml-quant "$G" -o x.mlb --imatrix m.mli --q4-rule round
    [[ ${stderr_lines[0]} == "ml-quant: --imatrix needs the fit rule; --q4-rule round cannot use importances" ]]
    run -2 --separate-stderr ml-quant "$G" -o x.mlb --scale-f16 --scale-f32
    run -2 --separate-stderr ml-quant "$G" "$G" -o x.mlb
    [[ ! -e x.mlb ]]
}

@test "from a GGUF: gguf2mlb's bytes, the same for any thread count" {
    cd "$BATS_TEST_TMPDIR"
    ml-quant -q "$G" --wtype q4_0 --q8-mask tok_emb -o a.mlb -t 1
    ml-quant -q "$G" --wtype q4_0 --q8-mask tok_emb -o b.mlb -t 3
    cmp a.mlb b.mlb
    gguf2mlb -q --no-tokenizer --wtype q4_0 --q8-mask tok_emb -o g.mlb "$G"
    cmp a.mlb g.mlb
    mlb-verify -q a.mlb
    # Standard input and output.
    ml-quant -q - --wtype q4_0 --q8-mask tok_emb -o - <"$G" | cmp - a.mlb
}

@test "--stats: one line per array, zero for copies, a plausible Q4_0 error" {
    cd "$BATS_TEST_TMPDIR"
    run -0 --separate-stderr ml-quant -q "$G" --wtype q4_0 -o a.mlb --stats
    [[ ${lines[0]} == "tensor"*"type"*"method"*"rms_error"*"rel_rms"*"max_error" ]]
    n=$(mlb-info --json a.mlb | jq '.tensors | length')
    [[ ${#lines[@]} == $((n + 2)) ]]
    [[ ${lines[-1]} == "total"*"quantized matrices"* ]]
    grep -q '^blk.0.attn_norm  *F32  *copy/exact  *0  *0  *0$' <<<"$output"
    # Q4_0 of Gaussian-like weights: relative RMS error 5% to 15%.
    awk '$3 == "quantize" { if ($5 < 0.05 || $5 > 0.15) { print; exit 1 } }' <<<"$output"
    # With -o - the table goes to standard error.
    run -0 --separate-stderr ml-quant -q "$G" --wtype q4_0 -o - --stats
    [[ ${stderr_lines[0]} == "tensor"* ]]
    [[ ${output:0:4} == MLB1 ]]
}

@test "--imatrix: used for Q4_0, deterministic, and must fit the model" {
    cd "$BATS_TEST_TMPDIR"
    M="$BATS_FILE_TMPDIR/m.mli"
    ml-quant -q "$G" --wtype q4_0 -o plain.mlb
    ml-quant -q "$G" --wtype q4_0 --imatrix "$M" -o im1.mlb -t 1
    ml-quant -q "$G" --wtype q4_0 --imatrix "$M" -o im2.mlb -t 2
    cmp im1.mlb im2.mlb
    ! cmp -s plain.mlb im1.mlb
    run -0 ml-quant "$G" --wtype q4_0 --imatrix "$M" -n
    grep -q '^blk.0.wq  *Q4_0  *quantize Q8_0 -> Q4_0 (fit, imatrix)' <<<"$output"
    grep -q '^note: importance matrix applied to 15 matrices' <<<"$output"
    # From an .mlb, the same importances give the same bytes for the
    # matrices quantized once (the source Q8_0 values are the GGUF's).
    ml-quant -q "$BATS_FILE_TMPDIR/m.mlb" --wtype q4_0 --imatrix "$M" -o im3.mlb
    cmp im1.mlb im3.mlb
    # Another model's matrix: named file and field.
    ml-run -q -m "$TINY" --ids -p "1 2" -n 1 --imatrix other.mli >/dev/null
    run -1 --separate-stderr ml-quant "$G" --wtype q4_0 --imatrix other.mli -o x.mlb
    [[ ${stderr_lines[0]} == "ml-quant: other.mli: ML_E_MISMATCH: "* ]]
    run -1 --separate-stderr ml-quant "$BATS_FILE_TMPDIR/m.mlb" --wtype q4_0 --imatrix other.mli -o x.mlb
    [[ ${stderr_lines[0]} == "ml-quant: other.mli: ML_E_MISMATCH: "* ]]
    [[ ! -e x.mlb ]]
}

@test "--imatrix takes llama.cpp's importance matrices, GGUF and .dat, as their .mli" {
    cd "$BATS_TEST_TMPDIR"
    # llama-imatrix's files of the tiny Llama 2 and the .mli they stand for
    # (tools/make-imatrix-fixtures.py, gguf-py): the same bytes each way.
    Q="$FIX/quant"
    ml-quant -q "$F32" --wtype q4_k_m --imatrix "$Q/llama2-imatrix.mli" -o mli.mlb
    ml-quant -q "$F32" --wtype q4_k_m --imatrix "$Q/llama2.imatrix" -o gguf.mlb
    ml-quant -q "$F32" --wtype q4_k_m --imatrix "$Q/llama2.imatrix.dat" -o dat.mlb
    cmp mli.mlb gguf.mlb
    cmp mli.mlb dat.mlb
    ml-quant -q "$F32" --wtype q4_k_m -o plain.mlb
    ! cmp -s plain.mlb gguf.mlb
    # A GGUF model is not an importance matrix; another model's matrix
    # does not fit (named file and field).
    run -1 --separate-stderr ml-quant "$F32" --wtype q4_k_m --imatrix "$G" -o x.mlb
    [[ ${stderr_lines[0]} == "ml-quant: $G: ML_E_FORMAT: general.type (offset "*'): "model": a GGUF model, not an importance matrix' ]]
    run -1 --separate-stderr ml-quant "$MODELS/smollm2/smollm2-q8_0.gguf" --wtype q4_k_m \
        --imatrix "$Q/llama2.imatrix" -o x.mlb
    [[ ${stderr_lines[0]} == "ml-quant: $Q/llama2.imatrix: ML_E_MISMATCH: "* ]]
    # Cut short: the GGUF reader's own error, naming the offset.
    head -c 3000 "$Q/llama2.imatrix" >cut.imatrix
    run -1 --separate-stderr ml-quant "$F32" --wtype q4_k_m --imatrix cut.imatrix -o x.mlb
    [[ ${stderr_lines[0]} == "ml-quant: cut.imatrix: ML_E_FORMAT: "* ]]
    head -c 3000 "$Q/llama2.imatrix.dat" >cut.dat
    run -1 --separate-stderr ml-quant "$F32" --wtype q4_k_m --imatrix cut.dat -o x.mlb
    [[ ${stderr_lines[0]} == "ml-quant: cut.dat: ML_E_FORMAT: blk.0.attn_q.weight (offset 2150): 256 sums, past the end of the file" ]]
    [[ ! -e x.mlb ]]
}

@test "from an .mlb: copies, exact re-encodings, and a warning for a second rounding" {
    cd "$BATS_TEST_TMPDIR"
    # Nothing to change: every array copied.
    run -0 --separate-stderr ml-quant "$Q4" -o same.mlb
    cmp same.mlb "$Q4"
    [[ ${#stderr_lines[@]} == 0 ]]
    # f16 scales to f32 and back: exact both ways.
    ml-quant -q "$Q4" --scale-f32 -o f32.mlb
    [[ $(mlb-info --json f32.mlb | jq .header.scale_f16) == 0 ]]
    ml-quant -q f32.mlb --scale-f16 -o back.mlb
    cmp back.mlb "$Q4"
    # Q4_0 -> Q8_0 keeps every value: greedy ids are unchanged.
    run -0 ml-quant "$Q4" --wtype q8_0 -n
    ! grep -q 'quantize again' <<<"$output"
    # Q8_0 -> Q4_0 rounds again: warned, unless -q.
    run -0 --separate-stderr ml-quant "$TINY" --wtype q4_0 -o t4.mlb
    [[ ${stderr_lines[0]} == "ml-quant: $TINY: warning: "*" matrices are quantized a second time"* ]]
    mlb-verify -q t4.mlb
    [[ $(mlb-info --json t4.mlb | jq .header.wtype) == 2 ]]
    run -0 --separate-stderr ml-quant -q "$TINY" --wtype q4_0 -o t4b.mlb
    [[ ${#stderr_lines[@]} == 0 ]]
    cmp t4.mlb t4b.mlb
}

@test "outputs: existing, unwritable, full disk, the input itself" {
    mkdir "$BATS_TEST_TMPDIR/out" && cd "$BATS_TEST_TMPDIR/out"
    : >exists.mlb
    run -2 --separate-stderr ml-quant "$G" -o exists.mlb
    [[ ${stderr_lines[0]} == "ml-quant: exists.mlb: exists; use -f to overwrite it" ]]
    run -0 ml-quant -q -f "$G" -o exists.mlb
    cp "$TINY" in.mlb
    run -2 --separate-stderr ml-quant -f in.mlb -o in.mlb --wtype q4_0
    [[ ${stderr_lines[0]} == "ml-quant: in.mlb: is the input file; choose another output" ]]
    run -3 --separate-stderr ml-quant -q "$G" -o /nonexistent/x.mlb
    [[ ${stderr_lines[0]} == "ml-quant: /nonexistent/x.mlb: ML_E_IO: "* ]]
    if [[ -w /dev/full ]]; then
        run -3 --separate-stderr bash -c 'ml-quant -q "$1" -o - >/dev/full' _ "$G"
        [[ ${stderr_lines[0]} == "ml-quant: (stdout): ML_E_IO: "* ]]
    fi
    ls -A | grep -v -e '^exists.mlb$' -e '^in.mlb$' && return 1 # no temporary left
    true
}

@test "bad inputs: truncated GGUF and .mlb, unknown bytes" {
    cd "$BATS_TEST_TMPDIR"
    head -c 5000 "$G" >t.gguf
    run -1 --separate-stderr ml-quant t.gguf -o x.mlb
    [[ ${stderr_lines[0]} == "ml-quant: t.gguf: ML_E_FORMAT: "* ]]
    head -c 5000 "$TINY" >t.mlb
    run -1 --separate-stderr ml-quant t.mlb -o x.mlb
    [[ ${stderr_lines[0]} == "ml-quant: t.mlb: ML_E_FORMAT: "* ]]
    printf 'hello world' >t.txt
    run -1 --separate-stderr ml-quant t.txt -o x.mlb
    [[ ${stderr_lines[0]} == "ml-quant: t.txt: ML_E_FORMAT: "* ]]
    [[ ! -e x.mlb ]]
}

@test "a model with a type table: --wtype q8_0 or q4_0 requantizes it, keeping it is refused (exit 4)" {
    local d=$BATS_TEST_TMPDIR k="$BATS_TEST_DIRNAME/../fixtures/models/llama2/llama2-q4_k_m.gguf"
    gguf2mlb -f -q --no-tokenizer "$k" -o "$d/k.mlb"
    run -4 --separate-stderr ml-quant -o "$d/x.mlb" "$d/k.mlb"
    [[ ${stderr_lines[0]} == "ml-quant: $d/k.mlb: ML_E_UNSUPPORTED: wtype (offset 44): a model with a type table (wtype 3) can only be requantized to one weight type (Q8_0 or Q4_0)" ]] ||
        fail_with "${stderr_lines[0]}"
    run -4 --separate-stderr ml-quant --wtype source -o "$d/x.mlb" "$d/k.mlb"
    [[ ${stderr_lines[0]} == "ml-quant: $d/k.mlb: ML_E_UNSUPPORTED: wtype: an .mlb cannot be requantized to a type table (from a GGUF it can)" ]] ||
        fail_with "${stderr_lines[0]}"
    [[ ! -e $d/x.mlb ]]
    run -0 --separate-stderr ml-quant -q --wtype q8_0 -o "$d/q8.mlb" "$d/k.mlb"
    [[ $(mlb-info --json "$d/q8.mlb" | jq .header.wtype) == 1 ]]
    # From the GGUF, --wtype source writes gguf2mlb's bytes.
    run -0 --separate-stderr ml-quant -q --wtype source -o "$d/s.mlb" "$k"
    cmp "$d/s.mlb" "$d/k.mlb"
}

@test "the mixes: llama.cpp's types per matrix, logits closer to F32 than Q4_0's, the same bytes for any thread count" {
    cd "$BATS_TEST_TMPDIR"
    gguf2mlb -q --wtype source -o ref.mlb -t ref.mlt "$F32"
    logits ref.mlb ref.mlt ref.f32
    ml-quant -q "$F32" --wtype q4_0 -o q4_0.mlb
    logits q4_0.mlb ref.mlt q4_0.f32
    local d4 d
    d4=$(rms_diff ref.f32 q4_0.f32)
    # Q4_K_M: Q4_K, with Q6_K for the classifier and for attn_v and
    # ffn_down of the "more bits" layer (the last of 2); the same types
    # and size as llama-quantize's Q4_K_M of this model.
    run -0 ml-quant "$F32" --wtype Q4_K_M -n
    grep -q '^tok_emb  *Q4_K  *quantize F32 -> Q4_K$' <<<"$output"
    grep -q '^blk.0.wq  *Q4_K  *quantize F32 -> Q4_K$' <<<"$output"
    grep -q '^blk.0.wv  *Q4_K ' <<<"$output"
    grep -q '^blk.1.wv  *Q6_K ' <<<"$output"
    grep -q '^blk.1.w2  *Q6_K ' <<<"$output"
    grep -q '^wcls  *Q6_K ' <<<"$output"
    [[ ${lines[-1]} == "size: 609088 bytes (Q4_K_M)" ]] || fail_with "${lines[-1]}"
    ml-quant -q "$F32" --wtype q4_k_m -o a.mlb -t 1
    ml-quant -q "$F32" --wtype q4_k_m -o b.mlb -t 2
    cmp a.mlb b.mlb
    [[ $(file_size a.mlb) == 609088 ]]
    [[ $(mlb-info --json a.mlb | jq -c .types) == '{"Q4_K":13,"F32":5,"Q6_K":3}' ]]
    [[ $(mlb-info --json a.mlb | jq -r '.tensors[] | select(.name == "wcls") | .type') == Q6_K ]]
    gguf2mlb -q --wtype source --no-tokenizer -o k.mlb "$MODELS/llama2/llama2-q4_k_m.gguf"
    [[ $(mlb-info --json k.mlb | jq -c '[.tensors[] | .type]') == "$(mlb-info --json a.mlb | jq -c '[.tensors[] | .type]')" ]]
    # Every mix runs, closer to the F32 logits than Q4_0 (and the larger
    # ones closer than Q4_K_M).
    logits a.mlb ref.mlt a.f32
    local dk
    dk=$(rms_diff ref.f32 a.f32)
    awk -v a="$dk" -v b="$d4" 'BEGIN { exit !(a <= b) }' || fail_with "q4_k_m $dk, q4_0 $d4"
    for w in q5_k_m q6_k iq4_xs; do
        ml-quant -q "$F32" --wtype "$w" -o "$w.mlb"
        logits "$w.mlb" ref.mlt "$w.f32"
        d=$(rms_diff ref.f32 "$w.f32")
        awk -v a="$d" -v b="$d4" 'BEGIN { exit !(a <= b) }' || fail_with "$w $d, q4_0 $d4"
        [[ $w == iq4_xs ]] || awk -v a="$d" -v b="$dk" 'BEGIN { exit !(a <= b) }' || fail_with "$w $d, q4_k_m $dk"
    done
    [[ $(mlb-info --json q6_k.mlb | jq -c .types) == '{"Q6_K":16,"F32":5}' ]]
    [[ $(mlb-info --json iq4_xs.mlb | jq -c .types) == '{"IQ4_XS":15,"F32":5,"Q6_K":1}' ]]
    # --stats measures the blocks.
    run -0 ml-quant "$F32" --wtype q4_k_m -o s.mlb --stats -q
    grep -q '^blk.1.w2  *Q6_K  *quantize  *0\.00' <<<"$output"
    [[ ${lines[-1]} == "total "*"quantized matrices"* ]]
}

@test "the mixes: row lengths not a multiple of 256 fall back (gemma3), a tied classifier, linear attention" {
    cd "$BATS_TEST_TMPDIR"
    local m=$MODELS/gemma3/gemma3-f32.gguf
    # dim 64: Q4_K -> Q5_0, Q5_K -> Q5_1, IQ4_XS -> IQ4_NL, the tied
    # classifier (tok_emb) Q8_0.
    run -0 ml-quant "$m" --wtype q4_k_m -n
    grep -q '^tok_emb  *Q8_0  *quantize F32 -> Q8_0$' <<<"$output"
    grep -q '^blk.0.wq  *Q5_0  *quantize F32 -> Q5_0, RoPE pairs interleaved$' <<<"$output"
    run -0 ml-quant "$m" --wtype q5_k_m -n
    grep -q '^blk.0.w1  *Q5_1 ' <<<"$output"
    run -0 ml-quant "$m" --wtype iq4_xs -n
    grep -q '^blk.0.w1  *IQ4_NL ' <<<"$output"
    gguf2mlb -q --wtype source -o ref.mlb -t ref.mlt "$m"
    logits ref.mlb ref.mlt ref.f32
    ml-quant -q "$m" --wtype q4_0 -o q4_0.mlb
    ml-quant -q "$m" --wtype q4_k_m -o k.mlb
    logits q4_0.mlb ref.mlt q4_0.f32
    logits k.mlb ref.mlt k.f32
    awk -v a="$(rms_diff ref.f32 k.f32)" -v b="$(rms_diff ref.f32 q4_0.f32)" 'BEGIN { exit !(a <= b) }'
    # Qwen3.5: lqkv counted with wv, lb and la Q8_0, lout's head columns
    # regrouped before quantizing; it runs.
    m=$MODELS/qwen35/qwen35-f32.gguf
    run -0 ml-quant "$m" --wtype q6_k -n
    grep -q '^blk.0.lb  *Q8_0  *quantize F32 -> Q8_0, value heads regrouped$' <<<"$output"
    grep -q '^blk.0.lout  *Q8_0  *quantize F32 -> Q8_0, value-head columns regrouped$' <<<"$output"
    gguf2mlb -q --wtype source -o q.mlb -t q.mlt "$m"
    ml-quant -q "$m" --wtype q4_k_m -o qk.mlb
    logits qk.mlb q.mlt qk.f32
}

@test "the mixes with --imatrix: applied, deterministic, different bytes" {
    cd "$BATS_TEST_TMPDIR"
    gguf2mlb -q --wtype source -o ref.mlb -t ref.mlt "$F32"
    ml-imatrix -q -m ref.mlb -k ref.mlt -f "$BATS_FILE_TMPDIR/corpus.txt" -c 64 -o f.mli
    run -0 ml-quant "$F32" --wtype q4_k_m --imatrix f.mli -n
    grep -q '^blk.0.wq  *Q4_K  *quantize F32 -> Q4_K (imatrix)' <<<"$output"
    grep -q "^note: importance matrix applied to 15 matrices (the mix's block types)" <<<"$output"
    ml-quant -q "$F32" --wtype q4_k_m --imatrix f.mli -o i1.mlb -t 1
    ml-quant -q "$F32" --wtype q4_k_m --imatrix f.mli -o i2.mlb -t 2
    cmp i1.mlb i2.mlb
    ml-quant -q "$F32" --wtype q4_k_m -o plain.mlb
    ! cmp -s plain.mlb i1.mlb
    [[ $(file_size plain.mlb) == $(file_size i1.mlb) ]]
    logits i1.mlb ref.mlt i1.f32
}

@test "the mixes: a quantized source needs --allow-requantize (exit 4); from a Q8_0 .mlb, the GGUF's bytes" {
    cd "$BATS_TEST_TMPDIR"
    local k=$MODELS/llama2/llama2-q4_k_m.gguf
    run -4 --separate-stderr ml-quant "$k" --wtype q4_k_m -o x.mlb
    [[ ${stderr_lines[0]} == "ml-quant: $k: ML_E_UNSUPPORTED: token_embd.weight (offset "*"): is Q4_K: a mix quantizes F32, F16, BF16 or Q8_0 matrices; requantizing another quantized type needs allow_requantize (ml-quant --allow-requantize)" ]] ||
        fail_with "${stderr_lines[0]}"
    [[ ! -e x.mlb ]]
    # Allowed: the types the mix keeps are copied, the others quantized again.
    run -0 ml-quant "$k" --wtype q4_k_m --allow-requantize -n
    grep -q '^blk.0.wq  *Q4_K  *copy' <<<"$output"
    run -0 ml-quant "$k" --wtype q6_k --allow-requantize -n
    grep -q '^blk.0.wq  *Q6_K  *quantize Q4_K -> Q6_K' <<<"$output"
    # Q8_0 sources need no flag; the Q8_0 .mlb of the same GGUF gives the
    # same bytes (with the warning about a second rounding).
    ml-quant -q "$G" --wtype q4_k_m -o g.mlb
    run -0 --separate-stderr ml-quant "$BATS_FILE_TMPDIR/m.mlb" --wtype q4_k_m -o m.mlb -t 2
    [[ ${stderr_lines[0]} == "ml-quant: $BATS_FILE_TMPDIR/m.mlb: warning: 16 matrices are quantized a second time from an .mlb; quantize from the GGUF for the best quality" ]] ||
        fail_with "${stderr_lines[0]}"
    cmp g.mlb m.mlb
    run -0 --separate-stderr ml-quant "$BATS_FILE_TMPDIR/m.mlb" --wtype q4_k_m -n
    grep -q '^blk.1.w2  *Q6_K  *quantize again from Q8_0$' <<<"$output"
    [[ ${lines[-1]} == "size: $(file_size g.mlb) bytes (Q4_K_M)" ]] || fail_with "${lines[-1]}"
    # An .mlb with Q4_0 matrices needs the flag too.
    ml-quant -q "$G" --wtype q4_0 -o q4.mlb
    run -4 --separate-stderr ml-quant q4.mlb --wtype iq4_xs -o x.mlb
    [[ ${stderr_lines[0]} == "ml-quant: q4.mlb: ML_E_UNSUPPORTED: tok_emb (offset "*"): is Q4_0: a mix quantizes Q8_0, F32, F16 or BF16 matrices; "* ]] ||
        fail_with "${stderr_lines[0]}"
    [[ ! -e x.mlb ]]
    ml-quant -q q4.mlb --wtype iq4_xs --allow-requantize -o x.mlb
    [[ $(mlb-info --json x.mlb | jq .header.wtype) == 3 ]]
}
