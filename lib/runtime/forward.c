/* forward.c - the forward pass of mlb(5), as math: embed, then per layer
 *
 *     x += post_attn_norm(attention(attn_norm(x)))   (or linear attention)
 *     x += post_ffn_norm(ffn(ffn_norm(x)))
 *
 * then the final norm and the classifier.  Attention is GQA with RoPE on
 * interleaved pairs, biases, q/k norms, a window, a softcap and a gate;
 * the FFN is gated.  Matrices multiply Q8_0-quantized activations (the
 * spec's rule, bit for bit); everything else is float32, computed in one
 * fixed order, so results do not depend on the thread count or the batch
 * size.  A batch may hold the tokens of several sequences (each a run of
 * consecutive rows at its own positions): the matrices multiply all of
 * them at once, attention reads each token's own sequence.  How the work
 * is shared over threads is parallel.c's; the context's memory is
 * ctx.c's. */
#include "kernels/fmath.h"
#include "runtime/ctx.h"

#include <math.h>
#include <stdlib.h>

/* ---------------------------------------------------------------------------
 * Small float operations (one order, no SIMD: they are not the hot path;
 * RMSNorm and the sigmoid are fmath.h's, shared with linear_attn.c)
 * ------------------------------------------------------------------------- */

static float softcap(float x, float cap)
{
    return cap > 0 ? cap * tanhf(x / cap) : x;
}

/* RoPE's cos and sin for position pos, pairs 0..half-1: cs[2i], cs[2i+1]. */
static void rope_table(float *cs, const float *inv, uint32_t half, uint32_t pos, float mul)
{
    for (uint32_t i = 0; i < half; i++) {
        double a = (double)pos * inv[i];
        cs[2 * i] = (float)cos(a) * mul;
        cs[2 * i + 1] = (float)sin(a) * mul;
    }
}

/* Rotates the first 2*half dims of one head on interleaved pairs. */
static void rope(float *v, const float *cs, uint32_t half)
{
    for (uint32_t i = 0; i < half; i++) {
        float c = cs[2 * i], s = cs[2 * i + 1];
        float x0 = v[2 * i], x1 = v[2 * i + 1];
        v[2 * i] = x0 * c - x1 * s;
        v[2 * i + 1] = x0 * s + x1 * c;
    }
}

static void add_bias(float *y, const float *b, size_t n_tok, uint32_t n)
{
    if (!b)
        return;
    for (size_t t = 0; t < n_tok; t++)
        for (uint32_t i = 0; i < n; i++)
            y[t * n + i] += b[i];
}

/* ---------------------------------------------------------------------------
 * Attention
 * ------------------------------------------------------------------------- */

typedef struct att_job {
    ml_ctx *c;
    const ml_layer *L;
    uint32_t l;
    size_t n_tok;
    size_t n_blk;       /* blocks of tokens (tblk) */
    uint32_t chunk;     /* attend_split's positions per item */
    uint32_t group;     /* query heads per work item, at most ML_ATT_GROUP */
    const ml_fmath *fm;
    float *rope;        /* the layer's RoPE table, (B, rot_dim) */
    int fill_rope;      /* 1: the first layer of the batch to use it fills it */
} att_job;

/* Consecutive positions' keys and values of one KV head: rows of
 * head_dim floats `ld` elements apart (head_dim in a sequence's cache,
 * kv_dim in the batch's rows), or f16 bits where the context caches them
 * so (k16, v16). */
typedef struct kv_run {
    const void *k, *v;
    uint32_t n;
    size_t ld;
} kv_run;

/* Element i of a cache row buffer of floats, or f16 bits with `half`. */
static const void *kv_at(const void *p, size_t i, int half)
{
    return (const char *)p + i * (half ? 2 : 4);
}

/* Positions [lo, hi] of KV head kvh, for batch row t (at position p) or
 * any later row of its sequence, as at most three runs, in order: those
 * its sequence cached before the batch (a ring wraps at most once), then
 * the sequence's own rows in the batch, which reach the cache only after
 * the batch has attended. */
static int kv_runs(const att_job *j, size_t t, uint32_t p, uint32_t lo, uint32_t hi, uint32_t kvh,
                   kv_run run[3])
{
    const ml_ctx *c = j->c;
    const ml_seq *sq = &c->seqs[c->tseq[t]];
    uint32_t kv_dim = c->m->d.kv_dim, dh = c->m->d.head_dim, cap = c->cap[j->l], pos = sq->pos;
    size_t off = (size_t)kvh * dh, row0 = t - (p - pos); /* its first row */
    int n = 0;
    for (uint32_t s = lo, end = hi + 1 < pos ? hi + 1 : pos; s < end;) {
        uint32_t slot = s % cap, len = end - s < cap - slot ? end - s : cap - slot;
        size_t at = ((size_t)kvh * cap + slot) * dh;
        run[n++] = (kv_run){kv_at(sq->kc[j->l], at, c->k16), kv_at(sq->vc[j->l], at, c->v16), len,
                            dh};
        s += len;
    }
    uint32_t b = lo > pos ? lo : pos;
    if (b <= hi) {
        size_t at = (row0 + (b - pos)) * kv_dim + off;
        run[n++] = (kv_run){c->k16 ? (const void *)(c->kh + at) : c->k + at,
                            c->v16 ? (const void *)(c->vh + at) : c->v + at, hi - b + 1, kv_dim};
    }
    return n;
}

