/* kernels_amx.c - the prefill products (matmul_q8_0, matmul_q4_0, and
 * matmul_blk's Q4_1, Q5_1, Q4_K, Q5_K, Q6_K and IQ4_XS) on Intel AMX,
 * beside the AVX-512 VNNI table whose other kernels it uses
 * (compiled with its flags and -mamx-tile -mamx-int8, never -mfma).
 * dispatch.c offers this table only where the CPU has AMX-INT8 and Linux
 * lets the process use the tile registers (arch_prctl); the table is not
 * to be called without that permission (the CPU faults).
 *
 * TDPBSSD multiplies a tile of 16 rows x K signed bytes by one of K x 16
 * and adds the 16 x 16 int32 dot products into a third tile: 16 x 16 x K
 * multiply-adds in one instruction.  With K = 32, one block, the result
 * tile holds the exact block sums of 16 tokens x 16 weight rows, and the
 * vector units keep only rule 3's float steps (kernels.h): per block and
 * (token, row) a conversion, two multiplications and an addition, 16 rows
 * a register.  So the order, and every bit, is the reference's.
 *
 * Per block of a 16 x 16 tile the tile work (zero, two loads, TDPBSSD,
 * the store of the sums) and the float steps take about as long as each
 * other, so one block's tile work is issued, on a second set of tiles,
 * before the previous block's float steps (several blocks ahead was
 * slower; docs/speed-history.md).  The gain over the AVX-512 tiles stays
 * far below the raw instruction's: the per-block scales cost more than
 * the integer products once those are fast.
 *
 * Rule 3 keeps eight strided partial sums per output, so a tile visits
 * its blocks chain by chain (b = j, j + 8, ... for j = 0..7) with one
 * register of 16 rows per token, keeps chain j's sums and folds the eight
 * at the end as fold8 does.
 *
 * Operands: A is 16 tokens' block, read where the activations are (a
 * last tile of fewer tokens from a copy padded with zeros); B is 16
 * weight rows' block in the order TDPBSSD reads it (row k: bytes 4k..4k+3
 * of weight row 0, then of row 1, ...; Q4_0 unpacked to nibble - 8),
 * rearranged once per panel of 16 rows and shared by every token tile.
 * A result row is one token's 16 outputs, stored as they are.  Fewer than
 * AMX_MIN_TOK tokens go to the AVX-512 table.
 *
 * Q4_1 and Q5_1 (kernels.h's rule 5) are Q8_0 with unsigned quants and a
 * second term per block: a panel is unpacked (blocks_x86.h's blk_unpack)
 * and put in B order as Q8_0's, and each block's s adds
 * (float)asum * (m * xd) to rule 3's product before it is accumulated,
 * asum the token's block sum (exact as a float).
 *
 * Q4_K, Q5_K, Q6_K and IQ4_XS (rule 6: K activations, one scale per 256)
 * have one float step per super-block, so their integer work is what
 * counts.  A panel is unpacked (blocks_x86.h's blk_unpack_k) and put in B
 * order; the scales are folded into the panels so that every byte stays
 * a byte (Q4_K, Q5_K: the scale split, two panels; Q6_K: four; IQ4_XS:
 * the product split, two), and the tiles sum whole super-blocks in
 * products of K = 64, leaving the vector units a few shifts and adds per
 * super-block. */
#include "kernels/kernels.h"

#if defined(__x86_64__)

#include "kernels/fmath.h"
#include "kernels/kernels_x86.h"

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

extern const ml_kernels ml__kernels_avx512;

#define TILE 16        /* tokens and weight rows of a result tile */
#define BLOCK 32       /* bytes of a Q8_0 block = elements of any block */
#define WB_BLOCK 512   /* bytes of one block of a panel in B order */
/* Fewer tokens go to the AVX-512 table's products: rearranging a panel
 * is paid per call, and a last partial tile costs a whole one (measured
 * per 16 x 16 block on 2048 x 2048, one thread: below 32 tokens neither
 * won throughout, and a partial tile often lost to AVX-512).
 * Splitting the last partial tile off to AVX-512 was slower still: that
 * rearranges the weights a second time. */
#define AMX_MIN_TOK 32
/* Tokens a panel meets before the next panel is rearranged: about this
 * many bytes of activations, so that they stay in L2 while the panels
 * pass (measured faster per block on TinyLlama's 5632-column rows at
 * 512 tokens). */
#define CHUNK_BYTES (1u << 20)

/* Tile registers (literal numbers: gcc's intrinsics paste them into the
 * instruction). */
#define T_SUMS 0
#define T_X 1
#define T_W 2

/* The LDTILECFG operand (palette 1): sums 16 x 16 int32, A 16 rows x 32
 * bytes, B 8 rows x 64 bytes.  A constant in memory, not built on the
 * stack: gcc need not see LDTILECFG read it and may drop the stores that
 * would fill it (llama.cpp's SIGILL on this machine: its pull request
 * 26954). */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((aligned(64))) tile_cfg;

/* The blocks' products (Q8_0, Q4_0, Q4_1, Q5_1): two sets of
 * sums, A and B tiles (0-2, 3-5), so that one block's tile work runs
 * while the vector units do the previous block's float steps. */
#define T_SUMS2 3
#define T_X2 4
#define T_W2 5
static const tile_cfg tile_config_pair = {
    .palette = 1,
    .colsb = {[T_SUMS] = TILE * 4, [T_X] = BLOCK, [T_W] = TILE * 4, [T_SUMS2] = TILE * 4,
              [T_X2] = BLOCK, [T_W2] = TILE * 4},
    .rows = {[T_SUMS] = TILE, [T_X] = TILE, [T_W] = BLOCK / 4, [T_SUMS2] = TILE, [T_X2] = TILE,
             [T_W2] = BLOCK / 4},
};

/* Rule 6's products of K = 64 (Q4_K, Q5_K, Q6_K, IQ4_XS: the scales
 * folded into the weights, below): tiles 0-6 all 16 rows x 64 bytes.  Q4_K and Q5_K
 * use two pairs of sums tiles (F_LO, F_HI; F_LO2, F_HI2), A and two B
 * tiles; Q6_K four sums tiles (P_A-P_D), the same A and B tiles. */
