/* json_schema.c - JSON Schema to GBNF (json_schema.h).  Each subschema
 * becomes a rule, written whole once the rules it uses are; objects list
 * their properties in the schema's order, the required ones always and
 * the optional ones as any subset in order; white space between tokens
 * is at most one space, so that a constrained text stays short and ends.
 * Patterns (json_schema_pattern.c) and integer ranges (json_schema_int.c)
 * have files of their own. */
#include "json_schema.h"
#include "json_schema_int.h"
#include "json_schema_pattern.h"

#include <mlcore.h>

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The shared rules; '@' stands for the prefix. */
static const char BASE[] =
    "@ws ::= \" \"?\n"
    "@string ::= \"\\\"\" @char* \"\\\"\"\n"
    "@char ::= @kchar | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" @hex @hex @hex @hex)\n"
    "@kchar ::= [^\"\\\\\\x00-\\x1f]\n"
    "@schar ::= @kchar | \"\\\\\" [\"\\\\/bfnrt]\n"
    "@hex ::= [0-9a-fA-F]\n"
    "@integer ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15})\n"
    "@number ::= @integer (\".\" [0-9]{1,15})? ([eE] [-+]? [0-9]{1,3})?\n"
    "@boolean ::= \"true\" | \"false\"\n"
    "@null ::= \"null\"\n"
    "@value ::= @object | @array | @string | @number | @boolean | @null\n"
    "@object ::= \"{\" @ws (@string @ws \":\" @ws @value (@ws \",\" @ws @string @ws \":\" @ws "
    "@value)*)? @ws \"}\"\n"
    "@array ::= \"[\" @ws (@value (@ws \",\" @ws @value)*)? @ws \"]\"\n";
static const char *const SHARED[] = {"ws",      "string", "char",  "kchar",  "schar", "hex",
                                     "integer", "number", "boolean", "null", "value", "object",
                                     "array"};

/* The keywords taken; any other is refused by name. */
static const char *const KNOWN[] = {
    "type", "properties", "required", "additionalProperties", "items", "prefixItems", "minItems",
    "maxItems", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions",
    "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "title", "description", "$schema", "$id", "$comment", "default",
    "examples", "deprecated", "readOnly", "writeOnly"};
/* Those that say nothing about the value. */
static const char *const ANNOTATIONS[] = {"title",      "description", "$schema",  "$id",
                                          "$comment",   "default",     "examples", "$defs",
                                          "definitions", "deprecated", "readOnly", "writeOnly"};
static const char *const INT_BOUNDS[] = {"minimum", "exclusiveMinimum", "maximum",
                                         "exclusiveMaximum"};

#define PATH_MAX_LEN 160

typedef struct gen {
    FILE *out;
    const json_t *root;
    json_t *refs; /* "$ref" text -> its rule's number */
    unsigned n_rules;
    const char *prefix;
    char path[PATH_MAX_LEN]; /* JSON pointer of the schema being read */
    size_t path_len;
    json_schema_error *e;
} gen;

static int one_of(const char *key, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(list[i], key))
            return 1;
    return 0;
}
#define IN(key, list) one_of(key, list, sizeof list / sizeof *list)

/* ---- the pointer of the schema being read, for messages ---- */

static size_t push(gen *g, const char *token)
{
    size_t old = g->path_len;
    char piece[3] = "/";
    for (const char *t = token;; t++) {
        size_t n = strlen(piece);
        if (g->path_len + n >= sizeof g->path)
            break;
        memcpy(g->path + g->path_len, piece, n);
        g->path_len += n;
        if (!*t)
            break;
        piece[0] = *t == '~' || *t == '/' ? '~' : *t;
        piece[1] = *t == '~' ? '0' : *t == '/' ? '1' : 0;
    }
    g->path[g->path_len] = 0;
    return old;
}

static size_t push_index(gen *g, size_t i)
{
    char n[24];
    snprintf(n, sizeof n, "%zu", i);
    return push(g, n);
}

static void pop(gen *g, size_t old)
{
    g->path_len = old;
    g->path[old] = 0;
}

/* "#POINTER/keyword: detail" (keyword NULL: the schema itself). */
static int vfail(gen *g, json_schema_status status, const char *keyword, const char *fmt,
                 va_list ap)
{
    char detail[236];
    vsnprintf(detail, sizeof detail, fmt, ap);
    size_t old = keyword ? push(g, keyword) : g->path_len;
    g->e->status = status;
    snprintf(g->e->message, sizeof g->e->message, "#%s: %s", g->path, detail);
    pop(g, old);
    return -1;
}

/* A schema that is wrong. */
__attribute__((format(printf, 3, 4))) static int fail(gen *g, const char *keyword,
                                                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(g, JSON_SCHEMA_INVALID, keyword, fmt, ap);
    va_end(ap);
    return -1;
}

/* A schema that may be right but asks what a grammar here cannot give. */
__attribute__((format(printf, 3, 4))) static int refuse(gen *g, const char *keyword,
                                                        const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(g, JSON_SCHEMA_UNSUPPORTED, keyword, fmt, ap);
    va_end(ap);
    return -1;
}

static int nomem(gen *g)
{
    g->e->status = JSON_SCHEMA_NOMEM;
    snprintf(g->e->message, sizeof g->e->message, "out of memory");
    return -1;
}

/* ---- output ---- */

/* Structural text, '@' written as the prefix (never used for text that
 * comes from the schema: literal() writes that). */
__attribute__((format(printf, 2, 3))) static void emit(gen *g, const char *fmt, ...)
{
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    for (const char *p = text; *p; p++)
        if (*p == '@')
            fputs(g->prefix, g->out);
        else
            fputc(*p, g->out);
}

static int new_rule(gen *g, unsigned *id)
{
    if (g->n_rules >= JSON_SCHEMA_MAX_RULES)
        return refuse(g, NULL, "the schema needs more than %d rules", JSON_SCHEMA_MAX_RULES);
    *id = g->n_rules++;
    return 0;
}

/* A GBNF literal of the JSON text of v (compact). */
static int literal(gen *g, const json_t *v)
{
    char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!t)
        return nomem(g);
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

static int name_literal(gen *g, const char *name)
{
    json_t *key = json_string(name);
    int rc = key ? literal(g, key) : nomem(g);
    json_decref(key);
    return rc;
}

static int rule(gen *g, const json_t *s, int depth, unsigned *id);

/* ---- small readers ---- */

static int check_keywords(gen *g, const json_t *s)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)s, key, v) {
        if (!IN(key, KNOWN))
            return refuse(g, key, "the keyword '%.64s' is not supported", key);
    }
    return 0;
}

