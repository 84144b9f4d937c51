/* check_tok.c - the encoder and decoder (lib/tokenizer/tok.c) against the
 * reference: every case of cases-public.tsv (the Hugging Face tokenizers
 * library's ids for 86 strings x 6 tokenizers, with and without special
 * tokens), llama.cpp's vectors, mlcore's hard cases and two 1 MiB inputs
 * (tools/tok-cases.py made the fixtures), id for id; decoding back to the
 * text wherever the reference does; the streaming decoder fed one id at a
 * time.  The six .mlt files are loaded once per test case (an unchecked
 * fixture). */
#include "check_tok_util.h"
#include "suites.h"
#include "tokenizer/tok.h"

#include <stdio.h>
#include <utf8proc.h>
#include <stdlib.h>

/* The six fixtures, and llama2.mlt with flags 1 + 4 as "llama2_first",
 * whose reference is Llama 2's vocabulary under the Metaspace
 * pre-tokenizer with prepend scheme "first" (tools/tok-cases.py). */
#define N_TOK (TF_N + 1)
static const char *const names[N_TOK] = {"llama2", "mistral", "gemma3", "llama3", "llama3_1",
                                         "qwen3", "llama2_first"};
static ml_mlt *mlts[N_TOK];
static ml_tok *toks[N_TOK];
static uint8_t *first_buf;

static void load_all(void)
{
    for (int i = 0; i < TF_N; i++)
        tf_load(names[i], &mlts[i], &toks[i]);
    size_t len;
    ml_error err;
    first_buf = tf_read("llama2.mlt", &len);
    first_buf[28] = ML_MLT_ADD_BOS | ML_MLT_PREFIX_FIRST;
    ck_assert_int_eq(ml_mlt_open_memory(first_buf, len, &mlts[TF_N], &err), ML_OK);
    ck_assert_int_eq(ml_tok_new(mlts[TF_N], &toks[TF_N], &err), ML_OK);
}

static void free_all(void)
{
    for (int i = 0; i < N_TOK; i++) {
        ml_tok_free(toks[i]);
        ml_mlt_close(mlts[i]);
        toks[i] = NULL;
        mlts[i] = NULL;
    }
    free(first_buf);
    first_buf = NULL;
}