/* The first position a token at position p sees: its window's, or 0. */
static uint32_t window_lo(const att_job *j, uint32_t p)
{
    uint32_t w = j->c->m->h.sliding_window;
    return j->L->sliding && p + 1 > w ? p + 1 - w : 0;
}

/* Scores (scaled, softcapped) to probabilities, in place; the
 * exponentials and the normalization are fmath's (libm's expf, with its
 * slow path for the many results that underflow, was 8% of prefill). */
static void softmax(const ml_model *m, const ml_fmath *fm, float *sc, uint32_t n)
{
    if (!(m->h.attn_softcap > 0)) {
        fm->exp_norm(sc, n, fm->scale_max(sc, n, m->attn_scale));
        return;
    }
    float max = -INFINITY;
    for (uint32_t i = 0; i < n; i++) {
        sc[i] = softcap(sc[i] * m->attn_scale, m->h.attn_softcap);
        if (sc[i] > max)
            max = sc[i];
    }
    fm->exp_norm(sc, n, max);
}

/* Keys per dots or gemm call over a run: a chunk stays in the L1 cache
 * while every query row of a block uses it. */
#define KV_CHUNK 64

/* Scores of `rows` query rows against the keys of the runs, from column
 * `col` of each score row on: dot products, each on its own. */
static void run_scores(const att_job *j, const float *const *q, uint32_t rows, const kv_run *run,
                       int nr, float *const *sc, size_t col)
{
    const ml_ctx *c = j->c;
    uint32_t dh = c->m->d.head_dim;
    for (int r = 0; r < nr; col += run[r].n, r++)
        for (uint32_t s = 0; s < run[r].n; s += KV_CHUNK) {
            uint32_t n = run[r].n - s < KV_CHUNK ? run[r].n - s : KV_CHUNK;
            size_t ld = run[r].ld;
            const void *k = kv_at(run[r].k, s * ld, c->k16);
            float *out = sc[0] + col + s; /* score rows are n_ctx floats apart */
            if (c->k16)
                j->fm->dots_h(rows, q, n, k, ld, dh, out, c->n_ctx);
            else
                j->fm->dots(rows, q, n, k, ld, dh, out, c->n_ctx);
        }
}

/* Columns [c0, c0 + width) of out[i] += p[i] · V over the runs' values
 * (out[i] pointing at column c0), p[i] from column `col` of score row i:
 * each output element's terms added in the order of the positions, a
 * chunk after the other. */
static void run_values(const att_job *j, float *const *p, uint32_t rows, const kv_run *run, int nr,
                       size_t col, uint32_t c0, uint32_t width, float *const *out)
{
    const ml_ctx *c = j->c;
    const float *a[ML_ATT_GROUP * ML_ATT_TOKENS];
    for (int r = 0; r < nr; col += run[r].n, r++)
        for (uint32_t s = 0; s < run[r].n; s += KV_CHUNK) {
            uint32_t n = run[r].n - s < KV_CHUNK ? run[r].n - s : KV_CHUNK;
            size_t ld = run[r].ld;
            const void *v = kv_at(run[r].v, s * ld + c0, c->v16);
            for (uint32_t i = 0; i < rows; i++)
                a[i] = p[i] + col + s;
            if (c->v16)
                j->fm->gemm_h(rows, a, n, v, ld, width, 1.0f, out);
            else
                j->fm->gemm(rows, a, n, v, ld, width, 1.0f, out);
        }
}

/* A block's rows: their queries, score rows and outputs. */
typedef struct att_rows {
    const float *const *q;
    float *const *sc, *const *out;
} att_rows;

/* One pass of a block's attention over positions [lo, hi] for its rows
 * [r0, r0 + rows) (score column `col` at position lo), read by way of
 * batch row t0 at position p0: the scores q·K, or with `values` the value
 * sums out += p·V. */
static void span(const att_job *j, int values, const att_rows *a, size_t t0, uint32_t p0,
                 uint32_t lo, uint32_t hi, uint32_t kvh, uint32_t r0, uint32_t rows, size_t col)
{
    kv_run run[3];
    int nr = kv_runs(j, t0, p0, lo, hi, kvh, run);
    if (values)
        run_values(j, a->sc + r0, rows, run, nr, col, 0, j->c->m->d.head_dim, a->out + r0);
    else
        run_scores(j, a->q + r0, rows, run, nr, a->sc + r0, col);
}

