/* check_gguf.c - the GGUF reader: a hand-built file with every metadata
 * value type (scalars, arrays of each, string arrays, nested arrays) and
 * tensors of several shapes, in versions 1, 2 and 3, read back exactly;
 * typed getters with their range checks; files written by gguf-py's
 * GGUFWriter (tests/fixtures/gguf, made by tools/gen-gguf-fixtures.py)
 * read back exactly.  Hostile files are in check_gguf_hostile.c. */
#include "gguf_build.h"
#include "suites.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------
 * The hand-built file, read back
 * ------------------------------------------------------------------------- */

static ml_gguf *open_ok(const gb *b)
{
    ml_gguf *g = NULL;
    ml_error e;
    tu_err_reset(&e);
    ml_status s = ml_gguf_open_memory(b->p, b->len, &g, &e);
    ck_assert_msg(s == ML_OK, "open: %s %s", ml_status_name(s), e.msg);
    return g;
}

/* The KV i of the full file, checked for key, type and value offset. */
static const ml_gguf_kv *kv_check(const ml_gguf *g, const full_rec *r, size_t i, const char *key,
                                  ml_gguf_vtype type)
{
    const ml_gguf_kv *kv = ml_gguf_kv_at(g, i);
    ck_assert_ptr_nonnull(kv);
    ck_assert_str_eq(kv->key, key);
    ck_assert_uint_eq(kv->key_len, strlen(key));
    ck_assert_ptr_eq(ml_gguf_find(g, key), kv);
    ck_assert_uint_eq(kv->offset, r->kv_at[i]);
    ck_assert_int_eq(kv->value.type, type);
    ck_assert_uint_eq(kv->value.offset, r->val_at[i]);
    ck_assert_int_eq(kv->value.index, -1);
    ck_assert_str_eq(kv->value.key, key);
    return kv;
}

static void check_scalars(const ml_gguf *g, const full_rec *r)
{
    ml_error e;
    const char *s;
    size_t n;
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    int64_t i64;
    float f;
    double d;
    int b;
    const ml_gguf_kv *kv = kv_check(g, r, K_ARCH, "general.architecture", ML_GGUF_STRING);
    ck_assert_int_eq(ml_gguf_value_str(&kv->value, &s, &n, &e), ML_OK);
    ck_assert_uint_eq(n, 5);
    ck_assert_int_eq(memcmp(s, "llama", 5), 0);
    kv = kv_check(g, r, K_U8, "s.u8", ML_GGUF_U8);
    ck_assert_uint_eq(kv->value.nbytes, 1);
    ck_assert_int_eq(ml_gguf_value_u32(&kv->value, &u32, &e), ML_OK);
    ck_assert_uint_eq(u32, 0xAB);
    kv = kv_check(g, r, K_I8, "s.i8", ML_GGUF_I8);
    ck_assert_int_eq(ml_gguf_value_i32(&kv->value, &i32, &e), ML_OK);
    ck_assert_int_eq(i32, -5);
    kv = kv_check(g, r, K_U16, "s.u16", ML_GGUF_U16);
    ck_assert_int_eq(ml_gguf_value_u64(&kv->value, &u64, &e), ML_OK);
    ck_assert_uint_eq(u64, 0xBEEF);
    kv = kv_check(g, r, K_I16, "s.i16", ML_GGUF_I16);
    ck_assert_int_eq(ml_gguf_value_i64(&kv->value, &i64, &e), ML_OK);
    ck_assert_int_eq(i64, -12345);
    kv = kv_check(g, r, K_U32, "s.u32", ML_GGUF_U32);
    ck_assert_int_eq(ml_gguf_value_u32(&kv->value, &u32, &e), ML_OK);
    ck_assert_uint_eq(u32, 0xDEADBEEFu);
    kv = kv_check(g, r, K_I32, "s.i32", ML_GGUF_I32);
    ck_assert_int_eq(ml_gguf_value_i32(&kv->value, &i32, &e), ML_OK);
    ck_assert_int_eq(i32, -123456789);
    kv = kv_check(g, r, K_F32, "s.f32", ML_GGUF_F32);
    ck_assert_int_eq(ml_gguf_value_f32(&kv->value, &f, &e), ML_OK);
    ck_assert(f == 3.5f);
    kv = kv_check(g, r, K_BOOL, "s.bool", ML_GGUF_BOOL);
    ck_assert_int_eq(ml_gguf_value_bool(&kv->value, &b, &e), ML_OK);
    ck_assert_int_eq(b, 1);
    kv = kv_check(g, r, K_STR, "s.str", ML_GGUF_STRING);
    ck_assert_int_eq(ml_gguf_value_str(&kv->value, &s, &n, &e), ML_OK);
    ck_assert_uint_eq(n, 12);
    ck_assert_int_eq(memcmp(s, "hello\xc3\xa9 \xe2\x96\x81x", 12), 0);
    kv = kv_check(g, r, K_U64, "s.u64", ML_GGUF_U64);
    ck_assert_int_eq(ml_gguf_value_u64(&kv->value, &u64, &e), ML_OK);
    ck_assert_uint_eq(u64, 0x0123456789ABCDEFull);
    kv = kv_check(g, r, K_I64, "s.i64", ML_GGUF_I64);
    ck_assert_int_eq(ml_gguf_value_i64(&kv->value, &i64, &e), ML_OK);
    ck_assert_int_eq(i64, -1234567890123ll);
    kv = kv_check(g, r, K_F64, "s.f64", ML_GGUF_F64);
    ck_assert_int_eq(ml_gguf_value_f64(&kv->value, &d, &e), ML_OK);
    ck_assert(d == 1e-300);
}

/* Element i of arr, checked for type and offset. */
static ml_gguf_value elem(const ml_gguf_value *arr, uint64_t i, ml_gguf_vtype type, uint64_t at)
{
    ml_gguf_value v;
    ml_error e;
    ck_assert_int_eq(ml_gguf_array_get(arr, i, &v, &e), ML_OK);
    ck_assert_int_eq(v.type, type);
    ck_assert_uint_eq(v.offset, at);
    ck_assert_int_eq(v.index, (int64_t)i);
    ck_assert_str_eq(v.key, arr->key);
    return v;
}

static int64_t elem_i64(const ml_gguf_value *arr, uint64_t i)
{
    ml_gguf_value v;
    int64_t x;
    ml_error e;
    ck_assert_int_eq(ml_gguf_array_get(arr, i, &v, &e), ML_OK);
    ck_assert_int_eq(ml_gguf_value_i64(&v, &x, &e), ML_OK);
    return x;
}

