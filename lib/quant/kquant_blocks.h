/* kquant_blocks.h - private: the ggml block-type quantizers' search
 * (kquant.c says what it is), static, compiled once for the baseline of
 * the build (kquant.c) and on x86 also for AVX2 and AVX-512
 * (kquant_avx2.c, kquant_avx512.c), where gcc vectorizes its chunks of
 * 16 wider.  Only the instructions differ: the same float operations per
 * value, every sum scalar and in index order, no contraction
 * (-ffp-contract=off), so every build writes the same bytes
 * (check_kquant.c compares them). */
#ifndef ML_KQUANT_BLOCKS_H
#define ML_KQUANT_BLOCKS_H

#include "quant/quant_impl.h"

#include <math.h>

#define QKK 256
#define MAXSUB 16  /* sub-blocks per super-block (Q6_K) */
#define CLIP 1.0e9f /* inputs are clamped here: no block can hold more */
#define F16_MAX 65504.0f

/* ======================================================================
 * Shared helpers
 * ====================================================================== */

/* f32 -> the f16 value it is stored as, saturating at +-65504 instead of
 * becoming infinite, so that huge inputs give finite (clipped) blocks. */
static float f16r(float v)
{
    if (v > F16_MAX)
        v = F16_MAX;
    if (v < -F16_MAX)
        v = -F16_MAX;
    return ml_f16_to_f32(ml_f32_to_f16(v));
}

static void wr16(uint8_t *p, float v)
{
    uint16_t h = ml_f32_to_f16(v);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

/* Copies a super-block's values with NaN and +-inf replaced by 0 and the
 * rest clamped to +-CLIP (beyond any type's range, and small enough that
 * sums of squares stay finite), and its weights: imp divided by the
 * block's largest (the scale of the weights does not change which block is
 * best, and this keeps weighted sums finite for any finite imp), or 1
 * without.  A sub-block whose importances are all 0 gets weights 1: its
 * error does not count, but sensible values cost nothing. */
static void prepare(const float *x, const float *imp, int n, int sub, float *xc, float *w)
{
    float wmax = 0.0f;
    for (int j = 0; imp && j < n; j++)
        if (imp[j] > wmax)
            wmax = imp[j];
    for (int j = 0; j < n; j++) {
        float v = x[j];
        if (!isfinite(v))
            v = 0.0f;
        xc[j] = v > CLIP ? CLIP : v < -CLIP ? -CLIP : v;
        w[j] = imp && wmax > 0.0f ? imp[j] / wmax : 1.0f;
    }
    for (int s = 0; s < n; s += sub) {
        float sw = 0.0f;
        for (int j = 0; j < sub; j++)
            sw += w[s + j];
        if (!(sw > 0.0f))
            for (int j = 0; j < sub; j++)
                w[s + j] = 1.0f;
    }
}

/* round(v) (halves up) to an int, clamped to [lo, hi]; NaN gives lo.
 * Clamping first keeps the conversion defined (r in [hi, hi + 1) has floor
 * hi either way); the conversion truncates, so one step down fixes negative
 * non-integers (floorf would be a libm call on plain x86-64, and this is
 * the innermost loop).  No branches: the step down is taken for about
 * half of the negative values, a branch that no predictor learns. */
static inline int round_clamp(float v, int lo, int hi)
{
    float r = v + 0.5f;
    r = r >= (float)lo ? r : (float)lo;
    r = r < (float)hi ? r : (float)hi;
    int i = (int)r;
    return i - ((float)i > r);
}

/* ======================================================================
 * Symmetric grids: y = step * level[k] (Q6_K, IQ4_XS, Q5_0)
 * ====================================================================== */

typedef struct grid {
    int n;             /* levels */
    const float *v;    /* level values, ascending */
    const float *mid;  /* n - 1 midpoints, or NULL for the integers v[0] + k */
    int zero;          /* index of the level nearest 0 */
} grid;

static const float q6_levels[64] = {
    -32, -31, -30, -29, -28, -27, -26, -25, -24, -23, -22, -21, -20, -19, -18, -17,
    -16, -15, -14, -13, -12, -11, -10, -9,  -8,  -7,  -6,  -5,  -4,  -3,  -2,  -1,
    0,   1,   2,   3,   4,   5,   6,   7,   8,   9,   10,  11,  12,  13,  14,  15,
    16,  17,  18,  19,  20,  21,  22,  23,  24,  25,  26,  27,  28,  29,  30,  31};
static const grid q6_grid = {64, q6_levels, NULL, 32};
static const grid q5_grid = {32, q6_levels + 16, NULL, 16};

/* ggml's kvalues_iq4nl and the midpoints between neighbours. */
static const float iq4_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};
static const float iq4_mid[16] = {-115.5f, -93.5f, -74, -57, -42, -28.5f, -16, -4.5f,
                                  7,       19,     31.5f, 45.5f, 61, 79, 101, INFINITY};
static const grid iq4_grid = {16, iq4_levels, iq4_mid, 8};
/* iq4_cell[c + 128]: how many midpoints lie below the integer c, i.e. the
 * nearest level of any t in [c, c + 1) up to the one midpoint that can lie
 * inside that cell (they are more than 11 apart). */
static const uint8_t iq4_cell[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    3, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5,
    5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 8, 8, 8,
    8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10,
    11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 13, 13,
    13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14,
    14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,};

/* Index of the level nearest t (t in level units). */
static inline int grid_nearest(const grid *g, float t)
{
    if (!g->mid)
        return round_clamp(t - g->v[0], 0, g->n - 1);
    /* Only the IQ4 table has midpoints: its cell, then the one compare
     * (mid[15] is infinite: no level above the last). */
    int c = round_clamp(t - 0.5f, -128, 127); /* floor(t), clamped */
    int k = iq4_cell[c + 128];
    return k + (t > g->mid[k]);
}

/* Puts every value of a sub-block on its nearest level of step * grid and
 * returns the weighted squared error.  idx receives the level indices. */
