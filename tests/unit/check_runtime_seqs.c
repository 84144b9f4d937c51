/* check_runtime_seqs.c - several sequences in one context
 * (ml_ctx_eval_seqs): on every runtime fixture model, a sequence's logits
 * are bit for bit those of the same tokens evaluated alone, one at a time
 * with ml_ctx_eval, whatever the other sequences evaluated beside it
 * (prefill chunks, decode tokens, different positions), the batch size
 * and the thread count; reset and truncate act on one sequence only;
 * errors evaluate nothing; the memory is one cache per sequence. */
#include "suites.h"
#include "testutil.h"

#include "mlcore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIX "tests/fixtures/runtime/"
#define N_SEQ 4
#define LEN 48 /* tokens of each sequence, and the context */

static const char *const models[] = {"llama-q8", "llama-q4",  "llama3-rope", "linear-rope",
                                     "yarn-rope", "qwen",     "gemma",       "gated",
                                     "window",   "qwen35"};
#define N_MODELS (sizeof models / sizeof models[0])

typedef struct world {
    ml_mlb *mlb;
    ml_model *model;
    uint32_t vocab;
    int linear;                /* has linear-attention layers: no truncate */
    uint32_t window;           /* smallest sliding window of a layer; 0: none */
    ml_token tok[N_SEQ][LEN];  /* each sequence's tokens */
    float *ref[N_SEQ];         /* (LEN, vocab) each sequence's logits, alone */
} world;

static ml_ctx *ctx_new(const world *w, uint32_t n_batch, unsigned threads, uint32_t n_seq)
{
    ml_ctx_params p = {.n_ctx = LEN, .n_batch = n_batch, .n_threads = threads, .n_seq = n_seq};
    ml_ctx *c;
    ml_error err;
    ck_assert_msg(ml_ctx_new(w->model, &p, &c, &err) == ML_OK, "%s", err.msg);
    return c;
}

/* Sequence s's logits alone: token by token with ml_ctx_eval, as a
 * single-sequence caller decodes; one prefill call gives the same bits. */
static float *alone(const world *w, uint32_t s)
{
    size_t row = w->vocab * sizeof(float);
    float *ref = malloc(LEN * row), *pre = malloc(LEN * row);
    ck_assert(ref && pre);
    ml_error err;
    ml_ctx *c = ctx_new(w, 64, 1, 0);
    for (size_t i = 0; i < LEN; i++)
        ck_assert(ml_ctx_eval(c, &w->tok[s][i], 1, ref + i * w->vocab, 0, &err) == ML_OK);
    ml_ctx_reset(c);
    ck_assert(ml_ctx_eval(c, w->tok[s], LEN, pre, 1, &err) == ML_OK);
    ck_assert_msg(memcmp(ref, pre, LEN * row) == 0, "prefill and decode differ");
    ml_ctx_free(c);
    free(pre);
    return ref;
}

static void world_open(world *w, const char *name, int with_ref)
{
    char path[256];
    ml_error err;
    memset(w, 0, sizeof *w);
    snprintf(path, sizeof path, FIX "%s.mlb", name);
    ck_assert_msg(ml_mlb_open(path, &w->mlb, &err) == ML_OK, "%s: %s", path, err.msg);
    ck_assert_msg(ml_model_new(w->mlb, &w->model, &err) == ML_OK, "%s: %s", path, err.msg);
    const ml_mlb_header *h = ml_mlb_get_header(w->mlb);
    w->vocab = h->vocab;
    for (uint32_t l = 0; l < h->n_layers; l++) {
        uint8_t f = h->layer_flags ? ml_mlb_layer_flag(w->mlb, l) : 0;
        w->linear |= (f & ML_LAYER_LINEAR) != 0;
        /* as lib/runtime/model.c decides which layers slide */
        if (h->layer_flags ? (f & ML_LAYER_SLIDING) != 0 : h->sliding_window != 0)
            w->window = h->sliding_window;
    }
    tu_rng rng = {0x5eed + (uint64_t)strlen(name)};
    for (uint32_t s = 0; s < N_SEQ; s++)
        for (size_t i = 0; i < LEN; i++)
            w->tok[s][i] = tu_below(&rng, w->vocab);
    for (uint32_t s = 0; with_ref && s < N_SEQ; s++)
        w->ref[s] = alone(w, s);
}

static void world_close(world *w)
{
    for (uint32_t s = 0; s < N_SEQ; s++)
        free(w->ref[s]);
    ml_model_free(w->model);
    ml_mlb_close(w->mlb);
}

/* ---- a schedule of calls, checked against the sequences alone ---- */

