/* check_mlb_types.c - wtype 3 models (mlb(5), "Type table"): the table's
 * place and size (ml_mlb_matrix_count, ml_mlb_types_offset), every code
 * laid out as the spec sizes it, a written model loading back with its
 * table and block arrays in place, block matrices dequantized by ggml's
 * dequantizers, and every refusal (a code that is no matrix type, a block
 * type that does not tile a matrix's rows, q8_mask with a table, a short
 * table, -128 only in Q8_0 entries) with the same status, field and offset
 * from the loader, the streaming verifier and the writer. */
#include "suites.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* dim and hidden_dim 256, so every block type fits every matrix. */
static void wide_header(ml_mlb_header *h)
{
    tu_base_header(h);
    tu_apply(h, NULL, "dim=256 n_layers=2 n_heads=4 n_kv_heads=2 hidden_dim=256 vocab=40 wtype=3");
}

/* The matrix codes in a fixed cycle, from `start`. */
static const uint8_t codes[] = {0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
#define N_CODES (sizeof codes / sizeof codes[0])

static uint8_t *cycle_table(const ml_mlb_header *h, const uint8_t *flags, size_t start,
                            uint32_t *n)
{
    *n = ml_mlb_matrix_count(h, flags);
    ck_assert_uint_gt(*n, 0);
    uint8_t *t = malloc(*n);
    for (uint32_t i = 0; i < *n; i++)
        t[i] = codes[(start + i) % N_CODES];
    return t;
}

static int is_matrix(const ml_tensor *t)
{
    return t->ndim == 2 && t->role != ML_R_LCONV && t->type != ML_TYPE_U8;
}

/* Writes a random wtype 3 model; fails the test on error. */
static void write_types(const ml_mlb_header *h, const uint8_t *flags, const uint8_t *types,
                        uint64_t seed, tu_mem *out)
{
    ml_error err;
    tu_mem_init(out);
    ml_status s = ml_mlb_write_random_types(h, flags, types, seed, tu_mem_sink, out, &err);
    ck_assert_msg(s == ML_OK, "write: %s", err.msg);
}

/* Loader and streaming verifier give the same verdict (status, field, offset). */
static void both_expect(const char *what, const uint8_t *p, size_t len, ml_status st,
                        const char *field, int64_t off)
{
    tu_buf b;
    ml_error err;
    ml_mlb *m = NULL;
    char w[160];
    tu_buf_copy(&b, p, len, 0);
    snprintf(w, sizeof w, "%s: loader", what);
    tu_err_reset(&err);
    ml_status s = ml_mlb_open_memory(b.p, b.len, &m, &err);
    TU_CHECK_ERR(w, s, err, st, field, off);
    ml_mlb_close(m);
    tu_buf_free(&b);
    static const size_t chunks[] = {0, 7, 1000};
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        tu_reader rd;
        ml_verify_report rep;
        memset(&rep, 0, sizeof rep);
        tu_reader_init(&rd, p, len, 3 + c, chunks[c]);
        tu_err_reset(&err);
        snprintf(w, sizeof w, "%s: stream (chunks %zu)", what, chunks[c]);
        s = ml_mlb_verify_stream(tu_mem_read, &rd, &rep, &err);
        TU_CHECK_ERR(w, s, err, st, field, off);
    }
}

START_TEST(test_matrix_count)
{
    ml_mlb_header h;
    uint8_t flags[4];
    tu_full_header(&h, flags); /* attention with wg, linear layers, post norms, biases */
    h.wtype = ML_WTYPE_Q8_0, h.q8_mask = 0;
    ml_mlb_layout it;
    ml_tensor t;
    uint32_t n = 0;
    ml_mlb_layout_begin(&it, &h, flags);
    while (ml_mlb_layout_next(&it, &t, NULL) == 1)
        n += t.type == ML_TYPE_Q8_0; /* lb and la too; lconv is F32 */
    ck_assert_uint_eq(ml_mlb_matrix_count(&h, flags), n);
    ck_assert_uint_eq(ml_mlb_types_offset(&h), 256 + 64); /* after 4 flag bytes, padded */
    wide_header(&h);
    ck_assert_uint_eq(ml_mlb_matrix_count(&h, NULL), 1 + 2 * 7 + 1);
    ck_assert_uint_eq(ml_mlb_types_offset(&h), 256);
    h.shared_classifier = 1;
    ck_assert_uint_eq(ml_mlb_matrix_count(&h, NULL), 1 + 2 * 7);
    h.dim = 0; /* invalid header: nothing */
    ck_assert_uint_eq(ml_mlb_matrix_count(&h, NULL), 0);
}
END_TEST

