/* pool.c - the runtime's persistent thread pool (pool.h).  The workers are
 * created once; between jobs they spin for a while on a generation counter
 * and then sleep on a condition variable, so a job that follows closely on
 * the last one (decode issues hundreds per token, each a few microseconds
 * to a millisecond) starts without a system call, and an idle pool costs
 * next to no CPU (sleep_on).  The caller runs share 0 itself and then
 * waits for the others the same way: spinning first, sleeping after.
 *
 * Protocol.  A job is published by writing fn and ctx, setting `pending`
 * to the number of workers and incrementing `gen`; a worker that sees gen
 * change runs its share and decrements pending; the last one wakes the
 * caller if it went to sleep.  Sleeping on either side uses the "announce,
 * then re-check" order under the mutex with sequentially consistent
 * atomics, so a wake-up cannot fall between the check and the wait. */
#include "runtime/pool.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* Spin iterations before sleeping: a few milliseconds of pauses.  It
 * must outlast not only the serial work between two jobs but a whole
 * job's share: the caller waits for the workers after its own share, and
 * a matrix-vector product's share of a 1B model takes hundreds of
 * microseconds.  With 2048 rounds the caller fell asleep in every job and
 * paid a futex wake-up each time, which cost decode much of its speed
 * (bench/bench-run.sh; the figures are in docs/speed-history.md).  An
 * empty job's round trip (bench/bench-kernels.c) is far shorter when the
 * workers spin than when they must be woken.  A pool with more
 * threads than the machine has processors does not spin at all: a
 * spinning thread would hold the processor a sleeping one needs to finish
 * its share, and a job would wait for the scheduler's time slice
 * (hundreds of microseconds). */
#define SPIN_ROUNDS (1 << 16)
#define MAX_THREADS 1024

typedef struct worker {
    ml_pool *pool;
    unsigned ith;
    pthread_t thread;
} worker;

struct ml_pool {
    unsigned n;                 /* threads, the caller included */
    int spin;                   /* spin iterations before sleeping */
    worker *workers;            /* thread ith is workers[ith - 1] */
    ml_pool_fn fn;              /* the current job, written before gen moves */
    void *ctx;
    pthread_mutex_t mu;
    pthread_cond_t wake;        /* workers sleep here between jobs */
    pthread_cond_t done;        /* the caller sleeps here for the last worker */
    /* Each hot counter on its own cache line: workers poll gen while
     * others decrement pending. */
    _Alignas(64) atomic_uint gen;      /* one more per job, and at shutdown */
    atomic_int stop;
    atomic_uint sleepers;              /* workers asleep (or about to be) */
    _Alignas(64) atomic_uint pending;  /* workers still on the current job */
    atomic_int caller_asleep;
};

/* Every sleep is a timed wait that re-checks its condition: the protocol
 * above needs a store followed by a load to stay in order (seq_cst), and
 * where an implementation falls short of that a wake-up could be lost and
 * the pool would hang.  Once, under qemu's AArch64 emulation (which may
 * not order a release store before a later acquire load), a pool test
 * hung for a minute; it never happened natively, nor in 49 runs after.
 * With the timeout a lost wake-up costs at most SLEEP_NS, and an idle
 * worker wakes 100 times a second (microseconds of CPU). */
#define SLEEP_NS 10000000L

static void sleep_on(pthread_cond_t *c, pthread_mutex_t *mu)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += SLEEP_NS;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(c, mu, &t);
}

/* ---- workers ---- */

/* Returns the first generation different from `seen`. */
static unsigned wait_for_job(ml_pool *p, unsigned seen)
{
    for (int i = 0; i < p->spin; i++) {
        unsigned g = atomic_load(&p->gen);
        if (g != seen)
            return g;
        cpu_relax();
    }
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->sleepers, 1);
    unsigned g;
    while ((g = atomic_load(&p->gen)) == seen)
        sleep_on(&p->wake, &p->mu);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->mu);
    return g;
}

static void finished_share(ml_pool *p)
{
    if (atomic_fetch_sub(&p->pending, 1) != 1)
        return;
    if (atomic_load(&p->caller_asleep)) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    ml_pool *p = w->pool;
    unsigned seen = 0;
    for (;;) {
        seen = wait_for_job(p, seen);
        if (atomic_load(&p->stop))
            return NULL;
        p->fn(p->ctx, w->ith, p->n);
        finished_share(p);
    }
}

