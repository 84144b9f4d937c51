#!/usr/bin/env python3
"""converted-logits.py - end-to-end check of gguf2mlb against llama.cpp.

For every fixture model (tests/fixtures/models, see its README) and each of
its F32, Q8_0 and Q4_0 GGUFs, convert with gguf2mlb, run the converted .mlb
through tools/mlb.py's numpy forward pass (the spec's math, activations
quantized to Q8_0 as the runtime does) on the fixture prompts, and compare
the logits with llama.cpp's own for the same GGUF (logits/llama.cpp-*.f32)
and with transformers' (logits/hf.*.f32).

A wrong mapping (a missed RoPE permutation, value heads out of order, a
norm convention, a header field) moves the logits by the size of the logits
themselves; quantization noise moves them by a few percent (up to about
18% for the Q4_0 Qwen3.5 fixture, whose 16-wide value heads make gguf2mlb
requantize lout, and whose gated delta rule amplifies noise: llama.cpp's own
Q8_0 activations move its logits by 3% of their size there).  The check
fails when the largest difference to llama.cpp exceeds 20% of the largest
logit or fewer than 75% of the positions have the same argmax.

    python3 tools/converted-logits.py [--build build] [--models DIR] [NAME...]

Needs numpy; slow (the numpy forward pass), about a minute for all models.
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import mlb  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=str(REPO / "build"))
    ap.add_argument("--models", default=str(REPO / "tests/fixtures/models"))
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    root = Path(a.models)
    index = json.loads((root / "models.json").read_text())["models"]
    names = a.names or sorted(index)
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            for q in ("f32", "q8_0", "q4_0"):
                gguf = root / name / f"{name}-{q}.gguf"
                if not gguf.exists():
                    continue
                out = Path(tmp) / f"{name}-{q}.mlb"
                subprocess.run([f"{a.build}/bin/gguf2mlb", "-q", "-f", "--no-tokenizer", "-o",
                                str(out), str(gguf)], check=True)
                model = mlb.Model(str(out))
                for p, prompt in index[name]["prompts"].items():
                    ids = prompt["ids"]
                    n = len(ids)
                    ref_path = root / name / "logits" / f"llama.cpp-{q}.{p}.f32"
                    if not ref_path.exists():
                        continue
                    ref = np.fromfile(ref_path, dtype="<f4").reshape(n, -1)
                    hf = np.fromfile(root / name / "logits" / f"hf.{p}.f32", dtype="<f4").reshape(n, -1)
                    got = np.asarray(mlb.forward(model, ids), dtype=np.float32).reshape(n, -1)
                    got = got[:, :ref.shape[1]]
                    scale = float(np.abs(ref).max())
                    d = float(np.abs(got - ref).max())
                    dh = float(np.abs(got - hf[:, :got.shape[1]]).max())
                    agree = float((got.argmax(1) == ref.argmax(1)).mean())
                    ok = d <= 0.2 * scale and agree >= 0.75
                    bad += not ok
                    print(f"{'ok  ' if ok else 'FAIL'} {name:13s} {q:5s} {p}  max|mlb - llama.cpp| "
                          f"{d:7.4f}  max|mlb - hf| {dh:7.4f}  argmax agree {agree:4.2f}  "
                          f"(logits up to {scale:.1f})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
