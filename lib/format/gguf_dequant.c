/* gguf_dequant.c - the ggml tensor types: names, block sizes, and
 * dequantization to f32 of the sixteen types real models use (F32, F16,
 * BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, IQ4_NL, IQ4_XS, MXFP4).
 *
 * Block layouts and formulas: docs in gguf-mapping.md section 1.8, checked
 * against ggml's dequantize_row_* and gguf-py's gguf.quants.  To be
 * bit-exact with both, every value is computed in the same order: the f32
 * product of the (sub)block scale first, then times the quant, then minus
 * the f32 product of the min.  The build has -ffp-contract=off, so no
 * multiply-add is fused behind our back. */
#include "base/internal.h"

#include <stdio.h>

/* ---------------------------------------------------------------------------
 * Small helpers
 * ------------------------------------------------------------------------- */

/* Exact f16 -> f32 without branches, so the compiler can inline it and
 * vectorise the F16 loop.  Normal values and inf/NaN are a rebias of the
 * bits; subnormals (and zero) become the normal 2^-14 * (1 + m/1024) minus
 * 2^-14, an exact subtraction that leaves m * 2^-24.  All three are
 * computed and one is picked with masks.  Equal to ml_f16_to_f32 for all 65536 inputs
 * (a unit test checks). */
static inline float half_of(uint32_t h)
{
    /* A union, not memcpy: gcc vectorises the loop only this way. */
    union {
        uint32_t u;
        float f;
    } sub, r;
    const uint32_t sign = (h & 0x8000u) << 16;
    const uint32_t bits = (h & 0x7fffu) << 13;
    const uint32_t exp = bits & 0x0f800000u;
    sub.u = bits + (113u << 23);
    sub.f -= 6.103515625e-05f; /* 2^-14 */
    /* Masks rather than branches: all ones where the case applies. */
    const uint32_t special = 0u - (uint32_t)(exp == 0x0f800000u);
    const uint32_t tiny = 0u - (uint32_t)(exp == 0);
    r.u = ((bits + (224u << 23)) & special) | (sub.u & tiny) |
          ((bits + (112u << 23)) & ~(special | tiny));
    r.u |= sign;
    return r.f;
}

static inline float half(const uint8_t *p)
{
    return half_of(ml__rd16(p));
}

/* The 16 levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl). */
static const int8_t iq4_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                      1,    13,   25,  38,  53,  69,  89,  113};

/* Scale and min j (0..7) of a Q4_K / Q5_K block: 6 bits each, packed in 12
 * bytes.  The first four sit in the low 6 bits of bytes 0-3 (scales) and
 * 4-7 (mins); the last four take their low 4 bits from bytes 8-11 and
 * their high 2 bits from the top of bytes 0-3 (scales) and 4-7 (mins). */
static inline void k4_scale_min(const uint8_t *q, int j, float *sc, float *mn)
{
    int s, m;
    if (j < 4) {
        s = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        s = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
    *sc = (float)s;
    *mn = (float)m;
}

/* ---------------------------------------------------------------------------
 * Dequantizers: one block layout each, nb blocks from x into y.
 * ------------------------------------------------------------------------- */

static void dq_f32(const uint8_t *restrict x, float *restrict y, uint64_t n)
{
    memcpy(y, x, (size_t)n * 4);
}

/* In runs of 8 so that gcc -O2 (whose cheap cost model refuses loops that
 * need a remainder) vectorises; then the rest one by one. */
static void dq_f16(const uint8_t *restrict x, float *restrict y, uint64_t n)
{
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            y[i + k] = half(x + 2 * (i + k));
    for (; i < n; i++)
        y[i] = half(x + 2 * i);
}

static void dq_bf16(const uint8_t *restrict x, float *restrict y, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        uint32_t bits = (uint32_t)ml__rd16(x + 2 * i) << 16;
        memcpy(&y[i], &bits, 4);
    }
}

/* Q4_0, 18 bytes: d, then 16 bytes whose low nibbles are elements 0-15 and
 * high nibbles 16-31; value (nibble - 8) * d. */
static void dq_q4_0(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 18, y += 32) {
        const float d = half(x);
        const uint8_t *qs = x + 2;
        for (int j = 0; j < 16; j++) {
            y[j] = (float)((qs[j] & 0xF) - 8) * d;
            y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
        }
    }
}

