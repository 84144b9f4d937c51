/* grammar.h - what the grammar layer's files share (private): a parsed
 * grammar as one array of elements, and the engine that steps sets of
 * parse stacks by a code point, which the matcher (grammar_match.c) and
 * the logit processor (grammar_proc.c) both drive. */
#ifndef ML_GRAMMAR_IMPL_H
#define ML_GRAMMAR_IMPL_H

#include "base/internal.h"

#include <mlcore/grammar.h>

/* Element types.  A rule is its alternatives one after the other, each
 * ended by G_ALT but the last, ended by G_END.  A character set is a
 * G_CHAR or G_CHAR_NOT with its first character, then per further
 * character or range a G_CHAR_ALT, a range's upper end a G_RNG_UPPER
 * after its lower. */
enum {
    G_END,       /* end of the rule's last alternative */
    G_ALT,       /* end of an alternative, another follows */
    G_REF,       /* value: a rule id */
    G_CHAR,      /* value: a code point; a set that matches */
    G_CHAR_NOT,  /* value: a code point; a set that matches what it lacks */
    G_RNG_UPPER, /* value: upper end of the range begun by the element before */
    G_CHAR_ALT,  /* value: another code point of the set */
    G_ANY        /* `.`: any code point */
};

typedef struct gelem {
    uint32_t type;
    uint32_t value;
} gelem;

struct ml_grammar {
    gelem *el;           /* every rule's elements */
    uint32_t n_el;
    uint32_t *start;     /* n_rules: index of each rule's first element */
    uint32_t n_rules;
    uint32_t root;       /* the start rule */
};

/* 1 for an element that begins a character set. */
static inline int g_is_char(uint32_t type)
{
    return type == G_CHAR || type == G_CHAR_NOT || type == G_ANY;
}

/* The left-recursion and nullable analysis of a flattened grammar
 * (grammar_check.c): ML_OK, or the index of a left-recursive rule in *bad
 * and ML_E_UNSUPPORTED; ML_E_NOMEM. */
ml_status ml__grammar_left_rec(const ml_grammar *g, uint32_t *bad);

/* ------------------------------------------------------------------------
 * The engine: stack sets in one pool of words.  A stack is its length
 * then its positions (element indices), the top last; a set is stacks
 * one after the other.  An empty stack is a complete sentence.
 * ------------------------------------------------------------------------ */
typedef struct gset {
    size_t off, len;     /* words of the pool */
    uint32_t n;          /* stacks */
} gset;

typedef struct gengine {
    const ml_grammar *g;
    uint32_t *pool;      /* sets */
    size_t n, cap;
    uint32_t *todo;      /* stacks waiting to be expanded */
    size_t tn, tcap;
    uint32_t *cur;       /* the stack being expanded */
    size_t ccap;
    uint32_t *seen;      /* copies of the stacks one step met */
    size_t sn, scap;
    uint32_t *tab;       /* hash of seen: offsets in seen, valid where stamp matches */
    uint32_t *stamp;
    uint32_t now;        /* the step's stamp */
    size_t tab_cap;      /* a power of two */
    uint32_t tab_used, work;
    uint64_t budget;     /* positions the steps may still copy */
} gengine;

void ml__gengine_init(gengine *e, const ml_grammar *g);
void ml__gengine_free(gengine *e);
/* Appends the start set (the root's alternatives, expanded) to the pool. */
ml_status ml__gengine_start(gengine *e, gset *out, ml_error *err);
/* Appends the set that follows code point cp from `in` (in the pool);
 * out->n is 0 when nothing does. */
ml_status ml__gengine_step(gengine *e, gset in, uint32_t cp, gset *out, ml_error *err);
/* 1 when some stack of `in` may take a code point in [lo, hi]. */
int ml__gengine_can(const gengine *e, gset in, uint32_t lo, uint32_t hi);
/* 1 when `in` holds an empty stack. */
int ml__gengine_complete(const gengine *e, gset in);

/* UTF-8 as a byte at a time: value so far and continuation bytes to come. */
typedef struct gutf8 {
    uint32_t value;
    uint8_t rem;   /* continuation bytes missing */
    uint8_t len;   /* bytes of the sequence */
} gutf8;

/* Advances u by byte b: returns -1 for a byte that cannot be valid UTF-8
 * here, 1 with *cp set when a character is complete, 0 when more bytes
 * must come; then [*lo, *hi] are the code points it can still become. */
int ml__gutf8_byte(gutf8 *u, uint8_t b, uint32_t *cp, uint32_t *lo, uint32_t *hi);

/* One byte through the set: the UTF-8 step, then a step of the engine on
 * a whole character or the check that a partial one can still match.
 * *out is the new set (in itself for a partial character); dead set to 1
 * when nothing follows. */
ml_status ml__gengine_byte(gengine *e, gset in, gutf8 *u, uint8_t b, gset *out, int *dead,
                           ml_error *err);

#endif
