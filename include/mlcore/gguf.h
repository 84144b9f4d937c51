/* mlcore/gguf.h - reading GGUF files (llama.cpp's format): metadata, tensor
 * infos, and dequantization to f32 of the tensor types real models use.
 * Included by mlcore.h.
 *
 * A GGUF file is a header (magic "GGUF", version, tensor and key counts),
 * key/value metadata, tensor infos, padding to the alignment, and the tensor
 * data.  ml_gguf_open validates all of it before returning and then hands
 * out pointers into the read-only mapping: nothing is copied but the keys
 * (to NUL-terminate them) and the tensor names.
 *
 * Rules applied at open, in file order (ML_E_FORMAT unless noted):
 *   - magic "GGUF" (with a hint when it is an .mlb, .mlt or .mli file, a
 *     pre-GGUF ggml/GGMF/GGJT file, a Git LFS pointer or an HTML page);
 *   - version 1, 2 or 3 (version 1: counts, lengths and dims are u32).  0
 *     is ML_E_FORMAT; a version whose low 16 bits are zero is a big-endian
 *     file, and above 3 a newer format: both ML_E_UNSUPPORTED;
 *   - tensor_count and kv_count: their smallest encodings (a one-byte name
 *     or key, one dimension or a one-byte value) must fit in the bytes that
 *     follow, so nothing is allocated from a count the file cannot hold;
 *     beyond ML_GGUF_MAX_KV keys or ML_GGUF_MAX_TENSORS tensors:
 *     ML_E_UNSUPPORTED;
 *   - every length and count is checked against the bytes left before it
 *     is used; arrays of strings or arrays are walked element by element;
 *   - keys: non-empty, no NUL byte, unique;
 *   - value types 0..12, array element types likewise; arrays nested more
 *     than ML_GGUF_MAX_DEPTH deep are ML_E_UNSUPPORTED.  Values are not
 *     judged here: a bool byte of 2 opens, and ml_gguf_value_bool refuses it;
 *   - general.alignment: any integer type (ggml insists on u32) holding a
 *     power of two from 1 to 2^31; default ML_GGUF_DEFAULT_ALIGNMENT;
 *   - tensor names: 1..ML_GGUF_NAME_MAX bytes, no NUL byte, unique;
 *   - n_dims 1..4 and every dim >= 1 (ggml allows 0; a tensor without
 *     elements carries no weights, and we refuse it): ML_E_SHAPE, as is an
 *     element count above INT64_MAX or a byte size past 2^64;
 *   - tensor type: a ggml type of known block size.  Removed ids (4, 5,
 *     31-33, 36-38) and ids above ML_GGML_TYPE_COUNT are ML_E_UNSUPPORTED
 *     (without a size the layout is unknown).  Known types this build
 *     cannot dequantize (IQ2_XXS, ...) are listed normally, and
 *     ml_gguf_dequantize refuses them with ML_E_UNSUPPORTED;
 *   - dims[0] a whole number of blocks (ML_E_SHAPE);
 *   - data: the data section starts at the end of the tensor infos rounded
 *     up to the alignment (not rounded when there are no tensors, as in
 *     ggml); every offset is a multiple of the alignment, every tensor lies
 *     inside the file and no two tensors share a byte.  Unlike ggml we do
 *     not require the tensors to be packed in info order or the padding to
 *     be zero, and bytes after the last tensor are allowed.
 *
 * Errors: err->field is the header field ("magic", "version",
 * "tensor_count", "kv_count"), the key, or the tensor name; "kv[i]" or
 * "tensor[i]" when the key or name itself is bad.  err->offset is the file
 * offset of the offending field: of a length or count when what it counts
 * does not fit (a string's length, an array of fixed-size elements'
 * count), of the info's offset field for data placement errors.
 *
 * Tensor data pointers are inside the mapping and only as aligned as the
 * file says (the alignment may be 1): read them with memcpy or byte loads.
 * Metadata values are little-endian and unaligned likewise.  An open file
 * is read-only: any number of threads may use it at once.
 */
#ifndef MLCORE_GGUF_H
#define MLCORE_GGUF_H

