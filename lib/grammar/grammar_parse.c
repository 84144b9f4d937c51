/* grammar_parse.c - GBNF text to a grammar (ml_grammar_parse): a
 * recursive-descent parser that builds each rule's elements, rewrites
 * repetitions into rules of their own (S{m,n} is S m times, then n - m
 * nested optional rules; S{m,} ends with a rule S' ::= S S' | ), then
 * flattens the rules into one array and checks them: every rule used is
 * defined, the start rule exists, no rule is left-recursive.  Every size
 * is capped (mlcore/grammar.h) before it is reached. */
#include "grammar/grammar.h"

#include <stdio.h>
#include <stdlib.h>

/* A rule as it is built. */
typedef struct prule {
    gelem *el;
    size_t n, cap;
    size_t name_off, name_len; /* in the text; the owner's for a made rule */
    size_t def_off;            /* where it is defined (or its owner is) */
    size_t use_off;            /* its first use */
    int defined, made;         /* made: a group's or a repetition's */
} prule;

typedef struct parser {
    const char *s;
    size_t n, i;
    int depth;              /* parentheses open */
    prule *r;
    size_t n_rules, cap_rules;
    size_t *tab;            /* named rules by hash: index + 1, 0 free */
    size_t tab_cap;
    uint64_t n_el;          /* elements of all rules */
    ml_error *err;
} parser;

/* ------------------------------------------------------------------------
 * Errors: line and column of a byte offset
 * ------------------------------------------------------------------------ */
static ml_status perr(parser *p, ml_status code, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static ml_status perr(parser *p, ml_status code, size_t off, const char *fmt, ...)
{
    size_t line = 1, col = 1;
    for (size_t k = 0; k < off && k < p->n; k++) {
        unsigned char c = (unsigned char)p->s[k];
        if (c == '\n')
            line++, col = 1;
        else if ((c & 0xc0) != 0x80) /* columns count characters */
            col++;
    }
    char where[64], detail[sizeof p->err->msg];
    snprintf(where, sizeof where, "line %zu, column %zu", line, col);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return ml__err(p->err, code, where, (int64_t)off, "%s", detail);
}

/* What lies at the cursor, for "expected X, found Y". */
static const char *found(const parser *p, char *buf, size_t n)
{
    if (p->i >= p->n)
        return "the end";
    unsigned char c = (unsigned char)p->s[p->i];
    if (c == '\n' || c == '\r')
        return "a line end";
    if (c >= 0x20 && c < 0x7f)
        snprintf(buf, n, "'%c'", c);
    else
        snprintf(buf, n, "byte 0x%02x", c);
    return buf;
}

static ml_status expected(parser *p, const char *what)
{
    char b[16];
    return perr(p, ML_E_FORMAT, p->i, "expected %s, found %s", what, found(p, b, sizeof b));
}

/* ------------------------------------------------------------------------
 * Rules and their elements
 * ------------------------------------------------------------------------ */
static ml_status push(parser *p, size_t rule, uint32_t type, uint32_t value)
{
    prule *r = &p->r[rule];
    if (p->n_el >= ML_GRAMMAR_MAX_ELEMENTS)
        return perr(p, ML_E_UNSUPPORTED, p->i, "more than %u grammar elements",
                    ML_GRAMMAR_MAX_ELEMENTS);
    gelem *v = ml_array_reserve(r->el, &r->cap, r->n + 1, sizeof *v);
    if (!v)
        return ml__err(p->err, ML_E_NOMEM, "", -1, "out of memory");
    r->el = v;
    r->el[r->n++] = (gelem){type, value};
    p->n_el++;
    return ML_OK;
}

static ml_status new_rule(parser *p, size_t *id)
{
    if (p->n_rules >= ML_GRAMMAR_MAX_RULES)
        return perr(p, ML_E_UNSUPPORTED, p->i, "more than %u rules (groups and repetitions "
                    "count)", ML_GRAMMAR_MAX_RULES);
    prule *v = ml_array_reserve(p->r, &p->cap_rules, p->n_rules + 1, sizeof *v);
    if (!v)
        return ml__err(p->err, ML_E_NOMEM, "", -1, "out of memory");
    p->r = v;
    p->r[p->n_rules] = (prule){0};
    *id = p->n_rules++;
    return ML_OK;
}

/* A rule made for a group or repetition inside rule `owner`. */
static ml_status made_rule(parser *p, size_t owner, size_t *id)
{
    ml_status s = new_rule(p, id);
    if (s)
        return s;
    prule *r = &p->r[*id], *o = &p->r[owner];
    r->name_off = o->name_off, r->name_len = o->name_len, r->def_off = o->def_off;
    r->defined = r->made = 1;
    return ML_OK;
}

static uint64_t name_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t k = 0; k < n; k++)
        h = (h ^ (unsigned char)s[k]) * 1099511628211ull;
    return h;
}

