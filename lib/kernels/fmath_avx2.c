/* fmath_avx2.c - fmath.h's products for x86-64 with AVX2 (compiled with
 * -mavx2 -mfma; FMA only where fmath.h's products fuse), the reference's
 * bits by the rules of fmath.h.
 *
 * gemm: tiles of eight accumulators, 4 output rows by 16 columns (2 by
 * 32, 1 by 64 for fewer rows); per term, loads of B and broadcasts of a
 * feed eight multiply-adds held in registers (the reference form loads
 * and stores the output for every term).
 * dots: tiles of 4 rows of a by 2 rows of b, eight 8-lane accumulators,
 * so each element of a and b is loaded once per tile; lane k of an
 * accumulator is the reference's acc[k].  With 12 rows or more (a
 * prompt), dots_t: the keys transposed, and each lane's sum computed for
 * 8 keys at once (see there).
 * gemm_h, dots_h: the same code (one template, `half` a constant) with B
 * loaded as f16 and widened by vcvtph2ps, which is exact as the
 * reference's ml_f16_to_f32; to_f16 is vcvtps2ph, which rounds to nearest
 * even as ml_f32_to_f16 does. */
#include "kernels/fmath.h"

#if defined(__x86_64__)

#include "kernels/fmath_x86.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))
/* Loops over registers are unrolled, or the registers become memory. */
#define UNROLL _Pragma("GCC unroll 8")

/* Both products fetch the cache rows PF_ROWS ahead: a decode step
 * streams a whole context of keys and values from memory, faster than
 * the hardware prefetcher ramps up on each 4 KiB page.  (8 rows, 1 KiB
 * of SmolLM2's f16 keys, was too close: both generation after a
 * 4096-token prompt and the prompt itself were slower than at 32.) */
#define PF_ROWS 32

/* The cache lines of n elements of `size` bytes from p. */
INLINE void prefetch_row(const void *p, size_t n, size_t size)
{
    for (size_t i = 0; i < n * size; i += 64)
        _mm_prefetch((const char *)p + i, _MM_HINT_T0);
}

/* Element i of a row of floats, or of f16 bits with `half`, as a float. */
INLINE float elem(const void *p, size_t i, const int half)
{
    return half ? ml_f16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

/* The address of element i. */
INLINE const void *at(const void *p, size_t i, const int half)
{
    return (const char *)p + i * (half ? 2 : 4);
}

/* Eight elements from p as floats (f16 widened exactly with `half`). */
INLINE __m256 load8(const void *p, const int half)
{
    return half ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p))
                : _mm256_loadu_ps((const float *)p);
}

/* ---- gemm ---- */

/* Lanes [0, n) of a mask for a partial vector of n < 8 floats. */
INLINE __m256i tail_mask(size_t n)
{
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), idx);
}

INLINE __m256 load(const float *p, int masked, __m256i mask)
{
    return masked ? _mm256_maskload_ps(p, mask) : _mm256_loadu_ps(p);
}

/* B's vector at p: eight elements, or with `masked` the first n < 8 (the
 * others zero and unread). */
INLINE __m256 load_b(const void *p, const int half, int masked, __m256i mask, size_t n)
{
    if (!half)
        return load(p, masked, mask);
    if (!masked)
        return load8(p, 1);
    uint16_t h[8] = {0};
    memcpy(h, p, n * 2);
    return load8(h, 1);
}

/* G rows x V vectors of 8 floats at column c; with `masked`, one vector
 * whose lanes outside `mask` are neither read nor written. */
