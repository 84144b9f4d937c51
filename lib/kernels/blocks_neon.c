/* blocks_neon.c - the block-type kernels (kernels.h's rule 5) for AArch64
 * NEON, bit-identical to blocks_scalar.c.  blocks_neondot.c compiles this
 * file again with NEON_DOTPROD, where the byte dot products are sdot.
 *
 * Every type's weights are unpacked to their signed integer values (all
 * of them fit in an int8: q5 - 16, q6 - 32, Q3_K's -4..3, the IQ4 and
 * MXFP4 levels, the unsigned quants below 64), so one signed byte dot
 * product serves all, with no offsets to take off afterwards.  A block's
 * (or half-block's) products land in an int32x4 of partial sums, exact;
 * pairwise adds gather eight blocks' sums into two vectors, lane j block
 * 8k + j, which is rule 3's acc[b % 8]: the float steps of rule 5 then
 * run on those lanes in the reference's order, with separate multiplies
 * and adds (-ffp-contract=off; no vfmaq, no vmlaq on floats).
 *
 * The 32-element types go eight blocks at a time; a last partial group
 * gives its missing lanes +0 (zero sums, zero scales), and adding +0 to
 * an accumulator that starts at +0 (so is never -0) changes nothing.
 * F32, F16 and BF16 compute each block's eight partials in two vectors
 * and fold them in plain C.
 *
 * matmul takes a weight row at a time and every token against it, so the
 * row is read from memory once (kernels_neon.c does the same for Q8_0). */
#include "kernels/kernels.h"

#if defined(__aarch64__)

#include "kernels/blocks_neon.h"
#include "mlcore.h"

#include <arm_neon.h>
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

/* Σ x over 16 elements (partials). */
ALWAYS_INLINE int32x4_t xsum16(const int8_t *x)
{
    return vpaddlq_s16(vpaddlq_s8(vld1q_s8(x)));
}

