/* convert_header.c - the .mlb header of a GGUF: architecture, dimensions,
 * RoPE scaling (including Llama 3's, recovered from rope_freqs), the
 * per-architecture features and the per-layer flags, each read from the
 * keys llama.cpp reads for that architecture ("{arch}.<name>"), with
 * llama.cpp's defaults.  A value .mlb cannot hold is refused naming its
 * key.  See gguf2mlb(1), ARCHITECTURES and HEADER. */
#include "convert/convert_impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static const ml__arch_info archs[ML__ARCH_COUNT] = {
    [ML__ARCH_LLAMA] =
        {"llama", 0, 0, 0, 1,
         "Llama 2/3.x, Mistral, SmolLM/SmolLM2: q/k rows already in interleaved RoPE pairs"},
    [ML__ARCH_QWEN2] =
        {"qwen2", 1, 0, 0, 1,
         "Qwen2/2.5: q/k/v biases; q/k rows and biases permuted to interleaved RoPE pairs"},
    [ML__ARCH_QWEN3] = {"qwen3", 1, 0, 1, 1,
                        "Qwen3: q/k norms; q/k rows and norms permuted to interleaved RoPE pairs"},
    [ML__ARCH_GEMMA] =
        {"gemma", 1, 1, 0, 0,
         "Gemma: GELU-tanh, embedding scale sqrt(dim), tied classifier, (1+w) norms as "
         "stored; q/k rows permuted"},
    [ML__ARCH_GEMMA2] = {"gemma2", 1, 1, 0, 0,
                         "Gemma 2: softcaps, post norms, sliding window on even layers; q/k rows "
                         "permuted"},
    [ML__ARCH_GEMMA3] =
        {"gemma3", 1, 1, 1, 0,
         "Gemma 3: local (sliding, RoPE base swa, unscaled) and global layers, q/k norms, "
         "post norms; q/k rows and norms permuted"},
    [ML__ARCH_SMOLLM3] = {"smollm3", 0, 0, 0, 1,
                          "SmolLM3: every fourth layer without RoPE; q/k rows already interleaved"},
    [ML__ARCH_QWEN35] =
        {"qwen35", 1, 0, 1, 0,
         "Qwen3.5: gated delta-rule linear layers and gated full-attention layers with "
         "partial RoPE; query/gate rows split, value heads back in grouped order, "
         "A_log = ln(-ssm_a)"},
    [ML__ARCH_QWEN3MOE] =
        {"qwen3moe", 1, 0, 1, 1,
         "Qwen3-MoE: Qwen3 attention, every FFN a softmax top-k mixture of experts (renormalized); "
         "expert stacks split into one contiguous span per expert"},
    [ML__ARCH_QWEN35MOE] =
        {"qwen35moe", 1, 0, 1, 0,
         "Qwen3.5-MoE: the Qwen3.5 hybrid's layers, every FFN a softmax top-k mixture of "
         "experts (renormalized) plus a shared expert behind a sigmoid gate"},
    [ML__ARCH_GPT_OSS] =
        {"gpt-oss", 1, 0, 0, 0,
         "gpt-oss: attention sinks, q/k/v/o biases, sliding window on even layers, YaRN; every "
         "FFN a top-k mixture of experts (softmax over the chosen logits, router and expert "
         "biases, clamped SwiGLU); q/k rows and biases permuted"},
};

static ml_status get_u32(ml__conv_build *b, const char *suffix, uint32_t *v, int *found)
{
    return ml_gguf_get_u32(b->g, ml__conv_key(b, suffix), v, found, b->err);
}

static ml_status get_f32(ml__conv_build *b, const char *suffix, float *v, int *found)
{
    return ml_gguf_get_f32(b->g, ml__conv_key(b, suffix), v, found, b->err);
}

/* A key that llama.cpp reads as one value or one per block
 * (get_key_or_arr): .mlb has a single value, so every entry of a layer
 * that uses the key must agree; layers where `skip` says so may hold 0. */
static ml_status get_per_layer(ml__conv_build *b, const char *suffix, uint32_t *out, int *found,
                               int skip_linear)
{
    const char *key = ml__conv_key(b, suffix);
    const ml_gguf_kv *kv = ml_gguf_find(b->g, key);
    *found = kv != NULL;
    if (!kv)
        return ML_OK;
    if (kv->value.type != ML_GGUF_ARRAY)
        return ml_gguf_value_u32(&kv->value, out, b->err);
    if (kv->value.count != b->n_layer_all)
        return ml__err(b->err, ML_E_FORMAT, key, (int64_t)kv->value.offset,
                       "%llu entries, block_count is %u", (unsigned long long)kv->value.count,
                       b->n_layer_all);
    int have = 0;
    uint32_t first = 0;
    for (uint32_t l = 0; l < b->n_layers; l++) {
        ml_gguf_value e;
        uint32_t v;
        ml_status s = ml_gguf_array_get(&kv->value, l, &e, b->err);
        if (s || (s = ml_gguf_value_u32(&e, &v, b->err)))
            return s;
        if (v == 0 && skip_linear && ml__conv_is_linear(b, l))
            continue;
        if (!have) {
            first = v, have = 1, *out = v;
        } else if (v != first) {
            return ml__err(b->err, ML_E_UNSUPPORTED, key, (int64_t)e.offset,
                           "layer %u has %u, an earlier layer %u: .mlb has one value for all "
                           "layers",
                           l, v, first);
        }
    }
    if (!have)
        *found = 0;
    return ML_OK;
}

