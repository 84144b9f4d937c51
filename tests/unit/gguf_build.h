/* gguf_build.h - a GGUF writer for the unit tests, written from the format
 * description (gguf-mapping.md section 1) and not from the library's
 * reader.  It records where every field starts, with the error field name
 * the reader should use for it, so tests can patch any field of a valid
 * file and predict the exact status, field and offset of the failure, and
 * predict where a truncated copy fails.
 *
 * An "atom" is the unit the reader checks at once: a fixed-size field, a
 * string (length and bytes), or a count with the fixed-size elements that
 * follow it.  Cutting a file inside an atom makes the reader fail at the
 * atom's start. */
#ifndef ML_GGUF_BUILD_H
#define ML_GGUF_BUILD_H

#include "mlcore.h"

#include <stddef.h>
#include <stdint.h>

typedef struct gb_atom {
    size_t at;
    char field[64];
} gb_atom;

typedef struct gb_tensor {
    char name[64];
    uint32_t n_dims, type;
    uint64_t dims[4];
    uint64_t offset;     /* relative to the data section */
    uint64_t nbytes;
    size_t info_at;      /* offset of the info (name length) */
    size_t n_dims_at, dims_at[4], type_at, offset_at;
} gb_tensor;

typedef struct gb {
    uint8_t *p;
    size_t len, cap;
    uint32_t version;    /* 1: counts and lengths are u32 */
    gb_atom *atoms;
    size_t n_atoms, cap_atoms;
    char field[64];      /* label of the atoms being written */
    gb_tensor t[16];
    size_t n_t;
    size_t infos_end, data_start;
    uint32_t alignment;
} gb;

void gb_init(gb *b, uint32_t version);
void gb_free(gb *b);

/* Raw little-endian writes; each returns the offset it wrote at. */
size_t gb_u8(gb *b, uint8_t v);
size_t gb_u16(gb *b, uint16_t v);
size_t gb_u32(gb *b, uint32_t v);
size_t gb_u64(gb *b, uint64_t v);
size_t gb_bytes(gb *b, const void *p, size_t n);
/* A count or length in the version's width. */
size_t gb_count(gb *b, uint64_t v);

/* Starts a new atom at the current end, labelled with b->field. */
void gb_mark(gb *b);
void gb_label(gb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Header: magic, version, counts (one atom each). */
void gb_header(gb *b, uint64_t n_tensors, uint64_t n_kv);
/* KV number i: key (atom "kv[i]"), then its type (atom labelled by the
 * key).  Returns the KV's offset; the value follows with the gb_v_*. */
size_t gb_kv(gb *b, size_t i, const char *key, uint32_t vtype);
/* Values (each an atom). */
size_t gb_v_fixed(gb *b, uint32_t vtype, uint64_t bits);
size_t gb_v_str(gb *b, const char *s);
/* Array header: element type (atom) and count; for fixed-size element
 * types the count's atom also covers the elements, written next with
 * gb_e_fixed.  Returns the offset of the count. */
size_t gb_v_arr(gb *b, uint32_t elem_type, uint64_t count);
size_t gb_e_fixed(gb *b, uint32_t vtype, uint64_t bits);

/* Tensor info number i (atoms: name "tensor[i]", then n_dims, each dim,
 * type and offset labelled by the name).  nbytes is what the data takes. */
void gb_tensor_info(gb *b, size_t i, const char *name, uint32_t n_dims, const uint64_t *dims,
                    uint32_t type, uint64_t offset, uint64_t nbytes);
/* Ends the infos, pads to the alignment (if there are tensors) and appends
 * data_bytes of data, byte k being (uint8_t)(k * 7 + 1). */
void gb_data(gb *b, uint32_t alignment, size_t data_bytes);

/* Where a copy cut to `len` bytes must fail: returns 0 if it must open,
 * else 1 with the field and offset (status ML_E_FORMAT), given the header's
 * counts and the smallest KV and tensor sizes the reader assumes. */
int gb_expect_cut(const gb *b, size_t len, uint64_t n_tensors, uint64_t n_kv, char *field,
                  int64_t *offset);

/* Patches at an offset of the built file. */
void gb_put32(gb *b, size_t at, uint32_t v);
void gb_put64(gb *b, size_t at, uint64_t v);
/* A count field in the version's width. */
void gb_put_count(gb *b, size_t at, uint64_t v);

/* ---- the "full" file: every value type, three tensors ---- */
enum {
    K_ARCH, K_U8, K_I8, K_U16, K_I16, K_U32, K_I32, K_F32, K_BOOL, K_STR, K_U64, K_I64, K_F64,
    K_AU8, K_AI8, K_AU16, K_AI16, K_AU32, K_AI32, K_AF32, K_ABOOL, K_ASTR, K_AU64, K_AI64,
    K_AF64, K_ANEST, K_ANSTR, K_ADEEP, K_AEMPTY, K_ALIGN, K_COUNT
};

typedef struct full_rec {
    size_t n_kv;               /* K_ALIGN is present only with align64 */
    size_t kv_at[K_COUNT];     /* offset of the KV (key length) */
    size_t type_at[K_COUNT];   /* offset of its value type */
    size_t val_at[K_COUNT];    /* offset of the value's data (ml_gguf_value.offset) */
    size_t count_at[K_COUNT];  /* arrays: offset of the count */
    size_t elem_type_at[K_COUNT]; /* arrays: offset of the element type */
    size_t nested_inner_type_at;  /* a.nested: element type of its first element */
} full_rec;

/* Builds the full file: general.architecture "llama"; s.* one scalar of
 * each type; a.* arrays of each fixed type, of strings, nested arrays
 * ([[u32 1,2],[u8],[string "x"]], [[string "ab","c"],[string "def"]],
 * [[[u8 7]]]) and an empty one; general.alignment = 64 (u32) last when
 * align64.  Tensors: w.f32 F32 [8, 2], w.q8_0 Q8_0 [64], w.f16 F16
 * [16, 1, 1, 2], packed in that order. */
void full_build(gb *b, uint32_t version, int align64, full_rec *r);

/* Path of a committed fixture (tests run from the repository root). */
const char *gb_fixture(const char *name);

#endif
