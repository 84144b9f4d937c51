/* score.c - scoring text the way llama.cpp's llama-perplexity and
 * llama-imatrix do: cut it into chunks of the context's length, evaluate
 * each from an empty context with the logits of every token, and add the
 * negative log-likelihood of each next token of its second half.  Shared
 * by ml-run --perplexity and ml-imatrix. */
#include "base/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* -log softmax(logits)[next], in double, in index order. */
static double nll_of(const float *logits, uint32_t vocab, int32_t next)
{
    float max = logits[0];
    for (uint32_t i = 1; i < vocab; i++)
        if (logits[i] > max)
            max = logits[i];
    double sum = 0;
    for (uint32_t i = 0; i < vocab; i++)
        sum += exp((double)logits[i] - max);
    return log(sum) - ((double)logits[next] - max);
}

ml_status ml_ctx_score(ml_ctx *c, const ml_token *tokens, size_t n, size_t first, float *rows,
                       ml_nll *acc, ml_error *err)
{
    uint32_t vocab = ml_model_header(ml_ctx_model(c))->vocab;
    size_t nb = ml_ctx_n_batch(c);
    ml_ctx_reset(c);
    for (size_t b = 0; b < n; b += nb) {
        size_t k = n - b < nb ? n - b : nb;
        ml_status s = ml_ctx_eval(c, tokens + b, k, rows, 1, err);
        if (s)
            return s;
        for (size_t j = b; j < b + k; j++) {
            if (j < first || j + 1 >= n)
                continue;
            double v = nll_of(rows + (j - b) * vocab, vocab, tokens[j + 1]);
            acc->sum += v;
            acc->sum2 += v * v;
            acc->count++;
        }
    }
    return ML_OK;
}

double ml_nll_perplexity(const ml_nll *acc, double *error)
{
    double mean = acc->count ? acc->sum / (double)acc->count : 0, ppl = exp(mean);
    if (error) {
        double var = acc->count > 1 ? (acc->sum2 / (double)acc->count - mean * mean) /
                                          (double)(acc->count - 1)
                                    : 0;
        *error = var > 0 ? sqrt(var) * ppl : 0.0;
    }
    return ppl;
}

/* A step's logits are vocab floats a token: 64 MB are 16M floats (64
 * tokens of a 262k vocabulary).  At least 16 tokens a step whatever the
 * vocabulary, at most 256, the prompt batch ml-run uses without logits. */
#define LOGITS_FLOATS ((uint32_t)(((uint64_t)ML_LOGITS_BATCH_MB << 20) / sizeof(float)))
#define LOGITS_BATCH_MIN 16
#define LOGITS_BATCH_MAX 256

uint32_t ml_logits_batch(uint32_t vocab)
{
    uint32_t fit = vocab ? LOGITS_FLOATS / vocab : LOGITS_BATCH_MAX;
    if (fit < LOGITS_BATCH_MIN)
        return LOGITS_BATCH_MIN;
    return fit > LOGITS_BATCH_MAX ? LOGITS_BATCH_MAX : fit;
}

static int asks_stop(const ml_perplexity_opts *o, size_t done, size_t total)
{
    return o->progress && o->progress(o->progress_ctx, done, total);
}

ml_status ml_ctx_perplexity(ml_ctx *c, const ml_token *tokens, size_t n,
                            const ml_perplexity_opts *o, float *rows, ml_nll *acc,
                            size_t *n_chunks, ml_error *err)
{
    size_t n_ctx = ml_ctx_n_ctx(c), total = n / n_ctx;
    if (o->max_chunks && o->max_chunks < total)
        total = (size_t)o->max_chunks;
    *n_chunks = total;
    if (total == 0)
        return ml__err(err, ML_E_INVAL, "", -1, "%zu tokens are fewer than one chunk of %zu", n,
                       n_ctx);
    ml_token *chunk = malloc(n_ctx * sizeof *chunk);
    if (!chunk)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    ml_status s = ML_OK;
    for (size_t k = 0; !s && !asks_stop(o, k, total) && k < total; k++) {
        memcpy(chunk, tokens + k * n_ctx, n_ctx * sizeof *chunk);
        if (o->bos != ML_TOKEN_NONE)
            chunk[0] = o->bos;
        s = ml_ctx_score(c, chunk, n_ctx, n_ctx / 2, rows, acc, err);
    }
    free(chunk);
    return s;
}
