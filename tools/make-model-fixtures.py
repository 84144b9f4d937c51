#!/usr/bin/env python3
"""Make the reference model fixtures in tests/fixtures/models/.

For every architecture mlcore supports this builds a tiny random-weight model
with Hugging Face transformers (seeded), gives it a small tokenizer trained
here, converts it with llama.cpp's own convert_hf_to_gguf.py to F32 and F16
GGUF, quantizes the F32 GGUF with llama.cpp's llama-quantize, and records
expected outputs:

  * transformers float32 logits at every position of two fixed prompts, from
    the original weights;
  * the same after loading the weights dequantized from the Q8_0 GGUF (the
    GGUF tensors are mapped back to the Hugging Face tensors through a probe
    conversion, see probe_index_map(), so every permutation the converter
    applies is undone exactly);
  * llama.cpp's own logits for every GGUF (tools/llama-logits.c, linked
    against the llama.cpp build);
  * the argmax of every position of all of them.

Everything lands in tests/fixtures/models/<model>/ plus models.json and
README.md, so tests need neither network nor Python.  Run from the
repository root:

    python3 tools/make-model-fixtures.py

Options select a subset (--only), another llama.cpp tree (--llama-cpp or
$LLAMA_CPP_DIR) and the scratch directory (--work).  The run is
deterministic for a given set of tool versions (recorded in models.json).
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.dont_write_bytecode = True  # keep tools/ free of __pycache__ (we import a sibling)

DEFAULT_LLAMA_CPP = "/tmp/lcp/llama_cpp_python-0.3.36/vendor/llama.cpp"
REPO = Path(__file__).resolve().parent.parent
TOOLS = REPO / "tools"

VOCAB = 384           # every tokenizer here has exactly this many tokens
PROMPT_MIN, PROMPT_MAX = 24, 32
SEED = 20240601

# --------------------------------------------------------------------------
# Text.  Written for these fixtures; the corpus trains the tokenizers, the
# prompts are what the expected logits are computed for.
# --------------------------------------------------------------------------

CORPUS = """\
The old lighthouse keeper climbed the stairs every evening at seven.
He counted the ships that passed the harbour and wrote their names in a book.
In 1987 there were 1234 ships; in 2019 there were only 56.
The café near the harbour sold bread, cheese and strong coffee to the sailors.
A naïve visitor once asked whether the lamp ever went out.
The keeper laughed and said that the lamp had burned for ninety-nine years.
Rain fell on the rocks, the wind turned, and the sea grew dark and loud.
Children ran along the beach, shouting and chasing the white birds.
The baker opened his shop before sunrise; the smell of fresh bread filled the street.
Über den Wolken the pilots saw the lights of the town below them.
Numbers like 3.14, 2.71 and 1.41 were painted on the walls of the school.
She said: "I'll be there at 10:30, don't wait for me!" and closed the door.
They're building a new bridge over the river; it'll open next spring.
def add(a, b): return a + b  # a tiny function in a tiny program
if (x > 0 && y < 10) { printf("%d\\n", x * y); }
The quick brown fox jumps over the lazy dog while the cat sleeps in the sun.
Every morning the fishermen mended their nets and talked about the weather.
The market was full of apples, pears, plums, grapes and small green figs.
At night the stars were bright, and the keeper watched them from the tower.
When the storm came, the boats stayed in the harbour for three long days.
"""

PROMPT_TEXT = ("The café 🦙 sold 1234 cups to naïve sailors in 2019; they're tired, "
               "and the sea grew dark and loud while the children ran home.")
SHORT_PROMPT_TEXT = "Rain fell on the harbour."

# --------------------------------------------------------------------------
# Pre-tokenizer regular expressions, as published in the models' tokenizer.json
# (facts about the real tokenizers, needed to imitate them).
# --------------------------------------------------------------------------

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN35_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|"
                r" ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Tokenizer kinds.  "pre" is the tokenizer.ggml.pre name forced on the
# converter for byte-level BPE (see tools/fixture-convert.py).
TOKENIZERS = {
    "spm-llama": dict(kind="sentencepiece", desc="SentencePiece BPE with byte fallback, Llama 2 ids "
                      "(<unk> 0, <s> 1, </s> 2), dummy prefix, BOS added"),
    "spm-gemma": dict(kind="sentencepiece", desc="SentencePiece BPE with byte fallback, Gemma ids "
                      "(<pad> 0, <eos> 1, <bos> 2, <unk> 3, <mask> 4, <start_of_turn> 5, "
                      "<end_of_turn> 6), "
                      "no dummy prefix, BOS added"),
    "bpe-llama3": dict(kind="bpe", pre="llama-bpe", desc="byte-level BPE, Llama 3 regex, ignore_merges, "
                       "specials after the vocabulary, <|begin_of_text|> added"),
    "bpe-qwen2": dict(kind="bpe", pre="qwen2", desc="byte-level BPE, NFC, Qwen2 regex (single digits), "
                      "specials after the vocabulary, no BOS"),
    "bpe-qwen35": dict(kind="bpe", pre="qwen35", desc="byte-level BPE, NFC, Qwen3.5 regex (\\p{M} with "
                       "letters), specials after the vocabulary, no BOS"),
    "bpe-smollm": dict(kind="bpe", pre="smollm", desc="byte-level BPE, Digits(individual) then GPT-2 "
                       "ByteLevel regex, specials first (ids 0-2), no BOS"),
}

# --------------------------------------------------------------------------
# The models.  "config" holds the transformers config arguments (vocab size
# and special ids are filled in from the tokenizer); "quants" lists the
# llama-quantize types made from the F32 GGUF.
# --------------------------------------------------------------------------

BASE_QUANTS = ["Q8_0", "Q4_0"]
# Gemma 2's caps (50 and 30 in the released models) are lowered so that they
# matter for these small activations without saturating the logits.
GEMMA2_ATTN_CAP, GEMMA2_FINAL_CAP = 3.0, 10.0
EXTRA_QUANTS = ["Q8_0", "Q4_0", "Q4_1", "Q4_K_M", "Q6_K"]

SMALL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)

MODELS = [
    dict(name="llama2", arch="llama", hf="LlamaForCausalLM", cfg="LlamaConfig", tok="spm-llama",
         quants=EXTRA_QUANTS,
         desc="Llama 2 style: plain RoPE, untied classifier; hidden 256 so K-quants apply",
         config=dict(SMALL, hidden_size=256, intermediate_size=256, rope_theta=10000.0,
                     rms_norm_eps=1e-5, tie_word_embeddings=False)),
    dict(name="llama-linear", arch="llama", hf="LlamaForCausalLM", cfg="LlamaConfig", tok="spm-llama",
         desc="Llama with linear RoPE scaling (factor 4)",
         config=dict(SMALL, rms_norm_eps=1e-5, tie_word_embeddings=False,
                     rope_parameters=dict(rope_type="linear", factor=4.0, rope_theta=10000.0)),
         ablate={"no RoPE scaling": dict(rope_parameters=dict(rope_type="default",
                                                              rope_theta=10000.0))}),
    dict(name="llama3", arch="llama", hf="LlamaForCausalLM", cfg="LlamaConfig", tok="bpe-llama3",
         desc="Llama 3.x: llama3 RoPE scaling (factor 8, low 1, high 4, original 64: the 8 pairs "
              "of a 16-wide head fall in all three bands), untied",
         config=dict(SMALL, rms_norm_eps=1e-5, tie_word_embeddings=False,
                     rope_parameters=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                          high_freq_factor=4.0, original_max_position_embeddings=64,
                                          rope_theta=500000.0)),
         ablate={"no RoPE scaling": dict(rope_parameters=dict(rope_type="default",
                                                              rope_theta=500000.0))}),
    dict(name="mistral", arch="llama", hf="MistralForCausalLM", cfg="MistralConfig", tok="spm-llama",
         desc="Mistral style (v0.2+: no sliding window, theta 1e6), 3 layers, hidden_dim 224",
         config=dict(SMALL, num_hidden_layers=3, intermediate_size=224, head_dim=16,
                     rope_theta=1000000.0, rms_norm_eps=1e-5, sliding_window=None,
                     tie_word_embeddings=False)),
    dict(name="smollm2", arch="llama", hf="LlamaForCausalLM", cfg="LlamaConfig", tok="bpe-smollm",
         desc="SmolLM2 style: tied embeddings, GPT-2 style BPE with single digits",
         config=dict(SMALL, rope_theta=100000.0, rms_norm_eps=1e-5, tie_word_embeddings=True)),
    dict(name="qwen2", arch="qwen2", hf="Qwen2ForCausalLM", cfg="Qwen2Config", tok="bpe-qwen2",
         quants=EXTRA_QUANTS,
         desc="Qwen2/2.5: q/k/v biases, NEOX RoPE, tied; hidden 256 so K-quants apply",
         config=dict(SMALL, hidden_size=256, intermediate_size=256, rope_theta=1000000.0,
                     rms_norm_eps=1e-6, tie_word_embeddings=True, use_sliding_window=False),
         ablate={"q/k/v biases zeroed": "zero_biases"}),
    dict(name="qwen2-yarn", arch="qwen2", hf="Qwen2ForCausalLM", cfg="Qwen2Config", tok="bpe-qwen2",
         desc="Qwen2 with YaRN RoPE scaling (factor 4, original 64), untied",
         config=dict(SMALL, rms_norm_eps=1e-6, tie_word_embeddings=False, use_sliding_window=False,
                     rope_parameters=dict(rope_type="yarn", factor=4.0,
                                          original_max_position_embeddings=64,
                                          rope_theta=1000000.0)),
         ablate={"no RoPE scaling": dict(rope_parameters=dict(rope_type="default",
                                                              rope_theta=1000000.0))}),
    dict(name="qwen3", arch="qwen3", hf="Qwen3ForCausalLM", cfg="Qwen3Config", tok="bpe-qwen2",
         desc="Qwen3: q/k RMS norms, head_dim 32 with hidden 64 (q_dim 128 != dim), tied",
         config=dict(SMALL, head_dim=32, rope_theta=1000000.0, rms_norm_eps=1e-6,
                     tie_word_embeddings=True, use_sliding_window=False)),
    dict(name="gemma", arch="gemma", hf="GemmaForCausalLM", cfg="GemmaConfig", tok="spm-gemma",
         desc="Gemma: GELU-tanh, (1+w) norms, embedding scale sqrt(dim), head_dim 32 != dim/heads",
         config=dict(SMALL, head_dim=32, rope_theta=10000.0, rms_norm_eps=1e-6,
                     hidden_activation="gelu_pytorch_tanh")),
    dict(name="gemma2", arch="gemma2", hf="Gemma2ForCausalLM", cfg="Gemma2Config", tok="spm-gemma",
         desc="Gemma 2: attention and final softcaps, post norms, sliding window 8 on even layers",
         config=dict(SMALL, head_dim=16, query_pre_attn_scalar=16, rope_theta=10000.0,
                     rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh", sliding_window=8,
                     attn_logit_softcapping=GEMMA2_ATTN_CAP, final_logit_softcapping=GEMMA2_FINAL_CAP),
         ablate={"no attention softcap": dict(attn_logit_softcapping=None),
                 "no final softcap": dict(final_logit_softcapping=None),
                 "no sliding window": dict(sliding_window=4096)}),
    dict(name="gemma3", arch="gemma3", hf="Gemma3ForCausalLM", cfg="Gemma3TextConfig", tok="spm-gemma",
         desc="Gemma 3 text: 6 layers (5 local with window 8 and RoPE base 10000, layer 5 global "
              "with base 1e6 and linear scaling 8), q/k norms, post norms, head_dim 32",
         config=dict(SMALL, num_hidden_layers=6, head_dim=32, query_pre_attn_scalar=32,
                     rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh", sliding_window=8,
                     layer_types=["sliding_attention"] * 5 + ["full_attention"],
                     final_logit_softcapping=None, attn_logit_softcapping=None,
                     rope_parameters=dict(
                         full_attention=dict(rope_type="linear", factor=8.0, rope_theta=1000000.0),
                         sliding_attention=dict(rope_type="default", rope_theta=10000.0))),
         ablate={"no sliding window": dict(sliding_window=4096),
                 "local layers with the global RoPE": dict(rope_parameters=dict(
                     full_attention=dict(rope_type="linear", factor=8.0, rope_theta=1000000.0),
                     sliding_attention=dict(rope_type="linear", factor=8.0, rope_theta=1000000.0))),
                 "no RoPE scaling on the global layer": dict(rope_parameters=dict(
                     full_attention=dict(rope_type="default", rope_theta=1000000.0),
                     sliding_attention=dict(rope_type="default", rope_theta=10000.0)))}),
    dict(name="smollm3", arch="smollm3", hf="SmolLM3ForCausalLM", cfg="SmolLM3Config", tok="bpe-llama3",
         desc="SmolLM3: 4 layers, layer 3 without RoPE (no_rope_layer_interval 4), tied",
         config=dict(SMALL, num_hidden_layers=4, rope_theta=5000000.0, rms_norm_eps=1e-6,
                     tie_word_embeddings=True, no_rope_layer_interval=4, use_sliding_window=False),
         ablate={"RoPE on every layer": dict(no_rope_layers=[1, 1, 1, 1])}),
    dict(name="qwen35", arch="qwen35", hf="Qwen3_5ForCausalLM", cfg="Qwen3_5TextConfig",
         tok="bpe-qwen35",
         mtp=True,
         desc="Qwen3.5 hybrid: layers 0-2 gated-delta-rule linear attention (2 key heads, 4 value "
              "heads, head 16, conv 4), layer 3 full attention with output gate, q/k norms and "
              "partial RoPE (8 of 32 dims), tied",
         config=dict(SMALL, num_hidden_layers=4, head_dim=32, rms_norm_eps=1e-6,
                     tie_word_embeddings=True, full_attention_interval=4,
                     layer_types=["linear_attention"] * 3 + ["full_attention"],
                     linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16,
                     linear_num_key_heads=2, linear_num_value_heads=4, mtp_num_hidden_layers=1,
                     rope_parameters=dict(rope_type="default", rope_theta=10000000.0,
                                          partial_rotary_factor=0.25, mrope_interleaved=True,
                                          mrope_section=[2, 1, 1])),
         ablate={"attention output gate removed": "open_gate",
                 "RoPE on all 32 dims": dict(rope_parameters=dict(
                     rope_type="default", rope_theta=10000000.0, partial_rotary_factor=1.0,
                     mrope_interleaved=True, mrope_section=[8, 4, 4]))}),
]

# --------------------------------------------------------------------------
# Small utilities
# --------------------------------------------------------------------------


def log(msg: str) -> None:
    print(f"[fixtures] {msg}", file=sys.stderr, flush=True)


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    res = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if res.returncode != 0:
        sys.stderr.write(res.stdout[-4000:] + res.stderr[-4000:])
        raise SystemExit(f"command failed ({res.returncode}): {' '.join(cmd)}")
    return res


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def dump_json(obj) -> str:
    """JSON with one item per line, except that arrays of numbers stay on one line."""
    text = json.dumps(obj, indent=1, ensure_ascii=False)
    numbers = re.compile(r"\[\s*(-?[0-9][-0-9.eE+]*(?:,\s*-?[0-9][-0-9.eE+]*)*)\s*\]")
    return numbers.sub(lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]",
                       text) + "\n"


def corpus_lines() -> list[str]:
    return [line for line in CORPUS.splitlines() if line.strip()]


# --------------------------------------------------------------------------
# Tokenizers
# --------------------------------------------------------------------------


def build_spm(kind: str, out: Path) -> None:
    """Train a SentencePiece BPE model and save it with its HF tokenizer."""
    import sentencepiece as spm
    from transformers import GemmaTokenizer, LlamaTokenizer

    buf = io.BytesIO()
    common = dict(sentence_iterator=iter(corpus_lines()), model_writer=buf, vocab_size=VOCAB,
                  model_type="bpe", byte_fallback=True, character_coverage=1.0, split_digits=True,
                  num_threads=1, normalization_rule_name="identity", remove_extra_whitespaces=False,
                  allow_whitespace_only_pieces=True, minloglevel=2)
    if kind == "spm-llama":
        spm.SentencePieceTrainer.train(**common, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
                                       add_dummy_prefix=True)
    else:
        spm.SentencePieceTrainer.train(**common, pad_id=0, eos_id=1, bos_id=2, unk_id=3,
                                       pad_piece="<pad>", eos_piece="<eos>", bos_piece="<bos>",
                                       unk_piece="<unk>", add_dummy_prefix=False,
                                       user_defined_symbols=["<mask>", "<start_of_turn>",
                                                             "<end_of_turn>"])
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.model").write_bytes(buf.getvalue())
    cls = LlamaTokenizer if kind == "spm-llama" else GemmaTokenizer
    tok = cls.from_pretrained(str(out), add_bos_token=True, add_eos_token=False)
    tok.save_pretrained(str(out))
    patch_tokenizer_config(out, add_bos_token=True, add_eos_token=False)


def build_bpe(kind: str, out: Path) -> None:
    """Train a byte-level BPE with the pipeline of the imitated model family."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers import processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = {"bpe-llama3": ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                               "<|eot_id|>"],
                "bpe-qwen2": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                "bpe-qwen35": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                "bpe-smollm": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]}[kind]
    specials_first = kind == "bpe-smollm"

    tok = Tokenizer(models.BPE(ignore_merges=(kind == "bpe-llama3")))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    if kind == "bpe-smollm":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    else:
        regex = {"bpe-llama3": LLAMA3_REGEX, "bpe-qwen2": QWEN2_REGEX, "bpe-qwen35": QWEN35_REGEX}[kind]
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False), byte_level])
    if kind in ("bpe-qwen2", "bpe-qwen35"):
        tok.normalizer = normalizers.NFC()
    tok.decoder = decoders.ByteLevel()

    n_train = VOCAB if specials_first else VOCAB - len(specials)
    trainer = trainers.BpeTrainer(vocab_size=n_train, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=specials if specials_first else [])
    tok.train_from_iterator(corpus_lines(), trainer)
    if not specials_first:
        tok.add_special_tokens(specials)
    if tok.get_vocab_size() != VOCAB:
        raise SystemExit(f"{kind}: trained {tok.get_vocab_size()} tokens, wanted {VOCAB}")

    bos = eos = None
    if kind == "bpe-llama3":
        bos, eos = "<|begin_of_text|>", "<|end_of_text|>"
        bos_id = tok.token_to_id(bos)
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B:1",
                                          special_tokens=[(bos, bos_id)])])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
        eos = "<|endoftext|>"
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=bos, eos_token=eos,
                                 unk_token=None, pad_token=None,
                                 clean_up_tokenization_spaces=False)
    out.mkdir(parents=True, exist_ok=True)
    hf.save_pretrained(str(out))
    patch_tokenizer_config(out, add_bos_token=(bos is not None), add_eos_token=False)


