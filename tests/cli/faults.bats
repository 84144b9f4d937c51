#!/usr/bin/env bats
# faults.bats - failures that come from outside, for every command that
# reads or writes: a full disk and places that cannot be written (exit 3,
# ML_E_IO, nothing left behind; a device given as the output is written in
# place, never replaced), inputs cut off anywhere (exit 1, ML_E_FORMAT
# naming the field or array, for every offset of the small inputs), a
# reader that closes the pipe early (a quiet end), and SIGINT/SIGHUP while
# gguf2mlb, ml-quant or ml-imatrix writes (the temporary files removed,
# the signal's exit status).  What the commands' own files already cover
# is not repeated.  Memory and size limits are in limits.bats.

bats_require_minimum_version 1.5.0

load helpers
load gguf2mlb
load faults

FIX="$BATS_TEST_DIRNAME/../fixtures"
SMALL="$BATS_FILE_TMPDIR/small.mlb"   # 9344 bytes: one layer, dim 32, vocab 8
SG="$BATS_FILE_TMPDIR/s.gguf"         # a 10 KB llama GGUF (mk_gguf), no tokenizer
STG="$BATS_FILE_TMPDIR/st.gguf"       # the same with an 8-token tokenizer
ST="$BATS_FILE_TMPDIR/st.mlt"         # that tokenizer as .mlt (119 bytes)
L2="$BATS_FILE_TMPDIR/l2.mlt"         # the llama2 fixture's tokenizer (384 tokens, 3135 bytes)
BIGT="$BATS_FILE_TMPDIR/bigt.gguf"    # 58 MB F16 GGUF with the tokenizer, for the signals
V32K="$BATS_FILE_TMPDIR/v32k.mlb"     # vocab 32000: a logits row (128 KB) fills any pipe

setup_file() {
    make_fixtures
    "$MKMODEL" -o "$SMALL" dim=32 n_layers=1 n_heads=1 n_kv_heads=1 hidden_dim=32 vocab=8 max_seq=16
    "$MKMODEL" -o "$V32K" --seed 3 vocab=32000 max_seq=64
    mk_gguf "$SG" q8_0 32 1 32 32
    with_tokenizer "$SG" "$STG"
    gguf2mlb -q -o "$BATS_FILE_TMPDIR/st.mlb" -t "$ST" "$STG"
    gguf2mlb -q -o "$BATS_FILE_TMPDIR/l2.mlb" -t "$L2" "$FIX/models/llama2/llama2-q8_0.gguf"
    mk_gguf "$BATS_FILE_TMPDIR/big.gguf" f16 512 4 1536 16384
    with_tokenizer "$BATS_FILE_TMPDIR/big.gguf" "$BIGT"
    rm "$BATS_FILE_TMPDIR/big.gguf"
}

teardown() {
    # A test that mounted a small file system (full disk) leaves no mount.
    if [[ -n ${MOUNTED:-} ]]; then
        umount "$MOUNTED" 2>/dev/null || true
    fi
}

FULL_LINE="ML_E_IO: write error: No space left on device"

# ---------------------------------------------------------------- full disk, unwritable places

@test "stdout on a full disk (/dev/full): every output of mlt-dump, ml-run --perplexity, gguf2mlb -n, ml-imatrix --show: exit 3, one line" {
    [[ -c /dev/full ]] || skip "no /dev/full"
    local args
    while IFS= read -r args; do
        run -3 --separate-stderr bash -c "$args >/dev/full"
        [[ $stderr == "${args%% *}: (stdout): $FULL_LINE" ]] || fail_with "$args: $stderr"
    done <<EOF
mlt-dump $ST
mlt-dump --json $ST
mlt-dump --merges $L2
mlt-dump --merges --json $L2
mlt-dump --vocab --json $ST
mlt-dump --encode 'ab a' $ST
mlt-dump --json --encode 'ab a' $ST
mlt-dump --decode $ST 1 6 5
mlt-dump --json --decode $ST 1 6 5
gguf2mlb -n $STG
EOF
    # --lines and ids from standard input
    run -3 --separate-stderr bash -c 'printf "a\nb\n" | mlt-dump -l --encode - "$1" >/dev/full' _ "$ST"
    [[ $stderr == "mlt-dump: (stdout): $FULL_LINE" ]]
    run -3 --separate-stderr bash -c 'echo 1 6 5 | mlt-dump --decode "$1" >/dev/full' _ "$ST"
    [[ $stderr == "mlt-dump: (stdout): $FULL_LINE" ]]
    # ml-run's perplexity line
    for i in $(seq 40); do echo "ab a b ab"; done >"$BATS_TEST_TMPDIR/t.txt"
    run -3 --separate-stderr bash -c 'ml-run -q -m "$1" -k "$2" --perplexity "$3" --ctx 16 >/dev/full' _ \
        "$BATS_FILE_TMPDIR/st.mlb" "$ST" "$BATS_TEST_TMPDIR/t.txt"
    [[ $stderr == "ml-run: (stdout): $FULL_LINE" ]]
    ml-imatrix -q -m "$V32K" -k "$L2" -f "$BATS_TEST_TMPDIR/t.txt" -c 16 -o "$BATS_TEST_TMPDIR/a.mli"
    run -3 --separate-stderr bash -c 'ml-imatrix --show "$1" >/dev/full' _ "$BATS_TEST_TMPDIR/a.mli"
    [[ $stderr == "ml-imatrix: (stdout): $FULL_LINE" ]]
}