typedef struct run {
    uint32_t seq, n;
} run;

typedef struct driver {
    const world *w;
    const char *name;
    ml_ctx *c;
    uint32_t done[N_SEQ]; /* positions each sequence has evaluated */
    float *logits;        /* (LEN * N_SEQ, vocab) */
} driver;

/* One ml_ctx_eval_seqs call of the runs, each taking its sequence's next
 * tokens; every row of logits must be the sequence's logits alone. */
static void step(driver *d, const run *runs, size_t n_runs, int all)
{
    const world *w = d->w;
    uint32_t seq[LEN * N_SEQ] = {0};
    ml_token tok[LEN * N_SEQ] = {0};
    size_t n = 0;
    for (size_t r = 0; r < n_runs; r++)
        for (uint32_t i = 0; i < runs[r].n; i++, n++) {
            seq[n] = runs[r].seq;
            tok[n] = w->tok[runs[r].seq][d->done[runs[r].seq] + i];
        }
    ml_error err;
    ck_assert_msg(ml_ctx_eval_seqs(d->c, seq, tok, n, d->logits, all, &err) == ML_OK, "%s: %s",
                  d->name, err.msg);
    const float *row = d->logits;
    for (size_t r = 0; r < n_runs; r++) {
        uint32_t s = runs[r].seq, first = all ? d->done[s] : d->done[s] + runs[r].n - 1;
        for (uint32_t p = first; p < d->done[s] + runs[r].n; p++, row += w->vocab)
            ck_assert_msg(memcmp(row, w->ref[s] + (size_t)p * w->vocab,
                                 w->vocab * sizeof(float)) == 0,
                          "%s: sequence %u, position %u: logits differ from the sequence alone",
                          d->name, s, p);
        d->done[s] += runs[r].n;
    }
    for (uint32_t s = 0; s < N_SEQ; s++)
        ck_assert_uint_eq(ml_ctx_seq_pos(d->c, s), d->done[s]);
}

/* Truncating sequence s to pos: done unless its state cannot go back. */
static void truncate_seq(driver *d, uint32_t s, uint32_t pos)
{
    ml_error err;
    int refused = pos < d->done[s] && (d->w->linear || (d->w->window && d->w->window < d->done[s]));
    ml_status st = ml_ctx_seq_truncate(d->c, s, pos, &err);
    ck_assert_msg(st == (refused ? ML_E_UNSUPPORTED : ML_OK), "%s: truncate %u to %u: %d %s",
                  d->name, s, pos, st, err.msg);
    if (!refused)
        d->done[s] = pos;
    for (uint32_t i = 0; i < N_SEQ; i++)
        ck_assert_uint_eq(ml_ctx_seq_pos(d->c, i), d->done[i]);
}

static void reset_seq(driver *d, uint32_t s)
{
    ml_error err;
    ck_assert(ml_ctx_seq_reset(d->c, s, &err) == ML_OK);
    d->done[s] = 0;
}

/* Four sequences at different positions: prefill chunks beside decode
 * tokens, runs in any order, one sequence truncated (twice) and one reset
 * mid-way, then decode steps with a rotating prefill chunk until every
 * context is full; for three batch sizes and thread counts (a batch of 3
 * or 5 cuts runs across evaluation steps). */
START_TEST(test_seqs_match_alone)
{
    static const struct { uint32_t batch; unsigned threads; } cfg[] = {{64, 2}, {5, 1}, {3, 2}};
    world w;
    world_open(&w, models[_i], 1);
    for (size_t k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        driver d = {&w, models[_i], ctx_new(&w, cfg[k].batch, cfg[k].threads, N_SEQ), {0},
                    malloc((size_t)LEN * N_SEQ * w.vocab * sizeof(float))};
        ck_assert(d.logits);
        step(&d, (const run[]){{0, 9}}, 1, 1);
        step(&d, (const run[]){{0, 1}, {1, 6}}, 2, 0);
        step(&d, (const run[]){{1, 1}, {0, 1}, {2, 12}, {3, 4}}, 4, 1);
        truncate_seq(&d, 3, 2); /* inside every window */
        step(&d, (const run[]){{3, 3}, {2, 1}, {1, 1}, {0, 1}}, 4, 0);
        truncate_seq(&d, 1, 3); /* past the smallest window: refused there */
        reset_seq(&d, 2);
        for (unsigned t = 0;; t++) {
            run runs[N_SEQ];
            size_t n = 0;
            for (uint32_t i = 0; i < N_SEQ; i++) {
                uint32_t s = (t + i) % N_SEQ, left = LEN - d.done[s], want = i == 0 ? 5 : 1;
                if (left)
                    runs[n++] = (run){s, want < left ? want : left};
            }
            if (!n)
                break;
            step(&d, runs, n, t % 2);
        }
        /* Every context is full: one more token of any sequence is refused. */
        ml_error err;
        for (uint32_t s = 0; s < N_SEQ; s++)
            ck_assert_int_eq(ml_ctx_eval_seqs(d.c, &s, &w.tok[s][0], 1, NULL, 0, &err),
                             ML_E_INVAL);
        free(d.logits);
        ml_ctx_free(d.c);
    }
    world_close(&w);
}
END_TEST

