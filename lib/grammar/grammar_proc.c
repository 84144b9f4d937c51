/* grammar_proc.c - the grammar as a logit processor (ml_grammar_proc_*).
 * At creation every token's text is decoded as the generator prints it
 * and the tokens sorted by text, with the common prefix of each with the
 * one before.  apply walks that order keeping one state per byte of the
 * current token: a token resumes from the state of the prefix it shares
 * with the one before, so shared prefixes are stepped once, and once a
 * prefix is dead every token under it is refused by one comparison.
 * accept steps the kept state by the token's bytes. */
#include "grammar/grammar.h"

#include <math.h>
#include <stdlib.h>

enum { TOK_NONE, TOK_TEXT, TOK_EOG };
enum { CP_NONE, CP_SELF, CP_DEAD, CP_OTHER };
#define CP_CACHE 65536 /* a power of two; filled to 3/4 at most */

/* The state after the first d bytes of the token being walked. */
typedef struct level {
    gset set;
    size_t pool_end;   /* the pool's end once it was made */
    gutf8 u;
    uint8_t started;   /* the start space is already behind */
    uint8_t dead;
} level;

struct ml_grammar_proc {
    const ml_grammar *g;
    const ml_mlt *t;
    uint32_t n_vocab;
    uint8_t *text;       /* every token's text */
    size_t *off;         /* n_vocab + 1: token id's text is text[off[id], off[id + 1]) */
    uint8_t *cls;        /* TOK_* per token */
    uint32_t *order;     /* the TOK_TEXT tokens by text */
    uint32_t *lcp;       /* bytes each shares with the one before in order */
    uint32_t n_order, max_len;
    int drop_space;      /* SentencePiece's prefix: the first space is not printed */
    gengine e;
    gset start, cur;     /* at the pool's front: the start set, the kept one */
    gutf8 u;
    int started;
    level *lv;           /* max_len + 1 */
    /* During apply, what a code point does to the kept set (by far the
     * most stepped one: inside a JSON string most characters lead back
     * to it): CP_SELF, CP_DEAD or CP_OTHER, valid where stamp is now. */
    uint32_t *cp_key, *cp_stamp;  /* CP_CACHE each */
    uint8_t *cp_val;
    uint32_t now, cp_used;
    int caching;
    ml_status failed;    /* accept's failure, reported by the next apply */
    ml_error why;
};

/* ------------------------------------------------------------------------
 * The vocabulary's texts
 * ------------------------------------------------------------------------ */
static const uint8_t SPM_SPACE[3] = {0xe2, 0x96, 0x81}; /* U+2581 */

/* Token id's text as ml_tok_stream_put prints it, into dst (NULL: only
 * its length). */
static size_t token_text(const ml_mlt *t, ml_token id, uint8_t *dst)
{
    ml_mlt_token k = ml_mlt_get_token(t, id);
    int spm = ml_mlt_get_header(t)->kind == ML_MLT_KIND_SPM && k.attr != ML_MLT_BYTE;
    size_t n = 0;
    for (uint32_t i = 0; i < k.len; i++) {
        if (spm && i + 3 <= k.len && !memcmp(k.bytes + i, SPM_SPACE, 3)) {
            if (dst)
                dst[n] = ' ';
            n++, i += 2;
            continue;
        }
        if (dst)
            dst[n] = k.bytes[i];
        n++;
    }
    return n;
}

static int token_class(const ml_mlt *t, ml_token id)
{
    const ml_mlt_header *h = ml_mlt_get_header(t);
    if (ml_mlt_is_eog(t, id))
        return TOK_EOG;
    if (id == h->bos || id == h->eos || token_text(t, id, NULL) == 0)
        return TOK_NONE; /* printed as nothing: it cannot advance the text */
    return TOK_TEXT;
}

