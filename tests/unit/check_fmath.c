/* check_fmath.c - the float32 products of lib/kernels/fmath.h: each
 * implementation this CPU runs gives the reference's bits for every tile
 * remainder (rows, columns, terms, lengths not multiples of the tiles),
 * the reference computes the definitions (against double sums), the
 * dots follow the documented lane order bit for bit, and the exponential,
 * SiLU and softmax's normalization are accurate and identical everywhere,
 * special values too; the f16 forms of the products are the f32 ones on
 * the widened halves, and the rounding to f16 is ml_f32_to_f16's. */
#include "suites.h"
#include "testutil.h"

#include "kernels/fmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void fill(float *p, size_t n, tu_rng *r)
{
    for (size_t i = 0; i < n; i++) /* wide range of magnitudes: rounding shows any reordering */
        p[i] = (float)((double)(int32_t)tu_next(r) / 2147483648.0 *
                       ldexp(1, (int)tu_below(r, 12) - 6));
}

/* The implementations this CPU runs, the reference first. */
static size_t variants(const ml_fmath *v[3])
{
    size_t n = 0;
    v[n++] = &ml__fmath_scalar;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        v[n++] = &ml__fmath_avx2;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))
        v[n++] = &ml__fmath_avx512;
#endif
    return n;
}

enum { MAXR = 15, MAXN = 70, MAXW = 100 }; /* rows: past dots_t's 12 */

/* gemm: rows 1-15, widths 1-97 (tiles of 16, 32 and 64 columns and their
 * remainders), 0-64 terms, s0 of 0.75 and 1. */
START_TEST(test_gemm)
{
    static const size_t widths[] = {1, 7, 8, 9, 16, 17, 24, 33, 40, 64, 65, 72, 97},
                        terms[] = {0, 1, 5, 64};
    const ml_fmath *v[3];
    size_t nv = variants(v);
    tu_rng r = {42};
    float *a = malloc(MAXR * MAXN * 4), *B = malloc(MAXN * MAXW * 4);
    float *o0 = malloc(MAXR * MAXW * 4), *o = malloc(MAXR * MAXW * 4);
    ck_assert(a && B && o0 && o);
    fill(a, MAXR * MAXN, &r);
    fill(B, MAXN * MAXW, &r);
    for (size_t m = 1; m <= MAXR; m++)
        for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
            for (size_t ni = 0; ni < 4; ni++) {
                size_t w = widths[wi], n = terms[ni];
                float s0 = ni % 2 ? 1.0f : 0.75f;
                const float *ap[MAXR];
                float *p0[MAXR], *p[MAXR];
                fill(o0, MAXR * MAXW, &r);
                for (size_t i = 0; i < m; i++)
                    ap[i] = a + i * MAXN, p0[i] = o0 + i * MAXW, p[i] = o + i * MAXW;
                float before[MAXR * MAXW];
                memcpy(before, o0, sizeof before);
                memcpy(o, o0, sizeof before);
                ml__fmath_scalar.gemm(m, ap, n, B, MAXW, w, s0, p0);
                for (size_t i = 0; i < MAXR; i++) /* the definition, and nothing outside */
                    for (size_t c = 0; c < MAXW; c++) {
                        double want = before[i * MAXW + c], mag = fabs(want);
                        if (i < m && c < w) {
                            want *= s0;
                            for (size_t k = 0; k < n; k++) {
                                want += (double)ap[i][k] * B[k * MAXW + c];
                                mag += fabs((double)ap[i][k] * B[k * MAXW + c]);
                            }
                        }
                        /* float rounding: at most 2^-24 of the magnitude per operation */
                        double tol = (double)(2 * n + 2) * 0x1p-24 * mag;
                        ck_assert_msg(fabs(o0[i * MAXW + c] - want) <= tol,
                                      "reference: m %zu w %zu n %zu (%zu,%zu)", m, w, n, i, c);
                    }
                for (size_t k = 1; k < nv; k++) {
                    memcpy(o, before, sizeof before);
                    v[k]->gemm(m, ap, n, B, MAXW, w, s0, p);
                    ck_assert_msg(memcmp(o, o0, sizeof before) == 0,
                                  "variant %zu: m %zu, width %zu, %zu terms: differs", k, m, w, n);
                }
            }
    free(a), free(B), free(o0), free(o);
}
END_TEST

