/* blocks_neon.c - the block-type kernels (kernels.h's rules 5 and 6) for
 * AArch64 NEON, bit-identical to blocks_scalar.c.  blocks_neondot.c
 * compiles this file again with NEON_DOTPROD, where the byte dot products
 * are sdot.
 *
 * Every type's weights are unpacked to their signed integer values (all
 * of them fit in an int8: q5 - 16, q6 - 32, Q3_K's -4..3, the IQ4 and
 * MXFP4 levels, the unsigned quants below 64), so one signed byte dot
 * product serves all, with no offsets to take off afterwards.  A block's
 * (or half-block's) products land in an int32x4 of partial sums, exact.
 * Rule 5's 32-element types: pairwise adds gather eight blocks' sums into
 * two vectors, lane j block 8k + j, which is rule 3's acc[b % 8], and the
 * float steps run on those lanes in the reference's order, with separate
 * multiplies and adds (-ffp-contract=off; no vfmaq, no vmlaq on floats).
 * Rule 6's 256-element types (K activations, one xd a super-block): the
 * sixteen halves' sums times their scales, and the mins times the
 * activation's half sums, are added across lanes into one int32 each
 * (exact: int32 addition wraps, so any order gives the reference's sum,
 * which fits), then the one float step per super-block is plain C,
 * into acc[k % 8].
 *
 * The 32-element types go eight blocks at a time; a last partial group
 * gives its missing lanes +0 (zero sums, zero scales), and adding +0 to
 * an accumulator that starts at +0 (so is never -0) changes nothing.
 * The activation's sums over 16 elements (for the mins and Q4_1's and
 * Q5_1's offsets) are the same for every row: computed once a call.
 * F32, F16 and BF16 compute each block's eight partials in two vectors
 * and fold them in plain C.
 *
 * matmul (the integer types, two tokens or more) unpacks a weight row
 * once for a chunk of tokens into its int8 weights and per-half scales,
 * then each token's dot is byte dot products and the scales' step, the
 * same integers and float steps as matvec's; token k's activation scales
 * are at xd + k * ml__blk_xd_count(t, cols) (one per 32, or per 256). */
#include "kernels/kernels.h"

#if defined(__aarch64__)

#include "kernels/blocks_neon.h"
#include "mlcore.h"

#include <arm_neon.h>
#include <stdlib.h>
#include <string.h>

#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

#if defined(NEON_DOTPROD)
#define BLK_NAME(x) x##_neondot
#else
#define BLK_NAME(x) x##_neon
#endif

/* ---- exact integer sums ---- */

/* acc + Σ a·b over 16 signed bytes (|a|, |b| <= 127), into four lanes. */
ALWAYS_INLINE int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b)
{
#if defined(NEON_DOTPROD)
    return vdotq_s32(acc, a, b);
#else
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
#endif
}

/* Σ v·x over 32 elements, v given as two halves of 16. */
ALWAYS_INLINE int32x4_t dot32(int8x16_t v0, int8x16_t v1, const int8_t *x)
{
    return dot16(dot16(vdupq_n_s32(0), v0, vld1q_s8(x)), v1, vld1q_s8(x + 16));
}

/* The totals of four partial vectors as the lanes of one. */
ALWAYS_INLINE int32x4_t lanes4(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d)
{
    return vpaddq_s32(vpaddq_s32(a, b), vpaddq_s32(c, d));
}

/* Eight blocks' partials as two vectors, lane j block j. */
ALWAYS_INLINE void lanes8(const int32x4_t v[8], int32x4_t out[2])
{
    out[0] = lanes4(v[0], v[1], v[2], v[3]);
    out[1] = lanes4(v[4], v[5], v[6], v[7]);
}

/* Sixteen half-blocks' partials (block j's halves 2j, 2j + 1) times
 * their sixteen int32 scales, the halves of each block added: lane j
 * block j. */
ALWAYS_INLINE void halves_scaled(const int32x4_t h[16], const int32x4_t sc[4], int32x4_t out[2])
{
    int32x4_t p[4];
    UNROLL
    for (int i = 0; i < 4; i++) /* lanes: halves 4i .. 4i + 3 */
        p[i] = vmulq_s32(lanes4(h[4 * i], h[4 * i + 1], h[4 * i + 2], h[4 * i + 3]), sc[i]);
    out[0] = vpaddq_s32(p[0], p[1]);
    out[1] = vpaddq_s32(p[2], p[3]);
}

/* ---- unpacking ---- */

ALWAYS_INLINE float f16_at(const uint8_t *p)
{
    return ml_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

/* ggml_e8m0_to_fp32_half, as blocks_scalar.c. */
ALWAYS_INLINE float e8m0_half(uint8_t e)
{
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

ALWAYS_INLINE int8x16_t lo_nibbles(uint8x16_t q)
{
    return vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(15)));
}

ALWAYS_INLINE int8x16_t hi_nibbles(uint8x16_t q)
{
    return vreinterpretq_s8_u8(vshrq_n_u8(q, 4));
}

/* ggml's kvalues_iq4nl and kvalues_mxfp4 (blocks_scalar.c). */
static const int8_t iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                        1,    13,   25,  38,  53,  69,  89,  113};
static const int8_t mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* A 16-level table looked up by nibbles (0..15). */
ALWAYS_INLINE int8x16_t levels(const int8_t *table, int8x16_t idx)
{
    return vqtbl1q_s8(vld1q_s8(table), vreinterpretq_u8_s8(idx));
}

