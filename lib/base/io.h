/* io.h - private: input files as one read-only byte range. */
#ifndef ML_IO_H
#define ML_IO_H

#include "base/internal.h"

typedef struct ml__input {
    const uint8_t *data; /* mapping or owned buffer, 64-byte aligned */
    size_t size;
    int mapped;          /* munmap on close */
    void *owned;         /* free on close */
} ml__input;

/* Maps a regular file read-only; reads a pipe ("-" is stdin) whole. */
ml_status ml__input_open(const char *path, ml__input *in, ml_error *err);
void ml__input_close(ml__input *in);

#endif