/* Q4_1, 20 bytes: d, m, nibbles as Q4_0; value nibble * d + m. */
static void dq_q4_1(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 20, y += 32) {
        const float d = half(x), m = half(x + 2);
        const uint8_t *qs = x + 4;
        for (int j = 0; j < 16; j++) {
            y[j] = (float)(qs[j] & 0xF) * d + m;
            y[j + 16] = (float)(qs[j] >> 4) * d + m;
        }
    }
}

/* The 5-bit quants of Q5_0/Q5_1: nibbles as Q4_0, bit e of the 32-bit qh
 * is the fifth bit of element e. */
static inline void q5_quants(const uint8_t *qh4, const uint8_t *qs, int q[32])
{
    const uint32_t qh = ml__rd32(qh4);
    for (int j = 0; j < 16; j++) {
        q[j] = (qs[j] & 0xF) | (int)((qh >> j) & 1) << 4;
        q[j + 16] = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
    }
}

/* Q5_0, 22 bytes: d, qh, qs; value (q - 16) * d. */
static void dq_q5_0(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    int q[32];
    for (uint64_t b = 0; b < nb; b++, x += 22, y += 32) {
        const float d = half(x);
        q5_quants(x + 2, x + 6, q);
        for (int j = 0; j < 32; j++)
            y[j] = (float)(q[j] - 16) * d;
    }
}

/* Q5_1, 24 bytes: d, m, qh, qs; value q * d + m. */
static void dq_q5_1(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    int q[32];
    for (uint64_t b = 0; b < nb; b++, x += 24, y += 32) {
        const float d = half(x), m = half(x + 2);
        q5_quants(x + 4, x + 8, q);
        for (int j = 0; j < 32; j++)
            y[j] = (float)q[j] * d + m;
    }
}

/* Q8_0, 34 bytes: d, 32 int8 quants; value q * d. */
static void dq_q8_0(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 34, y += 32) {
        const float d = half(x);
        const int8_t *qs = (const int8_t *)(x + 2);
        for (int j = 0; j < 32; j++)
            y[j] = (float)qs[j] * d;
    }
}

/* Q2_K, 84 bytes: scales[16] (low nibble scale, high nibble min), qs[64]
 * (2 bits each), d, dmin.  Each half of 128 elements reads 32 quant bytes
 * four times, two bits further each time; every 16 elements take the next
 * scale byte. */
static void dq_q2_k(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 84) {
        const uint8_t *sc = x, *q = x + 16;
        const float d = half(x + 80), dmin = half(x + 82);
        for (int h = 0; h < 2; h++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int k = 0; k < 2; k++, y += 16) {
                    const uint8_t s = *sc++;
                    const float dl = d * (float)(s & 0xF), ml = dmin * (float)(s >> 4);
                    for (int l = 0; l < 16; l++)
                        y[l] = dl * (float)((q[16 * k + l] >> shift) & 3) - ml;
                }
            }
        }
    }
}

/* The sixteen 6-bit scales of a Q3_K block, minus 32: low 4 bits from the
 * nibbles of bytes 0-7 (all low nibbles first), high 2 bits from bytes
 * 8-11, two bits per scale, i mod 4 choosing the byte and i / 4 the pair. */
static inline void q3_scales(const uint8_t *s, int out[16])
{
    for (int i = 0; i < 16; i++) {
        int lo = i < 8 ? s[i] & 0xF : s[i - 8] >> 4;
        int hi = (s[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
        out[i] = (lo | hi << 4) - 32;
    }
}

/* Q3_K, 110 bytes: hmask[32], qs[64], scales[12], d.  Quants as Q2_K; a
 * clear bit in hmask (bit 4h+j for pass j of half h) subtracts 4. */
static void dq_q3_k(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    int scales[16];
    for (uint64_t b = 0; b < nb; b++, x += 110) {
        const uint8_t *hm = x, *q = x + 32;
        const float d = half(x + 108);
        q3_scales(x + 96, scales);
        int is = 0;
        unsigned bit = 1;
        for (int h = 0; h < 2; h++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, bit <<= 1) {
                for (int k = 0; k < 2; k++, y += 16) {
                    const float dl = d * (float)scales[is++];
                    for (int l = 0; l < 16; l++) {
                        int v = ((q[16 * k + l] >> shift) & 3) - ((hm[16 * k + l] & bit) ? 0 : 4);
                        y[l] = dl * (float)v;
                    }
                }
            }
        }
    }
}

/* Q4_K, 144 bytes: d, dmin, scales[12], qs[128].  Four groups of 64: 32
 * bytes whose low nibbles are sub-block 2g and high nibbles 2g+1. */
static void dq_q4_k(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 144) {
        const float d = half(x), dmin = half(x + 2);
        const uint8_t *sc = x + 4, *q = x + 16;
        for (int g = 0; g < 4; g++, q += 32, y += 64) {
            float s0, m0, s1, m1;
            k4_scale_min(sc, 2 * g, &s0, &m0);
            k4_scale_min(sc, 2 * g + 1, &s1, &m1);
            const float d0 = d * s0, dm0 = dmin * m0, d1 = d * s1, dm1 = dmin * m1;
            for (int l = 0; l < 32; l++)
                y[l] = d0 * (float)(q[l] & 0xF) - dm0;
            for (int l = 0; l < 32; l++)
                y[l + 32] = d1 * (float)(q[l] >> 4) - dm1;
        }
    }
}