/* A non-negative integer keyword, at most max; -1 when absent. */
static int count(gen *g, const json_t *s, const char *name, json_int_t max, json_int_t *out)
{
    json_t *v = json_object_get(s, name);
    *out = -1;
    if (!v)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max)
        return fail(g, name, "'%s' must be an integer from 0 to %lld", name, (long long)max);
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

/* v is of the type (a name or a list of names) of a schema. */
static int has_type(const json_t *v, const json_t *type)
{
    if (json_is_array(type)) {
        for (size_t i = 0; i < json_array_size(type); i++)
            if (has_type(v, json_array_get(type, i)))
                return 1;
        return 0;
    }
    const char *t = json_string_value(type);
    if (!t)
        return 1;
    return !strcmp(t, "string")    ? json_is_string(v)
           : !strcmp(t, "integer") ? json_is_integer(v) ||
                                         (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)))
           : !strcmp(t, "number")  ? json_is_number(v)
           : !strcmp(t, "boolean") ? json_is_boolean(v)
           : !strcmp(t, "null")    ? json_is_null(v)
           : !strcmp(t, "object")  ? json_is_object(v)
           : !strcmp(t, "array")   ? json_is_array(v)
                                   : 0;
}

/* The value ref ("#" then a JSON pointer) names in the document. */
static const json_t *resolve(const json_t *root, const char *ref)
{
    if (ref[0] != '#')
        return NULL;
    const json_t *at = root;
    for (const char *p = ref + 1; *p && at;) {
        if (*p != '/')
            return NULL;
        char token[256];
        size_t n = 0;
        for (p++; *p && *p != '/'; p++) {
            char c = *p;
            if (c == '~' && (p[1] == '0' || p[1] == '1'))
                c = *++p == '0' ? '~' : '/';
            if (n + 1 >= sizeof token)
                return NULL;
            token[n++] = c;
        }
        token[n] = 0;
        if (json_is_object(at)) {
            at = json_object_get(at, token);
        } else if (json_is_array(at)) {
            char *end;
            unsigned long i = strtoul(token, &end, 10);
            at = n && !*end && token[0] != '-' ? json_array_get(at, i) : NULL;
        } else {
            at = NULL;
        }
    }
    return at;
}

/* ---- strings: lengths, formats, patterns ---- */

/* Dates without 29 February: a valid date in every year. */
#define DATE_RULE                                                                                  \
    "[0-9]{4} \"-\" ((\"0\" [13578] | \"1\" [02]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01]) | " \
    "(\"0\" [469] | \"11\") \"-\" (\"0\" [1-9] | [12] [0-9] | \"30\") | \"02\" \"-\" (\"0\" "      \
    "[1-9] | \"1\" [0-9] | \"2\" [0-8]))"
#define TIME_RULE                                                                                  \
    "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? (\"Z\" | " \
    "[-+] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])"
#define UUID_RULE                                                                                  \
    "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "          \
    "[0-9a-fA-F]{12}"

static int format_rule(gen *g, const json_t *format)
{
    const char *f = json_string_value(format);
    const char *body = !f                       ? NULL
                       : !strcmp(f, "date")      ? DATE_RULE
                       : !strcmp(f, "time")      ? TIME_RULE
                       : !strcmp(f, "date-time") ? DATE_RULE " \"T\" " TIME_RULE
                       : !strcmp(f, "uuid") || (!strncmp(f, "uuid", 4) && f[4] >= '1' && f[4] <= '5' &&
                                               !f[5])
                           ? UUID_RULE
                           : NULL;
    if (!f)
        return fail(g, "format", "'format' must be a string");
    if (!body)
        return refuse(g, "format",
                    "the format '%.64s' is not supported (date, time, date-time and uuid are)", f);
    fprintf(g->out, "\"\\\"\" %s \"\\\"\"", body);
    return 0;
}

static int string_rule(gen *g, const json_t *s)
{
    json_int_t lo, hi;
    json_t *pattern = json_object_get(s, "pattern"), *format = json_object_get(s, "format");
    if (count(g, s, "minLength", ML_GRAMMAR_MAX_REPEAT, &lo) ||
        count(g, s, "maxLength", ML_GRAMMAR_MAX_REPEAT, &hi))
        return -1;
    if (pattern && format)
        return refuse(g, "format", "'format' together with 'pattern' is not supported");
    if ((pattern || format) && (lo >= 0 || hi >= 0))
        return refuse(g, lo >= 0 ? "minLength" : "maxLength",
                    "'%s' together with '%s' is not supported", lo >= 0 ? "minLength" : "maxLength",
                    pattern ? "pattern" : "format");
    if (pattern) {
        if (!json_is_string(pattern))
            return fail(g, "pattern", "'pattern' must be a string");
        char why[200];
        int unsupported;
        if (!json_schema_pattern(g->out, json_string_value(pattern), why, sizeof why, &unsupported))
            return 0;
        return (unsupported ? refuse : fail)(g, "pattern", "%s", why);
    }
    if (format)
        return format_rule(g, format);
    if (hi >= 0 && lo > hi)
        return fail(g, "maxLength", "'maxLength' is below 'minLength'");
    if (lo < 0 && hi < 0) {
        emit(g, "@string");
        return 0;
    }
    /* characters without \u escapes: a surrogate pair would be two
     * characters here and one in the schema's count */
    emit(g, "\"\\\"\" @schar");
    repeat(g, lo < 0 ? 0 : lo, hi);
    emit(g, " \"\\\"\"");
    return 0;
}

/* ---- integers between bounds ---- */

/* One integer bound: v rounded into the integers it allows. */
static int int_bound(gen *g, const json_t *s, int which, int64_t *v, int *set)
{
    const char *key = INT_BOUNDS[which];
    json_t *x = json_object_get(s, key);
    int lower = which < 2, exclusive = which % 2;
    *set = 0;
    if (!x)
        return 0;
    if (json_is_integer(x)) {
        *v = json_integer_value(x);
        if (exclusive && *v == (lower ? INT64_MAX : INT64_MIN))
            return fail(g, key, "'%s' leaves no integer", key);
        *v += exclusive ? (lower ? 1 : -1) : 0;
    } else if (json_is_real(x)) {
        double d = json_real_value(x);
        if (!(d > -9.2e18 && d < 9.2e18))
            return refuse(g, key, "'%s' is beyond the 64-bit integers", key);
        double r = lower ? floor(d) + (exclusive || d != floor(d) ? 1 : 0)
                         : ceil(d) - (exclusive || d != ceil(d) ? 1 : 0);
        *v = (int64_t)r;
    } else {
        return fail(g, key, "'%s' must be a number", key);
    }
    *set = 1;
    return 0;
}

