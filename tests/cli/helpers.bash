# helpers.bash - shared by the command tests (load helpers).
#
# Needs MLCORE_BUILD, the absolute build directory (make cli sets it):
# the commands are taken from $MLCORE_BUILD/bin and the fixture writer
# from $MLCORE_BUILD/tests/mkmodel.  Fixtures are written once per file
# into $BATS_FILE_TMPDIR by make_fixtures (call it from setup_file);
# a test that mutates one works on a copy (mutant).  No Python: bytes
# are patched with printf + dd, CRCs come from gzip's trailer.

export LC_ALL=C

if [[ -z "${MLCORE_BUILD:-}" ]]; then
    echo "helpers.bash: MLCORE_BUILD is not set; run 'make cli' or" \
        "'MLCORE_BUILD=\$PWD/build bats tests/cli'" >&2
    return 1
fi
if [[ ! -d "$MLCORE_BUILD/bin" ]]; then
    echo "helpers.bash: $MLCORE_BUILD/bin is not a directory; build first (make all)" >&2
    return 1
fi
MKMODEL="$MLCORE_BUILD/tests/mkmodel"
if [[ ! -x "$MKMODEL" ]]; then
    echo "helpers.bash: $MKMODEL is missing; build it (make $MLCORE_BUILD/tests/mkmodel)" >&2
    return 1
fi
PATH="$MLCORE_BUILD/bin:$PATH"
export PATH MKMODEL

# Fixtures (made by make_fixtures).
TINY="$BATS_FILE_TMPDIR/tiny.mlb"    # preset tiny: Q8_0, f32 scales, no layer flags
FULL="$BATS_FILE_TMPDIR/full.mlb"    # preset full: every optional feature, flags 1,2,4,8
Q4="$BATS_FILE_TMPDIR/tiny-q4.mlb"   # preset tiny-q4: Q4_0 + Q8_0 classes, f16 scales, shared classifier

make_fixtures() {
    "$MKMODEL" -o "$TINY" --preset tiny
    "$MKMODEL" -o "$FULL" --preset full
    "$MKMODEL" -o "$Q4" --preset tiny-q4
}

# The header fields of mlb(5) in file order: name:offset:type (c chars,
# u u32, f f32).  Stated here again, independently of the library's table.
MLB_FIELDS=(
    magic:0:c version:4:u dim:8:u n_layers:12:u n_heads:16:u n_kv_heads:20:u
    hidden_dim:24:u vocab:28:u max_seq:32:u rope_theta:36:f norm_eps:40:f wtype:44:u
    shared_classifier:48:u rope_type:52:u rope_factor:56:f rope_low_freq_factor:60:f
    rope_high_freq_factor:64:f rope_orig_max_seq:68:u q8_mask:72:u qkv_bias:76:u
    head_dim:80:u qk_norm:84:u rope_attn_factor:88:f sliding_window:92:u layer_flags:96:u
    rope_local_theta:100:f act:104:u post_norms:108:u embed_scale:112:f attn_scale:116:f
    scale_f16:120:u attn_softcap:124:f final_softcap:128:f rot_dim:132:u attn_gate:136:u
    lin_k_heads:140:u lin_v_heads:144:u lin_k_dim:148:u lin_v_dim:152:u lin_conv:156:u
    pooling:160:u n_experts:164:u n_experts_used:168:u expert_hidden_dim:172:u
    moe_gating:176:u moe_flags:180:u expert_scale:184:f shared_hidden_dim:188:u
    swiglu_alpha:192:f swiglu_limit:196:f attn_sinks:200:u o_bias:204:u
)

# field_offset NAME: the header offset of a field.
field_offset() {
    local f
    for f in "${MLB_FIELDS[@]}"; do
        if [[ ${f%%:*} == "$1" ]]; then
            f=${f#*:}
            echo "${f%%:*}"
            return 0
        fi
    done
    echo "field_offset: no field '$1'" >&2
    return 1
}

# mutant SRC [NAME]: a private copy of a fixture in $BATS_TEST_TMPDIR; prints its path.
mutant() {
    local dst="$BATS_TEST_TMPDIR/${2:-$(basename "$1")}"
    cp "$1" "$dst" && echo "$dst"
}

# patch_hex FILE OFFSET HEX: overwrites bytes at OFFSET with HEX, given in
# file order ("7fc0" writes 0x7f then 0xc0).  The file keeps its size
# unless the bytes go past its end.
patch_hex() {
    local file=$1 off=$2 hex=$3 esc=
    if [[ ! $hex =~ ^([0-9a-fA-F]{2})+$ ]]; then
        echo "patch_hex: '$hex' is not an even number of hex digits" >&2
        return 1
    fi
    while [[ -n $hex ]]; do
        esc+="\\x${hex:0:2}"
        hex=${hex:2}
    done
    # shellcheck disable=SC2059 # the format is the escaped bytes
    printf "$esc" | dd of="$file" bs=1 seek="$off" conv=notrunc status=none
}

# le32_hex VALUE: the 8 hex digits of a u32 in little-endian byte order.
le32_hex() {
    local v=$(($1))
    printf '%02x%02x%02x%02x' $((v & 255)) $((v >> 8 & 255)) $((v >> 16 & 255)) $((v >> 24 & 255))
}

# f32_bits VALUE: the IEEE binary32 bits of VALUE as 8 hex digits (most
# significant first).  VALUE is a decimal number (normal range, rounded
# half up), 0x........ (raw bits), nan, inf, -inf or -0.
f32_bits() {
    case $1 in
    0x*) printf '%08x\n' $(($1)) ;;
    nan | NaN) echo 7fc00000 ;;
    inf | +inf) echo 7f800000 ;;
    -inf) echo ff800000 ;;
    -0 | -0.0) echo 80000000 ;;
    *)
        awk -v x="$1" 'BEGIN {
            x += 0; s = 0
            if (x < 0) { s = 1; x = -x }
            if (x == 0) { printf "%04x0000\n", s * 32768; exit }
            e = 0
            while (x >= 2) { x /= 2; e++ }
            while (x < 1) { x *= 2; e-- }
            m = int((x - 1) * 8388608 + 0.5)
            if (m == 8388608) { m = 0; e++ }
            if (e < -126 || e > 127) { print "f32_bits: out of the normal range" > "/dev/stderr"; exit 1 }
            printf "%04x%04x\n", s * 32768 + (e + 127) * 128 + int(m / 65536), m % 65536
        }'
        ;;
    esac
}

