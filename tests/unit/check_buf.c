/* check_buf.c - the growth rule of mlcore/buf.h: ml_buf keeps what was
 * appended through every growth, grows geometrically (few reallocations
 * for many appends), refuses sizes past size_t with ML_E_NOMEM and leaves
 * the buffer as it was, takes appends of 0 bytes and frees an empty
 * buffer; ml_array_reserve grows a caller's typed array by the same rule. */
#include "suites.h"
#include "testutil.h"

#include <mlcore/buf.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_buf_append_grows)
{
    ml_buf b = {0};
    size_t growths = 0, last_cap = 0;
    for (size_t i = 0; i < 100000; i++) {
        char c = (char)('a' + i % 26);
        ck_assert_int_eq(ml_buf_append(&b, &c, 1), ML_OK);
        ck_assert_uint_ge(b.cap, b.len);
        growths += b.cap != last_cap;
        last_cap = b.cap;
    }
    ck_assert_uint_eq(b.len, 100000);
    for (size_t i = 0; i < b.len; i++)
        TU_REQUIRE(b.data[i] == (char)('a' + i % 26), "byte %zu is %c", i, b.data[i]);
    /* Doubling from 16 bytes: 16, 32, ..., 131072. */
    ck_assert_uint_le(growths, 14);
    ml_buf_free(&b);
}
END_TEST

START_TEST(test_buf_reserve)
{
    ml_buf b = {0};
    ck_assert_int_eq(ml_buf_append(&b, "hello", 5), ML_OK);
    ck_assert_int_eq(ml_buf_reserve(&b, 1000), ML_OK);
    ck_assert_uint_eq(b.len, 5);
    ck_assert_uint_ge(b.cap - b.len, 1000);
    ck_assert_mem_eq(b.data, "hello", 5);
    size_t cap = b.cap;
    ck_assert_int_eq(ml_buf_reserve(&b, cap - b.len), ML_OK); /* fits: no growth */
    ck_assert_uint_eq(b.cap, cap);
    ml_buf_free(&b);
    ck_assert_int_eq(ml_buf_reserve(&b, 0), ML_OK); /* memory even for nothing */
    ck_assert_ptr_nonnull(b.data);
    ck_assert_uint_eq(b.len, 0);
    ml_buf_free(&b);
}
END_TEST

START_TEST(test_buf_overflow_refused)
{
    ml_buf b = {0};
    ck_assert_int_eq(ml_buf_append(&b, "abc", 3), ML_OK);
    ml_buf before = b;
    ck_assert_int_eq(ml_buf_reserve(&b, SIZE_MAX - 2), ML_E_NOMEM); /* len + more wraps */
    ck_assert_int_eq(ml_buf_reserve(&b, SIZE_MAX), ML_E_NOMEM);
    ck_assert_int_eq(ml_buf_append(&b, "x", SIZE_MAX - 1), ML_E_NOMEM);
    ck_assert_ptr_eq(b.data, before.data);
    ck_assert_uint_eq(b.len, before.len);
    ck_assert_uint_eq(b.cap, before.cap);
    ck_assert_mem_eq(b.data, "abc", 3);
    ml_buf_free(&b);
}
END_TEST

START_TEST(test_buf_append_nothing)
{
    ml_buf b = {0};
    ck_assert_int_eq(ml_buf_append(&b, NULL, 0), ML_OK);
    ck_assert_ptr_null(b.data);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_uint_eq(b.cap, 0);
    ck_assert_int_eq(ml_buf_append(&b, "ab", 2), ML_OK);
    ck_assert_int_eq(ml_buf_append(&b, "zz", 0), ML_OK);
    ck_assert_uint_eq(b.len, 2);
    ck_assert_mem_eq(b.data, "ab", 2);
    ml_buf_free(&b);
}
END_TEST

START_TEST(test_buf_free_empty)
{
    ml_buf b = {0};
    ml_buf_free(&b);
    ck_assert_ptr_null(b.data);
    ck_assert_int_eq(ml_buf_append(&b, "q", 1), ML_OK);
    ml_buf_free(&b);
    ck_assert_ptr_null(b.data);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_uint_eq(b.cap, 0);
    ml_buf_free(&b); /* twice: still empty */
    ck_assert_ptr_null(b.data);
}
END_TEST

START_TEST(test_array_reserve)
{
    uint64_t *v = NULL;
    size_t n = 0, cap = 0, growths = 0;
    for (uint64_t i = 0; i < 10000; i++) {
        size_t old = cap;
        uint64_t *g = ml_array_reserve(v, &cap, n + 1, sizeof *v);
        ck_assert_ptr_nonnull(g);
        growths += cap != old;
        v = g;
        v[n++] = i * i;
    }
    ck_assert_uint_ge(cap, 10000);
    ck_assert_uint_le(growths, 11); /* 16, 32, ..., 16384 */
    for (size_t i = 0; i < n; i++)
        TU_REQUIRE(v[i] == (uint64_t)i * i, "element %zu is %llu", i, (unsigned long long)v[i]);
    size_t c0 = 0;
    void *none = ml_array_reserve(NULL, &c0, 0, sizeof *v); /* NULL only on failure */
    ck_assert_ptr_nonnull(none);
    ck_assert_uint_eq(c0, 16);
    free(none);
    /* A need past double the capacity is met at once. */
    uint64_t *g = ml_array_reserve(v, &cap, 100000, sizeof *v);
    ck_assert_ptr_nonnull(g);
    v = g;
    ck_assert_uint_ge(cap, 100000);
    ck_assert_uint_eq(v[9999], (uint64_t)9999 * 9999);
    free(v);
}
END_TEST

START_TEST(test_array_overflow_refused)
{
    uint64_t first[1] = {7};
    uint64_t *v = malloc(sizeof first);
    ck_assert_ptr_nonnull(v);
    memcpy(v, first, sizeof first);
    size_t cap = 1;
    ck_assert_ptr_null(ml_array_reserve(v, &cap, SIZE_MAX / sizeof *v + 1, sizeof *v));
    ck_assert_ptr_null(ml_array_reserve(v, &cap, SIZE_MAX, sizeof *v));
    ck_assert_uint_eq(cap, 1);
    ck_assert_uint_eq(v[0], 7); /* still the caller's */
    size_t zero_cap = 0;
    ck_assert_ptr_null(ml_array_reserve(NULL, &zero_cap, 1, 0)); /* no element size */
    ck_assert_uint_eq(zero_cap, 0);
    free(v);
}
END_TEST

Suite *suite_buf(void)
{
    Suite *s = suite_create("buf");
    TCase *tc = tcase_create("growth");
    tcase_add_test(tc, test_buf_append_grows);
    tcase_add_test(tc, test_buf_reserve);
    tcase_add_test(tc, test_buf_overflow_refused);
    tcase_add_test(tc, test_buf_append_nothing);
    tcase_add_test(tc, test_buf_free_empty);
    tcase_add_test(tc, test_array_reserve);
    tcase_add_test(tc, test_array_overflow_refused);
    suite_add_tcase(s, tc);
    return s;
}
