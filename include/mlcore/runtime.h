/* mlcore/runtime.h - running an .mlb model on the CPU: bind the weights of
 * an open model, evaluate tokens (prompt batches or one at a time) into a
 * cache, and sample the next token.  Included by mlcore.h. */
#ifndef MLCORE_RUNTIME_H
#define MLCORE_RUNTIME_H

#include <mlcore/base.h>
#include <mlcore/mlb.h>
#include <mlcore/mli.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * Model: the weights of an open ml_mlb, bound for computing.  Borrows the
 * ml_mlb, which must stay open while the model lives.  Read-only after
 * creation: one model may serve several contexts and threads.
 * ------------------------------------------------------------------------ */
typedef struct ml_model ml_model;

ML_API ml_status ml_model_new(const ml_mlb *mlb, ml_model **out, ml_error *err);
ML_API void ml_model_free(ml_model *m);
ML_API const ml_mlb_header *ml_model_header(const ml_model *m);

/* ------------------------------------------------------------------------
 * Context: the state of one or more sequences (each its own position, KV
 * cache and recurrent state), the scratch buffers and the threads that
 * compute them, allocated once by ml_ctx_new.  Evaluation allocates only
 * the matrix-product kernels' temporary panels for batches of several
 * tokens (freed before it returns; if that fails the kernels fall back to
 * row-by-row products with the same results).
 *
 * Several sequences (several conversations of a server) are evaluated
 * side by side with ml_ctx_eval_seqs: one call takes tokens of any of
 * them, and their matrix products read the weights once for all, so
 * decoding several sequences costs less than decoding them in turn (how
 * much less depends on how far reading the weights, rather than the
 * arithmetic, bounds the machine's decode speed: bench/bench-seqs.sh).
 * Attention reads each token's own sequence, so a sequence's logits are
 * the same bits whatever else was evaluated beside it.  The functions
 * without "seq" in their name act on sequence 0.  A context is used by
 * one thread at a time.
 * ------------------------------------------------------------------------ */
typedef struct ml_ctx ml_ctx;

/* How the KV cache holds keys or values.  F16 rounds each float to the
 * nearest IEEE half (ties to even, as ml_f32_to_f16) when it is computed,
 * before any query attends to it, and widens it exactly when read: half
 * the cache's bytes, so half of what attention reads at long contexts,
 * for logits close to (not the bits of) F32's.  Q8_0 and Q4_0 store each
 * head's row in blocks of 32 values, quantized when computed by the
 * spec's rules (quant.h: ml_quantize_row_q8_0, ml_quantize_row_q4_0_round)
 * with an f32 scale before the quants (36 and 20 bytes a block), and
 * read back as floats (q·d, (nibble − 8)·d: one multiplication each) that
 * attention uses as it uses F32's (docs/quant-decisions.md, "KV cache").
 * They need a head_dim that is a multiple of 32 (ml_cache_type_check).
 * Every type gives the same bits for every kernel variant, batch size
 * and thread count. */
typedef enum ml_cache_type {
    ML_CACHE_F32 = 0, /* float32, as computed (the default) */
    ML_CACHE_F16 = 1, /* IEEE half */
    ML_CACHE_Q8_0 = 2, /* Q8_0 blocks: 9 bits a value (1.125 bytes) */
    ML_CACHE_Q4_0 = 3  /* Q4_0 blocks: 5 bits a value (0.625 bytes) */
} ml_cache_type;

typedef struct ml_ctx_params {
    uint32_t n_ctx;     /* positions each sequence's cache holds; 0: max_seq; above: error */
    uint32_t n_batch;   /* tokens per evaluation step (all sequences'); 0: 64 */
    unsigned n_threads; /* 0: 1 */
    uint32_t n_seq;     /* sequences, each with its own cache of n_ctx; 0: 1 */
    /* How keys and values are cached (ml_cache_type); 0: F32.  Linear-
     * attention layers' recurrent state is float32 whatever these say.
     * Another value: ML_E_INVAL; Q8_0 or Q4_0 the model's head size
     * cannot take (ml_cache_type_check): ML_E_UNSUPPORTED. */
    ml_cache_type cache_k, cache_v;
} ml_ctx_params;

