/* check_mli.c - importance matrices: collection by the runtime against
 * tools/mlb.py's independent sums (tests/fixtures/runtime/NAME.mli), the
 * same bits for any batch size and thread count, the token counters,
 * writing, merging, and which slot feeds which matrix (mli(5)).  The
 * reader's validation rules are in check_mli_read.c. */
#include "suites.h"
#include "testutil.h"

#include "mlcore.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIX "tests/fixtures/runtime/"

static const char *const models[] = {"llama-q8", "qwen35", "gemma"};

typedef struct run {
    ml_mlb *mlb;
    ml_model *model;
    ml_token ids[64];
    size_t n;
} run;

static void run_open(run *r, const char *name)
{
    char path[256];
    ml_error err;
    memset(r, 0, sizeof *r);
    snprintf(path, sizeof path, FIX "%s.mlb", name);
    ck_assert_msg(ml_mlb_open(path, &r->mlb, &err) == ML_OK, "%s: %s", path, err.msg);
    ck_assert(ml_model_new(r->mlb, &r->model, &err) == ML_OK);
    snprintf(path, sizeof path, FIX "%s.ids", name);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s (run from the repository root)", path);
    int v;
    while (r->n < 64 && fscanf(f, "%d", &v) == 1)
        r->ids[r->n++] = v;
    fclose(f);
}

static void run_close(run *r)
{
    ml_model_free(r->model);
    ml_mlb_close(r->mlb);
}

/* Collects over the prompt, logits for every token when all is set, else
 * none (the prompt prefilled without logits). */
static ml_mli *collect(const run *r, uint32_t batch, unsigned threads, int logits)
{
    ml_error err;
    ml_mli *m;
    ck_assert(ml_mli_new(ml_mlb_get_header(r->mlb), &m, &err) == ML_OK);
    ml_ctx_params p = {.n_ctx = 64, .n_batch = batch, .n_threads = threads};
    ml_ctx *c;
    ck_assert(ml_ctx_new(r->model, &p, &c, &err) == ML_OK);
    ck_assert(ml_ctx_set_imatrix(c, m, &err) == ML_OK);
    uint32_t vocab = ml_mlb_get_header(r->mlb)->vocab;
    float *out = logits ? malloc(r->n * vocab * sizeof(float)) : NULL;
    ck_assert_msg(ml_ctx_eval(c, r->ids, r->n, out, 1, &err) == ML_OK, "%s", err.msg);
    free(out);
    ml_ctx_free(c);
    return m;
}

static ml_mli *open_fixture(const char *name)
{
    char path[256];
    ml_error err;
    ml_mli *m;
    snprintf(path, sizeof path, FIX "%s.mli", name);
    ck_assert_msg(ml_mli_open(path, &m, &err) == ML_OK, "%s: %s", path, err.msg);
    return m;
}

/* Every slot of every layer within float32 rounding of the reference: the
 * activations agree to ~3e-7 relative, so their squares summed over 40
 * tokens agree to well within 1e-5 of the slot's largest sum. */
static void compare_sums(const ml_mli *got, const ml_mli *want, const char *name)
{
    const ml_mli_info *gi = ml_mli_get_info(got);
    ml_error err;
    double a[4096], b[4096];
    for (int slot = ML_MLI_ATTN_IN; slot <= ML_MLI_CLS_IN; slot++)
        for (uint32_t l = 0; l < (slot == ML_MLI_CLS_IN ? 1 : gi->n_layers); l++) {
            size_t n = ml_mli_slot_size(got, (ml_mli_slot)slot);
            ck_assert(ml_mli_sums(got, (ml_mli_slot)slot, l, a, n, NULL, &err) == ML_OK);
            ck_assert(ml_mli_sums(want, (ml_mli_slot)slot, l, b, n, NULL, &err) == ML_OK);
            double big = 0;
            for (size_t i = 0; i < n; i++)
                big = fmax(big, b[i]);
            ck_assert_msg(big > 0 || slot == ML_MLI_WO_IN, "%s: slot %d layer %u empty", name,
                          slot, l);
            for (size_t i = 0; i < n; i++)
                ck_assert_msg(fabs(a[i] - b[i]) <= 1e-5 * big,
                              "%s: slot %d layer %u channel %zu: %.9g, reference %.9g", name,
                              slot, l, i, a[i], b[i]);
        }
}

