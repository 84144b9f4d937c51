/* parallel.c - how the forward pass's work is spread over the thread
 * pool: matrix products (several on one input in one job, threads
 * stealing rows from each other), activation quantizing, and independent
 * work items.  Only the sharing is decided here, never the order of a
 * sum: every result is the same on any number of threads. */
#include "kernels/fmath.h"
#include "runtime/ctx.h"

#include <stdatomic.h>
#include <stdlib.h>

/* ---------------------------------------------------------------------------
 * Matrix products
 *
 * One pool job for up to ML_MM_PARTS matrices that read the same quantized
 * input (q, k, v and gate; w1 and w3), so they cost one dispatch and one
 * wait.  Equal shares of rows do not take equal times: decode is bound
 * by memory, which the threads do not get in equal measure, and prefill
 * by processors that neighbours slow unevenly.  So each thread does most
 * of its share in one go and then the threads steal chunks from the ends
 * of each other's shares (mm_run_steal).  Measured on 2 threads against
 * even shares, decode and prefill were both faster on the bench models
 * (pp512, the two ways alternating in one process; figures in
 * docs/speed-history.md).  (Claiming every chunk from one shared
 * counter was slower than even shares: the streams broke at every
 * chunk.)  Rows are independent, so no split changes a bit of the
 * result.
 * ------------------------------------------------------------------------- */

#define MM_STEAL_MAX 16

typedef struct mm_part {
    const ml_mat *w;
    float *y;
    size_t ldy;
    size_t x_off; /* where its input starts in the quantized rows (ml__matvecs_at) */
} mm_part;

typedef struct mm_job {
    const ml_kernels *k;
    const int8_t *xq;
    const float *xd;
    const int8_t *kq;                      /* the K activations (kernels.h's rule 6) */
    const float *kd;
    size_t n_tok;
    const void *xt;                        /* the input rearranged, or NULL: */
    int xt_blk;                            /* by matmul_blk_x, for xt_type weights */
    ml_type xt_type;                       /* (1), or by matmul_x (0) */
    int xt_q4;                             /* matmul_x's: for Q4_0 weights (1) or Q8_0 */
    size_t xt_cols;                        /* of rows this long */
    mm_part part[ML_MM_PARTS];
    unsigned n_parts;
    /* Stealing, on 2 to MM_STEAL_MAX threads: */
    int steal;
    size_t total, chunk;                   /* rows of all parts; rows per stolen chunk */
    _Atomic uint64_t span[MM_STEAL_MAX];   /* each thread's remaining rows */
} mm_job;

/* Q5_0, IQ4_NL and MXFP4 weights from MM_AS_Q8_MIN_TOK tokens on go to
 * the Q8_0 products, MM_AS_Q8_ROWS rows at a time unpacked by
 * blk_to_q8_0 (kernels.h: the same bits, and the unpacking is paid once
 * for all tokens). */
#define MM_AS_Q8_MIN_TOK 4
#define MM_AS_Q8_ROWS 64

/* 0 when out of memory (the caller then takes matmul_blk). */
static int mm_rows_as_q8_0(const mm_job *j, const mm_part *p, size_t b, size_t e)
{
    const ml_mat *w = p->w;
    const size_t cols = w->cols, n = e - b < MM_AS_Q8_ROWS ? e - b : MM_AS_Q8_ROWS;
    int8_t *q = malloc(n * cols + n * (cols / 32) * sizeof(float));
    if (!q)
        return 0;
    float *d = (float *)(q + n * cols);
    const ml_wscales wd = {d, 0};
    for (size_t r = b; r < e; r += n) {
        const size_t m = e - r < n ? e - r : n;
        j->k->blk_to_q8_0(w->type, w->q, cols, r, r + m, q, d);
        if (j->xt && !j->xt_blk && !j->xt_q4 && cols == j->xt_cols)
            j->k->matmul_x[0].run(0, q, wd, cols, 0, m, j->xq, j->xt, j->xd, j->n_tok, p->y + r,
                                  p->ldy);
        else
            j->k->matmul_q8_0(q, wd, cols, 0, m, j->xq, j->xd, j->n_tok, p->y + r, p->ldy);
    }
    free(q);
    return 1;
}

