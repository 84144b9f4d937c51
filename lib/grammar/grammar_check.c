/* grammar_check.c - the refusal of left recursion.  A rule is nullable
 * when one of its alternatives is only nullable rule references (found as
 * a worklist over the references, linear in the grammar's size); rule A
 * leads to B when B appears in an alternative of A after nothing but
 * nullable references.  A cycle of "leads to" is a rule that can reach
 * itself before consuming a character, where expanding the stacks would
 * never end; a depth-first search finds one in linear time. */
#include "grammar/grammar.h"

#include <stdlib.h>

typedef struct csr {
    uint32_t *first;   /* n + 1 offsets into item */
    uint32_t *item;
} csr;

static void csr_free(csr *c)
{
    free(c->first);
    free(c->item);
}

/* The element index after alternative `a` begins, i.e. its end marker. */
static uint32_t alt_end(const ml_grammar *g, uint32_t a)
{
    while (g->el[a].type != G_ALT && g->el[a].type != G_END)
        a++;
    return a;
}

/* Calls fn(ctx, rule, first element) for every alternative. */
static void each_alt(const ml_grammar *g, void (*fn)(void *, const ml_grammar *, uint32_t, uint32_t),
                     void *ctx)
{
    for (uint32_t r = 0; r < g->n_rules; r++)
        for (uint32_t a = g->start[r];; a++) {
            fn(ctx, g, r, a);
            a = alt_end(g, a);
            if (g->el[a].type == G_END)
                break;
        }
}

/* ------------------------------------------------------------------------
 * Nullable rules
 * ------------------------------------------------------------------------ */
typedef struct nul {
    uint32_t n_alts;
    uint32_t *owner, *need;   /* per alternative: rule, references left (UINT32_MAX: has a char) */
    uint32_t *count;          /* per rule: occurrences in reference-only alternatives */
    csr occ;                  /* per rule: those alternatives */
    uint8_t *nullable;
    uint32_t *queue, nq;
} nul;

static void count_alt(void *ctx, const ml_grammar *g, uint32_t r, uint32_t a)
{
    nul *n = ctx;
    uint32_t refs = 0, e = alt_end(g, a);
    for (uint32_t k = a; k < e; k++) {
        if (g->el[k].type != G_REF)
            refs = UINT32_MAX;
        else if (refs != UINT32_MAX)
            refs++;
    }
    if (n->owner) {
        n->owner[n->n_alts] = r, n->need[n->n_alts] = refs;
        for (uint32_t k = a; k < e && refs != UINT32_MAX; k++)
            n->occ.item[n->occ.first[g->el[k].value] + n->count[g->el[k].value]++] = n->n_alts;
    } else {
        for (uint32_t k = a; k < e && refs != UINT32_MAX; k++)
            n->count[g->el[k].value]++;
    }
    n->n_alts++;
}

static void mark(nul *n, uint32_t r)
{
    if (!n->nullable[r])
        n->nullable[r] = 1, n->queue[n->nq++] = r;
}

static ml_status nullable(const ml_grammar *g, uint8_t *out)
{
    nul n = {.nullable = out};
    uint32_t R = g->n_rules;
    n.count = calloc(R, sizeof *n.count);
    n.occ.first = calloc((size_t)R + 1, sizeof *n.occ.first);
    n.queue = malloc(R * sizeof *n.queue);
    ml_status s = ML_E_NOMEM;
    if (!n.count || !n.occ.first || !n.queue)
        goto done;
    each_alt(g, count_alt, &n); /* first pass: counts */
    for (uint32_t r = 0; r < R; r++)
        n.occ.first[r + 1] = n.occ.first[r] + n.count[r];
    n.occ.item = malloc(((size_t)n.occ.first[R] + 1) * sizeof *n.occ.item);
    n.owner = malloc(((size_t)n.n_alts + 1) * sizeof *n.owner);
    n.need = malloc(((size_t)n.n_alts + 1) * sizeof *n.need);
    if (!n.occ.item || !n.owner || !n.need)
        goto done;
    memset(n.count, 0, R * sizeof *n.count);
    n.n_alts = 0;
    each_alt(g, count_alt, &n); /* second pass: fill */
    for (uint32_t a = 0; a < n.n_alts; a++)
        if (n.need[a] == 0)
            mark(&n, n.owner[a]);
    for (uint32_t q = 0; q < n.nq; q++) {
        uint32_t r = n.queue[q];
        for (uint32_t k = n.occ.first[r]; k < n.occ.first[r + 1]; k++)
            if (--n.need[n.occ.item[k]] == 0)
                mark(&n, n.owner[n.occ.item[k]]);
    }
    s = ML_OK;
done:
    free(n.count), free(n.queue), free(n.owner), free(n.need);
    csr_free(&n.occ);
    return s;
}

