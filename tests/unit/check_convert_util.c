/* check_convert_util.c - the converter tests' GGUF writer, tiny models,
 * in-memory conversion and the tensor mapping written out from
 * gguf2mlb(1) (see check_convert_util.h).  The block encoders follow
 * ggml's reference quantizers as docs/gguf-mapping.md describes them. */
#include "check_convert_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* ===========================================================================
 * GGUF writer
 * ========================================================================= */

static void put(tu_mem *m, const void *p, size_t n)
{
    ck_assert(tu_mem_sink(m, p, n, NULL) == ML_OK);
}
static void put32(tu_mem *m, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(m, b, 4);
}
static void put64(tu_mem *m, uint64_t v)
{
    put32(m, (uint32_t)v);
    put32(m, (uint32_t)(v >> 32));
}
static void put_str(tu_mem *m, const char *s)
{
    put64(m, strlen(s));
    put(m, s, strlen(s));
}

void cg_init(cg *g)
{
    memset(g, 0, sizeof *g);
    g->alignment = 32;
}

void cg_free(cg *g)
{
    for (size_t i = 0; i < g->n_kv; i++)
        tu_mem_free(&g->kv[i].val);
    free(g->kv);
    for (size_t i = 0; i < g->n_t; i++)
        free(g->t[i].data);
    free(g->t);
    memset(g, 0, sizeof *g);
}

void cg_drop(cg *g, const char *k)
{
    for (size_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kv[i].key, k) == 0) {
            tu_mem_free(&g->kv[i].val);
            memmove(&g->kv[i], &g->kv[i + 1], (g->n_kv - i - 1) * sizeof *g->kv);
            g->n_kv--;
            return;
        }
    ck_abort_msg("cg_drop: no key %s", k);
}

/* The value buffer of a key, emptied (a new key is appended). */
static tu_mem *key(cg *g, const char *k, uint32_t type)
{
    cg_kv *kv = NULL;
    for (size_t i = 0; i < g->n_kv && !kv; i++)
        if (strcmp(g->kv[i].key, k) == 0)
            kv = &g->kv[i];
    if (kv) {
        tu_mem_free(&kv->val);
    } else {
        if (g->n_kv == g->cap_kv) {
            g->cap_kv = g->cap_kv ? 2 * g->cap_kv : 32;
            g->kv = realloc(g->kv, g->cap_kv * sizeof *g->kv);
            ck_assert_ptr_nonnull(g->kv);
        }
        kv = &g->kv[g->n_kv++];
        snprintf(kv->key, sizeof kv->key, "%s", k);
    }
    tu_mem_init(&kv->val);
    put32(&kv->val, type);
    return &kv->val;
}

void cg_u32(cg *g, const char *k, uint32_t v)
{
    put32(key(g, k, ML_GGUF_U32), v);
}
void cg_i32(cg *g, const char *k, int32_t v)
{
    put32(key(g, k, ML_GGUF_I32), (uint32_t)v);
}
void cg_f32(cg *g, const char *k, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    put32(key(g, k, ML_GGUF_F32), u);
}
void cg_bool(cg *g, const char *k, int v)
{
    uint8_t b = (uint8_t)v;
    put(key(g, k, ML_GGUF_BOOL), &b, 1);
}
void cg_str(cg *g, const char *k, const char *s)
{
    put_str(key(g, k, ML_GGUF_STRING), s);
}
void cg_arr_u32(cg *g, const char *k, const uint32_t *v, size_t n)
{
    tu_mem *m = key(g, k, ML_GGUF_ARRAY);
    put32(m, ML_GGUF_U32);
    put64(m, n);
    for (size_t i = 0; i < n; i++)
        put32(m, v[i]);
}
void cg_arr_bool(cg *g, const char *k, const uint8_t *v, size_t n)
{
    tu_mem *m = key(g, k, ML_GGUF_ARRAY);
    put32(m, ML_GGUF_BOOL);
    put64(m, n);
    put(m, v, n);
}
void cg_arr_str(cg *g, const char *k, const char *const *v, size_t n)
{
    tu_mem *m = key(g, k, ML_GGUF_ARRAY);
    put32(m, ML_GGUF_STRING);
    put64(m, n);
    for (size_t i = 0; i < n; i++)
        put_str(m, v[i]);
}

/* ---- block encoders ---- */

static uint32_t block_elems(uint32_t type)
{
    uint32_t be = 1;
    ck_assert(ml_gguf_type_size(type, &be, NULL));
    return be;
}

size_t cg_row_bytes(uint32_t type, uint64_t n)
{
    uint32_t be, bb;
    ck_assert(ml_gguf_type_size(type, &be, &bb));
    return (size_t)(n / be * bb);
}

static void wr16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8);
}

