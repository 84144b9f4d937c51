/* text.c - see text.h: opening the tokenizer beside a model. */
#include "text.h"

#include "cli.h"

#include <stdlib.h>
#include <string.h>

char *cli_tokenizer_beside(const char *model)
{
    size_t n = strlen(model);
    char *p = malloc(n + 5);
    if (!p)
        return NULL;
    memcpy(p, model, n + 1);
    if (n > 4 && strcmp(p + n - 4, ".mlb") == 0)
        memcpy(p + n - 4, ".mlt", 5);
    else
        memcpy(p + n, ".mlt", 5);
    return p;
}

int cli_open_tokenizer(const char *path, const char *model, uint32_t vocab, ml_mlt **mlt,
                       ml_tok **tok)
{
    ml_error err;
    char *def = path ? NULL : cli_tokenizer_beside(model);
    const char *p = path ? path : def;
    if (!p)
        return cli_fail(NULL, ML_E_NOMEM, NULL);
    ml_status s = ml_mlt_open(p, mlt, &err);
    if (!s)
        s = ml_mlt_check_vocab(*mlt, vocab, &err);
    if (!s)
        s = ml_tok_new(*mlt, tok, &err);
    int e = s ? cli_fail(p, s, &err) : 0;
    if (s == ML_E_IO && !path)
        cli_warn(NULL, "hint: give the tokenizer with -k FILE.mlt, or the prompt as ids with --ids");
    free(def);
    return e;
}
