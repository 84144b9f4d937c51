/* sample.c - choosing the next token: greedy, or temperature sampling with
 * repeat penalty, top-k, top-p and min-p, from a seeded generator so a
 * fixed seed reproduces a run exactly.  The filters apply in the order
 * llama.cpp's default chain uses: penalty, top-k, top-p, min-p,
 * temperature. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>

struct ml_sampler {
    ml_sampler_params p;
    uint32_t vocab;
    uint64_t rng;
    struct cand { float logit; int32_t id; } *c; /* (vocab) candidates */
};

ml_status ml_sampler_new(const ml_sampler_params *p, uint32_t vocab, ml_sampler **out,
                         ml_error *err)
{
    *out = NULL;
    if (!(p->temperature >= 0) || !(p->top_p >= 0 && p->top_p <= 1) ||
        !(p->min_p >= 0 && p->min_p <= 1) || !(p->repeat_penalty >= 0))
        return ml__err(err, ML_E_INVAL, "", -1, "sampler parameter out of range");
    ml_sampler *s = calloc(1, sizeof *s);
    if (!s || !(s->c = malloc((size_t)vocab * sizeof *s->c))) {
        free(s);
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    }
    s->p = *p;
    s->vocab = vocab;
    s->rng = p->seed ^ 0x9e3779b97f4a7c15ull;
    *out = s;
    return ML_OK;
}

void ml_sampler_free(ml_sampler *s)
{
    if (!s)
        return;
    free(s->c);
    free(s);
}

static uint64_t next_u64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double uniform(uint64_t *x)
{
    return (double)(next_u64(x) >> 11) / 9007199254740992.0;
}

static int by_logit_desc(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->logit != y->logit)
        return x->logit < y->logit ? 1 : -1;
    return x->id < y->id ? -1 : x->id > y->id; /* stable: lower id first */
}

/* Divides positive logits by the penalty and multiplies negative ones, once
 * per distinct token among the last repeat_last_n. */
static void penalize(ml_sampler *s, float *logits, const int32_t *hist, size_t n)
{
    float r = s->p.repeat_penalty;
    if (r == 0 || r == 1 || !hist)
        return;
    size_t last = s->p.repeat_last_n ? s->p.repeat_last_n : 64;
    size_t from = n > last ? n - last : 0;
    for (size_t i = from; i < n; i++) {
        int32_t id = hist[i];
        if (id < 0 || (uint32_t)id >= s->vocab)
            continue;
        int seen = 0;
        for (size_t j = from; j < i && !seen; j++)
            seen = hist[j] == id;
        if (!seen)
            logits[id] = logits[id] > 0 ? logits[id] / r : logits[id] * r;
    }
}

/* The first index of the largest logit (NaNs never win; 0 when all are
 * NaN).  Two passes: the maximum with eight independent lanes (a 262144-
 * token vocabulary took half a millisecond as one dependent chain, 6% of
 * a small model's decode), then the first index holding it. */
static int32_t argmax(const float *logits, uint32_t n)
{
    float lane[8];
    for (int k = 0; k < 8; k++)
        lane[k] = -INFINITY;
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            lane[k] = logits[i + k] > lane[k] ? logits[i + k] : lane[k];
    for (; i < n; i++)
        lane[0] = logits[i] > lane[0] ? logits[i] : lane[0];
    float max = lane[0];
    for (int k = 1; k < 8; k++)
        max = lane[k] > max ? lane[k] : max;
    for (i = 0; i < n; i++)
        if (logits[i] == max)
            return (int32_t)i;
    return 0;
}

int32_t ml_sampler_next(ml_sampler *s, float *logits, const int32_t *history, size_t n_history)
{
    penalize(s, logits, history, n_history);
    if (s->p.temperature == 0)
        return argmax(logits, s->vocab);
    uint32_t n = s->vocab;
    for (uint32_t i = 0; i < n; i++)
        s->c[i] = (struct cand){logits[i], (int32_t)i};
    qsort(s->c, n, sizeof *s->c, by_logit_desc);
    if (s->p.top_k && s->p.top_k < n)
        n = s->p.top_k;
    /* Probabilities at temperature 1 for the top-p and min-p cuts. */
    double max = s->c[0].logit, sum = 0;
    for (uint32_t i = 0; i < n; i++)
        sum += exp(s->c[i].logit - max);
    if (s->p.top_p > 0 && s->p.top_p < 1) {
        double cum = 0;
        for (uint32_t i = 0; i < n; i++) {
            cum += exp(s->c[i].logit - max) / sum;
            if (cum >= s->p.top_p) {
                n = i + 1;
                break;
            }
        }
    }
    if (s->p.min_p > 0) {
        double floor_logit = max + log(s->p.min_p);
        uint32_t keep = 1;
        while (keep < n && s->c[keep].logit >= floor_logit)
            keep++;
        n = keep;
    }
    double total = 0;
    for (uint32_t i = 0; i < n; i++)
        total += exp((s->c[i].logit - max) / s->p.temperature);
    double r = uniform(&s->rng) * total, acc = 0;
    for (uint32_t i = 0; i < n; i++) {
        acc += exp((s->c[i].logit - max) / s->p.temperature);
        if (r < acc)
            return s->c[i].id;
    }
    return s->c[n - 1].id;
}
