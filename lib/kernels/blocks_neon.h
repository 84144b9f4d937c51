/* blocks_neon.h - private: the entries of blocks_neon.c (the block-type
 * kernels for AArch64 NEON) and of blocks_neondot.c (the same code with
 * the dot-product instructions), for the tables of kernels_neon.c and
 * kernels_neondot.c.  Contracts: kernels.h's matvec_blk, matmul_blk and
 * blk_to_q8_0. */
#ifndef ML_BLOCKS_NEON_H
#define ML_BLOCKS_NEON_H

#include "kernels/kernels.h"

void ml__matvec_blk_neon(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                         const int8_t *xq, const float *xd, float *y);
void ml__matmul_blk_neon(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                         const int8_t *xq, const float *xd, size_t n_tok, float *y, size_t ldy);
int ml__blk_to_q8_0_neon(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                         int8_t *q, float *d);

void ml__matvec_blk_neondot(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                            const int8_t *xq, const float *xd, float *y);
void ml__matmul_blk_neondot(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                            const int8_t *xq, const float *xd, size_t n_tok, float *y,
                            size_t ldy);
int ml__blk_to_q8_0_neondot(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                            int8_t *q, float *d);

#endif
