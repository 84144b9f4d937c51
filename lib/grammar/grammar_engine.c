/* grammar_engine.c - the pushdown engine under the matcher and the logit
 * processor.  A state is a set of parse stacks, each a list of positions
 * in the grammar's elements whose top is a character set (or nothing: a
 * complete sentence).  A code point keeps the stacks whose top set has
 * it, moves each past that set and expands rule references at the new top
 * until every top is a character set again: a reference pushes the
 * position after it (unless the sequence ends there, so right recursion
 * does not grow the stack) and one stack per alternative of the rule.
 * Stacks met twice in a step are expanded once (ambiguous grammars stay
 * linear), and every size is capped (mlcore/grammar.h).  UTF-8 is taken a
 * byte at a time so that a token may end inside a character. */
#include "grammar/grammar.h"

#include <stdlib.h>

/* Words all the sets of one engine may hold (64 MiB): the processor keeps
 * one set per byte of the token it walks. */
#define POOL_MAX ((size_t)1 << 24)

void ml__gengine_init(gengine *e, const ml_grammar *g)
{
    memset(e, 0, sizeof *e);
    e->g = g;
    e->budget = UINT64_MAX;
}

void ml__gengine_free(gengine *e)
{
    free(e->pool), free(e->todo), free(e->cur), free(e->seen), free(e->tab), free(e->stamp);
    memset(e, 0, sizeof *e);
}

static ml_status nomem(ml_error *err)
{
    return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
}

/* ------------------------------------------------------------------------
 * Character sets
 * ------------------------------------------------------------------------ */
static int is_end(const ml_grammar *g, uint32_t pos)
{
    return g->el[pos].type == G_END || g->el[pos].type == G_ALT;
}

/* The position after the set that begins at pos. */
static uint32_t after_set(const ml_grammar *g, uint32_t pos)
{
    pos++;
    while (g->el[pos].type == G_RNG_UPPER || g->el[pos].type == G_CHAR_ALT)
        pos++;
    return pos;
}

/* Calls each [lo, hi] of the set at pos until fn returns nonzero. */
static int each_range(const gelem *el, int (*fn)(void *, uint32_t, uint32_t), void *ctx)
{
    do {
        uint32_t lo = el->value, hi = lo;
        if (el[1].type == G_RNG_UPPER)
            hi = el[1].value, el++;
        if (fn(ctx, lo, hi))
            return 1;
        el++;
    } while (el->type == G_CHAR_ALT);
    return 0;
}

static int has_cp(void *ctx, uint32_t lo, uint32_t hi)
{
    uint32_t cp = *(const uint32_t *)ctx;
    return lo <= cp && cp <= hi;
}

static int set_has(const ml_grammar *g, uint32_t pos, uint32_t cp)
{
    const gelem *el = g->el + pos;
    if (el->type == G_ANY)
        return 1;
    return each_range(el, has_cp, &cp) == (el->type == G_CHAR);
}

typedef struct span {
    uint32_t lo, hi;
} span;

static int meets(void *ctx, uint32_t lo, uint32_t hi)
{
    const span *s = ctx;
    return lo <= s->hi && s->lo <= hi;
}

/* Moves s->lo past a range that holds it. */
static int cover(void *ctx, uint32_t lo, uint32_t hi)
{
    span *s = ctx;
    if (lo > s->lo || s->lo > hi)
        return 0;
    s->lo = hi == UINT32_MAX ? hi : hi + 1;
    return hi >= s->hi;
}

/* 1 when the set at pos has some code point of [lo, hi]: a set meets the
 * span, a negated set fails to cover it (its ranges, followed from lo). */
static int set_meets(const ml_grammar *g, uint32_t pos, uint32_t lo, uint32_t hi)
{
    const gelem *el = g->el + pos;
    span s = {lo, hi};
    if (el->type == G_ANY)
        return 1;
    if (el->type == G_CHAR)
        return each_range(el, meets, &s);
    for (;;) {
        uint32_t before = s.lo;
        if (each_range(el, cover, &s))
            return 0;
        if (s.lo == before)
            return 1;
    }
}

/* ------------------------------------------------------------------------
 * Stacks
 * ------------------------------------------------------------------------ */
