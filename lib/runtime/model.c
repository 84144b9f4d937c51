/* model.c - binding an open .mlb for computing: every tensor becomes a
 * pointer into the mapping (no copies, its pages mapped in now: the
 * load, not the first prompt, pays for them, as llama.cpp's MAP_POPULATE
 * does), RoPE frequency tables are built, and the kernel variant for this
 * CPU is chosen. */
#include "runtime/runtime.h"

#include "base/io.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static ml_mat mat_of(const ml_tensor *t)
{
    ml_mat m = {0};
    if (t) {
        m.type = t->type;
        m.rows = t->rows;
        m.cols = t->cols;
        m.q = t->data;
        m.d.p = t->scales_f16 ? (const void *)t->scales_f16 : (const void *)t->scales;
        m.d.f16 = t->scales_f16 != NULL;
        m.row_bytes = ml__blk_row_bytes(t->type, t->cols);
        ml__prefault(t->data, t->nbytes);
        ml__prefault(m.d.p, t->scale_nbytes);
    }
    return m;
}

/* The matrices' roles: each must be of a type the kernels compute with. */
static const ml_role matrix_roles[] = {
    ML_R_TOK_EMB, ML_R_WQ, ML_R_WK, ML_R_WV, ML_R_WO,  ML_R_WG, ML_R_LQKV, ML_R_LZ,
    ML_R_LB,      ML_R_LA, ML_R_LOUT, ML_R_W1, ML_R_W2, ML_R_W3, ML_R_WCLS,
    ML_R_WS1,     ML_R_WS2, ML_R_WS3,
};

/* A matrix the kernels have no code for (a type of a newer file, or one
 * whose rows are not whole blocks) is refused here, by name, rather than
 * met by a kernel that would read it wrongly. */
static ml_status check_matrix(const ml_tensor *t, ml_error *err)
{
    if (!t || t->type == ML_TYPE_Q8_0 || t->type == ML_TYPE_Q4_0 ||
        ml__blk_row_bytes(t->type, t->cols))
        return ML_OK;
    return ml__err(err, ML_E_UNSUPPORTED, t->name, (int64_t)t->offset,
                   "matrix of type %s (%d) with %u columns: this build has no kernel for it",
                   ml_type_name(t->type), (int)t->type, t->cols);
}

/* The experts' matrices, by the tensors' own expert index. */
static ml_status check_experts(const ml_mlb *mlb, ml_error *err)
{
    for (size_t i = 0; i < ml_mlb_n_tensors(mlb); i++) {
        const ml_tensor *t = ml_mlb_tensor(mlb, i);
        ml_status s = t->expert >= 0 && t->ndim == 2 ? check_matrix(t, err) : ML_OK;
        if (s)
            return s;
    }
    return ML_OK;
}

static ml_status check_matrices(const ml_mlb *mlb, uint32_t n_layers, ml_error *err)
{
    for (size_t i = 0; i < sizeof matrix_roles / sizeof matrix_roles[0]; i++) {
        const int global = matrix_roles[i] == ML_R_TOK_EMB || matrix_roles[i] == ML_R_WCLS;
        for (uint32_t l = 0; l < (global ? 1 : n_layers); l++) {
            const ml_tensor *t = ml_mlb_get(mlb, matrix_roles[i], global ? -1 : (int32_t)l);
            ml_status s = check_matrix(t, err);
            if (s)
                return s;
        }
    }
    return check_experts(mlb, err);
}

static const float *vec_of(const ml_tensor *t)
{
    return t ? (const float *)t->data : NULL;
}

/* A MoE layer's router and its experts' matrices, pointing into the
 * mapping: nothing of a large model is copied. */