static ml_status grow_tab(parser *p)
{
    size_t cap = p->tab_cap ? p->tab_cap * 2 : 256;
    size_t *t = calloc(cap, sizeof *t);
    if (!t)
        return ml__err(p->err, ML_E_NOMEM, "", -1, "out of memory");
    for (size_t k = 0; k < p->tab_cap; k++) {
        if (!p->tab[k])
            continue;
        const prule *r = &p->r[p->tab[k] - 1];
        size_t h = (size_t)name_hash(p->s + r->name_off, r->name_len) & (cap - 1);
        while (t[h])
            h = (h + 1) & (cap - 1);
        t[h] = p->tab[k];
    }
    free(p->tab);
    p->tab = t, p->tab_cap = cap;
    return ML_OK;
}

/* The named rule at s[off, off + len), made (undefined) when new. */
static ml_status rule_id(parser *p, size_t off, size_t len, size_t *id)
{
    if (p->n_rules * 2 >= p->tab_cap) {
        ml_status s = grow_tab(p);
        if (s)
            return s;
    }
    size_t h = (size_t)name_hash(p->s + off, len) & (p->tab_cap - 1);
    for (; p->tab[h]; h = (h + 1) & (p->tab_cap - 1)) {
        const prule *r = &p->r[p->tab[h] - 1];
        if (r->name_len == len && !memcmp(p->s + r->name_off, p->s + off, len)) {
            *id = p->tab[h] - 1;
            return ML_OK;
        }
    }
    ml_status s = new_rule(p, id);
    if (s)
        return s;
    p->r[*id].name_off = off, p->r[*id].name_len = len;
    p->r[*id].use_off = off;
    p->tab[h] = *id + 1;
    return ML_OK;
}

/* ------------------------------------------------------------------------
 * Lexical pieces
 * ------------------------------------------------------------------------ */
static int at(const parser *p, size_t k)
{
    return p->i + k < p->n ? (unsigned char)p->s[p->i + k] : -1;
}

/* Blanks and comments; line ends too where newline_ok. */
static void skip_space(parser *p, int newline_ok)
{
    for (int c; (c = at(p, 0)) != -1;) {
        if (c == '#') {
            while ((c = at(p, 0)) != -1 && c != '\n' && c != '\r')
                p->i++;
        } else if (c == ' ' || c == '\t' || (newline_ok && (c == '\n' || c == '\r'))) {
            p->i++;
        } else {
            break;
        }
    }
}

static int is_name_char(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_';
}