START_TEST(test_matches_reference)
{
    run r;
    run_open(&r, models[_i]);
    ml_mli *want = open_fixture(models[_i]);
    ml_mli *got = collect(&r, 64, 1, 1);
    const ml_mli_info *gi = ml_mli_get_info(got), *wi = ml_mli_get_info(want);
    ck_assert_uint_eq(gi->layer_tokens, r.n);
    ck_assert_uint_eq(gi->cls_tokens, r.n);
    ck_assert_uint_eq(wi->layer_tokens, r.n);
    ck_assert_uint_eq(gi->q_dim, wi->q_dim);
    compare_sums(got, want, models[_i]);
    ml_mli_close(got);
    ml_mli_close(want);
    run_close(&r);
}
END_TEST

static void mli_bytes(const ml_mli *m, tu_mem *out)
{
    ml_error err;
    tu_mem_init(out);
    ck_assert(ml_mli_write(m, tu_mem_sink, out, &err) == ML_OK);
}

/* Sums are added token after token: the file is the same for every batch
 * size and thread count. */
START_TEST(test_invariance)
{
    run r;
    run_open(&r, models[_i]);
    ml_mli *base = collect(&r, 64, 1, 1);
    tu_mem want;
    mli_bytes(base, &want);
    const uint32_t batches[] = {1, 7, 16};
    for (size_t k = 0; k < 3; k++) {
        ml_mli *m = collect(&r, batches[k], 1 + (unsigned)k % 2, 1);
        tu_mem got;
        mli_bytes(m, &got);
        ck_assert_uint_eq(got.len, want.len);
        ck_assert_msg(memcmp(got.p, want.p, want.len) == 0, "%s: batch %u differs", models[_i],
                      batches[k]);
        tu_mem_free(&got);
        ml_mli_close(m);
    }
    tu_mem_free(&want);
    ml_mli_close(base);
    run_close(&r);
}
END_TEST

/* Prompt tokens prefilled without logits skip the classifier; the layers'
 * sums are the same either way. */
START_TEST(test_classifier_counts)
{
    run r;
    run_open(&r, "llama-q8");
    ml_mli *with = collect(&r, 8, 1, 1), *without = collect(&r, 8, 1, 0);
    ck_assert_uint_eq(ml_mli_get_info(without)->layer_tokens, r.n);
    ck_assert_uint_eq(ml_mli_get_info(without)->cls_tokens, 0);
    size_t n = ml_mli_slot_size(with, ML_MLI_CLS_IN);
    double a[96], b[96];
    ml_error err;
    ck_assert(ml_mli_sums(without, ML_MLI_CLS_IN, 0, a, n, NULL, &err) == ML_OK);
    for (size_t i = 0; i < n; i++)
        ck_assert(a[i] == 0);
    ck_assert(ml_mli_sums(with, ML_MLI_W2_IN, 1, a, 96, NULL, &err) == ML_OK);
    ck_assert(ml_mli_sums(without, ML_MLI_W2_IN, 1, b, 96, NULL, &err) == ML_OK);
    ck_assert(memcmp(a, b, sizeof(double) * 96) == 0);
    /* Generation-like use: one prompt without logits, then tokens with. */
    ml_ctx_params p = {.n_ctx = 64, .n_batch = 16, .n_threads = 1};
    ml_ctx *c;
    ml_mli *m;
    ck_assert(ml_mli_new(ml_mlb_get_header(r.mlb), &m, &err) == ML_OK);
    ck_assert(ml_ctx_new(r.model, &p, &c, &err) == ML_OK);
    ck_assert(ml_ctx_set_imatrix(c, m, &err) == ML_OK);
    float logits[96];
    ck_assert(ml_ctx_eval(c, r.ids, 20, logits, 0, &err) == ML_OK);
    ck_assert(ml_ctx_eval(c, r.ids + 20, 1, logits, 0, &err) == ML_OK);
    ck_assert(ml_ctx_set_imatrix(c, NULL, &err) == ML_OK);
    ck_assert(ml_ctx_eval(c, r.ids + 21, 1, logits, 0, &err) == ML_OK);
    ck_assert_uint_eq(ml_mli_get_info(m)->layer_tokens, 21);
    ck_assert_uint_eq(ml_mli_get_info(m)->cls_tokens, 2); /* the last of the prompt, then one */
    ml_ctx_free(c);
    ml_mli_close(m);
    ml_mli_close(with);
    ml_mli_close(without);
    run_close(&r);
}
END_TEST

