/* generate.c - the generator (mlcore/generate.h): one sequence's steps
 * from logits to text in one fixed order.  A step runs the processor
 * chain (the logit bias, the end-of-generation ban, the penalties, the
 * caller's processors), lets the sampler pick, tests for the end of
 * generation, keeps the token (processors' accept, on_token), decodes it
 * through the stop strings to on_text, and tests stop string, length and
 * room, in that order.  Everything a step touches is the generator's own,
 * so generators running side by side never meet. */
#include "base/internal.h"
#include "runtime/sample.h"

#include <mlcore/generate.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The bias, the ban and the penalties, then the caller's processors. */
#define CHAIN_MAX (3 + ML_GEN_MAX_PROCS)

struct ml_gen {
    ml_gen_params p;      /* stops and procs point at nothing: copied below */
    ml_sampler *sampler;
    ml_stop *stop;
    ml_tok_stream ts;
    ml_logit_bias *bias;  /* the caller's, copied (p.bias points here) */
    ml_logits_proc chain[CHAIN_MAX];
    size_t n_chain;
    uint64_t n_tokens;    /* kept since the start of the text */
    int over;             /* ended, failed or finished: ml_gen_next refuses */
    int finished;         /* ml_gen_finish released the tail */
};

/* ------------------------------------------------------------------------
 * The built-in processors
 * ------------------------------------------------------------------------ */
/* ignore EOS: the tokenizer's end-of-generation ids can never be drawn. */
static ml_status ban_eog(void *ctx, float *logits, uint32_t vocab, const ml_token *history,
                         size_t n_history, ml_error *err)
{
    const ml_mlt *t = ctx;
    (void)history, (void)n_history, (void)err;
    for (uint32_t i = 0; i < ml_mlt_n_eog(t); i++)
        if (ml_mlt_eog(t, i) < vocab)
            logits[ml_mlt_eog(t, i)] = -INFINITY;
    return ML_OK;
}

/* logit_bias: each listed token's constant, in the list's order. */
static ml_status add_bias(void *ctx, float *logits, uint32_t vocab, const ml_token *history,
                          size_t n_history, ml_error *err)
{
    const ml_gen *g = ctx;
    (void)vocab, (void)history, (void)n_history, (void)err;
    for (size_t i = 0; i < g->p.n_bias; i++)
        logits[g->p.bias[i].id] += g->p.bias[i].bias;
    return ML_OK;
}

/* The sampler's penalties, over the history the step was given. */
static ml_status repeat_penalty(void *ctx, float *logits, uint32_t vocab,
                                const ml_token *history, size_t n_history, ml_error *err)
{
    (void)vocab, (void)err;
    ml__sampler_penalize(ctx, logits, history, n_history);
    return ML_OK;
}

static void build_chain(ml_gen *g)
{
    const ml_gen_params *p = &g->p;
    if (p->n_bias)
        g->chain[g->n_chain++] = (ml_logits_proc){add_bias, NULL, g};
    if ((p->flags & ML_GEN_IGNORE_EOS) && p->mlt)
        g->chain[g->n_chain++] = (ml_logits_proc){ban_eog, NULL, (void *)p->mlt};
    if (ml__sampler_penalizes(g->sampler))
        g->chain[g->n_chain++] = (ml_logits_proc){repeat_penalty, NULL, g->sampler};
    for (size_t i = 0; i < p->n_procs; i++)
        g->chain[g->n_chain++] = p->procs[i];
}

/* ------------------------------------------------------------------------
 * Making one
 * ------------------------------------------------------------------------ */
static ml_status check_procs(const ml_gen_params *p, ml_error *err)
{
    if (p->n_procs > ML_GEN_MAX_PROCS)
        return ml__err(err, ML_E_INVAL, "", -1, "%zu logit processors (at most %d)", p->n_procs,
                       ML_GEN_MAX_PROCS);
    if (p->n_procs && !p->procs)
        return ml__err(err, ML_E_INVAL, "", -1, "%zu logit processors, none given", p->n_procs);
    for (size_t i = 0; i < p->n_procs; i++)
        if (!p->procs[i].apply)
            return ml__err(err, ML_E_INVAL, "", -1, "logit processor %zu has no function", i + 1);
    return ML_OK;
}

