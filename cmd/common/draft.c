/* draft.c - speculative decoding's draft model (draft.h): opened and
 * checked against the model, a sequence per generation kept in step with
 * it by common prefix, and greedy guesses, the sequences' steps taken
 * together (one ml_ctx_eval_seqs for all: the draft's weights read once
 * a step for every generation that guesses). */
#include "draft.h"

#include "cli.h"
#include "text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cli_draft {
    const char *path;
    ml_mlb *mlb;
    ml_model *model;
    ml_ctx *ctx;
    uint32_t vocab, n_ctx, n_batch, n_seq;
    unsigned threads;
    float p_min;
    ml_token *held;    /* n_seq x n_ctx: the tokens each sequence holds, in order */
    size_t *n_held;    /* n_seq */
    uint32_t *seqs;    /* n_batch + n_seq: a step's tokens' sequences */
    ml_token *toks;    /* n_batch + n_seq: a step's tokens */
    float *rows;       /* n_seq x vocab: a step's logits, a row per run */
    size_t *row;       /* n_seq: each ask's row in the last step, or SIZE_MAX */
};

/* The draft model's tokenizer, beside it, has the model's tokens under
 * the model's ids (ml_mlt_same_tokens); 0 or the exit status, reported. */
static int same_tokenizer(const cli_draft_params *p)
{
    char *path = cli_tokenizer_beside(p->path);
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
    } else if ((s = ml_mlt_same_tokens(p->mlt, t, &err))) {
        e = cli_failf(path, s, "%s; a draft model must share the model's vocabulary", err.msg);
    }
    ml_mlt_close(t);
    free(path);
    return e;
}

/* The draft's model file, its vocabulary checked: 0 or the exit status. */
static int open_model(cli_draft *d, const cli_draft_params *p)
{
    ml_error err;
    ml_status s = ml_mlb_open_ex(p->path, p->no_mmap ? ML_MLB_READ : 0, &d->mlb, &err);
    if (s)
        return cli_fail(p->path, s, &err);
    const ml_mlb_header *dh = ml_mlb_get_header(d->mlb);
    if (dh->vocab != p->model->vocab)
        return cli_failf(p->path, ML_E_MISMATCH,
                         "the draft model has %u tokens, the model %u; a draft model must share "
                         "the model's vocabulary",
                         dh->vocab, p->model->vocab);
    int e = same_tokenizer(p);
    if (e)
        return e;
    if ((s = ml_model_new(d->mlb, &d->model, &err)))
        return cli_fail(p->path, s, &err);
    return 0;
}

/* Its context: p's positions (or the draft's max_seq), a sequence per
 * generation, a step of n_batch tokens beside one of each other
 * sequence; 0 or the exit status. */
static int open_context(cli_draft *d, const cli_draft_params *p)
{
    ml_error err;
    const ml_mlb_header *dh = ml_mlb_get_header(d->mlb);
    d->n_batch = p->n_batch ? p->n_batch : 1;
    d->n_seq = p->n_seq ? p->n_seq : 1;
    size_t n_step = (size_t)d->n_batch + d->n_seq;
    ml_ctx_params cp = {.n_ctx = p->n_ctx < dh->max_seq ? p->n_ctx : dh->max_seq,
                        .n_batch = (uint32_t)n_step, .n_threads = p->threads, .n_seq = d->n_seq,
                        .cache_k = p->cache_k, .cache_v = p->cache_v};
    ml_status s = ml_ctx_new(d->model, &cp, &d->ctx, &err);
    if (s)
        return cli_fail(p->path, s, &err);
    d->n_ctx = ml_ctx_n_ctx(d->ctx);
    d->held = malloc((size_t)d->n_seq * d->n_ctx * sizeof *d->held);
    d->n_held = calloc(d->n_seq, sizeof *d->n_held);
    d->seqs = malloc(n_step * sizeof *d->seqs);
    d->toks = malloc(n_step * sizeof *d->toks);
    d->rows = malloc((size_t)d->n_seq * d->vocab * sizeof *d->rows);
    d->row = malloc(d->n_seq * sizeof *d->row);
    if (!d->held || !d->n_held || !d->seqs || !d->toks || !d->rows || !d->row)
        return cli_fail(p->path, ML_E_NOMEM, NULL);
    return 0;
}

