/* kernels_avx2.c - the kernels for x86-64 with AVX2 (compiled with -mavx2
 * -mf16c and never -mfma), bit-identical to kernels_scalar.c by the rules
 * of kernels.h.
 *
 * Quantization does the spec's operations lane by lane.  A dot product
 * computes each block's exact int32 sum, gathers eight consecutive blocks'
 * sums into one vector (lane k = block 8j+k) and combines them with the
 * scales in an 8-lane float accumulator: that is rule 3's acc[b % 8].
 *
 * Two ways to get the block sums:
 *  - matvec (decode, memory-bound): per block, maddubs/madd give eight
 *    int32 partial sums, and a transpose-and-add folds eight blocks'
 *    vectors into one.
 *  - matmul (prefill, compute-bound): the weights of a panel of rows and
 *    the activations of all tokens are first rearranged ("transposed
 *    groups": for eight blocks, register g holds bytes 4g..4g+3 of block k
 *    in lane k), so a multiply-add of two registers leaves every lane
 *    inside one block and the sums need no horizontal folding at all.  The
 *    rearranging is paid once per row panel and once per token, and shared
 *    by all tokens and all rows.  The loops are matmul_tiles.h's, shared
 *    with kernels_avx512.c; this file gives the integer sums of a tile.
 * The Q4_0 products use the nibbles unsigned (0..15) and subtract
 * 8 * sum(x) per block afterwards; the Q8_0 products move the sign of w
 * onto x (the reason the format forbids -128). */
#include "kernels/kernels.h"

#if defined(__x86_64__)

#include "kernels/fmath.h"
#include "kernels/kernels_x86.h"

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================
 * Quantization
 * ====================================================================== */

/* |x| with NaN lanes set to 0, so a NaN never wins the maximum (the
 * reference's "if (a > amax)" skips it). */
ALWAYS_INLINE __m256 abs_no_nan(__m256 x)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    return _mm256_and_ps(_mm256_andnot_ps(sign, x), _mm256_cmp_ps(x, x, _CMP_ORD_Q));
}

ALWAYS_INLINE float hmax8(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

/* trunc(x * scale + copysign(0.5, x)) clamped to [-127, 127] as int32:
 * the clamp comes before any saturating pack (those stop at -128).  A NaN
 * gives 0, as in the reference: it is zeroed before the conversion, which
 * would make it INT32_MIN. */
ALWAYS_INLINE __m256i round_q(__m256 x, __m256 scale)
{
    const __m256 half = _mm256_or_ps(_mm256_and_ps(x, _mm256_set1_ps(-0.0f)),
                                     _mm256_set1_ps(0.5f));
    const __m256 v = _mm256_add_ps(_mm256_mul_ps(x, scale), half);
    const __m256i q = _mm256_cvttps_epi32(_mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q)));
    return _mm256_max_epi32(_mm256_min_epi32(q, _mm256_set1_epi32(127)), _mm256_set1_epi32(-127));
}

static void quantize_q8_0(const float *x, size_t n, int8_t *q, float *d)
{
    for (size_t b = 0; b < n / 32; b++) {
        const float *xb = x + 32 * b;
        const __m256 v0 = _mm256_loadu_ps(xb), v1 = _mm256_loadu_ps(xb + 8);
        const __m256 v2 = _mm256_loadu_ps(xb + 16), v3 = _mm256_loadu_ps(xb + 24);
        const __m256 m = _mm256_max_ps(_mm256_max_ps(abs_no_nan(v0), abs_no_nan(v1)),
                                       _mm256_max_ps(abs_no_nan(v2), abs_no_nan(v3)));
        const float amax = hmax8(m);
        if (amax < 1e-30f) {
            d[b] = 0.0f;
            memset(q + 32 * b, 0, 32);
            continue;
        }
        d[b] = amax / 127.0f;
        const __m256 scale = _mm256_set1_ps(127.0f / amax);
        /* packs work per 128-bit half: the dwords come out as elements
         * 0-3, 8-11, 16-19, 24-27 | 4-7, 12-15, 20-23, 28-31. */
        const __m256i p01 = _mm256_packs_epi32(round_q(v0, scale), round_q(v1, scale));
        const __m256i p23 = _mm256_packs_epi32(round_q(v2, scale), round_q(v3, scale));
        const __m256i p = _mm256_packs_epi16(p01, p23);
        const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        _mm256_storeu_si256((__m256i *)(q + 32 * b), _mm256_permutevar8x32_epi32(p, order));
    }
}

