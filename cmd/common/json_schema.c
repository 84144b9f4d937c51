/* json_schema.c - JSON Schema to GBNF (json_schema.h).  Each subschema
 * becomes a rule, written whole once the rules it uses are; objects list
 * their properties in the schema's order, the required ones always and
 * the optional ones as any subset in order; white space between tokens
 * is at most one space, so that a constrained text stays short and ends.
 * The pattern translator and the integer ranges are further down. */
#include "json_schema.h"

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
    "@hex ::= [0-9a-fA-F]\n"
    "@integer ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15})\n"
    "@number ::= @integer (\".\" [0-9]{1,15})? ([eE] [-+]? [0-9]{1,3})?\n"
    "@boolean ::= \"true\" | \"false\"\n"
    "@null ::= \"null\"\n"
    "@value ::= @object | @array | @string | @number | @boolean | @null\n"
    "@object ::= \"{\" @ws (@string @ws \":\" @ws @value (@ws \",\" @ws @string @ws \":\" @ws "
    "@value)*)? @ws \"}\"\n"
    "@array ::= \"[\" @ws (@value (@ws \",\" @ws @value)*)? @ws \"]\"\n";
static const char *const SHARED[] = {"ws",     "string", "char",    "kchar", "hex",   "integer",
                                     "number", "boolean", "null", "value", "object", "array"};

/* The keywords taken; any other is refused by name. */
static const char *const KNOWN[] = {
    "type", "properties", "required", "additionalProperties", "items", "prefixItems", "minItems",
    "maxItems", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions",
    "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "title", "description", "$schema", "$id", "$comment", "default",
    "examples"};
/* Those that say nothing about the value. */
static const char *const ANNOTATIONS[] = {"title",   "description", "$schema", "$id", "$comment",
                                          "default", "examples",    "$defs",   "definitions"};
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

static int pattern_rule(gen *g, const char *pattern);

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
        size_t old = push(g, "pattern");
        int rc = pattern_rule(g, json_string_value(pattern));
        pop(g, old);
        return rc;
    }
    if (format)
        return format_rule(g, format);
    if (hi >= 0 && lo > hi)
        return fail(g, "maxLength", "'maxLength' is below 'minLength'");
    if (lo < 0 && hi < 0) {
        emit(g, "@string");
        return 0;
    }
    emit(g, "\"\\\"\" @char");
    repeat(g, lo < 0 ? 0 : lo, hi);
    emit(g, " \"\\\"\"");
    return 0;
}

/* ---- patterns: an ECMA-262 subset, as the text inside a JSON string ----
 * Every regular-expression atom is a set of code points; a set is written
 * as the JSON text of its members: most characters as themselves, the
 * quote, the backslash and control characters as their escapes.  A
 * negated set never produces those three kinds (it stays inside the set,
 * which is all a text needs). */

#define SET_MAX 64
#define RX_MAX_NESTING 24

typedef struct cset {
    uint32_t lo[SET_MAX], hi[SET_MAX];
    int n, neg;
} cset;

typedef struct rx {
    gen *g;
    const char *p, *end;
    int depth;
} rx;

static const uint32_t SPACES[][2] = {{0x09, 0x0d}, {0x20, 0x20}, {0xa0, 0xa0}, {0x1680, 0x1680},
                                     {0x2000, 0x200a}, {0x2028, 0x2029}, {0x202f, 0x202f},
                                     {0x205f, 0x205f}, {0x3000, 0x3000}, {0xfeff, 0xfeff}};
static const uint32_t WORD[][2] = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
static const uint32_t DIGIT[][2] = {{'0', '9'}};
static const uint32_t LINE_ENDS[][2] = {{0x0a, 0x0a}, {0x0d, 0x0d}, {0x2028, 0x2029}};

static int rx_say(rx *r, json_schema_status status, const char *detail)
{
    int left = (int)(r->end - r->p);
    if (!left)
        return (status == JSON_SCHEMA_INVALID ? fail : refuse)(r->g, NULL, "%s (at its end)", detail);
    return (status == JSON_SCHEMA_INVALID ? fail : refuse)(r->g, NULL, "%s (before '%.*s')", detail,
                                                           left < 20 ? left : 20, r->p);
}

/* A pattern that is not a regular expression. */
static int rx_fail(rx *r, const char *detail)
{
    return rx_say(r, JSON_SCHEMA_INVALID, detail);
}

/* One whose feature is not taken here. */
static int rx_refuse(rx *r, const char *detail)
{
    return rx_say(r, JSON_SCHEMA_UNSUPPORTED, detail);
}