static int integer_rule(gen *g, const json_t *s)
{
    int64_t lo = 0, hi = 0, v;
    int has_lo = 0, has_hi = 0, set;
    for (int i = 0; i < 4; i++) {
        if (int_bound(g, s, i, &v, &set))
            return -1;
        if (set && i < 2 && (!has_lo || v > lo))
            lo = v, has_lo = 1;
        if (set && i >= 2 && (!has_hi || v < hi))
            hi = v, has_hi = 1;
    }
    if (!has_lo && !has_hi) {
        emit(g, "@integer");
        return 0;
    }
    if (has_lo && has_hi && lo > hi)
        return fail(g, NULL, "no integer lies between the bounds ('minimum' %lld, 'maximum' %lld)",
                    (long long)lo, (long long)hi);
    json_schema_int_range(g->out, lo, has_lo, hi, has_hi);
    return 0;
}

/* ---- numbers between bounds ----
 * A number is written without an exponent, its integer part in a digit
 * range and its fraction free, absent or not all zeros, as the bound at
 * each end needs.  A bound with a fraction is rounded inward to an
 * integer: the texts stay inside, a few values near it are left out. */

static int number_bound(gen *g, const json_t *s, int which, int64_t *v, int *exclusive, int *set,
                        int *rounded)
{
    const char *key = INT_BOUNDS[which];
    json_t *x = json_object_get(s, key);
    int lower = which < 2;
    *exclusive = which % 2;
    *set = 0;
    if (!x)
        return 0;
    if (json_is_integer(x)) {
        *v = json_integer_value(x);
    } else if (json_is_real(x)) {
        double d = json_real_value(x);
        if (!(d > -9.2e18 && d < 9.2e18))
            return refuse(g, key, "'%s' is beyond the 64-bit integers", key);
        if (d != floor(d))
            *exclusive = 0, *rounded = 1;
        *v = (int64_t)(lower ? ceil(d) : floor(d));
    } else {
        return fail(g, key, "'%s' must be a number", key);
    }
    *set = 1;
    return 0;
}

/* Magnitudes m from a to b (b only when bounded), each end exclusive or
 * not: integer parts between with any fraction, a itself with a fraction
 * that is not zero, b itself with none. */
static void magnitude_region(FILE *o, uint64_t a, int a_ex, uint64_t b, int b_ex, int bounded)
{
    const char *sep = "";
    fputc('(', o);
    if (!bounded || (b >= 1 && a + (uint64_t)a_ex <= b - 1)) {
        json_schema_uint_range(o, a + (uint64_t)a_ex, bounded ? b - 1 : 0, bounded);
        fputs(" (\".\" [0-9]{1,15})?", o);
        sep = " | ";
    }
    if (a_ex && (!bounded || a < b)) {
        fprintf(o, "%s\"%llu\" \".\" [0-9]{0,14} [1-9]", sep, (unsigned long long)a);
        sep = " | ";
    }
    if (bounded && !b_ex && (a < b || !a_ex))
        fprintf(o, "%s\"%llu\"", sep, (unsigned long long)b);
    fputc(')', o);
}

static int number_rule(gen *g, const json_t *s)
{
    int64_t lo = 0, hi = 0, v;
    int has_lo = 0, has_hi = 0, lo_ex = 0, hi_ex = 0, ex, set, rounded = 0;
    for (int i = 0; i < 4; i++) {
        if (number_bound(g, s, i, &v, &ex, &set, &rounded))
            return -1;
        if (set && i < 2 && (!has_lo || v > lo || (v == lo && ex)))
            lo = v, lo_ex = ex, has_lo = 1;
        if (set && i >= 2 && (!has_hi || v < hi || (v == hi && ex)))
            hi = v, hi_ex = ex, has_hi = 1;
    }
    if (!has_lo && !has_hi) {
        emit(g, "@number");
        return 0;
    }
    if (has_lo && has_hi && (lo > hi || (lo == hi && (lo_ex || hi_ex))))
        return (rounded ? refuse : fail)(g, NULL, "no number lies between the bounds%s",
                                         rounded ? " once rounded inward to integers" : "");
    int alts = 0;
    if (!has_lo || lo < 0) { /* "-" and magnitudes from -hi (or above 0) to -lo */
        int below = has_hi && hi < 0;
        fputs("\"-\" ", g->out);
        magnitude_region(g->out, below ? 0 - (uint64_t)hi : 0, below ? hi_ex : 1,
                         has_lo ? 0 - (uint64_t)lo : 0, lo_ex, has_lo);
        alts++;
    }
    if (!has_hi || hi > 0 || (hi == 0 && !hi_ex)) {
        int above = has_lo && lo >= 0;
        fputs(alts ? " | " : "", g->out);
        magnitude_region(g->out, above ? (uint64_t)lo : 0, above && lo_ex, has_hi ? (uint64_t)hi : 0,
                         hi_ex, has_hi);
    }
    return 0;
}

/* ---- arrays ---- */

static int array_rule(gen *g, const json_t *s, int depth, unsigned id)
{
    json_int_t lo, hi;
    json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
    if (count(g, s, "minItems", ML_GRAMMAR_MAX_REPEAT, &lo) ||
        count(g, s, "maxItems", ML_GRAMMAR_MAX_REPEAT, &hi))
        return -1;
    lo = lo < 0 ? 0 : lo;
    if (hi >= 0 && hi < lo)
        return fail(g, "maxItems", "'maxItems' is below 'minItems'");
    const char *tuple_key = "prefixItems";
    if (json_is_array(items)) { /* draft 7's tuples */
        if (prefix)
            return fail(g, "items", "'items' as a list together with 'prefixItems'");
        prefix = items, items = NULL, tuple_key = "items";
    }
    if (prefix && !json_is_array(prefix))
        return fail(g, "prefixItems", "'prefixItems' must be a list of schemas");
    if (items && !json_is_object(items) && !json_is_boolean(items))
        return fail(g, "items", "'items' must be a schema");
    size_t n = json_array_size(prefix);
    if (hi >= 0 && (json_int_t)n > hi)
        return refuse(g, "maxItems", "'maxItems' is below the number of '%s'", tuple_key);
    /* items after the tuple: emin to emax of the item rule (or of any
     * value when items is absent: then only as many as minItems needs) */
    json_int_t emin = lo > (json_int_t)n ? lo - (json_int_t)n : 0;
    json_int_t emax = json_is_false(items)  ? 0
                      : !items && n         ? emin
                      : hi < 0              ? -1
                                            : hi - (json_int_t)n;
    if (emin > emax && emax >= 0)
        return fail(g, "minItems", "'minItems' asks for more items than 'items': false allows");
    unsigned *tuple = calloc(n + 1, sizeof *tuple), item = 0;
    if (!tuple)
        return nomem(g);
    int rc = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        size_t old = push(g, tuple_key);
        push_index(g, i);
        rc = rule(g, json_array_get(prefix, i), depth + 1, &tuple[i]);
        pop(g, old);
    }
    if (!rc && emax != 0 && items) {
        size_t old = push(g, "items");
        rc = rule(g, items, depth + 1, &item);
        pop(g, old);
    }
    if (rc) {
        free(tuple);
        return -1;
    }
    char extra[24] = "@value";
    if (items)
        snprintf(extra, sizeof extra, "@r%u", item);
    emit(g, "@r%u ::= \"[\" @ws ", id);
    if (n) {
        for (size_t i = 0; i < n; i++)
            emit(g, i ? " @ws \",\" @ws @r%u" : "@r%u", tuple[i]);
        if (emax != 0) {
            emit(g, " (@ws \",\" @ws %s)", extra);
            repeat(g, emin, emax);
        }
    } else if (emax != 0) {
        emit(g, "%s%s (@ws \",\" @ws %s)", emin ? "" : "(", extra, extra);
        repeat(g, emin ? emin - 1 : 0, emax < 0 ? -1 : emax - 1);
        emit(g, "%s", emin ? "" : ")?");
    }
    emit(g, " @ws \"]\"\n");
    free(tuple);
    return 0;
}

