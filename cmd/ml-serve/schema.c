/* schema.c - a schema's grammar for a request (schema.h): the shared
 * translation, its refusal as a 400 on response_format. */
#include "schema.h"

#include <stdio.h>
#include <stdlib.h>

/* The translation's refusal as the request's error on param. */
static void refuse(const json_schema_error *err, const char *param, srv_error *e)
{
    if (err->status == JSON_SCHEMA_NOMEM)
        srv_fail(e, 500, "server_error", NULL, NULL, "Out of memory.");
    else
        srv_fail(e, 400, "invalid_request_error", param, "invalid_schema",
                 "Invalid value for '%s': json_schema: %s", param, err->message);
}

char *srv_schema_grammar(const json_t *schema, srv_error *e)
{
    json_schema_error err;
    char *text = json_schema_grammar(schema, &err);
    if (!text)
        refuse(&err, "response_format", e);
    return text;
}

char *srv_schema_rules(const json_t *const *schemas, size_t n, const char *param, srv_error *e)
{
    char *all = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&all, &len);
    int rc = f ? 0 : -1;
    json_schema_error err = {JSON_SCHEMA_NOMEM, ""};
    for (size_t i = 0; i < n && !rc; i++) {
        char root[32], prefix[32];
        snprintf(root, sizeof root, "schema%zu", i);
        snprintf(prefix, sizeof prefix, "s%zu-", i); /* no two schemas share a rule */
        char *text = json_schema_rules(schemas[i], root, prefix, &err);
        rc = text ? 0 : -1;
        if (text)
            fputs(text, f);
        free(text);
    }
    if (f && fclose(f) && !rc)
        rc = -1, err.status = JSON_SCHEMA_NOMEM;
    if (rc) {
        refuse(&err, param, e);
        free(all);
        return NULL;
    }
    return all;
}
