/* mlb.h - .mlb models (mlb(5)): the header and its rules, the body's
 * layout, loading with every validation rule, tensor access, streaming
 * verification with CRC-32s, and the writer. */
#ifndef MLCORE_MLB_H
#define MLCORE_MLB_H

#include <mlcore/base.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * .mlb models: header (mlb(5))
 * ------------------------------------------------------------------------ */
#define ML_MLB_HEADER_SIZE 256
#define ML_MLB_ALIGN 64
#define ML_MLB_DIM_LIMIT 65536u     /* dim, n_layers, n_heads, n_kv_heads, hidden_dim */
#define ML_MLB_QDIM_LIMIT 65536u    /* q_dim */
#define ML_MLB_VOCAB_LIMIT 16777216u /* vocab, max_seq, sliding_window: 2^24 */
#define ML_MLB_CONV_LIMIT 256u      /* lin_conv */
#define ML_MLB_EXPERT_LIMIT 1024u   /* n_experts: llama.cpp's LLAMA_MAX_EXPERTS */
#define ML_MLB_USED_LIMIT 64u       /* n_experts_used */

/* wtype: every matrix Q8_0; Q4_0 (with q8_mask); or each matrix its own
 * type, from the type table that follows the layer flags (mlb(5)). */
enum { ML_WTYPE_Q8_0 = 1, ML_WTYPE_Q4_0 = 2, ML_WTYPE_TABLE = 3 };
enum { ML_ROPE_PLAIN = 0, ML_ROPE_LLAMA3 = 1, ML_ROPE_LINEAR = 2, ML_ROPE_YARN = 3 };
/* act 2: gpt-oss's clamped SwiGLU, x = min(g, limit), y = clamp(u, -limit,
 * limit), a = x * sigmoid(alpha * x) * (y + 1) (swiglu_alpha, swiglu_limit). */
enum { ML_ACT_SILU = 0, ML_ACT_GELU_TANH = 1, ML_ACT_SWIGLU_CLAMP = 2 };
/* moe_gating: how the router's logits become the experts' weights. */
enum {
    ML_MOE_SOFTMAX = 0,      /* softmax over all experts, top-k on the probabilities */
    ML_MOE_TOPK_SOFTMAX = 1, /* top-k on the logits, softmax over the k chosen */
    ML_MOE_SIGMOID = 2       /* sigmoid of each logit, top-k on the sigmoids */
};
/* moe_flags bits. */
enum {
    ML_MOE_NORM = 1,         /* the k weights are divided by their sum */
    ML_MOE_ROUTER_BIAS = 2,  /* each MoE layer stores rb */
    ML_MOE_EXPERT_BIAS = 4,  /* every expert stores b1 b2 b3 */
    ML_MOE_SELECT_BIAS = 8,  /* each MoE layer stores sb, added to the scores for choosing */
    ML_MOE_SHARED_GATE = 16, /* the shared expert's output is scaled by sigmoid(wsg . h) */
    ML_MOE_FLAGS_KNOWN = 31
};

/* q8_mask classes (mlb(5)). */
enum {
    ML_Q8_TOK_EMB = 1,
    ML_Q8_WCLS = 2,
    ML_Q8_WQK = 4,   /* wq, wk, wg, lqkv */
    ML_Q8_WV = 8,    /* wv, lz */
    ML_Q8_WO = 16,   /* wo, lout */
    ML_Q8_W13 = 32,  /* w1, w3 */
    ML_Q8_W2 = 64,
    ML_Q8_ALL = 127
};

/* Per-layer flag bits (layer_flags). */
enum {
    ML_LAYER_SLIDING = 1,
    ML_LAYER_LOCAL_ROPE = 2,
    ML_LAYER_NO_ROPE = 4,
    ML_LAYER_LINEAR = 8,
    ML_LAYER_MOE = 16, /* the layer's FFN is a mixture of experts */
    ML_LAYER_KNOWN = 31
};