/* Bits 16h .. 16h + 15 of qh as bytes: 16 where set, else 0 (Q5_0's and
 * Q5_1's fifth bits of elements 16h ..). */
ALWAYS_INLINE uint8x16_t fifth_bits(uint32_t qh, int h)
{
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t b = vcombine_u8(vdup_n_u8((uint8_t)(qh >> 16 * h)),
                                     vdup_n_u8((uint8_t)(qh >> (16 * h + 8))));
    return vandq_u8(vtstq_u8(b, vld1q_u8(bit)), vdupq_n_u8(16));
}

/* The 32 signed weights of a block of a 32-element type T, elements 0-15
 * in v[0] and 16-31 in v[1] (byte j of the quants: element j in the low
 * nibble, j + 16 in the high one). */
ALWAYS_INLINE void weights32(ml_type T, const uint8_t *b, int8x16_t v[2])
{
    switch (T) {
    case ML_TYPE_Q4_1: {
        const uint8x16_t q = vld1q_u8(b + 4);
        v[0] = lo_nibbles(q), v[1] = hi_nibbles(q);
        return;
    }
    case ML_TYPE_Q5_0:
    case ML_TYPE_Q5_1: {
        const int at = T == ML_TYPE_Q5_0 ? 2 : 4;
        uint32_t qh;
        memcpy(&qh, b + at, 4); /* little-endian, as the file */
        const uint8x16_t q = vld1q_u8(b + at + 4);
        v[0] = vorrq_s8(lo_nibbles(q), vreinterpretq_s8_u8(fifth_bits(qh, 0)));
        v[1] = vorrq_s8(hi_nibbles(q), vreinterpretq_s8_u8(fifth_bits(qh, 1)));
        if (T == ML_TYPE_Q5_0) { /* q5 - 16 */
            v[0] = vsubq_s8(v[0], vdupq_n_s8(16));
            v[1] = vsubq_s8(v[1], vdupq_n_s8(16));
        }
        return;
    }
    case ML_TYPE_IQ4_NL:
    case ML_TYPE_MXFP4: {
        const int8_t *table = T == ML_TYPE_IQ4_NL ? iq4nl_values : mxfp4_values;
        const uint8x16_t q = vld1q_u8(b + (T == ML_TYPE_IQ4_NL ? 2 : 1));
        v[0] = levels(table, lo_nibbles(q)), v[1] = levels(table, hi_nibbles(q));
        return;
    }
    default: __builtin_unreachable();
    }
}

/* ---- rule 5's float steps, lane j block j ---- */

/* s = (float)isum * (d * xd) */
ALWAYS_INLINE float32x4_t s_plain(int32x4_t isum, float32x4_t d, float32x4_t xd)
{
    return vmulq_f32(vcvtq_f32_s32(isum), vmulq_f32(d, xd));
}

/* s = (float)isum * (d * xd) - (float)msum * (dmin * xd) */
ALWAYS_INLINE float32x4_t s_min(int32x4_t isum, int32x4_t msum, float32x4_t d, float32x4_t dmin,
                                float32x4_t xd)
{
    return vsubq_f32(vmulq_f32(vcvtq_f32_s32(isum), vmulq_f32(d, xd)),
                     vmulq_f32(vcvtq_f32_s32(msum), vmulq_f32(dmin, xd)));
}

/* s = (float)isum * (d * xd) + (float)asum * (m * xd) */
ALWAYS_INLINE float32x4_t s_offset(int32x4_t isum, int32x4_t asum, float32x4_t d, float32x4_t m,
                                   float32x4_t xd)
{
    return vaddq_f32(vmulq_f32(vcvtq_f32_s32(isum), vmulq_f32(d, xd)),
                     vmulq_f32(vcvtq_f32_s32(asum), vmulq_f32(m, xd)));
}

/* ---- the 32-element types: s of a group of m <= 8 blocks ---- */

ALWAYS_INLINE size_t bytes32(ml_type T)
{
    return T == ML_TYPE_Q4_1     ? 20
         : T == ML_TYPE_Q5_0   ? 22
         : T == ML_TYPE_Q5_1   ? 24
         : T == ML_TYPE_IQ4_NL ? 18
                               : 17; /* MXFP4 */
}

/* The f16 at byte `at` of each of m blocks as eight f32 lanes, +0 from m
 * on (f16 to f32 is exact). */
ALWAYS_INLINE void f16_lanes(const uint8_t *w, size_t bytes, int at, size_t m, float32x4_t out[2])
{
    uint16_t h[8] = {0};
    for (size_t j = 0; j < m; j++)
        h[j] = (uint16_t)(w[j * bytes + at] | w[j * bytes + at + 1] << 8);
    out[0] = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
    out[1] = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h + 4)));
}

