/* check_gguf_hostile.c - the GGUF reader on hostile files: every field of
 * a valid hand-built file patched to a bad value, each with its exact
 * status, field (key, tensor, or header field) and byte offset; the file
 * cut at every length; random byte mutations (nothing may crash, leak or
 * read out of bounds: run under ASan + UBSan). */
#include "gguf_build.h"
#include "suites.h"
#include "testutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

/* Opens b and expects failure st at field/off; needle (may be NULL) must
 * appear in the message. */
static void expect(const gb *b, const char *what, ml_status st, const char *field, int64_t off,
                   const char *needle)
{
    ml_error e;
    ml_gguf *g = (ml_gguf *)&e; /* must be reset to NULL */
    tu_err_reset(&e);
    TU_CHECK_ERR(what, ml_gguf_open_memory(b->p, b->len, &g, &e), e, st, field, off);
    ck_assert_ptr_null(g);
    if (needle)
        ck_assert_msg(strstr(e.msg, needle) != NULL, "%s: \"%s\" not in \"%s\"", what, needle,
                      e.msg);
}

static void fresh(gb *b, full_rec *r, uint32_t version)
{
    full_build(b, version, 0, r);
}

/* ---------------------------------------------------------------------------
 * Header
 * ------------------------------------------------------------------------- */