/* ---- objects ---- */

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static size_t utf8_len(const char *s)
{
    unsigned char c = (unsigned char)*s;
    return c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
}

/* The code point of the (valid: jansson's) UTF-8 character at s. */
static uint32_t utf8_char(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = utf8_len(s);
    uint32_t cp = n == 1 ? p[0] : p[0] & (0x3fu >> (n - 1));
    for (size_t i = 1; i < n; i++)
        cp = cp << 6 | (p[i] & 0x3f);
    return cp;
}

/* Key texts (kchar*) other than names[0..n) (sorted; all share their
 * first off bytes): a trie of rules, one per prefix of a name. */
static int other_keys(gen *g, const char **names, size_t n, size_t off, unsigned *id)
{
    int terminal = 0;
    size_t i = 0, children = 0;
    while (i < n && !names[i][off])
        terminal = 1, i++;
    unsigned *sub = calloc(n + 1, sizeof *sub);
    if (!sub)
        return nomem(g);
    int rc = 0;
    for (size_t j = i; !rc && j < n;) { /* one child per distinct next character */
        size_t len = utf8_len(names[j] + off), k = j + 1;
        while (k < n && !strncmp(names[k] + off, names[j] + off, len))
            k++;
        unsigned char c = (unsigned char)names[j][off];
        if (c >= 0x20 && c != '"' && c != '\\') /* keys made here never hold the others */
            rc = other_keys(g, names + j, k - j, off + len, &sub[children++]);
        else
            sub[children++] = UINT32_MAX;
        j = k;
    }
    if (!rc)
        rc = new_rule(g, id);
    if (rc) {
        free(sub);
        return -1;
    }
    emit(g, "@r%u ::= ", *id);
    size_t child = 0;
    for (size_t j = i; j < n; child++) {
        size_t len = utf8_len(names[j] + off), k = j + 1;
        while (k < n && !strncmp(names[k] + off, names[j] + off, len))
            k++;
        if (sub[child] != UINT32_MAX) {
            fprintf(g->out, "\"%.*s\" ", (int)len, names[j] + off);
            emit(g, "@r%u | ", sub[child]);
        }
        j = k;
    }
    fputs("[^", g->out);
    for (size_t j = i; j < n;) {
        size_t k = j + 1, len = utf8_len(names[j] + off);
        uint32_t cp = utf8_char(names[j] + off);
        fprintf(g->out, cp > 0xffff ? "\\U%08X" : "\\u%04X", (unsigned)cp);
        while (k < n && !strncmp(names[k] + off, names[j] + off, len))
            k++;
        j = k;
    }
    emit(g, "\\u0000-\\u001F\\u0022\\u005C] @kchar*%s\n", terminal ? "" : " | \"\"");
    free(sub);
    return 0;
}

/* kv rules k..n-1 as any subset in order, the first without a comma:
 * c_k ::= kv_k ("," c_k+1)? | c_k+1.  Returns the rule of c_k. */
static int optional_chain(gen *g, const unsigned *kv, size_t k, size_t n, unsigned *id)
{
    unsigned next = 0;
    if (k + 1 < n && optional_chain(g, kv, k + 1, n, &next))
        return -1;
    if (new_rule(g, id))
        return -1;
    emit(g, "@r%u ::= @r%u", *id, kv[k]);
    if (k + 1 < n)
        emit(g, " (@ws \",\" @ws @r%u)? | @r%u", next, next);
    emit(g, "\n");
    return 0;
}

static int is_required(const json_t *req, const char *name)
{
    for (size_t i = 0; i < json_array_size(req); i++)
        if (!strcmp(json_string_value(json_array_get(req, i)), name))
            return 1;
    return 0;
}

/* The rule of "name": value for one property. */
static int property(gen *g, const char *name, const json_t *schema, int depth, unsigned *kv)
{
    unsigned value;
    size_t old = push(g, "properties");
    push(g, name);
    int rc = rule(g, schema, depth + 1, &value);
    pop(g, old);
    if (rc || new_rule(g, kv))
        return -1;
    emit(g, "@r%u ::= ", *kv);
    if (name_literal(g, name))
        return -1;
    emit(g, " @ws \":\" @ws @r%u\n", value);
    return 0;
}

/* additionalProperties as a schema: the rule of one or more extra pairs,
 * keys other than the properties' names. */
static int extra_pairs(gen *g, const json_t *props, const json_t *extra, int depth, unsigned *id)
{
    unsigned value, key = 0;
    size_t old = push(g, "additionalProperties");
    int rc = rule(g, extra, depth + 1, &value);
    pop(g, old);
    size_t n = json_object_size(props), i = 0;
    const char **names = calloc(n + 1, sizeof *names);
    const char *name;
    json_t *v;
    if (!rc && !names)
        rc = nomem(g);
    if (!rc && n) {
        json_object_foreach((json_t *)props, name, v) names[i++] = name;
        qsort(names, n, sizeof *names, cmp_names);
        rc = other_keys(g, names, n, 0, &key);
    }
    free(names);
    if (rc || new_rule(g, id))
        return -1;
    char k[24];
    snprintf(k, sizeof k, n ? "\"\\\"\" @r%u \"\\\"\"" : "@string", key);
    emit(g, "@r%u ::= %s @ws \":\" @ws @r%u (@ws \",\" @ws %s @ws \":\" @ws @r%u)*\n", *id, k,
         value, k, value);
    return 0;
}

