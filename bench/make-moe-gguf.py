#!/usr/bin/env python3
"""make-moe-gguf.py - mixture-of-experts GGUFs in real models' shapes with
random weights, for timing the experts' prefill and decode against
llama.cpp (docs/speed.md, "Mixtures of experts"), not fixtures.

    python3 bench/make-moe-gguf.py OUT.gguf [LAYERS] [--arch ARCH] [--mix GGUF]
                                   [--mini]

  --arch qwen3moe  Qwen3-30B-A3B (dim 2048, 32/4 heads of 128, 128 experts
                   of width 768, 8 used); LAYERS defaults to 4 (2.65 GB in
                   Q8_0), 48 is the real depth
  --arch gpt-oss   gpt-oss-20b (dim 2880, 64/8 heads of 64, 32 experts of
                   width 2880, 4 used, sinks, window 128 on even layers,
                   YaRN); LAYERS defaults to 24, the real depth
  --mix GGUF       each matrix in the type GGUF gives the tensor of the same
                   name: llama-quantize's choice for a file type, taken from
                   its output for a --mini file of the same depth (Q4_K_M
                   puts Q6_K on some layers' attn_v and ffn_down: rules that
                   depend on the depth and the names, not the widths)
  --mxfp4          gpt-oss's MXFP4_MOE mix (experts MXFP4, other matrices
                   Q8_0), as tools/make-moe-fixtures.py writes it
  --mini           the same depth, names and expert count with every width
                   256 (the least a K-quant row takes): a file to run
                   llama-quantize on for --mix
Without --mix or --mxfp4 every matrix is Q8_0.

The blocks are drawn directly (random quants, scales that keep a product's
output near unit scale): quantizing billions of floats in numpy would take
hours.  They are written one tensor at a time, so a 30B file needs no
more memory than its largest expert stack.  Metadata, tensor names and
the tokenizer are tools/make-moe-fixtures.py's.
"""
import argparse
import importlib.util
import math
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
spec_ = importlib.util.spec_from_file_location("mmf", HERE.parent / "tools" / "make-moe-fixtures.py")
mmf = importlib.util.module_from_spec(spec_)
spec_.loader.exec_module(mmf)
import gguf  # noqa: E402  (after the fixture module, which may point at llama.cpp's gguf-py)

Q = gguf.GGMLQuantizationType

SHAPES = {
    "qwen3moe": dict(mmf.QWEN3MOE, dim=2048, n_layer=4, n_head=32, n_head_kv=4, head_dim=128,
                     n_expert=128, n_used=8, n_ff_exp=768, n_ff_dense=6144, ctx=4096,
                     real_vocab=151936),
    "gpt-oss": dict(mmf.GPT_OSS, dim=2880, n_layer=24, n_head=64, n_head_kv=8, head_dim=64,
                    n_expert=32, n_used=4, n_ff_exp=2880, window=128, yarn_orig=4096,
                    ctx=131072, real_vocab=201088),
}
MINI = dict(dim=256, n_head=2, n_head_kv=1, head_dim=128, n_ff_exp=256, n_ff_dense=256)
TENSORS = {"qwen3moe": mmf.qwen3moe_tensors, "gpt-oss": mmf.gpt_oss_tensors}


# A block's bytes: (quants drawn as random bytes, then the scale fields set).
# The root mean square of a weight is scale x RMS(level) x RMS(sub-scale):
# each type's constant below is that product for unit scale.
def f16(x):
    return x.astype("<f2").view(np.uint8).reshape(-1, 2)


