/* linear_attn.c - the gated delta rule of mlb(5)'s linear-attention layers
 * (Qwen3.5), computed chunk by chunk.
 *
 * Per value head, with decay a_t = exp(g_t), the spec's recurrence is
 *     u_t = β_t (v_t − a_t S_{t−1}ᵀ k_t),   S_t = a_t S_{t−1} + k_t u_tᵀ,
 *     o_t = S_tᵀ q_t.
 * Unrolled from the state S_0 at the start of a chunk, with the cumulative
 * log decay G_t = Σ_{s≤t} g_s inside the chunk:
 *     u_t = β_t (v_t − e^{G_t} S_0ᵀ k_t − Σ_{j<t} e^{G_t−G_j} (k_t·k_j) u_j)
 *     o_t = e^{G_t} S_0ᵀ q_t + Σ_{j≤t} e^{G_t−G_j} (q_t·k_j) u_j
 *     S_C = e^{G_C} S_0 + Σ_j e^{G_C−G_j} k_j u_jᵀ          (chunk end)
 * This is the WY/UT form of chunked delta-rule implementations, with the
 * triangular system for u solved by forward substitution instead of an
 * explicit inverse: the products with S_0 are matrix products over a block
 * of tokens, the intra-chunk terms cost O(C) per token, and the state is
 * touched once per block and once per chunk instead of four times per
 * token.  Decode (one token) uses the same formulas.
 *
 * Chunks start at absolute positions (multiples of ML_LIN_CHUNK), and every
 * sum runs in one fixed order (fmath.h's products, the same bits on every
 * CPU), so a position's output does not depend on the batch that brought
 * it, on the thread count or on the CPU.  Decays are summed and
 * exponentiated in double: e^{G_t−G_j} is never formed as a quotient, so a
 * decay of 0 gives 0, not 0/0.  The convolution history is a ring indexed
 * by position, so nothing shifts from token to token. */
#include "runtime/linear_attn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CH ML_LIN_CHUNK
#define NB 8    /* tokens per block of the S_0ᵀk, S_0ᵀq products */
#define ROWS 32 /* rows of S per product at the chunk end */

/* A log decay below -G_FLOOR is taken as -G_FLOOR: e^{-1000} is already 0
 * in double, and the floor keeps G finite when a decay is exactly 0. */
#define G_FLOOR 1000.0

/* One thread's scratch for one value head. */
typedef struct lin_scratch {
    double *e;             /* (CH) e^{G_t−G_j} */
    const float **krow;    /* (CH) the chunk's key rows, cached or in the batch */
    float *w, *y;          /* (NB, dv) S_0ᵀk and S_0ᵀq of a block */
    float *beta;           /* (CH) β of the segment's tokens */
    float *coef;           /* (2, CH) one token's e^{G_t−G_j} (k·k_j), then (q·k_j) */
    float *kd;             /* (2·NB, CH) a block's k_t·k_j, then its q_t·k_j */
    float *acc;            /* (max(dk, dv)) convolution sums of one head */
    float *cf;             /* (ROWS, CH) e^{G_C−G_j} k_j[r] for a group of S's rows */
} lin_scratch;

struct ml_lin_layer {
    uint32_t K, V, dk, dv, taps, n_qkv, n_vd;
    float eps;
    const ml_fmath *fm;
    float *S;              /* (V, dk, dv) state at the start of the current chunk */
    float *hist;           /* (taps − 1, n_qkv) last conv inputs: position P in row P % (taps−1) */
    float *wT;             /* (taps, n_qkv) lconv transposed: tap-major */
    const ml_layer *L;     /* lconv, dt_bias, A_log, lnorm */
    float *keys;           /* (CH, K, dk) the current chunk's normalized keys */
    float *u;              /* (V, CH, dv) the current chunk's delta values */
    double *G;             /* (V, CH) cumulative log decay since the chunk start */
    size_t state_floats, hist_floats;
    unsigned n_threads;
    lin_scratch *ts;       /* (n_threads) */
    void *ts_mem;
};

/* ---------------------------------------------------------------------------
 * Small float operations (SiLU, RMSNorm and the sigmoid are fmath.h's)
 * ------------------------------------------------------------------------- */

/* x / sqrt(sum x^2 + 1e-6), times `scale`. */
static void l2norm(float *x, uint32_t n, float scale)
{
    double ss = 0;
    for (uint32_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(ss + 1e-6)) * scale;
    for (uint32_t i = 0; i < n; i++)
        x[i] *= inv;
}