def patch_tokenizer_config(out: Path, **fields) -> None:
    """State add_bos/add_eos explicitly, as the real models' configs do."""
    path = out / "tokenizer_config.json"
    cfg = json.loads(path.read_text())
    cfg.update(fields)
    cfg.pop("is_local", None)
    cfg.pop("local_files_only", None)
    path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def build_tokenizer(kind: str, work: Path) -> Path:
    out = work / "tokenizers" / kind
    if (out / "tokenizer_config.json").exists():
        return out
    if out.exists():
        shutil.rmtree(out)
    log(f"tokenizer {kind}")
    if TOKENIZERS[kind]["kind"] == "sentencepiece":
        build_spm(kind, out)
    else:
        build_bpe(kind, out)
    return out


def load_tokenizer(path: Path):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(str(path))


def choose_prompt(tok, text: str, lo: int, hi: int) -> tuple[str, list[int]]:
    """The longest word prefix of text whose encoding has at most hi ids."""
    words = text.split(" ")
    best = None
    for k in range(1, len(words) + 1):
        t = " ".join(words[:k])
        ids = tok(t).input_ids
        if len(ids) <= hi:
            best = (t, list(ids))
    if best is None or len(best[1]) < lo:
        raise SystemExit(f"no prompt prefix with {lo}..{hi} tokens")
    return best


