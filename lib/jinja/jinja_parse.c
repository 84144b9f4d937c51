/* jinja_parse.c - builds the syntax tree from the tokens with jinja2's
 * grammar and precedence: conditional, or, and, not, comparisons, + -,
 * ~, * / // %, **, unary, then postfix (. [] ()), filters and tests.
 * Statements: if, for, set, macro, filter, generation, break, continue. */
#include "jinja/jinja.h"

#include <stdio.h>

typedef struct parser {
    jj_ctx *c;
    const jt *t;
    size_t n, i;
} parser;

static const jt *peek(parser *P) { return &P->t[P->i]; }
static const jt *next(parser *P) { return P->i + 1 < P->n ? &P->t[P->i++] : &P->t[P->i]; }

static int is_op(const jt *t, uint16_t op) { return t->type == JT_OP && t->op == op; }
static int is_name(const jt *t, const char *w)
{
    return t->type == JT_NAME && t->n == strlen(w) && memcmp(t->s, w, t->n) == 0;
}

static const char *describe(const jt *t, char *buf, size_t n)
{
    switch (t->type) {
    case JT_EOF: return "end of template";
    case JT_BLOCK_END: return "end of statement block";
    case JT_VAR_END: return "end of print statement";
    case JT_NAME: snprintf(buf, n, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s); return buf;
    case JT_STRING: return "string";
    case JT_INT: return "integer";
    case JT_FLOAT: return "float";
    case JT_OP:
        if (t->op > 0xff)
            snprintf(buf, n, "'%c%c'", t->op >> 8, t->op & 0xff);
        else
            snprintf(buf, n, "'%c'", t->op);
        return buf;
    default: return "template data";
    }
}

static int unexpected(parser *P, const char *want)
{
    char b[64];
    const jt *t = peek(P);
    return jj_fail(P->c, ML_E_FORMAT, t->pos, "unexpected %s, expected %s", describe(t, b, sizeof b), want);
}

static int expect_op(parser *P, uint16_t op, const char *want)
{
    if (!is_op(peek(P), op))
        return unexpected(P, want);
    next(P);
    return 0;
}

static jj_node *node(parser *P, int type, size_t pos)
{
    jj_node *e = jj_alloc(P->c, sizeof *e);
    if (e) {
        e->type = (uint8_t)type;
        e->pos = pos;
    }
    return e;
}

static int add_kid(parser *P, jj_node *p, jj_node *k)
{
    if (!k)
        return -1;
    if ((p->nk & (p->nk - 1)) == 0) { /* grow at powers of two */
        size_t nc = p->nk ? p->nk * 2 : 1;
        jj_node **nv = jj_grow(P->c, p->kids, p->nk * sizeof(jj_node *), nc * sizeof(jj_node *));
        if (!nv)
            return -1;
        p->kids = nv;
    }
    p->kids[p->nk++] = k;
    return 0;
}

static int enter(parser *P)
{
    if (++P->c->depth > P->c->max_depth)
        return jj_fail(P->c, ML_E_UNSUPPORTED, peek(P)->pos, "depth limit of %u reached", P->c->max_depth);
    return 0;
}
static void leave(parser *P) { P->c->depth--; }

static jj_node *expr(parser *P);
static jj_node *or_expr(parser *P);
static jj_node *unary(parser *P, int with_filter);
static jj_node *primary(parser *P);

/* Call arguments after '(' up to ')': positional, then name=value. */
static int call_args(parser *P, jj_node *call)
{
    next(P); /* ( */
    while (!is_op(peek(P), ')')) {
        if (call->nk && expect_op(P, ',', "',' or ')'"))
            return -1;
        if (is_op(peek(P), ')'))
            break;
        const jt *t = peek(P);
        if (t->type == JT_NAME && is_op(&P->t[P->i + 1 < P->n ? P->i + 1 : P->i], '=')) {
            jj_node *kw = node(P, JN_KWARG, t->pos);
            if (!kw)
                return -1;
            kw->name = t->s;
            kw->nlen = t->n;
            next(P);
            next(P);
            if (!(kw->a = expr(P)) || add_kid(P, call, kw))
                return -1;
        } else if (add_kid(P, call, expr(P))) {
            return -1;
        }
    }
    next(P);
    return 0;
}

