/* fuzz_gguf.c - the GGUF parser (ml_gguf_open_memory), every accessor of
 * its metadata, and the dequantization of every tensor.
 *
 * Oracles besides the sanitizers: the error contract; every value, string,
 * array element and tensor points inside the input; lookups by key and by
 * name find what iteration found; a tensor dequantized whole equals the
 * same rows dequantized one at a time and ml_gguf_dequantize_raw on its
 * bytes; types outside ml_gguf_type_supported are ML_E_UNSUPPORTED; a
 * buffer opens as one part (part 1 of a split model is refused, its other
 * parts out of reach).  The work per input is bounded (floats
 * dequantized, array elements read). */
#include "fuzz.h"

#include <math.h>

#define MAX_FLOATS (1u << 18)  /* dequantized per input */
#define MAX_ELEMS 64           /* array elements read at each end */

typedef struct bounds {
    const uint8_t *base;
    size_t size;
} bounds;

static void check_inside(const bounds *b, const uint8_t *p, uint64_t n, uint64_t offset)
{
    FUZZ_CHECK(p >= b->base && (size_t)(p - b->base) <= b->size);
    FUZZ_CHECK(n <= b->size - (size_t)(p - b->base));
    FUZZ_CHECK(offset == (uint64_t)(p - b->base));
}

/* Every conversion on a value: each either succeeds or fills err. */
static void convert_all(const ml_gguf_value *v, const bounds *b)
{
    ml_error err;
    union {
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        int64_t i64;
        float f32;
        double f64;
        int b;
    } out;
    const char *s;
    size_t len;
    ml_status st;
#define TRY(call)                                                                             \
    do {                                                                                      \
        fuzz_err_init(&err);                                                                  \
        st = (call);                                                                          \
        fuzz_check_err(st, &err, b->size);                                                    \
    } while (0)
    TRY(ml_gguf_value_u32(v, &out.u32, &err));
    TRY(ml_gguf_value_i32(v, &out.i32, &err));
    TRY(ml_gguf_value_u64(v, &out.u64, &err));
    TRY(ml_gguf_value_i64(v, &out.i64, &err));
    TRY(ml_gguf_value_f32(v, &out.f32, &err));
    TRY(ml_gguf_value_f64(v, &out.f64, &err));
    TRY(ml_gguf_value_bool(v, &out.b, &err));
    if (st == ML_OK)
        FUZZ_CHECK(out.b == 0 || out.b == 1);
    TRY(ml_gguf_value_str(v, &s, &len, &err));
    if (st == ML_OK)
        check_inside(b, (const uint8_t *)s, len, v->offset);
#undef TRY
}

static void check_value(const ml_gguf_value *v, const bounds *b, int depth)
{
    FUZZ_CHECK(depth <= ML_GGUF_MAX_DEPTH + 1);
    FUZZ_CHECK((unsigned)v->type < ML_GGUF_VTYPE_COUNT);
    check_inside(b, v->data, v->nbytes, v->offset);
    convert_all(v, b);
    if (v->type != ML_GGUF_ARRAY)
        return;
    FUZZ_CHECK((unsigned)v->elem_type < ML_GGUF_VTYPE_COUNT);
    ml_error err;
    ml_gguf_value e;
    /* The first and the last elements; a walk through a nested array costs
     * its index, so the last ones only for KVs' own arrays. */
    uint64_t n = v->count;
    for (uint64_t i = 0; i < n && i < 2 * MAX_ELEMS; i++) {
        uint64_t k = i < MAX_ELEMS || depth > 0 ? i : n - 1 - (i - MAX_ELEMS);
        if (depth > 0 && i >= MAX_ELEMS)
            break;
        fuzz_err_init(&err);
        ml_status st = ml_gguf_array_get(v, k, &e, &err);
        fuzz_check_err(st, &err, b->size);
        FUZZ_CHECK(st == ML_OK);
        FUZZ_CHECK(e.index == (int64_t)k && e.type == v->elem_type);
        FUZZ_CHECK(e.offset >= v->offset && e.offset + e.nbytes <= v->offset + v->nbytes);
        check_value(&e, b, depth + 1);
    }
    fuzz_err_init(&err);
    ml_status st = ml_gguf_array_get(v, n, &e, &err);
    fuzz_check_err(st, &err, b->size);
    FUZZ_CHECK(st == ML_E_INVAL);
}

static void check_kvs(const ml_gguf *g, const bounds *b)
{
    size_t n = ml_gguf_n_kv(g);
    for (size_t i = 0; i < n; i++) {
        const ml_gguf_kv *kv = ml_gguf_kv_at(g, i);
        FUZZ_CHECK(kv != NULL && kv->key != NULL);
        FUZZ_CHECK(strlen(kv->key) == kv->key_len && kv->key_len > 0);
        FUZZ_CHECK(ml_gguf_find(g, kv->key) == kv);
        FUZZ_CHECK(kv->offset < b->size);
        check_value(&kv->value, b, 0);
    }
    FUZZ_CHECK(ml_gguf_kv_at(g, n) == NULL);
    uint32_t a = ml_gguf_alignment(g);
    FUZZ_CHECK(a >= 1 && (a & (a - 1)) == 0);
}

