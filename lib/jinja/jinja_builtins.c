/* jinja_builtins.c - jinja2's filters and tests, and the Python methods of
 * str, dict and list that templates call, with the sandbox's refusal of
 * the mutating ones (list.append, dict.update, ...). */
/* memmem: substring search in linear time (two-way in glibc), so a
 * hostile template cannot make a search quadratic. */
#define _GNU_SOURCE
#include "jinja/jinja.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <utf8proc.h>

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

static int is_space(unsigned char ch)
{
    return ch == ' ' || (ch >= '\t' && ch <= '\r') || (ch >= 0x1c && ch <= 0x1f);
}

/* strip: which 1 left, 2 right, 3 both; chars a str or none (whitespace).
 * Multi-byte chars in `chars` strip byte-wise, which is exact for ASCII.
 * A byte table keeps it linear whatever the length of chars. */
static jv strip(jv s, jv chars, int which)
{
    unsigned char set[256] = {0};
    for (int ch = 0; ch < 256; ch++)
        set[ch] = chars.kind != JV_STR && is_space((unsigned char)ch);
    if (chars.kind == JV_STR)
        for (size_t i = 0; i < chars.n; i++)
            set[(unsigned char)chars.u.s[i]] = 1;
    size_t a = 0, b = s.n;
    if (which & 1)
        while (a < b && set[(unsigned char)s.u.s[a]])
            a++;
    if (which & 2)
        while (b > a && set[(unsigned char)s.u.s[b - 1]])
            b--;
    return jv_str(s.u.s + a, b - a);
}

/* Maps every code point through f (case changes). */
static int map_cp(jj_render *r, jv s, int mode, jv *out)
{
    jj_buf b = {0};
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s.u.s;
    utf8proc_ssize_t n = (utf8proc_ssize_t)s.n, i = 0;
    int prev_cased = 0;
    while (i < n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p + i, n - i, &cp);
        if (k <= 0) {
            if (jj_buf_putc(r->c, &b, (char)p[i]))
                return -1;
            i++;
            continue;
        }
        utf8proc_int32_t m = cp;
        int cased = utf8proc_tolower(cp) != cp || utf8proc_toupper(cp) != cp;
        switch (mode) {
        case 0: m = utf8proc_toupper(cp); break;
        case 1: m = utf8proc_tolower(cp); break;
        case 2: m = prev_cased ? utf8proc_tolower(cp) : utf8proc_toupper(cp); break; /* str.title */
        case 3: m = i == 0 ? utf8proc_toupper(cp) : utf8proc_tolower(cp); break;   /* capitalize */
        }
        prev_cased = cased;
        utf8proc_uint8_t enc[4];
        utf8proc_ssize_t e = utf8proc_encode_char(m, enc);
        if (jj_buf_put(r->c, &b, enc, (size_t)e))
            return -1;
        i += k;
    }
    *out = jv_str(b.p, b.n);
    return 0;
}

/* jinja2's title filter: words start after whitespace, - ( { [ <. */
static int title_filter(jj_render *r, jv s, jv *out)
{
    jj_buf b = {0};
    size_t i = 0;
    while (i < s.n) {
        size_t j = i;
        while (j < s.n && (is_space((unsigned char)s.u.s[j]) || strchr("-({[<", s.u.s[j])) && s.u.s[j])
            j++;
        if (jj_buf_put(r->c, &b, s.u.s + i, j - i))
            return -1;
        size_t k = j;
        while (k < s.n && !(is_space((unsigned char)s.u.s[k]) || (s.u.s[k] && strchr("-({[<", s.u.s[k]))))
            k++;
        jv w;
        if (k > j && (map_cp(r, jv_str(s.u.s + j, k - j), 3, &w) || jj_buf_put(r->c, &b, w.u.s, w.n)))
            return -1;
        i = k;
    }
    *out = jv_str(b.p, b.n);
    return 0;
}

static int replace(jj_render *r, jv s, jv old, jv new_, int64_t count, jv *out)
{
    jj_buf b = {0};
    size_t i = 0;
    int64_t done = 0;
    if (old.n == 0) {
        /* Python inserts new_ between every character. */
        for (size_t k = 0; k <= s.n; k++) {
            if ((count < 0 || done < count) && (k == s.n || ((unsigned char)s.u.s[k] & 0xc0) != 0x80)) {
                if (jj_buf_put(r->c, &b, new_.u.s, new_.n))
                    return -1;
                done++;
            }
            if (k < s.n && jj_buf_putc(r->c, &b, s.u.s[k]))
                return -1;
        }
        *out = jv_str(b.p, b.n);
        return 0;
    }
    while (i < s.n) {
        const char *q = count < 0 || done < count ? memmem(s.u.s + i, s.n - i, old.u.s, old.n) : NULL;
        size_t k = q ? (size_t)(q - s.u.s) : s.n;
        if (jj_buf_put(r->c, &b, s.u.s + i, k - i))
            return -1;
        i = k;
        if (q) {
            if (jj_buf_put(r->c, &b, new_.u.s, new_.n))
                return -1;
            i += old.n;
            done++;
        }
    }
    *out = jv_str(b.p ? b.p : "", b.n);
    return 0;
}