/* The pass over every position of the block: token u (at p0 + u) sees
 * [lo_u, p0 + u]; in a sliding layer lo_u grows with u (att_blocks keeps
 * nt within the window), so [lo_s, p0], lo_s the last token's, is every
 * token's and is read once for all the block's rows.  Each token adds
 * its own few positions before it, [lo_u, lo_s), and after it, the
 * batch's rows to its own, in the order of the positions.  Score columns
 * count from lo_0 in every row. */
static void block_pass(const att_job *j, int values, const att_rows *a, size_t t0, uint32_t p0,
                       uint32_t nt, uint32_t gs, uint32_t kvh)
{
    uint32_t lo0 = window_lo(j, p0), los = window_lo(j, p0 + nt - 1);
    for (uint32_t u = 0; u < nt; u++) {
        uint32_t lo = window_lo(j, p0 + u);
        if (lo < los)
            span(j, values, a, t0, p0, lo, los - 1, kvh, u * gs, gs, lo - lo0);
    }
    span(j, values, a, t0, p0, los, p0, kvh, 0, nt * gs, los - lo0);
    for (uint32_t u = 1; u < nt; u++) /* positions p0+1 .. p0+u: the batch's rows */
        span(j, values, a, t0, p0, p0 + 1, p0 + u, kvh, u * gs, gs, p0 + 1 - lo0);
}

/* Query heads [h0, h0 + gs) of batch rows [t0, t0 + nt), consecutive
 * tokens of one sequence sharing one KV head, against the positions each
 * sees: out = softmax(q·K) · V, in block_pass's spans.  Every score,
 * softmax and value sum is a token's own, over its positions in order,
 * whatever the block, the batch or the chunks. */
static void attend(const att_job *j, size_t t0, uint32_t nt, uint32_t h0, uint32_t gs,
                   float *scores)
{
    const ml_ctx *c = j->c;
    const ml_model *m = c->m;
    const ml_mlb_header *hd = &m->h;
    uint32_t dh = m->d.head_dim, kvh = h0 / (hd->n_heads / hd->n_kv_heads);
    uint32_t p0 = c->tpos[t0], rows = nt * gs, lo0 = window_lo(j, p0);
    const float *q[ML_ATT_GROUP * ML_ATT_TOKENS] = {0};
    float *out[ML_ATT_GROUP * ML_ATT_TOKENS] = {0}, *sc[ML_ATT_GROUP * ML_ATT_TOKENS] = {0};
    for (uint32_t i = 0; i < rows; i++) {
        size_t at = (t0 + i / gs) * m->d.q_dim + (size_t)(h0 + i % gs) * dh;
        q[i] = c->q + at;
        out[i] = c->ao + at;
        sc[i] = scores + (size_t)i * c->n_ctx;
        memset(out[i], 0, dh * sizeof(float));
    }
    const att_rows a = {q, sc, out};
    block_pass(j, 0, &a, t0, p0, nt, gs, kvh);
    for (uint32_t i = 0; i < rows; i++) {
        uint32_t p = p0 + i / gs, lo = window_lo(j, p);
        softmax(m, j->fm, sc[i] + (lo - lo0), p - lo + 1);
    }
    block_pass(j, 1, &a, t0, p0, nt, gs, kvh);
}

/* Work items [b, e) of (block of tokens, KV head, group of query heads). */
static void attend_items(void *arg, size_t b, size_t e, unsigned ith)
{
    const att_job *j = arg;
    const ml_mlb_header *hd = &j->c->m->h;
    uint32_t per_kv = hd->n_heads / hd->n_kv_heads, groups = (per_kv + j->group - 1) / j->group;
    size_t per_blk = (size_t)hd->n_kv_heads * groups;
    float *scores = j->c->att + (size_t)ith * ml__att_rows(j->c) * j->c->n_ctx;
    for (size_t i = b; i < e; i++) {
        uint32_t kvh = (uint32_t)(i % per_blk / groups), g0 = (uint32_t)(i % groups) * j->group;
        uint32_t gs = per_kv - g0 < j->group ? per_kv - g0 : j->group;
        size_t blk = i / per_blk, t0 = j->c->tblk[blk];
        size_t t1 = blk + 1 < j->n_blk ? j->c->tblk[blk + 1] : j->n_tok;
        attend(j, t0, (uint32_t)(t1 - t0), kvh * per_kv + g0, gs, scores);
    }
}

/* ---- one token (decode): the work split over positions, then columns ----
 *
 * A single token has one work item per KV head (3 for SmolLM2), which
 * two threads share 2 to 1.  Its attention is split three ways instead,
 * each step a pool job: the scores of chunks of positions (each score is
 * on its own), each query head's softmax, then the value sums by halves
 * of the columns (each column's sum still over the positions in order).
 * The same operations in the same order, so the same bits. */

/* The first position row 0 (the one token) sees. */
static uint32_t first_pos(const att_job *j)
{
    return window_lo(j, j->c->tpos[0]);
}

/* Query head h's score row in the shared score rows. */
static float *split_row(const att_job *j, uint32_t h)
{
    return j->c->att + (size_t)h * j->c->n_ctx;
}