static float grid_quant(const float *x, const float *w, int n, float step, const grid *g,
                        uint8_t *idx)
{
    float e = 0.0f;
    if (step == 0.0f) {
        for (int j = 0; j < n; j++) {
            idx[j] = (uint8_t)g->zero;
            e += w[j] * x[j] * x[j];
        }
        return e;
    }
    float inv = 1.0f / step;
    for (int j = 0; j < n; j++) {
        int k = grid_nearest(g, x[j] * inv);
        float d = x[j] - step * g->v[k];
        idx[j] = (uint8_t)k;
        e += w[j] * d * d;
    }
    return e;
}

/* The hot loops below work on chunks of 16 values (every sub-block is 16
 * or 32 long): constant trip counts that gcc -O2 vectorizes.  They
 * compute exactly what grid_nearest and grid_quant do, value by value;
 * only the sums stay scalar, in index order, so every float comes out
 * the same.
 *
 * The nearest level of x[j] * inv: its index k and its value l =
 * g->v[k] (grid_levels keeps the values, grid_terms the indices).  For the
 * integer grids, grid_nearest's round_clamp(t - v[0], 0, n - 1), whose
 * argument is clamped at 0 before the conversion (so no step down), and
 * v[0] + k for the level.  For the IQ4 table, the number of midpoints
 * below t (in int32 lanes, narrowed to bytes after), which equals
 * grid_nearest's cell lookup for every float t (tools/iq4-nearest-check.c
 * goes through all 2^32 bit patterns), with the level summed from the
 * differences of neighbouring levels (small integers: exact). */
#define CHUNK 16
#define IQ4_STEP(m, dl)                                                                            \
    {                                                                                              \
        int c_ = t > iq4_mid[m];                                                                   \
        k += c_;                                                                                   \
        l += c_ ? (float)(dl) : 0.0f;                                                              \
    }
#define IQ4_NEAREST                                                                                \
    int k = 0;                                                                                     \
    float l = -127.0f;                                                                             \
    IQ4_STEP(0, 23) IQ4_STEP(1, 21) IQ4_STEP(2, 18) IQ4_STEP(3, 16) IQ4_STEP(4, 14)                \
    IQ4_STEP(5, 13) IQ4_STEP(6, 12) IQ4_STEP(7, 11) IQ4_STEP(8, 12) IQ4_STEP(9, 12)                \
    IQ4_STEP(10, 13) IQ4_STEP(11, 15) IQ4_STEP(12, 16) IQ4_STEP(13, 20) IQ4_STEP(14, 24)
#define INT_NEAREST                                                                                \
    float r = (t - v0) + 0.5f;                                                                     \
    r = r >= 0.0f ? r : 0.0f;                                                                      \
    r = r < top ? r : top;                                                                         \
    int k = (int)r;                                                                                \
    float l = (float)k + v0;

static void grid_levels(const float *restrict x, int n, const grid *g, float inv,
                        float *restrict lv)
{
    if (g->mid) {
        for (int b = 0; b < n; b += CHUNK)
            for (int j = b; j < b + CHUNK; j++) {
                float t = x[j] * inv;
                IQ4_NEAREST
                (void)k;
                lv[j] = l;
            }
    } else {
        float v0 = g->v[0], top = (float)(g->n - 1);
        for (int b = 0; b < n; b += CHUNK)
            for (int j = b; j < b + CHUNK; j++) {
                float t = x[j] * inv;
                INT_NEAREST
                lv[j] = l;
            }
    }
}

/* grid_terms' loop with one nearest-level rule (IQ4_NEAREST or
 * INT_NEAREST, which set l and k from t). */
#define TERMS_LOOP(NEAREST)                                                                    \
    for (int b = 0; b < n; b += CHUNK)                                                         \
        for (int j = b; j < b + CHUNK; j++) {                                                  \
            float t = x[j] * inv;                                                              \
            NEAREST                                                                            \
            float d = x[j] - step * l;                                                         \
            kk[j] = k;                                                                         \
            e[j] = w[j] * d * d;                                                               \
        }

/* grid_quant's terms w[j] (x[j] - step v)^2 into e[j], with the levels
 * (step != 0). */
static void grid_terms(const float *restrict x, const float *restrict w, int n, float step,
                       const grid *g, uint8_t *restrict idx, float *restrict e)
{
    float inv = 1.0f / step;
    int32_t kk[QKK / 8];
    if (g->mid) {
        TERMS_LOOP(IQ4_NEAREST)
    } else {
        float v0 = g->v[0], top = (float)(g->n - 1);
        TERMS_LOOP(INT_NEAREST)
    }
    for (int b = 0; b < n; b += CHUNK)
        for (int j = b; j < b + CHUNK; j++)
            idx[j] = (uint8_t)kk[j];
}

/* The sum of e[0..n) in order, or a number >= limit when that sum is
 * >= limit: a caller that only wants an error below limit then decides as
 * it would on the sum.  The terms are >= 0.  First a sum in another order
 * (lanes of a vector, then a tree; gcc vectorizes it): every order is
 * within (n - 1) 2^-24 relative of the exact sum for terms >= 0, so the
 * ordered sum is at least f (1 - 4e-6) for n <= 32, more than f times
 * 1 - 2^-12 rounded; an f that large against limit settles it (f >= 2^-100
 * keeps the product clear of subnormal rounding).  Otherwise the ordered
 * sum, stopped at the first partial sum that reaches limit (rounding is
 * monotone, so the rest cannot bring it back below).  n is a multiple of
 * CHUNK, at most 32. */
