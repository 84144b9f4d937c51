#!/usr/bin/env bats
# mlb-info.bats - human output (summary, header, derived values, layers,
# memory, tensor table), --ctx, --json, standard input, several files, and
# the validation table of mlb(5) / docs/mlb-decisions.md seen through the
# command: each rule class is broken in a copy of a valid fixture.
#
# Numbers worked out by hand for the fixtures (see tests/tools/mkmodel.c):
#   tiny: dim 64, 2 layers, 4 heads, 2 kv heads, hidden 128, vocab 256,
#     max_seq 256, Q8_0 with f32 scales, no layer flags.  head_dim 64/4 = 16,
#     q_dim 64, kv_dim 32.  Parameters: tok_emb and wcls 256*64 each, per
#     layer 2*64 (norms) + 64*64*2 (wq, wo) + 32*64*2 (wk, wv) + 3*128*64,
#     final_norm 64: 106816.  KV: 2 layers * 256 positions * 32 * 2 * 4 bytes.
#   full: head_dim 24 (explicit), q_dim 96, kv_dim 48, rot_dim 12, layer
#     flags 1,2,4,8 = sliding, local RoPE, no RoPE, linear.

bats_require_minimum_version 1.5.0

load helpers

setup_file() {
    make_fixtures
}

# ---------------------------------------------------------------- human output

@test "human output: summary lines of the tiny fixture" {
    run -0 --separate-stderr mlb-info "$TINY"
    [[ -z $stderr ]]
    [[ ${lines[0]} == "$TINY" ]]
    [[ ${lines[1]} == "  format                 .mlb version 1" ]]
    [[ ${lines[2]} == "  file size              $(file_size "$TINY") bytes (118.50 KiB)" ]]
    [[ ${lines[3]} == "  weights                Q8_0, f32 scales" ]]
    # 121088 weight bytes (matrices 9 bits per weight, 320 F32 values) / 106816.
    [[ ${lines[4]} == "  parameters             106816 (0.11 M), 9.069 bits per weight" ]]
    [[ ${lines[5]} == "header" ]]
    # No tensor table without --tensors.
    [[ -z $(sed -n '/^tensors$/p' <<<"$output") ]]
}

@test "human output: the weights line names f16 scales and the Q8_0 classes" {
    run -0 --separate-stderr mlb-info "$Q4"
    [[ ${lines[3]} == "  weights                Q4_0, f16 scales, Q8_0 classes: tok_emb wcls" ]]
    run -0 --separate-stderr mlb-info "$FULL"
    [[ ${lines[3]} == "  weights                Q4_0, f16 scales, Q8_0 classes: tok_emb w2" ]]
}

@test "human output: the header section lists every field of mlb(5) in order with its value" {
    run -0 --separate-stderr mlb-info "$TINY"
    local -a names expect
    mapfile -t names < <(awk '/^[^ ]/ { s = $1; next } s == "header" { print $1 }' <<<"$output")
    for f in "${MLB_FIELDS[@]}"; do expect+=("${f%%:*}"); done
    [[ "${names[*]}" == "${expect[*]}" ]] || fail_with "fields: ${names[*]}"
    local -A given=([magic]=MLB1 [version]=1 [dim]=64 [n_layers]=2 [n_heads]=4 [n_kv_heads]=2
        [hidden_dim]=128 [vocab]=256 [max_seq]=256 [rope_theta]=10000 [norm_eps]=9.99999975e-06
        [wtype]=1)
    for name in "${expect[@]}"; do
        [[ $(section_value header "$name") == "${given[$name]:-0}" ]] ||
            fail_with "$name: $(section_value header "$name")"
    done
    # Each line: name, value, meaning.
    has_line '^  n_kv_heads {13}2 {15}key/value heads$' "${lines[@]}"
    has_line '^  norm_eps {15}9\.99999975e-06  RMSNorm epsilon$' "${lines[@]}"
}

@test "human output: derived values, rot_dim only when it differs from head_dim" {
    run -0 --separate-stderr mlb-info "$TINY"
    [[ $(section_value derived head_dim) == 16 ]]
    [[ $(section_value derived q_dim) == 64 ]]
    [[ $(section_value derived kv_dim) == 32 ]]
    [[ -z $(section_value derived rot_dim) ]]
    has_line '^derived$' "${lines[@]}"
    has_line '^  head_dim {15}16$' "${lines[@]}"
    run -0 --separate-stderr mlb-info "$FULL"
    [[ $(section_value derived head_dim) == 24 ]]
    [[ $(section_value derived q_dim) == 96 ]]
    [[ $(section_value derived kv_dim) == 48 ]]
    [[ $(section_value derived rot_dim) == 12 ]]
}