static ml_status check_bias(const ml_gen_params *p, ml_error *err)
{
    if (p->n_bias && !p->bias)
        return ml__err(err, ML_E_INVAL, "", -1, "%zu logit biases, none given", p->n_bias);
    if (p->n_bias > p->vocab)
        return ml__err(err, ML_E_INVAL, "", -1, "%zu logit biases for %u tokens", p->n_bias,
                       p->vocab);
    for (size_t i = 0; i < p->n_bias; i++) {
        if (p->bias[i].id >= p->vocab)
            return ml__err(err, ML_E_INVAL, "", -1, "logit bias for token %u, outside the %u",
                           p->bias[i].id, p->vocab);
        if (isnan(p->bias[i].bias) || p->bias[i].bias == INFINITY)
            return ml__err(err, ML_E_INVAL, "", -1, "logit bias of token %u is not a number",
                           p->bias[i].id);
    }
    return ML_OK;
}

static ml_status check_params(const ml_gen_params *p, ml_error *err)
{
    int text = !(p->flags & ML_GEN_NO_TEXT);
    if (p->vocab == 0)
        return ml__err(err, ML_E_INVAL, "", -1, "a vocabulary of 0 tokens");
    if (p->flags & ~(unsigned)(ML_GEN_IGNORE_EOS | ML_GEN_NO_TEXT | ML_GEN_CONTINUE))
        return ml__err(err, ML_E_INVAL, "", -1, "unknown generation flags 0x%x", p->flags);
    if (text && !p->mlt)
        return ml__err(err, ML_E_INVAL, "", -1, "text needs a tokenizer (or ML_GEN_NO_TEXT)");
    if (text && !p->on_text)
        return ml__err(err, ML_E_INVAL, "", -1, "text needs a sink (on_text)");
    if (!text && p->n_stops)
        return ml__err(err, ML_E_INVAL, "", -1, "stop strings need text (not ML_GEN_NO_TEXT)");
    if (p->mlt) {
        ml_status s = ml_mlt_check_vocab(p->mlt, p->vocab, err);
        if (s)
            return s;
    }
    ml_status s = check_procs(p, err);
    return s ? s : check_bias(p, err);
}

ml_status ml_gen_new(const ml_gen_params *p, ml_gen **out, ml_error *err)
{
    if (!out)
        return ml__err(err, ML_E_INVAL, "", -1, "no place for the generator");
    *out = NULL;
    if (!p)
        return ml__err(err, ML_E_INVAL, "", -1, "no generation parameters");
    ml_status s = check_params(p, err);
    if (s)
        return s;
    ml_gen *g = calloc(1, sizeof *g);
    if (!g)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    g->p = *p;
    s = ml_sampler_new(&p->sampler, p->vocab, &g->sampler, err);
    if (!s)
        s = ml_stop_new(p->stops, p->n_stops, &g->stop, err);
    if (s) {
        ml_gen_free(g);
        return s;
    }
    g->p.stops = NULL, g->p.n_stops = 0;
    if (p->n_bias) {
        if (!(g->bias = malloc(p->n_bias * sizeof *g->bias))) { /* n_bias <= vocab */
            ml_gen_free(g);
            return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
        }
        memcpy(g->bias, p->bias, p->n_bias * sizeof *g->bias);
    }
    g->p.bias = g->bias;
    build_chain(g);
    g->p.procs = NULL, g->p.n_procs = 0;
    ml_gen_restart(g);
    *out = g;
    return ML_OK;
}

void ml_gen_free(ml_gen *g)
{
    if (!g)
        return;
    ml_sampler_free(g->sampler);
    ml_stop_free(g->stop);
    free(g->bias);
    free(g);
}

void ml_gen_restart(ml_gen *g)
{
    if (!g)
        return;
    if (g->p.mlt)
        ml_tok_stream_init(&g->ts, g->p.mlt,
                           ML_TOK_SKIP_BOS_EOS |
                               (g->p.flags & ML_GEN_CONTINUE ? ML_TOK_KEEP_SPACE : 0));
    ml_stop_reset(g->stop);
    g->n_tokens = 0;
    g->over = g->finished = 0;
}

uint64_t ml_gen_n_tokens(const ml_gen *g)
{
    return g ? g->n_tokens : 0;
}

