#!/usr/bin/env bash
# bench-gguf2mlb.sh - speed of gguf2mlb on two synthetic llama GGUFs:
#
#   1. the lossless path: a 1.1 GiB Q8_0 GGUF in TinyLlama-1.1B's shape
#      converted to Q8_0 (blocks copied), next to copying the same file
#      (cp + sync, since gguf2mlb syncs its output) and to `cat > /dev/null`;
#   2. requantization: an F16 GGUF (245 M parameters, 0.5 GB) converted to
#      Q4_0 with the fit rule on 2 threads, next to llama.cpp's
#      llama-quantize to Q4_0 (--pure, 2 threads) on the same file, printed
#      as a ratio.  llama-quantize uses ggml's rounding rule, which is what
#      gguf2mlb --q4-rule round does: that row is printed too.
#
# The GGUFs are written once by the Python (numpy) generator below into
# BENCH_DIR and reused.  All runs are warm-cache (each input is read once
# first).
#
#   MLCORE_BUILD=build bash bench/bench-gguf2mlb.sh
#   BENCH_DIR=/tmp RUNS=3 LLAMA_QUANTIZE=/path/to/llama-quantize ...
set -euo pipefail
B=${MLCORE_BUILD:-build}
DIR=${BENCH_DIR:-/tmp}
RUNS=${RUNS:-2}
LQ=${LLAMA_QUANTIZE:-/tmp/lcp/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin/llama-quantize}
Q8="$DIR/mlcore-bench-tinyllama-q8_0.gguf"
F16="$DIR/mlcore-bench-250m-f16.gguf"
OUT="$DIR/mlcore-bench-out"