/* Items [b, e) of (KV head, chunk of j->chunk positions): the scores. */
static void split_scores(void *arg, size_t b, size_t e, unsigned ith)
{
    (void)ith;
    const att_job *j = arg;
    const ml_ctx *c = j->c;
    uint32_t dh = c->m->d.head_dim, per_kv = c->m->h.n_heads / c->m->h.n_kv_heads;
    uint32_t lo = first_pos(j), p = c->tpos[0], n_chunks = (p - lo) / j->chunk + 1;
    for (size_t i = b; i < e; i++) {
        uint32_t kvh = (uint32_t)(i / n_chunks), s = lo + (uint32_t)(i % n_chunks) * j->chunk;
        uint32_t end = p - s < j->chunk ? p : s + j->chunk - 1;
        kv_run run[3];
        int nr = kv_runs(j, 0, p, s, end, kvh, run);
        for (uint32_t g0 = 0; g0 < per_kv; g0 += ML_ATT_GROUP) {
            uint32_t gs = per_kv - g0 < ML_ATT_GROUP ? per_kv - g0 : ML_ATT_GROUP;
            const float *q[ML_ATT_GROUP];
            float *sc[ML_ATT_GROUP];
            for (uint32_t g = 0; g < gs; g++) {
                q[g] = c->q + (size_t)(kvh * per_kv + g0 + g) * dh;
                sc[g] = split_row(j, kvh * per_kv + g0 + g);
            }
            run_scores(j, q, gs, run, nr, sc, s - lo);
        }
    }
}

/* Query heads [b, e): softmax of their score rows. */
static void split_softmax(void *arg, size_t b, size_t e, unsigned ith)
{
    (void)ith;
    const att_job *j = arg;
    for (size_t h = b; h < e; h++)
        softmax(j->c->m, j->fm, split_row(j, (uint32_t)h), j->c->tpos[0] - first_pos(j) + 1);
}

/* Items [b, e) of (KV head, half of the head's columns): the value sums. */
static void split_values(void *arg, size_t b, size_t e, unsigned ith)
{
    (void)ith;
    const att_job *j = arg;
    const ml_ctx *c = j->c;
    uint32_t dh = c->m->d.head_dim, per_kv = c->m->h.n_heads / c->m->h.n_kv_heads;
    for (size_t i = b; i < e; i++) {
        uint32_t kvh = (uint32_t)(i / 2), c0 = i % 2 ? dh / 2 : 0, w = i % 2 ? dh - dh / 2 : dh / 2;
        kv_run run[3];
        int nr = kv_runs(j, 0, c->tpos[0], first_pos(j), c->tpos[0], kvh, run);
        for (uint32_t g0 = 0; g0 < per_kv; g0 += ML_ATT_GROUP) {
            uint32_t gs = per_kv - g0 < ML_ATT_GROUP ? per_kv - g0 : ML_ATT_GROUP;
            float *sc[ML_ATT_GROUP], *out[ML_ATT_GROUP];
            for (uint32_t g = 0; g < gs; g++) {
                uint32_t h = kvh * per_kv + g0 + g;
                sc[g] = split_row(j, h);
                out[g] = c->ao + (size_t)h * dh + c0;
                memset(out[g], 0, w * sizeof(float));
            }
            run_values(j, sc, gs, run, nr, 0, c0, w, out);
        }
    }
}

/* One token's attention in the three steps above, with about two chunks
 * of positions per thread. */
static void attend_split(att_job *j)
{
    ml_ctx *c = j->c;
    const ml_mlb_header *hd = &c->m->h;
    uint32_t n_pos = c->tpos[0] - first_pos(j) + 1, nth = ml__pool_size(c->pool);
    uint32_t want = (2 * nth + hd->n_kv_heads - 1) / hd->n_kv_heads; /* chunks per KV head */
    uint32_t chunk = (n_pos + want - 1) / want;
    j->chunk = (chunk + KV_CHUNK - 1) / KV_CHUNK * KV_CHUNK;
    ml__parallel(c, (size_t)hd->n_kv_heads * ((n_pos - 1) / j->chunk + 1), split_scores, j);
    ml__parallel(c, hd->n_heads, split_softmax, j);
    ml__parallel(c, (size_t)hd->n_kv_heads * 2, split_values, j);
}

/* The batch's blocks of tokens that attend together (their first rows
 * into tblk): up to ML_ATT_TOKENS consecutive rows of one sequence, and
 * in a sliding layer no more than its window, so that the positions of
 * the block's first token (before it: every token's) and its last
 * token's window meet (attend).  Returns how many. */
static size_t att_blocks(ml_ctx *c, const ml_layer *L, size_t n_tok)
{
    uint32_t most = ml__att_tokens(c), w = c->m->h.sliding_window;
    if (L->sliding && w < most)
        most = w; /* at least 1: a sliding layer's window is (mlb.c) */
    size_t n = 0;
    for (size_t t0 = 0, t1; t0 < n_tok; t0 = t1) {
        t1 = ml__seq_run_end(c, t0, n_tok);
        for (size_t t = t0; t < t1; t += most)
            c->tblk[n++] = (uint32_t)t;
    }
    return n;
}