def tokenizer_facts(tok, kind: str) -> dict:
    return dict(kind=kind, description=TOKENIZERS[kind]["desc"],
                tokenizer_ggml_pre=TOKENIZERS[kind].get("pre"),
                n_vocab=len(tok), bos_id=tok.bos_token_id, eos_id=tok.eos_token_id)


# --------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------


def make_config(spec: dict, tok):
    import transformers
    cls = getattr(transformers, spec["cfg"])
    args = copy.deepcopy(spec["config"])
    args.update(vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                pad_token_id=None)
    cfg = cls(**args)
    cfg.architectures = [spec["hf"]]
    cfg._attn_implementation = "eager"
    return cfg


def randomize(model, seed: int) -> None:
    """Replace the initialisation by one that makes every tensor matter.

    Matrices get N(0, 1/fan_in) so activations keep their scale through the
    layers; embeddings N(0, 1) (0.5 when tied, so the logits stay moderate);
    norm weights, biases and the linear-attention parameters get noise, so a
    converter that drops a bias, forgets the (1 + w) shift or permutes a q/k
    norm the wrong way is caught by the expected logits.
    """
    import torch
    g = torch.Generator().manual_seed(seed)
    tied = bool(getattr(model.config, "tie_word_embeddings", False))
    seen = set()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if id(p) in seen:
                continue
            seen.add(id(p))
            noise = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if name.endswith("embed_tokens.weight"):
                p.copy_(noise * (0.5 if tied else 1.0))
            elif name.endswith("lm_head.weight"):
                p.copy_(noise * (2.0 / math.sqrt(p.shape[1])))
            elif "conv1d" in name:
                p.copy_(noise * 0.5)
            elif p.ndim == 2:
                p.copy_(noise / math.sqrt(p.shape[1]))
            elif name.endswith("A_log"):
                p.copy_(torch.log(torch.rand(p.shape, generator=g) * 4.0 + 0.5))
            elif name.endswith("dt_bias"):
                p.copy_(noise * 0.5)
            elif name.endswith("bias"):
                p.copy_(noise * 0.5)
            elif "norm" in name:
                p.add_(noise * 0.2)
            else:
                raise SystemExit(f"randomize: no rule for {name} {tuple(p.shape)}")
        for layer in getattr(model.model, "layers", []):
            if getattr(layer, "linear_attn", None) is not None:
                shape_linear_attention(layer.linear_attn, model.config, g)