static int find(jv s, jv sub, int from_right, int64_t *out)
{
    *out = -1;
    if (sub.n > s.n)
        return 0;
    const char *hit = NULL;
    if (!from_right) {
        hit = memmem(s.u.s, s.n, sub.u.s, sub.n);
    } else {
        /* the last match: search on after each one (linear overall) */
        for (const char *p = s.u.s, *q; (q = memmem(p, s.n - (size_t)(p - s.u.s), sub.u.s, sub.n)) != NULL;
             p = q + 1) {
            hit = q;
            if (q == s.u.s + s.n)
                break;
        }
    }
    if (hit)
        *out = (int64_t)jj_u8_len(s.u.s, (size_t)(hit - s.u.s));
    return 0;
}

static int split(jj_render *r, jv s, jv sep, int64_t maxsplit, int right, jv *out, size_t pos)
{
    jv_list *l = jv_list_new(r->c, 0);
    if (!l)
        return -1;
    if (sep.kind == JV_STR && sep.n == 0)
        return jj_fail(r->c, ML_E_INVAL, pos, "empty separator");
    if (sep.kind != JV_STR) {
        /* runs of whitespace, ends dropped */
        if (right) {
            size_t e = s.n;
            jv_list *rev = jv_list_new(r->c, 0);
            if (!rev)
                return -1;
            while (1) {
                while (e > 0 && is_space((unsigned char)s.u.s[e - 1]))
                    e--;
                if (e == 0)
                    break;
                if (maxsplit >= 0 && (int64_t)rev->n == maxsplit) {
                    if (jv_list_push(r->c, rev, jv_str(s.u.s, e)))
                        return -1;
                    break;
                }
                size_t b = e;
                while (b > 0 && !is_space((unsigned char)s.u.s[b - 1]))
                    b--;
                if (jv_list_push(r->c, rev, jv_str(s.u.s + b, e - b)))
                    return -1;
                e = b;
            }
            for (size_t i = rev->n; i-- > 0;)
                if (jv_list_push(r->c, l, rev->v[i]))
                    return -1;
        } else {
            size_t i = 0;
            while (1) {
                while (i < s.n && is_space((unsigned char)s.u.s[i]))
                    i++;
                if (i == s.n)
                    break;
                if (maxsplit >= 0 && (int64_t)l->n == maxsplit) {
                    size_t e = s.n;
                    while (e > i && is_space((unsigned char)s.u.s[e - 1]))
                        e--;
                    if (jv_list_push(r->c, l, jv_str(s.u.s + i, e - i)))
                        return -1;
                    break;
                }
                size_t b = i;
                while (i < s.n && !is_space((unsigned char)s.u.s[i]))
                    i++;
                if (jv_list_push(r->c, l, jv_str(s.u.s + b, i - b)))
                    return -1;
            }
        }
        *out = jv_of_list(l, 0);
        return 0;
    }
    if (right) {
        jv_list *rev = jv_list_new(r->c, 0);
        if (!rev)
            return -1;
        size_t e = s.n;
        while (1) {
            size_t k = SIZE_MAX;
            if (maxsplit < 0 || (int64_t)rev->n < maxsplit)
                for (size_t i = e; i >= sep.n; i--)
                    if (memcmp(s.u.s + i - sep.n, sep.u.s, sep.n) == 0) {
                        k = i - sep.n;
                        break;
                    }
            if (k == SIZE_MAX) {
                if (jv_list_push(r->c, rev, jv_str(s.u.s, e)))
                    return -1;
                break;
            }
            if (jv_list_push(r->c, rev, jv_str(s.u.s + k + sep.n, e - k - sep.n)))
                return -1;
            e = k;
        }
        for (size_t i = rev->n; i-- > 0;)
            if (jv_list_push(r->c, l, rev->v[i]))
                return -1;
        *out = jv_of_list(l, 0);
        return 0;
    }
    size_t b = 0;
    while (maxsplit < 0 || (int64_t)l->n < maxsplit) {
        const char *q = memmem(s.u.s + b, s.n - b, sep.u.s, sep.n);
        if (!q)
            break;
        size_t i = (size_t)(q - s.u.s);
        if (jv_list_push(r->c, l, jv_str(s.u.s + b, i - b)))
            return -1;
        b = i + sep.n;
    }
    if (jv_list_push(r->c, l, jv_str(s.u.s + b, s.n - b)))
        return -1;
    *out = jv_of_list(l, 0);
    return 0;
}

static int affix(jv s, jv p, int end)
{
    if (p.kind == JV_LIST) {
        for (size_t i = 0; i < p.u.l->n; i++)
            if (affix(s, p.u.l->v[i], end))
                return 1;
        return 0;
    }
    if (p.kind != JV_STR || p.n > s.n)
        return 0;
    return memcmp(s.u.s + (end ? s.n - p.n : 0), p.u.s, p.n) == 0;
}

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
        for (size_t i = 0; i < x.n;) {
            size_t k = 1;
            while (i + k < x.n && ((unsigned char)x.u.s[i + k] & 0xc0) == 0x80)
                k++;
            if (jv_list_push(r->c, l, jv_str(x.u.s + i, k)))
                return -1;
            i += k;
        }
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