/* fmath.h's order for one dot product, written out from its comment:
 * acc[e % 8] = fmaf(a[e], b[e], acc[e % 8]), then the pairwise fold. */
static float spec_dot(const float *a, const float *b, size_t n)
{
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (size_t e = 0; e < n; e++)
        acc[e % 8] = fmaf(a[e], b[e], acc[e % 8]);
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

/* Key counts of the dots tests: the AVX2 form with 12 rows or more
 * moves keys by eights into tiles of 16 and 8, in blocks of 64 at length
 * 64 (fmath_avx2.c dots_t), the AVX-512 form into tiles of 32 and 16
 * (masked), so the counts cross each of those edges. */
static const size_t key_counts[] = {1,  2,  3,  5,  8,  9,  15, 16, 17, 23,
                                    31, 32, 33, 40, 48, 49, 64, 65, 70};
enum { MAXK = 70 };

/* dots: rows 1-15 of a against 1-70 rows of b, lengths 1-70; the bits of
 * that order, which differs from a left-to-right sum on values built to
 * tell them apart. */
START_TEST(test_dots)
{
    static const size_t lens[] = {1, 7, 8, 13, 16, 64, 70};
    const ml_fmath *v[3];
    size_t nv = variants(v);
    tu_rng r = {7};
    float *a = malloc(MAXR * MAXN * 4), *b = malloc(MAXK * MAXN * 4);
    float *out = malloc(MAXR * MAXK * 4);
    ck_assert(a && b && out);
    fill(a, MAXR * MAXN, &r);
    fill(b, MAXK * MAXN, &r);
    for (size_t m = 1; m <= MAXR; m++)
        for (size_t ki = 0; ki < sizeof key_counts / sizeof key_counts[0]; ki++)
            for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                size_t n = lens[li], nk = key_counts[ki];
                const float *ap[MAXR];
                for (size_t i = 0; i < m; i++)
                    ap[i] = a + i * MAXN;
                for (size_t k = 0; k < nv; k++) {
                    for (size_t i = 0; i < MAXR * MAXK; i++)
                        out[i] = -1;
                    v[k]->dots(m, ap, nk, b, MAXN, n, out, MAXK);
                    for (size_t i = 0; i < MAXR; i++)
                        for (size_t j = 0; j < MAXK; j++) {
                            if (i >= m || j >= nk) {
                                ck_assert(out[i * MAXK + j] == -1);
                                continue;
                            }
                            float want = spec_dot(ap[i], b + j * MAXN, n);
                            ck_assert_msg(memcmp(&want, &out[i * MAXK + j], 4) == 0,
                                          "variant %zu: m %zu nk %zu n %zu (%zu,%zu)", k, m, nk,
                                          n, i, j);
                        }
                }
            }
    /* 1e8 in lane 0, then 1 in lanes 1..7, then -1e8 in lane 0: lane order
     * keeps the ones (8 - 1 = 7), a left-to-right sum loses them. */
    const float x[16] = {1e8f, 1, 1, 1, 1, 1, 1, 1, -1e8f, 0, 0, 0, 0, 0, 0, 0};
    const float *xp[1] = {x};
    float ones[16], got;
    for (int i = 0; i < 16; i++)
        ones[i] = 1;
    for (size_t k = 0; k < nv; k++) {
        v[k]->dots(1, xp, 1, ones, 16, 16, &got, 1);
        ck_assert_msg(got == 7.0f, "variant %zu: %g", k, (double)got);
    }
    free(a), free(b), free(out);
}
END_TEST

/* ulps between two finite floats of the same sign */
static double ulps(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    return fabs((double)ia - (double)ib);
}

/* Equal bits, NaN matching any NaN (its sign and payload mean nothing). */
static int same(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], 4) != 0 && !(isnan(a[i]) && isnan(b[i])))
            return 0;
    return 1;
}

