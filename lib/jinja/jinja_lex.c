/* jinja_lex.c - splits a template into tokens the way jinja2's lexer
 * does with trim_blocks and lstrip_blocks: text, {{ }}, {% %} and the
 * expression tokens inside, with comments dropped, raw blocks kept as
 * text, and the whitespace signs - and + applied to the text around. */
#include "jinja/jinja.h"

#include <stdlib.h>

typedef struct lexer {
    jj_ctx *c;
    const char *s;
    size_t n, p;
    jt_list *out;
    int line_starting; /* the last tag ended with a newline (or none yet) */
} lexer;

static int is_ws(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v';
}

/* Python's whitespace (str.isspace, the \s of jinja2's regexes) is wider
 * than ASCII: these code points, in UTF-8. */
static int uni_space(uint32_t cp)
{
    return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

/* Bytes of the whitespace code point starting at p (before end), or 0. */
static size_t space_at(const char *p, const char *end)
{
    const unsigned char *u = (const unsigned char *)p;
    size_t n = (size_t)(end - p);
    if (n == 0)
        return 0;
    if (u[0] < 0x80)
        return uni_space(u[0]) ? 1 : 0;
    if ((u[0] & 0xe0) == 0xc0 && n >= 2 && (u[1] & 0xc0) == 0x80)
        return uni_space((uint32_t)(u[0] & 0x1f) << 6 | (u[1] & 0x3f)) ? 2 : 0;
    if ((u[0] & 0xf0) == 0xe0 && n >= 3 && (u[1] & 0xc0) == 0x80 && (u[2] & 0xc0) == 0x80)
        return uni_space((uint32_t)(u[0] & 0x0f) << 12 | (uint32_t)(u[1] & 0x3f) << 6 | (u[2] & 0x3f)) ? 3 : 0;
    return 0;
}

/* Bytes of the whitespace code point ending at end (after begin), or 0. */
static size_t space_before(const char *begin, const char *end)
{
    for (size_t k = 1; k <= 3 && (size_t)(end - begin) >= k; k++)
        if (space_at(end - k, end) == k)
            return k;
    return 0;
}

static int push(lexer *L, jt t)
{
    jt_list *o = L->out;
    if (o->n == o->cap) {
        size_t nc = o->cap ? o->cap * 2 : 64;
        if (nc > SIZE_MAX / sizeof(jt) / 2)
            return jj_fail(L->c, ML_E_NOMEM, t.pos, "too many tokens");
        jt *nv = jj_grow(L->c, o->v, o->n * sizeof(jt), nc * sizeof(jt));
        if (!nv)
            return -1;
        o->v = nv;
        o->cap = nc;
    }
    o->v[o->n++] = t;
    return 0;
}

static int push_simple(lexer *L, int type, size_t pos)
{
    return push(L, (jt){.type = (uint8_t)type, .pos = pos});
}

static int starts(const lexer *L, size_t p, const char *w)
{
    size_t k = strlen(w);
    return p <= L->n && L->n - p >= k && memcmp(L->s + p, w, k) == 0;
}

/* Emits text [a, b) as it stands before a tag opening at b with sign
 * `sign` ('-', '+' or 0); lstrip applies to block and comment tags. */
static int emit_text(lexer *L, size_t a, size_t b, char sign, int lstrip)
{
    size_t e = b, k;
    if (sign == '-') {
        while (e > a && (k = space_before(L->s + a, L->s + e)) > 0)
            e -= k;
    } else if (sign != '+' && lstrip) {
        size_t l = e;
        while (l > a && L->s[l - 1] != '\n')
            l--;
        if (l > a || L->line_starting) {
            size_t q = l;
            while (q < e && (k = space_at(L->s + q, L->s + e)) > 0)
                q += k;
            if (q == e)
                e = l;
        }
    }
    if (e == a)
        return 0;
    return push(L, (jt){.type = JT_TEXT, .pos = a, .s = L->s + a, .n = e - a});
}

/* After a closing tag at p (just past %} #} or }}): "-" eats all
 * whitespace, "+" nothing, else trim_blocks eats one newline (blocks and
 * comments only). */
static void after_close(lexer *L, size_t *p, char sign, int trim)
{
    size_t q = *p, k;
    if (sign == '-') {
        while (q < L->n && (k = space_at(L->s + q, L->s + L->n)) > 0)
            q += k;
    } else if (sign != '+' && trim && q < L->n && L->s[q] == '\n') {
        q++;
    }
    L->line_starting = q > 0 && L->s[q - 1] == '\n' && q != *p;
    *p = q;
}

/* Decodes a string literal's escapes as Python's unicode-escape does. */
static int lex_string(lexer *L, size_t *pp)
{
    size_t p = *pp, start = p;
    char q = L->s[p++];
    jj_buf b = {0};
    for (;;) {
        if (p >= L->n)
            return jj_fail(L->c, ML_E_FORMAT, start, "unexpected end of string");
        char ch = L->s[p++];
        if (ch == q)
            break;
        if (ch != '\\') {
            if (jj_buf_putc(L->c, &b, ch))
                return -1;
            continue;
        }
        if (p >= L->n)
            return jj_fail(L->c, ML_E_FORMAT, start, "unexpected end of string");
        char e = L->s[p++];
        char m = 0;
        switch (e) {
        case 'n': m = '\n'; break;
        case 't': m = '\t'; break;
        case 'r': m = '\r'; break;
        case 'a': m = '\a'; break;
        case 'b': m = '\b'; break;
        case 'f': m = '\f'; break;
        case 'v': m = '\v'; break;
        case '\\': case '\'': case '"': m = e; break;
        default: break;
        }
        if (m) {
            if (jj_buf_putc(L->c, &b, m))
                return -1;
        } else if (e == '\n') {
            /* a backslash-newline continues the line */
        } else if (e == 'x' || e == 'u' || e == 'U') {
            int nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t cp = 0;
            for (int i = 0; i < nd; i++, p++) {
                if (p >= L->n)
                    return jj_fail(L->c, ML_E_FORMAT, start, "truncated \\%c escape", e);
                char h = L->s[p];
                int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                if (d < 0)
                    return jj_fail(L->c, ML_E_FORMAT, start, "truncated \\%c escape", e);
                cp = cp * 16 + (uint32_t)d;
            }
            if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                return jj_fail(L->c, ML_E_FORMAT, start, "bad code point in escape");
            char u[4];
            int k = 0;
            if (cp < 0x80) u[k++] = (char)cp;
            else if (cp < 0x800) u[k++] = (char)(0xc0 | cp >> 6), u[k++] = (char)(0x80 | (cp & 63));
            else if (cp < 0x10000) u[k++] = (char)(0xe0 | cp >> 12), u[k++] = (char)(0x80 | (cp >> 6 & 63)), u[k++] = (char)(0x80 | (cp & 63));
            else u[k++] = (char)(0xf0 | cp >> 18), u[k++] = (char)(0x80 | (cp >> 12 & 63)), u[k++] = (char)(0x80 | (cp >> 6 & 63)), u[k++] = (char)(0x80 | (cp & 63));
            if (jj_buf_put(L->c, &b, u, (size_t)k))
                return -1;
        } else if (e >= '0' && e <= '7') {
            int v = e - '0';
            for (int i = 0; i < 2 && p < L->n && L->s[p] >= '0' && L->s[p] <= '7'; i++)
                v = v * 8 + (L->s[p++] - '0');
            char u[2];
            int k = 0;
            if (v < 0x80) u[k++] = (char)v;
            else u[k++] = (char)(0xc0 | v >> 6), u[k++] = (char)(0x80 | (v & 63));
            if (jj_buf_put(L->c, &b, u, (size_t)k))
                return -1;
        } else {
            char u[2] = {'\\', e};
            if (jj_buf_put(L->c, &b, u, 2))
                return -1;
        }
    }
    *pp = p;
    return push(L, (jt){.type = JT_STRING, .pos = start, .s = b.p ? b.p : "", .n = b.n});
}

static int is_digit(char ch) { return ch >= '0' && ch <= '9'; }
static int is_name0(char ch) { return ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'); }

static int lex_number(lexer *L, size_t *pp)
{
    size_t p = *pp, start = p;
    int is_float = 0;
    while (p < L->n && (is_digit(L->s[p]) || (L->s[p] == '_' && p + 1 < L->n && is_digit(L->s[p + 1]))))
        p++;
    if (p + 1 < L->n && L->s[p] == '.' && is_digit(L->s[p + 1])) {
        is_float = 1;
        p++;
        while (p < L->n && (is_digit(L->s[p]) || L->s[p] == '_'))
            p++;
    }
    if (p < L->n && (L->s[p] == 'e' || L->s[p] == 'E')) {
        size_t q = p + 1;
        if (q < L->n && (L->s[q] == '+' || L->s[q] == '-'))
            q++;
        if (q < L->n && is_digit(L->s[q])) {
            is_float = 1;
            p = q;
            while (p < L->n && is_digit(L->s[p]))
                p++;
        }
    }
    char buf[64];
    size_t k = 0;
    for (size_t i = start; i < p; i++)
        if (L->s[i] != '_') {
            if (k + 1 >= sizeof buf)
                return jj_fail(L->c, ML_E_FORMAT, start, "number too long");
            buf[k++] = L->s[i];
        }
    buf[k] = 0;
    jt t = {.pos = start};
    if (is_float) {
        t.type = JT_FLOAT;
        t.f = strtod(buf, NULL);
    } else {
        t.type = JT_INT;
        int64_t v = 0;
        for (size_t i = 0; i < k; i++)
            if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, buf[i] - '0', &v))
                return jj_fail(L->c, ML_E_FORMAT, start, "integer literal too large");
        t.i = v;
    }
    *pp = p;
    return push(L, t);
}