static ml_status bind_moe(const ml_mlb *mlb, const ml_model *m, uint32_t l, ml_layer *L)
{
    const uint32_t E = m->h.n_experts;
    int32_t i = (int32_t)l;
    L->moe = 1;
    L->wr = vec_of(ml_mlb_get(mlb, ML_R_WR, i));
    L->rb = vec_of(ml_mlb_get(mlb, ML_R_RB, i));
    L->sb = vec_of(ml_mlb_get(mlb, ML_R_SB, i));
    if (!(L->ew = calloc((size_t)E * 3, sizeof *L->ew)))
        return ML_E_NOMEM;
    for (uint32_t e = 0; e < E; e++)
        for (unsigned r = 0; r < 3; r++)
            L->ew[3 * e + r] = mat_of(ml_mlb_get_expert(mlb, (ml_role)(ML_R_EW1 + r), i, e));
    if (m->h.moe_flags & ML_MOE_EXPERT_BIAS) {
        if (!(L->eb = calloc((size_t)E * 3, sizeof *L->eb)))
            return ML_E_NOMEM;
        for (uint32_t e = 0; e < E; e++)
            for (unsigned r = 0; r < 3; r++)
                L->eb[3 * e + r] = vec_of(ml_mlb_get_expert(mlb, (ml_role)(ML_R_EB1 + r), i, e));
    }
    L->ws1 = mat_of(ml_mlb_get(mlb, ML_R_WS1, i));
    L->ws2 = mat_of(ml_mlb_get(mlb, ML_R_WS2, i));
    L->ws3 = mat_of(ml_mlb_get(mlb, ML_R_WS3, i));
    L->wsg = vec_of(ml_mlb_get(mlb, ML_R_WSG, i));
    return ML_OK;
}

static void bind_layer(const ml_mlb *mlb, const ml_model *m, uint32_t l, ml_layer *L)
{
    const ml_mlb_header *h = &m->h;
    int32_t i = (int32_t)l;
#define T(role) ml_mlb_get(mlb, role, i)
    L->flags = ml_mlb_layer_flag(mlb, l);
    L->sliding = h->layer_flags ? (L->flags & ML_LAYER_SLIDING) != 0 : h->sliding_window != 0;
    L->attn_norm = vec_of(T(ML_R_ATTN_NORM));
    L->wq = mat_of(T(ML_R_WQ)), L->wk = mat_of(T(ML_R_WK)), L->wv = mat_of(T(ML_R_WV));
    L->wo = mat_of(T(ML_R_WO)), L->wg = mat_of(T(ML_R_WG));
    L->bq = vec_of(T(ML_R_BQ)), L->bk = vec_of(T(ML_R_BK)), L->bv = vec_of(T(ML_R_BV));
    L->bo = vec_of(T(ML_R_BO)), L->sinks = vec_of(T(ML_R_SINKS));
    L->q_norm = vec_of(T(ML_R_Q_NORM)), L->k_norm = vec_of(T(ML_R_K_NORM));
    L->ffn_norm = vec_of(T(ML_R_FFN_NORM));
    L->w1 = mat_of(T(ML_R_W1)), L->w2 = mat_of(T(ML_R_W2)), L->w3 = mat_of(T(ML_R_W3));
    L->post_attn_norm = vec_of(T(ML_R_POST_ATTN_NORM));
    L->post_ffn_norm = vec_of(T(ML_R_POST_FFN_NORM));
    L->lqkv = mat_of(T(ML_R_LQKV)), L->lz = mat_of(T(ML_R_LZ));
    L->lb = mat_of(T(ML_R_LB)), L->la = mat_of(T(ML_R_LA)), L->lout = mat_of(T(ML_R_LOUT));
    L->lconv = vec_of(T(ML_R_LCONV));
    L->dt_bias = vec_of(T(ML_R_DT_BIAS)), L->A_log = vec_of(T(ML_R_A_LOG));
    L->lnorm = vec_of(T(ML_R_LNORM));
#undef T
    if (L->flags & (ML_LAYER_NO_ROPE | ML_LAYER_LINEAR)) {
        L->inv_freq = NULL;
        L->rope_mul = 1;
    } else if (L->flags & ML_LAYER_LOCAL_ROPE) {
        L->inv_freq = m->inv_freq_local;
        L->rope_mul = 1; /* the local base is used unscaled */
    } else {
        L->inv_freq = m->inv_freq_global;
        L->rope_mul = h->rope_type == ML_ROPE_YARN ? h->rope_attn_factor : 1;
    }
}

