/* forward.c - the evaluation context and the forward pass of mlb(5): embed,
 * then per layer RMSNorm, attention (GQA, RoPE on interleaved pairs,
 * biases, q/k norms, window, softcap, gate) and the gated FFN, each with
 * optional post-norms, then the final norm and the classifier.  Matrices
 * multiply Q8_0-quantized activations (the spec's rule, bit for bit);
 * everything else is float32, computed in one fixed order, so results do
 * not depend on the thread count or the batch size. */
#include "kernels/fmath.h"
#include "runtime/linear_attn.h"
#include "runtime/runtime.h"

#include "format/mli_impl.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

/* Query heads (of one KV head) that attend together, sharing key loads. */
#define ATT_GROUP 4

struct ml_ctx {
    const ml_model *m;
    ml_pool *pool;
    uint32_t n_ctx, n_batch, pos;
    float **kc, **vc;     /* per layer: (cap[l], kv_dim) keys and values */
    uint32_t *cap;        /* positions layer l holds: n_ctx, or a window ring */
    uint64_t state_bytes, scratch_bytes;
    /* Scratch for one batch of B = n_batch tokens, row t for token t. */
    float *x;             /* (B, dim) residual stream */
    float *xb;            /* (B, dim) normalized block input */
    float *q;             /* (B, q_dim) */
    float *k, *v;         /* (B, kv_dim) */
    float *ao;            /* (B, q_dim) attention output per head */
    float *g;             /* (B, q_dim) gate */
    float *hb, *hb2;      /* (B, hidden_dim) FFN gate and up */
    float *o;             /* (B, dim) block output before the residual */
    int8_t *aq;           /* (B, max input) quantized activations */
    float *ad;            /* (B, max input / 32) their scales */
    float *att;           /* (n_threads, att_rows, n_ctx) attention scores */
    float *rope_cs;       /* (n_threads, rot_dim) one position's RoPE cos, sin pairs */
    /* Linear attention (only when the model has such layers). */
    ml_lin_layer **lin;   /* per layer: state and chunk memory (linear_attn.h), or NULL */
    float *lqkv;          /* (B, lin_qkv) projections, then conv + SiLU output */
    float *lz;            /* (B, lin_vd) output gate */
    float *lba;           /* (B, 2 lin_v_heads): b then a */
    float *lo;            /* (B, lin_vd) per-head outputs */
    void *scratch;
    ml_mli *imatrix;      /* sums of squares of matrix inputs, or NULL */
};

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

/* ---------------------------------------------------------------------------
 * Matrix products on the pool
 * ------------------------------------------------------------------------- */

/* One pool job for up to MM_PARTS matrices that read the same quantized
 * input (q, k, v and gate; w1 and w3), so they cost one dispatch and one
 * wait.  Equal shares of rows do not take equal times: decode is bound
 * by memory, which the threads do not get in equal measure, and prefill
 * by processors that neighbours slow unevenly.  So each thread does most
 * of its share in one go and then the threads steal chunks from the ends
 * of each other's shares (mm_run_steal).  Measured on 2 threads against
 * even shares: TinyLlama Q4_0 decode 52-54 tokens/s against 46-50;
 * prefill +1% to +8% on the four bench models (pp512, the two ways
 * alternating in one process).  (Claiming every chunk from one shared
 * counter was slower than even shares: the streams broke at every
 * chunk.)  Rows are independent, so no split changes a bit of the
 * result. */
#define MM_PARTS 4
#define MM_STEAL_MAX 16

typedef struct mm_part {
    const ml_mat *w;
    float *y;
    size_t ldy;
} mm_part;

typedef struct mm_job {
    const ml_kernels *k;
    const int8_t *xq;
    const float *xd;
    size_t n_tok;
    mm_part part[MM_PARTS];
    unsigned n_parts;
    /* Stealing, on 2 to MM_STEAL_MAX threads: */
    int steal;
    size_t total, chunk;                   /* rows of all parts; rows per stolen chunk */
    _Atomic uint64_t span[MM_STEAL_MAX];   /* each thread's remaining rows */
} mm_job;

static void mm_rows(const mm_job *j, const mm_part *p, size_t b, size_t e)
{
    const ml_mat *w = p->w;
    if (w->type == ML_TYPE_Q8_0) {
        if (j->n_tok == 1)
            j->k->matvec_q8_0(w->q, w->d, w->cols, b, e, j->xq, j->xd, p->y);
        else
            j->k->matmul_q8_0(w->q, w->d, w->cols, b, e, j->xq, j->xd, j->n_tok, p->y, p->ldy);
    } else {
        if (j->n_tok == 1)
            j->k->matvec_q4_0(w->q, w->d, w->cols, b, e, j->xq, j->xd, p->y);
        else
            j->k->matmul_q4_0(w->q, w->d, w->cols, b, e, j->xq, j->xd, j->n_tok, p->y, p->ldy);
    }
}

