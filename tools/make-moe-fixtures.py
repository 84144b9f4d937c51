#!/usr/bin/env python3
"""Make the mixture-of-experts reference fixtures in tests/fixtures/moe/ (issue 40).

For each of the three MoE architectures mlcore is to run -- qwen3moe, gpt-oss
and qwen35moe -- this writes a small GGUF with random weights straight from
gguf-py (as bench/make-bench-gguf.py does: no transformers, no converter),
in the tensor names, shapes and metadata keys llama.cpp's loaders read
(src/models/qwen3moe.cpp, openai-moe.cpp, qwen35moe.cpp), and records what
llama.cpp computes on it:

  * its logits at every position of a fixed prompt (tools/llama-logits.c,
    the helper the dense fixtures use: one batch, one thread, F32 KV cache,
    no flash attention);
  * its greedy continuation of the prompt, 32 tokens through the decode
    path, with the two largest logits of every step, and its routing: the
    router's scores, the chosen experts and their weights at every layer
    and position (tools/llama-moe-trace.c, which reads llama.cpp's own
    ffn_moe_* graph tensors).

Every quantized file comes with a twin holding the same weights dequantized
to F32 (never committed: it is remade from the quantized file).  llama.cpp's
distance between the two is the noise its own activation quantization
causes, the measure the dense e2e tests use (tests/unit/check_e2e.c).

Routing is a discrete choice, so a fixture is only a fair reference if no
decision is a near tie that arithmetic noise could flip.  The weights come
from a seed, and the script takes the first seed (from SEED up) whose every
file meets these in llama.cpp's runs:
  * every routing decision (prompt and continuation) has a gap of at least
    GAP_MIN between the last chosen expert and the first one left out,
    measured on the router's logit scale (the log-ratio of the two
    probabilities for softmax gating, the logit difference for gpt-oss's
    softmax over the chosen logits) and divided by the standard deviation
    of that token's router logits;
  * the twin chooses the same experts at the first MIN_TWIN_ROWS prompt
    positions at least: llama.cpp's distance between their logits there is
    its activation-quantization noise, not a routing flip (the twin's
    noise is about a hundred times what separates two runtimes that
    quantize activations alike, so the twin may flip where they do not;
    logits after its first flip are no noise measure);
  * every greedy step's two largest logits differ by at least MARGIN_MIN of
    the larger one's magnitude, no step ends the text (EOG), and at least
    MIN_DISTINCT different tokens come out;
  * gpt-oss: some expert gate values exceed the SwiGLU clamp and some up
    values lie outside it, so both sides of the clamp are exercised.

Everything lands in tests/fixtures/moe/<model>/ with expected.json and a
README.md written here.  Run from the repository root:

    python3 tools/make-moe-fixtures.py [--only NAME] [--llama-cpp DIR] [--work DIR]

Needs numpy and a llama.cpp source tree whose build/bin holds libllama (its
gguf-py is used for writing and quantizing), and a C compiler.  Deterministic
for given numpy, gguf-py and llama.cpp versions (recorded in expected.json).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

sys.dont_write_bytecode = True

REPO = Path(__file__).resolve().parent.parent
TOOLS = REPO / "tools"
OUT = REPO / "tests" / "fixtures" / "moe"
MODELS_DIR = REPO / "tests" / "fixtures" / "models"
TEMPLATES = REPO / "tests" / "fixtures" / "chat" / "templates"
DEFAULT_LLAMA_CPP = os.environ.get("LLAMA_CPP_DIR", "/tmp/mlcore-llama.cpp")

SEED = 4000
MAX_TRIES = 200
N_GEN = 32
GAP_MIN = 0.005     # of the standard deviation of the router's logits for the token
MARGIN_MIN = 0.005  # of the larger of the step's two largest |logits|
MIN_DISTINCT = 4
MIN_TWIN_ROWS = 8   # prompt positions before the twin's first other choice


# The dense fixtures' prompt p0 (their PROMPT_TEXT cut to its first 29
# tokens), so both sets share their text.
PROMPT_TEXT = json.loads((REPO / "tests/fixtures/models/qwen3/expected.json").read_text())[
    "prompts"]["p0"]["text"]

# --------------------------------------------------------------------------
# The models.  Shapes are small but keep every feature of the real ones:
# qwen3moe: Qwen3-30B-A3B's layout (q/k norms, head_dim 32 with width 64, an
#   untied classifier, the unused dense feed_forward_length the real GGUFs
#   carry); softmax gating, top-k weights normalized.
# gpt-oss: gpt-oss-20b's (sinks, sliding window on even layers, YaRN with
#   its factor 32, biases on q/k/v/o, router and experts, the clamped
#   SwiGLU with the gate and up projections large enough to reach the
#   clamp at 7); softmax over the chosen logits.  Two files: all Q8_0, and
#   llama-quantize's MXFP4_MOE mix (experts MXFP4, the rest Q8_0).  8
#   experts and 2 used, not the real 32 and 4: with 16 and 4, no seed in
#   200 was free of near ties over 4 layers x 60 positions.
# qwen35moe: the dense qwen35 fixture's hybrid (three gated-delta-rule
#   layers, one gated full-attention layer, partial RoPE) with MoE FFNs and
#   the sigmoid-gated shared expert.
# --------------------------------------------------------------------------

QWEN3MOE = dict(
    name="qwen3moe", arch="qwen3moe", tok="qwen3", template="Qwen-Qwen3-0.6B.jinja",
    dim=64, n_layer=3, n_head=4, n_head_kv=2, head_dim=32, n_expert=8, n_used=2, n_ff_exp=32,
    n_ff_dense=96, exp_in_std=1.0, variants=["q8_0"],
    desc="Qwen3-MoE: 3 layers x 64, heads 4/2 of 32 (q/k norms), 8 experts of width 32, "
         "2 used, softmax then top-k renormalized, untied classifier",
)
GPT_OSS = dict(
    name="gpt-oss", arch="gpt-oss", tok="harmony", template="openai-gpt-oss-120b.jinja",
    dim=64, n_layer=4, n_head=4, n_head_kv=2, head_dim=32, n_expert=8, n_used=2, n_ff_exp=32,
    window=8, rope_base=150000.0, yarn_factor=32.0, yarn_orig=256, ctx=8192,
    exp_in_std=2.0, variants=["q8_0", "mxfp4"],
    desc="gpt-oss: 4 layers x 64, heads 4/2 of 32, attention sinks, window 8 on layers 0 and 2, "
         "YaRN (factor 32, original 256), biases on q/k/v/o, router and experts, 8 experts of "
         "width 32 (on MXFP4's grid), 2 used, softmax over the chosen logits, clamped SwiGLU "
         "(alpha 1.702, limit 7)",
)
QWEN35MOE = dict(
    name="qwen35moe", arch="qwen35moe", tok="qwen35", template="Qwen3.5-4B.jinja",
    dim=64, n_layer=4, n_expert=8, n_used=2, n_ff_exp=32, n_ff_shexp=32, exp_in_std=1.0,
    variants=["q8_0"],
    desc="Qwen3.5-MoE hybrid: the qwen35 fixture's 4 layers (0-2 gated delta rule, 3 gated full "
         "attention with q/k norms and partial RoPE), 8 experts of width 32, 2 used, softmax then "
         "top-k renormalized, a shared expert of width 32 behind a sigmoid gate, untied classifier",
)
MODELS = [QWEN3MOE, GPT_OSS, QWEN35MOE]

# The harmony specials of o200k_harmony (gpt-oss), after the byte-level
# vocabulary, in their real order.
HARMONY = ["<|startoftext|>", "<|endoftext|>", "<|return|>", "<|constrain|>", "<|channel|>",
           "<|start|>", "<|end|>", "<|message|>", "<|call|>"]


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------

def run(cmd: list[str]) -> subprocess.CompletedProcess:
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.stderr.write(res.stdout[-4000:] + res.stderr[-4000:])
        raise SystemExit(f"command failed ({res.returncode}): {' '.join(cmd)}")
    return res


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_tool(lcpp: Path, work: Path, name: str) -> Path:
    exe = work / name
    bindir = lcpp / "build" / "bin"
    run(["cc", "-std=c11", "-O2", "-Wall", "-Wextra", f"-I{lcpp / 'include'}",
         f"-I{lcpp / 'ggml' / 'include'}", str(TOOLS / f"{name}.c"), "-o", str(exe),
         f"-L{bindir}", "-lllama", "-lggml", "-lggml-base", f"-Wl,-rpath,{bindir}"])
    return exe


def read_tokenizer(gguf, path: Path) -> dict:
    """The byte-level BPE vocabulary of a dense fixture GGUF."""
    r = gguf.GGUFReader(str(path))
    f = r.fields
    def strs(key):
        return [bytes(f[key].parts[i]).decode() for i in f[key].data]
    return dict(tokens=strs("tokenizer.ggml.tokens"),
                types=[int(f["tokenizer.ggml.token_type"].parts[i][0])
                       for i in f["tokenizer.ggml.token_type"].data],
                merges=strs("tokenizer.ggml.merges"),
                pre=bytes(f["tokenizer.ggml.pre"].parts[-1]).decode(),
                eos=int(f["tokenizer.ggml.eos_token_id"].parts[-1][0]))


def tokenizer_for(gguf, spec: dict) -> dict:
    if spec["tok"] == "qwen3":
        return read_tokenizer(gguf, MODELS_DIR / "qwen3" / "qwen3-f32.gguf")
    if spec["tok"] == "qwen35":
        return read_tokenizer(gguf, MODELS_DIR / "qwen35" / "qwen35-f32.gguf")
    # gpt-oss: the same byte-level BPE (bytes and merges) with o200k's
    # pre-tokenizer and the harmony specials in place of Qwen's.
    base = read_tokenizer(gguf, MODELS_DIR / "qwen3" / "qwen3-f32.gguf")
    n = base["types"].index(3)  # the first special: the vocabulary ends before it
    toks = base["tokens"][:n] + HARMONY
    return dict(tokens=toks, types=base["types"][:n] + [3] * len(HARMONY),
                merges=base["merges"], pre="gpt-4o",
                bos=n + HARMONY.index("<|startoftext|>"), eos=n + HARMONY.index("<|return|>"),
                pad=n + HARMONY.index("<|endoftext|>"))


# --------------------------------------------------------------------------
# Tensors: (GGUF name, numpy shape, role).  numpy shapes are GGUF's ne
# reversed: a matrix of `rows` outputs over `cols` inputs is (rows, cols),
# an expert stack (n_expert, rows, cols).
# --------------------------------------------------------------------------

def moe_tensors(spec: dict, p: str, dim: int, biases: bool) -> list:
    E, F = spec["n_expert"], spec["n_ff_exp"]
    t = [(p + "ffn_gate_inp.weight", (E, dim), "router"),
         (p + "ffn_gate_exps.weight", (E, F, dim), "exp_in"),
         (p + "ffn_down_exps.weight", (E, dim, F), "exp_down"),
         (p + "ffn_up_exps.weight", (E, F, dim), "exp_in")]
    if biases:
        t += [(p + "ffn_gate_inp.bias", (E,), "router_bias"),
              (p + "ffn_gate_exps.bias", (E, F), "exp_bias"),
              (p + "ffn_down_exps.bias", (E, dim), "exp_bias"),
              (p + "ffn_up_exps.bias", (E, F), "exp_bias")]
    return t


def qwen3moe_tensors(s: dict) -> list:
    d, hd = s["dim"], s["head_dim"]
    q, kv = hd * s["n_head"], hd * s["n_head_kv"]
    t = [("token_embd.weight", (s["vocab"], d), "emb")]
    for i in range(s["n_layer"]):
        p = f"blk.{i}."
        t += [(p + "attn_norm.weight", (d,), "norm"),
              (p + "attn_q.weight", (q, d), "proj"), (p + "attn_k.weight", (kv, d), "proj"),
              (p + "attn_v.weight", (kv, d), "proj"), (p + "attn_output.weight", (d, q), "proj"),
              (p + "attn_q_norm.weight", (hd,), "norm"), (p + "attn_k_norm.weight", (hd,), "norm"),
              (p + "ffn_norm.weight", (d,), "norm")]
        t += moe_tensors(s, p, d, biases=False)
    return t + [("output_norm.weight", (d,), "norm"), ("output.weight", (s["vocab"], d), "cls")]


def gpt_oss_tensors(s: dict) -> list:
    d, hd = s["dim"], s["head_dim"]
    q, kv = hd * s["n_head"], hd * s["n_head_kv"]
    t = [("token_embd.weight", (s["vocab"], d), "emb")]
    for i in range(s["n_layer"]):
        p = f"blk.{i}."
        t += [(p + "attn_norm.weight", (d,), "norm"),
              (p + "attn_q.weight", (q, d), "proj"), (p + "attn_q.bias", (q,), "bias"),
              (p + "attn_k.weight", (kv, d), "proj"), (p + "attn_k.bias", (kv,), "bias"),
              (p + "attn_v.weight", (kv, d), "proj"), (p + "attn_v.bias", (kv,), "bias"),
              (p + "attn_output.weight", (d, q), "proj"), (p + "attn_output.bias", (d,), "bias"),
              (p + "attn_sinks.weight", (s["n_head"],), "sink"),
              (p + "post_attention_norm.weight", (d,), "norm")]
        t += moe_tensors(s, p, d, biases=True)
    return t + [("output_norm.weight", (d,), "norm"), ("output.weight", (s["vocab"], d), "cls")]


# Roles of the dense qwen35 fixture's tensors kept in qwen35moe.
QWEN35_ROLES = {
    "attn_norm.weight": "norm", "post_attention_norm.weight": "norm",
    "attn_q_norm.weight": "norm", "attn_k_norm.weight": "norm", "ssm_norm.weight": "norm",
    "attn_q.weight": "proj", "attn_k.weight": "proj", "attn_v.weight": "proj",
    "attn_output.weight": "proj", "attn_qkv.weight": "proj", "attn_gate.weight": "proj",
    "ssm_out.weight": "proj", "ssm_alpha.weight": "proj", "ssm_beta.weight": "proj",
    "ssm_a": "ssm_a", "ssm_dt.bias": "ssm_dt", "ssm_conv1d.weight": "conv",
}


def qwen35moe_tensors(s: dict, src) -> list:
    """The qwen35 fixture's tensors of layers 0..n_layer-1 (shapes only; its
    multi-token-prediction block and dense FFNs dropped), with MoE FFNs."""
    d, L = s["dim"], s["n_layer"]
    t = [("token_embd.weight", (s["vocab"], d), "emb")]
    for i in range(L):
        p = f"blk.{i}."
        for r in src.tensors:
            if not r.name.startswith(p) or "ffn_" in r.name:
                continue
            role = QWEN35_ROLES[r.name[len(p):]]
            t.append((r.name, tuple(int(x) for x in reversed(r.shape)), role))
        t += moe_tensors(s, p, d, biases=False)
        F = s["n_ff_shexp"]
        t += [(p + "ffn_gate_inp_shexp.weight", (d,), "proj"),
              (p + "ffn_gate_shexp.weight", (F, d), "proj"),
              (p + "ffn_up_shexp.weight", (F, d), "proj"),
              (p + "ffn_down_shexp.weight", (d, F), "proj")]
    # Untied, as in Qwen3.5-35B-A3B (a tied classifier over these random
    # embeddings repeats the input token).
    return t + [("output_norm.weight", (d,), "norm"), ("output.weight", (s["vocab"], d), "cls")]


def random_values(rng, spec: dict, role: str, shape: tuple):
    """Weights that keep activations near unit scale, a router whose logits
    have a std of about 2, and logits spread enough for clear argmaxes."""
    import numpy as np
    cols = shape[-1]
    g = lambda std: rng.normal(0.0, std, shape)
    v = {
        "emb": lambda: g(1.0),
        "norm": lambda: rng.uniform(0.8, 1.2, shape),
        "proj": lambda: g(1.0 / math.sqrt(cols)),
        "bias": lambda: g(0.2),
        "router": lambda: g(2.0 / math.sqrt(cols)),
        "router_bias": lambda: g(0.5),
        "exp_in": lambda: g(spec["exp_in_std"] / math.sqrt(cols)),
        "exp_down": lambda: g(1.0 / math.sqrt(cols)),
        "exp_bias": lambda: g(0.5),
        "sink": lambda: g(1.0),
        "cls": lambda: g(4.0 / math.sqrt(cols)),
        "ssm_a": lambda: -rng.uniform(0.2, 1.5, shape),
        "ssm_dt": lambda: g(0.5),
        "conv": lambda: g(0.5),
    }[role]()
    return np.asarray(v, dtype=np.float32)


def snap_to_mxfp4(gguf, tensors: list, values: dict) -> None:
    """Puts the expert stacks on MXFP4's grid, so that the MXFP4 file holds
    them exactly and the Q8_0 file nearly (its blocks of these values are
    off by at most 1/254 of a block's largest): the two files are one
    model, and a seed that makes one a fair reference makes the other one."""
    Q = gguf.GGMLQuantizationType
    for name, shape, _ in tensors:
        if len(shape) == 3 and name.endswith(".weight"):
            values[name] = gguf.quants.dequantize(gguf.quants.quantize(values[name], Q.MXFP4),
                                                  Q.MXFP4)


def tensor_type(gguf, name: str, shape: tuple, variant: str):
    """llama-quantize's choice for the file type (Q8_0, or MXFP4_MOE: the
    expert stacks MXFP4, every other matrix Q8_0): vectors, the routers
    (ffn_gate_inp*) and rows that are no whole number of blocks stay F32."""
    Q = gguf.GGMLQuantizationType
    if len(shape) < 2 or not name.endswith(".weight") or "ffn_gate_inp" in name or shape[-1] % 32:
        return Q.F32
    if variant == "mxfp4" and len(shape) == 3:
        return Q.MXFP4
    return Q.Q8_0


# --------------------------------------------------------------------------
# Writing the GGUFs
# --------------------------------------------------------------------------

def add_metadata(gguf, w, spec: dict, tok: dict, src_kv: dict | None) -> None:
    a = spec["arch"]
    s = spec
    w.add_name(f"mlcore {s['name']} MoE fixture")
    if a == "qwen35moe":
        for key, (kind, val) in src_kv.items():  # the dense fixture's hyperparameters
            getattr(w, kind)(key.replace("qwen35.", "qwen35moe.", 1), val)
        w.add_uint32(f"{a}.block_count", s["n_layer"])
        w.add_array(f"{a}.attention.recurrent_layers",
                    [bool((i + 1) % 4) for i in range(s["n_layer"])])
        w.add_uint32(f"{a}.expert_shared_feed_forward_length", s["n_ff_shexp"])
    else:
        w.add_uint32(f"{a}.block_count", s["n_layer"])
        w.add_uint32(f"{a}.context_length", s.get("ctx", 256))
        w.add_uint32(f"{a}.embedding_length", s["dim"])
        w.add_uint32(f"{a}.feed_forward_length", s.get("n_ff_dense", s["n_ff_exp"]))
        w.add_uint32(f"{a}.attention.head_count", s["n_head"])
        w.add_uint32(f"{a}.attention.head_count_kv", s["n_head_kv"])
        w.add_uint32(f"{a}.attention.key_length", s["head_dim"])
        w.add_uint32(f"{a}.attention.value_length", s["head_dim"])
        w.add_float32(f"{a}.rope.freq_base", s.get("rope_base", 1000000.0))
        w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", 1e-5 if a == "gpt-oss" else 1e-6)
    if a == "gpt-oss":
        w.add_uint32(f"{a}.attention.sliding_window", s["window"])
        w.add_string(f"{a}.rope.scaling.type", "yarn")
        w.add_float32(f"{a}.rope.scaling.factor", s["yarn_factor"])
        w.add_uint32(f"{a}.rope.scaling.original_context_length", s["yarn_orig"])
    w.add_uint32(f"{a}.expert_count", s["n_expert"])
    w.add_uint32(f"{a}.expert_used_count", s["n_used"])
    w.add_uint32(f"{a}.expert_feed_forward_length", s["n_ff_exp"])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(tok["pre"])
    w.add_token_list(tok["tokens"])
    w.add_token_types(tok["types"])
    w.add_token_merges(tok["merges"])
    w.add_eos_token_id(tok["eos"])
    if "bos" in tok:
        w.add_bos_token_id(tok["bos"])
    if "pad" in tok:
        w.add_pad_token_id(tok["pad"])
    w.add_add_bos_token(False)
    w.add_chat_template((TEMPLATES / s["template"]).read_text())


def write_gguf(gguf, path: Path, spec: dict, tok: dict, src_kv, tensors: list, values: dict,
               variant: str, twin: bool) -> list:
    """The file of `variant` (or, with twin, its weights dequantized to
    F32); returns [(name, type name)]."""
    import numpy as np
    Q = gguf.GGMLQuantizationType
    w = gguf.GGUFWriter(str(path), spec["arch"])
    add_metadata(gguf, w, spec, tok, src_kv)
    ftype = {"q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
             "mxfp4": gguf.LlamaFileType.MOSTLY_MXFP4_MOE}[variant]
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if twin else ftype)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    types = []
    for name, shape, _ in tensors:
        v = values[name]
        qt = tensor_type(gguf, name, shape, variant)
        if qt == Q.F32:
            w.add_tensor(name, v)
            types.append((name, "F32"))
            continue
        raw = gguf.quants.quantize(v, qt)
        if twin:
            w.add_tensor(name, np.ascontiguousarray(gguf.quants.dequantize(raw, qt), np.float32))
            types.append((name, "F32"))
        else:
            w.add_tensor(name, raw, raw_dtype=qt)
            types.append((name, qt.name))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return types


def qwen35_source(gguf):
    """The dense qwen35 fixture: its tensors' shapes and its hyperparameters
    (as (writer method, value)), without MTP, block count and layer kinds."""
    r = gguf.GGUFReader(str(MODELS_DIR / "qwen35" / "qwen35-f32.gguf"))
    kv = {}
    for key, f in r.fields.items():
        if not key.startswith("qwen35.") or key in (
                "qwen35.block_count", "qwen35.nextn_predict_layers",
                "qwen35.attention.recurrent_layers"):
            continue
        val = f.contents()
        kind = {gguf.GGUFValueType.UINT32: "add_uint32",
                gguf.GGUFValueType.FLOAT32: "add_float32"}.get(f.types[0], "add_array")
        kv[key] = (kind, val)
    return r, kv


# --------------------------------------------------------------------------
# llama.cpp's runs, and what a fixture must satisfy
# --------------------------------------------------------------------------

def read_trace(path: Path, spec: dict) -> dict:
    """The JSON lines of llama-moe-trace, turned into routing per layer and
    position and the greedy steps."""
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    head, steps, end = lines[0], [], None
    prompt = head["prompt"]
    n = len(prompt)
    tens = {}
    for obj in lines[1:]:
        if "tensor" in obj:
            tens[(obj["pass"], obj["tensor"])] = obj
        elif "step" in obj:
            steps.append(obj)
        elif "end" in obj:
            end = obj
    E, K = spec["n_expert"], spec["n_used"]
    softmax_first = spec["arch"] != "gpt-oss"
    routing = []  # routing[layer][pos]
    for layer in range(spec["n_layer"]):
        per_pos = {}
        for pas in range(len(end["generated"])):
            probs = tens.get((pas, f"ffn_moe_probs-{layer}"))
            if probs is None:
                continue
            topk = tens[(pas, f"ffn_moe_topk-{layer}")]
            final = None
            for nm in ("ffn_moe_weights_scaled", "ffn_moe_weights_norm", "ffn_moe_weights_softmax",
                       "ffn_moe_weights"):
                final = tens.get((pas, f"{nm}-{layer}"))
                if final is not None:
                    break
            rows = probs["ne"][1]
            for r in range(rows):
                pos = r if pas == 0 else n - 1 + pas
                sc = probs["data"][r * E:(r + 1) * E]
                ex = topk["data"][r * K:(r + 1) * K]
                wt = final["data"][r * K:(r + 1) * K]
                order = sorted(range(E), key=lambda e: (-sc[e], e))
                lg = [math.log(x) if x > 0 else -math.inf for x in sc] if softmax_first else sc
                spread = statistics.pstdev([x for x in lg if x > -math.inf])
                gap = (lg[order[K - 1]] - lg[order[K]]) / spread
                per_pos[pos] = dict(experts=ex, weights=wt, scores=sc, gap=gap,
                                    sorted_ok=sorted(ex) == sorted(order[:K]))
        routing.append([per_pos[p] for p in sorted(per_pos)])
    return dict(prompt=prompt, n_vocab=head["n_vocab"], steps=steps, end=end["end"],
                generated=end["generated"], routing=routing, clamp=clamp_hits(tens, spec))


SWIGLU_LIMIT = 7.0  # gpt-oss's clamp (llama.cpp's src/llama-graph.cpp: LLM_FFN_SWIGLU_OAI_MOE)


def clamp_hits(tens: dict, spec: dict) -> dict | None:
    """gpt-oss: how many expert gate values (after their bias) exceed the
    clamp and how many up values lie outside it, over all passes and layers:
    the fixture must reach both sides of the clamped SwiGLU."""
    if spec["arch"] != "gpt-oss":
        return None
    gate = up = 0
    for (pas, name), obj in tens.items():
        if name.startswith("ffn_moe_gate_biased-"):
            gate += sum(1 for v in obj["data"] if v > SWIGLU_LIMIT)
        elif name.startswith("ffn_moe_up_biased-"):
            up += sum(1 for v in obj["data"] if abs(v) > SWIGLU_LIMIT)
    return dict(gate_above=gate, up_outside=up)


def trace(exe: Path, gguf_path: Path, out: Path, spec: dict) -> dict:
    run([str(exe), str(gguf_path), str(out), str(N_GEN), "-p", PROMPT_TEXT])
    return read_trace(out, spec)


def twin_agrees_until(t: dict, twin: dict) -> int:
    """The first prompt position at which the twin chooses other experts in
    some layer (the prompt's length if none)."""
    n = len(t["prompt"])
    first = n
    for la, lb in zip(t["routing"], twin["routing"]):
        for pos, (a, b) in enumerate(zip(la[:n], lb[:n])):
            if sorted(a["experts"]) != sorted(b["experts"]):
                first = min(first, pos)
                break
    return first


def judge(t: dict, twin: dict) -> list[str]:
    """Why this file is no fair reference (empty when it is)."""
    why = []
    gaps = [r["gap"] for layer in t["routing"] for r in layer]
    if min(gaps) < GAP_MIN:
        why.append(f"routing gap {min(gaps):.4g}")
    if any(not r["sorted_ok"] for layer in t["routing"] for r in layer):
        why.append("llama.cpp's top-k is not the sorted top-k")
    if twin_agrees_until(t, twin) < MIN_TWIN_ROWS:
        why.append(f"the twin routes position {twin_agrees_until(t, twin)} differently")
    if t["end"] != "length":
        why.append("end of generation before 32 tokens")
    margins = [(s["top1"] - s["top2"]) / max(abs(s["top1"]), abs(s["top2"]), 1e-30)
               for s in t["steps"]]
    if min(margins) < MARGIN_MIN:
        why.append(f"greedy margin {min(margins):.4g}")
    if len(set(t["generated"])) < MIN_DISTINCT:
        why.append(f"only {len(set(t['generated']))} distinct tokens")
    if t["clamp"] is not None and min(t["clamp"].values()) == 0:
        why.append(f"the SwiGLU clamp is not reached ({t['clamp']})")
    return why


def llama_logits(exe: Path, gguf_path: Path, ids: list[int], out: Path) -> None:
    run([str(exe), str(gguf_path), str(out)] + [str(i) for i in ids])


def rel_diff(a, b) -> float:
    import numpy as np
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))


