/* json_schema_pattern.h - the strings a JSON Schema "pattern" matches,
 * as GBNF (json_schema.c's string rules).  Taken: literals, escapes (\n
 * \t \r \f \v \0 \xHH \uHHHH, \d \w \s and their negations), classes
 * [...] and [^...], ".", groups (...) and (?:...), alternation, ?, *, +,
 * {m}, {m,}, {m,n} (lazy or not).  Refused: a pattern not anchored with ^
 * and $ (one that may match inside the string), anchors inside it,
 * lookarounds, named groups, back references, \b, repetitions above
 * 2000.  The grammar matches the string whole, so it is stricter than
 * ^a|b$ (which matches strings that start with a), never looser. */
#ifndef MLCORE_CLI_JSON_SCHEMA_PATTERN_H
#define MLCORE_CLI_JSON_SCHEMA_PATTERN_H

#include <stddef.h>
#include <stdio.h>

/* Writes to out a GBNF sequence for the JSON texts (quotes included) of
 * the strings pattern matches.  Returns 0, or -1 with why (a message
 * naming what is wrong and where in the pattern) and *unsupported (1: a
 * feature not taken here; 0: not a regular expression). */
int json_schema_pattern(FILE *out, const char *pattern, char *why, size_t why_size,
                        int *unsupported);

#endif