def shape_linear_attention(la, cfg, g) -> None:
    """Give a gated-delta-rule layer the structure of a trained one.

    With independent random weights a head's query rarely points along the
    keys it has stored, many head outputs are nearly zero, and the per-head
    RMS norm that follows blows their rounding noise up to full size: Q8_0
    weights then move the logits by half their spread.  Correlated query and
    key projections (0.9), a convolution close to the identity (current tap
    1, others small; the key channels' taps near the query channels') and a
    moderate decay (exp(A_log) in [0.2, 0.4]) bring that down to the level of
    the other fixtures while every tensor stays distinct.
    """
    import torch
    kd = cfg.linear_num_key_heads * cfg.linear_key_head_dim
    w = la.in_proj_qkv.weight
    w[kd:2 * kd] = 0.9 * w[:kd] + math.sqrt(1 - 0.81) * w[kd:2 * kd]
    c = la.conv1d.weight  # (channels, 1, kernel); the last tap is the current input
    c.mul_(0.2)
    c[:, 0, -1] += 1.0
    c[kd:2 * kd] = c[:kd] + 0.05 * torch.randn(c[:kd].shape, generator=g)
    la.A_log.copy_(torch.log(0.2 + 0.2 * torch.rand(la.A_log.shape, generator=g)))


def build_hf_model(spec: dict, tok_dir: Path, out: Path):
    import torch
    import transformers
    tok = load_tokenizer(tok_dir)
    cfg = make_config(spec, tok)
    torch.manual_seed(SEED)
    model = getattr(transformers, spec["hf"])(cfg).eval().float()
    randomize(model, SEED + sum(map(ord, spec["name"])))
    if out.exists():
        shutil.rmtree(out)
    save_hf(spec, model, out, SEED)
    for f in tok_dir.iterdir():
        shutil.copy(f, out / f.name)
    return model, tok


def save_hf(spec: dict, model, out: Path, seed: int) -> None:
    """save_pretrained, plus the MTP block for models that ship one."""
    model.save_pretrained(str(out), safe_serialization=True)
    if spec.get("mtp"):
        add_mtp_block(model, out, seed)


