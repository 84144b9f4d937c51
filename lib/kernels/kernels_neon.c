/* kernels_neon.c - the kernels for 64-bit ARM with Advanced SIMD (NEON,
 * part of every AArch64 CPU), bit-identical to kernels_scalar.c by the
 * rules of kernels.h.
 *
 * Quantization does the spec's operations four lanes at a time: vmaxnm
 * ignores a NaN as the reference's "if (a > amax)" does, and vcvt
 * truncates toward zero and turns a NaN into 0, as the reference does by
 * hand.  A dot product computes each block's exact int32 sum with
 * widening multiplies (vmull_s8, at most 127·127 per 16-bit product) and
 * pairwise widening adds, then combines the blocks in plain C floats in
 * rule 3's order: that part is a few operations per 32 weights, and the
 * compiler is not allowed to fuse them (-ffp-contract=off).
 *
 * matmul takes a weight row at a time and all tokens against it, so the
 * row is read from memory once and from L1 for the other tokens.
 *
 * kernels_neondot.c compiles this file again with NEON_DOTPROD for CPUs
 * with the dot-product instructions (ARMv8.2 and later: sdot sums four
 * byte products into each int32 lane), chosen at run time from HWCAP. */
#include "kernels/kernels.h"

#if defined(__aarch64__)

#include "kernels/blocks_neon.h"
#include "kernels/fmath.h"
#include "mlcore.h"

#include <arm_neon.h>
#include <string.h>

/* ---- quantization ---- */

/* 32 floats at x, scaled by id, rounded as the spec says into q. */
static inline void round32(const float *x, float32x4_t id, int8_t *q)
{
    const float32x4_t sign = vreinterpretq_f32_u32(vdupq_n_u32(0x80000000u));
    const float32x4_t half = vdupq_n_f32(0.5f);
    int16x8_t h[4];
    for (int k = 0; k < 8; k += 2) {
        int32x4_t r[2];
        for (int i = 0; i < 2; i++) {
            const float32x4_t v = vld1q_f32(x + 4 * (k + i));
            /* x·id + copysign(0.5, x), truncated, clamped to ±127 */
            const float32x4_t hs = vreinterpretq_f32_u32(
                vorrq_u32(vandq_u32(vreinterpretq_u32_f32(v), vreinterpretq_u32_f32(sign)),
                          vreinterpretq_u32_f32(half)));
            const int32x4_t t = vcvtq_s32_f32(vaddq_f32(vmulq_f32(v, id), hs));
            r[i] = vmaxq_s32(vminq_s32(t, vdupq_n_s32(127)), vdupq_n_s32(-127));
        }
        h[k / 2] = vcombine_s16(vmovn_s32(r[0]), vmovn_s32(r[1]));
    }
    vst1q_s8(q, vcombine_s8(vmovn_s16(h[0]), vmovn_s16(h[1])));
    vst1q_s8(q + 16, vcombine_s8(vmovn_s16(h[2]), vmovn_s16(h[3])));
}

/* The spec's Q8_0 recipe over one scale's `len` floats (32, or 256 for
 * rule 6's K activations). */
static inline void quantize_span(const float *x, size_t len, int8_t *q, float *d)
{
    float32x4_t m = vdupq_n_f32(0.0f);
    for (size_t k = 0; k < len; k += 4)
        m = vmaxnmq_f32(m, vabsq_f32(vld1q_f32(x + k)));
    const float amax = vmaxnmvq_f32(m);
    if (amax < 1e-30f) {
        *d = 0.0f;
        memset(q, 0, len);
        return;
    }
    *d = amax / 127.0f;
    const float32x4_t id = vdupq_n_f32(127.0f / amax);
    for (size_t k = 0; k < len; k += 32)
        round32(x + k, id, q + k);
}

static void quantize_q8_0(const float *x, size_t n, int8_t *q, float *d)
{
    for (size_t b = 0; b < n / 32; b++)
        quantize_span(x + 32 * b, 32, q + 32 * b, d + b);
}

static void quantize_q8_k(const float *x, size_t n, int8_t *q, float *d)
{
    for (size_t b = 0; b < n / 256; b++)
        quantize_span(x + 256 * b, 256, q + 256 * b, d + b);
}

/* ---- block sums (exact int32) ---- */

/* Σ a·b over 16 signed bytes, added pairwise into acc's four lanes. */
static inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b)
{
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
}

