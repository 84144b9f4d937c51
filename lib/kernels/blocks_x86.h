/* blocks_x86.h - private: the x86 block-type kernels (kernels.h's rules 5
 * and 6), compiled once for AVX2 (blocks_avx2.c) and once for AVX-512
 * VNNI (blocks_avx512.c, where the unsigned-by-signed byte dot products
 * are one vpdpbusd).  Bit-identical to blocks_scalar.c: the integer sums
 * are exact whatever instructions make them, and the float operations
 * per lane are the reference's, in its order.  Rule 5's types put eight
 * consecutive blocks in the eight lanes of one vector (lane j = block
 * 8g+j, rule 3's acc[b % 8]); rule 6's sum a super-block's integers
 * first (sc_j·isum_j and m_j·asum_j over its sub-blocks, in int32) and
 * put eight super-blocks in the lanes (lane j = super-block 8g+j) for
 * the one float step each.
 *
 * The activation's per-block sums (Σ xq, for the mins and the offsets of
 * unsigned quants) are the same for every row: they are computed once
 * per call (a token) into xsums, on the stack for rows up to XS_COLS;
 * longer rows go to the scalar reference (same bits).  Types without
 * code here go there too.
 *
 * The includer defines BLK_NAME(x) (the exported names' suffix). */
#ifndef ML_BLOCKS_X86_H
#define ML_BLOCKS_X86_H

#include "kernels/kernels.h"
#include "kernels/kernels_x86.h"

#include "mlcore.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define XS_COLS 32768 /* the longest row with its sums on the stack (16 KiB) */

#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define HAVE_VNNI 1
#else
#define HAVE_VNNI 0
#endif

/* Lane i: Σ of bytes 4i..4i+3 of u (unsigned; below 128 without VNNI,
 * where vpmaddubsw's pairs must not saturate) times x (signed). */
ALWAYS_INLINE __m256i dot_u8s8(__m256i u, __m256i x)
{
#if HAVE_VNNI
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, x);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), _mm256_set1_epi16(1));
#endif
}

/* dot_u8s8(a, xa) + dot_u8s8(b, xb): with VNNI one chain of two
 * vpdpbusd. */
ALWAYS_INLINE __m256i dot2_u8s8(__m256i a, __m256i xa, __m256i b, __m256i xb)
{
#if HAVE_VNNI
    return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), a, xa), b, xb);
#else
    return _mm256_add_epi32(dot_u8s8(a, xa), dot_u8s8(b, xb));
#endif
}

ALWAYS_INLINE __m256i load256(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

ALWAYS_INLINE float f16_at(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* The activation's sums: s32[b] = Σ xq over block b, s16[2b + h] over
 * its half h (Q6_K's and Q3_K's 16-element scales). */
typedef struct xsums {
    int32_t s32[XS_COLS / 32 + 8]; /* + a partial group's zeros */
    int16_t s32_i16[XS_COLS / 32 + 8]; /* s32 as int16 (|s| <= 32·128), the same zeros */
    int16_t s16[XS_COLS / 16];
    /* x regrouped over the row's whole groups of eight blocks: x_pairs's
     * layout (Q4_K, Q5_K, IQ4_XS) or x_spread's (row_32's nibble types),
     * or NULL */
    const int8_t *paired;
} xsums;

/* x regrouped for pair_dot and sums_iq4_xs, so that one 32-byte load of
 * two blocks' nibbles (low nibbles, then high ones) meets its
 * activations lane for lane with no shuffle of the weights: in each span
 * of 2·d elements, for k < d / 32, elements 0-15 of block k, 0-15 of
 * block k + d / 32, 16-31 of k, 16-31 of k + d / 32.  x_pairs (d = 32):
 * consecutive blocks, the K types' sub-blocks 2p and 2p + 1.  x_spread
 * (d = 128): blocks k and k + 4 of a group of eight, row_32's nibble
 * types, whose hsum_pairs then leaves block j's sum in lane j with no
 * lane permute.  The whole spans of cols. */
static void x_regroup(int8_t *xp, const int8_t *x, size_t cols, size_t d)
{
    for (size_t s = 0; s + 2 * d <= cols; s += 2 * d)
        for (size_t k = 0; k < d / 32; k++) {
            const __m256i a = load256(x + s + 32 * k), c = load256(x + s + 32 * k + d);
            _mm256_storeu_si256((__m256i *)(xp + s + 64 * k), _mm256_permute2x128_si256(a, c, 0x20));
            _mm256_storeu_si256((__m256i *)(xp + s + 64 * k + 32), _mm256_permute2x128_si256(a, c, 0x31));
        }
}
#define X_PAIRS_D 32
#define X_SPREAD_D 128

static void xsums_init(xsums *xs, const int8_t *x, size_t cols, int halves)
{
    const __m256i ones = _mm256_set1_epi8(1);
    xs->paired = NULL; /* the callers that use x_pairs or x_spread set it */
    /* a partial group of eight blocks reads zeros after the row's end */
    memset(xs->s32 + cols / 32 / 8 * 8, 0, 8 * sizeof xs->s32[0]);
    memset(xs->s32_i16 + cols / 32 / 8 * 8, 0, 8 * sizeof xs->s32_i16[0]);
    for (size_t b = 0; b < cols / 32; b++) {
        /* 1·x pairs: 16 int16 lanes, 0-7 the first half */
        const __m256i p = _mm256_maddubs_epi16(ones, load256(x + 32 * b));
        const __m256i q = _mm256_madd_epi16(p, _mm256_set1_epi16(1));
        const __m128i h = _mm_add_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
        __m128i s = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
        s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
        xs->s32[b] = _mm_cvtsi128_si32(s);
        xs->s32_i16[b] = (int16_t)xs->s32[b];
        if (halves) {
            __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
            lo = _mm_add_epi32(lo, _mm_shuffle_epi32(lo, 0x4e));
            lo = _mm_add_epi32(lo, _mm_shuffle_epi32(lo, 0xb1));
            hi = _mm_add_epi32(hi, _mm_shuffle_epi32(hi, 0x4e));
            hi = _mm_add_epi32(hi, _mm_shuffle_epi32(hi, 0xb1));
            xs->s16[2 * b] = (int16_t)_mm_cvtsi128_si32(lo);
            xs->s16[2 * b + 1] = (int16_t)_mm_cvtsi128_si32(hi);
        }
    }
}

/* ---- the 256-element types (rule 6): one super-block's integer sums ----
 *
 * Each sums_* below gives, for one super-block, two vectors whose lanes
 * add up to its isum and msum (Q2_K, Q3_K: lane j sub-block j's
 * sc_j·isum_j, m_j·asum_j; Q4_K, Q5_K, Q6_K, IQ4_XS: the sub-blocks'
 * scaled partial sums added lane by lane, and for Q4_K and Q5_K m_j·asum_j
 * in lane j; msum +0 where the type has no mins).  row_k (after IQ4_XS)
 * adds the lanes of eight super-blocks at once (hsum8x8: lane j =
 * super-block 8g + j, rule 3's acc[k % 8]) and takes the one float step
 * per lane.  The sums are exact integers, so any order gives the
 * reference's. */

/* ---- Q4_K ---- */

/* The 6-bit scales (bytes 0-7) and mins (8-15) of a Q4_K / Q5_K block in
 * order, from its 12 packed bytes at q (ggml's kmask unpacking) as four
 * dwords of the packed ones a, b, c: a & 63, (c & 15) | (a >> 6) << 4,
 * b & 63, (c >> 4) | (b >> 6) << 4.  The 16-byte load reads 4 bytes of
 * the quants after the scales (every such block has them). */
ALWAYS_INLINE __m128i k4_scales_mins8(const uint8_t *q)
{
    const __m128i v = _mm_loadu_si128((const __m128i *)q);
    const __m128i acbc = _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0));
    const __m128i aabb = _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0));
    const __m128i low = _mm_and_si128(_mm_srlv_epi32(acbc, _mm_setr_epi32(0, 0, 0, 4)),
                                      _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    const __m128i top = _mm_and_si128(_mm_srli_epi32(aabb, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
    return _mm_or_si128(low, top);
}

/* The same as 32-bit lanes: sc[j], mn[j] lane j. */
ALWAYS_INLINE void k4_scales_mins(const uint8_t *q, __m256i *sc, __m256i *mn)
{
    const __m128i v = k4_scales_mins8(q);
    *sc = _mm256_cvtepu8_epi32(v);
    *mn = _mm256_cvtepu8_epi32(_mm_srli_si128(v, 8));
}

/* acc + the 16-bit lanes of p times those of s, pair by pair (exact). */
ALWAYS_INLINE __m256i madd16_acc(__m256i acc, __m256i p, __m256i s)
{
#if HAVE_VNNI
    return _mm256_dpwssd_epi32(acc, p, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, s));
#endif
}

/* The byte shuffle that spreads 16-bit lane 2k over the first 128-bit
 * lane and lane 2k + 1 over the second (both lanes holding the same
 * eight). */
ALWAYS_INLINE __m256i spread_halves(int k)
{
    const short a = (short)(4 * k | (4 * k + 1) << 8), b = (short)((4 * k + 2) | (4 * k + 3) << 8);
    return _mm256_setr_epi16(a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b);
}

/* m_j·asum_j in lane j from the mins (bytes 8-15 of sm) and the
 * sub-blocks' activation sums: vpmaddwd of the 32-bit lanes is exact, as
 * each mins lane's upper half is 0 and |asum| < 2^15 (32·128). */
ALWAYS_INLINE __m256i k4_mins(__m128i sm, const int32_t *asum)
{
    return _mm256_madd_epi16(_mm256_cvtepu8_epi32(_mm_srli_si128(sm, 8)),
                             _mm256_loadu_si256((const __m256i *)asum));
}

/* a | (b & m), as one vpternlogd where AVX-512VL has it: the quants'
 * high bits put beside their nibbles with one instruction, not two. */
ALWAYS_INLINE __m256i or_and(__m256i a, __m256i b, __m256i m)
{
#if HAVE_VNNI
    return _mm256_ternarylogic_epi32(a, b, m, 0xF8); /* A | (B & C) */
#else
    return _mm256_or_si256(a, _mm256_and_si256(b, m));
#endif
}

/* Pair g of Q4_K's or Q5_K's super-block w (sub-blocks 2g and 2g + 1) for
 * x_pairs's form of the activations: *a elements 0-15 of sub-block 2g
 * (low 128 bits) and of 2g + 1 (high), *b elements 16-31 alike.  The 16
 * bytes of a half's nibbles go to both 128-bit lanes, the high lane's
 * shifted down by 4; Q5_K's fifth bits, bit 2g (2g + 1) of qh[l], are
 * moved to bit 4 the same way, each lane by its own count (no bit
 * crosses into the masked one). */
ALWAYS_INLINE void k45_pair_quants(ml_type T, const uint8_t *w, int g, __m256i *a, __m256i *b)
{
    const __m256i low = _mm256_set1_epi8(15), nib = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);
    const uint8_t *qs = w + (T == ML_TYPE_Q5_K ? 48 : 16) + 32 * g;
    *a = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs)), nib), low);
    *b = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(qs + 16))), nib),
        low);
    if (T != ML_TYPE_Q5_K)
        return;
    const __m256i bit = _mm256_set1_epi8(16);
    const __m256i ha = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(w + 16)));
    const __m256i hb = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(w + 32)));
    const int lo = 2 * g, hi = 2 * g + 1; /* the bits of the two lanes' sub-blocks */
    __m256i sa, sb; /* ha, hb with the two lanes' bits at bit 4 */
    if (g < 2) {
        const __m256i n = _mm256_setr_epi32(4 - lo, 4 - lo, 4 - lo, 4 - lo, 4 - hi, 4 - hi, 4 - hi, 4 - hi);
        sa = _mm256_sllv_epi32(ha, n), sb = _mm256_sllv_epi32(hb, n);
    } else {
        const __m256i n = _mm256_setr_epi32(lo - 4, lo - 4, lo - 4, lo - 4, hi - 4, hi - 4, hi - 4, hi - 4);
        sa = _mm256_srlv_epi32(ha, n), sb = _mm256_srlv_epi32(hb, n);
    }
    *a = or_and(*a, sa, bit);
    *b = or_and(*b, sb, bit);
}

/* The byte shuffle that spreads, for packs of pairs 2k and 2k + 1, 16-bit
 * lanes 4k and 4k + 2 over the low 128-bit lane (four each) and 4k + 1
 * and 4k + 3 over the high one: the scales of the sub-blocks there. */
ALWAYS_INLINE __m256i spread_quad(int k)
{
    const short a = (short)(8 * k | (8 * k + 1) << 8), b = (short)((8 * k + 2) | (8 * k + 3) << 8);
    const short c = (short)((8 * k + 4) | (8 * k + 5) << 8), d = (short)((8 * k + 6) | (8 * k + 7) << 8);
    return _mm256_setr_epi16(a, a, a, a, c, c, c, c, b, b, b, b, d, d, d, d);
}

/* Q4_K's or Q5_K's super-block unpacked for x_pairs's form of the
 * activations: a[g], b[g] pair g's quants (k45_pair_quants), s[0], s[1]
 * the scales spread for the packed pairs (spread_quad), sm the scales
 * and mins (k4_scales_mins8). */
typedef struct k45_unpacked {
    __m256i a[4], b[4], s[2];
    __m128i sm;
} k45_unpacked;

ALWAYS_INLINE void k45_quants(ml_type T, const uint8_t *w, k45_unpacked *u)
{
    UNROLL
    for (int g = 0; g < 4; g++)
        k45_pair_quants(T, w, g, &u->a[g], &u->b[g]);
}

ALWAYS_INLINE void k45_unpack(ml_type T, const uint8_t *w, k45_unpacked *u)
{
    k45_quants(T, w, u);
    u->sm = k4_scales_mins8(w + 4);
    const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(u->sm));
    u->s[0] = _mm256_shuffle_epi8(sc, spread_quad(0));
    u->s[1] = _mm256_shuffle_epi8(sc, spread_quad(1));
}

/* Rule 6's Q4_K / Q5_K lanes of an unpacked super-block against xp, its
 * 256 activations in x_pairs's form (asum: their sub-blocks' sums):
 * lanes adding up to Σ_j sc_j·isum_j (*is) and m_j·asum_j in lane j
 * (*ms); row_k needs only each vector's total.  A pair's two byte dot
 * products leave sub-block 2g's partial sums in lanes 0-3 and 2g + 1's
 * in 4-7, each below 2^15 in magnitude (8·31·127), so two pairs pack
 * exactly into one register's 16-bit lanes and one vpmaddwd scales four
 * sub-blocks: half the accumulators, packs and multiply-adds of one
 * sub-block a register. */
ALWAYS_INLINE __m256i k45_isum(const k45_unpacked *u, const __m256i s[2], const int8_t *xp)
{
    __m256i v[4];
    UNROLL
    for (int g = 0; g < 4; g++)
        v[g] = dot2_u8s8(u->a[g], load256(xp + 64 * g), u->b[g], load256(xp + 64 * g + 32));
    const __m256i acc = madd16_acc(_mm256_setzero_si256(), _mm256_packs_epi32(v[0], v[1]), s[0]);
    return madd16_acc(acc, _mm256_packs_epi32(v[2], v[3]), s[1]);
}

ALWAYS_INLINE void k45_sums(const k45_unpacked *u, const int8_t *xp, const int32_t *asum,
                            __m256i *is, __m256i *ms)
{
    *is = k45_isum(u, u->s, xp);
    *ms = k4_mins(u->sm, asum);
}

ALWAYS_INLINE void sums_q45_k(ml_type T, const uint8_t *w, const int8_t *xp, const int32_t *asum,
                              __m256i *is, __m256i *ms)
{
    prefetch_ahead_l2(w, PREFETCH_K, 3);
    k45_unpacked u;
    k45_unpack(T, w, &u);
    k45_sums(&u, xp, asum, is, ms);
}

#if HAVE_VNNI
/* The vpermw index that gives spread_quad(k)'s lanes from scales in
 * 16-bit lanes o..o + 7. */
ALWAYS_INLINE __m256i quad_index(int k, short o)
{
    const short a = (short)(o + 4 * k), b = (short)(a + 1), c = (short)(a + 2), d = (short)(a + 3);
    return _mm256_setr_epi16(a, a, a, a, c, c, c, c, b, b, b, b, d, d, d, d);
}

/* The scales and mins of two Q4_K / Q5_K super-blocks unpacked at once,
 * a's 12 packed bytes at qa in the low 128-bit lane and b's at qb (NULL:
 * none, zeros) in the high one, by k4_scales_mins8's steps: half its
 * instructions a super-block.  s[0][k], s[1][k]: a's and b's scales as
 * k45_unpack's s[k] (picked by vpermw across the lanes); *ms: a's
 * m_j·asum_j summed in pairs in lanes 0-3, b's in 4-7, from asum, the
 * sixteen sub-block sums of their activations as int16, a's in the low
 * lane (vpmaddwd: exact). */
ALWAYS_INLINE void k45_scales_two(const uint8_t *qa, const uint8_t *qb, __m256i asum,
                                  __m256i s[2][2], __m256i *ms)
{
    const __m128i b = qb ? _mm_loadu_si128((const __m128i *)qb) : _mm_setzero_si128();
    const __m256i v =
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)qa)), b, 1);
    const __m256i acbc = _mm256_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0));
    const __m256i aabb = _mm256_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0));
    const int m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x30303030;
    const __m256i low = _mm256_and_si256(_mm256_srlv_epi32(acbc, _mm256_setr_epi32(0, 0, 0, 4, 0, 0, 0, 4)),
                                         _mm256_setr_epi32(m6, m4, m6, m4, m6, m4, m6, m4));
    const __m256i sm = or_and(low, _mm256_srli_epi32(aabb, 2), _mm256_setr_epi32(0, m2, 0, m2, 0, m2, 0, m2));
    const __m256i zero = _mm256_setzero_si256(), sc = _mm256_unpacklo_epi8(sm, zero);
    UNROLL
    for (int h = 0; h < 2; h++) {
        UNROLL
        for (int k = 0; k < 2; k++)
            s[h][k] = _mm256_permutexvar_epi16(quad_index(k, (short)(8 * h)), sc);
    }
    *ms = _mm256_madd_epi16(_mm256_unpackhi_epi8(sm, zero), asum);
}

/* Lane p = the sum of lanes 0-3 of v[p], lane 4 + p that of its lanes
 * 4-7 (hsum8x8 for k45_scales_two's mins: v[p] holds two super-blocks'). */
ALWAYS_INLINE __m256i hsum4x2(const __m256i v[4])
{
    __m256i a[2];
    UNROLL
    for (int i = 0; i < 2; i++)
        a[i] = _mm256_add_epi32(_mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]),
                                _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
    return _mm256_add_epi32(_mm256_unpacklo_epi64(a[0], a[1]), _mm256_unpackhi_epi64(a[0], a[1]));
}

/* row_k's group of m Q4_K or Q5_K super-blocks at wg (xp, asum: their
 * activations in x_pairs's form and sub-block sums as int16): is[j] as
 * sums_k gives, *msum lane j super-block j's Σ m·asum, with the scales
 * and mins unpacked two super-blocks at a time. */
ALWAYS_INLINE void group_q45_k(ml_type T, const uint8_t *wg, size_t m, const int8_t *xp,
                               const int16_t *asum, __m256i is[8], __m256i *msum)
{
    const size_t bytes = ml__blk_k_bytes(T);
    __m256i ms[4];
    UNROLL
    for (size_t j = 0; j < 8; j += 2) {
        is[j] = is[j + 1] = ms[j / 2] = _mm256_setzero_si256();
        if (j >= m)
            continue;
        const uint8_t *w = wg + j * bytes;
        __m256i s[2][2];
        k45_scales_two(w + 4, j + 1 < m ? w + bytes + 4 : NULL, load256(asum + 8 * j), s,
                       &ms[j / 2]);
        UNROLL
        for (size_t h = 0; h < 2; h++) {
            if (j + h < m) {
                prefetch_ahead_l2(w + h * bytes, PREFETCH_K, 3);
                k45_unpacked u;
                k45_quants(T, w + h * bytes, &u);
                is[j + h] = k45_isum(&u, s[h], xp + 256 * (j + h));
            }
        }
    }
    /* hsum4x2 leaves super-blocks 0, 2, 4, 6 in lanes 0-3, 1, 3, 5, 7 in 4-7 */
    *msum = _mm256_permutevar8x32_epi32(hsum4x2(ms), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* A pair's super-blocks for Q4_K and Q5_K (pair_k_sums): row a's (at w) k in is[k],
 * row b's (w + row_bytes) in is[4 + k], *msum lane k and 4 + k their
 * Σ m·asum; a's and b's super-block k unpack their scales and mins
 * together (k45_scales_two), against the same activations. */
ALWAYS_INLINE void pair_q45_k(ml_type T, const uint8_t *w, size_t row_bytes, size_t nsb,
                              const xsums *xs, __m256i is[8], __m256i *msum)
{
    const size_t bytes = ml__blk_k_bytes(T);
    __m256i ms[4];
    UNROLL
    for (size_t k = 0; k < 4; k++) {
        is[k] = is[4 + k] = ms[k] = _mm256_setzero_si256();
        if (k >= nsb)
            continue;
        const uint8_t *wa = w + k * bytes, *wb = wa + row_bytes;
        __m256i s[2][2];
        k45_scales_two(wa + 4, wb + 4,
                       _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(xs->s32_i16 + 8 * k))),
                       s, &ms[k]);
        UNROLL
        for (size_t h = 0; h < 2; h++) {
            const uint8_t *b = h ? wb : wa;
            prefetch_ahead_l2(b, PREFETCH_K, 3);
            k45_unpacked u;
            k45_quants(T, b, &u);
            is[4 * h + k] = k45_isum(&u, s[h], xs->paired + 256 * k);
        }
    }
    *msum = hsum4x2(ms);
}
#endif

/* ---- Q6_K ---- */

/* Sub-block j's Σ sc·q6u·x over both halves: the unsigned byte products
 * in 16-bit pairs (at most 2·63·127), then vpmaddwd with the halves'
 * scales s (lanes 0-7 the first half's, 8-15 the second's). */
ALWAYS_INLINE __m256i q6_scaled(__m256i q, const int8_t *x, __m256i s)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(q, load256(x)), s);
}

#if HAVE_VNNI
/* Sub-block j's unsigned quants q against x, four products a lane
 * (lanes 0-3 its first half, 4-7 its second). */
ALWAYS_INLINE __m256i q6_quads(__m256i q, const int8_t *x)
{
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), q, load256(x));
}
#endif

/* A Q6_K super-block unpacked: q[j] sub-block j's 32 unsigned quants
 * (q6 without the -32), s[j] the scales its halves' 16-bit pairs take in
 * q6_scaled (with VNNI: s[j], j even, those of sub-blocks j and j + 1
 * packed by q6_sums), sc16 the sixteen scales as 16-bit lanes. */
typedef struct q6_unpacked {
    __m256i q[8], s[8], sc16;
} q6_unpacked;

ALWAYS_INLINE void q6_unpack(const uint8_t *w, q6_unpacked *u)
{
    const __m256i low = _mm256_set1_epi8(15), two = _mm256_set1_epi8(3 << 4);
    u->sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + 192)));
#if !HAVE_VNNI
    /* scales 0-7 (8-15) in both 128-bit lanes, whence spread_halves
     * takes each sub-block's two */
    const __m256i scs[2] = {_mm256_permute2x128_si256(u->sc16, u->sc16, 0x00),
                            _mm256_permute2x128_si256(u->sc16, u->sc16, 0x11)};
#endif
    UNROLL
    for (int h = 0; h < 2; h++) {
        const __m256i l0 = load256(w + 64 * h), l1 = load256(w + 64 * h + 32);
        const __m256i qh = load256(w + 128 + 32 * h);
        /* the nibbles, and bits 2u, 2u+1 of qh at bits 4, 5 */
        const __m256i n0 = _mm256_and_si256(l0, low), n1 = _mm256_and_si256(l1, low);
        const __m256i n2 = _mm256_and_si256(_mm256_srli_epi16(l0, 4), low);
        const __m256i n3 = _mm256_and_si256(_mm256_srli_epi16(l1, 4), low);
        const __m256i q0 = or_and(n0, _mm256_slli_epi16(qh, 4), two);
        const __m256i q1 = or_and(n1, _mm256_slli_epi16(qh, 2), two);
        const __m256i q2 = or_and(n2, qh, two);
        const __m256i q3 = or_and(n3, _mm256_srli_epi16(qh, 2), two);
        u->q[4 * h] = q0, u->q[4 * h + 1] = q1, u->q[4 * h + 2] = q2, u->q[4 * h + 3] = q3;
#if HAVE_VNNI
        /* q6_sums packs sub-blocks i and i + 1: their four halves' scales,
         * picked across the lanes by one vpermw */
        UNROLL
        for (int i = 0; i < 4; i += 2)
            u->s[4 * h + i] = _mm256_permutexvar_epi16(quad_index(i / 2, (short)(8 * h)), u->sc16);
#else
        UNROLL
        for (int i = 0; i < 4; i++)
            u->s[4 * h + i] = _mm256_shuffle_epi8(scs[h], spread_halves(i));
#endif
    }
}

