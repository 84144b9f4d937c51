/* jinja_json.c - a strict JSON reader (RFC 8259) into interpreter values,
 * for the variables of a render: UTF-8 checked, nesting bounded, integers
 * that fit int64 (others are refused rather than rounded). */
#include "jinja/jinja.h"

#include <stdlib.h>

typedef struct jr {
    jj_ctx *c;
    const char *s;
    size_t n, p;
    uint32_t depth;
} jr;

static int fail(jr *J, const char *what)
{
    const char *saved = J->c->src;
    J->c->src = NULL;
    if (J->c->status == ML_OK) {
        J->c->status = ML_E_INVAL;
        ml__err(J->c->err, ML_E_INVAL, "vars", (int64_t)J->p, "JSON: %s", what);
    }
    J->c->src = saved;
    return -1;
}

static void ws(jr *J)
{
    while (J->p < J->n && (J->s[J->p] == ' ' || J->s[J->p] == '\t' || J->s[J->p] == '\n' || J->s[J->p] == '\r'))
        J->p++;
}

static int hex4(jr *J, uint32_t *out)
{
    if (J->n - J->p < 4)
        return fail(J, "truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char h = J->s[J->p++];
        int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
        if (d < 0)
            return fail(J, "bad \\u escape");
        v = v * 16 + (uint32_t)d;
    }
    *out = v;
    return 0;
}

static int put_cp(jr *J, jj_buf *b, uint32_t cp)
{
    char u[4];
    size_t k = 0;
    if (cp < 0x80) u[k++] = (char)cp;
    else if (cp < 0x800) u[k++] = (char)(0xc0 | cp >> 6), u[k++] = (char)(0x80 | (cp & 63));
    else if (cp < 0x10000) u[k++] = (char)(0xe0 | cp >> 12), u[k++] = (char)(0x80 | (cp >> 6 & 63)), u[k++] = (char)(0x80 | (cp & 63));
    else u[k++] = (char)(0xf0 | cp >> 18), u[k++] = (char)(0x80 | (cp >> 12 & 63)), u[k++] = (char)(0x80 | (cp >> 6 & 63)), u[k++] = (char)(0x80 | (cp & 63));
    return jj_buf_put(J->c, b, u, k);
}

/* Length of a well-formed UTF-8 sequence at p, or 0. */
static size_t utf8_ok(const unsigned char *p, size_t n)
{
    unsigned char b = p[0];
    size_t need;
    unsigned char lo = 0x80, hi = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) need = 1;
    else if (b == 0xe0) need = 2, lo = 0xa0;
    else if ((b >= 0xe1 && b <= 0xec) || b == 0xee || b == 0xef) need = 2;
    else if (b == 0xed) need = 2, hi = 0x9f;
    else if (b == 0xf0) need = 3, lo = 0x90;
    else if (b >= 0xf1 && b <= 0xf3) need = 3;
    else if (b == 0xf4) need = 3, hi = 0x8f;
    else return 0;
    if (n <= need)
        return 0;
    for (size_t k = 1; k <= need; k++)
        if (p[k] < (k == 1 ? lo : 0x80) || p[k] > (k == 1 ? hi : 0xbf))
            return 0;
    return need + 1;
}

