/* bench-kernels.c - speed of the compute kernels, per variant, next to the
 * machine's memory bandwidth: matvec (decode) as ns per row and GB/s of
 * weights read, with the weights in cache ("hot": one matrix over and
 * over) and in memory ("cold": a ring of copies larger than any cache,
 * which is what decoding a model does), and the ratio of the cold numbers
 * to the measured read bandwidth; matmul for 2, 4 and 8 tokens cold
 * (several sequences decoding together: "4c") and for 64 and 512 hot
 * (prefill) as ns per row and token and Gop/s; 1 and 2 threads through the
 * runtime's pool; and the pool's wake-up latency.
 *
 * Build and run without make, from the repository root after `make`:
 *     bash bench/bench-kernels.sh [-s SECONDS] [-r mean|best] [-m ROWSxCOLS]... [-t TYPES] \
 *          [VARIANT...]
 * which is
 *     cc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -Iinclude -Ilib \
 *        bench/bench-kernels.c build/libmlcore.a -ldeflate -lz -lm -lpthread
 * (MLCORE_BUILD=DIR uses DIR/libmlcore.a).  VARIANT: scalar, avx2,
 * avx512vnni-lanes, avx512vnni, amx (default: every one this CPU runs; a
 * table's product is timed once where it is a later table's code, so
 * avx512vnni-lanes shows only its matmul_blk rows).  -s: seconds per
 * measurement (default 0.3).  -m: a matrix shape instead of the default
 * TinyLlama ones (2048x2048, 5632x2048); a small one (say 64x4096, 128
 * KiB of Q4_0) stays in L2 and measures the kernel's arithmetic alone.
 * -r best: each figure from the fastest single product instead of the mean
 * (on a shared machine the neighbours' noise is one-sided).
 * -t: the weight types, comma-separated (default q8_0,q4_0): also the
 * block types the files users download hold, q4_k, q5_k, q6_k, iq4_xs
 * (their random bytes with finite f16 scales; K activations, one scale
 * per 256, as the runtime gives them), and the 32-element ones q4_1,
 * q5_0, q5_1, iq4_nl, mxfp4 (gpt-oss's experts; Q8_0 activations),
 * through the table's matvec_blk and matmul_blk (the rearranging of the
 * activations included). */
#include "kernels/kernels.h"
#include "runtime/pool.h"