/* The exponential: within 2 ulp of exp over [-64, 0] (a sweep of 2^20
 * points), exactly 0 below -64 (the next float down, and a sweep to -110,
 * where exp would be normal, then subnormal: never a subnormal result),
 * exactly 1 at 0, NaN for NaN. */
START_TEST(test_exp)
{
    double worst = 0;
    for (uint32_t i = 0; i <= 1u << 20; i++) {
        float a = ML_FMATH_EXP_MIN * (float)i / (float)(1u << 20);
        float got = ml__fmath_exp_neg(a), want = (float)exp((double)a);
        double u = ulps(got, want);
        if (u > worst)
            worst = u;
    }
    ck_assert_msg(worst <= 2, "worst error %g ulp", worst);
    ck_assert(ml__fmath_exp_neg(ML_FMATH_EXP_MIN) > 0);
    ck_assert(ml__fmath_exp_neg(nextafterf(ML_FMATH_EXP_MIN, -INFINITY)) == 0.0f);
    for (float a = ML_FMATH_EXP_MIN - 0.001f; a > -110.0f; a -= 0.01f)
        ck_assert_msg(ml__fmath_exp_neg(a) == 0.0f, "exp(%g)", (double)a);
    ck_assert(ml__fmath_exp_neg(0.0f) == 1.0f && ml__fmath_exp_neg(-0.0f) == 1.0f);
    ck_assert(ml__fmath_exp_neg(-104.5f) == 0.0f && ml__fmath_exp_neg(-INFINITY) == 0.0f);
    ck_assert(isnan(ml__fmath_exp_neg(NAN)));
}
END_TEST

/* SiLU, the FFN's SiLU and GELU products, and madd: every implementation
 * gives the reference's bits over random values of every magnitude, zeros,
 * infinities and NaN, at every length (vector bodies and remainders); SiLU
 * within 4 ulp of double x / (1 + e^-x), the products within 6 ulp of
 * double act(x)·g (plus, for GELU, the 6|u| ulp its rounded argument
 * costs in the far negative tail), where the results and the
 * exponentials are normal floats. */