static jj_node *postfix(parser *P, jj_node *e)
{
    for (;;) {
        const jt *t = peek(P);
        if (is_op(t, '.')) {
            next(P);
            const jt *a = next(P);
            jj_node *x = node(P, JN_ATTR, t->pos);
            if (!x)
                return NULL;
            x->a = e;
            if (a->type == JT_NAME) {
                x->name = a->s;
                x->nlen = a->n;
            } else if (a->type == JT_INT) {
                x->type = JN_ITEM;
                if (!(x->b = node(P, JN_LIT, a->pos)))
                    return NULL;
                x->b->lit = jv_int(a->i);
            } else {
                P->i--;
                unexpected(P, "attribute name");
                return NULL;
            }
            e = x;
        } else if (is_op(t, '[')) {
            next(P);
            jj_node *x = node(P, JN_ITEM, t->pos);
            if (!x)
                return NULL;
            x->a = e;
            jj_node *parts[3] = {NULL, NULL, NULL};
            int k = 0, slice = 0;
            for (;;) {
                if (is_op(peek(P), ':')) {
                    slice = 1;
                    if (++k > 2) {
                        unexpected(P, "']'");
                        return NULL;
                    }
                    next(P);
                    continue;
                }
                if (is_op(peek(P), ']'))
                    break;
                if (parts[k]) {
                    unexpected(P, "']'");
                    return NULL;
                }
                if (!(parts[k] = expr(P)))
                    return NULL;
            }
            next(P);
            if (slice) {
                x->type = JN_SLICE;
                x->b = parts[0];
                x->c = parts[1];
                x->d = parts[2];
            } else if (!(x->b = parts[0])) {
                unexpected(P, "subscript");
                return NULL;
            }
            e = x;
        } else if (is_op(t, '(')) {
            jj_node *x = node(P, JN_CALL, t->pos);
            if (!x)
                return NULL;
            x->a = e;
            if (call_args(P, x))
                return NULL;
            e = x;
        } else {
            return e;
        }
    }
}

/* A filter's name (after the '|') and its arguments, applied to input. */
static jj_node *filter_call(parser *P, jj_node *input)
{
    const jt *nm = next(P);
    if (nm->type != JT_NAME) {
        P->i--;
        unexpected(P, "filter name");
        return NULL;
    }
    jj_node *x = node(P, JN_FILTER, nm->pos);
    if (!x)
        return NULL;
    x->a = input;
    x->name = nm->s;
    x->nlen = nm->n;
    if (is_op(peek(P), '(') && call_args(P, x))
        return NULL;
    return x;
}

static jj_node *filter_or_test(parser *P, jj_node *e)
{
    for (;;) {
        const jt *t = peek(P);
        if (is_op(t, '|')) {
            next(P);
            if (!(e = filter_call(P, e)))
                return NULL;
        } else if (is_name(t, "is")) {
            next(P);
            jj_node *x = node(P, JN_TEST, t->pos);
            if (!x)
                return NULL;
            if (is_name(peek(P), "not")) {
                x->neg = 1;
                next(P);
            }
            const jt *nm = next(P);
            if (nm->type != JT_NAME) {
                P->i--;
                unexpected(P, "test name");
                return NULL;
            }
            x->a = e;
            x->name = nm->s;
            x->nlen = nm->n;
            const jt *u = peek(P);
            if (is_op(u, '(')) {
                if (call_args(P, x))
                    return NULL;
            } else if ((u->type == JT_NAME && !is_name(u, "else") && !is_name(u, "or") &&
                        !is_name(u, "and") && !is_name(u, "if") && !is_name(u, "is") &&
                        !is_name(u, "in") && !is_name(u, "not")) ||
                       u->type == JT_STRING || u->type == JT_INT || u->type == JT_FLOAT ||
                       is_op(u, '[') || is_op(u, '{')) {
                jj_node *arg = primary(P);
                if (!arg || !(arg = postfix(P, arg)) || add_kid(P, x, arg))
                    return NULL;
            }
            e = x;
        } else if (is_op(t, '(')) {
            if (!(e = postfix(P, e)))
                return NULL;
        } else {
            return e;
        }
    }
}

static jj_node *lit(parser *P, size_t pos, jv v)
{
    jj_node *e = node(P, JN_LIT, pos);
    if (e)
        e->lit = v;
    return e;
}

