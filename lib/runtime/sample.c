/* sample.c - choosing the next token: greedy, or temperature sampling with
 * the repeat, presence and frequency penalties, top-k, top-p and min-p,
 * from a seeded generator so a fixed seed reproduces a run exactly.  The
 * filters apply in the order llama.cpp's default chain uses: penalties,
 * top-k, top-p, min-p, temperature. */
#include "base/internal.h"
#include "runtime/sample.h"

#include <math.h>
#include <stdlib.h>

struct ml_sampler {
    ml_sampler_params p;
    uint32_t vocab;
    uint64_t rng;
    struct cand { float logit; ml_token id; } *c; /* (vocab) candidates */
};

ml_status ml_sampler_new(const ml_sampler_params *p, uint32_t vocab, ml_sampler **out,
                         ml_error *err)
{
    *out = NULL;
    if (!(p->temperature >= 0) || !(p->top_p >= 0 && p->top_p <= 1) ||
        !(p->min_p >= 0 && p->min_p <= 1) || !(p->repeat_penalty >= 0) ||
        !isfinite(p->presence_penalty) || !isfinite(p->frequency_penalty))
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

/* Token i as a candidate; a NaN logit counts as -inf (never chosen over a
 * number, as in argmax). */
static struct cand cand_of(const float *logits, uint32_t i)
{
    float l = logits[i];
    return (struct cand){l == l ? l : -INFINITY, (ml_token)i};
}

/* Min-heap on rank (the root is the worst kept candidate): a ranks below
 * b when its logit is smaller, or equal with a larger id. */
static int below(struct cand a, struct cand b)
{
    return a.logit < b.logit || (a.logit == b.logit && a.id > b.id);
}

static void sift_down(struct cand *h, uint32_t n, uint32_t i)
{
    for (;;) {
        uint32_t l = 2 * i + 1, m = i;
        if (l < n && below(h[l], h[m]))
            m = l;
        if (l + 1 < n && below(h[l + 1], h[m]))
            m = l + 1;
        if (m == i)
            return;
        struct cand t = h[i];
        h[i] = h[m], h[m] = t, i = m;
    }
}

/* The k best tokens (k <= vocab), best first, into s->c: one pass keeping
 * a heap of k, then a sort of those k.  Scanning ids upwards, a later
 * token that ties the worst kept one ranks below it, so one comparison
 * decides almost every token.  (Sorting the whole vocabulary of a
 * 262144-token model took several times that model's whole decode step.) */
static uint32_t best_k(ml_sampler *s, const float *logits, uint32_t k)
{
    struct cand *h = s->c;
    for (uint32_t i = 0; i < k; i++)
        h[i] = cand_of(logits, i);
    for (uint32_t i = k / 2; i-- > 0;)
        sift_down(h, k, i);
    for (uint32_t i = k; i < s->vocab; i++)
        if (logits[i] > h[0].logit) {
            h[0] = (struct cand){logits[i], (ml_token)i};
            sift_down(h, k, 0);
        }
    qsort(h, k, sizeof *h, by_logit_desc);
    return k;
}

/* The tokens whose logit is at least `floor`, best first, into s->c. */
static uint32_t at_least(ml_sampler *s, const float *logits, double floor)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->vocab; i++)
        if (logits[i] >= floor)
            s->c[n++] = (struct cand){logits[i], (ml_token)i};
    qsort(s->c, n, sizeof *s->c, by_logit_desc);
    return n;
}

/* The largest logit, NaNs ignored (-inf when every logit is NaN or -inf). */
static float max_logit(const float *logits, uint32_t n)
{
    float m = -INFINITY;
    for (uint32_t i = 0; i < n; i++)
        m = logits[i] > m ? logits[i] : m;
    return m;
}

int ml__sampler_penalizes(const ml_sampler *s)
{
    const ml_sampler_params *p = &s->p;
    return (p->repeat_penalty != 0 && p->repeat_penalty != 1) || p->presence_penalty != 0 ||
           p->frequency_penalty != 0;
}

