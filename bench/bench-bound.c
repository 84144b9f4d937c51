/* bench-bound.c - decode speed against the memory-bandwidth bound, with
 * the bound measured next to each token.  The read bandwidth of a shared
 * machine can move by half within seconds, so a
 * bandwidth taken before or after a run of a few seconds says little about
 * the run.  This program alternates, in one process: read once the bytes
 * a token reads (the model's own mapping: every tensor but the embedding,
 * which decode reads one row of, unless it is also the classifier) with T
 * threads summing their share, then decode one token with T threads.  So
 * every token has a bound measured within milliseconds of it, on the same
 * pages.
 *
 *   bench-bound MODEL.mlb [-t THREADS] [-n TOKENS] [-g GEN] [-r PASSES]
 *
 * Decodes TOKENS tokens (default 256) in sequences of GEN (default 128,
 * llama-bench's tg128: positions 0..GEN-1, then the context starts over).
 * Prints one line of "key value" pairs:
 *   tokens_per_s      decode speed (tokens / total decode time)
 *   read_gb_per_s     read bandwidth (bytes / total read time)
 *   bound_tokens_per_s read bandwidth / bytes per token
 *   ratio             total read time / total decode time = speed / bound
 *   ratio_median      the median of the per-token ratios
 *   read_best_gb_per_s, ratio_best_read: against the fastest single read
 *   read_with         the loads used (avx512, avx2 or words)
 * With -r, no decode: PASSES reads back to back, and "read_gb_per_s" (all
 * of them) and "read_best_gb_per_s", to set against bandwidth.c's figure.
 * Built and run by bench/bench-run.sh; by hand, after make:
 *   cc -O2 -Iinclude bench/bench-bound.c build/libmlcore.a -lutf8proc \
 *      -ldeflate -lz -lm -lpthread -o bench-bound */
#define _POSIX_C_SOURCE 200809L
#include <mlcore.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fastread.h"

#define MAX_THREADS 64

typedef struct span {
    const uint8_t *p;
    size_t n;
} span;

/* The bytes one decode step reads, as at most two spans of the mapping
 * (before and after the embedding). */
typedef struct reader {
    span part[2];
    size_t total;
    unsigned n_threads;
} reader;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Sums bytes [b, e) of the two spans, as if they were one. */
static uint64_t sum_range(const reader *r, size_t b, size_t e)
{
    uint64_t s = 0;
    for (int k = 0; k < 2; k++) {
        const span *sp = &r->part[k];
        size_t lo = b > sp->n ? sp->n : b, hi = e > sp->n ? sp->n : e;
        s += sum_bytes(sp->p + lo, hi - lo);
        b = b > sp->n ? b - sp->n : 0;
        e = e > sp->n ? e - sp->n : 0;
    }
    return s;
}

/* One pass: every thread (the caller too) takes the next chunk until
 * none is left. */
typedef struct pass {
    const reader *r;
    _Atomic size_t next;
} pass;

static uint64_t take_chunks(pass *ps)
{
    uint64_t s = 0;
    for (;;) {
        size_t b = atomic_fetch_add(&ps->next, CHUNK);
        if (b >= ps->r->total)
            return s;
        size_t e = b + CHUNK < ps->r->total ? b + CHUNK : ps->r->total;
        s += sum_range(ps->r, b, e);
    }
}

typedef struct share {
    pass *ps;
    uint64_t sum;
} share;

static void *read_share(void *arg)
{
    share *s = arg;
    s->sum = take_chunks(s->ps);
    return NULL;
}

static volatile uint64_t sink;

/* One timed pass over the bytes, with the caller and n_threads - 1 more
 * threads (created for the pass, so none spins while decode runs). */
