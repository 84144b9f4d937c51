/* check_kv_cache.c - the KV cache's rows as their types store them
 * (lib/runtime/kv_cache.c): Q8_0 and Q4_0 blocks laid out as the cache
 * says (an f32 scale, then the spec's quants), each value quantized by the
 * spec's rule as written out here, read back as q·d within half a step
 * (Q4_0: a step, its top level clamped); f16 and f32 rows; the public
 * sizes and the head size check (ml_cache_type_bytes, _check); the
 * Walsh-Hadamard rotation of blocked caches (ml__kv_rotate). */
#include "suites.h"
#include "testutil.h"

#include "kernels/fmath.h"
#include "runtime/kv_cache.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { N = 128 }; /* four blocks */

/* A row with blocks of different kinds: small values, large ones, all
 * zeros, and one value far above the others. */
static void make_row(float *x, uint64_t seed)
{
    tu_rng r = {seed};
    for (int i = 0; i < N; i++) {
        float u = (float)tu_below(&r, 20001) / 10000.0f - 1.0f;
        x[i] = i < 32 ? u * 1e-3f : i < 64 ? u * 300.0f : i < 96 ? 0.0f : u;
    }
    x[100] = -40.0f;
}

START_TEST(test_q8_0)
{
    float x[N], y[N];
    ml_kv_q8 blk[N / 32];
    make_row(x, 11 + (uint64_t)_i);
    ml__kv_store(&ml__fmath_scalar, ML_CACHE_Q8_0, blk, x, N);
    ml__kv_load(ML_CACHE_Q8_0, y, blk, N);
    for (int b = 0; b < N / 32; b++) {
        float amax = 0;
        for (int i = 0; i < 32; i++)
            amax = fmaxf(amax, fabsf(x[32 * b + i]));
        float d = amax < 1e-30f ? 0.0f : amax / 127, id = amax < 1e-30f ? 0.0f : 127 / amax;
        ck_assert_msg(blk[b].d == d, "block %d: scale %g, want %g", b, blk[b].d, d);
        for (int i = 0; i < 32; i++) {
            float v = x[32 * b + i];
            float q = truncf(v * id + copysignf(0.5f, v));
            q = q > 127 ? 127 : q < -127 ? -127 : q;
            ck_assert_msg(blk[b].q[i] == (int8_t)q, "block %d value %d: quant %d, want %g", b, i,
                          blk[b].q[i], q);
            ck_assert(y[32 * b + i] == (float)blk[b].q[i] * d);
            ck_assert_msg(fabsf(y[32 * b + i] - v) <= d * 0.5f * 1.0001f,
                          "value %d: %g read back as %g", 32 * b + i, v, y[32 * b + i]);
        }
    }
    ck_assert(blk[2].d == 0 && y[70] == 0); /* the zero block */
}
END_TEST

START_TEST(test_q4_0)
{
    float x[N], y[N];
    ml_kv_q4 blk[N / 32];
    make_row(x, 23 + (uint64_t)_i);
    ml__kv_store(&ml__fmath_scalar, ML_CACHE_Q4_0, blk, x, N);
    ml__kv_load(ML_CACHE_Q4_0, y, blk, N);
    for (int b = 0; b < N / 32; b++) {
        float xmax = 0;
        for (int i = 0; i < 32; i++)
            if (fabsf(x[32 * b + i]) > fabsf(xmax))
                xmax = x[32 * b + i];
        float d = xmax / -8, id = d != 0 ? 1 / d : 0;
        ck_assert_msg(blk[b].d == d, "block %d: scale %g, want %g", b, blk[b].d, d);
        for (int i = 0; i < 32; i++) {
            float v = x[32 * b + i];
            float t = truncf(v * id + 8.5f);
            int want = t > 15 ? 15 : t < 0 ? 0 : (int)t;
            int got = i < 16 ? blk[b].qs[i] & 15 : blk[b].qs[i - 16] >> 4;
            ck_assert_msg(got == want, "block %d value %d: nibble %d, want %d", b, i, got, want);
            ck_assert(y[32 * b + i] == (float)(got - 8) * d);
            ck_assert_msg(fabsf(y[32 * b + i] - v) <= fabsf(d) * 1.0001f,
                          "value %d: %g read back as %g", 32 * b + i, v, y[32 * b + i]);
        }
    }
}
END_TEST

/* The rotation: a unit vector becomes a block of ±1/sqrt(32) with
 * Walsh's signs (row j of the Hadamard matrix: (-1)^popcount(i & j)),
 * twice is the identity and dot products stay, up to rounding; an
 * outlier is spread over its block only. */
