#!/usr/bin/env python3
"""gen-mxfp4-vector.py - writes tests/unit/mxfp4_vector.h: a few MXFP4
blocks (every E8M0 scale class: 0 and 1, ggml's subnormal cases; 2, 127,
254 and 255) and gguf-py's gguf.quants.dequantize of them, as float bits,
for check_gguf_dequant.c.  MXFP4 is not in dequant.gguf (made before it
was dequantized here); this small vector is its gguf-py reference.

Deterministic.  Needs numpy and gguf (pip).
Usage: python3 tools/gen-mxfp4-vector.py > tests/unit/mxfp4_vector.h
"""
import numpy as np
from gguf import GGMLQuantizationType
from gguf.quants import dequantize

SCALES = [0, 1, 2, 100, 127, 128, 200, 254, 255]

rng = np.random.default_rng(38)
blocks = np.zeros((len(SCALES), 17), dtype=np.uint8)
for i, e in enumerate(SCALES):
    blocks[i, 0] = e
    blocks[i, 1:] = rng.integers(0, 256, 16, dtype=np.uint8)
blocks[0, 1:] = np.arange(16, dtype=np.uint8) * 17  # every nibble, both halves
out = dequantize(blocks.reshape(-1), GGMLQuantizationType.MXFP4).astype(np.float32)
bits = out.view(np.uint32)

print("/* mxfp4_vector.h - made by tools/gen-mxfp4-vector.py: MXFP4 blocks and")
print(" * gguf-py's dequantization of them (f32 bits).  Do not edit. */")
print("static const uint8_t mxfp4_blocks[%d] = {" % blocks.size)
flat = blocks.reshape(-1)
for i in range(0, flat.size, 12):
    print("    " + ", ".join("%d" % v for v in flat[i:i + 12]) + ",")
print("};")
print("static const uint32_t mxfp4_expected[%d] = {" % bits.size)
for i in range(0, bits.size, 6):
    print("    " + ", ".join("0x%08xu" % v for v in bits[i:i + 6]) + ",")
print("};")
