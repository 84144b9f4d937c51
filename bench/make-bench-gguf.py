#!/usr/bin/env python3
"""make-bench-gguf.py - a GGUF with random Q8_0 or Q4_0 weights in the shape
of a real model, for speed comparisons with llama.cpp (the values do not
matter for speed; llama.cpp and mlcore then run the very same weights,
since gguf2mlb copies Q8_0 and Q4_0 blocks losslessly).

    python3 bench/make-bench-gguf.py OUT.gguf --type q8_0 [--shape tinyllama|smollm2|gemma3|tiny]

tinyllama and smollm2 are llama-architecture models; gemma3 is Gemma 3
270M's text model (google/gemma-3-270m config.json): dim 640, 18 layers, 4
query heads and 1 KV head of 256, FFN 2048, vocabulary 262144, q/k norms,
post-norms, GELU, tied embeddings, and a 512-position sliding window on
five layers of every six (llama.cpp's pattern: layer i is global when
i % 6 == 5) with RoPE base 10000 there and 1e6 on the global layers.

Needs numpy and the gguf package (pip install numpy gguf).
"""
import argparse

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter

SHAPES = {  # dim, layers, heads, kv heads, hidden, vocab, ctx
    "tinyllama": (2048, 22, 32, 4, 5632, 32000, 2048),
    "smollm2": (576, 30, 9, 3, 1536, 49152, 8192),
    "gemma3": (640, 18, 4, 1, 2048, 262144, 32768),
    # Qwen2.5-0.5B's sizes as a llama (its q/k/v biases left out): every
    # layer attends to the whole context of 32768, where a deep token's
    # cache read weighs beside the weights' (Gemma 3 keeps a window of 512
    # in five layers of six)
    "qwen25": (896, 24, 14, 2, 4864, 151936, 32768),
    "tiny": (64, 2, 4, 2, 128, 512, 256),  # a test fixture, not a benchmark
}
GEMMA3_HEAD_DIM = 256
GEMMA3_WINDOW = 512


def blocks(rng, rows, cols, qtype, scale):
    """Raw GGUF blocks of a rows x cols matrix: f16 d, then the quants."""
    nb = rows * cols // 32
    d = (rng.uniform(0.5, 1.5, nb) * scale).astype("<f2").view(np.uint8).reshape(nb, 2)
    if qtype == "q8_0":
        q = rng.integers(-127, 128, (nb, 32), dtype=np.int8).view(np.uint8)
    else:
        q = rng.integers(0, 256, (nb, 16), dtype=np.uint8)
    return np.concatenate([d, q], axis=1).reshape(rows, -1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--type", choices=["q8_0", "q4_0"], default="q8_0")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="tinyllama")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    dim, n_layers, n_heads, n_kv, hidden, vocab, ctx = SHAPES[a.shape]
    gemma = a.shape == "gemma3"
    head = GEMMA3_HEAD_DIM if gemma else dim // n_heads
    rng = np.random.default_rng(a.seed)
    qt = GGMLQuantizationType.Q8_0 if a.type == "q8_0" else GGMLQuantizationType.Q4_0
    # Scales that keep activations near unit variance (quants are ~uniform).
    qstd = 73.3 if a.type == "q8_0" else 4.6

    w = GGUFWriter(a.out, "gemma3" if gemma else "llama")
    w.add_context_length(ctx)
    w.add_embedding_length(dim)
    w.add_block_count(n_layers)
    w.add_feed_forward_length(hidden)
    w.add_head_count(n_heads)
    w.add_head_count_kv(n_kv)
    if gemma:
        w.add_key_length(head)
        w.add_value_length(head)
        w.add_rope_freq_base(1000000.0)
        w.add_float32("gemma3.rope.freq_base_swa", 10000.0)
        w.add_sliding_window(GEMMA3_WINDOW)
        w.add_layer_norm_rms_eps(1e-6)
    else:
        w.add_rope_dimension_count(head)
        w.add_rope_freq_base(10000.0)
        w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("llama")
    # "▁t0", "▁t1", ...; the tiny fixture adds the 256 byte tokens and the
    # pieces "▁t" is built from, so that llama.cpp can encode any text.
    extra = ([("<0x%02X>" % b).encode() for b in range(256)] +
             [p.encode() for p in ["\u2581", "t", "\u2581t"] + list("0123456789")]
             if a.shape == "tiny" else [])
    n_t = vocab - 3 - len(extra)
    toks = [b"<unk>", b"<s>", b"</s>"] + extra + [("\u2581t%d" % i).encode() for i in range(n_t)]
    w.add_token_list(toks)
    w.add_token_scores([0.0] * 3 + [-1e6] * len(extra) + [-float(i) for i in range(n_t)])
    w.add_token_types([2, 3, 3] + [6 if t.startswith(b"<0x") else 1 for t in extra] + [1] * n_t)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)

    def mat(name, rows, cols):
        raw = blocks(rng, rows, cols, a.type, 1.0 / (qstd * np.sqrt(cols)))
        w.add_tensor(name, raw, raw_dtype=qt)

    def vec(name, n):
        w.add_tensor(name, np.ones(n, dtype=np.float32))

    mat("token_embd.weight", vocab, dim)
    for i in range(n_layers):
        p = "blk.%d." % i
        vec(p + "attn_norm.weight", dim)
        mat(p + "attn_q.weight", head * n_heads, dim)
        mat(p + "attn_k.weight", head * n_kv, dim)
        mat(p + "attn_v.weight", head * n_kv, dim)
        mat(p + "attn_output.weight", dim, head * n_heads)
        if gemma:
            vec(p + "attn_q_norm.weight", head)
            vec(p + "attn_k_norm.weight", head)
            vec(p + "post_attention_norm.weight", dim)
            vec(p + "post_ffw_norm.weight", dim)
        vec(p + "ffn_norm.weight", dim)
        mat(p + "ffn_gate.weight", hidden, dim)
        mat(p + "ffn_down.weight", dim, hidden)
        mat(p + "ffn_up.weight", hidden, dim)
    vec("output_norm.weight", dim)
    if not gemma:  # Gemma ties the classifier to the embedding
        mat("output.weight", vocab, dim)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