static void mm_rows(const mm_job *j, const mm_part *p, size_t b, size_t e)
{
    const ml_mat *w = p->w;
    const int q4 = w->type == ML_TYPE_Q4_0;
    const int8_t *aq = j->xq + p->x_off;
    const float *ad = j->xd + p->x_off / 32;
    if (!ml__mat_spec(w)) {
        if (ml__blk_as_q8_0(w->type) && j->n_tok >= MM_AS_Q8_MIN_TOK &&
            mm_rows_as_q8_0(j, p, b, e))
            return;
        const int k = ml__mat_acts(w) == ML_ACTS_K;
        const int8_t *xq = k ? j->kq + p->x_off : aq;
        const float *xd = k ? j->kd + p->x_off / 256 : ad;
        if (j->n_tok == 1)
            j->k->matvec_blk(w->type, w->q, w->cols, b, e, xq, xd, p->y);
        else if (j->xt && j->xt_blk && w->type == j->xt_type && w->cols == j->xt_cols)
            j->k->matmul_blk_x.run(w->type, w->q, w->cols, b, e, xq, xd, j->xt, j->n_tok, p->y,
                                   p->ldy);
        else
            j->k->matmul_blk(w->type, w->q, w->cols, b, e, xq, xd, j->n_tok, p->y, p->ldy);
        return;
    }
    if (j->xt && !j->xt_blk && q4 == j->xt_q4 && w->cols == j->xt_cols) {
        j->k->matmul_x[q4].run(q4, w->q, w->d, w->cols, b, e, j->xq, j->xt, j->xd, j->n_tok,
                               p->y, p->ldy);
        return;
    }
    if (!q4) {
        if (j->n_tok == 1)
            j->k->matvec_q8_0(w->q, w->d, w->cols, b, e, aq, ad, p->y);
        else
            j->k->matmul_q8_0(w->q, w->d, w->cols, b, e, aq, ad, j->n_tok, p->y, p->ldy);
    } else {
        if (j->n_tok == 1)
            j->k->matvec_q4_0(w->q, w->d, w->cols, b, e, aq, ad, p->y);
        else
            j->k->matmul_q4_0(w->q, w->d, w->cols, b, e, aq, ad, j->n_tok, p->y, p->ldy);
    }
}

/* Rows [g0, g1) of the parts laid end to end. */
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

/* Thread i owns an equal share of the rows; it takes most of its share in
 * one claim from the front (one stream, one kernel call), then the rest
 * in chunks; a thread that is done takes chunks from the back of the
 * others' shares.  Memory bandwidth is shared unevenly between threads,
 * and a static split made each wait for the slower one at every
 * product. */
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

/* The kernels' rearranged form of the activations (matmul_x, and
 * matmul_blk_x for block types), made once by all threads for every part
 * of a job, where a product's every call would make its own: for Gemma
 * 3's 640-column products at a batch of 512, 442 KB a call, each thread
 * making it for each of its calls (the parts it spans and the chunks it
 * steals), a measurable share of a prompt; for the K-quants' lanes about
 * a tenth of it. */
typedef struct x_job {
    const ml_kernels *k;
    int blk, q4;
    ml_type t;
    const int8_t *xq;
    const float *xd;
    size_t cols, n_tok;
    void *xt;
} x_job;

static void x_run(void *ctx, unsigned ith, unsigned nth)
{
    const x_job *j = ctx;
    if (j->blk)
        j->k->matmul_blk_x.prepare(j->t, j->xq, j->xd, j->cols, j->n_tok, ith, nth, j->xt);
    else
        j->k->matmul_x[j->q4].prepare(j->q4, j->xq, j->cols, j->n_tok, ith, nth, j->xt);
}

/* The block-type weights' side of prepare_input: K activations for the
 * types that take them. */
static size_t prepare_blk(mm_job *j, const ml_mat *w, x_job *x)
{
    const ml_matmul_blk_x *bx = &j->k->matmul_blk_x;
    if (!bx->bytes || j->n_tok < 2)
        return 0;
    const int k = ml__mat_acts(w) == ML_ACTS_K;
    j->xt_blk = 1;
    j->xt_type = w->type;
    *x = (x_job){j->k, 1, 0, w->type, k ? j->kq : j->xq, k ? j->kd : j->xd, w->cols, j->n_tok,
                 NULL};
    return bx->bytes(w->type, w->cols, j->n_tok);
}

/* Rearranges the job's input for weights of w's type and length into
 * c->mm_x (sized for a full batch of the longest input by ctx.c); xt
 * stays NULL when the kernels have no such step for these tokens (each
 * call then reads aq). */
