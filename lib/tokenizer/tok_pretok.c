/* tok_pretok.c - the byte-level pre-tokenizers of mlt(5) as hand-written
 * matchers, one function per regex alternative, tried in the regex's order
 * with the backtracking the regex engine (Oniguruma, in the Hugging Face
 * tokenizers library) would do.  The regexes:
 *
 *   Llama 3:  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
 *             | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *   flag 16:  \p{N} instead of \p{N}{1,3}                     (Qwen2, Qwen3)
 *   flag 256: [\p{L}\p{M}]+ for the letters and [^\s\p{L}\p{M}\p{N}] for
 *             the symbols                                      (Qwen3.5)
 *   GPT-2:    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+
 *             |\s+(?!\S)|\s+                                   (flag 32)
 *   flag 64:  every \p{N} is a piece of its own before the regex runs.
 *   o200k:    [^\r\n\p{L}\p{N}]?U*W+C?|[^\r\n\p{L}\p{N}]?U+W*C?|\p{N}{1,3}
 *             | ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *             U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], W = [\p{Ll}\p{Lm}\p{Lo}\p{M}],
 *             C = (?i:'s|'t|'re|'ve|'m|'ll|'d)             (flag 2048, gpt-oss)
 *
 * At every position one of the alternatives matches (each character is a
 * letter, a number, white space or none of these), so the matches tile the
 * text.  Why not a regex library: see mlt(5), "Pre-tokenizer". */
#include "tokenizer/tok.h"

/* A cursor over well-formed UTF-8. */
typedef struct cur {
    const uint8_t *s;
    size_t n;
} cur;

/* Class and length of the character at i (i < n). */
static inline unsigned cls_at(const cur *c, size_t i, int *len)
{
    uint8_t b = c->s[i];
    if (b < 0x80) {
        *len = 1;
        return ml__uclass(b);
    }
    int l = ml__utf8_seq(c->s + i, c->n - i);
    if (l < 0) { /* not reached for well-formed input; count it as a symbol */
        *len = -l;
        return 0;
    }
    *len = l;
    return ml__uclass(ml__utf8_decode(c->s + i, l));
}

/* A class test: some bit of `any` (0: any character) and none of `none`. */
static int is(unsigned cl, unsigned any, unsigned none)
{
    return (!any || (cl & any)) && !(cl & none);
}

/* End of the run of characters that pass is(class, any, none), from i; *count receives the number of characters. */
static size_t run(const cur *c, size_t i, unsigned any, unsigned none, size_t *count)
{
    size_t k = 0;
    while (i < c->n) {
        int l;
        unsigned cl = cls_at(c, i, &l);
        if (!is(cl, any, none))
            break;
        i += (size_t)l;
        k++;
    }
    if (count)
        *count = k;
    return i;
}


/* (?i:'s|'t|'re|'ve|'m|'ll|'d), or the case-sensitive GPT-2 form.  Under
 * Oniguruma's case folding U+017F (long s) matches s as well. */
static size_t contraction(const cur *c, size_t i, int fold)
{
    const uint8_t *s = c->s + i;
    size_t n = c->n - i;
    if (n < 2 || s[0] != '\'')
        return 0;
    uint8_t a = s[1], b = n > 2 ? s[2] : 0;
    if (fold && a >= 'A' && a <= 'Z')
        a = (uint8_t)(a + 32);
    if (fold && b >= 'A' && b <= 'Z')
        b = (uint8_t)(b + 32);
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
        return 2;
    if ((a == 'r' || a == 'v') && b == 'e')
        return 3;
    if (a == 'l' && b == 'l')
        return 3;
    if (fold && n > 2 && s[1] == 0xc5 && s[2] == 0xbf) /* U+017F */
        return 3;
    return 0;
}

/* \s*[\r\n]+ : the white-space run up to and including its last CR or LF. */
static size_t ws_newlines(const cur *c, size_t i)
{
    size_t end = 0;
    while (i < c->n) {
        int l;
        unsigned cl = cls_at(c, i, &l);
        if (!(cl & ML__UC_S))
            break;
        i += (size_t)l;
        if (cl & ML__UC_NL)
            end = i;
    }
    return end;
}

/* \s+(?!\S) then \s+ : the run to the end of the text, or all of it but its
 * last character when a non-space follows (unless it is one character,
 * when \s+ takes it). */
