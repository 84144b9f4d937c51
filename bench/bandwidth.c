/* bandwidth.c - this machine's memory read bandwidth with 1 and N threads:
 * each thread sums its share of a 1 GiB array of uint64 (far larger than
 * any cache), best of 5.  Decode speed is bounded by bandwidth / bytes of
 * weights read per token.  Prints "threads GB/s" lines.
 *     cc -O2 -pthread bench/bandwidth.c -o bandwidth && ./bandwidth 2 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BYTES (1ull << 30)

static uint64_t *buf;
static size_t per;
static volatile uint64_t sink;

static void *reader(void *arg)
{
    const uint64_t *p = buf + (size_t)(uintptr_t)arg * per;
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i + 4 <= per; i += 4)
        a += p[i], b += p[i + 1], c += p[i + 2], d += p[i + 3];
    sink += a + b + c + d;
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
    size_t n = BYTES / 8;
    buf = malloc(BYTES);
    if (!buf)
        return 1;
    for (size_t i = 0; i < n; i++)
        buf[i] = i;
    for (int t = 1; t <= max; t *= 2) {
        pthread_t th[64];
        double best = 1e9;
        per = n / (size_t)t;
        for (int r = 0; r < 5; r++) {
            double t0 = now();
            for (int k = 0; k < t; k++)
                pthread_create(&th[k], NULL, reader, (void *)(uintptr_t)k);
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