/* Σ x over 32 elements (partials). */
ALWAYS_INLINE int32x4_t xsum32(const int8_t *x)
{
    return vpaddlq_s16(vpadalq_s8(vpaddlq_s8(vld1q_s8(x)), vld1q_s8(x + 16)));
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

/* Sixteen int8 scales as four int32x4 in order. */
ALWAYS_INLINE void widen16(int8x16_t s, int32x4_t out[4])
{
    const int16x8_t lo = vmovl_s8(vget_low_s8(s)), hi = vmovl_high_s8(s);
    out[0] = vmovl_s16(vget_low_s16(lo)), out[1] = vmovl_high_s16(lo);
    out[2] = vmovl_s16(vget_low_s16(hi)), out[3] = vmovl_high_s16(hi);
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
    return T == ML_TYPE_Q4_1 ? 20 : T == ML_TYPE_Q5_0 ? 22 : T == ML_TYPE_Q5_1 ? 24
         : T == ML_TYPE_IQ4_NL ? 18 : 17;
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

ALWAYS_INLINE void group32(ml_type T, const uint8_t *w, size_t m, const int8_t *x, const float *xd,
                           float32x4_t s[2])
{
    const size_t bytes = bytes32(T);
    const int offset = T == ML_TYPE_Q4_1 || T == ML_TYPE_Q5_1;
    int32x4_t v[8], a[8], isum[2], asum[2];
    float xdl[8] = {0};
    UNROLL
    for (size_t j = 0; j < 8; j++) {
        v[j] = a[j] = vdupq_n_s32(0);
        if (j < m) {
            int8x16_t q[2];
            weights32(T, w + j * bytes, q);
            v[j] = dot32(q[0], q[1], x + 32 * j);
            if (offset)
                a[j] = xsum32(x + 32 * j);
            xdl[j] = xd[j];
        }
    }
    lanes8(v, isum);
    float32x4_t d[2], mn[2];
    if (T == ML_TYPE_MXFP4) {
        float e[8] = {0};
        for (size_t j = 0; j < m; j++)
            e[j] = e8m0_half(w[j * bytes]);
        d[0] = vld1q_f32(e), d[1] = vld1q_f32(e + 4);
    } else {
        f16_lanes(w, bytes, 0, m, d);
    }
    if (offset) {
        lanes8(a, asum);
        f16_lanes(w, bytes, 2, m, mn);
    }
    UNROLL
    for (int h = 0; h < 2; h++) {
        const float32x4_t xdv = vld1q_f32(xdl + 4 * h);
        s[h] = offset ? s_offset(isum[h], asum[h], d[h], mn[h], xdv) : s_plain(isum[h], d[h], xdv);
    }
}

/* ---- the 256-element types: s of one super-block ---- */

/* Sub-block j's 6-bit scale and min of Q4_K / Q5_K (blocks_scalar.c). */
ALWAYS_INLINE void k4_scales(const uint8_t *q, int32x4_t sc[2], int32x4_t mn[2])
{
    int32_t s[8], m[8];
    for (int j = 0; j < 4; j++) {
        s[j] = q[j] & 63, m[j] = q[j + 4] & 63;
        s[j + 4] = (q[j + 8] & 15) | (q[j] >> 6) << 4;
        m[j + 4] = (q[j + 8] >> 4) | (q[j + 4] >> 6) << 4;
    }
    sc[0] = vld1q_s32(s), sc[1] = vld1q_s32(s + 4);
    mn[0] = vld1q_s32(m), mn[1] = vld1q_s32(m + 4);
}

/* Q4_K and Q5_K: sub-block j the low (j even) or high nibbles of the 32
 * quant bytes j / 2; Q5_K's fifth bit bit j of qh[l]. */
ALWAYS_INLINE void sb_q45_k(int q5, const uint8_t *w, const int8_t *x, const float *xd,
                            float32x4_t s[2])
{
    const uint8_t *qs = w + (q5 ? 48 : 16);
    const uint8x16_t qh[2] = {vld1q_u8(w + 16), vld1q_u8(w + 32)};
    int32x4_t v[8], a[8], isum[2], asum[2], sc[2], mn[2];
    UNROLL
    for (int j = 0; j < 8; j++) {
        int8x16_t q[2];
        UNROLL
        for (int h = 0; h < 2; h++) {
            const uint8x16_t b = vld1q_u8(qs + 32 * (j / 2) + 16 * h);
            q[h] = j % 2 ? hi_nibbles(b) : lo_nibbles(b);
            if (q5) /* bit j to bit 4: a negative count shifts right */
                q[h] = vorrq_s8(q[h], vreinterpretq_s8_u8(vandq_u8(
                                          vshlq_u8(qh[h], vdupq_n_s8((int8_t)(4 - j))),
                                          vdupq_n_u8(16))));
        }
        v[j] = dot32(q[0], q[1], x + 32 * j);
        a[j] = xsum32(x + 32 * j);
    }
    lanes8(v, isum);
    lanes8(a, asum);
    k4_scales(w + 4, sc, mn);
    const float32x4_t d = vdupq_n_f32(f16_at(w)), dmin = vdupq_n_f32(f16_at(w + 2));
    UNROLL
    for (int h = 0; h < 2; h++)
        s[h] = s_min(vmulq_s32(sc[h], isum[h]), vmulq_s32(mn[h], asum[h]), d, dmin,
                     vld1q_f32(xd + 4 * h));
}

/* Q6_K: sub-block j = 4h + u, the nibbles of ql[64h + 32 (u % 2) ..]
 * (low for u < 2), bits 2u, 2u + 1 of qh[32h + l] above them, minus 32;
 * int8 scales per 16 elements. */
ALWAYS_INLINE void sb_q6_k(const uint8_t *w, const int8_t *x, const float *xd, float32x4_t s[2])
{
    int32x4_t hs[16], sc[4], isum[2];
    UNROLL
    for (int j = 0; j < 8; j++) {
        const int h = j / 4, u = j % 4;
        UNROLL
        for (int k = 0; k < 2; k++) {
            const uint8x16_t l = vld1q_u8(w + 64 * h + 32 * (u % 2) + 16 * k);
            const uint8x16_t qh = vld1q_u8(w + 128 + 32 * h + 16 * k);
            const int8x16_t lo = u < 2 ? lo_nibbles(l) : hi_nibbles(l);
            const uint8x16_t hi =
                vandq_u8(vshlq_u8(qh, vdupq_n_s8((int8_t)(4 - 2 * u))), vdupq_n_u8(0x30));
            const int8x16_t q = vsubq_s8(vorrq_s8(lo, vreinterpretq_s8_u8(hi)), vdupq_n_s8(32));
            hs[2 * j + k] = dot16(vdupq_n_s32(0), q, vld1q_s8(x + 32 * j + 16 * k));
        }
    }
    widen16(vld1q_s8((const int8_t *)(w + 192)), sc);
    halves_scaled(hs, sc, isum);
    const float32x4_t d = vdupq_n_f32(f16_at(w + 208));
    s[0] = s_plain(isum[0], d, vld1q_f32(xd));
    s[1] = s_plain(isum[1], d, vld1q_f32(xd + 4));
}

/* Q3_K's sixteen 6-bit scales minus 32 (blocks_scalar.c's q3_scales). */
ALWAYS_INLINE void q3_scales(const uint8_t *p, int32x4_t sc[4])
{
    int32_t s[16];
    for (int i = 0; i < 16; i++) {
        const int lo = i < 8 ? p[i] & 15 : p[i - 8] >> 4;
        const int hi = (p[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
        s[i] = (lo | hi << 4) - 32;
    }
    for (int i = 0; i < 4; i++)
        sc[i] = vld1q_s32(s + 4 * i);
}

/* Q3_K: block j = 4h + u, bits 2u, 2u + 1 of qs[32h + l], minus 4 where
 * bit j of hmask[l] is clear. */
ALWAYS_INLINE void sb_q3_k(const uint8_t *w, const int8_t *x, const float *xd, float32x4_t s[2])
{
    const uint8x16_t hm[2] = {vld1q_u8(w), vld1q_u8(w + 16)};
    int32x4_t hs[16], sc[4], isum[2];
    UNROLL
    for (int j = 0; j < 8; j++) {
        UNROLL
        for (int k = 0; k < 2; k++) {
            const uint8x16_t b = vld1q_u8(w + 32 + 32 * (j / 4) + 16 * k);
            const uint8x16_t q =
                vandq_u8(vshlq_u8(b, vdupq_n_s8((int8_t)(-2 * (j % 4)))), vdupq_n_u8(3));
            const uint8x16_t set = vtstq_u8(hm[k], vdupq_n_u8((uint8_t)(1u << j)));
            const uint8x16_t v = vsubq_u8(q, vbicq_u8(vdupq_n_u8(4), set)); /* wraps: -4..3 */
            hs[2 * j + k] =
                dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(v), vld1q_s8(x + 32 * j + 16 * k));
        }
    }
    q3_scales(w + 96, sc);
    halves_scaled(hs, sc, isum);
    const float32x4_t d = vdupq_n_f32(f16_at(w + 108));
    s[0] = s_plain(isum[0], d, vld1q_f32(xd));
    s[1] = s_plain(isum[1], d, vld1q_f32(xd + 4));
}

/* Q2_K: block j = 4h + u, bits 2u, 2u + 1 of qs[32h + l]; scale byte i
 * (half i): low nibble the scale, high the min. */
ALWAYS_INLINE void sb_q2_k(const uint8_t *w, const int8_t *x, const float *xd, float32x4_t s[2])
{
    int32x4_t hs[16], hx[16], sc[4], mn[4], isum[2], msum[2];
    UNROLL
    for (int j = 0; j < 8; j++) {
        UNROLL
        for (int k = 0; k < 2; k++) {
            const uint8x16_t b = vld1q_u8(w + 16 + 32 * (j / 4) + 16 * k);
            const uint8x16_t q =
                vandq_u8(vshlq_u8(b, vdupq_n_s8((int8_t)(-2 * (j % 4)))), vdupq_n_u8(3));
            hs[2 * j + k] =
                dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(q), vld1q_s8(x + 32 * j + 16 * k));
            hx[2 * j + k] = xsum16(x + 32 * j + 16 * k);
        }
    }
    const uint8x16_t sb = vld1q_u8(w);
    widen16(vreinterpretq_s8_u8(vandq_u8(sb, vdupq_n_u8(15))), sc);
    widen16(vreinterpretq_s8_u8(vshrq_n_u8(sb, 4)), mn);
    halves_scaled(hs, sc, isum);
    halves_scaled(hx, mn, msum);
    const float32x4_t d = vdupq_n_f32(f16_at(w + 80)), dmin = vdupq_n_f32(f16_at(w + 82));
    s[0] = s_min(isum[0], msum[0], d, dmin, vld1q_f32(xd));
    s[1] = s_min(isum[1], msum[1], d, dmin, vld1q_f32(xd + 4));
}

/* IQ4_XS: sub-block j IQ4_NL's 16 bytes at qs + 16j, its scale nibble j
 * of scales_l and bits 2j, 2j + 1 of scales_h, minus 32. */
ALWAYS_INLINE void sb_iq4_xs(const uint8_t *w, const int8_t *x, const float *xd,
                             float32x4_t s[2])
{
    const unsigned sh = (unsigned)(w[2] | w[3] << 8);
    int32x4_t v[8], isum[2];
    int32_t ls[8];
    UNROLL
    for (int j = 0; j < 8; j++) {
        const uint8x16_t q = vld1q_u8(w + 8 + 16 * j);
        v[j] = dot32(levels(iq4nl_values, lo_nibbles(q)), levels(iq4nl_values, hi_nibbles(q)),
                     x + 32 * j);
        ls[j] = (((w[4 + j / 2] >> (4 * (j % 2))) & 15) | (int32_t)((sh >> (2 * j)) & 3) << 4) - 32;
    }
    lanes8(v, isum);
    const float32x4_t d = vdupq_n_f32(f16_at(w));
    s[0] = s_plain(vmulq_s32(vld1q_s32(ls), isum[0]), d, vld1q_f32(xd));
    s[1] = s_plain(vmulq_s32(vld1q_s32(ls + 4), isum[1]), d, vld1q_f32(xd + 4));
}

/* ---- rows of the integer types ---- */

/* Rule 3's fold of the two accumulator vectors (lanes 0-3, 4-7). */
ALWAYS_INLINE float fold(float32x4_t lo, float32x4_t hi)
{
    float acc[8];
    vst1q_f32(acc, lo);
    vst1q_f32(acc + 4, hi);
    return ml__fold8(acc);
}

/* A row of a 32-element type: groups of eight blocks, the last partial. */
ALWAYS_INLINE float row32(ml_type T, const uint8_t *w, size_t cols, const int8_t *x,
                          const float *xd)
{
    const size_t nb = cols / 32, bytes = bytes32(T);
    float32x4_t acc[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}, s[2];
    for (size_t g = 0; g < nb; g += 8) {
        __builtin_prefetch(w + g * bytes + 1024);
        group32(T, w + g * bytes, nb - g < 8 ? nb - g : 8, x + 32 * g, xd + g, s);
        acc[0] = vaddq_f32(acc[0], s[0]);
        acc[1] = vaddq_f32(acc[1], s[1]);
    }
    return fold(acc[0], acc[1]);
}

/* A row of a 256-element type, super-block k's sub-block j in lane j. */
ALWAYS_INLINE float row256(ml_type T, const uint8_t *w, size_t cols, const int8_t *x,
                           const float *xd)
{
    const size_t bytes = T == ML_TYPE_Q4_K   ? 144
                         : T == ML_TYPE_Q5_K ? 176
                         : T == ML_TYPE_Q6_K ? 210
                         : T == ML_TYPE_Q3_K ? 110
                         : T == ML_TYPE_Q2_K ? 84
                                             : 136; /* IQ4_XS */
    float32x4_t acc[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}, s[2];
    for (size_t k = 0; k < cols / 256; k++, w += bytes, x += 256, xd += 8) {
        __builtin_prefetch(w + 1024);
        switch (T) {
        case ML_TYPE_Q4_K: sb_q45_k(0, w, x, xd, s); break;
        case ML_TYPE_Q5_K: sb_q45_k(1, w, x, xd, s); break;
        case ML_TYPE_Q6_K: sb_q6_k(w, x, xd, s); break;
        case ML_TYPE_Q3_K: sb_q3_k(w, x, xd, s); break;
        case ML_TYPE_Q2_K: sb_q2_k(w, x, xd, s); break;
        default: sb_iq4_xs(w, x, xd, s); break; /* IQ4_XS */
        }
        acc[0] = vaddq_f32(acc[0], s[0]);
        acc[1] = vaddq_f32(acc[1], s[1]);
    }
    return fold(acc[0], acc[1]);
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
                               const float *xd)
{
    const size_t bytes = T == ML_TYPE_F32 ? 128 : 64;
    float acc[8] = {0};
    for (size_t b = 0; b < cols / 32; b++)
        acc[b % 8] += float_block(T, w + b * bytes, x + 32 * b, xd[b]);
    return ml__fold8(acc);
}

/* ---- the entries ---- */

typedef float (*row_fn)(const uint8_t *w, size_t cols, const int8_t *x, const float *xd);

/* One function per type, each with its unpacking folded in. */
#define ROW_OF(name, T, body)                                                                   \
    static float row_##name(const uint8_t *w, size_t cols, const int8_t *x, const float *xd)   \
    {                                                                                          \
        return body(T, w, cols, x, xd);                                                        \
    }
ROW_OF(q4_1, ML_TYPE_Q4_1, row32)
ROW_OF(q5_0, ML_TYPE_Q5_0, row32)
ROW_OF(q5_1, ML_TYPE_Q5_1, row32)
ROW_OF(iq4_nl, ML_TYPE_IQ4_NL, row32)
ROW_OF(mxfp4, ML_TYPE_MXFP4, row32)
ROW_OF(q2_k, ML_TYPE_Q2_K, row256)
ROW_OF(q3_k, ML_TYPE_Q3_K, row256)
ROW_OF(q4_k, ML_TYPE_Q4_K, row256)
ROW_OF(q5_k, ML_TYPE_Q5_K, row256)
ROW_OF(q6_k, ML_TYPE_Q6_K, row256)
ROW_OF(iq4_xs, ML_TYPE_IQ4_XS, row256)
ROW_OF(f32, ML_TYPE_F32, row_floats)
ROW_OF(f16, ML_TYPE_F16, row_floats)
ROW_OF(bf16, ML_TYPE_BF16, row_floats)
#undef ROW_OF

/* This file's row dot for t, or NULL (the scalar reference then). */
static row_fn row_for(ml_type t)
{
    switch (t) {
    case ML_TYPE_Q4_1: return row_q4_1;
    case ML_TYPE_Q5_0: return row_q5_0;
    case ML_TYPE_Q5_1: return row_q5_1;
    case ML_TYPE_IQ4_NL: return row_iq4_nl;
    case ML_TYPE_MXFP4: return row_mxfp4;
    case ML_TYPE_Q2_K: return row_q2_k;
    case ML_TYPE_Q3_K: return row_q3_k;
    case ML_TYPE_Q4_K: return row_q4_k;
    case ML_TYPE_Q5_K: return row_q5_k;
    case ML_TYPE_Q6_K: return row_q6_k;
    case ML_TYPE_IQ4_XS: return row_iq4_xs;
    case ML_TYPE_F32: return row_f32;
    case ML_TYPE_F16: return row_f16;
    case ML_TYPE_BF16: return row_bf16;
    default: return NULL;
    }
}

void BLK_NAME(ml__matvec_blk)(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                              const int8_t *xq, const float *xd, float *y)
{
    const row_fn row = row_for(t);
    if (!row) {
        ml__matvec_blk_scalar(t, w, cols, r0, r1, xq, xd, y);
        return;
    }
    const size_t row_bytes = ml__blk_row_bytes(t, cols);
    for (size_t r = r0; r < r1; r++)
        y[r] = row(w + r * row_bytes, cols, xq, xd);
}

/* Rows outside, tokens inside: each (token, row) is matvec's dot. */
void BLK_NAME(ml__matmul_blk)(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                              const int8_t *xq, const float *xd, size_t n_tok, float *y,
                              size_t ldy)
{
    const row_fn row = row_for(t);
    if (!row) {
        ml__matmul_blk_scalar(t, w, cols, r0, r1, xq, xd, n_tok, y, ldy);
        return;
    }
    const size_t row_bytes = ml__blk_row_bytes(t, cols);
    for (size_t r = r0; r < r1; r++)
        for (size_t k = 0; k < n_tok; k++)
            y[k * ldy + r] = row(w + r * row_bytes, cols, xq + k * cols, xd + k * cols / 32);
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