static int tok_index(const char *name)
{
    for (int i = 0; i < N_TOK; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}

/* Feeding the ids one at a time gives what ml_tok_decode gives. */
static int stream_matches(const ml_mlt *m, const ml_ids *ids)
{
    char *whole;
    size_t len;
    ml_error err;
    if (ml_tok_decode(m, ids->v, ids->n, 0, &whole, &len, &err))
        return 0;
    tu_mem out;
    tu_mem_init(&out);
    ml_tok_stream st;
    ml_tok_stream_init(&st, m, 0);
    int ok = 1;
    for (size_t i = 0; i < ids->n && ok; i++)
        ok = ml_tok_stream_put(&st, ids->v[i], tu_mem_sink, &out, &err) == ML_OK;
    ok = ok && ml_tok_stream_end(&st, tu_mem_sink, &out, &err) == ML_OK;
    ok = ok && out.len == len && (len == 0 || memcmp(out.p, whole, len) == 0);
    tu_mem_free(&out);
    free(whole);
    return ok;
}

/* Runs every line of a case file; returns the failures (printing the first few). */
static int run_cases(const char *file, int *n_cases, int *n_roundtrips)
{
    tf_case c;
    tf_reader r;
    int fails = 0;
    tf_open(&r, file);
    while (tf_next(&r, &c)) {
        int t = tok_index(c.tokenizer);
        TU_REQUIRE(t >= 0, "%s: unknown tokenizer %s", file, c.tokenizer);
        ml_ids ids = {0};
        ml_error err;
        /* WITH_SPECIAL 2: a user's text, its control tokens only text. */
        ml_status s = c.special == 2
                          ? ml_tok_encode_text(toks[t], c.text, c.text_len, &ids, &err)
                          : ml_tok_encode(toks[t], c.text, c.text_len,
                                          c.special ? ML_TOK_BOS_AUTO : ML_TOK_BOS_NO, &ids, &err);
        TU_REQUIRE(s == ML_OK, "%s %s: %s", c.tokenizer, c.name, err.msg);
        (*n_cases)++;
        if (!tf_ids_equal(&ids, c.ids, c.n_ids)) {
            if (fails++ < 5)
                tf_print_diff(c.tokenizer, c.name, c.special, &ids, c.ids, c.n_ids);
        } else if (c.roundtrip && !c.special) {
            char *text;
            size_t len;
            s = ml_tok_decode(mlts[t], ids.v, ids.n, 0, &text, &len, &err);
            TU_REQUIRE(s == ML_OK, "%s %s decode: %s", c.tokenizer, c.name, err.msg);
            if (len != c.text_len || memcmp(text, c.text, len) != 0) {
                if (fails++ < 5)
                    fprintf(stderr, "%s %s: decoding does not give the text back (%zu vs %zu bytes)\n",
                            c.tokenizer, c.name, len, c.text_len);
            }
            (*n_roundtrips)++;
            free(text);
        }
        if (!stream_matches(mlts[t], &ids) && fails++ < 5)
            fprintf(stderr, "%s %s: the streaming decoder differs\n", c.tokenizer, c.name);
        ml_ids_free(&ids);
    }
    tf_close(&r);
    return fails;
}

static void check_file(const char *file, int min_cases)
{
    int n = 0, rt = 0;
    int fails = run_cases(file, &n, &rt);
    ck_assert_msg(fails == 0, "%s: %d of %d cases differ", file, fails, n);
    ck_assert_msg(n >= min_cases, "%s: only %d cases", file, n);
}

START_TEST(test_public)
{
    check_file("cases-public.tsv", 1032);
}
END_TEST

START_TEST(test_llamacpp)
{
    check_file("cases-llamacpp.tsv", 185);
}
END_TEST

START_TEST(test_hard)
{
    check_file("cases-hard.tsv", 1824);
}
END_TEST

/* A user's text: special tokens spelled out are text, as Hugging Face's
 * split_special_tokens encodes them. */
START_TEST(test_user_text)
{
    check_file("cases-text.tsv", 118);
}
END_TEST

static uint64_t fnv_ids(const ml_ids *ids)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < ids->n; i++)
        for (int b = 0; b < 4; b++)
            h = (h ^ ((ids->v[i] >> (8 * b)) & 0xff)) * 0x100000001b3ull;
    return h;
}

/* 1 MiB inputs: count and checksum of the ids; decoding gives the text
 * back as the reference decodes it (the cut sequence at the end is U+FFFD). */
START_TEST(test_big)
{
    size_t len;
    uint8_t *big = tf_big_text(&len);
    tf_reader r;
    char line[256];
    int n = 0;
    tf_open(&r, "big.tsv");
    while (tf_line(&r, line, sizeof line)) {
        char tk[32], what[8];
        int special;
        size_t count;
        unsigned long long sum;
        ck_assert_int_eq(sscanf(line, "%31s %7s %d %zu %llx", tk, what, &special, &count, &sum), 5);
        int t = tok_index(tk);
        ck_assert_int_ge(t, 0);
        ml_ids ids = {0};
        ml_error err;
        ck_assert_int_eq(ml_tok_encode(toks[t], big, len, special ? ML_TOK_BOS_AUTO : ML_TOK_BOS_NO,
                                       &ids, &err), ML_OK);
        ck_assert_msg(ids.n == count, "%s big %d: %zu ids, expected %zu", tk, special, ids.n, count);
        ck_assert_msg(fnv_ids(&ids) == sum, "%s big %d: checksum differs", tk, special);
        ml_ids_free(&ids);
        n++;
    }
    tf_close(&r);
    ck_assert_int_eq(n, 12);
    free(big);
}
END_TEST

/* ---- small tokenizers built here, one behaviour each ---- */

typedef struct syn {
    tu_mem buf;
    ml_mlt *t;
    ml_tok *k;
} syn;

#define A_N ML_MLT_NORMAL
#define A_A ML_MLT_ADDED
#define A_B ML_MLT_BYTE

