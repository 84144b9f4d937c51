/* bench-kquant.c - the ggml block quantizers' speed (ml_quantize_row_blocks):
 * 64 rows of 4096 uniform values in [-1, 1), no importances, each type
 * three times on one thread; prints the best, in millions of values per
 * CPU second (CPU time: on a shared machine wall-clock time says more
 * about the neighbours).  The figures in docs/quant-decisions.md ("ggml
 * block types", "Speed").  By hand, after make:
 *   cc -O2 -Iinclude bench/bench-kquant.c build/libmlcore.a -lutf8proc \
 *      -ldeflate -lz -lm -lpthread -o bench-kquant && ./bench-kquant */
#define _POSIX_C_SOURCE 200809L
#include <mlcore.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(void)
{
    enum { ROWS = 64, N = 4096 };
    static const ml_type types[] = {ML_TYPE_Q4_K,   ML_TYPE_Q5_K,   ML_TYPE_Q6_K, ML_TYPE_IQ4_XS,
                                    ML_TYPE_Q5_0,   ML_TYPE_IQ4_NL, ML_TYPE_Q5_1};
    float *x = malloc(sizeof(float) * ROWS * N);
    uint8_t *out = malloc((size_t)ROWS * N); /* more than any of these types needs */
    if (!x || !out)
        return 1;
    uint64_t s = 12345;
    for (int i = 0; i < ROWS * N; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        double best = 1e30;
        for (int rep = 0; rep < 3; rep++) {
            struct timespec a, b;
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
            for (int r = 0; r < ROWS; r++)
                if (ml_quantize_row_blocks(types[t], x + (size_t)r * N, N, NULL, out, NULL) !=
                    ML_OK)
                    return 1;
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
            double d = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
            if (d < best)
                best = d;
        }
        printf("%-7s %.2f M values/s\n", ml_type_name(types[t]), ROWS * N / best / 1e6);
    }
    free(x);
    free(out);
    return 0;
}
