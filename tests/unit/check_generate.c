/* check_generate.c - the generator (lib/runtime/generate.c) over a small
 * tokenizer: why a generation ends (end-of-generation id, a stop string
 * across two tokens, length, a full context) and which wins when several
 * hold, the text held back and released at the end, the ban of
 * ignore-EOS, the order of the processor chain and its accept hooks,
 * tokens only without a tokenizer, the same ids as the sampler called
 * directly (penalty included) over a restart, the presence and frequency
 * penalties and the logit bias, and the exact status of
 * every bad argument and failing callback. */
#include "suites.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>

/* A kind-2 tokenizer: EOS 2, <eot> 3 also ends a generation, token 5 is
 * the first byte of a three-byte UTF-8 sequence.  The model's vocabulary
 * is larger (VOCAB), as a padded one is. */
enum { N_TOK = 7, VOCAB = 10, EOS = 2, EOT = 3, LEAD = 5 };
static const char *const pieces[N_TOK] = {"a", "b", "</s>", "<eot>", "c", "\xe2", "d"};

typedef struct fixture {
    tu_mem file;
    ml_mlt *mlt;
    tu_mem text;       /* what on_text received */
    ml_token kept[64]; /* what on_token received */
    size_t n_kept;
    ml_status token_status; /* on_token's answer */
} fixture;

static void open_tokenizer(fixture *f)
{
    ml_mlt_header h;
    ml_mlt_token t[N_TOK];
    ml_error err;
    memset(&h, 0, sizeof h);
    h.kind = ML_MLT_KIND_BYTE_BPE;
    h.bos = -1;
    h.eos = EOS;
    for (int i = 0; i < N_TOK; i++)
        t[i] = (ml_mlt_token){(const uint8_t *)pieces[i], (uint32_t)strlen(pieces[i]),
                              i == EOS || i == EOT ? ML_MLT_ADDED : ML_MLT_NORMAL};
    static const uint32_t eog[1] = {EOT};
    ml_mlt_chat chat = {eog, 1, NULL, 0};
    tu_mem_init(&f->file);
    ck_assert_msg(ml_mlt_write_chat(&h, t, N_TOK, NULL, 0, &chat, tu_mem_sink, &f->file, &err) ==
                      ML_OK, "%s", err.msg);
    ck_assert_msg(ml_mlt_open_memory(f->file.p, f->file.len, &f->mlt, &err) == ML_OK, "%s",
                  err.msg);
}

/* What a failing callback reports. */
static ml_status fail_with(ml_error *err, ml_status s)
{
    memset(err, 0, sizeof *err);
    err->code = s;
    err->offset = -1;
    strcpy(err->msg, "the test's callback failed");
    return s;
}

static ml_status record_token(void *ctx, ml_token id, ml_error *err)
{
    fixture *f = ctx;
    if (f->token_status)
        return fail_with(err, f->token_status);
    ck_assert_uint_lt(f->n_kept, 64);
    f->kept[f->n_kept++] = id;
    return ML_OK;
}

static void fixture_init(fixture *f)
{
    memset(f, 0, sizeof *f);
    open_tokenizer(f);
    tu_mem_init(&f->text);
}

static void fixture_free(fixture *f)
{
    ml_mlt_close(f->mlt);
    tu_mem_free(&f->file);
    tu_mem_free(&f->text);
}

/* Greedy text generation over f's tokenizer, at most max_tokens. */
static ml_gen_params text_params(fixture *f, uint64_t max_tokens)
{
    return (ml_gen_params){.vocab = VOCAB, .sampler = {0, 0, 1, 0, 1, 64, 1, 0, 0}, .mlt = f->mlt,
                           .max_tokens = max_tokens, .on_text = tu_mem_sink, .text_ctx = &f->text,
                           .on_token = record_token, .token_ctx = f};
}

static ml_gen *new_gen(const ml_gen_params *p)
{
    ml_gen *g;
    ml_error err;
    ck_assert_msg(ml_gen_new(p, &g, &err) == ML_OK, "%s", err.msg);
    return g;
}

/* A fixture and a greedy text generator over it, with at most one stop
 * string (NULL: none). */
static ml_gen *start(fixture *f, uint64_t max_tokens, const char *stop)
{
    fixture_init(f);
    ml_gen_params p = text_params(f, max_tokens);
    p.stops = &stop, p.n_stops = stop != NULL;
    return new_gen(&p);
}

