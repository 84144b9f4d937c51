/* check_mlt_chat.c - the chat section of an .mlt (flag 512, mlt(5) CHAT
 * SECTION): the writer's canonical form (ids sorted, repeats dropped, EOS
 * added), access in place, the EOS-only set of files without the section,
 * every rule of the reader with its exact field and offset, and cuts at
 * every offset of the section. */
#include "suites.h"
#include "testutil.h"

#include <stdlib.h>

/* A small kind-2 tokenizer: 6 tokens, no merges, EOS 2. */
enum { N_TOK = 6 };
static const char *const pieces[N_TOK] = {"a", "b", "</s>", "<eot>", "<eom>", "c"};

static ml_mlt_header header(ml_token eos)
{
    ml_mlt_header h;
    memset(&h, 0, sizeof h);
    h.kind = ML_MLT_KIND_BYTE_BPE;
    h.bos = ML_TOKEN_NONE;
    h.eos = eos;
    return h;
}

static void tokens(ml_mlt_token *t)
{
    for (int i = 0; i < N_TOK; i++)
        t[i] = (ml_mlt_token){(const uint8_t *)pieces[i], (uint32_t)strlen(pieces[i]),
                              i >= 2 && i <= 4 ? ML_MLT_ADDED : ML_MLT_NORMAL};
}

static const ml_mlt_template templates[2] = {
    {"default", 7, "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}", 64},
    {"tool_use", 8, "tools: {{ tools }}", 18},
};

/* Writes the tokenizer with eog {4, 3, 4} (EOS 2 is added) and both
 * templates into m. */
static ml_status write_chat(tu_mem *m, ml_token eos, const ml_mlt_chat *chat, ml_error *err)
{
    ml_mlt_header h = header(eos);
    ml_mlt_token t[N_TOK];
    tokens(t);
    tu_mem_init(m);
    return ml_mlt_write_chat(&h, t, N_TOK, NULL, 0, chat, tu_mem_sink, m, err);
}

static const uint32_t eog_in[3] = {4, 3, 4};
static const ml_mlt_chat chat_in = {eog_in, 3, templates, 2};

/* The section starts after the header and the token records. */
static size_t section_start(void)
{
    size_t pos = ML_MLT_HEADER_SIZE;
    for (int i = 0; i < N_TOK; i++)
        pos += ML_MLT_TOKEN_OVERHEAD + strlen(pieces[i]);
    return pos;
}

START_TEST(test_roundtrip)
{
    tu_mem m;
    ml_error err;
    ck_assert_int_eq(write_chat(&m, 2, &chat_in, &err), ML_OK);
    ml_mlt *t;
    ck_assert_int_eq(ml_mlt_open_memory(m.p, m.len, &t, &err), ML_OK);
    ck_assert_uint_eq(ml_mlt_get_header(t)->flags & ML_MLT_CHAT, ML_MLT_CHAT);
    ck_assert_uint_eq(ml_mlt_n_eog(t), 3);
    ck_assert_uint_eq(ml_mlt_eog(t, 0), 2);
    ck_assert_uint_eq(ml_mlt_eog(t, 1), 3);
    ck_assert_uint_eq(ml_mlt_eog(t, 2), 4);
    for (uint32_t id = 0; id < N_TOK + 2; id++)
        ck_assert_int_eq(ml_mlt_is_eog(t, id), id >= 2 && id <= 4);
    ck_assert_uint_eq(ml_mlt_n_templates(t), 2);
    ml_mlt_template k = ml_mlt_get_template(t, 1);
    ck_assert_uint_eq(k.name_len, 8);
    ck_assert_int_eq(memcmp(k.name, "tool_use", 8), 0);
    ck_assert_uint_eq(k.len, 18);
    ck_assert_int_eq(memcmp(k.text, templates[1].text, 18), 0);
    ck_assert_int_eq(ml_mlt_find_template(t, "default", &k), 1);
    ck_assert_int_eq(memcmp(k.text, templates[0].text, templates[0].len), 0);
    ck_assert_int_eq(ml_mlt_find_template(t, "defaul", &k), 0);
    ck_assert_int_eq(ml_mlt_find_template(t, "nothing", &k), 0);
    /* the layout mlt(5) gives: n_eog, 3 ids, n_templates, (len name len text) x 2 */
    ck_assert_uint_eq(m.len, section_start() + 4 + 12 + 4 + (4 + 7 + 4 + 64) + (4 + 8 + 4 + 18));
    const uint8_t *s = m.p + section_start();
    ck_assert_int_eq(memcmp(s, "\3\0\0\0\2\0\0\0\3\0\0\0\4\0\0\0\2\0\0\0\7\0\0\0default", 31), 0);
    ml_mlt_close(t);
    tu_mem_free(&m);
}
END_TEST