/* The 256-byte header, field for field as mlb(5) lists them. */
typedef struct ml_mlb_header {
    char magic[4];                /* "MLB1" */
    uint32_t version;             /* 1 */
    uint32_t dim;                 /* model width, multiple of 32 */
    uint32_t n_layers;
    uint32_t n_heads;
    uint32_t n_kv_heads;          /* divides n_heads */
    uint32_t hidden_dim;          /* FFN width, multiple of 32 */
    uint32_t vocab;               /* >= 3 */
    uint32_t max_seq;             /* longest context */
    float rope_theta;             /* > 0 */
    float norm_eps;               /* >= 0 */
    uint32_t wtype;               /* ML_WTYPE_* */
    uint32_t shared_classifier;   /* non-zero: no wcls, tok_emb is used */
    uint32_t rope_type;           /* ML_ROPE_* */
    float rope_factor;
    float rope_low_freq_factor;   /* yarn: beta_fast */
    float rope_high_freq_factor;  /* yarn: beta_slow */
    uint32_t rope_orig_max_seq;
    uint32_t q8_mask;             /* ML_Q8_* classes stored as Q8_0 (Q4_0 models) */
    uint32_t qkv_bias;            /* 0/1 */
    uint32_t head_dim;            /* 0: dim / n_heads */
    uint32_t qk_norm;             /* 0/1 */
    float rope_attn_factor;       /* yarn only */
    uint32_t sliding_window;      /* 0: full attention */
    uint32_t layer_flags;         /* 0/1: a flag byte per layer follows */
    float rope_local_theta;       /* RoPE base of ML_LAYER_LOCAL_ROPE layers */
    uint32_t act;                 /* ML_ACT_* */
    uint32_t post_norms;          /* 0/1 */
    float embed_scale;            /* 0 means 1 */
    float attn_scale;             /* 0 means 1/sqrt(head_dim) */
    uint32_t scale_f16;           /* 0/1: scales stored as f16 */
    float attn_softcap;           /* 0: none */
    float final_softcap;          /* 0: none */
    uint32_t rot_dim;             /* 0: all of head_dim */
    uint32_t attn_gate;           /* 0/1: wg present */
    uint32_t lin_k_heads;         /* linear attention; 0: none */
    uint32_t lin_v_heads;
    uint32_t lin_k_dim;
    uint32_t lin_v_dim;
    uint32_t lin_conv;
    uint32_t pooling;             /* embeddings' pooling, GGUF's pooling_type: 0 unstated,
                                   * 1 mean, 2 CLS (first token), 3 last token */
    /* Mixture of experts (offsets 164-207; all 0: no experts, as before). */
    uint32_t n_experts;           /* experts per MoE layer; 0: none */
    uint32_t n_experts_used;      /* k, experts per token */
    uint32_t expert_hidden_dim;   /* F, each routed expert's FFN width */
    uint32_t moe_gating;          /* ML_MOE_SOFTMAX, _TOPK_SOFTMAX, _SIGMOID */
    uint32_t moe_flags;           /* ML_MOE_NORM | ... */
    float expert_scale;           /* factor on the k weights; 0 means 1 */
    uint32_t shared_hidden_dim;   /* width of the shared expert; 0: none */
    float swiglu_alpha;           /* act 2 only */
    float swiglu_limit;           /* act 2 only */
    uint32_t attn_sinks;          /* 0/1: attention layers store sinks (n_heads) */
    uint32_t o_bias;              /* 0/1: attention layers store bo (dim) */
} ml_mlb_header;

/* Describes one header field, for printing and tests. */
typedef enum { ML_FIELD_CHARS, ML_FIELD_U32, ML_FIELD_F32 } ml_field_type;
typedef struct ml_mlb_field {
    const char *name;    /* spec name: "dim", "rope_theta", ... */
    unsigned offset;     /* byte offset in the file header */
    ml_field_type type;
    size_t member;       /* offsetof the field in ml_mlb_header */
    const char *meaning; /* one line for people */
} ml_mlb_field;

/* The field table, in file order; *count receives its length. */
ML_API const ml_mlb_field *ml_mlb_fields(size_t *count);
/* Reads a u32 or f32 field from a header struct by table entry. */
ML_API uint32_t ml_mlb_field_u32(const ml_mlb_header *h, const ml_mlb_field *f);
ML_API float ml_mlb_field_f32(const ml_mlb_header *h, const ml_mlb_field *f);