/* ---------------------------------------------------------------------------
 * Memory
 * ------------------------------------------------------------------------- */

/* n items of `size` bytes, zeroed, counted into *total; NULL on overflow. */
static void *alloc_counted(uint64_t n, uint64_t size, uint64_t *total)
{
    uint64_t bytes;
    size_t sz;
    if (ml__mul64(n, size, &bytes) || ml__add64(*total, bytes, total) || ml__to_size(bytes, &sz))
        return NULL;
    return calloc(1, sz ? sz : 1);
}

/* Per-thread scratch, in one block: e (doubles first, for alignment), krow,
 * then the floats. */
static int alloc_threads(ml_lin_layer *s, uint64_t *total)
{
    uint64_t wmax = s->dk > s->dv ? s->dk : s->dv;
    uint64_t floats = 2 * (uint64_t)NB * s->dv + 3 * CH + ROWS * CH + 2 * NB * CH + wmax;
    uint64_t per = floats * sizeof(float) + CH * sizeof(double) + CH * sizeof(float *);
    per = (per + 63) & ~(uint64_t)63;
    s->ts = alloc_counted(s->n_threads, sizeof *s->ts, total);
    s->ts_mem = alloc_counted(s->n_threads, per, total);
    if (!s->ts || !s->ts_mem)
        return -1;
    for (unsigned i = 0; i < s->n_threads; i++) {
        uint8_t *p = (uint8_t *)s->ts_mem + i * (size_t)per;
        lin_scratch *t = &s->ts[i];
        t->e = (double *)p;
        t->krow = (const float **)(p + CH * sizeof(double));
        t->w = (float *)(p + CH * (sizeof(double) + sizeof(float *)));
        t->y = t->w + (size_t)NB * s->dv;
        t->beta = t->y + (size_t)NB * s->dv;
        t->coef = t->beta + CH;
        t->cf = t->coef + 2 * CH;
        t->kd = t->cf + ROWS * CH;
        t->acc = t->kd + 2 * NB * CH;
    }
    return 0;
}

ml_status ml__lin_new(const ml_mlb_header *h, const ml_layer *L, const ml_kernels *k,
                      unsigned n_threads, ml_lin_layer **out, uint64_t *state_bytes,
                      uint64_t *chunk_bytes, ml_error *err)
{
    *out = NULL;
    ml_lin_layer *s = calloc(1, sizeof *s);
    if (!s)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    s->K = h->lin_k_heads, s->V = h->lin_v_heads, s->dk = h->lin_k_dim, s->dv = h->lin_v_dim;
    s->taps = h->lin_conv, s->eps = h->norm_eps, s->fm = k->fmath, s->L = L;
    s->n_qkv = 2 * s->K * s->dk + s->V * s->dv, s->n_vd = s->V * s->dv;
    s->n_threads = n_threads ? n_threads : 1;
    uint64_t st = 0, ch = 0, n_state;
    if (ml__mul64((uint64_t)s->V * s->dk, s->dv, &n_state))
        n_state = UINT64_MAX;
    s->S = alloc_counted(n_state, sizeof(float), &st);
    s->hist = alloc_counted((uint64_t)(s->taps - 1) * s->n_qkv, sizeof(float), &st);
    s->keys = alloc_counted((uint64_t)CH * s->K * s->dk, sizeof(float), &ch);
    s->u = alloc_counted((uint64_t)s->V * CH * s->dv, sizeof(float), &ch);
    s->G = alloc_counted((uint64_t)s->V * CH, sizeof(double), &ch);
    s->wT = alloc_counted((uint64_t)s->taps * s->n_qkv, sizeof(float), &ch);
    if (!s->S || !s->hist || !s->keys || !s->u || !s->G || !s->wT || alloc_threads(s, &ch)) {
        ml__lin_free(s);
        return ml__err(err, ML_E_NOMEM, "", -1,
                       "cannot allocate the linear-attention state (%u x %u x %u floats)",
                       h->lin_v_heads, h->lin_k_dim, h->lin_v_dim);
    }
    s->state_floats = (size_t)n_state;
    s->hist_floats = (size_t)(s->taps - 1) * s->n_qkv;
    for (uint32_t c = 0; c < s->n_qkv; c++)
        for (uint32_t i = 0; i < s->taps; i++)
            s->wT[(size_t)i * s->n_qkv + c] = L->lconv[(size_t)c * s->taps + i];
    *state_bytes = st, *chunk_bytes = ch;
    *out = s;
    return ML_OK;
}