INLINE void tile(const size_t G, const size_t V, const int masked, const int half,
                 const float *const *a, size_t n, const void *B, size_t ldb, size_t c, float s0,
                 float *const *out, __m256i mask, size_t tail)
{
    __m256 acc[4][8];
    const __m256 vs0 = _mm256_set1_ps(s0);
    UNROLL
    for (size_t i = 0; i < G; i++)
        UNROLL
        for (size_t v = 0; v < V; v++)
            acc[i][v] = _mm256_mul_ps(vs0, load(out[i] + c + 8 * v, masked, mask));
    for (size_t r = 0; r < n; r++) {
        __m256 b[8];
        if (r + PF_ROWS < n)
            prefetch_row(at(B, (r + PF_ROWS) * ldb + c, half), 8 * V, half ? 2 : 4);
        UNROLL
        for (size_t v = 0; v < V; v++)
            b[v] = load_b(at(B, r * ldb + c + 8 * v, half), half, masked, mask, tail);
        UNROLL
        for (size_t i = 0; i < G; i++) {
            __m256 x = _mm256_broadcast_ss(a[i] + r);
            UNROLL
            for (size_t v = 0; v < V; v++)
                acc[i][v] = _mm256_fmadd_ps(x, b[v], acc[i][v]);
        }
    }
    UNROLL
    for (size_t i = 0; i < G; i++)
        UNROLL
        for (size_t v = 0; v < V; v++) {
            if (masked)
                _mm256_maskstore_ps(out[i] + c + 8 * v, mask, acc[i][v]);
            else
                _mm256_storeu_ps(out[i] + c + 8 * v, acc[i][v]);
        }
}

/* Rows [0, G) of the output over all columns: G·V = 8 accumulators. */
INLINE void gemm_rows(const size_t G, const int half, const float *const *a, size_t n,
                      const void *B, size_t ldb, size_t width, float s0, float *const *out)
{
    const __m256i all = _mm256_set1_epi32(-1);
    const size_t V = 8 / G;
    size_t c = 0;
    for (; c + 8 * V <= width; c += 8 * V)
        tile(G, V, 0, half, a, n, B, ldb, c, s0, out, all, 8);
    for (; c + 8 <= width; c += 8)
        tile(G, 1, 0, half, a, n, B, ldb, c, s0, out, all, 8);
    if (c < width)
        tile(G, 1, 1, half, a, n, B, ldb, c, s0, out, tail_mask(width - c), width - c);
}

INLINE void gemm_any(const int half, size_t m, const float *const *a, size_t n, const void *B,
                     size_t ldb, size_t width, float s0, float *const *out)
{
    size_t i = 0;
    for (; i + 4 <= m; i += 4)
        gemm_rows(4, half, a + i, n, B, ldb, width, s0, out + i);
    /* the rest (fewer than 4) in one pass over B: decode's 1 to 3 query
     * heads a KV head */
    if (m - i == 3)
        gemm_rows(3, half, a + i, n, B, ldb, width, s0, out + i);
    else if (m - i == 2)
        gemm_rows(2, half, a + i, n, B, ldb, width, s0, out + i);
    else if (m - i == 1)
        gemm_rows(1, half, a + i, n, B, ldb, width, s0, out + i);
}

static void gemm(size_t m, const float *const *a, size_t n, const float *B, size_t ldb,
                 size_t width, float s0, float *const *out)
{
    gemm_any(0, m, a, n, B, ldb, width, s0, out);
}

static void gemm_h(size_t m, const float *const *a, size_t n, const uint16_t *B, size_t ldb,
                   size_t width, float s0, float *const *out)
{
    gemm_any(1, m, a, n, B, ldb, width, s0, out);
}

/* ---- dots ---- */

