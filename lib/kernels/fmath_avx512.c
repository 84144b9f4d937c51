/* fmath_avx512.c - the attention products of fmath.h in 512-bit registers
 * (compiled with AVX-512 F/BW/VL; fused multiply-adds only where fmath.h
 * fuses), the reference's bits by the rules of fmath.h; the rest is
 * fmath_avx2.c's.
 *
 * Only what long prompts spend their time in is widened (dots, gemm and
 * exp_norm lead a 4096-token prompt's profile), and each
 * the same way: 16 lanes where AVX2 has 8, every lane's operations and
 * their order unchanged.
 * gemm: tiles of 4 output rows by 4 vectors of 16 columns (16
 * accumulators of the 32 registers); each output element's terms added
 * in the order of r, as the reference does, so the width is free.
 * dots with 12 rows or more: fmath_avx2.c's transposed keys, each class
 * of elements (e ≡ k mod 8) summed for 16 keys at once; fewer rows (a
 * decode step) go to the AVX2 code, which is not their bottleneck.
 * exp_norm: the exponential on 16 lanes; its sum keeps the 8 lanes of
 * dots' order, the low half added before the high half. */
#include "kernels/fmath.h"

#if defined(__x86_64__)

#include "kernels/fmath_x86.h"

#include <immintrin.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

/* As fmath_avx2.c: the cache rows PF_ROWS ahead. */
#define PF_ROWS 32

INLINE void prefetch_row(const void *p, size_t n, size_t size)
{
    for (size_t i = 0; i < n * size; i += 64)
        _mm_prefetch((const char *)p + i, _MM_HINT_T0);
}

INLINE const void *at(const void *p, size_t i, const int half)
{
    return (const char *)p + i * (half ? 2 : 4);
}

/* Lanes [0, n) of a 16-lane vector. */
INLINE __mmask16 lanes(size_t n)
{
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}

/* The lanes of k from p as floats (f16 widened exactly with `half`),
 * the others zero and unread. */
INLINE __m512 load16(const void *p, const int half, __mmask16 k)
{
    if (half)
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, p));
    return _mm512_maskz_loadu_ps(k, p);
}

/* ---- gemm ---- */

/* G rows x V vectors of 16 floats at column c, the lanes of k in the
 * last vector (all of them in the others). */
INLINE void tile(const size_t G, const size_t V, const int half, const float *const *a, size_t n,
                 const void *B, size_t ldb, size_t c, float s0, float *const *out, __mmask16 k)
{
    __m512 acc[4][4];
    const __m512 vs0 = _mm512_set1_ps(s0);
    UNROLL
    for (size_t i = 0; i < G; i++)
        UNROLL
        for (size_t v = 0; v < V; v++)
            acc[i][v] = _mm512_mul_ps(
                vs0, _mm512_maskz_loadu_ps(v == V - 1 ? k : 0xffff, out[i] + c + 16 * v));
    for (size_t r = 0; r < n; r++) {
        __m512 b[4];
        if (r + PF_ROWS < n)
            prefetch_row(at(B, (r + PF_ROWS) * ldb + c, half), 16 * V, half ? 2 : 4);
        UNROLL
        for (size_t v = 0; v < V; v++)
            b[v] = load16(at(B, r * ldb + c + 16 * v, half), half, v == V - 1 ? k : 0xffff);
        UNROLL
        for (size_t i = 0; i < G; i++) {
            __m512 x = _mm512_set1_ps(a[i][r]);
            UNROLL
            for (size_t v = 0; v < V; v++)
                acc[i][v] = _mm512_fmadd_ps(x, b[v], acc[i][v]);
        }
    }
    UNROLL
    for (size_t i = 0; i < G; i++)
        UNROLL
        for (size_t v = 0; v < V; v++)
            _mm512_mask_storeu_ps(out[i] + c + 16 * v, v == V - 1 ? k : 0xffff, acc[i][v]);
}

