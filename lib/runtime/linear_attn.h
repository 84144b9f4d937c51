/* linear_attn.h - private: the gated delta rule of mlb(5)'s linear-attention
 * layers (linear_attn.c), from the projections to the gated, normalized
 * per-head outputs that go through lout.
 *
 * Positions are taken in chunks of ML_LIN_CHUNK aligned to absolute
 * positions (chunk i holds positions [i·C, (i+1)·C)).  A layer keeps the
 * state S as it was at the start of the current chunk and, for the
 * positions of the chunk seen so far, their keys, delta values u and
 * cumulative log decays.  Every position's output is one fixed function of
 * those, whatever batch brought it, so results do not depend on how a
 * prompt is split into batches, nor on the thread count. */
#ifndef ML_LINEAR_ATTN_H
#define ML_LINEAR_ATTN_H

#include "kernels/fmath.h"
#include "runtime/runtime.h"

/* Positions per chunk.  The intra-chunk work per token grows with it and
 * the state work does not, so smaller is faster down to the token blocks
 * of the state products (8): on a Qwen3.5-0.8B-shaped model, one thread,
 * 16 and 32 measured the same, 64 and 128 slower.  The chunk
 * memory (keys and deltas) grows with it too: at 32 it is half the state's
 * size when K = V and dk = dv. */
#define ML_LIN_CHUNK 32

typedef struct ml_lin_layer ml_lin_layer;

/* The memory of one linear-attention layer with weights L (lconv,
 * dt_bias, A_log, lnorm; they must outlive the layer) of a model with
 * header h (validated, lin_k_heads > 0), for a pool of n_threads threads.
 * *state_bytes receives the bytes mlb(5) counts as the layer's state (S
 * and the convolution history, ml_mlb_layer_state_bytes), *chunk_bytes the
 * chunk memory and per-thread scratch on top.  Starts at position 0. */
ml_status ml__lin_new(const ml_mlb_header *h, const ml_layer *L, const ml_kernels *k,
                      unsigned n_threads, ml_lin_layer **out, uint64_t *state_bytes,
                      uint64_t *chunk_bytes, ml_error *err);
void ml__lin_free(ml_lin_layer *s);

/* Back to position 0: S and the convolution history are zero. */
void ml__lin_reset(ml_lin_layer *s);

/* Steps 1-5 of mlb(5)'s linear attention, up to (not including) lout, for
 * n_tok tokens at positions pos, pos+1, ...; pos must be the position the
 * layer has reached (0 after new/reset, then the sum of earlier n_tok).
 *   qkv  (n_tok, 2·K·dk + V·dv)  projections; overwritten (conv, norms)
 *   z    (n_tok, V·dv)           output gate
 *   ba   (n_tok, 2·V)            b, then a
 *   o    (n_tok, V·dv)           receives the gated, normalized outputs
 * Runs on the pool, which has at most the n_threads given to new. */
void ml__lin_forward(ml_lin_layer *s, ml_pool *pool, uint32_t pos, size_t n_tok, float *qkv,
                     const float *z, const float *ba, float *o);

#endif