void ml__lin_free(ml_lin_layer *s)
{
    if (!s)
        return;
    free(s->S);
    free(s->hist);
    free(s->wT);
    free(s->keys);
    free(s->u);
    free(s->G);
    free(s->ts);
    free(s->ts_mem);
    free(s);
}

void ml__lin_reset(ml_lin_layer *s)
{
    memset(s->S, 0, s->state_floats * sizeof(float));
    memset(s->hist, 0, s->hist_floats * sizeof(float));
}

/* ---------------------------------------------------------------------------
 * Steps 1-2: convolution, SiLU, L2 norms (channels on the pool)
 * ------------------------------------------------------------------------- */

typedef struct lin_job {
    ml_lin_layer *s;
    const ml_layer *L;  /* s->L */
    uint32_t pos;
    size_t n_tok;
    float *qkv;
    const float *z, *ba;
    float *o;
} lin_job;

/* Channels [c0, c0 + w) of every token: the causal convolution over each
 * channel's last `taps` inputs (tap taps-1 is the current one), then SiLU.
 * The history is a ring by position, so nothing shifts. */
static void conv_channels(const lin_job *j, float *acc, uint32_t c0, uint32_t w)
{
    const ml_lin_layer *s = j->s;
    size_t n = s->n_qkv, h = s->taps - 1;
    for (size_t t = 0; t < j->n_tok; t++) {
        size_t P = j->pos + t;
        float *x = j->qkv + t * n + c0;
        memset(acc, 0, w * sizeof(float));
        for (size_t i = 0; i < h; i++) /* tap i: position P - h + i, row (P + i) % h */
            s->fm->madd(acc, s->wT + i * n + c0, s->hist + ((P + i) % h) * n + c0, w);
        s->fm->madd(acc, s->wT + h * n + c0, x, w);
        if (h)
            memcpy(s->hist + (P % h) * n + c0, x, w * sizeof(float));
        s->fm->silu(x, acc, w, 0);
    }
}

/* Work items are heads: K query heads, K key heads, V value heads.  Query
 * and key heads are L2-normalized once convolved. */
static void conv_run(void *ctx, unsigned ith, unsigned nth)
{
    const lin_job *j = ctx;
    const ml_lin_layer *s = j->s;
    size_t b, e;
    ml__pool_split(2 * (size_t)s->K + s->V, 1, ith, nth, &b, &e);
    for (size_t g = b; g < e; g++) {
        int qk = g < 2 * (size_t)s->K;
        uint32_t c0 = qk ? (uint32_t)g * s->dk
                         : 2 * s->K * s->dk + (uint32_t)(g - 2 * s->K) * s->dv;
        conv_channels(j, s->ts[ith].acc, c0, qk ? s->dk : s->dv);
        if (!qk)
            continue;
        float scale = g < s->K ? (float)(1.0 / sqrt(s->dk)) : 1.0f;
        for (size_t t = 0; t < j->n_tok; t++)
            l2norm(j->qkv + t * s->n_qkv + c0, s->dk, scale);
    }
}

/* ---------------------------------------------------------------------------
 * Steps 3-5: the delta rule per value head (heads on the pool)
 * ------------------------------------------------------------------------- */

/* Step 3 for the segment's m tokens (batch rows t0.., chunk slots p0..):
 * β, and the cumulative log decay G continued from slot p0 - 1. */
static void gates(const lin_job *j, uint32_t vh, size_t t0, uint32_t p0, size_t m, double *G,
                  float *beta)
{
    uint32_t V = j->s->V;
    double neg_a = -exp((double)j->L->A_log[vh]);
    for (size_t i = 0; i < m; i++) {
        const float *ba = j->ba + (t0 + i) * 2 * V;
        beta[i] = ml__sigmoid(ba[vh]);
        double x = (double)ba[V + vh] + j->L->dt_bias[vh];
        double g = neg_a * (x > 20 ? x : log1p(exp(x))); /* softplus */
        if (g < -G_FLOOR)
            g = -G_FLOOR;
        uint32_t p = p0 + (uint32_t)i;
        G[p] = (p ? G[p - 1] : 0) + g;
    }
}