static ml_status load_texts(ml_grammar_proc *p, ml_error *err)
{
    uint32_t n = p->n_vocab;
    uint64_t total = 0;
    p->off = malloc(((size_t)n + 1) * sizeof *p->off);
    p->cls = malloc(n ? n : 1);
    p->order = malloc((n ? n : 1) * sizeof *p->order);
    p->lcp = malloc((n ? n : 1) * sizeof *p->lcp);
    if (!p->off || !p->cls || !p->order || !p->lcp)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    for (uint32_t id = 0; id < n; id++) {
        p->cls[id] = (uint8_t)token_class(p->t, id);
        size_t len = p->cls[id] == TOK_TEXT ? token_text(p->t, id, NULL) : 0;
        if (len > UINT32_MAX - 1 || ml__add64(total, len, &total))
            return ml__err(err, ML_E_NOMEM, "", -1, "token %u's text is too long", id);
        p->max_len = len > p->max_len ? (uint32_t)len : p->max_len;
    }
    size_t bytes;
    if (ml__to_size(total, &bytes) || !(p->text = malloc(bytes ? bytes : 1)))
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    size_t at = 0;
    for (uint32_t id = 0; id < n; id++) {
        p->off[id] = at;
        if (p->cls[id] == TOK_TEXT)
            at += token_text(p->t, id, p->text + at), p->order[p->n_order++] = id;
    }
    p->off[n] = at;
    return ML_OK;
}

/* Text order, then id: a total order, so the walk is the same everywhere. */
static int text_cmp(const ml_grammar_proc *p, uint32_t a, uint32_t b)
{
    size_t la = p->off[a + 1] - p->off[a], lb = p->off[b + 1] - p->off[b];
    int c = memcmp(p->text + p->off[a], p->text + p->off[b], la < lb ? la : lb);
    if (c)
        return c;
    if (la != lb)
        return la < lb ? -1 : 1;
    return a < b ? -1 : 1;
}

/* Bottom-up merge sort of p->order (qsort takes no context). */
static ml_status sort_order(ml_grammar_proc *p, ml_error *err)
{
    uint32_t n = p->n_order, *a = p->order, *b = malloc((n ? n : 1) * sizeof *b);
    if (!b)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                b[k++] = text_cmp(p, a[i], a[j]) <= 0 ? a[i++] : a[j++];
            while (i < mid)
                b[k++] = a[i++];
            while (j < hi)
                b[k++] = a[j++];
        }
        uint32_t *t = a;
        a = b, b = t;
    }
    if (a != p->order) {
        memcpy(p->order, a, n * sizeof *a);
        b = a;
    }
    free(b);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t x = i ? p->order[i - 1] : 0, y = p->order[i], l = 0;
        size_t lx = i ? p->off[x + 1] - p->off[x] : 0, ly = p->off[y + 1] - p->off[y];
        while (l < lx && l < ly && p->text[p->off[x] + l] == p->text[p->off[y] + l])
            l++;
        p->lcp[i] = l;
    }
    return ML_OK;
}

/* ------------------------------------------------------------------------
 * Making one
 * ------------------------------------------------------------------------ */
void ml_grammar_proc_free(ml_grammar_proc *p)
{
    if (!p)
        return;
    ml__gengine_free(&p->e);
    free(p->text), free(p->off), free(p->cls), free(p->order), free(p->lcp), free(p->lv);
    free(p->cp_key), free(p->cp_stamp), free(p->cp_val);
    free(p);
}

void ml_grammar_proc_continue(ml_grammar_proc *p)
{
    if (!p)
        return;
    p->drop_space = 0;
    ml_grammar_proc_reset(p);
}

void ml_grammar_proc_reset(ml_grammar_proc *p)
{
    if (!p)
        return;
    /* the pool held the start set twice at creation and never shrinks */
    memcpy(p->e.pool + p->start.len, p->e.pool, p->start.len * sizeof *p->e.pool);
    p->cur = (gset){p->start.len, p->start.len, p->start.n};
    p->e.n = 2 * p->start.len;
    p->u = (gutf8){0, 0, 0};
    p->started = !p->drop_space;
    p->failed = ML_OK;
}

static ml_status start_state(ml_grammar_proc *p, ml_error *err)
{
    ml_status s = ml__gengine_start(&p->e, &p->start, err);
    if (s)
        return s;
    uint32_t *v = ml_array_reserve(p->e.pool, &p->e.cap, 2 * p->start.len + 1, sizeof *v);
    p->lv = calloc((size_t)p->max_len + 1, sizeof *p->lv);
    p->cp_key = malloc(CP_CACHE * sizeof *p->cp_key);
    p->cp_stamp = calloc(CP_CACHE, sizeof *p->cp_stamp);
    p->cp_val = malloc(CP_CACHE);
    if (!v || !p->lv || !p->cp_key || !p->cp_stamp || !p->cp_val)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    p->e.pool = v;
    return ML_OK;
}

