/* kernels_avx512.c - the kernels for x86-64 with AVX-512 VNNI (compiled
 * with -mavx512f/bw/vl/dq/vnni, never -mfma), bit-identical to
 * kernels_scalar.c by the rules of kernels.h.
 *
 * The same plan as kernels_avx2.c, with vpdpbusd doing the integer work:
 * it multiplies unsigned by signed bytes and adds four products into each
 * int32 lane, so
 *  - Q8_0 uses w + 128 (w XOR 0x80, in 1..255) and subtracts 128 * Σx per
 *    block: Σ (w + 128) x = Σ w x + 128 Σ x;
 *  - Q4_0 uses the nibbles (0..15) and subtracts 8 * Σx.
 * Nothing saturates, so no 16-bit intermediates need watching.  The
 * 8-lane accumulator of rule 3 is one 256-bit register; Q8_0 decode (one
 * token, bound by memory) works in 256 bits, Q4_0 decode in 512 with two
 * rows' accumulators a register (its arithmetic per byte is twice Q8_0's
 * and showed in its speed).
 *
 * The products of several tokens work in 512 bits, two 8-lane
 * accumulators a register: some CPUs run vpdpbusd zmm at twice the ymm
 * rate, and on CPUs that split a 512-bit operation in two or have one
 * 512-bit unit where they have two 256-bit ones the multiply-adds per
 * cycle are the same as in 256 bits, with fewer instructions and loads;
 * so there is one path, not a cpuid choice.  (Not measured: the lower
 * clock of heavy 512-bit code on the first CPUs with AVX-512 VNNI.)
 *
 * matvec folds each block's lanes horizontally, eight blocks at a time;
 * matmul rearranges a panel of weight rows and all tokens' activations
 * into transposed groups (register g holds bytes 4g..4g+3 of block k in
 * lane k), so one vpdpbusd per 32 bytes and per (row, token) leaves every
 * lane inside its block, and a tile of 3 rows x 4 token pairs shares each
 * load between four or three multiply-adds (the loops: matmul_tiles.h,
 * the 512-bit tile here).  Q4_0 for 2 to 6 tokens skips the rearranging
 * (matvecs_q4_quads). */
#include "kernels/kernels.h"

#if defined(__x86_64__)

#include "kernels/fmath.h"
#include "kernels/kernels_x86.h"

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================
 * Quantization (16 lanes)
 * ====================================================================== */

/* trunc(x * scale + copysign(0.5, x)) clamped to [-127, 127]; NaN gives 0
 * as in the reference (zeroed before the conversion). */
ALWAYS_INLINE __m512i round_q(__m512 x, __m512 scale)
{
    const __m512 half = _mm512_or_ps(_mm512_and_ps(x, _mm512_set1_ps(-0.0f)), _mm512_set1_ps(0.5f));
    const __m512 v = _mm512_add_ps(_mm512_mul_ps(x, scale), half);
    const __mmask16 ordered = _mm512_cmp_ps_mask(v, v, _CMP_ORD_Q);
    const __m512i q = _mm512_cvttps_epi32(_mm512_maskz_mov_ps(ordered, v));
    return _mm512_max_epi32(_mm512_min_epi32(q, _mm512_set1_epi32(127)), _mm512_set1_epi32(-127));
}

/* |x| with NaN lanes 0: a NaN never wins the maximum, as in the reference. */
ALWAYS_INLINE __m512 abs_no_nan(__m512 x)
{
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, x, _CMP_ORD_Q), _mm512_abs_ps(x));
}

static void quantize_q8_0(const float *x, size_t n, int8_t *q, float *d)
{
    for (size_t b = 0; b < n / 32; b++) {
        const __m512 v0 = _mm512_loadu_ps(x + 32 * b), v1 = _mm512_loadu_ps(x + 32 * b + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(abs_no_nan(v0), abs_no_nan(v1)));
        if (amax < 1e-30f) {
            d[b] = 0.0f;
            memset(q + 32 * b, 0, 32);
            continue;
        }
        d[b] = amax / 127.0f;
        const __m512 scale = _mm512_set1_ps(127.0f / amax);
        _mm_storeu_si128((__m128i *)(q + 32 * b), _mm512_cvtepi32_epi8(round_q(v0, scale)));
        _mm_storeu_si128((__m128i *)(q + 32 * b + 16), _mm512_cvtepi32_epi8(round_q(v1, scale)));
    }
}

/* The same per 256 (rule 6's K activations). */
static void quantize_q8_k(const float *x, size_t n, int8_t *q, float *d)
{
    for (size_t k = 0; k < n / 256; k++, x += 256, q += 256) {
        __m512 m = _mm512_setzero_ps();
        for (int i = 0; i < 16; i++)
            m = _mm512_max_ps(m, abs_no_nan(_mm512_loadu_ps(x + 16 * i)));
        const float amax = _mm512_reduce_max_ps(m);
        if (amax < 1e-30f) {
            d[k] = 0.0f;
            memset(q, 0, 256);
            continue;
        }
        d[k] = amax / 127.0f;
        const __m512 scale = _mm512_set1_ps(127.0f / amax);
        for (int i = 0; i < 16; i++)
            _mm_storeu_si128((__m128i *)(q + 16 * i),
                             _mm512_cvtepi32_epi8(round_q(_mm512_loadu_ps(x + 16 * i), scale)));
    }
}

/* ======================================================================
 * Shared pieces of the dot products
 * ====================================================================== */


ALWAYS_INLINE __mmask8 first(size_t m)
{
    return (__mmask8)((1u << m) - 1);
}

/* The m <= 8 scales at d, zeros after. */
ALWAYS_INLINE __m256 load_scales(const float *d, size_t m)
{
    return m == 8 ? _mm256_loadu_ps(d) : _mm256_maskz_loadu_ps(first(m), d);
}

/* sw[k] * xd[k] for the m <= 8 blocks of a group; lanes past m are +0,
 * and a +0 added to an accumulator (never -0) leaves it unchanged. */
ALWAYS_INLINE __m256 scales8(__m256 sw, const float *xd, size_t m)
{
    return _mm256_mul_ps(sw, load_scales(xd, m));
}

ALWAYS_INLINE __m256i dpbusd(__m256i acc, __m256i u8, __m256i s8)
{
    return _mm256_dpbusd_epi32(acc, u8, s8);
}

