/* check_moe.c - the mixture-of-experts runtime (lib/runtime/moe.c,
 * docs/design-moe.md sections 4 and 5) without a GGUF: the canonical
 * choice of experts against a brute-force stable sort (ties by lower
 * index, +0 = -0, NaN last); a random MoE model whose routers force exact
 * ties, where the tied experts chosen are the lower-indexed ones and the
 * logits' bits do not depend on the thread count, the batch size or the
 * kernel variant; and a random model of gpt-oss's form (sinks, output,
 * router and expert biases, the clamped SwiGLU, gating on the logits,
 * a window on one layer) whose bits do not either, and whose every one of
 * those arrays changes the logits.  (The body's layout is
 * check_mlb_moe.c's; the math against llama.cpp is check_e2e.c's.) */
#include "suites.h"
#include "testutil.h"

#include "runtime/ctx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---------------------------------------------------------------------------
 * The choice
 * ------------------------------------------------------------------------- */

/* Reference order, written independently of moe.c: rank by (is NaN,
 * -score, index) with a stable insertion sort over all n. */
static int ref_before(float a, uint32_t ia, float b, uint32_t ib)
{
    int na = a != a, nb = b != b;
    if (na != nb)
        return nb;
    if (!na && a != b)
        return a > b;
    return ia < ib;
}

static void ref_select(const float *s, uint32_t n, uint32_t k, uint32_t *out)
{
    uint32_t order[64];
    for (uint32_t i = 0; i < n; i++) {
        uint32_t j = i;
        for (; j > 0 && ref_before(s[i], i, s[order[j - 1]], order[j - 1]); j--)
            order[j] = order[j - 1];
        order[j] = i;
    }
    memcpy(out, order, k * sizeof *out);
}

static void check_select(const float *s, uint32_t n, uint32_t k, const uint32_t *want)
{
    uint32_t got[64];
    memset(got, 0xff, sizeof got);
    ml__moe_select(s, n, k, got);
    for (uint32_t i = 0; i < k; i++)
        TU_REQUIRE(got[i] == want[i], "n %u k %u: slot %u is expert %u, expected %u", n, k, i,
                   got[i], want[i]);
    TU_REQUIRE(got[k] == 0xffffffffu, "n %u k %u: wrote past k", n, k); /* k entries, no more */
}

START_TEST(test_select_ties)
{
    const float s1[] = {1, 3, 3, 2};
    check_select(s1, 4, 2, (const uint32_t[]){1, 2});
    check_select(s1, 4, 4, (const uint32_t[]){1, 2, 3, 0});
    const float s2[] = {-0.0f, 0.0f, -1}; /* +0 equals -0: by index */
    check_select(s2, 3, 1, (const uint32_t[]){0});
    check_select(s2, 3, 2, (const uint32_t[]){0, 1});
    const float s3[] = {0.0f, -0.0f};
    check_select(s3, 2, 1, (const uint32_t[]){0});
    const float s4[] = {NAN, 1, NAN, -INFINITY}; /* NaN after every number */
    check_select(s4, 4, 3, (const uint32_t[]){1, 3, 0});
    check_select(s4, 4, 4, (const uint32_t[]){1, 3, 0, 2});
    const float s5[] = {-INFINITY, -3e38f, -INFINITY};
    check_select(s5, 3, 2, (const uint32_t[]){1, 0});
    const float s6[] = {5, 5, 5, 5, 5, 5, 5, 5}; /* all equal: the first k in order */
    check_select(s6, 8, 3, (const uint32_t[]){0, 1, 2});
    check_select(s6, 8, 8, (const uint32_t[]){0, 1, 2, 3, 4, 5, 6, 7});
}
END_TEST

/* Random scores from a small set (many ties, signed zeros, NaNs). */
START_TEST(test_select_random)
{
    const float vals[] = {0.0f, -0.0f, 1, -1, 0.5f, NAN, INFINITY, -INFINITY, 1e-45f};
    tu_rng r = {77};
    for (int trial = 0; trial < 3000; trial++) {
        uint32_t n = 1 + tu_below(&r, 40), k = 1 + tu_below(&r, n);
        float s[64];
        uint32_t want[64];
        for (uint32_t i = 0; i < n; i++)
            s[i] = vals[tu_below(&r, sizeof vals / sizeof vals[0])];
        ref_select(s, n, k, want);
        check_select(s, n, k, want);
    }
}
END_TEST