static void check_fixed_arrays(const ml_gguf *g, const full_rec *r)
{
    ml_error e;
    const ml_gguf_kv *kv = kv_check(g, r, K_AU8, "a.u8", ML_GGUF_ARRAY);
    ck_assert_int_eq(kv->value.elem_type, ML_GGUF_U8);
    ck_assert_uint_eq(kv->value.count, 3);
    ck_assert_uint_eq(kv->value.nbytes, 3);
    ck_assert_int_eq(memcmp(kv->value.data, "\x01\x02\xff", 3), 0);
    elem(&kv->value, 2, ML_GGUF_U8, r->val_at[K_AU8] + 2);
    ck_assert_int_eq(elem_i64(&kv->value, 2), 255);
    kv = kv_check(g, r, K_AI8, "a.i8", ML_GGUF_ARRAY);
    ck_assert_int_eq(elem_i64(&kv->value, 0), -1);
    ck_assert_int_eq(elem_i64(&kv->value, 2), 127);
    kv = kv_check(g, r, K_AU16, "a.u16", ML_GGUF_ARRAY);
    ck_assert_int_eq(elem_i64(&kv->value, 1), 65535);
    kv = kv_check(g, r, K_AI16, "a.i16", ML_GGUF_ARRAY);
    ck_assert_int_eq(elem_i64(&kv->value, 0), -32768);
    ck_assert_int_eq(elem_i64(&kv->value, 1), 32767);
    kv = kv_check(g, r, K_AU32, "a.u32", ML_GGUF_ARRAY);
    ck_assert_int_eq(elem_i64(&kv->value, 1), 4294967295ll);
    kv = kv_check(g, r, K_AI32, "a.i32", ML_GGUF_ARRAY);
    ck_assert_int_eq(elem_i64(&kv->value, 0), INT32_MIN);
    kv = kv_check(g, r, K_AF32, "a.f32", ML_GGUF_ARRAY);
    ml_gguf_value v = elem(&kv->value, 1, ML_GGUF_F32, r->val_at[K_AF32] + 4);
    float f;
    ck_assert_int_eq(ml_gguf_value_f32(&v, &f, &e), ML_OK);
    ck_assert(f == -2.0f);
    kv = kv_check(g, r, K_ABOOL, "a.bool", ML_GGUF_ARRAY);
    int b;
    v = elem(&kv->value, 0, ML_GGUF_BOOL, r->val_at[K_ABOOL]);
    ck_assert_int_eq(ml_gguf_value_bool(&v, &b, &e), ML_OK);
    ck_assert_int_eq(b, 0);
    kv = kv_check(g, r, K_AU64, "a.u64", ML_GGUF_ARRAY);
    uint64_t u64;
    v = elem(&kv->value, 0, ML_GGUF_U64, r->val_at[K_AU64]);
    ck_assert_int_eq(ml_gguf_value_u64(&v, &u64, &e), ML_OK);
    ck_assert_uint_eq(u64, UINT64_MAX);
    kv = kv_check(g, r, K_AI64, "a.i64", ML_GGUF_ARRAY);
    ck_assert_int_eq(elem_i64(&kv->value, 0), INT64_MIN);
    ck_assert_int_eq(elem_i64(&kv->value, 1), 9);
    kv = kv_check(g, r, K_AF64, "a.f64", ML_GGUF_ARRAY);
    double d;
    v = elem(&kv->value, 0, ML_GGUF_F64, r->val_at[K_AF64]);
    ck_assert_int_eq(ml_gguf_value_f64(&v, &d, &e), ML_OK);
    ck_assert(d == 0.0 && signbit(d));
    kv = kv_check(g, r, K_AEMPTY, "a.empty", ML_GGUF_ARRAY);
    ck_assert_uint_eq(kv->value.count, 0);
    ck_assert_uint_eq(kv->value.nbytes, 0);
    tu_err_reset(&e);
    TU_CHECK_ERR("element of an empty array", ml_gguf_array_get(&kv->value, 0, &v, &e), e,
                 ML_E_INVAL, "a.empty", r->val_at[K_AEMPTY]);
}

static void check_str(const ml_gguf_value *v, const char *want)
{
    const char *s;
    size_t n;
    ml_error e;
    ck_assert_int_eq(ml_gguf_value_str(v, &s, &n, &e), ML_OK);
    ck_assert_uint_eq(n, strlen(want));
    ck_assert_int_eq(memcmp(s, want, n), 0);
}

static void check_var_arrays(const ml_gguf *g, const full_rec *r, uint32_t cs)
{
    const ml_gguf_kv *kv = kv_check(g, r, K_ASTR, "a.str", ML_GGUF_ARRAY);
    ck_assert_int_eq(kv->value.elem_type, ML_GGUF_STRING);
    ck_assert_uint_eq(kv->value.count, 3);
    uint64_t at = r->val_at[K_ASTR];
    /* Read backwards: the index gives any element directly. */
    ml_gguf_value v = elem(&kv->value, 2, ML_GGUF_STRING, at + cs + 1 + cs + 0 + cs);
    check_str(&v, "hello world");
    v = elem(&kv->value, 1, ML_GGUF_STRING, at + cs + 1 + cs);
    check_str(&v, "");
    v = elem(&kv->value, 0, ML_GGUF_STRING, at + cs);
    check_str(&v, "a");
    ck_assert_uint_eq(kv->value.nbytes, 3 * cs + 1 + 0 + 11);

    /* [[u32 1, 2], [u8], [string "x"]] */
    kv = kv_check(g, r, K_ANEST, "a.nested", ML_GGUF_ARRAY);
    ck_assert_int_eq(kv->value.elem_type, ML_GGUF_ARRAY);
    ck_assert_uint_eq(kv->value.count, 3);
    at = r->val_at[K_ANEST];
    ml_gguf_value a0 = elem(&kv->value, 0, ML_GGUF_ARRAY, at + 4 + cs);
    ck_assert_int_eq(a0.elem_type, ML_GGUF_U32);
    ck_assert_uint_eq(a0.count, 2);
    ck_assert_uint_eq(a0.nbytes, 8);
    ck_assert_int_eq(elem_i64(&a0, 1), 2);
    uint64_t at1 = at + 4 + cs + 8;
    ml_gguf_value a1 = elem(&kv->value, 1, ML_GGUF_ARRAY, at1 + 4 + cs);
    ck_assert_int_eq(a1.elem_type, ML_GGUF_U8);
    ck_assert_uint_eq(a1.count, 0);
    ml_gguf_value a2 = elem(&kv->value, 2, ML_GGUF_ARRAY, at1 + 4 + cs + 4 + cs);
    ck_assert_int_eq(a2.elem_type, ML_GGUF_STRING);
    v = elem(&a2, 0, ML_GGUF_STRING, a2.offset + cs);
    check_str(&v, "x");
    ck_assert_str_eq(v.key, "a.nested");

    /* [[string "ab", "c"], [string "def"]]: strings inside a nested array
     * are found by walking it. */
    kv = kv_check(g, r, K_ANSTR, "a.nested_str", ML_GGUF_ARRAY);
    at = r->val_at[K_ANSTR];
    a0 = elem(&kv->value, 0, ML_GGUF_ARRAY, at + 4 + cs);
    v = elem(&a0, 1, ML_GGUF_STRING, a0.offset + cs + 2 + cs);
    check_str(&v, "c");
    a1 = elem(&kv->value, 1, ML_GGUF_ARRAY, a0.offset + a0.nbytes + 4 + cs);
    v = elem(&a1, 0, ML_GGUF_STRING, a1.offset + cs);
    check_str(&v, "def");

    /* [[[u8 7]]] */
    kv = kv_check(g, r, K_ADEEP, "a.deep", ML_GGUF_ARRAY);
    a0 = elem(&kv->value, 0, ML_GGUF_ARRAY, r->val_at[K_ADEEP] + 4 + cs);
    a1 = elem(&a0, 0, ML_GGUF_ARRAY, a0.offset + 4 + cs);
    ck_assert_int_eq(a1.elem_type, ML_GGUF_U8);
    ck_assert_int_eq(elem_i64(&a1, 0), 7);
}

