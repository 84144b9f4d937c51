/* gguf_impl.h - private: between the GGUF reader of one file (gguf.c) and
 * the reading of split models, which opens the other parts and checks
 * their split.* keys (gguf_split.c). */
#ifndef ML_GGUF_IMPL_H
#define ML_GGUF_IMPL_H

#include "base/internal.h"

/* One file, validated, without looking at its split keys. */
ml_status ml__gguf_open_file(const char *path, ml_gguf **out, ml_error *err);
/* Reads g's split keys and, for the first part of a split model, opens and
 * joins the rest (paths[1..n) when n > 1, else found by paths[0]'s name;
 * paths NULL for a buffer).  On failure g is left for the caller to close. */
ml_status ml__gguf_split(ml_gguf *g, const char *const *paths, size_t n, ml_error *err);
/* Hands parts[1..n) (opened, their keys checked) over to the first part g,
 * which owns them from here on even on failure, and lists their tensors
 * after g's: a name in two parts is an error naming both. */
ml_status ml__gguf_join(ml_gguf *g, ml_gguf **parts, size_t n, ml_error *err);
/* Prefixes err's message with "part I of N (PATH): " (i from 0). */
ml_status ml__gguf_part_err(ml_error *err, ml_status s, size_t i, size_t n, const char *path);

#endif
