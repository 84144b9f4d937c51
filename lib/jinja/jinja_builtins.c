/* jinja_builtins.c - jinja2's filters and tests, and the Python methods of
 * str, dict and list that templates call, in one table (`builtins`, as
 * jq's function_list): name, kind, function, and a mode that tells apart
 * the names one function serves.  The evaluator calls through it
 * (jj_filter, jj_test, jj_method); the parser asks it which filters and
 * tests exist, and attribute lookup which methods a value has.  The
 * mutating methods (list.append, dict.update, ...) are in it without a
 * function: the sandbox refuses them by name.  The string work is in
 * jinja_str.c. */
/* memmem: substring search in linear time (two-way in glibc), so a
 * hostile template cannot make a search quadratic. */
#define _GNU_SOURCE
#include "jinja/jinja_str.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define EQ(s, n, w) ((n) == sizeof(w) - 1 && memcmp((s), (w), (n)) == 0)

/* Positional argument i or keyword `kw` (after the subject). */
static int arg(const jj_args *a, size_t i, const char *kw, jv *out)
{
    if (i < a->n) {
        *out = a->v[i];
        return 1;
    }
    for (size_t k = 0; kw && k < a->nk; k++)
        if (a->kn[k]->nlen == strlen(kw) && memcmp(a->kn[k]->name, kw, a->kn[k]->nlen) == 0) {
            *out = a->kv[k];
            return 1;
        }
    return 0;
}

static int bad_type(jj_render *r, size_t pos, const char *what, jv x)
{
    if (x.kind == JV_UNDEF && x.u.s)
        return jj_fail(r->c, ML_E_INVAL, pos, "'%.*s' is undefined", (int)(x.n > 60 ? 60 : x.n), x.u.s);
    if (x.kind == JV_UNDEF)
        return jj_fail(r->c, ML_E_INVAL, pos, "%s: the value is undefined", what);
    return jj_fail(r->c, ML_E_INVAL, pos, "%s: unexpected %s", what, jv_type_name(x));
}

/* A builtin: x is the subject (the value filtered or tested, or self), a
 * the arguments after it, mode the table's number that tells apart the
 * names one function serves (lstrip and rstrip). */
typedef int builtin_fn(jj_render *r, jv x, const jj_args *a, int mode, jv *out, size_t pos);
#define U __attribute__((unused))
#define BUILTIN(fn) \
    static int fn(jj_render *r U, jv x U, const jj_args *a U, int mode U, jv *out, size_t pos U)

/* ---- filters ---- */

/* The join filter, and str.join (sep is then the string). */
static int join(jj_render *r, jv items, jv sep, jv attr, jv *out, size_t pos)
{
    jj_buf b = {0};
    if (items.kind == JV_UNDEF) {
        *out = jv_str("", 0);
        return 0;
    }
    if (items.kind == JV_STR) {
        for (size_t i = 0; i < items.n; i++) {
            if ((i && ((unsigned char)items.u.s[i] & 0xc0) != 0x80 && jj_buf_put(r->c, &b, sep.u.s, sep.n)) ||
                jj_buf_putc(r->c, &b, items.u.s[i]))
                return -1;
        }
        *out = jv_str(b.p, b.n);
        return 0;
    }
    if (items.kind == JV_DICT) {
        jv_list *l = jv_list_new(r->c, items.u.d->n);
        if (!l)
            return -1;
        for (size_t i = 0; i < items.u.d->n; i++)
            l->v[l->n++] = items.u.d->k[i];
        items = jv_of_list(l, 0);
    }
    if (items.kind != JV_LIST)
        return bad_type(r, pos, "join", items);
    for (size_t i = 0; i < items.u.l->n; i++) {
        jv x = items.u.l->v[i];
        if (attr.kind == JV_STR) {
            jv *v = x.kind == JV_DICT ? jv_dict_gets(x.u.d, attr.u.s, attr.n) : NULL;
            x = v ? *v : jv_undef(NULL, 0);
        }
        if ((i && jj_buf_put(r->c, &b, sep.u.s, sep.n)) || jv_to_str(r->c, x, &b) || jj_step(r->c, pos))
            return -1;
    }
    *out = jv_str(b.p, b.n);
    return 0;
}

static int list_of(jj_render *r, jv x, jv *out, size_t pos)
{
    jv_list *l = jv_list_new(r->c, 0);
    if (!l)
        return -1;
    if (x.kind == JV_LIST) {
        for (size_t i = 0; i < x.u.l->n; i++)
            if (jv_list_push(r->c, l, x.u.l->v[i]))
                return -1;
    } else if (x.kind == JV_DICT || x.kind == JV_NS) {
        for (size_t i = 0; i < x.u.d->n; i++)
            if (jv_list_push(r->c, l, x.u.d->k[i]))
                return -1;
    } else if (x.kind == JV_STR) {
        if (jv_list_push_chars(r->c, l, x))
            return -1;
    } else if (x.kind != JV_UNDEF) {
        return jj_fail(r->c, ML_E_INVAL, pos, "'%s' object is not iterable", jv_type_name(x));
    }
    *out = jv_of_list(l, 0);
    return 0;
}

static int items_of(jj_render *r, jv x, jv *out, size_t pos)
{
    if (x.kind == JV_UNDEF) {
        return list_of(r, x, out, pos);
    }
    if (x.kind != JV_DICT && x.kind != JV_NS)
        return jj_fail(r->c, ML_E_INVAL, pos, "can only get item pairs from a mapping");
    jv_list *l = jv_list_new(r->c, x.u.d->n);
    if (!l)
        return -1;
    for (size_t i = 0; i < x.u.d->n; i++) {
        jv_list *p = jv_list_new(r->c, 2);
        if (!p)
            return -1;
        p->v[0] = x.u.d->k[i];
        p->v[1] = x.u.d->v[i];
        p->n = 2;
        l->v[l->n++] = jv_of_list(p, 1);
    }
    *out = jv_of_list(l, 0);
    return 0;
}