static void end(fixture *f, ml_gen *g)
{
    ml_gen_free(g);
    fixture_free(f);
}

/* One step whose logits make `want` the greedy pick; room positions left. */
static ml_gen_result step(ml_gen *g, ml_token want, uint64_t room)
{
    float logits[VOCAB] = {0};
    ml_gen_result res;
    ml_error err;
    logits[want] = 1;
    ml_gen_input in = {logits, NULL, 0, room};
    ck_assert_msg(ml_gen_next(g, &in, &res, &err) == ML_OK, "%s", err.msg);
    ck_assert_uint_eq(res.token, want);
    return res;
}

/* The text so far equals `want`. */
static void text_is(const fixture *f, const char *want)
{
    size_t n = strlen(want);
    ck_assert_msg(f->text.len == n && memcmp(f->text.p, want, n) == 0, "text \"%.*s\", want \"%s\"",
                  (int)f->text.len, (const char *)f->text.p, want);
}

static void finish(ml_gen *g)
{
    ml_error err;
    ck_assert_msg(ml_gen_finish(g, &err) == ML_OK, "%s", err.msg);
}

/* ---- why a generation ends ---- */
START_TEST(test_end_of_generation)
{
    fixture f;
    ml_gen *g = start(&f, 100, NULL);
    ck_assert_int_eq(step(g, 0, 50).end, ML_GEN_GOING);
    ck_assert_int_eq(step(g, 1, 49).end, ML_GEN_GOING);
    ck_assert_int_eq(step(g, EOT, 48).end, ML_GEN_EOG);
    ck_assert_uint_eq(f.n_kept, 2); /* the end is never kept */
    ck_assert_uint_eq(ml_gen_n_tokens(g), 2);
    finish(g);
    text_is(&f, "ab");
    ml_gen_restart(g);
    ck_assert_int_eq(step(g, EOS, 50).end, ML_GEN_EOG); /* the EOS id ends too */
    ck_assert_uint_eq(ml_gen_n_tokens(g), 0);
    end(&f, g);
}
END_TEST

START_TEST(test_stop_string_across_tokens)
{
    fixture f;
    ml_gen *g = start(&f, 100, "bc");
    ck_assert_int_eq(step(g, 0, 50).end, ML_GEN_GOING);
    ck_assert_int_eq(step(g, 1, 50).end, ML_GEN_GOING);
    text_is(&f, "a"); /* "b" may start the stop string: held */
    ck_assert_int_eq(step(g, 4, 50).end, ML_GEN_STOP);
    ck_assert_uint_eq(f.n_kept, 3); /* the token that completed it was kept */
    finish(g);
    text_is(&f, "a"); /* never the stop string, nothing after it */
    end(&f, g);
}
END_TEST

START_TEST(test_length)
{
    fixture f;
    ml_gen *g = start(&f, 3, NULL);
    ck_assert_int_eq(step(g, 0, 50).end, ML_GEN_GOING);
    ck_assert_int_eq(step(g, 1, 50).end, ML_GEN_GOING);
    ck_assert_int_eq(step(g, 4, 50).end, ML_GEN_LENGTH);
    finish(g);
    text_is(&f, "abc");
    end(&f, g);
}
END_TEST

START_TEST(test_context_full)
{
    fixture f;
    ml_gen *g = start(&f, 3, NULL);
    ck_assert_int_eq(step(g, 0, 1).end, ML_GEN_GOING);
    ck_assert_int_eq(step(g, 1, 0).end, ML_GEN_CTX_FULL);
    finish(g);
    text_is(&f, "ab"); /* the last token is shown though never evaluated */
    end(&f, g);
}
END_TEST

/* A stop string wins over the length, the length over the room. */
START_TEST(test_end_precedence)
{
    fixture f;
    fixture_init(&f);
    const char *stops[1] = {"a"};
    ml_gen_params p = text_params(&f, 1);
    ml_gen *g = new_gen(&p);
    ck_assert_int_eq(step(g, 1, 0).end, ML_GEN_LENGTH);
    ml_gen_free(g);
    p.stops = stops, p.n_stops = 1;
    g = new_gen(&p);
    ck_assert_int_eq(step(g, 0, 0).end, ML_GEN_STOP);
    ml_gen_free(g);
    fixture_free(&f);
}
END_TEST

