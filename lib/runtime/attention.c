/* attention.c - softmax(q·K)·V for every query head of a batch's
 * tokens, over the positions each one sees (its sequence's KV cache and
 * the batch's own rows up to it; in a sliding layer only its window),
 * then the batch's keys and values into the cache.  forward.c calls it
 * once per layer (ml__attend), with q, k and v projected, normed and
 * rotated.
 *
 * The math is attend() for a prompt's block of tokens and split_scores,
 * split_softmax, split_values for one token (decode); a score's scale,
 * softcap and a head's sink are softmax()'s, the positions a token sees window_lo()'s.  The
 * rest is how the work is cut: over threads (block of tokens × KV head ×
 * group of query heads; a decode token's chunks of positions, then halves
 * of the columns) and over the runs of positions that lie contiguous in
 * the cache and the batch (kv_runs).  Every score, softmax and value sum
 * is one token's own, its terms in the order of the positions, so no way
 * of cutting changes a bit.  Q8_0 and Q4_0 keys and values are read back
 * into floats a chunk at a time (load_rows) and used as float ones are. */
#include "runtime/attention.h"

#include "kernels/fmath.h"

#include <math.h>
#include <string.h>

/* One layer's attention for one batch, read by every work item. */
typedef struct att_job {
    ml_ctx *c;
    const ml_layer *L;
    uint32_t l;
    size_t n_tok;
    size_t n_blk;       /* blocks of tokens (tblk) */
    uint32_t chunk;     /* attend_split's positions per item */
    uint32_t group;     /* query heads per work item, at most ML_ATT_GROUP */
    const ml_fmath *fm;
} att_job;

/* ---------------------------------------------------------------------------
 * What every path shares: the positions a token sees as runs of keys and
 * values, the softmax, the products over the runs
 * ------------------------------------------------------------------------- */

/* Consecutive positions' keys and values of one KV head: rows of
 * head_dim values `ld` values apart (head_dim in a sequence's cache,
 * kv_dim in the batch's rows), of the context's cache types kt and vt. */
typedef struct kv_run {
    const void *k, *v;
    uint32_t n;
    size_t ld;
} kv_run;

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
        run[n++] = (kv_run){ml__kv_at(sq->kc[j->l], at, c->kt), ml__kv_at(sq->vc[j->l], at, c->vt),
                            len, dh};
        s += len;
    }
    uint32_t b = lo > pos ? lo : pos;
    if (b <= hi) {
        size_t at = (row0 + (b - pos)) * kv_dim + off;
        const void *k = c->kt == ML_CACHE_F32 ? (const void *)c->k : c->kh;
        const void *v = c->vt == ML_CACHE_F32 ? (const void *)c->v : c->vh;
        run[n++] = (kv_run){ml__kv_at(k, at, c->kt), ml__kv_at(v, at, c->vt), hi - b + 1, kv_dim};
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
 * exponentials and the normalization are fmath's (libm's expf takes a
 * slow path for the many results that underflow).  `sink`: the head's
 * sink logit (gpt-oss), or NULL.  A sink is one more logit of the head,
 * not scaled, that takes its share of the sum and has no value: it goes
 * into the column after the row's n scores (every score row has one,
 * ml__att_ld), the maximum includes it, and exp_norm over n + 1 makes
 * x[c] = exp(x[c] - m) / (S + exp(sink - m)), as llama.cpp's softmax with
 * sinks does; the value sums read the n scores only. */
static void softmax(const ml_model *m, const ml_fmath *fm, float *sc, uint32_t n,
                    const float *sink)
{
    float max = -INFINITY;
    if (!(m->h.attn_softcap > 0)) {
        max = fm->scale_max(sc, n, m->attn_scale);
    } else {
        for (uint32_t i = 0; i < n; i++) {
            sc[i] = ml__softcap(sc[i] * m->attn_scale, m->h.attn_softcap);
            if (sc[i] > max)
                max = sc[i];
        }
    }
    if (sink) {
        sc[n] = *sink;
        max = sc[n] > max ? sc[n] : max;
    }
    fm->exp_norm(sc, n + (sink != NULL), max);
}

/* Query head h's sink, or NULL. */
static const float *head_sink(const att_job *j, uint32_t h)
{
    return j->L->sinks ? j->L->sinks + h : NULL;
}

#define KV_CHUNK ML_KV_CHUNK

/* Thread ith's room for a chunk of Q8_0 or Q4_0 keys or values read back
 * as floats (NULL where nothing is cached so). */
static float *thread_dq(const att_job *j, unsigned ith)
{
    return j->c->dq ? j->c->dq + (size_t)ith * KV_CHUNK * j->c->m->d.head_dim : NULL;
}

/* Columns [c0, c0 + w) of n rows of type t, `ld` values apart, into dq as
 * floats (rows w apart); c0 and w multiples of 32.  The products then
 * read those floats as they read an f32 cache's: the same operations in
 * the same order, so the same bits for every kernel variant. */