static uint32_t syn_id(const char *const *pieces, const uint8_t *attrs, int n, const char *p,
                       size_t len)
{
    for (int i = 0; i < n; i++)
        if (attrs[i] == A_N && strlen(pieces[i]) == len && memcmp(pieces[i], p, len) == 0)
            return (uint32_t)i;
    ck_abort_msg("no piece %.*s", (int)len, p);
    return 0;
}

/* pieces[i] with attrs[i] ("" stands for the byte 0); merges as "LEFT RIGHT" of normal pieces. */
static void syn_build(syn *s, uint32_t kind, uint32_t flags, ml_token bos, ml_token eos,
                      const char *const *pieces, const uint8_t *attrs, int n,
                      const char *const *merges, int nm)
{
    ml_mlt_token tok[300];
    uint32_t mg[3 * 16];
    ml_error err;
    for (int i = 0; i < n; i++)
        tok[i] = (ml_mlt_token){(const uint8_t *)pieces[i],
                                attrs[i] == A_B || !pieces[i][0] ? 1 : (uint32_t)strlen(pieces[i]),
                                attrs[i]};
    for (int r = 0; r < nm; r++) {
        const char *sp = strchr(merges[r], ' ');
        mg[3 * r] = syn_id(pieces, attrs, n, merges[r], (size_t)(sp - merges[r]));
        mg[3 * r + 1] = syn_id(pieces, attrs, n, sp + 1, strlen(sp + 1));
        char both[64];
        snprintf(both, sizeof both, "%.*s%s", (int)(sp - merges[r]), merges[r], sp + 1);
        mg[3 * r + 2] = syn_id(pieces, attrs, n, both, strlen(both));
    }
    ml_mlt_header h = {{0}, 0, kind, 0, 0, bos, eos, flags};
    tu_mem_init(&s->buf);
    ck_assert_msg(ml_mlt_write(&h, tok, (uint32_t)n, mg, (uint32_t)nm, tu_mem_sink, &s->buf, &err)
                  == ML_OK, "%s", err.msg);
    ck_assert_int_eq(ml_mlt_open_memory(s->buf.p, s->buf.len, &s->t, &err), ML_OK);
    ck_assert_int_eq(ml_tok_new(s->t, &s->k, &err), ML_OK);
}

static void syn_free(syn *s)
{
    ml_tok_free(s->k);
    ml_mlt_close(s->t);
    tu_mem_free(&s->buf);
}

/* Encodes text and compares with the expected ids (terminated by -1). */
static void expect(syn *s, const char *text, size_t len, int bos, const int *want)
{
    ml_ids ids = {0};
    ml_error err;
    ck_assert_int_eq(ml_tok_encode(s->k, text, len, bos, &ids, &err), ML_OK);
    size_t n = 0;
    while (want[n] >= 0)
        n++;
    int same = ids.n == n;
    for (size_t i = 0; same && i < n; i++)
        same = ids.v[i] == (uint32_t)want[i];
    if (!same) {
        uint32_t w[64];
        for (size_t i = 0; i < n; i++)
            w[i] = (uint32_t)want[i];
        tf_print_diff("syn", text, bos, &ids, w, n);
    }
    ck_assert_msg(same, "\"%.*s\": ids differ", (int)len, text);
    ml_ids_free(&ids);
}
#define EXPECT(s, text, bos, ...)                                  \
    do {                                                          \
        static const int w_[] = {__VA_ARGS__, -1};                \
        expect(s, text, sizeof(text) - 1, bos, w_);               \
    } while (0)