/* select/reject/selectattr/rejectattr. */
static int select_(jj_render *r, jv x, const jj_args *a, int by_attr, int keep, jv *out, size_t pos)
{
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

static int map_(jj_render *r, jv x, const jj_args *a, jv *out, size_t pos)
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
        if (map_cp(r, v, 1, &low) == 0)
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

static int escape(jj_render *r, jv s, jv *out)
{
    jj_buf b = {0};
    for (size_t i = 0; i < s.n; i++) {
        const char *rep = NULL;
        switch (s.u.s[i]) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&#34;"; break;
        case '\'': rep = "&#39;"; break;
        }
        if (rep ? jj_buf_put(r->c, &b, rep, strlen(rep)) : jj_buf_putc(r->c, &b, s.u.s[i]))
            return -1;
    }
    *out = jv_str(b.p, b.n);
    out->flags = JV_SAFE;
    return 0;
}

int jj_escape(jj_render *r, jv v, jv *out)
{
    if (v.kind == JV_STR && (v.flags & JV_SAFE)) {
        *out = v;
        return 0;
    }
    return jv_stringify(r->c, v, &v) || escape(r, v, out) ? -1 : 0;
}

static int indent_(jj_render *r, jv s, const jj_args *a, jv *out)
{
    jv w = jv_int(4), first = jv_bool(0), blank = jv_bool(0);
    arg(a, 0, "width", &w);
    arg(a, 1, "first", &first);
    arg(a, 2, "blank", &blank);
    jv pad;
    if (w.kind == JV_STR)
        pad = w;
    else {
        int64_t n = w.kind == JV_INT ? w.u.i : 4;
        if (n < 0)
            n = 0;
        if (n > 4096)
            return jj_fail(r->c, ML_E_INVAL, SIZE_MAX, "indent width too large");
        char *p = jj_alloc(r->c, (size_t)n + 1);
        if (!p)
            return -1;
        memset(p, ' ', (size_t)n);
        pad = jv_str(p, (size_t)n);
    }
    jj_buf b = {0};
    size_t i = 0, line = 0;
    while (i <= s.n) {
        size_t j = i;
        while (j < s.n && s.u.s[j] != '\n')
            j++;
        int empty = j == i;
        int last = j == s.n;
        if (last && empty && line > 0)
            break;
        if ((line > 0 || jv_truthy(first)) && (!empty || jv_truthy(blank)) &&
            jj_buf_put(r->c, &b, pad.u.s, pad.n))
            return -1;
        if (jj_buf_put(r->c, &b, s.u.s + i, j - i))
            return -1;
        if (last)
            break;
        if (jj_buf_putc(r->c, &b, '\n'))
            return -1;
        i = j + 1;
        line++;
    }
    *out = jv_str(b.p, b.n);
    return 0;
}

static int to_int(jj_render *r, jv x, const jj_args *a, jv *out)
{
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
        jv t = strip(x, jv_none(), 3);
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

static int to_float(jv x, const jj_args *a, jv *out)
{
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

static int length(jj_render *r, jv x, jv *out, size_t pos)
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

static int unique(jj_render *r, jv x, const jj_args *a, jv *out, size_t pos)
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

static int round_(jj_render *r, jv x, const jj_args *a, jv *out, size_t pos)
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

static int dictsort(jj_render *r, jv x, const jj_args *a, jv *out, size_t pos)
{
    jv cs = jv_bool(0), by = jv_cstr("key"), rev = jv_bool(0), items;
    arg(a, 0, "case_sensitive", &cs);
    arg(a, 1, "by", &by);
    arg(a, 2, "reverse", &rev);
    if (items_of(r, x, &items, pos))
        return -1;
    sort_ctx s = {r, jv_truthy(cs), 0, jv_none(), by.kind == JV_STR && EQ(by.u.s, by.n, "value") ? 2 : 1};
    return sort_(r, items, &s, jv_truthy(rev), out, pos);
}

static int minmax(jj_render *r, jv x, int want_max, jv *out, size_t pos)
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
        if (want_max ? c > 0 : c < 0)
            best = seq.u.l->v[i];
    }
    *out = best;
    return 0;
}