/* max_tokens 0: over before the first token, nothing drawn or kept. */
START_TEST(test_zero_tokens)
{
    fixture f;
    ml_gen *g = start(&f, 0, NULL);
    float logits[VOCAB] = {0};
    ml_gen_input in = {logits, NULL, 0, 10};
    ml_gen_result res;
    ml_error err;
    ck_assert_int_eq(ml_gen_next(g, &in, &res, &err), ML_OK);
    ck_assert_int_eq(res.end, ML_GEN_LENGTH);
    ck_assert_uint_eq(res.token, 0);
    ck_assert_uint_eq(f.n_kept, 0);
    finish(g);
    ck_assert_uint_eq(f.text.len, 0);
    end(&f, g);
}
END_TEST

/* ---- the text held back ---- */
START_TEST(test_held_text_released_at_the_end)
{
    fixture f;
    ml_gen *g = start(&f, 2, "cd");
    /* The start of a stop string, released by the length's end. */
    ck_assert_int_eq(step(g, 0, 50).end, ML_GEN_GOING);
    ck_assert_int_eq(step(g, 4, 50).end, ML_GEN_LENGTH);
    text_is(&f, "a");
    finish(g);
    text_is(&f, "ac");
    finish(g); /* nothing twice */
    text_is(&f, "ac");
    /* The start of a stop string, then the end of generation. */
    ml_gen_restart(g);
    ck_assert_int_eq(step(g, 4, 50).end, ML_GEN_GOING);
    ck_assert_int_eq(step(g, EOT, 50).end, ML_GEN_EOG);
    text_is(&f, "ac");
    finish(g);
    text_is(&f, "acc");
    /* An unfinished UTF-8 sequence: U+FFFD at the end. */
    ml_gen_restart(g);
    ck_assert_int_eq(step(g, LEAD, 50).end, ML_GEN_GOING);
    text_is(&f, "acc");
    ck_assert_int_eq(step(g, EOT, 50).end, ML_GEN_EOG);
    finish(g);
    text_is(&f, "acc\xef\xbf\xbd");
    /* A caller stopping early (a signal) keeps the text so far. */
    ml_gen_restart(g);
    ck_assert_int_eq(step(g, 4, 50).end, ML_GEN_GOING);
    finish(g);
    text_is(&f, "acc\xef\xbf\xbd" "c");
    end(&f, g);
}
END_TEST

/* ---- the processors ---- */
START_TEST(test_ignore_eos_ban)
{
    fixture f;
    fixture_init(&f);
    ml_gen_params p = text_params(&f, 5);
    p.flags = ML_GEN_IGNORE_EOS;
    ml_gen *g = new_gen(&p);
    float logits[VOCAB] = {0};
    logits[EOT] = 9, logits[EOS] = 8, logits[4] = 1;
    ml_gen_input in = {logits, NULL, 0, 10};
    ml_gen_result res;
    ml_error err;
    ck_assert_int_eq(ml_gen_next(g, &in, &res, &err), ML_OK);
    ck_assert_int_eq(res.end, ML_GEN_GOING);
    ck_assert_uint_eq(res.token, 4);
    ck_assert(isinf(logits[EOT]) && logits[EOT] < 0);
    ck_assert(isinf(logits[EOS]) && logits[EOS] < 0);
    ck_assert(logits[0] == 0 && logits[4] == 1);
    ml_gen_free(g);
    /* Without the flag the same logits end the generation. */
    p.flags = 0;
    g = new_gen(&p);
    logits[EOT] = 9, logits[EOS] = 8;
    ck_assert_int_eq(ml_gen_next(g, &in, &res, &err), ML_OK);
    ck_assert_int_eq(res.end, ML_GEN_EOG);
    ck_assert_uint_eq(res.token, EOT);
    ml_gen_free(g);
    fixture_free(&f);
}
END_TEST

/* A processor that notes its place in the chain and what it saw. */
typedef struct probe {
    char *log;          /* shared: each call appends its letter */
    char letter;
    float seen_eot, seen_0; /* logits[EOT] and logits[0] when it ran */
    ml_token accepted[8];
    size_t n_accepted;
    float add_to_1;     /* added to logits[1] */
} probe;

static ml_status probe_apply(void *ctx, float *logits, uint32_t vocab, const ml_token *history,
                             size_t n_history, ml_error *err)
{
    probe *pr = ctx;
    (void)history, (void)n_history, (void)err;
    ck_assert_uint_eq(vocab, VOCAB);
    size_t n = strlen(pr->log);
    pr->log[n] = pr->letter, pr->log[n + 1] = 0;
    pr->seen_eot = logits[EOT], pr->seen_0 = logits[0];
    logits[1] += pr->add_to_1;
    return ML_OK;
}

