"""json-schema-examples.py - make check-json-schema, first step: the texts
tests/unit/check_json_schema.c says each schema's grammar accepts are
checked with the jsonschema package (draft 2020-12, formats too), so that
the unit suite's examples rest on the reference, not on a reading of the
standard.  Texts the grammar refuses may still be valid (the grammar is
stricter than the schema: extra keys, escapes, optional white space);
those are counted, not failed.  Usage: json-schema-examples.py"""
import json
import os
import re
import sys

import jsonschema

CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER


def literal(token):
    """A C string literal's text (the escapes the suite uses)."""
    out, i, body = [], 0, token[1:-1]
    while i < len(body):
        c = body[i]
        if c == "\\":
            i += 1
            c = {"n": "\n", "t": "\t", "r": "\r"}.get(body[i], body[i])
        out.append(c)
        i += 1
    return "".join(out)


def cases(source):
    """(schema, accepted texts, refused texts) of each TEXTS(...) call."""
    for m in re.finditer(r"TEXTS\((\".*?)\);", source, re.S):
        args, cur = [], None
        for tok in re.findall(r'"(?:[^"\\]|\\.)*"|NULL|,', m.group(1)):
            if tok == ",":
                if cur is not None:
                    args.append(cur)
                cur = None
            elif tok == "NULL":
                args.append(None)
            else:
                cur = literal(tok) if cur is None else cur + literal(tok)
        if cur is not None:
            args.append(cur)
        split = args.index(None)
        yield json.loads(args[0]), args[1:split], args[split + 1:]


def valid(schema, text):
    try:
        jsonschema.validate(json.loads(text), schema, format_checker=CHECKER)
        return True
    except (json.JSONDecodeError, jsonschema.ValidationError):
        return False


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "../unit/check_json_schema.c"), encoding="utf-8") as f:
        source = f.read()
    n_schemas = n_ok = stricter = 0
    bad = []
    for schema, accepted, refused in cases(source):
        if isinstance(schema.get("items"), list):
            continue  # draft 7's tuple form, not a 2020-12 schema
        n_schemas += 1
        for text in accepted:
            if valid(schema, text):
                n_ok += 1
            else:
                bad.append((schema, text))
        stricter += sum(valid(schema, t) for t in refused)
    for schema, text in bad:
        print(f"accepted by the grammar, invalid for jsonschema: {json.dumps(schema)}: {text}")
    print(f"json-schema-examples: {n_ok} accepted texts over {n_schemas} schemas valid "
          f"({stricter} refused texts are valid: the grammar is stricter there)")
    sys.exit(1 if bad or not n_ok else 0)


if __name__ == "__main__":
    main()
