/* mlcore/requant.h - requantizing an .mlb model: the same model with another
 * weight type, q8_mask, scale encoding, Q4_0 rule or importance matrix
 * (ml-quant(1) from an .mlb).  Included by mlcore.h. */
#ifndef MLCORE_REQUANT_H
#define MLCORE_REQUANT_H

#include <mlcore/base.h>
#include <mlcore/mlb.h>
#include <mlcore/mli.h>
#include <mlcore/convert.h>
#include <mlcore/quant.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How a matrix gets from the source to the output. */
typedef enum ml_requant_method {
    ML_REQUANT_COPY = 0,    /* same type and scale encoding: bytes copied */
    ML_REQUANT_EXACT = 1,   /* re-encoded without loss: f16 scales to f32,
                               f32 scales that are all f16 values to f16,
                               Q4_0 levels to Q8_0 with the same scale */
    ML_REQUANT_QUANTIZE = 2 /* dequantized and quantized again (a second
                               rounding of already quantized weights) */
} ml_requant_method;

/* Called after each array is written, in file order; err is the error of
 * the new values against the source's dequantized values for
 * ML_REQUANT_QUANTIZE, NULL otherwise. */
typedef void (*ml_requant_tensor_fn)(void *ctx, const ml_tensor *t, ml_requant_method m,
                                     const ml_quant_error *err);

typedef struct ml_requant_opts {
    uint32_t wtype;         /* ML_WTYPE_Q8_0 or ML_WTYPE_Q4_0; 0: the source's */
    int64_t q8_mask;        /* ML_Q8_* bits for a Q4_0 output; -1: the source's
                               when it is Q4_0, else 0 */
    int scale_f16;          /* 1 f16, 0 f32; -1: the source's */
    int q4_rule;            /* ML_Q4_FIT (default) or ML_Q4_ROUND */
    const ml_mli *imatrix;  /* importances for Q4_0 fit quantization, or NULL */
    unsigned threads;       /* quantizer threads; 0 means 1 */
    ml_convert_progress_fn progress; /* output bytes done and total; non-zero
                                        return stops (ML_E_IO "interrupted") */
    void *progress_ctx;
    ml_requant_tensor_fn on_tensor; /* may be NULL; when set, requantized
                                       matrices are measured */
    void *tensor_ctx;
    ml_quant_mix mix;       /* 0: none; else llama.cpp's mix as ml_convert_opts.mix
                               makes it (a type table; wtype and q8_mask must be
                               left 0/-1): from an .mlb whose matrices are Q8_0,
                               F32, F16 or BF16 */
    int allow_requantize;   /* with a mix: accept other matrix types (Q4_0, ggml
                               block types), quantized a second time */
} ml_requant_opts;

ML_API void ml_requant_opts_init(ml_requant_opts *o);

/* The output's header; ML_E_INVAL for bad options (an unknown type or
 * mix, a q8_mask for a Q8_0 output or with a mix, importances with the
 * round rule or holding no tokens), ML_E_MISMATCH for an importance matrix
 * of another shape. */
ML_API ml_status ml_requant_header(const ml_mlb *src, const ml_requant_opts *o, ml_mlb_header *h,
                                   ml_error *err);
/* With a mix: the output's type table (ml_mlb_matrix_count bytes, malloc'd,
 * *types NULL without a mix), the type ml_convert_plan_new gives each
 * matrix of the same model.  ML_E_UNSUPPORTED naming the first matrix of
 * another type than Q8_0, F32, F16 or BF16 without allow_requantize;
 * ML_E_NOMEM. */
ML_API ml_status ml_requant_types(const ml_mlb *src, const ml_requant_opts *o, uint8_t **types,
                                  ml_error *err);
/* The method for one matrix (from: the source's tensor, to: the output's);
 * a block type is copied when the source has it, else quantized. */
ML_API ml_requant_method ml_requant_method_of(const ml_tensor *from, const ml_tensor *to,
                                              int from_f16, int to_f16);
/* Writes the requantized model through fn, array by array in file order.
 * The bytes depend only on the source and the options, not on threads.
 * Errors: those of ml_requant_header, of the sink (ML_E_IO), of the
 * quantizer (ML_E_UNSUPPORTED for an f16 scale above 65504), ML_E_NOMEM. */
ML_API ml_status ml_requant_write(const ml_mlb *src, const ml_requant_opts *o, ml_write_fn fn,
                                  void *ctx, ml_error *err);

#ifdef __cplusplus
}
#endif
#endif