@test "human output: layers of the full preset (window, local RoPE, no RoPE, linear)" {
    run -0 --separate-stderr mlb-info "$FULL"
    local -a layers
    mapfile -t layers < <(sed -n '/^layers$/,/^memory/p' <<<"$output")
    [[ ${#layers[@]} -eq 6 ]] || fail_with "layers: ${layers[*]}"
    [[ ${layers[1]} =~ ^\ \ 0\ {22}sliding\ window\ 16,\ RoPE\ \(theta\ 1000000\),\ gated$ ]]
    [[ ${layers[2]} == "  1                      full attention, local RoPE (theta 10000), gated" ]]
    [[ ${layers[3]} == "  2                      full attention, no RoPE, gated" ]]
    [[ ${layers[4]} == "  3                      linear attention (gated delta rule)" ]]
}

@test "human output: runs of equal layers are grouped; a window without flags applies to all" {
    run -0 --separate-stderr mlb-info "$TINY"
    has_line '^  0-1 {20}full attention, RoPE \(theta 10000\)$' "${lines[@]}"
    local f="$BATS_TEST_TMPDIR/sw.mlb"
    "$MKMODEL" -o "$f" n_layers=5 sliding_window=32 --flags 1,1,0
    run -0 --separate-stderr mlb-info "$f"
    local -a layers
    mapfile -t layers < <(sed -n '/^layers$/,/^memory/p' <<<"$output")
    [[ ${layers[1]} == "  0-1                    sliding window 32, RoPE (theta 10000)" ]]
    [[ ${layers[2]} == "  2                      full attention, RoPE (theta 10000)" ]]
    [[ ${layers[3]} == "  3-4                    sliding window 32, RoPE (theta 10000)" ]]
    [[ ${layers[4]} == "memory at --ctx 256" ]]
    "$MKMODEL" -o "$f" sliding_window=64
    run -0 --separate-stderr mlb-info "$f"
    has_line '^  0-1 {20}sliding window 64, RoPE \(theta 10000\)$' "${lines[@]}"
}

memory_lines() { # the memory section of $output
    sed -n '/^memory at/,/^  KV growth/p' <<<"$output"
}

@test "human output: memory at max_seq by default, per layer kind" {
    run -0 --separate-stderr mlb-info "$TINY"
    [[ $(memory_lines) == "memory at --ctx 256
  attention              2 layers, 131072 bytes (128.00 KiB)
  KV cache and state     131072 bytes (128.00 KiB)
  KV growth              512 bytes per token of full-attention layers" ]]
    # full at 512: attention 2 * 512 * 48 * 8; sliding 16 * 48 * 8; linear
    # 4 * (4 * 16 * 16 state + 3 * 128 conv floats).
    run -0 --separate-stderr mlb-info "$FULL"
    [[ $(memory_lines) == "memory at --ctx 512
  attention              2 layers, 393216 bytes (384.00 KiB)
  sliding                1 layer, 6144 bytes (6.00 KiB)
  linear                 1 layer, 5632 bytes (5.50 KiB)
  KV cache and state     404992 bytes (395.50 KiB)
  KV growth              768 bytes per token of full-attention layers" ]]
}

@test "--cache-type f16 (-ctk, -ctv) halves the keys' or values' bytes, not linear state" {
    run -0 --separate-stderr mlb-info --cache-type f16 "$FULL"
    [[ $(memory_lines) == "memory at --ctx 512, cache f16/f16
  attention              2 layers, 196608 bytes (192.00 KiB)
  sliding                1 layer, 3072 bytes (3.00 KiB)
  linear                 1 layer, 5632 bytes (5.50 KiB)
  KV cache and state     205312 bytes (200.50 KiB)
  KV growth              384 bytes per token of full-attention layers" ]]
    run -0 --separate-stderr mlb-info -ctk f16 "$TINY"
    has_line '^memory at --ctx 256, cache f16/f32$' "${lines[@]}"
    has_line '^  KV cache and state     98304 bytes \(96.00 KiB\)$' "${lines[@]}"
    run -0 --separate-stderr mlb-info --json -ctv f16 --ctx 100 "$TINY"
    jq -e '.memory.cache_k == "f32" and .memory.cache_v == "f16" and .memory.total_bytes == 38400
           and ([.layers[].state_bytes] | add) == 38400' <<<"$output"
    run -2 --separate-stderr mlb-info --cache-type q5_0 "$TINY"
    [[ ${stderr_lines[0]} == "mlb-info: --cache-type: unknown cache type 'q5_0' (expected f32, f16, q8_0 or q4_0)" ]]
}

@test "--cache-type q8_0, q4_0: 36 and 20 bytes per 32 keys or values; refused for heads not of 32 (exit 4)" {
    local m=$BATS_TEST_TMPDIR/h32.mlb
    "$MKMODEL" -o "$m" --seed 3 head_dim=32
    run -0 --separate-stderr mlb-info --ctx 100 "$m"
    has_line '^  KV cache and state     102400 bytes \(100.00 KiB\)$' "${lines[@]}"
    run -0 --separate-stderr mlb-info --ctx 100 --cache-type q8_0 "$m"
    has_line '^memory at --ctx 100, cache q8_0/q8_0$' "${lines[@]}"
    has_line '^  KV cache and state     28800 bytes \(28.12 KiB\)$' "${lines[@]}"
    has_line '^  KV growth              288 bytes per token of full-attention layers$' "${lines[@]}"
    run -0 --separate-stderr mlb-info --json --ctx 100 -ctk q8_0 -ctv q4_0 "$m"
    jq -e '.memory.cache_k == "q8_0" and .memory.cache_v == "q4_0" and .memory.total_bytes == 22400' <<<"$output"
    run -4 --separate-stderr mlb-info -ctv q4_0 "$TINY"
    [[ ${stderr_lines[0]} == "mlb-info: $TINY: ML_E_UNSUPPORTED: --cache-type-v q4_0: head_dim: 16 (dim / n_heads) is not a multiple of 32, as the blocks of a q4_0 cache need (f16 or f32 fit it)" ]]
    [[ -z $output ]]
    "$MKMODEL" -o "$BATS_TEST_TMPDIR/h48.mlb" --seed 3 head_dim=48
    run -4 --separate-stderr mlb-info --cache-type q8_0 "$BATS_TEST_TMPDIR/h48.mlb"
    [[ ${stderr_lines[0]} == "mlb-info: $BATS_TEST_TMPDIR/h48.mlb: ML_E_UNSUPPORTED: --cache-type q8_0: head_dim (offset 80): 48 is not a multiple of 32, as the blocks of a q8_0 cache need (f16 or f32 fit it)" ]]
}

@test "--ctx changes the memory lines and is capped at max_seq" {
    run -0 --separate-stderr mlb-info --ctx 100 "$TINY"
    [[ $(memory_lines) == "memory at --ctx 100
  attention              2 layers, 51200 bytes (50.00 KiB)
  KV cache and state     51200 bytes (50.00 KiB)
  KV growth              512 bytes per token of full-attention layers" ]]
    run -0 --separate-stderr mlb-info -c 1 "$TINY"
    has_line '^  KV cache and state     512 bytes$' "${lines[@]}"
    run -0 --separate-stderr mlb-info --ctx=256 "$TINY"
    has_line '^memory at --ctx 256$' "${lines[@]}"
    run -0 --separate-stderr mlb-info --ctx 1000 "$TINY"
    has_line '^memory at --ctx 256 \(capped at max_seq\)$' "${lines[@]}"
    has_line '^  KV cache and state     131072 bytes \(128\.00 KiB\)$' "${lines[@]}"
    # Below the window, sliding layers shrink too; linear state does not.
    run -0 --separate-stderr mlb-info --ctx 8 "$FULL"
    [[ $(memory_lines) == "memory at --ctx 8
  attention              2 layers, 6144 bytes (6.00 KiB)
  sliding                1 layer, 3072 bytes (3.00 KiB)
  linear                 1 layer, 5632 bytes (5.50 KiB)
  KV cache and state     14848 bytes (14.50 KiB)
  KV growth              768 bytes per token of full-attention layers" ]]
    # The rest of the output does not depend on --ctx.
    diff <(mlb-info "$FULL" | sed '/^memory at/,/^  KV growth/d') \
        <(mlb-info --ctx 8 "$FULL" | sed '/^memory at/,/^  KV growth/d')
}

@test "--tensors: the table of the tiny fixture" {
    run -0 --separate-stderr mlb-info --tensors "$TINY"
    local -a table
    mapfile -t table < <(sed -n '/^tensors$/,$p' <<<"$output")
    [[ ${table[1]} =~ ^\ \ name\ +type\ +shape\ +offset\ +scale_offset\ +bytes$ ]]
    [[ ${#table[@]} -eq 23 ]] || fail_with "${#table[@]} lines"   # title, heading, 21 tensors
    # tok_emb: 256 + 256*64 quants = 16640, then 512 f32 scales.
    [[ ${table[2]} =~ ^\ \ tok_emb\ +Q8_0\ +\[256,\ 64\]\ +256\ +16640\ +18432$ ]]
    [[ ${table[3]} =~ ^\ \ blk\.0\.attn_norm\ +F32\ +\[64\]\ +18688\ +0\ +256$ ]]
    [[ ${table[4]} =~ ^\ \ blk\.0\.wq\ +Q8_0\ +\[64,\ 64\]\ +18944\ +23040\ +4608$ ]]
    [[ ${table[22]} =~ ^\ \ wcls\ +Q8_0\ +\[256,\ 64\]\ +[0-9]+\ +[0-9]+\ +18432$ ]]
    # -t is --tensors.
    run -0 mlb-info -t "$TINY"
    [[ $(sed -n '/^tensors$/,$p' <<<"$output") == "$(printf '%s\n' "${table[@]}")" ]]
}

@test "--tensors: every row agrees with --json; the layer flags are not a tensor" {
    local f
    for f in "$FULL" "$Q4"; do
        run -0 --separate-stderr mlb-info --tensors "$f"
        local rows want
        rows=$(sed -n '/^tensors$/,$p' <<<"$output" | tail -n +3 | sed 's/, /,/' |
            awk '{ print $1, $2, $3, $4, $5, $6 }')
        want=$(mlb-info --json "$f" | jq -r '.tensors[] |
            "\(.name) \(.type) \(.shape | map(tostring) | "[" + join(",") + "]") \(.offset) \(.scale_offset // 0) \(.bytes + (.scale_bytes // 0))"')
        [[ $rows == "$want" ]] || fail_with "$(diff <(echo "$rows") <(echo "$want"))"
        [[ $rows != *layer_flags* ]]
    done
    [[ $(wc -l <<<"$(mlb-info -t "$FULL" | sed -n '/^tensors$/,$p')") -eq 72 ]] # 70 tensors
}

# ---------------------------------------------------------------- --json

# expected_header ASSOC: the header object mlb-info --json prints, built
# from the spec's field list; fields missing from ASSOC are 0.
expected_header() {
    local -n given_=$1
    local f name out= sep=
    for f in "${MLB_FIELDS[@]}"; do
        name=${f%%:*}
        case $name in
        magic) out+="$sep\"magic\":\"MLB1\"" ;;
        version) out+="$sep\"version\":1" ;;
        *) out+="$sep\"$name\":${given_[$name]:-0}" ;;
        esac
        sep=,
    done
    echo "{$out}"
}

header_text() { # the raw header object of the JSON in $output
    grep -o '"header":{[^}]*}' <<<"$output" | sed 's/^"header"://'
}

@test "--json: valid JSON, one object per file, with size and file name" {
    run -0 --separate-stderr mlb-info --json "$TINY"
    [[ -z $stderr ]]
    [[ ${#lines[@]} -eq 1 ]]
    jq -e --arg f "$TINY" --argjson n "$(file_size "$TINY")" \
        '.file == $f and .size == $n and (.header | length) == 52 and
         (.tensors | length) == 21 and (.layers | length) == 2' <<<"$output"
    # --tensors changes nothing: the tensors are always there.
    [[ $(mlb-info --json --tensors "$TINY") == "$output" ]]
}

@test "--json: every header field by its spec name, exactly as mkmodel wrote it (tiny)" {
    run -0 --separate-stderr mlb-info --json "$TINY"
    local -A given=([dim]=64 [n_layers]=2 [n_heads]=4 [n_kv_heads]=2 [hidden_dim]=128 [vocab]=256
        [max_seq]=256 [rope_theta]=10000 [norm_eps]=9.99999975e-06 [wtype]=1)
    [[ $(header_text) == "$(expected_header given)" ]] || fail_with "$(header_text)"
}

@test "--json: every header field reads back as given to mkmodel (llama3 RoPE, biases, norms)" {
    # Values exactly representable as f32 print as given (%.9g).
    local -A given=([dim]=96 [n_layers]=3 [n_heads]=6 [n_kv_heads]=3 [hidden_dim]=160
        [vocab]=1000 [max_seq]=4096 [rope_theta]=500000 [norm_eps]=0.0009765625 [wtype]=2
        [shared_classifier]=1 [rope_type]=1 [rope_factor]=8 [rope_low_freq_factor]=1
        [rope_high_freq_factor]=4 [rope_orig_max_seq]=8192 [q8_mask]=36 [qkv_bias]=1
        [head_dim]=32 [qk_norm]=1 [embed_scale]=0.5 [attn_scale]=0.125 [attn_softcap]=20
        [rot_dim]=16)
    local -a args
    for k in "${!given[@]}"; do args+=("$k=${given[$k]}"); done
    local f="$BATS_TEST_TMPDIR/l3.mlb"
    "$MKMODEL" -o "$f" "${args[@]}"
    run -0 --separate-stderr mlb-info --json "$f"
    [[ $(header_text) == "$(expected_header given)" ]] || fail_with "$(header_text)"
    jq -e '.derived == {"head_dim":32,"q_dim":192,"kv_dim":96,"rot_dim":16,"lin_qkv":0,"lin_vd":0}' \
        <<<"$output"
    # Shared classifier: no wcls.  q8_mask 36 = w1/w3 and wq/wk stored as Q8_0.
    jq -e '[.tensors[].name] | index("wcls") == null' <<<"$output"
    jq -e '[.tensors[] | select(.name | test("\\.(wq|wk|w1|w3)$")) | .type] | unique == ["Q8_0"]' <<<"$output"
    jq -e '[.tensors[] | select(.name | test("\\.(wv|wo|w2)$|^tok_emb$")) | .type] | unique == ["Q4_0"]' <<<"$output"
}

@test "--json: the full preset's header, derived values and layers" {
    run -0 --separate-stderr mlb-info --json "$FULL"
    # The preset's values (tests/tools/mkmodel.c) as f32, printed with %.9g.
    local -A given=([dim]=64 [n_layers]=4 [n_heads]=4 [n_kv_heads]=2 [hidden_dim]=96 [vocab]=300
        [max_seq]=512 [rope_theta]=1000000 [norm_eps]=9.99999997e-07 [wtype]=2 [rope_type]=3
        [rope_factor]=4 [rope_low_freq_factor]=32 [rope_high_freq_factor]=1
        [rope_orig_max_seq]=128 [q8_mask]=65 [qkv_bias]=1 [head_dim]=24 [qk_norm]=1
        [rope_attn_factor]=1.13859999 [sliding_window]=16 [layer_flags]=1
        [rope_local_theta]=10000 [act]=1 [post_norms]=1 [embed_scale]=8 [attn_scale]=0.0625
        [scale_f16]=1 [attn_softcap]=50 [final_softcap]=30 [rot_dim]=12 [attn_gate]=1
        [lin_k_heads]=2 [lin_v_heads]=4 [lin_k_dim]=16 [lin_v_dim]=16 [lin_conv]=4)
    [[ $(header_text) == "$(expected_header given)" ]] || fail_with "$(header_text)"
    # lin_qkv = 2 * 2 * 16 + 4 * 16, lin_vd = 4 * 16.
    jq -e '.derived == {"head_dim":24,"q_dim":96,"kv_dim":48,"rot_dim":12,"lin_qkv":128,"lin_vd":64}' \
        <<<"$output"
    jq -e '[.layers[] | [.index, .flags, .kind, .rope, .window, .state_bytes]] ==
        [[0, 1, "sliding", "global", 16, 6144], [1, 2, "attention", "local", 0, 196608],
         [2, 4, "attention", "none", 0, 196608], [3, 8, "linear", "none", 0, 5632]]' <<<"$output"
    jq -e '.layers[3].description == "linear attention (gated delta rule)" and
        .layers[2].description == "full attention, no RoPE, gated"' <<<"$output"
    jq -e '.memory == {"ctx":512,"capped":false,"cache_k":"f32","cache_v":"f32","total_bytes":404992,
        "attention":{"layers":2,"bytes":393216},"sliding":{"layers":1,"bytes":6144},
        "linear":{"layers":1,"bytes":5632}}' <<<"$output"
    # Parameters: the elements of every tensor; weight bytes: every array.
    jq -e '.parameters == 205096 and
        .parameters == ([.tensors[].shape | .[0] * (.[1] // 1)] | add) and
        .weight_bytes == ([.tensors[] | .bytes + (.scale_bytes // 0)] | add) and
        (.bits_per_weight - 8 * .weight_bytes / .parameters | fabs) < 0.000001' <<<"$output"
}

@test "--json: --ctx sets memory.ctx, capped at max_seq" {
    run -0 --separate-stderr mlb-info --json --ctx 8 "$FULL"
    jq -e '.memory == {"ctx":8,"capped":false,"cache_k":"f32","cache_v":"f32","total_bytes":14848,
        "attention":{"layers":2,"bytes":6144},"sliding":{"layers":1,"bytes":3072},
        "linear":{"layers":1,"bytes":5632}}' <<<"$output"
    jq -e '[.layers[].state_bytes] == [3072, 3072, 3072, 5632]' <<<"$output"
    run -0 --separate-stderr mlb-info --json --ctx 100000 "$FULL"
    jq -e '.memory.ctx == 512 and .memory.capped == true and .memory.total_bytes == 404992' <<<"$output"
}

@test "--json: tensors with name, type, shape, offset, bytes and scales" {
    run -0 --separate-stderr mlb-info --json "$TINY"
    jq -e '.tensors[2] == {"name":"blk.0.wq","type":"Q8_0","shape":[64,64],"offset":18944,
        "bytes":4096,"scale_offset":23040,"scale_bytes":512}' <<<"$output"
    jq -e '.tensors[1] == {"name":"blk.0.attn_norm","type":"F32","shape":[64],"offset":18688,"bytes":256}' \
        <<<"$output"
    jq -e '[.tensors[].name] == ["tok_emb",
        "blk.0.attn_norm","blk.0.wq","blk.0.wk","blk.0.wv","blk.0.wo","blk.0.ffn_norm","blk.0.w1","blk.0.w2","blk.0.w3",
        "blk.1.attn_norm","blk.1.wq","blk.1.wk","blk.1.wv","blk.1.wo","blk.1.ffn_norm","blk.1.w1","blk.1.w2","blk.1.w3",
        "final_norm","wcls"]' <<<"$output"
    run -0 --separate-stderr mlb-info --json "$FULL"
    # f16 scales: 2 bytes per block of 32.
    jq -e '.tensors[] | select(.name == "blk.3.lconv") == {"name":"blk.3.lconv","type":"F32",
        "shape":[128,4],"offset":116480,"bytes":2048}' <<<"$output"
    jq -e 'all(.tensors[] | select(.type != "F32"); .scale_bytes == (.shape[0] * .shape[1] / 32 * 2))' \
        <<<"$output"
    # Q8_0: tok_emb and w2 (q8_mask 0x41), lb and la always; the rest Q4_0.
    jq -e '[.tensors[] | select(.type == "Q8_0") | .name | sub("blk\\.[0-9]+\\."; "")] | unique ==
        ["la","lb","tok_emb","w2"]' <<<"$output"
}

@test "--json: the layout is contiguous, 64-byte aligned, and ends at the file size" {
    local f
    for f in "$TINY" "$FULL" "$Q4"; do
        run -0 --separate-stderr mlb-info --json "$f"
        # Arrays in order: after the header (and the flag bytes), each one
        # at the next multiple of 64 after the previous one; the file ends
        # at the multiple of 64 after the last one.
        jq -e 'def up: ((. + 63) / 64 | floor) * 64;
            .header.layer_flags as $lf | .header.n_layers as $nl |
            reduce (.tensors[] | [.offset, .bytes], (select(.scale_offset) | [.scale_offset, .scale_bytes])) as $a
                ({ok: true, next: (256 + (if $lf == 1 then $nl else 0 end) | up)};
                 {ok: (.ok and $a[0] == .next), next: ($a[0] + $a[1] | up)}) |
            .ok' <<<"$output" || fail_with "$f: layout"
        jq -e 'def up: ((. + 63) / 64 | floor) * 64;
            .size == (.tensors[-1] | (.scale_offset // .offset) + (.scale_bytes // .bytes) | up)' \
            <<<"$output"
    done
}

@test "--json: float fields print the exact f32 value (%.9g)" {
    run -0 --separate-stderr mlb-info --json "$TINY"
    [[ $output == *'"rope_theta":10000,"norm_eps":9.99999975e-06,'* ]]
    local f
    f=$(mutant "$TINY")
    set_field "$f" norm_eps 0.1
    set_field "$f" embed_scale 0.5
    set_field "$f" attn_scale 0.001
    set_field "$f" final_softcap 3.4e38
    set_field "$f" rope_theta 0x00000001 # the smallest subnormal is > 0
    run -0 --separate-stderr mlb-info --json "$f"
    [[ $output == *'"norm_eps":0.100000001,'* ]]
    [[ $output == *'"embed_scale":0.5,"attn_scale":0.00100000005,'* ]]
    [[ $output == *'"final_softcap":3.39999995e+38,'* ]]
    [[ $output == *'"rope_theta":1.40129846e-45,'* ]]
    jq -e '.header.embed_scale == 0.5' <<<"$output"
    run -0 --separate-stderr mlb-info "$f"
    [[ $(section_value header norm_eps) == 0.100000001 ]]
}

@test "--json: several files give one object each, in order" {
    run -0 --separate-stderr mlb-info --json "$TINY" "$FULL" "$Q4" "$TINY"
    [[ ${#lines[@]} -eq 4 ]]
    jq -e -s --arg a "$TINY" --arg b "$FULL" --arg c "$Q4" \
        'map(.file) == [$a, $b, $c, $a] and .[0] == .[3]' <<<"$output"
    for i in 0 1 2 3; do jq -e . <<<"${lines[$i]}" >/dev/null; done
}

@test "--json: file names are escaped (quotes, backslashes, control bytes, invalid UTF-8)" {
    local name=$'we"ird\\name\tx\001\xff\xc3\xa9.mlb'
    cp "$TINY" "$BATS_TEST_TMPDIR/$name"
    cd "$BATS_TEST_TMPDIR"
    run -0 --separate-stderr mlb-info --json "$name"
    [[ $output == '{"file":"we\"ird\\name\tx\u0001\ufffdé.mlb",'* ]]
    jq -e --arg n $'we"ird\\name\tx\001\xef\xbf\xbd\xc3\xa9.mlb' '.file == $n' <<<"$output"
}

@test "standard input: '-' from a redirect and from a pipe, named (stdin)" {
    local want
    want=$(mlb-info --json "$TINY" | jq -c 'del(.file)')
    run -0 --separate-stderr mlb-info --json - <"$TINY"
    jq -e '.file == "(stdin)"' <<<"$output"
    [[ $(jq -c 'del(.file)' <<<"$output") == "$want" ]]
    run -0 --separate-stderr bash -c 'cat "$1" | mlb-info --json -' _ "$TINY"
    jq -e '.file == "(stdin)"' <<<"$output"
    [[ $(jq -c 'del(.file)' <<<"$output") == "$want" ]]
    run -0 --separate-stderr bash -c 'cat "$1" | mlb-info --tensors -' _ "$FULL"
    [[ ${lines[0]} == "(stdin)" ]]
    [[ $(tail -n +2 <<<"$output") == "$(mlb-info --tensors "$FULL" | tail -n +2)" ]]
}

@test "an invalid file among valid ones: the others are printed, the exit status is 1" {
    local bad="$BATS_TEST_TMPDIR/bad.mlb"
    head -c 100 "$TINY" >"$bad"
    run -1 --separate-stderr mlb-info --json "$TINY" "$bad" "$FULL"
    [[ ${#lines[@]} -eq 2 ]]
    jq -e -s --arg a "$TINY" --arg b "$FULL" 'map(.file) == [$a, $b]' <<<"$output"
    [[ ${#stderr_lines[@]} -eq 1 ]]
    [[ $stderr == "mlb-info: $bad: ML_E_FORMAT: "* ]]
    # In the merged stream the error comes between the two outputs.
    run -1 mlb-info "$TINY" "$bad" "$FULL"
    local i
    for i in "${!lines[@]}"; do [[ ${lines[$i]} == "mlb-info: $bad: "* ]] && break; done
    [[ ${lines[$((i - 1))]} == "  KV growth "* && ${lines[$((i + 1))]} == "$FULL" ]]
}

@test "several failures: the exit status is the first one's" {
    local empty="$BATS_TEST_TMPDIR/empty"
    : >"$empty"
    run -3 --separate-stderr mlb-info "$BATS_TEST_TMPDIR/missing" "$empty" "$TINY"
    [[ ${#stderr_lines[@]} -eq 2 && ${lines[0]} == "$TINY" ]]
    run -1 --separate-stderr mlb-info "$empty" "$BATS_TEST_TMPDIR/missing" "$TINY"
    [[ ${#stderr_lines[@]} -eq 2 && ${lines[0]} == "$TINY" ]]
}

# ---------------------------------------------------------------- validation table
#
# rejects FILE CODE PREFIX: mlb-info and mlb-verify both exit 1 with
# nothing on stdout and the single line "CMD: FILE: CODE: PREFIX...";
# header and flag rules give both commands the same line.

rejects() {
    local f=$1 code=$2 prefix=$3 cmd line first=
    for cmd in mlb-info mlb-verify; do
        run -1 --separate-stderr "$cmd" "$f"
        [[ -z $output ]] || fail_with "$cmd: stdout: $output"
        [[ ${#stderr_lines[@]} -eq 1 ]] || fail_with "$cmd: stderr: $stderr"
        line=${stderr_lines[0]}
        [[ $line == "$cmd: $f: $code: $prefix"* ]] || fail_with "$cmd: $line"
        if [[ -z $first ]]; then
            first=${line#mlb-info: }
        elif [[ ${line#mlb-verify: } != "$first" ]]; then
            fail_with "mlb-verify: $line differs from mlb-info: $first"
        fi
    done
}

# mutate SRC FIELD=VALUE...: a copy of SRC with header fields changed; prints its path.
mutate() {
    local f kv
    f=$(mutant "$1" "m$RANDOM.mlb")
    shift
    for kv in "$@"; do set_field "$f" "${kv%%=*}" "${kv#*=}"; done
    echo "$f"
}

accepts() { # FILE: both commands accept it
    run -0 mlb-info "$1"
    run -0 mlb-verify -q "$1"
}

@test "rule 1-2: magic of an unknown generation, or unknown bytes (FORMAT)" {
    rejects "$(mutate "$TINY" magic=4d4c4232)" ML_E_FORMAT \
        'magic (offset 0): "MLB2" is not "MLB1": an .mlb magic of an unknown generation'
    rejects "$(mutate "$TINY" magic=00010203)" ML_E_FORMAT \
        'magic (offset 0): "\x00\x01\x02\x03" is not "MLB1": not an .mlb model'
}

@test "rule 3: version other than 1 (FORMAT)" {
    rejects "$(mutate "$TINY" version=2)" ML_E_FORMAT 'version (offset 4): 2 is not 1'
    rejects "$(mutate "$TINY" version=0)" ML_E_FORMAT 'version (offset 4): 0 is not 1'
}

@test "rule 4: wtype other than 1, 2 or 3 (FORMAT)" {
    rejects "$(mutate "$TINY" wtype=4)" ML_E_FORMAT 'wtype (offset 44): unknown weight type 4'
    rejects "$(mutate "$TINY" wtype=0)" ML_E_FORMAT 'wtype (offset 44): unknown weight type 0'
    # wtype 3 reads a type table where tok_emb's quants are: their first
    # byte is no type code.
    rejects "$(mutate "$TINY" wtype=3)" ML_E_FORMAT \
        'tok_emb (offset 256): type table entry 0 is '
}

@test "rule 5: q8_mask above 127, or set in a Q8_0 model (FORMAT)" {
    rejects "$(mutate "$Q4" q8_mask=0x83)" ML_E_FORMAT 'q8_mask (offset 72): 0x83 has bits above 64'
    rejects "$(mutate "$TINY" q8_mask=1)" ML_E_FORMAT 'q8_mask (offset 72): 0x1 in a Q8_0 model (must be 0)'
}

@test "rule 6: the 0/1 fields (FORMAT), each one" {
    local name
    for name in qkv_bias qk_norm layer_flags post_norms scale_f16 attn_gate; do
        rejects "$(mutate "$TINY" "$name=2")" ML_E_FORMAT "$name (offset $(field_offset "$name")): 2 is not 0 or 1"
    done
}

@test "rule 7: act other than 0, 1 or 2 (FORMAT)" {
    rejects "$(mutate "$TINY" act=3)" ML_E_FORMAT 'act (offset 104): unknown activation 3'
}

@test "rule 8: sliding_window above 2^24 (FORMAT); 2^24 itself is accepted" {
    rejects "$(mutate "$TINY" sliding_window=16777217)" ML_E_FORMAT \
        'sliding_window (offset 92): 16777217 is above 2^24'
    accepts "$(mutate "$TINY" sliding_window=16777216)"
}

@test "rule 9: header floats must be finite, rope_theta > 0, the others >= 0 (FORMAT)" {
    rejects "$(mutate "$TINY" rope_theta=0)" ML_E_FORMAT 'rope_theta (offset 36): 0 must be finite and > 0'
    rejects "$(mutate "$TINY" rope_theta=nan)" ML_E_FORMAT 'rope_theta (offset 36): nan must be finite'
    rejects "$(mutate "$TINY" norm_eps=-1)" ML_E_FORMAT 'norm_eps (offset 40): -1 must be finite and >= 0'
    rejects "$(mutate "$TINY" embed_scale=inf)" ML_E_FORMAT 'embed_scale (offset 112): inf must be finite'
    rejects "$(mutate "$TINY" final_softcap=-0.5)" ML_E_FORMAT 'final_softcap (offset 128): -0.5 must be'
    accepts "$(mutate "$TINY" norm_eps=0 attn_softcap=0.5)"
}

@test "rule 10: RoPE scaling parameters per rope_type (FORMAT)" {
    rejects "$(mutate "$TINY" rope_factor=2)" ML_E_FORMAT \
        'rope_factor (offset 56): 2 with plain RoPE (must be 0)'
    rejects "$(mutate "$TINY" rope_type=4)" ML_E_FORMAT 'rope_type (offset 52): unknown RoPE type 4'
    rejects "$(mutate "$TINY" rope_attn_factor=1)" ML_E_FORMAT \
        'rope_attn_factor (offset 88): 1 without yarn scaling (must be 0)'
    rejects "$(mutate "$TINY" rope_attn_factor=-0)" ML_E_FORMAT 'rope_attn_factor (offset 88): -0 without yarn'
    # llama3: high > low.
    rejects "$(mutate "$TINY" rope_type=1 rope_factor=8 rope_low_freq_factor=4 rope_high_freq_factor=4 \
        rope_orig_max_seq=8192)" ML_E_FORMAT 'rope_high_freq_factor (offset 64): llama3: 4 must be'
    accepts "$(mutate "$TINY" rope_type=1 rope_factor=8 rope_low_freq_factor=1 rope_high_freq_factor=4 \
        rope_orig_max_seq=8192)"
    # linear: rope_factor only.
    accepts "$(mutate "$TINY" rope_type=2 rope_factor=2)"
    rejects "$(mutate "$TINY" rope_type=2 rope_factor=2 rope_orig_max_seq=5)" ML_E_FORMAT \
        'rope_orig_max_seq (offset 68): 5 with linear RoPE (must be 0)'
    # yarn (the full preset): beta_fast (offset 60) must exceed beta_slow (64).
    rejects "$(mutate "$FULL" rope_low_freq_factor=0.5)" ML_E_FORMAT \
        'rope_low_freq_factor (offset 60): yarn beta_fast: 0.5 must be finite and > beta_slow 1'
    rejects "$(mutate "$FULL" rope_attn_factor=0)" ML_E_FORMAT 'rope_attn_factor (offset 88): yarn: 0 must be'
}

@test "pooling (offset 160): 0 to 3 read and printed, another value refused (FORMAT)" {
    local f
    f=$(mutate "$TINY" pooling=3)
    run mlb-info --json "$f"
    [[ $status == 0 ]]
    jq -e '.header.pooling == 3' <<<"$output"
    rejects "$(mutate "$TINY" pooling=4)" ML_E_FORMAT \
        'pooling (offset 160): unknown pooling 4 (0 unstated, 1 mean, 2 CLS, 3 last)'
}

@test "rule 11: reserved header bytes 208-255 must be zero (FORMAT)" {
    local f
    f=$(mutant "$TINY" t0.mlb)
    patch_hex "$f" 208 01
    rejects "$f" ML_E_FORMAT 'reserved (offset 208): header byte is 0x01, must be 0'
    f=$(mutant "$TINY")
    patch_hex "$f" 230 2a
    rejects "$f" ML_E_FORMAT 'reserved (offset 230): header byte is 0x2a, must be 0'
    f=$(mutant "$TINY" t2.mlb)
    patch_hex "$f" 255 01
    rejects "$f" ML_E_FORMAT 'reserved (offset 255): '
}

@test "mixtures of experts (offsets 164-207): shapes (SHAPE), gating, flags and the clamped SwiGLU (FORMAT)" {
    rejects "$(mutate "$TINY" n_experts_used=2)" ML_E_SHAPE \
        'n_experts (offset 164): 0 (no experts) but offsets 168-191 are not zero'
    rejects "$(mutate "$TINY" n_experts=8)" ML_E_SHAPE 'n_experts_used (offset 168): 0 is outside 1..8'
    rejects "$(mutate "$TINY" n_experts=1025 n_experts_used=1 expert_hidden_dim=32)" ML_E_SHAPE \
        'n_experts (offset 164): 1025 is outside 1..1024'
    rejects "$(mutate "$TINY" n_experts=8 n_experts_used=2 expert_hidden_dim=48)" ML_E_SHAPE \
        'expert_hidden_dim (offset 172): 48 is not a multiple of 32'
    rejects "$(mutate "$TINY" n_experts=8 n_experts_used=2 expert_hidden_dim=32 moe_gating=3)" \
        ML_E_FORMAT 'moe_gating (offset 176): unknown gating 3'
    rejects "$(mutate "$TINY" n_experts=8 n_experts_used=2 expert_hidden_dim=32 moe_flags=16)" \
        ML_E_FORMAT 'moe_flags (offset 180): 0x10: a shared gate (16) without a shared expert'
    rejects "$(mutate "$TINY" act=2)" ML_E_FORMAT 'swiglu_alpha (offset 192): act 2: 0 must be finite and > 0'
    rejects "$(mutate "$TINY" swiglu_limit=7)" ML_E_FORMAT 'swiglu_limit (offset 196): 7 without act 2 (must be 0)'
    rejects "$(mutate "$TINY" attn_sinks=2)" ML_E_FORMAT 'attn_sinks (offset 200): 2 is not 0 or 1'
    rejects "$(mutate "$TINY" n_experts=8 n_experts_used=2 expert_hidden_dim=32 expert_scale=-1)" \
        ML_E_FORMAT 'expert_scale (offset 184): -1 must be finite and >= 0'
}

@test "rule 12: dimensions (SHAPE), n_kv_heads=3 among them" {
    rejects "$(mutate "$TINY" n_kv_heads=3)" ML_E_SHAPE 'n_kv_heads (offset 20): 3 does not divide n_heads 4'
    rejects "$(mutate "$TINY" dim=0)" ML_E_SHAPE 'dim (offset 8): 0 is outside 1..65536'
    rejects "$(mutate "$TINY" n_layers=65537)" ML_E_SHAPE 'n_layers (offset 12): 65537 is outside 1..65536'
    rejects "$(mutate "$TINY" vocab=2)" ML_E_SHAPE 'vocab (offset 28): 2 is outside 3..16777216'
    rejects "$(mutate "$TINY" max_seq=0)" ML_E_SHAPE 'max_seq (offset 32): 0 is outside 1..16777216'
    rejects "$(mutate "$TINY" dim=80)" ML_E_SHAPE 'dim (offset 8): 80 is not a multiple of 32'
    rejects "$(mutate "$TINY" hidden_dim=100)" ML_E_SHAPE 'hidden_dim (offset 24): 100 is not a multiple of 32'
    rejects "$(mutate "$TINY" n_heads=3 n_kv_heads=1)" ML_E_SHAPE \
        'n_heads (offset 16): 3 does not divide dim 64 (and head_dim is 0)'
    rejects "$(mutate "$TINY" head_dim=15)" ML_E_SHAPE 'head_dim (offset 80): head size 15 is odd'
    rejects "$(mutate "$TINY" head_dim=10)" ML_E_SHAPE 'head_dim (offset 80): q_dim = head_dim 10 x n_heads 4 = 40'
    rejects "$(mutate "$TINY" rot_dim=3)" ML_E_SHAPE 'rot_dim (offset 132): 3 must be even and at most head_dim 16'
    rejects "$(mutate "$TINY" rot_dim=18)" ML_E_SHAPE 'rot_dim (offset 132): 18 must be even'
}

@test "rule 13: linear attention fields (SHAPE)" {
    rejects "$(mutate "$TINY" lin_conv=4)" ML_E_SHAPE \
        'lin_k_heads (offset 140): 0 (no linear attention) but offsets 144-159 are not zero'
    rejects "$(mutate "$FULL" lin_v_heads=6)" ML_E_SHAPE \
        'lin_v_heads (offset 144): 6 must be a multiple of lin_k_heads 2 and of 4'
    rejects "$(mutate "$FULL" lin_conv=257)" ML_E_SHAPE 'lin_conv (offset 156): 257 is outside 1..256'
    rejects "$(mutate "$FULL" lin_v_dim=12)" ML_E_SHAPE \
        'lin_v_dim (offset 152): lin_v_heads x lin_v_dim = 48 must be a multiple of 32'
}

@test "rule 14: layer flag bytes (FORMAT, offset 256 + layer)" {
    local f
    f=$(mutant "$FULL" f1.mlb)
    patch_hex "$f" 258 20
    rejects "$f" ML_E_FORMAT 'layer_flags[2] (offset 258): 0x20 has unknown bits (known: 0x1f)'
    f=$(mutant "$FULL" f0.mlb)
    patch_hex "$f" 258 10
    rejects "$f" ML_E_FORMAT 'layer_flags[2] (offset 258): experts (bit 4) but n_experts is 0'
    f=$(mutant "$FULL" f2.mlb)
    patch_hex "$f" 257 06
    rejects "$f" ML_E_FORMAT 'layer_flags[1] (offset 257): 0x06 combines local RoPE (bit 1) with no RoPE (bit 2)'
    f=$(mutant "$FULL" f3.mlb)
    patch_hex "$f" 259 09
    rejects "$f" ML_E_FORMAT 'layer_flags[3] (offset 259): 0x09 combines linear attention (bit 3) with bits other than experts (bit 4)'
    rejects "$(mutate "$FULL" rope_local_theta=0)" ML_E_FORMAT \
        'layer_flags[1] (offset 257): local RoPE (bit 1) but rope_local_theta is 0'
    rejects "$(mutate "$FULL" sliding_window=0)" ML_E_FORMAT \
        'layer_flags[0] (offset 256): sliding window (bit 0) but sliding_window is 0'
    rejects "$(mutate "$FULL" lin_k_heads=0 lin_v_heads=0 lin_k_dim=0 lin_v_dim=0 lin_conv=0)" \
        ML_E_FORMAT 'layer_flags[3] (offset 259): linear attention (bit 3) but lin_k_heads is 0'
}

@test "rule 14: flag bytes cut off by the end of the file (FORMAT)" {
    local f="$BATS_TEST_TMPDIR/cut.mlb"
    head -c 258 "$FULL" >"$f"
    run -1 --separate-stderr mlb-info "$f"
    [[ $stderr == "mlb-info: $f: ML_E_FORMAT: layer_flags (offset 256): 4 flag bytes do not fit in the file's 258 bytes" ]]
    run -1 --separate-stderr mlb-verify "$f"
    [[ $stderr == "mlb-verify: $f: ML_E_FORMAT: layer_flags (offset 258): the input ends here, 2 bytes short"* ]]
}

@test "rule 15: a truncated file names the first array that does not fit (FORMAT)" {
    local f="$BATS_TEST_TMPDIR/trunc.mlb"
    head -c 20000 "$TINY" >"$f"
    run -1 --separate-stderr mlb-info "$f"
    [[ $stderr == "mlb-info: $f: ML_E_FORMAT: blk.0.wq (offset 18944): array ends at byte 23552 but the file has 20000 bytes"* ]]
    run -1 --separate-stderr mlb-verify "$f"
    [[ $stderr == "mlb-verify: $f: ML_E_FORMAT: blk.0.wq (offset 20000): the input ends here, 3040 bytes short"* ]]
    # A header that implies more arrays than the file holds: the same rule.
    f=$(mutate "$TINY" n_layers=3)
    run -1 --separate-stderr mlb-info "$f"
    [[ $stderr == "mlb-info: $f: ML_E_FORMAT: blk.2.w1 (offset 116992): array ends at byte 126208 but the file has 121344 bytes (truncated, or the header is wrong)" ]]
}

@test "rule 15: a Q8_0 quant of -128 names the tensor, row, column and offset (FORMAT)" {
    local f off
    f=$(mutant "$TINY")
    off=$(($(tensor "$TINY" blk.0.wv offset) + 64 + 3)) # row 1, column 3
    patch_hex "$f" "$off" 80
    run -1 --separate-stderr mlb-info "$f"
    [[ $stderr == "mlb-info: $f: ML_E_FORMAT: blk.0.wv (offset $off): Q8_0 quant of row 1, column 3 is -128 (quants must be in [-127, 127])" ]]
    run -1 --separate-stderr mlb-verify "$f"
    [[ $stderr == "mlb-verify: $f: ML_E_FORMAT: blk.0.wv (offset $off): Q8_0 quant is -128"* ]]
    # In the Q8_0 classes of a Q4_0 model too (lb is always Q8_0).
    f=$(mutant "$FULL")
    off=$(($(tensor "$FULL" blk.3.lb offset) + 64)) # row 1, column 0
    patch_hex "$f" "$off" 80
    run -1 --separate-stderr mlb-info "$f"
    [[ $stderr == *": ML_E_FORMAT: blk.3.lb (offset $off): Q8_0 quant of row 1, column 0 is -128"* ]]
    # 0x80 in Q4_0 quants is two nibbles, not a -128.
    f=$(mutant "$FULL" q4.mlb)
    patch_hex "$f" "$(tensor "$FULL" blk.0.wq offset)" 80
    accepts "$f"
}

@test "wtype 3: the weights line, the types line, bits per weight per tensor (text and --json)" {
    local m=$BATS_TEST_TMPDIR/k.mlb
    gguf2mlb -f -q --no-tokenizer "$BATS_TEST_DIRNAME/../fixtures/models/llama2/llama2-q4_k_m.gguf" -o "$m"
    run -0 --separate-stderr mlb-info --tensors "$m"
    [[ ${lines[3]} == "  weights                per-matrix types (type table), f16 scales" ]]
    [[ ${lines[4]} == "  types                  Q4_K 13, F32 5, Q6_K 3" ]]
    [[ ${lines[5]} == "  parameters             984320 (0.98 M), 4.948 bits per weight" ]]
    has_line '^  name +type +shape +offset +scale_offset +bytes +bpw$' "${lines[@]}"
    has_line '^  tok_emb +Q4_K +\[384, 256\] +320 +0 +55296 +4\.5$' "${lines[@]}"
    has_line '^  wcls +Q6_K +\[384, 256\] +[0-9]+ +0 +80640 +6\.562$' "${lines[@]}"
    has_line '^  final_norm +F32 +\[256\] +[0-9]+ +0 +1024 +32$' "${lines[@]}"
    run -0 --separate-stderr mlb-info --json "$m"
    jq -e '.header.wtype == 3 and .types == {"Q4_K": 13, "F32": 5, "Q6_K": 3} and
        (.tensors[0] | .name == "tok_emb" and .type == "Q4_K" and .bits_per_weight == 4.5 and
            has("scale_offset") == false) and
        ([.tensors[] | select(.type == "Q6_K")] | length) == 3' <<<"$output"
}