/* An unpacked Q6_K super-block against x; a16: x's sixteen half sums. */
ALWAYS_INLINE void q6_sums(const q6_unpacked *u, const int8_t *x, const int16_t *a16, __m256i *is)
{
    /* Σ sc·q6u·x - 32 Σ sc·asum, exact; row_k needs only the lanes'
     * total, so the sub-blocks are added lane by lane, not transposed */
    const __m256i corr = _mm256_slli_epi32(
        _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a16), u->sc16), 5);
#if HAVE_VNNI
    /* vpdpbusd sums each sub-block's products four at a time, at most
     * 4·63·128 in magnitude, so two sub-blocks pack exactly into one
     * register's 16-bit lanes (as k45_sums) and one vpdpwssd scales and
     * adds four halves: two chains of two */
    __m256i e = _mm256_setzero_si256(), o = _mm256_setzero_si256();
    UNROLL
    for (int j = 0; j < 8; j += 4) {
        e = _mm256_dpwssd_epi32(e, _mm256_packs_epi32(q6_quads(u->q[j], x + 32 * j),
                                                      q6_quads(u->q[j + 1], x + 32 * j + 32)),
                                u->s[j]);
        o = _mm256_dpwssd_epi32(o, _mm256_packs_epi32(q6_quads(u->q[j + 2], x + 32 * j + 64),
                                                      q6_quads(u->q[j + 3], x + 32 * j + 96)),
                                u->s[j + 2]);
    }
    *is = _mm256_sub_epi32(_mm256_add_epi32(e, o), corr);
#else
    __m256i v[8];
    UNROLL
    for (int j = 0; j < 8; j++)
        v[j] = q6_scaled(u->q[j], x + 32 * j, u->s[j]);
    const __m256i all = _mm256_add_epi32(
        _mm256_add_epi32(_mm256_add_epi32(v[0], v[1]), _mm256_add_epi32(v[2], v[3])),
        _mm256_add_epi32(_mm256_add_epi32(v[4], v[5]), _mm256_add_epi32(v[6], v[7])));
    *is = _mm256_sub_epi32(all, corr);
#endif
}

/* a16: the super-block's sixteen half sums of x. */
ALWAYS_INLINE void sums_q6_k(const uint8_t *w, const int8_t *x, const int16_t *a16, __m256i *is)
{
    prefetch_ahead_l2(w, PREFETCH_K, 4);
    q6_unpacked u;
    q6_unpack(w, &u);
    q6_sums(&u, x, a16, is);
}

/* ---- Q2_K and Q3_K: 2-bit quants with a scale per 16 elements ---- */

/* Block j's Σ sc·q·x over both halves (q unsigned, < 8): 16-bit pairs,
 * then vpmaddwd with the halves' scales (lanes 0-7 first half). */
ALWAYS_INLINE __m256i halves_scaled(__m256i q, const int8_t *x, int16_t lo, int16_t hi)
{
    const __m256i s = _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(q, load256(x)), s);
}

/* Lane j: Σ over block j's halves of sc·(the half's Σ x) (vpmaddwd pairs
 * the halves), from the super-block's 16 half sums a16 and 16 int16
 * scales. */
ALWAYS_INLINE __m256i halves_xsum(const int16_t *a16, __m256i sc16)
{
    return _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a16), sc16);
}

ALWAYS_INLINE void sums_q2_k(const uint8_t *w, const int8_t *x, const int16_t *a16, __m256i *is,
                             __m256i *ms)
{
    const __m256i three = _mm256_set1_epi8(3);
    prefetch_ahead_l2(w, PREFETCH_K, 2);
    const __m256i b16 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)w));
    const __m256i sc16 = _mm256_and_si256(b16, _mm256_set1_epi16(15));
    const __m256i mn16 = _mm256_srli_epi16(b16, 4);
    /* a wide store read back narrow: forwarded */
    int16_t sc[16];
    _mm256_storeu_si256((__m256i *)sc, sc16);
    __m256i v[8];
    UNROLL
    for (int j = 0; j < 8; j++) {
        const __m256i q = load256(w + 16 + 32 * (j / 4));
        const __m256i qj = _mm256_and_si256(_mm256_srli_epi16(q, 2 * (j % 4)), three);
        v[j] = halves_scaled(qj, x + 32 * j, sc[2 * j], sc[2 * j + 1]);
    }
    *is = hsum8x8(v);
    *ms = halves_xsum(a16, mn16);
}

/* Q3_K's sixteen scales minus 32 (blocks_scalar.c's q3_scales) as int16
 * lanes in order: scale i's low 4 bits are nibble i / 8 of byte i % 8,
 * its high 2 bits bits 8 (i % 4) + 2 (i / 4) of the word at byte 8. */
ALWAYS_INLINE __m256i q3_scales16(const uint8_t *s)
{
    uint32_t hw;
    memcpy(&hw, s + 8, 4);
    const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)s));
    const __m256i h = _mm256_set1_epi32((int)hw), m3 = _mm256_set1_epi32(3);
    const __m256i hi0 = _mm256_and_si256(
        _mm256_srlv_epi32(h, _mm256_setr_epi32(0, 8, 16, 24, 2, 10, 18, 26)), m3);
    const __m256i hi1 = _mm256_and_si256(
        _mm256_srlv_epi32(h, _mm256_setr_epi32(4, 12, 20, 28, 6, 14, 22, 30)), m3);
    const __m256i s0 = _mm256_or_si256(_mm256_and_si256(b, _mm256_set1_epi32(15)),
                                       _mm256_slli_epi32(hi0, 4));
    const __m256i s1 = _mm256_or_si256(_mm256_srli_epi32(b, 4), _mm256_slli_epi32(hi1, 4));
    /* packs interleaves the 128-bit halves: 0-3, 8-11, 4-7, 12-15 */
    const __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi32(s0, s1), 0xd8);
    return _mm256_sub_epi16(p, _mm256_set1_epi16(32));
}

/* v = q + 4·hbit - 4: the quants taken unsigned (q + 4·hbit, < 8) and
 * 4·(Σ sc·asum) taken off, an exact integer identity. */
ALWAYS_INLINE void sums_q3_k(const uint8_t *w, const int8_t *x, const int16_t *a16, __m256i *is)
{
    const __m256i three = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
    prefetch_ahead_l2(w, PREFETCH_K, 2);
    const __m256i sc16 = q3_scales16(w + 96);
    int16_t sc[16];
    _mm256_storeu_si256((__m256i *)sc, sc16);
    const __m256i hm = load256(w);
    __m256i v[8];
    UNROLL
    for (int j = 0; j < 8; j++) {
        const __m256i q = load256(w + 32 + 32 * (j / 4));
        const __m256i qj = _mm256_and_si256(_mm256_srli_epi16(q, 2 * (j % 4)), three);
        /* bit j of each hmask byte to bit 2 (no bit crosses into it) */
        const __m256i hb = _mm256_and_si256(
            j <= 2 ? _mm256_slli_epi16(hm, 2 - j) : _mm256_srli_epi16(hm, j - 2), four);
        v[j] = halves_scaled(_mm256_or_si256(qj, hb), x + 32 * j, sc[2 * j], sc[2 * j + 1]);
    }
    *is = _mm256_sub_epi32(hsum8x8(v), _mm256_slli_epi32(halves_xsum(a16, sc16), 2));
}

/* ---- the 32-element types: eight blocks a group, lane j block 8g+j ---- */

/* Bit e of 32 bits as byte e: 0xff when set (ggml's bytes_from_bits_32). */
ALWAYS_INLINE __m256i bits_to_bytes(uint32_t bits)
{
    const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                             0x0101010101010101, 0x0000000000000000);
    const __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread);
    const __m256i others = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
    return _mm256_cmpeq_epi8(_mm256_or_si256(b, others), _mm256_set1_epi64x(-1));
}

/* 16 bytes of nibbles as 32 bytes in element order: low nibbles 0-15,
 * high 16-31. */
ALWAYS_INLINE __m256i nibbles32(const uint8_t *qs)
{
    const __m128i q = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(15));
}

/* Nibbles n (bytes 0..15) with 16 added to byte j where bit j is set:
 * Q5_0's and Q5_1's fifth bits.  With AVX-512 the bits are a mask of one
 * masked add, where bits_to_bytes and the and and or were six
 * operations. */
ALWAYS_INLINE __m256i add_fifth_bits(__m256i n, uint32_t bits)
{
    const __m256i sixteen = _mm256_set1_epi8(16);
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    return _mm256_mask_add_epi8(n, _cvtu32_mask32(bits), n, sixteen);
#else
    return _mm256_or_si256(n, _mm256_and_si256(bits_to_bytes(bits), sixteen));
#endif
}

/* Q5_0's and Q5_1's unsigned quants (0..31) of the block whose 32 bits
 * of fifth bits are at qh, its nibbles after them. */
ALWAYS_INLINE __m256i q5_quants(const uint8_t *qh)
{
    uint32_t bits;
    memcpy(&bits, qh, 4);
    return add_fifth_bits(nibbles32(qh + 4), bits);
}

/* Σ v·x for signed v (|v| <= 127): the sign moved onto x. */
ALWAYS_INLINE __m256i dot_s8s8(__m256i v, __m256i x)
{
    return dot_u8s8(_mm256_abs_epi8(v), _mm256_sign_epi8(x, v));
}

/* A table of 16 signed levels, indexed by nibbles32's bytes. */
ALWAYS_INLINE __m256i levels(__m256i idx, const int8_t *table)
{
    const __m128i t = _mm_loadu_si128((const __m128i *)table);
    return _mm256_shuffle_epi8(_mm256_set_m128i(t, t), idx);
}

static const int8_t iq4nl_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                        1,    13,   25,  38,  53,  69,  89,  113};
static const int8_t mxfp4_levels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
/* The same levels made unsigned, + 16 and + 128, for byte products with
 * no sign tricks: Σ v·x = Σ (v + o)·x - o·Σ x, exact in int32 (a power
 * of two: o·Σ x is one shift).  MXFP4's (4..28) keep even vpmaddubsw's
 * 16-bit pairs far from saturating;
 * IQ4_NL's (1..241) need vpdpbusd's 32-bit sums (VNNI). */
static const uint8_t mxfp4_levels_u[16] = {16, 17, 18, 19, 20, 22, 24, 28,
                                           16, 15, 14, 13, 12, 10, 8,  4};
static const uint8_t iq4nl_levels_u[16] = {1,   24,  45,  63,  79,  93,  106, 118,
                                           129, 141, 153, 166, 181, 197, 217, 241};

/* The f16 at byte `at` of each of m blocks `bytes` apart, as f32 lanes
 * (+0 after m). */
/* The 2 bytes at p. */
ALWAYS_INLINE short half_bits(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return (short)h;
}

/* The bits of block j's half at p + j * bytes, 0 from block m on. */
ALWAYS_INLINE short half_of_block(const uint8_t *p, size_t bytes, size_t j, size_t m)
{
    return j < m ? half_bits(p + j * bytes) : 0;
}

/* The halves of four blocks `bytes` apart, packed low first. */
ALWAYS_INLINE int64_t halves4(const uint8_t *p, size_t bytes)
{
    return (int64_t)((uint64_t)(uint16_t)half_bits(p) | (uint64_t)(uint16_t)half_bits(p + bytes) << 16 |
                     (uint64_t)(uint16_t)half_bits(p + 2 * bytes) << 32 |
                     (uint64_t)(uint16_t)half_bits(p + 3 * bytes) << 48);
}

ALWAYS_INLINE __m256 f16_lanes(const uint8_t *w, size_t bytes, int at, size_t m)
{
    /* Eight loads into a register, not through a buffer on the stack:
     * 2-byte stores read back by one 16-byte load cannot be forwarded,
     * and that stall cost more than the eight blocks' products (a row of
     * 576 ends in such a group of two blocks). */
    const uint8_t *p = w + at;
    if (m == 8) /* whole groups: four halves a general register, two moves */
        return _mm256_cvtph_ps(_mm_set_epi64x(halves4(p + 4 * bytes, bytes), halves4(p, bytes)));
    if (m >= 4) /* a last group's first four alike, the rest lane by lane */
        return _mm256_cvtph_ps(_mm_set_epi64x(
            (int64_t)((uint64_t)(uint16_t)half_of_block(p, bytes, 4, m) |
                      (uint64_t)(uint16_t)half_of_block(p, bytes, 5, m) << 16 |
                      (uint64_t)(uint16_t)half_of_block(p, bytes, 6, m) << 32),
            halves4(p, bytes)));
    return _mm256_cvtph_ps(_mm_setr_epi16(
        half_of_block(p, bytes, 0, m), half_of_block(p, bytes, 1, m),
        half_of_block(p, bytes, 2, m), half_of_block(p, bytes, 3, m),
        half_of_block(p, bytes, 4, m), half_of_block(p, bytes, 5, m),
        half_of_block(p, bytes, 6, m), half_of_block(p, bytes, 7, m)));
}

/* The lanes j < m set (all ones), for masked loads of a group's tail. */
ALWAYS_INLINE __m256i lanes_below(size_t m)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)m), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Block j's scale byte (MXFP4: the first of 17), 0 from block m on. */
ALWAYS_INLINE int e8m0_of_block(const uint8_t *w, size_t j, size_t m)
{
    return j < m ? w[17 * j] : 0;
}

/* ggml_e8m0_to_fp32_half of the first byte of each of m blocks: for
 * e < 2 the subnormal 0x00200000 << e, else (e - 1) << 23: 2^(e - 128)
 * for every e.  With AVX-512 that exponent, e - 128, which group_apply
 * gives vscalefps: xd · 2^(e - 128) rounded once, the bits of xd · d.  A
 * lane from m on is never used (its block's products are +0). */
ALWAYS_INLINE __m256 e8m0_lanes(const uint8_t *w, size_t m)
{
    const __m256i e = m == 8 ? _mm256_setr_epi64x(
        w[0] | (int64_t)w[17] << 32, w[34] | (int64_t)w[51] << 32,
        w[68] | (int64_t)w[85] << 32, w[102] | (int64_t)w[119] << 32) : _mm256_setr_epi32(e8m0_of_block(w, 0, m), e8m0_of_block(w, 1, m),
                                        e8m0_of_block(w, 2, m), e8m0_of_block(w, 3, m),
                                        e8m0_of_block(w, 4, m), e8m0_of_block(w, 5, m),
                                        e8m0_of_block(w, 6, m), e8m0_of_block(w, 7, m));
#if HAVE_VNNI
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(e, _mm256_set1_epi32(128)));
#else
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __m256i norm = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(norm, sub, small));
#endif
}

/* xd of m blocks, +0 after m (never read past the row). */
ALWAYS_INLINE __m256 xd_lanes(const float *xd, size_t m)
{
    return m == 8 ? _mm256_loadu_ps(xd) : _mm256_maskload_ps(xd, lanes_below(m));
}

/* Block j's Σ v·x (8 int32 partials) for type T: unsigned quants for
 * Q4_1, Q5_0 (q5, offset later) and Q5_1, levels for IQ4_NL and MXFP4
 * (unsigned too where the offset table above serves, offset later). */
ALWAYS_INLINE __m256i block_dot(ml_type T, const uint8_t *b, const int8_t *x)
{
    const __m256i xv = load256(x);
    switch (T) {
    case ML_TYPE_Q4_1: return dot_u8s8(nibbles32(b + 4), xv);
    case ML_TYPE_Q5_0:
    case ML_TYPE_Q5_1: return dot_u8s8(q5_quants(b + (T == ML_TYPE_Q5_0 ? 2 : 4)), xv);
#if HAVE_VNNI
    case ML_TYPE_IQ4_NL: /* + 128, taken off in group_s */
        return dot_u8s8(levels(nibbles32(b + 2), (const int8_t *)iq4nl_levels_u), xv);
#else
    case ML_TYPE_IQ4_NL: return dot_s8s8(levels(nibbles32(b + 2), iq4nl_levels), xv);
#endif
    default: /* MXFP4: + 16, taken off in group_s */
        return dot_u8s8(levels(nibbles32(b + 1), (const int8_t *)mxfp4_levels_u), xv);
    }
}

/* s of m <= 8 blocks (rule 5's line for T), lane j; lanes from m on +0. */
/* The scales of m <= 8 blocks, lane j: d (f16, or MXFP4's e8m0) and
 * Q4_1's and Q5_1's min, at *mn. */
ALWAYS_INLINE __m256 group_d(ml_type T, const uint8_t *w, size_t bytes, size_t m, __m256 *mn)
{
    if (T == ML_TYPE_Q4_1 || T == ML_TYPE_Q5_1)
        *mn = f16_lanes(w, bytes, 2, m);
    return T == ML_TYPE_MXFP4 ? e8m0_lanes(w, m) : f16_lanes(w, bytes, 0, m);
}

/* s from the group's scales (group_d) and integer sums. */
ALWAYS_INLINE __m256 group_apply(ml_type T, __m256 d, __m256 mn, size_t m, __m256i isum,
                                 const int32_t *asum, const float *xd)
{
    const __m256 xdv = xd_lanes(xd, m);
    const __m256i a = _mm256_loadu_si256((const __m256i *)asum);
    switch (T) {
    case ML_TYPE_Q4_1:
    case ML_TYPE_Q5_1: {
        const __m256 dx = _mm256_mul_ps(d, xdv);
        const __m256 mx = _mm256_mul_ps(mn, xdv);
        return _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(isum), dx),
                             _mm256_mul_ps(_mm256_cvtepi32_ps(a), mx));
    }
    case ML_TYPE_Q5_0: {
        const __m256i v = _mm256_sub_epi32(isum, _mm256_slli_epi32(a, 4)); /* q5 - 16 */
        return _mm256_mul_ps(_mm256_cvtepi32_ps(v), _mm256_mul_ps(d, xdv));
    }
    case ML_TYPE_IQ4_NL: {
        const __m256i v = HAVE_VNNI ? _mm256_sub_epi32(isum, _mm256_slli_epi32(a, 7)) : isum;
        return _mm256_mul_ps(_mm256_cvtepi32_ps(v), _mm256_mul_ps(d, xdv));
    }
    default: { /* MXFP4: - 16 Σx; d is e8m0_lanes's */
        const __m256i v = _mm256_sub_epi32(isum, _mm256_slli_epi32(a, 4));
#if HAVE_VNNI
        return _mm256_mul_ps(_mm256_cvtepi32_ps(v), _mm256_scalef_ps(xdv, d));
#else
        return _mm256_mul_ps(_mm256_cvtepi32_ps(v), _mm256_mul_ps(d, xdv));
#endif
    }
    }
}

ALWAYS_INLINE __m256 group_s(ml_type T, const uint8_t *w, size_t bytes, size_t m,
                             __m256i isum, const int32_t *asum, const float *xd)
{
    __m256 mn = _mm256_setzero_ps();
    const __m256 d = group_d(T, w, bytes, m, &mn);
    return group_apply(T, d, mn, m, isum, asum, xd);
}

/* The types whose quants are nibbles, at byte `at` of a block
 * (pair_dot's), with VNNI Q5_0's and Q5_1's too (their fifth bits added
 * by masks, pair_nibbles); 0 for the others. */
ALWAYS_INLINE int nibbles_at(ml_type T)
{
    /* Q4_1 without VNNI: slower by pairs (speed-history section 21) */
    switch (T) {
    case ML_TYPE_Q4_1: return HAVE_VNNI ? 4 : 0;
    case ML_TYPE_Q5_0: return HAVE_VNNI ? 6 : 0;
    case ML_TYPE_Q5_1: return HAVE_VNNI ? 8 : 0;
    case ML_TYPE_IQ4_NL: return 2;
    case ML_TYPE_MXFP4: return 1;
    default: return 0;
    }
}

/* The types of matmul_32_tokens's rows. */
ALWAYS_INLINE int nt_type(ml_type T)
{
    return nibbles_at(T) && T != ML_TYPE_Q5_0 && T != ML_TYPE_Q5_1;
}

/* Two blocks of a nibble type at once, at b and `bytes` after it (the
 * group's blocks k and k + 4): their nibbles in one register (the first
 * block's sixteen bytes low, the second's high), the low nibbles against
 * x_spread's first 32 bytes and the high ones against the next: lanes
 * 0-3 hold the first block's partial sums, 4-7 the second's.  Half the
 * unpacking and dot products of block_dot twice. */
ALWAYS_INLINE void pair_nibbles(ml_type T, const uint8_t *b, size_t bytes, __m256i *lo, __m256i *hi)
{
    const int at = nibbles_at(T);
    const __m256i v = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(b + at))),
        _mm_loadu_si128((const __m128i *)(b + bytes + at)), 1);
    const __m256i low = _mm256_set1_epi8(15);
    *lo = _mm256_and_si256(v, low), *hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
    if (T == ML_TYPE_Q5_0 || T == ML_TYPE_Q5_1) { /* both blocks' fifth bits */
        uint32_t h0, h1;
        memcpy(&h0, b + at - 4, 4), memcpy(&h1, b + bytes + at - 4, 4);
        *lo = add_fifth_bits(*lo, (h0 & 0xffff) | h1 << 16);
        *hi = add_fifth_bits(*hi, h0 >> 16 | (h1 & 0xffff0000u));
    }
    /* IQ4_NL's levels + 128 and MXFP4's + 16, taken off in group_apply;
     * without VNNI IQ4_NL's signed levels (dot_s8s8) */
    const int8_t *table = T == ML_TYPE_MXFP4    ? (const int8_t *)mxfp4_levels_u
                          : T != ML_TYPE_IQ4_NL ? NULL
                          : HAVE_VNNI           ? (const int8_t *)iq4nl_levels_u
                                                : iq4nl_levels;
    if (table)
        *lo = levels(*lo, table), *hi = levels(*hi, table);
}

/* pair_nibbles's two registers against x_spread's 64 activations at xp. */
ALWAYS_INLINE __m256i pair_sums(ml_type T, __m256i lo, __m256i hi, const int8_t *xp)
{
    const __m256i x0 = load256(xp), x1 = load256(xp + 32);
    if (!HAVE_VNNI && T == ML_TYPE_IQ4_NL)
        return _mm256_add_epi32(dot_s8s8(lo, x0), dot_s8s8(hi, x1));
    return dot2_u8s8(lo, x0, hi, x1);
}

ALWAYS_INLINE __m256i pair_dot(ml_type T, const uint8_t *b, size_t bytes, const int8_t *xp)
{
    __m256i lo, hi;
    pair_nibbles(T, b, bytes, &lo, &hi);
    return pair_sums(T, lo, hi, xp);
}

/* Whether pair_dot's lanes (eight products each) fit int16: quants
 * below 32 against int8 activations, 8 · 31 · 128 < 2^15; not IQ4_NL's
 * levels (+ 128 with VNNI). */
ALWAYS_INLINE int pair_sums_fit_i16(ml_type T)
{
    return T != ML_TYPE_IQ4_NL;
}

/* Lane j = the sum of block j's four lanes, from pair_dot's four
 * registers of a group (p[k]: block k in lanes 0-3, k + 4 in 4-7). */
ALWAYS_INLINE __m256i hsum_pairs(ml_type T, const __m256i p[4])
{
    if (pair_sums_fit_i16(T)) {
        /* packed to int16 and added in pairs by vpmaddwd (exact): a
         * and c are [b0 b0 b1 b1 | b4 b4 b5 b5] and [b2 b2 b3 b3 | b6
         * b6 b7 b7]; seven operations where the unpack tree takes nine */
        const __m256i ones = _mm256_set1_epi16(1);
        const __m256 a = _mm256_castsi256_ps(_mm256_madd_epi16(_mm256_packs_epi32(p[0], p[1]), ones));
        const __m256 c = _mm256_castsi256_ps(_mm256_madd_epi16(_mm256_packs_epi32(p[2], p[3]), ones));
        return _mm256_add_epi32(_mm256_castps_si256(_mm256_shuffle_ps(a, c, _MM_SHUFFLE(2, 0, 2, 0))),
                                _mm256_castps_si256(_mm256_shuffle_ps(a, c, _MM_SHUFFLE(3, 1, 3, 1))));
    }
    /* [b0 b1 b0 b1 | b4 b5 b4 b5] and [b2 b3 b2 b3 | b6 b7 b6 b7] */
    const __m256i a = _mm256_add_epi32(_mm256_unpacklo_epi32(p[0], p[1]),
                                       _mm256_unpackhi_epi32(p[0], p[1]));
    const __m256i c = _mm256_add_epi32(_mm256_unpacklo_epi32(p[2], p[3]),
                                       _mm256_unpackhi_epi32(p[2], p[3]));
    return _mm256_add_epi32(_mm256_unpacklo_epi64(a, c), _mm256_unpackhi_epi64(a, c));
}

