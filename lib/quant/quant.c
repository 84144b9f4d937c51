/* quant.c - the scalar reference quantizers of the .mlb format (mlb(5),
 * "Quantization rule"): Q8_0 with f32 and f16 scales, Q4_0 by the weighted
 * fit search and by llama.cpp's rounding, importance weighting,
 * dequantization and the q8_mask class names.  Whole matrices and threads
 * are in quant_matrix.c.
 *
 * Every line of arithmetic here is part of the format's definition: the
 * SIMD kernels and any other writer must reproduce it bit for bit.  So the
 * operations are written exactly as documented (a division where the spec
 * says divide, no reciprocal shortcuts), the build has -ffp-contract=off,
 * and every sum has one fixed order.  The decisions where the spec is
 * silent are listed in docs/quant-decisions.md. */
#include "quant/quant_impl.h"

#include <float.h>
#include <math.h>

#define QK ML_QK

/* ======================================================================
 * Q8_0
 * ====================================================================== */

/* amax by fabsf and compare; a NaN never compares greater, so it is
 * ignored, in the scalar code and in a SIMD max that keeps the old value. */
static float amax_of(const float *x, int n)
{
    float amax = 0.0f;
    for (int j = 0; j < n; j++) {
        float a = fabsf(x[j]);
        if (a > amax)
            amax = a;
    }
    return amax;
}

static float block_amax(const float *x)
{
    return amax_of(x, QK);
}

/* trunc(x * id + copysign(0.5, x)) clamped to [-127, 127]; a NaN product
 * gives 0.  Clamping before the conversion is the same as after it (trunc
 * is monotonic and 127 an integer) and keeps the conversion defined. */
static int8_t q8_round(float x, float id)
{
    float v = x * id + copysignf(0.5f, x);
    if (v >= 127.0f)
        return 127;
    if (v <= -127.0f)
        return -127;
    if (v != v)
        return 0;
    return (int8_t)(int)v;
}

void ml__q8_block(const float *x, int8_t *q, float *d)
{
    float amax = block_amax(x);
    if (amax < 1e-30f) { /* spec: 127 / amax would overflow */
        *d = 0.0f;
        memset(q, 0, QK);
        return;
    }
    *d = amax / 127.0f;
    float id = 127.0f / amax;
    for (int j = 0; j < QK; j++)
        q[j] = q8_round(x[j], id);
}

static int f16_is_inf(uint16_t h)
{
    return (h & 0x7fff) == 0x7c00;
}

int ml__q8_block_f16(const float *x, int8_t *q, uint16_t *d16, float *too_big)
{
    float amax = block_amax(x);
    if (amax < 1e-30f) {
        *d16 = 0;
        memset(q, 0, QK);
        return 0;
    }
    float d32 = amax / 127.0f;
    uint16_t h = ml_f32_to_f16(d32);
    if (f16_is_inf(h)) { /* spec: a scale above 65504 cannot be stored */
        *too_big = d32;
        return -1;
    }
    *d16 = h;
    float d = ml_f16_to_f32(h);
    if (d == 0.0f) { /* d rounded to zero: every weight is 0 whatever q is */
        memset(q, 0, QK);
        return 0;
    }
    float id = 1.0f / d; /* spec: against the rounded d */
    for (int j = 0; j < QK; j++)
        q[j] = q8_round(x[j], id);
    return 0;
}

void ml_quantize_row_q8_0(const float *x, size_t n, int8_t *q, float *d)
{
    for (size_t b = 0; b < n / QK; b++)
        ml__q8_block(x + b * QK, q + b * QK, d + b);
}

/* The Q8_0 recipe over 256 elements: kernels.h's K activations. */
void ml_quantize_row_q8_k(const float *x, size_t n, int8_t *q, float *d)
{
    for (size_t k = 0; k < n / 256; k++, x += 256, q += 256) {
        const float amax = amax_of(x, 256);
        if (amax < 1e-30f) {
            d[k] = 0.0f;
            memset(q, 0, 256);
            continue;
        }
        d[k] = amax / 127.0f;
        const float id = 127.0f / amax;
        for (int j = 0; j < 256; j++)
            q[j] = q8_round(x[j], id);
    }
}

ml_status ml_quantize_row_q8_0_f16(const float *x, size_t n, int8_t *q, uint16_t *d16,
                                   ml_error *err)
{
    float big;
    for (size_t b = 0; b < n / QK; b++)
        if (ml__q8_block_f16(x + b * QK, q + b * QK, d16 + b, &big))
            return ml__err(err, ML_E_UNSUPPORTED, "", -1,
                           "columns %zu-%zu: the scale %g is above 65504, the largest f16",
                           b * QK, b * QK + QK - 1, (double)big);
    return ML_OK;
}

/* ======================================================================
 * Q4_0 helpers
 * ====================================================================== */