#define F_LO 0
#define F_HI 1
#define F_LO2 2
#define F_HI2 3
#define P_A 0
#define P_B 1
#define P_C 2
#define P_D 3
#define F_X 4
#define F_W 5
#define F_W2 6
static const tile_cfg tile_config_k64 = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64},
    .rows = {TILE, TILE, TILE, TILE, TILE, TILE, TILE},
};

/* ---- the operands ---- */

/* A panel of nr <= 16 weight rows from r in B order: block b's 512
 * bytes at wb + 512 b, row k holding bytes 4k..4k+3 of the block of each
 * weight row (row n at 4n; Q4_0 unpacked to nibble - 8), and its scales
 * as f32, wdt[16 b + n].  Rows past nr are never read (masked gathers)
 * and give columns of the result that are never stored. */
static void prepare_panel(int q4, const void *wq, ml_wscales wd, size_t cols, size_t r, size_t nr,
                          int8_t *wb, float *wdt)
{
    const size_t nb = cols / BLOCK, row_bytes = q4 ? cols / 2 : cols;
    const __mmask16 live = (__mmask16)((1u << nr) - 1);
    const __m512i rows = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32((int)(row_bytes / 4)));
    const __m512i low = _mm512_set1_epi8(15), eight = _mm512_set1_epi8(8);
    const uint8_t *w = (const uint8_t *)wq + r * row_bytes;
    for (size_t b = 0; b < nb; b++) {
        int8_t *dst = wb + WB_BLOCK * b;
        if (!q4) {
            UNROLL
            for (int k = 0; k < BLOCK / 4; k++)
                _mm512_store_si512((__m512i *)(dst + 64 * k),
                                   _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, rows,
                                                               w + BLOCK * b + 4 * k, 4));
            continue;
        }
        /* Q4_0 byte j: element j low, j + 16 high; bytes 4k..4k+3 give
         * rows k and k + 4 */
        UNROLL
        for (int k = 0; k < 4; k++) {
            const __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, rows,
                                                          w + 16 * b + 4 * k, 4);
            const __m512i lo = _mm512_sub_epi8(_mm512_and_si512(v, low), eight);
            const __m512i hi =
                _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), low), eight);
            _mm512_store_si512((__m512i *)(dst + 64 * k), lo);
            _mm512_store_si512((__m512i *)(dst + 64 * (k + 4)), hi);
        }
    }
    /* the scales, row by row (an f16 row widened 16 at a time) */
    for (size_t n = 0; n < TILE; n++) {
        const size_t i0 = (r + n) * nb;
        for (size_t b = 0; b < nb; b += TILE) {
            const size_t m = nb - b < TILE ? nb - b : TILE;
            const __mmask16 k = n < nr ? (__mmask16)((1u << m) - 1) : 0;
            _Alignas(64) float f[TILE];
            if (wd.f16)
                _mm512_store_ps(f, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(
                                       k, (const uint16_t *)wd.p + i0 + b)));
            else
                _mm512_store_ps(f, _mm512_maskz_loadu_ps(k, (const float *)wd.p + i0 + b));
            for (size_t i = 0; i < m; i++)
                wdt[TILE * (b + i) + n] = f[i];
        }
    }
}

/* ---- one 16 x 16 tile ---- */

/* Block b's exact sums into sums[16][16] (token m, row n), on one set of
 * tiles (their numbers are the instructions' immediates: one function per
 * set, block_sums on the first and block_sums2 on the second). */
#define BLOCK_SUMS(name, S, X, W)                                                              \
    ALWAYS_INLINE void name(const int8_t *x, size_t cols, const int8_t *wb, size_t b,           \
                            int32_t sums[TILE][TILE])                                          \
    {                                                                                          \
        _tile_zero(S);                                                                         \
        _tile_loadd(X, x + BLOCK * b, (long)cols);                                             \
        _tile_loadd(W, wb + WB_BLOCK * b, TILE * 4);                                           \
        _tile_dpbssd(S, X, W);                                                                 \
        _tile_stored(S, sums, TILE * 4);                                                       \
    }
BLOCK_SUMS(block_sums, T_SUMS, T_X, T_W)
BLOCK_SUMS(block_sums2, T_SUMS2, T_X2, T_W2)

/* Rule 3 for block b: acc[m] += (float)sum * (wd * xd), lane n = row n;
 * the rows' scales at wdt + 16 b, the tokens' at xdt + 16 b.  With mins
 * (Q4_1, Q5_1: rule 5) the block's s adds (float)asum * (m * xd), the
 * rows' mins at wmt + 16 b, the tokens' sums (as floats) at xst + 16 b. */
ALWAYS_INLINE void scale_add(int32_t sums[TILE][TILE], const float *wdt, const float *xdt,
                             const float *wmt, const float *xst, size_t b, __m512 acc[TILE])
{
    const __m512 wv = _mm512_load_ps(wdt + TILE * b);
    const __m512 mv = wmt ? _mm512_load_ps(wmt + TILE * b) : wv;
    UNROLL
    for (int m = 0; m < TILE; m++) {
        const __m512 xdv = _mm512_set1_ps(xdt[TILE * b + m]);
        const __m512 fsum = _mm512_cvtepi32_ps(_mm512_load_si512((const __m512i *)sums[m]));
        __m512 p = _mm512_mul_ps(fsum, _mm512_mul_ps(wv, xdv));
        if (wmt)
            p = _mm512_add_ps(p, _mm512_mul_ps(_mm512_set1_ps(xst[TILE * b + m]),
                                               _mm512_mul_ps(mv, xdv)));
        acc[m] = _mm512_add_ps(acc[m], p);
    }
}

/* Tokens t0 .. t0 + nt (activations at x, stride cols; scales xdt,
 * sums xst) against rows r .. r + nr of a panel (wb, wdt, mins wmt or
 * NULL): y[(t0 + m) ldy + r + n]. */
