/* mlb.c - the .mlb header: field table, encoding, every header rule of the
 * validation table in mlb(5), and the body layout (which arrays follow, in
 * which order, at which offsets; with wtype 3, each matrix's type from the
 * type table, whose entries are checked here).  Loader, streaming verifier
 * and writer all walk the body through ml_mlb_layout_next, so there is one
 * layout and one set of table rules. */
#include "base/internal.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>

#define F(name, off, type, meaning) \
    { #name, off, type, offsetof(ml_mlb_header, name), meaning }

static const ml_mlb_field fields[] = {
    F(magic, 0, ML_FIELD_CHARS, "file magic, \"MLB1\""),
    F(version, 4, ML_FIELD_U32, "format version"),
    F(dim, 8, ML_FIELD_U32, "model width"),
    F(n_layers, 12, ML_FIELD_U32, "transformer layers"),
    F(n_heads, 16, ML_FIELD_U32, "query heads"),
    F(n_kv_heads, 20, ML_FIELD_U32, "key/value heads"),
    F(hidden_dim, 24, ML_FIELD_U32, "FFN width"),
    F(vocab, 28, ML_FIELD_U32, "vocabulary size"),
    F(max_seq, 32, ML_FIELD_U32, "longest context"),
    F(rope_theta, 36, ML_FIELD_F32, "RoPE base"),
    F(norm_eps, 40, ML_FIELD_F32, "RMSNorm epsilon"),
    F(wtype, 44, ML_FIELD_U32, "weight type (1 Q8_0, 2 Q4_0, 3 per-matrix type table)"),
    F(shared_classifier, 48, ML_FIELD_U32, "classifier shares tok_emb"),
    F(rope_type, 52, ML_FIELD_U32, "RoPE scaling (0 plain, 1 llama3, 2 linear, 3 yarn)"),
    F(rope_factor, 56, ML_FIELD_F32, "RoPE scaling factor"),
    F(rope_low_freq_factor, 60, ML_FIELD_F32, "llama3 low-frequency factor / yarn beta_fast"),
    F(rope_high_freq_factor, 64, ML_FIELD_F32, "llama3 high-frequency factor / yarn beta_slow"),
    F(rope_orig_max_seq, 68, ML_FIELD_U32, "context the RoPE scaling was trained for"),
    F(q8_mask, 72, ML_FIELD_U32, "matrix classes stored as Q8_0 in a Q4_0 model"),
    F(qkv_bias, 76, ML_FIELD_U32, "q, k, v projections have biases"),
    F(head_dim, 80, ML_FIELD_U32, "head size (0: dim / n_heads)"),
    F(qk_norm, 84, ML_FIELD_U32, "per-head RMSNorm of q and k"),
    F(rope_attn_factor, 88, ML_FIELD_F32, "yarn factor on cos and sin"),
    F(sliding_window, 92, ML_FIELD_U32, "attention window (0: full)"),
    F(layer_flags, 96, ML_FIELD_U32, "a flag byte per layer follows the header"),
    F(rope_local_theta, 100, ML_FIELD_F32, "RoPE base of local-RoPE layers"),
    F(act, 104, ML_FIELD_U32, "FFN activation (0 SiLU, 1 GELU tanh, 2 clamped SwiGLU)"),
    F(post_norms, 108, ML_FIELD_U32, "attention and FFN outputs are normalized"),
    F(embed_scale, 112, ML_FIELD_F32, "factor on embedding rows (0: 1)"),
    F(attn_scale, 116, ML_FIELD_F32, "attention score factor (0: 1/sqrt(head_dim))"),
    F(scale_f16, 120, ML_FIELD_U32, "quantization scales stored as f16"),
    F(attn_softcap, 124, ML_FIELD_F32, "attention score softcap (0: none)"),
    F(final_softcap, 128, ML_FIELD_F32, "logit softcap (0: none)"),
    F(rot_dim, 132, ML_FIELD_U32, "rotated dimensions per head (0: all)"),
    F(attn_gate, 136, ML_FIELD_U32, "attention output gate wg"),
    F(lin_k_heads, 140, ML_FIELD_U32, "linear attention key heads"),
    F(lin_v_heads, 144, ML_FIELD_U32, "linear attention value heads"),
    F(lin_k_dim, 148, ML_FIELD_U32, "linear attention key head size"),
    F(lin_v_dim, 152, ML_FIELD_U32, "linear attention value head size"),
    F(lin_conv, 156, ML_FIELD_U32, "linear attention convolution taps"),
    F(pooling, 160, ML_FIELD_U32, "embeddings' pooling (0 unstated, 1 mean, 2 CLS, 3 last)"),
    F(n_experts, 164, ML_FIELD_U32, "experts per MoE layer (0: none)"),
    F(n_experts_used, 168, ML_FIELD_U32, "experts a token uses"),
    F(expert_hidden_dim, 172, ML_FIELD_U32, "routed expert FFN width"),
    F(moe_gating, 176, ML_FIELD_U32, "router gating (0 softmax, 1 top-k then softmax, 2 sigmoid)"),
    F(moe_flags, 180, ML_FIELD_U32, "MoE bits (1 norm, 2 router bias, 4 expert bias, 8 select "
                                    "bias, 16 shared gate)"),
    F(expert_scale, 184, ML_FIELD_F32, "factor on the experts' weights (0: 1)"),
    F(shared_hidden_dim, 188, ML_FIELD_U32, "shared expert FFN width (0: none)"),
    F(swiglu_alpha, 192, ML_FIELD_F32, "clamped SwiGLU alpha (act 2)"),
    F(swiglu_limit, 196, ML_FIELD_F32, "clamped SwiGLU limit (act 2)"),
    F(attn_sinks, 200, ML_FIELD_U32, "attention layers store a sink logit per head"),
    F(o_bias, 204, ML_FIELD_U32, "attention output projection has a bias"),
};
#undef F

#define N_FIELDS (sizeof fields / sizeof fields[0])
#define RESERVED_START 208u

const ml_mlb_field *ml_mlb_fields(size_t *count)
{
    if (count)
        *count = N_FIELDS;
    return fields;
}

uint32_t ml_mlb_field_u32(const ml_mlb_header *h, const ml_mlb_field *f)
{
    uint32_t v;
    memcpy(&v, (const char *)h + f->member, 4);
    return v;
}

float ml_mlb_field_f32(const ml_mlb_header *h, const ml_mlb_field *f)
{
    float v;
    memcpy(&v, (const char *)h + f->member, 4);
    return v;
}

void ml_mlb_header_decode(const uint8_t buf[ML_MLB_HEADER_SIZE], ml_mlb_header *h)
{
    memset(h, 0, sizeof *h);
    for (size_t i = 0; i < N_FIELDS; i++) {
        char *dst = (char *)h + fields[i].member;
        if (fields[i].type == ML_FIELD_CHARS) {
            memcpy(dst, buf + fields[i].offset, 4);
        } else {
            uint32_t v = ml__rd32(buf + fields[i].offset);
            memcpy(dst, &v, 4);
        }
    }
}

void ml_mlb_header_encode(const ml_mlb_header *h, uint8_t buf[ML_MLB_HEADER_SIZE])
{
    memset(buf, 0, ML_MLB_HEADER_SIZE);
    for (size_t i = 0; i < N_FIELDS; i++) {
        const char *src = (const char *)h + fields[i].member;
        if (fields[i].type == ML_FIELD_CHARS) {
            memcpy(buf + fields[i].offset, src, 4);
        } else {
            uint32_t v;
            memcpy(&v, src, 4);
            ml__wr32(buf + fields[i].offset, v);
        }
    }
}

void ml_mlb_header_init(ml_mlb_header *h)
{
    memset(h, 0, sizeof *h);
    memcpy(h->magic, "MLB1", 4);
    h->version = 1;
}

/* ---------------------------------------------------------------------------
 * Validation.  One static function per group of rules; each failure names
 * the field and its header offset.
 * ------------------------------------------------------------------------- */

static unsigned field_offset(const char *name)
{
    for (size_t i = 0; i < N_FIELDS; i++)
        if (strcmp(fields[i].name, name) == 0)
            return fields[i].offset;
    return 0;
}

#define BAD(code, name, ...) ml__err(err, code, #name, field_offset(#name), __VA_ARGS__)

/* Users hand us the wrong file more often than a corrupt one: say what it is. */
static ml_status check_magic(const ml_mlb_header *h, ml_error *err)
{
    const char *m = h->magic;
    if (memcmp(m, "MLB1", 4) == 0)
        return ML_OK;
    const char *what = "not an .mlb model";
    if (memcmp(m, "GGUF", 4) == 0)
        what = "this is a GGUF file; convert it with gguf2mlb";
    else if (memcmp(m, "MLT1", 4) == 0)
        what = "this is an .mlt tokenizer, not a model";
    else if (memcmp(m, "MLI1", 4) == 0)
        what = "this is an .mli importance matrix, not a model";
    else if (memcmp(m, "MLB", 3) == 0)
        what = "an .mlb magic of an unknown generation";
    else if (memcmp(m, "<!DO", 4) == 0 || memcmp(m, "<htm", 4) == 0 ||
             memcmp(m, "<HTM", 4) == 0)
        what = "this is an HTML page, not a model (a web page downloaded instead of the file?)";
    char shown[17];
    ml__magic_shown((const uint8_t *)m, shown);
    return BAD(ML_E_FORMAT, magic, "\"%s\" is not \"MLB1\": %s", shown, what);
}

static int is_bool(uint32_t v)
{
    return v == 0 || v == 1;
}

static ml_status check_flags(const ml_mlb_header *h, ml_error *err)
{
    if (h->version != 1)
        return BAD(ML_E_FORMAT, version, "%u is not 1 (this build reads version 1)", h->version);
    if (h->wtype != ML_WTYPE_Q8_0 && h->wtype != ML_WTYPE_Q4_0 && h->wtype != ML_WTYPE_TABLE)
        return BAD(ML_E_FORMAT, wtype, "unknown weight type %u (1 Q8_0, 2 Q4_0, 3 type table)",
                   h->wtype);
    if (h->q8_mask & ~(uint32_t)ML_Q8_ALL)
        return BAD(ML_E_FORMAT, q8_mask, "0x%x has bits above 64, which name no class",
                   h->q8_mask);
    if (h->q8_mask && h->wtype == ML_WTYPE_Q8_0)
        return BAD(ML_E_FORMAT, q8_mask, "0x%x in a Q8_0 model (must be 0)", h->q8_mask);
    if (h->q8_mask && h->wtype == ML_WTYPE_TABLE) /* the table names every matrix's type */
        return BAD(ML_E_FORMAT, q8_mask, "0x%x with a type table (wtype 3; must be 0)",
                   h->q8_mask);
    struct { const char *name; uint32_t v; } bools[] = {
        {"qkv_bias", h->qkv_bias},     {"qk_norm", h->qk_norm},     {"layer_flags", h->layer_flags},
        {"post_norms", h->post_norms}, {"scale_f16", h->scale_f16}, {"attn_gate", h->attn_gate},
        {"attn_sinks", h->attn_sinks}, {"o_bias", h->o_bias},
    };
    for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++)
        if (!is_bool(bools[i].v))
            return ml__err(err, ML_E_FORMAT, bools[i].name, field_offset(bools[i].name),
                           "%u is not 0 or 1", bools[i].v);
    if (h->act > ML_ACT_SWIGLU_CLAMP)
        return BAD(ML_E_FORMAT, act, "unknown activation %u (0 SiLU, 1 GELU tanh, 2 clamped SwiGLU)",
                   h->act);
    if (h->pooling > 3)
        return BAD(ML_E_FORMAT, pooling, "unknown pooling %u (0 unstated, 1 mean, 2 CLS, 3 last)",
                   h->pooling);
    if (h->sliding_window > ML_MLB_VOCAB_LIMIT)
        return BAD(ML_E_FORMAT, sliding_window, "%u is above 2^24", h->sliding_window);
    return ML_OK;
}

