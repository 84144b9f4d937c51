/* check_mlt.c - the .mlt format (mlt(5)): the headers of the six real
 * fixtures, the C writer producing byte for byte what tools/json2mlt.py
 * wrote, every validation rule with its exact status, field and offset on
 * a small file built here, truncations and byte flips that must fail
 * cleanly, the model-vocabulary rule, and the same-tokens check of a
 * draft model. */
#include "check_tok_util.h"
#include "suites.h"

#include <errno.h>
#include <stdlib.h>

/* ---- a small valid tokenizer: kind 2, bytes 'a'..'d', two merges, an
 * added token ---- */

typedef struct small {
    uint8_t *p;
    size_t len;
} small;

/* Layout offsets of the small file, for expected error offsets. */
enum { S_NTOK = 7, S_NMERGE = 2 };
static const char *const small_pieces[S_NTOK] = {"a", "b", "c", "d", "ab", "abc", "<x>"};
static const uint8_t small_attr[S_NTOK] = {0, 0, 0, 0, 0, 0, 1};
static const uint32_t small_merges[S_NMERGE * 3] = {0, 1, 4, 4, 2, 5};

static size_t token_pos(uint32_t id)
{
    size_t pos = ML_MLT_HEADER_SIZE;
    for (uint32_t i = 0; i < id; i++)
        pos += ML_MLT_TOKEN_OVERHEAD + strlen(small_pieces[i]);
    return pos;
}

static void small_tokens(ml_mlt_token *t)
{
    for (int i = 0; i < S_NTOK; i++)
        t[i] = (ml_mlt_token){(const uint8_t *)small_pieces[i], (uint32_t)strlen(small_pieces[i]),
                              small_attr[i]};
}

static void small_header(ml_mlt_header *h)
{
    memset(h, 0, sizeof *h);
    h->kind = ML_MLT_KIND_BYTE_BPE;
    h->bos = 6;
    h->eos = ML_TOKEN_NONE;
    h->flags = ML_MLT_ADD_BOS;
}

static void small_build(small *s)
{
    ml_mlt_header h;
    ml_mlt_token t[S_NTOK];
    tu_mem m;
    ml_error err;
    small_header(&h);
    small_tokens(t);
    tu_mem_init(&m);
    ck_assert_int_eq(ml_mlt_write(&h, t, S_NTOK, small_merges, S_NMERGE, tu_mem_sink, &m, &err),
                     ML_OK);
    s->p = m.p;
    s->len = m.len;
}

static ml_status open_buf(const uint8_t *p, size_t len, ml_error *err)
{
    ml_mlt *t;
    tu_err_reset(err);
    ml_status s = ml_mlt_open_memory(p, len, &t, err);
    ml_mlt_close(t);
    return s;
}

