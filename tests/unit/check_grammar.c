/* check_grammar.c - GBNF grammars (lib/grammar/): the parser's accepted
 * and refused texts with their exact status, line and column; left
 * recursion and the caps refused; the matcher on arithmetic, JSON, lists,
 * bounded repetitions, classes and UTF-8 split anywhere; and the logit
 * processor on the Llama 2 (SentencePiece) and Qwen3 (byte-level BPE)
 * tokenizers of tests/fixtures/tok, whose mask must equal, token for
 * token, what a matcher says of the text the streaming decoder prints. */
#include "check_tok_util.h"
#include "suites.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>

static ml_grammar *parse_ok(const char *text)
{
    ml_grammar *g = NULL;
    ml_error err;
    ml_status s = ml_grammar_parse(text, strlen(text), NULL, &g, &err);
    ck_assert_msg(s == ML_OK, "%s: %s %s", text, ml_status_name(s), err.msg);
    return g;
}

/* 2: text is a whole sentence; 1: the start of one; 0: refused. */
static int match(const ml_grammar *g, const char *text, size_t n)
{
    ml_grammar_match *m;
    ml_error err;
    ck_assert_int_eq(ml_grammar_match_new(g, &m, &err), ML_OK);
    ml_status s = ml_grammar_match_feed(m, text, n, &err);
    ck_assert_msg(s == ML_OK || s == ML_E_MISMATCH, "%s", err.msg);
    int r = s ? 0 : 1 + ml_grammar_match_complete(m);
    ml_grammar_match_free(m);
    return r;
}

/* Each case: a text and what match() must say of it. */
typedef struct mcase {
    const char *text;
    int want;
} mcase;

static void check_cases(const char *grammar, const mcase *c, size_t n)
{
    ml_grammar *g = parse_ok(grammar);
    for (size_t i = 0; i < n; i++) {
        int got = match(g, c[i].text, strlen(c[i].text));
        ck_assert_msg(got == c[i].want, "grammar %s, text \"%s\": %d, want %d", grammar,
                      c[i].text, got, c[i].want);
    }
    ml_grammar_free(g);
}
#define CHECK_CASES(g, ...)                                                                 \
    do {                                                                                    \
        static const mcase c_[] = {__VA_ARGS__};                                            \
        check_cases(g, c_, sizeof c_ / sizeof c_[0]);                                       \
    } while (0)

/* ------------------------------------------------------------------------
 * The parser
 * ------------------------------------------------------------------------ */