/* xh: the activation's half sums (zeros after the row's end). */
ALWAYS_INLINE void group32(ml_type T, const uint8_t *w, size_t m, const int8_t *x,
                           const int32_t *xh, const float *xd, float32x4_t s[2])
{
    const size_t bytes = bytes32(T);
    int32x4_t v[8], isum[2];
    float xdl[8] = {0};
    UNROLL
    for (size_t j = 0; j < 8; j++) {
        v[j] = vdupq_n_s32(0);
        if (j < m) {
            int8x16_t q[2];
            weights32(T, w + j * bytes, q);
            v[j] = dot32(q[0], q[1], x + 32 * j);
            xdl[j] = xd[j];
        }
    }
    lanes8(v, isum);
    float32x4_t d[2];
    if (T == ML_TYPE_MXFP4) {
        float e[8] = {0};
        for (size_t j = 0; j < m; j++)
            e[j] = e8m0_half(w[j * bytes]);
        d[0] = vld1q_f32(e), d[1] = vld1q_f32(e + 4);
    } else {
        f16_lanes(w, bytes, 0, m, d);
    }
    if (T == ML_TYPE_Q4_1 || T == ML_TYPE_Q5_1) { /* asum: the blocks' two half sums */
        float32x4_t mn[2];
        f16_lanes(w, bytes, 2, m, mn);
        UNROLL
        for (int h = 0; h < 2; h++) {
            const int32x4_t asum = vpaddq_s32(vld1q_s32(xh + 8 * h), vld1q_s32(xh + 8 * h + 4));
            s[h] = s_offset(isum[h], asum, d[h], mn[h], vld1q_f32(xdl + 4 * h));
        }
        return;
    }
    UNROLL
    for (int h = 0; h < 2; h++)
        s[h] = s_plain(isum[h], d[h], vld1q_f32(xdl + 4 * h));
}

/* ---- the 256-element types: sub-block j's weights and scales ---- */

/* Sub-block j's 32 signed weights of a super-block of type T, elements
 * 0-15 in q[0] and 16-31 in q[1]:
 *   Q4_K, Q5_K: the low (j even) or high nibbles of quant bytes 32 (j / 2)
 *     .. (Q5_K's fifth bit bit j of qh[l]);
 *   Q6_K (j = 4h + u): the nibbles of ql[64h + 32 (u % 2) ..] (low for
 *     u < 2), bits 2u, 2u + 1 of qh[32h + l] above them, minus 32;
 *   Q3_K and Q2_K (j = 4h + u): bits 2u, 2u + 1 of qs[32h + l]; Q3_K's
 *     minus 4 where bit j of hmask[l] is clear;
 *   IQ4_XS: IQ4_NL's 16 bytes at qs + 16j. */
ALWAYS_INLINE void sub_weights(ml_type T, const uint8_t *w, int j, int8x16_t q[2])
{
    if (T == ML_TYPE_IQ4_XS) {
        const uint8x16_t b = vld1q_u8(w + 8 + 16 * j);
        q[0] = levels(iq4nl_values, lo_nibbles(b)), q[1] = levels(iq4nl_values, hi_nibbles(b));
        return;
    }
    UNROLL
    for (int k = 0; k < 2; k++) {
        switch (T) {
        case ML_TYPE_Q4_K:
        case ML_TYPE_Q5_K: {
            const int q5 = T == ML_TYPE_Q5_K;
            const uint8x16_t b = vld1q_u8(w + (q5 ? 48 : 16) + 32 * (j / 2) + 16 * k);
            q[k] = j % 2 ? hi_nibbles(b) : lo_nibbles(b);
            if (q5) /* bit j to bit 4: a negative count shifts right */
                q[k] = vorrq_s8(q[k], vreinterpretq_s8_u8(vandq_u8(
                                          vshlq_u8(vld1q_u8(w + 16 + 16 * k),
                                                   vdupq_n_s8((int8_t)(4 - j))),
                                          vdupq_n_u8(16))));
            break;
        }
        case ML_TYPE_Q6_K: {
            const int h = j / 4, u = j % 4;
            const uint8x16_t l = vld1q_u8(w + 64 * h + 32 * (u % 2) + 16 * k);
            const uint8x16_t qh = vld1q_u8(w + 128 + 32 * h + 16 * k);
            const int8x16_t lo = u < 2 ? lo_nibbles(l) : hi_nibbles(l);
            const uint8x16_t hi =
                vandq_u8(vshlq_u8(qh, vdupq_n_s8((int8_t)(4 - 2 * u))), vdupq_n_u8(0x30));
            q[k] = vsubq_s8(vorrq_s8(lo, vreinterpretq_s8_u8(hi)), vdupq_n_s8(32));
            break;
        }
        default: { /* Q3_K, Q2_K */
            const int q3 = T == ML_TYPE_Q3_K;
            const uint8x16_t b = vld1q_u8(w + (q3 ? 32 : 16) + 32 * (j / 4) + 16 * k);
            uint8x16_t v =
                vandq_u8(vshlq_u8(b, vdupq_n_s8((int8_t)(-2 * (j % 4)))), vdupq_n_u8(3));
            if (q3) { /* wraps to -4..3 */
                const uint8x16_t set =
                    vtstq_u8(vld1q_u8(w + 16 * k), vdupq_n_u8((uint8_t)(1u << j)));
                v = vsubq_u8(v, vbicq_u8(vdupq_n_u8(4), set));
            }
            q[k] = vreinterpretq_s8_u8(v);
            break;
        }
        }
    }
}

/* A super-block's scales per half sub-block (half i: elements 16i ..,
 * sub-block i / 2) in sc[16] and mn[16] (0 for a type without mins), its
 * d and dmin (or 0):
 *   Q4_K, Q5_K: sub-block j's 6-bit sc_j and m_j for both halves;
 *   Q6_K: the int8 scales; Q3_K: the 6-bit scales minus 32;
 *   Q2_K: scale byte i's low nibble and high nibble (the min);
 *   IQ4_XS: ls_j - 32 for both halves (nibble j of scales_l, bits 2j,
 *     2j + 1 of scales_h above it). */