/* Decode: rows [g0, g1) of the parts laid end to end. */
static void mm_span(const mm_job *j, size_t g0, size_t g1)
{
    size_t off = 0;
    for (unsigned i = 0; i < j->n_parts && g0 < g1; i++) {
        const size_t rows = j->part[i].w->rows;
        if (g0 < off + rows) {
            const size_t e = g1 < off + rows ? g1 : off + rows;
            mm_rows(j, &j->part[i], g0 - off, e - off);
            g0 = e;
        }
        off += rows;
    }
}

/* A thread's remaining rows, front in the low half, back in the high. */
static uint64_t span_pack(size_t f, size_t b)
{
    return (uint64_t)f | (uint64_t)b << 32;
}

/* Decode with stealing: thread i owns an equal share of the rows; it takes
 * most of its share in one claim from the front (one stream, one kernel
 * call), then the rest in chunks; a thread that is done takes chunks from
 * the back of the others' shares.  Memory bandwidth is shared unevenly
 * between threads, and a static split made each wait for the slower
 * one at every product. */
static void mm_run_steal(mm_job *j, unsigned ith, unsigned nth)
{
    const size_t chunk = j->chunk;
    for (int first = 1;; first = 0) {
        uint64_t w = atomic_load(&j->span[ith]);
        size_t f = (uint32_t)w, b = (size_t)(w >> 32);
        if (f >= b)
            break;
        size_t n = first ? (b - f) - (b - f) / 8 : chunk;
        n = n < b - f ? n : b - f;
        if (atomic_compare_exchange_weak(&j->span[ith], &w, span_pack(f + n, b)))
            mm_span(j, f, f + n);
    }
    for (unsigned k = 1; k < nth; k++) {
        const unsigned v = (ith + k) % nth;
        for (;;) {
            uint64_t w = atomic_load(&j->span[v]);
            size_t f = (uint32_t)w, b = (size_t)(w >> 32);
            if (f >= b)
                break;
            size_t n = chunk < b - f ? chunk : b - f;
            if (atomic_compare_exchange_weak(&j->span[v], &w, span_pack(f, b - n)))
                mm_span(j, b - n, b);
        }
    }
}

static void mm_run(void *ctx, unsigned ith, unsigned nth)
{
    mm_job *j = ctx;
    if (j->steal) {
        mm_run_steal(j, ith, nth);
        return;
    }
    for (unsigned i = 0; i < j->n_parts; i++) {
        size_t b, e;
        ml__pool_split(j->part[i].w->rows, 8, ith, nth, &b, &e);
        if (b < e)
            mm_rows(j, &j->part[i], b, e);
    }
}

/* Quantizing n_tok rows of n floats (stride n) is quantizing n_tok·n
 * consecutive floats: Q8_0 blocks are independent.  So is the gated FFN's
 * product.  The pool splits both over blocks of 32 when the work outweighs
 * a dispatch (a few microseconds): Gemma's GELU over a batch is a third of
 * a layer's time when serial. */
#define ACT_POOL_MIN 8192

typedef struct act_job {
    ml_ctx *c;
    float *x;
    const float *gate; /* x = act(x) · gate first, or NULL */
    size_t n;          /* floats, a multiple of 32 */
} act_job;

static void act_run(void *ctx, unsigned ith, unsigned nth)
{
    const act_job *j = ctx;
    const ml_model *m = j->c->m;
    size_t b, e;
    ml__pool_split(j->n, 32, ith, nth, &b, &e);
    if (b >= e)
        return;
    if (j->gate)
        ml__fmath(m->k)->glu(j->x + b, j->gate + b, e - b, m->h.act == ML_ACT_GELU_TANH);
    m->k->quantize_q8_0(j->x + b, e - b, j->c->aq + b, j->c->ad + b / 32);
}

static void act_quantize(ml_ctx *c, float *x, const float *gate, size_t n)
{
    act_job j = {c, x, gate, n};
    if (n >= ACT_POOL_MIN)
        ml__pool_run(c->pool, act_run, &j);
    else
        act_run(&j, 0, 1);
}