ALWAYS_INLINE void tile_any(const int8_t *x, const float *xdt, const float *xst, size_t cols,
                            const int8_t *wb, const float *wdt, const float *wmt, float *y,
                            size_t ldy, size_t t0, size_t nt, size_t r, size_t nr)
{
    const size_t nb = cols / BLOCK;
    _Alignas(64) int32_t sums[TILE][TILE], sums2[TILE][TILE];
    __m512 part[8][TILE];
    for (size_t j = 0; j < 8; j++) {
        __m512 acc[TILE];
        UNROLL
        for (int m = 0; m < TILE; m++)
            acc[m] = _mm512_setzero_ps();
        if (j < nb) {
            /* two blocks in flight: b + 8's tile work is issued before
             * b's float steps, on the other set of tiles */
            block_sums(x, cols, wb, j, sums);
            for (size_t b = j; b < nb; b += 16) {
                if (b + 8 < nb)
                    block_sums2(x, cols, wb, b + 8, sums2);
                scale_add(sums, wdt, xdt, wmt, xst, b, acc);
                if (b + 8 >= nb)
                    break;
                if (b + 16 < nb)
                    block_sums(x, cols, wb, b + 16, sums);
                scale_add(sums2, wdt, xdt, wmt, xst, b + 8, acc);
            }
        }
        memcpy(part[j], acc, sizeof acc);
    }
    const __mmask16 rows = (__mmask16)((1u << nr) - 1);
    for (size_t m = 0; m < nt; m++) {
        const __m512 v = _mm512_add_ps(
            _mm512_add_ps(_mm512_add_ps(part[0][m], part[4][m]),
                          _mm512_add_ps(part[2][m], part[6][m])),
            _mm512_add_ps(_mm512_add_ps(part[1][m], part[5][m]),
                          _mm512_add_ps(part[3][m], part[7][m])));
        _mm512_mask_storeu_ps(y + (t0 + m) * ldy + r, rows, v);
    }
}

static void tile_product(const int8_t *x, const float *xdt, size_t cols, const int8_t *wb,
                         const float *wdt, float *y, size_t ldy, size_t t0, size_t nt, size_t r,
                         size_t nr)
{
    tile_any(x, xdt, NULL, cols, wb, wdt, NULL, y, ldy, t0, nt, r, nr);
}

static void tile_product_mins(const int8_t *x, const float *xdt, const float *xst, size_t cols,
                              const int8_t *wb, const float *wdt, const float *wmt, float *y,
                              size_t ldy, size_t t0, size_t nt, size_t r, size_t nr)
{
    tile_any(x, xdt, xst, cols, wb, wdt, wmt, y, ldy, t0, nt, r, nr);
}

/* Rule 6 (Q4_K, Q5_K, Q6_K, IQ4_XS; K activations, one scale per 256):
 * the tiles give exact integer sums, the vector units finish each
 * super-block's isum in int32 and only then take the float steps: per
 * token m, s = (float)isum * (d * xd) [- (float)msum * (dmin * xd)] into
 * part[m] (rule 6's acc[k % 8], lane n for row n).  The mins' term msum =
 * Σ_j m_j · asum_j pairs the sub-blocks as int16 (m < 64, |asum| <=
 * 32·127) for vpdpwssd: the rows' pairs at wmp + 16 (4k + p), the tokens'
 * at xsp + 16 (4k + p).  d at wdt + 16·8k (dmin at wmt), the tokens'
 * scales at xdt + 16 k. */
ALWAYS_INLINE void super_add(__m512i isum[TILE], const float *wdt, const float *wmt,
                             const int32_t *wmp, const float *xdt, const int32_t *xsp, size_t k,
                             __m512 part[TILE])
{
    const __m512 dv = _mm512_load_ps(wdt + TILE * 8 * k);
    UNROLL
    for (int m = 0; m < TILE; m++) {
        const __m512 xdv = _mm512_set1_ps(xdt[TILE * k + m]);
        __m512 s = _mm512_mul_ps(_mm512_cvtepi32_ps(isum[m]), _mm512_mul_ps(dv, xdv));
        if (wmp) {
            __m512i msum = _mm512_setzero_si512();
            UNROLL
            for (int p = 0; p < 4; p++)
                msum = _mm512_dpwssd_epi32(
                    msum, _mm512_load_si512((const __m512i *)(wmp + TILE * (4 * k + p))),
                    _mm512_set1_epi32(xsp[TILE * (4 * k + p) + m]));
            const __m512 mv = _mm512_load_ps(wmt + TILE * 8 * k);
            s = _mm512_sub_ps(s, _mm512_mul_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(mv, xdv)));
        }
        /* rule 6's acc starts at +0: the first eight super-blocks set
         * it to +0 + s (not s: -0 + ... differs from +0 + ...) */
        part[m] = _mm512_add_ps(k < 8 ? _mm512_setzero_ps() : part[m], s);
    }
}

/* Rule 3's fold of part (set for the first nsb, zeros for the rest) into
 * y's rows r .. r + nr for tokens t0 .. t0 + nt. */
ALWAYS_INLINE void store_folded(__m512 part[8][TILE], size_t nsb, float *y, size_t ldy, size_t t0,
                                size_t nt, size_t r, size_t nr)
{
    for (size_t j = nsb; j < 8; j++)
        UNROLL
        for (int m = 0; m < TILE; m++)
            part[j][m] = _mm512_setzero_ps();
    const __mmask16 rows = (__mmask16)((1u << nr) - 1);
    for (size_t m = 0; m < nt; m++) {
        const __m512 v = _mm512_add_ps(
            _mm512_add_ps(_mm512_add_ps(part[0][m], part[4][m]),
                          _mm512_add_ps(part[2][m], part[6][m])),
            _mm512_add_ps(_mm512_add_ps(part[1][m], part[5][m]),
                          _mm512_add_ps(part[3][m], part[7][m])));
        _mm512_mask_storeu_ps(y + (t0 + m) * ldy + r, rows, v);
    }
}