static int hex_val(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static ml_status parse_hex(parser *p, int digits, uint32_t *cp)
{
    uint32_t v = 0;
    for (int k = 0; k < digits; k++) {
        int h = hex_val(at(p, 0));
        if (h < 0)
            return perr(p, ML_E_FORMAT, p->i, "expected %d hex digits in the escape", digits);
        v = v << 4 | (uint32_t)h;
        p->i++;
    }
    *cp = v;
    return ML_OK;
}

static ml_status parse_escape(parser *p, uint32_t *cp)
{
    size_t start = p->i;
    int c = at(p, 1);
    p->i += 2;
    ml_status s = ML_OK;
    switch (c) {
    case 'x': s = parse_hex(p, 2, cp); break;
    case 'u': s = parse_hex(p, 4, cp); break;
    case 'U': s = parse_hex(p, 8, cp); break;
    case 'n': *cp = '\n'; break;
    case 't': *cp = '\t'; break;
    case 'r': *cp = '\r'; break;
    case '\\': case '"': case '[': case ']': case '-': *cp = (uint32_t)c; break;
    default:
        return perr(p, ML_E_FORMAT, start, "unknown escape (expected \\n \\t \\r \\\\ \\\" \\[ "
                    "\\] \\- \\xHH \\uHHHH or \\UHHHHHHHH)");
    }
    if (!s && *cp > 0x10ffff)
        return perr(p, ML_E_FORMAT, start, "escape U+%X beyond U+10FFFF", *cp);
    return s;
}

/* One character of a literal or class: an escape or a UTF-8 sequence. */
static ml_status parse_char(parser *p, uint32_t *cp)
{
    int c = at(p, 0);
    if (c == -1)
        return expected(p, "a character");
    if (c == '\\')
        return parse_escape(p, cp);
    gutf8 u = {0};
    uint32_t lo, hi;
    size_t start = p->i;
    for (;;) {
        int r = ml__gutf8_byte(&u, (uint8_t)c, cp, &lo, &hi);
        p->i++;
        if (r < 0)
            return perr(p, ML_E_FORMAT, start, "invalid UTF-8");
        if (r > 0)
            return ML_OK;
        if ((c = at(p, 0)) == -1)
            return perr(p, ML_E_FORMAT, start, "invalid UTF-8 (cut at the end)");
    }
}

static ml_status parse_int(parser *p, uint64_t *v)
{
    if (at(p, 0) < '0' || at(p, 0) > '9')
        return expected(p, "a number");
    size_t start = p->i;
    uint64_t x = 0;
    for (int c; (c = at(p, 0)) >= '0' && c <= '9'; p->i++)
        if (x <= ML_GRAMMAR_MAX_REPEAT)
            x = x * 10 + (uint64_t)(c - '0');
    if (x > ML_GRAMMAR_MAX_REPEAT)
        return perr(p, ML_E_UNSUPPORTED, start, "a repetition bound above %u",
                    ML_GRAMMAR_MAX_REPEAT);
    *v = x;
    return ML_OK;
}

/* ------------------------------------------------------------------------
 * Sequences, alternatives, repetitions
 * ------------------------------------------------------------------------ */
static ml_status parse_alternates(parser *p, size_t rule, int nested);

/* Rewrites the symbol at [from, end) of rule into `min` copies and the
 * optional rest (the rewrite named at the top of the file). */
static ml_status repeat(parser *p, size_t rule, size_t from, uint64_t min, uint64_t max,
                        int unbounded)
{
    size_t len = p->r[rule].n - from;
    gelem *sym = malloc(len * sizeof *sym);
    if (!sym)
        return ml__err(p->err, ML_E_NOMEM, "", -1, "out of memory");
    memcpy(sym, p->r[rule].el + from, len * sizeof *sym);
    ml_status s = ML_OK;
    if (min == 0) {
        p->n_el -= len;
        p->r[rule].n = from;
    }
    for (uint64_t k = 1; k < min && !s; k++)
        for (size_t j = 0; j < len && !s; j++)
            s = push(p, rule, sym[j].type, sym[j].value);
    uint64_t n_opt = unbounded ? 1 : max - min;
    size_t last = 0;
    for (uint64_t k = 0; k < n_opt && !s; k++) {
        size_t id;
        if ((s = made_rule(p, rule, &id)))
            break;
        for (size_t j = 0; j < len && !s; j++)
            s = push(p, id, sym[j].type, sym[j].value);
        if (!s && (k > 0 || unbounded))
            s = push(p, id, G_REF, (uint32_t)(unbounded ? id : last));
        if (!s)
            s = push(p, id, G_ALT, 0);
        if (!s)
            s = push(p, id, G_END, 0);
        last = id;
    }
    if (!s && n_opt > 0)
        s = push(p, rule, G_REF, (uint32_t)last);
    free(sym);
    return s;
}

/* {m}, {m,}, {m,n} after the '{'. */
static ml_status parse_braces(parser *p, size_t rule, size_t from, int nested)
{
    uint64_t min, max = 0;
    int unbounded = 0;
    size_t start = p->i - 1;
    skip_space(p, nested);
    ml_status s = parse_int(p, &min);
    if (s)
        return s;
    skip_space(p, nested);
    if (at(p, 0) == ',') {
        p->i++;
        skip_space(p, nested);
        if (at(p, 0) >= '0' && at(p, 0) <= '9') {
            if ((s = parse_int(p, &max)))
                return s;
            skip_space(p, nested);
        } else {
            unbounded = 1;
        }
    } else {
        max = min;
    }
    if (at(p, 0) != '}')
        return expected(p, "'}' or ','");
    p->i++;
    if (!unbounded && max < min)
        return perr(p, ML_E_FORMAT, start, "a repetition {%llu,%llu} whose maximum is below its "
                    "minimum", (unsigned long long)min, (unsigned long long)max);
    return repeat(p, rule, from, min, max, unbounded);
}

/* "..." after the quote. */
static ml_status parse_literal(parser *p, size_t rule)
{
    size_t start = p->i - 1;
    ml_status s = ML_OK;
    while (!s && at(p, 0) != '"') {
        uint32_t cp;
        if (at(p, 0) == -1)
            return perr(p, ML_E_FORMAT, start, "a string without its closing '\"'");
        if (!(s = parse_char(p, &cp)))
            s = push(p, rule, G_CHAR, cp);
    }
    p->i++;
    return s;
}

/* [...] after the bracket. */
static ml_status parse_class(parser *p, size_t rule)
{
    size_t start = p->i - 1, first = p->r[rule].n;
    uint32_t type = G_CHAR;
    if (at(p, 0) == '^')
        p->i++, type = G_CHAR_NOT;
    ml_status s = ML_OK;
    while (!s && at(p, 0) != ']') {
        uint32_t lo, hi;
        if (at(p, 0) == -1)
            return perr(p, ML_E_FORMAT, start, "a character class without its closing ']'");
        if ((s = parse_char(p, &lo)))
            break;
        s = push(p, rule, p->r[rule].n > first ? G_CHAR_ALT : type, lo);
        if (!s && at(p, 0) == '-' && at(p, 1) != ']' && at(p, 1) != -1) {
            size_t r0 = p->i;
            p->i++;
            if (!(s = parse_char(p, &hi)) && hi < lo)
                s = perr(p, ML_E_FORMAT, r0, "a range U+%04X-U+%04X whose end is below its start",
                         lo, hi);
            if (!s)
                s = push(p, rule, G_RNG_UPPER, hi);
        }
    }
    if (!s && p->r[rule].n == first)
        return perr(p, ML_E_FORMAT, start, "an empty character class");
    p->i++;
    return s;
}

/* ( alternatives ) after the parenthesis: a rule of their own. */
static ml_status parse_group(parser *p, size_t rule)
{
    size_t start = p->i - 1, id;
    if (p->depth >= ML_GRAMMAR_MAX_NESTING)
        return perr(p, ML_E_UNSUPPORTED, start, "parentheses nested deeper than %d",
                    ML_GRAMMAR_MAX_NESTING);
    ml_status s = made_rule(p, rule, &id);
    if (s)
        return s;
    p->depth++;
    skip_space(p, 1);
    if ((s = parse_alternates(p, id, 1)))
        return s;
    p->depth--;
    if (at(p, 0) != ')')
        return expected(p, "')'");
    p->i++;
    return push(p, rule, G_REF, (uint32_t)id);
}

static ml_status parse_ref(parser *p, size_t rule)
{
    size_t start = p->i, id;
    while (is_name_char(at(p, 0)))
        p->i++;
    ml_status s = rule_id(p, start, p->i - start, &id);
    return s ? s : push(p, rule, G_REF, (uint32_t)id);
}

/* One symbol (literal, class, `.`, name, group) or a repetition of the one
 * before; *done when the cursor is at none of them. */
static ml_status parse_item(parser *p, size_t rule, size_t *sym, int nested, int *done)
{
    int c = at(p, 0);
    size_t here = p->r[rule].n;
    ml_status s = ML_OK;
    if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (*sym == SIZE_MAX || *sym == p->r[rule].n)
            return perr(p, ML_E_FORMAT, p->i, "'%c' with nothing before it to repeat", c);
        p->i++;
        if (c == '{')
            s = parse_braces(p, rule, *sym, nested);
        else
            s = repeat(p, rule, *sym, c == '+', 1, c != '?');
        /* *sym stays: the rewritten symbol may be repeated again, x{2}{3} */
    } else if (c == '"' || c == '[' || c == '(' || c == '.' || is_name_char(c)) {
        p->i += c != '.' && !is_name_char(c);
        if (c == '"')
            s = parse_literal(p, rule);
        else if (c == '[')
            s = parse_class(p, rule);
        else if (c == '(')
            s = parse_group(p, rule);
        else if (c == '.')
            p->i++, s = push(p, rule, G_ANY, 0);
        else
            s = parse_ref(p, rule);
        *sym = here;
    } else if (c == '<' || (c == '!' && at(p, 1) == '<')) {
        return perr(p, ML_E_UNSUPPORTED, p->i, "token references (<[id]>, <token>) are not "
                    "supported");
    } else {
        *done = 1;
        return ML_OK;
    }
    if (!s)
        skip_space(p, nested);
    return s;
}