static int set_add(rx *r, cset *c, uint32_t lo, uint32_t hi)
{
    if (c->n == SET_MAX)
        return rx_refuse(r, "a character class with too many ranges");
    c->lo[c->n] = lo;
    c->hi[c->n++] = hi;
    return 0;
}

static int set_add_list(rx *r, cset *c, const uint32_t (*list)[2], size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (set_add(r, c, list[i][0], list[i][1]))
            return -1;
    return 0;
}
#define SET_LIST(r, c, list) set_add_list(r, c, list, sizeof list / sizeof *list)

/* The next UTF-8 character of the pattern. */
static uint32_t rx_char(rx *r)
{
    const unsigned char *p = (const unsigned char *)r->p;
    int n = p[0] < 0x80 ? 1 : p[0] < 0xe0 ? 2 : p[0] < 0xf0 ? 3 : 4;
    uint32_t cp = n == 1 ? p[0] : p[0] & (0x3f >> (n - 1));
    for (int i = 1; i < n && r->p + i < r->end; i++)
        cp = cp << 6 | (p[i] & 0x3f);
    r->p = r->p + n < r->end ? r->p + n : r->end;
    return cp;
}

static int hex_digits(rx *r, int n, uint32_t *cp)
{
    *cp = 0;
    for (int i = 0; i < n; i++, r->p++) {
        char c = r->p < r->end ? *r->p : 0;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return rx_fail(r, "an escape with too few hex digits");
        *cp = *cp << 4 | (uint32_t)d;
    }
    return 0;
}

/* After a backslash: a class escape (\d \w \s and their negations) into c,
 * or one character into *cp (c untouched). */
static int rx_escape(rx *r, cset *c, uint32_t *cp, int in_class)
{
    if (r->p >= r->end)
        return rx_fail(r, "a backslash at the end");
    char e = *r->p++;
    switch (e) {
    case 'd': case 'D': c->neg = e == 'D'; return SET_LIST(r, c, DIGIT);
    case 'w': case 'W': c->neg = e == 'W'; return SET_LIST(r, c, WORD);
    case 's': case 'S': c->neg = e == 'S'; return SET_LIST(r, c, SPACES);
    case 'n': *cp = '\n'; return 0;
    case 't': *cp = '\t'; return 0;
    case 'r': *cp = '\r'; return 0;
    case 'f': *cp = '\f'; return 0;
    case 'v': *cp = '\v'; return 0;
    case 'x': return hex_digits(r, 2, cp);
    case 'u': return hex_digits(r, 4, cp);
    case '0':
        if (r->p < r->end && *r->p >= '0' && *r->p <= '9')
            return rx_refuse(r, "an octal escape is not supported");
        *cp = 0;
        return 0;
    case 'b':
        if (in_class) {
            *cp = '\b';
            return 0;
        }
        return rx_refuse(r, "the word boundary \\b is not supported");
    default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '1' && e <= '9'))
            return rx_refuse(r, e >= '1' && e <= '9' ? "a back reference is not supported"
                                                   : "this escape is not supported");
        r->p--;
        *cp = rx_char(r);
        return 0;
    }
}

static void put_cp_class(FILE *o, uint32_t cp)
{
    fprintf(o, cp > 0xffff ? "\\U%08X" : "\\u%04X", (unsigned)cp);
}

static void put_utf8(FILE *o, uint32_t cp)
{
    if (cp < 0x80) {
        fputc((int)cp, o);
    } else if (cp < 0x800) {
        fputc((int)(0xc0 | cp >> 6), o);
        fputc((int)(0x80 | (cp & 0x3f)), o);
    } else if (cp < 0x10000) {
        fputc((int)(0xe0 | cp >> 12), o);
        fputc((int)(0x80 | (cp >> 6 & 0x3f)), o);
        fputc((int)(0x80 | (cp & 0x3f)), o);
    } else {
        fputc((int)(0xf0 | cp >> 18), o);
        fputc((int)(0x80 | (cp >> 12 & 0x3f)), o);
        fputc((int)(0x80 | (cp >> 6 & 0x3f)), o);
        fputc((int)(0x80 | (cp & 0x3f)), o);
    }
}