static void enc_q8_0(const float *x, uint8_t *o)
{
    float amax = 0;
    for (int j = 0; j < 32; j++)
        amax = fmaxf(amax, fabsf(x[j]));
    float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
    wr16(o, ml_f32_to_f16(d));
    for (int j = 0; j < 32; j++)
        o[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
}

/* Q4_0 and Q5_0: d = (element of largest magnitude) / -2^(bits-1). */
static void enc_q4_5(const float *x, uint8_t *o, int five)
{
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax)
            amax = fabsf(x[j]), max = x[j];
    float d = max / (five ? -16.0f : -8.0f), id = d ? 1.0f / d : 0.0f;
    wr16(o, ml_f32_to_f16(d));
    uint8_t *qs = o + (five ? 6 : 2);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        int a = (int)(int8_t)(x[j] * id + (five ? 16.5f : 8.5f));
        int b = (int)(int8_t)(x[j + 16] * id + (five ? 16.5f : 8.5f));
        int top = five ? 31 : 15;
        a = a > top ? top : a < 0 ? 0 : a;
        b = b > top ? top : b < 0 ? 0 : b;
        qs[j] = (uint8_t)((a & 15) | (b & 15) << 4);
        qh |= (uint32_t)(a >> 4) << j | (uint32_t)(b >> 4) << (j + 16);
    }
    if (five)
        o[2] = (uint8_t)qh, o[3] = (uint8_t)(qh >> 8), o[4] = (uint8_t)(qh >> 16),
        o[5] = (uint8_t)(qh >> 24);
}

static const int8_t iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                 1,    13,   25,  38,  53,  69,  89,  113};

static void enc_iq4_nl(const float *x, uint8_t *o)
{
    float amax = 0;
    for (int j = 0; j < 32; j++)
        amax = fmaxf(amax, fabsf(x[j]));
    float d = amax / 127.0f;
    wr16(o, ml_f32_to_f16(d));
    d = ml_f16_to_f32(ml_f32_to_f16(d));
    for (int j = 0; j < 32; j++) {
        int best = 0;
        for (int k = 1; k < 16; k++)
            if (fabsf(x[j] - d * iq4nl[k]) < fabsf(x[j] - d * iq4nl[best]))
                best = k;
        if (j < 16)
            o[2 + j] = (uint8_t)best;
        else
            o[2 + j - 16] |= (uint8_t)(best << 4);
    }
}

void cg_encode(uint32_t type, const float *x, uint64_t n, uint8_t *out)
{
    for (uint64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        switch (type) {
        case ML_GGML_F32: memcpy(out + 4 * i, &x[i], 4); break;
        case ML_GGML_F16: wr16(out + 2 * i, ml_f32_to_f16(x[i])); break;
        case ML_GGML_BF16:
            wr16(out + 2 * i, (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16));
            break;
        default: break;
        }
    }
    if (type == ML_GGML_F32 || type == ML_GGML_F16 || type == ML_GGML_BF16)
        return;
    size_t bb = cg_row_bytes(type, 32);
    for (uint64_t b = 0; b < n / 32; b++) {
        const float *xb = x + 32 * b;
        uint8_t *o = out + b * bb;
        switch (type) {
        case ML_GGML_Q8_0: enc_q8_0(xb, o); break;
        case ML_GGML_Q4_0: enc_q4_5(xb, o, 0); break;
        case ML_GGML_Q5_0: enc_q4_5(xb, o, 1); break;
        case ML_GGML_IQ4_NL: enc_iq4_nl(xb, o); break;
        default: ck_abort_msg("cg_encode: type %u", type);
        }
    }
}