static void probe_accept(void *ctx, ml_token id)
{
    probe *pr = ctx;
    pr->accepted[pr->n_accepted++] = id;
}

START_TEST(test_processor_order)
{
    fixture f;
    fixture_init(&f);
    char log[16] = "";
    probe a = {log, 'a', 0, 0, {0}, 0, 2}, b = {log, 'b', 0, 0, {0}, 0, -3};
    ml_logits_proc procs[2] = {{probe_apply, probe_accept, &a}, {probe_apply, NULL, &b}};
    ml_gen_params p = text_params(&f, 5);
    p.flags = ML_GEN_IGNORE_EOS;
    p.sampler.repeat_penalty = 2;
    p.procs = procs, p.n_procs = 2;
    ml_gen *g = new_gen(&p);
    /* Token 0 (4 before the penalty) against token 1 (1, then +2 by a,
     * then -3 by b): the penalty halves 0's logit before a and b run. */
    float logits[VOCAB] = {4, 1};
    logits[EOT] = 100;
    ml_token hist[1] = {0};
    ml_gen_input in = {logits, hist, 1, 10};
    ml_gen_result res;
    ml_error err;
    ck_assert_int_eq(ml_gen_next(g, &in, &res, &err), ML_OK);
    ck_assert_str_eq(log, "ab");
    ck_assert(isinf(a.seen_eot) && a.seen_eot < 0); /* the ban ran first */
    ck_assert(a.seen_0 == 2 && b.seen_0 == 2);      /* then the penalty */
    ck_assert(logits[1] == 0);                      /* a, then b */
    ck_assert_uint_eq(res.token, 0);
    /* The accept hooks hear each kept token, never the end. */
    float more[VOCAB] = {0};
    more[4] = 1;
    in.logits = more, in.history = NULL, in.n_history = 0;
    ck_assert_int_eq(ml_gen_next(g, &in, &res, &err), ML_OK);
    ck_assert_uint_eq(a.n_accepted, 2);
    ck_assert_uint_eq(a.accepted[0], 0);
    ck_assert_uint_eq(a.accepted[1], 4);
    ml_gen_free(g);
    fixture_free(&f);
}
END_TEST

/* ---- OpenAI's penalties and logit bias ---- */
/* Greedy over logits l with history h; the logits after the chain. */
static void penalized(const ml_gen_params *p, float *l, const ml_token *h, size_t n)
{
    ml_gen *g = new_gen(p);
    ml_gen_input in = {l, h, n, 10};
    ml_gen_result res;
    ml_error err;
    ck_assert_msg(ml_gen_next(g, &in, &res, &err) == ML_OK, "%s", err.msg);
    ml_gen_free(g);
}

START_TEST(test_presence_frequency)
{
    fixture f;
    fixture_init(&f);
    ml_gen_params p = text_params(&f, 5);
    p.sampler.repeat_penalty = 2, p.sampler.presence_penalty = 0.5f;
    p.sampler.frequency_penalty = 0.25f;
    /* Token 0 twice, 1 and 4 once: the repeat penalty once per token,
     * then count * 0.25 + 0.5 off (llama.cpp's order). */
    const ml_token hist[4] = {0, 1, 0, 4};
    float l[VOCAB] = {4, -1, 0, 0, 2, 3};
    penalized(&p, l, hist, 4);
    ck_assert(l[0] == 4.0f / 2 - (2 * 0.25f + 0.5f));
    ck_assert(l[1] == -1.0f * 2 - 0.75f);
    ck_assert(l[4] == 2.0f / 2 - 0.75f);
    ck_assert(l[5] == 3 && l[6] == 0); /* unseen tokens untouched */
    /* Only the last repeat_last_n tokens count: here 0 once and 4. */
    float w[VOCAB] = {4, -1, 0, 0, 2};
    p.sampler.repeat_last_n = 2;
    penalized(&p, w, hist, 4);
    ck_assert(w[0] == 2 - 0.75f && w[1] == -1 && w[4] == 1 - 0.75f);
    /* Without the repeat penalty, presence and frequency alone apply. */
    float z[VOCAB] = {4, -1};
    p.sampler.repeat_penalty = 1, p.sampler.repeat_last_n = 0;
    penalized(&p, z, hist, 4);
    ck_assert(z[0] == 4 - 1.0f && z[1] == -1 - 0.75f);
    fixture_free(&f);
}
END_TEST