/* An attribute path "a.b" of a value, as jinja2's make_attrgetter. */
static jv attr_path(jv x, jv attr)
{
    if (attr.kind == JV_INT) {
        if (x.kind == JV_LIST && attr.u.i >= 0 && (uint64_t)attr.u.i < x.u.l->n)
            return x.u.l->v[attr.u.i];
        return jv_undef(NULL, 0);
    }
    if (attr.kind != JV_STR)
        return jv_undef(NULL, 0);
    size_t i = 0;
    while (i <= attr.n) {
        size_t j = i;
        while (j < attr.n && attr.u.s[j] != '.')
            j++;
        jv *v = (x.kind == JV_DICT || x.kind == JV_NS) ? jv_dict_gets(x.u.d, attr.u.s + i, j - i) : NULL;
        if (!v && x.kind == JV_LIST) {
            char *end;
            char tmp[24];
            size_t k = j - i < 23 ? j - i : 23;
            memcpy(tmp, attr.u.s + i, k);
            tmp[k] = 0;
            long idx = strtol(tmp, &end, 10);
            if (*end == 0 && k && idx >= 0 && (size_t)idx < x.u.l->n)
                v = &x.u.l->v[idx];
        }
        if (!v)
            return jv_undef(attr.u.s + i, j - i);
        x = *v;
        i = j + 1;
    }
    return x;
}

/* select, reject, selectattr, rejectattr (mode: BY_ATTR, KEEP). */
enum { KEEP = 1, BY_ATTR = 2 };
BUILTIN(f_select)
{
    int by_attr = mode & BY_ATTR, keep = (mode & KEEP) != 0;
    jv seq;
    if (!jv_truthy(x))
        x = jv_undef(NULL, 0); /* jinja2 walks a falsy sequence (None) as empty */
    if (list_of(r, x, &seq, pos))
        return -1;
    size_t ai = 0;
    jv attr = jv_none(), test = jv_none();
    if (by_attr && !arg(a, ai++, NULL, &attr))
        return jj_fail(r->c, ML_E_INVAL, pos, "missing attribute argument");
    int has_test = arg(a, ai++, NULL, &test);
    if (has_test && test.kind != JV_STR)
        return jj_fail(r->c, ML_E_INVAL, pos, "test name must be a string");
    jj_args ta = {a->v + (a->n > ai ? ai : a->n), a->n > ai ? a->n - ai : 0, a->kv, a->kn, a->nk};
    jv_list *l = jv_list_new(r->c, 0);
    if (!l)
        return -1;
    for (size_t i = 0; i < seq.u.l->n; i++) {
        jv item = seq.u.l->v[i], v = by_attr ? attr_path(item, attr) : item;
        int ok;
        if (jj_step(r->c, pos))
            return -1;
        if (has_test) {
            if (jj_test(r, test.u.s, test.n, v, &ta, &ok, pos))
                return -1;
        } else {
            ok = jv_truthy(v);
        }
        if (ok == keep && jv_list_push(r->c, l, item))
            return -1;
    }
    *out = jv_of_list(l, 0);
    out->flags |= JV_GEN;
    return 0;
}

BUILTIN(f_map)
{
    jv seq, attr, def, name = jv_none();
    if (!jv_truthy(x))
        x = jv_undef(NULL, 0);
    if (list_of(r, x, &seq, pos))
        return -1;
    int by_attr = arg(a, SIZE_MAX, "attribute", &attr);
    int has_def = arg(a, SIZE_MAX, "default", &def);
    if (!by_attr && (!arg(a, 0, NULL, &name) || name.kind != JV_STR))
        return jj_fail(r->c, ML_E_INVAL, pos, "map requires a filter name or attribute=");
    jj_args fa = {a->v + (a->n ? 1 : 0), a->n ? a->n - 1 : 0, a->kv, a->kn, by_attr ? 0 : a->nk};
    jv_list *l = jv_list_new(r->c, seq.u.l->n);
    if (!l)
        return -1;
    for (size_t i = 0; i < seq.u.l->n; i++) {
        jv v = seq.u.l->v[i];
        if (jj_step(r->c, pos))
            return -1;
        if (by_attr) {
            v = attr_path(v, attr);
            if (v.kind == JV_UNDEF && has_def)
                v = def;
        } else if (jj_filter(r, name.u.s, name.n, v, &fa, &v, pos)) {
            return -1;
        }
        l->v[l->n++] = v;
    }
    *out = jv_of_list(l, 0);
    out->flags |= JV_GEN;
    return 0;
}

/* Sort keys: strings compare case-insensitively unless case_sensitive. */
typedef struct sort_ctx {
    jj_render *r;
    int cs, bad;
    jv attr;
    int by; /* 0 value, 1 key (dictsort), 2 value (dictsort) */
} sort_ctx;

static jv sort_key(jj_render *r, const sort_ctx *s, jv v)
{
    if (s->by == 1 || s->by == 2)
        v = v.u.l->v[s->by - 1];
    else if (s->attr.kind != JV_NONE)
        v = attr_path(v, s->attr);
    if (!s->cs && v.kind == JV_STR) {
        jv low;
        if (jj_case(r, v, 1, &low) == 0)
            return low;
    }
    return v;
}

/* A stable merge sort (Python's sort is stable). */
static int msort(sort_ctx *s, jv *v, jv *k, jv *tv, jv *tk, size_t n, int rev)
{
    if (n < 2)
        return 0;
    size_t h = n / 2;
    msort(s, v, k, tv, tk, h, rev);
    msort(s, v + h, k + h, tv, tk, n - h, rev);
    size_t i = 0, j = h, o = 0;
    while (i < h && j < n) {
        int bad;
        int c = jv_cmp(s->r->c, k[j], k[i], &bad);
        if (bad)
            s->bad = 1;
        if (jj_step(s->r->c, SIZE_MAX))
            return -1;
        int take_right = rev ? c > 0 : c < 0;
        if (take_right)
            tv[o] = v[j], tk[o++] = k[j++];
        else
            tv[o] = v[i], tk[o++] = k[i++];
    }
    while (i < h)
        tv[o] = v[i], tk[o++] = k[i++];
    while (j < n)
        tv[o] = v[j], tk[o++] = k[j++];
    memcpy(v, tv, n * sizeof *v);
    memcpy(k, tk, n * sizeof *k);
    return 0;
}

static int sort_(jj_render *r, jv seq, sort_ctx *s, int rev, jv *out, size_t pos)
{
    size_t n = seq.u.l->n;
    jv_list *l = jv_list_new(r->c, n);
    jv *k = jj_alloc(r->c, (n + 1) * sizeof *k), *tv = jj_alloc(r->c, (n + 1) * sizeof *k),
       *tk = jj_alloc(r->c, (n + 1) * sizeof *k);
    if (!l || !k || !tv || !tk)
        return -1;
    for (size_t i = 0; i < n; i++) {
        l->v[i] = seq.u.l->v[i];
        k[i] = sort_key(r, s, l->v[i]);
    }
    l->n = n;
    if (msort(s, l->v, k, tv, tk, n, rev))
        return -1;
    if (s->bad)
        return jj_fail(r->c, ML_E_INVAL, pos, "'<' not supported between these values");
    *out = jv_of_list(l, 0);
    return 0;
}

