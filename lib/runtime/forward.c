/* forward.c - the forward pass of mlb(5), as math: embed, then per layer
 *
 *     x += post_attn_norm(attention(attn_norm(x)))   (or linear attention)
 *     x += post_ffn_norm(ffn(ffn_norm(x)))
 *
 * then the final norm and the classifier (or, for an embedding, the final
 * norm's output pooled over the positions).  Attention is GQA with RoPE on
 * interleaved pairs, biases, q/k norms, a window, a softcap, a gate and
 * sinks; the FFN is gated (SiLU, GELU or gpt-oss's clamped SwiGLU), or a
 * mixture of experts (moe.c).  Matrices multiply Q8_0-quantized activations (the
 * spec's rule, bit for bit); everything else is float32, computed in one
 * fixed order, so results do not depend on the thread count or the batch
 * size.  A batch may hold the tokens of several sequences (each a run of
 * consecutive rows at its own positions): the matrices multiply all of
 * them at once, attention reads each token's own sequence.  Attention
 * over the KV cache, and how its work is cut, is attention.c's (one call
 * per layer); how the rest is shared over threads is parallel.c's; the
 * context's memory is ctx.c's. */
#include "kernels/fmath.h"
#include "runtime/attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------
 * Small float operations (one order, no SIMD: they are not the hot path;
 * RMSNorm and the sigmoid are fmath.h's, shared with linear_attn.c)
 * ------------------------------------------------------------------------- */

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

/* One layer's q and k norms and RoPE over a batch's rows. */
typedef struct rope_job {
    ml_ctx *c;
    const ml_layer *L;
    const ml_fmath *fm;
    float *rope;        /* the layer's RoPE table, (B, rot_dim) */
    int fill_rope;      /* 1: the first layer of the batch to use it fills it */
} rope_job;

/* Per-head RMSNorm of q and k, then RoPE by the batch's table (its rows
 * filled here by the first layer to use it: the cos and sin of a position
 * are the same in every layer of a frequency set), for batch rows [b, e);
 * then k and v as the cache holds them, where that is not float. */
static void qk_norm_rope(void *arg, size_t b, size_t e, unsigned ith)
{
    const rope_job *j = arg;
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
        size_t kv_dim = m->d.kv_dim;
        if (ml__kv_blocked(c->kt)) {
            ml__kv_rotate(c->q + t * nq * dh, (size_t)nq * dh);
            ml__kv_rotate(c->k + t * kv_dim, kv_dim);
        }
        if (ml__kv_blocked(c->vt))
            ml__kv_rotate(c->v + t * kv_dim, kv_dim);
        if (c->kt != ML_CACHE_F32)
            ml__kv_store(j->fm, c->kt, (char *)c->kh + ml__kv_bytes(c->kt, t * kv_dim),
                         c->k + t * kv_dim, kv_dim);
        if (c->vt != ML_CACHE_F32)
            ml__kv_store(j->fm, c->vt, (char *)c->vh + ml__kv_bytes(c->vt, t * kv_dim),
                         c->v + t * kv_dim, kv_dim);
    }
}

/* o = wo · gate(attention(rope(norm(q)), rope(norm(k)), v)) + bo of xb. */
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
    rope_job j = {c, L, m->k->fmath, NULL, 0};
    unsigned set = L->inv_freq == m->inv_freq_local; /* the table of its frequencies */
    j.rope = c->rope_cs + set * c->n_batch * m->d.rot_dim;
    j.fill_rope = !(c->rope_ready >> set & 1);
    ml__parallel(c, n_tok, qk_norm_rope, &j);
    if (L->inv_freq)
        c->rope_ready |= 1u << set;
    ml__attend(c, l, n_tok); /* ao = softmax(q·K)·V of each head */
    if (ml__kv_blocked(c->vt)) /* the values were rotated: ao is, too */
        ml__kv_rotate(c->ao, n_tok * q_dim);
    if (m->h.attn_gate)
        for (size_t i = 0; i < n_tok * q_dim; i++)
            c->ao[i] *= ml__sigmoid(c->g[i]);
    ml__ctx_observe(c, ML_MLI_WO_IN, l, c->ao, n_tok, q_dim);
    ml__quantize(c, c->ao, n_tok, q_dim);
    ml__matmul(c, &L->wo, n_tok, c->o, m->h.dim);
    add_bias(c->o, L->bo, n_tok, m->h.dim);
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
    ml__glu_quantize(c, c->hb, c->hb2, n_tok, hidden);
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
    const ml_fmath *fm = k->fmath;
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
        ml__quantize_rows(s->c, xb, b * dim, (e - b) * dim, dim);
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

