/* matmul_tiles.h - private: the prefill products (matmul_q8_0,
 * matmul_q4_0) of the x86 kernels, one text for AVX2 and AVX-512 that
 * differ only in a register tile's integer work.  Included once by
 * kernels_avx2.c and kernels_avx512.c (as q4_pairs_row.h is for decode),
 * so each compiles it for its own instruction set.
 *
 * The plan: the weights of a panel of MM_RB rows and the activations of
 * all tokens are rearranged into transposed groups (for eight blocks,
 * register g holds bytes 4g..4g+3 of block k in lane k), so a multiply-add
 * of two registers keeps every lane inside one block and the block sums
 * need no horizontal folding.  The rearranging is paid once per panel row
 * and once per token and shared by all; register tiles of rows x tokens
 * then share each load among several multiply-adds.  Each (token, row)
 * result is rule 3 on exact block sums (kernels.h), so it equals matvec's.
 *
 * What the including file defines first (the guard below checks):
 *   MM_RB                 rows per panel (a multiple of the row tiles)
 *   MM_MIN_TOK            fewest tokens that pay for the rearranging;
 *                         fewer, or no memory for it, go to matvec a
 *                         panel of rows at a time
 *   MM_MIN_TOK_Q4         the same for Q4_0, whose fewer tokens go to
 *                         MM_MATVECS_Q4 (q4_pairs_row.h's matvecs_q4_0)
 *   MM_RT_Q8, MM_TT_Q8    Q8_0's register tile: rows, tokens
 *   MM_RT_Q4, MM_TT_Q4    Q4_0's
 *   MM_TILE_PER_TYPE      1: the MM_SUMS_* pieces depend on q4, so each
 *                         type gets its tile code; 0: one serves both
 *   MM_IN_REGISTER(v)     keeps a loaded vector in a register (asm)
 * and optionally
 *   MM_SUMS_KEEP(v)       the same for a tile's running integer sum,
 *                         after each MM_SUMS_ADD (default: nothing)
 *   MM_HALF_GROUPS        a last group of m <= 4 blocks is stored in four
 *                         registers, not eight (half_group), and its sums
 *                         end by MM_SUMS_END_HALF(q4, s, xg), which adds
 *                         the two halves first (256-bit tiles only: a
 *                         pair tile folds them itself)
 *   MM_PAIR_TILE          the name of its own tile function (tile_any's
 *                         signature, MM_TT_* tokens a tile), which reads
 *                         the activations as interleaved token pairs
 *                         (prepare_x) in 512-bit registers
 * and the pieces for its instruction set, q4 a constant (1 for Q4_0):
 *   MM_LOAD_SCALES(d, m)      __m256 of the m <= 8 floats at d, +0 after
 *   MM_X_CORR(x, m, q4)       __m256i stored after a token's group: the
 *                             per-block correction MM_SUMS_* read at xg+256
 *   MM_W_ENCODE(q4, v)        turns a transposed weight group v[8] into
 *                             what MM_SUMS_ADD takes, before it is stored
 *   MM_SUMS_START(q4, xg)     the integer sums of one (row, token) before
 *                             a group (xg: the token's rearranged group)
 *   MM_SUMS_ADD(q4, s, w, x)  s after one register of weights and of x
 *   MM_SUMS_END(q4, s, xg)    the group's block sums, lane k = block k
 *   MM_MATVEC_Q8, MM_MATVEC_Q4  the decode products (table signatures)
 * and it includes kernels_x86.h (the shared pieces) first. */
#ifndef ML_MATMUL_TILES_H
#define ML_MATMUL_TILES_H

#if !defined(MM_RB) || !defined(MM_MIN_TOK) || !defined(MM_MIN_TOK_Q4) ||                       \
    !defined(MM_MATVECS_Q4) || !defined(MM_RT_Q8) || !defined(MM_TT_Q8) || !defined(MM_RT_Q4) ||  \
    !defined(MM_TT_Q4) || !defined(MM_TILE_PER_TYPE) || !defined(MM_IN_REGISTER)
#error "matmul_tiles.h: define MM_RB, MM_MIN_TOK*, MM_MATVECS_Q4, MM_RT_*, MM_TT_*, MM_TILE_PER_TYPE, MM_IN_REGISTER"
#elif !defined(MM_LOAD_SCALES) || !defined(MM_X_CORR) || !defined(MM_W_ENCODE) ||                 \
    !defined(MM_SUMS_START) || !defined(MM_SUMS_ADD) || !defined(MM_SUMS_END) ||                 \
    !defined(MM_MATVEC_Q8) || !defined(MM_MATVEC_Q4)
