/* jinja_eval.c - evaluates expressions and executes statements of the
 * syntax tree: scopes (one per loop iteration and per macro call, as
 * jinja2 has them), attribute and item lookup with jinja2's getattr rules
 * and the sandbox's refusal of mutating methods, Python arithmetic on
 * int64 with overflow refused, loops with loop.*, macros, and calls. */
/* memmem: substring search in linear time (two-way in glibc), so a
 * hostile template cannot make a search quadratic. */
#define _GNU_SOURCE
#include "jinja/jinja.h"

#include <math.h>
#include <stdio.h>
#include <time.h>

enum { FLOW_BREAK = 1, FLOW_CONTINUE = 2 };

static int enter(jj_render *r, size_t pos)
{
    if (++r->c->depth > r->c->max_depth)
        return jj_fail(r->c, ML_E_UNSUPPORTED, pos, "depth limit of %u reached", r->c->max_depth);
    return 0;
}

/* ---- scopes ---- */
/* The arena never frees, so loops reuse the scopes of loops that ended:
 * a long loop of short loops stays in constant memory. */
static jj_scope *scope_new(jj_render *r, jj_scope *up)
{
    jj_scope *s = r->spare;
    if (s) {
        r->spare = s->up;
        s->up = up;
        s->vars->n = 0;
        return s;
    }
    s = jj_alloc(r->c, sizeof *s);
    if (!s || !(s->vars = jv_dict_new(r->c, 0)))
        return NULL;
    s->up = up;
    return s;
}

static int scope_set(jj_render *r, jj_scope *s, const char *name, size_t n, jv v)
{
    return jv_dict_set(r->c, s->vars, jv_str(name, n), v);
}

static const char *const builtins[] = {"range", "dict", "namespace", "raise_exception",
                                       "strftime_now", NULL};

static int lookup(jj_render *r, jj_scope *s, const jj_node *e, jv *out)
{
    for (; s; s = s->up) {
        jv *v = jv_dict_gets(s->vars, e->name, e->nlen);
        if (v) {
            *out = *v;
            return 0;
        }
    }
    for (int i = 0; builtins[i]; i++) {
        if (strlen(builtins[i]) == e->nlen && memcmp(builtins[i], e->name, e->nlen) == 0) {
            jv_func *f = jj_alloc(r->c, sizeof *f);
            if (!f)
                return -1;
            f->name = builtins[i];
            f->self = jv_none();
            *out = (jv){.kind = JV_FUNC};
            out->u.fn = f;
            return 0;
        }
    }
    *out = jv_undef(e->name, e->nlen);
    return 0;
}

static int undefined_error(jj_render *r, jv u, size_t pos)
{
    if (u.flags & JV_UNSAFE)
        return jj_fail(r->c, ML_E_INVAL, pos, "access to attribute '%.*s' is unsafe",
                       (int)(u.n > 60 ? 60 : u.n), u.u.s);
    if (u.u.s)
        return jj_fail(r->c, ML_E_INVAL, pos, "'%.*s' is undefined", (int)(u.n > 60 ? 60 : u.n), u.u.s);
    return jj_fail(r->c, ML_E_INVAL, pos, "value is undefined");
}

/* ---- attributes and items ---- */
static int loop_attr(jj_render *r, jv self, const char *name, size_t n, jv *out)
{
    jj_loop *L = self.u.loop;
    size_t len = L->items->n, i = L->i;
#define IS(w) (n == strlen(w) && memcmp(name, w, n) == 0)
    if (IS("index")) *out = jv_int((int64_t)i + 1);
    else if (IS("index0")) *out = jv_int((int64_t)i);
    else if (IS("revindex")) *out = jv_int((int64_t)(len - i));
    else if (IS("revindex0")) *out = jv_int((int64_t)(len - i - 1));
    else if (IS("first")) *out = jv_bool(i == 0);
    else if (IS("last")) *out = jv_bool(i + 1 == len);
    else if (IS("length")) *out = jv_int((int64_t)len);
    else if (IS("depth")) *out = jv_int(1);
    else if (IS("depth0")) *out = jv_int(0);
    else if (IS("previtem")) *out = i ? L->items->v[i - 1] : jv_undef("previtem", 8);
    else if (IS("nextitem")) *out = i + 1 < len ? L->items->v[i + 1] : jv_undef("nextitem", 8);
    else if (IS("cycle")) {
        jv_func *f = jj_alloc(r->c, sizeof *f);
        if (!f)
            return -1;
        f->name = "cycle";
        f->self = self;
        *out = (jv){.kind = JV_FUNC};
        out->u.fn = f;
    } else *out = jv_undef(name, n);
#undef IS
    return 0;
}

static int bound(jj_render *r, jv self, const char *name, size_t n, jv *out)
{
    jv_func *f = jj_alloc(r->c, sizeof *f);
    char *nm = jj_strdup(r->c, name, n);
    if (!f || !nm)
        return -1;
    f->name = nm;
    f->self = self;
    *out = (jv){.kind = JV_FUNC};
    out->u.fn = f;
    return 0;
}

