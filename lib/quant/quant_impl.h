/* quant_impl.h - private to the quantizers: the block functions shared by
 * quant.c (rows) and quant_matrix.c (whole matrices, threads), also used
 * by the unit tests to look at single fit candidates. */
#ifndef ML_QUANT_IMPL_H
#define ML_QUANT_IMPL_H

#include "base/internal.h"

#define ML__Q4_CANDIDATES 13

/* The fit's levels for the largest-magnitude element: -6.0f ... -8.4f,
 * each the float nearest to the decimal. */
extern const float ml__q4_levels[ML__Q4_CANDIDATES];

/* One Q8_0 block with an f32 scale (the spec's recipe). */
void ml__q8_block(const float *x, int8_t *q, float *d);
/* One Q8_0 block with an f16 scale.  Returns 0, or -1 when the scale
 * amax / 127 (stored in *too_big, for messages) rounds to infinity as f16;
 * q and d16 are then not written. */
int ml__q8_block_f16(const float *x, int8_t *q, uint16_t *d16, float *too_big);

/* One Q4_0 block by the fit search.  imp: NULL (x^2 weights) or the
 * block's 32 importances, with s2 the row's mean square. */
void ml__q4_fit_block(const float *x, const float *imp, double s2, uint8_t *qs, float *d);
/* One Q4_0 block by llama.cpp's rounding. */
void ml__q4_round_block(const float *x, uint8_t *qs, float *d);

/* The block types' search (kquant_blocks.h) over a row of n values of
 * type t (a type it has, n a multiple of its block, importances finite
 * and >= 0 or imp NULL), as built for the build's baseline and, on x86,
 * for AVX2 and AVX-512 (call those only where ml__cpu_x86_level allows):
 * the same bytes from each. */
void ml__kquant_rows_base(ml_type t, const float *x, size_t n, const float *imp, uint8_t *out);
void ml__kquant_rows_avx2(ml_type t, const float *x, size_t n, const float *imp, uint8_t *out);
void ml__kquant_rows_avx512(ml_type t, const float *x, size_t n, const float *imp, uint8_t *out);

/* Mean of x^2 over a row, summed in double in index order. */
double ml__row_mean_sq(const float *x, size_t n);

/* Candidate k of the fit on a prepared block: values y (already scaled),
 * weights w, wy[j] = w[j] * y[j], ymax the largest-magnitude element.
 * Fills the 32 levels (integers in [-8, 7], as floats), *err with the
 * weighted error, returns d (before any scaling back). */
float ml__q4_candidate(const float *y, const float *w, const float *wy, float ymax, int k,
                       float *levels, float *err);

/* The fit's fixed summation order for 32 floats: eight partial sums
 * p[i] = a[i] + a[i+8] + a[i+16] + a[i+24] (left to right), then
 * ((p0 + p4) + (p2 + p6)) + ((p1 + p5) + (p3 + p7)). */
float ml__sum32(const float *a);

#endif