#error "matmul_tiles.h: define MM_LOAD_SCALES, MM_X_CORR, MM_W_ENCODE, MM_SUMS_*, MM_MATVEC_*"
#elif !defined(ML_KERNELS_X86_H)
#error "matmul_tiles.h: include kernels/kernels_x86.h first"
#else /* the whole template: one loud error above, not a cascade */

#include <stdlib.h>

#ifndef MM_SUMS_KEEP
#define MM_SUMS_KEEP(v) ((void)0)
#endif

#if defined(MM_HALF_GROUPS) && defined(MM_PAIR_TILE) && !defined(MM_SUMS_END_HALF)
/* The pair tile folds its own halves; the 256-bit tile is not built. */
#define MM_SUMS_END_HALF(q4, s, xg) MM_SUMS_END(q4, s, xg) /* never reached */
#endif

#ifdef MM_HALF_GROUPS
/* Lanes 4-7 of a transposed group of m <= 4 blocks are zeros: register g
 * < 4 takes lanes 0-3 of registers g and g + 4, the rest become zeros, so
 * the tile multiplies four registers where it multiplied eight (Gemma 3's
 * 640-column rows end in such a group).  Integer sums are exact in any
 * order, so adding the halves at the end gives the same block sums. */
#define MM_HALF(m) ((m) <= 4)
ALWAYS_INLINE void half_group(__m256i v[8])
{
    UNROLL
    for (int g = 0; g < 4; g++) {
        v[g] = _mm256_permute2x128_si256(v[g], v[g + 4], 0x20);
        v[g + 4] = _mm256_setzero_si256();
    }
}
#else
#define MM_HALF(m) 0
#define MM_SUMS_END_HALF(q4, s, xg) MM_SUMS_END(q4, s, xg) /* never reached */
ALWAYS_INLINE void half_group(__m256i v[8])
{
    (void)v;
}
#endif

#define MM_RT_MAX (MM_RT_Q8 > MM_RT_Q4 ? MM_RT_Q8 : MM_RT_Q4)
#define MM_TT_MAX (MM_TT_Q8 > MM_TT_Q4 ? MM_TT_Q8 : MM_TT_Q4)

_Static_assert(MM_RB % MM_RT_Q8 == 0 && MM_RB % MM_RT_Q4 == 0,
               "a panel holds whole row tiles (else each ends in a partial one)");
_Static_assert(MM_TILE_PER_TYPE || (MM_RT_Q8 == MM_RT_Q4 && MM_TT_Q8 == MM_TT_Q4),
               "one tile for both types needs one tile size");

/* Tokens whose groups are interleaved: 1, or 2 for MM_PAIR_TILE. */
#ifdef MM_PAIR_TILE
#define MM_X_PAIRS 2
#else
#define MM_X_PAIRS 1
#endif

/* Activation layout per token and group (XG_BYTES): 8 registers of
 * transposed quants, then MM_X_CORR's corrections.  With MM_X_PAIRS 2
 * tokens 2p and 2p + 1 interleave register by register (64 bytes: token
 * 2p's 32, then 2p + 1's), so that one 512-bit register holds both; an
 * odd count's last token gets a partner of zeros (n_tok rounded up).
 * Units of MM_X_PAIRS tokens [u0, u1) of the n_tok, so that threads can
 * share the rearranging (matmul_x_prepare). */
static void prepare_x(const int8_t *xq, size_t nb, size_t n_tok, int q4, size_t u0, size_t u1,
                      uint8_t *xt)
{
    const size_t ng = (nb + 7) / 8, P = MM_X_PAIRS;
    for (size_t t = u0 * P; t < u1 * P; t++)
        for (size_t j = 0; j < ng; j++) {
            const size_t m = t >= n_tok ? 0 : nb - 8 * j < 8 ? nb - 8 * j : 8;
            const int8_t *x = m ? xq + t * nb * 32 + 256 * j : xq; /* read only when m */
            uint8_t *dst = xt + ((t / P) * ng + j) * P * XG_BYTES + 32 * (t % P);
            __m256i v[8];
            UNROLL
            for (size_t k = 0; k < 8; k++)
                v[k] = k < m ? _mm256_loadu_si256((const __m256i *)(x + 32 * k))
                             : _mm256_setzero_si256();
            transpose8x8(v);
            if (MM_HALF(m))
                half_group(v);
            UNROLL
            for (int g = 0; g < 8; g++)
                _mm256_store_si256((__m256i *)(dst + 32 * P * g), v[g]);
            _mm256_store_si256((__m256i *)(dst + 256 * P),
                               m ? MM_X_CORR(x, m, q4) : _mm256_setzero_si256());
        }
}

