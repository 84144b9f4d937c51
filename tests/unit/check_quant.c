/* check_quant.c - the row quantizers, bit for bit, on vectors worked out by
 * hand (the arithmetic is in the comments; tools/quant-ref.py, a second
 * implementation in numpy float32, agrees on every one): Q8_0 with f32 and
 * f16 scales, Q4_0 by llama.cpp's rounding and by the fit search, and
 * their edge cases: all-zero blocks, amax just below and above 1e-30 and
 * 1e-6, subnormals, exact ties (k + 0.5 after scaling, both signs), the
 * +-127 clamp, huge values up to FLT_MAX, f16 overflow (65504 kept, a scale
 * rounding to infinity refused), a scale rounding to zero, negative d,
 * every fit candidate winning at least once, the round rule's cap at 15,
 * NaN and infinity.  Also the importance helper, the q8_mask names and the
 * dequantizers.  Whole matrices, threads and random properties are in
 * check_quant_matrix.c. */
#include "suites.h"
#include "testutil.h"
#include "quant/quant_impl.h"

#include <float.h>
#include <math.h>
#include <stdio.h>

#define QK 32

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* A block: the given values, then zeros. */
static void block(float *x, const float *vals, int n)
{
    for (int j = 0; j < QK; j++)
        x[j] = j < n ? vals[j] : 0.0f;
}

#define BLOCK(x, ...)                                                     \
    do {                                                                  \
        const float v_[] = {__VA_ARGS__};                                 \
        block((x), v_, (int)(sizeof v_ / sizeof v_[0]));                  \
    } while (0)

/* Asserts the first n quants (the rest must be 0) and d's bits. */
static void check_q8(const int8_t *q, float d, const int *want, int n, uint32_t dbits,
                     const char *what)
{
    ck_assert_msg(fbits(d) == dbits, "%s: d = %a (0x%08x), expected 0x%08x", what, (double)d,
                  fbits(d), dbits);
    for (int j = 0; j < QK; j++) {
        int w = j < n ? want[j] : 0;
        ck_assert_msg(q[j] == w, "%s: q[%d] = %d, expected %d", what, j, q[j], w);
    }
}

/* Asserts 16 nibble bytes given as a hex string, and d's bits. */
static void check_q4(const uint8_t *qs, float d, const char *hex, uint32_t dbits, const char *what)
{
    char got[33];
    for (int j = 0; j < 16; j++)
        snprintf(got + 2 * j, 3, "%02x", qs[j]);
    ck_assert_msg(strcmp(got, hex) == 0, "%s: nibbles %s, expected %s", what, got, hex);
    ck_assert_msg(fbits(d) == dbits, "%s: d = %a (0x%08x), expected 0x%08x", what, (double)d,
                  fbits(d), dbits);
}

/* ======================================================================
 * Q8_0, f32 scales
 * ====================================================================== */

START_TEST(test_q8_exact)
{
    float x[QK], d;
    int8_t q[QK];
    /* amax = 127: d = 127 / 127 = 1, 127 / amax = 1, so q = trunc(x + sign 0.5):
     * 127 -> 127.5 -> 127; 2.5 -> 3.0 -> 3 (tie away from zero); -2.5 -> -3;
     * 1.5 -> 2; -1.5 -> -2; 0.49 -> 0.99 -> 0; -0.49 -> 0; 126.5 -> 127;
     * -126.5 -> -127; 0.5 -> 1; -0.5 -> -1; 3 -> 3.5 -> 3; 0 -> 0.5 -> 0;
     * -0.0 -> copysign gives -0.5 -> 0; 64.25 -> 64.75 -> 64. */
    BLOCK(x, 127.0f, 2.5f, -2.5f, 1.5f, -1.5f, 0.49f, -0.49f, 126.5f, -126.5f, 0.5f, -0.5f, 3.0f,
          0.0f, -0.0f, 64.25f);
    ml_quantize_row_q8_0(x, QK, q, &d);
    static const int w1[] = {127, 3, -3, 2, -2, 0, 0, 127, -127, 1, -1, 3, 0, 0, 64};
    check_q8(q, d, w1, 15, 0x3f800000, "amax 127");

    /* amax = 254 (negative): d = 2, 127 / 254 = 0.5 exactly.  5 -> 2.5 + 0.5
     * = 3 (tie away); -5 -> -3; 3 -> 1.5 + 0.5 = 2; 1 -> 0.5 + 0.5 = 1;
     * -1 -> -1; 0.999 -> 0.4995 + 0.5 = 0.9995 -> 0; -254 -> -127.5 -> -127:
     * the clamp keeps -128 away. */
    BLOCK(x, -254.0f, 5.0f, -5.0f, 3.0f, 1.0f, -1.0f, 0.999f);
    ml_quantize_row_q8_0(x, QK, q, &d);
    static const int w2[] = {-127, 3, -3, 2, 1, -1, 0};
    check_q8(q, d, w2, 7, 0x40000000, "amax 254");

    /* amax = 1: d = 1 / 127 = 0x3c010204 (0.0078740157), 127 / amax = 127.
     * 0.5 -> 63.5 + 0.5 = 64; 0.1f * 127 = 12.6999998 -> 13.1999998 -> 13;
     * -0.3f -> -38.1 - 0.5 -> -38; 0.99603 -> 126.4958 + 0.5 -> 126;
     * 1/3 -> 42.333 + 0.5 -> 42. */
    BLOCK(x, 1.0f, 0.5f, 0.1f, -0.3f, 0.99603f, 1.0f / 3.0f);
    ml_quantize_row_q8_0(x, QK, q, &d);
    static const int w3[] = {127, 64, 13, -38, 126, 42};
    check_q8(q, d, w3, 6, 0x3c010204, "amax 1");
}
END_TEST

START_TEST(test_q8_zero_and_threshold)
{
    float x[QK], d;
    int8_t q[QK];
    static const int none[1] = {0};
    /* All zero, and -0.0: amax 0 < 1e-30, d = 0, q = 0. */
    BLOCK(x, 0.0f);
    ml_quantize_row_q8_0(x, QK, q, &d);
    check_q8(q, d, none, 0, 0, "zero");
    BLOCK(x, -0.0f, -0.0f);
    ml_quantize_row_q8_0(x, QK, q, &d);
    check_q8(q, d, none, 0, 0, "-0");

    /* amax = 1e-30f exactly (0x0da24260) is not below 1e-30f: quantized.
     * d = 1e-30f / 127 = 0x0a238973; 1e-30f * (127 / 1e-30f) rounds to 127
     * exactly, so -1e-30f / 2 gives -63.5, a tie, -> -64. */
    BLOCK(x, 1e-30f, -1e-30f / 2);
    ml_quantize_row_q8_0(x, QK, q, &d);
    static const int w1[] = {127, -64};
    check_q8(q, d, w1, 2, 0x0a238973, "amax 1e-30");

    /* One float below 1e-30f (0x0da2425f): d = 0, q = 0. */
    float below = nextafterf(1e-30f, 0.0f);
    ck_assert_uint_eq(fbits(below), 0x0da2425f);
    BLOCK(x, below, -below);
    ml_quantize_row_q8_0(x, QK, q, &d);
    check_q8(q, d, none, 0, 0, "below 1e-30");

    /* Subnormals alone: amax < 1e-30, all 0. */
    BLOCK(x, FLT_TRUE_MIN, -FLT_TRUE_MIN * 5, from_bits(0x007fffff));
    ml_quantize_row_q8_0(x, QK, q, &d);
    check_q8(q, d, none, 0, 0, "subnormals");
    /* Subnormals beside 1: 1 -> 127, subnormal * 127 + 0.5 -> 0, negative
     * subnormal - 0.5 -> 0 (never -1). */
    BLOCK(x, 1.0f, FLT_TRUE_MIN, -from_bits(0x007fffff));
    ml_quantize_row_q8_0(x, QK, q, &d);
    static const int w2[] = {127, 0, 0};
    check_q8(q, d, w2, 3, 0x3c010204, "subnormals beside 1");
}
END_TEST