def add_mtp_block(model, out: Path, seed: int) -> None:
    """Append a random Qwen3.5-style multi-token-prediction block.

    Released Qwen3.5 checkpoints carry one MTP block (mtp.*: a full-attention
    layer plus fc and three norms) that transformers does not use, and the
    converter writes it as an extra blk.N with nextn_predict_layers = 1 unless
    told --no-mtp.  The block here has the shapes of the model's last (full
    attention) layer, so the GGUF looks like a real one; it does not affect
    any logits.
    """
    import torch
    from safetensors.torch import load_file, save_file
    path = out / "model.safetensors"
    tensors = load_file(str(path))
    g = torch.Generator().manual_seed(seed + 7)
    n = model.config.num_hidden_layers
    dim = model.config.hidden_size
    last = f"model.layers.{n - 1}."
    extra = {"mtp.fc.weight": torch.randn(dim, 2 * dim, generator=g) / math.sqrt(2 * dim)}
    for norm in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
        extra[f"mtp.{norm}.weight"] = torch.randn(dim, generator=g) * 0.2
    for name, t in tensors.items():
        if name.startswith(last):
            scale = 0.2 if t.ndim == 1 else 1.0 / math.sqrt(t.shape[-1])
            extra["mtp.layers.0." + name[len(last):]] = torch.randn(t.shape, generator=g) * scale
    tensors.update(extra)
    save_file(tensors, str(path), metadata={"format": "pt"})
    cfg_path = out / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["mtp_num_hidden_layers"] = 1
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def ablation(spec: dict, model, tok, change, ids: list[int]):
    """Logits of the model with one feature switched off (same weights).

    change is a dict of config overrides, or the name of a weight edit.
    These show that each feature moves the expected logits, so a runtime
    that ignores it fails the fixture.
    """
    import torch
    import transformers
    if isinstance(change, dict):
        spec2 = dict(spec, config=dict(spec["config"], **change))
        m = getattr(transformers, spec["hf"])(make_config(spec2, tok)).eval()
        m.load_state_dict(model.state_dict())
    else:
        m = copy.deepcopy(model)
        with torch.no_grad():
            for name, p in m.named_parameters():
                if change == "zero_biases" and name.endswith("_proj.bias"):
                    p.zero_()
                if change == "open_gate" and name.endswith("self_attn.q_proj.weight"):
                    # q_proj holds per head hd query rows then hd gate rows;
                    # a zero gate row with a large bias is not expressible, so
                    # make the gate logits huge: sigmoid -> 1.
                    hd = m.config.head_dim
                    w = p.view(m.config.num_attention_heads, 2, hd, -1)
                    w[:, 1].zero_()
            if change == "open_gate":
                for layer in m.model.layers:
                    attn = getattr(layer, "self_attn", None)
                    if attn is not None:
                        attn.o_proj.weight.mul_(2.0)  # sigmoid(0) = 1/2 everywhere
    return hf_logits(m, ids)


def hf_logits(model, ids: list[int]):
    import torch
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), use_cache=False)
    return out.logits[0].float().numpy().copy()


# --------------------------------------------------------------------------
# llama.cpp
# --------------------------------------------------------------------------


def convert(lcpp: Path, hf_dir: Path, out: Path, outtype: str, name: str, pre: str | None,
            extra: list[str] | None = None) -> None:
    cmd = [sys.executable, str(TOOLS / "fixture-convert.py"), "--llama-cpp", str(lcpp)]
    if pre:
        cmd += ["--pre", pre]
    cmd += ["--", str(hf_dir), "--outfile", str(out), "--outtype", outtype, "--model-name", name]
    run(cmd + (extra or []), env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))


def quantize(lcpp: Path, src: Path, out: Path, qtype: str) -> None:
    run([str(lcpp / "build" / "bin" / "llama-quantize"), str(src), str(out), qtype, "2"])


def build_logits_tool(lcpp: Path, work: Path) -> Path:
    exe = work / "llama-logits"
    bindir = lcpp / "build" / "bin"
    run(["cc", "-std=c11", "-O2", "-Wall", "-Wextra", f"-I{lcpp / 'include'}",
         f"-I{lcpp / 'ggml' / 'include'}", str(TOOLS / "llama-logits.c"), "-o", str(exe),
         f"-L{bindir}", "-lllama", "-lggml", "-lggml-base", f"-Wl,-rpath,{bindir}"])
    return exe


def llama_logits(exe: Path, gguf_path: Path, ids: list[int], n_vocab: int, tmp: Path):
    import numpy as np
    run([str(exe), str(gguf_path), str(tmp)] + [str(i) for i in ids])
    data = np.fromfile(tmp, dtype="<f4")
    return data.reshape(len(ids), n_vocab)


def llama_cpp_version(lcpp: Path) -> dict:
    info = {"path": str(lcpp)}
    try:
        info["commit"] = run(["git", "-C", str(lcpp), "rev-parse", "HEAD"]).stdout.strip()
        info["describe"] = run(["git", "-C", str(lcpp), "log", "-1", "--format=%cs %s"]).stdout.strip()
    except SystemExit:
        pass
    res = subprocess.run([str(lcpp / "build" / "bin" / "llama-completion"), "--version"],
                         capture_output=True, text=True)
    for line in (res.stdout + res.stderr).splitlines():
        if line.startswith("version:"):
            info["build"] = line.split(":", 1)[1].strip()
    return info


# --------------------------------------------------------------------------
# GGUF -> Hugging Face tensors (for the logits of the dequantized Q8_0 weights)
# --------------------------------------------------------------------------


def gguf_tensors(path: Path) -> dict:
    from gguf import GGUFReader
    return {t.name: t for t in GGUFReader(str(path)).tensors}


def probe_index_map(spec: dict, model, hf_dir: Path, work: Path, lcpp: Path, pre: str | None) -> dict:
    """Map each GGUF matrix element back to the HF parameter element it came from.

    Every element of every HF parameter with two or more dimensions is set to
    a distinct integer (exact in float32, all below 2^24), the probe model is
    converted to F32 GGUF by the same converter, and each GGUF value then
    names its source.  This undoes whatever the converter does to matrices
    (the q/k RoPE permutation of the llama family, the V-head reordering of
    Qwen3.5, row trimming, ...) without re-implementing it.  Returns
    {gguf_name: (hf_name, flat_index_array)}.
    """
    import numpy as np
    import torch
    probe = copy.deepcopy(model)
    ranges = []
    offset = 0
    seen = set()
    with torch.no_grad():
        for name, p in probe.named_parameters():
            if id(p) in seen:
                continue
            seen.add(id(p))
            if p.ndim < 2:
                p.zero_()
                continue
            n = p.numel()
            p.copy_(torch.arange(offset, offset + n, dtype=torch.float64).reshape(p.shape).float())
            ranges.append((offset, offset + n, name))
            offset += n
    if offset >= 1 << 24:
        raise SystemExit(f"{spec['name']}: {offset} probe values do not fit float32 exactly")
    probe_dir = work / "probe-hf"
    if probe_dir.exists():
        shutil.rmtree(probe_dir)
    save_hf(spec, probe, probe_dir, SEED)
    for f in hf_dir.iterdir():
        if not f.name.endswith(".safetensors") and not (probe_dir / f.name).exists():
            shutil.copy(f, probe_dir / f.name)
    probe_gguf = work / "probe.gguf"
    convert(lcpp, probe_dir, probe_gguf, "f32", spec["name"], pre)

    starts = np.array([r[0] for r in ranges])
    result = {}
    for gname, t in gguf_tensors(probe_gguf).items():
        vals = np.asarray(t.data, dtype=np.float64).reshape(-1)
        if len(t.data.shape) < 2 or vals.size == 0:
            continue
        idx = vals.astype(np.int64)
        if not np.array_equal(idx, vals) or idx.min() < 0 or idx.max() >= offset:
            continue  # not a pure rearrangement of one HF matrix (e.g. rope_freqs)
        which = np.searchsorted(starts, idx, side="right") - 1
        if (which != which[0]).any():
            raise SystemExit(f"{spec['name']}: {gname} mixes several HF tensors")
        lo, _, hf_name = ranges[which[0]]
        flat = idx - lo
        if np.unique(flat).size != flat.size:
            raise SystemExit(f"{spec['name']}: {gname} repeats HF elements")
        result[gname] = (hf_name, flat)
    return result


