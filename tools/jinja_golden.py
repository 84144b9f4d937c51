#!/usr/bin/env python3
"""jinja_golden.py - the expected renders of the chat-template fixtures.

Renders every template of tests/fixtures/chat/templates/ for every
conversation of tests/fixtures/chat/conversations.json the way Hugging Face
transformers' apply_chat_template does, and writes each result to
tests/fixtures/chat/golden/<template>/<conversation>.txt, or, when jinja2
raises, the exception's class and message to .../<conversation>.err.

The environment is transformers': jinja2's ImmutableSandboxedEnvironment
with trim_blocks, lstrip_blocks and the loopcontrols extension, a
{% generation %} tag that renders its body, tojson as json.dumps with
ensure_ascii off (separators (',', ': ') with an indent), and the globals
raise_exception(msg) and strftime_now(fmt).  The variables of each
conversation (with the tokens below) go to .../vars/<conversation>.json,
which is what the C test passes to ml_jinja_render_json.  The small
templates of .../cases.txt (one per construct, filter, test, method and
error) are rendered into .../cases.golden.  strftime_now is pinned to
JINJA_GOLDEN_NOW (seconds since the epoch, formatted in UTC; default
1721995200 = 2024-07-26 12:00:00) so the output is reproducible; the C
tests pass the same time in ml_jinja_options.now.

Every conversation also gets bos_token "<s>" and eos_token "</s>".

    tools/jinja_golden.py [--check]   (--check: compare, write nothing)
"""
import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.sandbox

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "chat")
NOW = int(os.environ.get("JINJA_GOLDEN_NOW", "1721995200"))
TOKENS = {"bos_token": "<s>", "eos_token": "</s>"}


class TemplateError(Exception):
    """What raise_exception raises (transformers uses jinja2's TemplateError)."""


class Generation(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: the body, rendered as is."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    if separators is None and indent:
        separators = (",", ": ")
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def strftime_now(fmt):
    return datetime.datetime.fromtimestamp(NOW, datetime.timezone.utc).strftime(fmt)


def environment():
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, source, conv, tokens=True):
    try:
        tpl = env.from_string(source)
    except jinja2.exceptions.TemplateSyntaxError as e:
        return None, f"TemplateSyntaxError: {e.message}\n"
    try:
        return tpl.render(**(TOKENS if tokens else {}), **conv), None
    except Exception as e:  # noqa: BLE001 - the class is the result
        return None, f"{type(e).__name__}: {e}\n"


def read_cases(path):
    """cases.txt: "=== name", the template, optionally "--- vars" + JSON."""
    cases, cur, part = [], None, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("=== "):
                cur = {"name": line[4:].strip(), "t": "", "v": ""}
                cases.append(cur)
                part = "t"
            elif cur is None:
                continue  # the header comment
            elif line.rstrip("\n") == "--- vars":
                part = "v"
            else:
                cur[part] += line
    for c in cases:
        for k in ("t", "v"):
            if c[k].endswith("\n"):
                c[k] = c[k][:-1]
        if c["name"].startswith("crlf"):
            c["t"] = c["t"].replace("\n", "\r\n")
        c["v"] = c["v"] or "{}"
    return cases


def section(tag, text):
    data = text.encode("utf-8")
    return f"--- {tag} {len(data)}\n".encode() + data + b"\n"


def golden_cases(env):
    """cases.golden: each case with its template, variables and result as
    length-prefixed sections ("--- tpl N", "--- vars N", "--- out N" or
    "--- err N"), so any bytes survive."""
    out = b""
    for c in read_cases(os.path.join(ROOT, "cases.txt")):
        res, err = render(env, c["t"], {**json.loads(c["v"])}, tokens=False)
        out += f"=== {c['name']}\n".encode() + section("tpl", c["t"]) + section("vars", c["v"])
        out += section("out", res) if err is None else section("err", err.rstrip("\n"))
    return out


def main():
    check = "--check" in sys.argv[1:]
    env = environment()
    with open(os.path.join(ROOT, "conversations.json"), encoding="utf-8") as f:
        convs = json.load(f)
    names = sorted(n for n in os.listdir(os.path.join(ROOT, "templates")) if n.endswith(".jinja"))
    stale = 0
    for name in names:
        with open(os.path.join(ROOT, "templates", name), encoding="utf-8", newline="") as f:
            source = f.read()
        outdir = os.path.join(ROOT, "golden", name[: -len(".jinja")])
        os.makedirs(outdir, exist_ok=True)
        for cname, conv in convs.items():
            out, err = render(env, source, conv)
            path = os.path.join(outdir, cname + (".txt" if err is None else ".err"))
            other = os.path.join(outdir, cname + (".err" if err is None else ".txt"))
            data = (out if err is None else err).encode("utf-8")
            old = open(path, "rb").read() if os.path.exists(path) else None
            if old != data or os.path.exists(other):
                stale += 1
                if check:
                    print(f"differs: {path}")
                    continue
                with open(path, "wb") as f:
                    f.write(data)
                if os.path.exists(other):
                    os.remove(other)
    vdir = os.path.join(ROOT, "vars")
    os.makedirs(vdir, exist_ok=True)
    for cname, conv in convs.items():
        data = (json.dumps({**TOKENS, **conv}, ensure_ascii=False, indent=1) + "\n").encode("utf-8")
        path = os.path.join(vdir, cname + ".json")
        if not os.path.exists(path) or open(path, "rb").read() != data:
            stale += 1
            if not check:
                with open(path, "wb") as f:
                    f.write(data)
    data = golden_cases(env)
    path = os.path.join(ROOT, "cases.golden")
    if not os.path.exists(path) or open(path, "rb").read() != data:
        stale += 1
        if not check:
            with open(path, "wb") as f:
                f.write(data)
    print(f"{len(names)} templates x {len(convs)} conversations, {stale} changed")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
