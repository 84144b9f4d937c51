/* check_kernels.c - the compute kernels (lib/kernels): every variant this
 * CPU runs against the scalar reference, compared with memcmp on the bits
 * (quants, scales, float results), never with a tolerance; the scalar
 * reference itself against an independent reading of the spec (the Q8_0
 * recipe written out here, rule 3's accumulation order on values where any
 * other order gives another answer, and a double-precision dot product);
 * and the ML_KERNELS selection, which also chooses the float math. */
#include "suites.h"
#include "testutil.h"

#include "kernels/fmath.h"
#include "kernels/kernels.h"
#include "mlcore/kernels.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_VARIANTS 8

static const ml_kernels *variants[MAX_VARIANTS];
static size_t n_variants;

static void load_variants(void)
{
    n_variants = ml__kernels_available(variants, MAX_VARIANTS);
    ck_assert_uint_ge(n_variants, 1);
    ck_assert_ptr_eq(variants[0], &ml__kernels_scalar);
}

/* ---- data ---- */

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

static double uniform01(tu_rng *r)
{
    return (double)(tu_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

static float normal(tu_rng *r)
{
    double u = uniform01(r), v = uniform01(r);
    return (float)(sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v));
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* ======================================================================
 * Quantization
 * ====================================================================== */

/* The spec's recipe, written out from mlb(5) and mlcore/quant.h without
 * looking at lib/quant/quant.c: NaN is ignored by the maximum and gives q = 0. */
static void spec_quantize(const float *x, size_t n, size_t per, int8_t *q, float *d)
{
    for (size_t b = 0; b < n / per; b++) {
        const float *xb = x + per * b;
        float amax = 0.0f;
        for (size_t i = 0; i < per; i++)
            if (fabsf(xb[i]) > amax)
                amax = fabsf(xb[i]);
        if (amax < 1e-30f) {
            d[b] = 0.0f;
            memset(q + per * b, 0, per);
            continue;
        }
        d[b] = amax / 127.0f;
        const float s = 127.0f / amax;
        for (size_t i = 0; i < per; i++) {
            float v = truncf(xb[i] * s + copysignf(0.5f, xb[i]));
            q[per * b + i] = isnan(v) ? 0 : v > 127.0f ? 127 : v < -127.0f ? -127 : (int8_t)v;
        }
    }
}

/* Quantizes x with the recipe above and with every variant, per 32
 * (quantize_q8_0) and, where n allows, per 256 (quantize_q8_k, and the
 * library's ml_quantize_row_q8_k); all must agree on every byte of q and
 * every bit of d. */
static void check_quantize(const float *x, size_t n, const char *what)
{
    int8_t *q0 = xmalloc(n), *q1 = xmalloc(n);
    float *d0 = xmalloc(n / 32 * sizeof(float)), *d1 = xmalloc(n / 32 * sizeof(float));
    for (size_t per = 32; per <= 256; per *= 8) {
        if (n % per)
            continue;
        spec_quantize(x, n, per, q0, d0);
        for (size_t v = 0; v <= n_variants; v++) {
            const char *name = v < n_variants ? variants[v]->name : "ml_quantize_row_q8_k";
            memset(q1, 0x55, n);
            memset(d1, 0x55, n / 32 * sizeof(float));
            if (v == n_variants && per == 32)
                continue;
            if (v == n_variants)
                ml_quantize_row_q8_k(x, n, q1, d1);
            else if (per == 32)
                variants[v]->quantize_q8_0(x, n, q1, d1);
            else
                variants[v]->quantize_q8_k(x, n, q1, d1);
            for (size_t b = 0; b < n / per; b++)
                TU_REQUIRE(fbits(d0[b]) == fbits(d1[b]), "%s, %s, per %zu: n %zu, d[%zu] %a, expected %a",
                           what, name, per, n, b, (double)d1[b], (double)d0[b]);
            for (size_t i = 0; i < n; i++)
                TU_REQUIRE(q0[i] == q1[i], "%s, %s, per %zu: n %zu, q[%zu] %d, expected %d (x %a, d %a)",
                           what, name, per, n, i, q1[i], q0[i], (double)x[i], (double)d0[i / per]);
        }
    }
    free(q0);
    free(q1);
    free(d0);
    free(d1);
}

/* Lengths: 32..4096 and odd block counts. */
static const size_t qlens[] = {32, 64, 96, 224, 256, 288, 544, 1024, 4096};
#define N_QLENS (sizeof qlens / sizeof qlens[0])

START_TEST(quantize_random)
{
    load_variants();
    tu_rng r = {11};
    float *x = xmalloc(4096 * sizeof(float));
    static const float scales[] = {1.0f, 1e-3f, 1e3f, 1e-20f, 1e20f};
    for (size_t l = 0; l < N_QLENS; l++)
        for (size_t s = 0; s < sizeof scales / sizeof scales[0]; s++)
            for (int rep = 0; rep < 4; rep++) {
                for (size_t i = 0; i < qlens[l]; i++)
                    x[i] = rep & 1 ? normal(&r) * scales[s]
                                   : (float)(uniform01(&r) * 2 - 1) * scales[s];
                check_quantize(x, qlens[l], rep & 1 ? "normal" : "uniform");
            }
    free(x);
}
END_TEST

/* Fills 32 values around a maximum magnitude `amax` at position `at`. */
static void block_with_max(float *x, float amax, int at, tu_rng *r)
{
    for (int i = 0; i < 32; i++)
        x[i] = (float)(uniform01(r) * 2 - 1) * amax;
    x[at] = at & 1 ? -amax : amax;
}

START_TEST(quantize_edges)
{
    load_variants();
    tu_rng r = {12};
    float x[288];
    /* All zeros, and -0.0. */
    memset(x, 0, sizeof x);
    check_quantize(x, 288, "zeros");
    for (int i = 0; i < 288; i++)
        x[i] = i % 3 ? -0.0f : 0.0f;
    check_quantize(x, 288, "signed zeros");
    for (int i = 0; i < 288; i++)
        x[i] = i % 5 == 0 ? -0.0f : normal(&r);
    check_quantize(x, 288, "-0.0 among values");
    /* amax just below, at and just above 1e-30 (below: all zero). */
    const float lims[] = {nextafterf(1e-30f, 0.0f), 1e-30f, nextafterf(1e-30f, 1.0f)};
    for (int k = 0; k < 3; k++) {
        for (int b = 0; b < 9; b++)
            block_with_max(x + 32 * b, lims[k], (b * 7) % 32, &r);
        check_quantize(x, 288, "amax near 1e-30");
    }
    /* Subnormals: a whole block of them (zero), and among normal values. */
    for (int i = 0; i < 288; i++)
        x[i] = from_bits(1u + (uint32_t)tu_below(&r, 0x7fffff)) * (i & 1 ? -1.0f : 1.0f);
    check_quantize(x, 288, "subnormal block");
    for (int i = 0; i < 288; i++)
        x[i] = i % 4 ? from_bits(1u + (uint32_t)tu_below(&r, 0x7fffff)) : 1e-30f * (i % 8 ? 1 : -1);
    check_quantize(x, 288, "subnormals with amax 1e-30");
    /* Huge values: FLT_MAX / 127 and FLT_MAX itself. */
    for (int b = 0; b < 9; b++)
        block_with_max(x + 32 * b, b & 1 ? FLT_MAX : FLT_MAX / 127.0f, b, &r);
    check_quantize(x, 288, "huge");
    /* The clamp: elements equal to +-amax give +-127. */
    for (int i = 0; i < 288; i++)
        x[i] = (i & 1 ? -1.0f : 1.0f) * (i % 3 ? 3.5f : 3.25f);
    check_quantize(x, 288, "clamp");
    /* NaN and infinity are defined by the reference: NaN is skipped and
     * quantizes to 0; an infinity makes d infinite and every q 0. */
    for (int i = 0; i < 288; i++)
        x[i] = i % 7 == 0 ? NAN : i % 11 == 0 ? -NAN : normal(&r);
    check_quantize(x, 288, "NaN");
    for (int i = 0; i < 288; i++)
        x[i] = i % 37 == 0 ? (i & 1 ? -INFINITY : INFINITY) : normal(&r);
    check_quantize(x, 288, "infinity");
}
END_TEST

/* Values whose scaled magnitude is exactly k + 0.5: the spec's rounding
 * goes away from zero (trunc(v + 0.5)), where round-to-nearest-even would
 * not, so a SIMD rounding shortcut shows here. */
START_TEST(quantize_ties)
{
    load_variants();
    float x[256];
    /* amax 127: the scale 127/amax is exactly 1. */
    for (int i = 0; i < 256; i++) {
        int k = i % 127;
        x[i] = (i & 1 ? -1.0f : 1.0f) * ((float)k + 0.5f);
    }
    for (int b = 0; b < 8; b++)
        x[32 * b + 5] = b & 1 ? -127.0f : 127.0f;
    check_quantize(x, 256, "ties, scale 1");
    /* amax 254: the scale is 0.5 and odd integers land on k + 0.5. */
    for (int i = 0; i < 256; i++)
        x[i] = (i & 2 ? -1.0f : 1.0f) * (float)(2 * (i % 127) + 1);
    for (int b = 0; b < 8; b++)
        x[32 * b + 30] = 254.0f;
    check_quantize(x, 256, "ties, scale 0.5");
    int8_t q[256];
    float d[8];
    ml__kernels_scalar.quantize_q8_0(x, 256, q, d);
    /* x = 1 scales to 0.5, which rounds away from zero to 1; 3 gives 2. */
    ck_assert_int_eq(q[0], 1);
    ck_assert_int_eq(q[1], 2);
    ck_assert_int_eq(q[2], -3);
    ck_assert_float_eq(d[0], 2.0f);
}
END_TEST

/* ======================================================================
 * Dot products
 * ====================================================================== */

typedef struct mat {
    int q4;          /* Q4_0, else Q8_0 */
    size_t rows, cols;
    void *wq;        /* rows*cols int8, or rows*cols/2 nibble bytes */
    float *wd;       /* rows*cols/32 */
    uint16_t *wd16;  /* the same scales as f16 bits (wd their widening), or NULL */
} mat;

static size_t mat_row_bytes(const mat *m)
{
    return m->q4 ? m->cols / 2 : m->cols;
}

/* Scales of every kind: normal, zero, negative, tiny, huge. */
static float random_scale(tu_rng *r)
{
    switch (tu_below(r, 10)) {
    case 0: return 0.0f;
    case 1: return -normal(r) * 1e-3f;
    case 2: return 1e-25f * (float)uniform01(r);
    case 3: return 1e15f * normal(r);
    default: return normal(r) * 0.01f;
    }
}

/* Any finite f16: zeros, subnormals, negatives, up to 65504. */
static uint16_t random_f16(tu_rng *r)
{
    uint16_t h;
    do
        h = (uint16_t)tu_below(r, 65536);
    while ((h & 0x7c00) == 0x7c00);
    return h;
}

/* `extreme`: quants at the ends of their ranges, to catch an overflow of
 * a 16-bit intermediate.  Every other matrix has f16 scales too, so the
 * kernels' f16 path is checked against the f32 one on the same values. */
static void mat_new(mat *m, int q4, size_t rows, size_t cols, tu_rng *r, int extreme)
{
    m->q4 = q4;
    m->rows = rows;
    m->cols = cols;
    m->wq = xmalloc(rows * mat_row_bytes(m));
    m->wd = xmalloc(rows * cols / 32 * sizeof(float));
    uint8_t *p = m->wq;
    for (size_t i = 0; i < rows * mat_row_bytes(m); i++) {
        if (q4)
            p[i] = extreme ? (uint8_t)(tu_below(r, 2) ? 0xff : 0x00) : (uint8_t)tu_below(r, 256);
        else
            p[i] = (uint8_t)(int8_t)(extreme ? (tu_below(r, 2) ? 127 : -127)
                                             : (int)tu_below(r, 255) - 127);
    }
    m->wd16 = tu_below(r, 2) ? xmalloc(rows * cols / 32 * sizeof(uint16_t)) : NULL;
    for (size_t i = 0; i < rows * cols / 32; i++) {
        if (m->wd16)
            m->wd16[i] = random_f16(r);
        m->wd[i] = m->wd16 ? ml_f16_to_f32(m->wd16[i]) : random_scale(r);
    }
}

/* For tests that set their own f32 scales. */
static void mat_drop_f16(mat *m)
{
    free(m->wd16);
    m->wd16 = NULL;
}

static void mat_free(mat *m)
{
    free(m->wq);
    free(m->wd);
    free(m->wd16);
}

static ml_wscales f32_scales(const float *d)
{
    return (ml_wscales){d, 0};
}

/* The matrix's scales as f32, or as f16 with `f16` (wd16 must exist). */
static ml_wscales mat_scales(const mat *m, int f16)
{
    return f16 ? (ml_wscales){m->wd16, 1} : f32_scales(m->wd);
}

typedef struct acts {
    size_t n_tok, cols;
    int8_t *q;   /* n_tok * cols */
    float *d;    /* n_tok * cols / 32 */
} acts;

/* Activations as the quantizer makes them: quants in [-127, 127]. */
static void acts_new(acts *a, size_t n_tok, size_t cols, tu_rng *r, int extreme)
{
    a->n_tok = n_tok;
    a->cols = cols;
    a->q = xmalloc(n_tok * cols);
    a->d = xmalloc(n_tok * cols / 32 * sizeof(float));
    for (size_t i = 0; i < n_tok * cols; i++)
        a->q[i] = (int8_t)(extreme ? (tu_below(r, 2) ? 127 : -127) : (int)tu_below(r, 255) - 127);
    for (size_t i = 0; i < n_tok * cols / 32; i++)
        a->d[i] = random_scale(r);
}

static void acts_free(acts *a)
{
    free(a->q);
    free(a->d);
}

#define SENTINEL 0x7fa5a5a5u /* a signalling NaN no kernel computes */

static float *sentinel_buf(size_t n)
{
    float *y = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        y[i] = from_bits(SENTINEL);
    return y;
}

static void matvec(const ml_kernels *k, const mat *m, int f16, size_t r0, size_t r1,
                   const int8_t *xq, const float *xd, float *y)
{
    if (m->q4)
        k->matvec_q4_0(m->wq, mat_scales(m, f16), m->cols, r0, r1, xq, xd, y);
    else
        k->matvec_q8_0(m->wq, mat_scales(m, f16), m->cols, r0, r1, xq, xd, y);
}

static void matmul(const ml_kernels *k, const mat *m, int f16, size_t r0, size_t r1,
                   const acts *a, float *y, size_t ldy)
{
    if (m->q4)
        k->matmul_q4_0(m->wq, mat_scales(m, f16), m->cols, r0, r1, a->q, a->d, a->n_tok, y, ldy);
    else
        k->matmul_q8_0(m->wq, mat_scales(m, f16), m->cols, r0, r1, a->q, a->d, a->n_tok, y, ldy);
}

/* got[i] must equal want[i] bit for bit inside [r0, r1) and still hold
 * the sentinel outside. */
static void require_rows(const float *got, const float *want, size_t n, size_t r0, size_t r1,
                         const char *what, const char *variant, const mat *m, int f16, size_t t)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t g = fbits(got[i]), w = i >= r0 && i < r1 ? fbits(want[i]) : SENTINEL;
        TU_REQUIRE(g == w, "%s, %s, %s %zux%zu %s scales rows %zu-%zu token %zu: y[%zu] = %a "
                           "(0x%08x), expected %a (0x%08x)",
                   what, variant, m->q4 ? "Q4_0" : "Q8_0", m->rows, m->cols, f16 ? "f16" : "f32",
                   r0, r1, t, i, (double)got[i], g, (double)from_bits(w), w);
    }
}