#include "fastread.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *xalloc(size_t n)
{
    void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
    if (!p) {
        fprintf(stderr, "bench-kernels: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

static uint64_t rng_state = 0x12345678;
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double seconds = 0.3;
static int report_best; /* -r best: the fastest product, not the mean */

/* ---- memory bandwidth ---- */

/* Bytes that no cache holds: 4 times the last-level cache, at least 512
 * MiB.  A fixed 256 MiB ring fitted mostly in the L3 of a CPU with a
 * large one, where "cold" matvecs then read faster than decode could. */
static size_t cold_bytes(void)
{
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    size_t n = l3 > 0 ? (size_t)l3 * 4 : 0;
    return n > ((size_t)512 << 20) ? n : (size_t)512 << 20;
}

/* The threads read CHUNK pieces from a shared counter with fastread.h's
 * loads, as bench/bandwidth.c does: the same best read. */
typedef struct bw_job {
    const uint8_t *p;
    size_t n;
    atomic_size_t next;
    uint64_t sum[64];
} bw_job;

static void bw_fn(void *ctx, unsigned ith, unsigned nth)
{
    (void)nth;
    bw_job *j = ctx;
    uint64_t s = 0;
    for (size_t b; (b = atomic_fetch_add(&j->next, CHUNK)) < j->n;)
        s += sum_bytes(j->p + b, j->n - b < CHUNK ? j->n - b : CHUNK);
    j->sum[ith % 64] = s;
}

/* Best of 5 passes over cold_bytes(), in GB/s. */
static double read_bandwidth(ml_pool *pool)
{
    static uint8_t *buf;
    static size_t n;
    if (!buf) {
        n = cold_bytes();
        buf = xalloc(n);
        for (size_t i = 0; i < n; i++)
            buf[i] = (uint8_t)i;
        choose_sum();
    }
    bw_job j = {buf, n, 0, {0}};
    double best = 1e9;
    for (int r = 0; r < 5; r++) {
        atomic_store(&j.next, 0);
        double t = now();
        ml__pool_run(pool, bw_fn, &j);
        t = now() - t;
        if (t < best)
            best = t;
    }
    return (double)n / best / 1e9;
}

/* ---- pool latency ---- */

static void nop_fn(void *ctx, unsigned ith, unsigned nth)
{
    (void)ctx;
    (void)ith;
    (void)nth;
}

static void pool_latency(ml_pool *pool)
{
    const int n = 20000;
    double t = now();
    for (int i = 0; i < n; i++)
        ml__pool_run(pool, nop_fn, NULL);
    const double spin = (now() - t) / n;
    double asleep = 0;
    for (int i = 0; i < 50; i++) {
        struct timespec gap = {0, 5000000};
        nanosleep(&gap, NULL);
        t = now();
        ml__pool_run(pool, nop_fn, NULL);
        asleep += now() - t;
    }
    printf("pool, %u threads: an empty job takes %.2f us back to back (workers spinning), "
           "%.1f us after 5 ms idle (workers asleep)\n",
           ml__pool_size(pool), spin * 1e6, asleep / 50 * 1e6);
}

/* ---- matrices ---- */

typedef struct matrix {
    ml_type type;        /* ML_TYPE_Q8_0, ML_TYPE_Q4_0 or a block type */
    size_t rows, cols;
    size_t copies;       /* the ring of copies for cold runs */
    uint8_t **q;         /* quants of each copy */
    uint16_t **d;        /* f16 scales of each copy (what gguf2mlb writes) */
} matrix;

/* The types -t names, and where a block type's block (or super-block)
 * keeps its scales (d, and dmin or -1: f16, or MXFP4's one e8m0 byte),
 * which random bytes would make NaN or subnormal at times: slow on some
 * CPUs (MXFP4's random exponents: docs/speed-history.md, section 27),
 * and not what a file holds. */
static const struct {
    const char *name;
    ml_type type;
    int d_at, dmin_at;
} types[] = {
    {"q8_0", ML_TYPE_Q8_0, -1, -1},  {"q4_0", ML_TYPE_Q4_0, -1, -1},
    {"q4_k", ML_TYPE_Q4_K, 0, 2},    {"q5_k", ML_TYPE_Q5_K, 0, 2},
    {"q6_k", ML_TYPE_Q6_K, 208, -1}, {"iq4_xs", ML_TYPE_IQ4_XS, 0, -1},
    {"q4_1", ML_TYPE_Q4_1, 0, 2},    {"q5_0", ML_TYPE_Q5_0, 0, -1},
    {"q5_1", ML_TYPE_Q5_1, 0, 2},    {"iq4_nl", ML_TYPE_IQ4_NL, 0, -1},
    {"mxfp4", ML_TYPE_MXFP4, 0, -1},
};
#define N_TYPES (sizeof types / sizeof types[0])

static int is_blk(ml_type t)
{
    return t != ML_TYPE_Q8_0 && t != ML_TYPE_Q4_0;
}

/* t's entry in types[] (every matrix here has one). */
static size_t type_index(ml_type t)
{
    size_t i = 0;
    while (i + 1 < N_TYPES && types[i].type != t)
        i++;
    return i;
}

static const char *type_name(ml_type t)
{
    return types[type_index(t)].name;
}

/* Bytes of quants (all of a block type's bytes) and of f16 scales. */
static size_t quant_bytes(const matrix *m)
{
    if (is_blk(m->type))
        return m->rows * ml__blk_row_bytes(m->type, m->cols);
    return m->rows * m->cols / (m->type == ML_TYPE_Q4_0 ? 2 : 1);
}

static size_t scale_count(const matrix *m)
{
    return is_blk(m->type) ? 0 : m->rows * m->cols / 32;
}

static size_t weight_bytes(const matrix *m)
{
    return quant_bytes(m) + scale_count(m) * 2;
}

/* Random weights of m's type in m->q[0] and m->d[0]. */
static void matrix_fill(matrix *m)
{
    const size_t qn = quant_bytes(m), dn = scale_count(m);
    for (size_t i = 0; i < qn; i++)
        m->q[0][i] = m->type == ML_TYPE_Q8_0 ? (uint8_t)(int8_t)((int)(rnd() % 255) - 127)
                                             : (uint8_t)rnd();
    for (size_t i = 0; i < dn; i++)
        m->d[0][i] = (uint16_t)(0x1000 + rnd() % 0x1000); /* 2^-11 .. 2^-9 */
    if (!is_blk(m->type))
        return;
    const size_t t = type_index(m->type);
    uint32_t sb = 0;
    ml_type_block(m->type, NULL, &sb, NULL);
    for (size_t b = 0; b < qn / sb; b++) {
        uint8_t *blk = m->q[0] + b * sb;
        const uint16_t d = (uint16_t)(0x1000 + rnd() % 0x1000);
        if (m->type == ML_TYPE_MXFP4) { /* 2^-10 .. 2^-3 */
            blk[types[t].d_at] = (uint8_t)(118 + rnd() % 8);
            continue;
        }
        memcpy(blk + types[t].d_at, &d, 2);
        if (types[t].dmin_at >= 0)
            memcpy(blk + types[t].dmin_at, &d, 2);
    }
}

/* `copies` copies of one random matrix, together at least `min_bytes`. */
static void matrix_new(matrix *m, ml_type type, size_t rows, size_t cols, size_t min_bytes)
{
    m->type = type;
    m->rows = rows;
    m->cols = cols;
    m->copies = min_bytes / weight_bytes(m) + 1;
    m->q = malloc(m->copies * sizeof *m->q);
    m->d = malloc(m->copies * sizeof *m->d);
    const size_t qn = quant_bytes(m), dn = scale_count(m); /* none for a block type */
    for (size_t c = 0; c < m->copies; c++) {
        m->q[c] = xalloc(qn);
        m->d[c] = xalloc((dn ? dn : 1) * sizeof(uint16_t));
        if (c == 0) {
            matrix_fill(m);
        } else {
            memcpy(m->q[c], m->q[0], qn);
            memcpy(m->d[c], m->d[0], dn * sizeof(uint16_t));
        }
    }
}

static void matrix_free(matrix *m)
{
    for (size_t c = 0; c < m->copies; c++) {
        free(m->q[c]);
        free(m->d[c]);
    }
    free(m->q);
    free(m->d);
}

typedef struct acts {
    size_t n_tok;
    int8_t *q;
    float *d;
    float *y;
} acts;

/* n_tok tokens' activations as type t's products take them: Q8_0, or K
 * activations (ml__blk_acts_k). */
static void acts_new(acts *a, const ml_kernels *k, ml_type t, size_t n_tok, size_t cols,
                     size_t rows)
{
    float *x = xalloc(n_tok * cols * sizeof(float));
    for (size_t i = 0; i < n_tok * cols; i++)
        x[i] = (float)((double)(rnd() >> 11) / 9007199254740992.0 * 2 - 1);
    a->n_tok = n_tok;
    a->q = xalloc(n_tok * cols);
    a->d = xalloc(n_tok * cols / 32 * sizeof(float));
    a->y = xalloc(n_tok * rows * sizeof(float));
    if (ml__blk_acts_k(t))
        k->quantize_q8_k(x, n_tok * cols, a->q, a->d);
    else
        k->quantize_q8_0(x, n_tok * cols, a->q, a->d);
    free(x);
}

static void acts_free(acts *a)
{
    free(a->q);
    free(a->d);
    free(a->y);
}

/* One product on the pool, rows split in units of 8 as the runtime does. */
typedef struct mm_job {
    const ml_kernels *k;
    const matrix *m;
    size_t copy;
    const acts *a;
} mm_job;

static void mm_fn(void *ctx, unsigned ith, unsigned nth)
{
    const mm_job *j = ctx;
    const matrix *m = j->m;
    size_t b, e;
    ml__pool_split(m->rows, 8, ith, nth, &b, &e);
    const uint8_t *q = m->q[j->copy];
    const ml_wscales d = {m->d[j->copy], 1};
    const acts *a = j->a;
    if (is_blk(m->type)) {
        if (a->n_tok == 1)
            j->k->matvec_blk(m->type, q, m->cols, b, e, a->q, a->d, a->y);
        else
            j->k->matmul_blk(m->type, q, m->cols, b, e, a->q, a->d, a->n_tok, a->y, m->rows);
    } else if (a->n_tok == 1) {
        if (m->type == ML_TYPE_Q4_0)
            j->k->matvec_q4_0(q, d, m->cols, b, e, a->q, a->d, a->y);
        else
            j->k->matvec_q8_0((const int8_t *)q, d, m->cols, b, e, a->q, a->d, a->y);
    } else {
        if (m->type == ML_TYPE_Q4_0)
            j->k->matmul_q4_0(q, d, m->cols, b, e, a->q, a->d, a->n_tok, a->y, m->rows);
        else
            j->k->matmul_q8_0((const int8_t *)q, d, m->cols, b, e, a->q, a->d, a->n_tok, a->y,
                              m->rows);
    }
}

/* Seconds per product: repeated for `seconds` (at least twice), the
 * copies taken in turn when `cold`. */
static double time_product(ml_pool *pool, const ml_kernels *k, const matrix *m, const acts *a,
                           int cold)
{
    mm_job j = {k, m, 0, a};
    ml__pool_run(pool, mm_fn, &j); /* warm-up */
    size_t n = 0;
    const double t0 = now();
    double t, best = 1e30, last = t0;
    do {
        j.copy = cold ? n % m->copies : 0;
        ml__pool_run(pool, mm_fn, &j);
        n++;
        const double at = now();
        best = at - last < best ? at - last : best;
        last = at;
        t = at - t0;
    } while (t < seconds || n < 2);
    return report_best ? best : t / (double)n;
}

static void header(void)
{
    printf("\n%-16s %-13s %-10s %3s %-5s %10s %9s %9s\n", "variant", "op", "shape", "thr",
           "data", "ns/row", "GB/s", "of bw");
}

static void bench_matvec(ml_pool **pools, const double *bw, const ml_kernels *k, matrix *m)
{
    acts a;
    acts_new(&a, k, m->type, 1, m->cols, m->rows);
    char shape[32];
    snprintf(shape, sizeof shape, "%zux%zu", m->rows, m->cols);
    for (int cold = 0; cold < 2; cold++)
        for (unsigned t = 1; t <= 2; t++) {
            const double s = time_product(pools[t - 1], k, m, &a, cold);
            const double gbs = (double)weight_bytes(m) / s / 1e9;
            printf("%-16s matvec %-6s %-10s %3u %-5s %10.2f %9.2f", k->name,
                   type_name(m->type), shape, t, cold ? "cold" : "hot",
                   s / (double)m->rows * 1e9, gbs);
            if (cold)
                printf(" %8.0f%%", 100 * gbs / bw[t - 1]);
            printf("\n");
        }
    acts_free(&a);
}

/* n_tok tokens; `cold`: the weights from memory (a few sequences
 * decoding together), with the GB/s of weights read. */
static void bench_matmul(ml_pool **pools, const ml_kernels *k, matrix *m, size_t n_tok, int cold)
{
    acts a;
    acts_new(&a, k, m->type, n_tok, m->cols, m->rows);
    char shape[32], data[16];
    snprintf(shape, sizeof shape, "%zux%zu", m->rows, m->cols);
    snprintf(data, sizeof data, "%zu%s", n_tok, cold ? "c" : "");
    for (unsigned t = 1; t <= 2; t++) {
        const double s = time_product(pools[t - 1], k, m, &a, cold);
        printf("%-16s matmul %-6s %-10s %3u %-5s %10.3f %9.1f Gop/s, %.0f tokens/s", k->name,
               type_name(m->type), shape, t, data, s / (double)(m->rows * n_tok) * 1e9,
               2.0 * (double)(m->rows * m->cols * n_tok) / s / 1e9, (double)n_tok / s);
        if (cold)
            printf(", %.1f GB/s", (double)weight_bytes(m) / s / 1e9);
        printf("\n");
    }
    acts_free(&a);
}

static int wanted(const ml_kernels *k, int argc, char **argv, int first)
{
    if (first >= argc)
        return 1;
    for (int i = first; i < argc; i++)
        if (strcmp(argv[i], k->name) == 0)
            return 1;
    return 0;
}

/* The slot that multiplies type t by one token or by many. */
static ml_kslot slot_of(ml_type t, int many)
{
    if (t == ML_TYPE_Q8_0)
        return many ? ML_KS_MATMUL_Q8_0 : ML_KS_MATVEC_Q8_0;
    if (t == ML_TYPE_Q4_0)
        return many ? ML_KS_MATMUL_Q4_0 : ML_KS_MATVEC_Q4_0;
    return many ? ML_KS_MATMUL_BLK : ML_KS_MATVEC_BLK;
}

/* Whether ks[v] is asked for and runs other code for slot s than the
 * tables after it that are (avx512vnni-lanes differs from avx512vnni,
 * listed after it, only in matmul_blk: its other rows would be
 * avx512vnni's code again). */
static int to_time(const ml_kernels *const *ks, size_t v, ml_kslot s, int argc, char **argv,
                   int first)
{
    if (!wanted(ks[v], argc, argv, first))
        return 0;
    for (size_t u = v + 1; ks[u]; u++)
        if (wanted(ks[u], argc, argv, first) && ml__kernels_same(s, ks[u], ks[v]))
            return 0;
    return 1;
}

/* -t's comma-separated names into want[] (indices of types[]); 0 when
 * one is unknown. */
static int parse_types(const char *list, int want[N_TYPES])
{
    memset(want, 0, N_TYPES * sizeof *want);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *name = strtok_r(buf, ",", &save); name;
         name = strtok_r(NULL, ",", &save)) {
        size_t i = 0;
        while (i < N_TYPES && strcmp(types[i].name, name) != 0)
            i++;
        if (i == N_TYPES)
            return 0;
        want[i] = 1;
    }
    return 1;
}

int main(int argc, char **argv)
{
    int first = 1, want[N_TYPES] = {1, 1};
    size_t shapes[8][2] = {{2048, 2048}, {5632, 2048}}, n_shapes = 0;
    while (first + 1 < argc && argv[first][0] == '-') {
        int ok = 1;
        if (strcmp(argv[first], "-s") == 0)
            seconds = atof(argv[first + 1]);
        else if (strcmp(argv[first], "-r") == 0)
            ok = (report_best = strcmp(argv[first + 1], "best") == 0) ||
                 strcmp(argv[first + 1], "mean") == 0;
        else if (strcmp(argv[first], "-t") == 0)
            ok = parse_types(argv[first + 1], want);
        else if (strcmp(argv[first], "-m") == 0 && n_shapes < 8 &&
                 sscanf(argv[first + 1], "%zux%zu", &shapes[n_shapes][0], &shapes[n_shapes][1]) == 2 &&
                 shapes[n_shapes][1] % 32 == 0 && shapes[n_shapes][0] > 0)
            n_shapes++;
        else
            ok = 0;
        if (!ok) {
            fprintf(stderr, "usage: bench-kernels [-s SECONDS] [-r mean|best] [-m ROWSxCOLS]... "
                            "[-t q8_0,q4_0,q4_k,...] [VARIANT...]\n"
                            "(types: q8_0 q4_0 q4_k q5_k q6_k iq4_xs q4_1 q5_0 q5_1 iq4_nl mxfp4)\n");
            return 2;
        }
        first += 2;
    }
    if (n_shapes == 0)
        n_shapes = 2;
    ml_pool *pools[2];
    for (unsigned t = 1; t <= 2; t++)
        if (ml__pool_new(t, &pools[t - 1], NULL) != ML_OK) {
            fprintf(stderr, "bench-kernels: cannot start %u threads\n", t);
            return 1;
        }
    const double bw[2] = {read_bandwidth(pools[0]), read_bandwidth(pools[1])};
    printf("machine: %ld CPUs; memory read bandwidth %.1f GB/s with 1 thread, %.1f GB/s with 2 "
           "(%zu MiB, %s loads, best of 5)\n",
           sysconf(_SC_NPROCESSORS_ONLN), bw[0], bw[1], cold_bytes() >> 20, sum_name());
    pool_latency(pools[1]);
    printf("ml-run's kernels here (ML_KERNELS unset: the chooser's):");
    for (unsigned i = 0; ml_kernels_slot(i); i++)
        printf(" %s=%s", ml_kernels_slot(i), ml_kernels_slot_variant(i));
    printf("\n");

    const ml_kernels *ks[9] = {NULL}; /* a NULL after the last */
    const size_t nk = ml__kernels_available(ks, 8);
    for (size_t ty = 0; ty < N_TYPES; ty++)
        for (size_t s = 0; s < n_shapes && want[ty]; s++) {
            uint32_t elems = 32;
            ml_type_block(types[ty].type, &elems, NULL, NULL);
            if (shapes[s][1] % elems != 0) {
                printf("\n%s: %zu columns are no whole blocks; left out\n", types[ty].name,
                       shapes[s][1]);
                continue;
            }
            matrix m;
            matrix_new(&m, types[ty].type, shapes[s][0], shapes[s][1], cold_bytes());
            header();
            if (is_blk(m.type) && ml__blk_as_q8_0(m.type))
                printf("(%s: from a few tokens on ml-run unpacks its rows to Q8_0, "
                       "blk_to_q8_0, and takes the Q8_0 products; the matmul rows below are "
                       "matmul_blk's own)\n",
                       types[ty].name);
            const ml_kslot one = slot_of(m.type, 0), many = slot_of(m.type, 1);
            for (size_t v = 0; v < nk; v++)
                if (to_time(ks, v, one, argc, argv, first))
                    bench_matvec(pools, bw, ks[v], &m);
            for (size_t n_tok = 2; n_tok <= 8; n_tok *= 2) /* "4c": 4 tokens, cold */
                for (size_t v = 0; v < nk; v++)
                    if (to_time(ks, v, many, argc, argv, first))
                        bench_matmul(pools, ks[v], &m, n_tok, 1);
            for (size_t n_tok = 64; n_tok <= 512; n_tok *= 8)
                for (size_t v = 0; v < nk; v++)
                    if (to_time(ks, v, many, argc, argv, first))
                        bench_matmul(pools, ks[v], &m, n_tok, 0);
            matrix_free(&m);
        }
    ml__pool_free(pools[0]);
    ml__pool_free(pools[1]);
    return 0;
}
