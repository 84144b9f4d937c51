/* ctx.c - the evaluation context's life: per sequence, the KV cache (a
 * ring for sliding-window layers; float32, f16, Q8_0 or Q4_0) and the linear-attention layers' state;
 * shared by the sequences, one allocation of batch scratch and the thread
 * pool; reset and truncate, the accessors, and importance-matrix
 * collection into the context's ml_mli. */
#include "runtime/ctx.h"

#include <stdlib.h>
#include <string.h>

void ml__ctx_observe(ml_ctx *c, ml_mli_slot slot, uint32_t l, const float *x, size_t n_tok,
                     uint32_t n)
{
    if (!c->imatrix)
        return;
    double *sum = ml__mli_slot(c->imatrix, slot, l);
    for (size_t t = 0; t < n_tok; t++)
        for (uint32_t i = 0; i < n; i++)
            sum[i] += (double)x[t * n + i] * x[t * n + i];
}

static size_t max3(size_t a, size_t b, size_t c)
{
    size_t m = a > b ? a : b;
    return m > c ? m : c;
}

/* The block types' form of B rows of `cols` activations (matmul_blk_x),
 * the largest for the types m's activations serve. */
static size_t blk_x_bytes(const ml_model *m, size_t cols, size_t B)
{
    const ml_kernels *k = m->k;
    size_t most = 0;
    for (int t = 0; k->matmul_blk_x.bytes && t < ML_TYPE_COUNT; t++) {
        if (!(m->acts & (ml__blk_acts_k((ml_type)t) ? ML_ACTS_K : ML_ACTS_Q8)))
            continue;
        size_t n = k->matmul_blk_x.bytes((ml_type)t, cols, B);
        most = n > most ? n : most;
    }
    return most;
}

/* The kernels' rearranged form of B rows of activations (parallel.c), the
 * largest for any product's input width (each width asked: a kernel may
 * make no form for the longest rows and one for the others); 0 where they
 * have none. */
static size_t mm_x_bytes(const ml_model *m, const size_t *widths, size_t n, size_t B)
{
    const ml_kernels *k = m->k;
    size_t most = 0;
    for (size_t i = 0; i < n; i++) {
        size_t w = widths[i];
        size_t a = k->matmul_x[0].bytes ? k->matmul_x[0].bytes(0, w, B) : 0;
        size_t b = k->matmul_x[1].bytes ? k->matmul_x[1].bytes(1, w, B) : 0;
        size_t c = blk_x_bytes(m, w, B);
        most = a > most ? a : most;
        most = b > most ? b : most;
        most = c > most ? c : most;
    }
    return most;
}