/* The element of largest magnitude, the first one on ties; *amax gets
 * its magnitude (0 for an all-zero block; NaNs are ignored). */
static float block_xmax(const float *x, float *amax)
{
    float m = 0.0f, xm = 0.0f;
    for (int j = 0; j < QK; j++) {
        float a = fabsf(x[j]);
        if (a > m) {
            m = a;
            xm = x[j];
        }
    }
    *amax = m;
    return xm;
}

static void pack_nibbles(const uint8_t *nib, uint8_t *qs)
{
    for (int j = 0; j < QK / 2; j++)
        qs[j] = (uint8_t)(nib[j] | nib[j + QK / 2] << 4);
}

static void zero_block_q4(uint8_t *qs, float *d)
{
    *d = 0.0f;
    memset(qs, 0x88, QK / 2); /* level 0 everywhere */
}

/* ======================================================================
 * Q4_0, llama.cpp's rounding (--q4-rule round)
 * ====================================================================== */

void ml__q4_round_block(const float *x, uint8_t *qs, float *d)
{
    float amax;
    float xmax = block_xmax(x, &amax);
    float dd = xmax / -8.0f;
    float id = dd != 0.0f ? 1.0f / dd : 0.0f;
    if (!(fabsf(id) <= FLT_MAX)) /* |d| < 2^-128: the reciprocal overflowed */
        id = 0.0f;
    uint8_t nib[QK];
    for (int j = 0; j < QK; j++) {
        float v = x[j] * id + 8.5f;
        /* trunc, at most 15; below 0 (NaN included) becomes 0 */
        nib[j] = v >= 15.0f ? 15 : v > 0.0f ? (uint8_t)v : 0;
    }
    *d = dd;
    pack_nibbles(nib, qs);
}

void ml_quantize_row_q4_0_round(const float *x, size_t n, uint8_t *qs, float *d)
{
    for (size_t b = 0; b < n / QK; b++)
        ml__q4_round_block(x + b * QK, qs + b * (QK / 2), d + b);
}

/* ======================================================================
 * Q4_0, the weighted fit search (the reference writer's default)
 * ====================================================================== */

const float ml__q4_levels[ML__Q4_CANDIDATES] = {
    -6.0f, -6.2f, -6.4f, -6.6f, -6.8f, -7.0f, -7.2f, -7.4f, -7.6f, -7.8f, -8.0f, -8.2f, -8.4f,
};

/* Blocks whose largest magnitude is outside [1e-6, 1e6] are fitted scaled
 * to 1.  The lower bound is the spec's (float32 squares and cubes would
 * underflow); the upper one is ours (fourth powers in the error would
 * overflow near 1e9). */
#define FIT_SMALL 1e-6f
#define FIT_LARGE 1e6f

static inline float sum32(const float *a)
{
    float p[8];
    for (int i = 0; i < 8; i++)
        p[i] = a[i];
    for (int j = 8; j < QK; j += 8)
        for (int i = 0; i < 8; i++)
            p[i] += a[j + i];
    return ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7]));
}

float ml__sum32(const float *a)
{
    return sum32(a);
}

/* round(t) with ties to even, for |t| <= 2^22: adding and removing
 * 1.5 * 2^23 leaves no fraction bits, so the float addition rounds.  Stored
 * in float variables so excess precision (x87) cannot survive. */
static float round_even(float t)
{
    const float magic = 12582912.0f; /* 0x1.8p23 */
    float u = t + magic;
    float r = u - magic;
    return r;
}

/* A candidate's levels round(y * s) clamped to [-8, 7], and the products
 * w y l and w l^2 for its two sums.  |y * s| <= 8.4 (plus rounding) for
 * finite input, so the conversion to int is defined; clamping the integer
 * is the same as clamping before rounding (-8 and 7 are integers) and
 * lets the compiler vectorize without fast-math.  The levels are kept as
 * ints (li) and as floats (lv); the result is non-zero when li differs
 * from prev. */
static int32_t cand_levels(const float *restrict y, const float *restrict w,
                           const float *restrict wy, float s, int32_t *restrict li,
                           const int32_t *restrict prev, float *restrict lv, float *restrict a,
                           float *restrict b)
{
    int32_t diff = 0;
    for (int j = 0; j < QK; j++) {
        int32_t l = (int32_t)round_even(y[j] * s);
        l = l < -8 ? -8 : l;
        l = l > 7 ? 7 : l;
        diff |= l ^ prev[j];
        li[j] = l;
        float lf = (float)l;
        lv[j] = lf;
        a[j] = wy[j] * lf;
        b[j] = w[j] * (lf * lf);
    }
    return diff;
}

