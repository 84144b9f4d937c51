/* ctx.h - private: the evaluation context (ctx.c makes and frees it) and
 * the parallel steps the forward pass is written in (parallel.c).  The
 * forward pass itself is forward.c, its attention attention.c. */
#ifndef ML_CTX_H
#define ML_CTX_H

#include "format/mli_impl.h"
#include "runtime/kv_cache.h"
#include "runtime/linear_attn.h"
#include "runtime/runtime.h"

/* Query heads (of one KV head) that attend together, sharing key loads. */
#define ML_ATT_GROUP 4
/* Consecutive tokens of a sequence that attend together in a prompt,
 * sharing the key and value reads of the positions before them: a 4096
 * prompt otherwise streams the whole cache once per token.  Fewer where
 * their score rows (n_ctx floats each) would take more than
 * ML_ATT_SCORE_BYTES per thread: long contexts. */
#define ML_ATT_TOKENS 8
#define ML_ATT_SCORE_BYTES (2u << 20)
/* Keys or values per product call over a run of positions: a chunk stays
 * in the L1 cache while every query row of a block uses it (and a Q8_0 or
 * Q4_0 chunk is read back into floats once for all of them). */
#define ML_KV_CHUNK 64

/* One sequence: its position and its memory of the positions before. */
typedef struct ml_seq {
    uint32_t pos;         /* positions evaluated; the next token goes here */
    void **kc, **vc;      /* per layer: (n_kv_heads, cap[l], head_dim) keys and values,
                           * each head's positions contiguous (a decode step streams
                           * them), of the context's types kt and vt */
    ml_lin_layer **lin;   /* per layer: state and chunk memory (linear_attn.h), or NULL */
    uint64_t seen;        /* the last ml_ctx_eval_seqs call that named it */
} ml_seq;

struct ml_ctx {
    const ml_model *m;
    ml_pool *pool;
    uint32_t n_ctx, n_batch, n_seq;
    ml_seq *seqs;         /* (n_seq) */
    uint32_t *cap;        /* positions layer l holds: n_ctx, or a window ring */
    ml_cache_type kt, vt; /* how the caches hold keys, values */
    uint64_t state_bytes, scratch_bytes;
    uint64_t bytes_per_pos; /* a sequence's cache bytes of one position in the
                             * layers that keep them all (ml_ctx_bytes_per_pos) */
    uint64_t calls;       /* ml_ctx_eval_seqs calls, to check a call's sequences */
    /* The batch: row t is the token of sequence tseq[t] at position
     * tpos[t]; a sequence's rows are consecutive, so its rows in the
     * batch start at row t - (tpos[t] - seqs[tseq[t]].pos). */
    uint32_t *tseq, *tpos; /* (B) */
    uint8_t *tout;        /* (B) 1: the token's logits are wanted */
    /* Scratch for one batch of B = n_batch tokens, row t for token t. */
    float *x;             /* (B, dim) residual stream */
    float *xb;            /* (B, dim) normalized block input */
    float *q;             /* (B, q_dim) */
    float *k, *v;         /* (B, kv_dim) */
    void *kh, *vh;        /* (B, kv_dim) k, v as the cache holds them, where that is not
                           * float (kt, vt): what the batch's own rows attend to */
    float *dq;            /* (n_threads, ML_KV_CHUNK, head_dim) a chunk of Q8_0 or Q4_0
                           * keys or values read back as floats, where cached so */
    float *ao;            /* (B, q_dim) attention output per head */
    float *g;             /* (B, q_dim) gate */
    float *hb, *hb2;      /* (B, hidden_dim) FFN gate and up */
    float *o;             /* (B, dim) block output before the residual */
    int8_t *aq;           /* (B, max input) quantized activations */
    float *ad;            /* (B, max input / 32) their scales */
    int8_t *kq;           /* (B, max input) the same as K activations (kernels.h's */
    float *kd;            /* (B, max input / 256) rule 6), where the model has such products */
    void *mm_x;           /* (mm_x_cap bytes) aq rearranged for the kernels' matmul_x
                           * (parallel.c), or 0 bytes where they have none */
    size_t mm_x_cap;
    float *att;           /* (n_threads, ml__att_rows, ml__att_ld) attention scores, at
                           * least (n_heads, ml__att_ld) */
    uint32_t *tblk;       /* (B) first rows of the batch's blocks of tokens that attend
                           * together (attention.c) */
    float *rope_cs;       /* (2, B, rot_dim) the batch's RoPE cos, sin pairs by row: [0]
                           * of the global frequencies, [1] of the local ones */
    uint8_t rope_ready;   /* bit k: table k holds this batch's rows (forward.c) */
    /* Linear attention (only when the model has such layers). */
    float *lqkv;          /* (B, lin_qkv) projections, then conv + SiLU output */
    float *lz;            /* (B, lin_vd) output gate */
    float *lba;           /* (B, 2 lin_v_heads): b then a */
    float *lo;            /* (B, lin_vd) per-head outputs */
    /* Mixture of experts (only when the model has experts; moe.c). */
    float *moe_p;         /* (B, n_experts) each token's router scores */
    uint32_t *moe_c;      /* (B, k) each token's chosen experts, in the canonical order */
    float *moe_w;         /* (B, k) their weights */
    uint32_t *moe_list;   /* (B k) the slots t k + i grouped by expert, in token order */
    uint32_t *moe_start;  /* (n_experts + 1) each expert's first entry in moe_list */
    float *moe_x;         /* (B, dim) one expert's tokens' inputs, then its outputs */
    float *moe_y;         /* (B, k, dim) each slot's expert output */
    /* Tests: called after each MoE layer's routing with the batch's
     * positions and each row's chosen experts and weights (n_tok x k). */
    void (*moe_trace)(void *ctx, uint32_t layer, size_t n_tok, const uint32_t *pos,
                      const uint32_t *chosen, const float *w);
    void *moe_trace_ctx;
    void *scratch;
    ml_mli *imatrix;      /* sums of squares of matrix inputs, or NULL */
};