/* ---------------------------------------------------------------------------
 * The runtime
 * ------------------------------------------------------------------------- */

/* The random model with every router forced to exact ties: rows 1 and 5
 * equal, every other row zero.  A token then scores +0 for experts 0, 2,
 * 3, 4, 6, 7 and one value v for both 1 and 5, so the choice is {1, 5}
 * when v > 0 and {0, 2} when v < 0, each pair tied. */
static void tie_model(tu_mem *out)
{
    ml_mlb_header h;
    tu_moe_header(&h, ML_WTYPE_Q8_0);
    tu_write_random(&h, NULL, 21, out);
    tu_buf b;
    ml_mlb *m = tu_open_copy(&b, out);
    for (int32_t l = 0; l < 2; l++) {
        const ml_tensor *wr = ml_mlb_get(m, ML_R_WR, l);
        float *rows = (float *)(void *)(out->p + wr->offset);
        for (uint32_t e = 0; e < 8; e++)
            if (e != 1 && e != 5)
                memset(rows + e * 64, 0, 64 * sizeof(float));
        memcpy(rows + 5 * 64, rows + 1 * 64, 64 * sizeof(float));
    }
    ml_mlb_close(m);
    tu_buf_free(&b);
}

typedef struct trace {
    int pairs[2]; /* times {1, 5} and {0, 2} were chosen */
} trace;

static void on_route(void *ctx, uint32_t layer, size_t n_tok, const uint32_t *pos,
                     const uint32_t *chosen, const float *w)
{
    (void)layer, (void)pos;
    trace *tr = ctx;
    for (size_t t = 0; t < n_tok; t++) {
        const uint32_t *c = chosen + 2 * t;
        int hi = c[0] == 1 && c[1] == 5, lo = c[0] == 0 && c[1] == 2;
        TU_REQUIRE(hi || lo, "chose %u, %u", c[0], c[1]);
        TU_REQUIRE(w[2 * t] == 0.5f && w[2 * t + 1] == 0.5f, "weights %g %g", /* tied */
                   (double)w[2 * t], (double)w[2 * t + 1]);
        tr->pairs[hi ? 0 : 1]++;
    }
}

#define N_TOK 29

/* All logits of the prompt with n_threads and n_batch; records routing. */
static float *run(const tu_mem *file, unsigned threads, uint32_t batch, trace *tr)
{
    tu_buf b;
    ml_mlb *mlb = tu_open_copy(&b, file);
    ml_model *model;
    ml_ctx *c;
    ml_error err;
    ck_assert_msg(ml_model_new(mlb, &model, &err) == ML_OK, "%s", err.msg);
    ml_ctx_params p = {.n_ctx = 64, .n_batch = batch, .n_threads = threads};
    ck_assert_msg(ml_ctx_new(model, &p, &c, &err) == ML_OK, "%s", err.msg);
    c->moe_trace = tr ? on_route : NULL;
    c->moe_trace_ctx = tr;
    ml_token ids[N_TOK];
    for (size_t i = 0; i < N_TOK; i++)
        ids[i] = (ml_token)((i * 37 + 11) % 64);
    float *logits = malloc(N_TOK * 64 * sizeof(float));
    ck_assert_msg(ml_ctx_eval(c, ids, N_TOK, logits, 1, &err) == ML_OK, "%s", err.msg);
    for (size_t i = 0; i < N_TOK * 64; i++)
        TU_REQUIRE(isfinite(logits[i]), "logit %zu is %g", i, (double)logits[i]);
    ml_ctx_free(c);
    ml_model_free(model);
    ml_mlb_close(mlb);
    tu_buf_free(&b);
    return logits;
}