/* w_i = Sᵀ k_i and y_i = Sᵀ q_i for nb tokens: one product over S's rows
 * for the whole block. */
static void state_products(const ml_lin_layer *s, const float *S, const float *const *k,
                           const float *const *q, size_t nb, float *w, float *y)
{
    const float *a[2 * NB];
    float *out[2 * NB];
    for (size_t i = 0; i < nb; i++) {
        a[i] = k[i], a[nb + i] = q[i];
        out[i] = w + i * s->dv, out[nb + i] = y + i * s->dv;
    }
    memset(w, 0, nb * s->dv * sizeof(float));
    memset(y, 0, nb * s->dv * sizeof(float));
    s->fm->gemm(2 * nb, a, s->dk, S, s->dv, s->dv, 1.0f, out);
}

/* e[j] = e^{G[p] − G[j]} for j <= p. */
static void decays(const double *G, uint32_t p, double *e)
{
    for (uint32_t i = 0; i < p; i++)
        e[i] = exp(G[p] - G[i]);
    e[p] = 1;
}

/* Step 4 for the token in batch row t at chunk slot p, then step 5's norm
 * and gate: u_p into the chunk memory, the output into j->o.  kk and qk
 * hold the token's k·k_j and q·k_j for the chunk's slots. */
static void position(const lin_job *j, uint32_t vh, lin_scratch *ts, size_t t, uint32_t p,
                     float beta, const float *w, const float *y, const float *kk, const float *qk)
{
    const ml_lin_layer *s = j->s;
    uint32_t dv = s->dv;
    const double *G = s->G + (size_t)vh * CH;
    float *u = s->u + (size_t)vh * CH * dv, *up = u + (size_t)p * dv;
    const float *row = j->qkv + t * s->n_qkv;
    const float *v = row + (size_t)2 * s->K * s->dk + vh * dv;
    float *o = j->o + t * s->n_vd + (size_t)vh * dv;
    float ep = (float)exp(G[p]), *cu = ts->coef, *co = ts->coef + CH;
    decays(G, p, ts->e);
    for (uint32_t i = 0; i <= p; i++) {
        cu[i] = (float)(ts->e[i] * kk[i]);
        co[i] = (float)(ts->e[i] * qk[i]);
    }
    /* up = ep·w + Σ_{i<p} cu_i u_i and o = ep·y + Σ_{i<p} co_i u_i in one
     * pass over u; then u_p, then o's last term co_p u_p. */
    const float *a[2] = {cu, co};
    float *out[2] = {up, o};
    memcpy(up, w, dv * sizeof(float));
    memcpy(o, y, dv * sizeof(float));
    s->fm->gemm(2, a, p, u, dv, dv, ep, out);
    for (uint32_t c = 0; c < dv; c++)
        up[c] = beta * (v[c] - up[c]);
    a[0] = co + p;
    s->fm->gemm(1, a, 1, up, dv, dv, 1.0f, &o);
    const float *z = j->z + t * s->n_vd + (size_t)vh * dv;
    ml__rmsnorm(o, o, j->L->lnorm, dv, s->eps);
    s->fm->silu(o, z, dv, 1);
}

/* The chunk is complete: S = e^{G_C} S + Σ_j e^{G_C − G_j} k_j u_jᵀ, in
 * groups of ROWS rows of S. */
static void chunk_end(const ml_lin_layer *s, float *S, lin_scratch *ts, const float *u,
                      const double *G)
{
    uint32_t dv = s->dv;
    float eC = (float)exp(G[CH - 1]);
    decays(G, CH - 1, ts->e);
    const float *a[ROWS];
    float *out[ROWS];
    for (uint32_t r0 = 0; r0 < s->dk; r0 += ROWS) {
        uint32_t n = s->dk - r0 < ROWS ? s->dk - r0 : ROWS;
        for (uint32_t i = 0; i < n; i++) {
            float *cf = ts->cf + (size_t)i * CH;
            for (uint32_t jj = 0; jj < CH; jj++)
                cf[jj] = (float)(ts->e[jj] * ts->krow[jj][r0 + i]);
            a[i] = cf, out[i] = S + (size_t)(r0 + i) * dv;
        }
        s->fm->gemm(n, a, CH, u, dv, dv, eC, out);
    }
}

