/* check_score.c - scoring text (lib/runtime/score.c): ml_ctx_perplexity
 * against the chunk loop the commands wrote before it was in the library
 * (ml_ctx_score per chunk, BOS put first), its limits (max_chunks, a stop,
 * a text shorter than one chunk) and ml_logits_batch's policy. */
#include "suites.h"

#include "mlcore.h"

#include <stdlib.h>

#define MODEL "tests/fixtures/runtime/llama-q8.mlb"
#define N_CTX 8
#define N_TOKENS 43 /* five whole chunks and three tokens dropped */
#define BOS 1

typedef struct scorer {
    ml_mlb *mlb;
    ml_model *model;
    ml_ctx *ctx;
    float *rows;
    ml_token tokens[N_TOKENS];
} scorer;

static void scorer_open(scorer *s)
{
    ml_error err;
    ck_assert_msg(ml_mlb_open(MODEL, &s->mlb, &err) == ML_OK, "%s", err.msg);
    ck_assert_msg(ml_model_new(s->mlb, &s->model, &err) == ML_OK, "%s", err.msg);
    /* A batch that does not divide the chunk. */
    ml_ctx_params p = {.n_ctx = N_CTX, .n_batch = 3, .n_threads = 1};
    ck_assert_msg(ml_ctx_new(s->model, &p, &s->ctx, &err) == ML_OK, "%s", err.msg);
    uint32_t vocab = ml_model_header(s->model)->vocab;
    s->rows = malloc(3 * vocab * sizeof(float));
    ck_assert(s->rows);
    for (int i = 0; i < N_TOKENS; i++)
        s->tokens[i] = (ml_token)((7u * (unsigned)i + 3) % vocab);
}

static void scorer_close(scorer *s)
{
    free(s->rows);
    ml_ctx_free(s->ctx);
    ml_model_free(s->model);
    ml_mlb_close(s->mlb);
}

/* What ml-run --perplexity and ml-imatrix did chunk by chunk. */
static ml_nll by_hand(scorer *s, size_t chunks)
{
    ml_nll acc = {0};
    ml_token chunk[N_CTX];
    ml_error err;
    for (size_t k = 0; k < chunks; k++) {
        for (size_t j = 0; j < N_CTX; j++)
            chunk[j] = s->tokens[k * N_CTX + j];
        chunk[0] = BOS;
        ck_assert(ml_ctx_score(s->ctx, chunk, N_CTX, N_CTX / 2, s->rows, &acc, &err) == ML_OK);
    }
    return acc;
}

typedef struct calls {
    uint64_t done[16];
    int n;
    uint64_t stop_at; /* 0: never */
} calls;

static int record(void *ctx, uint64_t done, uint64_t total)
{
    calls *c = ctx;
    ck_assert_uint_eq(total, 5);
    c->done[c->n++] = done;
    return c->stop_at && done == c->stop_at;
}

START_TEST(test_same_as_by_hand)
{
    scorer s;
    scorer_open(&s);
    ml_nll want = by_hand(&s, 5), got = {0};
    calls c = {{0}, 0, 0};
    ml_perplexity_opts o = {0, BOS, record, &c};
    size_t n_chunks;
    ml_error err;
    ck_assert(ml_ctx_perplexity(s.ctx, s.tokens, N_TOKENS, &o, s.rows, &got, &n_chunks, &err) ==
              ML_OK);
    ck_assert_uint_eq(n_chunks, 5);
    ck_assert_uint_eq(got.count, 5 * (N_CTX - N_CTX / 2 - 1));
    ck_assert_uint_eq(got.count, want.count);
    ck_assert(got.sum == want.sum && got.sum2 == want.sum2); /* bit for bit */
    ck_assert_int_eq(c.n, 6); /* before the first chunk, then after each */
    for (int i = 0; i < c.n; i++)
        ck_assert_uint_eq(c.done[i], (uint64_t)i);
    scorer_close(&s);
}
END_TEST

START_TEST(test_limits)
{
    scorer s;
    scorer_open(&s);
    ml_error err;
    size_t n_chunks;
    /* at most two chunks */
    ml_nll two = by_hand(&s, 2), got = {0};
    ml_perplexity_opts o = {2, BOS, NULL, NULL};
    ck_assert(ml_ctx_perplexity(s.ctx, s.tokens, N_TOKENS, &o, s.rows, &got, &n_chunks, &err) ==
              ML_OK);
    ck_assert_uint_eq(n_chunks, 2);
    ck_assert(got.count == two.count && got.sum == two.sum);
    /* a stop after two chunks: ML_OK with what was scored */
    calls c = {{0}, 0, 2};
    ml_perplexity_opts stop = {0, BOS, record, &c};
    ml_nll part = {0};
    ck_assert(ml_ctx_perplexity(s.ctx, s.tokens, N_TOKENS, &stop, s.rows, &part, &n_chunks,
                                &err) == ML_OK);
    ck_assert_uint_eq(n_chunks, 5);
    ck_assert(part.count == two.count && part.sum == two.sum);
    ck_assert_int_eq(c.n, 3);
    /* fewer tokens than one chunk */
    ml_nll none = {0};
    ck_assert_int_eq(ml_ctx_perplexity(s.ctx, s.tokens, N_CTX - 1, &o, s.rows, &none, &n_chunks,
                                       &err),
                     ML_E_INVAL);
    ck_assert_uint_eq(n_chunks, 0);
    ck_assert_uint_eq(none.count, 0);
    scorer_close(&s);
}
END_TEST

START_TEST(test_logits_batch)
{
    ck_assert_uint_eq(ml_logits_batch(32000), 256);  /* 524 fit: the most */
    ck_assert_uint_eq(ml_logits_batch(131072), 128); /* 64 MB of logits */
    ck_assert_uint_eq(ml_logits_batch(262144), 64);
    ck_assert_uint_eq(ml_logits_batch(2000000), 16); /* 8 fit: the fewest */
    ck_assert_uint_eq(ml_logits_batch(0), 256);
}
END_TEST

Suite *suite_score(void)
{
    Suite *s = suite_create("score");
    TCase *tc = tcase_create("chunks");
    tcase_add_test(tc, test_same_as_by_hand);
    tcase_add_test(tc, test_limits);
    tcase_add_test(tc, test_logits_batch);
    suite_add_tcase(s, tc);
    return s;
}
