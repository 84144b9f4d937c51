/* mlcore/quant.h - the quantizers of the .mlb format (mlb(5), "Quantization
 * rule"): Q8_0 with f32 or f16 scales, Q4_0 by the weighted fit search or
 * llama.cpp's rounding, importance-matrix weighting, dequantization, and
 * the q8_mask class names; and writers of ggml's block types (Q4_K, Q5_K,
 * Q6_K, IQ4_XS and their fallbacks) with llama.cpp's per-tensor mix rule.
 * Included by mlcore.h.
 *
 * The Q8_0 and Q4_0 functions are the scalar reference for the whole
 * project (the ggml block writers are not bound by a specification: any
 * valid block is correct, and theirs are chosen by a search): every
 * faster variant (SIMD kernels, other tools) must give bit for bit the
 * same quants and scales.  They are plain float32 arithmetic in a fixed
 * order, compiled without fused multiply-add, and assume the default
 * floating-point environment (round to nearest even).  The exact
 * operation sequences, and every decision where the specification is
 * silent, are in mlb(5) (QUANTIZATION) and docs/quant-decisions.md.
 *
 * Layouts (mlb(5)): a block is 32 consecutive values of a row.  Q8_0 keeps
 * one int8 quant per value, Q4_0 16 bytes per block (byte j holds element
 * j in its low nibble and element j + 16 in its high nibble; nibble =
 * level + 8); each block has one scale d.  Row lengths n are multiples of
 * 32; the row functions read and write n / 32 whole blocks and ignore a
 * remainder.  Row functions never allocate and are safe to call from any
 * number of threads at once. */
#ifndef MLCORE_QUANT_H
#define MLCORE_QUANT_H

#include <mlcore/base.h>
#include <mlcore/mlb.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ML_QK 32 /* values per block, Q8_0 and Q4_0 */

/* ------------------------------------------------------------------------
 * Q8_0
 * ------------------------------------------------------------------------ */

/* The spec's Q8_0 rule, per block of 32 values x (also the runtime's
 * activation quantizer):
 *     amax = max |x|  (fabsf; a NaN never compares greater, so is ignored)
 *     amax < 1e-30f:  d = 0, q = 0
 *     otherwise:      d = amax / 127,
 *                     q = trunc(x * (127 / amax) + copysign(0.5, x)),
 *                         clamped to [-127, 127]  (never -128)
 * Non-finite input is defined, not undefined: a NaN value gets q = 0; an
 * infinity makes amax and d infinite, 127 / amax = 0, and every q 0.  Weights
 * go through ml_quantize_matrix, which refuses non-finite values.
 * q receives n quants, d receives n / 32 scales. */
ML_API void ml_quantize_row_q8_0(const float *x, size_t n, int8_t *q, float *d);

/* The same recipe over blocks of 256 (the activations the kernels multiply
 * with matrices of the 256-element block types, Q2_K to Q6_K and IQ4_XS):
 * amax, d and q as above, one d per 256 elements.  n % 256 == 0; q
 * receives n quants, d receives n / 256 scales. */
ML_API void ml_quantize_row_q8_k(const float *x, size_t n, int8_t *q, float *d);

/* Q8_0 with f16 scales: d16 = f16(amax / 127) (round to nearest even), then
 * q = trunc(x * (1 / d) + copysign(0.5, x)) clamped to [-127, 127], with d
 * the f16 value d16 widened to f32.  amax < 1e-30f gives d16 = 0 and q = 0,
 * as does a d that rounds to zero as f16 (amax / 127 <= 2^-25, amax up to
 * about 3.8e-6): both quietly, without a NaN.  NaN values get q = 0 as above.
 * Returns ML_E_UNSUPPORTED when a block's d rounds to infinity as f16
 * (amax / 127 >= 65520: the scale is above 65504, the largest f16), with
 * err naming the columns of the first such block; the blocks before it are
 * written, the rest of q and d16 is unspecified.  d16 receives f16 bits. */
ML_API ml_status ml_quantize_row_q8_0_f16(const float *x, size_t n, int8_t *q, uint16_t *d16,
                                          ml_error *err);

/* ------------------------------------------------------------------------
 * Q4_0
 * ------------------------------------------------------------------------ */

typedef enum ml_q4_rule {
    ML_Q4_FIT = 0,  /* the reference writer's weighted fit search (default) */
    ML_Q4_ROUND = 1 /* llama.cpp's rounding (--q4-rule round) */
} ml_q4_rule;

