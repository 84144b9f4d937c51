/* schema.c - JSON Schema to GBNF (schema.h).  Each subschema becomes a
 * rule; objects list their properties in the schema's order, the
 * required ones always and the optional ones as any subset in order;
 * white space between tokens is at most one space, so that a constrained
 * text stays short and ends. */
#include "schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The rules every grammar starts with. */
static const char BASE[] =
    "ws ::= \" \"?\n"
    "string ::= \"\\\"\" char* \"\\\"\"\n"
    "char ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" hex hex hex hex)\n"
    "hex ::= [0-9a-fA-F]\n"
    "integer ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15})\n"
    "number ::= integer (\".\" [0-9]{1,15})? ([eE] [-+]? [0-9]{1,3})?\n"
    "boolean ::= \"true\" | \"false\"\n"
    "null ::= \"null\"\n"
    "value ::= object | array | string | number | boolean | null\n"
    "object ::= \"{\" ws (string ws \":\" ws value (ws \",\" ws string ws \":\" ws value)*)? ws \"}\"\n"
    "array ::= \"[\" ws (value (ws \",\" ws value)*)? ws \"]\"\n";

/* The keywords a schema may use here; any other is refused by name. */
static const char *const KNOWN[] = {
    "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
    "enum", "const", "anyOf", "oneOf", "$ref", "$defs", "definitions", "minLength",
    "maxLength", "title", "description", "$schema", "$id", "$comment", "default", "examples"};

typedef struct gen {
    FILE *out;
    const json_t *root;
    json_t *refs;        /* "$ref" text -> its rule's number */
    unsigned n_rules;
    srv_error *e;
    const char *param;   /* the request field the schema came in */
} gen;

static int fail(gen *g, const char *fmt, const char *what)
{
    char msg[200];
    snprintf(msg, sizeof msg, fmt, what);
    return srv_fail(g->e, 400, "invalid_request_error", g->param, "invalid_schema",
                    "Invalid value for '%s': json_schema: %s", g->param, msg);
}

static int new_rule(gen *g, unsigned *id)
{
    if (g->n_rules >= SRV_SCHEMA_MAX_RULES)
        return fail(g, "%s", "the schema needs too many rules");
    *id = g->n_rules++;
    return 0;
}

/* A GBNF literal of the JSON text of v (compact). */
static int literal(gen *g, const json_t *v)
{
    char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!t)
        return srv_fail(g->e, 500, "server_error", NULL, NULL, "Out of memory.");
    fputc('"', g->out);
    for (const char *p = t; *p; p++) {
        if (*p == '"' || *p == '\\')
            fputc('\\', g->out);
        fputc(*p, g->out);
    }
    fputc('"', g->out);
    free(t);
    return 0;
}

static int rule(gen *g, const json_t *s, int depth, unsigned *id);

/* Each keyword of s known here. */
static int check_keywords(gen *g, const json_t *s)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)s, key, v) {
        size_t i = 0;
        while (i < sizeof KNOWN / sizeof *KNOWN && strcmp(KNOWN[i], key))
            i++;
        if (i == sizeof KNOWN / sizeof *KNOWN)
            return fail(g, "the keyword '%.64s' is not supported", key);
    }
    return 0;
}

/* A non-negative integer keyword, at most max; -1 when absent. */
static int bound(gen *g, const json_t *s, const char *name, json_int_t max, json_int_t *out)
{
    json_t *v = json_object_get(s, name);
    *out = -1;
    if (!v)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max)
        return fail(g, "'%s' must be an integer from 0 to 2000", name);
    *out = json_integer_value(v);
    return 0;
}

/* "{m,n}" for a repetition of at least lo and at most hi (-1: no end). */
static void repeat(gen *g, json_int_t lo, json_int_t hi)
{
    if (hi < 0)
        fprintf(g->out, "{%lld,}", (long long)lo);
    else
        fprintf(g->out, "{%lld,%lld}", (long long)lo, (long long)hi);
}

static int string_rule(gen *g, const json_t *s)
{
    json_int_t lo, hi;
    if (bound(g, s, "minLength", 2000, &lo) || bound(g, s, "maxLength", 2000, &hi))
        return -1;
    if (lo < 0 && hi < 0) {
        fputs("string", g->out);
        return 0;
    }
    fputs("\"\\\"\" char", g->out);
    repeat(g, lo < 0 ? 0 : lo, hi);
    fputs(" \"\\\"\"", g->out);
    return 0;
}

