/* check_f16.c - half precision conversions.  ml_f16_to_f32 is checked for
 * all 65536 inputs against an independent reference (ldexp of the fields)
 * and, where the compiler has _Float16 (gcc 12 on x86-64), against the
 * compiler's own conversion.  ml_f32_to_f16 is checked on millions of
 * random floats (all bit patterns, and dense in the half range) against a
 * reference that searches the sorted halves for the nearest one (ties to
 * even, overflow to infinity at 65520) and against _Float16, plus edge
 * cases: ties, subnormals, 65504, 65520, NaN, infinities, -0.0.  NaN stays
 * NaN with its sign in both directions. */
#include "suites.h"
#include "testutil.h"

#include <float.h>
#include <math.h>

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

/* Reference: value of a half from its fields. */
static double ref_h2d(uint16_t h)
{
    int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    double v;
    if (exp == 0x1f)
        v = man ? NAN : INFINITY;
    else if (exp == 0)
        v = ldexp(man, -24);
    else
        v = ldexp(1024 + man, exp - 25);
    return h & 0x8000 ? -v : v;
}

/* Value of the non-negative half h for rounding; 0x7c00 counts as 2^16,
 * the point IEEE rounding overflows towards. */
static double mag(uint16_t h)
{
    return h == 0x7c00 ? 65536.0 : ref_h2d(h);
}

/* Reference narrowing: nearest half, ties to even, by binary search. */
static uint16_t ref_f2h(float f)
{
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    if (isnan(f))
        return sign | 0x7e00;
    double a = fabs((double)f);
    if (a >= 65536.0)
        return sign | 0x7c00;
    uint16_t lo = 0, hi = 0x7c00; /* mag(lo) <= a < mag(hi) */
    while (hi - lo > 1) {
        uint16_t mid = (uint16_t)((lo + hi) / 2);
        if (mag(mid) <= a)
            lo = mid;
        else
            hi = mid;
    }
    double dl = a - mag(lo), dh = mag(hi) - a;
    uint16_t r = dl < dh ? lo : dh < dl ? hi : (lo & 1 ? hi : lo);
    return sign | r;
}

static int h_isnan(uint16_t h)
{
    return (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
}

#ifdef __FLT16_MAX__
static uint16_t cc_f2h(float f)
{
    _Float16 h = (_Float16)f;
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}

static float cc_h2f(uint16_t u)
{
    _Float16 h;
    memcpy(&h, &u, 2);
    return (float)h;
}
#endif

START_TEST(test_f16_to_f32_all)
{
    unsigned nans = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        float got = ml_f16_to_f32(h);
        double want = ref_h2d(h);
        if (isnan(want)) {
            TU_REQUIRE(isnan(got), "0x%04x: %a is not NaN", h, (double)got);
            TU_REQUIRE(!!signbit(got) == !!(h & 0x8000), "0x%04x: NaN sign", h);
            nans++;
            continue;
        }
        TU_REQUIRE((double)got == want && !!signbit(got) == !!(h & 0x8000),
                   "0x%04x: %a, expected %a", h, (double)got, want);
#ifdef __FLT16_MAX__
        TU_REQUIRE(fbits(got) == fbits(cc_h2f(h)), "0x%04x: 0x%08x vs _Float16 0x%08x", h,
                   fbits(got), fbits(cc_h2f(h)));
#endif
    }
    ck_assert_uint_eq(nans, 2 * 1023);
    /* Some exact bit patterns. */
    ck_assert_uint_eq(fbits(ml_f16_to_f32(0x0000)), 0x00000000u);
    ck_assert_uint_eq(fbits(ml_f16_to_f32(0x8000)), 0x80000000u);
    ck_assert_uint_eq(fbits(ml_f16_to_f32(0x3c00)), 0x3f800000u);
    ck_assert_uint_eq(fbits(ml_f16_to_f32(0x0001)), 0x33800000u); /* 2^-24 */
    ck_assert_uint_eq(fbits(ml_f16_to_f32(0x03ff)), 0x387fc000u); /* largest subnormal */
    ck_assert_uint_eq(fbits(ml_f16_to_f32(0x0400)), 0x38800000u); /* 2^-14 */
    ck_assert_uint_eq(fbits(ml_f16_to_f32(0x7bff)), 0x477fe000u); /* 65504 */
    ck_assert_uint_eq(fbits(ml_f16_to_f32(0x7c00)), 0x7f800000u);
    ck_assert_uint_eq(fbits(ml_f16_to_f32(0xfc00)), 0xff800000u);
}
END_TEST

typedef struct edge {
    float f;
    uint16_t h;
} edge;

