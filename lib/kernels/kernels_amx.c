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
 * asum the token's block sum (exact as a float).  Q4_K, Q5_K and IQ4_XS
 * likewise (blocks_x86.h's blk_unpack_k), each 32-element sub-block a
 * block, its integer scale multiplying the tile's sum before rule 5's
 * float steps; Q6_K's two 16-element halves have a scale each, so its
 * blocks take two TDPBSSD of K = 16, one a half. */
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
/* Q6_K's halves: two sums tiles, A 16 rows x 16 bytes, B 4 rows x 64 */
#define T_SUMS_HI 3
#define T_X_LO 4
#define T_W_LO 5
#define T_X_HI 6
#define T_W_HI 7

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

static const tile_cfg tile_config = {
    .palette = 1,
    .colsb = {[T_SUMS] = TILE * 4, [T_X] = BLOCK, [T_W] = TILE * 4, [T_SUMS_HI] = TILE * 4,
              [T_X_LO] = BLOCK / 2, [T_W_LO] = TILE * 4, [T_X_HI] = BLOCK / 2,
              [T_W_HI] = TILE * 4},
    .rows = {[T_SUMS] = TILE, [T_X] = TILE, [T_W] = BLOCK / 4, [T_SUMS_HI] = TILE,
             [T_X_LO] = TILE, [T_W_LO] = BLOCK / 8, [T_X_HI] = TILE, [T_W_HI] = BLOCK / 8},
};

/* The same for the products without halves: a second set of sums, A and
 * B tiles (3, 4, 5) with the first set's shapes, so that one block's tile
 * work runs while the vector units do the previous block's float steps. */
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

/* Block b's exact sums of its two 16-element halves (Q6_K), lo and hi:
 * B's rows 0-3 hold elements 0-15, rows 4-7 the rest. */
ALWAYS_INLINE void half_sums(const int8_t *x, size_t cols, const int8_t *wb, size_t b,
                             int32_t lo[TILE][TILE], int32_t hi[TILE][TILE])
{
    _tile_zero(T_SUMS);
    _tile_zero(T_SUMS_HI);
    _tile_loadd(T_X_LO, x + BLOCK * b, (long)cols);
    _tile_loadd(T_W_LO, wb + WB_BLOCK * b, TILE * 4);
    _tile_loadd(T_X_HI, x + BLOCK * b + BLOCK / 2, (long)cols);
    _tile_loadd(T_W_HI, wb + WB_BLOCK * b + WB_BLOCK / 2, TILE * 4);
    _tile_dpbssd(T_SUMS, T_X_LO, T_W_LO);
    _tile_dpbssd(T_SUMS_HI, T_X_HI, T_W_HI);
    _tile_stored(T_SUMS, lo, TILE * 4);
    _tile_stored(T_SUMS_HI, hi, TILE * 4);
}

/* Rule 3 for block b: acc[m] += (float)sum * (wd * xd), lane n = row n;
 * the rows' scales at wdt + 16 b, the tokens' at xdt + 16 b.  With mins
 * (Q4_1, Q5_1: rule 5) the block's s adds (float)asum * (m * xd), the
 * rows' mins at wmt + 16 b, the tokens' sums (as floats) at xst + 16 b.
 * With sub-block scales (Q4_K, Q5_K: wst, the rows' 6-bit scales, and
 * wnt, their mins as floats) s = (float)(sc * sum) * (d * xd) -
 * (float)(mn * asum) * (dmin * xd), d at wdt and dmin at wmt; mn * asum
 * is below 2^24, so the float product is the integer one.  IQ4_XS: wst
 * holds ls - 32 and there is no mins' term.  Q6_K: sums and sums_hi are
 * the halves' and isum = sc_lo * sum + sc_hi * sum_hi, sc_lo at wst and
 * sc_hi at wsh. */
ALWAYS_INLINE void scale_add(int32_t sums[TILE][TILE], int32_t sums_hi[TILE][TILE],
                             const float *wdt, const float *xdt, const float *wmt,
                             const float *xst, const int32_t *wst, const float *wnt,
                             const int32_t *wsh, size_t b, __m512 acc[TILE])
{
    const __m512 wv = _mm512_load_ps(wdt + TILE * b);
    const __m512 mv = wmt ? _mm512_load_ps(wmt + TILE * b) : wv;
    const __m512 sc = wst ? _mm512_cvtepi32_ps(_mm512_load_si512((const __m512i *)(wst + TILE * b)))
                          : _mm512_setzero_ps();
    const __m512 mn = wnt ? _mm512_load_ps(wnt + TILE * b) : wv;
    const __m512 sh = wsh ? _mm512_cvtepi32_ps(_mm512_load_si512((const __m512i *)(wsh + TILE * b))) : sc;
    UNROLL
    for (int m = 0; m < TILE; m++) {
        const __m512 xdv = _mm512_set1_ps(xdt[TILE * b + m]);
        __m512 fsum = _mm512_cvtepi32_ps(_mm512_load_si512((const __m512i *)sums[m]));
        if (wst)
            fsum = _mm512_mul_ps(fsum, sc);
        if (wsh)
            fsum = _mm512_add_ps(
                fsum, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512((const __m512i *)sums_hi[m])), sh));
        __m512 p = _mm512_mul_ps(fsum, _mm512_mul_ps(wv, xdv));
        if (wnt)
            p = _mm512_sub_ps(p, _mm512_mul_ps(_mm512_mul_ps(mn, _mm512_set1_ps(xst[TILE * b + m])),
                                               _mm512_mul_ps(mv, xdv)));
        else if (wmt)
            p = _mm512_add_ps(p, _mm512_mul_ps(_mm512_set1_ps(xst[TILE * b + m]),
                                               _mm512_mul_ps(mv, xdv)));
        acc[m] = _mm512_add_ps(acc[m], p);
    }
}