/* int(), float() and .items() (dictsort) of an Undefined raise in jinja2. */
BUILTIN(f_int)
{
    if (x.kind == JV_UNDEF)
        return bad_type(r, pos, "filter", x);
    jv def = jv_int(0);
    arg(a, 0, "default", &def);
    if (x.kind == JV_INT || x.kind == JV_BOOL) {
        *out = jv_int(x.kind == JV_INT ? x.u.i : x.u.b);
        return 0;
    }
    if (x.kind == JV_FLOAT) {
        if (!(x.u.f > -9.2e18 && x.u.f < 9.2e18))
            return jj_fail(r->c, ML_E_INVAL, SIZE_MAX, "integer overflow (beyond 64 bits)");
        *out = jv_int((int64_t)x.u.f);
        return 0;
    }
    if (x.kind == JV_STR) {
        char tmp[64];
        jv t = jj_strip(x, jv_none(), 3);
        if (t.n && t.n < sizeof tmp) {
            memcpy(tmp, t.u.s, t.n);
            tmp[t.n] = 0;
            char *end;
            long long v = strtoll(tmp, &end, 10);
            if (*end == 0) {
                *out = jv_int(v);
                return 0;
            }
            double f = strtod(tmp, &end);
            if (*end == 0 && f > -9.2e18 && f < 9.2e18) {
                *out = jv_int((int64_t)f);
                return 0;
            }
        }
    }
    *out = def;
    return 0;
}

BUILTIN(f_float)
{
    if (x.kind == JV_UNDEF)
        return bad_type(r, pos, "filter", x);
    jv def = jv_float(0);
    arg(a, 0, "default", &def);
    if (x.kind == JV_INT || x.kind == JV_BOOL || x.kind == JV_FLOAT) {
        *out = jv_float(x.kind == JV_FLOAT ? x.u.f : x.kind == JV_INT ? (double)x.u.i : x.u.b);
        return 0;
    }
    if (x.kind == JV_STR && x.n && x.n < 64) {
        char tmp[64], *end;
        memcpy(tmp, x.u.s, x.n);
        tmp[x.n] = 0;
        double f = strtod(tmp, &end);
        if (*end == 0) {
            *out = jv_float(f);
            return 0;
        }
    }
    *out = def;
    return 0;
}

/* length, count */
BUILTIN(f_length)
{
    switch (x.kind) {
    case JV_STR: *out = jv_int((int64_t)jj_u8_len(x.u.s, x.n)); return 0;
    case JV_LIST:
        if (x.flags & JV_GEN)
            break;
        *out = jv_int((int64_t)x.u.l->n);
        return 0;
    case JV_DICT: case JV_NS: *out = jv_int((int64_t)x.u.d->n); return 0;
    case JV_UNDEF: *out = jv_int(0); return 0;
    default: break;
    }
    return jj_fail(r->c, ML_E_INVAL, pos, "object of type '%s' has no len()", jv_type_name(x));
}

BUILTIN(f_unique)
{
    jv seq, cs = jv_bool(0), attr = jv_none();
    arg(a, 0, "case_sensitive", &cs);
    arg(a, 1, "attribute", &attr);
    if (list_of(r, x, &seq, pos))
        return -1;
    sort_ctx s = {r, jv_truthy(cs), 0, attr, 0};
    jv_list *l = jv_list_new(r->c, 0), *keys = jv_list_new(r->c, 0);
    if (!l || !keys)
        return -1;
    for (size_t i = 0; i < seq.u.l->n; i++) {
        jv k = sort_key(r, &s, seq.u.l->v[i]);
        int seen = 0;
        if (!jv_hashable(k)) /* unique keeps a set of what it has seen */
            return jj_fail(r->c, ML_E_INVAL, pos, "unhashable type: '%s'", jv_type_name(k));
        if (jj_steps(r->c, keys->n, pos))
            return -1;
        for (size_t j = 0; j < keys->n && !seen; j++)
            seen = jv_equal(r->c, keys->v[j], k);
        if (jj_step(r->c, pos))
            return -1;
        if (!seen && (jv_list_push(r->c, keys, k) || jv_list_push(r->c, l, seq.u.l->v[i])))
            return -1;
    }
    *out = jv_of_list(l, 0);
    return 0;
}

BUILTIN(f_round)
{
    jv prec = jv_int(0), method = jv_cstr("common");
    arg(a, 0, "precision", &prec);
    arg(a, 1, "method", &method);
    if (x.kind != JV_INT && x.kind != JV_FLOAT && x.kind != JV_BOOL)
        return bad_type(r, pos, "round", x);
    int common = !(method.kind == JV_STR && (EQ(method.u.s, method.n, "floor") || EQ(method.u.s, method.n, "ceil")));
    if (x.kind != JV_FLOAT && common && (prec.kind == JV_INT && prec.u.i >= 0)) {
        *out = jv_int(x.kind == JV_INT ? x.u.i : x.u.b); /* Python's round(int, n) is the int */
        return 0;
    }
    double f = x.kind == JV_FLOAT ? x.u.f : x.kind == JV_INT ? (double)x.u.i : x.u.b;
    int64_t p = prec.kind == JV_INT ? prec.u.i : 0;
    if (p > 300 || p < -300)
        p = p > 0 ? 300 : -300;
    double m = pow(10, (double)p), v = f * m;
    if (method.kind == JV_STR && EQ(method.u.s, method.n, "floor"))
        v = floor(v);
    else if (method.kind == JV_STR && EQ(method.u.s, method.n, "ceil"))
        v = ceil(v);
    else {
        /* Python's round(): half to even, on the exact value. */
        char buf[64];
        snprintf(buf, sizeof buf, "%.*f", (int)(p > 0 ? (p < 40 ? p : 40) : 0), f);
        if (p >= 0) {
            *out = jv_float(strtod(buf, NULL));
            return 0;
        }
        v = nearbyint(v);
    }
    *out = jv_float(v / m);
    return 0;
}

BUILTIN(f_dictsort)
{
    if (x.kind == JV_UNDEF)
        return bad_type(r, pos, "filter", x);
    jv cs = jv_bool(0), by = jv_cstr("key"), rev = jv_bool(0), items;
    arg(a, 0, "case_sensitive", &cs);
    arg(a, 1, "by", &by);
    arg(a, 2, "reverse", &rev);
    if (items_of(r, x, &items, pos))
        return -1;
    sort_ctx s = {r, jv_truthy(cs), 0, jv_none(), by.kind == JV_STR && EQ(by.u.s, by.n, "value") ? 2 : 1};
    return sort_(r, items, &s, jv_truthy(rev), out, pos);
}