/* One code point as a GBNF literal of its JSON text. */
static void put_json_char(FILE *o, uint32_t cp)
{
    static const char SHORT[] = {['\b'] = 'b', ['\t'] = 't', ['\n'] = 'n', ['\f'] = 'f', ['\r'] = 'r'};
    if (cp == '"' || cp == '\\')
        fprintf(o, "\"\\\\\\%c\"", (int)cp);
    else if (cp < 0x20 && cp < sizeof SHORT && SHORT[cp])
        fprintf(o, "\"\\\\%c\"", SHORT[cp]);
    else if (cp < 0x20)
        fprintf(o, "\"\\\\u%04x\"", (unsigned)cp);
    else {
        fputc('"', o);
        put_utf8(o, cp);
        fputc('"', o);
    }
}

/* A set as a GBNF primary (a literal, a class or a group). */
static void put_set(gen *g, const cset *c)
{
    FILE *o = g->out;
    if (c->neg) {
        fputs("[^", o);
        for (int i = 0; i < c->n; i++) {
            put_cp_class(o, c->lo[i]);
            if (c->hi[i] != c->lo[i]) {
                fputc('-', o);
                put_cp_class(o, c->hi[i]);
            }
        }
        fputs("\\u0000-\\u001F\\u0022\\u005C]", o);
        return;
    }
    if (c->n == 1 && c->lo[0] == c->hi[0]) {
        put_json_char(o, c->lo[0]);
        return;
    }
    /* runs of plain characters as classes, the escaped ones as literals */
    int alts = 0;
    fputc('(', o);
    for (int i = 0; i < c->n; i++) {
        for (uint32_t lo = c->lo[i], hi; lo <= c->hi[i]; lo = hi + 1) {
            fputs(alts++ ? " | " : "", o);
            hi = lo;
            if (lo < 0x20 || lo == '"' || lo == '\\') {
                put_json_char(o, lo);
                continue;
            }
            while (hi < c->hi[i] && hi + 1 >= 0x20 && hi + 1 != '"' && hi + 1 != '\\')
                hi++;
            fputc('[', o);
            put_cp_class(o, lo);
            if (hi != lo) {
                fputc('-', o);
                put_cp_class(o, hi);
            }
            fputc(']', o);
        }
    }
    fputc(')', o);
}

static int rx_alt(rx *r);

/* [...] after its '[' */
static int rx_class(rx *r, cset *c)
{
    if (r->p < r->end && *r->p == '^') {
        c->neg = 1;
        r->p++;
    }
    if (r->p < r->end && *r->p == ']')
        return rx_fail(r, "an empty character class");
    while (r->p < r->end && *r->p != ']') {
        uint32_t lo, hi;
        cset sub = {.n = 0};
        if (*r->p == '\\') {
            r->p++;
            if (rx_escape(r, &sub, &lo, 1))
                return -1;
            if (sub.n) {
                if (sub.neg)
                    return rx_refuse(r, "\\D, \\W or \\S inside a class is not supported");
                for (int i = 0; i < sub.n; i++)
                    if (set_add(r, c, sub.lo[i], sub.hi[i]))
                        return -1;
                continue;
            }
        } else {
            lo = rx_char(r);
        }
        hi = lo;
        if (r->p + 1 < r->end && *r->p == '-' && r->p[1] != ']') {
            r->p++;
            if (*r->p == '\\') {
                r->p++;
                if (rx_escape(r, &sub, &hi, 1))
                    return -1;
                if (sub.n)
                    return rx_fail(r, "a class escape as the end of a range");
            } else {
                hi = rx_char(r);
            }
            if (hi < lo)
                return rx_fail(r, "a range out of order");
        }
        if (set_add(r, c, lo, hi))
            return -1;
    }
    if (r->p >= r->end)
        return rx_fail(r, "an unterminated character class");
    r->p++;
    return 0;
}

/* A decimal number of a repetition. */
static int rx_number(rx *r, long *n)
{
    if (r->p >= r->end || *r->p < '0' || *r->p > '9')
        return rx_fail(r, "'{' that is not a repetition {m}, {m,} or {m,n}");
    *n = 0;
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
        if ((*n = *n * 10 + (*r->p++ - '0')) > ML_GRAMMAR_MAX_REPEAT)
            return rx_refuse(r, "a repetition above 2000");
    return 0;
}

