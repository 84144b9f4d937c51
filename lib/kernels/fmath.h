/* fmath.h - private: the float32 products of attention and linear
 * attention (fmath_scalar.c, fmath_avx2.c, fmath_avx512.c), beside the kernel
 * table's quantized ones.  Like the kernel table, every implementation
 * gives the same bits:
 * each result is computed with the reference's operations in the
 * reference's order, one result per SIMD lane, so the thread count, the
 * batch and the CPU change nothing.  The terms of gemm and dots are fused
 * multiply-adds (fmaf, one rounding; vfmadd in the SIMD forms); every
 * other operation here is a multiply or an add of its own.  Fused, a
 * long prompt's attention does half the float operations, and long
 * prompts ran measurably faster (docs/speed-history.md). */
#ifndef ML_FMATH_H
#define ML_FMATH_H

#include "kernels/kernels.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ml_fmath {
    const char *name; /* "scalar", "avx2", "avx512" */

    /* For rows i < m:
     *     out[i][c] = s0 · out[i][c] + Σ_{r<n} a[i][r] · B[r·ldb + c],  c < width,
     * the terms added one by one in the order r = 0, 1, ..., each
     * o = fmaf(a[i][r], B[r·ldb + c], o).  Output rows must not overlap
     * a or B. */
    void (*gemm)(size_t m, const float *const *a, size_t n, const float *B, size_t ldb,
                 size_t width, float s0, float *const *out);

    /* out[i·ldo + j] = a[i] · (b + j·ldb) over n floats, for i < m, j < nk,
     * each in rule 3's order (kernels.h), elements in place of blocks
     * (each lane a sequential sum): acc[e % 8] = fmaf(a[e], b[e],
     * acc[e % 8]), then ((acc0+acc4)+(acc2+acc6)) + ((acc1+acc5)+(acc3+acc7)). */
    void (*dots)(size_t m, const float *const *a, size_t nk, const float *b, size_t ldb,
                 size_t n, float *out, size_t ldo);

    /* gemm and dots with B (b) as IEEE half bits, an f16 KV cache's rows:
     * each element widened exactly (ml_f16_to_f32) and then used as gemm
     * and dots use a float, so the results are theirs on the widened
     * values, bit for bit. */
    void (*gemm_h)(size_t m, const float *const *a, size_t n, const uint16_t *B, size_t ldb,
                   size_t width, float s0, float *const *out);
    void (*dots_h)(size_t m, const float *const *a, size_t nk, const uint16_t *b, size_t ldb,
                   size_t n, float *out, size_t ldo);
    /* h[c] = ml_f32_to_f16(x[c]) for c < n: round to nearest, ties to even. */
    void (*to_f16)(uint16_t *h, const float *x, size_t n);

    /* y[c] = y[c] + w[c] · x[c] for c < n. */
    void (*madd)(float *y, const float *w, const float *x, size_t n);

    /* SiLU with this file's own exponential (ml__fmath_exp_neg), so that
     * every implementation gives the same bits: for c < n,
     *     s = (x ≥ 0 ? x : x · e) / (1 + e),  e = exp(−|x|),  x = x[c],
     * and y[c] = s, or y[c] · s when `mul`.  y may equal x. */
    void (*silu)(float *y, const float *x, size_t n, int mul);

    /* The gated FFN's product: x[c] = act(x[c]) · g[c] for c < n, act SiLU
     * (as above) or, with `gelu`, GELU's tanh form 0.5·x·(1 + tanh(u)),
     * u = sqrt(2/π)·(x + 0.044715·x³), computed as the equal x·sigmoid(2u):
     *     w = K·(x + A·(x·(x·x))),  e = exp(−|w|),
     *     act = (w ≥ 0 ? x : x · e) / (1 + e),
     * K = ML_FMATH_GELU_K, A = ML_FMATH_GELU_A; the same bits everywhere.
     * Within a few ulp, also in GELU's negative tail, where 1 + tanh(u)
     * in float cancels. */
    void (*glu)(float *x, const float *g, size_t n, int gelu);

    /* Softmax's last steps, given the maximum `shift` of x[0..n): with
     * e_c = ml__fmath_exp_neg(x[c] − shift) and their sum S taken in
     * dots' order (s[c % 8] += e_c, then ((s0+s4)+(s2+s6)) +
     * ((s1+s5)+(s3+s7))), x[c] = e_c / S.  Being this file's exponential
     * (not libm's expf), it vectorizes with the same bits everywhere. */
    void (*exp_norm)(float *x, size_t n, float shift);

    /* Softmax's first step without a softcap: x[c] = x[c] · scale for c <
     * n, returning the largest (the first x[c] > every earlier one; -inf
     * for n = 0 or all NaN).  Max is exact, so any lane order gives it. */
    float (*scale_max)(float *x, size_t n, float scale);
    /* ml__rmsnorm of `rows` rows of n floats, row r from x + r·ldx to
     * out + r·ldo (out may equal x), each with ml__rmsnorm's operations
     * in its order, so the same bits: a SIMD form keeps one row's sum of
     * squares per lane, never splits one. */
    void (*rmsnorm_rows)(float *out, size_t ldo, const float *x, size_t ldx, const float *w,
                         uint32_t n, size_t rows, float eps);
} ml_fmath;