/* Block k of a Q4_0 group (16 nibble bytes), or zeros past the m-th. */
ALWAYS_INLINE __m128i q4_block_bytes(const uint8_t *g, size_t k, size_t m)
{
    return k < m ? _mm_loadu_si128((const __m128i *)(g + 16 * k)) : _mm_setzero_si128();
}

/* A Q4_0 group transposed as q4_unpack then transpose8x8 would leave it
 * (register g lane k: elements 4g..4g+3 of block k), from the packed
 * bytes: dword d of a block's bytes holds elements 4d..4d+3 in its low
 * nibbles and 16+4d..16+4d+3 in its high ones, so a 4x8 dword transpose
 * of the 128 bytes, then the nibbles split, gives registers d and 4 + d.
 * 8 shuffles instead of transpose8x8's 24 and q4_unpack's 8 inserts. */
ALWAYS_INLINE void q4_group_transposed(const uint8_t *g, size_t m, __m256i v[8])
{
    __m256i p[4], t[4];
    UNROLL
    for (size_t i = 0; i < 4; i++) /* p[i] = blocks i | i + 4 */
        p[i] = _mm256_set_m128i(q4_block_bytes(g, i + 4, m), q4_block_bytes(g, i, m));
    t[0] = _mm256_unpacklo_epi32(p[0], p[1]); /* b0.0 b1.0 b0.1 b1.1 */
    t[1] = _mm256_unpackhi_epi32(p[0], p[1]); /* b0.2 b1.2 b0.3 b1.3 */
    t[2] = _mm256_unpacklo_epi32(p[2], p[3]);
    t[3] = _mm256_unpackhi_epi32(p[2], p[3]);
    const __m256i d[4] = {_mm256_unpacklo_epi64(t[0], t[2]), _mm256_unpackhi_epi64(t[0], t[2]),
                          _mm256_unpacklo_epi64(t[1], t[3]), _mm256_unpackhi_epi64(t[1], t[3])};
    const __m256i m4 = _mm256_set1_epi8(15);
    UNROLL
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_and_si256(d[k], m4);
        v[k + 4] = _mm256_and_si256(_mm256_srli_epi16(d[k], 4), m4);
    }
}

/* One weight row, rearranged: Q8_0 quants as they are, Q4_0 nibbles
 * unsigned in element order, zeros after the last block; then
 * MM_W_ENCODE.  The rows of a panel are read from memory here, once per
 * matmul and in order: prefetched as in matvec. */
ALWAYS_INLINE void prepare_w(int q4, const uint8_t *w, size_t nb, uint8_t *wt)
{
    const size_t block = q4 ? 16 : 32; /* bytes per block */
    for (size_t j = 0; j < (nb + 7) / 8; j++) {
        const size_t m = nb - 8 * j < 8 ? nb - 8 * j : 8;
        const uint8_t *g = w + 8 * block * j;
        if (q4) {
            prefetch_ahead_l2(g, PREFETCH_Q4_L2, 2);
            prefetch_ahead(g, PREFETCH_Q4, 2);
        } else {
            prefetch_ahead_l2(g, PREFETCH_Q8_L2, 4);
            prefetch_ahead(g, PREFETCH_Q8, 4);
        }
        __m256i v[8];
        if (q4) {
            q4_group_transposed(g, m, v);
        } else {
            UNROLL
            for (size_t k = 0; k < 8; k++)
                v[k] = k < m ? _mm256_loadu_si256((const __m256i *)(g + 32 * k))
                             : _mm256_setzero_si256();
            transpose8x8(v);
        }
        if (MM_HALF(m))
            half_group(v);
        MM_W_ENCODE(q4, v);
        store8(wt + j * WG_BYTES, v);
    }
}

