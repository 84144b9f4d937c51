#!/usr/bin/env bats
# common.bats - what every command shares (cmd/common/cli.c): --help and
# --version, usage errors (exit 2), the error line "PROG: FILE: ML_E_NAME:
# detail", exit statuses for missing, unreadable and invalid input, and
# stdout discipline (/dev/full, a reader that goes away).

bats_require_minimum_version 1.5.0

load helpers

setup_file() {
    make_fixtures
    # Large enough that its --tensors table (~300 KiB) overflows any pipe buffer.
    "$MKMODEL" -o "$BATS_FILE_TMPDIR/big.mlb" dim=32 n_layers=400 n_heads=1 n_kv_heads=1 \
        hidden_dim=32 vocab=3 max_seq=16
}

CMDS=(mlb-info mlb-verify)

# ---------------------------------------------------------------- help

check_help() { # CMD OPTION...
    local cmd=$1
    shift
    run -0 --separate-stderr "$cmd" "$@"
    [[ ${lines[0]} == "Usage: $cmd "* ]] || fail_with "first line: ${lines[0]}"
    has_line '^  -h, --help +print this help and exit$' "${lines[@]}"
    has_line '^  -V, --version +print the version and exit$' "${lines[@]}"
    has_line '^Exit status: 0 success, 1 invalid input' "${lines[@]}"
    [[ -z $stderr ]]
}

@test "mlb-info --help and -h: usage with every option on stdout, exit 0" {
    for opt in --help -h; do
        check_help mlb-info "$opt"
        [[ ${lines[0]} == "Usage: mlb-info [options] FILE..." ]]
        has_line '^  -t, --tensors +also print the tensor table$' "${lines[@]}"
        has_line '^  -j, --json +print one JSON object' "${lines[@]}"
        has_line '^  -c, --ctx N +context length' "${lines[@]}"
    done
}

@test "mlb-verify --help and -h: usage with every option on stdout, exit 0" {
    for opt in --help -h; do
        check_help mlb-verify "$opt"
        [[ ${lines[0]} == "Usage: mlb-verify [options] [FILE|-]..." ]]
        has_line '^  -q, --quiet +print nothing on stdout' "${lines[@]}"
        has_line '^  -s, --sums +print a CRC-32' "${lines[@]}"
        has_line '^  -c, --check SUMFILE +verify files' "${lines[@]}"
        has_line '^Sums lines read: CRC32 \(8 hex digits\)' "${lines[@]}"
    done
}

@test "--help wins over operands and later options, wherever it stands" {
    for cmd in "${CMDS[@]}"; do
        # Operands are not opened: a missing file would exit 3.
        check_help "$cmd" "$BATS_TEST_TMPDIR/missing.mlb" --help
        check_help "$cmd" --help "$BATS_TEST_TMPDIR/missing.mlb"
        # Options are handled in order: --help before a bad one still exits 0.
        check_help "$cmd" --help --frob
        check_help "$cmd" -h --check
    done
    check_help mlb-info --ctx 5 --json --help
    check_help mlb-verify -q --help
}

@test "--help wins over a usage error anywhere before --" {
    run -0 --separate-stderr mlb-info --frob --help
    [[ ${lines[0]} == "Usage: mlb-info "* && -z $stderr ]]
    run -0 --separate-stderr mlb-info --ctx x --help
    [[ ${lines[0]} == "Usage: mlb-info "* && -z $stderr ]]
    # After "--", --help is an operand (a file name).
    run -3 --separate-stderr mlb-info -- --help
    [[ -z $output && ${stderr_lines[0]} == "mlb-info: --help: ML_E_IO: "* ]]
    run -2 --separate-stderr mlb-info --frob
    [[ -z $output ]]
    [[ ${stderr_lines[0]} == "mlb-info: unknown option '--frob'" ]]
}

# ---------------------------------------------------------------- version