START_TEST(test_elementwise)
{
    const ml_fmath *v[3];
    size_t nv = variants(v);
    enum { N = 4099 };
    tu_rng r = {3};
    float *x = malloc(N * 4), *w = malloc(N * 4), *y0 = malloc(N * 4), *y = malloc(N * 4);
    ck_assert(x && w && y0 && y);
    for (size_t i = 0; i < N; i++) {
        double mag = ldexp(1, (int)tu_below(&r, 20) - 10);
        if (i % 4 == 0) /* plenty in GELU's tail, -20..-3 */
            mag = 0.2;
        x[i] = (float)((double)(int32_t)tu_next(&r) / 2147483648.0 * mag * 100);
    }
    const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 87.5f, -87.5f, 88.0f, -88.0f,
                             -200.0f, 1e-30f, -1e-30f};
    memcpy(x + 100, special, sizeof special);
    fill(w, N, &r);
    for (int mul = 0; mul <= 1; mul++) {
        memcpy(y0, w, N * 4);
        ml__fmath_scalar.silu(y0, x, N, mul);
        for (size_t i = 0; i < N && !mul; i++) {
            double want = (double)x[i] / (1 + exp(-(double)x[i]));
            if (isnan(x[i]) || (x[i] == -INFINITY)) {
                ck_assert(isnan(y0[i]));
                continue;
            }
            if (!isfinite(want))
                continue;
            if (-fabs((double)x[i]) < ML_FMATH_EXP_MIN) { /* e cut to 0: x, or -0 */
                ck_assert_msg(y0[i] == (x[i] > 0 ? x[i] : 0.0f), "silu(%g) = %g past the cut",
                              (double)x[i], (double)y0[i]);
                continue;
            }
            if (fabs(want) < 1.2e-38)
                continue; /* a subnormal result keeps only a few bits */
            ck_assert_msg(ulps(y0[i], (float)want) <= 4, "silu(%g) = %g, not %g", (double)x[i],
                          (double)y0[i], want);
        }
        for (size_t k = 1; k < nv; k++)
            for (size_t len = 0; len <= 17; len++) { /* every remainder, then everything */
                size_t n = len == 17 ? N : len;
                memcpy(y, w, N * 4);
                v[k]->silu(y, x, n, mul);
                memcpy(y0, w, N * 4);
                ml__fmath_scalar.silu(y0, x, n, mul);
                ck_assert_msg(same(y, y0, N), "silu variant %zu, n %zu, mul %d", k, n, mul);
            }
    }
    for (int gelu = 0; gelu <= 1; gelu++) {
        memcpy(y0, x, N * 4);
        ml__fmath_scalar.glu(y0, w, N, gelu);
        for (size_t i = 0; i < N; i++) {
            double xv = x[i], u = 0.7978845608028654 * (xv + 0.044715 * xv * xv * xv);
            /* 0.5·x·(1 + tanh(u)) = x / (1 + e^-2u), without the cancellation */
            double want = xv / (1 + exp(gelu ? -2 * u : -xv)) * w[i];
            double e = exp(-fabs(gelu ? 2 * u : xv));
            if (!isfinite(want) || fabs(want) < 1.2e-38)
                continue; /* specials are compared between variants below */
            /* past the cut e is 0: v·g, or ±0 (GELU's argument, rounded in
             * float, may fall either side of it within 1) */
            if (e < exp((double)ML_FMATH_EXP_MIN - 1)) {
                ck_assert_msg(y0[i] == (xv > 0 ? x[i] * w[i] : 0.0f),
                              "%s(%g) * %g = %g past the cut", gelu ? "gelu" : "silu", xv,
                              (double)w[i], (double)y0[i]);
                continue;
            }
            if (e < exp((double)ML_FMATH_EXP_MIN + 1))
                continue;
            /* GELU's argument 2u, rounded in float by four operations,
             * is off by up to ~3 ulp, which the exponential turns into
             * up to 6|u| ulp where the result is ~x·e^-2|u| (measured:
             * 204 ulp at x = -9.6, a result of 1e-33) */
            double tol = 6 + (gelu ? 6 * fabs(u) : 0);
            ck_assert_msg(ulps(y0[i], (float)want) <= tol, "%s(%g) * %g = %g, not %g",
                          gelu ? "gelu" : "silu", xv, (double)w[i], (double)y0[i], want);
        }
        for (size_t k = 1; k < nv; k++)
            for (size_t len = 0; len <= 17; len++) {
                size_t n = len == 17 ? N : len;
                memcpy(y0, x, N * 4);
                memcpy(y, x, N * 4);
                ml__fmath_scalar.glu(y0, w, n, gelu);
                v[k]->glu(y, w, n, gelu);
                ck_assert_msg(same(y, y0, N), "glu variant %zu, n %zu, gelu %d", k, n, gelu);
            }
    }
    for (size_t k = 1; k < nv; k++) {
        memcpy(y0, x, N * 4);
        memcpy(y, x, N * 4);
        ml__fmath_scalar.madd(y0, w, x + 1, N - 1);
        v[k]->madd(y, w, x + 1, N - 1);
        ck_assert(same(y, y0, N));
    }
    memcpy(y, x, N * 4);
    ml__fmath_scalar.madd(y, w, x + 1, 5);
    for (size_t i = 0; i < N; i++) {
        float want = i < 5 ? x[i] + w[i] * x[i + 1] : x[i];
        ck_assert(memcmp(&want, &y[i], 4) == 0);
    }
    free(x), free(w), free(y0), free(y);
}
END_TEST

/* Softmax's exp_norm: every implementation gives the reference's bits at
 * every length (vector bodies and remainders), with scores far below the
 * maximum among them (0 below exp_neg's cut, never a subnormal share:
 * they cost Intel cores a microcode assist apiece); the reference is
 * within 4 ulp of the softmax in double of its arguments x − max (as
 * rounded in float, which any float softmax does), sums to 1 within n ulp, and
 * gives 1 for a single score and equal shares for equal ones. */