static void check_tensors(const ml_gguf *g, const gb *b)
{
    ck_assert_uint_eq(ml_gguf_n_tensors(g), b->n_t);
    ck_assert_uint_eq(ml_gguf_data_offset(g), b->data_start);
    for (size_t i = 0; i < b->n_t; i++) {
        const gb_tensor *w = &b->t[i];
        const ml_gguf_tensor *t = ml_gguf_tensor_at(g, i);
        ck_assert_ptr_nonnull(t);
        ck_assert_ptr_eq(ml_gguf_find_tensor(g, w->name), t);
        ck_assert_str_eq(t->name, w->name);
        ck_assert_uint_eq(t->type, w->type);
        ck_assert_str_eq(t->type_name, ml_gguf_type_name(w->type));
        ck_assert_uint_eq(t->n_dims, w->n_dims);
        uint64_t n = 1;
        for (uint32_t d = 0; d < 4; d++) {
            uint64_t want = d < w->n_dims ? w->dims[d] : 1;
            ck_assert_uint_eq(t->dims[d], want);
            n *= want;
        }
        ck_assert_uint_eq(t->n_elements, n);
        ck_assert_uint_eq(t->cols, w->dims[0]);
        ck_assert_uint_eq(t->rows, n / w->dims[0]);
        ck_assert_uint_eq(t->nbytes, w->nbytes);
        ck_assert_uint_eq(t->row_bytes * t->rows, w->nbytes);
        ck_assert_uint_eq(t->offset, w->offset);
        ck_assert_uint_eq(t->file_offset, b->data_start + w->offset);
        ck_assert_uint_eq(t->info_offset, w->info_at);
        ck_assert_ptr_eq(t->data, ml_gguf_file_data(g) + b->data_start + w->offset);
    }
    ck_assert_ptr_null(ml_gguf_tensor_at(g, b->n_t));
    ck_assert_ptr_null(ml_gguf_find_tensor(g, "w.f3"));
    ck_assert_ptr_null(ml_gguf_find_tensor(g, "w.f32x"));
    /* F32 data comes back bit for bit. */
    const ml_gguf_tensor *t = ml_gguf_find_tensor(g, "w.f32");
    float out[16];
    ml_error e;
    ck_assert_int_eq(ml_gguf_dequantize(t, 0, 2, out, &e), ML_OK);
    ck_assert_int_eq(memcmp(out, t->data, 64), 0);
}

/* Versions 1, 2, 3, each with and without general.alignment (64). */
START_TEST(full_file_reads_back)
{
    uint32_t version = 1 + (uint32_t)_i / 2;
    int align64 = _i % 2;
    gb b;
    full_rec r;
    full_build(&b, version, align64, &r);
    ml_gguf *g = open_ok(&b);
    ck_assert_uint_eq(ml_gguf_version(g), version);
    ck_assert_uint_eq(ml_gguf_alignment(g), align64 ? 64 : 32);
    ck_assert_uint_eq(ml_gguf_file_size(g), b.len);
    ck_assert_ptr_eq(ml_gguf_file_data(g), b.p);
    ck_assert_uint_eq(ml_gguf_n_kv(g), r.n_kv);
    ck_assert_ptr_null(ml_gguf_kv_at(g, r.n_kv));
    check_scalars(g, &r);
    check_fixed_arrays(g, &r);
    check_var_arrays(g, &r, version == 1 ? 4 : 8);
    check_tensors(g, &b);
    ck_assert_ptr_null(ml_gguf_find(g, "s.u"));
    ck_assert_ptr_null(ml_gguf_find(g, "s.u88"));
    ck_assert_ptr_null(ml_gguf_find(g, ""));
    ml_gguf_close(g);
    gb_free(&b);
}
END_TEST

/* A file with no tensors: the data section is not aligned (as ggml). */
START_TEST(no_tensors_no_padding)
{
    gb b;
    gb_init(&b, 3);
    gb_header(&b, 0, 1);
    gb_kv(&b, 0, "k", ML_GGUF_U8);
    gb_v_fixed(&b, ML_GGUF_U8, 1);
    gb_data(&b, 32, 0);
    ml_gguf *g = open_ok(&b);
    ck_assert_uint_eq(ml_gguf_data_offset(g), b.len);
    ck_assert_uint_eq(b.len % 32 != 0, 1);
    ck_assert_uint_eq(ml_gguf_n_tensors(g), 0);
    ck_assert_ptr_null(ml_gguf_find_tensor(g, "k"));
    ml_gguf_close(g);
    gb_free(&b);
}
END_TEST

