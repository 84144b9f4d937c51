/* check_gguf_dequant.c - dequantization of GGUF tensor types to f32.
 * tests/fixtures/gguf/dequant.gguf (tools/gen-gguf-fixtures.py) holds, for
 * each of the 15 supported types, random blocks and gguf-py's
 * gguf.quants.dequantize of them (the generator also checked them against
 * ggml's own dequantizer): we must match bit for bit, whole tensors and
 * row by row.  Also: every f16 and bf16 value, the type table, a few
 * blocks worked out by hand, and the errors. */
#include "gguf_build.h"
#include "suites.h"
#include "testutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "mxfp4_vector.h"

static const char *const supported[15] = {"F32",  "F16",  "BF16", "Q4_0", "Q4_1",
                                          "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K",
                                          "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"};

static ml_gguf *open_dequant(void)
{
    ml_gguf *g = NULL;
    ml_error e;
    ml_status s = ml_gguf_open(gb_fixture("dequant.gguf"), &g, &e);
    ck_assert_msg(s == ML_OK, "%s: %s", gb_fixture("dequant.gguf"), e.msg);
    return g;
}

/* First index where two float arrays differ in bits, or -1. */
static long first_diff(const float *a, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t x, y;
        memcpy(&x, &a[i], 4);
        memcpy(&y, b + 4 * i, 4);
        if (x != y)
            return (long)i;
    }
    return -1;
}

START_TEST(matches_gguf_py)
{
    const char *name = supported[_i];
    ml_gguf *g = open_dequant();
    char xname[64];
    snprintf(xname, sizeof xname, "%s.expected", name);
    const ml_gguf_tensor *t = ml_gguf_find_tensor(g, name), *x = ml_gguf_find_tensor(g, xname);
    ck_assert_msg(t && x, "%s missing from the fixture", name);
    ck_assert_str_eq(t->type_name, name);
    ck_assert_uint_eq(x->type, ML_GGML_F32);
    ck_assert_uint_eq(t->rows, x->rows);
    ck_assert_uint_eq(t->cols, x->cols);
    ck_assert_uint_ge(t->rows, 4);
    size_t n = (size_t)t->n_elements;
    float *out = malloc(n * sizeof *out);
    ml_error e;

    /* Whole tensor. */
    memset(out, 0xff, n * sizeof *out);
    ck_assert_int_eq(ml_gguf_dequantize(t, 0, t->rows, out, &e), ML_OK);
    long d = first_diff(out, x->data, n);
    ck_assert_msg(d < 0, "%s: element %ld differs", name, d);

    /* Row by row, and a middle range. */
    size_t cols = (size_t)t->cols;
    for (uint64_t r = 0; r < t->rows; r++) {
        memset(out, 0xff, cols * sizeof *out);
        ck_assert_int_eq(ml_gguf_dequantize(t, r, 1, out, &e), ML_OK);
        d = first_diff(out, x->data + r * cols * 4, cols);
        ck_assert_msg(d < 0, "%s: row %llu, column %ld differs", name, (unsigned long long)r, d);
    }
    ck_assert_int_eq(ml_gguf_dequantize(t, 1, t->rows - 2, out, &e), ML_OK);
    ck_assert_int_eq(first_diff(out, x->data + cols * 4, cols * (size_t)(t->rows - 2)), -1);

    /* The raw entry point over the same blocks. */
    ck_assert_int_eq(ml_gguf_dequantize_raw(t->type, t->data, t->n_elements, out, &e), ML_OK);
    ck_assert_int_eq(first_diff(out, x->data, n), -1);
    free(out);
    ml_gguf_close(g);
}
END_TEST

/* MXFP4 is not in dequant.gguf: its gguf-py reference is a committed
 * vector (tools/gen-mxfp4-vector.py) of blocks with every class of scale,
 * ggml's subnormal ones (e 0 and 1) and the largest (e 255: infinities). */
START_TEST(mxfp4_matches_gguf_py)
{
    const size_t nb = sizeof mxfp4_blocks / 17;
    float out[sizeof mxfp4_expected / 4];
    ml_error e;
    ck_assert_uint_eq(nb * 32, sizeof mxfp4_expected / 4);
    ck_assert_int_eq(ml_gguf_dequantize_raw(ML_GGML_MXFP4, mxfp4_blocks, nb * 32, out, &e), ML_OK);
    for (size_t i = 0; i < nb * 32; i++) {
        uint32_t got;
        memcpy(&got, &out[i], 4);
        ck_assert_msg(got == mxfp4_expected[i], "element %zu: %08x, gguf-py %08x", i, got,
                      mxfp4_expected[i]);
    }
}
END_TEST

