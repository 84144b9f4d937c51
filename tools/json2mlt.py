#!/usr/bin/env python3
"""json2mlt.py - reference converter from a Hugging Face tokenizer.json (and
the tokenizer_config.json beside it) to an .mlt tokenizer (mlt(5)).

    tools/json2mlt.py DIR/tokenizer.json OUT.mlt

It follows the rules of mlt(5): byte-level pieces are stored as the raw bytes
they stand for (the GPT-2 byte-to-character map undone), SentencePiece pieces
as UTF-8 with U+2581 for spaces, added tokens (special or not) get attr 1,
SentencePiece byte-fallback tokens <0xXX> get attr 2 and their one byte, and
the flags come from the normalizer, pre-tokenizer, post-processor and model
sections.  Anything the format cannot express exactly is refused with a
message, never approximated.  BOS and EOS are the tokenizer_config.json's
bos_token and eos_token (-1 when absent).  Needs only the standard library.
"""
import json
import os
import re
import struct
import sys

ADD_BOS, IGNORE_MERGES, PREFIX_FIRST, NFC = 1, 2, 4, 8
SINGLE_DIGITS, GPT2_REGEX, SPLIT_DIGITS, NO_PREFIX, MARKS_REGEX = 16, 32, 64, 128, 256
O200K_REGEX = 2048

LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
             r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = LLAMA3_RE.replace(r"\p{N}{1,3}", r"\p{N}")
QWEN35_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
             r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# o200k (gpt-oss): case-aware words, each with its contraction attached.