START_TEST(test_rotate)
{
    float x[N], y[N], e[64] = {0};
    e[32 + 5] = 1.0f;
    ml__kv_rotate(e, 64);
    for (int i = 0; i < 32; i++) {
        ck_assert(e[i] == 0.0f);
        const float want = (__builtin_popcount((unsigned)(i & 5)) % 2 ? -1.0f : 1.0f) *
                           0.17677669529663687f;
        ck_assert_msg(e[32 + i] == want, "value %d: %g, want %g", i, e[32 + i], want);
    }
    make_row(x, 31);
    make_row(y, 37);
    double dot = 0, rdot = 0;
    for (int i = 0; i < N; i++)
        dot += (double)x[i] * y[i];
    float rx[N], ry[N];
    memcpy(rx, x, sizeof rx);
    memcpy(ry, y, sizeof ry);
    ml__kv_rotate(rx, N);
    ml__kv_rotate(ry, N);
    for (int i = 0; i < N; i++)
        rdot += (double)rx[i] * ry[i];
    ck_assert_msg(fabs(rdot - dot) <= 1e-5 * (1 + fabs(dot)), "dot %g, rotated %g", dot, rdot);
    ml__kv_rotate(rx, N);
    for (int i = 0; i < N; i++)
        ck_assert_msg(fabsf(rx[i] - x[i]) <= 1e-5f * (1 + fabsf(x[i])), "value %d: %g back as %g",
                      i, x[i], rx[i]);
    /* the outlier at 100 (-40) now weighs 40/sqrt(32) on each of its block */
    memcpy(rx, x, sizeof rx);
    ml__kv_rotate(rx, N);
    float amax = 0;
    for (int i = 96; i < 128; i++)
        amax = fmaxf(amax, fabsf(rx[i]));
    ck_assert_msg(amax < 9.0f, "block 3's largest value after the rotation: %g", amax);
}
END_TEST

START_TEST(test_f16_f32)
{
    float x[N];
    uint16_t h[N];
    float f[N];
    make_row(x, 5);
    ml__kv_store(&ml__fmath_scalar, ML_CACHE_F16, h, x, N);
    ml__kv_store(&ml__fmath_scalar, ML_CACHE_F32, f, x, N);
    for (int i = 0; i < N; i++) {
        ck_assert(h[i] == ml_f32_to_f16(x[i]));
        ck_assert(f[i] == x[i]);
    }
}
END_TEST

START_TEST(test_sizes)
{
    static const struct {
        ml_cache_type t;
        uint64_t bytes; /* of 4096 values */
    } want[] = {{ML_CACHE_F32, 16384}, {ML_CACHE_F16, 8192}, {ML_CACHE_Q8_0, 4608},
                {ML_CACHE_Q4_0, 2560}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        ck_assert_uint_eq(ml_cache_type_bytes(want[i].t, 4096), want[i].bytes);
        ck_assert_uint_eq(ml__kv_bytes(want[i].t, 4096), want[i].bytes);
    }
    ck_assert_uint_eq(ml_cache_type_bytes((ml_cache_type)4, 4096), 0);
    /* the element at 64 of a row: two blocks on */
    uint8_t row[256];
    ck_assert_ptr_eq(ml__kv_at(row, 64, ML_CACHE_Q8_0), row + 72);
    ck_assert_ptr_eq(ml__kv_at(row, 64, ML_CACHE_Q4_0), row + 40);
}
END_TEST

START_TEST(test_check)
{
    ml_mlb_header h;
    ml_mlb_header_init(&h);
    h.dim = 64, h.n_heads = 4; /* head_dim 0: 16 */
    ml_error err;
    ck_assert_int_eq(ml_cache_type_check(&h, ML_CACHE_F16, &err), ML_OK);
    ck_assert_int_eq(ml_cache_type_check(&h, ML_CACHE_F32, &err), ML_OK);
    ck_assert_int_eq(ml_cache_type_check(&h, ML_CACHE_Q8_0, &err), ML_E_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "head_dim: 16 (dim / n_heads) is not a multiple of 32, as the "
                                  "blocks of a q8_0 cache need"),
                  "%s", err.msg);
    ck_assert_str_eq(err.field, "head_dim");
    ck_assert_int_eq(ml_cache_type_check(&h, ML_CACHE_Q4_0, &err), ML_E_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "q4_0"), "%s", err.msg);
    ck_assert_int_eq(ml_cache_type_check(&h, (ml_cache_type)-1, &err), ML_E_INVAL);
    h.n_heads = 2; /* 32 */
    ck_assert_int_eq(ml_cache_type_check(&h, ML_CACHE_Q8_0, &err), ML_OK);
    h.head_dim = 48;
    ck_assert_int_eq(ml_cache_type_check(&h, ML_CACHE_Q4_0, &err), ML_E_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "head_dim (offset 80): 48 is not a multiple of 32"), "%s",
                  err.msg);
    h.head_dim = 96;
    ck_assert_int_eq(ml_cache_type_check(&h, ML_CACHE_Q4_0, &err), ML_OK);
}
END_TEST

Suite *suite_kv_cache(void)
{
    Suite *s = suite_create("kv_cache");
    TCase *tc = tcase_create("rows");
    tcase_add_loop_test(tc, test_q8_0, 0, 4);
    tcase_add_loop_test(tc, test_q4_0, 0, 4);
    tcase_add_test(tc, test_rotate);
    tcase_add_test(tc, test_f16_f32);
    tcase_add_test(tc, test_sizes);
    tcase_add_test(tc, test_check);
    suite_add_tcase(s, tc);
    return s;
}
