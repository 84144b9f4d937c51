/* draft.h - speculative decoding's draft model (-md), as ml-run and
 * ml-serve use it: a second, smaller model with a context of its own that
 * guesses the next tokens greedily for the model to check in one step.
 * Its guesses are the model's token ids, so it must share the model's
 * vocabulary: the same number of logit rows and a tokenizer with the same
 * tokens, checked at load.  Its context holds a sequence per generation
 * that guesses (ml-serve: a slot each), and each sequence follows the
 * tokens its generation kept: before each guess it keeps what it holds in
 * common with them (taken back past guesses that were not kept) and
 * evaluates the rest.  One thread at a time uses it. */
#ifndef ML_CLI_DRAFT_H
#define ML_CLI_DRAFT_H

#include "mlcore.h"

#include <stddef.h>
#include <stdint.h>

typedef struct cli_draft cli_draft;

typedef struct cli_draft_params {
    const char *path;           /* -md FILE; its tokenizer lies beside it */
    int no_mmap;                /* --no-mmap: read, not mapped */
    const ml_mlb_header *model; /* the model's header: its vocabulary's size */
    const ml_mlt *mlt;          /* the model's tokenizer, which the draft's must equal */
    uint32_t n_ctx;             /* positions of each sequence (at most the draft's max_seq) */
    uint32_t n_batch;           /* tokens a step when a sequence catches up */
    uint32_t n_seq;             /* sequences: one per generation that guesses */
    unsigned threads;           /* -td, else the model's */
    ml_cache_type cache_k, cache_v;
    float p_min;                /* --spec-draft-p-min: guess while this sure */
} cli_draft_params;

/* The draft model, checked against the model, and its context, into
 * *out: 0, or the exit status, reported ("the draft model has N tokens,
 * the model M; ..." and ml_mlt_same_tokens's difference, status 1; a
 * missing file or tokenizer, 3).  A draft whose linear-attention state
 * cannot go back is warned about and not opened: 0 with *out NULL. */
int cli_draft_open(const cli_draft_params *p, cli_draft **out);
/* -v's line: "PROG: FILE: draft model, L layers, dim D, context C, T threads". */
void cli_draft_describe(const cli_draft *d);
/* Sequence seq brought to hold ids[0..n_ids) without guessing (a prompt
 * read while the model reads it, so that its cost shows as the prompt's);
 * nothing when they do not fit its context. */
ml_status cli_draft_follow(cli_draft *d, uint32_t seq, const ml_token *ids, size_t n_ids,
                           ml_error *err);
/* One generation's request for guesses: up to `most` of what follows
 * ids[0..n_ids) (its last token included) for sequence seq, into
 * out[0..n). */
typedef struct cli_draft_ask {
    uint32_t seq;
    const ml_token *ids;
    size_t n_ids;
    size_t most;   /* lowered to what the sequence can take back */
    ml_token *out;
    size_t n;      /* set: the guesses made */
} cli_draft_ask;

/* The guesses of asks[0..n_asks) (distinct sequences): each sequence
 * brought to hold its ids, then the draft's most likely token and,
 * evaluated, its most likely next, as far as its context can take them
 * back and, with p_min, while it is that sure of them; the sequences'
 * steps taken together, one ml_ctx_eval_seqs for all of them at each
 * depth.  None for an ask whose ids do not fit the draft's context. */
ml_status cli_draft_guess_all(cli_draft *d, cli_draft_ask *asks, size_t n_asks, ml_error *err);
/* cli_draft_guess_all of one ask; *n: the guesses made. */
ml_status cli_draft_guess(cli_draft *d, uint32_t seq, const ml_token *ids, size_t n_ids,
                          size_t most, ml_token *out, size_t *n, ml_error *err);
void cli_draft_close(cli_draft *d);

#endif