ALWAYS_INLINE __m256i load8(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

/* Σ x over each of the m <= 8 blocks at x (lane k: block k), times
 * -2^shift: the correction the unsigned weights need. */
ALWAYS_INLINE __m256i correction(const int8_t *x, size_t m, int shift)
{
    const __m256i ones = _mm256_set1_epi8(1);
    __m256i v[8];
    UNROLL
    for (size_t k = 0; k < 8; k++)
        v[k] = k < m ? dpbusd(_mm256_setzero_si256(), ones, load8(x + 32 * k))
                     : _mm256_setzero_si256();
    return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(hsum8x8(v), shift));
}

/* ======================================================================
 * matvec: one row at a time, horizontal folding per group of 8 blocks
 * ====================================================================== */

/* Eight lanes summing to Σ (w + 128) x of one block. */
ALWAYS_INLINE __m256i q8_block(const int8_t *w, const int8_t *x)
{
    return dpbusd(_mm256_setzero_si256(), _mm256_xor_si256(load8(w), _mm256_set1_epi8(-128)),
                  load8(x));
}

/* Two Q4_0 blocks from one 32-byte load: the low nibbles of both, then
 * the high ones, regrouped per block (elements 0..15, then 16..31). */
ALWAYS_INLINE void q4_pair(const uint8_t *w, const int8_t *x, __m256i *v0, __m256i *v1)
{
    const __m256i b = load8(w), m4 = _mm256_set1_epi8(15);
    const __m256i lo = _mm256_and_si256(b, m4), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m4);
    *v0 = dpbusd(_mm256_setzero_si256(), _mm256_permute2x128_si256(lo, hi, 0x20), load8(x));
    *v1 = dpbusd(_mm256_setzero_si256(), _mm256_permute2x128_si256(lo, hi, 0x31), load8(x + 32));
}

/* One Q4_0 block alone (16 bytes): for a group's odd last block. */
ALWAYS_INLINE __m256i q4_block(const uint8_t *w, const int8_t *x)
{
    return dpbusd(_mm256_setzero_si256(), q4_unpack(w), load8(x));
}

ALWAYS_INLINE __m256 group_q8(__m256 acc, const int8_t *w, __m256 sw, const int8_t *x,
                              const float *xd, __m256i corr, size_t m)
{
    __m256i v[8];
    UNROLL
    for (size_t k = 0; k < 8; k++)
        v[k] = k < m ? q8_block(w + 32 * k, x + 32 * k) : _mm256_setzero_si256();
    return combine(acc, _mm256_add_epi32(hsum8x8(v), corr), scales8(sw, xd, m));
}

ALWAYS_INLINE __m256 group_q4(__m256 acc, const uint8_t *w, __m256 sw, const int8_t *x,
                              const float *xd, __m256i corr, size_t m)
{
    __m256i v[8];
    UNROLL
    for (size_t k = 0; k < 8; k += 2) {
        if (k + 1 < m) {
            q4_pair(w + 16 * k, x + 32 * k, &v[k], &v[k + 1]);
        } else {
            v[k] = k < m ? q4_block(w + 16 * k, x + 32 * k) : _mm256_setzero_si256();
            v[k + 1] = _mm256_setzero_si256();
        }
    }
    return combine(acc, _mm256_add_epi32(hsum8x8(v), corr), scales8(sw, xd, m));
}


/* Per-group corrections are kept on the stack up to this many groups
 * (65536 columns, the format's dimension limit); longer rows compute them
 * per row. */
#define XS_GROUPS 256

typedef struct corrections {
    __m256i v[XS_GROUPS];
    int have;
} corrections;

static void corrections_init(corrections *c, const int8_t *x, size_t nb, int shift)
{
    const size_t ng = (nb + 7) / 8;
    c->have = ng <= XS_GROUPS;
    if (c->have)
        for (size_t j = 0; j < ng; j++)
            c->v[j] = correction(x + 256 * j, nb - 8 * j < 8 ? nb - 8 * j : 8, shift);
}

ALWAYS_INLINE __m256i corr_get(const corrections *c, const int8_t *x, size_t nb, size_t j,
                               int shift)
{
    return c->have ? c->v[j] : correction(x + 256 * j, nb - 8 * j < 8 ? nb - 8 * j : 8, shift);
}

/* Row r of W against x.  f16 is a constant where this is inlined, so the
 * two scale encodings get a loop each. */
ALWAYS_INLINE float row_q8(const int8_t *wq, ml_wscales wd, size_t r, const int8_t *x,
                           const float *xd, const corrections *c, size_t nb, int f16)
{
    const int8_t *w = wq + r * nb * 32;
    __m256 acc = _mm256_setzero_ps();
    size_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        prefetch_q8(w + 32 * b, wscale_at(wd, r * nb + b, f16), f16);
        acc = group_q8(acc, w + 32 * b, wscales8(wd, r * nb + b, 8, f16), x + 32 * b, xd + b,
                       corr_get(c, x, nb, b / 8, 7), 8);
    }
    if (b < nb) {
        prefetch_q8(w + 32 * b, wscale_at(wd, r * nb + b, f16), f16);
        acc = group_q8(acc, w + 32 * b, wscales8(wd, r * nb + b, nb - b, f16), x + 32 * b, xd + b,
                       corr_get(c, x, nb, b / 8, 7), nb - b);
    }
    return fold8(acc);
}

ALWAYS_INLINE float row_q4(const uint8_t *wq, ml_wscales wd, size_t r, const int8_t *x,
                           const float *xd, const corrections *c, size_t nb, int f16)
{
    const uint8_t *w = wq + r * nb * 16;
    __m256 acc = _mm256_setzero_ps();
    size_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        prefetch_q4(w + 16 * b, wscale_at(wd, r * nb + b, f16), f16);
        acc = group_q4(acc, w + 16 * b, wscales8(wd, r * nb + b, 8, f16), x + 32 * b, xd + b,
                       corr_get(c, x, nb, b / 8, 3), 8);
    }
    if (b < nb) {
        prefetch_q4(w + 16 * b, wscale_at(wd, r * nb + b, f16), f16);
        acc = group_q4(acc, w + 16 * b, wscales8(wd, r * nb + b, nb - b, f16), x + 32 * b, xd + b,
                       corr_get(c, x, nb, b / 8, 3), nb - b);
    }
    return fold8(acc);
}

static void matvec_q8_0(const int8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, float *y)
{
    const size_t nb = cols / 32;
    corrections c;
    corrections_init(&c, xq, nb, 7);
    if (wd.f16)
        for (size_t r = r0; r < r1; r++)
            y[r] = row_q8(wq, wd, r, xq, xd, &c, nb, 1);
    else
        for (size_t r = r0; r < r1; r++)
            y[r] = row_q8(wq, wd, r, xq, xd, &c, nb, 0);
}