/* ( ... ): an expression, or a tuple when a comma appears. */
static jj_node *paren(parser *P, size_t pos)
{
    if (is_op(peek(P), ')')) {
        next(P);
        return node(P, JN_TUPLE, pos);
    }
    jj_node *first = expr(P);
    if (!first)
        return NULL;
    if (!is_op(peek(P), ',')) {
        if (expect_op(P, ')', "')'"))
            return NULL;
        return first;
    }
    jj_node *t = node(P, JN_TUPLE, pos);
    if (add_kid(P, t, first))
        return NULL;
    while (is_op(peek(P), ',')) {
        next(P);
        if (is_op(peek(P), ')'))
            break;
        if (add_kid(P, t, expr(P)))
            return NULL;
    }
    return expect_op(P, ')', "')'") ? NULL : t;
}

static jj_node *primary(parser *P)
{
    const jt *t = next(P);
    switch (t->type) {
    case JT_NAME:
        if (is_name(t, "true") || is_name(t, "True"))
            return lit(P, t->pos, jv_bool(1));
        if (is_name(t, "false") || is_name(t, "False"))
            return lit(P, t->pos, jv_bool(0));
        if (is_name(t, "none") || is_name(t, "None"))
            return lit(P, t->pos, jv_none());
        {
            jj_node *e = node(P, JN_NAME, t->pos);
            if (e) {
                e->name = t->s;
                e->nlen = t->n;
            }
            return e;
        }
    case JT_STRING: {
        /* Adjacent literals join, as in Python. */
        jj_buf b = {0};
        if (jj_buf_put(P->c, &b, t->s, t->n))
            return NULL;
        while (peek(P)->type == JT_STRING) {
            const jt *u = next(P);
            if (jj_buf_put(P->c, &b, u->s, u->n))
                return NULL;
        }
        return lit(P, t->pos, jv_str(b.p, b.n));
    }
    case JT_INT: return lit(P, t->pos, jv_int(t->i));
    case JT_FLOAT: return lit(P, t->pos, jv_float(t->f));
    case JT_OP:
        if (t->op == '(')
            return paren(P, t->pos);
        if (t->op == '[' || t->op == '{') {
            int dict = t->op == '{';
            uint16_t close = dict ? '}' : ']';
            jj_node *e = node(P, dict ? JN_DICT : JN_LIST, t->pos);
            if (!e)
                return NULL;
            while (!is_op(peek(P), close)) {
                if (e->nk && expect_op(P, ',', dict ? "',' or '}'" : "',' or ']'"))
                    return NULL;
                if (is_op(peek(P), close))
                    break;
                if (add_kid(P, e, expr(P)))
                    return NULL;
                if (dict && (expect_op(P, ':', "':'") || add_kid(P, e, expr(P))))
                    return NULL;
            }
            next(P);
            return e;
        }
        break;
    default: break;
    }
    P->i--;
    unexpected(P, "an expression");
    return NULL;
}

static jj_node *unary(parser *P, int with_filter)
{
    const jt *t = peek(P);
    jj_node *e;
    if (enter(P))
        return NULL;
    if (is_op(t, '-') || is_op(t, '+')) {
        next(P);
        e = node(P, t->op == '-' ? JN_NEG : JN_POS, t->pos);
        if (e && !(e->a = unary(P, 0)))
            e = NULL;
    } else {
        e = primary(P);
    }
    if (e)
        e = postfix(P, e);
    if (e && with_filter)
        e = filter_or_test(P, e);
    leave(P);
    return e;
}

static jj_node *bin(parser *P, int type, uint16_t op, size_t pos, jj_node *a, jj_node *b)
{
    if (!a || !b)
        return NULL;
    jj_node *e = node(P, type, pos);
    if (e) {
        e->op = op;
        e->a = a;
        e->b = b;
    }
    return e;
}

static jj_node *pow_expr(parser *P)
{
    jj_node *e = unary(P, 1);
    while (e && is_op(peek(P), JJ_OP2('*', '*'))) {
        size_t pos = next(P)->pos;
        e = bin(P, JN_BIN, JJ_OP2('*', '*'), pos, e, unary(P, 1));
    }
    return e;
}

