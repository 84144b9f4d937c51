/* check_runtime_cache.c - the f16, Q8_0 and Q4_0 KV caches
 * (ml_ctx_params.cache_k and cache_v) on every runtime fixture: the same
 * bits for every kernel variant, batch size, thread count and mix of
 * sequences; logits close to the f32 cache's; the types' bytes
 * (linear-attention state unchanged); truncate, keep and reset as with
 * f32; unknown types refused, and Q8_0 or Q4_0 where the head size is not
 * a multiple of 32. */
#include "suites.h"
#include "testutil.h"

#include "mlcore.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIX "tests/fixtures/runtime/"

static const char *const models[] = {"llama-q8", "llama-q4",  "llama3-rope", "linear-rope",
                                     "yarn-rope", "qwen",     "gemma",       "gated",
                                     "window",   "qwen35"};
#define N_MODELS (sizeof models / sizeof models[0])

enum { LEN = 24, N_CTX = 32 };

typedef struct fixture {
    ml_mlb *mlb;
    ml_model *model;
    uint32_t vocab;
    ml_token ids[LEN];
} fixture;

/* The model under the kernel variant ML_KERNELS names (NULL for the
 * automatic choice); 0 when this CPU lacks it. */
static int fixture_open(fixture *fx, const char *name, const char *kernels)
{
    char path[256];
    ml_error err;
    memset(fx, 0, sizeof *fx);
    if (kernels)
        setenv("ML_KERNELS", kernels, 1);
    snprintf(path, sizeof path, FIX "%s.mlb", name);
    ck_assert_msg(ml_mlb_open(path, &fx->mlb, &err) == ML_OK, "%s: %s", path, err.msg);
    ml_status s = ml_model_new(fx->mlb, &fx->model, &err);
    unsetenv("ML_KERNELS");
    if (s) {
        ml_mlb_close(fx->mlb);
        return 0;
    }
    fx->vocab = ml_mlb_get_header(fx->mlb)->vocab;
    tu_rng rng = {0xf16 + (uint64_t)strlen(name)};
    for (size_t i = 0; i < LEN; i++)
        fx->ids[i] = tu_below(&rng, fx->vocab);
    return 1;
}

static void fixture_close(fixture *fx)
{
    ml_model_free(fx->model);
    ml_mlb_close(fx->mlb);
}

static ml_ctx *ctx_new(const fixture *fx, ml_cache_type k, ml_cache_type v, uint32_t batch,
                       unsigned threads, uint32_t n_seq)
{
    ml_ctx_params p = {.n_ctx = N_CTX, .n_batch = batch, .n_threads = threads, .n_seq = n_seq,
                       .cache_k = k, .cache_v = v};
    ml_ctx *c;
    ml_error err;
    ck_assert_msg(ml_ctx_new(fx->model, &p, &c, &err) == ML_OK, "%s", err.msg);
    return c;
}

/* Every position's logits, the prompt in two calls (the second starts
 * from a filled cache). */
static float *run_all(const fixture *fx, ml_cache_type k, ml_cache_type v, uint32_t batch,
                      unsigned threads)
{
    ml_ctx *c = ctx_new(fx, k, v, batch, threads, 1);
    float *out = malloc((size_t)LEN * fx->vocab * sizeof(float));
    ck_assert(out);
    ml_error err;
    ck_assert(ml_ctx_eval(c, fx->ids, 9, out, 1, &err) == ML_OK);
    ck_assert(ml_ctx_eval(c, fx->ids + 9, LEN - 9, out + 9 * fx->vocab, 1, &err) == ML_OK);
    ml_ctx_free(c);
    return out;
}

static size_t bytes(const fixture *fx)
{
    return (size_t)LEN * fx->vocab * sizeof(float);
}

/* 1 when the fixture's head size takes Q8_0 and Q4_0 blocks (32 in
 * qwen, gemma, gated and qwen35; 16 in the others). */
static int fits_blocks(const fixture *fx)
{
    return ml_cache_type_check(ml_mlb_get_header(fx->mlb), ML_CACHE_Q8_0, NULL) == ML_OK;
}