/* Values the spec derives from the header. */
typedef struct ml_mlb_derived {
    uint32_t head_dim; /* head_dim field, or dim / n_heads */
    uint32_t q_dim;    /* head_dim * n_heads */
    uint32_t kv_dim;   /* head_dim * n_kv_heads */
    uint32_t rot_dim;  /* rot_dim field, or head_dim */
    uint32_t lin_qkv;  /* 2 * lin_k_heads * lin_k_dim + lin_v_heads * lin_v_dim */
    uint32_t lin_vd;   /* lin_v_heads * lin_v_dim */
} ml_mlb_derived;

/* Decodes 256 bytes into *h (no validation). */
ML_API void ml_mlb_header_decode(const uint8_t buf[ML_MLB_HEADER_SIZE], ml_mlb_header *h);
/* Encodes *h into 256 bytes, zeroing the reserved area. */
ML_API void ml_mlb_header_encode(const ml_mlb_header *h, uint8_t buf[ML_MLB_HEADER_SIZE]);
/* Fills *h with a minimal valid-looking header (magic, version 1, zeros). */
ML_API void ml_mlb_header_init(ml_mlb_header *h);

/* Every rule of mlb(5) that depends on the header alone.  `raw` (may be
 * NULL) is the undecoded header, used to check the reserved bytes.
 * On success fills *d (may be NULL). */
ML_API ml_status ml_mlb_header_validate(const ml_mlb_header *h, const uint8_t *raw,
                                        ml_mlb_derived *d, ml_error *err);
/* The rules on the per-layer flag bytes (n_layers of them). */
ML_API ml_status ml_mlb_layer_flags_validate(const ml_mlb_header *h, const uint8_t *flags,
                                             ml_error *err);

/* ------------------------------------------------------------------------
 * .mlb models: body layout
 * ------------------------------------------------------------------------ */
/* Tensor types.  The numbers are the type table's codes (mlb(5)).
 * F32, U8 and the spec's Q8_0 and Q4_0 are .mlb's own layouts (a Q8_0 or
 * Q4_0 matrix is two arrays, quants then scales); the others are ggml's
 * blocks, byte for byte as a GGUF file holds them, one array per matrix,
 * row after row (ml_type_block). */
typedef enum ml_type {
    ML_TYPE_F32 = 0,
    ML_TYPE_Q8_0 = 1,
    ML_TYPE_Q4_0 = 2,
    ML_TYPE_U8 = 3,
    ML_TYPE_Q4_1 = 4,
    ML_TYPE_Q5_0 = 5,
    ML_TYPE_Q5_1 = 6,
    ML_TYPE_Q2_K = 7,
    ML_TYPE_Q3_K = 8,
    ML_TYPE_Q4_K = 9,
    ML_TYPE_Q5_K = 10,
    ML_TYPE_Q6_K = 11,
    ML_TYPE_IQ4_NL = 12,
    ML_TYPE_IQ4_XS = 13,
    ML_TYPE_MXFP4 = 14,
    ML_TYPE_F16 = 15,
    ML_TYPE_BF16 = 16,
    ML_TYPE_COUNT = 17
} ml_type;

/* "F32", "Q8_0", "Q4_0", "U8", "Q4_K", ...; "?" for others. */
ML_API const char *ml_type_name(ml_type t);
/* For the block types (ggml's layouts): elements and bytes per block
 * (256 and 144 for Q4_K; 1 and 2 for F16), and the ggml type id; returns
 * 1.  Returns 0 (nothing stored) for F32, U8, Q8_0, Q4_0 and unknown
 * values.  Any pointer may be NULL. */
ML_API int ml_type_block(ml_type t, uint32_t *elems, uint32_t *bytes, uint32_t *ggml);
/* The block type holding ggml type `ggml` unchanged; 0 (F32) when none. */
ML_API ml_type ml_type_of_ggml(uint32_t ggml);