/* Floats: every field must be finite; most must be >= 0. */
static ml_status check_floats(const ml_mlb_header *h, ml_error *err)
{
    struct { const char *name; float v; int positive; } fl[] = {
        {"rope_theta", h->rope_theta, 1},         {"norm_eps", h->norm_eps, 0},
        {"rope_local_theta", h->rope_local_theta, 0}, {"embed_scale", h->embed_scale, 0},
        {"attn_scale", h->attn_scale, 0},         {"attn_softcap", h->attn_softcap, 0},
        {"final_softcap", h->final_softcap, 0},   {"expert_scale", h->expert_scale, 0},
    };
    for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++) {
        float v = fl[i].v;
        if (!isfinite(v) || v < 0 || (fl[i].positive && !(v > 0)))
            return ml__err(err, ML_E_FORMAT, fl[i].name, field_offset(fl[i].name),
                           "%.9g must be finite and %s", (double)v,
                           fl[i].positive ? "> 0" : ">= 0");
    }
    return ML_OK;
}

static int pos_finite(float v)
{
    return isfinite(v) && v > 0;
}

/* The clamped SwiGLU's two parameters belong to act 2 alone: with another
 * activation their bytes must be zero, so a stray value never passes. */
static ml_status check_swiglu(const ml_mlb_header *h, ml_error *err)
{
    if (h->act == ML_ACT_SWIGLU_CLAMP) {
        if (!pos_finite(h->swiglu_alpha))
            return BAD(ML_E_FORMAT, swiglu_alpha, "act 2: %.9g must be finite and > 0",
                       (double)h->swiglu_alpha);
        if (!pos_finite(h->swiglu_limit))
            return BAD(ML_E_FORMAT, swiglu_limit, "act 2: %.9g must be finite and > 0",
                       (double)h->swiglu_limit);
        return ML_OK;
    }
    if (ml__f32_bits(h->swiglu_alpha))
        return BAD(ML_E_FORMAT, swiglu_alpha, "%.9g without act 2 (must be 0)",
                   (double)h->swiglu_alpha);
    if (ml__f32_bits(h->swiglu_limit))
        return BAD(ML_E_FORMAT, swiglu_limit, "%.9g without act 2 (must be 0)",
                   (double)h->swiglu_limit);
    return ML_OK;
}

/* RoPE scaling: each type has its parameters; the fields a type does not
 * use must be zero, so a stray value never passes unnoticed. */