/* The pairwise fold of kernels.h's rule 3 on the eight lanes. */
INLINE float fold8(__m256 acc)
{
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

/* a's rows [0, G) against b's rows [0, J). */
INLINE void dot_tile(const size_t G, const size_t J, const int half, const float *const *a,
                     const void *b, size_t ldb, size_t n, float *out, size_t ldo)
{
    __m256 acc[4][2];
    UNROLL
    for (size_t i = 0; i < G; i++)
        UNROLL
        for (size_t j = 0; j < J; j++)
            acc[i][j] = _mm256_setzero_ps();
    size_t e = 0;
    for (; e + 8 <= n; e += 8) {
        __m256 y[2];
        UNROLL
        for (size_t j = 0; j < J; j++)
            y[j] = load8(at(b, j * ldb + e, half), half);
        UNROLL
        for (size_t i = 0; i < G; i++) {
            __m256 x = _mm256_loadu_ps(a[i] + e);
            UNROLL
            for (size_t j = 0; j < J; j++)
                acc[i][j] = _mm256_fmadd_ps(x, y[j], acc[i][j]);
        }
    }
    UNROLL
    for (size_t i = 0; i < G; i++)
        UNROLL
        for (size_t j = 0; j < J; j++) {
            if (e < n) { /* the remainder, element by element into its lane */
                float lane[8];
                _mm256_storeu_ps(lane, acc[i][j]);
                for (size_t k = e; k < n; k++)
                    lane[k % 8] = fmaf(a[i][k], elem(b, j * ldb + k, half), lane[k % 8]);
                acc[i][j] = _mm256_loadu_ps(lane);
            }
            out[i * ldo + j] = fold8(acc[i][j]);
        }
}

INLINE void dot_rows(const size_t G, const int half, const float *const *a, size_t nk,
                     const void *b, size_t ldb, size_t n, float *out, size_t ldo)
{
    const size_t size = half ? 2 : 4;
    size_t j = 0;
    for (; j + 2 <= nk; j += 2) {
        if (j + PF_ROWS + 2 <= nk) {
            prefetch_row(at(b, (j + PF_ROWS) * ldb, half), n, size);
            prefetch_row(at(b, (j + PF_ROWS + 1) * ldb, half), n, size);
        }
        dot_tile(G, 2, half, a, at(b, j * ldb, half), ldb, n, out + j, ldo);
    }
    if (j < nk)
        dot_tile(G, 1, half, a, at(b, j * ldb, half), ldb, n, out + j, ldo);
}

INLINE void dots_any(const int half, size_t m, const float *const *a, size_t nk, const void *b,
                     size_t ldb, size_t n, float *out, size_t ldo)
{
    size_t i = 0;
    for (; i + 4 <= m; i += 4)
        dot_rows(4, half, a + i, nk, b, ldb, n, out + i * ldo, ldo);
    /* the rest in one pass, as gemm_any */
    if (m - i == 3)
        dot_rows(3, half, a + i, nk, b, ldb, n, out + i * ldo, ldo);
    else if (m - i == 2)
        dot_rows(2, half, a + i, nk, b, ldb, n, out + i * ldo, ldo);
    else if (m - i == 1)
        dot_rows(1, half, a + i, nk, b, ldb, n, out + i * ldo, ldo);
}

/* ---- dots through transposed keys (many rows of a: a prompt) ----
 *
 * Lane k of the reference's accumulator for a[i]·b[j] is the sequential
 * sum over the elements e ≡ k (mod 8).  With a block of keys transposed
 * to floats, kt[e][j] = b[j][e], that lane's sum for 8 keys at once is a
 * broadcast of a[i][e] times row e of kt, added for e = k, k + 8, ...:
 * gemm's tile, one class k of elements after the other, each class's
 * sums kept aside, then the classes folded as the lanes are:
 * ((c0 + c4) + (c2 + c6)) + ((c1 + c5) + (c3 + c7)).  The same adds of
 * the same products as dot_tile's, and no horizontal folds, which took
 * as long as the products at head size 64; the keys are widened and
 * transposed once for all rows instead of once per four. */

/* Floats of a block of transposed keys (16 KB, with a's rows in L1). */
#define KT_FLOATS 4096

/* Keys [j0, j0 + nj) of b, elements [0, n), as floats kt[e·ldk + j - j0]. */
INLINE void transpose_keys(const int half, float *kt, size_t ldk, const void *b, size_t ldb,
                           size_t j0, size_t nj, size_t n)
{
    size_t j = 0;
    for (; j + 8 <= nj; j += 8) {
        for (size_t k = 0; k < 8; k++) /* the next eight keys, while these are moved */
            prefetch_row(at(b, (j0 + j + 8 + k) * ldb, half), n, half ? 2 : 4);
        for (size_t e = 0; e < n; e += 8) {
            __m256 r[8];
            UNROLL
            for (size_t k = 0; k < 8; k++)
                r[k] = load8(at(b, (j0 + j + k) * ldb + e, half), half);
            ml__transpose8(r);
            UNROLL
            for (size_t k = 0; k < 8; k++)
                _mm256_storeu_ps(kt + (e + k) * ldk + j, r[k]);
        }
    }
    for (; j < nj; j++) /* the last few keys one by one */
        for (size_t e = 0; e < n; e++)
            kt[e * ldk + j] = elem(b, (j0 + j) * ldb + e, half);
}

void ml__fmath_avx2_transpose_keys(int half, float *kt, size_t ldk, const void *b, size_t ldb,
                                   size_t j0, size_t nj, size_t n)
{
    if (half)
        transpose_keys(1, kt, ldk, b, ldb, j0, nj, n);
    else
        transpose_keys(0, kt, ldk, b, ldb, j0, nj, n);
    for (size_t e = 0; e < n; e++) /* lanes past the last key: read, never stored */
        for (size_t p = nj; p < ldk; p++)
            kt[e * ldk + p] = 0;
}

/* Rows [0, G) of a against V vectors of 8 keys at column c of kt, over
 * the elements of class k: sums into part[i·V + v] (8 floats each). */
INLINE void class_tile(const size_t G, const size_t V, const float *const *a, size_t k,
                       size_t n, const float *kt, size_t ldk, size_t c, __m256 *part)
{
    __m256 acc[4][2];
    UNROLL
    for (size_t i = 0; i < G; i++)
        UNROLL
        for (size_t v = 0; v < V; v++)
            acc[i][v] = _mm256_setzero_ps();
    for (size_t e = k; e < n; e += 8) {
        __m256 y[2];
        UNROLL
        for (size_t v = 0; v < V; v++)
            y[v] = _mm256_loadu_ps(kt + e * ldk + c + 8 * v);
        UNROLL
        for (size_t i = 0; i < G; i++) {
            __m256 x = _mm256_broadcast_ss(a[i] + e);
            UNROLL
            for (size_t v = 0; v < V; v++)
                acc[i][v] = _mm256_fmadd_ps(x, y[v], acc[i][v]);
        }
    }
    UNROLL
    for (size_t i = 0; i < G; i++)
        UNROLL
        for (size_t v = 0; v < V; v++)
            part[i * V + v] = acc[i][v];
}

/* Rows [0, G) of a against keys [c, c + 8·V) of kt (the last vector
 * holding `tail` < 8 keys when `tail`), into out[i·ldo + c...]. */
INLINE void dot_t_tile(const size_t G, const size_t V, const float *const *a, size_t n,
                       const float *kt, size_t ldk, size_t c, size_t tail, float *out, size_t ldo)
{
    __m256 part[8][8]; /* [class][i·V + v] */
    static const size_t order[8] = {0, 4, 2, 6, 1, 5, 3, 7};
    for (size_t q = 0; q < 8; q++)
        class_tile(G, V, a, order[q], n, kt, ldk, c, part[q]);
    UNROLL
    for (size_t i = 0; i < G; i++)
        UNROLL
        for (size_t v = 0; v < V; v++) {
            size_t t = i * V + v;
            __m256 s = _mm256_add_ps(_mm256_add_ps(part[0][t], part[1][t]),
                                     _mm256_add_ps(part[2][t], part[3][t]));
            __m256 u = _mm256_add_ps(_mm256_add_ps(part[4][t], part[5][t]),
                                     _mm256_add_ps(part[6][t], part[7][t]));
            float *o = out + i * ldo + c + 8 * v;
            if (tail && v == V - 1) {
                float lane[8];
                _mm256_storeu_ps(lane, _mm256_add_ps(s, u));
                memcpy(o, lane, tail * 4);
            } else {
                _mm256_storeu_ps(o, _mm256_add_ps(s, u));
            }
        }
}

/* Rows [0, G) of a against the nj keys of kt. */
INLINE void dot_t_rows(const size_t G, const float *const *a, size_t n, const float *kt,
                       size_t ldk, size_t nj, float *out, size_t ldo)
{
    size_t c = 0;
    for (; c + 16 <= nj; c += 16)
        dot_t_tile(G, 2, a, n, kt, ldk, c, 0, out, ldo);
    for (; c + 8 <= nj; c += 8)
        dot_t_tile(G, 1, a, n, kt, ldk, c, 0, out, ldo);
    if (c < nj)
        dot_t_tile(G, 1, a, n, kt, ldk, c, nj - c, out, ldo);
}

/* dots where use_dots_t says so: blocks of keys transposed into kt, each
 * block met by every row of a. */
INLINE void dots_t(const int half, size_t m, const float *const *a, size_t nk, const void *b,
                   size_t ldb, size_t n, float *out, size_t ldo)
{
    float kt[KT_FLOATS];
    const size_t keys = KT_FLOATS / n / 8 * 8;
    for (size_t j = 0; j < nk; j += keys) {
        size_t nj = nk - j < keys ? nk - j : keys, ldk = (nj + 7) / 8 * 8;
        ml__fmath_avx2_transpose_keys(half, kt, ldk, b, ldb, j, nj, n);
        size_t i = 0;
        for (; i + 4 <= m; i += 4)
            dot_t_rows(4, a + i, n, kt, ldk, nj, out + i * ldo + j, ldo);
        for (; i + 2 <= m; i += 2)
            dot_t_rows(2, a + i, n, kt, ldk, nj, out + i * ldo + j, ldo);
        for (; i < m; i++)
            dot_t_rows(1, a + i, n, kt, ldk, nj, out + i * ldo + j, ldo);
    }
}

/* Whether dots_t serves: enough rows to repay a transposition (a
 * prompt's block of tokens; measured, one thread, keys in L2: at 8 rows
 * it loses at head size 256, at 12 it wins at 64 and 256), elements by
 * eights, and room for eight keys. */
INLINE int use_dots_t(size_t m, size_t n)
{
    return m >= 12 && n > 0 && n % 8 == 0 && n <= KT_FLOATS / 8;
}

static void dots(size_t m, const float *const *a, size_t nk, const float *b, size_t ldb, size_t n,
                 float *out, size_t ldo)
{
    if (use_dots_t(m, n))
        dots_t(0, m, a, nk, b, ldb, n, out, ldo);
    else
        dots_any(0, m, a, nk, b, ldb, n, out, ldo);
}

static void dots_h(size_t m, const float *const *a, size_t nk, const uint16_t *b, size_t ldb,
                   size_t n, float *out, size_t ldo)
{
    if (use_dots_t(m, n))
        dots_t(1, m, a, nk, b, ldb, n, out, ldo);
    else
        dots_any(1, m, a, nk, b, ldb, n, out, ldo);
}

static void to_f16(uint16_t *h, const float *x, size_t n)
{
    size_t c = 0;
    for (; c + 8 <= n; c += 8)
        _mm_storeu_si128((__m128i *)(h + c),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + c),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    ml__fmath_scalar.to_f16(h + c, x + c, n - c);
}

/* ---- elementwise ---- */

static void madd(float *y, const float *w, const float *x, size_t n)
{
    size_t c = 0;
    for (; c + 8 <= n; c += 8)
        _mm256_storeu_ps(y + c, _mm256_add_ps(_mm256_loadu_ps(y + c),
                                              _mm256_mul_ps(_mm256_loadu_ps(w + c),
                                                            _mm256_loadu_ps(x + c))));
    for (; c < n; c++)
        y[c] += w[c] * x[c];
}

/* ml__fmath_exp_neg on eight lanes, operation for operation. */
INLINE __m256 exp_neg(__m256 a)
{
    const __m256 round = _mm256_set1_ps(ML_FMATH_ROUND);
    __m256 flush = _mm256_cmp_ps(a, _mm256_set1_ps(ML_FMATH_EXP_MIN), _CMP_LT_OQ);
    __m256 t = _mm256_add_ps(_mm256_mul_ps(a, _mm256_set1_ps(ML_FMATH_LOG2E)), round);
    __m256 n = _mm256_sub_ps(t, round);
    __m256 r = _mm256_sub_ps(a, _mm256_mul_ps(n, _mm256_set1_ps(ML_FMATH_LN2_HI)));
    r = _mm256_sub_ps(r, _mm256_mul_ps(n, _mm256_set1_ps(ML_FMATH_LN2_LO)));
    __m256 p = _mm256_set1_ps(ML_FMATH_P0);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(ML_FMATH_P1));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(ML_FMATH_P2));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(ML_FMATH_P3));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(ML_FMATH_P4));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(ML_FMATH_P5));
    __m256 e = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(p, _mm256_mul_ps(r, r)), r),
                             _mm256_set1_ps(1.0f));
    __m256i ni = _mm256_sub_epi32(_mm256_castps_si256(t),
                                  _mm256_set1_epi32((int)ML_FMATH_ROUND_BITS));
    __m256 s = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(ni, _mm256_set1_epi32(127)), 23));
    e = _mm256_mul_ps(e, s);
    return _mm256_andnot_ps(flush, e);
}