@test "a model or logits streamed to a full stdout (-o -, --logits -): exit 3, ML_E_IO" {
    [[ -c /dev/full ]] || skip "no /dev/full"
    run -3 --separate-stderr bash -c 'gguf2mlb -q -o - -t "$1" "$2" >/dev/full' _ "$BATS_TEST_TMPDIR/t.mlt" "$STG"
    [[ $stderr == "gguf2mlb: "*": ML_E_IO: write: No space left on device" ]]
    # the tokenizer was not committed either
    no_output "$BATS_TEST_TMPDIR" t.mlt
    run -3 --separate-stderr bash -c 'ml-run -q -m "$1" --ids -p "1 2" -n 0 --logits - >/dev/full' _ "$SMALL"
    [[ $stderr == "ml-run: "*": ML_E_IO: write: No space left on device" ]]
}

@test "a failed stream to stdout names (stdout), not (stdin)" {
    run -3 --separate-stderr bash -c 'gguf2mlb -q --no-tokenizer -o - "$1" >/dev/full' _ "$SG"
    [[ $stderr == "gguf2mlb: (stdout): ML_E_IO: write: No space left on device" ]]
    run -3 --separate-stderr bash -c 'ml-run -q -m "$1" --ids -p "1 2" -n 0 --logits - >/dev/full' _ "$SMALL"
    [[ $stderr == "ml-run: (stdout): ML_E_IO: write: No space left on device" ]]
}

@test "a device as the output is written in place and stays a device: full (exit 3), null (exit 0)" {
    local d=$BATS_TEST_TMPDIR
    private_dev "$d/full" 1 7
    private_dev "$d/null" 1 3
    private_dev "$d/null2" 1 3
    run -3 --separate-stderr gguf2mlb -q --no-tokenizer -o "$d/full" "$SG"
    [[ $stderr == "gguf2mlb: $d/full: ML_E_IO: write: No space left on device" ]]
    run -3 --separate-stderr ml-run -q -m "$SMALL" --ids -p "1 2" -n 0 --logits "$d/full"
    [[ $stderr == "ml-run: $d/full: ML_E_IO: write: No space left on device" ]]
    run -3 --separate-stderr gguf2mlb -q -o "$d/m.mlb" -t "$d/full" "$STG"
    [[ $stderr == *": ML_E_IO: write: No space left on device" ]]
    [[ ! -e $d/m.mlb ]]
    run -3 --separate-stderr ml-quant -q -o "$d/full" "$SMALL"
    [[ $stderr == "ml-quant: $d/full: ML_E_IO: write: No space left on device" ]]
    printf 'ab a b ab ab a b\n' >"$d/corpus"
    run -3 --separate-stderr ml-imatrix -q -m "$BATS_FILE_TMPDIR/st.mlb" -k "$ST" -f "$d/corpus" -c 4 -o "$d/full"
    [[ $stderr == "ml-imatrix: $d/full: ML_E_IO: write: No space left on device" ]]
    # /dev/null as the output is the usual way to throw a result away.
    run -0 --separate-stderr gguf2mlb -q -o "$d/null" -t "$d/null2" "$STG"
    [[ -z $stderr ]]
    run -0 --separate-stderr ml-run -q -m "$SMALL" --ids -p "1 2" -n 0 --logits "$d/null"
    run -0 --separate-stderr ml-quant -q -o "$d/null" "$SMALL"
    run -0 --separate-stderr ml-imatrix -q -m "$BATS_FILE_TMPDIR/st.mlb" -k "$ST" -f "$d/corpus" -c 4 -o "$d/null"
    [[ -c $d/full && -c $d/null && -c $d/null2 ]]
    no_temps "$d"
}

@test "the tokenizer's write error names the tokenizer" {
    local d=$BATS_TEST_TMPDIR
    private_dev "$d/full" 1 7
    run -3 --separate-stderr gguf2mlb -q -o "$d/m.mlb" -t "$d/full" "$STG"
    [[ $stderr == "gguf2mlb: $d/full: ML_E_IO: write: No space left on device" ]]
}

@test "a FIFO as the output gets the bytes and stays a FIFO" {
    local d=$BATS_TEST_TMPDIR
    ml-run -q -m "$SMALL" --ids -p "1 2 3" -n 0 --logits "$d/want.f32"
    mkfifo "$d/fifo"
    cat "$d/fifo" >"$d/got.f32" &
    local reader=$!
    run -0 ml-run -q -m "$SMALL" --ids -p "1 2 3" -n 0 --logits "$d/fifo"
    wait "$reader"
    [[ -p $d/fifo ]]
    cmp "$d/want.f32" "$d/got.f32"
    [[ $(file_size "$d/got.f32") -eq $((3 * 8 * 4)) ]]
}