/* Row `id` of a block-type embedding (ggml's dequantizers; F32 as it
 * is), scaled. */
static void embed_blk(const ml_model *m, ml_token id, float *x)
{
    const ml_mat *e = &m->tok_emb;
    const uint8_t *row = (const uint8_t *)e->q + (size_t)id * e->row_bytes;
    uint32_t ggml = 0;
    if (e->type == ML_TYPE_F32)
        memcpy(x, row, (size_t)e->cols * sizeof *x);
    else if (ml_type_block(e->type, NULL, NULL, &ggml))
        /* model.c bound only types the kernels compute with, all of which
         * gguf_dequant.c dequantizes: this cannot fail */
        (void)ml_gguf_dequantize_raw(ggml, row, e->cols, x, NULL);
    for (uint32_t i = 0; i < e->cols; i++)
        x[i] *= m->embed_scale;
}

/* Row `id` of the embedding, dequantized and scaled. */
static void embed(const ml_model *m, ml_token id, float *x)
{
    const ml_mat *e = &m->tok_emb;
    uint32_t dim = m->h.dim;
    size_t d0 = (size_t)id * (dim / 32);
    if (!ml__mat_spec(e)) {
        embed_blk(m, id, x);
    } else if (e->type == ML_TYPE_Q8_0) {
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
            logits[i] = ml__softcap(logits[i], m->h.final_softcap);
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
        if (L->moe)
            ml__moe_ffn(c, l, n_tok);                                   /* o = experts(xb) */
        else
            ffn(c, l, n_tok);                                           /* o = ffn(xb) */
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

/* ---------------------------------------------------------------------------
 * Embeddings: the final norm's output, pooled over the positions
 * ------------------------------------------------------------------------- */

/* Rows [0, n_tok) of the batch that starts at token `done` of n into out:
 * summed (mean), the first token's (cls) or the last's (last). */
static void pool_batch(ml_ctx *c, size_t n_tok, size_t done, size_t n, ml_pooling pooling,
                       float *out)
{
    const ml_model *m = c->m;
    uint32_t dim = m->h.dim;
    for (size_t t = 0; t < n_tok; t++) {
        size_t i = done + t;
        if ((pooling == ML_POOL_CLS && i != 0) || (pooling == ML_POOL_LAST && i + 1 != n))
            continue;
        ml__rmsnorm(c->xb, c->x + t * dim, m->final_norm, dim, m->h.norm_eps);
        for (uint32_t k = 0; k < dim; k++)
            out[k] = pooling == ML_POOL_MEAN ? out[k] + c->xb[k] : c->xb[k];
    }
}

ml_status ml_ctx_embed(ml_ctx *c, const ml_token *tokens, size_t n, ml_pooling pooling,
                       float *out, ml_error *err)
{
    if (n == 0)
        return ml__err(err, ML_E_INVAL, "", -1, "no tokens to embed");
    if (pooling != ML_POOL_MEAN && pooling != ML_POOL_CLS && pooling != ML_POOL_LAST)
        return ml__err(err, ML_E_INVAL, "", -1, "unknown pooling %d", (int)pooling);
    ml_status st = ml_ctx_seq_reset(c, 0, err);
    if (!st)
        st = eval_check(c, NULL, tokens, n, err);
    if (st)
        return st;
    memset(out, 0, c->m->h.dim * sizeof *out);
    for (size_t done = 0; done < n;) {
        size_t b = n - done < c->n_batch ? n - done : c->n_batch;
        batch_rows(c, NULL, n, done, b, 0);
        eval_batch(c, tokens + done, b, NULL, 0);
        pool_batch(c, b, done, n, pooling, out);
        done += b;
    }
    if (pooling == ML_POOL_MEAN)
        for (uint32_t k = 0; k < c->m->h.dim; k++)
            out[k] /= (float)n;
    return ML_OK;
}