def random_blocks(rng, rows, cols, qt, rms):
    bs, bb = gguf.GGML_QUANT_SIZES[qt]
    nb = rows * cols // bs
    raw = np.frombuffer(rng.bytes(nb * bb), np.uint8).reshape(nb, bb).copy()
    jitter = rng.uniform(0.5, 1.5, nb)
    if qt == Q.Q8_0:      # d, 32 int8 quants (uniform: RMS 73)
        raw[:, 0:2] = f16(jitter * rms / 73.0)
    elif qt == Q.Q4_K:    # d, dmin, 12 bytes of 6-bit scales and mins, 4-bit quants
        d = jitter * rms / (36.4 * 4.6)
        raw[:, 0:2], raw[:, 2:4] = f16(d), f16(d * 7.5)
    elif qt == Q.Q5_K:    # d, dmin, scales, high bits, low nibbles
        d = jitter * rms / (36.4 * 9.2)
        raw[:, 0:2], raw[:, 2:4] = f16(d), f16(d * 15.5)
    elif qt == Q.Q6_K:    # low nibbles, high pairs, 16 int8 scales, d last
        raw[:, 208:210] = f16(jitter * rms / (73.9 * 18.5))
    elif qt == Q.MXFP4:   # e8m0 exponent (a level is x 2^(e-128)), 4-bit levels (RMS 5.85)
        e = np.rint(128 + np.log2(jitter * rms / 5.85))
        raw[:, 0] = np.clip(e, 1, 254).astype(np.uint8)
    else:
        raise SystemExit(f"make-moe-gguf: no random blocks for {qt.name}")
    return raw.reshape(rows, -1)


def pad_vocab(tok, n):
    """The fixtures' small vocabulary padded with plain tokens no merge
    reaches, to the real model's size: its embedding and classifier (read
    whole by every decoded token) are then the real ones' size."""
    pad = [f"pad{i}" for i in range(n - len(tok["tokens"]))]
    return dict(tok, tokens=tok["tokens"] + pad, types=tok["types"] + [1] * len(pad))


def read_mix(path):
    """Each tensor's type and the file type of a GGUF."""
    r = gguf.GGUFReader(path)
    ftype = int(r.fields["general.file_type"].parts[-1][0])
    return {t.name: Q(t.tensor_type) for t in r.tensors}, gguf.LlamaFileType(ftype)


def matrix_type(name, shape, a):
    if a.mix is not None:
        if name not in a.mix:
            raise SystemExit(f"make-moe-gguf: {a.mix_path} has no tensor {name}")
        return a.mix[name]
    return mmf.tensor_type(gguf, name, shape, "mxfp4" if a.mxfp4 else "q8_0")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("layers", nargs="?", type=int)
    ap.add_argument("--arch", choices=sorted(SHAPES), default="qwen3moe")
    ap.add_argument("--mix", dest="mix_path")
    ap.add_argument("--mxfp4", action="store_true")
    ap.add_argument("--mini", action="store_true")
    a = ap.parse_args()
    spec = dict(SHAPES[a.arch])
    if a.layers:
        spec["n_layer"] = a.layers
    if a.mini:
        spec.update(MINI)
    a.mix, ftype = read_mix(a.mix_path) if a.mix_path else (None, gguf.LlamaFileType.MOSTLY_Q8_0)
    if a.mxfp4:
        ftype = gguf.LlamaFileType.MOSTLY_MXFP4_MOE
    tok = pad_vocab(mmf.tokenizer_for(gguf, spec), spec["real_vocab"])
    spec["vocab"] = len(tok["tokens"])
    rng = np.random.default_rng(1)
    w = gguf.GGUFWriter(a.out, spec["arch"])
    mmf.add_metadata(gguf, w, spec, tok, None)
    w.add_file_type(ftype)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    plan = []
    for name, shape, role in TENSORS[spec["arch"]](spec):
        qt = matrix_type(name, shape, a)
        if qt == Q.F32:
            nbytes = 4 * int(np.prod(shape))
            w.add_tensor_info(name, shape, np.dtype(np.float32), nbytes)
        else:
            bs, bb = gguf.GGML_QUANT_SIZES[qt]
            byte_shape = (*shape[:-1], shape[-1] // bs * bb)
            w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), int(np.prod(byte_shape)),
                              raw_dtype=qt)
        plan.append((name, shape, role, qt))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for name, shape, role, qt in plan:
        if qt == Q.F32:
            w.write_tensor_data(mmf.random_values(rng, spec, role, shape))
            continue
        # unit-scale sums over a row; the expert inputs as large as the
        # fixtures make them (gpt-oss's reach its SwiGLU clamp)
        std = spec["exp_in_std"] if role == "exp_in" else 1.0
        rows = int(np.prod(shape[:-1]))
        raw = random_blocks(rng, rows, shape[-1], qt, std / math.sqrt(shape[-1]))
        w.write_tensor_data(raw.reshape(*shape[:-1], -1))
    w.close()


if __name__ == "__main__":
    main()