START_TEST(test_f32_to_f16_edges)
{
    const edge e[] = {
        {0.0f, 0x0000},
        {-0.0f, 0x8000},
        {1.0f, 0x3c00},
        {-2.0f, 0xc000},
        {0.1f, 0x2e66},
        {65504.0f, 0x7bff},
        {-65504.0f, 0xfbff},
        {nextafterf(65520.0f, 0.0f), 0x7bff},
        {65520.0f, 0x7c00},               /* the tie rounds to even: infinity */
        {-65520.0f, 0xfc00},
        {65536.0f, 0x7c00},
        {1e10f, 0x7c00},
        {FLT_MAX, 0x7c00},
        {-FLT_MAX, 0xfc00},
        {INFINITY, 0x7c00},
        {-INFINITY, 0xfc00},
        {0x1p-14f, 0x0400},               /* smallest normal */
        {0x1p-14f - 0x1p-25f, 0x0400},    /* tie between 0x3ff and 0x400: even */
        {0x1p-14f - 0x1p-24f, 0x03ff},    /* largest subnormal */
        {0x1p-24f, 0x0001},               /* smallest subnormal */
        {0x1p-25f, 0x0000},               /* tie: rounds to even zero */
        {-0x1p-25f, 0x8000},
        {0x1.000002p-25f, 0x0001},        /* just above the tie */
        {0x1.8p-24f, 0x0002},             /* 1.5 ulp: to even 2 */
        {0x1.4p-23f, 0x0002},             /* 2.5 ulp: to even 2 */
        {0x1.cp-23f, 0x0004},             /* 3.5 ulp: to even 4 */
        {0x1p-26f, 0x0000},
        {FLT_MIN, 0x0000},
        {0x1p-149f, 0x0000},              /* float subnormal */
        {-0x1p-149f, 0x8000},
        {1.0f + 0x1p-11f, 0x3c00},        /* tie: to even */
        {1.0f + 0x1p-11f + 0x1p-23f, 0x3c01},
        {1.0f + 0x3p-11f, 0x3c02},        /* tie: to even, upwards */
        {2049.0f, 0x6800},                /* 2048 + 1 (tie): even */
        {2051.0f, 0x6802},
        {2047.5f, 0x6800},                /* 2047 + 0.5 rounds up into the next binade */
        {0x1.ffcp15f, 0x7bff},
    };
    for (size_t i = 0; i < sizeof e / sizeof e[0]; i++) {
        uint16_t got = ml_f32_to_f16(e[i].f);
        ck_assert_msg(got == e[i].h, "%a: 0x%04x, expected 0x%04x", (double)e[i].f, got, e[i].h);
        ck_assert_uint_eq(ref_f2h(e[i].f), e[i].h);
#ifdef __FLT16_MAX__
        ck_assert_uint_eq(cc_f2h(e[i].f), e[i].h);
#endif
    }
    /* NaN stays NaN, with its sign, whatever its payload. */
    static const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u,
                                    0x7fffffffu, 0x7fa00000u, 0x7f802000u, 0xffffffffu};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        uint16_t got = ml_f32_to_f16(from_bits(nans[i]));
        ck_assert_msg(h_isnan(got), "0x%08x -> 0x%04x is not NaN", nans[i], got);
        ck_assert_int_eq(!!(got & 0x8000), !!(nans[i] & 0x80000000u));
    }
}
END_TEST

static void check_one(float f)
{
    uint16_t got = ml_f32_to_f16(f);
    if (isnan(f)) {
        TU_REQUIRE(h_isnan(got), "0x%08x -> 0x%04x", fbits(f), got);
        TU_REQUIRE(!!(got & 0x8000) == !!signbit(f), "0x%08x: NaN sign", fbits(f));
        return;
    }
    uint16_t want = ref_f2h(f);
    TU_REQUIRE(got == want, "%a (0x%08x): 0x%04x, expected 0x%04x", (double)f, fbits(f), got,
               want);
#ifdef __FLT16_MAX__
    TU_REQUIRE(got == cc_f2h(f), "%a: 0x%04x, _Float16 0x%04x", (double)f, got, cc_f2h(f));
#endif
}

/* Random bit patterns: every class of float. */
START_TEST(test_f32_to_f16_random_bits)
{
    tu_rng r = {12345};
    for (int i = 0; i < 2000000; i++)
        check_one(from_bits((uint32_t)tu_next(&r)));
}
END_TEST

/* Dense in the range where halves live, ties included. */
START_TEST(test_f32_to_f16_random_range)
{
    tu_rng r = {777};
    for (int i = 0; i < 2000000; i++) {
        uint64_t x = tu_next(&r);
        uint32_t exp = 127 - 27 + (uint32_t)(x % 45); /* 2^-27 .. 2^17 */
        uint32_t man = (uint32_t)(x >> 8) & 0x7fffff;
        if ((x >> 40) % 4 == 0) /* exactly halfway between two halves (or close) */
            man = (man & ~0x1fffu) | 0x1000u | (uint32_t)((x >> 50) % 2);
        uint32_t sign = (uint32_t)(x >> 63) << 31;
        check_one(from_bits(sign | exp << 23 | man));
    }
}
END_TEST

/* Every finite half survives f16 -> f32 -> f16. */
START_TEST(test_f16_roundtrip)
{
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        uint16_t back = ml_f32_to_f16(ml_f16_to_f32(h));
        if (h_isnan(h))
            TU_REQUIRE(h_isnan(back) && (back & 0x8000) == (h & 0x8000), "0x%04x -> 0x%04x", h,
                       back);
        else
            TU_REQUIRE(back == h, "0x%04x -> 0x%04x", h, back);
    }
}
END_TEST

Suite *suite_f16(void)
{
    Suite *s = suite_create("f16");
    TCase *tc = tcase_create("conversions");
    tcase_add_test(tc, test_f16_to_f32_all);
    tcase_add_test(tc, test_f32_to_f16_edges);
    tcase_add_test(tc, test_f32_to_f16_random_bits);
    tcase_add_test(tc, test_f32_to_f16_random_range);
    tcase_add_test(tc, test_f16_roundtrip);
    suite_add_tcase(s, tc);
    return s;
}