START_TEST(test_exp_norm)
{
    const ml_fmath *v[3];
    size_t nv = variants(v);
    enum { N = 1031 };
    tu_rng r = {5};
    float *x = malloc(N * 4), *y0 = malloc(N * 4), *y = malloc(N * 4);
    ck_assert(x && y0 && y);
    for (size_t i = 0; i < N; i++) /* attention-like scores, a few far below */
        x[i] = (float)((double)(int32_t)tu_next(&r) / 2147483648.0 * (i % 7 == 0 ? 300 : 12));
    for (size_t len = 1; len <= 40; len++) {
        size_t n = len == 40 ? N : len;
        float max = -INFINITY;
        for (size_t i = 0; i < n; i++)
            max = x[i] > max ? x[i] : max;
        memcpy(y0, x, N * 4);
        ml__fmath_scalar.exp_norm(y0, n, max);
        double sum = 0, got = 0; /* of the arguments as rounded in float */
        for (size_t i = 0; i < n; i++)
            sum += exp((double)(x[i] - max));
        for (size_t i = 0; i < n; i++) {
            double want = exp((double)(x[i] - max)) / sum;
            got += y0[i];
            ck_assert_msg(fpclassify(y0[i]) != FP_SUBNORMAL, "n %zu: subnormal %g", n,
                          (double)y0[i]);
            if (x[i] - max < ML_FMATH_EXP_MIN)
                ck_assert_msg(y0[i] == 0.0f, "n %zu: %g below the cut", n, (double)y0[i]);
            else
                ck_assert_msg(ulps(y0[i], (float)want) <= 4, "n %zu: %g, not %g (%g ulp)", n,
                              (double)y0[i], want, ulps(y0[i], (float)want));
        }
        ck_assert_msg(fabs(got - 1) <= (double)n * 6e-8, "n %zu: sum %g", n, got);
        for (size_t i = n; i < N; i++)
            ck_assert(memcmp(&y0[i], &x[i], 4) == 0);
        for (size_t k = 1; k < nv; k++) {
            memcpy(y, x, N * 4);
            v[k]->exp_norm(y, n, max);
            ck_assert_msg(same(y, y0, N), "exp_norm variant %zu, n %zu", k, n);
        }
    }
    /* Scores near each other: every share counts in the sum, and a lane
     * one ulp off may vanish in the fold, so many trials show its order. */
    for (size_t trial = 0; trial < 40; trial++) {
        size_t n = N - trial;
        float max = -INFINITY;
        for (size_t i = 0; i < n; i++) {
            x[i] = (float)((double)(int32_t)tu_next(&r) / 2147483648.0 * 12);
            max = x[i] > max ? x[i] : max;
        }
        memcpy(y0, x, N * 4);
        ml__fmath_scalar.exp_norm(y0, n, max);
        for (size_t k = 1; k < nv; k++) {
            memcpy(y, x, N * 4);
            v[k]->exp_norm(y, n, max);
            ck_assert_msg(same(y, y0, N), "exp_norm variant %zu, near scores, n %zu", k, n);
        }
    }
    for (size_t k = 0; k < nv; k++) {
        float one[1] = {-3.5f}, eq[11];
        v[k]->exp_norm(one, 1, -3.5f);
        ck_assert(one[0] == 1.0f);
        for (size_t i = 0; i < 11; i++)
            eq[i] = 2.25f;
        v[k]->exp_norm(eq, 11, 2.25f);
        for (size_t i = 0; i < 11; i++)
            ck_assert(eq[i] == 1.0f / 11.0f);
    }
    free(x), free(y0), free(y);
}
END_TEST

/* The f16 forms: gemm_h and dots_h give gemm's and dots' bits on the
 * widened halves, for every row count, width, term count and length of
 * the f32 tests; to_f16 is ml_f32_to_f16 on every variant, for values
 * across the whole range (subnormal halves, ties, overflow, infinities,
 * NaN). */
