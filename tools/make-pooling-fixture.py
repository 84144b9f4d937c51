#!/usr/bin/env python3
"""make-pooling-fixture.py - tests/fixtures/embed/qwen3-q8_0-pool-last.gguf:
the Qwen 3-shaped fixture with `qwen3.pooling_type = 3` (last token) added,
as Qwen3-Embedding's GGUFs state it, for gguf2mlb's and ml-serve's tests of
the .mlb header's pooling field.  Nothing else changes: the key is inserted
after the others, the tensor infos follow, and the data section starts at
the next alignment boundary (tensor offsets are relative to it).

    python3 tools/make-pooling-fixture.py   # from the repository root
"""
import struct

import gguf

SRC = "tests/fixtures/models/qwen3/qwen3-q8_0.gguf"
DST = "tests/fixtures/embed/qwen3-q8_0-pool-last.gguf"

r = gguf.GGUFReader(SRC)
raw = open(SRC, "rb").read()
last = max(r.fields.values(), key=lambda f: f.offset)
kv_end = last.offset + sum(len(p.tobytes()) for p in last.parts)
infos_end = max(t.field.offset + sum(len(p.tobytes()) for p in t.field.parts) for t in r.tensors)
align = 32
if "general.alignment" in r.fields:
    align = int(r.fields["general.alignment"].parts[-1][0])

key = b"qwen3.pooling_type"
kv = struct.pack("<Q", len(key)) + key + struct.pack("<I", gguf.GGUFValueType.UINT32) + struct.pack("<I", 3)
n_kv = struct.unpack_from("<Q", raw, 16)[0]
head = raw[:16] + struct.pack("<Q", n_kv + 1) + raw[24:kv_end] + kv + raw[kv_end:infos_end]
pad = (-len(head)) % align
out = head + b"\0" * pad + raw[r.data_offset:]
open(DST, "wb").write(out)

check = gguf.GGUFReader(DST)
assert int(check.fields["qwen3.pooling_type"].parts[-1][0]) == 3
assert len(check.tensors) == len(r.tensors)
for a, b in zip(r.tensors, check.tensors):
    assert a.name == b.name and bytes(a.data.tobytes()) == bytes(b.data.tobytes())
print(DST, len(out), "bytes")
