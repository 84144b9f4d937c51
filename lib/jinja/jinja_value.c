/* jinja_value.c - the capped arena, errors with line and column, and the
 * values of the Jinja interpreter with Python's semantics where they show
 * in output: truth, equality, ordering, str(), repr() and json.dumps. */
#include "jinja/jinja.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

struct jj_chunk {
    jj_chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

enum { CHUNK_MIN = 64 * 1024 };

void *jj_alloc(jj_ctx *c, size_t n)
{
    if (c->status != ML_OK)
        return NULL;
    n = (n + 15) & ~(size_t)15;
    if (n == 0)
        n = 16;
    jj_chunk *h = c->arena.head;
    if (!h || h->size - h->used < n) {
        size_t sz = n > CHUNK_MIN ? n : CHUNK_MIN, total;
        if (n > SIZE_MAX / 2 || __builtin_add_overflow(sz, sizeof *h, &total) ||
            total > c->arena.cap || c->arena.used > c->arena.cap - total) {
            jj_fail(c, ML_E_NOMEM, SIZE_MAX, "memory limit of %zu bytes reached", c->arena.cap);
            return NULL;
        }
        h = malloc(total);
        if (!h) {
            jj_fail(c, ML_E_NOMEM, SIZE_MAX, "out of memory");
            return NULL;
        }
        h->size = sz;
        h->used = 0;
        h->next = c->arena.head;
        c->arena.head = h;
        c->arena.used += total;
    }
    void *p = h->data + h->used;
    h->used += n;
    memset(p, 0, n);
    return p;
}

void *jj_grow(jj_ctx *c, void *p, size_t old_n, size_t new_n)
{
    void *q = jj_alloc(c, new_n);
    if (q && old_n)
        memcpy(q, p, old_n);
    return q;
}

char *jj_strdup(jj_ctx *c, const char *s, size_t n)
{
    if (n == SIZE_MAX)
        return NULL;
    char *p = jj_alloc(c, n + 1);
    if (p && n)
        memcpy(p, s, n);
    return p;
}

void jj_arena_free(jj_arena *a)
{
    for (jj_chunk *h = a->head, *nx; h; h = nx) {
        nx = h->next;
        free(h);
    }
    a->head = NULL;
    a->used = 0;
}

int jj_fail(jj_ctx *c, ml_status code, size_t pos, const char *fmt, ...)
{
    if (c->status != ML_OK)
        return -1;
    c->status = code;
    char detail[280];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (pos == SIZE_MAX || !c->src) {
        ml__err(c->err, code, "template", -1, "%s", detail);
        return -1;
    }
    if (pos > c->src_len)
        pos = c->src_len;
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos; i++) {
        if (c->src[i] == '\n')
            line++, col = 1;
        else
            col++;
    }
    ml__err(c->err, code, "template", (int64_t)pos, "line %zu, column %zu: %s", line, col, detail);
    return -1;
}

int jj_steps(jj_ctx *c, uint64_t n, size_t pos)
{
    if (c->status != ML_OK)
        return -1;
    if (n > c->max_steps || c->steps > c->max_steps - n) {
        c->steps = c->max_steps;
        return jj_step(c, pos);
    }
    c->steps += n;
    return 0;
}

int jj_step(jj_ctx *c, size_t pos)
{
    if (c->status != ML_OK)
        return -1;
    if (++c->steps > c->max_steps)
        return jj_fail(c, ML_E_UNSUPPORTED, pos, "step limit of %llu reached",
                       (unsigned long long)c->max_steps);
    return 0;
}

