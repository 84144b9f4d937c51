/* json_schema_pattern.c - a JSON Schema "pattern" (json_schema_pattern.h):
 * an ECMA-262 regular expression, anchored with ^ and $, as GBNF.  Every
 * atom is a set of code points; a set is written as the JSON text of its
 * members: most characters as themselves, the quote, the backslash and
 * control characters as their escapes.  A negated set never produces
 * those three kinds (it stays inside the set, which is all a text needs),
 * and "." and \s keep ECMA-262's line ends and spaces. */
#include "json_schema_pattern.h"

#include <mlcore.h>

#include <stdint.h>
#include <string.h>

#define SET_MAX 64
#define RX_MAX_NESTING 24

typedef struct cset {
    uint32_t lo[SET_MAX], hi[SET_MAX];
    int n, neg;
} cset;

typedef struct rx {
    FILE *out;
    const char *p, *end;
    int depth;
    char *why; /* the message of a failure */
    size_t why_size;
    int unsupported; /* of a failure: a feature not taken, not a wrong pattern */
} rx;

static const uint32_t SPACES[][2] = {{0x09, 0x0d}, {0x20, 0x20}, {0xa0, 0xa0}, {0x1680, 0x1680},
                                     {0x2000, 0x200a}, {0x2028, 0x2029}, {0x202f, 0x202f},
                                     {0x205f, 0x205f}, {0x3000, 0x3000}, {0xfeff, 0xfeff}};
static const uint32_t WORD[][2] = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
static const uint32_t DIGIT[][2] = {{'0', '9'}};
static const uint32_t LINE_ENDS[][2] = {{0x0a, 0x0a}, {0x0d, 0x0d}, {0x2028, 0x2029}};

static int rx_say(rx *r, int unsupported, const char *detail)
{
    int left = (int)(r->end - r->p);
    if (!left)
        snprintf(r->why, r->why_size, "%s (at its end)", detail);
    else
        snprintf(r->why, r->why_size, "%s (before '%.*s')", detail, left < 20 ? left : 20, r->p);
    r->unsupported = unsupported;
    return -1;
}

/* A pattern that is not a regular expression. */
static int rx_fail(rx *r, const char *detail)
{
    return rx_say(r, 0, detail);
}

/* One whose feature is not taken here. */
static int rx_refuse(rx *r, const char *detail)
{
    return rx_say(r, 1, detail);
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
static void put_set(FILE *o, const cset *c)
{
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
        fputc(q, r->out);
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
            fprintf(r->out, "{%ld,}", m);
        else
            fprintf(r->out, "{%ld,%ld}", m, n);
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
    put_set(r->out, &c);
    return 0;
}

/* Alternatives of sequences, as a group. */
static int rx_alt(rx *r)
{
    fputc('(', r->out);
    for (;;) {
        int items = 0;
        while (r->p < r->end && *r->p != '|' && *r->p != ')') {
            fputs(items++ ? " " : "", r->out);
            if (rx_atom(r) || rx_quantifier(r))
                return -1;
        }
        if (!items)
            fputs("\"\"", r->out);
        if (r->p >= r->end || *r->p != '|')
            break;
        r->p++;
        fputs(" | ", r->out);
    }
    fputc(')', r->out);
    return 0;
}

/* A pattern "^...$": the whole string follows it (a text that matches
 * whole matches anywhere, so the grammar is stricter than the regular
 * expression, never looser). */
int json_schema_pattern(FILE *out, const char *pattern, char *why, size_t why_size,
                        int *unsupported)
{
    size_t n = strlen(pattern), backslashes = 0;
    while (n >= 2 + backslashes && pattern[n - 2 - backslashes] == '\\')
        backslashes++;
    *unsupported = 1;
    if (n < 2 || pattern[0] != '^' || pattern[n - 1] != '$' || backslashes % 2) {
        snprintf(why, why_size, "a 'pattern' must start with ^ and end with $ (a pattern that "
                                "may match inside the string is not supported)");
        return -1;
    }
    rx r = {.out = out, .p = pattern + 1, .end = pattern + n - 1, .why = why, .why_size = why_size};
    fputs("\"\\\"\" ", out);
    int rc = rx_alt(&r);
    if (!rc && r.p != r.end)
        rc = rx_fail(&r, "a ')' without its '('");
    *unsupported = r.unsupported;
    if (rc)
        return -1;
    fputs(" \"\\\"\"", out);
    return 0;
}
