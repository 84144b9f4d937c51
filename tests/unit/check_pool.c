/* check_pool.c - the runtime's thread pool (lib/runtime/pool.c): every
 * thread index runs exactly once per job and the job is complete when
 * ml__pool_run returns, over thousands of jobs, with workers that find the
 * next job while spinning and workers that must be woken from sleep; the
 * caller is thread 0; ml__pool_split covers [0, n) exactly with aligned,
 * nearly equal parts; kernel results do not depend on the thread count;
 * bad thread counts are refused. */
#include "suites.h"
#include "testutil.h"

#include "kernels/kernels.h"
#include "runtime/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#define MAX_T 8

static void nap(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

/* ---- every index once per job ---- */

typedef struct count_job {
    atomic_uint runs[MAX_T];   /* per index, over all jobs */
    atomic_uint mask;          /* indices seen in the current job */
    atomic_uint bad_nth;       /* calls with the wrong nth */
    atomic_uint off_caller;    /* index 0 not on the caller's thread */
    pthread_t caller;
    unsigned nth;
    unsigned slow;             /* index that naps during the job, or MAX_T */
    unsigned plain[MAX_T];     /* written without atomics, read after run */
} count_job;

static void count_fn(void *ctx, unsigned ith, unsigned nth)
{
    count_job *j = ctx;
    if (nth != j->nth || ith >= MAX_T) {
        atomic_fetch_add(&j->bad_nth, 1);
        return;
    }
    if (ith == 0 && !pthread_equal(pthread_self(), j->caller))
        atomic_fetch_add(&j->off_caller, 1);
    if (ith == j->slow)
        nap(200000);
    atomic_fetch_add(&j->runs[ith], 1);
    atomic_fetch_or(&j->mask, 1u << ith);
    j->plain[ith]++;
}

/* n_jobs jobs on nth threads; `gap_every`: sleep 2 ms before every
 * gap_every-th job so that the workers go to sleep and must be woken;
 * `slow_every`: one index naps in every slow_every-th job so that the
 * caller goes to sleep waiting. */
static void run_counts(unsigned nth, unsigned n_jobs, unsigned gap_every, unsigned slow_every)
{
    ml_pool *p = NULL;
    ml_error err;
    ck_assert_int_eq(ml__pool_new(nth, &p, &err), ML_OK);
    ck_assert_uint_eq(ml__pool_size(p), nth);
    count_job *j = calloc(1, sizeof *j);
    ck_assert_ptr_nonnull(j);
    j->caller = pthread_self();
    j->nth = nth;
    for (unsigned k = 0; k < n_jobs; k++) {
        if (gap_every && k % gap_every == gap_every - 1)
            nap(2000000);
        j->slow = slow_every && k % slow_every == 0 ? k / slow_every % nth : MAX_T;
        atomic_store(&j->mask, 0);
        ml__pool_run(p, count_fn, j);
        TU_REQUIRE(atomic_load(&j->mask) == (1u << nth) - 1, "%u threads, job %u: indices 0x%x ran",
                   nth, k, atomic_load(&j->mask));
        for (unsigned i = 0; i < nth; i++) {
            TU_REQUIRE(atomic_load(&j->runs[i]) == k + 1,
                       "%u threads, job %u: index %u ran %u times", nth, k, i,
                       atomic_load(&j->runs[i]));
            TU_REQUIRE(j->plain[i] == k + 1, "%u threads, job %u: index %u's write not seen", nth,
                       k, i);
        }
    }
    ck_assert_uint_eq(atomic_load(&j->bad_nth), 0);
    ck_assert_uint_eq(atomic_load(&j->off_caller), 0);
    for (unsigned i = nth; i < MAX_T; i++)
        ck_assert_uint_eq(atomic_load(&j->runs[i]), 0);
    free(j);
    ml__pool_free(p);
}

START_TEST(each_index_once_back_to_back)
{
    for (unsigned nth = 1; nth <= MAX_T; nth++)
        run_counts(nth, 3000, 0, 0);
}
END_TEST

START_TEST(each_index_once_after_sleep)
{
    /* Gaps make the workers sleep; slow shares make the caller sleep. */
    for (unsigned nth = 1; nth <= MAX_T; nth++)
        run_counts(nth, 60, 3, 2);
}
END_TEST

/* Each worker is a thread of its own, distinct from the caller's. */
typedef struct ident_job {
    pthread_t self[MAX_T];
} ident_job;

static void ident_fn(void *ctx, unsigned ith, unsigned nth)
{
    (void)nth;
    ((ident_job *)ctx)->self[ith] = pthread_self();
}

START_TEST(distinct_threads)
{
    ml_pool *p = NULL;
    ck_assert_int_eq(ml__pool_new(MAX_T, &p, NULL), ML_OK);
    ident_job j;
    ml__pool_run(p, ident_fn, &j);
    ck_assert(pthread_equal(j.self[0], pthread_self()));
    for (unsigned a = 0; a < MAX_T; a++)
        for (unsigned b = a + 1; b < MAX_T; b++)
            ck_assert_msg(!pthread_equal(j.self[a], j.self[b]), "indices %u and %u share a thread",
                          a, b);
    ml__pool_free(p);
}
END_TEST

START_TEST(create_and_free)
{
    /* Freed at once, and freed while the workers are still spinning. */
    for (unsigned k = 0; k < 40; k++) {
        ml_pool *p = NULL;
        ck_assert_int_eq(ml__pool_new(1 + k % MAX_T, &p, NULL), ML_OK);
        if (k & 1) {
            count_job *j = calloc(1, sizeof *j);
            ck_assert_ptr_nonnull(j);
            j->caller = pthread_self();
            j->nth = 1 + k % MAX_T;
            j->slow = MAX_T;
            ml__pool_run(p, count_fn, j);
            free(j);
        }
        ml__pool_free(p);
    }
    ml__pool_free(NULL);
}
END_TEST

START_TEST(bad_thread_counts)
{
    ml_pool *p = (ml_pool *)&p;
    ml_error err;
    tu_err_reset(&err);
    TU_CHECK_ERR("0 threads", ml__pool_new(0, &p, &err), err, ML_E_INVAL, "n_threads", -1);
    ck_assert_ptr_null(p);
    tu_err_reset(&err);
    TU_CHECK_ERR("1025 threads", ml__pool_new(1025, &p, &err), err, ML_E_INVAL, "n_threads", -1);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(ml__pool_new(0, &p, NULL), ML_E_INVAL);
}
END_TEST

/* ---- split ---- */

/* The parts of [0, n) for nth threads: contiguous, covering, aligned,
 * each within one unit of align of the others. */
static void check_split(size_t n, size_t align, unsigned nth)
{
    const size_t a = align ? align : 1;
    const size_t units = n / a + (n % a != 0);
    const size_t lo = units / nth, hi = lo + (units % nth != 0);
    size_t prev = 0;
    for (unsigned i = 0; i < nth; i++) {
        size_t b, e;
        ml__pool_split(n, align, i, nth, &b, &e);
        TU_REQUIRE(b == prev && b <= e && e <= n,
                   "n %zu align %zu nth %u part %u: [%zu, %zu) after %zu", n, align, nth, i, b, e,
                   prev);
        TU_REQUIRE(b % a == 0 || b == n, "n %zu align %zu nth %u part %u: start %zu unaligned", n,
                   align, nth, i, b);
        /* In units (len / a rounded up), which cannot overflow. */
        const size_t len = e - b, ulen = len / a + (len % a != 0);
        TU_REQUIRE(ulen <= hi, "n %zu align %zu nth %u part %u: %zu units, at most %zu", n, align,
                   nth, i, ulen, hi);
        TU_REQUIRE(e == n || (len % a == 0 && ulen >= lo),
                   "n %zu align %zu nth %u part %u: %zu elements, at least %zu units", n, align,
                   nth, i, len, lo);
        prev = e;
    }
    TU_REQUIRE(prev == n, "n %zu align %zu nth %u: parts end at %zu", n, align, nth, prev);
    size_t b = 1, e = 2;
    ml__pool_split(n, align, nth, nth, &b, &e);
    TU_REQUIRE(b == n && e == n, "n %zu: part nth not empty", n);
}

START_TEST(split_covers)
{
    static const size_t aligns[] = {0, 1, 2, 3, 8, 32, 64, 100};
    for (size_t n = 0; n <= 300; n++)
        for (size_t k = 0; k < sizeof aligns / sizeof aligns[0]; k++)
            for (unsigned nth = 1; nth <= 9; nth++)
                check_split(n, aligns[k], nth);
    /* Sizes where a naive i * n / nth would overflow. */
    static const size_t big[] = {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX / 3, SIZE_MAX / 7 * 5};
    for (size_t k = 0; k < 4; k++)
        for (unsigned nth = 1; nth <= 9; nth++) {
            check_split(big[k], 1, nth);
            check_split(big[k], 64, nth);
        }
    check_split(SIZE_MAX, 7, 1000);
}
END_TEST

START_TEST(split_examples)
{
    size_t b, e;
    /* 100 rows in units of 8 (13 units) over 3: 4, 4, 5 units. */
    ml__pool_split(100, 8, 0, 3, &b, &e);
    ck_assert_uint_eq(b, 0);
    ck_assert_uint_eq(e, 32);
    ml__pool_split(100, 8, 1, 3, &b, &e);
    ck_assert_uint_eq(b, 32);
    ck_assert_uint_eq(e, 64);
    ml__pool_split(100, 8, 2, 3, &b, &e);
    ck_assert_uint_eq(b, 64);
    ck_assert_uint_eq(e, 100);
    /* Fewer units than threads: some parts are empty. */
    ml__pool_split(10, 8, 0, 4, &b, &e);
    ck_assert_uint_eq(e - b, 0);
    ml__pool_split(10, 8, 3, 4, &b, &e);
    ck_assert_uint_eq(b, 8);
    ck_assert_uint_eq(e, 10);
}
END_TEST

/* ---- kernels on the pool: the thread count changes nothing ---- */

typedef struct mv_job {
    const ml_kernels *k;
    int q4;
    const void *wq;
    const float *wd;
    size_t rows, cols, n_tok;
    const int8_t *xq;
    const float *xd;
    float *y;
} mv_job;

static void mv_fn(void *ctx, unsigned ith, unsigned nth)
{
    const mv_job *j = ctx;
    size_t b, e;
    ml__pool_split(j->rows, 8, ith, nth, &b, &e);
    if (j->q4)
        j->k->matmul_q4_0(j->wq, (ml_wscales){j->wd, 0}, j->cols, b, e, j->xq, j->xd, j->n_tok, j->y, j->rows);
    else
        j->k->matmul_q8_0(j->wq, (ml_wscales){j->wd, 0}, j->cols, b, e, j->xq, j->xd, j->n_tok, j->y, j->rows);
}

START_TEST(kernels_thread_independent)
{
    const ml_kernels *ks[8];
    const size_t nk = ml__kernels_available(ks, 8);
    const size_t rows = 203, cols = 544, n_tok = 6;
    tu_rng r = {41};
    int8_t *wq = malloc(rows * cols), *xq = malloc(n_tok * cols);
    float *wd = malloc(rows * cols / 32 * sizeof(float)),
          *xd = malloc(n_tok * cols / 32 * sizeof(float));
    float *y1 = malloc(n_tok * rows * sizeof(float)), *yn = malloc(n_tok * rows * sizeof(float));
    ck_assert(wq && xq && wd && xd && y1 && yn);
    for (size_t i = 0; i < rows * cols; i++)
        wq[i] = (int8_t)((int)tu_below(&r, 255) - 127);
    for (size_t i = 0; i < n_tok * cols; i++)
        xq[i] = (int8_t)((int)tu_below(&r, 255) - 127);
    for (size_t i = 0; i < rows * cols / 32; i++)
        wd[i] = (float)tu_below(&r, 1000) * 1e-4f - 0.05f;
    for (size_t i = 0; i < n_tok * cols / 32; i++)
        xd[i] = (float)tu_below(&r, 1000) * 1e-3f;
    for (size_t k = 0; k < nk; k++)
        for (int q4 = 0; q4 < 2; q4++)
            for (size_t nt = 1; nt <= n_tok; nt += n_tok - 1) {
                mv_job j = {ks[k], q4, wq, wd, rows, cols, nt, xq, xd, y1};
                for (unsigned nth = 1; nth <= MAX_T; nth++) {
                    ml_pool *p = NULL;
                    ck_assert_int_eq(ml__pool_new(nth, &p, NULL), ML_OK);
                    j.y = nth == 1 ? y1 : yn;
                    memset(j.y, 0xff, n_tok * rows * sizeof(float));
                    ml__pool_run(p, mv_fn, &j);
                    ml__pool_free(p);
                    ck_assert_msg(memcmp(y1, j.y, nt * rows * sizeof(float)) == 0,
                                  "%s %s, %zu tokens: %u threads differ from 1", ks[k]->name,
                                  q4 ? "Q4_0" : "Q8_0", nt, nth);
                }
            }
    free(wq);
    free(xq);
    free(wd);
    free(xd);
    free(y1);
    free(yn);
}
END_TEST

Suite *suite_pool(void)
{
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("jobs");
    tcase_add_test(tc, each_index_once_back_to_back);
    tcase_add_test(tc, each_index_once_after_sleep);
    tcase_add_test(tc, distinct_threads);
    tcase_add_test(tc, create_and_free);
    tcase_add_test(tc, bad_thread_counts);
    suite_add_tcase(s, tc);

    tc = tcase_create("split");
    tcase_add_test(tc, split_covers);
    tcase_add_test(tc, split_examples);
    suite_add_tcase(s, tc);

    tc = tcase_create("kernels");
    tcase_add_test(tc, kernels_thread_independent);
    suite_add_tcase(s, tc);
    return s;
}
