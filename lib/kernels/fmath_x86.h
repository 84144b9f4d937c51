/* fmath_x86.h - private: the 8 x 8 float transpose that fmath_avx2.c's
 * transposed keys and fmath_avx512.c's row norms share.  Static inline,
 * so each file gets a copy built for its own instruction set (both have
 * at least AVX2). */
#ifndef ML_FMATH_X86_H
#define ML_FMATH_X86_H

#include <immintrin.h>

/* r[k] = row k's eight floats in; r[e] = element e of the eight rows out. */
static inline __attribute__((always_inline)) void ml__transpose8(__m256 r[8])
{
    __m256 t[8];
    _Pragma("GCC unroll 8")
    for (int k = 0; k < 8; k += 2) {
        t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
        t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
    }
    /* t[2k], t[2k+1]: elements {0,1 | 4,5}, {2,3 | 6,7} of rows 2k, 2k+1 interleaved */
    __m256 u[8];
    _Pragma("GCC unroll 8")
    for (int k = 0; k < 8; k += 4) {
        u[k] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    /* u[k] (k < 4): element k of rows 0-3 | element k + 4 of rows 0-3; u[k + 4]
     * the same of rows 4-7 */
    _Pragma("GCC unroll 8")
    for (int k = 0; k < 4; k++) {
        r[k] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x20);
        r[k + 4] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x31);
    }
}

#endif
