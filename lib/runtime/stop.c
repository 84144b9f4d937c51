/* stop.c - stop strings over streamed text (mlcore/stop.h).  Only the
 * pending text is kept: every byte before it was released because no stop
 * string can start there, so a match can only start in it, and it never
 * holds more than the longest stop string (plus the last piece added). */
#include "base/internal.h"

#include <mlcore/stop.h>

#include <stdlib.h>

struct ml_stop {
    char **stops;
    size_t *lens;
    size_t n, longest;
    char *pend;             /* text not yet released */
    size_t n_pend, cap;
    char *out;              /* what the last call released */
    size_t out_cap;
    int done;
};

ml_status ml_stop_new(const char *const *stops, size_t n, ml_stop **out, ml_error *err)
{
    *out = NULL;
    if (n > ML_STOP_MAX || (n && !stops))
        return ml__err(err, ML_E_INVAL, "", -1, "%zu stop strings (at most %d)", n, ML_STOP_MAX);
    ml_stop *s = calloc(1, sizeof *s);
    if (!s || (n && (!(s->stops = calloc(n, sizeof *s->stops)) ||
                     !(s->lens = calloc(n, sizeof *s->lens))))) {
        ml_stop_free(s);
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        size_t len = stops[i] ? strlen(stops[i]) : 0;
        if (len == 0 || len > ML_STOP_MAX_LEN) {
            s->n = i;
            ml_stop_free(s);
            return ml__err(err, ML_E_INVAL, "", -1, "stop string %zu: %zu bytes (1 to %d)", i + 1,
                           len, ML_STOP_MAX_LEN);
        }
        if (!(s->stops[i] = malloc(len + 1))) {
            s->n = i;
            ml_stop_free(s);
            return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
        }
        memcpy(s->stops[i], stops[i], len + 1);
        s->lens[i] = len;
        s->longest = len > s->longest ? len : s->longest;
        s->n = i + 1;
    }
    *out = s;
    return ML_OK;
}

void ml_stop_free(ml_stop *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        free(s->stops[i]);
    free(s->stops);
    free(s->lens);
    free(s->pend);
    free(s->out);
    free(s);
}

static int grow(char **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) {
        if (c > SIZE_MAX / 2)
            return -1;
        c *= 2;
    }
    char *q = realloc(*p, c);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* The first complete stop string in the pending text: its start, or
 * n_pend when there is none (the longest wins at one start). */
static size_t first_match(const ml_stop *s, size_t *len)
{
    size_t best = s->n_pend;
    *len = 0;
    for (size_t i = 0; i < s->n; i++) {
        size_t m = s->lens[i];
        for (size_t at = 0; at + m <= s->n_pend && at <= best; at++)
            if (memcmp(s->pend + at, s->stops[i], m) == 0) {
                if (at < best || m > *len) {
                    best = at;
                    *len = m;
                }
                break;
            }
    }
    return best;
}

/* Bytes at the end of the pending text that are the start of some stop
 * string: they must wait for what follows. */
static size_t held_tail(const ml_stop *s)
{
    size_t hold = 0;
    for (size_t i = 0; i < s->n; i++) {
        size_t k = s->lens[i] - 1 < s->n_pend ? s->lens[i] - 1 : s->n_pend;
        for (; k > hold; k--)
            if (memcmp(s->pend + s->n_pend - k, s->stops[i], k) == 0) {
                hold = k;
                break;
            }
    }
    return hold;
}

/* Moves the first n pending bytes to the released buffer. */
static int release(ml_stop *s, size_t n, const char **emit, size_t *emit_len)
{
    if (grow(&s->out, &s->out_cap, n ? n : 1))
        return -1;
    memcpy(s->out, s->pend, n);
    memmove(s->pend, s->pend + n, s->n_pend - n);
    s->n_pend -= n;
    *emit = s->out;
    *emit_len = n;
    return 0;
}

int ml_stop_push(ml_stop *s, const char *text, size_t n, const char **emit, size_t *emit_len)
{
    *emit = "";
    *emit_len = 0;
    if (s->done || n == 0)
        return s->done;
    if (s->n_pend > SIZE_MAX - n || grow(&s->pend, &s->cap, s->n_pend + n))
        return -1;
    memcpy(s->pend + s->n_pend, text, n);
    s->n_pend += n;
    size_t len, at = first_match(s, &len);
    if (at < s->n_pend) {
        if (release(s, at, emit, emit_len))
            return -1;
        s->n_pend = 0;
        s->done = 1;
        return 1;
    }
    return release(s, s->n_pend - held_tail(s), emit, emit_len);
}

void ml_stop_flush(ml_stop *s, const char **emit, size_t *emit_len)
{
    *emit = "";
    *emit_len = 0;
    if (s->done || s->n_pend == 0)
        return;
    /* The pending bytes are handed over as they lie. */
    char *t = s->out;
    size_t c = s->out_cap;
    s->out = s->pend;
    s->out_cap = s->cap;
    s->pend = t;
    s->cap = c;
    *emit = s->out;
    *emit_len = s->n_pend;
    s->n_pend = 0;
}

int ml_stop_done(const ml_stop *s)
{
    return s->done;
}

void ml_stop_reset(ml_stop *s)
{
    s->n_pend = 0;
    s->done = 0;
}