static ml_status check_rope(const ml_mlb_header *h, ml_error *err)
{
    float f = h->rope_factor, lo = h->rope_low_freq_factor, hi = h->rope_high_freq_factor;
    uint32_t orig = h->rope_orig_max_seq;
    switch (h->rope_type) {
    case ML_ROPE_PLAIN: /* bytes, not values: -0.0 is not zero here */
        if (ml__f32_bits(f))
            return BAD(ML_E_FORMAT, rope_factor, "%.9g with plain RoPE (must be 0)", (double)f);
        if (ml__f32_bits(lo))
            return BAD(ML_E_FORMAT, rope_low_freq_factor, "%.9g with plain RoPE (must be 0)",
                       (double)lo);
        if (ml__f32_bits(hi))
            return BAD(ML_E_FORMAT, rope_high_freq_factor, "%.9g with plain RoPE (must be 0)",
                       (double)hi);
        if (orig)
            return BAD(ML_E_FORMAT, rope_orig_max_seq, "%u with plain RoPE (must be 0)", orig);
        break;
    case ML_ROPE_LLAMA3:
        if (!pos_finite(f))
            return BAD(ML_E_FORMAT, rope_factor, "llama3: %.9g must be finite and > 0", (double)f);
        if (!pos_finite(lo))
            return BAD(ML_E_FORMAT, rope_low_freq_factor, "llama3: %.9g must be finite and > 0",
                       (double)lo);
        if (!isfinite(hi) || !(hi > lo))
            return BAD(ML_E_FORMAT, rope_high_freq_factor,
                       "llama3: %.9g must be finite and > rope_low_freq_factor %.9g", (double)hi,
                       (double)lo);
        if (orig == 0)
            return BAD(ML_E_FORMAT, rope_orig_max_seq, "llama3: must be > 0");
        break;
    case ML_ROPE_LINEAR:
        if (!pos_finite(f))
            return BAD(ML_E_FORMAT, rope_factor, "linear: %.9g must be finite and > 0", (double)f);
        if (ml__f32_bits(lo))
            return BAD(ML_E_FORMAT, rope_low_freq_factor, "%.9g with linear RoPE (must be 0)",
                       (double)lo);
        if (ml__f32_bits(hi))
            return BAD(ML_E_FORMAT, rope_high_freq_factor, "%.9g with linear RoPE (must be 0)",
                       (double)hi);
        if (orig)
            return BAD(ML_E_FORMAT, rope_orig_max_seq, "%u with linear RoPE (must be 0)", orig);
        break;
    case ML_ROPE_YARN:
        if (!pos_finite(f))
            return BAD(ML_E_FORMAT, rope_factor, "yarn: %.9g must be finite and > 0", (double)f);
        if (!pos_finite(hi))
            return BAD(ML_E_FORMAT, rope_high_freq_factor,
                       "yarn beta_slow: %.9g must be finite and > 0", (double)hi);
        if (!isfinite(lo) || !(lo > hi))
            return BAD(ML_E_FORMAT, rope_low_freq_factor,
                       "yarn beta_fast: %.9g must be finite and > beta_slow %.9g", (double)lo,
                       (double)hi);
        if (orig == 0)
            return BAD(ML_E_FORMAT, rope_orig_max_seq, "yarn: must be > 0");
        if (!pos_finite(h->rope_attn_factor))
            return BAD(ML_E_FORMAT, rope_attn_factor, "yarn: %.9g must be finite and > 0",
                       (double)h->rope_attn_factor);
        break;
    default:
        return BAD(ML_E_FORMAT, rope_type, "unknown RoPE type %u (0-3)", h->rope_type);
    }
    if (h->rope_type != ML_ROPE_YARN && ml__f32_bits(h->rope_attn_factor) != 0)
        return BAD(ML_E_FORMAT, rope_attn_factor, "%.9g without yarn scaling (must be 0)",
                   (double)h->rope_attn_factor);
    return ML_OK;
}

static ml_status check_reserved(const uint8_t *raw, ml_error *err)
{
    if (!raw)
        return ML_OK;
    for (unsigned i = RESERVED_START; i < ML_MLB_HEADER_SIZE; i++)
        if (raw[i])
            return ml__err(err, ML_E_FORMAT, "reserved", i,
                           "header byte is 0x%02x, must be 0 (a file from a newer writer?)",
                           raw[i]);
    return ML_OK;
}

static ml_status dim_in(ml_error *err, const char *name, uint32_t v, uint32_t lo, uint32_t hi)
{
    if (v < lo || v > hi)
        return ml__err(err, ML_E_SHAPE, name, field_offset(name), "%u is outside %u..%u", v, lo,
                       hi);
    return ML_OK;
}

static ml_status check_dims(const ml_mlb_header *h, ml_mlb_derived *d, ml_error *err)
{
    ml_status s;
    if ((s = dim_in(err, "dim", h->dim, 1, ML_MLB_DIM_LIMIT)) ||
        (s = dim_in(err, "n_layers", h->n_layers, 1, ML_MLB_DIM_LIMIT)) ||
        (s = dim_in(err, "n_heads", h->n_heads, 1, ML_MLB_DIM_LIMIT)) ||
        (s = dim_in(err, "n_kv_heads", h->n_kv_heads, 1, ML_MLB_DIM_LIMIT)) ||
        /* a model of experts only has no dense FFN width */
        (s = dim_in(err, "hidden_dim", h->hidden_dim, h->n_experts ? 0 : 1, ML_MLB_DIM_LIMIT)) ||
        (s = dim_in(err, "vocab", h->vocab, 3, ML_MLB_VOCAB_LIMIT)) ||
        (s = dim_in(err, "max_seq", h->max_seq, 1, ML_MLB_VOCAB_LIMIT)))
        return s;
    if (h->dim % 32)
        return BAD(ML_E_SHAPE, dim, "%u is not a multiple of 32", h->dim);
    if (h->hidden_dim % 32)
        return BAD(ML_E_SHAPE, hidden_dim, "%u is not a multiple of 32", h->hidden_dim);
    if (h->n_heads % h->n_kv_heads)
        return BAD(ML_E_SHAPE, n_kv_heads, "%u does not divide n_heads %u", h->n_kv_heads,
                   h->n_heads);
    uint32_t hd = h->head_dim;
    if (hd == 0) {
        if (h->dim % h->n_heads)
            return BAD(ML_E_SHAPE, n_heads, "%u does not divide dim %u (and head_dim is 0)",
                       h->n_heads, h->dim);
        hd = h->dim / h->n_heads;
    }
    if (hd % 2)
        return BAD(ML_E_SHAPE, head_dim, "head size %u is odd", hd);
    uint64_t q_dim = (uint64_t)hd * h->n_heads;
    if (q_dim > ML_MLB_QDIM_LIMIT || q_dim % 32)
        return BAD(ML_E_SHAPE, head_dim,
                   "q_dim = head_dim %u x n_heads %u = %llu must be a multiple of 32 and at most "
                   "65536",
                   hd, h->n_heads, (unsigned long long)q_dim);
    if (h->rot_dim % 2 || h->rot_dim > hd)
        return BAD(ML_E_SHAPE, rot_dim, "%u must be even and at most head_dim %u", h->rot_dim, hd);
    d->head_dim = hd;
    d->q_dim = (uint32_t)q_dim;
    d->kv_dim = hd * h->n_kv_heads;
    d->rot_dim = h->rot_dim ? h->rot_dim : hd;
    return ML_OK;
}

/* Linear attention (Qwen3.5).  The spec states only two constraints; we add
 * the ones the runtime needs to stay within the q_dim-like limit. */
