/* testutil.h - helpers shared by the unit tests: a seeded PRNG, a memory
 * sink and a chunked memory reader, the spec's header field table written
 * out independently of the library's, a reference body layout computed
 * from the spec's listing (not from ml_mlb_layout_next), a generator of
 * random valid headers, model builders and error assertions. */
#ifndef ML_TESTUTIL_H
#define ML_TESTUTIL_H

#include "mlcore.h"

#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- PRNG (splitmix64) ---- */
typedef struct tu_rng {
    uint64_t s;
} tu_rng;
uint64_t tu_next(tu_rng *r);
/* Uniform in [0, n); n > 0. */
uint32_t tu_below(tu_rng *r, uint32_t n);

/* ---- memory sink (ml_write_fn) ---- */
typedef struct tu_mem {
    uint8_t *p;
    size_t len, cap;
    size_t fail_at; /* fail the write that would pass this many bytes; SIZE_MAX: never */
    unsigned calls; /* successful and failed calls */
} tu_mem;
void tu_mem_init(tu_mem *m);
void tu_mem_free(tu_mem *m);
ml_status tu_mem_sink(void *ctx, const void *buf, size_t n, ml_error *err);

/* ---- chunked memory reader (ml_read_fn) ---- */
typedef struct tu_reader {
    const uint8_t *p;
    size_t len, pos;
    tu_rng rng;
    size_t max_chunk; /* random chunk sizes 1..max_chunk; 0: whatever is asked */
    size_t fail_at;   /* return -1 once pos reaches this; SIZE_MAX: never */
} tu_reader;
void tu_reader_init(tu_reader *r, const void *p, size_t len, uint64_t seed, size_t max_chunk);
long tu_mem_read(void *ctx, void *buf, size_t n, ml_error *err);

/* ---- the spec's header table, written out independently ---- */
enum { TU_CHARS, TU_U32, TU_F32 };
typedef struct tu_field {
    const char *name;
    unsigned offset; /* spec offset */
    int kind;
    size_t member;   /* offsetof in ml_mlb_header */
} tu_field;
extern const tu_field tu_fields[];
extern const size_t tu_n_fields;
const tu_field *tu_field_by_name(const char *name);
/* Applies "name=value name=value ..." to a header; values are parsed as
 * u32 (strtoul base 0) or f32 (strtof: nan, inf, -0 ...); magic takes up
 * to 4 characters.  Tokens "raw:OFF=BYTE" set raw[OFF] instead (raw may be
 * NULL when none are used).  Fails the test on an unknown name. */
void tu_apply(ml_mlb_header *h, uint8_t *raw, const char *spec);

/* A valid header built in C: dim 64, 4 layers, 4 heads, 2 KV heads,
 * hidden 128, vocab 256, max_seq 256, theta 10000, eps 1e-5, Q4_0. */
void tu_base_header(ml_mlb_header *h);

/* ---- reference layout from the spec's body listing ---- */
typedef struct tu_ref {
    char name[32];
    ml_role role;
    int32_t layer;
    ml_type type;
    uint32_t ndim, rows, cols, q8_class;
    uint64_t offset, nbytes, scale_offset, scale_nbytes;
} tu_ref;
/* Derived values computed independently. */
typedef struct tu_dims {
    uint64_t head_dim, q_dim, kv_dim, rot_dim, lin_qkv, lin_vd;
} tu_dims;
void tu_derive(const ml_mlb_header *h, tu_dims *d);
/* Fills out[0..cap) and returns the number of tensors (also beyond cap);
 * *end receives the end of the last array (no padding). */
size_t tu_ref_layout(const ml_mlb_header *h, const uint8_t *flags, tu_ref *out, size_t cap,
                     uint64_t *end);
uint64_t tu_align64(uint64_t v);
/* End of a reference tensor's last array. */
uint64_t tu_ref_end(const tu_ref *t);

/* ---- random valid headers ---- */
#define TU_MAX_LAYERS 6
/* A random valid header; `variant` cycles the rope type and forces
 * features so that consecutive variants cover every option. */
void tu_random_header(tu_rng *r, unsigned variant, ml_mlb_header *h, uint8_t *flags);
/* The mkmodel "full" preset: every optional feature at once; flags 1,2,4,8. */
void tu_full_header(ml_mlb_header *h, uint8_t flags[4]);

/* ---- models ---- */
/* ml_mlb_write_random into *out (initialised here); fails the test on error. */
void tu_write_random(const ml_mlb_header *h, const uint8_t *flags, uint64_t seed, tu_mem *out);
/* Deterministic content of tensor `index` of a model written by
 * tu_write_own: quants (or F32 values) into data, scales as stored. */
void tu_tensor_content(const ml_mlb_header *h, const tu_ref *t, uint64_t seed, size_t index,
                       uint8_t *data, uint8_t *scales);
/* Writes a model with the writer, putting tu_tensor_content for every
 * tensor and checking ml_mlb_writer_expect against the reference layout. */
void tu_write_own(const ml_mlb_header *h, const uint8_t *flags, uint64_t seed, tu_mem *out);

/* A copy of buf in fresh memory at `misalign` bytes past a 64-byte
 * boundary, allocated to exactly misalign + len bytes. */
typedef struct tu_buf {
    void *base;
    uint8_t *p;
    size_t len;
} tu_buf;
void tu_buf_copy(tu_buf *b, const void *src, size_t len, size_t misalign);
void tu_buf_free(tu_buf *b);
/* m opened from a copy in b (ml_mlb_open_memory); fails the test if it
 * does not open. */
ml_mlb *tu_open_copy(tu_buf *b, const tu_mem *m);

/* Qwen3-MoE's shape, small: 2 layers, 8 experts of width 32, 2 used. */
void tu_moe_header(ml_mlb_header *h, uint32_t wtype);

/* ---- assertions ---- */
/* For hot loops: libcheck's ck_assert records a "mark point" through the
 * test's message channel on every success, which costs a system call in
 * fork mode; this only calls into libcheck on failure. */
#define TU_REQUIRE(cond, ...)             \
    do {                                  \
        if (!(cond))                      \
            ck_abort_msg(__VA_ARGS__);    \
    } while (0)

/* Asserts status, err.code, err.field and err.offset; `what` labels the message. */
#define TU_CHECK_ERR(what, got, err, st, fld, off)                                              \
    do {                                                                                        \
        ml_status tu_g_ = (got);                                                                \
        ck_assert_msg(tu_g_ == (st), "%s: status %s, expected %s (%s)", (what),                 \
                      ml_status_name(tu_g_), ml_status_name(st), (err).msg);                    \
        if ((st) != ML_OK) {                                                                    \
            ck_assert_msg((err).code == (st), "%s: err.code %d", (what), (int)(err).code);      \
            ck_assert_msg(strcmp((err).field, (fld)) == 0, "%s: field \"%s\", expected \"%s\" (%s)", \
                          (what), (err).field, (fld), (err).msg);                               \
            ck_assert_msg((err).offset == (int64_t)(off), "%s: offset %lld, expected %lld (%s)", \
                          (what), (long long)(err).offset, (long long)(off), (err).msg);        \
            ck_assert_msg((err).msg[0] != 0, "%s: empty message", (what));                      \
        }                                                                                       \
    } while (0)

/* Clears an ml_error to recognisable garbage so a test sees what was filled. */
void tu_err_reset(ml_error *e);

/* The whole file, NUL-terminated (*n: its bytes), or NULL when it cannot
 * be opened. */
char *tu_slurp(const char *path, size_t *n);

#endif
