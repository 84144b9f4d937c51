#!/usr/bin/env python3
"""Make tests/fixtures/quant/kquant-ref.{bin,txt}: llama.cpp's own
quantizers' errors on a fixed set of rows, the bar our block quantizers
(lib/quant/kquant.c, issue 38) must meet in tests/unit/check_kquant.c.

For each distribution (gaussian, heavy-tailed student-t, and student-t with
a few outlier columns) the script draws ROWS x COLS seeded floats and an
importance vector (log-normal, larger on the outlier columns, as an imatrix
of a real model is), quantizes every row with llama.cpp's
ggml_quantize_chunk (libggml-base.so through ctypes), once without and once
with the importance vector, dequantizes with gguf-py
(gguf.quants.dequantize, bit for bit ggml's formulas), and records the
summed error over all rows: sum (x - y)^2 without, sum imp (x - y)^2 with.

kquant-ref.bin (little-endian):
    "KQREF001", u32 n_dists, u32 rows, u32 cols,
    then per distribution: f32 imp[cols], f32 x[rows * cols]
kquant-ref.txt: the manifest, one line per fact:
    dist <i> <name>
    ref <TYPE> <dist name> <0|1 importance> <summed error, %.17g>
    own <TYPE> <dist name> <weighting> <summed error, %.17g>
The "own" lines measure llama.cpp's no-imatrix output with the per-element
weights its quantizer itself uses without an imatrix (OWN_WEIGHTS): x2 is
x^2, absrms is |x| + sqrt(mean x^2 of the 32-element block), in double.
The test passes the same weights to our quantizer as its importances and
must come out lower on that measure too.

Run from the repository root:

    python3 tools/kquant-reference.py [--llama-cpp DIR]

With --check-ours build/libmlcore.so it writes nothing: it quantizes the
committed rows with our ml_quantize_row_blocks, dequantizes our bytes with
gguf-py (a reader independent of ours) and prints our error divided by
llama.cpp's from the committed manifest, per type, distribution and
weighting.

Needs numpy, gguf-py and a llama.cpp build (--llama-cpp, default
$LLAMA_CPP_DIR or /tmp/mlcore-llama.cpp, with build/bin/libggml-base.so).
Deterministic: numpy's seeded generator and llama.cpp's scalar-reference
quantizers (ggml_quantize_chunk is plain C).
"""
from __future__ import annotations

import argparse
import ctypes
import os
import struct
import sys

import numpy as np
import gguf
from gguf.quants import dequantize

ROWS, COLS = 8, 1024
SEED = 38
# Our name, ggml's type id.
TYPES = [("Q4_K", 12), ("Q5_K", 13), ("Q6_K", 14), ("IQ4_XS", 23), ("Q5_0", 6), ("Q5_1", 7),
         ("IQ4_NL", 20)]
OUT_DIR = "tests/fixtures/quant"
# llama.cpp's per-element weights without an imatrix (ggml-quants.c);
# Q5_0 and Q5_1 round without a search, so the "ref ... 0" lines cover them.
OWN_WEIGHTS = {"Q4_K": "absrms", "Q5_K": "absrms", "Q6_K": "x2", "IQ4_XS": "x2", "IQ4_NL": "x2"}


def own_weights(x: np.ndarray, kind: str) -> np.ndarray:
    """llama.cpp's no-imatrix weights for the rows x, in double."""
    xd = x.astype(np.float64)
    if kind == "x2":
        return xd * xd
    xb = xd.reshape(x.shape[0], -1, 32)
    rms = np.sqrt(np.mean(xb * xb, axis=2, keepdims=True))
    return (rms + np.abs(xb)).reshape(x.shape)


def distributions(rng: np.random.Generator):
    """(name, x [ROWS, COLS], imp [COLS]) for each distribution."""
    base_imp = np.exp(rng.standard_normal(COLS) * 1.0).astype(np.float32)
    gauss = rng.standard_normal((ROWS, COLS)) * 0.02
    yield "gaussian", gauss.astype(np.float32), base_imp
    t = rng.standard_t(3, (ROWS, COLS)) * 0.02
    yield "student_t", t.astype(np.float32), base_imp
    t2 = rng.standard_t(4, (ROWS, COLS)) * 0.02
    cols = rng.choice(COLS, 12, replace=False)
    t2[:, cols] *= 12.0
    imp = base_imp.copy()
    imp[cols] *= 20.0
    yield "outliers", t2.astype(np.float32), imp


def quantize(lib, gtype: int, x: np.ndarray, imp: np.ndarray | None) -> np.ndarray:
    qt = gguf.GGMLQuantizationType(gtype)
    block, size = gguf.GGML_QUANT_SIZES[qt]
    row_bytes = COLS // block * size
    dst = np.zeros(ROWS * row_bytes, dtype=np.uint8)
    src = np.ascontiguousarray(x, dtype=np.float32)
    impp = None if imp is None else np.ascontiguousarray(imp, dtype=np.float32).ctypes.data
    n = lib.ggml_quantize_chunk(gtype, src.ctypes.data, dst.ctypes.data, 0, ROWS, COLS, impp)
    assert n == dst.size, (n, dst.size)
    y = dequantize(dst.reshape(ROWS, row_bytes), qt)
    return np.asarray(y, dtype=np.float32).reshape(ROWS, COLS)