static void load_rows(ml_cache_type t, float *dq, const void *p, size_t ld, uint32_t n,
                      uint32_t c0, uint32_t w)
{
    for (uint32_t i = 0; i < n; i++)
        ml__kv_load(t, dq + (size_t)i * w, ml__kv_at(p, i * ld + c0, t), w);
}

/* Scores of `rows` query rows against the keys of the runs, from column
 * `col` of each score row on: dot products, each on its own (dq: the
 * thread's room for blocked keys). */
static void run_scores(const att_job *j, const float *const *q, uint32_t rows, const kv_run *run,
                       int nr, float *const *sc, size_t col, float *dq)
{
    const ml_ctx *c = j->c;
    uint32_t dh = c->m->d.head_dim;
    for (int r = 0; r < nr; col += run[r].n, r++)
        for (uint32_t s = 0; s < run[r].n; s += KV_CHUNK) {
            uint32_t n = run[r].n - s < KV_CHUNK ? run[r].n - s : KV_CHUNK;
            size_t ld = run[r].ld;
            const void *k = ml__kv_at(run[r].k, s * ld, c->kt);
            float *out = sc[0] + col + s; /* score rows are ml__att_ld floats apart */
            if (ml__kv_blocked(c->kt)) {
                load_rows(c->kt, dq, k, ld, n, 0, dh);
                j->fm->dots(rows, q, n, dq, dh, dh, out, ml__att_ld(c));
            } else if (c->kt == ML_CACHE_F16) {
                j->fm->dots_h(rows, q, n, k, ld, dh, out, ml__att_ld(c));
            } else {
                j->fm->dots(rows, q, n, k, ld, dh, out, ml__att_ld(c));
            }
        }
}

/* Columns [c0, c0 + width) of out[i] += p[i] · V over the runs' values
 * (out[i] pointing at column c0), p[i] from column `col` of score row i:
 * each output element's terms added in the order of the positions, a
 * chunk after the other (dq: the thread's room for blocked values, read
 * back in the whole blocks that hold the columns). */
static void run_values(const att_job *j, float *const *p, uint32_t rows, const kv_run *run, int nr,
                       size_t col, uint32_t c0, uint32_t width, float *const *out, float *dq)
{
    const ml_ctx *c = j->c;
    const float *a[ML_ATT_GROUP * ML_ATT_TOKENS];
    for (int r = 0; r < nr; col += run[r].n, r++)
        for (uint32_t s = 0; s < run[r].n; s += KV_CHUNK) {
            uint32_t n = run[r].n - s < KV_CHUNK ? run[r].n - s : KV_CHUNK;
            size_t ld = run[r].ld;
            for (uint32_t i = 0; i < rows; i++)
                a[i] = p[i] + col + s;
            if (ml__kv_blocked(c->vt)) {
                uint32_t b0 = c0 / 32 * 32, w = (c0 + width + 31) / 32 * 32 - b0;
                load_rows(c->vt, dq, ml__kv_at(run[r].v, s * ld, c->vt), ld, n, b0, w);
                j->fm->gemm(rows, a, n, dq + (c0 - b0), w, width, 1.0f, out);
            } else if (c->vt == ML_CACHE_F16) {
                j->fm->gemm_h(rows, a, n, ml__kv_at(run[r].v, s * ld + c0, c->vt), ld, width,
                              1.0f, out);
            } else {
                j->fm->gemm(rows, a, n, ml__kv_at(run[r].v, s * ld + c0, c->vt), ld, width, 1.0f,
                            out);
            }
        }
}

/* ---------------------------------------------------------------------------
 * A prompt: blocks of consecutive tokens that share the reads of the
 * positions before them
 * ------------------------------------------------------------------------- */

/* A block's rows: their queries, score rows and outputs; the thread's
 * room for blocked keys and values. */
typedef struct att_rows {
    const float *const *q;
    float *const *sc, *const *out;
    float *dq;
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
        run_values(j, a->sc + r0, rows, run, nr, col, 0, j->c->m->d.head_dim, a->out + r0,
                   a->dq);
    else
        run_scores(j, a->q + r0, rows, run, nr, a->sc + r0, col, a->dq);
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
                   float *scores, float *dq)
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
        sc[i] = scores + (size_t)i * ml__att_ld(c);
        memset(out[i], 0, dh * sizeof(float));
    }
    const att_rows a = {q, sc, out, dq};
    block_pass(j, 0, &a, t0, p0, nt, gs, kvh);
    for (uint32_t i = 0; i < rows; i++) {
        uint32_t p = p0 + i / gs, lo = window_lo(j, p);
        softmax(m, j->fm, sc[i] + (lo - lo0), p - lo + 1, head_sink(j, h0 + i % gs));
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
    float *scores = j->c->att + (size_t)ith * ml__att_rows(j->c) * ml__att_ld(j->c);
    for (size_t i = b; i < e; i++) {
        uint32_t kvh = (uint32_t)(i % per_blk / groups), g0 = (uint32_t)(i % groups) * j->group;
        uint32_t gs = per_kv - g0 < j->group ? per_kv - g0 : j->group;
        size_t blk = i / per_blk, t0 = j->c->tblk[blk];
        size_t t1 = blk + 1 < j->n_blk ? j->c->tblk[blk + 1] : j->n_tok;
        attend(j, t0, (uint32_t)(t1 - t0), kvh * per_kv + g0, gs, scores, thread_dq(j, ith));
    }
}