START_TEST(test_q8_huge)
{
    float x[QK], d;
    int8_t q[QK];
    /* amax = FLT_MAX: d = FLT_MAX / 127 = 0x7c010204 (2.68e36, finite);
     * 127 / FLT_MAX = 3.7e-37 is a normal float and FLT_MAX * it rounds to
     * 127 exactly: FLT_MAX -> 127; -FLT_MAX / 2 -> -63.5, tie -> -64;
     * FLT_MAX / 3 -> 42.33 -> 42; -FLT_MAX -> -127. */
    BLOCK(x, FLT_MAX, -FLT_MAX / 2, FLT_MAX / 3, -FLT_MAX);
    ml_quantize_row_q8_0(x, QK, q, &d);
    static const int w[] = {127, -64, 42, -127};
    check_q8(q, d, w, 4, 0x7c010204, "FLT_MAX");
    /* Near FLT_MAX / 127 as well: amax 2.68e36, 127 / amax = 4.74e-35. */
    BLOCK(x, -FLT_MAX / 127, FLT_MAX / 254);
    ml_quantize_row_q8_0(x, QK, q, &d);
    ck_assert(isfinite(d) && d > 0);
    ck_assert_int_eq(q[0], -127);
    ck_assert_int_eq(q[1], 64); /* 63.5 + 0.5: the tie again */
}
END_TEST

START_TEST(test_q8_nonfinite)
{
    float x[QK], d;
    int8_t q[QK];
    /* A NaN never wins amax and quantizes to 0; the rest as usual. */
    BLOCK(x, NAN, 1.0f, -1.0f, -NAN);
    ml_quantize_row_q8_0(x, QK, q, &d);
    static const int w1[] = {0, 127, -127, 0};
    check_q8(q, d, w1, 4, 0x3c010204, "NaN");
    /* An infinity: amax = inf, d = inf, 127 / inf = 0, every q = 0 (inf * 0
     * is NaN, which gives 0). */
    BLOCK(x, 1.0f, -INFINITY, 5.0f);
    ml_quantize_row_q8_0(x, QK, q, &d);
    check_q8(q, d, w1, 0, 0x7f800000, "-inf");
    /* All NaN: amax stays 0, the zero block. */
    for (int j = 0; j < QK; j++)
        x[j] = NAN;
    ml_quantize_row_q8_0(x, QK, q, &d);
    check_q8(q, d, w1, 0, 0, "all NaN");
}
END_TEST

START_TEST(test_q8_row)
{
    /* Three blocks and a remainder of 5 values, which is neither read nor
     * written.  Block b holds v (b + 1) with v = i % 7 - 3 in [-3, 3]:
     * amax = 3 (b + 1), d = amax / 127, and x * (127 / amax) is about
     * v * 42.333: +-1 -> 42.83 -> 42, +-2 -> 85.17 -> 85, +-3 -> 127. */
    static const int want[7] = {-127, -85, -42, 0, 42, 85, 127};
    float x[3 * QK + 5];
    int8_t q[3 * QK + 5];
    float d[4] = {-1, -1, -1, -1};
    for (int i = 0; i < 3 * QK + 5; i++)
        x[i] = (float)((i % 7) - 3) * (float)(1 + i / QK);
    memset(q, 0x55, sizeof q);
    ml_quantize_row_q8_0(x, 3 * QK + 5, q, d);
    for (int b = 0; b < 3; b++) {
        ck_assert_uint_eq(fbits(d[b]), fbits((float)(3 * (b + 1)) / 127.0f));
        for (int j = 0; j < QK; j++)
            ck_assert_int_eq(q[b * QK + j], want[(b * QK + j) % 7]);
    }
    ck_assert_float_eq(d[3], -1.0f);
    for (int i = 3 * QK; i < 3 * QK + 5; i++)
        ck_assert_int_eq(q[i], 0x55);
}
END_TEST

/* ======================================================================
 * Q8_0, f16 scales
 * ====================================================================== */

START_TEST(test_q8_f16)
{
    float x[QK];
    int8_t q[QK];
    uint16_t d16;
    ml_error e;
    /* amax = 1: d = 1/127 = 0.0078740157 rounds to the f16 0x2008 =
     * 2^-7 (1 + 8/1024) = 0.00787353515625; quants use 1 / that = 127.00775.
     * Everything as with f32 scales except 0.99603: 0.99603 * 127.00775 =
     * 126.5036 + 0.5 -> 127 (f32 scales give 126). */
    BLOCK(x, 1.0f, 0.5f, 0.1f, -0.3f, 0.99603f, 1.0f / 3.0f);
    ck_assert_int_eq(ml_quantize_row_q8_0_f16(x, QK, q, &d16, &e), ML_OK);
    ck_assert_uint_eq(d16, 0x2008);
    static const int w1[] = {127, 64, 13, -38, 127, 42};
    check_q8(q, 0.0f, w1, 6, 0, "f16 amax 1");

    /* amax = 127: d = 1 = 0x3c00 exactly: same quants as f32 scales. */
    BLOCK(x, 127.0f, 2.5f, -2.5f);
    ck_assert_int_eq(ml_quantize_row_q8_0_f16(x, QK, q, &d16, &e), ML_OK);
    ck_assert_uint_eq(d16, 0x3c00);
    static const int w2[] = {127, 3, -3};
    check_q8(q, 0.0f, w2, 3, 0, "f16 amax 127");

    /* Zero block: d16 = 0, q = 0. */
    BLOCK(x, 0.0f);
    d16 = 0x1234;
    ck_assert_int_eq(ml_quantize_row_q8_0_f16(x, QK, q, &d16, &e), ML_OK);
    ck_assert_uint_eq(d16, 0);
    check_q8(q, 0.0f, w2, 0, 0, "f16 zero");
}
END_TEST

