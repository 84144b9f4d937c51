/* mlcore/grammar.h - structured output: GBNF grammars (the notation of
 * llama.cpp's grammars/README.md), a matcher that follows UTF-8 text
 * through one, and a logit processor that lets a generation produce only
 * text the grammar allows.  Included by mlcore.h.
 *
 * A grammar is a list of rules `name ::= alternatives`; an alternative is
 * a sequence of string literals ("..." with the escapes \n \t \r \\ \"
 * \[ \] \- \xHH \uHHHH \UHHHHHHHH), character classes ([a-z_], [^"\\]),
 * `.` (any character), rule names, groups ( ... ), each optionally
 * followed by `*`, `+`, `?`, `{m}`, `{m,}` or `{m,n}`.  `#` starts a
 * comment; a rule ends at a newline outside parentheses unless the line
 * ends with `|`.  Names are letters, digits, `-` and `_`.  The text is
 * UTF-8 and terminals are Unicode code points.
 *
 * Grammars are untrusted input: every size below is capped, a rule that
 * can reach itself before consuming a character (left recursion, which
 * would loop forever) is refused, and the matcher refuses a state that
 * grows past its caps instead of running out of memory or time.
 *
 * Differences from llama.cpp, each a refusal where llama.cpp accepts: a
 * rule defined twice (llama.cpp keeps the last), a repetition bound above
 * ML_GRAMMAR_MAX_REPEAT (llama.cpp turns {m,n} with n above 2000 into
 * {m,}), invalid UTF-8 or NUL in the text, a code point above U+10FFFF;
 * token references (<[id]>, <think>) are not supported (ML_E_UNSUPPORTED
 * at the '<'). */
#ifndef MLCORE_GRAMMAR_H
#define MLCORE_GRAMMAR_H