static int rx_quantifier(rx *r)
{
    if (r->p >= r->end)
        return 0;
    char q = *r->p;
    if (q == '*' || q == '+' || q == '?') {
        fputc(q, r->g->out);
        r->p++;
    } else if (q == '{') {
        long m, n = -1;
        r->p++;
        if (rx_number(r, &m))
            return -1;
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            if (r->p < r->end && *r->p != '}' && rx_number(r, &n))
                return -1;
        } else {
            n = m;
        }
        if (r->p >= r->end || *r->p != '}')
            return rx_fail(r, "'{' that is not a repetition {m}, {m,} or {m,n}");
        r->p++;
        if (n >= 0 && n < m)
            return rx_fail(r, "a repetition {m,n} with n below m");
        if (n < 0)
            fprintf(r->g->out, "{%ld,}", m);
        else
            fprintf(r->g->out, "{%ld,%ld}", m, n);
    } else {
        return 0;
    }
    if (r->p < r->end && *r->p == '?') /* lazy: the same texts match whole */
        r->p++;
    if (r->p < r->end && (*r->p == '*' || *r->p == '+' || *r->p == '?' || *r->p == '{'))
        return rx_fail(r, "a repetition of a repetition");
    return 0;
}

static int rx_atom(rx *r)
{
    cset c = {.n = 0};
    uint32_t cp;
    char a = *r->p;
    if (a == '(') {
        r->p++;
        if (r->p + 1 < r->end && r->p[0] == '?' && r->p[1] == ':')
            r->p += 2;
        else if (r->p < r->end && *r->p == '?')
            return rx_refuse(r, "a lookaround or named group is not supported");
        if (++r->depth > RX_MAX_NESTING)
            return rx_refuse(r, "groups nested too deep");
        if (rx_alt(r))
            return -1;
        r->depth--;
        if (r->p >= r->end || *r->p != ')')
            return rx_fail(r, "a '(' without its ')'");
        r->p++;
        return 0;
    }
    if (a == ')')
        return rx_fail(r, "a ')' without its '('");
    if (a == '*' || a == '+' || a == '?' || a == '{')
        return rx_fail(r, "a repetition of nothing");
    if (a == '^' || a == '$')
        return rx_refuse(r, "an anchor inside the pattern is not supported");
    if (a == '[') {
        r->p++;
        if (rx_class(r, &c))
            return -1;
    } else if (a == '.') {
        r->p++;
        c.neg = 1;
        if (SET_LIST(r, &c, LINE_ENDS))
            return -1;
    } else if (a == '\\') {
        r->p++;
        if (rx_escape(r, &c, &cp, 0))
            return -1;
        if (!c.n && set_add(r, &c, cp, cp))
            return -1;
    } else {
        cp = rx_char(r);
        if (set_add(r, &c, cp, cp))
            return -1;
    }
    put_set(r->g, &c);
    return 0;
}

/* Alternatives of sequences, as a group. */
static int rx_alt(rx *r)
{
    fputc('(', r->g->out);
    for (;;) {
        int items = 0;
        while (r->p < r->end && *r->p != '|' && *r->p != ')') {
            fputs(items++ ? " " : "", r->g->out);
            if (rx_atom(r) || rx_quantifier(r))
                return -1;
        }
        if (!items)
            fputs("\"\"", r->g->out);
        if (r->p >= r->end || *r->p != '|')
            break;
        r->p++;
        fputs(" | ", r->g->out);
    }
    fputc(')', r->g->out);
    return 0;
}

/* A pattern "^...$": the whole string follows it (a text that matches
 * whole matches anywhere, so the grammar is stricter than the regular
 * expression, never looser). */
static int pattern_rule(gen *g, const char *pattern)
{
    size_t n = strlen(pattern), backslashes = 0;
    while (n >= 2 + backslashes && pattern[n - 2 - backslashes] == '\\')
        backslashes++;
    if (n < 2 || pattern[0] != '^' || pattern[n - 1] != '$' || backslashes % 2)
        return refuse(g, NULL, "a 'pattern' must start with ^ and end with $ (a pattern that may "
                             "match inside the string is not supported)");
    rx r = {.g = g, .p = pattern + 1, .end = pattern + n - 1};
    fputs("\"\\\"\" ", g->out);
    if (rx_alt(&r))
        return -1;
    if (r.p != r.end)
        return rx_fail(&r, "a ')' without its '('");
    fputs(" \"\\\"\"", g->out);
    return 0;
}

/* ---- integers between bounds: decimal digit ranges ---- */

static const char NINES[] = "999999999999999999999999";
static const char ZEROS[] = "000000000000000000000000";

static int all_of(const char *s, char c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != c)
            return 0;
    return 1;
}