START_TEST(test_q8_f16_limits)
{
    float x[2 * QK];
    int8_t q[2 * QK];
    uint16_t d16[2];
    ml_error e;
    /* d = 65504 exactly (amax = 127 * 65504 = 8319008): the largest f16,
     * 0x7bff, kept; q = 127. */
    BLOCK(x, 8319008.0f, -4159504.0f);
    ck_assert_int_eq(ml_quantize_row_q8_0_f16(x, QK, q, d16, &e), ML_OK);
    ck_assert_uint_eq(d16[0], 0x7bff);
    static const int w1[] = {127, -64}; /* 4159504 / 65504 = 63.5: tie away */
    check_q8(q, 0.0f, w1, 2, 0, "65504");

    /* d = 65519 (amax 8320913) rounds down to 65504: kept (a scale is
     * refused only when it rounds to infinity); 8320913 / 65504 = 127.03
     * -> clamped to 127. */
    BLOCK(x, 8320913.0f, 4159504.0f);
    ck_assert_int_eq(ml_quantize_row_q8_0_f16(x, QK, q, d16, &e), ML_OK);
    ck_assert_uint_eq(d16[0], 0x7bff);
    static const int w2[] = {127, 64};
    check_q8(q, 0.0f, w2, 2, 0, "65519");

    /* d = 65520 (amax 8321040) is the tie between 65504 and 65536, which
     * rounds to even: infinity.  Refused, naming the second block. */
    BLOCK(x, 1.0f);
    BLOCK(x + QK, 1.0f, -8321040.0f);
    tu_err_reset(&e);
    TU_CHECK_ERR("65520", ml_quantize_row_q8_0_f16(x, 2 * QK, q, d16, &e), e, ML_E_UNSUPPORTED,
                 "", -1);
    ck_assert_msg(strstr(e.msg, "columns 32-63") && strstr(e.msg, "65504"), "%s", e.msg);
    ck_assert_uint_eq(d16[0], 0x2008); /* the first block was written */
    /* Infinity in the input: the scale is infinite, refused the same way. */
    BLOCK(x, INFINITY);
    ck_assert_int_eq(ml_quantize_row_q8_0_f16(x, QK, q, d16, NULL), ML_E_UNSUPPORTED);
}
END_TEST

START_TEST(test_q8_f16_tiny)
{
    float x[QK];
    int8_t q[QK];
    uint16_t d16;
    /* d = 2^-25 exactly (amax = 127 * 2^-25 = 3.78e-6): halfway between 0
     * and the smallest f16 2^-24, rounds to even: 0.  No NaN: q = 0. */
    BLOCK(x, 127.0f * 0x1p-25f, -3.0f * 0x1p-25f);
    ck_assert_int_eq(ml_quantize_row_q8_0_f16(x, QK, q, &d16, NULL), ML_OK);
    ck_assert_uint_eq(d16, 0);
    static const int none[1] = {0};
    check_q8(q, 0.0f, none, 0, 0, "d rounds to 0");
    /* amax = 2^-18: d = 2^-18 / 127 = 1.008 * 2^-25 rounds up to 2^-24
     * (0x0001), 1 / d = 2^24: 2^-18 -> 64 + 0.5 -> 64; 2^-19 -> 32. */
    BLOCK(x, 0x1p-18f, -0x1p-18f, 0x1p-19f);
    ck_assert_int_eq(ml_quantize_row_q8_0_f16(x, QK, q, &d16, NULL), ML_OK);
    ck_assert_uint_eq(d16, 0x0001);
    static const int w1[] = {64, -64, 32};
    check_q8(q, 0.0f, w1, 3, 0, "subnormal d");
    /* amax = 178 * 2^-24: d = 1.40 * 2^-24 rounds down to 2^-24, so
     * x / d reaches 178: the clamp gives +-127; 100 * 2^-24 -> 100. */
    BLOCK(x, 178.0f * 0x1p-24f, -178.0f * 0x1p-24f, 100.0f * 0x1p-24f);
    ck_assert_int_eq(ml_quantize_row_q8_0_f16(x, QK, q, &d16, NULL), ML_OK);
    ck_assert_uint_eq(d16, 0x0001);
    static const int w2[] = {127, -127, 100};
    check_q8(q, 0.0f, w2, 3, 0, "clamp");
    /* amax just below 1e-30: the zero block, d16 = 0. */
    BLOCK(x, nextafterf(1e-30f, 0.0f));
    ck_assert_int_eq(ml_quantize_row_q8_0_f16(x, QK, q, &d16, NULL), ML_OK);
    ck_assert_uint_eq(d16, 0);
}
END_TEST

/* ======================================================================
 * Q4_0, llama.cpp's rounding
 * ====================================================================== */

START_TEST(test_q4_round)
{
    float x[QK], d;
    uint8_t qs[16];
    /* xmax = -8: d = -8 / -8 = 1, 1/d = 1, nibble = trunc(x + 8.5), at most
     * 15: -8 -> 0.5 -> 0; 7.5 -> 16 -> 15 (cap); 7.49 -> 15.99 -> 15;
     * 2.5 -> 11 (a tie rounds up: level 3); -2.5 -> 6 (level -2: up again);
     * 0 -> 8; 3.7 -> 12.2 -> 12; -3.7 -> 4.8 -> 4; 0.5 -> 9; -0.5 -> 8.
     * Byte j = nibble j | nibble (j + 16) << 4, and elements 16.. are 0
     * (nibble 8), so every byte reads 0x8N. */
    BLOCK(x, -8.0f, 7.5f, 7.49f, 2.5f, -2.5f, 0.0f, 3.7f, -3.7f, 0.5f, -0.5f);
    ml_quantize_row_q4_0_round(x, QK, qs, &d);
    check_q4(qs, d, "808f8f8b86888c848988888888888888", 0x3f800000, "d 1");

    /* xmax = +8: d = -1, 1/d = -1.  8 -> -8 + 8.5 = 0.5 -> 0 (level -8,
     * weight -8 * -1 = 8); -8 -> 16.5 -> 15 (cap: level 7, weight -7);
     * -7.5 -> 15.5 -> 15; 2.5 -> 6 (level -2: weight 2); -2.5 -> 11. */
    BLOCK(x, 8.0f, -8.0f, -7.5f, 2.5f, -2.5f);
    ml_quantize_row_q4_0_round(x, QK, qs, &d);
    check_q4(qs, d, "808f8f868b8888888888888888888888", 0xbf800000, "d -1");

    /* Two elements of largest magnitude: the first one sets d's sign.
     * [3, -3, 1]: d = 3 / -8 = -0.375, 1/d = -2.6667: 3 -> 0; -3 -> 15;
     * 1 -> -2.667 + 8.5 = 5.83 -> 5.  [-3, 3, 1]: d = 0.375: 1 -> 11.17 -> 11. */
    BLOCK(x, 3.0f, -3.0f, 1.0f);
    ml_quantize_row_q4_0_round(x, QK, qs, &d);
    check_q4(qs, d, "808f8588888888888888888888888888", 0xbec00000, "first max +");
    BLOCK(x, -3.0f, 3.0f, 1.0f);
    ml_quantize_row_q4_0_round(x, QK, qs, &d);
    check_q4(qs, d, "808f8b88888888888888888888888888", 0x3ec00000, "first max -");
}
END_TEST

