#!/usr/bin/env bats
# moe.bats - mixture-of-experts models through the commands (issue 40):
# the qwen3moe, qwen35moe and gpt-oss fixtures of tests/fixtures/moe
# (GGUFs with llama.cpp's logits and greedy continuation, made by
# tools/make-moe-fixtures.py) are converted by gguf2mlb, pass mlb-verify,
# are described by mlb-info, and ml-run continues their prompts as
# llama.cpp did, with the same bits for any thread count, batch size and
# kernel variant.  GGUFs edited from
# the fixture (bytes patched in place) are refused with their exit status,
# naming the key or the tensor.

bats_require_minimum_version 1.5.0

load helpers

FIX=$BATS_TEST_DIRNAME/../fixtures/moe/qwen3moe
GGUF=$FIX/qwen3moe-q8_0.gguf
M="$BATS_FILE_TMPDIR/qwen3moe.mlb"

setup_file() {
    gguf2mlb -q --no-tokenizer -o "$M" "$GGUF"
}

# The prompt's ids and llama.cpp's greedy continuation, space-separated.
prompt_ids() { jq -r '.prompt.ids | map(tostring) | join(" ")' "$FIX/expected.json"; }
generated_ids() { jq -r '.files[0].generated | map(tostring) | join(" ")' "$FIX/expected.json"; }