START_TEST(test_without_section)
{
    tu_mem m;
    ml_error err;
    ml_mlt *t;
    ck_assert_int_eq(write_chat(&m, 2, NULL, &err), ML_OK);
    ck_assert_uint_eq(m.len, section_start());
    ck_assert_int_eq(ml_mlt_open_memory(m.p, m.len, &t, &err), ML_OK);
    ck_assert_uint_eq(ml_mlt_get_header(t)->flags & ML_MLT_CHAT, 0);
    ck_assert_uint_eq(ml_mlt_n_eog(t), 1);
    ck_assert_uint_eq(ml_mlt_eog(t, 0), 2);
    ck_assert_int_eq(ml_mlt_is_eog(t, 2), 1);
    ck_assert_int_eq(ml_mlt_is_eog(t, 3), 0);
    ck_assert_uint_eq(ml_mlt_n_templates(t), 0);
    ml_mlt_close(t);
    tu_mem_free(&m);
    /* no EOS: nothing ends a generation */
    ck_assert_int_eq(write_chat(&m, ML_TOKEN_NONE, NULL, &err), ML_OK);
    ck_assert_int_eq(ml_mlt_open_memory(m.p, m.len, &t, &err), ML_OK);
    ck_assert_uint_eq(ml_mlt_n_eog(t), 0);
    ck_assert_int_eq(ml_mlt_is_eog(t, 0), 0);
    ml_mlt_close(t);
    tu_mem_free(&m);
    /* a section with ids but no EOS and no template */
    static const uint32_t one = 5;
    ml_mlt_chat c = {&one, 1, NULL, 0};
    ck_assert_int_eq(write_chat(&m, ML_TOKEN_NONE, &c, &err), ML_OK);
    ck_assert_int_eq(ml_mlt_open_memory(m.p, m.len, &t, &err), ML_OK);
    ck_assert_uint_eq(ml_mlt_n_eog(t), 1);
    ck_assert_int_eq(ml_mlt_is_eog(t, 5), 1);
    ml_mlt_close(t);
    tu_mem_free(&m);
}
END_TEST

/* ---- every rule: a mutation of the written section, the status, the
 * field and the offset relative to the section's start ---- */

typedef struct rule {
    const char *what;
    void (*mutate)(tu_mem *m, size_t s);
    const char *field;
    long offset;
    const char *msg; /* a part of the message */
} rule;

static void put(tu_mem *m, size_t at, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    memcpy(m->p + at, b, 4);
}

/* Section offsets of the written file: n_eog 0, ids 4..15, n_templates 16,
 * name_len 20, name 24, text len 31, text 35, second name_len 99, name 103,
 * its text len 111, its text 115, end 133. */