static float sum_below(const float *restrict e, int n, float limit)
{
    float a[CHUNK];
    for (int j = 0; j < CHUNK; j++)
        a[j] = e[j];
    for (int b = CHUNK; b < n; b += CHUNK)
        for (int j = 0; j < CHUNK; j++)
            a[j] += e[b + j];
    for (int j = 0; j < 8; j++)
        a[j] += a[j + 8];
    for (int j = 0; j < 4; j++)
        a[j] += a[j + 4];
    float f = (a[0] + a[2]) + (a[1] + a[3]);
    if (f >= 0x1p-100f && f * (1.0f - 0x1p-12f) >= limit)
        return f;
    float s = 0.0f;
    for (int j = 0; j < n; j++) {
        s += e[j];
        if (s >= limit)
            break;
    }
    return s;
}

/* grid_quant for a candidate that only counts if its error is below
 * limit (then idx is complete; otherwise it is not to be used). */
static float grid_try(const float *x, const float *w, int n, float step, const grid *g,
                      uint8_t *idx, float limit)
{
    if (step == 0.0f)
        return grid_quant(x, w, n, step, g, idx);
    float e[QKK / 8];
    grid_terms(x, w, n, step, g, idx, e);
    return sum_below(e, n, limit);
}

/* The least-squares step for the levels lv: sum w x v / sum w v^2 (0 when
 * every level is 0), the products first (vectorized), then the sums. */
static float grid_lsq(const float *restrict x, const float *restrict w, int n,
                      const float *restrict lv)
{
    float pxv[QKK / 8], pvv[QKK / 8];
    for (int b = 0; b < n; b += CHUNK)
        for (int j = b; j < b + CHUNK; j++) {
            pxv[j] = w[j] * x[j] * lv[j];
            pvv[j] = w[j] * lv[j] * lv[j];
        }
    float sxv = 0.0f, svv = 0.0f;
    for (int j = 0; j < n; j++) {
        sxv += pxv[j];
        svv += pvv[j];
    }
    return svv > 0.0f ? sxv / svv : 0.0f;
}

/* grid_lsq for LANES candidates at once (levels lv[c[i]]): the same
 * products and the same sums in the same order for each, but the
 * candidates' chains of dependent additions interleaved, so that they
 * overlap instead of waiting for each other. */
#define LANES 4 /* written out below */
static void grid_lsq_lanes(const float *restrict x, const float *restrict w, int n,
                           const float (*lv)[QKK / 8], const int *c, float *s)
{
    float pxv[LANES][QKK / 8], pvv[LANES][QKK / 8];
    for (int i = 0; i < LANES; i++) {
        const float *l = lv[c[i]];
        for (int b = 0; b < n; b += CHUNK)
            for (int j = b; j < b + CHUNK; j++) {
                pxv[i][j] = w[j] * x[j] * l[j];
                pvv[i][j] = w[j] * l[j] * l[j];
            }
    }
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f, b0 = 0.0f, b1 = 0.0f, b2 = 0.0f, b3 = 0.0f;
    for (int j = 0; j < n; j++) { /* named accumulators: registers */
        a0 += pxv[0][j];
        b0 += pvv[0][j];
        a1 += pxv[1][j];
        b1 += pvv[1][j];
        a2 += pxv[2][j];
        b2 += pvv[2][j];
        a3 += pxv[3][j];
        b3 += pvv[3][j];
    }
    s[0] = b0 > 0.0f ? a0 / b0 : 0.0f;
    s[1] = b1 > 0.0f ? a1 / b1 : 0.0f;
    s[2] = b2 > 0.0f ? a2 / b2 : 0.0f;
    s[3] = b3 > 0.0f ? a3 / b3 : 0.0f;
}

/* 1 when the levels a[0..n) and b[0..n) are equal. */
static int same_levels(const float *restrict a, const float *restrict b, int n)
{
    int d = 0;
    for (int c = 0; c < n; c += CHUNK)
        for (int j = c; j < c + CHUNK; j++)
            d |= a[j] != b[j];
    return !d;
}

/* The continuous step of one sub-block: the element of largest magnitude
 * is put on each level near either end of the grid in turn (factors 1.05
 * down to 0.70 of the end level), each candidate's levels get their
 * least-squares step, and the best is refined by alternating nearest
 * levels and least squares until it stops improving. */
static float grid_fit(const float *x, const float *w, int n, const grid *g)
{
    float xm = 0.0f;
    for (int j = 0; j < n; j++)
        if (fabsf(x[j]) > fabsf(xm))
            xm = x[j];
    if (xm == 0.0f)
        return 0.0f;
    /* First every candidate's levels.  Neighbouring candidates often put
     * every value on the same levels: then the step and the error are
     * those of the one before, which cannot be below beste, so only a
     * change of levels is evaluated (the same sums in the same order
     * either way).  Then the steps of those, LANES at a time, and last
     * their errors in the original order against the best so far. */
#define NCAND 72
    uint8_t ib[QKK / 8], tmp[QKK / 8];
    float lv[NCAND][QKK / 8], step[NCAND + LANES];
    int list[NCAND + LANES], nl = 0;
    for (int i = 0; i < NCAND; i++) {
        float top = i < NCAND / 2 ? g->v[0] : g->v[g->n - 1];
        int k = i % (NCAND / 2);
        grid_levels(x, n, g, (top * (1.05f - 0.01f * (float)k)) / xm, lv[i]);
        if (!i || !same_levels(lv[i], lv[i - 1], n)) /* the levels are distinct values */
            list[nl++] = i;
    }
    for (int i = nl; i < nl + LANES; i++) /* padding: the last one again */
        list[i] = list[nl - 1];
    for (int i = 0; i < nl; i += LANES)
        grid_lsq_lanes(x, w, n, lv, list + i, step + i);
    float best = 0.0f, beste = grid_quant(x, w, n, 0.0f, g, tmp);
    for (int i = 0; i < nl; i++) {
        float e = grid_try(x, w, n, step[i], g, tmp, beste);
        if (e < beste) {
            beste = e;
            best = step[i];
        }
    }
    float *lb = lv[0]; /* reused */
    /* lb: the levels at best, from one pass here and then from each
     * accepted refinement's own pass. */
    grid_quant(x, w, n, best, g, ib);
    for (int j = 0; j < n; j++)
        lb[j] = g->v[ib[j]];
    for (int it = 0; it < 4; it++) {
        float s = grid_lsq(x, w, n, lb);
        float e = grid_try(x, w, n, s, g, tmp, beste);
        if (!(e < beste))
            break;
        beste = e;
        best = s;
        for (int j = 0; j < n; j++)
            lb[j] = g->v[tmp[j]];
    }
    return best;
}