/* What tools/mlb.py writes from the spec's table, ml_mli_write writes. */
START_TEST(test_write_matches_reference_bytes)
{
    char path[256];
    snprintf(path, sizeof path, FIX "%s.mli", models[_i]);
    FILE *f = fopen(path, "rb");
    ck_assert(f);
    static unsigned char file[1 << 16];
    size_t len = fread(file, 1, sizeof file, f);
    fclose(f);
    ml_mli *m = open_fixture(models[_i]);
    tu_mem out;
    mli_bytes(m, &out);
    ck_assert_uint_eq(out.len, len);
    ck_assert(memcmp(out.p, file, len) == 0);
    tu_mem_free(&out);
    ml_mli_close(m);
}
END_TEST

START_TEST(test_merge)
{
    ml_error err;
    ml_mli *a = open_fixture("qwen35"), *b = open_fixture("qwen35");
    ck_assert(ml_mli_merge(a, b, &err) == ML_OK);
    ck_assert_uint_eq(ml_mli_get_info(a)->layer_tokens, 2 * ml_mli_get_info(b)->layer_tokens);
    ck_assert_uint_eq(ml_mli_get_info(a)->cls_tokens, 2 * ml_mli_get_info(b)->cls_tokens);
    double x[128], y[128];
    ck_assert(ml_mli_sums(a, ML_MLI_WO_IN, 2, x, 128, NULL, &err) == ML_OK);
    ck_assert(ml_mli_sums(b, ML_MLI_WO_IN, 2, y, 128, NULL, &err) == ML_OK);
    for (int i = 0; i < 128; i++)
        ck_assert(x[i] == 2 * y[i]); /* doubling is exact */
    /* Other shapes: named field and its header offset. */
    ml_mli *other = open_fixture("llama-q8");
    TU_CHECK_ERR("n_layers", ml_mli_merge(a, other, &err), err, ML_E_MISMATCH, "n_layers", 8);
    ml_mli_close(other);
    /* Counters that overflow leave dst unchanged. */
    unsigned char hdr[40];
    memset(hdr, 0, sizeof hdr);
    memcpy(hdr, "MLI1", 4);
    uint32_t f[] = {1, 4, 32, 32, 0};
    for (int i = 0; i < 5; i++)
        for (int k = 0; k < 4; k++)
            hdr[4 + 4 * i + k] = (unsigned char)(f[i] >> (8 * k));
    memset(hdr + 24, 0xff, 8);
    ml_mli *big, *small;
    unsigned char *buf = calloc(1, 40 + 8 * (4 * 4 * 32 + 32));
    memcpy(buf, hdr, 40);
    ck_assert(ml_mli_open_memory(buf, 40 + 8 * (4 * 4 * 32 + 32), &big, &err) == ML_OK);
    buf[24] = 1, memset(buf + 25, 0, 7);
    ck_assert(ml_mli_open_memory(buf, 40 + 8 * (4 * 4 * 32 + 32), &small, &err) == ML_OK);
    TU_CHECK_ERR("overflow", ml_mli_merge(big, small, &err), err, ML_E_FORMAT, "layer_tokens", 24);
    ck_assert_uint_eq(ml_mli_get_info(big)->layer_tokens, UINT64_MAX);
    free(buf);
    ml_mli_close(big);
    ml_mli_close(small);
    ml_mli_close(a);
    ml_mli_close(b);
}
END_TEST