START_TEST(test_half_forms)
{
    static const size_t widths[] = {1, 7, 8, 9, 16, 17, 33, 64, 65, 97}, terms[] = {0, 1, 5, 64},
                        lens[] = {1, 7, 8, 13, 16, 64, 70};
    const ml_fmath *v[3];
    size_t nv = variants(v);
    tu_rng r = {1616};
    float *a = malloc(MAXR * MAXN * 4), *B = malloc(MAXN * MAXW * 4);
    uint16_t *Bh = malloc(MAXN * MAXW * 2);
    float *o0 = malloc(MAXR * MAXW * 4), *o = malloc(MAXR * MAXW * 4), *init = malloc(MAXR * MAXW * 4);
    ck_assert(a && B && Bh && o0 && o && init);
    fill(a, MAXR * MAXN, &r);
    fill(B, MAXN * MAXW, &r);
    for (size_t i = 0; i < MAXN * MAXW; i++) { /* B as the halves widen */
        Bh[i] = ml_f32_to_f16(B[i]);
        B[i] = ml_f16_to_f32(Bh[i]);
    }
    fill(init, MAXR * MAXW, &r);
    const float *ap[MAXR];
    float *p0[MAXR], *p[MAXR];
    for (size_t i = 0; i < MAXR; i++)
        ap[i] = a + i * MAXN, p0[i] = o0 + i * MAXW, p[i] = o + i * MAXW;
    for (size_t m = 1; m <= MAXR; m++) {
        for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
            for (size_t ni = 0; ni < 4; ni++) {
                size_t w = widths[wi], n = terms[ni];
                memcpy(o0, init, MAXR * MAXW * 4);
                ml__fmath_scalar.gemm(m, ap, n, B, MAXW, w, 1.0f, p0);
                for (size_t k = 0; k < nv; k++) {
                    memcpy(o, init, MAXR * MAXW * 4);
                    v[k]->gemm_h(m, ap, n, Bh, MAXW, w, 1.0f, p);
                    ck_assert_msg(memcmp(o, o0, MAXR * MAXW * 4) == 0,
                                  "gemm_h %s: m %zu width %zu terms %zu", v[k]->name, m, w, n);
                }
            }
        for (size_t ki = 0; ki < sizeof key_counts / sizeof key_counts[0]; ki++)
            for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                size_t n = lens[li], nk = key_counts[ki];
                for (size_t i = 0; i < MAXR * MAXK; i++)
                    o0[i] = o[i] = -1;
                ml__fmath_scalar.dots(m, ap, nk, B, MAXN, n, o0, MAXK);
                for (size_t k = 0; k < nv; k++) {
                    for (size_t i = 0; i < MAXR * MAXK; i++)
                        o[i] = -1;
                    v[k]->dots_h(m, ap, nk, Bh, MAXN, n, o, MAXK);
                    ck_assert_msg(memcmp(o, o0, MAXR * MAXK * 4) == 0,
                                  "dots_h %s: m %zu nk %zu n %zu", v[k]->name, m, nk, n);
                }
            }
    }
    enum { NX = 4099 };
    float *x = malloc(NX * 4);
    uint16_t *h = malloc(NX * 2);
    ck_assert(x && h);
    for (size_t i = 0; i < NX; i++) { /* random bits: every exponent, NaNs too */
        uint32_t bits = (uint32_t)tu_next(&r);
        if (i % 3 == 0) /* near and below the half range's ends */
            bits = (bits & 0x807fffffu) | (uint32_t)(101 + i % 44) << 23;
        if (i % 7 == 0) /* exact ties between two halves */
            bits = (bits & 0xffffe000u) | 0x1000u;
        memcpy(&x[i], &bits, 4);
    }
    x[0] = INFINITY, x[1] = -INFINITY, x[2] = 65520.0f, x[3] = 65519.0f, x[4] = -0.0f;
    for (size_t k = 0; k < nv; k++) {
        memset(h, 0, NX * 2);
        v[k]->to_f16(h, x, NX);
        for (size_t i = 0; i < NX; i++)
            ck_assert_msg(h[i] == ml_f32_to_f16(x[i]), "to_f16 %s: %a (%zu): %04x, not %04x",
                          v[k]->name, (double)x[i], i, h[i], ml_f32_to_f16(x[i]));
    }
    free(x), free(h);
    free(a), free(B), free(Bh), free(o0), free(o), free(init);
}
END_TEST