/* Q4_0 by the fit search, per block: the element of largest magnitude
 * xmax (the first one on ties) is mapped to each of the 13 levels L = -6.0,
 * -6.2, ..., -8.4 in turn; each element's level is round(x * (L / xmax))
 * (ties to even) clamped to [-8, 7]; d = sum(w x l) / sum(w l^2); the
 * candidate with the smallest sum(w (x - d l)^2) wins, the first on ties.
 * w = x^2, or with an importance vector the llama.cpp weighting
 * imp[c] * sqrt(s^2 + x^2), s^2 the mean x^2 of the whole row (see mlb(5)
 * for the per-block normalisation).  Blocks with amax < 1e-6 or > 1e6 are
 * scaled to amax 1 for the fit and d is scaled back.  An all-zero block
 * gives d = 0 and nibbles 8.  d can be negative.
 * imp: NULL, or n importances (> 0), one per column of the row.
 * qs receives n / 2 bytes, d receives n / 32 f32 scales.  A NaN or an
 * infinity counts as 0 (ml_quantize_matrix refuses them first). */
ML_API void ml_quantize_row_q4_0_fit(const float *x, size_t n, const float *imp, uint8_t *qs,
                                     float *d);

/* Q4_0 by llama.cpp's rule, per block: xmax the element of largest
 * magnitude (the first on ties), d = xmax / -8, id = 1 / d (0 when d is 0
 * or 1 / d overflows), nibble = min(15, trunc(x * id + 8.5)) (0 if that is
 * negative, which finite input cannot reach except through a subnormal d).
 * An all-zero block gives d = -0.0 (0 / -8, as llama.cpp stores it) and
 * nibbles 8.  Same buffers as above. */
ML_API void ml_quantize_row_q4_0_round(const float *x, size_t n, uint8_t *qs, float *d);

/* Rounds n f32 scales to f16 bits (round to nearest even), as the f16
 * variants of both Q4_0 rules do after computing d.  Returns
 * ML_E_UNSUPPORTED, err naming the index, for the first scale that is not
 * finite or rounds to infinity (|d| >= 65520). */
ML_API ml_status ml_quant_scales_to_f16(const float *d, size_t n, uint16_t *out, ml_error *err);

/* ------------------------------------------------------------------------
 * Dequantization (for tests and tools): y = q * d, y = (nibble - 8) * d,
 * one f32 multiplication per value; d holds n / 32 f32 scales.
 * ------------------------------------------------------------------------ */
ML_API void ml_dequantize_row_q8_0(const int8_t *q, const float *d, size_t n, float *y);
ML_API void ml_dequantize_row_q4_0(const uint8_t *qs, const float *d, size_t n, float *y);

/* ------------------------------------------------------------------------
 * Importance matrices
 * ------------------------------------------------------------------------ */

/* Turns the raw statistics of one matrix's input channels (sums of squares
 * over `tokens` tokens, as an .mli file stores them) into importances:
 *     imp[c] = max(0.001, (sums[c] / tokens) / mean over c' of (sums[c'] / tokens))
 * computed in double and rounded to float.  All-zero sums give imp = 1 for
 * every channel.  Returns ML_E_INVAL for n == 0 or tokens == 0 (nothing
 * was measured: quantize that matrix without importances), ML_E_FORMAT
 * for a negative or non-finite sum (err names the channel) or sums whose
 * total overflows. */
ML_API ml_status ml_quant_importance(const double *sums, size_t n, uint64_t tokens, float *imp,
                                     ml_error *err);

/* ------------------------------------------------------------------------
 * Whole matrices
 * ------------------------------------------------------------------------ */

typedef struct ml_quant_opts {
    ml_type type;        /* ML_TYPE_Q8_0 or ML_TYPE_Q4_0 */
    ml_q4_rule q4_rule;  /* Q4_0 only */
    int scale_f16;       /* 0: f32 scales, 1: f16 scales */
    const float *imp;    /* Q4_0 fit only: cols importances (> 0), or NULL
                          * for x^2 weighting; Q8_0 ignores it */
    unsigned threads;    /* worker threads, the caller's included; 0 means 1;
                          * at most 1024 are used */
    const char *name;    /* tensor name for error messages, or NULL */
} ml_quant_opts;

/* Bytes of the two arrays of a rows x cols matrix of `type` (Q8_0 or
 * Q4_0) as .mlb stores them: quants, then scales (4 or 2 bytes each).
 * ML_E_INVAL for another type or cols not a multiple of 32, ML_E_NOMEM when
 * a size does not fit size_t.  Either output may be NULL. */
ML_API ml_status ml_quant_sizes(ml_type type, int scale_f16, uint64_t rows, uint64_t cols,
                                size_t *quant_bytes, size_t *scale_bytes, ml_error *err);