/* Scratch layout: every buffer 64-byte aligned inside one allocation. */
static ml_status alloc_scratch(ml_ctx *c, unsigned n_threads, ml_error *err)
{
    const ml_model *m = c->m;
    size_t B = c->n_batch, dim = m->h.dim, q_dim = m->d.q_dim, kv = m->d.kv_dim;
    size_t E = m->h.n_experts, K = m->h.n_experts_used;
    size_t hid = max3(m->h.hidden_dim, m->h.expert_hidden_dim, m->h.shared_hidden_dim);
    size_t in = max3(dim, q_dim, hid);
    size_t lq = m->d.lin_qkv, lvd = m->d.lin_vd, lv = m->h.lin_v_heads;
    if (lvd > in)
        in = lvd;
    size_t att;
    uint64_t rows = (uint64_t)n_threads * ml__att_rows(c);
    if (rows < m->h.n_heads) /* one token's attention split over threads: every head's row */
        rows = m->h.n_heads;
    if (ml__to_size(rows * ((uint64_t)c->n_ctx + 1) * 4, &att)) /* rows of ml__att_ld */
        return ml__err(err, ML_E_NOMEM, "", -1, "scratch size overflows");
    const size_t widths[] = {dim, q_dim, m->h.hidden_dim, m->h.expert_hidden_dim,
                             m->h.shared_hidden_dim, lvd};
    c->mm_x_cap = mm_x_bytes(m, widths, sizeof widths / sizeof widths[0], B);
    struct { void **p; size_t bytes; } parts[] = {
        {(void **)&c->x, B * dim * 4},   {(void **)&c->xb, B * dim * 4},
        {(void **)&c->q, B * q_dim * 4}, {(void **)&c->k, B * kv * 4},
        {(void **)&c->v, B * kv * 4},    {(void **)&c->ao, B * q_dim * 4},
        {(void **)&c->kh, c->kt != ML_CACHE_F32 ? ml__kv_bytes(c->kt, B * kv) : 0},
        {(void **)&c->vh, c->vt != ML_CACHE_F32 ? ml__kv_bytes(c->vt, B * kv) : 0},
        {(void **)&c->dq, ml__kv_blocked(c->kt) || ml__kv_blocked(c->vt)
                              ? (size_t)n_threads * ML_KV_CHUNK * m->d.head_dim * 4 : 0},
        {(void **)&c->g, B * q_dim * 4}, {(void **)&c->hb, B * hid * 4},
        {(void **)&c->hb2, B * hid * 4}, {(void **)&c->o, B * dim * 4},
        {(void **)&c->aq, B * in},       {(void **)&c->ad, B * (in / 32) * 4},
        {(void **)&c->kq, m->acts & ML_ACTS_K ? B * in : 0},
        {(void **)&c->kd, m->acts & ML_ACTS_K ? B * (in / 256) * 4 : 0},
        {&c->mm_x, c->mm_x_cap},
        {(void **)&c->att, att},
        {(void **)&c->rope_cs, 2 * B * m->d.rot_dim * 4},
        {(void **)&c->lqkv, B * lq * 4}, {(void **)&c->lz, B * lvd * 4},
        {(void **)&c->lba, B * 2 * lv * 4}, {(void **)&c->lo, B * lvd * 4},
        {(void **)&c->moe_p, B * 2 * E * 4}, {(void **)&c->moe_c, B * K * 4},
        {(void **)&c->moe_w, B * K * 4},     {(void **)&c->moe_list, B * K * 4},
        {(void **)&c->moe_start, E ? (E + 1) * 4 : 0},
        {(void **)&c->moe_x, E ? B * dim * 4 : 0}, {(void **)&c->moe_y, B * K * dim * 4},
        {(void **)&c->tseq, B * 4},      {(void **)&c->tpos, B * 4},
        {(void **)&c->tblk, B * 4},
        {(void **)&c->tout, B},
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
static ml_status alloc_linear(ml_ctx *c, ml_seq *sq, uint32_t l, uint64_t bytes, ml_error *err)
{
    uint64_t state, chunk;
    ml_status s = ml__lin_new(&c->m->h, &c->m->layers[l], c->m->k, ml__pool_size(c->pool),
                              &sq->lin[l], &state, &chunk, err);
    if (s)
        return s;
    if (state != bytes) /* cannot happen: both follow mlb(5) */
        return ml__err(err, ML_E_NOMEM, "", -1, "layer %u: a state of %llu bytes, not %llu", l,
                       (unsigned long long)state, (unsigned long long)bytes);
    c->state_bytes += bytes;
    c->scratch_bytes += chunk;
    return ML_OK;
}

/* One sequence's cache and recurrent state, every layer's. */
static ml_status alloc_seq(ml_ctx *c, ml_seq *sq, ml_error *err)
{
    const ml_model *m = c->m;
    uint32_t n = m->h.n_layers;
    sq->kc = calloc(n, sizeof *sq->kc);
    sq->vc = calloc(n, sizeof *sq->vc);
    sq->lin = calloc(n, sizeof *sq->lin);
    if (!sq->kc || !sq->vc || !sq->lin)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    for (uint32_t l = 0; l < n; l++) {
        uint64_t bytes = ml_mlb_layer_state_bytes(&m->h, m->layers[l].flags, c->n_ctx);
        if (m->layers[l].flags & ML_LAYER_LINEAR) {
            ml_status s = alloc_linear(c, sq, l, bytes, err);
            if (s)
                return s;
            continue;
        }
        /* mlb(5) counts float32 keys and values: bytes / 8 of each */
        size_t kb, vb;
        if (bytes == UINT64_MAX || ml__to_size(ml_cache_type_bytes(c->kt, bytes / 8), &kb) ||
            ml__to_size(ml_cache_type_bytes(c->vt, bytes / 8), &vb))
            return ml__err(err, ML_E_NOMEM, "", -1, "the cache of layer %u does not fit in memory",
                           l);
        bytes = (uint64_t)kb + vb;
        sq->kc[l] = malloc(kb ? kb : 1);
        sq->vc[l] = malloc(vb ? vb : 1);
        if (!sq->kc[l] || !sq->vc[l])
            return ml__err(err, ML_E_NOMEM, "", -1,
                           "cannot allocate %llu bytes for the cache of layer %u (context %u%s); "
                           "try a smaller context",
                           (unsigned long long)bytes, l, c->n_ctx,
                           c->n_seq > 1 ? ", one cache per sequence" : "");
        c->state_bytes += bytes;
    }
    return ML_OK;
}

/* Every sequence's memory; the layers' cache sizes are the same for all. */
static ml_status alloc_cache(ml_ctx *c, ml_error *err)
{
    const ml_model *m = c->m;
    c->cap = calloc(m->h.n_layers, sizeof *c->cap);
    c->seqs = calloc(c->n_seq, sizeof *c->seqs);
    if (!c->cap || !c->seqs)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    uint64_t kv = m->d.kv_dim;
    for (uint32_t l = 0; l < m->h.n_layers; l++) {
        c->cap[l] = m->layers[l].sliding && m->h.sliding_window < c->n_ctx ? m->h.sliding_window
                                                                           : c->n_ctx;
        if (!(m->layers[l].flags & ML_LAYER_LINEAR) && c->cap[l] == c->n_ctx)
            c->bytes_per_pos += ml_cache_type_bytes(c->kt, kv) + ml_cache_type_bytes(c->vt, kv);
    }
    for (uint32_t i = 0; i < c->n_seq; i++) {
        ml_status s = alloc_seq(c, &c->seqs[i], err);
        if (s)
            return s;
    }
    return ML_OK;
}

static void free_seq(const ml_ctx *c, ml_seq *sq)
{
    for (uint32_t l = 0; sq->kc && sq->vc && sq->lin && l < c->m->h.n_layers; l++) {
        free(sq->kc[l]);
        free(sq->vc[l]);
        ml__lin_free(sq->lin[l]);
    }
    free(sq->kc);
    free(sq->vc);
    free(sq->lin);
}

ml_status ml_ctx_new(const ml_model *m, const ml_ctx_params *p, ml_ctx **out, ml_error *err)
{
    *out = NULL;
    ml_ctx_params def = {.n_ctx = 0};
    if (!p)
        p = &def;
    uint32_t n_ctx = p->n_ctx ? p->n_ctx : m->h.max_seq;
    if (n_ctx > m->h.max_seq)
        return ml__err(err, ML_E_INVAL, "max_seq", 32, "a context of %u is above the model's %u",
                       n_ctx, m->h.max_seq);
    ml_status s = ml_cache_type_check(&m->h, p->cache_k, err);
    if (!s)
        s = ml_cache_type_check(&m->h, p->cache_v, err);
    if (s)
        return s;
    ml_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    c->m = m;
    c->kt = p->cache_k;
    c->vt = p->cache_v;
    c->n_ctx = n_ctx;
    c->n_batch = p->n_batch ? p->n_batch : 64;
    c->n_seq = p->n_seq ? p->n_seq : 1;
    unsigned nt = p->n_threads ? p->n_threads : 1;
    s = ml__pool_new(nt, &c->pool, err);
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
    for (uint32_t i = 0; c->seqs && i < c->n_seq; i++)
        free_seq(c, &c->seqs[i]);
    free(c->seqs);
    free(c->cap);
    free(c->scratch);
    ml__pool_free(c->pool);
    free(c);
}

const char *ml_cache_type_name(ml_cache_type t)
{
    switch (t) {
    case ML_CACHE_F32: return "f32";
    case ML_CACHE_F16: return "f16";
    case ML_CACHE_Q8_0: return "q8_0";
    case ML_CACHE_Q4_0: return "q4_0";
    }
    return NULL;
}

ml_status ml_cache_type_parse(const char *name, ml_cache_type *out, ml_error *err)
{
    for (ml_cache_type t = ML_CACHE_F32; t <= ML_CACHE_Q4_0; t++)
        if (name && strcmp(name, ml_cache_type_name(t)) == 0) {
            *out = t;
            return ML_OK;
        }
    return ml__err(err, ML_E_INVAL, "", -1,
                   "unknown cache type '%s' (expected f32, f16, q8_0 or q4_0)", name ? name : "");
}

uint64_t ml_cache_type_bytes(ml_cache_type t, uint64_t n)
{
    if (!ml_cache_type_name(t))
        return 0;
    return t == ML_CACHE_F32 ? n * 4 : t == ML_CACHE_F16 ? n * 2 : ml__kv_bytes(t, 32) * (n / 32);
}

ml_status ml_cache_type_check(const ml_mlb_header *h, ml_cache_type t, ml_error *err)
{
    if (!ml_cache_type_name(t))
        return ml__err(err, ML_E_INVAL, "", -1, "cache type %d is not one of ml_cache_type's",
                       (int)t);
    uint32_t hd = h->head_dim ? h->head_dim : h->n_heads ? h->dim / h->n_heads : 0;
    if (ml__kv_blocked(t) && hd % 32) /* the field's offset only where it is stored */
        return ml__err(err, ML_E_UNSUPPORTED, "head_dim", h->head_dim ? 80 : -1,
                       "%u%s is not a multiple of 32, as the blocks of a %s cache need (f16 or "
                       "f32 fit it)",
                       hd, h->head_dim ? "" : " (dim / n_heads)", ml_cache_type_name(t));
    return ML_OK;
}

uint64_t ml_ctx_state_bytes(const ml_ctx *c)
{
    return c->state_bytes;
}

uint64_t ml_ctx_scratch_bytes(const ml_ctx *c)
{
    return c->scratch_bytes;
}

uint64_t ml_ctx_bytes_per_pos(const ml_ctx *c)
{
    return c->bytes_per_pos;
}

uint32_t ml_ctx_n_ctx(const ml_ctx *c)
{
    return c->n_ctx;
}

uint32_t ml_ctx_n_seq(const ml_ctx *c)
{
    return c->n_seq;
}

uint32_t ml_ctx_seq_pos(const ml_ctx *c, uint32_t seq)
{
    return seq < c->n_seq ? c->seqs[seq].pos : 0;
}

uint32_t ml_ctx_pos(const ml_ctx *c)
{
    return c->seqs[0].pos;
}

static ml_status seq_check(const ml_ctx *c, uint32_t seq, ml_error *err)
{
    if (seq >= c->n_seq)
        return ml__err(err, ML_E_INVAL, "", -1, "sequence %u is outside 0..%u", seq,
                       c->n_seq - 1);
    return ML_OK;
}

ml_status ml_ctx_seq_reset(ml_ctx *c, uint32_t seq, ml_error *err)
{
    ml_status s = seq_check(c, seq, err);
    if (s)
        return s;
    ml_seq *sq = &c->seqs[seq];
    sq->pos = 0;
    for (uint32_t l = 0; l < c->m->h.n_layers; l++) /* recurrent state starts at zero */
        if (sq->lin[l])
            ml__lin_reset(sq->lin[l]);
    return ML_OK;
}

void ml_ctx_reset(ml_ctx *c)
{
    ml_ctx_seq_reset(c, 0, NULL);
}

ml_status ml_ctx_seq_truncate(ml_ctx *c, uint32_t seq, uint32_t pos, ml_error *err)
{
    ml_status s = seq_check(c, seq, err);
    if (s)
        return s;
    ml_seq *sq = &c->seqs[seq];
    if (pos > sq->pos)
        return ml__err(err, ML_E_INVAL, "", -1, "sequence %u: position %u is past the %u evaluated",
                       seq, pos, sq->pos);
    if (pos == sq->pos)
        return ML_OK;
    /* A recurrent state holds every position at once: it cannot go back. */
    for (uint32_t l = 0; l < c->m->h.n_layers; l++) {
        if (sq->lin[l])
            return ml__err(err, ML_E_UNSUPPORTED, "", -1,
                           "a linear-attention state cannot be taken back to position %u", pos);
        /* A sliding window's ring that has wrapped holds the later
         * positions where the earlier ones were. */
        if (c->cap[l] < sq->pos)
            return ml__err(err, ML_E_UNSUPPORTED, "", -1,
                           "layer %u's sliding-window cache (%u positions) has wrapped", l,
                           c->cap[l]);
    }
    sq->pos = pos; /* the cache rows past pos are overwritten as evaluated */
    return ML_OK;
}

uint32_t ml_ctx_seq_keep(ml_ctx *c, uint32_t seq, uint32_t pos)
{
    uint32_t held = ml_ctx_seq_pos(c, seq);
    if (pos > held)
        pos = held;
    if (ml_ctx_seq_truncate(c, seq, pos, NULL) == ML_OK)
        return pos;
    ml_ctx_seq_reset(c, seq, NULL); /* a state that cannot go back: start over */
    return 0;
}

uint32_t ml_ctx_seq_rewind_room(const ml_ctx *c, uint32_t seq)
{
    if (seq >= c->n_seq)
        return 0;
    const ml_seq *sq = &c->seqs[seq];
    uint32_t room = c->n_ctx - sq->pos;
    for (uint32_t l = 0; l < c->m->h.n_layers; l++) {
        if (sq->lin[l])
            return 0;
        /* a window's ring may fill up to its capacity, not past it */
        uint32_t left = c->cap[l] > sq->pos ? c->cap[l] - sq->pos : 0;
        room = left < room ? left : room;
    }
    return room;
}

ml_status ml_ctx_truncate(ml_ctx *c, uint32_t pos, ml_error *err)
{
    return ml_ctx_seq_truncate(c, 0, pos, err);
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

/* The group matrix w's product works in for n tokens (kernels.h's
 * matmul_blk_x.group; 1: a token at a time, or pairs, which cost by the
 * token). */
static size_t mat_group(const ml_kernels *k, const ml_mat *w, size_t n)
{
    if (!w->q || ml__mat_spec(w) || !k->matmul_blk_x.group)
        return 1;
    return k->matmul_blk_x.group(w->type, w->cols, n);
}

/* The bytes of w (0 when unset). */
static uint64_t mat_bytes(const ml_mat *w)
{
    if (!w->q)
        return 0;
    return ml__mat_spec(w) ? (uint64_t)w->rows * w->cols : (uint64_t)w->rows * w->row_bytes;
}

/* Adds w's bytes to the grouped ones (their group into *g: one table,
 * one group) or to those that go by the token. */
static void tally_group(const ml_kernels *k, const ml_mat *w, size_t n, size_t *g,
                        uint64_t by_group_token[2])
{
    size_t wg = mat_group(k, w, n);
    if (wg > 1)
        *g = wg;
    by_group_token[wg > 1 ? 0 : 1] += mat_bytes(w);
}

/* The group of the matrices holding most of the bytes a step reads:
 * every layer's and the classifier, whose rows every guess of a
 * speculation needs.  The experts count by the token: another token
 * reads other experts. */
uint32_t ml_ctx_step_group(const ml_ctx *c, uint32_t n)
{
    const ml_model *m = c->m;
    size_t g = 1;
    uint64_t bytes[2] = {0}; /* grouped, by the token */
    for (uint32_t l = 0; l < m->h.n_layers; l++) {
        const ml_layer *y = &m->layers[l];
        const ml_mat *ws[] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->wg, &y->w1, &y->w2,
                              &y->w3, &y->lqkv, &y->lz, &y->lb, &y->la, &y->lout, &y->ws1,
                              &y->ws2, &y->ws3};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
            tally_group(m->k, ws[i], n, &g, bytes);
        for (size_t i = 0; y->moe && y->ew && i < 3; i++)
            bytes[1] += m->h.n_experts * mat_bytes(&y->ew[i]);
    }
    tally_group(m->k, &m->wcls, n, &g, bytes);
    return bytes[0] > bytes[1] ? (uint32_t)g : 1;
}

uint32_t ml_ctx_n_batch(const ml_ctx *c)
{
    return c->n_batch;
}

const ml_model *ml_ctx_model(const ml_ctx *c)
{
    return c->m;
}