/* general.alignment may have any integer type; 1 works too. */
START_TEST(alignment_any_integer)
{
    static const uint32_t types[] = {ML_GGUF_U8, ML_GGUF_I16, ML_GGUF_U64, ML_GGUF_I32};
    static const uint64_t values[] = {16, 1, 128, 8};
    for (size_t k = 0; k < 4; k++) {
        gb b;
        gb_init(&b, 3);
        gb_header(&b, 1, 1);
        gb_kv(&b, 0, "general.alignment", types[k]);
        gb_v_fixed(&b, types[k], values[k]);
        uint64_t dims[1] = {3};
        gb_tensor_info(&b, 0, "t", 1, dims, ML_GGML_I8, values[k], 3);
        gb_data(&b, (uint32_t)values[k], (size_t)values[k] + 3);
        ml_gguf *g = open_ok(&b);
        ck_assert_uint_eq(ml_gguf_alignment(g), values[k]);
        ck_assert_uint_eq(ml_gguf_data_offset(g) % values[k], 0);
        ck_assert_uint_eq(ml_gguf_tensor_at(g, 0)->file_offset, b.data_start + values[k]);
        ml_gguf_close(g);
        gb_free(&b);
    }
}
END_TEST

/* Tensors need not be in info order nor packed; bytes may follow them. */
START_TEST(tensors_out_of_order_with_gaps)
{
    gb b;
    gb_init(&b, 3);
    gb_header(&b, 3, 0);
    uint64_t d8[1] = {8}, d4[2] = {2, 2};
    gb_tensor_info(&b, 0, "c", 1, d8, ML_GGML_F32, 256, 32);
    gb_tensor_info(&b, 1, "a", 2, d4, ML_GGML_F16, 0, 8);
    gb_tensor_info(&b, 2, "b", 1, d8, ML_GGML_I8, 96, 8);
    gb_data(&b, 32, 400);
    ml_gguf *g = open_ok(&b);
    ck_assert_uint_eq(ml_gguf_n_tensors(g), 3);
    ck_assert_str_eq(ml_gguf_tensor_at(g, 0)->name, "c");
    ck_assert_uint_eq(ml_gguf_find_tensor(g, "c")->file_offset, b.data_start + 256);
    ml_gguf_close(g);
    gb_free(&b);
}
END_TEST

/* Tensor names: 63 bytes is the longest accepted. */
START_TEST(name_of_63_bytes)
{
    char name[64];
    memset(name, 'n', 63);
    name[63] = 0;
    gb b;
    gb_init(&b, 2);
    gb_header(&b, 1, 0);
    uint64_t d[1] = {1};
    gb_tensor_info(&b, 0, name, 1, d, ML_GGML_F32, 0, 4);
    gb_data(&b, 32, 4);
    ml_gguf *g = open_ok(&b);
    ck_assert_str_eq(ml_gguf_tensor_at(g, 0)->name, name);
    ck_assert_ptr_eq(ml_gguf_find_tensor(g, name), ml_gguf_tensor_at(g, 0));
    ml_gguf_close(g);
    gb_free(&b);
}
END_TEST

/* ---------------------------------------------------------------------------
 * Getters
 * ------------------------------------------------------------------------- */