/* Quantizes x (rows x cols floats, row by row) into the two .mlb arrays:
 * quants (int8, or Q4_0 blocks) and scales in the file's encoding
 * (little-endian f32, or f16 bits when o->scale_f16), with the row rules
 * above, split over o->threads threads by rows.  The bytes are the same for
 * every thread count.  The buffer sizes must equal ml_quant_sizes'.
 * Returns:
 *   ML_E_INVAL        bad options or sizes, cols not a multiple of 32, an
 *                     importance vector with the round rule, an importance
 *                     that is not finite and > 0 (err names the column);
 *   ML_E_FORMAT       a value is NaN or infinite (err names row and column);
 *   ML_E_UNSUPPORTED  with f16 scales, a scale above 65504 (err names the
 *                     row and the block's columns);
 *   ML_E_NOMEM        no memory for the thread table.
 * A data error reports the first offending row in row order (within the
 * row: a non-finite value before a scale); err->field is o->name.  After a
 * failure the contents of quants and scales are unspecified. */
ML_API ml_status ml_quantize_matrix(const float *x, size_t rows, size_t cols,
                                    const ml_quant_opts *o, void *quants, size_t quant_bytes,
                                    void *scales, size_t scale_bytes, ml_error *err);

/* ------------------------------------------------------------------------
 * Quantization error, for reports (ml-quant --stats)
 * ------------------------------------------------------------------------ */
typedef struct ml_quant_error {
    uint64_t n;     /* values compared */
    double sse;     /* sum of squared errors */
    double ssq;     /* sum of squares of the source values */
    double max_abs; /* largest absolute error */
} ml_quant_error;

/* Adds the error of rows x cols quantized values, in the .mlb encoding
 * (quants, then scales as f32 or f16 bits), against the source x.  RMS
 * error is sqrt(sse / n), relative RMS sqrt(sse / ssq).  Sums are in row
 * order, so a caller that adds chunks in row order gets the same bits for
 * any number of threads. */
ML_API void ml_quant_error_add(ml_quant_error *e, const float *x, size_t rows, size_t cols,
                               ml_type type, int scale_f16, const void *quants,
                               const void *scales);
/* dst += src (for chunks added in order). */
ML_API void ml_quant_error_merge(ml_quant_error *dst, const ml_quant_error *src);

/* ------------------------------------------------------------------------
 * ggml's block types (issue 38): Q4_K, Q5_K, Q6_K, IQ4_XS, Q5_0, Q5_1, IQ4_NL
 * ------------------------------------------------------------------------ */

/* 1 for the block types ml_quantize_row_blocks writes, 0 otherwise. */
ML_API int ml_quant_block_supported(ml_type type);

/* Quantizes one row of n floats into n / elems blocks of ggml's layout
 * for `type` (elems and bytes per block from ml_type_block), byte for byte
 * what llama.cpp and gguf-py read.  A search (not an exhaustive one)
 * chooses blocks with a small sum imp[j] (x[j] - y[j])^2, y the values
 * ggml's dequantizer gives, or the plain sum (x[j] - y[j])^2 when imp is
 * NULL (docs/quant-decisions.md, "ggml block types").  imp: NULL, or n
 * importances, finite and >= 0, one per column, i.e. per element of the
 * row (so any per-element weighting works, e.g. llama.cpp's x[j]^2).
 * The bytes depend on nothing but the inputs (no threads, no
 * machine-dependent arithmetic).
 * Q5_1 is there for the Q5_K_M mix's fallback.
 * Hostile input is defined: NaN and +-inf count as 0; finite values are
 * clamped to +-1e9, and every f16 scale saturates at +-65504, so huge rows
 * give finite blocks whose values are clipped; an all-zero row gives
 * all-zero scales; tiny values keep their usual relative error down to
 * about 1e-5 (larger f16 scales with smaller sub-scales are tried when the
 * usual one would be a coarse subnormal), and no block is ever worse than
 * all zeros, which vanishing values (1e-9) get.
 * Returns ML_E_INVAL for another type, n not a multiple of elems, or an
 * importance that is negative or not finite (err names the column);
 * nothing is written then. */
ML_API ml_status ml_quantize_row_blocks(ml_type type, const float *x, size_t n, const float *imp,
                                        void *out, ml_error *err);

/* Bytes of a rows x cols matrix of block type `type`, row after row.
 * ML_E_INVAL for a type ml_quantize_row_blocks does not write or cols not
 * a multiple of its block, ML_E_NOMEM when the size does not fit size_t. */
ML_API ml_status ml_quant_block_bytes(ml_type type, uint64_t rows, uint64_t cols, size_t *bytes,
                                      ml_error *err);

/* Quantizes x (rows x cols floats) with ml_quantize_row_blocks, the rows
 * split over `threads` threads (the caller's included; 0 means 1, at most
 * 1024 are used); the bytes are the same for every thread count.  imp:
 * NULL or cols importances (finite, >= 0) used for every row.  name: the
 * tensor, for messages, or NULL.  out_bytes must equal
 * ml_quant_block_bytes'.  Returns ML_E_INVAL (type, sizes, NULL buffers,
 * an importance, err naming the column), ML_E_FORMAT for the first NaN or
 * infinity in row order (err names row and column: weights must be
 * finite, as ml_quantize_matrix says), ML_E_NOMEM; nothing is written
 * after a failure.  A thread that cannot be started leaves its rows to
 * the others. */