/* Quantizes n_tok rows of n floats (stride n) into the context's buffer. */
static void quantize(ml_ctx *c, float *x, size_t n_tok, uint32_t n)
{
    act_quantize(c, x, NULL, n_tok * n);
}

/* Importance-matrix collection: adds x^2 of n_tok rows of n inputs (stride
 * n) to the first n channels of a slot, token after token, so the sums do
 * not depend on the batch size. */
static void observe(ml_ctx *c, ml_mli_slot slot, uint32_t l, const float *x, size_t n_tok,
                    uint32_t n)
{
    if (!c->imatrix)
        return;
    double *sum = ml__mli_slot(c->imatrix, slot, l);
    for (size_t t = 0; t < n_tok; t++)
        for (uint32_t i = 0; i < n; i++)
            sum[i] += (double)x[t * n + i] * x[t * n + i];
}

/* y_i (n_tok rows of w_i->rows, stride ldy_i) = W_i · x for the quantized
 * x, for the n <= MM_PARTS matrices of ws, in one pool job. */
static void matmuls(ml_ctx *c, size_t n_tok, unsigned n, const ml_mat *const *ws,
                    float *const *ys, const size_t *ldys)
{
    mm_job j = {.k = c->m->k, .xq = c->aq, .xd = c->ad, .n_tok = n_tok, .n_parts = n};
    for (unsigned i = 0; i < n; i++) {
        j.part[i] = (mm_part){ws[i], ys[i], ldys[i]};
        j.total += ws[i]->rows;
    }
    unsigned nth = ml__pool_size(c->pool);
    j.steal = nth > 1 && nth <= MM_STEAL_MAX && j.total < UINT32_MAX;
    if (j.steal) {
        j.chunk = j.total / ((size_t)nth * 32);
        j.chunk = j.chunk < 8 ? 8 : (j.chunk + 7) / 8 * 8;
        for (unsigned t = 0; t < nth; t++) {
            size_t b, e;
            ml__pool_split(j.total, 8, t, nth, &b, &e);
            atomic_init(&j.span[t], span_pack(b, e));
        }
    }
    ml__pool_run(c->pool, mm_run, &j);
}

static void matmul(ml_ctx *c, const ml_mat *w, size_t n_tok, float *y, size_t ldy)
{
    matmuls(c, n_tok, 1, &w, &y, &ldy);
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
    uint32_t group;     /* query heads per work item, at most ATT_GROUP */
    const ml_fmath *fm;
} att_job;

/* Consecutive positions' keys and values: rows of kv_dim floats. */
typedef struct kv_run {
    const float *k, *v;
    uint32_t n;
} kv_run;

/* Positions [lo, p] of KV head kvh as at most three runs, in order: those
 * cached before the batch (a ring wraps at most once), then the batch's
 * own rows, which reach the cache only after the batch has attended. */
static int kv_runs(const att_job *j, uint32_t lo, uint32_t p, uint32_t kvh, kv_run run[3])
{
    const ml_ctx *c = j->c;
    uint32_t kv_dim = c->m->d.kv_dim, cap = c->cap[j->l], pos = c->pos;
    size_t off = (size_t)kvh * c->m->d.head_dim;
    int n = 0;
    for (uint32_t s = lo, end = p + 1 < pos ? p + 1 : pos; s < end;) {
        uint32_t slot = s % cap, len = end - s < cap - slot ? end - s : cap - slot;
        size_t at = (size_t)slot * kv_dim + off;
        run[n++] = (kv_run){c->kc[j->l] + at, c->vc[j->l] + at, len};
        s += len;
    }
    uint32_t b = lo > pos ? lo : pos;
    if (b <= p) {
        size_t at = (size_t)(b - pos) * kv_dim + off;
        run[n++] = (kv_run){c->k + at, c->v + at, p - b + 1};
    }
    return n;
}

/* Scores (scaled, softcapped) to probabilities, in place; the
 * exponentials and the normalization are fmath's (libm's expf, with its
 * slow path for the many results that underflow, was 8% of prefill). */
static void softmax(const ml_model *m, const ml_fmath *fm, float *sc, uint32_t n)
{
    float max = -INFINITY;
    for (uint32_t i = 0; i < n; i++) {
        sc[i] = softcap(sc[i] * m->attn_scale, m->h.attn_softcap);
        if (sc[i] > max)
            max = sc[i];
    }
    fm->exp_norm(sc, n, max);
}

/* Query heads [h0, h0 + gs) of batch row t, which share one KV head,
 * against positions lo..p: all scores as dot products over the key runs,
 * then the value sums as one product per run.  Every score and every sum
 * runs over positions in order, whatever the batch. */
