"""json-schema.py - make check-json-schema: every schema of
schema-corpus.json as a chat's response_format json_schema, six seeds
each, against ml-serve; every answer that ends (finish_reason "stop")
must validate with the jsonschema package (formats checked too), and
with these bounded schemas every answer must end.  Usage: json-schema.py BASE_URL"""
import json
import os
import sys
import urllib.request

import jsonschema


def main(base):
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "schema-corpus.json"), encoding="utf-8") as f:
        schemas = json.load(f)
    n = 0
    for i, schema in enumerate(schemas):
        jsonschema.Draft202012Validator.check_schema(schema)
        for seed in range(1, 7):
            body = {"messages": [{"role": "user", "content": "JSON, please"}], "max_tokens": 120,
                    "temperature": 1.0, "seed": seed,
                    "response_format": {"type": "json_schema",
                                        "json_schema": {"name": "t", "schema": schema,
                                                        "strict": True}}}
            req = urllib.request.Request(base + "/v1/chat/completions",
                                         data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
            choice = json.load(urllib.request.urlopen(req))["choices"][0]
            text = choice["message"]["content"]
            assert choice["finish_reason"] == "stop", (i, seed, text)
            jsonschema.validate(json.loads(text), schema,
                                format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
            n += 1
    print(f"check-json-schema: {n} answers over {len(schemas)} schemas, each valid")


if __name__ == "__main__":
    main(sys.argv[1])
