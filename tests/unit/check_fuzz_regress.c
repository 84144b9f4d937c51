/* check_fuzz_regress.c - library bugs the fuzzers (fuzz/) found, one test
 * each, with the input that showed them rebuilt here in C.  The inputs
 * themselves are kept in fuzz/regress/<target>/ and replayed by
 * `make fuzz-replay`; these tests pin the exact behaviour. */
#include "suites.h"
#include "testutil.h"

#include "base/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* fuzz/regress/mlb/slow-n-layers: a 256-byte header claiming 65536 layers
 * with every per-layer array.  The loader used to lay out the whole body
 * (about two million arrays) before comparing it with the file size; it
 * now stops at the first array that does not fit, so the work is bounded
 * by the file.  The error is unchanged: tok_emb, at offset 256. */
START_TEST(test_mlb_short_file_many_layers)
{
    ml_mlb_header h;
    tu_base_header(&h);
    tu_apply(&h, NULL, "n_layers=65536 qkv_bias=1 qk_norm=1 post_norms=1 attn_gate=1");
    ck_assert_int_eq(ml_mlb_header_validate(&h, NULL, NULL, NULL), ML_OK);
    uint8_t *buf = aligned_alloc(ML_MLB_ALIGN, ML_MLB_HEADER_SIZE);
    ck_assert_ptr_nonnull(buf);
    ml_mlb_header_encode(&h, buf);
    clock_t t0 = clock();
    for (int i = 0; i < 40; i++) {
        ml_mlb *m = NULL;
        ml_error err;
        tu_err_reset(&err);
        TU_CHECK_ERR("short file", ml_mlb_open_memory(buf, ML_MLB_HEADER_SIZE, &m, &err), err,
                     ML_E_FORMAT, "tok_emb", 256);
        ck_assert_ptr_null(m);
    }
    /* Forty opens took seconds before (0.2-0.3 s each, more under
     * sanitizers); now microseconds.  One second of CPU is a wide margin. */
    double cpu = (double)(clock() - t0) / CLOCKS_PER_SEC;
    ck_assert_msg(cpu < 1.0, "40 opens of a 256-byte file took %.2f s of CPU", cpu);
    free(buf);
}
END_TEST

/* A byte-level tokenizer with NFC: the 256 bytes as tokens (id = byte),
 * then the added tokens "\xe2" (256), "\x96\x81" (257) and "<s>" (258). */
static ml_mlt *tok_with_partial_added(tu_mem *file)
{
    static uint8_t bytes[256];
    ml_mlt_token toks[259];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (uint8_t)i;
        toks[i] = (ml_mlt_token){&bytes[i], 1, ML_MLT_NORMAL};
    }
    toks[256] = (ml_mlt_token){(const uint8_t *)"\xe2", 1, ML_MLT_ADDED};
    toks[257] = (ml_mlt_token){(const uint8_t *)"\x96\x81", 2, ML_MLT_ADDED};
    toks[258] = (ml_mlt_token){(const uint8_t *)"<s>", 3, ML_MLT_ADDED};
    ml_mlt_header h = {.kind = ML_MLT_KIND_BYTE_BPE, .bos = ML_TOKEN_NONE, .eos = ML_TOKEN_NONE,
                       .flags = ML_MLT_NFC};
    tu_mem_init(file);
    ml_error err;
    ck_assert_int_eq(ml_mlt_write(&h, toks, 259, NULL, 0, tu_mem_sink, file, &err), ML_OK);
    ml_mlt *t = NULL;
    ck_assert_int_eq(ml_mlt_open_memory(file->p, file->len, &t, &err), ML_OK);
    return t;
}

/* fuzz/regress/mlt/added-token-splits-utf8: an added token whose piece is
 * the first byte of a character ("\xe2") matched inside "\u2581" and left
 * "\x96\x81..." as the next segment; NFC refused it and ml_tok_encode,
 * which never fails on text, returned ML_E_INVAL.  Added tokens now match
 * only from a character start to a character end. */