/* Block 8g + j's Σ v·x in lane j, m <= 8 blocks: a whole group of a
 * nibble type by pairs (x_spread's layout at xs->paired), a last
 * partial group and the others block by block. */
ALWAYS_INLINE __m256i group_isum(ml_type T, size_t bytes, const uint8_t *wg, size_t g, size_t m,
                                 const int8_t *x, const xsums *xs)
{
    if (nibbles_at(T) && m == 8 && xs->paired) {
        __m256i p[4];
        UNROLL
        for (size_t k = 0; k < 4; k++)
            p[k] = pair_dot(T, wg + k * bytes, 4 * bytes, xs->paired + 32 * (g + 2 * k));
        return hsum_pairs(T, p);
    }
    __m256i v[8];
    UNROLL
    for (size_t j = 0; j < 8; j++)
        v[j] = j < m ? block_dot(T, wg + j * bytes, x + 32 * (g + j)) : _mm256_setzero_si256();
    return hsum8x8(v);
}

ALWAYS_INLINE float row_32(ml_type T, size_t bytes, const uint8_t *w, size_t nb, const int8_t *x,
                           const float *xd, const xsums *xs)
{
    __m256 acc = _mm256_setzero_ps();
    size_t g = 0;
    const size_t whole = nb / 8 * 8;
    if (nibbles_at(T) && xs->paired && whole) {
        /* software-pipelined: group g + 8's products are issued before
         * group g's float steps, which wait on its long chain of
         * unpacking, products and sums */
        __m256i isum = group_isum(T, bytes, w, 0, 8, x, xs);
        for (; g + 8 < whole; g += 8) {
            const uint8_t *wg = w + g * bytes;
            prefetch_ahead_l2(wg + 8 * bytes, PREFETCH_Q4_L2, (int)((8 * bytes + 63) / 64));
            prefetch_ahead(wg + 8 * bytes, PREFETCH_Q4, (int)((8 * bytes + 63) / 64));
            const __m256i next = group_isum(T, bytes, wg + 8 * bytes, g + 8, 8, x, xs);
            acc = _mm256_add_ps(acc, group_s(T, wg, bytes, 8, isum, xs->s32 + g, xd + g));
            isum = next;
        }
        acc = _mm256_add_ps(acc, group_s(T, w + g * bytes, bytes, 8, isum, xs->s32 + g, xd + g));
        g += 8;
    }
    for (; g < nb; g += 8) {
        const size_t m = nb - g < 8 ? nb - g : 8;
        const uint8_t *wg = w + g * bytes;
        prefetch_ahead_l2(wg, PREFETCH_Q4_L2, (int)((8 * bytes + 63) / 64));
        prefetch_ahead(wg, PREFETCH_Q4, (int)((8 * bytes + 63) / 64));
        const __m256i isum = group_isum(T, bytes, wg, g, m, x, xs);
        /* a lane without a block adds +0: acc, which starts at +0, never
         * holds -0, so that changes nothing */
        acc = _mm256_add_ps(acc, group_s(T, wg, bytes, m, isum, xs->s32 + g, xd + g));
    }
    return fold8(acc);
}

#if HAVE_VNNI
static void *kl_scratch(size_t bytes);

/* ---- a few tokens of the nibble types: each row unpacked once ----
 *
 * A verify step of speculative decoding, or a batch of a few sequences,
 * multiplies the same rows by 2 to NT_MAX tokens: the nibbles of a pair
 * of blocks are unpacked (and put through their levels) once for all the
 * tokens, the scales read once, and each token's sums are row_32's, its
 * float steps group_apply's in row_32's order: matvec's bits.  Up to
 * eight (Q4_1's lanes take more, matmul_32_lanes): the tiles cost a
 * token's whole dot per row and token, the rows only its sums
 * (docs/speed-history.md, section 23). */
#define NT_MAX 8
#define NT_SMALL 4 /* the instance whose sums stay in registers */

/* Token t's activations, their sums and x_pairs's form. */
typedef struct nt_x {
    const int8_t *x;
    const float *xd;
    const xsums *xs;
} nt_x;

/* The regrouped activations a kernel reads at xsums.paired. */
enum x_form { X_PLAIN, X_PAIRS, X_SPREAD };

/* n_tok tokens' activations (xd: per_tok scales a token) into tk, with
 * their sums (halves: the 16-element ones too) and their regrouped form
 * (x_pairs's or x_spread's), in the thread's scratch; NULL when out of
 * memory. */
static xsums *few_tokens(const int8_t *xq, const float *xd, size_t cols, size_t per_tok,
                         size_t n_tok, int halves, enum x_form form, nt_x *tk)
{
    xsums *xs = kl_scratch(n_tok * (sizeof *xs + cols));
    if (!xs)
        return NULL;
    int8_t *paired = (int8_t *)(xs + n_tok);
    for (size_t t = 0; t < n_tok; t++) {
        xsums_init(&xs[t], xq + t * cols, cols, halves);
        if (form != X_PLAIN) {
            if (form == X_SPREAD)
                x_regroup(paired + t * cols, xq + t * cols, cols, X_SPREAD_D);
            else
                x_regroup(paired + t * cols, xq + t * cols, cols, X_PAIRS_D);
            xs[t].paired = paired + t * cols;
        }
        tk[t] = (nt_x){xq + t * cols, xd + t * per_tok, &xs[t]};
    }
    return xs;
}

/* One row against nt <= cap tokens: out[t] its dot with token t.  cap
 * (NT_SMALL or NT_MAX, a constant in each instance) sizes the sums, so
 * that a few tokens keep theirs in registers. */
ALWAYS_INLINE void row_32_tokens(ml_type T, size_t bytes, const uint8_t *w, size_t nb, size_t nt,
                                 size_t cap, const nt_x *tk, float *out)
{
    __m256 acc[NT_MAX];
    for (size_t t = 0; t < cap; t++)
        acc[t] = _mm256_setzero_ps();
    for (size_t g = 0; g < nb; g += 8) {
        const size_t m = nb - g < 8 ? nb - g : 8;
        const uint8_t *wg = w + g * bytes;
        __m256 mn = _mm256_setzero_ps();
        const __m256 d = group_d(T, wg, bytes, m, &mn);
        if (m == 8) {
            __m256i lo[4], hi[4];
            UNROLL
            for (size_t k = 0; k < 4; k++)
                pair_nibbles(T, wg + k * bytes, 4 * bytes, &lo[k], &hi[k]);
            for (size_t t = 0; t < nt; t++) {
                const int8_t *xp = tk[t].xs->paired + 32 * g;
                __m256i p[4];
                UNROLL
                for (size_t k = 0; k < 4; k++)
                    p[k] = pair_sums(T, lo[k], hi[k], xp + 64 * k);
                acc[t] = _mm256_add_ps(acc[t], group_apply(T, d, mn, m, hsum_pairs(T, p),
                                                           tk[t].xs->s32 + g, tk[t].xd + g));
            }
        } else {
            for (size_t t = 0; t < nt; t++)
                acc[t] = _mm256_add_ps(acc[t], group_apply(T, d, mn, m,
                                                           group_isum(T, bytes, wg, g, m, tk[t].x, tk[t].xs),
                                                           tk[t].xs->s32 + g, tk[t].xd + g));
        }
    }
    for (size_t t = 0; t < nt; t++)
        out[t] = fold8(acc[t]);
}

/* Rows [r0, r1) x n_tok (2 to NT_MAX) of a nibble type; 0 when out of
 * memory. */
static int matmul_32_tokens(ml_type T, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                            const int8_t *xq, const float *xd, size_t n_tok, float *y, size_t ldy)
{
    const size_t nb = cols / 32;
    nt_x tk[NT_MAX];
    if (!few_tokens(xq, xd, cols, nb, n_tok, 0, X_SPREAD, tk))
        return 0;
    float out[NT_MAX];
    const int small = n_tok <= NT_SMALL;
    for (size_t r = r0; r < r1; r++) {
        switch (T * 2 + small) { /* one instance a type and size */
        case ML_TYPE_Q4_1 * 2: row_32_tokens(ML_TYPE_Q4_1, 20, w + r * nb * 20, nb, n_tok, NT_MAX, tk, out); break;
        case ML_TYPE_Q4_1 * 2 + 1: row_32_tokens(ML_TYPE_Q4_1, 20, w + r * nb * 20, nb, n_tok, NT_SMALL, tk, out); break;
        case ML_TYPE_IQ4_NL * 2: row_32_tokens(ML_TYPE_IQ4_NL, 18, w + r * nb * 18, nb, n_tok, NT_MAX, tk, out); break;
        case ML_TYPE_IQ4_NL * 2 + 1: row_32_tokens(ML_TYPE_IQ4_NL, 18, w + r * nb * 18, nb, n_tok, NT_SMALL, tk, out); break;
        case ML_TYPE_MXFP4 * 2: row_32_tokens(ML_TYPE_MXFP4, 17, w + r * nb * 17, nb, n_tok, NT_MAX, tk, out); break;
        default: row_32_tokens(ML_TYPE_MXFP4, 17, w + r * nb * 17, nb, n_tok, NT_SMALL, tk, out); break;
        }
        for (size_t t = 0; t < n_tok; t++)
            y[t * ldy + r] = out[t];
    }
    return 1;
}
#endif

static float row_q4_1(const uint8_t *w, size_t nb, const int8_t *x, const float *xd,
                      const xsums *xs)
{
    return row_32(ML_TYPE_Q4_1, 20, w, nb, x, xd, xs);
}

static float row_q5_0(const uint8_t *w, size_t nb, const int8_t *x, const float *xd,
                      const xsums *xs)
{
    return row_32(ML_TYPE_Q5_0, 22, w, nb, x, xd, xs);
}

static float row_q5_1(const uint8_t *w, size_t nb, const int8_t *x, const float *xd,
                      const xsums *xs)
{
    return row_32(ML_TYPE_Q5_1, 24, w, nb, x, xd, xs);
}

static float row_iq4_nl(const uint8_t *w, size_t nb, const int8_t *x, const float *xd,
                        const xsums *xs)
{
    return row_32(ML_TYPE_IQ4_NL, 18, w, nb, x, xd, xs);
}

static float row_mxfp4(const uint8_t *w, size_t nb, const int8_t *x, const float *xd,
                       const xsums *xs)
{
    return row_32(ML_TYPE_MXFP4, 17, w, nb, x, xd, xs);
}

/* Two rows of a nibble type at once, their groups interleaved: each row's
 * sums and float steps are row_32's, in its order (the same bits), and
 * the two rows' chains are independent work for the window.  Rows with a
 * whole group only; the rows done. */
ALWAYS_INLINE size_t rows_32_two(ml_type T, size_t bytes, const uint8_t *w, size_t row_bytes,
                                 size_t nb, size_t n, const int8_t *x, const float *xd,
                                 const xsums *xs, float *y)
{
    const size_t whole = nb / 8 * 8;
    if (!whole || !xs->paired)
        return 0;
    for (size_t r = 0; r + 2 <= n; r += 2) {
        const uint8_t *wa = w + r * row_bytes, *wb = wa + row_bytes;
        __m256 acc_a = _mm256_setzero_ps(), acc_b = _mm256_setzero_ps();
        __m256i ia = group_isum(T, bytes, wa, 0, 8, x, xs), ib = group_isum(T, bytes, wb, 0, 8, x, xs);
        size_t g = 0;
        for (; g + 8 < whole; g += 8) {
            const uint8_t *ga = wa + g * bytes, *gb = wb + g * bytes;
            prefetch_ahead_l2(ga + 8 * bytes, PREFETCH_Q4_L2, (int)((8 * bytes + 63) / 64));
            prefetch_ahead_l2(gb + 8 * bytes, PREFETCH_Q4_L2, (int)((8 * bytes + 63) / 64));
            prefetch_ahead(ga + 8 * bytes, PREFETCH_Q4, (int)((8 * bytes + 63) / 64));
            prefetch_ahead(gb + 8 * bytes, PREFETCH_Q4, (int)((8 * bytes + 63) / 64));
            const __m256i na = group_isum(T, bytes, ga + 8 * bytes, g + 8, 8, x, xs);
            const __m256i nb2 = group_isum(T, bytes, gb + 8 * bytes, g + 8, 8, x, xs);
            acc_a = _mm256_add_ps(acc_a, group_s(T, ga, bytes, 8, ia, xs->s32 + g, xd + g));
            acc_b = _mm256_add_ps(acc_b, group_s(T, gb, bytes, 8, ib, xs->s32 + g, xd + g));
            ia = na, ib = nb2;
        }
        acc_a = _mm256_add_ps(acc_a, group_s(T, wa + g * bytes, bytes, 8, ia, xs->s32 + g, xd + g));
        acc_b = _mm256_add_ps(acc_b, group_s(T, wb + g * bytes, bytes, 8, ib, xs->s32 + g, xd + g));
        for (g += 8; g < nb; g += 8) {
            const size_t m = nb - g < 8 ? nb - g : 8;
            acc_a = _mm256_add_ps(acc_a, group_s(T, wa + g * bytes, bytes, m,
                                                 group_isum(T, bytes, wa + g * bytes, g, m, x, xs),
                                                 xs->s32 + g, xd + g));
            acc_b = _mm256_add_ps(acc_b, group_s(T, wb + g * bytes, bytes, m,
                                                 group_isum(T, bytes, wb + g * bytes, g, m, x, xs),
                                                 xs->s32 + g, xd + g));
        }
        y[r] = fold8(acc_a), y[r + 1] = fold8(acc_b);
    }
    return n / 2 * 2;
}

#define ROWS_32(name, T, bytes)                                                                 \
    static size_t rows_##name(const uint8_t *w, size_t row_bytes, size_t nb, size_t n,        \
                              const int8_t *x, const float *xd, const xsums *xs, float *y)    \
    {                                                                                         \
        return rows_32_two(T, bytes, w, row_bytes, nb, n, x, xd, xs, y);                      \
    }
ROWS_32(q4_1, ML_TYPE_Q4_1, 20)
ROWS_32(q5_0, ML_TYPE_Q5_0, 22)
ROWS_32(q5_1, ML_TYPE_Q5_1, 24)
ROWS_32(iq4_nl, ML_TYPE_IQ4_NL, 18)
ROWS_32(mxfp4, ML_TYPE_MXFP4, 17)
#undef ROWS_32

/* Rows [r0, r1) of t unpacked, row by row: each block's 32 integer
 * weights at q (32 apart) and its scale at d; Q4_1's and Q5_1's
 * unsigned quants with their mins at m, the others blocks_scalar.c's
 * blk_to_q8_0 (kernels.h).  0 for another type. */
static int blk_unpack(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1, int8_t *q,
                      float *d, float *m)
{
    const size_t bytes = t == ML_TYPE_Q5_0    ? 22
                         : t == ML_TYPE_IQ4_NL ? 18
                         : t == ML_TYPE_MXFP4  ? 17
                         : t == ML_TYPE_Q4_1   ? 20
                         : t == ML_TYPE_Q5_1   ? 24
                                               : 0;
    if (!bytes)
        return 0;
    const size_t nb = (r1 - r0) * (cols / 32);
    const uint8_t *b = w + r0 * (cols / 32) * bytes;
    for (size_t i = 0; i < nb; i++, b += bytes) {
        __m256i v;
        if (t == ML_TYPE_Q5_0 || t == ML_TYPE_Q5_1) {
            v = q5_quants(b + (t == ML_TYPE_Q5_0 ? 2 : 4));
            if (t == ML_TYPE_Q5_0)
                v = _mm256_sub_epi8(v, _mm256_set1_epi8(16));
        } else if (t == ML_TYPE_Q4_1) {
            v = nibbles32(b + 4);
        } else if (t == ML_TYPE_IQ4_NL) {
            v = levels(nibbles32(b + 2), iq4nl_levels);
        } else {
            v = levels(nibbles32(b + 1), mxfp4_levels);
        }
        if (t == ML_TYPE_MXFP4) {
            const uint32_t bits = b[0] < 2 ? 0x00200000u << b[0] : (uint32_t)(b[0] - 1) << 23;
            memcpy(&d[i], &bits, 4);
        } else {
            d[i] = f16_at(b);
        }
        if (t == ML_TYPE_Q4_1 || t == ML_TYPE_Q5_1)
            m[i] = f16_at(b + 2);
        _mm256_storeu_si256((__m256i *)(q + 32 * i), v);
    }
    return 1;
}

/* Rows [r0, r1) of Q4_K, Q5_K, Q6_K or IQ4_XS unpacked as blk_unpack
 * does, block by block (sub-block j of super-block k is block 8k + j):
 * its 32 integer weights at q (Q4_K's, Q5_K's unsigned; Q6_K's q6 - 32),
 * the super-block's d (and dmin) at d (and m), the sub-block's 6-bit
 * scale (IQ4_XS: ls; Q6_K: its first half's int8 scale) at sm[2 i] and
 * min (Q6_K: its second half's scale) at sm[2 i + 1].  0 for another
 * type. */
static inline int blk_unpack_k(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                               int8_t *q, float *d, float *m, uint8_t *sm)
{
    const size_t bytes = t == ML_TYPE_Q4_K    ? 144
                         : t == ML_TYPE_Q5_K   ? 176
                         : t == ML_TYPE_IQ4_XS ? 136
                         : t == ML_TYPE_Q6_K   ? 210
                                               : 0;
    if (!bytes)
        return 0;
    const size_t nsb = (r1 - r0) * (cols / 256);
    const uint8_t *b = w + r0 * (cols / 256) * bytes;
    const __m256i low = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
    for (size_t k = 0; k < nsb; k++, b += bytes, q += 256, d += 8, m += 8, sm += 16) {
        if (t == ML_TYPE_IQ4_XS) {
            const unsigned sh = (unsigned)(b[2] | b[3] << 8);
            for (int j = 0; j < 8; j++) {
                _mm256_storeu_si256((__m256i *)(q + 32 * j),
                                    levels(nibbles32(b + 8 + 16 * j), iq4nl_levels));
                d[j] = f16_at(b), m[j] = 0.0f;
                sm[2 * j] = (uint8_t)(((b[4 + j / 2] >> (4 * (j % 2))) & 15) |
                                      ((sh >> (2 * j)) & 3) << 4);
                sm[2 * j + 1] = 0;
            }
            continue;
        }
        if (t == ML_TYPE_Q6_K) {
            for (int j = 0; j < 8; j++) {
                const int h = j / 4, u = j % 4;
                const __m256i l = load256(b + 64 * h + 32 * (u % 2));
                const __m256i qh = load256(b + 128 + 32 * h);
                const __m256i lo = _mm256_and_si256(u < 2 ? l : _mm256_srli_epi16(l, 4), low);
                const __m256i hi =
                    _mm256_and_si256(_mm256_srli_epi16(qh, 2 * u), _mm256_set1_epi8(3));
                _mm256_storeu_si256((__m256i *)(q + 32 * j),
                                    _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)),
                                                    _mm256_set1_epi8(32)));
                d[j] = f16_at(b + 208), m[j] = 0.0f;
                sm[2 * j] = b[192 + 2 * j], sm[2 * j + 1] = b[193 + 2 * j];
            }
            continue;
        }
        __m256i sc, mn;
        k4_scales_mins(b + 4, &sc, &mn);
        _Alignas(32) int32_t s[8], n[8];
        _mm256_store_si256((__m256i *)s, sc);
        _mm256_store_si256((__m256i *)n, mn);
        const float dk = f16_at(b), mk = f16_at(b + 2);
        const size_t at = t == ML_TYPE_Q4_K ? 16 : 48;
        const __m256i qh = t == ML_TYPE_Q5_K ? load256(b + 16) : _mm256_setzero_si256();
        for (int j = 0; j < 8; j++) {
            const __m256i v = load256(b + at + 32 * (j / 2));
            const __m256i u = _mm256_and_si256(j % 2 ? _mm256_srli_epi16(v, 4) : v, low);
            const __m256i h = _mm256_and_si256(_mm256_srli_epi16(qh, j), one);
            _mm256_storeu_si256((__m256i *)(q + 32 * j),
                                _mm256_or_si256(u, _mm256_slli_epi16(h, 4)));
            d[j] = dk, m[j] = mk;
            sm[2 * j] = (uint8_t)s[j], sm[2 * j + 1] = (uint8_t)n[j];
        }
    }
    return 1;
}

/* ---- IQ4_XS: IQ4_NL's levels with a 6-bit scale per sub-block ---- */

/* IQ4_XS's sub-block scales minus 32: nibble j of scales_l
 * (little-endian), bits 2j, 2j+1 of scales_h; lane i holds sub-block
 * nib[i] / 4 (pair[i] = nib[i] / 2). */
ALWAYS_INLINE __m256i iq4_xs_scales(const uint8_t *b, __m256i nib, __m256i pair)
{
    uint32_t sl;
    memcpy(&sl, b + 4, 4);
    const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)sl), nib),
                                        _mm256_set1_epi32(15));
#if HAVE_VNNI
    /* scales_h in both halves of each lane, rotated right by pair - 4
     * (mod 32) so that bits pair, pair + 1 land on bits 4, 5: one
     * rotation and one vpternlogd where the shifts, and and or were four */
    const __m256i hi = _mm256_rorv_epi32(_mm256_broadcastw_epi16(_mm_loadu_si16(b + 2)),
                                         _mm256_sub_epi32(pair, _mm256_set1_epi32(4)));
    return _mm256_sub_epi32(or_and(lo, hi, _mm256_set1_epi32(0x30)), _mm256_set1_epi32(32));
#else
    const uint32_t sh = (uint32_t)(b[2] | b[3] << 8);
    const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)sh), pair),
                                        _mm256_set1_epi32(3));
    return _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
#endif
}

/* IQ4_XS: row_k needs only the lanes' total, so each sub-block's 16-bit
 * pair sums (at most 2·127·127) are multiplied by its scale in vpmaddwd
 * and the sub-blocks added lane by lane, with no transposition. */
#if HAVE_VNNI
/* With VNNI the levels go in as unsigned bytes, level + 128 (1..241), one
 * vpdpbusd per 32 bytes against x_pairs's activations, and the offset
 * comes off as 128·Σx of each sub-block.  Each pair of sub-blocks leaves
 * sub-block 2i's partial sums in lanes 0-3 and 2i + 1's in lanes 4-7;
 * four such vectors fold to lanes [S0 S2 S4 S6 | S1 S3 S5 S7], where the
 * scales and Σx are put in the same order.  Exact: |S_j - 128·X_j| <=
 * 32·241·128, times |ls| <= 32, eight of them, stay far below 2^31. */
/* An IQ4_XS super-block unpacked: its levels + 128, each two sub-blocks'
 * low nibbles' in lo[i] and high nibbles' in hi[i] (x_pairs's order), and
 * the scales ls in the lanes' order below. */
typedef struct iq4xs_unpacked {
    __m256i lo[4], hi[4], ls;
} iq4xs_unpacked;

ALWAYS_INLINE void iq4xs_unpack(const uint8_t *w, iq4xs_unpacked *u)
{
    const __m128i t = _mm_loadu_si128((const __m128i *)iq4nl_levels_u);
    const __m256i table = _mm256_set_m128i(t, t), low = _mm256_set1_epi8(15);
    UNROLL
    for (int i = 0; i < 4; i++) {
        const __m256i v = load256(w + 8 + 32 * i);
        u->lo[i] = _mm256_shuffle_epi8(table, _mm256_and_si256(v, low));
        u->hi[i] = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v, 4), low));
    }
    u->ls = iq4_xs_scales(w, _mm256_setr_epi32(0, 8, 16, 24, 4, 12, 20, 28),
                          _mm256_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14));
}

/* An unpacked IQ4_XS super-block against xp (x_pairs's form) and xsum
 * (its sub-blocks' sums). */
