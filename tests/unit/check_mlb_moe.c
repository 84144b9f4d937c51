/* check_mlb_moe.c - the body of a mixture-of-experts .mlb
 * (docs/design-moe.md, section 2): each expert's span contiguous, one
 * stride per layer, nothing else inside the spans, ml_mlb_get_expert
 * finding any expert's array, the streaming verifier agreeing with the
 * loader, the sizes mlb-info prints (ml_mlb_moe_sizes_of); with a type
 * table, three entries per expert and none for the router, and the rule
 * that a layer's experts share expert 0's types (M7), from the writer,
 * the loader and the verifier alike. */
#include "suites.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>

/* Every expert's arrays lie together, experts in order, one stride apart,
 * and nothing else lies among them. */
static void check_spans(const ml_mlb *m)
{
    const ml_mlb_header *h = ml_mlb_get_header(m);
    ml_mlb_moe_sizes ms;
    ml_mlb_moe_sizes_of(m, &ms);
    ck_assert_uint_eq(ms.moe_layers, h->n_layers);
    uint64_t spans = 0; /* k spans of each layer: what a token reads of the experts */
    for (int32_t l = 0; l < (int32_t)h->n_layers; l++) {
        const ml_tensor *e0 = ml_mlb_get_expert(m, ML_R_EW1, l, 0);
        const ml_tensor *e1 = ml_mlb_get_expert(m, ML_R_EW1, l, 1);
        ck_assert_ptr_nonnull(e0);
        uint64_t stride = e1->offset - e0->offset;
        if (l == 0) /* mlb-info's expert_bytes: the first MoE layer's span */
            ck_assert_uint_eq(stride, ms.expert_bytes);
        spans += stride * h->n_experts_used;
        for (uint32_t e = 0; e < h->n_experts; e++) {
            const ml_tensor *w1 = ml_mlb_get_expert(m, ML_R_EW1, l, e);
            const ml_tensor *w3 = ml_mlb_get_expert(m, ML_R_EW3, l, e);
            char name[48];
            snprintf(name, sizeof name, "blk.%d.exp.%u.w2", (int)l, e);
            ck_assert_ptr_eq(ml_mlb_get_expert(m, ML_R_EW2, l, e), ml_mlb_find(m, name));
            ck_assert_int_eq(w1->expert, (int32_t)e);
            ck_assert_uint_eq(w1->offset, e0->offset + e * stride);
            uint64_t end = w3->scale_nbytes ? w3->scale_offset + w3->scale_nbytes
                                            : w3->offset + w3->nbytes;
            ck_assert_uint_eq(tu_align64(end), w1->offset + stride);
        }
        ck_assert_ptr_null(ml_mlb_get_expert(m, ML_R_EW1, l, h->n_experts));
        ck_assert_ptr_null(ml_mlb_get_expert(m, ML_R_EB1, l, 0)); /* no expert biases */
        ck_assert_ptr_null(ml_mlb_get_expert(m, ML_R_WQ, l, 0));
    }
    /* the tensors inside the spans are exactly the experts' */
    for (size_t i = 0; i < ml_mlb_n_tensors(m); i++) {
        const ml_tensor *t = ml_mlb_tensor(m, i);
        if (t->expert >= 0 || t->layer < 0)
            continue;
        const ml_tensor *e0 = ml_mlb_get_expert(m, ML_R_EW1, t->layer, 0);
        const ml_tensor *e1 = ml_mlb_get_expert(m, ML_R_EW1, t->layer, 1);
        uint64_t lo = e0->offset, hi = lo + (e1->offset - e0->offset) * h->n_experts;
        ck_assert_msg(t->offset < lo || t->offset >= hi, "%s inside the experts' spans", t->name);
    }
    /* a decode token reads the non-expert arrays and k spans a layer */
    uint64_t rest = 0;
    for (size_t i = 0; i < ml_mlb_n_tensors(m); i++) {
        const ml_tensor *t = ml_mlb_tensor(m, i);
        if (t->type != ML_TYPE_U8 && t->expert < 0)
            rest += t->nbytes + t->scale_nbytes;
    }
    ck_assert_uint_eq(ms.active_bytes, rest + spans);
}

static void verify_like_loader(const tu_mem *out, const ml_mlb *m)
{
    tu_reader rd;
    ml_verify_report rep;
    ml_error err;
    memset(&rep, 0, sizeof rep);
    tu_reader_init(&rd, out->p, out->len, 5, 4096);
    ml_status s = ml_mlb_verify_stream(tu_mem_read, &rd, &rep, &err);
    ck_assert_msg(s == ML_OK, "%s", err.msg);
    ck_assert_uint_eq(rep.n_tensors, ml_mlb_n_tensors(m));
    ck_assert_uint_eq(rep.bytes, out->len);
}