/* The lowest rank first; among equal ranks the leftmost pair. */
START_TEST(test_merge_order)
{
    static const char *const p[] = {"a", "b", "c", "ab", "bc", "aa"};
    static const uint8_t at[] = {A_N, A_N, A_N, A_N, A_N, A_N};
    static const char *const m1[] = {"b c", "a b", "a a"};
    static const char *const m2[] = {"a b", "b c", "a a"};
    syn s;
    syn_build(&s, 2, 0, ML_TOKEN_NONE, ML_TOKEN_NONE, p, at, 6, m1, 3);
    EXPECT(&s, "abc", ML_TOK_BOS_AUTO, 0, 4);
    EXPECT(&s, "aaa", ML_TOK_BOS_AUTO, 5, 0);
    EXPECT(&s, "aaaa", ML_TOK_BOS_AUTO, 5, 5);
    EXPECT(&s, "aabc", ML_TOK_BOS_AUTO, 5, 4);
    syn_free(&s);
    syn_build(&s, 2, 0, ML_TOKEN_NONE, ML_TOKEN_NONE, p, at, 6, m2, 3);
    EXPECT(&s, "abc", ML_TOK_BOS_AUTO, 3, 2);
    EXPECT(&s, "abcab", ML_TOK_BOS_AUTO, 3, 2, 3);
    syn_free(&s);
}
END_TEST

/* Flag 2: a pre-token that is a piece is one token, merges or not. */
START_TEST(test_ignore_merges)
{
    static const char *const p[] = {"a", "b", "c", "abc"};
    static const uint8_t at[] = {A_N, A_N, A_N, A_N};
    syn s;
    syn_build(&s, 2, 0, ML_TOKEN_NONE, ML_TOKEN_NONE, p, at, 4, NULL, 0);
    EXPECT(&s, "abc", ML_TOK_BOS_AUTO, 0, 1, 2);
    syn_free(&s);
    syn_build(&s, 2, ML_MLT_IGNORE_MERGES, ML_TOKEN_NONE, ML_TOKEN_NONE, p, at, 4, NULL, 0);
    EXPECT(&s, "abc", ML_TOK_BOS_AUTO, 3);
    EXPECT(&s, "abca", ML_TOK_BOS_AUTO, 0, 1, 2, 0);
    syn_free(&s);
}
END_TEST

/* Added tokens first, the longest at the leftmost position; BOS. */
START_TEST(test_added_and_bos)
{
    static const char *const p[] = {"q", "y", "z", "<", "x", ">", "<x>", "<x>y", "<s>"};
    static const uint8_t at[] = {A_N, A_N, A_N, A_N, A_N, A_N, A_A, A_A, A_A};
    syn s;
    syn_build(&s, 2, ML_MLT_ADD_BOS, 8, ML_TOKEN_NONE, p, at, 9, NULL, 0);
    EXPECT(&s, "q<x>yz<x>", ML_TOK_BOS_NO, 0, 7, 2, 6);
    EXPECT(&s, "<x<x>", ML_TOK_BOS_NO, 3, 4, 6);
    EXPECT(&s, "q", ML_TOK_BOS_AUTO, 8, 0);
    EXPECT(&s, "<s>", ML_TOK_BOS_YES, 8, 8);
    EXPECT(&s, "", ML_TOK_BOS_AUTO, 8);
    syn_free(&s);
    static const char *const p2[] = {"q"};
    static const uint8_t at2[] = {A_N};
    syn_build(&s, 2, 0, ML_TOKEN_NONE, ML_TOKEN_NONE, p2, at2, 1, NULL, 0);
    EXPECT(&s, "q", ML_TOK_BOS_AUTO, 0);
    ml_ids ids = {0};
    ml_error err;
    tu_err_reset(&err);
    TU_CHECK_ERR("bos", ml_tok_encode(s.k, "q", 1, ML_TOK_BOS_YES, &ids, &err), err, ML_E_INVAL,
                 "bos", 20);
    ck_assert_uint_eq(ids.n, 0);
    syn_free(&s);
}
END_TEST

/* Kind 1: the ▁ prefix (every segment, only the first, never), spaces as
 * ▁, and byte fallback. */
