#!/usr/bin/env python3
"""mkcorpus.py - writes the seed corpora of fuzz/corpus/<target>/ from the
committed fixtures (tests/fixtures/) and the project's own tools.

    python3 fuzz/mkcorpus.py [--build build] [--out fuzz/corpus]

Needs numpy and a build with bin/gguf2mlb and tests/mkmodel (make all
tests).  The seeds are small on purpose (a fuzzer mutates small inputs
faster): GGUF models are cut to a 32-token vocabulary and their tokenizer
keys go to separate vocabulary-only files; .mlb models are made with tiny
shapes by mkmodel.  Deterministic: the same fixtures give the same bytes.
Run from the top of the tree; it replaces the directories it writes.
"""
import argparse
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

FIX = "tests/fixtures"
SUPPORTED = {0: "f32", 1: "f16", 30: "bf16", 2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1",
             8: "q8_0", 10: "q2_k", 11: "q3_k", 12: "q4_k", 13: "q5_k", 14: "q6_k",
             20: "iq4_nl", 23: "iq4_xs"}
# Elements and bytes per block of the types above (ggml's table).
BLOCK = {0: (1, 4), 1: (1, 2), 30: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24),
         8: (32, 34), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176),
         14: (256, 210), 20: (32, 18), 23: (256, 136)}
FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


