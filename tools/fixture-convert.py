#!/usr/bin/env python3
"""Run llama.cpp's own convert_hf_to_gguf.py on a fixture model.

A helper of tools/make-model-fixtures.py.  The fixture models carry tiny
byte-level BPE vocabularies trained for the purpose, so the SHA-256 "chkhsh"
by which the converter recognises a pre-tokenizer never matches a known model
and the converter refuses them.  This wrapper imports the converter as a
module, replaces the method that maps the hash to a pre-tokenizer name by one
that returns the name given with --pre (e.g. "qwen2", "llama-bpe",
"smollm"), and then runs the converter's own main() with the remaining
arguments.  Nothing of llama.cpp is edited or copied.

usage: fixture-convert.py --llama-cpp DIR [--pre NAME] -- CONVERTER-ARGS...
"""
import argparse
import os
import runpy
import sys


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama-cpp", required=True, help="llama.cpp source tree")
    ap.add_argument("--pre", help="tokenizer.ggml.pre value to force for BPE vocabularies")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="arguments for convert_hf_to_gguf.py")
    opts = ap.parse_args()
    args = opts.args[1:] if opts.args[:1] == ["--"] else opts.args

    root = os.path.abspath(opts.llama_cpp)
    # The converter and its gguf-py must match: put the tree's own copy first.
    sys.path.insert(0, os.path.join(root, "gguf-py"))
    sys.path.insert(0, root)

    from conversion import base  # the converter's package, from the tree above

    if opts.pre:
        pre = opts.pre

        def forced_pre(self, tokenizer):  # noqa: ARG001 - signature of the original
            return pre

        base.TextModel.get_vocab_base_pre = forced_pre

    sys.argv = [os.path.join(root, "convert_hf_to_gguf.py")] + args
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