/* Tokens t0 .. t0 + nt (activations at x, stride cols; scales xdt,
 * sums xst) against rows r .. r + nr of a panel (wb, wdt, mins wmt or
 * NULL, sub-block scales wst and mins wnt or NULL):
 * y[(t0 + m) ldy + r + n]. */
ALWAYS_INLINE void tile_any(const int8_t *x, const float *xdt, const float *xst, size_t cols,
                            const int8_t *wb, const float *wdt, const float *wmt,
                            const int32_t *wst, const float *wnt, const int32_t *wsh, float *y,
                            size_t ldy, size_t t0, size_t nt, size_t r, size_t nr)
{
    const size_t nb = cols / BLOCK;
    _Alignas(64) int32_t sums[TILE][TILE], sums_hi[TILE][TILE];
    __m512 part[8][TILE];
    for (size_t j = 0; j < 8; j++) {
        __m512 acc[TILE];
        UNROLL
        for (int m = 0; m < TILE; m++)
            acc[m] = _mm512_setzero_ps();
        if (wsh) {
            for (size_t b = j; b < nb; b += 8) {
                half_sums(x, cols, wb, b, sums, sums_hi);
                scale_add(sums, sums_hi, wdt, xdt, wmt, xst, wst, wnt, wsh, b, acc);
            }
        } else if (j < nb) {
            /* two blocks in flight: b + 8's tile work is issued before
             * b's float steps, on the other set of tiles */
            block_sums(x, cols, wb, j, sums);
            for (size_t b = j; b < nb; b += 16) {
                if (b + 8 < nb)
                    block_sums2(x, cols, wb, b + 8, sums_hi);
                scale_add(sums, NULL, wdt, xdt, wmt, xst, wst, wnt, NULL, b, acc);
                if (b + 8 >= nb)
                    break;
                if (b + 16 < nb)
                    block_sums(x, cols, wb, b + 16, sums);
                scale_add(sums_hi, NULL, wdt, xdt, wmt, xst, wst, wnt, NULL, b + 8, acc);
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
    tile_any(x, xdt, NULL, cols, wb, wdt, NULL, NULL, NULL, NULL, y, ldy, t0, nt, r, nr);
}

static void tile_product_mins(const int8_t *x, const float *xdt, const float *xst, size_t cols,
                              const int8_t *wb, const float *wdt, const float *wmt, float *y,
                              size_t ldy, size_t t0, size_t nt, size_t r, size_t nr)
{
    tile_any(x, xdt, xst, cols, wb, wdt, wmt, NULL, NULL, NULL, y, ldy, t0, nt, r, nr);
}

static void tile_product_k(const int8_t *x, const float *xdt, const float *xst, size_t cols,
                           const int8_t *wb, const float *wdt, const float *wmt,
                           const int32_t *wst, const float *wnt, float *y, size_t ldy, size_t t0,
                           size_t nt, size_t r, size_t nr)
{
    tile_any(x, xdt, xst, cols, wb, wdt, wmt, wst, wnt, NULL, y, ldy, t0, nt, r, nr);
}

static void tile_product_q6(const int8_t *x, const float *xdt, size_t cols, const int8_t *wb,
                            const float *wdt, const int32_t *wst, const int32_t *wsh, float *y,
                            size_t ldy, size_t t0, size_t nt, size_t r, size_t nr)
{
    tile_any(x, xdt, NULL, cols, wb, wdt, NULL, wst, NULL, wsh, y, ldy, t0, nt, r, nr);
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
    const int kq = type == ML_TYPE_Q4_K || type == ML_TYPE_Q5_K || iq || q6;
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
    int8_t *base =
        aligned_alloc(64, wb_bytes + scales * (1 + tiles) + pad_bytes + mins_bytes + k_bytes);
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
    transpose_scales(xd, nb, n_tok, xdt);
    if (unpack) {
        transpose_sums(xq, nb, n_tok, xst);
        memset(wmt, 0, scales);
    }
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
    if (q6)
        _tile_loadconfig(&tile_config);
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
                            wnt[TILE * b + n] = (float)sm[1];
                            wsh[TILE * b + n] = sm[1];
                        }
                    }
            } else {
                prepare_panel(q4, wq, wd, cols, r, nr, wb, wdt);
            }
            for (size_t t = c; t < ce; t += TILE) {
                const int8_t *x = t < full ? xq + t * cols : xpad;
                const size_t nt = t < full ? TILE : tail;
                if (q6)
                    tile_product_q6(x, xdt + t * nb, cols, wb, wdt, wst, wsh, y, ldy, t, nt, r,
                                    nr);
                else if (kq)
                    tile_product_k(x, xdt + t * nb, xst + t * nb, cols, wb, wdt, iq ? NULL : wmt,
                                   wst, iq ? NULL : wnt, y, ldy, t, nt, r, nr);
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
    .matvec_q8_0 = matvec_q8_0,
    .matvec_q4_0 = matvec_q4_0,
    .matmul_q8_0 = matmul_q8_0,
    .matmul_q4_0 = matmul_q4_0,
    .matvec_blk = ml__matvec_blk_avx512,
    .matmul_blk = matmul_blk,
    .blk_to_q8_0 = ml__blk_to_q8_0_avx512,
};

#endif /* __x86_64__ */