static void m_neog_zero(tu_mem *m, size_t s) { put(m, s, 0); }
static void m_neog_big(tu_mem *m, size_t s) { put(m, s, 257); }
static void m_id_range(tu_mem *m, size_t s) { put(m, s + 8, 6); }
static void m_id_order(tu_mem *m, size_t s) { put(m, s + 12, 3); }
static void m_no_eos(tu_mem *m, size_t s) { put(m, s + 4, 1); }
static void m_ntmpl_big(tu_mem *m, size_t s) { put(m, s + 16, 65); }
static void m_name_zero(tu_mem *m, size_t s) { put(m, s + 20, 0); }
static void m_name_long(tu_mem *m, size_t s) { put(m, s + 20, 65); }
static void m_name_char(tu_mem *m, size_t s) { m->p[s + 26] = ' '; }
/* The second name becomes "default" (7 bytes): what follows moves up one. */
static void m_name_dup(tu_mem *m, size_t s)
{
    put(m, s + 99, 7);
    memcpy(m->p + s + 103, "default", 7);
    put(m, s + 110, 18);
    memmove(m->p + s + 114, m->p + s + 115, 18);
    m->len -= 1;
}
static void m_text_zero(tu_mem *m, size_t s) { put(m, s + 31, 0); }
static void m_text_past(tu_mem *m, size_t s) { put(m, s + 111, 19); }
static void m_text_utf8(tu_mem *m, size_t s) { m->p[s + 40] = 0xC3; m->p[s + 41] = 'x'; }
static void m_text_nul(tu_mem *m, size_t s) { m->p[s + 37] = 0; }
static void m_trailing(tu_mem *m, size_t s) { (void)s; m->p = realloc(m->p, m->len + 3); memset(m->p + m->len, 0, 3); m->len += 3; }

static const rule rules[] = {
    {"n_eog 0", m_neog_zero, "chat.n_eog", 0, "outside 1..256"},
    {"n_eog 257", m_neog_big, "chat.n_eog", 0, "outside 1..256"},
    {"id = n_vocab", m_id_range, "chat.eog 1", 8, "not below n_vocab 6"},
    {"ids not increasing", m_id_order, "chat.eog 2", 12, "increasing order"},
    {"EOS missing", m_no_eos, "chat.eog", 4, "EOS id 2 is not among"},
    {"n_templates 65", m_ntmpl_big, "chat.n_templates", 16, "above 64"},
    {"empty name", m_name_zero, "template 0 name", 20, "outside 1..64"},
    {"name of 65 bytes", m_name_long, "template 0 name", 20, "outside 1..64"},
    {"a space in a name", m_name_char, "template 0 name", 26, "byte 0x20"},
    {"two templates of one name", m_name_dup, "template 1 name", 99, "taken by template 0"},
    {"empty text", m_text_zero, "template 0 text", 31, "outside 1..1048576"},
    {"text past the end", m_text_past, "template 1 text", 111, "past the end"},
    {"invalid UTF-8", m_text_utf8, "template 0 text", 40, "invalid UTF-8"},
    {"NUL in the text", m_text_nul, "template 0 text", 37, "NUL byte"},
    {"bytes after the section", m_trailing, "chat", 133, "3 bytes after the chat section"},
};

START_TEST(test_rules)
{
    const rule *r = &rules[_i];
    tu_mem m;
    ml_error err;
    ck_assert_int_eq(write_chat(&m, 2, &chat_in, &err), ML_OK);
    size_t s = section_start();
    ck_assert_uint_eq(m.len, s + 133);
    r->mutate(&m, s);
    ml_mlt *t;
    tu_err_reset(&err);
    ml_status st = ml_mlt_open_memory(m.p, m.len, &t, &err);
    ck_assert_msg(st == ML_E_FORMAT, "%s: status %d", r->what, st);
    ck_assert_msg(strcmp(err.field, r->field) == 0, "%s: field \"%s\", expected \"%s\" (%s)",
                  r->what, err.field, r->field, err.msg);
    ck_assert_msg(err.offset == (int64_t)(s + (size_t)r->offset), "%s: offset %lld, expected %zu",
                  r->what, (long long)err.offset, s + (size_t)r->offset);
    ck_assert_msg(strstr(err.msg, r->msg), "%s: \"%s\" lacks \"%s\"", r->what, err.msg, r->msg);
    ck_assert_ptr_null(t);
    tu_mem_free(&m);
}
END_TEST