ALWAYS_INLINE void iq4xs_sums(const iq4xs_unpacked *u, const int8_t *xp, const int32_t *xsum,
                              __m256i *is)
{
    __m256i c[4];
    UNROLL
    for (int i = 0; i < 4; i++)
        c[i] = _mm256_dpbusd_epi32(
            _mm256_dpbusd_epi32(_mm256_setzero_si256(), u->lo[i], load256(xp + 64 * i)), u->hi[i],
            load256(xp + 64 * i + 32));
    const __m256i a0 = _mm256_add_epi32(_mm256_unpacklo_epi32(c[0], c[1]),
                                        _mm256_unpackhi_epi32(c[0], c[1]));
    const __m256i a1 = _mm256_add_epi32(_mm256_unpacklo_epi32(c[2], c[3]),
                                        _mm256_unpackhi_epi32(c[2], c[3]));
    const __m256i s = _mm256_add_epi32(_mm256_unpacklo_epi64(a0, a1), _mm256_unpackhi_epi64(a0, a1));
    const __m256i even_odd = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    const __m256i x128 = _mm256_slli_epi32(
        _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)xsum), even_odd), 7);
    *is = _mm256_mullo_epi32(_mm256_sub_epi32(s, x128), u->ls);
}

ALWAYS_INLINE void sums_iq4_xs(const uint8_t *w, const int8_t *xp, const int32_t *xsum,
                               __m256i *is)
{
    prefetch_ahead_l2(w, PREFETCH_K, 3);
    iq4xs_unpacked u;
    iq4xs_unpack(w, &u);
    iq4xs_sums(&u, xp, xsum, is);
}
#else
ALWAYS_INLINE void sums_iq4_xs(const uint8_t *w, const int8_t *x, __m256i *is)
{
    prefetch_ahead_l2(w, PREFETCH_K, 3);
    const __m256i ls = iq4_xs_scales(w, _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28),
                                     _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
    const __m256i ls16 = _mm256_or_si256(_mm256_and_si256(ls, _mm256_set1_epi32(0xffff)),
                                         _mm256_slli_epi32(ls, 16));
    __m256i sum = _mm256_setzero_si256();
    UNROLL
    for (int j = 0; j < 8; j++) {
        const __m256i v = levels(nibbles32(w + 8 + 16 * j), iq4nl_levels);
        const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(v),
                                               _mm256_sign_epi8(load256(x + 32 * j), v));
        sum = _mm256_add_epi32(
            sum, _mm256_madd_epi16(p, _mm256_permutevar8x32_epi32(ls16, _mm256_set1_epi32(j))));
    }
    *is = sum;
}
#endif

/* ---- the 256-element types' rows (rule 6) ---- */

/* Where a super-block's f16 d and dmin are (-1: none). */
ALWAYS_INLINE int k_d_at(ml_type T)
{
    return T == ML_TYPE_Q6_K ? 208 : T == ML_TYPE_Q2_K ? 80 : T == ML_TYPE_Q3_K ? 108 : 0;
}

ALWAYS_INLINE int k_dmin_at(ml_type T)
{
    return T == ML_TYPE_Q4_K || T == ML_TYPE_Q5_K ? 2 : T == ML_TYPE_Q2_K ? 82 : -1;
}

/* Super-block k of type T against x (its 256 activations) and the
 * activation's sums xs: *is, *ms (see the top of the 256-element types). */
ALWAYS_INLINE void sums_k(ml_type T, const uint8_t *w, const int8_t *x, const xsums *xs, size_t k,
                          __m256i *is, __m256i *ms)
{
    *ms = _mm256_setzero_si256();
    switch (T) {
    case ML_TYPE_Q4_K:
    case ML_TYPE_Q5_K: sums_q45_k(T, w, xs->paired + 256 * k, xs->s32 + 8 * k, is, ms); break;
    case ML_TYPE_Q6_K: sums_q6_k(w, x, xs->s16 + 16 * k, is); break;
    case ML_TYPE_Q2_K: sums_q2_k(w, x, xs->s16 + 16 * k, is, ms); break;
    case ML_TYPE_Q3_K: sums_q3_k(w, x, xs->s16 + 16 * k, is); break;
#if HAVE_VNNI
    default: sums_iq4_xs(w, xs->paired + 256 * k, xs->s32 + 8 * k, is); break; /* IQ4_XS */
#else
    default: sums_iq4_xs(w, x, is); break; /* IQ4_XS */
#endif
    }
}

/* Rule 6's float step for the super-blocks in the lanes of isum and msum
 * (exact integers), d, dmin and xd as lanes too:
 * s = (float)isum * (d * xd) - (float)msum * (dmin * xd), or without mins
 * s = (float)isum * (d * xd). */
ALWAYS_INLINE __m256 k_s(ml_type T, __m256i isum, __m256i msum, __m256 d, __m256 dmin, __m256 xdv)
{
    const __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, xdv));
    if (k_dmin_at(T) < 0)
        return s;
    return _mm256_sub_ps(s, _mm256_mul_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dmin, xdv)));
}

/* row_k's group of m super-blocks from super-block g of the row (wg):
 * is[j] super-block g + j's sums, *msum lane j its Σ m·asum (+0 where
 * the type has no mins).  Unrolled, the eight super-blocks' sums stay in
 * registers for hsum8x8 instead of going through the stack. */
ALWAYS_INLINE void group_k(ml_type T, const uint8_t *wg, size_t m, const int8_t *x,
                           const xsums *xs, size_t g, __m256i is[8], __m256i *msum)
{
    const size_t bytes = ml__blk_k_bytes(T);
    __m256i ms[8];
    UNROLL
    for (size_t j = 0; j < 8; j++) {
        if (j < m) {
            sums_k(T, wg + j * bytes, x + 256 * (g + j), xs, g + j, &is[j], &ms[j]);
        } else {
            is[j] = _mm256_setzero_si256();
            ms[j] = _mm256_setzero_si256();
        }
    }
    *msum = k_dmin_at(T) < 0 ? _mm256_setzero_si256() : hsum8x8(ms);
}

/* Eight super-blocks a group: lane j of the two hsum8x8 is super-block
 * 8g + j's isum and msum, so the float step is one vector op per eight
 * super-blocks and lands in rule 3's acc[k % 8].  A last partial group's
 * missing lanes are +0 throughout (zero sums, d and xd) and add +0: acc,
 * which starts at +0, never holds -0, so that changes nothing. */
/* The integer part of row_k's group of m super-blocks from super-block
 * g (at wg): lane j super-block g + j's isum and msum. */
ALWAYS_INLINE void group_k_sums(ml_type T, const uint8_t *wg, size_t m, const int8_t *x,
                                const xsums *xs, size_t g, __m256i *isum, __m256i *msum)
{
    __m256i is[8];
#if HAVE_VNNI
    if (T == ML_TYPE_Q4_K || T == ML_TYPE_Q5_K)
        group_q45_k(T, wg, m, xs->paired + 256 * g, xs->s32_i16 + 8 * g, is, msum);
    else
#endif
        group_k(T, wg, m, x, xs, g, is, msum);
    *isum = hsum8x8(is);
}

/* Its float part: the group's s lanes (xdg: xd from super-block g). */
ALWAYS_INLINE __m256 group_k_s(ml_type T, const uint8_t *wg, size_t m, const float *xdg,
                               __m256i isum, __m256i msum)
{
    const size_t bytes = ml__blk_k_bytes(T);
    const __m256 d = f16_lanes(wg, bytes, k_d_at(T), m);
    const __m256 dmin =
        k_dmin_at(T) < 0 ? _mm256_setzero_ps() : f16_lanes(wg, bytes, k_dmin_at(T), m);
    return k_s(T, isum, msum, d, dmin, xd_lanes(xdg, m));
}

ALWAYS_INLINE float row_k(ml_type T, const uint8_t *w, size_t nsb, const int8_t *x,
                          const float *xd, const xsums *xs)
{
    const size_t bytes = ml__blk_k_bytes(T);
    __m256 acc = _mm256_setzero_ps();
    for (size_t g = 0; g < nsb; g += 8) {
        const size_t m = nsb - g < 8 ? nsb - g : 8;
        const uint8_t *wg = w + g * bytes;
        __m256i isum, msum;
        group_k_sums(T, wg, m, x, xs, g, &isum, &msum);
        acc = _mm256_add_ps(acc, group_k_s(T, wg, m, xd + g, isum, msum));
    }
    return fold8(acc);
}

/* n rows of one group each (5 to 8 super-blocks), row_k's bits,
 * software-pipelined: row r + 1's sums are issued before row r's float
 * steps, which wait on their chain (as row_32's groups).  The rows done. */
ALWAYS_INLINE size_t rows_k_one_group(ml_type T, const uint8_t *w, size_t row_bytes, size_t nsb,
                                      size_t n, const int8_t *x, const float *xd,
                                      const xsums *xs, float *y)
{
    if (!n)
        return 0;
    __m256i isum, msum;
    group_k_sums(T, w, nsb, x, xs, 0, &isum, &msum);
    for (size_t r = 0; r + 1 < n; r++) {
        __m256i next_i, next_m;
        group_k_sums(T, w + (r + 1) * row_bytes, nsb, x, xs, 0, &next_i, &next_m);
        y[r] = fold8(_mm256_add_ps(_mm256_setzero_ps(),
                                   group_k_s(T, w + r * row_bytes, nsb, xd, isum, msum)));
        isum = next_i, msum = next_m;
    }
    y[n - 1] = fold8(_mm256_add_ps(_mm256_setzero_ps(),
                                   group_k_s(T, w + (n - 1) * row_bytes, nsb, xd, isum, msum)));
    return n;
}

/* n rows of more than one group, each software-pipelined: group g + 8's
 * sums issued before group g's float steps, row_k's bits.  The rows
 * done. */
ALWAYS_INLINE size_t rows_k_groups(ml_type T, const uint8_t *w, size_t row_bytes, size_t nsb,
                                   size_t n, const int8_t *x, const float *xd, const xsums *xs,
                                   float *y)
{
    const size_t bytes = ml__blk_k_bytes(T);
    for (size_t r = 0; r < n; r++) {
        const uint8_t *wr = w + r * row_bytes;
        __m256 acc = _mm256_setzero_ps();
        __m256i isum, msum;
        group_k_sums(T, wr, 8, x, xs, 0, &isum, &msum);
        size_t g = 0;
        for (; g + 8 < nsb; g += 8) {
            const size_t m = nsb - g - 8 < 8 ? nsb - g - 8 : 8;
            __m256i ni, nm;
            group_k_sums(T, wr + (g + 8) * bytes, m, x, xs, g + 8, &ni, &nm);
            acc = _mm256_add_ps(acc, group_k_s(T, wr + g * bytes, 8, xd + g, isum, msum));
            isum = ni, msum = nm;
        }
        acc = _mm256_add_ps(acc, group_k_s(T, wr + g * bytes, nsb - g, xd + g, isum, msum));
        y[r] = fold8(acc);
    }
    return n;
}

/* The f16 at byte `at` of super-blocks 0-3 of the row at w (lanes 0-3)
 * and of the row after it (lanes 4-7), 0 from super-block m on. */
ALWAYS_INLINE __m256 f16_pair_lanes(const uint8_t *w, size_t row_bytes, size_t bytes, int at,
                                    size_t m)
{
    const uint8_t *a = w + at, *b = w + row_bytes + at;
    return _mm256_cvtph_ps(_mm_setr_epi16(
        half_of_block(a, bytes, 0, m), half_of_block(a, bytes, 1, m),
        half_of_block(a, bytes, 2, m), half_of_block(a, bytes, 3, m),
        half_of_block(b, bytes, 0, m), half_of_block(b, bytes, 1, m),
        half_of_block(b, bytes, 2, m), half_of_block(b, bytes, 3, m)));
}

/* A pair of rows of at most four super-blocks (an MoE expert's down
 * product: 768 columns) in one group: row a's super-block k in lane k,
 * row b's in lane 4 + k, so that the group's fixed steps (hsum8x8, the
 * f16 loads, the float step), as long as three super-blocks' sums, are
 * taken once for both.  Each row's half is then folded as row_k folds
 * its one partial group: its lanes k < nsb hold +0 + s_k, every other
 * lane +0 (no sums, d or xd there), which is exactly row_k's acc.
 *
 * The pair's integer part: *isum lane k row a's super-block k's sums,
 * lane 4 + k row b's, *msum likewise. */
ALWAYS_INLINE void pair_k_sums(ml_type T, const uint8_t *w, size_t row_bytes, size_t nsb,
                               const int8_t *x, const xsums *xs, __m256i *isum, __m256i *msum)
{
    const size_t bytes = ml__blk_k_bytes(T);
    __m256i is[8];
    *msum = _mm256_setzero_si256();
#if HAVE_VNNI
    if (T == ML_TYPE_Q4_K || T == ML_TYPE_Q5_K) {
        pair_q45_k(T, w, row_bytes, nsb, xs, is, msum);
    } else
#endif
    {
        __m256i ms[8];
        UNROLL
        for (size_t j = 0; j < 8; j++) {
            is[j] = ms[j] = _mm256_setzero_si256();
            if (j % 4 < nsb)
                sums_k(T, w + j / 4 * row_bytes + j % 4 * bytes, x + 256 * (j % 4), xs, j % 4,
                       &is[j], &ms[j]);
        }
        if (k_dmin_at(T) >= 0)
            *msum = hsum8x8(ms);
    }
    *isum = hsum8x8(is);
}

/* The pair's float part, from pair_k_sums's lanes, into y[0], y[1]. */
ALWAYS_INLINE void pair_k_finish(ml_type T, const uint8_t *w, size_t row_bytes, size_t nsb,
                                 const float *xd, __m256i isum, __m256i msum, float *y)
{
    const size_t bytes = ml__blk_k_bytes(T);
    const __m256 d = f16_pair_lanes(w, row_bytes, bytes, k_d_at(T), nsb);
    const __m256 dmin =
        k_dmin_at(T) < 0 ? _mm256_setzero_ps() : f16_pair_lanes(w, row_bytes, bytes, k_dmin_at(T), nsb);
    const __m128 x4 = _mm_maskload_ps(xd, _mm256_castsi256_si128(lanes_below(nsb)));
    const __m256 acc = _mm256_add_ps(_mm256_setzero_ps(),
                                     k_s(T, isum, msum, d, dmin, _mm256_set_m128(x4, x4)));
    y[0] = fold8(_mm256_blend_ps(acc, _mm256_setzero_ps(), 0xf0));
    y[1] = fold8(_mm256_zextps128_ps256(_mm256_extractf128_ps(acc, 1)));
}

/* The whole pairs of n rows from w (pair_k_sums, pair_k_finish),
 * software-pipelined: pair p + 1's sums are issued before pair p's float
 * steps, which wait on their chain (as row_32's groups).  The rows done. */
ALWAYS_INLINE size_t rows_k_pairs(ml_type T, const uint8_t *w, size_t row_bytes, size_t nsb,
                                  size_t rows, const int8_t *x, const float *xd,
                                  const xsums *xs, float *y)
{
    const size_t n = rows / 2;
    if (!n)
        return 0;
    __m256i isum, msum;
    pair_k_sums(T, w, row_bytes, nsb, x, xs, &isum, &msum);
    for (size_t p = 0; p + 1 < n; p++) {
        __m256i next_i, next_m;
        pair_k_sums(T, w + 2 * (p + 1) * row_bytes, row_bytes, nsb, x, xs, &next_i, &next_m);
        pair_k_finish(T, w + 2 * p * row_bytes, row_bytes, nsb, xd, isum, msum, y + 2 * p);
        isum = next_i, msum = next_m;
    }
    pair_k_finish(T, w + 2 * (n - 1) * row_bytes, row_bytes, nsb, xd, isum, msum, y + 2 * (n - 1));
    return 2 * n;
}

#define ROW_K(name, T)                                                                          \
    static float row_##name(const uint8_t *w, size_t nsb, const int8_t *x, const float *xd,   \
                            const xsums *xs)                                                  \
    {                                                                                         \
        return row_k(T, w, nsb, x, xd, xs);                                                   \
    }
ROW_K(q4_k, ML_TYPE_Q4_K)
ROW_K(q5_k, ML_TYPE_Q5_K)
ROW_K(q6_k, ML_TYPE_Q6_K)
ROW_K(q2_k, ML_TYPE_Q2_K)
ROW_K(q3_k, ML_TYPE_Q3_K)
ROW_K(iq4_xs, ML_TYPE_IQ4_XS)
#undef ROW_K

/* Several rows of a 256-element type at once, the rows done (rows_k_pairs,
 * rows_k_one_group). */
typedef size_t (*rows_fn)(const uint8_t *w, size_t row_bytes, size_t nsb, size_t n,
                          const int8_t *x, const float *xd, const xsums *xs, float *y);

/* AVX2 (sixteen registers) takes its pairs one call each: pipelined, or
 * looped in one function, they were slower (speed-history section 35). */
#define ROWS_K(name, T)                                                                         \
    __attribute__((noinline)) static void pair_##name(const uint8_t *w, size_t row_bytes,     \
                                                      size_t nsb, const int8_t *x,            \
                                                      const float *xd, const xsums *xs,       \
                                                      float *y)                               \
    {                                                                                         \
        __m256i isum, msum;                                                                   \
        pair_k_sums(T, w, row_bytes, nsb, x, xs, &isum, &msum);                               \
        pair_k_finish(T, w, row_bytes, nsb, xd, isum, msum, y);                               \
    }                                                                                         \
    static size_t rows_pairs_##name(const uint8_t *w, size_t row_bytes, size_t nsb, size_t n, \
                                    const int8_t *x, const float *xd, const xsums *xs,        \
                                    float *y)                                                 \
    {                                                                                         \
        if (HAVE_VNNI)                                                                        \
            return rows_k_pairs(T, w, row_bytes, nsb, n, x, xd, xs, y);                       \
        for (size_t p = 0; p < n / 2; p++)                                                    \
            pair_##name(w + 2 * p * row_bytes, row_bytes, nsb, x, xd, xs, y + 2 * p);         \
        return n / 2 * 2;                                                                     \
    }                                                                                         \
    static size_t rows_one_##name(const uint8_t *w, size_t row_bytes, size_t nsb, size_t n,   \
                                  const int8_t *x, const float *xd, const xsums *xs,          \
                                  float *y)                                                   \
    {                                                                                         \
        return rows_k_one_group(T, w, row_bytes, nsb, n, x, xd, xs, y);                       \
    }                                                                                         \
    static size_t rows_groups_##name(const uint8_t *w, size_t row_bytes, size_t nsb,          \
                                     size_t n, const int8_t *x, const float *xd,              \
                                     const xsums *xs, float *y)                               \
    {                                                                                         \
        return rows_k_groups(T, w, row_bytes, nsb, n, x, xd, xs, y);                          \
    }
ROWS_K(q4_k, ML_TYPE_Q4_K)
ROWS_K(q5_k, ML_TYPE_Q5_K)
ROWS_K(q6_k, ML_TYPE_Q6_K)
ROWS_K(q2_k, ML_TYPE_Q2_K)
ROWS_K(q3_k, ML_TYPE_Q3_K)
ROWS_K(iq4_xs, ML_TYPE_IQ4_XS)
#undef ROWS_K

/* The several-row form of a 256-element type for rows of nsb super-
 * blocks: pairs up to four, one group up to eight, pipelined groups
 * beyond; NULL for the others. */
static rows_fn rows_for(ml_type t, size_t nsb)
{
    if (nsb > 8) {
        switch (t) {
        case ML_TYPE_Q4_K: return rows_groups_q4_k;
        case ML_TYPE_Q5_K: return rows_groups_q5_k;
        /* AVX2's Q6_K pipelined is slower: sixteen registers */
        case ML_TYPE_Q6_K: return HAVE_VNNI ? rows_groups_q6_k : NULL;
        case ML_TYPE_Q2_K: return rows_groups_q2_k;
        case ML_TYPE_Q3_K: return rows_groups_q3_k;
        case ML_TYPE_IQ4_XS: return rows_groups_iq4_xs;
        default: return NULL;
        }
    }
    const int pairs = nsb <= 4;
    switch (t) {
    case ML_TYPE_Q4_K: return pairs ? rows_pairs_q4_k : rows_one_q4_k;
    case ML_TYPE_Q5_K: return pairs ? rows_pairs_q5_k : rows_one_q5_k;
    case ML_TYPE_Q6_K: return pairs ? rows_pairs_q6_k : rows_one_q6_k;
    case ML_TYPE_Q2_K: return pairs ? rows_pairs_q2_k : rows_one_q2_k;
    case ML_TYPE_Q3_K: return pairs ? rows_pairs_q3_k : rows_one_q3_k;
    case ML_TYPE_IQ4_XS: return pairs ? rows_pairs_iq4_xs : rows_one_iq4_xs;
    default: return NULL;
    }
}

/* The two-row form of a 32-element nibble type; NULL for the others
 * (and for Q4_1, Q5_0 and Q5_1 without VNNI, whose row_32 is not by
 * pairs: nibbles_at). */
static rows_fn rows_32_for(ml_type t)
{
    if (!nibbles_at(t))
        return NULL;
    switch (t) {
    case ML_TYPE_Q4_1: return rows_q4_1;
    case ML_TYPE_Q5_0: return rows_q5_0;
    case ML_TYPE_Q5_1: return rows_q5_1;
    case ML_TYPE_IQ4_NL: return rows_iq4_nl;
    case ML_TYPE_MXFP4: return rows_mxfp4;
    default: return NULL;
    }
}

/* The types taken a few tokens at a time (matmul_k_tokens) and in the
 * lanes (matmul_k_lanes) below. */
ALWAYS_INLINE int kl_type(ml_type t)
{
    return t == ML_TYPE_Q4_K || t == ML_TYPE_Q5_K || t == ML_TYPE_Q6_K || t == ML_TYPE_IQ4_XS;
}

#if HAVE_VNNI
/* ---- a few tokens of Q4_K, Q5_K, Q6_K, IQ4_XS: each super-block unpacked once ----
 *
 * As matmul_32_tokens for the nibble types: a verify step or a few
 * sequences multiply the same rows by 2 to KT_MAX tokens, and row_k
 * would unpack each super-block's quants again for every token.  Here
 * they are unpacked once (k45_unpack, q6_unpack, iq4xs_unpack, as the
 * sums_* do for one) and each token's sums, float steps and fold are row_k's:
 * matvec's bits. */
#define KT_MAX 8 /* nine on go to the lanes (kl_min_tok) or the tiles */

/* Super-block k of a row (at b) unpacked once, then each token t's
 * sums_k into is[t][j], ms[t][j]. */
ALWAYS_INLINE void kt_block(ml_type T, const uint8_t *b, size_t k, size_t nt, const nt_x *tk,
                            __m256i is[][8], __m256i ms[][8], size_t j)
{
    if (T == ML_TYPE_IQ4_XS) {
        prefetch_ahead_l2(b, PREFETCH_K, 3);
        iq4xs_unpacked u;
        iq4xs_unpack(b, &u);
        for (size_t t = 0; t < nt; t++) {
            iq4xs_sums(&u, tk[t].xs->paired + 256 * k, tk[t].xs->s32 + 8 * k, &is[t][j]);
            ms[t][j] = _mm256_setzero_si256();
        }
        return;
    }
    if (T == ML_TYPE_Q6_K) {
        prefetch_ahead_l2(b, PREFETCH_K, 4);
        q6_unpacked u;
        q6_unpack(b, &u);
        for (size_t t = 0; t < nt; t++) {
            q6_sums(&u, tk[t].x + 256 * k, tk[t].xs->s16 + 16 * k, &is[t][j]);
            ms[t][j] = _mm256_setzero_si256();
        }
        return;
    }
    prefetch_ahead_l2(b, PREFETCH_K, 3);
    k45_unpacked u;
    k45_unpack(T, b, &u);
    for (size_t t = 0; t < nt; t++)
        k45_sums(&u, tk[t].xs->paired + 256 * k, tk[t].xs->s32 + 8 * k, &is[t][j], &ms[t][j]);
}

/* One row against nt <= KT_MAX tokens: out[t] its dot with token t. */
ALWAYS_INLINE void row_k_tokens(ml_type T, const uint8_t *w, size_t nsb, size_t nt,
                                const nt_x *tk, float *out)
{
    const size_t bytes = ml__blk_k_bytes(T);
    __m256 acc[KT_MAX];
    for (size_t t = 0; t < KT_MAX; t++)
        acc[t] = _mm256_setzero_ps();
    for (size_t g = 0; g < nsb; g += 8) {
        const size_t m = nsb - g < 8 ? nsb - g : 8;
        const uint8_t *wg = w + g * bytes;
        __m256i is[KT_MAX][8], ms[KT_MAX][8];
        for (size_t j = 0; j < 8; j++) {
            if (j >= m) {
                for (size_t t = 0; t < nt; t++)
                    is[t][j] = ms[t][j] = _mm256_setzero_si256();
                continue;
            }
            kt_block(T, wg + j * bytes, g + j, nt, tk, is, ms, j);
        }
        const __m256 d = f16_lanes(wg, bytes, k_d_at(T), m);
        const __m256 dmin =
            k_dmin_at(T) < 0 ? _mm256_setzero_ps() : f16_lanes(wg, bytes, k_dmin_at(T), m);
        for (size_t t = 0; t < nt; t++) {
            const __m256i msum = k_dmin_at(T) < 0 ? _mm256_setzero_si256() : hsum8x8(ms[t]);
            acc[t] = _mm256_add_ps(acc[t], k_s(T, hsum8x8(is[t]), msum, d, dmin,
                                               xd_lanes(tk[t].xd + g, m)));
        }
    }
    for (size_t t = 0; t < nt; t++)
        out[t] = fold8(acc[t]);
}

