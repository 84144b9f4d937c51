# gguf2mlb.bash - helpers of gguf2mlb.bats: a llama GGUF written by bash
# alone (printf and head), so the command tests need neither Python nor
# committed GGUFs of a chosen size.  Every weight byte is 0x3c: as F16 that
# is 1.0586, as F32 0.0115, as Q8_0 a block of scale 1.0586 and quants 60;
# all finite, so the file converts.

# le32 V / le64 V: little-endian bytes as printf escapes.
le32() {
    printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 & 255)) $(($1 >> 8 & 255)) $(($1 >> 16 & 255)) \
        $(($1 >> 24 & 255))
}
le64() {
    le32 $(($1 & 0xffffffff))
    le32 $(($1 >> 32))
}
gstr() { # a GGUF string
    le64 ${#1}
    printf '%s' "$1"
}

# mk_gguf FILE TYPE DIM LAYERS HIDDEN VOCAB [ARCH]: a llama GGUF (heads of
# 16, kv heads a quarter of the heads) whose matrices are TYPE (f16 or
# q8_0); ARCH replaces general.architecture (the keys stay llama.*).
mk_gguf() {
    local file=$1 type=$2 dim=$3 layers=$4 hidden=$5 vocab=$6 arch=${7:-llama}
    local heads=$((dim / 16)) kvh=$((dim / 64 > 0 ? dim / 64 : 1))
    local gt ebytes
    case $type in
    f16) gt=1 ;;
    q8_0) gt=8 ;;
    *) echo "mk_gguf: type $type" >&2; return 1 ;;
    esac
    # bytes of a [cols, rows] matrix
    mbytes() { if [[ $gt == 1 ]]; then echo $(($1 * $2 * 2)); else echo $(($1 * $2 / 32 * 34)); fi; }
    local names=() dims=() types=() sizes=()
    addt() { names+=("$1"); dims+=("$2"); types+=("$3"); sizes+=("$4"); }
    addt token_embd.weight "$dim $vocab" $gt "$(mbytes "$dim" "$vocab")"
    addt output_norm.weight "$dim" 0 $((dim * 4))
    addt output.weight "$dim $vocab" $gt "$(mbytes "$dim" "$vocab")"
    local l kv=$((kvh * 16))
    for ((l = 0; l < layers; l++)); do
        addt "blk.$l.attn_norm.weight" "$dim" 0 $((dim * 4))
        addt "blk.$l.attn_q.weight" "$dim $dim" $gt "$(mbytes "$dim" "$dim")"
        addt "blk.$l.attn_k.weight" "$dim $kv" $gt "$(mbytes "$dim" "$kv")"
        addt "blk.$l.attn_v.weight" "$dim $kv" $gt "$(mbytes "$dim" "$kv")"
        addt "blk.$l.attn_output.weight" "$dim $dim" $gt "$(mbytes "$dim" "$dim")"
        addt "blk.$l.ffn_norm.weight" "$dim" 0 $((dim * 4))
        addt "blk.$l.ffn_gate.weight" "$dim $hidden" $gt "$(mbytes "$dim" "$hidden")"
        addt "blk.$l.ffn_up.weight" "$dim $hidden" $gt "$(mbytes "$dim" "$hidden")"
        addt "blk.$l.ffn_down.weight" "$hidden $dim" $gt "$(mbytes "$hidden" "$dim")"
    done
    local hdr i d off=0 pad
    {
        hdr="GGUF$(le32 3)$(le64 ${#names[@]})$(le64 10)"
        hdr+="$(gstr general.architecture)$(le32 8)$(gstr "$arch")"
        hdr+="$(gstr llama.block_count)$(le32 4)$(le32 "$layers")"
        hdr+="$(gstr llama.context_length)$(le32 4)$(le32 512)"
        hdr+="$(gstr llama.embedding_length)$(le32 4)$(le32 "$dim")"
        hdr+="$(gstr llama.feed_forward_length)$(le32 4)$(le32 "$hidden")"
        hdr+="$(gstr llama.attention.head_count)$(le32 4)$(le32 "$heads")"
        hdr+="$(gstr llama.attention.head_count_kv)$(le32 4)$(le32 "$kvh")"
        hdr+="$(gstr llama.attention.layer_norm_rms_epsilon)$(le32 6)$(le32 0x3727c5ac)"
        hdr+="$(gstr llama.rope.freq_base)$(le32 6)$(le32 0x461c4000)"
        hdr+="$(gstr general.name)$(le32 8)$(gstr bench)"
        printf '%b' "$hdr"
        for i in "${!names[@]}"; do
            set -- ${dims[$i]}
            hdr="$(gstr "${names[$i]}")$(le32 $#)"
            for d in "$@"; do hdr+="$(le64 "$d")"; done
            hdr+="$(le32 "${types[$i]}")$(le64 $off)"
            printf '%b' "$hdr"
            off=$((off + (sizes[i] + 31) / 32 * 32))
        done
    } >"$file"
    pad=$(((32 - $(stat -c %s "$file") % 32) % 32))
    head -c "$pad" /dev/zero >>"$file"
    for i in "${!names[@]}"; do
        head -c "${sizes[$i]}" /dev/zero | tr '\0' '\074' >>"$file"
        pad=$(((32 - sizes[i] % 32) % 32))
        head -c "$pad" /dev/zero >>"$file"
    done
}

# no_temps DIR: fails when a temporary output (NAME.tmp.XXXXXX) is left in DIR.
no_temps() {
    local left
    left=$(find "$1" -maxdepth 1 -name '*.tmp.*' | head -5)
    if [[ -n $left ]]; then
        echo "temporary files left: $left" >&2
        return 1
    fi
}

# mk_mli FILE N_LAYERS DIM HIDDEN: an .mli importance matrix (q_dim = dim)
# whose every sum is 1.0, counted over 10 tokens.
mk_mli() {
    local n=$(($2 * (3 * $3 + $4) + $3)) i one='\x00\x00\x00\x00\x00\x00\xf0\x3f' body=
    for ((i = 0; i < n; i++)); do body+=$one; done
    printf '%b' "MLI1$(le32 1)$(le32 "$2")$(le32 "$3")$(le32 "$4")$(le32 0)$(le64 10)$(le64 10)$body" >"$1"
}