/* The single-sequence functions are sequence 0's: ml_ctx_eval,
 * ml_ctx_pos, ml_ctx_reset and ml_ctx_truncate leave the others alone,
 * and sequence 0's logits are those ml_ctx_eval gives alone. */
START_TEST(test_seq0_is_the_context)
{
    world w;
    world_open(&w, models[_i], 1);
    ml_ctx *c = ctx_new(&w, 4, 2, N_SEQ);
    ck_assert_uint_eq(ml_ctx_n_seq(c), N_SEQ);
    ml_error err;
    uint32_t one = 1;
    ck_assert(ml_ctx_eval_seqs(c, &one, w.tok[1], 1, NULL, 0, &err) == ML_OK);
    float *got = malloc((size_t)LEN * w.vocab * sizeof(float));
    ck_assert(got);
    ck_assert(ml_ctx_eval(c, w.tok[0], 10, got, 1, &err) == ML_OK);
    ck_assert(memcmp(got, w.ref[0], 10 * w.vocab * sizeof(float)) == 0);
    ck_assert_uint_eq(ml_ctx_pos(c), 10);
    ck_assert_uint_eq(ml_ctx_seq_pos(c, 0), 10);
    ck_assert_uint_eq(ml_ctx_seq_pos(c, 1), 1);
    ml_ctx_reset(c);
    ck_assert_uint_eq(ml_ctx_pos(c), 0);
    ck_assert_uint_eq(ml_ctx_seq_pos(c, 1), 1);
    ck_assert(ml_ctx_eval(c, w.tok[0], 3, NULL, 0, &err) == ML_OK);
    ck_assert_int_eq(ml_ctx_truncate(c, 2, &err), w.linear ? ML_E_UNSUPPORTED : ML_OK);
    ck_assert_uint_eq(ml_ctx_seq_pos(c, 1), 1);
    /* Sequence 1 goes on where it was, untouched by sequence 0's work. */
    ck_assert(ml_ctx_eval_seqs(c, (const uint32_t[]){1, 1}, w.tok[1] + 1, 2, got, 1, &err) ==
              ML_OK);
    ck_assert(memcmp(got, w.ref[1] + w.vocab, 2 * w.vocab * sizeof(float)) == 0);
    free(got);
    ml_ctx_free(c);
    world_close(&w);
}
END_TEST

/* Refusals evaluate nothing (every position stays, and what follows still
 * matches the sequences alone): a sequence out of range, a sequence with
 * two runs, a bad token id, a run that does not fit in its sequence's
 * context while the other sequences' runs would.  Reset, truncate and pos
 * of a sequence out of range. */