# ---------------------------------------------------------------------------
# A minimal GGUF reader and writer that keeps each KV's bytes as they are.
# ---------------------------------------------------------------------------
class Gguf:
    def __init__(self, path):
        self.b = open(path, "rb").read()
        self.pos = 0
        assert self.b[:4] == b"GGUF"
        self.pos = 4
        self.version = self.u32()
        n_t, n_kv = self.u64(), self.u64()
        self.kvs = []  # (key, raw bytes of type + value)
        for _ in range(n_kv):
            key = self.string()
            start = self.pos
            self.skip_value(self.u32())
            self.kvs.append((key, self.b[start:self.pos]))
        self.tensors = []  # [name, dims, type, offset]
        for _ in range(n_t):
            name = self.string()
            nd = self.u32()
            dims = [self.u64() for _ in range(nd)]
            self.tensors.append([name, dims, self.u32(), self.u64()])
        align = 32
        for k, raw in self.kvs:
            if k == "general.alignment":
                align = struct.unpack_from("<I", raw, 4)[0]
        self.data = (self.pos + align - 1) // align * align

    def u32(self):
        v = struct.unpack_from("<I", self.b, self.pos)[0]
        self.pos += 4
        return v

    def u64(self):
        v = struct.unpack_from("<Q", self.b, self.pos)[0]
        self.pos += 8
        return v

    def string(self):
        n = self.u64()
        s = self.b[self.pos:self.pos + n].decode("utf-8", "replace")
        self.pos += n
        return s

    def skip_value(self, t):
        if t in FIXED:
            self.pos += FIXED[t]
        elif t == 8:
            n = self.u64()
            self.pos += n
        else:
            et, n = self.u32(), self.u64()
            if et in FIXED:
                self.pos += FIXED[et] * n
            else:
                for _ in range(n):
                    self.skip_value(et)

    def kv_u32(self, key):
        for k, raw in self.kvs:
            if k == key:
                return struct.unpack_from("<I", raw, 4)[0]
        return None

    def tensor_bytes(self, t):
        name, dims, typ, off = t
        be, bb = BLOCK[typ]
        n = int(np.prod(dims))
        return self.b[self.data + off:self.data + off + n // be * bb]


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def write_gguf(path, kvs, tensors):
    """kvs: [(key, raw)], tensors: [(name, dims, type, bytes)]."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)))
    for k, raw in kvs:
        out += gstr(k) + raw
    off = 0
    for name, dims, typ, data in tensors:
        out += gstr(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", typ, off)
        off += (len(data) + 31) // 32 * 32
    out += bytes(-len(out) % 32)
    for _, _, _, data in tensors:
        out += data + bytes(-len(data) % 32)
    open(path, "wb").write(out)


def raw_u32(v):
    return struct.pack("<II", 4, v)


def shrink(src, dst, vocab=32, layers=None):
    """The model with a vocab-token embedding and classifier, the first
    `layers` layers (all when None) and no tokenizer keys; everything else
    as it was."""
    g = Gguf(src)
    arch = None
    for k, raw in g.kvs:
        if k == "general.architecture":
            arch = raw[12:].decode()
    kvs = []
    for k, raw in g.kvs:
        if k.startswith("tokenizer."):
            continue
        if k == f"{arch}.vocab_size":
            raw = raw_u32(vocab)
        if layers and k == f"{arch}.nextn_predict_layers":
            continue  # the multi-token-prediction blocks are cut too
        if layers and k == f"{arch}.block_count":
            raw = raw_u32(layers)
        if layers and raw[:4] == struct.pack("<I", 9):
            # Per-layer arrays (Qwen3.5's recurrent_layers) cut likewise.
            et, n = struct.unpack_from("<IQ", raw, 4)
            if n == g.kv_u32(f"{arch}.block_count") and et in FIXED:
                raw = struct.pack("<IIQ", 9, et, layers) + raw[16:16 + FIXED[et] * layers]
        kvs.append((k, raw))
    tensors = []
    for t in g.tensors:
        name, dims, typ, _ = t
        if layers and name.startswith("blk.") and int(name.split(".")[1]) >= layers:
            continue
        data = g.tensor_bytes(t)
        if name in ("token_embd.weight", "output.weight") and len(dims) == 2:
            row = len(data) // dims[1]
            data, dims = data[:row * vocab], [dims[0], vocab]
        tensors.append((name, dims, typ, data))
    write_gguf(dst, kvs, tensors)


def vocab_only(src, dst):
    """The metadata (tokenizer keys included) without tensors."""
    g = Gguf(src)
    write_gguf(dst, g.kvs, [])


# ---------------------------------------------------------------------------
# The corpora
# ---------------------------------------------------------------------------
def models():
    """(arch dir, gguf file) of every fixture, smallest type first."""
    out = []
    root = f"{FIX}/models"
    for d in sorted(os.listdir(root)):
        if os.path.isdir(f"{root}/{d}"):
            for f in sorted(os.listdir(f"{root}/{d}")):
                if f.endswith(".gguf"):
                    out.append((d, f"{root}/{d}/{f}"))
    return out


# Which fixtures seed the converter, and how many layers each keeps: one
# suffices for most; Qwen3.5's Q4_0 keeps its fourth (full attention)
# layer.  llama2 and qwen2 have dim 256 (for the K-quants): one K-quant
# seed only.
CONVERT = {"q4_0": 1, "q8_0": 1}
CONVERT_EXTRA = {"llama2": {"q4_k_m": 1}, "gemma3": {"f16": 1}, "qwen35": {"f16": 1},
                 "llama3": {"f16": 1}}
CONVERT_SKIP = {"llama2": {"q4_0", "q8_0"}, "qwen2": {"q4_0", "q8_0"}}
CONVERT_LAYERS = {"qwen35": 4}


def corpus_convert(out):
    for arch, path in models():
        kind = os.path.basename(path)[len(arch) + 1:-5]
        if kind in CONVERT_SKIP.get(arch, ()):
            continue
        if kind in CONVERT or kind in CONVERT_EXTRA.get(arch, {}):
            layers = CONVERT_EXTRA.get(arch, {}).get(kind) or CONVERT_LAYERS.get(arch, 1)
            if kind == "q8_0" and arch in CONVERT_LAYERS:
                layers = 1
            shrink(path, f"{out}/convert/{arch}-{kind}.gguf", layers=layers)
    seen = set()
    for arch, path in models():
        if arch not in seen:
            seen.add(arch)
            vocab_only(path, f"{out}/convert/{arch}-vocab.gguf")


def corpus_gguf(out):
    for f in ("writer.gguf", "writer_align.gguf", "dequant.gguf"):
        shutil.copy(f"{FIX}/gguf/{f}", f"{out}/gguf/{f}")
    # The split keys: part 1 of three (refused from a buffer), a merged
    # file (split.count 0) and a one-part model with a wrong tensor count.
    for src, dst in (("align-00001-of-00003.gguf", "split-first.gguf"),
                     ("merged.gguf", "split-merged.gguf"),
                     ("bad/single-00001-of-00001.gguf", "split-single.gguf")):
        shutil.copy(f"{FIX}/split/{src}", f"{out}/gguf/{dst}")
    for arch in ("llama3", "qwen35", "gemma3"):
        for a, path in models():
            if a == arch and path.endswith("q4_0.gguf"):
                shrink(path, f"{out}/gguf/{arch}-q4_0.gguf", layers=1)
    # One small tensor of every type ml_gguf_dequantize handles, from the
    # fixtures' own blocks where they have the type.
    rng = np.random.default_rng(1)
    tensors = []
    for typ, name in sorted(SUPPORTED.items()):
        be, bb = BLOCK[typ]
        cols = max(be, 32)
        data = bytearray(rng.integers(0, 256, size=cols // be * bb * 2, dtype=np.uint8).tobytes())
        if typ in (1,):  # f16: finite values
            data = np.float16(rng.standard_normal(cols * 2)).tobytes()
        elif typ == 0:
            data = np.float32(rng.standard_normal(cols * 2)).tobytes()
        tensors.append((name, [cols, 2], typ, bytes(data)))
    kvs = [("general.architecture", struct.pack("<I", 8) + gstr("llama")),
           ("general.alignment", raw_u32(64)),
           ("a.bool", struct.pack("<IB", 7, 1)),
           ("a.i64", struct.pack("<Iq", 11, -5)),
           ("a.f64", struct.pack("<Id", 12, 0.5)),
           ("a.strs", struct.pack("<IIQ", 9, 8, 2) + gstr("x") + gstr("yz")),
           ("a.nested", struct.pack("<IIQ", 9, 9, 2) + struct.pack("<IQ", 4, 1) + raw_u32(7)[4:]
            + struct.pack("<IQ", 8, 1) + gstr("s"))]
    write_gguf(f"{out}/gguf/types.gguf", kvs, tensors)


def corpus_dequant(out):
    rng = np.random.default_rng(2)
    for typ, name in sorted(SUPPORTED.items()):
        be, bb = BLOCK[typ]
        n = 2 * bb if be > 1 else 64
        data = rng.integers(0, 256, size=n, dtype=np.uint8).tobytes()
        open(f"{out}/dequant/{name}", "wb").write(bytes([typ]) + data)
    # Real blocks from a quantized fixture.
    for arch, path in models():
        if arch == "llama2" and not path.endswith("f32.gguf"):
            g = Gguf(path)
            for t in g.tensors:
                if t[0] == "blk.0.ffn_down.weight":
                    be, bb = BLOCK[t[2]]
                    data = g.tensor_bytes(t)[:4 * bb]
                    kind = os.path.basename(path)[7:-5]
                    open(f"{out}/dequant/real-{kind}", "wb").write(bytes([t[2]]) + data)


TEXTS = [b"Hello, world! 123 4567", "caf\u00e9 na\u00efve \u2581x <s>\n\t  end".encode(),
         b"\xff\xfe bad \xe2\x82 utf8 \xf0\x9f\x98\x80", b"", "\u4f60\u597d, \u3053\u3093\u306b\u3061\u306f".encode()]


def corpus_mlt(out, build):
    tmp = f"{out}/.tmp"
    os.makedirs(tmp, exist_ok=True)
    done, bodies = set(), set()
    for arch, path in models():
        if arch in done:
            continue
        done.add(arch)
        vocab_only(path, f"{tmp}/{arch}.gguf")
        mlt = f"{tmp}/{arch}.mlt"
        r = subprocess.run([f"{build}/bin/gguf2mlb", "-q", "-f", "-o", f"{tmp}/{arch}.mlb",
                            "-t", mlt, f"{tmp}/{arch}.gguf"], capture_output=True)
        if not os.path.exists(mlt):
            # No tensors: the model fails, so write the tokenizer alone by
            # converting the full fixture instead.
            subprocess.run([f"{build}/bin/gguf2mlb", "-q", "-f", "-o", f"{tmp}/{arch}.mlb",
                            "-t", mlt, path], check=True, capture_output=True)
        body = open(mlt, "rb").read()
        if body in bodies:
            continue  # the same tokenizer as another fixture's
        bodies.add(body)
        for i, text in enumerate(TEXTS if len(bodies) <= 2 else TEXTS[:2]):
            open(f"{out}/mlt/{arch}-{i}", "wb").write(struct.pack("<H", len(text)) + body + text)
    shutil.rmtree(tmp)
    corpus_mlt_o200k(out, build)


def corpus_mlt_o200k(out, build):
    """o200k's pre-tokenizer (flag 2048): the gpt-oss vocabulary fixture,
    which no model fixture carries, over every text and one of its own."""
    import gzip
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        with open(f"{tmp}/v.gguf", "wb") as f:
            f.write(gzip.decompress(open(f"{FIX}/vocab/gpt-oss.gguf.gz", "rb").read()))
        subprocess.run([f"{build}/bin/gguf2mlb", "-q", "-f", "--tokenizer-only", "-o",
                        f"{tmp}/v.mlt", f"{tmp}/v.gguf"], check=True, capture_output=True)
        body = open(f"{tmp}/v.mlt", "rb").read()
    extra = "CamelCase DON'T x'sy 1234567 a//b!/\n/ e\u0301E\u0301 \u01c5x".encode()
    for i, text in enumerate(TEXTS + [extra]):
        open(f"{out}/mlt/gpt-oss-{i}", "wb").write(struct.pack("<H", len(text)) + body + text)


def run_mkmodel(build, path, args, flags=None, types=None):
    cmd = [f"{build}/tests/mkmodel", "-o", path, "--seed", "1"]
    if flags:
        cmd += ["--flags", flags]
    if types:
        cmd += ["--types", types]
    subprocess.run(cmd + args.split(), check=True)


def corpus_mlb(out, build):
    base = "dim=32 n_layers=1 n_heads=1 n_kv_heads=1 hidden_dim=32 vocab=3 max_seq=16 " \
           "rope_theta=10000 norm_eps=1e-5"
    run_mkmodel(build, f"{out}/mlb/q8", base + " wtype=1")
    run_mkmodel(build, f"{out}/mlb/q8-f16", base + " wtype=1 scale_f16=1 shared_classifier=1")
    run_mkmodel(build, f"{out}/mlb/q4", base + " wtype=2 q8_mask=5 scale_f16=1")
    run_mkmodel(build, f"{out}/mlb/q4-f32", base + " wtype=2 q8_mask=0 qkv_bias=1 qk_norm=1")
    full = ("dim=32 n_layers=4 n_heads=2 n_kv_heads=1 hidden_dim=32 vocab=5 max_seq=64 "
            "rope_theta=1000000 norm_eps=1e-6 wtype=2 q8_mask=0x41 qkv_bias=1 head_dim=32 "
            "qk_norm=1 sliding_window=16 rope_local_theta=10000 act=1 post_norms=1 "
            "embed_scale=8 attn_scale=0.0625 scale_f16=1 attn_softcap=50 final_softcap=30 "
            "rot_dim=16 attn_gate=1 lin_k_heads=1 lin_v_heads=4 lin_k_dim=32 lin_v_dim=32 "
            "lin_conv=4 rope_type=3 rope_factor=4 rope_low_freq_factor=32 "
            "rope_high_freq_factor=1 rope_orig_max_seq=32 rope_attn_factor=1.1386 pooling=3")
    run_mkmodel(build, f"{out}/mlb/full", full, "1,2,4,8")
    run_mkmodel(build, f"{out}/mlb/llama3-rope", base + " wtype=1 rope_type=1 rope_factor=8 "
                "rope_low_freq_factor=1 rope_high_freq_factor=4 rope_orig_max_seq=8")
    corpus_mlb_tables(out, build, base, full)
    corpus_mlb_moe(out, build, base)
    with open(f"{out}/mlb/q8", "rb") as f:
        b = f.read()
    open(f"{out}/mlb/header-only", "wb").write(b[:256])


def corpus_mlb_moe(out, build, base):
    """Mixtures of experts: qwen3moe's shape, and every MoE array at once
    (biases, a gated shared expert, sinks, output bias, act 2) beside a
    dense layer."""
    moe = base.replace("hidden_dim=32", "hidden_dim=0") + \
        " wtype=1 n_experts=4 n_experts_used=2 expert_hidden_dim=32 moe_flags=1"
    run_mkmodel(build, f"{out}/mlb/moe", moe)
    run_mkmodel(build, f"{out}/mlb/moe-full",
                base.replace("n_layers=1", "n_layers=2") +
                " wtype=2 q8_mask=0x41 qkv_bias=1 o_bias=1 attn_sinks=1 act=2 "
                "swiglu_alpha=1.702 swiglu_limit=7 n_experts=4 n_experts_used=2 "
                "expert_hidden_dim=32 moe_gating=1 moe_flags=31 expert_scale=2.5 "
                "shared_hidden_dim=32", "16,0")


def corpus_mlb_tables(out, build, base, full):
    """wtype 3: type tables with every code, the K-quants on 256 columns."""
    run_mkmodel(build, f"{out}/mlb/table", base, None,
                "0,1,2,4,5,6,12,14,15,16")
    run_mkmodel(build, f"{out}/mlb/table-full", full.replace(" q8_mask=0x41", ""), "1,2,4,8",
                "15,1,2,4,12,5,6,14,16,0")
    run_mkmodel(build, f"{out}/mlb/table-k",
                "dim=256 n_layers=1 n_heads=1 n_kv_heads=1 head_dim=32 hidden_dim=32 vocab=3 "
                "max_seq=16 rope_theta=10000 norm_eps=1e-5 scale_f16=1", None,
                "7,8,9,10,12,11,14,13,16")


def corpus_mli(out):
    def mli(path, n_layers, dim, hidden, q_dim, sums=None, tokens=(7, 3)):
        q = q_dim or dim
        n = n_layers * (2 * dim + q + hidden) + dim
        rng = np.random.default_rng(n)
        v = np.abs(rng.standard_normal(n)) * 10 if sums is None else sums(n)
        hdr = b"MLI1" + struct.pack("<IIIIIQQ", 1, n_layers, dim, hidden, q_dim, *tokens)
        open(path, "wb").write(hdr + np.float64(v).tobytes())
    mli(f"{out}/mli/fits", 2, 32, 64, 0)
    mli(f"{out}/mli/fits-zero-tokens", 2, 32, 64, 0, lambda n: np.zeros(n), (0, 0))
    mli(f"{out}/mli/fits-no-cls-tokens", 2, 32, 64, 0, tokens=(5, 0))
    mli(f"{out}/mli/other", 1, 64, 32, 96)
    mli(f"{out}/mli/tiny", 1, 1, 1, 0)
    llama_imatrix(out)


def llama_imatrix(out):
    """llama-imatrix's two formats for the fixed model (2 layers, dim 32,
    hidden 64): a GGUF (general.type imatrix, NAME.in_sum2 and NAME.counts)
    and a .dat (per entry name, chunks, mean squares times chunks)."""
    from gguf import GGUFWriter
    rng = np.random.default_rng(40)
    mats = [(f"blk.{l}.{m}.weight", 64 if m == "ffn_down" else 32)
            for l in range(2)
            for m in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")]
    w = GGUFWriter(f"{out}/mli/llama-imatrix.gguf", arch="")
    w.add_string("general.type", "imatrix")
    dat = struct.pack("<i", len(mats))
    for name, cols in mats:
        v = np.float32(np.abs(rng.standard_normal(cols)) * 50)
        w.add_tensor(name + ".in_sum2", v)
        w.add_tensor(name + ".counts", np.float32([16 if "ffn" in name else 8]))
        dat += struct.pack("<i", len(name)) + name.encode() + struct.pack("<ii", 2, cols)
        dat += (v / 8).tobytes()
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    open(f"{out}/mli/llama-imatrix.dat", "wb").write(dat + struct.pack("<ii", 2, 4) + b"text")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="fuzz/corpus")
    a = ap.parse_args()
    for t in ("convert", "gguf", "dequant", "mlt", "mlb", "mli"):
        shutil.rmtree(f"{a.out}/{t}", ignore_errors=True)
        os.makedirs(f"{a.out}/{t}")
    corpus_convert(a.out)
    corpus_gguf(a.out)
    corpus_dequant(a.out)
    corpus_mlt(a.out, a.build)
    corpus_mlb(a.out, a.build)
    corpus_mli(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