/* The end of the run of batch rows [t0, end) that belong to t0's
 * sequence, below n_tok. */
static inline size_t ml__seq_run_end(const ml_ctx *c, size_t t0, size_t n_tok)
{
    size_t t = t0 + 1;
    while (t < n_tok && c->tseq[t] == c->tseq[t0])
        t++;
    return t;
}

/* The most query heads a work item of attention has. */
static inline uint32_t ml__att_heads(const ml_model *m)
{
    uint32_t per_kv = m->h.n_heads / m->h.n_kv_heads;
    return per_kv < ML_ATT_GROUP ? per_kv : ML_ATT_GROUP;
}

/* The most tokens a work item of attention has. */
static inline uint32_t ml__att_tokens(const ml_ctx *c)
{
    uint64_t fit = ML_ATT_SCORE_BYTES / ((uint64_t)ml__att_heads(c->m) * c->n_ctx * 4);
    uint32_t t = c->n_batch < ML_ATT_TOKENS ? c->n_batch : ML_ATT_TOKENS;
    return fit >= t ? t : fit > 1 ? (uint32_t)fit : 1;
}

/* Floats from one score row to the next: n_ctx scores and one more
 * column, where a head's sink (gpt-oss) joins the scores of the softmax
 * (attention.c). */
static inline size_t ml__att_ld(const ml_ctx *c)
{
    return (size_t)c->n_ctx + 1;
}

/* Score rows one thread's attention needs: a work item's most query heads
 * times its most tokens. */
static inline uint32_t ml__att_rows(const ml_ctx *c)
{
    return ml__att_heads(c->m) * ml__att_tokens(c);
}

/* Importance-matrix collection (ctx.c): adds x^2 of n_tok rows of n
 * inputs (stride n) to the first n channels of a slot, token after token,
 * so the sums do not depend on the batch size.  Nothing without one. */