START_TEST(test_spm)
{
    static const char *const p[] = {"\xe2\x96\x81", "a", "\342\226\201a", "\xc3", "\xa9",
                                    "<x>", "<s>"};
    static const uint8_t at[] = {A_N, A_N, A_N, A_B, A_B, A_A, A_A};
    static const char *const m[] = {"\xe2\x96\x81 a"};
    syn s;
    syn_build(&s, 1, 0, 6, ML_TOKEN_NONE, p, at, 7, m, 1);
    EXPECT(&s, "a \xc3\xa9", ML_TOK_BOS_NO, 2, 0, 3, 4);
    EXPECT(&s, "a<x>a", ML_TOK_BOS_NO, 2, 5, 2);
    EXPECT(&s, "<x>a", ML_TOK_BOS_NO, 5, 2);
    EXPECT(&s, "  a", ML_TOK_BOS_NO, 0, 0, 2);
    syn_free(&s);
    syn_build(&s, 1, ML_MLT_PREFIX_FIRST, 6, ML_TOKEN_NONE, p, at, 7, m, 1);
    EXPECT(&s, "a<x>a", ML_TOK_BOS_NO, 2, 5, 1);
    EXPECT(&s, "<x>a", ML_TOK_BOS_NO, 5, 1);
    syn_free(&s);
    syn_build(&s, 1, ML_MLT_NO_PREFIX, 6, ML_TOKEN_NONE, p, at, 7, m, 1);
    EXPECT(&s, "a<x> a", ML_TOK_BOS_NO, 1, 5, 2);
    syn_free(&s);
}
END_TEST

/* A kind-2 tokenizer whose ids are the byte values. */
static void bytes_tokenizer(syn *s, uint32_t flags)
{
    static char pieces[256][2];
    static const char *p[257];
    static uint8_t at[257];
    for (int b = 0; b < 256; b++) {
        pieces[b][0] = (char)b;
        p[b] = pieces[b];
        at[b] = A_N;
    }
    /* pieces[0] is "": syn_build reads an empty string as the byte 0. */
    p[256] = "<s>";
    at[256] = A_A;
    syn_build(s, 2, flags, 256, 256, p, at, 257, NULL, 0);
}

/* Invalid UTF-8 becomes U+FFFD, one per maximal subpart. */
START_TEST(test_invalid_utf8)
{
    syn s;
    bytes_tokenizer(&s, 0);
    EXPECT(&s, "a\xff" "b\xe2\x82", ML_TOK_BOS_NO, 'a', 0xef, 0xbf, 0xbd, 'b', 0xef, 0xbf, 0xbd);
    EXPECT(&s, "\xed\xa0\x80", ML_TOK_BOS_NO, 0xef, 0xbf, 0xbd, 0xef, 0xbf, 0xbd, 0xef, 0xbf, 0xbd);
    EXPECT(&s, "\xf0\x80", ML_TOK_BOS_NO, 0xef, 0xbf, 0xbd, 0xef, 0xbf, 0xbd);
    EXPECT(&s, "\xf0\x9f\x98", ML_TOK_BOS_NO, 0xef, 0xbf, 0xbd);
    syn_free(&s);
}
END_TEST

static void feed(ml_tok_stream *st, tu_mem *out, uint32_t id)
{
    ml_error err;
    ck_assert_int_eq(ml_tok_stream_put(st, id, tu_mem_sink, out, &err), ML_OK);
}

#define OUT_IS(out, str) \
    ck_assert_msg((out)->len == sizeof(str) - 1 && memcmp((out)->p, str, (out)->len) == 0, \
                  "output \"%.*s\", expected \"%s\"", (int)(out)->len, (out)->p, str)

/* The streaming decoder holds back an incomplete sequence until it
 * completes, and repairs what cannot complete. */
