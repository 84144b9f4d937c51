/* check_requant.c - requantizing an .mlb (lib/convert/requant.c): option errors
 * with their statuses, the methods chosen per matrix, exact round trips,
 * thread-independent bytes, importances changing Q4_0 blocks, and the
 * error measure (ml_quant_error_add) against a direct computation. */
#include "suites.h"
#include "testutil.h"

#include "mlcore.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIX "tests/fixtures/runtime/"

static ml_mlb *open_fix(const char *name)
{
    char path[256];
    ml_error err;
    ml_mlb *m;
    snprintf(path, sizeof path, FIX "%s.mlb", name);
    ck_assert_msg(ml_mlb_open(path, &m, &err) == ML_OK, "%s: %s", path, err.msg);
    return m;
}

static ml_status requant(const ml_mlb *src, const ml_requant_opts *o, tu_mem *out, ml_error *err)
{
    tu_mem_init(out);
    return ml_requant_write(src, o, tu_mem_sink, out, err);
}

/* GGUF -> .mlb in memory with opts o (NULL: defaults). */
static void convert_mem(const char *path, const ml_convert_opts *o, tu_mem *out)
{
    ml_gguf *g;
    ml_convert_plan *p;
    ml_error err;
    ck_assert_msg(ml_gguf_open(path, &g, &err) == ML_OK, "%s: %s", path, err.msg);
    ck_assert_msg(ml_convert_plan_new(g, o, &p, &err) == ML_OK, "%s: %s", path, err.msg);
    tu_mem_init(out);
    ck_assert_msg(ml_convert_write(p, tu_mem_sink, out, NULL, &err) == ML_OK, "%s", err.msg);
    ml_convert_plan_free(p);
    ml_gguf_close(g);
}

/* A mix from a Q8_0 .mlb is the converter's mix from the same Q8_0 GGUF
 * (the values are the same; llama2's rows need no moves), for any thread
 * count; a Q4_0 source needs allow_requantize; a mix with a wtype is
 * refused.  Every mix, llama2 (dim 256: K-quants). */
START_TEST(test_mix)
{
    const char *gg = "tests/fixtures/models/llama2/llama2-q8_0.gguf";
    tu_mem q8mem, want, got;
    convert_mem(gg, NULL, &q8mem);
    ml_mlb *q8;
    ml_error err;
    ck_assert(ml_mlb_open_memory(q8mem.p, q8mem.len, &q8, &err) == ML_OK);
    ck_assert_uint_eq(ml_mlb_get_header(q8)->wtype, ML_WTYPE_Q8_0);
    for (int mix = ML_MIX_Q4_K_M; mix <= ML_MIX_IQ4_XS; mix++) {
        ml_convert_opts co;
        ml_convert_opts_init(&co);
        co.mix = (ml_quant_mix)mix;
        convert_mem(gg, &co, &want);
        ml_requant_opts o;
        ml_requant_opts_init(&o);
        o.mix = (ml_quant_mix)mix;
        o.threads = 1 + (unsigned)(mix % 3);
        uint8_t *types;
        ck_assert(ml_requant_types(q8, &o, &types, &err) == ML_OK);
        ck_assert_ptr_nonnull(types);
        free(types);
        ck_assert_msg(requant(q8, &o, &got, &err) == ML_OK, "%s", err.msg);
        ck_assert_uint_eq(got.len, want.len);
        ck_assert_msg(memcmp(got.p, want.p, want.len) == 0, "mix %s: bytes differ",
                      ml_quant_mix_name((ml_quant_mix)mix));
        tu_mem_free(&got);
        tu_mem_free(&want);
    }
    ml_requant_opts o;
    ml_requant_opts_init(&o);
    o.mix = ML_MIX_Q6_K;
    o.wtype = ML_WTYPE_Q4_0;
    ml_mlb_header h;
    TU_CHECK_ERR("mix + wtype", ml_requant_header(q8, &o, &h, &err), err, ML_E_INVAL, "mix", -1);
    ml_mlb_close(q8);
    tu_mem_free(&q8mem);
    ml_mlb *q4 = open_fix("llama-q4");
    ml_requant_opts_init(&o);
    o.mix = ML_MIX_Q4_K_M;
    uint8_t *types;
    TU_CHECK_ERR("Q4_0 source", ml_requant_types(q4, &o, &types, &err), err, ML_E_UNSUPPORTED,
                 "blk.0.wq", 7040);
    o.allow_requantize = 1;
    ck_assert(ml_requant_types(q4, &o, &types, &err) == ML_OK);
    free(types);
    ck_assert_msg(requant(q4, &o, &got, &err) == ML_OK, "%s", err.msg);
    tu_mem_free(&got);
    ml_mlb_close(q4);
}
END_TEST

