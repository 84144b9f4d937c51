/* check_chat_builtin.c - the built-in chat templates (ml_chat_builtin):
 * every name resolves and parses, unknown names give NULL, and each
 * built-in renders byte for byte what the real template it stands for
 * renders in Python jinja2 (tests/fixtures/chat/golden, made by
 * tools/jinja_golden.py) for the plain conversations of the catalogue.
 * Where a real template refuses a conversation, the built-in refuses it
 * too, except Gemma 2's refusal of a system message, which the built-in
 * folds as Gemma 3 does.  Beyond the catalogue, a few edge conversations
 * are rendered with the built-in and with the real template by the
 * interpreter (itself proven equal to jinja2 by check_jinja.c). */
#include "suites.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>

#define CHAT_DIR "tests/fixtures/chat"

/* The conversations without tools; the two with tools are left out of the
 * byte-for-byte proofs since no built-in renders tool calls. */
#define PLAIN "system_user user_only multi_turn multi_turn_closed unicode template_syntax"
#define WITH_SYSTEM "system_user multi_turn_closed template_syntax"

typedef struct proof {
    const char *builtin;
    const char *real;    /* a template of tests/fixtures/chat/templates */
    const char *convs;   /* conversations, space-separated */
    int stands_for;      /* 1: the template the built-in is written after */
    const char *instead; /* where real refuses: the template the built-in follows */
} proof;

static const proof proofs[] = {
    {"chatml", "teknium-OpenHermes-2.5-Mistral-7B", PLAIN, 1, NULL},
    /* Qwen 2.5 and SmolLM2 add a default system prompt when there is none. */
    {"chatml", "Qwen-Qwen2.5-7B-Instruct", WITH_SYSTEM, 0, NULL},
    {"chatml", "SmolLM2-135M-Instruct", WITH_SYSTEM, 0, NULL},
    {"llama2", "meta-llama-Llama-2-7b-chat-hf", PLAIN, 1, NULL},
    {"llama3", "meta-llama-Meta-Llama-3-8B-Instruct", PLAIN, 1, NULL},
    {"mistral", "mistralai-Mistral-7B-Instruct-v0.2", PLAIN, 1, NULL},
    {"mistral-v1", "mistralai-Mistral-7B-Instruct-v0.2", PLAIN, 1, NULL},
    {"gemma", "google-gemma-3-1b-it", PLAIN, 1, NULL},
    /* Gemma 2 refuses a system message, which the built-in folds as Gemma 3
     * does. */
    {"gemma", "google-gemma-2-2b-it", "user_only multi_turn unicode", 0, "google-gemma-3-1b-it"},
    {"phi3", "microsoft-Phi-3.5-mini-instruct", PLAIN, 1, NULL},
    {"zephyr", "HuggingFaceH4-zephyr-7b-beta", PLAIN, 1, NULL},
};
enum { N_PROOFS = sizeof proofs / sizeof proofs[0] };

static const char *const names[] = {"chatml", "llama2", "llama3", "mistral", "mistral-v1",
                                    "gemma",  "phi3",   "zephyr"};
enum { N_NAMES = sizeof names / sizeof names[0] };

/* Renders template text (len bytes) with JSON variables; *out is NULL on
 * failure. */
static ml_status render(const char *text, size_t len, const char *vars, size_t vn, char **out,
                        size_t *on, ml_error *err)
{
    ml_jinja *t = NULL;
    *out = NULL;
    ml_status st = ml_jinja_parse(text, len, NULL, &t, err);
    ck_assert_msg(st == ML_OK, "parse: %s", err->msg);
    st = ml_jinja_render_json(t, vars, vn, out, on, err);
    ml_jinja_free(t);
    return st;
}

static ml_status render_builtin(const char *name, const char *vars, size_t vn, char **out,
                                size_t *on, ml_error *err)
{
    const char *text = ml_chat_builtin(name);
    ck_assert_ptr_nonnull(text);
    return render(text, strlen(text), vars, vn, out, on, err);
}

static char *conv_vars(const char *conv, size_t *n)
{
    char path[256];
    snprintf(path, sizeof path, CHAT_DIR "/vars/%s.json", conv);
    char *vars = tu_slurp(path, n);
    ck_assert_msg(vars != NULL, "%s", path);
    return vars;
}

/* jinja2's render of a real template, or NULL where jinja2 raised (then
 * the .err file must exist). */
