/* draft.c - ml-run's draft model (-md, --spec-type draft-simple): a
 * second, smaller model with a context of its own that guesses the next
 * tokens greedily for the model to check in one step (session.c).  Its
 * guesses are the model's token ids, so it must share the model's
 * vocabulary: the same number of logit rows and a tokenizer with the same
 * tokens, checked at load.  Its context follows the tokens the generation
 * kept: before each guess it keeps what it holds in common with them
 * (taken back past guesses that were not kept) and evaluates the rest. */
#include "cli.h"
#include "text.h"
#include "run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The draft model's tokenizer, beside it, has the model's tokens under
 * the model's ids (ml_mlt_same_tokens); 0 or the exit status, reported. */
static int same_tokenizer(const run *r)
{
    char *path = cli_tokenizer_beside(r->o.draft_model);
    if (!path)
        return cli_fail(NULL, ML_E_NOMEM, NULL);
    ml_mlt *t = NULL;
    ml_error err;
    int e = 0;
    ml_status s = ml_mlt_open(path, &t, &err);
    if (s) {
        e = cli_fail(path, s, &err);
        if (s == ML_E_IO)
            cli_warn(NULL, "hint: a draft model's tokenizer lies beside it (gguf2mlb -t), to show "
                           "that it shares the model's vocabulary");
    } else if ((s = ml_mlt_same_tokens(r->mlt, t, &err))) {
        e = cli_failf(path, s, "%s; a draft model must share the model's vocabulary", err.msg);
    }
    ml_mlt_close(t);
    free(path);
    return e;
}

/* The draft model, checked against the model, and its context: as long
 * as the model's (or the draft's max_seq), with the same batch and cache
 * types, and --threads-draft threads (default: --threads). */
int draft_open(run *r)
{
    ml_error err;
    const char *f = r->o.draft_model;
    ml_status s = ml_mlb_open_ex(f, r->o.no_mmap ? ML_MLB_READ : 0, &r->dmlb, &err);
    if (s)
        return cli_fail(f, s, &err);
    const ml_mlb_header *dh = ml_mlb_get_header(r->dmlb);
    if (dh->vocab != r->h->vocab)
        return cli_failf(f, ML_E_MISMATCH,
                         "the draft model has %u tokens, the model %u; a draft model must share "
                         "the model's vocabulary",
                         dh->vocab, r->h->vocab);
    int e = same_tokenizer(r);
    if (e)
        return e;
    if ((s = ml_model_new(r->dmlb, &r->dmodel, &err)))
        return cli_fail(f, s, &err);
    uint32_t n_ctx = ml_ctx_n_ctx(r->ctx) < dh->max_seq ? ml_ctx_n_ctx(r->ctx) : dh->max_seq;
    unsigned threads = (unsigned)(r->o.threads_draft ? r->o.threads_draft : r->o.threads);
    ml_ctx_params p = {.n_ctx = n_ctx, .n_batch = (uint32_t)r->nb, .n_threads = threads,
                       .cache_k = r->o.cache_k, .cache_v = r->o.cache_v};
    if ((s = ml_ctx_new(r->dmodel, &p, &r->dctx, &err)))
        return cli_fail(f, s, &err);
    if (!ml_ctx_seq_rewind_room(r->dctx, 0)) {
        cli_warn(f, "--model-draft: the draft model's linear-attention state cannot be taken "
                    "back; generating without speculation");
        r->o.spec.type = 0;
        return 0;
    }
    r->drow = malloc(dh->vocab * sizeof *r->drow);
    return r->drow ? 0 : cli_fail(f, ML_E_NOMEM, NULL);
}

/* -v's line for the draft model, after the model's. */
void draft_describe(const run *r)
{
    const ml_mlb_header *dh = ml_mlb_get_header(r->dmlb);
    uint64_t threads = r->o.threads_draft ? r->o.threads_draft : r->o.threads;
    fprintf(stderr, "ml-run: %s: draft model, %u layers, dim %u, context %u, %u threads\n",
            r->o.draft_model, dh->n_layers, dh->dim, ml_ctx_n_ctx(r->dctx), (unsigned)threads);
}