/* 2^-19: 32 units in the last place of f16's subnormals, so a smaller
 * scale is stored with a relative error above 1.5 %. */
#define F16_COARSE 1.9073486328125e-06f
#define TINY_SEEDS 12

/* The seed d, and when it is that small (a tiny block: weights around
 * 1e-4 and below), also d * 2, d * 4, ... up to 2^-19 (at most TINY_SEEDS
 * more): larger steps with smaller integer sub-scales, which f16 stores
 * better than a d that rounds to a few units or to zero.  Returns how
 * many it stored. */
static int tiny_seeds(float d, float *out)
{
    int n = 0;
    out[n++] = d;
    while (d != 0.0f && fabsf(d) < F16_COARSE && n <= TINY_SEEDS) {
        d *= 2.0f;
        out[n++] = d;
    }
    return n;
}

/* A super-block of nsub sub-blocks of len values with integer sub-scales
 * sc in [scmin, scmax] against one f16 scale d: y = (d * sc) * level. */
typedef struct symblk {
    float d;
    int sc[MAXSUB];
    uint8_t idx[QKK];
    float err;
} symblk;

/* For a fixed d: each sub-block's best sc among the integers next to
 * s[i] / d (and the previous choice), with its levels. */
static void sym_pick(const float *x, const float *w, int nsub, int len, const grid *g, int scmin,
                     int scmax, const float *s, float d, symblk *b)
{
    b->d = d;
    b->err = 0.0f;
    for (int i = 0; i < nsub; i++) {
        const float *xi = x + i * len, *wi = w + i * len;
        uint8_t tmp[QKK / 8];
        int c = d == 0.0f ? 0 : round_clamp(s[i] / d, scmin, scmax);
        /* sc = 0 first: a sub-block never ends up worse than all zeros
         * (a coarse subnormal d can put every candidate near s[i] / d
         * above that), and it is kept even if no error is finite. */
        float beste = grid_quant(xi, wi, len, 0.0f, g, b->idx + i * len);
        b->sc[i] = 0;
        for (int k = -2; k <= 2; k++) {
            int sc = c + k;
            if (sc < scmin || sc > scmax || sc == 0)
                continue;
            float e = grid_try(xi, wi, len, d * (float)sc, g, tmp, beste);
            if (e < beste) {
                beste = e;
                b->sc[i] = sc;
                memcpy(b->idx + i * len, tmp, (size_t)len);
            }
        }
        b->err += beste;
    }
}

/* The least-squares d for the integer sub-scales and levels of b. */
static float sym_refit(const float *x, const float *w, int nsub, int len, const grid *g,
                       const symblk *b)
{
    float sxa = 0.0f, saa = 0.0f;
    for (int i = 0; i < nsub; i++)
        for (int j = 0; j < len; j++) {
            float a = (float)b->sc[i] * g->v[b->idx[i * len + j]];
            sxa += w[i * len + j] * x[i * len + j] * a;
            saa += w[i * len + j] * a * a;
        }
    return saa > 0.0f ? sxa / saa : b->d;
}

/* Quantizes one super-block: continuous steps per sub-block, then two
 * seeds for d (the smallest positive and the smallest negative d that
 * keeps every sub-scale in range; the sign matters for asymmetric ranges
 * such as [-128, 127] and the IQ4 table), each improved by refitting d and
 * re-picking the sub-scales while the error falls.  The best is kept. */
static void sym_super(const float *x, const float *w, int nsub, int len, const grid *g, int scmin,
                      int scmax, symblk *out)
{
    float s[MAXSUB];
    float dpos = 0.0f, dneg = 0.0f;
    for (int i = 0; i < nsub; i++) {
        s[i] = grid_fit(x + i * len, w + i * len, len, g);
        float p = s[i] > 0.0f ? s[i] / (float)scmax : s[i] / (float)scmin;
        float q = s[i] > 0.0f ? s[i] / (float)scmin : s[i] / (float)scmax;
        if (p > dpos)
            dpos = p;
        if (q < dneg)
            dneg = q;
    }
    float seeds[2 + 2 * TINY_SEEDS];
    int ns = tiny_seeds(dpos, seeds);
    ns += tiny_seeds(dneg, seeds + ns);
    out->err = INFINITY;
    for (int k = 0; k < ns; k++) {
        symblk cur, nxt;
        sym_pick(x, w, nsub, len, g, scmin, scmax, s, f16r(seeds[k]), &cur);
        for (int it = 0; it < 4 && cur.d != 0.0f; it++) {
            float d = f16r(sym_refit(x, w, nsub, len, g, &cur));
            if (d == cur.d)
                break;
            sym_pick(x, w, nsub, len, g, scmin, scmax, s, d, &nxt);
            if (!(nxt.err < cur.err))
                break;
            cur = nxt;
        }
        if (k == 0 || cur.err < out->err)
            *out = cur;
    }
}

/* ======================================================================
 * Affine sub-blocks: y = (d * sc) * q - (dmin * m), q in [0, nmax]
 * (Q4_K, Q5_K)
 * ====================================================================== */

/* Nearest q for every value of a sub-block on the grid step * q - off,
 * and the weighted squared error. */
static float aff_quant(const float *x, const float *w, int n, int nmax, float step, float off,
                       uint8_t *q)
{
    float e = 0.0f;
    float inv = step > 0.0f ? 1.0f / step : 0.0f;
    for (int j = 0; j < n; j++) {
        int k = step > 0.0f ? round_clamp((x[j] + off) * inv, 0, nmax) : 0;
        float d = x[j] - (step * (float)k - off);
        q[j] = (uint8_t)k;
        e += w[j] * d * d;
    }
    return e;
}

