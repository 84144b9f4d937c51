/* convert_bind.c - binding every array of the .mlb body to the GGUF tensor
 * it comes from, with its shape checked and the moves on the way: the RoPE
 * permutation of NEOX architectures, rows of a fused attn_qkv, Qwen3.5's
 * query/gate split and value-head regrouping.  One pass over the .mlb
 * layout (ml_mlb_layout_next) gives the arrays in file order; the sizes of
 * the source types per q8_mask class are counted on the way for the
 * automatic weight type.  See gguf2mlb(1), TENSORS and ROPE PERMUTATION. */
#include "convert/convert_impl.h"

#include <stdio.h>
#include <stdlib.h>

/* A GGUF type's size class: 0 for types of at most 5 bits a weight (Q4_0,
 * Q4_1, Q4_K, Q3_K, Q2_K, IQ4_*, ...; they make a Q4_0 model by default), 1
 * for the rest (Q5_*, Q6_K, Q8_0, F16, BF16, F32). */
static int size_class8(uint32_t type)
{
    uint32_t elems = 1, bytes = 4;
    ml_gguf_type_size(type, &elems, &bytes);
    return 8 * bytes > 5 * elems;
}

/* ===========================================================================
 * Binding the body's arrays to GGUF tensors
 * ========================================================================= */

static ml__conv_item *new_item(ml__conv_build *b)
{
    ml_convert_plan *p = b->p;
    ml__conv_item *items = ml_array_reserve(p->items, &p->cap_items, p->n_items + 1, sizeof *items);
    if (!items)
        return NULL;
    p->items = items;
    ml__conv_item *it = &p->items[p->n_items++];
    memset(it, 0, sizeof *it);
    return it;
}

/* Layer l's attention inputs: separate q/k/v or a fused attn_qkv. */
typedef struct qkv_src {
    const ml_gguf_tensor *w[3]; /* q, k, v weights (the same tensor when fused) */
    const ml_gguf_tensor *bias[3];
    uint64_t row0[3]; /* first row in the tensor */
    uint64_t brow0[3];
    int fused, fused_bias;
} qkv_src;

static ml_status bind_qkv(ml__conv_build *b, uint32_t l, qkv_src *q)
{
    static const char *const nm[3] = {"q", "k", "v"};
    uint64_t rows[3] = {b->q_rows, b->d.kv_dim, b->d.kv_dim};
    memset(q, 0, sizeof *q);
    const ml_gguf_tensor *f = ml__conv_tensor(b, "blk.%u.attn_qkv.weight", l);
    const ml_gguf_tensor *fb = ml__conv_tensor(b, "blk.%u.attn_qkv.bias", l);
    ml_status s;
    if (f) {
        q->fused = 1;
        if ((s = ml__conv_shape(b, f, b->p->h.dim, rows[0] + rows[1] + rows[2], "fused q, k, v")))
            return s;
    }
    if (fb && (s = ml__conv_shape(b, fb, rows[0] + rows[1] + rows[2], 0, "fused q, k, v biases")))
        return s;
    for (int i = 0; i < 3; i++) {
        q->row0[i] = i == 0 ? 0 : i == 1 ? rows[0] : rows[0] + rows[1];
        if (f) {
            q->w[i] = f;
        } else {
            q->w[i] = ml__conv_tensor(b, "blk.%u.attn_%s.weight", l, nm[i]);
            if (!q->w[i]) {
                char name[64];
                snprintf(name, sizeof name, "blk.%u.attn_%s.weight", l, nm[i]);
                return ml__conv_missing(b, name);
            }
            q->row0[i] = 0;
            if ((s = ml__conv_shape(
                     b, q->w[i], b->p->h.dim, rows[i],
                     i == 0 ? (ml__conv_qwen35_family(b->arch) ? "dim x 2 q_dim" : "dim x q_dim")
                            : "dim x kv_dim")))
                return s;
        }
        if (fb) {
            q->bias[i] = fb;
            q->brow0[i] = i == 0 ? 0 : i == 1 ? rows[0] : rows[0] + rows[1];
        } else {
            q->bias[i] = ml__conv_tensor(b, "blk.%u.attn_%s.bias", l, nm[i]);
            if (q->bias[i] && (s = ml__conv_shape(b, q->bias[i], rows[i], 0, "bias")))
                return s;
        }
    }
    q->fused_bias = fb != NULL;
    if (ml__conv_qwen35_family(b->arch) && (q->bias[0] || q->bias[1] || q->bias[2]))
        return ml__err(b->err, ML_E_UNSUPPORTED, q->bias[0] ? q->bias[0]->name : "attn biases", -1,
                       "Qwen3.5 attention biases (the gate's among them) have no .mlb form");
    return ML_OK;
}