/* ------------------------------------------------------------------------
 * A step
 * ------------------------------------------------------------------------ */
/* The decoder's text through the stop strings to the caller; an empty
 * release is not passed on. */
static ml_status release_text(void *ctx, const void *buf, size_t n, ml_error *err)
{
    ml_gen *g = ctx;
    const char *out;
    size_t len;
    if (ml_stop_push(g->stop, buf, n, &out, &len) < 0)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    return len ? g->p.on_text(g->p.text_ctx, out, len, err) : ML_OK;
}

static ml_status run_chain(ml_gen *g, const ml_gen_input *in, ml_error *err)
{
    for (size_t i = 0; i < g->n_chain; i++) {
        const ml_logits_proc *c = &g->chain[i];
        ml_status s = c->apply(c->ctx, in->logits, g->p.vocab, in->history, in->n_history, err);
        if (s)
            return s;
    }
    return ML_OK;
}

/* A token that is not the end: the processors follow it, the caller is
 * told, and its text goes out. */
static ml_status keep(ml_gen *g, ml_token id, ml_error *err)
{
    g->n_tokens++;
    for (size_t i = 0; i < g->n_chain; i++)
        if (g->chain[i].accept)
            g->chain[i].accept(g->chain[i].ctx, id);
    ml_status s = g->p.on_token ? g->p.on_token(g->p.token_ctx, id, err) : ML_OK;
    if (!s && !(g->p.flags & ML_GEN_NO_TEXT))
        s = ml_tok_stream_put(&g->ts, id, release_text, g, err);
    return s;
}

/* After a kept token: a stop string wins over the length, the length over
 * the room (the token is shown whatever ends the text). */
static ml_gen_end end_after(const ml_gen *g, const ml_gen_input *in)
{
    if (ml_stop_done(g->stop))
        return ML_GEN_STOP;
    if (g->n_tokens >= g->p.max_tokens)
        return ML_GEN_LENGTH;
    return in->room == 0 ? ML_GEN_CTX_FULL : ML_GEN_GOING;
}

static ml_status check_input(const ml_gen *g, const ml_gen_input *in, const ml_gen_result *out,
                             ml_error *err)
{
    if (!g || !in || !out || !in->logits)
        return ml__err(err, ML_E_INVAL, "", -1, "no generator, input, result or logits");
    if (in->n_history && !in->history)
        return ml__err(err, ML_E_INVAL, "", -1, "a history of %zu tokens, none given",
                       in->n_history);
    if (g->over)
        return ml__err(err, ML_E_INVAL, "", -1, "the generation is over (ml_gen_restart)");
    return ML_OK;
}

ml_status ml_gen_next(ml_gen *g, const ml_gen_input *in, ml_gen_result *out, ml_error *err)
{
    ml_status s = check_input(g, in, out, err);
    if (s)
        return s;
    *out = (ml_gen_result){ML_GEN_LENGTH, 0};
    g->over = 1; /* unless the step goes on */
    if (g->n_tokens >= g->p.max_tokens)
        return ML_OK;
    if ((s = run_chain(g, in, err)))
        return s;
    /* Log-probabilities, when asked for, are read here: the logits as the
     * processors left them, before the pick. */
    out->token = ml__sampler_pick(g->sampler, in->logits);
    if (g->p.mlt && ml_mlt_is_eog(g->p.mlt, out->token)) {
        out->end = ML_GEN_EOG;
        return ML_OK;
    }
    if ((s = keep(g, out->token, err)))
        return s;
    out->end = end_after(g, in);
    g->over = out->end != ML_GEN_GOING;
    return ML_OK;
}

ml_status ml_gen_finish(ml_gen *g, ml_error *err)
{
    if (!g)
        return ml__err(err, ML_E_INVAL, "", -1, "no generator");
    if (g->finished)
        return ML_OK;
    g->finished = g->over = 1;
    if (g->p.flags & ML_GEN_NO_TEXT)
        return ML_OK;
    ml_status s = ml_tok_stream_end(&g->ts, release_text, g, err);
    if (s)
        return s;
    const char *tail;
    size_t len;
    ml_stop_flush(g->stop, &tail, &len);
    return len ? g->p.on_text(g->p.text_ctx, tail, len, err) : ML_OK;
}