static size_t ws_tail(const cur *c, size_t i)
{
    size_t last = i, k = 0;
    while (i < c->n) {
        int l;
        unsigned cl = cls_at(c, i, &l);
        if (!(cl & ML__UC_S))
            break;
        last = i;
        i += (size_t)l;
        k++;
    }
    if (i == c->n || k < 2)
        return i;
    return last;
}

/* \p{N}{1,3} after its first number, which ends at i. */
static size_t numbers3(const cur *c, size_t i)
{
    for (int k = 1; k < 3 && i < c->n; k++) {
        int l;
        if (!(cls_at(c, i, &l) & ML__UC_N))
            break;
        i += (size_t)l;
    }
    return i;
}

/* " ?[^\s\p{L}\p{N}]+" at i ("not" the classes in sym_none), both
 * families' symbol runs: the run's end, or 0 when there is none.  c0 is
 * the class of the character at i; i1, has1 and c1 say where the next
 * one starts, whether there is one, and its class. */
static size_t symbols(const cur *c, size_t i, unsigned c0, size_t i1, int has1, unsigned c1,
                      unsigned sym_none)
{
    if (c->s[i] == ' ' && has1 && is(c1, 0, sym_none))
        return run(c, i1, 0, sym_none, NULL);
    if (is(c0, 0, sym_none))
        return run(c, i, 0, sym_none, NULL);
    return 0;
}

/* One match of the Llama 3 family at i; returns its end. */
static size_t match_llama3(const cur *c, size_t i, uint32_t flags)
{
    unsigned letter = ML__UC_L | (flags & ML_MLT_MARKS_REGEX ? ML__UC_M : 0);
    unsigned sym_none = ML__UC_S | ML__UC_L | ML__UC_N | (flags & ML_MLT_MARKS_REGEX ? ML__UC_M : 0);
    size_t e = contraction(c, i, 1);
    if (e)
        return i + e;
    int l0, l1 = 0;
    unsigned c0 = cls_at(c, i, &l0), c1 = 0;
    size_t i1 = i + (size_t)l0;
    if (i1 < c->n)
        c1 = cls_at(c, i1, &l1);
    int has1 = i1 < c->n;
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (is(c0, 0, ML__UC_NL | ML__UC_L | ML__UC_N) && has1 && is(c1, letter, 0))
        return run(c, i1, letter, 0, NULL);
    if (is(c0, letter, 0))
        return run(c, i, letter, 0, NULL);
    /* \p{N}{1,3} or \p{N} */
    if (c0 & ML__UC_N) {
        return flags & ML_MLT_SINGLE_DIGITS ? i1 : numbers3(c, i1);
    }
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    size_t e2 = symbols(c, i, c0, i1, has1, c1, sym_none);
    if (e2)
        return run(c, e2, ML__UC_NL, 0, NULL);
    /* \s*[\r\n]+ , \s+(?!\S) , \s+ : c0 is white space here. */
    e = ws_newlines(c, i);
    return e ? e : ws_tail(c, i);
}

/* One match of the GPT-2 regex at i. */
static size_t match_gpt2(const cur *c, size_t i)
{
    size_t e = contraction(c, i, 0);
    if (e)
        return i + e;
    int l0, l1 = 0;
    unsigned c0 = cls_at(c, i, &l0), c1 = 0;
    size_t i1 = i + (size_t)l0;
    int sp = c->s[i] == ' ' && i1 < c->n;
    if (sp)
        c1 = cls_at(c, i1, &l1);
    /*  ?\p{L}+ ,  ?\p{N}+ ,  ?[^\s\p{L}\p{N}]+ */
    static const unsigned any[3] = {ML__UC_L, ML__UC_N, 0};
    static const unsigned none[3] = {0, 0, ML__UC_S | ML__UC_L | ML__UC_N};
    for (int a = 0; a < 3; a++) {
        if (sp && is(c1, any[a], none[a]))
            return run(c, i1, any[a], none[a], NULL);
        if (is(c0, any[a], none[a]))
            return run(c, i, any[a], none[a], NULL);
    }
    return ws_tail(c, i);
}

/* o200k's upper part U and lower part W of a word: Lm, Lo and marks are
 * in both, so a word may start or end on them either way. */
static int in_upper(unsigned cl)
{
    return ((cl & ML__UC_L) && !(cl & ML__UC_LOWER)) || (cl & ML__UC_M);
}

static int in_lower(unsigned cl)
{
    return ((cl & ML__UC_L) && !(cl & ML__UC_UPPER)) || (cl & ML__UC_M);
}