/* scale_max: the scaled values bit for bit and the same maximum (by
 * value: a zero's sign may be either's) on every variant, for lengths
 * around the vector width, with NaNs, infinities and zeros of both signs
 * among the values. */
START_TEST(test_scale_max)
{
    enum { N = 37 };
    const ml_fmath *v[3];
    size_t nv = variants(v);
    tu_rng r = {99};
    float x[N], y0[N], y[N];
    for (int round = 0; round < 50; round++) {
        fill(x, N, &r);
        for (int i = 0; i < round % 6; i++) /* specials at random places */
            x[tu_below(&r, N)] = (float[]){NAN, -INFINITY, INFINITY, 0.0f, -0.0f, -1e30f}[i];
        for (size_t n = 0; n <= N; n++) {
            memcpy(y0, x, sizeof x);
            float m0 = ml__fmath_scalar.scale_max(y0, n, 0.125f);
            for (size_t k = 0; k < nv; k++) {
                memcpy(y, x, sizeof x);
                float m = v[k]->scale_max(y, n, 0.125f);
                ck_assert_msg(memcmp(y, y0, sizeof y) == 0, "scale_max %s: n %zu", v[k]->name, n);
                ck_assert_msg(m == m0 && !isnan(m), "scale_max %s: n %zu: %g, not %g", v[k]->name,
                              n, (double)m, (double)m0);
            }
        }
    }
}
END_TEST

/* rmsnorm_rows: every variant gives ml__rmsnorm's bits row by row, for
 * 1-19 rows (the 8-row groups and their remainders), lengths 1 to 640
 * (Gemma 3's width), rows apart (ldx > n) and in place, magnitudes whose
 * squares leave float's range (the sum is a double), zero rows (1 /
 * sqrt(eps)) and specials. */
START_TEST(test_rmsnorm_rows)
{
    enum { ROWS = 19, LD = 650 };
    static const uint32_t lens[] = {1, 7, 16, 17, 64, 256, 640};
    const ml_fmath *v[3];
    size_t nv = variants(v);
    tu_rng r = {101};
    float *x = malloc(sizeof(float) * ROWS * LD), *w = malloc(sizeof(float) * LD);
    float *want = malloc(sizeof(float) * ROWS * LD), *got = malloc(sizeof(float) * ROWS * LD);
    ck_assert(x && w && want && got);
    for (int round = 0; round < 4; round++)
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            const uint32_t n = lens[li];
            const size_t ld = round % 2 ? LD : n; /* apart, or back to back */
            fill(x, ROWS * LD, &r);
            fill(w, LD, &r);
            if (round == 2)
                for (size_t i = 0; i < ROWS * LD; i++)
                    x[i] *= i % 3 ? 1e30f : 1e-30f;
            if (round == 3) {
                memset(x + 2 * ld, 0, n * sizeof(float));                   /* a zero row */
                x[5 * ld + n / 2] = (float[]){NAN, INFINITY}[n % 2];         /* specials */
            }
            for (size_t rows = 1; rows <= ROWS; rows++)
                for (size_t k = 0; k < nv; k++)
                    for (int inplace = 0; inplace < 2; inplace++) {
                        for (size_t i = 0; i < rows; i++)
                            ml__rmsnorm(want + i * ld, x + i * ld, w, n, 1e-6f);
                        memcpy(got, x, sizeof(float) * ROWS * LD);
                        v[k]->rmsnorm_rows(got, ld, inplace ? got : x, ld, w, n, rows, 1e-6f);
                        for (size_t i = 0; i < rows; i++)
                            ck_assert_msg(memcmp(got + i * ld, want + i * ld,
                                                 n * sizeof(float)) == 0,
                                          "rmsnorm_rows %s: %zu rows of %u (ld %zu), row %zu%s",
                                          v[k]->name, rows, n, ld, i,
                                          inplace ? ", in place" : "");
                    }
        }
    free(x);
    free(w);
    free(want);
    free(got);
}
END_TEST

