#!/usr/bin/env python3
"""make-split-fixtures.py - makes the split GGUF fixtures of the tests
(tests/fixtures/split/; tests/cli/gguf-split.bats, tests/unit/check_gguf_split.c)
with llama.cpp's own llama-gguf-split, and the broken parts by hand.

Writes to tests/fixtures/split/ (or the directory given):

  smollm2-q4_0-0000{1,2,3}-of-00003.gguf
        tests/fixtures/models/smollm2/smollm2-q4_0.gguf split by
        `llama-gguf-split --split-max-tensors 8` (gguf-split's default
        layout: the metadata and the first 8 tensors in part 1, 8 and 4
        tensors in parts 2 and 3).  Converting it must give the bytes that
        converting the unsplit file gives.
  align-0000{1,2,3}-of-00003.gguf
        tests/fixtures/gguf/writer_align.gguf (general.alignment 64, tensors
        x and y) split by `llama-gguf-split --no-tensor-first-split
        --split-max-tensors 1`: part 1 holds the metadata only, parts 2 and
        3 one tensor each at gguf-split's default alignment of 32, since
        only part 1 carries general.alignment.
  merged.gguf
        what `llama-gguf-split --merge` makes of the align parts, written
        here: x and y in one file that keeps split.no and
        split.tensors.count and says split.count 0, an ordinary file.
        (gguf-split's own merge of them is refused by ggml itself: it pads
        the data to 32 bytes under part 1's general.alignment of 64.)
  bad/*.gguf
        parts gguf-split would not write, each standing in for one part of
        the align split (same tensors as the part it replaces, unless
        said), written here byte by byte with split.no and split.count as
        u16 and split.tensors.count as i32, as gguf-split writes them:
          count4.gguf       part 2 saying split.count 4
          other-model.gguf  part 2 saying split.tensors.count 5
          no-number.gguf    part 2 without split.no
          meta.gguf         part 2 with general.architecture "gpt2" and a
                            key of its own (llama.cpp reads no metadata
                            from parts after the first; neither do we)
          empty.gguf        part 3 without its tensor y
          twice.gguf        part 3 holding x (part 2's) instead of y
          no-beyond.gguf    part 1 (metadata only) saying split.no 3 of 3
          huge-count.gguf   part 1 saying split.count 65536
          single-00001-of-00001.gguf
                            a model in one part (split.count 1) holding x
                            and y but saying split.tensors.count 3

Deterministic: the same llama.cpp gives the same bytes.  Needs numpy and
gguf (pip) and a built llama-gguf-split (cmake --build build --target
llama-gguf-split in a llama.cpp checkout).

Usage: python3 tools/make-split-fixtures.py [--bin LLAMA_CPP_BIN_DIR] [OUTDIR]
"""
import argparse
import os
import struct
import subprocess
import tempfile

import gguf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMOLLM2 = os.path.join(ROOT, "tests/fixtures/models/smollm2/smollm2-q4_0.gguf")
ALIGN = os.path.join(ROOT, "tests/fixtures/gguf/writer_align.gguf")

U16, I32, STRING = 2, 5, 8
F32 = 0


def gguf_split(binary, args):
    subprocess.run([binary] + args, check=True, stdout=subprocess.DEVNULL)


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv_bytes(key, vtype, value):
    out = gstr(key) + struct.pack("<I", vtype)
    if vtype == U16:
        return out + struct.pack("<H", value)
    if vtype == I32:
        return out + struct.pack("<i", value)
    if vtype == STRING:
        return out + gstr(value)
    raise ValueError(vtype)


def write_gguf(path, kvs, tensors, alignment=32):
    """A version 3 GGUF: kvs as (key, vtype, value), tensors as (name,
    float32 values), each tensor padded to the alignment."""
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    head += b"".join(kv_bytes(*kv) for kv in kvs)
    data, off = b"", 0
    for name, values in tensors:
        blob = struct.pack("<%df" % len(values), *values)
        head += gstr(name) + struct.pack("<IQIQ", 1, len(values), F32, off)
        blob += bytes(-len(blob) % alignment)
        data += blob
        off += len(blob)
    if tensors:
        head += bytes(-len(head) % alignment)
    with open(path, "wb") as f:
        f.write(head + data)


def split_keys(no, count, tensors):
    return [("split.no", U16, no), ("split.count", U16, count),
            ("split.tensors.count", I32, tensors)]


def align_tensors():
    r = gguf.GGUFReader(ALIGN)
    return {t.name: [float(v) for v in t.data] for t in r.tensors}


def bad_parts(outdir):
    t = align_tensors()
    x, y = ("x", t["x"]), ("y", t["y"])
    bad = os.path.join(outdir, "bad")
    os.makedirs(bad, exist_ok=True)
    meta = [("general.architecture", STRING, "llama")]

    def w(name, kvs, tensors):
        write_gguf(os.path.join(bad, name), kvs, tensors)

    w("count4.gguf", split_keys(1, 4, 2), [x])
    w("other-model.gguf", split_keys(1, 3, 5), [x])
    w("no-number.gguf", split_keys(1, 3, 2)[1:], [x])
    w("meta.gguf", split_keys(1, 3, 2) + [("general.architecture", STRING, "gpt2"),
                                          ("meta.only_here", STRING, "ignored")], [x])
    w("empty.gguf", split_keys(2, 3, 2), [])
    w("twice.gguf", split_keys(2, 3, 2), [x])
    w("no-beyond.gguf", meta + split_keys(3, 3, 2), [])
    w("huge-count.gguf", meta + [("split.no", U16, 0), ("split.count", I32, 65536),
                                 ("split.tensors.count", I32, 2)], [])
    w("single-00001-of-00001.gguf", meta + split_keys(0, 1, 3), [x, y])
    write_gguf(os.path.join(outdir, "merged.gguf"), meta + split_keys(0, 0, 2), [x, y])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.environ.get("LLAMA_BIN", "/tmp/mlcore-llama.cpp/build/bin"))
    ap.add_argument("outdir", nargs="?", default=os.path.join(ROOT, "tests/fixtures/split"))
    a = ap.parse_args()
    split = os.path.join(a.bin, "llama-gguf-split")
    os.makedirs(a.outdir, exist_ok=True)
    gguf_split(split, ["--split-max-tensors", "8", SMOLLM2,
                       os.path.join(a.outdir, "smollm2-q4_0")])
    gguf_split(split, ["--no-tensor-first-split", "--split-max-tensors", "1", ALIGN,
                       os.path.join(a.outdir, "align")])
    bad_parts(a.outdir)


if __name__ == "__main__":
    main()
