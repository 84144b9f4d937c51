/* quant_mix.c - llama.cpp's per-tensor type choice for the mixes users
 * download (Q4_K_M, Q5_K_M, Q6_K, IQ4_XS), as src/llama-quant.cpp decides
 * it for dense models, with its fallbacks for row lengths that are not a
 * multiple of 256.  The rule itself is in quant.h. */
#include "quant/quant_impl.h"

#include <strings.h>

static const struct {
    ml_quant_mix mix;
    const char *name;
    ml_type base;
} mixes[] = {
    {ML_MIX_Q4_K_M, "Q4_K_M", ML_TYPE_Q4_K},
    {ML_MIX_Q5_K_M, "Q5_K_M", ML_TYPE_Q5_K},
    {ML_MIX_Q6_K, "Q6_K", ML_TYPE_Q6_K},
    {ML_MIX_IQ4_XS, "IQ4_XS", ML_TYPE_IQ4_XS},
};
#define N_MIXES (sizeof mixes / sizeof mixes[0])

ml_status ml_quant_mix_parse(const char *name, ml_quant_mix *mix, ml_error *err)
{
    for (size_t i = 0; name && i < N_MIXES; i++)
        if (!strcasecmp(name, mixes[i].name)) {
            *mix = mixes[i].mix;
            return ML_OK;
        }
    return ml__err(err, ML_E_INVAL, "", -1,
                   "unknown mix '%s' (expected Q4_K_M, Q5_K_M, Q6_K or IQ4_XS)",
                   name ? name : "(null)");
}

const char *ml_quant_mix_name(ml_quant_mix mix)
{
    for (size_t i = 0; i < N_MIXES; i++)
        if (mixes[i].mix == mix)
            return mixes[i].name;
    return "?";
}

/* llama.cpp's "use more bits" positions: the first and last eighth, and
 * every third one in between. */
static int more_bits(uint32_t i, uint32_t n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* The type before the shape fallback. */
static ml_type mix_choice(ml_quant_mix mix, ml_type base, const ml_mix_tensor *t)
{
    int km = mix == ML_MIX_Q4_K_M || mix == ML_MIX_Q5_K_M;
    switch (t->role) {
    case ML_R_WCLS:
        return ML_TYPE_Q6_K;
    case ML_R_TOK_EMB:
        return t->tied ? ML_TYPE_Q6_K : base;
    case ML_R_WV:
    case ML_R_LQKV: /* GGUF's attn_qkv: llama.cpp counts it with attn_v */
        if (km && more_bits(t->index, t->count))
            return ML_TYPE_Q6_K;
        if (mix == ML_MIX_IQ4_XS && t->n_gqa >= 4)
            return ML_TYPE_Q5_K;
        return base;
    case ML_R_W2:
        if (km && more_bits(t->index, t->count))
            return ML_TYPE_Q6_K;
        if (mix == ML_MIX_IQ4_XS && !t->has_imatrix && t->index < t->count / 8)
            return ML_TYPE_Q5_K;
        return base;
    default:
        return base;
    }
}

/* llama.cpp's fallback for a row length the type's blocks do not divide. */
static ml_type fallback(ml_type type, uint64_t cols)
{
    uint32_t elems = 0;
    if (!ml_type_block(type, &elems, NULL, NULL) || cols % elems == 0)
        return type;
    switch (type) {
    case ML_TYPE_Q4_K: type = ML_TYPE_Q5_0; break;
    case ML_TYPE_Q5_K: type = ML_TYPE_Q5_1; break;
    case ML_TYPE_Q6_K: return cols % 32 ? ML_TYPE_F16 : ML_TYPE_Q8_0;
    case ML_TYPE_IQ4_XS: type = ML_TYPE_IQ4_NL; break;
    default: break;
    }
    return cols % 32 ? ML_TYPE_F16 : type;
}

ml_type ml_quant_mix_type(ml_quant_mix mix, const ml_mix_tensor *t)
{
    ml_type base = ML_TYPE_F32;
    for (size_t i = 0; i < N_MIXES; i++)
        if (mixes[i].mix == mix)
            base = mixes[i].base;
    if (base == ML_TYPE_F32)
        return ML_TYPE_F32;
    int cls = t->role == ML_R_WCLS || (t->role == ML_R_TOK_EMB && t->tied);
    /* llama.cpp sends a classifier whose rows do not fit the mix's blocks
     * straight to Q8_0 (then to F16 if 32 does not divide them either). */
    if (cls && t->cols % 256)
        return t->cols % 32 ? ML_TYPE_F16 : ML_TYPE_Q8_0;
    return fallback(mix_choice(mix, base, t), t->cols);
}