static ml_status require(ml__conv_build *b, ml__conv_item *it, const ml_gguf_tensor *t,
                         const char *name, uint64_t cols, uint64_t rows, const char *what)
{
    if (!t)
        return ml__conv_missing(b, name);
    ml_status s = ml__conv_shape(b, t, cols, rows, what);
    if (s || (s = ml__conv_check_type(b, t)))
        return s;
    it->pub.src = t;
    return ML_OK;
}

static void rope_perm(ml__conv_build *b, ml__conv_item *it, uint32_t hd)
{
    if (!b->ai->neox)
        return;
    it->pub.transform |= ML_CONV_ROPE_PERM;
    it->hd = hd;
    it->rot = b->d.rot_dim;
}

static void vheads(ml__conv_build *b, ml__conv_item *it, uint64_t vstart, uint32_t hs)
{
    const ml_mlb_header *h = &b->p->h;
    if (h->lin_v_heads == h->lin_k_heads)
        return;
    it->pub.transform |= ML_CONV_VHEADS;
    it->vk = h->lin_k_heads;
    it->vr = h->lin_v_heads / h->lin_k_heads;
    it->vhs = hs;
    it->vstart = vstart;
}

#define NAME(...) (snprintf(nbuf, sizeof nbuf, __VA_ARGS__), nbuf)

static ml_status bind_attention(ml__conv_build *b, ml__conv_item *it, const ml_tensor *t,
                                const qkv_src *q)
{
    uint32_t l = (uint32_t)t->layer, dim = b->p->h.dim, hd = b->d.head_dim;
    char nbuf[64];
    int i = t->role == ML_R_WQ || t->role == ML_R_WG || t->role == ML_R_BQ ? 0
            : t->role == ML_R_WK || t->role == ML_R_BK                     ? 1
                                                                           : 2;
    ml_status s;
    switch (t->role) {
    case ML_R_WQ:
    case ML_R_WK:
    case ML_R_WV:
    case ML_R_WG:
        it->pub.src = q->w[i];
        it->row0 = q->row0[i];
        if (q->fused)
            it->pub.transform |= ML_CONV_ROWS;
        if ((s = ml__conv_check_type(b, q->w[i])))
            return s;
        if (ml__conv_qwen35_family(b->arch) && i == 0) {
            it->pub.transform |= ML_CONV_QGATE;
            it->qgate = t->role == ML_R_WG ? 2 : 1;
            it->hd = hd;
        }
        if (i < 2 && t->role != ML_R_WG)
            rope_perm(b, it, hd);
        return ML_OK;
    case ML_R_BQ:
    case ML_R_BK:
    case ML_R_BV:
        if (!q->bias[i]) {
            it->pub.transform |= ML_CONV_ZEROS;
            return ML_OK;
        }
        if ((s = require(b, it, q->bias[i], q->bias[i]->name, q->bias[i]->cols, 0, "bias")))
            return s;
        it->row0 = q->brow0[i];
        if (q->fused_bias)
            it->pub.transform |= ML_CONV_ROWS;
        if (i < 2)
            rope_perm(b, it, hd);
        return ML_OK;
    case ML_R_WO:
        return require(b, it, ml__conv_tensor(b, "blk.%u.attn_output.weight", l),
                       NAME("blk.%u.attn_output.weight", l), b->d.q_dim, dim, "q_dim x dim");
    case ML_R_Q_NORM:
    case ML_R_K_NORM: {
        const char *n = t->role == ML_R_Q_NORM ? "q" : "k";
        if ((s = require(b, it, ml__conv_tensor(b, "blk.%u.attn_%s_norm.weight", l, n),
                         NAME("blk.%u.attn_%s_norm.weight", l, n), hd, 0, "head_dim")))
            return s;
        rope_perm(b, it, hd);
        return ML_OK;
    }
    default: return ml__err(b->err, ML_E_INVAL, t->name, -1, "internal: unexpected role");
    }
}

