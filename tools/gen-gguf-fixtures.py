#!/usr/bin/env python3
"""gen-gguf-fixtures.py - makes the committed GGUF fixtures of the unit tests
(tests/unit/check_gguf*.c) with gguf-py, llama.cpp's own Python package.

Writes to tests/fixtures/gguf/ (or the directory given):

  dequant.gguf      for each of the 15 tensor types libmlcore dequantizes, a
                    tensor TYPE of random blocks and a tensor TYPE.expected
                    (F32) holding gguf.quants.dequantize of those blocks.  The
                    f16 fields (scales, mins, F16 elements) are made finite,
                    with zeros, subnormals and the largest values mixed in,
                    so no value can be NaN and the test compares bits.
  writer.gguf       every metadata value type, arrays of each, string arrays
                    and nested arrays, and tensors of several types, among
                    them an IQ2_XXS one (which libmlcore lists but cannot
                    dequantize).  check_gguf.c holds the same values.
  writer_align.gguf general.alignment = 64 (u32, as gguf-py writes it).

Deterministic: the same gguf-py gives the same bytes.  Needs numpy and
gguf (pip).  With GGML_LIB=/path/to/libggml-base.so it also checks every
expected value against ggml's own dequantizer (ggml_get_type_traits), so
the fixtures agree with both references.

Usage: python3 tools/gen-gguf-fixtures.py [OUTDIR]
"""
import ctypes
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf import GGUFValueType as V

SEED = 20240611

# Byte offsets of the f16 fields inside one block, per type.
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2],
    T.Q6_K: [208], T.IQ4_NL: [0], T.IQ4_XS: [0],
}

# Finite f16 bit patterns worth covering on purpose: zeros, subnormals,
# the smallest normal, the largest finite values.
SPECIAL_F16 = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00]

# rows x columns of each dequantization tensor (columns a multiple of the block).
SHAPES = {
    T.F32: (4, 64), T.F16: (8, 128), T.BF16: (8, 128),
    T.Q4_0: (4, 256), T.Q4_1: (4, 256), T.Q5_0: (4, 256), T.Q5_1: (4, 256),
    T.Q8_0: (4, 256), T.IQ4_NL: (4, 256),
    T.Q2_K: (4, 512), T.Q3_K: (4, 512), T.Q4_K: (4, 512), T.Q5_K: (4, 512),
    T.Q6_K: (4, 512), T.IQ4_XS: (4, 512),
}


def finite_f16(rng, bits):
    """Random u16 array -> the same with inf/NaN replaced and specials mixed in."""
    bits = bits.copy()
    bad = (bits & 0x7C00) == 0x7C00
    bits[bad] &= 0xBFFF  # clear the exponent's top bit: finite
    pick = rng.random(bits.shape) < 0.125
    bits[pick] = rng.choice(SPECIAL_F16, size=int(pick.sum()))
    return bits


