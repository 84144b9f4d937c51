/* mlcore/convert.h - converting a GGUF model (llama.cpp's format) into an
 * .mlb model.
 *
 * Conversion is two steps.  ml_convert_plan_new reads the GGUF's metadata and
 * tensor infos (not the weights), maps the architecture onto the .mlb header
 * and decides, for every array of the .mlb body, which GGUF tensor it comes
 * from, what happens on the way (row permutations, splits, the Qwen3.5
 * re-orderings) and whether the values arrive unchanged.  ml_convert_write
 * then streams the model through a sink, tensor by tensor, in file order.
 * The plan can be printed without writing anything (gguf2mlb --dry-run).
 *
 * What is mapped, and every decision where the specification is silent, is
 * in gguf2mlb(1) and docs/convert-decisions.md.  In short:
 *   - architectures llama (Llama 2 and 3.x, Mistral, SmolLM, SmolLM2),
 *     qwen2, qwen3, gemma, gemma2, gemma3, smollm3 and qwen35; anything else,
 *     and any key or tensor .mlb cannot represent, is ML_E_UNSUPPORTED
 *     naming the key or tensor;
 *   - a GGUF Q8_0 or Q4_0 matrix written as the same type is copied block by
 *     block, bit for bit (scales as f16 bits, or widened exactly to f32);
 *     Q4_0, Q5_0 and IQ4_NL blocks written as Q8_0 keep their scale and get
 *     their exact integer levels; everything else is dequantized to float
 *     and quantized with the spec's rules (mlcore/quant.h);
 *   - with a type table (wtype 3: --wtype source, and the default for a
 *     source whose matrices are neither all Q8_0/Q4_0 nor all float), a
 *     matrix of a ggml block type (Q4_1, Q5_*, K-quants, IQ4_*, F16, BF16)
 *     keeps its blocks byte for byte, rows moved whole;
 *   - with a mix (ml_convert_opts.mix), each matrix gets llama.cpp's type
 *     for it (ml_quant_mix_type) and is quantized from floats (rows
 *     permuted first), or kept when the source already holds that type;
 *   - a GGUF Q8_0 quant of -128, which .mlb forbids, becomes -127: one
 *     quantization step on that weight, the rest of the block unchanged
 *     (counted in ml_convert_stats).
 *
 * The plan borrows the ml_gguf (and the ml_mli given in the options): both
 * must stay open until the plan is freed. */
#ifndef MLCORE_CONVERT_H
#define MLCORE_CONVERT_H

#include <mlcore/base.h>
#include <mlcore/gguf.h>
#include <mlcore/mlb.h>
#include <mlcore/mli.h>
#include <mlcore/quant.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * Options
 * ------------------------------------------------------------------------ */

/* Called after each piece of work with the output bytes done so far and the
 * total; a non-zero return stops the conversion (ML_E_IO, "interrupted"). */
typedef int (*ml_convert_progress_fn)(void *ctx, uint64_t done, uint64_t total);

struct ml_convert_item;
/* Called after each array is written, in file order.  err is the error of
 * the written values against the source values (ml_quant_error_add) for a
 * quantized matrix, NULL for arrays written without loss. */
typedef void (*ml_convert_tensor_fn)(void *ctx, const struct ml_convert_item *it,
                                     const ml_quant_error *err);