static void attend(const att_job *j, size_t t, uint32_t h0, uint32_t gs, float *scores)
{
    const ml_ctx *c = j->c;
    const ml_model *m = c->m;
    const ml_mlb_header *hd = &m->h;
    uint32_t dh = m->d.head_dim, kv_dim = m->d.kv_dim;
    uint32_t p = c->pos + (uint32_t)t;
    uint32_t lo = j->L->sliding && p + 1 > hd->sliding_window ? p + 1 - hd->sliding_window : 0;
    kv_run run[3];
    int nr = kv_runs(j, lo, p, h0 / (hd->n_heads / hd->n_kv_heads), run);
    const float *q[ATT_GROUP], *a[ATT_GROUP];
    float *out[ATT_GROUP];
    for (uint32_t g = 0; g < gs; g++) {
        q[g] = c->q + t * m->d.q_dim + (size_t)(h0 + g) * dh;
        out[g] = c->ao + t * m->d.q_dim + (size_t)(h0 + g) * dh;
        memset(out[g], 0, dh * sizeof(float));
    }
    size_t off = 0;
    for (int r = 0; r < nr; off += run[r].n, r++)
        j->fm->dots(gs, q, run[r].n, run[r].k, kv_dim, dh, scores + off, c->n_ctx);
    for (uint32_t g = 0; g < gs; g++)
        softmax(m, j->fm, scores + (size_t)g * c->n_ctx, p - lo + 1);
    off = 0;
    for (int r = 0; r < nr; off += run[r].n, r++) {
        for (uint32_t g = 0; g < gs; g++)
            a[g] = scores + (size_t)g * c->n_ctx + off;
        j->fm->gemm(gs, a, run[r].n, run[r].v, kv_dim, dh, 1.0f, out);
    }
}

/* Score rows per thread: the most query heads a work item has. */
static uint32_t att_rows(const ml_model *m)
{
    uint32_t per_kv = m->h.n_heads / m->h.n_kv_heads;
    return per_kv < ATT_GROUP ? per_kv : ATT_GROUP;
}

/* Work items: (token, KV head, group of query heads). */
static void att_run(void *ctx, unsigned ith, unsigned nth)
{
    const att_job *j = ctx;
    const ml_mlb_header *hd = &j->c->m->h;
    uint32_t per_kv = hd->n_heads / hd->n_kv_heads, groups = (per_kv + j->group - 1) / j->group;
    size_t per_tok = (size_t)hd->n_kv_heads * groups, b, e;
    ml__pool_split(j->n_tok * per_tok, 1, ith, nth, &b, &e);
    float *scores = j->c->att + (size_t)ith * att_rows(j->c->m) * j->c->n_ctx;
    for (size_t i = b; i < e; i++) {
        uint32_t kvh = (uint32_t)(i % per_tok / groups), g0 = (uint32_t)(i % groups) * j->group;
        uint32_t gs = per_kv - g0 < j->group ? per_kv - g0 : j->group;
        attend(j, i / per_tok, kvh * per_kv + g0, gs, scores);
    }
}

/* Heads per work item: up to ATT_GROUP, fewer when that would leave
 * threads idle (decode).  Only the sharing changes, not a result. */
static uint32_t att_group(const ml_ctx *c, size_t n_tok)
{
    const ml_mlb_header *hd = &c->m->h;
    uint32_t per_kv = hd->n_heads / hd->n_kv_heads, g = att_rows(c->m);
    unsigned nth = ml__pool_size(c->pool);
    while (g > 1 && n_tok * hd->n_kv_heads * ((per_kv + g - 1) / g) < nth)
        g = (g + 1) / 2;
    return g;
}

typedef struct qk_job {
    const ml_ctx *c;
    const ml_layer *L;
    size_t n_tok;
} qk_job;

/* Per-head RMSNorm of q and k, then RoPE with one table per position, for
 * the thread's share of batch rows [0, n_tok). */
static void qk_run(void *ctx, unsigned ith, unsigned nth)
{
    const qk_job *j = ctx;
    const ml_ctx *c = j->c;
    const ml_model *m = c->m;
    const ml_layer *L = j->L;
    uint32_t dh = m->d.head_dim, half = m->d.rot_dim / 2;
    float *cs = c->rope_cs + (size_t)ith * m->d.rot_dim;
    size_t b, e;
    ml__pool_split(j->n_tok, 1, ith, nth, &b, &e);
    for (size_t t = b; t < e; t++) {
        if (L->inv_freq)
            rope_table(cs, L->inv_freq, half, c->pos + (uint32_t)t, L->rope_mul);
        for (uint32_t h = 0; h < m->h.n_heads + m->h.n_kv_heads; h++) {
            int is_q = h < m->h.n_heads;
            float *x = is_q ? c->q + (t * m->h.n_heads + h) * dh
                            : c->k + (t * m->h.n_kv_heads + h - m->h.n_heads) * dh;
            const float *norm = is_q ? L->q_norm : L->k_norm;
            if (norm)
                ml__rmsnorm(x, x, norm, dh, m->h.norm_eps);
            if (L->inv_freq)
                rope(x, cs, half);
        }
    }
}