/* The 256-bit pairs of kernels_x86.h (q4_pairs): a pair of blocks costs
 * two vpdpbusd into one register.  Here only q4_pairs_row.h's few-token
 * matvecs_q4_0 uses them, when the quads below find no memory; one
 * token goes to the two-row fold (matvec_q4_0). */
static void q4_pairs_init(q4_pairs *qp, const int8_t *x, const float *xd, size_t nb)
{
    const __m256i order = _mm256_setr_epi32(PAIR_ORDER);
    q4_pairs_regroup(qp, x, xd, nb);
    for (size_t j = 0; j < (nb + 7) / 8; j++) {
        const size_t m = nb - 8 * j < 8 ? nb - 8 * j : 8;
        qp->corr[j] = _mm256_permutevar8x32_epi32(correction(x + 256 * j, m, 3), order);
    }
}

/* Σ nibble·x of two blocks' nibbles (q4_pair_nibbles), lanes 0-3 and
 * 4-7, against the regrouped activation xp. */
ALWAYS_INLINE __m256i q4_pair_dot(__m256i lo, __m256i hi, const int8_t *xp)
{
    return dpbusd(dpbusd(_mm256_setzero_si256(), lo, load8(xp)), hi, load8(xp + 32));
}

/* The same from the blocks at w (only the first when `one`). */
ALWAYS_INLINE __m256i q4_pair_sums(const uint8_t *w, const int8_t *xp, int one)
{
    __m256i lo, hi;
    q4_pair_nibbles(w, one, &lo, &hi);
    return q4_pair_dot(lo, hi, xp);
}

#include "kernels/q4_pairs_row.h"

/* ======================================================================
 * Q4_0 for a few tokens (several sequences decoding): 512-bit quads
 * ====================================================================== */

/* A 64-byte load holds four blocks' nibble bytes; masking gives their
 * low nibbles (elements 0..15 of each) and high ones (16..31).  Each
 * token's activation is regrouped once to match (per group of 8 blocks:
 * elements 0..15 of blocks 0-3, 16..31 of blocks 0-3, then the same for
 * blocks 4-7), so two vpdpbusd leave block k's four partial sums in
 * 128-bit chunk k.  Two tokens' sums are folded together (exact integer
 * adds, in any order) into one register, block order, token t in the
 * low half and t + 1 in the high one, and the float side is rule 3 on
 * both halves at once: each half is matvec's accumulator.  Against
 * matvecs_q4_0 (256-bit pairs and vphaddd) this halves the multiply-adds
 * and the horizontal work per token. */
/* A 256-bit value in both halves. */
ALWAYS_INLINE __m512 twice_ps(__m256 v)
{
    return _mm512_insertf32x8(_mm512_castps256_ps512(v), v, 1);
}

/* The activation scales of tokens t (low half) and t + 1 (high; +0 when
 * `two` is 0) for group j. */
ALWAYS_INLINE __m512 pair_scales(const float *xd, size_t nb, size_t t, size_t j, size_t m, int two)
{
    const __m256 a = load_scales(xd + t * nb + 8 * j, m);
    const __m256 b = two ? load_scales(xd + (t + 1) * nb + 8 * j, m) : _mm256_setzero_ps();
    return _mm512_insertf32x8(_mm512_castps256_ps512(a), b, 1);
}

/* Keeps a loaded vector in a register: without this the compiler folds
 * the load into every multiply-add that uses it, one load per row. */
#define MM_IN_REGISTER(v) __asm__("" : "+v"(v))

#define QUAD_GROUP 256 /* bytes of regrouped activation per group */
/* Token pairs at most: up to 6 tokens (measured, 1 thread, weights from
 * memory, 5632x2048: the quads beat the tiles per row and token up to 6
 * tokens, not from 7); MM_MIN_TOK_Q4 sends more to the tiles. */
#define QUAD_PAIRS 3

typedef struct q4_quads {
    void *base;
    int8_t *x;    /* n_tok * ng * QUAD_GROUP */
    __m512i *corr; /* per token pair and group: -8·Σx, tokens 2q | 2q + 1 */
    __m512 *xd;    /* the same for the activation scales, +0 past the blocks */
} q4_quads;

static void quads_regroup(const int8_t *x, size_t nb, int8_t *dst)
{
    for (size_t b = 0; b < (nb + 7) / 8 * 8; b++) {
        int8_t *d = dst + QUAD_GROUP * (b / 8) + 128 * (b % 8 / 4) + 16 * (b % 4);
        if (b < nb) {
            memcpy(d, x + 32 * b, 16);
            memcpy(d + 64, x + 32 * b + 16, 16);
        } else {
            memset(d, 0, 16);
            memset(d + 64, 0, 16);
        }
    }
}

/* Both halves of a pair register: token t's 256 bits, and t + 1's or
 * zeros. */
ALWAYS_INLINE __m512i pair_i(__m256i lo, __m256i hi)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

static int quads_new(q4_quads *q, const int8_t *xq, const float *xd, size_t nb, size_t n_tok)
{
    const size_t ng = (nb + 7) / 8, np = (n_tok + 1) / 2;
    const size_t xbytes = n_tok * ng * QUAD_GROUP, pbytes = np * ng * 64;
    q->base = aligned_alloc(64, xbytes + 2 * pbytes);
    if (!q->base)
        return 0;
    q->x = q->base;
    q->corr = (__m512i *)(void *)(q->x + xbytes);
    q->xd = (__m512 *)(void *)((char *)q->corr + pbytes);
    for (size_t t = 0; t < n_tok; t++)
        quads_regroup(xq + t * nb * 32, nb, q->x + t * ng * QUAD_GROUP);
    for (size_t p = 0; p < np; p++)
        for (size_t j = 0; j < ng; j++) {
            const size_t m = nb - 8 * j < 8 ? nb - 8 * j : 8, t = 2 * p;
            const int8_t *x = xq + t * nb * 32 + 256 * j;
            const int two = t + 1 < n_tok;
            q->corr[p * ng + j] = pair_i(correction(x, m, 3),
                                         two ? correction(x + nb * 32, m, 3)
                                             : _mm256_setzero_si256());
            q->xd[p * ng + j] = pair_scales(xd, nb, t, j, m, two);
        }
    return 1;
}