/* What a tensor is, independent of the layer it belongs to. */
typedef enum ml_role {
    ML_R_LAYER_FLAGS, ML_R_TOK_EMB,
    ML_R_ATTN_NORM, ML_R_WQ, ML_R_WK, ML_R_WV, ML_R_WO, ML_R_WG,
    ML_R_BQ, ML_R_BK, ML_R_BV, ML_R_Q_NORM, ML_R_K_NORM,
    ML_R_LQKV, ML_R_LZ, ML_R_LB, ML_R_LA, ML_R_LCONV, ML_R_DT_BIAS, ML_R_A_LOG,
    ML_R_LNORM, ML_R_LOUT,
    ML_R_FFN_NORM, ML_R_W1, ML_R_W2, ML_R_W3, ML_R_POST_ATTN_NORM, ML_R_POST_FFN_NORM,
    ML_R_FINAL_NORM, ML_R_WCLS,
    ML_R_MAT_TYPES, /* wtype 3: the type table (U8, one code per matrix) */
    /* Mixture of experts (and gpt-oss's attention additions). */
    ML_R_WR,        /* router, n_experts x dim, always F32 (no table entry) */
    ML_R_RB, ML_R_SB,                   /* router and selection biases (n_experts) */
    ML_R_EW1, ML_R_EW2, ML_R_EW3,       /* expert e's gate, down, up (t->expert = e) */
    ML_R_EB1, ML_R_EB2, ML_R_EB3,       /* its biases */
    ML_R_WS1, ML_R_WS2, ML_R_WS3,       /* the shared expert */
    ML_R_WSG,                           /* the shared expert's gate (dim) */
    ML_R_BO,                            /* wo's bias (dim) */
    ML_R_SINKS,                         /* attention sinks (n_heads) */
    ML_R_COUNT
} ml_role;

/* One array (F32, U8), quantized matrix (quants + scales) or block matrix
 * (one array of ggml blocks, rows consecutive: row r starts at
 * data + r * (cols / elems * bytes), with elems and bytes from
 * ml_type_block) of the body. */
typedef struct ml_tensor {
    char name[32];        /* "tok_emb", "blk.3.wq", "blk.3.exp.7.w1", ... */
    ml_role role;
    int32_t layer;        /* layer index, -1 for global tensors */
    int32_t expert;       /* expert index of ML_R_EW1..ML_R_EB3, else -1 */
    ml_type type;
    uint32_t ndim;        /* 1 for vectors, 2 for matrices */
    uint32_t rows;        /* vectors: the length */
    uint32_t cols;        /* vectors: 1 */
    uint32_t q8_class;    /* q8_mask class bit of a matrix, 0 otherwise */
    uint64_t offset;      /* file offset of the data (quants or blocks for matrices) */
    uint64_t nbytes;      /* bytes of that array, without padding */
    uint64_t scale_offset;/* file offset of the scales; 0 for F32, U8 and block types */
    uint64_t scale_nbytes;/* bytes of the scales as stored */
    /* Filled by ml_mlb_open only, pointing into the mapping (the scales
     * are used as stored: the runtime's kernels read f16 directly, so
     * nothing is copied or widened at load): */
    const void *data;
    const float *scales;        /* f32 scales, or NULL with scale_f16 */
    const uint16_t *scales_f16; /* f16 scales (bits), or NULL */
} ml_tensor;

/* Iterates over the body in file order without allocating.  Usage:
 *   ml_mlb_layout it; ml_mlb_layout_begin(&it, &h, flags);
 *   while (ml_mlb_layout_next(&it, &t, &err) == ML_OK && t_valid) ...
 * flags may be NULL when h->layer_flags is 0; it must hold n_layers bytes
 * otherwise.  The header must have passed ml_mlb_header_validate.
 * A wtype 3 header needs its type table (ml_mlb_layout_begin_types): the
 * table sizes the matrices. */
typedef struct ml_mlb_layout {
    const ml_mlb_header *h;
    const uint8_t *flags;
    const uint8_t *types; /* wtype 3: the type table (ml_mlb_matrix_count bytes) */
    ml_mlb_derived d;
    uint64_t pos;        /* offset of the next array */
    uint64_t types_offset; /* file offset of the type table (wtype 3) */
    uint32_t layer;      /* current layer */
    uint32_t step;       /* position inside the current section */
    uint32_t expert;     /* inside a MoE layer's experts: the current expert */
    uint32_t estep;      /* and the position inside its span */
    uint32_t section;    /* 0 layer flags, 6 type table, 1 tok_emb, 2 layers, 3 final, 4 wcls, 5 done */
    uint32_t mat;        /* matrices laid out so far: the next one's table index */
} ml_mlb_layout;

ML_API void ml_mlb_layout_begin(ml_mlb_layout *it, const ml_mlb_header *h, const uint8_t *flags);
/* The same with the type table of a wtype 3 header (ignored otherwise). */
ML_API void ml_mlb_layout_begin_types(ml_mlb_layout *it, const ml_mlb_header *h,
                                      const uint8_t *flags, const uint8_t *types);
