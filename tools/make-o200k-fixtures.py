#!/usr/bin/env python3
"""make-o200k-fixtures.py - the vocabulary fixtures of o200k's pre-tokenizer
(GGUF tokenizer.ggml.pre "gpt-4o", gpt-oss) and their expected ids, with
llama.cpp as the reference and Hugging Face's tokenizers library as the
second one (tests/fixtures/vocab/, tests/cli/vocab.bats, eog.bats).

    tools/make-o200k-fixtures.py [--llama-cpp DIR] [--testdata DIR] [--out DIR]

DIR defaults to /tmp/mlcore-llama.cpp, a llama.cpp tree with its libraries
built in DIR/build/bin (bench/llama.sh makes one); --testdata (the
shared tokenizer test data, for cases-public.jsonl) to
/work/shared/testdata/tokenizers; --out to tests/fixtures/vocab.  Two vocabulary-only GGUFs, gzip-compressed (gzip
-9 -n, reproducible):

- gpt-oss.gguf.gz: the tokenizer keys of the gpt-oss model fixture
  (tests/fixtures/moe/gpt-oss/gpt-oss-q8_0.gguf, tools/make-moe-fixtures.py):
  a small byte-level BPE with o200k's pre-tokenizer name, the harmony
  specials and gpt-oss's chat template, copied key by key.
- gpt-4o-llama3.gguf.gz: a real tiktoken-made vocabulary under o200k's
  pre-tokenizer: Llama 3's bytes and merges (tests/fixtures/vocab/
  llama3.gguf.gz, its 128,000 ordinary tokens, which hold every number of
  one to three digits and many contractions and case-joined pieces),
  then the nine harmony specials of o200k_harmony in their order, pre
  "gpt-4o", BOS <|startoftext|>, EOS <|return|>, padding <|endoftext|>,
  no add_bos (gpt-oss's own keys), and gpt-oss's chat template.  The real
  o200k vocabulary is not freely available here; what the regex decides
  shows in any vocabulary whose merges cross its boundaries.

For each, every text of the public, hard and o200k cases (tools/tok-cases.py)
and of llama.cpp's llama-bpe vectors is encoded by llama.cpp
(tools/llama-tokenize-cases.c, compiled here against DIR's build: no BOS,
special-token text matched) and by a tokenizers Tokenizer built from the
same vocabulary (BPE over the GGUF's tokens and merges, o200k's Split
regex then ByteLevel, the CONTROL tokens special), as gpt-oss's
tokenizer.json is built.  Where the two agree the case goes to
cases-FIXTURE.tsv; where they do not, llama.cpp approximates o200k's regex
(it has no \\p{Lu} and no \\p{M} there, see docs/tokenizer-conversion.md),
and the case goes to cases-FIXTURE-hf.tsv with Hugging Face's ids, the
ones mlcore follows; llama.cpp's ids are printed for the record.
Every line: TOKENIZER, NAME, WITH_SPECIAL, ROUNDTRIP (0), HEX(TEXT), IDS.

Afterwards run tools/eog-reference.sh for eog.tsv's rows of the two files.

Needs the gguf package, tokenizers, a C compiler and the llama.cpp build.
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, "tools")
FIX = os.path.join(ROOT, "tests", "fixtures")
HARMONY = ["<|startoftext|>", "<|endoftext|>", "<|return|>", "<|constrain|>", "<|channel|>",
           "<|start|>", "<|end|>", "<|message|>", "<|call|>"]
CONTROL = 3


def load(name, file):
    spec = importlib.util.spec_from_file_location(name, os.path.join(TOOLS, file))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


vocab_ggufs = load("make_vocab_ggufs", "make-vocab-ggufs.py")
tok_cases = load("tok_cases", "tok-cases.py")
sys.path.insert(0, TOOLS)
import json2mlt  # noqa: E402


def texts(public):
    """(name, text): the public texts (public: cases-public.jsonl), the hard
    and o200k ones, llama.cpp's llama-bpe vectors and harmony's markup."""
    out = []
    with open(public, encoding="utf-8") as f:
        for ln in f:
            c = json.loads(ln)
            if c["tokenizer"] == "llama3" and not c["add_special_tokens"]:
                out.append(("public-%d" % c["case"], c["text"]))
    out += [("hard-%d" % i, t) for i, t in enumerate(tok_cases.hard_texts())]
    out += [("o200k-%d" % i, t) for i, t in enumerate(tok_cases.o200k_texts())]
    with open(os.path.join(FIX, "vocab", "cases-llama-bpe.tsv")) as f:
        for ln in f:
            c = ln.rstrip("\n").split("\t")
            out.append((c[1], bytes.fromhex(c[4]).decode("utf-8")))
    # (texts are NUL-separated here and in tests/cli/vocab.bats)
    out = [(n, t) for n, t in out if "\0" not in t]
    out += [("harmony-0", "<|start|>user<|message|>What's 2+2?<|end|><|start|>assistant"),
            ("harmony-1", "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant"
                          "<|channel|>final<|message|>4<|return|>"),
            ("harmony-2", "<|channel|>commentary to=functions.get_weather <|constrain|>json"
                          "<|message|>{\"city\":\"Paris\"}<|call|>")]
    return out


def read_vocab(path):
    import gguf
    r = gguf.GGUFReader(path)
    f = r.fields
    return dict(tokens=f["tokenizer.ggml.tokens"].contents(),
                types=f["tokenizer.ggml.token_type"].contents(),
                merges=f["tokenizer.ggml.merges"].contents(),
                template=f["tokenizer.chat_template"].contents()
                if "tokenizer.chat_template" in f else None)


def write_llama3_harmony(llama3_gguf, template, dst):
    """Llama 3's ordinary tokens and merges, harmony's specials after them."""
    import gguf
    v = read_vocab(llama3_gguf)
    n = v["types"].index(CONTROL)  # the first special: the vocabulary ends before it
    tokens = v["tokens"][:n] + HARMONY
    types = v["types"][:n] + [CONTROL] * len(HARMONY)
    w = gguf.GGUFWriter(dst, "gpt-oss")
    w.add_name("Llama 3 vocabulary, o200k pre-tokenizer, harmony specials")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-4o")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(v["merges"])
    w.add_bos_token_id(n + HARMONY.index("<|startoftext|>"))
    w.add_eos_token_id(n + HARMONY.index("<|return|>"))
    w.add_pad_token_id(n + HARMONY.index("<|endoftext|>"))
    w.add_add_bos_token(False)
    w.add_chat_template(template)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()


def hf_tokenizer(path):
    """Hugging Face's tokenizer of the GGUF's vocabulary, as gpt-oss's
    tokenizer.json has it: BPE without ignore_merges (llama.cpp's gpt-4o
    has none either), o200k's Split regex, byte-level."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models
    from tokenizers import pre_tokenizers as pt
    v = read_vocab(path)
    vocab = {}
    for i in range(len(v["tokens"]) - 1, -1, -1):  # the lower id wins a duplicate
        vocab[v["tokens"][i]] = i
    merges = [tuple(m.split(" ", 1)) for m in v["merges"]]
    tk = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=False))
    tk.pre_tokenizer = pt.Sequence([pt.Split(Regex(json2mlt.O200K_RE), "isolated"),
                                    pt.ByteLevel(add_prefix_space=False, use_regex=False)])
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False)
                           for t, k in zip(v["tokens"], v["types"]) if k == CONTROL])
    return tk