/* Q4_K and Q5_K: q·sc, up to 31·63, is no byte, but with sc = 8 sc_hi +
 * sc_lo (3 bits each) both q·sc_lo and q·sc_hi are (unsigned, at most
 * 217), and isum = 8 Σ (q·sc_hi)·xq + Σ (q·sc_lo)·xq exactly.  So the
 * panel is two panels, the tiles sum a whole super-block (four products
 * of K = 64, TDPBSUD: signed activations, unsigned weights), and a
 * super-block costs two tile stores instead of eight blocks' stores,
 * loads and integer scalings. */
#define FOLD_SUMS(name, LO, HI, DP_HI)                                                         \
    ALWAYS_INLINE void name(const int8_t *x, size_t cols, const int8_t *wlo, const int8_t *whi, \
                            size_t k, int32_t lo[TILE][TILE], int32_t hi[TILE][TILE])          \
    {                                                                                          \
        _tile_zero(LO);                                                                        \
        _tile_zero(HI);                                                                        \
        for (size_t s = 0; s < 4; s++) {                                                       \
            _tile_loadd(F_X, x + 256 * k + 64 * s, (long)cols);                                \
            _tile_loadd(F_W, wlo + WB_BLOCK * (8 * k + 2 * s), 64);                            \
            _tile_dpbsud(LO, F_X, F_W);                                                        \
            _tile_loadd(F_W2, whi + WB_BLOCK * (8 * k + 2 * s), 64);                           \
            DP_HI(HI, F_X, F_W2);                                                              \
        }                                                                                      \
        _tile_stored(LO, lo, TILE * 4);                                                        \
        _tile_stored(HI, hi, TILE * 4);                                                        \
    }
FOLD_SUMS(fold_sums, F_LO, F_HI, _tile_dpbsud)
FOLD_SUMS(fold_sums2, F_LO2, F_HI2, _tile_dpbsud)
/* IQ4_XS's high panel is signed (fold_iq4_xs) */
FOLD_SUMS(fold_sums_iq, F_LO, F_HI, _tile_dpbssd)
FOLD_SUMS(fold_sums_iq2, F_LO2, F_HI2, _tile_dpbssd)

/* isum[m] = 2^shift hi[m] + lo[m]. */
ALWAYS_INLINE void fold_isum(int32_t lo[TILE][TILE], int32_t hi[TILE][TILE], int shift,
                             __m512i isum[TILE])
{
    UNROLL
    for (int m = 0; m < TILE; m++)
        isum[m] = _mm512_add_epi32(
            _mm512_slli_epi32(_mm512_load_si512((const __m512i *)hi[m]), shift),
            _mm512_load_si512((const __m512i *)lo[m]));
}

ALWAYS_INLINE void fold_product(int iq, const int8_t *x, const float *xdt, const int32_t *xsp, size_t cols,
                              const int8_t *wlo, const int8_t *whi, const float *wdt,
                              const float *wmt, const int32_t *wmp, float *y, size_t ldy,
                              size_t t0, size_t nt, size_t r, size_t nr)
{
    const size_t nsb = cols / 256;
    _Alignas(64) int32_t lo[TILE][TILE], hi[TILE][TILE], lo2[TILE][TILE], hi2[TILE][TILE];
    __m512 part[8][TILE]; /* super_add's first eight set them */
    /* super-block k + 1's tile work is issued before k's vector work, on
     * the other pair of sums tiles */
    if (iq)
        fold_sums_iq(x, cols, wlo, whi, 0, lo, hi);
    else
        fold_sums(x, cols, wlo, whi, 0, lo, hi);
    for (size_t k = 0; k < nsb; k++) {
        __m512i isum[TILE];
        if (k % 2 == 0) {
            if (k + 1 < nsb && iq)
                fold_sums_iq2(x, cols, wlo, whi, k + 1, lo2, hi2);
            else if (k + 1 < nsb)
                fold_sums2(x, cols, wlo, whi, k + 1, lo2, hi2);
            fold_isum(lo, hi, iq ? 5 : 3, isum);
        } else {
            if (k + 1 < nsb && iq)
                fold_sums_iq(x, cols, wlo, whi, k + 1, lo, hi);
            else if (k + 1 < nsb)
                fold_sums(x, cols, wlo, whi, k + 1, lo, hi);
            fold_isum(lo2, hi2, iq ? 5 : 3, isum);
        }
        super_add(isum, wdt, wmt, wmp, xdt, xsp, k, part[k % 8]);
    }
    store_folded(part, nsb, y, ldy, t0, nt, r, nr);
}

/* Q4_K and Q5_K (with their mins) */
static void tile_product_fold(const int8_t *x, const float *xdt, const int32_t *xsp, size_t cols,
                              const int8_t *wlo, const int8_t *whi, const float *wdt,
                              const float *wmt, const int32_t *wmp, float *y, size_t ldy,
                              size_t t0, size_t nt, size_t r, size_t nr)
{
    fold_product(0, x, xdt, xsp, cols, wlo, whi, wdt, wmt, wmp, y, ldy, t0, nt, r, nr);
}

/* IQ4_XS (no mins) */
static void tile_product_iq4_xs(const int8_t *x, const float *xdt, size_t cols, const int8_t *wlo,
                                const int8_t *whi, const float *wdt, float *y, size_t ldy,
                                size_t t0, size_t nt, size_t r, size_t nr)
{
    fold_product(1, x, xdt, NULL, cols, wlo, whi, wdt, NULL, NULL, y, ldy, t0, nt, r, nr);
}

/* A panel in B order (unsigned quants, wb) split into its quants times
 * the sub-blocks' scales' low three bits (in place) and high three bits
 * (whi); the scales at wst + 16 b, lane n for row n.  A B-order dword
 * holds four quants of one row, and each product is below 256, so one
 * 32-bit multiply scales the four bytes without a carry between them. */