@test "unwritable places: a directory, a path under a file, a missing directory (exit 3, nothing written)" {
    local d=$BATS_TEST_TMPDIR
    mkdir "$d/dir.mlb"
    echo x >"$d/file"
    run -3 --separate-stderr gguf2mlb -q --no-tokenizer -o "$d/dir.mlb" "$SG"
    [[ $stderr == "gguf2mlb: $d/dir.mlb: ML_E_IO: cannot write: Is a directory" ]]
    run -3 --separate-stderr gguf2mlb -q -o "$d/m.mlb" -t "$d/dir.mlb" "$STG"
    [[ $stderr == "gguf2mlb: $d/dir.mlb: ML_E_IO: cannot write: Is a directory" ]]
    run -3 --separate-stderr gguf2mlb -q --no-tokenizer -o "$d/file/m.mlb" "$SG"
    [[ $stderr == "gguf2mlb: $d/file/m.mlb: ML_E_IO: cannot create a temporary file beside the output: Not a directory" ]]
    run -3 --separate-stderr ml-run -q -m "$SMALL" --ids -p 1 -n 0 --logits "$d/dir.mlb"
    [[ $stderr == "ml-run: $d/dir.mlb: ML_E_IO: cannot write: Is a directory" ]]
    run -3 --separate-stderr ml-run -q -m "$SMALL" --ids -p 1 -n 0 --logits "$d/none/l.f32"
    [[ $stderr == "ml-run: $d/none/l.f32: ML_E_IO: cannot create a temporary file beside the output: No such file or directory" ]]
    [[ -d $d/dir.mlb && $(cat "$d/file") == x ]]
    [[ -z $(ls -A "$d/dir.mlb") ]]
    no_output "$d" m.mlb m.mlt
}

@test "a directory without write permission (exit 3, Permission denied)" {
    [[ $(id -u) -ne 0 ]] || skip "root writes into any directory"
    local d=$BATS_TEST_TMPDIR/ro
    mkdir "$d"
    chmod 555 "$d"
    run -3 --separate-stderr gguf2mlb -q --no-tokenizer -o "$d/m.mlb" "$SG"
    [[ $stderr == *"ML_E_IO: cannot create a temporary file beside the output: Permission denied" ]]
    run -3 --separate-stderr ml-run -q -m "$SMALL" --ids -p 1 -n 0 --logits "$d/l.f32"
    [[ $stderr == *"Permission denied" ]]
    chmod 755 "$d"
    [[ -z $(ls -A "$d") ]]
}

@test "a file system that fills up mid-write: exit 3, and the space is given back (no partial file)" {
    local d=$BATS_TEST_TMPDIR/small-fs
    mkdir "$d"
    mount -t tmpfs -o size=64k tmpfs "$d" 2>/dev/null || skip "cannot mount a tmpfs here (needs root)"
    MOUNTED=$d
    # the model is 1 MB: it cannot fit
    run -3 --separate-stderr gguf2mlb -q -o "$d/m.mlb" -t "$d/m.mlt" "$FIX/models/llama2/llama2-q8_0.gguf"
    [[ $stderr == *"ML_E_IO: write: No space left on device" ]]
    [[ -z $(ls -A "$d") ]]
    # logits: 3 rows of 32000 floats (384 KB)
    run -3 --separate-stderr ml-run -q -m "$V32K" --ids -p "1 2 3" -n 0 --logits "$d/l.f32"
    [[ $stderr == "ml-run: $d/l.f32: ML_E_IO: write: No space left on device" ]]
    [[ -z $(ls -A "$d") ]]
    # what fits is written
    run -0 ml-run -q -m "$SMALL" --ids -p "1 2 3" -n 0 --logits "$d/l.f32"
    [[ $(file_size "$d/l.f32") -eq 96 ]]
}

@test "a file size limit mid-write: ml-run --logits and the tokenizer leave nothing (exit 3)" {
    local d=$BATS_TEST_TMPDIR
    run -3 --separate-stderr bash -c 'trap "" XFSZ; ulimit -f 64; ml-run -q -m "$1" --ids -p "1 2 3" -n 0 --logits "$2"' \
        _ "$V32K" "$d/l.f32"
    [[ $stderr == "ml-run: $d/l.f32: ML_E_IO: write: File too large" ]]
    # the llama2 tokenizer (3 KB) is written first; 2 KB are allowed
    run -3 --separate-stderr bash -c 'trap "" XFSZ; ulimit -f 2; gguf2mlb -q -o "$1/m.mlb" -t "$1/m.mlt" "$2"' \
        _ "$d" "$FIX/models/llama2/llama2-q8_0.gguf"
    [[ $stderr == *"ML_E_IO: write: File too large" ]]
    no_output "$d" l.f32 m.mlb m.mlt
}

# ---------------------------------------------------------------- truncated inputs