static void attention(ml_ctx *c, uint32_t l, size_t n_tok)
{
    const ml_model *m = c->m;
    const ml_layer *L = &m->layers[l];
    uint32_t q_dim = m->d.q_dim, kv_dim = m->d.kv_dim;
    observe(c, ML_MLI_ATTN_IN, l, c->xb, n_tok, m->h.dim);
    quantize(c, c->xb, n_tok, m->h.dim);
    const ml_mat *ws[] = {&L->wq, &L->wk, &L->wv, &L->wg};
    float *ys[] = {c->q, c->k, c->v, c->g};
    const size_t ld[] = {q_dim, kv_dim, kv_dim, q_dim};
    matmuls(c, n_tok, m->h.attn_gate ? 4 : 3, ws, ys, ld);
    add_bias(c->q, L->bq, n_tok, q_dim);
    add_bias(c->k, L->bk, n_tok, kv_dim);
    add_bias(c->v, L->bv, n_tok, kv_dim);
    qk_job qj = {c, L, n_tok};
    ml__pool_run(c->pool, qk_run, &qj);
    att_job j = {c, L, l, n_tok, att_group(c, n_tok), ml__fmath(m->k)};
    ml__pool_run(c->pool, att_run, &j);
    /* Into the cache after attending (a ring keeps the last cap). */
    uint32_t cap = c->cap[l];
    for (size_t t = n_tok > cap ? n_tok - cap : 0; t < n_tok; t++) {
        uint32_t slot = (c->pos + (uint32_t)t) % cap;
        memcpy(c->kc[l] + (size_t)slot * kv_dim, c->k + t * kv_dim, kv_dim * sizeof(float));
        memcpy(c->vc[l] + (size_t)slot * kv_dim, c->v + t * kv_dim, kv_dim * sizeof(float));
    }
    if (m->h.attn_gate)
        for (size_t i = 0; i < n_tok * q_dim; i++)
            c->ao[i] *= ml__sigmoid(c->g[i]);
    observe(c, ML_MLI_WO_IN, l, c->ao, n_tok, q_dim);
    quantize(c, c->ao, n_tok, q_dim);
    matmul(c, &L->wo, n_tok, c->o, m->h.dim);
}

/* ---------------------------------------------------------------------------
 * Linear attention: the projections here, the gated delta rule in
 * linear_attn.c
 * ------------------------------------------------------------------------- */

static void linear_attention(ml_ctx *c, uint32_t l, size_t n_tok)
{
    const ml_model *m = c->m;
    const ml_layer *L = &m->layers[l];
    const ml_mlb_header *h = &m->h;
    uint32_t V = h->lin_v_heads;
    observe(c, ML_MLI_ATTN_IN, l, c->xb, n_tok, h->dim);
    quantize(c, c->xb, n_tok, h->dim);
    const ml_mat *ws[] = {&L->lqkv, &L->lz, &L->lb, &L->la};
    float *ys[] = {c->lqkv, c->lz, c->lba, c->lba + V};
    const size_t ld[] = {m->d.lin_qkv, m->d.lin_vd, 2 * V, 2 * V};
    matmuls(c, n_tok, 4, ws, ys, ld);
    ml__lin_forward(c->lin[l], c->pool, c->pos, n_tok, c->lqkv, c->lz, c->lba, c->lo);
    if (m->d.lin_vd <= m->d.q_dim) /* mli(5): lout's input in the wo slot */
        observe(c, ML_MLI_WO_IN, l, c->lo, n_tok, m->d.lin_vd);
    quantize(c, c->lo, n_tok, m->d.lin_vd);
    matmul(c, &L->lout, n_tok, c->o, h->dim);
}