static void silu(float *y, const float *x, size_t n, int mul)
{
    const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
    size_t c = 0;
    for (; c + 8 <= n; c += 8) {
        __m256 v = _mm256_loadu_ps(x + c);
        __m256 e = exp_neg(_mm256_or_ps(v, sign)); /* −|v| */
        __m256 pos = _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GE_OQ);
        __m256 num = _mm256_blendv_ps(_mm256_mul_ps(v, e), v, pos);
        __m256 s = _mm256_div_ps(num, _mm256_add_ps(one, e));
        _mm256_storeu_ps(y + c, mul ? _mm256_mul_ps(_mm256_loadu_ps(y + c), s) : s);
    }
    ml__fmath_scalar.silu(y + c, x + c, n - c, mul);
}

static void glu(float *x, const float *g, size_t n, int gelu)
{
    const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
    const __m256 k = _mm256_set1_ps(ML_FMATH_GELU_K), a = _mm256_set1_ps(ML_FMATH_GELU_A);
    size_t c = 0;
    for (; c + 8 <= n; c += 8) {
        __m256 v = _mm256_loadu_ps(x + c), w = v;
        if (gelu)
            w = _mm256_mul_ps(
                k, _mm256_add_ps(v, _mm256_mul_ps(a, _mm256_mul_ps(v, _mm256_mul_ps(v, v)))));
        __m256 e = exp_neg(_mm256_or_ps(w, sign)); /* −|w| */
        __m256 pos = _mm256_cmp_ps(w, _mm256_setzero_ps(), _CMP_GE_OQ);
        __m256 num = _mm256_blendv_ps(_mm256_mul_ps(v, e), v, pos);
        __m256 s = _mm256_div_ps(num, _mm256_add_ps(one, e));
        _mm256_storeu_ps(x + c, _mm256_mul_ps(s, _mm256_loadu_ps(g + c)));
    }
    ml__fmath_scalar.glu(x + c, g + c, n - c, gelu);
}