/* matvec of every variant, with each scale encoding the matrix has,
 * against the scalar one with f32 scales, rows [r0, r1). */
static void check_matvec(const mat *m, const acts *a, size_t r0, size_t r1)
{
    float *want = sentinel_buf(m->rows), *got = sentinel_buf(m->rows);
    matvec(&ml__kernels_scalar, m, 0, r0, r1, a->q, a->d, want);
    for (size_t v = 0; v < n_variants; v++)
        for (int f16 = 0; f16 <= (m->wd16 != NULL); f16++) {
            for (size_t i = 0; i < m->rows; i++)
                got[i] = from_bits(SENTINEL);
            matvec(variants[v], m, f16, r0, r1, a->q, a->d, got);
            require_rows(got, want, m->rows, r0, r1, "matvec", variants[v]->name, m, f16, 0);
        }
    free(want);
    free(got);
}

/* A variant's matmul in two steps (matmul_x), its input rearranged in 1,
 * 2 and 3 shares written last to first over a buffer of 0xa5 bytes (a
 * share left out or written twice wrong shows), against the scalar
 * matmul's want.  Nothing where the variant has no such step or n_tok
 * does not take it (then its bytes must say 0, which it may only
 * where it has the step). */
static void check_matmul_x(const ml_kernels *k, const mat *m, int f16, size_t r0, size_t r1,
                           const acts *a, const float *want, float *got, size_t ldy)
{
    const ml_matmul_x *mx = &k->matmul_x[m->q4];
    const size_t bytes = mx->bytes ? mx->bytes(m->q4, m->cols, a->n_tok) : 0;
    TU_REQUIRE(!mx->bytes == !mx->prepare && !mx->run == !mx->prepare,
               "%s: matmul_x's three entries go together", k->name);
    if (bytes == 0)
        return;
    void *xt = aligned_alloc(64, (bytes + 63) / 64 * 64);
    TU_REQUIRE(xt != NULL, "no memory for %zu bytes", bytes);
    for (unsigned parts = 1; parts <= 3; parts++) {
        memset(xt, 0xa5, bytes);
        for (unsigned p = parts; p-- > 0;)
            mx->prepare(m->q4, a->q, m->cols, a->n_tok, p, parts, xt);
        for (size_t i = 0; i < a->n_tok * ldy; i++)
            got[i] = from_bits(SENTINEL);
        mx->run(m->q4, m->wq, mat_scales(m, f16), m->cols, r0, r1, a->q, xt, a->d, a->n_tok, got,
                ldy);
        for (size_t t = 0; t < a->n_tok; t++)
            require_rows(got + t * ldy, want + t * ldy, ldy, r0, r1,
                         parts == 1 ? "matmul_x, 1 share" : parts == 2 ? "matmul_x, 2 shares"
                                                                       : "matmul_x, 3 shares",
                         k->name, m, f16, t);
    }
    free(xt);
}

