/* kernels_scalar.c - the reference kernels: plain C that every SIMD variant
 * must reproduce bit for bit (the rules are in kernels.h).  Activations are
 * quantized by the spec's Q8_0 recipe; a row's dot product sums each
 * 32-element block exactly in int32 and combines the blocks in floats in
 * the one canonical order: eight strided partial sums, folded pairwise. */
#include "kernels/kernels.h"

#include "kernels/fmath.h"

#include "mlcore.h"

/* Activations are quantized by the library's reference quantizer
 * (lib/quant/quant.c), the one the writer uses: ml_quantize_row_q8_0 has the
 * table's signature and is used as it is. */

/* ---- dot products ---- */

static int32_t block_dot_q8(const int8_t *w, const int8_t *x)
{
    int32_t s = 0;
    for (int i = 0; i < 32; i++)
        s += (int32_t)w[i] * x[i];
    return s;
}

/* Byte j of a Q4_0 block: element j in the low nibble, j + 16 in the
 * high one; the value is nibble - 8. */
static int32_t block_dot_q4(const uint8_t *w, const int8_t *x)
{
    int32_t s = 0;
    for (int j = 0; j < 16; j++) {
        s += ((int32_t)(w[j] & 15) - 8) * x[j];
        s += ((int32_t)(w[j] >> 4) - 8) * x[j + 16];
    }
    return s;
}

/* Row r of W against one activation. */
static float row_dot_q8(const int8_t *wq, ml_wscales wd, size_t cols, size_t r, const int8_t *x,
                        const float *xd)
{
    const size_t nb = cols / 32;
    const int8_t *w = wq + r * cols;
    float acc[8] = {0};
    for (size_t b = 0; b < nb; b++)
        acc[b % 8] += (float)block_dot_q8(w + 32 * b, x + 32 * b) *
                      (ml__wscale(wd, r * nb + b) * xd[b]);
    return ml__fold8(acc);
}

static float row_dot_q4(const uint8_t *wq, ml_wscales wd, size_t cols, size_t r, const int8_t *x,
                        const float *xd)
{
    const size_t nb = cols / 32;
    const uint8_t *w = wq + r * (cols / 2);
    float acc[8] = {0};
    for (size_t b = 0; b < nb; b++)
        acc[b % 8] += (float)block_dot_q4(w + 16 * b, x + 32 * b) *
                      (ml__wscale(wd, r * nb + b) * xd[b]);
    return ml__fold8(acc);
}

static void matvec_q8_0(const int8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, float *y)
{
    for (size_t r = r0; r < r1; r++)
        y[r] = row_dot_q8(wq, wd, cols, r, xq, xd);
}

static void matvec_q4_0(const uint8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, float *y)
{
    for (size_t r = r0; r < r1; r++)
        y[r] = row_dot_q4(wq, wd, cols, r, xq, xd);
}

/* Rows outside, tokens inside: a weight row is read from memory once and
 * stays in cache for every token. */
static void matmul_q8_0(const int8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, size_t n_tok, float *y, size_t ldy)
{
    const size_t nb = cols / 32;
    for (size_t r = r0; r < r1; r++)
        for (size_t t = 0; t < n_tok; t++)
            y[t * ldy + r] = row_dot_q8(wq, wd, cols, r, xq + t * cols, xd + t * nb);
}

static void matmul_q4_0(const uint8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, size_t n_tok, float *y, size_t ldy)
{
    const size_t nb = cols / 32;
    for (size_t r = r0; r < r1; r++)
        for (size_t t = 0; t < n_tok; t++)
            y[t * ldy + r] = row_dot_q4(wq, wd, cols, r, xq + t * cols, xd + t * nb);
}

const ml_kernels ml__kernels_scalar = {
    .name = "scalar",
    .fmath = &ml__fmath_scalar,
    .quantize_q8_0 = ml_quantize_row_q8_0,
    .quantize_q8_k = ml_quantize_row_q8_k,
    .matvec_q8_0 = matvec_q8_0,
    .matvec_q4_0 = matvec_q4_0,
    .matmul_q8_0 = matmul_q8_0,
    .matmul_q4_0 = matmul_q4_0,
    .matvec_blk = ml__matvec_blk_scalar,
    .matmul_blk = ml__matmul_blk_scalar,
    .blk_to_q8_0 = ml__blk_to_q8_0_scalar,
};