START_TEST(test_small_layout)
{
    small s;
    small_build(&s);
    /* 32 + 7 records + 2 merges, written out by hand. */
    ck_assert_uint_eq(s.len, 32 + 7 * 5 + (1 + 1 + 1 + 1 + 2 + 3 + 3) + 2 * 12);
    ck_assert_int_eq(memcmp(s.p, "MLT1\1\0\0\0\2\0\0\0\7\0\0\0\2\0\0\0\6\0\0\0\377\377\377\377\1\0\0\0",
                            32), 0);
    ck_assert_int_eq(memcmp(s.p + 32, "\0\1\0\0\0a", 6), 0);
    ck_assert_int_eq(memcmp(s.p + token_pos(6), "\1\3\0\0\0<x>", 8), 0);
    ck_assert_int_eq(memcmp(s.p + s.len - 12, "\4\0\0\0\2\0\0\0\5\0\0\0", 12), 0);
    ml_mlt *t;
    ml_error err;
    ck_assert_int_eq(ml_mlt_open_memory(s.p, s.len, &t, &err), ML_OK);
    const ml_mlt_header *h = ml_mlt_get_header(t);
    ck_assert_int_eq(h->n_vocab, 7);
    ck_assert_int_eq(h->n_merges, 2);
    ck_assert_int_eq(h->bos, 6);
    ck_assert_uint_eq(h->eos, ML_TOKEN_NONE);
    ml_mlt_token k = ml_mlt_get_token(t, 5);
    ck_assert_int_eq(k.len, 3);
    ck_assert_int_eq(memcmp(k.bytes, "abc", 3), 0);
    ck_assert_uint_eq(ml_mlt_token_offset(t, 5), token_pos(5));
    k = ml_mlt_get_token(t, 7);
    ck_assert_ptr_null(k.bytes);
    uint32_t l, r, m;
    ml_mlt_get_merge(t, 1, &l, &r, &m);
    ck_assert(l == 4 && r == 2 && m == 5);
    ml_mlt_get_merge(t, 2, &l, &r, &m);
    ck_assert(l == 0 && r == 0 && m == 0);
    ck_assert_int_eq(ml_mlt_check_vocab(t, 7, &err), ML_OK);
    tu_err_reset(&err);
    TU_CHECK_ERR("vocab", ml_mlt_check_vocab(t, 6, &err), err, ML_E_SHAPE, "n_vocab", 12);
    ml_mlt_close(t);
    free(s.p);
}
END_TEST

/* One rule: a change to the small file and what the reader must say. */
typedef struct mutation {
    const char *what;
    void (*apply)(small *s);
    ml_status status;
    const char *field;
    int64_t offset; /* -2: token_pos(arg) + delta, see below */
} mutation;

static void put32(small *s, size_t off, uint32_t v)
{
    s->p[off] = (uint8_t)v;
    s->p[off + 1] = (uint8_t)(v >> 8);
    s->p[off + 2] = (uint8_t)(v >> 16);
    s->p[off + 3] = (uint8_t)(v >> 24);
}

static void m_magic(small *s) { memcpy(s->p, "GGUF", 4); }
static void m_version(small *s) { put32(s, 4, 2); }
static void m_kind(small *s) { put32(s, 8, 3); }
static void m_vocab0(small *s) { put32(s, 12, 0); }
static void m_vocab_big(small *s) { put32(s, 12, (1u << 24) + 1); }
static void m_vocab_file(small *s) { put32(s, 12, 1000); }
static void m_merges_file(small *s) { put32(s, 16, 1000); }
static void m_merges_more(small *s) { put32(s, 16, 3); }
static void m_bos_neg(small *s) { put32(s, 20, (uint32_t)-2); }
static void m_bos_range(small *s) { put32(s, 20, 7); }
static void m_eos_range(small *s) { put32(s, 24, 7); }
static void m_flag_unknown(small *s) { put32(s, 28, 1 | 4096); }
static void m_flag_user(small *s) { put32(s, 28, 1 | ML_MLT_USER_TOKENS); }
static void m_flag_kind(small *s) { put32(s, 28, ML_MLT_PREFIX_FIRST); }
static void m_flag_kind1(small *s) { put32(s, 8, 1); put32(s, 28, ML_MLT_NFC); }
static void m_flag_prefix(small *s) { put32(s, 8, 1); put32(s, 28, 4 | 128); }
static void m_flag_gpt2(small *s) { put32(s, 28, 16 | 32); }
static void m_flag_o200k_gpt2(small *s) { put32(s, 28, ML_MLT_O200K_REGEX | 32); }
static void m_flag_o200k_digits(small *s) { put32(s, 28, ML_MLT_O200K_REGEX | 16); }
static void m_flag_o200k_kind1(small *s) { put32(s, 8, 1); put32(s, 28, ML_MLT_O200K_REGEX); }
static void m_flag_bos(small *s) { put32(s, 20, (uint32_t)-1); }
static void m_attr(small *s) { s->p[token_pos(3)] = 4; }
static void m_attr_user(small *s) { s->p[token_pos(3)] = ML_MLT_USER; }
static void m_len(small *s) { put32(s, token_pos(6) + 1, 1000); }
static void m_byte_len(small *s) { s->p[token_pos(4)] = ML_MLT_BYTE; }
static void m_empty(small *s)
{
    /* token 0 "a" becomes empty: its byte becomes the next record's attr,
     * so shift the rest left by one and shorten the file. */
    size_t p = token_pos(0);
    put32(s, p + 1, 0);
    memmove(s->p + p + 5, s->p + p + 6, s->len - p - 6);
    s->len--;
}
static void m_merge_id(small *s) { put32(s, s->len - 12 + 4, 7); }
static void m_merge_piece(small *s) { put32(s, s->len - 12 + 4, 3); }
static void m_trailing(small *s) { s->p[s->len++] = 0; }
static void m_short_merges(small *s) { s->len -= 1; }
static void m_short_header(small *s) { s->len = 31; }
static void m_empty_file(small *s) { s->len = 0; }