@test ".mlb cut at every offset: mlb-info and mlb-verify name the array, exit 1; cuts past the last array are valid" {
    local cuts=$BATS_TEST_TMPDIR/cuts size
    size=$(file_size "$SMALL")
    cut_copies "$SMALL" "$cuts"
    mlb_layout "$SMALL" >"$BATS_TEST_TMPDIR/layout"
    [[ $(tail -1 "$BATS_TEST_TMPDIR/layout") == "9280 9312 wcls" ]]
    local cmd status
    for cmd in mlb-info mlb-verify; do
        # one process reads all 9345 cuts
        "$cmd" "$cuts"/* >/dev/null 2>"$BATS_TEST_TMPDIR/got" && status=0 || status=$?
        [[ $status -eq 1 ]] || fail_with "$cmd: exit status $status"
        mlb_cut_expect "$BATS_TEST_TMPDIR/layout" "$cmd" "$cuts" $(seq 0 "$size") >"$BATS_TEST_TMPDIR/want"
        [[ $(wc -l <"$BATS_TEST_TMPDIR/want") -eq 9312 ]]
        diff "$BATS_TEST_TMPDIR/want" "$BATS_TEST_TMPDIR/got"
    done
    # the 33 cuts from 9312 on are whole models (the final padding is optional)
    run -0 mlb-verify -q "$cuts"/00093{12..43} "$cuts/0009344"
}

@test ".mlb with layer flags and f16 scales, cut at every header field, flag byte and array edge" {
    local cuts=$BATS_TEST_TMPDIR/cuts offs
    mlb_layout "$FULL" >"$BATS_TEST_TMPDIR/layout"
    # every offset up to the first array, and each region's first, second and last byte
    mapfile -t offs < <( (
        seq 0 400
        awk '{ print $1 - 1; print $1; print $1 + 1; print $2 - 1; print $2 }' "$BATS_TEST_TMPDIR/layout"
    ) | sort -nu)
    cut_copies "$FULL" "$cuts" "${offs[@]}"
    [[ $(head -1 "$BATS_TEST_TMPDIR/layout") == "256 260 layer_flags" ]]
    local cmd status
    for cmd in mlb-info mlb-verify; do
        "$cmd" "$cuts"/* >/dev/null 2>"$BATS_TEST_TMPDIR/got" && status=0 || status=$?
        [[ $status -eq 1 ]] || fail_with "$cmd: exit status $status"
        mlb_cut_expect "$BATS_TEST_TMPDIR/layout" "$cmd" "$cuts" "${offs[@]}" >"$BATS_TEST_TMPDIR/want"
        diff "$BATS_TEST_TMPDIR/want" "$BATS_TEST_TMPDIR/got"
    done
}

@test ".mlb from a pipe, cut anywhere: mlb-info - and mlb-verify - say the same as for files" {
    local n layout=$BATS_TEST_TMPDIR/layout
    mlb_layout "$SMALL" >"$layout"
    for n in 0 1 255 256 300 543 544 575 5000 9311; do
        run -1 --separate-stderr bash -c 'head -c "$1" "$2" | mlb-verify -' _ "$n" "$SMALL"
        [[ $stderr == "$(mlb_cut_expect "$layout" mlb-verify c "$n" | sed 's|^mlb-verify: c/[0-9]*: |mlb-verify: (stdin): |')" ]] ||
            fail_with "cut $n: $stderr"
        run -1 --separate-stderr bash -c 'head -c "$1" "$2" | mlb-info -' _ "$n" "$SMALL"
        [[ $stderr == "$(mlb_cut_expect "$layout" mlb-info c "$n" | sed 's|^mlb-info: c/[0-9]*: |mlb-info: (stdin): |')" ]] ||
            fail_with "cut $n: $stderr"
    done
}

@test "ml-run, ml-quant and ml-imatrix on cut models, ml-run on cut tokenizers: the loaders' lines, exit 1" {
    local cuts=$BATS_TEST_TMPDIR/cuts n layout=$BATS_TEST_TMPDIR/layout want f
    mlb_layout "$SMALL" >"$layout"
    cut_copies "$SMALL" "$cuts" 0 100 256 600 4160 9311
    printf 'ab a b ab ab a b\n' >"$BATS_TEST_TMPDIR/corpus"
    for n in 0 100 256 600 4160 9311; do
        f=$cuts/$(printf %07d "$n")
        want=$(mlb_cut_expect "$layout" mlb-info "$cuts" "$n")
        run -1 --separate-stderr ml-run -q -m "$f" --ids -p 1 -n 1
        [[ $stderr == "ml-run: ${want#mlb-info: }" ]] || fail_with "cut $n: $stderr"
        [[ -z $output ]]
        run -1 --separate-stderr ml-quant -q -o "$BATS_TEST_TMPDIR/q.mlb" "$f"
        [[ $stderr == "ml-quant: ${want#mlb-info: }" ]] || fail_with "cut $n: $stderr"
        run -1 --separate-stderr ml-imatrix -q -m "$f" -k "$ST" -f "$BATS_TEST_TMPDIR/corpus" -c 4 -o "$BATS_TEST_TMPDIR/a.mli"
        [[ $stderr == "ml-imatrix: ${want#mlb-info: }" ]] || fail_with "cut $n: $stderr"
    done
    no_output "$BATS_TEST_TMPDIR" q.mlb a.mli
    cut_copies "$ST" "$cuts/t" 0 31 32 60 80 118
    for n in 0 31 32 60 80 118; do
        run -1 --separate-stderr ml-run -q -m "$BATS_FILE_TMPDIR/st.mlb" -k "$cuts/t/$(printf %07d "$n")" -p ab -n 1
        want=$(mlt_cut_expect "$ST" "$cuts/t" "$n")
        [[ $stderr == "ml-run: ${want#mlt-dump: }" ]] || fail_with "cut $n: $stderr"
    done
}

@test ".mlt cut at every offset (8 tokens) and at every field edge (llama2): mlt-dump names the field, exit 1" {
    local mlt cuts f n want offs nv nm size
    for mlt in "$ST" "$L2"; do
        cuts=$BATS_TEST_TMPDIR/$(basename "$mlt")
        size=$(file_size "$mlt")
        mapfile -t offs < <(seq 0 "$size")
        if [[ $mlt == "$L2" ]]; then
            # the header, each region's edges (tokens at least 5 bytes,
            # merges 12) and every 13th byte; every offset of the small one
            # already takes each branch
            nv=$(get_u32 "$mlt" 12)
            nm=$(get_u32 "$mlt" 16)
            mapfile -t offs < <( (
                seq 0 40
                for e in $((32 + 5 * nv)) $((32 + 5 * nv + 12 * nm)) $((size - 12 * nm)) "$size"; do
                    seq $((e - 2)) "$e"
                done
                seq 41 13 "$size"
            ) | sort -nu)
        fi
        cut_copies "$mlt" "$cuts" "${offs[@]}"
        mlt_cut_expect "$mlt" "$cuts" "${offs[@]}" >"$BATS_TEST_TMPDIR/want"
        # one process per cut: collect every exit status and line, compare once
        for f in "$cuts"/*; do
            mlt-dump "$f" >/dev/null 2>>"$BATS_TEST_TMPDIR/got" && echo 0 >>"$BATS_TEST_TMPDIR/status" ||
                echo $? >>"$BATS_TEST_TMPDIR/status"
        done
        diff "$BATS_TEST_TMPDIR/want" "$BATS_TEST_TMPDIR/got"
        n=$((${#offs[@]} - 1))
        [[ $(sort "$BATS_TEST_TMPDIR/status" | uniq -c | xargs) == "1 0 $n 1" ]] ||
            fail_with "$mlt: exit statuses $(sort "$BATS_TEST_TMPDIR/status" | uniq -c | xargs)"
        rm "$BATS_TEST_TMPDIR/got" "$BATS_TEST_TMPDIR/status"
    done
    # from a pipe, and in every mode
    run -1 --separate-stderr bash -c 'head -c 2000 "$1" | mlt-dump --vocab -' _ "$L2"
    want=$(mlt_cut_expect "$L2" c 2000)
    [[ -z $output && $stderr == "mlt-dump: (stdin): ${want#mlt-dump: c/0002000: }" ]]
    for mode in --merges "--encode x" "--decode 1" --json; do
        run -1 --separate-stderr bash -c "head -c 2000 \"\$1\" >\"\$2\"; mlt-dump $mode \"\$2\"" _ "$L2" "$BATS_TEST_TMPDIR/c.mlt"
        [[ -z $output && $stderr == "mlt-dump: $BATS_TEST_TMPDIR/c.mlt: ${want#mlt-dump: c/0002000: }" ]] || fail_with "$mode: $stderr"
    done
}

@test "GGUF cut at every offset of its header and metadata and at each tensor's data edges: exit 1, nothing written" {
    local cuts=$BATS_TEST_TMPDIR/cuts d=$BATS_TEST_TMPDIR/out f n data=1120 size offs
    size=$(file_size "$SG")
    # every offset up to the data section (at 1120: 24 + 10 keys + 12
    # tensor infos, aligned to 32), then every 32 bytes (the tensors' data
    # edges: mk_gguf aligns each to 32) and the last bytes
    mapfile -t offs < <( (seq 0 $((data - 1)); seq "$data" 32 $((size - 1)); seq $((size - 3)) $((size - 1))) | sort -nu)
    cut_copies "$SG" "$cuts" "${offs[@]}"
    mkdir "$d"
    for f in "$cuts"/*; do
        gguf2mlb -q --no-tokenizer -o "$d/m.mlb" "$f" >/dev/null 2>>"$BATS_TEST_TMPDIR/got" &&
            echo 0 >>"$BATS_TEST_TMPDIR/status" || echo $? >>"$BATS_TEST_TMPDIR/status"
    done
    n=$(find "$cuts" -type f | wc -l)
    [[ $(sort -u "$BATS_TEST_TMPDIR/status" | xargs) == 1 ]] || fail_with "statuses: $(sort "$BATS_TEST_TMPDIR/status" | uniq -c | xargs)"
    [[ $(grep -c "^gguf2mlb: $cuts/[0-9]\{7\}: ML_E_FORMAT: [][a-z0-9_.]* (offset [0-9]*): " "$BATS_TEST_TMPDIR/got") -eq $n ]]
    no_output "$d" m.mlb
    # where the file ends names what is missing: a few exact lines
    grep -qx "gguf2mlb: $cuts/0000000: ML_E_FORMAT: magic (offset 0): the magic needs 4 bytes but the file ends 0 bytes later (truncated?)" "$BATS_TEST_TMPDIR/got"
    grep -qx "gguf2mlb: $cuts/0000016: ML_E_FORMAT: kv_count (offset 16): kv_count needs 8 bytes but the file ends 0 bytes later (truncated?)" "$BATS_TEST_TMPDIR/got"
    grep -qx "gguf2mlb: $cuts/0000024: ML_E_FORMAT: tensor_count (offset 8): 12 tensor infos cannot fit in the 0 bytes left (each takes 33 at least)" "$BATS_TEST_TMPDIR/got"
    grep -qx "gguf2mlb: $cuts/0001120: ML_E_FORMAT: token_embd.weight (offset 480): data of 1088 bytes at data offset 0 ends past the end of the file (1120 bytes; data section at 1120)" "$BATS_TEST_TMPDIR/got"
    grep -qx "gguf2mlb: $cuts/$(printf %07d $((size - 1))): ML_E_FORMAT: blk.0.ffn_down.weight (offset 1112): data of 1088 bytes at data offset 8000 ends past the end of the file ($((size - 1)) bytes; data section at 1120)" "$BATS_TEST_TMPDIR/got"
    # the whole file converts
    gguf2mlb -q --no-tokenizer -o "$d/m.mlb" "$SG"
}

@test "the GGUF fixtures cut anywhere (writer_align.gguf at every offset, writer.gguf every 7th): gguf2mlb -n exits 1 with ML_E_FORMAT" {
    # check_gguf_hostile.c cuts writer.gguf at every offset in the library
    local g cuts f n size offs
    for g in writer_align writer; do
        cuts=$BATS_TEST_TMPDIR/$g
        size=$(file_size "$FIX/gguf/$g.gguf")
        if [[ $g == writer ]]; then
            mapfile -t offs < <( (seq 0 63; seq 64 7 $((size - 1)); echo $((size - 1))) | sort -nu)
        else
            mapfile -t offs < <(seq 0 $((size - 1)))
        fi
        cut_copies "$FIX/gguf/$g.gguf" "$cuts" "${offs[@]}"
        for f in "$cuts"/*; do
            gguf2mlb -n "$f" >/dev/null 2>>"$BATS_TEST_TMPDIR/got" && echo 0 >>"$BATS_TEST_TMPDIR/status" ||
                echo $? >>"$BATS_TEST_TMPDIR/status"
        done
        n=$(find "$cuts" -type f | wc -l)
        [[ $(sort -u "$BATS_TEST_TMPDIR/status" | xargs) == 1 ]] || fail_with "$g: statuses $(sort "$BATS_TEST_TMPDIR/status" | uniq -c | xargs)"
        [[ $(grep -c "^gguf2mlb: $cuts/[0-9]\{7\}: ML_E_FORMAT: " "$BATS_TEST_TMPDIR/got") -eq $n ]]
        [[ $(wc -l <"$BATS_TEST_TMPDIR/got") -eq $n ]]
        rm "$BATS_TEST_TMPDIR/got" "$BATS_TEST_TMPDIR/status"
    done
}

@test "an importance matrix cut anywhere: gguf2mlb --imatrix and ml-imatrix exit 1 naming the size, nothing written" {
    local mli=$BATS_TEST_TMPDIR/m.mli g=$BATS_TEST_TMPDIR/f.gguf cuts=$BATS_TEST_TMPDIR/cuts n f offs
    mk_gguf "$g" f16 32 1 32 32
    mk_mli "$mli" 1 32 32
    [[ $(file_size "$mli") -eq 1320 ]]
    mapfile -t offs < <( (seq 0 48; seq 49 70 1319; echo 1011; echo 1319) | sort -nu)
    cut_copies "$mli" "$cuts" "${offs[@]}"
    for f in "$cuts"/*; do
        n=$((10#$(basename "$f")))
        if ((n < 40)); then
            echo "gguf2mlb: $f: ML_E_FORMAT: offset $n: $n bytes: shorter than the 40-byte header"
        else
            echo "gguf2mlb: $f: ML_E_FORMAT: offset $n: $n bytes, the header implies 1320 (40 + 8 x 160 sums)"
        fi >>"$BATS_TEST_TMPDIR/want"
        gguf2mlb -q --no-tokenizer --wtype q4_0 --imatrix "$f" -o "$BATS_TEST_TMPDIR/m.mlb" "$g" \
            2>>"$BATS_TEST_TMPDIR/got" && echo 0 >>"$BATS_TEST_TMPDIR/status" || echo $? >>"$BATS_TEST_TMPDIR/status"
    done
    diff "$BATS_TEST_TMPDIR/want" "$BATS_TEST_TMPDIR/got"
    [[ $(sort -u "$BATS_TEST_TMPDIR/status" | xargs) == 1 ]]
    no_output "$BATS_TEST_TMPDIR" m.mlb
    # ml-imatrix reads them the same way
    for n in 0 39 40 1011 1319; do
        f=$cuts/$(printf %07d "$n")
        run -1 --separate-stderr ml-imatrix --show "$f"
        [[ $stderr == "ml-imatrix: $(grep -F "$f:" "$BATS_TEST_TMPDIR/want" | sed 's/^gguf2mlb: //')" ]] || fail_with "$stderr"
        run -1 --separate-stderr ml-imatrix --merge "$mli" "$f" -o "$BATS_TEST_TMPDIR/sum.mli"
        [[ $stderr == "ml-imatrix: $(grep -F "$f:" "$BATS_TEST_TMPDIR/want" | sed 's/^gguf2mlb: //')" ]] || fail_with "$stderr"
    done
    no_output "$BATS_TEST_TMPDIR" sum.mli
    run -0 gguf2mlb -q --no-tokenizer --wtype q4_0 --imatrix "$mli" -o "$BATS_TEST_TMPDIR/m.mlb" "$g"
}

@test "a sums file cut inside a CRC or after a line: mlb-verify --check exits 1 (the line, or what is missing)" {
    cd "$BATS_TEST_TMPDIR"
    cp "$SMALL" m.mlb
    mlb-verify --sums m.mlb >m.sums
    local line1 n
    line1=$(head -1 m.sums | wc -c)
    for n in 1 4 8; do
        head -c "$n" m.sums >cut.sums
        run -1 --separate-stderr mlb-verify --check cut.sums
        [[ $stderr == "mlb-verify: cut.sums: ML_E_FORMAT: line 1: expected 'CRC32  TENSOR  FILE'" ]]
        head -c $((line1 + n)) m.sums >cut.sums
        run -1 --separate-stderr mlb-verify --check cut.sums
        [[ $stderr == "mlb-verify: cut.sums: ML_E_FORMAT: line 2: expected 'CRC32  TENSOR  FILE'" ]]
    done
    : >cut.sums
    run -1 --separate-stderr mlb-verify --check cut.sums
    [[ $stderr == "mlb-verify: cut.sums: ML_E_FORMAT: no sums in the file" ]]
    # after the first line: every other tensor and the file are missing
    head -c "$line1" m.sums >cut.sums
    run -1 --separate-stderr mlb-verify --check cut.sums
    [[ $output == "m.mlb: FAILED" ]]
    [[ ${#stderr_lines[@]} -eq 12 ]]
    [[ ${stderr_lines[0]} == "mlb-verify: m.mlb: ML_E_MISMATCH: blk.0.attn_norm is not in the sums file" ]]
    [[ ${stderr_lines[11]} == "mlb-verify: m.mlb: ML_E_MISMATCH: (file) is not in the sums file" ]]
}

# ---------------------------------------------------------------- a reader that goes away

@test "mlt-dump --vocab m.mlt | head -1 ends quietly (status 0), as do --merges, --json, --encode -l and --decode" {
    run -0 pipe_head 1 mlt-dump --vocab "$FIX/tok/llama3_1.mlt"
    [[ $output == "status 0" ]]
    run -0 pipe_head 1 mlt-dump --merges "$FIX/tok/llama3_1.mlt"
    [[ $output == "status 0" ]]
    run -0 pipe_head 1 mlt-dump --vocab --json "$FIX/tok/llama3_1.mlt"
    [[ $output == "status 0" ]]
    run -0 pipe_head 1 mlt-dump --merges --json "$FIX/tok/llama3_1.mlt"
    [[ $output == "status 0" ]]
    # 20000 lines to encode, 50000 ids to decode
    run -0 bash -c 'yes "Hello world" | head -20000 >"$1"' _ "$BATS_TEST_TMPDIR/text"
    run -0 bash -c 'mlt-dump -l --encode - "$1" <"$2" 2>"$3" | head -1 >/dev/null; echo "status ${PIPESTATUS[0]}"; cat "$3"' _ \
        "$L2" "$BATS_TEST_TMPDIR/text" "$BATS_TEST_TMPDIR/err"
    [[ $output == "status 0" ]]
    run -0 bash -c 'seq 3 50002 | sed "s/.*/100/" | mlt-dump --decode "$1" 2>"$2" | head -c 1 >/dev/null; echo "status ${PIPESTATUS[2]}"; cat "$2"' _ \
        "$L2" "$BATS_TEST_TMPDIR/err"
    [[ $output == "status 0" ]]
}