START_TEST(test_parse_accepts)
{
    static const char *ok[] = {
        "root ::= \"a\"",
        "root ::=",                                 /* an empty sentence */
        "root ::= \"\"",
        "root ::= ( )",
        "# a comment\nroot ::= a b # another\na ::= [a-z]\nb ::= \"x\" |\n  \"y\"\n",
        "root ::= (\n  \"a\"\n  | \"b\" # in parentheses lines go on\n)\n",
        "root ::=\n  \"a\"",                        /* the body on the next line */
        "root ::= [^\\n]+ \"\\n\"\r\nx-y_z ::= \"\\x41\\u00e9\\U0001F600\\t\\r\\\\\\\"\"\r\n",
        "root ::= [\\[\\]\\-] [a-] [-a] [\\x00-\\U0010FFFF] .",
        "root ::= \"é\" [α-ω] \"😀\"",
        "root ::= \"a\"{0} \"b\"{3} \"c\"{2,} \"d\"{1,4} (\"e\" \"f\"){ 0 , 2 }",
        "root ::= \"a\"{2}{3} \"b\"*?",
        "root ::= x\nx ::= \"(\" x \")\" | \"\"",   /* right recursion is fine */
        "root ::= \"a\"{2000}",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        ml_grammar_free(parse_ok(ok[i]));
    ml_grammar *g;
    ml_error err;
    ck_assert_int_eq(ml_grammar_parse("start ::= \"a\"", 13, "start", &g, &err), ML_OK);
    ck_assert_uint_eq(ml_grammar_n_rules(g), 1);
    ck_assert_int_eq(match(g, "a", 1), 2);
    ml_grammar_free(g);
    /* the repetition's rules: "a"* is a rule of its own */
    g = parse_ok("root ::= \"a\"* \"b\"");
    ck_assert_uint_eq(ml_grammar_n_rules(g), 2);
    ml_grammar_free(g);
}
END_TEST

typedef struct bad {
    const char *text;
    ml_status status;
    const char *where; /* err.field */
    const char *msg;   /* a part of err.msg */
} bad;

START_TEST(test_parse_refuses)
{
    static const bad cases[] = {
        {"root ::= \"a", ML_E_FORMAT, "line 1, column 10", "closing '\"'"},
        {"root ::= [a", ML_E_FORMAT, "line 1, column 10", "closing ']'"},
        {"root ::= []", ML_E_FORMAT, "line 1, column 10", "empty character class"},
        {"root ::= (\"a\"", ML_E_FORMAT, "line 1, column 14", "expected ')'"},
        {"root ::= \"a\" )", ML_E_FORMAT, "line 1, column 14", "expected a symbol, '|' or the line end"},
        {"root = \"a\"", ML_E_FORMAT, "line 1, column 6", "expected '::=' after the rule name"},
        {"\n\nroot ::= \"a\"\n  \"b\"", ML_E_FORMAT, "line 4, column 3", "expected a rule name"},
        {"root ::= x\n", ML_E_FORMAT, "line 1, column 10", "undefined rule 'x'"},
        {"root ::= \"a\"\nroot ::= \"b\"", ML_E_FORMAT, "line 2, column 1", "defined twice"},
        {"a ::= \"a\"", ML_E_FORMAT, "grammar", "no rule 'root'"},
        {"root ::= *", ML_E_FORMAT, "line 1, column 10", "nothing before it to repeat"},
        {"root ::= \"\"+", ML_E_FORMAT, "line 1, column 12", "nothing before it to repeat"},
        {"root ::= \"a\"{2,1}", ML_E_FORMAT, "line 1, column 13", "below its minimum"},
        {"root ::= \"a\"{x}", ML_E_FORMAT, "line 1, column 14", "expected a number"},
        {"root ::= \"a\"{1;", ML_E_FORMAT, "line 1, column 15", "expected '}' or ','"},
        {"root ::= \"a\"{2001}", ML_E_UNSUPPORTED, "line 1, column 14", "above 2000"},
        {"root ::= \"a\"{0,99999999999999999999}", ML_E_UNSUPPORTED, "line 1, column 16", "above 2000"},
        {"root ::= \"\\q\"", ML_E_FORMAT, "line 1, column 11", "unknown escape"},
        {"root ::= \"\\x4\"", ML_E_FORMAT, "line 1, column 14", "2 hex digits"},
        {"root ::= \"\\U00110000\"", ML_E_FORMAT, "line 1, column 11", "beyond U+10FFFF"},
        {"root ::= [z-a]", ML_E_FORMAT, "line 1, column 12", "end is below its start"},
        {"root ::= \"\xff\"", ML_E_FORMAT, "line 1, column 11", "invalid UTF-8"},
        {"root ::= \"\xc3", ML_E_FORMAT, "line 1, column 11", "invalid UTF-8"},
        {"root ::= \"é\" \xe9", ML_E_FORMAT, "line 1, column 14", "byte 0xe9"},
        {"root ::= a\na ::= a \"x\" | \"y\"", ML_E_UNSUPPORTED, "line 2, column 1",
         "'a' is left-recursive"},
        {"root ::= a\na ::= b \"x\"\nb ::= \"y\" | a", ML_E_UNSUPPORTED, "line 2, column 1",
         "left-recursive"},
        {"root ::= e? root \"x\"\ne ::= \"e\"", ML_E_UNSUPPORTED, "line 1, column 1",
         "'root' is left-recursive"},
        {"root ::= (\"a\"?)*", ML_E_UNSUPPORTED, "line 1, column 1", "left-recursive"},
        {"root ::= (\"a\" | \"\") root", ML_E_UNSUPPORTED, "line 1, column 1", "left-recursive"},
        {"root ::= <think> \"a\"", ML_E_UNSUPPORTED, "line 1, column 10", "token references"},
        {"root ::= \"a\" !<[12]>", ML_E_UNSUPPORTED, "line 1, column 14", "token references"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad *c = &cases[i];
        ml_grammar *g = (ml_grammar *)1;
        ml_error err;
        ml_status s = ml_grammar_parse(c->text, strlen(c->text), NULL, &g, &err);
        ck_assert_msg(s == c->status && err.code == s, "case %zu (%s): %s, want %s: %s", i, c->text,
                      ml_status_name(s), ml_status_name(c->status), err.msg);
        ck_assert_ptr_null(g);
        ck_assert_msg(!strcmp(err.field, c->where), "case %zu: at \"%s\", want \"%s\" (%s)", i,
                      err.field, c->where, err.msg);
        ck_assert_msg(strstr(err.msg, c->msg), "case %zu: \"%s\" lacks \"%s\"", i, err.msg,
                      c->msg);
    }
    /* NUL inside the text, arguments */
    ml_grammar *g;
    ml_error err;
    ck_assert_int_eq(ml_grammar_parse("root ::= \"a\0\"", 13, NULL, &g, &err), ML_E_FORMAT);
    ck_assert_str_eq(err.field, "line 1, column 12");
    ck_assert_int_eq(err.offset, 11);
    ck_assert_int_eq(ml_grammar_parse(NULL, 1, NULL, &g, &err), ML_E_INVAL);
    ck_assert_int_eq(ml_grammar_parse("root ::=", 8, NULL, NULL, &err), ML_E_INVAL);
    ck_assert_int_eq(ml_grammar_parse("root ::= \"a\"", 12, "nope", &g, &err), ML_E_FORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, "no rule 'nope'"));
    ml_grammar_free(NULL);
}
END_TEST

/* A text of n bytes of c between a prefix and a suffix. */
static char *build(const char *pre, const char *unit, size_t n, const char *post)
{
    size_t lp = strlen(pre), lu = strlen(unit), lq = strlen(post);
    char *s = malloc(lp + lu * n + lq + 1), *p = s;
    memcpy(p, pre, lp), p += lp;
    for (size_t i = 0; i < n; i++)
        memcpy(p, unit, lu), p += lu;
    memcpy(p, post, lq + 1);
    return s;
}

static ml_status parse_status(const char *text, ml_error *err)
{
    ml_grammar *g;
    ml_status s = ml_grammar_parse(text, strlen(text), NULL, &g, err);
    ml_grammar_free(g);
    return s;
}

START_TEST(test_caps)
{
    ml_error err;
    /* text length */
    char *t = build("root ::= \"a\" #", "x", ML_GRAMMAR_MAX_TEXT, "");
    ck_assert_int_eq(parse_status(t, &err), ML_E_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.msg, "at most 1048576"));
    free(t);
    /* nesting */
    char *open = build("root ::= ", "(", ML_GRAMMAR_MAX_NESTING, "\"a\"");
    char *closed = build(open, ")", ML_GRAMMAR_MAX_NESTING, "");
    ck_assert_int_eq(parse_status(closed, &err), ML_OK);
    free(open), free(closed);
    open = build("root ::= ", "(", ML_GRAMMAR_MAX_NESTING + 1, "\"a\"");
    closed = build(open, ")", ML_GRAMMAR_MAX_NESTING + 1, "");
    ck_assert_int_eq(parse_status(closed, &err), ML_E_UNSUPPORTED);
    ck_assert_str_eq(err.field, "line 1, column 74");
    ck_assert_ptr_nonnull(strstr(err.msg, "deeper than 64"));
    free(open), free(closed);
    /* rules: 33 optional runs of 2000 make 66000 */
    t = build("root ::= ", "\"a\"{0,2000} ", 33, "");
    ck_assert_int_eq(parse_status(t, &err), ML_E_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.msg, "more than 65536 rules"));
    free(t);
    /* elements: nested repetitions multiply */
    ck_assert_int_eq(parse_status("root ::= ((\"abcdefgh\"{1000}){1000})", &err), ML_OK);
    t = build("root ::= ", "(\"abcdefghijklmnopqrstuvwxyz\"{2000}){2000} ", 20, "");
    ck_assert_int_eq(parse_status(t, &err), ML_E_UNSUPPORTED);
    free(t);
    ck_assert_ptr_nonnull(strstr(err.msg, "more than 1048576 grammar elements"));
}
END_TEST

