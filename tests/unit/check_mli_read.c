/* check_mli_read.c - reading .mli importance matrices (lib/format/mli.c):
 * the reader's validation (status, field, offset for each rule), the slot
 * layout written out from the spec's table, the fit to a model, and their
 * use by the converter: a Q4_0 fit matrix quantized with importances must
 * equal the quantizer run with ml_quant_importance of its input channel's
 * sums, and differ from the same matrix without them.  llama.cpp's
 * importance matrices (llama-imatrix's GGUF and .dat) read as the .mli
 * tools/make-imatrix-fixtures.py writes from them with gguf-py, and their
 * own rules. */
#include "check_convert_util.h"
#include "gguf_build.h"
#include "suites.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* An .mli for n_layers, dim, hidden, q_dim (0: dim), sums k -> 1 + k % 7 * s. */
static uint8_t *make_mli(uint32_t n_layers, uint32_t dim, uint32_t hidden, uint32_t q_dim,
                         uint64_t tokens, uint64_t cls_tokens, size_t *len)
{
    uint32_t qd = q_dim ? q_dim : dim;
    size_t n = (size_t)n_layers * (2 * dim + qd + hidden) + dim;
    *len = 40 + 8 * n;
    uint8_t *p = calloc(1, *len);
    memcpy(p, "MLI1", 4);
    uint32_t h[5] = {1, n_layers, dim, hidden, q_dim};
    for (int i = 0; i < 5; i++)
        for (int b = 0; b < 4; b++)
            p[4 + 4 * i + b] = (uint8_t)(h[i] >> (8 * b));
    for (int b = 0; b < 8; b++) {
        p[24 + b] = (uint8_t)(tokens >> (8 * b));
        p[32 + b] = (uint8_t)(cls_tokens >> (8 * b));
    }
    for (size_t k = 0; k < n; k++) {
        double v = 1.0 + (double)(k % 7) * 3.5 + (double)(k % 13) * 0.25;
        memcpy(p + 40 + 8 * k, &v, 8);
    }
    return p;
}

static double sum_at(const uint8_t *p, size_t k)
{
    double v;
    memcpy(&v, p + 40 + 8 * k, 8);
    return v;
}

START_TEST(test_reader_layout)
{
    size_t len;
    uint8_t *p = make_mli(3, 64, 96, 128, 10, 4, &len);
    ml_mli *m;
    ml_error e;
    ck_assert(ml_mli_open_memory(p, len, &m, &e) == ML_OK);
    const ml_mli_info *i = ml_mli_get_info(m);
    ck_assert_uint_eq(i->n_layers, 3);
    ck_assert_uint_eq(i->q_dim, 128);
    ck_assert_uint_eq(i->layer_tokens, 10);
    ck_assert_uint_eq(i->cls_tokens, 4);
    /* per layer: attn in 64, wo in 128, ffn in 64, w2 in 96 = 352 */
    static const struct {
        ml_mli_slot slot;
        size_t off, n;
    } slots[] = {{ML_MLI_ATTN_IN, 0, 64},
                 {ML_MLI_WO_IN, 64, 128},
                 {ML_MLI_FFN_IN, 192, 64},
                 {ML_MLI_W2_IN, 256, 96}};
    double buf[128];
    uint64_t tok;
    for (uint32_t l = 0; l < 3; l++)
        for (int s = 0; s < 4; s++) {
            ck_assert(ml_mli_sums(m, slots[s].slot, l, buf, slots[s].n, &tok, &e) == ML_OK);
            ck_assert_uint_eq(tok, 10);
            for (size_t k = 0; k < slots[s].n; k++)
                ck_assert(buf[k] == sum_at(p, 352 * l + slots[s].off + k));
        }
    ck_assert(ml_mli_sums(m, ML_MLI_CLS_IN, 0, buf, 64, &tok, &e) == ML_OK);
    ck_assert_uint_eq(tok, 4);
    ck_assert(buf[0] == sum_at(p, 3 * 352) && buf[63] == sum_at(p, 3 * 352 + 63));
    tu_err_reset(&e);
    TU_CHECK_ERR("wrong count", ml_mli_sums(m, ML_MLI_WO_IN, 0, buf, 64, NULL, &e), e, ML_E_INVAL,
                 "", -1);
    tu_err_reset(&e);
    TU_CHECK_ERR("no layer 3", ml_mli_sums(m, ML_MLI_ATTN_IN, 3, buf, 64, NULL, &e), e, ML_E_INVAL,
                 "", -1);
    ml_mli_close(m);
    free(p);
}
END_TEST