/* Heads per work item: up to ML_ATT_GROUP, fewer when that would leave
 * threads idle (decode).  Only the sharing changes, not a result. */
static uint32_t att_group(const ml_ctx *c, size_t n_blk)
{
    const ml_mlb_header *hd = &c->m->h;
    uint32_t per_kv = hd->n_heads / hd->n_kv_heads, g = ml__att_heads(c->m);
    unsigned nth = ml__pool_size(c->pool);
    while (g > 1 && n_blk * hd->n_kv_heads * ((per_kv + g - 1) / g) < nth)
        g = (g + 1) / 2;
    return g;
}

/* Per-head RMSNorm of q and k, then RoPE by the batch's table (its rows
 * filled here by the first layer to use it: the cos and sin of a position
 * are the same in every layer of a frequency set), for batch rows [b, e);
 * then k and v as an f16 cache holds them, if it does. */
static void qk_norm_rope(void *arg, size_t b, size_t e, unsigned ith)
{
    const att_job *j = arg;
    const ml_ctx *c = j->c;
    const ml_model *m = c->m;
    const ml_layer *L = j->L;
    uint32_t dh = m->d.head_dim, half = m->d.rot_dim / 2;
    (void)ith;
    const uint32_t nq = m->h.n_heads, nk = m->h.n_kv_heads;
    /* the norms of all these tokens' heads at once (rows of dh floats) */
    if (L->q_norm)
        j->fm->rmsnorm_rows(c->q + b * nq * dh, dh, c->q + b * nq * dh, dh, L->q_norm, dh,
                            (e - b) * nq, m->h.norm_eps);
    if (L->k_norm)
        j->fm->rmsnorm_rows(c->k + b * nk * dh, dh, c->k + b * nk * dh, dh, L->k_norm, dh,
                            (e - b) * nk, m->h.norm_eps);
    for (size_t t = b; t < e; t++) {
        if (L->inv_freq) {
            float *cs = j->rope + t * m->d.rot_dim;
            if (j->fill_rope)
                rope_table(cs, L->inv_freq, half, c->tpos[t], L->rope_mul);
            for (uint32_t h = 0; h < nq; h++)
                rope(c->q + (t * nq + h) * dh, cs, half);
            for (uint32_t h = 0; h < nk; h++)
                rope(c->k + (t * nk + h) * dh, cs, half);
        }
        uint32_t kv_dim = m->d.kv_dim;
        if (c->k16)
            j->fm->to_f16(c->kh + t * kv_dim, c->k + t * kv_dim, kv_dim);
        if (c->v16)
            j->fm->to_f16(c->vh + t * kv_dim, c->v + t * kv_dim, kv_dim);
    }
}

/* Batch rows [b, e) into their sequences' caches after attending, one
 * row of each KV head at a time (a ring keeps the last cap of a run: its
 * earlier rows are skipped, later ones would overwrite them).  Rows go to
 * distinct places, so the threads share them: the first rows of a prompt
 * touch fresh pages of the cache, which alone cost 3% of a Gemma 3
 * prefill. */
typedef struct store_job {
    ml_ctx *c;
    uint32_t l;
    size_t n_tok;
} store_job;

static void cache_rows(void *arg, size_t b, size_t e, unsigned ith)
{
    const store_job *s = arg;
    const ml_ctx *c = s->c;
    uint32_t kv_dim = c->m->d.kv_dim, dh = c->m->d.head_dim, cap = c->cap[s->l];
    const char *k = c->k16 ? (const void *)c->kh : (const void *)c->k;
    const char *v = c->v16 ? (const void *)c->vh : (const void *)c->v;
    size_t ke = c->k16 ? 2 : 4, ve = c->v16 ? 2 : 4; /* an element's bytes */
    (void)ith;
    for (size_t t0 = b, t1; t0 < e; t0 = t1) {
        size_t end = ml__seq_run_end(c, t0, s->n_tok); /* of the run, past e too */
        t1 = end < e ? end : e;
        const ml_seq *sq = &c->seqs[c->tseq[t0]];
        for (size_t t = end - t0 > cap ? end - cap : t0; t < t1; t++)
            for (uint32_t h = 0; h < c->m->h.n_kv_heads; h++) {
                size_t at = ((size_t)h * cap + c->tpos[t] % cap) * dh, from = t * kv_dim + h * dh;
                memcpy((char *)sq->kc[s->l] + at * ke, k + from * ke, dh * ke);
                memcpy((char *)sq->vc[s->l] + at * ve, v + from * ve, dh * ve);
            }
    }
}

static void cache_store(ml_ctx *c, uint32_t l, size_t n_tok)
{
    store_job s = {c, l, n_tok};
    ml__parallel(c, n_tok, cache_rows, &s);
}