/* aff_quant's nearest q for x[j] at a positive step, as round_clamp
 * computes it (the argument is clamped at 0 first: no step down). */
#define AFF_NEAREST                                                                                \
    float r = (x[j] + off) * inv + 0.5f;                                                           \
    r = r >= 0.0f ? r : 0.0f;                                                                      \
    r = r < top ? r : top;                                                                         \
    int k = (int)r;

/* aff_quant for a candidate that only counts if its error is below limit
 * (see sum_below); the levels and terms in chunks gcc vectorizes. */
static float aff_try(const float *restrict x, const float *restrict w, int n, int nmax, float step,
                     float off, uint8_t *restrict q, float limit)
{
    if (!(step > 0.0f))
        return aff_quant(x, w, n, nmax, step, off, q);
    float e[32], inv = 1.0f / step, top = (float)nmax;
    int32_t kk[32]; /* int32 lanes, then bytes: a byte store here costs unpacking */
    for (int b = 0; b < n; b += CHUNK)
        for (int j = b; j < b + CHUNK; j++) {
            AFF_NEAREST
            float d = x[j] - (step * (float)k - off);
            kk[j] = k;
            e[j] = w[j] * d * d;
        }
    for (int b = 0; b < n; b += CHUNK)
        for (int j = b; j < b + CHUNK; j++)
            q[j] = (uint8_t)kk[j];
    return sum_below(e, n, limit);
}

/* Every value's nearest q on the grid step * q - off (aff_quant's
 * levels, without the error), as floats. */
static void aff_levels(const float *restrict x, int n, int nmax, float step, float off,
                       float *restrict qf)
{
    if (!(step > 0.0f)) {
        for (int j = 0; j < n; j++)
            qf[j] = 0.0f;
        return;
    }
    float inv = 1.0f / step, top = (float)nmax;
    for (int b = 0; b < n; b += CHUNK)
        for (int j = b; j < b + CHUNK; j++) {
            AFF_NEAREST
            qf[j] = (float)k;
        }
}

/* Least squares for x ~ s q - m: the 2x2 normal equations.  The K-quants
 * store a non-negative min (m >= 0): when the equations want a negative m,
 * s alone with m = 0.  Q5_1's m has either sign (anysign).  Returns 0 when
 * the fit is degenerate (all q equal).  sw = sum w and sx = sum w x do
 * not depend on q: the caller sums them once per sub-block. */
static int aff_solve(float sw, float sx, float sq, float sqq, float sqx, int anysign, float *s,
                     float *m)
{
    float det = sw * sqq - sq * sq;
    if (det > 0.0f) {
        float a = (sw * sqx - sq * sx) / det;
        float b = (sqq * sx - sq * sqx) / det; /* the offset, -m */
        if ((anysign || b <= 0.0f) && a > 0.0f) {
            *s = a;
            *m = -b;
            return 1;
        }
    }
    if (sqq > 0.0f && sqx > 0.0f) {
        *s = sqx / sqq;
        *m = 0.0f;
        return 1;
    }
    return 0;
}

/* The q-dependent sums of aff_solve, sum w q, sum w q^2 and sum w q x:
 * the products first (vectorized), then the sums in index order. */
static void aff_sums(const float *restrict x, const float *restrict w, int n,
                     const float *restrict q, float *p)
{
    float pq[32], pqq[32], pqx[32];
    for (int b = 0; b < n; b += CHUNK)
        for (int j = b; j < b + CHUNK; j++) {
            float wv = w[j] * q[j];
            pq[j] = wv;
            pqq[j] = wv * q[j];
            pqx[j] = wv * x[j];
        }
    float sq = 0, sqq = 0, sqx = 0;
    for (int j = 0; j < n; j++) {
        sq += pq[j];
        sqq += pqq[j];
        sqx += pqx[j];
    }
    p[0] = sq;
    p[1] = sqq;
    p[2] = sqx;
}

/* aff_sums for two candidates (levels q[c[0]], q[c[1]]), their chains of
 * additions interleaved (as grid_lsq_lanes). */
static void aff_sums2(const float *restrict x, const float *restrict w, int n,
                      const float (*q)[32], const int *c, float (*p)[3])
{
    float pq[2][32], pqq[2][32], pqx[2][32];
    for (int i = 0; i < 2; i++)
        for (int b = 0; b < n; b += CHUNK)
            for (int j = b; j < b + CHUNK; j++) {
                float wv = w[j] * q[c[i]][j];
                pq[i][j] = wv;
                pqq[i][j] = wv * q[c[i]][j];
                pqx[i][j] = wv * x[j];
            }
    float a0 = 0, b0 = 0, c0 = 0, a1 = 0, b1 = 0, c1 = 0;
    for (int j = 0; j < n; j++) {
        a0 += pq[0][j];
        b0 += pqq[0][j];
        c0 += pqx[0][j];
        a1 += pq[1][j];
        b1 += pqq[1][j];
        c1 += pqx[1][j];
    }
    p[0][0] = a0;
    p[0][1] = b0;
    p[0][2] = c0;
    p[1][0] = a1;
    p[1][1] = b1;
    p[1][2] = c1;
}

/* The continuous (scale, min) of one sub-block: candidate scales that map
 * [min(x, 0), max(x)] (min(x) with anysign) onto nmax + delta steps (delta
 * from -4 to +4 by 0.2: the wide range lets an importance vector clip
 * unimportant extremes, 5 % less error on the outlier rows than +-1.5),
 * each refined by least squares, then the best refined by alternating
 * nearest levels and least squares. */