/* x.name: jinja2 tries the Python attribute first, then the item. */
static int get_attr(jj_render *r, jv x, const char *name, size_t n, jv *out, size_t pos)
{
    if (x.kind == JV_UNDEF)
        return undefined_error(r, x, pos);
    if (x.kind == JV_LOOP)
        return loop_attr(r, x, name, n, out);
    int unsafe = 0;
    if (jj_has_method(x, name, n, &unsafe)) {
        if (unsafe) {
            *out = jv_undef(name, n);
            out->flags |= JV_UNSAFE;
            return 0;
        }
        return bound(r, x, name, n, out);
    }
    if (x.kind == JV_DICT || x.kind == JV_NS) {
        jv *v = jv_dict_gets(x.u.d, name, n);
        *out = v ? *v : jv_undef(name, n);
        return 0;
    }
    *out = jv_undef(name, n);
    return 0;
}

/* x[k]: the item first, then the attribute. */
static int get_item(jj_render *r, jv x, jv k, jv *out, size_t pos)
{
    if (x.kind == JV_UNDEF)
        return undefined_error(r, x, pos);
    if (x.kind == JV_DICT || x.kind == JV_NS) {
        jv *v = jv_dict_get(x.u.d, k);
        if (v) {
            *out = *v;
            return 0;
        }
    } else if (x.kind == JV_LIST && (x.flags & (JV_GEN | JV_VIEW))) {
        *out = jv_undef(NULL, 0); /* not subscriptable: jinja2 gives undefined */
        return 0;
    } else if ((x.kind == JV_LIST || x.kind == JV_STR) && (k.kind == JV_INT || k.kind == JV_BOOL)) {
        int64_t i = k.kind == JV_INT ? k.u.i : k.u.b;
        size_t len = x.kind == JV_LIST ? x.u.l->n : jj_u8_len(x.u.s, x.n);
        if (i < 0)
            i += (int64_t)len;
        if (i < 0 || (uint64_t)i >= len) {
            *out = jv_undef(NULL, 0);
            return 0;
        }
        if (x.kind == JV_LIST) {
            *out = x.u.l->v[i];
        } else {
            size_t a = jj_u8_off(x.u.s, x.n, (size_t)i), b = jj_u8_off(x.u.s, x.n, (size_t)i + 1);
            *out = jv_str(x.u.s + a, b - a);
        }
        return 0;
    }
    if (x.kind == JV_LOOP && k.kind == JV_STR)
        return loop_attr(r, x, k.u.s, k.n, out);
    if (k.kind == JV_STR)
        return get_attr(r, x, k.u.s, k.n, out, pos);
    *out = jv_undef(NULL, 0);
    return 0;
}

static int as_index(jj_render *r, jv v, int64_t *out, size_t pos)
{
    if (v.kind == JV_INT || v.kind == JV_BOOL) {
        *out = v.kind == JV_INT ? v.u.i : v.u.b;
        return 0;
    }
    return jj_fail(r->c, ML_E_INVAL, pos, "slice indices must be integers or None");
}

/* x[a:b:c] with Python's clamping rules. */
static int slice(jj_render *r, jv x, const jj_node *e, jv *out, jj_scope *s)
{
    jv va = jv_none(), vb = jv_none(), vc = jv_none();
    if ((e->b && jj_eval(r, s, e->b, &va)) || (e->c && jj_eval(r, s, e->c, &vb)) ||
        (e->d && jj_eval(r, s, e->d, &vc)))
        return -1;
    if (x.kind == JV_UNDEF)
        return undefined_error(r, x, e->pos);
    if ((x.kind != JV_LIST && x.kind != JV_STR) || (x.kind == JV_LIST && (x.flags & (JV_GEN | JV_VIEW))))
        return jj_fail(r->c, ML_E_INVAL, e->pos, "'%s' object is not subscriptable", jv_type_name(x));
    int64_t len = (int64_t)(x.kind == JV_LIST ? x.u.l->n : jj_u8_len(x.u.s, x.n));
    int64_t step = 1, a = 0, b = 0;
    if (vc.kind != JV_NONE && as_index(r, vc, &step, e->pos))
        return -1;
    if (step == 0)
        return jj_fail(r->c, ML_E_INVAL, e->pos, "slice step cannot be zero");
    if (va.kind == JV_NONE) a = step < 0 ? len - 1 : 0;
    else {
        if (as_index(r, va, &a, e->pos))
            return -1;
        if (a < 0) a += len;
        if (a < 0) a = step < 0 ? -1 : 0;
        if (a >= len) a = step < 0 ? len - 1 : len;
    }
    if (vb.kind == JV_NONE) b = step < 0 ? -1 : len;
    else {
        if (as_index(r, vb, &b, e->pos))
            return -1;
        if (b < 0) b += len;
        if (b < 0) b = step < 0 ? -1 : 0;
        if (b >= len) b = step < 0 ? len - 1 : len;
    }
    if (x.kind == JV_LIST) {
        jv_list *l = jv_list_new(r->c, 0);
        if (!l)
            return -1;
        for (int64_t i = a; step > 0 ? i < b : i > b; i += step)
            if (jv_list_push(r->c, l, x.u.l->v[i]))
                return -1;
        *out = jv_of_list(l, x.flags & JV_TUPLE);
        return 0;
    }
    if (step == 1) {
        size_t oa = jj_u8_off(x.u.s, x.n, (size_t)a), ob = a < b ? jj_u8_off(x.u.s, x.n, (size_t)b) : oa;
        *out = jv_str(x.u.s + oa, ob - oa);
        return 0;
    }
    jj_buf buf = {0};
    for (int64_t i = a; step > 0 ? i < b : i > b; i += step) {
        size_t oa = jj_u8_off(x.u.s, x.n, (size_t)i), ob = jj_u8_off(x.u.s, x.n, (size_t)i + 1);
        if (jj_buf_put(r->c, &buf, x.u.s + oa, ob - oa) || jj_step(r->c, e->pos))
            return -1;
    }
    *out = jv_str(buf.p, buf.n);
    return 0;
}

