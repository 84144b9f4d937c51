/* mlcore/stop.h - stop strings over generated text: text arrives piece by
 * piece as it is decoded; what can no longer become part of a stop string
 * is released at once, a tail that may be the start of one is held back,
 * and the text ends right before the first stop string that appears,
 * which is never released (llama.cpp's --reverse-prompt / the OpenAI
 * API's "stop").  Included by mlcore.h. */
#ifndef MLCORE_STOP_H
#define MLCORE_STOP_H

#include <mlcore/base.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ML_STOP_MAX 64           /* stop strings */
#define ML_STOP_MAX_LEN 4096     /* bytes of one */

typedef struct ml_stop ml_stop;

/* Copies n stop strings (n <= ML_STOP_MAX, each 1 to ML_STOP_MAX_LEN
 * bytes, NUL-terminated); n may be 0 (nothing stops, nothing is held).
 * ML_E_INVAL for an empty or oversized string. */
ML_API ml_status ml_stop_new(const char *const *stops, size_t n, ml_stop **out, ml_error *err);
ML_API void ml_stop_free(ml_stop *s);

/* Adds n bytes of text.  *emit and *emit_len receive the text that can be
 * released now (it points into s and stays valid until the next call).
 * Returns 1 when a stop string is complete: *emit then ends right before
 * it and the text is over (later calls release nothing); else 0.  When
 * several complete in one call, the one that starts first wins (as in
 * llama.cpp's server), then the longest.  ML_E_NOMEM is reported through a return of -1 (nothing is
 * released). */
ML_API int ml_stop_push(ml_stop *s, const char *text, size_t n, const char **emit,
                        size_t *emit_len);
/* The end of the text without a stop string: releases the tail held back. */
ML_API void ml_stop_flush(ml_stop *s, const char **emit, size_t *emit_len);
/* 1 once a stop string was found. */
ML_API int ml_stop_done(const ml_stop *s);
/* Forgets the text (not the stop strings): a new text starts. */
ML_API void ml_stop_reset(ml_stop *s);

#ifdef __cplusplus
}
#endif

#endif