START_TEST(getters_convert_and_range_check)
{
    gb b;
    full_rec r;
    full_build(&b, 3, 0, &r);
    ml_gguf *g = open_ok(&b);
    ml_error e;
    uint32_t u32 = 77;
    int32_t i32;
    uint64_t u64;
    int64_t i64;
    float f;
    double d;
    int found = -1, bo;
    const char *s;
    size_t n;

    /* Any integer width, in range. */
    ck_assert_int_eq(ml_gguf_get_u32(g, "s.u16", &u32, &found, &e), ML_OK);
    ck_assert_uint_eq(u32, 0xBEEF);
    ck_assert_int_eq(found, 1);
    ck_assert_int_eq(ml_gguf_get_i64(g, "s.u64", &i64, NULL, &e), ML_OK);
    ck_assert_int_eq(i64, 0x0123456789ABCDEFll);
    ck_assert_int_eq(ml_gguf_get_i32(g, "s.i16", &i32, NULL, &e), ML_OK);
    ck_assert_int_eq(i32, -12345);
    ck_assert_int_eq(ml_gguf_get_u64(g, "s.u8", &u64, NULL, &e), ML_OK);
    ck_assert_uint_eq(u64, 0xAB);

    /* Out of range: the key and the value's offset. */
    tu_err_reset(&e);
    TU_CHECK_ERR("negative into u32", ml_gguf_get_u32(g, "s.i8", &u32, NULL, &e), e, ML_E_FORMAT,
                 "s.i8", r.val_at[K_I8]);
    ck_assert_ptr_nonnull(strstr(e.msg, "-5 (i8) does not fit u32"));
    tu_err_reset(&e);
    TU_CHECK_ERR("u64 into u32", ml_gguf_get_u32(g, "s.u64", &u32, NULL, &e), e, ML_E_FORMAT,
                 "s.u64", r.val_at[K_U64]);
    tu_err_reset(&e);
    TU_CHECK_ERR("u32 into i32", ml_gguf_get_i32(g, "s.u32", &i32, NULL, &e), e, ML_E_FORMAT,
                 "s.u32", r.val_at[K_U32]);
    tu_err_reset(&e);
    TU_CHECK_ERR("negative into u64", ml_gguf_get_u64(g, "s.i64", &u64, NULL, &e), e,
                 ML_E_FORMAT, "s.i64", r.val_at[K_I64]);
    ck_assert_uint_eq(u32, 0xBEEF); /* untouched by the failures */

    /* Wrong kinds. */
    tu_err_reset(&e);
    TU_CHECK_ERR("float as integer", ml_gguf_get_u32(g, "s.f32", &u32, NULL, &e), e, ML_E_FORMAT,
                 "s.f32", r.val_at[K_F32]);
    ck_assert_ptr_nonnull(strstr(e.msg, "value is f32, expected an integer"));
    tu_err_reset(&e);
    TU_CHECK_ERR("bool as integer", ml_gguf_get_i64(g, "s.bool", &i64, NULL, &e), e, ML_E_FORMAT,
                 "s.bool", r.val_at[K_BOOL]);
    tu_err_reset(&e);
    TU_CHECK_ERR("string as float", ml_gguf_get_f32(g, "s.str", &f, NULL, &e), e, ML_E_FORMAT,
                 "s.str", r.val_at[K_STR]);
    tu_err_reset(&e);
    TU_CHECK_ERR("integer as float", ml_gguf_get_f64(g, "s.u8", &d, NULL, &e), e, ML_E_FORMAT,
                 "s.u8", r.val_at[K_U8]);
    tu_err_reset(&e);
    TU_CHECK_ERR("integer as string", ml_gguf_get_str(g, "s.u8", &s, &n, NULL, &e), e,
                 ML_E_FORMAT, "s.u8", r.val_at[K_U8]);
    tu_err_reset(&e);
    TU_CHECK_ERR("integer as bool", ml_gguf_get_bool(g, "s.u8", &bo, NULL, &e), e, ML_E_FORMAT,
                 "s.u8", r.val_at[K_U8]);
    tu_err_reset(&e);
    TU_CHECK_ERR("scalar as array", ml_gguf_get_array(g, "s.u8", &(ml_gguf_value){0}, NULL, &e),
                 e, ML_E_FORMAT, "s.u8", r.val_at[K_U8]);
    tu_err_reset(&e);
    TU_CHECK_ERR("array as integer", ml_gguf_get_u32(g, "a.u32", &u32, NULL, &e), e,
                 ML_E_FORMAT, "a.u32", r.val_at[K_AU32]);

    /* Floats: f32 from f64 in range, not beyond it. */
    ck_assert_int_eq(ml_gguf_get_f32(g, "s.f64", &f, NULL, &e), ML_OK);
    ck_assert(f == 0.0f);
    ck_assert_int_eq(ml_gguf_get_f64(g, "s.f32", &d, NULL, &e), ML_OK);
    ck_assert(d == 3.5);

    /* Missing: required (found NULL) vs optional (default kept). */
    tu_err_reset(&e);
    TU_CHECK_ERR("required", ml_gguf_get_u32(g, "no.such.key", &u32, NULL, &e), e, ML_E_FORMAT,
                 "no.such.key", -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "missing"));
    u32 = 10000;
    found = -1;
    ck_assert_int_eq(ml_gguf_get_u32(g, "no.such.key", &u32, &found, &e), ML_OK);
    ck_assert_int_eq(found, 0);
    ck_assert_uint_eq(u32, 10000);
    found = -1;
    ck_assert_int_eq(ml_gguf_get_str(g, "s.str", &s, &n, &found, &e), ML_OK);
    ck_assert_int_eq(found, 1);
    ck_assert_uint_eq(n, 12);
    ml_gguf_value arr;
    ck_assert_int_eq(ml_gguf_get_array(g, "a.str", &arr, &found, &e), ML_OK);
    ck_assert_uint_eq(arr.count, 3);
    ck_assert_int_eq(ml_gguf_get_bool(g, "s.bool", &bo, NULL, &e), ML_OK);
    ck_assert_int_eq(bo, 1);

    /* Array elements: conversions name the element. */
    ml_gguf_value v;
    ck_assert_int_eq(ml_gguf_get_array(g, "a.i8", &arr, NULL, &e), ML_OK);
    ck_assert_int_eq(ml_gguf_array_get(&arr, 0, &v, &e), ML_OK);
    tu_err_reset(&e);
    TU_CHECK_ERR("element into u32", ml_gguf_value_u32(&v, &u32, &e), e, ML_E_FORMAT, "a.i8",
                 r.val_at[K_AI8]);
    ck_assert_ptr_nonnull(strstr(e.msg, "element 0: -1 (i8) does not fit u32"));
    tu_err_reset(&e);
    TU_CHECK_ERR("index past the end", ml_gguf_array_get(&arr, 3, &v, &e), e, ML_E_INVAL, "a.i8",
                 r.val_at[K_AI8]);
    const ml_gguf_kv *kv = ml_gguf_find(g, "s.u8");
    tu_err_reset(&e);
    TU_CHECK_ERR("not an array", ml_gguf_array_get(&kv->value, 0, &v, &e), e, ML_E_INVAL, "s.u8",
                 -1);
    ml_gguf_close(g);
    gb_free(&b);
}
END_TEST