/* ---- arithmetic ---- */
static int num(jv v) { return v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL; }
static double fval(jv v) { return v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : v.u.b; }
static int64_t ival(jv v) { return v.kind == JV_INT ? v.u.i : v.u.b; }

static int type_error(jj_render *r, size_t pos, const char *op, jv a, jv b)
{
    return jj_fail(r->c, ML_E_INVAL, pos, "unsupported operand type(s) for %s: '%s' and '%s'", op,
                   jv_type_name(a), jv_type_name(b));
}

static int overflow(jj_render *r, size_t pos)
{
    return jj_fail(r->c, ML_E_INVAL, pos, "integer overflow (beyond 64 bits)");
}

static int repeat(jj_render *r, jv seq, int64_t k, jv *out, size_t pos)
{
    if (k < 0)
        k = 0;
    if (seq.kind == JV_STR) {
        jj_buf b = {0};
        for (int64_t i = 0; i < k; i++)
            if (jj_buf_put(r->c, &b, seq.u.s, seq.n) || jj_step(r->c, pos))
                return -1;
        *out = jv_str(b.p, b.n);
        return 0;
    }
    jv_list *l = jv_list_new(r->c, 0);
    if (!l)
        return -1;
    for (int64_t i = 0; i < k; i++)
        for (size_t j = 0; j < seq.u.l->n; j++)
            if (jv_list_push(r->c, l, seq.u.l->v[j]) || jj_step(r->c, pos))
                return -1;
    *out = jv_of_list(l, seq.flags & JV_TUPLE);
    return 0;
}

static int arith(jj_render *r, uint16_t op, jv a, jv b, jv *out, size_t pos)
{
    char ops[3] = {(char)(op > 0xff ? op >> 8 : op), (char)(op > 0xff ? op & 0xff : 0), 0};
    if (a.kind == JV_UNDEF)
        return undefined_error(r, a, pos);
    if (b.kind == JV_UNDEF)
        return undefined_error(r, b, pos);
    if (op == '+' && ((a.flags & JV_SAFE) || (b.flags & JV_SAFE)) && (a.kind == JV_STR || b.kind == JV_STR)) {
        /* Markup + x escapes x (markupsafe); the sum is Markup. */
        if (jj_escape(r, a, &a) || jj_escape(r, b, &b))
            return -1;
        a.flags = b.flags = 0;
        if (arith(r, op, a, b, out, pos))
            return -1;
        out->flags = JV_SAFE;
        return 0;
    }
    if (op == '+' && a.kind == JV_STR && b.kind == JV_STR) {
        jj_buf buf = {0};
        if (jj_buf_put(r->c, &buf, a.u.s, a.n) || jj_buf_put(r->c, &buf, b.u.s, b.n))
            return -1;
        *out = jv_str(buf.p ? buf.p : "", buf.n);
        return 0;
    }
    if (op == '+' && a.kind == JV_LIST && b.kind == JV_LIST && (a.flags & JV_TUPLE) == (b.flags & JV_TUPLE)) {
        jv_list *l = jv_list_new(r->c, a.u.l->n + b.u.l->n);
        if (!l)
            return -1;
        for (size_t i = 0; i < a.u.l->n; i++)
            l->v[l->n++] = a.u.l->v[i];
        for (size_t i = 0; i < b.u.l->n; i++)
            l->v[l->n++] = b.u.l->v[i];
        *out = jv_of_list(l, a.flags & JV_TUPLE);
        return 0;
    }
    if (op == '*' && (a.kind == JV_STR || a.kind == JV_LIST) && (b.kind == JV_INT || b.kind == JV_BOOL))
        return repeat(r, a, ival(b), out, pos);
    if (op == '*' && (b.kind == JV_STR || b.kind == JV_LIST) && (a.kind == JV_INT || a.kind == JV_BOOL))
        return repeat(r, b, ival(a), out, pos);
    if (op == '%' && a.kind == JV_STR)
        return jj_percent(r->c, a, b, out, pos);
    if (!num(a) || !num(b))
        return type_error(r, pos, ops, a, b);
    int isf = a.kind == JV_FLOAT || b.kind == JV_FLOAT;
    if (op == '/') {
        if (fval(b) == 0)
            return jj_fail(r->c, ML_E_INVAL, pos, "division by zero");
        *out = jv_float(fval(a) / fval(b));
        return 0;
    }
    if (isf) {
        double x = fval(a), y = fval(b), z;
        switch (op) {
        case '+': z = x + y; break;
        case '-': z = x - y; break;
        case '*': z = x * y; break;
        case JJ_OP2('/', '/'):
        case '%':
            if (y == 0)
                return jj_fail(r->c, ML_E_INVAL, pos, "float division by zero");
            z = op == '%' ? fmod(x, y) : floor(x / y);
            if (op == '%' && z != 0 && ((z < 0) != (y < 0)))
                z += y;
            break;
        default: z = pow(x, y); break;
        }
        *out = jv_float(z);
        return 0;
    }
    int64_t x = ival(a), y = ival(b), z = 0;
    switch (op) {
    case '+': if (__builtin_add_overflow(x, y, &z)) return overflow(r, pos); break;
    case '-': if (__builtin_sub_overflow(x, y, &z)) return overflow(r, pos); break;
    case '*': if (__builtin_mul_overflow(x, y, &z)) return overflow(r, pos); break;
    case JJ_OP2('/', '/'):
    case '%':
        if (y == 0)
            return jj_fail(r->c, ML_E_INVAL, pos, "integer division or modulo by zero");
        if (x == INT64_MIN && y == -1)
            return overflow(r, pos);
        z = op == '%' ? x % y : x / y;
        if (op == '%' && z != 0 && ((z < 0) != (y < 0)))
            z += y;
        if (op != '%' && (x % y != 0) && ((x < 0) != (y < 0)))
            z -= 1;
        break;
    default: /* ** */
        if (y < 0) {
            if (x == 0)
                return jj_fail(r->c, ML_E_INVAL, pos, "0.0 cannot be raised to a negative power");
            *out = jv_float(pow((double)x, (double)y));
            return 0;
        }
        z = 1;
        for (int64_t base = x, e = y; e; e >>= 1) {
            if ((e & 1) && __builtin_mul_overflow(z, base, &z))
                return overflow(r, pos);
            if (e > 1 && __builtin_mul_overflow(base, base, &base))
                return overflow(r, pos);
        }
    }
    *out = jv_int(z);
    return 0;
}

