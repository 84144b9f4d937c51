/* seq.h - the sequence a slot computes: the one place where the server
 * meets the runtime's context.  Today each slot owns an ml_ctx of its
 * own; a context holding several sequences and evaluating them in one
 * batch will replace this file, and nothing else needs to change. */
#ifndef ML_SERVE_SEQ_H
#define ML_SERVE_SEQ_H

#include <mlcore.h>

typedef struct srv_seq srv_seq;

/* A sequence of up to n_ctx positions, evaluated by `threads` threads,
 * prompts in steps of at most n_batch tokens. */
ml_status srv_seq_new(const ml_model *m, uint32_t n_ctx, uint32_t n_batch, unsigned threads,
                      srv_seq **out, ml_error *err);
void srv_seq_free(srv_seq *q);

uint32_t srv_seq_n_ctx(const srv_seq *q);
uint32_t srv_seq_n_batch(const srv_seq *q);
/* Tokens the cache holds (its position). */
size_t srv_seq_len(const srv_seq *q);

/* How many of tokens[0..n) the cache already holds at its start. */
size_t srv_seq_common(const srv_seq *q, const ml_token *tokens, size_t n);
/* Keeps the first `keep` tokens and forgets the rest; when the model
 * cannot go back (recurrent layers, a wrapped window) it forgets all.
 * Returns the tokens kept. */
size_t srv_seq_keep(srv_seq *q, size_t keep);

/* Evaluates tokens[0..n) (n at most n_batch, within the context) after
 * the ones held; the logits of the last are then srv_seq_logits. */
ml_status srv_seq_eval(srv_seq *q, const ml_token *tokens, size_t n, ml_error *err);
/* vocab floats, which a sampler may change in place. */
float *srv_seq_logits(srv_seq *q);

#endif