START_TEST(test_reader_rules)
{
    size_t len;
    uint8_t *good = make_mli(2, 64, 96, 0, 10, 4, &len);
    ml_mli *m = NULL;
    ml_error e;
    uint8_t *p = malloc(len + 8);
    double neg = -1.0, nan = NAN;
    static const struct {
        const char *what;
        int edit;
        ml_status st;
        const char *field;
        int64_t off;
    } cases[] = {
        {"short", 0, ML_E_FORMAT, "", 39},
        {"magic", 1, ML_E_FORMAT, "magic", 0},
        {"version 0", 2, ML_E_FORMAT, "version", 4},
        {"version 2", 3, ML_E_UNSUPPORTED, "version", 4},
        {"dim 0", 4, ML_E_SHAPE, "dim", 12},
        {"one byte more", 5, ML_E_FORMAT, "", 40 + 8 * (2 * (64 * 3 + 96) + 64)},
        {"one sum less", 6, ML_E_FORMAT, "", 40 + 8 * (2 * (64 * 3 + 96) + 64) - 8},
        {"negative sum", 7, ML_E_FORMAT, "sums", 40 + 8 * 100},
        {"NaN sum", 8, ML_E_FORMAT, "sums", 40 + 8 * 5},
        {"q_dim above the limit", 9, ML_E_SHAPE, "q_dim", 20},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        memcpy(p, good, len);
        size_t n = len;
        switch (cases[k].edit) {
        case 0: n = 39; break;
        case 1: memcpy(p, "MLB1", 4); break;
        case 2: p[4] = 0; break;
        case 3: p[4] = 2; break;
        case 4: memset(p + 12, 0, 4); break;
        case 5: p[len] = 0, n = len + 1; break;
        case 6: n = len - 8; break;
        case 7: memcpy(p + 40 + 8 * 100, &neg, 8); break;
        case 8: memcpy(p + 40 + 8 * 5, &nan, 8); break;
        case 9: p[20] = 0x01, p[21] = 0x00, p[22] = 0x02; break; /* 131073 */
        }
        tu_err_reset(&e);
        ml_status st = ml_mli_open_memory(p, n, &m, &e);
        TU_CHECK_ERR(cases[k].what, st, e, cases[k].st, cases[k].field, cases[k].off);
        ck_assert_ptr_null(m);
    }
    free(p);
    free(good);
}
END_TEST