START_TEST(test_type_bits)
{
    ck_assert(ml_type_bits(ML_TYPE_Q4_K, 1) == 4.5);
    ck_assert(ml_type_bits(ML_TYPE_Q6_K, 1) == 6.5625);
    ck_assert(ml_type_bits(ML_TYPE_Q8_0, 1) == 8.5);
    ck_assert(ml_type_bits(ML_TYPE_Q8_0, 0) == 9);
    ck_assert(ml_type_bits(ML_TYPE_F16, 0) == 16);
    ck_assert(ml_type_bits(ML_TYPE_F32, 0) == 32);
    for (uint32_t c = 0; c < 256; c++)
        ck_assert_int_eq(ml_type_is_matrix(c), c < 17 && c != 3);
}
END_TEST

/* Every code, at several places in the table; the layout sizes each array
 * as the spec says, and the model loads back with the table and the
 * arrays in place. */
START_TEST(test_roundtrip_every_code)
{
    ml_mlb_header h;
    wide_header(&h);
    h.scale_f16 = (uint32_t)(_i & 1);
    uint32_t n;
    uint8_t *types = cycle_table(&h, NULL, (size_t)_i, &n);
    tu_mem out;
    write_types(&h, NULL, types, 7 + (uint64_t)_i, &out);
    ml_error err;
    uint64_t end;
    size_t nt;
    ck_assert_int_eq(ml_mlb_layout_size_types(&h, NULL, types, &end, &nt, &err), ML_OK);
    ck_assert_uint_eq(out.len, tu_align64(end));
    ck_assert_mem_eq(out.p + 256, types, n); /* the table is the first array */
    ml_mlb *m = NULL;
    tu_buf b;
    tu_buf_copy(&b, out.p, out.len, 0);
    ck_assert_msg(ml_mlb_open_memory(b.p, b.len, &m, &err) == ML_OK, "%s", err.msg);
    ck_assert_uint_eq(ml_mlb_n_tensors(m), nt);
    ck_assert_mem_eq(ml_mlb_types(m), types, n);
    const ml_tensor *tab = ml_mlb_get(m, ML_R_MAT_TYPES, -1);
    ck_assert_ptr_nonnull(tab);
    ck_assert_str_eq(tab->name, "mat_types");
    ck_assert_uint_eq(tab->offset, 256);
    ck_assert_uint_eq(tab->nbytes, n);
    uint32_t k = 0;
    for (size_t i = 0; i < ml_mlb_n_tensors(m); i++) {
        const ml_tensor *t = ml_mlb_tensor(m, i);
        if (!is_matrix(t))
            continue;
        ck_assert_int_eq(t->type, types[k]);
        k++;
        uint32_t e, bb, ggml;
        uint64_t rb = ml_tensor_row_bytes(t);
        if (!ml_type_block(t->type, &e, &bb, &ggml)) {
            ck_assert_uint_eq(t->nbytes, rb * t->rows);
            continue;
        }
        /* A block matrix: one array, rows consecutive, no scales. */
        ck_assert_uint_eq(rb, (uint64_t)t->cols / e * bb);
        ck_assert_uint_eq(t->nbytes, rb * t->rows);
        ck_assert_uint_eq(t->scale_offset, 0);
        ck_assert_uint_eq(t->scale_nbytes, 0);
        ck_assert_ptr_null(t->scales);
        ck_assert_ptr_null(t->scales_f16);
        ck_assert_ptr_eq(t->data, (const uint8_t *)b.p + t->offset);
        /* Row 1 alone equals ggml's dequantizer on its bytes. */
        float *got = malloc(t->cols * sizeof *got), *want = malloc(t->cols * sizeof *want);
        ml_status ds = ml_tensor_dequantize(t, 1, 1, got, &err);
        if (!ml_gguf_type_supported(ggml)) { /* MXFP4 until its dequantizer lands */
            TU_CHECK_ERR(t->name, ds, err, ML_E_UNSUPPORTED, t->name, (int64_t)t->offset);
            ml_tensor_dequantize_rows(t, 1, 1, got);
            ck_assert(isnan(got[0]));
        } else {
            ck_assert_msg(ds == ML_OK, "%s: %s", t->name, err.msg);
            ck_assert_int_eq(ml_gguf_dequantize_raw(ggml, (const uint8_t *)t->data + rb,
                                                    t->cols, want, NULL),
                             ML_OK);
            ck_assert_mem_eq(got, want, t->cols * sizeof *got);
            for (uint32_t c = 0; c < t->cols; c++) /* bytes below 0x40: finite */
                TU_REQUIRE(isfinite(got[c]), "%s[%u] is not finite", t->name, c);
        }
        free(got);
        free(want);
    }
    ck_assert_uint_eq(k, n);
    ml_mlb_close(m);
    tu_buf_free(&b);
    both_expect("valid", out.p, out.len, ML_OK, "", 0);
    free(types);
    tu_mem_free(&out);
}
END_TEST