# gen FILE TYPE DIM LAYERS HEADS KV_HEADS HIDDEN VOCAB: a llama GGUF with
# random weights (Q8_0: uniform quants in [-127, 127] and small f16
# scales; F16: normal, sd 0.02), F32 norms of 1, a dummy SentencePiece
# vocabulary so that llama.cpp's tools accept the file.
gen() {
    python3 - "$@" <<'EOF'
import struct, sys
import numpy as np

path, typ, dim, layers, heads, kvh, hidden, vocab = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
rng = np.random.default_rng(1)
ALIGN = 32

def s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b

kvs = []
def kv(key, t, payload):
    kvs.append(s(key) + struct.pack("<I", t) + payload)

U32, F32, STR, ARR, I32, BOOL = 4, 6, 8, 9, 5, 7
kv("general.architecture", STR, s("llama"))
kv("general.name", STR, s("mlcore bench"))
for k, v in [("block_count", layers), ("context_length", 2048), ("embedding_length", dim),
             ("feed_forward_length", hidden), ("attention.head_count", heads),
             ("attention.head_count_kv", kvh), ("rope.dimension_count", dim // heads)]:
    kv("llama." + k, U32, struct.pack("<I", v))
kv("llama.attention.layer_norm_rms_epsilon", F32, struct.pack("<f", 1e-5))
kv("llama.rope.freq_base", F32, struct.pack("<f", 10000.0))
toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % i for i in range(256)]
toks += ["t%d" % i for i in range(vocab - len(toks))]
kv("tokenizer.ggml.model", STR, s("llama"))
kv("tokenizer.ggml.tokens", ARR, struct.pack("<IQ", STR, vocab) + b"".join(s(t) for t in toks))
kv("tokenizer.ggml.scores", ARR, struct.pack("<IQ", F32, vocab) +
   np.arange(vocab, dtype="<f4").__neg__().tobytes())
ttype = np.ones(vocab, dtype="<i4"); ttype[0] = 2; ttype[1:3] = 3; ttype[3:259] = 6
kv("tokenizer.ggml.token_type", ARR, struct.pack("<IQ", I32, vocab) + ttype.tobytes())
kv("tokenizer.ggml.bos_token_id", U32, struct.pack("<I", 1))
kv("tokenizer.ggml.eos_token_id", U32, struct.pack("<I", 2))
kv("general.file_type", U32, struct.pack("<I", 7 if typ == "q8_0" else 1))

hd = dim // heads
mats = [("token_embd.weight", dim, vocab)]
vecs = [("output_norm.weight", dim)]
for l in range(layers):
    p = "blk.%d." % l
    vecs += [(p + "attn_norm.weight", dim), (p + "ffn_norm.weight", dim)]
    mats += [(p + "attn_q.weight", dim, dim), (p + "attn_k.weight", dim, kvh * hd),
             (p + "attn_v.weight", dim, kvh * hd), (p + "attn_output.weight", dim, dim),
             (p + "ffn_gate.weight", dim, hidden), (p + "ffn_up.weight", dim, hidden),
             (p + "ffn_down.weight", hidden, dim)]
mats.append(("output.weight", dim, vocab))

def nbytes(cols, rows):
    return rows * cols // 32 * 34 if typ == "q8_0" else rows * cols * 2

tensors = [(n, [c], 0, c * 4) for n, c in vecs]
tensors += [(n, [c, r], 8 if typ == "q8_0" else 1, nbytes(c, r)) for n, c, r in mats]
head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs)
off = 0
for name, dims, t, nb in tensors:
    head += s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
    head += struct.pack("<IQ", t, off)
    off += (nb + ALIGN - 1) // ALIGN * ALIGN
with open(path, "wb") as f:
    f.write(head + b"\0" * (-len(head) % ALIGN))
    for name, dims, t, nb in tensors:
        if t == 0:
            data = np.ones(dims[0], dtype="<f4").tobytes()
        elif typ == "q8_0":
            nblk = nb // 34
            blk = np.empty((nblk, 34), dtype=np.uint8)
            d = (rng.random(nblk, dtype=np.float32) * 0.004 + 0.001).astype("<f2")
            blk[:, :2] = d.view(np.uint8).reshape(nblk, 2)
            blk[:, 2:] = rng.integers(-127, 128, size=(nblk, 32), dtype=np.int8).view(np.uint8)
            data = blk.tobytes()
        else:
            data = (rng.standard_normal(nb // 2, dtype=np.float32) * 0.02).astype("<f2").tobytes()
        f.write(data + b"\0" * (-len(data) % ALIGN))
EOF
}

if [ ! -f "$Q8" ]; then
    echo "writing $Q8 ..." >&2
    gen "$Q8" q8_0 2048 22 32 4 5632 32000
fi
if [ ! -f "$F16" ]; then
    echo "writing $F16 ..." >&2
    gen "$F16" f16 1024 16 16 4 2816 32000
fi
cat "$Q8" "$F16" > /dev/null # warm the page cache

# best "WALL CPU" seconds over $RUNS runs of "$@" (CPU: user + system of
# the command and its children, so a loaded machine shows in WALL only)
best() {
    local b="" c="" t0 t1 t u0 u1 cpu me=$BASHPID
    for _ in $(seq "$RUNS"); do
        rm -f "$OUT"
        u0=$(awk '{ print $14 + $15 + $16 + $17 }' /proc/$me/stat)
        t0=$(date +%s.%N)
        "$@" > /dev/null
        t1=$(date +%s.%N)
        u1=$(awk '{ print $14 + $15 + $16 + $17 }' /proc/$me/stat)
        t=$(awk "BEGIN { print $t1 - $t0 }")
        cpu=$(awk -v a="$u0" -v b="$u1" -v hz="$(getconf CLK_TCK)" 'BEGIN { print (b - a) / hz }')
        if [ -z "$b" ] || awk "BEGIN { exit !($t < $b) }"; then b=$t c=$cpu; fi
    done
    rm -f "$OUT"
    echo "$b $c"
}

row() { # NAME "WALL CPU" BYTES REFERENCE-WALL
    set -- "$1" $2 "$3" "$4"
    awk -v n="$1" -v t="$2" -v cpu="$3" -v s="$4" -v c="$5" \
        'BEGIN { printf "%-44s %9.3f %9.3f %9.0f %8.2f\n", n, t, cpu, s / t / 1e6, c / t }'
}

copy_sync() { cat "$Q8" > "$OUT" && sync "$OUT"; }
catf() { cat "$Q8"; }
conv_q8() { "$B/bin/gguf2mlb" -q -f --no-tokenizer -o "$OUT" "$Q8"; }
conv_q8_stdout() { "$B/bin/gguf2mlb" -q --no-tokenizer -o - "$Q8"; }

size=$(stat -c %s "$Q8")
echo "1. lossless: $(basename "$Q8") ($size bytes) to Q8_0"
printf '%-44s %9s %9s %9s %8s\n' "command" "wall s" "cpu s" "MB/s" "vs copy"
r_cp=$(best copy_sync)
t_cp=${r_cp% *}
row "cat FILE > OUT && sync OUT" "$r_cp" "$size" "$t_cp"
row "cat FILE > /dev/null" "$(best catf)" "$size" "$t_cp"
row "gguf2mlb -o OUT FILE" "$(best conv_q8)" "$size" "$t_cp"
row "gguf2mlb -o - FILE > /dev/null" "$(best conv_q8_stdout)" "$size" "$t_cp"

size=$(stat -c %s "$F16")
echo
echo "2. requantization: $(basename "$F16") ($size bytes) to Q4_0, 2 threads"
conv_fit() { "$B/bin/gguf2mlb" -q -f --no-tokenizer --wtype q4_0 --q4-rule fit --threads 2 -o "$OUT" "$F16"; }
conv_round() { "$B/bin/gguf2mlb" -q -f --no-tokenizer --wtype q4_0 --q4-rule round --threads 2 -o "$OUT" "$F16"; }
lq() { "$LQ" --pure "$F16" "$OUT" Q4_0 2 > /dev/null 2>&1; }
printf '%-44s %9s %9s %9s %8s\n' "command" "wall s" "cpu s" "MB/s" "vs llama"
if [ -x "$LQ" ]; then
    r_lq=$(best lq)
    row "llama-quantize --pure FILE OUT Q4_0 2" "$r_lq" "$size" "${r_lq% *}"
else
    echo "(llama-quantize not found at $LQ; set LLAMA_QUANTIZE)"
    r_lq="0 0"
fi
r_fit=$(best conv_fit)
r_round=$(best conv_round)
row "gguf2mlb --q4-rule fit --threads 2" "$r_fit" "$size" "${r_lq% *}"
row "gguf2mlb --q4-rule round --threads 2" "$r_round" "$size" "${r_lq% *}"
if [ "$r_lq" != "0 0" ]; then
    awk -v f="$r_fit" -v r="$r_round" -v l="$r_lq" 'BEGIN {
        split(f, F, " "); split(r, R, " "); split(l, L, " ")
        printf "ratio gguf2mlb / llama-quantize (wall; cpu): fit %.2f; %.2f, round %.2f; %.2f (lower is faster)\n",
            F[1] / L[1], F[2] / L[2], R[1] / L[1], R[2] / L[2] }'
fi
echo "best of $RUNS warm-cache runs; inputs in $DIR" >&2
