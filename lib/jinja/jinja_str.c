/* jinja_str.c - the string work of the builtins (jinja_builtins.c): Python's
 * str methods (strip, split, replace, find, format, ...), case changes
 * over Unicode, and jinja2's string filters (title, indent, wordcount,
 * escape).  Strings are UTF-8 bytes; lengths and offsets that Python
 * counts in code points are converted where they are returned. */
/* memmem: substring search in linear time (two-way in glibc), so a
 * hostile template cannot make a search quadratic. */
#define _GNU_SOURCE
#include "jinja/jinja_str.h"

#include <utf8proc.h>

static int is_space(unsigned char ch)
{
    return ch == ' ' || (ch >= '\t' && ch <= '\r') || (ch >= 0x1c && ch <= 0x1f);
}

/* Multi-byte chars in `chars` strip byte-wise, which is exact for ASCII.
 * A byte table keeps it linear whatever the length of chars. */
jv jj_strip(jv s, jv chars, int which)
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

int jj_case(jj_render *r, jv s, int mode, jv *out)
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

int jj_title(jj_render *r, jv s, jv *out)
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
        if (k > j && (jj_case(r, jv_str(s.u.s + j, k - j), 3, &w) || jj_buf_put(r->c, &b, w.u.s, w.n)))
            return -1;
        i = k;
    }
    *out = jv_str(b.p, b.n);
    return 0;
}

int jj_replace(jj_render *r, jv s, jv old, jv new_, int64_t count, jv *out)
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

int jj_find(jv s, jv sub, int from_right, int64_t *out)
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

int jj_split(jj_render *r, jv s, jv sep, int64_t maxsplit, int right, jv *out, size_t pos)
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

int jj_affix(jv s, jv p, int end)
{
    if (p.kind == JV_LIST) {
        for (size_t i = 0; i < p.u.l->n; i++)
            if (jj_affix(s, p.u.l->v[i], end))
                return 1;
        return 0;
    }
    if (p.kind != JV_STR || p.n > s.n)
        return 0;
    return memcmp(s.u.s + (end ? s.n - p.n : 0), p.u.s, p.n) == 0;
}

int jj_html_escape(jj_render *r, jv s, jv *out)
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
    return jv_stringify(r->c, v, &v) || jj_html_escape(r, v, out) ? -1 : 0;
}

int jj_indent(jj_render *r, jv s, jv w, jv first, jv blank, jv *out)
{
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

int jj_str_class(jv s, int kind)
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

int jj_format(jj_render *r, jv s, const jj_args *a, jv *out, size_t pos)
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

int64_t jj_count(jv s, jv sub)
{
    int64_t n = 0;
    if (sub.n == 0)
        return (int64_t)jj_u8_len(s.u.s, s.n) + 1;
    for (const char *p = s.u.s, *q; (q = memmem(p, s.n - (size_t)(p - s.u.s), sub.u.s, sub.n)) != NULL;
         p = q + sub.n)
        n++;
    return n;
}

int jj_splitlines(jj_render *r, jv s, jv *out)
{
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

int64_t jj_wordcount(jv v)
{
    int64_t n = 0;
    for (size_t i = 0; i < v.n; i++) {
        unsigned char ch = (unsigned char)v.u.s[i];
        int w = ch >= 0x80 || ch == '_' || (ch >= '0' && ch <= '9') || ((ch | 32) >= 'a' && (ch | 32) <= 'z');
        unsigned char pc = i ? (unsigned char)v.u.s[i - 1] : ' ';
        int pw = i && (pc >= 0x80 || pc == '_' || (pc >= '0' && pc <= '9') ||
                       ((pc | 32) >= 'a' && (pc | 32) <= 'z'));
        n += w && !pw;
    }
    return n;
}

int jj_reverse_str(jj_render *r, jv x, jv *out)
{
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
