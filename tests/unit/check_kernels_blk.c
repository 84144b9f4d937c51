/* check_kernels_blk.c - the block-type kernels (matvec_blk, matmul_blk;
 * kernels.h's rule 5): the scalar reference against ggml's meaning of each
 * type (gguf_dequant.c's dequantizers, bit-exact with gguf-py, in a
 * double-precision dot product), and every variant this CPU runs against
 * the scalar reference, compared on the bits: random blocks with ordinary
 * and extreme scales, odd row ranges, rows of one unit to many, 1 to 33
 * tokens, matmul equal to matvec token by token. */
#include "suites.h"
#include "testutil.h"

#include "kernels/kernels.h"
#include "mlcore.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_VARIANTS 8

static const ml_kernels *variants[MAX_VARIANTS];
static size_t n_variants;

/* Every type the block kernels compute with. */
static const ml_type blk_types[] = {
    ML_TYPE_F32,  ML_TYPE_Q4_1,  ML_TYPE_Q5_0,   ML_TYPE_Q5_1,   ML_TYPE_Q2_K,
    ML_TYPE_Q3_K, ML_TYPE_Q4_K,  ML_TYPE_Q5_K,   ML_TYPE_Q6_K,   ML_TYPE_IQ4_NL,
    ML_TYPE_IQ4_XS, ML_TYPE_MXFP4, ML_TYPE_F16,  ML_TYPE_BF16,
};
#define N_TYPES (sizeof blk_types / sizeof blk_types[0])

/* Elements and bytes of one unit of t: a block, 32 floats, or 32 halves. */
static void unit_of(ml_type t, size_t *elems, size_t *bytes)
{
    uint32_t e = 1, b = 4;
    ml_type_block(t, &e, &b, NULL);
    *elems = e == 1 ? 32 : e;
    *bytes = e == 1 ? 32 * (size_t)b : b;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8);
}

/* A finite f16: ordinary (about 1e-3) or, when extreme, now and then the
 * largest, the smallest subnormal, zero or a negative one. */
static uint16_t random_f16(tu_rng *r, int extreme)
{
    if (extreme)
        switch (tu_below(r, 6)) {
        case 0: return 0x7bff; /* 65504 */
        case 1: return 0x0001; /* 2^-24 */
        case 2: return 0x0000;
        case 3: return 0xfbff;
        default: break;
        }
    return ml_f32_to_f16((float)(tu_below(r, 2000) + 1) * 1e-6f * (tu_below(r, 2) ? 1 : -1));
}

/* The offset of a unit of t's j-th f16 field (its scale, its min), or -1. */
static int f16_field(ml_type t, int j)
{
    static const struct { ml_type t; int at[2]; } fields[] = {
        {ML_TYPE_Q4_1, {0, 2}},   {ML_TYPE_Q5_0, {0, -1}},  {ML_TYPE_Q5_1, {0, 2}},
        {ML_TYPE_Q2_K, {80, 82}}, {ML_TYPE_Q3_K, {108, -1}}, {ML_TYPE_Q4_K, {0, 2}},
        {ML_TYPE_Q5_K, {0, 2}},   {ML_TYPE_Q6_K, {208, -1}}, {ML_TYPE_IQ4_NL, {0, -1}},
        {ML_TYPE_IQ4_XS, {0, -1}},
    };
    for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++)
        if (fields[k].t == t)
            return fields[k].at[j];
    return -1;
}

/* Random bytes for one unit of t, its scales and floats made finite. */
static void random_unit(ml_type t, uint8_t *u, size_t bytes, tu_rng *r, int extreme)
{
    for (size_t i = 0; i < bytes; i++)
        u[i] = (uint8_t)tu_next(r);
    for (int j = 0; j < 2; j++)
        if (f16_field(t, j) >= 0)
            put16(u + f16_field(t, j), random_f16(r, extreme));
    if (t == ML_TYPE_MXFP4) { /* 2^(e-128): about 1e-3, or the extremes */
        static const uint8_t ends[] = {0, 1, 2, 253, 254, 255};
        u[0] = extreme && tu_below(r, 3) == 0 ? ends[tu_below(r, 6)]
                                              : (uint8_t)(110 + tu_below(r, 20));
    }
    if (t == ML_TYPE_F16)
        for (size_t i = 0; i < bytes; i += 2)
            put16(u + i, random_f16(r, extreme));
    if (t == ML_TYPE_BF16)
        for (size_t i = 0; i < bytes; i += 2)
            put16(u + i, extreme && tu_below(r, 8) == 0
                             ? 0x7f7f /* the largest bf16 */
                             : (uint16_t)(tu_below(r, 2) << 15 | (0x3a00 + tu_below(r, 0x600))));
    if (t == ML_TYPE_F32)
        for (size_t i = 0; i < bytes; i += 4) {
            float f = (float)((int)tu_below(r, 20001) - 10000) * (extreme ? 1e3f : 1e-5f);
            memcpy(u + i, &f, 4);
        }
}