/* The end of the run of characters that pass in(class) from i. */
static size_t run_of(const cur *c, size_t i, int (*in)(unsigned))
{
    while (i < c->n) {
        int l;
        if (!in(cls_at(c, i, &l)))
            break;
        i += (size_t)l;
    }
    return i;
}

/* A word's optional contraction suffix at e. */
static size_t with_contraction(const cur *c, size_t e)
{
    return e + contraction(c, e, 1);
}

/* U*W+C? at s, as the backtracking engine finds it: U* greedy gives back
 * characters until W+ can start, so W+ starts right after the U run if a
 * W character is there, else on the run's last character that is in both
 * parts; 0 when there is none. */
static size_t lower_word(const cur *c, size_t s)
{
    size_t i = s, last_both = SIZE_MAX;
    while (i < c->n) {
        int l;
        unsigned cl = cls_at(c, i, &l);
        if (!in_upper(cl))
            break;
        if (in_lower(cl))
            last_both = i;
        i += (size_t)l;
    }
    int l;
    size_t w = i < c->n && in_lower(cls_at(c, i, &l)) ? i : last_both;
    if (w == SIZE_MAX)
        return 0;
    return with_contraction(c, run_of(c, w, in_lower));
}

/* U+W*C? at s; 0 when s is not in U. */
static size_t upper_word(const cur *c, size_t s)
{
    size_t e = run_of(c, s, in_upper);
    if (e == s)
        return 0;
    return with_contraction(c, run_of(c, e, in_lower));
}

/* One match of the o200k regex at i. */
static size_t match_o200k(const cur *c, size_t i)
{
    int l0, l1 = 0;
    unsigned c0 = cls_at(c, i, &l0), c1 = 0;
    size_t i1 = i + (size_t)l0, e;
    int has1 = i1 < c->n;
    if (has1)
        c1 = cls_at(c, i1, &l1);
    /* The two word alternatives, each with its optional
     * [^\r\n\p{L}\p{N}] first, then without it. */
    int prefix = has1 && is(c0, 0, ML__UC_NL | ML__UC_L | ML__UC_N);
    if ((prefix && (e = lower_word(c, i1))) || (e = lower_word(c, i)))
        return e;
    if ((prefix && (e = upper_word(c, i1))) || (e = upper_word(c, i)))
        return e;
    /* \p{N}{1,3} */
    if (c0 & ML__UC_N)
        return numbers3(c, i1);
    /*  ?[^\s\p{L}\p{N}]+[\r\n/]* */
    e = symbols(c, i, c0, i1, has1, c1, ML__UC_S | ML__UC_L | ML__UC_N);
    if (e) {
        while (e < c->n && (c->s[e] == '\r' || c->s[e] == '\n' || c->s[e] == '/'))
            e++;
        return e;
    }
    /* \s*[\r\n]+ , \s+(?!\S) , \s+ : c0 is white space here. */
    e = ws_newlines(c, i);
    return e ? e : ws_tail(c, i);
}

static size_t match_at(const cur *c, size_t i, uint32_t flags)
{
    if (flags & ML_MLT_GPT2_REGEX)
        return match_gpt2(c, i);
    if (flags & ML_MLT_O200K_REGEX)
        return match_o200k(c, i);
    return match_llama3(c, i, flags);
}

static int split_regex(uint32_t flags, const uint8_t *s, size_t n, ml__pretok_fn fn, void *ctx)
{
    cur c = {s, n};
    size_t i = 0;
    while (i < n) {
        size_t e = match_at(&c, i, flags);
        int r = fn(ctx, s + i, e - i);
        if (r)
            return r;
        i = e;
    }
    return 0;
}

int ml__pretokenize(uint32_t flags, const uint8_t *s, size_t n, ml__pretok_fn fn, void *ctx)
{
    if (!(flags & ML_MLT_SPLIT_DIGITS))
        return split_regex(flags, s, n, fn, ctx);
    /* Digits(individual_digits): each \p{N} alone, the rest in runs. */
    cur c = {s, n};
    size_t i = 0;
    while (i < n) {
        int l;
        size_t e;
        if (cls_at(&c, i, &l) & ML__UC_N)
            e = i + (size_t)l;
        else
            e = run(&c, i, 0, ML__UC_N, NULL);
        int r = (cls_at(&c, i, &l) & ML__UC_N) ? fn(ctx, s + i, e - i)
                                                : split_regex(flags, s + i, e - i, fn, ctx);
        if (r)
            return r;
        i = e;
    }
    return 0;
}
