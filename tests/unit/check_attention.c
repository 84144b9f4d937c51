/* check_attention.c - the attention of the forward pass (lib/runtime/
 * attention.c) over head layouts the fixtures do not have: multi-head, one
 * KV head for six query heads (a group of 4 and a remainder of 2), 8/2,
 * 9/3, with a sliding-window layer whose ring wraps inside a batch and a
 * full-context layer.  Logits are the same bits whatever the batch (1 to
 * the whole prompt) and the thread count (which changes how many query
 * heads work together, down to one per work item in decode); with an
 * f16, Q8_0 or Q4_0 cache, whatever the kernel variant too (the blocked
 * types on layouts whose head size is a multiple of 32, the decode step's
 * halves of a head's columns splitting a block where it is 96). */
#include "suites.h"
#include "testutil.h"

#include "mlcore.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct layout {
    uint32_t heads, kv, head_dim;
} layout;
static const layout layouts[] = {{4, 4, 16}, {6, 1, 16}, {8, 2, 16}, {9, 3, 32}};
/* For Q8_0 and Q4_0 caches: head sizes in blocks of 32. */
static const layout block_layouts[] = {{9, 3, 32}, {6, 1, 96}, {4, 2, 64}};

enum { N = 40, VOCAB = 64 };

static float *run_kv(ml_model *m, uint32_t batch, unsigned threads, ml_cache_type k,
                     ml_cache_type v)
{
    ml_ctx_params cp = {
        .n_ctx = 64, .n_batch = batch, .n_threads = threads, .cache_k = k, .cache_v = v};
    ml_ctx *c;
    ml_error err;
    ck_assert_msg(ml_ctx_new(m, &cp, &c, &err) == ML_OK, "%s", err.msg);
    ml_token ids[N];
    for (int i = 0; i < N; i++)
        ids[i] = (i * 29 + 5) % VOCAB;
    float *out = malloc((size_t)N * VOCAB * sizeof(float));
    ck_assert(out);
    /* in two calls, so the second starts with a filled cache */
    ck_assert_msg(ml_ctx_eval(c, ids, 13, out, 1, &err) == ML_OK, "%s", err.msg);
    ck_assert_msg(ml_ctx_eval(c, ids + 13, N - 13, out + 13 * VOCAB, 1, &err) == ML_OK, "%s",
                  err.msg);
    ml_ctx_free(c);
    return out;
}

static float *run_cache(ml_model *m, uint32_t batch, unsigned threads, ml_cache_type type)
{
    return run_kv(m, batch, threads, type, type);
}

static float *run(ml_model *m, uint32_t batch, unsigned threads)
{
    return run_cache(m, batch, threads, ML_CACHE_F32);
}

/* A layout as an in-memory .mlb (seed 9). */
static void layout_model(const layout *ly, ml_mlb_header *hp, tu_mem *mem)
{
    ml_mlb_header h;
    ml_mlb_header_init(&h);
    h.n_heads = ly->heads, h.n_kv_heads = ly->kv, h.head_dim = ly->head_dim;
    h.dim = 64, h.n_layers = 2, h.hidden_dim = 64, h.vocab = VOCAB, h.max_seq = 64;
    h.rope_theta = 10000, h.norm_eps = 1e-5f, h.wtype = ML_WTYPE_Q8_0, h.layer_flags = 1;
    h.sliding_window = 5, h.attn_softcap = 20, h.qk_norm = 1;
    const uint8_t flags[2] = {ML_LAYER_SLIDING, 0};
    tu_mem_init(mem);
    ml_error err;
    ck_assert_msg(ml_mlb_write_random(&h, flags, 9, tu_mem_sink, mem, &err) == ML_OK, "%s",
                  err.msg);
    *hp = h;
}

START_TEST(test_layouts)
{
    ml_mlb_header h;
    tu_mem mem;
    layout_model(&layouts[_i], &h, &mem);
    ml_error err;
    ml_mlb *mlb;
    ml_model *m;
    ck_assert_msg(ml_mlb_open_memory(mem.p, mem.len, &mlb, &err) == ML_OK, "%s", err.msg);
    ck_assert_msg(ml_model_new(mlb, &m, &err) == ML_OK, "%s", err.msg);
    float *want = run(m, N, 1);
    for (size_t i = 0; i < (size_t)N * VOCAB; i++)
        ck_assert(isfinite(want[i]));
    static const struct {
        uint32_t batch;
        unsigned threads;
    } runs[] = {{1, 1}, {1, 2}, {1, 3}, {3, 3}, {4, 2}, {16, 3}, {27, 2}};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        float *got = run(m, runs[r].batch, runs[r].threads);
        ck_assert_msg(memcmp(got, want, (size_t)N * VOCAB * sizeof(float)) == 0,
                      "%u/%u heads, batch %u, %u threads: logits differ", h.n_heads,
                      h.n_kv_heads, runs[r].batch, runs[r].threads);
        free(got);
    }
    free(want);
    ml_model_free(m);
    ml_mlb_close(mlb);
    tu_mem_free(&mem);
}
END_TEST

