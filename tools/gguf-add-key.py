#!/usr/bin/env python3
"""gguf-add-key.py - a copy of a GGUF with one float32 key added or set,
every other key and tensor as it was (gguf-py's gguf_new_metadata copy):
for refusal fixtures whose key has no same-length neighbour to patch in
place.

    python3 tools/gguf-add-key.py IN.gguf OUT.gguf KEY VALUE

Made with it: tests/fixtures/moe/gpt-oss/bad/ (see the README there).
"""
import sys

import gguf
from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata


def main():
    src, out, key, value = sys.argv[1:5]
    reader = gguf.GGUFReader(src, "r")
    arch = reader.get_field(gguf.Keys.General.ARCHITECTURE).contents()
    writer = gguf.GGUFWriter(out, arch=arch, endianess=reader.endianess)
    align = reader.get_field(gguf.Keys.General.ALIGNMENT)
    if align is not None:
        writer.data_alignment = align.contents()
    copy_with_new_metadata(reader, writer,
                           {key: MetadataDetails(gguf.GGUFValueType.FLOAT32, float(value))}, [])


if __name__ == "__main__":
    main()