#include <mlcore/base.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ML_GGUF_DEFAULT_ALIGNMENT 32
#define ML_GGUF_MAX_DIMS 4
#define ML_GGUF_NAME_MAX 63          /* bytes of a tensor name (ggml: 64 with the NUL) */
#define ML_GGUF_MAX_DEPTH 8          /* array nesting levels walked */
#define ML_GGUF_MAX_KV (1u << 20)    /* metadata keys; real models have < 100 */
#define ML_GGUF_MAX_TENSORS (1u << 20) /* tensors; real models have < 10,000 */

/* ------------------------------------------------------------------------
 * Types
 * ------------------------------------------------------------------------ */

/* Metadata value types; the numbers are the file's. */
typedef enum ml_gguf_vtype {
    ML_GGUF_U8 = 0,
    ML_GGUF_I8 = 1,
    ML_GGUF_U16 = 2,
    ML_GGUF_I16 = 3,
    ML_GGUF_U32 = 4,
    ML_GGUF_I32 = 5,
    ML_GGUF_F32 = 6,
    ML_GGUF_BOOL = 7,   /* one byte */
    ML_GGUF_STRING = 8, /* length, then bytes (no NUL) */
    ML_GGUF_ARRAY = 9,  /* element type, count, elements */
    ML_GGUF_U64 = 10,
    ML_GGUF_I64 = 11,
    ML_GGUF_F64 = 12,
    ML_GGUF_VTYPE_COUNT = 13
} ml_gguf_vtype;

/* "u8", "i8", ..., "f64", "string", "array"; "?" for others.  Never NULL. */
ML_API const char *ml_gguf_vtype_name(uint32_t vtype);

/* ggml tensor type ids (ggml.h's ggml_type); the numbers are the file's. */
enum {
    ML_GGML_F32 = 0,
    ML_GGML_F16 = 1,
    ML_GGML_Q4_0 = 2,
    ML_GGML_Q4_1 = 3,
    ML_GGML_Q5_0 = 6,
    ML_GGML_Q5_1 = 7,
    ML_GGML_Q8_0 = 8,
    ML_GGML_Q8_1 = 9,
    ML_GGML_Q2_K = 10,
    ML_GGML_Q3_K = 11,
    ML_GGML_Q4_K = 12,
    ML_GGML_Q5_K = 13,
    ML_GGML_Q6_K = 14,
    ML_GGML_Q8_K = 15,
    ML_GGML_IQ2_XXS = 16,
    ML_GGML_IQ2_XS = 17,
    ML_GGML_IQ3_XXS = 18,
    ML_GGML_IQ1_S = 19,
    ML_GGML_IQ4_NL = 20,
    ML_GGML_IQ3_S = 21,
    ML_GGML_IQ2_S = 22,
    ML_GGML_IQ4_XS = 23,
    ML_GGML_I8 = 24,
    ML_GGML_I16 = 25,
    ML_GGML_I32 = 26,
    ML_GGML_I64 = 27,
    ML_GGML_F64 = 28,
    ML_GGML_IQ1_M = 29,
    ML_GGML_BF16 = 30,
    ML_GGML_TQ1_0 = 34,
    ML_GGML_TQ2_0 = 35,
    ML_GGML_MXFP4 = 39,
    ML_GGML_NVFP4 = 40,
    ML_GGML_Q1_0 = 41,
    ML_GGML_Q2_0 = 42,
    ML_GGML_TYPE_COUNT = 43
};

/* "Q4_K", "BF16", ... (gguf-py's spelling), also for the removed ids
 * ("Q4_2", "Q4_0_4_4", ...); NULL for ids above the table. */
ML_API const char *ml_gguf_type_name(uint32_t type);
/* Elements and bytes per block (1 and 4 for F32, 256 and 144 for Q4_K).
 * Returns 0 (and stores nothing) for removed or unknown ids, else 1.
 * Either pointer may be NULL. */
ML_API int ml_gguf_type_size(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes);
/* 1 if ml_gguf_dequantize handles the type: F32, F16, BF16, Q4_0, Q4_1,
 * Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4. */
ML_API int ml_gguf_type_supported(uint32_t type);

/* ------------------------------------------------------------------------
 * Opening
 * ------------------------------------------------------------------------ */