/* Whether this CPU runs the kernel variant ML_KERNELS names now. */
static int variant_runs(const tu_mem *file)
{
    tu_buf b;
    ml_mlb *mlb = tu_open_copy(&b, file);
    ml_model *model;
    ml_error err;
    int ok = ml_model_new(mlb, &model, &err) == ML_OK;
    if (ok)
        ml_model_free(model);
    ml_mlb_close(mlb);
    tu_buf_free(&b);
    return ok;
}

/* The bits of ref (one token at a time, one thread) again with other
 * threads and batch sizes, then with every kernel variant this CPU runs;
 * where ref_trace is given, with the same routing. */
static void same_bits_everywhere(const tu_mem *file, const float *ref, const trace *ref_trace)
{
    const struct { unsigned threads; uint32_t batch; } runs[] = {
        {1, 29}, {2, 7}, {3, 29}, {2, 1}, {1, 4},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        trace t2 = {{0, 0}};
        float *x = run(file, runs[i].threads, runs[i].batch, ref_trace ? &t2 : NULL);
        ck_assert_msg(memcmp(x, ref, N_TOK * 64 * sizeof(float)) == 0,
                      "threads %u, batch %u: other bits", runs[i].threads, runs[i].batch);
        if (ref_trace)
            ck_assert_int_eq(t2.pairs[0], ref_trace->pairs[0]);
        free(x);
    }
    const char *names[] = {"scalar", "avx2", "avx512", "amx", "neon", "neondot"};
    for (size_t v = 0; v < sizeof names / sizeof names[0]; v++) {
        setenv("ML_KERNELS", names[v], 1);
        if (!variant_runs(file)) /* not on this CPU */
            continue;
        trace t2 = {{0, 0}};
        float *x = run(file, 2, 7, ref_trace ? &t2 : NULL);
        ck_assert_msg(memcmp(x, ref, N_TOK * 64 * sizeof(float)) == 0, "kernels %s differ",
                      names[v]);
        if (ref_trace)
            ck_assert_int_eq(t2.pairs[0], ref_trace->pairs[0]);
        free(x);
    }
    unsetenv("ML_KERNELS");
}

START_TEST(test_ties_and_bits)
{
    tu_mem file;
    tie_model(&file);
    trace tr = {{0, 0}};
    float *ref = run(&file, 1, 1, &tr); /* one token at a time: decode */
    ck_assert_msg(tr.pairs[0] > 0 && tr.pairs[1] > 0, "only one pair chosen (%d, %d)",
                  tr.pairs[0], tr.pairs[1]);
    same_bits_everywhere(&file, ref, &tr);
    free(ref);
    tu_mem_free(&file);
}
END_TEST

/* gpt-oss's form, small: every addition of its architecture at once,
 * layer 0 windowed (8 positions, so the 29 tokens wrap its ring). */
static void gpt_oss_model(tu_mem *out)
{
    ml_mlb_header h;
    tu_moe_header(&h, ML_WTYPE_Q8_0);
    tu_apply(&h, NULL,
             "qk_norm=0 qkv_bias=1 sliding_window=8 layer_flags=1 act=2 swiglu_alpha=1.702 "
             "swiglu_limit=7 attn_sinks=1 o_bias=1 moe_gating=1 moe_flags=6");
    const uint8_t flags[2] = {ML_LAYER_SLIDING | ML_LAYER_MOE, ML_LAYER_MOE};
    tu_write_random(&h, flags, 33, out);
}

/* The bits of every run of the gpt-oss model equal one token at a time
 * on one thread: threads, batch sizes, kernel variants. */
START_TEST(test_gpt_oss_bits)
{
    tu_mem file;
    gpt_oss_model(&file);
    float *ref = run(&file, 1, 1, NULL);
    same_bits_everywhere(&file, ref, NULL);
    free(ref);
    tu_mem_free(&file);
}
END_TEST

/* w as a Q4_1 matrix of its shape (its bytes unread: only the kernels'
 * grouping is asked of it). */
static void as_q4_1(ml_mat *w)
{
    if (w->q)
        w->type = ML_TYPE_Q4_1, w->row_bytes = ml__blk_row_bytes(ML_TYPE_Q4_1, w->cols);
}