/* "f32", "f16", "q8_0", "q4_0" (llama.cpp's names for them), or NULL for
 * another value. */
ML_API const char *ml_cache_type_name(ml_cache_type t);
/* The type named `name` (one of the names above) into *out; ML_E_INVAL
 * for another name, *out untouched. */
ML_API ml_status ml_cache_type_parse(const char *name, ml_cache_type *out, ml_error *err);
/* Bytes of n cached values of type t (n a multiple of 32 for Q8_0 and
 * Q4_0: whole blocks); 0 for an unknown type. */
ML_API uint64_t ml_cache_type_bytes(ml_cache_type t, uint64_t n);
/* ML_OK when a model of header h can cache keys or values as t;
 * ML_E_UNSUPPORTED, err naming head_dim, for Q8_0 or Q4_0 with a head
 * size (head_dim, or dim / n_heads where it is 0) that is not a multiple
 * of 32; ML_E_INVAL for an unknown type.  ml_ctx_new checks this. */
ML_API ml_status ml_cache_type_check(const ml_mlb_header *h, ml_cache_type t, ml_error *err);

ML_API ml_status ml_ctx_new(const ml_model *m, const ml_ctx_params *p, ml_ctx **out,
                            ml_error *err);
ML_API void ml_ctx_free(ml_ctx *c);

/* Bytes ml_ctx_new allocated for the caches and recurrent states (n_seq
 * times what mlb-info reports for a context of n_ctx, keys and values in
 * their cache types' bytes: every sequence gets its whole cache up
 * front) and for everything else (shared by the
 * sequences, but for the chunk memory of linear-attention layers, which
 * goes with each sequence's state). */
ML_API uint64_t ml_ctx_state_bytes(const ml_ctx *c);
ML_API uint64_t ml_ctx_scratch_bytes(const ml_ctx *c);
/* Bytes one more position adds to a sequence's cache: the keys and
 * values, in their cache types, of the layers that cache every position
 * of the context (not the sliding windows shorter than it, nor linear
 * attention's fixed state). */
ML_API uint64_t ml_ctx_bytes_per_pos(const ml_ctx *c);

/* Positions evaluated so far (of sequence 0); the next token goes at this
 * position. */
ML_API uint32_t ml_ctx_pos(const ml_ctx *c);
ML_API uint32_t ml_ctx_n_ctx(const ml_ctx *c);
/* Forgets sequence 0 (position 0, empty cache). */
ML_API void ml_ctx_reset(ml_ctx *c);
/* Keeps the first pos positions and forgets the rest, so that a sequence
 * sharing them (the earlier turns of a chat) goes on from there; what is
 * evaluated next is exactly what a fresh context would compute after the
 * same tokens.  ML_E_INVAL past ml_ctx_pos; ML_E_UNSUPPORTED when pos <
 * ml_ctx_pos and the model has linear-attention layers (a recurrent state
 * cannot go back) or a sliding-window cache that has wrapped (it holds
 * later positions in the place of earlier ones): reset and evaluate
 * again. */
ML_API ml_status ml_ctx_truncate(ml_ctx *c, uint32_t pos, ml_error *err);

/* Sequences the context holds (ml_ctx_params.n_seq, at least 1); they are
 * numbered 0 .. n_seq-1. */
ML_API uint32_t ml_ctx_n_seq(const ml_ctx *c);
/* ml_ctx_pos, ml_ctx_reset and ml_ctx_truncate of sequence seq; the others
 * are untouched.  A sequence outside 0 .. n_seq-1: position 0, ML_E_INVAL. */
ML_API uint32_t ml_ctx_seq_pos(const ml_ctx *c, uint32_t seq);
ML_API ml_status ml_ctx_seq_reset(ml_ctx *c, uint32_t seq, ml_error *err);
ML_API ml_status ml_ctx_seq_truncate(ml_ctx *c, uint32_t seq, uint32_t pos, ml_error *err);
/* What a caller reusing a prefix wants: keeps the first pos positions of
 * sequence seq when it can go back there (ml_ctx_seq_truncate), else
 * resets it.  Returns the positions kept (pos, the current position if
 * that is less, or 0); 0 for a sequence outside 0 .. n_seq-1. */