static void fold_scales(int8_t *wb, int8_t *whi, const int32_t *wst, size_t nb)
{
    for (size_t b = 0; b < nb; b++) {
        const __m512i sc = _mm512_load_si512((const __m512i *)(wst + TILE * b));
        const __m512i lo = _mm512_and_si512(sc, _mm512_set1_epi32(7));
        const __m512i hi = _mm512_srli_epi32(sc, 3);
        for (size_t k = 0; k < BLOCK / 4; k++) {
            __m512i *w = (__m512i *)(wb + WB_BLOCK * b + 64 * k);
            const __m512i q = _mm512_load_si512(w);
            _mm512_store_si512((__m512i *)(whi + WB_BLOCK * b + 64 * k), _mm512_mullo_epi32(q, hi));
            _mm512_store_si512(w, _mm512_mullo_epi32(q, lo));
        }
    }
}

/* IQ4_XS: a level L (-127..113) times ls - 32 (-32..31) is no byte,
 * but v = L·(ls - 32), |v| <= 4064, is 32 hi + lo with hi = v >> 5
 * (-127..127, signed: TDPBSSD) and lo = v & 31 (unsigned: TDPBSUD), so
 * isum = 32 Σ hi·xq + Σ lo·xq exactly and the tiles sum whole
 * super-blocks as Q4_K's do, with no block's sums stored and scaled.
 * The even and odd bytes of a B-order dword (one row's four levels) are
 * taken in 16-bit lanes, each row's scale in both halves of its dword:
 * lo in place in wb, hi to whi. */
static void fold_iq4_xs(int8_t *wb, int8_t *whi, const int32_t *wst, size_t nb)
{
    const __m512i five = _mm512_set1_epi16(31), byte = _mm512_set1_epi16(0xff);
    for (size_t b = 0; b < nb; b++) {
        const __m512i sc = _mm512_load_si512((const __m512i *)(wst + TILE * b));
        const __m512i s16 = _mm512_or_si512(_mm512_and_si512(sc, _mm512_set1_epi32(0xffff)),
                                            _mm512_slli_epi32(sc, 16));
        for (size_t k = 0; k < BLOCK / 4; k++) {
            __m512i *w = (__m512i *)(wb + WB_BLOCK * b + 64 * k);
            const __m512i q = _mm512_load_si512(w);
            const __m512i ve = _mm512_mullo_epi16(_mm512_srai_epi16(_mm512_slli_epi16(q, 8), 8), s16);
            const __m512i vo = _mm512_mullo_epi16(_mm512_srai_epi16(q, 8), s16);
            const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srai_epi16(ve, 5), byte),
                                               _mm512_slli_epi16(_mm512_srai_epi16(vo, 5), 8));
            const __m512i lo = _mm512_or_si512(_mm512_and_si512(ve, five),
                                               _mm512_slli_epi16(_mm512_and_si512(vo, five), 8));
            _mm512_store_si512((__m512i *)(whi + WB_BLOCK * b + 64 * k), hi);
            _mm512_store_si512(w, lo);
        }
    }
}

/* Q6_K: v = q6 - 32 and an int8 scale sc_h per half h.  With q6 (0..63)
 * and sc = 64 a + 16 b + 4 c + d (b, c, d in 0..3, a in -2..1), every
 * q6·piece is a byte, and
 *   isum = Σ_h sc_h Σ v·xq = 64 A + 16 B + 4 C + D - 32 Σ_h sc_h asum_h
 * with A = Σ (q6·a)·xq over the super-block, and so on: four panels, each
 * summed over a whole super-block by the tiles (A signed, TDPBSSD; the
 * others unsigned, TDPBSUD), and the halves' activation sums weighted by
 * the scales in int16 pairs (vpdpwssd).  The panels are made from the one
 * B-order panel of v as fold_scales makes Q4_K's; q6·a as q6·(a + 2) -
 * 2 q6 byte by byte.  The rows' scale pairs (sub-block j's halves) go to
 * wsp + 16 b. */
static void fold_q6(int8_t *wb, int8_t *const wp[3], int32_t *wsp, const int32_t *wst,
                    const int32_t *wsh, size_t nb)
{
    const __m512i three = _mm512_set1_epi32(3), bias = _mm512_set1_epi32(128);
    for (size_t b = 0; b < nb; b++) {
        const __m512i lo = _mm512_load_si512((const __m512i *)(wst + TILE * b));
        const __m512i hi = _mm512_load_si512((const __m512i *)(wsh + TILE * b));
        _mm512_store_si512((__m512i *)(wsp + TILE * b),
                           _mm512_or_si512(_mm512_and_si512(lo, _mm512_set1_epi32(0xffff)),
                                           _mm512_slli_epi32(hi, 16)));
        for (size_t k = 0; k < BLOCK / 4; k++) {
            const __m512i u = _mm512_add_epi32(k < 4 ? lo : hi, bias); /* sc + 128: 0..255 */
            __m512i *w = (__m512i *)(wb + WB_BLOCK * b + 64 * k);
            const __m512i q = _mm512_add_epi8(_mm512_load_si512(w), _mm512_set1_epi8(32));
            const size_t at = WB_BLOCK * b + 64 * k;
            _mm512_store_si512((__m512i *)(wp[0] + at),
                               _mm512_mullo_epi32(q, _mm512_and_si512(_mm512_srli_epi32(u, 4), three)));
            _mm512_store_si512((__m512i *)(wp[1] + at),
                               _mm512_mullo_epi32(q, _mm512_and_si512(_mm512_srli_epi32(u, 2), three)));
            _mm512_store_si512((__m512i *)(wp[2] + at), _mm512_mullo_epi32(q, _mm512_and_si512(u, three)));
            _mm512_store_si512(w, _mm512_sub_epi8(_mm512_mullo_epi32(q, _mm512_srli_epi32(u, 6)),
                                                  _mm512_add_epi8(q, q)));
        }
    }
}

/* Super-block k's four piece sums (panels wa = wb, wp[0..2]) into
 * a, b, c, d. */