# --------------------------------------------------------------------------
# One model
# --------------------------------------------------------------------------

def make_model(gguf, spec: dict, tools: dict, work: Path) -> dict:
    import numpy as np
    tok = tokenizer_for(gguf, spec)
    spec = dict(spec, vocab=len(tok["tokens"]))
    src_kv = None
    if spec["arch"] == "qwen3moe":
        tensors = qwen3moe_tensors(spec)
    elif spec["arch"] == "gpt-oss":
        tensors = gpt_oss_tensors(spec)
    else:
        src, src_kv = qwen35_source(gguf)
        tensors = qwen35moe_tensors(spec, src)
    mdir = work / spec["name"]
    mdir.mkdir(parents=True, exist_ok=True)
    rejected = []
    for seed in range(SEED, SEED + MAX_TRIES):
        rng = np.random.default_rng(seed)
        values = {name: random_values(rng, spec, role, shape) for name, shape, role in tensors}
        if "mxfp4" in spec["variants"]:
            snap_to_mxfp4(gguf, tensors, values)
        files, ok = {}, True
        for variant in spec["variants"]:
            path = mdir / f"{spec['name']}-{variant}.gguf"
            twin = mdir / f"{spec['name']}-{variant}-deq.gguf"
            types = write_gguf(gguf, path, spec, tok, src_kv, tensors, values, variant, False)
            write_gguf(gguf, twin, spec, tok, src_kv, tensors, values, variant, True)
            t = trace(tools["trace"], path, mdir / f"{variant}.jsonl", spec)
            tt = trace(tools["trace"], twin, mdir / f"{variant}-deq.jsonl", spec)
            why = judge(t, tt)
            if why:
                rejected.append(dict(seed=seed, variant=variant, why=why))
                print(f"  {spec['name']} seed {seed} {variant}: {'; '.join(why)}")
                ok = False
                break
            files[variant] = dict(path=path, twin=twin, trace=t, twin_trace=tt, types=types)
        if ok:
            return dict(spec=spec, tok=tok, seed=seed, files=files, rejected=rejected,
                        tensors=tensors)
    raise SystemExit(f"{spec['name']}: no seed in {SEED}..{SEED + MAX_TRIES - 1} makes a fair "
                     f"reference")


