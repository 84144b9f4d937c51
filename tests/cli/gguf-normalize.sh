#!/usr/bin/env bash
# gguf-normalize.sh - reads mlb-info --json --arrays of one GGUF on stdin
# (or the same shape made from gguf_dump by tools/gguf-dump-reference.py)
# and writes gguf-normalize.jq's lines, with the values of an array of more
# than 16 leaves replaced by the SHA-256 of their JSON (as jq writes it),
# so the committed expectations stay small.  Both sides go through this
# same jq, so its way of writing numbers and strings cancels out.
set -euo pipefail
jq -r -f "$(dirname "$0")/gguf-normalize.jq" |
    awk -F'\t' -v OFS='\t' '
        $1 == "kv" && NF == 6 && $5 > 16 {
            printf "%s\t%s\t%s\t%s\t%s\tsha256:", $1, $2, $3, $4, $5
            fflush()
            print $6 | "sha256sum | cut -c1-64"
            close("sha256sum | cut -c1-64")
            next
        }
        { print }'
