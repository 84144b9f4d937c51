/* buf.c - the growth rule of mlcore/buf.h, written once: byte buffers and
 * caller-held arrays grow alike. */
#include "base/internal.h"

#include <stdlib.h>

/* Elements of the first allocation: small arrays need only one. */
#define FIRST_ELEMENTS 16

/* The capacity after cap once need elements do not fit: doubled (or the
 * first allocation), at least need, never more elements than size_t can
 * count bytes of; need has been checked to fit. */
static size_t grown(size_t cap, size_t need, size_t size)
{
    size_t most = SIZE_MAX / size;
    size_t c = cap == 0 ? FIRST_ELEMENTS : cap <= most / 2 ? 2 * cap : most;
    if (c > most)
        c = most;
    return c < need ? need : c;
}

void *ml_array_reserve(void *data, size_t *cap, size_t need, size_t size)
{
    if (data && need <= *cap) /* an empty array still gets memory: NULL means failure */
        return data;
    if (size == 0 || need > SIZE_MAX / size)
        return NULL;
    size_t c = grown(*cap, need, size);
    void *p = realloc(data, c * size);
    if (p)
        *cap = c;
    return p;
}

ml_status ml_buf_reserve(ml_buf *b, size_t more)
{
    if (more > SIZE_MAX - b->len)
        return ML_E_NOMEM;
    char *p = ml_array_reserve(b->data, &b->cap, b->len + more, 1);
    if (!p)
        return ML_E_NOMEM;
    b->data = p;
    return ML_OK;
}

ml_status ml_buf_append(ml_buf *b, const void *src, size_t n)
{
    if (n == 0)
        return ML_OK;
    ml_status s = ml_buf_reserve(b, n);
    if (s)
        return s;
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return ML_OK;
}

void ml_buf_free(ml_buf *b)
{
    free(b->data);
    *b = (ml_buf){0};
}