#define SMALL_END (32 + 35 + 12 + 24)

static const mutation mutations[] = {
    {"magic", m_magic, ML_E_FORMAT, "magic", 0},
    {"version", m_version, ML_E_FORMAT, "version", 4},
    {"kind", m_kind, ML_E_FORMAT, "kind", 8},
    {"n_vocab 0", m_vocab0, ML_E_FORMAT, "n_vocab", 12},
    {"n_vocab above 2^24", m_vocab_big, ML_E_FORMAT, "n_vocab", 12},
    {"n_vocab beyond the file", m_vocab_file, ML_E_FORMAT, "n_vocab", 12},
    {"n_merges beyond the file", m_merges_file, ML_E_FORMAT, "n_merges", 16},
    {"n_merges one too many", m_merges_more, ML_E_FORMAT, "n_merges", 16},
    {"bos -2", m_bos_neg, ML_E_FORMAT, "bos", 20},
    {"bos = n_vocab", m_bos_range, ML_E_FORMAT, "bos", 20},
    {"eos = n_vocab", m_eos_range, ML_E_FORMAT, "eos", 24},
    {"unknown flag", m_flag_unknown, ML_E_FORMAT, "flags", 28},
    {"kind-1 flag on kind 2", m_flag_kind, ML_E_FORMAT, "flags", 28},
    {"kind-2 flag on kind 1", m_flag_kind1, ML_E_FORMAT, "flags", 28},
    {"prefix_first with no_prefix", m_flag_prefix, ML_E_FORMAT, "flags", 28},
    {"single digits with gpt2", m_flag_gpt2, ML_E_FORMAT, "flags", 28},
    {"o200k with gpt2", m_flag_o200k_gpt2, ML_E_FORMAT, "flags", 28},
    {"o200k with single digits", m_flag_o200k_digits, ML_E_FORMAT, "flags", 28},
    {"o200k on kind 1", m_flag_o200k_kind1, ML_E_FORMAT, "flags", 28},
    {"add_bos without bos", m_flag_bos, ML_E_FORMAT, "flags", 28},
    {"attr 4", m_attr, ML_E_FORMAT, "token 3", 32 + 3 * 6},
    {"attr 3 without user_tokens", m_attr_user, ML_E_FORMAT, "token 3", 32 + 3 * 6},
    {"user_tokens without attr 3", m_flag_user, ML_E_FORMAT, "flags", 28},
    {"length past the end", m_len, ML_E_FORMAT, "token 6", 32 + 4 * 6 + 7 + 8 + 1},
    {"byte token of 2 bytes", m_byte_len, ML_E_FORMAT, "token 4", 32 + 4 * 6 + 1},
    {"empty piece", m_empty, ML_E_FORMAT, "token 0", 33},
    {"merge id out of range", m_merge_id, ML_E_FORMAT, "merge 1", SMALL_END - 12 + 4},
    {"merged piece", m_merge_piece, ML_E_FORMAT, "merge 1", SMALL_END - 12 + 8},
    {"trailing byte", m_trailing, ML_E_FORMAT, "merges", SMALL_END},
    {"truncated merges", m_short_merges, ML_E_FORMAT, "n_merges", 16},
    {"short header", m_short_header, ML_E_FORMAT, "header", 0},
    {"empty file", m_empty_file, ML_E_FORMAT, "header", 0},
};

