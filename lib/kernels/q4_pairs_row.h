/* q4_pairs_row.h - private: Q4_0 decode rows over the regrouped activation
 * (q4_pairs, kernels_x86.h), the same for AVX2 and AVX-512, for one token
 * and for a few (several sequences decoding together).  Included by
 * kernels_avx2.c and kernels_avx512.c after each defines
 *     __m256i q4_pair_dot(__m256i lo, __m256i hi, const int8_t *xp)
 *     __m256i q4_pair_sums(const uint8_t *w, const int8_t *xp, int one)
 * (two blocks' partial sums from their nibbles, and from their bytes:
 * vpmaddubsw and vpmaddwd, or vpdpbusd), the one piece that differs; and
 * q4_pairs_init; compiled into each file for its own instruction set. */
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
 * including file's q4_pairs_init); AVX2's decode (AVX-512 folds two rows
 * a register instead, kernels_avx512.c). */
ALWAYS_INLINE void matvec_q4_pairs(const uint8_t *wq, ml_wscales wd, size_t r0, size_t r1,
                            const q4_pairs *qp, size_t nb, float *y)
{
    if (wd.f16)
        for (size_t r = r0; r < r1; r++)
            y[r] = row_q4_pairs(wq, wd, r, qp, nb, 1);
    else
        for (size_t r = r0; r < r1; r++)
            y[r] = row_q4_pairs(wq, wd, r, qp, nb, 0);
}

/* ---- a few tokens at once ----
 *
 * Decoding several sequences multiplies each matrix by a few tokens.  The
 * weights are what costs: row by row, a row's nibbles are loaded and
 * unpacked once and meet up to Q4_NT tokens' activations, each token
 * getting exactly row_q4_pairs's operations (so matvec's bits); more
 * tokens go over the same rows again in blocks of Q4_ROWS, still in the
 * L1 cache.  (The prefill tiles, which rearrange every panel of weights
 * first, pay that rearranging per token when the tokens are few.) */
#define Q4_NT 4 /* rows_q4_any's cases */
#define Q4_ROWS 16

static void matvec_q4_0(const uint8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, float *y);

/* One group (m <= 8 blocks at w, a constant where this is inlined) of a
 * row for nt tokens: row_q4_pairs's operations, the nibbles unpacked once. */
ALWAYS_INLINE void group_q4_pairs_nt(__m256 acc[Q4_NT], const uint8_t *w, __m256 sw,
                                     const q4_pairs *qp, size_t nt, size_t b, size_t j,
                                     size_t m)
{
    __m256i p[Q4_NT][4];
    UNROLL
    for (size_t k = 0; k < 4; k++) {
        __m256i lo = _mm256_setzero_si256(), hi = lo;
        if (2 * k < m)
            q4_pair_nibbles(w + 32 * k, 2 * k + 1 >= m, &lo, &hi);
        UNROLL
        for (size_t t = 0; t < Q4_NT; t++)
            if (t < nt)
                p[t][k] = 2 * k < m ? q4_pair_dot(lo, hi, qp[t].x + 32 * b + 64 * k)
                                    : _mm256_setzero_si256();
    }
    UNROLL
    for (size_t t = 0; t < Q4_NT; t++)
        if (t < nt)
            acc[t] = combine(acc[t], _mm256_add_epi32(q4_pairs_fold(p[t]), qp[t].corr[j]),
                             _mm256_mul_ps(sw, qp[t].xd[j]));
}

