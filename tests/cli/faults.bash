# faults.bash - helpers of faults.bats and limits.bats: truncated copies
# of a file, the exact error lines the commands owe for truncated .mlb and
# .mlt files (computed here from the layout, independently of the
# library), a GGUF with a small tokenizer grafted in, private device nodes
# and hostile headers.  Load after helpers and gguf2mlb (le32, le64, gstr,
# mk_gguf come from there).

# cut_copies SRC DIR [OFFSET...]: DIR/NNNNNNN (7 digits) holds the first N
# bytes of SRC, for every N from 0 to the size of SRC when no OFFSET is
# given.  One perl process writes them all (perl-base is essential on
# Debian; a head(1) per cut costs a second per thousand cuts).
cut_copies() {
    local src=$1 dir=$2
    shift 2
    mkdir -p "$dir"
    perl -e '
        my ($src, $dir, @cuts) = @ARGV;
        open(my $in, "<:raw", $src) or die "$src: $!";
        local $/;
        my $data = <$in>;
        @cuts = (0 .. length($data)) unless @cuts;
        for my $n (@cuts) {
            next if $n > length($data);
            open(my $out, ">:raw", sprintf("%s/%07d", $dir, $n)) or die "$dir: $!";
            print $out substr($data, 0, $n);
            close($out) or die "$dir: $!";
        }' "$src" "$dir" "$@"
}

# mlb_layout FILE: one line per array region of an .mlb, in file order,
# "START END NAME": the layer flags, then for each tensor its quants and
# its scales; from mlb-info --json.
mlb_layout() {
    mlb-info --json "$1" | jq -r '
        (if .header.layer_flags == 1 then "256 \(256 + .header.n_layers) layer_flags" else empty end),
        (.tensors[] | "\(.offset) \(.offset + .bytes) \(.name)",
            (if .scale_offset then "\(.scale_offset) \(.scale_offset + .scale_bytes) \(.name)" else empty end))'
}

# mlb_cut_expect LAYOUT CMD CUTDIR N...: the line CMD (mlb-info or
# mlb-verify) prints on stderr for the file CUTDIR/NNNNNNN, the first N
# bytes of the model whose layout (mlb_layout) is in the file LAYOUT;
# nothing for a cut that is still a valid model (the padding after the
# last array is optional).
#   mlb-info (the loader) names the first tensor that does not fit and
#   where all of it ends; mlb-verify (the stream) names the tensor it was
#   reading (the padding before an array belongs to it) and how many bytes
#   of the current array or padding are missing.
mlb_cut_expect() {
    local layout=$1 cmd=$2 dir=$3
    shift 3
    printf '%s\n' "$@" | awk -v cmd="$cmd" -v dir="$dir" -v layout="$layout" '
        BEGIN {
            while ((getline line < layout) > 0) {
                split(line, f, " ")
                k++; a[k] = f[1] + 0; b[k] = f[2] + 0; name[k] = f[3]
                # where the whole tensor (quants and scales) ends, and starts
                if (!(f[3] in tend) || b[k] > tend[f[3]]) tend[f[3]] = b[k]
                if (!(f[3] in tstart)) tstart[f[3]] = a[k]
            }
            last = b[k]
            hdr = cmd == "mlb-info" ? "file" : "input"
        }
        {
            n = $1 + 0
            file = sprintf("%s/%07d", dir, n)
            if (n >= last) next
            if (n == 0) { msg = "offset 0: empty file" }
            else if (n < 256) { msg = "offset 0: the " hdr " has " n " bytes, fewer than the 256-byte header" }
            else if (cmd == "mlb-info") {
                for (i = 1; i <= k; i++) if (tend[name[i]] > n) break
                t = name[i]
                if (t == "layer_flags")
                    msg = "layer_flags (offset 256): " (b[i] - 256) " flag bytes do not fit in the file'"'"'s " n " bytes"
                else
                    msg = t " (offset " tstart[t] "): array ends at byte " tend[t] " but the file has " n " bytes (truncated, or the header is wrong)"
            } else {
                for (i = 1; i <= k; i++) if (b[i] > n) break
                msg = name[i] " (offset " n "): the input ends here, " (n < a[i] ? a[i] : b[i]) - n " bytes short (truncated file)"
            }
            print cmd ": " file ": ML_E_FORMAT: " msg
        }'
}

