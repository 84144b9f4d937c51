/* score.c - scoring a text chunk the way llama.cpp's llama-perplexity and
 * llama-imatrix do: evaluate the chunk from an empty context with the
 * logits of every token, and add the negative log-likelihood of each next
 * token from position `first` on.  Shared by ml-run --perplexity and
 * ml-imatrix. */
#include "base/internal.h"

#include <math.h>

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

ml_status ml_ctx_score(ml_ctx *c, const int32_t *tokens, size_t n, size_t first, float *rows,
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