START_TEST(test_rules)
{
    const mutation *mu = &mutations[_i];
    small s;
    small_build(&s);
    ck_assert_uint_eq(s.len, SMALL_END);
    s.p = realloc(s.p, s.len + 16);
    mu->apply(&s);
    ml_error err;
    TU_CHECK_ERR(mu->what, open_buf(s.p, s.len, &err), err, mu->status, mu->field, mu->offset);
    free(s.p);
}
END_TEST

/* The writer applies the same rules: a bad header is refused, nothing written. */
START_TEST(test_writer_refuses)
{
    ml_mlt_header h;
    ml_mlt_token t[S_NTOK];
    tu_mem m;
    ml_error err;
    small_header(&h);
    small_tokens(t);
    tu_mem_init(&m);
    h.flags = 4096;
    tu_err_reset(&err);
    TU_CHECK_ERR("writer flags", ml_mlt_write(&h, t, S_NTOK, small_merges, S_NMERGE, tu_mem_sink,
                                              &m, &err), err, ML_E_FORMAT, "flags", 28);
    ck_assert_uint_eq(m.len, 0);
    small_header(&h);
    uint32_t bad[3] = {0, 2, 4}; /* "a" + "c" is not "ab" */
    tu_err_reset(&err);
    TU_CHECK_ERR("writer merge", ml_mlt_write(&h, t, S_NTOK, bad, 1, tu_mem_sink, &m, &err), err,
                 ML_E_FORMAT, "merge 0", 32 + 35 + 12 + 8);
    tu_err_reset(&err);
    TU_CHECK_ERR("writer NULL", ml_mlt_write(&h, NULL, 3, NULL, 0, tu_mem_sink, &m, &err), err,
                 ML_E_INVAL, "", -1);
    ck_assert_uint_eq(m.len, 0);
    tu_mem_free(&m);
}
END_TEST

/* Every prefix of the file, and every byte flipped: an error or a valid
 * file, never a crash (run under ASan). */
START_TEST(test_truncations_and_flips)
{
    small s;
    small_build(&s);
    ml_error err;
    for (size_t n = 0; n < s.len; n++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, s.p, n);
        ml_status st = open_buf(copy, n, &err);
        TU_REQUIRE(st == ML_E_FORMAT, "prefix of %zu bytes: %s", n, ml_status_name(st));
        free(copy);
    }
    for (size_t i = 0; i < s.len; i++)
        for (int bit = 0; bit < 8; bit++) {
            s.p[i] ^= (uint8_t)(1 << bit);
            ml_status st = open_buf(s.p, s.len, &err);
            TU_REQUIRE(st == ML_OK || st == ML_E_FORMAT, "flip %zu.%d: %s", i, bit,
                       ml_status_name(st));
            s.p[i] ^= (uint8_t)(1 << bit);
        }
    free(s.p);
}
END_TEST

/* ---- the six real tokenizers ---- */

typedef struct real {
    const char *name;
    uint32_t kind, n_vocab, n_merges, flags;
    ml_token bos, eos;
} real;

static const real reals[] = {
    {"llama2", 1, 32000, 61249, 1, 1, 2},
    {"mistral", 1, 32000, 58980, 1, 1, 2},
    {"gemma3", 1, 262145, 514906, 1 | 128, 2, 106},
    {"llama3", 2, 128256, 280147, 2, 128000, 128001},
    {"llama3_1", 2, 128256, 280147, 3, 128000, 128009},
    {"qwen3", 2, 151669, 151387, 8 | 16, ML_TOKEN_NONE, 151645},
};

