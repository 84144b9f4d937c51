/* blocks_scalar.c - the reference kernels for ggml's block types (and F32,
 * F16, BF16 matrices): kernels.h's rules 5 (Q8_0 activations) and 6 (K
 * activations), one function per type giving the s of one block or
 * super-block, and one row loop that adds them into rule 3's eight
 * accumulators.  The per-ISA
 * variants (blocks_x86.h) reproduce these bits.  Block layouts are
 * ggml's (ggml-common.h), as lib/format/gguf_dequant.c reads them. */
#include "kernels/kernels.h"

#include "mlcore.h"

#include <string.h>

static inline float f16_at(const uint8_t *p)
{
    return ml_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

static inline uint32_t u32_at(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ggml's kvalues_iq4nl and kvalues_mxfp4 (the E2M1 values doubled). */
static const int8_t iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                        1,    13,   25,  38,  53,  69,  89,  113};
static const int8_t mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* ggml_e8m0_to_fp32_half: 2^(e - 128) as f32 bits, e < 2 subnormal. */
static inline float e8m0_half(uint8_t e)
{
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Σ v·x over a 32-element block whose byte j holds element j (low
 * nibble) and j + 16 (high), v = table[nibble]. */
static int32_t nibble_dot(const uint8_t *qs, const int8_t *table, const int8_t *x)
{
    int32_t s = 0;
    for (int j = 0; j < 16; j++)
        s += table[qs[j] & 15] * x[j] + table[qs[j] >> 4] * x[j + 16];
    return s;
}

static int32_t xsum(const int8_t *x, int n)
{
    int32_t s = 0;
    for (int i = 0; i < n; i++)
        s += x[i];
    return s;
}

/* The fifth bits of Q5_0 / Q5_1: bit e of qh for element e. */
static int32_t q5_dot(const uint8_t *qh4, const uint8_t *qs, int offset, const int8_t *x)
{
    const uint32_t qh = u32_at(qh4);
    int32_t s = 0;
    for (int j = 0; j < 16; j++) {
        s += ((int32_t)((qs[j] & 15) | ((qh >> j) & 1) << 4) - offset) * x[j];
        s += ((int32_t)((qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4) - offset) * x[j + 16];
    }
    return s;
}

/* ---- the 32-element types: s[0] of one block ---- */

static const int8_t unsigned4[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

static void blk_q4_1(const uint8_t *w, const int8_t *x, const float *xd, float *s)
{
    const int32_t isum = nibble_dot(w + 4, unsigned4, x), asum = xsum(x, 32);
    s[0] = (float)isum * (f16_at(w) * xd[0]) + (float)asum * (f16_at(w + 2) * xd[0]);
}

static void blk_q5_0(const uint8_t *w, const int8_t *x, const float *xd, float *s)
{
    s[0] = (float)q5_dot(w + 2, w + 6, 16, x) * (f16_at(w) * xd[0]);
}

static void blk_q5_1(const uint8_t *w, const int8_t *x, const float *xd, float *s)
{
    const int32_t isum = q5_dot(w + 4, w + 8, 0, x), asum = xsum(x, 32);
    s[0] = (float)isum * (f16_at(w) * xd[0]) + (float)asum * (f16_at(w + 2) * xd[0]);
}

static void blk_iq4_nl(const uint8_t *w, const int8_t *x, const float *xd, float *s)
{
    s[0] = (float)nibble_dot(w + 2, iq4nl_values, x) * (f16_at(w) * xd[0]);
}

static void blk_mxfp4(const uint8_t *w, const int8_t *x, const float *xd, float *s)
{
    s[0] = (float)nibble_dot(w + 1, mxfp4_values, x) * (e8m0_half(w[0]) * xd[0]);
}

/* F32, F16, BF16: rule 5's eight float partial sums of four products. */
static float float_block(const float *w, const int8_t *x, float xd)
{
    float p[8] = {0};
    for (int m = 0; m < 4; m++)
        for (int l = 0; l < 8; l++)
            p[l] += w[8 * m + l] * (float)x[8 * m + l];
    return ml__fold8(p) * xd;
}

static void blk_f32(const uint8_t *w, const int8_t *x, const float *xd, float *s)
{
    float f[32];
    memcpy(f, w, sizeof f);
    s[0] = float_block(f, x, xd[0]);
}

static void blk_f16(const uint8_t *w, const int8_t *x, const float *xd, float *s)
{
    float f[32];
    for (int i = 0; i < 32; i++)
        f[i] = f16_at(w + 2 * i);
    s[0] = float_block(f, x, xd[0]);
}

static void blk_bf16(const uint8_t *w, const int8_t *x, const float *xd, float *s)
{
    float f[32];
    for (int i = 0; i < 32; i++) {
        uint32_t bits = (uint32_t)(w[2 * i] | w[2 * i + 1] << 8) << 16;
        memcpy(&f[i], &bits, 4);
    }
    s[0] = float_block(f, x, xd[0]);
}

/* ---- the 256-element types (rule 6): s of one super-block, xd its one
 * activation scale ---- */

/* Sub-block j's 6-bit scale and min of Q4_K / Q5_K (gguf_dequant.c's
 * k4_scale_min). */
static void k4_scale_min(const uint8_t *q, int j, int32_t *sc, int32_t *mn)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 15) | (q[j - 4] >> 6) << 4;
        *mn = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
    }
}

/* Q4_K, 144 bytes: d, dmin, scales[12], qs[128]; sub-block j is the low
 * (j even) or high nibbles of qs[32 (j / 2) ..]. */
static void blk_q4_k(const uint8_t *w, const int8_t *x, const float *xd, float *s)
{
    int32_t isum = 0, msum = 0;
    for (int j = 0; j < 8; j++, x += 32) {
        const uint8_t *q = w + 16 + 32 * (j / 2);
        const int shift = 4 * (j % 2);
        int32_t sc, mn, dot = 0;
        k4_scale_min(w + 4, j, &sc, &mn);
        for (int l = 0; l < 32; l++)
            dot += ((q[l] >> shift) & 15) * x[l];
        isum += sc * dot;
        msum += mn * xsum(x, 32);
    }
    s[0] = (float)isum * (f16_at(w) * xd[0]) - (float)msum * (f16_at(w + 2) * xd[0]);
}

/* Q5_K, 176 bytes: d, dmin, scales[12], qh[32], qs[128]; as Q4_K, bit j
 * of qh[l] the fifth bit. */
static void blk_q5_k(const uint8_t *w, const int8_t *x, const float *xd, float *s)
{
    const uint8_t *qh = w + 16;
    int32_t isum = 0, msum = 0;
    for (int j = 0; j < 8; j++, x += 32) {
        const uint8_t *q = w + 48 + 32 * (j / 2);
        const int shift = 4 * (j % 2);
        int32_t sc, mn, dot = 0;
        k4_scale_min(w + 4, j, &sc, &mn);
        for (int l = 0; l < 32; l++)
            dot += (((q[l] >> shift) & 15) | ((qh[l] >> j) & 1) << 4) * x[l];
        isum += sc * dot;
        msum += mn * xsum(x, 32);
    }
    s[0] = (float)isum * (f16_at(w) * xd[0]) - (float)msum * (f16_at(w + 2) * xd[0]);
}

/* Q6_K, 210 bytes: ql[128], qh[64], int8 scales[16], d.  Sub-block j =
 * 4h + u: ql[64h + 32 (u % 2) + l] (low nibble for u < 2), bits 2u, 2u+1
 * of qh[32h + l]; scale 2j for its first 16 elements, 2j + 1 after. */
static void blk_q6_k(const uint8_t *w, const int8_t *x, const float *xd, float *s)
{
    const int8_t *sc = (const int8_t *)(w + 192);
    int32_t isum = 0;
    for (int j = 0; j < 8; j++, x += 32) {
        const int h = j / 4, u = j % 4;
        const uint8_t *lo = w + 64 * h + 32 * (u % 2), *qh = w + 128 + 32 * h;
        const int nshift = u < 2 ? 0 : 4;
        int32_t half[2] = {0, 0};
        for (int l = 0; l < 32; l++) {
            int32_t q = (((lo[l] >> nshift) & 15) | ((qh[l] >> (2 * u)) & 3) << 4) - 32;
            half[l / 16] += q * x[l];
        }
        isum += sc[2 * j] * half[0] + sc[2 * j + 1] * half[1];
    }
    s[0] = (float)isum * (f16_at(w + 208) * xd[0]);
}

/* The sixteen 6-bit scales of a Q3_K block (gguf_dequant.c's q3_scales),
 * minus 32. */
static void q3_scales(const uint8_t *s, int32_t out[16])
{
    for (int i = 0; i < 16; i++) {
        int lo = i < 8 ? s[i] & 15 : s[i - 8] >> 4;
        int hi = (s[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
        out[i] = (lo | hi << 4) - 32;
    }
}

/* Q3_K, 110 bytes: hmask[32], qs[64], scales[12], d.  Block j = 4h + u:
 * bits 2u, 2u+1 of qs[32h + l]; a clear bit j of hmask[l] subtracts 4. */
static void blk_q3_k(const uint8_t *w, const int8_t *x, const float *xd, float *s)
{
    int32_t sc[16], isum = 0;
    q3_scales(w + 96, sc);
    for (int j = 0; j < 8; j++, x += 32) {
        const uint8_t *q = w + 32 + 32 * (j / 4);
        const int shift = 2 * (j % 4);
        int32_t half[2] = {0, 0};
        for (int l = 0; l < 32; l++) {
            int32_t v = ((q[l] >> shift) & 3) - ((w[l] >> j) & 1 ? 0 : 4);
            half[l / 16] += v * x[l];
        }
        isum += sc[2 * j] * half[0] + sc[2 * j + 1] * half[1];
    }
    s[0] = (float)isum * (f16_at(w + 108) * xd[0]);
}

/* Q2_K, 84 bytes: scales[16], qs[64], d, dmin.  Block j = 4h + u: bits
 * 2u, 2u+1 of qs[32h + l]; scale byte 2j (first 16) or 2j + 1. */
static void blk_q2_k(const uint8_t *w, const int8_t *x, const float *xd, float *s)
{
    int32_t isum = 0, msum = 0;
    for (int j = 0; j < 8; j++, x += 32) {
        const uint8_t *q = w + 16 + 32 * (j / 4), *sc = w + 2 * j;
        const int shift = 2 * (j % 4);
        int32_t half[2] = {0, 0};
        for (int l = 0; l < 32; l++)
            half[l / 16] += ((q[l] >> shift) & 3) * x[l];
        isum += (sc[0] & 15) * half[0] + (sc[1] & 15) * half[1];
        msum += (sc[0] >> 4) * xsum(x, 16) + (sc[1] >> 4) * xsum(x + 16, 16);
    }
    s[0] = (float)isum * (f16_at(w + 80) * xd[0]) - (float)msum * (f16_at(w + 82) * xd[0]);
}

/* IQ4_XS, 136 bytes: d, scales_h (u16), scales_l[4], qs[128]; block j's
 * scale: nibble j of scales_l, bits 2j, 2j+1 of scales_h; 16 bytes as
 * IQ4_NL. */
static void blk_iq4_xs(const uint8_t *w, const int8_t *x, const float *xd, float *s)
{
    const unsigned sh = (unsigned)(w[2] | w[3] << 8);
    int32_t isum = 0;
    for (int j = 0; j < 8; j++, x += 32) {
        const int32_t ls =
            ((w[4 + j / 2] >> (4 * (j % 2))) & 15) | (int32_t)((sh >> (2 * j)) & 3) << 4;
        isum += (ls - 32) * nibble_dot(w + 8 + 16 * j, iq4nl_values, x);
    }
    s[0] = (float)isum * (f16_at(w) * xd[0]);
}

/* ---- the table and the row loop ---- */

typedef void (*blk_fn)(const uint8_t *w, const int8_t *x, const float *xd, float *s);

typedef struct blk_type {
    uint32_t elems, bytes; /* a unit of `elems` weights (32 or 256) in `bytes` */
    blk_fn fn;
} blk_type;

static const blk_type blk_types[ML_TYPE_COUNT] = {
    [ML_TYPE_F32] = {32, 128, blk_f32},     [ML_TYPE_Q4_1] = {32, 20, blk_q4_1},
    [ML_TYPE_Q5_0] = {32, 22, blk_q5_0},    [ML_TYPE_Q5_1] = {32, 24, blk_q5_1},
    [ML_TYPE_Q2_K] = {256, 84, blk_q2_k},   [ML_TYPE_Q3_K] = {256, 110, blk_q3_k},
    [ML_TYPE_Q4_K] = {256, 144, blk_q4_k},  [ML_TYPE_Q5_K] = {256, 176, blk_q5_k},
    [ML_TYPE_Q6_K] = {256, 210, blk_q6_k},  [ML_TYPE_IQ4_NL] = {32, 18, blk_iq4_nl},
    [ML_TYPE_IQ4_XS] = {256, 136, blk_iq4_xs}, [ML_TYPE_MXFP4] = {32, 17, blk_mxfp4},
    [ML_TYPE_F16] = {32, 64, blk_f16},      [ML_TYPE_BF16] = {32, 64, blk_bf16},
};

size_t ml__blk_row_bytes(ml_type t, size_t cols)
{
    if ((unsigned)t >= ML_TYPE_COUNT || !blk_types[t].fn || cols % blk_types[t].elems)
        return 0;
    return cols / blk_types[t].elems * blk_types[t].bytes;
}

/* Rules 5 and 6: one s per unit (a block of 32, or a super-block of 256
 * with its one activation scale) into acc[u % 8]. */
static float row_dot(const blk_type *bt, const uint8_t *w, size_t cols, const int8_t *x,
                     const float *xd)
{
    float acc[8] = {0}, s;
    for (size_t u = 0; u < cols / bt->elems; u++) {
        bt->fn(w + u * bt->bytes, x + u * bt->elems, xd + u, &s);
        acc[u % 8] += s;
    }
    return ml__fold8(acc);
}

void ml__matvec_blk_scalar(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                           const int8_t *xq, const float *xd, float *y)
{
    const blk_type *bt = &blk_types[t];
    const size_t row_bytes = ml__blk_row_bytes(t, cols);
    for (size_t r = r0; r < r1; r++)
        y[r] = row_dot(bt, w + r * row_bytes, cols, xq, xd);
}

/* Rows outside, tokens inside: a weight row stays in cache for every
 * token. */
void ml__matmul_blk_scalar(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                           const int8_t *xq, const float *xd, size_t n_tok, float *y,
                           size_t ldy)
{
    const blk_type *bt = &blk_types[t];
    const size_t row_bytes = ml__blk_row_bytes(t, cols);
    for (size_t r = r0; r < r1; r++)
        for (size_t k = 0; k < n_tok; k++)
            y[k * ldy + r] = row_dot(bt, w + r * row_bytes, cols, xq + k * cols,
                                     xd + k * ml__blk_xd_count(t, cols));
}

/* Q5_0, IQ4_NL and MXFP4 as the spec's Q8_0 (blk_to_q8_0 in kernels.h). */
int ml__blk_to_q8_0_scalar(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                           int8_t *q, float *d)
{
    if (!ml__blk_as_q8_0(t))
        return 0;
    const size_t bytes = t == ML_TYPE_Q5_0 ? 22 : t == ML_TYPE_IQ4_NL ? 18 : 17;
    const size_t nb = (r1 - r0) * (cols / 32);
    const uint8_t *b = w + r0 * (cols / 32) * bytes;
    for (size_t i = 0; i < nb; i++, b += bytes, q += 32) {
        if (t == ML_TYPE_Q5_0) {
            const uint32_t qh = u32_at(b + 2);
            for (int j = 0; j < 16; j++) {
                q[j] = (int8_t)(((b[6 + j] & 15) | ((qh >> j) & 1) << 4) - 16);
                q[j + 16] = (int8_t)(((b[6 + j] >> 4) | ((qh >> (j + 16)) & 1) << 4) - 16);
            }
        } else {
            const int8_t *table = t == ML_TYPE_IQ4_NL ? iq4nl_values : mxfp4_values;
            const uint8_t *qs = b + (t == ML_TYPE_IQ4_NL ? 2 : 1);
            for (int j = 0; j < 16; j++) {
                q[j] = table[qs[j] & 15];
                q[j + 16] = table[qs[j] >> 4];
            }
        }
        d[i] = t == ML_TYPE_MXFP4 ? e8m0_half(b[0]) : f16_at(b);
    }
    return 1;
}