/* Rows [r0, r1) x n_tok (2 to KT_MAX) of Q4_K, Q5_K, Q6_K or IQ4_XS;
 * 0 for another type or when out of memory. */
static int matmul_k_tokens(ml_type T, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                           const int8_t *xq, const float *xd, size_t n_tok, float *y, size_t ldy)
{
    if (!kl_type(T))
        return 0;
    const size_t nsb = cols / 256, bytes = ml__blk_k_bytes(T);
    nt_x tk[KT_MAX];
    if (!few_tokens(xq, xd, cols, nsb, n_tok, T == ML_TYPE_Q6_K, T != ML_TYPE_Q6_K ? X_PAIRS : X_PLAIN, tk))
        return 0;
    float out[KT_MAX];
    for (size_t r = r0; r < r1; r++) {
        switch (T) { /* one instance a type */
        case ML_TYPE_Q4_K: row_k_tokens(ML_TYPE_Q4_K, w + r * nsb * bytes, nsb, n_tok, tk, out); break;
        case ML_TYPE_Q5_K: row_k_tokens(ML_TYPE_Q5_K, w + r * nsb * bytes, nsb, n_tok, tk, out); break;
        case ML_TYPE_Q6_K: row_k_tokens(ML_TYPE_Q6_K, w + r * nsb * bytes, nsb, n_tok, tk, out); break;
        default: row_k_tokens(ML_TYPE_IQ4_XS, w + r * nsb * bytes, nsb, n_tok, tk, out); break;
        }
        for (size_t t = 0; t < n_tok; t++)
            y[t * ldy + r] = out[t];
    }
    return 1;
}
#endif

/* ---- F32, F16, BF16: rule 5's eight float sums per block ---- */

/* Weights 8m..8m+7 of a block of type T as f32 (widened exactly). */
ALWAYS_INLINE __m256 float8(ml_type T, const uint8_t *b, int m)
{
    switch (T) {
    case ML_TYPE_F32: return _mm256_loadu_ps((const float *)b + 8 * m);
    case ML_TYPE_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + 16 * m)));
    default: /* BF16: the high half of an f32 */
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(b + 16 * m))), 16));
    }
}

/* p[l] = ((((+0 + w[l]·x[l]) + w[8+l]·x[8+l]) + ...) of one block. */
ALWAYS_INLINE __m256 float_partials(ml_type T, const uint8_t *b, const int8_t *x)
{
    __m256 p = _mm256_setzero_ps();
    UNROLL
    for (int m = 0; m < 4; m++) {
        const __m128i x8 = _mm_loadl_epi64((const __m128i *)(x + 8 * m));
        const __m256 xf = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(x8));
        p = _mm256_add_ps(p, _mm256_mul_ps(float8(T, b, m), xf));
    }
    return p;
}

/* Eight blocks' partials transposed (lane j: block j), then rule 3's
 * fold lane by lane: s_j = fold8(p_j) · xd_j. */
ALWAYS_INLINE float row_floats(ml_type T, size_t bytes, const uint8_t *w, size_t nb,
                               const int8_t *x, const float *xd)
{
    __m256 acc = _mm256_setzero_ps();
    for (size_t g = 0; g < nb; g += 8) {
        const size_t m = nb - g < 8 ? nb - g : 8;
        __m256i p[8];
        UNROLL
        for (size_t j = 0; j < 8; j++)
            p[j] = j < m ? _mm256_castps_si256(
                               float_partials(T, w + (g + j) * bytes, x + 32 * (g + j)))
                         : _mm256_setzero_si256();
        transpose8x8(p);
        const __m256 f = _mm256_add_ps(
            _mm256_add_ps(_mm256_add_ps(_mm256_castsi256_ps(p[0]), _mm256_castsi256_ps(p[4])),
                          _mm256_add_ps(_mm256_castsi256_ps(p[2]), _mm256_castsi256_ps(p[6]))),
            _mm256_add_ps(_mm256_add_ps(_mm256_castsi256_ps(p[1]), _mm256_castsi256_ps(p[5])),
                          _mm256_add_ps(_mm256_castsi256_ps(p[3]), _mm256_castsi256_ps(p[7]))));
        acc = _mm256_add_ps(acc, _mm256_mul_ps(f, xd_lanes(xd + g, m)));
    }
    return fold8(acc);
}

static float row_f32(const uint8_t *w, size_t nb, const int8_t *x, const float *xd,
                     const xsums *xs)
{
    (void)xs;
    return row_floats(ML_TYPE_F32, 128, w, nb, x, xd);
}

static float row_f16(const uint8_t *w, size_t nb, const int8_t *x, const float *xd,
                     const xsums *xs)
{
    (void)xs;
    return row_floats(ML_TYPE_F16, 64, w, nb, x, xd);
}

static float row_bf16(const uint8_t *w, size_t nb, const int8_t *x, const float *xd,
                      const xsums *xs)
{
    (void)xs;
    return row_floats(ML_TYPE_BF16, 64, w, nb, x, xd);
}

/* ---- the entries ---- */

/* A row's dot of n units (blocks of 32, or super-blocks of 256). */
typedef float (*row_fn)(const uint8_t *w, size_t n, const int8_t *x, const float *xd,
                        const xsums *xs);

/* This file's row dot for t (and whether it needs the half sums), or NULL. */
static row_fn row_for(ml_type t, int *halves)
{
    *halves = t == ML_TYPE_Q6_K || t == ML_TYPE_Q3_K || t == ML_TYPE_Q2_K;
    switch (t) {
    case ML_TYPE_Q4_K: return row_q4_k;
    case ML_TYPE_Q5_K: return row_q5_k;
    case ML_TYPE_Q6_K: return row_q6_k;
    case ML_TYPE_Q2_K: return row_q2_k;
    case ML_TYPE_Q3_K: return row_q3_k;
    case ML_TYPE_IQ4_XS: return row_iq4_xs;
    case ML_TYPE_Q4_1: return row_q4_1;
    case ML_TYPE_Q5_0: return row_q5_0;
    case ML_TYPE_Q5_1: return row_q5_1;
    case ML_TYPE_IQ4_NL: return row_iq4_nl;
    case ML_TYPE_MXFP4: return row_mxfp4;
    case ML_TYPE_F32: return row_f32;
    case ML_TYPE_F16: return row_f16;
    case ML_TYPE_BF16: return row_bf16;
    default: return NULL;
    }
}

static void matvec_blk(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                       const int8_t *xq, const float *xd, float *y)
{
    int halves;
    const row_fn row = row_for(t, &halves);
    if (!row || cols > XS_COLS) {
        ml__matvec_blk_scalar(t, w, cols, r0, r1, xq, xd, y);
        return;
    }
    xsums xs;
    xsums_init(&xs, xq, cols, halves);
    int8_t paired[XS_COLS];
    if (nibbles_at(t)) {
        x_regroup(paired, xq, cols, X_SPREAD_D); /* every whole group of blocks (group_isum) */
        xs.paired = paired;
    } else if ((HAVE_VNNI && t == ML_TYPE_IQ4_XS) || t == ML_TYPE_Q4_K || t == ML_TYPE_Q5_K) {
        x_regroup(paired, xq, cols, X_PAIRS_D);
        xs.paired = paired;
    }
    const size_t row_bytes = ml__blk_row_bytes(t, cols);
    uint32_t elems = 1;
    ml_type_block(t, &elems, NULL, NULL);
    const size_t units = cols / (elems == 256 ? 256 : 32); /* the float types: blocks of 32 */
    const rows_fn rows = elems == 256 ? rows_for(t, units) : rows_32_for(t);
    size_t r = r0;
    if (rows && r1 > r0)
        r += rows(w + r * row_bytes, row_bytes, units, r1 - r0, xq, xd, &xs, y + r);
    for (; r < r1; r++)
        y[r] = row(w + r * row_bytes, units, xq, xd, &xs);
}

/* ---- matmul of the 256-element types, Q4_1 and Q5_1: transposed
 * super-blocks, tiles ----
 *
 * A super-block's eight sub-blocks, weights and activations alike, are
 * transposed (transpose8x8: register g, lane j = bytes 4g..4g+3 of
 * sub-block j), so that eight byte dot products leave isum_j in lane j
 * with no horizontal sums (Q6_K: registers 0-3 the first half, 4-7 the
 * second).  The weights of TILE_ROWS rows are decoded and transposed once
 * for TILE_TOK tokens, the activations once per call for all rows.
 * The 256-element types (rule 6): lane j then holds sc_j·isum_j (and
 * m_j·asum_j), exact integers; the TILE_TOK = 8 tokens' vectors of one
 * row are added up by one hsum8x8 (lane t: token t's isum of the
 * super-block), and the float step is taken for the eight tokens at
 * once, into acc[row][k % 8] (lane t), folded lane by lane at the end:
 * each (token, row) result is matvec's bits.  Q4_1 and Q5_1 (rule 5)
 * take eight consecutive blocks for a super-block (row_32's groups, lane
 * j block 8k + j), a last partial group padded with zero quants,
 * activations, scales and sums, whose lanes add +0 as in row_32. */
#define TILE_ROWS 4
#define TILE_TOK 8

/* Lane j: Σ over g in [g0, g0 + n) of the four byte products of w[g] and
 * x[g] in lane j.  Without VNNI the 16-bit pair sums are added first, as
 * many as stay below 2^15: Q4_K's and Q4_1's all eight (2·15·127 each),
 * Q5_K's and Q5_1's four (2·31·127), Q6_K's two (2·63·127). */
ALWAYS_INLINE __m256i tile_dot(const __m256i *w, const __m256i *x, int n, int per16)
{
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    (void)per16;
    __m256i isum = _mm256_setzero_si256();
    UNROLL
    for (int g = 0; g < n; g++)
        isum = _mm256_dpbusd_epi32(isum, w[g], x[g]);
    return isum;
#else
    __m256i isum = _mm256_setzero_si256();
    UNROLL
    for (int g = 0; g < n; g += per16) {
        __m256i p = _mm256_maddubs_epi16(w[g], x[g]);
        UNROLL
        for (int h = 1; h < per16; h++)
            p = _mm256_add_epi16(p, _mm256_maddubs_epi16(w[g + h], x[g + h]));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
    }
    return isum;
#endif
}

/* One token's activations, super-block by super-block (group of eight
 * blocks) transposed; a last partial group padded with zeros. */
static void x_transposed(const int8_t *x, size_t cols, int8_t *xt)
{
    for (size_t k = 0; k < (cols + 255) / 256; k++) {
        __m256i v[8];
        UNROLL
        for (size_t j = 0; j < 8; j++)
            v[j] = 256 * k + 32 * j < cols ? load256(x + 256 * k + 32 * j) : _mm256_setzero_si256();
        transpose8x8(v);
        UNROLL
        for (int g = 0; g < 8; g++)
            _mm256_storeu_si256((__m256i *)(xt + 256 * k + 32 * g), v[g]);
    }
}

/* A super-block of a row, decoded for the tile. */
typedef struct tile_row {
    __m256i q[8];         /* the unsigned quants, transposed (IQ4_XS: below) */
    __m256i sc, mn;       /* Q4_K, Q5_K: the sub-blocks' scales and mins */
    __m256i sc_lo, sc_hi; /* Q6_K, Q3_K, Q2_K: the halves' scales, */
    __m256i sc16;         /* and all sixteen as int16 */
    __m256i mn16;         /* Q2_K: the halves' mins as int16 */
    __m256i ls;           /* IQ4_XS: the sub-blocks' scales minus 32 */
    __m256i mag[8];       /* IQ4_XS without VNNI: |level| (q: the signed levels) */
    __m256 d, dmin;       /* broadcast */
} tile_row;

/* m: Q4_1's and Q5_1's blocks in the group (row_32's decoding), d and
 * dmin their d and m as lanes, +0 from m on. */
ALWAYS_INLINE void tile_decode(ml_type T, const uint8_t *b, size_t m, tile_row *t)
{
    const __m256i low = _mm256_set1_epi8(15);
    if (T == ML_TYPE_Q4_1 || T == ML_TYPE_Q5_1) {
        const size_t bb = T == ML_TYPE_Q4_1 ? 20 : 24;
        UNROLL
        for (size_t j = 0; j < 8; j++) {
            t->q[j] = _mm256_setzero_si256();
            if (j < m && T == ML_TYPE_Q4_1)
                t->q[j] = nibbles32(b + bb * j + 4);
            if (j < m && T == ML_TYPE_Q5_1)
                t->q[j] = q5_quants(b + bb * j + 4);
        }
        t->d = f16_lanes(b, bb, 0, m), t->dmin = f16_lanes(b, bb, 2, m);
    } else if (T == ML_TYPE_Q4_K || T == ML_TYPE_Q5_K) {
        const int q5 = T == ML_TYPE_Q5_K;
        const __m256i qh = q5 ? load256(b + 16) : _mm256_setzero_si256();
        const __m256i bit = _mm256_set1_epi8(16);
        UNROLL
        for (int g = 0; g < 4; g++) {
            const __m256i q = load256(b + (q5 ? 48 : 16) + 32 * g);
            t->q[2 * g] = _mm256_and_si256(q, low);
            t->q[2 * g + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), low);
            if (q5) { /* row_q5_k's fifth bits */
                const __m256i h0 = _mm256_and_si256(g < 2 ? _mm256_slli_epi16(qh, 4 - 2 * g)
                                                          : _mm256_srli_epi16(qh, 2 * g - 4),
                                                    bit);
                const __m256i h1 = _mm256_and_si256(g < 2 ? _mm256_slli_epi16(qh, 3 - 2 * g)
                                                          : _mm256_srli_epi16(qh, 2 * g - 3),
                                                    bit);
                t->q[2 * g] = _mm256_or_si256(t->q[2 * g], h0);
                t->q[2 * g + 1] = _mm256_or_si256(t->q[2 * g + 1], h1);
            }
        }
        __m256i sc, mn;
        k4_scales_mins(b + 4, &sc, &mn);
        t->sc = sc, t->mn = mn;
        t->d = _mm256_set1_ps(f16_at(b)), t->dmin = _mm256_set1_ps(f16_at(b + 2));
    } else if (T == ML_TYPE_Q2_K || T == ML_TYPE_Q3_K) { /* row_q2_k's and row_q3_k's decoding */
        const int q3 = T == ML_TYPE_Q3_K;
        const __m256i three = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
        const __m256i hm = q3 ? load256(b) : _mm256_setzero_si256();
        UNROLL
        for (int j = 0; j < 8; j++) {
            const __m256i q = load256(b + (q3 ? 32 : 16) + 32 * (j / 4));
            t->q[j] = _mm256_and_si256(_mm256_srli_epi16(q, 2 * (j % 4)), three);
            if (q3)
                t->q[j] = _mm256_or_si256(
                    t->q[j], _mm256_and_si256(j <= 2 ? _mm256_slli_epi16(hm, 2 - j)
                                                     : _mm256_srli_epi16(hm, j - 2),
                                              four));
        }
        if (q3) {
            t->sc16 = q3_scales16(b + 96);
            t->d = _mm256_set1_ps(f16_at(b + 108));
        } else {
            const __m256i b16 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)b));
            t->sc16 = _mm256_and_si256(b16, _mm256_set1_epi16(15));
            t->mn16 = _mm256_srli_epi16(b16, 4);
            t->d = _mm256_set1_ps(f16_at(b + 80)), t->dmin = _mm256_set1_ps(f16_at(b + 82));
        }
        t->sc_lo = _mm256_srai_epi32(_mm256_slli_epi32(t->sc16, 16), 16);
        t->sc_hi = _mm256_srai_epi32(t->sc16, 16);
    } else if (T == ML_TYPE_IQ4_XS) {
        /* VNNI: the levels + 128 (1..241, unsigned; 128·Σx taken off
         * later); else the signed levels and their magnitudes, the sign
         * moved onto x per token (vpmaddubsw could overflow on 241·127) */
        UNROLL
        for (int j = 0; j < 8; j++)
            t->q[j] = levels(nibbles32(b + 8 + 16 * j), iq4nl_levels);
        t->ls = iq4_xs_scales(b, _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
        t->d = _mm256_set1_ps(f16_at(b));
        transpose8x8(t->q);
        UNROLL
        for (int g = 0; g < 8; g++)
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
            t->q[g] = _mm256_xor_si256(t->q[g], _mm256_set1_epi8(-128));
#else
            t->mag[g] = _mm256_abs_epi8(t->q[g]);
#endif
        return;
    } else { /* Q6_K: row_q6_k's decoding */
        const __m256i two = _mm256_set1_epi8(3 << 4);
        UNROLL
        for (int h = 0; h < 2; h++) {
            const __m256i l0 = load256(b + 64 * h), l1 = load256(b + 64 * h + 32);
            const __m256i qh = load256(b + 128 + 32 * h);
            t->q[4 * h] = _mm256_or_si256(_mm256_and_si256(l0, low),
                                          _mm256_and_si256(_mm256_slli_epi16(qh, 4), two));
            t->q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, low),
                                              _mm256_and_si256(_mm256_slli_epi16(qh, 2), two));
            t->q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low),
                                              _mm256_and_si256(qh, two));
            t->q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low),
                                              _mm256_and_si256(_mm256_srli_epi16(qh, 2), two));
        }
        t->sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 192)));
        t->sc_lo = _mm256_srai_epi32(_mm256_slli_epi32(t->sc16, 16), 16);
        t->sc_hi = _mm256_srai_epi32(t->sc16, 16);
        t->d = _mm256_set1_ps(f16_at(b + 208));
    }
    transpose8x8(t->q);
}

/* Rule 5's s of Q4_1's or Q5_1's eight blocks of a decoded row and a
 * token (group_s's line). */
ALWAYS_INLINE __m256 tile_s32(ml_type T, const tile_row *w, const __m256i *x, __m256 xdv,
                              const xsums *xs, size_t k)
{
    const __m256i isum = tile_dot(w->q, x, 8, T == ML_TYPE_Q4_1 ? 8 : 4);
    const __m256 asum = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(xs->s32 + 8 * k)));
    return _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(w->d, xdv)),
                         _mm256_mul_ps(asum, _mm256_mul_ps(w->dmin, xdv)));
}

/* Rows [rb, rb + nr) of Q4_1 or Q5_1 x the nt tokens whose transposed
 * activations are at xt (256 · nsb apart), sums at xs and scales at xd
 * (a row's blocks apart): groups of eight blocks for super-blocks, the
 * last one partial (m blocks). */
ALWAYS_INLINE void tile_32(ml_type T, const uint8_t *w, size_t row_bytes, size_t nsb, size_t rb,
                           size_t nr, const int8_t *xt, const xsums *xs, const float *xd,
                           size_t nt, float *y, size_t ldy)
{
    const size_t cols = 256 * nsb;
    const size_t bb = T == ML_TYPE_Q4_1 ? 20 : 24;
    const size_t nb = row_bytes / bb;
    __m256 acc[TILE_ROWS][TILE_TOK];
    for (size_t r = 0; r < nr; r++)
        for (size_t t = 0; t < nt; t++)
            acc[r][t] = _mm256_setzero_ps();
    for (size_t k = 0; k < nsb; k++) {
        const size_t m = nb - 8 * k < 8 ? nb - 8 * k : 8;
        tile_row rows[TILE_ROWS];
        for (size_t r = 0; r < nr; r++)
            tile_decode(T, w + (rb + r) * row_bytes + 8 * bb * k, m, &rows[r]);
        for (size_t t = 0; t < nt; t++) {
            __m256i x[8];
            UNROLL
            for (int g = 0; g < 8; g++)
                x[g] = load256(xt + t * cols + 256 * k + 32 * g);
            const __m256 xdv = xd_lanes(xd + t * nb + 8 * k, m);
            for (size_t r = 0; r < nr; r++)
                acc[r][t] = _mm256_add_ps(acc[r][t], tile_s32(T, &rows[r], x, xdv, &xs[t], k));
        }
    }
    for (size_t r = 0; r < nr; r++)
        for (size_t t = 0; t < nt; t++)
            y[t * ldy + rb + r] = fold8(acc[r][t]);
}

/* Rule 6's sums of super-block k of a decoded row and a token: lane j
 * sc_j·isum_j (*is) and Q4_K's, Q5_K's, Q2_K's m_j·asum_j (*ms). */
ALWAYS_INLINE void tile_sums(ml_type T, const tile_row *w, const __m256i *x, const xsums *xs,
                             size_t k, __m256i *is, __m256i *ms)
{
    *ms = _mm256_setzero_si256();
    if (T == ML_TYPE_Q4_K || T == ML_TYPE_Q5_K) {
        const __m256i asum = _mm256_loadu_si256((const __m256i *)(xs->s32 + 8 * k));
        *is = _mm256_mullo_epi32(tile_dot(w->q, x, 8, T == ML_TYPE_Q4_K ? 8 : 4), w->sc);
        *ms = _mm256_mullo_epi32(asum, w->mn);
        return;
    }
    if (T == ML_TYPE_IQ4_XS) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
        const __m256i asum = _mm256_loadu_si256((const __m256i *)(xs->s32 + 8 * k));
        const __m256i sum = _mm256_sub_epi32(tile_dot(w->q, x, 8, 1), _mm256_slli_epi32(asum, 7));
#else
        __m256i sum = _mm256_setzero_si256();
        UNROLL
        for (int g = 0; g < 8; g++)
            sum = _mm256_add_epi32(sum, dot_u8s8(w->mag[g], _mm256_sign_epi8(x[g], w->q[g])));
#endif
        *is = _mm256_mullo_epi32(sum, w->ls);
        return;
    }
    const __m256i a16 = _mm256_loadu_si256((const __m256i *)(xs->s16 + 16 * k));
    if (T == ML_TYPE_Q2_K || T == ML_TYPE_Q3_K) {
        /* isum = sc_lo·Σ q·x (first half) + sc_hi·(second), Q3_K's q
         * unsigned (q + 4·hbit) and 4·(Σ sc·asum) taken off; Q2_K's mins
         * msum = Σ mn·asum */
        const __m256i lo = tile_dot(w->q, x, 4, 4), hi = tile_dot(w->q + 4, x + 4, 4, 4);
        *is = _mm256_add_epi32(_mm256_mullo_epi32(lo, w->sc_lo), _mm256_mullo_epi32(hi, w->sc_hi));
        if (T == ML_TYPE_Q3_K)
            *is = _mm256_sub_epi32(*is, _mm256_slli_epi32(_mm256_madd_epi16(a16, w->sc16), 2));
        else
            *ms = _mm256_madd_epi16(a16, w->mn16);
        return;
    }
    /* Q6_K: isum = sc_lo·Σ q6u·x (first half) + sc_hi·(second) - 32·(Σ sc·asum) */
    const __m256i lo = tile_dot(w->q, x, 4, 2), hi = tile_dot(w->q + 4, x + 4, 4, 2);
    const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(a16, w->sc16), 5);
    *is = _mm256_sub_epi32(
        _mm256_add_epi32(_mm256_mullo_epi32(lo, w->sc_lo), _mm256_mullo_epi32(hi, w->sc_hi)), corr);
}

/* Lane t < nt: token t's activation scale of super-block k (xd: nsb a
 * token); +0 from nt on. */
ALWAYS_INLINE float xd_token(const float *xd, size_t nsb, size_t k, size_t t, size_t nt)
{
    return t < nt ? xd[t * nsb + k] : 0.0f;
}

ALWAYS_INLINE __m256 xd_tokens(const float *xd, size_t nsb, size_t k, size_t nt)
{
    /* into a register lane by lane (f16_lanes' reason) */
    return _mm256_setr_ps(xd_token(xd, nsb, k, 0, nt), xd_token(xd, nsb, k, 1, nt),
                          xd_token(xd, nsb, k, 2, nt), xd_token(xd, nsb, k, 3, nt),
                          xd_token(xd, nsb, k, 4, nt), xd_token(xd, nsb, k, 5, nt),
                          xd_token(xd, nsb, k, 6, nt), xd_token(xd, nsb, k, 7, nt));
}