START_TEST(test_stream)
{
    syn s;
    bytes_tokenizer(&s, 0);
    ml_tok_stream st;
    tu_mem out;
    ml_error err;
    tu_mem_init(&out);
    ml_tok_stream_init(&st, s.t, 0);
    feed(&st, &out, 0xe2);
    feed(&st, &out, 0x82);
    ck_assert_uint_eq(out.len, 0);
    feed(&st, &out, 0xac);
    OUT_IS(&out, "\xe2\x82\xac");
    feed(&st, &out, 0xe2);
    feed(&st, &out, 'a');
    OUT_IS(&out, "\xe2\x82\xac\xef\xbf\xbd" "a");
    out.len = 0;
    feed(&st, &out, 0xff);
    OUT_IS(&out, "\xef\xbf\xbd");
    out.len = 0;
    feed(&st, &out, 0xf0);
    feed(&st, &out, 0x9f);
    ck_assert_uint_eq(out.len, 0);
    ck_assert_int_eq(ml_tok_stream_end(&st, tu_mem_sink, &out, &err), ML_OK);
    OUT_IS(&out, "\xef\xbf\xbd");
    out.len = 0;
    feed(&st, &out, 256);
    OUT_IS(&out, "<s>");
    tu_err_reset(&err);
    TU_CHECK_ERR("id", ml_tok_stream_put(&st, 257, tu_mem_sink, &out, &err), err, ML_E_INVAL, "",
                 -1);
    ml_tok_stream_init(&st, s.t, ML_TOK_SKIP_BOS_EOS);
    out.len = 0;
    feed(&st, &out, 256);
    feed(&st, &out, ' ');
    OUT_IS(&out, " ");
    tu_mem_free(&out);
    syn_free(&s);
}
END_TEST

static void decodes_to(const ml_mlt *t, const uint32_t *ids, size_t n, unsigned opts,
                       const char *want)
{
    char *text;
    size_t len;
    ml_error err;
    ck_assert_int_eq(ml_tok_decode(t, ids, n, opts, &text, &len, &err), ML_OK);
    ck_assert_msg(len == strlen(want) && strcmp(text, want) == 0, "decoded \"%s\", expected \"%s\"",
                  text, want);
    free(text);
}

/* Kind 1 decoding: ▁ is a space, byte tokens are bytes, the prefix's
 * space is dropped at the start (kept with ML_TOK_KEEP_SPACE or flag 128). */
START_TEST(test_decode_spm)
{
    static const char *const p[] = {"\xe2\x96\x81", "a", "\342\226\201a", "\xc3", "\xa9",
                                    "<x>", "<s>"};
    static const uint8_t at[] = {A_N, A_N, A_N, A_B, A_B, A_A, A_A};
    static const char *const m[] = {"\xe2\x96\x81 a"};
    static const uint32_t ids[] = {2, 2, 0, 3, 4};
    static const uint32_t bos_ids[] = {6, 2, 5, 2};
    syn s;
    syn_build(&s, 1, 0, 6, ML_TOKEN_NONE, p, at, 7, m, 1);
    decodes_to(s.t, ids, 5, 0, "a a \xc3\xa9");
    decodes_to(s.t, ids, 5, ML_TOK_KEEP_SPACE, " a a \xc3\xa9");
    decodes_to(s.t, bos_ids, 4, 0, "<s> a<x> a");
    decodes_to(s.t, bos_ids, 4, ML_TOK_SKIP_BOS_EOS, "a<x> a");
    decodes_to(s.t, ids + 3, 1, 0, "\xef\xbf\xbd");
    decodes_to(s.t, NULL, 0, 0, "");
    char *text = (char *)1;
    ml_error err;
    static const uint32_t bad[] = {2, 7};
    tu_err_reset(&err);
    TU_CHECK_ERR("decode id", ml_tok_decode(s.t, bad, 2, 0, &text, NULL, &err), err, ML_E_INVAL,
                 "", -1);
    ck_assert_ptr_null(text);
    syn_free(&s);
    syn_build(&s, 1, ML_MLT_NO_PREFIX, 6, ML_TOKEN_NONE, p, at, 7, m, 1);
    decodes_to(s.t, ids, 5, 0, " a a \xc3\xa9");
    syn_free(&s);
}
END_TEST

/* ---- the pre-tokenizer regexes against the reference's pre-tokenizers ---- */

typedef struct ends {
    const uint8_t *base;
    size_t *v, cap, n;
} ends;

static int on_piece(void *ctx, const uint8_t *s, size_t n)
{
    ends *e = ctx;
    if (e->n < e->cap)
        e->v[e->n] = (size_t)(s - e->base) + n;
    e->n++;
    return 0;
}

/* pretok.tsv: every variant (Llama 3, single digits, marks, GPT-2, digits
 * split off first, o200k) over the public, hard and o200k texts, and o200k
 * over 500 random strings, boundary for boundary. */