START_TEST(test_q4_round_edges)
{
    float x[QK], d;
    uint8_t qs[16];
    /* All zero: d = 0 / -8 = -0.0 (as llama.cpp stores it), 1/d replaced by
     * 0, so every nibble is trunc(8.5) = 8. */
    BLOCK(x, 0.0f);
    ml_quantize_row_q4_0_round(x, QK, qs, &d);
    check_q4(qs, d, "88888888888888888888888888888888", 0x80000000, "zero");
    /* xmax = 2^-146: d = -2^-149 (the smallest subnormal), whose reciprocal
     * overflows: 1/d is taken as 0, nibbles 8, d kept. */
    BLOCK(x, 0x1p-146f, 0x1p-147f);
    ml_quantize_row_q4_0_round(x, QK, qs, &d);
    check_q4(qs, d, "88888888888888888888888888888888", 0x80000001, "d subnormal");
    /* xmax = -2^-126 (FLT_MIN): d = 2^-129, 1/d = 2^129 overflows: 8s. */
    BLOCK(x, -0x1p-126f, 0x1p-127f);
    ml_quantize_row_q4_0_round(x, QK, qs, &d);
    check_q4(qs, d, "88888888888888888888888888888888", 0x00100000, "d 2^-129");
    /* xmax = -2^-123: d = 2^-126, 1/d = 2^126 is finite: -2^-123 -> 0.5 ->
     * 0; 2^-124 -> 4 + 8.5 -> 12. */
    BLOCK(x, -0x1p-123f, 0x1p-124f);
    ml_quantize_row_q4_0_round(x, QK, qs, &d);
    check_q4(qs, d, "808c8888888888888888888888888888", 0x00800000, "d FLT_MIN");
    /* FLT_MAX: d = -FLT_MAX / 8 = 0xfdffffff, 1/d = -2.35e-38 (normal):
     * FLT_MAX -> 0; -FLT_MAX -> 15; FLT_MAX / 2 -> -4 + 8.5 -> 4. */
    BLOCK(x, FLT_MAX, -FLT_MAX, FLT_MAX / 2);
    ml_quantize_row_q4_0_round(x, QK, qs, &d);
    check_q4(qs, d, "808f8488888888888888888888888888", 0xfdffffff, "FLT_MAX");
    /* NaN: ignored by the maximum, nibble 0 (trunc of NaN is taken as 0). */
    BLOCK(x, -8.0f, NAN);
    ml_quantize_row_q4_0_round(x, QK, qs, &d);
    check_q4(qs, d, "80808888888888888888888888888888", 0x3f800000, "NaN");
}
END_TEST

/* ======================================================================
 * Q4_0, the fit search
 * ====================================================================== */

START_TEST(test_q4_fit_hand)
{
    float x[QK], d;
    uint8_t qs[16];
    /* [1, 0, ...]: weights x^2 = [1, 0, ...], so only x0 counts.  Every
     * candidate maps x0 to round(L): -6 (L -6.0 .. -6.4), -7 (-6.6 .. -7.4),
     * -8 (-7.6 .. -8.4, clamped).  d = 1 * 1 * l / l^2 = 1 / l and the error
     * (1 - d l)^2 rounds to 0 for each, so the first candidate wins:
     * d = 1 / -6 = -0.16666667 (0xbe2aaaab), x0's nibble -6 + 8 = 2. */
    BLOCK(x, 1.0f);
    ml_quantize_row_q4_0_fit(x, QK, NULL, qs, &d);
    check_q4(qs, d, "82888888888888888888888888888888", 0xbe2aaaab, "[1]");
    /* [-1]: x0 -> L again, y * (L / -1): level -6 for -1, d = +1/6. */
    BLOCK(x, -1.0f);
    ml_quantize_row_q4_0_fit(x, QK, NULL, qs, &d);
    check_q4(qs, d, "82888888888888888888888888888888", 0x3e2aaaab, "[-1]");

    /* [1, 0.45]: weights 1 and 0.2025, levels (round(L), round(0.45 L)):
     *   L -6.0 .. -6.4: (-6, -3): d = (-6 - 3 * 0.091125) / (36 + 9 * 0.2025)
     *       = -6.273375 / 37.8225 = -0.165864, error 4.8186e-4
     *   L -6.6 .. -7.4: (-7, -3): d = -7.273375 / 50.8225 = -0.1431133,
     *       error (1 - 1.0017931)^2 + 0.2025 (0.45 - 0.4293399)^2 = 8.9650e-5
     *   L -7.6:         (-8, -3): d = -8.273375 / 65.8225 = -0.125692,
     *       error 1.1075e-3
     *   L -7.8 .. -8.4: (-8, -4): d = -8.3645 / 67.24 = -0.124398,
     *       error 4.8186e-4
     * The first (-7, -3) candidate, L = -6.6, wins: d = 0xbe128c4a, a
     * negative d for a positive maximum; nibbles 1 and 5. */
    BLOCK(x, 1.0f, 0.45f);
    ml_quantize_row_q4_0_fit(x, QK, NULL, qs, &d);
    check_q4(qs, d, "81858888888888888888888888888888", 0xbe128c4a, "[1, 0.45]");
    /* Negated maximum: d = +0.1431133, and 0.45 gets level +3 (nibble 11). */
    BLOCK(x, -1.0f, 0.45f);
    ml_quantize_row_q4_0_fit(x, QK, NULL, qs, &d);
    check_q4(qs, d, "818b8888888888888888888888888888", 0x3e128c4a, "[-1, 0.45]");

    /* All zero: d = +0, nibbles 8. */
    BLOCK(x, 0.0f, -0.0f);
    ml_quantize_row_q4_0_fit(x, QK, NULL, qs, &d);
    check_q4(qs, d, "88888888888888888888888888888888", 0, "zero");
}
END_TEST

START_TEST(test_q4_fit_ties)
{
    /* Levels are round(y * (L / ymax)) with ties to even; look at single
     * candidates through the internal entry point.  ymax = 1, L = -6: s = -6. */
    float y[QK], w[QK], wy[QK], lv[QK], err;
    BLOCK(y, 1.0f, 0.25f, -0.25f, 0.75f, -0.75f, 0.5f, 1.0f / 12);
    for (int j = 0; j < QK; j++) {
        w[j] = y[j] * y[j];
        wy[j] = w[j] * y[j];
    }
    ml__q4_candidate(y, w, wy, 1.0f, 0, lv, &err);
    /* 1 -> -6; 0.25 -> -1.5 -> -2 (even, away from 0); -0.25 -> 1.5 -> 2;
     * 0.75 -> -4.5 -> -4 (even, toward 0); -0.75 -> 4.5 -> 4; 0.5 -> -3;
     * 1/12 -> -0.5 -> -0 -> 0 (stored as +0). */
    static const float want0[] = {-6, -2, 2, -4, 4, -3, 0};
    for (int j = 0; j < 7; j++)
        ck_assert_msg(lv[j] == want0[j] && !signbit(lv[j]) == !signbit(want0[j]),
                      "L -6: level[%d] = %g, expected %g", j, (double)lv[j], (double)want0[j]);
    /* L = -7: 0.5 -> -3.5 -> -4 (even); -0.75 -> 5.25 -> 5; 0.25 -> -1.75 -> -2. */
    ml__q4_candidate(y, w, wy, 1.0f, 5, lv, &err);
    ck_assert_float_eq(lv[5], -4.0f);
    ck_assert_float_eq(lv[4], 5.0f);
    ck_assert_float_eq(lv[1], -2.0f);
    /* Levels clamp to [-8, 7]: ymax = -1 and L = -8.4 give s = 8.4; -1 ->
     * -8.4 -> -8; 1 (an equal magnitude after the first) -> 8.4 -> 7. */
    BLOCK(y, -1.0f, 1.0f);
    for (int j = 0; j < QK; j++) {
        w[j] = y[j] * y[j];
        wy[j] = w[j] * y[j];
    }
    float d = ml__q4_candidate(y, w, wy, -1.0f, 12, lv, &err);
    ck_assert_float_eq(lv[0], -8.0f);
    ck_assert_float_eq(lv[1], 7.0f);
    /* d = (-1 * -8 + 1 * 7) / (64 + 49) = 15 / 113 */
    ck_assert_uint_eq(fbits(d), fbits(15.0f / 113.0f));
}
END_TEST