static void ffn(ml_ctx *c, uint32_t l, size_t n_tok)
{
    const ml_model *m = c->m;
    const ml_layer *L = &m->layers[l];
    uint32_t hidden = m->h.hidden_dim;
    observe(c, ML_MLI_FFN_IN, l, c->xb, n_tok, m->h.dim);
    quantize(c, c->xb, n_tok, m->h.dim);
    const ml_mat *ws[] = {&L->w1, &L->w3};
    float *ys[] = {c->hb, c->hb2};
    const size_t ld[] = {hidden, hidden};
    matmuls(c, n_tok, 2, ws, ys, ld);
    act_quantize(c, c->hb, c->hb2, n_tok * hidden);
    observe(c, ML_MLI_W2_IN, l, c->hb, n_tok, hidden);
    matmul(c, &L->w2, n_tok, c->o, m->h.dim);
}

/* Between two blocks, per token: x += o after o's optional post-norm
 * (with `add`), then xb = RMSNorm(x) with `norm` (when not NULL).  Tokens
 * are independent, so a batch splits over the pool (serial, the norms
 * were 3% of prefill); one token stays on the calling thread. */
typedef struct edge_job {
    ml_ctx *c;
    int add;
    const float *post_norm, *norm;
    size_t n_tok;
} edge_job;

static void edge_run(void *ctx, unsigned ith, unsigned nth)
{
    const edge_job *j = ctx;
    const ml_mlb_header *h = &j->c->m->h;
    const uint32_t dim = h->dim;
    size_t b, e;
    ml__pool_split(j->n_tok, 1, ith, nth, &b, &e);
    for (size_t t = b; t < e; t++) {
        float *o = j->c->o + t * dim, *x = j->c->x + t * dim;
        if (j->add && j->post_norm)
            ml__rmsnorm(o, o, j->post_norm, dim, h->norm_eps);
        if (j->add)
            for (uint32_t i = 0; i < dim; i++)
                x[i] += o[i];
        if (j->norm)
            ml__rmsnorm(j->c->xb + t * dim, x, j->norm, dim, h->norm_eps);
    }
}

static void block_edge(ml_ctx *c, int add, const float *post_norm, const float *norm,
                       size_t n_tok)
{
    edge_job j = {c, add, post_norm, norm, n_tok};
    if (n_tok > 1)
        ml__pool_run(c->pool, edge_run, &j);
    else
        edge_run(&j, 0, 1);
}

/* Scale i of a matrix as f32. */
static float mat_scale(const ml_mat *w, size_t i)
{
    return w->d.f16 ? ml_f16_to_f32(((const uint16_t *)w->d.p)[i]) : ((const float *)w->d.p)[i];
}

/* Row `id` of the embedding, dequantized and scaled. */
static void embed(const ml_model *m, int32_t id, float *x)
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

/* One batch of n_tok <= n_batch tokens at c->pos. */
static void eval_batch(ml_ctx *c, const int32_t *tokens, size_t n_tok, float *logits, int all)
{
    const ml_model *m = c->m;
    uint32_t dim = m->h.dim;
    float eps = m->h.norm_eps;
    for (size_t t = 0; t < n_tok; t++)
        embed(m, tokens[t], c->x + t * dim);
    for (uint32_t l = 0; l < m->h.n_layers; l++) {
        const ml_layer *L = &m->layers[l];
        block_edge(c, l > 0, l > 0 ? m->layers[l - 1].post_ffn_norm : NULL, L->attn_norm, n_tok);
        if (L->flags & ML_LAYER_LINEAR)
            linear_attention(c, l, n_tok);
        else
            attention(c, l, n_tok);
        block_edge(c, 1, L->post_attn_norm, L->ffn_norm, n_tok);
        ffn(c, l, n_tok);
    }
    block_edge(c, 1, m->layers[m->h.n_layers - 1].post_ffn_norm, NULL, n_tok);
    c->pos += (uint32_t)n_tok;
    size_t first = all ? 0 : n_tok - 1, n_out = logits ? n_tok - first : 0;
    if (c->imatrix)
        ml__mli_count(c->imatrix, n_tok, n_out);
    if (!logits)
        return;
    for (size_t t = first; t < n_tok; t++)
        ml__rmsnorm(c->xb + (t - first) * dim, c->x + t * dim, m->final_norm, dim, eps);
    observe(c, ML_MLI_CLS_IN, 0, c->xb, n_out, dim);
    quantize(c, c->xb, n_out, dim);
    matmul(c, &m->wcls, n_out, logits, m->h.vocab);
    if (m->h.final_softcap > 0)
        for (size_t i = 0; i < n_out * m->h.vocab; i++)
            logits[i] = softcap(logits[i], m->h.final_softcap);
}