@test "gguf2mlb -o - | head ends quietly; the tokenizer it was writing is not left" {
    run -0 pipe_head 1000 gguf2mlb -q -o - -t "$BATS_TEST_TMPDIR/t.mlt" "$BIGT"
    [[ $output == "status 0" ]]
    no_output "$BATS_TEST_TMPDIR" t.mlt
    run -0 pipe_head 10 gguf2mlb -n "$BIGT"
    [[ $output == "status 0" ]]
}

@test "ml-quant -o - | head ends quietly" {
    run -0 pipe_head 1000 ml-quant -q --wtype q4_0 -o - "$BIGT"
    [[ $output == "status 0" ]]
}

@test "ml-run --logits - | head ends quietly" {
    run -0 pipe_head 10 ml-run -q -m "$V32K" --ids -p "1 2 3" -n 0 --logits -
    [[ $output == "status 0" ]]
    # generated ids and logits on the same pipe
    run -0 pipe_head 10 ml-run -q -m "$V32K" --ids -p "1 2 3" -n 20 --temp 0 --logits -
    [[ $output == "status 0" ]]
}

# ---------------------------------------------------------------- signals

# stop_when_writing PID FILE: waits until PID has a temporary FILE.tmp.*
# open, then freezes PID (SIGSTOP) so the next signal lands mid-write.
stop_when_writing() {
    wait_for_file "$2.tmp.*" "$1"
}

