/* marks.h - finding a marker (<think>, <tool_call>, <|channel|>, ...) in
 * text that arrives in pieces: where it starts, and how much of the end
 * may still become one and must be held back.  Shared by think.c and
 * tool_split.c. */
#ifndef ML_SERVE_MARKS_H
#define ML_SERVE_MARKS_H

#include <stddef.h>
#include <string.h>

/* Where tag first starts in h[from..n), or n. */
static inline size_t srv_mark_find(const char *h, size_t n, size_t from, const char *tag)
{
    size_t m = strlen(tag);
    for (size_t i = from; i + m <= n; i++)
        if (memcmp(h + i, tag, m) == 0)
            return i;
    return n;
}

/* The length of the longest end of h[0..n) that begins tag. */
static inline size_t srv_mark_partial(const char *h, size_t n, const char *tag)
{
    size_t k = strlen(tag) - 1;
    for (k = k < n ? k : n; k > 0; k--)
        if (memcmp(h + n - k, tag, k) == 0)
            return k;
    return 0;
}

#endif