/* The same per 256 (rule 6's K activations): quantize_q8_0's steps with
 * one scale for eight blocks. */
static void quantize_q8_k(const float *x, size_t n, int8_t *q, float *d)
{
    for (size_t k = 0; k < n / 256; k++, x += 256, q += 256) {
        __m256 m = _mm256_setzero_ps();
        for (int i = 0; i < 32; i++)
            m = _mm256_max_ps(m, abs_no_nan(_mm256_loadu_ps(x + 8 * i)));
        const float amax = hmax8(m);
        if (amax < 1e-30f) {
            d[k] = 0.0f;
            memset(q, 0, 256);
            continue;
        }
        d[k] = amax / 127.0f;
        const __m256 scale = _mm256_set1_ps(127.0f / amax);
        const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        for (int b = 0; b < 8; b++) {
            const float *xb = x + 32 * b;
            const __m256i p01 = _mm256_packs_epi32(round_q(_mm256_loadu_ps(xb), scale),
                                                   round_q(_mm256_loadu_ps(xb + 8), scale));
            const __m256i p23 = _mm256_packs_epi32(round_q(_mm256_loadu_ps(xb + 16), scale),
                                                   round_q(_mm256_loadu_ps(xb + 24), scale));
            _mm256_storeu_si256((__m256i *)(q + 32 * b),
                                _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p01, p23), order));
        }
    }
}

/* ======================================================================
 * Shared pieces of the dot products
 * ====================================================================== */


/* The m <= 8 scales at d, zeros after. */
ALWAYS_INLINE __m256 load_scales(const float *d, size_t m)
{
    if (m == 8)
        return _mm256_loadu_ps(d);
    const __m256i mask =
        _mm256_cmpgt_epi32(_mm256_set1_epi32((int)m), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_maskload_ps(d, mask);
}

/* sw[k] * xd[k] for the m <= 8 blocks of a group; lanes past m are +0,
 * and a +0 added to an accumulator (never -0) leaves it unchanged. */
ALWAYS_INLINE __m256 scales8(__m256 sw, const float *xd, size_t m)
{
    return _mm256_mul_ps(sw, load_scales(xd, m));
}

/* Σ x over each of the m <= 8 blocks at x, lane k for block k. */
ALWAYS_INLINE __m256i block_sums(const int8_t *x, size_t m)
{
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    __m256i v[8];
    UNROLL
    for (size_t k = 0; k < 8; k++) {
        v[k] = _mm256_setzero_si256();
        if (k < m) {
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(x + 32 * k));
            v[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, xv), ones16);
        }
    }
    return hsum8x8(v);
}

/* ======================================================================
 * matvec: one row at a time, horizontal folding per group of 8 blocks
 * ====================================================================== */

/* Eight int32 lanes that sum to block's Σ w·x: |w| · (x with w's sign). */
ALWAYS_INLINE __m256i q8_block(const int8_t *w, const int8_t *x)
{
    const __m256i wv = _mm256_loadu_si256((const __m256i *)w);
    const __m256i xv = _mm256_loadu_si256((const __m256i *)x);
    const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(wv), _mm256_sign_epi8(xv, wv));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* The same for Q4_0 with unsigned nibbles: Σ nibble·x (8·Σx still due). */
ALWAYS_INLINE __m256i q4_block(const uint8_t *w, const int8_t *x)
{
    const __m256i xv = _mm256_loadu_si256((const __m256i *)x);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(q4_unpack(w), xv), _mm256_set1_epi16(1));
}

ALWAYS_INLINE __m256 group_q8(__m256 acc, const int8_t *w, __m256 sw, const int8_t *x,
                              const float *xd, size_t m)
{
    __m256i v[8];
    UNROLL
    for (size_t k = 0; k < 8; k++)
        v[k] = k < m ? q8_block(w + 32 * k, x + 32 * k) : _mm256_setzero_si256();
    return combine(acc, hsum8x8(v), scales8(sw, xd, m));
}

/* xs8: 8·Σx of the group's blocks. */
ALWAYS_INLINE __m256 group_q4(__m256 acc, const uint8_t *w, __m256 sw, const int8_t *x,
                              const float *xd, __m256i xs8, size_t m)
{
    __m256i v[8];
    UNROLL
    for (size_t k = 0; k < 8; k++)
        v[k] = k < m ? q4_block(w + 16 * k, x + 32 * k) : _mm256_setzero_si256();
    return combine(acc, _mm256_sub_epi32(hsum8x8(v), xs8), scales8(sw, xd, m));
}