typedef struct ml_gguf ml_gguf;

/* Maps the file read-only and validates it (rules above).  A path of "-",
 * or a pipe, is read whole into memory.  The first part of a split model
 * opens the whole model (below). */
ML_API ml_status ml_gguf_open(const char *path, ml_gguf **out, ml_error *err);
/* The same over a buffer the caller keeps alive, unchanged, until
 * ml_gguf_close.  A part of a split model of two or more parts is
 * ML_E_UNSUPPORTED here: its other parts cannot be found. */
ML_API ml_status ml_gguf_open_memory(const void *buf, size_t len, ml_gguf **out, ml_error *err);
/* A split model from all its parts, named in order (part 1 first), for
 * parts whose names do not follow gguf-split's pattern.  n == 1 is
 * ml_gguf_open.  More than one path for a file that is not split, or a
 * number of paths other than split.count: ML_E_INVAL. */
ML_API ml_status ml_gguf_open_parts(const char *const *paths, size_t n, ml_gguf **out,
                                    ml_error *err);
/* Accepts NULL. */
ML_API void ml_gguf_close(ml_gguf *g);

/* Of the first part (the only file of a model that is not split): */
ML_API uint32_t ml_gguf_version(const ml_gguf *g);
/* general.alignment, or 32. */
ML_API uint32_t ml_gguf_alignment(const ml_gguf *g);
/* File offset of the data section (tensor offsets are relative to it). */
ML_API uint64_t ml_gguf_data_offset(const ml_gguf *g);
ML_API uint64_t ml_gguf_file_size(const ml_gguf *g);
ML_API const uint8_t *ml_gguf_file_data(const ml_gguf *g);

/* ------------------------------------------------------------------------
 * Split models (llama.cpp's gguf-split)
 *
 * gguf-split cuts a model into NAME-00001-of-0000N.gguf ... -0000N-of-
 * 0000N.gguf, each a whole GGUF file.  The first holds all the metadata
 * and may hold tensors; the others hold tensors and three keys.  Every
 * part has split.no (its index from 0), split.count (N) and
 * split.tensors.count (the model's tensors).  Opening a file whose
 * split.count is 2 or more opens the whole model, as llama.cpp's loader
 * does, checking more than it does (ML_E_FORMAT unless noted):
 *   - the file is part 1: split.no 0;
 *   - ml_gguf_open finds the other parts by the file's name, which must
 *     end in -00001-of-0000N.gguf (N = split.count, five digits at least):
 *     part i is the same name with -0000i-of-0000N.gguf.  A part that
 *     cannot be opened is that error (ML_E_IO for a missing file);
 *   - each part is validated whole as a file of its own (its version,
 *     alignment and data section are its own);
 *   - in every part split.no is its index (one equal to an earlier part's
 *     is a part given twice), split.count and split.tensors.count are
 *     part 1's, all three any integer type; split.count at most 65535
 *     (gguf-split writes u16); split.tensors.count at most
 *     ML_GGUF_MAX_TENSORS (ML_E_UNSUPPORTED);
 *   - no tensor name is in two parts, and the parts hold
 *     split.tensors.count tensors in all.
 * The metadata is part 1's: other parts' keys are not read (as in
 * llama.cpp).  Tensors are listed part after part, in each part's order;
 * each points into its part's mapping (nothing is copied) and its offsets
 * are within its part.  split.count 1 is a model in one file (split.no
 * must be 0 and split.tensors.count its tensors); 0 (a file merged by
 * gguf-split) or no split.count: an ordinary file, split keys unread.
 *
 * Errors about a part other than the first start with "part I of N
 * (PATH): "; err->field and err->offset are then that part's.
 * ------------------------------------------------------------------------ */
#define ML_GGUF_MAX_PARTS 65535

typedef struct ml_gguf_part {
    const char *path;       /* as opened; "" for memory */
    uint32_t version, alignment;
    uint64_t file_size;
    uint64_t data_offset;   /* of this part's data section */
    size_t first_tensor;    /* its tensors: ml_gguf_tensor_at(first_tensor ..) */
    size_t n_tensors;
} ml_gguf_part;

