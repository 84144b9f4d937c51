/* grammar_match.c - the matcher (ml_grammar_match_*): text fed a byte at
 * a time through the engine.  The pool holds the start set, then the
 * current set, then the sets a call is building; a call that fails
 * leaves the current set as it was. */
#include "grammar/grammar.h"

#include <stdlib.h>

struct ml_grammar_match {
    gengine e;
    gset start;   /* at the front of the pool, kept for reset */
    gset cur;     /* right after it */
    gutf8 u;      /* a character begun and not finished */
};

void ml_grammar_match_free(ml_grammar_match *m)
{
    if (!m)
        return;
    ml__gengine_free(&m->e);
    free(m);
}

void ml_grammar_match_reset(ml_grammar_match *m)
{
    if (!m)
        return;
    /* the pool held the start set twice at creation and never shrinks */
    memcpy(m->e.pool + m->start.len, m->e.pool, m->start.len * sizeof *m->e.pool);
    m->cur = (gset){m->start.len, m->start.len, m->start.n};
    m->e.n = 2 * m->start.len;
    m->u = (gutf8){0, 0, 0};
}

ml_status ml_grammar_match_new(const ml_grammar *g, ml_grammar_match **out, ml_error *err)
{
    if (!out || !g)
        return ml__err(err, ML_E_INVAL, "", -1, "no grammar or no place for the matcher");
    *out = NULL;
    ml_grammar_match *m = calloc(1, sizeof *m);
    if (!m)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    ml__gengine_init(&m->e, g);
    ml_status s = ml__gengine_start(&m->e, &m->start, err);
    if (!s) {
        uint32_t *v = ml_array_reserve(m->e.pool, &m->e.cap, 2 * m->start.len + 1,
                                       sizeof *v);
        if (!v)
            s = ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
        else
            m->e.pool = v;
    }
    if (s) {
        ml_grammar_match_free(m);
        return s;
    }
    ml_grammar_match_reset(m);
    *out = m;
    return ML_OK;
}

/* Moves the set w to `to` in the pool (to <= w.off) and ends the pool there. */
static gset move_set(gengine *e, gset w, size_t to)
{
    memmove(e->pool + to, e->pool + w.off, w.len * sizeof *e->pool);
    e->n = to + w.len;
    return (gset){to, w.len, w.n};
}

ml_status ml_grammar_match_feed(ml_grammar_match *m, const void *bytes, size_t n, ml_error *err)
{
    if (!m || (!bytes && n))
        return ml__err(err, ML_E_INVAL, "", -1, "no matcher or no bytes");
    const uint8_t *b = bytes;
    size_t after = m->cur.off + m->cur.len;
    gset w = m->cur;
    gutf8 u = m->u;
    for (size_t k = 0; k < n; k++) {
        gset next;
        int dead;
        ml_status s = ml__gengine_byte(&m->e, w, &u, b[k], &next, &dead, err);
        if (!s && dead)
            s = ml__err(err, ML_E_MISMATCH, "text", (int64_t)k, "byte 0x%02x does not continue "
                        "the grammar", b[k]);
        if (s) {
            m->e.n = after;
            return s;
        }
        if (next.off != w.off)
            w = move_set(&m->e, next, after);
    }
    m->cur = move_set(&m->e, w, m->cur.off);
    m->u = u;
    return ML_OK;
}

int ml_grammar_match_complete(const ml_grammar_match *m)
{
    return m && m->u.rem == 0 && ml__gengine_complete(&m->e, m->cur);
}