/* ------------------------------------------------------------------------
 * The matcher
 * ------------------------------------------------------------------------ */
static const char *ARITH = "root ::= expr\n"
                           "expr ::= term ((\"+\" | \"-\") term)*\n"
                           "term ::= factor ((\"*\" | \"/\") factor)*\n"
                           "factor ::= [0-9]+ | \"(\" expr \")\" | \"-\" factor\n";

static const char *JSON =
    "root   ::= ws value ws\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\")\n"
    "object ::= \"{\" ws ( member (ws \",\" ws member)* ws )? \"}\"\n"
    "member ::= string ws \":\" ws value\n"
    "array  ::= \"[\" ws ( value (ws \",\" ws value)* ws )? \"]\"\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1f] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\"\n"
    "number ::= \"-\"? (\"0\" | [1-9] [0-9]*) (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)?\n"
    "ws     ::= [ \\t\\n]*\n";

START_TEST(test_match_arith)
{
    CHECK_CASES(ARITH, {"1", 2}, {"12+3*(4-5)", 2}, {"-(1)/--2", 2}, {"(1+2", 1}, {"1+", 1},
                {"", 1}, {"+1", 0}, {"1+*2", 0}, {"(1))", 0}, {"1 + 2", 0}, {"((((((7))))))", 2});
}
END_TEST

START_TEST(test_match_json)
{
    CHECK_CASES(JSON, {"{}", 2}, {" [1, 2.5e-3, -0, true, null, \"x\\n\\u00e9\"] ", 2},
                {"{\"a\": {\"b\": [[], {}]}, \"c\": \"d\"}", 2}, {"{\"a\": 01}", 0},
                {"{\"a\" 1}", 0}, {"[1,]", 0}, {"\"tab\there\"", 0}, {"\"é😀\"", 2},
                {"{\"a\": [1, 2", 1}, {"\"\\u12", 1}, {"\"\\u12g", 0}, {"nul", 1},
                {"nulll", 0}, {"1.", 1}, {"1.e5", 0});
}
END_TEST