/* Fills *t with the next tensor and returns 1, or returns 0 at the end.
 * Returns -1 and fills err when it cannot lay out the next tensor:
 * ML_E_NOMEM when an offset overflows 64 bits; with wtype 3, ML_E_FORMAT
 * for a table code that is no matrix type (3, or 17 and above; the message
 * names the matrix, the table index and the byte's file offset) or a
 * missing table, and ML_E_SHAPE for a matrix whose cols is not a multiple
 * of its block type's elements.  err->code holds the status. */
ML_API int ml_mlb_layout_next(ml_mlb_layout *it, ml_tensor *t, ml_error *err);
/* Total bytes the body implies (header included, last padding excluded),
 * and the number of tensors.  Both may be NULL.  A wtype 3 header needs
 * the _types variant (ML_E_INVAL here); its errors are the iterator's. */
ML_API ml_status ml_mlb_layout_size(const ml_mlb_header *h, const uint8_t *flags,
                                    uint64_t *end, size_t *n_tensors, ml_error *err);
ML_API ml_status ml_mlb_layout_size_types(const ml_mlb_header *h, const uint8_t *flags,
                                          const uint8_t *types, uint64_t *end,
                                          size_t *n_tensors, ml_error *err);
/* Matrices the header and flags imply, one type table entry each:
 * tok_emb, per layer wq wk wv wo [wg] or lqkv lz lb la lout, then w1 w2
 * w3, and wcls unless shared (lconv is F32 and not one).  0 for an invalid
 * header. */
ML_API uint32_t ml_mlb_matrix_count(const ml_mlb_header *h, const uint8_t *flags);
/* 1 if layer l (flags f) has a mixture of experts as its FFN: every layer
 * when n_experts > 0 without layer flags, else the layers with bit 0x10. */
ML_API int ml_mlb_layer_is_moe(const ml_mlb_header *h, uint8_t f);
/* File offset of the type table: right after the layer flags' array, or
 * 256 without layer flags. */
ML_API uint64_t ml_mlb_types_offset(const ml_mlb_header *h);
/* 1 if code may stand in a type table: 0-2 and 4-16. */
ML_API int ml_type_is_matrix(uint32_t code);
/* Bits per weight of a matrix type as stored (Q4_K 4.5; Q8_0 8.5 with f16
 * scales, 9 with f32). */
ML_API double ml_type_bits(ml_type t, int scale_f16);

/* ------------------------------------------------------------------------
 * .mlb models: loading
 * ------------------------------------------------------------------------ */
typedef struct ml_mlb ml_mlb;

/* Maps the file read-only and applies every rule of the validation table
 * (mlb(5)), including the scan for -128 in Q8_0 quants.  Nothing is
 * copied: tensors point into the mapping.  A path of "-", or a pipe, is
 * read whole into memory (a model arriving through a pipe is better
 * checked with ml_mlb_verify_stream, which holds a fixed buffer). */
ML_API ml_status ml_mlb_open(const char *path, ml_mlb **out, ml_error *err);
/* ml_mlb_open with flags: 0 is ml_mlb_open; ML_MLB_READ then copies a
 * regular file's bytes, once checked on the mapping (so a file that is
 * not a model costs no copy and fails as ml_mlb_open does), into memory
 * 2 MiB aligned and offered to the kernel for huge pages, and unmaps it.
 * Decode streams every weight once a token, and from such pages it can
 * run faster than from the file's 4 KiB page-cache pages (how much
 * depends on the machine: docs/speed.md); the price is a copy at load and
 * pages no other process shares (ml-run(1)'s --no-mmap).  Any other bit
 * is ML_E_INVAL. */
#define ML_MLB_READ 1u
ML_API ml_status ml_mlb_open_ex(const char *path, unsigned flags, ml_mlb **out, ml_error *err);
/* The same over a buffer the caller keeps alive until ml_mlb_close. */
ML_API ml_status ml_mlb_open_memory(const void *buf, size_t len, ml_mlb **out, ml_error *err);
ML_API void ml_mlb_close(ml_mlb *m);