START_TEST(test_fit_to_model)
{
    ml_mlb_header h;
    tu_base_header(&h); /* dim 64, 4 layers, 4 heads, hidden 128: q_dim = dim */
    size_t len;
    static const struct {
        uint32_t n_layers, dim, hidden, q_dim;
        ml_status st;
        const char *field;
    } cases[] = {
        {4, 64, 128, 0, ML_OK, ""},
        {4, 64, 128, 64, ML_OK, ""}, /* q_dim written although equal */
        {3, 64, 128, 0, ML_E_MISMATCH, "n_layers"},
        {4, 64, 96, 0, ML_E_MISMATCH, "hidden_dim"},
        {4, 64, 128, 128, ML_E_MISMATCH, "q_dim"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        uint8_t *p =
            make_mli(cases[k].n_layers, cases[k].dim, cases[k].hidden, cases[k].q_dim, 1, 1, &len);
        ml_mli *m;
        ml_error e;
        ck_assert(ml_mli_open_memory(p, len, &m, &e) == ML_OK);
        tu_err_reset(&e);
        ml_status st = ml_mli_check_model(m, &h, &e);
        ck_assert_int_eq(st, cases[k].st);
        if (st)
            ck_assert_str_eq(e.field, cases[k].field);
        ml_mli_close(m);
        free(p);
    }
}
END_TEST

/* The converter with an importance matrix. */
static void quantize_expect(const ml_gguf *g, const ml_mlb_header *h, const ml_tensor *t,
                            const float *imp, uint8_t **q, uint8_t **s, size_t *qb, size_t *sb)
{
    tc_map m;
    char name[64];
    ck_assert(tc_mapping(g, h, t, &m, name, sizeof name));
    float *x = tc_expected(g, t, &m);
    ck_assert(ml_quant_sizes(t->type, (int)h->scale_f16, t->rows, t->cols, qb, sb, NULL) == ML_OK);
    *q = malloc(*qb), *s = malloc(*sb);
    ml_quant_opts o = {.type = t->type,
                       .q4_rule = ML_Q4_FIT,
                       .scale_f16 = (int)h->scale_f16,
                       .imp = imp,
                       .threads = 1};
    ck_assert(ml_quantize_matrix(x, t->rows, t->cols, &o, *q, *qb, *s, *sb, NULL) == ML_OK);
    free(x);
}

START_TEST(test_conversion_with_importances)
{
    tc_spec sp;
    tc_default(&sp, "llama");
    sp.mtype = ML_GGML_F16;
    size_t len;
    uint8_t *p = make_mli(2, 64, 96, 0, 10, 6, &len);
    ml_mli *mli;
    ml_error e;
    ck_assert(ml_mli_open_memory(p, len, &mli, &e) == ML_OK);
    ml_convert_opts o;
    ml_convert_opts_init(&o);
    o.wtype = ML_WTYPE_Q4_0;
    o.imatrix = mli;
    cg g;
    tc_build(&g, &sp);
    tc_conv c;
    tc_convert(&c, &g, &o);
    const ml_mlb_header *h = ml_mlb_get_header(c.m);
    static const struct {
        const char *name;
        int slot; /* -1: none */
        uint32_t layer;
    } arrays[] = {{"blk.0.wq", ML_MLI_ATTN_IN, 0},
                  {"blk.1.wv", ML_MLI_ATTN_IN, 1},
                  {"blk.1.wo", ML_MLI_WO_IN, 1},
                  {"blk.0.w3", ML_MLI_FFN_IN, 0},
                  {"blk.1.w2", ML_MLI_W2_IN, 1},
                  {"wcls", ML_MLI_CLS_IN, 0},
                  {"tok_emb", -1, 0}};
    for (size_t k = 0; k < sizeof arrays / sizeof arrays[0]; k++) {
        const ml_tensor *t = ml_mlb_find(c.m, arrays[k].name);
        ck_assert_int_eq(t->type, ML_TYPE_Q4_0);
        float imp[128];
        double sums[128];
        uint64_t tok;
        const float *ip = NULL;
        if (arrays[k].slot >= 0) {
            ck_assert(ml_mli_sums(mli, (ml_mli_slot)arrays[k].slot, arrays[k].layer, sums, t->cols,
                                  &tok, NULL) == ML_OK);
            ck_assert(ml_quant_importance(sums, t->cols, tok, imp, NULL) == ML_OK);
            ip = imp;
        }
        uint8_t *q, *s, *q0, *s0;
        size_t qb, sb;
        quantize_expect(c.g, h, t, ip, &q, &s, &qb, &sb);
        quantize_expect(c.g, h, t, NULL, &q0, &s0, &qb, &sb);
        ck_assert_msg(memcmp(q, t->data, qb) == 0, "%s: quants", arrays[k].name);
        ck_assert_msg(memcmp(s, c.out.p + t->scale_offset, sb) == 0, "%s: scales", arrays[k].name);
        if (ip) /* the importances made a difference */
            ck_assert_msg(memcmp(q, q0, qb) != 0 || memcmp(s, s0, sb) != 0, "%s: no effect",
                          arrays[k].name);
        free(q), free(s), free(q0), free(s0);
    }
    char how[160];
    for (size_t i = 0; i < ml_convert_plan_n_items(c.p); i++) {
        const ml_convert_item *it = ml_convert_plan_item(c.p, i);
        if (!strcmp(it->dst.name, "blk.0.wq")) {
            ml_convert_item_describe(c.p, it, how, sizeof how);
            ck_assert_str_eq(how, "quantize F16 -> Q4_0 (fit, imatrix)");
        }
    }
    tc_conv_free(&c);

    /* The round rule cannot use importances; a matrix without tokens is refused. */
    o.q4_rule = ML_Q4_ROUND;
    tc_build(&g, &sp);
    tu_err_reset(&e);
    TU_CHECK_ERR("round", tc_plan(&c, &g, &o, &e), e, ML_E_INVAL, "imatrix", -1);
    tc_conv_free(&c);
    ml_mli_close(mli);
    free(p);
    p = make_mli(2, 64, 96, 0, 0, 0, &len);
    ck_assert(ml_mli_open_memory(p, len, &mli, &e) == ML_OK);
    o.q4_rule = -1;
    o.imatrix = mli;
    tc_build(&g, &sp);
    tu_err_reset(&e);
    TU_CHECK_ERR("no tokens", tc_plan(&c, &g, &o, &e), e, ML_E_INVAL, "imatrix", -1);
    tc_conv_free(&c);
    ml_mli_close(mli);
    free(p);
    /* A matrix for another model. */
    p = make_mli(3, 64, 96, 0, 5, 5, &len);
    ck_assert(ml_mli_open_memory(p, len, &mli, &e) == ML_OK);
    o.imatrix = mli;
    tc_build(&g, &sp);
    tu_err_reset(&e);
    TU_CHECK_ERR("other model", tc_plan(&c, &g, &o, &e), e, ML_E_MISMATCH, "n_layers", 8);
    tc_conv_free(&c);
    ml_mli_close(mli);
    free(p);
}
END_TEST

/* ---- llama.cpp's importance matrices (lib/format/mli_llama.c) ---- */

#define QUANT_FIX "tests/fixtures/quant/"

/* A fixture file whole. */
static uint8_t *read_fixture(const char *name, size_t *len)
{
    uint8_t *p = (uint8_t *)tu_slurp(name, len);
    ck_assert_msg(p != NULL, "%s", name);
    return p;
}

/* llama-imatrix's GGUF of the tiny Llama 2 reads as exactly the .mli the
 * fixture script wrote from it with gguf-py; its .dat of the same run has
 * the same shape and sums in the same proportions. */
START_TEST(test_llama_imatrix_fixtures)
{
    size_t want_len, len;
    uint8_t *want = read_fixture(QUANT_FIX "llama2-imatrix.mli", &want_len);
    ml_mli *m, *d;
    ml_error e;
    ck_assert_int_eq(ml_mli_open(QUANT_FIX "llama2.imatrix", &m, &e), ML_OK);
    tu_mem b;
    tu_mem_init(&b);
    ck_assert_int_eq(ml_mli_write(m, tu_mem_sink, &b, &e), ML_OK);
    ck_assert_uint_eq(b.len, want_len);
    ck_assert(memcmp(b.p, want, want_len) == 0);
    uint8_t *dat = read_fixture(QUANT_FIX "llama2.imatrix.dat", &len);
    ck_assert_int_eq(ml_mli_open_memory(dat, len, &d, &e), ML_OK);
    const ml_mli_info *im = ml_mli_get_info(m), *id = ml_mli_get_info(d);
    ck_assert_uint_eq(id->n_layers, im->n_layers);
    ck_assert_uint_eq(id->dim, im->dim);
    ck_assert_uint_eq(id->hidden_dim, im->hidden_dim);
    ck_assert_uint_eq(id->q_dim, im->q_dim);
    ck_assert_uint_eq(id->cls_tokens, 0);
    double gm[256], gd[256];
    for (uint32_t l = 0; l < im->n_layers; l++)
        for (int slot = ML_MLI_ATTN_IN; slot <= ML_MLI_W2_IN; slot++) {
            size_t n = ml_mli_slot_size(m, (ml_mli_slot)slot);
            uint64_t tm, td;
            ck_assert_uint_le(n, 256);
            ck_assert_int_eq(ml_mli_sums(m, (ml_mli_slot)slot, l, gm, n, &tm, &e), ML_OK);
            ck_assert_int_eq(ml_mli_sums(d, (ml_mli_slot)slot, l, gd, n, &td, &e), ML_OK);
            for (size_t c = 0; c < n; c++) /* mean squares: sums over tokens or chunks */
                ck_assert_double_eq_tol(gd[c] / (double)td, gm[c] / (double)tm,
                                        1e-6 * gm[c] / (double)tm);
        }
    ml_mli_close(m);
    ml_mli_close(d);
    tu_mem_free(&b);
    free(want);
    free(dat);
}
END_TEST

/* A matrix of a built llama-imatrix GGUF: NAME.in_sum2 (cols x rows, of
 * type; sum c of row r = 1 + c % 5 + r, or bad at channel 1 when bad is
 * set) and NAME.counts (rows x count), unless no_counts. */
typedef struct imx_mat {
    const char *name;
    uint64_t cols, rows;
    float count;
    uint32_t type;
    int no_counts;
    float bad;
} imx_mat;

static void build_imatrix(gb *b, const imx_mat *ms, size_t n, const char *kind)
{
    size_t nt = 0;
    for (size_t i = 0; i < n; i++)
        nt += ms[i].no_counts ? 1 : 2;
    gb_init(b, 3);
    gb_header(b, nt, kind ? 1 : 0);
    if (kind) {
        gb_kv(b, 0, "general.type", ML_GGUF_STRING);
        gb_v_str(b, kind);
    }
    uint64_t off = 0;
    size_t t = 0;
    for (size_t i = 0; i < n; i++) {
        char name[96];
        const uint64_t bytes = ms[i].cols * ms[i].rows * (ms[i].type == ML_GGML_F16 ? 2 : 4);
        const uint64_t d[2] = {ms[i].cols, ms[i].rows}, c[2] = {1, ms[i].rows};
        snprintf(name, sizeof name, "%s.in_sum2", ms[i].name);
        gb_tensor_info(b, t++, name, 2, d, ms[i].type, off, bytes);
        off += (bytes + 31) / 32 * 32;
        if (ms[i].no_counts)
            continue;
        snprintf(name, sizeof name, "%s.counts", ms[i].name);
        gb_tensor_info(b, t++, name, 2, c, ML_GGML_F32, off, 4 * ms[i].rows);
        off += (4 * ms[i].rows + 31) / 32 * 32;
    }
    gb_data(b, 32, (size_t)off);
    t = 0;
    for (size_t i = 0; i < n; i++) {
        float *v = (float *)(void *)(b->p + b->data_start + b->t[t++].offset);
        for (uint64_t k = 0; ms[i].type == ML_GGML_F32 && k < ms[i].cols * ms[i].rows; k++)
            v[k] = k % ms[i].cols == 1 && ms[i].bad != 0 ? ms[i].bad
                                                           : 1.0f + (float)(k % ms[i].cols % 5) +
                                                                 (float)(k / ms[i].cols);
        if (ms[i].no_counts)
            continue;
        float *c = (float *)(void *)(b->p + b->data_start + b->t[t++].offset);
        for (uint64_t r = 0; r < ms[i].rows; r++)
            c[r] = ms[i].count;
    }
}

/* One layer: dim 4, q_dim 6, hidden 8; attention counted over 10 tokens,
 * the FFN over 20 (llama-imatrix counts each matrix on its own). */
#define IMX_GOOD                                                                                 \
    {"blk.0.attn_q.weight", 4, 1, 10, ML_GGML_F32, 0, 0},                                        \
        {"blk.0.attn_output.weight", 6, 1, 10, ML_GGML_F32, 0, 0},                               \
        {"blk.0.ffn_up.weight", 4, 1, 20, ML_GGML_F32, 0, 0},                                    \
        {"blk.0.ffn_down.weight", 8, 1, 20, ML_GGML_F32, 0, 0}

START_TEST(test_llama_imatrix_scaled)
{
    /* experts (three matrices' sums) and norms have no slot: left out */
    const imx_mat ms[] = {IMX_GOOD,
                          {"blk.0.ffn_gate_exps.weight", 4, 3, 7, ML_GGML_F32, 0, 0},
                          {"output.weight", 4, 1, 3, ML_GGML_F32, 0, 0}};
    gb b;
    build_imatrix(&b, ms, sizeof ms / sizeof ms[0], "imatrix");
    ml_mli *m;
    ml_error e;
    ck_assert_int_eq(ml_mli_open_memory(b.p, b.len, &m, &e), ML_OK);
    const ml_mli_info *i = ml_mli_get_info(m);
    ck_assert_uint_eq(i->n_layers, 1);
    ck_assert_uint_eq(i->dim, 4);
    ck_assert_uint_eq(i->q_dim, 6);
    ck_assert_uint_eq(i->hidden_dim, 8);
    ck_assert_uint_eq(i->layer_tokens, 20);
    ck_assert_uint_eq(i->cls_tokens, 3);
    double v[8];
    uint64_t tok;
    /* attention's sums over 10 tokens read as if over 20: doubled */
    ck_assert_int_eq(ml_mli_sums(m, ML_MLI_ATTN_IN, 0, v, 4, &tok, &e), ML_OK);
    for (int c = 0; c < 4; c++)
        ck_assert_double_eq(v[c], 2.0 * (1 + c % 5));
    ck_assert_int_eq(ml_mli_sums(m, ML_MLI_W2_IN, 0, v, 8, &tok, &e), ML_OK);
    for (int c = 0; c < 8; c++)
        ck_assert_double_eq(v[c], 1 + c % 5);
    ck_assert_int_eq(ml_mli_sums(m, ML_MLI_CLS_IN, 0, v, 4, &tok, &e), ML_OK);
    ck_assert_uint_eq(tok, 3);
    ck_assert_double_eq(v[3], 4.0);
    ml_mli_close(m);
    gb_free(&b);
}
END_TEST

START_TEST(test_llama_imatrix_rules)
{
    static const struct {
        const char *what;
        int edit;
        ml_status st;
        const char *field;
        int t; /* the tensor whose info (-1: none; 100 + t: whose data + 4) is the offset */
    } cases[] = {
        {"a model", 0, ML_E_FORMAT, "general.type", -2},
        {"no counts", 1, ML_E_FORMAT, "blk.0.ffn_up.weight.in_sum2", 4},
        {"NaN sum", 2, ML_E_FORMAT, "blk.0.attn_q.weight.in_sum2", 100},
        {"negative sum", 3, ML_E_FORMAT, "blk.0.attn_q.weight.in_sum2", 100},
        {"negative count", 4, ML_E_FORMAT, "blk.0.attn_q.weight.counts", 101},
        {"F16 sums", 5, ML_E_FORMAT, "blk.0.attn_q.weight.in_sum2", 0},
        {"widths differ", 6, ML_E_SHAPE, "blk.0.ffn_up", 4},
        {"no ffn_down", 7, ML_E_FORMAT, "", -1},
        {"no layer", 8, ML_E_FORMAT, "", -1},
        {"a huge model from a small file", 9, ML_E_FORMAT, "", -1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        imx_mat ms[] = {IMX_GOOD};
        size_t n = 4;
        const char *kind = "imatrix";
        switch (cases[k].edit) {
        case 0: kind = "model"; break;
        case 1: ms[2].no_counts = 1; break;
        case 2: ms[0].bad = NAN; break;
        case 3: ms[0].bad = -1.0f; break;
        case 4: ms[0].count = -1.0f; break;
        case 5: ms[0].type = ML_GGML_F16; break;
        case 6: ms[2].cols = 5; break;
        case 7: n = 3; break;
        case 8: ms[0].name = ms[1].name = ms[2].name = ms[3].name = "blk.0.attn_norm.weight", n = 1;
            break;
        case 9: ms[0].name = "blk.60000.attn_q.weight"; break; /* 1.3 million sums */
        }
        gb b;
        build_imatrix(&b, ms, n, kind);
        /* the info of ffn_up's sums is tensor 4 (each matrix has two) */
        int64_t off = -1;
        if (cases[k].t >= 100)
            off = (int64_t)(b.data_start + b.t[cases[k].t - 100].offset) + (cases[k].t == 100 ? 4 : 0);
        else if (cases[k].t >= 0)
            off = (int64_t)b.t[cases[k].t].info_at;
        ml_mli *m = NULL;
        ml_error e;
        tu_err_reset(&e);
        ml_status st = ml_mli_open_memory(b.p, b.len, &m, &e);
        if (cases[k].t == -2) { /* the value of general.type: past its key and type */
            ck_assert_int_eq(st, ML_E_FORMAT);
            ck_assert_str_eq(e.field, "general.type");
            ck_assert(e.offset > 24 && (size_t)e.offset < b.infos_end);
        } else {
            char field[64];
            snprintf(field, sizeof field, "%s%s", cases[k].field,
                     cases[k].edit == 6 ? ".weight" : "");
            TU_CHECK_ERR(cases[k].what, st, e, cases[k].st, field, off);
        }
        ck_assert_ptr_null(m);
        gb_free(&b);
    }
}
END_TEST

/* A .dat (no magic) whose entries run past the end, or whose dataset
 * name leaves bytes behind, is refused naming where. */
START_TEST(test_llama_dat_rules)
{
    size_t len;
    uint8_t *good = read_fixture(QUANT_FIX "llama2.imatrix.dat", &len);
    uint8_t *p = malloc(len + 4);
    ml_mli *m = NULL;
    ml_error e;
    /* the first entry: i32 count, i32 len, name, i32 ncall, i32 nval, sums */
    const uint32_t name_len = (uint32_t)good[4], nval_at = 8 + name_len + 4;
    memcpy(p, good, len);
    p[nval_at + 2] = 0x7f; /* nval far past the end */
    tu_err_reset(&e);
    ck_assert_int_eq(ml_mli_open_memory(p, len, &m, &e), ML_E_FORMAT);
    ck_assert_str_eq(e.field, "blk.0.attn_k.weight");
    ck_assert_int_eq(e.offset, nval_at + 4);
    memcpy(p, good, len);
    p[len] = 0;
    tu_err_reset(&e);
    ck_assert_int_eq(ml_mli_open_memory(p, len + 1, &m, &e), ML_E_FORMAT);
    ck_assert_str_eq(e.field, "dataset");
    ck_assert_int_eq(e.offset, (int64_t)len);
    memcpy(p, good, len);
    float nan = NAN;
    memcpy(p + nval_at + 4 + 8, &nan, 4);
    tu_err_reset(&e);
    ck_assert_int_eq(ml_mli_open_memory(p, len, &m, &e), ML_E_FORMAT);
    ck_assert_str_eq(e.field, "blk.0.attn_k.weight");
    ck_assert_int_eq(e.offset, nval_at + 4 + 8);
    ck_assert_ptr_null(m);
    free(p);
    free(good);
}
END_TEST

Suite *suite_mli_read(void)
{
    Suite *s = suite_create("mli_read");
    TCase *tc = tcase_create("mli");
    tcase_add_test(tc, test_reader_layout);
    tcase_add_test(tc, test_reader_rules);
    tcase_add_test(tc, test_fit_to_model);
    tcase_add_test(tc, test_conversion_with_importances);
    tcase_add_test(tc, test_llama_imatrix_fixtures);
    tcase_add_test(tc, test_llama_imatrix_scaled);
    tcase_add_test(tc, test_llama_imatrix_rules);
    tcase_add_test(tc, test_llama_dat_rules);
    suite_add_tcase(s, tc);
    return s;
}