static jj_node *mul_expr(parser *P)
{
    jj_node *e = pow_expr(P);
    for (;;) {
        const jt *t = peek(P);
        if (!e || !(is_op(t, '*') || is_op(t, '/') || is_op(t, '%') || is_op(t, JJ_OP2('/', '/'))))
            return e;
        next(P);
        e = bin(P, JN_BIN, t->op, t->pos, e, pow_expr(P));
    }
}

static jj_node *concat_expr(parser *P)
{
    jj_node *e = mul_expr(P);
    while (e && is_op(peek(P), '~')) {
        size_t pos = next(P)->pos;
        e = bin(P, JN_BIN, '~', pos, e, mul_expr(P));
    }
    return e;
}

static jj_node *add_expr(parser *P)
{
    jj_node *e = concat_expr(P);
    for (;;) {
        const jt *t = peek(P);
        if (!e || !(is_op(t, '+') || is_op(t, '-')))
            return e;
        next(P);
        e = bin(P, JN_BIN, t->op, t->pos, e, concat_expr(P));
    }
}

/* Comparisons chain as in Python: a < b < c is (a < b) and (b < c). */
static jj_node *cmp_expr(parser *P)
{
    jj_node *e = add_expr(P), *last = e, *chain = NULL;
    for (;;) {
        const jt *t = peek(P);
        uint16_t op = 0;
        if (t->type == JT_OP && (t->op == '<' || t->op == '>' || t->op == JJ_OP2('=', '=') ||
                                 t->op == JJ_OP2('!', '=') || t->op == JJ_OP2('<', '=') ||
                                 t->op == JJ_OP2('>', '=')))
            op = t->op;
        else if (is_name(t, "in"))
            op = 'i';
        else if (is_name(t, "not") && P->i + 1 < P->n && is_name(&P->t[P->i + 1], "in"))
            op = 'n';
        if (!op || !e)
            return chain ? chain : e;
        next(P);
        if (op == 'n')
            next(P);
        jj_node *rhs = add_expr(P);
        jj_node *c = bin(P, JN_BIN, op, t->pos, last, rhs);
        if (!c)
            return NULL;
        chain = chain ? bin(P, JN_AND, 0, t->pos, chain, c) : c;
        last = rhs;
    }
}

static jj_node *not_expr(parser *P)
{
    if (is_name(peek(P), "not")) {
        size_t pos = next(P)->pos;
        if (enter(P))
            return NULL;
        jj_node *e = node(P, JN_NOT, pos);
        if (e && !(e->a = not_expr(P)))
            e = NULL;
        leave(P);
        return e;
    }
    return cmp_expr(P);
}

static jj_node *and_expr(parser *P)
{
    jj_node *e = not_expr(P);
    while (e && is_name(peek(P), "and")) {
        size_t pos = next(P)->pos;
        e = bin(P, JN_AND, 0, pos, e, not_expr(P));
    }
    return e;
}

static jj_node *or_expr(parser *P)
{
    jj_node *e = and_expr(P);
    while (e && is_name(peek(P), "or")) {
        size_t pos = next(P)->pos;
        e = bin(P, JN_OR, 0, pos, e, and_expr(P));
    }
    return e;
}

/* a if b else c (the else part optional: undefined). */
static jj_node *expr(parser *P)
{
    if (enter(P))
        return NULL;
    jj_node *e = or_expr(P);
    while (e && is_name(peek(P), "if")) {
        size_t pos = next(P)->pos;
        jj_node *x = node(P, JN_COND, pos);
        if (!x || !(x->a = or_expr(P)))
            return NULL;
        x->b = e;
        if (is_name(peek(P), "else")) {
            next(P);
            if (!(x->c = expr(P)))
                return NULL;
        }
        e = x;
    }
    leave(P);
    return e;
}

/* expr, or a tuple when commas follow (as in {{ a, b }} and set x = a, b). */
static jj_node *tuple_expr(parser *P, int names_only)
{
    size_t pos = peek(P)->pos;
    jj_node *first = names_only ? primary(P) : expr(P);
    if (!first || !is_op(peek(P), ','))
        return first;
    jj_node *t = node(P, JN_TUPLE, pos);
    if (add_kid(P, t, first))
        return NULL;
    while (is_op(peek(P), ',')) {
        next(P);
        const jt *u = peek(P);
        if (u->type == JT_BLOCK_END || u->type == JT_VAR_END || is_name(u, "in") || is_op(u, '='))
            break;
        if (add_kid(P, t, names_only ? primary(P) : expr(P)))
            return NULL;
    }
    return t;
}