static void prepare_w_q8(const uint8_t *w, size_t nb, uint8_t *wt)
{
    prepare_w(0, w, nb, wt);
}

static void prepare_w_q4(const uint8_t *w, size_t nb, uint8_t *wt)
{
    prepare_w(1, w, nb, wt);
}

/* Group j (m <= 8 blocks) of nr <= rt weight rows (rearranged, at wt with
 * stride wstride; scales wd with stride nb) against nt <= tt tokens from
 * t0: the integer sums by MM_SUMS_*, then rule 3 into acc.  Slots past nr
 * and nt are skipped; rt and tt are constants, so every loop unrolls into
 * registers. */
ALWAYS_INLINE void tile_group(int q4, size_t rt, size_t tt, const uint8_t *wt, size_t wstride,
                              const float *wd, size_t nb, const uint8_t *xt, const float *xd,
                              size_t t0, size_t nt, size_t nr, size_t j, size_t m,
                              __m256 acc[MM_RT_MAX][MM_TT_MAX])
{
    const size_t ng = (nb + 7) / 8;
    const int half = MM_HALF(m);
    const uint8_t *xg[MM_TT_MAX];
    __m256i is[MM_RT_MAX][MM_TT_MAX];
    (void)q4; /* unused by MM_SUMS_* where one tile serves both types */
    UNROLL
    for (size_t t = 0; t < tt; t++) {
        xg[t] = xt + ((t0 + (t < nt ? t : 0)) * ng + j) * XG_BYTES;
        const __m256i start = MM_SUMS_START(q4, xg[t]);
        UNROLL
        for (size_t i = 0; i < rt; i++)
            is[i][t] = start;
    }
    UNROLL
    for (int g = 0; g < 8; g++) {
        if (half && g >= 4)
            break;
        __m256i w[MM_RT_MAX];
        UNROLL
        for (size_t i = 0; i < rt; i++)
            w[i] = i < nr ? _mm256_load_si256(
                                (const __m256i *)(wt + i * wstride + j * WG_BYTES + 32 * g))
                          : _mm256_setzero_si256();
        UNROLL
        for (size_t t = 0; t < tt; t++)
            if (t < nt) {
                __m256i x = _mm256_load_si256((const __m256i *)(xg[t] + 32 * g));
                MM_IN_REGISTER(x);
                UNROLL
                for (size_t i = 0; i < rt; i++)
                    if (i < nr) {
                        is[i][t] = MM_SUMS_ADD(q4, is[i][t], w[i], x);
                        MM_SUMS_KEEP(is[i][t]);
                    }
            }
    }
    __m256 sx[MM_TT_MAX];
    UNROLL
    for (size_t t = 0; t < tt; t++)
        sx[t] = t < nt ? MM_LOAD_SCALES(xd + (t0 + t) * nb + 8 * j, m) : _mm256_setzero_ps();
    UNROLL
    for (size_t i = 0; i < rt; i++)
        if (i < nr) {
            const __m256 sw = MM_LOAD_SCALES(wd + i * nb + 8 * j, m);
            UNROLL
            for (size_t t = 0; t < tt; t++)
                if (t < nt)
                    acc[i][t] = combine(acc[i][t],
                                        half ? MM_SUMS_END_HALF(q4, is[i][t], xg[t])
                                             : MM_SUMS_END(q4, is[i][t], xg[t]),
                                        _mm256_mul_ps(sw, sx[t]));
        }
}

/* Rows r0 .. r0 + nr of y for tokens t0 .. t0 + nt: full groups, then the
 * partial one. */
ALWAYS_INLINE void tile(int q4, size_t rt, size_t tt, const uint8_t *wt, size_t wstride,
                        const float *wd, size_t nb, const uint8_t *xt, const float *xd, size_t t0,
                        size_t nt, size_t nr, float *y, size_t ldy, size_t r0)
{
    __m256 acc[MM_RT_MAX][MM_TT_MAX];
    UNROLL
    for (size_t i = 0; i < rt; i++)
        UNROLL
        for (size_t t = 0; t < tt; t++)
            acc[i][t] = _mm256_setzero_ps();
    size_t j = 0;
    for (; j < nb / 8; j++)
        tile_group(q4, rt, tt, wt, wstride, wd, nb, xt, xd, t0, nt, nr, j, 8, acc);
    if (nb % 8)
        tile_group(q4, rt, tt, wt, wstride, wd, nb, xt, xd, t0, nt, nr, j, nb % 8, acc);
    UNROLL
    for (size_t i = 0; i < rt; i++)
        UNROLL
        for (size_t t = 0; t < tt; t++)
            if (i < nr && t < nt)
                y[(t0 + t) * ldy + r0 + i] = fold8(acc[i][t]);
}