START_TEST(test_option_errors)
{
    ml_mlb *q8 = open_fix("llama-q8");
    ml_requant_opts o;
    ml_error err;
    ml_mlb_header h;
    ml_requant_opts_init(&o);
    o.wtype = 7;
    TU_CHECK_ERR("wtype", ml_requant_header(q8, &o, &h, &err), err, ML_E_INVAL, "wtype", -1);
    ml_requant_opts_init(&o);
    o.q8_mask = ML_Q8_WO; /* the output stays Q8_0 */
    TU_CHECK_ERR("mask on Q8_0", ml_requant_header(q8, &o, &h, &err), err, ML_E_INVAL, "q8_mask",
                 -1);
    ml_mli *mli;
    ck_assert(ml_mli_new(ml_mlb_get_header(q8), &mli, &err) == ML_OK);
    ml_requant_opts_init(&o);
    o.wtype = ML_WTYPE_Q4_0, o.imatrix = mli, o.q4_rule = ML_Q4_ROUND;
    TU_CHECK_ERR("round + imatrix", ml_requant_header(q8, &o, &h, &err), err, ML_E_INVAL,
                 "imatrix", -1);
    o.q4_rule = ML_Q4_FIT; /* no tokens yet */
    TU_CHECK_ERR("empty imatrix", ml_requant_header(q8, &o, &h, &err), err, ML_E_INVAL,
                 "imatrix", -1);
    ml_mli_close(mli);
    ml_mlb *other = open_fix("qwen35");
    ck_assert(ml_mli_new(ml_mlb_get_header(other), &mli, &err) == ML_OK);
    o.imatrix = mli;
    TU_CHECK_ERR("other shape", ml_requant_header(q8, &o, &h, &err), err, ML_E_MISMATCH,
                 "n_layers", 8);
    ml_mli_close(mli);
    ml_mlb_close(other);
    ml_mlb_close(q8);
}
END_TEST

/* Q8_0 -> Q4_0 -> Q8_0: the first step rounds, the second is exact, so the
 * Q8_0 model holds exactly the Q4_0 model's values. */
START_TEST(test_methods_and_exact_steps)
{
    ml_mlb *q8 = open_fix("llama-q8");
    ml_requant_opts o;
    ml_error err;
    ml_requant_opts_init(&o);
    o.wtype = ML_WTYPE_Q4_0, o.threads = 1;
    tu_mem a, b, c;
    ck_assert_msg(requant(q8, &o, &a, &err) == ML_OK, "%s", err.msg);
    o.threads = 3;
    ck_assert(requant(q8, &o, &b, &err) == ML_OK);
    ck_assert(a.len == b.len && memcmp(a.p, b.p, a.len) == 0); /* threads: same bytes */
    ml_mlb *q4;
    ck_assert_msg(ml_mlb_open_memory(a.p, a.len, &q4, &err) == ML_OK, "%s", err.msg);
    const ml_tensor *from = ml_mlb_get(q8, ML_R_WQ, 0), *to = ml_mlb_get(q4, ML_R_WQ, 0);
    ck_assert_int_eq(ml_requant_method_of(from, to, 0, 0), ML_REQUANT_QUANTIZE);
    ck_assert_int_eq(ml_requant_method_of(to, from, 0, 0), ML_REQUANT_EXACT);
    ck_assert_int_eq(ml_requant_method_of(to, to, 1, 1), ML_REQUANT_COPY);
    ml_requant_opts_init(&o);
    o.wtype = ML_WTYPE_Q8_0;
    ck_assert(requant(q4, &o, &c, &err) == ML_OK);
    ml_mlb *back;
    ck_assert(ml_mlb_open_memory(c.p, c.len, &back, &err) == ML_OK);
    for (size_t i = 0; i < ml_mlb_n_tensors(back); i++) {
        const ml_tensor *t = ml_mlb_tensor(back, i), *s = ml_mlb_get(q4, t->role, t->layer);
        if (t->type != ML_TYPE_Q8_0)
            continue;
        size_t n = (size_t)t->rows * t->cols;
        float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        ml_tensor_dequantize_rows(t, 0, t->rows, x);
        ml_tensor_dequantize_rows(s, 0, s->rows, y);
        ck_assert_msg(memcmp(x, y, n * sizeof *x) == 0, "%s changed", t->name);
        free(x);
        free(y);
    }
    ml_mlb_close(back);
    ml_mlb_close(q4);
    tu_mem_free(&a);
    tu_mem_free(&b);
    tu_mem_free(&c);
    ml_mlb_close(q8);
}
END_TEST