ML_API const ml_mlb_header *ml_mlb_get_header(const ml_mlb *m);
ML_API const ml_mlb_derived *ml_mlb_get_derived(const ml_mlb *m);
ML_API uint64_t ml_mlb_file_size(const ml_mlb *m);
ML_API const uint8_t *ml_mlb_file_data(const ml_mlb *m);
/* Flags of layer l (0 when the file has no layer flags). */
ML_API uint8_t ml_mlb_layer_flag(const ml_mlb *m, uint32_t l);
/* The type table (ml_mlb_matrix_count bytes) of a wtype 3 file, else NULL. */
ML_API const uint8_t *ml_mlb_types(const ml_mlb *m);
ML_API size_t ml_mlb_n_tensors(const ml_mlb *m);
ML_API const ml_tensor *ml_mlb_tensor(const ml_mlb *m, size_t i);
/* By name ("blk.0.wq"); NULL if absent. */
ML_API const ml_tensor *ml_mlb_find(const ml_mlb *m, const char *name);
/* By role and layer (-1 for global tensors); NULL if absent.  For the
 * experts' roles this is expert 0's tensor. */
ML_API const ml_tensor *ml_mlb_get(const ml_mlb *m, ml_role role, int32_t layer);
/* Expert `expert`'s tensor of role ML_R_EW1..ML_R_EB3 in layer `layer`, by
 * index arithmetic from the layer's first expert (no search); NULL if
 * absent. */
ML_API const ml_tensor *ml_mlb_get_expert(const ml_mlb *m, ml_role role, int32_t layer,
                                          uint32_t expert);

/* What a mixture-of-experts model reads (mlb-info, the bandwidth bound). */
typedef struct ml_mlb_moe_sizes {
    uint32_t moe_layers;   /* layers whose FFN is a mixture of experts */
    uint64_t expert_bytes; /* bytes of one expert's span in the first MoE layer */
    uint64_t active_bytes; /* bytes a decode token reads: every array but the
                            * experts, plus n_experts_used spans per MoE layer */
} ml_mlb_moe_sizes;
ML_API void ml_mlb_moe_sizes_of(const ml_mlb *m, ml_mlb_moe_sizes *out);

/* ------------------------------------------------------------------------
 * .mlb models: sizes for people (mlb-info) and the runtime
 * ------------------------------------------------------------------------ */
/* Elements of a tensor (rows * cols). */
ML_API uint64_t ml_tensor_elements(const ml_tensor *t);
/* Scale i (i < elements / 32) of a loaded Q8_0 or Q4_0 matrix as f32,
 * whether the file stores f32 or f16 scales (widened exactly). */
ML_API float ml_tensor_scale(const ml_tensor *t, uint64_t i);
/* Rows r0 .. r0 + n - 1 of a loaded tensor as floats: n * cols values
 * into out (F32, Q8_0 and Q4_0 by ml_dequantize_row_q8_0/_q4_0, block
 * types by ggml's dequantizers, ml_gguf_dequantize_raw).  A type with no
 * dequantizer in this build (MXFP4 for now) is ML_E_UNSUPPORTED. */
ML_API ml_status ml_tensor_dequantize(const ml_tensor *t, uint64_t r0, uint64_t n, float *out,
                                      ml_error *err);
/* The same without a status: rows that cannot be dequantized are NaN. */
ML_API void ml_tensor_dequantize_rows(const ml_tensor *t, uint64_t r0, uint64_t n, float *out);
/* Bytes of one row of a matrix as stored: cols * 4 (F32), cols / elems *
 * bytes (block types), the quants' cols or cols / 2 (Q8_0, Q4_0). */
ML_API uint64_t ml_tensor_row_bytes(const ml_tensor *t);

/* Bytes of cache state one layer of the given flags needs for ctx positions:
 * K and V (f32) for attention layers, min(ctx, sliding_window) positions
 * for sliding-window layers, a fixed recurrent and convolution state (f32)
 * for linear-attention layers.  The runtime allocates exactly this. */
ML_API uint64_t ml_mlb_layer_state_bytes(const ml_mlb_header *h, uint8_t flags, uint64_t ctx);

/* ------------------------------------------------------------------------
 * .mlb models: sequential verification (pipes)
 * ------------------------------------------------------------------------ */
/* Source for streaming readers: reads up to n bytes, returns the count
 * (0 at end of input) or -1 with err filled. */
typedef long (*ml_read_fn)(void *ctx, void *buf, size_t n, ml_error *err);