/* ---------------------------------------------------------------------------
 * One token (decode): the work split over positions, then columns
 *
 * A single token has one work item per KV head (3 for SmolLM2), which
 * two threads share 2 to 1.  Its attention is split three ways instead,
 * each step a pool job: the scores of chunks of positions (each score is
 * on its own), each query head's softmax, then the value sums by halves
 * of the columns (each column's sum still over the positions in order).
 * The same operations in the same order, so the same bits.
 * ------------------------------------------------------------------------- */

/* The first position row 0 (the one token) sees. */
static uint32_t first_pos(const att_job *j)
{
    return window_lo(j, j->c->tpos[0]);
}

/* Query head h's score row in the shared score rows. */
static float *split_row(const att_job *j, uint32_t h)
{
    return j->c->att + (size_t)h * ml__att_ld(j->c);
}

/* Items [b, e) of (KV head, chunk of j->chunk positions): the scores. */
static void split_scores(void *arg, size_t b, size_t e, unsigned ith)
{
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
            run_scores(j, q, gs, run, nr, sc, s - lo, thread_dq(j, ith));
        }
    }
}

/* Query heads [b, e): softmax of their score rows. */
static void split_softmax(void *arg, size_t b, size_t e, unsigned ith)
{
    (void)ith;
    const att_job *j = arg;
    for (size_t h = b; h < e; h++)
        softmax(j->c->m, j->fm, split_row(j, (uint32_t)h), j->c->tpos[0] - first_pos(j) + 1,
                head_sink(j, (uint32_t)h));
}

/* Items [b, e) of (KV head, half of the head's columns): the value sums. */
static void split_values(void *arg, size_t b, size_t e, unsigned ith)
{
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
            run_values(j, sc, gs, run, nr, 0, c0, w, out, thread_dq(j, ith));
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

/* ---------------------------------------------------------------------------
 * The layer's call: the work cut into items, then the batch's keys and
 * values into the cache
 * ------------------------------------------------------------------------- */

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

/* Batch rows [b, e) into their sequences' caches after attending, one
 * row of each KV head at a time (a ring keeps the last cap of a run: its
 * earlier rows are skipped, later ones would overwrite them).  Rows go to
 * distinct places, so the threads share them: the first rows of a prompt
 * touch fresh pages of the cache, and the page faults are shared too. */
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
    const void *k = c->kt == ML_CACHE_F32 ? (const void *)c->k : c->kh;
    const void *v = c->vt == ML_CACHE_F32 ? (const void *)c->v : c->vh;
    size_t krow = ml__kv_bytes(c->kt, dh), vrow = ml__kv_bytes(c->vt, dh); /* a head's row */
    (void)ith;
    for (size_t t0 = b, t1; t0 < e; t0 = t1) {
        size_t end = ml__seq_run_end(c, t0, s->n_tok); /* of the run, past e too */
        t1 = end < e ? end : e;
        const ml_seq *sq = &c->seqs[c->tseq[t0]];
        for (size_t t = end - t0 > cap ? end - cap : t0; t < t1; t++)
            for (uint32_t h = 0; h < c->m->h.n_kv_heads; h++) {
                size_t at = ((size_t)h * cap + c->tpos[t] % cap) * dh, from = t * kv_dim + h * dh;
                memcpy((char *)sq->kc[s->l] + ml__kv_bytes(c->kt, at),
                       ml__kv_at(k, from, c->kt), krow);
                memcpy((char *)sq->vc[s->l] + ml__kv_bytes(c->vt, at),
                       ml__kv_at(v, from, c->vt), vrow);
            }
    }
}

static void cache_store(ml_ctx *c, uint32_t l, size_t n_tok)
{
    store_job s = {c, l, n_tok};
    ml__parallel(c, n_tok, cache_rows, &s);
}

void ml__attend(ml_ctx *c, uint32_t l, size_t n_tok)
{
    const ml_model *m = c->m;
    const ml_layer *L = &m->layers[l];
    size_t n_blk = att_blocks(c, L, n_tok);
    att_job j = {c, L, l, n_tok, n_blk, 0, att_group(c, n_blk), m->k->fmath};
    uint32_t groups = (m->h.n_heads / m->h.n_kv_heads + j.group - 1) / j.group;
    if (n_tok == 1 && ml__pool_size(c->pool) > 1)
        attend_split(&j);
    else
        ml__parallel_claim(c, n_blk * m->h.n_kv_heads * groups, attend_items, &j);
    cache_store(c, l, n_tok);
}