/* With layer flags the table follows them, and linear layers' lb and la
 * are in it; blocks of 32 only (dim 64). */
START_TEST(test_full_header_table)
{
    ml_mlb_header h;
    uint8_t flags[4];
    tu_full_header(&h, flags);
    h.wtype = ML_WTYPE_TABLE, h.q8_mask = 0;
    static const uint8_t small[] = {0, 1, 2, 4, 5, 6, 12, 14, 15, 16};
    uint32_t n = ml_mlb_matrix_count(&h, flags);
    uint8_t *types = malloc(n);
    for (uint32_t i = 0; i < n; i++)
        types[i] = small[i % sizeof small];
    tu_mem out;
    write_types(&h, flags, types, 3, &out);
    ck_assert_mem_eq(out.p + 256, flags, 4);
    ck_assert_mem_eq(out.p + 320, types, n);
    both_expect("full", out.p, out.len, ML_OK, "", 0);
    free(types);
    tu_mem_free(&out);
}
END_TEST

/* The table's byte of matrix k, in the written file. */
static void set_entry(tu_mem *out, const ml_mlb_header *h, uint32_t k, uint8_t v)
{
    out->p[ml_mlb_types_offset(h) + k] = v;
}

/* Name of matrix k by the layout (codes of a valid table). */
static void matrix_name(const ml_mlb_header *h, const uint8_t *types, uint32_t k, char *name)
{
    ml_mlb_layout it;
    ml_tensor t;
    uint32_t i = 0;
    ml_mlb_layout_begin_types(&it, h, NULL, types);
    while (ml_mlb_layout_next(&it, &t, NULL) == 1)
        if (is_matrix(&t) && i++ == k) {
            strcpy(name, t.name);
            return;
        }
    ck_abort_msg("no matrix %u", k);
}

START_TEST(test_bad_codes)
{
    ml_mlb_header h;
    wide_header(&h);
    uint32_t n;
    uint8_t *types = cycle_table(&h, NULL, 0, &n);
    tu_mem out;
    write_types(&h, NULL, types, 5, &out);
    static const uint8_t bad[] = {3, 17, 18, 0x80, 255};
    static const uint32_t at[] = {0, 5, 15};
    for (size_t a = 0; a < sizeof at / sizeof at[0]; a++) {
        char name[32], what[64];
        matrix_name(&h, types, at[a], name);
        for (size_t v = 0; v < sizeof bad; v++) {
            set_entry(&out, &h, at[a], bad[v]);
            snprintf(what, sizeof what, "entry %u = %u", at[a], bad[v]);
            both_expect(what, out.p, out.len, ML_E_FORMAT, name, 256 + at[a]);
            /* The writer refuses the same table the same way. */
            uint8_t *t2 = malloc(n);
            memcpy(t2, types, n);
            t2[at[a]] = bad[v];
            tu_mem o2;
            tu_mem_init(&o2);
            ml_mlb_writer *w = NULL;
            ml_error err;
            tu_err_reset(&err);
            ml_status s = ml_mlb_writer_new_types(&h, NULL, t2, tu_mem_sink, &o2, &w, &err);
            TU_CHECK_ERR(what, s, err, ML_E_FORMAT, name, 256 + at[a]);
            ck_assert_ptr_null(w);
            ck_assert_uint_eq(o2.calls, 0);
            ck_assert_ptr_nonnull(strstr(err.msg, "type table entry"));
            free(t2);
            tu_mem_free(&o2);
        }
        set_entry(&out, &h, at[a], types[at[a]]);
    }
    both_expect("restored", out.p, out.len, ML_OK, "", 0);
    free(types);
    tu_mem_free(&out);
}
END_TEST