/* ---- constructors ---- */
jv jv_undef(const char *name, size_t n)
{
    jv v = {.kind = JV_UNDEF, .n = n};
    v.u.s = name;
    return v;
}
jv jv_none(void) { return (jv){.kind = JV_NONE}; }
jv jv_bool(int b)
{
    jv v = {.kind = JV_BOOL};
    v.u.b = !!b;
    return v;
}
jv jv_int(int64_t i)
{
    jv v = {.kind = JV_INT};
    v.u.i = i;
    return v;
}
jv jv_float(double f)
{
    jv v = {.kind = JV_FLOAT};
    v.u.f = f;
    return v;
}
jv jv_str(const char *s, size_t n)
{
    jv v = {.kind = JV_STR, .n = n};
    v.u.s = s ? s : "";
    return v;
}
jv jv_cstr(const char *s) { return jv_str(s, strlen(s)); }

jv_list *jv_list_new(jj_ctx *c, size_t cap)
{
    jv_list *l = jj_alloc(c, sizeof *l);
    if (!l)
        return NULL;
    if (cap) {
        if (cap > SIZE_MAX / sizeof(jv) / 2) {
            jj_fail(c, ML_E_NOMEM, SIZE_MAX, "list too long");
            return NULL;
        }
        l->v = jj_alloc(c, cap * sizeof(jv));
        if (!l->v)
            return NULL;
        l->cap = cap;
    }
    return l;
}

int jv_list_push(jj_ctx *c, jv_list *l, jv v)
{
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 4;
        if (nc > SIZE_MAX / sizeof(jv) / 2)
            return jj_fail(c, ML_E_NOMEM, SIZE_MAX, "list too long");
        jv *nv = jj_grow(c, l->v, l->n * sizeof(jv), nc * sizeof(jv));
        if (!nv)
            return -1;
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = v;
    return 0;
}

int jv_list_push_chars(jj_ctx *c, jv_list *l, jv v)
{
    for (size_t i = 0; i < v.n;) {
        size_t k = 1;
        while (i + k < v.n && ((unsigned char)v.u.s[i + k] & 0xc0) == 0x80)
            k++;
        if (jv_list_push(c, l, jv_str(v.u.s + i, k)))
            return -1;
        i += k;
    }
    return 0;
}

jv jv_of_list(jv_list *l, int tuple)
{
    jv v = {.kind = JV_LIST, .flags = (uint8_t)(tuple ? JV_TUPLE : 0)};
    v.u.l = l;
    return v;
}

jv_dict *jv_dict_new(jj_ctx *c, size_t cap)
{
    jv_dict *d = jj_alloc(c, sizeof *d);
    (void)cap;
    return d;
}

jv *jv_dict_get(const jv_dict *d, jv k)
{
    for (size_t i = 0; i < d->n; i++)
        if (jv_equal(NULL, d->k[i], k))
            return &d->v[i];
    return NULL;
}

jv *jv_dict_gets(const jv_dict *d, const char *k, size_t n)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].kind == JV_STR && d->k[i].n == n && memcmp(d->k[i].u.s, k, n) == 0)
            return &d->v[i];
    return NULL;
}

int jv_dict_set(jj_ctx *c, jv_dict *d, jv k, jv v)
{
    /* The lookup is linear: a dict of n keys costs n^2 / 16 steps to build. */
    if (jj_steps(c, d->n / 8 + 1, SIZE_MAX))
        return -1;
    jv *old = jv_dict_get(d, k);
    if (old) {
        *old = v;
        return 0;
    }
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 4;
        if (nc > SIZE_MAX / sizeof(jv) / 2)
            return jj_fail(c, ML_E_NOMEM, SIZE_MAX, "dict too large");
        jv *nk = jj_grow(c, d->k, d->n * sizeof(jv), nc * sizeof(jv));
        jv *nv = jj_grow(c, d->v, d->n * sizeof(jv), nc * sizeof(jv));
        if (!nk || !nv)
            return -1;
        d->k = nk;
        d->v = nv;
        d->cap = nc;
    }
    d->k[d->n] = k;
    d->v[d->n++] = v;
    return 0;
}

/* ---- Python semantics ---- */
int jv_truthy(jv v)
{
    switch (v.kind) {
    case JV_UNDEF: case JV_NONE: return 0;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0;
    case JV_STR: return v.n != 0;
    case JV_LIST: return v.u.l->n != 0 || (v.flags & JV_GEN); /* a generator is always true */
    case JV_DICT: case JV_NS: return v.u.d->n != 0 || v.kind == JV_NS;
    default: return 1;
    }
}

