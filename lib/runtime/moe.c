/* moe.c - the mixture-of-experts FFN (docs/design-moe.md, sections 4 and
 * 5): per token the router's scores, the choice of k experts in the
 * canonical order and their weights; then each chosen expert's gated FFN,
 * with the batch's tokens grouped by expert so that an expert's weights
 * are read once per batch (decode reads exactly the chosen experts); then
 * per token the weighted sum of its experts' outputs in the chosen order,
 * plus a shared expert's output where the model has one.
 * Every (token, expert) product comes from the kernels, whose rows equal
 * matvec's whatever the number of tokens (kernels.h rule 4), and routing
 * and the sum are per token in one fixed order: neither the grouping, the
 * batch size nor the thread count changes a bit. */
#include "kernels/fmath.h"
#include "runtime/ctx.h"

#include <math.h>
#include <string.h>

/* llama.cpp's lower bound on the sum of the weights it normalizes. */
#define MOE_NORM_MIN 6.103515625e-5f

/* ---------------------------------------------------------------------------
 * Routing, one token at a time
 * ------------------------------------------------------------------------- */

/* Does score a of expert ia come before score b of expert ib?  Numbers by
 * value, equal ones (+0 and -0 among them) by index; NaN after every
 * number, NaNs by index.  A total order, so the choice is unique. */
static int before(float a, uint32_t ia, float b, uint32_t ib)
{
    if (isnan(a) || isnan(b))
        return isnan(b) && (!isnan(a) || ia < ib);
    return a > b || (a == b && ia < ib);
}

/* One pass keeping the best k sorted (insertion): k is small (8 in the
 * real models) and no library sort decides ties for us. */
void ml__moe_select(const float *s, uint32_t n, uint32_t k, uint32_t *chosen)
{
    uint32_t m = 0; /* chosen[0, m) sorted */
    for (uint32_t e = 0; e < n; e++) {
        if (m == k && !before(s[e], e, s[chosen[k - 1]], chosen[k - 1]))
            continue;
        uint32_t j = m < k ? m++ : k - 1;
        for (; j > 0 && before(s[e], e, s[chosen[j - 1]], chosen[j - 1]); j--)
            chosen[j] = chosen[j - 1];
        chosen[j] = e;
    }
}

/* Softmax of n floats in place, with fmath's exponential (the same bits in
 * every variant). */
static void softmax(const ml_fmath *fm, float *x, uint32_t n)
{
    float mx = fm->scale_max(x, n, 1.0f);
    fm->exp_norm(x, n, mx);
}

/* The k weights: the gating's, normalized by their sum (left to right)
 * and scaled as the header says. */
static void weights(const ml_mlb_header *h, const ml_fmath *fm, const float *p,
                    const uint32_t *chosen, float *w)
{
    const uint32_t k = h->n_experts_used;
    for (uint32_t i = 0; i < k; i++)
        w[i] = p[chosen[i]];
    if (h->moe_gating == ML_MOE_TOPK_SOFTMAX)
        softmax(fm, w, k);
    if (h->moe_flags & ML_MOE_NORM) {
        float sum = 0;
        for (uint32_t i = 0; i < k; i++)
            sum += w[i];
        sum = sum > MOE_NORM_MIN ? sum : MOE_NORM_MIN;
        for (uint32_t i = 0; i < k; i++)
            w[i] = w[i] / sum;
    }
    if (h->expert_scale != 0)
        for (uint32_t i = 0; i < k; i++)
            w[i] = w[i] * h->expert_scale;
}

/* The scores p[e] of experts [e0, e1) for h, each its own dot (any split
 * of the experts gives the same bits).  The router multiplies the F32
 * input by F32 weights (dots, not the quantized-activation kernels):
 * llama.cpp does, and an activation quantized to Q8_0 would move the
 * scores enough to flip its choices. */
static void router_scores(const ml_model *m, const ml_layer *L, const float *h, uint32_t e0,
                          uint32_t e1, float *p)
{
    const uint32_t dim = m->h.dim;
    m->k->fmath->dots(1, &h, e1 - e0, L->wr + (size_t)e0 * dim, dim, dim, p + e0, e1 - e0);
}