START_TEST(test_tok_added_token_inside_character)
{
    tu_mem file;
    ml_mlt *t = tok_with_partial_added(&file);
    ml_tok *k = NULL;
    ml_error err;
    ck_assert_int_eq(ml_tok_new(t, &k, &err), ML_OK);
    /* "a\u2581b<s>c": no merges, so each byte is its own token, except the
     * whole added token "<s>". */
    const char text[] = "a\xe2\x96\x81" "b<s>c";
    static const uint32_t want[] = {'a', 0xe2, 0x96, 0x81, 'b', 258, 'c'};
    ml_ids ids = {0};
    tu_err_reset(&err);
    TU_CHECK_ERR("encode", ml_tok_encode(k, text, sizeof text - 1, ML_TOK_BOS_NO, &ids, &err),
                 err, ML_OK, "", 0);
    ck_assert_uint_eq(ids.n, sizeof want / sizeof want[0]);
    ck_assert_mem_eq(ids.v, want, sizeof want);
    ml_ids_free(&ids);
    /* The fuzzer's case: "\u20ac" then "e\u0301", which NFC composes.
     * The "\xe2" of the euro sign used to match, and NFC then refused
     * "\x82\xac" e "\u0301" with ML_E_INVAL. */
    const char euro[] = "\xe2\x82\xac" "e\xcc\x81";
    static const uint32_t want_euro[] = {0xe2, 0x82, 0xac, 0xc3, 0xa9};
    tu_err_reset(&err);
    TU_CHECK_ERR("encode", ml_tok_encode(k, euro, sizeof euro - 1, ML_TOK_BOS_NO, &ids, &err),
                 err, ML_OK, "", 0);
    ck_assert_uint_eq(ids.n, 5);
    ck_assert_mem_eq(ids.v, want_euro, sizeof want_euro);
    ml_ids_free(&ids);
    ml_tok_free(k);
    ml_mlt_close(t);
    tu_mem_free(&file);
}
END_TEST

/* fuzz/regress/mlt/word-without-ids: a byte-level word none of whose bytes
 * has a piece or a byte token gives no ids; caching that empty result did
 * pointer arithmetic and memcpy on the still-NULL id array (undefined
 * behaviour, reported by UBSan under `make sanitize`).  Encoding it, twice
 * (the second time from the cache), gives no ids and no error. */
START_TEST(test_tok_word_without_ids)
{
    ml_mlt_token toks[1] = {{(const uint8_t *)"a", 1, ML_MLT_NORMAL}};
    ml_mlt_header h = {.kind = ML_MLT_KIND_BYTE_BPE, .bos = ML_TOKEN_NONE, .eos = ML_TOKEN_NONE};
    tu_mem file;
    tu_mem_init(&file);
    ml_error err;
    ck_assert_int_eq(ml_mlt_write(&h, toks, 1, NULL, 0, tu_mem_sink, &file, &err), ML_OK);
    ml_mlt *t = NULL;
    ck_assert_int_eq(ml_mlt_open_memory(file.p, file.len, &t, &err), ML_OK);
    ml_tok *k = NULL;
    ck_assert_int_eq(ml_tok_new(t, &k, &err), ML_OK);
    for (int round = 0; round < 2; round++) {
        ml_ids ids = {0};
        tu_err_reset(&err);
        TU_CHECK_ERR("encode", ml_tok_encode(k, "b", 1, ML_TOK_BOS_NO, &ids, &err), err, ML_OK,
                     "", 0);
        ck_assert_uint_eq(ids.n, 0);
        ml_ids_free(&ids);
    }
    ml_ids ids = {0};
    ck_assert_int_eq(ml_tok_encode(k, "b a", 3, ML_TOK_BOS_NO, &ids, &err), ML_OK);
    ck_assert_uint_eq(ids.n, 1);
    ck_assert_uint_eq(ids.v[0], 0);
    ml_ids_free(&ids);
    ml_tok_free(k);
    ml_mlt_close(t);
    tu_mem_free(&file);
}
END_TEST

/* fuzz/regress/convert/escape-in-message.gguf: strings from a file reach
 * error messages; control bytes (an ANSI escape here) are written as
 * \xNN so they cannot drive the user's terminal. */
START_TEST(test_error_escapes_control_bytes)
{
    FILE *f = fopen("fuzz/regress/convert/escape-in-message.gguf", "rb");
    ck_assert_msg(f != NULL, "run from the repository root");
    static unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    ml_gguf *g;
    ml_error err;
    ck_assert(ml_gguf_open_memory(buf, n, &g, &err) == ML_OK);
    ml_convert_opts o;
    ml_convert_opts_init(&o);
    ml_convert_plan *p = NULL;
    ck_assert(ml_convert_plan_new(g, &o, &p, &err) != ML_OK);
    for (const char *c = err.msg; *c; c++)
        ck_assert_msg((unsigned char)*c >= 0x20 && *c != 0x7f, "control byte in \"%s\"", err.msg);
    ck_assert_msg(strstr(err.msg, "\\x1b[31m") != NULL, "no escaped ESC in \"%s\"", err.msg);
    ml_gguf_close(g);
    /* The field is escaped too. */
    ml__err(&err, ML_E_FORMAT, "a\nb", 3, "x\033y");
    ck_assert_str_eq(err.field, "a\\x0ab");
    ck_assert_str_eq(err.msg, "a\\x0ab (offset 3): x\\x1by");
}
END_TEST

Suite *suite_fuzz_regress(void)
{
    Suite *s = suite_create("fuzz_regress");
    TCase *tc = tcase_create("regress");
    tcase_add_test(tc, test_mlb_short_file_many_layers);
    tcase_add_test(tc, test_tok_added_token_inside_character);
    tcase_add_test(tc, test_tok_word_without_ids);
    tcase_add_test(tc, test_error_escapes_control_bytes);
    suite_add_tcase(s, tc);
    return s;
}
