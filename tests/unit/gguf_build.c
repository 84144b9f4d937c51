/* gguf_build.c - the GGUF writer of the unit tests (see gguf_build.h). */
#include "gguf_build.h"

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gb_init(gb *b, uint32_t version)
{
    memset(b, 0, sizeof *b);
    b->version = version;
    b->alignment = 32;
}

void gb_free(gb *b)
{
    free(b->p);
    free(b->atoms);
    memset(b, 0, sizeof *b);
}

static void grow(gb *b, size_t n)
{
    if (b->len + n <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + n)
        cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    ck_assert_ptr_nonnull(p);
    b->p = p;
    b->cap = cap;
}

size_t gb_bytes(gb *b, const void *p, size_t n)
{
    size_t at = b->len;
    grow(b, n);
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
    return at;
}

static size_t put_le(gb *b, uint64_t v, int n)
{
    uint8_t buf[8];
    for (int i = 0; i < n; i++)
        buf[i] = (uint8_t)(v >> (8 * i));
    return gb_bytes(b, buf, (size_t)n);
}

size_t gb_u8(gb *b, uint8_t v)
{
    return put_le(b, v, 1);
}
size_t gb_u16(gb *b, uint16_t v)
{
    return put_le(b, v, 2);
}
size_t gb_u32(gb *b, uint32_t v)
{
    return put_le(b, v, 4);
}
size_t gb_u64(gb *b, uint64_t v)
{
    return put_le(b, v, 8);
}
size_t gb_count(gb *b, uint64_t v)
{
    return b->version == 1 ? gb_u32(b, (uint32_t)v) : gb_u64(b, v);
}

void gb_label(gb *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->field, sizeof b->field, fmt, ap);
    va_end(ap);
}

void gb_mark(gb *b)
{
    if (b->n_atoms == b->cap_atoms) {
        b->cap_atoms = b->cap_atoms ? 2 * b->cap_atoms : 64;
        b->atoms = realloc(b->atoms, b->cap_atoms * sizeof *b->atoms);
        ck_assert_ptr_nonnull(b->atoms);
    }
    b->atoms[b->n_atoms].at = b->len;
    memcpy(b->atoms[b->n_atoms].field, b->field, sizeof b->field);
    b->n_atoms++;
}

void gb_header(gb *b, uint64_t n_tensors, uint64_t n_kv)
{
    gb_label(b, "magic");
    gb_mark(b);
    gb_bytes(b, "GGUF", 4);
    gb_label(b, "version");
    gb_mark(b);
    gb_u32(b, b->version);
    gb_label(b, "tensor_count");
    gb_mark(b);
    gb_count(b, n_tensors);
    gb_label(b, "kv_count");
    gb_mark(b);
    gb_count(b, n_kv);
}

static size_t str_atom(gb *b, const char *s, size_t n)
{
    gb_mark(b);
    size_t at = gb_count(b, n);
    gb_bytes(b, s, n);
    return at;
}

size_t gb_kv(gb *b, size_t i, const char *key, uint32_t vtype)
{
    gb_label(b, "kv[%zu]", i);
    size_t at = str_atom(b, key, strlen(key));
    gb_label(b, "%.63s", key);
    gb_mark(b);
    gb_u32(b, vtype);
    return at;
}