/* The key and value types the tests run: both of a type, and mixes. */
static const ml_cache_type kv[][2] = {
    {ML_CACHE_F16, ML_CACHE_F16},  {ML_CACHE_F16, ML_CACHE_F32},  {ML_CACHE_F32, ML_CACHE_F16},
    {ML_CACHE_Q8_0, ML_CACHE_Q8_0}, {ML_CACHE_Q4_0, ML_CACHE_Q4_0}, {ML_CACHE_Q8_0, ML_CACHE_F16},
    {ML_CACHE_F32, ML_CACHE_Q4_0}};
#define N_KV (sizeof kv / sizeof kv[0])

/* kv[t] is a pair this fixture can cache. */
static int kv_fits(const fixture *fx, size_t t)
{
    return fits_blocks(fx) || (kv[t][0] < ML_CACHE_Q8_0 && kv[t][1] < ML_CACHE_Q8_0);
}

/* Every kernel variant, batch and thread count: the scalar reference's
 * bits, with both caches of a type and with mixes (the mixes and f16
 * alone at one batch and thread count; f16, Q8_0 and Q4_0 for both at
 * every one).  Q8_0 and Q4_0 where the head size takes them. */
START_TEST(test_same_bits)
{
    static const char *const kernels[] = {"scalar", "avx2", "avx512", "neon", "neondot"};
    static const struct {
        uint32_t batch;
        unsigned threads;
    } runs[] = {{64, 1}, {1, 1}, {1, 2}, {5, 3}, {16, 2}};
    fixture fx;
    ck_assert(fixture_open(&fx, models[_i], "scalar"));
    float *ref[N_KV] = {0};
    for (size_t t = 0; t < N_KV; t++)
        if (kv_fits(&fx, t))
            ref[t] = run_all(&fx, kv[t][0], kv[t][1], 64, 1);
    fixture_close(&fx);
    for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
        if (!fixture_open(&fx, models[_i], kernels[k]))
            continue; /* not on this CPU */
        for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++)
            for (size_t t = 0; t < N_KV; t++) {
                if (!ref[t] || (r > 0 && kv[t][0] != kv[t][1]))
                    continue;
                float *got = run_all(&fx, kv[t][0], kv[t][1], runs[r].batch, runs[r].threads);
                ck_assert_msg(memcmp(got, ref[t], bytes(&fx)) == 0,
                              "%s: kernels %s, batch %u, %u threads, cache %s/%s: logits differ",
                              models[_i], kernels[k], runs[r].batch, runs[r].threads,
                              ml_cache_type_name(kv[t][0]), ml_cache_type_name(kv[t][1]));
                free(got);
            }
        fixture_close(&fx);
    }
    for (size_t t = 0; t < N_KV; t++)
        free(ref[t]);
}
END_TEST

/* How far a cache of type t moves the logits from the f32 cache's: each
 * position's largest move over the largest f32 logit, the largest over
 * the positions into *most, their mean returned. */
static double moved(const fixture *fx, ml_cache_type t, double *most)
{
    float *f32 = run_all(fx, ML_CACHE_F32, ML_CACHE_F32, 64, 1);
    float *got = run_all(fx, t, t, 64, 1);
    double sum = 0;
    *most = 0;
    for (size_t p = 0; p < LEN; p++) {
        const float *a = got + p * fx->vocab, *b = f32 + p * fx->vocab;
        double maxabs = 1e-6, diff = 0;
        for (uint32_t i = 0; i < fx->vocab; i++) {
            ck_assert(isfinite(a[i]));
            maxabs = fmax(maxabs, fabs(b[i]));
            diff = fmax(diff, fabs(a[i] - b[i]));
        }
        *most = fmax(*most, diff / maxabs);
        sum += diff / maxabs;
    }
    free(f32);
    free(got);
    return sum / LEN;
}

/* Close to the f32 cache.  A key or value rounded to f16 moves by at most
 * 2^-11 of itself, but these random models amplify it (an activation that
 * moves across a Q8_0 rounding boundary takes the next quant): their
 * logits move by 0.5% to 5% of their range, 2% on average (the f16
 * cache's logits are those of the f32 math on the rounded keys and
 * values, bit for bit, checked when it was written).  A wrong read of the
 * halves (another row, a lost scale) moves them by their whole range.
 * So: every position within 10% of the range, the mean within 3%. */