ALWAYS_INLINE void q6_sums(const int8_t *x, size_t cols, const int8_t *wa, int8_t *const wp[3],
                           size_t k, int32_t s[4][TILE][TILE])
{
    _tile_zero(P_A);
    _tile_zero(P_B);
    _tile_zero(P_C);
    _tile_zero(P_D);
    for (size_t i = 0; i < 4; i++) {
        const size_t at = WB_BLOCK * (8 * k + 2 * i);
        _tile_loadd(F_X, x + 256 * k + 64 * i, (long)cols);
        _tile_loadd(F_W, wa + at, 64);
        _tile_dpbssd(P_A, F_X, F_W);
        _tile_loadd(F_W2, wp[0] + at, 64);
        _tile_dpbsud(P_B, F_X, F_W2);
        _tile_loadd(F_W, wp[1] + at, 64);
        _tile_dpbsud(P_C, F_X, F_W);
        _tile_loadd(F_W2, wp[2] + at, 64);
        _tile_dpbsud(P_D, F_X, F_W2);
    }
    _tile_stored(P_A, s[0], TILE * 4);
    _tile_stored(P_B, s[1], TILE * 4);
    _tile_stored(P_C, s[2], TILE * 4);
    _tile_stored(P_D, s[3], TILE * 4);
}

static void tile_product_q6_fold(const int8_t *x, const float *xdt, const int32_t *xsp,
                                 size_t cols, const int8_t *wa, int8_t *const wp[3],
                                 const float *wdt, const int32_t *wsp, float *y, size_t ldy,
                                 size_t t0, size_t nt, size_t r, size_t nr)
{
    const size_t nsb = cols / 256;
    _Alignas(64) int32_t s[4][TILE][TILE];
    __m512 part[8][TILE]; /* super_add's first eight set them */
    for (size_t k = 0; k < nsb; k++) {
        q6_sums(x, cols, wa, wp, k, s);
        __m512i isum[TILE];
        UNROLL
        for (int m = 0; m < TILE; m++) {
            __m512i corr = _mm512_setzero_si512();
            UNROLL
            for (int j = 0; j < 8; j++)
                corr = _mm512_dpwssd_epi32(
                    corr, _mm512_load_si512((const __m512i *)(wsp + TILE * (8 * k + j))),
                    _mm512_set1_epi32(xsp[TILE * (8 * k + j) + m]));
            __m512i v = _mm512_load_si512((const __m512i *)s[0][m]);
            v = _mm512_add_epi32(_mm512_slli_epi32(v, 2), _mm512_load_si512((const __m512i *)s[1][m]));
            v = _mm512_add_epi32(_mm512_slli_epi32(v, 2), _mm512_load_si512((const __m512i *)s[2][m]));
            v = _mm512_add_epi32(_mm512_slli_epi32(v, 2), _mm512_load_si512((const __m512i *)s[3][m]));
            isum[m] = _mm512_sub_epi32(v, _mm512_slli_epi32(corr, 5));
        }
        super_add(isum, wdt, NULL, NULL, xdt, NULL, k, part[k % 8]);
    }
    store_folded(part, nsb, y, ldy, t0, nt, r, nr);
}

/* Sums of eight bytes of a super-block (x, 256 bytes), as 32 64-bit lanes
 * in order over v[0..3]: vpsadbw of the bytes made unsigned (+128 each,
 * taken off by the caller). */
ALWAYS_INLINE void sums8(const int8_t *x, __m512i v[4])
{
    const __m512i flip = _mm512_set1_epi8(-128);
    for (int i = 0; i < 4; i++)
        v[i] = _mm512_sad_epu8(_mm512_xor_si512(_mm512_loadu_si512((const void *)(x + 64 * i)), flip),
                               _mm512_setzero_si512());
}

/* Lane i of the result: lanes 2i and 2i + 1 of a:b (a's eight, then b's)
 * added. */
ALWAYS_INLINE __m512i add_pairs(__m512i a, __m512i b)
{
    const __m512i even = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
    const __m512i odd = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
    return _mm512_add_epi64(_mm512_permutex2var_epi64(a, even, b),
                            _mm512_permutex2var_epi64(a, odd, b));
}

/* The four int32 pairs at p (int16 lanes, lane 2i low) written 16 apart. */
ALWAYS_INLINE void put_pairs(__m128i p, int32_t *at)
{
    at[0] = _mm_cvtsi128_si32(p);
    at[TILE] = _mm_extract_epi32(p, 1);
    at[2 * TILE] = _mm_extract_epi32(p, 2);
    at[3 * TILE] = _mm_extract_epi32(p, 3);
}

/* The tokens' sums Σ xq as int16 pairs, P a super-block: with halves
 * (Q6_K, P = 8) sub-block j's two halves of 16, the first low; without
 * (Q4_K, Q5_K, P = 4) sub-blocks 2p and 2p + 1, the lower first.  At
 * xsp[((i nsb + k) P + p) 16 + m] for token 16 i + m (zeros past n_tok). */
static void transpose_pairs(const int8_t *xq, size_t nsb, size_t n_tok, int halves, int32_t *xsp)
{
    const size_t cols = 256 * nsb, tiles = (n_tok + TILE - 1) / TILE, P = halves ? 8 : 4;
    memset(xsp, 0, tiles * nsb * P * TILE * sizeof *xsp);
    for (size_t t = 0; t < n_tok; t++)
        for (size_t k = 0; k < nsb; k++) {
            __m512i v[4];
            sums8(xq + t * cols + 256 * k, v);
            int32_t *at = xsp + ((t / TILE) * nsb + k) * P * TILE + t % TILE;
            if (halves) { /* sixteen halves of 16 bytes: two lanes each */
                const __m512i bias = _mm512_set1_epi64(16 * 128);
                put_pairs(_mm512_cvtepi64_epi16(_mm512_sub_epi64(add_pairs(v[0], v[1]), bias)), at);
                put_pairs(_mm512_cvtepi64_epi16(_mm512_sub_epi64(add_pairs(v[2], v[3]), bias)),
                          at + 4 * TILE);
            } else { /* eight sub-blocks of 32 bytes: four lanes each */
                const __m512i s = add_pairs(add_pairs(v[0], v[1]), add_pairs(v[2], v[3]));
                put_pairs(_mm512_cvtepi64_epi16(_mm512_sub_epi64(s, _mm512_set1_epi64(32 * 128))),
                          at);
            }
        }
}

/* ---- the table's products ---- */