START_TEST(test_seqs_errors)
{
    world w;
    world_open(&w, "llama-q8", 1);
    ml_ctx *c = ctx_new(&w, 8, 2, 3);
    ml_error err;
    ml_token t[4] = {w.tok[0][0], w.tok[1][0], w.tok[0][1], w.tok[2][0]};
    ck_assert_int_eq(ml_ctx_eval_seqs(c, (const uint32_t[]){0, 3}, t, 2, NULL, 0, &err),
                     ML_E_INVAL);
    ck_assert_msg(strstr(err.msg, "sequence 3 is outside 0..2") != NULL, "%s", err.msg);
    ck_assert_int_eq(ml_ctx_eval_seqs(c, (const uint32_t[]){0, 1, 0}, t, 3, NULL, 0, &err),
                     ML_E_INVAL);
    ck_assert_msg(strstr(err.msg, "not consecutive") != NULL, "%s", err.msg);
    ml_token bad[2] = {w.tok[0][0], w.vocab};
    ck_assert_int_eq(ml_ctx_eval_seqs(c, (const uint32_t[]){0, 1}, bad, 2, NULL, 0, &err),
                     ML_E_INVAL);
    for (uint32_t s = 0; s < 3; s++)
        ck_assert_uint_eq(ml_ctx_seq_pos(c, s), 0);
    /* Sequence 1 one position short of full: two more tokens do not fit. */
    ck_assert(ml_ctx_eval_seqs(c, (const uint32_t[]){0, 1}, t, 2, NULL, 0, &err) == ML_OK);
    uint32_t ones[LEN];
    for (size_t i = 0; i < LEN; i++)
        ones[i] = 1;
    ck_assert(ml_ctx_eval_seqs(c, ones, w.tok[1] + 1, LEN - 2, NULL, 0, &err) == ML_OK);
    ck_assert_uint_eq(ml_ctx_seq_pos(c, 1), LEN - 1);
    ml_token two[3] = {w.tok[0][1], w.tok[1][LEN - 1], w.tok[1][0]};
    ck_assert_int_eq(ml_ctx_eval_seqs(c, (const uint32_t[]){0, 1, 1}, two, 3, NULL, 0, &err),
                     ML_E_INVAL);
    ck_assert_msg(strstr(err.msg, "sequence 1: 2 tokens do not fit") != NULL, "%s", err.msg);
    ck_assert_uint_eq(ml_ctx_seq_pos(c, 0), 1);
    ck_assert_uint_eq(ml_ctx_seq_pos(c, 1), LEN - 1);
    /* Nothing was half evaluated: both go on as alone. */
    float out[2 * 256];
    ck_assert(w.vocab <= 256);
    ck_assert(ml_ctx_eval_seqs(c, (const uint32_t[]){1, 0}, (const ml_token[]){w.tok[1][LEN - 1],
              w.tok[0][1]}, 2, out, 0, &err) == ML_OK);
    ck_assert(memcmp(out, w.ref[1] + (size_t)(LEN - 1) * w.vocab, w.vocab * 4) == 0);
    ck_assert(memcmp(out + w.vocab, w.ref[0] + w.vocab, w.vocab * 4) == 0);
    ck_assert_int_eq(ml_ctx_eval_seqs(c, ones, w.tok[1], 1, NULL, 0, &err), ML_E_INVAL);
    /* An empty call is nothing. */
    ck_assert_int_eq(ml_ctx_eval_seqs(c, NULL, NULL, 0, NULL, 0, &err), ML_OK);
    /* The per-sequence functions, out of range. */
    ck_assert_uint_eq(ml_ctx_seq_pos(c, 3), 0);
    ck_assert_int_eq(ml_ctx_seq_reset(c, 3, &err), ML_E_INVAL);
    ck_assert_int_eq(ml_ctx_seq_truncate(c, 3, 0, &err), ML_E_INVAL);
    ck_assert_int_eq(ml_ctx_seq_truncate(c, 0, 3, &err), ML_E_INVAL); /* past its position */
    ck_assert_uint_eq(ml_ctx_seq_pos(c, 0), 2);
    ml_ctx_free(c);
    world_close(&w);
}
END_TEST

/* Every sequence has its whole cache and recurrent state: n_seq times
 * one sequence's bytes; the scratch is shared (the linear layers' chunk
 * memory, which comes with each state, aside). */
START_TEST(test_seqs_memory)
{
    world w;
    world_open(&w, models[_i], 0);
    ml_ctx *one = ctx_new(&w, 16, 2, 0), *three = ctx_new(&w, 16, 2, 3);
    ck_assert_uint_eq(ml_ctx_n_seq(one), 1);
    ck_assert_uint_eq(ml_ctx_state_bytes(three), 3 * ml_ctx_state_bytes(one));
    const ml_mlb_header *h = ml_mlb_get_header(w.mlb);
    uint64_t want = 0;
    for (uint32_t l = 0; l < h->n_layers; l++)
        want += ml_mlb_layer_state_bytes(h, h->layer_flags ? ml_mlb_layer_flag(w.mlb, l) : 0, LEN);
    ck_assert_uint_eq(ml_ctx_state_bytes(one), want);
    if (!w.linear)
        ck_assert_uint_eq(ml_ctx_scratch_bytes(three), ml_ctx_scratch_bytes(one));
    ml_ctx_free(one);
    ml_ctx_free(three);
    world_close(&w);
}
END_TEST

Suite *suite_runtime_seqs(void)
{
    Suite *s = suite_create("runtime_seqs");
    TCase *tc = tcase_create("seqs");
    tcase_add_loop_test(tc, test_seqs_match_alone, 0, N_MODELS);
    tcase_add_loop_test(tc, test_seq0_is_the_context, 0, N_MODELS);
    tcase_add_test(tc, test_seqs_errors);
    tcase_add_loop_test(tc, test_seqs_memory, 0, N_MODELS);
    suite_add_tcase(s, tc);
    return s;
}
