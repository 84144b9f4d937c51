/* check_json_schema.c - JSON Schema to GBNF (cmd/common/json_schema.c):
 * for each keyword, the grammar made from a schema parsed by the library
 * and run by its matcher over texts the schema accepts (each must be a
 * whole sentence) and texts it refuses (none may be); integer bounds
 * against arithmetic over every integer of a span; rules of several
 * schemas combined in one grammar; and every refusal with its message. */
#include "json_schema.h"
#include "suites.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>

static ml_grammar *grammar_of(const char *schema_text)
{
    json_error_t jerr;
    json_t *schema = json_loads(schema_text, JSON_DECODE_ANY, &jerr);
    ck_assert_msg(schema, "%s: %s", schema_text, jerr.text);
    json_schema_error e;
    char *text = json_schema_grammar(schema, &e);
    ck_assert_msg(text, "%s: %s", schema_text, e.message);
    ml_grammar *g = NULL;
    ml_error err;
    ml_status s = ml_grammar_parse(text, strlen(text), NULL, &g, &err);
    ck_assert_msg(s == ML_OK, "%s: %s %s: %s\n%s", schema_text, ml_status_name(s), err.field,
                  err.msg, text);
    free(text);
    json_decref(schema);
    return g;
}

/* 1 when text is a whole sentence of g. */
static int whole(const ml_grammar *g, const char *text)
{
    ml_grammar_match *m;
    ml_error err;
    ck_assert_int_eq(ml_grammar_match_new(g, &m, &err), ML_OK);
    ml_status s = ml_grammar_match_feed(m, text, strlen(text), &err);
    ck_assert_msg(s == ML_OK || s == ML_E_MISMATCH, "%s", err.msg);
    int r = !s && ml_grammar_match_complete(m);
    ml_grammar_match_free(m);
    return r;
}

/* Texts the schema accepts, then NULL, then texts it refuses, then NULL. */
static void check_texts(const char *schema, const char *const *texts)
{
    ml_grammar *g = grammar_of(schema);
    int want = 1;
    for (const char *const *t = texts;; t++) {
        if (!*t) {
            if (!want)
                break;
            want = 0;
            continue;
        }
        ck_assert_msg(whole(g, *t) == want, "schema %s, text %s: %s", schema, *t,
                      want ? "refused" : "accepted");
    }
    ml_grammar_free(g);
}
#define TEXTS(schema, ...)                                                                  \
    do {                                                                                    \
        static const char *const t_[] = {__VA_ARGS__, NULL};                                \
        check_texts(schema, t_);                                                            \
    } while (0)