/* ------------------------------------------------------------------------
 * "Leads to" and its cycles
 * ------------------------------------------------------------------------ */
typedef struct lead {
    const uint8_t *nullable;
    uint32_t *count;
    csr e;
    int fill;
} lead;

static void lead_alt(void *ctx, const ml_grammar *g, uint32_t r, uint32_t a)
{
    lead *l = ctx;
    for (uint32_t k = a; g->el[k].type == G_REF; k++) {
        uint32_t to = g->el[k].value;
        if (l->fill)
            l->e.item[l->e.first[r] + l->count[r]] = to;
        l->count[r]++;
        if (!l->nullable[to])
            break;
    }
}

/* Depth-first search from every rule; *bad: a rule met again on the path. */
static ml_status find_cycle(const ml_grammar *g, const csr *e, uint32_t *bad)
{
    uint32_t R = g->n_rules;
    uint8_t *color = calloc(R, 1);
    uint32_t *node = malloc(R * sizeof *node), *edge = malloc(R * sizeof *edge);
    ml_status s = color && node && edge ? ML_OK : ML_E_NOMEM;
    for (uint32_t r0 = 0; r0 < R && !s; r0++) {
        if (color[r0])
            continue;
        uint32_t depth = 0;
        node[0] = r0, edge[0] = e->first[r0], color[r0] = 1;
        while (depth != UINT32_MAX && !s) {
            uint32_t u = node[depth];
            if (edge[depth] == e->first[u + 1]) {
                color[u] = 2;
                depth--; /* wraps to UINT32_MAX after the root */
                continue;
            }
            uint32_t v = e->item[edge[depth]++];
            if (color[v] == 1) {
                *bad = v;
                s = ML_E_UNSUPPORTED;
            } else if (color[v] == 0) {
                color[v] = 1;
                depth++;
                node[depth] = v, edge[depth] = e->first[v];
            }
        }
    }
    free(color), free(node), free(edge);
    return s;
}

ml_status ml__grammar_left_rec(const ml_grammar *g, uint32_t *bad)
{
    uint32_t R = g->n_rules;
    uint8_t *nl = calloc(R ? R : 1, 1);
    lead l = {.nullable = nl};
    l.count = calloc(R ? R : 1, sizeof *l.count);
    l.e.first = calloc((size_t)R + 1, sizeof *l.e.first);
    ml_status s = nl && l.count && l.e.first ? nullable(g, nl) : ML_E_NOMEM;
    if (!s) {
        each_alt(g, lead_alt, &l);
        for (uint32_t r = 0; r < R; r++)
            l.e.first[r + 1] = l.e.first[r] + l.count[r];
        l.e.item = malloc(((size_t)l.e.first[R] + 1) * sizeof *l.e.item);
        s = l.e.item ? ML_OK : ML_E_NOMEM;
    }
    if (!s) {
        memset(l.count, 0, R * sizeof *l.count);
        l.fill = 1;
        each_alt(g, lead_alt, &l);
        s = find_cycle(g, &l.e, bad);
    }
    free(nl), free(l.count);
    csr_free(&l.e);
    return s;
}