/* matmul of every variant (each scale encoding) against the scalar matmul
 * with f32 scales, and every (t, r) against the variant's own matvec; y
 * has ldy > rows.  And the variant's two-step matmul (check_matmul_x). */
static void check_matmul(const mat *m, const acts *a, size_t r0, size_t r1)
{
    const size_t ldy = m->rows + 3, ny = a->n_tok * ldy;
    float *want = sentinel_buf(ny), *got = sentinel_buf(ny), *vec = sentinel_buf(m->rows);
    matmul(&ml__kernels_scalar, m, 0, r0, r1, a, want, ldy);
    for (size_t v = 0; v < n_variants; v++)
        for (int f16 = 0; f16 <= (m->wd16 != NULL); f16++) {
            for (size_t i = 0; i < ny; i++)
                got[i] = from_bits(SENTINEL);
            matmul(variants[v], m, f16, r0, r1, a, got, ldy);
            for (size_t t = 0; t < a->n_tok; t++) {
                require_rows(got + t * ldy, want + t * ldy, ldy, r0, r1, "matmul vs scalar",
                             variants[v]->name, m, f16, t);
                matvec(variants[v], m, f16, r0, r1, a->q + t * m->cols, a->d + t * m->cols / 32,
                       vec);
                require_rows(got + t * ldy, vec, m->rows, r0, r1, "matmul vs matvec",
                             variants[v]->name, m, f16, t);
            }
            check_matmul_x(variants[v], m, f16, r0, r1, a, want, got, ldy);
        }
    free(want);
    free(got);
    free(vec);
}