/* Row r of W against x.  f16 is a constant where this is inlined, so the
 * two scale encodings get a loop each. */
ALWAYS_INLINE float row_q8(const int8_t *wq, ml_wscales wd, size_t r, const int8_t *x,
                           const float *xd, size_t nb, int f16)
{
    const int8_t *w = wq + r * nb * 32;
    __m256 acc = _mm256_setzero_ps();
    size_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        prefetch_q8(w + 32 * b, wscale_at(wd, r * nb + b, f16), f16);
        acc = group_q8(acc, w + 32 * b, wscales8(wd, r * nb + b, 8, f16), x + 32 * b, xd + b, 8);
    }
    if (b < nb) {
        prefetch_q8(w + 32 * b, wscale_at(wd, r * nb + b, f16), f16);
        acc = group_q8(acc, w + 32 * b, wscales8(wd, r * nb + b, nb - b, f16), x + 32 * b, xd + b,
                       nb - b);
    }
    return fold8(acc);
}

/* xs: 8·Σx of every group of blocks of the activation, or NULL to compute
 * them on the way. */
ALWAYS_INLINE float row_q4(const uint8_t *wq, ml_wscales wd, size_t r, const int8_t *x,
                           const float *xd, const __m256i *xs, size_t nb, int f16)
{
    const uint8_t *w = wq + r * nb * 16;
    __m256 acc = _mm256_setzero_ps();
    size_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        prefetch_q4(w + 16 * b, wscale_at(wd, r * nb + b, f16), f16);
        const __m256i s = xs ? xs[b / 8] : _mm256_slli_epi32(block_sums(x + 32 * b, 8), 3);
        acc = group_q4(acc, w + 16 * b, wscales8(wd, r * nb + b, 8, f16), x + 32 * b, xd + b, s, 8);
    }
    if (b < nb) {
        prefetch_q4(w + 16 * b, wscale_at(wd, r * nb + b, f16), f16);
        const __m256i s = xs ? xs[b / 8] : _mm256_slli_epi32(block_sums(x + 32 * b, nb - b), 3);
        acc = group_q4(acc, w + 16 * b, wscales8(wd, r * nb + b, nb - b, f16), x + 32 * b, xd + b,
                       s, nb - b);
    }
    return fold8(acc);
}

/* Activation block sums kept on the stack up to this many groups (rows of
 * 65536 columns, the format's dimension limit); longer rows compute them
 * per row. */
#define XS_GROUPS 256

static void matvec_q8_0(const int8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, float *y)
{
    const size_t nb = cols / 32;
    if (wd.f16)
        for (size_t r = r0; r < r1; r++)
            y[r] = row_q8(wq, wd, r, xq, xd, nb, 1);
    else
        for (size_t r = r0; r < r1; r++)
            y[r] = row_q8(wq, wd, r, xq, xd, nb, 0);
}

/* Q4_0 decode uses the regrouped activation of kernels_x86.h (q4_pairs):
 * a pair of blocks costs two vpmaddubsw, one 16-bit add (at most
 * 2·2·15·127 per lane) and one vpmaddwd. */
static void q4_pairs_init(q4_pairs *qp, const int8_t *x, const float *xd, size_t nb)
{
    const __m256i order = _mm256_setr_epi32(PAIR_ORDER);
    q4_pairs_regroup(qp, x, xd, nb);
    for (size_t j = 0; j < (nb + 7) / 8; j++) {
        const size_t m = nb - 8 * j < 8 ? nb - 8 * j : 8;
        const __m256i s8 = _mm256_slli_epi32(block_sums(x + 256 * j, m), 3);
        qp->corr[j] = _mm256_permutevar8x32_epi32(_mm256_sub_epi32(_mm256_setzero_si256(), s8),
                                                  order);
    }
}

/* Σ nibble·x of two blocks' nibbles (q4_pair_nibbles), lanes 0-3 and
 * 4-7, against the regrouped activation xp. */
