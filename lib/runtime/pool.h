/* pool.h - private: a persistent pthread pool.  The threads are created
 * once and wait between jobs, so a job costs a wake-up, not a
 * pthread_create; decode runs hundreds of small jobs per token. */
#ifndef ML_POOL_H
#define ML_POOL_H

#include "base/internal.h"

typedef struct ml_pool ml_pool;

/* A job: called once per thread with its index ith in [0, nth). */
typedef void (*ml_pool_fn)(void *ctx, unsigned ith, unsigned nth);

/* n_threads >= 1; the calling thread counts as one of them. */
ml_status ml__pool_new(unsigned n_threads, ml_pool **out, ml_error *err);
void ml__pool_free(ml_pool *p);
unsigned ml__pool_size(const ml_pool *p);
/* Runs fn on every thread (the caller is thread 0) and returns when all
 * are done.  Not reentrant: one job at a time per pool. */
void ml__pool_run(ml_pool *p, ml_pool_fn fn, void *ctx);

/* Splits [0, n) into nth nearly equal parts aligned to `align`; part ith
 * is [*b, *e). */
void ml__pool_split(size_t n, size_t align, unsigned ith, unsigned nth, size_t *b, size_t *e);

#endif
