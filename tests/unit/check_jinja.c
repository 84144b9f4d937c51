/* check_jinja.c - the Jinja interpreter (<mlcore/jinja.h>): every
 * construct, filter, test and method against Python jinja2's own renders
 * (tests/fixtures/chat/cases.golden), 77 real chat templates for
 * every conversation of the catalogue (tests/fixtures/chat/golden/), the
 * exact status, line and column of bad templates, every limit with its
 * status, the JSON reader, and the API's argument checks.  The fixtures
 * are made by tools/jinja_golden.py. */
#include "suites.h"
#include "testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>

#define CHAT_DIR "tests/fixtures/chat"
#define NOW 1721995200 /* the golden script's JINJA_GOLDEN_NOW */

/* Renders tpl with vars (JSON); returns the status, the output in *out. */
static ml_status render(const char *tpl, size_t tn, const char *vars, size_t vn,
                        const ml_jinja_options *o, char **out, size_t *on, ml_error *err)
{
    ml_jinja_options def = {0};
    def.now = NOW;
    ml_jinja *t = NULL;
    *out = NULL;
    ml_status st = ml_jinja_parse(tpl, tn, o ? o : &def, &t, err);
    if (st != ML_OK) {
        ck_assert_ptr_null(t);
        return st;
    }
    st = ml_jinja_render_json(t, vars, vn, out, on, err);
    ml_jinja_free(t);
    return st;
}

/* The output of a template that must render; fails the test otherwise. */
static char *ok(const char *tpl, const char *vars)
{
    char *out;
    size_t n;
    ml_error err;
    ml_status st = render(tpl, strlen(tpl), vars, vars ? strlen(vars) : 0, NULL, &out, &n, &err);
    ck_assert_msg(st == ML_OK, "%s: %s", tpl, st ? err.msg : "");
    ck_assert_uint_eq(strlen(out), n);
    return out;
}

#define ck_render(tpl, vars, want)                                                               \
    do {                                                                                         \
        char *got_ = ok(tpl, vars);                                                              \
        ck_assert_msg(strcmp(got_, want) == 0, "%s: got [%s], want [%s]", tpl, got_, want);     \
        free(got_);                                                                              \
    } while (0)

/* A template that must fail with status st and a message containing msg. */
static void ck_fails(const char *tpl, const char *vars, const ml_jinja_options *o, ml_status want,
                     const char *msg)
{
    char *out;
    size_t n;
    ml_error err;
    memset(&err, 0xa5, sizeof err);
    ml_status st = render(tpl, strlen(tpl), vars, vars ? strlen(vars) : 0, o, &out, &n, &err);
    ck_assert_msg(st == want, "%s: status %s, want %s (%s)", tpl, ml_status_name(st), ml_status_name(want),
                  st ? err.msg : "");
    ck_assert_ptr_null(out);
    ck_assert_int_eq(err.code, st);
    ck_assert_msg(strstr(err.msg, msg) != NULL, "%s: message [%s] lacks [%s]", tpl, err.msg, msg);
}

/* ---- cases.golden: length-prefixed sections ---- */
typedef struct gcase {
    char name[80];
    const char *tpl, *vars, *res;
    size_t tn, vn, rn;
    int is_err;
} gcase;

static const char *section(const char *p, const char *end, const char *tag, const char **s, size_t *n)
{
    size_t tl = strlen(tag);
    ck_assert_msg(p + 5 + tl < end && memcmp(p, "--- ", 4) == 0 && memcmp(p + 4, tag, tl) == 0,
                  "cases.golden: expected section %s", tag);
    char *e;
    unsigned long long len = strtoull(p + 5 + tl, &e, 10);
    ck_assert(*e == '\n' && (size_t)(end - e - 1) >= len + 1);
    *s = e + 1;
    *n = (size_t)len;
    return e + 1 + len + 1;
}