static void aff_fit(const float *x, const float *w, int n, int nmax, int anysign, float *s,
                    float *m)
{
    float lo = anysign ? x[0] : 0.0f, hi = x[0];
    for (int j = 0; j < n; j++) {
        if (x[j] < lo)
            lo = x[j];
        if (x[j] > hi)
            hi = x[j];
    }
    *s = 0.0f;
    *m = -lo;
    if (!(hi > lo))
        return; /* constant sub-block (x <= 0 everywhere equal): y = -m */
    float sw = 0.0f, sx = 0.0f;
    for (int j = 0; j < n; j++) {
        sw += w[j];
        sx += w[j] * x[j];
    }
    /* As in grid_fit: all candidates' levels, a candidate that gives the
     * one before's levels again skipped (same fit, same error), the sums
     * of the others two at a time, then their errors in order. */
#define NAFF 41
    uint8_t tmp[32];
    float qs[NAFF][32], q[32]; /* levels as floats */
    float sums[NAFF + 1][3];
    int list[NAFF + 1], nl = 0;
    for (int k = 0; k < NAFF; k++) {
        float step = (hi - lo) / ((float)nmax - 4.0f + 0.2f * (float)k);
        aff_levels(x, n, nmax, step, -lo, qs[k]);
        if (!k || !same_levels(qs[k], qs[k - 1], n))
            list[nl++] = k;
    }
    list[nl] = list[nl - 1]; /* padding */
    for (int i = 0; i < nl; i += 2)
        aff_sums2(x, w, n, qs, list + i, sums + i);
    float beste = aff_quant(x, w, n, nmax, 0.0f, -lo, tmp);
    for (int i = 0; i < nl; i++) {
        float cs, cm;
        if (!aff_solve(sw, sx, sums[i][0], sums[i][1], sums[i][2], anysign, &cs, &cm))
            continue;
        float e = aff_try(x, w, n, nmax, cs, cm, tmp, beste);
        if (e < beste) {
            beste = e;
            *s = cs;
            *m = cm;
        }
    }
    /* q: the levels at (s, m), then each accepted refinement's own. */
    if (*s > 0.0f)
        aff_levels(x, n, nmax, *s, *m, q);
    for (int it = 0; it < 4 && *s > 0.0f; it++) {
        float cs, cm, p[3];
        aff_sums(x, w, n, q, p);
        if (!aff_solve(sw, sx, p[0], p[1], p[2], anysign, &cs, &cm))
            break;
        float e = aff_try(x, w, n, nmax, cs, cm, tmp, beste);
        if (!(e < beste))
            break;
        beste = e;
        *s = cs;
        *m = cm;
        for (int j = 0; j < n; j++)
            q[j] = (float)tmp[j];
    }
}

/* The weighted mean of a sub-block (weights are positive somewhere). */
static float wmean(const float *x, const float *w, int n)
{
    float sx = 0.0f, sw = 0.0f;
    for (int j = 0; j < n; j++) {
        sx += w[j] * x[j];
        sw += w[j];
    }
    return sw > 0.0f ? sx / sw : 0.0f;
}

typedef struct affblk {
    float d, dmin;
    int sc[8], mn[8];
    uint8_t q[QKK];
    float err;
} affblk;

/* For fixed d and dmin: each sub-block's best (sc, m) within 2 of
 * round(s[i] / d) and round(m[i] / dmin) (6 bits each), with its levels
 * (+-1 alone gives 0.5-2 % more error). */
static void aff_pick(const float *x, const float *w, int nmax, const float *s, const float *m,
                     float d, float dmin, affblk *b)
{
    b->d = d;
    b->dmin = dmin;
    b->err = 0.0f;
    for (int i = 0; i < 8; i++) {
        const float *xi = x + 32 * i, *wi = w + 32 * i;
        uint8_t tmp[32];
        int cs = d > 0.0f ? round_clamp(s[i] / d, 0, 63) : 0;
        int cm = dmin > 0.0f ? round_clamp(m[i] / dmin, 0, 63) : 0;
        if (d == 0.0f && dmin > 0.0f) /* only the min is left: the best constant */
            cm = round_clamp(-wmean(xi, wi, 32) / dmin, 0, 63);
        /* (0, 0) first: a sub-block never ends up worse than all zeros,
         * and it is kept even if no error is finite. */
        float beste = aff_quant(xi, wi, 32, nmax, 0.0f, 0.0f, b->q + 32 * i);
        b->sc[i] = b->mn[i] = 0;
        for (int a = cs - 2; a <= cs + 2; a++)
            for (int c = cm - 2; c <= cm + 2; c++) {
                if (a < 0 || a > 63 || c < 0 || c > 63 || (d == 0.0f && a) ||
                    (dmin == 0.0f && c) || (a == 0 && c == 0))
                    continue;
                float e = aff_try(xi, wi, 32, nmax, d * (float)a, dmin * (float)c, tmp, beste);
                if (e < beste) {
                    beste = e;
                    b->sc[i] = a;
                    b->mn[i] = c;
                    memcpy(b->q + 32 * i, tmp, 32);
                }
            }
        b->err += beste;
    }
}

/* Least squares for (d, dmin) with the integers of b fixed: y = d a - dmin c
 * with a = sc * q, c = m.  dmin is kept >= 0 and d > 0. */
static int aff_refit(const float *x, const float *w, const affblk *b, float *d, float *dmin)
{
    float saa = 0, sac = 0, scc = 0, sxa = 0, sxc = 0;
    for (int j = 0; j < QKK; j++) {
        float a = (float)b->sc[j / 32] * (float)b->q[j];
        float c = -(float)b->mn[j / 32];
        saa += w[j] * a * a;
        sac += w[j] * a * c;
        scc += w[j] * c * c;
        sxa += w[j] * x[j] * a;
        sxc += w[j] * x[j] * c;
    }
    float det = saa * scc - sac * sac;
    if (det > 0.0f) {
        float u = (scc * sxa - sac * sxc) / det, v = (saa * sxc - sac * sxa) / det;
        if (u > 0.0f && v >= 0.0f) {
            *d = u;
            *dmin = v;
            return 1;
        }
    }
    return 0;
}

/* One Q4_K / Q5_K super-block: continuous fits, d = max s / 63 and
 * dmin = max m / 63, then refits of (d, dmin) with re-picked integers
 * while the error falls. */