/* The choice and weights from the scores p (ml__moe_route's second half). */
static void route_choose(const ml_model *m, const ml_layer *L, float *p, uint32_t *chosen,
                         float *w)
{
    const ml_fmath *fm = m->k->fmath;
    const uint32_t E = m->h.n_experts;
    for (uint32_t e = 0; L->rb && e < E; e++)
        p[e] += L->rb[e];
    if (m->h.moe_gating == ML_MOE_SOFTMAX)
        softmax(fm, p, E);
    else if (m->h.moe_gating == ML_MOE_SIGMOID)
        for (uint32_t e = 0; e < E; e++)
            p[e] = ml__sigmoid(p[e]);
    const float *s = p;
    if (L->sb) { /* the selection bias chooses; the weights keep p */
        float *sel = p + E;
        for (uint32_t e = 0; e < E; e++)
            sel[e] = p[e] + L->sb[e];
        s = sel;
    }
    ml__moe_select(s, E, m->h.n_experts_used, chosen);
    weights(&m->h, fm, p, chosen, w);
}

void ml__moe_route(const ml_model *m, const ml_layer *L, const float *h, float *p,
                   uint32_t *chosen, float *w)
{
    router_scores(m, L, h, 0, m->h.n_experts, p);
    route_choose(m, L, p, chosen, w);
}

/* ---------------------------------------------------------------------------
 * The batch
 * ------------------------------------------------------------------------- */

typedef struct moe_job {
    ml_ctx *c;
    const ml_layer *L;
} moe_job;

static void route_rows(void *arg, size_t b, size_t e, unsigned ith)
{
    (void)ith;
    const moe_job *j = arg;
    ml_ctx *c = j->c;
    const ml_model *m = c->m;
    const size_t E = m->h.n_experts, k = m->h.n_experts_used, dim = m->h.dim;
    for (size_t t = b; t < e; t++)
        ml__moe_route(m, j->L, c->xb + t * dim, c->moe_p + t * 2 * E, c->moe_c + t * k,
                      c->moe_w + t * k);
}

/* Experts [b, e) of one token's scores. */
static void router_rows(void *arg, size_t b, size_t e, unsigned ith)
{
    (void)ith;
    const moe_job *j = arg;
    router_scores(j->c->m, j->L, j->c->xb, (uint32_t)b, (uint32_t)e, j->c->moe_p);
}

/* Every token's routing: a batch a token a thread; one token (decode) its
 * scores by all the threads (the router of 128 experts is a megabyte of
 * floats a layer, which one thread alone read while the others waited),
 * then the choice on this one. */
static void route(ml_ctx *c, const ml_layer *L, size_t n_tok)
{
    moe_job j = {c, L};
    if (n_tok > 1) {
        ml__parallel(c, n_tok, route_rows, &j);
        return;
    }
    ml__parallel(c, c->m->h.n_experts, router_rows, &j);
    route_choose(c->m, L, c->moe_p, c->moe_c, c->moe_w);
}

/* A counting sort of the batch's slots (token t's i-th choice is slot
 * t k + i) by expert, stable in token order: expert e's slots are
 * moe_list[moe_start[e], moe_start[e + 1]). */
static void group_by_expert(ml_ctx *c, size_t n_tok)
{
    const uint32_t E = c->m->h.n_experts;
    const size_t n = n_tok * c->m->h.n_experts_used;
    uint32_t *start = c->moe_start;
    memset(start, 0, (E + 1) * sizeof *start);
    for (size_t s = 0; s < n; s++)
        start[c->moe_c[s] + 1]++;
    for (uint32_t e = 0; e < E; e++)
        start[e + 1] += start[e];
    for (size_t s = 0; s < n; s++) /* start[e] walks to expert e's end */
        c->moe_list[start[c->moe_c[s]]++] = (uint32_t)s;
    for (uint32_t e = E; e > 0; e--) /* now start[e - 1] is expert e's start */
        start[e] = start[e - 1];
    start[0] = 0;
}