ml_status ml_grammar_proc_new(const ml_grammar *g, const ml_mlt *t, ml_grammar_proc **out,
                              ml_error *err)
{
    if (!out || !g || !t)
        return ml__err(err, ML_E_INVAL, "", -1, "no grammar, tokenizer or place for the processor");
    *out = NULL;
    ml_grammar_proc *p = calloc(1, sizeof *p);
    if (!p)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    const ml_mlt_header *h = ml_mlt_get_header(t);
    p->g = g, p->t = t, p->n_vocab = h->n_vocab;
    p->drop_space = h->kind == ML_MLT_KIND_SPM && !(h->flags & ML_MLT_NO_PREFIX);
    ml__gengine_init(&p->e, g);
    ml_status s = load_texts(p, err);
    if (!s)
        s = sort_order(p, err);
    if (!s)
        s = start_state(p, err);
    if (s) {
        ml_grammar_proc_free(p);
        return s;
    }
    ml_grammar_proc_reset(p);
    *out = p;
    return ML_OK;
}

/* ------------------------------------------------------------------------
 * Steps
 * ------------------------------------------------------------------------ */
/* Level `to` from level `from` by byte b: the start space skipped, else a
 * byte through the engine (its set appended to the pool). */
/* The cache slot of code point cp (NULL when the table is full). */
static uint32_t *cp_slot(ml_grammar_proc *p, uint32_t cp)
{
    uint32_t h = (cp * 0x9e3779b1u) >> 16;
    for (;; h = (h + 1) & (CP_CACHE - 1)) {
        if (p->cp_stamp[h] == p->now && p->cp_key[h] == cp)
            return &p->cp_key[h];
        if (p->cp_stamp[h] != p->now)
            return p->cp_used < CP_CACHE / 4 * 3 ? &p->cp_key[h] : NULL;
    }
}

/* A step of the kept set by code point cp, through the cache: a result
 * equal to the kept set is the kept set itself (nothing appended). */
static ml_status cur_step(ml_grammar_proc *p, uint32_t cp, level *to, ml_error *err)
{
    uint32_t *slot = cp_slot(p, cp);
    size_t h = slot ? (size_t)(slot - p->cp_key) : 0;
    int known = slot && p->cp_stamp[h] == p->now;
    if (known && p->cp_val[h] != CP_OTHER) {
        to->set = p->cur, to->dead = p->cp_val[h] == CP_DEAD;
        return ML_OK;
    }
    size_t end = p->e.n;
    ml_status s = ml__gengine_step(&p->e, p->cur, cp, &to->set, err);
    if (s)
        return s;
    to->dead = to->set.n == 0;
    uint8_t v = to->dead ? CP_DEAD : CP_OTHER;
    if (to->set.len == p->cur.len && to->set.n == p->cur.n &&
        !memcmp(p->e.pool + to->set.off, p->e.pool + p->cur.off, p->cur.len * sizeof *p->e.pool))
        v = CP_SELF, to->set = p->cur, p->e.n = end;
    if (slot)
        p->cp_key[h] = cp, p->cp_stamp[h] = p->now, p->cp_val[h] = v, p->cp_used++;
    return ML_OK;
}

static ml_status level_step(ml_grammar_proc *p, const level *from, level *to, uint8_t b,
                            ml_error *err)
{
    *to = *from;
    if (!from->started && from->u.rem == 0 && b == ' ') {
        to->started = 1;
        return ML_OK;
    }
    to->started = 1;
    ml_status s = ML_OK;
    int kept = p->caching && from->set.off == p->cur.off && from->set.len == p->cur.len;
    uint32_t cp = 0, lo = 0, hi = 0;
    int r = kept ? ml__gutf8_byte(&to->u, b, &cp, &lo, &hi) : 2;
    if (r < 0)
        to->dead = 1;
    else if (r == 0)
        to->dead = !ml__gengine_can(&p->e, from->set, lo, hi);
    else if (r == 1)
        s = cur_step(p, cp, to, err);
    else { /* another set: the engine's own byte step */
        int dead;
        s = ml__gengine_byte(&p->e, from->set, &to->u, b, &to->set, &dead, err);
        to->dead = (uint8_t)dead;
    }
    to->pool_end = p->e.n;
    return s;
}

/* 1 when token id's text continues the kept state; lv[0..*have] are the
 * states of the prefix it shares with the token walked before. */
