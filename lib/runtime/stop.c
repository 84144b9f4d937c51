/* stop.c - stop strings over streamed text (mlcore/stop.h).  Only the
 * pending text is kept: every byte before it was released because no stop
 * string can start there, so a match can only start in it, and it never
 * holds more than the longest stop string (plus the last piece added). */
#include "base/internal.h"

#include <mlcore/buf.h>
#include <mlcore/stop.h>

#include <stdlib.h>

struct ml_stop {
    char **stops;
    size_t *lens;
    size_t n, longest;
    ml_buf pend;            /* text not yet released */
    ml_buf out;             /* what the last call released */
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
    ml_buf_free(&s->pend);
    ml_buf_free(&s->out);
    free(s);
}

/* The first complete stop string in the pending text: its start, or
 * pend.len when there is none (the longest wins at one start). */
static size_t first_match(const ml_stop *s, size_t *len)
{
    size_t best = s->pend.len;
    *len = 0;
    for (size_t i = 0; i < s->n; i++) {
        size_t m = s->lens[i];
        for (size_t at = 0; at + m <= s->pend.len && at <= best; at++)
            if (memcmp(s->pend.data + at, s->stops[i], m) == 0) {
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
        size_t k = s->lens[i] - 1 < s->pend.len ? s->lens[i] - 1 : s->pend.len;
        for (; k > hold; k--)
            if (memcmp(s->pend.data + s->pend.len - k, s->stops[i], k) == 0) {
                hold = k;
                break;
            }
    }
    return hold;
}

/* Moves the first n pending bytes to the released buffer. */
static int release(ml_stop *s, size_t n, const char **emit, size_t *emit_len)
{
    s->out.len = 0;
    if (ml_buf_reserve(&s->out, n)) /* memory even for n = 0: *emit is never NULL */
        return -1;
    memcpy(s->out.data, s->pend.data, n);
    s->out.len = n;
    memmove(s->pend.data, s->pend.data + n, s->pend.len - n);
    s->pend.len -= n;
    *emit = s->out.data;
    *emit_len = n;
    return 0;
}

int ml_stop_push(ml_stop *s, const char *text, size_t n, const char **emit, size_t *emit_len)
{
    *emit = "";
    *emit_len = 0;
    if (s->done || n == 0)
        return s->done;
    if (ml_buf_append(&s->pend, text, n))
        return -1;
    size_t len, at = first_match(s, &len);
    if (at < s->pend.len) {
        if (release(s, at, emit, emit_len))
            return -1;
        s->pend.len = 0;
        s->done = 1;
        return 1;
    }
    return release(s, s->pend.len - held_tail(s), emit, emit_len);
}

void ml_stop_flush(ml_stop *s, const char **emit, size_t *emit_len)
{
    *emit = "";
    *emit_len = 0;
    if (s->done || s->pend.len == 0)
        return;
    /* The pending bytes are handed over as they lie. */
    ml_buf t = s->out;
    s->out = s->pend;
    s->pend = t;
    s->pend.len = 0;
    *emit = s->out.data;
    *emit_len = s->out.len;
}

int ml_stop_done(const ml_stop *s)
{
    return s->done;
}

void ml_stop_reset(ml_stop *s)
{
    s->pend.len = 0;
    s->done = 0;
}