/* Columns: 1, 2, 3, 5, 6, 7, 8, 9, 17, 20 (Gemma 3's 640), 35 and 128
 * blocks: every partial group of 8 blocks (the x86 kernels gather a
 * partial group's scales lane by lane). */
static const size_t dcols[] = {32, 64, 96, 160, 192, 224, 256, 288, 544, 640, 1120, 4096};
#define N_DCOLS (sizeof dcols / sizeof dcols[0])
/* Row ranges [r0, r1) of a matrix of r1 + 2 rows; some longer than one
 * or two panels of the blocked matmul (16 or 48 rows), with partial row
 * tiles at the ends; and an empty one, which must write nothing. */
static const size_t dranges[][2] = {{4, 4}, {0, 1}, {3, 4}, {1, 6}, {5, 22}, {2, 43}, {5, 112}};
#define N_DRANGES (sizeof dranges / sizeof dranges[0])

static void dot_cases(int q4, int extreme, uint64_t seed)
{
    load_variants();
    tu_rng r = {seed};
    for (size_t c = 0; c < N_DCOLS; c++)
        for (size_t k = 0; k < N_DRANGES; k++) {
            const size_t r0 = dranges[k][0], r1 = dranges[k][1];
            mat m;
            acts a;
            mat_new(&m, q4, r1 + 2, dcols[c], &r, extreme);
            acts_new(&a, 1 + (c + k) % 9, dcols[c], &r, extreme);
            check_matvec(&m, &a, r0, r1);
            check_matmul(&m, &a, r0, r1);
            acts_free(&a);
            mat_free(&m);
        }
}

START_TEST(dot_q8_0)
{
    dot_cases(0, 0, 21);
}
END_TEST

START_TEST(dot_q4_0)
{
    dot_cases(1, 0, 22);
}
END_TEST

START_TEST(dot_extreme_quants)
{
    dot_cases(0, 1, 23);
    dot_cases(1, 1, 24);
}
END_TEST

/* Every token count 1..19 for both types (past the 8-token tiles of
 * token pairs, odd counts leaving half a pair), on 9, 17 and 20 blocks
 * (Gemma 3's 640 columns), and a few counts on TinyLlama's 2048 and 5632. */
static const size_t tcols[] = {288, 544, 640};
#define N_TCOLS (sizeof tcols / sizeof tcols[0])

START_TEST(matmul_token_counts)
{
    load_variants();
    tu_rng r = {25};
    for (int q4 = 0; q4 < 2; q4++)
        for (size_t c = 0; c < N_TCOLS; c++)
            for (size_t n_tok = 1; n_tok <= 19; n_tok++) {
                const size_t cols = tcols[c];
                mat m;
                acts a;
                mat_new(&m, q4, 40, cols, &r, 0);
                acts_new(&a, n_tok, cols, &r, 0);
                check_matmul(&m, &a, 3, 38);
                acts_free(&a);
                mat_free(&m);
            }
}
END_TEST

START_TEST(matmul_model_shapes)
{
    static const size_t counts[] = {4, 5, 9, 16, 23};
    load_variants();
    tu_rng r = {28};
    for (int q4 = 0; q4 < 2; q4++)
        for (size_t cols = 2048; cols <= 5632; cols += 3584)
            for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
                mat m;
                acts a;
                mat_new(&m, q4, 53, cols, &r, 0);
                acts_new(&a, counts[k], cols, &r, 0);
                check_matmul(&m, &a, 1, 52);
                acts_free(&a);
                mat_free(&m);
            }
}
END_TEST

/* Token counts of the AMX tiles (16 tokens a tile, from 32 tokens up):
 * whole tiles, a last partial one of 1 to 15 tokens, on 9, 20 and 64
 * blocks, row ranges of two panels of 16 and a partial one, and a whole
 * matrix; every variant is compared, so this also holds the AVX2 and
 * AVX-512 tiles to larger counts. */
START_TEST(matmul_tile_counts)
{
    static const size_t counts[] = {32, 33, 40, 47, 48, 64, 79};
    static const size_t cols[] = {288, 640, 2048};
    load_variants();
    tu_rng r = {29};
    for (int q4 = 0; q4 < 2; q4++)
        for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++)
            for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
                mat m;
                acts a;
                mat_new(&m, q4, 40, cols[c], &r, k == 4);
                acts_new(&a, counts[k], cols[c], &r, k == 4);
                check_matmul(&m, &a, 3, 38);
                if (k == 0)
                    check_matmul(&m, &a, 0, 40);
                acts_free(&a);
                mat_free(&m);
            }
}
END_TEST

/* More tokens than the AMX kernel takes at once (about 1 MiB of
 * activations: 176 tokens of 5632 columns), so the panels are
 * rearranged again for a second chunk that ends in a partial tile. */
START_TEST(matmul_token_chunks)
{
    load_variants();
    tu_rng r = {30};
    for (int q4 = 0; q4 < 2; q4++) {
        mat m;
        acts a;
        mat_new(&m, q4, 20, 5632, &r, 0);
        acts_new(&a, 200, 5632, &r, 0);
        check_matmul(&m, &a, 2, 19);
        acts_free(&a);
        mat_free(&m);
    }
}
END_TEST

/* Rows longer than the format's 65536-column limit still work (the SIMD
 * code keeps per-activation sums on the stack only up to that). */
START_TEST(dot_long_rows)
{
    load_variants();
    tu_rng r = {26};
    for (int q4 = 0; q4 < 2; q4++) {
        mat m;
        acts a;
        mat_new(&m, q4, 4, 65536 + 32 * 9, &r, 0);
        acts_new(&a, 5, 65536 + 32 * 9, &r, 0);
        check_matvec(&m, &a, 1, 4);
        check_matmul(&m, &a, 0, 3);
        acts_free(&a);
        /* the AMX tiles, one tile of 16 tokens a chunk at this length */
        acts_new(&a, 40, 65536 + 32 * 9, &r, 0);
        check_matmul(&m, &a, 0, 3);
        acts_free(&a);
        mat_free(&m);
    }
}
END_TEST