START_TEST(test_basics)
{
    TEXTS("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"},\"b\":{\"enum\":[\"x\",3]}},"
          "\"required\":[\"a\"]}",
          "{\"a\":true}", "{\"a\": false, \"b\": 3}", "{\"a\":true,\"b\":\"x\"}", NULL, "{}",
          "{\"b\":3}", "{\"a\":1}", "{\"a\":true,\"b\":4}", "{\"a\":true,\"c\":1}");
    TEXTS("{\"type\":[\"integer\",\"null\"]}", "12", "-3", "null", NULL, "1.5", "\"1\"");
    TEXTS("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"ab\"", "\"a\\\"c\"",
          "\"\\n\\t\"", "\"😀é\"", NULL, "\"a\"", "\"abcd\"", "\"\\ud83d\\ude00\"");
    TEXTS("{\"type\":\"string\",\"enum\":[\"a\",1,\"b\"]}", "\"a\"", "\"b\"", NULL, "1");
    TEXTS("{\"const\":{\"k\":[1,2]}}", "{\"k\":[1,2]}", NULL, "{\"k\":[1]}");
    TEXTS("{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"next\":{\"$ref\":\"#/$defs/n\"}}}},"
          "\"$ref\":\"#/$defs/n\"}",
          "{}", "{\"next\":{\"next\":{}}}", NULL, "{\"next\":1}");
    TEXTS("{\"properties\":{\"p\":{\"type\":\"integer\"}},\"items\":[{\"$ref\":\"#/properties/p\"}]}",
          "{\"p\":1}", NULL, "[1]"); /* a pointer anywhere; an object rather than an array */
    TEXTS("{\"minLength\":1}", "\"a\"", NULL, "\"\"", "1");
    /* a type beside anyOf that each alternative keeps */
    TEXTS("{\"type\":\"string\",\"anyOf\":[{\"maxLength\":1},{\"format\":\"date\"}]}", "\"a\"",
          "\"2000-01-01\"", NULL, "\"ab\"", "1");
    /* oneOf where no value can match two alternatives: types, values, a
     * discriminating property */
    TEXTS("{\"oneOf\":[{\"type\":\"integer\"},{\"type\":[\"string\",\"null\"]},{\"const\":1.5}]}",
          "3", "\"x\"", "null", "1.5", NULL, "2.5", "true");
    TEXTS("{\"oneOf\":[{\"$ref\":\"#/$defs/a\"},{\"type\":\"object\",\"properties\":{\"kind\":"
          "{\"enum\":[\"b\",\"c\"]},\"n\":{\"type\":\"integer\"}},\"required\":[\"kind\",\"n\"]}],"
          "\"$defs\":{\"a\":{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"a\"}},"
          "\"required\":[\"kind\"]}}}",
          "{\"kind\":\"a\"}", "{\"kind\":\"c\",\"n\":1}", NULL, "{\"kind\":\"a\",\"n\":1}",
          "{\"kind\":\"b\"}");
}
END_TEST

START_TEST(test_pattern)
{
    TEXTS("{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3,4}$\"}", "\"AB-123\"",
          "\"ZZ-0000\"", NULL, "\"AB-12\"", "\"ab-123\"", "\"AB-12345\"", "\"AB123\"");
    TEXTS("{\"pattern\":\"^(?:a|bc)+x?$\"}", "\"a\"", "\"bcax\"", "\"abcbc\"", NULL, "\"\"",
          "\"b\"", "\"ax x\"");
    TEXTS("{\"pattern\":\"^[^a-c]\\\\.\\\\w*$\"}", "\"z.\"", "\"d.a_9\"", NULL, "\"a.\"",
          "\"zz\"", "\"\\\"\"");
    TEXTS("{\"pattern\":\"^.{2}$\"}", "\"ab\"", "\"é.\"", NULL, "\"a\"",
          "\"\\n\\n\"");
    /* the quote, the backslash and control characters as their JSON escapes */
    TEXTS("{\"pattern\":\"^\\\"[\\\\\\\\\\\\n]\\\\t$\"}", "\"\\\"\\\\\\t\"", "\"\\\"\\n\\t\"",
          NULL, "\"\"\\t\"", "\"\\\"\\\\ \"");
    TEXTS("{\"pattern\":\"^(a|)b*?$\"}", "\"\"", "\"ab\"", "\"bb\"", NULL, "\"aa\"");
    TEXTS("{\"pattern\":\"^\\\\s\\\\S$\"}", "\" x\"", "\"\\tx\"", NULL, "\"x \"", "\"  \"");
}
END_TEST

START_TEST(test_format)
{
    TEXTS("{\"type\":\"string\",\"format\":\"date\"}", "\"2024-02-28\"", "\"1999-12-31\"", NULL,
          "\"2024-02-30\"", "\"2024-13-01\"", "\"2024-04-31\"", "\"24-01-01\"");
    TEXTS("{\"format\":\"time\"}", "\"23:59:59Z\"", "\"00:00:00.123+05:30\"", NULL,
          "\"24:00:00Z\"", "\"12:00:00\"", "\"12:60:00Z\"");
    TEXTS("{\"format\":\"date-time\"}", "\"2020-01-01T10:00:00-01:00\"", NULL,
          "\"2020-01-01 10:00:00Z\"");
    TEXTS("{\"format\":\"uuid\"}", "\"123e4567-e89b-12d3-a456-426614174000\"", NULL,
          "\"123e4567e89b12d3a456426614174000\"", "\"123e4567-e89b-12d3-a456-42661417400g\"");
}
END_TEST