ALWAYS_INLINE __m256i q4_pair_dot(__m256i lo, __m256i hi, const int8_t *xp)
{
    const __m256i x0 = _mm256_loadu_si256((const __m256i *)xp);
    const __m256i x1 = _mm256_loadu_si256((const __m256i *)(xp + 32));
    const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, x0), _mm256_maddubs_epi16(hi, x1));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* The same from the blocks at w (only the first when `one`). */
ALWAYS_INLINE __m256i q4_pair_sums(const uint8_t *w, const int8_t *xp, int one)
{
    __m256i lo, hi;
    q4_pair_nibbles(w, one, &lo, &hi);
    return q4_pair_dot(lo, hi, xp);
}

#include "kernels/q4_pairs_row.h"

static void matvec_q4_0(const uint8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, float *y)
{
    const size_t nb = cols / 32, ng = (nb + 7) / 8;
    if (cols <= PAIR_COLS) {
        q4_pairs qp;
        q4_pairs_init(&qp, xq, xd, nb);
        matvec_q4_pairs(wq, wd, r0, r1, &qp, nb, y);
        return;
    }
    __m256i xs_buf[XS_GROUPS];
    const __m256i *xs = NULL;
    if (ng <= XS_GROUPS) {
        for (size_t j = 0; j < ng; j++) {
            const size_t m = nb - 8 * j < 8 ? nb - 8 * j : 8;
            xs_buf[j] = _mm256_slli_epi32(block_sums(xq + 256 * j, m), 3);
        }
        xs = xs_buf;
    }
    if (wd.f16)
        for (size_t r = r0; r < r1; r++)
            y[r] = row_q4(wq, wd, r, xq, xd, xs, nb, 1);
    else
        for (size_t r = r0; r < r1; r++)
            y[r] = row_q4(wq, wd, r, xq, xd, xs, nb, 0);
}

/* ======================================================================
 * matmul: transposed groups (matmul_tiles.h), register tiles of rows x tokens
 * ====================================================================== */

#define MM_RB 16      /* rows per panel of rearranged weights */
/* Fewest tokens that pay for the rearranging (measured on TinyLlama's
 * 5632 x 2048: at 2 tokens a matvec a panel at a time wins, at 4 the
 * tiles win for Q8_0; Q4_0's matvecs still win at 4 and lose at 8). */
#define MM_MIN_TOK 4
/* Q4_0: up to 8 tokens go to matvecs_q4_t (below), which transposes each
 * row in registers and so rearranges nothing; measured on an AVX2-only
 * CPU, one thread, weights in L2, it beat the pairs of q4_pairs_row.h at
 * 4 tokens and the tiles at 6, and shortened bench-seqs' 8-sequence step
 * (docs/speed-history.md). */
#define MM_MIN_TOK_Q4 9
static void matvecs_q4_t(const uint8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                         const int8_t *xq, const float *xd, size_t n_tok, float *y, size_t ldy);
#define MM_MATVECS_Q4 matvecs_q4_t
/* Register tiles (16 registers), measured best among 1-3 rows x 2-6
 * tokens; the differences were small. */
#define MM_RT_Q8 1
#define MM_TT_Q8 5
#define MM_RT_Q4 1
#define MM_TT_Q4 4
#define MM_TILE_PER_TYPE 1 /* Q8_0 and Q4_0 sum differently (below) */

/* Keeps a loaded vector in a register: without this the compiler folds
 * the load into every instruction that uses it, one load per row. */
#define MM_IN_REGISTER(v) __asm__("" : "+x"(v))
/* And keeps each running sum of a tile in its register, added to in
 * program order: without it GCC reassociates the additions of a group
 * into trees whose temporaries outnumber the 16 registers, spilling
 * products to the stack (measured on Q4_0 and Q8_0 prefill of
 * TinyLlama's 5632 x 2048, one thread: both faster with it, Q4_0 most). */
#define MM_SUMS_KEEP(v) MM_IN_REGISTER(v)

/* Q8_0: |w| · (x with w's sign), madd to int32 per register.  Q4_0:
 * nibbles · x summed in int16 over the whole group (at most 16 products
 * of 15·127 per lane), one madd at the end, then the correction -8·Σx
 * that every token's group carries (Q8_0 ignores it). */