/* Activations made by the quantizer from real-looking floats. */
START_TEST(dot_quantized_activations)
{
    load_variants();
    tu_rng r = {27};
    const size_t cols = 2048, n_tok = 7;
    float *x = xmalloc(n_tok * cols * sizeof(float));
    for (size_t i = 0; i < n_tok * cols; i++)
        x[i] = normal(&r);
    acts a = {n_tok, cols, xmalloc(n_tok * cols), xmalloc(n_tok * cols / 32 * sizeof(float))};
    ml__kernels_scalar.quantize_q8_0(x, n_tok * cols, a.q, a.d);
    for (int q4 = 0; q4 < 2; q4++) {
        mat m;
        mat_new(&m, q4, 70, cols, &r, 0);
        mat_drop_f16(&m);
        for (size_t i = 0; i < 70 * cols / 32; i++)
            m.wd[i] = normal(&r) * 0.02f;
        check_matvec(&m, &a, 0, 70);
        check_matmul(&m, &a, 0, 70);
        mat_free(&m);
    }
    acts_free(&a);
    free(x);
}
END_TEST

/* ---- the scalar reference against the spec, independently ---- */

/* Element i of row r as an integer. */
static int weight(const mat *m, size_t r, size_t i)
{
    if (!m->q4)
        return ((const int8_t *)m->wq)[r * m->cols + i];
    const uint8_t *blk = (const uint8_t *)m->wq + r * m->cols / 2 + i / 32 * 16;
    const size_t j = i % 32;
    return (j < 16 ? blk[j] & 15 : blk[j - 16] >> 4) - 8;
}

/* The dot product in double: close to the reference, whatever the order. */
START_TEST(scalar_matches_double)
{
    tu_rng r = {31};
    for (int q4 = 0; q4 < 2; q4++)
        for (size_t c = 0; c < N_DCOLS; c++) {
            mat m;
            acts a;
            mat_new(&m, q4, 8, dcols[c], &r, 0);
            mat_drop_f16(&m);
            acts_new(&a, 1, dcols[c], &r, 0);
            for (size_t i = 0; i < 8 * dcols[c] / 32; i++)
                m.wd[i] = normal(&r) * 0.01f;
            for (size_t i = 0; i < dcols[c] / 32; i++)
                a.d[i] = normal(&r) * 0.01f;
            float y[8];
            matvec(&ml__kernels_scalar, &m, 0, 0, 8, a.q, a.d, y);
            for (size_t row = 0; row < 8; row++) {
                double sum = 0, mag = 0;
                for (size_t b = 0; b < dcols[c] / 32; b++) {
                    long is = 0;
                    for (size_t i = 32 * b; i < 32 * b + 32; i++)
                        is += (long)weight(&m, row, i) * a.q[i];
                    double term = (double)is * m.wd[row * dcols[c] / 32 + b] * a.d[b];
                    sum += term;
                    mag += fabs(term);
                }
                ck_assert_msg(fabs(y[row] - sum) <= 1e-5 * mag + 1e-30,
                              "%s cols %zu row %zu: %.9g, double %.9g (magnitude %g)",
                              q4 ? "Q4_0" : "Q8_0", dcols[c], row, (double)y[row], sum, mag);
            }
            acts_free(&a);
            mat_free(&m);
        }
}
END_TEST

/* Rule 3 exactly: blocks whose products are 2^24, 1, -2^24 and so on, where
 * any other order of the float additions gives another result.  Checked
 * for every variant, both types. */
static float rule3_case(const ml_kernels *k, int q4, const float *s, size_t nb)
{
    /* Block b: one product of 1 (weight 1, activation 1), scaled by s[b]. */
    const size_t cols = 32 * nb;
    int8_t *wq8 = calloc(cols, 1), *xq = calloc(cols, 1);
    uint8_t *wq4 = xmalloc(cols / 2);
    float *wd = xmalloc(nb * sizeof(float)), *xd = xmalloc(nb * sizeof(float));
    memset(wq4, 0x88, cols / 2); /* every nibble 8: weight 0 */
    for (size_t b = 0; b < nb; b++) {
        wq8[32 * b + 3] = 1;
        wq4[16 * b + 3] = 0x89; /* element 3 low nibble 9: weight 1 */
        xq[32 * b + 3] = 1;
        wd[b] = s[b];
        xd[b] = 1.0f;
    }
    float y = 0;
    if (q4)
        k->matvec_q4_0(wq4, f32_scales(wd), cols, 0, 1, xq, xd, &y);
    else
        k->matvec_q8_0(wq8, f32_scales(wd), cols, 0, 1, xq, xd, &y);
    free(wq8);
    free(xq);
    free(wq4);
    free(wd);
    free(xd);
    return y;
}

START_TEST(rule3_order)
{
    load_variants();
    const float big = 16777216.0f; /* 2^24: big + 1 rounds back to big */
    /* acc0 gets blocks 0 and 8: 2^24 - 2^24 = 0, acc1 = 1: result 1.  In
     * block order the 1 would be lost: (2^24 + 1) - 2^24 = 0. */
    const float s1[9] = {big, 1, 0, 0, 0, 0, 0, 0, -big};
    /* The fold: ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)) with
     * a0 = 2^24, a4 = 1, a2 = 1, a1 = -2^24: (2^24 + 1) + 1 = 2^24, and
     * 2^24 - 2^24 = 0.  Lane order a0 + a1 + ... would give 2. */
    const float s2[8] = {big, -big, 1, 0, 1, 0, 0, 0};
    /* 17 blocks: acc0 = 2^24 + 1 + 1 (blocks 0, 8, 16) = 2^24 (each 1
     * is lost), acc1 = -2^24: result 0.  Adding the ones first gives 2. */
    float s3[17] = {big, -big};
    s3[8] = 1;
    s3[16] = 1;
    for (size_t v = 0; v < n_variants; v++)
        for (int q4 = 0; q4 < 2; q4++) {
            ck_assert_msg(rule3_case(variants[v], q4, s1, 9) == 1.0f, "%s s1", variants[v]->name);
            ck_assert_msg(rule3_case(variants[v], q4, s2, 8) == 0.0f, "%s s2", variants[v]->name);
            ck_assert_msg(rule3_case(variants[v], q4, s3, 17) == 0.0f, "%s s3", variants[v]->name);
        }
}
END_TEST

