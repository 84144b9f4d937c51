#!/usr/bin/env python3
"""bench-chat.py - the reference side of bench-chat.sh: a conversation
(a JSON object of variables: messages, add_generation_prompt, bos_token,
eos_token) rendered by Python jinja2 with transformers' settings
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks) and encoded by
the tokenizers package without special tokens added, as transformers'
apply_chat_template(tokenize=True) does.  Prints
"best_seconds first_seconds n_ids fnv1a".

    bench-chat.py TOKENIZER.json TEMPLATE.jinja VARS.json RUNS
"""
import json
import sys
import time

import jinja2.sandbox
from tokenizers import Tokenizer


def main(argv):
    tok = Tokenizer.from_file(argv[1])
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    with open(argv[2], encoding="utf-8") as f:
        tpl = env.from_string(f.read())
    with open(argv[3], encoding="utf-8") as f:
        variables = json.load(f)
    best, first, ids = 1e9, 0.0, []
    for r in range(int(argv[4])):
        t0 = time.perf_counter()
        text = tpl.render(**variables)
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