static int is_num(jv v) { return v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL; }
static double num_f(jv v)
{
    return v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : (double)v.u.b;
}
static int64_t num_i(jv v) { return v.kind == JV_INT ? v.u.i : v.u.b; }

int jv_is_seq(jv v) { return v.kind == JV_LIST; }

/* One element of a comparison: a step, and the depth checked. */
static int cmp_enter(jj_ctx *c, uint32_t level)
{
    if (!c)
        return level < 64 ? 0 : -1;
    if (c->status != ML_OK)
        return -1;
    if (c->depth + level > c->max_depth) {
        jj_fail(c, ML_E_UNSUPPORTED, SIZE_MAX, "depth limit of %u reached comparing values", c->max_depth);
        return -1;
    }
    return jj_step(c, SIZE_MAX);
}

static int eq_at(jj_ctx *c, jv a, jv b, uint32_t level)
{
    if (is_num(a) && is_num(b)) {
        if (a.kind == JV_FLOAT || b.kind == JV_FLOAT)
            return num_f(a) == num_f(b);
        return num_i(a) == num_i(b);
    }
    if (a.kind != b.kind)
        return 0;
    switch (a.kind) {
    case JV_UNDEF: case JV_NONE: return 1;
    case JV_STR: return a.n == b.n && memcmp(a.u.s, b.u.s, a.n) == 0;
    case JV_LIST:
        if ((a.flags & JV_TUPLE) != (b.flags & JV_TUPLE) || a.u.l->n != b.u.l->n)
            return 0;
        if (a.u.l == b.u.l)
            return 1;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (cmp_enter(c, level + 1) || !eq_at(c, a.u.l->v[i], b.u.l->v[i], level + 1))
                return 0;
        return 1;
    case JV_DICT:
        if (a.u.d->n != b.u.d->n)
            return 0;
        if (a.u.d == b.u.d)
            return 1;
        for (size_t i = 0; i < a.u.d->n; i++) {
            jv *o = jv_dict_get(b.u.d, a.u.d->k[i]);
            if (!o || cmp_enter(c, level + 1) || !eq_at(c, a.u.d->v[i], *o, level + 1))
                return 0;
        }
        return 1;
    case JV_NS: return a.u.d == b.u.d;
    case JV_FUNC: return a.u.fn == b.u.fn;
    case JV_MACRO: return a.u.mac == b.u.mac;
    case JV_LOOP: return a.u.loop == b.u.loop;
    }
    return 0;
}

int jv_equal(jj_ctx *c, jv a, jv b) { return eq_at(c, a, b, 0); }

static int cmp_at(jj_ctx *c, jv a, jv b, int *bad, uint32_t level)
{
    *bad = 0;
    if (is_num(a) && is_num(b)) {
        if (a.kind == JV_FLOAT || b.kind == JV_FLOAT) {
            double x = num_f(a), y = num_f(b);
            return x < y ? -1 : x > y;
        }
        int64_t x = num_i(a), y = num_i(b);
        return x < y ? -1 : x > y;
    }
    if (a.kind == JV_STR && b.kind == JV_STR) {
        /* UTF-8 byte order is code point order. */
        size_t m = a.n < b.n ? a.n : b.n;
        int r = memcmp(a.u.s, b.u.s, m);
        if (r)
            return r < 0 ? -1 : 1;
        return a.n < b.n ? -1 : a.n > b.n;
    }
    if (a.kind == JV_LIST && b.kind == JV_LIST && (a.flags & JV_TUPLE) == (b.flags & JV_TUPLE) &&
        !((a.flags | b.flags) & (JV_GEN | JV_VIEW))) {
        size_t m = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < m; i++) {
            if (cmp_enter(c, level + 1)) {
                *bad = 1;
                return -1;
            }
            if (eq_at(c, a.u.l->v[i], b.u.l->v[i], level + 1))
                continue;
            return cmp_at(c, a.u.l->v[i], b.u.l->v[i], bad, level + 1);
        }
        return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
    }
    *bad = 1;
    return -1;
}

