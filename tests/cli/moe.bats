#!/usr/bin/env bats
# moe.bats - mixture-of-experts models through the commands (issue 40):
# the qwen3moe fixture of tests/fixtures/moe (a GGUF with llama.cpp's
# logits and greedy continuation, made by tools/make-moe-fixtures.py) is
# converted by gguf2mlb, passes mlb-verify and is described by mlb-info.  GGUFs edited from
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
