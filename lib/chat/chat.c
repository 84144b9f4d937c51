/* chat.c - a conversation rendered through its chat template, and encoded
 * so that what its authors wrote stays text (mlcore/chat.h).
 *
 * The template is rendered twice: once with the messages as they are (the
 * text the model sees) and once with every content replaced by a
 * placeholder.  The second render shows where the template put each
 * content, whatever it wrote around it; walking the two side by side gives
 * the byte spans of the contents in the first.  A template may trim a
 * content, so its stripped form is tried too.  A template that changes
 * contents in other ways (or a conversation that holds the placeholder
 * characters) leaves them unplaced: ml_chat_encode then refuses any of
 * them that holds a control token's text, rather than let it become one. */
#include "jinja/jinja.h"
#include "tokenizer/tok.h"

#include <mlcore/chat.h>
#include <mlcore/buf.h>
#include <mlcore/mlt.h>

#include <stdio.h>
#include <stdlib.h>

/* A placeholder is U+FDD0, the content's index, U+FDD1: noncharacters,
 * which no real text holds (a conversation that does is left unplaced). */
#define MARK_OPEN "\xef\xb7\x90"
#define MARK_CLOSE "\xef\xb7\x91"
#define MARK_LEN 3

typedef struct contents {
    jv *v; /* the strings, in placeholder order */
    size_t *msg; /* the message each came from */
    size_t n, cap;
} contents;

static int contents_push(jj_ctx *c, contents *cs, jv s, size_t msg)
{
    if (cs->n == cs->cap) {
        size_t nc = cs->cap ? 2 * cs->cap : 16;
        jv *v = jj_grow(c, cs->v, cs->n * sizeof *v, nc * sizeof *v);
        size_t *m = v ? jj_grow(c, cs->msg, cs->n * sizeof *m, nc * sizeof *m) : NULL;
        if (!m)
            return -1;
        cs->v = v, cs->msg = m, cs->cap = nc;
    }
    cs->v[cs->n] = s;
    cs->msg[cs->n++] = msg;
    return 0;
}

/* ---- the marked copy of the variables ---- */

static jv_dict *dict_copy(jj_ctx *c, const jv_dict *d)
{
    jv_dict *n = jv_dict_new(c, 0);
    if (!n || !d->n)
        return n;
    n->k = jj_alloc(c, d->n * sizeof *n->k);
    n->v = jj_alloc(c, d->n * sizeof *n->v);
    if (!n->k || !n->v)
        return NULL;
    memcpy(n->k, d->k, d->n * sizeof *n->k);
    memcpy(n->v, d->v, d->n * sizeof *n->v);
    n->n = n->cap = d->n;
    return n;
}

static jv_list *list_copy(jj_ctx *c, const jv_list *l)
{
    jv_list *n = jv_list_new(c, l->n);
    if (n && l->n) {
        memcpy(n->v, l->v, l->n * sizeof *n->v);
        n->n = l->n;
    }
    return n;
}

/* Records the string in *slot and puts its placeholder there. */
static int mark(jj_ctx *c, contents *cs, jv *slot, size_t msg)
{
    char buf[32];
    int k = snprintf(buf, sizeof buf, MARK_OPEN "%zu" MARK_CLOSE, cs->n);
    char *s = jj_strdup(c, buf, (size_t)k);
    if (!s || contents_push(c, cs, *slot, msg))
        return -1;
    *slot = jv_str(s, (size_t)k);
    return 0;
}

/* A dict *slot whose string under key is marked, copied so that the
 * caller's variables stay as they are. */
static int mark_key(jj_ctx *c, contents *cs, jv *slot, const char *key, size_t msg)
{
    if (slot->kind != JV_DICT)
        return 0;
    jv *v = jv_dict_gets(slot->u.d, key, strlen(key));
    if (!v || (v->kind != JV_STR && !jv_is_seq(*v)))
        return 0;
    jv_dict *d = dict_copy(c, slot->u.d);
    if (!d)
        return -1;
    slot->u.d = d;
    v = jv_dict_gets(d, key, strlen(key));
    if (v->kind == JV_STR)
        return mark(c, cs, v, msg);
    /* content as a list of parts: {"type": "text", "text": "..."} */
    jv_list *l = list_copy(c, v->u.l);
    if (!l)
        return -1;
    v->u.l = l;
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].kind == JV_DICT && mark_key(c, cs, &l->v[i], "text", msg))
            return -1;
    return 0;
}