/* Σ nibble·x of four blocks (lo, hi: their nibbles) against the
 * regrouped activation (x0: elements 0..15 of each, x1: 16..31): chunk k
 * holds block k's partial sums. */
ALWAYS_INLINE __m512i quad_dot(__m512i lo, __m512i hi, __m512i x0, __m512i x1)
{
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, x0), hi, x1);
}

/* Two tokens' block sums of a group from their quad sums (a: blocks 0-3,
 * b: 4-7): token t in lanes 0-7, t + 1 in 8-15, block order. */
ALWAYS_INLINE __m512i quads_fold(__m512i at, __m512i bt, __m512i au, __m512i bu)
{
    const __m512i st =
        _mm512_add_epi32(_mm512_unpacklo_epi64(at, bt), _mm512_unpackhi_epi64(at, bt));
    const __m512i su =
        _mm512_add_epi32(_mm512_unpacklo_epi64(au, bu), _mm512_unpackhi_epi64(au, bu));
    const __m512 fs = _mm512_castsi512_ps(st), fu = _mm512_castsi512_ps(su);
    /* chunk k: at's block k, bt's, au's, bu's */
    const __m512i s = _mm512_add_epi32(_mm512_castps_si512(_mm512_shuffle_ps(fs, fu, 0x88)),
                                       _mm512_castps_si512(_mm512_shuffle_ps(fs, fu, 0xdd)));
    const __m512i order =
        _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_epi32(order, s);
}

/* The first n <= 4 blocks' bytes of a quad at w, zeros after (never
 * reading past them). */
ALWAYS_INLINE __m512i quad_bytes(const uint8_t *w, size_t n)
{
    if (n >= 4)
        return _mm512_loadu_si512(w);
    return _mm512_maskz_loadu_epi8(((__mmask64)1 << (16 * n)) - 1, w);
}

/* A row's group of m <= 8 blocks at w as the quads' nibble registers:
 * low and high nibbles of blocks 0-3 ([0]) and 4-7 ([1], zeros when
 * m <= 4). */
ALWAYS_INLINE void quad_nibbles(const uint8_t *w, size_t m, __m512i lo[2], __m512i hi[2])
{
    const __m512i m4 = _mm512_set1_epi8(15);
    UNROLL
    for (size_t h = 0; h < 2; h++) {
        const __m512i b = h == 0 ? quad_bytes(w, m)
                        : m > 4  ? quad_bytes(w + 64, m - 4)
                                 : _mm512_setzero_si512();
        lo[h] = _mm512_and_si512(b, m4);
        hi[h] = _mm512_and_si512(_mm512_srli_epi16(b, 4), m4);
    }
}

/* Group j (m <= 8 blocks) of nrow <= 2 rows (w[i], scales sw[i]) for
 * nt <= 2 * QUAD_PAIRS tokens into acc[i] (one register per token pair):
 * two rows share each load of the activations. */
ALWAYS_INLINE void quads_group(size_t nrow, __m512 acc[2][QUAD_PAIRS], const uint8_t *const w[2],
                               const __m256 sw[2], const q4_quads *q, size_t nt, size_t ng,
                               size_t j, size_t m)
{
    __m512i lo[2][2], hi[2][2]; /* [row][blocks 0-3, 4-7] */
    UNROLL
    for (size_t i = 0; i < nrow; i++)
        quad_nibbles(w[i], m, lo[i], hi[i]);
    UNROLL
    for (size_t p = 0; p < QUAD_PAIRS; p++)
        if (2 * p < nt) {
            __m512i s[2][2][2]; /* [row][token of the pair][blocks 0-3, 4-7] */
            UNROLL
            for (size_t u = 0; u < 2; u++) {
                const int8_t *xt = q->x + ((2 * p + u) * ng + j) * QUAD_GROUP;
                __m512i x[4];
                UNROLL
                for (size_t k = 0; k < 4; k++) {
                    x[k] = 2 * p + u < nt ? _mm512_load_si512(xt + 64 * k)
                                          : _mm512_setzero_si512();
                    MM_IN_REGISTER(x[k]);
                }
                UNROLL
                for (size_t i = 0; i < nrow; i++)
                    UNROLL
                    for (size_t h = 0; h < 2; h++)
                        s[i][u][h] = 2 * p + u < nt
                                         ? quad_dot(lo[i][h], hi[i][h], x[2 * h], x[2 * h + 1])
                                         : _mm512_setzero_si512();
            }
            UNROLL
            for (size_t i = 0; i < nrow; i++) {
                const __m512i isum = _mm512_add_epi32(
                    quads_fold(s[i][0][0], s[i][0][1], s[i][1][0], s[i][1][1]),
                    q->corr[p * ng + j]);
                acc[i][p] = _mm512_add_ps(
                    acc[i][p], _mm512_mul_ps(_mm512_cvtepi32_ps(isum),
                                             _mm512_mul_ps(twice_ps(sw[i]), q->xd[p * ng + j])));
            }
        }
}

/* Rows r .. r + nrow - 1 (nrow <= 2) for nt tokens into y + t * ldy. */
ALWAYS_INLINE void quads_rows(size_t nrow, const uint8_t *wq, ml_wscales wd, size_t r,
                              const q4_quads *q, size_t nt, size_t nb, int f16, float *y,
                              size_t ldy)
{
    const size_t ng = (nb + 7) / 8;
    const uint8_t *w[2] = {wq + r * nb * 16, wq + (r + nrow - 1) * nb * 16};
    __m512 acc[2][QUAD_PAIRS];
    UNROLL
    for (size_t i = 0; i < 2; i++)
        UNROLL
        for (size_t p = 0; p < QUAD_PAIRS; p++)
            acc[i][p] = _mm512_setzero_ps();
    for (size_t j = 0; j < ng; j++) {
        const size_t m = nb - 8 * j < 8 ? nb - 8 * j : 8;
        const uint8_t *wj[2] = {w[0] + 128 * j, w[1] + 128 * j};
        __m256 sw[2];
        UNROLL
        for (size_t i = 0; i < nrow; i++) {
            prefetch_q4(wj[i], wscale_at(wd, (r + i) * nb + 8 * j, f16), f16);
            sw[i] = wscales8(wd, (r + i) * nb + 8 * j, m, f16);
        }
        if (m == 8)
            quads_group(nrow, acc, wj, sw, q, nt, ng, j, 8);
        else
            quads_group(nrow, acc, wj, sw, q, nt, ng, j, m);
    }
    UNROLL
    for (size_t i = 0; i < nrow; i++)
        UNROLL
        for (size_t t = 0; t < 2 * QUAD_PAIRS; t++)
            if (t < nt)
                y[t * ldy + r + i] = fold8(t % 2 ? _mm512_extractf32x8_ps(acc[i][t / 2], 1)
                                                 : _mm512_castps512_ps256(acc[i][t / 2]));
}