ML_API uint32_t ml_ctx_seq_keep(ml_ctx *c, uint32_t seq, uint32_t pos);

/* Tokens that may be evaluated for sequence seq and all still be taken
 * back with ml_ctx_seq_truncate to the current position (speculation
 * guesses and takes back): the context's room, or less where a sliding
 * window's ring would wrap; 0 with linear-attention layers, whose state
 * cannot go back, and for a sequence outside 0 .. n_seq-1. */
ML_API uint32_t ml_ctx_seq_rewind_room(const ml_ctx *c, uint32_t seq);

/* Evaluates n tokens at the next n positions.  logits (may be NULL)
 * receives vocab floats per token: for all n tokens when all_logits is
 * non-zero (n x vocab, row t for token t), else for the last token only.
 * Fails with ML_E_INVAL when a token id is out of range or the context is
 * full (nothing is evaluated then). */
ML_API ml_status ml_ctx_eval(ml_ctx *c, const ml_token *tokens, size_t n, float *logits,
                             int all_logits, ml_error *err);

/* Evaluates tokens[i] for sequence seq[i], i < n, each at its sequence's
 * next position: one decode token of each of several sequences, a chunk
 * of one's prompt beside the others' decode tokens, or any mix.  The
 * tokens of one sequence are consecutive in the call (a run) and in
 * order; every sequence has at most one run (seq NULL: all are sequence
 * 0, as ml_ctx_eval).  logits (may be NULL) receives vocab floats per
 * row: with all_logits, one row per token (n x vocab, row i for token i);
 * otherwise one row per run, for its last token, in the order of the
 * runs.  A sequence's logits are bit for bit
 * those ml_ctx_eval would give it alone, whatever the other sequences in
 * the call, the batch and the thread count.  Fails with ML_E_INVAL, and
 * evaluates nothing, when a sequence is out of range or has two runs, a
 * token id is out of range, or a run does not fit in what its sequence's
 * context has left. */
ML_API ml_status ml_ctx_eval_seqs(ml_ctx *c, const uint32_t *seq, const ml_token *tokens,
                                  size_t n, float *logits, int all_logits, ml_error *err);

/* Collects an importance matrix (mli(5)) from now on: every evaluation adds
 * the squares of each matrix's float input (before its Q8_0 quantization)
 * to imatrix's sums, token by token, and counts the tokens; the classifier
 * only for the tokens whose logits are computed.  imatrix must fit the
 * model (ML_E_MISMATCH otherwise, see ml_mli_check_model); the context
 * borrows it until it is freed or given NULL, which stops collecting. */
/* How ml_ctx_embed pools the positions' hidden states (the final norm's
 * output, dim floats each): their mean, the first token's (CLS), or the
 * last token's (what causal embedding models such as Qwen3-Embedding are
 * trained for). */
typedef enum ml_pooling { ML_POOL_MEAN = 1, ML_POOL_CLS = 2, ML_POOL_LAST = 3 } ml_pooling;

/* An embedding of tokens[0..n) into out (the model's dim floats, not
 * normalized): sequence 0 is reset, evaluated over the tokens (causal
 * attention, as the model generates) and keeps them.  ML_E_INVAL for no
 * tokens, an unknown pooling, or what ml_ctx_eval refuses. */
ML_API ml_status ml_ctx_embed(ml_ctx *c, const ml_token *tokens, size_t n, ml_pooling pooling,
                              float *out, ml_error *err);

ML_API ml_status ml_ctx_set_imatrix(ml_ctx *c, ml_mli *imatrix, ml_error *err);

ML_API uint32_t ml_ctx_n_batch(const ml_ctx *c);
/* The tokens a step of n (ml_ctx_eval, ml_ctx_eval_seqs) is computed in
 * groups of: the products of some weight types work on a group of tokens
 * at once (a register's lanes), so that n costs about what n rounded up
 * to a multiple of the group costs.  1 where a step costs by the token.
 * For the matrices that hold most of the weights a step reads; for a
 * caller free to evaluate more tokens (speculation's guesses). */
ML_API uint32_t ml_ctx_step_group(const ml_ctx *c, uint32_t n);
ML_API const ml_model *ml_ctx_model(const ml_ctx *c);