def compact_routing(t: dict) -> list:
    return [[dict(experts=r["experts"], weights=r["weights"], scores=r["scores"],
                  gap=round(r["gap"], 6)) for r in layer] for layer in t["routing"]]


def publish(model: dict, tools: dict, versions: dict) -> dict:
    """Copies one model's files into tests/fixtures/moe/<name>/ and writes
    its expected.json."""
    import numpy as np
    spec = model["spec"]
    dest = OUT / spec["name"]
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "logits").mkdir(parents=True)
    ids = None
    man_files = []
    for variant, f in model["files"].items():
        t, tt = f["trace"], f["twin_trace"]
        ids = t["prompt"]
        name = f"{spec['name']}-{variant}.gguf"
        shutil.copy(f["path"], dest / name)
        lg = dest / "logits" / f"llama.cpp-{variant}.p0.f32"
        lgd = dest / "logits" / f"llama.cpp-{variant}-deq.p0.f32"
        llama_logits(tools["logits"], f["path"], ids, lg)
        llama_logits(tools["logits"], f["twin"], ids, lgd)
        V = t["n_vocab"]
        a = np.fromfile(lg, dtype="<f4").reshape(len(ids), V)
        b = np.fromfile(lgd, dtype="<f4").reshape(len(ids), V)
        agree = twin_agrees_until(t, tt)
        trace_file = dest / f"trace-{variant}.json"
        trace_file.write_text(json.dumps(dict(
            prompt=ids, generated=t["generated"],
            steps=[dict(id=s["id"], piece_hex=s["piece"].encode("latin-1").hex(),
                        top1=s["top1"], top2=s["top2"],
                        second=s["second"]) for s in t["steps"]],
            routing=compact_routing(t)), separators=(",", ":")) + "\n")
        types = {}
        for _, ty in f["types"]:
            types[ty] = types.get(ty, 0) + 1
        gaps = [r["gap"] for layer in t["routing"] for r in layer]
        margins = [(s["top1"] - s["top2"]) / max(abs(s["top1"]), abs(s["top2"]))
                   for s in t["steps"]]
        man_files.append(dict(
            variant=variant, gguf=name, bytes=(dest / name).stat().st_size,
            sha256=sha256_file(dest / name), tensor_types=types,
            logits=f"logits/{lg.name}", logits_deq=f"logits/{lgd.name}",
            logits_shape=[len(ids), V], logits_sha256=sha256_file(lg),
            argmax=[int(x) for x in a.argmax(axis=1)],
            twin_agrees_until=agree, noise_rel=rel_diff(a[:agree], b[:agree]),
            trace=trace_file.name, generated=t["generated"],
            generated_text=b"".join(x["piece"].encode("latin-1") for x in t["steps"]).decode(
                "utf-8", errors="replace"),
            min_routing_gap=min(gaps), min_greedy_margin=min(margins), swiglu_clamp=t["clamp"],
            deq_gguf_sha256=sha256_file(f["twin"])))
    s = spec
    man = dict(
        model=dict((k, s[k]) for k in s if k not in ("variants", "tok", "template")),
        seed=model["seed"], seeds_rejected=model["rejected"],
        tokenizer=dict(pre=model["tok"]["pre"], n_tokens=len(model["tok"]["tokens"]),
                       eos=model["tok"]["eos"], bos=model["tok"].get("bos"),
                       chat_template=f"tests/fixtures/chat/templates/{s['template']}"),
        prompt=dict(text=PROMPT_TEXT, ids=ids), n_gen=N_GEN,
        criteria=dict(gap_min=GAP_MIN, margin_min=MARGIN_MIN, min_distinct=MIN_DISTINCT,
                      min_twin_rows=MIN_TWIN_ROWS),
        files=man_files, versions=versions)
    (dest / "expected.json").write_text(json.dumps(man, indent=1) + "\n")
    return man