START_TEST(test_body_spans)
{
    const uint32_t wtypes[] = {ML_WTYPE_Q8_0, ML_WTYPE_Q4_0};
    for (size_t w = 0; w < 2; w++) {
        ml_mlb_header h;
        tu_moe_header(&h, wtypes[w]);
        tu_mem out;
        tu_write_random(&h, NULL, 11, &out);
        tu_buf b;
        ml_mlb *m = tu_open_copy(&b, &out);
        check_spans(m);
        verify_like_loader(&out, m);
        /* the router is F32 whatever the weight type, and no matrix of the table */
        const ml_tensor *wr = ml_mlb_get(m, ML_R_WR, 1);
        ck_assert_int_eq(wr->type, ML_TYPE_F32);
        ck_assert_uint_eq(wr->rows, 8);
        ck_assert_uint_eq(wr->cols, 64);
        ck_assert_ptr_null(ml_mlb_get(m, ML_R_W1, 0));
        ml_mlb_close(m);
        tu_buf_free(&b);
        tu_mem_free(&out);
    }
}
END_TEST

/* wtype 3: one entry per expert matrix (3 per expert), none for the router. */
START_TEST(test_table_experts)
{
    ml_mlb_header h;
    tu_moe_header(&h, ML_WTYPE_TABLE);
    uint32_t n = ml_mlb_matrix_count(&h, NULL);
    ck_assert_uint_eq(n, 1 + 2 * (4 + 3 * 8) + 1); /* tok_emb, layers, wcls */
    uint8_t *types = malloc(n);
    memset(types, ML_TYPE_Q8_0, n);
    for (uint32_t e = 0; e < 8; e++) /* layer 1's experts in MXFP4 */
        for (uint32_t r = 0; r < 3; r++)
            types[1 + 28 + 4 + 3 * e + r] = ML_TYPE_MXFP4;
    tu_mem out;
    ml_error err;
    tu_mem_init(&out);
    ml_status s = ml_mlb_write_random_types(&h, NULL, types, 3, tu_mem_sink, &out, &err);
    ck_assert_msg(s == ML_OK, "%s", err.msg);
    tu_buf b;
    ml_mlb *m = tu_open_copy(&b, &out);
    check_spans(m);
    verify_like_loader(&out, m);
    ck_assert_int_eq(ml_mlb_get_expert(m, ML_R_EW2, 1, 5)->type, ML_TYPE_MXFP4);
    ck_assert_int_eq(ml_mlb_get_expert(m, ML_R_EW2, 0, 5)->type, ML_TYPE_Q8_0);
    ml_mlb_close(m);
    tu_buf_free(&b);

    /* M7: expert 3's w2 of layer 0 (entry 1 + 4 + 3 * 3 + 1 = 15) differs. */
    const uint32_t bad = 15;
    tu_mem_free(&out);
    tu_mem_init(&out);
    types[bad] = ML_TYPE_Q4_0;
    tu_err_reset(&err);
    s = ml_mlb_write_random_types(&h, NULL, types, 3, tu_mem_sink, &out, &err);
    TU_CHECK_ERR("writer", s, err, ML_E_FORMAT, "blk.0.exp.3.w2", 256 + bad);
    /* the same table patched into a valid file */
    types[bad] = ML_TYPE_Q8_0;
    tu_mem_free(&out);
    tu_mem_init(&out);
    ck_assert(ml_mlb_write_random_types(&h, NULL, types, 3, tu_mem_sink, &out, &err) == ML_OK);
    out.p[256 + bad] = ML_TYPE_Q4_0;
    tu_buf_copy(&b, out.p, out.len, 0);
    tu_err_reset(&err);
    s = ml_mlb_open_memory(b.p, b.len, &m, &err);
    TU_CHECK_ERR("loader", s, err, ML_E_FORMAT, "blk.0.exp.3.w2", 256 + bad);
    tu_buf_free(&b);
    tu_reader rd;
    ml_verify_report rep;
    memset(&rep, 0, sizeof rep);
    tu_reader_init(&rd, out.p, out.len, 9, 100);
    tu_err_reset(&err);
    s = ml_mlb_verify_stream(tu_mem_read, &rd, &rep, &err);
    TU_CHECK_ERR("stream", s, err, ML_E_FORMAT, "blk.0.exp.3.w2", 256 + bad);
    tu_mem_free(&out);
    free(types);
}
END_TEST

Suite *suite_mlb_moe(void)
{
    Suite *s = suite_create("mlb_moe");
    TCase *tc = tcase_create("body");
    tcase_add_test(tc, test_body_spans);
    tcase_add_test(tc, test_table_experts);
    suite_add_tcase(s, tc);
    return s;
}