static uint64_t stack_hash(const uint32_t *w)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ w[0];
    for (uint32_t k = 1; k <= w[0]; k++)
        h = (h ^ w[k]) * 0x100000001b3ull, h ^= h >> 29;
    return h;
}

static ml_status grow_tab(gengine *e, ml_error *err)
{
    size_t cap = e->tab_cap ? e->tab_cap * 2 : 1024;
    uint32_t *tab = malloc(cap * sizeof *tab), *stamp = calloc(cap, sizeof *stamp);
    if (!tab || !stamp) {
        free(tab), free(stamp);
        return nomem(err);
    }
    e->now = e->now ? e->now : 1;
    for (size_t k = 0; k < e->tab_cap; k++) {
        if (e->stamp[k] != e->now)
            continue;
        size_t h = (size_t)stack_hash(e->seen + e->tab[k]) & (cap - 1);
        while (stamp[h] == e->now)
            h = (h + 1) & (cap - 1);
        stamp[h] = e->now, tab[h] = e->tab[k];
    }
    free(e->tab), free(e->stamp);
    e->tab = tab, e->stamp = stamp, e->tab_cap = cap;
    return ML_OK;
}

/* A new step: the seen set empties (by its stamp). */
static void seen_reset(gengine *e)
{
    e->sn = 0, e->tab_used = 0, e->work = 0, e->tn = 0;
    if (++e->now == 0) {
        if (e->stamp)
            memset(e->stamp, 0, e->tab_cap * sizeof *e->stamp);
        e->now = 1;
    }
}

/* 1 when e->cur was met before in this step; else it is remembered. */
static ml_status seen_add(gengine *e, int *was, ml_error *err)
{
    const uint32_t *w = e->cur;
    if (e->tab_used * 2 >= e->tab_cap) {
        ml_status s = grow_tab(e, err);
        if (s)
            return s;
    }
    size_t h = (size_t)stack_hash(w) & (e->tab_cap - 1);
    for (; e->stamp[h] == e->now; h = (h + 1) & (e->tab_cap - 1)) {
        const uint32_t *o = e->seen + e->tab[h];
        if (o[0] == w[0] && !memcmp(o + 1, w + 1, w[0] * sizeof *w)) {
            *was = 1;
            return ML_OK;
        }
    }
    uint32_t *v = ml_array_reserve(e->seen, &e->scap, e->sn + 1 + w[0], sizeof *v);
    if (!v)
        return nomem(err);
    e->seen = v;
    memcpy(e->seen + e->sn, w, (1 + (size_t)w[0]) * sizeof *w);
    e->stamp[h] = e->now, e->tab[h] = (uint32_t)e->sn;
    e->sn += 1 + w[0];
    e->tab_used++;
    *was = 0;
    return ML_OK;
}

/* Pushes onto todo the stack base[0..n) followed by up to two positions
 * (UINT32_MAX: none); base must not point into todo.  A stack on todo is
 * its length, its positions and its length again, so that the last one
 * is found from the end. */
static ml_status todo_push(gengine *e, const uint32_t *base, uint32_t n, uint32_t p1, uint32_t p2,
                           ml_error *err)
{
    uint32_t len = n + (p1 != UINT32_MAX) + (p2 != UINT32_MAX);
    if (len > ML_GRAMMAR_MAX_DEPTH)
        return ml__err(err, ML_E_UNSUPPORTED, "grammar", -1, "a parse stack deeper than %d "
                       "(rules open at once)", ML_GRAMMAR_MAX_DEPTH);
    uint32_t *v = ml_array_reserve(e->todo, &e->tcap, e->tn + 2 + len, sizeof *v);
    if (!v)
        return nomem(err);
    e->todo = v;
    uint32_t *w = e->todo + e->tn;
    w[0] = len;
    if (n)
        memcpy(w + 1, base, n * sizeof *base);
    if (p1 != UINT32_MAX)
        w[1 + n++] = p1;
    if (p2 != UINT32_MAX)
        w[1 + n] = p2;
    w[1 + len] = len;
    e->tn += 2 + len;
    return ML_OK;
}

