/* buf.h - one growth rule for memory that fills up as it goes: a byte
 * buffer (ml_buf), and the same rule for arrays a caller keeps as a
 * pointer and a count (ml_array_reserve).  The capacity at least doubles
 * on each growth, so appending n bytes or elements one by one costs O(n)
 * copying in all; every size is checked, also where size_t has 32 bits. */
#ifndef MLCORE_BUF_H
#define MLCORE_BUF_H

#include <mlcore/base.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A growable byte buffer; start zeroed ({0}), release with ml_buf_free. */
typedef struct ml_buf {
    char *data; /* cap bytes allocated, the first len in use; NULL before the first growth */
    size_t len; /* bytes in use */
    size_t cap; /* bytes allocated */
} ml_buf;

/* Makes room for `more` bytes after the first len, growing by the rule
 * above; data is not NULL afterwards, even for more = 0.  ML_E_NOMEM when
 * len + more does not fit size_t or the memory cannot be had; b is
 * unchanged then. */
ML_API ml_status ml_buf_reserve(ml_buf *b, size_t more);
/* Appends n bytes from src (n may be 0, and src NULL then); ML_E_NOMEM
 * as ml_buf_reserve, b unchanged. */
ML_API ml_status ml_buf_append(ml_buf *b, const void *src, size_t n);
/* Frees the bytes and leaves b empty ({0}); accepts an empty buffer. */
ML_API void ml_buf_free(ml_buf *b);

/* For an array of *cap elements of `size` bytes (size > 0) that the caller
 * keeps as a typed pointer and a count: makes room for `need` elements by
 * the rule above (at least 16 elements at the first growth) and returns
 * the array, moved or not, *cap updated; an array still NULL is allocated
 * even for need = 0, so NULL always means failure: need * size does not
 * fit size_t or the memory cannot be had.  data and *cap are then
 * unchanged, and data still belongs to the caller. */
ML_API void *ml_array_reserve(void *data, size_t *cap, size_t need, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* MLCORE_BUF_H */