/* o = wo · gate(attention(rope(norm(q)), rope(norm(k)), v)) of xb. */
static void attention(ml_ctx *c, uint32_t l, size_t n_tok)
{
    const ml_model *m = c->m;
    const ml_layer *L = &m->layers[l];
    uint32_t q_dim = m->d.q_dim, kv_dim = m->d.kv_dim;
    ml__ctx_observe(c, ML_MLI_ATTN_IN, l, c->xb, n_tok, m->h.dim); /* quantized by the seam */
    const ml_mat *ws[] = {&L->wq, &L->wk, &L->wv, &L->wg};
    float *ys[] = {c->q, c->k, c->v, c->g};
    const size_t ld[] = {q_dim, kv_dim, kv_dim, q_dim};
    ml__matmuls(c, n_tok, m->h.attn_gate ? 4 : 3, ws, ys, ld);
    add_bias(c->q, L->bq, n_tok, q_dim);
    add_bias(c->k, L->bk, n_tok, kv_dim);
    add_bias(c->v, L->bv, n_tok, kv_dim);
    size_t n_blk = att_blocks(c, L, n_tok);
    att_job j = {c, L, l, n_tok, n_blk, 0, att_group(c, n_blk), ml__fmath(m->k), NULL, 0};
    unsigned set = L->inv_freq == m->inv_freq_local; /* the table of its frequencies */
    j.rope = c->rope_cs + set * c->n_batch * m->d.rot_dim;
    j.fill_rope = !(c->rope_ready >> set & 1);
    ml__parallel(c, n_tok, qk_norm_rope, &j);
    if (L->inv_freq)
        c->rope_ready |= 1u << set;
    uint32_t groups = (m->h.n_heads / m->h.n_kv_heads + j.group - 1) / j.group;
    if (n_tok == 1 && ml__pool_size(c->pool) > 1)
        attend_split(&j);
    else
        ml__parallel_claim(c, n_blk * m->h.n_kv_heads * groups, attend_items, &j);
    cache_store(c, l, n_tok);
    if (m->h.attn_gate)
        for (size_t i = 0; i < n_tok * q_dim; i++)
            c->ao[i] *= ml__sigmoid(c->g[i]);
    ml__ctx_observe(c, ML_MLI_WO_IN, l, c->ao, n_tok, q_dim);
    ml__quantize(c, c->ao, n_tok, q_dim);
    ml__matmul(c, &L->wo, n_tok, c->o, m->h.dim);
}

/* Linear attention: the projections here for the whole batch, the gated
 * delta rule in linear_attn.c for each sequence's run of rows. */
static void linear_attention(ml_ctx *c, uint32_t l, size_t n_tok)
{
    const ml_model *m = c->m;
    const ml_layer *L = &m->layers[l];
    const ml_mlb_header *h = &m->h;
    uint32_t V = h->lin_v_heads;
    ml__ctx_observe(c, ML_MLI_ATTN_IN, l, c->xb, n_tok, h->dim); /* quantized by the seam */
    const ml_mat *ws[] = {&L->lqkv, &L->lz, &L->lb, &L->la};
    float *ys[] = {c->lqkv, c->lz, c->lba, c->lba + V};
    const size_t ld[] = {m->d.lin_qkv, m->d.lin_vd, 2 * V, 2 * V};
    ml__matmuls(c, n_tok, 4, ws, ys, ld);
    for (size_t t0 = 0, t1; t0 < n_tok; t0 = t1) {
        t1 = ml__seq_run_end(c, t0, n_tok);
        ml__lin_forward(c->seqs[c->tseq[t0]].lin[l], c->pool, c->tpos[t0], t1 - t0,
                        c->lqkv + t0 * m->d.lin_qkv, c->lz + t0 * m->d.lin_vd,
                        c->lba + t0 * 2 * V, c->lo + t0 * m->d.lin_vd);
    }
    if (m->d.lin_vd <= m->d.q_dim) /* mli(5): lout's input in the wo slot */
        ml__ctx_observe(c, ML_MLI_WO_IN, l, c->lo, n_tok, m->d.lin_vd);
    ml__quantize(c, c->lo, n_tok, m->d.lin_vd);
    ml__matmul(c, &L->lout, n_tok, c->o, h->dim);
}

/* ---------------------------------------------------------------------------
 * FFN, residuals, embedding
 * ------------------------------------------------------------------------- */

/* o = w2 · (act(w1 · xb) * (w3 · xb)). */
static void ffn(ml_ctx *c, uint32_t l, size_t n_tok)
{
    const ml_model *m = c->m;
    const ml_layer *L = &m->layers[l];
    uint32_t hidden = m->h.hidden_dim;
    ml__ctx_observe(c, ML_MLI_FFN_IN, l, c->xb, n_tok, m->h.dim); /* quantized by the seam */
    const ml_mat *ws[] = {&L->w1, &L->w3};
    float *ys[] = {c->hb, c->hb2};
    const size_t ld[] = {hidden, hidden};
    ml__matmuls(c, n_tok, 2, ws, ys, ld);
    ml__glu_quantize(c, c->hb, c->hb2, n_tok * hidden);
    ml__ctx_observe(c, ML_MLI_W2_IN, l, c->hb, n_tok, hidden);
    ml__matmul(c, &L->w2, n_tok, c->o, m->h.dim);
}