/* A block type whose blocks do not tile a matrix's rows: ML_E_SHAPE
 * naming the matrix, at its table entry. */
START_TEST(test_block_shape)
{
    ml_mlb_header h;
    tu_base_header(&h); /* dim 64: no room for 256-element blocks */
    h.wtype = ML_WTYPE_TABLE;
    uint32_t n = ml_mlb_matrix_count(&h, NULL);
    uint8_t *types = malloc(n);
    memset(types, ML_TYPE_Q4_1, n);
    tu_mem out;
    write_types(&h, NULL, types, 9, &out);
    static const uint8_t k256[] = {7, 8, 9, 10, 11, 13};
    for (size_t v = 0; v < sizeof k256; v++) {
        char name[32], what[64];
        uint32_t k = (uint32_t)(v * 3 % n);
        matrix_name(&h, types, k, name);
        set_entry(&out, &h, k, k256[v]);
        snprintf(what, sizeof what, "entry %u = %s", k, ml_type_name((ml_type)k256[v]));
        both_expect(what, out.p, out.len, ML_E_SHAPE, name, 256 + k);
        set_entry(&out, &h, k, ML_TYPE_Q4_1);
        types[k] = k256[v];
        ml_error err;
        tu_err_reset(&err);
        ml_status s = ml_mlb_layout_size_types(&h, NULL, types, NULL, NULL, &err);
        TU_CHECK_ERR(what, s, err, ML_E_SHAPE, name, 256 + k);
        types[k] = ML_TYPE_Q4_1;
    }
    free(types);
    tu_mem_free(&out);
}
END_TEST

START_TEST(test_q8_mask_and_missing_table)
{
    ml_mlb_header h;
    wide_header(&h);
    ml_error err;
    /* The old entry points need the table. */
    tu_err_reset(&err);
    TU_CHECK_ERR("layout_size", ml_mlb_layout_size(&h, NULL, NULL, NULL, &err), err, ML_E_INVAL,
                 "wtype", 44);
    tu_mem out;
    tu_mem_init(&out);
    ml_mlb_writer *w = NULL;
    tu_err_reset(&err);
    TU_CHECK_ERR("writer_new", ml_mlb_writer_new(&h, NULL, tu_mem_sink, &out, &w, &err), err,
                 ML_E_INVAL, "wtype", 44);
    tu_err_reset(&err);
    TU_CHECK_ERR("writer_new_types NULL",
                 ml_mlb_writer_new_types(&h, NULL, NULL, tu_mem_sink, &out, &w, &err), err,
                 ML_E_INVAL, "mat_types", -1);
    tu_err_reset(&err);
    TU_CHECK_ERR("write_random", ml_mlb_write_random(&h, NULL, 1, tu_mem_sink, &out, &err), err,
                 ML_E_INVAL, "wtype", 44);
    ck_assert_uint_eq(out.calls, 0);
    /* The iterator without a table cannot size tok_emb. */
    ml_mlb_layout it;
    ml_tensor t;
    ml_mlb_layout_begin(&it, &h, NULL);
    ck_assert_int_eq(ml_mlb_layout_next(&it, &t, NULL), 1); /* the table itself */
    ck_assert_int_eq(t.role, ML_R_MAT_TYPES);
    tu_err_reset(&err);
    ck_assert_int_eq(ml_mlb_layout_next(&it, &t, &err), -1);
    ck_assert_int_eq(err.code, ML_E_FORMAT);
    ck_assert_str_eq(err.field, "tok_emb");
    /* q8_mask with a table: the file is refused at the header. */
    uint32_t n;
    uint8_t *types = cycle_table(&h, NULL, 1, &n);
    write_types(&h, NULL, types, 2, &out);
    out.p[72] = 1;
    both_expect("q8_mask", out.p, out.len, ML_E_FORMAT, "q8_mask", 72);
    out.p[72] = 0;
    /* A file that ends inside the table: the loader names the table's
     * start, the stream (as for every array) where the input ended. */
    tu_buf b;
    ml_mlb *m = NULL;
    tu_buf_copy(&b, out.p, 256 + n - 1, 0);
    tu_err_reset(&err);
    TU_CHECK_ERR("short table: loader", ml_mlb_open_memory(b.p, b.len, &m, &err), err,
                 ML_E_FORMAT, "mat_types", 256);
    tu_buf_free(&b);
    tu_reader rd;
    ml_verify_report rep;
    memset(&rep, 0, sizeof rep);
    tu_reader_init(&rd, out.p, 256 + n - 1, 1, 0);
    tu_err_reset(&err);
    TU_CHECK_ERR("short table: stream", ml_mlb_verify_stream(tu_mem_read, &rd, &rep, &err), err,
                 ML_E_FORMAT, "mat_types", 256 + n - 1);
    free(types);
    tu_mem_free(&out);
}
END_TEST