static void prepare_input(ml_ctx *c, mm_job *j, const ml_mat *w)
{
    x_job x;
    size_t bytes;
    if (!ml__mat_spec(w) && !(ml__blk_as_q8_0(w->type) && j->n_tok >= MM_AS_Q8_MIN_TOK)) {
        bytes = prepare_blk(j, w, &x);
    } else { /* matmul_x serves Q8_0 and Q4_0 weights (and those unpacked to Q8_0) */
        j->xt_q4 = w->type == ML_TYPE_Q4_0;
        const ml_matmul_x *mx = &j->k->matmul_x[j->xt_q4];
        bytes = mx->bytes ? mx->bytes(j->xt_q4, w->cols, j->n_tok) : 0;
        x = (x_job){j->k, 0, j->xt_q4, w->type, j->xq, j->xd, w->cols, j->n_tok, NULL};
    }
    j->xt_cols = w->cols;
    if (bytes == 0 || bytes > c->mm_x_cap)
        return;
    x.xt = c->mm_x;
    ml__pool_run(c->pool, x_run, &x);
    j->xt = c->mm_x;
}

/* Runs a job whose parts are set: rows shared as mm_run_steal says. */
static void mm_start(ml_ctx *c, mm_job *j)
{
    unsigned nth = ml__pool_size(c->pool);
    j->steal = nth > 1 && nth <= MM_STEAL_MAX && j->total < UINT32_MAX;
    if (j->steal) {
        j->chunk = j->total / ((size_t)nth * 32);
        j->chunk = j->chunk < 8 ? 8 : (j->chunk + 7) / 8 * 8;
        for (unsigned t = 0; t < nth; t++) {
            size_t b, e;
            ml__pool_split(j->total, 8, t, nth, &b, &e);
            atomic_init(&j->span[t], span_pack(b, e));
        }
    }
    ml__pool_run(c->pool, mm_run, j);
}

void ml__matmuls(ml_ctx *c, size_t n_tok, unsigned n, const ml_mat *const *ws,
                 float *const *ys, const size_t *ldys)
{
    mm_job j = {.k = c->m->k, .xq = c->aq, .xd = c->ad, .kq = c->kq, .kd = c->kd,
                .n_tok = n_tok, .n_parts = n};
    /* one input, so every part has its columns; one type in every model
     * we know (a part of another type or length rearranges for itself) */
    prepare_input(c, &j, ws[0]);
    for (unsigned i = 0; i < n; i++) {
        j.part[i] = (mm_part){ws[i], ys[i], ldys[i], 0};
        j.total += ws[i]->rows;
    }
    mm_start(c, &j);
}

void ml__matvecs_at(ml_ctx *c, unsigned n, const ml_mat *const *ws, float *const *ys,
                    const size_t *x_rows)
{
    /* no rearranged input (matmul_x): it would be one input for all */
    mm_job j = {.k = c->m->k, .xq = c->aq, .xd = c->ad, .kq = c->kq, .kd = c->kd,
                .n_tok = 1, .n_parts = n};
    for (unsigned i = 0; i < n; i++) {
        j.part[i] = (mm_part){ws[i], ys[i], ws[i]->rows, x_rows[i] * ws[i]->cols};
        j.total += ws[i]->rows;
    }
    mm_start(c, &j);
}

void ml__matmul(ml_ctx *c, const ml_mat *w, size_t n_tok, float *y, size_t ldy)
{
    ml__matmuls(c, n_tok, 1, &w, &y, &ldy);
}

/* ---------------------------------------------------------------------------
 * Activations
 *
 * Quantizing n_tok rows of n floats (stride n) is quantizing n_tok·n
 * consecutive floats: Q8_0 blocks are independent.  So is the gated FFN's
 * product.  The pool splits both over blocks of 32 when the work outweighs
 * a dispatch (a few microseconds): Gemma's GELU over a batch is a third of
 * a layer's time when serial.
 * ------------------------------------------------------------------------- */

#define ACT_POOL_MIN 8192

typedef struct act_job {
    ml_ctx *c;
    float *x;
    const float *gate; /* x = act(x) · gate first, or NULL */
    size_t n;          /* floats, whole rows */
    uint32_t row;      /* floats a row */
} act_job;

/* Floats per step of act_run: the product is quantized while it is in
 * the L1 cache (a batch's FFN rows are megabytes). */
#define ACT_CHUNK 2048