/* For each candidate k, a block it wins: a short block of values on a
 * 1/16 or 1/64 grid that candidate k wins by at least 1% of the error in
 * exact rational arithmetic (least-squares d, x^2 weights), found by a
 * search and checked by tools/quant-ref.py, with its nibbles and d.  The
 * comments give the winning levels (nibbles - 8) and the exact errors.
 * Worked through for L = -7.6, [1, -0.25]: the levels (round(L),
 * round(0.25 |L|)) are (-6, 2) for L -6.0 .. -6.4 (1.5 -> 2 is a tie to
 * even), (-7, 2) for -6.6 .. -7.4 and (-8, 2) from -7.6 on; -0.25 =
 * 2 / -8 exactly, so (-8, 2) fits with error 0 and L = -7.6 is its first
 * candidate: sums 1 * -8 + 0.0625 * -0.25 * 2 = -8.03125 and 64 + 0.0625 *
 * 4 = 64.25, d = -0.125 exactly. */
typedef struct fit_case {
    int k;
    float v[9];
    int n;
    const char *qs;
    uint32_t d;
} fit_case;

static const fit_case fit_cases[] = {
    /* L -6.0: levels [-6, 3, 1, 4], error 0.0001995 (next best 0.001338) */
    {0, {1.0f, -0.5f, -0.125f, -0.6875f}, 4, "828b898c888888888888888888888888", 0xbe2b8840},
    /* L -6.2: levels [-6, 5, 6, 5, 5], error 0.003623 (next best 0.004135) */
    {1, {1.0f, -0.8125f, -0.9375f, -0.75f, -0.8125f}, 5, "828d8e8d8d8888888888888888888888", 0xbe246791},
    /* L -6.4: levels [-6, 6, -4, -4, -4, 0, 4, 3, 6], error 0.006036 (next best 0.006149) */
    {2, {1.0f, -0.96875f, 0.625f, 0.671875f, 0.609375f, 0.015625f, -0.5625f, -0.4375f, -0.921875f}, 9, "828e848484888c8b8e88888888888888", 0xbe238648},
    /* L -6.6: levels [-7, 3], error 1.474e-05 (next best 0.0007135) */
    {3, {1.0f, -0.4375f}, 2, "818b8888888888888888888888888888", 0xbe1263a4},
    /* L -6.8: levels [-7, 5, -3, 2, -6], error 0.001066 (next best 0.001582) */
    {4, {1.0f, -0.6875f, 0.375f, -0.25f, 0.875f}, 5, "818d858a828888888888888888888888", 0xbe1230d6},
    /* L -7.0: levels [-7, -3, 7, 0, -4], error 0.001945 (next best 0.003241) */
    {5, {1.0f, 0.4375f, -0.9375f, -0.0625f, 0.5625f}, 5, "81858f88848888888888888888888888", 0xbe0e3d10},
    /* L -7.2: levels [-7, -5, 7, -1, 4, 7, -7], error 0.002008 (next best 0.002147) */
    {6, {1.0f, 0.640625f, -0.984375f, 0.125f, -0.5625f, -0.984375f, 0.96875f}, 7, "81838f878c8f81888888888888888888", 0xbe0f6482},
    /* L -7.4: levels [-7, 5, 4, 6, 7], error 0.003617 (next best 0.003776) */
    {7, {1.0f, -0.625f, -0.5625f, -0.8125f, -0.9375f}, 5, "818d8c8e8f8888888888888888888888", 0xbe0c6e5d},
    /* L -7.6: levels [-8, 2], error 0 (next best 7.931e-05) */
    {8, {1.0f, -0.25f}, 2, "808a8888888888888888888888888888", 0xbe000000},
    /* L -7.8: levels [-8, 3, -1, 7, 7], error 0.0009828 (next best 0.001289) */
    {9, {1.0f, -0.34375f, 0.15625f, -0.84375f, -0.890625f}, 5, "808b878f8f8888888888888888888888", 0xbdfed497},
    /* L -8.0: levels [-8, 5, -4], error 0.0007179 (next best 0.0007306) */
    {10, {1.0f, -0.625f, 0.4375f}, 3, "808d8488888888888888888888888888", 0xbdfeb974},
    /* L -8.2: levels [-8, -2, -6, 7], error 0.00198 (next best 0.002039) */
    {11, {1.0f, 0.1875f, 0.75f, -0.8125f}, 4, "8086828f888888888888888888888888", 0xbdfadb24},
    /* L -8.4: levels [-8, -8, 5, -6, -8, -7, -1, 6, 2], error 0.005808 (next best 0.006278) */
    {12, {1.0f, 0.90625f, -0.5625f, 0.71875f, 0.953125f, 0.796875f, 0.171875f, -0.734375f, -0.296875f}, 9, "80808d828081878e8a88888888888888", 0xbdf37c6d},
};

START_TEST(test_q4_fit_each_candidate)
{
    int seen[ML__Q4_CANDIDATES] = {0};
    for (size_t i = 0; i < sizeof fit_cases / sizeof fit_cases[0]; i++) {
        const fit_case *c = &fit_cases[i];
        float x[QK], d;
        uint8_t qs[16];
        block(x, c->v, c->n);
        ml_quantize_row_q4_0_fit(x, QK, NULL, qs, &d);
        char what[32];
        snprintf(what, sizeof what, "candidate %d", c->k);
        check_q4(qs, d, c->qs, c->d, what);
        /* The winner is candidate k: its levels and d, and no candidate
         * before it has an error as small. */
        float y[QK], w[QK], wy[QK], lv[QK], err_k, err;
        for (int j = 0; j < QK; j++) {
            y[j] = x[j];
            w[j] = y[j] * y[j];
            wy[j] = w[j] * y[j];
        }
        float dk = ml__q4_candidate(y, w, wy, 1.0f, c->k, lv, &err_k);
        ck_assert_uint_eq(fbits(dk), c->d);
        for (int j = 0; j < 16; j++)
            ck_assert_int_eq(qs[j], (int)(lv[j] + 8) | (int)(lv[j + 16] + 8) << 4);
        for (int k = 0; k < ML__Q4_CANDIDATES; k++) {
            ml__q4_candidate(y, w, wy, 1.0f, k, lv, &err);
            if (k < c->k)
                ck_assert_msg(err > err_k, "%s: candidate %d ties or beats it", what, k);
            else
                ck_assert_msg(err >= err_k, "%s: candidate %d beats it", what, k);
        }
        seen[c->k] = 1;
    }
    for (int k = 0; k < ML__Q4_CANDIDATES; k++)
        ck_assert_msg(seen[k], "no block won by candidate %d", k);
}
END_TEST