/* vars with every message's content marked (*out shares the rest). */
static int marked_vars(jj_ctx *c, jv_dict *vars, contents *cs, jv_dict **out)
{
    if (!(*out = dict_copy(c, vars)))
        return -1;
    jv *msgs = jv_dict_gets(*out, "messages", 8);
    if (!msgs || !jv_is_seq(*msgs))
        return 0;
    jv_list *l = list_copy(c, msgs->u.l);
    if (!l)
        return -1;
    msgs->u.l = l;
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].kind == JV_DICT && mark_key(c, cs, &l->v[i], "content", i))
            return -1;
    return 0;
}

/* ---- alignment of the two renders ---- */

typedef struct spans {
    ml_span *v;
    size_t n, cap;
} spans;

static int spans_push(spans *s, size_t start, size_t len)
{
    ml_span *v = ml_array_reserve(s->v, &s->cap, s->n + 1, sizeof *v);
    if (!v)
        return -1;
    s->v = v;
    s->v[s->n++] = (ml_span){start, len};
    return 0;
}

/* The next placeholder in b from pos: its offset (n when none), its
 * content index and its length. */
static size_t next_mark(const char *b, size_t n, size_t pos, size_t n_contents, size_t *idx,
                        size_t *len)
{
    for (size_t i = pos; i + 2 * MARK_LEN < n; i++) {
        if (memcmp(b + i, MARK_OPEN, MARK_LEN) != 0)
            continue;
        size_t j = i + MARK_LEN, k = 0;
        while (j < n && b[j] >= '0' && b[j] <= '9' && k < n_contents)
            k = 10 * k + (size_t)(b[j++] - '0');
        if (j > i + MARK_LEN && k < n_contents && j + MARK_LEN <= n &&
            memcmp(b + j, MARK_CLOSE, MARK_LEN) == 0) {
            *idx = k;
            *len = j + MARK_LEN - i;
            return i;
        }
    }
    return n;
}

/* Python's str.strip() for the whitespace templates meet (ASCII). */
static jv strip(jv s)
{
    static const char ws[] = " \t\n\r\v\f";
    while (s.n && strchr(ws, s.u.s[0]))
        s.u.s++, s.n--;
    while (s.n && strchr(ws, s.u.s[s.n - 1]))
        s.n--;
    return s;
}

static int starts(const char *a, size_t na, size_t pos, const char *s, size_t n)
{
    return n <= na - pos && memcmp(a + pos, s, n) == 0;
}

/* Walks the real render a and the marked one b: each stretch of b between
 * placeholders must be in a as it is, and each placeholder stands for its
 * content (or the content stripped) followed by the next stretch.  0 and
 * the spans when the two agree to the end. */
static int align(const char *a, size_t na, const char *b, size_t nb, const contents *cs,
                 spans *out)
{
    size_t pa = 0, pb = 0, idx = 0, mlen = 0;
    if (!na || !nb) /* an empty render may have no buffer */
        return na == nb ? 0 : 1;
    for (;;) {
        size_t q = next_mark(b, nb, pb, cs->n, &idx, &mlen);
        if (!starts(a, na, pa, b + pb, q - pb))
            return 1;
        pa += q - pb;
        if (q == nb)
            return pa == na ? 0 : 1;
        pb = q + mlen;
        size_t unused, next = next_mark(b, nb, pb, cs->n, &unused, &unused);
        jv forms[2] = {cs->v[idx], strip(cs->v[idx])};
        int placed = 0;
        for (int f = 0; f < 2 && !placed; f++) {
            if (!starts(a, na, pa, forms[f].u.s, forms[f].n) ||
                !starts(a, na, pa + forms[f].n, b + pb, next - pb))
                continue;
            if (forms[f].n && spans_push(out, pa, forms[f].n))
                return -1;
            pa += forms[f].n;
            placed = 1;
        }
        if (!placed)
            return 1;
    }
}

/* ---- the prompt ---- */