static ml_status walk_token(ml_grammar_proc *p, uint32_t i, uint32_t *have, int *ok,
                            ml_error *err)
{
    uint32_t id = p->order[i], len = (uint32_t)(p->off[id + 1] - p->off[id]);
    const uint8_t *b = p->text + p->off[id];
    uint32_t d = *have < p->lcp[i] ? *have : p->lcp[i];
    p->e.n = p->lv[d].pool_end;
    ml_status s = ML_OK;
    while (d < len && !p->lv[d].dead && !s) {
        s = level_step(p, &p->lv[d], &p->lv[d + 1], b[d], err);
        d++;
    }
    *have = d;
    *ok = !s && d == len && !p->lv[d].dead;
    return s;
}

static int complete(const ml_grammar_proc *p)
{
    return p->u.rem == 0 && ml__gengine_complete(&p->e, p->cur);
}

int ml_grammar_proc_complete(const ml_grammar_proc *p)
{
    return p && complete(p);
}

ml_status ml_grammar_proc_apply(void *ctx, float *logits, uint32_t vocab, const ml_token *history,
                                size_t n_history, ml_error *err)
{
    ml_grammar_proc *p = ctx;
    (void)history, (void)n_history;
    if (!p || !logits)
        return ml__err(err, ML_E_INVAL, "", -1, "no processor or logits");
    if (p->failed) {
        if (err)
            *err = p->why;
        return p->failed;
    }
    int done = complete(p);
    for (uint32_t id = 0; id < vocab; id++)
        if (id >= p->n_vocab || p->cls[id] == TOK_NONE || (p->cls[id] == TOK_EOG && !done))
            logits[id] = -INFINITY;
    p->lv[0] = (level){p->cur, p->cur.off + p->cur.len, p->u, (uint8_t)p->started,
                       p->cur.n == 0};
    uint32_t have = 0, n_ok = 0;
    if (++p->now == 0) { /* the stamps wrapped: forget them all */
        memset(p->cp_stamp, 0, CP_CACHE * sizeof *p->cp_stamp);
        p->now = 1;
    }
    p->cp_used = 0;
    p->caching = 1;
    p->e.budget = ML_GRAMMAR_MAX_TOKEN_WORK;
    for (uint32_t i = 0; i < p->n_order; i++) {
        int ok;
        ml_status s = walk_token(p, i, &have, &ok, err);
        if (s) {
            p->caching = 0;
            return s;
        }
        n_ok += (uint32_t)ok;
        if (!ok && p->order[i] < vocab)
            logits[p->order[i]] = -INFINITY;
    }
    p->caching = 0;
    p->e.n = p->cur.off + p->cur.len;
    if (!n_ok && !done)
        return ml__err(err, ML_E_MISMATCH, "grammar", -1, "no token of the vocabulary continues "
                       "the text, and the text is not complete");
    return ML_OK;
}

/* Steps the kept state by token id's text (the walk's first level as
 * scratch). */
static ml_status accept_token(ml_grammar_proc *p, ml_token id, ml_error *err)
{
    if (id >= p->n_vocab || p->cls[id] != TOK_TEXT)
        return ml__err(err, ML_E_MISMATCH, "grammar", -1, "token %u has no text the grammar "
                       "allows", id);
    size_t after = p->cur.off + p->cur.len;
    level a = {p->cur, after, p->u, (uint8_t)p->started, 0}, b;
    p->e.budget = ML_GRAMMAR_MAX_TOKEN_WORK;
    p->e.n = after;
    for (size_t k = p->off[id]; k < p->off[id + 1]; k++) {
        ml_status s = level_step(p, &a, &b, p->text[k], err);
        if (!s && b.dead)
            s = ml__err(err, ML_E_MISMATCH, "grammar", -1, "token %u was kept, but its text does "
                        "not continue the grammar", id);
        if (s)
            return s;
        if (b.set.off != a.set.off) { /* a new set: move it right after the kept one */
            memmove(p->e.pool + after, p->e.pool + b.set.off, b.set.len * sizeof *p->e.pool);
            b.set.off = after, p->e.n = after + b.set.len;
        }
        a = b;
    }
    memmove(p->e.pool + p->cur.off, p->e.pool + a.set.off, a.set.len * sizeof *p->e.pool);
    p->cur = (gset){p->cur.off, a.set.len, a.set.n};
    p->e.n = p->cur.off + p->cur.len;
    p->u = a.u, p->started = a.started;
    return ML_OK;
}

void ml_grammar_proc_accept(void *ctx, ml_token id)
{
    ml_grammar_proc *p = ctx;
    if (!p || p->failed)
        return;
    p->failed = accept_token(p, id, &p->why);
}
