/* check_quant_matrix.c - whole matrices (ml_quantize_matrix,
 * ml_quant_sizes): the bytes equal the row functions' in the file's
 * encoding (little-endian f32 or f16 scales) for every rule; they are the
 * same for 1, 2, 3 and 7 threads; errors name the tensor and the first bad
 * row and column whatever the thread count (NaN, infinity, f16 overflow
 * for Q8_0 and Q4_0), and bad options are refused.  Then properties over
 * random data: Q8_0's error is at most d/2 plus rounding and never -128;
 * the round rule's error is at most |d|/2 except at its cap; the fit never
 * does worse (x^2-weighted) than the round rule on the same block and
 * beats it on average; the fit's result is the best of its 13 candidates,
 * first on ties. */
#include "suites.h"
#include "testutil.h"
#include "quant/quant_impl.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define QK 32

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* A normal-ish value: the sum of four uniforms, scaled; a few blocks get
 * an outlier, a few are all zero, some rows are tiny (1e-8, so the fit
 * rescales them) or large (`big`: 1e7 for f32 scales, which the fit
 * rescales too, 1e3 for f16 scales, which cannot hold scales above
 * 65504). */
static float rnd(tu_rng *r)
{
    double s = 0;
    for (int i = 0; i < 4; i++)
        s += (double)tu_below(r, 1u << 24) / (1 << 24) - 0.5;
    return (float)s;
}

static void fill(float *x, size_t rows, size_t cols, uint64_t seed, float big)
{
    tu_rng r = {seed};
    for (size_t i = 0; i < rows; i++) {
        float scale = i % 11 == 3 ? 1e-8f : i % 11 == 7 ? big : 0.02f;
        for (size_t c = 0; c < cols; c++)
            x[i * cols + c] = rnd(&r) * scale;
        for (size_t b = 0; b < cols / QK; b++) {
            uint32_t k = tu_below(&r, 16);
            if (k == 0)
                memset(x + i * cols + b * QK, 0, QK * sizeof(float));
            else if (k == 1)
                x[i * cols + b * QK + tu_below(&r, QK)] *= 40.0f;
        }
    }
}

typedef struct mode {
    ml_type type;
    ml_q4_rule rule;
    int f16;
    int imp;
    const char *name;
} mode;

static const mode modes[] = {
    {ML_TYPE_Q8_0, ML_Q4_FIT, 0, 0, "Q8_0"},
    {ML_TYPE_Q8_0, ML_Q4_FIT, 1, 0, "Q8_0 f16"},
    {ML_TYPE_Q4_0, ML_Q4_FIT, 0, 0, "Q4_0 fit"},
    {ML_TYPE_Q4_0, ML_Q4_FIT, 1, 0, "Q4_0 fit f16"},
    {ML_TYPE_Q4_0, ML_Q4_FIT, 0, 1, "Q4_0 fit imatrix"},
    {ML_TYPE_Q4_0, ML_Q4_FIT, 1, 1, "Q4_0 fit imatrix f16"},
    {ML_TYPE_Q4_0, ML_Q4_ROUND, 0, 0, "Q4_0 round"},
    {ML_TYPE_Q4_0, ML_Q4_ROUND, 1, 0, "Q4_0 round f16"},
};

static float *importances(size_t cols, uint64_t seed)
{
    float *imp = malloc(cols * sizeof *imp);
    ck_assert_ptr_nonnull(imp);
    tu_rng r = {seed};
    for (size_t c = 0; c < cols; c++)
        imp[c] = 0.001f + (float)tu_below(&r, 4000) / 1000.0f;
    return imp;
}

typedef struct out {
    uint8_t *q, *s;
    size_t qb, sb;
} out;

static ml_status quantize(const float *x, size_t rows, size_t cols, const mode *m,
                          const float *imp, unsigned threads, out *o, ml_error *e)
{
    ck_assert_int_eq(ml_quant_sizes(m->type, m->f16, rows, cols, &o->qb, &o->sb, NULL), ML_OK);
    o->q = malloc(o->qb + 1);
    o->s = malloc(o->sb + 1);
    ck_assert(o->q && o->s);
    ml_quant_opts opt = {.type = m->type, .q4_rule = m->rule, .scale_f16 = m->f16,
                         .imp = m->imp ? imp : NULL, .threads = threads, .name = "blk.2.wq"};
    return ml_quantize_matrix(x, rows, cols, &opt, o->q, o->qb, o->s, o->sb, e);
}