typedef struct blk_mat {
    ml_type t;
    size_t rows, cols, row_bytes;
    uint8_t *w;
} blk_mat;

static void blk_mat_new(blk_mat *m, ml_type t, size_t rows, size_t cols, tu_rng *r, int extreme)
{
    size_t elems, bytes;
    unit_of(t, &elems, &bytes);
    m->t = t, m->rows = rows, m->cols = cols;
    m->row_bytes = ml__blk_row_bytes(t, cols);
    ck_assert_uint_eq(m->row_bytes, cols / elems * bytes);
    m->w = xmalloc(rows * m->row_bytes);
    for (size_t i = 0; i < rows * cols / elems; i++)
        random_unit(t, m->w + i * bytes, bytes, r, extreme);
}

/* n_tok quantized activation rows of random floats (large ones when
 * extreme), in the form type t's products take: Q8_0, or K activations
 * (kernels.h's rule 6), `per` elements a scale. */
typedef struct acts {
    int8_t *q;
    float *d;
    size_t per;
} acts;

static void acts_new(acts *a, ml_type t, size_t n_tok, size_t cols, tu_rng *r, int extreme)
{
    float *x = xmalloc(n_tok * cols * sizeof *x);
    for (size_t i = 0; i < n_tok * cols; i++)
        x[i] = ((float)tu_below(r, 20001) - 10000.0f) * (extreme && i % 64 < 32 ? 1.0f : 1e-4f);
    a->per = ml__blk_acts_k(t) ? 256 : 32;
    a->q = xmalloc(n_tok * cols);
    a->d = xmalloc(n_tok * cols / a->per * sizeof *a->d);
    if (a->per == 256)
        ml_quantize_row_q8_k(x, n_tok * cols, a->q, a->d);
    else
        ml__kernels_scalar.quantize_q8_0(x, n_tok * cols, a->q, a->d);
    free(x);
}

static void acts_free(acts *a)
{
    free(a->q);
    free(a->d);
}

static float *sentinel(size_t n)
{
    float *y = xmalloc(n * sizeof *y);
    memset(y, 0x5a, n * sizeof *y);
    return y;
}

/* ---- every variant against the scalar reference ---- */

static void check_matvec(const blk_mat *m, const acts *a, size_t r0, size_t r1)
{
    float *want = sentinel(m->rows), *got = sentinel(m->rows);
    ml__matvec_blk_scalar(m->t, m->w, m->cols, r0, r1, a->q, a->d, want);
    for (size_t v = 0; v < n_variants; v++) {
        memset(got, 0x5a, m->rows * sizeof *got);
        variants[v]->matvec_blk(m->t, m->w, m->cols, r0, r1, a->q, a->d, got);
        ck_assert_msg(memcmp(got, want, m->rows * sizeof *got) == 0,
                      "%s matvec %s cols %zu rows %zu..%zu differs from scalar", variants[v]->name,
                      ml_type_name(m->t), m->cols, r0, r1);
    }
    free(want);
    free(got);
}

/* v's matmul in two steps (matmul_blk_x), its input rearranged in 1, 2
 * and 3 shares, against want; nothing where v makes no such form. */
