#!/usr/bin/env python3
"""bench-tok.py - helper of bench-tok.sh: builds the mixed corpus and times
the Python tokenizers package (the Hugging Face Rust library) on it.

    bench-tok.py corpus OUT.txt           write the corpus (about 4 MB)
    bench-tok.py hf TOKENIZER.json TEXT   print "SECONDS IDS FNV" of one encode

The corpus: English prose (vim's user manual and the licences in
/usr/share/common-licenses), C code (/usr/include and this repository's
lib/), and Chinese, Japanese and Korean prose (vim's translated tutors,
repeated), interleaved in 64 KiB blocks so no part is all at the end."""
import glob
import os
import sys
import time


def read_files(patterns, limit):
    out = bytearray()
    for pat in patterns:
        for f in sorted(glob.glob(pat)):
            if len(out) >= limit:
                return bytes(out[:limit])
            try:
                b = open(f, "rb").read()
                b.decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            out += b
    return bytes(out[:limit])


def cut_utf8(b):
    return b.decode("utf-8", errors="ignore").encode("utf-8")


def corpus(path):
    here = os.path.dirname(os.path.abspath(__file__))
    eng = read_files(["/usr/share/vim/vim*/doc/usr_*.txt", "/usr/share/common-licenses/*"],
                     3 << 19)
    code = read_files([os.path.join(here, "..", "lib", "*.c"), "/usr/include/*.h",
                       "/usr/include/*/*.h"], 3 << 19)
    cjk1 = read_files(["/usr/share/vim/vim*/tutor/tutor.ja.utf-8",
                       "/usr/share/vim/vim*/tutor/tutor.zh_cn.utf-8",
                       "/usr/share/vim/vim*/tutor/tutor.ko.utf-8"], 1 << 20)
    cjk = (cjk1 * (1 + (1 << 20) // max(len(cjk1), 1)))[:1 << 20]
    parts = [eng, code, cjk]
    block = 1 << 16
    out = bytearray()
    for i in range(0, max(len(p) for p in parts), block):
        for p in parts:
            out += cut_utf8(p[i:i + block])
    with open(path, "wb") as f:
        f.write(out)


def hf(tok, text_path):
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from tokenizers import Tokenizer
    tk = Tokenizer.from_file(tok)
    text = open(text_path, "rb").read().decode("utf-8", errors="replace")
    best = None
    for _ in range(3):
        t0 = time.perf_counter()
        ids = tk.encode(text, add_special_tokens=False).ids
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    h = 0xcbf29ce484222325
    for i in ids:
        for b in i.to_bytes(4, "little"):
            h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    print("%.6f %d %016x" % (best, len(ids), h))


if __name__ == "__main__":
    if sys.argv[1] == "corpus":
        corpus(sys.argv[2])
    else:
        hf(sys.argv[2], sys.argv[3])
