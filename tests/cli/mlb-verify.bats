#!/usr/bin/env bats
# mlb-verify.bats - the OK line, standard input and pipes, -q, the deep
# checks the loader does not make (non-finite values and scales, padding,
# trailing bytes, a truncated stream), --sums manifests and --check.
# CRCs are computed independently with gzip (helpers.bash: crc32).

bats_require_minimum_version 1.5.0

load helpers

setup_file() {
    make_fixtures
}

# ---------------------------------------------------------------- OK line

@test "a valid file: 'FILE: OK, N tensors, N bytes, crc32 X' with the CRC-32 of the file" {
    run -0 --separate-stderr mlb-verify "$TINY"
    [[ -z $stderr ]]
    [[ $output == "$TINY: OK, 21 tensors, $(file_size "$TINY") bytes, crc32 $(crc32 <"$TINY")" ]]
    # The layer flags count as a tensor: 70 arrays in mlb-info's table + 1.
    run -0 --separate-stderr mlb-verify "$FULL" "$Q4"
    [[ ${lines[0]} == "$FULL: OK, 71 tensors, $(file_size "$FULL") bytes, crc32 $(crc32 <"$FULL")" ]]
    [[ ${lines[1]} == "$Q4: OK, $(mlb-info --json "$Q4" | jq '.tensors | length') tensors, "* ]]
    [[ ${#lines[@]} -eq 2 ]]
}

@test "standard input: '-' or no operand, from a pipe or a redirect" {
    local want
    want="OK, 21 tensors, $(file_size "$TINY") bytes, crc32 $(crc32 <"$TINY")"
    run -0 --separate-stderr bash -c 'cat "$1" | mlb-verify -' _ "$TINY"
    [[ $output == "(stdin): $want" ]]
    run -0 --separate-stderr bash -c 'cat "$1" | mlb-verify' _ "$TINY"
    [[ $output == "(stdin): $want" ]]
    run -0 --separate-stderr mlb-verify <"$TINY"
    [[ $output == "(stdin): $want" ]]
    # Short reads: the pipe delivers the model in pieces.
    run -0 --separate-stderr bash -c '{ head -c 1000 "$1"; sleep 0.1; tail -c +1001 "$1"; } | mlb-verify -q' _ "$TINY"
    [[ -z $output && -z $stderr ]]
}

@test "-q prints nothing on stdout; the exit status is the answer" {
    local bad="$BATS_TEST_TMPDIR/bad.mlb"
    head -c 50000 "$TINY" >"$bad"
    run -0 --separate-stderr mlb-verify -q "$TINY" "$FULL"
    [[ -z $output && -z $stderr ]]
    run -0 --separate-stderr mlb-verify --quiet --sums "$FULL"
    [[ -z $output && -z $stderr ]]
    run -1 --separate-stderr mlb-verify -q "$TINY" "$bad" "$FULL"
    [[ -z $output ]]
    # The reason still goes to stderr.
    [[ $stderr == "mlb-verify: $bad: ML_E_FORMAT: "*"the input ends here"* ]]
    run -1 --separate-stderr bash -c 'mlb-verify -q <"$1"' _ "$bad"
    [[ -z $output && $stderr == "mlb-verify: (stdin): ML_E_FORMAT: "* ]]
}

@test "several files, one invalid: the others are reported, the exit status is 1" {
    local bad="$BATS_TEST_TMPDIR/bad.mlb"
    : >"$bad"
    run -1 --separate-stderr mlb-verify "$TINY" "$bad" "$FULL"
    [[ ${#lines[@]} -eq 2 && ${lines[0]} == "$TINY: OK, "* && ${lines[1]} == "$FULL: OK, "* ]]
    [[ $stderr == "mlb-verify: $bad: ML_E_FORMAT: offset 0: empty file" ]]
    run -3 --separate-stderr mlb-verify "$BATS_TEST_TMPDIR/missing" "$bad" "$TINY"
    [[ ${#stderr_lines[@]} -eq 2 && $output == "$TINY: OK, "* ]]
}

# ---------------------------------------------------------------- deep checks
#
# Each mutation is one the loader accepts (mlb-info exits 0) and
# mlb-verify refuses: exit 1, ML_E_FORMAT, the array and the offset.

deep_reject() { # FILE EXPECTED-DETAIL
    run -0 mlb-info "$1"
    run -1 --separate-stderr mlb-verify "$1"
    [[ -z $output ]]
    [[ $stderr == "mlb-verify: $1: ML_E_FORMAT: $2" ]] || fail_with "stderr: $stderr"
}

@test "a NaN or an infinity in an F32 array" {
    local f off
    f=$(mutant "$TINY")
    off=$(($(tensor "$TINY" blk.0.attn_norm offset) + 8))
    put_f32 "$f" "$off" nan
    deep_reject "$f" "blk.0.attn_norm (offset $off): F32 value NaN is not finite"
    # lconv, the one F32 matrix (linear attention).
    f=$(mutant "$FULL")
    off=$(($(tensor "$FULL" blk.3.lconv offset) + 2044)) # its last value
    put_f32 "$f" "$off" -inf
    deep_reject "$f" "blk.3.lconv (offset $off): F32 value infinity is not finite"
    # A large finite value is fine.
    f=$(mutant "$TINY" big.mlb)
    put_f32 "$f" "$(tensor "$TINY" final_norm offset)" 3.4e38
    run -0 mlb-verify -q "$f"
}

@test "a non-finite scale, f32 or f16" {
    local f off
    f=$(mutant "$TINY")
    off=$(($(tensor "$TINY" blk.0.wq scale_offset) + 4))
    put_f32 "$f" "$off" inf
    deep_reject "$f" "blk.0.wq (offset $off): scale value infinity is not finite"
    f=$(mutant "$FULL")
    off=$(($(tensor "$FULL" blk.1.w2 scale_offset) + 6))
    patch_hex "$f" "$off" 007c # f16 infinity, little-endian
    deep_reject "$f" "blk.1.w2 (offset $off): f16 scale is not finite"
    f=$(mutant "$FULL" nan16.mlb)
    off=$(tensor "$FULL" wcls scale_offset)
    patch_hex "$f" "$off" 01fe # f16 NaN (negative)
    deep_reject "$f" "wcls (offset $off): f16 scale is not finite"
}

@test "a non-zero padding byte: after the layer flags, between arrays, after the last array" {
    local f off
    f=$(mutant "$FULL" a.mlb)
    patch_hex "$f" 300 2a # the flags end at 260, tok_emb starts at 320
    deep_reject "$f" "tok_emb (offset 300): padding byte before this array is 0x2a, must be 0"
    # q_norm's 96 bytes are followed by 32 bytes of padding before k_norm.
    f=$(mutant "$FULL" b.mlb)
    off=$(($(tensor "$FULL" blk.0.q_norm offset) + 96 + 31))
    [[ $((off + 1)) -eq $(tensor "$FULL" blk.0.k_norm offset) ]]
    patch_hex "$f" "$off" ff
    deep_reject "$f" "blk.0.k_norm (offset $off): padding byte before this array is 0xff, must be 0"
    # full ends 16 bytes short of a multiple of 64; the writer pads them.
    f=$(mutant "$FULL" c.mlb)
    off=$(($(file_size "$FULL") - 4))
    patch_hex "$f" "$off" 01
    deep_reject "$f" "offset $off: padding byte after the last array is 0x01, must be 0"
}

@test "the final padding is optional, but no byte of the last array may be missing" {
    local f="$BATS_TEST_TMPDIR/nopad.mlb" end
    end=$(mlb-info --json "$FULL" | jq '.tensors[-1] | .scale_offset + .scale_bytes')
    [[ $end -eq $(($(file_size "$FULL") - 16)) ]]
    head -c "$end" "$FULL" >"$f"
    run -0 mlb-info "$f"
    run -0 --separate-stderr mlb-verify "$f"
    [[ $output == "$f: OK, 71 tensors, $end bytes, crc32 $(crc32 <"$f")" ]]
    head -c $((end - 1)) "$FULL" >"$f"
    run -1 --separate-stderr mlb-verify "$f"
    [[ $stderr == "mlb-verify: $f: ML_E_FORMAT: wcls (offset $((end - 1))): the input ends here, 1 bytes short (truncated file)" ]]
    run -1 --separate-stderr mlb-info "$f"
    [[ $stderr == "mlb-info: $f: ML_E_FORMAT: wcls (offset "*"): array ends at byte $end but the file has $((end - 1)) bytes"* ]]
}

@test "trailing bytes after the last array and its padding" {
    local f size
    f=$(mutant "$FULL")
    size=$(file_size "$FULL")
    printf '\0' >>"$f"
    deep_reject "$f" "offset $size: trailing bytes after the last array"
    # tiny ends on a multiple of 64: any further byte is trailing, even zeros.
    f=$(mutant "$TINY")
    size=$(file_size "$TINY")
    head -c 64 /dev/zero >>"$f"
    deep_reject "$f" "offset $size: trailing bytes after the last array"
    # The same from a pipe.
    run -1 --separate-stderr bash -c 'cat "$1" "$1" | mlb-verify' _ "$TINY"
    [[ $stderr == "mlb-verify: (stdin): ML_E_FORMAT: offset $size: trailing bytes after the last array" ]]
}

@test "a truncated stream names the array where the input ended" {
    run -1 --separate-stderr bash -c 'head -c 100000 "$1" | mlb-verify' _ "$TINY"
    [[ -z $output ]]
    [[ $stderr == "mlb-verify: (stdin): ML_E_FORMAT: blk.1.w3 (offset 100000): the input ends here, "*" bytes short (truncated file)" ]]
    run -1 --separate-stderr bash -c 'head -c 100 "$1" | mlb-verify -' _ "$TINY"
    [[ $stderr == "mlb-verify: (stdin): ML_E_FORMAT: offset 0: the input has 100 bytes, fewer than the 256-byte header" ]]
    # In the layer flags.
    run -1 --separate-stderr bash -c 'head -c 257 "$1" | mlb-verify -' _ "$FULL"
    [[ $stderr == "mlb-verify: (stdin): ML_E_FORMAT: layer_flags (offset 257): the input ends here, 3 bytes short"* ]]
    # An array longer than the 1 MiB read: the count runs to the array's end.
    "$MKMODEL" -o "$BATS_TEST_TMPDIR/big.mlb" vocab=32000 dim=64 # tok_emb quants: 256 .. 2048256
    run -1 --separate-stderr bash -c 'head -c 1048000 "$1" | mlb-verify -' _ "$BATS_TEST_TMPDIR/big.mlb"
    [[ $stderr == "mlb-verify: (stdin): ML_E_FORMAT: tok_emb (offset 1048000): the input ends here, 1000256 bytes short (truncated file)" ]]
}

# ---------------------------------------------------------------- --sums

@test "--sums: 'CRC  NAME  FILE' per tensor, layer_flags included, then (file)" {
    run -0 --separate-stderr mlb-verify --sums "$FULL"
    [[ -z $stderr ]]
    local re='^[0-9a-f]{8}  [A-Za-z0-9_.()]+  (.*)$' l
    for l in "${lines[@]}"; do
        [[ $l =~ $re ]] || fail_with "bad line: $l"
        [[ ${BASH_REMATCH[1]} == "$FULL" ]]
    done
    local names want
    names=$(cut -d' ' -f3 <<<"$output")
    want=$(echo layer_flags; mlb-info --json "$FULL" | jq -r '.tensors[].name'; echo '(file)')
    [[ $names == "$want" ]] || fail_with "$(diff <(echo "$names") <(echo "$want"))"
    [[ ${#lines[@]} -eq 72 ]]
    # tiny has no layer flags.
    run -0 --separate-stderr mlb-verify -s "$TINY"
    [[ ${#lines[@]} -eq 22 && ${lines[0]} == *"  tok_emb  $TINY" ]]
}

@test "--sums: the CRCs are those of the file, the flag bytes and each tensor's arrays" {
    run -0 --separate-stderr mlb-verify --sums "$FULL"
    local -A crc
    local c name file
    while read -r c name file; do crc[$name]=$c; done <<<"$output"
    [[ ${crc['(file)']} == "$(crc32 <"$FULL")" ]]
    [[ ${crc[layer_flags]} == "$(bytes_at "$FULL" 256 4 | crc32)" ]]
    # An F32 vector: its bytes, without the padding.
    [[ ${crc[blk.0.q_norm]} == "$(bytes_at "$FULL" "$(tensor "$FULL" blk.0.q_norm offset)" 96 | crc32)" ]]
    # A matrix: its quants, then its scales.
    local t
    t=$(tensor "$FULL" blk.1.w2)
    [[ ${crc[blk.1.w2]} == "$({
        bytes_at "$FULL" "$(jq .offset <<<"$t")" "$(jq .bytes <<<"$t")"
        bytes_at "$FULL" "$(jq .scale_offset <<<"$t")" "$(jq .scale_bytes <<<"$t")"
    } | crc32)" ]]
    # The last line agrees with the OK line's CRC.
    [[ $(mlb-verify "$FULL") == *", crc32 ${crc['(file)']}" ]]
}

@test "--sums: several files in order; standard input is named -" {
    run -0 --separate-stderr mlb-verify --sums "$TINY" "$FULL"
    [[ ${#lines[@]} -eq 94 ]]
    [[ ${lines[21]} == *"  (file)  $TINY" && ${lines[22]} == *"  layer_flags  $FULL" ]]
    [[ ${lines[93]} == "$(crc32 <"$FULL")  (file)  $FULL" ]]
    run -0 --separate-stderr bash -c 'cat "$1" | mlb-verify --sums' _ "$TINY"
    [[ ${lines[21]} == "$(crc32 <"$TINY")  (file)  -" ]]
    [[ $(cut -d' ' -f1,2,3 <<<"$output") == "$(mlb-verify --sums "$TINY" | cut -d' ' -f1,2,3)" ]]
}

@test "--sums of an invalid file prints the sums read so far, then the error" {
    local f off
    f=$(mutant "$TINY")
    off=$(tensor "$TINY" blk.0.wk offset)
    patch_hex "$f" "$off" 80
    run -1 --separate-stderr mlb-verify --sums "$f"
    [[ ${#lines[@]} -eq 3 && ${lines[2]} == *"  blk.0.wq  $f" ]]
    [[ $stderr == "mlb-verify: $f: ML_E_FORMAT: blk.0.wk (offset $off): Q8_0 quant is -128"* ]]
}

# ---------------------------------------------------------------- --check

# sums_of FILE...: a manifest in $BATS_TEST_TMPDIR/sums; prints its path.
sums_of() {
    mlb-verify --sums "$@" >"$BATS_TEST_TMPDIR/sums" && echo "$BATS_TEST_TMPDIR/sums"
}

@test "--check with a matching manifest: 'FILE: OK', exit 0" {
    local sums
    sums=$(sums_of "$FULL")
    run -0 --separate-stderr mlb-verify --check "$sums"
    [[ $output == "$FULL: OK" && -z $stderr ]]
    run -0 --separate-stderr mlb-verify -c "$sums"
    [[ $output == "$FULL: OK" ]]
    sums=$(sums_of "$TINY" "$FULL")
    run -0 --separate-stderr mlb-verify --check="$sums"
    [[ $output == "$TINY: OK"$'\n'"$FULL: OK" ]]
    run -0 --separate-stderr mlb-verify -q --check "$sums"
    [[ -z $output && -z $stderr ]]
}

@test "--check: comments, blank lines, CRLF line ends and upper-case hex are accepted" {
    local sums="$BATS_TEST_TMPDIR/sums.crlf"
    {
        echo '# made by mlb-verify --sums'
        echo
        mlb-verify --sums "$TINY" | sed 's/^[0-9a-f]*/\U&/; s/$/\r/'
    } >"$sums"
    grep -q '^[0-9A-F]\{8\}  tok_emb  ' "$sums"
    [[ $(grep -c $'\r$' "$sums") -eq 22 ]]
    run -0 --separate-stderr mlb-verify --check "$sums"
    [[ $output == "$TINY: OK" ]]
}

@test "--check: the manifest from standard input (-); file names with spaces" {
    local f="$BATS_TEST_TMPDIR/my model  v2.mlb"
    cp "$TINY" "$f"
    run -0 --separate-stderr bash -c 'mlb-verify --sums "$1" | mlb-verify --check -' _ "$f"
    [[ $output == "$f: OK" && -z $stderr ]]
    cd "$BATS_TEST_TMPDIR"
    mlb-verify --sums "my model  v2.mlb" >sums
    [[ $(tail -1 sums) == "$(crc32 <"$f")  (file)  my model  v2.mlb" ]]
    run -0 --separate-stderr mlb-verify --check sums
    [[ $output == "my model  v2.mlb: OK" ]]
}

@test "--check: sums appended twice to a manifest still pass; each copy is compared" {
    local sums
    sums=$(sums_of "$TINY")
    mlb-verify --sums "$TINY" >>"$sums"
    run -0 --separate-stderr mlb-verify --check "$sums"
    [[ $output == "$TINY: OK" && -z $stderr ]]
    # The second copy of a line disagrees: that entry is reported.
    sed -i '$s/^[0-9a-f]\{8\}/00000000/' "$sums"
    run -1 --separate-stderr mlb-verify --check "$sums"
    [[ $output == "$TINY: FAILED" ]]
    [[ $stderr == "mlb-verify: $TINY: ML_E_MISMATCH: (file): crc32 $(crc32 <"$TINY"), expected 00000000" ]]
}

@test "--check: a changed CRC in the manifest: 'FILE: FAILED', exit 1, ML_E_MISMATCH names the tensor" {
    local sums real wrong
    sums=$(sums_of "$FULL")
    real=$(awk '$2 == "blk.0.wq" { print $1 }' "$sums")
    wrong=$(printf '%08x' $((0x$real ^ 0xffffffff)))
    sed -i "s/^$real  blk\.0\.wq  /$wrong  blk.0.wq  /" "$sums"
    run -1 --separate-stderr mlb-verify --check "$sums"
    [[ $output == "$FULL: FAILED" ]]
    [[ $stderr == "mlb-verify: $FULL: ML_E_MISMATCH: blk.0.wq: crc32 $real, expected $wrong" ]]
    run -1 --separate-stderr mlb-verify -q --check "$sums"
    [[ -z $output && ${#stderr_lines[@]} -eq 1 ]]
}

@test "--check: a changed byte in the model fails its tensor and the whole file" {
    local sums f off
    f="$BATS_TEST_TMPDIR/m.mlb"
    cp "$FULL" "$f"
    sums=$(sums_of "$f")
    off=$(($(tensor "$f" blk.1.w2 offset) + 10))
    [[ $(get_u32 "$f" "$off") != 0 ]] || off=$((off + 4))
    put_u32 "$f" "$off" 0x01010101
    run -1 --separate-stderr mlb-verify --check "$sums"
    [[ $output == "$f: FAILED" ]]
    [[ ${#stderr_lines[@]} -eq 2 ]]
    [[ ${stderr_lines[0]} == "mlb-verify: $f: ML_E_MISMATCH: blk.1.w2: crc32 "*", expected "* ]]
    [[ ${stderr_lines[1]} == "mlb-verify: $f: ML_E_MISMATCH: (file): crc32 $(crc32 <"$f"), expected "* ]]
}

@test "--check: a tensor missing from the manifest, or one the model lacks, fails" {
    local sums
    sums=$(sums_of "$FULL")
    sed -i '/  blk\.1\.w2  /d' "$sums"
    run -1 --separate-stderr mlb-verify --check "$sums"
    [[ $output == "$FULL: FAILED" ]]
    [[ $stderr == "mlb-verify: $FULL: ML_E_MISMATCH: blk.1.w2 is not in the sums file" ]]
    sums=$(sums_of "$FULL")
    echo "deadbeef  blk.9.wq  $FULL" >>"$sums"
    run -1 --separate-stderr mlb-verify --check "$sums"
    [[ $output == "$FULL: FAILED" ]]
    [[ $stderr == "mlb-verify: $FULL: ML_E_MISMATCH: blk.9.wq is in the sums file but not in the model" ]]
}

@test "--check: a malformed or empty manifest exits 1 with ML_E_FORMAT and the line number" {
    local sums="$BATS_TEST_TMPDIR/bad.sums" line
    for line in "deadbeef tok_emb $TINY" "deadbee  tok_emb  $TINY" "zzzzzzzz  tok_emb  $TINY" \
        "deadbeef  tok_emb" "deadbeef    $TINY" "deadbeef  tok_emb  " "OK"; do
        { mlb-verify --sums "$TINY" | head -2; echo "$line"; } >"$sums"
        run -1 --separate-stderr mlb-verify --check "$sums"
        [[ -z $output ]]
        [[ $stderr == "mlb-verify: $sums: ML_E_FORMAT: line 3: expected 'CRC32  TENSOR  FILE'" ]] ||
            fail_with "'$line': $stderr"
    done
    for line in "" "# only a comment"; do
        echo "$line" >"$sums"
        run -1 --separate-stderr mlb-verify --check "$sums"
        [[ $stderr == "mlb-verify: $sums: ML_E_FORMAT: no sums in the file" ]]
    done
}

@test "--check: a missing manifest exits 3, a missing model too" {
    run -3 --separate-stderr mlb-verify --check "$BATS_TEST_TMPDIR/nope.sums"
    [[ -z $output ]]
    [[ $stderr == "mlb-verify: $BATS_TEST_TMPDIR/nope.sums: ML_E_IO: cannot open: No such file or directory" ]]
    local sums
    sums=$(sums_of "$TINY")
    echo "00000000  (file)  $BATS_TEST_TMPDIR/gone.mlb" >>"$sums"
    run -3 --separate-stderr mlb-verify --check "$sums"
    [[ $output == "$TINY: OK"$'\n'"$BATS_TEST_TMPDIR/gone.mlb: FAILED" ]]
    [[ $stderr == "mlb-verify: $BATS_TEST_TMPDIR/gone.mlb: ML_E_IO: cannot open: "* ]]
}

@test "--check with operands against a single-file manifest (also - from a pipe)" {
    local sums copy="$BATS_TEST_TMPDIR/copy.mlb"
    sums=$(sums_of "$FULL")
    cp "$FULL" "$copy"
    run -0 --separate-stderr mlb-verify --check "$sums" "$copy"
    [[ $output == "$copy: OK" && -z $stderr ]]
    run -0 --separate-stderr bash -c 'cat "$1" | mlb-verify --check "$2" -' _ "$FULL" "$sums"
    [[ $output == "(stdin): OK" ]]
    run -0 --separate-stderr mlb-verify --check "$sums" "$copy" - <"$FULL"
    [[ $output == "$copy: OK"$'\n'"(stdin): OK" ]]
    # Another model is compared against the same sums, and fails.
    run -1 --separate-stderr mlb-verify --check "$sums" "$TINY"
    [[ $output == "$TINY: FAILED" ]]
    [[ ${stderr_lines[0]} == "mlb-verify: $TINY: ML_E_MISMATCH: tok_emb: crc32 "* ]]
}

@test "--check: a manifest made from standard input checks standard input" {
    local sums="$BATS_TEST_TMPDIR/stdin.sums"
    mlb-verify --sums <"$TINY" >"$sums"
    [[ $(tail -1 "$sums") == "$(crc32 <"$TINY")  (file)  -" ]]
    run -0 --separate-stderr mlb-verify --check "$sums" <"$TINY"
    [[ $output == "(stdin): OK" ]]
    run -1 --separate-stderr mlb-verify --check "$sums" <"$FULL"
    [[ $output == "(stdin): FAILED" ]]
}

@test "--check: with a multi-file manifest, operands must be files it names" {
    local sums
    sums=$(sums_of "$TINY" "$FULL")
    run -0 --separate-stderr mlb-verify --check "$sums" "$FULL"
    [[ $output == "$FULL: OK" ]]
    run -2 --separate-stderr mlb-verify --check "$sums" "$Q4"
    [[ -z $output ]]
    [[ ${stderr_lines[0]} == "mlb-verify: $Q4 is not named in $sums, which lists several files" ]]
    [[ ${stderr_lines[1]} == "Try 'mlb-verify --help' for more information." ]]
}

@test "--check: one file of several fails, the others are still reported" {
    local sums a="$BATS_TEST_TMPDIR/a.mlb" b="$BATS_TEST_TMPDIR/b.mlb"
    cp "$TINY" "$a"
    cp "$FULL" "$b"
    sums=$(sums_of "$a" "$b" "$TINY")
    cp "$Q4" "$a"
    run -1 --separate-stderr mlb-verify --check "$sums"
    [[ $output == "$a: FAILED"$'\n'"$b: OK"$'\n'"$TINY: OK" ]]
    [[ $stderr == *"mlb-verify: $a: ML_E_MISMATCH: "* ]]
    # A file that fails verification itself is not compared, but reported
    # FAILED like a mismatch (as sha256sum -c does).
    head -c 1000 "$FULL" >"$b"
    run -1 --separate-stderr mlb-verify --check "$sums" "$b" "$TINY"
    [[ $output == "$b: FAILED"$'\n'"$TINY: OK" ]]
    [[ $stderr == *"mlb-verify: $b: ML_E_FORMAT: "*"the input ends here"* ]]
}

@test "--sums and --check together are a usage error (exit 2)" {
    local sums
    sums=$(sums_of "$TINY")
    for args in "--sums --check $sums" "-s -c $sums" "--check $sums -s $TINY"; do
        # shellcheck disable=SC2086 # word splitting wanted
        run -2 --separate-stderr mlb-verify $args
        [[ -z $output ]]
        [[ ${stderr_lines[0]} == "mlb-verify: --sums and --check exclude each other" ]]
        [[ ${stderr_lines[1]} == "Try 'mlb-verify --help' for more information." ]]
    done
}

@test "wtype 3: the type table and block arrays are verified and summed, from a file or a pipe" {
    local m=$BATS_TEST_TMPDIR/t.mlb
    "$MKMODEL" -o "$m" --preset full --types 15,1,2,4,12,5,6,14,16,0 q8_mask=0
    run -0 --separate-stderr mlb-verify "$m"
    [[ $output == "$m: OK, 72 tensors, "* ]] || fail_with "$output"
    local from_pipe
    from_pipe=$(mlb-verify - <"$m")
    [[ ${from_pipe#(stdin): } == "${output#"$m": }" ]]
    # --sums: layer_flags, then mat_types, then the tensors; the table's
    # CRC is that of its bytes (one per matrix, after the 64-byte flags).
    run -0 --separate-stderr mlb-verify --sums "$m"
    [[ ${lines[0]} == *"  layer_flags  $m" && ${lines[1]} == *"  mat_types  $m" ]]
    local n crc
    n=$(mlb-info --json "$m" | jq '[.tensors[] | select(.shape | length == 2) | select(.name | test("lconv$") | not)] | length')
    crc=$(tail -c +321 "$m" | head -c "$n" | gzip -c | tail -c 8 | od -An -tx4 -N4 | tr -d ' ')
    [[ ${lines[1]} == "$crc  mat_types  $m" ]] || fail_with "${lines[1]}, expected $crc"
    # A bad code: the loader and the verifier name the matrix and its entry.
    printf '\x03' | dd of="$m" bs=1 seek=$((320 + 1)) conv=notrunc status=none
    run -1 --separate-stderr mlb-verify "$m"
    [[ ${stderr_lines[0]} == "mlb-verify: $m: ML_E_FORMAT: blk.0.wq (offset 321): type table entry 1 is 3, not a matrix type (0-2, 4-16)" ]] ||
        fail_with "${stderr_lines[0]}"
    run -1 --separate-stderr mlb-info "$m"
    [[ ${stderr_lines[0]} == "mlb-info: $m: ML_E_FORMAT: blk.0.wq (offset 321): type table entry 1 is 3, "* ]]
}