/* With an f16 cache: every kernel variant this CPU runs, batch and thread
 * count gives the scalar reference's bits, the window's ring wrapping
 * inside a batch too. */
START_TEST(test_layouts_f16)
{
    static const char *const kernels[] = {"scalar", "avx2", "avx512", "neon", "neondot"};
    static const struct {
        uint32_t batch;
        unsigned threads;
    } runs[] = {{N, 1}, {1, 2}, {3, 3}, {16, 2}, {27, 2}};
    ml_mlb_header h;
    tu_mem mem;
    layout_model(&layouts[_i], &h, &mem);
    float *want = NULL;
    for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
        ml_mlb *mlb;
        ml_model *m;
        ml_error err;
        ck_assert_msg(ml_mlb_open_memory(mem.p, mem.len, &mlb, &err) == ML_OK, "%s", err.msg);
        setenv("ML_KERNELS", kernels[k], 1);
        ml_status s = ml_model_new(mlb, &m, &err);
        unsetenv("ML_KERNELS");
        if (s) { /* not on this CPU */
            ml_mlb_close(mlb);
            continue;
        }
        for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
            float *got = run_cache(m, runs[r].batch, runs[r].threads, ML_CACHE_F16);
            if (!want) {
                want = got;
                continue;
            }
            ck_assert_msg(memcmp(got, want, (size_t)N * VOCAB * sizeof(float)) == 0,
                          "%u/%u heads, kernels %s, batch %u, %u threads: f16 logits differ",
                          h.n_heads, h.n_kv_heads, kernels[k], runs[r].batch, runs[r].threads);
            free(got);
        }
        ml_model_free(m);
        ml_mlb_close(mlb);
    }
    free(want);
    tu_mem_free(&mem);
}
END_TEST

/* With Q8_0 and Q4_0 caches (both of a type, and keys Q8_0 beside Q4_0
 * values): every kernel variant this CPU runs, batch and thread count
 * gives the scalar reference's bits, the window's ring wrapping inside a
 * batch too. */
START_TEST(test_layouts_blocks)
{
    static const char *const kernels[] = {"scalar", "avx2", "avx512", "neon", "neondot"};
    static const struct {
        uint32_t batch;
        unsigned threads;
    } runs[] = {{N, 1}, {1, 2}, {1, 3}, {3, 3}, {16, 2}, {27, 2}};
    static const ml_cache_type kv[][2] = {
        {ML_CACHE_Q8_0, ML_CACHE_Q8_0}, {ML_CACHE_Q4_0, ML_CACHE_Q4_0}, {ML_CACHE_Q8_0, ML_CACHE_Q4_0}};
    ml_mlb_header h;
    tu_mem mem;
    layout_model(&block_layouts[_i], &h, &mem);
    float *want[3] = {NULL, NULL, NULL};
    for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
        ml_mlb *mlb;
        ml_model *m;
        ml_error err;
        ck_assert_msg(ml_mlb_open_memory(mem.p, mem.len, &mlb, &err) == ML_OK, "%s", err.msg);
        setenv("ML_KERNELS", kernels[k], 1);
        ml_status s = ml_model_new(mlb, &m, &err);
        unsetenv("ML_KERNELS");
        if (s) { /* not on this CPU */
            ml_mlb_close(mlb);
            continue;
        }
        for (size_t t = 0; t < 3; t++)
            for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
                float *got = run_kv(m, runs[r].batch, runs[r].threads, kv[t][0], kv[t][1]);
                if (!want[t]) {
                    for (size_t i = 0; i < (size_t)N * VOCAB; i++)
                        ck_assert(isfinite(got[i]));
                    want[t] = got;
                    continue;
                }
                ck_assert_msg(memcmp(got, want[t], (size_t)N * VOCAB * sizeof(float)) == 0,
                              "%u/%u heads of %u, kernels %s, batch %u, %u threads: %s/%s logits "
                              "differ",
                              h.n_heads, h.n_kv_heads, h.head_dim, kernels[k], runs[r].batch,
                              runs[r].threads, ml_cache_type_name(kv[t][0]),
                              ml_cache_type_name(kv[t][1]));
                free(got);
            }
        ml_model_free(m);
        ml_mlb_close(mlb);
    }
    /* each type's blocks are read as what they hold */
    ck_assert(want[0] && want[1] && memcmp(want[0], want[1], (size_t)N * VOCAB * 4) != 0);
    for (size_t t = 0; t < 3; t++)
        free(want[t]);
    tu_mem_free(&mem);
}
END_TEST

Suite *suite_attention(void)
{
    Suite *s = suite_create("attention");
    TCase *tc = tcase_create("layouts");
    tcase_add_loop_test(tc, test_layouts, 0, (int)(sizeof layouts / sizeof layouts[0]));
    tcase_add_loop_test(tc, test_layouts_f16, 0, (int)(sizeof layouts / sizeof layouts[0]));
    tcase_add_loop_test(tc, test_layouts_blocks, 0,
                        (int)(sizeof block_layouts / sizeof block_layouts[0]));
    suite_add_tcase(s, tc);
    return s;
}