# agrees_with_llama FIXDIR IDS [VARIANT]: the generated IDS (space-separated) are
# llama.cpp's greedy tokens up to the first that is a near tie in its run
# (its top two logits within 5% of the first), where ours must be its
# runner-up (check_e2e.c's rule: the two runtimes' activations are
# quantized with scales of different precision, which moves logits by a
# few percent on these random models).  VARIANT is the file's (q8_0 when
# not given).  Prints how many agree.
agrees_with_llama() {
    local fx=$1 v=${3:-q8_0} i
    local -a got want
    read -ra got <<<"$2"
    read -ra want <<<"$(jq -r --arg v "$v" '.files[] | select(.variant == $v) |
        .generated | map(tostring) | join(" ")' "$fx/expected.json")"
    [[ ${#got[@]} -eq ${#want[@]} ]] || fail_with "${#got[@]} tokens, llama.cpp ${#want[@]}"
    for ((i = 0; i < ${#want[@]}; i++)); do
        [[ ${got[i]} == "${want[i]}" ]] && continue
        jq -e --argjson i "$i" --argjson g "${got[i]}" '.steps[$i] |
            .second == $g and (.top1 - .top2) / (if .top1 < 0 then -.top1 else .top1 end) <= 0.05' \
            "$fx/trace-$v.json" >/dev/null ||
            fail_with "token $i: ${got[i]}, llama.cpp ${want[i]}: not its runner-up at a near tie"
        break
    done
    echo "$i"
}

# key_value_offset FILE KEY: the file offset of a GGUF key's value (the key
# is unique in the file: its u64 length, its bytes, a u32 type, the value).
key_value_offset() {
    local at
    at=$(grep -obUa -- "$2" "$1" | head -1 | cut -d: -f1)
    [[ -n $at ]] || fail_with "no key $2 in $1"
    echo $((at + ${#2} + 4))
}

# ---------------------------------------------------------------- conversion

@test "gguf2mlb: qwen3moe converts (exit 0), passes mlb-verify; mlb-info shows the experts" {
    run -0 mlb-verify -q "$M"
    run -0 --separate-stderr mlb-info --json "$M"
    jq -e --argjson m "$(jq .model "$FIX/expected.json")" '
        .header.n_experts == $m.n_expert and .header.n_experts_used == $m.n_used and
        .header.expert_hidden_dim == $m.n_ff_exp and .header.hidden_dim == 0 and
        .header.moe_gating == 0 and .header.moe_flags == 1 and .header.act == 0 and
        .header.wtype == 1 and .moe.moe_layers == $m.n_layer and .moe.expert_bytes > 0 and
        .moe.active_bytes < .weight_bytes and
        ([.tensors[] | select(.name | test("^blk\\.1\\.exp\\.[0-9]+\\.w[123]$"))] | length)
            == 3 * $m.n_expert and
        ([.tensors[] | select(.name == "blk.2.wr")][0] | .type == "F32" and
            .shape == [$m.n_expert, $m.dim]) and
        ([.layers[] | select(.description | test("8 experts \\(2 used\\)"))] | length)
            == $m.n_layer' <<<"$output"
    # the human report has the derived sizes too
    run -0 --separate-stderr mlb-info "$M"
    [[ $(section_value derived moe_layers) == 3 ]]
    [[ $(section_value derived expert_bytes) -gt 0 ]]
}

@test "gguf2mlb --dry-run: every expert matrix is copied, the router kept in F32" {
    run -0 --separate-stderr gguf2mlb --dry-run "$GGUF"
    grep -q 'blk.0.exp.7.w2' <<<"$output" || fail_with "no expert in the plan"
    ! grep -E 'blk\.[0-9]+\.exp\.[0-9]+\.w[123]' <<<"$output" | grep -qv copy ||
        fail_with "an expert matrix is not copied: $output"
}

# ---------------------------------------------------------------- llama.cpp's run

@test "ml-run: the greedy continuation is llama.cpp's, token for token up to its first near tie" {
    local n
    run -0 --separate-stderr ml-run -m "$M" --ids -p "$(prompt_ids)" -n 32 --temp 0 -q
    n=$(agrees_with_llama "$FIX" "$output")
    [[ $n -ge 8 ]] || fail_with "only $n tokens agree"
    [[ $(cut -d' ' -f1-"$n" <<<"$output") == $(generated_ids | cut -d' ' -f1-"$n") ]]
}

@test "ml-run --logits: threads, batch sizes and kernels change no bit; decode equals prefill" {
    local d=$BATS_TEST_TMPDIR ids
    ids=$(prompt_ids)
    ml-run -m "$M" --ids -p "$ids" -n 0 --logits "$d/ref" -q -t 1 -b 1
    [[ $(file_size "$d/ref") -eq $((29 * 384 * 4)) ]]
    local tb
    for tb in "1 29" "2 7" "2 29" "3 4"; do
        set -- $tb
        ml-run -m "$M" --ids -p "$ids" -n 0 --logits "$d/x" -q -t "$1" -b "$2"
        cmp "$d/ref" "$d/x" || fail_with "threads $1 batch $2"
    done
    ML_KERNELS=scalar ml-run -m "$M" --ids -p "$ids" -n 0 --logits "$d/s" -q -t 2 -b 16
    cmp "$d/ref" "$d/s"
}

@test "qwen35moe (linear and full attention, a gated shared expert): converts, verifies, and continues as llama.cpp does" {
    local fx=$BATS_TEST_DIRNAME/../fixtures/moe/qwen35moe m=$BATS_TEST_TMPDIR/q35.mlb ids n
    run -0 --separate-stderr gguf2mlb -q --no-tokenizer -o "$m" "$fx/qwen35moe-q8_0.gguf"
    run -0 mlb-verify -q "$m"
    run -0 --separate-stderr mlb-info --json "$m"
    jq -e '.header.shared_hidden_dim == 32 and .header.moe_flags == 17 and .header.layer_flags == 1
        and ([.layers[].flags] == [24, 24, 24, 16]) and .moe.moe_layers == 4
        and any(.tensors[]; .name == "blk.3.wsg")' <<<"$output"
    ids=$(jq -r '.prompt.ids | map(tostring) | join(" ")' "$fx/expected.json")
    run -0 --separate-stderr ml-run -m "$m" --ids -p "$ids" -n 32 --temp 0 -q -t 2
    n=$(agrees_with_llama "$fx" "$output")
    [[ $n -ge 8 ]] || fail_with "only $n tokens agree"
}

# ---------------------------------------------------------------- bad inputs

@test "expert_used_count above expert_count, or 0: exit 1 (SHAPE), the key named" {
    local g off
    g=$(mutant "$GGUF")
    off=$(key_value_offset "$g" qwen3moe.expert_used_count)
    put_u32 "$g" "$off" 9
    run -1 --separate-stderr gguf2mlb -q -o "$BATS_TEST_TMPDIR/x.mlb" "$g"
    [[ $stderr == "gguf2mlb: $g: ML_E_SHAPE: qwen3moe.expert_used_count (offset $off): 9 experts used of 8"* ]] ||
        fail_with "$stderr"
    put_u32 "$g" "$off" 0
    run -1 --separate-stderr gguf2mlb -q -o "$BATS_TEST_TMPDIR/x.mlb" "$g"
    [[ $stderr == *"ML_E_SHAPE: qwen3moe.expert_used_count (offset $off): 0 experts used of 8"* ]]
    [[ ! -e $BATS_TEST_TMPDIR/x.mlb ]]
}

@test "too many experts, or an expert width .mlb cannot hold: exit 4 (UNSUPPORTED), the key named" {
    local g off
    g=$(mutant "$GGUF" e.gguf)
    off=$(key_value_offset "$g" qwen3moe.expert_count)
    put_u32 "$g" "$off" 2000
    run -4 --separate-stderr gguf2mlb -q -o "$BATS_TEST_TMPDIR/x.mlb" "$g"
    [[ $stderr == *"ML_E_UNSUPPORTED: qwen3moe.expert_count (offset $off): 2000 experts; .mlb allows at most 1024" ]]
    g=$(mutant "$GGUF" f.gguf)
    off=$(key_value_offset "$g" qwen3moe.expert_feed_forward_length)
    put_u32 "$g" "$off" 48
    run -4 --separate-stderr gguf2mlb -q -o "$BATS_TEST_TMPDIR/x.mlb" "$g"
    [[ $stderr == *"ML_E_UNSUPPORTED: qwen3moe.expert_feed_forward_length (offset $off): an expert width of 48"* ]]
}

@test "an expert stack of the wrong shape (exit 1, SHAPE) or a missing router (exit 1, FORMAT): the tensor named" {
    local g at
    g=$(mutant "$GGUF" s.gguf)
    # the tensor info: name, u32 n_dims, u64 dims; the third dim is the experts
    at=$(grep -obUa -- 'blk.1.ffn_up_exps.weight' "$g" | head -1 | cut -d: -f1)
    put_u32 "$g" $((at + 24 + 4 + 16)) 7
    run -1 --separate-stderr gguf2mlb -q -o "$BATS_TEST_TMPDIR/x.mlb" "$g"
    [[ $stderr == *"ML_E_SHAPE: blk.1.ffn_up_exps.weight (offset "*"): shape [64, 32, 7, 1], expected [64, 32, 8]"* ]] ||
        fail_with "$stderr"
    g=$(mutant "$GGUF" r.gguf)
    at=$(grep -obUa -- 'blk.2.ffn_gate_inp.weight' "$g" | head -1 | cut -d: -f1)
    patch_hex "$g" $((at + 17)) 71 # ffn_gate_inp -> ffn_gate_inq
    run -1 --separate-stderr gguf2mlb -q -o "$BATS_TEST_TMPDIR/x.mlb" "$g"
    [[ $stderr == *"ML_E_FORMAT: blk.2.ffn_gate_inp.weight: required tensor is missing"* ]] ||
        fail_with "$stderr"
}

# ---------------------------------------------------------------- the format

@test "mkmodel moe-full: every MoE array in its place; mlb-verify --sums and --check agree; ml-run runs it, the same bits for any threads and kernels" {
    local f=$BATS_TEST_TMPDIR/full.mlb
    "$MKMODEL" --preset moe-full -o "$f"
    run -0 mlb-verify -q "$f"
    mlb-verify --sums "$f" >"$BATS_TEST_TMPDIR/sums"
    grep -q '  blk\.0\.exp\.3\.b2  ' "$BATS_TEST_TMPDIR/sums"
    run -0 mlb-verify -q --check "$BATS_TEST_TMPDIR/sums"
    run -0 --separate-stderr mlb-info --json "$f"
    local n
    for n in blk.0.wr blk.0.rb blk.0.sb blk.0.exp.0.w1 blk.0.exp.3.b3 blk.0.ws2 blk.0.wsg \
        blk.0.bo blk.0.sinks blk.1.w1 blk.1.sinks; do
        jq -e --arg n "$n" 'any(.tensors[]; .name == $n)' <<<"$output" >/dev/null ||
            fail_with "no $n"
    done
    jq -e '.moe.moe_layers == 1 and ([.tensors[] | select(.name == "blk.1.wr")] | length) == 0' \
        <<<"$output"
    local d=$BATS_TEST_TMPDIR ids="1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"
    ml-run -m "$f" --ids -p "$ids" -n 0 --logits "$d/ref" -q -t 1 -b 1
    [[ $(file_size "$d/ref") -eq $((20 * 256 * 4)) ]]
    ml-run -m "$f" --ids -p "$ids" -n 0 --logits "$d/x" -q -t 2 -b 7
    cmp "$d/ref" "$d/x"
    ML_KERNELS=scalar ml-run -m "$f" --ids -p "$ids" -n 0 --logits "$d/s" -q -t 3 -b 20
    cmp "$d/ref" "$d/s"
}

@test "a flag byte with experts but no n_experts, and experts on no layer: exit 1 (FORMAT), named" {
    local f=$BATS_TEST_TMPDIR/a.mlb
    "$MKMODEL" --preset moe-full -o "$f"
    patch_hex "$f" 256 00 # layer 0 now dense: no layer has experts
    run -1 --separate-stderr mlb-info "$f"
    [[ $stderr == "mlb-info: $f: ML_E_FORMAT: n_experts (offset 164): 4 experts but no layer has experts (flag bit 4)" ]] ||
        fail_with "$stderr"
    "$MKMODEL" --preset tiny --flags 0 -o "$f"
    patch_hex "$f" 256 10
    run -1 --separate-stderr mlb-verify "$f"
    [[ $stderr == "mlb-verify: $f: ML_E_FORMAT: layer_flags[0] (offset 256): experts (bit 4) but n_experts is 0" ]] ||
        fail_with "$stderr"
}

# ---------------------------------------------------------------- gpt-oss

GO=$BATS_TEST_DIRNAME/../fixtures/moe/gpt-oss

# go_mlb VARIANT: the gpt-oss fixture's file converted (once per test).
go_mlb() {
    local m=$BATS_TEST_TMPDIR/gpt-oss-$1.mlb
    [[ -e $m ]] || gguf2mlb -q --no-tokenizer -o "$m" "$GO/gpt-oss-$1.gguf"
    echo "$m"
}

@test "gpt-oss (Q8_0, and MXFP4 experts): converts, passes mlb-verify; mlb-info shows sinks, biases, the clamped SwiGLU, the window on even layers" {
    local v m
    for v in q8_0 mxfp4; do
        m=$(go_mlb $v)
        run -0 mlb-verify -q "$m"
        run -0 --separate-stderr mlb-info --json "$m"
        jq -e --arg v "$v" '[.tensors[].name] as $names |
            .header.act == 2 and .header.attn_sinks == 1 and .header.o_bias == 1
            and .header.qkv_bias == 1 and .header.moe_gating == 1 and .header.moe_flags == 6
            and .header.hidden_dim == 0 and .header.sliding_window == 8 and .header.rope_type == 3
            and ([.layers[].flags] == [17, 16, 17, 16]) and .moe.moe_layers == 4
            and all("blk.3.sinks", "blk.1.bo", "blk.2.rb", "blk.0.exp.7.b1", "blk.0.exp.7.b2",
                    "blk.0.exp.7.b3"; . as $n | any($names[]; . == $n))
            and ([.tensors[] | select(.name == "blk.1.exp.2.w2")][0].type
                 == (if $v == "mxfp4" then "MXFP4" else "Q8_0" end))' <<<"$output" >/dev/null ||
            fail_with "$v: $(jq -c '.header' <<<"$output")"
    done
}

@test "gpt-oss: ml-run continues the prompt as llama.cpp does, Q8_0 and MXFP4 experts" {
    local v m n ids
    ids=$(jq -r '.prompt.ids | map(tostring) | join(" ")' "$GO/expected.json")
    for v in q8_0 mxfp4; do
        m=$(go_mlb $v)
        run -0 --separate-stderr ml-run -m "$m" --ids -p "$ids" -n 32 --temp 0 -q -t 2
        n=$(agrees_with_llama "$GO" "$output" "$v")
        [[ $n -ge 8 ]] || fail_with "$v: only $n tokens agree"
    done
}

@test "gpt-oss --logits: threads, batch sizes (across the window) and kernels change no bit" {
    local d=$BATS_TEST_TMPDIR ids v m tb
    ids=$(jq -r '.prompt.ids | map(tostring) | join(" ")' "$GO/expected.json")
    for v in q8_0 mxfp4; do
        m=$(go_mlb $v)
        ml-run -m "$m" --ids -p "$ids" -n 0 --logits "$d/ref" -q -t 1 -b 1
        [[ $(file_size "$d/ref") -eq $((29 * 390 * 4)) ]]
        for tb in "1 29" "2 5" "3 16"; do
            set -- $tb
            ml-run -m "$m" --ids -p "$ids" -n 0 --logits "$d/x" -q -t "$1" -b "$2"
            cmp "$d/ref" "$d/x" || fail_with "$v: threads $1 batch $2"
        done
        ML_KERNELS=scalar ml-run -m "$m" --ids -p "$ids" -n 0 --logits "$d/s" -q -t 2 -b 16
        cmp "$d/ref" "$d/s" || fail_with "$v: scalar kernels"
    done
}

@test "gpt-oss without attn_sinks (exit 1, FORMAT) or with a bias stack of the wrong shape (exit 1, SHAPE): the tensor named" {
    local g at
    g=$(mutant "$GO/gpt-oss-q8_0.gguf" s.gguf)
    at=$(grep -obUa -- 'blk.2.attn_sinks.weight' "$g" | head -1 | cut -d: -f1)
    patch_hex "$g" $((at + 15)) 74 # blk.2.attn_sinks -> blk.2.attn_sinkt
    run -1 --separate-stderr gguf2mlb -q --no-tokenizer -o "$BATS_TEST_TMPDIR/x.mlb" "$g"
    [[ $stderr == *"ML_E_FORMAT: blk.2.attn_sinks.weight: required tensor is missing"* ]] ||
        fail_with "$stderr"
    g=$(mutant "$GO/gpt-oss-q8_0.gguf" b.gguf)
    # the tensor info: name, u32 n_dims, u64 dims; the second dim is the experts
    at=$(grep -obUa -- 'blk.1.ffn_down_exps.bias' "$g" | head -1 | cut -d: -f1)
    put_u32 "$g" $((at + 24 + 4 + 8)) 7
    run -1 --separate-stderr gguf2mlb -q --no-tokenizer -o "$BATS_TEST_TMPDIR/x.mlb" "$g"
    [[ $stderr == *"ML_E_SHAPE: blk.1.ffn_down_exps.bias (offset "*"): shape [64, 7, 1], expected [64, 8] (dim x experts)" ]] ||
        fail_with "$stderr"
    [[ ! -e $BATS_TEST_TMPDIR/x.mlb ]]
}

@test "gpt-oss without its window key or a router bias: exit 1 (FORMAT), the key or tensor named" {
    local g at
    g=$(mutant "$GO/gpt-oss-q8_0.gguf" w.gguf)
    at=$(grep -obUa -- 'gpt-oss.attention.sliding_window' "$g" | head -1 | cut -d: -f1)
    patch_hex "$g" $((at + 31)) 78 # sliding_window -> sliding_windox
    run -1 --separate-stderr gguf2mlb -q --no-tokenizer -o "$BATS_TEST_TMPDIR/x.mlb" "$g"
    [[ $stderr == "gguf2mlb: $g: ML_E_FORMAT: gpt-oss.attention.sliding_window: required key is missing" ]] ||
        fail_with "$stderr"
    g=$(mutant "$GO/gpt-oss-q8_0.gguf" r.gguf)
    at=$(grep -obUa -- 'blk.3.ffn_gate_inp.bias' "$g" | head -1 | cut -d: -f1)
    patch_hex "$g" $((at + 22)) 63 # .bias -> .biac
    run -1 --separate-stderr gguf2mlb -q --no-tokenizer -o "$BATS_TEST_TMPDIR/x.mlb" "$g"
    [[ $stderr == "gguf2mlb: $g: ML_E_FORMAT: blk.3.ffn_gate_inp.bias: required tensor is missing" ]] ||
        fail_with "$stderr"
    [[ ! -e $BATS_TEST_TMPDIR/x.mlb ]]
}

@test "gpt-oss with its own RoPE base on the windowed layers (rope.freq_base_swa): exit 4 (UNSUPPORTED), the key named, nothing written" {
    local g=$GO/bad/swa-base.gguf
    run -4 --separate-stderr gguf2mlb -q -o "$BATS_TEST_TMPDIR/x.mlb" "$g"
    [[ $stderr == "gguf2mlb: $g: ML_E_UNSUPPORTED: gpt-oss.rope.freq_base_swa (offset 25350): sliding layers with their own RoPE base and the global scaling have no .mlb form" ]] ||
        fail_with "$stderr"
    [[ ! -e $BATS_TEST_TMPDIR/x.mlb ]]
}