/* 1 for a model in one file, else split.count. */
ML_API size_t ml_gguf_n_parts(const ml_gguf *g);
/* Part i (0: the first, or the only file); NULL past the end. */
ML_API const ml_gguf_part *ml_gguf_part_at(const ml_gguf *g, size_t i);

/* ------------------------------------------------------------------------
 * Metadata
 * ------------------------------------------------------------------------ */

/* A value: a KV's own value, or an element of an array.  Everything points
 * into the file and lives until ml_gguf_close. */
typedef struct ml_gguf_value {
    ml_gguf_vtype type;      /* the value's type */
    ml_gguf_vtype elem_type; /* ARRAY: the elements' type; otherwise = type */
    uint64_t count;          /* ARRAY: number of elements; otherwise 1 */
    const uint8_t *data;     /* scalar: its bytes; STRING: its bytes (no NUL);
                                ARRAY: the first element (its packed bytes) */
    uint64_t nbytes;         /* bytes at data: scalar size, string length, or
                                all of the array's elements */
    uint64_t offset;         /* file offset of data */
    const char *key;         /* the KV this value belongs to, for messages */
    int64_t index;           /* element index in its array; -1 for a KV's value */
    const void *priv;        /* internal: how to find the elements of an array
                                of strings or arrays (copy values whole) */
} ml_gguf_value;

typedef struct ml_gguf_kv {
    const char *key;         /* NUL-terminated copy */
    size_t key_len;
    uint64_t offset;         /* file offset of the KV (its key length) */
    ml_gguf_value value;
} ml_gguf_kv;

/* KVs in file order. */
ML_API size_t ml_gguf_n_kv(const ml_gguf *g);
ML_API const ml_gguf_kv *ml_gguf_kv_at(const ml_gguf *g, size_t i);
/* By key, in O(1); NULL if absent. */
ML_API const ml_gguf_kv *ml_gguf_find(const ml_gguf *g, const char *key);

/* Conversions of one value.  ML_OK and *out set, or ML_E_FORMAT (err names
 * the key and the value's offset, and the element index for an array
 * element) when the value has the wrong kind or does not fit:
 *   integers accept any integer type (u8..i64, not bool) whose value is in
 *   range; floats accept F32 and F64 (an F64 beyond the f32 range is an
 *   error for _f32; NaN and infinities pass); bool accepts BOOL with a byte
 *   of 0 or 1; strings give a pointer into the file and a length. */
ML_API ml_status ml_gguf_value_u32(const ml_gguf_value *v, uint32_t *out, ml_error *err);
ML_API ml_status ml_gguf_value_i32(const ml_gguf_value *v, int32_t *out, ml_error *err);
ML_API ml_status ml_gguf_value_u64(const ml_gguf_value *v, uint64_t *out, ml_error *err);
ML_API ml_status ml_gguf_value_i64(const ml_gguf_value *v, int64_t *out, ml_error *err);
ML_API ml_status ml_gguf_value_f32(const ml_gguf_value *v, float *out, ml_error *err);
ML_API ml_status ml_gguf_value_f64(const ml_gguf_value *v, double *out, ml_error *err);
ML_API ml_status ml_gguf_value_bool(const ml_gguf_value *v, int *out, ml_error *err);
ML_API ml_status ml_gguf_value_str(const ml_gguf_value *v, const char **s, size_t *len,
                                   ml_error *err);

/* Element i of an array value into *out.  O(1) for elements of fixed size
 * and for the strings or arrays of a KV's own array (an offset table is
 * built at open, bounded by the file size); elements of an array nested in
 * another are found by walking it.  out may be arr.  ML_E_INVAL when arr
 * is not an array or i >= count. */
ML_API ml_status ml_gguf_array_get(const ml_gguf_value *arr, uint64_t i, ml_gguf_value *out,
                                   ml_error *err);

/* Find and convert in one call.  When the key is absent: with found == NULL
 * the key is required and the result is ML_E_FORMAT ("missing"); with
 * found != NULL, *found is set to 0, *out is left alone (so it can hold a
 * default) and the result is ML_OK.  When present, *found is set to 1 and
 * the conversion above applies.  For a missing required key err names the
 * key, with offset -1. */