START_TEST(test_match_lists_and_repetitions)
{
    CHECK_CASES("root ::= (\"- \" item)+\nitem ::= [^\\n]+ \"\\n\"", {"- a\n- bc\n", 2},
                {"- a\n-", 1}, {"- \n", 0}, {"", 1}, {"x", 0});
    CHECK_CASES("root ::= [0-9]{2,4}", {"1", 1}, {"12", 2}, {"1234", 2}, {"12345", 0},
                {"1a", 0});
    CHECK_CASES("root ::= \"ab\"{3}", {"ababab", 2}, {"abab", 1}, {"abababa", 0});
    CHECK_CASES("root ::= \"x\"{2,} \"y\"", {"xxy", 2}, {"xxxxxxxxxy", 2}, {"xy", 0});
    CHECK_CASES("root ::= \"a\"{0,2} \"b\"?", {"", 2}, {"a", 2}, {"aab", 2}, {"aaa", 0},
                {"b", 2}, {"bb", 0});
    CHECK_CASES("root ::= (\"a\"{2}){3}", {"aaaaaa", 2}, {"aaaaa", 1}, {"aaaaaaa", 0});
    CHECK_CASES("root ::= \"a\"{2}{3}", {"aaaaaa", 2}, {"aaaaa", 1});
    CHECK_CASES("root ::= [a-c]* \"c\"", {"c", 2}, {"abcc", 2}, {"abcb", 1});
}
END_TEST

START_TEST(test_match_classes)
{
    CHECK_CASES("root ::= [^a-y\\n]", {"z", 2}, {"a", 0}, {"\n", 0}, {"é", 2});
    CHECK_CASES("root ::= [a-cx-z_] .", {"a\n", 2}, {"_é", 2}, {"d", 0}, {"y", 1});
    CHECK_CASES("root ::= [\\-\\]] [-]", {"--", 2}, {"]-", 2}, {"a", 0});
    CHECK_CASES("root ::= \"\\x41\\u00e9\\U0001F600\"", {"Aé😀", 2}, {"Ae", 0});
    CHECK_CASES("root ::= [α-ω]+ \"€\"", {"αβω€", 2}, {"α", 1}, {"A", 0}, {"€", 0});
}
END_TEST

/* Text split at every byte: partial characters carry over between feeds,
 * and a character the grammar cannot take is refused at its first byte
 * where no completion could match. */
START_TEST(test_match_utf8_split)
{
    ml_grammar *g = parse_ok("root ::= [α-ω] \"😀\" [^\\u0100-\\U0010FFFF]");
    const char *text = "β😀é";
    size_t n = strlen(text);
    for (size_t cut = 0; cut <= n; cut++) {
        ml_grammar_match *m;
        ml_error err;
        ck_assert_int_eq(ml_grammar_match_new(g, &m, &err), ML_OK);
        ck_assert_int_eq(ml_grammar_match_feed(m, text, cut, &err), ML_OK);
        ck_assert_int_eq(ml_grammar_match_complete(m), cut == n);
        ck_assert_int_eq(ml_grammar_match_feed(m, text + cut, n - cut, &err), ML_OK);
        ck_assert_int_eq(ml_grammar_match_complete(m), 1);
        ml_grammar_match_free(m);
    }
    /* 'A' (U+0041) cannot begin: refused at once; a 3-byte lead cannot
     * become a Greek letter (2 bytes), refused at its first byte */
    ck_assert_int_eq(match(g, "A", 1), 0);
    ck_assert_int_eq(match(g, "\xe2", 1), 0);
    ck_assert_int_eq(match(g, "\xce", 1), 1);  /* the lead of α..ο */
    ck_assert_int_eq(match(g, "\xcf", 1), 1);  /* of π..ω */
    ck_assert_int_eq(match(g, "\xcf\x8a", 2), 0); /* ϊ is past ω */
    ck_assert_int_eq(match(g, "\xd0", 1), 0);
    ml_grammar_free(g);
    /* invalid UTF-8 never matches, even under `.` */
    g = parse_ok("root ::= .*");
    static const char *invalid[] = {"\x80", "\xc0\x80", "\xe0\x80\x80", "\xed\xa0\x80",
                                    "\xf4\x90\x80\x80", "\xf8", "a\303a", "\xff"};
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++)
        ck_assert_msg(match(g, invalid[i], strlen(invalid[i])) == 0, "invalid %zu", i);
    ck_assert_int_eq(match(g, "\xf4\x8f\xbf\xbf", 4), 2); /* U+10FFFF */
    ck_assert_int_eq(match(g, "\xc3", 1), 1);
    ml_grammar_free(g);
}
END_TEST