/* Header as json2mlt.py wrote it, and the C writer's bytes equal the file's. */
START_TEST(test_real_rewrite)
{
    const real *r = &reals[_i];
    char file[64];
    snprintf(file, sizeof file, "%s.mlt", r->name);
    size_t len;
    uint8_t *raw = tf_read(file, &len);
    ml_mlt *t;
    ml_error err;
    ck_assert_int_eq(ml_mlt_open_memory(raw, len, &t, &err), ML_OK);
    const ml_mlt_header *h = ml_mlt_get_header(t);
    ck_assert_uint_eq(h->kind, r->kind);
    ck_assert_uint_eq(h->n_vocab, r->n_vocab);
    ck_assert_uint_eq(h->n_merges, r->n_merges);
    ck_assert_uint_eq(h->flags, r->flags);
    ck_assert_int_eq(h->bos, r->bos);
    ck_assert_int_eq(h->eos, r->eos);
    ml_mlt_token *tok = malloc(h->n_vocab * sizeof *tok);
    uint32_t *mg = malloc((size_t)h->n_merges * 3 * sizeof *mg);
    for (uint32_t i = 0; i < h->n_vocab; i++)
        tok[i] = ml_mlt_get_token(t, i);
    for (uint32_t i = 0; i < h->n_merges; i++)
        ml_mlt_get_merge(t, i, &mg[3 * i], &mg[3 * i + 1], &mg[3 * i + 2]);
    ml_mlt_header hh = {{0}, 0, h->kind, 0, 0, h->bos, h->eos, h->flags};
    tu_mem m;
    tu_mem_init(&m);
    ck_assert_int_eq(ml_mlt_write(&hh, tok, h->n_vocab, mg, h->n_merges, tu_mem_sink, &m, &err),
                     ML_OK);
    ck_assert_uint_eq(m.len, len);
    ck_assert_int_eq(memcmp(m.p, raw, len), 0);
    tu_mem_free(&m);
    free(tok);
    free(mg);
    ml_mlt_close(t);
    free(raw);
}
END_TEST

/* A draft model's tokenizer against its model's: equal tokens pass; a
 * changed attribute or piece, another count, or another tokenizer of the
 * same size (Mistral's 32000 against Llama 2's: their records first
 * differ at id 260) is a mismatch at the first difference in the second. */
static ml_mlt *small_with(uint32_t id, const char *piece, uint8_t attr, small *s)
{
    ml_mlt_header h;
    ml_mlt_token t[S_NTOK];
    tu_mem m;
    ml_error err;
    ml_mlt *out;
    small_header(&h);
    small_tokens(t);
    if (id < S_NTOK)
        t[id] = (ml_mlt_token){(const uint8_t *)piece, (uint32_t)strlen(piece), attr};
    tu_mem_init(&m);
    ck_assert_int_eq(ml_mlt_write(&h, t, S_NTOK, small_merges, S_NMERGE, tu_mem_sink, &m, &err),
                     ML_OK);
    s->p = m.p;
    s->len = m.len;
    ck_assert_int_eq(ml_mlt_open_memory(s->p, s->len, &out, &err), ML_OK);
    return out;
}

