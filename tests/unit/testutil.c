/* testutil.c - helpers shared by the unit tests (see testutil.h).  The
 * field table and the body layout here are transcribed from the spec's
 * header table and body listing, deliberately without calling the
 * library's own table or layout iterator, so the tests compare two
 * independent readings of the spec. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------------ */

uint64_t tu_next(tu_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint32_t tu_below(tu_rng *r, uint32_t n)
{
    return (uint32_t)((tu_next(r) >> 32) % n);
}

/* ------------------------------------------------------------------------ */

void tu_mem_init(tu_mem *m)
{
    memset(m, 0, sizeof *m);
    m->fail_at = SIZE_MAX;
}

void tu_mem_free(tu_mem *m)
{
    free(m->p);
    memset(m, 0, sizeof *m);
}

static void fill_err(ml_error *err, ml_status code, const char *msg)
{
    if (!err)
        return;
    memset(err, 0, sizeof *err);
    err->code = code;
    err->offset = -1;
    snprintf(err->msg, sizeof err->msg, "%s", msg);
}

ml_status tu_mem_sink(void *ctx, const void *buf, size_t n, ml_error *err)
{
    tu_mem *m = ctx;
    m->calls++;
    if (m->fail_at != SIZE_MAX && m->len + n > m->fail_at) {
        fill_err(err, ML_E_IO, "test sink: no space left");
        return ML_E_IO;
    }
    if (m->len + n > m->cap) {
        size_t cap = m->cap ? m->cap : 4096;
        while (cap < m->len + n)
            cap *= 2;
        uint8_t *p = realloc(m->p, cap);
        ck_assert_ptr_nonnull(p);
        m->p = p;
        m->cap = cap;
    }
    memcpy(m->p + m->len, buf, n);
    m->len += n;
    return ML_OK;
}

void tu_reader_init(tu_reader *r, const void *p, size_t len, uint64_t seed, size_t max_chunk)
{
    memset(r, 0, sizeof *r);
    r->p = p;
    r->len = len;
    r->rng.s = seed;
    r->max_chunk = max_chunk;
    r->fail_at = SIZE_MAX;
}

long tu_mem_read(void *ctx, void *buf, size_t n, ml_error *err)
{
    tu_reader *r = ctx;
    if (r->fail_at != SIZE_MAX && r->pos >= r->fail_at) {
        fill_err(err, ML_E_IO, "test reader: input/output error");
        return -1;
    }
    size_t k = n;
    if (r->max_chunk) {
        size_t c = 1 + tu_below(&r->rng, (uint32_t)r->max_chunk);
        if (c < k)
            k = c;
    }
    if (k > r->len - r->pos)
        k = r->len - r->pos;
    memcpy(buf, r->p + r->pos, k);
    r->pos += k;
    return (long)k;
}

/* ------------------------------------------------------------------------ */

#define SF(n, off, k) { #n, off, k, offsetof(ml_mlb_header, n) }
const tu_field tu_fields[] = {
    SF(magic, 0, TU_CHARS),          SF(version, 4, TU_U32),
    SF(dim, 8, TU_U32),              SF(n_layers, 12, TU_U32),
    SF(n_heads, 16, TU_U32),         SF(n_kv_heads, 20, TU_U32),
    SF(hidden_dim, 24, TU_U32),      SF(vocab, 28, TU_U32),
    SF(max_seq, 32, TU_U32),         SF(rope_theta, 36, TU_F32),
    SF(norm_eps, 40, TU_F32),        SF(wtype, 44, TU_U32),
    SF(shared_classifier, 48, TU_U32), SF(rope_type, 52, TU_U32),
    SF(rope_factor, 56, TU_F32),     SF(rope_low_freq_factor, 60, TU_F32),
    SF(rope_high_freq_factor, 64, TU_F32), SF(rope_orig_max_seq, 68, TU_U32),
    SF(q8_mask, 72, TU_U32),         SF(qkv_bias, 76, TU_U32),
    SF(head_dim, 80, TU_U32),        SF(qk_norm, 84, TU_U32),
    SF(rope_attn_factor, 88, TU_F32), SF(sliding_window, 92, TU_U32),
    SF(layer_flags, 96, TU_U32),     SF(rope_local_theta, 100, TU_F32),
    SF(act, 104, TU_U32),            SF(post_norms, 108, TU_U32),
    SF(embed_scale, 112, TU_F32),    SF(attn_scale, 116, TU_F32),
    SF(scale_f16, 120, TU_U32),      SF(attn_softcap, 124, TU_F32),
    SF(final_softcap, 128, TU_F32),  SF(rot_dim, 132, TU_U32),
    SF(attn_gate, 136, TU_U32),      SF(lin_k_heads, 140, TU_U32),
    SF(lin_v_heads, 144, TU_U32),    SF(lin_k_dim, 148, TU_U32),
    SF(lin_v_dim, 152, TU_U32),      SF(lin_conv, 156, TU_U32),
    SF(pooling, 160, TU_U32),        SF(n_experts, 164, TU_U32),
    SF(n_experts_used, 168, TU_U32), SF(expert_hidden_dim, 172, TU_U32),
    SF(moe_gating, 176, TU_U32),     SF(moe_flags, 180, TU_U32),
    SF(expert_scale, 184, TU_F32),   SF(shared_hidden_dim, 188, TU_U32),
    SF(swiglu_alpha, 192, TU_F32),   SF(swiglu_limit, 196, TU_F32),
    SF(attn_sinks, 200, TU_U32),     SF(o_bias, 204, TU_U32),
};
#undef SF
const size_t tu_n_fields = sizeof tu_fields / sizeof tu_fields[0];

const tu_field *tu_field_by_name(const char *name)
{
    for (size_t i = 0; i < tu_n_fields; i++)
        if (strcmp(tu_fields[i].name, name) == 0)
            return &tu_fields[i];
    return NULL;
}

void tu_apply(ml_mlb_header *h, uint8_t *raw, const char *spec)
{
    char *copy = strdup(spec), *save = NULL;
    ck_assert_ptr_nonnull(copy);
    for (char *tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(tok, '=');
        ck_assert_msg(eq != NULL, "bad token %s", tok);
        *eq = 0;
        const char *val = eq + 1;
        char *end = NULL;
        if (strncmp(tok, "raw:", 4) == 0) {
            ck_assert_ptr_nonnull(raw);
            unsigned long off = strtoul(tok + 4, &end, 0);
            ck_assert(*end == 0 && off < ML_MLB_HEADER_SIZE);
            unsigned long b = strtoul(val, &end, 0);
            ck_assert(*end == 0 && b < 256);
            raw[off] = (uint8_t)b;
            continue;
        }
        const tu_field *f = tu_field_by_name(tok);
        ck_assert_msg(f != NULL, "unknown field %s", tok);
        char *dst = (char *)h + f->member;
        if (f->kind == TU_CHARS) {
            size_t n = strlen(val);
            memset(dst, 0, 4);
            memcpy(dst, val, n < 4 ? n : 4);
        } else if (f->kind == TU_U32) {
            unsigned long long v = strtoull(val, &end, 0);
            ck_assert_msg(*end == 0 && v <= 0xffffffffull, "bad u32 %s", val);
            uint32_t u = (uint32_t)v;
            memcpy(dst, &u, 4);
        } else {
            float v = strtof(val, &end);
            ck_assert_msg(*end == 0, "bad f32 %s", val);
            memcpy(dst, &v, 4);
        }
    }
    free(copy);
}

void tu_base_header(ml_mlb_header *h)
{
    ml_mlb_header_init(h);
    h->dim = 64;
    h->n_layers = 4;
    h->n_heads = 4;
    h->n_kv_heads = 2;
    h->hidden_dim = 128;
    h->vocab = 256;
    h->max_seq = 256;
    h->rope_theta = 10000.0f;
    h->norm_eps = 1e-5f;
    h->wtype = ML_WTYPE_Q4_0;
}

void tu_full_header(ml_mlb_header *h, uint8_t flags[4])
{
    ml_mlb_header_init(h);
    tu_apply(h, NULL,
             "dim=64 n_layers=4 n_heads=4 n_kv_heads=2 hidden_dim=96 vocab=300 max_seq=512 "
             "rope_theta=1000000 norm_eps=1e-6 wtype=2 q8_mask=0x41 qkv_bias=1 head_dim=24 "
             "qk_norm=1 sliding_window=16 rope_local_theta=10000 act=1 post_norms=1 "
             "embed_scale=8 attn_scale=0.0625 scale_f16=1 attn_softcap=50 final_softcap=30 "
             "rot_dim=12 attn_gate=1 lin_k_heads=2 lin_v_heads=4 lin_k_dim=16 lin_v_dim=16 "
             "lin_conv=4 rope_type=3 rope_factor=4 rope_low_freq_factor=32 "
             "rope_high_freq_factor=1 rope_orig_max_seq=128 rope_attn_factor=1.1386 "
             "layer_flags=1");
    flags[0] = 1, flags[1] = 2, flags[2] = 4, flags[3] = 8;
}

/* ------------------------------------------------------------------------
 * Reference layout, from the spec's "Body" listing.
 * ------------------------------------------------------------------------ */

uint64_t tu_align64(uint64_t v)
{
    return (v + 63) & ~(uint64_t)63;
}

uint64_t tu_ref_end(const tu_ref *t)
{
    return t->scale_nbytes ? t->scale_offset + t->scale_nbytes : t->offset + t->nbytes;
}

void tu_derive(const ml_mlb_header *h, tu_dims *d)
{
    d->head_dim = h->head_dim ? h->head_dim : (h->n_heads ? h->dim / h->n_heads : 0);
    d->q_dim = d->head_dim * h->n_heads;
    d->kv_dim = d->head_dim * h->n_kv_heads;
    d->rot_dim = h->rot_dim ? h->rot_dim : d->head_dim;
    d->lin_qkv = 2ull * h->lin_k_heads * h->lin_k_dim + (uint64_t)h->lin_v_heads * h->lin_v_dim;
    d->lin_vd = (uint64_t)h->lin_v_heads * h->lin_v_dim;
}

typedef struct lay {
    const ml_mlb_header *h;
    tu_ref *out;
    size_t cap, n;
    uint64_t pos, end;
} lay;

static tu_ref *slot(lay *L, const char *name, int32_t layer, ml_role role)
{
    static tu_ref scratch;
    tu_ref *t = L->n < L->cap ? &L->out[L->n] : &scratch;
    L->n++;
    memset(t, 0, sizeof *t);
    if (layer >= 0)
        snprintf(t->name, sizeof t->name, "blk.%d.%s", layer, name);
    else
        snprintf(t->name, sizeof t->name, "%s", name);
    t->role = role;
    t->layer = layer;
    return t;
}

static uint64_t place(lay *L, uint64_t bytes)
{
    uint64_t off = tu_align64(L->pos);
    L->pos = off + bytes;
    L->end = L->pos;
    return off;
}

/* An F32 vector (or the U8 flags). */
static void vec(lay *L, const char *name, int32_t layer, ml_role role, uint64_t n, ml_type type)
{
    tu_ref *t = slot(L, name, layer, role);
    t->type = type;
    t->ndim = 1;
    t->rows = (uint32_t)n;
    t->cols = 1;
    t->nbytes = type == ML_TYPE_U8 ? n : 4 * n;
    t->offset = place(L, t->nbytes);
}

/* A quantized matrix: wtype, or Q8_0 if its class is in q8_mask (or forced). */
static void mat(lay *L, const char *name, int32_t layer, ml_role role, uint64_t rows, uint64_t cols,
                uint32_t cls, int force_q8)
{
    const ml_mlb_header *h = L->h;
    tu_ref *t = slot(L, name, layer, role);
    int q8 = h->wtype == 1 || force_q8 || (h->q8_mask & cls);
    t->type = q8 ? ML_TYPE_Q8_0 : ML_TYPE_Q4_0;
    t->ndim = 2;
    t->rows = (uint32_t)rows;
    t->cols = (uint32_t)cols;
    t->q8_class = cls;
    uint64_t n = rows * cols;
    t->nbytes = q8 ? n : n / 2;
    t->offset = place(L, t->nbytes);
    t->scale_nbytes = n / 32 * (h->scale_f16 ? 2 : 4);
    t->scale_offset = place(L, t->scale_nbytes);
}

size_t tu_ref_layout(const ml_mlb_header *h, const uint8_t *flags, tu_ref *out, size_t cap,
                     uint64_t *end)
{
    lay L = {h, out, cap, 0, 256, 256};
    tu_dims d;
    tu_derive(h, &d);
    uint64_t dim = h->dim, V = h->lin_v_heads;
    if (h->layer_flags)
        vec(&L, "layer_flags", -1, ML_R_LAYER_FLAGS, h->n_layers, ML_TYPE_U8);
    mat(&L, "tok_emb", -1, ML_R_TOK_EMB, h->vocab, dim, h->shared_classifier ? 1 | 2 : 1, 0);
    for (uint32_t l = 0; l < h->n_layers; l++) {
        int32_t li = (int32_t)l;
        uint8_t f = h->layer_flags ? flags[l] : 0;
        vec(&L, "attn_norm", li, ML_R_ATTN_NORM, dim, ML_TYPE_F32);
        if (f & 8) {
            mat(&L, "lqkv", li, ML_R_LQKV, d.lin_qkv, dim, 4, 0);
            mat(&L, "lz", li, ML_R_LZ, d.lin_vd, dim, 8, 0);
            mat(&L, "lb", li, ML_R_LB, V, dim, 0, 1);
            mat(&L, "la", li, ML_R_LA, V, dim, 0, 1);
            tu_ref *t = slot(&L, "lconv", li, ML_R_LCONV);
            t->type = ML_TYPE_F32;
            t->ndim = 2;
            t->rows = (uint32_t)d.lin_qkv;
            t->cols = h->lin_conv;
            t->nbytes = 4 * d.lin_qkv * h->lin_conv;
            t->offset = place(&L, t->nbytes);
            vec(&L, "dt_bias", li, ML_R_DT_BIAS, V, ML_TYPE_F32);
            vec(&L, "A_log", li, ML_R_A_LOG, V, ML_TYPE_F32);
            vec(&L, "lnorm", li, ML_R_LNORM, h->lin_v_dim, ML_TYPE_F32);
            mat(&L, "lout", li, ML_R_LOUT, dim, d.lin_vd, 16, 0);
        } else {
            mat(&L, "wq", li, ML_R_WQ, d.q_dim, dim, 4, 0);
            mat(&L, "wk", li, ML_R_WK, d.kv_dim, dim, 4, 0);
            mat(&L, "wv", li, ML_R_WV, d.kv_dim, dim, 8, 0);
            mat(&L, "wo", li, ML_R_WO, dim, d.q_dim, 16, 0);
            if (h->attn_gate)
                mat(&L, "wg", li, ML_R_WG, d.q_dim, dim, 4, 0);
            if (h->qkv_bias) {
                vec(&L, "bq", li, ML_R_BQ, d.q_dim, ML_TYPE_F32);
                vec(&L, "bk", li, ML_R_BK, d.kv_dim, ML_TYPE_F32);
                vec(&L, "bv", li, ML_R_BV, d.kv_dim, ML_TYPE_F32);
            }
            if (h->qk_norm) {
                vec(&L, "q_norm", li, ML_R_Q_NORM, d.head_dim, ML_TYPE_F32);
                vec(&L, "k_norm", li, ML_R_K_NORM, d.head_dim, ML_TYPE_F32);
            }
        }
        vec(&L, "ffn_norm", li, ML_R_FFN_NORM, dim, ML_TYPE_F32);
        mat(&L, "w1", li, ML_R_W1, h->hidden_dim, dim, 32, 0);
        mat(&L, "w2", li, ML_R_W2, dim, h->hidden_dim, 64, 0);
        mat(&L, "w3", li, ML_R_W3, h->hidden_dim, dim, 32, 0);
        if (h->post_norms) {
            vec(&L, "post_attn_norm", li, ML_R_POST_ATTN_NORM, dim, ML_TYPE_F32);
            vec(&L, "post_ffn_norm", li, ML_R_POST_FFN_NORM, dim, ML_TYPE_F32);
        }
    }
    vec(&L, "final_norm", -1, ML_R_FINAL_NORM, dim, ML_TYPE_F32);
    if (!h->shared_classifier)
        mat(&L, "wcls", -1, ML_R_WCLS, h->vocab, dim, 2, 0);
    if (end)
        *end = L.end;
    return L.n;
}

/* ------------------------------------------------------------------------
 * Random valid headers
 * ------------------------------------------------------------------------ */

void tu_random_header(tu_rng *r, unsigned v, ml_mlb_header *h, uint8_t *flags)
{
    ml_mlb_header_init(h);
    h->dim = 32 * (1 + tu_below(r, 4));
    h->n_layers = 1 + tu_below(r, 4);
    if (tu_below(r, 3) == 0) { /* explicit head_dim, different from dim / n_heads */
        static const uint32_t nh[] = {1, 2, 3, 4, 6, 8};
        do {
            h->n_heads = nh[tu_below(r, 6)];
            h->head_dim = 2 * (1 + tu_below(r, 40));
        } while ((h->head_dim * h->n_heads) % 32 ||
                 (h->dim % h->n_heads == 0 && h->head_dim == h->dim / h->n_heads));
    } else {
        do
            h->n_heads = 1 + tu_below(r, h->dim);
        while (h->dim % h->n_heads || (h->dim / h->n_heads) % 2);
    }
    do
        h->n_kv_heads = 1 + tu_below(r, h->n_heads);
    while (h->n_heads % h->n_kv_heads);
    uint32_t hd = h->head_dim ? h->head_dim : h->dim / h->n_heads;
    if (tu_below(r, 3) == 0)
        h->rot_dim = 2 * (1 + tu_below(r, hd / 2));
    h->hidden_dim = 32 * (1 + tu_below(r, 4));
    h->vocab = 3 + tu_below(r, 300);
    h->max_seq = tu_below(r, 8) == 0 ? 1u << 24 : 1 + tu_below(r, 4096);
    h->rope_theta = tu_below(r, 2) ? 10000.0f : 1e6f;
    h->norm_eps = tu_below(r, 3) == 0 ? 0.0f : 1e-5f;
    h->wtype = tu_below(r, 2) ? ML_WTYPE_Q4_0 : ML_WTYPE_Q8_0;
    if (h->wtype == ML_WTYPE_Q4_0 && tu_below(r, 3))
        h->q8_mask = tu_below(r, 128);
    h->shared_classifier = tu_below(r, 2) ? (tu_below(r, 4) ? 1 : 7) : 0;
    h->rope_type = v % 4;
    switch (h->rope_type) {
    case ML_ROPE_LLAMA3:
        h->rope_factor = (float)(1 + tu_below(r, 32));
        h->rope_low_freq_factor = 1.0f;
        h->rope_high_freq_factor = 4.0f;
        h->rope_orig_max_seq = 8192;
        break;
    case ML_ROPE_LINEAR:
        h->rope_factor = 0.5f + (float)tu_below(r, 8);
        break;
    case ML_ROPE_YARN:
        h->rope_factor = 4.0f;
        h->rope_low_freq_factor = 32.0f;
        h->rope_high_freq_factor = 1.0f;
        h->rope_orig_max_seq = 4096;
        h->rope_attn_factor = 1.1386f;
        break;
    default:
        break;
    }
    h->qkv_bias = tu_below(r, 2);
    h->qk_norm = tu_below(r, 2);
    h->post_norms = tu_below(r, 2);
    h->attn_gate = tu_below(r, 2);
    h->scale_f16 = tu_below(r, 2);
    h->act = tu_below(r, 2);
    h->embed_scale = tu_below(r, 2) ? 8.0f : 0.0f;
    h->attn_scale = tu_below(r, 2) ? 0.0625f : 0.0f;
    h->attn_softcap = tu_below(r, 2) ? 50.0f : 0.0f;
    h->final_softcap = tu_below(r, 2) ? 30.0f : 0.0f;
    h->sliding_window = tu_below(r, 2) ? 1 + tu_below(r, 64) : 0;
    h->rope_local_theta = tu_below(r, 2) ? 10000.0f : 0.0f;
    if (tu_below(r, 2)) {
        static const uint32_t kh[] = {1, 2, 4};
        h->lin_k_heads = kh[tu_below(r, 3)];
        h->lin_v_heads = 4 * (1 + tu_below(r, 2));
        h->lin_k_dim = 2 * (1 + tu_below(r, 16));
        h->lin_v_dim = (h->lin_v_heads == 4 ? 8 : 4) * (1 + tu_below(r, 4));
        h->lin_conv = 1 + tu_below(r, 5);
    }
    if ((v / 4) % 2 || tu_below(r, 2)) {
        uint8_t allowed[8];
        unsigned na = 0;
        allowed[na++] = 0;
        allowed[na++] = 4;
        if (h->sliding_window)
            allowed[na++] = 1, allowed[na++] = 5;
        if (h->rope_local_theta != 0)
            allowed[na++] = 2;
        if (h->rope_local_theta != 0 && h->sliding_window)
            allowed[na++] = 3;
        if (h->lin_k_heads)
            allowed[na++] = 8;
        h->layer_flags = 1;
        for (uint32_t l = 0; l < h->n_layers; l++)
            flags[l] = allowed[tu_below(r, na)];
    }
}

/* ------------------------------------------------------------------------
 * Models
 * ------------------------------------------------------------------------ */

void tu_write_random(const ml_mlb_header *h, const uint8_t *flags, uint64_t seed, tu_mem *out)
{
    ml_error err;
    tu_mem_init(out);
    ml_status s = ml_mlb_write_random(h, flags, seed, tu_mem_sink, out, &err);
    ck_assert_msg(s == ML_OK, "ml_mlb_write_random: %s: %s", ml_status_name(s), err.msg);
}

void tu_tensor_content(const ml_mlb_header *h, const tu_ref *t, uint64_t seed, size_t index,
                       uint8_t *data, uint8_t *scales)
{
    tu_rng r = {seed * 0x100000001b3ull ^ (index + 1) * 0x9e3779b97f4a7c15ull};
    if (t->type == ML_TYPE_F32) {
        for (uint64_t i = 0; i < t->nbytes; i += 4) {
            uint32_t u = (uint32_t)tu_next(&r);
            if ((u & 0x7f800000u) == 0x7f800000u) /* finite values only */
                u &= ~0x00800000u;
            memcpy(data + i, &u, 4);
        }
        return;
    }
    for (uint64_t i = 0; i < t->nbytes; i++) {
        uint8_t b = (uint8_t)tu_next(&r);
        data[i] = t->type == ML_TYPE_Q8_0 && b == 0x80 ? 0x7f : b;
    }
    if (h->scale_f16) {
        for (uint64_t i = 0; i < t->scale_nbytes; i += 2) {
            uint16_t u = (uint16_t)tu_next(&r);
            if ((u & 0x7c00) == 0x7c00)
                u &= (uint16_t)~0x0400;
            memcpy(scales + i, &u, 2);
        }
    } else {
        for (uint64_t i = 0; i < t->scale_nbytes; i += 4) {
            uint32_t u = (uint32_t)tu_next(&r);
            if ((u & 0x7f800000u) == 0x7f800000u)
                u &= ~0x00800000u;
            memcpy(scales + i, &u, 4);
        }
    }
}

void tu_write_own(const ml_mlb_header *h, const uint8_t *flags, uint64_t seed, tu_mem *out)
{
    ml_error err;
    uint64_t end;
    tu_mem_init(out);
    size_t n = tu_ref_layout(h, flags, NULL, 0, &end);
    tu_ref *ref = calloc(n, sizeof *ref);
    ck_assert_ptr_nonnull(ref);
    tu_ref_layout(h, flags, ref, n, NULL);
    ml_mlb_writer *w;
    ml_status s = ml_mlb_writer_new(h, flags, tu_mem_sink, out, &w, &err);
    ck_assert_msg(s == ML_OK, "writer_new: %s", err.msg);
    for (size_t i = h->layer_flags ? 1 : 0; i < n; i++) {
        const ml_tensor *e = ml_mlb_writer_expect(w);
        ck_assert_ptr_nonnull(e);
        ck_assert_str_eq(e->name, ref[i].name);
        ck_assert_int_eq(e->type, ref[i].type);
        ck_assert_uint_eq(e->offset, ref[i].offset);
        ck_assert_uint_eq(e->nbytes, ref[i].nbytes);
        ck_assert_uint_eq(e->scale_offset, ref[i].scale_offset);
        ck_assert_uint_eq(e->scale_nbytes, ref[i].scale_nbytes);
        uint8_t *data = malloc(ref[i].nbytes + 1), *sc = malloc(ref[i].scale_nbytes + 1);
        ck_assert(data && sc);
        tu_tensor_content(h, &ref[i], seed, i, data, sc);
        s = ml_mlb_writer_put(w, data, ref[i].nbytes, ref[i].scale_nbytes ? sc : NULL,
                              ref[i].scale_nbytes, &err);
        free(data);
        free(sc);
        ck_assert_msg(s == ML_OK, "put %s: %s", ref[i].name, err.msg);
    }
    ck_assert_ptr_null(ml_mlb_writer_expect(w));
    s = ml_mlb_writer_finish(w, &err);
    ck_assert_msg(s == ML_OK, "finish: %s", err.msg);
    ck_assert_uint_eq(out->len, tu_align64(end));
    free(ref);
}

void tu_buf_copy(tu_buf *b, const void *src, size_t len, size_t misalign)
{
    void *base = NULL;
    ck_assert_int_eq(posix_memalign(&base, 64, misalign + len ? misalign + len : 1), 0);
    b->base = base;
    b->p = (uint8_t *)base + misalign;
    b->len = len;
    if (len)
        memcpy(b->p, src, len);
}

void tu_buf_free(tu_buf *b)
{
    free(b->base);
    memset(b, 0, sizeof *b);
}

void tu_err_reset(ml_error *e)
{
    memset(e, 0x5a, sizeof *e);
    e->code = (ml_status)99;
    e->offset = 123456789;
    snprintf(e->field, sizeof e->field, "(not set)");
    snprintf(e->msg, sizeof e->msg, "(not set)");
}

ml_mlb *tu_open_copy(tu_buf *b, const tu_mem *m)
{
    ml_mlb *mlb;
    ml_error err;
    tu_buf_copy(b, m->p, m->len, 0);
    ml_status s = ml_mlb_open_memory(b->p, b->len, &mlb, &err);
    ck_assert_msg(s == ML_OK, "%s: %s", ml_status_name(s), err.msg);
    return mlb;
}

void tu_moe_header(ml_mlb_header *h, uint32_t wtype)
{
    tu_base_header(h);
    char spec[256];
    snprintf(spec, sizeof spec,
             "vocab=64 max_seq=64 n_layers=2 hidden_dim=0 qk_norm=1 wtype=%u n_experts=8 "
             "n_experts_used=2 expert_hidden_dim=32 moe_flags=1",
             wtype);
    tu_apply(h, NULL, spec);
}

char *tu_slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long len = ftell(f);
    ck_assert_int_ge(len, 0);
    rewind(f);
    char *p = malloc((size_t)len + 1);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(fread(p, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    p[len] = 0;
    *n = (size_t)len;
    return p;
}