/* Rows [r0, r1) for nt <= 2 * QUAD_PAIRS tokens (a constant where
 * inlined) into y + t * ldy, two at a time. */
ALWAYS_INLINE void rows_quads(const uint8_t *wq, ml_wscales wd, size_t r0, size_t r1,
                              const q4_quads *q, size_t nt, size_t nb, int f16, float *y,
                              size_t ldy)
{
    size_t r = r0;
    for (; r + 2 <= r1; r += 2)
        quads_rows(2, wq, wd, r, q, nt, nb, f16, y, ldy);
    if (r < r1)
        quads_rows(1, wq, wd, r, q, nt, nb, f16, y, ldy);
}

ALWAYS_INLINE void rows_quads_f16(const uint8_t *wq, ml_wscales wd, size_t r0, size_t r1,
                                  const q4_quads *q, size_t nt, size_t nb, float *y, size_t ldy)
{
    if (wd.f16)
        rows_quads(wq, wd, r0, r1, q, nt, nb, 1, y, ldy);
    else
        rows_quads(wq, wd, r0, r1, q, nt, nb, 0, y, ldy);
}

/* Rows [r0, r1) for nt <= 2 * QUAD_PAIRS tokens, nt a constant in each
 * case. */
static void rows_quads_nt(const uint8_t *wq, ml_wscales wd, size_t r0, size_t r1,
                          const q4_quads *q, size_t nt, size_t nb, float *y, size_t ldy)
{
    switch (nt) {
    case 1: rows_quads_f16(wq, wd, r0, r1, q, 1, nb, y, ldy); break;
    case 2: rows_quads_f16(wq, wd, r0, r1, q, 2, nb, y, ldy); break;
    case 3: rows_quads_f16(wq, wd, r0, r1, q, 3, nb, y, ldy); break;
    case 4: rows_quads_f16(wq, wd, r0, r1, q, 4, nb, y, ldy); break;
    case 5: rows_quads_f16(wq, wd, r0, r1, q, 5, nb, y, ldy); break;
    default: rows_quads_f16(wq, wd, r0, r1, q, 6, nb, y, ldy); break;
    }
}

/* Rows per panel when the tokens come in several chunks: the first chunk
 * reads a panel's weights from memory, the others from the cache (16
 * rows of 5632 columns are 45 KiB). */
#define QUAD_PANEL 16

/* The table's matmul_q4_0 below the prefill tiles' token count: every
 * token regrouped once, then each row's nibbles unpacked once per chunk
 * of at most 2 * QUAD_PAIRS tokens.  Chunks start at even tokens, so the
 * pairs, and every (row, token) result, are those of one chunk. */
static void matvecs_q4_quads(const uint8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                             const int8_t *xq, const float *xd, size_t n_tok, float *y,
                             size_t ldy)
{
    const size_t nb = cols / 32, ng = (nb + 7) / 8, chunk = 2 * QUAD_PAIRS;
    q4_quads q;
    if (!quads_new(&q, xq, xd, nb, n_tok)) { /* the same bits */
        matvecs_q4_0(wq, wd, cols, r0, r1, xq, xd, n_tok, y, ldy);
        return;
    }
    if (n_tok <= chunk) {
        rows_quads_nt(wq, wd, r0, r1, &q, n_tok, nb, y, ldy);
    } else {
        for (size_t r = r0; r < r1; r += QUAD_PANEL) {
            const size_t re = r1 - r < QUAD_PANEL ? r1 : r + QUAD_PANEL;
            for (size_t t0 = 0; t0 < n_tok; t0 += chunk) {
                q4_quads v = q;
                v.x += t0 * ng * QUAD_GROUP, v.corr += t0 / 2 * ng, v.xd += t0 / 2 * ng;
                rows_quads_nt(wq, wd, r, re, &v, n_tok - t0 < chunk ? n_tok - t0 : chunk, nb,
                              y + t0 * ldy, ldy);
            }
        }
    }
    free(q.base);
}

/* ======================================================================
 * Q4_0 decode: two rows a register
 * ====================================================================== */

/* One token against the rows, with the quads' pieces: its activation
 * regrouped once per call (quads_regroup), a 64-byte load of a row's
 * nibbles and two vpdpbusd leave four blocks' partial sums, and rows r
 * and r + 1 are folded together as quads_fold folds two tokens: lanes 0-7
 * row r, 8-15 row r + 1, block order, so rule 3's float steps run on both
 * rows in one register, each half matvec's accumulator.  The 256-bit
 * pairs (q4_pairs_row.h: three vphaddd and a float step per row and
 * group) computed not much faster than a core reads memory, so
 * half of each row's time was arithmetic the stream had to wait on.
 * This form was faster both on a row in the L2 cache (bench-kernels -m
 * 256x4096, one thread) and for decode against the paired bound
 * (bench-bound, alternating; figures in docs/speed-history.md). */
typedef struct q4_row2 {
    int8_t x[PAIR_COLS];            /* the quads' regrouped activation */
    __m512i corr[PAIR_COLS / 256];  /* -8·Σx per block, in both halves */
    __m512 xd[PAIR_COLS / 256];     /* activation scales, both halves, +0 past */
} q4_row2;

static void row2_init(q4_row2 *q, const int8_t *x, const float *xd, size_t nb)
{
    quads_regroup(x, nb, q->x);
    for (size_t j = 0; j < (nb + 7) / 8; j++) {
        const size_t m = nb - 8 * j < 8 ? nb - 8 * j : 8;
        const __m256i c = correction(x + 256 * j, m, 3);
        q->corr[j] = pair_i(c, c);
        q->xd[j] = twice_ps(load_scales(xd + 8 * j, m));
    }
}

/* Group j (m <= 8 blocks) of the rows at w0 and w1 (scales sw: w0's in
 * the low half). */