/* Rows [r0, r0 + nr) whole, row by row, and raw: all three bit-equal. */
static void dequant_rows(const ml_gguf_tensor *t, uint64_t r0, uint64_t nr)
{
    size_t nf = (size_t)(nr * t->cols);
    float *whole = malloc(nf * sizeof *whole + 1);
    float *part = malloc(nf * sizeof *part + 1);
    FUZZ_CHECK(whole && part);
    ml_error err;
    fuzz_err_init(&err);
    ml_status st = ml_gguf_dequantize(t, r0, nr, whole, &err);
    fuzz_check_err(st, &err, 0);
    FUZZ_CHECK(st == ML_OK);
    for (uint64_t r = 0; r < nr; r++)
        FUZZ_CHECK(ml_gguf_dequantize(t, r0 + r, 1, part + r * t->cols, NULL) == ML_OK);
    FUZZ_CHECK(memcmp(whole, part, nf * sizeof *whole) == 0);
    FUZZ_CHECK(ml_gguf_dequantize_raw(t->type, t->data + r0 * t->row_bytes, nr * t->cols, part,
                                      NULL) == ML_OK);
    FUZZ_CHECK(memcmp(whole, part, nf * sizeof *whole) == 0);
    if (t->type == ML_GGML_F32)
        FUZZ_CHECK(memcmp(whole, t->data + r0 * t->row_bytes, nf * sizeof *whole) == 0);
    free(whole);
    free(part);
}

static void check_tensors(const ml_gguf *g, const bounds *b)
{
    size_t n = ml_gguf_n_tensors(g);
    uint64_t budget = MAX_FLOATS;
    uint64_t data_off = ml_gguf_data_offset(g);
    FUZZ_CHECK(data_off <= b->size);
    for (size_t i = 0; i < n; i++) {
        const ml_gguf_tensor *t = ml_gguf_tensor_at(g, i);
        FUZZ_CHECK(t != NULL && memchr(t->name, 0, sizeof t->name) != NULL);
        FUZZ_CHECK(ml_gguf_find_tensor(g, t->name) == t);
        FUZZ_CHECK(t->n_dims >= 1 && t->n_dims <= ML_GGUF_MAX_DIMS);
        FUZZ_CHECK(t->cols == t->dims[0] && t->rows * t->cols == t->n_elements);
        FUZZ_CHECK(t->nbytes == t->rows * t->row_bytes);
        FUZZ_CHECK(t->file_offset == data_off + t->offset);
        FUZZ_CHECK(t->file_offset % ml_gguf_alignment(g) == 0);
        check_inside(b, t->data, t->nbytes, t->file_offset);
        FUZZ_CHECK(t->info_offset < data_off && t->part == 0);
        ml_error err;
        fuzz_err_init(&err);
        if (!ml_gguf_type_supported(t->type)) {
            float f;
            ml_status st = ml_gguf_dequantize(t, 0, 1, &f, &err);
            fuzz_check_err(st, &err, b->size);
            FUZZ_CHECK(st == ML_E_UNSUPPORTED);
            continue;
        }
        fuzz_err_init(&err);
        ml_status st = ml_gguf_dequantize(t, 0, t->rows + 1, NULL, &err);
        fuzz_check_err(st, &err, b->size);
        FUZZ_CHECK(st == ML_E_INVAL);
        if (t->cols > budget)
            continue;
        uint64_t nr = budget / t->cols;
        if (nr > t->rows)
            nr = t->rows;
        budget -= nr * t->cols;
        dequant_rows(t, t->rows - nr, nr); /* the last rows: the tensor's end */
    }
    FUZZ_CHECK(ml_gguf_tensor_at(g, n) == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ml_error err;
    ml_gguf *g = NULL;
    fuzz_err_init(&err);
    ml_status st = ml_gguf_open_memory(data, size, &g, &err);
    fuzz_check_err(st, &err, size);
    FUZZ_CHECK((st == ML_OK) == (g != NULL));
    if (!g)
        return 0;
    bounds b = {data, size};
    FUZZ_CHECK(ml_gguf_file_data(g) == data && ml_gguf_file_size(g) == size);
    /* A buffer is one part: the first part of a split model is refused. */
    FUZZ_CHECK(ml_gguf_n_parts(g) == 1 && ml_gguf_part_at(g, 1) == NULL);
    FUZZ_CHECK(ml_gguf_part_at(g, 0)->file_size == size &&
               ml_gguf_part_at(g, 0)->n_tensors == ml_gguf_n_tensors(g));
    FUZZ_CHECK(ml_gguf_version(g) >= 1 && ml_gguf_version(g) <= 3);
    check_kvs(g, &b);
    check_tensors(g, &b);
    ml_gguf_close(g);
    return 0;
}