static int contains(jj_render *r, jv hay, jv needle, int *out, size_t pos)
{
    if (hay.kind == JV_STR) {
        if (needle.kind != JV_STR)
            return jj_fail(r->c, ML_E_INVAL, pos, "'in <string>' requires string as left operand, not %s",
                           jv_type_name(needle));
        if (jj_steps(r->c, hay.n / 64, pos))
            return -1;
        *out = needle.n == 0 || memmem(hay.u.s, hay.n, needle.u.s, needle.n) != NULL;
        return 0;
    }
    if (hay.kind == JV_LIST) {
        *out = 0;
        if (jj_steps(r->c, hay.u.l->n, pos))
            return -1;
        for (size_t i = 0; !*out && i < hay.u.l->n; i++)
            *out = jv_equal(r->c, hay.u.l->v[i], needle);
        return 0;
    }
    if (hay.kind == JV_DICT || hay.kind == JV_NS) {
        if (hay.kind == JV_DICT && !jv_hashable(needle))
            return jj_fail(r->c, ML_E_INVAL, pos, "unhashable type: '%s'", jv_type_name(needle));
        *out = jv_dict_get(hay.u.d, needle) != NULL;
        return 0;
    }
    if (hay.kind == JV_UNDEF) {
        *out = 0; /* Undefined iterates as empty */
        return 0;
    }
    return jj_fail(r->c, ML_E_INVAL, pos, "argument of type '%s' is not iterable", jv_type_name(hay));
}

static int binop(jj_render *r, const jj_node *e, jv a, jv b, jv *out)
{
    int bad = 0, res = 0;
    /* Comparing long strings is work even without allocating. */
    if (e->op != '~' && jj_steps(r->c, (a.kind == JV_STR ? a.n / 64 : 0) + (b.kind == JV_STR ? b.n / 64 : 0),
                                 e->pos))
        return -1;
    switch (e->op) {
    case '~': {
        jj_buf buf = {0};
        if (jv_to_str(r->c, a, &buf) || jv_to_str(r->c, b, &buf))
            return -1;
        *out = jv_str(buf.p, buf.n);
        return 0;
    }
    case JJ_OP2('=', '='): *out = jv_bool(jv_equal(r->c, a, b)); return 0;
    case JJ_OP2('!', '='): *out = jv_bool(!jv_equal(r->c, a, b)); return 0;
    case 'i': case 'n':
        if (contains(r, b, a, &res, e->pos))
            return -1;
        *out = jv_bool(e->op == 'i' ? res : !res);
        return 0;
    case '<': case '>': case JJ_OP2('<', '='): case JJ_OP2('>', '='): {
        int c = jv_cmp(r->c, a, b, &bad);
        if (bad) {
            if (a.kind == JV_UNDEF)
                return undefined_error(r, a, e->pos);
            if (b.kind == JV_UNDEF)
                return undefined_error(r, b, e->pos);
            return jj_fail(r->c, ML_E_INVAL, e->pos, "'<' not supported between instances of '%s' and '%s'",
                           jv_type_name(a), jv_type_name(b));
        }
        res = e->op == '<' ? c < 0 : e->op == '>' ? c > 0 : e->op == JJ_OP2('<', '=') ? c <= 0 : c >= 0;
        *out = jv_bool(res);
        return 0;
    }
    default: return arith(r, e->op, a, b, out, e->pos);
    }
}

/* ---- calls ---- */
typedef struct argv_ {
    jv pos[16];
    size_t n;
    jv kv[16];
    const jj_node *kn[16];
    size_t nk;
} argv_;

static int eval_args(jj_render *r, jj_scope *s, const jj_node *call, argv_ *a)
{
    a->n = a->nk = 0;
    for (size_t i = 0; i < call->nk; i++) {
        const jj_node *k = call->kids[i];
        if (k->type == JN_KWARG) {
            if (a->nk == 16)
                return jj_fail(r->c, ML_E_INVAL, k->pos, "too many arguments");
            a->kn[a->nk] = k;
            if (jj_eval(r, s, k->a, &a->kv[a->nk++]))
                return -1;
        } else {
            if (a->n == 16)
                return jj_fail(r->c, ML_E_INVAL, k->pos, "too many arguments");
            if (jj_eval(r, s, k, &a->pos[a->n++]))
                return -1;
        }
    }
    return 0;
}