static void check_matmul_x(const ml_kernels *v, const blk_mat *m, const acts *a, size_t n_tok,
                           size_t r0, size_t r1, const float *want, float *got, size_t ldy)
{
    const ml_matmul_blk_x *bx = &v->matmul_blk_x;
    ck_assert_msg(!bx->bytes == !bx->prepare && !bx->bytes == !bx->run && !bx->bytes == !bx->group,
                  "%s: matmul_blk_x's four entries go together", v->name);
    const size_t bytes = bx->bytes ? bx->bytes(m->t, m->cols, n_tok) : 0;
    /* a form is made of whole groups: as big for n_tok as for its group's end */
    const size_t group = bx->group ? bx->group(m->t, m->cols, n_tok) : 1;
    ck_assert_msg((group > 1) == (bytes > 0), "%s %s cols %zu, %zu tokens: group %zu, form %zu bytes",
                  v->name, ml_type_name(m->t), m->cols, n_tok, group, bytes);
    if (!bytes)
        return;
    const size_t end = (n_tok + group - 1) / group * group;
    ck_assert_msg(bx->bytes(m->t, m->cols, end) == bytes &&
                      bx->bytes(m->t, m->cols, end + 1) > bytes,
                  "%s %s cols %zu: %zu tokens' form is not its group's (%zu)", v->name,
                  ml_type_name(m->t), m->cols, n_tok, group);
    void *xt = aligned_alloc(64, (bytes + 63) / 64 * 64);
    ck_assert_ptr_nonnull(xt);
    for (unsigned parts = 1; parts <= 3; parts++) {
        memset(xt, 0xa5, bytes);
        memset(got, 0x5a, n_tok * ldy * sizeof *got);
        for (unsigned part = parts; part-- > 0;) /* any order */
            bx->prepare(m->t, a->q, a->d, m->cols, n_tok, part, parts, xt);
        bx->run(m->t, m->w, m->cols, r0, r1, a->q, a->d, xt, n_tok, got, ldy);
        ck_assert_msg(memcmp(got, want, n_tok * ldy * sizeof *got) == 0,
                      "%s matmul_blk_x %s cols %zu rows %zu..%zu, %zu tokens, %u shares differs "
                      "from matvec", v->name, ml_type_name(m->t), m->cols, r0, r1, n_tok, parts);
    }
    free(xt);
}

/* Each variant's matmul of n_tok tokens equals the scalar matvec per
 * token, bit for bit; y has a stride wider than the rows.  And its
 * two-step matmul (check_matmul_x). */
static void check_matmul(const blk_mat *m, const acts *a, size_t n_tok, size_t r0, size_t r1)
{
    const size_t ldy = m->rows + 3;
    float *want = sentinel(n_tok * ldy), *got = sentinel(n_tok * ldy);
    for (size_t k = 0; k < n_tok; k++)
        ml__matvec_blk_scalar(m->t, m->w, m->cols, r0, r1, a->q + k * m->cols,
                              a->d + k * m->cols / a->per, want + k * ldy);
    for (size_t v = 0; v < n_variants; v++) {
        memset(got, 0x5a, n_tok * ldy * sizeof *got);
        variants[v]->matmul_blk(m->t, m->w, m->cols, r0, r1, a->q, a->d, n_tok, got, ldy);
        ck_assert_msg(memcmp(got, want, n_tok * ldy * sizeof *got) == 0,
                      "%s matmul %s cols %zu rows %zu..%zu, %zu tokens differs from matvec",
                      variants[v]->name, ml_type_name(m->t), m->cols, r0, r1, n_tok);
        check_matmul_x(variants[v], m, a, n_tok, r0, r1, want, got, ldy);
    }
    free(want);
    free(got);
}

static const size_t ranges[][2] = {{0, 1}, {3, 4}, {1, 6}, {5, 22}, {0, 23}, {2, 2}};
#define N_RANGES (sizeof ranges / sizeof ranges[0])

/* Loop over the types: a row of 1, 2, 3, 4, 6, 7, 9 and 17 units (K
 * rows of up to four super-blocks go two at a time in matvec; a group of
 * 32-element blocks ends after each of 1 to 4, 6 and 7 of its eight). */