def versions_used(gguf, lcpp: Path) -> dict:
    import numpy as np
    v = dict(numpy=np.__version__, python=sys.version.split()[0])
    toml = lcpp / "gguf-py" / "pyproject.toml"
    for line in toml.read_text().splitlines():
        if line.startswith("version"):
            v["gguf-py"] = line.split("=")[1].strip().strip('"')
            break
    res = subprocess.run(["git", "-C", str(lcpp), "log", "-1", "--format=%H %cs %s"],
                         capture_output=True, text=True)
    v["llama.cpp"] = res.stdout.strip() if res.returncode == 0 else str(lcpp)
    lib = lcpp / "build" / "bin" / "libllama.so"
    if lib.exists():  # the tree may not be a git checkout: name the build by its bytes
        v["libllama.so sha256"] = sha256_file(lib)
    return v


README = """\
# Mixture-of-experts reference fixtures (issue 40)

Small random-weight GGUFs of the three MoE architectures mlcore is to run,
with what llama.cpp computes on them.  Generated by
`tools/make-moe-fixtures.py` (with `tools/llama-logits.c` and
`tools/llama-moe-trace.c`); do not edit by hand.  The design they serve is
`docs/design-moe.md`.

    python3 tools/make-moe-fixtures.py [--only NAME]

## Models

{models}

## Files, per model directory

| file | content |
| --- | --- |
| `<model>-<variant>.gguf` | the model: `q8_0` (every matrix Q8_0, routers and vectors F32) or `mxfp4` (llama-quantize's MXFP4_MOE mix: expert stacks MXFP4, other matrices Q8_0) |
| `logits/llama.cpp-<variant>.p0.f32` | llama.cpp's logits at every prompt position, `[n_tokens][n_vocab]` little-endian float32 (one batch, one thread, F32 KV cache, no flash attention: `tools/llama-logits.c`) |
| `logits/llama.cpp-<variant>-deq.p0.f32` | the same for the file's twin (every weight dequantized to F32, not committed: the script remakes it), whose distance to the above is llama.cpp's own activation-quantization noise (`noise_rel` in `expected.json`) |
| `trace-<variant>.json` | llama.cpp's greedy continuation (`generated`; per step the chosen id, its piece, the two largest logits and the runner-up id) and its routing: `routing[layer][position]` = chosen `experts` in llama.cpp's order (descending score), their final `weights`, the router's `scores` for every expert (softmax probabilities, or gpt-oss's biased logits) and the decision's `gap` (see below); positions 0..n-1 are the prompt (one batch), n..n+30 the generated tokens fed back one at a time |
| `expected.json` | manifest: shapes, seed, tokenizer, prompt ids, per file its size, SHA-256, tensor types, argmax per position, `twin_agrees_until`, `noise_rel`, `min_routing_gap`, `min_greedy_margin`, the generated ids and text, versions |

## Why these seeds

Routing is a discrete choice: a near tie between the last chosen expert and
the first one left out could be flipped by rounding, and then no tolerance
on logits helps.  The script takes the first seed (from 4000) for which, in
llama.cpp's run of each file, every routing decision of the prompt and of
the continuation has a gap of at least {gap} of the spread (standard
deviation) of the token's router logits (the gap is the log-ratio of the two
probabilities for softmax gating, the logit difference for gpt-oss), every
greedy step's top two logits differ by at least {margin} of the larger one's
magnitude, no step ends the text and at least {distinct} different tokens
come out; and the F32 twin chooses the same experts at the first {twin}
prompt positions at least.  `seeds_rejected` in `expected.json` says why
earlier seeds failed.  A disagreement with these references is therefore a
bug, not noise.

The twin's activations are not quantized, which moves its hidden states
about a hundred times more than what separates two runtimes that quantize
activations alike, so it may choose other experts later in the prompt
(`twin_agrees_until`); `noise_rel` is measured on the rows before that.

Tokenizers: the qwen2-style byte-level BPE of the dense `qwen3` fixture
(`qwen3moe`), the `qwen35` fixture's (`qwen35moe`), and for `gpt-oss` the
same bytes and merges with o200k's pre-tokenizer name (`gpt-4o`) and the
harmony special tokens in place of Qwen's.  Each GGUF carries its real
model family's chat template from `tests/fixtures/chat/templates/`.

## Versions

{versions}
"""