static int object_rule(gen *g, const json_t *s, int depth, unsigned id)
{
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    json_t *extra = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props))
        return fail(g, "properties", "'properties' must be an object");
    if (req && !json_is_array(req))
        return fail(g, "required", "'required' must be a list of names");
    if (extra && !json_is_object(extra) && !json_is_boolean(extra))
        return fail(g, "additionalProperties", "'additionalProperties' must be a boolean or a schema");
    for (size_t i = 0; i < json_array_size(req); i++) {
        json_t *name = json_array_get(req, i);
        if (!json_is_string(name))
            return fail(g, "required", "'required' must be a list of names");
        if (!json_object_get(props, json_string_value(name)))
            return fail(g, "required", "'required' names '%.64s', which is not among the properties",
                        json_string_value(name));
    }
    size_t n = json_object_size(props), n_req = 0, n_opt = 0;
    if (!n && !json_is_object(extra)) { /* any object, or only {} */
        emit(g, json_is_false(extra) ? "@r%u ::= \"{\" @ws \"}\"\n" : "@r%u ::= @object\n", id);
        return 0;
    }
    unsigned *kv = calloc(2 * n + 1, sizeof *kv);
    if (!kv)
        return nomem(g);
    const char *key;
    json_t *v;
    int rc = 0;
    json_object_foreach(props, key, v) {
        size_t at = is_required(req, key) ? n_req++ : n + n_opt++;
        if ((rc = property(g, key, v, depth, &kv[at])))
            break;
    }
    if (!rc && json_is_object(extra))
        rc = extra_pairs(g, props, extra, depth, &kv[n + n_opt++]);
    unsigned chain = 0;
    if (!rc && n_opt)
        rc = optional_chain(g, kv + n, 0, n_opt, &chain);
    if (!rc) {
        emit(g, "@r%u ::= \"{\" @ws ", id);
        for (size_t i = 0; i < n_req; i++)
            emit(g, i ? " @ws \",\" @ws @r%u" : "@r%u", kv[i]);
        if (n_opt)
            emit(g, n_req ? " (@ws \",\" @ws @r%u)?" : "@r%u?", chain);
        emit(g, " @ws \"}\"\n");
    }
    free(kv);
    return rc;
}

/* ---- allOf: objects merged into one, enums intersected ---- */

typedef struct merged {
    json_t *props, *required, *values; /* values: the enums' common values, or NULL */
    int objects, enums;
} merged;

static int merge_part(gen *g, const json_t *part, int depth, int optional, merged *m);

static int merge_property(gen *g, merged *m, const char *name, json_t *schema)
{
    json_t *had = json_object_get(m->props, name);
    if (had && !json_equal(had, schema))
        return refuse(g, "properties", "'allOf' defines the property '%.64s' twice, differently", name);
    return json_object_set(m->props, name, schema) ? nomem(g) : 0;
}

static int merge_enum(gen *g, merged *m, json_t *values)
{
    if (!json_is_array(values) || !json_array_size(values))
        return fail(g, "enum", "'enum' must be a non-empty list");
    m->enums++;
    if (!m->values) {
        m->values = json_copy(values);
        return m->values ? 0 : nomem(g);
    }
    for (size_t i = json_array_size(m->values); i-- > 0;) {
        int found = 0;
        for (size_t j = 0; j < json_array_size(values); j++)
            found |= json_equal(json_array_get(m->values, i), json_array_get(values, j));
        if (!found)
            json_array_remove(m->values, i);
    }
    return 0;
}

/* anyOf inside allOf: its alternatives' properties, each optional (sure
 * only when no alternative requires one). */
static int merge_any(gen *g, const json_t *list, int depth, merged *m)
{
    if (!json_is_array(list) || !json_array_size(list))
        return fail(g, "anyOf", "'anyOf' must be a non-empty list");
    size_t old = push(g, "anyOf");
    int rc = 0;
    for (size_t i = 0; !rc && i < json_array_size(list); i++) {
        size_t at = push_index(g, i);
        rc = merge_part(g, json_array_get(list, i), depth + 1, 1, m);
        pop(g, at);
    }
    pop(g, old);
    return rc;
}

static int merge_part(gen *g, const json_t *part, int depth, int optional, merged *m)
{
    if (depth > JSON_SCHEMA_MAX_DEPTH)
        return refuse(g, NULL, "the schema nests deeper than %d", JSON_SCHEMA_MAX_DEPTH);
    json_t *ref = json_object_get(part, "$ref");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)part, key, v) {
        if (ref && strcmp(key, "$ref") && !IN(key, ANNOTATIONS))
            return refuse(g, key, "'%s' beside '$ref' is not supported", key);
    }
    if (ref) {
        const json_t *target = json_is_string(ref) ? resolve(g->root, json_string_value(ref)) : NULL;
        if (!target)
            return fail(g, "$ref", "the $ref names nothing in this schema");
        return merge_part(g, target, depth + 1, optional, m);
    }
    if (!json_is_object(part))
        return fail(g, NULL, "each part of 'allOf' must be an object schema");
    if (check_keywords(g, part))
        return -1;
    int object = 0;
    json_object_foreach((json_t *)part, key, v) {
        int rc = 0;
        if (IN(key, ANNOTATIONS) || !strcmp(key, "allOf")) {
            continue;
        } else if (!strcmp(key, "type")) {
            if (!json_is_string(v) || (strcmp(json_string_value(v), "object") && !json_object_get(part, "enum")))
                rc = refuse(g, key, "'allOf' merges objects and enums only");
        } else if (!strcmp(key, "properties") && json_is_object(v)) {
            const char *name;
            json_t *p;
            object = 1;
            json_object_foreach(v, name, p) if (!rc) rc = merge_property(g, m, name, p);
        } else if (!strcmp(key, "required") && json_is_array(v) && !optional) {
            object = 1;
            for (size_t i = 0; !rc && i < json_array_size(v); i++)
                if (!json_is_string(json_array_get(v, i)))
                    rc = fail(g, key, "'required' must be a list of names");
                else if (json_array_append(m->required, json_array_get(v, i)))
                    rc = nomem(g);
        } else if (!strcmp(key, "required") && json_is_array(v) && !json_array_size(v)) {
            continue;
        } else if (!strcmp(key, "required") && optional) {
            rc = refuse(g, key, "'required' in an alternative of 'anyOf' inside 'allOf' is not "
                              "supported (its properties are merged as optional)");
        } else if (!strcmp(key, "additionalProperties") && json_is_true(v)) {
            continue;
        } else if (!strcmp(key, "enum")) {
            rc = merge_enum(g, m, v);
        } else if (!strcmp(key, "anyOf") && !optional) {
            object = 1;
            rc = merge_any(g, v, depth, m);
        } else {
            rc = refuse(g, key, "'%s' inside 'allOf' is not supported (it merges objects' "
                              "properties and required, and intersects enums)", key);
        }
        if (rc)
            return -1;
    }
    json_t *all = json_object_get(part, "allOf");
    if (all) {
        if (!json_is_array(all) || !json_array_size(all))
            return fail(g, "allOf", "'allOf' must be a non-empty list of schemas");
        size_t old = push(g, "allOf");
        for (size_t i = 0; i < json_array_size(all); i++) {
            size_t at = push_index(g, i);
            int rc = merge_part(g, json_array_get(all, i), depth + 1, optional, m);
            pop(g, at);
            if (rc)
                return -1;
        }
        pop(g, old);
    }
    m->objects += object;
    return 0;
}