/* RMSNorm of n floats (sum of squares in double, one order): out = x ·
 * (1 / sqrt(mean(x²) + eps)) · w; out may equal x.  The reference; the
 * sum is a chain of dependent additions, so many rows at once go through
 * rmsnorm_rows, which runs several chains side by side. */
void ml__rmsnorm(float *out, const float *x, const float *w, uint32_t n, float eps);
/* RMSNorm's factor from a row's sum of squares, written once so that no
 * SIMD form of the norm can drift from the reference. */
static inline float ml__rmsnorm_inv(double ss, uint32_t n, float eps)
{
    return (float)(1.0 / sqrt(ss / n + eps));
}
/* rmsnorm_rows of the scalar (and AVX2) table: ml__rmsnorm row by row. */
void ml__rmsnorm_rows(float *out, size_t ldo, const float *x, size_t ldx, const float *w,
                      uint32_t n, size_t rows, float eps);
/* 1 / (1 + expf(-x)): attention gates and linear attention's beta. */
float ml__sigmoid(float x);

/* The constants of ml__fmath_exp_neg: the range reduction (ln 2 split so
 * that n · LN2_HI is exact) and the minimax coefficients of Cephes' expf. */
#define ML_FMATH_EXP_MIN (-64.0f) /* exp(-64) ≈ 2^-92.3: 0 below (ml__fmath_exp_neg) */
#define ML_FMATH_LOG2E 1.44269504088896341f
#define ML_FMATH_ROUND 12582912.0f /* 1.5 · 2^23: adding it rounds to an integer */
#define ML_FMATH_ROUND_BITS 0x4B400000u
#define ML_FMATH_LN2_HI 0.693359375f
#define ML_FMATH_LN2_LO (-2.12194440e-4f)
#define ML_FMATH_P0 1.9875691500e-4f
#define ML_FMATH_P1 1.3981999507e-3f
#define ML_FMATH_P2 8.3334519073e-3f
#define ML_FMATH_P3 4.1665795894e-2f
#define ML_FMATH_P4 1.6666665459e-1f
#define ML_FMATH_P5 5.0000001201e-1f

#define ML_FMATH_GELU_K 1.5957691216057308f /* 2·sqrt(2/π) */
#define ML_FMATH_GELU_A 0.044715f

/* exp(a) for a <= 0 (or NaN) as the vector code computes it: n = a·log2(e)
 * rounded to nearest (by adding and subtracting 1.5·2^23), r = a − n·ln 2
 * in two steps, a degree-7 polynomial for e^r, times 2^n (made from n's
 * bits); below −64 the result is 0.  Within 2 ulp of exp
 * above that cut.  The cut keeps subnormals out of the float math: some
 * CPUs take a slow microcode assist for every operation that reads or
 * makes one, and a softmax of scores far apart (random Q4_0 weights)
 * spent much of a prompt's time in them.  Divided by a sum
 * of up to 2^30 shares, 2^-92.3 is still a normal probability; shares
 * below e^-64 of the largest are far below what a float sum can hold. */
float ml__fmath_exp_neg(float a);


extern const ml_fmath ml__fmath_scalar;
#if defined(__x86_64__)
extern const ml_fmath ml__fmath_avx2;
extern const ml_fmath ml__fmath_avx512; /* beside the AVX-512 kernel table */

/* fmath_avx2.c's dots_t step, shared with fmath_avx512.c: keys [j0, j0 +
 * nj) of b (f16 with `half`), elements [0, n), widened and transposed to
 * kt[e·ldk + j − j0]; the lanes [nj, ldk) of every row are zeros.  n is a
 * multiple of 8 and ldk ≥ nj a multiple of 8. */
void ml__fmath_avx2_transpose_keys(int half, float *kt, size_t ldk, const void *b, size_t ldb,
                                   size_t j0, size_t nj, size_t n);
#endif

#endif
