/* iq4-nearest-check.c - checks, for every one of the 2^32 float bit
 * patterns t, that kquant.c's two ways to the nearest IQ4 level agree:
 * grid_nearest (the cell table and one compare) and IQ4_NEAREST (the
 * count of midpoints below t, vectorized in grid_levels and grid_terms),
 * index and level value.  About a minute on one core:
 *
 *   make && cc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE \
 *       -ffp-contract=off -Iinclude -Ilib tools/iq4-nearest-check.c \
 *       build/libmlcore.a -lutf8proc -ldeflate -lz -lm -lpthread -o /tmp/iq4-check
 *   /tmp/iq4-check        # prints "0 mismatches", exit status 0 */
#include "../lib/quant/kquant.c"

#include <stdio.h>

int main(void)
{
    unsigned long long bad = 0;
    for (unsigned long long u = 0; u < (1ull << 32); u++) {
        uint32_t b = (uint32_t)u;
        float t;
        memcpy(&t, &b, sizeof t);
        int a = grid_nearest(&iq4_grid, t);
        IQ4_NEAREST
        if (k != a || l != iq4_levels[a]) {
            if (bad < 10)
                printf("t = %a (0x%08x): table %d, count %d (level %g)\n", (double)t, b, a, k,
                       (double)l);
            bad++;
        }
    }
    printf("%llu mismatches\n", bad);
    return bad != 0;
}