static ml_status check_linear(const ml_mlb_header *h, ml_mlb_derived *d, ml_error *err)
{
    d->lin_qkv = d->lin_vd = 0;
    if (h->lin_k_heads == 0) {
        if (h->lin_v_heads || h->lin_k_dim || h->lin_v_dim || h->lin_conv)
            return BAD(ML_E_SHAPE, lin_k_heads,
                       "0 (no linear attention) but offsets 144-159 are not zero");
        return ML_OK;
    }
    ml_status s;
    if ((s = dim_in(err, "lin_k_heads", h->lin_k_heads, 1, ML_MLB_DIM_LIMIT)) ||
        (s = dim_in(err, "lin_v_heads", h->lin_v_heads, 1, ML_MLB_DIM_LIMIT)) ||
        (s = dim_in(err, "lin_k_dim", h->lin_k_dim, 1, ML_MLB_DIM_LIMIT)) ||
        (s = dim_in(err, "lin_v_dim", h->lin_v_dim, 1, ML_MLB_DIM_LIMIT)) ||
        (s = dim_in(err, "lin_conv", h->lin_conv, 1, ML_MLB_CONV_LIMIT)))
        return s;
    if (h->lin_v_heads % h->lin_k_heads || h->lin_v_heads % 4)
        return BAD(ML_E_SHAPE, lin_v_heads, "%u must be a multiple of lin_k_heads %u and of 4",
                   h->lin_v_heads, h->lin_k_heads);
    uint64_t kd = (uint64_t)h->lin_k_heads * h->lin_k_dim;
    uint64_t vd = (uint64_t)h->lin_v_heads * h->lin_v_dim;
    if (kd > ML_MLB_QDIM_LIMIT)
        return BAD(ML_E_SHAPE, lin_k_dim, "lin_k_heads x lin_k_dim = %llu is above 65536",
                   (unsigned long long)kd);
    if (vd > ML_MLB_QDIM_LIMIT || vd % 32)
        return BAD(ML_E_SHAPE, lin_v_dim,
                   "lin_v_heads x lin_v_dim = %llu must be a multiple of 32 and at most 65536",
                   (unsigned long long)vd);
    d->lin_qkv = (uint32_t)(2 * kd + vd);
    d->lin_vd = (uint32_t)vd;
    return ML_OK;
}

/* Experts: the shapes (SHAPE), then the router's gating and flags
 * (FORMAT).  Without experts every MoE field must be zero, as linear
 * attention's are without lin_k_heads. */
static ml_status check_moe(const ml_mlb_header *h, ml_error *err)
{
    if (h->n_experts == 0) {
        if (h->n_experts_used || h->expert_hidden_dim || h->moe_gating || h->moe_flags ||
            ml__f32_bits(h->expert_scale) || h->shared_hidden_dim)
            return BAD(ML_E_SHAPE, n_experts, "0 (no experts) but offsets 168-191 are not zero");
        return ML_OK;
    }
    uint32_t k_max = h->n_experts < ML_MLB_USED_LIMIT ? h->n_experts : ML_MLB_USED_LIMIT;
    ml_status s;
    if ((s = dim_in(err, "n_experts", h->n_experts, 1, ML_MLB_EXPERT_LIMIT)) ||
        (s = dim_in(err, "n_experts_used", h->n_experts_used, 1, k_max)) ||
        (s = dim_in(err, "expert_hidden_dim", h->expert_hidden_dim, 1, ML_MLB_DIM_LIMIT)) ||
        (s = dim_in(err, "shared_hidden_dim", h->shared_hidden_dim, 0, ML_MLB_DIM_LIMIT)))
        return s;
    if (h->expert_hidden_dim % 32)
        return BAD(ML_E_SHAPE, expert_hidden_dim, "%u is not a multiple of 32",
                   h->expert_hidden_dim);
    if (h->shared_hidden_dim % 32)
        return BAD(ML_E_SHAPE, shared_hidden_dim, "%u is not a multiple of 32",
                   h->shared_hidden_dim);
    if (h->moe_gating > ML_MOE_SIGMOID)
        return BAD(ML_E_FORMAT, moe_gating,
                   "unknown gating %u (0 softmax, 1 top-k then softmax, 2 sigmoid)", h->moe_gating);
    if (h->moe_flags & ~(uint32_t)ML_MOE_FLAGS_KNOWN)
        return BAD(ML_E_FORMAT, moe_flags, "0x%x has bits above 16, which name nothing",
                   h->moe_flags);
    if ((h->moe_flags & ML_MOE_SHARED_GATE) && h->shared_hidden_dim == 0)
        return BAD(ML_E_FORMAT, moe_flags, "0x%x: a shared gate (16) without a shared expert "
                                           "(shared_hidden_dim 0)",
                   h->moe_flags);
    return ML_OK;
}

ml_status ml_mlb_header_validate(const ml_mlb_header *h, const uint8_t *raw, ml_mlb_derived *dout,
                                 ml_error *err)
{
    ml_mlb_derived d;
    ml_status s;
    memset(&d, 0, sizeof d);
    if ((s = check_magic(h, err)) || (s = check_flags(h, err)) || (s = check_floats(h, err)) ||
        (s = check_swiglu(h, err)) || (s = check_rope(h, err)) ||
        (s = check_reserved(raw, err)) || (s = check_dims(h, &d, err)) ||
        (s = check_linear(h, &d, err)) || (s = check_moe(h, err)))
        return s;
    if (dout)
        *dout = d;
    return ML_OK;
}

int ml_mlb_layer_is_moe(const ml_mlb_header *h, uint8_t f)
{
    return h->n_experts && (!h->layer_flags || (f & ML_LAYER_MOE));
}

/* The FFN rules of one layer's flags: experts need n_experts, a dense FFN
 * needs hidden_dim. */
static ml_status check_layer_ffn(const ml_mlb_header *h, uint8_t f, const char *name, int64_t off,
                                 ml_error *err)
{
    if ((f & ML_LAYER_MOE) && h->n_experts == 0)
        return ml__err(err, ML_E_FORMAT, name, off, "experts (bit 4) but n_experts is 0");
    if (!(f & ML_LAYER_MOE) && h->hidden_dim == 0)
        return ml__err(err, ML_E_FORMAT, name, off, "a dense FFN (no bit 4) but hidden_dim is 0");
    return ML_OK;
}

ml_status ml_mlb_layer_flags_validate(const ml_mlb_header *h, const uint8_t *flags, ml_error *err)
{
    int any_moe = 0;
    for (uint32_t l = 0; l < h->n_layers; l++) {
        uint8_t f = flags[l];
        int64_t off = ML_MLB_HEADER_SIZE + (int64_t)l;
        char name[40];
        snprintf(name, sizeof name, "layer_flags[%u]", l);
        if (f & ~ML_LAYER_KNOWN)
            return ml__err(err, ML_E_FORMAT, name, off, "0x%02x has unknown bits (known: 0x1f)",
                           f);
        if ((f & ML_LAYER_LOCAL_ROPE) && (f & ML_LAYER_NO_ROPE))
            return ml__err(err, ML_E_FORMAT, name, off,
                           "0x%02x combines local RoPE (bit 1) with no RoPE (bit 2)", f);
        if ((f & ML_LAYER_LINEAR) && (f & ~(ML_LAYER_LINEAR | ML_LAYER_MOE)))
            return ml__err(err, ML_E_FORMAT, name, off,
                           "0x%02x combines linear attention (bit 3) with bits other than "
                           "experts (bit 4)",
                           f);
        if ((f & ML_LAYER_LOCAL_ROPE) && h->rope_local_theta == 0)
            return ml__err(err, ML_E_FORMAT, name, off,
                           "local RoPE (bit 1) but rope_local_theta is 0");
        if ((f & ML_LAYER_SLIDING) && h->sliding_window == 0)
            return ml__err(err, ML_E_FORMAT, name, off,
                           "sliding window (bit 0) but sliding_window is 0");
        if ((f & ML_LAYER_LINEAR) && h->lin_k_heads == 0)
            return ml__err(err, ML_E_FORMAT, name, off,
                           "linear attention (bit 3) but lin_k_heads is 0");
        ml_status s = check_layer_ffn(h, f, name, off, err);
        if (s)
            return s;
        any_moe |= (f & ML_LAYER_MOE) != 0;
    }
    if (h->n_experts && !any_moe)
        return BAD(ML_E_FORMAT, n_experts, "%u experts but no layer has experts (flag bit 4)",
                   h->n_experts);
    return ML_OK;
}