/* Q5_K, 176 bytes: d, dmin, scales[12], qh[32], qs[128].  As Q4_K; bit
 * 2g (low nibbles) or 2g+1 (high nibbles) of qh[l] adds 16. */
static void dq_q5_k(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 176) {
        const float d = half(x), dmin = half(x + 2);
        const uint8_t *sc = x + 4, *qh = x + 16, *q = x + 48;
        for (int g = 0; g < 4; g++, q += 32, y += 64) {
            float s0, m0, s1, m1;
            k4_scale_min(sc, 2 * g, &s0, &m0);
            k4_scale_min(sc, 2 * g + 1, &s1, &m1);
            const float d0 = d * s0, dm0 = dmin * m0, d1 = d * s1, dm1 = dmin * m1;
            for (int l = 0; l < 32; l++)
                y[l] = d0 * (float)((q[l] & 0xF) | ((qh[l] >> (2 * g)) & 1) << 4) - dm0;
            for (int l = 0; l < 32; l++)
                y[l + 32] = d1 * (float)((q[l] >> 4) | ((qh[l] >> (2 * g + 1)) & 1) << 4) - dm1;
        }
    }
}

/* Q6_K, 210 bytes: ql[128], qh[64], scales int8[16], d.  Each half of 128
 * elements has 64 ql bytes (low nibbles: elements 0-63, high: 64-127) and
 * 32 qh bytes (two bits per 32-element quarter); every 16 elements take
 * the next scale. */
static void dq_q6_k(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 210) {
        const uint8_t *ql = x, *qh = x + 128;
        const int8_t *sc = (const int8_t *)(x + 192);
        const float d = half(x + 208);
        for (int h = 0; h < 2; h++, ql += 64, qh += 32, sc += 8, y += 128) {
            for (int u = 0; u < 4; u++) {
                const uint8_t *lo = ql + 32 * (u & 1);
                const int nshift = u < 2 ? 0 : 4;
                const float dl0 = d * (float)sc[2 * u], dl1 = d * (float)sc[2 * u + 1];
                for (int l = 0; l < 32; l++) {
                    int q = (((lo[l] >> nshift) & 0xF) | ((qh[l] >> (2 * u)) & 3) << 4) - 32;
                    y[32 * u + l] = (l < 16 ? dl0 : dl1) * (float)q;
                }
            }
        }
    }
}

/* IQ4_NL, 18 bytes: d, nibbles as Q4_0 indexing the level table. */
static void dq_iq4_nl(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 18, y += 32) {
        const float d = half(x);
        const uint8_t *qs = x + 2;
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)iq4_levels[qs[j] & 0xF];
            y[j + 16] = d * (float)iq4_levels[qs[j] >> 4];
        }
    }
}

/* IQ4_XS, 136 bytes: d, scales_h (u16), scales_l[4], qs[128].  Sub-block
 * ib of 32 has a 6-bit scale (nibble ib of scales_l, bits 2ib..2ib+1 of
 * scales_h), minus 32, and 16 bytes in IQ4_NL order. */
static void dq_iq4_xs(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 136) {
        const float d = half(x);
        const unsigned sh = ml__rd16(x + 2);
        const uint8_t *sl = x + 4, *qs = x + 8;
        for (int ib = 0; ib < 8; ib++, qs += 16, y += 32) {
            int ls = ((sl[ib / 2] >> (4 * (ib % 2))) & 0xF) | (int)((sh >> (2 * ib)) & 3) << 4;
            const float dl = d * (float)(ls - 32);
            for (int j = 0; j < 16; j++) {
                y[j] = dl * (float)iq4_levels[qs[j] & 0xF];
                y[j + 16] = dl * (float)iq4_levels[qs[j] >> 4];
            }
        }
    }
}