static ml_status parse_sequence(parser *p, size_t rule, int nested)
{
    size_t sym = SIZE_MAX;
    int done = 0;
    ml_status s = ML_OK;
    while (!s && !done)
        s = parse_item(p, rule, &sym, nested, &done);
    return s;
}

static ml_status parse_alternates(parser *p, size_t rule, int nested)
{
    ml_status s = parse_sequence(p, rule, nested);
    while (!s && at(p, 0) == '|') {
        p->i++;
        if (!(s = push(p, rule, G_ALT, 0))) {
            skip_space(p, 1);
            s = parse_sequence(p, rule, nested);
        }
    }
    return s ? s : push(p, rule, G_END, 0);
}

/* name ::= alternatives, up to the line end. */
static ml_status parse_rule(parser *p)
{
    size_t start = p->i, id;
    if (!is_name_char(at(p, 0)))
        return expected(p, "a rule name");
    while (is_name_char(at(p, 0)))
        p->i++;
    size_t len = p->i - start;
    ml_status s = rule_id(p, start, len, &id);
    if (s)
        return s;
    if (p->r[id].defined)
        return perr(p, ML_E_FORMAT, start, "rule '%.*s' defined twice", (int)len, p->s + start);
    p->r[id].defined = 1;
    p->r[id].def_off = start;
    skip_space(p, 0);
    if (at(p, 0) != ':' || at(p, 1) != ':' || at(p, 2) != '=')
        return expected(p, "'::=' after the rule name");
    p->i += 3;
    skip_space(p, 1);
    if ((s = parse_alternates(p, id, 0)))
        return s;
    if (at(p, 0) == '\r')
        p->i += at(p, 1) == '\n' ? 2 : 1;
    else if (at(p, 0) == '\n')
        p->i++;
    else if (at(p, 0) != -1)
        return expected(p, "a symbol, '|' or the line end");
    skip_space(p, 1);
    return ML_OK;
}

