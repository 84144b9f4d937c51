# shellcheck shell=bash
# limits.sh - sourced by the bench scripts: the machine's limits and a
# model's work per token, to set measured speeds against.
#
#   limits_build DIR       compiles bandwidth.c and int8peak.c into DIR
#   limits_int8 DIR T      runs int8peak with T threads; sets int8_peak
#                          (GOP/s, the fastest instruction set), int8_isa,
#                          int8_all ("isa GOP/s, ..." of every set) and
#                          int8_rule3 (vpdpbusd zmm with rule 3's float
#                          steps: the AVX-512 tiles' ceiling; empty
#                          without AVX-512 VNNI)
#   rule3_note             a phrase for the header: that ceiling
#   decode_bytes MLB       prints the bytes of weights one decoded token
#                          reads: the file less the embedding table (one
#                          row of it is read), unless the embedding is also
#                          the classifier (Gemma), which reads all of it,
#                          and less the experts a token does not use (of
#                          a mixture of experts, n_experts_used of
#                          n_experts are read)
#   matmul_weights MLB     prints "PER_TOKEN CLASSIFIER": the weights each
#                          prompt token multiplies (every matrix but the
#                          embedding table and the classifier; of the
#                          experts, the share a token uses) and the
#                          classifier's (the tied embedding, or wcls), from
#                          `mlb-info --json` tensor shapes; needs $B
#   pp_of_peak TPS P PER_TOKEN CLASSIFIER [GOPS]
#                          prefill's int8 work per second as a fraction of
#                          int8_peak (or GOPS): 2 ops a multiply-add, PER_TOKEN for
#                          each of the P tokens, the classifier once (only
#                          the last token's logits are computed, by both
#                          ml-run and llama-bench)
limits_build() {
    local here
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    cc -O2 -pthread "$here/bandwidth.c" -o "$1/mlcore-bandwidth"
    cc -O2 -pthread "$here/int8peak.c" -o "$1/mlcore-int8peak"
}

limits_int8() {
    local out
    out=$("$1/mlcore-int8peak" -t "$2")
    int8_peak=$(echo "$out" | awk '$1 == "peak" { print $4 }')
    # shellcheck disable=SC2034 # read by the scripts that source this
    int8_isa=$(echo "$out" | awk '$1 == "peak" { print $2 }')
    # shellcheck disable=SC2034
    int8_all=$(echo "$out" | awk '$1 != "peak" && $1 !~ /^rule3/ { printf "%s%s %.0f", s, $1, $3; s = ", " }')
    # shellcheck disable=SC2034
    int8_rule3=$(echo "$out" | awk '$1 == "rule3-512" { print $3 }')
}

# What rule 3 leaves of the peak on this machine, for the header line.
rule3_note() {
    if [ -n "$int8_rule3" ]; then
        awk -v r="$int8_rule3" -v p="$int8_peak" \
            'BEGIN { printf "; with rule 3'"'"'s float steps beside them %.1f GOP/s, %.2f of it", r, r / p }'
    fi
}

# An expert's tensors are named blk.L.exp.E.*; the share of them a token
# reads (or multiplies) is n_experts_used / n_experts.
decode_bytes() {
    local skip
    skip=$("$B/bin/mlb-info" --json "$1" | python3 -c '
import json, sys
j = json.load(sys.stdin)
h = j["header"]
size = lambda t: t["bytes"] + t.get("scale_bytes", 0)
e = [x for x in j["tensors"] if x["name"] == "tok_emb"][0]
skip = 0 if h["shared_classifier"] else size(e)
if h.get("n_experts"):
    exp = sum(size(t) for t in j["tensors"] if ".exp." in t["name"])
    skip += exp * (1 - h["n_experts_used"] / h["n_experts"])
print(int(skip))')
    echo $(($(stat -L -c %s "$1") - skip))
}

matmul_weights() {
    "$B/bin/mlb-info" --json "$1" | python3 -c '
import json, sys
j = json.load(sys.stdin)
h = j["header"]
share = h["n_experts_used"] / h["n_experts"] if h.get("n_experts") else 1
count = lambda t: t["shape"][0] * t["shape"][1] * (share if ".exp." in t["name"] else 1)
mats = {t["name"]: count(t) for t in j["tensors"] if len(t["shape"]) == 2}
cls = mats.pop("wcls", None)
emb = mats.pop("tok_emb")
print(int(sum(mats.values())), emb if h["shared_classifier"] else cls)'
}

pp_of_peak() {
    awk -v t="$1" -v p="$2" -v w="$3" -v c="$4" -v g="${5:-$int8_peak}" \
        'BEGIN { printf "%.3f", 2 * (w * p + c) / p * t / (g * 1e9) }'
}
