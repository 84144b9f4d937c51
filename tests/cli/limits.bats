#!/usr/bin/env bats
# limits.bats - sizes against memory.  A header that claims huge sizes
# (.mlb, .mlt, GGUF, .mli) is rejected by its rule, exit 1 with
# ML_E_FORMAT or ML_E_SHAPE, even in an address space of 200 MB (ulimit
# -v): nothing is allocated from a claimed size before it is checked
# against the file.  Real sizes beyond memory - a pipe larger than memory,
# a context whose cache does not fit - fail with ML_E_NOMEM (exit 3) and a
# message that says what did not fit.

bats_require_minimum_version 1.5.0

load helpers
load gguf2mlb
load faults

FIX="$BATS_TEST_DIRNAME/../fixtures"
VMEM=200000 # KiB for ulimit -v
L2="$BATS_FILE_TMPDIR/l2.mlt"
V384="$BATS_FILE_TMPDIR/v384.mlb"

setup_file() {
    make_fixtures
    gguf2mlb -q -o "$BATS_FILE_TMPDIR/l2.mlb" -t "$L2" "$FIX/models/llama2/llama2-q8_0.gguf"
    "$MKMODEL" -o "$V384" vocab=384
    # AddressSanitizer reserves terabytes of shadow memory at start: its
    # builds cannot run under the cap, so they run the header tests
    # uncapped (a huge allocation would still abort them) and skip the
    # tests that need the cap to bite.
    CAP_WORKS=0
    if (ulimit -v "$VMEM" && mlb-info --version) >/dev/null 2>&1; then
        CAP_WORKS=1
    fi
    export CAP_WORKS
}

# capped CMD...: CMD in an address space of $VMEM KiB (when possible).
capped() {
    (
        if [[ $CAP_WORKS == 1 ]]; then ulimit -v "$VMEM"; fi
        "$@"
    )
}

# capped_stdin FILE CMD...: the same with FILE on standard input.
capped_stdin() {
    local f=$1
    shift
    capped "$@" <"$f"
}

# need_cap: skips a test that needs the address-space cap.
need_cap() {
    [[ $CAP_WORKS == 1 ]] || skip "the commands cannot start in $VMEM KiB of address space (a sanitizer build?)"
}

@test "the cap bites: a 256 MB buffer cannot be had under it, while a model is read as usual" {
    need_cap
    # a pipe of 300 MB needs a 256 MB buffer
    run -3 --separate-stderr bash -c 'ulimit -v "$1"; head -c 300M /dev/zero 2>/dev/null | mlb-info -' _ "$VMEM"
    # (how far it gets depends on what else is mapped: 64 + 128 MiB are
    # within a few MiB of the cap)
    [[ $stderr == "mlb-info: (stdin): ML_E_NOMEM: the input does not fit in memory: "*" bytes read, a buffer of "*" cannot be allocated (give a file instead of a pipe)" ]] ||
        fail_with "$stderr"
    run -0 capped mlb-verify -q "$TINY"
}