ALWAYS_INLINE void sub_scales(ml_type T, const uint8_t *w, int32_t sc[16], int32_t mn[16],
                              float *d, float *dmin)
{
    *dmin = 0.0f;
    memset(mn, 0, 16 * sizeof *mn);
    switch (T) {
    case ML_TYPE_Q4_K:
    case ML_TYPE_Q5_K: {
        const uint8_t *q = w + 4;
        for (int j = 0; j < 4; j++) { /* blocks_scalar.c's k4_scale_min */
            sc[2 * j] = sc[2 * j + 1] = q[j] & 63;
            mn[2 * j] = mn[2 * j + 1] = q[j + 4] & 63;
            sc[2 * j + 8] = sc[2 * j + 9] = (q[j + 8] & 15) | (q[j] >> 6) << 4;
            mn[2 * j + 8] = mn[2 * j + 9] = (q[j + 8] >> 4) | (q[j + 4] >> 6) << 4;
        }
        *d = f16_at(w), *dmin = f16_at(w + 2);
        return;
    }
    case ML_TYPE_Q6_K:
        for (int i = 0; i < 16; i++)
            sc[i] = (int8_t)w[192 + i];
        *d = f16_at(w + 208);
        return;
    case ML_TYPE_Q3_K: { /* blocks_scalar.c's q3_scales */
        const uint8_t *p = w + 96;
        for (int i = 0; i < 16; i++) {
            const int lo = i < 8 ? p[i] & 15 : p[i - 8] >> 4;
            const int hi = (p[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
            sc[i] = (lo | hi << 4) - 32;
        }
        *d = f16_at(w + 108);
        return;
    }
    case ML_TYPE_Q2_K:
        for (int i = 0; i < 16; i++)
            sc[i] = w[i] & 15, mn[i] = w[i] >> 4;
        *d = f16_at(w + 80), *dmin = f16_at(w + 82);
        return;
    default: { /* IQ4_XS */
        const unsigned sh = (unsigned)(w[2] | w[3] << 8);
        for (int j = 0; j < 8; j++)
            sc[2 * j] = sc[2 * j + 1] =
                (((w[4 + j / 2] >> (4 * (j % 2))) & 15) | (int32_t)((sh >> (2 * j)) & 3) << 4) -
                32;
        *d = f16_at(w);
        return;
    }
    }
}

/* ---- the s of a block (rule 5) or super-block (rule 6) from half sums ---- */

/* How a type's s uses its sums (kernels.h's rules 5 and 6):
 *   PLAIN  s = (float)isum * (d * xd)
 *   MINUS  s = (float)isum * (d * xd) - (float)msum * (dmin * xd)
 *   PLUS   s = (float)isum * (d * xd) + (float)msum * (dmin * xd)
 * with isum = Σ over the halves of sc·(Σ v·x), msum = Σ mn·(Σ x): for the
 * 32-element types over one block with sc = 1 (Q4_1, Q5_1: mn = 1,
 * dmin = m); for the 256-element types over a super-block's sixteen
 * halves with sub_scales' values (Q4_K's and Q5_K's sc_j and m_j on both
 * halves of sub-block j, Q2_K's, Q6_K's and Q3_K's per-half lines,
 * IQ4_XS's ls_j - 32). */
enum { PLAIN, MINUS, PLUS };

ALWAYS_INLINE int kind_of(ml_type T)
{
    return T == ML_TYPE_Q4_K || T == ML_TYPE_Q5_K || T == ML_TYPE_Q2_K ? MINUS
         : T == ML_TYPE_Q4_1 || T == ML_TYPE_Q5_1                      ? PLUS
                                                                        : PLAIN;
}

/* Four int32 lanes from 4 values at p. */
ALWAYS_INLINE void load16_s32(const int32_t *p, int32x4_t v[4])
{
    UNROLL
    for (int i = 0; i < 4; i++)
        v[i] = vld1q_s32(p + 4 * i);
}

/* s of eight 32-element blocks: hs their sixteen halves' partial sums
 * Σ v·x, xh the activation's sixteen half sums Σ x, sc and mn the halves'
 * scales, d, dmin and xd lanes (lane j block j). */
ALWAYS_INLINE void s_of8(int kind, const int32x4_t hs[16], const int32_t *xh, const int32_t *sc,
                         const int32_t *mn, const float32x4_t d[2], const float32x4_t dmin[2],
                         const float32x4_t xd[2], float32x4_t s[2])
{
    int32x4_t scv[4], isum[2];
    load16_s32(sc, scv);
    halves_scaled(hs, scv, isum);
    if (kind == PLAIN) {
        s[0] = s_plain(isum[0], d[0], xd[0]);
        s[1] = s_plain(isum[1], d[1], xd[1]);
        return;
    }
    int32x4_t p[4], msum[2];
    UNROLL
    for (int i = 0; i < 4; i++) /* lanes: halves 4i .. 4i + 3 */
        p[i] = vmulq_s32(vld1q_s32(xh + 4 * i), vld1q_s32(mn + 4 * i));
    msum[0] = vpaddq_s32(p[0], p[1]);
    msum[1] = vpaddq_s32(p[2], p[3]);
    UNROLL
    for (int h = 0; h < 2; h++)
        s[h] = kind == MINUS ? s_min(isum[h], msum[h], d[h], dmin[h], xd[h])
                             : s_offset(isum[h], msum[h], d[h], dmin[h], xd[h]);
}

/* Rule 6's isum of a super-block: Σ over its sixteen halves of sc·hs
 * (hs the halves' partial sums), added across lanes. */
ALWAYS_INLINE int32_t k_isum(const int32x4_t hs[16], const int32_t sc[16])
{
    int32x4_t scv[4], sub[2];
    load16_s32(sc, scv);
    halves_scaled(hs, scv, sub);
    return vaddvq_s32(vaddq_s32(sub[0], sub[1]));
}

/* Rule 6's msum of a super-block: Σ over its sixteen halves of mn·xh. */
ALWAYS_INLINE int32_t k_msum(const int32_t *xh, const int32_t mn[16])
{
    int32x4_t m = vmulq_s32(vld1q_s32(xh), vld1q_s32(mn));
    UNROLL
    for (int i = 1; i < 4; i++)
        m = vmlaq_s32(m, vld1q_s32(xh + 4 * i), vld1q_s32(mn + 4 * i));
    return vaddvq_s32(m);
}

/* Rule 6's one float step of a super-block (kind PLAIN or MINUS), in the
 * reference's order. */
ALWAYS_INLINE float s_k(int kind, int32_t isum, int32_t msum, float d, float dmin, float xd)
{
    const float s = (float)isum * (d * xd);
    return kind == MINUS ? s - (float)msum * (dmin * xd) : s;
}

/* s of one super-block of a 256-element type T (x its 256 activations,
 * xh their half sums, xd their one scale). */
ALWAYS_INLINE float superblock(ml_type T, const uint8_t *w, const int8_t *x, const int32_t *xh,
                               float xd)
{
    int32x4_t hs[16];
    UNROLL
    for (int j = 0; j < 8; j++) {
        int8x16_t q[2];
        sub_weights(T, w, j, q);
        hs[2 * j] = dot16(vdupq_n_s32(0), q[0], vld1q_s8(x + 32 * j));
        hs[2 * j + 1] = dot16(vdupq_n_s32(0), q[1], vld1q_s8(x + 32 * j + 16));
    }
    int32_t sc[16], mn[16];
    float d, dmin;
    sub_scales(T, w, sc, mn, &d, &dmin);
    const int kind = kind_of(T);
    return s_k(kind, k_isum(hs, sc), kind == MINUS ? k_msum(xh, mn) : 0, d, dmin, xd);
}

/* ---- rows of the integer types ---- */

#define XS_COLS 32768 /* the longest row whose half sums go on the stack (8 KiB) */

/* Rule 3's fold of the two accumulator vectors (lanes 0-3, 4-7). */
ALWAYS_INLINE float fold(float32x4_t lo, float32x4_t hi)
{
    float acc[8];
    vst1q_f32(acc, lo);
    vst1q_f32(acc + 4, hi);
    return ml__fold8(acc);
}

/* The activation's half sums, the same for every row: xh[i] = Σ x over
 * elements 16i .. 16i + 15 (|xh| <= 2032), zeros after the row up to a
 * whole group of eight blocks. */
static void half_sums(const int8_t *x, size_t cols, int32_t *xh)
{
    const size_t n = cols / 16;
    for (size_t i = 0; i < n; i++)
        xh[i] = vaddlvq_s8(vld1q_s8(x + 16 * i));
    for (size_t i = n; i < (n + 15) / 16 * 16; i++)
        xh[i] = 0;
}

/* A row of a 32-element type: groups of eight blocks, the last partial. */
ALWAYS_INLINE float row32(ml_type T, const uint8_t *w, size_t cols, const int8_t *x,
                          const int32_t *xh, const float *xd)
{
    const size_t nb = cols / 32, bytes = bytes32(T);
    float32x4_t acc[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}, s[2];
    for (size_t g = 0; g < nb; g += 8) {
        __builtin_prefetch(w + g * bytes + 1024);
        group32(T, w + g * bytes, nb - g < 8 ? nb - g : 8, x + 32 * g, xh + 2 * g, xd + g, s);
        acc[0] = vaddq_f32(acc[0], s[0]);
        acc[1] = vaddq_f32(acc[1], s[1]);
    }
    return fold(acc[0], acc[1]);
}

/* A row of a 256-element type: super-block k's s into acc[k % 8] (xd
 * one scale a super-block). */
ALWAYS_INLINE float row256(ml_type T, const uint8_t *w, size_t cols, const int8_t *x,
                           const int32_t *xh, const float *xd)
{
    const size_t bytes = ml__blk_k_bytes(T);
    float acc[8] = {0};
    for (size_t k = 0; k < cols / 256; k++) {
        __builtin_prefetch(w + k * bytes + 1024);
        acc[k % 8] += superblock(T, w + k * bytes, x + 256 * k, xh + 16 * k, xd[k]);
    }
    return ml__fold8(acc);
}

/* ---- F32, F16, BF16 ---- */

/* Weights 4i .. 4i + 3 of a float block of type T, widened exactly. */
ALWAYS_INLINE float32x4_t float4(ml_type T, const uint8_t *b, int i)
{
    switch (T) {
    case ML_TYPE_F32: return vld1q_f32((const float *)(const void *)b + 4 * i);
    case ML_TYPE_F16: return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(b + 8 * i)));
    default: /* BF16: the high half of an f32 */
        return vreinterpretq_f32_u32(vshll_n_u16(vreinterpret_u16_u8(vld1_u8(b + 8 * i)), 16));
    }
}