/* The seam between two blocks: the residual of the one before, then the
 * input of the one after, normalized and quantized for its products (aq,
 * ad), each thread its tokens' rows in one pass while they are in its
 * cache.  Q8_0 blocks are independent, so these are the bits quantizing
 * the whole batch at once gives. */
typedef struct seam {
    ml_ctx *c;
    int add;                /* x += post_norm(o) first */
    const float *post_norm; /* NULL: x += o */
    const float *norm;      /* then xb = norm(x); NULL: no block follows */
} seam;

static void seam_rows(void *arg, size_t b, size_t e, unsigned ith)
{
    (void)ith;
    const seam *s = arg;
    const ml_kernels *k = s->c->m->k;
    const ml_fmath *fm = ml__fmath(k);
    const uint32_t dim = s->c->m->h.dim;
    const float eps = s->c->m->h.norm_eps;
    float *o = s->c->o + b * dim, *x = s->c->x + b * dim;
    if (s->add && s->post_norm)
        fm->rmsnorm_rows(o, dim, o, dim, s->post_norm, dim, e - b, eps);
    if (s->add)
        for (size_t i = 0; i < (e - b) * dim; i++)
            x[i] += o[i];
    if (s->norm) {
        float *xb = s->c->xb + b * dim;
        fm->rmsnorm_rows(xb, dim, x, dim, s->norm, dim, e - b, eps);
        k->quantize_q8_0(xb, (e - b) * dim, s->c->aq + b * dim, s->c->ad + b * dim / 32);
    }
}

/* x += post_norm(o) (unless `add` is 0); then xb = norm(x) and its Q8_0
 * form. */
static void residual_then_norm(ml_ctx *c, size_t n_tok, int add, const float *post_norm,
                               const float *norm)
{
    seam s = {c, add, post_norm, norm};
    ml__parallel(c, n_tok, seam_rows, &s);
}

/* Scale i of a matrix as f32. */
static float mat_scale(const ml_mat *w, size_t i)
{
    return w->d.f16 ? ml_f16_to_f32(((const uint16_t *)w->d.p)[i]) : ((const float *)w->d.p)[i];
}

/* Row `id` of the embedding, dequantized and scaled. */
static void embed(const ml_model *m, ml_token id, float *x)
{
    const ml_mat *e = &m->tok_emb;
    uint32_t dim = m->h.dim;
    size_t d0 = (size_t)id * (dim / 32);
    if (e->type == ML_TYPE_Q8_0) {
        const int8_t *q = (const int8_t *)e->q + (size_t)id * dim;
        for (uint32_t i = 0; i < dim; i++)
            x[i] = (float)q[i] * mat_scale(e, d0 + i / 32) * m->embed_scale;
    } else {
        const uint8_t *q = (const uint8_t *)e->q + (size_t)id * dim / 2;
        for (uint32_t i = 0; i < dim; i++) {
            uint8_t byte = q[(i / 32) * 16 + (i % 32) % 16];
            int nib = (i % 32) < 16 ? byte & 15 : byte >> 4;
            x[i] = (float)(nib - 8) * mat_scale(e, d0 + i / 32) * m->embed_scale;
        }
    }
}

/* logits = softcap(wcls · final_norm(x)) for the rows whose logits are
 * wanted (tout), into consecutive rows of logits. */
static void classify(ml_ctx *c, size_t n_tok, size_t n_out, float *logits)
{
    const ml_model *m = c->m;
    uint32_t dim = m->h.dim;
    for (size_t t = 0, r = 0; t < n_tok; t++)
        if (c->tout[t])
            ml__rmsnorm(c->xb + r++ * dim, c->x + t * dim, m->final_norm, dim, m->h.norm_eps);
    ml__ctx_observe(c, ML_MLI_CLS_IN, 0, c->xb, n_out, dim);
    ml__quantize(c, c->xb, n_out, dim);
    ml__matmul(c, &m->wcls, n_out, logits, m->h.vocab);
    if (m->h.final_softcap > 0)
        for (size_t i = 0; i < n_out * m->h.vocab; i++)
            logits[i] = softcap(logits[i], m->h.final_softcap);
}

/* One batch of n_tok <= n_batch tokens, row t for sequence tseq[t] at
 * position tpos[t]; n_out of them (tout) get logits, unless logits is
 * NULL. */
