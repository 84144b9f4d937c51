/* gguf.c - mlb-info on a GGUF file: works out what gguf2mlb would make of
 * it (the library's conversion plan with gguf2mlb's defaults, and the
 * tokenizer checked but not written), has it printed as text or JSON, and
 * gives the exit status gguf2mlb would give.  The GGUF itself was
 * validated whole by ml_gguf_open. */
#include "info.h"

#include <string.h>

static void make_prospect(const ml_gguf *g, prospect *p)
{
    memset(p, 0, sizeof *p);
    p->has_model = ml_gguf_n_tensors(g) > 0;
    if (p->has_model) {
        ml_convert_opts co;
        ml_convert_opts_init(&co);
        p->plan_status = ml_convert_plan_new(g, &co, &p->plan, &p->plan_err);
    }
    p->tok_status = ml_mlt_from_gguf_ex(g, NULL, NULL, &p->tok, &p->tok_err);
}

/* gguf2mlb's status: the model's plan decides; a vocabulary-only file is
 * judged by its tokenizer, the one thing gguf2mlb --tokenizer-only makes
 * of it.  A model whose vocabulary does not convert still converts (as
 * gguf2mlb does without -t), so the tokenizer does not count there. */
static int report_failure(const char *path, const prospect *p)
{
    if (p->has_model)
        return p->plan_status ? cli_fail(path, p->plan_status, &p->plan_err) : EXIT_OK;
    return p->tok_status ? cli_fail(path, p->tok_status, &p->tok_err) : EXIT_OK;
}

int gguf_print(const char *path, const ml_gguf *g, const options *o)
{
    prospect p;
    make_prospect(g, &p);
    if (o->json)
        gguf_print_json(path, g, &p, o);
    else
        gguf_print_text(path, g, &p, o);
    int rc = report_failure(path, &p);
    ml_convert_plan_free(p.plan);
    return rc;
}