/* Rule 5's s of one float block: p[l] = Σ over m in order of
 * w[8m + l]·x[8m + l] from +0 (lanes 0-3 in p0, 4-7 in p1), folded, times
 * xd. */
ALWAYS_INLINE float float_block(ml_type T, const uint8_t *b, const int8_t *x, float xd)
{
    float32x4_t p0 = vdupq_n_f32(0.0f), p1 = vdupq_n_f32(0.0f);
    UNROLL
    for (int m = 0; m < 4; m++) {
        const int16x8_t x16 = vmovl_s8(vld1_s8(x + 8 * m));
        const float32x4_t x0 = vcvtq_f32_s32(vmovl_s16(vget_low_s16(x16)));
        const float32x4_t x1 = vcvtq_f32_s32(vmovl_high_s16(x16));
        p0 = vaddq_f32(p0, vmulq_f32(float4(T, b, 2 * m), x0));
        p1 = vaddq_f32(p1, vmulq_f32(float4(T, b, 2 * m + 1), x1));
    }
    return fold(p0, p1) * xd;
}

ALWAYS_INLINE float row_floats(ml_type T, const uint8_t *w, size_t cols, const int8_t *x,
                               const int32_t *xh, const float *xd)
{
    (void)xh;
    const size_t bytes = T == ML_TYPE_F32 ? 128 : 64;
    float acc[8] = {0};
    for (size_t b = 0; b < cols / 32; b++)
        acc[b % 8] += float_block(T, w + b * bytes, x + 32 * b, xd[b]);
    return ml__fold8(acc);
}