/* ------------------------------------------------------------------------
 * Checks and the flat grammar
 * ------------------------------------------------------------------------ */
static ml_status check_defined(parser *p)
{
    for (size_t k = 0; k < p->n_rules; k++)
        if (!p->r[k].defined)
            return perr(p, ML_E_FORMAT, p->r[k].use_off, "undefined rule '%.*s'",
                        (int)p->r[k].name_len, p->s + p->r[k].name_off);
    return ML_OK;
}

static ml_status flatten(parser *p, ml_grammar *g)
{
    g->n_rules = (uint32_t)p->n_rules;
    g->n_el = (uint32_t)p->n_el;
    g->el = malloc((p->n_el ? p->n_el : 1) * sizeof *g->el);
    g->start = malloc((p->n_rules ? p->n_rules : 1) * sizeof *g->start);
    if (!g->el || !g->start)
        return ml__err(p->err, ML_E_NOMEM, "", -1, "out of memory");
    uint32_t at_el = 0;
    for (size_t k = 0; k < p->n_rules; k++) {
        g->start[k] = at_el;
        memcpy(g->el + at_el, p->r[k].el, p->r[k].n * sizeof *g->el);
        at_el += (uint32_t)p->r[k].n;
    }
    return ML_OK;
}

static ml_status find_root(parser *p, ml_grammar *g, const char *root)
{
    size_t len = strlen(root);
    for (size_t k = 0; k < p->n_rules; k++)
        if (!p->r[k].made && p->r[k].name_len == len &&
            !memcmp(p->s + p->r[k].name_off, root, len)) {
            g->root = (uint32_t)k;
            return ML_OK;
        }
    return ml__err(p->err, ML_E_FORMAT, "grammar", -1, "no rule '%s' (the start rule)", root);
}