static double read_pass(const reader *r)
{
    pthread_t th[MAX_THREADS];
    share sh[MAX_THREADS];
    pass ps = {.r = r};
    atomic_init(&ps.next, 0);
    double t0 = now();
    for (unsigned i = 1; i < r->n_threads; i++) {
        sh[i] = (share){&ps, 0};
        pthread_create(&th[i], NULL, read_share, &sh[i]);
    }
    uint64_t s = take_chunks(&ps);
    for (unsigned i = 1; i < r->n_threads; i++) {
        pthread_join(th[i], NULL);
        s += sh[i].sum;
    }
    double dt = now() - t0;
    sink += s;
    return dt;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The embedding's quants and scales are one span of the body (mlb(5)). */
static void setup_reader(const ml_mlb *f, unsigned n_threads, reader *r)
{
    const uint8_t *base = ml_mlb_file_data(f);
    uint64_t size = ml_mlb_file_size(f);
    const ml_tensor *e = ml_mlb_get(f, ML_R_TOK_EMB, -1);
    uint64_t lo = e->offset, hi = e->scale_offset + e->scale_nbytes;
    if (e->scale_offset < e->offset)
        lo = e->scale_offset, hi = e->offset + e->nbytes;
    if (ml_mlb_get_header(f)->shared_classifier)
        lo = hi = 0;
    r->part[0] = (span){base, (size_t)lo};
    r->part[1] = (span){base + hi, (size_t)(size - hi)};
    r->total = r->part[0].n + r->part[1].n;
    r->n_threads = n_threads;
}

/* -r: the read alone, after one pass that faults the pages in. */
static int read_alone(const reader *r, unsigned passes)
{
    double total = 0, best = 1e9;
    read_pass(r);
    for (unsigned i = 0; i < passes; i++) {
        double t = read_pass(r);
        total += t, best = t < best ? t : best;
    }
    double gb = (double)r->total / 1e9;
    printf("threads %u bytes_per_token %zu read_gb_per_s %.2f read_best_gb_per_s %.2f read_with %s\n",
           r->n_threads, r->total, gb * passes / total, gb / best, sum_name());
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: bench-bound MODEL.mlb [-t THREADS] [-n TOKENS] [-g GEN] [-r PASSES]\n");
    return 2;
}

int main(int argc, char **argv)
{
    unsigned n_threads = 2, n_tok = 256, gen = 128, read_only = 0;
    if (argc < 2)
        return usage();
    for (int i = 2; i + 1 < argc; i += 2) {
        unsigned v = (unsigned)atoi(argv[i + 1]);
        if (strcmp(argv[i], "-t") == 0 && v >= 1 && v <= MAX_THREADS)
            n_threads = v;
        else if (strcmp(argv[i], "-n") == 0 && v >= 1)
            n_tok = v;
        else if (strcmp(argv[i], "-g") == 0 && v >= 1)
            gen = v;
        else if (strcmp(argv[i], "-r") == 0 && v >= 1)
            read_only = v;
        else
            return usage();
    }
    ml_error err;
    ml_mlb *f;
    ml_model *m;
    ml_ctx *c;
    ml_ctx_params p = {.n_ctx = gen + 1, .n_batch = 0, .n_threads = n_threads};
    if (ml_mlb_open(argv[1], &f, &err) || ml_model_new(f, &m, &err) ||
        ml_ctx_new(m, &p, &c, &err)) {
        fprintf(stderr, "bench-bound: %s: %s\n", argv[1], err.msg);
        return 1;
    }
    reader r;
    setup_reader(f, n_threads, &r);
    choose_sum();
    if (read_only)
        return read_alone(&r, read_only);
    float *logits = malloc(sizeof(float) * ml_model_header(m)->vocab);
    double *ratio = malloc(sizeof(double) * n_tok);
    if (!logits || !ratio)
        return 3;
    /* Warm-up: fault the mapping in, start the pool. */
    read_pass(&r);
    ml_token tok = 1;
    ml_ctx_eval(c, &tok, 1, logits, 0, &err);
    ml_ctx_reset(c);
    double t_read = 0, t_tok = 0, best_read = 1e9;
    const struct timespec settle = {0, 3 * 1000 * 1000}; /* the pool's spinning ends */
    for (unsigned i = 0; i < n_tok; i++) {
        if (ml_ctx_pos(c) >= gen)
            ml_ctx_reset(c);
        nanosleep(&settle, NULL);
        double tr = read_pass(&r);
        double t0 = now();
        if (ml_ctx_eval(c, &tok, 1, logits, 0, &err)) {
            fprintf(stderr, "bench-bound: %s\n", err.msg);
            return 1;
        }
        double tt = now() - t0;
        tok = (tok * 7919u + 13u) % 30000u + 3u;
        t_read += tr, t_tok += tt, ratio[i] = tr / tt;
        best_read = tr < best_read ? tr : best_read;
    }
    qsort(ratio, n_tok, sizeof *ratio, cmp_double);
    double gb = (double)r.total / 1e9;
    printf("threads %u tokens %u bytes_per_token %zu tokens_per_s %.2f read_gb_per_s %.2f "
           "bound_tokens_per_s %.2f ratio %.3f ratio_median %.3f read_best_gb_per_s %.2f "
           "ratio_best_read %.3f read_with %s\n",
           n_threads, n_tok, r.total, n_tok / t_tok, gb * n_tok / t_read, n_tok / t_read,
           t_read / t_tok, ratio[n_tok / 2], gb / best_read, best_read * n_tok / t_tok, sum_name());
    free(ratio);
    free(logits);
    ml_ctx_free(c);
    ml_model_free(m);
    ml_mlb_close(f);
    return 0;
}