/* min, max (mode 1) */
BUILTIN(f_minmax)
{
    jv seq;
    if (list_of(r, x, &seq, pos))
        return -1;
    if (seq.u.l->n == 0) {
        *out = jv_undef(NULL, 0);
        return 0;
    }
    jv best = seq.u.l->v[0];
    for (size_t i = 1; i < seq.u.l->n; i++) {
        int bad, c = jv_cmp(r->c, seq.u.l->v[i], best, &bad);
        if (bad)
            return jj_fail(r->c, ML_E_INVAL, pos, "values do not compare");
        if (mode ? c > 0 : c < 0)
            best = seq.u.l->v[i];
    }
    *out = best;
    return 0;
}

/* string; safe (mode 1) */
BUILTIN(f_string)
{
    if (jv_stringify(r->c, x, out))
        return -1;
    if (mode)
        out->flags = JV_SAFE;
    return 0;
}

/* e, escape */
BUILTIN(f_escape)
{
    return jj_escape(r, x, out);
}

BUILTIN(f_forceescape)
{
    jv v;
    return jv_stringify(r->c, x, &v) || jj_html_escape(r, v, out) ? -1 : 0;
}

BUILTIN(f_list)
{
    return list_of(r, x, out, pos);
}

BUILTIN(f_items)
{
    return items_of(r, x, out, pos);
}

/* first, last (mode 1) */
BUILTIN(f_first)
{
    jv seq;
    if (list_of(r, x, &seq, pos))
        return -1;
    size_t n = seq.u.l->n;
    *out = n ? seq.u.l->v[mode ? n - 1 : 0] : jv_undef(NULL, 0);
    return 0;
}

BUILTIN(f_abs)
{
    if (x.kind == JV_INT) {
        if (x.u.i == INT64_MIN)
            return jj_fail(r->c, ML_E_INVAL, pos, "integer overflow (beyond 64 bits)");
        *out = jv_int(x.u.i < 0 ? -x.u.i : x.u.i);
    } else if (x.kind == JV_FLOAT) {
        *out = jv_float(fabs(x.u.f));
    } else if (x.kind == JV_BOOL) {
        *out = jv_int(x.u.b);
    } else {
        return bad_type(r, pos, "abs", x);
    }
    return 0;
}

/* upper (mode 0), lower (1), capitalize (3), as jj_case; the string
 * filters work on str(x). */
BUILTIN(f_case)
{
    jv v;
    return jv_stringify(r->c, x, &v) ? -1 : jj_case(r, v, mode, out);
}

BUILTIN(f_title)
{
    jv v;
    return jv_stringify(r->c, x, &v) ? -1 : jj_title(r, v, out);
}

BUILTIN(f_trim)
{
    jv v, chars = jv_none();
    if (jv_stringify(r->c, x, &v))
        return -1;
    arg(a, 0, "chars", &chars);
    *out = jj_strip(v, chars, 3);
    return 0;
}

BUILTIN(f_wordcount)
{
    jv v;
    if (jv_stringify(r->c, x, &v))
        return -1;
    *out = jv_int(jj_wordcount(v));
    return 0;
}

BUILTIN(f_replace)
{
    jv v, old, new_, cnt = jv_int(-1);
    if (jv_stringify(r->c, x, &v))
        return -1;
    if (!arg(a, 0, "old", &old) || !arg(a, 1, "new", &new_))
        return jj_fail(r->c, ML_E_INVAL, pos, "replace needs old and new");
    arg(a, 2, "count", &cnt);
    if (jv_stringify(r->c, old, &old) || jv_stringify(r->c, new_, &new_))
        return -1;
    return jj_replace(r, v, old, new_, cnt.kind == JV_INT ? cnt.u.i : -1, out);
}

BUILTIN(f_reverse)
{
    if (x.kind == JV_STR)
        return jj_reverse_str(r, x, out);
    jv seq;
    if (list_of(r, x, &seq, pos))
        return -1;
    jv_list *l = seq.u.l;
    for (size_t i = 0; i < l->n / 2; i++) {
        jv t = l->v[i];
        l->v[i] = l->v[l->n - 1 - i];
        l->v[l->n - 1 - i] = t;
    }
    *out = seq;
    return 0;
}

BUILTIN(f_tojson)
{
    jv ind = jv_none();
    arg(a, 0, "indent", &ind);
    jj_buf b = {0};
    int indent = ind.kind == JV_INT ? (int)(ind.u.i < 0 ? 0 : ind.u.i > 64 ? 64 : ind.u.i) : -1;
    if (jv_tojson(r->c, x, indent, &b, pos))
        return -1;
    *out = jv_str(b.p, b.n);
    return 0;
}

/* default, d */
BUILTIN(f_default)
{
    jv def = jv_cstr(""), boolean = jv_bool(0);
    arg(a, 0, "default_value", &def);
    arg(a, 1, "boolean", &boolean);
    *out = (x.kind == JV_UNDEF || (jv_truthy(boolean) && !jv_truthy(x))) ? def : x;
    return 0;
}

BUILTIN(f_join)
{
    jv sep = jv_cstr(""), attr = jv_none();
    arg(a, 0, "d", &sep);
    arg(a, 1, "attribute", &attr);
    if (sep.kind != JV_STR && jv_stringify(r->c, sep, &sep))
        return -1;
    return join(r, x, sep, attr, out, pos);
}

BUILTIN(f_sort)
{
    jv rev = jv_bool(0), cs = jv_bool(0), attr = jv_none(), seq;
    arg(a, 0, "reverse", &rev);
    arg(a, 1, "case_sensitive", &cs);
    arg(a, 2, "attribute", &attr);
    if (list_of(r, x, &seq, pos))
        return -1;
    sort_ctx s = {r, jv_truthy(cs), 0, attr, 0};
    return sort_(r, seq, &s, jv_truthy(rev), out, pos);
}

BUILTIN(f_indent)
{
    jv w = jv_int(4), first = jv_bool(0), blank = jv_bool(0);
    if (x.kind != JV_STR) /* jinja2 appends "\n" to the value itself */
        return bad_type(r, pos, "indent", x);
    arg(a, 0, "width", &w);
    arg(a, 1, "first", &first);
    arg(a, 2, "blank", &blank);
    return jj_indent(r, x, w, first, blank, out);
}

