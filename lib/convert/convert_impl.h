/* convert_impl.h - private: the GGUF -> .mlb plan as convert.c,
 * convert_header.c and convert_bind.c build it and convert_write.c executes
 * it, and the Llama 3 RoPE recovery (convert_rope.c), which the tests call
 * directly. */
#ifndef ML_CONVERT_IMPL_H
#define ML_CONVERT_IMPL_H

#include "base/internal.h"

#include <mlcore/buf.h>
#include <mlcore/convert.h>

/* One .mlb array and how to fill it.  Source indices are rows for matrices
 * and elements for vectors ("units"). */
typedef struct ml__conv_item {
    ml_convert_item pub;  /* first: the public view is a pointer to it */
    uint64_t row0;        /* first source unit of a fused tensor */
    uint32_t hd;          /* head size (RoPE permutation, query/gate split) */
    uint32_t rot;         /* rotated dimensions per head (RoPE permutation) */
    uint32_t qgate;       /* 0; 1: query rows of attn_q; 2: its gate rows */
    uint32_t vk, vr, vhs; /* value-head reorder: key heads, value heads per
                             key head, units per head */
    uint64_t vstart;      /* first unit of the value region (item-relative) */
    float *imp;           /* importances for the Q4_0 fit, or NULL; owned */
} ml__conv_item;

struct ml_convert_plan {
    const ml_gguf *g;
    ml_mlb_header h;
    uint8_t *flags; /* n_layers bytes when h.layer_flags */
    uint8_t *types; /* wtype 3: the type table (ml_mlb_matrix_count bytes), else NULL */
    char arch[32];
    char arch_desc[192];
    int q4_rule;
    unsigned threads;
    ml_convert_progress_fn progress;
    void *progress_ctx;
    ml_convert_tensor_fn on_tensor;
    void *tensor_ctx;
    ml__conv_item *items;
    size_t n_items, cap_items;
    char **notes;
    size_t n_notes, cap_notes;
    uint64_t size;
};

/* ---- building a plan (convert.c orders the steps; convert_header.c and
 * convert_bind.c take them with the helpers of convert_build.c) ---- */

/* The architectures converted (general.architecture). */
enum {
    ML__ARCH_LLAMA,
    ML__ARCH_QWEN2,
    ML__ARCH_QWEN3,
    ML__ARCH_GEMMA,
    ML__ARCH_GEMMA2,
    ML__ARCH_GEMMA3,
    ML__ARCH_SMOLLM3,
    ML__ARCH_QWEN35,
    ML__ARCH_QWEN3MOE,
    ML__ARCH_QWEN35MOE,
    ML__ARCH_GPT_OSS,
    ML__ARCH_COUNT
};

typedef struct ml__arch_info {
    const char *name;
    int neox;     /* q/k rows in rotate-half order: permute to pairs */
    int gemma;    /* GELU-tanh, sqrt(dim) embedding scale, post norms from 2 on */
    int qk_norm;  /* per-head q/k RMS norms */
    int rot_full; /* llama.cpp requires rope.dimension_count == head size */
    const char *desc;
} ml__arch_info;

/* State while a plan is built. */
typedef struct ml__conv_build {
    const ml_gguf *g;
    ml_convert_plan *p;
    ml_error *err;
    int arch;
    const ml__arch_info *ai;
    char key[128]; /* the last key built by ml__conv_key() */
    uint8_t *used; /* per GGUF tensor */
    size_t n_tensors;
    uint32_t n_layer_all; /* block_count, MTP blocks included */
    uint32_t n_layers;
    ml_mlb_derived d; /* of the header being built */
    uint8_t *flags;   /* always n_layers bytes while building */
    uint32_t q_rows;  /* rows of attn_q (2 q_dim for Qwen3.5) */
    uint32_t ffn_len; /* feed_forward_length (0 when absent): a MoE model's F fallback */
    const ml_gguf_tensor *rope_freqs;
    uint64_t elems[7][2]; /* per q8_mask class: elements from 4- and
                             8-bit sources */
    uint32_t n_mat, n_mat_q, n_mat_float; /* matrices; from Q8_0/Q4_0; from
                                             F32/F16/BF16 sources */
} ml__conv_build;

/* ---- convert_build.c ---- */

