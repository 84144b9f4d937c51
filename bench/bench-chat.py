#!/usr/bin/env python3
"""bench-chat.py - the reference side of bench-chat.sh: the same 10-turn
conversation rendered by Python jinja2 with transformers' settings
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks) and encoded
by the tokenizers package without special tokens added, as
transformers' apply_chat_template(tokenize=True) does.  Prints
"best_seconds first_seconds n_ids fnv1a".

    bench-chat.py TOKENIZER.json TEMPLATE.jinja RUNS BOS_TOKEN EOS_TOKEN
"""
import sys
import time

import jinja2.sandbox
from tokenizers import Tokenizer

TURNS = [
    "Can you explain how a hash table handles collisions? I keep reading about chaining and "
    "open addressing but I am not sure when each one is the better choice.",
    "Both store keys in an array indexed by a hash. Chaining keeps a list per slot, so it "
    "degrades gracefully as the table fills; open addressing probes other slots, which is "
    "friendlier to caches but needs a lower load factor and careful deletion.",
    "What load factor would you pick for open addressing with linear probing?",
    "Around 0.7 is a common choice. Beyond that, clusters grow quickly and the expected number "
    "of probes for a miss rises sharply; Robin Hood hashing keeps the variance down.",
    "And how does Robin Hood hashing decide which entry moves?",
    "On insertion, if the new key has travelled further from its home slot than the key "
    "already there, they swap and the displaced key continues probing.",
    "Does that make lookups faster for missing keys?",
    "Yes: a lookup can stop as soon as it meets an entry closer to its home than the probe "
    "distance so far, since the key would have displaced it.",
    "Thanks. Could you summarise the trade-offs in three bullet points?",
]


def main(argv):
    tok = Tokenizer.from_file(argv[1])
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    with open(argv[2], encoding="utf-8") as f:
        tpl = env.from_string(f.read())
    msgs = [{"role": "system", "content": "You are a concise, accurate assistant."}]
    msgs += [{"role": "assistant" if i % 2 else "user", "content": t} for i, t in enumerate(TURNS)]
    best, first, ids = 1e9, 0.0, []
    for r in range(int(argv[3])):
        t0 = time.perf_counter()
        text = tpl.render(messages=msgs, add_generation_prompt=True, bos_token=argv[4],
                          eos_token=argv[5])
        ids = tok.encode(text, add_special_tokens=False).ids
        dt = time.perf_counter() - t0
        best = min(best, dt)
        first = dt if r == 0 else first
    h = 1469598103934665603
    for i in ids:
        for b in range(4):
            h = ((h ^ ((i >> (8 * b)) & 0xFF)) * 1099511628211) % (1 << 64)
    print("%.9f %.9f %d %d" % (best, first, len(ids), h))


if __name__ == "__main__":
    main(sys.argv)
