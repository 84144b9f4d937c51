/* json-schema-reference.c - the mlcore side of tools/json-schema-reference.sh.
 *
 *   json-schema-reference grammar < SCHEMA   json_schema_grammar's text (exit 1
 *                                            and the message when refused)
 *   json-schema-reference match FILE < TEXTS 1 or 0 per line: the line is a
 *                                            whole sentence of the GBNF in FILE
 *
 * match reads llama.cpp's grammars as well as ours, so both are run by the
 * same matcher. */
#include "json_schema.h"

#include <mlcore.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int grammar(void)
{
    json_error_t jerr;
    json_t *schema = json_loadf(stdin, JSON_DECODE_ANY, &jerr);
    if (!schema) {
        fprintf(stderr, "not JSON: %s\n", jerr.text);
        return 2;
    }
    json_schema_error e;
    char *text = json_schema_grammar(schema, &e);
    json_decref(schema);
    if (!text) {
        fprintf(stderr, "%s\n", e.message);
        return 1;
    }
    fputs(text, stdout);
    free(text);
    return 0;
}

static int match(const char *path)
{
    static char text[ML_GRAMMAR_MAX_TEXT];
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(text, 1, sizeof text, f) : 0;
    if (f)
        fclose(f);
    ml_grammar *g;
    ml_error err;
    if (ml_grammar_parse(text, n, NULL, &g, &err)) {
        fprintf(stderr, "%s: %s: %s\n", path, err.field, err.msg);
        return 2;
    }
    static char line[1 << 16];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = 0;
        ml_grammar_match *m;
        if (ml_grammar_match_new(g, &m, &err))
            return 2;
        ml_status s = ml_grammar_match_feed(m, line, strlen(line), &err);
        printf("%d\n", !s && ml_grammar_match_complete(m));
        ml_grammar_match_free(m);
    }
    ml_grammar_free(g);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "grammar"))
        return grammar();
    if (argc == 3 && !strcmp(argv[1], "match"))
        return match(argv[2]);
    fputs("usage: json-schema-reference grammar < SCHEMA | match GRAMMAR < TEXTS\n", stderr);
    return 2;
}