#include <mlcore/base.h>
#include <mlcore/mlt.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Caps on a grammar (parse time): bytes of its text; rules, those the
 * parser makes for groups and repetitions included; elements of all rules
 * (a character, a range, a rule reference, an alternative's end);
 * parentheses open at once; the m and n of a repetition. */
#define ML_GRAMMAR_MAX_TEXT (1u << 20)
#define ML_GRAMMAR_MAX_RULES 65536
#define ML_GRAMMAR_MAX_ELEMENTS (1u << 20)
#define ML_GRAMMAR_MAX_NESTING 64
#define ML_GRAMMAR_MAX_REPEAT 2000
/* Caps on the matcher's state (match time): the parse stacks that are
 * alive at once (one per way the text so far can continue); the depth of
 * one stack (rules open at once: nesting in the text, as in deep JSON);
 * positions held by one state, all stacks together; stacks one character
 * may visit while expanding rule references.  Beyond one the step fails
 * with ML_E_UNSUPPORTED. */
#define ML_GRAMMAR_MAX_STACKS 4096
#define ML_GRAMMAR_MAX_DEPTH 4096
#define ML_GRAMMAR_MAX_STATE (1u << 18)
#define ML_GRAMMAR_MAX_WORK (1u << 16)
/* Cap on the processor's work for one token (apply, accept): stack
 * positions it may copy, all steps together (a JSON grammar over a
 * 262k-token vocabulary needs a few million); beyond it ML_E_UNSUPPORTED,
 * so that a costly grammar cannot stall a generation. */
#define ML_GRAMMAR_MAX_TOKEN_WORK (1u << 28)

/* ------------------------------------------------------------------------
 * Grammars
 * ------------------------------------------------------------------------ */
typedef struct ml_grammar ml_grammar;

/* Parses len bytes of GBNF text (not NUL-terminated; NUL in it is an
 * error) into *out, with the rule named root (NULL: "root") as the start.
 * The grammar is immutable: matchers and processors on several threads may
 * share it while it lives.  Errors name the line and column (1-based,
 * columns in characters) in err->field and the byte offset:
 * ML_E_FORMAT for a syntax error (what was expected), a rule defined
 * twice, an undefined rule (at its first use), no start rule;
 * ML_E_UNSUPPORTED for left recursion (the rule named, at its
 * definition), a token reference and any cap above exceeded; ML_E_INVAL for a NULL text or
 * out; ML_E_NOMEM. */
ML_API ml_status ml_grammar_parse(const char *text, size_t len, const char *root,
                                  ml_grammar **out, ml_error *err);
ML_API void ml_grammar_free(ml_grammar *g);
/* Rules, those made for groups and repetitions included. */
ML_API uint32_t ml_grammar_n_rules(const ml_grammar *g);

/* ------------------------------------------------------------------------
 * Matching text
 * ------------------------------------------------------------------------ */
typedef struct ml_grammar_match ml_grammar_match;

/* A matcher at the start of the text.  g must outlive it.  The caps'
 * ML_E_UNSUPPORTED when the start state is already too large; ML_E_NOMEM;
 * ML_E_INVAL for a NULL argument. */
ML_API ml_status ml_grammar_match_new(const ml_grammar *g, ml_grammar_match **out,
                                      ml_error *err);
ML_API void ml_grammar_match_free(ml_grammar_match *m);
/* Back to the start of the text. */
ML_API void ml_grammar_match_reset(ml_grammar_match *m);
/* Takes n bytes of UTF-8 text; a character may be split across calls.
 * ML_OK when the text so far is still the start of some sentence of the
 * grammar.  ML_E_MISMATCH (err->offset: the byte of this call that failed)
 * when it cannot be: a character the grammar does not allow there,
 * invalid UTF-8; ML_E_UNSUPPORTED when the state would pass a cap;
 * ML_E_NOMEM.  After a failure the matcher is as it was before the call. */
ML_API ml_status ml_grammar_match_feed(ml_grammar_match *m, const void *bytes, size_t n,
                                       ml_error *err);
/* 1 when the text so far is a whole sentence of the grammar (and ends
 * with a whole character), else 0. */
ML_API int ml_grammar_match_complete(const ml_grammar_match *m);

/* ------------------------------------------------------------------------
 * The logit processor
 * ------------------------------------------------------------------------ */
/* Follows the text of a generation: before each token, every token whose
 * text cannot continue the grammar gets the logit -INFINITY, and the
 * end-of-generation ids too unless the text so far is complete; after it,
 * the kept token's text advances the state.  A token's text is what the
 * generator prints for it (ml_tok_stream_put with ML_TOK_SKIP_BOS_EOS):
 * its piece, ▁ as a space for SentencePiece tokenizers, a byte token's
 * one byte, and the space a SentencePiece prefix puts at the very start
 * of the text dropped (kept after ml_grammar_proc_continue, as the
 * generator keeps it with ML_GEN_CONTINUE); a token may end inside a
 * character, which the
 * next ones must then complete.  Tokens with no text (BOS, EOS outside
 * the end-of-generation ids, an empty piece) and ids the tokenizer does
 * not have are never allowed.
 *
 * The work is a walk over the vocabulary sorted by text, so that tokens
 * sharing a prefix share its steps, and a prefix no text can follow ends
 * the walk for every token under it.  Deterministic: no threads, no
 * randomness.  One processor follows one sequence and is used by one
 * thread at a time. */
typedef struct ml_grammar_proc ml_grammar_proc;

/* A processor for the texts of tokenizer t (both must outlive it): the
 * vocabulary's texts are decoded and sorted once here.  Errors as
 * ml_grammar_match_new's. */
ML_API ml_status ml_grammar_proc_new(const ml_grammar *g, const ml_mlt *t, ml_grammar_proc **out,
                                     ml_error *err);
ML_API void ml_grammar_proc_free(ml_grammar_proc *p);
/* Back to the start of a text (with ml_gen_restart). */
ML_API void ml_grammar_proc_reset(ml_grammar_proc *p);
/* The text continues a prompt (the generator's ML_GEN_CONTINUE): the
 * space of a first ▁ is printed, so the grammar sees it.  Resets p. */
ML_API void ml_grammar_proc_continue(ml_grammar_proc *p);

/* The processor's two functions, with the signatures of generate.h's
 * ml_logits_fn and ml_accept_fn; ctx is the ml_grammar_proc:
 *   ml_logits_proc lp = {ml_grammar_proc_apply, ml_grammar_proc_accept, proc};
 * apply: vocab floats of logits; history is not used.  ML_E_MISMATCH when
 * no token of the vocabulary continues the text and it is not complete
 * (the grammar cannot be followed with these tokens), or when a token the
 * processor refused was accepted; the caps' ML_E_UNSUPPORTED; ML_E_NOMEM.
 * accept: a token the generation kept (never an end-of-generation one). */
ML_API ml_status ml_grammar_proc_apply(void *ctx, float *logits, uint32_t vocab,
                                       const ml_token *history, size_t n_history, ml_error *err);
ML_API void ml_grammar_proc_accept(void *ctx, ml_token id);

/* 1 when the text accepted so far is a whole sentence of the grammar. */
ML_API int ml_grammar_proc_complete(const ml_grammar_proc *p);

#ifdef __cplusplus
}
#endif

#endif