int jv_cmp(jj_ctx *c, jv a, jv b, int *bad) { return cmp_at(c, a, b, bad, 0); }

int jv_hashable(jv v)
{
    if (v.kind == JV_LIST && (v.flags & JV_TUPLE)) {
        for (size_t i = 0; i < v.u.l->n; i++)
            if (!jv_hashable(v.u.l->v[i]) || v.u.l->v[i].kind == JV_LIST)
                return 0;
        return 1;
    }
    return v.kind != JV_LIST && v.kind != JV_DICT && v.kind != JV_NS;
}

const char *jv_type_name(jv v)
{
    switch (v.kind) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST:
        if (v.flags & JV_VIEW)
            return v.flags & JV_KEYS ? "dict_keys" : v.flags & JV_VALUES ? "dict_values" : "dict_items";
        return v.flags & JV_GEN ? "generator" : v.flags & JV_TUPLE ? "tuple" : "list";
    case JV_DICT: return "dict";
    case JV_NS: return "Namespace";
    case JV_FUNC: return "builtin_function_or_method";
    case JV_MACRO: return "Macro";
    case JV_LOOP: return "LoopContext";
    }
    return "object";
}

/* ---- buffers ---- */
int jj_buf_put(jj_ctx *c, jj_buf *b, const void *s, size_t n)
{
    if (n == 0)
        return c->status == ML_OK ? 0 : -1;
    size_t need;
    if (__builtin_add_overflow(b->n, n, &need) || need == SIZE_MAX)
        return jj_fail(c, ML_E_NOMEM, SIZE_MAX, "string too long");
    if (b->max && need > b->max)
        return jj_fail(c, ML_E_NOMEM, SIZE_MAX, "output limit of %zu bytes reached", b->max);
    if (need + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 64;
        while (nc < need + 1) {
            if (nc > SIZE_MAX / 2)
                return jj_fail(c, ML_E_NOMEM, SIZE_MAX, "string too long");
            nc *= 2;
        }
        char *np = jj_grow(c, b->p, b->n, nc);
        if (!np)
            return -1;
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n = need;
    b->p[need] = 0;
    return 0;
}

int jj_buf_putc(jj_ctx *c, jj_buf *b, char ch) { return jj_buf_put(c, b, &ch, 1); }

static int put_s(jj_ctx *c, jj_buf *b, const char *s) { return jj_buf_put(c, b, s, strlen(s)); }

/* Python's repr of a float: the shortest digits that read back, in
 * positional notation when the exponent is in [-5, 16), else 1e+20. */
void jv_float_repr(double f, char out[40])
{
    if (isnan(f)) {
        strcpy(out, "nan");
        return;
    }
    if (isinf(f)) {
        strcpy(out, f < 0 ? "-inf" : "inf");
        return;
    }
    char e[40];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, f);
        if (strtod(e, NULL) == f)
            break;
    }
    /* e is "-d.ddde+XX": split digits and exponent. */
    char digits[24];
    size_t nd = 0;
    const char *p = e;
    int neg = 0;
    if (*p == '-')
        neg = 1, p++;
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    digits[nd] = 0;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        digits[--nd] = 0;
    char *o = out;
    if (neg)
        *o++ = '-';
    if (exp < -5 + 1 || exp >= 16) {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            memcpy(o, digits + 1, nd - 1);
            o += nd - 1;
        }
        sprintf(o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        return;
    }
    if (exp < 0) {
        *o++ = '0';
        *o++ = '.';
        for (int i = 0; i < -exp - 1; i++)
            *o++ = '0';
        memcpy(o, digits, nd);
        o += nd;
    } else {
        for (int i = 0; i <= exp; i++)
            *o++ = (size_t)i < nd ? digits[i] : '0';
        *o++ = '.';
        if ((size_t)exp + 1 < nd) {
            memcpy(o, digits + exp + 1, nd - (size_t)exp - 1);
            o += nd - (size_t)exp - 1;
        } else {
            *o++ = '0';
        }
    }
    *o = 0;
}