/* ===========================================================================
 * Header: dimensions
 * ========================================================================= */

static ml_status read_arch(ml__conv_build *b)
{
    const char *s;
    size_t n;
    ml_status st = ml_gguf_get_str(b->g, "general.architecture", &s, &n, NULL, b->err);
    if (st)
        return st;
    for (int a = 0; a < ML__ARCH_COUNT; a++)
        if (strlen(archs[a].name) == n && memcmp(archs[a].name, s, n) == 0) {
            b->arch = a, b->ai = &archs[a];
            snprintf(b->p->arch, sizeof b->p->arch, "%s", archs[a].name);
            snprintf(b->p->arch_desc, sizeof b->p->arch_desc, "%s", archs[a].desc);
            return ML_OK;
        }
    return ml__err(b->err, ML_E_UNSUPPORTED, "general.architecture",
                   ml__conv_kv_offset(b, "general.architecture"),
                   "'%.*s' is not supported; gguf2mlb converts llama, qwen2, qwen3, gemma, "
                   "gemma2, gemma3, smollm3, qwen35, qwen3moe, qwen35moe and gpt-oss",
                   (int)(n > 40 ? 40 : n), s);
}

/* Features no architecture here can have in .mlb.  (A split model is no
 * longer one of them: its parts were joined when it was opened.) */
static ml_status check_container(ml__conv_build *b)
{
    uint32_t v = 0;
    int found;
    ml_status s;
    if ((s = get_u32(b, "expert_count", &v, &found)))
        return s;
    if (found && v > 0 && !ml__conv_is_moe_arch(b->arch))
        return ml__conv_refuse(b, ml__conv_key(b, "expert_count"),
                               "%u experts in a %s model: gguf2mlb converts experts for "
                               "qwen3moe, qwen35moe and gpt-oss only",
                               v, b->p->arch);
    const ml_gguf_kv *kv = ml_gguf_find(b->g, ml__conv_key(b, "attention.causal"));
    if (kv) {
        int causal;
        if ((s = ml_gguf_value_bool(&kv->value, &causal, b->err)))
            return s;
        if (!causal)
            return ml__conv_refuse(b, kv->key, "non-causal attention has no .mlb form");
    }
    return ML_OK;
}

/* Qwen3.5's layer kinds: attention.recurrent_layers (one bool per block)
 * or, when absent, every full_attention_interval-th layer is full. */
static ml_status qwen35_layers(ml__conv_build *b)
{
    const char *key = ml__conv_key(b, "attention.recurrent_layers");
    const ml_gguf_kv *kv = ml_gguf_find(b->g, key);
    ml_status s;
    if (kv) {
        if (kv->value.type != ML_GGUF_ARRAY || kv->value.count != b->n_layer_all)
            return ml__err(b->err, ML_E_FORMAT, key, (int64_t)kv->value.offset,
                           "expected an array of %u flags", b->n_layer_all);
        for (uint32_t l = 0; l < b->n_layers; l++) {
            ml_gguf_value e;
            int64_t v;
            if ((s = ml_gguf_array_get(&kv->value, l, &e, b->err)))
                return s;
            if (e.type == ML_GGUF_BOOL) {
                int bv;
                if ((s = ml_gguf_value_bool(&e, &bv, b->err)))
                    return s;
                v = bv;
            } else if ((s = ml_gguf_value_i64(&e, &v, b->err))) {
                return s;
            }
            if (v)
                b->flags[l] |= ML_LAYER_LINEAR;
        }
        return ML_OK;
    }
    uint32_t interval = 4;
    int found;
    if ((s = get_u32(b, "full_attention_interval", &interval, &found)))
        return s;
    if (interval == 0)
        return ml__conv_bad_key(b, "full_attention_interval", "must be at least 1");
    for (uint32_t l = 0; l < b->n_layers; l++)
        if ((l + 1) % interval != 0)
            b->flags[l] |= ML_LAYER_LINEAR;
    return ML_OK;
}

static ml_status read_layers(ml__conv_build *b)
{
    ml_status s;
    uint32_t nextn = 0;
    int found;
    if ((s = get_u32(b, "block_count", &b->n_layer_all, NULL)) ||
        (s = get_u32(b, "nextn_predict_layers", &nextn, &found)))
        return s;
    if (b->n_layer_all == 0)
        return ml__conv_bad_key(b, "block_count", "a model without layers");
    if (nextn >= b->n_layer_all)
        return ml__conv_bad_key(b, "nextn_predict_layers", "%u of %u blocks", nextn,
                                b->n_layer_all);
    b->n_layers = b->n_layer_all - nextn;
    if (b->n_layers > ML_MLB_DIM_LIMIT)
        return ml__conv_refuse(b, ml__conv_key(b, "block_count"),
                               "%u layers; .mlb allows at most %u", b->n_layers, ML_MLB_DIM_LIMIT);
    if (nextn == 1)
        s = ml__conv_note(b,
                          "block %u is a next-token-prediction (MTP) block "
                          "(nextn_predict_layers 1): not converted",
                          b->n_layers);
    else if (nextn)
        s = ml__conv_note(b,
                          "blocks %u-%u are next-token-prediction (MTP) blocks "
                          "(nextn_predict_layers %u): not converted",
                          b->n_layers, b->n_layer_all - 1, nextn);
    if (s)
        return s;
    if (!(b->flags = calloc(b->n_layers, 1)))
        return ml__err(b->err, ML_E_NOMEM, "", -1, "out of memory");
    b->p->h.n_layers = b->n_layers;
    return ml__conv_qwen35_family(b->arch) ? qwen35_layers(b) : ML_OK;
}

