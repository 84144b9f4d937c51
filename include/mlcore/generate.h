/* mlcore/generate.h - generating one sequence a token at a time.  Between
 * the model's logits and the text lies a fixed order of steps: the logit
 * processors (the logit bias, the end-of-generation ban of "ignore EOS",
 * the penalties, then the caller's), the sampler's pick, the end-of-generation
 * test, incremental decoding, stop strings, the length limit and the
 * context's room.  A generator owns that order, so every command follows
 * the same one, and a constraint added here (a grammar, a logit bias) is
 * added for all of them.
 *
 * The caller evaluates the model (ml_ctx_eval, or one batch for several
 * sequences with ml_ctx_eval_seqs), hands the generator the logits, and
 * gets back the next token to evaluate or the reason the generation
 * ended.  Each generator owns its sampler, decoder and stop strings and
 * there is no shared state, so several generators run side by side (a
 * server's slots) and a sequence's tokens depend only on its logits, its
 * parameters and its seed.  A generator is used by one thread at a time.
 * Included by mlcore.h. */
#ifndef MLCORE_GENERATE_H
#define MLCORE_GENERATE_H

#include <mlcore/base.h>
#include <mlcore/mlt.h>
#include <mlcore/runtime.h>
#include <mlcore/stop.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * Logit processors: each changes the logits of the next token in place,
 * in the order of the chain, before the sampler picks.
 * ------------------------------------------------------------------------ */
/* logits holds vocab floats; history (NULL when n_history is 0) the tokens
 * before the next one, as the caller handed them to ml_gen_next.  A
 * status other than ML_OK ends the step with it (err filled). */
typedef ml_status (*ml_logits_fn)(void *ctx, float *logits, uint32_t vocab,
                                  const ml_token *history, size_t n_history, ml_error *err);
/* Told of every token the generation keeps (never an end-of-generation
 * one), for processors whose state follows the text, as a grammar's does. */
typedef void (*ml_accept_fn)(void *ctx, ml_token id);

typedef struct ml_logits_proc {
    ml_logits_fn apply;  /* required */
    ml_accept_fn accept; /* may be NULL */
    void *ctx;
} ml_logits_proc;

/* Processors a caller may add to the built-in ones. */
#define ML_GEN_MAX_PROCS 8

/* ------------------------------------------------------------------------
 * The generator
 * ------------------------------------------------------------------------ */
typedef struct ml_gen ml_gen;

/* Told of every token kept, before its text goes out: the caller's own
 * history, counts, ids printed instead of text.  A status other than
 * ML_OK ends the step with it. */
typedef ml_status (*ml_gen_token_fn)(void *ctx, ml_token id, ml_error *err);

enum {
    /* The end-of-generation ids are banned (their logits -inf), so the
     * generation ends only by length, stop string or room.  Without a
     * tokenizer there are none to ban. */
    ML_GEN_IGNORE_EOS = 1,
    /* Tokens only: nothing is decoded and on_text is not used (ml-run
     * --ids).  No stop strings then. */
    ML_GEN_NO_TEXT = 2,
    /* The text continues a prompt: with a tokenizer that adds a ▁ prefix
     * (SentencePiece), a first token's ▁ is a real space after the
     * prompt, kept as llama.cpp prints it.  Without the flag the text is
     * taken to start a text (a chat reply), where that ▁ is the prefix
     * and dropped. */
    ML_GEN_CONTINUE = 4
};

/* A constant added to one token's logit at every step (OpenAI's
 * logit_bias; -INFINITY bans the token). */
typedef struct ml_logit_bias {
    ml_token id;
    float bias;
} ml_logit_bias;

typedef struct ml_gen_params {
    uint32_t vocab;             /* the model's; 0 is ML_E_INVAL */
    ml_sampler_params sampler;  /* as ml_sampler_new takes them */
    /* The tokenizer: its end-of-generation ids end the generation, and it
     * decodes the text.  May be NULL only with ML_GEN_NO_TEXT (no end of
     * generation then); borrowed while the generator lives. */
    const ml_mlt *mlt;
    unsigned flags;             /* ML_GEN_*; another bit is ML_E_INVAL */
    const char *const *stops;   /* copied, as ml_stop_new takes them */
    size_t n_stops;
    /* Tokens kept before the generation ends with ML_GEN_LENGTH; 0 ends it
     * before the first. */
    uint64_t max_tokens;
    ml_write_fn on_text;        /* the text as it is released; required for text */
    void *text_ctx;
    ml_gen_token_fn on_token;   /* may be NULL */
    void *token_ctx;
    /* Applied after the built-in processors, in this order (copied; at most
     * ML_GEN_MAX_PROCS). */
    const ml_logits_proc *procs;
    size_t n_procs;
    /* Added first, before every processor (copied; ids below vocab, at
     * most vocab entries, a bias a number or -INFINITY). */
    const ml_logit_bias *bias;
    size_t n_bias;
} ml_gen_params;