/* gpt-oss's clamped SwiGLU (mlb(5) act 2), for c < n: g = min(x[c],
 * limit), u = clamp(up[c], -limit, limit), x[c] = g / (1 + exp(-alpha g))
 * · (u + 1), llama.cpp's operations in its order.  Scalar in every kernel
 * variant (libm's expf), so the same bits everywhere. */
static void swiglu_clamp(float *x, const float *up, size_t n, float alpha, float limit)
{
    for (size_t c = 0; c < n; c++) {
        float g = limit < x[c] ? limit : x[c]; /* NaN stays NaN */
        float u = up[c] > limit ? limit : up[c] < -limit ? -limit : up[c];
        x[c] = g / (1.0f + expf(-alpha * g)) * (u + 1.0f);
    }
}

static void act_run(void *ctx, unsigned ith, unsigned nth)
{
    const act_job *j = ctx;
    const ml_model *m = j->c->m;
    size_t b, e;
    ml__pool_split(j->n, j->row % 256 ? 32 : 256, ith, nth, &b, &e);
    for (size_t c0 = b, c1; c0 < e; c0 = c1) {
        c1 = e - c0 < ACT_CHUNK ? e : c0 + ACT_CHUNK;
        if (j->gate && m->h.act == ML_ACT_SWIGLU_CLAMP)
            swiglu_clamp(j->x + c0, j->gate + c0, c1 - c0, m->h.swiglu_alpha, m->h.swiglu_limit);
        else if (j->gate)
            m->k->fmath->glu(j->x + c0, j->gate + c0, c1 - c0, m->h.act == ML_ACT_GELU_TANH);
        ml__quantize_rows(j->c, j->x + c0, c0, c1 - c0, j->row);
    }
}

void ml__quantize_rows(ml_ctx *c, const float *x, size_t off, size_t n, uint32_t row)
{
    const ml_model *m = c->m;
    if (m->acts & ML_ACTS_Q8)
        m->k->quantize_q8_0(x, n, c->aq + off, c->ad + off / 32);
    /* a row that is no whole number of 256s is no K-type product's input */
    if ((m->acts & ML_ACTS_K) && row % 256 == 0)
        m->k->quantize_q8_k(x, n, c->kq + off, c->kd + off / 256);
}

void ml__glu_quantize(ml_ctx *c, float *x, const float *gate, size_t n_tok, uint32_t n)
{
    act_job j = {c, x, gate, n_tok * n, n};
    if (j.n >= ACT_POOL_MIN)
        ml__pool_run(c->pool, act_run, &j);
    else
        act_run(&j, 0, 1);
}

void ml__quantize(ml_ctx *c, float *x, size_t n_tok, uint32_t n)
{
    ml__glu_quantize(c, x, NULL, n_tok, n);
}

/* ---------------------------------------------------------------------------
 * Independent work items
 * ------------------------------------------------------------------------- */

typedef struct items_job {
    size_t n;
    ml_items_fn fn;
    void *arg;
} items_job;

static void items_run(void *ctx, unsigned ith, unsigned nth)
{
    const items_job *j = ctx;
    size_t b, e;
    ml__pool_split(j->n, 1, ith, nth, &b, &e);
    if (b < e)
        j->fn(j->arg, b, e, ith);
}

void ml__parallel(ml_ctx *c, size_t n_items, ml_items_fn fn, void *arg)
{
    if (n_items == 1) {
        fn(arg, 0, 1, 0);
        return;
    }
    items_job j = {n_items, fn, arg};
    ml__pool_run(c->pool, items_run, &j);
}

/* Items of unequal cost, claimed one at a time from a shared counter,
 * the last (dearest, for the callers) first. */
typedef struct claim_job {
    size_t n;
    ml_items_fn fn;
    void *arg;
    atomic_size_t next;
} claim_job;

static void claim_run(void *ctx, unsigned ith, unsigned nth)
{
    (void)nth;
    claim_job *j = ctx;
    for (size_t k; (k = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed)) < j->n;)
        j->fn(j->arg, j->n - 1 - k, j->n - k, ith);
}

void ml__parallel_claim(ml_ctx *c, size_t n_items, ml_items_fn fn, void *arg)
{
    if (n_items == 1) {
        fn(arg, 0, 1, 0);
        return;
    }
    claim_job j = {n_items, fn, arg, 0};
    ml__pool_run(c->pool, claim_run, &j);
}