/* ---------------------------------------------------------------------------
 * Layout
 * ------------------------------------------------------------------------- */

static const char *const role_names[ML_R_COUNT] = {
    [ML_R_LAYER_FLAGS] = "layer_flags", [ML_R_TOK_EMB] = "tok_emb",
    [ML_R_ATTN_NORM] = "attn_norm",     [ML_R_WQ] = "wq",
    [ML_R_WK] = "wk",                   [ML_R_WV] = "wv",
    [ML_R_WO] = "wo",                   [ML_R_WG] = "wg",
    [ML_R_BQ] = "bq",                   [ML_R_BK] = "bk",
    [ML_R_BV] = "bv",                   [ML_R_Q_NORM] = "q_norm",
    [ML_R_K_NORM] = "k_norm",           [ML_R_LQKV] = "lqkv",
    [ML_R_LZ] = "lz",                   [ML_R_LB] = "lb",
    [ML_R_LA] = "la",                   [ML_R_LCONV] = "lconv",
    [ML_R_DT_BIAS] = "dt_bias",         [ML_R_A_LOG] = "A_log",
    [ML_R_LNORM] = "lnorm",             [ML_R_LOUT] = "lout",
    [ML_R_FFN_NORM] = "ffn_norm",       [ML_R_W1] = "w1",
    [ML_R_W2] = "w2",                   [ML_R_W3] = "w3",
    [ML_R_POST_ATTN_NORM] = "post_attn_norm", [ML_R_POST_FFN_NORM] = "post_ffn_norm",
    [ML_R_FINAL_NORM] = "final_norm",   [ML_R_WCLS] = "wcls",
    [ML_R_MAT_TYPES] = "mat_types",
    [ML_R_WR] = "wr",   [ML_R_RB] = "rb",   [ML_R_SB] = "sb",
    [ML_R_EW1] = "w1",  [ML_R_EW2] = "w2",  [ML_R_EW3] = "w3",
    [ML_R_EB1] = "b1",  [ML_R_EB2] = "b2",  [ML_R_EB3] = "b3",
    [ML_R_WS1] = "ws1", [ML_R_WS2] = "ws2", [ML_R_WS3] = "ws3",
    [ML_R_WSG] = "wsg", [ML_R_BO] = "bo",   [ML_R_SINKS] = "sinks",
};

/* One expert's span, in file order: its matrices, then its biases. */
static const ml_role expert_roles[6] = {ML_R_EW1, ML_R_EW2, ML_R_EW3,
                                        ML_R_EB1, ML_R_EB2, ML_R_EB3};

/* Arrays in one expert's span. */
static unsigned expert_arrays(const ml_mlb_header *h)
{
    return h->moe_flags & ML_MOE_EXPERT_BIAS ? 6 : 3;
}

/* The block types: name, ggml id, block elements and bytes. */
static const struct {
    const char *name;
    uint32_t ggml, elems, bytes;
} block_types[ML_TYPE_COUNT] = {
    [ML_TYPE_Q4_1] = {"Q4_1", 3, 32, 20},      [ML_TYPE_Q5_0] = {"Q5_0", 6, 32, 22},
    [ML_TYPE_Q5_1] = {"Q5_1", 7, 32, 24},      [ML_TYPE_Q2_K] = {"Q2_K", 10, 256, 84},
    [ML_TYPE_Q3_K] = {"Q3_K", 11, 256, 110},   [ML_TYPE_Q4_K] = {"Q4_K", 12, 256, 144},
    [ML_TYPE_Q5_K] = {"Q5_K", 13, 256, 176},   [ML_TYPE_Q6_K] = {"Q6_K", 14, 256, 210},
    [ML_TYPE_IQ4_NL] = {"IQ4_NL", 20, 32, 18}, [ML_TYPE_IQ4_XS] = {"IQ4_XS", 23, 256, 136},
    [ML_TYPE_MXFP4] = {"MXFP4", 39, 32, 17},   [ML_TYPE_F16] = {"F16", 1, 1, 2},
    [ML_TYPE_BF16] = {"BF16", 30, 1, 2},
};

const char *ml_type_name(ml_type t)
{
    switch (t) {
    case ML_TYPE_F32: return "F32";
    case ML_TYPE_Q8_0: return "Q8_0";
    case ML_TYPE_Q4_0: return "Q4_0";
    case ML_TYPE_U8: return "U8";
    default: break;
    }
    return (unsigned)t < ML_TYPE_COUNT && block_types[t].name ? block_types[t].name : "?";
}

int ml_type_block(ml_type t, uint32_t *elems, uint32_t *bytes, uint32_t *ggml)
{
    if ((unsigned)t >= ML_TYPE_COUNT || !block_types[t].name)
        return 0;
    if (elems)
        *elems = block_types[t].elems;
    if (bytes)
        *bytes = block_types[t].bytes;
    if (ggml)
        *ggml = block_types[t].ggml;
    return 1;
}

ml_type ml_type_of_ggml(uint32_t ggml)
{
    for (unsigned t = 0; t < ML_TYPE_COUNT; t++)
        if (block_types[t].name && block_types[t].ggml == ggml)
            return (ml_type)t;
    return ML_TYPE_F32;
}

/* A MoE layer's FFN in file order; ML_R_EW1 stands for all the experts'
 * spans (next_role walks them). */
static unsigned moe_roles(const ml_mlb_header *h, ml_role *r)
{
    unsigned n = 0;
    r[n++] = ML_R_WR;
    if (h->moe_flags & ML_MOE_ROUTER_BIAS)
        r[n++] = ML_R_RB;
    if (h->moe_flags & ML_MOE_SELECT_BIAS)
        r[n++] = ML_R_SB;
    r[n++] = ML_R_EW1;
    if (h->shared_hidden_dim)
        r[n++] = ML_R_WS1, r[n++] = ML_R_WS2, r[n++] = ML_R_WS3;
    if (h->moe_flags & ML_MOE_SHARED_GATE)
        r[n++] = ML_R_WSG;
    return n;
}