@test ".mlb headers claiming huge sizes: exit 1 with the rule's name in mlb-info, mlb-verify (file, pipe) and ml-run" {
    local f spec field value want
    while IFS='|' read -r spec want; do
        field=${spec%=*}
        value=${spec#*=}
        f=$(mutant "$TINY" "h-$field.mlb")
        set_field "$f" "$field" "$value"
        run -1 --separate-stderr capped mlb-info "$f"
        [[ $stderr == "mlb-info: $f: $want" ]] || fail_with "$spec: $stderr"
        run -1 --separate-stderr capped ml-run -q -m "$f" --ids -p 1 -n 1
        [[ $stderr == "ml-run: $f: $want" ]] || fail_with "$spec: $stderr"
        # the stream reads in order and says where the input ended instead
        run -1 --separate-stderr capped_stdin "$f" mlb-verify -
        if [[ $want == *"array ends at byte"* ]]; then
            [[ $stderr == "mlb-verify: (stdin): ML_E_FORMAT: tok_emb (offset 121344): the input ends here, "*" bytes short (truncated file)" ]] ||
                fail_with "$spec: $stderr"
        else
            [[ $stderr == "mlb-verify: (stdin): $want" ]] || fail_with "$spec: $stderr"
        fi
    done <<'EOF'
vocab=16777216|ML_E_FORMAT: tok_emb (offset 256): array ends at byte 1207959808 but the file has 121344 bytes (truncated, or the header is wrong)
vocab=4294967295|ML_E_SHAPE: vocab (offset 28): 4294967295 is outside 3..16777216
dim=16777216|ML_E_SHAPE: dim (offset 8): 16777216 is outside 1..65536
dim=4294967264|ML_E_SHAPE: dim (offset 8): 4294967264 is outside 1..65536
n_layers=4294967295|ML_E_SHAPE: n_layers (offset 12): 4294967295 is outside 1..65536
hidden_dim=4294967264|ML_E_SHAPE: hidden_dim (offset 24): 4294967264 is outside 1..65536
n_heads=4294967295|ML_E_SHAPE: n_heads (offset 16): 4294967295 is outside 1..65536
max_seq=4294967295|ML_E_SHAPE: max_seq (offset 32): 4294967295 is outside 1..16777216
head_dim=65536|ML_E_SHAPE: head_dim (offset 80): q_dim = head_dim 65536 x n_heads 4 = 262144 must be a multiple of 32 and at most 65536
EOF
}

@test ".mlb with the most layers allowed (65536): the first array that does not fit, exit 1" {
    local f
    f=$(mutant "$TINY" h.mlb)
    set_field "$f" n_layers 65536
    run -1 --separate-stderr capped mlb-info "$f"
    [[ $stderr == "mlb-info: $f: ML_E_FORMAT: blk.2.w1 (offset 116992): array ends at byte 126208 but the file has 121344 bytes (truncated, or the header is wrong)" ]]
    # with layer flags, 65536 flag bytes are read from the arrays' bytes
    f=$(mutant "$FULL" hf.mlb)
    set_field "$f" n_layers 65536
    run -1 --separate-stderr capped mlb-info "$f"
    [[ $stderr == "mlb-info: $f: ML_E_FORMAT: layer_flags[64] (offset 320): 0xc1 has unknown bits (known: 0x1f)" ]]
    run -1 --separate-stderr capped_stdin "$f" mlb-verify
    [[ $stderr == "mlb-verify: (stdin): ML_E_FORMAT: layer_flags[64] (offset 320): 0xc1 has unknown bits (known: 0x1f)" ]]
}

@test "a valid header with max_seq 2^24: mlb-info reports the cache without allocating it" {
    "$MKMODEL" -o "$BATS_TEST_TMPDIR/c.mlb" max_seq=16777216
    run -0 --separate-stderr capped mlb-info --json --ctx 16777216 "$BATS_TEST_TMPDIR/c.mlb"
    [[ $(jq -c '.memory | [.ctx, .total_bytes, .attention.bytes]' <<<"$output") == "[16777216,8589934592,8589934592]" ]] ||
        fail_with "$(jq -c .memory <<<"$output")"
}

@test ".mlt headers claiming huge counts: exit 1 in mlt-dump (file, pipe) and ml-run -k" {
    local f spec want off value
    while IFS='|' read -r spec want; do
        off=${spec%=*}
        value=${spec#*=}
        f=$(mutant "$L2" "h$off-$value.mlt")
        put_u32 "$f" "$off" "$value"
        run -1 --separate-stderr capped mlt-dump "$f"
        [[ $stderr == "mlt-dump: $f: $want" ]] || fail_with "$spec: $stderr"
        run -1 --separate-stderr capped_stdin "$f" mlt-dump --vocab -
        [[ $stderr == "mlt-dump: (stdin): $want" ]] || fail_with "$spec: $stderr"
        run -1 --separate-stderr capped ml-run -q -m "$V384" -k "$f" -p hi -n 1
        [[ $stderr == "ml-run: $f: $want" ]] || fail_with "$spec: $stderr"
    done <<'EOF'
12=4294967295|ML_E_FORMAT: n_vocab (offset 12): 4294967295 is outside 1..16777216
12=16777216|ML_E_FORMAT: n_vocab (offset 12): 16777216 tokens need at least 83886080 bytes, the file has 3103 after the header
16=4294967295|ML_E_FORMAT: n_merges (offset 16): 4294967295 merges need 51539607540 bytes, the file has at most 1183 after the tokens
16=16777216|ML_E_FORMAT: n_merges (offset 16): 16777216 merges need 201326592 bytes, the file has at most 1183 after the tokens
EOF
}

@test "GGUF headers claiming huge counts, lengths and dimensions: exit 1 in gguf2mlb (file and pipe)" {
    local f=$BATS_TEST_TMPDIR/h.gguf want
    # each line: the bytes after "GGUF" version 3, then the expected message
    while IFS='|' read -r bytes want; do
        printf '%b' "GGUF$(le32 3)$(eval "echo \"$bytes\"")" >"$f"
        run -1 --separate-stderr capped gguf2mlb -q -o "$BATS_TEST_TMPDIR/h.mlb" "$f"
        [[ $stderr == "gguf2mlb: $f: $want" ]] || fail_with "$bytes: $stderr"
        run -1 --separate-stderr capped_stdin "$f" gguf2mlb -n -
        [[ $stderr == "gguf2mlb: (stdin): $want" ]] || fail_with "$bytes: $stderr"
    done <<'EOF'
$(le64 $((1 << 62)))$(le64 0)|ML_E_FORMAT: tensor_count (offset 8): 4611686018427387904 tensor infos cannot fit in the 0 bytes left (each takes 33 at least)
$(le64 0)$(le64 $((1 << 62)))|ML_E_FORMAT: kv_count (offset 16): 4611686018427387904 keys and 0 tensor infos cannot fit in the 0 bytes left
$(le64 0)$(le64 1)$(le64 $((1 << 40)))abcdefghijklmnopqrstuvwxyz0123456789|ML_E_FORMAT: kv[0] (offset 24): key length 1099511627776 exceeds the 36 bytes left in the file
$(le64 0)$(le64 1)$(gstr general.architecture)$(le32 8)$(le64 $((1 << 60)))|ML_E_FORMAT: general.architecture (offset 56): string length 1152921504606846976 exceeds the 0 bytes left in the file
$(le64 0)$(le64 1)$(gstr general.architecture)$(le32 9)$(le32 5)$(le64 $((1 << 60)))|ML_E_FORMAT: general.architecture (offset 60): array of 1152921504606846976 i32 needs more than the 0 bytes left in the file
$(le64 0)$(le64 1)$(gstr general.architecture)$(le32 9)$(le32 8)$(le64 $((1 << 60)))$(gstr x)|ML_E_FORMAT: general.architecture (offset 77): string needs 8 bytes but the file ends 0 bytes later (truncated?)
$(le64 1)$(le64 0)$(gstr t)$(le32 2)$(le64 $((1 << 40)))$(le64 $((1 << 40)))$(le32 0)$(le64 0)|ML_E_SHAPE: t (offset 45): dims[1] = 1099511627776 makes the element count overflow
$(le64 1)$(le64 0)$(gstr t)$(le32 1)$(le64 $((1 << 30)))$(le32 0)$(le64 0)|ML_E_FORMAT: t (offset 49): data of 4294967296 bytes at data offset 0 ends past the end of the file (57 bytes; data section at 64)
EOF
    no_output "$BATS_TEST_TMPDIR" h.mlb
}

@test ".mli headers claiming huge sizes: gguf2mlb --imatrix exits 1 naming the field" {
    local mli=$BATS_TEST_TMPDIR/m.mli g=$BATS_TEST_TMPDIR/f.gguf f spec want
    mk_gguf "$g" f16 32 1 32 32
    mk_mli "$mli" 1 32 32
    while IFS='|' read -r spec want; do
        f=$(mutant "$mli" "h${spec%=*}.mli")
        put_u32 "$f" "${spec%=*}" "${spec#*=}"
        run -1 --separate-stderr capped gguf2mlb -q --no-tokenizer --wtype q4_0 --imatrix "$f" -o "$BATS_TEST_TMPDIR/m.mlb" "$g"
        [[ $stderr == "gguf2mlb: $f: $want" ]] || fail_with "$spec: $stderr"
    done <<'EOF'
8=4294967295|ML_E_SHAPE: n_layers (offset 8): 4294967295 is outside 1..65536
8=65536|ML_E_FORMAT: offset 1320: 1320 bytes, the header implies 67109160 (40 + 8 x 8388640 sums)
12=4294967295|ML_E_SHAPE: dim (offset 12): 4294967295 is outside 1..65536
16=4294967295|ML_E_SHAPE: hidden_dim (offset 16): 4294967295 is outside 1..65536
20=4294967295|ML_E_SHAPE: q_dim (offset 20): 4294967295 is above 65536
EOF
    no_output "$BATS_TEST_TMPDIR" m.mlb
}

@test "a pipe larger than memory: ML_E_NOMEM with how far it got (exit 3); mlb-verify streams it" {
    need_cap
    local cmd
    for cmd in "mlb-info -" "mlt-dump -" "gguf2mlb -n -"; do
        run -3 --separate-stderr bash -c 'ulimit -v "$1"; head -c 300M /dev/zero | $2' _ "$VMEM" "$cmd"
        [[ $stderr == "${cmd%% *}: (stdin): ML_E_NOMEM: the input does not fit in memory: "*" bytes read, a buffer of "*" cannot be allocated (give a file instead of a pipe)" ]] ||
            fail_with "$cmd: $stderr"
    done
    # the streaming verifier holds one chunk whatever the input's size
    run -1 --separate-stderr bash -c 'ulimit -v "$1"; head -c 300M /dev/zero | mlb-verify -' _ "$VMEM"
    [[ $stderr == 'mlb-verify: (stdin): ML_E_FORMAT: magic (offset 0): "\x00\x00\x00\x00" is not "MLB1": not an .mlb model' ]]
}

@test "ml-run --ctx 10000000: above max_seq is a usage error; a cache larger than memory is ML_E_NOMEM naming it" {
    # the fixture models hold 128 positions
    run -2 --separate-stderr ml-run -q -m "$FIX/runtime/llama-q8.mlb" --ids -p 1 -n 1 --ctx 10000000
    [[ $stderr == "ml-run: $FIX/runtime/llama-q8.mlb: ML_E_INVAL: max_seq (offset 32): a context of 10000000 is above the model's 128" ]]
    # a model that allows it: 2 layers x 10M positions x (k, v) x 32 floats = 2 x 2.56 GB
    need_cap
    "$MKMODEL" -o "$BATS_TEST_TMPDIR/c.mlb" max_seq=16777216
    run -3 --separate-stderr capped ml-run -q -m "$BATS_TEST_TMPDIR/c.mlb" --ids -p 1 -n 1 --ctx 10000000
    [[ $stderr == "ml-run: $BATS_TEST_TMPDIR/c.mlb: ML_E_NOMEM: cannot allocate 2560000000 bytes for the cache of layer 0 (context 10000000); try a smaller context" ]]
    [[ -z $output ]]
    # within the cap it runs
    run -0 capped ml-run -q -m "$BATS_TEST_TMPDIR/c.mlb" --ids -p 1 -n 2 --ctx 1000 --temp 0
    [[ $output =~ ^[0-9]+\ [0-9]+$ ]]
}