@test "SIGINT and SIGHUP while the tokenizer and the model are written: both temporary files removed, 128 + signal" {
    local sig d=$BATS_TEST_TMPDIR pid status
    for sig in INT HUP; do
        gguf2mlb -q --wtype q4_0 --threads 1 -o "$d/m.mlb" -t "$d/m.mlt" "$BIGT" &
        pid=$!
        stop_when_writing "$pid" "$d/m.mlb"
        # the tokenizer is written first and held uncommitted
        compgen -G "$d/m.mlt.tmp.*" >/dev/null || fail_with "no temporary tokenizer"
        kill "-$sig" "$pid"
        kill -CONT "$pid"
        status=0
        wait "$pid" || status=$?
        [[ $status -eq $((128 + $(kill -l "$sig"))) ]] || fail_with "$sig: exit status $status"
        no_output "$d" m.mlb m.mlt
    done
}

@test "SIGINT while the model streams into a pipe (-o -): ends by the signal, the tokenizer's temporary file removed" {
    local d=$BATS_TEST_TMPDIR pid status rd
    mkfifo "$d/pipe"
    gguf2mlb -q --threads 1 -o - -t "$d/t.mlt" "$BIGT" >"$d/pipe" &
    pid=$!
    exec {rd}<"$d/pipe"
    # let it write a little, then stop reading: it blocks on the full pipe
    head -c 100000 <&"$rd" >/dev/null
    compgen -G "$d/t.mlt.tmp.*" >/dev/null || fail_with "no temporary tokenizer"
    kill -INT "$pid"
    cat <&"$rd" >/dev/null # it ends at the next chunk
    exec {rd}<&-
    status=0
    wait "$pid" || status=$?
    [[ $status -eq 130 ]] || fail_with "exit status $status"
    no_output "$d" t.mlt
}