/* "{arch}.suffix" in b->key (overwritten by the next call). */
const char *ml__conv_key(ml__conv_build *b, const char *suffix);
int ml__conv_is_linear(const ml__conv_build *b, uint32_t l);
/* Appends a note for people to the plan. */
ml_status ml__conv_note(ml__conv_build *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* File offset of a key's value, -1 when absent. */
int64_t ml__conv_kv_offset(ml__conv_build *b, const char *key);
/* ML_E_UNSUPPORTED naming a (full) key: a value .mlb cannot hold. */
ml_status ml__conv_refuse(ml__conv_build *b, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* ML_E_FORMAT naming "{arch}.suffix": a value that is wrong. */
ml_status ml__conv_bad_key(ml__conv_build *b, const char *suffix, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A tensor by formatted name, marked used; NULL when absent. */
const ml_gguf_tensor *ml__conv_tensor(ml__conv_build *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* ML_E_FORMAT: a required tensor is missing. */
ml_status ml__conv_missing(ml__conv_build *b, const char *name);
/* ML_E_SHAPE unless t holds `rows` rows of `cols` (rows 0: a vector). */
ml_status ml__conv_shape(ml__conv_build *b, const ml_gguf_tensor *t, uint64_t cols, uint64_t rows,
                         const char *what);
/* ML_E_UNSUPPORTED for a tensor type this build cannot read. */
ml_status ml__conv_check_type(ml__conv_build *b, const ml_gguf_tensor *t);

/* The header and layer flags (into b->p->h and b->flags; convert_header.c). */
ml_status ml__conv_read_header(ml__conv_build *b);
/* The body's arrays, bound in file order (b->p->items; convert_bind.c). */
ml_status ml__conv_bind_all(ml__conv_build *b);

/* ---- convert_moe.c: mixtures of experts ---- */

/* Qwen3.5 and its MoE form: the same attention, linear and full. */
static inline int ml__conv_qwen35_family(int arch)
{
    return arch == ML__ARCH_QWEN35 || arch == ML__ARCH_QWEN35MOE;
}

/* Whether the architecture's FFNs are mixtures of experts. */
int ml__conv_is_moe_arch(int arch);
/* The MoE header fields from the expert keys, with the architecture's
 * fixed gating (qwen3moe, qwen35moe, gpt-oss). */
ml_status ml__conv_read_moe(ml__conv_build *b);
/* Binds a MoE layer's router, one expert's matrix (a slab of the GGUF's
 * stacked tensor, a range of its rows) or the shared expert's arrays. */
ml_status ml__conv_bind_moe(ml__conv_build *b, ml__conv_item *it, const ml_tensor *t);

/* The source unit that unit u (row or element) of the item comes from,
 * relative to the start of the source tensor. */
uint64_t ml__conv_src_unit(const ml__conv_item *it, uint64_t u);
/* The source block that block b of a row comes from (column reorder). */
uint64_t ml__conv_src_block(const ml__conv_item *it, uint64_t b);

/* Llama 3 RoPE scaling recovered from a rope_freqs tensor (the per-pair
 * divisors r_i llama.cpp applies).  Fills factor, low, high and orig such
 * that the spec's llama3 formula reproduces every r_i within a relative
 * 1e-5, or returns ML_E_UNSUPPORTED naming `name`.  orig_hint is the
 * original context length from the metadata (0 when absent). */
typedef struct ml__llama3_rope {
    float factor, low, high;
    uint32_t orig;
    double max_rel_err; /* the largest relative difference found */
    uint32_t n_mid;     /* pairs in the smooth band */
} ml__llama3_rope;
ml_status ml__llama3_recover(const float *r, uint32_t n_pairs, uint32_t head_dim, float theta,
                             uint32_t orig_hint, const char *name, ml__llama3_rope *out,
                             ml_error *err);
/* The divisor the spec's llama3 formula gives pair i (inv_i / scaled inv_i). */
double ml__llama3_divisor(const ml__llama3_rope *p, uint32_t i, uint32_t head_dim, float theta);

/* ---- convert_chat.c: the chat section of a converted .mlt ---- */

typedef struct ml__conv_chat {
    ml_mlt_chat chat;                        /* points into the arrays below */
    uint32_t eog[ML_MLT_MAX_EOG];
    uint32_t n_eog;
    ml_mlt_template tmpl[ML_MLT_MAX_TEMPLATES]; /* texts point into the GGUF */
    uint32_t n_templates;
    int needed;                              /* it says more than the EOS id */
} ml__conv_chat;

/* The end-of-generation ids and chat templates of g's vocabulary (rules
 * in convert_chat.c); eos is the .mlt's EOS id. */
ml_status ml__conv_chat_read(const ml_gguf *g, ml_token eos, ml__conv_chat *out, ml_error *err);

#endif