@test "--version and -V print 'NAME (mlcore) 0.1.0' and exit 0" {
    for cmd in "${CMDS[@]}"; do
        for opt in --version -V; do
            run -0 --separate-stderr "$cmd" "$opt"
            [[ $output == "$cmd (mlcore) 0.1.0" ]]
            [[ -z $stderr ]]
        done
        # Also with operands, which are not opened.
        run -0 --separate-stderr "$cmd" "$BATS_TEST_TMPDIR/missing.mlb" -V
        [[ $output == "$cmd (mlcore) 0.1.0" ]]
    done
}

# ---------------------------------------------------------------- usage errors

check_usage_error() { # CMD EXPECTED-FIRST-LINE ARGS...
    local cmd=$1 first=$2
    shift 2
    run -2 --separate-stderr "$cmd" "$@"
    [[ -z $output ]] || fail_with "stdout not empty: $output"
    [[ ${stderr_lines[0]} == "$first" ]] || fail_with "stderr: ${stderr_lines[0]}"
    [[ ${stderr_lines[1]} == "Try '$cmd --help' for more information." ]]
    [[ ${#stderr_lines[@]} -eq 2 ]]
}

@test "unknown options exit 2 with 'unknown option' and a Try line, nothing on stdout" {
    local cmd flag
    for cmd in "${CMDS[@]}"; do
        check_usage_error "$cmd" "$cmd: unknown option '--frob'" --frob "$TINY"
        check_usage_error "$cmd" "$cmd: unknown option '--frob'" "$TINY" --frob
        check_usage_error "$cmd" "$cmd: unknown option '-x'" -x "$TINY"
        # In a cluster after a known flag (-t of mlb-info, -q of mlb-verify).
        flag=t
        [[ $cmd == mlb-info ]] || flag=q
        check_usage_error "$cmd" "$cmd: unknown option '-x'" "-${flag}x" "$TINY"
        check_usage_error "$cmd" "$cmd: unknown option '--frob=1'" --frob=1 "$TINY"
    done
}

@test "a known option given =VALUE it does not take is named as such (exit 2)" {
    check_usage_error mlb-info "mlb-info: option '--json' takes no argument" --json=1 "$TINY"
    check_usage_error mlb-info "mlb-info: option '--help' takes no argument" --help=x
    check_usage_error mlb-verify "mlb-verify: option '--version' takes no argument" --version=1
    check_usage_error mlb-verify "mlb-verify: option '--quiet' takes no argument" --quiet=yes "$TINY"
}

@test "a missing option argument exits 2" {
    check_usage_error mlb-info "mlb-info: option '--ctx' needs an argument" "$TINY" --ctx
    check_usage_error mlb-info "mlb-info: option '-c' needs an argument" "$TINY" -c
    check_usage_error mlb-verify "mlb-verify: option '--check' needs an argument" --check
    check_usage_error mlb-verify "mlb-verify: option '-c' needs an argument" -c
}

@test "mlb-info --ctx accepts only a decimal number in 1..2^24 (else exit 2)" {
    local bad
    for bad in x 12abc 0x10 -1 +5 ' 5' '5 ' '' 99999999999999999999999; do
        check_usage_error mlb-info "mlb-info: --ctx: '$bad' is not a number" --ctx "$bad" "$TINY"
    done
    check_usage_error mlb-info "mlb-info: --ctx: 0 is outside 1..16777216" --ctx 0 "$TINY"
    check_usage_error mlb-info "mlb-info: --ctx: 16777217 is outside 1..16777216" \
        --ctx=16777217 "$TINY"
    # The bounds themselves are accepted, in every spelling.
    run -0 mlb-info --ctx 1 "$TINY"
    run -0 mlb-info --ctx=16777216 "$TINY"
    run -0 mlb-info -c16 "$TINY"
}

@test "mlb-info without FILE exits 2 (mlb-verify reads stdin instead)" {
    check_usage_error mlb-info "mlb-info: no FILE given"
    check_usage_error mlb-info "mlb-info: no FILE given" --json --ctx 5
    run -0 --separate-stderr mlb-verify <"$TINY"
    [[ $output == "(stdin): OK, "* ]]
}

@test "-- ends the options: a file named like an option is an operand" {
    cp "$TINY" "$BATS_TEST_TMPDIR/-t.mlb"
    cd "$BATS_TEST_TMPDIR"
    run -0 --separate-stderr mlb-info -- -t.mlb
    [[ ${lines[0]} == "-t.mlb" ]]
    run -0 --separate-stderr mlb-verify -- -t.mlb
    [[ $output == "-t.mlb: OK, 21 tensors, "* ]]
}

# ---------------------------------------------------------------- input errors

@test "a missing file exits 3 with 'PROG: FILE: ML_E_IO: ' and nothing on stdout" {
    local missing="$BATS_TEST_TMPDIR/no such.mlb"
    for cmd in "${CMDS[@]}"; do
        run -3 --separate-stderr "$cmd" "$missing"
        [[ -z $output ]]
        [[ ${#stderr_lines[@]} -eq 1 ]]
        [[ ${stderr_lines[0]} == "$cmd: $missing: ML_E_IO: "* ]]
        [[ ${stderr_lines[0]} == *"No such file or directory" ]]
    done
}

@test "an unreadable file exits 3 with ML_E_IO" {
    [[ $(id -u) -ne 0 ]] || skip "root reads files without read permission"
    local f
    f=$(mutant "$TINY")
    chmod 000 "$f"
    for cmd in "${CMDS[@]}"; do
        run -3 --separate-stderr "$cmd" "$f"
        [[ ${stderr_lines[0]} == "$cmd: $f: ML_E_IO: "*"Permission denied" ]]
    done
}

@test "a directory exits 3 with ML_E_IO" {
    for cmd in "${CMDS[@]}"; do
        run -3 --separate-stderr "$cmd" "$BATS_TEST_TMPDIR"
        [[ -z $output ]]
        [[ ${stderr_lines[0]} == "$cmd: $BATS_TEST_TMPDIR: ML_E_IO: "*"Is a directory" ]]
    done
}

@test "an empty file exits 1 with ML_E_FORMAT" {
    local f="$BATS_TEST_TMPDIR/empty.mlb"
    : >"$f"
    for cmd in "${CMDS[@]}"; do
        run -1 --separate-stderr "$cmd" "$f"
        [[ -z $output ]]
        [[ ${stderr_lines[0]} == "$cmd: $f: ML_E_FORMAT: "*"empty file" ]]
    done
    # The same from a pipe, named (stdin).
    run -1 --separate-stderr mlb-info - </dev/null
    [[ ${stderr_lines[0]} == "mlb-info: (stdin): ML_E_FORMAT: "*"empty file" ]]
    run -1 --separate-stderr mlb-verify </dev/null
    [[ ${stderr_lines[0]} == "mlb-verify: (stdin): ML_E_FORMAT: "*"empty file" ]]
}

@test "a GGUF file gets the hint to convert it from mlb-verify (exit 1); mlb-info inspects it" {
    local f="$BATS_TEST_TMPDIR/model.gguf"
    { printf 'GGUF\003\000\000\000'; head -c 1000 /dev/zero; } >"$f"
    run -1 --separate-stderr mlb-verify "$f"
    [[ -z $output ]]
    [[ ${stderr_lines[0]} == "mlb-verify: $f: ML_E_FORMAT: magic (offset 0): \"GGUF\" is not \"MLB1\": this is a GGUF file; convert it with gguf2mlb" ]]
    # mlb-info reads it as the GGUF it is (mlb-info-gguf.bats): no keys, no
    # tensors, so neither a model nor a tokenizer to convert.
    run -1 --separate-stderr mlb-info "$f"
    [[ ${lines[1]} == "  format                 GGUF version 3" ]]
    [[ $stderr == "mlb-info: $f: ML_E_FORMAT: tokenizer.ggml.model: required key is missing" ]]
}

@test "other wrong files get their own hint: HTML page, tokenizer, unknown bytes" {
    local f="$BATS_TEST_TMPDIR/x"
    { printf '<!DOCTYPE html><html>'; head -c 300 /dev/zero; } >"$f"
    run -1 --separate-stderr mlb-info "$f"
    [[ $stderr == *': "<!DO" is not "MLB1": this is an HTML page, not a model'* ]]
    { printf 'MLT1'; head -c 300 /dev/zero; } >"$f"
    run -1 --separate-stderr mlb-verify "$f"
    [[ $stderr == *'this is an .mlt tokenizer, not a model' ]]
    # Non-printable bytes are shown escaped.
    { printf '\177ELF'; head -c 300 /dev/zero; } >"$f"
    run -1 --separate-stderr mlb-info "$f"
    [[ $stderr == *': "\x7fELF" is not "MLB1": not an .mlb model' ]]
}

@test "a file shorter than the header exits 1 even with a GGUF magic (mlb-verify checks the size first)" {
    local f="$BATS_TEST_TMPDIR/short"
    printf 'GGUF' >"$f"
    run -1 --separate-stderr mlb-verify "$f"
    [[ $stderr == "mlb-verify: $f: ML_E_FORMAT: offset 0: the input has 4 bytes, fewer than the 256-byte header" ]]
    # mlb-info takes the magic for a GGUF's, and the GGUF reader says what is missing.
    run -1 --separate-stderr mlb-info "$f"
    [[ $stderr == "mlb-info: $f: ML_E_FORMAT: version (offset 4): the version needs 4 bytes but the file ends 0 bytes later (truncated?)" ]]
    printf 'GGU' >"$f"
    run -1 --separate-stderr mlb-info "$f"
    [[ $stderr == "mlb-info: $f: ML_E_FORMAT: offset 0: the file has 3 bytes, fewer than the 256-byte header" ]]
    head -c 255 "$TINY" >"$f"
    run -1 --separate-stderr mlb-verify "$f"
    [[ $stderr == "mlb-verify: $f: ML_E_FORMAT: offset 0: the input has 255 bytes, fewer than the 256-byte header" ]]
}

# ---------------------------------------------------------------- stdout discipline

@test "a failed write to stdout (/dev/full) exits 3 with an ML_E_IO write error" {
    [[ -c /dev/full ]] || skip "no /dev/full"
    local args
    for args in "mlb-info $TINY" "mlb-info --json $FULL" "mlb-info --tensors $FULL" \
        "mlb-verify $TINY" "mlb-verify --sums $FULL" "mlb-info --help" "mlb-verify -V"; do
        # shellcheck disable=SC2086 # word splitting wanted
        run -3 --separate-stderr bash -c '"$@" >/dev/full' _ $args
        [[ $stderr == "${args%% *}: (stdout): ML_E_IO: write error: No space left on device" ]] ||
            fail_with "$args: $stderr"
    done
}

@test "mlb-verify --check to /dev/full exits 3 as well" {
    [[ -c /dev/full ]] || skip "no /dev/full"
    mlb-verify --sums "$TINY" >"$BATS_TEST_TMPDIR/sums"
    run -3 --separate-stderr bash -c 'mlb-verify --check "$1" >/dev/full' _ "$BATS_TEST_TMPDIR/sums"
    [[ $stderr == "mlb-verify: (stdout): ML_E_IO: write error: No space left on device" ]]
    # -q writes nothing, so there is nothing to fail.
    run -0 --separate-stderr bash -c 'mlb-verify -q --check "$1" >/dev/full' _ "$BATS_TEST_TMPDIR/sums"
    [[ -z $stderr ]]
}

@test "an invalid file keeps its exit status when stdout also fails" {
    [[ -c /dev/full ]] || skip "no /dev/full"
    : >"$BATS_TEST_TMPDIR/empty"
    run -1 --separate-stderr bash -c 'mlb-info "$1" "$2" >/dev/full' _ "$BATS_TEST_TMPDIR/empty" "$TINY"
    [[ ${stderr_lines[0]} == "mlb-info: $BATS_TEST_TMPDIR/empty: ML_E_FORMAT: "* ]]
    [[ ${stderr_lines[1]} == "mlb-info: (stdout): ML_E_IO: write error: No space left on device" ]]
}

@test "a closed stdout (>&-) is a write error only when there was something to write" {
    run -3 --separate-stderr bash -c 'mlb-info "$1" >&-' _ "$TINY"
    [[ $stderr == "mlb-info: (stdout): ML_E_IO: write error: Bad file descriptor" ]]
    run -3 --separate-stderr bash -c 'mlb-verify --help >&-'
    [[ $stderr == "mlb-verify: (stdout): ML_E_IO: write error: Bad file descriptor" ]]
    # -q writes nothing: the answer is the file's.
    run -0 --separate-stderr bash -c 'mlb-verify -q "$1" >&-' _ "$TINY"
    [[ -z $stderr ]]
    : >"$BATS_TEST_TMPDIR/empty"
    run -1 --separate-stderr bash -c 'mlb-verify -q "$1" >&-' _ "$BATS_TEST_TMPDIR/empty"
    [[ $stderr == "mlb-verify: $BATS_TEST_TMPDIR/empty: ML_E_FORMAT: offset 0: empty file" ]]
}

pipe_to_head() { # ARGS...: runs "ARGS | head -1"; prints head's line, then PIPESTATUS, then stderr
    local err="$BATS_TEST_TMPDIR/stderr"
    "$@" 2>"$err" | head -1
    echo "status ${PIPESTATUS[*]}"
    echo "stderr '$(cat "$err")'"
}

@test "mlb-info --tensors big | head -1 ends quietly with status 0" {
    run -0 pipe_to_head mlb-info --tensors "$BATS_FILE_TMPDIR/big.mlb"
    [[ ${lines[0]} == "$BATS_FILE_TMPDIR/big.mlb" ]]
    [[ ${lines[1]} == "status 0 0" ]]
    [[ ${lines[2]} == "stderr ''" ]]
}

@test "--json, --sums and OK lines over many files | head -1 end quietly with status 0" {
    local -a many
    for _ in $(seq 60); do many+=("$FULL"); done
    run -0 pipe_to_head mlb-info --json "${many[@]}"
    [[ ${lines[0]} == '{"file":'* ]]
    [[ ${lines[1]} == "status 0 0" && ${lines[2]} == "stderr ''" ]]
    run -0 pipe_to_head mlb-verify --sums "${many[@]}"
    local re='^[0-9a-f]{8}  layer_flags  '
    [[ ${lines[0]} =~ $re ]]
    [[ ${lines[1]} == "status 0 0" && ${lines[2]} == "stderr ''" ]]
    for _ in $(seq 2000); do many+=("$TINY"); done
    run -0 pipe_to_head mlb-verify "${many[@]}"
    [[ ${lines[0]} == "$FULL: OK, 71 tensors, "* ]]
    [[ ${lines[1]} == "status 0 0" && ${lines[2]} == "stderr ''" ]]
}

@test "a closed stdout does not hide the exit status of an invalid file" {
    : >"$BATS_TEST_TMPDIR/empty"
    run -0 pipe_to_head mlb-info --tensors "$BATS_TEST_TMPDIR/empty" "$BATS_FILE_TMPDIR/big.mlb"
    [[ ${lines[0]} == "$BATS_FILE_TMPDIR/big.mlb" ]]
    [[ ${lines[1]} == "status 1 0" ]]
    [[ ${lines[2]} == "stderr 'mlb-info: $BATS_TEST_TMPDIR/empty: ML_E_FORMAT: offset 0: empty file'" ]]
}
