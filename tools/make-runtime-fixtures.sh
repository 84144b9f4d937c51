#!/usr/bin/env bash
# make-runtime-fixtures.sh - synthetic models covering every runtime feature
# of dense attention, and their expected logits from tools/mlb.py (the
# numpy reference written from the spec).  Output: tests/fixtures/runtime/
# NAME.mlb, NAME.ids (the prompt, one id per line) and NAME.f32 (logits,
# n x vocab little-endian float32).  Needs numpy and a built tests/mkmodel.
#
#   tools/make-runtime-fixtures.sh [BUILD_DIR]
set -euo pipefail
B=${1:-build}
OUT=tests/fixtures/runtime
mkdir -p "$OUT"
MK="$B/tests/mkmodel"

base="dim=64 n_layers=2 n_heads=4 n_kv_heads=2 hidden_dim=96 vocab=96 max_seq=128 rope_theta=10000 norm_eps=1e-5"
declare -A M=(
  [llama-q8]="$base wtype=1"
  [llama-q4]="$base wtype=2 scale_f16=1 shared_classifier=1 q8_mask=1"
  [llama3-rope]="$base wtype=1 rope_theta=500000 rope_type=1 rope_factor=8 rope_low_freq_factor=1 rope_high_freq_factor=4 rope_orig_max_seq=16"
  [linear-rope]="$base wtype=2 rope_type=2 rope_factor=4"
  [yarn-rope]="$base wtype=1 rope_type=3 rope_factor=4 rope_low_freq_factor=32 rope_high_freq_factor=1 rope_orig_max_seq=32 rope_attn_factor=1.1386"
  [qwen]="$base wtype=1 n_layers=3 qkv_bias=1 qk_norm=1 head_dim=32 rope_theta=1000000 q8_mask=0"
  [gemma]="$base wtype=2 n_layers=4 rope_theta=1000000 act=1 post_norms=1 embed_scale=8 attn_scale=0.0625 attn_softcap=50 final_softcap=30 sliding_window=8 rope_local_theta=10000 head_dim=32 qk_norm=1 q8_mask=65"
  [gated]="$base wtype=1 attn_gate=1 rot_dim=8 head_dim=32 qk_norm=1"
  [window]="$base wtype=1 sliding_window=6"
  [qwen35]="$base wtype=2 n_layers=4 head_dim=32 qk_norm=1 attn_gate=1 rot_dim=8 rope_theta=1000000 scale_f16=1 lin_k_heads=2 lin_v_heads=4 lin_k_dim=16 lin_v_dim=16 lin_conv=4 q8_mask=0 norm_eps=1e-6"
)
declare -A FLAGS=([gemma]="3,3,0,4" [window]="" [qwen35]="8,8,8,0")
for name in "${!M[@]}"; do
  flags=()
  if [ -n "${FLAGS[$name]:-}" ]; then flags=(--flags "${FLAGS[$name]}"); fi
  # shellcheck disable=SC2086
  "$MK" -o "$OUT/$name.mlb" --seed 7 "${flags[@]}" ${M[$name]}
  # A prompt longer than every window: 40 ids.
  seq 0 39 | awk -v v=96 '{ print ($1 * 37 + 11) % v }' > "$OUT/$name.ids"
  python3 tools/mlb.py logits "$OUT/$name.mlb" $(cat "$OUT/$name.ids") > "$OUT/$name.f32"
  case $name in llama-q8|qwen35|gemma)
    python3 tools/mlb.py imatrix "$OUT/$name.mlb" $(cat "$OUT/$name.ids") > "$OUT/$name.mli" ;;
  esac
  echo "$name: $(stat -c %s "$OUT/$name.mlb") bytes"
done