/* An array rule, its items' rule made first (rules are written whole). */
static int array_rule(gen *g, const json_t *s, int depth, unsigned id)
{
    json_int_t lo, hi;
    unsigned item;
    json_t *items = json_object_get(s, "items");
    if (bound(g, s, "minItems", 2000, &lo) || bound(g, s, "maxItems", 2000, &hi))
        return -1;
    lo = lo < 0 ? 0 : lo;
    if (hi >= 0 && hi < lo)
        return fail(g, "%s", "'maxItems' is below 'minItems'");
    if (items && !json_is_object(items) && !json_is_true(items))
        return fail(g, "%s", "'items' must be a schema");
    if (rule(g, items, depth + 1, &item))
        return -1;
    if (hi == 0) {
        fprintf(g->out, "r%u ::= \"[\" ws \"]\"\n", id);
        return 0;
    }
    fprintf(g->out, "r%u ::= \"[\" ws %sr%u (ws \",\" ws r%u)", id, lo ? "" : "(", item, item);
    repeat(g, lo ? lo - 1 : 0, hi < 0 ? -1 : hi - 1);
    fputs(lo ? " ws \"]\"\n" : ")? ws \"]\"\n", g->out);
    return 0;
}

/* Properties k..n-1 of names/rules as any subset in order, the first
 * without a comma: c_k ::= kv_k ("," c_k+1)? | c_k+1.  Returns the rule
 * of c_k through *id. */
static int optional_chain(gen *g, const char *const *names, const unsigned *rules, size_t k,
                          size_t n, unsigned *id)
{
    unsigned next = 0;
    if (k + 1 < n && optional_chain(g, names, rules, k + 1, n, &next))
        return -1;
    if (new_rule(g, id))
        return -1;
    fprintf(g->out, "r%u ::= ", *id);
    json_t *key = json_string(names[k]);
    int bad = !key || literal(g, key);
    json_decref(key);
    if (bad)
        return -1;
    fprintf(g->out, " ws \":\" ws r%u", rules[k]);
    if (k + 1 < n)
        fprintf(g->out, " (ws \",\" ws r%u)? | r%u", next, next);
    fputc('\n', g->out);
    return 0;
}

/* One "key": value pair of a property into the current rule. */
static int pair(gen *g, const char *name, unsigned value)
{
    json_t *key = json_string(name);
    int bad = !key || literal(g, key);
    json_decref(key);
    if (!bad)
        fprintf(g->out, " ws \":\" ws r%u", value);
    return bad ? -1 : 0;
}

static int object_rule(gen *g, const json_t *s, int depth, unsigned id)
{
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    json_t *extra = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props))
        return fail(g, "%s", "'properties' must be an object");
    if (req && !json_is_array(req))
        return fail(g, "%s", "'required' must be an array of names");
    size_t n = json_object_size(props), n_req = 0, n_opt = 0;
    for (size_t i = 0; i < json_array_size(req); i++) {
        json_t *name = json_array_get(req, i);
        if (!json_is_string(name))
            return fail(g, "%s", "'required' must be an array of names");
        if (!json_object_get(props, json_string_value(name)))
            return fail(g, "'required' names '%.64s', which is not among the properties",
                        json_string_value(name));
    }
    if (!n) { /* a map: any keys, values as additionalProperties says */
        unsigned v;
        if (json_is_object(extra) ? rule(g, extra, depth + 1, &v) : (v = 0, 0))
            return -1;
        if (json_is_false(extra))
            fprintf(g->out, "r%u ::= \"{\" ws \"}\"\n", id);
        else if (!json_is_object(extra))
            fprintf(g->out, "r%u ::= object\n", id);
        else
            fprintf(g->out, "r%u ::= \"{\" ws (string ws \":\" ws r%u (ws \",\" ws string ws \":\" "
                            "ws r%u)*)? ws \"}\"\n", id, v, v);
        return 0;
    }
    const char **names = calloc(2 * n, sizeof *names);
    unsigned *rules = calloc(2 * n, sizeof *rules);
    const char *key;
    json_t *v;
    int rc = names && rules ? 0 : srv_fail(g->e, 500, "server_error", NULL, NULL, "Out of memory.");
    json_object_foreach(props, key, v) {
        int required = 0;
        for (size_t i = 0; i < json_array_size(req); i++)
            required |= json_is_string(json_array_get(req, i)) &&
                        !strcmp(json_string_value(json_array_get(req, i)), key);
        size_t at = required ? n_req++ : n + n_opt++;
        if (rc || (rc = rule(g, v, depth + 1, &rules[at])))
            break;
        names[at] = key;
    }
    unsigned chain = 0;
    if (!rc && n_opt)
        rc = optional_chain(g, names + n, rules + n, 0, n_opt, &chain);
    if (!rc) {
        fprintf(g->out, "r%u ::= \"{\" ws ", id);
        for (size_t i = 0; !rc && i < n_req; i++) {
            fputs(i ? " ws \",\" ws " : "", g->out);
            rc = pair(g, names[i], rules[i]);
        }
        if (n_opt)
            fprintf(g->out, n_req ? " (ws \",\" ws r%u)?" : "r%u?", chain);
        fputs(" ws \"}\"\n", g->out);
    }
    free(names);
    free(rules);
    return rc;
}

