/* seq.c - the slots' sequences as one ml_ctx with a sequence per slot,
 * and for each the list of the tokens in its cache (seq.h), which is what
 * prefix reuse compares. */
#include "seq.h"

#include <stdlib.h>
#include <string.h>

struct srv_ctx {
    ml_ctx *ctx;
    uint32_t n_seq, n_ctx, n_chunk, vocab;
    ml_token *held;  /* n_seq x n_ctx: each sequence's tokens, in order */
    size_t *n_held;  /* n_seq */
    uint32_t *seqs;  /* n_chunk + n_seq: a step's tokens' sequences */
    ml_token *toks;  /* n_chunk + n_seq: a step's tokens */
    float *logits;   /* n_seq x vocab: a row per run of the last step */
    /* Scoring: when a run of the step has all_logits, every token of the
     * step has its row (the others' too, as ml_ctx_eval_seqs gives them). */
    int all;         /* the last step kept every token's row */
    float *rows;     /* (n_score + n_seq) x vocab, allocated at the first need */
    uint32_t n_score;
    size_t *first_row; /* n_seq + 1: where each run of the last step starts in
                        * rows, and (after the last run's) where they end */
};

ml_status srv_ctx_new(const ml_model *m, const ml_ctx_params *base, uint32_t n_chunk,
                      srv_ctx **out, ml_error *err)
{
    srv_ctx *c = calloc(1, sizeof *c);
    uint32_t n_seq = base->n_seq < 1 ? 1 : base->n_seq;
    if (n_chunk < 1)
        n_chunk = 1;
    /* A step, the chunk beside a token of each other sequence, is one
     * batch of the context. */
    ml_ctx_params p = *base;
    p.n_batch = n_chunk + n_seq;
    p.n_seq = n_seq;
    ml_status s = c ? ml_ctx_new(m, &p, &c->ctx, err) : ML_E_NOMEM;
    if (!s) {
        c->n_seq = n_seq;
        c->n_ctx = ml_ctx_n_ctx(c->ctx);
        c->n_chunk = n_chunk;
        c->vocab = ml_model_header(m)->vocab;
        size_t n_step = (size_t)n_chunk + n_seq;
        c->held = malloc(sizeof *c->held * c->n_ctx * n_seq);
        c->n_held = calloc(n_seq, sizeof *c->n_held);
        c->seqs = malloc(sizeof *c->seqs * n_step);
        c->toks = malloc(sizeof *c->toks * n_step);
        c->logits = malloc(sizeof *c->logits * c->vocab * n_seq);
        c->first_row = calloc((size_t)n_seq + 1, sizeof *c->first_row);
        uint32_t fit = ml_logits_batch(c->vocab);
        c->n_score = fit < n_chunk ? fit : n_chunk;
        if (!c->held || !c->n_held || !c->seqs || !c->toks || !c->logits || !c->first_row)
            s = ML_E_NOMEM;
    }
    if (s == ML_E_NOMEM && err) {
        memset(err, 0, sizeof *err);
        err->code = ML_E_NOMEM;
        err->offset = -1;
        strcpy(err->msg, "out of memory for the slots' context");
    }
    if (s) {
        srv_ctx_free(c);
        return s;
    }
    *out = c;
    return ML_OK;
}

void srv_ctx_free(srv_ctx *c)
{
    if (!c)
        return;
    ml_ctx_free(c->ctx);
    free(c->held);
    free(c->n_held);
    free(c->seqs);
    free(c->toks);
    free(c->logits);
    free(c->rows);
    free(c->first_row);
    free(c);
}

uint32_t srv_ctx_n_ctx(const srv_ctx *c)
{
    return c->n_ctx;
}

uint32_t srv_ctx_n_chunk(const srv_ctx *c)
{
    return c->n_chunk;
}

size_t srv_ctx_len(const srv_ctx *c, uint32_t seq)
{
    return c->n_held[seq];
}

const ml_token *srv_ctx_held(const srv_ctx *c, uint32_t seq)
{
    return c->held + (size_t)seq * c->n_ctx;
}

size_t srv_ctx_common(const srv_ctx *c, uint32_t seq, const ml_token *tokens, size_t n)
{
    const ml_token *held = c->held + (size_t)seq * c->n_ctx;
    size_t i = 0;
    while (i < n && i < c->n_held[seq] && held[i] == tokens[i])
        i++;
    return i;
}

size_t srv_ctx_keep(srv_ctx *c, uint32_t seq, size_t keep)
{
    if (keep >= c->n_held[seq])
        return c->n_held[seq];
    c->n_held[seq] = ml_ctx_seq_keep(c->ctx, seq, (uint32_t)keep);
    return c->n_held[seq];
}