ALWAYS_INLINE void rows_q4_pairs_nt(const uint8_t *wq, ml_wscales wd, size_t r,
                                    const q4_pairs *qp, size_t nt, size_t nb, int f16,
                                    float *out)
{
    const __m256i order = _mm256_setr_epi32(PAIR_ORDER);
    const uint8_t *w = wq + r * nb * 16;
    __m256 acc[Q4_NT];
    UNROLL
    for (size_t t = 0; t < Q4_NT; t++)
        acc[t] = _mm256_setzero_ps();
    size_t b = 0, j = 0;
    for (; b + 8 <= nb; b += 8, j++) { /* whole groups, then the last part */
        prefetch_q4(w + 16 * b, wscale_at(wd, r * nb + b, f16), f16);
        const __m256 sw = _mm256_permutevar8x32_ps(wscales8(wd, r * nb + b, 8, f16), order);
        group_q4_pairs_nt(acc, w + 16 * b, sw, qp, nt, b, j, 8);
    }
    if (b < nb) {
        prefetch_q4(w + 16 * b, wscale_at(wd, r * nb + b, f16), f16);
        const __m256 sw = _mm256_permutevar8x32_ps(wscales8(wd, r * nb + b, nb - b, f16), order);
        group_q4_pairs_nt(acc, w + 16 * b, sw, qp, nt, b, j, nb - b);
    }
    UNROLL
    for (size_t t = 0; t < Q4_NT; t++)
        if (t < nt)
            out[t] = fold8(_mm256_permutevar8x32_ps(acc[t], _mm256_setr_epi32(PAIR_INVERSE)));
}

/* Rows [r0, r1) for nt <= Q4_NT tokens (qp[t]) into y + t * ldy; nt is
 * a constant where this is inlined. */
ALWAYS_INLINE void rows_q4_nt(const uint8_t *wq, ml_wscales wd, size_t r0, size_t r1,
                              const q4_pairs *qp, size_t nt, size_t nb, float *y, size_t ldy)
{
    float out[Q4_NT];
    for (size_t r = r0; r < r1; r++) {
        if (wd.f16)
            rows_q4_pairs_nt(wq, wd, r, qp, nt, nb, 1, out);
        else
            rows_q4_pairs_nt(wq, wd, r, qp, nt, nb, 0, out);
        for (size_t t = 0; t < nt; t++)
            y[t * ldy + r] = out[t];
    }
}

static void rows_q4_any(const uint8_t *wq, ml_wscales wd, size_t r0, size_t r1,
                        const q4_pairs *qp, size_t nt, size_t nb, float *y, size_t ldy)
{
    switch (nt) {
    case 1: rows_q4_nt(wq, wd, r0, r1, qp, 1, nb, y, ldy); break;
    case 2: rows_q4_nt(wq, wd, r0, r1, qp, 2, nb, y, ldy); break;
    case 3: rows_q4_nt(wq, wd, r0, r1, qp, 3, nb, y, ldy); break;
    default: rows_q4_nt(wq, wd, r0, r1, qp, Q4_NT, nb, y, ldy); break;
    }
}

/* The table's matmul_q4_0 for n_tok tokens below the prefill tiles':
 * each token's activation regrouped once, then the rows in blocks, every
 * group of Q4_NT tokens over a block while it is in the cache. */
static void matvecs_q4_0(const uint8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                         const int8_t *xq, const float *xd, size_t n_tok, float *y, size_t ldy)
{
    const size_t nb = cols / 32;
    q4_pairs *qp = cols <= PAIR_COLS ? aligned_alloc(32, n_tok * sizeof *qp) : NULL;
    if (!qp) { /* long rows, or no memory: one token at a time, the same bits */
        for (size_t t = 0; t < n_tok; t++)
            matvec_q4_0(wq, wd, cols, r0, r1, xq + t * cols, xd + t * nb, y + t * ldy);
        return;
    }
    for (size_t t = 0; t < n_tok; t++)
        q4_pairs_init(&qp[t], xq + t * cols, xd + t * nb, nb);
    for (size_t r = r0; r < r1; r += Q4_ROWS) {
        const size_t re = r1 - r < Q4_ROWS ? r1 : r + Q4_ROWS;
        for (size_t t = 0; t < n_tok; t += Q4_NT)
            rows_q4_any(wq, wd, r, re, qp + t, n_tok - t < Q4_NT ? n_tok - t : Q4_NT, nb,
                        y + t * ldy, ldy);
    }
    free(qp);
}

#endif