/* The alternatives of anyOf/oneOf, or of enum's values. */
static int alternatives(gen *g, const json_t *list, int depth, int values, unsigned id)
{
    if (!json_is_array(list) || !json_array_size(list))
        return fail(g, "%s", "anyOf, oneOf and enum must be non-empty arrays");
    unsigned *alt = calloc(json_array_size(list), sizeof *alt);
    if (!alt)
        return srv_fail(g->e, 500, "server_error", NULL, NULL, "Out of memory.");
    int rc = 0;
    for (size_t i = 0; !values && !rc && i < json_array_size(list); i++)
        rc = rule(g, json_array_get(list, i), depth + 1, &alt[i]);
    if (!rc) {
        fprintf(g->out, "r%u ::= ", id);
        for (size_t i = 0; !rc && i < json_array_size(list); i++) {
            fputs(i ? " | " : "", g->out);
            if (values)
                rc = literal(g, json_array_get(list, i));
            else
                fprintf(g->out, "r%u", alt[i]);
        }
        fputc('\n', g->out);
    }
    free(alt);
    return rc;
}

/* A value of one type name. */
static int typed(gen *g, const json_t *s, const char *type, int depth, unsigned id)
{
    if (!strcmp(type, "object"))
        return object_rule(g, s, depth, id);
    if (!strcmp(type, "array"))
        return array_rule(g, s, depth, id);
    fprintf(g->out, "r%u ::= ", id);
    int rc = 0;
    if (!strcmp(type, "string"))
        rc = string_rule(g, s);
    else if (!strcmp(type, "integer") || !strcmp(type, "number") || !strcmp(type, "boolean") ||
             !strcmp(type, "null"))
        fputs(type, g->out);
    else
        return fail(g, "the type '%.32s' is not a JSON Schema type", type);
    fputc('\n', g->out);
    return rc;
}

/* $ref to "#/$defs/NAME" or "#/definitions/NAME": one rule per target,
 * made once (a recursive schema refers to its own rule). */
static int ref_rule(gen *g, const char *ref, int depth, unsigned *id)
{
    json_t *known = json_object_get(g->refs, ref);
    if (known) {
        *id = (unsigned)json_integer_value(known);
        return 0;
    }
    const char *name = !strncmp(ref, "#/$defs/", 8) ? ref + 8
                       : !strncmp(ref, "#/definitions/", 14) ? ref + 14 : NULL;
    json_t *defs = json_object_get(g->root, ref[2] == '$' ? "$defs" : "definitions");
    json_t *target = name ? json_object_get(defs, name) : NULL;
    if (!target)
        return fail(g, "the $ref '%.64s' names no definition of this schema", ref);
    unsigned inner;
    if (new_rule(g, id) || json_object_set_new(g->refs, ref, json_integer(*id)) ||
        rule(g, target, depth + 1, &inner))
        return -1;
    fprintf(g->out, "r%u ::= r%u\n", *id, inner);
    return 0;
}