START_TEST(bad_magic)
{
    static const struct {
        const char *magic, *needle;
    } cases[] = {
        {"MLB1", "an .mlb model"},      {"MLT1", ".mlt tokenizer"},
        {"tjgg", "pre-GGUF GGJT"},      {"<!DO", "HTML page"},
        {"vers", "Git LFS pointer"},    {"GGUX", "\"GGUX\" is not \"GGUF\": not a GGUF file"},
        {"\x00\x01\"\\", "\"\\x00\\x01\\x22\\x5c\" is not"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        gb b;
        full_rec r;
        fresh(&b, &r, 3);
        memcpy(b.p, cases[k].magic, 4);
        expect(&b, cases[k].magic, ML_E_FORMAT, "magic", 0, cases[k].needle);
        gb_free(&b);
    }
    gb b;
    gb_init(&b, 3);
    expect(&b, "empty", ML_E_FORMAT, "magic", 0, "needs 4 bytes");
    gb_bytes(&b, "GGU", 3);
    expect(&b, "3 bytes", ML_E_FORMAT, "magic", 0, NULL);
    gb_free(&b);
}
END_TEST

START_TEST(bad_version)
{
    static const struct {
        uint32_t v;
        ml_status st;
        const char *needle;
    } cases[] = {
        {0, ML_E_FORMAT, "version 0"},
        {4, ML_E_UNSUPPORTED, "newer than this reader"},
        {0xffffffffu, ML_E_UNSUPPORTED, "newer"},
        {0x03000000u, ML_E_UNSUPPORTED, "byte-swapped 3: this is a big-endian GGUF"},
        {0x00020000u, ML_E_UNSUPPORTED, "big-endian"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        gb b;
        full_rec r;
        fresh(&b, &r, 3);
        gb_put32(&b, 4, cases[k].v);
        expect(&b, "version", cases[k].st, "version", 4, cases[k].needle);
        gb_free(&b);
    }
}
END_TEST

/* Counts that cannot fit the file; counts beyond the reader's limits. */
START_TEST(huge_counts)
{
    gb b;
    full_rec r;
    fresh(&b, &r, 3);
    gb_put64(&b, 8, 1ull << 60);
    expect(&b, "tensor_count 2^60", ML_E_FORMAT, "tensor_count", 8, "cannot fit");
    gb_put64(&b, 8, UINT64_MAX);
    expect(&b, "tensor_count max", ML_E_FORMAT, "tensor_count", 8, NULL);
    gb_put64(&b, 8, 3);
    gb_put64(&b, 16, 1ull << 60);
    expect(&b, "kv_count 2^60", ML_E_FORMAT, "kv_count", 16, "cannot fit");
    gb_put64(&b, 16, UINT64_MAX / 2);
    expect(&b, "kv_count 2^63", ML_E_FORMAT, "kv_count", 16, NULL);
    gb_free(&b);
    fresh(&b, &r, 1);
    gb_put32(&b, 12, 0xffffffffu);
    expect(&b, "v1 kv_count", ML_E_FORMAT, "kv_count", 12, NULL);
    gb_put32(&b, 8, 0xffffffffu);
    expect(&b, "v1 tensor_count", ML_E_FORMAT, "tensor_count", 8, NULL);
    gb_free(&b);
}
END_TEST

/* Counts that would fit (the rest of the file is large enough) but exceed
 * the limits: refused before anything is allocated. */
START_TEST(counts_beyond_limits)
{
    for (int which = 0; which < 2; which++) {
        uint64_t n = (uint64_t)ML_GGUF_MAX_KV + 1;
        size_t len = 24 + (size_t)n * (which ? 33 : 14);
        uint8_t *p = calloc(1, len);
        ck_assert_ptr_nonnull(p);
        memcpy(p, "GGUF\3\0\0\0", 8);
        gb b = {.p = p, .len = len, .version = 3};
        gb_put64(&b, which ? 8 : 16, n);
        if (which)
            expect(&b, "tensors", ML_E_UNSUPPORTED, "tensor_count", 8, "limit of 1048576");
        else
            expect(&b, "keys", ML_E_UNSUPPORTED, "kv_count", 16, "limit of 1048576");
        free(p);
    }
}
END_TEST

/* ---------------------------------------------------------------------------
 * Keys and values
 * ------------------------------------------------------------------------- */

START_TEST(bad_keys)
{
    gb b;
    full_rec r;
    fresh(&b, &r, 3);
    gb_put64(&b, r.kv_at[K_U16], 1ull << 62);
    expect(&b, "key length", ML_E_FORMAT, "kv[3]", (int64_t)r.kv_at[K_U16],
           "key length 4611686018427387904 exceeds");
    gb_free(&b);

    fresh(&b, &r, 1);
    gb_put32(&b, r.kv_at[K_U16], 0xffffffffu);
    expect(&b, "v1 key length", ML_E_FORMAT, "kv[3]", (int64_t)r.kv_at[K_U16], NULL);
    gb_free(&b);

    fresh(&b, &r, 3);
    b.p[r.kv_at[K_U16] + 8 + 1] = 0;
    expect(&b, "NUL in key", ML_E_FORMAT, "kv[3]", (int64_t)r.kv_at[K_U16], "NUL");
    gb_free(&b);

    /* "s.i8" becomes "s.u8", the key before it. */
    fresh(&b, &r, 3);
    b.p[r.kv_at[K_I8] + 8 + 2] = 'u';
    char needle[64];
    snprintf(needle, sizeof needle, "duplicate key (first at offset %zu)", r.kv_at[K_U8]);
    expect(&b, "duplicate key", ML_E_FORMAT, "s.u8", (int64_t)r.kv_at[K_I8], needle);
    gb_free(&b);

    gb_init(&b, 3);
    gb_header(&b, 0, 1);
    gb_kv(&b, 0, "", ML_GGUF_U8);
    gb_v_fixed(&b, ML_GGUF_U8, 1);
    gb_u8(&b, 0); /* 14 bytes: the smallest a valid KV takes */
    expect(&b, "empty key", ML_E_FORMAT, "kv[0]", 24, "empty key");
    gb_free(&b);
}
END_TEST

START_TEST(bad_values)
{
    gb b;
    full_rec r;
    fresh(&b, &r, 3);
    gb_put32(&b, r.type_at[K_U16], 13);
    expect(&b, "value type 13", ML_E_FORMAT, "s.u16", (int64_t)r.type_at[K_U16],
           "value type 13 is not a GGUF value type");
    gb_put32(&b, r.type_at[K_U16], 0xffffffffu);
    expect(&b, "value type max", ML_E_FORMAT, "s.u16", (int64_t)r.type_at[K_U16], NULL);
    gb_free(&b);

    fresh(&b, &r, 3);
    gb_put64(&b, r.val_at[K_STR] - 8, 1ull << 62);
    expect(&b, "string length", ML_E_FORMAT, "s.str", (int64_t)r.val_at[K_STR] - 8,
           "string length");
    gb_put64(&b, r.val_at[K_STR] - 8, b.len - r.val_at[K_STR] + 1);
    expect(&b, "string one past the end", ML_E_FORMAT, "s.str", (int64_t)r.val_at[K_STR] - 8,
           NULL);
    gb_free(&b);

    fresh(&b, &r, 3);
    gb_put64(&b, r.count_at[K_AU32], 1ull << 61);
    expect(&b, "array count", ML_E_FORMAT, "a.u32", (int64_t)r.count_at[K_AU32],
           "array of 2305843009213693952 u32");
    gb_put64(&b, r.count_at[K_AU32], (1ull << 62) + 1); /* count * 4 wraps */
    expect(&b, "array count wraps", ML_E_FORMAT, "a.u32", (int64_t)r.count_at[K_AU32], NULL);
    gb_free(&b);

    fresh(&b, &r, 3);
    gb_put32(&b, r.elem_type_at[K_AU8], 13);
    expect(&b, "element type", ML_E_FORMAT, "a.u8", (int64_t)r.elem_type_at[K_AU8],
           "array element type 13");
    gb_free(&b);

    fresh(&b, &r, 3);
    gb_put32(&b, r.nested_inner_type_at, 99);
    expect(&b, "nested element type", ML_E_FORMAT, "a.nested", (int64_t)r.nested_inner_type_at,
           "array element type 99");
    gb_free(&b);

    /* A string array claiming 2^40 strings: the walk stops where the file
     * does, at the second string. */
    gb_init(&b, 3);
    gb_header(&b, 0, 1);
    gb_kv(&b, 0, "t", ML_GGUF_ARRAY);
    gb_v_arr(&b, ML_GGUF_STRING, 1ull << 40);
    gb_v_str(&b, "a");
    expect(&b, "string array count", ML_E_FORMAT, "t", (int64_t)b.len, "string needs 8 bytes");
    gb_free(&b);
}
END_TEST

/* Arrays nested 8 deep are walked; 9 are refused where the ninth starts. */
START_TEST(nesting_depth)
{
    for (uint32_t version = 1; version <= 3; version += 2) {
        for (int levels = 8; levels <= 9; levels++) {
            gb b;
            gb_init(&b, version);
            gb_header(&b, 0, 1);
            gb_kv(&b, 0, "deep", ML_GGUF_ARRAY);
            size_t start = b.len, cs = version == 1 ? 4 : 8;
            for (int k = 0; k < levels; k++)
                gb_v_arr(&b, k == levels - 1 ? ML_GGUF_U8 : ML_GGUF_ARRAY, 1);
            gb_e_fixed(&b, ML_GGUF_U8, 42);
            if (levels == 9) {
                expect(&b, "9 levels", ML_E_UNSUPPORTED, "deep", (int64_t)(start + 8 * (4 + cs)),
                       "nested deeper than 8");
            } else {
                ml_gguf *g;
                ml_error e;
                ck_assert_int_eq(ml_gguf_open_memory(b.p, b.len, &g, &e), ML_OK);
                ml_gguf_value v = ml_gguf_find(g, "deep")->value;
                for (int k = 1; k < levels; k++)
                    ck_assert_int_eq(ml_gguf_array_get(&v, 0, &v, &e), ML_OK);
                ck_assert_int_eq(v.elem_type, ML_GGUF_U8);
                ck_assert_int_eq(v.data[0], 42);
                ml_gguf_close(g);
            }
            gb_free(&b);
        }
    }
}
END_TEST

START_TEST(bad_alignment)
{
    static const uint32_t bad[] = {0, 3, 48, 0xffffffffu, 0x80000001u};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        gb b;
        full_rec r;
        full_build(&b, 3, 1, &r);
        gb_put32(&b, r.val_at[K_ALIGN], bad[k]);
        expect(&b, "alignment", ML_E_FORMAT, "general.alignment", (int64_t)r.val_at[K_ALIGN],
               "is not a power of two");
        gb_free(&b);
    }
    /* Wrong kinds. */
    gb b;
    gb_init(&b, 3);
    gb_header(&b, 0, 1);
    gb_kv(&b, 0, "general.alignment", ML_GGUF_F32);
    size_t at = gb_v_fixed(&b, ML_GGUF_F32, 0x42000000); /* 32.0f */
    expect(&b, "f32 alignment", ML_E_FORMAT, "general.alignment", (int64_t)at,
           "value is f32, expected an integer");
    gb_free(&b);
    gb_init(&b, 3);
    gb_header(&b, 0, 1);
    gb_kv(&b, 0, "general.alignment", ML_GGUF_I8);
    at = gb_v_fixed(&b, ML_GGUF_I8, 0xe0); /* -32 */
    expect(&b, "negative alignment", ML_E_FORMAT, "general.alignment", (int64_t)at,
           "-32 (i8) does not fit u64");
    gb_free(&b);
    gb_init(&b, 3);
    gb_header(&b, 0, 1);
    gb_kv(&b, 0, "general.alignment", ML_GGUF_U64);
    at = gb_v_fixed(&b, ML_GGUF_U64, 1ull << 32);
    expect(&b, "2^32", ML_E_FORMAT, "general.alignment", (int64_t)at, "from 1 to 2^31");
    gb_free(&b);
}
END_TEST

/* ---------------------------------------------------------------------------
 * Tensor infos
 * ------------------------------------------------------------------------- */

START_TEST(bad_tensor_names)
{
    gb b;
    full_rec r;
    fresh(&b, &r, 3);
    gb_put64(&b, b.t[0].info_at, 1ull << 50);
    expect(&b, "name length", ML_E_FORMAT, "tensor[0]", (int64_t)b.t[0].info_at,
           "tensor name length");
    gb_free(&b);

    fresh(&b, &r, 3);
    b.p[b.t[1].info_at + 8] = 0;
    expect(&b, "NUL in name", ML_E_FORMAT, "tensor[1]", (int64_t)b.t[1].info_at, "NUL");
    gb_free(&b);

    /* "w.f16" becomes "w.f32". */
    fresh(&b, &r, 3);
    memcpy(b.p + b.t[2].info_at + 8 + 3, "32", 2);
    char needle[64];
    snprintf(needle, sizeof needle, "duplicate tensor name (first at offset %zu)",
             b.t[0].info_at);
    expect(&b, "duplicate name", ML_E_FORMAT, "w.f32", (int64_t)b.t[2].info_at, needle);
    gb_free(&b);

    char name[65];
    memset(name, 'n', 64);
    name[64] = 0;
    uint64_t d[1] = {1};
    gb_init(&b, 3);
    gb_header(&b, 1, 0);
    gb_tensor_info(&b, 0, name, 1, d, ML_GGML_F32, 0, 4);
    gb_data(&b, 32, 4);
    expect(&b, "64-byte name", ML_E_FORMAT, "tensor[0]", 24, "longer than 63");
    gb_free(&b);

    gb_init(&b, 3);
    gb_header(&b, 1, 0);
    gb_tensor_info(&b, 0, "", 1, d, ML_GGML_F32, 0, 4);
    gb_data(&b, 32, 4);
    expect(&b, "empty name", ML_E_FORMAT, "tensor[0]", 24, "empty tensor name");
    gb_free(&b);
}
END_TEST

START_TEST(bad_dims)
{
    static const uint32_t n_dims[] = {0, 5, 0xffffffffu};
    gb b;
    full_rec r;
    for (size_t k = 0; k < 3; k++) {
        fresh(&b, &r, 3);
        gb_put32(&b, b.t[0].n_dims_at, n_dims[k]);
        expect(&b, "n_dims", ML_E_SHAPE, "w.f32", (int64_t)b.t[0].n_dims_at,
               "is not between 1 and 4");
        gb_free(&b);
    }

    fresh(&b, &r, 3);
    gb_put64(&b, b.t[0].dims_at[1], 0);
    expect(&b, "zero dim", ML_E_SHAPE, "w.f32", (int64_t)b.t[0].dims_at[1], "dims[1] is 0");
    gb_free(&b);
    fresh(&b, &r, 1);
    gb_put32(&b, b.t[0].dims_at[0], 0);
    expect(&b, "v1 zero dim", ML_E_SHAPE, "w.f32", (int64_t)b.t[0].dims_at[0], "dims[0] is 0");
    gb_free(&b);

    /* 2^32 * 1 * 1 * 2^32 overflows 64 bits at the last dim. */
    fresh(&b, &r, 3);
    gb_put64(&b, b.t[2].dims_at[0], 1ull << 32);
    gb_put64(&b, b.t[2].dims_at[3], 1ull << 32);
    expect(&b, "element count overflow", ML_E_SHAPE, "w.f16", (int64_t)b.t[2].dims_at[3],
           "overflow");
    gb_free(&b);

    /* One dim of 2^63 is past int64. */
    fresh(&b, &r, 3);
    gb_put64(&b, b.t[2].dims_at[0], 1ull << 63);
    expect(&b, "dim 2^63", ML_E_SHAPE, "w.f16", (int64_t)b.t[2].dims_at[0], NULL);
    gb_free(&b);

    /* 2^62 F32 elements fit int64, their 2^64 bytes do not. */
    fresh(&b, &r, 3);
    gb_put64(&b, b.t[0].dims_at[0], 1ull << 62);
    gb_put64(&b, b.t[0].dims_at[1], 1);
    expect(&b, "byte size overflow", ML_E_SHAPE, "w.f32", (int64_t)b.t[0].dims_at[0],
           "size in bytes");
    gb_free(&b);

    fresh(&b, &r, 3);
    gb_put64(&b, b.t[1].dims_at[0], 48);
    expect(&b, "partial block", ML_E_SHAPE, "w.q8_0", (int64_t)b.t[1].dims_at[0],
           "dims[0] = 48 is not a multiple of the Q8_0 block size 32");
    gb_free(&b);
}
END_TEST

START_TEST(bad_tensor_types)
{
    static const struct {
        uint32_t type;
        const char *needle;
    } cases[] = {
        {99, "type id 99 is unknown"},
        {43, "type id 43 is unknown"},
        {4, "type 4 (Q4_2) was removed"},
        {31, "Q4_0_4_4"},
        {0xffffffffu, "unknown"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        gb b;
        full_rec r;
        fresh(&b, &r, 3);
        gb_put32(&b, b.t[0].type_at, cases[k].type);
        expect(&b, "type", ML_E_UNSUPPORTED, "w.f32", (int64_t)b.t[0].type_at, cases[k].needle);
        gb_free(&b);
    }
    /* A known type whose block does not fit dims[0]: IQ2_XXS (256) on 8. */
    gb b;
    full_rec r;
    fresh(&b, &r, 3);
    gb_put32(&b, b.t[0].type_at, ML_GGML_IQ2_XXS);
    expect(&b, "block", ML_E_SHAPE, "w.f32", (int64_t)b.t[0].dims_at[0], "IQ2_XXS block size 256");
    gb_free(&b);
}
END_TEST

/* ---------------------------------------------------------------------------
 * Data placement
 * ------------------------------------------------------------------------- */

START_TEST(bad_offsets)
{
    gb b;
    full_rec r;
    fresh(&b, &r, 3);
    gb_put64(&b, b.t[1].offset_at, b.t[1].offset + 1);
    expect(&b, "misaligned", ML_E_FORMAT, "w.q8_0", (int64_t)b.t[1].offset_at,
           "data offset 65 is not a multiple of the alignment 32");
    gb_free(&b);

    full_build(&b, 3, 1, &r);
    gb_put64(&b, b.t[1].offset_at, 96);
    expect(&b, "misaligned at 64", ML_E_FORMAT, "w.q8_0", (int64_t)b.t[1].offset_at,
           "alignment 64");
    gb_free(&b);

    static const uint64_t outside[] = {1ull << 40, UINT64_MAX - 31, 224 + 32};
    for (size_t k = 0; k < 3; k++) {
        fresh(&b, &r, 3);
        ck_assert_uint_eq(b.t[2].offset + b.t[2].nbytes, 224);
        gb_put64(&b, b.t[2].offset_at, outside[k]);
        expect(&b, "outside", ML_E_FORMAT, "w.f16", (int64_t)b.t[2].offset_at,
               "past the end of the file");
        gb_free(&b);
    }

    /* w.q8_0 moved into w.f32 (0..64): the later one is named. */
    fresh(&b, &r, 3);
    gb_put64(&b, b.t[1].offset_at, 32);
    expect(&b, "overlap", ML_E_FORMAT, "w.q8_0", (int64_t)b.t[1].offset_at,
           "overlaps tensor \"w.f32\"");
    gb_free(&b);
    /* Same start: the one later in the file's order is named. */
    fresh(&b, &r, 3);
    gb_put64(&b, b.t[2].offset_at, b.t[1].offset);
    expect(&b, "same offset", ML_E_FORMAT, "w.f16", (int64_t)b.t[2].offset_at,
           "overlaps tensor \"w.q8_0\"");
    gb_free(&b);
    /* w.f32 moved after w.f16 still overlaps nothing... then into it. */
    fresh(&b, &r, 3);
    gb_put64(&b, b.t[0].offset_at, 224);
    gb_u64(&b, 0);
    gb_u64(&b, 0);
    gb_u64(&b, 0);
    gb_u64(&b, 0);
    gb_u64(&b, 0);
    gb_u64(&b, 0);
    gb_u64(&b, 0);
    gb_u64(&b, 0);
    ml_gguf *g;
    ml_error e;
    ck_assert_int_eq(ml_gguf_open_memory(b.p, b.len, &g, &e), ML_OK);
    ml_gguf_close(g);
    gb_put64(&b, b.t[0].offset_at, 192);
    expect(&b, "overlap at the end", ML_E_FORMAT, "w.f32", (int64_t)b.t[0].offset_at,
           "overlaps tensor \"w.f16\"");
    gb_free(&b);
}
END_TEST

/* With an alignment of 1: touching tensors are fine, one shared byte is not. */
START_TEST(overlap_by_one_byte)
{
    for (uint64_t second = 4; second >= 3; second--) {
        gb b;
        gb_init(&b, 3);
        gb_header(&b, 2, 1);
        gb_kv(&b, 0, "general.alignment", ML_GGUF_U32);
        gb_v_fixed(&b, ML_GGUF_U32, 1);
        uint64_t d[1] = {4};
        gb_tensor_info(&b, 0, "a", 1, d, ML_GGML_I8, 0, 4);
        gb_tensor_info(&b, 1, "b", 1, d, ML_GGML_I8, second, 4);
        gb_data(&b, 1, 8);
        if (second == 4) {
            ml_gguf *g;
            ml_error e;
            ck_assert_int_eq(ml_gguf_open_memory(b.p, b.len, &g, &e), ML_OK);
            ck_assert_ptr_eq(ml_gguf_find_tensor(g, "b")->data, b.p + b.data_start + 4);
            ml_gguf_close(g);
        } else {
            expect(&b, "one byte", ML_E_FORMAT, "b", (int64_t)b.t[1].offset_at,
                   "overlaps tensor \"a\"");
        }
        gb_free(&b);
    }
}
END_TEST

/* ---------------------------------------------------------------------------
 * Truncation and mutation
 * ------------------------------------------------------------------------- */

/* Every prefix of the full file fails exactly where gb_expect_cut says. */
START_TEST(truncated_everywhere)
{
    uint32_t version = 1 + (uint32_t)_i / 2;
    gb b;
    full_rec r;
    full_build(&b, version, _i % 2, &r);
    uint64_t nt = 3, nkv = r.n_kv;
    for (size_t len = 0; len <= b.len; len++) {
        char field[64];
        int64_t off;
        int fails = gb_expect_cut(&b, len, nt, nkv, field, &off);
        /* An exact-size copy, so ASan sees any read past the end. */
        uint8_t *p = malloc(len ? len : 1);
        memcpy(p, b.p, len);
        ml_gguf *g = NULL;
        ml_error e;
        tu_err_reset(&e);
        ml_status s = ml_gguf_open_memory(p, len, &g, &e);
        if (!fails) {
            TU_REQUIRE(s == ML_OK, "len %zu: %s", len, e.msg);
            ml_gguf_close(g);
        } else {
            TU_REQUIRE(s == ML_E_FORMAT && e.code == ML_E_FORMAT && g == NULL,
                       "len %zu: status %s (%s)", len, ml_status_name(s), e.msg);
            TU_REQUIRE(strcmp(e.field, field) == 0 && e.offset == off,
                       "len %zu: %s at %lld, expected %s at %lld (%s)", len, e.field,
                       (long long)e.offset, field, (long long)off, e.msg);
        }
        free(p);
    }
    ck_assert_int_eq(gb_expect_cut(&b, b.len, nt, nkv, (char[64]){0}, &(int64_t){0}), 0);
    gb_free(&b);
}
END_TEST

/* Every prefix of a gguf-py file that cuts a tensor fails as ML_E_FORMAT
 * at or before the cut; longer ones open. */
START_TEST(truncated_writer_file)
{
    FILE *f = fopen(gb_fixture("writer.gguf"), "rb");
    ck_assert_ptr_nonnull(f);
    uint8_t buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    ck_assert_uint_gt(n, 1000);
    ml_gguf *g = NULL;
    ml_error e;
    ck_assert_int_eq(ml_gguf_open_memory(buf, n, &g, &e), ML_OK);
    uint64_t end = 0;
    for (size_t i = 0; i < ml_gguf_n_tensors(g); i++) {
        const ml_gguf_tensor *t = ml_gguf_tensor_at(g, i);
        if (t->file_offset + t->nbytes > end)
            end = t->file_offset + t->nbytes;
    }
    ml_gguf_close(g);
    for (size_t len = 0; len < n; len++) {
        uint8_t *p = malloc(len ? len : 1);
        memcpy(p, buf, len);
        g = NULL;
        ml_status s = ml_gguf_open_memory(p, len, &g, &e);
        if (len >= end) {
            TU_REQUIRE(s == ML_OK, "len %zu: %s", len, e.msg);
            ml_gguf_close(g);
        } else {
            TU_REQUIRE(s == ML_E_FORMAT && e.offset >= 0 && (size_t)e.offset <= len,
                       "len %zu: %s at %lld (%s)", len, ml_status_name(s), (long long)e.offset,
                       e.msg);
        }
        free(p);
    }
}
END_TEST

static volatile unsigned sink;

/* Everything an opened file offers, touched: KVs, every array element
 * (recursively), every supported tensor dequantized. */
static void walk_value(const ml_gguf_value *v, int depth)
{
    ml_error e;
    if (v->type != ML_GGUF_ARRAY || depth > 3)
        return;
    uint64_t n = v->count < 64 ? v->count : 64;
    for (uint64_t i = 0; i < n; i++) {
        ml_gguf_value x;
        TU_REQUIRE(ml_gguf_array_get(v, i, &x, &e) == ML_OK, "element %llu: %s",
                   (unsigned long long)i, e.msg);
        TU_REQUIRE(x.offset + x.nbytes <= v->offset + v->nbytes, "element outside its array");
        int64_t i64;
        const char *s;
        size_t len;
        ml_gguf_value_i64(&x, &i64, &e);
        if (ml_gguf_value_str(&x, &s, &len, &e) == ML_OK && len)
            sink += (unsigned char)s[0] + (unsigned char)s[len - 1];
        walk_value(&x, depth + 1);
    }
}

static void walk_all(const ml_gguf *g)
{
    for (size_t i = 0; i < ml_gguf_n_kv(g); i++) {
        const ml_gguf_kv *kv = ml_gguf_kv_at(g, i);
        TU_REQUIRE(ml_gguf_find(g, kv->key) == kv, "find %s", kv->key);
        walk_value(&kv->value, 0);
    }
    for (size_t i = 0; i < ml_gguf_n_tensors(g); i++) {
        const ml_gguf_tensor *t = ml_gguf_tensor_at(g, i);
        TU_REQUIRE(ml_gguf_find_tensor(g, t->name) == t, "find %s", t->name);
        if (!ml_gguf_type_supported(t->type) || t->n_elements > 4096)
            continue;
        float *out = malloc(t->n_elements * sizeof *out);
        ml_error e;
        TU_REQUIRE(ml_gguf_dequantize(t, 0, t->rows, out, &e) == ML_OK, "%s", e.msg);
        free(out);
    }
}

START_TEST(random_mutations)
{
    gb b;
    full_rec r;
    full_build(&b, 2 + (uint32_t)_i, _i, &r);
    tu_rng rng = {1234 + (uint64_t)_i};
    uint8_t *p = malloc(b.len);
    unsigned ok = 0;
    for (int round = 0; round < 4000; round++) {
        memcpy(p, b.p, b.len);
        int flips = 1 + (int)tu_below(&rng, 4);
        for (int k = 0; k < flips; k++) {
            size_t at = tu_below(&rng, (uint32_t)b.len);
            /* Mostly the header and infos, where the structure is. */
            if (tu_below(&rng, 4))
                at = tu_below(&rng, (uint32_t)b.infos_end);
            p[at] = (uint8_t)tu_next(&rng);
        }
        ml_gguf *g = NULL;
        ml_error e;
        tu_err_reset(&e);
        ml_status s = ml_gguf_open_memory(p, b.len, &g, &e);
        if (s == ML_OK) {
            ok++;
            walk_all(g);
            ml_gguf_close(g);
            continue;
        }
        TU_REQUIRE(s == ML_E_FORMAT || s == ML_E_SHAPE || s == ML_E_UNSUPPORTED,
                   "round %d: %s (%s)", round, ml_status_name(s), e.msg);
        TU_REQUIRE(g == NULL && e.code == s && e.msg[0] && e.offset >= -1 &&
                       e.offset <= (int64_t)b.len,
                   "round %d: error detail (%s)", round, e.msg);
    }
    ck_assert_uint_gt(ok, 100); /* the walk ran on many mutated files */
    free(p);
    gb_free(&b);
}
END_TEST

Suite *suite_gguf_hostile(void)
{
    Suite *s = suite_create("gguf_hostile");
    TCase *tc = tcase_create("fields");
    tcase_add_test(tc, bad_magic);
    tcase_add_test(tc, bad_version);
    tcase_add_test(tc, huge_counts);
    tcase_add_test(tc, counts_beyond_limits);
    tcase_add_test(tc, bad_keys);
    tcase_add_test(tc, bad_values);
    tcase_add_test(tc, nesting_depth);
    tcase_add_test(tc, bad_alignment);
    tcase_add_test(tc, bad_tensor_names);
    tcase_add_test(tc, bad_dims);
    tcase_add_test(tc, bad_tensor_types);
    tcase_add_test(tc, bad_offsets);
    tcase_add_test(tc, overlap_by_one_byte);
    suite_add_tcase(s, tc);
    tc = tcase_create("cuts");
    tcase_add_loop_test(tc, truncated_everywhere, 0, 6);
    tcase_add_test(tc, truncated_writer_file);
    tcase_add_loop_test(tc, random_mutations, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}