/* Hand-computed blocks: the Q4_0 nibble order and the -8 offset. */
START_TEST(known_values)
{
    load_variants();
    int8_t x[32];
    uint8_t w4[16];
    int8_t w8[32];
    for (int j = 0; j < 16; j++) {
        x[j] = 1;
        x[j + 16] = 2;
        w4[j] = 0x0f;        /* element j: 15 - 8 = 7; element j + 16: 0 - 8 = -8 */
        w8[j] = -127;
        w8[j + 16] = 127;
    }
    const float wd = 0.5f, xd = 0.25f;
    for (size_t v = 0; v < n_variants; v++) {
        float y = 0;
        variants[v]->matvec_q4_0(w4, f32_scales(&wd), 32, 0, 1, x, &xd, &y);
        /* 16 * 7 * 1 + 16 * -8 * 2 = -144, times 0.125 */
        ck_assert_msg(y == -18.0f, "%s Q4_0: %g", variants[v]->name, (double)y);
        variants[v]->matvec_q8_0(w8, f32_scales(&wd), 32, 0, 1, x, &xd, &y);
        /* 16 * -127 + 16 * 127 * 2 = 2032, times 0.125 */
        ck_assert_msg(y == 254.0f, "%s Q8_0: %g", variants[v]->name, (double)y);
    }
}
END_TEST

/* The largest block sums there are, through matvec and the blocked
 * matmul (5 tokens, and 40: the AMX tiles), on 9 blocks: Q8_0 127 * +-127
 * (516128 a block) and Q4_0 nibble 15 (weight 7) * +-127, where the SIMD
 * code's 16-bit intermediates are fullest. */
START_TEST(extreme_sums)
{
    load_variants();
    const size_t nb = 9, cols = 32 * nb, max_tok = 40;
    int8_t *w8 = xmalloc(cols), *xq = xmalloc(max_tok * cols);
    uint8_t *w4 = xmalloc(cols / 2);
    float wd[9], xd[40 * 9];
    memset(w8, 127, cols);
    memset(w4, 0xff, cols / 2);
    for (size_t b = 0; b < nb; b++)
        wd[b] = 1.0f;
    for (size_t t = 0; t < max_tok; t++)
        for (size_t i = 0; i < cols; i++) {
            xq[t * cols + i] = (int8_t)(t % 2 ? -127 : 127);
            xd[t * nb + i / 32] = 1.0f;
        }
    const float want8 = 9.0f * 516128.0f, want4 = 9.0f * 32 * 7 * 127;
    for (size_t v = 0; v < 2 * n_variants; v++) {
        const size_t n_tok = v % 2 ? max_tok : 5;
        float y[40];
        variants[v / 2]->matmul_q8_0(w8, f32_scales(wd), cols, 0, 1, xq, xd, n_tok, y, 1);
        for (size_t t = 0; t < n_tok; t++)
            ck_assert_msg(y[t] == (t % 2 ? -want8 : want8), "%s Q8_0 token %zu: %.9g",
                          variants[v / 2]->name, t, (double)y[t]);
        variants[v / 2]->matmul_q4_0(w4, f32_scales(wd), cols, 0, 1, xq, xd, n_tok, y, 1);
        for (size_t t = 0; t < n_tok; t++)
            ck_assert_msg(y[t] == (t % 2 ? -want4 : want4), "%s Q4_0 token %zu: %.9g",
                          variants[v / 2]->name, t, (double)y[t]);
        variants[v / 2]->matvec_q8_0(w8, f32_scales(wd), cols, 0, 1, xq + cols, xd, y);
        ck_assert_msg(y[0] == -want8, "%s Q8_0 matvec: %.9g", variants[v / 2]->name, (double)y[0]);
        variants[v / 2]->matvec_q4_0(w4, f32_scales(wd), cols, 0, 1, xq, xd, y);
        ck_assert_msg(y[0] == want4, "%s Q4_0 matvec: %.9g", variants[v / 2]->name, (double)y[0]);
    }
    free(w8);
    free(w4);
    free(xq);
}
END_TEST

/* ======================================================================
 * Selection
 * ====================================================================== */

/* Runs with ML_KERNELS set to value (NULL: unset), restoring it after. */
typedef struct env_saved {
    char *value;
} env_saved;

static env_saved env_set(const char *value)
{
    const char *old = getenv("ML_KERNELS");
    env_saved s = {old ? strdup(old) : NULL};
    if (value)
        setenv("ML_KERNELS", value, 1);
    else
        unsetenv("ML_KERNELS");
    return s;
}

static void env_restore(env_saved s)
{
    if (s.value)
        setenv("ML_KERNELS", s.value, 1);
    else
        unsetenv("ML_KERNELS");
    free(s.value);
}

START_TEST(select_by_env)
{
    load_variants();
    const char *why = NULL;
    /* Unset, empty and "auto": the chooser's table, named after the best
     * variant the CPU runs, the last; that variant's own table where it
     * won every kernel (select_per_kernel checks the kernels). */
    static const char *const autos[] = {NULL, "", "auto"};
    for (int i = 0; i < 3; i++) {
        env_saved s = env_set(autos[i]);
        const ml_kernels *k = ml__kernels_select(&why), *best = variants[n_variants - 1];
        int all_best = 1;
        for (int slot = 0; slot < ML_KS_COUNT; slot++)
            all_best &= ml__kernels_same((ml_kslot)slot, k, best);
        if (all_best)
            ck_assert_ptr_eq(k, best);
        ck_assert_str_eq(ml_kernels_name(), variants[n_variants - 1]->name);
        env_restore(s);
    }
    /* Every available variant by its table name. */
    for (size_t v = 0; v < n_variants; v++) {
        env_saved s = env_set(variants[v]->name);
        ck_assert_ptr_eq(ml__kernels_select(&why), variants[v]);
        ck_assert_str_eq(ml_kernels_name(), variants[v]->name);
        env_restore(s);
    }
    env_saved s = env_set("scalar");
    ck_assert_ptr_eq(ml__kernels_select(&why), &ml__kernels_scalar);
    env_restore(s);
    /* "avx512" and "avx512lanes" are the short names of the avx512vnni
     * and avx512vnni-lanes tables. */
    for (size_t v = 0; v < n_variants; v++) {
        const char *shorter = strcmp(variants[v]->name, "avx512vnni") == 0 ? "avx512"
                              : strcmp(variants[v]->name, "avx512vnni-lanes") == 0 ? "avx512lanes"
                                                                                  : NULL;
        if (!shorter)
            continue;
        s = env_set(shorter);
        ck_assert_ptr_eq(ml__kernels_select(&why), variants[v]);
        env_restore(s);
    }
}
END_TEST