static char *golden(const char *real, const char *conv, size_t *n)
{
    char path[512];
    snprintf(path, sizeof path, CHAT_DIR "/golden/%s/%s.txt", real, conv);
    char *want = tu_slurp(path, n);
    if (want)
        return want;
    snprintf(path, sizeof path, CHAT_DIR "/golden/%s/%s.err", real, conv);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "no golden file for %s of %s", conv, real);
    fclose(f);
    return NULL;
}

/* Renders the built-in for conv and compares with the real template's
 * golden output, which must exist.  Returns 1 when identical. */
static int builtin_matches(const proof *p, const char *conv)
{
    size_t vn, wn, on;
    char *vars = conv_vars(conv, &vn), *out;
    char *want = golden(p->real, conv, &wn);
    ck_assert_msg(want != NULL, "%s refuses %s: not a proof", p->real, conv);
    ml_error err;
    ml_status st = render_builtin(p->builtin, vars, vn, &out, &on, &err);
    int same = st == ML_OK && on == wn && memcmp(out, want, wn) == 0;
    if (!same)
        fprintf(stderr, "%s vs %s, %s:\n got [%s]\nwant [%s]\n", p->builtin, p->real, conv,
                st ? err.msg : out, want);
    free(vars);
    free(want);
    free(out);
    return same;
}

START_TEST(test_names)
{
    unsigned n = 0;
    for (const char *name; (name = ml_chat_builtin_name(n)) != NULL; n++) {
        ck_assert_msg(ml_chat_builtin(name) != NULL, "%s does not resolve", name);
        for (unsigned j = 0; j < n; j++)
            ck_assert_str_ne(ml_chat_builtin_name(j), name);
    }
    ck_assert_uint_eq(n, N_NAMES);
    ck_assert_ptr_null(ml_chat_builtin_name(n + 1));
    ck_assert_ptr_null(ml_chat_builtin_name(~0u));
    for (int i = 0; i < N_NAMES; i++)
        ck_assert_msg(ml_chat_builtin(names[i]) != NULL, "%s is missing", names[i]);
    /* mistral-v1 is llama.cpp's name for the same format. */
    ck_assert_ptr_eq(ml_chat_builtin("mistral-v1"), ml_chat_builtin("mistral"));
    ck_assert_ptr_null(ml_chat_builtin(NULL));
    static const char *const unknown[] = {"", "ChatML", "chatml ", "chat", "llama", "mistral-v3",
                                          "gemma3", "phi-3"};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
        ck_assert_msg(ml_chat_builtin(unknown[i]) == NULL, "\"%s\" resolves", unknown[i]);
}
END_TEST

START_TEST(test_parse)
{
    for (unsigned i = 0; ml_chat_builtin_name(i) != NULL; i++) {
        const char *text = ml_chat_builtin(ml_chat_builtin_name(i));
        ml_jinja *t = NULL;
        ml_error err;
        ck_assert_msg(ml_jinja_parse(text, strlen(text), NULL, &t, &err) == ML_OK, "%s: %s",
                      ml_chat_builtin_name(i), err.msg);
        ml_jinja_free(t);
    }
}
END_TEST

/* One proof: every conversation it lists renders as the real template. */
START_TEST(test_golden)
{
    const proof *p = &proofs[_i];
    char convs[256];
    snprintf(convs, sizeof convs, "%s", p->convs);
    int count = 0, bad = 0;
    for (char *c = strtok(convs, " "); c; c = strtok(NULL, " "), count++)
        bad += !builtin_matches(p, c);
    ck_assert_int_gt(count, 0);
    ck_assert_msg(bad == 0, "%s: %d of %d conversations differ from %s", p->builtin, bad, count,
                  p->real);
}
END_TEST

/* Every conversation of the catalogue that a real template refuses: the
 * built-in refuses it too (Llama 2, Mistral and Gemma 3 refuse the tool
 * result, a turn that breaks their user/assistant alternation), or, where
 * the proof names a template to follow instead, does what that one does
 * (Gemma 2's refusal of a system message is Gemma 3's folding). */
static int refusal_handled(const proof *p, const char *conv)
{
    size_t vn, wn = 0, on = 0;
    char *want = golden(p->instead ? p->instead : p->real, conv, &wn), *out;
    char *vars = conv_vars(conv, &vn);
    ml_error err;
    ml_status st = render_builtin(p->builtin, vars, vn, &out, &on, &err);
    int ok = want ? st == ML_OK && on == wn && memcmp(out, want, wn) == 0 : st == ML_E_INVAL;
    if (!ok)
        fprintf(stderr, "%s, %s (refused by %s): %s\n", p->builtin, conv, p->real,
                st ? err.msg : out);
    free(want);
    free(vars);
    free(out);
    return ok;
}