/* A dimension .mlb wants to be a multiple of 32 (rows of Q4_0/Q8_0 blocks). */
static ml_status need32(ml__conv_build *b, const char *key, uint32_t v, const char *what)
{
    if (v % 32 == 0)
        return ML_OK;
    return ml__conv_refuse(b, key, "%s %u is not a multiple of 32, which .mlb requires", what, v);
}

static ml_status read_dims(ml__conv_build *b)
{
    ml_mlb_header *h = &b->p->h;
    ml_status s;
    int found;
    uint32_t v;
    if ((s = get_u32(b, "embedding_length", &h->dim, NULL)) ||
        (s = get_per_layer(b, "attention.head_count", &h->n_heads, &found, 0)))
        return s;
    if (!found || h->n_heads == 0)
        return ml__conv_bad_key(b, "attention.head_count",
                                found ? "no attention heads" : "required key is missing");
    h->n_kv_heads = h->n_heads;
    if ((s = get_per_layer(b, "attention.head_count_kv", &v, &found, 1)))
        return s;
    if (found)
        h->n_kv_heads = v;
    if ((s = get_per_layer(b, "feed_forward_length", &h->hidden_dim, &found, 0)))
        return s;
    if (ml__conv_is_moe_arch(b->arch)) { /* no dense FFN: the width is the experts' fallback */
        b->ffn_len = found ? h->hidden_dim : 0;
        h->hidden_dim = 32; /* checked as a dense width would be; 0 once the experts are read */
    } else if (!found) {
        return ml__err(b->err, ML_E_FORMAT, ml__conv_key(b, "feed_forward_length"), -1,
                       "required key is missing");
    }
    if ((s = get_u32(b, "context_length", &h->max_seq, NULL)) ||
        (s = get_f32(b, "attention.layer_norm_rms_epsilon", &h->norm_eps, NULL)))
        return s;
    if (!(h->norm_eps >= 0) || !isfinite(h->norm_eps))
        return ml__conv_bad_key(b, "attention.layer_norm_rms_epsilon", "%g is not a valid epsilon",
                                (double)h->norm_eps);
    if (h->max_seq == 0 || h->max_seq > ML_MLB_VOCAB_LIMIT)
        return ml__conv_refuse(b, ml__conv_key(b, "context_length"), "%u; .mlb allows 1 to %u",
                               h->max_seq, ML_MLB_VOCAB_LIMIT);
    if (h->dim == 0 || h->dim > ML_MLB_DIM_LIMIT || h->hidden_dim == 0 ||
        h->hidden_dim > ML_MLB_DIM_LIMIT || h->n_heads > ML_MLB_DIM_LIMIT || h->n_kv_heads == 0 ||
        h->n_kv_heads > h->n_heads || h->n_heads % h->n_kv_heads)
        return ml__err(b->err, ML_E_UNSUPPORTED, ml__conv_key(b, "embedding_length"), -1,
                       "dim %u, heads %u, kv heads %u, hidden %u: outside what .mlb allows", h->dim,
                       h->n_heads, h->n_kv_heads, h->hidden_dim);
    if ((s = need32(b, ml__conv_key(b, "embedding_length"), h->dim, "embedding_length")) ||
        (s = need32(b, ml__conv_key(b, "feed_forward_length"), h->hidden_dim,
                    "feed_forward_length")))
        return s;

    uint32_t hk = h->dim % h->n_heads == 0 ? h->dim / h->n_heads : 0, hv;
    int fk, fv;
    if ((s = get_u32(b, "attention.key_length", &hk, &fk)))
        return s;
    hv = hk;
    if ((s = get_u32(b, "attention.value_length", &hv, &fv)))
        return s;
    if (hk == 0 || hk % 2 || hk > ML_MLB_QDIM_LIMIT)
        return ml__conv_refuse(
            b, ml__conv_key(b, "attention.key_length"),
            "head size %u (embedding_length %u, %u heads); .mlb needs an even size", hk, h->dim,
            h->n_heads);
    if (hv != hk)
        return ml__conv_refuse(b, ml__conv_key(b, "attention.value_length"),
                               "%u differs from the key length %u; .mlb has one head size", hv, hk);
    h->head_dim = hk * h->n_heads == h->dim ? 0 : hk;
    uint64_t q_dim = (uint64_t)hk * h->n_heads;
    if (q_dim > ML_MLB_QDIM_LIMIT || q_dim % 32)
        return ml__conv_refuse(b, ml__conv_key(b, "attention.key_length"),
                               "q_dim = %u heads x %u = %llu: .mlb needs a multiple of 32 up to %u",
                               h->n_heads, hk, (unsigned long long)q_dim, ML_MLB_QDIM_LIMIT);
    uint32_t rot = hk;
    if ((s = get_u32(b, "rope.dimension_count", &rot, &found)))
        return s;
    if (rot == 0 || rot % 2 || rot > hk)
        return ml__conv_refuse(
            b, ml__conv_key(b, "rope.dimension_count"),
            "%u rotated dimensions in heads of %u: .mlb needs an even count up to "
            "the head size",
            rot, hk);
    if (rot != hk && b->ai->rot_full)
        return ml__conv_refuse(b, ml__conv_key(b, "rope.dimension_count"),
                               "%u differs from the head size %u, which llama.cpp requires for %s",
                               rot, hk, b->p->arch);
    h->rot_dim = rot == hk ? 0 : rot;
    h->rope_theta = 10000.0f;
    if ((s = get_f32(b, "rope.freq_base", &h->rope_theta, &found)))
        return s;
    if (!(h->rope_theta > 0) || !isfinite(h->rope_theta))
        return ml__conv_bad_key(b, "rope.freq_base", "%g is not a valid RoPE base",
                                (double)h->rope_theta);
    b->d.head_dim = hk;
    b->d.q_dim = (uint32_t)q_dim;
    b->d.kv_dim = hk * h->n_kv_heads;
    b->d.rot_dim = rot;
    b->q_rows = ml__conv_qwen35_family(b->arch) ? 2 * b->d.q_dim : b->d.q_dim;
    return ML_OK;
}

