/* tool-split.c - ml-serve's tool-call split (cmd/ml-serve/tools.c) on
 * its own, for the tests: a model's reply read from stdin and split as a
 * template's format says, whole and fed in pieces of every size from 1
 * byte up, which must all agree.
 *
 *   tool-split FORMAT            prints {"content", "reasoning", "tool_calls"}
 *   tool-split --probe TEMPLATE  prints the format the template writes calls in
 *   tool-split --grammar FORMAT [think|-] [TEXT]
 *                                prints the grammar of a request's tools
 *                                (the request's JSON body on stdin; think:
 *                                its prompt left a think block open), or
 *                                with TEXT whether the grammar matches it */
#include "tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(FILE *f, size_t *n)
{
    ml_buf b = {0};
    char chunk[4096];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0)
        if (ml_buf_append(&b, chunk, k))
            exit(3);
    if (ml_buf_reserve(&b, 1))
        exit(3);
    b.data[b.len] = 0;
    *n = b.len;
    return b.data;
}

static int format_named(const char *name)
{
    for (int f = SRV_TOOLS_GENERIC; f <= SRV_TOOLS_LAST; f++)
        if (!strcmp(name, srv_tool_format_name((srv_tool_format)f)))
            return f;
    fprintf(stderr, "tool-split: unknown format '%s'\n", name);
    exit(2);
}

/* The split of text fed `step` bytes at a time, as one JSON object. */
static char *split(int format, const char *text, size_t n, size_t step)
{
    srv_tool_split t;
    ml_buf content = {0}, reasoning = {0};
    json_t *calls = NULL;
    srv_tool_split_init(&t, (srv_tool_format)format, 1, 42);
    for (size_t i = 0; i < n; i += step)
        if (srv_tool_split_put(&t, text + i, n - i < step ? n - i : step, &content, &reasoning))
            exit(3);
    if (srv_tool_split_end(&t, &content, &reasoning, &calls))
        exit(3);
    json_t *o = json_pack("{s:s%,s:s%,s:o}", "content", content.data ? content.data : "",
                          content.len, "reasoning", reasoning.data ? reasoning.data : "",
                          reasoning.len, "tool_calls", calls ? calls : json_array());
    char *out = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    srv_tool_split_free(&t);
    ml_buf_free(&content), ml_buf_free(&reasoning);
    if (!out)
        exit(3);
    return out;
}

static int probe(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    size_t n;
    char *text = slurp(f, &n);
    fclose(f);
    ml_jinja *t;
    ml_error err;
    if (ml_jinja_parse(text, n, NULL, &t, &err)) {
        fprintf(stderr, "tool-split: %s: %s\n", path, err.msg);
        return 1;
    }
    srv_tool_caps c;
    srv_tools_probe(t, &c);
    printf("%s renders_tools=%d tool_role=%d string_args=%d\n", srv_tool_format_name(c.format),
           c.renders_tools, c.tool_role, c.string_args);
    ml_jinja_free(t);
    free(text);
    return 0;
}

/* The grammar of the request on stdin (think: its prompt left a think
 * block open), which must parse; and with a text, whether it matches. */
static int grammar(int format, int think, const char *text)
{
    size_t n;
    char *body = slurp(stdin, &n);
    srv_request q;
    srv_error e;
    srv_tool_caps c = {(srv_tool_format)format, 1, 1, 0};
    int rc = srv_request_parse(SRV_CHAT, body, n, 1000, &q, &e);
    q.think_open = think;
    char *g = rc ? NULL : srv_tools_grammar(&c, &q, &e);
    ml_grammar *gr = NULL;
    ml_grammar_match *m = NULL;
    ml_error err;
    if (g && (ml_grammar_parse(g, strlen(g), NULL, &gr, &err) || ml_grammar_match_new(gr, &m, &err))) {
        printf("the grammar does not parse: %s\n%s", err.msg, g);
        rc = 1;
    } else if (g && text) {
        int ok = !ml_grammar_match_feed(m, text, strlen(text), &err) && ml_grammar_match_complete(m);
        puts(ok ? "match" : "no match");
    } else if (g)
        fputs(g, stdout);
    else if (rc || e.status)
        printf("%d %s %s\n", e.status, e.param ? e.param : "-", e.message);
    ml_grammar_match_free(m);
    ml_grammar_free(gr);
    free(g);
    srv_request_free(&q);
    free(body);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--probe"))
        return probe(argv[2]);
    if ((argc == 3 || argc == 4 || argc == 5) && !strcmp(argv[1], "--grammar"))
        return grammar(format_named(argv[2]), argc >= 4 && !strcmp(argv[3], "think"),
                       argc == 5 ? argv[4] : NULL);
    if (argc != 2) {
        fputs("usage: tool-split FORMAT < TEXT | --probe TEMPLATE |\n"
              "       --grammar FORMAT [think|-] [TEXT] < BODY\n",
              stderr);
        return 2;
    }
    int format = format_named(argv[1]);
    size_t n;
    char *text = slurp(stdin, &n);
    char *whole = split(format, text, n, n ? n : 1);
    for (size_t step = 1; step < n && step <= 64; step++) {
        char *part = split(format, text, n, step);
        if (strcmp(part, whole)) {
            fprintf(stderr, "tool-split: fed %zu bytes at a time: %s\nwhole: %s\n", step, part,
                    whole);
            return 1;
        }
        free(part);
    }
    puts(whole);
    free(whole);
    free(text);
    return 0;
}