START_TEST(test_close_to_f32)
{
    fixture fx;
    ck_assert(fixture_open(&fx, models[_i], NULL));
    double most, mean = moved(&fx, ML_CACHE_F16, &most);
    ck_assert_msg(most < 0.1, "%s: f16 cache moves a position's logits by %g of their range",
                  models[_i], most);
    ck_assert_msg(mean < 0.03, "%s: f16 cache moves logits by %g of their range on average",
                  models[_i], mean);
    ck_assert_msg(mean > 0, "%s: the f16 cache gives the f32 bits", models[_i]);
    fixture_close(&fx);
}
END_TEST

/* Q8_0 and Q4_0 caches: close to the f32 cache, Q4_0 less so; where the
 * head size is not a multiple of 32, refused (ML_E_UNSUPPORTED, naming
 * head_dim).  Q8_0 moves a value by up to half of 1/127 of its block's
 * largest, Q4_0 by up to 1/8 of it.  Measured on the four fixtures with
 * heads of 32 (qwen, gemma, gated, qwen35): Q8_0 moves the logits by 0.4%
 * to 2.9% of their range on average, 5.5% at most at a position (f16:
 * 0.2% to 1.9%, 3.7%); Q4_0 by 2.4% to 19%, 37% at most.  A lost scale or
 * a wrong block moves them by their whole range.  So: Q8_0 within 6% on
 * average and 15% everywhere, Q4_0 within 35% and 60%, and Q4_0 further
 * than Q8_0. */
#define Q8_MOST 0.15
#define Q8_MEAN 0.06
#define Q4_MOST 0.6
#define Q4_MEAN 0.35
START_TEST(test_blocks_close_to_f32)
{
    fixture fx;
    ck_assert(fixture_open(&fx, models[_i], NULL));
    if (!fits_blocks(&fx)) {
        for (ml_cache_type t = ML_CACHE_Q8_0; t <= ML_CACHE_Q4_0; t++) {
            ml_ctx_params p = {.n_ctx = 8, .cache_k = t};
            ml_ctx *c = (ml_ctx *)&p;
            ml_error err;
            ck_assert_int_eq(ml_ctx_new(fx.model, &p, &c, &err), ML_E_UNSUPPORTED);
            ck_assert_ptr_null(c);
            ck_assert_msg(strstr(err.msg, "head_dim: 16 (dim / n_heads) is not a multiple"), "%s", err.msg);
        }
        fixture_close(&fx);
        return;
    }
    double m8, m4, q8 = moved(&fx, ML_CACHE_Q8_0, &m8), q4 = moved(&fx, ML_CACHE_Q4_0, &m4);
    ck_assert_msg(m8 < Q8_MOST && q8 < Q8_MEAN && q8 > 0,
                  "%s: a q8_0 cache moves logits by %g of their range on average, %g at most",
                  models[_i], q8, m8);
    ck_assert_msg(m4 < Q4_MOST && q4 < Q4_MEAN && q4 > q8,
                  "%s: a q4_0 cache moves logits by %g of their range on average, %g at most "
                  "(q8_0: %g)",
                  models[_i], q4, m4, q8);
    fixture_close(&fx);
}
END_TEST

/* Two sequences side by side, prefill chunks beside decode tokens: each
 * gets the bits it gets alone; then truncate (or keep) and reset; a
 * cache of type t. */