static void out_free(out *o)
{
    free(o->q);
    free(o->s);
}

/* The row functions' result for the whole matrix, encoded as in a file. */
static void by_rows(const float *x, size_t rows, size_t cols, const mode *m, const float *imp,
                    out *o)
{
    ck_assert_int_eq(ml_quant_sizes(m->type, m->f16, rows, cols, &o->qb, &o->sb, NULL), ML_OK);
    o->q = calloc(o->qb + 1, 1);
    o->s = calloc(o->sb + 1, 1);
    float *d = malloc(cols / QK * sizeof *d);
    uint16_t *h = malloc(cols / QK * sizeof *h);
    ck_assert(o->q && o->s && d && h);
    size_t nb = cols / QK;
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        if (m->type == ML_TYPE_Q8_0 && m->f16)
            ck_assert_int_eq(ml_quantize_row_q8_0_f16(xr, cols, (int8_t *)o->q + r * cols, h,
                                                      NULL),
                             ML_OK);
        else if (m->type == ML_TYPE_Q8_0)
            ml_quantize_row_q8_0(xr, cols, (int8_t *)o->q + r * cols, d);
        else if (m->rule == ML_Q4_ROUND)
            ml_quantize_row_q4_0_round(xr, cols, o->q + r * cols / 2, d);
        else
            ml_quantize_row_q4_0_fit(xr, cols, m->imp ? imp : NULL, o->q + r * cols / 2, d);
        if (m->f16 && m->type == ML_TYPE_Q4_0)
            ck_assert_int_eq(ml_quant_scales_to_f16(d, nb, h, NULL), ML_OK);
        for (size_t b = 0; b < nb; b++) {
            uint8_t *p = o->s + (r * nb + b) * (m->f16 ? 2 : 4);
            if (m->f16) {
                p[0] = (uint8_t)h[b];
                p[1] = (uint8_t)(h[b] >> 8);
            } else {
                uint32_t u = fbits(d[b]);
                for (int i = 0; i < 4; i++)
                    p[i] = (uint8_t)(u >> (8 * i));
            }
        }
    }
    free(d);
    free(h);
}

START_TEST(test_matrix_equals_rows)
{
    const size_t rows = 37, cols = 192;
    float *x = malloc(rows * cols * sizeof *x);
    ck_assert_ptr_nonnull(x);
    float *imp = importances(cols, 12);
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        fill(x, rows, cols, 11, modes[i].f16 ? 1e3f : 1e7f);
        out a, b;
        ml_error e;
        ck_assert_int_eq(quantize(x, rows, cols, &modes[i], imp, 1, &a, &e), ML_OK);
        by_rows(x, rows, cols, &modes[i], imp, &b);
        ck_assert_msg(!memcmp(a.q, b.q, a.qb), "%s: quants differ", modes[i].name);
        ck_assert_msg(!memcmp(a.s, b.s, a.sb), "%s: scales differ", modes[i].name);
        out_free(&a);
        out_free(&b);
    }
    free(imp);
    free(x);
}
END_TEST

START_TEST(test_matrix_threads)
{
    /* Byte-identical for 1, 2, 3 and 7 threads, also with more threads than
     * rows. */
    static const unsigned counts[] = {2, 3, 7, 200};
    const size_t rows = 61, cols = 256;
    float *x = malloc(rows * cols * sizeof *x);
    ck_assert_ptr_nonnull(x);
    float *imp = importances(cols, 22);
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        fill(x, rows, cols, 21, modes[i].f16 ? 1e3f : 1e7f);
        out one;
        ck_assert_int_eq(quantize(x, rows, cols, &modes[i], imp, 1, &one, NULL), ML_OK);
        for (size_t t = 0; t < sizeof counts / sizeof counts[0]; t++) {
            out many;
            ck_assert_int_eq(quantize(x, rows, cols, &modes[i], imp, counts[t], &many, NULL),
                             ML_OK);
            ck_assert_msg(!memcmp(one.q, many.q, one.qb) && !memcmp(one.s, many.s, one.sb),
                          "%s: %u threads differ from 1", modes[i].name, counts[t]);
            out_free(&many);
        }
        out_free(&one);
    }
    free(imp);
    free(x);
}
END_TEST