START_TEST(variants_match_scalar)
{
    const ml_type t = blk_types[_i];
    static const size_t units[] = {1, 2, 3, 4, 6, 7, 9, 17};
    tu_rng r = {0x38000 + (uint64_t)_i};
    for (int extreme = 0; extreme <= 1; extreme++)
        for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
            size_t elems, bytes;
            unit_of(t, &elems, &bytes);
            blk_mat m;
            acts a;
            blk_mat_new(&m, t, 23, units[u] * elems, &r, extreme);
            acts_new(&a, t, 263, m.cols, &r, extreme);
            for (size_t k = 0; k < sizeof ranges / sizeof ranges[0]; k++)
                check_matvec(&m, &a, ranges[k][0], ranges[k][1]);
            size_t i = 0; /* rows 1..22, then the ranges in turn */
            for (size_t n_tok = 1; n_tok <= 33; n_tok += (n_tok < 5 ? 1 : 4), i++) {
                check_matmul(&m, &a, n_tok, 1, 22);
                check_matmul(&m, &a, n_tok, ranges[i % N_RANGES][0], ranges[i % N_RANGES][1]);
            }
            /* either side of the AMX table's threshold (32 tokens), and
             * every row in one call (a whole panel and a partial one);
             * six to eight tokens (the AVX-512 K types' rows unpacked
             * once for all the tokens, matmul_k_tokens, and the nibble
             * types', matmul_32_tokens), sixteen */
            for (size_t n_tok = 31; n_tok <= 33; n_tok++)
                check_matmul(&m, &a, n_tok, 0, 23);
            for (size_t n_tok = 6; n_tok <= 8; n_tok++)
                check_matmul(&m, &a, n_tok, 1, 23);
            check_matmul(&m, &a, 16, 0, 23); /* a whole group of Q4_1's lanes */
            /* past the lanes' chunk of 256 tokens (without VNNI), a
             * partial group of sixteen after it */
            if (u < 2)
                check_matmul(&m, &a, 263, 0, 23);
            acts_free(&a);
            free(m.w);
        }
}
END_TEST

/* The integer bounds: every byte of the integer types' units but their
 * f16 fields (and MXFP4's scale byte) one pattern (0x00: IQ4_XS's ls 0
 * and level -127, Q6_K's q6 0; 0xff, 0x80, 0x7f, 0x08, 0xf0, 0x77: the
 * other ends, MXFP4's level 12 among them), every activation +-max, so
 * that every product, every split of a scale (the AMX table's folded
 * panels) and the nibble types' partial sums packed to int16
 * (hsum_pairs) meet their largest magnitudes; rows of three whole
 * groups of 256; 33 tokens. */
START_TEST(types_at_their_bounds)
{
    static const ml_type types[] = {ML_TYPE_Q2_K, ML_TYPE_Q3_K, ML_TYPE_Q4_K, ML_TYPE_Q5_K,
                                    ML_TYPE_Q6_K, ML_TYPE_IQ4_XS, ML_TYPE_Q4_1, ML_TYPE_Q5_0,
                                    ML_TYPE_Q5_1, ML_TYPE_IQ4_NL, ML_TYPE_MXFP4};
    static const uint8_t patterns[] = {0x00, 0xff, 0x80, 0x7f, 0x08, 0xf0, 0x77};
    const ml_type t = types[_i];
    tu_rng r = {0x38100 + (uint64_t)_i};
    for (size_t p = 0; p < sizeof patterns; p++)
        for (int sign = -1; sign <= 1; sign += 2) {
            size_t elems, bytes;
            unit_of(t, &elems, &bytes);
            blk_mat m;
            blk_mat_new(&m, t, 23, 768, &r, 0);
            for (size_t i = 0; i < 23 * 768 / elems; i++) {
                uint8_t *u = m.w + i * bytes;
                memset(u, patterns[p], bytes);
                for (int j = 0; j < 2; j++)
                    if (f16_field(t, j) >= 0)
                        put16(u + f16_field(t, j), random_f16(&r, 0));
                if (t == ML_TYPE_MXFP4)
                    u[0] = (uint8_t)(110 + tu_below(&r, 20));
            }
            acts a;
            a.per = ml__blk_acts_k(t) ? 256 : 32;
            a.q = xmalloc(33 * m.cols);
            a.d = xmalloc(33 * m.cols / a.per * sizeof *a.d);
            float *x = xmalloc(33 * m.cols * sizeof *x);
            for (size_t i = 0; i < 33 * m.cols; i++)
                x[i] = (float)sign * (i % 7 == 3 ? -1.0f : 1.0f);
            if (a.per == 256)
                ml_quantize_row_q8_k(x, 33 * m.cols, a.q, a.d);
            else
                ml__kernels_scalar.quantize_q8_0(x, 33 * m.cols, a.q, a.d);
            free(x);
            check_matvec(&m, &a, 0, 23);
            check_matmul(&m, &a, 33, 0, 23);
            acts_free(&a);
            free(m.w);
        }
}
END_TEST