START_TEST(test_refusals)
{
    static const char *const all[] = {"system_user", "user_only",       "multi_turn",
                                      "multi_turn_closed", "unicode",  "template_syntax",
                                      "tool_calls",  "tools_no_call"};
    int refused = 0, bad = 0;
    for (int i = 0; i < N_PROOFS; i++) {
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
            size_t n;
            char *want = golden(proofs[i].real, all[k], &n);
            if (want) {
                free(want);
                continue;
            }
            refused++;
            bad += !refusal_handled(&proofs[i], all[k]);
        }
    }
    /* tool_calls for Llama 2, Mistral (twice) and Gemma 3; for Gemma 2 the
     * three conversations with a system message and tool_calls. */
    ck_assert_int_eq(refused, 4 + 4);
    ck_assert_int_eq(bad, 0);
}
END_TEST

/* Conversations outside the catalogue, each rendered with the built-in and
 * with the real template by the interpreter: the same bytes, or the same
 * refusal. */
#define TOKENS "{\"bos_token\": \"<B>\", \"eos_token\": \"<E>\", "
#define MSG(role, content) "{\"role\": \"" role "\", \"content\": \"" content "\"}"
#define GEN_TRUE "\"add_generation_prompt\": true}"
static const char *const edge_convs[] = {
    /* two user turns in a row; an assistant first; a tool result second */
    TOKENS "\"messages\": [" MSG("user", "a") ", " MSG("user", "b") "], " GEN_TRUE,
    TOKENS "\"messages\": [" MSG("assistant", "a") ", " MSG("user", "b") "]}",
    TOKENS "\"messages\": [" MSG("user", "a") ", " MSG("tool", "b") "]}",
    /* an empty system message; spaces around every turn */
    TOKENS "\"messages\": [" MSG("system", "") ", " MSG("user", " b ") "], " GEN_TRUE,
    TOKENS "\"messages\": [" MSG("system", " s ") ", " MSG("user", "  b  ") ", "
        MSG("assistant", " c ") "], \"add_generation_prompt\": false}",
    /* a system message later on, and no add_generation_prompt at all */
    TOKENS "\"messages\": [" MSG("user", "a") ", " MSG("system", "s") "]}",
    /* no messages */
    TOKENS "\"messages\": [], " GEN_TRUE,
};
enum { N_EDGE = sizeof edge_convs / sizeof edge_convs[0] };

START_TEST(test_edges)
{
    const proof *p = &proofs[_i];
    if (!p->stands_for)
        return;
    size_t tn;
    char path[256];
    snprintf(path, sizeof path, CHAT_DIR "/templates/%s.jinja", p->real);
    char *real = tu_slurp(path, &tn);
    ck_assert_msg(real != NULL, "%s", path);
    for (int k = 0; k < N_EDGE; k++) {
        const char *vars = edge_convs[k];
        char *got, *want;
        size_t gn = 0, wn = 0;
        ml_error ge, we;
        ml_status gs = render_builtin(p->builtin, vars, strlen(vars), &got, &gn, &ge);
        ml_status ws = render(real, tn, vars, strlen(vars), &want, &wn, &we);
        ck_assert_msg(gs == ws, "%s vs %s, edge %d: %s / %s", p->builtin, p->real, k,
                      gs ? ge.msg : "ok", ws ? we.msg : "ok");
        ck_assert_msg(gs != ML_OK || (gn == wn && memcmp(got, want, wn) == 0),
                      "%s vs %s, edge %d:\n got [%s]\nwant [%s]", p->builtin, p->real, k, got,
                      want);
        free(got);
        free(want);
    }
    free(real);
}
END_TEST

Suite *suite_chat_builtin(void)
{
    Suite *s = suite_create("chat_builtin");
    TCase *tc = tcase_create("builtin");
    tcase_add_test(tc, test_names);
    tcase_add_test(tc, test_parse);
    tcase_add_loop_test(tc, test_golden, 0, N_PROOFS);
    tcase_add_test(tc, test_refusals);
    tcase_add_loop_test(tc, test_edges, 0, N_PROOFS);
    suite_add_tcase(s, tc);
    return s;
}
