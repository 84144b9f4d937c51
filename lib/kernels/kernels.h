/* kernels.h - private: the table of hot operations, one scalar reference
 * (kernels_scalar.c) and per-ISA variants (kernels_avx2.c, ...) chosen at
 * run time by dispatch.c.  Each table also names the float32 products
 * (fmath.h) that go with it, so one choice sets both.
 *
 * Every variant is bit-identical to the scalar reference.  The rules that
 * make it possible:
 *  1. Activations are quantized to Q8_0 by the spec's float32 recipe
 *     (ml_quantize_row_q8_0), operation for operation (rule 6's types:
 *     the same recipe per 256).
 *  2. Integer block sums are exact: each 32-element block's Σ wq·xq is an
 *     int32 (|sum| <= 32·127·127), whatever instructions compute it.
 *  3. Float accumulation has one canonical order.  For block b of a row,
 *        s_b = (float)isum_b * (wd[b] * xd[b]);   acc[b % 8] += s_b;
 *     (acc starts at +0.0f), and the row's result is
 *        ((acc0 + acc4) + (acc2 + acc6)) + ((acc1 + acc5) + (acc3 + acc7)).
 *     An 8-lane SIMD accumulator does exactly this; the scalar code keeps
 *     an array of 8.  No FMA (-ffp-contract=off) but where fmath.h's
 *     attention products ask for one by name.
 *  4. Threads split rows (outputs), never a reduction, so the thread count
 *     cannot change a result; matmul computes each (token, row) dot the
 *     same way as matvec, so prefill and decode agree bit for bit.
 *  5. The 32-element block types (ggml's layouts: Q4_1, Q5_0, Q5_1, IQ4_NL,
 *     MXFP4) and F32, F16, BF16 matrices keep rules 1-4: every weight row
 *     is cut into 32-element blocks b, each giving one float s_b computed
 *     exactly as below (the integers exact, the float operations in the
 *     order written, no FMA), then acc[b % 8] += s_b and the row's result
 *     is rule 3's fold.  isum is Σ (integer weight)·xq over the block,
 *     asum Σ xq over the same elements; d, m are the block's f16 fields
 *     widened exactly; xd the activation block's scale.
 *       Q5_0:   v = q5 - 16;                 s = (float)isum * (d * xd)
 *       IQ4_NL: v = kvalues_iq4nl[nibble];  s = (float)isum * (d * xd)
 *       MXFP4:  v = kvalues_mxfp4[nibble] (ggml's doubled table
 *               {0,1,2,3,4,6,8,12,0,-1,-2,-3,-4,-6,-8,-12}), d = ggml's
 *               ggml_e8m0_to_fp32_half(e);  s = (float)isum * (d * xd)
 *       Q4_1, Q5_1: q unsigned;  s = (float)isum * (d * xd) + (float)asum * (m * xd)
 *       F32, F16, BF16: w widened exactly to f32;
 *               p[l] = Σ over m = 0..3 in order of w[8m+l] * (float)xq[8m+l]
 *               (p[l] starting at +0.0f);  s = ml__fold8(p) * xd
 *     Every integer is exact in int32 and below 2^24 in magnitude before
 *     it becomes a float, so the conversion is exact too.
 *  6. The 256-element types (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS) take
 *     K activations: the same recipe over 256 elements
 *     (ml_quantize_row_q8_k), one scale xd per super-block, as llama.cpp
 *     multiplies them (its Q8_K).  A super-block k gives one float s_k:
 *     all its integer products are summed exactly in int32 first, so the
 *     float work is per 256 weights, not per 32 (the prefill's cost once
 *     the integer products are fast).  Sub-block j (32 elements) or half
 *     h (16 elements) has isum_j = Σ (integer weight)·xq and asum_j = Σ xq;
 *     d, dmin are the super-block's f16 fields widened exactly:
 *       Q4_K, Q5_K: q unsigned, sub-block j's 6-bit sc_j and m_j;
 *               isum = Σ_j sc_j * isum_j;  msum = Σ_j m_j * asum_j;
 *               s = (float)isum * (d * xd) - (float)msum * (dmin * xd)
 *       Q6_K:   v = q6 - 32, int8 scales sc_h per half;
 *               isum = Σ_h sc_h * isum_h;  s = (float)isum * (d * xd)
 *       Q3_K:   v in -4..3 (ggml's hmask rule), 6-bit scales sc_h;
 *               isum = Σ_h (sc_h - 32) * isum_h;  s = (float)isum * (d * xd)
 *       Q2_K:   q in 0..3; scale byte h: low 4 bits sc_h, high 4 bits mn_h;
 *               isum = Σ_h sc_h * isum_h;  msum = Σ_h mn_h * asum_h;
 *               s = (float)isum * (d * xd) - (float)msum * (dmin * xd)
 *       IQ4_XS: v = kvalues_iq4nl[nibble], sub-block j's 6-bit ls_j;
 *               isum = Σ_j (ls_j - 32) * isum_j;  s = (float)isum * (d * xd)
 *     then acc[k % 8] += s_k and the row's result is rule 3's fold.  The
 *     sums stay inside int32 (the largest, IQ4_XS: 8·32·(32·127·127) =
 *     528449536 < 2^31); they may pass 2^24, so their conversion to float
 *     rounds (to nearest, ties to even: C's and cvtdq2ps's), and every
 *     variant rounds the same integer the same way.
 * Weights: Q8_0 quants int8 (never -128; the loader checks) or Q4_0 nibble
 * bytes (byte j of a block: element j low nibble, j+16 high; value
 * nibble - 8), with f32 or f16 scales (ml_wscales): an f16 scale is
 * widened to f32 exactly, so a matrix gives the same bits whichever way
 * its scales are stored, and decode reads 2 bytes per block, not 4.  Row
 * lengths are multiples of 32. */