static void aff_super(const float *x, const float *w, int nmax, affblk *out)
{
    float s[8], m[8], smax = 0.0f, mmax = 0.0f;
    for (int i = 0; i < 8; i++) {
        aff_fit(x + 32 * i, w + 32 * i, 32, nmax, 0, &s[i], &m[i]);
        if (s[i] > smax)
            smax = s[i];
        if (m[i] > mmax)
            mmax = m[i];
    }
    /* Tiny blocks: also larger d and dmin together (see tiny_seeds). */
    float d0 = smax / 63.0f, seeds[1 + TINY_SEEDS];
    int ns = tiny_seeds(d0 > mmax / 63.0f ? d0 : mmax / 63.0f, seeds);
    for (int k = 0; k < ns; k++) {
        float f = (float)(1 << k); /* seeds[k] = seeds[0] * 2^k */
        affblk cur;
        aff_pick(x, w, nmax, s, m, f16r(f * smax / 63.0f), f16r(f * mmax / 63.0f), &cur);
        for (int it = 0; it < 4; it++) {
            float d, dmin;
            if (!aff_refit(x, w, &cur, &d, &dmin))
                break;
            d = f16r(d);
            dmin = f16r(dmin);
            if (d == cur.d && dmin == cur.dmin)
                break;
            affblk nxt;
            aff_pick(x, w, nmax, s, m, d, dmin, &nxt);
            if (!(nxt.err < cur.err))
                break;
            cur = nxt;
        }
        if (k == 0 || cur.err < out->err)
            *out = cur;
    }
}

/* ======================================================================
 * Packing, one function per layout (see gguf_dequant.c for the reading)
 * ====================================================================== */

/* Q4_K and Q5_K's 12 bytes of 6-bit scales and mins: 0-3 the low 6 bits
 * of sc 0-3 with the top 2 bits of sc 4-7, 4-7 the same for the mins,
 * 8-11 the low nibbles of sc 4-7 and (high nibble) m 4-7. */
static void pack_k4_scales(const affblk *b, uint8_t *p)
{
    for (int j = 0; j < 4; j++) {
        p[j] = (uint8_t)(b->sc[j] | (b->sc[j + 4] >> 4) << 6);
        p[j + 4] = (uint8_t)(b->mn[j] | (b->mn[j + 4] >> 4) << 6);
        p[j + 8] = (uint8_t)((b->sc[j + 4] & 15) | (b->mn[j + 4] & 15) << 4);
    }
}

static void block_q4_k(const float *x, const float *w, uint8_t *p)
{
    affblk b;
    aff_super(x, w, 15, &b);
    wr16(p, b.d);
    wr16(p + 2, b.dmin);
    pack_k4_scales(&b, p + 4);
    uint8_t *qs = p + 16;
    for (int g = 0; g < 4; g++)
        for (int l = 0; l < 32; l++)
            qs[32 * g + l] = (uint8_t)(b.q[64 * g + l] | b.q[64 * g + 32 + l] << 4);
}

static void block_q5_k(const float *x, const float *w, uint8_t *p)
{
    affblk b;
    aff_super(x, w, 31, &b);
    wr16(p, b.d);
    wr16(p + 2, b.dmin);
    pack_k4_scales(&b, p + 4);
    uint8_t *qh = p + 16, *qs = p + 48;
    memset(qh, 0, 32);
    for (int g = 0; g < 4; g++)
        for (int l = 0; l < 32; l++) {
            int lo = b.q[64 * g + l], hi = b.q[64 * g + 32 + l];
            qs[32 * g + l] = (uint8_t)((lo & 15) | (hi & 15) << 4);
            qh[l] |= (uint8_t)((lo >> 4) << (2 * g) | (hi >> 4) << (2 * g + 1));
        }
}

/* Q6_K: ql[128], qh[64], int8 scales[16], d.  Each half of 128 values:
 * quarter u (32 values) keeps its low nibbles in ql[32 (u & 1) + l] (low
 * nibble for u < 2, high for u >= 2) and its top two bits in bits 2u, 2u+1
 * of qh[l]; stored q = level index (level + 32). */
static void block_q6_k(const float *x, const float *w, uint8_t *p)
{
    symblk b;
    sym_super(x, w, 16, 16, &q6_grid, -128, 127, &b);
    uint8_t *ql = p, *qh = p + 128;
    memset(p, 0, 192);
    for (int h = 0; h < 2; h++)
        for (int u = 0; u < 4; u++)
            for (int l = 0; l < 32; l++) {
                int q = b.idx[128 * h + 32 * u + l];
                ql[64 * h + 32 * (u & 1) + l] |= (uint8_t)((q & 15) << (u < 2 ? 0 : 4));
                qh[32 * h + l] |= (uint8_t)((q >> 4) << (2 * u));
            }
    for (int i = 0; i < 16; i++)
        p[192 + i] = (uint8_t)(int8_t)b.sc[i];
    wr16(p + 208, b.d);
}

/* IQ4_XS: d, scales_h (2 bits per sub-block), scales_l (a nibble per
 * sub-block), then per sub-block 16 bytes: value j in the low nibble and
 * value j + 16 in the high nibble of byte j; stored scale = sc + 32. */
static void block_iq4_xs(const float *x, const float *w, uint8_t *p)
{
    symblk b;
    sym_super(x, w, 8, 32, &iq4_grid, -32, 31, &b);
    wr16(p, b.d);
    unsigned sh = 0;
    memset(p + 4, 0, 4);
    for (int i = 0; i < 8; i++) {
        int ls = b.sc[i] + 32;
        p[4 + i / 2] |= (uint8_t)((ls & 15) << (4 * (i % 2)));
        sh |= (unsigned)(ls >> 4) << (2 * i);
        for (int j = 0; j < 16; j++)
            p[8 + 16 * i + j] = (uint8_t)(b.idx[32 * i + j] | b.idx[32 * i + j + 16] << 4);
    }
    p[2] = (uint8_t)sh;
    p[3] = (uint8_t)(sh >> 8);
}