/* The roles of layer l, in file order. */
static unsigned layer_roles(const ml_mlb_header *h, uint8_t flags, ml_role *r)
{
    unsigned n = 0;
    r[n++] = ML_R_ATTN_NORM;
    if (flags & ML_LAYER_LINEAR) {
        r[n++] = ML_R_LQKV, r[n++] = ML_R_LZ, r[n++] = ML_R_LB, r[n++] = ML_R_LA;
        r[n++] = ML_R_LCONV, r[n++] = ML_R_DT_BIAS, r[n++] = ML_R_A_LOG;
        r[n++] = ML_R_LNORM, r[n++] = ML_R_LOUT;
    } else {
        r[n++] = ML_R_WQ, r[n++] = ML_R_WK, r[n++] = ML_R_WV, r[n++] = ML_R_WO;
        if (h->attn_gate)
            r[n++] = ML_R_WG;
        if (h->qkv_bias)
            r[n++] = ML_R_BQ, r[n++] = ML_R_BK, r[n++] = ML_R_BV;
        if (h->o_bias)
            r[n++] = ML_R_BO;
        if (h->qk_norm)
            r[n++] = ML_R_Q_NORM, r[n++] = ML_R_K_NORM;
        if (h->attn_sinks)
            r[n++] = ML_R_SINKS;
    }
    r[n++] = ML_R_FFN_NORM;
    if (ml_mlb_layer_is_moe(h, flags))
        n += moe_roles(h, r + n);
    else
        r[n++] = ML_R_W1, r[n++] = ML_R_W2, r[n++] = ML_R_W3;
    if (h->post_norms)
        r[n++] = ML_R_POST_ATTN_NORM, r[n++] = ML_R_POST_FFN_NORM;
    return n;
}

/* Shape and q8 class of a role. */
static void role_shape(const ml_mlb_header *h, const ml_mlb_derived *d, ml_role role, ml_tensor *t)
{
    uint32_t rows = 0, cols = 0, cls = 0;
    int vector = 1;
    switch (role) {
    case ML_R_LAYER_FLAGS: rows = h->n_layers; break;
    case ML_R_ATTN_NORM: case ML_R_FFN_NORM: case ML_R_POST_ATTN_NORM:
    case ML_R_POST_FFN_NORM: case ML_R_FINAL_NORM: rows = h->dim; break;
    case ML_R_BQ: rows = d->q_dim; break;
    case ML_R_BK: case ML_R_BV: rows = d->kv_dim; break;
    case ML_R_Q_NORM: case ML_R_K_NORM: rows = d->head_dim; break;
    case ML_R_DT_BIAS: case ML_R_A_LOG: rows = h->lin_v_heads; break;
    case ML_R_LNORM: rows = h->lin_v_dim; break;
    case ML_R_RB: case ML_R_SB: rows = h->n_experts; break;
    case ML_R_EB1: case ML_R_EB3: rows = h->expert_hidden_dim; break;
    case ML_R_EB2: case ML_R_WSG: case ML_R_BO: rows = h->dim; break;
    case ML_R_SINKS: rows = h->n_heads; break;
    default: vector = 0;
    }
    if (vector) {
        t->ndim = 1, t->rows = rows, t->cols = 1, t->q8_class = 0;
        t->type = role == ML_R_LAYER_FLAGS ? ML_TYPE_U8 : ML_TYPE_F32;
        return;
    }
    switch (role) {
    case ML_R_TOK_EMB:
        rows = h->vocab, cols = h->dim;
        cls = h->shared_classifier ? ML_Q8_TOK_EMB | ML_Q8_WCLS : ML_Q8_TOK_EMB;
        break;
    case ML_R_WCLS: rows = h->vocab, cols = h->dim, cls = ML_Q8_WCLS; break;
    case ML_R_WQ: case ML_R_WG: rows = d->q_dim, cols = h->dim, cls = ML_Q8_WQK; break;
    case ML_R_WK: rows = d->kv_dim, cols = h->dim, cls = ML_Q8_WQK; break;
    case ML_R_WV: rows = d->kv_dim, cols = h->dim, cls = ML_Q8_WV; break;
    case ML_R_WO: rows = h->dim, cols = d->q_dim, cls = ML_Q8_WO; break;
    case ML_R_LQKV: rows = d->lin_qkv, cols = h->dim, cls = ML_Q8_WQK; break;
    case ML_R_LZ: rows = d->lin_vd, cols = h->dim, cls = ML_Q8_WV; break;
    case ML_R_LB: case ML_R_LA: rows = h->lin_v_heads, cols = h->dim, cls = 0; break;
    case ML_R_LOUT: rows = h->dim, cols = d->lin_vd, cls = ML_Q8_WO; break;
    case ML_R_W1: case ML_R_W3: rows = h->hidden_dim, cols = h->dim, cls = ML_Q8_W13; break;
    case ML_R_W2: rows = h->dim, cols = h->hidden_dim, cls = ML_Q8_W2; break;
    case ML_R_EW1: case ML_R_EW3:
        rows = h->expert_hidden_dim, cols = h->dim, cls = ML_Q8_W13;
        break;
    case ML_R_EW2: rows = h->dim, cols = h->expert_hidden_dim, cls = ML_Q8_W2; break;
    case ML_R_WS1: case ML_R_WS3:
        rows = h->shared_hidden_dim, cols = h->dim, cls = ML_Q8_W13;
        break;
    case ML_R_WS2: rows = h->dim, cols = h->shared_hidden_dim, cls = ML_Q8_W2; break;
    case ML_R_LCONV: /* F32 matrices: lconv, and the router (routing is a */
    case ML_R_WR:    /* discrete choice, made on unquantized weights) */
        t->ndim = 2, t->q8_class = 0, t->type = ML_TYPE_F32;
        t->rows = role == ML_R_WR ? h->n_experts : d->lin_qkv;
        t->cols = role == ML_R_WR ? h->dim : h->lin_conv;
        return;
    default: break;
    }
    t->ndim = 2, t->rows = rows, t->cols = cols;
    t->q8_class = cls;
    int q8 = h->wtype == ML_WTYPE_Q8_0 || (h->q8_mask & cls) || role == ML_R_LB || role == ML_R_LA;
    t->type = q8 ? ML_TYPE_Q8_0 : ML_TYPE_Q4_0;
}

int ml_type_is_matrix(uint32_t code)
{
    return code < ML_TYPE_COUNT && code != ML_TYPE_U8;
}

double ml_type_bits(ml_type t, int scale_f16)
{
    uint32_t e, b;
    switch (t) {
    case ML_TYPE_F32: return 32;
    case ML_TYPE_Q8_0: return scale_f16 ? 8.5 : 9;
    case ML_TYPE_Q4_0: return scale_f16 ? 4.5 : 5;
    case ML_TYPE_U8: return 8;
    default: break;
    }
    return ml_type_block(t, &e, &b, NULL) ? 8.0 * b / e : 0;
}

/* Matrices of one layer's FFN: w1 w2 w3, or each expert's and the shared
 * expert's (the router is F32 and not one). */
static uint32_t ffn_matrices(const ml_mlb_header *h, uint8_t flags)
{
    if (!ml_mlb_layer_is_moe(h, flags))
        return 3;
    return 3 * h->n_experts + (h->shared_hidden_dim ? 3 : 0);
}

/* Matrices of one layer: the type table's entries for it. */
static uint32_t layer_matrices(const ml_mlb_header *h, uint8_t flags)
{
    if (flags & ML_LAYER_LINEAR)
        return 5 + ffn_matrices(h, flags); /* lqkv lz lb la lout */
    return 4 + (h->attn_gate ? 1 : 0) + ffn_matrices(h, flags);
}