BUILTIN(f_batch)
{
    jv seq, size, fill;
    int has_fill = arg(a, 1, "fill_with", &fill);
    if (!arg(a, 0, "linecount", &size) || size.kind != JV_INT || size.u.i <= 0)
        return jj_fail(r->c, ML_E_INVAL, pos, "batch needs a positive count");
    if (list_of(r, x, &seq, pos))
        return -1;
    jv_list *l = jv_list_new(r->c, 0), *cur = NULL;
    if (!l)
        return -1;
    for (size_t i = 0; i < seq.u.l->n; i++) {
        if (!cur && (!(cur = jv_list_new(r->c, 0)) || jv_list_push(r->c, l, jv_of_list(cur, 0))))
            return -1;
        if (jv_list_push(r->c, cur, seq.u.l->v[i]))
            return -1;
        if ((int64_t)cur->n == size.u.i)
            cur = NULL;
    }
    while (cur && has_fill && (int64_t)cur->n < size.u.i)
        if (jv_list_push(r->c, cur, fill))
            return -1;
    *out = jv_of_list(l, 0);
    out->flags |= JV_GEN;
    return 0;
}

BUILTIN(f_sum)
{
    jv seq, acc = jv_int(0);
    if (list_of(r, x, &seq, pos))
        return -1;
    arg(a, 1, "start", &acc);
    jv attr;
    int by = arg(a, 0, "attribute", &attr);
    for (size_t i = 0; i < seq.u.l->n; i++) {
        jv e = by ? attr_path(seq.u.l->v[i], attr) : seq.u.l->v[i];
        if (e.kind != JV_INT && e.kind != JV_FLOAT && e.kind != JV_BOOL)
            return bad_type(r, pos, "sum", e);
        double fa = acc.kind == JV_FLOAT ? acc.u.f : (double)(acc.kind == JV_INT ? acc.u.i : acc.u.b);
        if (acc.kind == JV_FLOAT || e.kind == JV_FLOAT)
            acc = jv_float(fa + (e.kind == JV_FLOAT ? e.u.f : (double)(e.kind == JV_INT ? e.u.i : e.u.b)));
        else if (__builtin_add_overflow(acc.kind == JV_INT ? acc.u.i : acc.u.b,
                                        e.kind == JV_INT ? e.u.i : e.u.b, &acc.u.i))
            return jj_fail(r->c, ML_E_INVAL, pos, "integer overflow (beyond 64 bits)");
        else
            acc.kind = JV_INT;
    }
    *out = acc;
    return 0;
}

/* ---- tests: *out is a bool ---- */

enum { T_DEFINED, T_UNDEFINED, T_NONE, T_STRING, T_NUMBER, T_INTEGER, T_FLOAT, T_BOOLEAN,
       T_TRUE, T_FALSE, T_MAPPING, T_ITERABLE, T_CALLABLE };

/* The tests of what x is. */
BUILTIN(t_type)
{
    int k = x.kind, v = 0;
    switch (mode) {
    case T_DEFINED: v = k != JV_UNDEF; break;
    case T_UNDEFINED: v = k == JV_UNDEF; break;
    case T_NONE: v = k == JV_NONE; break;
    case T_STRING: v = k == JV_STR; break;
    case T_NUMBER: v = k == JV_INT || k == JV_FLOAT || k == JV_BOOL; break;
    case T_INTEGER: v = k == JV_INT; break;
    case T_FLOAT: v = k == JV_FLOAT; break;
    case T_BOOLEAN: v = k == JV_BOOL; break;
    case T_TRUE: v = k == JV_BOOL && x.u.b; break;
    case T_FALSE: v = k == JV_BOOL && !x.u.b; break;
    case T_MAPPING: v = k == JV_DICT; break; /* a Namespace is no Mapping */
    case T_ITERABLE: v = k == JV_LIST || k == JV_DICT || k == JV_STR || k == JV_NS || k == JV_UNDEF; break;
    case T_CALLABLE: v = k == JV_FUNC || k == JV_MACRO; break;
    }
    *out = jv_bool(v);
    return 0;
}

/* lower (mode 1), upper: str(x).islower(), no cased character of the
 * other case, and one at least */
BUILTIN(t_case)
{
    jv s, lo, up;
    if (jv_stringify(r->c, x, &s) || jj_case(r, s, 1, &lo) || jj_case(r, s, 0, &up))
        return -1;
    int cased = !jv_equal(r->c, lo, up);
    *out = jv_bool(cased && jv_equal(r->c, mode ? lo : up, s));
    return 0;
}

/* odd, even, divisibleby */
enum { ODD, EVEN, DIVISIBLEBY };
BUILTIN(t_divisible)
{
    jv y = jv_none();
    int have = arg(a, 0, NULL, &y);
    if (x.kind == JV_FLOAT) {
        double d = 2;
        if (mode == DIVISIBLEBY) {
            if (!have || (y.kind != JV_INT && y.kind != JV_FLOAT))
                return jj_fail(r->c, ML_E_INVAL, pos, "divisibleby needs a number");
            d = y.kind == JV_INT ? (double)y.u.i : y.u.f;
            if (d == 0)
                return jj_fail(r->c, ML_E_INVAL, pos, "float modulo");
        }
        double m = fmod(x.u.f, d);
        if (m != 0 && ((m < 0) != (d < 0)))
            m += d;
        *out = jv_bool(mode == ODD ? m == 1 : m == 0);
        return 0;
    }
    if (x.kind != JV_INT && x.kind != JV_BOOL)
        return bad_type(r, pos, "test", x);
    int64_t v = x.kind == JV_INT ? x.u.i : x.u.b, d = 2;
    if (mode == DIVISIBLEBY) {
        if (!have || y.kind != JV_INT)
            return jj_fail(r->c, ML_E_INVAL, pos, "divisibleby needs an integer");
        d = y.u.i;
        if (d == 0)
            return jj_fail(r->c, ML_E_INVAL, pos, "integer division or modulo by zero");
    }
    int64_t m = d == -1 ? 0 : v % d;
    *out = jv_bool(mode == ODD ? m != 0 : m == 0);
    return 0;
}

/* eq, equalto, ==; ne, != (mode 1) */
BUILTIN(t_eq)
{
    jv y = jv_none();
    int have = arg(a, 0, NULL, &y);
    *out = jv_bool(mode ? !have || !jv_equal(r->c, x, y) : have && jv_equal(r->c, x, y));
    return 0;
}

BUILTIN(t_sameas)
{
    jv y = jv_none();
    int have = arg(a, 0, NULL, &y);
    *out = jv_bool(have && x.kind == y.kind &&
                   (x.kind == JV_NONE || x.kind == JV_UNDEF || (x.kind == JV_BOOL && x.u.b == y.u.b) ||
                    (x.kind == JV_INT && x.u.i == y.u.i) ||
                    ((x.kind == JV_LIST || x.kind == JV_DICT) && x.u.l == y.u.l)));
    return 0;
}