/* ===========================================================================
 * Header: RoPE scaling
 * ========================================================================= */

static ml_status rope_yarn(ml__conv_build *b, float f)
{
    ml_mlb_header *h = &b->p->h;
    ml_status s;
    int found;
    uint32_t orig = h->max_seq;
    float fast = 32.0f, slow = 1.0f, attn = f > 1.0f ? (float)(0.1 * log((double)f) + 1.0) : 1.0f;
    int f_fast, f_slow, f_attn;
    if ((s = get_u32(b, "rope.scaling.original_context_length", &orig, &found)) ||
        (s = get_f32(b, "rope.scaling.yarn_beta_fast", &fast, &f_fast)) ||
        (s = get_f32(b, "rope.scaling.yarn_beta_slow", &slow, &f_slow)) ||
        (s = get_f32(b, "rope.scaling.yarn_attn_factor", &attn, &f_attn)))
        return s;
    if (!found && (s = ml__conv_note(b,
                                     "yarn: no rope.scaling.original_context_length; using "
                                     "context_length %u as llama.cpp does",
                                     orig)))
        return s;
    if (orig == 0 || !(fast > slow) || !(slow > 0) || !isfinite(fast) || !(attn > 0) ||
        !isfinite(attn))
        return ml__conv_refuse(
            b, ml__conv_key(b, "rope.scaling.type"),
            "yarn with original context %u, beta_fast %g, beta_slow %g, attention "
            "factor %g: outside what .mlb allows",
            orig, (double)fast, (double)slow, (double)attn);
    if ((f_fast || f_slow || f_attn) &&
        (s = ml__conv_note(
             b,
             "yarn: beta_fast %g, beta_slow %g, attention factor %g taken from the file's "
             "keys as transformers uses them (llama.cpp ignores these keys for %s)",
             (double)fast, (double)slow, (double)attn, b->p->arch)))
        return s;
    h->rope_type = ML_ROPE_YARN;
    h->rope_factor = f;
    h->rope_low_freq_factor = fast;
    h->rope_high_freq_factor = slow;
    h->rope_orig_max_seq = orig;
    h->rope_attn_factor = attn;
    return ML_OK;
}

/* rope_freqs.weight holds Llama 3.x scaling baked into per-pair divisors. */
static ml_status rope_llama3(ml__conv_build *b)
{
    ml_mlb_header *h = &b->p->h;
    const ml_gguf_tensor *t = b->rope_freqs;
    uint32_t n = b->d.rot_dim / 2;
    ml_status s = ml__conv_shape(b, t, n, 0, "rotated dimensions / 2");
    if (s)
        return s;
    if ((s = ml__conv_check_type(b, t)))
        return s;
    float *r = malloc(n * sizeof *r);
    if (!r)
        return ml__err(b->err, ML_E_NOMEM, "", -1, "out of memory");
    uint32_t hint = 0;
    int found;
    ml__llama3_rope lr;
    if (!(s = ml_gguf_dequantize(t, 0, 1, r, b->err)) &&
        !(s = get_u32(b, "rope.scaling.original_context_length", &hint, &found)))
        s = ml__llama3_recover(r, n, b->d.rot_dim, h->rope_theta, found ? hint : 0, t->name, &lr,
                               b->err);
    free(r);
    if (s)
        return s;
    h->rope_type = ML_ROPE_LLAMA3;
    h->rope_factor = lr.factor;
    h->rope_low_freq_factor = lr.low;
    h->rope_high_freq_factor = lr.high;
    h->rope_orig_max_seq = lr.orig;
    return ml__conv_note(
        b,
        "llama3 RoPE scaling recovered from %s: factor %g, low_freq_factor %g, "
        "high_freq_factor %g, original context %u (%u pairs in the smooth band); the "
        "formula gives back all %u divisors within %.1e",
        t->name, (double)lr.factor, (double)lr.low, (double)lr.high, lr.orig, lr.n_mid, n,
        lr.max_rel_err > 1e-9 ? lr.max_rel_err : 0.0);
}