/* The K products in tiles of many rows (with VNNI, 32 rows x 6 tokens
 * from 17 tokens on): 70 rows, so whole tiles, several a call and tails
 * of one register's rows; nine super-blocks a row, so rule 3's partial
 * sums take a second super-block each (k % 8) and some take none; 40
 * tokens (six tiles and a partial one); random and extreme values. */
START_TEST(k_types_in_row_tiles)
{
    static const ml_type k_types[] = {ML_TYPE_Q4_K, ML_TYPE_Q5_K, ML_TYPE_Q6_K, ML_TYPE_IQ4_XS};
    static const size_t spans[][2] = {{0, 70}, {5, 69}, {0, 16}, {3, 50}, {33, 70}};
    const ml_type t = k_types[_i];
    tu_rng r = {0x38200 + (uint64_t)_i};
    for (int extreme = 0; extreme <= 1; extreme++) {
        blk_mat m;
        acts a;
        blk_mat_new(&m, t, 70, 9 * 256, &r, extreme);
        acts_new(&a, t, 40, m.cols, &r, extreme);
        for (size_t k = 0; k < sizeof spans / sizeof spans[0]; k++)
            check_matmul(&m, &a, 40, spans[k][0], spans[k][1]);
        check_matmul(&m, &a, 17, 0, 70);
        acts_free(&a);
        free(m.w);
    }
}
END_TEST

/* ---- blk_to_q8_0: Q5_0, IQ4_NL, MXFP4 through the Q8_0 products ---- */

static const ml_type as_q8_types[] = {ML_TYPE_Q5_0, ML_TYPE_IQ4_NL, ML_TYPE_MXFP4};

/* Rows [r0, r1) through v's Q8_0 products (matmul_q8_0, or matmul_x
 * when x is set and v has one) on v's unpacking, into y (ldy apart). */
static void as_q8_matmul(const ml_kernels *v, const blk_mat *m, const acts *a, size_t n_tok,
                         size_t r0, size_t r1, int x, float *y, size_t ldy)
{
    const size_t n = r1 - r0;
    int8_t *q = xmalloc(n * m->cols + 1);
    float *d = xmalloc(n * m->cols / 32 * sizeof *d + 1);
    ck_assert_int_eq(v->blk_to_q8_0(m->t, m->w, m->cols, r0, r1, q, d), 1);
    const ml_wscales wd = {d, 0};
    const ml_matmul_x *mx = &v->matmul_x[0];
    const size_t bytes = x && mx->bytes ? mx->bytes(0, m->cols, n_tok) : 0;
    if (bytes) {
        void *xt = aligned_alloc(64, (bytes + 63) / 64 * 64);
        ck_assert_ptr_nonnull(xt);
        for (unsigned part = 0; part < 2; part++)
            mx->prepare(0, a->q, m->cols, n_tok, part, 2, xt);
        mx->run(0, q, wd, m->cols, 0, n, a->q, xt, a->d, n_tok, y + r0, ldy);
        free(xt);
    } else {
        v->matmul_q8_0(q, wd, m->cols, 0, n, a->q, a->d, n_tok, y + r0, ldy);
    }
    free(q);
    free(d);
}

/* Every variant's unpacking is the reference's, and its Q8_0 products
 * on it give the scalar matvec_blk's bits, 1 to 33 tokens, odd row
 * ranges. */
