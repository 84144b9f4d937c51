"""json-schema-reference.py - mlcore's JSON Schema translation beside
llama.cpp's (run by tools/json-schema-reference.sh, which builds the two
helpers into DIR).

1. Every schema and text of tests/unit/check_json_schema.c: the text
   matched against both grammars, with the jsonschema package (draft
   2020-12, formats) as the judge of validity.  A grammar is sound on the
   cases when it accepts no invalid text.
2. The suite's refused schemas: what llama.cpp makes of each.
3. llama.cpp's own tests/test-json-schema-to-grammar.cpp schemas: which
   each side translates, and why mlcore refuses the ones it does.

Usage: json-schema-reference.py DIR LLAMA_SRC"""
import collections
import importlib.util
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def load_examples():
    path = os.path.join(ROOT, "tests/serve/json-schema-examples.py")
    spec = importlib.util.spec_from_file_location("examples", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def grammar(cmd, schema_text):
    p = subprocess.run(cmd, input=schema_text, capture_output=True, text=True)
    if p.returncode:
        return None, (p.stderr.strip().splitlines() or ["?"])[-1]
    return p.stdout, None


def match(tool, work, text, texts):
    path = os.path.join(work, "g.gbnf")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    p = subprocess.run([tool, "match", path], input="".join(t + "\n" for t in texts),
                       capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"the matcher refused a grammar: {p.stderr}")
    return [line == "1" for line in p.stdout.split()]


def main(work, llama_src):
    ex = load_examples()
    ours_cmd = [os.path.join(work, "json-schema-reference"), "grammar"]
    llama_cmd = [os.path.join(work, "json-schema-llama")]
    tool = ours_cmd[0]
    with open(os.path.join(ROOT, "tests/unit/check_json_schema.c"), encoding="utf-8") as f:
        source = f.read()

    n = collections.Counter()
    for schema, accepted, refused in ex.cases(source):
        texts = accepted + refused
        text = json.dumps(schema)
        ours, why = grammar(ours_cmd, text)
        if ours is None:
            sys.exit(f"mlcore refused a schema of the suite: {text}: {why}")
        theirs, why = grammar(llama_cmd, text)
        n["schemas"] += 1
        if theirs is None:
            n["schemas llama.cpp refuses"] += 1
            print(f"llama.cpp refuses {text}: {why}")
            continue
        judge = not isinstance(schema.get("items"), list)  # draft 7's tuples: no 2020-12 judge
        for t, o, ll in zip(texts, match(tool, work, ours, texts), match(tool, work, theirs, texts)):
            v = ex.valid(schema, t) if judge else None
            n["texts"] += 1
            n["mlcore accepts an invalid text"] += bool(o and v is False)
            n["llama.cpp accepts an invalid text"] += bool(ll and v is False)
            if o != ll:
                who = "mlcore" if o else "llama.cpp"
                print(f"only {who} accepts ({'valid' if v else 'invalid'}): {text}  {t}")

    start = source.index("} bad[] = {")
    refusals = re.findall(r'\n        \{("(?:[^"\\]|\\.)*")', source[start:source.index("    };", start)])
    for literal in refusals:
        text = json.dumps(json.loads(ex.literal(literal)))
        theirs, why = grammar(llama_cmd, text)
        n["refused here"] += 1
        n["of those, llama.cpp makes a grammar"] += theirs is not None
        print(f"refused here, llama.cpp {'makes a grammar' if theirs else 'refuses: ' + why[:70]}: {text[:80]}")

    with open(os.path.join(llama_src, "tests/test-json-schema-to-grammar.cpp"), encoding="utf-8") as f:
        tests = re.findall(r'\{\s*(SUCCESS|FAILURE),\s*"([^"]*)",\s*R"""\((.*?)\)"""', f.read(), re.S)
    for kind, name, text in tests:
        ours, why = grammar(ours_cmd, text)
        theirs, _ = grammar(llama_cmd, text)
        n[f"llama.cpp test cases ({kind}): llama.cpp {'translates' if theirs else 'refuses'}, "
          f"mlcore {'translates' if ours else 'refuses'}"] += 1
        if theirs and not ours:
            print(f"llama.cpp test '{name}': mlcore refuses: {why}")
    print()
    for key, value in n.items():
        print(f"{value:5}  {key}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
