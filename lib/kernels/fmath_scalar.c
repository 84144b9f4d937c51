/* fmath_scalar.c - the reference float32 products of fmath.h, written as the
 * definitions read; the scalar kernel table and the NEON ones use them
 * (the choice is the kernel table's: dispatch.c). */
#include "kernels/fmath.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Element i of a cache row, f32 or f16 (widened exactly): the products
 * below are written once for both cache types. */
static inline float elem(const void *v, size_t i, int h)
{
    return h ? ml_f16_to_f32(((const uint16_t *)v)[i]) : ((const float *)v)[i];
}

static void gemm_any(size_t m, const float *const *a, size_t n, const void *B, int h, size_t ldb,
                     size_t width, float s0, float *const *out)
{
    for (size_t i = 0; i < m; i++) {
        float *o = out[i];
        for (size_t c = 0; c < width; c++)
            o[c] = s0 * o[c];
        for (size_t r = 0; r < n; r++)
            for (size_t c = 0; c < width; c++)
                o[c] = fmaf(a[i][r], elem(B, r * ldb + c, h), o[c]);
    }
}

static void dots_any(size_t m, const float *const *a, size_t nk, const void *b, int h,
                     size_t ldb, size_t n, float *out, size_t ldo)
{
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < nk; j++) {
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (size_t e = 0; e < n; e++)
                acc[e % 8] = fmaf(a[i][e], elem(b, j * ldb + e, h), acc[e % 8]);
            out[i * ldo + j] = ml__fold8(acc);
        }
}

static void gemm(size_t m, const float *const *a, size_t n, const float *B, size_t ldb,
                 size_t width, float s0, float *const *out)
{
    gemm_any(m, a, n, B, 0, ldb, width, s0, out);
}

static void dots(size_t m, const float *const *a, size_t nk, const float *b, size_t ldb, size_t n,
                 float *out, size_t ldo)
{
    dots_any(m, a, nk, b, 0, ldb, n, out, ldo);
}

/* gemm and dots over f16 rows: the same loops on the widened values. */
static void gemm_h(size_t m, const float *const *a, size_t n, const uint16_t *B, size_t ldb,
                   size_t width, float s0, float *const *out)
{
    gemm_any(m, a, n, B, 1, ldb, width, s0, out);
}

static void dots_h(size_t m, const float *const *a, size_t nk, const uint16_t *b, size_t ldb,
                   size_t n, float *out, size_t ldo)
{
    dots_any(m, a, nk, b, 1, ldb, n, out, ldo);
}

static void to_f16(uint16_t *h, const float *x, size_t n)
{
    for (size_t c = 0; c < n; c++)
        h[c] = ml_f32_to_f16(x[c]);
}

static void madd(float *y, const float *w, const float *x, size_t n)
{
    for (size_t c = 0; c < n; c++)
        y[c] += w[c] * x[c];
}

float ml__fmath_exp_neg(float a)
{
    if (a < ML_FMATH_EXP_MIN)
        return 0;
    float t = a * ML_FMATH_LOG2E + ML_FMATH_ROUND;
    float n = t - ML_FMATH_ROUND;
    float r = a - n * ML_FMATH_LN2_HI;
    r = r - n * ML_FMATH_LN2_LO;
    float p = ML_FMATH_P0;
    p = p * r + ML_FMATH_P1;
    p = p * r + ML_FMATH_P2;
    p = p * r + ML_FMATH_P3;
    p = p * r + ML_FMATH_P4;
    p = p * r + ML_FMATH_P5;
    float e = p * (r * r) + r + 1.0f;
    uint32_t bits;
    memcpy(&bits, &t, 4);
    int32_t ni = (int32_t)(bits - ML_FMATH_ROUND_BITS); /* n, at least -93 after the cut */
    uint32_t b = (uint32_t)(ni + 127) << 23;
    float s;
    memcpy(&s, &b, 4);
    return e * s;
}

static void silu(float *y, const float *x, size_t n, int mul)
{
    for (size_t c = 0; c < n; c++) {
        float v = x[c];
        float e = ml__fmath_exp_neg(-fabsf(v));
        float s = (v >= 0 ? v : v * e) / (1.0f + e);
        y[c] = mul ? y[c] * s : s;
    }
}

static void glu(float *x, const float *g, size_t n, int gelu)
{
    for (size_t c = 0; c < n; c++) {
        float v = x[c];
        float w = gelu ? ML_FMATH_GELU_K * (v + ML_FMATH_GELU_A * (v * (v * v))) : v;
        float e = ml__fmath_exp_neg(-fabsf(w));
        x[c] = (w >= 0 ? v : v * e) / (1.0f + e) * g[c];
    }
}

static void exp_norm(float *x, size_t n, float shift)
{
    float s[8] = {0};
    for (size_t c = 0; c < n; c++) {
        x[c] = ml__fmath_exp_neg(x[c] - shift);
        s[c % 8] += x[c];
    }
    float sum = ml__fold8(s);
    for (size_t c = 0; c < n; c++)
        x[c] = x[c] / sum;
}

static float scale_max(float *x, size_t n, float scale)
{
    float max = -INFINITY;
    for (size_t c = 0; c < n; c++) {
        x[c] = x[c] * scale;
        if (x[c] > max)
            max = x[c];
    }
    return max;
}

const ml_fmath ml__fmath_scalar = {
    .name = "scalar",
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

void ml__rmsnorm(float *out, const float *x, const float *w, uint32_t n, float eps)
{
    double ss = 0;
    for (uint32_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    float inv = ml__rmsnorm_inv(ss, n, eps);
    for (uint32_t i = 0; i < n; i++)
        out[i] = x[i] * inv * w[i];
}

void ml__rmsnorm_rows(float *out, size_t ldo, const float *x, size_t ldx, const float *w,
                      uint32_t n, size_t rows, float eps)
{
    for (size_t r = 0; r < rows; r++)
        ml__rmsnorm(out + r * ldo, x + r * ldx, w, n, eps);
}

float ml__sigmoid(float x)
{
    return 1.0f / (1.0f + expf(-x));
}