/* The expression tokens of a tag, up to its closing `end` ("}}" or "%}"). */
static int lex_tag(lexer *L, size_t *pp, const char *end, size_t open_pos, char *close_sign)
{
    size_t p = *pp;
    jj_buf stack = {0}; /* the closers expected, innermost last */
    size_t bal = 0;
    for (;;) {
        size_t k;
        while (p < L->n && (k = space_at(L->s + p, L->s + L->n)) > 0)
            p += k;
        if (p >= L->n)
            return jj_fail(L->c, ML_E_FORMAT, open_pos, "unexpected end of template, tag not closed");
        if (bal == 0) {
            if ((L->s[p] == '-' || L->s[p] == '+') && starts(L, p + 1, end) &&
                (L->s[p] == '-' || end[0] == '%')) {
                *close_sign = L->s[p];
                *pp = p + 3;
                return 0;
            }
            if (starts(L, p, end)) {
                *close_sign = 0;
                *pp = p + 2;
                return 0;
            }
        }
        char ch = L->s[p];
        if (ch == '\'' || ch == '"') {
            if (lex_string(L, &p))
                return -1;
        } else if (is_digit(ch)) {
            if (lex_number(L, &p))
                return -1;
        } else if (is_name0(ch)) {
            size_t a = p;
            while (p < L->n && (is_name0(L->s[p]) || is_digit(L->s[p])))
                p++;
            if (push(L, (jt){.type = JT_NAME, .pos = a, .s = L->s + a, .n = p - a}))
                return -1;
        } else {
            static const char *const two[] = {"//", "**", "==", "!=", "<=", ">="};
            uint16_t op = 0;
            for (size_t i = 0; i < sizeof two / sizeof *two; i++)
                if (starts(L, p, two[i]))
                    op = JJ_OP2(two[i][0], two[i][1]);
            if (!op) {
                if (!strchr("+-*/%~<>=()[]{},.:|", ch) || ch == 0)
                    return jj_fail(L->c, ML_E_FORMAT, p, "unexpected char '%c'",
                                   ch >= 0x20 && ch < 0x7f ? ch : '?');
                op = (uint16_t)ch;
                if (ch == '(' || ch == '[' || ch == '{') {
                    if (jj_buf_putc(L->c, &stack, ch == '(' ? ')' : ch == '[' ? ']' : '}'))
                        return -1;
                    bal++;
                } else if (ch == ')' || ch == ']' || ch == '}') {
                    if (bal == 0)
                        return jj_fail(L->c, ML_E_FORMAT, p, "unexpected '%c'", ch);
                    if (stack.p[bal - 1] != ch)
                        return jj_fail(L->c, ML_E_FORMAT, p, "unexpected '%c', expected '%c'", ch,
                                       stack.p[bal - 1]);
                    stack.n = --bal;
                }
            }
            if (push(L, (jt){.type = JT_OP, .op = op, .pos = p}))
                return -1;
            p += op > 0xff ? 2 : 1;
        }
    }
}