/* y[r] += bias for each of n rows of `width` floats. */
static void add_rows(float *y, const float *bias, size_t n, uint32_t width)
{
    for (size_t r = 0; r < n; r++)
        for (uint32_t i = 0; i < width; i++)
            y[r * width + i] += bias[i];
}

/* Expert e's FFN (with its biases, where the model has them: gpt-oss's
 * gate and up before the activation, down after the product) on the
 * inputs of its n slots, each output row to its
 * slot's place in moe_y.  The inputs are quantized again from their F32
 * rows (the same bits as the seam's), since each expert reads a
 * different subset of the batch. */
static void run_expert(ml_ctx *c, const ml_layer *L, uint32_t e, const uint32_t *slots, size_t n)
{
    const ml_model *m = c->m;
    const uint32_t dim = m->h.dim, F = m->h.expert_hidden_dim, k = m->h.n_experts_used;
    for (size_t r = 0; r < n; r++)
        memcpy(c->moe_x + r * dim, c->xb + (size_t)(slots[r] / k) * dim, dim * sizeof(float));
    ml__quantize(c, c->moe_x, n, dim);
    const ml_mat *ws[] = {&L->ew[3 * e], &L->ew[3 * e + 2]};
    float *ys[] = {c->hb, c->hb2};
    const size_t ld[] = {F, F};
    ml__matmuls(c, n, 2, ws, ys, ld);
    const float *const *b = L->eb ? L->eb + 3 * e : NULL; /* b1 b2 b3 */
    if (b) {
        add_rows(c->hb, b[0], n, F);
        add_rows(c->hb2, b[2], n, F);
    }
    ml__glu_quantize(c, c->hb, c->hb2, n, F);
    ml__matmul(c, &L->ew[3 * e + 1], n, c->moe_x, dim);
    if (b) /* before the routing weight, as llama.cpp adds it */
        add_rows(c->moe_x, b[1], n, dim);
    for (size_t r = 0; r < n; r++)
        memcpy(c->moe_y + (size_t)slots[r] * dim, c->moe_x + r * dim, dim * sizeof(float));
}

/* One token's k experts (decode): every gate and up product in one pool
 * job (all read the token's one input), the activations in one pass, the
 * down products in one more job, each on its expert's row: three
 * dispatches a layer in place of three an expert.  The same bits as
 * run_expert's: the same inputs, quantized alike, the same kernels, and
 * rows computed independently. */
static void run_experts_of_token(ml_ctx *c, const ml_layer *L)
{
    const ml_model *m = c->m;
    const uint32_t dim = m->h.dim, F = m->h.expert_hidden_dim, k = m->h.n_experts_used;
    const ml_mat *ws[ML_MM_PARTS];
    float *ys[ML_MM_PARTS];
    size_t ld[ML_MM_PARTS], rows[ML_MM_PARTS];
    ml__quantize(c, c->xb, 1, dim);
    for (uint32_t i0 = 0; i0 < k; i0 += ML_MM_PARTS / 2) {
        const uint32_t n = k - i0 < ML_MM_PARTS / 2 ? k - i0 : ML_MM_PARTS / 2;
        for (uint32_t i = 0; i < n; i++) {
            const uint32_t e = c->moe_c[i0 + i];
            ws[2 * i] = &L->ew[3 * e], ys[2 * i] = c->hb + (size_t)(i0 + i) * F;
            ws[2 * i + 1] = &L->ew[3 * e + 2], ys[2 * i + 1] = c->hb2 + (size_t)(i0 + i) * F;
            ld[2 * i] = ld[2 * i + 1] = F;
        }
        ml__matmuls(c, 1, 2 * n, ws, ys, ld);
    }
    for (uint32_t i = 0; L->eb && i < k; i++) { /* gpt-oss: b1, b3 as run_expert adds them */
        const float *const *b = L->eb + 3 * c->moe_c[i];
        add_rows(c->hb + (size_t)i * F, b[0], 1, F);
        add_rows(c->hb2 + (size_t)i * F, b[2], 1, F);
    }
    ml__glu_quantize(c, c->hb, c->hb2, k, F);
    for (uint32_t i0 = 0; i0 < k; i0 += ML_MM_PARTS) {
        const uint32_t n = k - i0 < ML_MM_PARTS ? k - i0 : ML_MM_PARTS;
        for (uint32_t i = 0; i < n; i++) {
            ws[i] = &L->ew[3 * c->moe_c[i0 + i] + 1];
            ys[i] = c->moe_y + (size_t)(i0 + i) * dim;
            rows[i] = i0 + i;
        }
        ml__matvecs_at(c, n, ws, ys, rows);
    }
    for (uint32_t i = 0; L->eb && i < k; i++) /* b2, before the routing weight */
        add_rows(c->moe_y + (size_t)i * dim, L->eb[3 * c->moe_c[i] + 1], 1, dim);
}