/* n tokens the draft's context has evaluated, after those it held. */
static ml_status hold(run *r, const ml_token *ids, size_t n, ml_error *err)
{
    ml_token *held = ml_array_reserve(r->dheld, &r->cap_dheld, r->n_dheld + n, sizeof *held);
    if (!held)
        return cli_set_error(err, ML_E_NOMEM, "%s", ml_strerror(ML_E_NOMEM));
    r->dheld = held;
    memcpy(r->dheld + r->n_dheld, ids, n * sizeof *ids);
    r->n_dheld += n;
    return ML_OK;
}

/* The draft's context brought to hold ids[0..n_ids), its logits after the
 * last in drow: what it holds in common with them stays (but the last,
 * evaluated again for its logits), the rest is taken back (or, where it
 * cannot go back, all of it: ml_ctx_seq_keep) and ids evaluated from
 * there, a batch at a time. */
static ml_status follow(run *r, ml_error *err)
{
    size_t keep = 0;
    while (keep < r->n_dheld && keep < r->n_ids && r->dheld[keep] == r->ids[keep])
        keep++;
    if (keep == r->n_ids)
        keep--;
    r->n_dheld = ml_ctx_seq_keep(r->dctx, 0, (uint32_t)keep);
    ml_status s = ML_OK;
    while (!s && r->n_dheld < r->n_ids) {
        size_t n = r->n_ids - r->n_dheld < r->nb ? r->n_ids - r->n_dheld : r->nb;
        s = ml_ctx_eval(r->dctx, r->ids + r->n_dheld, n, r->drow, 0, err);
        if (!s)
            s = hold(r, r->ids + r->n_dheld, n, err);
    }
    return s;
}

/* The most likely token of a row (the first of equals). */
static ml_token best(const float *row, uint32_t vocab)
{
    ml_token b = 0;
    for (ml_token t = 1; t < vocab; t++)
        if (row[t] > row[b])
            b = t;
    return b;
}

/* Its probability (softmax), for --spec-draft-p-min. */
static double best_p(const float *row, uint32_t vocab, ml_token b)
{
    double sum = 0;
    for (ml_token t = 0; t < vocab; t++)
        sum += exp((double)row[t] - (double)row[b]);
    return sum > 0 ? 1 / sum : 0;
}

/* Up to `most` guesses of what follows ids into draft[1..]: the draft
 * model's most likely token, evaluated, and its most likely next, as far
 * as its context holds them and can take them back (the last guess is not
 * evaluated: nothing follows it this step) and, with --spec-draft-p-min,
 * while it is that sure of them.  *n: the guesses made. */
ml_status draft_guess(run *r, size_t most, size_t *n, ml_error *err)
{
    *n = 0;
    if (r->n_ids > ml_ctx_n_ctx(r->dctx))
        return ML_OK; /* the draft's context is full: the model goes on alone */
    ml_status s = follow(r, err);
    if (s)
        return s;
    size_t room = (size_t)ml_ctx_seq_rewind_room(r->dctx, 0) + 1;
    most = most < room ? most : room;
    for (size_t j = 0; !s && j < most; j++) {
        ml_token t = best(r->drow, r->h->vocab);
        if (r->o.spec_p_min > 0 && best_p(r->drow, r->h->vocab, t) < r->o.spec_p_min)
            break;
        r->draft[1 + j] = t;
        *n = j + 1;
        if (j + 1 < most) {
            s = ml_ctx_eval(r->dctx, &t, 1, r->drow, 0, err);
            if (!s)
                s = hold(r, &t, 1, err);
        }
    }
    return s;
}

void draft_close(run *r)
{
    ml_ctx_free(r->dctx);
    ml_model_free(r->dmodel);
    ml_mlb_close(r->dmlb);
    free(r->dheld);
    free(r->drow);
}
