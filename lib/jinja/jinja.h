/* jinja.h - the private parts of the Jinja interpreter shared by
 * lib/jinja/jinja_*.c: the capped arena, values, tokens, the syntax tree
 * and the render state.  Every function that can fail records the first
 * error in its jj_ctx and returns -1 (or NULL); callers just propagate. */
#ifndef ML_JINJA_JINJA_H
#define ML_JINJA_JINJA_H

#include "base/internal.h"

#include <mlcore/jinja.h>

#include <stddef.h>
#include <stdint.h>

/* ---- arena: everything of a parse or a render, freed at once ---- */
typedef struct jj_chunk jj_chunk;
typedef struct jj_arena {
    jj_chunk *head;
    size_t used; /* bytes taken from malloc so far */
    size_t cap;  /* ML_E_NOMEM beyond this */
} jj_arena;

/* The state of one parse or render: where errors go, the limits. */
typedef struct jj_ctx {
    jj_arena arena;
    ml_error *err;
    ml_status status; /* first error; ML_OK while none */
    const char *src;  /* the (normalized) template, for line and column */
    size_t src_len;
    uint64_t steps, max_steps;
    uint32_t depth, max_depth;
} jj_ctx;

void *jj_alloc(jj_ctx *c, size_t n);
void *jj_grow(jj_ctx *c, void *p, size_t old_n, size_t new_n);
char *jj_strdup(jj_ctx *c, const char *s, size_t n);
void jj_arena_free(jj_arena *a);
/* Records an error at template offset pos (SIZE_MAX: none); returns -1. */
int jj_fail(jj_ctx *c, ml_status code, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* One step of work at pos: -1 once the step limit is passed. */
int jj_step(jj_ctx *c, size_t pos);

/* ---- values ---- */
typedef enum jv_kind {
    JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR,
    JV_LIST,  /* also tuples (flag JV_TUPLE) */
    JV_DICT,
    JV_NS,    /* namespace(): a dict whose attributes may be set */
    JV_FUNC,  /* a global or a bound method: name, self */
    JV_MACRO,
    JV_LOOP
} jv_kind;

/* JV_GEN: the lazy result of map/select/reject, which json.dumps and
 * len() refuse in Python. */
/* JV_SAFE: a markupsafe.Markup string (from |safe, |e): + escapes the
 * other operand. */
/* JV_KEYS, JV_VALUES, JV_ITEMS: the views dict.keys() and the like return,
 * which print as dict_keys([...]) and which json.dumps refuses. */
enum { JV_TUPLE = 1, JV_UNSAFE = 2, JV_SAFE = 4, JV_GEN = 8, JV_KEYS = 16, JV_VALUES = 32, JV_ITEMS = 64 };
#define JV_VIEW (JV_KEYS | JV_VALUES | JV_ITEMS)

typedef struct jv_list jv_list;
typedef struct jv_dict jv_dict;
typedef struct jv_func jv_func;
typedef struct jj_loop jj_loop;
typedef struct jj_node jj_node;

typedef struct jv {
    uint8_t kind;
    uint8_t flags;
    size_t n; /* string length */
    union {
        int b;
        int64_t i;
        double f;
        const char *s; /* JV_STR; JV_UNDEF: its name (n bytes) or NULL */
        jv_list *l;
        jv_dict *d;
        jv_func *fn;
        struct jj_macro *mac;
        jj_loop *loop;
    } u;
} jv;

struct jv_list {
    size_t n, cap;
    jv *v;
};
struct jv_dict {
    size_t n, cap;
    jv *k, *v;
};
struct jv_func {
    const char *name;
    jv self;
};
struct jj_loop {
    jv_list *items;
    size_t i;
};
/* A macro and the scope it was defined in. */
struct jj_macro {
    const jj_node *def;
    struct jj_scope *scope;
};

jv jv_undef(const char *name, size_t n);
jv jv_none(void);
jv jv_bool(int b);
jv jv_int(int64_t i);
jv jv_float(double f);
jv jv_str(const char *s, size_t n);
jv jv_cstr(const char *s);
jv_list *jv_list_new(jj_ctx *c, size_t cap);
int jv_list_push(jj_ctx *c, jv_list *l, jv v);
/* The characters of string v (whole UTF-8 sequences, as Python iterates a
 * str) appended to l. */
int jv_list_push_chars(jj_ctx *c, jv_list *l, jv v);
jv jv_of_list(jv_list *l, int tuple);
jv_dict *jv_dict_new(jj_ctx *c, size_t cap);
/* Sets (replacing an equal key) or appends. */
int jv_dict_set(jj_ctx *c, jv_dict *d, jv k, jv v);
/* The value for key k, or NULL. */
jv *jv_dict_get(const jv_dict *d, jv k);
jv *jv_dict_gets(const jv_dict *d, const char *k, size_t n);

int jv_truthy(jv v);
/* Python's ==.  With a context, every element visited is a step and
 * nesting past max_depth fails the render (values can share parts, so a
 * comparison can cost far more than the memory it touches); c may be NULL
 * for scalar keys. */
int jv_equal(jj_ctx *c, jv a, jv b);
/* -1, 0, 1; -1 with *bad set when the two do not order (Python TypeError). */
int jv_cmp(jj_ctx *c, jv a, jv b, int *bad);
/* Charges n steps at once (work proportional to a size); -1 past the limit. */
int jj_steps(jj_ctx *c, uint64_t n, size_t pos);
const char *jv_type_name(jv v);
int jv_is_seq(jv v); /* list or tuple */

/* A growable byte buffer in the arena, with an optional cap (the output). */
typedef struct jj_buf {
    char *p;
    size_t n, cap;
    size_t max; /* 0: no limit besides the arena */
} jj_buf;
int jj_buf_put(jj_ctx *c, jj_buf *b, const void *s, size_t n);
int jj_buf_putc(jj_ctx *c, jj_buf *b, char ch);
/* str(v) as Python prints it ("None", "True", repr of lists and dicts). */
int jv_to_str(jj_ctx *c, jv v, jj_buf *b);
/* repr(v). */
int jv_repr(jj_ctx *c, jv v, jj_buf *b);
/* A dict key Python can hash: a scalar, or a tuple of them. */
int jv_hashable(jv v);
/* str(v) as a new value (strings returned as they are). */
int jv_stringify(jj_ctx *c, jv v, jv *out);
/* Python's repr of a float ("1.0", "0.1", "1e+20"). */
void jv_float_repr(double f, char out[40]);
/* json.dumps(v, ensure_ascii=False, indent=indent (<0: none)). */
int jv_tojson(jj_ctx *c, jv v, int indent, jj_buf *b, size_t pos);

/* UTF-8: the number of code points, and the byte offset of code point i. */
size_t jj_u8_len(const char *s, size_t n);
size_t jj_u8_off(const char *s, size_t n, size_t i);

/* Python's str % args (printf-style formatting). */
int jj_percent(jj_ctx *c, jv fmt, jv args, jv *out, size_t pos);

/* Reads a JSON document into values (strict; nesting <= max_depth). */
int jj_json_parse(jj_ctx *c, const char *s, size_t n, jv *out);

/* ---- tokens ---- */
typedef enum jt_type {
    JT_EOF, JT_TEXT, JT_VAR_BEGIN, JT_VAR_END, JT_BLOCK_BEGIN, JT_BLOCK_END,
    JT_NAME, JT_STRING, JT_INT, JT_FLOAT, JT_OP
} jt_type;

typedef struct jt {
    uint8_t type;
    uint16_t op;  /* JT_OP: the operator's characters, e.g. '+' or ('/' << 8 | '/') */
    size_t pos;   /* byte offset in the template */
    const char *s; /* text, name or decoded string */
    size_t n;
    int64_t i;
    double f;
} jt;

#define JJ_OP2(a, b) ((uint16_t)((a) << 8 | (b)))

typedef struct jt_list {
    jt *v;
    size_t n, cap;
} jt_list;

/* Splits the template into tokens, applying whitespace control,
 * trim_blocks and lstrip_blocks; comments and raw blocks resolved. */
int jj_lex(jj_ctx *c, const char *src, size_t n, jt_list *out);

/* ---- syntax tree ---- */
typedef enum jn_type {
    /* expressions */
    JN_LIT, JN_NAME, JN_LIST, JN_TUPLE, JN_DICT, JN_ATTR, JN_ITEM, JN_SLICE,
    JN_CALL, JN_KWARG, JN_FILTER, JN_TEST, JN_NEG, JN_POS, JN_NOT, JN_BIN,
    JN_AND, JN_OR, JN_COND,
    /* statements */
    JN_BLOCK, JN_TEXT, JN_OUTPUT, JN_IF, JN_FOR, JN_SET, JN_SETBLOCK,
    JN_MACRO, JN_FILTERBLOCK, JN_BREAK, JN_CONTINUE
} jn_type;

struct jj_node {
    uint8_t type;
    uint8_t neg;  /* JN_TEST: "is not" */
    uint16_t op;  /* JN_BIN: the operator (JT_OP codes; 'i' in, 'n' not in) */
    size_t pos;
    const char *name; /* names, attributes, filters, tests */
    size_t nlen;
    jv lit;
    jj_node *a, *b, *c, *d, *e;
    jj_node **kids;
    size_t nk;
};

/* The tree of a whole template (a JN_BLOCK). */
int jj_parse(jj_ctx *c, const jt_list *toks, jj_node **out);

/* ---- rendering ---- */
typedef struct jj_scope jj_scope;
struct jj_scope {
    jj_scope *up;
    jv_dict *vars;
    int captured; /* a macro keeps it: never recycled */
};

typedef struct jj_render {
    jj_ctx *c;
    jj_buf out;
    jj_scope *globals; /* the caller's variables */
    int64_t now;
    jj_scope *spare;   /* scopes of finished loops, for reuse (linked by up) */
} jj_render;

int jj_eval(jj_render *r, jj_scope *s, const jj_node *e, jv *out);

/* Rendering a parsed template (jinja_api.c), for ml_jinja_render_json and
 * for the chat renderer, which renders one template twice.  A context
 * with t's limits, in which both renders and their variables live: */
void jj_render_ctx(const ml_jinja *t, jj_ctx *c, ml_error *err);
/* The variables of a JSON object (len 0: none). */
int jj_vars_parse(jj_ctx *c, const char *json_vars, size_t len, jv_dict **out);
/* One render with the whole step budget; *out is NUL-terminated (the NUL
 * not counted) and lives in c's arena. */
int jj_render_vars(jj_ctx *c, const ml_jinja *t, jv_dict *vars, jj_buf *out);
int jj_exec(jj_render *r, jj_scope *s, const jj_node *block, jj_buf *out);
int jj_call_value(jj_render *r, jv fn, const jv *args, size_t na, const jv *kwv,
                  const jj_node *const *kwn, size_t nkw, jv *out, size_t pos);

/* Filters, tests and methods (jinja_builtins.c). args[0] is the subject. */
typedef struct jj_args {
    const jv *v;      /* positional */
    size_t n;
    const jv *kv;     /* keyword values */
    const jj_node *const *kn; /* keyword names (JN_KWARG nodes) */
    size_t nk;
} jj_args;
int jj_filter(jj_render *r, const char *name, size_t nlen, jv x, const jj_args *a, jv *out,
              size_t pos);
/* 1 or 0 in *out. */
int jj_test(jj_render *r, const char *name, size_t nlen, jv x, const jj_args *a, int *out,
            size_t pos);
/* The one table of builtins, by kind and name: NULL when there is none
 * (jinja2 refuses an unknown filter or test when compiling, outside if
 * blocks and conditional expressions). */
typedef enum jj_kind { JJ_FILTER, JJ_TEST, JJ_STR_METHOD, JJ_DICT_METHOD, JJ_LIST_METHOD } jj_kind;
typedef struct jj_builtin jj_builtin;
const jj_builtin *jj_builtin_find(jj_kind kind, const char *name, size_t n);
/* HTML-escapes str(v) as markupsafe does; a safe string stays as it is
 * (jinja_str.c). */
int jj_escape(jj_render *r, jv v, jv *out);
int jj_method(jj_render *r, jv self, const char *name, const jj_args *a, jv *out, size_t pos);
/* Whether `name` is an attribute method of v (so that x.name is a bound method). */
int jj_has_method(jv v, const char *name, size_t n, int *unsafe);

#endif