def build_tool(lcpp, work):
    exe = os.path.join(work, "llama-tokenize-cases")
    bindir = os.path.join(lcpp, "build", "bin")
    subprocess.run(["cc", "-std=c11", "-O2", "-Wall", "-Wextra",
                    "-I" + os.path.join(lcpp, "include"),
                    "-I" + os.path.join(lcpp, "ggml", "include"),
                    os.path.join(TOOLS, "llama-tokenize-cases.c"), "-o", exe, "-L" + bindir,
                    "-lllama", "-lggml", "-lggml-base", "-Wl,-rpath," + bindir], check=True)
    return exe


def llama_ids(exe, gguf_path, cases):
    data = b"".join(t.encode("utf-8") + b"\0" for _, t in cases)
    out = subprocess.run([exe, gguf_path], input=data, capture_output=True, check=True).stdout
    lines = out.decode().split("\n")[:-1]
    assert len(lines) == len(cases), (len(lines), len(cases))
    return [[int(x) for x in ln.split()] for ln in lines]


def cases_for(exe, name, gguf_path, cases, out_dir):
    ll = llama_ids(exe, gguf_path, cases)
    tk = hf_tokenizer(gguf_path)
    same = differ = 0
    with open(os.path.join(out_dir, "cases-%s.tsv" % name), "w") as agree, \
            open(os.path.join(out_dir, "cases-%s-hf.tsv" % name), "w") as hf_only:
        for (cname, text), lids in zip(cases, ll):
            hids = tk.encode(text, add_special_tokens=False).ids
            if hids == lids:
                agree.write(vocab_ggufs.tsv_line(name, cname, 0, 0, text, lids))
                same += 1
            else:
                hf_only.write(vocab_ggufs.tsv_line(name, cname, 0, 0, text, hids))
                differ += 1
                vocab_ggufs.log("%s %s %r\n  hf:        %s\n  llama.cpp: %s"
                                % (name, cname, text, hids, lids))
    if not differ:  # no file when the two references agree on every case
        os.remove(os.path.join(out_dir, "cases-%s-hf.tsv" % name))
    vocab_ggufs.log("%s: %d cases agree, %d are Hugging Face's only" % (name, same, differ))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama-cpp", default="/tmp/mlcore-llama.cpp")
    ap.add_argument("--testdata", default="/work/shared/testdata/tokenizers")
    ap.add_argument("--out", default=os.path.join(FIX, "vocab"))
    a = ap.parse_args()
    cases = texts(os.path.join(a.testdata, "cases-public.jsonl"))
    with tempfile.TemporaryDirectory() as work:
        exe = build_tool(a.llama_cpp, work)
        raw = os.path.join(work, "gpt-oss.gguf")
        vocab_ggufs.vocab_only_copy(os.path.join(FIX, "moe", "gpt-oss", "gpt-oss-q8_0.gguf"), raw)
        template = read_vocab(raw)["template"]
        vocab_ggufs.gzip_to(raw, os.path.join(a.out, "gpt-oss.gguf.gz"))
        cases_for(exe, "gpt-oss", raw, cases, a.out)
        llama3 = os.path.join(work, "llama3.gguf")
        subprocess.run("gzip -dc '%s' > '%s'" % (os.path.join(FIX, "vocab", "llama3.gguf.gz"),
                                                 llama3), shell=True, check=True)
        raw = os.path.join(work, "gpt-4o-llama3.gguf")
        write_llama3_harmony(llama3, template, raw)
        vocab_ggufs.gzip_to(raw, os.path.join(a.out, "gpt-4o-llama3.gguf.gz"))
        cases_for(exe, "gpt-4o-llama3", raw, cases, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