/* A tile of the type's size; full tiles get code with every slot known
 * to be used. */
ALWAYS_INLINE void tile_sized(int q4, const uint8_t *wt, size_t wstride, const float *wd,
                              size_t nb, const uint8_t *xt, const float *xd, size_t t0, size_t nt,
                              size_t nr, float *y, size_t ldy, size_t r0)
{
    const size_t rt = q4 ? MM_RT_Q4 : MM_RT_Q8, tt = q4 ? MM_TT_Q4 : MM_TT_Q8;
    if (nt == tt && nr == rt)
        tile(q4, rt, tt, wt, wstride, wd, nb, xt, xd, t0, tt, rt, y, ldy, r0);
    else
        tile(q4, rt, tt, wt, wstride, wd, nb, xt, xd, t0, nt, nr, y, ldy, r0);
}

#if defined(MM_PAIR_TILE)
/* The includer's tile over the interleaved token pairs (one for both
 * types, like tile_any). */
#define MM_TILE(q4) MM_PAIR_TILE
#elif MM_TILE_PER_TYPE
static void tile_q8(const uint8_t *wt, size_t wstride, const float *wd, size_t nb,
                    const uint8_t *xt, const float *xd, size_t t0, size_t nt, size_t nr, float *y,
                    size_t ldy, size_t r0)
{
    tile_sized(0, wt, wstride, wd, nb, xt, xd, t0, nt, nr, y, ldy, r0);
}

static void tile_q4(const uint8_t *wt, size_t wstride, const float *wd, size_t nb,
                    const uint8_t *xt, const float *xd, size_t t0, size_t nt, size_t nr, float *y,
                    size_t ldy, size_t r0)
{
    tile_sized(1, wt, wstride, wd, nb, xt, xd, t0, nt, nr, y, ldy, r0);
}
#define MM_TILE(q4) ((q4) ? tile_q4 : tile_q8)
#else
/* The MM_SUMS_* pieces ignore q4 here: the type is in the data. */
static void tile_any(const uint8_t *wt, size_t wstride, const float *wd, size_t nb,
                     const uint8_t *xt, const float *xd, size_t t0, size_t nt, size_t nr,
                     float *y, size_t ldy, size_t r0)
{
    tile_sized(0, wt, wstride, wd, nb, xt, xd, t0, nt, nr, y, ldy, r0);
}
#define MM_TILE(q4) tile_any
#endif

/* The blocked loop: panels of MM_RB rearranged rows; in each, token tiles
 * outside (their activations, xt, stay in L1) and row tiles inside. */
static void panels(const void *wq, size_t row_bytes, int q4, ml_wscales wd, size_t nb,
                   size_t r0, size_t r1, const mm_scratch *s, const uint8_t *xt, const float *xd,
                   size_t n_tok, float *y, size_t ldy)
{
    const size_t ng = (nb + 7) / 8, wstride = ng * WG_BYTES;
    const size_t rt = q4 ? MM_RT_Q4 : MM_RT_Q8, tt = q4 ? MM_TT_Q4 : MM_TT_Q8;
    for (size_t p = r0; p < r1; p += MM_RB) {
        const size_t pe = r1 - p < MM_RB ? r1 : p + MM_RB;
        for (size_t r = p; r < pe; r++) {
            const uint8_t *row = (const uint8_t *)wq + r * row_bytes;
            if (q4)
                prepare_w_q4(row, nb, s->wt + (r - p) * wstride);
            else
                prepare_w_q8(row, nb, s->wt + (r - p) * wstride);
        }
        const float *pd = panel_scales(wd, p, pe - p, nb, s->wd);
        for (size_t t0 = 0; t0 < n_tok; t0 += tt)
            for (size_t r = p; r < pe; r += rt) {
                const size_t nt = n_tok - t0 < tt ? n_tok - t0 : tt, nr = pe - r < rt ? pe - r : rt;
                MM_TILE(q4)(s->wt + (r - p) * wstride, wstride, pd + (r - p) * nb, nb, xt, xd, t0,
                            nt, nr, y, ldy, r);
            }
    }
}