/* Every integer of a span, and a few far ones, against the bounds (a
 * side without a bound stops at 16 digits, as the plain integer rule). */
static const long long MIN = -9223372036854775807LL - 1, MAX = 9223372036854775807LL;

static void check_range(const char *bounds, long long lo, long long hi)
{
    char schema[256], text[32];
    snprintf(schema, sizeof schema, "{\"type\":\"integer\"%s}", bounds);
    ml_grammar *g = grammar_of(schema);
    static const long long FAR[] = {-9223372036854775807LL, -1000000000000LL, -123456789,
                                    123456789, 1000000000000LL, 9223372036854775807LL};
    for (long long x = -2100; x <= 2100 + 6; x++) {
        long long v = x <= 2100 ? x : FAR[x - 2101];
        snprintf(text, sizeof text, "%lld", v);
        int want = v >= lo && v <= hi && (hi != MAX || v < 10000000000000000LL) &&
                   (lo != MIN || v > -10000000000000000LL);
        ck_assert_msg(whole(g, text) == want, "%s: %s", schema, text);
    }
    ck_assert_msg(!whole(g, "01") && !whole(g, "-0") && !whole(g, "1.0"), "%s", schema);
    ml_grammar_free(g);
}

START_TEST(test_integer_bounds)
{
    check_range(",\"minimum\":0", 0, MAX);
    check_range(",\"minimum\":7,\"maximum\":1234", 7, 1234);
    check_range(",\"minimum\":-57,\"maximum\":2000", -57, 2000);
    check_range(",\"minimum\":-1999,\"maximum\":-20", -1999, -20);
    check_range(",\"maximum\":-1", MIN, -1);
    check_range(",\"maximum\":305", MIN, 305);
    check_range(",\"minimum\":-10", -10, MAX);
    check_range(",\"minimum\":1024", 1024, MAX);
    check_range(",\"exclusiveMinimum\":0,\"exclusiveMaximum\":100", 1, 99);
    check_range(",\"minimum\":-2.5,\"maximum\":9.5", -2, 9);
    check_range(",\"exclusiveMinimum\":-2.5,\"exclusiveMaximum\":9", -2, 8);
    check_range(",\"minimum\":3,\"exclusiveMinimum\":5,\"maximum\":99,\"exclusiveMaximum\":50", 6, 49);
    check_range(",\"minimum\":100,\"maximum\":100", 100, 100);
    check_range(",\"minimum\":-1000000000000,\"maximum\":1000000000000", -1000000000000LL,
                1000000000000LL);
}
END_TEST

/* Every quarter of a span, as its shortest decimal text, against
 * integer bounds (ex: which ends are exclusive). */
static void check_number_range(const char *bounds, double lo, double hi, int lo_ex, int hi_ex)
{
    char schema[256], text[64];
    snprintf(schema, sizeof schema, "{\"type\":\"number\"%s}", bounds);
    ml_grammar *g = grammar_of(schema);
    for (int k = -1300; k <= 1300; k++) {
        double x = k / 4.0;
        snprintf(text, sizeof text, "%.2f", x);
        char *end = text + strlen(text);
        while (end[-1] == '0')
            *--end = 0;
        if (end[-1] == '.')
            end[-1] = 0;
        if (!strcmp(text, "-0"))
            continue;
        int want = (lo_ex ? x > lo : x >= lo) && (hi_ex ? x < hi : x <= hi);
        ck_assert_msg(whole(g, text) == want, "%s: %s", schema, text);
    }
    ml_grammar_free(g);
}