/* ---- statements ---- */
static int expect_end(parser *P)
{
    if (peek(P)->type != JT_BLOCK_END)
        return unexpected(P, "end of statement block");
    next(P);
    return 0;
}

/* Parses statements until a {% tag %} named in `ends` (space-separated
 * list); returns the block, leaves the tag name token current. */
static jj_node *body(parser *P, const char *ends, const char *open_tag);

static int tag_in(const jt *t, const char *ends)
{
    if (t->type != JT_NAME || !ends)
        return 0;
    for (const char *p = ends; *p;) {
        const char *q = strchr(p, ' ');
        size_t k = q ? (size_t)(q - p) : strlen(p);
        if (k == t->n && memcmp(p, t->s, k) == 0)
            return 1;
        if (!q)
            break;
        p = q + 1;
    }
    return 0;
}

static int target_ok(parser *P, const jj_node *t)
{
    if (t->type == JN_NAME)
        return 0;
    if (t->type == JN_TUPLE) {
        for (size_t i = 0; i < t->nk; i++)
            if (t->kids[i]->type != JN_NAME)
                return jj_fail(P->c, ML_E_FORMAT, t->kids[i]->pos, "can't assign to this expression");
        return 0;
    }
    return jj_fail(P->c, ML_E_FORMAT, t->pos, "can't assign to this expression");
}

static jj_node *stmt_for(parser *P, size_t pos)
{
    jj_node *s = node(P, JN_FOR, pos);
    if (!s || !(s->a = tuple_expr(P, 1)) || target_ok(P, s->a))
        return NULL;
    if (!is_name(peek(P), "in")) {
        unexpected(P, "'in'");
        return NULL;
    }
    next(P);
    if (!(s->b = or_expr(P)))
        return NULL;
    if (is_name(peek(P), "if")) {
        next(P);
        if (!(s->c = expr(P)))
            return NULL;
    }
    if (is_name(peek(P), "recursive")) {
        jj_fail(P->c, ML_E_FORMAT, peek(P)->pos, "recursive loops are not supported");
        return NULL;
    }
    if (expect_end(P) || !(s->d = body(P, "else endfor", "for")))
        return NULL;
    if (is_name(peek(P), "else")) {
        next(P);
        if (expect_end(P) || !(s->e = body(P, "endfor", "for")))
            return NULL;
    }
    next(P);
    return expect_end(P) ? NULL : s;
}

static jj_node *stmt_if(parser *P, size_t pos)
{
    jj_node *s = node(P, JN_IF, pos);
    if (!s || !(s->a = tuple_expr(P, 0)) || expect_end(P) || !(s->b = body(P, "elif else endif", "if")))
        return NULL;
    const jt *t = peek(P);
    if (is_name(t, "elif")) {
        next(P);
        if (enter(P) || !(s->c = stmt_if(P, t->pos)))
            return NULL;
        leave(P);
        return s;
    }
    if (is_name(t, "else")) {
        next(P);
        if (expect_end(P) || !(s->c = body(P, "endif", "if")))
            return NULL;
    }
    next(P);
    return expect_end(P) ? NULL : s;
}

static jj_node *stmt_set(parser *P, size_t pos)
{
    jj_node *s = node(P, JN_SET, pos);
    if (!s)
        return NULL;
    const jt *t = peek(P);
    if (t->type == JT_NAME && is_op(&P->t[P->i + 1], '.')) {
        /* ns.attr = value */
        jj_node *a = node(P, JN_ATTR, t->pos);
        if (!a || !(a->a = primary(P)))
            return NULL;
        next(P);
        const jt *nm = next(P);
        if (nm->type != JT_NAME) {
            P->i--;
            unexpected(P, "attribute name");
            return NULL;
        }
        a->name = nm->s;
        a->nlen = nm->n;
        s->a = a;
    } else if (!(s->a = tuple_expr(P, 1)) || target_ok(P, s->a)) {
        return NULL;
    }
    if (is_op(peek(P), '=')) {
        next(P);
        if (!(s->b = tuple_expr(P, 0)) || expect_end(P))
            return NULL;
        return s;
    }
    if (s->a->type != JN_NAME) {
        unexpected(P, "'='");
        return NULL;
    }
    s->type = JN_SETBLOCK;
    /* {% set x | filter %} applies filters to the captured text. */
    jj_node *holder = node(P, JN_NAME, pos);
    if (!holder)
        return NULL;
    holder->name = "";
    if (!(s->b = filter_or_test(P, holder)) || expect_end(P) || !(s->d = body(P, "endset", "set")))
        return NULL;
    next(P);
    return expect_end(P) ? NULL : s;
}