void ml__ctx_observe(ml_ctx *c, ml_mli_slot slot, uint32_t l, const float *x, size_t n_tok,
                     uint32_t n);

/* ---- moe.c ---- */

/* The first k of n scores in the canonical order (docs/design-moe.md,
 * section 4): a before b when s[a] > s[b], or they are equal (+0 equals
 * -0) and a < b; a NaN after every number, NaNs by index.  chosen gets
 * them in that order.  No library sort: ties are decided here, the same
 * way on every thread count, batch size and CPU. */
void ml__moe_select(const float *s, uint32_t n, uint32_t k, uint32_t *chosen);
/* One token's routing: scores of h (its FFN input, F32) into p
 * (n_experts floats, plus n_experts of scratch when the layer has sb), the
 * chosen experts and their weights. */
void ml__moe_route(const ml_model *m, const ml_layer *L, const float *h, float *p,
                   uint32_t *chosen, float *w);
/* o = the mixture of experts of xb for n_tok rows (layer l). */
void ml__moe_ffn(ml_ctx *c, uint32_t l, size_t n_tok);

/* ---- parallel.c ---- */

/* Most matrices one ml__matmuls call multiplies (a token's gate and up
 * products of 8 experts: moe.c). */
#define ML_MM_PARTS 16

/* Quantizes n_tok rows of n floats (stride n) into the input of the next
 * products: to Q8_0 into c->aq, c->ad, and to K activations into c->kq,
 * c->kd (ml__quantize_rows) as the model's products need. */
void ml__quantize(ml_ctx *c, float *x, size_t n_tok, uint32_t n);
/* x = act(x) · gate over n_tok rows of n floats (the gated FFN's
 * activation), then quantizes x as ml__quantize does. */
void ml__glu_quantize(ml_ctx *c, float *x, const float *gate, size_t n_tok, uint32_t n);
/* Quantizes n floats at x, which start `off` floats into the batch's rows
 * of `row` (off and n multiples of 32, and of 256 where row is), into the
 * products' inputs at the same place, as ml__quantize does. */
void ml__quantize_rows(ml_ctx *c, const float *x, size_t off, size_t n, uint32_t row);
/* ys[i] (n_tok rows of ws[i]->rows, stride ldys[i]) = ws[i] · the
 * quantized input, for n <= ML_MM_PARTS matrices, in one pool job. */
void ml__matmuls(ml_ctx *c, size_t n_tok, unsigned n, const ml_mat *const *ws,
                 float *const *ys, const size_t *ldys);
/* One token: ys[i] = ws[i] · row x_rows[i] of the quantized input (of
 * ws[i]->cols each; rows of a whole number of 256s where ws[i] takes K
 * activations), for n <= ML_MM_PARTS matrices, in one pool job: the
 * experts' down products, each on its own expert's activation. */
void ml__matvecs_at(ml_ctx *c, unsigned n, const ml_mat *const *ws, float *const *ys,
                    const size_t *x_rows);
/* y = w · the quantized input. */
void ml__matmul(ml_ctx *c, const ml_mat *w, size_t n_tok, float *y, size_t ldy);

/* Independent work items [b, e) of n_items, on thread ith. */
typedef void (*ml_items_fn)(void *arg, size_t b, size_t e, unsigned ith);
/* Runs fn over [0, n_items) split evenly over the pool; a single item
 * runs on the calling thread (a dispatch would cost more than it). */
void ml__parallel(ml_ctx *c, size_t n_items, ml_items_fn fn, void *arg);
/* The same for items whose cost grows with their index (a causal
 * prompt's attention: later tokens see more keys): each thread claims
 * the dearest item left, one at a time, so that none waits long for the
 * other at the end (even halves left one thread idle for part of a long
 * prompt).  Which thread runs an item changes no result. */
void ml__parallel_claim(ml_ctx *c, size_t n_items, ml_items_fn fn, void *arg);

#endif