static void seqs_truncate_reset(const fixture *fx, const char *name, ml_cache_type t)
{
    float *want = run_all(fx, t, t, 64, 1);
    ml_ctx *c = ctx_new(fx, t, t, 16, 2, 2);
    size_t row = fx->vocab * sizeof(float);
    float *got = malloc(4 * row);
    ck_assert(got);
    ml_error err;
    /* sequence 1 takes 6 prompt tokens while sequence 0 takes 1, ... */
    uint32_t done[2] = {0, 0};
    while (done[0] < LEN || done[1] < LEN) {
        uint32_t seq[8], n = 0, n0 = done[0] < LEN ? 1 : 0;
        uint32_t n1 = LEN - done[1] < 6 ? LEN - done[1] : 6;
        ml_token tok[8];
        for (uint32_t i = 0; i < n0; i++, n++)
            seq[n] = 0, tok[n] = fx->ids[done[0] + i];
        for (uint32_t i = 0; i < n1; i++, n++)
            seq[n] = 1, tok[n] = fx->ids[done[1] + i];
        ck_assert(ml_ctx_eval_seqs(c, seq, tok, n, got, 0, &err) == ML_OK);
        size_t r = 0;
        if (n0)
            ck_assert_msg(memcmp(got + r++ * fx->vocab, want + done[0] * fx->vocab, row) == 0,
                          "%s: sequence 0 at %u differs", name, done[0]);
        if (n1)
            ck_assert_msg(memcmp(got + r * fx->vocab, want + (done[1] + n1 - 1) * fx->vocab, row) ==
                              0,
                          "%s: sequence 1 at %u differs", name, done[1] + n1 - 1);
        done[0] += n0, done[1] += n1;
    }
    /* back to position 5 (or, where the state cannot go back, a reset) */
    uint32_t kept = ml_ctx_seq_keep(c, 1, 5);
    ck_assert(kept == 5 || kept == 0);
    ck_assert(ml_ctx_eval_seqs(c, (const uint32_t[]){1, 1, 1}, fx->ids + kept, 3, got, 1, &err) ==
              ML_OK);
    ck_assert_msg(memcmp(got, want + kept * fx->vocab, 3 * row) == 0,
                  "%s: after keeping %u positions the logits differ", name, kept);
    ck_assert(ml_ctx_seq_reset(c, 0, &err) == ML_OK);
    ck_assert(ml_ctx_eval_seqs(c, (const uint32_t[]){0, 0}, fx->ids, 2, got, 1, &err) == ML_OK);
    ck_assert_msg(memcmp(got, want, 2 * row) == 0, "%s: after a reset the logits differ",
                  name);
    free(got);
    ml_ctx_free(c);
    free(want);
}

START_TEST(test_seqs_truncate_reset)
{
    fixture fx;
    ck_assert(fixture_open(&fx, models[_i], NULL));
    seqs_truncate_reset(&fx, models[_i], ML_CACHE_F16);
    if (fits_blocks(&fx)) {
        seqs_truncate_reset(&fx, models[_i], ML_CACHE_Q8_0);
        seqs_truncate_reset(&fx, models[_i], ML_CACHE_Q4_0);
    }
    fixture_close(&fx);
}
END_TEST

/* An f16 cache holds each attention layer's keys or values in half the
 * bytes mlb-info reports for f32, Q8_0 in 36 and Q4_0 in 20 bytes per 32
 * values (9/32 and 5/32 of f32's); linear-attention state stays f32.  A
 * position costs the bytes of its keys and values in the layers that keep
 * every position. */
START_TEST(test_state_bytes)
{
    static const char *const names[] = {"gemma", "window", "qwen35", "gated"};
    for (size_t n = 0; n < 4; n++) {
        fixture fx;
        ck_assert(fixture_open(&fx, names[n], NULL));
        const ml_mlb_header *h = ml_mlb_get_header(fx.mlb);
        uint64_t att = 0, lin = 0;
        for (uint32_t l = 0; l < h->n_layers; l++) {
            uint8_t f = h->layer_flags ? ml_mlb_layer_flag(fx.mlb, l) : 0;
            uint64_t b = ml_mlb_layer_state_bytes(h, f, N_CTX);
            *(f & ML_LAYER_LINEAR ? &lin : &att) += b;
        }
        ck_assert(att > 0);
        ml_ctx *c32 = ctx_new(&fx, ML_CACHE_F32, ML_CACHE_F32, 8, 1, 2);
        ml_ctx *c16 = ctx_new(&fx, ML_CACHE_F16, ML_CACHE_F16, 8, 1, 2);
        ml_ctx *ck = ctx_new(&fx, ML_CACHE_F16, ML_CACHE_F32, 8, 1, 2);
        ck_assert_uint_eq(ml_ctx_state_bytes(c32), 2 * (att + lin));
        ck_assert_uint_eq(ml_ctx_state_bytes(c16), 2 * (att / 2 + lin));
        ck_assert_uint_eq(ml_ctx_state_bytes(ck), 2 * (att / 4 * 3 + lin));
        uint32_t dh = h->head_dim ? h->head_dim : h->dim / h->n_heads;
        uint64_t kv_dim = (uint64_t)h->n_kv_heads * dh, full = 0;
        for (uint32_t l = 0; l < h->n_layers; l++) {
            uint8_t f = h->layer_flags ? ml_mlb_layer_flag(fx.mlb, l) : 0;
            /* without layer flags, a window makes every layer sliding (mlb(5)) */
            int sliding = h->layer_flags ? (f & ML_LAYER_SLIDING) != 0 : h->sliding_window != 0;
            full += !(f & ML_LAYER_LINEAR) && !(sliding && h->sliding_window < N_CTX);
        }
        ck_assert_msg(ml_ctx_bytes_per_pos(c32) == full * kv_dim * 8,
                      "%s: %llu bytes per position, not %llu", names[n],
                      (unsigned long long)ml_ctx_bytes_per_pos(c32),
                      (unsigned long long)(full * kv_dim * 8));
        ck_assert_uint_eq(ml_ctx_bytes_per_pos(ck), full * kv_dim * 6);
        if (fits_blocks(&fx)) {
            ml_ctx *c8 = ctx_new(&fx, ML_CACHE_Q8_0, ML_CACHE_Q8_0, 8, 1, 2);
            ml_ctx *c4 = ctx_new(&fx, ML_CACHE_Q8_0, ML_CACHE_Q4_0, 8, 1, 2);
            ck_assert_uint_eq(ml_ctx_state_bytes(c8), 2 * (att / 32 * 9 + lin));
            ck_assert_uint_eq(ml_ctx_state_bytes(c4), 2 * (att / 64 * 9 + att / 64 * 5 + lin));
            ck_assert_uint_eq(ml_ctx_bytes_per_pos(c8), full * kv_dim / 32 * 72);
            ck_assert_uint_eq(ml_ctx_bytes_per_pos(c4), full * kv_dim / 32 * 56);
            ml_ctx_free(c8);
            ml_ctx_free(c4);
        }
        ml_ctx_free(c32);
        ml_ctx_free(c16);
        ml_ctx_free(ck);
        fixture_close(&fx);
    }
}
END_TEST