START_TEST(test_logit_bias)
{
    fixture f;
    fixture_init(&f);
    char log[4] = "";
    probe a = {log, 'a', 0, 0, {0}, 0, 0};
    ml_logits_proc proc = {probe_apply, NULL, &a};
    const ml_logit_bias bias[3] = {{4, 5}, {0, -INFINITY}, {4, -1.5f}};
    ml_gen_params p = text_params(&f, 5);
    p.bias = bias, p.n_bias = 3, p.procs = &proc, p.n_procs = 1;
    float l[VOCAB] = {9, 0, 0, 0, 1};
    ml_gen *g = new_gen(&p);
    ml_gen_input in = {l, NULL, 0, 10};
    ml_gen_result res;
    ml_error err;
    ck_assert_int_eq(ml_gen_next(g, &in, &res, &err), ML_OK);
    ck_assert_uint_eq(res.token, 4); /* 0 banned, 4 at 1 + 5 - 1.5 */
    ck_assert(l[4] == 4.5f && isinf(l[0]) && l[0] < 0);
    ck_assert(isinf(a.seen_0) && a.seen_0 < 0); /* before the caller's processors */
    ml_gen_free(g);
    /* The list was copied. */
    ml_logit_bias mine[1] = {{4, 50}};
    p.bias = mine, p.n_bias = 1, p.n_procs = 0;
    g = new_gen(&p);
    mine[0].id = 1;
    float m[VOCAB] = {9};
    in.logits = m;
    ck_assert_int_eq(ml_gen_next(g, &in, &res, &err), ML_OK);
    ck_assert_uint_eq(res.token, 4);
    ml_gen_free(g);
    fixture_free(&f);
}
END_TEST

/* ---- tokens only ---- */
START_TEST(test_tokens_only)
{
    fixture f;
    fixture_init(&f);
    ml_gen_params p = text_params(&f, 5);
    p.flags = ML_GEN_NO_TEXT, p.on_text = NULL;
    ml_gen *g = new_gen(&p);
    ck_assert_int_eq(step(g, 0, 10).end, ML_GEN_GOING);
    ck_assert_int_eq(step(g, LEAD, 10).end, ML_GEN_GOING);
    ck_assert_int_eq(step(g, EOT, 10).end, ML_GEN_EOG); /* the tokenizer still ends it */
    finish(g);
    ck_assert_uint_eq(f.n_kept, 2);
    ml_gen_free(g);
    /* Without a tokenizer nothing ends a generation but length and room,
     * and ignore-EOS has nothing to ban. */
    p.mlt = NULL, p.flags = ML_GEN_NO_TEXT | ML_GEN_IGNORE_EOS;
    g = new_gen(&p);
    ck_assert_int_eq(step(g, EOT, 10).end, ML_GEN_GOING);
    ck_assert_int_eq(step(g, EOS, 0).end, ML_GEN_CTX_FULL);
    finish(g);
    ck_assert_uint_eq(f.n_kept, 4);
    ck_assert_uint_eq(f.text.len, 0);
    ml_gen_free(g);
    fixture_free(&f);
}
END_TEST

/* ---- the same ids as the sampler ---- */
START_TEST(test_same_ids_as_sampler)
{
    enum { V = 300, STEPS = 60 };
    ml_sampler_params sp = {0.8f, 40, 0.95f, 0.05f, 1.3f, 16, 1234 + (uint64_t)_i, 0.3f, 0.2f};
    if (_i == 1)
        sp.top_k = 0; /* min-p over the whole vocabulary */
    ml_gen_params p = {.vocab = V, .sampler = sp, .flags = ML_GEN_NO_TEXT, .max_tokens = STEPS};
    ml_gen *g = new_gen(&p);
    ml_sampler *s;
    ml_error err;
    ck_assert_int_eq(ml_sampler_new(&sp, V, &s, &err), ML_OK);
    tu_rng r = {77};
    ml_token hist[2 * STEPS + 8] = {5, 6, 7, 5};
    size_t n_hist = 4;
    static float a[V], b[V];
    for (int round = 0; round < 2; round++) { /* a restart keeps the draws going */
        ml_gen_restart(g);
        for (int i = 0; i < STEPS; i++) {
            for (int v = 0; v < V; v++)
                a[v] = b[v] = (float)tu_below(&r, 1000) / 100.0f;
            ml_token want = ml_sampler_next(s, b, hist, n_hist);
            ml_gen_input in = {a, hist, n_hist, 1000};
            ml_gen_result res;
            ck_assert_int_eq(ml_gen_next(g, &in, &res, &err), ML_OK);
            ck_assert_uint_eq(res.token, want);
            ck_assert_int_eq(res.end, i + 1 == STEPS ? ML_GEN_LENGTH : ML_GEN_GOING);
            ck_assert_int_eq(memcmp(a, b, sizeof a), 0); /* the penalty's bits too */
            hist[n_hist++] = want;
        }
    }
    ml_sampler_free(s);
    ml_gen_free(g);
}
END_TEST