/* ---- matmul: each row decoded once for a chunk of tokens ---- */

/* A row unpacked: every block's 32 signed weights, its halves' scales
 * and mins (sub_scales; 1 and, for Q4_1 and Q5_1, 1 for the 32-element
 * types), and d and dmin (Q4_1, Q5_1: m) per block (32-element types) or
 * per super-block (256-element types); zeros after the row up to a whole
 * group of eight blocks. */
typedef struct drow {
    int8_t *q;
    int32_t *sc, *mn;
    float *d, *dmin;
} drow;

ALWAYS_INLINE void decode(ml_type T, const uint8_t *w, size_t cols, const drow *o)
{
    const int plus = kind_of(T) == PLUS;
    if (T == ML_TYPE_Q4_1 || T == ML_TYPE_Q5_0 || T == ML_TYPE_Q5_1 || T == ML_TYPE_IQ4_NL ||
        T == ML_TYPE_MXFP4) {
        const size_t bytes = bytes32(T);
        for (size_t b = 0; b < cols / 32; b++, w += bytes) {
            int8x16_t q[2];
            weights32(T, w, q);
            vst1q_s8(o->q + 32 * b, q[0]);
            vst1q_s8(o->q + 32 * b + 16, q[1]);
            o->sc[2 * b] = o->sc[2 * b + 1] = 1;
            o->mn[2 * b] = o->mn[2 * b + 1] = plus;
            o->d[b] = T == ML_TYPE_MXFP4 ? e8m0_half(w[0]) : f16_at(w);
            o->dmin[b] = plus ? f16_at(w + 2) : 0.0f;
        }
        return;
    }
    const size_t bytes = ml__blk_k_bytes(T);
    for (size_t k = 0; k < cols / 256; k++, w += bytes) {
        UNROLL
        for (int j = 0; j < 8; j++) {
            int8x16_t q[2];
            sub_weights(T, w, j, q);
            vst1q_s8(o->q + 256 * k + 32 * j, q[0]);
            vst1q_s8(o->q + 256 * k + 32 * j + 16, q[1]);
        }
        sub_scales(T, w, o->sc + 16 * k, o->mn + 16 * k, o->d + k, o->dmin + k);
    }
}

/* A decoded row of a 32-element type's dot with one token: rule 5's s by
 * s_of8, eight blocks at a time (a last partial group's missing lanes +0,
 * as row32's). */
ALWAYS_INLINE float decoded_dot(int kind, const drow *o, size_t cols, const int8_t *x,
                                const int32_t *xh, const float *xd)
{
    const size_t nb = cols / 32;
    float32x4_t acc[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}, s[2];
    for (size_t g = 0; g < nb; g += 8) {
        const size_t m = nb - g < 8 ? nb - g : 8;
        int32x4_t hs[16];
        float32x4_t xdv[2];
        if (m == 8) {
            UNROLL
            for (int i = 0; i < 16; i++)
                hs[i] = dot16(vdupq_n_s32(0), vld1q_s8(o->q + 32 * g + 16 * i),
                              vld1q_s8(x + 32 * g + 16 * i));
            xdv[0] = vld1q_f32(xd + g), xdv[1] = vld1q_f32(xd + g + 4);
        } else {
            float xdl[8] = {0};
            for (size_t i = 0; i < 16; i++)
                hs[i] = i < 2 * m ? dot16(vdupq_n_s32(0), vld1q_s8(o->q + 32 * g + 16 * i),
                                          vld1q_s8(x + 32 * g + 16 * i))
                                  : vdupq_n_s32(0);
            for (size_t j = 0; j < m; j++)
                xdl[j] = xd[g + j];
            xdv[0] = vld1q_f32(xdl), xdv[1] = vld1q_f32(xdl + 4);
        }
        const float32x4_t d[2] = {vld1q_f32(o->d + g), vld1q_f32(o->d + g + 4)};
        const float32x4_t dmin[2] = {vld1q_f32(o->dmin + g), vld1q_f32(o->dmin + g + 4)};
        s_of8(kind, hs, xh + 2 * g, o->sc + 2 * g, o->mn + 2 * g, d, dmin, xdv, s);
        acc[0] = vaddq_f32(acc[0], s[0]);
        acc[1] = vaddq_f32(acc[1], s[1]);
    }
    return fold(acc[0], acc[1]);
}

