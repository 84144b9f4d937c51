/* check_type_fixtures.c - ml_gguf_dequantize on real llama-quantize output
 * in every block type .mlb will keep (issue 38).  tests/fixtures/types
 * (tools/make-type-fixtures.py) holds tiny models quantized to Q5_0, Q5_1,
 * Q5_K_M, Q3_K_M, Q2_K, IQ4_NL, IQ4_XS, MXFP4, ..., and dequant-crc.txt the
 * CRC-32 of gguf-py's dequantization of every tensor of those files (and of
 * the llama2 Q4_K_M and Q6_K files of tests/fixtures/models), as
 * little-endian float32.  Every tensor whose type ml_gguf_type_supported
 * takes must match bit for bit; the others (MXFP4 for now) are counted and
 * skipped, so their tensors are checked as soon as support lands. */
#include "suites.h"
#include "testutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define CRC_LIST "tests/fixtures/types/dequant-crc.txt"

/* zlib's CRC-32 of n floats as little-endian bytes (whatever the host). */
static uint32_t crc_f32le(const float *v, size_t n)
{
    uLong c = crc32(0L, Z_NULL, 0);
    unsigned char buf[4096];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &v[i], 4);
        buf[k++] = (unsigned char)b;
        buf[k++] = (unsigned char)(b >> 8);
        buf[k++] = (unsigned char)(b >> 16);
        buf[k++] = (unsigned char)(b >> 24);
        if (k == sizeof buf) {
            c = crc32(c, buf, (uInt)k);
            k = 0;
        }
    }
    return (uint32_t)crc32(c, buf, (uInt)k);
}

typedef struct tally {
    unsigned files, lines, checked, skipped, bad;
    unsigned checked_by_type[ML_GGML_TYPE_COUNT];
    char first_bad[1024]; /* file (511), tensor (63) and the numbers */
} tally;

/* Counts a mismatch; the first is kept for the message. */
static void note_bad(tally *t, const char *file, const char *tensor, uint32_t got, uint32_t want)
{
    if (t->bad++ == 0)
        snprintf(t->first_bad, sizeof t->first_bad, "%s: %s: CRC-32 %08lx, gguf-py's %08lx", file,
                 tensor, (unsigned long)got, (unsigned long)want);
}

/* Checks one tensor of g against a line of the list. */
static void check_tensor(tally *t, const ml_gguf *g, const char *file, const char *tensor,
                         const char *type, unsigned long long n, unsigned long crc)
{
    const ml_gguf_tensor *x = ml_gguf_find_tensor(g, tensor);
    ck_assert_msg(x != NULL, "%s: no tensor %s", file, tensor);
    ck_assert_msg(strcmp(x->type_name, type) == 0, "%s: %s is %s, the list says %s", file,
                  tensor, x->type_name, type);
    ck_assert_msg(x->n_elements == n, "%s: %s has %llu elements, the list says %llu", file, tensor,
                  (unsigned long long)x->n_elements, n);
    if (!ml_gguf_type_supported(x->type)) {
        t->skipped++;
        return;
    }
    float *out = malloc((size_t)n * sizeof *out);
    ck_assert_ptr_nonnull(out);
    ml_error e;
    ml_status s = ml_gguf_dequantize(x, 0, x->rows, out, &e);
    ck_assert_msg(s == ML_OK, "%s: %s: %s", file, tensor, e.msg);
    uint32_t got = crc_f32le(out, (size_t)n);
    free(out);
    if (got != (uint32_t)crc)
        note_bad(t, file, tensor, got, (uint32_t)crc);
    t->checked++;
    t->checked_by_type[x->type]++;
}

/* Reads the list; per file, every tensor must be listed exactly once. */
static void run_list(tally *t)
{
    FILE *f = fopen(CRC_LIST, "r");
    ck_assert_msg(f != NULL, "cannot open %s", CRC_LIST);
    char line[1024], cur[512] = "";
    ml_gguf *g = NULL;
    size_t listed = 0;
    memset(t, 0, sizeof *t);
    for (;;) {
        char file[512], tensor[ML_GGUF_NAME_MAX + 1], type[32];
        unsigned long long n;
        unsigned long crc;
        int eof = fgets(line, sizeof line, f) == NULL;
        if (!eof && (line[0] == '#' || line[0] == '\n'))
            continue;
        if (!eof) {
            ck_assert_msg(sscanf(line, "%511s %63s %31s %llu %lx", file, tensor, type, &n, &crc) == 5,
                          "%s: bad line: %s", CRC_LIST, line);
            t->lines++;
        }
        if (g && (eof || strcmp(file, cur) != 0)) {
            ck_assert_msg(listed == ml_gguf_n_tensors(g), "%s: %zu tensors, %zu listed", cur,
                          ml_gguf_n_tensors(g), listed);
            ml_gguf_close(g);
            g = NULL;
        }
        if (eof)
            break;
        if (!g) {
            ml_error e;
            ml_status s = ml_gguf_open(file, &g, &e);
            ck_assert_msg(s == ML_OK, "%s: %s", file, e.msg);
            snprintf(cur, sizeof cur, "%s", file);
            listed = 0;
            t->files++;
        }
        check_tensor(t, g, file, tensor, type, n, crc);
        listed++;
    }
    fclose(f);
}

START_TEST(dequant_matches_gguf_py)
{
    tally t;
    run_list(&t);
    ck_assert_msg(t.bad == 0, "%u of %u tensors differ from gguf-py; first: %s", t.bad, t.checked,
                  t.first_bad);
    /* The fixture cannot shrink unnoticed: 16 files, every block type made. */
    ck_assert_uint_ge(t.files, 16);
    ck_assert_uint_eq(t.lines, t.checked + t.skipped);
    static const uint32_t made[] = {ML_GGML_F32,  ML_GGML_Q4_0, ML_GGML_Q5_0, ML_GGML_Q5_1,
                                    ML_GGML_Q8_0, ML_GGML_Q2_K, ML_GGML_Q3_K, ML_GGML_Q4_K,
                                    ML_GGML_Q5_K, ML_GGML_Q6_K, ML_GGML_IQ4_NL, ML_GGML_IQ4_XS,
                                    ML_GGML_MXFP4};
    for (size_t k = 0; k < sizeof made / sizeof *made; k++)
        if (ml_gguf_type_supported(made[k]))
            ck_assert_msg(t.checked_by_type[made[k]] > 0, "no %s tensor checked",
                          ml_gguf_type_name(made[k]));
}
END_TEST

/* The check itself: a CRC-32 of the same values reordered differs. */
START_TEST(crc_sees_order)
{
    float a[2] = {1.0f, 2.0f}, b[2] = {2.0f, 1.0f};
    ck_assert_uint_ne(crc_f32le(a, 2), crc_f32le(b, 2));
    /* zlib's CRC-32 of the bytes 00 00 80 3f (1.0f little-endian). */
    const unsigned char one[4] = {0x00, 0x00, 0x80, 0x3f};
    ck_assert_uint_eq(crc_f32le(a, 1), (uint32_t)crc32(0L, one, 4));
}
END_TEST

Suite *suite_type_fixtures(void)
{
    Suite *s = suite_create("type_fixtures");
    TCase *tc = tcase_create("type_fixtures");
    tcase_add_test(tc, dequant_matches_gguf_py);
    tcase_add_test(tc, crc_sees_order);
    suite_add_tcase(s, tc);
    return s;
}
