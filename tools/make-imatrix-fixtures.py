#!/usr/bin/env python3
"""make-imatrix-fixtures.py - makes llama.cpp's importance matrix of the
tiny Llama 2 fixture with llama.cpp's own llama-imatrix, and the .mli that
mli(5) says it stands for, written here with gguf-py and numpy (not with
libmlcore), for tests/unit/check_mli_read.c and tests/cli/ml-quant.bats.

Writes to tests/fixtures/quant/ (or the directory given):

  llama2.imatrix
        `llama-imatrix -m tests/fixtures/models/llama2/llama2-f32.gguf
        -f TEXT -c 128 --chunks 8 -t 2` over the first 6000 bytes of
        /usr/share/common-licenses/GPL-2: llama.cpp's GGUF importance
        matrix (general.type "imatrix"; NAME.in_sum2 and NAME.counts per
        matrix; no output.weight, which llama-imatrix leaves out unless
        asked).
  llama2.imatrix.dat
        the same with `--output-format dat`: the older format (no magic;
        per matrix its name, a number of chunks and the mean squares
        times it), which gives the same importances.
  llama2-imatrix.mli
        the same sums as an .mli: per layer the slots attn_in (attn_q's
        sums), wo_in (attn_output's), ffn_in (ffn_up's) and w2_in
        (ffn_down's), each scaled to the largest count among the layers'
        matrices (sum * T / count), then cls_in (output.weight's, or
        zeros and a classifier count of 0 without it).  libmlcore reading
        llama2.imatrix must give exactly these bytes.

Usage: tools/make-imatrix-fixtures.py LLAMA_BIN_DIR [OUT_DIR]
"""
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGUFReader

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "tests/fixtures/models/llama2/llama2-f32.gguf")
TEXT = "/usr/share/common-licenses/GPL-2"


def make_imatrix(bindir, out, *fmt):
    """The text under a fixed name (the files record it), run from its folder."""
    with tempfile.TemporaryDirectory() as d:
        with open(TEXT, "rb") as f, open(os.path.join(d, "gpl-2-head.txt"), "wb") as t:
            t.write(f.read(6000))
        subprocess.run([os.path.join(bindir, "llama-imatrix"), "-m", MODEL, "-f", "gpl-2-head.txt",
                        "-o", os.path.abspath(out), "-c", "128", "--chunks", "8", "-t", "2", *fmt],
                       cwd=d, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def tensors(path):
    r = GGUFReader(path)
    kind = r.fields.get("general.type")
    assert kind is not None and bytes(kind.parts[-1]) == b"imatrix", "not an imatrix"
    return {t.name: np.array(t.data, dtype=np.float32).reshape(-1) for t in r.tensors}


def mli_bytes(ts):
    sums = lambda name: ts.get(name + ".in_sum2")
    count = lambda name: float(ts[name + ".counts"][0])
    layers = sorted({int(n.split(".")[1]) for n in ts if n.startswith("blk.")})
    n_layers = layers[-1] + 1
    feed = ["attn_q", "attn_output", "ffn_up", "ffn_down"]
    T = max(count(f"blk.{l}.{m}.weight") for l in layers for m in feed)
    dim = len(sums("blk.0.attn_q.weight"))
    q_dim = len(sums("blk.0.attn_output.weight"))
    hidden = len(sums("blk.0.ffn_down.weight"))
    out = bytearray(b"MLI1")
    out += struct.pack("<IIIII", 1, n_layers, dim, hidden, 0 if q_dim == dim else q_dim)
    cls = sums("output.weight")
    out += struct.pack("<QQ", int(T), int(count("output.weight")) if cls is not None else 0)
    body = []
    for l in range(n_layers):
        for m in feed:
            name = f"blk.{l}.{m}.weight"
            body.append(sums(name).astype(np.float64) * (T / count(name)))
    body.append(cls.astype(np.float64) if cls is not None else np.zeros(dim))
    out += np.concatenate(body).astype("<f8").tobytes()
    return bytes(out)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    outdir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "tests/fixtures/quant")
    imx = os.path.join(outdir, "llama2.imatrix")
    make_imatrix(sys.argv[1], imx)
    make_imatrix(sys.argv[1], imx + ".dat", "--output-format", "dat")
    with open(os.path.join(outdir, "llama2-imatrix.mli"), "wb") as f:
        f.write(mli_bytes(tensors(imx)))


if __name__ == "__main__":
    main()