/* lt, le, gt, ge and their other names */
enum { LESS = 1, OR_EQUAL = 2 };
BUILTIN(t_compare)
{
    jv y = jv_none();
    int bad;
    if (!arg(a, 0, NULL, &y))
        return jj_fail(r->c, ML_E_INVAL, pos, "test needs an argument");
    int c = jv_cmp(r->c, x, y, &bad);
    if (bad)
        return jj_fail(r->c, ML_E_INVAL, pos, "'<' not supported between instances of '%s' and '%s'",
                       jv_type_name(x), jv_type_name(y));
    int eq = mode & OR_EQUAL;
    *out = jv_bool(mode & LESS ? (eq ? c <= 0 : c < 0) : (eq ? c >= 0 : c > 0));
    return 0;
}

BUILTIN(t_in)
{
    jv y = jv_none();
    int v = 0;
    if (!arg(a, 0, NULL, &y))
        return jj_fail(r->c, ML_E_INVAL, pos, "test needs an argument");
    if (y.kind == JV_STR && x.kind == JV_STR) {
        v = x.n == 0 || memmem(y.u.s, y.n, x.u.s, x.n) != NULL;
    } else if (y.kind == JV_LIST) {
        for (size_t i = 0; !v && i < y.u.l->n; i++)
            v = jv_equal(r->c, y.u.l->v[i], x);
    } else if (y.kind == JV_DICT || y.kind == JV_NS) {
        v = jv_dict_get(y.u.d, x) != NULL;
    } else {
        return bad_type(r, pos, "in", y);
    }
    *out = jv_bool(v);
    return 0;
}

/* ---- methods of str: x is self ---- */

/* strip (mode 3), lstrip (1), rstrip (2) */
BUILTIN(m_strip)
{
    jv chars = jv_none();
    if (arg(a, 0, NULL, &chars) && chars.kind != JV_STR && chars.kind != JV_NONE)
        return bad_type(r, pos, "strip", chars);
    *out = jj_strip(x, chars, mode);
    return 0;
}

/* split, rsplit (mode 1) */
BUILTIN(m_split)
{
    jv sep = jv_none(), maxs = jv_int(-1);
    arg(a, 0, "sep", &sep);
    arg(a, 1, "maxsplit", &maxs);
    return jj_split(r, x, sep, maxs.kind == JV_INT ? maxs.u.i : -1, mode, out, pos);
}

/* startswith, endswith (mode 1) */
BUILTIN(m_affix)
{
    jv p = jv_none();
    if (!arg(a, 0, NULL, &p) || (p.kind != JV_STR && p.kind != JV_LIST))
        return bad_type(r, pos, "startswith", p);
    *out = jv_bool(jj_affix(x, p, mode));
    return 0;
}

/* upper (mode 0), lower (1), title (2), capitalize (3) */
BUILTIN(m_case)
{
    return jj_case(r, x, mode, out);
}

BUILTIN(m_replace)
{
    jv old = jv_none(), new_ = jv_none(), cnt = jv_int(-1);
    arg(a, 0, NULL, &old);
    arg(a, 1, NULL, &new_);
    arg(a, 2, NULL, &cnt);
    if (old.kind != JV_STR || new_.kind != JV_STR)
        return bad_type(r, pos, "replace", old);
    return jj_replace(r, x, old, new_, cnt.kind == JV_INT ? cnt.u.i : -1, out);
}

/* find, rfind, index, rindex */
enum { FROM_RIGHT = 1, RAISE = 2 };
BUILTIN(m_find)
{
    jv sub = jv_none();
    int64_t i;
    arg(a, 0, NULL, &sub);
    if (sub.kind != JV_STR)
        return bad_type(r, pos, "find", sub);
    jj_find(x, sub, mode & FROM_RIGHT, &i);
    if (i < 0 && (mode & RAISE))
        return jj_fail(r->c, ML_E_INVAL, pos, "substring not found");
    *out = jv_int(i);
    return 0;
}

BUILTIN(m_count)
{
    jv sub = jv_none();
    arg(a, 0, NULL, &sub);
    if (sub.kind != JV_STR)
        return bad_type(r, pos, "count", sub);
    *out = jv_int(jj_count(x, sub));
    return 0;
}

BUILTIN(m_join)
{
    jv items = jv_none();
    arg(a, 0, NULL, &items);
    if (items.kind == JV_LIST)
        for (size_t i = 0; i < items.u.l->n; i++)
            if (items.u.l->v[i].kind != JV_STR)
                return jj_fail(r->c, ML_E_INVAL, pos, "sequence item %zu: expected str instance, %s found", i,
                               jv_type_name(items.u.l->v[i]));
    return join(r, items, x, jv_none(), out, pos);
}

BUILTIN(m_splitlines)
{
    return jj_splitlines(r, x, out);
}

BUILTIN(m_format)
{
    return jj_format(r, x, a, out, pos);
}

/* isdigit, isalpha, isspace, isalnum, islower, isupper (mode 0 to 5) */
BUILTIN(m_class)
{
    *out = jv_bool(jj_str_class(x, mode));
    return 0;
}

/* ---- methods of dict and list ---- */

BUILTIN(m_get)
{
    jv k = jv_none(), def = jv_none();
    arg(a, 0, NULL, &k);
    arg(a, 1, NULL, &def);
    jv *v = jv_dict_get(x.u.d, k);
    *out = v ? *v : def;
    return 0;
}

BUILTIN(m_items)
{
    if (items_of(r, x, out, pos))
        return -1;
    out->flags |= JV_ITEMS;
    return 0;
}

/* keys, values (mode 1) */
BUILTIN(m_keys)
{
    jv_list *l = jv_list_new(r->c, x.u.d->n);
    if (!l)
        return -1;
    for (size_t i = 0; i < x.u.d->n; i++)
        l->v[l->n++] = mode ? x.u.d->v[i] : x.u.d->k[i];
    *out = jv_of_list(l, 0);
    out->flags |= mode ? JV_VALUES : JV_KEYS;
    return 0;
}

BUILTIN(m_dict_copy)
{
    jv_dict *d = jv_dict_new(r->c, 0);
    if (!d)
        return -1;
    for (size_t i = 0; i < x.u.d->n; i++)
        if (jv_dict_set(r->c, d, x.u.d->k[i], x.u.d->v[i]))
            return -1;
    *out = (jv){.kind = JV_DICT};
    out->u.d = d;
    return 0;
}