/* A failed feed leaves the matcher as it was; reset starts again. */
START_TEST(test_match_failure_and_reset)
{
    ml_grammar *g = parse_ok("root ::= \"ab\" \"c\"*");
    ml_grammar_match *m;
    ml_error err;
    ck_assert_int_eq(ml_grammar_match_new(g, &m, &err), ML_OK);
    ck_assert_int_eq(ml_grammar_match_feed(m, "a", 1, &err), ML_OK);
    ck_assert_int_eq(ml_grammar_match_feed(m, "bcx", 3, &err), ML_E_MISMATCH);
    ck_assert_int_eq(err.offset, 2);
    ck_assert_int_eq(ml_grammar_match_complete(m), 0);
    ck_assert_int_eq(ml_grammar_match_feed(m, "bcc", 3, &err), ML_OK);
    ck_assert_int_eq(ml_grammar_match_complete(m), 1);
    ml_grammar_match_reset(m);
    ck_assert_int_eq(ml_grammar_match_complete(m), 0);
    ck_assert_int_eq(ml_grammar_match_feed(m, "ab", 2, &err), ML_OK);
    ck_assert_int_eq(ml_grammar_match_complete(m), 1);
    ck_assert_int_eq(ml_grammar_match_feed(NULL, "a", 1, &err), ML_E_INVAL);
    ml_grammar_match_free(m);
    ml_grammar_match_free(NULL);
    ml_grammar_free(g);
}
END_TEST

/* Blow-ups fail with ML_E_UNSUPPORTED instead of growing. */
START_TEST(test_match_caps)
{
    ml_error err;
    ml_grammar_match *m;
    /* each "a" doubles the ways to close: 2^13 stacks */
    ml_grammar *g = parse_ok("root ::= s\ns ::= \"a\" s \"b\" | \"a\" s \"c\" | \"\"");
    ck_assert_int_eq(ml_grammar_match_new(g, &m, &err), ML_OK);
    ck_assert_int_eq(ml_grammar_match_feed(m, "aaaaaaaaaa", 10, &err), ML_OK);
    ck_assert_int_eq(ml_grammar_match_feed(m, "aaaaaaaa", 8, &err), ML_E_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.msg, "more than 4096 parse stacks"));
    ck_assert_int_eq(ml_grammar_match_feed(m, "bbbbbbbbbb", 10, &err), ML_OK); /* unharmed */
    ck_assert_int_eq(ml_grammar_match_complete(m), 1);
    ml_grammar_match_free(m);
    ml_grammar_free(g);
    /* nesting in the text */
    g = parse_ok("root ::= \"(\" root \")\" | \"\"");
    char *deep = build("", "(", ML_GRAMMAR_MAX_DEPTH + 1, "");
    ck_assert_int_eq(ml_grammar_match_new(g, &m, &err), ML_OK);
    ck_assert_int_eq(ml_grammar_match_feed(m, deep, ML_GRAMMAR_MAX_DEPTH - 1, &err), ML_OK);
    ck_assert_int_eq(ml_grammar_match_feed(m, deep, 2, &err), ML_E_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.msg, "deeper than 4096"));
    ml_grammar_match_free(m);
    free(deep);
    ml_grammar_free(g);
}
END_TEST

/* ------------------------------------------------------------------------
 * The processor
 * ------------------------------------------------------------------------ */
typedef struct collect {
    uint8_t buf[1 << 12];
    size_t n;
} collect;

static ml_status collect_sink(void *ctx, const void *p, size_t n, ml_error *err)
{
    collect *c = ctx;
    (void)err;
    ck_assert_uint_le(c->n + n, sizeof c->buf);
    memcpy(c->buf + c->n, p, n);
    c->n += n;
    return ML_OK;
}

/* What the generator prints for prefix then id, with the bytes the
 * decoder holds back (an unfinished character) at the end. */
static void printed(const ml_mlt *t, const ml_token *prefix, size_t n, ml_token id, collect *c)
{
    ml_tok_stream s;
    ml_error err;
    c->n = 0;
    ml_tok_stream_init(&s, t, ML_TOK_SKIP_BOS_EOS);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(ml_tok_stream_put(&s, prefix[i], collect_sink, c, &err), ML_OK);
    if (id != ML_TOKEN_NONE)
        ck_assert_int_eq(ml_tok_stream_put(&s, id, collect_sink, c, &err), ML_OK);
    memcpy(c->buf + c->n, s.pend, s.npend);
    c->n += s.npend;
}

/* 1 when the text printed after `before` holds a U+FFFD: the decoder's
 * stand-in for bytes that are not UTF-8. */