/* ml_ctx_step_group counts the experts by the token (another token reads
 * other experts): with the dense matrices and the classifier in a type
 * whose products group tokens, and the experts too, still 1. */
START_TEST(test_step_group_experts)
{
    tu_mem file;
    gpt_oss_model(&file);
    tu_buf b;
    ml_mlb *mlb = tu_open_copy(&b, &file);
    ml_model *model;
    ml_error err;
    ck_assert_msg(ml_model_new(mlb, &model, &err) == ML_OK, "%s", err.msg);
    for (uint32_t l = 0; l < model->h.n_layers; l++) {
        ml_layer *y = &model->layers[l];
        as_q4_1(&y->wq), as_q4_1(&y->wk), as_q4_1(&y->wv), as_q4_1(&y->wo);
        for (uint32_t i = 0; i < 3 * model->h.n_experts; i++)
            as_q4_1(&y->ew[i]);
    }
    as_q4_1(&model->wcls);
    const ml_kernels *vs[8];
    const size_t nv = ml__kernels_available(vs, 8);
    for (size_t v = 0; v < nv; v++) {
        model->k = vs[v];
        ml_ctx_params p = {.n_ctx = 64, .n_batch = 32, .n_threads = 1};
        ml_ctx *c;
        ck_assert_msg(ml_ctx_new(model, &p, &c, &err) == ML_OK, "%s", err.msg);
        for (uint32_t n = 1; n <= 32; n++)
            ck_assert_msg(ml_ctx_step_group(c, n) == 1, "%s, %u tokens: group %u",
                          vs[v]->name, n, ml_ctx_step_group(c, n));
        ml_ctx_free(c);
    }
    ml_model_free(model);
    ml_mlb_close(mlb);
    tu_buf_free(&b);
    tu_mem_free(&file);
}
END_TEST

/* Each of gpt-oss's arrays is read: adding 0.25 to 1.25 to the elements
 * of one role's arrays (all layers, all experts; not all alike, since a
 * softmax does not see a shift of all its logits) changes the logits. */
START_TEST(test_gpt_oss_arrays_used)
{
    tu_mem file;
    gpt_oss_model(&file);
    float *ref = run(&file, 2, 7, NULL);
    const ml_role roles[] = {ML_R_SINKS, ML_R_BO, ML_R_RB, ML_R_EB1, ML_R_EB2, ML_R_EB3};
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++) {
        tu_mem edited;
        tu_mem_init(&edited);
        ck_assert(tu_mem_sink(&edited, file.p, file.len, NULL) == ML_OK);
        tu_buf b;
        ml_mlb *m = tu_open_copy(&b, &edited);
        size_t n = 0;
        for (size_t t = 0; t < ml_mlb_n_tensors(m); t++) {
            const ml_tensor *x = ml_mlb_tensor(m, t);
            if (x->role != roles[i])
                continue;
            float *v = (float *)(void *)(edited.p + x->offset);
            for (uint64_t e = 0; e < x->nbytes / sizeof(float); e++)
                v[e] += 0.25f * (float)(e % 5 + 1);
            n++;
        }
        ml_mlb_close(m);
        tu_buf_free(&b);
        ck_assert_msg(n > 0, "role %d: no arrays", (int)roles[i]);
        float *x = run(&edited, 2, 7, NULL);
        ck_assert_msg(memcmp(x, ref, N_TOK * 64 * sizeof(float)) != 0,
                      "role %d: the logits did not change", (int)roles[i]);
        free(x);
        tu_mem_free(&edited);
    }
    free(ref);
    tu_mem_free(&file);
}
END_TEST

Suite *suite_moe(void)
{
    Suite *s = suite_create("moe");
    TCase *tc = tcase_create("moe");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_select_ties);
    tcase_add_test(tc, test_select_random);
    tcase_add_test(tc, test_ties_and_bits);
    tcase_add_test(tc, test_gpt_oss_bits);
    tcase_add_test(tc, test_step_group_experts);
    tcase_add_test(tc, test_gpt_oss_arrays_used);
    suite_add_tcase(s, tc);
    return s;
}