static const char *next_case(const char *p, const char *end, gcase *c)
{
    if (p >= end)
        return NULL;
    ck_assert(memcmp(p, "=== ", 4) == 0);
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    ck_assert_ptr_nonnull(nl);
    snprintf(c->name, sizeof c->name, "%.*s", (int)(nl - p - 4), p + 4);
    p = section(nl + 1, end, "tpl", &c->tpl, &c->tn);
    p = section(p, end, "vars", &c->vars, &c->vn);
    c->is_err = end - p > 7 && memcmp(p, "--- err", 7) == 0;
    return section(p, end, c->is_err ? "err" : "out", &c->res, &c->rn);
}

/* TemplateSyntaxError (and its subclass TemplateAssertionError) is a
 * syntax error; anything else jinja2 raises happens while rendering. */
static ml_status status_of(const char *res, size_t n)
{
    return n >= 19 && (memcmp(res, "TemplateSyntaxError", 19) == 0 ||
                       (n >= 22 && memcmp(res, "TemplateAssertionError", 22) == 0))
               ? ML_E_FORMAT
               : ML_E_INVAL;
}

START_TEST(test_cases)
{
    size_t n;
    char *all = tu_slurp(CHAT_DIR "/cases.golden", &n);
    ck_assert_ptr_nonnull(all);
    gcase c;
    int count = 0, bad = 0;
    for (const char *p = all; (p = next_case(p, all + n, &c)) != NULL; count++) {
        char *out;
        size_t on;
        ml_error err;
        ml_status st = render(c.tpl, c.tn, c.vars, c.vn, NULL, &out, &on, &err);
        if (c.is_err) {
            ml_status want = status_of(c.res, c.rn);
            if (st != want) {
                fprintf(stderr, "case %s: %s, want %s (jinja2: %.*s)\n", c.name, ml_status_name(st),
                        ml_status_name(want), (int)c.rn, c.res);
                bad++;
            }
        } else if (st != ML_OK || on != c.rn || memcmp(out, c.res, on) != 0) {
            fprintf(stderr, "case %s: got [%s] want [%.*s]\n", c.name, st ? err.msg : out, (int)c.rn,
                    c.res);
            bad++;
        }
        free(out);
    }
    free(all);
    ck_assert_int_gt(count, 100);
    ck_assert_msg(bad == 0, "%d of %d cases differ from jinja2", bad, count);
}
END_TEST

/* ---- the chat templates ---- */

/* The templates README.md lists under "Known differences" ("- `NAME`"). */
static int known_difference(const char *readme, const char *name)
{
    const char *sec = strstr(readme, "## Known differences");
    char pat[300];
    snprintf(pat, sizeof pat, "- `%s`", name);
    return sec && strstr(sec, pat) != NULL;
}

static int render_matches(const char *tpl, size_t tn, const char *dir, const char *conv, int verbose)
{
    char path[1300], *vars, *want, *out;
    size_t vn, wn, on;
    snprintf(path, sizeof path, CHAT_DIR "/vars/%s.json", conv);
    vars = tu_slurp(path, &vn);
    ck_assert_msg(vars != NULL, "%s", path);
    ml_error err;
    ml_status st = render(tpl, tn, vars, vn, NULL, &out, &on, &err);
    snprintf(path, sizeof path, "%.600s/%.80s.txt", dir, conv);
    int same;
    if ((want = tu_slurp(path, &wn)) != NULL) {
        same = st == ML_OK && on == wn && memcmp(out, want, wn) == 0;
    } else {
        snprintf(path, sizeof path, "%.600s/%.80s.err", dir, conv);
        want = tu_slurp(path, &wn);
        ck_assert_msg(want != NULL, "no golden file for %s", path);
        same = st == status_of(want, wn);
    }
    if (!same && verbose)
        fprintf(stderr, "%s: %s\n", path, st ? err.msg : "output differs");
    free(vars);
    free(want);
    free(out);
    return same;
}