static int call_macro(jj_render *r, struct jj_macro *m, const jj_args *a, jv *out, size_t pos)
{
    const jj_node *def = m->def;
    if (a->n > def->nk)
        return jj_fail(r->c, ML_E_INVAL, pos, "macro '%.*s' takes not more than %zu argument(s)",
                       (int)def->nlen, def->name, def->nk);
    jj_scope *s = scope_new(r, m->scope);
    if (!s || enter(r, pos))
        return -1;
    for (size_t k = 0; k < a->nk; k++) {
        size_t i = 0;
        for (; i < def->nk; i++)
            if (def->kids[i]->nlen == a->kn[k]->nlen &&
                memcmp(def->kids[i]->name, a->kn[k]->name, a->kn[k]->nlen) == 0)
                break;
        if (i == def->nk)
            return jj_fail(r->c, ML_E_INVAL, pos, "macro '%.*s' takes no keyword argument '%.*s'",
                           (int)def->nlen, def->name, (int)a->kn[k]->nlen, a->kn[k]->name);
    }
    for (size_t i = 0; i < def->nk; i++) {
        const jj_node *p = def->kids[i];
        jv v = jv_undef(p->name, p->nlen);
        int have = 0;
        if (i < a->n) {
            v = a->v[i];
            have = 1;
        }
        for (size_t k = 0; k < a->nk; k++)
            if (p->nlen == a->kn[k]->nlen && memcmp(p->name, a->kn[k]->name, p->nlen) == 0)
                v = a->kv[k], have = 1;
        if (!have && p->a && jj_eval(r, s, p->a, &v))
            return -1;
        if (scope_set(r, s, p->name, p->nlen, v))
            return -1;
    }
    jj_buf buf = {0};
    int rc = jj_exec(r, s, def->d, &buf);
    if (rc < 0)
        return -1;
    r->c->depth--;
    *out = jv_str(buf.p, buf.n);
    return 0;
}

static int strftime_now(jj_render *r, const jj_args *a, jv *out, size_t pos)
{
    if (a->n < 1 || a->v[0].kind != JV_STR)
        return jj_fail(r->c, ML_E_INVAL, pos, "strftime_now() takes a format string");
    struct tm tm;
    time_t t = (time_t)(r->now ? r->now : time(NULL));
    if (!(r->now ? gmtime_r(&t, &tm) : localtime_r(&t, &tm)))
        return jj_fail(r->c, ML_E_INVAL, pos, "time out of range");
    char *fmt = jj_strdup(r->c, a->v[0].u.s, a->v[0].n);
    char *buf = jj_alloc(r->c, 512);
    if (!fmt || !buf)
        return -1;
    size_t n = a->v[0].n ? strftime(buf, 512, fmt, &tm) : 0;
    *out = jv_str(buf, n);
    return 0;
}

static int make_dict(jj_render *r, const jj_args *a, int ns, jv *out, size_t pos)
{
    jv_dict *d = jv_dict_new(r->c, 0);
    if (!d)
        return -1;
    if (a->n > 1)
        return jj_fail(r->c, ML_E_INVAL, pos, "expected at most 1 positional argument");
    if (a->n == 1) {
        jv src = a->v[0];
        if (src.kind != JV_DICT && src.kind != JV_NS)
            return jj_fail(r->c, ML_E_INVAL, pos, "cannot convert '%s' to a dict", jv_type_name(src));
        for (size_t i = 0; i < src.u.d->n; i++)
            if (jv_dict_set(r->c, d, src.u.d->k[i], src.u.d->v[i]))
                return -1;
    }
    for (size_t k = 0; k < a->nk; k++)
        if (jv_dict_set(r->c, d, jv_str(a->kn[k]->name, a->kn[k]->nlen), a->kv[k]))
            return -1;
    *out = (jv){.kind = (uint8_t)(ns ? JV_NS : JV_DICT)};
    out->u.d = d;
    return 0;
}

static int range_fn(jj_render *r, const jj_args *a, jv *out, size_t pos)
{
    int64_t v[3] = {0, 0, 1};
    if (a->n < 1 || a->n > 3)
        return jj_fail(r->c, ML_E_INVAL, pos, "range expected 1 to 3 arguments");
    for (size_t i = 0; i < a->n; i++) {
        if (a->v[i].kind != JV_INT && a->v[i].kind != JV_BOOL)
            return jj_fail(r->c, ML_E_INVAL, pos, "'%s' object cannot be interpreted as an integer",
                           jv_type_name(a->v[i]));
        v[a->n == 1 ? 1 : i] = ival(a->v[i]);
    }
    if (v[2] == 0)
        return jj_fail(r->c, ML_E_INVAL, pos, "range() arg 3 must not be zero");
    jv_list *l = jv_list_new(r->c, 0);
    if (!l)
        return -1;
    /* The sandbox caps ranges at 100000 items (MAX_RANGE). */
    for (int64_t i = v[0]; v[2] > 0 ? i < v[1] : i > v[1];) {
        if (l->n >= 100000)
            return jj_fail(r->c, ML_E_INVAL, pos, "range too big");
        if (jv_list_push(r->c, l, jv_int(i)) || jj_step(r->c, pos))
            return -1;
        if (__builtin_add_overflow(i, v[2], &i))
            break;
    }
    *out = jv_of_list(l, 0);
    return 0;
}