START_TEST(test_q4_fit_scaling)
{
    /* [1, 0.45] times powers of two.  Blocks with amax below 1e-6 or above
     * 1e6 are divided by amax (exactly, here), fitted as [1, 0.45], and d
     * is multiplied back: the same nibbles and d = 0xbe128c4a * 2^e.
     * Between the bounds the plain float32 fit of x * 2^e involves no
     * underflow or overflow either, so it gives the same bits. */
    static const int es[] = {-120, -100, -30, -21, -20, -19, -4, 0, 4, 19, 20, 21, 40, 100};
    for (size_t i = 0; i < sizeof es / sizeof es[0]; i++) {
        float x[QK], d, s = ldexpf(1.0f, es[i]);
        uint8_t qs[16];
        BLOCK(x, s, 0.45f * s);
        ml_quantize_row_q4_0_fit(x, QK, NULL, qs, &d);
        char what[32];
        snprintf(what, sizeof what, "2^%d", es[i]);
        check_q4(qs, d, "81858888888888888888888888888888",
                 fbits(from_bits(0xbe128c4a) * s), what);
    }
    /* The threshold itself: amax = 1e-6f is fitted unscaled, the float
     * below it scaled; both agree here (0xb419aaad = -1.4311327e-7). */
    float x[QK], d;
    uint8_t qs[16];
    BLOCK(x, 1e-6f, 0.45f * 1e-6f);
    ml_quantize_row_q4_0_fit(x, QK, NULL, qs, &d);
    check_q4(qs, d, "81858888888888888888888888888888", 0xb419aaad, "1e-6");
    float b = nextafterf(1e-6f, 0.0f);
    BLOCK(x, b, 0.45f * b);
    ml_quantize_row_q4_0_fit(x, QK, NULL, qs, &d);
    check_q4(qs, d, "81858888888888888888888888888888", 0xb419aaad, "below 1e-6");
    /* Subnormals: [1e-40, 4.5e-41, -3e-41] divided by 1e-40 is about [1,
     * 0.45, -0.3]: levels -7, -3, +2; d scaled back is the subnormal
     * 0x800027e8 (-1.43e-41). */
    BLOCK(x, 1e-40f, 4.5e-41f, -3e-41f);
    ml_quantize_row_q4_0_fit(x, QK, NULL, qs, &d);
    check_q4(qs, d, "81858a88888888888888888888888888", 0x800027e8, "subnormal");
    /* FLT_MAX: y = x / FLT_MAX, d = -0.1431133 * FLT_MAX is finite
     * (0.45f * FLT_MAX / FLT_MAX is one ulp from 0.45f, hence 0x...49). */
    BLOCK(x, FLT_MAX, 0.45f * FLT_MAX);
    ml_quantize_row_q4_0_fit(x, QK, NULL, qs, &d);
    check_q4(qs, d, "81858888888888888888888888888888", 0xfe128c49, "FLT_MAX");
}
END_TEST

START_TEST(test_q4_fit_thresholds)
{
    /* Blocks just inside the rescaled ranges, where dividing by amax changes
     * the last bit of d compared with fitting the values as they are: the
     * scaled fit gives 0xb4017a8d (unscaled float32 would give 0xb4017a8c)
     * for amax 9.5e-7, and 0xc85198b5 (unscaled: 0xc85198b6) for amax
     * 1.5e6.  Values: amax times k / 1024. */
    float x[QK], d;
    uint8_t qs[16];
    BLOCK(x, 9.50000015e-07f, 3.17285156e-07f, 5.65917958e-07f, -8.85986367e-07f,
          5.71484406e-07f, -5.75195322e-08f);
    ml_quantize_row_q4_0_fit(x, QK, NULL, qs, &d);
    check_q4(qs, d, "8085838f838888888888888888888888", 0xb4017a8d, "amax 9.5e-7");
    BLOCK(x, 1500000.0f, -650390.625f, -341308.594f, 208007.812f, -268066.406f, -1081054.75f);
    ml_quantize_row_q4_0_fit(x, QK, NULL, qs, &d);
    check_q4(qs, d, "818b8a87898d88888888888888888888", 0xc85198b5, "amax 1.5e6");
}
END_TEST

/* Golden blocks: 96 values k / 1024 with k in [-1000, 1000] from a 64-bit
 * LCG (block 1 has an outlier, x[40] * 8), and importances (u % 4000 + 1)
 * / 1000, quantized every way by tools/quant-ref.py.  Full blocks of 32
 * non-zero values: these pin the fixed summation order of the fit. */
typedef struct golden {
    const char *q8;
    uint32_t d8;
    const char *q8h;
    uint16_t d8h;
    const char *round;
    uint32_t dr;
    const char *fit;
    uint32_t df;
    const char *imat;
    uint32_t di;
} golden;

static const golden goldens[3] = {
    {"ba7f3319443d5bf9ced11a18de3be616f0e5366d55e765d0911f88abd82521e2", 0x3bfab56b, "ba7f3319443d5bf9ced11a18de3be616f0e5366d55e765d0911f88abd82521e2", 0x1fd6,
     "9ca0551634a422b8fb6bf6d6ba646aa7", 0xbdf8c000, "9c915527349523b8eb6bf7d7aa6569a7", 0xbe0ac1ae, "9c915527349523b8eb6bf7d7aa6569a7", 0xbe0c95b0}, /* fit L -7.0, imatrix L -7.0 */
    {"011a05e8e5f7e9ff811c1e060303f203ea1510f0e4e1e4e6fa1bfde31dff1c16", 0x3cfd7af6, "011a05e8e5f7e9ff811c1e060303f203ea1510f0e4e1e4e6fa1bfde31dff1c16", 0x27ec,
     "789a98776667676880aa8a68a888a798", 0x3efb8000, "789a98766667676880aa8a68a888a798", 0x3efa8c80, "789a98766667676880aa8a68a888a798", 0x3ef8c426}, /* fit L -8.2, imatrix L -8.2 */
    {"955dddbf32234d5c8c7bc54262fbb07875ddcaa3dca081b2fdcd7b50115f62bf", 0x3bf5ab57, "955dddbf32234d5c8c7bc54262fbb07975ddcaa3dca081b2fdcd7b50115f62bf", 0x1fad,
     "f16e56246b2a0d3e815ff4dc9ee8e34f", 0x3df3c000, "e36d56356b3a2c4d825ee5cb9dd8d45e", 0x3e18c61e, "f16e56246b2a0d3e815ff4dc9ee8e34f", 0x3df8c54c}, /* fit L -6.4, imatrix L -7.8 */
};

static uint64_t lcg(uint64_t *st)
{
    *st = *st * 6364136223846793005ull + 1442695040888963407ull;
    return *st >> 33;
}

static void hex_of(const void *p, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", ((const uint8_t *)p)[i]);
}

START_TEST(test_golden)
{
    float x[3 * QK], imp[3 * QK], d[3], di[3];
    uint64_t st = 2024;
    for (int i = 0; i < 3 * QK; i++)
        x[i] = (float)((int)(lcg(&st) % 2001) - 1000) / 1024.0f;
    x[40] *= 8.0f;
    for (int i = 0; i < 3 * QK; i++)
        imp[i] = (float)(lcg(&st) % 4000 + 1) / 1000.0f;
    ck_assert_uint_eq(fbits(x[0]), fbits(-0.537109375f));
    ck_assert_uint_eq(fbits(imp[1]), fbits(0.075f));

    int8_t q[3 * QK];
    uint16_t h[3];
    uint8_t qr[48], qf[48], qi[48];
    float dr[3];
    char hex[65];
    ml_quantize_row_q8_0(x, 3 * QK, q, d);
    for (int b = 0; b < 3; b++) {
        hex_of(q + b * QK, QK, hex);
        ck_assert_str_eq(hex, goldens[b].q8);
        ck_assert_uint_eq(fbits(d[b]), goldens[b].d8);
    }
    ck_assert_int_eq(ml_quantize_row_q8_0_f16(x, 3 * QK, q, h, NULL), ML_OK);
    ml_quantize_row_q4_0_round(x, 3 * QK, qr, dr);
    ml_quantize_row_q4_0_fit(x, 3 * QK, NULL, qf, d);
    ml_quantize_row_q4_0_fit(x, 3 * QK, imp, qi, di);
    for (int b = 0; b < 3; b++) {
        hex_of(q + b * QK, QK, hex);
        ck_assert_str_eq(hex, goldens[b].q8h);
        ck_assert_uint_eq(h[b], goldens[b].d8h);
        check_q4(qr + 16 * b, dr[b], goldens[b].round, goldens[b].dr, "golden round");
        check_q4(qf + 16 * b, d[b], goldens[b].fit, goldens[b].df, "golden fit");
        check_q4(qi + 16 * b, di[b], goldens[b].imat, goldens[b].di, "golden imatrix");
    }
}
END_TEST

