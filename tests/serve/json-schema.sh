#!/usr/bin/env bash
# json-schema.sh - `make check-json-schema`: ml-serve's response_format
# json_schema over tests/serve/schema-corpus.json, each answer checked
# with the jsonschema package (Debian's python3-jsonschema); before, the
# unit suite's accepted examples checked with it too.
source "$(dirname "$0")/common.sh"
python3 -c 'import jsonschema' 2>/dev/null ||
    fail_with "check-json-schema needs jsonschema: apt-get install python3-jsonschema"
python3 "$HERE/json-schema-examples.py"
start_server "$WORK/log" -m "$WORK/m.mlb" -t 1 --parallel 2 --chat-template llama2
python3 "$HERE/json-schema.py" "$URL"
stop_server