ALWAYS_INLINE __m256i mm_sums_add(int q4, __m256i s, __m256i w, __m256i x)
{
    if (q4)
        return _mm256_add_epi16(s, _mm256_maddubs_epi16(w, x));
    const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
    return _mm256_add_epi32(s, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

ALWAYS_INLINE __m256i mm_q4_sums_end(__m256i s, const uint8_t *xg)
{
    return _mm256_add_epi32(_mm256_madd_epi16(s, _mm256_set1_epi16(1)),
                            _mm256_load_si256((const __m256i *)(xg + 256)));
}

ALWAYS_INLINE __m256i mm_x_corr(const int8_t *x, size_t m)
{
    return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(block_sums(x, m), 3));
}

/* The block sums of a half group (matmul_tiles.h's half_group): lanes
 * 0-3 plus lanes 4-7, zeros above. */
ALWAYS_INLINE __m256i mm_half_fold(__m256i s)
{
    return _mm256_zextsi128_si256(
        _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1)));
}

ALWAYS_INLINE __m256i mm_sums_end_half(int q4, __m256i s, const uint8_t *xg)
{
    if (!q4)
        return mm_half_fold(s);
    return _mm256_add_epi32(mm_half_fold(_mm256_madd_epi16(s, _mm256_set1_epi16(1))),
                            _mm256_load_si256((const __m256i *)(xg + 256)));
}

#define MM_HALF_GROUPS
#define MM_SUMS_END_HALF(q4, s, xg) mm_sums_end_half(q4, s, xg)
#define MM_LOAD_SCALES(d, m) load_scales(d, m)
#define MM_X_CORR(x, m, q4) ((void)(q4), mm_x_corr(x, m)) /* the same for both */
#define MM_W_ENCODE(q4, v) ((void)0) /* Q8_0 signed, Q4_0 nibbles: as rearranged */
#define MM_SUMS_START(q4, xg) _mm256_setzero_si256()
#define MM_SUMS_ADD(q4, s, w, x) mm_sums_add(q4, s, w, x)
#define MM_SUMS_END(q4, s, xg) ((q4) ? mm_q4_sums_end(s, xg) : (s))
#define MM_MATVEC_Q8 matvec_q8_0
#define MM_MATVEC_Q4 matvec_q4_0
#include "kernels/matmul_tiles.h"

/* ======================================================================
 * 2-8 tokens (several sequences decoding): rows transposed in registers
 * ====================================================================== */

/* The tiles' work without their rearranged copy of the weights: each
 * group of a row is transposed in registers (q4_group_transposed) and
 * met there by every token's transposed activation (prepare_x), so the
 * block sums need no folding (the decode pairs spend three shuffles and
 * adds a group on it, per token) and no weights are stored and loaded
 * back.  Per token: tile_group's operations on the same values, so the
 * same bits as matvec. */
#define QT_NT 8 /* tokens a row meets at once (their accumulators spill: cheap, once a group) */

ALWAYS_INLINE void group_q4_t(__m256 acc[QT_NT], const uint8_t *w, __m256 sw, const uint8_t *xt,
                              const float *xd, size_t nt, size_t nb, size_t j, size_t m)
{
    const size_t ng = (nb + 7) / 8;
    const int half = MM_HALF(m);
    __m256i v[8];
    q4_group_transposed(w, m, v);
    if (half)
        half_group(v);
    UNROLL
    for (size_t t = 0; t < QT_NT; t++)
        if (t < nt) {
            const uint8_t *xg = xt + (t * ng + j) * XG_BYTES;
            __m256i s = _mm256_setzero_si256();
            UNROLL
            for (int g = 0; g < 8; g++) {
                if (half && g >= 4)
                    break;
                s = mm_sums_add(1, s, v[g], _mm256_load_si256((const __m256i *)(xg + 32 * g)));
                MM_SUMS_KEEP(s);
            }
            acc[t] = combine(acc[t], half ? mm_sums_end_half(1, s, xg) : mm_q4_sums_end(s, xg),
                             _mm256_mul_ps(sw, load_scales(xd + t * nb + 8 * j, m)));
        }
}