ML_API ml_status ml_quantize_matrix_blocks(ml_type type, const float *x, size_t rows, size_t cols,
                                           const float *imp, unsigned threads, const char *name,
                                           void *out, size_t out_bytes, ml_error *err);

/* Adds the error of rows x cols values held as `type` blocks (ggml's
 * layout, read with ml_gguf_dequantize_raw) against the source x, as
 * ml_quant_error_add does for Q8_0 and Q4_0 (same fields, row order).
 * Does nothing for a type without blocks or cols its block does not
 * divide. */
ML_API void ml_quant_error_add_blocks(ml_quant_error *e, const float *x, size_t rows, size_t cols,
                                      ml_type type, const void *blocks);

/* llama.cpp's quantization mixes (llama-quantize's ftype). */
typedef enum ml_quant_mix {
    ML_MIX_Q4_K_M = 1,
    ML_MIX_Q5_K_M = 2,
    ML_MIX_Q6_K = 3,
    ML_MIX_IQ4_XS = 4
} ml_quant_mix;

/* "Q4_K_M", "Q5_K_M", "Q6_K", "IQ4_XS" (any case) to a mix; ML_E_INVAL
 * naming the string otherwise. */
ML_API ml_status ml_quant_mix_parse(const char *name, ml_quant_mix *mix, ml_error *err);
/* The mix's name as above; "?" for other values. */
ML_API const char *ml_quant_mix_name(ml_quant_mix mix);

/* One matrix as the mix rule sees it. */
typedef struct ml_mix_tensor {
    ml_role role;          /* ML_R_TOK_EMB, ML_R_WV, ML_R_W2, ML_R_WCLS, ... */
    uint32_t index;        /* WV, LQKV: its position, in layer order, among
                            * the model's WV and LQKV matrices together (as
                            * llama.cpp counts attn_v and attn_qkv);
                            * W2: its layer; otherwise unused */
    uint32_t count;        /* WV, LQKV: how many of those; W2: n_layers */
    uint64_t cols;         /* row length */
    int tied;              /* TOK_EMB only: it is also the classifier */
    int has_imatrix;       /* an importance matrix is used */
    uint32_t n_gqa;        /* query heads per KV head (IQ4_XS's attn_v rule) */
} ml_mix_tensor;

/* llama.cpp's per-tensor type for a mix (llama-quantize, dense models that
 * are not Falcon or a 70B; llama.cpp's src/llama-quant.cpp):
 *   classifier (WCLS, or a tied TOK_EMB): Q6_K;
 *   WV and LQKV (llama.cpp's attn_v and attn_qkv): Q6_K for Q4_K_M and
 *       Q5_K_M on the "more bits" positions (the first
 *       and last eighth, and every third one between: i < n/8, i >= 7n/8,
 *       (i - n/8) % 3 == 2); Q5_K for IQ4_XS when n_gqa >= 4;
 *   W2 (ffn_down): Q6_K for Q4_K_M and Q5_K_M on the "more bits" layers;
 *       Q5_K for IQ4_XS in the first eighth when there is no imatrix;
 *   everything else (TOK_EMB untied included): the mix's base type
 *       (Q4_K, Q5_K, Q6_K, IQ4_XS).
 * Then the shape fallback when cols is not a multiple of 256: Q4_K ->
 * Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0 (the classifier goes straight to Q8_0),
 * IQ4_XS -> IQ4_NL, and F16 when cols is not even a multiple of 32.
 * ML_TYPE_Q8_0 here means Q8_0 (.mlb's own layout holds the same values).
 * Returns ML_TYPE_F32 for an unknown mix. */
ML_API ml_type ml_quant_mix_type(ml_quant_mix mix, const ml_mix_tensor *t);

/* ------------------------------------------------------------------------
 * q8_mask classes (mlb(5), WEIGHT TYPES)
 * ------------------------------------------------------------------------ */

/* Parses a comma-separated list of matrix names into q8_mask bits: tok_emb
 * 1, wcls 2, wq wk wg lqkv 4, wv lz 8, wo lout 16, w1 w3 32, w2 64, and
 * "all" (127) and "none" (0).  Empty items are skipped; "" gives 0.
 * ML_E_INVAL names an unknown item. */
ML_API ml_status ml_q8_mask_parse(const char *list, uint32_t *mask, ml_error *err);
/* The names of one class bit, as a list ml_q8_mask_parse accepts:
 * "tok_emb", "wcls", "wq,wk", "wv", "wo", "w1,w3", "w2"; NULL for any other
 * value. */
ML_API const char *ml_q8_class_name(uint32_t bit);

#ifdef __cplusplus
}
#endif

#endif