static cg_tensor *new_tensor(cg *g, const char *name)
{
    if (g->n_t == g->cap_t) {
        g->cap_t = g->cap_t ? 2 * g->cap_t : 32;
        g->t = realloc(g->t, g->cap_t * sizeof *g->t);
        ck_assert_ptr_nonnull(g->t);
    }
    cg_tensor *t = &g->t[g->n_t++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    return t;
}

cg_tensor *cg_tensor_raw(cg *g, const char *name, uint32_t type, uint32_t n_dims,
                         const uint64_t *dims, const void *data, size_t nbytes)
{
    cg_tensor *t = new_tensor(g, name);
    t->type = type, t->n_dims = n_dims;
    for (uint32_t i = 0; i < 4; i++)
        t->dims[i] = i < n_dims ? dims[i] : 1;
    t->data = malloc(nbytes ? nbytes : 1);
    ck_assert_ptr_nonnull(t->data);
    memcpy(t->data, data, nbytes);
    t->nbytes = nbytes;
    return t;
}

cg_tensor *cg_tensor_f(cg *g, const char *name, uint32_t type, uint64_t cols, uint64_t rows,
                       const float *x)
{
    uint64_t n = cols * (rows ? rows : 1);
    ck_assert_msg(cols % block_elems(type) == 0, "%s: %llu columns for type %u", name,
                  (unsigned long long)cols, type);
    size_t nb = cg_row_bytes(type, cols) * (rows ? rows : 1);
    uint8_t *buf = malloc(nb);
    ck_assert_ptr_nonnull(buf);
    for (uint64_t r = 0; r < (rows ? rows : 1); r++)
        cg_encode(type, x + r * cols, cols, buf + r * cg_row_bytes(type, cols));
    uint64_t dims[2] = {cols, rows};
    cg_tensor *t = cg_tensor_raw(g, name, type, rows ? 2 : 1, dims, buf, nb);
    free(buf);
    (void)n;
    return t;
}

cg_tensor *cg_find(cg *g, const char *name)
{
    for (size_t i = 0; i < g->n_t; i++)
        if (strcmp(g->t[i].name, name) == 0)
            return &g->t[i];
    return NULL;
}

void cg_remove(cg *g, const char *name)
{
    cg_tensor *t = cg_find(g, name);
    ck_assert_msg(t != NULL, "cg_remove: no %s", name);
    free(t->data);
    *t = g->t[--g->n_t];
}

uint8_t *cg_finish(cg *g, size_t *len)
{
    tu_mem m;
    tu_mem_init(&m);
    put(&m, "GGUF", 4);
    put32(&m, 3);
    put64(&m, g->n_t);
    put64(&m, g->n_kv);
    for (size_t i = 0; i < g->n_kv; i++) {
        put_str(&m, g->kv[i].key);
        put(&m, g->kv[i].val.p, g->kv[i].val.len);
    }
    uint64_t off = 0;
    for (size_t i = 0; i < g->n_t; i++) {
        cg_tensor *t = &g->t[i];
        put_str(&m, t->name);
        put32(&m, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++)
            put64(&m, t->dims[d]);
        put32(&m, t->type);
        put64(&m, off);
        off += (t->nbytes + g->alignment - 1) / g->alignment * g->alignment;
    }
    static const uint8_t zeros[64];
    while (m.len % g->alignment)
        put(&m, zeros, 1);
    for (size_t i = 0; i < g->n_t; i++) {
        put(&m, g->t[i].data, g->t[i].nbytes);
        while (m.len % g->alignment)
            put(&m, zeros, 1);
    }
    *len = m.len;
    return m.p;
}

/* ===========================================================================
 * Models
 * ========================================================================= */

void tc_default(tc_spec *s, const char *arch)
{
    memset(s, 0, sizeof *s);
    s->arch = arch;
    s->dim = 64, s->n_layers = 2, s->n_heads = 4, s->n_kv_heads = 2, s->hidden = 96;
    s->vocab = 100, s->ctx = 256, s->mtype = ML_GGML_Q8_0, s->seed = 7;
    if (!strcmp(arch, "qwen2"))
        s->biases = 1, s->tied = 1;
    if (!strcmp(arch, "qwen3"))
        s->head_dim = 32, s->tied = 1;
    if (!strcmp(arch, "gemma") || !strcmp(arch, "gemma2"))
        s->head_dim = 32, s->tied = 1;
    if (!strcmp(arch, "gemma3"))
        s->head_dim = 32, s->n_layers = 6, s->tied = 1;
    if (!strcmp(arch, "smollm3"))
        s->n_layers = 4, s->tied = 1;
    if (!strcmp(arch, "qwen35")) {
        s->n_layers = 4, s->head_dim = 32, s->rot = 8, s->tied = 1;
        s->lin_k = 2, s->lin_v = 4, s->lin_dk = 16, s->lin_dv = 32, s->conv = 4;
        s->interval = 4, s->nextn = 1;
    }
}

typedef struct mk {
    cg *g;
    const tc_spec *s;
    tu_rng rng;
} mk;

static float rnd(mk *m, float scale)
{
    /* uniform in (-scale, scale), from 24 bits */
    return scale * ((float)(tu_next(&m->rng) >> 40) / 8388608.0f - 1.0f);
}

static void mat(mk *m, uint32_t type, uint64_t cols, uint64_t rows, float scale, const char *fmt,
                ...) __attribute__((format(printf, 6, 7)));
static void mat(mk *m, uint32_t type, uint64_t cols, uint64_t rows, float scale, const char *fmt,
                ...)
{
    char name[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    uint64_t n = cols * (rows ? rows : 1);
    float *x = malloc(n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (uint64_t i = 0; i < n; i++)
        x[i] = rows ? rnd(m, scale) : 1.0f + rnd(m, scale);
    cg_tensor_f(m->g, name, type, cols, rows, x);
    free(x);
}

static int arch_is(const tc_spec *s, const char *a)
{
    return strcmp(s->arch, a) == 0;
}

#define KEY(buf, suffix) (snprintf(buf, sizeof buf, "%s.%s", s->arch, suffix), buf)

static void build_keys(cg *g, const tc_spec *s)
{
    char k[96];
    cg_str(g, "general.architecture", s->arch);
    cg_str(g, "general.name", "tiny");
    cg_u32(g, KEY(k, "block_count"), s->n_layers + s->nextn);
    cg_u32(g, KEY(k, "context_length"), s->ctx);
    cg_u32(g, KEY(k, "embedding_length"), s->dim);
    cg_u32(g, KEY(k, "feed_forward_length"), s->hidden);
    cg_u32(g, KEY(k, "attention.head_count"), s->n_heads);
    cg_u32(g, KEY(k, "attention.head_count_kv"), s->n_kv_heads);
    cg_f32(g, KEY(k, "attention.layer_norm_rms_epsilon"), 1e-6f);
    cg_f32(g, KEY(k, "rope.freq_base"), 10000.0f);
    if (s->head_dim) {
        cg_u32(g, KEY(k, "attention.key_length"), s->head_dim);
        cg_u32(g, KEY(k, "attention.value_length"), s->head_dim);
    }
    if (s->rot)
        cg_u32(g, KEY(k, "rope.dimension_count"), s->rot);
    if (arch_is(s, "gemma2") || arch_is(s, "gemma3"))
        cg_u32(g, KEY(k, "attention.sliding_window"), 8);
    if (arch_is(s, "qwen35")) {
        cg_u32(g, KEY(k, "ssm.conv_kernel"), s->conv);
        cg_u32(g, KEY(k, "ssm.state_size"), s->lin_dk);
        cg_u32(g, KEY(k, "ssm.group_count"), s->lin_k);
        cg_u32(g, KEY(k, "ssm.time_step_rank"), s->lin_v);
        cg_u32(g, KEY(k, "ssm.inner_size"), s->lin_v * s->lin_dv);
        cg_u32(g, KEY(k, "full_attention_interval"), s->interval);
        if (s->nextn)
            cg_u32(g, KEY(k, "nextn_predict_layers"), s->nextn);
    }
}

static void attention_layer(mk *m, uint32_t l)
{
    const tc_spec *s = m->s;
    uint32_t hd = s->head_dim ? s->head_dim : s->dim / s->n_heads;
    uint32_t q = hd * s->n_heads, kv = hd * s->n_kv_heads, qrows = arch_is(s, "qwen35") ? 2 * q : q;
    if (s->fused_qkv) {
        mat(m, s->mtype, s->dim, qrows + 2 * kv, 0.5f, "blk.%u.attn_qkv.weight", l);
    } else {
        mat(m, s->mtype, s->dim, qrows, 0.5f, "blk.%u.attn_q.weight", l);
        mat(m, s->mtype, s->dim, kv, 0.5f, "blk.%u.attn_k.weight", l);
        mat(m, s->mtype, s->dim, kv, 0.5f, "blk.%u.attn_v.weight", l);
    }
    if (s->biases) {
        mat(m, ML_GGML_F32, q, 0, 0.5f, "blk.%u.attn_q.bias", l);
        mat(m, ML_GGML_F32, kv, 0, 0.5f, "blk.%u.attn_k.bias", l);
        mat(m, ML_GGML_F32, kv, 0, 0.5f, "blk.%u.attn_v.bias", l);
    }
    mat(m, s->mtype, q, s->dim, 0.5f, "blk.%u.attn_output.weight", l);
    if (arch_is(s, "qwen3") || arch_is(s, "gemma3") || arch_is(s, "qwen35")) {
        mat(m, ML_GGML_F32, hd, 0, 0.3f, "blk.%u.attn_q_norm.weight", l);
        mat(m, ML_GGML_F32, hd, 0, 0.3f, "blk.%u.attn_k_norm.weight", l);
    }
}

static void linear_layer(mk *m, uint32_t l)
{
    const tc_spec *s = m->s;
    uint32_t qkv = 2 * s->lin_k * s->lin_dk + s->lin_v * s->lin_dv, vd = s->lin_v * s->lin_dv;
    mat(m, s->mtype, s->dim, qkv, 0.5f, "blk.%u.attn_qkv.weight", l);
    mat(m, s->mtype, s->dim, vd, 0.5f, "blk.%u.attn_gate.weight", l);
    mat(m, s->mtype, s->dim, s->lin_v, 0.5f, "blk.%u.ssm_beta.weight", l);
    mat(m, s->mtype, s->dim, s->lin_v, 0.5f, "blk.%u.ssm_alpha.weight", l);
    mat(m, ML_GGML_F32, s->conv, qkv, 0.5f, "blk.%u.ssm_conv1d.weight", l);
    mat(m, ML_GGML_F32, s->lin_v, 0, 0.5f, "blk.%u.ssm_dt.bias", l);
    /* ssm_a = -exp(A_log): negative */
    float a[64];
    for (uint32_t i = 0; i < s->lin_v; i++)
        a[i] = -expf(rnd(m, 2.0f));
    char name[64];
    snprintf(name, sizeof name, "blk.%u.ssm_a", l);
    cg_tensor_f(m->g, name, ML_GGML_F32, s->lin_v, 0, a);
    mat(m, ML_GGML_F32, s->lin_dv, 0, 0.3f, "blk.%u.ssm_norm.weight", l);
    mat(m, s->mtype, vd, s->dim, 0.5f, "blk.%u.ssm_out.weight", l);
}

void tc_build(cg *g, const tc_spec *s)
{
    cg_init(g);
    build_keys(g, s);
    mk m = {g, s, {s->seed}};
    uint32_t emb = s->emb_type ? s->emb_type : s->mtype, out = s->out_type ? s->out_type : s->mtype;
    mat(&m, emb, s->dim, s->vocab, 0.5f, "token_embd.weight");
    mat(&m, ML_GGML_F32, s->dim, 0, 0.2f, "output_norm.weight");
    if (!s->tied)
        mat(&m, out, s->dim, s->vocab, 0.5f, "output.weight");
    int q35 = arch_is(s, "qwen35"), post = arch_is(s, "gemma2") || arch_is(s, "gemma3");
    for (uint32_t l = 0; l < s->n_layers; l++) {
        mat(&m, ML_GGML_F32, s->dim, 0, 0.2f, "blk.%u.attn_norm.weight", l);
        if (q35 && (l + 1) % s->interval != 0)
            linear_layer(&m, l);
        else
            attention_layer(&m, l);
        mat(&m, ML_GGML_F32, s->dim, 0, 0.2f,
            q35 ? "blk.%u.post_attention_norm.weight" : "blk.%u.ffn_norm.weight", l);
        mat(&m, s->mtype, s->dim, s->hidden, 0.5f, "blk.%u.ffn_gate.weight", l);
        mat(&m, s->mtype, s->dim, s->hidden, 0.5f, "blk.%u.ffn_up.weight", l);
        mat(&m, s->mtype, s->hidden, s->dim, 0.5f, "blk.%u.ffn_down.weight", l);
        if (post) {
            mat(&m, ML_GGML_F32, s->dim, 0, 0.2f, "blk.%u.post_attention_norm.weight", l);
            mat(&m, ML_GGML_F32, s->dim, 0, 0.2f, "blk.%u.post_ffw_norm.weight", l);
        }
    }
    for (uint32_t l = s->n_layers; l < s->n_layers + s->nextn; l++) { /* MTP blocks */
        mat(&m, ML_GGML_F32, s->dim, 0, 0.2f, "blk.%u.attn_norm.weight", l);
        mat(&m, s->mtype, 2 * s->dim, s->dim, 0.5f, "blk.%u.nextn.eh_proj.weight", l);
    }
}

/* ===========================================================================
 * Conversion
 * ========================================================================= */

ml_status tc_plan(tc_conv *c, cg *g, const ml_convert_opts *o, ml_error *err)
{
    memset(c, 0, sizeof *c);
    c->gguf = cg_finish(g, &c->gguf_len);
    cg_free(g);
    ml_error e;
    ml_status s = ml_gguf_open_memory(c->gguf, c->gguf_len, &c->g, &e);
    ck_assert_msg(s == ML_OK, "the test GGUF does not open: %s", e.msg);
    return ml_convert_plan_new(c->g, o, &c->p, err);
}

void tc_convert(tc_conv *c, cg *g, const ml_convert_opts *o)
{
    ml_error e;
    ml_status s = tc_plan(c, g, o, &e);
    ck_assert_msg(s == ML_OK, "plan: %s: %s", ml_status_name(s), e.msg);
    tu_mem_init(&c->out);
    s = ml_convert_write(c->p, tu_mem_sink, &c->out, &c->st, &e);
    ck_assert_msg(s == ML_OK, "write: %s: %s", ml_status_name(s), e.msg);
    ck_assert_uint_eq(c->out.len, ml_convert_plan_size(c->p));
    ck_assert_uint_eq(c->st.bytes, c->out.len);
    s = ml_mlb_open_memory(c->out.p, c->out.len, &c->m, &e);
    ck_assert_msg(s == ML_OK, "the .mlb does not load: %s: %s", ml_status_name(s), e.msg);
}

/* Plans, writes and loads from an opened GGUF (c->g set). */
static void convert_open(tc_conv *c, const ml_convert_opts *o, const char *what)
{
    ml_error e;
    ml_status s = ml_convert_plan_new(c->g, o, &c->p, &e);
    ck_assert_msg(s == ML_OK, "%s: plan: %s: %s", what, ml_status_name(s), e.msg);
    tu_mem_init(&c->out);
    s = ml_convert_write(c->p, tu_mem_sink, &c->out, &c->st, &e);
    ck_assert_msg(s == ML_OK, "%s: write: %s: %s", what, ml_status_name(s), e.msg);
    ck_assert_uint_eq(c->out.len, ml_convert_plan_size(c->p));
    s = ml_mlb_open_memory(c->out.p, c->out.len, &c->m, &e);
    ck_assert_msg(s == ML_OK, "%s: the .mlb does not load: %s: %s", what, ml_status_name(s), e.msg);
}

void tc_convert_file(tc_conv *c, const char *path, const ml_convert_opts *o)
{
    memset(c, 0, sizeof *c);
    ml_error e;
    ml_status s = ml_gguf_open(path, &c->g, &e);
    ck_assert_msg(s == ML_OK, "%s: %s", path, e.msg);
    convert_open(c, o, path);
}

void tc_conv_free(tc_conv *c)
{
    ml_mlb_close(c->m);
    ml_convert_plan_free(c->p);
    ml_gguf_close(c->g);
    free(c->gguf);
    tu_mem_free(&c->out);
    memset(c, 0, sizeof *c);
}

/* ===========================================================================
 * The mapping, from gguf2mlb(1)
 * ========================================================================= */

static int neox(const char *arch)
{
    static const char *const a[] = {"qwen2", "qwen3", "gemma", "gemma2", "gemma3", "qwen35"};
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
        if (!strcmp(a[i], arch))
            return 1;
    return 0;
}

int tc_mapping(const ml_gguf *g, const ml_mlb_header *h, const ml_tensor *t, tc_map *m, char *name,
               size_t nl)
{
    const char *arch;
    size_t an;
    char a[32];
    ck_assert(ml_gguf_get_str(g, "general.architecture", &arch, &an, NULL, NULL) == ML_OK);
    snprintf(a, sizeof a, "%.*s", (int)an, arch);
    memset(m, 0, sizeof *m);
    m->src = name;
    uint32_t hd = h->head_dim ? h->head_dim : h->dim / h->n_heads;
    uint32_t rot = h->rot_dim ? h->rot_dim : hd, q = hd * h->n_heads, kv = hd * h->n_kv_heads;
    int q35 = !strcmp(a, "qwen35"), l = t->layer;
    uint32_t qrows = q35 ? 2 * q : q;
    char fused[64];
    snprintf(fused, sizeof fused, "blk.%d.attn_qkv.weight", l);
    int is_fused =
        l >= 0 && ml_gguf_find_tensor(g, fused) && t->role >= ML_R_WQ && t->role <= ML_R_K_NORM;
    uint32_t K = h->lin_k_heads, V = h->lin_v_heads, dv = h->lin_v_dim;
    uint64_t qk = 2ull * K * h->lin_k_dim;
#define N(...) snprintf(name, nl, __VA_ARGS__)
    switch (t->role) {
    case ML_R_TOK_EMB: N("token_embd.weight"); return 1;
    case ML_R_WCLS: N("output.weight"); return 1;
    case ML_R_FINAL_NORM: N("output_norm.weight"); return 1;
    case ML_R_ATTN_NORM: N("blk.%d.attn_norm.weight", l); return 1;
    case ML_R_FFN_NORM:
        N(q35 ? "blk.%d.post_attention_norm.weight" : "blk.%d.ffn_norm.weight", l);
        return 1;
    case ML_R_POST_ATTN_NORM: N("blk.%d.post_attention_norm.weight", l); return 1;
    case ML_R_POST_FFN_NORM: N("blk.%d.post_ffw_norm.weight", l); return 1;
    case ML_R_W1: N("blk.%d.ffn_gate.weight", l); return 1;
    case ML_R_W2: N("blk.%d.ffn_down.weight", l); return 1;
    case ML_R_W3: N("blk.%d.ffn_up.weight", l); return 1;
    case ML_R_WO: N("blk.%d.attn_output.weight", l); return 1;
    case ML_R_WQ:
    case ML_R_WG:
    case ML_R_WK:
    case ML_R_WV: {
        int i = t->role == ML_R_WK ? 1 : t->role == ML_R_WV ? 2 : 0;
        if (is_fused) {
            N("%s", fused);
            m->row0 = i == 0 ? 0 : i == 1 ? qrows : qrows + kv;
        } else {
            N("blk.%d.attn_%s.weight", l, i == 0 ? "q" : i == 1 ? "k" : "v");
        }
        if (q35 && i == 0)
            m->qgate = t->role == ML_R_WG ? 2 : 1, m->hd = hd;
        if (i < 2 && t->role != ML_R_WG && neox(a))
            m->rope = 1, m->hd = hd, m->rot = rot;
        return 1;
    }
    case ML_R_BQ:
    case ML_R_BK:
    case ML_R_BV: {
        int i = t->role - ML_R_BQ;
        N("blk.%d.attn_%s.bias", l, i == 0 ? "q" : i == 1 ? "k" : "v");
        if (!ml_gguf_find_tensor(g, name))
            m->zeros = 1;
        if (i < 2 && neox(a))
            m->rope = 1, m->hd = hd, m->rot = rot;
        return 1;
    }
    case ML_R_Q_NORM:
    case ML_R_K_NORM:
        N("blk.%d.attn_%s_norm.weight", l, t->role == ML_R_Q_NORM ? "q" : "k");
        if (neox(a))
            m->rope = 1, m->hd = hd, m->rot = rot;
        return 1;
    default: break;
    }
    int grouped = V != K;
    m->vk = K, m->vr = K ? V / K : 0;
    switch (t->role) {
    case ML_R_LQKV:
        N("blk.%d.attn_qkv.weight", l);
        m->vhs = grouped ? dv : 0, m->vstart = qk;
        return 1;
    case ML_R_LZ:
        N("blk.%d.attn_gate.weight", l);
        m->vhs = grouped ? dv : 0;
        return 1;
    case ML_R_LB:
        N("blk.%d.ssm_beta.weight", l);
        m->vhs = grouped;
        return 1;
    case ML_R_LA:
        N("blk.%d.ssm_alpha.weight", l);
        m->vhs = grouped;
        return 1;
    case ML_R_LCONV:
        N("blk.%d.ssm_conv1d.weight", l);
        m->vhs = grouped ? dv : 0, m->vstart = qk;
        return 1;
    case ML_R_DT_BIAS:
        N("blk.%d.ssm_dt.bias", l);
        m->vhs = grouped;
        return 1;
    case ML_R_A_LOG:
        N("blk.%d.ssm_a", l);
        m->vhs = grouped, m->a_log = 1;
        return 1;
    case ML_R_LNORM: N("blk.%d.ssm_norm.weight", l); return 1;
    case ML_R_LOUT:
        N("blk.%d.ssm_out.weight", l);
        m->vhs = grouped ? dv : 0, m->vcols = 1;
        return 1;
    default: return 0;
    }
#undef N
}

/* .mlb value head h is GGUF value head (h mod R) K + h / R. */
static uint64_t vhead(const tc_map *m, uint64_t u)
{
    uint64_t h = u / m->vhs, o = u % m->vhs;
    return ((h % m->vr) * m->vk + h / m->vr) * m->vhs + o;
}

uint64_t tc_src_unit(const tc_map *m, uint64_t u)
{
    if (m->vhs && !m->vcols && u >= m->vstart)
        return m->row0 + m->vstart + vhead(m, u - m->vstart);
    if (m->rope || m->qgate) {
        uint64_t h = u / m->hd, j = u % m->hd;
        if (m->rope && j < m->rot) {
            uint64_t i = j / 2, s = j % 2; /* new 2i+s <- old s*rot/2+i */
            j = s * (m->rot / 2) + i;
        }
        if (m->qgate)
            return m->row0 + 2 * m->hd * h + (m->qgate == 2 ? m->hd : 0) + j;
        return m->row0 + h * m->hd + j;
    }
    return m->row0 + u;
}

float *tc_mlb_floats(const ml_tensor *t)
{
    size_t n = (size_t)t->rows * t->cols;
    float *y = malloc(n * sizeof *y);
    ck_assert_ptr_nonnull(y);
    ml_tensor_dequantize_rows(t, 0, t->rows, y);
    return y;
}

float *tc_expected(const ml_gguf *g, const ml_tensor *t, const tc_map *m)
{
    size_t n = (size_t)t->rows * t->cols;
    float *y = calloc(n, sizeof *y);
    ck_assert_ptr_nonnull(y);
    if (m->zeros)
        return y;
    const ml_gguf_tensor *s = ml_gguf_find_tensor(g, m->src);
    ck_assert_msg(s != NULL, "no GGUF tensor %s", m->src);
    float *all = malloc(s->n_elements * sizeof *all);
    ck_assert_ptr_nonnull(all);
    ck_assert(ml_gguf_dequantize(s, 0, s->rows, all, NULL) == ML_OK);
    if (t->ndim == 1) {
        for (size_t e = 0; e < n; e++)
            y[e] = all[tc_src_unit(m, e)];
    } else {
        for (size_t r = 0; r < t->rows; r++) {
            const float *row = all + tc_src_unit(m, r) * s->cols;
            for (size_t c = 0; c < t->cols; c++)
                y[r * t->cols + c] = row[m->vcols && m->vhs ? vhead(m, c) : c];
        }
    }
    if (m->a_log)
        for (size_t e = 0; e < n; e++)
            y[e] = (float)log(-(double)y[e]);
    free(all);
    return y;
}

/* ===========================================================================
 * Checks
 * ========================================================================= */

/* Checks "name=value ..." against the header (u32 or f32 by the spec's
 * table in testutil). */
void tc_expect_fields(const ml_mlb_header *h, const char *spec)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
        char *eq = strchr(tok, '=');
        ck_assert_ptr_nonnull(eq);
        *eq = 0;
        const tu_field *f = tu_field_by_name(tok);
        ck_assert_msg(f != NULL, "no field %s", tok);
        const uint8_t *p = (const uint8_t *)h + f->member;
        if (f->kind == TU_U32) {
            uint32_t v;
            memcpy(&v, p, 4);
            ck_assert_msg(v == strtoul(eq + 1, NULL, 0), "%s is %u, expected %s", tok, v, eq + 1);
        } else {
            float v;
            memcpy(&v, p, 4);
            ck_assert_msg(v == strtof(eq + 1, NULL), "%s is %.9g, expected %s", tok, (double)v,
                          eq + 1);
        }
    }
}

const uint8_t *tc_file_at(const tc_conv *c, uint64_t off)
{
    return c->out.p + off;
}

/* Every array against its source (see the file comment).  Returns the
 * number of lossless arrays. */
/* A block matrix of a wtype 3 model is its GGUF tensor's bytes, row r
 * being the source row the mapping gives (rows are whole blocks). */
static void check_kept_bytes(const tc_conv *c, const ml_tensor *t, const tc_map *m,
                             const ml_convert_item *it)
{
    uint32_t elems, bytes, ggml;
    if (!ml_type_block(t->type, &elems, &bytes, &ggml))
        return;
    const ml_gguf_tensor *s = ml_gguf_find_tensor(c->g, m->src);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(s->type, ggml);
    ck_assert_int_eq(it->method, ML_CONV_COPY);
    uint64_t rb = ml_tensor_row_bytes(t);
    ck_assert_uint_eq(rb, s->row_bytes);
    int cols_moved = m->vcols && m->vhs; /* lout: whole heads of whole blocks */
    for (uint64_t r = 0; r < t->rows; r++) {
        const uint8_t *got = (const uint8_t *)t->data + r * rb;
        const uint8_t *src = s->data + tc_src_unit(m, r) * rb;
        for (uint64_t b = 0; b < t->cols / elems; b++) {
            uint64_t sb = cols_moved ? vhead(m, b * elems) / elems : b;
            TU_REQUIRE(memcmp(got + b * bytes, src + sb * bytes, bytes) == 0,
                       "%s: row %llu block %llu differs from %s row %llu block %llu", t->name,
                       (unsigned long long)r, (unsigned long long)b, s->name,
                       (unsigned long long)tc_src_unit(m, r), (unsigned long long)sb);
        }
    }
}

size_t tc_check_arrays(const tc_conv *c)
{
    const ml_mlb_header *h = ml_mlb_get_header(c->m);
    size_t lossless = 0, n_items = ml_convert_plan_n_items(c->p);
    ck_assert_uint_gt(n_items, 0);
    for (size_t i = 0; i < n_items; i++) {
        const ml_convert_item *it = ml_convert_plan_item(c->p, i);
        const ml_tensor *t = ml_mlb_find(c->m, it->dst.name);
        ck_assert_msg(t != NULL, "%s is not in the model", it->dst.name);
        ck_assert_int_eq(t->type, it->dst.type);
        ck_assert_uint_eq(t->offset, it->dst.offset);
        tc_map m;
        char name[64];
        ck_assert_msg(tc_mapping(c->g, h, t, &m, name, sizeof name), "unknown array %s", t->name);
        if (m.zeros)
            ck_assert_ptr_null(it->src);
        else
            ck_assert_msg(it->src && strcmp(it->src->name, name) == 0, "%s comes from %s, not %s",
                          t->name, it->src ? it->src->name : "nothing", name);
        size_t n = (size_t)t->rows * t->cols;
        float *want = tc_expected(c->g, t, &m), *got = tc_mlb_floats(t);
        if (m.a_log) {
            ck_assert_int_eq(it->method, ML_CONV_DERIVED);
            for (size_t e = 0; e < n; e++)
                ck_assert_msg(fabsf(got[e] - want[e]) <= 1e-6f * fabsf(want[e]) + 1e-6f,
                              "%s[%zu]: %g, expected %g", t->name, e, (double)got[e],
                              (double)want[e]);
        } else if (it->lossless) {
            check_kept_bytes(c, t, &m, it);
            for (size_t e = 0; e < n; e++)
                TU_REQUIRE(memcmp(&got[e], &want[e], 4) == 0, "%s[%zu] (%s): %.9g, expected %.9g",
                           t->name, e, name, (double)got[e], (double)want[e]);
            lossless++;
        } else if (ml_type_block(t->type, NULL, NULL, NULL)) {
            /* a mix's block type: ml_quantize_matrix_blocks' bytes (no
             * importances), or the F16 fallback's */
            ck_assert_int_eq(it->method, ML_CONV_QUANTIZE);
            size_t nb = (size_t)t->nbytes;
            uint8_t *q = malloc(nb);
            if (t->type == ML_TYPE_F16)
                for (size_t e = 0; e < n; e++) {
                    uint16_t v = ml_f32_to_f16(want[e]);
                    q[2 * e] = (uint8_t)v, q[2 * e + 1] = (uint8_t)(v >> 8);
                }
            else
                ck_assert(ml_quantize_matrix_blocks(t->type, want, t->rows, t->cols, NULL, 1, NULL,
                                                    q, nb, NULL) == ML_OK);
            ck_assert_msg(memcmp(q, t->data, nb) == 0, "%s: %s blocks differ from the quantizer's",
                          t->name, ml_type_name(t->type));
            free(q);
        } else {
            ck_assert_int_eq(it->method, ML_CONV_QUANTIZE);
            ck_assert_int_ne(t->type, ML_TYPE_F32);
            size_t qb, sb;
            ck_assert(ml_quant_sizes(t->type, (int)h->scale_f16, t->rows, t->cols, &qb, &sb,
                                     NULL) == ML_OK);
            uint8_t *q = malloc(qb), *s = malloc(sb);
            ml_quant_opts o = {.type = t->type,
                               .q4_rule = ml_convert_plan_q4_rule(c->p),
                               .scale_f16 = (int)h->scale_f16,
                               .threads = 1};
            ck_assert(ml_quantize_matrix(want, t->rows, t->cols, &o, q, qb, s, sb, NULL) == ML_OK);
            ck_assert_msg(memcmp(q, t->data, qb) == 0, "%s: quants differ from the quantizer's",
                          t->name);
            ck_assert_msg(memcmp(s, tc_file_at(c, t->scale_offset), sb) == 0,
                          "%s: scales differ from the quantizer's", t->name);
            /* and the spec's bound: a Q8_0 weight within half a step */
            for (size_t e = 0; t->type == ML_TYPE_Q8_0 && e < n; e++)
                TU_REQUIRE(fabsf(got[e] - want[e]) <= 0.5f * fabsf(ml_tensor_scale(t, e / 32)) * 1.0001f,
                           "%s[%zu]: %g for %g, scale %g", t->name, e, (double)got[e],
                           (double)want[e], (double)ml_tensor_scale(t, e / 32));
            free(q);
            free(s);
        }
        free(want);
        free(got);
    }
    return lossless;
}
