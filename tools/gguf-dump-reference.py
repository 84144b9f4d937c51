#!/usr/bin/env python3
"""gguf-dump-reference.py - what gguf-py (PyPI `gguf`, llama.cpp's own
reader) says about the fixture GGUFs, as the expectations mlb-info-gguf.bats
compares `mlb-info --json --arrays` with, so that `make check` needs
neither Python nor the network.

For each GGUF it runs `gguf-dump --json --json-array` (keys in file order,
their types, offsets and values, tensor names, types, shapes and info
offsets) and takes from gguf.GGUFReader, the class gguf-dump is built on,
what the dump leaves out: the alignment, the data offset and each tensor's
data offset and size.  That is written in the shape of mlb-info's JSON
(f32 values with 9 significant digits and f64 with 17, as mlb-info writes
them, so that both reach jq as the same text) and normalized by
tests/cli/gguf-normalize.sh, the same script the test uses, into
tests/fixtures/gguf/dump/NAME.txt.

    python3 tools/gguf-dump-reference.py            # the committed fixtures
    python3 tools/gguf-dump-reference.py --real     # and the real models, if present

Needs `pip install gguf` (0.19.0 was used), jq and awk.  The real models
(/tmp/smol/SmolLM2-135M-Instruct.Q4_1.gguf, /tmp/gemma3-270m.gguf, or
those of tools/real-models.sh in $REAL_MODELS_DIR) get their expectations
under tests/fixtures/gguf/dump/real/, compared by tools/real-models.sh.
"""
import argparse
import glob
import gzip
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import gguf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "gguf", "dump")
NORMALIZE = os.path.join(ROOT, "tests", "cli", "gguf-normalize.sh")

# gguf-dump's type names -> mlb-info's (ml_gguf_vtype_name).
TYPES = {"UINT8": "u8", "INT8": "i8", "UINT16": "u16", "INT16": "i16", "UINT32": "u32",
         "INT32": "i32", "FLOAT32": "f32", "BOOL": "bool", "STRING": "string",
         "ARRAY": "array", "UINT64": "u64", "INT64": "i64", "FLOAT64": "f64"}


class Num:
    """A number already written as mlb-info writes it."""

    def __init__(self, text):
        self.text = text


def number(v, vtype):
    if vtype in ("f32", "f64"):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return Num(("%.9g" if vtype == "f32" else "%.17g") % v)
    return v


def dumps(v):
    if isinstance(v, Num):
        return v.text
    if isinstance(v, list):
        return "[" + ",".join(dumps(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(k) + ":" + dumps(x) for k, x in v.items()) + "}"
    return json.dumps(v, ensure_ascii=False)


def kv_entry(field):
    t = TYPES[field["type"]]
    e = {"type": t, "offset": field["offset"]}
    if t != "array":
        e["value"] = number(field["value"], t)
        return e
    chain = [TYPES[x] for x in field["array_types"]]
    leaf = chain[-1]
    values = [number(x, leaf) for x in field["value"]]
    # gguf-dump flattens nested arrays: one level holding the leaves, which
    # is all gguf-normalize.jq looks at.
    for inner in reversed(chain[1:]):
        values = [{"type": "array", "elem_type": inner, "values": values}]
    e.update(elem_type=chain[0], values=values)
    return e


def reference(path):
    dump = json.loads(subprocess.run(["gguf-dump", "--json", "--json-array", path],
                                     check=True, capture_output=True).stdout)
    reader = gguf.GGUFReader(path)
    meta = dump["metadata"]
    doc = {"version": meta["GGUF.version"]["value"],
           "tensor_count": meta["GGUF.tensor_count"]["value"],
           "kv_count": meta["GGUF.kv_count"]["value"],
           "alignment": int(reader.alignment), "data_offset": int(reader.data_offset),
           "metadata": {k: kv_entry(f) for k, f in meta.items() if not k.startswith("GGUF.")},
           "tensors": []}
    data = {t.name: t for t in reader.tensors}
    for name, t in dump["tensors"].items():
        r = data[name]
        doc["tensors"].append({"name": name, "type": t["type"], "shape": t["shape"],
                               "info_offset": t["offset"], "file_offset": int(r.data_offset),
                               "bytes": int(r.n_bytes)})
    return dumps(doc)


def write(path, name, subdir=""):
    out_dir = os.path.join(OUT, subdir)
    os.makedirs(out_dir, exist_ok=True)
    text = subprocess.run([NORMALIZE], input=reference(path).encode(), check=True,
                          capture_output=True).stdout
    with open(os.path.join(out_dir, name + ".txt"), "wb") as f:
        f.write(text)
    print(os.path.join(subdir, name), file=sys.stderr)


def fixtures():
    """(path or .gz path, expectation name) for every committed GGUF."""
    fx = os.path.join(ROOT, "tests", "fixtures")
    for p in sorted(glob.glob(os.path.join(fx, "gguf", "*.gguf"))):
        yield p, "gguf-" + os.path.basename(p)[:-5]
    for p in sorted(glob.glob(os.path.join(fx, "models", "*", "*.gguf"))):
        yield p, "models-" + os.path.basename(p)[:-5]
    for p in sorted(glob.glob(os.path.join(fx, "vocab", "*.gguf.gz"))):
        yield p, "vocab-" + os.path.basename(p)[:-8]


def real_models():
    cache = os.environ.get("REAL_MODELS_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "mlcore-real-models")
    for p in ["/tmp/smol/SmolLM2-135M-Instruct.Q4_1.gguf", "/tmp/gemma3-270m.gguf",
              os.path.join(cache, "SmolLM2-135M-Instruct.Q4_1.gguf"),
              os.path.join(cache, "gemma-3-270m-q4_k_m.gguf")]:
        if os.path.exists(p):
            yield p, os.path.basename(p)[:-5]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--real", action="store_true", help="also the real models, if present")
    args = ap.parse_args()
    for tool in ("gguf-dump", "jq", "awk"):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found (pip install gguf; apt-get install jq)")
    with tempfile.TemporaryDirectory() as tmp:
        for path, name in fixtures():
            if path.endswith(".gz"):
                plain = os.path.join(tmp, name + ".gguf")
                with gzip.open(path) as src, open(plain, "wb") as dst:
                    shutil.copyfileobj(src, dst)
                path = plain
            write(path, name)
    if args.real:
        done = set()
        for path, name in real_models():
            if name not in done:
                write(path, name, "real")
                done.add(name)


if __name__ == "__main__":
    main()