def verify_index_map(model, f32_path: Path, index_map: dict) -> int:
    """Check the map on the real F32 GGUF: it must give back the HF weights bit for bit.

    Returns the number of matrices checked.
    """
    import numpy as np
    params = dict(model.named_parameters())
    checked = 0
    for gname, t in gguf_tensors(f32_path).items():
        if gname not in index_map:
            continue
        hf_name, flat = index_map[gname]
        want = params[hf_name].detach().reshape(-1).numpy()[flat]
        got = np.asarray(t.data, dtype=np.float32).reshape(-1)
        if not np.array_equal(want, got):
            raise SystemExit(f"{f32_path.name}: {gname} does not map back onto {hf_name}")
        checked += 1
    return checked


def dequantized_state(model, q8_path: Path, index_map: dict) -> tuple[dict, list[str]]:
    """The model's state dict with every quantized GGUF matrix put back."""
    import numpy as np
    import torch
    from gguf import GGMLQuantizationType, quants
    params = dict(model.named_parameters())
    new = {name: p.detach().clone() for name, p in params.items()}
    replaced = []
    n_layers = model.config.num_hidden_layers
    for gname, t in gguf_tensors(q8_path).items():
        if t.tensor_type in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
            continue  # stored exactly (F32) in the llama-quantize output
        if gname.startswith("blk.") and int(gname.split(".")[1]) >= n_layers:
            continue  # an MTP block: not part of the transformers forward pass
        if gname not in index_map:
            raise SystemExit(f"{q8_path.name}: quantized {gname} has no HF source")
        hf_name, flat = index_map[gname]
        values = quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(-1)
        target = new[hf_name].view(-1)
        target[torch.from_numpy(flat)] = torch.from_numpy(values)
        replaced.append(f"{gname} -> {hf_name} ({t.tensor_type.name})")
    return new, replaced


def load_state(model, state: dict):
    import torch
    m = copy.deepcopy(model)
    params = dict(m.named_parameters())
    with torch.no_grad():
        for name, value in state.items():
            params[name].copy_(value)
    return m


# --------------------------------------------------------------------------
# One model
# --------------------------------------------------------------------------


def rope_facts(params: dict | None) -> dict:
    """A rope_parameters entry of a transformers config, without defaults noise."""
    params = dict(params or {})
    keep = ("rope_type", "rope_theta", "factor", "low_freq_factor", "high_freq_factor",
            "original_max_position_embeddings", "beta_fast", "beta_slow", "attention_factor",
            "partial_rotary_factor", "mrope_section", "mrope_interleaved")
    return {k: params[k] for k in keep if params.get(k) is not None}


def model_facts(spec: dict, model) -> dict:
    """What the model computes, read from the transformers config.

    These are properties of the model, in transformers' terms, for tests of
    the converter (issue 3) to compare against what they read from the GGUF;
    they are not .mlb field values (the converter chooses those).
    """
    arch = spec["arch"]
    c = model.config
    n = c.num_hidden_layers
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    gemma = arch.startswith("gemma")
    rp = c.rope_parameters or {}
    per_type = "full_attention" in rp or "sliding_attention" in rp
    types = list(getattr(c, "layer_types", None) or ["full_attention"] * n)
    no_rope = list(getattr(c, "no_rope_layers", None) or [1] * n)
    layers = []
    for i in range(n):
        t = types[i]
        layer = dict(index=i, kind={"full_attention": "attention", "sliding_attention": "sliding",
                                    "linear_attention": "linear"}[t])
        if t != "linear_attention":
            layer["rope"] = bool(no_rope[i])
            if per_type:
                layer["rope_parameters"] = rope_facts(rp.get(t))
        layers.append(layer)
    facts = dict(
        dim=c.hidden_size, n_layers=n, n_heads=c.num_attention_heads,
        n_kv_heads=c.num_key_value_heads, head_dim=head_dim,
        q_dim=head_dim * c.num_attention_heads, kv_dim=head_dim * c.num_key_value_heads,
        hidden_dim=c.intermediate_size, vocab=c.vocab_size, max_seq=c.max_position_embeddings,
        norm_eps=c.rms_norm_eps, tied_embeddings=bool(gemma or c.tie_word_embeddings),
        rope_parameters=None if per_type else rope_facts(rp),
        qkv_bias=arch == "qwen2", qk_norm=arch in ("qwen3", "gemma3", "qwen35"),
        norm_weight_convention="x * (1 + w)" if (gemma or arch == "qwen35") else "x * w",
        activation="gelu_tanh" if gemma else "silu",
        post_norms=arch in ("gemma2", "gemma3"),
        embed_scale=math.sqrt(c.hidden_size) if gemma else None,
        attn_scale=(c.query_pre_attn_scalar ** -0.5 if arch in ("gemma2", "gemma3")
                    else head_dim ** -0.5),
        attn_softcap=getattr(c, "attn_logit_softcapping", None),
        final_softcap=getattr(c, "final_logit_softcapping", None),
        sliding_window=(c.sliding_window if any(t == "sliding_attention" for t in types)
                        else None),
        layers=layers)
    rotary = getattr(model.model, "rotary_emb", None)
    if rotary is not None and getattr(rotary, "attention_scaling", 1.0) != 1.0:
        # e.g. YaRN's 0.1 ln(factor) + 1, which multiplies cos and sin
        facts["rope_attention_factor"] = float(rotary.attention_scaling)
    if arch == "qwen35":
        facts.update(
            rot_dim=int(head_dim * rp.get("partial_rotary_factor", 1.0)), attn_gate=True,
            linear=dict(k_heads=c.linear_num_key_heads, v_heads=c.linear_num_value_heads,
                        k_dim=c.linear_key_head_dim, v_dim=c.linear_value_head_dim,
                        conv=c.linear_conv_kernel_dim,
                        norm_weight_convention="x * w (linear_attn.norm only)"),
            mtp_blocks_in_gguf=1)
    return facts