static ml_status read_rope_scaling(ml__conv_build *b)
{
    ml_mlb_header *h = &b->p->h;
    ml_status s;
    const char *ty = "linear"; /* llama.cpp's default when the key is absent */
    size_t tn = 6;
    int have_type, have_factor;
    float f = 0, attn = 1.0f;
    if ((s = ml_gguf_get_str(b->g, ml__conv_key(b, "rope.scaling.type"), &ty, &tn, &have_type,
                             b->err)) ||
        (s = get_f32(b, "rope.scaling.factor", &f, &have_factor)))
        return s;
    if (!have_factor && (s = get_f32(b, "rope.scale_linear", &f, &have_factor)))
        return s;
    int have_attn;
    if ((s = get_f32(b, "rope.scaling.attn_factor", &attn, &have_attn)))
        return s;
    b->rope_freqs = ml__conv_tensor(b, "rope_freqs.weight");
#define TYPE_IS(lit) (tn == sizeof(lit) - 1 && memcmp(ty, lit, tn) == 0)
    int none = TYPE_IS("none"), linear = TYPE_IS("linear"), yarn = TYPE_IS("yarn");
    if (!none && !linear && !yarn)
        return ml__conv_refuse(b, ml__conv_key(b, "rope.scaling.type"),
                               "'%.*s' RoPE scaling has no .mlb form", (int)(tn > 32 ? 32 : tn),
                               ty);
#undef TYPE_IS
    if (have_factor && (!(f >= 0) || !isfinite(f)))
        return ml__conv_bad_key(b, "rope.scaling.factor", "%g is not a valid factor", (double)f);
    if (attn != 1.0f && !yarn)
        return ml__conv_refuse(b, ml__conv_key(b, "rope.scaling.attn_factor"),
                               "%g scales RoPE's cos and sin; .mlb allows that with yarn only",
                               (double)attn);
    int scaled = !none && f != 0.0f && f != 1.0f;
    if (b->rope_freqs) {
        if (scaled)
            return ml__err(b->err, ML_E_UNSUPPORTED, "rope_freqs.weight",
                           (int64_t)b->rope_freqs->info_offset,
                           "per-pair RoPE divisors together with %s scaling have no .mlb form",
                           yarn ? "yarn" : "linear");
        if (b->arch != ML__ARCH_LLAMA)
            return ml__err(
                b->err, ML_E_UNSUPPORTED, "rope_freqs.weight", (int64_t)b->rope_freqs->info_offset,
                "per-pair RoPE divisors are a llama feature; %s does not use them", b->p->arch);
        return rope_llama3(b);
    }
    if (!scaled)
        return ML_OK;
    if (linear) {
        h->rope_type = ML_ROPE_LINEAR;
        h->rope_factor = f;
        return ML_OK;
    }
    if ((s = rope_yarn(b, f)))
        return s;
    h->rope_attn_factor *= attn;
    return ML_OK;
}

/* ===========================================================================
 * Header: per-architecture features
 * ========================================================================= */

/* Sliding-window layers from sliding_window_pattern: an integer period n
 * (layer i slides iff i mod n < n - 1, llama.cpp's set_swa_pattern) or one
 * bool per block; `def` is the architecture's period. */
static ml_status swa_pattern(ml__conv_build *b, uint32_t def)
{
    const char *key = ml__conv_key(b, "attention.sliding_window_pattern");
    const ml_gguf_kv *kv = ml_gguf_find(b->g, key);
    ml_status s;
    if (kv && kv->value.type == ML_GGUF_ARRAY) {
        if (kv->value.count != b->n_layer_all)
            return ml__err(b->err, ML_E_FORMAT, key, (int64_t)kv->value.offset,
                           "%llu entries, block_count is %u", (unsigned long long)kv->value.count,
                           b->n_layer_all);
        for (uint32_t l = 0; l < b->n_layers; l++) {
            ml_gguf_value e;
            int v;
            if ((s = ml_gguf_array_get(&kv->value, l, &e, b->err)) ||
                (s = ml_gguf_value_bool(&e, &v, b->err)))
                return s;
            if (v)
                b->flags[l] |= ML_LAYER_SLIDING;
        }
        return ML_OK;
    }
    uint32_t n = def;
    if (kv && (s = ml_gguf_value_u32(&kv->value, &n, b->err)))
        return s;
    for (uint32_t l = 0; l < b->n_layers; l++)
        if (n == 0 || l % n < n - 1)
            b->flags[l] |= ML_LAYER_SLIDING;
    return ML_OK;
}

/* Gemma 2 and 3 scale queries by 1/sqrt(dim / n_heads) in their 27B models
 * (llama.cpp recognises them by layer count), else by 1/sqrt(head_dim). */
static void gemma_attn_scale(ml__conv_build *b, uint32_t layers_27b)
{
    ml_mlb_header *h = &b->p->h;
    if (b->n_layers != layers_27b)
        return;
    float s = 1.0f / sqrtf((float)(h->dim / h->n_heads));
    if (s != 1.0f / sqrtf((float)b->d.head_dim))
        h->attn_scale = s;
}

static ml_status read_window(ml__conv_build *b, uint32_t def, int *found)
{
    ml_mlb_header *h = &b->p->h;
    h->sliding_window = def;
    ml_status s = get_u32(b, "attention.sliding_window", &h->sliding_window, found);
    if (s)
        return s;
    if (h->sliding_window > ML_MLB_VOCAB_LIMIT)
        return ml__conv_refuse(b, ml__conv_key(b, "attention.sliding_window"),
                               "%u; .mlb allows at most %u", h->sliding_window, ML_MLB_VOCAB_LIMIT);
    return ML_OK;
}

/* Layers with their own RoPE base: .mlb's bit 1 uses rope_local_theta and
 * no scaling; Gemma 2 scales both kinds of layer alike. */