static jj_node *stmt_macro(parser *P, size_t pos)
{
    jj_node *s = node(P, JN_MACRO, pos);
    const jt *nm = next(P);
    if (!s || nm->type != JT_NAME) {
        P->i--;
        unexpected(P, "macro name");
        return NULL;
    }
    s->name = nm->s;
    s->nlen = nm->n;
    if (expect_op(P, '(', "'('"))
        return NULL;
    while (!is_op(peek(P), ')')) {
        if (s->nk && expect_op(P, ',', "',' or ')'"))
            return NULL;
        const jt *a = next(P);
        if (a->type != JT_NAME) {
            P->i--;
            unexpected(P, "argument name");
            return NULL;
        }
        jj_node *arg = node(P, JN_NAME, a->pos);
        if (!arg)
            return NULL;
        arg->name = a->s;
        arg->nlen = a->n;
        if (is_op(peek(P), '=')) {
            next(P);
            if (!(arg->a = expr(P)))
                return NULL;
        }
        if (add_kid(P, s, arg))
            return NULL;
    }
    next(P);
    if (expect_end(P) || !(s->d = body(P, "endmacro", "macro")))
        return NULL;
    next(P);
    if (peek(P)->type == JT_NAME)
        next(P); /* {% endmacro name %} */
    return expect_end(P) ? NULL : s;
}

static jj_node *stmt_filter(parser *P, size_t pos)
{
    jj_node *s = node(P, JN_FILTERBLOCK, pos);
    jj_node *holder = node(P, JN_NAME, pos);
    if (!s || !holder)
        return NULL;
    holder->name = "";
    /* The first filter has no '|'. */
    jj_node *x = filter_call(P, holder);
    if (!x)
        return NULL;
    if (!(s->b = filter_or_test(P, x)) || expect_end(P) || !(s->d = body(P, "endfilter", "filter")))
        return NULL;
    next(P);
    return expect_end(P) ? NULL : s;
}