/* Contents that could not be placed, kept for ml_chat_encode's check. */
static int keep_loose(ml_chat_prompt *p, const contents *cs)
{
    if (!cs->n)
        return 0;
    p->loose = calloc(cs->n, sizeof *p->loose);
    p->loose_len = calloc(cs->n, sizeof *p->loose_len);
    p->loose_msg = calloc(cs->n, sizeof *p->loose_msg);
    if (!p->loose || !p->loose_len || !p->loose_msg)
        return -1;
    for (size_t i = 0; i < cs->n; i++, p->n_loose++) {
        if (!(p->loose[i] = malloc(cs->v[i].n + 1)))
            return -1;
        memcpy(p->loose[i], cs->v[i].u.s, cs->v[i].n);
        p->loose_len[i] = cs->v[i].n;
        p->loose_msg[i] = cs->msg[i];
    }
    return 0;
}

/* Whether s holds a placeholder character (memmem is not ISO C). */
static int has_mark(const char *s, size_t n)
{
    for (size_t i = 0; i + MARK_LEN <= n; i++)
        if (memcmp(s + i, MARK_OPEN, MARK_LEN) == 0 || memcmp(s + i, MARK_CLOSE, MARK_LEN) == 0)
            return 1;
    return 0;
}

/* Renders vars twice and fills *p. */
static void render_prompt(jj_ctx *c, const ml_jinja *t, jv_dict *vars, ml_chat_prompt *p)
{
    contents cs = {0};
    jv_dict *marked;
    jj_buf a, b;
    if (jj_render_vars(c, t, vars, &a) || marked_vars(c, vars, &cs, &marked))
        return;
    if (!(p->text = malloc(a.n + 1))) {
        jj_fail(c, ML_E_NOMEM, SIZE_MAX, "out of memory");
        return;
    }
    if (a.n) /* an empty render may have no buffer */
        memcpy(p->text, a.p, a.n);
    p->text[a.n] = 0;
    p->len = a.n;
    spans sp = {0};
    /* Real text with the placeholder characters cannot be aligned. */
    int r = 1;
    if (!has_mark(a.p, a.n)) {
        /* A template may refuse the placeholders (it looks into the
         * contents): that only leaves them unplaced. */
        ml_error *err = c->err;
        c->err = NULL;
        if (jj_render_vars(c, t, marked, &b) == 0)
            r = align(a.p, a.n, b.p, b.n, &cs, &sp);
        c->status = ML_OK;
        c->err = err;
    }
    if (r == 0) {
        p->user = sp.v, p->n_user = sp.n;
        return;
    }
    free(sp.v);
    if (r < 0 || keep_loose(p, &cs))
        jj_fail(c, ML_E_NOMEM, SIZE_MAX, "out of memory");
}

/* Runs render_prompt and turns its context's status into the result. */
static ml_status finish(jj_ctx *c, ml_chat_prompt *p)
{
    ml_status st = c->status;
    jj_arena_free(&c->arena);
    if (st)
        ml_chat_prompt_free(p);
    return st;
}

ml_status ml_chat_render_json(const ml_jinja *t, const char *vars, size_t len,
                              ml_chat_prompt *out, ml_error *err)
{
    if (!out)
        return ml__err(err, ML_E_INVAL, "template", -1, "no output");
    memset(out, 0, sizeof *out);
    if (!t || (!vars && len))
        return ml__err(err, ML_E_INVAL, "template", -1, "no template or variables");
    jj_ctx c;
    jj_render_ctx(t, &c, err);
    jv_dict *d;
    if (jj_vars_parse(&c, vars, len, &d) == 0)
        render_prompt(&c, t, d, out);
    return finish(&c, out);
}

/* A string value of len bytes, its bad UTF-8 replaced as the encoder would. */
static int text_value(jj_ctx *c, const char *s, size_t len, jv *out)
{
    uint8_t *fixed = NULL;
    size_t n = len;
    ml_error e;
    if (ml__utf8_lossy((const uint8_t *)s, len, &fixed, &n, &e))
        return jj_fail(c, ML_E_NOMEM, SIZE_MAX, "out of memory");
    char *v = jj_strdup(c, fixed ? (const char *)fixed : s, n);
    free(fixed);
    if (!v)
        return -1;
    *out = jv_str(v, n);
    return 0;
}

static int set_text(jj_ctx *c, jv_dict *d, const char *key, const char *s, size_t len)
{
    jv v;
    return text_value(c, s, len, &v) ? -1 : jv_dict_set(c, d, jv_cstr(key), v);
}