/* Rows [0, G) of the output over all columns. */
INLINE void gemm_rows(const size_t G, const int half, const float *const *a, size_t n,
                      const void *B, size_t ldb, size_t width, float s0, float *const *out)
{
    size_t c = 0;
    for (; c + 64 <= width; c += 64)
        tile(G, 4, half, a, n, B, ldb, c, s0, out, 0xffff);
    for (; c + 16 <= width; c += 16)
        tile(G, 1, half, a, n, B, ldb, c, s0, out, 0xffff);
    if (c < width)
        tile(G, 1, half, a, n, B, ldb, c, s0, out, lanes(width - c));
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

/* ---- dots through transposed keys (fmath_avx2.c's dots_t, 16 keys a
 * vector): lane j of class k's sum is a[i][k]·kt[k][j] + a[i][k+8]·... in
 * the order of e, and the classes are folded as dots' lanes are. ---- */

#define KT_FLOATS 4096 /* 16 KB of transposed keys, with a's rows in L1 */

/* Rows [0, G) of a against V vectors of 16 keys at column c of kt, over
 * the elements of class k: sums into part[i·V + v]. */
INLINE void class_tile(const size_t G, const size_t V, const float *const *a, size_t k,
                       size_t n, const float *kt, size_t ldk, size_t c, __m512 *part)
{
    __m512 acc[4][2];
    UNROLL
    for (size_t i = 0; i < G; i++)
        UNROLL
        for (size_t v = 0; v < V; v++)
            acc[i][v] = _mm512_setzero_ps();
    for (size_t e = k; e < n; e += 8) {
        __m512 y[2];
        UNROLL
        for (size_t v = 0; v < V; v++)
            y[v] = _mm512_loadu_ps(kt + e * ldk + c + 16 * v);
        UNROLL
        for (size_t i = 0; i < G; i++) {
            __m512 x = _mm512_set1_ps(a[i][e]);
            UNROLL
            for (size_t v = 0; v < V; v++)
                acc[i][v] = _mm512_fmadd_ps(x, y[v], acc[i][v]);
        }
    }
    UNROLL
    for (size_t i = 0; i < G; i++)
        UNROLL
        for (size_t v = 0; v < V; v++)
            part[i * V + v] = acc[i][v];
}

/* Rows [0, G) of a against keys [c, c + 16·V) of kt, the lanes of k in
 * the last vector, into out[i·ldo + c...]. */
INLINE void dot_t_tile(const size_t G, const size_t V, const float *const *a, size_t n,
                       const float *kt, size_t ldk, size_t c, __mmask16 k, float *out,
                       size_t ldo)
{
    __m512 part[8][8]; /* [class][i·V + v] */
    static const size_t order[8] = {0, 4, 2, 6, 1, 5, 3, 7};
    for (size_t q = 0; q < 8; q++)
        class_tile(G, V, a, order[q], n, kt, ldk, c, part[q]);
    UNROLL
    for (size_t i = 0; i < G; i++)
        UNROLL
        for (size_t v = 0; v < V; v++) {
            size_t t = i * V + v;
            __m512 s = _mm512_add_ps(_mm512_add_ps(part[0][t], part[1][t]),
                                     _mm512_add_ps(part[2][t], part[3][t]));
            __m512 u = _mm512_add_ps(_mm512_add_ps(part[4][t], part[5][t]),
                                     _mm512_add_ps(part[6][t], part[7][t]));
            _mm512_mask_storeu_ps(out + i * ldo + c + 16 * v, v == V - 1 ? k : 0xffff,
                                  _mm512_add_ps(s, u));
        }
}

INLINE void dot_t_rows(const size_t G, const float *const *a, size_t n, const float *kt,
                       size_t ldk, size_t nj, float *out, size_t ldo)
{
    size_t c = 0;
    for (; c + 32 <= nj; c += 32)
        dot_t_tile(G, 2, a, n, kt, ldk, c, 0xffff, out, ldo);
    for (; c < nj; c += 16)
        dot_t_tile(G, 1, a, n, kt, ldk, c, lanes(nj - c), out, ldo);
}

INLINE void dots_t(const int half, size_t m, const float *const *a, size_t nk, const void *b,
                   size_t ldb, size_t n, float *out, size_t ldo)
{
    float kt[KT_FLOATS] __attribute__((aligned(64)));
    const size_t keys = KT_FLOATS / n / 16 * 16;
    for (size_t j = 0; j < nk; j += keys) {
        size_t nj = nk - j < keys ? nk - j : keys, ldk = (nj + 15) / 16 * 16;
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

/* As fmath_avx2.c's use_dots_t, with room for sixteen keys. */
INLINE int use_dots_t(size_t m, size_t n)
{
    return m >= 12 && n > 0 && n % 8 == 0 && n <= KT_FLOATS / 16;
}

static void dots(size_t m, const float *const *a, size_t nk, const float *b, size_t ldb, size_t n,
                 float *out, size_t ldo)
{
    if (use_dots_t(m, n))
        dots_t(0, m, a, nk, b, ldb, n, out, ldo);
    else
        ml__fmath_avx2.dots(m, a, nk, b, ldb, n, out, ldo);
}

static void dots_h(size_t m, const float *const *a, size_t nk, const uint16_t *b, size_t ldb,
                   size_t n, float *out, size_t ldo)
{
    if (use_dots_t(m, n))
        dots_t(1, m, a, nk, b, ldb, n, out, ldo);
    else
        ml__fmath_avx2.dots_h(m, a, nk, b, ldb, n, out, ldo);
}

/* ---- softmax ---- */

/* ml__fmath_exp_neg on 16 lanes, operation for operation. */
INLINE __m512 exp_neg(__m512 a)
{
    const __m512 round = _mm512_set1_ps(ML_FMATH_ROUND);
    __mmask16 keep = _mm512_cmp_ps_mask(a, _mm512_set1_ps(ML_FMATH_EXP_MIN), _CMP_NLT_UQ);
    __m512 t = _mm512_add_ps(_mm512_mul_ps(a, _mm512_set1_ps(ML_FMATH_LOG2E)), round);
    __m512 n = _mm512_sub_ps(t, round);
    __m512 r = _mm512_sub_ps(a, _mm512_mul_ps(n, _mm512_set1_ps(ML_FMATH_LN2_HI)));
    r = _mm512_sub_ps(r, _mm512_mul_ps(n, _mm512_set1_ps(ML_FMATH_LN2_LO)));
    __m512 p = _mm512_set1_ps(ML_FMATH_P0);
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(ML_FMATH_P1));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(ML_FMATH_P2));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(ML_FMATH_P3));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(ML_FMATH_P4));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(ML_FMATH_P5));
    __m512 e = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(p, _mm512_mul_ps(r, r)), r),
                             _mm512_set1_ps(1.0f));
    __m512i ni = _mm512_sub_epi32(_mm512_castps_si512(t),
                                  _mm512_set1_epi32((int)ML_FMATH_ROUND_BITS));
    __m512 s = _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_add_epi32(ni, _mm512_set1_epi32(127)), 23));
    return _mm512_maskz_mul_ps(keep, e, s);
}