uint32_t ml_mlb_matrix_count(const ml_mlb_header *h, const uint8_t *flags)
{
    if (ml_mlb_header_validate(h, NULL, NULL, NULL) != ML_OK)
        return 0;
    uint32_t n = 1 + (h->shared_classifier ? 0 : 1);
    /* at most 65536 x (5 + 3 x 1024 + 3) < 2^28: no overflow */
    for (uint32_t l = 0; l < h->n_layers; l++)
        n += layer_matrices(h, flags && h->layer_flags ? flags[l] : 0);
    return n;
}

uint64_t ml_mlb_types_offset(const ml_mlb_header *h)
{
    uint64_t off = ML_MLB_HEADER_SIZE;
    if (h->layer_flags) /* n_layers <= 65536: no overflow */
        off = (off + h->n_layers + ML_MLB_ALIGN - 1) / ML_MLB_ALIGN * ML_MLB_ALIGN;
    return off;
}

void ml_mlb_layout_begin_types(ml_mlb_layout *it, const ml_mlb_header *h, const uint8_t *flags,
                               const uint8_t *types)
{
    memset(it, 0, sizeof *it);
    it->h = h;
    it->flags = flags;
    it->pos = ML_MLB_HEADER_SIZE;
    int table = h->wtype == ML_WTYPE_TABLE;
    it->section = h->layer_flags ? 0 : table ? 6 : 1;
    ml_status s = ml_mlb_header_validate(h, NULL, &it->d, NULL);
    if (s != ML_OK) {
        it->section = 5; /* invalid header: nothing to lay out */
        return;
    }
    if (table) {
        it->types = types;
        it->types_offset = ml_mlb_types_offset(h);
    }
}

void ml_mlb_layout_begin(ml_mlb_layout *it, const ml_mlb_header *h, const uint8_t *flags)
{
    ml_mlb_layout_begin_types(it, h, flags, NULL);
}

/* Inside a MoE layer's experts: the role of the next array of the current
 * expert's span; 1 when the last expert's span is done. */
static int next_expert_role(ml_mlb_layout *it, ml_role *role, int32_t *expert)
{
    const ml_mlb_header *h = it->h;
    *role = expert_roles[it->estep];
    *expert = (int32_t)it->expert;
    if (++it->estep < expert_arrays(h))
        return 0;
    it->estep = 0;
    if (++it->expert < h->n_experts)
        return 0;
    it->expert = 0;
    return 1;
}

/* Picks the role of the next array and advances the state; 0 at the end. */
static int next_role(ml_mlb_layout *it, ml_role *role, int32_t *layer, int32_t *expert)
{
    const ml_mlb_header *h = it->h;
    *layer = -1;
    *expert = -1;
    switch (it->section) {
    case 0:
        it->section = h->wtype == ML_WTYPE_TABLE ? 6 : 1;
        *role = ML_R_LAYER_FLAGS;
        return 1;
    case 6: it->section = 1; *role = ML_R_MAT_TYPES; return 1;
    case 1: it->section = 2; *role = ML_R_TOK_EMB; return 1;
    case 2: {
        ml_role r[32];
        uint8_t f = it->flags && h->layer_flags ? it->flags[it->layer] : 0;
        unsigned n = layer_roles(h, f, r);
        *role = r[it->step];
        *layer = (int32_t)it->layer;
        if (*role == ML_R_EW1 && !next_expert_role(it, role, expert))
            return 1; /* more arrays of the experts follow */
        if (++it->step == n) {
            it->step = 0;
            if (++it->layer == h->n_layers)
                it->section = 3;
        }
        return 1;
    }
    case 3: it->section = h->shared_classifier ? 5 : 4; *role = ML_R_FINAL_NORM; return 1;
    case 4: it->section = 5; *role = ML_R_WCLS; return 1;
    default: return 0;
    }
}

/* Every expert of a layer has expert 0's types, role by role, so that
 * every span has the same size and expert e starts e spans after expert
 * 0 (the runtime finds it without a search).  Expert e's entries are 3 e
 * after expert 0's. */
static ml_status same_as_expert0(const ml_mlb_layout *it, const ml_tensor *t, uint32_t i,
                                 ml_error *err)
{
    if (t->expert <= 0)
        return ML_OK;
    uint32_t i0 = i - 3 * (uint32_t)t->expert;
    if (it->types[i] == it->types[i0])
        return ML_OK;
    return ml__err(err, ML_E_FORMAT, t->name, (int64_t)(it->types_offset + i),
                   "type table entry %u is %s but expert 0's (entry %u) is %s: a layer's "
                   "experts have one type per matrix",
                   i, ml_type_name((ml_type)it->types[i]), i0,
                   ml_type_name((ml_type)it->types[i0]));
}

/* With a type table, a matrix takes its type from its entry: codes that
 * are no matrix type, and block types that do not tile the rows, are
 * refused here, so loader, verifier and writer refuse them alike. */
static ml_status table_type(ml_mlb_layout *it, ml_tensor *t, ml_error *err)
{
    uint32_t i = it->mat++;
    if (!it->types)
        return ml__err(err, ML_E_FORMAT, t->name, -1,
                       "wtype 3 but no type table was given to lay the matrices out");
    uint8_t code = it->types[i];
    int64_t at = (int64_t)(it->types_offset + i);
    if (!ml_type_is_matrix(code))
        return ml__err(err, ML_E_FORMAT, t->name, at,
                       "type table entry %u is %u, not a matrix type (0-2, 4-16)", i, code);
    ml_status s = same_as_expert0(it, t, i, err);
    if (s)
        return s;
    t->type = (ml_type)code;
    uint32_t elems;
    if (ml_type_block(t->type, &elems, NULL, NULL) && t->cols % elems)
        return ml__err(err, ML_E_SHAPE, t->name, at,
                       "%u columns are not a multiple of %s's %u-element blocks "
                       "(type table entry %u)",
                       t->cols, ml_type_name(t->type), elems, i);
    return ML_OK;
}

/* Bytes of the tensor's first (or only) array; 1 on overflow. */
static int data_bytes(const ml_tensor *t, uint64_t *bytes)
{
    uint64_t n = (uint64_t)t->rows * t->cols;
    uint32_t elems, bb;
    switch (t->type) {
    case ML_TYPE_U8: case ML_TYPE_Q8_0: *bytes = n; return 0;
    case ML_TYPE_F32: return ml__mul64(n, 4, bytes);
    case ML_TYPE_Q4_0: *bytes = n / 2; return 0;
    default: break;
    }
    ml_type_block(t->type, &elems, &bb, NULL);
    return ml__mul64(n / elems, bb, bytes);
}

static int is_matrix_role(const ml_tensor *t)
{
    return t->ndim == 2 && t->role != ML_R_LCONV && t->role != ML_R_WR;
}