static void eval_batch(ml_ctx *c, const ml_token *tokens, size_t n_tok, float *logits,
                       size_t n_out)
{
    const ml_model *m = c->m;
    c->rope_ready = 0; /* new rows: the RoPE tables are filled again */
    for (size_t t = 0; t < n_tok; t++)
        embed(m, tokens[t], c->x + t * m->h.dim);
    residual_then_norm(c, n_tok, 0, NULL, m->layers[0].attn_norm);     /* xb = attn_norm(x) */
    for (uint32_t l = 0; l < m->h.n_layers; l++) {
        const ml_layer *L = &m->layers[l];
        const ml_layer *next = l + 1 < m->h.n_layers ? &m->layers[l + 1] : NULL;
        if (L->flags & ML_LAYER_LINEAR)
            linear_attention(c, l, n_tok);                              /* o = attention(xb) */
        else
            attention(c, l, n_tok);
        residual_then_norm(c, n_tok, 1, L->post_attn_norm, L->ffn_norm); /* x += o; xb = norm(x) */
        ffn(c, l, n_tok);                                               /* o = ffn(xb) */
        residual_then_norm(c, n_tok, 1, L->post_ffn_norm, next ? next->attn_norm : NULL);
    }
    for (size_t t = 0; t < n_tok; t++)
        c->seqs[c->tseq[t]].pos = c->tpos[t] + 1;
    if (c->imatrix)
        ml__mli_count(c->imatrix, n_tok, logits ? n_out : 0);
    if (logits && n_out)
        classify(c, n_tok, n_out, logits);
}

/* ---------------------------------------------------------------------------
 * Evaluation calls: checks, then batches of n_batch tokens
 * ------------------------------------------------------------------------- */

/* Token i's sequence; NULL seq: all are sequence 0 (ml_ctx_eval). */
static uint32_t seq_of(const uint32_t *seq, size_t i)
{
    return seq ? seq[i] : 0;
}

/* Everything ml_ctx_eval_seqs refuses, before anything is evaluated: a
 * sequence out of range or named by two runs, a bad token id, a run that
 * does not fit in its sequence's context. */
static ml_status eval_check(ml_ctx *c, const uint32_t *seq, const ml_token *tokens, size_t n,
                            ml_error *err)
{
    const uint64_t call = ++c->calls;
    for (size_t i = 0, e; i < n; i = e) {
        uint32_t s = seq_of(seq, i);
        if (s >= c->n_seq)
            return ml__err(err, ML_E_INVAL, "", -1, "token %zu: sequence %u is outside 0..%u", i,
                           s, c->n_seq - 1);
        if (c->seqs[s].seen == call)
            return ml__err(err, ML_E_INVAL, "", -1,
                           "token %zu: sequence %u's tokens are not consecutive", i, s);
        c->seqs[s].seen = call;
        for (e = i + 1; e < n && seq_of(seq, e) == s;)
            e++;
        uint32_t pos = c->seqs[s].pos;
        if (e - i > c->n_ctx - pos)
            return ml__err(err, ML_E_INVAL, "", -1,
                           "sequence %u: %zu tokens do not fit: the context holds %u positions "
                           "and %u are used",
                           s, e - i, c->n_ctx, pos);
    }
    for (size_t i = 0; i < n; i++)
        if (tokens[i] >= c->m->h.vocab)
            return ml__err(err, ML_E_INVAL, "", -1, "token %zu: id %u is outside 0..%u", i,
                           tokens[i], c->m->h.vocab - 1);
    return ML_OK;
}

/* Tokens [done, done + b) of a call as the batch rows: their sequences,
 * positions and whether their logits are wanted (all, or the last of each
 * sequence's run in the call).  Returns the rows with logits. */
static size_t batch_rows(ml_ctx *c, const uint32_t *seq, size_t n, size_t done, size_t b,
                         int all)
{
    size_t n_out = 0;
    for (size_t t = 0; t < b; t++) {
        size_t i = done + t;
        uint32_t s = seq_of(seq, i);
        c->tseq[t] = s;
        c->tpos[t] = t > 0 && c->tseq[t - 1] == s ? c->tpos[t - 1] + 1 : c->seqs[s].pos;
        c->tout[t] = all || i + 1 == n || seq_of(seq, i + 1) != s;
        n_out += c->tout[t];
    }
    return n_out;
}

static ml_status eval(ml_ctx *c, const uint32_t *seq, const ml_token *tokens, size_t n,
                      float *logits, int all_logits, ml_error *err)
{
    ml_status st = eval_check(c, seq, tokens, n, err);
    if (st)
        return st;
    for (size_t done = 0; done < n;) {
        size_t b = n - done < c->n_batch ? n - done : c->n_batch;
        size_t n_out = batch_rows(c, seq, n, done, b, all_logits);
        eval_batch(c, tokens + done, b, logits, n_out);
        if (logits)
            logits += n_out * c->m->h.vocab;
        done += b;
    }
    return ML_OK;
}

ml_status ml_ctx_eval(ml_ctx *c, const ml_token *tokens, size_t n, float *logits, int all_logits,
                      ml_error *err)
{
    return eval(c, NULL, tokens, n, logits, all_logits, err);
}

ml_status ml_ctx_eval_seqs(ml_ctx *c, const uint32_t *seq, const ml_token *tokens, size_t n,
                           float *logits, int all_logits, ml_error *err)
{
    return eval(c, seq, tokens, n, logits, all_logits, err);
}