/* Integer edges: each bound of each target, accepted and one past. */
START_TEST(integer_bounds)
{
    static const struct {
        uint32_t type;
        uint64_t bits;
        int u32_ok, i32_ok, u64_ok, i64_ok;
    } cases[] = {
        {ML_GGUF_I32, (uint32_t)INT32_MIN, 0, 1, 0, 1},
        {ML_GGUF_I64, (uint64_t)INT32_MIN - 1, 0, 0, 0, 1},
        {ML_GGUF_U32, UINT32_MAX, 1, 0, 1, 1},
        {ML_GGUF_U64, (uint64_t)UINT32_MAX + 1, 0, 0, 1, 1},
        {ML_GGUF_U64, (uint64_t)INT64_MAX + 1, 0, 0, 1, 0},
        {ML_GGUF_I64, (uint64_t)INT64_MIN, 0, 0, 0, 1},
        {ML_GGUF_I8, 0x80, 0, 1, 0, 1},
        {ML_GGUF_U16, 0xffff, 1, 1, 1, 1},
        {ML_GGUF_I16, 0, 1, 1, 1, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        gb b;
        gb_init(&b, 3);
        gb_header(&b, 0, 1);
        gb_kv(&b, 0, "x", cases[k].type);
        gb_v_fixed(&b, cases[k].type, cases[k].bits);
        ml_gguf *g = open_ok(&b);
        ml_error e;
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        int64_t i64;
        ck_assert_int_eq(ml_gguf_get_u32(g, "x", &u32, NULL, &e) == ML_OK, cases[k].u32_ok);
        ck_assert_int_eq(ml_gguf_get_i32(g, "x", &i32, NULL, &e) == ML_OK, cases[k].i32_ok);
        ck_assert_int_eq(ml_gguf_get_u64(g, "x", &u64, NULL, &e) == ML_OK, cases[k].u64_ok);
        ck_assert_int_eq(ml_gguf_get_i64(g, "x", &i64, NULL, &e) == ML_OK, cases[k].i64_ok);
        if (cases[k].i64_ok && cases[k].type == ML_GGUF_I64)
            ck_assert_int_eq(i64, (int64_t)cases[k].bits);
        if (cases[k].i32_ok && cases[k].type == ML_GGUF_I32)
            ck_assert_int_eq(i32, INT32_MIN);
        ml_gguf_close(g);
        gb_free(&b);
    }
}
END_TEST

/* Bools other than 0/1 and f64 beyond f32 open, but do not convert. */
START_TEST(bad_values_fail_at_conversion)
{
    gb b;
    gb_init(&b, 3);
    gb_header(&b, 0, 3);
    gb_kv(&b, 0, "b", ML_GGUF_BOOL);
    size_t b_at = gb_v_fixed(&b, ML_GGUF_BOOL, 2);
    gb_kv(&b, 1, "d", ML_GGUF_F64);
    double big = 1e300, nan_ = NAN;
    uint64_t bits;
    memcpy(&bits, &big, 8);
    size_t d_at = gb_v_fixed(&b, ML_GGUF_F64, bits);
    gb_kv(&b, 2, "n", ML_GGUF_F64);
    memcpy(&bits, &nan_, 8);
    gb_v_fixed(&b, ML_GGUF_F64, bits);
    ml_gguf *g = open_ok(&b);
    ml_error e;
    int v;
    float f;
    double d;
    tu_err_reset(&e);
    TU_CHECK_ERR("bool 2", ml_gguf_get_bool(g, "b", &v, NULL, &e), e, ML_E_FORMAT, "b", b_at);
    tu_err_reset(&e);
    TU_CHECK_ERR("1e300 as f32", ml_gguf_get_f32(g, "d", &f, NULL, &e), e, ML_E_FORMAT, "d",
                 d_at);
    ck_assert_int_eq(ml_gguf_get_f64(g, "d", &d, NULL, &e), ML_OK);
    ck_assert(d == 1e300);
    ck_assert_int_eq(ml_gguf_get_f32(g, "n", &f, NULL, &e), ML_OK);
    ck_assert(isnan(f));
    ml_gguf_close(g);
    gb_free(&b);
}
END_TEST

/* A tokenizer-sized string array: any element in O(1), exact bytes. */
START_TEST(big_string_array)
{
    enum { N = 200000 };
    gb b;
    gb_init(&b, 3);
    gb_header(&b, 0, 1);
    gb_kv(&b, 0, "tokenizer.ggml.tokens", ML_GGUF_ARRAY);
    gb_v_arr(&b, ML_GGUF_STRING, N);
    char s[32];
    for (int i = 0; i < N; i++) {
        int n = snprintf(s, sizeof s, "tok%d", i * 7919 % N);
        gb_count(&b, (uint64_t)n);
        gb_bytes(&b, s, (size_t)n);
    }
    ml_gguf *g = open_ok(&b);
    ml_gguf_value arr, v;
    ml_error e;
    ck_assert_int_eq(ml_gguf_get_array(g, "tokenizer.ggml.tokens", &arr, NULL, &e), ML_OK);
    ck_assert_uint_eq(arr.count, N);
    tu_rng rng = {42};
    for (int k = 0; k < 400000; k++) {
        uint32_t i = tu_below(&rng, N);
        const char *p;
        size_t n;
        TU_REQUIRE(ml_gguf_array_get(&arr, i, &v, &e) == ML_OK, "get %u", i);
        TU_REQUIRE(ml_gguf_value_str(&v, &p, &n, &e) == ML_OK, "str %u", i);
        int w = snprintf(s, sizeof s, "tok%u", (unsigned)((uint64_t)i * 7919 % N));
        TU_REQUIRE(n == (size_t)w && memcmp(p, s, n) == 0, "element %u", i);
    }
    ml_gguf_close(g);
    gb_free(&b);
}
END_TEST

/* ---------------------------------------------------------------------------
 * Opening files
 * ------------------------------------------------------------------------- */

START_TEST(open_from_path)
{
    gb b;
    full_rec r;
    full_build(&b, 3, 0, &r);
    char path[] = "/tmp/mlcore-gguf-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, b.p, b.len), (ssize_t)b.len);
    close(fd);
    ml_gguf *g = NULL;
    ml_error e;
    ck_assert_int_eq(ml_gguf_open(path, &g, &e), ML_OK);
    ck_assert_uint_eq(ml_gguf_n_kv(g), r.n_kv);
    ck_assert_int_eq(memcmp(ml_gguf_file_data(g), b.p, b.len), 0);
    ml_gguf_close(g);
    unlink(path);
    tu_err_reset(&e);
    g = (ml_gguf *)&e;
    TU_CHECK_ERR("missing file", ml_gguf_open(path, &g, &e), e, ML_E_IO, "", -1);
    ck_assert_ptr_null(g);
    tu_err_reset(&e);
    TU_CHECK_ERR("directory", ml_gguf_open("/tmp", &g, &e), e, ML_E_IO, "", -1);
    tu_err_reset(&e);
    TU_CHECK_ERR("NULL", ml_gguf_open_memory(NULL, 4, &g, &e), e, ML_E_INVAL, "", -1);
    ml_gguf_close(NULL);
    gb_free(&b);
}
END_TEST

/* "-" reads standard input whole (here a pipe holding the file). */
START_TEST(open_from_pipe)
{
    gb b;
    full_rec r;
    full_build(&b, 2, 1, &r);
    ck_assert_uint_lt(b.len, 4096); /* fits the pipe's buffer */
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    ck_assert_int_eq(write(fds[1], b.p, b.len), (ssize_t)b.len);
    close(fds[1]);
    int saved = dup(0);
    ck_assert_int_ge(saved, 0);
    dup2(fds[0], 0);
    close(fds[0]);
    ml_gguf *g = NULL;
    ml_error e;
    ml_status s = ml_gguf_open("-", &g, &e);
    dup2(saved, 0);
    close(saved);
    ck_assert_msg(s == ML_OK, "%s", e.msg);
    ck_assert_uint_eq(ml_gguf_file_size(g), b.len);
    ck_assert_ptr_ne(ml_gguf_file_data(g), b.p);
    ck_assert_uint_eq(ml_gguf_alignment(g), 64);
    check_tensors(g, &b);
    ml_gguf_close(g);
    gb_free(&b);
}
END_TEST

/* ---------------------------------------------------------------------------
 * gguf-py's GGUFWriter files
 * ------------------------------------------------------------------------- */

static ml_gguf *open_fixture(const char *name)
{
    ml_gguf *g = NULL;
    ml_error e;
    tu_err_reset(&e);
    ml_status s = ml_gguf_open(gb_fixture(name), &g, &e);
    ck_assert_msg(s == ML_OK, "%s: %s %s", gb_fixture(name), ml_status_name(s), e.msg);
    return g;
}

static void want_int(const ml_gguf *g, const char *key, ml_gguf_vtype type, int64_t v)
{
    const ml_gguf_kv *kv = ml_gguf_find(g, key);
    ck_assert_msg(kv != NULL, "%s", key);
    ck_assert_int_eq(kv->value.type, type);
    int64_t x;
    ml_error e;
    ck_assert_int_eq(ml_gguf_value_i64(&kv->value, &x, &e), ML_OK);
    ck_assert_int_eq(x, v);
}

/* The values write_meta_kvs() in tools/gen-gguf-fixtures.py writes. */
START_TEST(writer_metadata)
{
    ml_gguf *g = open_fixture("writer.gguf");
    ml_error e;
    ck_assert_uint_eq(ml_gguf_version(g), 3);
    ck_assert_uint_eq(ml_gguf_alignment(g), 32);
    ck_assert_ptr_null(ml_gguf_find(g, "general.alignment"));
    const char *s;
    size_t n;
    ck_assert_int_eq(ml_gguf_get_str(g, "general.architecture", &s, &n, NULL, &e), ML_OK);
    ck_assert_uint_eq(n, 5);
    ck_assert_int_eq(memcmp(s, "llama", 5), 0);
    ck_assert_str_eq(ml_gguf_kv_at(g, 0)->key, "general.architecture");
    want_int(g, "t.u8", ML_GGUF_U8, 200);
    want_int(g, "t.i8", ML_GGUF_I8, -100);
    want_int(g, "t.u16", ML_GGUF_U16, 60000);
    want_int(g, "t.i16", ML_GGUF_I16, -30000);
    want_int(g, "t.u32", ML_GGUF_U32, 4000000000ll);
    want_int(g, "t.i32", ML_GGUF_I32, -2000000000ll);
    want_int(g, "t.i64", ML_GGUF_I64, -9000000000000000000ll);
    uint64_t u64;
    ck_assert_int_eq(ml_gguf_get_u64(g, "t.u64", &u64, NULL, &e), ML_OK);
    ck_assert_uint_eq(u64, 18000000000000000000ull);
    float f;
    double d;
    int b;
    ck_assert_int_eq(ml_gguf_get_f32(g, "t.f32", &f, NULL, &e), ML_OK);
    ck_assert(f == 0.15625f);
    ck_assert_int_eq(ml_gguf_get_f64(g, "t.f64", &d, NULL, &e), ML_OK);
    ck_assert(d == -2.5e-300);
    ck_assert_int_eq(ml_gguf_get_bool(g, "t.bool", &b, NULL, &e), ML_OK);
    ck_assert_int_eq(b, 1);
    ck_assert_int_eq(ml_gguf_get_str(g, "t.str", &s, &n, NULL, &e), ML_OK);
    ck_assert_uint_eq(n, 14);
    ck_assert_int_eq(memcmp(s, "h\xc3\xa9llo, w\xc3\xb6rld", 14), 0);
    want_int(g, "general.quantization_version", ML_GGUF_U32, 2);

    ml_gguf_value a, v;
    ck_assert_int_eq(ml_gguf_get_array(g, "t.arr.u8", &a, NULL, &e), ML_OK);
    ck_assert_int_eq(a.elem_type, ML_GGUF_U8);
    ck_assert_uint_eq(a.count, 3);
    ck_assert_int_eq(memcmp(a.data, "\x01\x02\xff", 3), 0);
    ck_assert_int_eq(ml_gguf_get_array(g, "t.arr.i16", &a, NULL, &e), ML_OK);
    ck_assert_int_eq(elem_i64(&a, 2), -32768);
    ck_assert_int_eq(ml_gguf_get_array(g, "t.arr.i32", &a, NULL, &e), ML_OK);
    ck_assert_int_eq(elem_i64(&a, 2), 2147483647);
    ck_assert_int_eq(ml_gguf_get_array(g, "t.arr.f32", &a, NULL, &e), ML_OK);
    ck_assert_int_eq(ml_gguf_array_get(&a, 2, &v, &e), ML_OK);
    ck_assert_int_eq(ml_gguf_value_f32(&v, &f, &e), ML_OK);
    ck_assert(f == 3e38f);
    ck_assert_int_eq(ml_gguf_get_array(g, "t.arr.bool", &a, NULL, &e), ML_OK);
    ck_assert_int_eq(memcmp(a.data, "\x01\x00\x01", 3), 0);
    ck_assert_int_eq(ml_gguf_get_array(g, "t.arr.u64", &a, NULL, &e), ML_OK);
    ck_assert_int_eq(ml_gguf_array_get(&a, 2, &v, &e), ML_OK);
    ck_assert_int_eq(ml_gguf_value_u64(&v, &u64, &e), ML_OK);
    ck_assert_uint_eq(u64, UINT64_MAX);
    ck_assert_int_eq(ml_gguf_get_array(g, "t.arr.f64", &a, NULL, &e), ML_OK);
    ck_assert_int_eq(ml_gguf_array_get(&a, 1, &v, &e), ML_OK);
    ck_assert_int_eq(ml_gguf_value_f64(&v, &d, &e), ML_OK);
    ck_assert(d == 0.0 && signbit(d));

    ck_assert_int_eq(ml_gguf_get_array(g, "t.arr.str", &a, NULL, &e), ML_OK);
    ck_assert_int_eq(a.elem_type, ML_GGUF_STRING);
    ck_assert_uint_eq(a.count, 4);
    ck_assert_int_eq(ml_gguf_array_get(&a, 0, &v, &e), ML_OK);
    check_str(&v, "");
    ck_assert_int_eq(ml_gguf_array_get(&a, 2, &v, &e), ML_OK);
    check_str(&v, "\xe2\x96\x81the");
    ck_assert_int_eq(ml_gguf_array_get(&a, 3, &v, &e), ML_OK);
    ck_assert_uint_eq(v.nbytes, 300);

    /* [[1, 2, 3], [4], [5, 6]]: gguf-py picks i32 for Python ints. */
    ck_assert_int_eq(ml_gguf_get_array(g, "t.arr.nested", &a, NULL, &e), ML_OK);
    ck_assert_int_eq(a.elem_type, ML_GGUF_ARRAY);
    ck_assert_uint_eq(a.count, 3);
    ml_gguf_value in;
    ck_assert_int_eq(ml_gguf_array_get(&a, 2, &in, &e), ML_OK);
    ck_assert_int_eq(in.elem_type, ML_GGUF_I32);
    ck_assert_uint_eq(in.count, 2);
    ck_assert_int_eq(elem_i64(&in, 1), 6);
    ck_assert_int_eq(ml_gguf_get_array(g, "t.arr.nested_str", &a, NULL, &e), ML_OK);
    ck_assert_int_eq(ml_gguf_array_get(&a, 0, &in, &e), ML_OK);
    ck_assert_int_eq(ml_gguf_array_get(&in, 1, &v, &e), ML_OK);
    check_str(&v, "c");
    ck_assert_int_eq(ml_gguf_array_get(&a, 1, &in, &e), ML_OK);
    ck_assert_int_eq(ml_gguf_array_get(&in, 0, &v, &e), ML_OK);
    check_str(&v, "d");
    ml_gguf_close(g);
}
END_TEST

START_TEST(writer_tensors)
{
    ml_gguf *g = open_fixture("writer.gguf");
    ml_error e;
    ck_assert_uint_eq(ml_gguf_n_tensors(g), 5);
    /* a.f32: numpy (3, 64) is ggml dims [64, 3]; values k/4 - 3. */
    const ml_gguf_tensor *t = ml_gguf_find_tensor(g, "a.f32");
    ck_assert_ptr_eq(t, ml_gguf_tensor_at(g, 0));
    ck_assert_uint_eq(t->n_dims, 2);
    ck_assert_uint_eq(t->dims[0], 64);
    ck_assert_uint_eq(t->dims[1], 3);
    ck_assert_uint_eq(t->rows, 3);
    ck_assert_uint_eq(t->cols, 64);
    ck_assert_uint_eq(t->file_offset % 32, 0);
    float out[192];
    ck_assert_int_eq(ml_gguf_dequantize(t, 0, 3, out, &e), ML_OK);
    for (int k = 0; k < 192; k++)
        ck_assert_msg(out[k] == (float)k * 0.25f - 3.0f, "a.f32[%d]", k);
    ck_assert_int_eq(ml_gguf_dequantize(t, 2, 1, out, &e), ML_OK);
    ck_assert(out[0] == 128 * 0.25f - 3.0f);
    /* b.f16: k/8 as f16, exact. */
    t = ml_gguf_find_tensor(g, "b.f16");
    ck_assert_str_eq(t->type_name, "F16");
    ck_assert_uint_eq(t->n_dims, 1);
    ck_assert_uint_eq(t->rows, 1);
    ck_assert_int_eq(ml_gguf_dequantize(t, 0, 1, out, &e), ML_OK);
    for (int k = 0; k < 32; k++)
        ck_assert(out[k] == (float)k / 8.0f);
    /* c.q8_0: gguf-py's Q8_0 of k/16 - 4: within half a step of each block,
     * plus the rounding of d to f16 (127 steps of 2^-11 d at most). */
    t = ml_gguf_find_tensor(g, "c.q8_0");
    ck_assert_str_eq(t->type_name, "Q8_0");
    ck_assert_uint_eq(t->nbytes, 4 * 34);
    ck_assert_int_eq(ml_gguf_dequantize(t, 0, 2, out, &e), ML_OK);
    for (int k = 0; k < 128; k++) {
        float d = ml_f16_to_f32((uint16_t)(t->data[34 * (k / 32)] | t->data[34 * (k / 32) + 1] << 8));
        ck_assert_msg(fabsf(out[k] - ((float)k / 16.0f - 4.0f)) <= d * 0.5625f, "c[%d]", k);
    }
    /* e.f32.3d: numpy (2, 3, 4) is dims [4, 3, 2]: 6 rows of 4. */
    t = ml_gguf_find_tensor(g, "e.f32.3d");
    ck_assert_uint_eq(t->n_dims, 3);
    ck_assert_uint_eq(t->dims[2], 2);
    ck_assert_uint_eq(t->dims[3], 1);
    ck_assert_uint_eq(t->rows, 6);
    ck_assert_int_eq(ml_gguf_dequantize(t, 5, 1, out, &e), ML_OK);
    ck_assert(out[0] == 20.0f && out[3] == 23.0f);
    ml_gguf_close(g);
}
END_TEST

/* A type listed but not dequantized: the error names type and tensor. */
START_TEST(writer_unsupported_type)
{
    ml_gguf *g = open_fixture("writer.gguf");
    const ml_gguf_tensor *t = ml_gguf_find_tensor(g, "blk.0.attn_q.weight");
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(t->type, ML_GGML_IQ2_XXS);
    ck_assert_str_eq(t->type_name, "IQ2_XXS");
    ck_assert_uint_eq(t->nbytes, 2 * 66);
    float out[512];
    ml_error e;
    tu_err_reset(&e);
    TU_CHECK_ERR("IQ2_XXS", ml_gguf_dequantize(t, 0, 1, out, &e), e, ML_E_UNSUPPORTED,
                 "blk.0.attn_q.weight", t->file_offset);
    ck_assert_ptr_nonnull(strstr(e.msg, "IQ2_XXS"));
    ck_assert_ptr_nonnull(strstr(e.msg, "blk.0.attn_q.weight"));
    ml_gguf_close(g);
}
END_TEST

START_TEST(writer_custom_alignment)
{
    ml_gguf *g = open_fixture("writer_align.gguf");
    ml_error e;
    ck_assert_uint_eq(ml_gguf_alignment(g), 64);
    uint32_t a;
    ck_assert_int_eq(ml_gguf_get_u32(g, "general.alignment", &a, NULL, &e), ML_OK);
    ck_assert_uint_eq(a, 64);
    ck_assert_uint_eq(ml_gguf_data_offset(g) % 64, 0);
    const ml_gguf_tensor *y = ml_gguf_find_tensor(g, "y");
    ck_assert_uint_eq(y->offset, 64);
    float out[3];
    ck_assert_int_eq(ml_gguf_dequantize(y, 0, 1, out, &e), ML_OK);
    ck_assert(out[0] == 100.0f && out[2] == 102.0f);
    ml_gguf_close(g);
}
END_TEST

Suite *suite_gguf(void)
{
    Suite *s = suite_create("gguf");
    TCase *tc = tcase_create("read");
    tcase_add_loop_test(tc, full_file_reads_back, 0, 6);
    tcase_add_test(tc, no_tensors_no_padding);
    tcase_add_test(tc, alignment_any_integer);
    tcase_add_test(tc, tensors_out_of_order_with_gaps);
    tcase_add_test(tc, name_of_63_bytes);
    tcase_add_test(tc, getters_convert_and_range_check);
    tcase_add_test(tc, integer_bounds);
    tcase_add_test(tc, bad_values_fail_at_conversion);
    tcase_add_test(tc, big_string_array);
    tcase_add_test(tc, open_from_path);
    tcase_add_test(tc, open_from_pipe);
    suite_add_tcase(s, tc);
    tc = tcase_create("gguf-py");
    tcase_add_test(tc, writer_metadata);
    tcase_add_test(tc, writer_tensors);
    tcase_add_test(tc, writer_unsupported_type);
    tcase_add_test(tc, writer_custom_alignment);
    suite_add_tcase(s, tc);
    return s;
}
