/* schema.h - a JSON Schema (response_format's json_schema) as a GBNF
 * grammar whose texts are exactly the JSON values the schema describes,
 * as far as the keywords it takes go; a keyword it cannot express is
 * refused by name, never ignored. */
#ifndef ML_SERVE_SCHEMA_H
#define ML_SERVE_SCHEMA_H

#include "request.h"

#include <jansson.h>

/* Caps: nesting of the schema, and rules made from it. */
#define SRV_SCHEMA_MAX_DEPTH 64
#define SRV_SCHEMA_MAX_RULES 4096

/* The grammar of schema (root: the value, no white space around it) as a
 * new NUL-terminated text (free it), or NULL with e filled (400 naming
 * the keyword and where it is, param "response_format"; 500 for memory). */
char *srv_schema_grammar(const json_t *schema, srv_error *e);
/* The rules of several schemas in one grammar text: the shared ones once,
 * and "schemaI ::= ..." the value of schemas[I] (NULL: any value), no
 * root; errors as above, naming param. */
char *srv_schema_rules(const json_t *const *schemas, size_t n, const char *param, srv_error *e);

#endif