/* Rows [rb, rb + nr) of a 256-element type T x the nt tokens whose
 * transposed activations are at xt (256 · nsb apart), sums at xs and
 * scales at xd (nsb apart: rule 6's one per super-block). */
ALWAYS_INLINE void tile_k(ml_type T, const uint8_t *w, size_t row_bytes, size_t nsb, size_t rb,
                          size_t nr, const int8_t *xt, const xsums *xs, const float *xd,
                          size_t nt, float *y, size_t ldy)
{
    _Static_assert(TILE_TOK == 8, "a row's tokens are the eight lanes of one hsum8x8");
    const size_t cols = 256 * nsb, bytes = ml__blk_k_bytes(T);
    const int mins = k_dmin_at(T) >= 0;
    __m256 acc[TILE_ROWS][8]; /* [row][k % 8], lane t: token t */
    for (size_t r = 0; r < nr; r++)
        for (int a = 0; a < 8; a++)
            acc[r][a] = _mm256_setzero_ps();
    for (size_t k = 0; k < nsb; k++) {
        tile_row rows[TILE_ROWS];
        for (size_t r = 0; r < nr; r++)
            tile_decode(T, w + (rb + r) * row_bytes + bytes * k, 8, &rows[r]);
        __m256i is[TILE_ROWS][TILE_TOK], ms[TILE_ROWS][TILE_TOK];
        for (size_t t = 0; t < TILE_TOK; t++) {
            if (t >= nt) {
                for (size_t r = 0; r < nr; r++)
                    is[r][t] = ms[r][t] = _mm256_setzero_si256();
                continue;
            }
            __m256i x[8];
            UNROLL
            for (int g = 0; g < 8; g++)
                x[g] = load256(xt + t * cols + 256 * k + 32 * g);
            for (size_t r = 0; r < nr; r++)
                tile_sums(T, &rows[r], x, &xs[t], k, &is[r][t], &ms[r][t]);
        }
        const __m256 xdv = xd_tokens(xd, nsb, k, nt);
        for (size_t r = 0; r < nr; r++) {
            const __m256i msum = mins ? hsum8x8(ms[r]) : _mm256_setzero_si256();
            const __m256 s = k_s(T, hsum8x8(is[r]), msum, rows[r].d, rows[r].dmin, xdv);
            acc[r][k % 8] = _mm256_add_ps(acc[r][k % 8], s);
        }
    }
    for (size_t r = 0; r < nr; r++) {
        /* rule 3's fold, lane by lane */
        const __m256 f = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(acc[r][0], acc[r][4]),
                                                     _mm256_add_ps(acc[r][2], acc[r][6])),
                                       _mm256_add_ps(_mm256_add_ps(acc[r][1], acc[r][5]),
                                                     _mm256_add_ps(acc[r][3], acc[r][7])));
        float out[TILE_TOK];
        _mm256_storeu_ps(out, f);
        for (size_t t = 0; t < nt; t++)
            y[t * ldy + rb + r] = out[t];
    }
}

/* One instantiation of the always-inline tile per type, so that each
 * type's decoding is folded into its own loop. */
#define TILE_OF(name, T, tiles)                                                                 \
    static void tile_##name(const uint8_t *w, size_t row_bytes, size_t nsb, size_t rb,        \
                            size_t nr, const int8_t *xt, const xsums *xs, const float *xd,    \
                            size_t nt, float *y, size_t ldy)                                  \
    {                                                                                         \
        tiles(T, w, row_bytes, nsb, rb, nr, xt, xs, xd, nt, y, ldy);                          \
    }
TILE_OF(q4_k, ML_TYPE_Q4_K, tile_k)
TILE_OF(q5_k, ML_TYPE_Q5_K, tile_k)
TILE_OF(iq4_xs, ML_TYPE_IQ4_XS, tile_k)
TILE_OF(q2_k, ML_TYPE_Q2_K, tile_k)
TILE_OF(q3_k, ML_TYPE_Q3_K, tile_k)
TILE_OF(q6_k, ML_TYPE_Q6_K, tile_k)
TILE_OF(q4_1, ML_TYPE_Q4_1, tile_32)
TILE_OF(q5_1, ML_TYPE_Q5_1, tile_32)
#undef TILE_OF

typedef void (*tile_fn_t)(const uint8_t *w, size_t row_bytes, size_t nsb, size_t rb, size_t nr,
                          const int8_t *xt, const xsums *xs, const float *xd, size_t nt, float *y,
                          size_t ldy);

/* The tiles for t, or NULL. */
static tile_fn_t tile_fn(ml_type t)
{
    switch (t) {
    case ML_TYPE_Q4_K: return tile_q4_k;
    case ML_TYPE_Q5_K: return tile_q5_k;
    case ML_TYPE_Q6_K: return tile_q6_k;
    case ML_TYPE_IQ4_XS: return tile_iq4_xs;
    case ML_TYPE_Q2_K: return tile_q2_k;
    case ML_TYPE_Q3_K: return tile_q3_k;
    case ML_TYPE_Q4_1: return tile_q4_1;
    case ML_TYPE_Q5_1: return tile_q5_1;
    default: return NULL;
    }
}

/* 0 when out of memory (the caller then goes a token at a time). */
static int matmul_tiled(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, size_t n_tok, float *y, size_t ldy)
{
    const size_t nsb = (cols + 255) / 256, row_bytes = ml__blk_row_bytes(t, cols);
    xsums *xs = malloc(TILE_TOK * sizeof *xs);
    int8_t *xt = malloc(TILE_TOK * 256 * nsb);
    if (!xs || !xt) {
        free(xs);
        free(xt);
        return 0;
    }
    for (size_t t0 = 0; t0 < n_tok; t0 += TILE_TOK) {
        const size_t nt = n_tok - t0 < TILE_TOK ? n_tok - t0 : TILE_TOK;
        for (size_t k = 0; k < nt; k++) {
            x_transposed(xq + (t0 + k) * cols, cols, xt + k * 256 * nsb);
            xsums_init(&xs[k], xq + (t0 + k) * cols, cols,
                       t == ML_TYPE_Q6_K || t == ML_TYPE_Q3_K || t == ML_TYPE_Q2_K);
        }
        for (size_t rb = r0; rb < r1; rb += TILE_ROWS) {
            const size_t nr = r1 - rb < TILE_ROWS ? r1 - rb : TILE_ROWS;
            tile_fn(t)(w, row_bytes, nsb, rb, nr, xt, xs, xd + t0 * ml__blk_xd_count(t, cols), nt,
                       y + t0 * ldy, ldy);
        }
    }
    free(xs);
    free(xt);
    return 1;
}

/* ---- matmul of Q4_K, Q5_K, Q6_K and IQ4_XS with the tokens in the lanes ----
 *
 * The tiles above put a super-block's sub-blocks in the lanes, so every
 * (row, token) pair pays a scale multiply and a transpose of its own.
 * Here a register holds KL_TOK tokens' same four activations (lane t:
 * token t), a row's four quants are broadcast from memory into the
 * multiply-add (vpdpbusd; without VNNI vpmaddubsw, whose 16-bit pairs
 * are added a few at a time before vpmaddwd widens and scales them), and
 * the eight rows of a tile share each activation register: a
 * sub-block's sums land in the lanes of KL_TOK tokens at once, scaled by
 * one multiply per row.  The activations are rearranged once per chunk of
 * KL_CHUNK tokens, the rows decoded once per chunk and tile (kl_decode,
 * straight into the tile's form), not once per group of tokens.  The sums
 * are exact, and the float step and rule 3's order per (token, row) are
 * row_k's: matvec's bits. */
#if HAVE_VNNI
#define KL_TOK 16     /* tokens a group: the lanes of a 512-bit register */
typedef __m512i kl_vi;
typedef __m512 kl_vf;
#define KL(op) _mm512_##op
#else
#define KL_TOK 8      /* tokens a group: the lanes of a 256-bit register */
typedef __m256i kl_vi;
typedef __m256 kl_vf;
#define KL(op) _mm256_##op
#endif
#define KL_ROWS 8     /* rows a tile */
#define KL_CHUNK 256  /* tokens rearranged at once */

/* Fewer tokens than this go to matmul_k_tokens (up to KT_MAX) or the
 * tiles above: a group of sixteen lanes costs about what the tiles take
 * for eight tokens (one pass of TILE_TOK), less than two passes for
 * nine; Q6_K's lanes cost more (sixteen sub-blocks, and its rows'
 * decoding), so the tiles keep it to eleven (docs/speed-history.md,
 * section 22).  Without VNNI a group of eight lanes costs about the
 * tiles' ten tokens, and Q6_K's, whose runs are short, win only in
 * whole groups from about 22 (section 23). */
ALWAYS_INLINE size_t kl_min_tok(ml_type t)
{
#if HAVE_VNNI
    return t == ML_TYPE_Q6_K ? 12 : 9;
#else
    return t == ML_TYPE_Q6_K ? 22 : 11;
#endif
}

/* Four quants read as one int32 (for a broadcast operand). */
typedef int32_t kl_u32 __attribute__((may_alias, aligned(4)));

/* The types the lanes take: all of kl_type's but, without VNNI,
 * IQ4_XS, whose unsigned levels (up to 241) would saturate vpmaddubsw's
 * pairs (it keeps the tiles there). */
ALWAYS_INLINE int kl_lanes_type(ml_type t)
{
    return kl_type(t) && (HAVE_VNNI || t != ML_TYPE_IQ4_XS);
}

ALWAYS_INLINE kl_vi kl_zero(void)
{
#if HAVE_VNNI
    return _mm512_setzero_si512();
#else
    return _mm256_setzero_si256();
#endif
}

/* One row's super-block, decoded. */
typedef struct kl_row {
    uint8_t q[256];   /* unsigned quants (Q6_K: q6 without the -32;
                       * IQ4_XS: level + 128), or in the signed form
                       * (kr_signed) signed ones (Q6_K: q6 - 32; IQ4_XS:
                       * the levels) */
    int32_t sc[16];   /* sub-block scales: 8 of 32 elements (Q6_K: 16 of
                       * 16; IQ4_XS: ls - 32) */
    int32_t sp[16];   /* sc[j] as 16-bit pairs: (sc, 256·sc) for
                       * kl_scaled with VNNI, (sc, sc) without */
    int32_t mt[8];    /* 16-bit pairs weighting the sub-blocks' activation
                       * sums: Q4_K's, Q5_K's mins; Q6_K's 32·scale,
                       * IQ4_XS's 128·scale (the offsets taken off) */
    int32_t qx;       /* in the signed form: 128·Σ sc·q, what the
                       * activations' + 128 adds to the scaled sums */
    float d, dmin;
} kl_row;

/* A group of KL_TOK tokens' super-block. */
typedef struct kl_x {
    kl_vi c[64];      /* lane t: token t's activations 4c..4c+3 */
    kl_vi as[8];      /* lane t: sub-blocks 2p and 2p + 1's sums of x, 16 bits each */
    kl_vf xd;         /* lane t: token t's scale, +0 past the last token */
} kl_x;

ALWAYS_INLINE int kl_nsub(ml_type T)
{
    return T == ML_TYPE_Q6_K ? 16 : 8;
}

/* Token x's sub-block sums (xsums) into pairs[], nsub / 2 a super-block:
 * sub-blocks 2p and 2p + 1's as the 16-bit halves of one int32. */
static void k_pair_sums(ml_type T, const int8_t *x, size_t cols, int32_t *pairs)
{
    xsums xs;
    xsums_init(&xs, x, cols, T == ML_TYPE_Q6_K);
    const int nsub = kl_nsub(T);
    for (size_t k = 0; k < cols / 256; k++)
        for (int p = 0; p < nsub / 2; p++) {
            const int lo = nsub == 16 ? xs.s16[16 * k + 2 * p] : xs.s32[8 * k + 2 * p],
                      hi = nsub == 16 ? xs.s16[16 * k + 2 * p + 1] : xs.s32[8 * k + 2 * p + 1];
            *pairs++ = (int32_t)((uint32_t)(uint16_t)lo | (uint32_t)(uint16_t)hi << 16);
        }
}

/* Token x's pairs' sums (k_pair_sums) into lane t of xg[0..nsb)'s as[]. */
static void kl_x_sums(ml_type T, const int8_t *x, size_t cols, size_t t, kl_x *xg)
{
    int32_t pairs[XS_COLS / 256 * 8];
    k_pair_sums(T, x, cols, pairs);
    const int half = kl_nsub(T) / 2;
    for (size_t k = 0; k < cols / 256; k++)
        for (int p = 0; p < half; p++)
            memcpy((char *)&xg[k].as[p] + 4 * t, &pairs[k * (size_t)half + (size_t)p], 4);
}

/* 32 bytes at x of tokens [0, nt) (cols apart; nt <= KL_TOK) into c[0..8)
 * in the lanes' form (lane t of c[g]: bytes 4g..4g+3 of token t's), the
 * lanes from nt on zero. */
ALWAYS_INLINE void kl_x_chunk(const int8_t *x, size_t cols, size_t nt, kl_vi c[8])
{
    __m256i v[KL_TOK / 8][8];
    UNROLL
    for (size_t h = 0; h < KL_TOK / 8; h++) {
        UNROLL
        for (size_t t = 0; t < 8; t++)
            v[h][t] = 8 * h + t < nt ? load256(x + (8 * h + t) * cols) : _mm256_setzero_si256();
        transpose8x8(v[h]);
    }
    UNROLL
    for (int g = 0; g < 8; g++)
#if HAVE_VNNI
        c[g] = _mm512_inserti64x4(_mm512_castsi256_si512(v[0][g]), v[1][g], 1);
#else
        c[g] = v[0][g];
#endif
}

/* Tokens [0, nt) of a group (nt <= KL_TOK) into xg[0..nsb): x their
 * activations (cols apart), xd their scales (nsb apart); the lanes past
 * nt zero. */
static void kl_x_group(ml_type T, const int8_t *x, size_t cols, const float *xd, size_t nt,
                       kl_x *xg)
{
    const size_t nsb = cols / 256;
    for (size_t k = 0; k < nsb; k++) {
        for (int q = 0; q < 8; q++)
            kl_x_chunk(x + 256 * k + 32 * q, cols, nt, xg[k].c + 8 * q);
        _Alignas(64) float d[KL_TOK];
        for (size_t t = 0; t < KL_TOK; t++)
            d[t] = t < nt ? xd[t * nsb + k] : 0.0f;
        xg[k].xd = KL(load_ps)(d);
        for (int p = 0; p < 8; p++)
            xg[k].as[p] = kl_zero();
    }
    for (size_t t = 0; t < nt; t++)
        kl_x_sums(T, x + t * cols, cols, t, xg);
}

/* 128·Σ_s sc[s]·(Σ of sub-block s's quants, as signed bytes): what
 * the activations' + 128 adds to a super-block's scaled sums in the
 * signed form.  |Σ sc·q| <= 16·128·16·32 (Q6_K), so 128 times it fits. */
ALWAYS_INLINE int32_t kl_qx(const kl_row *o, int nsub)
{
    __m256i acc = _mm256_setzero_si256();
    for (int j = 0; j < 8; j++) {
        const __m256i pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), load256(o->q + 32 * j));
        const __m256i sc = nsub == 16 ? _mm256_setr_m128i(_mm_set1_epi16((int16_t)o->sc[2 * j]),
                                                          _mm_set1_epi16((int16_t)o->sc[2 * j + 1]))
                                      : _mm256_set1_epi16((int16_t)o->sc[j]);
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, sc));
    }
    const __m128i h = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    const __m128i q = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
    return 128 * _mm_cvtsi128_si32(_mm_add_epi32(q, _mm_shuffle_epi32(q, 0xb1)));
}

/* One super-block b of T decoded straight into o (sgn: in the signed
 * form, kr_signed). */
ALWAYS_INLINE void kl_decode(ml_type T, int sgn, const uint8_t *b, kl_row *o)
{
    const __m256i low = _mm256_set1_epi8(15);
    if (T == ML_TYPE_IQ4_XS) {
        for (int j = 0; j < 8; j++)
            _mm256_storeu_si256((__m256i *)(o->q + 32 * j),
                                levels(nibbles32(b + 8 + 16 * j),
                                       sgn ? iq4nl_levels : (const int8_t *)iq4nl_levels_u));
        /* the scales (ls - 32) in order, and mt[p] = 128·sc[2p] |
         * 128·sc[2p + 1] << 16 in 16-bit halves (|128·sc| <= 4096):
         * packs pairs lanes 2p, 2p + 1 within each 128-bit half, the
         * permute puts the halves' first two words together */
        const __m256i sc = iq4_xs_scales(b, _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28),
                                         _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
        _mm256_storeu_si256((__m256i *)o->sc, sc);
        const __m256i s128 = _mm256_slli_epi32(sc, 7);
        const __m256i pairs = _mm256_permutevar8x32_epi32(_mm256_packs_epi32(s128, s128),
                                                          _mm256_setr_epi32(0, 1, 4, 5, 0, 1, 4, 5));
        _mm_storeu_si128((__m128i *)o->mt, _mm256_castsi256_si128(pairs));
        o->d = f16_at(b), o->dmin = 0.0f;
        return;
    }
    if (T == ML_TYPE_Q6_K) { /* q6 unsigned: no - 32 (but in the signed form) */
        for (int j = 0; j < 8; j++) {
            const int h = j / 4, u = j % 4;
            const __m256i l = load256(b + 64 * h + 32 * (u % 2));
            const __m256i lo = _mm256_and_si256(u < 2 ? l : _mm256_srli_epi16(l, 4), low);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(load256(b + 128 + 32 * h), 2 * u),
                                                _mm256_set1_epi8(3));
            const __m256i q6 = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
            _mm256_storeu_si256((__m256i *)(o->q + 32 * j),
                                sgn ? _mm256_sub_epi8(q6, _mm256_set1_epi8(32)) : q6);
        }
        /* the sixteen int8 scales: as int32, and mt[p] = 32·sc[2p] |
         * 32·sc[2p + 1] << 16 in 16-bit halves (|32·sc| <= 4096) */
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)(b + 192));
        _mm256_storeu_si256((__m256i *)o->sc, _mm256_cvtepi8_epi32(sc8));
        _mm256_storeu_si256((__m256i *)(o->sc + 8), _mm256_cvtepi8_epi32(_mm_srli_si128(sc8, 8)));
        _mm256_storeu_si256((__m256i *)o->mt, _mm256_slli_epi16(_mm256_cvtepi8_epi16(sc8), 5));
        o->d = f16_at(b + 208), o->dmin = 0.0f;
        return;
    }
    /* Q4_K, Q5_K: unsigned quants, 6-bit scales, the mins as pairs */
    const __m128i v = k4_scales_mins8(b + 4);
    _mm256_storeu_si256((__m256i *)o->sc, _mm256_cvtepu8_epi32(v));
    _mm_storeu_si128((__m128i *)o->mt, _mm_cvtepu8_epi16(_mm_srli_si128(v, 8)));
    const size_t at = T == ML_TYPE_Q4_K ? 16 : 48;
    const __m256i qh = T == ML_TYPE_Q5_K ? load256(b + 16) : _mm256_setzero_si256();
    for (int j = 0; j < 8; j++) {
        const __m256i w = load256(b + at + 32 * (j / 2));
        const __m256i u = _mm256_and_si256(j % 2 ? _mm256_srli_epi16(w, 4) : w, low);
        const __m256i h = _mm256_and_si256(_mm256_srli_epi16(qh, j), _mm256_set1_epi8(1));
        _mm256_storeu_si256((__m256i *)(o->q + 32 * j), _mm256_or_si256(u, _mm256_slli_epi16(h, 4)));
    }
    o->d = f16_at(b), o->dmin = f16_at(b + 2);
}

/* o's scales as sp's pairs (nsub of them). */
ALWAYS_INLINE void kl_scale_pairs(kl_row *o, int nsub)
{
    for (int j = 0; j < nsub; j += 8) {
        const __m256i v = load256(o->sc + j);
        _mm256_storeu_si256((__m256i *)(o->sp + j),
                            _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xffff)),
                                            _mm256_slli_epi32(v, HAVE_VNNI ? 24 : 16)));
    }
}

/* Rows [r, r + nr) (nr <= KL_ROWS) into rows[k * KL_ROWS + i], the last
 * row repeated past nr. */
static void kl_rows(ml_type T, const uint8_t *w, size_t cols, size_t r, size_t nr, kl_row *rows)
{
    const size_t nsb = cols / 256, bytes = ml__blk_k_bytes(T);
    for (size_t i = 0; i < KL_ROWS; i++) {
        const uint8_t *row = w + (r + (i < nr ? i : nr - 1)) * nsb * bytes;
        for (size_t k = 0; k < nsb; k++) {
            kl_row *o = &rows[k * KL_ROWS + i];
            kl_decode(T, 0, row + k * bytes, o);
            kl_scale_pairs(o, kl_nsub(T));
        }
    }
}

/* k_s in the lanes: the same operations per lane. */
ALWAYS_INLINE kl_vf kl_s(ml_type T, kl_vi isum, kl_vi msum, kl_vf d, kl_vf dmin, kl_vf xdv)
{
    const kl_vf s = KL(mul_ps)(KL(cvtepi32_ps)(isum), KL(mul_ps)(d, xdv));
    if (k_dmin_at(T) < 0)
        return s;
    return KL(sub_ps)(s, KL(mul_ps)(KL(cvtepi32_ps)(msum), KL(mul_ps)(dmin, xdv)));
}

/* acc + the 16-bit pairs of a times those of b (exact). */
ALWAYS_INLINE kl_vi kl_madd16(kl_vi acc, kl_vi a, kl_vi b)
{
#if HAVE_VNNI
    return _mm512_dpwssd_epi32(acc, a, b);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}

#if HAVE_VNNI
/* is + sc·v, exactly, lane by lane, for a sub-block's integer sum v and
 * its scale sc held as the 16-bit pair (sc, 256·sc) (kl_scale_pairs):
 * one byte shuffle makes v the pair (v & 255, v >> 8) and one vpdpwssd
 * adds (v & 255)·sc + (v >> 8)·256·sc, two instructions where vpmulld
 * (two micro-ops) and an add were three.  Exact while v >> 8 fits 16
 * bits: |v| is at most 32·31·128 (Q5_K's unsigned quants), 16·63·128 (Q6_K's),
 * 32·241·128 (IQ4_XS's levels + 128), 16·255·32 (Q6_K's signed form) or
 * 32·255·127 (IQ4_XS's), so |v >> 8| <= 4048; and 256·sc fits 16 bits
 * for every scale (|sc| <= 128). */
ALWAYS_INLINE __m512i kl_scaled(__m512i is, __m512i v, __m512i sc)
{
    /* bytes of each lane: v's byte 0, a zero, bytes 1 and 2 */
    const __m512i pair = _mm512_set4_epi32(0x0e0d800c, 0x0a098008, 0x06058004, 0x02018000);
    return _mm512_dpwssd_epi32(is, _mm512_shuffle_epi8(v, pair), sc);
}
#endif

/* Sub-block s of a tile's rows (xc: its per groups of activations)
 * into is[r]: its scale times its byte products' sum. */
ALWAYS_INLINE void kl_sub(const kl_row *rw, const kl_vi *xc, int s, int per, int run,
                          kl_vi is[KL_ROWS])
{
#if HAVE_VNNI
    (void)run;
    kl_vi v[KL_ROWS];
    UNROLL
    for (int r = 0; r < KL_ROWS; r++)
        v[r] = kl_zero();
    UNROLL
    for (int g = 0; g < per; g++)
        UNROLL
        for (int r = 0; r < KL_ROWS; r++)
            v[r] = _mm512_dpbusd_epi32(
                v[r], _mm512_set1_epi32(*(const kl_u32 *)(rw[r].q + 4 * (per * s + g))), xc[g]);
    UNROLL
    for (int r = 0; r < KL_ROWS; r++)
        is[r] = kl_scaled(is[r], v[r], _mm512_set1_epi32(rw[r].sp[s]));
#else
    /* a run of groups' 16-bit pairs, then one vpmaddwd by the scale
     * (|scale| <= 128) widens and scales them: no 32-bit multiply */
    UNROLL
    for (int g = 0; g < per; g += run)
        UNROLL
        for (int r = 0; r < KL_ROWS; r++) {
            const kl_u32 *w4 = (const kl_u32 *)(rw[r].q + 4 * (per * s + g));
            __m256i p = _mm256_maddubs_epi16(_mm256_set1_epi32(w4[0]), xc[g]);
            UNROLL
            for (int i = 1; i < run; i++)
                p = _mm256_add_epi16(p, _mm256_maddubs_epi16(_mm256_set1_epi32(w4[i]), xc[g + i]));
            is[r] = _mm256_add_epi32(is[r], _mm256_madd_epi16(p, _mm256_set1_epi32(rw[r].sp[s])));
        }
#endif
}