/* count, index (mode 1) */
BUILTIN(m_index)
{
    jv v = jv_none();
    int64_t n = 0;
    arg(a, 0, NULL, &v);
    if (jj_steps(r->c, x.u.l->n, pos))
        return -1;
    for (size_t i = 0; i < x.u.l->n; i++)
        if (jv_equal(r->c, x.u.l->v[i], v)) {
            if (mode) {
                *out = jv_int((int64_t)i);
                return 0;
            }
            n++;
        }
    if (mode)
        return jj_fail(r->c, ML_E_INVAL, pos, "value is not in list");
    *out = jv_int(n);
    return 0;
}

BUILTIN(m_list_copy)
{
    return list_of(r, x, out, pos);
}

/* ---- the table ---- */

struct jj_builtin {
    const char *name;
    uint8_t len;
    uint8_t kind;   /* jj_kind */
    uint8_t mode;   /* passed to fn */
    builtin_fn *fn; /* NULL: a method that mutates, which the sandbox refuses */
};
#define B(kind, name, fn, mode) {name, sizeof name - 1, kind, mode, fn}

static const jj_builtin builtins[] = {
    B(JJ_FILTER, "abs", f_abs, 0),
    B(JJ_FILTER, "batch", f_batch, 0),
    B(JJ_FILTER, "capitalize", f_case, 3),
    B(JJ_FILTER, "count", f_length, 0),
    B(JJ_FILTER, "d", f_default, 0),
    B(JJ_FILTER, "default", f_default, 0),
    B(JJ_FILTER, "dictsort", f_dictsort, 0),
    B(JJ_FILTER, "e", f_escape, 0),
    B(JJ_FILTER, "escape", f_escape, 0),
    B(JJ_FILTER, "first", f_first, 0),
    B(JJ_FILTER, "float", f_float, 0),
    B(JJ_FILTER, "forceescape", f_forceescape, 0),
    B(JJ_FILTER, "indent", f_indent, 0),
    B(JJ_FILTER, "int", f_int, 0),
    B(JJ_FILTER, "items", f_items, 0),
    B(JJ_FILTER, "join", f_join, 0),
    B(JJ_FILTER, "last", f_first, 1),
    B(JJ_FILTER, "length", f_length, 0),
    B(JJ_FILTER, "list", f_list, 0),
    B(JJ_FILTER, "lower", f_case, 1),
    B(JJ_FILTER, "map", f_map, 0),
    B(JJ_FILTER, "max", f_minmax, 1),
    B(JJ_FILTER, "min", f_minmax, 0),
    B(JJ_FILTER, "reject", f_select, 0),
    B(JJ_FILTER, "rejectattr", f_select, BY_ATTR),
    B(JJ_FILTER, "replace", f_replace, 0),
    B(JJ_FILTER, "reverse", f_reverse, 0),
    B(JJ_FILTER, "round", f_round, 0),
    B(JJ_FILTER, "safe", f_string, 1),
    B(JJ_FILTER, "select", f_select, KEEP),
    B(JJ_FILTER, "selectattr", f_select, KEEP | BY_ATTR),
    B(JJ_FILTER, "sort", f_sort, 0),
    B(JJ_FILTER, "string", f_string, 0),
    B(JJ_FILTER, "sum", f_sum, 0),
    B(JJ_FILTER, "title", f_title, 0),
    B(JJ_FILTER, "tojson", f_tojson, 0),
    B(JJ_FILTER, "trim", f_trim, 0),
    B(JJ_FILTER, "unique", f_unique, 0),
    B(JJ_FILTER, "upper", f_case, 0),
    B(JJ_FILTER, "wordcount", f_wordcount, 0),

    B(JJ_TEST, "boolean", t_type, T_BOOLEAN),
    B(JJ_TEST, "callable", t_type, T_CALLABLE),
    B(JJ_TEST, "defined", t_type, T_DEFINED),
    B(JJ_TEST, "divisibleby", t_divisible, DIVISIBLEBY),
    B(JJ_TEST, "eq", t_eq, 0),
    B(JJ_TEST, "equalto", t_eq, 0),
    B(JJ_TEST, "==", t_eq, 0),
    B(JJ_TEST, "even", t_divisible, EVEN),
    B(JJ_TEST, "false", t_type, T_FALSE),
    B(JJ_TEST, "float", t_type, T_FLOAT),
    B(JJ_TEST, "ge", t_compare, OR_EQUAL),
    B(JJ_TEST, ">=", t_compare, OR_EQUAL),
    B(JJ_TEST, "gt", t_compare, 0),
    B(JJ_TEST, "greaterthan", t_compare, 0),
    B(JJ_TEST, ">", t_compare, 0),
    B(JJ_TEST, "in", t_in, 0),
    B(JJ_TEST, "integer", t_type, T_INTEGER),
    B(JJ_TEST, "iterable", t_type, T_ITERABLE),
    B(JJ_TEST, "le", t_compare, LESS | OR_EQUAL),
    B(JJ_TEST, "<=", t_compare, LESS | OR_EQUAL),
    B(JJ_TEST, "lower", t_case, 1),
    B(JJ_TEST, "lt", t_compare, LESS),
    B(JJ_TEST, "lessthan", t_compare, LESS),
    B(JJ_TEST, "<", t_compare, LESS),
    B(JJ_TEST, "mapping", t_type, T_MAPPING),
    B(JJ_TEST, "ne", t_eq, 1),
    B(JJ_TEST, "!=", t_eq, 1),
    B(JJ_TEST, "none", t_type, T_NONE),
    B(JJ_TEST, "number", t_type, T_NUMBER),
    B(JJ_TEST, "odd", t_divisible, ODD),
    B(JJ_TEST, "sameas", t_sameas, 0),
    B(JJ_TEST, "sequence", t_type, T_ITERABLE),
    B(JJ_TEST, "string", t_type, T_STRING),
    B(JJ_TEST, "true", t_type, T_TRUE),
    B(JJ_TEST, "undefined", t_type, T_UNDEFINED),
    B(JJ_TEST, "upper", t_case, 0),

    B(JJ_STR_METHOD, "capitalize", m_case, 3),
    B(JJ_STR_METHOD, "count", m_count, 0),
    B(JJ_STR_METHOD, "endswith", m_affix, 1),
    B(JJ_STR_METHOD, "find", m_find, 0),
    B(JJ_STR_METHOD, "format", m_format, 0),
    B(JJ_STR_METHOD, "index", m_find, RAISE),
    B(JJ_STR_METHOD, "isalnum", m_class, 3),
    B(JJ_STR_METHOD, "isalpha", m_class, 1),
    B(JJ_STR_METHOD, "isdigit", m_class, 0),
    B(JJ_STR_METHOD, "islower", m_class, 4),
    B(JJ_STR_METHOD, "isspace", m_class, 2),
    B(JJ_STR_METHOD, "isupper", m_class, 5),
    B(JJ_STR_METHOD, "join", m_join, 0),
    B(JJ_STR_METHOD, "lower", m_case, 1),
    B(JJ_STR_METHOD, "lstrip", m_strip, 1),
    B(JJ_STR_METHOD, "replace", m_replace, 0),
    B(JJ_STR_METHOD, "rfind", m_find, FROM_RIGHT),
    B(JJ_STR_METHOD, "rindex", m_find, FROM_RIGHT | RAISE),
    B(JJ_STR_METHOD, "rsplit", m_split, 1),
    B(JJ_STR_METHOD, "rstrip", m_strip, 2),
    B(JJ_STR_METHOD, "split", m_split, 0),
    B(JJ_STR_METHOD, "splitlines", m_splitlines, 0),
    B(JJ_STR_METHOD, "startswith", m_affix, 0),
    B(JJ_STR_METHOD, "strip", m_strip, 3),
    B(JJ_STR_METHOD, "title", m_case, 2),
    B(JJ_STR_METHOD, "upper", m_case, 0),

    B(JJ_DICT_METHOD, "copy", m_dict_copy, 0),
    B(JJ_DICT_METHOD, "get", m_get, 0),
    B(JJ_DICT_METHOD, "items", m_items, 0),
    B(JJ_DICT_METHOD, "keys", m_keys, 0),
    B(JJ_DICT_METHOD, "values", m_keys, 1),
    B(JJ_DICT_METHOD, "clear", NULL, 0),
    B(JJ_DICT_METHOD, "pop", NULL, 0),
    B(JJ_DICT_METHOD, "popitem", NULL, 0),
    B(JJ_DICT_METHOD, "setdefault", NULL, 0),
    B(JJ_DICT_METHOD, "update", NULL, 0),

    B(JJ_LIST_METHOD, "copy", m_list_copy, 0),
    B(JJ_LIST_METHOD, "count", m_index, 0),
    B(JJ_LIST_METHOD, "index", m_index, 1),
    B(JJ_LIST_METHOD, "append", NULL, 0),
    B(JJ_LIST_METHOD, "clear", NULL, 0),
    B(JJ_LIST_METHOD, "extend", NULL, 0),
    B(JJ_LIST_METHOD, "insert", NULL, 0),
    B(JJ_LIST_METHOD, "pop", NULL, 0),
    B(JJ_LIST_METHOD, "remove", NULL, 0),
    B(JJ_LIST_METHOD, "reverse", NULL, 0),
    B(JJ_LIST_METHOD, "sort", NULL, 0),
};