START_TEST(test_number_bounds)
{
    check_number_range(",\"minimum\":0", 0, INFINITY, 0, 0);
    check_number_range(",\"exclusiveMinimum\":0", 0, INFINITY, 1, 0);
    check_number_range(",\"minimum\":-3,\"maximum\":7", -3, 7, 0, 0);
    check_number_range(",\"exclusiveMinimum\":-3,\"exclusiveMaximum\":7", -3, 7, 1, 1);
    check_number_range(",\"minimum\":-300,\"exclusiveMaximum\":-2", -300, -2, 0, 1);
    check_number_range(",\"exclusiveMinimum\":-300,\"maximum\":-2", -300, -2, 1, 0);
    check_number_range(",\"maximum\":0", -INFINITY, 0, 0, 0);
    check_number_range(",\"exclusiveMaximum\":0", -INFINITY, 0, 0, 1);
    check_number_range(",\"minimum\":12,\"maximum\":12", 12, 12, 0, 0);
    check_number_range(",\"minimum\":1,\"exclusiveMinimum\":1,\"maximum\":2,\"exclusiveMaximum\":9",
                       1, 2, 1, 0);
    /* a fraction in a bound rounds it inward: fewer values, none outside */
    check_number_range(",\"minimum\":-2.5,\"exclusiveMaximum\":4.5", -2, 4, 0, 0);
    TEXTS("{\"minimum\":0.1}", "1", "2.5", NULL, "0.5", "-1", "\"a\"");
}
END_TEST

START_TEST(test_arrays)
{
    TEXTS("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":2}",
          "[1]", "[1, 2]", NULL, "[]", "[1,2,3]", "[\"a\"]");
    TEXTS("{\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "[\"a\",1]", NULL,
          "[\"a\"]", "[1,1]");
    TEXTS("{\"prefixItems\":[{\"type\":\"null\"}],\"items\":{\"type\":\"boolean\"},\"maxItems\":3}",
          "[null]", "[null,true,false]", NULL, "[null,true,false,true]", "[true]");
    TEXTS("{\"prefixItems\":[{\"type\":\"null\"}],\"minItems\":3}", "[null,1,\"a\"]", NULL,
          "[null,1]");
    TEXTS("{\"type\":\"array\",\"items\":false}", "[]", NULL, "[1]");
}
END_TEST

START_TEST(test_objects)
{
    /* additionalProperties as a schema: extra keys, none a property's */
    TEXTS("{\"type\":\"object\",\"properties\":{\"ab\":{\"type\":\"null\"},\"a\":{\"type\":\"null\"}},"
          "\"additionalProperties\":{\"type\":\"integer\"}}",
          "{}", "{\"ab\":null,\"x\":1}", "{\"abc\":1,\"b\":2}", "{\"a\":null,\"\":3}",
          "{\"ab\":null,\"a\":null,\"aa\":1}", NULL, "{\"ab\":1}", "{\"a\":1}", "{\"x\":null}",
          "{\"x\":1,\"ab\":null}");
    TEXTS("{\"additionalProperties\":{\"type\":\"string\"}}", "{}", "{\"k\":\"v\",\"q\":\"w\"}",
          NULL, "{\"k\":1}");
    TEXTS("{\"type\":\"object\",\"additionalProperties\":false}", "{}", NULL, "{\"a\":1}");
    /* allOf: objects merged (anyOf's properties optional), enums intersected */
    TEXTS("{\"allOf\":[{\"$ref\":\"#/$defs/a\"},{\"properties\":{\"b\":{\"type\":\"integer\"}},"
          "\"required\":[\"b\"]},{\"anyOf\":[{\"properties\":{\"c\":{\"type\":\"null\"}}}]}],"
          "\"$defs\":{\"a\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},"
          "\"required\":[\"a\"]}}}",
          "{\"a\":\"x\",\"b\":1}", "{\"a\":\"x\",\"b\":1,\"c\":null}", NULL, "{\"a\":\"x\"}",
          "{\"b\":1}");
    TEXTS("{\"allOf\":[{\"enum\":[\"a\",\"b\",\"c\"]},{\"enum\":[\"b\",\"c\",\"d\"]}]}", "\"b\"",
          "\"c\"", NULL, "\"a\"", "\"d\"");
}
END_TEST