/* Eight rows x KL_TOK tokens over every super-block: out[row][token]. */
ALWAYS_INLINE void kl_tile(ml_type T, const kl_row *rows, const kl_x *xg, size_t nsb,
                           float out[KL_ROWS][KL_TOK])
{
    const int nsub = kl_nsub(T), per = 64 / nsub;
    /* without VNNI, groups whose vpmaddubsw pairs are added in 16 bits:
     * |pair| <= 2·63·128 for Q6_K (2 groups), 2·31·128 for Q4_K and
     * Q5_K (4 groups) */
    const int run = T == ML_TYPE_Q6_K ? 2 : 4;
    kl_vf acc[KL_ROWS][8];
    for (int r = 0; r < KL_ROWS; r++) /* the slots no super-block reaches */
        for (size_t a = nsb; a < 8; a++)
            acc[r][a] = KL(setzero_ps)();
    for (size_t k = 0; k < nsb; k++) {
        const kl_row *rw = rows + k * KL_ROWS;
        const kl_x *x = xg + k;
        kl_vi is[KL_ROWS], ms[KL_ROWS];
        UNROLL
        for (int r = 0; r < KL_ROWS; r++)
            is[r] = ms[r] = kl_zero();
        UNROLL
        for (int s = 0; s < nsub; s++)
            kl_sub(rw, x->c + per * s, s, per, run, is);
        UNROLL
        for (int p = 0; p < nsub / 2; p++)
            UNROLL
            for (int r = 0; r < KL_ROWS; r++)
                ms[r] = kl_madd16(ms[r], KL(set1_epi32)(rw[r].mt[p]), x->as[p]);
        UNROLL
        for (int r = 0; r < KL_ROWS; r++) {
            /* Q6_K and IQ4_XS: ms is the offsets' part of isum */
            const int off = T == ML_TYPE_Q6_K || T == ML_TYPE_IQ4_XS;
            const kl_vi isum = off ? KL(sub_epi32)(is[r], ms[r]) : is[r];
            const kl_vf sv = kl_s(T, isum, off ? kl_zero() : ms[r],
                                  KL(set1_ps)(rw[r].d), KL(set1_ps)(rw[r].dmin), x->xd);
            /* rule 3's acc starts at +0: the first add is to +0 */
            acc[r][k % 8] = KL(add_ps)(k < 8 ? KL(setzero_ps)() : acc[r][k % 8], sv);
        }
    }
    for (int r = 0; r < KL_ROWS; r++) /* rule 3's fold, lane by lane */
        KL(storeu_ps)(out[r], KL(add_ps)(KL(add_ps)(KL(add_ps)(acc[r][0], acc[r][4]),
                                                    KL(add_ps)(acc[r][2], acc[r][6])),
                                         KL(add_ps)(KL(add_ps)(acc[r][1], acc[r][5]),
                                                    KL(add_ps)(acc[r][3], acc[r][7]))));
}

static void kl_tile_q4_k(const kl_row *rows, const kl_x *xg, size_t nsb, float out[KL_ROWS][KL_TOK])
{
    kl_tile(ML_TYPE_Q4_K, rows, xg, nsb, out);
}

static void kl_tile_iq4_xs(const kl_row *rows, const kl_x *xg, size_t nsb,
                           float out[KL_ROWS][KL_TOK])
{
    kl_tile(ML_TYPE_IQ4_XS, rows, xg, nsb, out);
}

static void kl_tile_q6_k(const kl_row *rows, const kl_x *xg, size_t nsb, float out[KL_ROWS][KL_TOK])
{
    kl_tile(ML_TYPE_Q6_K, rows, xg, nsb, out);
}

/* A thread's scratch for matmul_k_lanes, matmul_k_rows and kl_x_run (and
 * matmul_32_tokens), kept
 * from call to call: prefill calls it once per matrix and batch, and a
 * fresh allocation of this size came as fresh pages from the system
 * (glibc maps them) each time, faulted in and zeroed: a third of the
 * prompt's time.  Freed with the thread (the key's destructor). */
static pthread_key_t kl_key;
static pthread_once_t kl_key_once = PTHREAD_ONCE_INIT;

static void kl_key_make(void)
{
    if (pthread_key_create(&kl_key, free) != 0)
        kl_key = (pthread_key_t)-1;
}

/* At least `bytes` bytes, 64-aligned, or NULL. */
static void *kl_scratch(size_t bytes)
{
    typedef struct { size_t size; _Alignas(64) unsigned char data[]; } held;
    pthread_once(&kl_key_once, kl_key_make);
    if (kl_key == (pthread_key_t)-1)
        return NULL;
    held *h = pthread_getspecific(kl_key);
    if (h && h->size >= bytes)
        return h->data;
    free(h);
    pthread_setspecific(kl_key, NULL);
    h = aligned_alloc(64, (sizeof *h + bytes + 63) / 64 * 64);
    if (!h)
        return NULL;
    h->size = bytes;
    pthread_setspecific(kl_key, h);
    return h->data;
}

/* n bytes rounded up to whole cache lines. */
ALWAYS_INLINE size_t kl_lines(size_t n)
{
    return (n + 63) / 64 * 64;
}

/* Groups [g0, g1) of n_tok tokens' K-lane form (group g: tokens 16g on,
 * at xg + g * nsb). */
static void kl_x_groups(ml_type t, const int8_t *xq, const float *xd, size_t cols, size_t n_tok,
                        size_t g0, size_t g1, kl_x *xg)
{
    const size_t nsb = cols / 256;
    for (size_t g = g0; g < g1; g++) {
        const size_t tg = g * KL_TOK, nt = n_tok - tg < KL_TOK ? n_tok - tg : KL_TOK;
        kl_x_group(t, xq + tg * cols, cols, xd + tg * nsb, nt, xg + g * nsb);
    }
}

/* A tile's results into y token by token (token k's eight rows at y + k
 * * ldy, k < nt): a row's KL_TOK tokens lie ldy floats apart, often a
 * multiple of 4 KiB, so storing them one by one wrote sixteen lines of
 * one L1 set eight times over. */
ALWAYS_INLINE void kl_store(float out[KL_ROWS][KL_TOK], size_t nt, float *y, size_t ldy)
{
    for (size_t h = 0; h < KL_TOK / 8; h++) {
        __m256i v[8];
        UNROLL
        for (int r = 0; r < 8; r++)
            v[r] = load256(out[r] + 8 * h);
        transpose8x8(v);
        for (size_t k = 0; k < 8 && 8 * h + k < nt; k++)
            _mm256_storeu_si256((__m256i *)(void *)(y + (8 * h + k) * ldy), v[k]);
    }
}

/* A tile's nr rows (nr <= KL_ROWS) x nt tokens into y (token k's at y
 * + k * ldy). */
ALWAYS_INLINE void kl_put(float out[KL_ROWS][KL_TOK], size_t nr, size_t nt, float *y, size_t ldy)
{
    if (nr == KL_ROWS) {
        kl_store(out, nt, y, ldy);
        return;
    }
    for (size_t i = 0; i < nr; i++)
        for (size_t k = 0; k < nt; k++)
            y[k * ldy + i] = out[i][k];
}

/* Rows [r0, r1) times the nc tokens (nc <= KL_CHUNK) whose form is xg:
 * token k's results at y + k * ldy.  rows:
 * scratch for a tile's rows. */
static void kl_chunk(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                     const kl_x *xg, size_t nc, kl_row *rows, float *y, size_t ldy)
{
    const size_t nsb = cols / 256;
    for (size_t r = r0; r < r1; r += KL_ROWS) {
        const size_t nr = r1 - r < KL_ROWS ? r1 - r : KL_ROWS;
        kl_rows(t, w, cols, r, nr, rows);
        for (size_t g = 0; g * KL_TOK < nc; g++) {
            const size_t tg = g * KL_TOK, nt = nc - tg < KL_TOK ? nc - tg : KL_TOK;
            float out[KL_ROWS][KL_TOK];
            if (t == ML_TYPE_Q6_K)
                kl_tile_q6_k(rows, xg + g * nsb, nsb, out);
            else if (t == ML_TYPE_IQ4_XS)
                kl_tile_iq4_xs(rows, xg + g * nsb, nsb, out);
            else
                kl_tile_q4_k(rows, xg + g * nsb, nsb, out);
            kl_put(out, nr, nt, y + tg * ldy + r, ldy);
        }
    }
}

/* From this many tokens on, with VNNI, the rows in the lanes (below),
 * where the table has them (kr_on: the avx512vnni table's, not the
 * avx512vnni-lanes one, which the chooser takes where the tokens in the
 * lanes measure faster).  Up to sixteen tokens fill one register of the
 * lanes; past that, their second register runs partly empty, where the
 * rows measured faster (docs/speed-history.md, section 28). */
#define KR_MIN_TOK 17

ALWAYS_INLINE int kr_takes(int kr_on, size_t n_tok)
{
    return HAVE_VNNI && kr_on && n_tok >= KR_MIN_TOK;
}

#if HAVE_VNNI
/* ---- matmul of Q4_K, Q5_K, Q6_K and IQ4_XS with the rows in the lanes ----
 *
 * The lanes above broadcast a row's four quants into every multiply-add;
 * here the broadcast is a token's four activations, and each one feeds
 * KR_R registers of sixteen rows' quants (lane i: row 16a + i), so a
 * broadcast costs 1/KR_R of a multiply-add instead of one, and KR_T
 * tokens share each register of quants.  The rows of a tile (KR_R·16)
 * are decoded and transposed once per call (kr_rows, into kr_sb).  The
 * form made ahead is small: for Q4_K and Q5_K each token's sub-block sums
 * (for the mins), the activations read where they lie; for Q6_K and
 * IQ4_XS a copy of the activations + 128 (the signed form, kr_signed).
 * A call's last rows, when sixteen or fewer, take a tile of one register
 * (kr_tile's R), not two half empty.  Every lane does
 * kl_tile's integer sums (exact) and float step (the same operations per
 * (row, token): d·xd is a product of the same two floats), and rule 3's
 * eight partial sums per (row, token) are kept in memory: matvec's bits. */
#define KR_R 2   /* registers of sixteen rows a tile */
#define KR_T 6   /* tokens a tile */
#define KR_ROWS (16 * KR_R)

/* One super-block of a tile's KR_ROWS rows, transposed: lane i of [..][a]
 * is row 16a + i's. */
typedef struct kr_sb {
    __m512i q[64][KR_R];  /* group g: quants 4g..4g+3 (kl_row.q) */
    __m512i sc[16][KR_R]; /* sub-block scales as kl_scaled's pairs (kl_row.sp) */
    __m512i mt[8][KR_R];  /* kl_row.mt */
    __m512i qx[KR_R];     /* kl_row.qx, in the signed form */
    __m512 d[KR_R], dmin[KR_R];
} kr_sb;

/* The signed form: Q6_K's and IQ4_XS's quants are kept signed (q6 - 32,
 * the levels) and the activations go in + 128 (their sign bit flipped:
 * vpdpbusd's unsigned operand, a copy made once with the form); each
 * row's 128·Σ sc·q (kl_row.qx, once per decode) takes the + 128 off
 * again, exactly.  That replaces the offsets' term (32·sc·Σx,
 * 128·sc·Σx: eight and four 16-bit products per row, token and
 * super-block, and the sums of x behind them) by one subtraction.  Q4_K
 * and Q5_K keep their unsigned quants: their mins need the sums of x
 * anyway. */
ALWAYS_INLINE int kr_signed(ml_type T)
{
    return T == ML_TYPE_Q6_K || T == ML_TYPE_IQ4_XS;
}

/* r[j] lane i = r[i] lane j, for sixteen 32-bit lanes. */
ALWAYS_INLINE void transpose16x16(__m512i r[16])
{
    __m512i t[16], u[16];
    UNROLL
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    /* u[4m + c], 128-bit lane L: rows 4m..4m + 3 of column 4L + c */
    UNROLL
    for (int i = 0; i < 16; i += 4) {
        u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    /* then the 128-bit lanes as a 4 x 4 transpose */
    UNROLL
    for (int c = 0; c < 4; c++) {
        const __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88),
                      v1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xdd),
                      v2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88),
                      v3 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xdd);
        r[c] = _mm512_shuffle_i32x4(v0, v2, 0x88);
        r[4 + c] = _mm512_shuffle_i32x4(v1, v3, 0x88);
        r[8 + c] = _mm512_shuffle_i32x4(v0, v2, 0xdd);
        r[12 + c] = _mm512_shuffle_i32x4(v1, v3, 0xdd);
    }
}

/* Sixteen decoded rows o[] into sb's half a; their mt[] only where the
 * tiles read it (npairs of them; none in the signed form). */
ALWAYS_INLINE void kr_put(const kl_row o[16], int nsub, int npairs, int a, kr_sb *sb)
{
    for (int b = 0; b < 4; b++) { /* quants 64b..64b + 63: groups 16b.. */
        __m512i r[16];
        UNROLL
        for (int i = 0; i < 16; i++)
            r[i] = _mm512_loadu_si512(o[i].q + 64 * b);
        transpose16x16(r);
        UNROLL
        for (int j = 0; j < 16; j++)
            sb->q[16 * b + j][a] = r[j];
    }
    __m512i r[16];
    UNROLL
    for (int i = 0; i < 16; i++) /* sp[nsub..16) are not set */
        r[i] = _mm512_maskz_loadu_epi32((__mmask16)((1u << nsub) - 1), o[i].sp);
    transpose16x16(r);
    for (int j = 0; j < nsub; j++)
        sb->sc[j][a] = r[j];
    _Alignas(64) int32_t mt[8][16], qx[16];
    _Alignas(64) float d[16], dmin[16];
    for (int i = 0; i < 16; i++) {
        for (int p = 0; p < npairs; p++)
            mt[p][i] = o[i].mt[p];
        qx[i] = o[i].qx, d[i] = o[i].d, dmin[i] = o[i].dmin;
    }
    for (int p = 0; p < npairs; p++)
        sb->mt[p][a] = _mm512_load_si512(mt[p]);
    sb->qx[a] = _mm512_load_si512(qx);
    sb->d[a] = _mm512_load_ps(d), sb->dmin[a] = _mm512_load_ps(dmin);
}

/* Rows [r, r + nr) (nr <= 16·R, R <= KR_R registers) into sb[0..nsb),
 * the last row repeated past nr. */
static void kr_rows(ml_type T, int R, const uint8_t *w, size_t cols, size_t r, size_t nr, kr_sb *sb)
{
    const size_t nsb = cols / 256, bytes = ml__blk_k_bytes(T);
    for (size_t k = 0; k < nsb; k++)
        for (int a = 0; a < R; a++) {
            kl_row o[16];
            for (size_t i = 0; i < 16; i++) {
                const size_t row = r + (16 * a + i < nr ? 16 * a + i : nr - 1);
                const uint8_t *b = w + (row * nsb + k) * bytes;
                /* sixteen rows are sixteen streams, more than the
                 * hardware's prefetcher follows: the weights come from
                 * memory, and waiting for them was a tenth of the time */
                if (k + 2 < nsb)
                    for (size_t c = 0; c < bytes; c += 64)
                        _mm_prefetch((const char *)b + 2 * bytes + c, _MM_HINT_T0);
                kl_decode(T, kr_signed(T), b, &o[i]);
                kl_scale_pairs(&o[i], kl_nsub(T));
                o[i].qx = kr_signed(T) ? kl_qx(&o[i], kl_nsub(T)) : 0;
            }
            kr_put(o, kl_nsub(T), kr_signed(T) ? 0 : kl_nsub(T) / 2, a, &sb[k]);
        }
}

/* A tile's 16·R rows (R <= KR_R registers, a constant) x KR_T tokens
 * over every super-block; token t's
 * activations at x[t] (+ 128 in the signed form), its sub-block pairs'
 * sums (k_pair_sums, nsub / 2 a super-block; not in the signed form) at
 * as[t], its scales at xd[t]; facc: rule 3's partial sums, out[t][a]:
 * the result. */
ALWAYS_INLINE void kr_tile(ml_type T, int R, const kr_sb *sb, size_t nsb, const int8_t *const x[KR_T],
                           const int32_t *const as[KR_T], const float *const xd[KR_T],
                           __m512 facc[KR_T][KR_R][8], __m512 out[KR_T][KR_R])
{
    const int nsub = kl_nsub(T), per = 64 / nsub;
    for (int t = 0; t < KR_T; t++) /* the slots no super-block reaches */
        for (int a = 0; a < R; a++)
            for (size_t j = nsb; j < 8; j++)
                facc[t][a][j] = _mm512_setzero_ps();
    for (size_t k = 0; k < nsb; k++) {
        const kr_sb *s = &sb[k];
        __m512i is[KR_T][KR_R];
        UNROLL
        for (int t = 0; t < KR_T; t++)
            UNROLL
            for (int a = 0; a < R; a++)
                is[t][a] = _mm512_setzero_si512();
        for (int j = 0; j < nsub; j++) {
            __m512i v[KR_T][KR_R];
            UNROLL
            for (int t = 0; t < KR_T; t++)
                UNROLL
                for (int a = 0; a < R; a++)
                    v[t][a] = _mm512_setzero_si512();
            UNROLL
            for (int gg = 0; gg < per; gg++) {
                const int g = per * j + gg;
                UNROLL
                for (int t = 0; t < KR_T; t++) {
                    int32_t x4; /* activations 4g..4g + 3, at any alignment */
                    memcpy(&x4, x[t] + 256 * k + 4 * g, 4);
                    const __m512i xb = _mm512_set1_epi32(x4);
                    UNROLL
                    for (int a = 0; a < R; a++)
                        v[t][a] = kr_signed(T) ? _mm512_dpbusd_epi32(v[t][a], xb, s->q[g][a])
                                               : _mm512_dpbusd_epi32(v[t][a], s->q[g][a], xb);
                }
            }
            UNROLL
            for (int t = 0; t < KR_T; t++)
                UNROLL
                for (int a = 0; a < R; a++)
                    is[t][a] = kl_scaled(is[t][a], v[t][a], s->sc[j][a]);
        }
        UNROLL
        for (int t = 0; t < KR_T; t++) {
            const __m512 xdv = _mm512_set1_ps(xd[t][k]);
            UNROLL
            for (int a = 0; a < R; a++) {
                __m512i ms = _mm512_setzero_si512();
                for (int p = 0; !kr_signed(T) && p < nsub / 2; p++)
                    ms = _mm512_dpwssd_epi32(ms, s->mt[p][a],
                                             _mm512_set1_epi32(as[t][k * (size_t)(nsub / 2) + p]));
                const __m512i isum = kr_signed(T) ? _mm512_sub_epi32(is[t][a], s->qx[a]) : is[t][a];
                const __m512 sv = kl_s(T, isum, ms, s->d[a], s->dmin[a], xdv);
                /* rule 3's acc starts at +0: the first add is to +0 (not
                 * a plain store, which would keep a -0) */
                facc[t][a][k % 8] = _mm512_add_ps(k < 8 ? _mm512_setzero_ps() : facc[t][a][k % 8], sv);
            }
        }
    }
    for (int t = 0; t < KR_T; t++) /* rule 3's fold, lane by lane */
        for (int a = 0; a < R; a++) {
            __m512 *f = facc[t][a];
            out[t][a] = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(f[0], f[4]), _mm512_add_ps(f[2], f[6])),
                                      _mm512_add_ps(_mm512_add_ps(f[1], f[5]), _mm512_add_ps(f[3], f[7])));
        }
}

/* The tiles of each type, of one register or two (R). */
#define KR_TILE(name, T)                                                                          \
    __attribute__((noinline)) static void kr_tile_##name(                                         \
        int R, const kr_sb *sb, size_t nsb, const int8_t *const x[KR_T],                          \
        const int32_t *const as[KR_T], const float *const xd[KR_T], __m512 facc[KR_T][KR_R][8],  \
        __m512 out[KR_T][KR_R])                                                                   \
    {                                                                                             \
        if (R == 1)                                                                               \
            kr_tile(T, 1, sb, nsb, x, as, xd, facc, out);                                         \
        else                                                                                      \
            kr_tile(T, KR_R, sb, nsb, x, as, xd, facc, out);                                      \
    }
KR_TILE(q4_k, ML_TYPE_Q4_K)
KR_TILE(q6_k, ML_TYPE_Q6_K)
KR_TILE(iq4_xs, ML_TYPE_IQ4_XS)
#undef KR_TILE

/* A token's bytes in the form the rows' tiles read: its sub-block pairs'
 * sums, or in the signed form its activations + 128. */
ALWAYS_INLINE size_t kr_x_token(ml_type T, size_t cols)
{
    return kr_signed(T) ? cols : cols / 256 * (size_t)(kl_nsub(T) / 2) * sizeof(int32_t);
}

/* That form for n_tok tokens rounded up to whole tiles. */
ALWAYS_INLINE size_t kr_x_form(ml_type T, size_t cols, size_t n_tok)
{
    return (n_tok + KR_T - 1) / KR_T * KR_T * kr_x_token(T, cols);
}

/* The bytes matmul_blk_x asks for it: the form, then unused room as
 * large as the lanes' form of the most tokens they take, so that the
 * size never shrinks as tokens grow (the runtime sizes the form once,
 * for its largest batch). */
ALWAYS_INLINE size_t kr_x_bytes(ml_type T, size_t cols, size_t n_tok)
{
    const size_t lanes = (KR_MIN_TOK - 1 + KL_TOK - 1) / KL_TOK * (cols / 256) * sizeof(kl_x);
    return kr_x_form(T, cols, n_tok) + lanes;
}

/* Tokens [t0, t1) into the form of all the tokens, xt. */
static void kr_x_tokens(ml_type T, const int8_t *xq, size_t cols, size_t t0, size_t t1, void *xt)
{
    const size_t per = kr_x_token(T, cols);
    for (size_t t = t0; t < t1; t++) {
        unsigned char *o = (unsigned char *)xt + t * per;
        if (!kr_signed(T)) {
            k_pair_sums(T, xq + t * cols, cols, (int32_t *)(void *)o);
            continue;
        }
        for (size_t c = 0; c < cols; c += 64) /* + 128 */
            _mm512_storeu_si512(o + c, _mm512_xor_si512(_mm512_loadu_si512(xq + t * cols + c),
                                                        _mm512_set1_epi8(-128)));
    }
}

/* Part i of parts of the n bytes at p into L2, a line at a time. */
ALWAYS_INLINE void prefetch_part_l2(const uint8_t *p, size_t n, size_t i, size_t parts)
{
    const size_t lines = (n + 63) / 64;
    for (size_t l = lines * i / parts; l < lines * (i + 1) / parts; l++)
        _mm_prefetch((const char *)p + 64 * l, _MM_HINT_T1);
}

/* Rows [r0, r1) x n_tok tokens whose form is xt; sb: scratch for a
 * tile's rows (cols / 256 of them).  While a block of rows runs its
 * tiles, the next block's weights come into L2 a part a tile: kr_rows
 * reads each row from memory once and waited on it there (sixteen
 * streams at a time), most of all when another process shares the
 * memory. */