static int call_func(jj_render *r, jv_func *f, const jj_args *a, jv *out, size_t pos)
{
    const char *n = f->name;
    if (f->self.kind == JV_NONE) {
        if (!strcmp(n, "range"))
            return range_fn(r, a, out, pos);
        if (!strcmp(n, "dict") || !strcmp(n, "namespace"))
            return make_dict(r, a, n[0] == 'n', out, pos);
        if (!strcmp(n, "raise_exception")) {
            jv msg = jv_cstr("");
            if (a->n && jv_stringify(r->c, a->v[0], &msg))
                return -1;
            return jj_fail(r->c, ML_E_INVAL, pos, "raise_exception: %.*s", (int)(msg.n > 200 ? 200 : msg.n),
                           msg.u.s);
        }
        if (!strcmp(n, "strftime_now"))
            return strftime_now(r, a, out, pos);
    }
    if (f->self.kind == JV_LOOP && !strcmp(n, "cycle")) {
        if (a->n == 0)
            return jj_fail(r->c, ML_E_INVAL, pos, "no items for cycling given");
        *out = a->v[f->self.u.loop->i % a->n];
        return 0;
    }
    return jj_method(r, f->self, n, a, out, pos);
}

int jj_call_value(jj_render *r, jv fn, const jv *args, size_t na, const jv *kwv,
                  const jj_node *const *kwn, size_t nkw, jv *out, size_t pos)
{
    jj_args a = {args, na, kwv, kwn, nkw};
    if (jj_step(r->c, pos))
        return -1;
    if (fn.kind == JV_FUNC)
        return call_func(r, fn.u.fn, &a, out, pos);
    if (fn.kind == JV_MACRO)
        return call_macro(r, fn.u.mac, &a, out, pos);
    if (fn.kind == JV_UNDEF)
        return undefined_error(r, fn, pos);
    return jj_fail(r->c, ML_E_INVAL, pos, "'%s' object is not callable", jv_type_name(fn));
}

static int eval_call(jj_render *r, jj_scope *s, const jj_node *e, jv *out)
{
    jv fn;
    argv_ a;
    const jj_node *callee = e->a;
    if (callee->type == JN_ATTR) {
        /* obj.method(...): called in place, no bound method allocated. */
        jv self;
        int unsafe;
        if (jj_eval(r, s, callee->a, &self))
            return -1;
        if ((self.kind == JV_STR || self.kind == JV_DICT || self.kind == JV_LIST) &&
            jj_has_method(self, callee->name, callee->nlen, &unsafe) && !unsafe && callee->nlen < 16) {
            char name[16];
            memcpy(name, callee->name, callee->nlen);
            name[callee->nlen] = 0;
            if (eval_args(r, s, e, &a) || jj_step(r->c, e->pos))
                return -1;
            jj_args ja = {a.pos, a.n, a.kv, a.kn, a.nk};
            return jj_method(r, self, name, &ja, out, e->pos);
        }
        if (get_attr(r, self, callee->name, callee->nlen, &fn, callee->pos) || eval_args(r, s, e, &a))
            return -1;
        return jj_call_value(r, fn, a.pos, a.n, a.kv, a.kn, a.nk, out, e->pos);
    }
    if (jj_eval(r, s, e->a, &fn) || eval_args(r, s, e, &a))
        return -1;
    return jj_call_value(r, fn, a.pos, a.n, a.kv, a.kn, a.nk, out, e->pos);
}

static int eval_filter(jj_render *r, jj_scope *s, const jj_node *e, jv *out)
{
    jv x;
    argv_ a;
    if (jj_eval(r, s, e->a, &x) || eval_args(r, s, e, &a))
        return -1;
    jj_args ja = {a.pos, a.n, a.kv, a.kn, a.nk};
    return jj_filter(r, e->name, e->nlen, x, &ja, out, e->pos);
}

static int eval_test(jj_render *r, jj_scope *s, const jj_node *e, jv *out)
{
    jv x;
    argv_ a;
    int res;
    if (jj_eval(r, s, e->a, &x) || eval_args(r, s, e, &a))
        return -1;
    jj_args ja = {a.pos, a.n, a.kv, a.kn, a.nk};
    if (jj_test(r, e->name, e->nlen, x, &ja, &res, e->pos))
        return -1;
    *out = jv_bool(e->neg ? !res : res);
    return 0;
}

static int eval_seq(jj_render *r, jj_scope *s, const jj_node *e, jv *out)
{
    if (e->type == JN_DICT) {
        jv_dict *d = jv_dict_new(r->c, 0);
        if (!d)
            return -1;
        for (size_t i = 0; i + 1 < e->nk; i += 2) {
            jv k, v;
            if (jj_eval(r, s, e->kids[i], &k) || jj_eval(r, s, e->kids[i + 1], &v))
                return -1;
            if (!jv_hashable(k))
                return jj_fail(r->c, ML_E_INVAL, e->kids[i]->pos, "unhashable type: '%s'", jv_type_name(k));
            if (jv_dict_set(r->c, d, k, v))
                return -1;
        }
        *out = (jv){.kind = JV_DICT};
        out->u.d = d;
        return 0;
    }
    jv_list *l = jv_list_new(r->c, e->nk);
    if (!l)
        return -1;
    for (size_t i = 0; i < e->nk; i++)
        if (jj_eval(r, s, e->kids[i], &l->v[l->n++]))
            return -1;
    *out = jv_of_list(l, e->type == JN_TUPLE);
    return 0;
}