/* Puts bad values in, checks every thread count reports the first. */
static void expect_error(float *x, size_t rows, size_t cols, const mode *m, ml_status st,
                         const char *needle)
{
    static const unsigned counts[] = {1, 2, 3, 7};
    for (size_t t = 0; t < sizeof counts / sizeof counts[0]; t++) {
        out o;
        ml_error e;
        tu_err_reset(&e);
        char what[96];
        snprintf(what, sizeof what, "%s, %u threads", m->name, counts[t]);
        TU_CHECK_ERR(what, quantize(x, rows, cols, m, NULL, counts[t], &o, &e), e, st, "blk.2.wq",
                     -1);
        ck_assert_msg(strstr(e.msg, needle), "%s: \"%s\" lacks \"%s\"", what, e.msg, needle);
        out_free(&o);
    }
}

START_TEST(test_matrix_nonfinite)
{
    const size_t rows = 50, cols = 128;
    float *x = malloc(rows * cols * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        if (modes[i].imp)
            continue;
        /* Row 7 is large: with f16 scales it overflows too, after row 5. */
        fill(x, rows, cols, 31, 1e8f);
        x[41 * cols + 100] = NAN; /* a later row first in memory order of the threads' work */
        x[5 * cols + 37] = INFINITY;
        x[5 * cols + 90] = NAN;
        expect_error(x, rows, cols, &modes[i], ML_E_FORMAT, "row 5, column 37: inf");
        x[5 * cols + 37] = -NAN;
        expect_error(x, rows, cols, &modes[i], ML_E_FORMAT, "row 5, column 37: ");
        x[5 * cols + 37] = 1.0f;
        expect_error(x, rows, cols, &modes[i], ML_E_FORMAT, "row 5, column 90: ");
    }
    free(x);
}
END_TEST

START_TEST(test_matrix_f16_overflow)
{
    /* A scale above 65504 with f16 scales: Q8_0 needs amax >= 127 * 65520,
     * Q4_0 (d about amax / 7) far less.  Row 9's block 2 and row 30's block
     * 0: row 9 is reported, with the block's columns. */
    const size_t rows = 40, cols = 96;
    float *x = malloc(rows * cols * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        if (!modes[i].f16 || modes[i].imp)
            continue;
        fill(x, rows, cols, 41, 1.0f);
        float big = modes[i].type == ML_TYPE_Q8_0 ? 127.0f * 65520.0f : 8.0f * 65520.0f;
        x[9 * cols + 70] = -big;
        x[30 * cols + 3] = big;
        expect_error(x, rows, cols, &modes[i], ML_E_UNSUPPORTED, "row 9, columns 64-95");
        /* Just below: accepted, the scale stored as 65504 or less. */
        x[9 * cols + 70] = modes[i].type == ML_TYPE_Q8_0 ? -127.0f * 65504.0f : -6.0f * 65504.0f;
        x[30 * cols + 3] = 0.0f;
        out o;
        ck_assert_int_eq(quantize(x, rows, cols, &modes[i], NULL, 3, &o, NULL), ML_OK);
        uint16_t h = (uint16_t)(o.s[2 * (9 * 3 + 2)] | o.s[2 * (9 * 3 + 2) + 1] << 8);
        ck_assert_msg((h & 0x7fff) <= 0x7bff && (h & 0x7fff) >= 0x7000, "%s: 0x%04x",
                      modes[i].name, h);
        out_free(&o);
    }
    free(x);
}
END_TEST