/* Every cut inside the section fails cleanly, naming a chat field. */
START_TEST(test_cuts)
{
    tu_mem m;
    ml_error err;
    ck_assert_int_eq(write_chat(&m, 2, &chat_in, &err), ML_OK);
    for (size_t cut = section_start(); cut < m.len; cut++) {
        ml_mlt *t;
        tu_err_reset(&err);
        ck_assert_int_eq(ml_mlt_open_memory(m.p, cut, &t, &err), ML_E_FORMAT);
        ck_assert_msg(strncmp(err.field, "chat", 4) == 0 || strncmp(err.field, "template", 8) == 0,
                      "cut %zu: field \"%s\"", cut, err.field);
        ck_assert_msg(err.offset >= (int64_t)section_start() && err.offset <= (int64_t)cut,
                      "cut %zu: offset %lld", cut, (long long)err.offset);
    }
    tu_mem_free(&m);
}
END_TEST

/* The flag on a file that has no section is a truncated section. */
START_TEST(test_flag_without_section)
{
    tu_mem m;
    ml_error err;
    ck_assert_int_eq(write_chat(&m, 2, NULL, &err), ML_OK);
    m.p[29] |= 2; /* flags bit 512: bit 1 of the header's byte 29 */
    ml_mlt *t;
    ck_assert_int_eq(ml_mlt_open_memory(m.p, m.len, &t, &err), ML_E_FORMAT);
    ck_assert_str_eq(err.field, "chat.n_eog");
    ck_assert_int_eq(err.offset, (int64_t)section_start());
    tu_mem_free(&m);
}
END_TEST

START_TEST(test_writer_refusals)
{
    tu_mem m;
    ml_error err;
    uint32_t many[ML_MLT_MAX_EOG + 1];
    for (uint32_t i = 0; i < ML_MLT_MAX_EOG + 1; i++)
        many[i] = i % N_TOK;
    ml_mlt_chat c = {many, ML_MLT_MAX_EOG + 1, NULL, 0};
    ck_assert_int_eq(write_chat(&m, 2, &c, &err), ML_E_INVAL);
    tu_mem_free(&m);
    /* an id the vocabulary does not have: the reader's rule refuses it */
    static const uint32_t bad = N_TOK;
    c = (ml_mlt_chat){&bad, 1, NULL, 0};
    ck_assert_int_eq(write_chat(&m, 2, &c, &err), ML_E_FORMAT);
    ck_assert_uint_eq(m.len, 0);
    tu_mem_free(&m);
    /* a name the reader refuses */
    ml_mlt_template k = {"a b", 3, "x", 1};
    c = (ml_mlt_chat){NULL, 0, &k, 1};
    ck_assert_int_eq(write_chat(&m, 2, &c, &err), ML_E_FORMAT);
    ck_assert_str_eq(err.field, "template 0 name");
    tu_mem_free(&m);
    ml_mlt_template big = {"x", 1, NULL, ML_MLT_TEMPLATE_MAX + 1};
    c = (ml_mlt_chat){NULL, 0, &big, 1};
    ck_assert_int_eq(write_chat(&m, 2, &c, &err), ML_E_INVAL);
    tu_mem_free(&m);
}
END_TEST

Suite *suite_mlt_chat(void)
{
    Suite *s = suite_create("mlt_chat");
    TCase *tc = tcase_create("section");
    tcase_add_test(tc, test_roundtrip);
    tcase_add_test(tc, test_without_section);
    tcase_add_loop_test(tc, test_rules, 0, (int)(sizeof rules / sizeof rules[0]));
    tcase_add_test(tc, test_cuts);
    tcase_add_test(tc, test_flag_without_section);
    tcase_add_test(tc, test_writer_refusals);
    suite_add_tcase(s, tc);
    return s;
}