static const char *const convs[] = {"system_user", "user_only", "multi_turn", "multi_turn_closed",
                                    "unicode", "template_syntax", "tool_calls", "tools_no_call",
                                    "harmony_reasoning"};

START_TEST(test_golden)
{
    size_t rn;
    char *readme = tu_slurp(CHAT_DIR "/README.md", &rn);
    ck_assert_ptr_nonnull(readme);
    DIR *d = opendir(CHAT_DIR "/templates");
    ck_assert_ptr_nonnull(d);
    int n_tpl = 0, n_same = 0, n_unexpected = 0, n_differ = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (len < 7 || strcmp(e->d_name + len - 6, ".jinja") != 0)
            continue;
        char path[600], dir[600];
        snprintf(path, sizeof path, CHAT_DIR "/templates/%s", e->d_name);
        snprintf(dir, sizeof dir, CHAT_DIR "/golden/%.*s", (int)(len - 6), e->d_name);
        size_t tn;
        char *tpl = tu_slurp(path, &tn);
        ck_assert_ptr_nonnull(tpl);
        int listed = known_difference(readme, e->d_name), all = 1;
        for (size_t i = 0; i < sizeof convs / sizeof *convs; i++)
            all &= render_matches(tpl, tn, dir, convs[i], !listed);
        n_tpl++;
        n_same += all;
        if (listed && all) {
            fprintf(stderr, "%s renders identically now: remove it from the README's list\n", e->d_name);
            n_unexpected++;
        }
        n_differ += !listed && !all;
        free(tpl);
    }
    closedir(d);
    free(readme);
    fprintf(stderr, "check_jinja: %d of %d chat templates render as jinja2 for every conversation\n", n_same, n_tpl);
    /* llama.cpp's 70, the real SmolLM2-135M-Instruct's and the 6 that the
     * built-in templates are proven against (check_chat_builtin.c) */
    ck_assert_int_eq(n_tpl, 77);
    ck_assert_msg(n_differ == 0, "%d templates differ from jinja2 and are not listed", n_differ);
    ck_assert_int_eq(n_unexpected, 0);
}
END_TEST

/* ---- syntax errors: status, line and column, offset ---- */
START_TEST(test_syntax_errors)
{
    ck_fails("a\nb\n{% if x %}\n  {% endfor %}", NULL, NULL, ML_E_FORMAT,
             "line 4, column 6: unexpected 'endfor', expected 'endif'");
    ck_fails("{% for x in y %}{% endif %}", NULL, NULL, ML_E_FORMAT,
             "line 1, column 20: unexpected 'endif', expected 'endfor'");
    ck_fails("{% if x %}", NULL, NULL, ML_E_FORMAT,
             "line 1, column 11: unexpected end of template, expected end of 'if' block");
    ck_fails("{{ 1 + }}", NULL, NULL, ML_E_FORMAT, "line 1, column 8: unexpected end of print statement, expected an expression");
    ck_fails("x\n{{ a", NULL, NULL, ML_E_FORMAT, "line 2, column 1: unexpected end of template, tag not closed");
    ck_fails("{# open", NULL, NULL, ML_E_FORMAT, "line 1, column 1: missing end of comment tag");
    ck_fails("{% raw %}x", NULL, NULL, ML_E_FORMAT, "missing end of raw directive");
    ck_fails("{% frob %}", NULL, NULL, ML_E_FORMAT, "line 1, column 4: unknown tag 'frob'");
    ck_fails("{{ (1 }}", NULL, NULL, ML_E_FORMAT, "expected ')'");
    ck_fails("{{ 1) }}", NULL, NULL, ML_E_FORMAT, "line 1, column 5: unexpected ')'");
    ck_fails("{{ 'abc }}", NULL, NULL, ML_E_FORMAT, "line 1, column 4: unexpected end of string");
    ck_fails("{{ 1 ? 2 }}", NULL, NULL, ML_E_FORMAT, "line 1, column 6: unexpected char '?'");
    ck_fails("{{ 99999999999999999999 }}", NULL, NULL, ML_E_FORMAT, "integer literal too large");
    ck_fails("{{ x | nosuchfilter }}", NULL, NULL, ML_E_FORMAT, "line 1, column 8: no filter named 'nosuchfilter'");
    ck_fails("{{ x is nosuchtest }}", NULL, NULL, ML_E_FORMAT, "no test named 'nosuchtest'");
    ck_fails("{% set 1 = 2 %}", NULL, NULL, ML_E_FORMAT, "can't assign to this expression");
    ck_fails("{% for x in y recursive %}{% endfor %}", NULL, NULL, ML_E_FORMAT, "recursive loops are not supported");
    ck_fails("{% include 'x' %}", NULL, NULL, ML_E_FORMAT, "unknown tag 'include'");
    ck_fails("{% extends 'x' %}", NULL, NULL, ML_E_FORMAT, "unknown tag 'extends'");
    /* In an if block, an unknown filter fails only when it runs, as in jinja2. */
    ck_render("{% if false %}{{ x | nosuch }}{% endif %}ok", NULL, "ok");
    ck_fails("{% if true %}{{ x | nosuch }}{% endif %}", NULL, NULL, ML_E_INVAL, "no filter named 'nosuch'");
    /* The offset is the byte offset in the template. */
    ml_jinja *t;
    ml_error err;
    ck_assert_int_eq(ml_jinja_parse("ab\n{% endif %}", 14, NULL, &t, &err), ML_E_FORMAT);
    ck_assert_ptr_null(t);
    ck_assert_str_eq(err.field, "template");
    ck_assert_int_eq(err.offset, 6);
}
END_TEST

