/* schema.c - a schema's grammar for a request (schema.h): the shared
 * translation, its refusal as a 400 on response_format. */
#include "schema.h"

#include <stdlib.h>

char *srv_schema_grammar(const json_t *schema, srv_error *e)
{
    json_schema_error err;
    char *text = json_schema_grammar(schema, &err);
    if (text)
        return text;
    if (err.status == JSON_SCHEMA_NOMEM)
        srv_fail(e, 500, "server_error", NULL, NULL, "Out of memory.");
    else
        srv_fail(e, 400, "invalid_request_error", "response_format", "invalid_schema",
                 "Invalid value for 'response_format': json_schema: %s", err.message);
    return NULL;
}