/* IEEE binary16 -> binary32 bits, written out here (a float returned
 * through i386's x87 stack would lose a signalling NaN's quiet bit). */
static uint32_t f16_bits(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023;
    if (e == 31)
        return sign | 0x7f800000u | m << 13;
    if (e)
        return sign | (e + 112) << 23 | m << 13;
    if (!m)
        return sign;
    int shift = 0;
    while (!(m & 1024))
        m <<= 1, shift++;
    return sign | (uint32_t)(113 - shift) << 23 | (m & 1023) << 13;
}

/* Every half, against the bits of IEEE's conversion (NaN payloads too). */
START_TEST(f16_every_value)
{
    uint8_t *src = malloc(65536 * 2);
    float *out = malloc(65536 * sizeof *out);
    for (uint32_t h = 0; h < 65536; h++) {
        src[2 * h] = (uint8_t)h;
        src[2 * h + 1] = (uint8_t)(h >> 8);
    }
    ml_error e;
    ck_assert_int_eq(ml_gguf_dequantize_raw(ML_GGML_F16, src, 65536, out, &e), ML_OK);
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t want = f16_bits((uint16_t)h), got;
        memcpy(&got, &out[h], 4);
        TU_REQUIRE(got == want, "f16 %04x: %08x, want %08x", h, got, want);
    }
    ck_assert_int_eq(ml_gguf_dequantize_raw(ML_GGML_BF16, src, 65536, out, &e), ML_OK);
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t want = h << 16, got;
        memcpy(&got, &out[h], 4);
        TU_REQUIRE(got == want, "bf16 %04x", h);
    }
    free(src);
    free(out);
}
END_TEST

/* Blocks whose values are easy to state. */
START_TEST(blocks_by_hand)
{
    uint8_t blk[256];
    float y[256];
    ml_error e;

    /* Q4_0, d = 1: byte j holds j (elements 0-15) and 15 - j (16-31). */
    blk[0] = 0x00, blk[1] = 0x3c;
    for (int j = 0; j < 16; j++)
        blk[2 + j] = (uint8_t)(j | (15 - j) << 4);
    ck_assert_int_eq(ml_gguf_dequantize_raw(ML_GGML_Q4_0, blk, 32, y, &e), ML_OK);
    for (int j = 0; j < 16; j++) {
        ck_assert(y[j] == (float)(j - 8));
        ck_assert(y[j + 16] == (float)(7 - j));
    }
    /* Q4_1, d = 0.5, m = -2. */
    blk[0] = 0x00, blk[1] = 0x38, blk[2] = 0x00, blk[3] = 0xc0;
    for (int j = 0; j < 16; j++)
        blk[4 + j] = (uint8_t)(j | (15 - j) << 4);
    ck_assert_int_eq(ml_gguf_dequantize_raw(ML_GGML_Q4_1, blk, 32, y, &e), ML_OK);
    ck_assert(y[3] == -0.5f && y[16] == 5.5f);
    /* Q8_0, d = 0.25: -128..127 pass through. */
    blk[0] = 0x00, blk[1] = 0x34;
    for (int j = 0; j < 32; j++)
        blk[2 + j] = (uint8_t)(j * 8 - 128);
    ck_assert_int_eq(ml_gguf_dequantize_raw(ML_GGML_Q8_0, blk, 32, y, &e), ML_OK);
    for (int j = 0; j < 32; j++)
        ck_assert(y[j] == (float)(j * 8 - 128) * 0.25f);
    /* Q5_0, d = 1: qh has bit e set for odd e, so n = nibble + 16 there. */
    blk[0] = 0x00, blk[1] = 0x3c;
    blk[2] = blk[3] = blk[4] = blk[5] = 0xaa;
    for (int j = 0; j < 16; j++)
        blk[6 + j] = (uint8_t)(j | j << 4);
    ck_assert_int_eq(ml_gguf_dequantize_raw(ML_GGML_Q5_0, blk, 32, y, &e), ML_OK);
    ck_assert(y[0] == -16.0f && y[1] == 1.0f && y[16] == -16.0f && y[31] == 15.0f);
    /* IQ4_NL, d = 1: the level table in order. */
    blk[0] = 0x00, blk[1] = 0x3c;
    for (int j = 0; j < 16; j++)
        blk[2 + j] = (uint8_t)(j | j << 4);
    ck_assert_int_eq(ml_gguf_dequantize_raw(ML_GGML_IQ4_NL, blk, 32, y, &e), ML_OK);
    ck_assert(y[0] == -127.0f && y[8] == 1.0f && y[15] == 113.0f && y[31] == 113.0f);
    /* IQ4_XS, d = 1, every 6-bit scale 33 (so x1): nibble 15 is 113. */
    memset(blk, 0, 136);
    blk[1] = 0x3c;
    blk[2] = 0xaa, blk[3] = 0xaa; /* high bits 2 -> 32 */
    memset(blk + 4, 0x11, 4);     /* low nibbles 1 -> 33 */
    memset(blk + 8, 0xff, 128);
    ck_assert_int_eq(ml_gguf_dequantize_raw(ML_GGML_IQ4_XS, blk, 256, y, &e), ML_OK);
    for (int j = 0; j < 256; j++)
        ck_assert(y[j] == 113.0f);
    /* Q4_K, d = 1, dmin = 1, scales 1 and mins 2 for the first four
     * sub-blocks: quants 3 become 1 * 3 - 2 = 1. */
    memset(blk, 0, 144);
    blk[1] = 0x3c, blk[3] = 0x3c;
    memset(blk + 4, 1, 4);
    memset(blk + 8, 2, 4);
    memset(blk + 16, 0x33, 128);
    ck_assert_int_eq(ml_gguf_dequantize_raw(ML_GGML_Q4_K, blk, 256, y, &e), ML_OK);
    for (int j = 0; j < 128; j++)
        ck_assert(y[j] == 1.0f);
    ck_assert(y[128] == 0.0f); /* sub-blocks 4-7: scale 0, min 0 */
}
END_TEST