START_TEST(test_matrix_bad_options)
{
    float x[2 * 64] = {0};
    uint8_t q[256], s[256];
    float imp[64];
    ml_error e;
    for (int i = 0; i < 64; i++)
        imp[i] = 1.0f;
    ml_quant_opts o = {.type = ML_TYPE_Q4_0, .name = "wcls"};
    size_t qb, sb;
    ck_assert_int_eq(ml_quant_sizes(ML_TYPE_Q4_0, 0, 2, 64, &qb, &sb, &e), ML_OK);
    ck_assert_uint_eq(qb, 64);
    ck_assert_uint_eq(sb, 16);
    ck_assert_int_eq(ml_quant_sizes(ML_TYPE_Q8_0, 1, 2, 64, &qb, &sb, &e), ML_OK);
    ck_assert_uint_eq(qb, 128);
    ck_assert_uint_eq(sb, 8);
    ck_assert_int_eq(ml_quantize_matrix(x, 2, 64, &o, q, 64, s, 16, &e), ML_OK);

    tu_err_reset(&e);
    TU_CHECK_ERR("cols", ml_quantize_matrix(x, 2, 48, &o, q, 48, s, 12, &e), e, ML_E_INVAL,
                 "wcls", -1);
    TU_CHECK_ERR("sizes", ml_quantize_matrix(x, 2, 64, &o, q, 65, s, 16, &e), e, ML_E_INVAL,
                 "wcls", -1);
    TU_CHECK_ERR("scale sizes", ml_quantize_matrix(x, 2, 64, &o, q, 64, s, 8, &e), e,
                 ML_E_INVAL, "wcls", -1);
    o.type = ML_TYPE_F32;
    TU_CHECK_ERR("type", ml_quantize_matrix(x, 2, 64, &o, q, 64, s, 16, &e), e, ML_E_INVAL,
                 "wcls", -1);
    o.type = ML_TYPE_Q4_0;
    o.scale_f16 = 2;
    TU_CHECK_ERR("scale_f16", ml_quantize_matrix(x, 2, 64, &o, q, 64, s, 16, &e), e, ML_E_INVAL,
                 "wcls", -1);
    o.scale_f16 = 0;
    o.q4_rule = (ml_q4_rule)7;
    TU_CHECK_ERR("rule", ml_quantize_matrix(x, 2, 64, &o, q, 64, s, 16, &e), e, ML_E_INVAL,
                 "wcls", -1);
    o.q4_rule = ML_Q4_ROUND;
    o.imp = imp;
    TU_CHECK_ERR("round + imatrix", ml_quantize_matrix(x, 2, 64, &o, q, 64, s, 16, &e), e,
                 ML_E_INVAL, "wcls", -1);
    o.q4_rule = ML_Q4_FIT;
    imp[45] = 0.0f;
    TU_CHECK_ERR("imp 0", ml_quantize_matrix(x, 2, 64, &o, q, 64, s, 16, &e), e, ML_E_INVAL,
                 "wcls", -1);
    ck_assert_msg(strstr(e.msg, "column 45"), "%s", e.msg);
    imp[45] = NAN;
    TU_CHECK_ERR("imp NaN", ml_quantize_matrix(x, 2, 64, &o, q, 64, s, 16, &e), e, ML_E_INVAL,
                 "wcls", -1);
    imp[45] = INFINITY;
    TU_CHECK_ERR("imp inf", ml_quantize_matrix(x, 2, 64, &o, q, 64, s, 16, &e), e, ML_E_INVAL,
                 "wcls", -1);
    imp[45] = 1.0f;
    ck_assert_int_eq(ml_quantize_matrix(x, 2, 64, &o, q, 64, s, 16, &e), ML_OK);
    /* Q8_0 ignores the importances (Q8_0 has one rule). */
    o.type = ML_TYPE_Q8_0;
    imp[3] = -1.0f;
    ck_assert_int_eq(ml_quantize_matrix(x, 2, 64, &o, q, 128, s, 16, &e), ML_OK);
    TU_CHECK_ERR("no options", ml_quantize_matrix(x, 2, 64, NULL, q, 128, s, 16, &e), e,
                 ML_E_INVAL, "", -1);
    /* Nothing to do: fine, even without buffers. */
    ck_assert_int_eq(ml_quantize_matrix(NULL, 0, 64, &o, NULL, 0, NULL, 0, &e), ML_OK);
    o.imp = NULL;
    ck_assert_int_eq(ml_quantize_matrix(x, 2, 0, &o, NULL, 0, NULL, 0, &e), ML_OK);
    TU_CHECK_ERR("NULL", ml_quantize_matrix(NULL, 2, 64, &o, q, 128, s, 16, &e), e,
                 ML_E_INVAL, "wcls", -1);
}
END_TEST