static void kr_run(ml_type T, const uint8_t *w, size_t cols, size_t r0, size_t r1, const int8_t *xq,
                   const float *xd, const void *xt, size_t n_tok, kr_sb *sb, float *y, size_t ldy)
{
    const size_t nsb = cols / 256, per = kr_x_token(T, cols), row_bytes = nsb * ml__blk_k_bytes(T);
    const size_t tiles = (n_tok + KR_T - 1) / KR_T;
    for (size_t r = r0; r < r1; r += KR_ROWS) {
        const size_t nr = r1 - r < KR_ROWS ? r1 - r : KR_ROWS;
        const int R = nr <= 16 ? 1 : KR_R; /* registers of rows the tile needs */
        kr_rows(T, R, w, cols, r, nr, sb);
        const size_t next = r + nr, nn = r1 - next < KR_ROWS ? r1 - next : KR_ROWS;
        __mmask16 m[KR_R]; /* register q's rows that exist */
        for (int q = 0; q < R; q++)
            m[q] = (__mmask16)(nr >= 16 * (size_t)(q + 1) ? 0xffff : (1u << (nr - 16 * (size_t)q)) - 1);
        for (size_t t0 = 0; t0 < n_tok; t0 += KR_T) {
            const size_t nt = n_tok - t0 < KR_T ? n_tok - t0 : KR_T;
            const int8_t *x[KR_T];
            const int32_t *a[KR_T];
            const float *d[KR_T];
            for (size_t t = 0; t < KR_T; t++) { /* the last token again past nt */
                const size_t u = t0 + (t < nt ? t : nt - 1);
                const unsigned char *f = (const unsigned char *)xt + u * per;
                x[t] = kr_signed(T) ? (const int8_t *)f : xq + u * cols;
                a[t] = kr_signed(T) ? NULL : (const int32_t *)(const void *)f;
                d[t] = xd + u * nsb;
            }
            prefetch_part_l2(w + next * row_bytes, nn * row_bytes, t0 / KR_T, tiles);
            __m512 facc[KR_T][KR_R][8], out[KR_T][KR_R];
            if (T == ML_TYPE_Q6_K)
                kr_tile_q6_k(R, sb, nsb, x, a, d, facc, out);
            else if (T == ML_TYPE_IQ4_XS)
                kr_tile_iq4_xs(R, sb, nsb, x, a, d, facc, out);
            else
                kr_tile_q4_k(R, sb, nsb, x, a, d, facc, out);
            for (size_t t = 0; t < nt; t++)
                for (int q = 0; q < R; q++)
                    _mm512_mask_storeu_ps(y + (t0 + t) * ldy + r + 16 * q, m[q], out[t][q]);
        }
    }
}

/* kr_run with the form made here; 0 when out of memory. */
static int matmul_k_rows(ml_type T, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                         const int8_t *xq, const float *xd, size_t n_tok, float *y, size_t ldy)
{
    const size_t b_sb = kl_lines(cols / 256 * sizeof(kr_sb));
    unsigned char *p = kl_scratch(b_sb + kr_x_form(T, cols, n_tok));
    if (!p)
        return 0;
    kr_x_tokens(T, xq, cols, 0, n_tok, p + b_sb);
    kr_run(T, w, cols, r0, r1, xq, xd, p + b_sb, n_tok, (kr_sb *)(void *)p, y, ldy);
    return 1;
}
#endif
/* Q4_K, Q5_K (decoded alike), Q6_K and IQ4_XS, rows [r0, r1) x n_tok
 * tokens, the activations rearranged here a chunk at a time; 0 for
 * another type or when out of memory. */
static int matmul_k_lanes(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                          const int8_t *xq, const float *xd, size_t n_tok, float *y, size_t ldy,
                          int kr_on)
{
    if (!kl_lanes_type(t))
        return 0;
#if HAVE_VNNI
    if (kr_takes(kr_on, n_tok))
        return matmul_k_rows(t, w, cols, r0, r1, xq, xd, n_tok, y, ldy);
#else
    (void)kr_on; /* no rows in the lanes without VNNI */
#endif
    const size_t nsb = cols / 256;
    const size_t b_xg = kl_lines(KL_CHUNK / KL_TOK * nsb * sizeof(kl_x));
    unsigned char *p = kl_scratch(b_xg + KL_ROWS * nsb * sizeof(kl_row));
    if (!p)
        return 0;
    kl_x *xg = (kl_x *)(void *)p;
    kl_row *rows = (kl_row *)(void *)(p + b_xg);
    for (size_t t0 = 0; t0 < n_tok; t0 += KL_CHUNK) {
        const size_t nc = n_tok - t0 < KL_CHUNK ? n_tok - t0 : KL_CHUNK;
        kl_x_groups(t, xq + t0 * cols, xd + t0 * nsb, cols, nc, 0, (nc + KL_TOK - 1) / KL_TOK, xg);
        kl_chunk(t, w, cols, r0, r1, xg, nc, rows, y + t0 * ldy, ldy);
    }
    return 1;
}

/* ---- Q4_1 with the tokens in the lanes ----
 *
 * As the K lanes above, for Q4_1's and Q5_1's 32-element blocks (their
 * unsigned quants, 0..15 and 0..31): a register holds KL_TOK tokens'
 * same four activations, each row's four quants are broadcast into
 * vpdpbusd (without VNNI vpmaddubsw, 16-bit pairs added before a
 * vpmaddwd widens them: |pair| <= 2·15·128 for Q4_1, a whole block's
 * eight below 2^15; 2·31·128 for Q5_1, four of them), and a block's sums
 * land in the lanes of KL_TOK tokens at once.  Each block then takes rule 5's float step,
 * s = (float)isum·(d·xd) + (float)Σx·(m·xd), in group_apply's order,
 * into acc[block % 8], folded as fold8 does: matvec's bits.  Eight
 * blocks (256 elements) make a group, the last one partial when a row's
 * blocks are not a multiple of eight. */

/* From nine tokens on: a group of sixteen lanes costs about the rows'
 * (matmul_32_tokens) eight tokens; without VNNI a group of eight costs
 * the tiles' ten (docs/speed-history.md, section 23). */
#if HAVE_VNNI
#define L32_MIN_TOK 9
#else
#define L32_MIN_TOK 10
#endif

/* A group of KL_TOK tokens' eight blocks. */
typedef struct l32_x {
    kl_vi c[64];      /* lane t: bytes 4c..4c+3 of token t's (c = 8·block + group) */
    kl_vf xd[8];      /* lane t: token t's scale of the block, +0 past the last token */
    kl_vf as[8];      /* lane t: Σ x over the block, as a float */
} l32_x;

/* The types of these lanes. */
ALWAYS_INLINE int l32_type(ml_type t)
{
    return t == ML_TYPE_Q4_1 || t == ML_TYPE_Q5_1;
}

/* One row's group of eight blocks, decoded. */
typedef struct l32_row {
    uint8_t q[256];   /* the unsigned quants, in element order */
    float d[8], m[8];
} l32_row;

/* Σ of 32 signed bytes: vpsadbw of them as unsigned (x + 128), less
 * 32·128. */
ALWAYS_INLINE int32_t block_sum32(const int8_t *x)
{
    const __m256i s = _mm256_sad_epu8(_mm256_xor_si256(load256(x), _mm256_set1_epi8(-128)),
                                      _mm256_setzero_si256());
    const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    return (int32_t)(_mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1)) - 32 * 128;
}

/* Tokens [0, nt) of a group (nt <= KL_TOK) into xg[0..ng): x their
 * activations (cols apart), xd their scales (cols / 32 apart). */
static void l32_x_group(const int8_t *x, size_t cols, const float *xd, size_t nt, l32_x *xg)
{
    const size_t nb = cols / 32;
    for (size_t k = 0; k * 8 < nb; k++) {
        const size_t m = nb - 8 * k < 8 ? nb - 8 * k : 8;
        for (size_t b = 0; b < 8; b++) {
            kl_x_chunk(x + 256 * k + 32 * b, cols, b < m ? nt : 0, xg[k].c + 8 * b);
            _Alignas(64) float d[KL_TOK], a[KL_TOK];
            for (size_t t = 0; t < KL_TOK; t++) {
                const int here = t < nt && b < m;
                d[t] = here ? xd[t * nb + 8 * k + b] : 0.0f;
                a[t] = here ? (float)block_sum32(x + t * cols + 256 * k + 32 * b) : 0.0f;
            }
            xg[k].xd[b] = KL(load_ps)(d);
            xg[k].as[b] = KL(load_ps)(a);
        }
    }
}

/* Rows [r, r + nr) (nr <= KL_ROWS) of Q4_1 or Q5_1 into
 * rows[k * KL_ROWS + i], the last row repeated past nr: block_dot's
 * quants. */
static void l32_rows(ml_type T, const uint8_t *w, size_t cols, size_t r, size_t nr, l32_row *rows)
{
    const size_t nb = cols / 32, bb = T == ML_TYPE_Q4_1 ? 20 : 24;
    for (size_t i = 0; i < KL_ROWS; i++) {
        const uint8_t *row = w + (r + (i < nr ? i : nr - 1)) * nb * bb;
        for (size_t j = 0; j < nb; j++) {
            l32_row *o = &rows[j / 8 * KL_ROWS + i];
            const uint8_t *blk = row + bb * j;
            const __m256i q = T == ML_TYPE_Q4_1 ? nibbles32(blk + 4) : q5_quants(blk + 4);
            _mm256_storeu_si256((__m256i *)(void *)(o->q + 32 * (j % 8)), q);
            o->d[j % 8] = f16_at(blk), o->m[j % 8] = f16_at(blk + 2);
        }
    }
}

/* Block b of a tile's rows (xc: its eight groups of activations): v[r]
 * row r's sums, token by lane. */
ALWAYS_INLINE void l32_dots(ml_type T, const l32_row *rw, size_t b, const kl_vi *xc,
                            kl_vi v[KL_ROWS])
{
#if HAVE_VNNI
    (void)T; /* no overflow in 32 bits */
    UNROLL
    for (int r = 0; r < KL_ROWS; r++)
        v[r] = _mm512_setzero_si512();
    UNROLL
    for (int g = 0; g < 8; g++)
        UNROLL
        for (int r = 0; r < KL_ROWS; r++)
            v[r] = _mm512_dpbusd_epi32(v[r], _mm512_set1_epi32(*(const kl_u32 *)(rw[r].q + 32 * b + 4 * g)),
                                       xc[g]);
#else
    const int run = T == ML_TYPE_Q4_1 ? 8 : 4; /* pairs added in 16 bits */
    UNROLL
    for (int r = 0; r < KL_ROWS; r++) {
        const kl_u32 *w4 = (const kl_u32 *)(rw[r].q + 32 * b);
        v[r] = _mm256_setzero_si256();
        UNROLL
        for (int g0 = 0; g0 < 8; g0 += run) {
            __m256i p = _mm256_maddubs_epi16(_mm256_set1_epi32(w4[g0]), xc[g0]);
            UNROLL
            for (int g = g0 + 1; g < g0 + run; g++)
                p = _mm256_add_epi16(p, _mm256_maddubs_epi16(_mm256_set1_epi32(w4[g]), xc[g]));
            v[r] = _mm256_add_epi32(v[r], _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
        }
    }
#endif
}

/* Eight rows x KL_TOK tokens over every group: out[row][token].  Block
 * b of each group at a time, its acc[b] in registers: a row's and
 * token's blocks meet acc[b] in matvec's order all the same. */
ALWAYS_INLINE void l32_tile(ml_type T, const l32_row *rows, const l32_x *xg, size_t nb,
                            float out[KL_ROWS][KL_TOK])
{
    kl_vf part[8][KL_ROWS]; /* part[b][r]: row r's acc[b] */
    for (size_t b = 0; b < 8; b++) {
        kl_vf acc[KL_ROWS];
        UNROLL
        for (int r = 0; r < KL_ROWS; r++)
            acc[r] = KL(setzero_ps)();
        for (size_t k = 0; 8 * k + b < nb; k++) {
            const l32_row *rw = rows + k * KL_ROWS;
            const l32_x *x = xg + k;
            kl_vi v[KL_ROWS];
            l32_dots(T, rw, b, x->c + 8 * b, v);
            UNROLL
            for (int r = 0; r < KL_ROWS; r++) {
                const kl_vf dx = KL(mul_ps)(KL(set1_ps)(rw[r].d[b]), x->xd[b]);
                const kl_vf mx = KL(mul_ps)(KL(set1_ps)(rw[r].m[b]), x->xd[b]);
                acc[r] = KL(add_ps)(acc[r], KL(add_ps)(KL(mul_ps)(KL(cvtepi32_ps)(v[r]), dx),
                                                       KL(mul_ps)(x->as[b], mx)));
            }
        }
        UNROLL
        for (int r = 0; r < KL_ROWS; r++)
            part[b][r] = acc[r];
    }
    for (int r = 0; r < KL_ROWS; r++) /* fold8's order, lane by lane */
        KL(storeu_ps)(out[r], KL(add_ps)(KL(add_ps)(KL(add_ps)(part[0][r], part[4][r]),
                                                    KL(add_ps)(part[2][r], part[6][r])),
                                         KL(add_ps)(KL(add_ps)(part[1][r], part[5][r]),
                                                    KL(add_ps)(part[3][r], part[7][r]))));
}

/* The tile of each type, its quants' width folded in. */
static void l32_tile_q4_1(const l32_row *rows, const l32_x *xg, size_t nb, float out[KL_ROWS][KL_TOK])
{
    l32_tile(ML_TYPE_Q4_1, rows, xg, nb, out);
}

static void l32_tile_q5_1(const l32_row *rows, const l32_x *xg, size_t nb, float out[KL_ROWS][KL_TOK])
{
    l32_tile(ML_TYPE_Q5_1, rows, xg, nb, out);
}

/* Groups of KL_TOK tokens [g0, g1) of n_tok tokens' lane form (group
 * g: tokens 16g on, at xg + g * (its groups of blocks)). */
static void l32_x_groups(const int8_t *xq, const float *xd, size_t cols, size_t n_tok, size_t g0,
                         size_t g1, l32_x *xg)
{
    const size_t nb = cols / 32, ng = (nb + 7) / 8;
    for (size_t g = g0; g < g1; g++) {
        const size_t tg = g * KL_TOK, nt = n_tok - tg < KL_TOK ? n_tok - tg : KL_TOK;
        l32_x_group(xq + tg * cols, cols, xd + tg * nb, nt, xg + g * ng);
    }
}

/* Rows [r0, r1) times the nc tokens (nc <= KL_CHUNK) whose form is xg:
 * token k's results at y + k * ldy.  rows: scratch for a tile's rows. */
static void l32_chunk(ml_type T, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                      const l32_x *xg, size_t nc, l32_row *rows, float *y, size_t ldy)
{
    const size_t nb = cols / 32, ng = (nb + 7) / 8;
    for (size_t r = r0; r < r1; r += KL_ROWS) {
        const size_t nr = r1 - r < KL_ROWS ? r1 - r : KL_ROWS;
        l32_rows(T, w, cols, r, nr, rows);
        for (size_t g = 0; g * KL_TOK < nc; g++) {
            const size_t tg = g * KL_TOK, nt = nc - tg < KL_TOK ? nc - tg : KL_TOK;
            float out[KL_ROWS][KL_TOK];
            if (T == ML_TYPE_Q4_1)
                l32_tile_q4_1(rows, xg + g * ng, nb, out);
            else
                l32_tile_q5_1(rows, xg + g * ng, nb, out);
            kl_put(out, nr, nt, y + tg * ldy + r, ldy);
        }
    }
}

/* Q4_1 or Q5_1, rows [r0, r1) x n_tok tokens, the activations laid out
 * here a chunk at a time; 0 when out of memory. */
static int matmul_32_lanes(ml_type T, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                           const int8_t *xq, const float *xd, size_t n_tok, float *y, size_t ldy)
{
    const size_t nb = cols / 32, ng = (nb + 7) / 8;
    const size_t b_xg = kl_lines(KL_CHUNK / KL_TOK * ng * sizeof(l32_x));
    unsigned char *p = kl_scratch(b_xg + KL_ROWS * ng * sizeof(l32_row));
    if (!p)
        return 0;
    l32_x *xg = (l32_x *)(void *)p;
    l32_row *rows = (l32_row *)(void *)(p + b_xg);
    for (size_t t0 = 0; t0 < n_tok; t0 += KL_CHUNK) {
        const size_t nc = n_tok - t0 < KL_CHUNK ? n_tok - t0 : KL_CHUNK;
        l32_x_groups(xq + t0 * cols, xd + t0 * nb, cols, nc, 0, (nc + KL_TOK - 1) / KL_TOK, xg);
        l32_chunk(T, w, cols, r0, r1, xg, nc, rows, y + t0 * ldy, ldy);
    }
    return 1;
}


/* With VNNI, the K types: two to KT_MAX tokens a row at a time
 * (matmul_k_tokens), up to sixteen in the lanes (matmul_k_lanes; Q6_K's
 * nine to eleven in tiles), from KR_MIN_TOK on the rows in the lanes
 * (matmul_k_rows); the nibble types two to NT_MAX tokens a row at a time
 * (matmul_32_tokens), Q4_1 and Q5_1 from L32_MIN_TOK on in the lanes
 * (matmul_32_lanes).  Without it, Q4_K, Q5_K and Q6_K in the lanes from
 * kl_min_tok on, Q4_1 and Q5_1 from L32_MIN_TOK on.  The rest of those,
 * the other 256-element types, Q4_1 and Q5_1 in tiles from two tokens on; the rest a token at a time (each (token, row) is
 * matvec's dot; the runtime takes Q5_0, IQ4_NL and MXFP4 to the Q8_0
 * products from four tokens on, blk_to_q8_0).
 * Blocking rows for the cache across tokens (16 rows, 4 tokens) was
 * measured no faster than a token at a time (Q4_K, 2048 x 5632, 64
 * tokens: 0.36 ms a token either way): the dot is bound by its
 * instructions, which the tiles cut. */
static void matmul_blk(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                       const int8_t *xq, const float *xd, size_t n_tok, float *y, size_t ldy,
                       int kr_on)
{
    if (n_tok >= kl_min_tok(t) && cols <= XS_COLS &&
        matmul_k_lanes(t, w, cols, r0, r1, xq, xd, n_tok, y, ldy, kr_on))
        return;
    if (l32_type(t) && n_tok >= L32_MIN_TOK && cols <= XS_COLS &&
        matmul_32_lanes(t, w, cols, r0, r1, xq, xd, n_tok, y, ldy))
        return;
#if HAVE_VNNI
    if (n_tok >= 2 && n_tok <= KT_MAX && cols <= XS_COLS &&
        matmul_k_tokens(t, w, cols, r0, r1, xq, xd, n_tok, y, ldy))
        return;
    if (nt_type(t) && n_tok >= 2 && n_tok <= NT_MAX && cols <= XS_COLS &&
        matmul_32_tokens(t, w, cols, r0, r1, xq, xd, n_tok, y, ldy))
        return;
#endif
    if (tile_fn(t) && n_tok >= 2 && cols <= XS_COLS &&
        matmul_tiled(t, w, cols, r0, r1, xq, xd, n_tok, y, ldy))
        return;
    for (size_t k = 0; k < n_tok; k++)
        matvec_blk(t, w, cols, r0, r1, xq + k * cols, xd + k * ml__blk_xd_count(t, cols),
                   y + k * ldy);
}

/* matmul_blk_x (kernels.h) for the lanes (the K types' and Q4_1's):
 * the form of all n_tok tokens, made once for all the calls of a job. */
static size_t kl_x_bytes(ml_type t, size_t cols, size_t n_tok, int kr_on)
{
    if (l32_type(t)) /* Q4_1's and Q5_1's lanes (matmul_32_lanes) */
        return n_tok >= L32_MIN_TOK && cols <= XS_COLS
                   ? (n_tok + KL_TOK - 1) / KL_TOK * ((cols / 32 + 7) / 8) * sizeof(l32_x)
                   : 0;
    if (!kl_lanes_type(t) || n_tok < kl_min_tok(t) || cols > XS_COLS || cols % 256)
        return 0;
#if HAVE_VNNI
    if (kr_takes(kr_on, n_tok))
        return kr_x_bytes(t, cols, n_tok);
#else
    (void)kr_on; /* no rows in the lanes without VNNI */
#endif
    return (n_tok + KL_TOK - 1) / KL_TOK * (cols / 256) * sizeof(kl_x);
}

/* Its group: a lane a token, KL_TOK of them a register; or a tile of the
 * rows in the lanes. */
static size_t kl_x_tokens_at_once(ml_type t, size_t cols, size_t n_tok, int kr_on)
{
    if (!kl_x_bytes(t, cols, n_tok, kr_on))
        return 1;
#if HAVE_VNNI
    if (kl_lanes_type(t) && kr_takes(kr_on, n_tok))
        return KR_T;
#endif
    return KL_TOK;
}

static void kl_x_prepare(ml_type t, const int8_t *xq, const float *xd, size_t cols,
                         size_t n_tok, unsigned part, unsigned parts, void *xt, int kr_on)
{
    const size_t groups = (n_tok + KL_TOK - 1) / KL_TOK;
    const size_t g0 = groups * part / parts, g1 = groups * (part + 1) / parts;
    if (l32_type(t)) {
        l32_x_groups(xq, xd, cols, n_tok, g0, g1, xt);
        return;
    }
#if HAVE_VNNI
    if (kr_takes(kr_on, n_tok)) {
        const size_t tiles = (n_tok + KR_T - 1) / KR_T;
        const size_t t0 = tiles * part / parts * KR_T, t1 = tiles * (part + 1) / parts * KR_T;
        kr_x_tokens(t, xq, cols, t0, t1 < n_tok ? t1 : n_tok, xt);
        return;
    }
#else
    (void)kr_on; /* no rows in the lanes without VNNI */
#endif
    kl_x_groups(t, xq, xd, cols, n_tok, g0, g1, xt);
}

static void kl_x_run(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                     const int8_t *xq, const float *xd, const void *xt, size_t n_tok, float *y,
                     size_t ldy, int kr_on)
{
    if (l32_type(t)) {
        const size_t ng = (cols / 32 + 7) / 8;
        l32_row *rows = kl_scratch(KL_ROWS * ng * sizeof(l32_row));
        if (!rows) { /* the same bits by the other ways */
            matmul_blk(t, w, cols, r0, r1, xq, xd, n_tok, y, ldy, kr_on);
            return;
        }
        for (size_t t0 = 0; t0 < n_tok; t0 += KL_CHUNK)
            l32_chunk(t, w, cols, r0, r1, (const l32_x *)xt + t0 / KL_TOK * ng,
                      n_tok - t0 < KL_CHUNK ? n_tok - t0 : KL_CHUNK, rows, y + t0 * ldy, ldy);
        return;
    }
#if HAVE_VNNI
    if (kr_takes(kr_on, n_tok)) {
        kr_sb *sb = kl_scratch(cols / 256 * sizeof(kr_sb));
        if (sb)
            kr_run(t, w, cols, r0, r1, xq, xd, xt, n_tok, sb, y, ldy);
        else /* the same bits by the other ways */
            matmul_blk(t, w, cols, r0, r1, xq, xd, n_tok, y, ldy, kr_on);
        return;
    }
#endif
    const size_t nsb = cols / 256;
    kl_row *rows = kl_scratch(KL_ROWS * nsb * sizeof(kl_row));
    if (!rows) { /* the same bits by the other ways */
        matmul_blk(t, w, cols, r0, r1, xq, xd, n_tok, y, ldy, kr_on);
        return;
    }
    for (size_t t0 = 0; t0 < n_tok; t0 += KL_CHUNK)
        kl_chunk(t, w, cols, r0, r1, (const kl_x *)xt + t0 / KL_TOK * nsb,
                 n_tok - t0 < KL_CHUNK ? n_tok - t0 : KL_CHUNK, rows, y + t0 * ldy, ldy);
}

/* A variant's matmul_blk and matmul_blk_x entries, named ml__..._SUFFIX
 * (kernels_x86.h), with the rows in the lanes or not (kr_on). */
#define PROMPT_KERNELS(SUFFIX, KR_ON)                                                           \
    void ml__matmul_blk_##SUFFIX(ml_type t, const uint8_t *w, size_t cols, size_t r0,          \
                                 size_t r1, const int8_t *xq, const float *xd, size_t n_tok,   \
                                 float *y, size_t ldy)                                         \
    {                                                                                          \
        matmul_blk(t, w, cols, r0, r1, xq, xd, n_tok, y, ldy, KR_ON);                          \
    }                                                                                          \
    size_t ml__blk_x_bytes_##SUFFIX(ml_type t, size_t cols, size_t n_tok)                      \
    {                                                                                          \
        return kl_x_bytes(t, cols, n_tok, KR_ON);                                              \
    }                                                                                          \
    size_t ml__blk_x_group_##SUFFIX(ml_type t, size_t cols, size_t n_tok)                      \
    {                                                                                          \
        return kl_x_tokens_at_once(t, cols, n_tok, KR_ON);                                     \
    }                                                                                          \
    void ml__blk_x_prepare_##SUFFIX(ml_type t, const int8_t *xq, const float *xd, size_t cols, \
                                    size_t n_tok, unsigned part, unsigned parts, void *xt)     \
    {                                                                                          \
        kl_x_prepare(t, xq, xd, cols, n_tok, part, parts, xt, KR_ON);                          \
    }                                                                                          \
    void ml__blk_x_run_##SUFFIX(ml_type t, const uint8_t *w, size_t cols, size_t r0,           \
                                size_t r1, const int8_t *xq, const float *xd, const void *xt,  \
                                size_t n_tok, float *y, size_t ldy)                            \
    {                                                                                          \
        kl_x_run(t, w, cols, r0, r1, xq, xd, xt, n_tok, y, ldy, KR_ON);                        \
    }

#endif