START_TEST(test_same_tokens)
{
    small sa, sb, sc, sd;
    ml_error err;
    ml_mlt *a = small_with(S_NTOK, NULL, 0, &sa), *b = small_with(S_NTOK, NULL, 0, &sb);
    ml_mlt *attr = small_with(6, "<x>", 0, &sc), *piece = small_with(3, "e", 0, &sd);
    tu_err_reset(&err);
    ck_assert_int_eq(ml_mlt_same_tokens(a, b, &err), ML_OK);
    TU_CHECK_ERR("attribute", ml_mlt_same_tokens(a, attr, &err), err, ML_E_MISMATCH, "tokens",
                 token_pos(6));
    tu_err_reset(&err);
    TU_CHECK_ERR("piece", ml_mlt_same_tokens(a, piece, &err), err, ML_E_MISMATCH, "tokens",
                 token_pos(3));
    ml_mlt_close(a), ml_mlt_close(b), ml_mlt_close(attr), ml_mlt_close(piece);
    free(sa.p), free(sb.p), free(sc.p), free(sd.p);
    size_t n2, nm, n3;
    uint8_t *r2 = tf_read("llama2.mlt", &n2), *rm = tf_read("mistral.mlt", &nm),
            *r3 = tf_read("llama3.mlt", &n3);
    ml_mlt *l2, *mi, *l3;
    ck_assert_int_eq(ml_mlt_open_memory(r2, n2, &l2, &err), ML_OK);
    ck_assert_int_eq(ml_mlt_open_memory(rm, nm, &mi, &err), ML_OK);
    ck_assert_int_eq(ml_mlt_open_memory(r3, n3, &l3, &err), ML_OK);
    ck_assert_int_eq(ml_mlt_same_tokens(l2, l2, &err), ML_OK);
    tu_err_reset(&err);
    TU_CHECK_ERR("mistral", ml_mlt_same_tokens(l2, mi, &err), err, ML_E_MISMATCH, "tokens",
                 ml_mlt_token_offset(mi, 260));
    ck_assert_ptr_nonnull(strstr(err.msg, "token 260 "));
    tu_err_reset(&err);
    TU_CHECK_ERR("llama3", ml_mlt_same_tokens(l2, l3, &err), err, ML_E_MISMATCH, "kind", 8);
    size_t ng;
    uint8_t *rg = tf_read("gemma3.mlt", &ng);
    ml_mlt *ge;
    ck_assert_int_eq(ml_mlt_open_memory(rg, ng, &ge, &err), ML_OK);
    tu_err_reset(&err);
    TU_CHECK_ERR("gemma3", ml_mlt_same_tokens(l2, ge, &err), err, ML_E_MISMATCH, "n_vocab", 12);
    ml_mlt_close(l2), ml_mlt_close(mi), ml_mlt_close(l3), ml_mlt_close(ge);
    free(r2), free(rm), free(r3), free(rg);
}
END_TEST

START_TEST(test_open_errors)
{
    ml_mlt *t;
    ml_error err;
    tu_err_reset(&err);
    ck_assert_int_eq(ml_mlt_open("/nonexistent/x.mlt", &t, &err), ML_E_IO);
    ck_assert_ptr_null(t);
    ck_assert_int_eq(err.sys_errno, ENOENT);
    tu_err_reset(&err);
    TU_CHECK_ERR("directory", ml_mlt_open("/", &t, &err), err, ML_E_IO, "", -1);
    const char json[] = "{\"version\": \"1.0\", \"model\": {}}";
    tu_err_reset(&err);
    TU_CHECK_ERR("json", open_buf((const uint8_t *)json, sizeof json - 1, &err), err, ML_E_FORMAT,
                 "magic", 0);
    ck_assert_ptr_nonnull(strstr(err.msg, "json2mlt"));
    char names[128];
    ml_mlt_flag_names(1 | 2 | 128 | 1024 | 2048 | 4096, names, sizeof names);
    ck_assert_str_eq(names, "add_bos ignore_merges no_prefix user_tokens o200k_regex bit12");
}
END_TEST

Suite *suite_mlt(void)
{
    Suite *s = suite_create("mlt");
    TCase *tc = tcase_create("format");
    tcase_add_test(tc, test_small_layout);
    tcase_add_loop_test(tc, test_rules, 0, (int)(sizeof mutations / sizeof mutations[0]));
    tcase_add_test(tc, test_writer_refuses);
    tcase_add_test(tc, test_truncations_and_flips);
    tcase_add_test(tc, test_open_errors);
    tcase_add_test(tc, test_same_tokens);
    suite_add_tcase(s, tc);
    TCase *tr = tcase_create("real");
    tcase_add_loop_test(tr, test_real_rewrite, 0, (int)(sizeof reals / sizeof reals[0]));
    suite_add_tcase(s, tr);
    return s;
}
