/* check_convert_util.h - helpers of the converter tests: a small GGUF
 * writer (keys, tensors given as floats and encoded to F32, F16, BF16,
 * Q8_0, Q4_0, Q5_0 or IQ4_NL the way ggml's reference quantizers do),
 * tiny models of every supported architecture with seeded random weights,
 * a conversion into memory, and the converter's tensor mapping written out
 * again from the documentation (gguf2mlb(1)), independently of lib/convert*.c,
 * so tests can predict where every .mlb row comes from. */
#ifndef ML_CHECK_CONVERT_UTIL_H
#define ML_CHECK_CONVERT_UTIL_H

#include "mlcore.h"
#include "testutil.h"

#include <mlcore/convert.h>

/* ---- GGUF writer ---- */
typedef struct cg_tensor {
    char name[64];
    uint32_t type, n_dims;
    uint64_t dims[4];
    uint8_t *data;
    size_t nbytes;
} cg_tensor;

typedef struct cg_kv {
    char key[96];
    tu_mem val; /* type, then the value, serialized */
} cg_kv;

typedef struct cg {
    cg_kv *kv; /* in file order; setting a key again replaces it */
    size_t n_kv, cap_kv;
    cg_tensor *t;
    size_t n_t, cap_t;
    uint32_t alignment; /* 32 unless set */
} cg;

void cg_init(cg *g);
void cg_free(cg *g);
/* Removes a key (fails the test when absent). */
void cg_drop(cg *g, const char *key);
void cg_u32(cg *g, const char *key, uint32_t v);
void cg_i32(cg *g, const char *key, int32_t v);
void cg_f32(cg *g, const char *key, float v);
void cg_bool(cg *g, const char *key, int v);
void cg_str(cg *g, const char *key, const char *s);
void cg_arr_u32(cg *g, const char *key, const uint32_t *v, size_t n);
void cg_arr_bool(cg *g, const char *key, const uint8_t *v, size_t n);
void cg_arr_str(cg *g, const char *key, const char *const *v, size_t n);
/* A tensor of `rows` rows of `cols` values (rows 0: a vector of cols),
 * encoded to `type`; returns it so a test can patch its bytes. */
cg_tensor *cg_tensor_f(cg *g, const char *name, uint32_t type, uint64_t cols, uint64_t rows,
                       const float *x);
/* Raw bytes with the given dims (n_dims 1..4). */
cg_tensor *cg_tensor_raw(cg *g, const char *name, uint32_t type, uint32_t n_dims,
                         const uint64_t *dims, const void *data, size_t nbytes);
cg_tensor *cg_find(cg *g, const char *name);
void cg_remove(cg *g, const char *name);
/* The file; free with free(). */
uint8_t *cg_finish(cg *g, size_t *len);

/* Encoders of one row (n a multiple of the block size). */
size_t cg_row_bytes(uint32_t type, uint64_t n);
void cg_encode(uint32_t type, const float *x, uint64_t n, uint8_t *out);

/* ---- models ---- */
typedef struct tc_spec {
    const char *arch;
    uint32_t dim, n_layers, n_heads, n_kv_heads, hidden, vocab, ctx;
    uint32_t head_dim; /* 0: dim / n_heads; written as key_length when set */
    uint32_t mtype;    /* GGUF type of the matrices */
    uint32_t emb_type; /* of token_embd (0: mtype) */
    uint32_t out_type; /* of output.weight (0: mtype) */
    int tied;          /* no output.weight */
    int biases;        /* attn_q/k/v.bias */
    int fused_qkv;     /* attn_qkv instead of separate q/k/v */
    uint32_t rot;      /* rope.dimension_count (0: not written) */
    /* qwen35 */
    uint32_t lin_k, lin_v, lin_dk, lin_dv, conv, interval, nextn;
    uint64_t seed;
} tc_spec;

/* A spec with the architecture's usual features on small dimensions. */
void tc_default(tc_spec *s, const char *arch);
/* Writes the metadata and every tensor of the spec into g (initialised
 * here).  Vectors (norms) are around 1, matrices small and random. */
void tc_build(cg *g, const tc_spec *s);

/* ---- conversion ---- */
typedef struct tc_conv {
    uint8_t *gguf;
    size_t gguf_len;
    ml_gguf *g;
    ml_convert_plan *p;
    tu_mem out;
    ml_mlb *m;
    ml_convert_stats st;
} tc_conv;
/* Opens the GGUF, plans with opts (NULL: defaults), writes into memory and
 * opens the result; fails the test on any error.  Takes the bytes of g. */
void tc_convert(tc_conv *c, cg *g, const ml_convert_opts *o);
/* The same from a GGUF file. */
void tc_convert_file(tc_conv *c, const char *path, const ml_convert_opts *o);
/* Opens and plans only, returning the status (err filled). */
ml_status tc_plan(tc_conv *c, cg *g, const ml_convert_opts *o, ml_error *err);
void tc_conv_free(tc_conv *c);

/* ---- the mapping, written out from gguf2mlb(1) ---- */
typedef struct tc_map {
    const char *src; /* GGUF tensor name */
    uint64_t row0;   /* first source row (fused tensors) */
    int rope;        /* RoPE pair permutation, head size hd, rotating rot */
    uint32_t hd, rot;
    int qgate;            /* 1 query, 2 gate (Qwen3.5) */
    uint32_t vk, vr, vhs; /* value-head regrouping (rows), region start vstart */
    uint64_t vstart;
    int vcols; /* the same on columns */
    int a_log;
    int zeros;
} tc_map;
/* How .mlb array t comes from the GGUF, by the documented rules; 0 when
 * the test does not know the array. */
int tc_mapping(const ml_gguf *g, const ml_mlb_header *h, const ml_tensor *t, tc_map *m, char *name,
               size_t name_len);
/* The source row (unit) of destination row u. */
uint64_t tc_src_unit(const tc_map *m, uint64_t u);

/* Dequantized .mlb tensor (rows * cols floats, malloc'd). */
float *tc_mlb_floats(const ml_tensor *t);
/* The GGUF tensor's values as the .mlb array should hold them before any
 * quantization (rows * cols floats, malloc'd). */
float *tc_expected(const ml_gguf *g, const ml_tensor *t, const tc_map *m);

/* ---- checks ---- */
/* "name=value ..." against the header's fields (u32 or f32). */
void tc_expect_fields(const ml_mlb_header *h, const char *spec);
/* Bytes of the converted file at a file offset. */
const uint8_t *tc_file_at(const tc_conv *c, uint64_t off);
/* Every array of the converted model against its GGUF source: lossless
 * arrays hold exactly the GGUF's values, requantized ones exactly what the
 * spec's quantizer (no importances) makes of them, A_log within 1e-6.
 * Returns the number of lossless arrays. */
size_t tc_check_arrays(const tc_conv *c);

#endif