/* The activation forms the model's products read (ML_ACTS_*). */
static uint8_t model_acts(const ml_model *m)
{
    unsigned acts = ml__mat_acts(&m->wcls);
    for (uint32_t l = 0; l < m->h.n_layers; l++) {
        const ml_layer *L = &m->layers[l];
        const ml_mat *ws[] = {&L->wq, &L->wk,   &L->wv, &L->wo, &L->wg, &L->w1, &L->w2,
                              &L->w3, &L->lqkv, &L->lz, &L->lb, &L->la, &L->lout};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
            if (ws[i]->q)
                acts |= ml__mat_acts(ws[i]);
        for (size_t i = 0; L->moe && i < 3 * (size_t)m->h.n_experts; i++)
            acts |= ml__mat_acts(&L->ew[i]);
        const ml_mat *shared[] = {&L->ws1, &L->ws2, &L->ws3};
        for (size_t i = 0; i < 3; i++)
            if (shared[i]->q)
                acts |= ml__mat_acts(shared[i]);
    }
    return (uint8_t)acts;
}

ml_status ml_model_new(const ml_mlb *mlb, ml_model **out, ml_error *err)
{
    *out = NULL;
    const ml_mlb_header *h = ml_mlb_get_header(mlb);
    const char *why = NULL;
    ml_kernels composed;
    const ml_kernels *k = ml__kernels_select_into(&composed, &why);
    if (!k)
        return ml__err(err, ML_E_INVAL, ml__kernels_refused_var(why), -1, "%s",
                       why ? why : "no kernels");
    ml_status st = check_matrices(mlb, h->n_layers, err);
    if (st)
        return st;
    ml_model *m = calloc(1, sizeof *m);
    if (!m)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    m->h = *h;
    m->d = *ml_mlb_get_derived(mlb);
    m->composed = composed;
    m->k = k == &composed ? &m->composed : k;
    uint32_t half = m->d.rot_dim / 2;
    m->layers = calloc(h->n_layers, sizeof *m->layers);
    m->inv_freq_global = malloc((half ? half : 1) * sizeof(float));
    m->inv_freq_local = malloc((half ? half : 1) * sizeof(float));
    if (!m->layers || !m->inv_freq_global || !m->inv_freq_local) {
        ml_model_free(m);
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    }
    ml__rope_freqs(h, &m->d, 0, m->inv_freq_global);
    if (h->rope_local_theta > 0)
        ml__rope_freqs(h, &m->d, 1, m->inv_freq_local);
    m->embed_scale = h->embed_scale > 0 ? h->embed_scale : 1.0f;
    m->attn_scale = h->attn_scale > 0 ? h->attn_scale : (float)(1.0 / sqrt(m->d.head_dim));
    m->tok_emb = mat_of(ml_mlb_get(mlb, ML_R_TOK_EMB, -1));
    m->wcls = h->shared_classifier ? m->tok_emb : mat_of(ml_mlb_get(mlb, ML_R_WCLS, -1));
    m->final_norm = vec_of(ml_mlb_get(mlb, ML_R_FINAL_NORM, -1));
    for (uint32_t l = 0; l < h->n_layers; l++) {
        bind_layer(mlb, m, l, &m->layers[l]);
        if (ml_mlb_layer_is_moe(h, m->layers[l].flags) && bind_moe(mlb, m, l, &m->layers[l])) {
            ml_model_free(m);
            return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
        }
    }
    m->acts = model_acts(m);
    *out = m;
    return ML_OK;
}

void ml_model_free(ml_model *m)
{
    if (!m)
        return;
    for (uint32_t l = 0; m->layers && l < m->h.n_layers; l++) {
        free(m->layers[l].ew);
        free(m->layers[l].eb);
    }
    free(m->layers);
    free(m->inv_freq_global);
    free(m->inv_freq_local);
    free(m);
}

const ml_mlb_header *ml_model_header(const ml_model *m)
{
    return &m->h;
}