/* MXFP4, 17 bytes: an E8M0 scale byte e, then nibbles as Q4_0 indexing
 * ggml's kvalues_mxfp4 (the E2M1 values doubled); the scale is ggml's
 * ggml_e8m0_to_fp32_half, 2^(e - 128), which halves the doubled values
 * back: subnormal bits for e < 2, an exponent field of e - 1 otherwise. */
static const int8_t mxfp4_levels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static inline float e8m0_half(uint8_t e)
{
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static void dq_mxfp4(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 17, y += 32) {
        const float d = e8m0_half(x[0]);
        const uint8_t *qs = x + 1;
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)mxfp4_levels[qs[j] & 0xF];
            y[j + 16] = d * (float)mxfp4_levels[qs[j] >> 4];
        }
    }
}

/* ---------------------------------------------------------------------------
 * The type table
 * ------------------------------------------------------------------------- */

/* Dequantizes `count` units: blocks, or elements for the 1-element types. */
typedef void (*dq_fn)(const uint8_t *x, float *y, uint64_t count);

typedef struct type_info {
    const char *name;
    uint32_t block_elems; /* 0: removed from ggml, size unknown */
    uint32_t block_bytes;
    dq_fn fn;             /* NULL: not dequantized by this build */
} type_info;

/* Sizes are sizeof ggml's block structs (ggml-common.h); names as gguf-py
 * spells them, and ggml.h's comments for the removed ids. */
static const type_info types[ML_GGML_TYPE_COUNT] = {
    [0] = {"F32", 1, 4, dq_f32},
    [1] = {"F16", 1, 2, dq_f16},
    [2] = {"Q4_0", 32, 18, dq_q4_0},
    [3] = {"Q4_1", 32, 20, dq_q4_1},
    [4] = {"Q4_2", 0, 0, NULL},
    [5] = {"Q4_3", 0, 0, NULL},
    [6] = {"Q5_0", 32, 22, dq_q5_0},
    [7] = {"Q5_1", 32, 24, dq_q5_1},
    [8] = {"Q8_0", 32, 34, dq_q8_0},
    [9] = {"Q8_1", 32, 36, NULL},
    [10] = {"Q2_K", 256, 84, dq_q2_k},
    [11] = {"Q3_K", 256, 110, dq_q3_k},
    [12] = {"Q4_K", 256, 144, dq_q4_k},
    [13] = {"Q5_K", 256, 176, dq_q5_k},
    [14] = {"Q6_K", 256, 210, dq_q6_k},
    [15] = {"Q8_K", 256, 292, NULL},
    [16] = {"IQ2_XXS", 256, 66, NULL},
    [17] = {"IQ2_XS", 256, 74, NULL},
    [18] = {"IQ3_XXS", 256, 98, NULL},
    [19] = {"IQ1_S", 256, 50, NULL},
    [20] = {"IQ4_NL", 32, 18, dq_iq4_nl},
    [21] = {"IQ3_S", 256, 110, NULL},
    [22] = {"IQ2_S", 256, 82, NULL},
    [23] = {"IQ4_XS", 256, 136, dq_iq4_xs},
    [24] = {"I8", 1, 1, NULL},
    [25] = {"I16", 1, 2, NULL},
    [26] = {"I32", 1, 4, NULL},
    [27] = {"I64", 1, 8, NULL},
    [28] = {"F64", 1, 8, NULL},
    [29] = {"IQ1_M", 256, 56, NULL},
    [30] = {"BF16", 1, 2, dq_bf16},
    [31] = {"Q4_0_4_4", 0, 0, NULL},
    [32] = {"Q4_0_4_8", 0, 0, NULL},
    [33] = {"Q4_0_8_8", 0, 0, NULL},
    [34] = {"TQ1_0", 256, 54, NULL},
    [35] = {"TQ2_0", 256, 66, NULL},
    [36] = {"IQ4_NL_4_4", 0, 0, NULL},
    [37] = {"IQ4_NL_4_8", 0, 0, NULL},
    [38] = {"IQ4_NL_8_8", 0, 0, NULL},
    [39] = {"MXFP4", 32, 17, dq_mxfp4},
    [40] = {"NVFP4", 64, 36, NULL},
    [41] = {"Q1_0", 128, 18, NULL},
    [42] = {"Q2_0", 64, 18, NULL},
};