/* The importances of an .mli collected on the model change Q4_0 blocks. */
START_TEST(test_imatrix_changes_blocks)
{
    ml_mlb *q8 = open_fix("llama-q8");
    ml_error err;
    ml_mli *mli;
    ck_assert(ml_mli_open(FIX "llama-q8.mli", &mli, &err) == ML_OK);
    ml_requant_opts o;
    ml_requant_opts_init(&o);
    o.wtype = ML_WTYPE_Q4_0;
    tu_mem plain, weighted;
    ck_assert(requant(q8, &o, &plain, &err) == ML_OK);
    o.imatrix = mli;
    ck_assert_msg(requant(q8, &o, &weighted, &err) == ML_OK, "%s", err.msg);
    ck_assert_uint_eq(plain.len, weighted.len);
    ck_assert(memcmp(plain.p, weighted.p, plain.len) != 0);
    /* A matrix left at Q8_0 by the mask is copied whatever the importances. */
    o.q8_mask = ML_Q8_W2;
    tu_mem masked;
    ck_assert(requant(q8, &o, &masked, &err) == ML_OK);
    ml_mlb *m;
    ck_assert(ml_mlb_open_memory(masked.p, masked.len, &m, &err) == ML_OK);
    const ml_tensor *a = ml_mlb_get(m, ML_R_W2, 1), *b = ml_mlb_get(q8, ML_R_W2, 1);
    ck_assert(a->type == ML_TYPE_Q8_0 && memcmp(a->data, b->data, a->nbytes) == 0);
    ml_mlb_close(m);
    tu_mem_free(&masked);
    tu_mem_free(&plain);
    tu_mem_free(&weighted);
    ml_mli_close(mli);
    ml_mlb_close(q8);
}
END_TEST

START_TEST(test_error_measure)
{
    enum { R = 3, C = 64 };
    float x[R * C];
    tu_rng rng = {7};
    for (int i = 0; i < R * C; i++)
        x[i] = ((float)tu_below(&rng, 2001) - 1000.0f) / 300.0f;
    for (int f16 = 0; f16 < 2; f16++)
        for (int type = ML_TYPE_Q8_0; type <= ML_TYPE_Q4_0; type++) {
            size_t qb, sb;
            ml_error err;
            ck_assert(ml_quant_sizes((ml_type)type, f16, R, C, &qb, &sb, &err) == ML_OK);
            uint8_t *q = malloc(qb), *s = malloc(sb);
            ml_quant_opts o = {.type = (ml_type)type, .q4_rule = ML_Q4_FIT, .scale_f16 = f16};
            ck_assert(ml_quantize_matrix(x, R, C, &o, q, qb, s, sb, &err) == ML_OK);
            ml_quant_error e = {0};
            ml_quant_error_add(&e, x, R, C, (ml_type)type, f16, q, s);
            /* Direct: dequantize with the library's row functions. */
            double sse = 0, mx = 0;
            for (int r = 0; r < R; r++) {
                float d[C / 32], y[C];
                for (int k = 0; k < C / 32; k++) {
                    size_t at = (size_t)r * (C / 32) + (size_t)k;
                    d[k] = f16 ? ml_f16_to_f32((uint16_t)(s[2 * at] | s[2 * at + 1] << 8))
                               : ((const float *)s)[at];
                }
                if (type == ML_TYPE_Q8_0)
                    ml_dequantize_row_q8_0((const int8_t *)q + r * C, d, C, y);
                else
                    ml_dequantize_row_q4_0(q + r * C / 2, d, C, y);
                for (int c = 0; c < C; c++) {
                    double err1 = fabs((double)y[c] - x[r * C + c]);
                    sse += err1 * err1;
                    mx = err1 > mx ? err1 : mx;
                }
            }
            ck_assert_uint_eq(e.n, R * C);
            ck_assert(e.sse == sse && e.max_abs == mx);
            ck_assert(e.sse > 0 && e.ssq > e.sse);
            ml_quant_error twice = e;
            ml_quant_error_merge(&twice, &e);
            ck_assert(twice.n == 2 * e.n && twice.sse == 2 * e.sse && twice.max_abs == e.max_abs);
            free(q);
            free(s);
        }
}
END_TEST

Suite *suite_requant(void)
{
    Suite *s = suite_create("requant");
    TCase *tc = tcase_create("requant");
    tcase_add_test(tc, test_option_errors);
    tcase_add_test(tc, test_methods_and_exact_steps);
    tcase_add_test(tc, test_imatrix_changes_blocks);
    tcase_add_test(tc, test_error_measure);
    tcase_add_test(tc, test_mix);
    suite_add_tcase(s, tc);
    return s;
}