/* -128 is refused in Q8_0 entries' quants only: a block matrix may hold
 * the byte 0x80. */
START_TEST(test_minus128_only_q8)
{
    ml_mlb_header h;
    wide_header(&h);
    uint32_t n = ml_mlb_matrix_count(&h, NULL);
    uint8_t *types = malloc(n);
    memset(types, ML_TYPE_Q4_K, n);
    types[1] = ML_TYPE_Q8_0; /* blk.0.wq */
    tu_mem out;
    write_types(&h, NULL, types, 4, &out);
    tu_buf b;
    ml_mlb *m = NULL;
    ml_error err;
    tu_buf_copy(&b, out.p, out.len, 0);
    ck_assert_int_eq(ml_mlb_open_memory(b.p, b.len, &m, &err), ML_OK);
    const ml_tensor *emb = ml_mlb_find(m, "tok_emb"), *wq = ml_mlb_find(m, "blk.0.wq");
    ck_assert_int_eq(emb->type, ML_TYPE_Q4_K);
    ck_assert_int_eq(wq->type, ML_TYPE_Q8_0);
    uint64_t eo = emb->offset + 5, qo = wq->offset + 300;
    ml_mlb_close(m);
    tu_buf_free(&b);
    out.p[eo] = 0x80;
    both_expect("0x80 in Q4_K", out.p, out.len, ML_OK, "", 0);
    out.p[qo] = 0x80;
    both_expect("-128 in Q8_0", out.p, out.len, ML_E_FORMAT, "blk.0.wq", (int64_t)qo);
    free(types);
    tu_mem_free(&out);
}
END_TEST

/* Truncation anywhere: loader and stream agree on the status. */
START_TEST(test_truncation)
{
    ml_mlb_header h;
    wide_header(&h);
    uint32_t n;
    uint8_t *types = cycle_table(&h, NULL, 3, &n);
    tu_mem out;
    write_types(&h, NULL, types, 8, &out);
    for (size_t len = 257; len < out.len; len += 997) {
        tu_buf b;
        ml_mlb *m = NULL;
        ml_error e1, e2;
        tu_buf_copy(&b, out.p, len, 0);
        ml_status s1 = ml_mlb_open_memory(b.p, b.len, &m, &e1);
        tu_reader rd;
        ml_verify_report rep;
        memset(&rep, 0, sizeof rep);
        tu_reader_init(&rd, out.p, len, 1, 0);
        ml_status s2 = ml_mlb_verify_stream(tu_mem_read, &rd, &rep, &e2);
        ck_assert_int_eq(s1, ML_E_FORMAT);
        ck_assert_int_eq(s2, ML_E_FORMAT);
        ck_assert_str_eq(e1.field, e2.field); /* the array that is cut */
        ml_mlb_close(m);
        tu_buf_free(&b);
    }
    free(types);
    tu_mem_free(&out);
}
END_TEST

Suite *suite_mlb_types(void)
{
    Suite *s = suite_create("mlb_types");
    TCase *tc = tcase_create("type_table");
    tcase_add_test(tc, test_matrix_count);
    tcase_add_test(tc, test_type_bits);
    tcase_add_loop_test(tc, test_roundtrip_every_code, 0, (int)N_CODES);
    tcase_add_test(tc, test_full_header_table);
    tcase_add_test(tc, test_bad_codes);
    tcase_add_test(tc, test_block_shape);
    tcase_add_test(tc, test_q8_mask_and_missing_table);
    tcase_add_test(tc, test_minus128_only_q8);
    tcase_add_test(tc, test_truncation);
    suite_add_tcase(s, tc);
    return s;
}