typedef struct ml_convert_opts {
    uint32_t wtype;                  /* 0: automatic: ML_WTYPE_TABLE for a source
                                        whose matrices are neither all Q8_0/Q4_0
                                        nor all F32/F16/BF16, else the source's
                                        size class (below); ML_WTYPE_Q8_0,
                                        ML_WTYPE_Q4_0, or ML_WTYPE_TABLE (every
                                        matrix keeps its GGUF type; written as
                                        wtype 1 or 2 when that can say it) */
    int64_t q8_mask;                 /* -1: automatic (below); else ML_Q8_* bits,
                                        only for a Q4_0 model */
    int scale_f16;                   /* 1: f16 scales (default); 0: f32 scales */
    int q4_rule;                     /* -1: automatic (round for gemma3, fit
                                        otherwise); ML_Q4_FIT or ML_Q4_ROUND */
    const ml_mli *imatrix;           /* importances for Q4_0 fit quantization and
                                        for the mix's block types, or NULL */
    ml_quant_mix mix;                /* 0: none; else llama.cpp's mix (issue 38):
                                        a type table (wtype 3) whose type for
                                        each matrix is ml_quant_mix_type's, the
                                        blocks from ml_quantize_matrix_blocks
                                        (wtype and q8_mask must be left 0/-1) */
    int allow_requantize;            /* with a mix: accept matrices quantized
                                        other than Q8_0 (dequantized, then
                                        quantized again); 0: ML_E_UNSUPPORTED
                                        naming the first such tensor */
    unsigned threads;                /* quantizer threads; 0 means 1 */
    ml_convert_progress_fn progress; /* may be NULL */
    void *progress_ctx;
    ml_convert_tensor_fn on_tensor;  /* may be NULL; when set, quantized
                                        matrices are measured (one more pass) */
    void *tensor_ctx;
} ml_convert_opts;

/* Defaults: automatic wtype, q8_mask and rule, f16 scales, one thread. */
ML_API void ml_convert_opts_init(ml_convert_opts *o);

/* ------------------------------------------------------------------------
 * Plans
 * ------------------------------------------------------------------------ */

/* What happens to values on the way (ml_convert_item.transform). */
enum {
    ML_CONV_ROPE_PERM = 1,   /* rows (elements) of each head from rotate-half
                                to interleaved pairs: new 2i+s <- old s*r/2+i */
    ML_CONV_ROWS = 2,        /* a row (element) range of a fused tensor */
    ML_CONV_QGATE = 4,       /* Qwen3.5: query or gate rows of attn_q */
    ML_CONV_VHEADS = 8,      /* Qwen3.5: value heads from llama.cpp's tiled
                                order back to the grouped order (rows or
                                elements) */
    ML_CONV_VHEAD_COLS = 16, /* the same on columns (lout) */
    ML_CONV_A_LOG = 32,      /* A_log = ln(-ssm_a) */
    ML_CONV_ZEROS = 64       /* no source tensor: zeros (a missing bias) */
};

/* How an item's values are produced. */
typedef enum ml_convert_method {
    ML_CONV_COPY = 0,     /* bytes copied (F32 -> F32, Q8_0 -> Q8_0, Q4_0 -> Q4_0) */
    ML_CONV_EXACT = 1,    /* re-encoded without loss: F16/BF16/quantized
                             vectors to F32, Q4_0/Q5_0/IQ4_NL to Q8_0 */
    ML_CONV_QUANTIZE = 2, /* float or dequantized values quantized by the
                             spec's rule: values change within its bound */
    ML_CONV_DERIVED = 3   /* computed (A_log): not bit-exact */
} ml_convert_method;

/* One array (or quantized matrix) of the .mlb body. */
typedef struct ml_convert_item {
    ml_tensor dst;             /* name, role, layer, type, shape, offsets */
    const ml_gguf_tensor *src; /* where the values come from; NULL with
                                  ML_CONV_ZEROS */
    uint32_t transform;        /* ML_CONV_* bits */
    ml_convert_method method;
    int lossless; /* 1: the .mlb holds exactly the values
                     llama.cpp reads from the GGUF */
} ml_convert_item;

typedef struct ml_convert_plan ml_convert_plan;