@test "SIGINT while ml-quant writes: the temporary file removed, exit 130" {
    local d=$BATS_TEST_TMPDIR pid status
    ml-quant -q --threads 1 --wtype q4_0 -o "$d/q.mlb" "$BIGT" &
    pid=$!
    stop_when_writing "$pid" "$d/q.mlb"
    kill -INT "$pid"
    kill -CONT "$pid"
    status=0
    wait "$pid" || status=$?
    [[ $status -eq 130 ]] || fail_with "exit status $status"
    no_output "$d" q.mlb
}

# ml_imatrix_signal SIG: starts a collection over a 240 KB corpus, freezes
# it as soon as its temporary output exists, delivers SIG; it must end by
# that signal with no temporary file left.
ml_imatrix_signal() {
    local sig=$1 d=$BATS_TEST_TMPDIR pid status i
    for ((i = 0; i < 3000; i++)); do echo "The quick brown fox jumps over the lazy dog, number $i."; done >"$d/corpus"
    ml-imatrix -q -t 1 -m "$V32K" -k "$L2" -f "$d/corpus" -c 64 -o "$d/a.mli" &
    pid=$!
    stop_when_writing "$pid" "$d/a.mli"
    kill "-$sig" "$pid"
    kill -CONT "$pid"
    status=0
    wait "$pid" || status=$?
    [[ $status -eq $((128 + $(kill -l "$sig"))) ]] || fail_with "exit status $status"
    no_output "$d" a.mli
}

@test "SIGTERM while ml-imatrix reads and collects: the temporary file removed, exit 143" {
    # (SIGTERM, since a background job of a script ignores SIGINT until
    # the command installs its handler)
    ml_imatrix_signal TERM
}

@test "SIGINT or SIGTERM during ml-run --logits FILE leaves no temporary file" {
    local d=$BATS_TEST_TMPDIR pid status sig
    "$MKMODEL" -o "$d/big.mlb" dim=512 n_layers=4 n_heads=8 n_kv_heads=8 hidden_dim=1024 vocab=32000 max_seq=512
    seq 1 500 >"$d/ids"
    for sig in INT TERM; do
        ml-run -q -t 1 -b 16 -m "$d/big.mlb" --ids -f "$d/ids" -n 0 --ctx 512 --logits "$d/l.f32" &
        pid=$!
        stop_when_writing "$pid" "$d/l.f32"
        kill "-$sig" "$pid"
        kill -CONT "$pid"
        status=0
        wait "$pid" || status=$?
        [[ $status -eq $((128 + $(kill -l "$sig"))) ]] || fail_with "$sig: exit status $status"
        no_output "$d" l.f32
    done
}