START_TEST(select_unknown)
{
    static const char *const bad[] = {"sse", "AVX2", "avx2 ", "fast", "scalar,avx2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *why = NULL;
        env_saved s = env_set(bad[i]);
        ck_assert_ptr_null(ml__kernels_select(&why));
        ck_assert_ptr_nonnull(why);
        ck_assert_msg(strstr(why, "unknown") != NULL, "%s: %s", bad[i], why);
        ck_assert_str_eq(ml__kernels_refused_var(why), "ML_KERNELS");
        ck_assert_ptr_null(ml__kernels_select(NULL)); /* why may be NULL */
        ck_assert_str_eq(ml_kernels_name(), "none");
        env_restore(s);
    }
}
END_TEST

/* ML_PREFETCH: the profile is fixed at the first selection (the CPU's,
 * or the one named then), and reported; a name outside near, far, far-k
 * and auto refuses the kernels as an unknown ML_KERNELS does.  Every
 * profile asks for the L1 after the L2. */
START_TEST(select_prefetch)
{
    const char *why = NULL;
    ck_assert_ptr_nonnull(ml__kernels_select(&why));
    ck_assert(strcmp(ml__prefetch.name, "near") == 0 || strcmp(ml__prefetch.name, "far") == 0 ||
              strcmp(ml__prefetch.name, "far-k") == 0);
    ck_assert_str_eq(ml_kernels_prefetch_name(), ml__prefetch.name);
    ck_assert(ml__prefetch.q8_l1 < ml__prefetch.q8_l2 && ml__prefetch.q4_l1 < ml__prefetch.q4_l2);
    static const char *const bad[] = {"farther", "NEAR", "near ", "far-", "far-k "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("ML_PREFETCH", bad[i], 1);
        why = NULL;
        ck_assert_ptr_null(ml__kernels_select(&why));
        ck_assert_msg(why && strncmp(why, "unknown prefetch", 16) == 0, "%s: %s", bad[i],
                      why ? why : "(null)");
        ck_assert_str_eq(ml__kernels_refused_var(why), "ML_PREFETCH");
        ck_assert_str_eq(ml_kernels_prefetch_name(), "none");
        ck_assert_str_eq(ml_kernels_name(), "none");
    }
    static const char *const good[] = {"near", "far", "far-k", "auto", ""};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        setenv("ML_PREFETCH", good[i], 1);
        ck_assert_ptr_nonnull(ml__kernels_select(&why));
    }
    unsetenv("ML_PREFETCH");
}
END_TEST

/* On x86-64 every variant is built; one this CPU cannot run is refused. */
START_TEST(select_unsupported)
{
    load_variants();
#if defined(__x86_64__)
    static const char *const all[] = {"avx2", "avx512", "amx"};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const char *why = NULL;
        env_saved s = env_set(all[i]);
        const ml_kernels *k = ml__kernels_select(&why);
        int runs = 0;
        for (size_t v = 0; v < n_variants; v++)
            runs |= strncmp(variants[v]->name, all[i], strlen(all[i])) == 0;
        if (runs) {
            ck_assert_ptr_nonnull(k);
        } else {
            ck_assert_ptr_null(k);
            ck_assert_msg(strstr(why, "CPU") != NULL, "%s", why);
        }
        env_restore(s);
    }
#endif
    /* A variant of another architecture: refused, saying which builds have it. */
#if defined(__aarch64__)
    const char *other = "avx2", *where = "x86-64";
#else
    const char *other = "neon", *where = "AArch64";
#endif
    const char *why = NULL;
    env_saved s = env_set(other);
    ck_assert_ptr_null(ml__kernels_select(&why));
    ck_assert_msg(why && strstr(why, where) != NULL, "%s: %s", other, why ? why : "(null)");
    env_restore(s);
}
END_TEST

/* ml_kernels_slot_variant: with ML_KERNELS, that variant for every
 * kernel; left to choose, the variant whose code the chosen table runs
 * for each, and one this CPU runs; "none" where ML_KERNELS is refused. */
START_TEST(select_per_kernel)
{
    load_variants();
    ck_assert_ptr_null(ml_kernels_slot(ML_KS_COUNT));
    ck_assert_ptr_null(ml_kernels_slot_variant(ML_KS_COUNT));
    for (size_t v = 0; v < n_variants; v++) {
        env_saved s = env_set(variants[v]->name);
        for (unsigned i = 0; i < ML_KS_COUNT; i++)
            ck_assert_str_eq(ml_kernels_slot_variant(i), variants[v]->name);
        env_restore(s);
    }
    env_saved s = env_set("auto");
    const ml_kernels *k = ml__kernels_select(NULL);
    for (unsigned i = 0; i < ML_KS_COUNT; i++) {
        const ml_kernels *from = NULL;
        for (size_t v = 0; v < n_variants; v++)
            if (strcmp(variants[v]->name, ml_kernels_slot_variant(i)) == 0)
                from = variants[v];
        ck_assert_msg(from != NULL, "%s: %s", ml_kernels_slot(i), ml_kernels_slot_variant(i));
        ck_assert_msg(ml__kernels_same((ml_kslot)i, k, from), "%s", ml_kernels_slot(i));
    }
    env_restore(s);
    s = env_set("frob");
    ck_assert_str_eq(ml_kernels_slot_variant(0), "none");
    env_restore(s);
}
END_TEST

/* ML_KERNELS=VARIANT,KERNEL=VARIANT...: ml__kernels_select gives the
 * table for every kernel, ml__kernels_select_into composes the named
 * kernels in, ml_kernels_slot_variant reports them; a bad item is refused
 * as a bad variant is. */