/* gemm's and dots' terms are fused multiply-adds (fmath.h): x·y - (x·y
 * rounded) is 2^-24 (f32) or 2^-33 (f16 keys) when fused, 0 when not, in
 * every variant and tile (rows 1-13: dots_t from 12; widths and key
 * counts across the 16, 32 and 64 tiles). */
START_TEST(test_fused)
{
    static const float xs[2] = {1 + 0x1p-12f, 1 + 0x1p-13f + 0x1p-23f};
    static const float ys[2] = {1 + 0x1p-12f, 1 + 0x1p-10f}; /* ys[1]: an f16 */
    const ml_fmath *v[3];
    size_t nv = variants(v);
    enum { R = 13, W = 100, N = 16 };
    for (int h = 0; h < 2; h++) {
        const float x = xs[h], y = ys[h], c = -(x * y), want = fmaf(x, y, c);
        ck_assert(want != 0);
        uint16_t yh[W];
        float yf[W], a[R][N] = {{0}}, b[W][N] = {{0}}, o[R][W], dout[R * W];
        uint16_t bh[W][N] = {{0}};
        for (size_t j = 0; j < W; j++) {
            yf[j] = y, yh[j] = ml_f32_to_f16(y);
            b[j][0] = 1, b[j][8] = y;
            bh[j][0] = ml_f32_to_f16(1), bh[j][8] = yh[j];
        }
        const float *ap[R], *gp[R];
        float *op[R], gx[R];
        for (size_t i = 0; i < R; i++) {
            a[i][0] = c, a[i][8] = x, ap[i] = a[i];
            gx[i] = x, gp[i] = &gx[i], op[i] = o[i];
        }
        for (size_t k = 0; k < nv; k++)
            for (size_t m = 1; m <= R; m += 3)
                for (size_t w = 1; w <= W; w += 33) {
                    for (size_t i = 0; i < R; i++)
                        for (size_t j = 0; j < W; j++)
                            o[i][j] = c;
                    if (h)
                        v[k]->gemm_h(m, gp, 1, yh, W, w, 1.0f, op);
                    else
                        v[k]->gemm(m, gp, 1, yf, W, w, 1.0f, op);
                    if (h)
                        v[k]->dots_h(m, ap, w, &bh[0][0], N, N, dout, W);
                    else
                        v[k]->dots(m, ap, w, &b[0][0], N, N, dout, W);
                    for (size_t i = 0; i < m; i++)
                        for (size_t j = 0; j < w; j++) {
                            ck_assert_msg(o[i][j] == want, "gemm variant %zu half %d m %zu w %zu",
                                          k, h, m, w);
                            ck_assert_msg(dout[i * W + j] == want,
                                          "dots variant %zu half %d m %zu nk %zu", k, h, m, w);
                        }
                }
    }
}
END_TEST

/* The choice: the reference beside the scalar table, the AVX-512 forms
 * beside the AVX-512 and AMX tables, else AVX2 on x86. */
START_TEST(test_choice)
{
    ck_assert_ptr_eq(ml__kernels_scalar.fmath, &ml__fmath_scalar);
    const ml_kernels *tabs[8];
    size_t n = ml__kernels_available(tabs, 8);
    for (size_t i = 1; i < n; i++) {
#if defined(__x86_64__)
        int wide = strncmp(tabs[i]->name, "avx512", 6) == 0 || strcmp(tabs[i]->name, "amx") == 0;
        ck_assert_ptr_eq(tabs[i]->fmath, wide ? &ml__fmath_avx512 : &ml__fmath_avx2);
#endif
    }
}
END_TEST

Suite *suite_fmath(void)
{
    Suite *s = suite_create("fmath");
    TCase *tc = tcase_create("products");
    tcase_add_test(tc, test_gemm);
    tcase_add_test(tc, test_dots);
    tcase_add_test(tc, test_fused);
    tcase_add_test(tc, test_half_forms);
    tcase_add_test(tc, test_exp);
    tcase_add_test(tc, test_elementwise);
    tcase_add_test(tc, test_exp_norm);
    tcase_add_test(tc, test_scale_max);
    tcase_add_test(tc, test_rmsnorm_rows);
    tcase_add_test(tc, test_choice);
    suite_add_tcase(s, tc);
    return s;
}