static int allof_rule(gen *g, const json_t *s, int depth, unsigned *id)
{
    merged m = {.props = json_object(), .required = json_array()};
    json_t *schema = NULL;
    int rc = m.props && m.required ? merge_part(g, s, depth, 0, &m) : nomem(g);
    if (!rc && m.objects && m.enums)
        rc = refuse(g, "allOf", "'allOf' mixes objects and enums");
    if (!rc && m.enums && !json_array_size(m.values))
        rc = fail(g, "allOf", "the enums of 'allOf' have no value in common");
    if (!rc) {
        schema = m.enums ? json_pack("{sO}", "enum", m.values)
                         : json_pack("{sssOsO}", "type", "object", "properties", m.props,
                                     "required", m.required);
        rc = schema ? rule(g, schema, depth + 1, id) : nomem(g);
    }
    json_decref(schema);
    json_decref(m.props);
    json_decref(m.required);
    json_decref(m.values);
    return rc;
}

/* ---- the rest of the keywords ---- */

/* The alternatives of anyOf/oneOf, or of enum's values. */
static int alternatives(gen *g, const char *keyword, const json_t *list, int depth, unsigned id)
{
    int values = !strcmp(keyword, "enum");
    if (!json_is_array(list) || !json_array_size(list))
        return fail(g, keyword, "'%s' must be a non-empty list", keyword);
    unsigned *alt = calloc(json_array_size(list), sizeof *alt);
    if (!alt)
        return nomem(g);
    int rc = 0;
    size_t old = push(g, keyword);
    for (size_t i = 0; !values && !rc && i < json_array_size(list); i++) {
        size_t at = push_index(g, i);
        rc = rule(g, json_array_get(list, i), depth + 1, &alt[i]);
        pop(g, at);
    }
    pop(g, old);
    if (!rc) {
        emit(g, "@r%u ::= ", id);
        for (size_t i = 0; !rc && i < json_array_size(list); i++) {
            fputs(i ? " | " : "", g->out);
            if (values)
                rc = literal(g, json_array_get(list, i));
            else
                emit(g, "@r%u", alt[i]);
        }
        fputc('\n', g->out);
    }
    free(alt);
    return rc;
}

/* enum (and const) with a type: only the values of that type. */
static int enum_rule(gen *g, const json_t *s, int depth, unsigned id)
{
    json_t *values = json_object_get(s, "enum"), *type = json_object_get(s, "type");
    if (json_object_get(s, "const"))
        values = json_pack("[O]", json_object_get(s, "const"));
    else
        values = json_is_array(values) ? json_copy(values) : json_incref(values);
    if (!values)
        return nomem(g);
    size_t given = json_array_size(values);
    for (size_t i = given; type && i-- > 0;)
        if (!has_type(json_array_get(values, i), type))
            json_array_remove(values, i);
    int rc = given && !json_array_size(values)
                 ? fail(g, json_object_get(s, "const") ? "const" : "enum",
                        "no value of '%s' is of the schema's type",
                        json_object_get(s, "const") ? "const" : "enum")
                 : alternatives(g, "enum", values, depth, id);
    json_decref(values);
    return rc;
}

/* A value of one type name. */
static int typed(gen *g, const json_t *s, const char *type, int depth, unsigned id)
{
    if (!strcmp(type, "object"))
        return object_rule(g, s, depth, id);
    if (!strcmp(type, "array"))
        return array_rule(g, s, depth, id);
    emit(g, "@r%u ::= ", id);
    int rc = 0;
    if (!strcmp(type, "string"))
        rc = string_rule(g, s);
    else if (!strcmp(type, "integer"))
        rc = integer_rule(g, s);
    else if (!strcmp(type, "number"))
        rc = number_rule(g, s);
    else if (!strcmp(type, "boolean") || !strcmp(type, "null"))
        emit(g, "@%s", type);
    else
        return fail(g, "type", "the type '%.32s' is not a JSON Schema type", type);
    fputc('\n', g->out);
    return rc;
}

/* $ref: one rule per target, made once (a recursive schema refers to its
 * own rule); messages inside name the target's pointer. */
static int ref_rule(gen *g, const json_t *s, int depth, unsigned *id)
{
    json_t *ref = json_object_get(s, "$ref");
    const char *key;
    json_t *v;
    if (!json_is_string(ref))
        return fail(g, "$ref", "'$ref' must be a string");
    json_object_foreach((json_t *)s, key, v) {
        if (strcmp(key, "$ref") && !IN(key, ANNOTATIONS))
            return refuse(g, key, "'%s' beside '$ref' is not supported", key);
    }
    const char *text = json_string_value(ref);
    json_t *known = json_object_get(g->refs, text);
    if (known) {
        *id = (unsigned)json_integer_value(known);
        return 0;
    }
    if (text[0] != '#')
        return refuse(g, "$ref", "the $ref '%.64s' is not into this schema (\"#...\")", text);
    const json_t *target = resolve(g->root, text);
    if (!target)
        return fail(g, "$ref", "the $ref '%.64s' names nothing in this schema", text);
    unsigned inner;
    if (new_rule(g, id))
        return -1;
    if (json_object_set_new(g->refs, text, json_integer(*id)))
        return nomem(g);
    char saved[PATH_MAX_LEN];
    size_t saved_len = g->path_len;
    memcpy(saved, g->path, sizeof saved);
    snprintf(g->path, sizeof g->path, "%s", text + 1);
    g->path_len = strlen(g->path);
    int rc = rule(g, target, depth + 1, &inner);
    memcpy(g->path, saved, sizeof saved);
    g->path_len = saved_len;
    if (rc)
        return -1;
    emit(g, "@r%u ::= @r%u\n", *id, inner);
    return 0;
}

