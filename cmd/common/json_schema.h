/* json_schema.h - a JSON Schema as a GBNF grammar whose texts are JSON
 * values the schema accepts (ml-run's --json-schema, ml-serve's
 * response_format json_schema and tools).  The keywords are those of
 * llama.cpp's json-schema-to-grammar; a keyword, or a use of one, that a
 * grammar cannot guarantee is refused by name, never ignored.
 *
 * Taken: type (a name or a list), const, enum, anyOf, oneOf (when no
 * value can match two alternatives: a grammar cannot keep "exactly
 * one"), allOf (objects merged, enums intersected), $ref ("#/..." pointers into the same document, with
 * $defs and definitions), properties, required, additionalProperties (a
 * boolean or a schema), items, prefixItems, minItems, maxItems,
 * minLength, maxLength, pattern (an ECMA-262 subset anchored with ^ and
 * $), format (date, time, date-time, uuid), and the minimum, maximum,
 * exclusiveMinimum and exclusiveMaximum of an integer or a number (whose
 * fractional bounds are rounded inward to integers); the annotations title,
 * description, default, examples, deprecated, readOnly, writeOnly,
 * $schema, $id, $comment.
 *
 * Texts are stricter than the schema where that keeps them short and
 * sure: no white space but one optional space between tokens, optional
 * properties in the schema's order, extra keys and length-bounded strings
 * without \u escapes, dates without 29 February, integers without a
 * bound at most 16 digits long, bounded numbers without an exponent. */
#ifndef MLCORE_CLI_JSON_SCHEMA_H
#define MLCORE_CLI_JSON_SCHEMA_H

#include <jansson.h>

/* Caps: nesting of the schema, rules made from it. */
#define JSON_SCHEMA_MAX_DEPTH 64
#define JSON_SCHEMA_MAX_RULES 4096

typedef enum json_schema_status {
    JSON_SCHEMA_OK = 0,
    JSON_SCHEMA_INVALID,     /* not a schema: a bad value, a $ref to nothing */
    JSON_SCHEMA_UNSUPPORTED, /* a keyword, or a use of one, not taken here */
    JSON_SCHEMA_NOMEM,
} json_schema_status;

/* message: "#/properties/a/pattern: ..." - the JSON pointer of the
 * keyword at fault (or of the schema), then what is wrong, naming it. */
typedef struct json_schema_error {
    json_schema_status status;
    char message[400];
} json_schema_error;

/* The whole grammar of schema (NULL or true: any JSON value), its start
 * rule "root": the value with no white space around it.  A new
 * NUL-terminated text (free it), or NULL with e filled. */
char *json_schema_grammar(const json_t *schema, json_schema_error *e);

/* The rules alone, to be combined with others in one grammar (one schema
 * per tool, say): the value's rule is named root_name, every other rule's
 * name starts with prefix, so that schemas given different prefixes never
 * share a name.  Names are letters, digits, '-' and '_'; root_name must
 * not be one this makes (prefix then "r" and digits, or one of the
 * shared rules: ws, string, char, kchar, schar, hex, integer, number, boolean,
 * null, value, object, array).  As json_schema_grammar otherwise. */
char *json_schema_rules(const json_t *schema, const char *root_name, const char *prefix,
                        json_schema_error *e);

#endif
