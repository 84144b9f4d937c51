/* runtime.h - private: the bound model and the evaluation context.  Names
 * follow the math of mlb(5): x the residual stream, xb the normalized
 * input of a block, q/k/v the projections, hb/hb2 the FFN's two halves. */
#ifndef ML_RUNTIME_H
#define ML_RUNTIME_H

#include "base/internal.h"
#include "kernels/kernels.h"
#include "runtime/pool.h"

/* A matrix bound in place: rows x cols, Q8_0 or Q4_0 (quants and scales),
 * or a block type of the kernels' matvec_blk (ggml's blocks, or F32: q
 * holds the rows one after another, row_bytes each, and d is unset). */
typedef struct ml_mat {
    ml_type type;
    uint32_t rows, cols;
    const void *q;     /* quants, or the blocks */
    ml_wscales d;      /* scales as stored, one per 32 weights (kernels.h) */
    size_t row_bytes;  /* block types: ml__blk_row_bytes(type, cols); else 0 */
} ml_mat;

/* Is w of the spec's own types, whose quants and scales are apart? */
static inline int ml__mat_spec(const ml_mat *w)
{
    return w->type == ML_TYPE_Q8_0 || w->type == ML_TYPE_Q4_0;
}

typedef struct ml_layer {
    uint8_t flags;                  /* ML_LAYER_* (0 without layer flags) */
    int sliding;                    /* attends to the last sliding_window positions */
    const float *attn_norm;         /* (dim) */
    ml_mat wq, wk, wv, wo, wg;      /* wg only with attn_gate */
    const float *bq, *bk, *bv;      /* (q_dim), (kv_dim), (kv_dim) or NULL */
    const float *bo;                /* (dim) wo's bias, or NULL */
    const float *sinks;             /* (n_heads) a logit per head in the softmax, or NULL */
    const float *q_norm, *k_norm;   /* (head_dim) or NULL */
    const float *ffn_norm;          /* (dim) */
    ml_mat w1, w2, w3;              /* gate (hidden x dim), down (dim x hidden), up */
    const float *post_attn_norm, *post_ffn_norm; /* (dim) or NULL */
    /* Linear attention (flag ML_LAYER_LINEAR). */
    ml_mat lqkv, lz, lb, la, lout;
    const float *lconv;             /* (lin_qkv, lin_conv) */
    const float *dt_bias, *A_log;   /* (lin_v_heads) */
    const float *lnorm;             /* (lin_v_dim) */
    /* Mixture of experts (moe.c), in place of w1 w2 w3. */
    int moe;                        /* the FFN is a mixture of experts */
    const float *wr;                /* (n_experts, dim) the router, F32 */
    const float *rb, *sb;           /* (n_experts) router and selection biases, or NULL */
    ml_mat *ew;                     /* (n_experts, 3): expert e's w1, w2, w3 at 3e, 3e+1, 3e+2 */
    const float **eb;               /* (n_experts, 3): its biases b1, b2, b3 alike, or NULL */
    ml_mat ws1, ws2, ws3;           /* the shared expert (shared_hidden_dim), or unset */
    const float *wsg;               /* (dim) its gate's row, or NULL: no gate */
    const float *inv_freq;          /* RoPE frequencies (rot_dim/2), NULL: no RoPE */
    float rope_mul;                 /* factor on cos and sin (yarn attention factor) */
} ml_layer;

struct ml_model {
    ml_mlb_header h;
    ml_mlb_derived d;
    ml_mat tok_emb, wcls;            /* wcls == tok_emb with a shared classifier */
    const float *final_norm;         /* (dim) */
    ml_layer *layers;                /* (n_layers) */
    float *inv_freq_global;          /* (rot_dim/2), with the file's RoPE scaling */
    float *inv_freq_local;           /* (rot_dim/2), rope_local_theta, unscaled */
    float embed_scale;               /* 1 when the header says 0 */
    float attn_scale;                /* 1/sqrt(head_dim) when the header says 0 */
    const ml_kernels *k;
    ml_kernels composed;             /* k's, when ML_KERNELS names a kernel's own variant */
    uint8_t acts;                    /* ML_ACTS_*: the activation forms its products take */
};

/* The quantized activations a model's products read (kernels.h's rules 1
 * and 6): Q8_0 for every matrix but those of the 256-element types, which
 * take K activations. */
#define ML_ACTS_Q8 1
#define ML_ACTS_K 2

/* The form w's products read. */
static inline unsigned ml__mat_acts(const ml_mat *w)
{
    return !ml__mat_spec(w) && ml__blk_acts_k(w->type) ? ML_ACTS_K : ML_ACTS_Q8;
}

/* RoPE inverse frequencies for pairs 0..rot_dim/2-1 (rope.c). */
void ml__rope_freqs(const ml_mlb_header *h, const ml_mlb_derived *d, int local, float *inv);

#endif