ALWAYS_INLINE void row_q4_t(const uint8_t *wq, ml_wscales wd, size_t r, const uint8_t *xt,
                            const float *xd, size_t nt, size_t nb, int f16, float *y, size_t ldy)
{
    const uint8_t *w = wq + r * nb * 16;
    __m256 acc[QT_NT];
    UNROLL
    for (size_t t = 0; t < QT_NT; t++)
        acc[t] = _mm256_setzero_ps();
    size_t b = 0, j = 0;
    for (; b + 8 <= nb; b += 8, j++) { /* whole groups, then the last part */
        prefetch_q4(w + 16 * b, wscale_at(wd, r * nb + b, f16), f16);
        group_q4_t(acc, w + 16 * b, wscales8(wd, r * nb + b, 8, f16), xt, xd, nt, nb, j, 8);
    }
    if (b < nb) {
        prefetch_q4(w + 16 * b, wscale_at(wd, r * nb + b, f16), f16);
        group_q4_t(acc, w + 16 * b, wscales8(wd, r * nb + b, nb - b, f16), xt, xd, nt, nb, j,
                   nb - b);
    }
    UNROLL
    for (size_t t = 0; t < QT_NT; t++)
        if (t < nt)
            y[t * ldy + r] = fold8(acc[t]);
}

/* Rows [r0, r1) for nt <= QT_NT tokens; nt is a constant where inlined. */
ALWAYS_INLINE void rows_q4_t(const uint8_t *wq, ml_wscales wd, size_t r0, size_t r1,
                             const uint8_t *xt, const float *xd, size_t nt, size_t nb, float *y,
                             size_t ldy)
{
    for (size_t r = r0; r < r1; r++)
        if (wd.f16)
            row_q4_t(wq, wd, r, xt, xd, nt, nb, 1, y, ldy);
        else
            row_q4_t(wq, wd, r, xt, xd, nt, nb, 0, y, ldy);
}

static void rows_q4_t_any(const uint8_t *wq, ml_wscales wd, size_t r0, size_t r1,
                          const uint8_t *xt, const float *xd, size_t n_tok, size_t nb, float *y,
                          size_t ldy)
{
    switch (n_tok) {
    case 2: rows_q4_t(wq, wd, r0, r1, xt, xd, 2, nb, y, ldy); break;
    case 3: rows_q4_t(wq, wd, r0, r1, xt, xd, 3, nb, y, ldy); break;
    case 4: rows_q4_t(wq, wd, r0, r1, xt, xd, 4, nb, y, ldy); break;
    case 5: rows_q4_t(wq, wd, r0, r1, xt, xd, 5, nb, y, ldy); break;
    case 6: rows_q4_t(wq, wd, r0, r1, xt, xd, 6, nb, y, ldy); break;
    case 7: rows_q4_t(wq, wd, r0, r1, xt, xd, 7, nb, y, ldy); break;
    default: rows_q4_t(wq, wd, r0, r1, xt, xd, QT_NT, nb, y, ldy); break;
    }
}

static void matvecs_q4_t(const uint8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                         const int8_t *xq, const float *xd, size_t n_tok, float *y, size_t ldy)
{
    const size_t nb = cols / 32, ng = (nb + 7) / 8;
    uint8_t *xt = n_tok >= 2 && n_tok <= QT_NT ? aligned_alloc(32, n_tok * ng * XG_BYTES) : NULL;
    if (!xt) { /* one token (decode's own path), or no memory: the same bits */
        matvecs_q4_0(wq, wd, cols, r0, r1, xq, xd, n_tok, y, ldy);
        return;
    }
    _Static_assert(MM_X_PAIRS == 1, "prepare_x's units are tokens here");
    prepare_x(xq, nb, n_tok, 1, 0, n_tok, xt);
    rows_q4_t_any(wq, wd, r0, r1, xt, xd, n_tok, nb, y, ldy);
    free(xt);
}

const ml_kernels ml__kernels_avx2 = {
    .name = "avx2",
    .fmath = &ml__fmath_avx2,
    .quantize_q8_0 = quantize_q8_0,
    .quantize_q8_k = quantize_q8_k,
    .matvec_q8_0 = matvec_q8_0,
    .matvec_q4_0 = matvec_q4_0,
    .matmul_q8_0 = matmul_q8_0,
    .matmul_q4_0 = matmul_q4_0,
    .matmul_x = {{matmul_x_bytes, matmul_x_prepare, matmul_x},
                 {matmul_x_bytes, matmul_x_prepare, matmul_x}},
    .matvec_blk = ml__matvec_blk_avx2,
    .matmul_blk = ml__matmul_blk_avx2,
    .matmul_blk_x = {ml__blk_x_bytes_avx2, ml__blk_x_group_avx2,
                     ml__blk_x_prepare_avx2, ml__blk_x_run_avx2},
    .blk_to_q8_0 = ml__blk_to_q8_0_avx2,
};

#endif /* __x86_64__ */