def random_blocks(rng, qtype, rows, cols):
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    nblocks = rows * cols // block
    raw = rng.integers(0, 256, size=(nblocks, size), dtype=np.uint8)
    if qtype in (T.F16, T.BF16):
        u = raw.view(np.uint16).reshape(-1)
        if qtype == T.F16:
            u = finite_f16(rng, u)
        else:
            u[(u & 0x7F80) == 0x7F80] &= 0xFF7F  # bf16: exponent not all ones
        raw = u.view(np.uint8).reshape(nblocks, size)
    elif qtype == T.F32:
        u = raw.view(np.uint32).reshape(-1)
        u[(u & 0x7F800000) == 0x7F800000] &= 0xFF7FFFFF
        raw = u.view(np.uint8).reshape(nblocks, size)
    else:
        for off in F16_FIELDS[qtype]:
            f = raw[:, off:off + 2].copy().view(np.uint16).reshape(-1)
            raw[:, off:off + 2] = finite_f16(rng, f).view(np.uint8).reshape(nblocks, 2)
    return raw.reshape(rows, cols // block * size)


def expected_values(qtype, raw, rows, cols):
    out = gguf.quants.dequantize(raw, qtype)
    out = np.asarray(out, dtype=np.float32).reshape(rows, cols)
    assert not np.isnan(out).any(), qtype.name
    return out


def check_with_ggml(lib_path, qtype, raw, expected):
    """Dequantizes with ggml's to_float and compares bits with gguf-py's."""

    class Traits(ctypes.Structure):
        _fields_ = [("type_name", ctypes.c_char_p), ("blck_size", ctypes.c_int64),
                    ("blck_size_interleave", ctypes.c_int64), ("type_size", ctypes.c_size_t),
                    ("is_quantized", ctypes.c_bool), ("to_float", ctypes.c_void_p),
                    ("from_float_ref", ctypes.c_void_p)]

    lib = ctypes.CDLL(lib_path)
    lib.ggml_get_type_traits.restype = ctypes.POINTER(Traits)
    lib.ggml_get_type_traits.argtypes = [ctypes.c_int]
    tr = lib.ggml_get_type_traits(int(qtype)).contents
    n = expected.size
    if qtype == T.F32:
        got = raw.view(np.float32).reshape(-1).copy()
    else:
        fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(tr.to_float)
        src = np.ascontiguousarray(raw)
        got = np.zeros(n, dtype=np.float32)
        fn(src.ctypes.data, got.ctypes.data, n)
    same = np.array_equal(got.view(np.uint32), expected.reshape(-1).view(np.uint32))
    print(f"  ggml {qtype.name}: {'bit-identical' if same else 'DIFFERENT'}")
    if not same:
        sys.exit(f"ggml and gguf-py disagree on {qtype.name}")


def write_dequant(outdir, rng):
    w = gguf.GGUFWriter(os.path.join(outdir, "dequant.gguf"), arch="fixture")
    w.add_string("fixture.note", "random blocks and gguf.quants.dequantize of them")
    lib = os.environ.get("GGML_LIB")
    for qtype, (rows, cols) in SHAPES.items():
        raw = random_blocks(rng, qtype, rows, cols)
        exp = expected_values(qtype, raw, rows, cols)
        if lib:
            check_with_ggml(lib, qtype, raw, exp)
        name = qtype.name
        w.add_tensor(name, raw, raw_dtype=qtype)
        w.add_tensor(name + ".expected", exp)
    finish(w)


def write_meta_kvs(w):
    """The metadata check_gguf.c reads back (keep the two in step)."""
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_float32("t.f32", 0.15625)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "h\u00e9llo, w\u00f6rld")
    w.add_uint64("t.u64", 18000000000000000000)
    w.add_int64("t.i64", -9000000000000000000)
    w.add_float64("t.f64", -2.5e-300)
    w.add_key_value("t.arr.u8", [1, 2, 255], V.ARRAY, sub_type=V.UINT8)
    w.add_key_value("t.arr.i16", [-1, 2, -32768], V.ARRAY, sub_type=V.INT16)
    w.add_key_value("t.arr.i32", [7, -7, 2147483647], V.ARRAY, sub_type=V.INT32)
    w.add_key_value("t.arr.f32", [0.5, -1.25, 3e38], V.ARRAY, sub_type=V.FLOAT32)
    w.add_key_value("t.arr.bool", [True, False, True], V.ARRAY, sub_type=V.BOOL)
    w.add_key_value("t.arr.u64", [0, 1, 2**64 - 1], V.ARRAY, sub_type=V.UINT64)
    w.add_key_value("t.arr.f64", [1.0, -0.0, 1e300], V.ARRAY, sub_type=V.FLOAT64)
    w.add_array("t.arr.str", ["", "a", "\u2581the", "x" * 300])
    w.add_array("t.arr.nested", [[1, 2, 3], [4], [5, 6]])
    w.add_array("t.arr.nested_str", [["ab", "c"], ["d"]])
    w.add_uint32("general.quantization_version", 2)


def write_writer(outdir, rng):
    w = gguf.GGUFWriter(os.path.join(outdir, "writer.gguf"), arch="llama")
    write_meta_kvs(w)
    # Tensors: values check_gguf.c recomputes.
    a = (np.arange(3 * 64, dtype=np.float32) * 0.25 - 3.0).reshape(3, 64)
    w.add_tensor("a.f32", a)
    b = (np.arange(32, dtype=np.float32) / 8.0).astype(np.float16)
    w.add_tensor("b.f16", b)
    c = (np.arange(2 * 64, dtype=np.float32) / 16.0 - 4.0).reshape(2, 64)
    w.add_tensor("c.q8_0", gguf.quants.quantize(c, T.Q8_0), raw_dtype=T.Q8_0)
    d = rng.integers(0, 256, size=(2, 66), dtype=np.uint8)
    w.add_tensor("blk.0.attn_q.weight", d, raw_dtype=T.IQ2_XXS)
    e = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    w.add_tensor("e.f32.3d", e)
    finish(w)


def write_align(outdir):
    w = gguf.GGUFWriter(os.path.join(outdir, "writer_align.gguf"), arch="llama")
    w.add_custom_alignment(64)
    w.add_tensor("x", np.arange(5, dtype=np.float32))
    w.add_tensor("y", np.arange(3, dtype=np.float32) + 100)
    finish(w)


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "gguf")
    os.makedirs(outdir, exist_ok=True)
    rng = np.random.default_rng(SEED)
    write_dequant(outdir, rng)
    write_writer(outdir, rng)
    write_align(outdir)
    for f in sorted(os.listdir(outdir)):
        print(f"{f}: {os.path.getsize(os.path.join(outdir, f))} bytes")


if __name__ == "__main__":
    main()
