/* jinja_api.c - the public entry points of <mlcore/jinja.h>: parse once
 * (newlines normalized and one trailing newline dropped, as jinja2 does),
 * then render with the variables of a JSON object. */
#include "jinja/jinja.h"

#include <stdlib.h>

struct ml_jinja {
    jj_ctx ctx;   /* the arena holding source, tokens and tree */
    jj_node *root;
    ml_jinja_options opts;
};

static void defaults(ml_jinja_options *o, const ml_jinja_options *in)
{
    memset(o, 0, sizeof *o);
    if (in)
        *o = *in;
    if (!o->max_steps)
        o->max_steps = 10000000;
    if (!o->max_depth)
        o->max_depth = 256;
    if (!o->max_output)
        o->max_output = (size_t)16 << 20;
    if (!o->max_memory)
        o->max_memory = (size_t)256 << 20;
}

/* \r\n and \r become \n; one final newline goes (keep_trailing_newline off). */
static char *normalize(jj_ctx *c, const char *text, size_t len, size_t *out_len)
{
    char *s = jj_alloc(c, len + 1);
    if (!s)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '\r') {
            s[o++] = '\n';
            if (i + 1 < len && text[i + 1] == '\n')
                i++;
        } else {
            s[o++] = text[i];
        }
    }
    if (o && s[o - 1] == '\n')
        o--;
    s[o] = 0;
    *out_len = o;
    return s;
}

ml_status ml_jinja_parse(const char *text, size_t len, const ml_jinja_options *opts, ml_jinja **out,
                         ml_error *err)
{
    if (!out)
        return ml__err(err, ML_E_INVAL, "template", -1, "no output handle");
    *out = NULL;
    if (!text && len)
        return ml__err(err, ML_E_INVAL, "template", -1, "no template text");
    if (len >= SIZE_MAX / 4)
        return ml__err(err, ML_E_NOMEM, "template", -1, "template too large");
    ml_jinja *t = calloc(1, sizeof *t);
    if (!t)
        return ml__err(err, ML_E_NOMEM, "template", -1, "out of memory");
    defaults(&t->opts, opts);
    jj_ctx *c = &t->ctx;
    c->arena.cap = t->opts.max_memory;
    c->err = err;
    c->max_steps = UINT64_MAX;
    c->max_depth = t->opts.max_depth;
    size_t n = 0;
    char *src = normalize(c, text ? text : "", len, &n);
    if (src) {
        c->src = src;
        c->src_len = n;
        jt_list toks = {0};
        if (jj_lex(c, src, n, &toks) == 0)
            jj_parse(c, &toks, &t->root);
    }
    if (c->status != ML_OK) {
        ml_status st = c->status;
        ml_jinja_free(t);
        return st;
    }
    c->err = NULL;
    *out = t;
    return ML_OK;
}

void ml_jinja_free(ml_jinja *t)
{
    if (!t)
        return;
    jj_arena_free(&t->ctx.arena);
    free(t);
}

void jj_render_ctx(const ml_jinja *t, jj_ctx *c, ml_error *err)
{
    memset(c, 0, sizeof *c);
    c->arena.cap = t->opts.max_memory;
    c->err = err;
    c->src = t->ctx.src;
    c->src_len = t->ctx.src_len;
    c->max_steps = t->opts.max_steps;
    c->max_depth = t->opts.max_depth;
}

int jj_render_vars(jj_ctx *c, const ml_jinja *t, jv_dict *vars, jj_buf *out)
{
    jj_render r = {c, {0}, NULL, t->opts.now, NULL};
    r.out.max = t->opts.max_output;
    c->steps = 0; /* each render has the whole budget */
    if (!(r.globals = jj_alloc(c, sizeof *r.globals)))
        return -1;
    r.globals->vars = vars;
    jj_scope *top = jj_alloc(c, sizeof *top);
    if (!top || !(top->vars = jv_dict_new(c, 0)))
        return -1;
    top->up = r.globals;
    if (jj_exec(&r, top, t->root, &r.out) || jj_buf_put(c, &r.out, "", 0))
        return -1;
    *out = r.out;
    return 0;
}

int jj_vars_parse(jj_ctx *c, const char *json_vars, size_t len, jv_dict **out)
{
    jv vars = {.kind = JV_DICT};
    if (len == 0) {
        vars.u.d = jv_dict_new(c, 0);
    } else if (jj_json_parse(c, json_vars, len, &vars) == 0 && vars.kind != JV_DICT) {
        ml_error *err = c->err;
        c->src = NULL;
        jj_fail(c, ML_E_INVAL, SIZE_MAX, "the variables must be a JSON object");
        ml__err(err, ML_E_INVAL, "vars", 0, "the variables must be a JSON object");
    }
    if (c->status != ML_OK || !vars.u.d)
        return -1;
    *out = vars.u.d;
    return 0;
}

ml_status ml_jinja_render_json(const ml_jinja *t, const char *json_vars, size_t len, char **out,
                               size_t *out_len, ml_error *err)
{
    if (out)
        *out = NULL;
    if (out_len)
        *out_len = 0;
    if (!t || !out || (!json_vars && len))
        return ml__err(err, ML_E_INVAL, "template", -1, "no template, variables or output");
    jj_ctx c;
    jj_render_ctx(t, &c, err);
    jv_dict *vars;
    jj_buf b;
    if (jj_vars_parse(&c, json_vars, len, &vars) == 0 && jj_render_vars(&c, t, vars, &b) == 0) {
        char *s = malloc(b.n + 1);
        if (!s) {
            jj_fail(&c, ML_E_NOMEM, SIZE_MAX, "out of memory");
        } else {
            if (b.n)
                memcpy(s, b.p, b.n);
            s[b.n] = 0;
            *out = s;
            if (out_len)
                *out_len = b.n;
        }
    }
    ml_status st = c.status;
    jj_arena_free(&c.arena);
    return st;
}