def write_readme(mans: list[dict]) -> None:
    rows = ["| model | GGUF arch | seed | files (bytes) | what it exercises |",
            "| --- | --- | --- | --- | --- |"]
    for m in mans:
        files = ", ".join(f"`{f['gguf']}` ({f['bytes']})" for f in m["files"])
        rows.append(f"| `{m['model']['name']}` | `{m['model']['arch']}` | {m['seed']} | {files} | "
                    f"{m['model']['desc']} |")
    vers = "\n".join(f"* {k}: {v}" for k, v in mans[0]["versions"].items())
    (OUT / "README.md").write_text(README.format(
        models="\n".join(rows), gap=GAP_MIN, margin=MARGIN_MIN, distinct=MIN_DISTINCT,
        twin=MIN_TWIN_ROWS, versions=vers))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", action="append", help="model name (repeatable)")
    ap.add_argument("--llama-cpp", type=Path, default=Path(DEFAULT_LLAMA_CPP))
    ap.add_argument("--work", type=Path, default=Path("/tmp/mlcore-moe-fixtures"))
    args = ap.parse_args()
    sys.path.insert(0, str(args.llama_cpp / "gguf-py"))  # the tree's own gguf-py
    import gguf
    args.work.mkdir(parents=True, exist_ok=True)
    tools = {"trace": build_tool(args.llama_cpp, args.work, "llama-moe-trace"),
             "logits": build_tool(args.llama_cpp, args.work, "llama-logits")}
    versions = versions_used(gguf, args.llama_cpp)
    OUT.mkdir(parents=True, exist_ok=True)
    for spec in MODELS:
        if args.only and spec["name"] not in args.only:
            continue
        print(f"{spec['name']}:")
        model = make_model(gguf, spec, tools, args.work)
        publish(model, tools, versions)
        print(f"  seed {model['seed']}")
    mans = [json.loads((OUT / s["name"] / "expected.json").read_text()) for s in MODELS
            if (OUT / s["name"] / "expected.json").exists()]
    write_readme(mans)


if __name__ == "__main__":
    main()