# mlt_cut_expect MLT CUTDIR N...: the line mlt-dump prints for each cut
# of MLT (mlt(5): a 32-byte header, n_vocab at 12 and n_merges at 16,
# tokens of at least 5 bytes, merges of 12).  The bound on the tokens is
# checked before they are walked, so the messages follow from the header;
# this holds while the tokens end before header + 5 n_vocab + 12 n_merges,
# which the helper checks.
mlt_cut_expect() {
    local mlt=$1 dir=$2 size nv nm
    shift 2
    size=$(file_size "$mlt")
    nv=$(get_u32 "$mlt" 12)
    nm=$(get_u32 "$mlt" 16)
    if ((size - 12 * nm > 32 + 5 * nv + 12 * nm)); then
        echo "mlt_cut_expect: $mlt has long tokens; the messages are not derived for it" >&2
        return 1
    fi
    printf '%s\n' "$@" | awk -v dir="$dir" -v size="$size" -v nv="$nv" -v nm="$nm" '{
        n = $1 + 0
        if (n >= size) next
        tok_end = size - 12 * nm
        if (n == 0) msg = "header (offset 0): the file has 0 bytes, fewer than the 32-byte header (empty file)"
        else if (n < 32) msg = "header (offset 0): the file has " n " bytes, fewer than the 32-byte header"
        else if (n < 32 + 5 * nv) msg = "n_vocab (offset 12): " nv " tokens need at least " 5 * nv " bytes, the file has " n - 32 " after the header"
        else if (n < 32 + 5 * nv + 12 * nm) msg = "n_merges (offset 16): " nm " merges need " 12 * nm " bytes, the file has at most " n - 32 - 5 * nv " after the tokens"
        else msg = "n_merges (offset 16): " nm " merges need " 12 * nm " bytes, " n - tok_end " remain after the tokens"
        printf "mlt-dump: %s/%07d: ML_E_FORMAT: %s\n", dir, n, msg
    }'
}

# seq_cuts SIZE STRIDE: 0..SIZE every STRIDE bytes, plus SIZE - 1 and SIZE.
seq_cuts() {
    seq 0 "$2" "$1"
    echo $(($1 - 1))
    echo "$1"
}

# tok_kvs: the GGUF key-value bytes of an 8-token SentencePiece-style
# tokenizer (<unk> <s> </s> ▁ a b ▁a ab; the scores order the merges
# ▁ a -> ▁a, a b -> ab), then a padding key that makes their length a
# multiple of 32, so that inserting them keeps the data section aligned.
tok_kvs() {
    local toks=("<unk>" "<s>" "</s>" $'\xe2\x96\x81' a b $'\xe2\x96\x81a' ab)
    local types=(2 3 3 1 1 1 1 1)
    local scores=(0 0 0 0xc0400000 0xc0800000 0xc0a00000 0xbf800000 0xc0000000)
    local t b pad
    b="$(gstr tokenizer.ggml.model)$(le32 8)$(gstr llama)"
    b+="$(gstr tokenizer.ggml.tokens)$(le32 9)$(le32 8)$(le64 ${#toks[@]})"
    for t in "${toks[@]}"; do b+="$(gstr "$t")"; done
    b+="$(gstr tokenizer.ggml.scores)$(le32 9)$(le32 6)$(le64 ${#scores[@]})"
    for t in "${scores[@]}"; do b+="$(le32 "$t")"; done
    b+="$(gstr tokenizer.ggml.token_type)$(le32 9)$(le32 5)$(le64 ${#types[@]})"
    for t in "${types[@]}"; do b+="$(le32 "$t")"; done
    b+="$(gstr tokenizer.ggml.bos_token_id)$(le32 4)$(le32 1)"
    b+="$(gstr tokenizer.ggml.eos_token_id)$(le32 4)$(le32 2)"
    # printf %b turns each \xNN into one byte: count bytes, not characters.
    local len
    len=$(printf '%b' "$b" | wc -c)
    # the padding key: 8 + 10 (name) + 4 (type) + 8 (length) + pad bytes
    pad=$(((32 - (len + 30) % 32) % 32))
    b+="$(gstr faults.pad)$(le32 8)$(gstr "$(printf "%${pad}s" "" | tr ' ' x)")"
    printf '%b' "$b"
}

# with_tokenizer SRC DST: a copy of SRC (a mk_gguf file, 10 keys) with the
# tokenizer of tok_kvs inserted before its keys.
with_tokenizer() {
    local kv="$2.kv"
    tok_kvs >"$kv"
    [[ $(($(file_size "$kv") % 32)) -eq 0 ]] || fail_with "tok_kvs: $(file_size "$kv") bytes"
    {
        head -c 16 "$1"
        printf '%b' "$(le64 17)"
        cat "$kv"
        tail -c +25 "$1"
    } >"$2"
    rm "$kv"
}

# private_dev PATH MAJOR MINOR: a character device of our own (1 3 is
# null, 1 7 is full), so that no test ever writes near /dev; skips the
# test where mknod is not allowed.
private_dev() {
    mknod "$1" c "$2" "$3" 2>/dev/null || skip "mknod is not allowed here (needs root)"
    [[ -c $1 ]] || fail_with "$1 is not a character device"
}

# no_temps DIR is in gguf2mlb.bash; no_output DIR NAME...: neither NAME
# nor a temporary file beside it exists in DIR.
no_output() {
    local dir=$1 n
    shift
    for n in "$@"; do
        [[ ! -e $dir/$n ]] || fail_with "$dir/$n was left behind"
    done
    no_temps "$dir"
}

# pipe_head BYTES CMD...: runs "CMD | head -c BYTES >/dev/null"; prints
# CMD's exit status, then its stderr.
pipe_head() {
    local n=$1 err="$BATS_TEST_TMPDIR/pipe.err"
    shift
    "$@" 2>"$err" | head -c "$n" >/dev/null
    echo "status ${PIPESTATUS[0]}"
    cat "$err"
}