START_TEST(test_sizes_overflow)
{
    size_t qb = 1, sb = 1;
    ml_error e;
    tu_err_reset(&e);
    TU_CHECK_ERR("2^64", ml_quant_sizes(ML_TYPE_Q8_0, 0, 1ull << 40, 1ull << 24, &qb, &sb, &e),
                 e, ML_E_NOMEM, "", -1);
    /* rows x cols fits 64 bits, and size_t on 64-bit hosts, for Q4_0: */
    ml_status st = ml_quant_sizes(ML_TYPE_Q4_0, 1, 1ull << 31, 1ull << 31, &qb, &sb, &e);
    if (sizeof(size_t) >= 8) {
        ck_assert_int_eq(st, ML_OK);
        ck_assert_uint_eq(qb, 1ull << 61);
        ck_assert_uint_eq(sb, 1ull << 58);
    } else {
        ck_assert_int_eq(st, ML_E_NOMEM);
    }
    TU_CHECK_ERR("cols", ml_quant_sizes(ML_TYPE_Q4_0, 0, 1, 33, &qb, &sb, &e), e, ML_E_INVAL, "",
                 -1);
    TU_CHECK_ERR("type", ml_quant_sizes(ML_TYPE_U8, 0, 1, 32, &qb, &sb, &e), e, ML_E_INVAL, "",
                 -1);
    ck_assert_int_eq(ml_quant_sizes(ML_TYPE_Q8_0, 0, 3, 64, NULL, NULL, NULL), ML_OK);
}
END_TEST

/* ======================================================================
 * Properties over random blocks
 * ====================================================================== */

static float ulp(float v)
{
    return nextafterf(fabsf(v), INFINITY) - fabsf(v);
}

START_TEST(test_q8_bounds)
{
    tu_rng r = {51};
    float x[QK], y[QK], d;
    int8_t q[QK];
    uint16_t h;
    for (int it = 0; it < 40000; it++) {
        float scale = ldexpf(1.0f, (int)tu_below(&r, 200) - 100);
        for (int j = 0; j < QK; j++)
            x[j] = rnd(&r) * scale;
        float amax = 0;
        for (int j = 0; j < QK; j++)
            amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        ml_quantize_row_q8_0(x, QK, q, &d);
        ml_dequantize_row_q8_0(q, &d, QK, y);
        for (int j = 0; j < QK; j++) {
            TU_REQUIRE(q[j] != -128, "q = -128");
            if (amax < 1e-30f) {
                TU_REQUIRE(q[j] == 0 && d == 0.0f, "zero block");
                continue;
            }
            /* |x - q d| <= d / 2 plus the rounding of 127 / amax, x * it and
             * the + 0.5, and of q * d: a few ulps of amax. */
            float bound = d / 2 + 4 * ulp(amax);
            TU_REQUIRE(fabsf(x[j] - y[j]) <= bound, "it %d: |%a - %a| > %a", it, (double)x[j],
                       (double)y[j], (double)bound);
        }
        if (ml_quantize_row_q8_0_f16(x, QK, q, &h, NULL) != ML_OK) {
            TU_REQUIRE(amax / 127 >= 65520.0f, "refused amax %a", (double)amax);
            continue;
        }
        float dh = ml_f16_to_f32(h);
        for (int j = 0; j < QK; j++) {
            TU_REQUIRE(q[j] != -128, "q = -128");
            /* With a normal f16 d (relative rounding 2^-11) the clamp at 127
             * costs at most amax 2^-11 < d/2: the bound holds against the
             * rounded d.  A subnormal d can be off by far more. */
            if (dh >= 0x1p-14f) {
                float e = fabsf(x[j] - (float)q[j] * dh);
                TU_REQUIRE(e <= dh / 2 + 4 * ulp(amax), "f16 it %d: error %a, d %a", it,
                           (double)e, (double)dh);
            }
        }
    }
}
END_TEST

/* The x^2-weighted error of a Q4_0 block, in double. */
static double q4_err(const float *x, const uint8_t *qs, float d)
{
    float y[QK];
    ml_dequantize_row_q4_0(qs, &d, QK, y);
    double e = 0;
    for (int j = 0; j < QK; j++) {
        double t = (double)x[j] - y[j];
        e += (double)x[j] * x[j] * t * t;
    }
    return e;
}