/* {% raw %}...{% endraw %}: p is just past "{%" + sign; returns 1 if this
 * is a raw block (consumed), 0 if not. */
static int try_raw(lexer *L, size_t *pp)
{
    size_t p = *pp;
    while (p < L->n && is_ws(L->s[p]))
        p++;
    if (!starts(L, p, "raw"))
        return 0;
    p += 3;
    while (p < L->n && is_ws(L->s[p]))
        p++;
    if (starts(L, p, "-%}")) {
        size_t k;
        p += 3;
        while (p < L->n && (k = space_at(L->s + p, L->s + L->n)) > 0)
            p += k;
    } else if (starts(L, p, "%}")) {
        p += 2;
    } else {
        return 0;
    }
    size_t body = p;
    for (size_t q = p; q + 1 < L->n; q++) {
        if (L->s[q] != '{' || L->s[q + 1] != '%')
            continue;
        size_t r = q + 2;
        char sign = 0;
        if (r < L->n && (L->s[r] == '-' || L->s[r] == '+'))
            sign = L->s[r++];
        while (r < L->n && is_ws(L->s[r]))
            r++;
        if (!starts(L, r, "endraw"))
            continue;
        r += 6;
        while (r < L->n && is_ws(L->s[r]))
            r++;
        char csign = 0;
        if (r < L->n && (L->s[r] == '-' || L->s[r] == '+'))
            csign = L->s[r++];
        if (!starts(L, r, "%}"))
            continue;
        L->line_starting = 0;
        if (emit_text(L, body, q, sign, 1))
            return -1;
        r += 2;
        after_close(L, &r, csign, 1);
        *pp = r;
        return 1;
    }
    return jj_fail(L->c, ML_E_FORMAT, *pp - 2, "missing end of raw directive");
}