START_TEST(test_types)
{
    ck_assert_str_eq(ml_cache_type_name(ML_CACHE_F32), "f32");
    ck_assert_str_eq(ml_cache_type_name(ML_CACHE_F16), "f16");
    ck_assert_str_eq(ml_cache_type_name(ML_CACHE_Q8_0), "q8_0");
    ck_assert_str_eq(ml_cache_type_name(ML_CACHE_Q4_0), "q4_0");
    ck_assert_ptr_null(ml_cache_type_name((ml_cache_type)4));
    ml_cache_type t = ML_CACHE_F32;
    ml_error err;
    ck_assert_int_eq(ml_cache_type_parse("f16", &t, &err), ML_OK);
    ck_assert_int_eq(t, ML_CACHE_F16);
    ck_assert_int_eq(ml_cache_type_parse("q4_0", &t, &err), ML_OK);
    ck_assert_int_eq(t, ML_CACHE_Q4_0);
    ck_assert_int_eq(ml_cache_type_parse("q8_0", &t, &err), ML_OK);
    ck_assert_int_eq(t, ML_CACHE_Q8_0);
    ck_assert_int_eq(ml_cache_type_parse("q5_0", &t, &err), ML_E_INVAL);
    ck_assert_int_eq(t, ML_CACHE_Q8_0);
    ck_assert_msg(strstr(err.msg, "q5_0") && strstr(err.msg, "f32, f16, q8_0 or q4_0"), "%s",
                  err.msg);
    ck_assert_int_eq(ml_cache_type_parse("Q8_0", &t, &err), ML_E_INVAL);
    ck_assert_int_eq(ml_cache_type_parse(NULL, &t, NULL), ML_E_INVAL);
    fixture fx;
    ck_assert(fixture_open(&fx, "llama-q8", NULL));
    ml_ctx_params p = {.n_ctx = 8, .cache_v = (ml_cache_type)7};
    ml_ctx *c = (ml_ctx *)&p;
    ck_assert_int_eq(ml_ctx_new(fx.model, &p, &c, &err), ML_E_INVAL);
    ck_assert_ptr_null(c);
    fixture_close(&fx);
}
END_TEST

Suite *suite_runtime_cache(void)
{
    Suite *s = suite_create("runtime_cache");
    TCase *tc = tcase_create("cache types");
    tcase_add_loop_test(tc, test_same_bits, 0, N_MODELS);
    tcase_add_loop_test(tc, test_close_to_f32, 0, N_MODELS);
    tcase_add_loop_test(tc, test_blocks_close_to_f32, 0, N_MODELS);
    tcase_add_loop_test(tc, test_seqs_truncate_reset, 0, N_MODELS);
    tcase_add_test(tc, test_state_bytes);
    tcase_add_test(tc, test_types);
    suite_add_tcase(s, tc);
    return s;
}