ALWAYS_INLINE __m512 row2_group(__m512 acc, const uint8_t *w0, const uint8_t *w1, __m512 sw,
                                const q4_row2 *q, size_t j, size_t m)
{
    const uint8_t *w[2] = {w0, w1};
    __m512i x[4], s[2][2]; /* [row][blocks 0-3, 4-7] */
    UNROLL
    for (size_t k = 0; k < 4; k++)
        x[k] = _mm512_load_si512(q->x + QUAD_GROUP * j + 64 * k);
    UNROLL
    for (size_t i = 0; i < 2; i++) {
        __m512i lo[2], hi[2];
        quad_nibbles(w[i], m, lo, hi);
        UNROLL
        for (size_t h = 0; h < 2; h++)
            s[i][h] = quad_dot(lo[h], hi[h], x[2 * h], x[2 * h + 1]);
    }
    const __m512i isum = _mm512_add_epi32(quads_fold(s[0][0], s[0][1], s[1][0], s[1][1]), q->corr[j]);
    return _mm512_add_ps(acc, _mm512_mul_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(sw, q->xd[j])));
}

/* Scales of blocks b .. b + m - 1 of rows r0 (low half) and r1. */
ALWAYS_INLINE __m512 row2_scales(ml_wscales wd, size_t r0, size_t r1, size_t nb, size_t b,
                                 size_t m, int f16)
{
    return _mm512_insertf32x8(_mm512_castps256_ps512(wscales8(wd, r0 * nb + b, m, f16)),
                              wscales8(wd, r1 * nb + b, m, f16), 1);
}

/* Rows r0 and r1 (r1 = r0 for a last odd row, its half discarded). */
ALWAYS_INLINE void row2(const uint8_t *wq, ml_wscales wd, size_t r0, size_t r1, const q4_row2 *q,
                        size_t nb, int f16, float *y)
{
    const uint8_t *w0 = wq + r0 * nb * 16, *w1 = wq + r1 * nb * 16;
    __m512 acc = _mm512_setzero_ps();
    size_t b = 0, j = 0;
    for (; b + 8 <= nb; b += 8, j++) { /* whole groups, then the last part */
        prefetch_q4(w0 + 16 * b, wscale_at(wd, r0 * nb + b, f16), f16);
        prefetch_q4(w1 + 16 * b, wscale_at(wd, r1 * nb + b, f16), f16);
        acc = row2_group(acc, w0 + 16 * b, w1 + 16 * b, row2_scales(wd, r0, r1, nb, b, 8, f16), q,
                         j, 8);
    }
    if (b < nb) {
        prefetch_q4(w0 + 16 * b, wscale_at(wd, r0 * nb + b, f16), f16);
        prefetch_q4(w1 + 16 * b, wscale_at(wd, r1 * nb + b, f16), f16);
        acc = row2_group(acc, w0 + 16 * b, w1 + 16 * b, row2_scales(wd, r0, r1, nb, b, nb - b, f16),
                         q, j, nb - b);
    }
    y[r0] = fold8(_mm512_castps512_ps256(acc));
    y[r1] = fold8(_mm512_extractf32x8_ps(acc, 1));
}

ALWAYS_INLINE void rows2(const uint8_t *wq, ml_wscales wd, size_t r0, size_t r1, const q4_row2 *q,
                         size_t nb, int f16, float *y)
{
    size_t r = r0;
    for (; r + 2 <= r1; r += 2)
        row2(wq, wd, r, r + 1, q, nb, f16, y);
    if (r < r1)
        row2(wq, wd, r, r, q, nb, f16, y);
}

static void matvec_q4_0(const uint8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, float *y)
{
    const size_t nb = cols / 32;
    if (cols <= PAIR_COLS) {
        q4_row2 q;
        row2_init(&q, xq, xd, nb);
        if (wd.f16)
            rows2(wq, wd, r0, r1, &q, nb, 1, y);
        else
            rows2(wq, wd, r0, r1, &q, nb, 0, y);
        return;
    }
    corrections c;
    corrections_init(&c, xq, nb, 3);
    if (wd.f16)
        for (size_t r = r0; r < r1; r++)
            y[r] = row_q4(wq, wd, r, xq, xd, &c, nb, 1);
    else
        for (size_t r = r0; r < r1; r++)
            y[r] = row_q4(wq, wd, r, xq, xd, &c, nb, 0);
}

/* ======================================================================
 * matmul: transposed groups (matmul_tiles.h), register tiles of 3 rows x
 * 4 token pairs
 * ====================================================================== */

/* Tile and panel sizes: 3 rows x 4 token pairs (8 tokens) keeps 12
 * integer and 12 float accumulators in the 32 registers, and each load
 * feeds 3 or 4 multiply-adds.  On a CPU that splits 512-bit operations
 * in two, 2x4 to 4x4 tiles and panels of 16 to 144 rows measured about
 * the same. */
#define MM_RB 48      /* rows per panel of rearranged weights (multiple of 3) */
/* Fewest tokens that pay for the rearranging (Q8_0; measured on
 * TinyLlama's 5632 x 2048: at 2 tokens a matvec a panel at a time wins,
 * at 4 the tiles win for Q8_0; Q4_0's matvecs still win at 4 and lose
 * at 8). */
#define MM_MIN_TOK 4
/* Q4_0: fewer tokens go to matvecs_q4_quads, in chunks of 6 (make
 * bench-seqs, TinyLlama shape, 2 threads: a step of 8 sequences is
 * faster by the quads than by the tiles, whose weight rearranging is
 * paid per step). */
#define MM_MIN_TOK_Q4 17
#define MM_MATVECS_Q4 matvecs_q4_quads
#define MM_RT_Q8 3
#define MM_TT_Q8 8
#define MM_RT_Q4 3
#define MM_TT_Q4 8
#define MM_PAIR_TILE tile_pairs
/* One tile for both types: the type is in the rearranged data (below). */
#define MM_TILE_PER_TYPE 0


/* Q8_0 rows as w + 128; padding blocks become 128s, which meet the zero
 * padding of the activations. */
ALWAYS_INLINE void w_plus_128(__m256i v[8])
{
    UNROLL
    for (int g = 0; g < 8; g++)
        v[g] = _mm256_xor_si256(v[g], _mm256_set1_epi8(-128));
}

/* Every token's group carries its corrections, -128·Σx per block for Q8_0
 * (w + 128) and -8·Σx for Q4_0 (nibbles), and a (row, token) sum starts
 * from them; vpdpbusd then adds the unsigned-by-signed products. */