/* ---- errors while rendering ---- */
START_TEST(test_render_errors)
{
    ck_fails("\n{{ raise_exception('no system role') }}", NULL, NULL, ML_E_INVAL,
             "line 2, column 19: raise_exception: no system role");
    ck_fails("{{ x.y }}", NULL, NULL, ML_E_INVAL, "line 1, column 5: 'x' is undefined");
    ck_fails("{{ f() }}", NULL, NULL, ML_E_INVAL, "'f' is undefined");
    ck_fails("{{ 1 + 'a' }}", NULL, NULL, ML_E_INVAL, "unsupported operand type(s) for +: 'int' and 'str'");
    ck_fails("{{ 1 // 0 }}", NULL, NULL, ML_E_INVAL, "integer division or modulo by zero");
    ck_fails("{{ 1 < 'a' }}", NULL, NULL, ML_E_INVAL, "'<' not supported between instances of 'int' and 'str'");
    ck_fails("{{ 5() }}", NULL, NULL, ML_E_INVAL, "'int' object is not callable");
    ck_fails("{% set l = [] %}{{ l.append(1) }}", NULL, NULL, ML_E_INVAL, "access to attribute 'append' is unsafe");
    ck_fails("{% set d = {} %}{{ d.update(a=1) }}", NULL, NULL, ML_E_INVAL, "access to attribute 'update' is unsafe");
    /* Underscore attributes are never reachable; calling them is an error. */
    ck_render("[{{ ''.__class__ }}]", NULL, "[]");
    ck_fails("{{ ''.__class__() }}", NULL, NULL, ML_E_INVAL, "access to attribute '__class__' is unsafe");
}
END_TEST

/* Integers are int64: overflow is an error, never a wrapped value. */
START_TEST(test_int_overflow)
{
    ck_render("{{ 9223372036854775807 }}", NULL, "9223372036854775807");
    ck_fails("{{ 9223372036854775807 + 1 }}", NULL, NULL, ML_E_INVAL, "integer overflow");
    ck_fails("{{ -9223372036854775807 - 2 }}", NULL, NULL, ML_E_INVAL, "integer overflow");
    ck_fails("{{ 4294967296 * 4294967296 }}", NULL, NULL, ML_E_INVAL, "integer overflow");
    ck_fails("{{ 2 ** 64 }}", NULL, NULL, ML_E_INVAL, "integer overflow");
    ck_fails("{{ x + 1 }}", "{\"x\": 9223372036854775807}", NULL, ML_E_INVAL, "integer overflow");
    ck_render("{{ 2 ** 62 }}", NULL, "4611686018427387904");
    ck_render("{{ -9223372036854775807 - 1 }}", NULL, "-9223372036854775808");
}
END_TEST