/* A new generator: its own sampler (ml_sampler_new's errors) and stop
 * strings (ml_stop_new's).  ML_E_INVAL for a NULL p or out, vocab 0,
 * unknown flags, text without a tokenizer or without on_text, stop
 * strings with ML_GEN_NO_TEXT, procs NULL with n_procs > 0 or a processor
 * without apply, more than ML_GEN_MAX_PROCS processors, a bias list NULL
 * with n_bias > 0, longer than vocab, with an id outside it or a bias NaN
 * or +INFINITY; ML_E_SHAPE for a
 * tokenizer with more tokens than vocab (ml_mlt_check_vocab). */
ML_API ml_status ml_gen_new(const ml_gen_params *p, ml_gen **out, ml_error *err);
ML_API void ml_gen_free(ml_gen *g);

/* What one step is given. */
typedef struct ml_gen_input {
    float *logits;           /* vocab floats of the last evaluated position; changed in place */
    /* The tokens before the next one (prompt and generated), for the
     * repeat penalty; NULL and 0: none (no penalty). */
    const ml_token *history;
    size_t n_history;
    /* Positions the context has left for the next token; 0 ends the
     * generation with ML_GEN_CTX_FULL after the token is kept. */
    uint64_t room;
} ml_gen_input;

/* Why the generation ended, tested in this order after each token. */
typedef enum ml_gen_end {
    ML_GEN_GOING = 0, /* not yet: evaluate token, then call ml_gen_next again */
    ML_GEN_EOG,       /* token is an end-of-generation id: not kept, never shown */
    ML_GEN_STOP,      /* a stop string completed: the text ends before it */
    ML_GEN_LENGTH,    /* max_tokens tokens were kept */
    ML_GEN_CTX_FULL   /* token was kept, but the context has no room to evaluate it */
} ml_gen_end;

typedef struct ml_gen_result {
    ml_gen_end end;
    ml_token token;  /* the token drawn (0 when none was: max_tokens 0) */
} ml_gen_result;

/* One step: the processors on in->logits, the pick, and unless it is an
 * end-of-generation id the token kept (processors' accept, on_token,
 * then its text through the stop strings to on_text).  ML_E_INVAL for a
 * NULL argument or logits, history NULL with n_history > 0, or a
 * generation that is over (it ended, failed or was finished); a
 * callback's or the decoder's failure otherwise (the generation is then
 * over). */
ML_API ml_status ml_gen_next(ml_gen *g, const ml_gen_input *in, ml_gen_result *out,
                             ml_error *err);
/* Ends the text: what the decoder (an incomplete UTF-8 sequence) and the
 * stop strings (the start of one) hold back goes to on_text; nothing
 * after a stop string, nothing a second time.  ml_gen_next never does
 * this itself, so that a caller may report why it stopped before the
 * last text; call it after any end, and when stopping early (a signal)
 * to keep the text so far.  ML_E_INVAL for a NULL g; on_text's and the
 * decoder's failures. */
ML_API ml_status ml_gen_finish(ml_gen *g, ml_error *err);
/* A new text with the same parameters: the decoder, the stop strings and
 * the count of kept tokens start again; the sampler's random state goes
 * on, so a conversation's turns draw as one run does. */
ML_API void ml_gen_restart(ml_gen *g);
/* Tokens kept since the generator was made or restarted. */
ML_API uint64_t ml_gen_n_tokens(const ml_gen *g);

/* ------------------------------------------------------------------------
 * Speculation: guesses the model then checks in one batched evaluation
 * (the batched rows are bit for bit the single-token ones, so a guess
 * kept is exactly the token the generator would have drawn)
 * ------------------------------------------------------------------------ */
/* The max_draft tokens that followed the most recent earlier occurrence
 * of the last size_n tokens of hist[0..n_hist) (llama.cpp's ngram-simple
 * lookup), into draft; where they reach the end of hist, the text from the
 * occurrence on is repeated (a period shorter than the draft goes on).
 * Returns max_draft, or 0 when there is no earlier occurrence (or for a
 * NULL argument). */
ML_API size_t ml_draft_ngram(const ml_token *hist, size_t n_hist, size_t size_n, ml_token *draft,
                             size_t max_draft);

#ifdef __cplusplus
}
#endif

#endif