START_TEST(as_q8_0_matches_matvec)
{
    const ml_type t = as_q8_types[_i];
    static const size_t units[] = {1, 3, 9, 64};
    tu_rng r = {0x38100 + (uint64_t)_i};
    for (int extreme = 0; extreme <= 1; extreme++)
        for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
            blk_mat m;
            acts a;
            blk_mat_new(&m, t, 23, units[u] * 32, &r, extreme);
            acts_new(&a, t, 263, m.cols, &r, extreme);
            int8_t *q0 = xmalloc(23 * m.cols), *q1 = xmalloc(23 * m.cols);
            float *d0 = xmalloc(23 * units[u] * sizeof *d0), *d1 = xmalloc(23 * units[u] * sizeof *d1);
            ck_assert_int_eq(ml__blk_to_q8_0_scalar(t, m.w, m.cols, 0, 23, q0, d0), 1);
            for (size_t i = 0; i < 23 * m.cols; i++)
                ck_assert_int_ne(q0[i], -128);
            for (size_t v = 0; v < n_variants; v++) {
                ck_assert_int_eq(variants[v]->blk_to_q8_0(t, m.w, m.cols, 2, 23, q1, d1), 1);
                ck_assert(memcmp(q1, q0 + 2 * m.cols, 21 * m.cols) == 0);
                ck_assert(memcmp(d1, d0 + 2 * units[u], 21 * units[u] * sizeof *d1) == 0);
                ck_assert_int_eq(variants[v]->blk_to_q8_0(ML_TYPE_Q4_1, m.w, m.cols, 0, 1, q1, d1), 0);
            }
            size_t i = 0;
            for (size_t n_tok = 1; n_tok <= 33; n_tok += (n_tok < 5 ? 1 : 4), i++) {
                /* the row ranges in turn */
                const size_t r0 = ranges[i % N_RANGES][0], r1 = ranges[i % N_RANGES][1];
                const size_t ldy = m.rows + 3;
                float *want = sentinel(n_tok * ldy), *got = sentinel(n_tok * ldy);
                for (size_t k = 0; k < n_tok; k++)
                    ml__matvec_blk_scalar(t, m.w, m.cols, r0, r1, a.q + k * m.cols,
                                          a.d + k * m.cols / 32, want + k * ldy);
                for (size_t v = 0; v <= n_variants; v++) /* and the scalar table */
                    for (int x = 0; x <= 1; x++) {
                        const ml_kernels *k = v < n_variants ? variants[v] : &ml__kernels_scalar;
                        memset(got, 0x5a, n_tok * ldy * sizeof *got);
                        as_q8_matmul(k, &m, &a, n_tok, r0, r1, x, got, ldy);
                        ck_assert_msg(memcmp(got, want, n_tok * ldy * sizeof *got) == 0,
                                      "%s %s as Q8_0 (matmul_x %d), cols %zu, rows %zu..%zu, "
                                      "%zu tokens differs",
                                      k->name, ml_type_name(t), x, m.cols, r0, r1, n_tok);
                    }
                free(want);
                free(got);
            }
            free(q0), free(q1), free(d0), free(d1);
            acts_free(&a);
            free(m.w);
        }
}
END_TEST

/* ---- the reference against ggml's meaning ---- */

/* Row r of m dequantized: ggml's dequantizer (gguf_dequant.c), or F32's
 * floats as they are. */
static void dequant_row(const blk_mat *m, size_t r, float *out)
{
    const uint8_t *row = m->w + r * m->row_bytes;
    uint32_t ggml;
    if (m->t == ML_TYPE_F32) {
        memcpy(out, row, m->cols * sizeof *out);
        return;
    }
    ck_assert(ml_type_block(m->t, NULL, NULL, &ggml));
    ml_error e;
    ck_assert_msg(ml_gguf_dequantize_raw(ggml, row, m->cols, out, &e) == ML_OK, "%s", e.msg);
}

/* s-rule row dots against double-precision dots of the dequantized row
 * with the dequantized activation: equal to about float's precision of
 * the sum of the products' magnitudes. */
START_TEST(scalar_matches_ggml)
{
    const ml_type t = blk_types[_i];
    tu_rng r = {0x38100 + (uint64_t)_i};
    size_t elems, bytes;
    unit_of(t, &elems, &bytes);
    blk_mat m;
    acts a;
    blk_mat_new(&m, t, 16, 8 * elems, &r, 0);
    acts_new(&a, t, 1, m.cols, &r, 0);
    float *y = xmalloc(m.rows * sizeof *y), *w = xmalloc(m.cols * sizeof *w);
    ml__matvec_blk_scalar(t, m.w, m.cols, 0, m.rows, a.q, a.d, y);
    for (size_t row = 0; row < m.rows; row++) {
        dequant_row(&m, row, w);
        double dot = 0, mag = 0;
        for (size_t i = 0; i < m.cols; i++) {
            const double p = (double)w[i] * ((double)a.q[i] * (double)a.d[i / a.per]);
            dot += p, mag += fabs(p);
        }
        ck_assert_msg(fabs((double)y[row] - dot) <= 1e-5 * mag + 1e-30,
                      "%s row %zu: %.9g, ggml's %.9g (magnitude %.3g)", ml_type_name(t), row,
                      (double)y[row], dot, mag);
        ck_assert_msg(mag > 0, "%s row %zu: all products zero", ml_type_name(t), row);
    }
    free(y);
    free(w);
    acts_free(&a);
    free(m.w);
}
END_TEST

