/* check_stop.c - stop strings over streamed text (lib/runtime/stop.c):
 * against a reference that sees the whole text, over random texts, stop
 * strings and cuts into pieces: what is released is always a prefix of
 * the answer, never a byte that could still start a stop string is
 * released, the stop string that completes first (the earliest of those
 * completing in one piece) wins and is never released; and the argument
 * rules. */
#include "suites.h"
#include "testutil.h"

#include <stdlib.h>

/* The reference, which sees the text only up to the end of each piece,
 * as the stream does: after the first piece at whose end some stop
 * string is in the text, the text up to the earliest such string. */
static size_t reference(const char *text, const size_t *ends, size_t n_pieces, char **stops,
                        size_t n_stops, int *found)
{
    *found = 0;
    for (size_t p = 0; p < n_pieces; p++)
        for (size_t at = 0; at < ends[p]; at++)
            for (size_t i = 0; i < n_stops; i++) {
                size_t m = strlen(stops[i]);
                if (at + m <= ends[p] && memcmp(text + at, stops[i], m) == 0) {
                    *found = 1;
                    return at;
                }
            }
    return n_pieces ? ends[n_pieces - 1] : 0;
}

/* Bytes at the end of text[0..n) that begin some stop string. */
static size_t may_start(const char *text, size_t n, char **stops, size_t n_stops)
{
    size_t best = 0;
    for (size_t i = 0; i < n_stops; i++) {
        size_t m = strlen(stops[i]);
        for (size_t k = 1; k < m && k <= n; k++)
            if (memcmp(text + n - k, stops[i], k) == 0 && k > best)
                best = k;
    }
    return best;
}

static void random_text(tu_rng *r, char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = (char)('a' + tu_below(r, 3));
    buf[n] = 0;
}

START_TEST(test_against_reference)
{
    tu_rng r = {(uint64_t)_i * 7919 + 1};
    for (int round = 0; round < 200; round++) {
        char text[96], stop_buf[4][8], *stops[4];
        size_t n = tu_below(&r, 80), n_stops = tu_below(&r, 4) + (round % 5 != 0);
        random_text(&r, text, n);
        for (size_t i = 0; i < n_stops; i++) {
            random_text(&r, stop_buf[i], 1 + tu_below(&r, 5));
            stops[i] = stop_buf[i];
        }
        ml_stop *s;
        ml_error err;
        ck_assert_int_eq(ml_stop_new((const char *const *)stops, n_stops, &s, &err), ML_OK);
        size_t ends[96], n_pieces = 0;
        for (size_t e = 0; e < n; n_pieces++) {
            e += 1 + tu_below(&r, 6);
            ends[n_pieces] = e < n ? e : n;
            e = ends[n_pieces];
        }
        int found;
        size_t want = reference(text, ends, n_pieces, stops, n_stops, &found);
        char got[96];
        size_t got_n = 0, fed = 0;
        int stopped = 0;
        for (size_t p = 0; p < n_pieces && !stopped; p++) {
            size_t piece = ends[p] - fed;
            const char *e;
            size_t en;
            int rc = ml_stop_push(s, text + fed, piece, &e, &en);
            ck_assert_int_ge(rc, 0);
            fed += piece;
            memcpy(got + got_n, e, en);
            got_n += en;
            stopped = rc;
            /* released: a prefix of the answer, and all that is safe */
            ck_assert_uint_le(got_n, want);
            ck_assert_int_eq(memcmp(got, text, got_n), 0);
            if (!stopped)
                ck_assert_uint_eq(got_n, fed - may_start(text, fed, stops, n_stops));
        }
        if (!stopped) {
            const char *e;
            size_t en;
            ml_stop_flush(s, &e, &en);
            memcpy(got + got_n, e, en);
            got_n += en;
        }
        ck_assert_int_eq(stopped, found);
        ck_assert_int_eq(ml_stop_done(s), found);
        ck_assert_uint_eq(got_n, want);
        ck_assert_int_eq(memcmp(got, text, want), 0);
        ml_stop_free(s);
    }
}
END_TEST

START_TEST(test_cases)
{
    const char *stops[] = {"User:", "\n\n", "Use"};
    ml_stop *s;
    ml_error err;
    ck_assert_int_eq(ml_stop_new(stops, 3, &s, &err), ML_OK);
    const char *e;
    size_t n;
    /* "Us" may start "User:" or "Use": held back */
    ck_assert_int_eq(ml_stop_push(s, "Hello Us", 8, &e, &n), 0);
    ck_assert_uint_eq(n, 6);
    ck_assert_int_eq(memcmp(e, "Hello ", 6), 0);
    /* "Use" is complete: it and everything after it are gone */
    ck_assert_int_eq(ml_stop_push(s, "er: hi", 6, &e, &n), 1);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(ml_stop_push(s, "more", 4, &e, &n), 1);
    ck_assert_uint_eq(n, 0);
    /* a new text */
    ml_stop_reset(s);
    ck_assert_int_eq(ml_stop_push(s, "a\n", 2, &e, &n), 0);
    ck_assert_uint_eq(n, 1);
    ml_stop_flush(s, &e, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(e[0], '\n');
    ml_stop_free(s);
    /* no stop strings: everything at once */
    ck_assert_int_eq(ml_stop_new(NULL, 0, &s, &err), ML_OK);
    ck_assert_int_eq(ml_stop_push(s, "abc", 3, &e, &n), 0);
    ck_assert_uint_eq(n, 3);
    ml_stop_free(s);
}
END_TEST

START_TEST(test_refusals)
{
    ml_stop *s;
    ml_error err;
    const char *empty[] = {"x", ""};
    tu_err_reset(&err);
    ck_assert_int_eq(ml_stop_new(empty, 2, &s, &err), ML_E_INVAL);
    ck_assert_ptr_null(s);
    ck_assert_ptr_nonnull(strstr(err.msg, "stop string 2: 0 bytes"));
    char *big = malloc(ML_STOP_MAX_LEN + 2);
    memset(big, 'x', ML_STOP_MAX_LEN + 1);
    big[ML_STOP_MAX_LEN + 1] = 0;
    const char *one[] = {big};
    ck_assert_int_eq(ml_stop_new(one, 1, &s, &err), ML_E_INVAL);
    big[ML_STOP_MAX_LEN] = 0;
    ck_assert_int_eq(ml_stop_new(one, 1, &s, &err), ML_OK);
    ml_stop_free(s);
    free(big);
    const char *many[ML_STOP_MAX + 1];
    for (int i = 0; i <= ML_STOP_MAX; i++)
        many[i] = "x";
    ck_assert_int_eq(ml_stop_new(many, ML_STOP_MAX + 1, &s, &err), ML_E_INVAL);
    ck_assert_int_eq(ml_stop_new(many, ML_STOP_MAX, &s, &err), ML_OK);
    ml_stop_free(s);
    ml_stop_free(NULL);
}
END_TEST

Suite *suite_stop(void)
{
    Suite *s = suite_create("stop");
    TCase *tc = tcase_create("stop");
    tcase_add_loop_test(tc, test_against_reference, 0, 20);
    tcase_add_test(tc, test_cases);
    tcase_add_test(tc, test_refusals);
    suite_add_tcase(s, tc);
    return s;
}