/* ---- limits ---- */
START_TEST(test_limits)
{
    ml_jinja_options o = {0};
    o.max_steps = 1000;
    ck_fails("{% for i in range(100) %}{% for j in range(100) %}x{% endfor %}{% endfor %}", NULL, &o,
             ML_E_UNSUPPORTED, "step limit of 1000 reached");
    /* The default limit stops a 10^10-step loop quickly. */
    ck_fails("{% for a in range(100000) %}{% for b in x %}{% for c in x %}{% endfor %}{% endfor %}{% endfor %}",
             "{\"x\": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]}", NULL,
             ML_E_UNSUPPORTED, "step limit of 10000000 reached");
    memset(&o, 0, sizeof o);
    o.max_depth = 16;
    ck_fails("{{ ((((((((((((((((((((1)))))))))))))))))))) }}", NULL, &o, ML_E_UNSUPPORTED,
             "depth limit of 16 reached");
    ck_fails("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL, NULL, ML_E_UNSUPPORTED,
             "depth limit of 256 reached");
    ck_fails("{% if a %}{% if a %}{% if a %}{% if a %}{% if a %}{% if a %}{% if a %}{% if a %}"
             "{% endif %}{% endif %}{% endif %}{% endif %}{% endif %}{% endif %}{% endif %}{% endif %}",
             NULL, &o, ML_E_UNSUPPORTED, "depth limit of 16 reached");
    ck_fails("{{ x | tojson }}", "{\"x\": [[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]}", &o, ML_E_INVAL,
             "nesting too deep");
    memset(&o, 0, sizeof o);
    o.max_output = 100;
    ck_fails("{% for i in range(101) %}x{% endfor %}", NULL, &o, ML_E_NOMEM, "output limit of 100 bytes reached");
    ck_render("{% for i in range(100) %}{% endfor %}", NULL, "");
    memset(&o, 0, sizeof o);
    o.max_memory = 1 << 20;
    ck_fails("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(20) %}{% set ns.s = ns.s ~ ns.s %}"
             "{% endfor %}{{ ns.s | length }}",
             NULL, &o, ML_E_NOMEM, "memory limit of 1048576 bytes reached");
    /* A template larger than the memory limit cannot even be parsed. */
    size_t big = 2 << 20;
    char *text = malloc(big);
    memset(text, 'a', big);
    ml_jinja *t;
    ml_error err;
    ck_assert_int_eq(ml_jinja_parse(text, big, &o, &t, &err), ML_E_NOMEM);
    ck_assert_ptr_null(t);
    free(text);
    ck_fails("{{ range(200000) | length }}", NULL, NULL, ML_E_INVAL, "range too big");
}
END_TEST

/* Work that allocates nothing is counted too: comparisons of values that
 * share parts (exponential in the memory they use), searches in long
 * strings, and values nested too deep to print or compare. */