/* The row length: the types ml_type_block names (and F32) at whole
 * units; nothing for the spec's own types, U8, unknown ones or a partial
 * unit. */
START_TEST(row_bytes)
{
    for (size_t k = 0; k < N_TYPES; k++) {
        size_t elems, bytes;
        unit_of(blk_types[k], &elems, &bytes);
        ck_assert_uint_eq(ml__blk_row_bytes(blk_types[k], 3 * elems), 3 * bytes);
        ck_assert_uint_eq(ml__blk_row_bytes(blk_types[k], 3 * elems + 16), 0);
        if (elems == 256)
            ck_assert_uint_eq(ml__blk_row_bytes(blk_types[k], 32), 0);
    }
    ck_assert_uint_eq(ml__blk_row_bytes(ML_TYPE_F32, 32), 128);
    ck_assert_uint_eq(ml__blk_row_bytes(ML_TYPE_Q8_0, 32), 0);
    ck_assert_uint_eq(ml__blk_row_bytes(ML_TYPE_Q4_0, 32), 0);
    ck_assert_uint_eq(ml__blk_row_bytes(ML_TYPE_U8, 32), 0);
    ck_assert_uint_eq(ml__blk_row_bytes(ML_TYPE_COUNT, 32), 0);
    ck_assert_uint_eq(ml__blk_row_bytes((ml_type)-1, 32), 0);
}
END_TEST

/* A Q4_K super-block worked out by hand: d 1, dmin 0.5, sub-block j's
 * scale j + 1 and min j, every quant 3; activations all 1 with scale 1
 * (xq 1, xd 1).  s_j = (sc·isum)·d - (m·asum)·dmin = 96 (j+1) - 16 j,
 * summed over j: 96·36 - 16·28 = 3008. */
START_TEST(q4_k_by_hand)
{
    uint8_t w[144] = {0};
    put16(w, 0x3c00), put16(w + 2, 0x3800);
    for (int j = 0; j < 4; j++)
        w[4 + j] = (uint8_t)(j + 1), w[8 + j] = (uint8_t)j;
    for (int j = 4; j < 8; j++) /* scale j+1 and min j in the packed high four */
        w[8 + j] = (uint8_t)((j + 1) | j << 4);
    memset(w + 16, 0x33, 128);
    int8_t xq[256];
    float xd[8];
    memset(xq, 1, sizeof xq);
    for (int j = 0; j < 8; j++)
        xd[j] = 1.0f;
    float y = 0;
    for (size_t v = 0; v < n_variants; v++) {
        variants[v]->matvec_blk(ML_TYPE_Q4_K, w, 256, 0, 1, xq, xd, &y);
        ck_assert_msg(y == 3008.0f, "%s: %g", variants[v]->name, (double)y);
    }
}
END_TEST

Suite *suite_kernels_blk(void)
{
    Suite *s = suite_create("kernels_blk");
    n_variants = ml__kernels_available(variants, MAX_VARIANTS);
    TCase *tc = tcase_create("blk");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, variants_match_scalar, 0, (int)N_TYPES);
    tcase_add_loop_test(tc, scalar_matches_ggml, 0, (int)N_TYPES);
    tcase_add_loop_test(tc, as_q8_0_matches_matvec, 0,
                        (int)(sizeof as_q8_types / sizeof as_q8_types[0]));
    tcase_add_loop_test(tc, types_at_their_bounds, 0, 11);
    tcase_add_loop_test(tc, k_types_in_row_tiles, 0, 4);
    tcase_add_test(tc, row_bytes);
    tcase_add_test(tc, q4_k_by_hand);
    suite_add_tcase(s, tc);
    return s;
}