int cli_draft_open(const cli_draft_params *p, cli_draft **out)
{
    *out = NULL;
    cli_draft *d = calloc(1, sizeof *d);
    if (!d)
        return cli_fail(p->path, ML_E_NOMEM, NULL);
    d->path = p->path;
    d->vocab = p->model->vocab;
    d->threads = p->threads;
    d->p_min = p->p_min;
    int e = open_model(d, p);
    if (!e)
        e = open_context(d, p);
    if (e) {
        cli_draft_close(d);
        return e;
    }
    if (!ml_ctx_seq_rewind_room(d->ctx, 0)) {
        cli_warn(p->path, "--model-draft: the draft model's linear-attention state cannot be "
                          "taken back; generating without speculation");
        cli_draft_close(d);
        return 0;
    }
    *out = d;
    return 0;
}

void cli_draft_describe(const cli_draft *d)
{
    const ml_mlb_header *dh = ml_mlb_get_header(d->mlb);
    cli_warn(d->path, "draft model, %u layers, dim %u, context %u, %u threads", dh->n_layers,
             dh->dim, d->n_ctx, d->threads);
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

/* ------------------------------------------------------------------------
 * A step: runs of tokens, at most one per sequence, evaluated together
 * ------------------------------------------------------------------------ */
/* Adds n tokens of sequence seq as the step's next run. */
static void add_run(cli_draft *d, size_t *n_tok, uint32_t seq, const ml_token *ids, size_t n)
{
    for (size_t i = 0; i < n; i++, (*n_tok)++)
        d->seqs[*n_tok] = seq, d->toks[*n_tok] = ids[i];
}

/* Evaluates the step's n_tok tokens (runs of distinct sequences, in
 * order), each run's last logits into its row of d->rows; the sequences
 * then hold them. */
static ml_status eval_step(cli_draft *d, size_t n_tok, ml_error *err)
{
    if (!n_tok)
        return ML_OK;
    ml_status s = ml_ctx_eval_seqs(d->ctx, d->seqs, d->toks, n_tok, d->rows, 0, err);
    if (s)
        return s;
    for (size_t i = 0; i < n_tok; i++) {
        uint32_t q = d->seqs[i];
        d->held[(size_t)q * d->n_ctx + d->n_held[q]++] = d->toks[i];
    }
    return ML_OK;
}

/* n tokens of sequence seq alone, a batch at a time, the last logits in
 * the first row. */
static ml_status eval_alone(cli_draft *d, uint32_t seq, const ml_token *ids, size_t n,
                            ml_error *err)
{
    ml_status s = ML_OK;
    while (!s && n) {
        size_t c = n < d->n_batch ? n : d->n_batch, n_tok = 0;
        add_run(d, &n_tok, seq, ids, c);
        s = eval_step(d, n_tok, err);
        ids += c, n -= c;
    }
    return s;
}

/* What sequence seq must evaluate to hold ids[0..n_ids): what it holds in
 * common with them stays (but the last, evaluated again for its logits),
 * the rest is taken back (or, where it cannot go back, all of it:
 * ml_ctx_seq_keep).  Returns the tokens it holds now. */
static size_t rewind_to(cli_draft *d, uint32_t seq, const ml_token *ids, size_t n_ids)
{
    const ml_token *held = d->held + (size_t)seq * d->n_ctx;
    size_t keep = 0;
    while (keep < d->n_held[seq] && keep < n_ids && held[keep] == ids[keep])
        keep++;
    if (keep == n_ids)
        keep--;
    return d->n_held[seq] = ml_ctx_seq_keep(d->ctx, seq, (uint32_t)keep);
}

/* Whether an ask can be answered: its tokens fit the draft's context. */
static int fits(const cli_draft *d, const cli_draft_ask *a)
{
    return a->n_ids && a->n_ids <= d->n_ctx && a->seq < d->n_seq;
}

/* Every ask's sequence brought to hold its ids, the logits after the last
 * in its row (d->row[i]; SIZE_MAX for an ask that does not fit or wants
 * nothing): the tokens they lack as one step, a run each, where they fit
 * in a batch beside the others; a longer stretch (a prompt not read yet)
 * goes alone first, a batch at a time, but for its last token. */
static ml_status catch_up(cli_draft *d, cli_draft_ask *asks, size_t n_asks, ml_error *err)
{
    size_t planned = 0, n_tok = 0, n_runs = 0;
    ml_status s = ML_OK;
    for (size_t i = 0; !s && i < n_asks; i++) {
        cli_draft_ask *a = &asks[i];
        if (!fits(d, a) || !a->most)
            continue;
        size_t have = rewind_to(d, a->seq, a->ids, a->n_ids), left = a->n_ids - have;
        if (left > 1 && planned + left > d->n_batch) {
            s = eval_alone(d, a->seq, a->ids + have, left - 1, err);
            left = 1;
        }
        planned += left;
    }
    for (size_t i = 0; !s && i < n_asks; i++) {
        cli_draft_ask *a = &asks[i];
        d->row[i] = SIZE_MAX;
        if (!fits(d, a) || !a->most)
            continue;
        size_t have = d->n_held[a->seq];
        add_run(d, &n_tok, a->seq, a->ids + have, a->n_ids - have);
        d->row[i] = n_runs++;
    }
    return s ? s : eval_step(d, n_tok, err);
}

ml_status cli_draft_guess_all(cli_draft *d, cli_draft_ask *asks, size_t n_asks, ml_error *err)
{
    for (size_t i = 0; i < n_asks; i++)
        asks[i].n = 0;
    if (n_asks > d->n_seq)
        n_asks = d->n_seq; /* one sequence each: never more asks than sequences */
    ml_status s = catch_up(d, asks, n_asks, err);
    /* the last guess is not evaluated (nothing follows it this step), so
     * the room to take back allows one more */
    for (size_t i = 0; !s && i < n_asks; i++) {
        size_t room = (size_t)ml_ctx_seq_rewind_room(d->ctx, asks[i].seq) + 1;
        if (asks[i].most > room)
            asks[i].most = room;
    }
    /* depth by depth: each ask's most likely token, while it is sure
     * enough, and all of them evaluated in one step for the next depth */
    for (size_t j = 0; !s; j++) {
        size_t n_tok = 0, n_runs = 0;
        for (size_t i = 0; i < n_asks; i++) {
            cli_draft_ask *a = &asks[i];
            if (d->row[i] == SIZE_MAX || j >= a->most)
                continue;
            const float *row = d->rows + d->row[i] * d->vocab;
            ml_token t = best(row, d->vocab);
            d->row[i] = SIZE_MAX;
            if (d->p_min > 0 && best_p(row, d->vocab, t) < d->p_min)
                continue;
            a->out[j] = t;
            a->n = j + 1;
            if (j + 1 < a->most) {
                add_run(d, &n_tok, a->seq, &a->out[j], 1);
                d->row[i] = n_runs++;
            }
        }
        if (!n_tok)
            break;
        s = eval_step(d, n_tok, err);
    }
    return s;
}

ml_status cli_draft_guess(cli_draft *d, uint32_t seq, const ml_token *ids, size_t n_ids,
                          size_t most, ml_token *out, size_t *n, ml_error *err)
{
    cli_draft_ask a = {.seq = seq, .ids = ids, .n_ids = n_ids, .most = most, .out = out};
    ml_status s = cli_draft_guess_all(d, &a, 1, err);
    *n = a.n;
    return s;
}

ml_status cli_draft_follow(cli_draft *d, uint32_t seq, const ml_token *ids, size_t n_ids,
                           ml_error *err)
{
    cli_draft_ask a = {.seq = seq, .ids = ids, .n_ids = n_ids};
    if (!fits(d, &a))
        return ML_OK;
    size_t have = rewind_to(d, seq, ids, n_ids);
    return eval_alone(d, seq, ids + have, n_ids - have, err);
}

void cli_draft_close(cli_draft *d)
{
    if (!d)
        return;
    ml_ctx_free(d->ctx);
    ml_model_free(d->model);
    ml_mlb_close(d->mlb);
    free(d->held);
    free(d->n_held);
    free(d->seqs);
    free(d->toks);
    free(d->rows);
    free(d->row);
    free(d);
}