/* sum(w (y - d l)^2) in the fixed order. */
static float cand_error(const float *restrict y, const float *restrict w,
                        const float *restrict lv, float d)
{
    float a[QK];
    for (int j = 0; j < QK; j++) {
        float e = y[j] - d * lv[j];
        a[j] = w[j] * (e * e);
    }
    return sum32(a);
}

/* d = sum(w y l) / sum(w l^2); 0 when every weight is 0. */
static float cand_d(const float *a, const float *b)
{
    float sxl = sum32(a), sll = sum32(b);
    return sll > 0.0f ? sxl / sll : 0.0f;
}

float ml__q4_candidate(const float *y, const float *w, const float *wy, float ymax, int k,
                       float *levels, float *err)
{
    float a[QK], b[QK];
    int32_t li[QK], prev[QK] = {0};
    cand_levels(y, w, wy, ml__q4_levels[k] / ymax, li, prev, levels, a, b);
    float d = cand_d(a, b);
    *err = cand_error(y, w, levels, d);
    return d;
}

/* llama.cpp's weights imp * sqrt(s^2 + x^2), divided by the block's
 * sqrt(s^2 + amax^2): a factor shared by the whole block, which changes no
 * comparison in exact arithmetic but keeps the weights in (0, imp] for
 * tiny and huge blocks alike.  Double precision, rounded to float. */
static void imatrix_weights(const float *x, const float *imp, double s2, float amax, float *w)
{
    double den = s2 + (double)amax * (double)amax;
    for (int j = 0; j < QK; j++) {
        double xj = x[j];
        w[j] = (float)((double)imp[j] * sqrt((s2 + xj * xj) / den));
    }
}

/* Non-finite values become 0, so the fit is defined on any input (the
 * matrix function refuses such input before it gets here). */
static void finite_or_zero(const float *x, float *out)
{
    for (int j = 0; j < QK; j++) {
        uint32_t u;
        memcpy(&u, &x[j], 4);
        u &= (u & 0x7f800000u) == 0x7f800000u ? 0u : 0xffffffffu;
        memcpy(&out[j], &u, 4);
    }
}

/* The search: every candidate's levels, d and error; the smallest error
 * wins, the first on ties.  Levels only grow in magnitude from one
 * candidate to the next, so a candidate can repeat only its predecessor's
 * levels; it would then have the same d and error and could not win, so
 * it is skipped.  Returns d, fills best with the winner's levels. */
static float fit_search(const float *y, const float *w, const float *wy, float ymax,
                        int32_t *best)
{
    int32_t li[2][QK], *cur = li[0], *prev = li[1];
    float lv[QK], a[QK], b[QK];
    float best_err = 0.0f, best_d = 0.0f;
    for (int k = 0; k < ML__Q4_CANDIDATES; k++) {
        int32_t changed = cand_levels(y, w, wy, ml__q4_levels[k] / ymax, cur, prev, lv, a, b);
        if (k > 0 && !changed)
            continue;
        float d = cand_d(a, b);
        float e = cand_error(y, w, lv, d);
        if (k == 0 || e < best_err) {
            best_err = e;
            best_d = d;
            memcpy(best, cur, sizeof li[0]);
        }
        int32_t *t = cur;
        cur = prev;
        prev = t;
    }
    return best_d;
}

void ml__q4_fit_block(const float *x_in, const float *imp, double s2, uint8_t *qs, float *d)
{
    float x[QK];
    finite_or_zero(x_in, x);
    float amax;
    float xmax = block_xmax(x, &amax);
    if (amax == 0.0f) {
        zero_block_q4(qs, d);
        return;
    }
    int scaled = amax < FIT_SMALL || amax > FIT_LARGE;
    float y[QK], w[QK], wy[QK];
    if (scaled)
        for (int j = 0; j < QK; j++)
            y[j] = x[j] / amax;
    else
        memcpy(y, x, sizeof y);
    float ymax = scaled ? xmax / amax : xmax;
    if (imp)
        imatrix_weights(x, imp, s2, amax, w);
    else
        for (int j = 0; j < QK; j++)
            w[j] = y[j] * y[j];
    for (int j = 0; j < QK; j++)
        wy[j] = w[j] * y[j];

    int32_t best[QK];
    float dd = fit_search(y, w, wy, ymax, best);
    uint8_t nib[QK];
    for (int j = 0; j < QK; j++)
        nib[j] = (uint8_t)(best[j] + 8);
    *d = scaled ? dd * amax : dd;
    pack_nibbles(nib, qs);
}

double ml__row_mean_sq(const float *x, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)x[i] * (double)x[i];
    return n ? s / (double)n : 0.0;
}

void ml_quantize_row_q4_0_fit(const float *x, size_t n, const float *imp, uint8_t *qs, float *d)
{
    double s2 = imp ? ml__row_mean_sq(x, n) : 0.0;
    for (size_t b = 0; b < n / QK; b++)
        ml__q4_fit_block(x + b * QK, imp ? imp + b * QK : NULL, s2, qs + b * (QK / 2), d + b);
}

