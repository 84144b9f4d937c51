/* seq.c - a slot's sequence as one ml_ctx of its own and the list of the
 * tokens in its cache (seq.h), which is what prefix reuse compares. */
#include "seq.h"

#include <stdlib.h>
#include <string.h>

struct srv_seq {
    ml_ctx *ctx;
    ml_token *held; /* n_ctx: the tokens in the cache, in order */
    size_t n_held;
    float *logits;  /* vocab: of the last token evaluated */
};

ml_status srv_seq_new(const ml_model *m, uint32_t n_ctx, uint32_t n_batch, unsigned threads,
                      srv_seq **out, ml_error *err)
{
    srv_seq *q = calloc(1, sizeof *q);
    ml_ctx_params p = {.n_ctx = n_ctx, .n_batch = n_batch, .n_threads = threads};
    ml_status s = q ? ml_ctx_new(m, &p, &q->ctx, err) : ML_E_NOMEM;
    if (!s) {
        q->held = malloc(sizeof *q->held * ml_ctx_n_ctx(q->ctx));
        q->logits = malloc(sizeof *q->logits * ml_model_header(m)->vocab);
        if (!q->held || !q->logits)
            s = ML_E_NOMEM;
    }
    if (s == ML_E_NOMEM && err) {
        memset(err, 0, sizeof *err);
        err->code = ML_E_NOMEM;
        err->offset = -1;
        strcpy(err->msg, "out of memory for a slot's context");
    }
    if (s) {
        srv_seq_free(q);
        return s;
    }
    *out = q;
    return ML_OK;
}

void srv_seq_free(srv_seq *q)
{
    if (!q)
        return;
    ml_ctx_free(q->ctx);
    free(q->held);
    free(q->logits);
    free(q);
}

uint32_t srv_seq_n_ctx(const srv_seq *q)
{
    return ml_ctx_n_ctx(q->ctx);
}

uint32_t srv_seq_n_batch(const srv_seq *q)
{
    return ml_ctx_n_batch(q->ctx);
}

size_t srv_seq_len(const srv_seq *q)
{
    return q->n_held;
}

size_t srv_seq_common(const srv_seq *q, const ml_token *tokens, size_t n)
{
    size_t i = 0;
    while (i < n && i < q->n_held && q->held[i] == tokens[i])
        i++;
    return i;
}

size_t srv_seq_keep(srv_seq *q, size_t keep)
{
    if (keep >= q->n_held)
        return q->n_held;
    ml_error err;
    if (ml_ctx_truncate(q->ctx, (uint32_t)keep, &err) != ML_OK) {
        ml_ctx_reset(q->ctx);
        keep = 0;
    }
    q->n_held = keep;
    return keep;
}

ml_status srv_seq_eval(srv_seq *q, const ml_token *tokens, size_t n, ml_error *err)
{
    ml_status s = ml_ctx_eval(q->ctx, tokens, n, q->logits, 0, err);
    if (!s) {
        memcpy(q->held + q->n_held, tokens, n * sizeof *tokens);
        q->n_held += n;
    }
    return s;
}

float *srv_seq_logits(srv_seq *q)
{
    return q->logits;
}