static ml_status local_theta(ml__conv_build *b, float def, int unscaled_ok)
{
    ml_mlb_header *h = &b->p->h;
    float t = def;
    int found;
    ml_status s = get_f32(b, "rope.freq_base_swa", &t, &found);
    if (s)
        return s;
    if (!(t > 0) || !isfinite(t))
        return ml__conv_bad_key(b, "rope.freq_base_swa", "%g is not a valid RoPE base", (double)t);
    if (!unscaled_ok && t == h->rope_theta)
        return ML_OK;
    if (!unscaled_ok && h->rope_type != ML_ROPE_PLAIN)
        return ml__conv_refuse(
            b, ml__conv_key(b, "rope.freq_base_swa"),
            "sliding layers with their own RoPE base and the global scaling have no "
            ".mlb form");
    h->rope_local_theta = t;
    for (uint32_t l = 0; l < b->n_layers; l++)
        if (b->flags[l] & ML_LAYER_SLIDING)
            b->flags[l] |= ML_LAYER_LOCAL_ROPE;
    return ML_OK;
}

static ml_status arch_gemma(ml__conv_build *b)
{
    ml_mlb_header *h = &b->p->h;
    ml_status s;
    int found;
    h->act = ML_ACT_GELU_TANH;
    h->embed_scale = sqrtf((float)h->dim);
    if (b->arch == ML__ARCH_GEMMA)
        return ML_OK;
    h->post_norms = 1;
    if (b->arch == ML__ARCH_GEMMA2) {
        h->attn_softcap = 50.0f;
        h->final_softcap = 30.0f;
        if ((s = get_f32(b, "attn_logit_softcapping", &h->attn_softcap, &found)) ||
            (s = get_f32(b, "final_logit_softcapping", &h->final_softcap, &found)) ||
            (s = read_window(b, 4096, &found)) || (s = swa_pattern(b, 2)) ||
            (s = local_theta(b, h->rope_theta, 0)))
            return s;
        gemma_attn_scale(b, 46);
    } else {
        h->qk_norm = 1;
        if ((s = get_f32(b, "final_logit_softcapping", &h->final_softcap, &found)) ||
            (s = read_window(b, 0, &found)))
            return s;
        if (h->sliding_window && ((s = swa_pattern(b, 6)) || (s = local_theta(b, 10000.0f, 1))))
            return s;
        gemma_attn_scale(b, 62);
    }
    if (!(h->attn_softcap >= 0) || !isfinite(h->attn_softcap) || !(h->final_softcap >= 0) ||
        !isfinite(h->final_softcap))
        return ml__err(b->err, ML_E_FORMAT, ml__conv_key(b, "final_logit_softcapping"), -1,
                       "softcaps %g and %g: must be finite and >= 0", (double)h->attn_softcap,
                       (double)h->final_softcap);
    return ML_OK;
}

static ml_status arch_qwen35(ml__conv_build *b)
{
    ml_mlb_header *h = &b->p->h;
    ml_status s;
    uint32_t inner, k, v, dk, conv;
    h->attn_gate = 1;
    h->qk_norm = 1;
    int any_linear = 0;
    for (uint32_t l = 0; l < b->n_layers; l++)
        any_linear |= ml__conv_is_linear(b, l);
    if (!any_linear)
        return ML_OK;
    if ((s = get_u32(b, "ssm.conv_kernel", &conv, NULL)) ||
        (s = get_u32(b, "ssm.inner_size", &inner, NULL)) ||
        (s = get_u32(b, "ssm.state_size", &dk, NULL)) ||
        (s = get_u32(b, "ssm.time_step_rank", &v, NULL)) ||
        (s = get_u32(b, "ssm.group_count", &k, NULL)))
        return s;
    if (k == 0 || v == 0 || v % k || v % 4 || inner % v || dk == 0 || inner == 0 || conv == 0 ||
        conv > ML_MLB_CONV_LIMIT || inner % 32)
        return ml__conv_refuse(
            b, ml__conv_key(b, "ssm.time_step_rank"),
            "linear attention with %u key heads of %u, %u value heads, inner size "
            "%u, kernel %u: outside what .mlb allows (value heads a multiple of the "
            "key heads and of 4, inner size a multiple of 32)",
            k, dk, v, inner, conv);
    h->lin_k_heads = k;
    h->lin_v_heads = v;
    h->lin_k_dim = dk;
    h->lin_v_dim = inner / v;
    h->lin_conv = conv;
    b->d.lin_qkv = 2 * k * dk + inner;
    b->d.lin_vd = inner;
    return ML_OK;
}

/* ML_E_SHAPE naming a key: a value that contradicts another. */
static ml_status bad_shape_key(ml__conv_build *b, const char *suffix, uint32_t v, uint32_t E)
{
    const char *key = ml__conv_key(b, suffix);
    return ml__err(b->err, ML_E_SHAPE, key, ml__conv_kv_offset(b, key),
                   "%u experts used of %u: must be 1 to expert_count", v, E);
}

/* Qwen3.5-MoE's shared expert (src/models/qwen35moe.cpp): its width is
 * expert_shared_feed_forward_length, else feed_forward_length, and a
 * sigmoid gate scales its output. */
static ml_status read_shared_expert(ml__conv_build *b)
{
    ml_mlb_header *h = &b->p->h;
    uint32_t Fs = b->ffn_len;
    int found;
    ml_status s = get_u32(b, "expert_shared_feed_forward_length", &Fs, &found);
    if (s)
        return s;
    if (Fs == 0 || Fs > ML_MLB_DIM_LIMIT || Fs % 32)
        return ml__conv_refuse(b, ml__conv_key(b, found ? "expert_shared_feed_forward_length"
                                                        : "feed_forward_length"),
                               "a shared expert width of %u; .mlb needs a multiple of 32 up to %u",
                               Fs, ML_MLB_DIM_LIMIT);
    h->shared_hidden_dim = Fs;
    h->moe_flags |= ML_MOE_SHARED_GATE;
    return ML_OK;
}