/* Several types: one alternative per type, the rest of s with each. */
static int types_rule(gen *g, const json_t *s, const json_t *type, int depth, unsigned id)
{
    json_t *types = json_array();
    size_t i;
    json_t *t;
    int rc = types ? 0 : nomem(g);
    json_array_foreach(type, i, t) {
        json_t *one = json_deep_copy(s);
        if (!rc && !json_is_string(t))
            rc = fail(g, "type", "'type' must be a type name or a list of them");
        if (!rc && (!one || json_object_set(one, "type", t) || json_array_append(types, one)))
            rc = nomem(g);
        json_decref(one);
        if (rc)
            break;
    }
    if (!rc) {
        unsigned *alt = calloc(json_array_size(types), sizeof *alt);
        rc = alt ? 0 : nomem(g);
        for (i = 0; !rc && i < json_array_size(types); i++) {
            const json_t *one = json_array_get(types, i);
            const char *name = json_string_value(json_object_get(one, "type"));
            if (!(rc = new_rule(g, &alt[i])))
                rc = typed(g, one, name, depth, alt[i]);
        }
        if (!rc) {
            emit(g, "@r%u ::= ", id);
            for (i = 0; i < json_array_size(types); i++)
                emit(g, i ? " | @r%u" : "@r%u", alt[i]);
            emit(g, "\n");
        }
        free(alt);
    }
    json_decref(types);
    return rc;
}

static int has(const json_t *s, const char *key)
{
    return json_object_get(s, key) != NULL;
}

/* No type: the keywords say which (a value of another type would also
 * do; keeping to one is stricter, never looser). */
static int untyped(gen *g, const json_t *s, int depth, unsigned id)
{
    json_t *extra = json_object_get(s, "additionalProperties");
    if (has(s, "properties") || has(s, "required") || (extra && !json_is_true(extra)))
        return object_rule(g, s, depth, id);
    if (has(s, "items") || has(s, "prefixItems") || has(s, "minItems") || has(s, "maxItems"))
        return array_rule(g, s, depth, id);
    if (has(s, "pattern") || has(s, "format") || has(s, "minLength") || has(s, "maxLength"))
        return typed(g, s, "string", depth, id);
    for (size_t i = 0; i < 4; i++)
        if (has(s, INT_BOUNDS[i]))
            return typed(g, s, "number", depth, id);
    emit(g, "@r%u ::= @value\n", id);
    return 0;
}

/* keyword's siblings in s say nothing more (annotations; and the type,
 * when allow_type: enum's values are filtered by it). */
static int only_beside(gen *g, const json_t *s, const char *keyword, int allow_type)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)s, key, v) {
        if (strcmp(key, keyword) && !IN(key, ANNOTATIONS) && (!allow_type || strcmp(key, "type")))
            return refuse(g, key, "'%s' beside '%s' is not supported", key, keyword);
    }
    return 0;
}

/* The schema s names, $refs followed (NULL: none found). */
static const json_t *deref(gen *g, const json_t *s)
{
    for (int i = 0; i < JSON_SCHEMA_MAX_DEPTH && json_is_object(s) && has(s, "$ref"); i++) {
        const char *ref = json_string_value(json_object_get(s, "$ref"));
        s = ref ? resolve(g->root, ref) : NULL;
    }
    return s;
}

/* The JSON types s allows, one bit each (a number is an integer or has a
 * fraction); all of them when s does not say. */
enum { T_NULL = 1, T_BOOL = 2, T_OBJECT = 4, T_ARRAY = 8, T_STRING = 16, T_INTEGER = 32,
       T_FRACTION = 64, T_NUMBER = T_INTEGER | T_FRACTION, T_ANY = 127 };

static unsigned type_bit(const char *name)
{
    static const char *const NAMES[] = {"null", "boolean", "object", "array", "string", "integer"};
    for (unsigned i = 0; i < 6; i++)
        if (name && !strcmp(name, NAMES[i]))
            return 1u << i;
    return name && !strcmp(name, "number") ? T_NUMBER : T_ANY;
}

static unsigned value_types(const json_t *v)
{
    return json_is_null(v) ? T_NULL : json_is_boolean(v) ? T_BOOL : json_is_object(v) ? T_OBJECT
           : json_is_array(v) ? T_ARRAY : json_is_string(v) ? T_STRING
           : json_is_integer(v) || json_real_value(v) == floor(json_real_value(v)) ? T_INTEGER
                                                                                 : T_FRACTION;
}

static unsigned types_of(const json_t *s, int generated)
{
    json_t *type = json_object_get(s, "type"), *values = json_object_get(s, "enum");
    json_t *extra = json_object_get(s, "additionalProperties");
    unsigned bits = 0;
    if (has(s, "const"))
        return value_types(json_object_get(s, "const"));
    if (json_is_array(values)) {
        for (size_t i = 0; i < json_array_size(values); i++)
            bits |= value_types(json_array_get(values, i));
        return bits;
    }
    if (json_is_string(type))
        return type_bit(json_string_value(type));
    for (size_t i = 0; json_is_array(type) && i < json_array_size(type); i++)
        bits |= type_bit(json_string_value(json_array_get(type, i)));
    if (bits || !generated)
        return bits ? bits : T_ANY;
    /* what untyped() makes of a schema without a type */
    if (has(s, "properties") || has(s, "required") || (extra && !json_is_true(extra)))
        return T_OBJECT;
    if (has(s, "items") || has(s, "prefixItems") || has(s, "minItems") || has(s, "maxItems"))
        return T_ARRAY;
    if (has(s, "pattern") || has(s, "format") || has(s, "minLength") || has(s, "maxLength"))
        return T_STRING;
    for (size_t i = 0; i < 4; i++)
        if (has(s, INT_BOUNDS[i]))
            return T_NUMBER;
    return T_ANY;
}

/* The values a const or enum schema allows (a new list), or NULL. */
static json_t *values_of(const json_t *s)
{
    if (has(s, "const"))
        return json_pack("[O]", json_object_get(s, "const"));
    json_t *values = json_object_get(s, "enum");
    return json_is_array(values) ? json_incref(values) : NULL;
}

static int values_disjoint(const json_t *a, const json_t *b)
{
    json_t *va = values_of(a), *vb = values_of(b);
    int disjoint = va && vb;
    for (size_t i = 0; disjoint && i < json_array_size(va); i++)
        for (size_t j = 0; disjoint && j < json_array_size(vb); j++)
            disjoint = !json_equal(json_array_get(va, i), json_array_get(vb, j));
    json_decref(va);
    json_decref(vb);
    return disjoint;
}

/* No value can match both a and b: their types differ, their values
 * differ, or both are objects that require a property whose values
 * differ (a discriminator). */
static int disjoint(gen *g, const json_t *a, const json_t *b)
{
    if (!a || !b)
        return 0;
    if (!(types_of(a, 0) & types_of(b, 0)) || values_disjoint(a, b))
        return 1;
    if (types_of(a, 0) != T_OBJECT || types_of(b, 0) != T_OBJECT)
        return 0;
    json_t *req = json_object_get(a, "required");
    for (size_t i = 0; i < json_array_size(req); i++) {
        const char *name = json_string_value(json_array_get(req, i));
        if (name && is_required(json_object_get(b, "required"), name) &&
            values_disjoint(deref(g, json_object_get(json_object_get(a, "properties"), name)),
                            deref(g, json_object_get(json_object_get(b, "properties"), name))))
            return 1;
    }
    return 0;
}

