#!/usr/bin/env python3
"""End to end check of our ggml block quantizers (lib/quant/kquant.c)
through llama.cpp itself: for each llama-quantize file of the fixtures
(tests/fixtures/models and tests/fixtures/types), write a twin GGUF whose
tensors of the types we write (Q4_K, Q5_K, Q6_K, IQ4_XS, Q5_0, Q5_1,
IQ4_NL) are re-quantized from the f32 model by ml_quantize_row_blocks
(libmlcore.so through ctypes, no importance vector), every other tensor
copied byte for byte, same metadata.  llama.cpp then runs both files
(tools/llama-logits.c, the fixture prompts p0 and p1) and the script prints
the RMS difference of each file's logits from the f32 model's.

It shows that llama.cpp reads our blocks and how close its output then is
to the unquantized model, beside llama-quantize's own file of the same
types.  The fixture models have random weights, so this is a check of the
mechanics and a weak signal of quality, not a perplexity measurement.
Nothing is written into the repository.

    python3 tools/kquant-e2e.py [--lib build/libmlcore.so] [--llama-cpp DIR]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import gguf

REPO = Path(__file__).resolve().parent.parent
MODELS = REPO / "tests" / "fixtures" / "models"
TYPES_DIR = REPO / "tests" / "fixtures" / "types"
# ggml type -> our ml_type code
OURS = {6: 5, 7: 6, 12: 9, 13: 10, 14: 11, 20: 12, 23: 13}
FILES = [("llama2", MODELS / "llama2" / "llama2-q4_k_m.gguf"),
         ("llama2", TYPES_DIR / "llama2-q5_k_m.gguf"),
         ("llama2", MODELS / "llama2" / "llama2-q6_k.gguf"),
         ("llama2", TYPES_DIR / "llama2-iq4_xs.gguf"),
         ("llama2", TYPES_DIR / "llama2-iq4_nl.gguf"),
         ("llama2", TYPES_DIR / "llama2-q5_0.gguf"),
         ("llama2", TYPES_DIR / "llama2-q5_1.gguf"),
         ("gemma3", TYPES_DIR / "gemma3-q4_k_m.gguf"),
         ("gemma3", TYPES_DIR / "gemma3-q5_k_m.gguf"),
         ("gemma3", TYPES_DIR / "gemma3-iq4_nl.gguf")]


def copy_fields(reader, writer) -> None:
    for f in reader.fields.values():
        if f.name == gguf.Keys.General.ARCHITECTURE or f.name.startswith("GGUF."):
            continue  # GGUFWriter writes these itself
        vtype = f.types[0]
        sub = f.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(f.name, f.contents(), vtype, sub_type=sub)


def twin(lib, src: Path, f32: Path, dst: Path) -> int:
    """Writes dst; returns how many tensors are ours."""
    r = gguf.GGUFReader(str(src))
    full = {t.name: np.asarray(t.data, dtype=np.float32) for t in gguf.GGUFReader(str(f32)).tensors}
    w = gguf.GGUFWriter(str(dst), r.fields[gguf.Keys.General.ARCHITECTURE].contents())
    copy_fields(r, w)
    n = 0
    for t in r.tensors:
        gt = int(t.tensor_type)
        if gt not in OURS:
            w.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
            continue
        x = np.ascontiguousarray(full[t.name].reshape(-1, int(t.shape[0])))
        out = np.zeros_like(np.asarray(t.data, dtype=np.uint8)).reshape(x.shape[0], -1)
        for i in range(x.shape[0]):
            row = np.ascontiguousarray(x[i])
            st = lib.ml_quantize_row_blocks(OURS[gt], row.ctypes.data, row.size, None,
                                            out[i].ctypes.data, None)
            if st != 0:
                raise SystemExit(f"{t.name}: ml_quantize_row_blocks status {st}")
        w.add_tensor(t.name, out.reshape(np.asarray(t.data).shape), raw_dtype=t.tensor_type)
        n += 1
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return n


def logits(exe: Path, path: Path, ids: list[int], out: Path) -> np.ndarray:
    subprocess.run([str(exe), str(path), str(out)] + [str(i) for i in ids], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return np.fromfile(out, dtype="<f4").reshape(len(ids), -1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", default=str(REPO / "build" / "libmlcore.so"))
    ap.add_argument("--llama-cpp", default=os.environ.get("LLAMA_CPP_DIR", "/tmp/mlcore-llama.cpp"))
    args = ap.parse_args()
    lib = ctypes.CDLL(os.path.abspath(args.lib))
    lib.ml_quantize_row_blocks.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                                           ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    lcpp = Path(args.llama_cpp)
    bindir = lcpp / "build" / "bin"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        exe = work / "llama-logits"
        subprocess.run(["cc", "-std=c11", "-O2", f"-I{lcpp / 'include'}",
                        f"-I{lcpp / 'ggml' / 'include'}", str(REPO / "tools" / "llama-logits.c"),
                        "-o", str(exe), f"-L{bindir}", "-lllama", "-lggml", "-lggml-base",
                        f"-Wl,-rpath,{bindir}"], check=True)
        print(f"{'file':24} {'ours':>5}  rms(logits - f32 logits): llama-quantize / ours")
        for model, src in FILES:
            expected = json.loads((MODELS / model / "expected.json").read_text())
            f32 = MODELS / model / f"{model}-f32.gguf"
            ours_path = work / ("ours-" + src.name)
            n = twin(lib, src, f32, ours_path)
            cells = []
            for p in ("p0", "p1"):
                ids = expected["prompts"][p]["ids"]
                ref = logits(exe, f32, ids, work / "f32.bin")
                a = logits(exe, src, ids, work / "theirs.bin")
                b = logits(exe, ours_path, ids, work / "ours.bin")
                ea = float(np.sqrt(np.mean((a.astype(np.float64) - ref) ** 2)))
                eb = float(np.sqrt(np.mean((b.astype(np.float64) - ref) ** 2)))
                cells.append(f"{p} {ea:.5f} / {eb:.5f} ({eb / ea:.3f})")
            print(f"{src.name:24} {n:5}  " + "   ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