/* The shared expert's FFN on every row, into moe_x (Qwen3.5-MoE: a dense
 * FFN beside the routed ones). */
static void run_shared(ml_ctx *c, const ml_layer *L, size_t n_tok)
{
    const uint32_t dim = c->m->h.dim, F = c->m->h.shared_hidden_dim;
    ml__quantize(c, c->xb, n_tok, dim); /* the experts overwrote xb's quantized form */
    const ml_mat *ws[] = {&L->ws1, &L->ws3};
    float *ys[] = {c->hb, c->hb2};
    const size_t ld[] = {F, F};
    ml__matmuls(c, n_tok, 2, ws, ys, ld);
    ml__glu_quantize(c, c->hb, c->hb2, n_tok, F);
    ml__matmul(c, &L->ws2, n_tok, c->moe_x, dim);
}

/* o = w_0 y_0, then o = o + w_i y_i in the chosen order (a multiply and
 * an add each: the build contracts no FMA); then, with a shared expert s,
 * o = o + g s, g = sigmoid(wsg . h) (F32, as the router) or 1. */
static void sum_rows(void *arg, size_t b, size_t e, unsigned ith)
{
    (void)ith;
    const moe_job *j = arg;
    ml_ctx *c = j->c;
    const ml_fmath *fm = c->m->k->fmath;
    const size_t k = c->m->h.n_experts_used, dim = c->m->h.dim;
    for (size_t t = b; t < e; t++) {
        float *o = c->o + t * dim;
        const float *w = c->moe_w + t * k, *y = c->moe_y + t * k * dim;
        for (size_t d = 0; d < dim; d++)
            o[d] = w[0] * y[d];
        for (size_t i = 1; i < k; i++)
            for (size_t d = 0; d < dim; d++)
                o[d] = o[d] + w[i] * y[i * dim + d];
        if (!j->L->ws2.q)
            continue;
        float g = 1;
        if (j->L->wsg) {
            const float *h = c->xb + t * dim;
            fm->dots(1, &h, 1, j->L->wsg, dim, dim, &g, 1);
            g = ml__sigmoid(g);
        }
        const float *s = c->moe_x + t * dim;
        for (size_t d = 0; d < dim; d++)
            o[d] = o[d] + g * s[d];
    }
}

void ml__moe_ffn(ml_ctx *c, uint32_t l, size_t n_tok)
{
    const ml_layer *L = &c->m->layers[l];
    const uint32_t E = c->m->h.n_experts;
    ml__ctx_observe(c, ML_MLI_FFN_IN, l, c->xb, n_tok, c->m->h.dim);
    moe_job j = {c, L};
    route(c, L, n_tok);
    if (n_tok == 1 && c->m->h.n_experts_used <= c->n_batch) { /* hb holds k rows of F */
        run_experts_of_token(c, L);
    } else {
        group_by_expert(c, n_tok);
        for (uint32_t e = 0; e < E; e++) {
            const uint32_t b = c->moe_start[e], n = c->moe_start[e + 1] - b;
            if (n)
                run_expert(c, L, e, c->moe_list + b, n);
        }
    }
    if (L->ws2.q)
        run_shared(c, L, n_tok);
    if (c->moe_trace)
        c->moe_trace(c->moe_trace_ctx, l, n_tok, c->tpos, c->moe_c, c->moe_w);
    ml__parallel(c, n_tok, sum_rows, &j);
}
