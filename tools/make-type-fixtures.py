#!/usr/bin/env python3
"""Make the block-type fixtures in tests/fixtures/types/ (issue 38).

The tiny random-weight models of tests/fixtures/models, quantized to every
GGUF block type .mlb will keep, with llama.cpp's logits for each and a CRC-32
of gguf-py's dequantization of every tensor, so that tests need neither
network nor Python:

  * llama-quantize of llama2-f32.gguf (rows of 256 and more: the K-quants
    really are K-quants) and of gemma3-f32.gguf (rows of 64 and 128:
    llama-quantize falls back to 32-element block types, as it does for the
    real Gemma 3 270M) to the types in QUANTS.  A type already committed in
    tests/fixtures/models (llama2 Q4_K_M, Q6_K) is referenced, not copied.
  * llama2-mxfp4.gguf, written here with gguf-py (llama-quantize's MXFP4_MOE
    only touches expert tensors): every 2-D matrix, token_embd included
    (llama.cpp's CPU get_rows takes MXFP4), quantized with
    gguf.quants.quantize; the norms stay F32.
  * logits of each GGUF for the prompts p0 and p1 of the model's
    expected.json, from tools/llama-logits.c linked against the llama.cpp
    build (whole prompt as one batch, one thread, F32 KV cache).
  * types.json (the manifest), dequant-crc.txt (the same CRC-32s as plain
    text, read by tests/unit/check_type_fixtures.c) and README.md.

Run from anywhere (about a minute):

    python3 tools/make-type-fixtures.py [--llama-cpp DIR] [--work DIR]

Needs numpy and gguf-py (the recorded version: its quantize and dequantize
are part of the output), a llama.cpp source tree whose build/bin holds
llama-quantize and libllama (--llama-cpp, default $LLAMA_CPP_DIR or
/tmp/mlcore-llama.cpp), and a C compiler.  Deterministic: a second run on the
same machine writes identical bytes.  The GGUFs depend only on the
llama.cpp and gguf-py versions; the last bits of the logits also depend on
the CPU llama.cpp runs on (its SIMD kernels).
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODELS_DIR = REPO / "tests" / "fixtures" / "models"
OUT = REPO / "tests" / "fixtures" / "types"
DEFAULT_LLAMA_CPP = "/tmp/mlcore-llama.cpp"

# The models: llama2 has rows of 256 and more (K-quants stay K-quants);
# gemma3 has rows of 64 and 128 (llama-quantize falls back to 32-blocks).
MODELS = ["llama2", "gemma3"]
# llama-quantize types (its names), made from the model's F32 GGUF.
QUANTS = ["Q5_0", "Q5_1", "Q5_K_M", "Q3_K_M", "Q2_K", "IQ4_NL", "IQ4_XS", "Q4_K_M", "Q6_K"]
PROMPTS = ["p0", "p1"]
NTHREADS = "2"  # llama-quantize's thread count (the output does not depend on it)


def log(msg: str) -> None:
    print(f"[types] {msg}", file=sys.stderr, flush=True)


def run(cmd: list[str], check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if check and res.returncode != 0:
        sys.stderr.write(res.stdout[-4000:] + res.stderr[-4000:])
        raise SystemExit(f"command failed ({res.returncode}): {' '.join(map(str, cmd))}")
    return res


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def rel(path: Path) -> str:
    return str(path.resolve().relative_to(REPO))


def dump_json(obj) -> str:
    """JSON with one item per line, except that arrays of numbers stay on one line."""
    text = json.dumps(obj, indent=1, ensure_ascii=False)
    numbers = re.compile(r"\[\s*(-?[0-9][-0-9.eE+]*(?:,\s*-?[0-9][-0-9.eE+]*)*)\s*\]")
    return numbers.sub(lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]",
                       text) + "\n"


# --------------------------------------------------------------------------
# Versions
# --------------------------------------------------------------------------


def llama_cpp_version(lcpp: Path) -> dict:
    info: dict = {}
    res = run(["git", "-C", lcpp, "rev-parse", "HEAD"], check=False)
    if res.returncode == 0:
        info["commit"] = res.stdout.strip()
        info["describe"] = run(["git", "-C", lcpp, "log", "-1", "--format=%cs %s"]).stdout.strip()
    else:
        info["commit"] = None  # not a git tree (a copied submodule, say)
    header = lcpp / "build" / "src" / "llama-version.h"
    if header.exists():
        for m in re.finditer(r'#define\s+(LLAMA_\w+)\s+"([^"]*)"', header.read_text()):
            info[m.group(1).lower()] = m.group(2)
    cache = lcpp / "build" / "CMakeCache.txt"
    if cache.exists():
        m = re.search(r"^GGML_NATIVE:BOOL=(\w+)", cache.read_text(), re.M)
        if m:
            info["ggml_native"] = m.group(1)
    return info


def cpu_info() -> dict:
    info = {"machine": platform.machine()}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return info
    m = re.search(r"^flags\s*:\s*(.*)$", text, re.M)
    if m:
        wanted = re.compile(r"^(avx\w*|amx\w*|fma|f16c|sse4_2)$")
        info["simd_flags"] = sorted(f for f in m.group(1).split() if wanted.match(f))
    return info


# --------------------------------------------------------------------------
# Making the GGUFs
# --------------------------------------------------------------------------


def quantize(lcpp: Path, src: Path, dst: Path, qtype: str) -> str | None:
    """llama-quantize; None on success, else why it refused."""
    res = run([lcpp / "build" / "bin" / "llama-quantize", src, dst, qtype, NTHREADS], check=False)
    if res.returncode == 0:
        return None
    lines = [ln.strip() for ln in (res.stdout + res.stderr).splitlines() if ln.strip()]
    why = [ln for ln in lines if re.search(r"error|imatrix|importance|failed|invalid", ln, re.I)]
    return f"llama-quantize exit {res.returncode}: " + " | ".join((why or lines)[-3:])


def copy_fields(reader, writer, file_type: int) -> None:
    import gguf
    for f in reader.fields.values():
        if f.name == gguf.Keys.General.ARCHITECTURE or f.name.startswith("GGUF."):
            continue  # written by GGUFWriter itself
        vtype = f.types[0]
        sub = f.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        value = file_type if f.name == gguf.Keys.General.FILE_TYPE else f.contents()
        writer.add_key_value(f.name, value, vtype, sub_type=sub)


def write_mxfp4(src: Path, dst: Path) -> None:
    """src's metadata and tensors, every 2-D matrix quantized to MXFP4 by
    gguf-py, general.file_type MOSTLY_MXFP4_MOE and quantization_version 2
    (as llama-quantize would write)."""
    import gguf
    import numpy as np
    r = gguf.GGUFReader(str(src))
    w = gguf.GGUFWriter(str(dst), r.fields[gguf.Keys.General.ARCHITECTURE].contents())
    copy_fields(r, w, int(gguf.LlamaFileType.MOSTLY_MXFP4_MOE))
    if gguf.Keys.General.QUANTIZATION_VERSION not in r.fields:
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    for t in r.tensors:
        if t.tensor_type != gguf.GGMLQuantizationType.F32:
            raise SystemExit(f"{src.name}: {t.name} is {t.tensor_type.name}, expected F32")
        a = np.asarray(t.data, dtype=np.float32)
        if a.ndim == 2:
            q = gguf.quants.quantize(a, gguf.GGMLQuantizationType.MXFP4)
            w.add_tensor(t.name, q, raw_dtype=gguf.GGMLQuantizationType.MXFP4)
        else:
            w.add_tensor(t.name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_dequantized(src: Path, dst: Path) -> None:
    """src with every tensor replaced by gguf-py's F32 dequantization (a check)."""
    import gguf
    import numpy as np
    r = gguf.GGUFReader(str(src))
    w = gguf.GGUFWriter(str(dst), r.fields[gguf.Keys.General.ARCHITECTURE].contents())
    copy_fields(r, w, int(gguf.LlamaFileType.ALL_F32))
    for t in r.tensors:
        w.add_tensor(t.name, gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# --------------------------------------------------------------------------
# Describing them
# --------------------------------------------------------------------------


def describe_gguf(path: Path) -> tuple[dict, list[dict]]:
    """(summary, per-tensor rows) of a GGUF; shapes in ggml order (dims[0] is
    the row length); crc32 of gguf-py's dequantization as little-endian f32."""
    import gguf
    import numpy as np
    r = gguf.GGUFReader(str(path))
    counts: collections.Counter = collections.Counter()
    tensors = []
    for t in r.tensors:
        deq = gguf.quants.dequantize(t.data, t.tensor_type).astype("<f4")
        n = int(np.prod([int(d) for d in t.shape]))
        if deq.size != n:
            raise SystemExit(f"{path.name}: {t.name}: dequantized {deq.size} values, expected {n}")
        counts[t.tensor_type.name] += 1
        tensors.append(dict(name=t.name, type=t.tensor_type.name, shape=[int(d) for d in t.shape],
                            n_elements=n, crc32=zlib.crc32(deq.tobytes()) & 0xFFFFFFFF))
    summary = dict(bytes=path.stat().st_size, sha256=sha256_file(path), n_tensors=len(tensors),
                   tensor_types=dict(sorted(counts.items())))
    return summary, tensors


def tensor_digest(path: Path) -> str:
    """SHA-256 over every tensor's name, type, shape and data (not the metadata)."""
    import gguf
    h = hashlib.sha256()
    for t in gguf.GGUFReader(str(path)).tensors:
        h.update(f"{t.name} {t.tensor_type.name} {[int(d) for d in t.shape]}\n".encode())
        h.update(t.data.tobytes())
    return h.hexdigest()


def metadata(path: Path) -> dict:
    import gguf
    return {f.name: f.contents() for f in gguf.GGUFReader(str(path)).fields.values()
            if not f.name.startswith("GGUF.") and f.name != gguf.Keys.General.FILE_TYPE}


def same_tensors(path: Path, seen: dict) -> str | None:
    """The file of seen holding path's tensors, if its metadata differs at most
    in general.file_type; else None."""
    other = seen.get(tensor_digest(path))
    if other and metadata(REPO / other) == metadata(path):
        return other
    return None


def build_logits_tool(lcpp: Path, work: Path) -> Path:
    exe = work / "llama-logits"
    bindir = lcpp / "build" / "bin"
    run(["cc", "-std=c11", "-O2", "-Wall", "-Wextra", f"-I{lcpp / 'include'}",
         f"-I{lcpp / 'ggml' / 'include'}", REPO / "tools" / "llama-logits.c", "-o", exe,
         f"-L{bindir}", "-lllama", "-lggml", "-lggml-base", f"-Wl,-rpath,{bindir}"])
    return exe


def llama_logits(exe: Path, gguf_path: Path, ids: list[int], n_vocab: int, out: Path):
    import numpy as np
    run([exe, gguf_path, out] + [str(i) for i in ids])
    data = np.fromfile(out, dtype="<f4")
    if data.size != len(ids) * n_vocab:
        raise SystemExit(f"{out}: {data.size} floats, expected {len(ids)} x {n_vocab}")
    return data.reshape(len(ids), n_vocab)


def logits_entry(path: Path, prompt: str, lg) -> dict:
    return dict(file=rel(path), prompt=prompt, shape=list(lg.shape), sha256=sha256_file(path),
                argmax=[int(x) for x in lg.argmax(axis=1)])


# --------------------------------------------------------------------------


def clean_out() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for p in OUT.iterdir():
        if p.suffix in (".gguf", ".f32") or p.name in ("types.json", "dequant-crc.txt", "README.md"):
            p.unlink()


def make_model(name: str, lcpp: Path, exe: Path, work: Path) -> tuple[list, list, list, dict]:
    import numpy as np
    expected = json.loads((MODELS_DIR / name / "expected.json").read_text())
    prompts = {p: expected["prompts"][p]["ids"] for p in PROMPTS}
    f32 = MODELS_DIR / name / f"{name}-f32.gguf"
    entries, skipped, dropped, checks = [], [], [], {}
    # Tensor digests of the committed quantizations and of the files made
    # so far: a type that only renames tensors another file holds is dropped.
    seen = {tensor_digest(p): rel(p) for p in sorted((MODELS_DIR / name).glob(f"{name}-*.gguf"))}
    n_vocab = int(expected["tokenizer"]["n_vocab"])

    jobs = [(q, "llama-quantize") for q in QUANTS] + ([("MXFP4", "gguf-py")] if name == "llama2" else [])
    for qtype, how in jobs:
        tag = qtype.lower()
        committed = MODELS_DIR / name / f"{name}-{tag}.gguf"
        scratch = work / f"{name}-{tag}.gguf"
        if how == "gguf-py":
            log(f"{name} {qtype}: gguf-py")
            write_mxfp4(f32, scratch)
            made_by = (f"gguf-py: {rel(f32)}'s metadata and tensors, every 2-D matrix "
                       "gguf.quants.quantize(..., MXFP4), general.file_type 38")
        else:
            log(f"{name} {qtype}: llama-quantize")
            why = quantize(lcpp, f32, scratch, qtype)
            if why:
                log(f"  skipped: {why}")
                skipped.append(dict(model=name, type=qtype, reason=why))
                continue
            made_by = f"llama-quantize {rel(f32)} OUT {qtype} {NTHREADS}"

        same = None if committed.exists() else same_tensors(scratch, seen)
        if same:
            log(f"  dropped: the same tensors as {same}")
            dropped.append(dict(model=name, type=qtype, same_tensors_as=same))
            continue
        if committed.exists():
            # Referenced, not copied: check that this llama.cpp makes the same bytes.
            if sha256_file(committed) != sha256_file(scratch):
                raise SystemExit(f"{committed}: llama-quantize here makes different bytes; "
                                 "another llama.cpp version?")
            gguf_path = committed
            made_by += f" (the committed file of {rel(MODELS_DIR)}, reproduced byte for byte)"
        else:
            gguf_path = OUT / f"{name}-{tag}.gguf"
            shutil.copyfile(scratch, gguf_path)

        seen[tensor_digest(gguf_path)] = rel(gguf_path)
        summary, tensors = describe_gguf(gguf_path)
        entry = dict(file=rel(gguf_path), model=name, type=qtype, made_by=made_by, **summary,
                     logits=[], tensors=tensors)
        for p, ids in prompts.items():
            mine = work / f"{name}-{tag}.{p}.f32"
            lg = llama_logits(exe, gguf_path, ids, n_vocab, mine)
            old = MODELS_DIR / name / "logits" / f"llama.cpp-{tag}.{p}.f32"
            if committed.exists() and old.exists():
                # Reference the committed logits; say how far this machine's are.
                ref = np.fromfile(old, dtype="<f4").reshape(lg.shape)
                e = logits_entry(old, p, ref)
                e["max_abs_diff_here"] = float(np.abs(ref - lg).max())
            else:
                dst = OUT / f"{name}-{tag}.{p}.f32"
                shutil.copyfile(mine, dst)
                e = logits_entry(dst, p, lg)
            entry["logits"].append(e)
        entries.append(entry)

        if how == "gguf-py":
            # llama.cpp on the MXFP4 file against llama.cpp on gguf-py's F32
            # dequantization of it: equal up to the activation quantization.
            deq = work / f"{name}-{tag}-dequantized.gguf"
            write_dequantized(gguf_path, deq)
            diffs = {}
            for p, ids in prompts.items():
                a = llama_logits(exe, gguf_path, ids, n_vocab, work / "a.f32")
                b = llama_logits(exe, deq, ids, n_vocab, work / "b.f32")
                diffs[p] = dict(max_abs_diff=round(float(np.abs(a - b).max()), 6),
                                max_abs_logit=round(float(np.abs(b).max()), 6),
                                argmax_equal=bool((a.argmax(1) == b.argmax(1)).all()))
            checks[f"{name}-{tag}"] = diffs
            log(f"  llama.cpp MXFP4 vs its F32 dequantization: {diffs}")
    return entries, skipped, dropped, checks


def write_crc_list(entries: list[dict]) -> None:
    lines = ["# tests/fixtures/types/dequant-crc.txt - made by tools/make-type-fixtures.py (see README.md).",
             "# One line per tensor: file (from the repository root), tensor, ggml type, element",
             "# count, CRC-32 (zlib, hex) of gguf-py's dequantization as little-endian float32."]
    for e in entries:
        for t in e["tensors"]:
            lines.append(f"{e['file']} {t['name']} {t['type']} {t['n_elements']} {t['crc32']:08x}")
    (OUT / "dequant-crc.txt").write_text("\n".join(lines) + "\n")


def write_readme(manifest: dict) -> None:
    v = manifest["versions"]
    lc = v["llama_cpp"]
    commit = lc.get("commit") or (f"unknown here (not a git tree; llama-version.h: "
                                  f"{lc.get('llama_version')}, commit {lc.get('llama_commit')})")
    rows = []
    for e in manifest["files"]:
        types = ", ".join(f"{k} {n}" for k, n in sorted(e["tensor_types"].items(),
                                                          key=lambda kv: (-kv[1], kv[0])))
        rows.append(f"| `{e['file'].removeprefix('tests/fixtures/')}` | {e['type']} | {e['bytes']} | {types} |")
    skipped = "".join(f"* {s['model']} {s['type']}: {s['reason']}\n" for s in manifest["skipped"]) or "none\n"
    dropped = "".join(f"* {d['model']} {d['type']}: the same tensors as `{d['same_tensors_as']}`\n"
                      for d in manifest["dropped"]) or "none\n"
    checks = "".join(
        f"  * `{k}` {p}: largest logit difference {d['max_abs_diff']} (largest logit {d['max_abs_logit']}), "
        f"argmax {'equal' if d['argmax_equal'] else 'DIFFERENT'} at every position\n"
        for k, ds in manifest["checks"].items() for p, d in ds.items())
    refdiffs = "".join(
        f"* `{l['file']}`: {l['max_abs_diff_here']:.3g}\n"
        for e in manifest["files"] for l in e["logits"] if "max_abs_diff_here" in l)
    text = f"""# Block-type fixtures (issue 38)

The tiny random-weight models of `tests/fixtures/models` in every GGUF block
type `.mlb` will keep, with llama.cpp's logits for each and a CRC-32 of
gguf-py's dequantization of every tensor: the ground truth for the
dequantizers and for the runtime on each type.  Tests read these files and
need neither network nor Python.

Everything here is written by `tools/make-type-fixtures.py`; do not edit by
hand.  Regenerate with

    python3 tools/make-type-fixtures.py [--llama-cpp DIR]

## How the files are made

* `<model>-<type>.gguf`: `llama-quantize <model>-f32.gguf OUT <TYPE> 2` of the
  committed F32 GGUF (`tests/fixtures/models/<model>/`), llama-quantize's
  default type mix, no importance matrix.  llama2's matrices have rows of 256
  and more, so its K-quants are K-quants; gemma3's rows are 64 and 128, so
  llama-quantize falls back to 32-element block types (Q4_0, Q5_0, Q5_1, Q8_0,
  IQ4_NL), as it does for the real Gemma 3 270M.
* Types already in `tests/fixtures/models` (llama2 Q4_K_M and Q6_K) are not
  copied: the manifest names the committed files and their logits, after
  checking that llama-quantize here makes the same bytes.
* `llama2-mxfp4.gguf`: written by gguf-py (llama-quantize's MXFP4_MOE
  quantizes expert tensors only; on llama2 it writes Q8_0): `llama2-f32.gguf`'s metadata
  (`general.file_type` 38, MOSTLY_MXFP4_MOE) and tensors, every 2-D matrix,
  `token_embd` included (llama.cpp's CPU `get_rows` takes MXFP4), quantized
  with `gguf.quants.quantize(..., MXFP4)`, the norms left F32.  llama.cpp
  loads and runs it; as a check its logits were compared with llama.cpp's on
  gguf-py's F32 dequantization of the same file (not committed):
{checks}
* `<model>-<type>.<prompt>.f32`: llama.cpp's logits (`tools/llama-logits.c`
  linked against the llama.cpp build below: the whole prompt as one batch,
  one thread, F32 KV cache, no flash attention, the same as
  `tests/fixtures/models`) for the prompts p0 and p1 of the model's
  `expected.json`; raw little-endian float32, `[n_tokens][n_vocab]`.
* `types.json`: per GGUF: model, type (the llama-quantize name), how it was
  made, bytes, SHA-256, tensor count per ggml type, its logits files (prompt,
  shape, SHA-256, argmax per position), and per tensor: name, ggml type,
  shape (ggml order: the row length first), element count and `crc32`, the
  CRC-32 (zlib, unsigned) of
  `gguf.quants.dequantize(data, type).astype('<f4').tobytes()`.
* `dequant-crc.txt`: the same CRC-32s as plain text (file, tensor, type,
  element count, CRC in hex), read by `tests/unit/check_type_fixtures.c`.

## Files

| file | type | bytes | tensors per ggml type |
| --- | --- | --- | --- |
{chr(10).join(rows)}

Types llama-quantize refused:

{skipped}
Types left out because llama-quantize's fallbacks made exactly the tensors
(names, types, shapes, data) of a file above or of `tests/fixtures/models`,
the metadata differing in `general.file_type` only (checked):

{dropped}
## Versions

| tool | version |
| --- | --- |
| llama.cpp commit | {commit} |
| llama.cpp build | {lc.get('llama_version')}, GGML_NATIVE={lc.get('ggml_native')} |
| gguf-py | {v['gguf_py']} |
| numpy | {v['numpy']} |
| python | {v['python']} |

The llama.cpp build reproduces the committed llama2 Q4_K_M and Q6_K GGUFs of
`tests/fixtures/models` byte for byte (made with commit
{v['models_llama_cpp'].get('commit')}, according to `models.json`).  The
logits were computed on a {v['cpu']['machine']} CPU with
{' '.join(v['cpu'].get('simd_flags', [])) or 'unknown SIMD'}; llama.cpp's
SIMD kernels (and the activation quantization of quantized products) make
the last bits CPU-dependent.  The committed logits referenced above differ
from this machine's by at most:
{refdiffs}"""
    (OUT / "README.md").write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama-cpp", type=Path,
                    default=Path(os.environ.get("LLAMA_CPP_DIR", DEFAULT_LLAMA_CPP)),
                    help="llama.cpp source tree with build/bin/llama-quantize and libllama")
    ap.add_argument("--work", type=Path, default=Path("/tmp/mlcore-type-fixtures"),
                    help="scratch directory")
    args = ap.parse_args()
    import gguf  # noqa: F401
    import numpy

    lcpp = args.llama_cpp.resolve()
    if not (lcpp / "build" / "bin" / "llama-quantize").exists():
        raise SystemExit(f"{lcpp}: no build/bin/llama-quantize")
    args.work.mkdir(parents=True, exist_ok=True)
    exe = build_logits_tool(lcpp, args.work)
    clean_out()

    files, skipped, dropped, checks = [], [], [], {}
    for name in MODELS:
        e, s, d, c = make_model(name, lcpp, exe, args.work)
        files += e
        skipped += s
        dropped += d
        checks.update(c)

    models_json = json.loads((MODELS_DIR / "models.json").read_text())
    versions = dict(llama_cpp=llama_cpp_version(lcpp), gguf_py=importlib.metadata.version("gguf"),
                    numpy=numpy.__version__, python=platform.python_version(), cpu=cpu_info(),
                    models_llama_cpp=models_json["versions"]["llama_cpp"])
    manifest = dict(generator="tools/make-type-fixtures.py", versions=versions, skipped=skipped,
                    dropped=dropped, checks=checks, files=files)
    (OUT / "types.json").write_text(dump_json(manifest))
    write_crc_list(files)
    write_readme(manifest)
    total = sum(p.stat().st_size for p in OUT.iterdir())
    log(f"{len(files)} GGUFs, {len(skipped)} skipped, {total} bytes in {rel(OUT)}")


if __name__ == "__main__":
    main()