/* The rule of schema s (NULL or {}: any JSON value) into *id. */
static int rule(gen *g, const json_t *s, int depth, unsigned *id)
{
    if (depth > SRV_SCHEMA_MAX_DEPTH)
        return fail(g, "%s", "the schema nests too deep");
    if (s && json_is_true(s))
        s = NULL;
    if (s && !json_is_object(s))
        return fail(g, "%s", "a schema must be an object");
    if (s && check_keywords(g, s))
        return -1;
    json_t *type = s ? json_object_get(s, "type") : NULL, *ref = s ? json_object_get(s, "$ref") : NULL;
    if (ref)
        return json_is_string(ref) ? ref_rule(g, json_string_value(ref), depth, id)
                                   : fail(g, "%s", "'$ref' must be a string");
    if (new_rule(g, id))
        return -1;
    if (s && json_object_get(s, "const")) {
        fprintf(g->out, "r%u ::= ", *id);
        int rc = literal(g, json_object_get(s, "const"));
        fputc('\n', g->out);
        return rc;
    }
    if (s && json_object_get(s, "enum"))
        return alternatives(g, json_object_get(s, "enum"), depth, 1, *id);
    json_t *any = s ? json_object_get(s, "anyOf") : NULL;
    if (s && (any || json_object_get(s, "oneOf")))
        return alternatives(g, any ? any : json_object_get(s, "oneOf"), depth, 0, *id);
    if (json_is_string(type))
        return typed(g, s, json_string_value(type), depth, *id);
    if (json_is_array(type) && json_array_size(type)) { /* one of several types */
        json_t *one = json_deep_copy(s), *types = json_array();
        size_t i;
        json_t *t;
        int rc = one && types ? 0 : srv_fail(g->e, 500, "server_error", NULL, NULL, "Out of memory.");
        json_array_foreach(type, i, t) {
            if (rc || !json_is_string(t) || json_object_set(one, "type", t) ||
                json_array_append(types, one)) {
                rc = rc ? rc : fail(g, "%s", "'type' must name types");
                break;
            }
            json_decref(one);
            one = json_deep_copy(s);
        }
        if (!rc)
            rc = alternatives(g, types, depth, 0, *id);
        json_decref(one);
        json_decref(types);
        return rc;
    }
    if (type)
        return fail(g, "%s", "'type' must be a type name or a list of them");
    if (s && json_object_get(s, "properties"))
        return object_rule(g, s, depth, *id);
    fprintf(g->out, "r%u ::= value\n", *id);
    return 0;
}

char *srv_schema_rules(const json_t *const *schemas, size_t n, const char *param, srv_error *e)
{
    char *text = NULL;
    size_t len = 0;
    gen g = {open_memstream(&text, &len), NULL, NULL, 0, e, param};
    int rc = g.out ? 0 : srv_fail(e, 500, "server_error", NULL, NULL, "Out of memory.");
    if (!rc)
        fputs(BASE, g.out);
    for (size_t i = 0; i < n && !rc; i++) {
        unsigned id = 0;
        g.root = schemas[i];
        if (!(g.refs = json_object())) /* "#/$defs/..." names this schema's */
            rc = srv_fail(e, 500, "server_error", NULL, NULL, "Out of memory.");
        if (!rc && !(rc = rule(&g, schemas[i], 0, &id)))
            fprintf(g.out, "schema%zu ::= r%u\n", i, id);
        json_decref(g.refs);
    }
    if (g.out && fclose(g.out) && !rc)
        rc = srv_fail(e, 500, "server_error", NULL, NULL, "Out of memory.");
    if (rc) {
        free(text);
        return NULL;
    }
    return text;
}

char *srv_schema_grammar(const json_t *schema, srv_error *e)
{
    char *rules = srv_schema_rules(&schema, 1, "response_format", e);
    size_t n = rules ? strlen(rules) : 0;
    char *text = rules ? realloc(rules, n + sizeof "root ::= schema0\n") : NULL;
    if (!text) {
        free(rules);
        if (rules)
            srv_fail(e, 500, "server_error", NULL, NULL, "Out of memory.");
        return NULL;
    }
    memcpy(text + n, "root ::= schema0\n", sizeof "root ::= schema0\n");
    return text;
}