typedef struct ml_verify_report {
    /* Called once per tensor after its bytes were read and checked (may be
     * NULL).  crc is the CRC-32 of the tensor's arrays as stored, without
     * padding (quants, then scales). */
    void (*on_tensor)(void *ctx, const ml_tensor *t, uint32_t crc);
    /* Called after each chunk with the bytes read so far (may be NULL). */
    void (*on_progress)(void *ctx, uint64_t bytes);
    void *ctx;
    /* Filled on return: */
    ml_mlb_header header;
    uint64_t bytes;       /* bytes read */
    uint32_t file_crc;    /* CRC-32 of every byte read */
    size_t n_tensors;
} ml_verify_report;

/* Reads a whole .mlb once, in order, never seeking and holding a fixed
 * buffer (not a tensor) in memory.  Applies the loader's rules plus the
 * deep checks of mlb-verify(1): non-finite F32 values and scales, non-zero
 * padding, bytes after the last array. */
ML_API ml_status ml_mlb_verify_stream(ml_read_fn rd, void *rctx, ml_verify_report *rep,
                                      ml_error *err);
/* An ml_read_fn over a file descriptor (ctx points to an int). */
ML_API long ml_fd_reader(void *ctx, void *buf, size_t n, ml_error *err);

/* CRC-32 (zlib's polynomial), continuing from crc (start with 0). */
ML_API uint32_t ml_crc32(uint32_t crc, const void *buf, size_t n);

/* ------------------------------------------------------------------------
 * .mlb models: writing
 * ------------------------------------------------------------------------ */
typedef struct ml_mlb_writer ml_mlb_writer;

/* Validates the header (and flags), writes it and the layer flags.  The
 * tensors must then be put in file order; ml_mlb_writer_expect tells which. */
ML_API ml_status ml_mlb_writer_new(const ml_mlb_header *h, const uint8_t *flags, ml_write_fn fn,
                                   void *ctx, ml_mlb_writer **out, ml_error *err);
/* The same with the type table of a wtype 3 header (ml_mlb_matrix_count
 * bytes), which it validates and writes after the flags; ignored for
 * wtype 1 and 2.  ml_mlb_writer_new refuses wtype 3 (ML_E_INVAL). */
ML_API ml_status ml_mlb_writer_new_types(const ml_mlb_header *h, const uint8_t *flags,
                                         const uint8_t *types, ml_write_fn fn, void *ctx,
                                         ml_mlb_writer **out, ml_error *err);
/* The tensor the writer expects next, or NULL when every tensor is written. */
ML_API const ml_tensor *ml_mlb_writer_expect(const ml_mlb_writer *w);
/* Writes the next tensor.  F32: data holds rows*cols floats, scales NULL.
 * Block types: data holds the blocks, scales NULL.
 * Quantized: data holds the quants, scales the scales in the file's
 * encoding (f32, or f16 bits when scale_f16).  Byte counts must match. */
ML_API ml_status ml_mlb_writer_put(ml_mlb_writer *w, const void *data, size_t nbytes,
                                   const void *scales, size_t scale_nbytes, ml_error *err);
/* Checks every tensor was written, frees w in every case. */
ML_API ml_status ml_mlb_writer_finish(ml_mlb_writer *w, ml_error *err);
ML_API void ml_mlb_writer_free(ml_mlb_writer *w);

/* Writes a complete model with deterministic pseudo-random weights from
 * seed: Gaussian-like F32 vectors around 1 for norms, small values for
 * biases, random quants in [-127, 127] or nibbles with small positive
 * scales.  Any valid header works; for tests and benchmarks. */
ML_API ml_status ml_mlb_write_random(const ml_mlb_header *h, const uint8_t *flags, uint64_t seed,
                                     ml_write_fn fn, void *ctx, ml_error *err);
/* The same for a wtype 3 header with its type table: block matrices get
 * random bytes below 0x40, so every f16 or bf16 field in them is finite
 * and they dequantize to finite numbers. */
ML_API ml_status ml_mlb_write_random_types(const ml_mlb_header *h, const uint8_t *flags,
                                           const uint8_t *types, uint64_t seed, ml_write_fn fn,
                                           void *ctx, ml_error *err);

#ifdef __cplusplus
}
#endif

#endif /* MLCORE_MLB_H */