int jj_lex(jj_ctx *c, const char *src, size_t n, jt_list *out)
{
    lexer L = {c, src, n, 0, out, 1};
    size_t p = 0;
    while (p < n) {
        size_t q = p;
        while (q + 1 < n && !(src[q] == '{' && (src[q + 1] == '{' || src[q + 1] == '%' || src[q + 1] == '#')))
            q++;
        if (q + 1 >= n) {
            if (emit_text(&L, p, n, 0, 0))
                return -1;
            break;
        }
        char kind = src[q + 1];
        size_t r = q + 2;
        char sign = 0;
        if (r < n && (src[r] == '-' || src[r] == '+'))
            sign = src[r++];
        if (kind == '%') {
            size_t rr = r;
            int saved = L.line_starting;
            int raw = 0;
            /* The raw check needs the text emitted with lstrip first. */
            size_t tn = out->n;
            if (emit_text(&L, p, q, sign, 1))
                return -1;
            L.line_starting = saved;
            raw = try_raw(&L, &rr);
            if (raw < 0)
                return -1;
            if (raw) {
                p = rr;
                continue;
            }
            (void)tn;
            if (push_simple(&L, JT_BLOCK_BEGIN, q))
                return -1;
            char cs;
            if (lex_tag(&L, &r, "%}", q, &cs) || push_simple(&L, JT_BLOCK_END, r - 2))
                return -1;
            after_close(&L, &r, cs, 1);
            p = r;
        } else if (kind == '{') {
            if (emit_text(&L, p, q, sign == '-' ? '-' : '+', 0) || push_simple(&L, JT_VAR_BEGIN, q))
                return -1;
            char cs;
            if (lex_tag(&L, &r, "}}", q, &cs) || push_simple(&L, JT_VAR_END, r - 2))
                return -1;
            after_close(&L, &r, cs, 0);
            p = r;
        } else {
            if (emit_text(&L, p, q, sign, 1))
                return -1;
            size_t e = r;
            while (e + 1 < n && !(src[e] == '#' && src[e + 1] == '}'))
                e++;
            if (e + 1 >= n)
                return jj_fail(c, ML_E_FORMAT, q, "missing end of comment tag");
            char cs = e > r && (src[e - 1] == '-' || src[e - 1] == '+') ? src[e - 1] : 0;
            size_t after = e + 2;
            after_close(&L, &after, cs, 1);
            p = after;
        }
    }
    return push_simple(&L, JT_EOF, n);
}