#define MM_LOAD_SCALES(d, m) load_scales(d, m)
#define MM_X_CORR(x, m, q4) correction(x, m, (q4) ? 3 : 7)
#define MM_W_ENCODE(q4, v) ((q4) ? (void)0 : w_plus_128(v))
#define MM_SUMS_START(q4, xg) _mm256_load_si256((const __m256i *)((xg) + 256))
#define MM_SUMS_ADD(q4, s, w, x) dpbusd(s, w, x)
#define MM_SUMS_END(q4, s, xg) (s)
/* A last group of m <= 4 blocks in four registers (matmul_tiles.h's
 * half_group): Gemma 3's 640 columns are 2.5 groups, and the tile
 * multiplied its zero half; pair_group folds the halves. */
#define MM_HALF_GROUPS
#define MM_MATVEC_Q8 matvec_q8_0
#define MM_MATVEC_Q4 matvec_q4_0

/* ---- the 512-bit tile ----
 *
 * Some CPUs run vpdpbusd on 512-bit registers at twice the 256-bit rate
 * (int8peak.c measures it), so a register holds two
 * tokens' transposed groups (prepare_x interleaves token pairs) and a
 * row's 256-bit group register is broadcast to both halves: one
 * multiply-add does one row against two tokens, and each half is its own
 * rule-3 accumulator, lane k = block k of its token.  On CPUs that split
 * 512-bit operations in two this does the same work per cycle as
 * 256 bits with half the instructions. */
#define PT_ROWS 3 /* = MM_RT_* */
#define PT_PAIRS (MM_TT_Q4 / 2)

/* The block sums of a half group in each token's half (lanes 0-3 plus
 * lanes 4-7, zeros above, as the 256-bit mm_half_fold): the corrections
 * started in lanes 0-3 (those of blocks 4-7 are zeros), so they count
 * once. */
ALWAYS_INLINE __m512i pair_half_fold(__m512i s)
{
    return _mm512_maskz_add_epi32(0x0f0f, s, _mm512_shuffle_i64x2(s, s, 0xb1));
}

/* Group j (m <= 8 blocks) of nr <= rt rows against the nt <= 2 * tp
 * tokens from t0 (even), as tile_group does it in 256 bits: a group of
 * m <= 4 blocks in four registers (half_group). */
ALWAYS_INLINE void pair_group(size_t rt, size_t tp, const uint8_t *wt, size_t wstride,
                              const float *wd, size_t nb, const uint8_t *xt, const float *xd,
                              size_t t0, size_t nt, size_t nr, size_t j, size_t m,
                              __m512 acc[PT_ROWS][PT_PAIRS])
{
    const size_t ng = (nb + 7) / 8;
    const uint8_t *xg[PT_PAIRS];
    __m512i is[PT_ROWS][PT_PAIRS];
    UNROLL
    for (size_t p = 0; p < tp; p++) {
        xg[p] = xt + ((t0 / 2 + (2 * p < nt ? p : 0)) * ng + j) * 2 * XG_BYTES;
        const __m512i start = _mm512_load_si512((const void *)(xg[p] + 512));
        UNROLL
        for (size_t i = 0; i < rt; i++)
            is[i][p] = start;
    }
    const int half = m <= 4; /* as matmul_tiles.h MM_HALF(m): stored as half_group left it */
    UNROLL
    for (int g = 0; g < 8; g++) {
        if (half && g >= 4)
            break;
        __m512i w[PT_ROWS];
        UNROLL
        for (size_t i = 0; i < rt; i++)
            w[i] = i < nr ? _mm512_broadcast_i64x4(_mm256_load_si256(
                                (const __m256i *)(wt + i * wstride + j * WG_BYTES + 32 * g)))
                          : _mm512_setzero_si512();
        UNROLL
        for (size_t p = 0; p < tp; p++)
            if (2 * p < nt) {
                __m512i x = _mm512_load_si512((const void *)(xg[p] + 64 * g));
                MM_IN_REGISTER(x);
                UNROLL
                for (size_t i = 0; i < rt; i++)
                    if (i < nr)
                        is[i][p] = _mm512_dpbusd_epi32(is[i][p], w[i], x);
            }
    }
    if (half)
        UNROLL
        for (size_t i = 0; i < rt; i++)
            UNROLL
            for (size_t p = 0; p < tp; p++)
                is[i][p] = pair_half_fold(is[i][p]);
    __m512 sx[PT_PAIRS];
    UNROLL
    for (size_t p = 0; p < tp; p++)
        sx[p] = 2 * p < nt ? pair_scales(xd, nb, t0 + 2 * p, j, m, 2 * p + 1 < nt)
                           : _mm512_setzero_ps();
    UNROLL
    for (size_t i = 0; i < rt; i++)
        if (i < nr) {
            const __m512 sw = twice_ps(load_scales(wd + i * nb + 8 * j, m));
            UNROLL
            for (size_t p = 0; p < tp; p++)
                if (2 * p < nt)
                    acc[i][p] = _mm512_add_ps(
                        acc[i][p],
                        _mm512_mul_ps(_mm512_cvtepi32_ps(is[i][p]), _mm512_mul_ps(sw, sx[p])));
        }
}

/* Rows r0 .. r0 + nr of y for tokens t0 .. t0 + nt. */
ALWAYS_INLINE void pair_tile(size_t rt, size_t tp, const uint8_t *wt, size_t wstride,
                             const float *wd, size_t nb, const uint8_t *xt, const float *xd,
                             size_t t0, size_t nt, size_t nr, float *y, size_t ldy, size_t r0)
{
    __m512 acc[PT_ROWS][PT_PAIRS];
    UNROLL
    for (size_t i = 0; i < rt; i++)
        UNROLL
        for (size_t p = 0; p < tp; p++)
            acc[i][p] = _mm512_setzero_ps();
    size_t j = 0;
    for (; j < nb / 8; j++)
        pair_group(rt, tp, wt, wstride, wd, nb, xt, xd, t0, nt, nr, j, 8, acc);
    if (nb % 8)
        pair_group(rt, tp, wt, wstride, wd, nb, xt, xd, t0, nt, nr, j, nb % 8, acc);
    UNROLL
    for (size_t i = 0; i < rt; i++)
        UNROLL
        for (size_t p = 0; p < tp; p++)
            if (i < nr && 2 * p < nt) {
                y[(t0 + 2 * p) * ldy + r0 + i] = fold8(_mm512_castps512_ps256(acc[i][p]));
                if (2 * p + 1 < nt)
                    y[(t0 + 2 * p + 1) * ldy + r0 + i] =
                        fold8(_mm512_extractf32x8_ps(acc[i][p], 1));
            }
}

