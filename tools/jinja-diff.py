#!/usr/bin/env python3
"""jinja-diff.py - random templates rendered by Python jinja2 and by
libmlcore's interpreter, compared.

Three generators, each aimed at one part of the interpreter:

  whitespace   text, tags and whitespace signs (- +) mixed with ASCII and
               Unicode spaces: trim_blocks, lstrip_blocks, raw, comments
  expressions  {{ expr }} built from literals, variables, operators,
               filters, tests, methods, slices and conditionals
  statements   loops, ifs, sets, namespaces, macros, break and continue
               over a chat's messages, with whitespace control

jinja2 is set up as tools/jinja_golden.py sets it up (transformers'
environment).  A case counts as equal when both render the same bytes or
both fail.  Differences are printed (at most --show); the exit status is 1
when any was found.  The differences expected from the interpreter's
documented limits (tests/fixtures/chat/README.md: lazy generators,
constant folding) show up in the expressions generator only.

    tools/jinja-diff.py [--build build] [--seed N] [--count N] [--show N]
                        [whitespace|expressions|statements ...]
"""
import argparse
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jinja_golden  # noqa: E402

VARS = {
    "v": {"a": 1, "b": [1, 2], "l": "xyz"}, "w": 2.5,
    "messages": [
        {"role": "system", "content": "S"}, {"role": "user", "content": "U1"},
        {"role": "assistant", "content": "A1",
         "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]},
        {"role": "user", "content": "U2"}],
    "add_generation_prompt": True, "tools": [{"function": {"name": "f"}}],
}


def gen_whitespace(rng):
    ws = [" ", "  ", "\n", "\t", "\n  ", " \n", "\n\n", "", "", "x", "ab", " y ", "\r\n",
          "\u3000", "\xa0", "\u2028 ", "\x85", "\x1c", "\u200b"]
    tags = ["{% if true %}", "{% endif %}", "{%- if true %}", "{% if true -%}", "{%- endif -%}",
            "{%+ if true %}", "{% if true +%}", "{{ 1 }}", "{{- 2 }}", "{{ 3 -}}", "{{- 4 -}}",
            "{# c #}", "{#- c #}", "{# c -#}", "{#- c -#}", "{# c +#}", "{% raw %}r{% endraw %}",
            "{%- raw -%} R {%- endraw -%}", "{% for i in [1,2] %}", "{% endfor %}",
            "{% set v = 1 %}", "{%- set w = 2 -%}"]
    return "".join(rng.choice(ws) + rng.choice(tags) for _ in range(rng.randint(1, 12)))


ATOMS = ["0", "1", "-3", "7", "2.5", "0.1", "1e3", "'abc'", "'a b  c'", "'Hé llo'", "''", "'x,y,,z'",
         "' pad '", "none", "true", "false", "[1, 2, 3]", "['b', 'a', 'C']", "[]",
         "{'k': 1, 'j': 'v'}", "{}", "(1, 2)", "v", "v.a", "v['b']", "v.l", "w", "messages",
         "messages[0]", "'%s'", "'{}'", "3.0", "'10'", "'1.5'"]
BINOPS = ["+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", ">", "<=", ">=", "in", "not in",
          "and", "or"]
FILTERS = ["length", "upper", "lower", "title", "capitalize", "trim", "first", "last", "list", "string",
           "int", "float", "abs", "round", "reverse", "sort", "unique", "tojson", "tojson(indent=2)",
           "join(',')", "join", "default('D')", "default('D', true)", "items", "dictsort", "wordcount",
           "replace('a', 'X')", "indent(2)", "indent(2, true)", "e", "safe", "map('upper')",
           "select('odd')", "reject('none')", "selectattr('role', 'eq', 'user')",
           "map(attribute='role')", "count", "sum", "min", "max", "round(1)", "int(5)",
           "sort(reverse=true)", "batch(2)"]
TESTS = ["defined", "undefined", "none", "string", "number", "integer", "float", "mapping", "iterable",
         "sequence", "odd", "even", "divisibleby 2", "eq 1", "in [1, 2]", "boolean", "true", "false",
         "callable", "lower", "upper", "gt 1"]
METHODS = ["strip()", "strip('a')", "split()", "split(',')", "split(',', 1)", "rsplit(',', 1)",
           "upper()", "lower()", "title()", "startswith('a')", "endswith(('c', 'x'))",
           "replace('b', 'Y')", "find('b')", "rfind('l')", "count('l')", "splitlines()", "isdigit()",
           "isalpha()", "get('k')", "get('z', 0)", "items()", "keys()", "values()", "index(2)",
           "format(1, 2)", "capitalize()", "lstrip()", "rstrip()", "join(['p', 'q'])", "isspace()",
           "count(1)"]


def expr(rng, d=0):
    r = rng.random()
    if d > 3 or r < 0.3:
        return rng.choice(ATOMS)
    if r < 0.5:
        return f"({expr(rng, d + 1)} {rng.choice(BINOPS)} {expr(rng, d + 1)})"
    if r < 0.65:
        return f"{expr(rng, d + 1)} | {rng.choice(FILTERS)}"
    if r < 0.72:
        return f"({expr(rng, d + 1)} is {rng.choice(['', 'not '])}{rng.choice(TESTS)})"
    if r < 0.82:
        return f"({expr(rng, d + 1)}).{rng.choice(METHODS)}"
    if r < 0.88:
        a = [rng.choice(["", "-1", "1", "2", "-2", "5"]) for _ in range(3)]
        return f"({expr(rng, d + 1)})[{a[0]}:{a[1]}" + (f":{a[2]}" if rng.random() < 0.5 else "") + "]"
    if r < 0.93:
        return f"({expr(rng, d + 1)})[{rng.choice(['0', '-1', repr('k'), '1', repr('a')])}]"
    if r < 0.97:
        return f"({expr(rng, d + 1)} if {expr(rng, d + 1)} else {expr(rng, d + 1)})"
    return "not " + expr(rng, d + 1)


def gen_expressions(rng):
    return "{{ " + expr(rng) + " }}"


def stmt(rng, depth):
    o = lambda: "{%" + rng.choice(["-", "", ""]) + " "  # noqa: E731
    c = lambda: " " + rng.choice(["-", "", ""]) + "%}"  # noqa: E731
    w = lambda: rng.choice(["", "", " ", "\n", "\n  ", "  "])  # noqa: E731
    body = lambda: "".join(stmt(rng, depth + 1) for _ in range(rng.randint(1, 3)))  # noqa: E731
    r = rng.random()
    if depth > 2 or r < 0.25:
        return w() + rng.choice([
            "{{ m.role }}", "{{ m.content }}", "{{ loop.index }}", "{{ x }}", "{{ ns.n }}", "text",
            "{{ i }}", "{{ m.tool_calls | tojson }}", '{{- "q" -}}',
            "{{ loop.previtem.role if loop.previtem }}", "{{ mac(m.role) }}",
            '{{ loop.cycle("a", "b") }}', "{{ loop.revindex }}{{ loop.last }}"]) + w()
    if r < 0.45:
        return (o() + "for m in messages" + rng.choice(["", ' if m.role != "system"', " if m.content"])
                + c() + body() + rng.choice(["", o() + "else" + c() + "E"]) + o() + "endfor" + c())
    if r < 0.6:
        cond = rng.choice(["m is defined", "loop is defined and loop.first", "x is defined", "ns.n > 1",
                           "add_generation_prompt", "tools"])
        return (o() + "if " + cond + c() + body()
                + rng.choice(["", o() + "elif ns.n" + c() + "L", o() + "else" + c() + "F"])
                + o() + "endif" + c())
    if r < 0.75:
        return o() + rng.choice(["set x = 1", "set x = x | default(0) + 1", "set ns.n = ns.n + 1",
                                 "set x, y = 1, 2"]) + c()
    if r < 0.85:
        return (o() + "for i in range(3)" + c() + body()
                + rng.choice(["", o() + "if i == 1" + c() + o() + "break" + c() + o() + "endif" + c(),
                              o() + "continue" + c()]) + o() + "endfor" + c())
    return o() + "set x" + c() + body() + o() + "endset" + c()


def gen_statements(rng):
    return ('{% set ns = namespace(n=0) %}{% macro mac(a, b="B") %}<{{ a }}{{ b }}>{% endmacro %}'
            + "".join(stmt(rng, 0) for _ in range(rng.randint(1, 3))) + rng.choice(["", "\n", "\n\n"]))


GENERATORS = {"whitespace": gen_whitespace, "expressions": gen_expressions, "statements": gen_statements}


def run_c(batch, varsfile, templates):
    data = b"".join(struct.pack("<I", len(t.encode())) + t.encode() for t in templates)
    res = subprocess.run([batch, varsfile], input=data, stdout=subprocess.PIPE, check=True).stdout
    out, i = [], 0
    while i < len(res):
        st = res[i]
        (n,) = struct.unpack_from("<I", res, i + 1)
        out.append((st, res[i + 5:i + 5 + n]))
        i += 5 + n
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--show", type=int, default=10)
    ap.add_argument("kinds", nargs="*", default=list(GENERATORS))
    args = ap.parse_args()
    env = jinja_golden.environment()
    batch = os.path.join(args.build, "tests", "jinja-batch")
    differ = 0
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(VARS, f)
        varsfile = f.name
    try:
        for kind in args.kinds:
            rng = random.Random(args.seed)
            templates = [GENERATORS[kind](rng) for _ in range(args.count)]
            want = [jinja_golden.render(env, t, json.loads(json.dumps(VARS)), tokens=False)
                    for t in templates]
            got = run_c(batch, varsfile, templates)
            bad = 0
            for t, (res, err), (st, data) in zip(templates, want, got):
                same = (st != 0) if err is not None else (st == 0 and data == res.encode())
                if not same:
                    bad += 1
                    if bad <= args.show:
                        print(f"--- {kind}: {t!r}\n    jinja2: {err.strip() if err else repr(res)}\n"
                              f"    mlcore: {'error ' if st else ''}{data.decode(errors='replace')!r}")
            print(f"{kind}: {bad} of {len(templates)} differ")
            differ += bad
    finally:
        os.unlink(varsfile)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