int ml_mlb_layout_next(ml_mlb_layout *it, ml_tensor *t, ml_error *err)
{
    ml_role role;
    int32_t layer, expert;
    if (!next_role(it, &role, &layer, &expert))
        return 0;
    const ml_mlb_header *h = it->h;
    memset(t, 0, sizeof *t);
    t->role = role;
    t->layer = layer;
    t->expert = expert;
    if (expert >= 0) /* "blk.65535.exp.1023.w1" fits the 32 bytes */
        snprintf(t->name, sizeof t->name, "blk.%d.exp.%d.%s", layer, expert, role_names[role]);
    else if (layer >= 0)
        snprintf(t->name, sizeof t->name, "blk.%d.%s", layer, role_names[role]);
    else
        snprintf(t->name, sizeof t->name, "%s", role_names[role]);
    if (role == ML_R_MAT_TYPES) {
        t->ndim = 1, t->rows = ml_mlb_matrix_count(h, it->flags), t->cols = 1;
        t->type = ML_TYPE_U8;
    } else {
        role_shape(h, &it->d, role, t);
    }
    if (h->wtype == ML_WTYPE_TABLE && is_matrix_role(t)) {
        ml_status s = table_type(it, t, err);
        if (s) {
            it->section = 5;
            return -1;
        }
    }
    uint64_t n = (uint64_t)t->rows * t->cols, bytes = 0;
    int ovf = data_bytes(t, &bytes);
    t->offset = it->pos;
    t->nbytes = bytes;
    uint64_t end;
    ovf |= ml__add64(t->offset, bytes, &end) || ml__align_up(end, ML_MLB_ALIGN, &it->pos);
    if (t->type == ML_TYPE_Q8_0 || t->type == ML_TYPE_Q4_0) {
        t->scale_offset = it->pos;
        ovf |= ml__mul64(n / 32, h->scale_f16 ? 2 : 4, &t->scale_nbytes);
        ovf |= ml__add64(t->scale_offset, t->scale_nbytes, &end) ||
               ml__align_up(end, ML_MLB_ALIGN, &it->pos);
    }
    if (ovf) {
        it->section = 5;
        ml__err(err, ML_E_NOMEM, t->name, -1, "the file size implied by the header overflows");
        return -1;
    }
    return 1;
}

/* End of a tensor's last array, without padding. */
static uint64_t tensor_end(const ml_tensor *t)
{
    return t->scale_nbytes ? t->scale_offset + t->scale_nbytes : t->offset + t->nbytes;
}

ml_status ml_mlb_layout_size_types(const ml_mlb_header *h, const uint8_t *flags,
                                   const uint8_t *types, uint64_t *end, size_t *n_tensors,
                                   ml_error *err)
{
    ml_mlb_layout it;
    ml_tensor t;
    size_t n = 0;
    uint64_t e = ML_MLB_HEADER_SIZE;
    int r;
    ml_error local;
    if (!err)
        err = &local;
    ml_mlb_layout_begin_types(&it, h, flags, types);
    if (it.section == 5)
        return ml_mlb_header_validate(h, NULL, NULL, err);
    while ((r = ml_mlb_layout_next(&it, &t, err)) == 1) {
        n++;
        e = tensor_end(&t);
    }
    if (r < 0)
        return err->code;
    if (end)
        *end = e;
    if (n_tensors)
        *n_tensors = n;
    return ML_OK;
}

ml_status ml_mlb_layout_size(const ml_mlb_header *h, const uint8_t *flags, uint64_t *end,
                             size_t *n_tensors, ml_error *err)
{
    if (h->wtype == ML_WTYPE_TABLE)
        return ml__err(err, ML_E_INVAL, "wtype", 44,
                       "3 (type table): the layout needs the table (ml_mlb_layout_size_types)");
    return ml_mlb_layout_size_types(h, flags, NULL, end, n_tensors, err);
}

uint64_t ml_tensor_elements(const ml_tensor *t)
{
    return (uint64_t)t->rows * t->cols;
}

float ml_tensor_scale(const ml_tensor *t, uint64_t i)
{
    return t->scales_f16 ? ml_f16_to_f32(t->scales_f16[i]) : t->scales[i];
}

uint64_t ml_tensor_row_bytes(const ml_tensor *t)
{
    uint32_t elems, bytes;
    switch (t->type) {
    case ML_TYPE_F32: return (uint64_t)t->cols * 4;
    case ML_TYPE_Q8_0: case ML_TYPE_U8: return t->cols;
    case ML_TYPE_Q4_0: return t->cols / 2;
    default: break;
    }
    return ml_type_block(t->type, &elems, &bytes, NULL) ? (uint64_t)t->cols / elems * bytes : 0;
}

/* Q8_0 and Q4_0: quants and scales are separate arrays, block by block. */
static void dequantize_spec(const ml_tensor *t, uint64_t first, uint64_t count, float *out)
{
    for (uint64_t e = 0; e < count; e += 32) {
        const uint64_t b = (first + e) / 32;
        const float d = ml_tensor_scale(t, b);
        if (t->type == ML_TYPE_Q8_0)
            ml_dequantize_row_q8_0((const int8_t *)t->data + 32 * b, &d, 32, out + e);
        else
            ml_dequantize_row_q4_0((const uint8_t *)t->data + 16 * b, &d, 32, out + e);
    }
}

ml_status ml_tensor_dequantize(const ml_tensor *t, uint64_t r0, uint64_t n, float *out,
                               ml_error *err)
{
    const uint64_t cols = t->cols, first = r0 * cols, count = n * cols;
    uint32_t ggml;
    switch (t->type) {
    case ML_TYPE_F32:
        memcpy(out, (const float *)t->data + first, (size_t)count * sizeof *out);
        return ML_OK;
    case ML_TYPE_Q8_0: case ML_TYPE_Q4_0:
        dequantize_spec(t, first, count, out);
        return ML_OK;
    default: break;
    }
    if (!ml_type_block(t->type, NULL, NULL, &ggml))
        return ml__err(err, ML_E_UNSUPPORTED, t->name, (int64_t)t->offset,
                       "%s tensors hold no weights to dequantize", ml_type_name(t->type));
    /* Rows are whole blocks: row r0 starts r0 row_bytes into the data. */
    const uint8_t *src = (const uint8_t *)t->data + r0 * ml_tensor_row_bytes(t);
    ml_status s = ml_gguf_dequantize_raw(ggml, src, count, out, err);
    if (s && err) { /* name the .mlb tensor, not the empty GGUF one */
        snprintf(err->field, sizeof err->field, "%s", t->name);
        err->offset = (int64_t)t->offset;
    }
    return s;
}

void ml_tensor_dequantize_rows(const ml_tensor *t, uint64_t r0, uint64_t n, float *out)
{
    if (ml_tensor_dequantize(t, r0, n, out, NULL) != ML_OK)
        for (uint64_t i = 0; i < n * t->cols; i++)
            out[i] = NAN;
}

/* Saturating, so absurd --ctx values print as huge rather than wrap. */
static uint64_t sat_mul(uint64_t a, uint64_t b)
{
    uint64_t r;
    return ml__mul64(a, b, &r) ? UINT64_MAX : r;
}

uint64_t ml_mlb_layer_state_bytes(const ml_mlb_header *h, uint8_t flags, uint64_t ctx)
{
    ml_mlb_derived d;
    if (ml_mlb_header_validate(h, NULL, &d, NULL) != ML_OK)
        return 0;
    if (flags & ML_LAYER_LINEAR) {
        uint64_t state = (uint64_t)h->lin_v_heads * h->lin_k_dim * h->lin_v_dim;
        uint64_t conv = (uint64_t)(h->lin_conv - 1) * d.lin_qkv;
        return 4 * (state + conv);
    }
    int sliding = h->layer_flags ? (flags & ML_LAYER_SLIDING) != 0 : h->sliding_window != 0;
    uint64_t pos = sliding && h->sliding_window < ctx ? h->sliding_window : ctx;
    return sat_mul(sat_mul(pos, d.kv_dim), 2 * 4);
}