/* The tokens' scales by tile and block, xdt[(i nb + b) 16 + m] for token
 * 16 i + m (zeros past n_tok): one broadcast load each in scale_add. */
static void transpose_scales(const float *xd, size_t nb, size_t n_tok, float *xdt)
{
    for (size_t i = 0; i < (n_tok + TILE - 1) / TILE; i++)
        for (size_t b = 0; b < nb; b++)
            for (size_t m = 0; m < TILE; m++) {
                const size_t t = TILE * i + m;
                xdt[(i * nb + b) * TILE + m] = t < n_tok ? xd[t * nb + b] : 0.0f;
            }
}

/* The tokens' block sums Σ xq as floats (exact), laid out as
 * transpose_scales lays the scales. */
static void transpose_sums(const int8_t *xq, size_t nb, size_t n_tok, float *xst)
{
    for (size_t i = 0; i < (n_tok + TILE - 1) / TILE; i++)
        for (size_t b = 0; b < nb; b++)
            for (size_t m = 0; m < TILE; m++) {
                const size_t t = TILE * i + m;
                int32_t sum = 0;
                for (int e = 0; t < n_tok && e < BLOCK; e++)
                    sum += xq[(t * nb + b) * BLOCK + e];
                xst[(i * nb + b) * TILE + m] = (float)sum;
            }
}

/* Rows [r0, r1) for a chunk of tokens at a time: a panel of 16 rows
 * rearranged at a time, every token tile of the chunk against it.  A
 * last partial tile reads a copy padded with zero rows (a tile load reads
 * 16).  0 when there is no memory for the scratch. */
static int matmul_amx(ml_type type, const void *wq, ml_wscales wd, size_t cols, size_t r0,
                      size_t r1, const int8_t *xq, const float *xd, size_t n_tok, float *y,
                      size_t ldy)
{
    const int q4 = type == ML_TYPE_Q4_0, iq = type == ML_TYPE_IQ4_XS, q6 = type == ML_TYPE_Q6_K;
    const int fold = type == ML_TYPE_Q4_K || type == ML_TYPE_Q5_K;
    const int kq = fold || iq || q6;
    const int unpack = type == ML_TYPE_Q4_1 || type == ML_TYPE_Q5_1 || kq;
    const size_t nb = cols / BLOCK, full = n_tok / TILE * TILE, tail = n_tok - full;
    const size_t tiles = (n_tok + TILE - 1) / TILE;
    const size_t wb_bytes = nb * WB_BLOCK, scales = nb * TILE * sizeof(float);
    const size_t pad_bytes = tail ? TILE * cols : 0;
    /* the block types: the mins wmt, the tokens' sums xst, and a panel
     * unpacked (blk_unpack, blk_unpack_k) before it is put in B order */
    const size_t mins_bytes = unpack ? scales * (1 + tiles) + 3 * scales + TILE * cols : 0;
    /* Q4_K, Q5_K, IQ4_XS, Q6_K: the sub-blocks' scales wst and mins wnt
     * (Q6_K: the halves' scales wst and wsh), and the unpacked panel's
     * (blk_unpack_k) usm */
    const size_t k_bytes = kq ? 3 * scales + 2 * nb * TILE : 0;
    /* Q4_K, Q5_K, IQ4_XS: the second panel in B order; Q6_K: three more */
    const size_t fold_bytes = fold || iq ? wb_bytes : q6 ? 3 * wb_bytes : 0;
    int8_t *base =
        aligned_alloc(64, wb_bytes + scales * (1 + tiles) + pad_bytes + mins_bytes + k_bytes +
                              fold_bytes);
    if (!base)
        return 0;
    int8_t *wb = base;
    float *wdt = (float *)(base + wb_bytes), *xdt = wdt + nb * TILE;
    int8_t *xpad = (int8_t *)(xdt + tiles * nb * TILE);
    float *wmt = (float *)(xpad + pad_bytes), *xst = wmt + nb * TILE;
    float *ud = xst + tiles * nb * TILE, *um = ud + nb * TILE;
    int8_t *uq = (int8_t *)(um + nb * TILE);
    int32_t *wst = (int32_t *)(uq + (unpack ? TILE * cols : 0));
    float *wnt = (float *)(wst + nb * TILE);
    int32_t *wsh = (int32_t *)(wnt + nb * TILE);
    uint8_t *usm = (uint8_t *)(wsh + nb * TILE);
    int8_t *wbh = (int8_t *)(usm + (kq ? 2 * nb * TILE : 0));
    /* rule 6's types: the tokens' one scale per super-block, their sums
     * as pairs (in xst's room: half its size), the rows' mins as pairs
     * (in wnt's) */
    const size_t nsb = cols / 256;
    int32_t *xsp = (int32_t *)xst, *wmp = (int32_t *)wnt;
    transpose_scales(xd, kq ? nsb : nb, n_tok, xdt);
    int8_t *const wp[3] = {wbh, wbh + wb_bytes, wbh + 2 * wb_bytes};
    if (fold || q6)
        transpose_pairs(xq, nsb, n_tok, q6, xsp);
    else if (unpack)
        transpose_sums(xq, nb, n_tok, xst);
    if (unpack)
        memset(wmt, 0, scales);
    if (kq) {
        memset(wst, 0, scales);
        memset(wnt, 0, scales);
        memset(wsh, 0, scales);
    }
    if (tail) {
        memcpy(xpad, xq + full * cols, tail * cols);
        memset(xpad + tail * cols, 0, (TILE - tail) * cols);
    }
    size_t chunk = CHUNK_BYTES / cols / TILE * TILE;
    if (chunk < TILE)
        chunk = TILE;
    if (kq)
        _tile_loadconfig(&tile_config_k64);
    else
        _tile_loadconfig(&tile_config_pair);
    for (size_t c = 0; c < n_tok; c += chunk) {
        const size_t ce = n_tok - c < chunk ? n_tok : c + chunk;
        for (size_t r = r0; r < r1; r += TILE) {
            const size_t nr = r1 - r < TILE ? r1 - r : TILE;
            if (unpack) {
                ml__blk_unpack_avx512(type, wq, cols, r, r + nr, uq, ud, um, usm);
                prepare_panel(0, uq, (ml_wscales){ud, 0}, cols, 0, nr, wb, wdt);
                for (size_t n = 0; n < nr; n++)
                    for (size_t b = 0; b < nb; b++) {
                        wmt[TILE * b + n] = um[n * nb + b];
                        if (kq) { /* Q6_K's int8 scales, the others' below 64 */
                            const int8_t *sm = (const int8_t *)usm + 2 * (n * nb + b);
                            wst[TILE * b + n] = sm[0] - (iq ? 32 : 0);
                            wsh[TILE * b + n] = sm[1];
                            if (b % 2) /* the mins of sub-blocks b - 1 and b */
                                wmp[TILE * (b / 2) + n] =
                                    (int32_t)(usm[2 * (n * nb + b) - 1] |
                                              (uint32_t)usm[2 * (n * nb + b) + 1] << 16);
                        }
                    }
                if (fold)
                    fold_scales(wb, wbh, wst, nb);
                else if (iq)
                    fold_iq4_xs(wb, wbh, wst, nb);
                else if (q6)
                    fold_q6(wb, wp, wmp, wst, wsh, nb);
            } else {
                prepare_panel(q4, wq, wd, cols, r, nr, wb, wdt);
            }
            for (size_t t = c; t < ce; t += TILE) {
                const int8_t *x = t < full ? xq + t * cols : xpad;
                const size_t nt = t < full ? TILE : tail;
                if (fold)
                    tile_product_fold(x, xdt + t * nsb, xsp + t * nsb * 4, cols, wb, wbh, wdt,
                                      wmt, wmp, y, ldy, t, nt, r, nr);
                else if (q6)
                    tile_product_q6_fold(x, xdt + t * nsb, xsp + t * nsb * 8, cols, wb, wp, wdt,
                                         wmp, y, ldy, t, nt, r, nr);
                else if (iq)
                    tile_product_iq4_xs(x, xdt + t * nsb, cols, wb, wbh, wdt, y, ldy, t, nt, r,
                                        nr);
                else if (unpack)
                    tile_product_mins(x, xdt + t * nb, xst + t * nb, cols, wb, wdt, wmt, y, ldy, t,
                                      nt, r, nr);
                else
                    tile_product(x, xdt + t * nb, cols, wb, wdt, y, ldy, t, nt, r, nr);
            }
        }
    }
    _tile_release();
    free(base);
    return 1;
}