START_TEST(type_table)
{
    static const struct {
        uint32_t id;
        const char *name;
        uint32_t elems, bytes;
    } known[] = {
        {0, "F32", 1, 4},        {1, "F16", 1, 2},          {2, "Q4_0", 32, 18},
        {3, "Q4_1", 32, 20},     {6, "Q5_0", 32, 22},       {7, "Q5_1", 32, 24},
        {8, "Q8_0", 32, 34},     {9, "Q8_1", 32, 36},       {10, "Q2_K", 256, 84},
        {11, "Q3_K", 256, 110},  {12, "Q4_K", 256, 144},    {13, "Q5_K", 256, 176},
        {14, "Q6_K", 256, 210},  {15, "Q8_K", 256, 292},    {16, "IQ2_XXS", 256, 66},
        {17, "IQ2_XS", 256, 74}, {18, "IQ3_XXS", 256, 98},  {19, "IQ1_S", 256, 50},
        {20, "IQ4_NL", 32, 18},  {21, "IQ3_S", 256, 110},   {22, "IQ2_S", 256, 82},
        {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},
        {26, "I32", 1, 4},       {27, "I64", 1, 8},         {28, "F64", 1, 8},
        {29, "IQ1_M", 256, 56},  {30, "BF16", 1, 2},        {34, "TQ1_0", 256, 54},
        {35, "TQ2_0", 256, 66},  {39, "MXFP4", 32, 17},     {40, "NVFP4", 64, 36},
        {41, "Q1_0", 128, 18},   {42, "Q2_0", 64, 18},
    };
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) {
        uint32_t be = 0, bb = 0;
        ck_assert_str_eq(ml_gguf_type_name(known[k].id), known[k].name);
        ck_assert_int_eq(ml_gguf_type_size(known[k].id, &be, &bb), 1);
        ck_assert_uint_eq(be, known[k].elems);
        ck_assert_uint_eq(bb, known[k].bytes);
    }
    static const uint32_t removed[] = {4, 5, 31, 32, 33, 36, 37, 38};
    for (size_t k = 0; k < 8; k++) {
        ck_assert_ptr_nonnull(ml_gguf_type_name(removed[k]));
        ck_assert_int_eq(ml_gguf_type_size(removed[k], NULL, NULL), 0);
        ck_assert_int_eq(ml_gguf_type_supported(removed[k]), 0);
    }
    ck_assert_ptr_null(ml_gguf_type_name(43));
    ck_assert_ptr_null(ml_gguf_type_name(0xffffffffu));
    ck_assert_int_eq(ml_gguf_type_size(43, NULL, NULL), 0);
    int n_supported = 0;
    for (uint32_t t = 0; t < 64; t++) {
        if (!ml_gguf_type_supported(t))
            continue;
        n_supported++;
        int listed = 0;
        for (int k = 0; k < 15; k++)
            listed |= strcmp(ml_gguf_type_name(t), supported[k]) == 0;
        listed |= t == ML_GGML_MXFP4;
        ck_assert_msg(listed, "%s", ml_gguf_type_name(t));
    }
    ck_assert_int_eq(n_supported, 16); /* the fixture's 15 and MXFP4 */
    ck_assert_str_eq(ml_gguf_vtype_name(ML_GGUF_STRING), "string");
    ck_assert_str_eq(ml_gguf_vtype_name(ML_GGUF_F64), "f64");
    ck_assert_str_eq(ml_gguf_vtype_name(13), "?");
}
END_TEST