/* The dot products of a block of nb tokens at chunk slots [b, b + nb):
 * kd row i = k_i · k_j, row nb + i = q_i · k_j, for the chunk's slots
 * j < b + nb (those past a token's own slot go unused).  Slots below p0
 * are cached keys, the others the batch's rows. */
static void block_dots(const ml_lin_layer *s, lin_scratch *ts, const float *const *a, size_t nb,
                       uint32_t b, uint32_t p0, uint32_t kh)
{
    if (p0)
        s->fm->dots(2 * nb, a, p0, s->keys + (size_t)kh * s->dk, (size_t)s->K * s->dk, s->dk,
                    ts->kd, CH);
    s->fm->dots(2 * nb, a, b + nb - p0, ts->krow[p0], s->n_qkv, s->dk, ts->kd + p0, CH);
}

/* Value head vh over the batch rows [t0, t0 + m), which fill chunk slots
 * [p0, p0 + m) of one chunk. */
static void segment(const lin_job *j, uint32_t vh, lin_scratch *ts, size_t t0, uint32_t p0,
                    size_t m)
{
    const ml_lin_layer *s = j->s;
    uint32_t kh = vh / (s->V / s->K), dk = s->dk;
    double *G = s->G + (size_t)vh * CH;
    float *S = s->S + (size_t)vh * dk * s->dv;
    for (uint32_t i = 0; i < p0; i++)
        ts->krow[i] = s->keys + ((size_t)i * s->K + kh) * dk;
    for (size_t i = 0; i < m; i++)
        ts->krow[p0 + i] = j->qkv + (t0 + i) * s->n_qkv + (size_t)(s->K + kh) * dk;
    gates(j, vh, t0, p0, m, G, ts->beta);
    const float *a[2 * NB];
    for (size_t i0 = 0; i0 < m; i0 += NB) {
        size_t nb = m - i0 < NB ? m - i0 : NB;
        for (size_t i = 0; i < nb; i++) {
            a[i] = ts->krow[p0 + i0 + i];
            a[nb + i] = j->qkv + (t0 + i0 + i) * s->n_qkv + (size_t)kh * dk;
        }
        state_products(s, S, a, a + nb, nb, ts->w, ts->y);
        block_dots(s, ts, a, nb, p0 + (uint32_t)i0, p0, kh);
        for (size_t i = 0; i < nb; i++)
            position(j, vh, ts, t0 + i0 + i, p0 + (uint32_t)(i0 + i), ts->beta[i0 + i],
                     ts->w + i * s->dv, ts->y + i * s->dv, ts->kd + i * CH,
                     ts->kd + (nb + i) * CH);
    }
    if (p0 + m == CH)
        chunk_end(s, S, ts, s->u + (size_t)vh * CH * s->dv, G);
}

static void heads_run(void *ctx, unsigned ith, unsigned nth)
{
    const lin_job *j = ctx;
    lin_scratch *ts = &j->s->ts[ith];
    size_t b, e;
    ml__pool_split(j->s->V, 1, ith, nth, &b, &e);
    for (size_t vh = b; vh < e; vh++)
        for (size_t t = 0; t < j->n_tok;) {
            uint32_t p0 = (uint32_t)((j->pos + t) % CH);
            size_t m = j->n_tok - t < CH - p0 ? j->n_tok - t : CH - p0;
            segment(j, (uint32_t)vh, ts, t, p0, m);
            t += m;
        }
}

/* Keys of the batch's last, unfinished chunk go to the chunk memory for the
 * batches that continue it (after the heads ran: they read older slots). */
static void keep_keys(ml_lin_layer *s, uint32_t pos, size_t n_tok, const float *qkv)
{
    size_t tail = (pos + n_tok) % CH, first = tail >= n_tok ? 0 : n_tok - tail;
    if (!tail)
        return;
    size_t kd = (size_t)s->K * s->dk;
    for (size_t t = first; t < n_tok; t++)
        memcpy(s->keys + ((pos + t) % CH) * kd, qkv + t * s->n_qkv + kd, kd * sizeof(float));
}

void ml__lin_forward(ml_lin_layer *s, ml_pool *pool, uint32_t pos, size_t n_tok, float *qkv,
                     const float *z, const float *ba, float *o)
{
    lin_job j = {s, s->L, pos, n_tok, qkv, z, ba, o};
    ml__pool_run(pool, conv_run, &j);
    ml__pool_run(pool, heads_run, &j);
    keep_keys(s, pos, n_tok, qkv);
}
