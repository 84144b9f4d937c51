#!/usr/bin/env python3
"""bench-serve.py - the client side of bench-serve.sh: times one
OpenAI-compatible server (ml-serve or llama-server, whichever listens at
URL) the way an application uses it, over /v1/completions with streaming,
and prints one "key value" line per measure:

  single_tps     generation tokens/s of one stream: tokens after the first
                 over the time from the first to the last
  aggregate_tps  N concurrent streams: all their tokens over the wall time
                 from the requests' start to the last one's end
  ttft_ms        time to the first token of a prompt of P tokens the
                 server has not seen (so nothing of it is cached)
  sys1_ms sys2_ms  the same P-token "system prompt" twice, each followed by
                 a different short question: the second should find the
                 first's tokens in a slot and evaluate only the question

    python3 bench/bench-serve.py URL [--streams 4] [--gen 128] [--prompt 512]
        [--vocab 32000] [--seed 1]

Prompts are token ids (OpenAI's other form of "prompt"), BOS then random
ids: the bench models' vocabulary (make-bench-gguf.py) has no byte pieces,
so text would not tokenize, and ids make both servers evaluate exactly the
same tokens; the prompt's length is checked against usage.prompt_tokens.  Generation uses ignore_eos (random
weights may draw the end token) at temperature 0.  Standard library only.
"""
import argparse
import http.client
import json
import random
import sys
import threading
import time
import urllib.parse


def prompt_ids(rng, n, vocab):
    """n token ids, BOS (1) first, the rest random normal tokens."""
    return [1] + [rng.randrange(3, vocab) for _ in range(n - 1)]


def stream(url, prompt, max_tokens):
    """One streamed completion: (send time, [arrival time of each text
    chunk], usage or None)."""
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                       "ignore_eos": True, "stream": True,
                       "stream_options": {"include_usage": True}})
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise SystemExit("bench-serve.py: %s: HTTP %d: %s" % (url, resp.status, resp.read()[:300]))
    arrivals, usage = [], None
    for raw in resp:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if chunk.get("usage"):
            usage = chunk["usage"]
        for c in chunk.get("choices") or []:
            if c.get("text"):
                arrivals.append(time.perf_counter())
    conn.close()
    return t0, arrivals, usage


def decode_tps(arrivals, usage):
    """Tokens after the first chunk's over the time from it to the last
    (usage's count: a server may send two tokens in one chunk)."""
    n = usage["completion_tokens"] if usage else len(arrivals)
    return (n - 1) / (arrivals[-1] - arrivals[0])


def concurrent(url, prompts, max_tokens):
    """All prompts at once; (total tokens, wall seconds)."""
    out = [None] * len(prompts)

    def one(i):
        out[i] = stream(url, prompts[i], max_tokens)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    n = sum(r[2]["completion_tokens"] if r[2] else len(r[1]) for r in out)
    return n, wall


def ttft_ms(url, prompt, want_tokens):
    t0, arrivals, usage = stream(url, prompt, 1)
    if usage and want_tokens and usage["prompt_tokens"] != want_tokens:
        raise SystemExit("bench-serve.py: %s: the prompt is %d tokens, not %d"
                         % (url, usage["prompt_tokens"], want_tokens))
    return 1000 * (arrivals[0] - t0)


def main():
    a = argparse.ArgumentParser()
    a.add_argument("url")
    a.add_argument("--streams", type=int, default=4)
    a.add_argument("--gen", type=int, default=128)
    a.add_argument("--prompt", type=int, default=512)
    a.add_argument("--vocab", type=int, default=32000)
    a.add_argument("--seed", type=int, default=1)
    o = a.parse_args()
    rng = random.Random(o.seed)
    # Warm up (the weights' pages, the threads); not measured.
    stream(o.url, prompt_ids(rng, 4, o.vocab), 8)
    _, arrivals, usage = stream(o.url, prompt_ids(rng, 4, o.vocab), o.gen)
    print("single_tps %.2f" % decode_tps(arrivals, usage))
    n, wall = concurrent(o.url, [prompt_ids(rng, 4, o.vocab) for _ in range(o.streams)], o.gen)
    print("aggregate_tps %.2f" % (n / wall))
    print("ttft_ms %.1f" % ttft_ms(o.url, prompt_ids(rng, o.prompt, o.vocab), o.prompt))
    system = prompt_ids(rng, o.prompt, o.vocab)
    tail = [rng.randrange(3, o.vocab) for _ in range(8)]
    print("sys1_ms %.1f" % ttft_ms(o.url, system + tail, o.prompt + 8))
    tail = [rng.randrange(3, o.vocab) for _ in range(8)]
    print("sys2_ms %.1f" % ttft_ms(o.url, system + tail, o.prompt + 8))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