# put_u32 FILE OFFSET VALUE / put_f32 FILE OFFSET VALUE: little-endian.
put_u32() {
    patch_hex "$1" "$2" "$(le32_hex "$3")"
}
put_f32() {
    local bits
    bits=$(f32_bits "$3") || return 1
    put_u32 "$1" "$2" "0x$bits"
}

# set_field FILE NAME VALUE: writes a header field by its spec name.
set_field() {
    local f off type
    for f in "${MLB_FIELDS[@]}"; do
        [[ ${f%%:*} == "$2" ]] || continue
        off=${f#*:}
        type=${off#*:}
        off=${off%%:*}
        case $type in
        u) put_u32 "$1" "$off" "$3" ;;
        f) put_f32 "$1" "$off" "$3" ;;
        c) patch_hex "$1" "$off" "$3" ;;
        esac
        return
    done
    echo "set_field: no field '$2'" >&2
    return 1
}

# get_u32 FILE OFFSET (the library needs a little-endian host, so od's
# host order is little-endian too).
get_u32() {
    od -An -tu4 -j "$2" -N4 "$1" | tr -d ' '
}

# file_size FILE
file_size() {
    wc -c <"$1" | tr -d ' '
}

# crc32: the CRC-32 (zlib polynomial) of stdin, as 8 hex digits, taken
# from the trailer gzip writes (CRC-32, then the length, little-endian).
crc32() {
    gzip -c | tail -c 8 | head -c 4 | od -An -tx4 | tr -d ' \n'
    echo
}

# bytes_at FILE OFFSET LENGTH: those bytes on stdout.
bytes_at() {
    tail -c +$(($2 + 1)) "$1" | head -c "$3"
}

# tensor FILE NAME [KEY]: a tensor's JSON object from mlb-info --json, or
# one key of it (raw).
tensor() {
    if [[ -n ${3:-} ]]; then
        mlb-info --json "$1" | jq -er --arg n "$2" --arg k "$3" '.tensors[] | select(.name == $n) | .[$k]'
    else
        mlb-info --json "$1" | jq -ec --arg n "$2" '.tensors[] | select(.name == $n)'
    fi
}

# section_value SECTION KEY: the value column of "  KEY  VALUE ..." in the
# given section of mlb-info's human output (in $output).  Sections are the
# lines that do not start with a space.
section_value() {
    awk -v s="$1" -v k="$2" '
        /^[^ ]/ { cur = $1; next }
        cur == s && $1 == k { print $2; exit }' <<<"$output"
}

# fail_with MESSAGE: fails the current test with a message on stderr.
fail_with() {
    echo "$*" >&2
    return 1
}

# has_line REGEX LINE...: some LINE matches REGEX (else prints them and fails).
has_line() {
    local re=$1 l
    shift
    for l in "$@"; do
        [[ $l =~ $re ]] && return 0
    done
    echo "no line matches /$re/ in:" >&2
    printf '  %s\n' "$@" >&2
    return 1
}

# wait_for_file GLOB PID: waits until a file matching GLOB exists, then
# freezes PID (SIGSTOP), so that a signal sent next lands while the file
# is open.  It waits on the file, not on the clock: the 300 s bound only
# turns a command that never writes into a failure, on any machine.
wait_for_file() {
    local glob=$1 pid=$2 end=$((SECONDS + 300))
    until compgen -G "$glob" >/dev/null; do
        ((SECONDS < end)) || fail_with "no file $glob after 300 s" || return 1
        kill -0 "$pid" 2>/dev/null || fail_with "process $pid ended before $glob appeared" || return 1
        sleep 0.005
    done
    kill -STOP "$pid"
    compgen -G "$glob" >/dev/null || fail_with "$glob gone when $pid was stopped"
}