START_TEST(test_pretok)
{
    tf_reader r;
    int n = 0, fails = 0;
    ml__unicode_init();
    tf_open(&r, "pretok.tsv");
    while (read_pretok(&r)) {
        ends e = {r.text, malloc((r.n_ends + 1) * sizeof(size_t)), r.n_ends + 1, 0};
        ml__pretokenize(r.flags, r.text, r.text_len, on_piece, &e);
        int same = e.n == r.n_ends;
        for (size_t i = 0; same && i < e.n; i++)
            same = e.v[i] == r.ends[i];
        if (!same && fails++ < 5)
            fprintf(stderr, "pretok %s: \"%.*s\": %zu pieces, expected %zu\n", r.variant,
                    (int)r.text_len, r.text, e.n, r.n_ends);
        free(e.v);
        n++;
    }
    tf_close(&r);
    ck_assert_msg(fails == 0, "pretok.tsv: %d of %d texts split differently", fails, n);
    ck_assert_int_eq(n, 1784);
}
END_TEST

/* The NFC quick check: a character marked NFC-stable is its own NFC and
 * is never composed onto a preceding starter (tried after starters that
 * take non-mark second characters: Hangul LV and L, Oriya, Latin). */
START_TEST(test_nfc_stable)
{
    static const utf8proc_int32_t firsts[] = {0xac00, 0x1100, 0x0b47, 0x0041, 0x3046};
    ml__unicode_init();
    int stable = 0;
    for (uint32_t c = 0; c < 0x110000; c += c < 0x30000 ? 1 : 61) {
        if ((c >= 0xd800 && c < 0xe000) || !(ml__uclass(c) & ML__UC_NFC_STABLE))
            continue;
        stable++;
        for (size_t f = 0; f < sizeof firsts / sizeof firsts[0]; f++) {
            utf8proc_int32_t buf[8] = {firsts[f], (utf8proc_int32_t)c};
            utf8proc_ssize_t n = utf8proc_normalize_utf32(buf, 2, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
            TU_REQUIRE(n == 2 && buf[0] == firsts[f] && buf[1] == (utf8proc_int32_t)c,
                       "U+%04X after U+%04X is changed by NFC", c, (unsigned)firsts[f]);
        }
        utf8proc_int32_t one[8] = {(utf8proc_int32_t)c};
        TU_REQUIRE(utf8proc_normalize_utf32(one, 1, UTF8PROC_STABLE | UTF8PROC_COMPOSE) == 1 &&
                       one[0] == (utf8proc_int32_t)c,
                   "U+%04X is changed by NFC", c);
    }
    ck_assert_int_gt(stable, 100000);
    /* And the other way: composing pairs are not all stable. */
    ck_assert(!(ml__uclass(0x0301) & ML__UC_NFC_STABLE));
    ck_assert(!(ml__uclass(0x1161) & ML__UC_NFC_STABLE));
    ck_assert(!(ml__uclass(0x212b) & ML__UC_NFC_STABLE));
    ck_assert(ml__uclass(0x4e00) & ML__UC_NFC_STABLE);
}
END_TEST

Suite *suite_tok(void)
{
    Suite *s = suite_create("tok");
    TCase *tc = tcase_create("reference");
    tcase_add_unchecked_fixture(tc, load_all, free_all);
    tcase_add_test(tc, test_public);
    tcase_add_test(tc, test_llamacpp);
    tcase_add_test(tc, test_hard);
    tcase_add_test(tc, test_user_text);
    tcase_add_test(tc, test_big);
    suite_add_tcase(s, tc);
    TCase *tu = tcase_create("unit");
    tcase_add_test(tu, test_merge_order);
    tcase_add_test(tu, test_ignore_merges);
    tcase_add_test(tu, test_added_and_bos);
    tcase_add_test(tu, test_spm);
    tcase_add_test(tu, test_invalid_utf8);
    tcase_add_test(tu, test_stream);
    tcase_add_test(tu, test_decode_spm);
    tcase_add_test(tu, test_pretok);
    tcase_add_test(tu, test_nfc_stable);
    suite_add_tcase(s, tu);
    return s;
}