/* Tokens padded to whole units of MM_X_PAIRS. */
static size_t x_units(size_t n_tok)
{
    return (n_tok + MM_X_PAIRS - 1) / MM_X_PAIRS;
}

/* Whether n_tok tokens take the tiles (else matvec or MM_MATVECS_Q4). */
static int tiles_for(int q4, size_t n_tok)
{
    return n_tok >= MM_MIN_TOK && !(q4 && n_tok < MM_MIN_TOK_Q4);
}

/* The table's matmul for either type (the kernels.h contract), with the
 * activations' rearranged form xt from matmul_x_prepare, or NULL to
 * rearrange them here. */
ALWAYS_INLINE void matmul_any(int q4, const void *wq, ml_wscales wd, size_t cols, size_t r0,
                              size_t r1, const int8_t *xq, const uint8_t *xt, const float *xd,
                              size_t n_tok, float *y, size_t ldy)
{
    const size_t nb = cols / 32;
    mm_scratch s;
    if (r0 >= r1)
        return;
    if (q4 && n_tok < MM_MIN_TOK_Q4) {
        MM_MATVECS_Q4(wq, wd, cols, r0, r1, xq, xd, n_tok, y, ldy);
        return;
    }
    if (!tiles_for(q4, n_tok) ||
        !scratch_new(&s, xt ? 0 : x_units(n_tok) * MM_X_PAIRS, (nb + 7) / 8, MM_RB)) {
        /* matvec per token, a panel of rows at a time, so that the
         * weights come from memory once and from the cache for the rest */
        for (size_t r = r0; r < r1; r += MM_RB) {
            const size_t re = r1 - r < MM_RB ? r1 : r + MM_RB;
            for (size_t t = 0; t < n_tok; t++)
                if (q4)
                    MM_MATVEC_Q4(wq, wd, cols, r, re, xq + t * cols, xd + t * nb, y + t * ldy);
                else
                    MM_MATVEC_Q8(wq, wd, cols, r, re, xq + t * cols, xd + t * nb, y + t * ldy);
        }
        return;
    }
    if (!xt) {
        prepare_x(xq, nb, n_tok, q4, 0, x_units(n_tok), s.xt);
        xt = s.xt;
    }
    panels(wq, q4 ? cols / 2 : cols, q4, wd, nb, r0, r1, &s, xt, xd, n_tok, y, ldy);
    free(s.base);
}

/* kernels.h's matmul_x_bytes: the tiles' activations, or 0 when n_tok
 * does not take them (or the size overflows). */
static size_t matmul_x_bytes(int q4, size_t cols, size_t n_tok)
{
    size_t per_token, bytes;
    if (!tiles_for(q4, n_tok) ||
        __builtin_mul_overflow((cols / 32 + 7) / 8, (size_t)XG_BYTES, &per_token) ||
        __builtin_mul_overflow(x_units(n_tok) * MM_X_PAIRS, per_token, &bytes))
        return 0;
    return bytes;
}

/* kernels.h's matmul_x_prepare: share `part` of `parts` of the units. */
static void matmul_x_prepare(int q4, const int8_t *xq, size_t cols, size_t n_tok, unsigned part,
                             unsigned parts, void *xt)
{
    const size_t u = x_units(n_tok);
    prepare_x(xq, cols / 32, n_tok, q4, u * part / parts, u * (part + 1) / parts, xt);
}

static void matmul_x(int q4, const void *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                     const int8_t *xq, const void *xt, const float *xd, size_t n_tok, float *y,
                     size_t ldy)
{
    if (q4)
        matmul_any(1, wq, wd, cols, r0, r1, xq, xt, xd, n_tok, y, ldy);
    else
        matmul_any(0, wq, wd, cols, r0, r1, xq, xt, xd, n_tok, y, ldy);
}

static void matmul_q8_0(const int8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, size_t n_tok, float *y, size_t ldy)
{
    matmul_any(0, wq, wd, cols, r0, r1, xq, NULL, xd, n_tok, y, ldy);
}

static void matmul_q4_0(const uint8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, size_t n_tok, float *y, size_t ldy)
{
    matmul_any(1, wq, wd, cols, r0, r1, xq, NULL, xd, n_tok, y, ldy);
}

#endif /* the guard */
#endif /* ML_MATMUL_TILES_H */
