/* fuzz.h - what every harness in fuzz/ shares: the libFuzzer entry point,
 * the check that stops a run, the error contract of mlcore.h as an oracle,
 * and memory sinks and readers.  Each harness is one file, linked either
 * with libFuzzer (make fuzz) or with replay.c (make fuzz-replay); this
 * header only uses the public API. */
#ifndef ML_FUZZ_H
#define ML_FUZZ_H

#include <mlcore.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken promise of the library: abort, so that libFuzzer keeps the input
 * and the replay fails. */
#define FUZZ_CHECK(cond) ((cond) ? (void)0 : fuzz_fail(#cond, __FILE__, __LINE__))

static inline void fuzz_fail(const char *what, const char *file, int line)
{
    fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
    abort();
}

/* An ml_error filled with a pattern, so that a failure which leaves it
 * untouched is seen. */
static inline void fuzz_err_init(ml_error *e)
{
    memset(e, 0xa5, sizeof *e);
}

/* A control byte (ESC, NUL excepted) in a message or field name: the
 * file's bytes would reach the user's terminal raw (ml__err escapes them
 * as \xNN). */
static inline int fuzz_has_control(const char *s, size_t n)
{
    for (size_t i = 0; i < n && s[i]; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] == 0x7f)
            return 1;
    return 0;
}

/* The contract of mlcore.h: a failing call fills err with its own status,
 * a message, a terminated field name and an offset inside the input (or
 * -1).  `size` is the input's size, or 0 when offsets are not checked. */
static inline void fuzz_check_err(ml_status s, const ml_error *e, uint64_t size)
{
    FUZZ_CHECK(s >= ML_OK && s <= ML_E_MISMATCH);
    if (s == ML_OK)
        return;
    const char *bad = NULL;
    if (e->code != s)
        bad = "err->code is not the status returned";
    else if (!memchr(e->msg, 0, sizeof e->msg) || !e->msg[0])
        bad = "no message, or an unterminated one";
    else if (!memchr(e->field, 0, sizeof e->field))
        bad = "unterminated field";
    else if (e->offset < -1 || (size && e->offset != -1 && (uint64_t)e->offset > size))
        bad = "offset outside the input";
    else if (s != ML_E_IO && e->sys_errno != 0)
        bad = "errno set for a status other than ML_E_IO";
    else if (fuzz_has_control(e->msg, sizeof e->msg) || fuzz_has_control(e->field, sizeof e->field))
        bad = "control bytes in the message or field";
    if (!bad)
        return;
    fprintf(stderr, "error contract: %s: status %s, code %d, field \"%.*s\", offset %lld of %llu, "
                    "msg \"%.*s\"\n",
            bad, ml_status_name(s), (int)e->code, (int)sizeof e->field, e->field,
            (long long)e->offset, (unsigned long long)size, (int)sizeof e->msg, e->msg);
    abort();
}

/* A growable byte buffer as an ml_write_fn sink; `limit` (0: none) makes
 * the sink fail with ML_E_IO beyond that many bytes. */
typedef struct fuzz_buf {
    uint8_t *p;
    size_t n, cap, limit;
} fuzz_buf;

static inline ml_status fuzz_buf_sink(void *ctx, const void *buf, size_t n, ml_error *err)
{
    fuzz_buf *b = ctx;
    if (b->limit && n > b->limit - b->n) {
        if (err) {
            memset(err, 0, sizeof *err);
            err->code = ML_E_IO;
            err->offset = -1;
            snprintf(err->msg, sizeof err->msg, "fuzz sink: over %zu bytes", b->limit);
        }
        return ML_E_IO;
    }
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap - b->n < n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        FUZZ_CHECK(p != NULL);
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, buf, n);
    b->n += n;
    return ML_OK;
}

/* A sink that only counts. */
static inline ml_status fuzz_null_sink(void *ctx, const void *buf, size_t n, ml_error *err)
{
    (void)buf;
    (void)err;
    *(uint64_t *)ctx += n;
    return ML_OK;
}

/* An ml_read_fn over memory handing out at most `step` bytes per call, so
 * that short reads are exercised. */
typedef struct fuzz_reader {
    const uint8_t *p;
    size_t n, pos, step;
} fuzz_reader;

static inline long fuzz_mem_read(void *ctx, void *buf, size_t n, ml_error *err)
{
    (void)err;
    fuzz_reader *r = ctx;
    size_t left = r->n - r->pos;
    if (n > left)
        n = left;
    if (r->step && n > r->step)
        n = r->step;
    memcpy(buf, r->p + r->pos, n);
    r->pos += n;
    return (long)n;
}

/* A small hash of the input, to vary choices (chunk sizes, options)
 * without taking bytes away from the format. */
static inline uint32_t fuzz_hash(const uint8_t *d, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ d[i]) * 16777619u;
    return h;
}

#endif