START_TEST(test_q4_properties)
{
    tu_rng r = {61};
    float x[QK], d_fit, d_round, y[QK];
    uint8_t q_fit[16], q_round[16];
    double sum_fit = 0, sum_round = 0;
    int worse = 0;
    for (int it = 0; it < 20000; it++) {
        float scale = it % 3 ? 0.05f : ldexpf(1.0f, (int)tu_below(&r, 80) - 40);
        for (int j = 0; j < QK; j++)
            x[j] = rnd(&r) * scale;
        if (it % 7 == 0)
            x[tu_below(&r, QK)] *= 10.0f;
        ml_quantize_row_q4_0_fit(x, QK, NULL, q_fit, &d_fit);
        ml_quantize_row_q4_0_round(x, QK, q_round, &d_round);
        double ef = q4_err(x, q_fit, d_fit), er = q4_err(x, q_round, d_round);
        /* The fit's L = -8 candidate has the round rule's levels (up to
         * ties and a last-bit difference of x / d against x * (1/d)) and the
         * least-squares d for them, so the fit is never worse, up to float
         * rounding of the errors. */
        TU_REQUIRE(ef <= er * (1 + 1e-4) + 1e-300, "it %d: fit %g > round %g", it, ef, er);
        worse += ef > er;
        sum_fit += ef / (er > 0 ? er : 1);
        sum_round += 1;

        /* The round rule: |x - (n - 8) d| <= |d| / 2 except where the cap at
         * 15 acts (x / d in [7.5, 8]), where it is at most |d|. */
        ml_dequantize_row_q4_0(q_round, &d_round, QK, y);
        float amax = 0;
        for (int j = 0; j < QK; j++)
            amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        for (int j = 0; j < QK; j++) {
            float e = fabsf(x[j] - y[j]), ad = fabsf(d_round);
            int capped = (q_round[j % 16] >> (j < 16 ? 0 : 4) & 15) == 15 && x[j] / d_round > 7.4f;
            TU_REQUIRE(e <= (capped ? ad : ad / 2) + 4 * ulp(amax), "it %d: round error %a, d %a",
                       it, (double)e, (double)d_round);
        }

        /* The fit is the first best of its candidates. */
        if (it % 4 == 0 && scale >= 1e-6f && scale <= 1e4f) {
            float w[QK], wy[QK], lv[QK], err, best_err = 0, best_d = 0, best_lv[QK];
            float xm = 0, am = 0;
            for (int j = 0; j < QK; j++) {
                w[j] = x[j] * x[j];
                wy[j] = w[j] * x[j];
                if (fabsf(x[j]) > am)
                    am = fabsf(x[j]), xm = x[j];
            }
            if (am < 1e-6f || am > 1e6f)
                continue;
            for (int k = 0; k < ML__Q4_CANDIDATES; k++) {
                float dk = ml__q4_candidate(x, w, wy, xm, k, lv, &err);
                if (k == 0 || err < best_err) {
                    best_err = err;
                    best_d = dk;
                    memcpy(best_lv, lv, sizeof lv);
                }
            }
            TU_REQUIRE(fbits(best_d) == fbits(d_fit), "it %d: d %a, best candidate %a", it,
                       (double)d_fit, (double)best_d);
            for (int j = 0; j < 16; j++)
                TU_REQUIRE(q_fit[j] == ((int)(best_lv[j] + 8) | (int)(best_lv[j + 16] + 8) << 4),
                           "it %d: nibbles", it);
        }
    }
    /* ... and clearly better on average (about 0.7 of the round rule's
     * error on Gaussian-like blocks). */
    ck_assert_msg(sum_fit / sum_round < 0.85, "mean error ratio %g", sum_fit / sum_round);
    ck_assert_msg(worse < 20, "%d blocks worse", worse);
}
END_TEST

Suite *suite_quant_matrix(void)
{
    Suite *s = suite_create("quant_matrix");
    TCase *tc = tcase_create("matrix");
    tcase_add_test(tc, test_matrix_equals_rows);
    tcase_add_test(tc, test_matrix_threads);
    tcase_add_test(tc, test_matrix_nonfinite);
    tcase_add_test(tc, test_matrix_f16_overflow);
    tcase_add_test(tc, test_matrix_bad_options);
    tcase_add_test(tc, test_sizes_overflow);
    suite_add_tcase(s, tc);
    tc = tcase_create("properties");
    tcase_add_test(tc, test_q8_bounds);
    tcase_add_test(tc, test_q4_properties);
    suite_add_tcase(s, tc);
    return s;
}