static int eval_inner(jj_render *r, jj_scope *s, const jj_node *e, jv *out)
{
    jv a, b;
    switch (e->type) {
    case JN_LIT: *out = e->lit; return 0;
    case JN_NAME: return lookup(r, s, e, out);
    case JN_LIST: case JN_TUPLE: case JN_DICT: return eval_seq(r, s, e, out);
    case JN_ATTR:
        return jj_eval(r, s, e->a, &a) || get_attr(r, a, e->name, e->nlen, out, e->pos) ? -1 : 0;
    case JN_ITEM:
        return jj_eval(r, s, e->a, &a) || jj_eval(r, s, e->b, &b) || get_item(r, a, b, out, e->pos) ? -1 : 0;
    case JN_SLICE: return jj_eval(r, s, e->a, &a) || slice(r, a, e, out, s) ? -1 : 0;
    case JN_CALL: return eval_call(r, s, e, out);
    case JN_FILTER: return eval_filter(r, s, e, out);
    case JN_TEST: return eval_test(r, s, e, out);
    case JN_NEG: case JN_POS:
        if (jj_eval(r, s, e->a, &a))
            return -1;
        if (a.kind == JV_FLOAT) {
            *out = jv_float(e->type == JN_NEG ? -a.u.f : a.u.f);
            return 0;
        }
        if (a.kind != JV_INT && a.kind != JV_BOOL) {
            if (a.kind == JV_UNDEF)
                return undefined_error(r, a, e->pos);
            return jj_fail(r->c, ML_E_INVAL, e->pos, "bad operand type for unary %c: '%s'",
                           e->type == JN_NEG ? '-' : '+', jv_type_name(a));
        }
        if (e->type == JN_NEG && ival(a) == INT64_MIN)
            return overflow(r, e->pos);
        *out = jv_int(e->type == JN_NEG ? -ival(a) : ival(a));
        return 0;
    case JN_NOT:
        if (jj_eval(r, s, e->a, &a))
            return -1;
        *out = jv_bool(!jv_truthy(a));
        return 0;
    case JN_AND: case JN_OR:
        if (jj_eval(r, s, e->a, &a))
            return -1;
        if (jv_truthy(a) == (e->type == JN_OR)) {
            *out = a;
            return 0;
        }
        return jj_eval(r, s, e->b, out);
    case JN_COND:
        if (jj_eval(r, s, e->a, &a))
            return -1;
        if (jv_truthy(a))
            return jj_eval(r, s, e->b, out);
        if (e->c)
            return jj_eval(r, s, e->c, out);
        *out = jv_undef(NULL, 0);
        return 0;
    case JN_BIN:
        if (jj_eval(r, s, e->a, &a) || jj_eval(r, s, e->b, &b))
            return -1;
        return binop(r, e, a, b, out);
    default: return jj_fail(r->c, ML_E_INVAL, e->pos, "not an expression");
    }
}

int jj_eval(jj_render *r, jj_scope *s, const jj_node *e, jv *out)
{
    if (jj_step(r->c, e->pos) || enter(r, e->pos))
        return -1;
    int rc = eval_inner(r, s, e, out);
    r->c->depth--;
    return rc;
}

/* ---- statements ---- */

static int assign(jj_render *r, jj_scope *s, const jj_node *t, jv v)
{
    if (t->type == JN_NAME)
        return scope_set(r, s, t->name, t->nlen, v);
    if (v.kind != JV_LIST) {
        if (v.kind == JV_STR) {
            /* unpacking a string: one character per name */
            jv_list *l = jv_list_new(r->c, 0);
            if (!l || jv_list_push_chars(r->c, l, v))
                return -1;
            v = jv_of_list(l, 1);
        } else if (v.kind == JV_DICT) {
            jv_list *l = jv_list_new(r->c, 0);
            if (!l)
                return -1;
            for (size_t i = 0; i < v.u.d->n; i++)
                if (jv_list_push(r->c, l, v.u.d->k[i]))
                    return -1;
            v = jv_of_list(l, 1);
        } else {
            return jj_fail(r->c, ML_E_INVAL, t->pos, "cannot unpack non-iterable %s object", jv_type_name(v));
        }
    }
    if (v.u.l->n != t->nk)
        return jj_fail(r->c, ML_E_INVAL, t->pos, v.u.l->n > t->nk ? "too many values to unpack (expected %zu)"
                                                                  : "not enough values to unpack (expected %zu)",
                       t->nk);
    for (size_t i = 0; i < t->nk; i++)
        if (scope_set(r, s, t->kids[i]->name, t->kids[i]->nlen, v.u.l->v[i]))
            return -1;
    return 0;
}

/* The items a for loop walks: list, tuple, dict keys, characters. */
static int iter_items(jj_render *r, jv v, jv_list **out, size_t pos)
{
    if (v.kind == JV_LIST) {
        *out = v.u.l;
        return 0;
    }
    jv_list *l = jv_list_new(r->c, 0);
    if (!l)
        return -1;
    *out = l;
    if (v.kind == JV_UNDEF)
        return 0;
    if (v.kind == JV_DICT) {
        for (size_t i = 0; i < v.u.d->n; i++)
            if (jv_list_push(r->c, l, v.u.d->k[i]))
                return -1;
        return 0;
    }
    if (v.kind == JV_STR)
        return jv_list_push_chars(r->c, l, v);
    return jj_fail(r->c, ML_E_INVAL, pos, "'%s' object is not iterable", jv_type_name(v));
}