START_TEST(test_q4_fit_nonfinite)
{
    /* The row function takes a NaN or an infinity as 0 (the matrix function
     * refuses them first): [NaN, 1, inf, 0.45 at 3] = [0, 1, 0, 0.45]. */
    float x[QK], ref[QK], d, dr;
    uint8_t qs[16], qr[16];
    BLOCK(x, NAN, 1.0f, INFINITY, 0.45f, -INFINITY);
    BLOCK(ref, 0.0f, 1.0f, 0.0f, 0.45f, 0.0f);
    ml_quantize_row_q4_0_fit(x, QK, NULL, qs, &d);
    ml_quantize_row_q4_0_fit(ref, QK, NULL, qr, &dr);
    ck_assert_mem_eq(qs, qr, 16);
    ck_assert_uint_eq(fbits(d), fbits(dr));
    ck_assert_uint_eq(fbits(d), 0xbe128c4a);
}
END_TEST

/* ======================================================================
 * f16 scales for Q4_0
 * ====================================================================== */

START_TEST(test_scales_to_f16)
{
    static const float d[] = {1.0f, -0.1431133f, 65504.0f, -65519.0f, 0x1p-25f, -0.0f};
    static const uint16_t want[] = {0x3c00, 0xb094, 0x7bff, 0xfbff, 0x0000, 0x8000};
    uint16_t h[6];
    ml_error e;
    ck_assert_int_eq(ml_quant_scales_to_f16(d, 6, h, &e), ML_OK);
    for (int i = 0; i < 6; i++)
        ck_assert_msg(h[i] == want[i], "scale %d: 0x%04x, expected 0x%04x", i, h[i], want[i]);
    /* -0.1431133f = -0x1.251896p-3: f16 keeps 10 fraction bits,
     * 1.0010010100|0110... rounds down to 0x094, exponent -3 + 15 = 12:
     * 0xb094.  65504 is the largest f16 (0x7bff); -65519 rounds to -65504;
     * 2^-25 is the tie between 0 and 2^-24, to even: 0; -0.0 keeps its
     * sign. */
    static const float bad[] = {1.0f, 2.0f, -65520.0f};
    tu_err_reset(&e);
    TU_CHECK_ERR("f16 overflow", ml_quant_scales_to_f16(bad, 3, h, &e), e, ML_E_UNSUPPORTED, "",
                 -1);
    ck_assert_msg(strstr(e.msg, "scale 2"), "%s", e.msg);
    static const float nan1[] = {NAN};
    ck_assert_int_eq(ml_quant_scales_to_f16(nan1, 1, h, NULL), ML_E_UNSUPPORTED);
}
END_TEST

/* ======================================================================
 * Dequantization
 * ====================================================================== */

START_TEST(test_dequant)
{
    int8_t q[2 * QK];
    uint8_t qs[QK];
    float d[2] = {0.5f, -3.0f}, y[2 * QK];
    for (int i = 0; i < 2 * QK; i++)
        q[i] = (int8_t)(i * 4 - 127);
    ml_dequantize_row_q8_0(q, d, 2 * QK, y);
    for (int i = 0; i < 2 * QK; i++)
        ck_assert_float_eq(y[i], (float)(i * 4 - 127) * d[i / QK]);
    /* byte j: low nibble element j, high nibble element j + 16 */
    for (int i = 0; i < QK; i++)
        qs[i] = (uint8_t)(i % 16 | (15 - i % 16) << 4);
    ml_dequantize_row_q4_0(qs, d, 2 * QK, y);
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < 16; j++) {
            ck_assert_float_eq(y[b * QK + j], (float)(j - 8) * d[b]);
            ck_assert_float_eq(y[b * QK + j + 16], (float)(7 - j) * d[b]);
        }
}
END_TEST

/* ======================================================================
 * Importance
 * ====================================================================== */

START_TEST(test_importance)
{
    /* sums [4, 1, 0, 3] over 2 tokens: means [2, 0.5, 0, 1.5], their mean
     * 1, so imp = [2, 0.5, 0.001 (the floor), 1.5]. */
    static const double s1[] = {4, 1, 0, 3};
    float imp[4];
    ml_error e;
    ck_assert_int_eq(ml_quant_importance(s1, 4, 2, imp, &e), ML_OK);
    ck_assert_float_eq(imp[0], 2.0f);
    ck_assert_float_eq(imp[1], 0.5f);
    ck_assert_float_eq(imp[2], 0.001f);
    ck_assert_float_eq(imp[3], 1.5f);
    /* The token count cancels; the floor applies to ratios below 0.001:
     * [1e-4, 2 - 1e-4] (mean 1) -> [0.001, 1.9999]; exactly 0.001 stays. */
    static const double s2[] = {1e-4, 2 - 1e-4}, s3[] = {0.002, 1.998};
    ck_assert_int_eq(ml_quant_importance(s2, 2, 1000, imp, &e), ML_OK);
    ck_assert_float_eq(imp[0], 0.001f);
    ck_assert_float_eq(imp[1], (float)(2 - 1e-4));
    ck_assert_int_eq(ml_quant_importance(s3, 2, 7, imp, &e), ML_OK);
    ck_assert_float_eq(imp[0], (float)((0.002 / 7) / ((0.002 / 7 + 1.998 / 7) / 2)));
    /* All zero: every channel 1. */
    static const double z[] = {0, 0, 0};
    ck_assert_int_eq(ml_quant_importance(z, 3, 5, imp, &e), ML_OK);
    ck_assert(imp[0] == 1.0f && imp[1] == 1.0f && imp[2] == 1.0f);
    /* Errors. */
    tu_err_reset(&e);
    TU_CHECK_ERR("no tokens", ml_quant_importance(s1, 4, 0, imp, &e), e, ML_E_INVAL, "", -1);
    TU_CHECK_ERR("no channels", ml_quant_importance(s1, 0, 2, imp, &e), e, ML_E_INVAL, "", -1);
    static const double neg[] = {1, -1, 2};
    TU_CHECK_ERR("negative", ml_quant_importance(neg, 3, 1, imp, &e), e, ML_E_FORMAT, "", -1);
    ck_assert_msg(strstr(e.msg, "channel 1"), "%s", e.msg);
    const double nanv[] = {1, 2, NAN};
    TU_CHECK_ERR("NaN", ml_quant_importance(nanv, 3, 1, imp, &e), e, ML_E_FORMAT, "", -1);
    ck_assert_msg(strstr(e.msg, "channel 2"), "%s", e.msg);
    const double infv[] = {INFINITY};
    ck_assert_int_eq(ml_quant_importance(infv, 1, 1, imp, NULL), ML_E_FORMAT);
    const double big[] = {DBL_MAX, DBL_MAX};
    TU_CHECK_ERR("overflow", ml_quant_importance(big, 2, 1, imp, &e), e, ML_E_FORMAT, "", -1);
}
END_TEST

