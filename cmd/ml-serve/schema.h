/* schema.h - a JSON Schema (response_format's json_schema) as a GBNF
 * grammar whose texts are exactly the JSON values the schema describes,
 * as far as the keywords it takes go; a keyword it cannot express is
 * refused by name, never ignored.  The translation is
 * cmd/common/json_schema.c's (shared with ml-run --json-schema); this is
 * its error in ml-serve's terms. */
#ifndef ML_SERVE_SCHEMA_H
#define ML_SERVE_SCHEMA_H

#include "json_schema.h"
#include "request.h"

#include <jansson.h>

/* Caps: nesting of the schema, and rules made from it. */
#define SRV_SCHEMA_MAX_DEPTH JSON_SCHEMA_MAX_DEPTH
#define SRV_SCHEMA_MAX_RULES JSON_SCHEMA_MAX_RULES

/* The grammar of schema (root: the value, no white space around it) as a
 * new NUL-terminated text (free it), or NULL with e filled (400 naming
 * the keyword and where it is, param "response_format"; 500 for memory). */
char *srv_schema_grammar(const json_t *schema, srv_error *e);
/* The rules of several schemas in one grammar text: "schemaI ::= ..." the
 * value of schemas[I] (NULL: any value), each schema's other rules apart
 * (prefix "sI-"), no root; errors as above, naming param. */
char *srv_schema_rules(const json_t *const *schemas, size_t n, const char *param, srv_error *e);

#endif