static int exec_for(jj_render *r, jj_scope *s, const jj_node *st, jj_buf *out)
{
    jv it;
    jv_list *items;
    if (jj_eval(r, s, st->b, &it) || iter_items(r, it, &items, st->b->pos))
        return -1;
    if (st->c) {
        jv_list *kept = jv_list_new(r->c, 0);
        if (!kept)
            return -1;
        jj_scope *is = scope_new(r, s);
        if (!is)
            return -1;
        for (size_t i = 0; i < items->n; i++) {
            jv ok;
            is->vars->n = 0;
            if (assign(r, is, st->a, items->v[i]) || jj_eval(r, is, st->c, &ok))
                return -1;
            if (jv_truthy(ok) && jv_list_push(r->c, kept, items->v[i]))
                return -1;
        }
        items = kept;
    }
    jj_loop *L = jj_alloc(r->c, sizeof *L);
    if (!L)
        return -1;
    L->items = items;
    jv loopv = {.kind = JV_LOOP};
    loopv.u.loop = L;
    /* One scope serves every iteration, emptied each time: an iteration
     * sees nothing the previous one set, as in jinja2, and a long loop
     * does not allocate per iteration. */
    jj_scope *is = scope_new(r, s);
    if (!is)
        return -1;
    for (size_t i = 0; i < items->n; i++) {
        L->i = i;
        is->vars->n = 0;
        if (jj_step(r->c, st->pos) || assign(r, is, st->a, items->v[i]) || scope_set(r, is, "loop", 4, loopv))
            return -1;
        int rc = jj_exec(r, is, st->d, out);
        if (rc < 0)
            return -1;
        if (rc == FLOW_BREAK)
            break;
    }
    if (!is->captured) {
        is->up = r->spare;
        r->spare = is;
    }
    if (items->n == 0 && st->e)
        return jj_exec(r, s, st->e, out) < 0 ? -1 : 0;
    return 0;
}

static int exec_set(jj_render *r, jj_scope *s, const jj_node *st)
{
    jv v;
    if (jj_eval(r, s, st->b, &v))
        return -1;
    const jj_node *t = st->a;
    if (t->type == JN_ATTR) {
        jv ns;
        if (lookup(r, s, t->a, &ns))
            return -1;
        if (ns.kind != JV_NS)
            return jj_fail(r->c, ML_E_INVAL, t->pos, "cannot assign attribute on non-namespace object");
        return jv_dict_set(r->c, ns.u.d, jv_str(t->name, t->nlen), v);
    }
    return assign(r, s, t, v);
}

/* {% set x %}...{% endset %} and {% filter f %}...{% endfilter %}: the
 * captured text goes through the filters (bound to the empty name). */
static int exec_capture(jj_render *r, jj_scope *s, const jj_node *st, jj_buf *out)
{
    jj_buf buf = {0};
    jj_scope *fs = scope_new(r, s);
    if (!fs || jj_exec(r, s, st->d, &buf) < 0)
        return -1;
    jv v = jv_str(buf.p, buf.n);
    if (scope_set(r, fs, "", 0, v) || jj_eval(r, fs, st->b, &v))
        return -1;
    if (st->type == JN_SETBLOCK)
        return scope_set(r, s, st->a->name, st->a->nlen, v);
    return jv_to_str(r->c, v, out);
}

static int exec_stmt(jj_render *r, jj_scope *s, const jj_node *st, jj_buf *out)
{
    jv v;
    switch (st->type) {
    case JN_TEXT: return jj_buf_put(r->c, out, st->lit.u.s, st->lit.n);
    case JN_OUTPUT: return jj_eval(r, s, st->a, &v) || jv_to_str(r->c, v, out) ? -1 : 0;
    case JN_IF:
        for (const jj_node *b = st; b; b = b->c) {
            if (b->type != JN_IF)
                return jj_exec(r, s, b, out);
            if (jj_eval(r, s, b->a, &v))
                return -1;
            if (jv_truthy(v))
                return jj_exec(r, s, b->b, out);
        }
        return 0;
    case JN_FOR: return exec_for(r, s, st, out);
    case JN_SET: return exec_set(r, s, st);
    case JN_SETBLOCK: case JN_FILTERBLOCK: return exec_capture(r, s, st, out);
    case JN_MACRO: {
        struct jj_macro *m = jj_alloc(r->c, sizeof *m);
        if (!m)
            return -1;
        for (jj_scope *k = s; k; k = k->up)
            k->captured = 1;
        m->def = st;
        m->scope = s;
        v = (jv){.kind = JV_MACRO};
        v.u.mac = m;
        return scope_set(r, s, st->name, st->nlen, v);
    }
    case JN_BREAK: return FLOW_BREAK;
    case JN_CONTINUE: return FLOW_CONTINUE;
    case JN_BLOCK: return jj_exec(r, s, st, out);
    default: return jj_fail(r->c, ML_E_INVAL, st->pos, "not a statement");
    }
}

/* Runs a block; returns 0, FLOW_BREAK, FLOW_CONTINUE or -1. */
int jj_exec(jj_render *r, jj_scope *s, const jj_node *block, jj_buf *out)
{
    if (enter(r, block->pos))
        return -1;
    for (size_t i = 0; i < block->nk; i++) {
        if (jj_step(r->c, block->kids[i]->pos))
            return -1;
        int rc = exec_stmt(r, s, block->kids[i], out);
        if (rc) {
            if (rc > 0)
                r->c->depth--;
            return rc;
        }
    }
    r->c->depth--;
    return 0;
}