O200K_UPPER = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"
O200K_LOWER = r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"
O200K_RE = (r"[^\r\n\p{L}\p{N}]?" + O200K_UPPER + "*" + O200K_LOWER +
            r"+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?" + O200K_UPPER + "+" +
            O200K_LOWER + r"*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}"
            r"| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
REGEX_FLAGS = {LLAMA3_RE: 0, QWEN2_RE: SINGLE_DIGITS, QWEN35_RE: SINGLE_DIGITS | MARKS_REGEX,
               O200K_RE: O200K_REGEX}
SPM_SPACE = "\u2581"
BYTE_TOKEN = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


class Refuse(Exception):
    pass


def gpt2_byte_decoder():
    """The inverse of GPT-2's reversible byte-to-character map."""
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars = {b: chr(b) for b in keep}
    n = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(0x100 + n)
            n += 1
    return {c: b for b, c in chars.items()}


def steps(node, key):
    """A normalizer or pre-tokenizer as a flat list of its steps."""
    if node is None:
        return []
    if node.get("type") == "Sequence":
        out = []
        for sub in node[key]:
            out += steps(sub, key)
        return out
    return [node]


def spm_flags(tj):
    norm = steps(tj.get("normalizer"), "normalizers")
    pre = steps(tj.get("pre_tokenizer"), "pretokenizers")
    kinds = [n["type"] for n in norm]
    replace_ok = any(n["type"] == "Replace" and n["pattern"] == {"String": " "}
                     and n["content"] == SPM_SPACE for n in norm)
    flags = 0
    if kinds == ["Prepend", "Replace"] and norm[0]["prepend"] == SPM_SPACE and replace_ok:
        flags = 0  # ▁ in front of every segment between added tokens
    elif kinds == ["Replace"] and replace_ok:
        flags = NO_PREFIX
    elif not norm and len(pre) == 1 and pre[0]["type"] == "Metaspace":
        m = pre[0]
        if m.get("replacement") != SPM_SPACE or m.get("split", False):
            raise Refuse("Metaspace with split or another replacement is not expressible")
        scheme = m.get("prepend_scheme", "always" if m.get("add_prefix_space", True) else "never")
        if scheme == "always":
            # Metaspace skips the prefix where a segment starts with a space;
            # kind 1 without flags always prepends (the Prepend normalizer).
            raise Refuse("Metaspace prepend_scheme \"always\" is not expressible")
        flags = {"first": PREFIX_FIRST, "never": NO_PREFIX}[scheme]
        pre = []
    else:
        raise Refuse("SentencePiece normalizer %s is not expressible" % kinds)
    for p in pre:
        # Gemma's Split(" ") cannot see a space once the normalizer made it ▁.
        if not (p["type"] == "Split" and p["pattern"] == {"String": " "}):
            raise Refuse("SentencePiece pre-tokenizer %s is not expressible" % p["type"])
    return flags


def byte_level_flags(tj):
    norm = steps(tj.get("normalizer"), "normalizers")
    pre = steps(tj.get("pre_tokenizer"), "pretokenizers")
    flags = 0
    for n in norm:
        if n["type"] == "NFC":
            flags |= NFC
        else:
            raise Refuse("normalizer %s is not expressible" % n["type"])
    kinds = [p["type"] for p in pre]
    bl = pre[-1] if pre and pre[-1]["type"] == "ByteLevel" else None
    if bl is None or bl.get("add_prefix_space"):
        raise Refuse("byte-level pre-tokenizer %s is not expressible" % kinds)
    if kinds == ["Split", "ByteLevel"] and not bl.get("use_regex", True):
        sp = pre[0]
        rx = sp["pattern"].get("Regex")
        if sp["behavior"] != "Isolated" or sp.get("invert") or rx not in REGEX_FLAGS:
            raise Refuse("pre-tokenizer regex %r is not one mlt(5) knows" % rx)
        flags |= REGEX_FLAGS[rx]
    elif kinds == ["ByteLevel"] and bl.get("use_regex", True):
        flags |= GPT2_REGEX
    elif kinds == ["Digits", "ByteLevel"] and bl.get("use_regex", True) and \
            pre[0].get("individual_digits"):
        flags |= GPT2_REGEX | SPLIT_DIGITS
    else:
        raise Refuse("byte-level pre-tokenizer %s is not expressible" % kinds)
    return flags


def adds_bos(tj, bos_text):
    """Whether the post-processor puts the BOS token first."""
    for p in steps(tj.get("post_processor"), "processors"):
        if p["type"] == "TemplateProcessing":
            first = p["single"][0]
            if "SpecialToken" in first:
                if first["SpecialToken"]["id"] != bos_text:
                    raise Refuse("the template starts with %s, not the BOS token"
                                 % first["SpecialToken"]["id"])
                return True
    return False


def config_token(cfg, key):
    v = cfg.get(key)
    if isinstance(v, dict):
        v = v.get("content")
    return v


def convert(tj, cfg):
    model = tj["model"]
    if model["type"] != "BPE":
        raise Refuse("model type %s: only BPE is expressible" % model["type"])
    if model.get("dropout") or model.get("continuing_subword_prefix") or \
            model.get("end_of_word_suffix"):
        raise Refuse("BPE dropout or subword affixes are not expressible")
    byte_level = any(p["type"] == "ByteLevel"
                     for p in steps(tj.get("pre_tokenizer"), "pretokenizers"))
    kind = 2 if byte_level else 1
    flags = byte_level_flags(tj) if byte_level else spm_flags(tj)
    if model.get("ignore_merges"):
        flags |= IGNORE_MERGES

    vocab = model["vocab"]
    added = {a["id"]: a for a in tj.get("added_tokens", [])}
    for a in added.values():
        if a.get("lstrip") or a.get("rstrip") or a.get("single_word") or a.get("normalized"):
            raise Refuse("added token %r: lstrip, rstrip, single_word and normalized "
                         "are not expressible" % a["content"])
    text_of = {i: t for t, i in vocab.items()}
    for i, a in added.items():
        text_of[i] = a["content"]
    n = max(text_of) + 1
    missing = [i for i in range(n) if i not in text_of]
    if missing:
        raise Refuse("ids %s... have no token" % missing[:5])

    dec = gpt2_byte_decoder()
    fallback = bool(model.get("byte_fallback"))
    tokens = []
    for i in range(n):
        t = text_of[i]
        if i in added:
            tokens.append((1, t.encode("utf-8")))
        elif kind == 2:
            tokens.append((0, bytes(dec[c] for c in t)))
        elif fallback and BYTE_TOKEN.match(t):
            tokens.append((2, bytes([int(BYTE_TOKEN.match(t).group(1), 16)])))
        else:
            tokens.append((0, t.encode("utf-8")))

    merges = []
    for m in model["merges"]:
        left, right = m.split(" ", 1) if isinstance(m, str) else m
        ids = (vocab[left], vocab[right], vocab[left + right])
        if any(tokens[x][0] == 2 for x in ids):
            raise Refuse("merge %r involves a byte token" % (m,))
        merges.append(ids)

    bos_text, eos_text = config_token(cfg, "bos_token"), config_token(cfg, "eos_token")
    ids_by_text = {t: i for i, t in sorted(text_of.items(), reverse=True)}
    bos = ids_by_text[bos_text] if bos_text is not None else -1
    eos = ids_by_text[eos_text] if eos_text is not None else -1
    if adds_bos(tj, bos_text):
        flags |= ADD_BOS
    return kind, flags, bos, eos, tokens, merges


def write_mlt(path, kind, flags, bos, eos, tokens, merges):
    out = bytearray(b"MLT1")
    out += struct.pack("<IIIIiiI", 1, kind, len(tokens), len(merges), bos, eos, flags)
    for attr, b in tokens:
        out += struct.pack("<BI", attr, len(b)) + b
    for m in merges:
        out += struct.pack("<III", *m)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(out)
    os.replace(tmp, path)


def main(argv):
    if len(argv) != 3 or argv[1] in ("-h", "--help"):
        print("usage: json2mlt.py TOKENIZER.json OUT.mlt", file=sys.stderr)
        return 2
    src = argv[1]
    with open(src, encoding="utf-8") as f:
        tj = json.load(f)
    cfg_path = os.path.join(os.path.dirname(src) or ".", "tokenizer_config.json")
    cfg = {}
    if os.path.exists(cfg_path):
        with open(cfg_path, encoding="utf-8") as f:
            cfg = json.load(f)
    try:
        kind, flags, bos, eos, tokens, merges = convert(tj, cfg)
    except Refuse as e:
        print("json2mlt.py: %s: %s" % (src, e), file=sys.stderr)
        return 4
    write_mlt(argv[2], kind, flags, bos, eos, tokens, merges)
    print("%s: kind %d, flags %d, %d tokens, %d merges, bos %d, eos %d"
          % (argv[2], kind, flags, len(tokens), len(merges), bos, eos))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