static void exp_norm(float *x, size_t n, float shift)
{
    const __m256 sh = _mm256_set1_ps(shift);
    __m256 acc = _mm256_setzero_ps();
    size_t c = 0;
    for (; c + 8 <= n; c += 8) {
        __m256 e = exp_neg(_mm256_sub_ps(_mm256_loadu_ps(x + c), sh));
        _mm256_storeu_ps(x + c, e);
        acc = _mm256_add_ps(acc, e);
    }
    if (c < n) { /* the remainder into its lanes, as dots does */
        float lane[8];
        _mm256_storeu_ps(lane, acc);
        for (size_t k = c; k < n; k++) {
            x[k] = ml__fmath_exp_neg(x[k] - shift);
            lane[k % 8] += x[k];
        }
        acc = _mm256_loadu_ps(lane);
    }
    const __m256 sum = _mm256_set1_ps(fold8(acc));
    for (c = 0; c + 8 <= n; c += 8)
        _mm256_storeu_ps(x + c, _mm256_div_ps(_mm256_loadu_ps(x + c), sum));
    for (; c < n; c++)
        x[c] = x[c] / _mm256_cvtss_f32(sum);
}

/* Each lane keeps the larger (x > m ? x : m, so NaN is never taken); the
 * lanes' maximum is the same value whichever lane holds it (a zero of
 * either sign serves the softmax alike: x - (+0) and x - (-0) round the
 * same but for x = -0, whose exponential is 1 either way). */
static float scale_max(float *x, size_t n, float scale)
{
    const __m256 s = _mm256_set1_ps(scale);
    __m256 m = _mm256_set1_ps(-INFINITY);
    size_t c = 0;
    for (; c + 8 <= n; c += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + c), s);
        _mm256_storeu_ps(x + c, v);
        m = _mm256_max_ps(v, m);
    }
    float lane[8], max = ml__fmath_scalar.scale_max(x + c, n - c, scale);
    _mm256_storeu_ps(lane, m);
    for (int k = 0; k < 8; k++)
        if (lane[k] > max)
            max = lane[k];
    return max;
}

const ml_fmath ml__fmath_avx2 = {
    .name = "avx2",
    .gemm = gemm,
    .dots = dots,
    .gemm_h = gemm_h,
    .dots_h = dots_h,
    .to_f16 = to_f16,
    .madd = madd,
    .silu = silu,
    .glu = glu,
    .exp_norm = exp_norm,
    .scale_max = scale_max,
    .rmsnorm_rows = ml__rmsnorm_rows,
};

#endif /* __x86_64__ */
