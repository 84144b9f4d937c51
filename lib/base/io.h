/* io.h - private: input files as one read-only byte range. */
#ifndef ML_IO_H
#define ML_IO_H

#include "base/internal.h"

typedef struct ml__input {
    const uint8_t *data; /* mapping or owned buffer, 64-byte aligned */
    size_t size;
    int mapped;          /* munmap on close */
    void *owned;         /* free on close */
    void *region;        /* or munmap(region, region_size) on close: a file copied */
    size_t region_size;  /* into anonymous memory (ml__input_copy) */
} ml__input;

/* Maps a regular file read-only; reads a pipe ("-" is stdin) whole. */
ml_status ml__input_open(const char *path, ml__input *in, ml_error *err);

/* A mapped file copied into anonymous memory, 2 MiB aligned and offered
 * to the kernel for huge pages (MADV_HUGEPAGE), and unmapped: weights
 * streamed from such memory read faster than from the file's 4 KiB
 * page-cache pages (decode faster on some machines, bench/bench-read.c;
 * docs/speed.md), at the cost of the copy and of pages no other
 * process shares.  Anything not mapped (a pipe's buffer) stays as it is.
 * in->data moves: pointers into it must be rebased. */
ml_status ml__input_copy(ml__input *in, ml_error *err);
void ml__input_close(ml__input *in);

/* Asks the kernel to map the pages of [p, p + n) in now (Linux's
 * MADV_POPULATE_READ, 5.14 on; elsewhere, or when refused, a read-ahead
 * hint), so that a mapped model's first pass does not stop at a page
 * fault every 4 KiB.  Best effort: never fails, and memory that is not
 * a file mapping is left as it is. */
void ml__prefault(const void *p, size_t n);

#endif