static ml_status bind_linear(ml__conv_build *b, ml__conv_item *it, const ml_tensor *t)
{
    const ml_mlb_header *h = &b->p->h;
    uint32_t l = (uint32_t)t->layer, dim = h->dim, dv = h->lin_v_dim, V = h->lin_v_heads;
    uint64_t qk = 2ull * h->lin_k_heads * h->lin_k_dim;
    char nbuf[64];
    ml_status s;
#define REQ(name, cols, rows, what)                                                                \
    require(b, it, ml__conv_tensor(b, "blk.%u." name, l), NAME("blk.%u." name, l), cols, rows, what)
    switch (t->role) {
    case ML_R_LQKV:
        if ((s = REQ("attn_qkv.weight", dim, b->d.lin_qkv, "dim x (2 K dk + V dv)")))
            return s;
        vheads(b, it, qk, dv);
        return ML_OK;
    case ML_R_LZ:
        if ((s = REQ("attn_gate.weight", dim, b->d.lin_vd, "dim x V dv")))
            return s;
        vheads(b, it, 0, dv);
        return ML_OK;
    case ML_R_LB:
    case ML_R_LA:
        if ((s = t->role == ML_R_LB ? REQ("ssm_beta.weight", dim, V, "dim x V")
                                    : REQ("ssm_alpha.weight", dim, V, "dim x V")))
            return s;
        vheads(b, it, 0, 1);
        return ML_OK;
    case ML_R_LCONV:
        if ((s = REQ("ssm_conv1d.weight", h->lin_conv, b->d.lin_qkv, "kernel x channels")))
            return s;
        vheads(b, it, qk, dv);
        return ML_OK;
    case ML_R_DT_BIAS:
        if ((s = REQ("ssm_dt.bias", V, 0, "value heads")))
            return s;
        vheads(b, it, 0, 1);
        return ML_OK;
    case ML_R_A_LOG:
        if ((s = require(b, it, ml__conv_tensor(b, "blk.%u.ssm_a", l), NAME("blk.%u.ssm_a", l), V,
                         0, "value heads")))
            return s;
        it->pub.transform |= ML_CONV_A_LOG;
        vheads(b, it, 0, 1);
        return ML_OK;
    case ML_R_LNORM: return REQ("ssm_norm.weight", dv, 0, "value head size");
    case ML_R_LOUT:
        if ((s = REQ("ssm_out.weight", b->d.lin_vd, dim, "V dv x dim")))
            return s;
        vheads(b, it, 0, dv);
        if (it->pub.transform & ML_CONV_VHEADS)
            it->pub.transform =
                (it->pub.transform & ~(uint32_t)ML_CONV_VHEADS) | ML_CONV_VHEAD_COLS;
        return ML_OK;
    default: return ml__err(b->err, ML_E_INVAL, t->name, -1, "internal: unexpected role");
    }
#undef REQ
}