static int replaced(const collect *before, const collect *after)
{
    for (size_t i = before->n >= 2 ? before->n - 2 : 0; i + 3 <= after->n; i++)
        if (!memcmp(after->buf + i, "\xef\xbf\xbd", 3))
            return 1;
    return 0;
}

/* 1 when token id's own piece holds a U+FFFD (Llama 2 has "��"). */
static int has_fffd(const ml_mlt *t, ml_token id)
{
    ml_mlt_token k = ml_mlt_get_token(t, id);
    for (uint32_t i = 0; i + 3 <= k.len; i++)
        if (!memcmp(k.bytes + i, "\xef\xbf\xbd", 3))
            return 1;
    return 0;
}

/* 1 when token id's text is one space (which prints nothing at the start
 * of a SentencePiece text). */
static int is_space(const ml_mlt *t, ml_token id)
{
    char *s;
    size_t n;
    ml_error err;
    ck_assert_int_eq(ml_tok_decode(t, &id, 1, ML_TOK_KEEP_SPACE, &s, &n, &err), ML_OK);
    int r = n == 1 && s[0] == ' ';
    free(s);
    return r;
}

/* The processor's mask after prefix equals the oracle's: a token is
 * allowed when a matcher takes everything printed so far (and adds
 * text), an end-of-generation id when the text is complete.  Returns
 * the allowed tokens. */
static uint32_t check_mask(const ml_grammar *g, const ml_mlt *t, const ml_token *prefix, size_t n)
{
    uint32_t vocab = ml_mlt_get_header(t)->n_vocab + 7; /* a model's padding too */
    ml_grammar_proc *p;
    ml_error err;
    ck_assert_int_eq(ml_grammar_proc_new(g, t, &p, &err), ML_OK);
    for (size_t i = 0; i < n; i++) {
        float *l = calloc(vocab, sizeof *l);
        ck_assert_int_eq(ml_grammar_proc_apply(p, l, vocab, NULL, 0, &err), ML_OK);
        ck_assert_msg(l[prefix[i]] == 0, "prefix token %u refused", prefix[i]);
        free(l);
        ml_grammar_proc_accept(p, prefix[i]);
    }
    float *l = calloc(vocab, sizeof *l);
    ml_status s = ml_grammar_proc_apply(p, l, vocab, NULL, 0, &err);
    ck_assert_msg(s == ML_OK, "%s", err.msg);
    collect before, after;
    printed(t, prefix, n, ML_TOKEN_NONE, &before);
    ml_grammar_match *m;
    ck_assert_int_eq(ml_grammar_match_new(g, &m, &err), ML_OK);
    ck_assert_int_eq(ml_grammar_match_feed(m, before.buf, before.n, &err), ML_OK);
    int complete = ml_grammar_match_complete(m);
    ck_assert_int_eq(ml_grammar_proc_complete(p), complete);
    uint32_t allowed = 0;
    for (ml_token id = 0; id < vocab; id++) {
        int want;
        if (id >= ml_mlt_get_header(t)->n_vocab) {
            want = 0;
        } else if (ml_mlt_is_eog(t, id)) {
            want = complete;
        } else {
            printed(t, prefix, n, id, &after);
            ml_grammar_match_reset(m);
            want = after.n > before.n ? !ml_grammar_match_feed(m, after.buf, after.n, &err)
                                      : is_space(t, id); /* the start space, dropped */
            /* invalid UTF-8 (printed as U+FFFD) is refused whatever the grammar */
            if (want && replaced(&before, &after) && !has_fffd(t, id))
                want = 0;
        }
        int got = l[id] == 0;
        ck_assert_msg(got == want, "token %u (\"%.*s\"): allowed %d, want %d", id,
                      (int)ml_mlt_get_token(t, id).len, ml_mlt_get_token(t, id).bytes, got, want);
        allowed += (uint32_t)got;
    }
    /* the same mask a second time: nothing depends on the walk before */
    float *l2 = calloc(vocab, sizeof *l2);
    ck_assert_int_eq(ml_grammar_proc_apply(p, l2, vocab, NULL, 0, &err), ML_OK);
    ck_assert_int_eq(memcmp(l, l2, vocab * sizeof *l), 0);
    free(l), free(l2);
    ml_grammar_match_free(m);
    ml_grammar_proc_free(p);
    return allowed;
}

static void encode(ml_tok *k, const char *text, ml_ids *ids)
{
    ml_error err;
    ids->n = 0;
    ck_assert_int_eq(ml_tok_encode(k, text, strlen(text), ML_TOK_BOS_NO, ids, &err), ML_OK);
}