/* 1 when the product is done here (or empty), 0 when the AVX-512 table
 * is to do it: too few tokens, or no memory for the scratch. */
static int amx_did(ml_type type, const void *wq, ml_wscales wd, size_t cols, size_t r0,
                   size_t r1, const int8_t *xq, const float *xd, size_t n_tok, float *y,
                   size_t ldy)
{
    return r0 >= r1 || (n_tok >= AMX_MIN_TOK &&
                        matmul_amx(type, wq, wd, cols, r0, r1, xq, xd, n_tok, y, ldy));
}

static void matmul_q8_0(const int8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, size_t n_tok, float *y, size_t ldy)
{
    if (!amx_did(ML_TYPE_Q8_0, wq, wd, cols, r0, r1, xq, xd, n_tok, y, ldy))
        ml__kernels_avx512.matmul_q8_0(wq, wd, cols, r0, r1, xq, xd, n_tok, y, ldy);
}

static void matmul_q4_0(const uint8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, size_t n_tok, float *y, size_t ldy)
{
    if (!amx_did(ML_TYPE_Q4_0, wq, wd, cols, r0, r1, xq, xd, n_tok, y, ldy))
        ml__kernels_avx512.matmul_q4_0(wq, wd, cols, r0, r1, xq, xd, n_tok, y, ldy);
}

/* Q4_1, Q5_1, Q4_K, Q5_K, Q6_K and IQ4_XS here (their rule 5 is rule 3
 * with the sub-blocks' integer scales and the mins' term), the other
 * block types in the AVX-512 table's kernels. */
static void matmul_blk(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                       const int8_t *xq, const float *xd, size_t n_tok, float *y, size_t ldy)
{
    const ml_wscales none = {NULL, 0};
    if ((t != ML_TYPE_Q4_1 && t != ML_TYPE_Q5_1 && t != ML_TYPE_Q4_K && t != ML_TYPE_Q5_K &&
         t != ML_TYPE_IQ4_XS && t != ML_TYPE_Q6_K) ||
        !amx_did(t, w, none, cols, r0, r1, xq, xd, n_tok, y, ldy))
        ml__matmul_blk_avx512(t, w, cols, r0, r1, xq, xd, n_tok, y, ldy);
}

/* The AVX-512 table's other kernels, called through it (a table's
 * initializer cannot name another table's entries). */
static void quantize_q8_0(const float *x, size_t n, int8_t *q, float *d)
{
    ml__kernels_avx512.quantize_q8_0(x, n, q, d);
}

static void quantize_q8_k(const float *x, size_t n, int8_t *q, float *d)
{
    ml__kernels_avx512.quantize_q8_k(x, n, q, d);
}

static void matvec_q8_0(const int8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, float *y)
{
    ml__kernels_avx512.matvec_q8_0(wq, wd, cols, r0, r1, xq, xd, y);
}

static void matvec_q4_0(const uint8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, float *y)
{
    ml__kernels_avx512.matvec_q4_0(wq, wd, cols, r0, r1, xq, xd, y);
}

const ml_kernels ml__kernels_amx = {
    .name = "amx",
    .fmath = &ml__fmath_avx512,
    .quantize_q8_0 = quantize_q8_0,
    .quantize_q8_k = quantize_q8_k,
    .matvec_q8_0 = matvec_q8_0,
    .matvec_q4_0 = matvec_q4_0,
    .matmul_q8_0 = matmul_q8_0,
    .matmul_q4_0 = matmul_q4_0,
    .matvec_blk = ml__matvec_blk_avx512,
    .matmul_blk = matmul_blk,
    .blk_to_q8_0 = ml__blk_to_q8_0_avx512,
};

#endif /* __x86_64__ */