def summarize_gguf(path: Path) -> dict:
    from gguf import GGUFReader
    r = GGUFReader(str(path))
    types: dict[str, int] = {}
    for t in r.tensors:
        types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
    return dict(file=path.name, bytes=path.stat().st_size, sha256=sha256_file(path),
                n_tensors=len(r.tensors), tensor_types=dict(sorted(types.items())))


def write_logits(out_dir: Path, tag: str, prompt: str, logits, meta: list, source: str,
                 weights: str, refs: dict | None = None):
    """Store one logits array and describe it (argmax, top-2 margin, agreement)."""
    import numpy as np
    rel = f"logits/{tag}.{prompt}.f32"
    path = out_dir / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    arr = np.ascontiguousarray(logits, dtype="<f4")
    arr.tofile(path)
    top2 = np.sort(arr, axis=1)[:, -2:]
    entry = dict(file=rel, tag=tag, source=source, weights=weights, prompt=prompt,
                 shape=list(arr.shape), argmax=[int(i) for i in arr.argmax(axis=1)],
                 top2_margin=[round(float(m), 6) for m in top2[:, 1] - top2[:, 0]],
                 sha256=sha256_file(path))
    for rname, ref in (refs or {}).items():
        entry[f"max_abs_diff_vs_{rname}"] = float(np.abs(arr - ref).max())
        entry[f"argmax_agrees_with_{rname}"] = int((arr.argmax(axis=1) == ref.argmax(axis=1)).sum())
    meta.append(entry)
    return arr


def make_ggufs(spec: dict, args, hf_dir: Path, out: Path, work: Path, pre: str | None) -> dict:
    """Convert to F32 and F16, quantize the F32 file; returns {type: path}."""
    name = spec["name"]
    ggufs = {}
    for outtype in ("F32", "F16"):
        path = out / f"{name}-{outtype.lower()}.gguf"
        convert(args.llama_cpp, hf_dir, path, outtype.lower(), name, pre)
        ggufs[outtype] = path
    for q in spec.get("quants", BASE_QUANTS):
        path = out / f"{name}-{q.lower()}.gguf"
        quantize(args.llama_cpp, ggufs["F32"], path, q)
        ggufs[q] = path
    if spec.get("mtp"):
        # The same model converted with --no-mtp: the file without the extra block.
        nomtp = work / f"{name}-nomtp-f32.gguf"
        convert(args.llama_cpp, hf_dir, nomtp, "f32", name, pre, ["--no-mtp"])
        path = out / f"{name}-nomtp-q8_0.gguf"
        quantize(args.llama_cpp, nomtp, path, "Q8_0")
        ggufs["NOMTP-Q8_0"] = path
    return ggufs


def run_ablations(spec: dict, model, tok, ids: list[int], ref) -> dict:
    result = {}
    for what, change in spec.get("ablate", {}).items():
        lg = ablation(spec, model, tok, change, ids)
        result[what] = dict(
            prompt="p0", max_abs_diff_vs_hf=float(abs(lg - ref).max()),
            argmax_agrees_with_hf=int((lg.argmax(axis=1) == ref.argmax(axis=1)).sum()))
        log(f"{spec['name']}: ablation {what!r}: max|d| {result[what]['max_abs_diff_vs_hf']:.3g}, "
            f"argmax {result[what]['argmax_agrees_with_hf']}/{len(ids)}")
    return result


def make_model(spec: dict, args, work_root: Path, logits_exe: Path | None) -> dict:
    """Build, convert and evaluate one model; returns its manifest."""
    name = spec["name"]
    tkind = spec["tok"]
    pre = TOKENIZERS[tkind].get("pre")
    work = work_root / name
    work.mkdir(parents=True, exist_ok=True)
    out = args.out / name
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)

    log(f"{name}: transformers model")
    tok_dir = build_tokenizer(tkind, work_root)
    hf_dir = work / "hf"
    model, tok = build_hf_model(spec, tok_dir, hf_dir)
    for f in ["config.json", "tokenizer.json", "tokenizer_config.json", "tokenizer.model"]:
        if (hf_dir / f).exists():
            shutil.copy(hf_dir / f, out / f)
    prompts = {"p0": choose_prompt(tok, PROMPT_TEXT, PROMPT_MIN, PROMPT_MAX),
               "p1": choose_prompt(tok, SHORT_PROMPT_TEXT, 2, 12)}

    log(f"{name}: GGUF conversion")
    ggufs = make_ggufs(spec, args, hf_dir, out, work, pre)

    log(f"{name}: expected logits")
    logits_meta: list = []
    ref = {}
    for pname, (_, ids) in prompts.items():
        ref[pname] = hf_logits(model, ids)
        write_logits(out, "hf", pname, ref[pname], logits_meta, "transformers", "original")

    index_map = probe_index_map(spec, model, hf_dir, work, args.llama_cpp, pre)
    n_checked = verify_index_map(model, ggufs["F32"], index_map)
    log(f"{name}: index map verified on {n_checked} F32 matrices")
    state, replaced = dequantized_state(model, ggufs["Q8_0"], index_map)
    qmodel = load_state(model, state)
    ref_q8 = {}
    for pname, (_, ids) in prompts.items():
        ref_q8[pname] = write_logits(out, "hf-q8_0", pname, hf_logits(qmodel, ids), logits_meta,
                                     "transformers", f"dequantized from {ggufs['Q8_0'].name}",
                                     {"hf": ref[pname]})

    if logits_exe is not None:
        for qname, path in ggufs.items():
            for pname, (_, ids) in prompts.items():
                lg = llama_logits(logits_exe, path, ids, len(tok), work / "lcpp.f32")
                refs = {"hf": ref[pname]}
                if qname.endswith("Q8_0"):
                    refs["hf-q8_0"] = ref_q8[pname]
                write_logits(out, f"llama.cpp-{qname.lower()}", pname, lg, logits_meta, "llama.cpp",
                             path.name, refs)

    ablations = run_ablations(spec, model, tok, prompts["p0"][1], ref["p0"])
    cfg = json.loads((hf_dir / "config.json").read_text())
    manifest = dict(
        name=name, gguf_arch=spec["arch"], hf_class=spec["hf"], description=spec["desc"],
        config_args=spec["config"], model=model_facts(spec, model),
        tokenizer=tokenizer_facts(tok, tkind),
        hf_config_file="config.json", torch_dtype=cfg.get("dtype", cfg.get("torch_dtype")),
        prompts={k: dict(text=t, ids=ids, n=len(ids)) for k, (t, ids) in prompts.items()},
        ggufs={k: summarize_gguf(v) for k, v in ggufs.items()},
        q8_0_tensors_mapped_back=replaced,
        hf_logits_std={k: round(float(v.std()), 4) for k, v in ref.items()},
        logits=logits_meta, ablations=ablations)
    (out / "expected.json").write_text(dump_json(manifest))
    for line in check_model(manifest):
        log(f"{name}: {line}")
    return manifest