ml_status ml_quant_scales_to_f16(const float *d, size_t n, uint16_t *out, ml_error *err)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t h = ml_f32_to_f16(d[i]);
        if ((h & 0x7c00) == 0x7c00)
            return ml__err(err, ML_E_UNSUPPORTED, "", -1,
                           "scale %zu: %g is not finite or above 65504, the largest f16", i,
                           (double)d[i]);
        out[i] = h;
    }
    return ML_OK;
}

/* ======================================================================
 * Dequantization
 * ====================================================================== */

void ml_dequantize_row_q8_0(const int8_t *q, const float *d, size_t n, float *y)
{
    for (size_t i = 0; i < n / QK * QK; i++)
        y[i] = (float)q[i] * d[i / QK];
}

void ml_dequantize_row_q4_0(const uint8_t *qs, const float *d, size_t n, float *y)
{
    for (size_t b = 0; b < n / QK; b++) {
        const uint8_t *p = qs + b * (QK / 2);
        float *o = y + b * QK;
        for (int j = 0; j < QK / 2; j++) {
            o[j] = (float)((p[j] & 0x0f) - 8) * d[b];
            o[j + QK / 2] = (float)((p[j] >> 4) - 8) * d[b];
        }
    }
}

/* ======================================================================
 * Importance
 * ====================================================================== */

ml_status ml_quant_importance(const double *sums, size_t n, uint64_t tokens, float *imp,
                              ml_error *err)
{
    if (n == 0)
        return ml__err(err, ML_E_INVAL, "", -1, "no channels");
    if (tokens == 0)
        return ml__err(err, ML_E_INVAL, "", -1,
                       "no tokens were summed: quantize this matrix without importances");
    double total = 0.0;
    for (size_t c = 0; c < n; c++) {
        if (!(sums[c] >= 0.0) || !isfinite(sums[c]))
            return ml__err(err, ML_E_FORMAT, "", -1,
                           "channel %zu: sum of squares %g is negative or not finite", c,
                           sums[c]);
        total += sums[c] / (double)tokens;
    }
    if (!isfinite(total))
        return ml__err(err, ML_E_FORMAT, "", -1, "the sums of squares overflow when added");
    double mean = total / (double)n;
    for (size_t c = 0; c < n; c++) {
        double r = mean > 0.0 ? (sums[c] / (double)tokens) / mean : 1.0;
        imp[c] = (float)(r < 0.001 ? 0.001 : r);
    }
    return ML_OK;
}

/* ======================================================================
 * q8_mask classes
 * ====================================================================== */

static const struct {
    const char *name;
    uint32_t bits;
} q8_items[] = {
    {"tok_emb", ML_Q8_TOK_EMB}, {"wcls", ML_Q8_WCLS}, {"wq", ML_Q8_WQK}, {"wk", ML_Q8_WQK},
    {"wg", ML_Q8_WQK},          {"lqkv", ML_Q8_WQK},  {"wv", ML_Q8_WV},  {"lz", ML_Q8_WV},
    {"wo", ML_Q8_WO},           {"lout", ML_Q8_WO},   {"w1", ML_Q8_W13}, {"w3", ML_Q8_W13},
    {"w2", ML_Q8_W2},           {"all", ML_Q8_ALL},   {"none", 0},
};

ml_status ml_q8_mask_parse(const char *list, uint32_t *mask, ml_error *err)
{
    uint32_t m = 0;
    const char *p = list;
    while (*p) {
        size_t len = strcspn(p, ",");
        if (len) {
            size_t i, n = sizeof q8_items / sizeof q8_items[0];
            for (i = 0; i < n; i++)
                if (strlen(q8_items[i].name) == len && !memcmp(q8_items[i].name, p, len))
                    break;
            if (i == n)
                return ml__err(err, ML_E_INVAL, "q8_mask", -1,
                               "unknown matrix class \"%.*s\" (expected tok_emb, wcls, wq, wk, "
                               "wg, lqkv, wv, lz, wo, lout, w1, w3, w2, all or none)",
                               len > 32 ? 32 : (int)len, p);
            m |= q8_items[i].bits;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    *mask = m;
    return ML_OK;
}

const char *ml_q8_class_name(uint32_t bit)
{
    switch (bit) {
    case ML_Q8_TOK_EMB: return "tok_emb";
    case ML_Q8_WCLS: return "wcls";
    case ML_Q8_WQK: return "wq,wk";
    case ML_Q8_WV: return "wv";
    case ML_Q8_WO: return "wo";
    case ML_Q8_W13: return "w1,w3";
    case ML_Q8_W2: return "w2";
    }
    return NULL;
}