static int string(jr *J, jv *out)
{
    jj_buf b = {0};
    J->p++;
    for (;;) {
        if (J->p >= J->n)
            return fail(J, "unterminated string");
        unsigned char ch = (unsigned char)J->s[J->p];
        if (ch == '"') {
            J->p++;
            break;
        }
        if (ch < 0x20)
            return fail(J, "control character in string");
        if (ch >= 0x80) {
            size_t k = utf8_ok((const unsigned char *)J->s + J->p, J->n - J->p);
            if (!k)
                return fail(J, "invalid UTF-8");
            if (jj_buf_put(J->c, &b, J->s + J->p, k))
                return -1;
            J->p += k;
            continue;
        }
        J->p++;
        if (ch != '\\') {
            if (jj_buf_putc(J->c, &b, (char)ch))
                return -1;
            continue;
        }
        if (J->p >= J->n)
            return fail(J, "unterminated string");
        char e = J->s[J->p++];
        const char *m = strchr("\"\"\\\\//b\bf\fn\nr\rt\t", e);
        if (e && m && ((m - "\"\"\\\\//b\bf\fn\nr\rt\t") % 2 == 0)) {
            if (jj_buf_putc(J->c, &b, m[1]))
                return -1;
        } else if (e == 'u') {
            uint32_t cp, lo;
            if (hex4(J, &cp))
                return -1;
            if (cp >= 0xd800 && cp <= 0xdbff) {
                if (J->n - J->p < 6 || J->s[J->p] != '\\' || J->s[J->p + 1] != 'u')
                    return fail(J, "lone surrogate");
                J->p += 2;
                if (hex4(J, &lo))
                    return -1;
                if (lo < 0xdc00 || lo > 0xdfff)
                    return fail(J, "lone surrogate");
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else if (cp >= 0xdc00 && cp <= 0xdfff) {
                return fail(J, "lone surrogate");
            }
            if (put_cp(J, &b, cp))
                return -1;
        } else {
            return fail(J, "bad escape");
        }
    }
    *out = jv_str(b.p ? b.p : "", b.n);
    return 0;
}

static int number(jr *J, jv *out)
{
    size_t a = J->p;
    int isf = 0;
    if (J->s[J->p] == '-')
        J->p++;
    if (J->p >= J->n)
        return fail(J, "bad number");
    if (J->s[J->p] == '0')
        J->p++;
    else if (J->s[J->p] >= '1' && J->s[J->p] <= '9')
        while (J->p < J->n && J->s[J->p] >= '0' && J->s[J->p] <= '9')
            J->p++;
    else
        return fail(J, "bad number");
    if (J->p < J->n && J->s[J->p] == '.') {
        isf = 1;
        J->p++;
        if (J->p >= J->n || J->s[J->p] < '0' || J->s[J->p] > '9')
            return fail(J, "bad number");
        while (J->p < J->n && J->s[J->p] >= '0' && J->s[J->p] <= '9')
            J->p++;
    }
    if (J->p < J->n && (J->s[J->p] == 'e' || J->s[J->p] == 'E')) {
        isf = 1;
        J->p++;
        if (J->p < J->n && (J->s[J->p] == '+' || J->s[J->p] == '-'))
            J->p++;
        if (J->p >= J->n || J->s[J->p] < '0' || J->s[J->p] > '9')
            return fail(J, "bad number");
        while (J->p < J->n && J->s[J->p] >= '0' && J->s[J->p] <= '9')
            J->p++;
    }
    char tmp[400];
    if (J->p - a >= sizeof tmp)
        return fail(J, "number too long");
    memcpy(tmp, J->s + a, J->p - a);
    tmp[J->p - a] = 0;
    if (isf) {
        *out = jv_float(strtod(tmp, NULL));
        return 0;
    }
    int64_t v = 0;
    int neg = tmp[0] == '-';
    for (const char *q = tmp + neg; *q; q++)
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_sub_overflow(v, *q - '0', &v))
            return fail(J, "integer beyond 64 bits");
    if (!neg && v == INT64_MIN)
        return fail(J, "integer beyond 64 bits");
    *out = jv_int(neg ? v : -v);
    return 0;
}

static int value(jr *J, jv *out);

static int container(jr *J, jv *out)
{
    int is_obj = J->s[J->p] == '{';
    if (++J->depth > J->c->max_depth)
        return fail(J, "nesting too deep");
    J->p++;
    jv_list *l = is_obj ? NULL : jv_list_new(J->c, 0);
    jv_dict *d = is_obj ? jv_dict_new(J->c, 0) : NULL;
    if (!l && !d)
        return -1;
    ws(J);
    char close = is_obj ? '}' : ']';
    if (J->p < J->n && J->s[J->p] == close) {
        J->p++;
    } else {
        for (;;) {
            jv k, v;
            ws(J);
            if (is_obj) {
                if (J->p >= J->n || J->s[J->p] != '"')
                    return fail(J, "expected a string key");
                if (string(J, &k))
                    return -1;
                ws(J);
                if (J->p >= J->n || J->s[J->p] != ':')
                    return fail(J, "expected ':'");
                J->p++;
            }
            if (value(J, &v))
                return -1;
            if (is_obj ? jv_dict_set(J->c, d, k, v) : jv_list_push(J->c, l, v))
                return -1;
            ws(J);
            if (J->p < J->n && J->s[J->p] == ',') {
                J->p++;
                continue;
            }
            if (J->p < J->n && J->s[J->p] == close) {
                J->p++;
                break;
            }
            return fail(J, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
    J->depth--;
    if (is_obj) {
        *out = (jv){.kind = JV_DICT};
        out->u.d = d;
    } else {
        *out = jv_of_list(l, 0);
    }
    return 0;
}

static int word(jr *J, const char *w, jv v, jv *out)
{
    size_t k = strlen(w);
    if (J->n - J->p < k || memcmp(J->s + J->p, w, k) != 0)
        return fail(J, "unexpected character");
    J->p += k;
    *out = v;
    return 0;
}

static int value(jr *J, jv *out)
{
    ws(J);
    if (J->p >= J->n)
        return fail(J, "unexpected end");
    char ch = J->s[J->p];
    switch (ch) {
    case '{': case '[': return container(J, out);
    case '"': return string(J, out);
    case 't': return word(J, "true", jv_bool(1), out);
    case 'f': return word(J, "false", jv_bool(0), out);
    case 'n': return word(J, "null", jv_none(), out);
    default:
        if (ch == '-' || (ch >= '0' && ch <= '9'))
            return number(J, out);
        return fail(J, "unexpected character");
    }
}

int jj_json_parse(jj_ctx *c, const char *s, size_t n, jv *out)
{
    jr J = {c, s, n, 0, 0};
    if (value(&J, out))
        return -1;
    ws(&J);
    if (J.p != n)
        return fail(&J, "trailing characters");
    return 0;
}