const jj_builtin *jj_builtin_find(jj_kind kind, const char *name, size_t n)
{
    for (size_t i = 0; i < sizeof builtins / sizeof *builtins; i++) {
        const jj_builtin *b = &builtins[i];
        if (b->kind == kind && b->len == n && memcmp(b->name, name, n) == 0)
            return b;
    }
    return NULL;
}

/* ---- dispatch ---- */

int jj_filter(jj_render *r, const char *f, size_t fn, jv x, const jj_args *a, jv *out, size_t pos)
{
    if (jj_step(r->c, pos))
        return -1;
    const jj_builtin *b = jj_builtin_find(JJ_FILTER, f, fn);
    if (!b)
        return jj_fail(r->c, ML_E_INVAL, pos, "no filter named '%.*s'", (int)(fn > 40 ? 40 : fn), f);
    return b->fn(r, x, a, b->mode, out, pos);
}

int jj_test(jj_render *r, const char *t, size_t tn, jv x, const jj_args *a, int *out, size_t pos)
{
    jv y, res;
    int have = arg(a, 0, NULL, &y);
    if (jj_steps(r->c, 1 + (x.kind == JV_STR ? x.n / 64 : 0) + (have && y.kind == JV_STR ? y.n / 64 : 0) +
                           (have && y.kind == JV_LIST ? y.u.l->n : 0), pos))
        return -1;
    const jj_builtin *b = jj_builtin_find(JJ_TEST, t, tn);
    if (!b)
        return jj_fail(r->c, ML_E_INVAL, pos, "no test named '%.*s'", (int)(tn > 40 ? 40 : tn), t);
    if (b->fn(r, x, a, b->mode, &res, pos))
        return -1;
    *out = res.u.b;
    return 0;
}

int jj_has_method(jv v, const char *name, size_t n, int *unsafe)
{
    *unsafe = 0;
    if (n && name[0] == '_') {
        *unsafe = v.kind != JV_UNDEF;
        return *unsafe;
    }
    jj_kind kind;
    if (v.kind == JV_STR)
        kind = JJ_STR_METHOD;
    else if (v.kind == JV_DICT)
        kind = JJ_DICT_METHOD;
    else if (v.kind == JV_LIST && !(v.flags & (JV_GEN | JV_VIEW))) /* generators and dict views have none */
        kind = JJ_LIST_METHOD;
    else
        return 0;
    const jj_builtin *b = jj_builtin_find(kind, name, n);
    if (!b || (!b->fn && v.kind == JV_LIST && (v.flags & JV_TUPLE))) /* a tuple has no mutating methods */
        return 0;
    *unsafe = !b->fn;
    return 1;
}

int jj_method(jj_render *r, jv self, const char *m, const jj_args *a, jv *out, size_t pos)
{
    size_t mn = strlen(m);
    const jj_builtin *b = NULL;
    if (self.kind == JV_STR) {
        jv x = jv_none();
        arg(a, 0, NULL, &x);
        if (jj_steps(r->c, self.n / 64 + (x.kind == JV_STR ? x.n / 64 : 0), pos))
            return -1;
        b = jj_builtin_find(JJ_STR_METHOD, m, mn);
        if (!b)
            return jj_fail(r->c, ML_E_INVAL, pos, "str.%.*s is not supported", (int)(mn > 40 ? 40 : mn), m);
    } else if (self.kind == JV_DICT || self.kind == JV_LIST) {
        b = jj_builtin_find(self.kind == JV_DICT ? JJ_DICT_METHOD : JJ_LIST_METHOD, m, mn);
    }
    if (b && b->fn)
        return b->fn(r, self, a, b->mode, out, pos);
    return jj_fail(r->c, ML_E_INVAL, pos, "'%s' object has no method '%.*s'", jv_type_name(self),
                   (int)(mn > 40 ? 40 : mn), m);
}