def check_model(m: dict) -> list[str]:
    """Human-readable agreement summary for the log."""
    lines = []
    for e in m["logits"]:
        for ref in ("hf", "hf-q8_0"):
            if f"max_abs_diff_vs_{ref}" in e:
                lines.append(f"{e['tag']:<16} {e['prompt']} vs {ref:<8} max|d| "
                             f"{e[f'max_abs_diff_vs_{ref}']:.3g}, argmax "
                             f"{e[f'argmax_agrees_with_{ref}']}/{e['shape'][0]}")
    return lines


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def tool_versions(lcpp: Path) -> dict:
    import gguf
    import numpy
    import sentencepiece
    import tokenizers
    import torch
    import transformers
    return dict(python=sys.version.split()[0], transformers=transformers.__version__,
                torch=torch.__version__, tokenizers=tokenizers.__version__,
                sentencepiece=sentencepiece.__version__, numpy=numpy.__version__,
                gguf_py=getattr(gguf, "__version__", None) or gguf_py_version(lcpp),
                gguf_py_path=str(Path(gguf.__file__).parent), llama_cpp=llama_cpp_version(lcpp))


def gguf_py_version(lcpp: Path) -> str | None:
    toml = lcpp / "gguf-py" / "pyproject.toml"
    for line in toml.read_text().splitlines() if toml.exists() else []:
        if line.startswith("version"):
            return line.split("=", 1)[1].strip().strip('"')
    return None


def verify(root: Path) -> int:
    """Check the committed fixtures against their manifests (no torch, no llama.cpp).

    Every GGUF and logits file must exist with the recorded SHA-256 and size,
    and every logits file must hold shape[0] x shape[1] float32 values.
    Returns the number of problems found.
    """
    problems = 0
    index = json.loads((root / "models.json").read_text())
    for name, info in index["models"].items():
        m = json.loads((root / info["manifest"]).read_text())
        entries = [(g["file"], g["sha256"], g["bytes"]) for g in m["ggufs"].values()]
        entries += [(e["file"], e["sha256"], 4 * e["shape"][0] * e["shape"][1]) for e in m["logits"]]
        for rel, digest, size in entries:
            path = root / name / rel
            if not path.is_file():
                print(f"{name}/{rel}: missing")
            elif path.stat().st_size != size:
                print(f"{name}/{rel}: {path.stat().st_size} bytes, expected {size}")
            elif sha256_file(path) != digest:
                print(f"{name}/{rel}: SHA-256 differs from expected.json")
            else:
                continue
            problems += 1
    print(f"{root}: {len(index['models'])} models, {problems} problems")
    return problems


def main() -> None:
    ap = argparse.ArgumentParser(description="Make tests/fixtures/models/ (see the module doc).")
    ap.add_argument("--llama-cpp", type=Path,
                    default=Path(os.environ.get("LLAMA_CPP_DIR", DEFAULT_LLAMA_CPP)),
                    help="llama.cpp source tree with build/bin/llama-quantize")
    ap.add_argument("--out", type=Path, default=REPO / "tests" / "fixtures" / "models")
    ap.add_argument("--work", type=Path, default=Path("/tmp/mlcore-model-fixtures"))
    ap.add_argument("--only", help="comma-separated model names")
    ap.add_argument("--no-llama-logits", action="store_true", help="skip llama.cpp's logits")
    ap.add_argument("--verify", action="store_true",
                    help="only check the files in --out against their manifests")
    args = ap.parse_args()
    if args.verify:
        raise SystemExit(1 if verify(args.out.resolve()) else 0)
    args.llama_cpp = args.llama_cpp.resolve()
    args.out = args.out.resolve()

    # Read GGUFs with the llama.cpp tree's own gguf-py, the one its converter uses.
    sys.path.insert(0, str(args.llama_cpp / "gguf-py"))
    import torch
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    if args.work.exists():
        shutil.rmtree(args.work)
    args.work.mkdir(parents=True)
    args.out.mkdir(parents=True, exist_ok=True)
    exe = None if args.no_llama_logits else build_logits_tool(args.llama_cpp, args.work)

    wanted = set(args.only.split(",")) if args.only else None
    manifests = []
    for spec in MODELS:
        if wanted is None or spec["name"] in wanted:
            manifests.append(make_model(spec, args, args.work, exe))

    index_path = args.out / "models.json"
    index = json.loads(index_path.read_text()) if index_path.exists() and wanted else {"models": {}}
    index["generator"] = "tools/make-model-fixtures.py"
    index["versions"] = tool_versions(args.llama_cpp)
    for m in manifests:
        index["models"][m["name"]] = dict(
            gguf_arch=m["gguf_arch"], hf_class=m["hf_class"], description=m["description"],
            ggufs={k: v["file"] for k, v in m["ggufs"].items()}, prompts=m["prompts"],
            manifest=f"{m['name']}/expected.json")
    index["models"] = {s["name"]: index["models"][s["name"]] for s in MODELS
                       if s["name"] in index["models"]}
    index_path.write_text(dump_json(index))
    from model_fixtures_doc import write_readme
    write_readme(args.out)
    total = sum(f.stat().st_size for f in args.out.rglob("*") if f.is_file())
    log(f"done: {len(manifests)} models, {total} bytes in {args.out}")


if __name__ == "__main__":
    main()