/* ---- bad arguments and failing callbacks ---- */
static ml_status fail_io(void *ctx, float *logits, uint32_t vocab, const ml_token *history,
                         size_t n_history, ml_error *err)
{
    (void)ctx, (void)logits, (void)vocab, (void)history, (void)n_history;
    return fail_with(err, ML_E_IO);
}

static ml_status fail_text(void *ctx, const void *buf, size_t n, ml_error *err)
{
    (void)ctx, (void)buf, (void)n;
    return fail_with(err, ML_E_IO);
}

static void refused(const ml_gen_params *p, ml_status want, const char *what)
{
    ml_gen *g = (ml_gen *)1;
    ml_error err;
    tu_err_reset(&err);
    TU_CHECK_ERR(what, ml_gen_new(p, &g, &err), err, want, "", -1);
    ck_assert_msg(g == NULL, "%s: *out not cleared", what);
}

START_TEST(test_bad_params)
{
    fixture f;
    fixture_init(&f);
    ml_logits_proc procs[ML_GEN_MAX_PROCS + 1];
    for (int i = 0; i <= ML_GEN_MAX_PROCS; i++)
        procs[i] = (ml_logits_proc){fail_io, NULL, NULL};
    const char *empty[1] = {""};
    ml_gen_params ok = text_params(&f, 5), p;
    ml_gen *g;
    ml_error err;
    tu_err_reset(&err);
    TU_CHECK_ERR("no params", ml_gen_new(NULL, &g, &err), err, ML_E_INVAL, "", -1);
    tu_err_reset(&err);
    TU_CHECK_ERR("no out", ml_gen_new(&ok, NULL, &err), err, ML_E_INVAL, "", -1);
    ck_assert_int_eq(ml_gen_new(NULL, &g, NULL), ML_E_INVAL); /* err may be NULL */
    p = ok, p.vocab = 0;
    refused(&p, ML_E_INVAL, "vocab 0");
    p = ok, p.flags = 8;
    refused(&p, ML_E_INVAL, "unknown flag");
    p = ok, p.mlt = NULL;
    refused(&p, ML_E_INVAL, "text without a tokenizer");
    p = ok, p.on_text = NULL;
    refused(&p, ML_E_INVAL, "text without a sink");
    p = ok, p.flags = ML_GEN_NO_TEXT, p.stops = empty + 0, p.n_stops = 1;
    refused(&p, ML_E_INVAL, "stop strings without text");
    p = ok, p.n_procs = 1;
    refused(&p, ML_E_INVAL, "processors NULL");
    p = ok, p.procs = procs, p.n_procs = ML_GEN_MAX_PROCS + 1;
    refused(&p, ML_E_INVAL, "too many processors");
    procs[1].apply = NULL;
    p = ok, p.procs = procs, p.n_procs = 2;
    refused(&p, ML_E_INVAL, "a processor without apply");
    p = ok, p.vocab = N_TOK - 1; /* ml_mlt_check_vocab's error, as it gives it */
    tu_err_reset(&err);
    TU_CHECK_ERR("a tokenizer larger than the vocabulary", ml_gen_new(&p, &g, &err), err,
                 ML_E_SHAPE, "n_vocab", 12);
    p = ok, p.sampler.temperature = -1;
    refused(&p, ML_E_INVAL, "a sampler parameter");
    p = ok, p.stops = empty, p.n_stops = 1;
    refused(&p, ML_E_INVAL, "an empty stop string");
    p = ok, p.n_stops = 1;
    refused(&p, ML_E_INVAL, "stop strings NULL");
    p = ok, p.n_stops = ML_STOP_MAX + 1;
    refused(&p, ML_E_INVAL, "too many stop strings");
    p = ok, p.sampler.presence_penalty = NAN;
    refused(&p, ML_E_INVAL, "a presence penalty not a number");
    p = ok, p.sampler.frequency_penalty = INFINITY;
    refused(&p, ML_E_INVAL, "an infinite frequency penalty");
    ml_logit_bias bias[VOCAB + 1];
    for (int i = 0; i <= VOCAB; i++)
        bias[i] = (ml_logit_bias){(ml_token)(i % VOCAB), 1};
    p = ok, p.n_bias = 1;
    refused(&p, ML_E_INVAL, "logit biases NULL");
    p = ok, p.bias = bias, p.n_bias = VOCAB + 1;
    refused(&p, ML_E_INVAL, "more logit biases than tokens");
    bias[0].id = VOCAB;
    p = ok, p.bias = bias, p.n_bias = 1;
    refused(&p, ML_E_INVAL, "a logit bias past the vocabulary");
    bias[0] = (ml_logit_bias){0, NAN};
    refused(&p, ML_E_INVAL, "a logit bias not a number");
    bias[0].bias = INFINITY;
    refused(&p, ML_E_INVAL, "a logit bias of +inf");
    bias[0].bias = -INFINITY; /* a ban is fine, and so is one per token */
    p.n_bias = VOCAB;
    ck_assert_int_eq(ml_gen_new(&p, &g, &err), ML_OK);
    ml_gen_free(g);
    /* Exactly ML_GEN_MAX_PROCS is fine, and so is a vocabulary the size
     * of the tokenizer. */
    procs[1].apply = fail_io;
    p = ok, p.procs = procs, p.n_procs = ML_GEN_MAX_PROCS, p.vocab = N_TOK;
    ck_assert_int_eq(ml_gen_new(&p, &g, &err), ML_OK);
    ml_gen_free(g);
    ml_gen_free(NULL);
    ml_gen_restart(NULL);
    ck_assert_uint_eq(ml_gen_n_tokens(NULL), 0);
    fixture_free(&f);
}
END_TEST

