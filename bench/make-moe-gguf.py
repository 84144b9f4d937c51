#!/usr/bin/env python3
"""make-moe-gguf.py - a qwen3moe GGUF in Qwen3-30B-A3B's layer shape (dim
2048, 32/4 heads of 128, 128 experts of width 768, 8 used) with as many
layers as asked, random Q8_0 weights: for timing the experts' prefill and
decode against llama.cpp (docs/speed.md, "Mixtures of experts"), not a
fixture.  The Q8_0 blocks are drawn directly (quants uniform in
[-127, 127], f16 scales that keep a product's output near unit scale):
quantizing billions of floats in numpy would take hours (make-bench-gguf.py's
blocks).  Metadata,
tensor names and the tokenizer are tools/make-moe-fixtures.py's qwen3moe.

    python3 bench/make-moe-gguf.py OUT.gguf [LAYERS]   (default 4: 2.65 GB)
"""
import importlib.util
import math
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
spec_ = importlib.util.spec_from_file_location("mmf", HERE.parent / "tools" / "make-moe-fixtures.py")
mmf = importlib.util.module_from_spec(spec_)
spec_.loader.exec_module(mmf)
spec_ = importlib.util.spec_from_file_location("mbg", HERE / "make-bench-gguf.py")
mbg = importlib.util.module_from_spec(spec_)
spec_.loader.exec_module(mbg)
import gguf  # noqa: E402  (after the fixture module, which may point at llama.cpp's gguf-py)


def main():
    out = sys.argv[1]
    layers = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    spec = dict(mmf.QWEN3MOE, dim=2048, n_layer=layers, n_head=32, n_head_kv=4, head_dim=128,
                n_expert=128, n_used=8, n_ff_exp=768, n_ff_dense=6144, ctx=4096)
    tok = mmf.tokenizer_for(gguf, spec)
    spec["vocab"] = len(tok["tokens"])
    rng = np.random.default_rng(1)
    Q = gguf.GGMLQuantizationType
    w = gguf.GGUFWriter(out, "qwen3moe")
    mmf.add_metadata(gguf, w, spec, tok, None)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    for name, shape, role in mmf.qwen3moe_tensors(spec):
        if mmf.tensor_type(gguf, name, shape, "q8_0") == Q.F32:
            w.add_tensor(name, mmf.random_values(rng, spec, role, shape))
            continue
        # a uniform quant's root mean square is about 73: rows of unit-scale sums
        std = spec["exp_in_std"] if role == "exp_in" else 1.0
        rows = int(np.prod(shape[:-1]))
        raw = mbg.blocks(rng, rows, shape[-1], "q8_0", std / math.sqrt(shape[-1]) / 73.0)
        w.add_tensor(name, raw.reshape(*shape[:-1], -1), raw_dtype=Q.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