static ml_status bind_item(ml__conv_build *b, ml__conv_item *it, const ml_tensor *t,
                           const qkv_src *q)
{
    const ml_mlb_header *h = &b->p->h;
    uint32_t l = (uint32_t)t->layer, dim = h->dim;
    char nbuf[64];
    switch (t->role) {
    case ML_R_TOK_EMB: {
        const ml_gguf_tensor *e = ml__conv_tensor(b, "token_embd.weight");
        return require(b, it, e, "token_embd.weight", dim, h->vocab, "dim x vocab");
    }
    case ML_R_WCLS:
        return require(b, it, ml__conv_tensor(b, "output.weight"), "output.weight", dim, h->vocab,
                       "dim x vocab");
    case ML_R_FINAL_NORM:
        return require(b, it, ml__conv_tensor(b, "output_norm.weight"), "output_norm.weight", dim,
                       0, "dim");
    case ML_R_ATTN_NORM:
        return require(b, it, ml__conv_tensor(b, "blk.%u.attn_norm.weight", l),
                       NAME("blk.%u.attn_norm.weight", l), dim, 0, "dim");
    case ML_R_FFN_NORM:
        if (ml__conv_qwen35_family(b->arch) || b->arch == ML__ARCH_GPT_OSS)
            /* their post_attention_norm is the pre-FFN norm */
            return require(b, it, ml__conv_tensor(b, "blk.%u.post_attention_norm.weight", l),
                           NAME("blk.%u.post_attention_norm.weight", l), dim, 0, "dim");
        return require(b, it, ml__conv_tensor(b, "blk.%u.ffn_norm.weight", l),
                       NAME("blk.%u.ffn_norm.weight", l), dim, 0, "dim");
    case ML_R_POST_ATTN_NORM:
        return require(b, it, ml__conv_tensor(b, "blk.%u.post_attention_norm.weight", l),
                       NAME("blk.%u.post_attention_norm.weight", l), dim, 0, "dim");
    case ML_R_POST_FFN_NORM:
        return require(b, it, ml__conv_tensor(b, "blk.%u.post_ffw_norm.weight", l),
                       NAME("blk.%u.post_ffw_norm.weight", l), dim, 0, "dim");
    case ML_R_W1:
        return require(b, it, ml__conv_tensor(b, "blk.%u.ffn_gate.weight", l),
                       NAME("blk.%u.ffn_gate.weight", l), dim, h->hidden_dim, "dim x hidden_dim");
    case ML_R_W3:
        return require(b, it, ml__conv_tensor(b, "blk.%u.ffn_up.weight", l),
                       NAME("blk.%u.ffn_up.weight", l), dim, h->hidden_dim, "dim x hidden_dim");
    case ML_R_W2:
        return require(b, it, ml__conv_tensor(b, "blk.%u.ffn_down.weight", l),
                       NAME("blk.%u.ffn_down.weight", l), h->hidden_dim, dim, "hidden_dim x dim");
    case ML_R_WQ:
    case ML_R_WK:
    case ML_R_WV:
    case ML_R_WO:
    case ML_R_WG:
    case ML_R_BQ:
    case ML_R_BK:
    case ML_R_BV:
    case ML_R_Q_NORM:
    case ML_R_K_NORM: return bind_attention(b, it, t, q);
    case ML_R_BO:
        return require(b, it, ml__conv_tensor(b, "blk.%u.attn_output.bias", l),
                       NAME("blk.%u.attn_output.bias", l), dim, 0, "dim");
    case ML_R_SINKS:
        return require(b, it, ml__conv_tensor(b, "blk.%u.attn_sinks.weight", l),
                       NAME("blk.%u.attn_sinks.weight", l), h->n_heads, 0, "head_count");
    case ML_R_WR:
    case ML_R_RB:
    case ML_R_EB1:
    case ML_R_EB2:
    case ML_R_EB3:
    case ML_R_EW1:
    case ML_R_EW2:
    case ML_R_EW3:
    case ML_R_WS1:
    case ML_R_WS2:
    case ML_R_WS3:
    case ML_R_WSG: return ml__conv_bind_moe(b, it, t);
    default: return bind_linear(b, it, t);
    }
}

/* What the matrices' sources are, for the default weight type. */
static void count_source(ml__conv_build *b, uint32_t type)
{
    b->n_mat++;
    b->n_mat_q += type == ML_GGML_Q8_0 || type == ML_GGML_Q4_0;
    b->n_mat_float += type == ML_GGML_F32 || type == ML_GGML_F16 || type == ML_GGML_BF16;
}

/* One layout pass with a provisional weight type binds every array. */
ml_status ml__conv_bind_all(ml__conv_build *b)
{
    ml_mlb_header h = b->p->h;
    h.wtype = ML_WTYPE_Q8_0, h.q8_mask = 0;
    ml_mlb_layout lay;
    ml_tensor t;
    ml_mlb_layout_begin(&lay, &h, h.layer_flags ? b->flags : NULL);
    qkv_src q;
    int32_t q_layer = -1;
    int r;
    ml_status s;
    while ((r = ml_mlb_layout_next(&lay, &t, b->err)) == 1) {
        if (t.role == ML_R_LAYER_FLAGS)
            continue;
        if (t.layer >= 0 && t.layer != q_layer && !ml__conv_is_linear(b, (uint32_t)t.layer)) {
            if ((s = bind_qkv(b, (uint32_t)t.layer, &q)))
                return s;
            q_layer = t.layer;
        }
        ml__conv_item *it = new_item(b);
        if (!it)
            return ml__err(b->err, ML_E_NOMEM, "", -1, "out of memory");
        it->pub.dst = t;
        if ((s = bind_item(b, it, &t, &q)))
            return s;
        if (t.type != ML_TYPE_F32 && t.role != ML_R_LB && t.role != ML_R_LA) {
            int c = __builtin_ctz(t.q8_class);
            b->elems[c][size_class8(it->pub.src->type)] += (uint64_t)t.rows * t.cols;
        }
        if (t.type != ML_TYPE_F32) /* a matrix: one type table entry */
            count_source(b, it->pub.src->type);
    }
    return r < 0 ? ML_E_NOMEM : ML_OK; /* the provisional header has no table */
}