START_TEST(select_kernel_own)
{
    load_variants();
    const ml_kernels *best = variants[n_variants - 1];
    char env[96];
    snprintf(env, sizeof env, "%s,matvec_q4_0=scalar,fmath=scalar", best->name);
    env_saved s = env_set(env);
    const char *why = NULL;
    ml_kernels buf;
    ck_assert_ptr_eq(ml__kernels_select(&why), best);
    const ml_kernels *k = ml__kernels_select_into(&buf, &why);
    ck_assert_ptr_eq(k, &buf);
    for (unsigned i = 0; i < ML_KS_COUNT; i++) {
        const int own = i == ML_KS_MATVEC_Q4_0 || i == ML_KS_FMATH;
        const ml_kernels *want = own ? &ml__kernels_scalar : best;
        ck_assert_msg(ml__kernels_same((ml_kslot)i, k, want), "%s", ml_kernels_slot(i));
        ck_assert_str_eq(ml_kernels_slot_variant(i), want->name);
    }
    ck_assert_str_eq(ml_kernels_name(), best->name);
    ck_assert_str_eq(ml_kernels_fmath_name(), "scalar");
    env_restore(s);
    s = env_set("auto");
    ck_assert_ptr_eq(ml__kernels_select_into(&buf, &why), ml__kernels_select(&why));
    env_restore(s);
    static const char *const bad[] = {"scalar,",          "scalar,fmath",      "scalar,fmath=",
                                      "scalar,frob=avx2", "scalar,fmath=frob", "scalar,FMATH=scalar"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why = NULL;
        s = env_set(bad[i]);
        ck_assert_ptr_null(ml__kernels_select_into(&buf, &why));
        ck_assert_ptr_null(ml__kernels_select(NULL));
        ck_assert_msg(why && strstr(why, "unknown"), "%s: %s", bad[i], why ? why : "(null)");
        ck_assert_str_eq(ml_kernels_slot_variant(0), "none");
        env_restore(s);
    }
#if defined(__aarch64__)
    s = env_set("neon,fmath=avx2");
#else
    s = env_set("scalar,fmath=neon");
#endif
    why = NULL;
    ck_assert_ptr_null(ml__kernels_select_into(&buf, &why));
    ck_assert_msg(why && strstr(why, "builds only"), "%s", why ? why : "(null)");
    env_restore(s);
}
END_TEST

/* The chooser's rule on made-up probe times (the widest candidate last):
 * another variant only when it is more than 10% faster, in both probes,
 * and then the fastest of those that were. */
START_TEST(select_rule)
{
    const double level[3] = {1.0, 1.0, 1.0}, near[3] = {0.92, 1.0, 1.0};
    const double clear[3] = {0.80, 0.85, 1.0}, second_only[3] = {1.0, 0.7, 1.0};
    ck_assert_uint_eq(ml__kernels_beating(level, 3), 0);
    ck_assert_uint_eq(ml__kernels_beating(near, 3), 0);
    ck_assert_uint_eq(ml__kernels_beating(clear, 3), 3);
    ck_assert_uint_eq(ml__kernels_beating(second_only, 3), 2);
    ck_assert_uint_eq(ml__kernels_fastest(clear, 0, 3), 2); /* none won: the widest */
    ck_assert_uint_eq(ml__kernels_fastest(clear, 3, 3), 0);
    ck_assert_uint_eq(ml__kernels_fastest(clear, 2, 3), 1);
    /* a tie among those that won goes to the later, wider one: the same
     * code in two tables (avx512lanes and avx512 outside matmul_blk,
     * timed once) is named after the table it is */
    const double tie[4] = {0.9, 0.5, 0.5, 1.0};
    ck_assert_uint_eq(ml__kernels_beating(tie, 4), 7);
    ck_assert_uint_eq(ml__kernels_fastest(tie, 7, 4), 2);
    /* confirmed: won in the first probe (clear) and the second */
    ck_assert_uint_eq(ml__kernels_beating(clear, 3) & ml__kernels_beating(second_only, 3), 2);
    ck_assert_uint_eq(ml__kernels_beating(clear, 3) & ml__kernels_beating(near, 3), 0);
    const double one[1] = {1.0};
    ck_assert_uint_eq(ml__kernels_beating(one, 1), 0);
    ck_assert_uint_eq(ml__kernels_fastest(one, 0, 1), 0);
}
END_TEST

/* The float math comes with the kernel table, one choice for both: the
 * reference with the scalar table and with NEON (none of its own yet),
 * AVX-512's with the AVX-512 and AMX tables, AVX2's with the AVX2 one;
 * ml_kernels_fmath_name reports it. */
START_TEST(select_fmath)
{
    load_variants();
    ck_assert_ptr_eq(ml__kernels_scalar.fmath, &ml__fmath_scalar);
    for (size_t v = 0; v < n_variants; v++) {
        const ml_fmath *want = &ml__fmath_scalar;
#if defined(__x86_64__)
        if (v > 0)
            want = strncmp(variants[v]->name, "avx512", 6) == 0 ||
                           strcmp(variants[v]->name, "amx") == 0
                       ? &ml__fmath_avx512
                       : &ml__fmath_avx2;
#endif
        ck_assert_msg(variants[v]->fmath == want, "%s", variants[v]->name);
        env_saved s = env_set(variants[v]->name);
        ck_assert_str_eq(ml_kernels_fmath_name(), want->name);
        env_restore(s);
    }
    env_saved s = env_set("frob");
    ck_assert_str_eq(ml_kernels_fmath_name(), "none");
    env_restore(s);
}
END_TEST

Suite *suite_kernels(void)
{
    Suite *s = suite_create("kernels");
    n_variants = ml__kernels_available(variants, MAX_VARIANTS);
    fprintf(stderr, "check_kernels: variants compared with scalar:");
    for (size_t v = 1; v < n_variants; v++)
        fprintf(stderr, " %s", variants[v]->name);
    fprintf(stderr, "%s\n", n_variants > 1 ? "" : " none (this CPU runs only scalar)");

    TCase *tc = tcase_create("quantize");
    tcase_add_test(tc, quantize_random);
    tcase_add_test(tc, quantize_edges);
    tcase_add_test(tc, quantize_ties);
    suite_add_tcase(s, tc);

    tc = tcase_create("dot");
    tcase_add_test(tc, dot_q8_0);
    tcase_add_test(tc, dot_q4_0);
    tcase_add_test(tc, dot_extreme_quants);
    tcase_add_test(tc, matmul_token_counts);
    tcase_add_test(tc, matmul_model_shapes);
    tcase_add_test(tc, matmul_tile_counts);
    tcase_add_test(tc, matmul_token_chunks);
    tcase_add_test(tc, dot_long_rows);
    tcase_add_test(tc, dot_quantized_activations);
    suite_add_tcase(s, tc);

    tc = tcase_create("reference");
    tcase_add_test(tc, scalar_matches_double);
    tcase_add_test(tc, rule3_order);
    tcase_add_test(tc, known_values);
    tcase_add_test(tc, extreme_sums);
    suite_add_tcase(s, tc);

    tc = tcase_create("select");
    tcase_add_test(tc, select_by_env);
    tcase_add_test(tc, select_per_kernel);
    tcase_add_test(tc, select_rule);
    tcase_add_test(tc, select_kernel_own);
    tcase_add_test(tc, select_unknown);
    tcase_add_test(tc, select_prefetch);
    tcase_add_test(tc, select_unsupported);
    tcase_add_test(tc, select_fmath);
    suite_add_tcase(s, tc);
    return s;
}