START_TEST(test_fit_imatrix)
{
    float x[QK], imp[QK], d, d2;
    uint8_t qs[16], q2[16];
    /* Block [1, -0.25, -0.5625] as a whole row: s^2 = (1 + 0.0625 +
     * 0.31640625) / 32 = 0.0430908203125, and with imp = 1 the weights
     * sqrt((s^2 + x^2) / (s^2 + 1)) are [1, 0.31816, 0.58707] and 0.20325 for
     * the zeros.  Candidate L = -6.6, levels (-7, 2, 4), wins (as with x^2
     * weights, whose d is 0xbe11fd0e), d = 0xbe11892e (-0.1421249). */
    BLOCK(x, 1.0f, -0.25f, -0.5625f);
    for (int j = 0; j < QK; j++)
        imp[j] = 1.0f;
    ml_quantize_row_q4_0_fit(x, QK, imp, qs, &d);
    check_q4(qs, d, "818a8c88888888888888888888888888", 0xbe11892e, "imp 1");
    ml_quantize_row_q4_0_fit(x, QK, NULL, q2, &d2);
    check_q4(q2, d2, "818a8c88888888888888888888888888", 0xbe11fd0e, "x^2");
    /* Every importance times 2 multiplies every weight by exactly 2: the
     * same bits. */
    for (int j = 0; j < QK; j++)
        imp[j] = 2.0f;
    ml_quantize_row_q4_0_fit(x, QK, imp, q2, &d2);
    ck_assert_mem_eq(qs, q2, 16);
    ck_assert_uint_eq(fbits(d), fbits(d2));
    /* Column 1 a hundred times as important (weight 31.8): -0.25 must be
     * met, which (-8, 2, ...) does exactly; with -0.5625 * L rounding to 5
     * (4.61 at L = -8.2; at -8.0 it is the tie 4.5 -> 4), L = -8.2 wins:
     * levels (-8, 2, 5), d = 0xbdfe2cf4 (-0.1241092). */
    for (int j = 0; j < QK; j++)
        imp[j] = 1.0f;
    imp[1] = 100.0f;
    ml_quantize_row_q4_0_fit(x, QK, imp, qs, &d);
    check_q4(qs, d, "808a8d88888888888888888888888888", 0xbdfe2cf4, "imp column 1");
}
END_TEST

START_TEST(test_fit_imatrix_row_mean)
{
    /* s^2 is the mean over the whole row, not the block.  Block [1, 0.6875,
     * 0.75, 0.875, 0.25] in a 64-wide row, imp = 1: beside 32 zeros, s^2 =
     * 0.0447, the weights follow |x| and L = -6.6 wins with levels (-7, -5,
     * -5, -6, -2); beside 32 values of 40, s^2 = 800.04, the weights are
     * nearly uniform and L = -8.0 wins with (-8, -6, -6, -7, -2). */
    float x[2 * QK], imp[2 * QK], d[2];
    uint8_t qs[QK];
    BLOCK(x, 1.0f, 0.6875f, 0.75f, 0.875f, 0.25f);
    for (int j = 0; j < 2 * QK; j++)
        imp[j] = 1.0f;
    for (int j = QK; j < 2 * QK; j++)
        x[j] = 0.0f;
    ml_quantize_row_q4_0_fit(x, 2 * QK, imp, qs, d);
    check_q4(qs, d[0], "81838382868888888888888888888888", 0xbe1343a4, "beside zeros");
    for (int j = QK; j < 2 * QK; j++)
        x[j] = 40.0f;
    ml_quantize_row_q4_0_fit(x, 2 * QK, imp, qs, d);
    check_q4(qs, d[0], "80828281868888888888888888888888", 0xbdfbefeb, "beside 40s");
}
END_TEST

/* ======================================================================
 * q8_mask names
 * ====================================================================== */

START_TEST(test_q8_mask_names)
{
    uint32_t m = 99;
    ml_error e;
    ck_assert_int_eq(ml_q8_mask_parse("", &m, &e), ML_OK);
    ck_assert_uint_eq(m, 0);
    ck_assert_int_eq(ml_q8_mask_parse("tok_emb,wcls,w2", &m, &e), ML_OK);
    ck_assert_uint_eq(m, 1 | 2 | 64);
    ck_assert_int_eq(ml_q8_mask_parse("wk,lqkv,lz,,lout,w3", &m, &e), ML_OK);
    ck_assert_uint_eq(m, 4 | 8 | 16 | 32);
    ck_assert_int_eq(ml_q8_mask_parse("all", &m, &e), ML_OK);
    ck_assert_uint_eq(m, 127);
    ck_assert_int_eq(ml_q8_mask_parse("none,wg", &m, &e), ML_OK);
    ck_assert_uint_eq(m, 4);
    m = 5;
    tu_err_reset(&e);
    TU_CHECK_ERR("unknown", ml_q8_mask_parse("wq,w4", &m, &e), e, ML_E_INVAL, "q8_mask", -1);
    ck_assert_msg(strstr(e.msg, "\"w4\""), "%s", e.msg);
    ck_assert_uint_eq(m, 5); /* untouched on failure */
    TU_CHECK_ERR("prefix", ml_q8_mask_parse("w", &m, &e), e, ML_E_INVAL, "q8_mask", -1);
    /* The names of each bit parse back to that bit. */
    for (uint32_t bit = 1; bit <= 64; bit <<= 1) {
        const char *n = ml_q8_class_name(bit);
        ck_assert_ptr_nonnull(n);
        ck_assert_int_eq(ml_q8_mask_parse(n, &m, NULL), ML_OK);
        ck_assert_uint_eq(m, bit);
    }
    ck_assert_ptr_null(ml_q8_class_name(0));
    ck_assert_ptr_null(ml_q8_class_name(3));
    ck_assert_ptr_null(ml_q8_class_name(128));
}
END_TEST

Suite *suite_quant(void)
{
    Suite *s = suite_create("quant");
    TCase *tc = tcase_create("q8_0");
    tcase_add_test(tc, test_q8_exact);
    tcase_add_test(tc, test_q8_zero_and_threshold);
    tcase_add_test(tc, test_q8_huge);
    tcase_add_test(tc, test_q8_nonfinite);
    tcase_add_test(tc, test_q8_row);
    tcase_add_test(tc, test_q8_f16);
    tcase_add_test(tc, test_q8_f16_limits);
    tcase_add_test(tc, test_q8_f16_tiny);
    suite_add_tcase(s, tc);
    tc = tcase_create("q4_0");
    tcase_add_test(tc, test_q4_round);
    tcase_add_test(tc, test_q4_round_edges);
    tcase_add_test(tc, test_q4_fit_hand);
    tcase_add_test(tc, test_q4_fit_ties);
    tcase_add_test(tc, test_q4_fit_each_candidate);
    tcase_add_test(tc, test_q4_fit_scaling);
    tcase_add_test(tc, test_q4_fit_thresholds);
    tcase_add_test(tc, test_golden);
    tcase_add_test(tc, test_q4_fit_nonfinite);
    tcase_add_test(tc, test_scales_to_f16);
    suite_add_tcase(s, tc);
    tc = tcase_create("helpers");
    tcase_add_test(tc, test_dequant);
    tcase_add_test(tc, test_importance);
    tcase_add_test(tc, test_fit_imatrix);
    tcase_add_test(tc, test_fit_imatrix_row_mean);
    tcase_add_test(tc, test_q8_mask_names);
    suite_add_tcase(s, tc);
    return s;
}
