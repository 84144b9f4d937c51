/* q4_pairs_row.h - private: Q4_0 decode rows over the regrouped activation
 * (q4_pairs, kernels_x86.h), the same for AVX2 and AVX-512.  Included by
 * kernels_avx2.c and kernels_avx512.c after each defines
 *     __m256i q4_pair_sums(const uint8_t *w, const int8_t *xp, int one)
 * (two blocks' partial sums: vpmaddubsw and vpmaddwd, or vpdpbusd), the
 * one piece that differs; compiled into each file for its own
 * instruction set. */
#ifndef ML_Q4_PAIRS_ROW_H
#define ML_Q4_PAIRS_ROW_H

/* A group (m <= 8 blocks at w): block sums in pair order. */
ALWAYS_INLINE __m256i q4_group_pairs(const uint8_t *w, const int8_t *xp, size_t m)
{
    __m256i p[4];
    UNROLL
    for (size_t k = 0; k < 4; k++)
        p[k] = 2 * k + 1 < m ? q4_pair_sums(w + 32 * k, xp + 64 * k, 0)
             : 2 * k < m     ? q4_pair_sums(w + 32 * k, xp + 64 * k, 1)
                             : _mm256_setzero_si256();
    return q4_pairs_fold(p);
}

ALWAYS_INLINE float row_q4_pairs(const uint8_t *wq, ml_wscales wd, size_t r, const q4_pairs *qp,
                                 size_t nb, int f16)
{
    const __m256i order = _mm256_setr_epi32(PAIR_ORDER);
    const uint8_t *w = wq + r * nb * 16;
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0, j = 0; b < nb; b += 8, j++) {
        const size_t m = nb - b < 8 ? nb - b : 8;
        prefetch_q4(w + 16 * b, wscale_at(wd, r * nb + b, f16), f16);
        const __m256i isum = _mm256_add_epi32(q4_group_pairs(w + 16 * b, qp->x + 32 * b, m),
                                              qp->corr[j]);
        const __m256 sw = _mm256_permutevar8x32_ps(wscales8(wd, r * nb + b, m, f16), order);
        acc = combine(acc, isum, _mm256_mul_ps(sw, qp->xd[j]));
    }
    return fold8(_mm256_permutevar8x32_ps(acc, _mm256_setr_epi32(PAIR_INVERSE)));
}

/* Rows r0 .. r1 - 1 of a Q4_0 product into y, against qp (filled by the
 * including file's q4_pairs_init). */
static void matvec_q4_pairs(const uint8_t *wq, ml_wscales wd, size_t r0, size_t r1,
                            const q4_pairs *qp, size_t nb, float *y)
{
    if (wd.f16)
        for (size_t r = r0; r < r1; r++)
            y[r] = row_q4_pairs(wq, wd, r, qp, nb, 1);
    else
        for (size_t r = r0; r < r1; r++)
            y[r] = row_q4_pairs(wq, wd, r, qp, nb, 0);
}

#endif