/* The sum in dots' order: lane k of acc gets element 16c + k, then
 * 16c + 8 + k, as AVX2's eight lanes get them one vector after the
 * other. */
static void exp_norm(float *x, size_t n, float shift)
{
    const __m512 sh = _mm512_set1_ps(shift);
    __m256 acc = _mm256_setzero_ps();
    size_t c = 0;
    for (; c + 16 <= n; c += 16) {
        __m512 e = exp_neg(_mm512_sub_ps(_mm512_loadu_ps(x + c), sh));
        _mm512_storeu_ps(x + c, e);
        acc = _mm256_add_ps(acc, _mm512_castps512_ps256(e));
        acc = _mm256_add_ps(acc, _mm512_extractf32x8_ps(e, 1));
    }
    float lane[8];
    _mm256_storeu_ps(lane, acc);
    for (size_t k = c; k < n; k++) { /* the remainder into its lanes */
        x[k] = ml__fmath_exp_neg(x[k] - shift);
        lane[k % 8] += x[k];
    }
    const float sum = ml__fold8(lane);
    const __m512 vs = _mm512_set1_ps(sum);
    for (c = 0; c + 16 <= n; c += 16)
        _mm512_storeu_ps(x + c, _mm512_div_ps(_mm512_loadu_ps(x + c), vs));
    for (; c < n; c++)
        x[c] = x[c] / sum;
}