/* Reads the metadata and tensor infos of g and builds the plan.  Fails with:
 *   ML_E_UNSUPPORTED  an architecture, key value, tensor or tensor type
 *                     .mlb cannot represent or this build cannot read, a
 *                     mix from a matrix quantized other than Q8_0 without
 *                     allow_requantize (err names the key or tensor);
 *   ML_E_FORMAT       a required key is missing or has the wrong type, or a
 *                     value is out of range (err names the key);
 *   ML_E_SHAPE        a tensor's shape disagrees with the metadata (err names
 *                     the tensor and the offset of its info);
 *   ML_E_MISMATCH     the importance matrix does not fit the model;
 *   ML_E_INVAL        bad options (an importance matrix with the round rule,
 *                     a q8_mask for a Q8_0 model, an unknown wtype or mix,
 *                     a mix with a wtype or q8_mask);
 *   ML_E_NOMEM. */
ML_API ml_status ml_convert_plan_new(const ml_gguf *g, const ml_convert_opts *o,
                                     ml_convert_plan **out, ml_error *err);
/* Accepts NULL. */
ML_API void ml_convert_plan_free(ml_convert_plan *p);

/* Accessors; pointers are borrowed from the plan. */
ML_API const ml_mlb_header *ml_convert_plan_header(const ml_convert_plan *p);
/* The per-layer flag bytes, or NULL when the header has no layer flags. */
ML_API const uint8_t *ml_convert_plan_flags(const ml_convert_plan *p);
/* The type table (ml_mlb_matrix_count bytes) of a wtype 3 plan, else NULL. */
ML_API const uint8_t *ml_convert_plan_types(const ml_convert_plan *p);
/* general.architecture, and a description of how it was read. */
ML_API const char *ml_convert_plan_arch(const ml_convert_plan *p);
ML_API const char *ml_convert_plan_arch_desc(const ml_convert_plan *p);
/* The Q4_0 rule used for requantized matrices (ML_Q4_FIT or ML_Q4_ROUND). */
ML_API int ml_convert_plan_q4_rule(const ml_convert_plan *p);
ML_API size_t ml_convert_plan_n_items(const ml_convert_plan *p);
ML_API const ml_convert_item *ml_convert_plan_item(const ml_convert_plan *p, size_t i);
/* Notes for people: decisions taken (recovered RoPE parameters, defaults
 * applied, GGUF tensors not used and why).  One line each. */
ML_API size_t ml_convert_plan_n_notes(const ml_convert_plan *p);
ML_API const char *ml_convert_plan_note(const ml_convert_plan *p, size_t i);
/* Bytes of the .mlb the plan writes (with the final padding). */
ML_API uint64_t ml_convert_plan_size(const ml_convert_plan *p);

/* "copy", "exact Q4_0 -> Q8_0", "quantize Q4_K -> Q4_0 (fit)", ... plus the
 * transforms, into buf (always terminated). */
ML_API void ml_convert_item_describe(const ml_convert_plan *p, const ml_convert_item *it, char *buf,
                                     size_t n);

/* ------------------------------------------------------------------------
 * Writing
 * ------------------------------------------------------------------------ */
typedef struct ml_convert_stats {
    uint64_t clamped_q8;    /* GGUF Q8_0 quants of -128 written as -127 */
    char first_clamped[64]; /* the GGUF tensor of the first one */
    uint32_t copied;        /* items by method */
    uint32_t exact;
    uint32_t quantized;
    uint32_t derived;
    uint64_t bytes; /* bytes written */
} ml_convert_stats;

/* Writes the whole .mlb through fn, tensor by tensor in file order, holding
 * at most one output tensor and a bounded float buffer in memory.  The bytes
 * depend only on the GGUF and the options, not on opts.threads.  Errors:
 * those of the sink (ML_E_IO), ML_E_FORMAT for non-finite values or scales
 * in the source (err names the GGUF tensor and the offset), ML_E_UNSUPPORTED
 * for a scale above 65504 with f16 scales, ML_E_IO "interrupted" when the
 * progress callback asks to stop, ML_E_NOMEM.  st may be NULL. */
ML_API ml_status ml_convert_write(const ml_convert_plan *p, ml_write_fn fn, void *ctx,
                                  ml_convert_stats *st, ml_error *err);

#ifdef __cplusplus
}
#endif

#endif