START_TEST(test_hidden_work)
{
    ck_fails("{% set a = [0] * 50 %}{% set b1 = [a] * 50 %}{% set b2 = [a] * 50 %}{% set c1 = [b1] * 50 %}"
             "{% set c2 = [b2] * 50 %}{% set d1 = [c1] * 50 %}{% set d2 = [c2] * 50 %}{% set e1 = [d1] * 50 %}"
             "{% set e2 = [d2] * 50 %}{% set f1 = [e1] * 50 %}{% set f2 = [e2] * 50 %}{{ f1 == f2 }}",
             NULL, NULL, ML_E_UNSUPPORTED, "step limit");
    ck_fails("{% set s = 'a' * 1000000 %}{% for i in range(100000) %}{% if 'b' in s %}{% endif %}{% endfor %}",
             NULL, NULL, ML_E_UNSUPPORTED, "step limit");
    ck_fails("{% set s = 'a' * 1000000 %}{% for i in range(100000) %}{{ s.find('b') }}{% endfor %}", NULL, NULL,
             ML_E_UNSUPPORTED, "step limit");
    const char *deep = "{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}";
    char tpl[256];
    snprintf(tpl, sizeof tpl, "%s{{ ns.x }}", deep);
    ck_fails(tpl, NULL, NULL, ML_E_UNSUPPORTED, "depth limit of 256 reached printing a value");
    snprintf(tpl, sizeof tpl, "%s{{ ns.x | tojson }}", deep);
    ck_fails(tpl, NULL, NULL, ML_E_UNSUPPORTED, "depth limit of 256 reached");
    snprintf(tpl, sizeof tpl, "%s{{ ns.x == [ns.x] }}", deep);
    ck_fails(tpl, NULL, NULL, ML_E_UNSUPPORTED, "depth limit of 256 reached comparing values");
    /* The same value is equal to itself at once, as in Python. */
    snprintf(tpl, sizeof tpl, "%s{{ ns.x == ns.x }}", deep);
    ck_render(tpl, NULL, "True");
}
END_TEST

/* strftime_now: the pinned time in UTC; otherwise the local time now. */
START_TEST(test_strftime)
{
    ck_render("{{ strftime_now('%d %B %Y') }}", NULL, "26 July 2024");
    ml_jinja *t;
    ml_error err;
    ck_assert_int_eq(ml_jinja_parse("{{ strftime_now('%Y') }}", 24, NULL, &t, &err), ML_OK);
    char *out;
    ck_assert_int_eq(ml_jinja_render_json(t, NULL, 0, &out, NULL, &err), ML_OK);
    ck_assert_int_ge(atoi(out), 2024);
    free(out);
    ml_jinja_free(t);
}
END_TEST

/* ---- the JSON variables ---- */
START_TEST(test_json_vars)
{
    ck_render("{{ a }}|{{ b }}|{{ c }}|{{ d }}", "{\"a\": \"\\u00e9\\ud83d\\ude00\\n\", \"b\": [1, -2.5e0, true, null], \"c\": {}, \"d\": -0.0}",
              "é😀\n|[1, -2.5, True, None]|{}|-0.0");
    ck_render("{{ x }}", " { \"x\" : 1 } ", "1");
    ck_render("{{ x }}", "{\"x\": 1, \"x\": 2}", "2");
    static const char *const bad[] = {
        "[]", "1", "{", "{\"a\"}", "{\"a\": }", "{\"a\": 1,}", "{\"a\": 01}", "{\"a\": 1.}",
        "{\"a\": \"\\x\"}", "{\"a\": \"\\ud800\"}", "{\"a\": \"\x01\"}", "{\"a\": \"\xff\"}",
        "{\"a\": tru}", "{} x", "{\"a\": 99999999999999999999}", "{\"a\": \"\xed\xa0\x80\"}",
        "{'a': 1}", "{\"a\": -}", "{\"a\": NaN}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ml_jinja *t;
        ml_error err;
        char *out = (char *)1;
        ck_assert_int_eq(ml_jinja_parse("x", 1, NULL, &t, &err), ML_OK);
        ml_status st = ml_jinja_render_json(t, bad[i], strlen(bad[i]), &out, NULL, &err);
        ck_assert_msg(st == ML_E_INVAL, "%s: %s", bad[i], ml_status_name(st));
        ck_assert_ptr_null(out);
        ck_assert_str_eq(err.field, "vars");
        ck_assert_int_ge(err.offset, 0);
        ck_assert_int_le(err.offset, (int64_t)strlen(bad[i]));
        ml_jinja_free(t);
    }
}
END_TEST