/* Moves todo's last stack into e->cur. */
static ml_status todo_pop(gengine *e, ml_error *err)
{
    uint32_t len = e->todo[e->tn - 1];
    size_t at = e->tn - 2 - len;
    uint32_t *c = ml_array_reserve(e->cur, &e->ccap, 1 + (size_t)len, sizeof *c);
    if (!c)
        return nomem(err);
    e->cur = c;
    memcpy(c, e->todo + at, (1 + (size_t)len) * sizeof *c);
    e->tn = at;
    return ML_OK;
}

/* Appends e->cur to the set being built at the end of the pool. */
static ml_status output(gengine *e, gset *out, ml_error *err)
{
    const uint32_t *w = e->cur;
    if (out->n >= ML_GRAMMAR_MAX_STACKS)
        return ml__err(err, ML_E_UNSUPPORTED, "grammar", -1, "more than %d parse stacks at once "
                       "(an ambiguous grammar)", ML_GRAMMAR_MAX_STACKS);
    if (out->len + 1 + w[0] > ML_GRAMMAR_MAX_STATE)
        return ml__err(err, ML_E_UNSUPPORTED, "grammar", -1, "a parse state over %u positions",
                       ML_GRAMMAR_MAX_STATE);
    if (e->n + 1 + w[0] > POOL_MAX)
        return ml__err(err, ML_E_UNSUPPORTED, "grammar", -1, "the states of one token's bytes "
                       "over %zu positions", POOL_MAX);
    uint32_t *v = ml_array_reserve(e->pool, &e->cap, e->n + 1 + w[0], sizeof *v);
    if (!v)
        return nomem(err);
    e->pool = v;
    memcpy(e->pool + e->n, w, (1 + (size_t)w[0]) * sizeof *w);
    e->n += 1 + w[0];
    out->len += 1 + w[0];
    out->n++;
    return ML_OK;
}

/* Pushes the expansions of e->cur's top reference, one per alternative. */
static ml_status expand_ref(gengine *e, ml_error *err)
{
    const ml_grammar *g = e->g;
    uint32_t len = e->cur[0], top = e->cur[len], next = top + 1;
    uint32_t keep = is_end(g, next) ? UINT32_MAX : next;
    uint32_t r = g->el[top].value;
    ml_status s = ML_OK;
    for (uint32_t a = g->start[r]; !s; a++) {
        s = todo_push(e, e->cur + 1, len - 1, keep, is_end(g, a) ? UINT32_MAX : a, err);
        while (!is_end(g, a))
            a++;
        if (g->el[a].type == G_END)
            break;
    }
    return s;
}

/* Expands every stack on todo into out. */
static ml_status drain(gengine *e, gset *out, ml_error *err)
{
    ml_status s = ML_OK;
    while (e->tn && !s) {
        if ((s = todo_pop(e, err)))
            break;
        if (++e->work > ML_GRAMMAR_MAX_WORK)
            return ml__err(err, ML_E_UNSUPPORTED, "grammar", -1, "more than %u parse stacks "
                           "visited for one character", ML_GRAMMAR_MAX_WORK);
        int was;
        uint32_t len = e->cur[0];
        if (e->budget < 1 + (uint64_t)len)
            return ml__err(err, ML_E_UNSUPPORTED, "grammar", -1, "more than %u stack positions "
                           "stepped for one token (a grammar too costly to follow)",
                           ML_GRAMMAR_MAX_TOKEN_WORK);
        e->budget -= 1 + (uint64_t)len;
        if ((s = seen_add(e, &was, err)) || was)
            continue;
        if (len == 0 || g_is_char(e->g->el[e->cur[len]].type))
            s = output(e, out, err);
        else
            s = expand_ref(e, err);
    }
    return s;
}

/* ------------------------------------------------------------------------
 * Steps
 * ------------------------------------------------------------------------ */
ml_status ml__gengine_start(gengine *e, gset *out, ml_error *err)
{
    const ml_grammar *g = e->g;
    *out = (gset){e->n, 0, 0};
    seen_reset(e);
    ml_status s = ML_OK;
    /* one stack per alternative of the start rule (empty: complete) */
    for (uint32_t a = g->start[g->root]; !s; a++) {
        s = todo_push(e, NULL, 0, is_end(g, a) ? UINT32_MAX : a, UINT32_MAX, err);
        while (!is_end(g, a))
            a++;
        if (g->el[a].type == G_END)
            break;
    }
    return s ? s : drain(e, out, err);
}