/* Rule 3's fold of many accumulators at once: fold8 costs ~6 operations
 * per (row, token) result, against 12 multiply-adds per result for a
 * 640-column row (Gemma 3).  Step one adds the 128-bit halves of each
 * token's accumulator (a_k + a_{k+4}), step two lanes 0,1 and 2,3 of
 * those, step three the two sums left: the fold8 additions, operands in
 * the same order, for 16 results in 3 + 3 + 3 shuffles-and-adds. */
ALWAYS_INLINE __m512 fold_halves(__m512 x, __m512 y)
{
    /* chunks: x token 0, x token 1, y token 0, y token 1; lane k: a_k + a_{k+4} */
    return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x88), _mm512_shuffle_f32x4(x, y, 0xdd));
}

ALWAYS_INLINE __m512 fold_pairs(__m512 s, __m512 t)
{
    /* per chunk: s's (p0 + p2, p1 + p3), then t's */
    return _mm512_add_ps(_mm512_shuffle_ps(s, t, 0x44), _mm512_shuffle_ps(s, t, 0xee));
}

ALWAYS_INLINE __m512 fold_last(__m512 u, __m512 v)
{
    /* per chunk: q0 + q1 of the four sums of step one */
    return _mm512_add_ps(_mm512_shuffle_ps(u, v, 0x88), _mm512_shuffle_ps(u, v, 0xdd));
}

/* The results of a full tile's pairs p and p + 1: chunk c of the folded
 * register holds rows r0 .. r0 + 2 (lanes 0-2) of token t0 + 2p + c. */
ALWAYS_INLINE void store_pairs(__m512 acc[PT_ROWS][PT_PAIRS], size_t p, float *y, size_t ldy,
                               size_t t0, size_t r0)
{
    const __m512 s0 = fold_halves(acc[0][p], acc[0][p + 1]);
    const __m512 s1 = fold_halves(acc[1][p], acc[1][p + 1]);
    const __m512 s2 = fold_halves(acc[2][p], acc[2][p + 1]);
    const __m512 r = fold_last(fold_pairs(s0, s1), fold_pairs(s2, _mm512_setzero_ps()));
    float *out = y + (t0 + 2 * p) * ldy + r0;
    _mm_mask_storeu_ps(out, 7, _mm512_castps512_ps128(r));
    _mm_mask_storeu_ps(out + ldy, 7, _mm512_extractf32x4_ps(r, 1));
    _mm_mask_storeu_ps(out + 2 * ldy, 7, _mm512_extractf32x4_ps(r, 2));
    _mm_mask_storeu_ps(out + 3 * ldy, 7, _mm512_extractf32x4_ps(r, 3));
}

_Static_assert(PT_ROWS == 3 && PT_PAIRS % 2 == 0, "store_pairs folds 3 rows and pairs of pairs");

/* A full tile: rows r0 .. r0 + 3 of tokens t0 .. t0 + 8. */
static void full_tile(const uint8_t *wt, size_t wstride, const float *wd, size_t nb,
                      const uint8_t *xt, const float *xd, size_t t0, float *y, size_t ldy,
                      size_t r0)
{
    __m512 acc[PT_ROWS][PT_PAIRS];
    UNROLL
    for (size_t i = 0; i < PT_ROWS; i++)
        UNROLL
        for (size_t p = 0; p < PT_PAIRS; p++)
            acc[i][p] = _mm512_setzero_ps();
    size_t j = 0;
    for (; j < nb / 8; j++)
        pair_group(PT_ROWS, PT_PAIRS, wt, wstride, wd, nb, xt, xd, t0, 2 * PT_PAIRS, PT_ROWS, j,
                   8, acc);
    if (nb % 8)
        pair_group(PT_ROWS, PT_PAIRS, wt, wstride, wd, nb, xt, xd, t0, 2 * PT_PAIRS, PT_ROWS, j,
                   nb % 8, acc);
    UNROLL
    for (size_t p = 0; p < PT_PAIRS; p += 2)
        store_pairs(acc, p, y, ldy, t0, r0);
}

/* Full tiles get code with every slot known to be used. */
static void tile_pairs(const uint8_t *wt, size_t wstride, const float *wd, size_t nb,
                       const uint8_t *xt, const float *xd, size_t t0, size_t nt, size_t nr,
                       float *y, size_t ldy, size_t r0)
{
    if (nt == 2 * PT_PAIRS && nr == PT_ROWS)
        full_tile(wt, wstride, wd, nb, xt, xd, t0, y, ldy, r0);
    else
        pair_tile(PT_ROWS, PT_PAIRS, wt, wstride, wd, nb, xt, xd, t0, nt, nr, y, ldy, r0);
}

#include "kernels/matmul_tiles.h"

/* Every kernel but the block types' prompts, which the two tables below
 * take in two ways (blocks_avx512.c).  The float products in 512 bits
 * (fmath_avx512.c), the rest of them AVX2's, which every CPU these tables
 * run on has (dispatch.c checks avx2 with the AVX-512 features). */
#define AVX512_KERNELS                                                                       \
    .fmath = &ml__fmath_avx512, .quantize_q8_0 = quantize_q8_0,                            \
    .quantize_q8_k = quantize_q8_k, .matvec_q8_0 = matvec_q8_0, .matvec_q4_0 = matvec_q4_0, \
    .matmul_q8_0 = matmul_q8_0, .matmul_q4_0 = matmul_q4_0,                                \
    .matmul_x = {{matmul_x_bytes, matmul_x_prepare, matmul_x},                             \
                 {matmul_x_bytes, matmul_x_prepare, matmul_x}},                            \
    .matvec_blk = ml__matvec_blk_avx512, .blk_to_q8_0 = ml__blk_to_q8_0_avx512

const ml_kernels ml__kernels_avx512 = {
    .name = "avx512vnni",
    AVX512_KERNELS,
    .matmul_blk = ml__matmul_blk_avx512,
    .matmul_blk_x = {ml__blk_x_bytes_avx512, ml__blk_x_group_avx512,
                     ml__blk_x_prepare_avx512, ml__blk_x_run_avx512},
};

/* The same with the K prompts' tokens in the lanes at every count. */
const ml_kernels ml__kernels_avx512_lanes = {
    .name = "avx512vnni-lanes",
    AVX512_KERNELS,
    .matmul_blk = ml__matmul_blk_avx512_lanes,
    .matmul_blk_x = {ml__blk_x_bytes_avx512_lanes, ml__blk_x_group_avx512_lanes,
                     ml__blk_x_prepare_avx512_lanes, ml__blk_x_run_avx512_lanes},
};

#endif /* __x86_64__ */