/* The n-digit strings from a to b (leading zeros are digits here). */
static void digits_between(FILE *o, const char *a, const char *b, size_t n)
{
    size_t i = 0;
    while (i < n && a[i] == b[i])
        i++;
    if (i)
        fprintf(o, "\"%.*s\"%s", (int)i, a, i < n ? " " : "");
    if (i == n)
        return;
    size_t rest = n - i - 1;
    if (!rest) {
        fprintf(o, "[%c-%c]", a[i], b[i]);
        return;
    }
    int low_whole = all_of(a + i + 1, '0', rest), high_whole = all_of(b + i + 1, '9', rest);
    char from = a[i], to = high_whole ? b[i] : (char)(b[i] - 1);
    const char *sep = "";
    fputc('(', o);
    if (!low_whole) { /* a's first digit, then at least the rest of a */
        fprintf(o, "\"%c\" (", a[i]);
        digits_between(o, a + i + 1, NINES, rest);
        fputc(')', o);
        sep = " | ";
        from++;
    }
    if (from <= to) {
        fprintf(o, "%s[%c-%c] [0-9]{%zu}", sep, from, to, rest);
        sep = " | ";
    }
    if (!high_whole) { /* b's first digit, then at most the rest of b */
        fprintf(o, "%s\"%c\" (", sep, b[i]);
        digits_between(o, ZEROS, b + i + 1, rest);
        fputc(')', o);
    }
    fputc(')', o);
}

/* Magnitudes from lo to hi (bounded) or up (at most 16 digits, as the
 * plain integer rule, or lo's). */
static void magnitudes(FILE *o, uint64_t lo, uint64_t hi, int bounded)
{
    char a[24], b[24], ten[24];
    snprintf(a, sizeof a, "%llu", (unsigned long long)lo);
    snprintf(b, sizeof b, "%llu", (unsigned long long)hi);
    size_t la = strlen(a), lb = bounded ? strlen(b) : (la > 16 ? la : 16);
    fputc('(', o);
    digits_between(o, a, lb == la && bounded ? b : NINES, la);
    if (lb > la) {
        size_t whole = bounded ? lb - 1 : lb; /* lengths la+1..whole in full */
        if (whole > la)
            fprintf(o, " | [1-9] [0-9]{%zu,%zu}", la, whole - 1);
        if (bounded) {
            snprintf(ten, sizeof ten, "1%.*s", (int)(lb - 1), ZEROS);
            fputs(" | ", o);
            digits_between(o, ten, b, lb);
        }
    }
    fputc(')', o);
}

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
    int alts = 0;
    if (!has_lo || lo < 0) { /* "-" and magnitudes from -hi (or 1) to -lo */
        uint64_t from = has_hi && hi < 0 ? 0 - (uint64_t)hi : 1;
        fputs("\"-\" ", g->out);
        magnitudes(g->out, from, has_lo ? 0 - (uint64_t)lo : 0, has_lo);
        alts++;
    }
    if (!has_hi || hi >= 0) {
        fputs(alts ? " | " : "", g->out);
        magnitudes(g->out, has_lo && lo > 0 ? (uint64_t)lo : 0, has_hi ? (uint64_t)hi : 0, has_hi);
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
        rx r = {.g = g, .p = names[j] + off, .end = names[j] + off + len};
        put_cp_class(g->out, rx_char(&r));
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
    if (!strcmp(type, "number"))
        for (size_t i = 0; i < 4; i++)
            if (json_object_get(s, INT_BOUNDS[i]))
                return refuse(g, INT_BOUNDS[i],
                            "'%s' on a number is not supported (a grammar cannot bound "
                            "decimals; type integer can be bounded)", INT_BOUNDS[i]);
    emit(g, "@r%u ::= ", id);
    int rc = 0;
    if (!strcmp(type, "string"))
        rc = string_rule(g, s);
    else if (!strcmp(type, "integer"))
        rc = integer_rule(g, s);
    else if (!strcmp(type, "number") || !strcmp(type, "boolean") || !strcmp(type, "null"))
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
            return refuse(g, INT_BOUNDS[i], "'%s' needs \"type\": \"integer\" (a number's bounds "
                        "cannot be kept by a grammar)", INT_BOUNDS[i]);
    emit(g, "@r%u ::= @value\n", id);
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
    if (has(s, "const") || has(s, "enum"))
        return enum_rule(g, s, depth, *id);
    if (has(s, "anyOf") || has(s, "oneOf"))
        return alternatives(g, has(s, "anyOf") ? "anyOf" : "oneOf",
                            json_object_get(s, has(s, "anyOf") ? "anyOf" : "oneOf"), depth, *id);
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