/* Layers that have flags anyway (Qwen3.5's linear ones) say which have
 * experts: all of them (bit 0x10).  Without flags every layer has them
 * by mlb(5)'s rule, and none are written. */
static void moe_layer_flags(ml__conv_build *b)
{
    int any = 0;
    for (uint32_t l = 0; l < b->n_layers; l++)
        any |= b->flags[l] != 0;
    for (uint32_t l = 0; any && l < b->n_layers; l++)
        b->flags[l] |= ML_LAYER_MOE;
}

/* The experts: count, used per token, width (llama.cpp's fallback for the
 * width is feed_forward_length / used), and qwen3moe's fixed gating,
 * softmax then top-k renormalized (src/models/qwen3moe.cpp). */
ml_status ml__conv_read_moe(ml__conv_build *b)
{
    ml_mlb_header *h = &b->p->h;
    uint32_t E = 0, k = 0, F = 0, groups = 0;
    int fe, fk, ff, fg;
    ml_status s;
    if ((s = get_u32(b, "expert_count", &E, &fe)) ||
        (s = get_per_layer(b, "expert_used_count", &k, &fk, 0)) ||
        (s = get_per_layer(b, "expert_feed_forward_length", &F, &ff, 0)) ||
        (s = get_u32(b, "expert_group_count", &groups, &fg)))
        return s;
    if (!fe || E == 0)
        return ml__conv_bad_key(b, "expert_count", fe ? "0 experts in a mixture-of-experts model"
                                                      : "required key is missing");
    if (!fk)
        return ml__conv_bad_key(b, "expert_used_count", "required key is missing");
    if (E > ML_MLB_EXPERT_LIMIT)
        return ml__conv_refuse(b, ml__conv_key(b, "expert_count"),
                               "%u experts; .mlb allows at most %u", E, ML_MLB_EXPERT_LIMIT);
    if (k == 0 || k > E)
        return bad_shape_key(b, "expert_used_count", k, E);
    if (k > ML_MLB_USED_LIMIT)
        return ml__conv_refuse(b, ml__conv_key(b, "expert_used_count"),
                               "%u experts a token; .mlb allows at most %u", k, ML_MLB_USED_LIMIT);
    if (fg && groups > 1)
        return ml__conv_refuse(b, ml__conv_key(b, "expert_group_count"),
                               "%u expert groups have no .mlb form", groups);
    if (!ff && !b->ffn_len)
        return ml__conv_bad_key(b, "expert_feed_forward_length",
                                "required key is missing (and no feed_forward_length)");
    if (!ff)
        F = b->ffn_len / k;
    if (F == 0 || F > ML_MLB_DIM_LIMIT || F % 32)
        return ml__conv_refuse(b, ml__conv_key(b, "expert_feed_forward_length"),
                               "an expert width of %u; .mlb needs a multiple of 32 up to %u", F,
                               ML_MLB_DIM_LIMIT);
    h->hidden_dim = 0; /* no dense FFN */
    h->n_experts = E;
    h->n_experts_used = k;
    h->expert_hidden_dim = F;
    h->moe_gating = ML_MOE_SOFTMAX;
    h->moe_flags = ML_MOE_NORM;
    if (b->arch == ML__ARCH_GPT_OSS) { /* src/models/openai-moe.cpp: SOFTMAX_WEIGHT, no norm */
        h->moe_gating = ML_MOE_TOPK_SOFTMAX;
        h->moe_flags = ML_MOE_ROUTER_BIAS | ML_MOE_EXPERT_BIAS;
    }
    if (b->arch == ML__ARCH_QWEN35MOE && (s = read_shared_expert(b)))
        return s;
    moe_layer_flags(b);
    return ML_OK;
}

/* gpt-oss (src/models/openai-moe.cpp): the window on every other layer
 * (load_swa_pattern(ml, 2): the even ones) unless sliding_window_pattern
 * says otherwise, windowed layers with the global RoPE base unless
 * rope.freq_base_swa differs (refused then: no .mlb form with YaRN),
 * sinks and an output bias in every layer, and the clamped SwiGLU with
 * the alpha and limit llama.cpp hard-codes (LLM_FFN_SWIGLU_OAI_MOE). */
static ml_status arch_gpt_oss(ml__conv_build *b)
{
    ml_mlb_header *h = &b->p->h;
    int found;
    ml_status s = read_window(b, 0, &found);
    if (s)
        return s;
    if (!found || h->sliding_window == 0)
        return ml__conv_bad_key(b, "attention.sliding_window",
                                found ? "a window of 0 positions" : "required key is missing");
    if ((s = swa_pattern(b, 2)) || (s = local_theta(b, h->rope_theta, 0)))
        return s;
    h->act = ML_ACT_SWIGLU_CLAMP;
    h->swiglu_alpha = 1.702f;
    h->swiglu_limit = 7.0f;
    h->attn_sinks = 1;
    h->o_bias = 1;
    return ml__conv_read_moe(b);
}