#ifndef ML_KERNELS_H
#define ML_KERNELS_H

#include "mlcore.h"

#include <stddef.h>
#include <stdint.h>

/* A matrix's scales as the file stores them: f32, or f16 bits when f16;
 * row r's start at index r * cols / 32. */
typedef struct ml_wscales {
    const void *p;
    int f16;
} ml_wscales;

/* The scalar pieces of the rules, written once for every plain-C user
 * (kernels_scalar.c, kernels_neon.c, fmath_scalar.c), so that no copy can drift
 * from the reference. */

/* Scale i of a matrix as f32 (an f16 one widened exactly). */
static inline float ml__wscale(ml_wscales wd, size_t i)
{
    return wd.f16 ? ml_f16_to_f32(((const uint16_t *)wd.p)[i]) : ((const float *)wd.p)[i];
}

/* Rule 3's fold of the eight partial sums. */
static inline float ml__fold8(const float acc[8])
{
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

struct ml_fmath; /* fmath.h */

/* matmul_x's three steps, all of one variant.  bytes: the size of the
 * rearranged form of n_tok rows of `cols` against weights of Q4_0 (q4 = 1)
 * or Q8_0, or 0 where matmul would not use one (too few tokens).
 * prepare: share `part` of `parts` of it into xt (64-byte aligned), so
 * threads can split it.  run: matmul_q4_0 (q4) or matmul_q8_0 reading xt,
 * which must be complete, with xq and xd as there; the same results. */
typedef struct ml_matmul_x {
    size_t (*bytes)(int q4, size_t cols, size_t n_tok);
    void (*prepare)(int q4, const int8_t *xq, size_t cols, size_t n_tok, unsigned part,
                    unsigned parts, void *xt);
    void (*run)(int q4, const void *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                const int8_t *xq, const void *xt, const float *xd, size_t n_tok, float *y,
                size_t ldy);
} ml_matmul_x;

/* matmul_blk in two steps, as matmul_x (optional: NULL entries in a
 * table without it).  bytes: the size of the rearranged form of n_tok
 * activation rows of `cols` against weights of type t, or 0 where
 * matmul_blk would not make one (its type, too few tokens).  prepare:
 * share `part` of `parts` of it into xt (64-byte aligned) from the
 * activations matmul_blk takes (xq, xd).  run: matmul_blk reading xt,
 * which must be complete and made for the same t, cols and n_tok, with
 * xq and xd as there; the same results. */
typedef struct ml_matmul_blk_x {
    size_t (*bytes)(ml_type t, size_t cols, size_t n_tok);
    /* group: the tokens run works on at once for this call (the lanes
     * of a register), so that a call of n_tok costs about what one of
     * n_tok rounded up to a multiple of it costs; 1 where it makes no
     * form.  What a caller free to evaluate more tokens (speculation's
     * guesses) rounds up to (ml_ctx_step_group). */
    size_t (*group)(ml_type t, size_t cols, size_t n_tok);
    void (*prepare)(ml_type t, const int8_t *xq, const float *xd, size_t cols, size_t n_tok,
                    unsigned part, unsigned parts, void *xt);
    void (*run)(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                const int8_t *xq, const float *xd, const void *xt, size_t n_tok, float *y,
                size_t ldy);
} ml_matmul_blk_x;

typedef struct ml_kernels {
    const char *name; /* "scalar", "avx2", "avx512vnni-lanes", "avx512vnni", "amx", "neon",
                       * "neondot" */

    /* The float math (fmath.h: attention's and linear attention's float32
     * products, the activations) to use with this table: the reference
     * with the scalar table (so ML_KERNELS=scalar runs reference code
     * throughout), else the fastest one this table's CPUs run (for NEON
     * still the reference).  Never NULL. */
    const struct ml_fmath *fmath;

    /* The spec's Q8_0 rule on n floats (n % 32 == 0): q[n], d[n/32]. */
    void (*quantize_q8_0)(const float *x, size_t n, int8_t *q, float *d);
    /* The same per 256 (rule 6's K activations, ml_quantize_row_q8_k;
     * n % 256 == 0): q[n], d[n/256].  Taken with quantize_q8_0. */
    void (*quantize_q8_k)(const float *x, size_t n, int8_t *q, float *d);

    /* y[r] = row r of W · x for r in [r0, r1); W has `cols` columns;
     * x is given quantized (xq, xd).  wq points at the matrix's quants
     * (row r starts at r*cols bytes for Q8_0, r*cols/2 for Q4_0) and wd at
     * its scales. */
    void (*matvec_q8_0)(const int8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, float *y);
    void (*matvec_q4_0)(const uint8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, float *y);

    /* The same for n_tok activation rows at once (prefill, and one token
     * of each of several sequences): activation t is xq + t*cols,
     * xd + t*cols/32; y[t*ldy + r] receives row r · x_t.  Blocked for the
     * cache; every (t, r) result equals matvec's. */
    void (*matmul_q8_0)(const int8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, size_t n_tok, float *y, size_t ldy);
    void (*matmul_q4_0)(const uint8_t *wq, ml_wscales wd, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, size_t n_tok, float *y, size_t ldy);

    /* Optional (NULL entries in a table without them): matmul in two
     * steps, for variants that rearrange the activations before
     * multiplying, so that the products of one input (q, k, v; gate and
     * up) and all the calls the threads make for their rows rearrange it
     * once, not once a call.  matmul_x[1] goes with matmul_q4_0 and
     * matmul_x[0] with matmul_q8_0: the rearranged form is private to the
     * variant that made it, so each belongs to the same variant as the
     * matmul it serves, and a table composed kernel by kernel (dispatch.c)
     * takes it with that matmul. */
    ml_matmul_x matmul_x[2];

    /* Block-type matrices (rules 5 and 6): ml_type t among those
     * ml__blk_row_bytes knows; row r starts at w + r * row_bytes, row_bytes
     * = ml__blk_row_bytes(t, cols).  The activations are Q8_0 (xd: one
     * scale per 32) or, for the types ml__blk_acts_k names, K activations
     * (rule 6: one per 256; token t's at xd + t * cols / 256).  The same
     * contract as matvec_q8_0 and
     * matmul_q8_0: y[r] (matvec) or y[t*ldy + r] (matmul) for r in
     * [r0, r1), every (token, row) result equal to matvec's.  Never NULL: a
     * variant without its own code for a type passes it to the scalar
     * reference (ml__matvec_blk_scalar, ml__matmul_blk_scalar). */
    void (*matvec_blk)(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                       const int8_t *xq, const float *xd, float *y);
    void (*matmul_blk)(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                       const int8_t *xq, const float *xd, size_t n_tok, float *y, size_t ldy);
    /* Optional, with matmul_blk (the form is private to its variant). */
    ml_matmul_blk_x matmul_blk_x;

    /* Rows [r0, r1) of a Q5_0, IQ4_NL or MXFP4 matrix (ml__blk_as_q8_0)
     * written as the spec's Q8_0: row r0 + i's quants at q + i * cols,
     * its scales (f32) at d + i * cols / 32; 1, or 0 (nothing written)
     * for another type.  Their integer weights are int8 and never -128
     * and rule 5's s_b is rule 3's with wd = d, so matmul_q8_0 on the
     * result gives matmul_blk's bits: prefill takes the faster Q8_0
     * path.  Never NULL; taken with matmul_blk. */
    int (*blk_to_q8_0)(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1, int8_t *q,
                       float *d);
} ml_kernels;

/* The types whose activations are rule 6's K activations. */
static inline int ml__blk_acts_k(ml_type t)
{
    return t == ML_TYPE_Q2_K || t == ML_TYPE_Q3_K || t == ML_TYPE_Q4_K || t == ML_TYPE_Q5_K ||
           t == ML_TYPE_Q6_K || t == ML_TYPE_IQ4_XS;
}

/* A super-block's bytes for the types of ml__blk_acts_k (a constant
 * where t is: the kernels' loops fold it); 0 for another type. */
static inline size_t ml__blk_k_bytes(ml_type t)
{
    return t == ML_TYPE_Q4_K   ? 144
           : t == ML_TYPE_Q5_K ? 176
           : t == ML_TYPE_Q6_K ? 210
           : t == ML_TYPE_Q2_K ? 84
           : t == ML_TYPE_Q3_K ? 110
           : t == ML_TYPE_IQ4_XS ? 136
                               : 0;
}

/* The activation scales of one token for a row of `cols` weights of
 * type t: token k's start at xd + k * ml__blk_xd_count(t, cols). */
static inline size_t ml__blk_xd_count(ml_type t, size_t cols)
{
    return ml__blk_acts_k(t) ? cols / 256 : cols / 32;
}

/* The block types blk_to_q8_0 turns into Q8_0. */
static inline int ml__blk_as_q8_0(ml_type t)
{
    return t == ML_TYPE_Q5_0 || t == ML_TYPE_IQ4_NL || t == ML_TYPE_MXFP4;
}

/* The bytes of a row of `cols` weights of type t for the block kernels,
 * or 0 where they have no code for t (Q8_0, Q4_0, U8, unknown) or cols
 * is not a whole number of t's blocks (blocks_scalar.c). */
size_t ml__blk_row_bytes(ml_type t, size_t cols);

/* The scalar reference of matvec_blk and matmul_blk (blocks_scalar.c),
 * which every table's entries fall back to for the types they leave. */
void ml__matvec_blk_scalar(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                           const int8_t *xq, const float *xd, float *y);
void ml__matmul_blk_scalar(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                           const int8_t *xq, const float *xd, size_t n_tok, float *y,
                           size_t ldy);
int ml__blk_to_q8_0_scalar(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                           int8_t *q, float *d);

/* The scalar reference table; always available. */
extern const ml_kernels ml__kernels_scalar;

/* The kernels a table is made of, each taken whole from one variant: a
 * variant's results are the reference's bits, so any mix gives them too
 * (rules 1-4 fix the data each passes to the next: Q8_0 activations, f32
 * results).  A matmul comes with its matmul_x; the float math is one. */
typedef enum ml_kslot {
    ML_KS_QUANTIZE_Q8_0,
    ML_KS_MATVEC_Q8_0,
    ML_KS_MATVEC_Q4_0,
    ML_KS_MATMUL_Q8_0,
    ML_KS_MATMUL_Q4_0,
    ML_KS_MATVEC_BLK, /* every block type: one slot, probed on Q4_K */
    ML_KS_MATMUL_BLK,
    ML_KS_FMATH,
    ML_KS_COUNT
} ml_kslot;

/* Slot s of `to` set to `from`'s. */
void ml__kernels_take(ml_kernels *to, ml_kslot s, const ml_kernels *from);

/* Does slot s of a and b run the same code? */
int ml__kernels_same(ml_kslot s, const ml_kernels *a, const ml_kernels *b);

/* The time in seconds of the slots in the bit set `slots` (bit s: slot
 * s) of each of the n tables ks (n <= ML_PROBE_MAX) on small synthetic
 * data held in the cache (probe.c), the best of `reps` turns, into
 * secs[slot][table]; 0 when out of memory (secs unset). */
#define ML_PROBE_MAX 8
int ml__kernels_probe(const ml_kernels *const *ks, size_t n, unsigned slots, unsigned reps,
                      double (*secs)[ML_PROBE_MAX]);

/* The chooser's rule for one slot, given the probe's times t[0..n) of the
 * candidates, the widest (the default) last: the candidates faster than
 * it by the margin (a bit set), and the fastest of a set (n - 1, the
 * widest, for an empty one).  A slot switches to fastest(second probe,
 * beating(first) & beating(second)). */
unsigned ml__kernels_beating(const double *t, size_t n);
size_t ml__kernels_fastest(const double *t, unsigned set, size_t n);

/* On x86, the widest of the kernel files' instruction sets this CPU runs:
 * 2 for the avx512 files' (AVX-512 F, BW, VL, DQ, VNNI), 1 for the avx2
 * files' (AVX2, FMA), else 0; 0 elsewhere. */
int ml__cpu_x86_level(void);

/* The table chosen for this CPU, or by ML_KERNELS=scalar|avx2|...  (an
 * unknown or unsupported value: NULL and *why set).  Left to choose, it
 * takes each slot from the variant that measures fastest here (the
 * probe, run once for the process at the first call; dispatch.c).  The
 * table for every kernel: ML_KERNELS's ,KERNEL=VARIANT items are checked
 * but left to ml__kernels_select_into. */
const ml_kernels *ml__kernels_select(const char **why);

/* The same with ML_KERNELS's ,KERNEL=VARIANT items applied: where there
 * are any, the table is composed in *buf, which is returned. */
const ml_kernels *ml__kernels_select_into(ml_kernels *buf, const char **why);

/* The environment variable a refusal of the two above (their *why) is
 * about: "ML_KERNELS" or "ML_PREFETCH". */
const char *ml__kernels_refused_var(const char *why);

/* How far ahead decode's kernels prefetch their weights, in bytes (the
 * x86 variants: kernels_x86.h says how each distance is used).  One
 * profile for the process, the CPU's or the one ML_PREFETCH names, set by
 * the first ml__kernels_select (dispatch.c), before any model runs, and
 * read-only after; until then the near profile.  Prefetching changes no
 * result, only when the bytes arrive. */
typedef struct ml_prefetch {
    size_t q8_l2, q8_l1; /* Q8_0: into L2, into L1 */
    size_t q4_l2, q4_l1; /* Q4_0 and the 32-element block types */
    size_t k_l2;         /* the 256-element block types (rule 6) */
    const char *name;
} ml_prefetch;
extern ml_prefetch ml__prefetch;

/* Every table this build has and this CPU can run (scalar first), at
 * most cap of them; for tests that compare variants.  Returns how many
 * it wrote. */
size_t ml__kernels_available(const ml_kernels **out, size_t cap);

#endif