const char *ml_gguf_type_name(uint32_t type)
{
    return type < ML_GGML_TYPE_COUNT ? types[type].name : NULL;
}

int ml_gguf_type_size(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes)
{
    if (type >= ML_GGML_TYPE_COUNT || types[type].block_elems == 0)
        return 0;
    if (block_elems)
        *block_elems = types[type].block_elems;
    if (block_bytes)
        *block_bytes = types[type].block_bytes;
    return 1;
}

int ml_gguf_type_supported(uint32_t type)
{
    return type < ML_GGML_TYPE_COUNT && types[type].fn != NULL;
}

/* "F32, F16, ..." for messages. */
static void supported_list(char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
    for (uint32_t t = 0; t < ML_GGML_TYPE_COUNT && k < n; t++) {
        if (!types[t].fn)
            continue;
        int w = snprintf(buf + k, n - k, "%s%s", k ? ", " : "", types[t].name);
        if (w < 0)
            break;
        k += (size_t)w;
    }
}

/* ---------------------------------------------------------------------------
 * Entry points
 * ------------------------------------------------------------------------- */

/* The unsupported-type error; field and offset name the tensor if any
 * (ml__err puts them before the message). */
static ml_status unsupported(ml_error *err, uint32_t type, const char *field, int64_t offset)
{
    char list[160];
    supported_list(list, sizeof list);
    const char *name = ml_gguf_type_name(type);
    return ml__err(err, ML_E_UNSUPPORTED, field, offset,
                   "type %s (%u) cannot be dequantized by this build (it can: %s)",
                   name ? name : "unknown", type, list);
}

/* Checks the element count against the type and out's size, then runs. */
static ml_status run(uint32_t type, const uint8_t *src, uint64_t n, float *out, const char *field,
                     int64_t offset, ml_error *err)
{
    if (!ml_gguf_type_supported(type))
        return unsupported(err, type, field, offset);
    const type_info *ti = &types[type];
    uint64_t floats_bytes;
    size_t sz;
    if (n % ti->block_elems)
        return ml__err(err, ML_E_INVAL, field, offset,
                       "%llu elements are not a whole number of %s blocks of %u",
                       (unsigned long long)n, ti->name, ti->block_elems);
    if (ml__mul64(n, 4, &floats_bytes) || ml__to_size(floats_bytes, &sz))
        return ml__err(err, ML_E_INVAL, field, offset,
                       "%llu floats do not fit in memory here", (unsigned long long)n);
    if (n)
        ti->fn(src, out, ti->block_elems == 1 ? n : n / ti->block_elems);
    return ML_OK;
}

ml_status ml_gguf_dequantize_raw(uint32_t type, const void *src, uint64_t n_elements, float *out,
                                 ml_error *err)
{
    if (n_elements && (!src || !out))
        return ml__err(err, ML_E_INVAL, "", -1, "NULL buffer");
    return run(type, src, n_elements, out, "", -1, err);
}

ml_status ml_gguf_dequantize(const ml_gguf_tensor *t, uint64_t first_row, uint64_t n_rows,
                             float *out, ml_error *err)
{
    if (!t)
        return ml__err(err, ML_E_INVAL, "", -1, "NULL tensor");
    if (first_row > t->rows || n_rows > t->rows - first_row)
        return ml__err(err, ML_E_INVAL, t->name, (int64_t)t->file_offset,
                       "rows %llu..%llu requested, the tensor has %llu",
                       (unsigned long long)first_row,
                       (unsigned long long)(first_row + n_rows),
                       (unsigned long long)t->rows);
    if (n_rows && !out)
        return ml__err(err, ML_E_INVAL, t->name, -1, "NULL output");
    if (!ml_gguf_type_supported(t->type))
        return unsupported(err, t->type, t->name, (int64_t)t->file_offset);
    /* rows * cols and rows * row_bytes were checked against the file at
     * open, so these products of smaller row counts cannot overflow. */
    const uint8_t *src = t->data + (size_t)(first_row * t->row_bytes);
    return run(t->type, src, n_rows * t->cols, out, t->name, (int64_t)t->file_offset, err);
}
