#!/usr/bin/env python3
"""bench-spec-serve.py - bench-spec.sh's tasks through a server: each
prompt (a file of text, in order) sent to /v1/completions with streaming,
greedy, GEN tokens past end-of-generation, ROUNDS times; prints one line
a task, "NAME TOKENS_PER_S" (the best round's generation speed, timed as
bench-serve.py times one stream: tokens after the first over the time
from the first to the last) and the text of the first round on stderr's
last line for a check that speculation changed nothing.

    python3 bench/bench-spec-serve.py URL --gen 256 --rounds 3 NAME=FILE...

Standard library only; the streaming client is bench-serve.py's.
"""
import argparse
import importlib.util
import json
import sys
from pathlib import Path

spec = importlib.util.spec_from_file_location("bench_serve", Path(__file__).with_name("bench-serve.py"))
bs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bs)


def text_of(url, prompt, gen):
    """The completion's text (not streamed), for the check."""
    import http.client
    import urllib.parse
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    body = json.dumps({"prompt": prompt, "max_tokens": gen, "temperature": 0, "ignore_eos": True})
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = json.loads(conn.getresponse().read())
    conn.close()
    return r["choices"][0]["text"]


def main():
    a = argparse.ArgumentParser()
    a.add_argument("url")
    a.add_argument("--gen", type=int, default=256)
    a.add_argument("--rounds", type=int, default=3)
    a.add_argument("tasks", nargs="+")
    o = a.parse_args()
    bs.stream(o.url, "Hello", 8)  # warm up: the weights' pages, the threads
    texts = {}
    for t in o.tasks:
        name, path = t.split("=", 1)
        prompt = Path(path).read_text()
        best = 0.0
        for _ in range(o.rounds):
            _, arrivals, usage = bs.stream(o.url, prompt, o.gen)
            best = max(best, bs.decode_tps(arrivals, usage))
        texts[name] = text_of(o.url, prompt, o.gen)
        print("%s %.2f" % (name, best))
        sys.stdout.flush()
    print(json.dumps(texts), file=sys.stderr)


if __name__ == "__main__":
    main()