/* oneOf: a value must match exactly one alternative, which a grammar
 * keeps only when no value can match two. */
static int oneof_disjoint(gen *g, const json_t *list)
{
    for (size_t i = 0; i < json_array_size(list); i++)
        for (size_t j = i + 1; j < json_array_size(list); j++)
            if (!disjoint(g, deref(g, json_array_get(list, i)), deref(g, json_array_get(list, j))))
                return refuse(g, "oneOf",
                              "'oneOf' alternatives %zu and %zu may match the same value, which "
                              "a grammar cannot exclude (anyOf can be kept)", i, j);
    return 0;
}

/* A type beside anyOf or oneOf: every alternative must make only values
 * of it. */
static int alternatives_typed(gen *g, const json_t *s, const char *keyword)
{
    json_t *type = json_object_get(s, "type"), *list = json_object_get(s, keyword);
    if (!type)
        return 0;
    unsigned allowed = types_of(s, 0);
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *alt = deref(g, json_array_get(list, i));
        if (alt && !json_is_object(alt) && !json_is_true(alt))
            continue; /* the alternative's own rule says what is wrong */
        if (!alt || !json_is_object(alt) || (types_of(alt, 1) & ~allowed)) {
            size_t old = push(g, keyword);
            push_index(g, i);
            int rc = refuse(g, NULL, "this alternative may make a value of another type than "
                                     "the 'type' beside '%s'", keyword);
            pop(g, old);
            return rc;
        }
    }
    return 0;
}

/* The rule of schema s (NULL, true or {}: any JSON value) into *id. */
static int rule(gen *g, const json_t *s, int depth, unsigned *id)
{
    if (depth > JSON_SCHEMA_MAX_DEPTH)
        return refuse(g, NULL, "the schema nests deeper than %d", JSON_SCHEMA_MAX_DEPTH);
    if (s && json_is_true(s))
        s = NULL;
    if (s && json_is_false(s))
        return fail(g, NULL, "the schema false accepts no value");
    if (s && !json_is_object(s))
        return fail(g, NULL, "a schema must be an object or a boolean");
    if (s && check_keywords(g, s))
        return -1;
    if (s && has(s, "$ref"))
        return ref_rule(g, s, depth, id);
    if (new_rule(g, id))
        return -1;
    if (!s) {
        emit(g, "@r%u ::= @value\n", *id);
        return 0;
    }
    json_t *type = json_object_get(s, "type");
    if (has(s, "allOf")) { /* first: it merges the keywords beside it */
        unsigned inner;
        if (allof_rule(g, s, depth, &inner))
            return -1;
        emit(g, "@r%u ::= @r%u\n", *id, inner);
        return 0;
    }
    const char *values = has(s, "const") ? "const" : has(s, "enum") ? "enum" : NULL;
    if (values)
        return only_beside(g, s, values, 1) ? -1 : enum_rule(g, s, depth, *id);
    const char *union_kw = has(s, "anyOf") ? "anyOf" : has(s, "oneOf") ? "oneOf" : NULL;
    if (union_kw && (only_beside(g, s, union_kw, 1) || alternatives_typed(g, s, union_kw) ||
                     (!strcmp(union_kw, "oneOf") && oneof_disjoint(g, json_object_get(s, "oneOf")))))
        return -1;
    if (union_kw)
        return alternatives(g, union_kw, json_object_get(s, union_kw), depth, *id);
    if (json_is_string(type))
        return typed(g, s, json_string_value(type), depth, *id);
    if (json_is_array(type) && json_array_size(type))
        return types_rule(g, s, type, depth, *id);
    if (type)
        return fail(g, "type", "'type' must be a type name or a list of them");
    return untyped(g, s, depth, *id);
}

static int name_ok(const char *name, int empty_ok)
{
    if (!name || (!*name && !empty_ok))
        return 0;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_'))
            return 0;
    return 1;
}

/* root_name is prefix then a name this makes. */
static int name_taken(const char *root_name, const char *prefix)
{
    size_t n = strlen(prefix);
    if (strncmp(root_name, prefix, n))
        return 0;
    const char *rest = root_name + n;
    if (rest[0] == 'r' && rest[1] && strspn(rest + 1, "0123456789") == strlen(rest + 1))
        return 1;
    return IN(rest, SHARED);
}

/* The grammar parses: a schema that reaches its own $ref before any text
 * (through anyOf, allOf or $ref alone) makes a left-recursive rule, and a
 * large one may pass the grammar's caps; either is refused here, so that
 * every text given out is one ml_grammar_parse takes. */
static int usable(gen *g, const char *text, size_t len, const char *root_name)
{
    ml_grammar *grammar = NULL;
    ml_error err;
    ml_status s = ml_grammar_parse(text, len, root_name, &grammar, &err);
    ml_grammar_free(grammar);
    if (s == ML_E_NOMEM)
        return nomem(g);
    if (s && strstr(err.msg, "left-recursive"))
        return refuse(g, NULL, "the schema can reach its own $ref before any text of a value "
                               "(a grammar cannot follow that)");
    return s ? refuse(g, NULL, "the schema's grammar is beyond its limits: %s", err.msg) : 0;
}

char *json_schema_rules(const json_t *schema, const char *root_name, const char *prefix,
                        json_schema_error *e)
{
    char *text = NULL;
    size_t len = 0;
    e->status = JSON_SCHEMA_OK;
    e->message[0] = 0;
    gen g = {.root = schema, .prefix = prefix, .e = e};
    if (!name_ok(root_name, 0) || !name_ok(prefix, 1) || name_taken(root_name, prefix)) {
        fail(&g, NULL, "the rule names '%.32s' and prefix '%.32s' cannot be used",
             root_name ? root_name : "", prefix ? prefix : "");
        return NULL;
    }
    g.out = open_memstream(&text, &len);
    g.refs = json_object();
    unsigned root = 0;
    int rc = g.out && g.refs ? 0 : nomem(&g);
    if (!rc) {
        for (const char *p = BASE; *p; p++)
            if (*p == '@')
                fputs(prefix, g.out);
            else
                fputc(*p, g.out);
        rc = rule(&g, schema, 0, &root);
        fprintf(g.out, "%s ::= ", root_name);
        emit(&g, "@r%u\n", root);
    }
    json_decref(g.refs);
    if (g.out && fclose(g.out) && !rc)
        rc = nomem(&g);
    if (!rc)
        rc = usable(&g, text, len, root_name);
    if (rc) {
        free(text);
        return NULL;
    }
    return text;
}

char *json_schema_grammar(const json_t *schema, json_schema_error *e)
{
    return json_schema_rules(schema, "root", "", e);
}