START_TEST(test_ctx_refuses_other_shape)
{
    run r;
    run_open(&r, "llama-q8");
    ml_mli *m = open_fixture("qwen35");
    ml_ctx_params p = {.n_ctx = 16, .n_batch = 4, .n_threads = 1};
    ml_ctx *c;
    ml_error err;
    ck_assert(ml_ctx_new(r.model, &p, &c, &err) == ML_OK);
    TU_CHECK_ERR("other model", ml_ctx_set_imatrix(c, m, &err), err, ML_E_MISMATCH, "n_layers",
                 8);
    ml_ctx_free(c);
    ml_mli_close(m);
    run_close(&r);
}
END_TEST

/* mli(5)'s decision, matrix by matrix. */
START_TEST(test_matrix_slots)
{
    ml_mlb_header h;
    ml_mlb_header_init(&h);
    h.dim = 64, h.n_heads = 4, h.head_dim = 32, h.hidden_dim = 96;
    h.lin_v_heads = 4, h.lin_v_dim = 16;
    static const struct {
        ml_role role;
        int slot;
        size_t channels;
    } want[] = {
        {ML_R_WQ, ML_MLI_ATTN_IN, 64},  {ML_R_WK, ML_MLI_ATTN_IN, 64},
        {ML_R_WV, ML_MLI_ATTN_IN, 64},  {ML_R_WG, ML_MLI_ATTN_IN, 64},
        {ML_R_LQKV, ML_MLI_ATTN_IN, 64}, {ML_R_LZ, ML_MLI_ATTN_IN, 64},
        {ML_R_LB, ML_MLI_ATTN_IN, 64},  {ML_R_LA, ML_MLI_ATTN_IN, 64},
        {ML_R_WO, ML_MLI_WO_IN, 128},   {ML_R_LOUT, ML_MLI_WO_IN, 64},
        {ML_R_W1, ML_MLI_FFN_IN, 64},   {ML_R_W3, ML_MLI_FFN_IN, 64},
        {ML_R_W2, ML_MLI_W2_IN, 96},    {ML_R_WCLS, ML_MLI_CLS_IN, 64},
        {ML_R_TOK_EMB, -1, 0},          {ML_R_LCONV, -1, 0},
        {ML_R_ATTN_NORM, -1, 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        size_t ch = 0;
        ck_assert_int_eq(ml_mli_matrix_slot(&h, want[i].role, &ch), want[i].slot);
        if (want[i].slot >= 0)
            ck_assert_uint_eq(ch, want[i].channels);
    }
    h.shared_classifier = 1;
    ck_assert_int_eq(ml_mli_matrix_slot(&h, ML_R_TOK_EMB, NULL), ML_MLI_CLS_IN);
    h.lin_v_heads = 16; /* lin_vd 256 > q_dim 128: lout takes none */
    ck_assert_int_eq(ml_mli_matrix_slot(&h, ML_R_LOUT, NULL), -1);
}
END_TEST

Suite *suite_mli(void)
{
    Suite *s = suite_create("mli");
    TCase *tc = tcase_create("collect");
    int n = (int)(sizeof models / sizeof models[0]);
    tcase_add_loop_test(tc, test_matches_reference, 0, n);
    tcase_add_loop_test(tc, test_invariance, 0, n);
    tcase_add_loop_test(tc, test_write_matches_reference_bytes, 0, n);
    tcase_add_test(tc, test_classifier_counts);
    tcase_add_test(tc, test_merge);
    tcase_add_test(tc, test_ctx_refuses_other_shape);
    tcase_add_test(tc, test_matrix_slots);
    suite_add_tcase(s, tc);
    return s;
}