/* Two schemas' rules in one grammar, each under its own prefix. */
START_TEST(test_combined_rules)
{
    json_t *a = json_loads("{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"}},"
                           "\"required\":[\"x\"]}", 0, NULL);
    json_t *b = json_loads("{\"type\":\"array\",\"items\":{\"type\":\"string\"}}", 0, NULL);
    json_schema_error e;
    char *ra = json_schema_rules(a, "tool-a", "a-", &e), *rb = json_schema_rules(b, "tool_b", "b_", &e);
    ck_assert(ra && rb);
    size_t n = strlen(ra) + strlen(rb) + 64;
    char *all = malloc(n);
    ck_assert_ptr_nonnull(all);
    snprintf(all, n, "root ::= tool-a | tool_b\n%s%s", ra, rb);
    ml_grammar *g = NULL;
    ml_error err;
    ck_assert_msg(ml_grammar_parse(all, strlen(all), NULL, &g, &err) == ML_OK, "%s", err.msg);
    ck_assert(whole(g, "{\"x\":1}") && whole(g, "[\"s\"]") && !whole(g, "{\"x\":\"s\"}"));
    ml_grammar_free(g);
    ck_assert_ptr_null(json_schema_rules(a, "a-r3", "a-", &e));
    ck_assert_ptr_null(json_schema_rules(a, "root", "a b", &e));
    ck_assert_ptr_null(json_schema_rules(a, "a-ws", "a-", &e));
    free(all);
    free(ra);
    free(rb);
    json_decref(a);
    json_decref(b);
}
END_TEST