/* Once per distinct token among the last repeat_last_n: the repeat penalty
 * divides a positive logit and multiplies a negative one, then the token
 * loses count * frequency + presence (llama.cpp's order). */
void ml__sampler_penalize(const ml_sampler *s, float *logits, const ml_token *hist, size_t n)
{
    const ml_sampler_params *p = &s->p;
    if (!ml__sampler_penalizes(s) || !hist)
        return;
    int repeat = p->repeat_penalty != 0 && p->repeat_penalty != 1;
    size_t last = p->repeat_last_n ? p->repeat_last_n : 64;
    size_t from = n > last ? n - last : 0;
    for (size_t i = from; i < n; i++) {
        ml_token id = hist[i];
        if (id >= s->vocab)
            continue;
        int seen = 0;
        for (size_t j = from; j < i && !seen; j++)
            seen = hist[j] == id;
        if (seen)
            continue;
        size_t count = 1;
        for (size_t j = i + 1; j < n; j++)
            count += hist[j] == id;
        float r = p->repeat_penalty;
        if (repeat)
            logits[id] = logits[id] > 0 ? logits[id] / r : logits[id] * r;
        logits[id] -= (float)count * p->frequency_penalty + p->presence_penalty;
    }
}

/* The first index of the largest logit (NaNs never win; 0 when all are
 * NaN).  Two passes: the maximum with eight independent lanes (over a
 * 262144-token vocabulary one dependent chain was a visible share of a
 * small model's decode), then the first index holding it. */
static ml_token argmax(const float *logits, uint32_t n)
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
            return (ml_token)i;
    return 0;
}

/* The candidates every filter works on, best first in s->c (their count
 * returned), with the largest logit and the probability mass at
 * temperature 1 (sum of exp(logit - max)) over the top-k tokens, or over
 * the whole vocabulary (in id order) without top-k.  Only as many tokens
 * are ranked as the filters can keep: the top k; without top-k, those
 * above min-p's floor; with top-p alone, growing prefixes until one holds
 * top_p of the mass. */
static uint32_t candidates(ml_sampler *s, const float *logits, double *max, double *sum)
{
    const ml_sampler_params *p = &s->p;
    const uint32_t V = s->vocab;
    if (p->top_k && p->top_k < V) {
        uint32_t n = best_k(s, logits, p->top_k);
        *max = s->c[0].logit, *sum = 0;
        for (uint32_t i = 0; i < n; i++)
            *sum += exp(s->c[i].logit - *max);
        return n;
    }
    *max = max_logit(logits, V), *sum = 0;
    for (uint32_t i = 0; i < V; i++)
        if (logits[i] == logits[i])
            *sum += exp(logits[i] - *max);
    if (p->min_p > 0 && *max > -INFINITY)
        return at_least(s, logits, *max + log(p->min_p));
    if (!(p->top_p > 0 && p->top_p < 1)) { /* no filter: every token, in id order */
        for (uint32_t i = 0; i < V; i++)
            s->c[i] = cand_of(logits, i);
        return V;
    }
    for (uint32_t k = 64;; k *= 8) {
        uint32_t n = best_k(s, logits, k < V ? k : V);
        double cum = 0;
        for (uint32_t i = 0; i < n; i++)
            cum += exp(s->c[i].logit - *max) / *sum;
        if (cum >= p->top_p || n == V)
            return n;
    }
}

ml_token ml_sampler_next(ml_sampler *s, float *logits, const ml_token *history, size_t n_history)
{
    ml__sampler_penalize(s, logits, history, n_history);
    return ml__sampler_pick(s, logits);
}

ml_token ml__sampler_pick(ml_sampler *s, float *logits)
{
    if (s->p.temperature == 0)
        return argmax(logits, s->vocab);
    double max, sum;
    uint32_t n = candidates(s, logits, &max, &sum);
    if (max == -INFINITY) /* nothing is more likely than anything else */
        return argmax(logits, s->vocab);
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