/* The run's tokens are now in its sequence's cache. */
static void hold(srv_ctx *c, const srv_run *r)
{
    memcpy(c->held + (size_t)r->seq * c->n_ctx + c->n_held[r->seq], r->tokens,
           r->n * sizeof *r->tokens);
    c->n_held[r->seq] += r->n;
}

/* Whether the step keeps every token's row: a run asks, and the rows are
 * there (srv_ctx_score_ready); the rows each run starts at. */
static int all_rows(srv_ctx *c, const srv_run *runs, size_t n_runs)
{
    int all = 0;
    for (size_t i = 0; i < n_runs; i++)
        all |= runs[i].all_logits;
    size_t row = 0;
    for (size_t i = 0; i < n_runs && i < c->n_seq; row += runs[i++].n)
        c->first_row[i] = row;
    c->first_row[n_runs < c->n_seq ? n_runs : c->n_seq] = row;
    return all && c->rows;
}

/* Where run i's logits go: its rows when every token keeps one, else
 * its one row. */
static float *run_out(srv_ctx *c, size_t i)
{
    return c->all ? c->rows + c->first_row[i] * c->vocab : c->logits + i * (size_t)c->vocab;
}

ml_status srv_ctx_step(srv_ctx *c, srv_run *runs, size_t n_runs)
{
    c->all = all_rows(c, runs, n_runs);
    size_t n = 0, cap = c->all ? (size_t)c->n_score + c->n_seq : (size_t)c->n_chunk + c->n_seq;
    int fits = n_runs <= c->n_seq;
    for (size_t i = 0; fits && i < n_runs; i++) {
        memset(&runs[i].err, 0, sizeof runs[i].err);
        runs[i].status = ML_OK;
        if (runs[i].n > cap - n) {
            fits = 0;
            break;
        }
        for (size_t t = 0; t < runs[i].n; t++, n++)
            c->seqs[n] = runs[i].seq, c->toks[n] = runs[i].tokens[t];
    }
    ml_error err;
    if (fits && n_runs &&
        ml_ctx_eval_seqs(c->ctx, c->seqs, c->toks, n, c->all ? c->rows : c->logits, c->all,
                         &err) == ML_OK) {
        for (size_t i = 0; i < n_runs; i++)
            hold(c, &runs[i]);
        return ML_OK;
    }
    /* Refused (nothing was evaluated): each run alone. */
    ml_status first = ML_OK;
    for (size_t i = 0; i < n_runs; i++) {
        srv_run *r = &runs[i];
        memset(&r->err, 0, sizeof r->err);
        r->status = i < c->n_seq ? ML_OK : ML_E_INVAL;
        if (r->status) {
            r->err.code = r->status, r->err.offset = -1;
            strcpy(r->err.msg, "too many runs in one step");
        } else if (r->n > cap || (c->all && c->first_row[i] + r->n > cap)) {
            r->status = r->err.code = ML_E_INVAL, r->err.offset = -1;
            strcpy(r->err.msg, "a run longer than a step");
        } else {
            for (size_t t = 0; t < r->n; t++)
                c->seqs[t] = r->seq;
            r->status = ml_ctx_eval_seqs(c->ctx, c->seqs, r->tokens, r->n, run_out(c, i), c->all,
                                         &r->err);
        }
        if (!r->status)
            hold(c, r);
        else if (!first)
            first = r->status;
    }
    return first;
}

float *srv_ctx_logits(srv_ctx *c, size_t i)
{
    return c->all ? c->rows + (c->first_row[i + 1] - 1) * c->vocab
                  : c->logits + i * (size_t)c->vocab;
}

uint32_t srv_ctx_n_score_chunk(const srv_ctx *c)
{
    return c->n_score;
}

int srv_ctx_score_ready(srv_ctx *c)
{
    if (!c->rows)
        c->rows = malloc(((size_t)c->n_score + c->n_seq) * c->vocab * sizeof *c->rows);
    return c->rows ? 0 : -1;
}

float *srv_ctx_rows(const srv_ctx *c, size_t i)
{
    return c->all ? c->rows + c->first_row[i] * c->vocab : NULL;
}

uint32_t srv_ctx_rewind_room(const srv_ctx *c, uint32_t seq)
{
    return ml_ctx_seq_rewind_room(c->ctx, seq);
}

const ml_ctx *srv_ctx_ml(const srv_ctx *c)
{
    return c->ctx;
}