ml_status ml__gengine_step(gengine *e, gset in, uint32_t cp, gset *out, ml_error *err)
{
    const ml_grammar *g = e->g;
    *out = (gset){e->n, 0, 0};
    seen_reset(e);
    ml_status s = ML_OK;
    for (size_t k = in.off; k < in.off + in.len && !s; k += 1 + e->pool[k]) {
        uint32_t len = e->pool[k];
        if (len == 0 || !set_has(g, e->pool[k + len], cp))
            continue;
        uint32_t next = after_set(g, e->pool[k + len]);
        s = todo_push(e, e->pool + k + 1, len - 1, is_end(g, next) ? UINT32_MAX : next,
                      UINT32_MAX, err);
        if (!s)
            s = drain(e, out, err);
    }
    return s;
}

int ml__gengine_can(const gengine *e, gset in, uint32_t lo, uint32_t hi)
{
    for (size_t k = in.off; k < in.off + in.len; k += 1 + e->pool[k])
        if (e->pool[k] && set_meets(e->g, e->pool[k + e->pool[k]], lo, hi))
            return 1;
    return 0;
}

int ml__gengine_complete(const gengine *e, gset in)
{
    for (size_t k = in.off; k < in.off + in.len; k += 1 + e->pool[k])
        if (e->pool[k] == 0)
            return 1;
    return 0;
}

/* ------------------------------------------------------------------------
 * UTF-8, a byte at a time
 * ------------------------------------------------------------------------ */
/* The code points a sequence begun as u can still become, in [*lo, *hi];
 * 0 when none (overlong forms, surrogates, beyond U+10FFFF). */
static int utf8_span(const gutf8 *u, uint32_t *lo, uint32_t *hi)
{
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    unsigned sh = 6u * u->rem;
    *lo = u->value << sh;
    *hi = *lo | ((1u << sh) - 1);
    if (*lo < min[u->len])
        *lo = min[u->len];
    if (*hi > 0x10ffff)
        *hi = 0x10ffff;
    if (*lo >= 0xd800 && *hi <= 0xdfff)
        return 0;
    return *lo <= *hi;
}

int ml__gutf8_byte(gutf8 *u, uint8_t b, uint32_t *cp, uint32_t *lo, uint32_t *hi)
{
    if (u->rem == 0) {
        if (b < 0x80) {
            *cp = b;
            return 1;
        }
        if (b >= 0xc2 && b <= 0xdf)
            *u = (gutf8){b & 0x1fu, 1, 2};
        else if (b >= 0xe0 && b <= 0xef)
            *u = (gutf8){b & 0x0fu, 2, 3};
        else if (b >= 0xf0 && b <= 0xf4)
            *u = (gutf8){b & 0x07u, 3, 4};
        else
            return -1;
    } else {
        if ((b & 0xc0) != 0x80)
            return -1;
        u->value = u->value << 6 | (b & 0x3fu);
        u->rem--;
    }
    if (!utf8_span(u, lo, hi))
        return -1;
    if (u->rem)
        return 0;
    *cp = u->value;
    *u = (gutf8){0, 0, 0};
    return 1;
}

ml_status ml__gengine_byte(gengine *e, gset in, gutf8 *u, uint8_t b, gset *out, int *dead,
                           ml_error *err)
{
    uint32_t cp = 0, lo = 0, hi = 0;
    int r = ml__gutf8_byte(u, b, &cp, &lo, &hi);
    *dead = 0;
    if (r < 0) {
        *dead = 1;
        *out = (gset){e->n, 0, 0};
        return ML_OK;
    }
    if (r == 0) {
        *out = in;
        *dead = !ml__gengine_can(e, in, lo, hi);
        return ML_OK;
    }
    ml_status s = ml__gengine_step(e, in, cp, out, err);
    *dead = !s && out->n == 0;
    return s;
}