static int filter2(jj_render *r, const char *f, size_t fn, jv x, const jj_args *a, jv *out, size_t pos)
{
    if (EQ(f, fn, "tojson")) {
        jv ind = jv_none();
        arg(a, 0, "indent", &ind);
        jj_buf b = {0};
        int indent = ind.kind == JV_INT ? (int)(ind.u.i < 0 ? 0 : ind.u.i > 64 ? 64 : ind.u.i) : -1;
        if (jv_tojson(r->c, x, indent, &b, pos))
            return -1;
        *out = jv_str(b.p, b.n);
        return 0;
    }
    if (EQ(f, fn, "default") || EQ(f, fn, "d")) {
        jv def = jv_cstr(""), boolean = jv_bool(0);
        arg(a, 0, "default_value", &def);
        arg(a, 1, "boolean", &boolean);
        *out = (x.kind == JV_UNDEF || (jv_truthy(boolean) && !jv_truthy(x))) ? def : x;
        return 0;
    }
    if (EQ(f, fn, "join")) {
        jv sep = jv_cstr(""), attr = jv_none();
        arg(a, 0, "d", &sep);
        arg(a, 1, "attribute", &attr);
        if (sep.kind != JV_STR && jv_stringify(r->c, sep, &sep))
            return -1;
        return join(r, x, sep, attr, out, pos);
    }
    if (EQ(f, fn, "map"))
        return map_(r, x, a, out, pos);
    if (EQ(f, fn, "select") || EQ(f, fn, "reject") || EQ(f, fn, "selectattr") || EQ(f, fn, "rejectattr"))
        return select_(r, x, a, fn > 6, f[0] == 's', out, pos);
    if (EQ(f, fn, "sort")) {
        jv rev = jv_bool(0), cs = jv_bool(0), attr = jv_none(), seq;
        arg(a, 0, "reverse", &rev);
        arg(a, 1, "case_sensitive", &cs);
        arg(a, 2, "attribute", &attr);
        if (list_of(r, x, &seq, pos))
            return -1;
        sort_ctx s = {r, jv_truthy(cs), 0, attr, 0};
        return sort_(r, seq, &s, jv_truthy(rev), out, pos);
    }
    if (EQ(f, fn, "dictsort"))
        return dictsort(r, x, a, out, pos);
    if (EQ(f, fn, "unique"))
        return unique(r, x, a, out, pos);
    if (EQ(f, fn, "indent")) {
        if (x.kind != JV_STR) /* jinja2 appends "\n" to the value itself */
            return bad_type(r, pos, "indent", x);
        return indent_(r, x, a, out);
    }
    if (EQ(f, fn, "batch")) {
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
    if (EQ(f, fn, "round"))
        return round_(r, x, a, out, pos);
    if (EQ(f, fn, "min") || EQ(f, fn, "max"))
        return minmax(r, x, f[1] == 'a', out, pos);
    if (EQ(f, fn, "sum")) {
        jv seq, acc = jv_int(0);
        if (list_of(r, x, &seq, pos))
            return -1;
        arg(a, 1, "start", &acc);
        jv attr;
        int by = arg(a, 0, "attribute", &attr);
        for (size_t i = 0; i < seq.u.l->n; i++) {
            jv e = by ? attr_path(seq.u.l->v[i], attr) : seq.u.l->v[i];
            jv_list one = {1, 1, &e};
            (void)one;
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
    return jj_fail(r->c, ML_E_INVAL, pos, "no filter named '%.*s'", (int)(fn > 40 ? 40 : fn), f);
}

int jj_filter(jj_render *r, const char *f, size_t fn, jv x, const jj_args *a, jv *out, size_t pos)
{
    jv v;
    if (jj_step(r->c, pos))
        return -1;
    if (EQ(f, fn, "safe") || EQ(f, fn, "string")) {
        if (EQ(f, fn, "safe")) {
            if (jv_stringify(r->c, x, out))
                return -1;
            out->flags = JV_SAFE;
            return 0;
        }
        return jv_stringify(r->c, x, out);
    }
    if (EQ(f, fn, "e") || EQ(f, fn, "escape"))
        return jj_escape(r, x, out);
    if (EQ(f, fn, "forceescape"))
        return jv_stringify(r->c, x, &v) || escape(r, v, out) ? -1 : 0;
    if (EQ(f, fn, "length") || EQ(f, fn, "count"))
        return length(r, x, out, pos);
    if (EQ(f, fn, "list"))
        return list_of(r, x, out, pos);
    if (EQ(f, fn, "items"))
        return items_of(r, x, out, pos);
    if (EQ(f, fn, "first") || EQ(f, fn, "last")) {
        jv seq;
        if (list_of(r, x, &seq, pos))
            return -1;
        size_t n = seq.u.l->n;
        *out = n ? seq.u.l->v[f[0] == 'f' ? 0 : n - 1] : jv_undef(NULL, 0);
        return 0;
    }
    /* int(), float() and .items() of an Undefined raise in jinja2. */
    if ((EQ(f, fn, "int") || EQ(f, fn, "float") || EQ(f, fn, "dictsort")) && x.kind == JV_UNDEF)
        return bad_type(r, pos, "filter", x);
    if (EQ(f, fn, "int"))
        return to_int(r, x, a, out);
    if (EQ(f, fn, "float"))
        return to_float(x, a, out);
    if (EQ(f, fn, "abs")) {
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
    if (EQ(f, fn, "upper") || EQ(f, fn, "lower") || EQ(f, fn, "capitalize") || EQ(f, fn, "title") ||
        EQ(f, fn, "trim") || EQ(f, fn, "wordcount") || EQ(f, fn, "replace")) {
        if (jv_stringify(r->c, x, &v))
            return -1;
        if (f[0] == 'u')
            return map_cp(r, v, 0, out);
        if (f[0] == 'l')
            return map_cp(r, v, 1, out);
        if (f[0] == 'c')
            return map_cp(r, v, 3, out);
        if (f[1] == 'i')
            return title_filter(r, v, out);
        if (f[0] == 't') {
            jv chars = jv_none();
            arg(a, 0, "chars", &chars);
            *out = strip(v, chars, 3);
            return 0;
        }
        if (f[0] == 'w') {
            int64_t n = 0;
            for (size_t i = 0; i < v.n; i++) {
                unsigned char ch = (unsigned char)v.u.s[i];
                int w = ch >= 0x80 || ch == '_' || (ch >= '0' && ch <= '9') || ((ch | 32) >= 'a' && (ch | 32) <= 'z');
                unsigned char pc = i ? (unsigned char)v.u.s[i - 1] : ' ';
                int pw = i && (pc >= 0x80 || pc == '_' || (pc >= '0' && pc <= '9') ||
                               ((pc | 32) >= 'a' && (pc | 32) <= 'z'));
                n += w && !pw;
            }
            *out = jv_int(n);
            return 0;
        }
        jv old, new_, cnt = jv_int(-1);
        if (!arg(a, 0, "old", &old) || !arg(a, 1, "new", &new_))
            return jj_fail(r->c, ML_E_INVAL, pos, "replace needs old and new");
        arg(a, 2, "count", &cnt);
        if (jv_stringify(r->c, old, &old) || jv_stringify(r->c, new_, &new_))
            return -1;
        return replace(r, v, old, new_, cnt.kind == JV_INT ? cnt.u.i : -1, out);
    }
    if (EQ(f, fn, "reverse")) {
        if (x.kind == JV_STR) {
            jj_buf b = {0};
            size_t i = x.n;
            while (i > 0) {
                size_t k = i - 1;
                while (k > 0 && ((unsigned char)x.u.s[k] & 0xc0) == 0x80)
                    k--;
                if (jj_buf_put(r->c, &b, x.u.s + k, i - k))
                    return -1;
                i = k;
            }
            *out = jv_str(b.p, b.n);
            return 0;
        }
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
    return filter2(r, f, fn, x, a, out, pos);
}

static const char *const filter_names[] = {
    "safe", "string", "e", "escape", "forceescape", "length", "count", "list", "items", "first",
    "last", "int", "float", "abs", "upper", "lower", "capitalize", "title", "trim", "wordcount",
    "replace", "reverse", "tojson", "default", "d", "join", "map", "select", "reject",
    "selectattr", "rejectattr", "sort", "dictsort", "unique", "indent", "round", "min", "max",
    "sum", "batch", NULL};
static const char *const test_names[] = {
    "defined", "undefined", "none", "string", "number", "integer", "float", "boolean", "true",
    "false", "mapping", "iterable", "sequence", "callable", "lower", "upper", "odd", "even",
    "divisibleby", "eq", "equalto", "==", "ne", "!=", "sameas", "lt", "le", "gt", "ge",
    "lessthan", "greaterthan", "<", "<=", ">", ">=", "in", NULL};

static int in_list(const char *const *l, const char *s, size_t n);

int jj_filter_known(const char *name, size_t n) { return in_list(filter_names, name, n); }
int jj_test_known(const char *name, size_t n) { return in_list(test_names, name, n); }

/* ---- tests ---- */
int jj_test(jj_render *r, const char *t, size_t tn, jv x, const jj_args *a, int *out, size_t pos)
{
    jv y;
    int have = arg(a, 0, NULL, &y);
    if (jj_steps(r->c, 1 + (x.kind == JV_STR ? x.n / 64 : 0) + (have && y.kind == JV_STR ? y.n / 64 : 0) +
                           (have && y.kind == JV_LIST ? y.u.l->n : 0), pos))
        return -1;
    if (EQ(t, tn, "defined")) *out = x.kind != JV_UNDEF;
    else if (EQ(t, tn, "undefined")) *out = x.kind == JV_UNDEF;
    else if (EQ(t, tn, "none")) *out = x.kind == JV_NONE;
    else if (EQ(t, tn, "string")) *out = x.kind == JV_STR;
    else if (EQ(t, tn, "number")) *out = x.kind == JV_INT || x.kind == JV_FLOAT || x.kind == JV_BOOL;
    else if (EQ(t, tn, "integer")) *out = x.kind == JV_INT;
    else if (EQ(t, tn, "float")) *out = x.kind == JV_FLOAT;
    else if (EQ(t, tn, "boolean")) *out = x.kind == JV_BOOL;
    else if (EQ(t, tn, "true")) *out = x.kind == JV_BOOL && x.u.b;
    else if (EQ(t, tn, "false")) *out = x.kind == JV_BOOL && !x.u.b;
    else if (EQ(t, tn, "mapping")) *out = x.kind == JV_DICT; /* a Namespace is no Mapping */
    else if (EQ(t, tn, "iterable")) *out = x.kind == JV_LIST || x.kind == JV_DICT || x.kind == JV_STR || x.kind == JV_NS || x.kind == JV_UNDEF;
    else if (EQ(t, tn, "sequence")) *out = x.kind == JV_LIST || x.kind == JV_DICT || x.kind == JV_STR || x.kind == JV_NS || x.kind == JV_UNDEF;
    else if (EQ(t, tn, "callable")) *out = x.kind == JV_FUNC || x.kind == JV_MACRO;
    else if (EQ(t, tn, "lower") || EQ(t, tn, "upper")) {
        /* str(x).islower(): no cased character of the other case, and one at least */
        jv s, lo, up;
        if (jv_stringify(r->c, x, &s) || map_cp(r, s, 1, &lo) || map_cp(r, s, 0, &up))
            return -1;
        int cased = !jv_equal(r->c, lo, up);
        *out = cased && jv_equal(r->c, t[0] == 'l' ? lo : up, s);
    } else if (x.kind == JV_FLOAT && (EQ(t, tn, "odd") || EQ(t, tn, "even") || EQ(t, tn, "divisibleby"))) {
        double d = 2;
        if (t[0] == 'd') {
            if (!have || (y.kind != JV_INT && y.kind != JV_FLOAT))
                return jj_fail(r->c, ML_E_INVAL, pos, "divisibleby needs a number");
            d = y.kind == JV_INT ? (double)y.u.i : y.u.f;
            if (d == 0)
                return jj_fail(r->c, ML_E_INVAL, pos, "float modulo");
        }
        double m = fmod(x.u.f, d);
        if (m != 0 && ((m < 0) != (d < 0)))
            m += d;
        *out = t[0] == 'o' ? m == 1 : m == 0;
    } else if (EQ(t, tn, "odd") || EQ(t, tn, "even") || EQ(t, tn, "divisibleby")) {
        if (x.kind != JV_INT && x.kind != JV_BOOL)
            return bad_type(r, pos, "test", x);
        int64_t v = x.kind == JV_INT ? x.u.i : x.u.b, d = 2;
        if (t[0] == 'd') {
            if (!have || y.kind != JV_INT)
                return jj_fail(r->c, ML_E_INVAL, pos, "divisibleby needs an integer");
            d = y.u.i;
            if (d == 0)
                return jj_fail(r->c, ML_E_INVAL, pos, "integer division or modulo by zero");
        }
        int64_t m = d == -1 ? 0 : v % d;
        *out = t[0] == 'o' ? m != 0 : m == 0;
    } else if (EQ(t, tn, "eq") || EQ(t, tn, "equalto") || EQ(t, tn, "==")) *out = have && jv_equal(r->c, x, y);
    else if (EQ(t, tn, "ne") || EQ(t, tn, "!=")) *out = !have || !jv_equal(r->c, x, y);
    else if (EQ(t, tn, "sameas")) *out = have && x.kind == y.kind && (x.kind == JV_NONE || x.kind == JV_UNDEF ||
                                           (x.kind == JV_BOOL && x.u.b == y.u.b) ||
                                           (x.kind == JV_INT && x.u.i == y.u.i) ||
                                           ((x.kind == JV_LIST || x.kind == JV_DICT) && x.u.l == y.u.l));
    else if (EQ(t, tn, "lt") || EQ(t, tn, "le") || EQ(t, tn, "gt") || EQ(t, tn, "ge") ||
             EQ(t, tn, "lessthan") || EQ(t, tn, "greaterthan") || EQ(t, tn, "<") || EQ(t, tn, "<=") ||
             EQ(t, tn, ">") || EQ(t, tn, ">=")) {
        int bad;
        if (!have)
            return jj_fail(r->c, ML_E_INVAL, pos, "test needs an argument");
        int c = jv_cmp(r->c, x, y, &bad);
        if (bad)
            return jj_fail(r->c, ML_E_INVAL, pos, "'<' not supported between instances of '%s' and '%s'",
                           jv_type_name(x), jv_type_name(y));
        int lt = t[0] == 'l' || t[0] == '<', eq = tn == 2 && (t[1] == 'e' || t[1] == '=');
        *out = lt ? (eq ? c <= 0 : c < 0) : (eq ? c >= 0 : c > 0);
    } else if (EQ(t, tn, "in")) {
        if (!have)
            return jj_fail(r->c, ML_E_INVAL, pos, "test needs an argument");
        if (y.kind == JV_STR && x.kind == JV_STR) {
            *out = x.n == 0 || memmem(y.u.s, y.n, x.u.s, x.n) != NULL;
        } else if (y.kind == JV_LIST) {
            *out = 0;
            for (size_t i = 0; !*out && i < y.u.l->n; i++)
                *out = jv_equal(r->c, y.u.l->v[i], x);
        } else if (y.kind == JV_DICT || y.kind == JV_NS) {
            *out = jv_dict_get(y.u.d, x) != NULL;
        } else {
            return bad_type(r, pos, "in", y);
        }
    } else
        return jj_fail(r->c, ML_E_INVAL, pos, "no test named '%.*s'", (int)(tn > 40 ? 40 : tn), t);
    return 0;
}

/* ---- methods ---- */
static const char *const str_methods[] = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "upper", "lower",
    "title", "capitalize", "replace", "find", "rfind", "count", "join", "splitlines", "isdigit",
    "isalpha", "isspace", "isalnum", "islower", "isupper", "index", "rindex", "format", NULL};
static const char *const dict_methods[] = {"get", "items", "keys", "values", "copy", NULL};
static const char *const dict_unsafe[] = {"clear", "pop", "popitem", "setdefault", "update", NULL};
static const char *const list_methods[] = {"index", "count", "copy", NULL};
static const char *const list_unsafe[] = {"append", "clear", "pop", "reverse", "insert", "sort",
                                          "extend", "remove", NULL};

static int in_list(const char *const *l, const char *s, size_t n)
{
    for (; *l; l++)
        if (strlen(*l) == n && memcmp(*l, s, n) == 0)
            return 1;
    return 0;
}

int jj_has_method(jv v, const char *name, size_t n, int *unsafe)
{
    *unsafe = 0;
    if (n && name[0] == '_') {
        *unsafe = v.kind != JV_UNDEF;
        return *unsafe;
    }
    if (v.kind == JV_STR)
        return in_list(str_methods, name, n);
    if (v.kind == JV_DICT) {
        if (in_list(dict_unsafe, name, n))
            return *unsafe = 1;
        return in_list(dict_methods, name, n);
    }
    if (v.kind == JV_LIST && (v.flags & (JV_GEN | JV_VIEW)))
        return 0; /* generators and dict views have no list methods */
    if (v.kind == JV_LIST) {
        if (!(v.flags & JV_TUPLE) && in_list(list_unsafe, name, n))
            return *unsafe = 1;
        return in_list(list_methods, name, n);
    }
    return 0;
}

static int str_class(jv s, int kind)
{
    if (s.n == 0)
        return 0;
    int has_cased = 0;
    for (size_t i = 0; i < s.n; i++) {
        unsigned char ch = (unsigned char)s.u.s[i];
        int d = ch >= '0' && ch <= '9', al = (ch | 32) >= 'a' && (ch | 32) <= 'z';
        switch (kind) {
        case 0: if (!d) return 0; break;
        case 1: if (!al) return 0; break;
        case 2: if (!is_space(ch)) return 0; break;
        case 3: if (!d && !al) return 0; break;
        case 4: if (ch >= 'A' && ch <= 'Z') return 0; has_cased |= al; break;
        case 5: if (ch >= 'a' && ch <= 'z') return 0; has_cased |= al; break;
        }
    }
    return kind >= 4 ? has_cased : 1;
}

/* str.format with {} {0} {name} and {{ }}; format specs are refused. */
static int format(jj_render *r, jv s, const jj_args *a, jv *out, size_t pos)
{
    jj_buf b = {0};
    size_t auto_i = 0;
    for (size_t i = 0; i < s.n; i++) {
        char ch = s.u.s[i];
        if ((ch == '{' || ch == '}') && i + 1 < s.n && s.u.s[i + 1] == ch) {
            if (jj_buf_putc(r->c, &b, ch))
                return -1;
            i++;
            continue;
        }
        if (ch == '}')
            return jj_fail(r->c, ML_E_INVAL, pos, "Single '}' encountered in format string");
        if (ch != '{') {
            if (jj_buf_putc(r->c, &b, ch))
                return -1;
            continue;
        }
        size_t j = i + 1;
        while (j < s.n && s.u.s[j] != '}')
            j++;
        if (j == s.n)
            return jj_fail(r->c, ML_E_INVAL, pos, "Single '{' encountered in format string");
        const char *f = s.u.s + i + 1;
        size_t fn = j - i - 1;
        jv v;
        if (memchr(f, ':', fn) || memchr(f, '!', fn) || memchr(f, '.', fn) || memchr(f, '[', fn))
            return jj_fail(r->c, ML_E_INVAL, pos, "str.format: only {} {N} {name} are supported");
        if (fn == 0 || (f[0] >= '0' && f[0] <= '9')) {
            size_t k = auto_i++;
            if (fn) {
                k = 0;
                for (size_t q = 0; q < fn; q++) {
                    if (f[q] < '0' || f[q] > '9' || k > 1000)
                        return jj_fail(r->c, ML_E_INVAL, pos, "bad format field");
                    k = k * 10 + (size_t)(f[q] - '0');
                }
            }
            if (k >= a->n)
                return jj_fail(r->c, ML_E_INVAL, pos, "Replacement index %zu out of range", k);
            v = a->v[k];
        } else {
            size_t k = 0;
            while (k < a->nk && !(a->kn[k]->nlen == fn && memcmp(a->kn[k]->name, f, fn) == 0))
                k++;
            if (k == a->nk)
                return jj_fail(r->c, ML_E_INVAL, pos, "KeyError: '%.*s'", (int)(fn > 40 ? 40 : fn), f);
            v = a->kv[k];
        }
        if (jv_to_str(r->c, v, &b))
            return -1;
        i = j;
    }
    *out = jv_str(b.p, b.n);
    return 0;
}

static int str_method(jj_render *r, jv s, const char *m, size_t mn, const jj_args *a, jv *out, size_t pos)
{
    jv x = jv_none(), y = jv_none();
    int hx = arg(a, 0, NULL, &x);
    arg(a, 1, NULL, &y);
    if (jj_steps(r->c, s.n / 64 + (x.kind == JV_STR ? x.n / 64 : 0), pos))
        return -1;
    if (EQ(m, mn, "strip") || EQ(m, mn, "lstrip") || EQ(m, mn, "rstrip")) {
        if (hx && x.kind != JV_STR && x.kind != JV_NONE)
            return bad_type(r, pos, "strip", x);
        *out = strip(s, x, m[0] == 'l' ? 1 : m[0] == 'r' ? 2 : 3);
        return 0;
    }
    if (EQ(m, mn, "split") || EQ(m, mn, "rsplit")) {
        jv maxs = jv_int(-1);
        arg(a, 0, "sep", &x);
        arg(a, 1, "maxsplit", &maxs);
        return split(r, s, x, maxs.kind == JV_INT ? maxs.u.i : -1, m[0] == 'r', out, pos);
    }
    if (EQ(m, mn, "startswith") || EQ(m, mn, "endswith")) {
        if (!hx || (x.kind != JV_STR && x.kind != JV_LIST))
            return bad_type(r, pos, "startswith", x);
        *out = jv_bool(affix(s, x, m[0] == 'e'));
        return 0;
    }
    if (EQ(m, mn, "upper")) return map_cp(r, s, 0, out);
    if (EQ(m, mn, "lower")) return map_cp(r, s, 1, out);
    if (EQ(m, mn, "title")) return map_cp(r, s, 2, out);
    if (EQ(m, mn, "capitalize")) return map_cp(r, s, 3, out);
    if (EQ(m, mn, "replace")) {
        jv cnt = jv_int(-1);
        arg(a, 2, NULL, &cnt);
        if (x.kind != JV_STR || y.kind != JV_STR)
            return bad_type(r, pos, "replace", x);
        return replace(r, s, x, y, cnt.kind == JV_INT ? cnt.u.i : -1, out);
    }
    if (EQ(m, mn, "find") || EQ(m, mn, "rfind") || EQ(m, mn, "index") || EQ(m, mn, "rindex")) {
        int64_t i;
        if (x.kind != JV_STR)
            return bad_type(r, pos, "find", x);
        find(s, x, m[0] == 'r', &i);
        if (i < 0 && m[m[0] == 'r'] == 'i')
            return jj_fail(r->c, ML_E_INVAL, pos, "substring not found");
        *out = jv_int(i);
        return 0;
    }
    if (EQ(m, mn, "count")) {
        if (x.kind != JV_STR)
            return bad_type(r, pos, "count", x);
        int64_t n = 0;
        if (x.n == 0)
            n = (int64_t)jj_u8_len(s.u.s, s.n) + 1;
        else
            for (const char *p = s.u.s, *q; (q = memmem(p, s.n - (size_t)(p - s.u.s), x.u.s, x.n)) != NULL;
                 p = q + x.n)
                n++;
        *out = jv_int(n);
        return 0;
    }
    if (EQ(m, mn, "join")) {
        if (x.kind == JV_LIST)
            for (size_t i = 0; i < x.u.l->n; i++)
                if (x.u.l->v[i].kind != JV_STR)
                    return jj_fail(r->c, ML_E_INVAL, pos, "sequence item %zu: expected str instance, %s found",
                                   i, jv_type_name(x.u.l->v[i]));
        return join(r, x, s, jv_none(), out, pos);
    }
    if (EQ(m, mn, "splitlines")) {
        jv_list *l = jv_list_new(r->c, 0);
        if (!l)
            return -1;
        size_t b = 0;
        for (size_t i = 0; i < s.n; i++) {
            if (s.u.s[i] == '\n' || s.u.s[i] == '\r') {
                if (jv_list_push(r->c, l, jv_str(s.u.s + b, i - b)))
                    return -1;
                if (s.u.s[i] == '\r' && i + 1 < s.n && s.u.s[i + 1] == '\n')
                    i++;
                b = i + 1;
            }
        }
        if (b < s.n && jv_list_push(r->c, l, jv_str(s.u.s + b, s.n - b)))
            return -1;
        *out = jv_of_list(l, 0);
        return 0;
    }
    if (EQ(m, mn, "format"))
        return format(r, s, a, out, pos);
    static const char *const cls[] = {"isdigit", "isalpha", "isspace", "isalnum", "islower", "isupper"};
    for (int k = 0; k < 6; k++)
        if (strlen(cls[k]) == mn && memcmp(cls[k], m, mn) == 0) {
            *out = jv_bool(str_class(s, k));
            return 0;
        }
    return jj_fail(r->c, ML_E_INVAL, pos, "str.%.*s is not supported", (int)(mn > 40 ? 40 : mn), m);
}

int jj_method(jj_render *r, jv self, const char *m, const jj_args *a, jv *out, size_t pos)
{
    size_t mn = strlen(m);
    jv x = jv_none(), y = jv_none();
    arg(a, 0, NULL, &x);
    int hy = arg(a, 1, NULL, &y);
    if (self.kind == JV_STR)
        return str_method(r, self, m, mn, a, out, pos);
    if (self.kind == JV_DICT) {
        if (EQ(m, mn, "get")) {
            jv *v = jv_dict_get(self.u.d, x);
            *out = v ? *v : hy ? y : jv_none();
            return 0;
        }
        if (EQ(m, mn, "items")) {
            if (items_of(r, self, out, pos))
                return -1;
            out->flags |= JV_ITEMS;
            return 0;
        }
        if (EQ(m, mn, "keys") || EQ(m, mn, "values")) {
            jv_list *l = jv_list_new(r->c, self.u.d->n);
            if (!l)
                return -1;
            for (size_t i = 0; i < self.u.d->n; i++)
                l->v[l->n++] = m[0] == 'k' ? self.u.d->k[i] : self.u.d->v[i];
            *out = jv_of_list(l, 0);
            out->flags |= m[0] == 'k' ? JV_KEYS : JV_VALUES;
            return 0;
        }
        if (EQ(m, mn, "copy")) {
            jv_dict *d = jv_dict_new(r->c, 0);
            if (!d)
                return -1;
            for (size_t i = 0; i < self.u.d->n; i++)
                if (jv_dict_set(r->c, d, self.u.d->k[i], self.u.d->v[i]))
                    return -1;
            *out = (jv){.kind = JV_DICT};
            out->u.d = d;
            return 0;
        }
    }
    if (self.kind == JV_LIST) {
        if (EQ(m, mn, "index") || EQ(m, mn, "count")) {
            int64_t n = 0;
            if (jj_steps(r->c, self.u.l->n, pos))
                return -1;
            for (size_t i = 0; i < self.u.l->n; i++)
                if (jv_equal(r->c, self.u.l->v[i], x)) {
                    if (m[0] == 'i') {
                        *out = jv_int((int64_t)i);
                        return 0;
                    }
                    n++;
                }
            if (m[0] == 'i')
                return jj_fail(r->c, ML_E_INVAL, pos, "value is not in list");
            *out = jv_int(n);
            return 0;
        }
        if (EQ(m, mn, "copy"))
            return list_of(r, self, out, pos);
    }
    return jj_fail(r->c, ML_E_INVAL, pos, "'%s' object has no method '%.*s'", jv_type_name(self),
                   (int)(mn > 40 ? 40 : mn), m);
}