START_TEST(errors)
{
    uint8_t blk[144] = {0};
    float y[256];
    ml_error e;
    tu_err_reset(&e);
    TU_CHECK_ERR("IQ2_XXS raw", ml_gguf_dequantize_raw(ML_GGML_IQ2_XXS, blk, 256, y, &e), e,
                 ML_E_UNSUPPORTED, "", -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "IQ2_XXS (16)"));
    ck_assert_ptr_nonnull(strstr(e.msg, "Q4_K"));
    tu_err_reset(&e);
    TU_CHECK_ERR("type 99", ml_gguf_dequantize_raw(99, blk, 32, y, &e), e, ML_E_UNSUPPORTED, "",
                 -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "unknown (99)"));
    tu_err_reset(&e);
    TU_CHECK_ERR("partial block", ml_gguf_dequantize_raw(ML_GGML_Q4_K, blk, 255, y, &e), e,
                 ML_E_INVAL, "", -1);
    tu_err_reset(&e);
    TU_CHECK_ERR("NULL", ml_gguf_dequantize_raw(ML_GGML_F32, NULL, 1, y, &e), e, ML_E_INVAL, "",
                 -1);
    ck_assert_int_eq(ml_gguf_dequantize_raw(ML_GGML_Q4_K, NULL, 0, NULL, &e), ML_OK);

    ml_gguf *g = open_dequant();
    const ml_gguf_tensor *t = ml_gguf_find_tensor(g, "Q4_K");
    float *out = malloc((size_t)t->n_elements * sizeof *out);
    tu_err_reset(&e);
    TU_CHECK_ERR("past the last row", ml_gguf_dequantize(t, 3, 2, out, &e), e, ML_E_INVAL,
                 "Q4_K", t->file_offset);
    tu_err_reset(&e);
    TU_CHECK_ERR("first row past the end", ml_gguf_dequantize(t, 5, 0, out, &e), e, ML_E_INVAL,
                 "Q4_K", t->file_offset);
    tu_err_reset(&e);
    TU_CHECK_ERR("wrapping count", ml_gguf_dequantize(t, 1, UINT64_MAX, out, &e), e,
                 ML_E_INVAL, "Q4_K", t->file_offset);
    ck_assert_int_eq(ml_gguf_dequantize(t, 4, 0, out, &e), ML_OK);
    tu_err_reset(&e);
    TU_CHECK_ERR("NULL tensor", ml_gguf_dequantize(NULL, 0, 1, out, &e), e, ML_E_INVAL, "", -1);
    free(out);
    ml_gguf_close(g);
}
END_TEST

Suite *suite_gguf_dequant(void)
{
    Suite *s = suite_create("gguf_dequant");
    TCase *tc = tcase_create("dequant");
    tcase_add_loop_test(tc, matches_gguf_py, 0, 15);
    tcase_add_test(tc, mxfp4_matches_gguf_py);
    tcase_add_test(tc, f16_every_value);
    tcase_add_test(tc, blocks_by_hand);
    tcase_add_test(tc, type_table);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return s;
}