static int fixed_bytes(uint32_t t)
{
    static const int sz[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < 13 ? sz[t] : 0;
}

size_t gb_e_fixed(gb *b, uint32_t vtype, uint64_t bits)
{
    ck_assert_int_gt(fixed_bytes(vtype), 0);
    return put_le(b, bits, fixed_bytes(vtype));
}

size_t gb_v_fixed(gb *b, uint32_t vtype, uint64_t bits)
{
    gb_mark(b);
    return gb_e_fixed(b, vtype, bits);
}

size_t gb_v_str(gb *b, const char *s)
{
    return str_atom(b, s, strlen(s)) + (b->version == 1 ? 4 : 8);
}

size_t gb_v_arr(gb *b, uint32_t elem_type, uint64_t count)
{
    gb_mark(b);
    gb_u32(b, elem_type);
    gb_mark(b);
    return gb_count(b, count);
}

void gb_tensor_info(gb *b, size_t i, const char *name, uint32_t n_dims, const uint64_t *dims,
                    uint32_t type, uint64_t offset, uint64_t nbytes)
{
    ck_assert_uint_lt(b->n_t, sizeof b->t / sizeof b->t[0]);
    gb_tensor *t = &b->t[b->n_t++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = n_dims;
    t->type = type;
    t->offset = offset;
    t->nbytes = nbytes;
    gb_label(b, "tensor[%zu]", i);
    t->info_at = str_atom(b, name, strlen(name));
    gb_label(b, "%.63s", name);
    gb_mark(b);
    t->n_dims_at = gb_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) {
        gb_mark(b);
        t->dims_at[d] = gb_count(b, dims[d]);
        if (d < 4)
            t->dims[d] = dims[d];
    }
    gb_mark(b);
    t->type_at = gb_u32(b, type);
    gb_mark(b);
    t->offset_at = gb_u64(b, offset);
}

void gb_data(gb *b, uint32_t alignment, size_t data_bytes)
{
    b->infos_end = b->len;
    b->alignment = alignment;
    if (b->n_t)
        while (b->len % alignment)
            gb_u8(b, 0);
    b->data_start = b->len;
    for (size_t k = 0; k < data_bytes; k++)
        gb_u8(b, (uint8_t)(k * 7 + 1));
}

int gb_expect_cut(const gb *b, size_t len, uint64_t n_tensors, uint64_t n_kv, char *field,
                  int64_t *offset)
{
    size_t cs = b->version == 1 ? 4 : 8, hdr = 8 + 2 * cs;
    if (len >= hdr && len < b->infos_end) {
        uint64_t left = len - hdr, min_t = cs + 1 + 4 + cs + 4 + 8, min_kv = cs + 1 + 4 + 1;
        if (n_tensors * min_t > left) {
            strcpy(field, "tensor_count");
            *offset = 8;
            return 1;
        }
        if (n_tensors * min_t + n_kv * min_kv > left) {
            strcpy(field, "kv_count");
            *offset = (int64_t)(8 + cs);
            return 1;
        }
    }
    if (len < b->infos_end) {
        size_t k = 0;
        for (size_t i = 0; i < b->n_atoms; i++)
            if (b->atoms[i].at <= len)
                k = i;
        strcpy(field, b->atoms[k].field);
        *offset = (int64_t)b->atoms[k].at;
        return 1;
    }
    for (size_t i = 0; i < b->n_t; i++) {
        const gb_tensor *t = &b->t[i];
        if (b->data_start + t->offset + t->nbytes > len) {
            strcpy(field, t->name);
            *offset = (int64_t)t->offset_at;
            return 1;
        }
    }
    return 0;
}

void gb_put32(gb *b, size_t at, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b->p[at + (size_t)i] = (uint8_t)(v >> (8 * i));
}

void gb_put64(gb *b, size_t at, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b->p[at + (size_t)i] = (uint8_t)(v >> (8 * i));
}

void gb_put_count(gb *b, size_t at, uint64_t v)
{
    if (b->version == 1)
        gb_put32(b, at, (uint32_t)v);
    else
        gb_put64(b, at, v);
}

const char *gb_fixture(const char *name)
{
    static char path[512];
    const char *dir = getenv("MLCORE_FIXTURES");
    snprintf(path, sizeof path, "%s/gguf/%s", dir ? dir : "tests/fixtures", name);
    return path;
}

/* ---------------------------------------------------------------------------
 * The full file
 * ------------------------------------------------------------------------- */

static uint64_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static uint64_t f64_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

static void kv_begin(gb *b, full_rec *r, int k, const char *key, uint32_t type)
{
    size_t cs = b->version == 1 ? 4 : 8;
    r->kv_at[k] = gb_kv(b, r->n_kv++, key, type);
    r->type_at[k] = r->kv_at[k] + cs + strlen(key);
}

static void scalar(gb *b, full_rec *r, int k, const char *key, uint32_t type, uint64_t bits)
{
    kv_begin(b, r, k, key, type);
    r->val_at[k] = gb_v_fixed(b, type, bits);
}

static void fixed_array(gb *b, full_rec *r, int k, const char *key, uint32_t type, size_t n,
                        const uint64_t *bits)
{
    kv_begin(b, r, k, key, ML_GGUF_ARRAY);
    r->elem_type_at[k] = b->len;
    r->count_at[k] = gb_v_arr(b, type, n);
    r->val_at[k] = b->len;
    for (size_t i = 0; i < n; i++)
        gb_e_fixed(b, type, bits[i]);
}

static void strings(gb *b, size_t n, const char *const *s)
{
    for (size_t i = 0; i < n; i++)
        gb_v_str(b, s[i]);
}

static void full_kvs(gb *b, full_rec *r, int align64)
{
    kv_begin(b, r, K_ARCH, "general.architecture", ML_GGUF_STRING);
    r->val_at[K_ARCH] = gb_v_str(b, "llama");
    scalar(b, r, K_U8, "s.u8", ML_GGUF_U8, 0xAB);
    scalar(b, r, K_I8, "s.i8", ML_GGUF_I8, 0xFB);
    scalar(b, r, K_U16, "s.u16", ML_GGUF_U16, 0xBEEF);
    scalar(b, r, K_I16, "s.i16", ML_GGUF_I16, (uint16_t)-12345);
    scalar(b, r, K_U32, "s.u32", ML_GGUF_U32, 0xDEADBEEFu);
    scalar(b, r, K_I32, "s.i32", ML_GGUF_I32, (uint32_t)-123456789);
    scalar(b, r, K_F32, "s.f32", ML_GGUF_F32, f32_bits(3.5f));
    scalar(b, r, K_BOOL, "s.bool", ML_GGUF_BOOL, 1);
    kv_begin(b, r, K_STR, "s.str", ML_GGUF_STRING);
    r->val_at[K_STR] = gb_v_str(b, "hello\xc3\xa9 \xe2\x96\x81x");
    scalar(b, r, K_U64, "s.u64", ML_GGUF_U64, 0x0123456789ABCDEFull);
    scalar(b, r, K_I64, "s.i64", ML_GGUF_I64, (uint64_t)-1234567890123ll);
    scalar(b, r, K_F64, "s.f64", ML_GGUF_F64, f64_bits(1e-300));

    fixed_array(b, r, K_AU8, "a.u8", ML_GGUF_U8, 3, (const uint64_t[]){1, 2, 255});
    fixed_array(b, r, K_AI8, "a.i8", ML_GGUF_I8, 3, (const uint64_t[]){0xff, 0, 127});
    fixed_array(b, r, K_AU16, "a.u16", ML_GGUF_U16, 2, (const uint64_t[]){1, 65535});
    fixed_array(b, r, K_AI16, "a.i16", ML_GGUF_I16, 2, (const uint64_t[]){0x8000, 0x7fff});
    fixed_array(b, r, K_AU32, "a.u32", ML_GGUF_U32, 2, (const uint64_t[]){0, 0xffffffffu});
    fixed_array(b, r, K_AI32, "a.i32", ML_GGUF_I32, 2, (const uint64_t[]){0x80000000u, 5});
    fixed_array(b, r, K_AF32, "a.f32", ML_GGUF_F32, 2,
                (const uint64_t[]){f32_bits(0.5f), f32_bits(-2.0f)});
    fixed_array(b, r, K_ABOOL, "a.bool", ML_GGUF_BOOL, 3, (const uint64_t[]){0, 1, 1});

    kv_begin(b, r, K_ASTR, "a.str", ML_GGUF_ARRAY);
    r->elem_type_at[K_ASTR] = b->len;
    r->count_at[K_ASTR] = gb_v_arr(b, ML_GGUF_STRING, 3);
    r->val_at[K_ASTR] = b->len;
    strings(b, 3, (const char *const[]){"a", "", "hello world"});

    fixed_array(b, r, K_AU64, "a.u64", ML_GGUF_U64, 2, (const uint64_t[]){UINT64_MAX, 7});
    fixed_array(b, r, K_AI64, "a.i64", ML_GGUF_I64, 2,
                (const uint64_t[]){(uint64_t)INT64_MIN, 9});
    fixed_array(b, r, K_AF64, "a.f64", ML_GGUF_F64, 2,
                (const uint64_t[]){f64_bits(-0.0), f64_bits(2.5)});

    /* [[u32 1, 2], [u8], [string "x"]] */
    kv_begin(b, r, K_ANEST, "a.nested", ML_GGUF_ARRAY);
    r->elem_type_at[K_ANEST] = b->len;
    r->count_at[K_ANEST] = gb_v_arr(b, ML_GGUF_ARRAY, 3);
    r->val_at[K_ANEST] = b->len;
    r->nested_inner_type_at = b->len;
    gb_v_arr(b, ML_GGUF_U32, 2);
    gb_e_fixed(b, ML_GGUF_U32, 1);
    gb_e_fixed(b, ML_GGUF_U32, 2);
    gb_v_arr(b, ML_GGUF_U8, 0);
    gb_v_arr(b, ML_GGUF_STRING, 1);
    gb_v_str(b, "x");

    /* [[string "ab", "c"], [string "def"]] */
    kv_begin(b, r, K_ANSTR, "a.nested_str", ML_GGUF_ARRAY);
    r->elem_type_at[K_ANSTR] = b->len;
    r->count_at[K_ANSTR] = gb_v_arr(b, ML_GGUF_ARRAY, 2);
    r->val_at[K_ANSTR] = b->len;
    gb_v_arr(b, ML_GGUF_STRING, 2);
    strings(b, 2, (const char *const[]){"ab", "c"});
    gb_v_arr(b, ML_GGUF_STRING, 1);
    gb_v_str(b, "def");

    /* [[[u8 7]]] */
    kv_begin(b, r, K_ADEEP, "a.deep", ML_GGUF_ARRAY);
    r->elem_type_at[K_ADEEP] = b->len;
    r->count_at[K_ADEEP] = gb_v_arr(b, ML_GGUF_ARRAY, 1);
    r->val_at[K_ADEEP] = b->len;
    gb_v_arr(b, ML_GGUF_ARRAY, 1);
    gb_v_arr(b, ML_GGUF_U8, 1);
    gb_e_fixed(b, ML_GGUF_U8, 7);

    fixed_array(b, r, K_AEMPTY, "a.empty", ML_GGUF_U32, 0, NULL);
    if (align64)
        scalar(b, r, K_ALIGN, "general.alignment", ML_GGUF_U32, 64);
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

void full_build(gb *b, uint32_t version, int align64, full_rec *r)
{
    memset(r, 0, sizeof *r);
    gb_init(b, version);
    uint32_t a = align64 ? 64 : 32;
    gb_header(b, 3, K_COUNT - (align64 ? 0 : 1));
    full_kvs(b, r, align64);
    uint64_t d0[2] = {8, 2}, d1[1] = {64}, d2[4] = {16, 1, 1, 2};
    uint64_t o1 = align_up(64, a), o2 = align_up(o1 + 68, a);
    gb_tensor_info(b, 0, "w.f32", 2, d0, ML_GGML_F32, 0, 64);
    gb_tensor_info(b, 1, "w.q8_0", 1, d1, ML_GGML_Q8_0, o1, 68);
    gb_tensor_info(b, 2, "w.f16", 4, d2, ML_GGML_F16, o2, 64);
    gb_data(b, a, (size_t)(o2 + 64));
}