static ml_status read_arch_features(ml__conv_build *b)
{
    ml_mlb_header *h = &b->p->h;
    ml_status s;
    h->qk_norm = (uint32_t)b->ai->qk_norm;
    if (b->ai->gemma)
        return arch_gemma(b);
    if (b->arch == ML__ARCH_GPT_OSS)
        return arch_gpt_oss(b);
    if (ml_gguf_find(b->g, ml__conv_key(b, "attention.sliding_window")) &&
        (s = ml__conv_note(b, "%s is ignored, as llama.cpp ignores it for %s: full attention",
                           b->key, b->p->arch)))
        return s;
    if (b->arch == ML__ARCH_SMOLLM3) {
        /* llama.cpp skips RoPE on layers i with (i + 1) % 4 == 0 (no key). */
        for (uint32_t l = 3; l < b->n_layers; l += 4)
            b->flags[l] |= ML_LAYER_NO_ROPE;
        return ml__conv_note(
            b, "smollm3: layers 3, 7, 11, ... have no RoPE (llama.cpp's fixed step of 4)");
    }
    if (ml__conv_qwen35_family(b->arch) && (s = arch_qwen35(b)))
        return s;
    if (ml__conv_is_moe_arch(b->arch))
        return ml__conv_read_moe(b);
    return ML_OK;
}

/* Embeddings' pooling, as llama.cpp reads {arch}.pooling_type (0 none,
 * 1 mean, 2 CLS, 3 last, 4 rank): 1-3 kept as they are.  None and rank
 * (a reranker's score, not a pooled vector) leave it unstated, rank with
 * a note; another value is refused. */
static ml_status read_pooling(ml__conv_build *b)
{
    uint32_t v = 0;
    int found = 0;
    ml_status s = get_u32(b, "pooling_type", &v, &found);
    if (s || !found || v == 0)
        return s;
    if (v <= 3) {
        b->p->h.pooling = v;
        return ML_OK;
    }
    if (v == 4)
        return ml__conv_note(b, "%s 4 (rank) is not kept: .mlb pools embeddings by mean, CLS "
                                "or last token",
                             b->key);
    const ml_gguf_kv *kv = ml_gguf_find(b->g, b->key);
    return ml__err(b->err, ML_E_UNSUPPORTED, b->key, kv ? (int64_t)kv->value.offset : -1,
                   "pooling type %u (llama.cpp's are 0 none, 1 mean, 2 CLS, 3 last, 4 rank)", v);
}

/* Vocabulary and the classifier: vocab is token_embd's row count. */
static ml_status read_vocab(ml__conv_build *b)
{
    ml_mlb_header *h = &b->p->h;
    const ml_gguf_tensor *e = ml_gguf_find_tensor(b->g, "token_embd.weight");
    if (!e)
        return ml__conv_missing(b, "token_embd.weight");
    if (e->cols != h->dim || e->dims[2] != 1 || e->dims[3] != 1)
        return ml__conv_shape(b, e, h->dim, e->rows, "dim x vocab");
    if (e->rows < 3 || e->rows > ML_MLB_VOCAB_LIMIT)
        return ml__err(b->err, ML_E_UNSUPPORTED, e->name, (int64_t)e->info_offset,
                       "a vocabulary of %llu; .mlb allows 3 to %u", (unsigned long long)e->rows,
                       ML_MLB_VOCAB_LIMIT);
    h->vocab = (uint32_t)e->rows;
    const ml_gguf_tensor *o = ml_gguf_find_tensor(b->g, "output.weight");
    if (o && (b->arch == ML__ARCH_GEMMA || b->arch == ML__ARCH_GEMMA2))
        return ml__err(b->err, ML_E_UNSUPPORTED, o->name, (int64_t)o->info_offset,
                       "%s always uses token_embd as its classifier (llama.cpp); a separate one "
                       "has no place",
                       b->p->arch);
    h->shared_classifier = o == NULL;
    return ML_OK;
}

/* Whether any layer stores q, k or v biases. */
static void read_bias_flag(ml__conv_build *b)
{
    for (uint32_t l = 0; l < b->n_layers && !b->p->h.qkv_bias; l++) {
        if (ml__conv_is_linear(b, l))
            continue;
        static const char *const n[] = {"attn_q.bias", "attn_k.bias", "attn_v.bias",
                                        "attn_qkv.bias"};
        for (int i = 0; i < 4; i++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%u.%s", l, n[i]);
            if (ml_gguf_find_tensor(b->g, name))
                b->p->h.qkv_bias = 1;
        }
    }
}

static ml_status finish_header(ml__conv_build *b)
{
    ml_mlb_header *h = &b->p->h;
    int any = 0;
    for (uint32_t l = 0; l < b->n_layers; l++)
        any |= b->flags[l] != 0;
    /* Gemma 2's window applies to the even layers only: keep the flags
     * whenever some layer differs from another. */
    h->layer_flags = any ? 1 : 0;
    if (!any) /* a window is only ever set with flags naming its layers */
        h->sliding_window = 0;
    h->wtype = ML_WTYPE_Q8_0; /* provisional: choose_types decides */
    ml_error e;
    ml_status s = ml_mlb_header_validate(h, NULL, &b->d, &e);
    if (!s && h->layer_flags)
        s = ml_mlb_layer_flags_validate(h, b->flags, &e);
    if (s)
        return ml__err(b->err, ML_E_UNSUPPORTED, e.field, -1,
                       "the .mlb header would be invalid: %s", e.msg);
    return ML_OK;
}

ml_status ml__conv_read_header(ml__conv_build *b)
{
    ml_status s;
    if ((s = read_arch(b)) || (s = check_container(b)) || (s = read_layers(b)) ||
        (s = read_dims(b)) || (s = read_rope_scaling(b)) || (s = read_vocab(b)) ||
        (s = read_arch_features(b)) || (s = read_pooling(b)))
        return s;
    read_bias_flag(b);
    return finish_header(b);
}