/* ---- the caller's side ---- */

static void wake_workers(ml_pool *p)
{
    if (atomic_load(&p->sleepers) == 0)
        return;
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
}

static void wait_for_workers(ml_pool *p)
{
    for (int i = 0; i < p->spin; i++) {
        if (atomic_load(&p->pending) == 0)
            return;
        cpu_relax();
    }
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->caller_asleep, 1);
    while (atomic_load(&p->pending) != 0)
        sleep_on(&p->done, &p->mu);
    atomic_store(&p->caller_asleep, 0);
    pthread_mutex_unlock(&p->mu);
}

void ml__pool_run(ml_pool *p, ml_pool_fn fn, void *ctx)
{
    if (p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store(&p->pending, p->n - 1);
    atomic_fetch_add(&p->gen, 1);
    wake_workers(p);
    fn(ctx, 0, p->n);
    wait_for_workers(p);
}

/* ---- life cycle ---- */

/* Stops and joins the first `started` workers. */
static void stop_workers(ml_pool *p, unsigned started)
{
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->gen, 1);
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < started; i++)
        pthread_join(p->workers[i].thread, NULL);
}

static void destroy(ml_pool *p)
{
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
    free(p->workers);
    free(p);
}

/* Workers take no signals: a SIGINT or SIGPIPE goes to the thread that
 * runs the program, where the command expects it. */
static ml_status start_workers(ml_pool *p, ml_error *err)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    unsigned started = 0;
    int rc = 0;
    for (; started < p->n - 1; started++) {
        worker *w = &p->workers[started];
        w->pool = p;
        w->ith = started + 1;
        rc = pthread_create(&w->thread, NULL, worker_main, w);
        if (rc)
            break;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!rc)
        return ML_OK;
    stop_workers(p, started);
    return ml__err(err, ML_E_NOMEM, "n_threads", -1, "cannot start thread %u of %u: %s",
                   started + 2, p->n, strerror(rc));
}

ml_status ml__pool_new(unsigned n_threads, ml_pool **out, ml_error *err)
{
    *out = NULL;
    if (n_threads < 1 || n_threads > MAX_THREADS)
        return ml__err(err, ML_E_INVAL, "n_threads", -1, "%u threads: expected 1 to %u",
                       n_threads, MAX_THREADS);
    /* aligned_alloc: the counters' cache-line alignment is above malloc's. */
    ml_pool *p = aligned_alloc(_Alignof(ml_pool), sizeof *p);
    worker *w = calloc(n_threads, sizeof *w);
    if (!p || !w) {
        free(p);
        free(w);
        return ml__err(err, ML_E_NOMEM, "n_threads", -1, "out of memory for %u threads",
                       n_threads);
    }
    memset(p, 0, sizeof *p);
    p->n = n_threads;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    p->spin = cpus > 0 && n_threads > (unsigned long)cpus ? 0 : SPIN_ROUNDS;
    p->workers = w;
    atomic_init(&p->gen, 0);
    atomic_init(&p->stop, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->caller_asleep, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    ml_status s = start_workers(p, err);
    if (s) {
        destroy(p);
        return s;
    }
    *out = p;
    return ML_OK;
}

void ml__pool_free(ml_pool *p)
{
    if (!p)
        return;
    stop_workers(p, p->n - 1);
    destroy(p);
}

unsigned ml__pool_size(const ml_pool *p)
{
    return p->n;
}

/* ---- splitting work ---- */

/* Boundary k of nth parts over `units` units of `align` elements: unit
 * floor(k * units / nth), computed without overflowing. */
static size_t boundary(size_t n, size_t align, size_t units, unsigned k, unsigned nth)
{
    const uint64_t u = (uint64_t)units;
    const uint64_t unit = u / nth * k + u % nth * k / nth;
    return unit >= u ? n : (size_t)unit * align;
}

void ml__pool_split(size_t n, size_t align, unsigned ith, unsigned nth, size_t *b, size_t *e)
{
    if (align == 0)
        align = 1;
    if (nth == 0 || ith >= nth) {
        *b = *e = n;
        return;
    }
    const size_t units = n / align + (n % align != 0);
    *b = boundary(n, align, units, ith, nth);
    *e = boundary(n, align, units, ith + 1, nth);
}