static ml_status finish(parser *p, ml_grammar *g, const char *root)
{
    ml_status s = check_defined(p);
    if (!s)
        s = find_root(p, g, root);
    if (!s)
        s = flatten(p, g);
    uint32_t bad;
    if (!s && (s = ml__grammar_left_rec(g, &bad)) == ML_E_UNSUPPORTED)
        s = perr(p, ML_E_UNSUPPORTED, p->r[bad].def_off, "rule '%.*s' is left-recursive (it "
                 "can reach itself before a character)", (int)p->r[bad].name_len,
                 p->s + p->r[bad].name_off);
    else if (s == ML_E_NOMEM)
        s = ml__err(p->err, ML_E_NOMEM, "", -1, "out of memory");
    return s;
}

static ml_status check_text(parser *p)
{
    if (p->n > ML_GRAMMAR_MAX_TEXT)
        return ml__err(p->err, ML_E_UNSUPPORTED, "grammar", -1,
                       "a grammar of %zu bytes (at most %u)", p->n, ML_GRAMMAR_MAX_TEXT);
    const char *nul = memchr(p->s, 0, p->n);
    if (nul)
        return perr(p, ML_E_FORMAT, (size_t)(nul - p->s), "a NUL byte in the grammar");
    return ML_OK;
}

static void parser_free(parser *p)
{
    for (size_t k = 0; k < p->n_rules; k++)
        free(p->r[k].el);
    free(p->r);
    free(p->tab);
}

void ml_grammar_free(ml_grammar *g)
{
    if (!g)
        return;
    free(g->el);
    free(g->start);
    free(g);
}

ml_status ml_grammar_parse(const char *text, size_t len, const char *root, ml_grammar **out,
                           ml_error *err)
{
    if (!out || (!text && len))
        return ml__err(err, ML_E_INVAL, "", -1, "no grammar text or no place for the grammar");
    *out = NULL;
    parser p = {.s = text ? text : "", .n = len, .err = err};
    ml_grammar *g = calloc(1, sizeof *g);
    ml_status s = g ? check_text(&p) : ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    if (!s)
        skip_space(&p, 1);
    while (!s && p.i < p.n)
        s = parse_rule(&p);
    if (!s)
        s = finish(&p, g, root ? root : "root");
    parser_free(&p);
    if (s) {
        ml_grammar_free(g);
        return s;
    }
    *out = g;
    return ML_OK;
}

uint32_t ml_grammar_n_rules(const ml_grammar *g)
{
    return g ? g->n_rules : 0;
}