START_TEST(test_bad_steps)
{
    fixture f;
    fixture_init(&f);
    ml_gen_params p = text_params(&f, 5);
    ml_gen *g = new_gen(&p);
    float logits[VOCAB] = {1};
    ml_gen_input in = {logits, NULL, 0, 10}, bad;
    ml_gen_result res;
    ml_error err;
    tu_err_reset(&err);
    TU_CHECK_ERR("no generator", ml_gen_next(NULL, &in, &res, &err), err, ML_E_INVAL, "", -1);
    tu_err_reset(&err);
    TU_CHECK_ERR("no input", ml_gen_next(g, NULL, &res, &err), err, ML_E_INVAL, "", -1);
    tu_err_reset(&err);
    TU_CHECK_ERR("no result", ml_gen_next(g, &in, NULL, &err), err, ML_E_INVAL, "", -1);
    bad = in, bad.logits = NULL;
    tu_err_reset(&err);
    TU_CHECK_ERR("no logits", ml_gen_next(g, &bad, &res, &err), err, ML_E_INVAL, "", -1);
    bad = in, bad.n_history = 3;
    tu_err_reset(&err);
    TU_CHECK_ERR("history NULL", ml_gen_next(g, &bad, &res, &err), err, ML_E_INVAL, "", -1);
    tu_err_reset(&err);
    TU_CHECK_ERR("no generator to finish", ml_gen_finish(NULL, &err), err, ML_E_INVAL, "", -1);
    ck_assert_uint_eq(ml_gen_n_tokens(g), 0); /* refusals change nothing */
    /* Over: after an end, and after a finish, until a restart. */
    ck_assert_int_eq(step(g, EOT, 10).end, ML_GEN_EOG);
    tu_err_reset(&err);
    TU_CHECK_ERR("after the end", ml_gen_next(g, &in, &res, &err), err, ML_E_INVAL, "", -1);
    ml_gen_restart(g);
    finish(g);
    tu_err_reset(&err);
    TU_CHECK_ERR("after a finish", ml_gen_next(g, &in, &res, &err), err, ML_E_INVAL, "", -1);
    ml_gen_restart(g);
    /* A token the tokenizer cannot decode: the decoder's refusal. */
    logits[0] = 0, logits[N_TOK] = 1;
    tu_err_reset(&err);
    TU_CHECK_ERR("undecodable token", ml_gen_next(g, &in, &res, &err), err, ML_E_INVAL, "", -1);
    tu_err_reset(&err);
    TU_CHECK_ERR("after a failure", ml_gen_next(g, &in, &res, &err), err, ML_E_INVAL, "", -1);
    ml_gen_free(g);
    /* Failing callbacks end the step with their status. */
    f.token_status = ML_E_NOMEM;
    g = new_gen(&p);
    memset(logits, 0, sizeof logits);
    tu_err_reset(&err);
    TU_CHECK_ERR("on_token", ml_gen_next(g, &in, &res, &err), err, ML_E_NOMEM, "", -1);
    ml_gen_free(g);
    f.token_status = ML_OK;
    p.on_text = fail_text;
    g = new_gen(&p);
    tu_err_reset(&err);
    TU_CHECK_ERR("on_text", ml_gen_next(g, &in, &res, &err), err, ML_E_IO, "", -1);
    ml_gen_free(g);
    p = text_params(&f, 5);
    f.n_kept = 0;
    ml_logits_proc proc = {fail_io, NULL, NULL};
    p.procs = &proc, p.n_procs = 1;
    g = new_gen(&p);
    tu_err_reset(&err);
    TU_CHECK_ERR("a processor", ml_gen_next(g, &in, &res, &err), err, ML_E_IO, "", -1);
    ck_assert_uint_eq(f.n_kept, 0);
    ml_gen_free(g);
    fixture_free(&f);
}
END_TEST