ml_status ml_ctx_eval(ml_ctx *c, const int32_t *tokens, size_t n, float *logits, int all_logits,
                      ml_error *err)
{
    const ml_model *m = c->m;
    if (n > c->n_ctx - c->pos)
        return ml__err(err, ML_E_INVAL, "", -1,
                       "%zu tokens do not fit: the context holds %u positions and %u are used",
                       n, c->n_ctx, c->pos);
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= m->h.vocab)
            return ml__err(err, ML_E_INVAL, "", -1, "token %zu: id %d is outside 0..%u", i,
                           tokens[i], m->h.vocab - 1);
    for (size_t done = 0; done < n;) {
        size_t b = n - done < c->n_batch ? n - done : c->n_batch;
        int last = done + b == n;
        float *out = logits && (all_logits || last)
                         ? logits + (all_logits ? done * m->h.vocab : 0)
                         : NULL;
        eval_batch(c, tokens + done, b, out, all_logits);
        done += b;
    }
    return ML_OK;
}

/* ---------------------------------------------------------------------------
 * Context lifetime
 * ------------------------------------------------------------------------- */

static size_t max3(size_t a, size_t b, size_t c)
{
    size_t m = a > b ? a : b;
    return m > c ? m : c;
}

/* Scratch layout: every buffer 64-byte aligned inside one allocation. */
static ml_status alloc_scratch(ml_ctx *c, unsigned n_threads, ml_error *err)
{
    const ml_model *m = c->m;
    size_t B = c->n_batch, dim = m->h.dim, q_dim = m->d.q_dim, kv = m->d.kv_dim;
    size_t hid = m->h.hidden_dim, in = max3(dim, q_dim, hid);
    size_t lq = m->d.lin_qkv, lvd = m->d.lin_vd, lv = m->h.lin_v_heads;
    if (lvd > in)
        in = lvd;
    size_t att;
    if (ml__to_size((uint64_t)n_threads * att_rows(m) * c->n_ctx * 4, &att))
        return ml__err(err, ML_E_NOMEM, "", -1, "scratch size overflows");
    struct { void **p; size_t bytes; } parts[] = {
        {(void **)&c->x, B * dim * 4},   {(void **)&c->xb, B * dim * 4},
        {(void **)&c->q, B * q_dim * 4}, {(void **)&c->k, B * kv * 4},
        {(void **)&c->v, B * kv * 4},    {(void **)&c->ao, B * q_dim * 4},
        {(void **)&c->g, B * q_dim * 4}, {(void **)&c->hb, B * hid * 4},
        {(void **)&c->hb2, B * hid * 4}, {(void **)&c->o, B * dim * 4},
        {(void **)&c->aq, B * in},       {(void **)&c->ad, B * (in / 32) * 4},
        {(void **)&c->att, att},
        {(void **)&c->rope_cs, (size_t)n_threads * m->d.rot_dim * 4},
        {(void **)&c->lqkv, B * lq * 4}, {(void **)&c->lz, B * lvd * 4},
        {(void **)&c->lba, B * 2 * lv * 4}, {(void **)&c->lo, B * lvd * 4},
    };
    uint64_t total = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        uint64_t a;
        if (ml__align_up(parts[i].bytes, 64, &a) || ml__add64(total, a, &total))
            return ml__err(err, ML_E_NOMEM, "", -1, "scratch size overflows");
    }
    size_t bytes;
    if (ml__to_size(total, &bytes) || posix_memalign(&c->scratch, 64, bytes))
        return ml__err(err, ML_E_NOMEM, "", -1, "cannot allocate %llu bytes of scratch memory",
                       (unsigned long long)total);
    uint8_t *p = c->scratch;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        *parts[i].p = p;
        p += (parts[i].bytes + 63) & ~(size_t)63;
    }
    c->scratch_bytes += total; /* the linear layers' chunk memory is counted already */
    return ML_OK;
}

/* A linear-attention layer's memory: the state mlb(5) counts (`bytes`)
 * plus the chunk memory, which counts as scratch. */
static ml_status alloc_linear(ml_ctx *c, uint32_t l, uint64_t bytes, ml_error *err)
{
    uint64_t state, chunk;
    ml_status s = ml__lin_new(&c->m->h, &c->m->layers[l], c->m->k, ml__pool_size(c->pool),
                              &c->lin[l], &state, &chunk, err);
    if (s)
        return s;
    if (state != bytes) /* cannot happen: both follow mlb(5) */
        return ml__err(err, ML_E_NOMEM, "", -1, "layer %u: a state of %llu bytes, not %llu", l,
                       (unsigned long long)state, (unsigned long long)bytes);
    c->state_bytes += bytes;
    c->scratch_bytes += chunk;
    return ML_OK;
}