ML_API ml_status ml_gguf_get_u32(const ml_gguf *g, const char *key, uint32_t *out, int *found,
                                 ml_error *err);
ML_API ml_status ml_gguf_get_i32(const ml_gguf *g, const char *key, int32_t *out, int *found,
                                 ml_error *err);
ML_API ml_status ml_gguf_get_u64(const ml_gguf *g, const char *key, uint64_t *out, int *found,
                                 ml_error *err);
ML_API ml_status ml_gguf_get_i64(const ml_gguf *g, const char *key, int64_t *out, int *found,
                                 ml_error *err);
ML_API ml_status ml_gguf_get_f32(const ml_gguf *g, const char *key, float *out, int *found,
                                 ml_error *err);
ML_API ml_status ml_gguf_get_f64(const ml_gguf *g, const char *key, double *out, int *found,
                                 ml_error *err);
ML_API ml_status ml_gguf_get_bool(const ml_gguf *g, const char *key, int *out, int *found,
                                  ml_error *err);
ML_API ml_status ml_gguf_get_str(const ml_gguf *g, const char *key, const char **s, size_t *len,
                                 int *found, ml_error *err);
/* An array of any element type (check out->elem_type); ML_E_FORMAT when the
 * value is not an array. */
ML_API ml_status ml_gguf_get_array(const ml_gguf *g, const char *key, ml_gguf_value *out,
                                   int *found, ml_error *err);

/* ------------------------------------------------------------------------
 * Tensors
 * ------------------------------------------------------------------------ */
typedef struct ml_gguf_tensor {
    char name[ML_GGUF_NAME_MAX + 1]; /* NUL-terminated */
    uint32_t type;          /* ML_GGML_* id */
    const char *type_name;  /* "Q4_K" */
    uint32_t n_dims;        /* 1..4 as stored */
    uint64_t dims[ML_GGUF_MAX_DIMS]; /* ggml order, dims[0] fastest; 1 past n_dims */
    uint64_t n_elements;    /* product of dims */
    uint64_t cols;          /* dims[0]: elements per row */
    uint64_t rows;          /* dims[1] * dims[2] * dims[3] (1 for a vector);
                               a 2-D weight [n_in, n_out] has n_out rows */
    uint64_t row_bytes;     /* bytes of one row */
    uint64_t nbytes;        /* bytes of the tensor */
    uint64_t offset;        /* as stored: relative to the data section */
    uint64_t file_offset;   /* absolute offset of the data */
    uint64_t info_offset;   /* file offset of the tensor info (name length) */
    const uint8_t *data;    /* in the mapping; see the alignment note above */
    uint32_t part;          /* the part that holds it (0: the first, or the
                               only file); offsets are that part's */
} ml_gguf_tensor;

/* Tensors in info order. */
ML_API size_t ml_gguf_n_tensors(const ml_gguf *g);
ML_API const ml_gguf_tensor *ml_gguf_tensor_at(const ml_gguf *g, size_t i);
/* By name, in O(1); NULL if absent. */
ML_API const ml_gguf_tensor *ml_gguf_find_tensor(const ml_gguf *g, const char *name);

/* Dequantizes rows [first_row, first_row + n_rows) of t into out, which
 * holds n_rows * t->cols floats.  Bit-exact with ggml's dequantize_row_*
 * (and gguf-py's gguf.quants.dequantize): F16 exactly, BF16 as bits << 16,
 * F32 copied bit for bit.  ML_E_UNSUPPORTED naming the tensor and its type
 * for types outside ml_gguf_type_supported; ML_E_INVAL when the rows are
 * out of range or the float count does not fit size_t. */
ML_API ml_status ml_gguf_dequantize(const ml_gguf_tensor *t, uint64_t first_row, uint64_t n_rows,
                                    float *out, ml_error *err);
/* The same on raw blocks: n_elements (a multiple of the type's block size)
 * from src, which holds n_elements / block_elems blocks. */
ML_API ml_status ml_gguf_dequantize_raw(uint32_t type, const void *src, uint64_t n_elements,
                                        float *out, ml_error *err);

#ifdef __cplusplus
}
#endif

#endif