#if defined(NEON_DOTPROD)
/* The same sums by sdot: exact int32 either way. */
static inline int32x4_t dot16_sdot(int32x4_t acc, int8x16_t a, int8x16_t b)
{
    return vdotq_s32(acc, a, b);
}
#define DOT16 dot16_sdot
#define BLK(x) x##_neondot
#define TABLE ml__kernels_neondot
#define TABLE_NAME "neondot"
#else
#define DOT16 dot16
#define BLK(x) x##_neon
#define TABLE ml__kernels_neon
#define TABLE_NAME "neon"
#endif

static inline int32_t block_q8(const int8_t *w, const int8_t *x)
{
    int32x4_t acc = DOT16(vdupq_n_s32(0), vld1q_s8(w), vld1q_s8(x));
    acc = DOT16(acc, vld1q_s8(w + 16), vld1q_s8(x + 16));
    return vaddvq_s32(acc);
}

/* Byte j: element j in the low nibble, j + 16 in the high one, minus 8. */
static inline int32_t block_q4(const uint8_t *w, const int8_t *x)
{
    const uint8x16_t b = vld1q_u8(w);
    const int8x16_t eight = vdupq_n_s8(8);
    const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(15))), eight);
    const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(b, 4)), eight);
    return vaddvq_s32(DOT16(DOT16(vdupq_n_s32(0), lo, vld1q_s8(x)), hi, vld1q_s8(x + 16)));
}

/* ---- rows, by rule 3 (ml__wscale, ml__fold8: kernels.h) ---- */

static float row_q8(const int8_t *wq, ml_wscales wd, size_t cols, size_t r, const int8_t *x,
                    const float *xd)
{
    const size_t nb = cols / 32;
    const int8_t *w = wq + r * cols;
    float acc[8] = {0};
    for (size_t b = 0; b < nb; b++) {
        __builtin_prefetch(w + 32 * b + 1024);
        acc[b % 8] += (float)block_q8(w + 32 * b, x + 32 * b) *
                      (ml__wscale(wd, r * nb + b) * xd[b]);
    }
    return ml__fold8(acc);
}

static float row_q4(const uint8_t *wq, ml_wscales wd, size_t cols, size_t r, const int8_t *x,
                    const float *xd)
{
    const size_t nb = cols / 32;
    const uint8_t *w = wq + r * (cols / 2);
    float acc[8] = {0};
    for (size_t b = 0; b < nb; b++) {
        __builtin_prefetch(w + 16 * b + 1024);
        acc[b % 8] += (float)block_q4(w + 16 * b, x + 32 * b) *
                      (ml__wscale(wd, r * nb + b) * xd[b]);
    }
    return ml__fold8(acc);
}

static void matvec_q8_0(const int8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, float *y)
{
    for (size_t r = r0; r < r1; r++)
        y[r] = row_q8(wq, wd, cols, r, xq, xd);
}

static void matvec_q4_0(const uint8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, float *y)
{
    for (size_t r = r0; r < r1; r++)
        y[r] = row_q4(wq, wd, cols, r, xq, xd);
}

static void matmul_q8_0(const int8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, size_t n_tok, float *y, size_t ldy)
{
    const size_t nb = cols / 32;
    for (size_t r = r0; r < r1; r++)
        for (size_t t = 0; t < n_tok; t++)
            y[t * ldy + r] = row_q8(wq, wd, cols, r, xq + t * cols, xd + t * nb);
}

static void matmul_q4_0(const uint8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, size_t n_tok, float *y, size_t ldy)
{
    const size_t nb = cols / 32;
    for (size_t r = r0; r < r1; r++)
        for (size_t t = 0; t < n_tok; t++)
            y[t * ldy + r] = row_q4(wq, wd, cols, r, xq + t * cols, xd + t * nb);
}

extern const ml_kernels TABLE;
const ml_kernels TABLE = {
    .name = TABLE_NAME,
    /* No NEON fmath yet: attention's float products run the scalar
     * reference (fmath_scalar.c) beside both NEON tables, said here rather than
     * by a silent fallback in the choice. */
    .fmath = &ml__fmath_scalar,
    .quantize_q8_0 = quantize_q8_0,
    .quantize_q8_k = quantize_q8_k,
    .matvec_q8_0 = matvec_q8_0,
    .matvec_q4_0 = matvec_q4_0,
    .matmul_q8_0 = matmul_q8_0,
    .matmul_q4_0 = matmul_q4_0,
    /* the block types: blocks_neon.c (blocks_neondot.c) */
    .matvec_blk = BLK(ml__matvec_blk),
    .matmul_blk = BLK(ml__matmul_blk),
    .blk_to_q8_0 = BLK(ml__blk_to_q8_0),
};

#endif /* __aarch64__ */