/* ---- API ---- */
START_TEST(test_api)
{
    ml_jinja *t = (ml_jinja *)1;
    ml_error err;
    char *out = (char *)1;
    size_t n = 7;
    ck_assert_int_eq(ml_jinja_parse(NULL, 1, NULL, &t, &err), ML_E_INVAL);
    ck_assert_ptr_null(t);
    ck_assert_int_eq(ml_jinja_parse("x", 1, NULL, NULL, &err), ML_E_INVAL);
    ck_assert_int_eq(ml_jinja_parse(NULL, 0, NULL, &t, NULL), ML_OK);
    ck_assert_int_eq(ml_jinja_render_json(t, NULL, 0, &out, &n, &err), ML_OK);
    ck_assert_str_eq(out, "");
    ck_assert_uint_eq(n, 0);
    free(out);
    ck_assert_int_eq(ml_jinja_render_json(t, NULL, 1, &out, &n, &err), ML_E_INVAL);
    ck_assert_int_eq(ml_jinja_render_json(NULL, NULL, 0, &out, &n, &err), ML_E_INVAL);
    ck_assert_int_eq(ml_jinja_render_json(t, NULL, 0, NULL, &n, &err), ML_E_INVAL);
    ml_jinja_free(t);
    ml_jinja_free(NULL);
    /* Bytes after a NUL are template text too; a render can be repeated. */
    ck_assert_int_eq(ml_jinja_parse("a\0b{{ x }}", 10, NULL, &t, &err), ML_OK);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(ml_jinja_render_json(t, "{\"x\": 5}", 8, &out, &n, &err), ML_OK);
        ck_assert_uint_eq(n, 4);
        ck_assert_int_eq(memcmp(out, "a\0b5", 4), 0);
        free(out);
    }
    ml_jinja_free(t);
}
END_TEST

/* Random bytes and random cuts of real templates: a status, never a crash. */
START_TEST(test_hostile)
{
    tu_rng rng = {42};
    static const char *const pieces[] = {"{{", "}}", "{%", "%}", "{#", "#}", "-", "+", "if", "for", "x",
                                         "in", "endif", "endfor", "(", ")", "[", "]", "'", "\"", "|",
                                         "set", "=", "macro", "raw", "endraw", " ", "\n", "1", ".", ","};
    for (int k = 0; k < 3000; k++) {
        char buf[256];
        size_t n = 0;
        int parts = (int)tu_below(&rng, 24);
        for (int i = 0; i < parts; i++) {
            const char *p = pieces[tu_below(&rng, sizeof pieces / sizeof *pieces)];
            size_t l = strlen(p);
            if (n + l >= sizeof buf)
                break;
            memcpy(buf + n, p, l);
            n += l;
        }
        char *out;
        size_t on;
        ml_error err;
        ml_jinja_options o = {0};
        o.max_steps = 100000;
        ml_status st = render(buf, n, "{\"x\": [1, 2]}", 13, &o, &out, &on, &err);
        ck_assert(st == ML_OK || st == ML_E_FORMAT || st == ML_E_INVAL || st == ML_E_UNSUPPORTED);
        if (st != ML_OK)
            ck_assert(err.msg[0] != 0 && err.code == st);
        free(out);
    }
}
END_TEST

Suite *suite_jinja(void)
{
    Suite *s = suite_create("jinja");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_cases);
    tcase_add_test(tc, test_golden);
    tcase_add_test(tc, test_syntax_errors);
    tcase_add_test(tc, test_render_errors);
    tcase_add_test(tc, test_int_overflow);
    tcase_add_test(tc, test_limits);
    tcase_add_test(tc, test_hidden_work);
    tcase_add_test(tc, test_strftime);
    tcase_add_test(tc, test_json_vars);
    tcase_add_test(tc, test_api);
    tcase_add_test(tc, test_hostile);
    suite_add_tcase(s, tc);
    return s;
}