/* A block of 32 with one f16 step (Q5_0, IQ4_NL): the continuous step,
 * then the f16 values around it, the best kept. */
static float single_block(const float *x, const float *w, const grid *g, uint8_t *idx)
{
    uint8_t tmp[32];
    float s = grid_fit(x, w, 32, g);
    float d = f16r(s), beste = grid_quant(x, w, 32, d, g, idx);
    uint16_t h0 = ml_f32_to_f16(d);
    for (int k = -2; k <= 2; k++) { /* neighbouring f16 values of the same sign */
        uint16_t h = (uint16_t)(h0 + k);
        if (!k || (h & 0x7fff) >= 0x7c00 || ((h ^ h0) & 0x8000))
            continue;
        float c = ml_f16_to_f32(h), e = grid_try(x, w, 32, c, g, tmp, beste);
        if (e < beste) {
            beste = e;
            d = c;
            memcpy(idx, tmp, 32);
        }
    }
    if (grid_quant(x, w, 32, 0.0f, g, tmp) < beste) { /* never worse than zeros */
        d = 0.0f;
        memcpy(idx, tmp, 32);
    }
    return d;
}

/* Q5_0: d, 32 high bits, 16 bytes of low nibbles (Q4_0 order: value j low,
 * value j + 16 high); stored q = level + 16. */
static void block_q5_0(const float *x, const float *w, uint8_t *p)
{
    uint8_t idx[32];
    wr16(p, single_block(x, w, &q5_grid, idx));
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        p[6 + j] = (uint8_t)((idx[j] & 15) | (idx[j + 16] & 15) << 4);
        qh |= (uint32_t)(idx[j] >> 4) << j | (uint32_t)(idx[j + 16] >> 4) << (j + 16);
    }
    ml__wr32(p + 2, qh);
}

/* IQ4_NL: d, 16 bytes of table indices in Q4_0 order. */
static void block_iq4_nl(const float *x, const float *w, uint8_t *p)
{
    uint8_t idx[32];
    wr16(p, single_block(x, w, &iq4_grid, idx));
    for (int j = 0; j < 16; j++)
        p[2 + j] = (uint8_t)(idx[j] | idx[j + 16] << 4);
}

/* Q5_1: d, m, 32 high bits, 16 bytes of low nibbles; y = q d + m.  The
 * continuous fit with a min of either sign, then the f16 values around d
 * and m (two steps each way), the best pair kept. */
static void block_q5_1(const float *x, const float *w, uint8_t *p)
{
    uint8_t q[32], tmp[32];
    float s, m;
    aff_fit(x, w, 32, 31, 1, &s, &m);
    float d = f16r(s), b = f16r(-m); /* b: the stored min, y = d q + b */
    float beste = aff_quant(x, w, 32, 31, d, -b, q), bd = d, bb = b;
    uint16_t hd = ml_f32_to_f16(d), hb = ml_f32_to_f16(b);
    for (int i = -2; i <= 2; i++)
        for (int k = -2; k <= 2; k++) {
            uint16_t h1 = (uint16_t)(hd + i), h2 = (uint16_t)(hb + k);
            /* Same sign and finite: no wrap-around into the other half. */
            if ((h1 & 0x7fff) >= 0x7c00 || ((h1 ^ hd) & 0x8000) || (h2 & 0x7fff) >= 0x7c00 ||
                ((h2 ^ hb) & 0x8000))
                continue;
            float c1 = ml_f16_to_f32(h1), c2 = ml_f16_to_f32(h2);
            float e = aff_try(x, w, 32, 31, c1, -c2, tmp, beste);
            if (e < beste) {
                beste = e;
                bd = c1;
                bb = c2;
                memcpy(q, tmp, 32);
            }
        }
    if (aff_quant(x, w, 32, 31, 0.0f, 0.0f, tmp) < beste) { /* never worse than zeros */
        bd = bb = 0.0f;
        memcpy(q, tmp, 32);
    }
    wr16(p, bd);
    wr16(p + 2, bb);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        p[8 + j] = (uint8_t)((q[j] & 15) | (q[j + 16] & 15) << 4);
        qh |= (uint32_t)(q[j] >> 4) << j | (uint32_t)(q[j + 16] >> 4) << (j + 16);
    }
    ml__wr32(p + 4, qh);
}

/* ======================================================================
 * The row function
 * ====================================================================== */

typedef void (*block_fn)(const float *x, const float *w, uint8_t *p);

static block_fn block_of(ml_type t, int *sub)
{
    switch (t) {
    case ML_TYPE_Q4_K: *sub = 32; return block_q4_k;
    case ML_TYPE_Q5_K: *sub = 32; return block_q5_k;
    case ML_TYPE_Q6_K: *sub = 16; return block_q6_k;
    case ML_TYPE_IQ4_XS: *sub = 32; return block_iq4_xs;
    case ML_TYPE_Q5_0: *sub = 32; return block_q5_0;
    case ML_TYPE_IQ4_NL: *sub = 32; return block_iq4_nl;
    case ML_TYPE_Q5_1: *sub = 32; return block_q5_1;
    default: return NULL;
    }
}

/* Rows of n values of type t (n a multiple of its block, checked by the
 * caller) into out: each block prepared (clamped, weighted) and searched. */
static void kquant_rows(ml_type t, const float *x, size_t n, const float *imp, uint8_t *out)
{
    int sub;
    uint32_t elems, bytes;
    block_fn fn = block_of(t, &sub);
    if (!fn || !ml_type_block(t, &elems, &bytes, NULL))
        return;
    float xc[QKK], w[QKK];
    for (size_t b = 0; b < n / elems; b++) {
        prepare(x + b * elems, imp ? imp + b * elems : NULL, (int)elems, sub, xc, w);
        fn(xc, w, out + b * bytes);
    }
}

#endif