/* A decoded row of a 256-element type's dot with one token: rule 6's s of
 * each super-block, as row256's. */
ALWAYS_INLINE float decoded_dot256(int kind, const drow *o, size_t cols, const int8_t *x,
                                   const int32_t *xh, const float *xd)
{
    float acc[8] = {0};
    for (size_t k = 0; k < cols / 256; k++) {
        const int8_t *q = o->q + 256 * k, *xk = x + 256 * k;
        int32x4_t hs[16];
        UNROLL
        for (int i = 0; i < 16; i++)
            hs[i] = dot16(vdupq_n_s32(0), vld1q_s8(q + 16 * i), vld1q_s8(xk + 16 * i));
        const int32_t isum = k_isum(hs, o->sc + 16 * k);
        const int32_t msum = kind == MINUS ? k_msum(xh + 16 * k, o->mn + 16 * k) : 0;
        acc[k % 8] += s_k(kind, isum, msum, o->d[k], o->dmin[k], xd[k]);
    }
    return ml__fold8(acc);
}

#define TOK_CHUNK 16 /* tokens per decoding of a row: their activations stay in L2 */

/* Rows [r0, r1) x n_tok tokens through decoded rows; 0 when out of
 * memory (nothing written). */
ALWAYS_INLINE int matmul_decoded(ml_type T, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                                 const int8_t *xq, const float *xd, size_t n_tok, float *y,
                                 size_t ldy)
{
    const int kind = kind_of(T), k_acts = ml__blk_acts_k(T);
    const size_t nb8 = (cols / 32 + 7) / 8 * 8, row_bytes = ml__blk_row_bytes(T, cols);
    const size_t per_tok = ml__blk_xd_count(T, cols);
    /* zeroed once: the padding after the row is never written */
    uint8_t *buf = calloc(1, 32 * nb8 + 4 * (2 * nb8) * (2 + TOK_CHUNK) + 4 * 2 * nb8);
    if (!buf)
        return 0;
    drow o;
    o.sc = (int32_t *)(void *)buf;
    o.mn = o.sc + 2 * nb8;
    int32_t *xh = o.mn + 2 * nb8; /* TOK_CHUNK tokens' half sums */
    o.d = (float *)(void *)(xh + 2 * nb8 * TOK_CHUNK);
    o.dmin = o.d + nb8;
    o.q = (int8_t *)(void *)(o.dmin + nb8);
    for (size_t t0 = 0; t0 < n_tok; t0 += TOK_CHUNK) {
        const size_t nt = n_tok - t0 < TOK_CHUNK ? n_tok - t0 : TOK_CHUNK;
        if (kind != PLAIN)
            for (size_t k = 0; k < nt; k++)
                half_sums(xq + (t0 + k) * cols, cols, xh + 2 * nb8 * k);
        for (size_t r = r0; r < r1; r++) {
            decode(T, w + r * row_bytes, cols, &o);
            for (size_t k = 0; k < nt; k++) {
                const int8_t *x = xq + (t0 + k) * cols;
                const int32_t *xhk = xh + 2 * nb8 * k;
                const float *xdk = xd + (t0 + k) * per_tok;
                y[(t0 + k) * ldy + r] = k_acts ? decoded_dot256(kind, &o, cols, x, xhk, xdk)
                                               : decoded_dot(kind, &o, cols, x, xhk, xdk);
            }
        }
    }
    free(buf);
    return 1;
}

/* ---- the entries ---- */

typedef float (*row_fn)(const uint8_t *w, size_t cols, const int8_t *x, const int32_t *xh,
                        const float *xd);
typedef int (*matmul_fn)(const uint8_t *w, size_t cols, size_t r0, size_t r1, const int8_t *xq,
                         const float *xd, size_t n_tok, float *y, size_t ldy);

/* One row function per type, each with its unpacking folded in, and for
 * the integer types one decoded matmul. */
#define ROW_OF(name, T, body)                                                                 \
    static float row_##name(const uint8_t *w, size_t cols, const int8_t *x, const int32_t *xh, \
                            const float *xd)                                                 \
    {                                                                                        \
        return body(T, w, cols, x, xh, xd);                                                  \
    }
#define MATMUL_OF(name, T)                                                                    \
    static int matmul_##name(const uint8_t *w, size_t cols, size_t r0, size_t r1,            \
                             const int8_t *xq, const float *xd, size_t n_tok, float *y,      \
                             size_t ldy)                                                     \
    {                                                                                        \
        return matmul_decoded(T, w, cols, r0, r1, xq, xd, n_tok, y, ldy);                    \
    }