/* Python's repr of a str: single quotes unless it holds ' and no ". */
static int repr_str(jj_ctx *c, const char *s, size_t n, jj_buf *b)
{
    char q = memchr(s, '\'', n) && !memchr(s, '"', n) ? '"' : '\'';
    if (jj_buf_putc(c, b, q))
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char tmp[8];
        const char *rep = NULL;
        if (ch == '\\')
            rep = "\\\\";
        else if (ch == '\n')
            rep = "\\n";
        else if (ch == '\r')
            rep = "\\r";
        else if (ch == '\t')
            rep = "\\t";
        else if (ch == (unsigned char)q)
            rep = q == '\'' ? "\\'" : "\\\"";
        else if (ch < 0x20 || ch == 0x7f) {
            snprintf(tmp, sizeof tmp, "\\x%02x", ch);
            rep = tmp;
        }
        if (rep ? put_s(c, b, rep) : jj_buf_putc(c, b, (char)ch))
            return -1;
    }
    return jj_buf_putc(c, b, q);
}

static int repr_at(jj_ctx *c, jv v, jj_buf *b, uint32_t level);

int jv_repr(jj_ctx *c, jv v, jj_buf *b) { return repr_at(c, v, b, 0); }

static int repr_at(jj_ctx *c, jv v, jj_buf *b, uint32_t level)
{
    if ((v.kind == JV_LIST || v.kind == JV_DICT) && c->depth + level > c->max_depth)
        return jj_fail(c, ML_E_UNSUPPORTED, SIZE_MAX, "depth limit of %u reached printing a value", c->max_depth);
    if (v.kind == JV_STR)
        return repr_str(c, v.u.s, v.n, b);
    if (v.kind == JV_LIST && (v.flags & JV_VIEW)) {
        jv plain = v;
        plain.flags &= (uint8_t)~JV_VIEW;
        return put_s(c, b, jv_type_name(v)) || jj_buf_putc(c, b, '(') || repr_at(c, plain, b, level) ||
                       jj_buf_putc(c, b, ')')
                   ? -1
                   : 0;
    }
    if (v.kind == JV_LIST) {
        int tup = v.flags & JV_TUPLE;
        if (jj_buf_putc(c, b, tup ? '(' : '['))
            return -1;
        for (size_t i = 0; i < v.u.l->n; i++) {
            if ((i && put_s(c, b, ", ")) || repr_at(c, v.u.l->v[i], b, level + 1))
                return -1;
        }
        if (tup && v.u.l->n == 1 && jj_buf_putc(c, b, ','))
            return -1;
        return jj_buf_putc(c, b, tup ? ')' : ']');
    }
    if (v.kind == JV_DICT) {
        if (jj_buf_putc(c, b, '{'))
            return -1;
        for (size_t i = 0; i < v.u.d->n; i++) {
            if ((i && put_s(c, b, ", ")) || repr_at(c, v.u.d->k[i], b, level + 1) || put_s(c, b, ": ") ||
                repr_at(c, v.u.d->v[i], b, level + 1))
                return -1;
        }
        return jj_buf_putc(c, b, '}');
    }
    if (v.kind == JV_UNDEF)
        return 0;
    return jv_to_str(c, v, b);
}

