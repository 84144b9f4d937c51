/* blocks_avx512.c - the block-type kernels (blocks_x86.h) compiled for
 * AVX-512 VNNI: the same 256-bit code, its byte dot products one vpdpbusd
 * (no 512-bit widening yet). */
#include "kernels/kernels.h"

#if defined(__x86_64__)

#include "kernels/blocks_x86.h"

void ml__matvec_blk_avx512(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, float *y)
{
    matvec_blk(t, w, cols, r0, r1, xq, xd, y);
}

void ml__matmul_blk_avx512(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, size_t n_tok, float *y, size_t ldy)
{
    matmul_blk(t, w, cols, r0, r1, xq, xd, n_tok, y, ldy);
}

size_t ml__blk_x_bytes_avx512(ml_type t, size_t cols, size_t n_tok)
{
    return kl_x_bytes(t, cols, n_tok);
}

size_t ml__blk_x_group_avx512(ml_type t, size_t cols, size_t n_tok)
{
    return kl_x_tokens_at_once(t, cols, n_tok);
}

void ml__blk_x_prepare_avx512(ml_type t, const int8_t *xq, const float *xd, size_t cols,
                              size_t n_tok, unsigned part, unsigned parts, void *xt)
{
    kl_x_prepare(t, xq, xd, cols, n_tok, part, parts, xt);
}

void ml__blk_x_run_avx512(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                          const int8_t *xq, const float *xd, const void *xt, size_t n_tok,
                          float *y, size_t ldy)
{
    kl_x_run(t, w, cols, r0, r1, xq, xd, xt, n_tok, y, ldy);
}

int ml__blk_to_q8_0_avx512(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                       int8_t *q, float *d)
{
    return ml__blk_as_q8_0(t) && blk_unpack(t, w, cols, r0, r1, q, d, NULL);
}

int ml__blk_unpack_avx512(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                          int8_t *q, float *d, float *m, uint8_t *sm)
{
    return blk_unpack(t, w, cols, r0, r1, q, d, m) ||
           blk_unpack_k(t, w, cols, r0, r1, q, d, m, sm);
}

#endif
