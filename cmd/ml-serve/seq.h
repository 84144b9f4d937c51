/* seq.h - the sequences the slots compute: the one place where the server
 * meets the runtime's context.  All slots share one ml_ctx holding a
 * sequence per slot (ml_ctx_params.n_seq), and a scheduler step evaluates
 * the runs of several sequences (a decode token each, a prompt chunk) in
 * one ml_ctx_eval_seqs call, so decoding reads the weights once for all
 * the slots; each sequence's logits are the bits it would get alone. */
#ifndef ML_SERVE_SEQ_H
#define ML_SERVE_SEQ_H

#include <mlcore.h>

typedef struct srv_ctx srv_ctx;

/* base->n_seq sequences (numbered 0 .. n_seq-1) of up to base->n_ctx
 * positions each, evaluated by base->n_threads threads with base's cache
 * types; a step holds at most one prompt chunk of at most n_chunk tokens
 * beside one token of each other sequence (base->n_batch is ignored). */
ml_status srv_ctx_new(const ml_model *m, const ml_ctx_params *base, uint32_t n_chunk,
                      srv_ctx **out, ml_error *err);
void srv_ctx_free(srv_ctx *c);

uint32_t srv_ctx_n_ctx(const srv_ctx *c);
uint32_t srv_ctx_n_chunk(const srv_ctx *c);
/* Tokens sequence seq's cache holds (its position). */
size_t srv_ctx_len(const srv_ctx *c, uint32_t seq);

/* The tokens sequence seq's cache holds, srv_ctx_len of them (valid
 * until the next step): a generation's history for its penalties. */
const ml_token *srv_ctx_held(const srv_ctx *c, uint32_t seq);
/* How many of tokens[0..n) sequence seq's cache already holds at its
 * start. */
size_t srv_ctx_common(const srv_ctx *c, uint32_t seq, const ml_token *tokens, size_t n);
/* Keeps the first `keep` tokens of sequence seq and forgets the rest;
 * when the model cannot go back (recurrent layers, a wrapped window) it
 * forgets all.  Returns the tokens kept. */
size_t srv_ctx_keep(srv_ctx *c, uint32_t seq, size_t keep);

/* One run of a step: n tokens of sequence seq after the ones it holds.
 * status is the run's outcome after srv_ctx_step (err its message). */
typedef struct srv_run {
    uint32_t seq;
    const ml_token *tokens;
    size_t n;
    int all_logits;  /* keep the logits of every token of the run (srv_ctx_rows);
                      * n at most srv_ctx_n_score_chunk */
    ml_status status;
    ml_error err;
} srv_run;

/* Evaluates runs[0..n_runs) (distinct sequences, each run within its
 * context, n_runs at most n_seq, n_chunk + n_seq tokens in all, or with
 * all_logits n_score + n_seq) in one ml_ctx_eval_seqs call.  Should
 * the call refuse them, each run is evaluated alone so that only the
 * faulty ones fail.  Returns the first failure (runs[i].status says
 * which), ML_OK when all went through. */
ml_status srv_ctx_step(srv_ctx *c, srv_run *runs, size_t n_runs);
/* The logits (vocab floats, which a sampler may change in place) of the
 * last token of runs[i] in the last step; valid until the next step. */
float *srv_ctx_logits(srv_ctx *c, size_t i);

/* Scoring a prompt (every position's logits, an echo's log-probabilities):
 * the most tokens a run with all_logits may have, so that a step's rows
 * stay near ML_LOGITS_BATCH_MB (ml_logits_batch), and n_chunk at most. */
uint32_t srv_ctx_n_score_chunk(const srv_ctx *c);
/* Allocates the rows a step with all_logits needs (once, by the thread
 * that steps); 0, or -1 when memory runs out (a step then keeps one row
 * per run, and srv_ctx_rows gives NULL). */
int srv_ctx_score_ready(srv_ctx *c);
/* The logits of every token of runs[i] in the last step, when it had
 * all_logits (n x vocab floats, row t for its token t; NULL otherwise);
 * valid until the next step (a sampler may change it in place).  Each
 * row is the bits ml_ctx_eval gives. */
float *srv_ctx_rows(const srv_ctx *c, size_t i);
/* Tokens sequence seq may evaluate and still be taken back to where it
 * is (speculation's guesses): ml_ctx_seq_rewind_room. */
uint32_t srv_ctx_rewind_room(const srv_ctx *c, uint32_t seq);
/* The runtime's context, to read what a step of n tokens costs
 * (ml_ctx_step_group: speculation fills a group's empty places). */
const ml_ctx *srv_ctx_ml(const srv_ctx *c);

#endif