/* ---- the rest: fmath_avx2.c's ---- */

static void to_f16(uint16_t *h, const float *x, size_t n)
{
    ml__fmath_avx2.to_f16(h, x, n);
}

static void madd(float *y, const float *w, const float *x, size_t n)
{
    ml__fmath_avx2.madd(y, w, x, n);
}

static void silu(float *y, const float *x, size_t n, int mul)
{
    ml__fmath_avx2.silu(y, x, n, mul);
}

static void glu(float *x, const float *g, size_t n, int gelu)
{
    ml__fmath_avx2.glu(x, g, n, gelu);
}

static float scale_max(float *x, size_t n, float scale)
{
    return ml__fmath_avx2.scale_max(x, n, scale);
}

/* ---- RMSNorm, eight rows at a time ----
 *
 * Lane k of a double register sums row k's squares in ml__rmsnorm's
 * order (eight elements of eight rows loaded and transposed, then each
 * widened, squared, added; a gather per element showed in Gemma 3's
 * prompt profile), so eight dependent chains run side by side where the
 * reference runs one; the rest is the reference's scalar steps per row. */

/* out = (x · inv) · w over n floats, 16 lanes at a time. */
static void scale_row(float *out, const float *x, const float *w, uint32_t n, float inv)
{
    const __m512 vi = _mm512_set1_ps(inv);
    for (uint32_t i = 0; i < n; i += 16) {
        const __mmask16 k = lanes(n - i);
        const __m512 v = _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), vi),
                                       _mm512_maskz_loadu_ps(k, w + i));
        _mm512_mask_storeu_ps(out + i, k, v);
    }
}

static void rmsnorm_rows(float *out, size_t ldo, const float *x, size_t ldx, const float *w,
                         uint32_t n, size_t rows, float eps)
{
    size_t r = 0;
    if (ldx <= INT32_MAX / 8) {
        const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                               _mm256_set1_epi32((int)ldx));
        for (; r + 8 <= rows; r += 8) {
            const float *xr = x + r * ldx;
            __m512d ss = _mm512_setzero_pd();
            uint32_t i = 0;
            for (; i + 8 <= n; i += 8) { /* eight elements of the eight rows, transposed */
                __m256 t[8];
                UNROLL
                for (size_t k = 0; k < 8; k++)
                    t[k] = _mm256_loadu_ps(xr + k * ldx + i);
                ml__transpose8(t);
                UNROLL
                for (size_t e = 0; e < 8; e++) {
                    const __m512d v = _mm512_cvtps_pd(t[e]);
                    ss = _mm512_add_pd(ss, _mm512_mul_pd(v, v));
                }
            }
            for (; i < n; i++) {
                const __m512d v = _mm512_cvtps_pd(_mm256_i32gather_ps(xr + i, idx, 4));
                ss = _mm512_add_pd(ss, _mm512_mul_pd(v, v));
            }
            double sums[8];
            _mm512_storeu_pd(sums, ss);
            for (size_t k = 0; k < 8; k++)
                scale_row(out + (r + k) * ldo, xr + k * ldx, w, n,
                          ml__rmsnorm_inv(sums[k], n, eps));
        }
    }
    ml__rmsnorm_rows(out + r * ldo, ldo, x + r * ldx, ldx, w, n, rows - r, eps);
}

const ml_fmath ml__fmath_avx512 = {
    .name = "avx512",
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
    .rmsnorm_rows = rmsnorm_rows,
};

#endif