START_TEST(test_refusals)
{
    static const struct {
        const char *schema, *message;
        json_schema_status status;
    } bad[] = {
        {"{\"type\":\"string\",\"pattern\":\"a+\"}",
         "#/pattern: a 'pattern' must start with ^ and end with $ (a pattern that may match "
         "inside the string is not supported)",
         JSON_SCHEMA_UNSUPPORTED},
        {"{\"properties\":{\"a\":{\"pattern\":\"^(?=a)$\"}}}",
         "#/properties/a/pattern: a lookaround or named group is not supported (before '?=a)')",
         JSON_SCHEMA_UNSUPPORTED},
        {"{\"pattern\":\"^(a)\\\\1$\"}",
         "#/pattern: a back reference is not supported (at its end)",
         JSON_SCHEMA_UNSUPPORTED},
        {"{\"pattern\":\"^a{3,2}$\"}",
         "#/pattern: a repetition {m,n} with n below m (at its end)",
         JSON_SCHEMA_INVALID},
        {"{\"pattern\":\"^a{1,2001}$\"}",
         "#/pattern: a repetition above 2000 (before '}')",
         JSON_SCHEMA_UNSUPPORTED},
        {"{\"pattern\":\"^a^b$\"}",
         "#/pattern: an anchor inside the pattern is not supported (before '^b')",
         JSON_SCHEMA_UNSUPPORTED},
        {"{\"pattern\":\"^(a$\"}",
         "#/pattern: a '(' without its ')' (at its end)",
         JSON_SCHEMA_INVALID},
        {"{\"pattern\":\"^[b-a]$\"}",
         "#/pattern: a range out of order (before ']')",
         JSON_SCHEMA_INVALID},
        {"{\"pattern\":\"^\\\\bx$\"}",
         "#/pattern: the word boundary \\b is not supported (before 'x')",
         JSON_SCHEMA_UNSUPPORTED},
        {"{\"type\":\"string\",\"format\":\"email\"}",
         "#/format: the format 'email' is not supported (date, time, date-time and uuid are)",
         JSON_SCHEMA_UNSUPPORTED},
        {"{\"type\":\"string\",\"format\":\"date\",\"maxLength\":12}",
         "#/maxLength: 'maxLength' together with 'format' is not supported",
         JSON_SCHEMA_UNSUPPORTED},
        {"{\"type\":\"number\",\"minimum\":0.5,\"maximum\":0.7}",
         "#: no number lies between the bounds once rounded inward to integers",
         JSON_SCHEMA_UNSUPPORTED},
        {"{\"minimum\":2,\"exclusiveMaximum\":2}", "#: no number lies between the bounds",
         JSON_SCHEMA_INVALID},
        {"{\"type\":\"integer\",\"minimum\":5,\"exclusiveMaximum\":5}",
         "#: no integer lies between the bounds ('minimum' 5, 'maximum' 4)",
         JSON_SCHEMA_INVALID},
        {"{\"type\":\"integer\",\"exclusiveMinimum\":true}",
         "#/exclusiveMinimum: 'exclusiveMinimum' must be a number",
         JSON_SCHEMA_INVALID},
        {"{\"type\":\"object\",\"minProperties\":1}",
         "#/minProperties: the keyword 'minProperties' is not supported",
         JSON_SCHEMA_UNSUPPORTED},
        {"{\"properties\":{\"a/b\":{\"not\":{}}}}",
         "#/properties/a~1b/not: the keyword 'not' is not supported",
         JSON_SCHEMA_UNSUPPORTED},
        {"{\"allOf\":[{\"type\":\"string\"}]}",
         "#/allOf/0/type: 'allOf' merges objects and enums only",
         JSON_SCHEMA_UNSUPPORTED},
        {"{\"allOf\":[{\"properties\":{\"a\":{}}},{\"properties\":{\"a\":{\"type\":\"null\"}}}]}",
         "#/allOf/1/properties: 'allOf' defines the property 'a' twice, differently",
         JSON_SCHEMA_UNSUPPORTED},
        {"{\"allOf\":[{\"enum\":[1]},{\"enum\":[2]}]}",
         "#/allOf: the enums of 'allOf' have no value in common",
         JSON_SCHEMA_INVALID},
        {"{\"allOf\":[{\"anyOf\":[{\"properties\":{\"a\":{}},\"required\":[\"a\"]}]}]}",
         "#/allOf/0/anyOf/0/required: 'required' in an alternative of 'anyOf' inside 'allOf' is "
         "not supported (its properties are merged as optional)",
         JSON_SCHEMA_UNSUPPORTED},
        {"{\"allOf\":[{\"properties\":{\"a\":{}},\"additionalProperties\":false}]}",
         "#/allOf/0/additionalProperties: 'additionalProperties' inside 'allOf' is not supported "
         "(it merges objects' properties and required, and intersects enums)",
         JSON_SCHEMA_UNSUPPORTED},
        {"{\"prefixItems\":[{},{}],\"maxItems\":1}",
         "#/maxItems: 'maxItems' is below the number of 'prefixItems'",
         JSON_SCHEMA_UNSUPPORTED},
        {"{\"items\":false,\"minItems\":1}",
         "#/minItems: 'minItems' asks for more items than 'items': false allows",
         JSON_SCHEMA_INVALID},
        {"{\"$ref\":\"#/$defs/none\"}", "#/$ref: the $ref '#/$defs/none' names nothing in this schema",
         JSON_SCHEMA_INVALID},
        {"{\"$defs\":{\"a\":{\"type\":\"thing\"}},\"$ref\":\"#/$defs/a\"}",
         "#/$defs/a/type: the type 'thing' is not a JSON Schema type",
         JSON_SCHEMA_INVALID},
        {"{\"$ref\":\"#\",\"type\":\"object\"}", "#/type: 'type' beside '$ref' is not supported",
         JSON_SCHEMA_UNSUPPORTED},
        {"{\"additionalProperties\":3}",
         "#/additionalProperties: 'additionalProperties' must be a boolean or a schema",
         JSON_SCHEMA_INVALID},
        {"{\"type\":\"object\",\"properties\":{},\"required\":[\"a\"]}",
         "#/required: 'required' names 'a', which is not among the properties",
         JSON_SCHEMA_INVALID},
        {"{\"type\":\"string\",\"maxLength\":5000}", "#/maxLength: 'maxLength' must be an integer from 0 to 2000",
         JSON_SCHEMA_INVALID},
        {"{\"enum\":[]}", "#/enum: 'enum' must be a non-empty list",
         JSON_SCHEMA_INVALID},
        {"{\"type\":\"string\",\"const\":1}", "#/const: no value of 'const' is of the schema's type",
         JSON_SCHEMA_INVALID},
        {"{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}",
         "#/oneOf: 'oneOf' alternatives 0 and 1 may match the same value, which a grammar cannot "
         "exclude (anyOf can be kept)",
         JSON_SCHEMA_UNSUPPORTED},
        {"{\"oneOf\":[{\"enum\":[\"a\",1]},{\"type\":\"null\"},{\"type\":\"string\"}]}",
         "#/oneOf: 'oneOf' alternatives 0 and 2 may match the same value, which a grammar cannot "
         "exclude (anyOf can be kept)",
         JSON_SCHEMA_UNSUPPORTED},
        {"{\"type\":\"object\",\"anyOf\":[{\"properties\":{}},{\"type\":\"string\"}]}",
         "#/anyOf/1: this alternative may make a value of another type than the 'type' beside "
         "'anyOf'",
         JSON_SCHEMA_UNSUPPORTED},
        {"{\"anyOf\":[{}],\"minLength\":1}", "#/minLength: 'minLength' beside 'anyOf' is not supported",
         JSON_SCHEMA_UNSUPPORTED},
        {"{\"enum\":[\"a\",\"bbbb\"],\"maxLength\":3}",
         "#/maxLength: 'maxLength' beside 'enum' is not supported",
         JSON_SCHEMA_UNSUPPORTED},
        {"{\"const\":1,\"enum\":[1]}",
         "#/enum: 'enum' beside 'const' is not supported",
         JSON_SCHEMA_UNSUPPORTED},
        {"{\"$ref\":\"other.json#/a\"}",
         "#/$ref: the $ref 'other.json#/a' is not into this schema (\"#...\")",
         JSON_SCHEMA_UNSUPPORTED},
        {"{\"$defs\":{\"a\":{\"anyOf\":[{\"type\":\"null\"},{\"$ref\":\"#/$defs/a\"}]}},\"$ref\":\"#/$defs/a\"}",
         "#: the schema can reach its own $ref before any text of a value (a grammar cannot follow "
         "that)",
         JSON_SCHEMA_UNSUPPORTED},
        {"false", "#: the schema false accepts no value",
         JSON_SCHEMA_INVALID},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_t *schema = json_loads(bad[i].schema, JSON_DECODE_ANY, NULL);
        ck_assert_ptr_nonnull(schema);
        json_schema_error e;
        char *text = json_schema_grammar(schema, &e);
        ck_assert_msg(!text, "%s: accepted", bad[i].schema);
        ck_assert_msg(e.status == bad[i].status, "%s: status %d", bad[i].schema, e.status);
        ck_assert_msg(!strcmp(e.message, bad[i].message), "%s:\n got  %s\n want %s", bad[i].schema,
                      e.message, bad[i].message);
        json_decref(schema);
    }
    /* nesting past the cap */
    json_t *deep = json_object();
    for (int i = 0; i < JSON_SCHEMA_MAX_DEPTH + 5; i++)
        deep = json_pack("{ssso}", "type", "array", "items", deep);
    json_schema_error e;
    ck_assert_ptr_null(json_schema_grammar(deep, &e));
    ck_assert_int_eq(e.status, JSON_SCHEMA_UNSUPPORTED);
    ck_assert_msg(strstr(e.message, "the schema nests deeper than 64"), "%s", e.message);
    json_decref(deep);
}
END_TEST

Suite *suite_json_schema(void)
{
    Suite *s = suite_create("json_schema");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_basics);
    tcase_add_test(tc, test_pattern);
    tcase_add_test(tc, test_format);
    tcase_add_test(tc, test_integer_bounds);
    tcase_add_test(tc, test_number_bounds);
    tcase_add_test(tc, test_arrays);
    tcase_add_test(tc, test_objects);
    tcase_add_test(tc, test_combined_rules);
    tcase_add_test(tc, test_refusals);
    suite_add_tcase(s, tc);
    return s;
}