START_TEST(test_proc_llama2)
{
    ml_mlt *t;
    ml_tok *k;
    tf_load("llama2", &t, &k);
    ml_ids ids = {0};
    ml_grammar *g = parse_ok("root ::= \"yes\" | \"no\"");
    ck_assert_uint_gt(check_mask(g, t, NULL, 0), 3); /* y, ye, yes, ▁yes (start space), n, ... */
    encode(k, "ye", &ids);
    ck_assert_uint_ge(check_mask(g, t, ids.v, ids.n), 1);
    encode(k, "yes", &ids);
    ck_assert_uint_eq(check_mask(g, t, ids.v, ids.n), 1); /* only the end of generation */
    ml_grammar_free(g);
    /* digits, a character split into byte tokens, a JSON value */
    g = parse_ok("root ::= [0-9]+ (\" \" [0-9]+)* \"!\"?");
    check_mask(g, t, NULL, 0);
    encode(k, "12 3", &ids);
    check_mask(g, t, ids.v, ids.n);
    ml_grammar_free(g);
    g = parse_ok("root ::= \"€\" [^a-z]{0,3}");
    ml_token lead[] = {3 + 0xe2}; /* byte token <0xE2> */
    ck_assert_int_eq(ml_mlt_get_token(t, lead[0]).attr, ML_MLT_BYTE);
    check_mask(g, t, NULL, 0);
    check_mask(g, t, lead, 1);
    ml_grammar_free(g);
    g = parse_ok(JSON);
    encode(k, "{\"a\": [1, \"x", &ids);
    check_mask(g, t, ids.v, ids.n);
    ml_grammar_free(g);
    ml_ids_free(&ids);
    ml_tok_free(k);
    ml_mlt_close(t);
}
END_TEST

START_TEST(test_proc_qwen3)
{
    ml_mlt *t;
    ml_tok *k;
    tf_load("qwen3", &t, &k);
    ml_ids ids = {0};
    ml_grammar *g = parse_ok(JSON);
    check_mask(g, t, NULL, 0);
    encode(k, "{\"key\": [true, 1", &ids);
    check_mask(g, t, ids.v, ids.n);
    ml_grammar_free(g);
    g = parse_ok("root ::= \"é😀\" [0-9]");
    check_mask(g, t, NULL, 0);
    encode(k, "é😀", &ids);
    check_mask(g, t, ids.v, ids.n - 1); /* inside the emoji's bytes */
    check_mask(g, t, ids.v, ids.n);
    ml_grammar_free(g);
    ml_ids_free(&ids);
    ml_tok_free(k);
    ml_mlt_close(t);
}
END_TEST

/* Through the generator with random logits: the text it prints (start
 * space dropped, characters split over byte tokens) is always the start
 * of a sentence, and a whole one when the end of generation was drawn. */
START_TEST(test_proc_in_generator)
{
    static const char *grammars[] = {"root ::= [0-9]+ (\",\" [0-9]+)* \".\"", "root ::= \"€\"+ | [a-z ]+ \"!\"", NULL};
    grammars[2] = JSON;
    ml_mlt *t;
    ml_tok *k;
    tf_load("llama2", &t, &k);
    uint32_t vocab = ml_mlt_get_header(t)->n_vocab;
    float *logits = malloc(vocab * sizeof *logits);
    tu_rng r = {(uint64_t)_i + 1};
    for (size_t gi = 0; gi < 3; gi++) {
        ml_grammar *g = parse_ok(grammars[gi]);
        ml_grammar_proc *p;
        ml_error err;
        ck_assert_int_eq(ml_grammar_proc_new(g, t, &p, &err), ML_OK);
        ml_logits_proc lp = {ml_grammar_proc_apply, ml_grammar_proc_accept, p};
        tu_mem mem;
        tu_mem_init(&mem);
        ml_gen_params gp = {.vocab = vocab, .sampler = {1.0f, 0, 1.0f, 0, 1, 0, (uint64_t)_i, 0, 0},
                            .mlt = t, .max_tokens = 40, .on_text = tu_mem_sink, .text_ctx = &mem,
                            .procs = &lp, .n_procs = 1};
        ml_gen *gen;
        ck_assert_int_eq(ml_gen_new(&gp, &gen, &err), ML_OK);
        ml_gen_result res = {ML_GEN_GOING, 0};
        while (res.end == ML_GEN_GOING) {
            for (uint32_t i = 0; i < vocab; i++)
                logits[i] = (float)tu_below(&r, 1000) / 100.0f;
            if (gi == 1) /* make the end likely where it is allowed */
                logits[2] = 12;
            ml_gen_input in = {logits, NULL, 0, 100};
            ck_assert_int_eq(ml_gen_next(gen, &in, &res, &err), ML_OK);
        }
        ck_assert_int_eq(ml_gen_finish(gen, &err), ML_OK);
        ml_grammar_match *m;
        ck_assert_int_eq(ml_grammar_match_new(g, &m, &err), ML_OK);
        ck_assert_msg(ml_grammar_match_feed(m, mem.p, mem.len, &err) == ML_OK, "\"%.*s\"",
                      (int)mem.len, mem.p);
        if (res.end == ML_GEN_EOG)
            ck_assert(ml_grammar_match_complete(m));
        ml_grammar_match_free(m);
        ml_gen_free(gen);
        tu_mem_free(&mem);
        ml_grammar_proc_free(p);
        ml_grammar_free(g);
    }
    free(logits);
    ml_tok_free(k);
    ml_mlt_close(t);
}
END_TEST