int jv_to_str(jj_ctx *c, jv v, jj_buf *b)
{
    char tmp[48];
    switch (v.kind) {
    case JV_UNDEF: return c->status == ML_OK ? 0 : -1;
    case JV_NONE: return put_s(c, b, "None");
    case JV_BOOL: return put_s(c, b, v.u.b ? "True" : "False");
    case JV_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i);
        return put_s(c, b, tmp);
    case JV_FLOAT:
        jv_float_repr(v.u.f, tmp);
        return put_s(c, b, tmp);
    case JV_STR: return jj_buf_put(c, b, v.u.s, v.n);
    case JV_LIST: case JV_DICT: return jv_repr(c, v, b);
    case JV_NS: return put_s(c, b, "<Namespace>");
    case JV_FUNC:
        snprintf(tmp, sizeof tmp, "<built-in method %.20s>", v.u.fn->name);
        return put_s(c, b, tmp);
    case JV_MACRO: return put_s(c, b, "<Macro>");
    case JV_LOOP: return put_s(c, b, "<LoopContext>");
    }
    return 0;
}

int jv_stringify(jj_ctx *c, jv v, jv *out)
{
    if (v.kind == JV_STR) {
        *out = v;
        out->flags = 0;
        return 0;
    }
    jj_buf b = {0};
    if (jv_to_str(c, v, &b))
        return -1;
    *out = jv_str(b.p, b.n);
    return 0;
}

/* ---- json.dumps(ensure_ascii=False) ---- */
static int json_str(jj_ctx *c, const char *s, size_t n, jj_buf *b)
{
    if (jj_buf_putc(c, b, '"'))
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char tmp[8];
        const char *rep = NULL;
        switch (ch) {
        case '"': rep = "\\\""; break;
        case '\\': rep = "\\\\"; break;
        case '\n': rep = "\\n"; break;
        case '\r': rep = "\\r"; break;
        case '\t': rep = "\\t"; break;
        case '\b': rep = "\\b"; break;
        case '\f': rep = "\\f"; break;
        default:
            if (ch < 0x20) {
                snprintf(tmp, sizeof tmp, "\\u%04x", ch);
                rep = tmp;
            }
        }
        if (rep ? put_s(c, b, rep) : jj_buf_putc(c, b, (char)ch))
            return -1;
    }
    return jj_buf_putc(c, b, '"');
}

static int json_nl(jj_ctx *c, jj_buf *b, int indent, int level)
{
    if (jj_buf_putc(c, b, '\n'))
        return -1;
    for (int i = 0; i < indent * level; i++)
        if (jj_buf_putc(c, b, ' '))
            return -1;
    return 0;
}