#define INT_TYPE(name, T, body) ROW_OF(name, T, body) MATMUL_OF(name, T)
INT_TYPE(q4_1, ML_TYPE_Q4_1, row32)
INT_TYPE(q5_0, ML_TYPE_Q5_0, row32)
INT_TYPE(q5_1, ML_TYPE_Q5_1, row32)
INT_TYPE(iq4_nl, ML_TYPE_IQ4_NL, row32)
INT_TYPE(mxfp4, ML_TYPE_MXFP4, row32)
INT_TYPE(q2_k, ML_TYPE_Q2_K, row256)
INT_TYPE(q3_k, ML_TYPE_Q3_K, row256)
INT_TYPE(q4_k, ML_TYPE_Q4_K, row256)
INT_TYPE(q5_k, ML_TYPE_Q5_K, row256)
INT_TYPE(q6_k, ML_TYPE_Q6_K, row256)
INT_TYPE(iq4_xs, ML_TYPE_IQ4_XS, row256)
ROW_OF(f32, ML_TYPE_F32, row_floats)
ROW_OF(f16, ML_TYPE_F16, row_floats)
ROW_OF(bf16, ML_TYPE_BF16, row_floats)
#undef INT_TYPE
#undef MATMUL_OF
#undef ROW_OF

/* This file's functions for t: the row dot (NULL: the scalar reference
 * then) and the decoded matmul (NULL for the float types). */
static row_fn row_for(ml_type t, matmul_fn *mm)
{
#define CASE(T, name) \
    case T: *mm = matmul_##name; return row_##name;
    *mm = NULL;
    switch (t) {
    CASE(ML_TYPE_Q4_1, q4_1)
    CASE(ML_TYPE_Q5_0, q5_0)
    CASE(ML_TYPE_Q5_1, q5_1)
    CASE(ML_TYPE_IQ4_NL, iq4_nl)
    CASE(ML_TYPE_MXFP4, mxfp4)
    CASE(ML_TYPE_Q2_K, q2_k)
    CASE(ML_TYPE_Q3_K, q3_k)
    CASE(ML_TYPE_Q4_K, q4_k)
    CASE(ML_TYPE_Q5_K, q5_k)
    CASE(ML_TYPE_Q6_K, q6_k)
    CASE(ML_TYPE_IQ4_XS, iq4_xs)
    case ML_TYPE_F32: return row_f32;
    case ML_TYPE_F16: return row_f16;
    case ML_TYPE_BF16: return row_bf16;
    default: return NULL;
    }
#undef CASE
}

/* Rows longer than XS_COLS (none in practice) go to the reference: the
 * activation's half sums live on the stack. */
void BLK_NAME(ml__matvec_blk)(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                              const int8_t *xq, const float *xd, float *y)
{
    matmul_fn mm;
    const row_fn row = row_for(t, &mm);
    if (!row || cols > XS_COLS) {
        ml__matvec_blk_scalar(t, w, cols, r0, r1, xq, xd, y);
        return;
    }
    int32_t xh[XS_COLS / 16 + 16];
    half_sums(xq, cols, xh);
    const size_t row_bytes = ml__blk_row_bytes(t, cols);
    for (size_t r = r0; r < r1; r++)
        y[r] = row(w + r * row_bytes, cols, xq, xh, xd);
}

/* From two tokens on, the integer types decode each row once per chunk
 * of tokens (the unpacking is most of a dot's work); the float types, and
 * any call when out of memory, go a token at a time.  Every (token, row)
 * is matvec's dot either way: the same exact integer sums and float
 * steps. */
void BLK_NAME(ml__matmul_blk)(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                              const int8_t *xq, const float *xd, size_t n_tok, float *y,
                              size_t ldy)
{
    matmul_fn mm;
    if (!row_for(t, &mm) || cols > XS_COLS) {
        ml__matmul_blk_scalar(t, w, cols, r0, r1, xq, xd, n_tok, y, ldy);
        return;
    }
    if (mm && n_tok >= 2 && mm(w, cols, r0, r1, xq, xd, n_tok, y, ldy))
        return;
    for (size_t k = 0; k < n_tok; k++)
        BLK_NAME(ml__matvec_blk)(t, w, cols, r0, r1, xq + k * cols,
                                 xd + k * ml__blk_xd_count(t, cols), y + k * ldy);
}

/* Q5_0, IQ4_NL and MXFP4 as the spec's Q8_0: weights32's values are the
 * reference's int8 weights. */
ALWAYS_INLINE void as_q8_0(ml_type T, const uint8_t *b, size_t nb, int8_t *q, float *d)
{
    const size_t bytes = bytes32(T);
    for (size_t i = 0; i < nb; i++, b += bytes, q += 32) {
        int8x16_t v[2];
        weights32(T, b, v);
        vst1q_s8(q, v[0]);
        vst1q_s8(q + 16, v[1]);
        d[i] = T == ML_TYPE_MXFP4 ? e8m0_half(b[0]) : f16_at(b);
    }
}

int BLK_NAME(ml__blk_to_q8_0)(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                              int8_t *q, float *d)
{
    if (!ml__blk_as_q8_0(t))
        return 0;
    const size_t nb = (r1 - r0) * (cols / 32);
    const uint8_t *b = w + r0 * (cols / 32) * bytes32(t);
    switch (t) {
    case ML_TYPE_Q5_0: as_q8_0(ML_TYPE_Q5_0, b, nb, q, d); break;
    case ML_TYPE_IQ4_NL: as_q8_0(ML_TYPE_IQ4_NL, b, nb, q, d); break;
    default: as_q8_0(ML_TYPE_MXFP4, b, nb, q, d); break;
    }
    return 1;
}

#endif /* __aarch64__ */