/* A tokenizer of four tokens in memory: "a", "b", "ab" and an EOS. */
static ml_mlt *tiny_mlt(tu_mem *mem)
{
    static const ml_mlt_token toks[] = {{(const uint8_t *)"a", 1, ML_MLT_NORMAL},
                                        {(const uint8_t *)"b", 1, ML_MLT_NORMAL},
                                        {(const uint8_t *)"ab", 2, ML_MLT_NORMAL},
                                        {(const uint8_t *)"</s>", 4, ML_MLT_ADDED}};
    ml_mlt_header h = {.kind = ML_MLT_KIND_BYTE_BPE, .bos = ML_TOKEN_NONE, .eos = 3};
    ml_error err;
    ml_mlt *t;
    tu_mem_init(mem);
    ck_assert_int_eq(ml_mlt_write(&h, toks, 4, NULL, 0, tu_mem_sink, mem, &err), ML_OK);
    ck_assert_int_eq(ml_mlt_open_memory(mem->p, mem->len, &t, &err), ML_OK);
    return t;
}

/* A dead end is an error, not a silent mask of everything; so is a
 * refused token accepted anyway; reset forgets both. */
START_TEST(test_proc_errors)
{
    tu_mem mem;
    ml_mlt *t = tiny_mlt(&mem);
    float l[4];
    ml_error err;
    ml_grammar_proc *p;
    ml_grammar *g = parse_ok("root ::= \"a\" \"c\" | \"b\"");
    ck_assert_int_eq(ml_grammar_proc_new(g, t, &p, &err), ML_OK);
    memset(l, 0, sizeof l);
    ck_assert_int_eq(ml_grammar_proc_apply(p, l, 4, NULL, 0, &err), ML_OK);
    ck_assert(l[0] == 0 && l[1] == 0 && isinf(l[2]) && isinf(l[3]));
    ml_grammar_proc_accept(p, 0);
    ck_assert_int_eq(ml_grammar_proc_apply(p, l, 4, NULL, 0, &err), ML_E_MISMATCH);
    ck_assert_ptr_nonnull(strstr(err.msg, "no token of the vocabulary continues"));
    ml_grammar_proc_reset(p);
    ml_grammar_proc_accept(p, 2); /* refused: "ab" */
    ck_assert_int_eq(ml_grammar_proc_apply(p, l, 4, NULL, 0, &err), ML_E_MISMATCH);
    ck_assert_ptr_nonnull(strstr(err.msg, "token 2 was kept"));
    ml_grammar_proc_reset(p);
    ml_grammar_proc_accept(p, 1);
    memset(l, 0, sizeof l);
    ck_assert_int_eq(ml_grammar_proc_apply(p, l, 4, NULL, 0, &err), ML_OK);
    ck_assert(isinf(l[0]) && isinf(l[1]) && isinf(l[2]) && l[3] == 0); /* only the end */
    ck_assert_int_eq(ml_grammar_proc_complete(p), 1);
    ml_grammar_proc_free(p);
    ml_grammar_free(g);
    ck_assert_int_eq(ml_grammar_proc_new(NULL, t, &p, &err), ML_E_INVAL);
    ml_grammar_proc_free(NULL);
    ml_mlt_close(t);
    tu_mem_free(&mem);
}
END_TEST

Suite *suite_grammar(void)
{
    Suite *s = suite_create("grammar");
    TCase *tc = tcase_create("grammar");
    tcase_add_test(tc, test_parse_accepts);
    tcase_add_test(tc, test_parse_refuses);
    tcase_add_test(tc, test_caps);
    tcase_add_test(tc, test_match_arith);
    tcase_add_test(tc, test_match_json);
    tcase_add_test(tc, test_match_lists_and_repetitions);
    tcase_add_test(tc, test_match_classes);
    tcase_add_test(tc, test_match_utf8_split);
    tcase_add_test(tc, test_match_failure_and_reset);
    tcase_add_test(tc, test_match_caps);
    tcase_add_test(tc, test_proc_llama2);
    tcase_add_test(tc, test_proc_qwen3);
    tcase_add_loop_test(tc, test_proc_in_generator, 0, 4);
    tcase_add_test(tc, test_proc_errors);
    suite_add_tcase(s, tc);
    return s;
}
