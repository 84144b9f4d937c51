/* bandwidth.c - this machine's memory read bandwidth with 1 and N threads:
 * the threads sum a 1 GiB array (far larger than any cache) in
 * fastread.h's CHUNK pieces taken from a shared counter, with its loads
 * (the widest the CPU has, prefetch ahead: the same read as
 * bench-bound.c's, so neither can be the slower "bound"), best of 5.
 * Decode speed is bounded by bandwidth / bytes of weights read per token.
 * Prints "threads GB/s" lines.  (A plain loop of 64-bit words, which this
 * was, read clearly slower than these loads.)  The array asks for
 * transparent huge pages, as a model's mapped file may get them (ext4's
 * large folios): with 4 KiB pages this could read slower than
 * bench-bound read a model's pages, so its "bound" could be beaten by
 * decode.
 *     cc -O2 -pthread bench/bandwidth.c -o bandwidth && ./bandwidth 2 */
#define _GNU_SOURCE /* MADV_HUGEPAGE */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "fastread.h"

#define BYTES (1ull << 30)

static uint8_t *buf;
static atomic_size_t next;
static volatile uint64_t sink;

static void *reader(void *arg)
{
    (void)arg;
    uint64_t s = 0;
    for (;;) {
        size_t b = atomic_fetch_add(&next, CHUNK);
        if (b >= BYTES)
            break;
        s += sum_bytes(buf + b, BYTES - b < CHUNK ? BYTES - b : CHUNK);
    }
    sink += s;
    return NULL;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    int max = argc > 1 ? atoi(argv[1]) : 2;
    if (max < 1 || max > 64)
        max = 2;
    buf = aligned_alloc(2u << 20, BYTES);
    if (!buf)
        return 1;
#ifdef MADV_HUGEPAGE
    madvise(buf, BYTES, MADV_HUGEPAGE); /* a hint: refused, the pages stay small */
#endif
    for (size_t i = 0; i < BYTES / 8; i++)
        ((uint64_t *)buf)[i] = i;
    choose_sum();
    for (int t = 1; t <= max; t *= 2) {
        pthread_t th[64];
        double best = 1e9;
        for (int r = 0; r < 5; r++) {
            atomic_store(&next, 0);
            double t0 = now();
            for (int k = 0; k < t; k++)
                pthread_create(&th[k], NULL, reader, NULL);
            for (int k = 0; k < t; k++)
                pthread_join(th[k], NULL);
            double dt = now() - t0;
            if (dt < best)
                best = dt;
        }
        printf("%d %.2f\n", t, (double)BYTES / best / 1e9);
        if (t * 2 > max && t != max) {
            t = max / 2; /* also measure max itself when it is not a power of 2 */
        }
    }
    free(buf);
    return 0;
}