static int json_val(jj_ctx *c, jv v, int indent, int level, jj_buf *b, size_t pos)
{
    if (c->depth + (uint32_t)level > c->max_depth)
        return jj_fail(c, ML_E_UNSUPPORTED, pos, "depth limit of %u reached", c->max_depth);
    char tmp[48];
    switch (v.kind) {
    case JV_NONE: return put_s(c, b, "null");
    case JV_BOOL: return put_s(c, b, v.u.b ? "true" : "false");
    case JV_INT: case JV_STR: case JV_FLOAT:
        if (v.kind == JV_STR)
            return json_str(c, v.u.s, v.n, b);
        if (v.kind == JV_FLOAT) {
            if (isnan(v.u.f))
                return put_s(c, b, "NaN");
            if (isinf(v.u.f))
                return put_s(c, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        }
        return jv_to_str(c, v, b);
    case JV_LIST: case JV_DICT: case JV_NS: {
        if (v.kind == JV_LIST && (v.flags & (JV_GEN | JV_VIEW)))
            return jj_fail(c, ML_E_INVAL, pos, "Object of type %s is not JSON serializable", jv_type_name(v));
        int is_list = v.kind == JV_LIST;
        size_t n = is_list ? v.u.l->n : v.u.d->n;
        if (jj_buf_putc(c, b, is_list ? '[' : '{'))
            return -1;
        for (size_t i = 0; i < n; i++) {
            if (i && put_s(c, b, indent >= 0 ? "," : ", "))
                return -1;
            if (indent >= 0 && json_nl(c, b, indent, level + 1))
                return -1;
            if (!is_list) {
                jv k = v.u.d->k[i];
                if (k.kind == JV_STR) {
                    if (json_str(c, k.u.s, k.n, b))
                        return -1;
                } else if (k.kind == JV_INT || k.kind == JV_FLOAT || k.kind == JV_BOOL ||
                           k.kind == JV_NONE) {
                    jj_buf kb = {0};
                    if (json_val(c, k, -1, 0, &kb, pos) || json_str(c, kb.p, kb.n, b))
                        return -1;
                } else {
                    return jj_fail(c, ML_E_INVAL, pos, "keys must be str, int, float, bool or None");
                }
                if (put_s(c, b, ": "))
                    return -1;
            }
            if (json_val(c, is_list ? v.u.l->v[i] : v.u.d->v[i], indent, level + 1, b, pos))
                return -1;
        }
        if (n && indent >= 0 && json_nl(c, b, indent, level))
            return -1;
        return jj_buf_putc(c, b, is_list ? ']' : '}');
    }
    default:
        snprintf(tmp, sizeof tmp, "%s", jv_type_name(v));
        return jj_fail(c, ML_E_INVAL, pos, "Object of type %s is not JSON serializable", tmp);
    }
}

int jv_tojson(jj_ctx *c, jv v, int indent, jj_buf *b, size_t pos)
{
    return json_val(c, v, indent, 0, b, pos);
}

/* ---- UTF-8 positions: strings index by code point ---- */
size_t jj_u8_len(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += ((unsigned char)s[i] & 0xc0) != 0x80;
    return k;
}

size_t jj_u8_off(const char *s, size_t n, size_t i)
{
    size_t k = 0, p = 0;
    for (; p < n; p++) {
        if (((unsigned char)s[p] & 0xc0) != 0x80) {
            if (k == i)
                return p;
            k++;
        }
    }
    return n;
}

/* ---- str % args ---- */
static int pct_arg(jj_ctx *c, jv args, size_t *next, jv *out, size_t pos)
{
    if (args.kind == JV_LIST && (args.flags & JV_TUPLE)) {
        if (*next >= args.u.l->n)
            return jj_fail(c, ML_E_INVAL, pos, "not enough arguments for format string");
        *out = args.u.l->v[(*next)++];
        return 0;
    }
    if (*next > 0)
        return jj_fail(c, ML_E_INVAL, pos, "not enough arguments for format string");
    (*next)++;
    *out = args;
    return 0;
}

static int pct_one(jj_ctx *c, char conv, const char *flags, int width, int prec, jv v, jj_buf *b, size_t pos)
{
    char num[64], spec[32];
    jj_buf tmp = {0};
    const char *s;
    size_t n;
    if (conv == 's' || conv == 'r') {
        if ((conv == 's' ? jv_to_str(c, v, &tmp) : jv_repr(c, v, &tmp)))
            return -1;
        s = tmp.p ? tmp.p : "";
        n = tmp.n;
        if (prec >= 0 && (size_t)prec < jj_u8_len(s, n))
            n = jj_u8_off(s, n, (size_t)prec);
    } else {
        if (v.kind != JV_INT && v.kind != JV_FLOAT && v.kind != JV_BOOL)
            return jj_fail(c, ML_E_INVAL, pos, "%%%c format: a real number is required, not %s", conv, jv_type_name(v));
        double f = v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : v.u.b;
        if (conv == 'd' || conv == 'i' || conv == 'x') {
            if (v.kind == JV_FLOAT && !(f > -9.2e18 && f < 9.2e18))
                return jj_fail(c, ML_E_INVAL, pos, "integer overflow (beyond 64 bits)");
            long long k = v.kind == JV_FLOAT ? (long long)f : v.kind == JV_INT ? (long long)v.u.i : v.u.b;
            snprintf(spec, sizeof spec, "%%%s%s", flags, conv == 'x' ? "llx" : "lld");
            snprintf(num, sizeof num, spec, k);
        } else {
            snprintf(spec, sizeof spec, "%%%s.%d%c", flags, prec < 0 ? 6 : prec > 40 ? 40 : prec, conv);
            snprintf(num, sizeof num, spec, f);
        }
        s = num;
        n = strlen(num);
    }
    size_t len = jj_u8_len(s, n);
    int left = strchr(flags, '-') != NULL;
    for (size_t i = len; !left && (int)i < width; i++)
        if (jj_buf_putc(c, b, ' '))
            return -1;
    if (jj_buf_put(c, b, s, n))
        return -1;
    for (size_t i = len; left && (int)i < width; i++)
        if (jj_buf_putc(c, b, ' '))
            return -1;
    return 0;
}

int jj_percent(jj_ctx *c, jv fmt, jv args, jv *out, size_t pos)
{
    jj_buf b = {0};
    size_t next = 0;
    int mapping = args.kind == JV_DICT;
    for (size_t i = 0; i < fmt.n; i++) {
        char ch = fmt.u.s[i];
        if (ch != '%') {
            if (jj_buf_putc(c, &b, ch))
                return -1;
            continue;
        }
        if (++i >= fmt.n)
            return jj_fail(c, ML_E_INVAL, pos, "incomplete format");
        jv v;
        int have = 0;
        if (fmt.u.s[i] == '(') {
            size_t j = i + 1;
            while (j < fmt.n && fmt.u.s[j] != ')')
                j++;
            if (j >= fmt.n || !mapping)
                return jj_fail(c, ML_E_INVAL, pos, j >= fmt.n ? "incomplete format key" : "format requires a mapping");
            jv *hit = jv_dict_gets(args.u.d, fmt.u.s + i + 1, j - i - 1);
            if (!hit)
                return jj_fail(c, ML_E_INVAL, pos, "KeyError: '%.*s'", (int)(j - i - 1 > 40 ? 40 : j - i - 1), fmt.u.s + i + 1);
            v = *hit;
            have = 1;
            i = j + 1;
        }
        char flags[8];
        size_t nf = 0;
        while (i < fmt.n && strchr("-0 +#", fmt.u.s[i]) && fmt.u.s[i] && nf < 4)
            flags[nf++] = fmt.u.s[i++];
        flags[nf] = 0;
        int width = 0, prec = -1;
        while (i < fmt.n && fmt.u.s[i] >= '0' && fmt.u.s[i] <= '9' && width < 10000)
            width = width * 10 + (fmt.u.s[i++] - '0');
        if (i < fmt.n && fmt.u.s[i] == '.') {
            prec = 0;
            for (i++; i < fmt.n && fmt.u.s[i] >= '0' && fmt.u.s[i] <= '9' && prec < 10000; i++)
                prec = prec * 10 + (fmt.u.s[i] - '0');
        }
        if (i >= fmt.n)
            return jj_fail(c, ML_E_INVAL, pos, "incomplete format");
        char conv = fmt.u.s[i];
        if (conv == '%') {
            if (jj_buf_putc(c, &b, '%'))
                return -1;
            continue;
        }
        if (!strchr("sridfx", conv) || !conv)
            return jj_fail(c, ML_E_INVAL, pos, "unsupported format character '%c'", conv >= 0x20 && conv < 0x7f ? conv : '?');
        if (!have && (mapping ? (v = args, 1) : pct_arg(c, args, &next, &v, pos) == 0) == 0)
            return -1;
        if (pct_one(c, conv, flags, width, prec, v, &b, pos))
            return -1;
    }
    /* Python lets a mapping-like argument (a dict, a list) go unused. */
    size_t want = args.kind == JV_LIST && (args.flags & JV_TUPLE) ? args.u.l->n : 1;
    if (!mapping && args.kind == JV_LIST && !(args.flags & (JV_TUPLE | JV_GEN)))
        want = 0;
    if (!mapping && next < want)
        return jj_fail(c, ML_E_INVAL, pos, "not all arguments converted during string formatting");
    *out = jv_str(b.p ? b.p : "", b.n);
    return 0;
}