/* The piece of a special token as a variable (bos_token, eos_token). */
static int set_token(jj_ctx *c, jv_dict *d, const char *key, const ml_mlt *tok, ml_token id)
{
    if (!tok || id == ML_TOKEN_NONE)
        return 0;
    ml_mlt_token k = ml_mlt_get_token(tok, id);
    return set_text(c, d, key, (const char *)k.bytes, k.len);
}

static int build_vars(jj_ctx *c, const ml_chat_message *m, size_t n, int add_generation_prompt,
                      const ml_mlt *tok, jv_dict **out)
{
    jv_dict *d = jv_dict_new(c, 0);
    jv_list *l = jv_list_new(c, n);
    if (!d || !l)
        return -1;
    for (size_t i = 0; i < n; i++) {
        jv_dict *msg = jv_dict_new(c, 0);
        if (!msg || set_text(c, msg, "role", m[i].role, strlen(m[i].role)) ||
            set_text(c, msg, "content", m[i].content, m[i].content_len) ||
            jv_list_push(c, l, (jv){.kind = JV_DICT, .u.d = msg}))
            return -1;
    }
    const ml_mlt_header *h = tok ? ml_mlt_get_header(tok) : NULL;
    if (jv_dict_set(c, d, jv_cstr("messages"), jv_of_list(l, 0)) ||
        jv_dict_set(c, d, jv_cstr("add_generation_prompt"), jv_bool(add_generation_prompt)) ||
        set_token(c, d, "bos_token", tok, h ? h->bos : ML_TOKEN_NONE) ||
        set_token(c, d, "eos_token", tok, h ? h->eos : ML_TOKEN_NONE))
        return -1;
    *out = d;
    return 0;
}

ml_status ml_chat_render(const ml_jinja *t, const ml_chat_message *m, size_t n,
                         int add_generation_prompt, const ml_mlt *tok, ml_chat_prompt *out,
                         ml_error *err)
{
    if (!out)
        return ml__err(err, ML_E_INVAL, "template", -1, "no output");
    memset(out, 0, sizeof *out);
    if (!t || (!m && n))
        return ml__err(err, ML_E_INVAL, "template", -1, "no template or messages");
    for (size_t i = 0; i < n; i++)
        if (!m[i].role || (!m[i].content && m[i].content_len))
            return ml__err(err, ML_E_INVAL, "messages", (int64_t)i, "message %zu: no role or content", i);
    jj_ctx c;
    jj_render_ctx(t, &c, err);
    jv_dict *d;
    if (build_vars(&c, m, n, add_generation_prompt, tok, &d) == 0)
        render_prompt(&c, t, d, out);
    return finish(&c, out);
}

void ml_chat_prompt_free(ml_chat_prompt *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_loose; i++)
        free(p->loose[i]);
    free(p->loose);
    free(p->loose_len);
    free(p->loose_msg);
    free(p->text);
    free(p->user);
    memset(p, 0, sizeof *p);
}

/* A content the template changed may not hold a control token's text. */
static ml_status check_loose(ml_tok *k, const ml_chat_prompt *p, ml_error *err)
{
    const ml_mlt *t = ml_tok_mlt(k);
    ml_status st = ML_OK;
    for (size_t i = 0; i < p->n_loose && !st; i++) {
        ml_ids ids = {0};
        st = ml_tok_encode(k, p->loose[i], p->loose_len[i], ML_TOK_BOS_NO, &ids, err);
        for (size_t j = 0; !st && j < ids.n; j++) {
            ml_mlt_token tk = ml_mlt_get_token(t, ids.v[j]);
            if (tk.attr == ML_MLT_ADDED)
                st = ml__err(err, ML_E_INVAL, "messages", (int64_t)p->loose_msg[i],
                             "message %zu holds the control token \"%.*s\", and the template "
                             "changes the messages' text, so it cannot be kept as text",
                             p->loose_msg[i], (int)(tk.len < 64 ? tk.len : 64), tk.bytes);
        }
        ml_ids_free(&ids);
    }
    return st;
}

ml_status ml_chat_encode(ml_tok *k, const ml_chat_prompt *p, ml_ids *out, ml_error *err)
{
    if (!k || !p || !out)
        return ml__err(err, ML_E_INVAL, "", -1, "NULL argument");
    ml_status st = check_loose(k, p, err);
    return st ? st : ml_tok_encode_chat(k, p->text, p->len, p->user, p->n_user, out, err);
}