static jj_node *statement(parser *P)
{
    const jt *t = next(P);
    if (t->type != JT_NAME) {
        P->i--;
        unexpected(P, "a statement name");
        return NULL;
    }
    size_t pos = t->pos;
    if (is_name(t, "for"))
        return stmt_for(P, pos);
    if (is_name(t, "if"))
        return stmt_if(P, pos);
    if (is_name(t, "set"))
        return stmt_set(P, pos);
    if (is_name(t, "macro"))
        return stmt_macro(P, pos);
    if (is_name(t, "filter"))
        return stmt_filter(P, pos);
    if (is_name(t, "break") || is_name(t, "continue")) {
        jj_node *s = node(P, is_name(t, "break") ? JN_BREAK : JN_CONTINUE, pos);
        return !s || expect_end(P) ? NULL : s;
    }
    if (is_name(t, "generation")) {
        if (expect_end(P))
            return NULL;
        jj_node *b = body(P, "endgeneration", "generation");
        if (!b)
            return NULL;
        next(P);
        return expect_end(P) ? NULL : b;
    }
    jj_fail(P->c, ML_E_FORMAT, pos, "unknown tag '%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s);
    return NULL;
}

static jj_node *body(parser *P, const char *ends, const char *open_tag)
{
    jj_node *blk = node(P, JN_BLOCK, peek(P)->pos);
    if (!blk || enter(P))
        return NULL;
    for (;;) {
        const jt *t = next(P);
        if (t->type == JT_EOF) {
            P->i--;
            if (ends) {
                char want[64];
                snprintf(want, sizeof want, "end of '%s' block", open_tag);
                jj_fail(P->c, ML_E_FORMAT, t->pos, "unexpected end of template, expected %s", want);
                return NULL;
            }
            break;
        }
        if (t->type == JT_TEXT) {
            jj_node *x = node(P, JN_TEXT, t->pos);
            if (!x)
                return NULL;
            x->lit = jv_str(t->s, t->n);
            if (add_kid(P, blk, x))
                return NULL;
        } else if (t->type == JT_VAR_BEGIN) {
            jj_node *x = node(P, JN_OUTPUT, t->pos);
            if (!x || !(x->a = tuple_expr(P, 0)))
                return NULL;
            if (peek(P)->type != JT_VAR_END) {
                unexpected(P, "end of print statement");
                return NULL;
            }
            next(P);
            if (add_kid(P, blk, x))
                return NULL;
        } else if (t->type == JT_BLOCK_BEGIN) {
            const jt *u = peek(P);
            if (tag_in(u, ends))
                break;
            if (u->type == JT_NAME && u->n > 3 &&
                (memcmp(u->s, "end", 3) == 0 || is_name(u, "else") || is_name(u, "elif"))) {
                char b[64];
                if (ends) {
                    char want[64];
                    const char *sp = strrchr(ends, ' ');
                    snprintf(want, sizeof want, "'%s'", sp ? sp + 1 : ends);
                    jj_fail(P->c, ML_E_FORMAT, u->pos, "unexpected %s, expected %s",
                            describe(u, b, sizeof b), want);
                } else {
                    jj_fail(P->c, ML_E_FORMAT, u->pos, "unexpected %s", describe(u, b, sizeof b));
                }
                return NULL;
            }
            if (is_name(u, "else") || is_name(u, "elif")) {
                char b[64];
                jj_fail(P->c, ML_E_FORMAT, u->pos, "unexpected %s", describe(u, b, sizeof b));
                return NULL;
            }
            if (add_kid(P, blk, statement(P)))
                return NULL;
        } else {
            P->i--;
            unexpected(P, "template data");
            return NULL;
        }
    }
    leave(P);
    return blk;
}

/* jinja2 rejects an unknown filter or test when compiling, except in a
 * "soft" frame (the test and bodies of an if, a conditional expression),
 * where the error waits until it runs.  Loop, macro and block bodies are
 * new frames, never soft. */
static int check_names(jj_ctx *c, const jj_node *e, int soft)
{
    if (!e)
        return 0;
    if (++c->depth > c->max_depth)
        return jj_fail(c, ML_E_UNSUPPORTED, e->pos, "depth limit of %u reached", c->max_depth);
    int rc = 0;
    if (!soft && e->type == JN_FILTER && !jj_builtin_find(JJ_FILTER, e->name, e->nlen))
        rc = jj_fail(c, ML_E_FORMAT, e->pos, "no filter named '%.*s'", (int)(e->nlen > 40 ? 40 : e->nlen), e->name);
    if (!soft && e->type == JN_TEST && !jj_builtin_find(JJ_TEST, e->name, e->nlen))
        rc = jj_fail(c, ML_E_FORMAT, e->pos, "no test named '%.*s'", (int)(e->nlen > 40 ? 40 : e->nlen), e->name);
    int s_a = soft, s_b = soft, s_c = soft, s_d = soft, s_e = soft;
    switch (e->type) {
    case JN_IF: s_a = s_b = s_c = 1; break;
    case JN_COND: s_a = s_b = s_c = 1; break;
    case JN_FOR: s_d = s_e = 0; break;
    case JN_MACRO: case JN_SETBLOCK: case JN_FILTERBLOCK: s_d = 0; break;
    default: break;
    }
    if (!rc)
        rc = check_names(c, e->a, s_a) || check_names(c, e->b, s_b) || check_names(c, e->c, s_c) ||
             check_names(c, e->d, s_d) || check_names(c, e->e, s_e) ? -1 : 0;
    for (size_t i = 0; !rc && i < e->nk; i++)
        rc = check_names(c, e->kids[i], e->type == JN_MACRO ? soft : s_a);
    c->depth--;
    return rc;
}

int jj_parse(jj_ctx *c, const jt_list *toks, jj_node **out)
{
    parser P = {c, toks->v, toks->n, 0};
    *out = body(&P, NULL, NULL);
    return *out && check_names(c, *out, 0) == 0 ? 0 : -1;
}
