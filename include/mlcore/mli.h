/* mlcore/mli.h - importance matrices (.mli, mli(5)): per input channel of
 * every weight matrix, the sum of the squares of the activations it saw,
 * collected by the runtime (ml-run --imatrix, ml-imatrix) and used by the
 * Q4_0 fit quantizer (gguf2mlb --imatrix, ml-quant --imatrix).
 * Included by mlcore.h. */
#ifndef MLCORE_MLI_H
#define MLCORE_MLI_H

#include <mlcore/base.h>
#include <mlcore/mlb.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ML_MLI_HEADER_SIZE 40

typedef struct ml_mli ml_mli;

typedef struct ml_mli_info {
    uint32_t version; /* 1 */
    uint32_t n_layers;
    uint32_t dim;
    uint32_t hidden_dim;
    uint32_t q_dim;        /* as stored: 0 when it equals dim */
    uint64_t layer_tokens; /* tokens summed into the layers */
    uint64_t cls_tokens;   /* tokens summed into the classifier */
} ml_mli_info;

/* The channel groups of the file, in file order within a layer. */
typedef enum ml_mli_slot {
    ML_MLI_ATTN_IN = 0, /* input of wq, wk, wv, wg (dim); of lqkv, lz, lb, la */
    ML_MLI_WO_IN = 1,   /* input of wo (q_dim); of lout (its lin_vd first channels) */
    ML_MLI_FFN_IN = 2,  /* input of w1 and w3 (dim) */
    ML_MLI_W2_IN = 3,   /* input of w2 (hidden_dim) */
    ML_MLI_CLS_IN = 4   /* input of the classifier (dim); layer ignored */
} ml_mli_slot;

/* Reads and validates a file (a pipe or "-" is read whole): magic "MLI1"
 * (ML_E_FORMAT), version 1 (0 is ML_E_FORMAT, above 1 ML_E_UNSUPPORTED),
 * dimensions non-zero and within the .mlb limits (ML_E_SHAPE), the size
 * exactly 40 bytes plus the sums the header implies (ML_E_FORMAT), and every
 * sum finite and >= 0 (ML_E_FORMAT naming the sum and its offset).  The
 * sums are copied: the file is closed on return. */
ML_API ml_status ml_mli_open(const char *path, ml_mli **out, ml_error *err);
/* The same over a buffer (copied; the caller may free it on return). */
ML_API ml_status ml_mli_open_memory(const void *buf, size_t len, ml_mli **out, ml_error *err);
/* An empty matrix (zero sums, zero tokens) shaped for a model whose header
 * passes ml_mlb_header_validate. */
ML_API ml_status ml_mli_new(const ml_mlb_header *h, ml_mli **out, ml_error *err);
/* Accepts NULL. */
ML_API void ml_mli_close(ml_mli *m);
/* The header; borrowed from m. */
ML_API const ml_mli_info *ml_mli_get_info(const ml_mli *m);

/* Whether the file fits a model: n_layers, dim, hidden_dim and q_dim must
 * equal the header's (ML_E_MISMATCH naming the field and its offset). */
ML_API ml_status ml_mli_check_model(const ml_mli *m, const ml_mlb_header *h, ml_error *err);

/* Channels of a slot (the same for every layer). */
ML_API size_t ml_mli_slot_size(const ml_mli *m, ml_mli_slot slot);
/* The sums of one slot of one layer (layer ignored for ML_MLI_CLS_IN) into
 * out, which holds exactly n doubles (the slot's size, else ML_E_INVAL),
 * and the tokens they were summed over into *tokens (may be NULL). */
ML_API ml_status ml_mli_sums(const ml_mli *m, ml_mli_slot slot, uint32_t layer, double *out,
                             size_t n, uint64_t *tokens, ml_error *err);

/* Adds src's sums and token counts to dst.  The shapes must be equal
 * (ML_E_MISMATCH naming the field); a token count that would overflow 64
 * bits, or a sum that would become infinite, is ML_E_FORMAT and leaves dst
 * unchanged. */
ML_API ml_status ml_mli_merge(ml_mli *dst, const ml_mli *src, ml_error *err);

/* Writes the file through fn (40-byte header, then the sums). */
ML_API ml_status ml_mli_write(const ml_mli *m, ml_write_fn fn, void *ctx, ml_error *err);

/* Which slot feeds the input channels of a matrix of a model (role as in
 * ml_tensor; flags: the layer's flag byte), and how many of the slot's
 * first channels it uses (*channels, may be NULL).  -1 for arrays that take
 * no importances (vectors, the convolution) and for lout when lin_vd
 * exceeds q_dim (mli(5)).  The token embedding takes the classifier's
 * input when the classifier is shared, else none. */
ML_API int ml_mli_matrix_slot(const ml_mlb_header *h, ml_role role, size_t *channels);

/* The importances of one matrix (ml_quant_importance over its slot's
 * first cols sums) into imp (cols floats), *used = 1; or *used = 0 and imp
 * untouched when the matrix takes none (ml_mli_matrix_slot) or its slot
 * holds no tokens (a classifier never given logits).  ML_E_MISMATCH when
 * cols or layer do not fit the slot, and ml_quant_importance's errors. */
ML_API ml_status ml_mli_importance(const ml_mli *m, const ml_mlb_header *h, ml_role role,
                                   int32_t layer, size_t cols, float *imp, int *used,
                                   ml_error *err);

#ifdef __cplusplus
}
#endif
#endif