/* Speculation's n-gram guess: what followed the last size_n tokens the
 * last time, repeated where it reaches the present; none without an
 * earlier occurrence. */
START_TEST(test_draft_ngram)
{
    ml_token d[8];
    const ml_token a[] = {1, 2, 3, 4, 5, 1, 2, 3};
    /* "2 3" occurred at 1: 4 5 1 2 3 follow, then 4 5 1 again */
    ck_assert_uint_eq(ml_draft_ngram(a, 8, 2, d, 8), 8);
    const ml_token want[] = {4, 5, 1, 2, 3, 4, 5, 1};
    ck_assert(memcmp(d, want, sizeof want) == 0);
    ck_assert_uint_eq(ml_draft_ngram(a, 8, 2, d, 3), 3);
    ck_assert(memcmp(d, want, 3 * sizeof *d) == 0);
    /* the most recent occurrence wins */
    const ml_token b[] = {7, 1, 9, 7, 1, 8, 7, 1};
    ck_assert_uint_eq(ml_draft_ngram(b, 8, 2, d, 2), 2);
    ck_assert_int_eq(d[0], 8);
    ck_assert_int_eq(d[1], 7);
    /* a period of one */
    const ml_token c[] = {5, 5, 5};
    ck_assert_uint_eq(ml_draft_ngram(c, 3, 1, d, 4), 4);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(d[i], 5);
    /* none */
    ck_assert_uint_eq(ml_draft_ngram(a, 8, 3, d, 8) , 8); /* "1 2 3" at 0 */
    ck_assert_uint_eq(ml_draft_ngram(a, 8, 4, d, 8), 0);
    ck_assert_uint_eq(ml_draft_ngram(a, 8, 8, d, 8), 0);
    ck_assert_uint_eq(ml_draft_ngram(a, 8, 0, d, 8), 0);
    ck_assert_uint_eq(ml_draft_ngram(a, 8, 2, d, 0), 0);
    ck_assert_uint_eq(ml_draft_ngram(NULL, 8, 2, d, 8), 0);
    ck_assert_uint_eq(ml_draft_ngram(a, 8, 2, NULL, 8), 0);
}
END_TEST

Suite *suite_generate(void)
{
    Suite *s = suite_create("generate");
    TCase *tc = tcase_create("generate");
    tcase_add_test(tc, test_end_of_generation);
    tcase_add_test(tc, test_stop_string_across_tokens);
    tcase_add_test(tc, test_length);
    tcase_add_test(tc, test_context_full);
    tcase_add_test(tc, test_end_precedence);
    tcase_add_test(tc, test_zero_tokens);
    tcase_add_test(tc, test_held_text_released_at_the_end);
    tcase_add_test(tc, test_ignore_eos_ban);
    tcase_add_test(tc, test_processor_order);
    tcase_add_test(tc, test_presence_frequency);
    tcase_add_test(tc, test_logit_bias);
    tcase_add_test(tc, test_tokens_only);
    tcase_add_loop_test(tc, test_same_ids_as_sampler, 0, 2);
    tcase_add_test(tc, test_bad_params);
    tcase_add_test(tc, test_bad_steps);
    tcase_add_test(tc, test_draft_ngram);
    suite_add_tcase(s, tc);
    return s;
}