def check_ours(path: str) -> int:
    """Prints our errors over llama.cpp's, our bytes read by gguf-py."""
    lib = ctypes.CDLL(os.path.abspath(path))
    lib.ml_type_block.argtypes = [ctypes.c_int] + [ctypes.POINTER(ctypes.c_uint32)] * 3
    lib.ml_quantize_row_blocks.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                                           ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    ml_types = {"Q5_0": 5, "Q5_1": 6, "Q4_K": 9, "Q5_K": 10, "Q6_K": 11, "IQ4_NL": 12,
                "IQ4_XS": 13}
    raw = open(os.path.join(OUT_DIR, "kquant-ref.bin"), "rb").read()
    nd, rows, cols = struct.unpack_from("<III", raw, 8)
    data = np.frombuffer(raw, dtype="<f4", offset=20).reshape(nd, rows + 1, cols)
    names, worst = {}, 0.0
    for line in open(os.path.join(OUT_DIR, "kquant-ref.txt")):
        f = line.split()
        if f and f[0] == "dist":
            names[f[2]] = int(f[1])
        if not f or f[0] != "ref":
            continue
        tname, dname, use, ref = f[1], f[2], int(f[3]), float(f[4])
        gtype = dict(TYPES)[tname]
        qt = gguf.GGMLQuantizationType(gtype)
        block, size = gguf.GGML_QUANT_SIZES[qt]
        imp = np.ascontiguousarray(data[names[dname], 0])
        err = 0.0
        for r in range(rows):
            x = np.ascontiguousarray(data[names[dname], 1 + r])
            out = np.zeros(cols // block * size, dtype=np.uint8)
            st = lib.ml_quantize_row_blocks(ml_types[tname], x.ctypes.data, cols,
                                            imp.ctypes.data if use else None,
                                            out.ctypes.data, None)
            assert st == 0, (tname, st)
            y = np.asarray(dequantize(out.reshape(1, -1), qt), dtype=np.float64).reshape(-1)
            d = x.astype(np.float64) - y
            err += float(np.sum(d * d * (imp.astype(np.float64) if use else 1.0)))
        worst = max(worst, err / ref)
        print(f"{tname:6} {dname:9} imp={use} ours/llama.cpp = {err / ref:.4f}")
    print(f"worst ratio {worst:.4f}")
    return 0 if worst <= 1.0 + 1e-9 else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-cpp", default=os.environ.get("LLAMA_CPP_DIR", "/tmp/mlcore-llama.cpp"))
    ap.add_argument("--check-ours", metavar="LIBMLCORE",
                    help="compare our quantizer (this libmlcore.so) instead of writing")
    args = ap.parse_args()
    if args.check_ours:
        return check_ours(args.check_ours)
    lib = ctypes.CDLL(os.path.join(args.llama_cpp, "build/bin/libggml-base.so"))
    lib.ggml_quantize_chunk.restype = ctypes.c_size_t
    lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                        ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                        ctypes.c_void_p]
    lib.ggml_quantize_init.argtypes = [ctypes.c_int]
    for _, gtype in TYPES:
        lib.ggml_quantize_init(gtype)

    rng = np.random.default_rng(SEED)
    dists = list(distributions(rng))
    os.makedirs(OUT_DIR, exist_ok=True)
    with open(os.path.join(OUT_DIR, "kquant-ref.bin"), "wb") as f:
        f.write(b"KQREF001" + struct.pack("<III", len(dists), ROWS, COLS))
        for _, x, imp in dists:
            f.write(imp.astype("<f4").tobytes())
            f.write(x.astype("<f4").tobytes())
    lines = ["# llama.cpp's quantizers on tests/fixtures/quant/kquant-ref.bin",
             "# (tools/kquant-reference.py; gguf-py %s); errors summed over all rows," % gguf.__version__
             if hasattr(gguf, "__version__") else
             "# (tools/kquant-reference.py); errors summed over all rows,",
             "# in double: sum (x - y)^2 without importances, sum imp (x - y)^2 with"]
    for i, (name, _, _) in enumerate(dists):
        lines.append(f"dist {i} {name}")
    for tname, gtype in TYPES:
        for name, x, imp in dists:
            for use in (0, 1):
                y = quantize(lib, gtype, x, imp if use else None)
                d = x.astype(np.float64) - y.astype(np.float64)
                w = imp.astype(np.float64) if use else np.ones(COLS)
                err = float(np.sum(d * d * w[None, :]))
                lines.append(f"ref {tname} {name} {use} {err:.17g}")
                if not use and tname in OWN_WEIGHTS:
                    kind = OWN_WEIGHTS[tname]
                    own = float(np.sum(d * d * own_weights(x, kind)))
                    lines.append(f"own {tname} {name} {kind} {own:.17g}")
    with open(os.path.join(OUT_DIR, "kquant-ref.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