/* ------------------------------------------------------------------------
 * Scoring text (perplexity), as llama.cpp's llama-perplexity does
 * ------------------------------------------------------------------------ */
typedef struct ml_nll {
    double sum, sum2; /* of -log p(next token), and of its square */
    uint64_t count;   /* tokens scored */
} ml_nll;

/* Resets the context, evaluates tokens[0..n) in steps of the context's
 * batch with every token's logits (into rows: n_batch x vocab floats the
 * caller provides), and adds -log p(tokens[j+1]) for j = first .. n-2 to
 * acc.  ml_ctx_eval's errors. */
ML_API ml_status ml_ctx_score(ml_ctx *c, const ml_token *tokens, size_t n, size_t first,
                              float *rows, ml_nll *acc, ml_error *err);
/* exp(mean), and into *error (may be NULL) llama-perplexity's +/- (the
 * standard error of the mean times the perplexity). */
ML_API double ml_nll_perplexity(const ml_nll *acc, double *error);

/* Tokens per evaluation step when every token's logits are kept (scoring,
 * all_logits): as many as keep one step's logits near ML_LOGITS_BATCH_MB
 * megabytes (2^20 bytes), 16 to 256. */
#define ML_LOGITS_BATCH_MB 64
ML_API uint32_t ml_logits_batch(uint32_t vocab);

/* Called with 0 before the first chunk, then with the chunks done after
 * each; a non-zero return stops before the next chunk. */
typedef int (*ml_chunk_progress_fn)(void *ctx, uint64_t done, uint64_t total);

typedef struct ml_perplexity_opts {
    uint64_t max_chunks; /* 0: every whole chunk of the text */
    ml_token bos;        /* replaces each chunk's first token; ML_TOKEN_NONE: the text's own */
    ml_chunk_progress_fn progress; /* may be NULL */
    void *progress_ctx;
} ml_perplexity_opts;

/* Scores a text the way llama-perplexity and llama-imatrix cut it: chunks
 * of the context's n_ctx tokens (the rest dropped), each evaluated from an
 * empty context with its first token replaced by o->bos (unless ML_TOKEN_NONE) and
 * its second half scored into acc (ml_ctx_score; rows as there).
 * *n_chunks receives the chunks to score, n / n_ctx but at most
 * max_chunks.  A stop asked by the progress callback returns ML_OK, acc
 * holding the chunks scored.  ML_E_INVAL when the text holds no whole
 * chunk, ML_E_NOMEM, ml_ctx_eval's errors. */
ML_API ml_status ml_ctx_perplexity(ml_ctx *c, const ml_token *tokens, size_t n,
                                   const ml_perplexity_opts *o, float *rows, ml_nll *acc,
                                   size_t *n_chunks, ml_error *err);

/* ------------------------------------------------------------------------
 * Sampling
 * ------------------------------------------------------------------------ */
typedef struct ml_sampler_params {
    float temperature;    /* 0: greedy (argmax, lowest id on ties) */
    uint32_t top_k;       /* 0: off */
    float top_p;          /* 1 or 0: off */
    float min_p;          /* 0: off */
    float repeat_penalty; /* 1 or 0: off; applied to the last repeat_last_n tokens */
    uint32_t repeat_last_n; /* 0: 64 */
    uint64_t seed;
    /* OpenAI's penalties, over the same last repeat_last_n tokens: a token
     * seen c > 0 times there loses c * frequency_penalty + presence_penalty
     * (after the repeat penalty, as llama.cpp applies them); 0: off. */
    float presence_penalty;
    float frequency_penalty;
} ml_sampler_params;

typedef struct ml_sampler ml_sampler;

ML_API ml_status ml_sampler_new(const ml_sampler_params *p, uint32_t vocab, ml_sampler **out,
                                ml_error *err);
ML_API void ml_sampler_free(ml_sampler *s);
/* Picks the next token from logits (modified in place); `history` holds
 * the tokens so far, for the repeat penalty. */
ML_API ml_token ml_sampler_next(ml_sampler *s, float *logits, const ml_token *history,
                               size_t n_history);

#ifdef __cplusplus
}
#endif
#endif