static ml_status alloc_cache(ml_ctx *c, ml_error *err)
{
    const ml_model *m = c->m;
    uint32_t n = m->h.n_layers;
    c->kc = calloc(n, sizeof *c->kc);
    c->vc = calloc(n, sizeof *c->vc);
    c->cap = calloc(n, sizeof *c->cap);
    c->lin = calloc(n, sizeof *c->lin);
    if (!c->kc || !c->vc || !c->cap || !c->lin)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    for (uint32_t l = 0; l < n; l++) {
        const ml_layer *L = &m->layers[l];
        uint64_t bytes = ml_mlb_layer_state_bytes(&m->h, L->flags, c->n_ctx);
        if (L->flags & ML_LAYER_LINEAR) {
            ml_status s = alloc_linear(c, l, bytes, err);
            if (s)
                return s;
            continue;
        }
        size_t half;
        c->cap[l] = L->sliding && m->h.sliding_window < c->n_ctx ? m->h.sliding_window : c->n_ctx;
        if (bytes == UINT64_MAX || ml__to_size(bytes / 2, &half))
            return ml__err(err, ML_E_NOMEM, "", -1, "the cache of layer %u does not fit in memory",
                           l);
        c->kc[l] = malloc(half ? half : 1);
        c->vc[l] = malloc(half ? half : 1);
        if (!c->kc[l] || !c->vc[l])
            return ml__err(err, ML_E_NOMEM, "", -1,
                           "cannot allocate %llu bytes for the cache of layer %u (context %u); "
                           "try a smaller context",
                           (unsigned long long)bytes, l, c->n_ctx);
        c->state_bytes += bytes;
    }
    return ML_OK;
}

ml_status ml_ctx_new(const ml_model *m, const ml_ctx_params *p, ml_ctx **out, ml_error *err)
{
    *out = NULL;
    ml_ctx_params def = {0, 0, 0};
    if (!p)
        p = &def;
    uint32_t n_ctx = p->n_ctx ? p->n_ctx : m->h.max_seq;
    if (n_ctx > m->h.max_seq)
        return ml__err(err, ML_E_INVAL, "max_seq", 32, "a context of %u is above the model's %u",
                       n_ctx, m->h.max_seq);
    ml_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    c->m = m;
    c->n_ctx = n_ctx;
    c->n_batch = p->n_batch ? p->n_batch : 64;
    unsigned nt = p->n_threads ? p->n_threads : 1;
    ml_status s = ml__pool_new(nt, &c->pool, err);
    if (!s)
        s = alloc_cache(c, err);
    if (!s)
        s = alloc_scratch(c, nt, err);
    if (s) {
        ml_ctx_free(c);
        return s;
    }
    *out = c;
    return ML_OK;
}

void ml_ctx_free(ml_ctx *c)
{
    if (!c)
        return;
    for (uint32_t l = 0; c->kc && c->lin && l < c->m->h.n_layers; l++) {
        free(c->kc[l]);
        free(c->vc[l]);
        ml__lin_free(c->lin[l]);
    }
    free(c->kc);
    free(c->vc);
    free(c->lin);
    free(c->cap);
    free(c->scratch);
    ml__pool_free(c->pool);
    free(c);
}

uint64_t ml_ctx_state_bytes(const ml_ctx *c)
{
    return c->state_bytes;
}

uint64_t ml_ctx_scratch_bytes(const ml_ctx *c)
{
    return c->scratch_bytes;
}

uint32_t ml_ctx_pos(const ml_ctx *c)
{
    return c->pos;
}

uint32_t ml_ctx_n_ctx(const ml_ctx *c)
{
    return c->n_ctx;
}

void ml_ctx_reset(ml_ctx *c)
{
    c->pos = 0;
    for (uint32_t l = 0; l < c->m->h.n_layers; l++) /* recurrent state starts at zero */
        if (c->lin[l])
            ml__lin_reset(c->lin[l]);
}

ml_status ml_ctx_set_imatrix(ml_ctx *c, ml_mli *imatrix, ml_error *err)
{
    if (imatrix) {
        ml_status s = ml_mli_check_model(imatrix, &c->m->h, err);
        if (s)
            return s;
    }
    c->imatrix = imatrix;
    return ML_OK;
}

uint32_t ml_ctx_n_batch(const ml_ctx *c)
{
    return c->n_batch;
}

const ml_model *ml_ctx_model(const ml_ctx *c)
{
    return c->m;
}
