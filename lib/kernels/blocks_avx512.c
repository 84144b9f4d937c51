/* blocks_avx512.c - the block-type kernels (blocks_x86.h) compiled for
 * AVX-512 VNNI: AVX2's code with each byte dot product one vpdpbusd, and
 * the K prompts' rows in the lanes of 512-bit registers. */
#include "kernels/kernels.h"

#if defined(__x86_64__)

#include "kernels/blocks_x86.h"

void ml__matvec_blk_avx512(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, float *y)
{
    matvec_blk(t, w, cols, r0, r1, xq, xd, y);
}

/* The prompt kernels twice: with the K types' rows in the lanes from
 * KR_MIN_TOK tokens on (the avx512vnni table), and with their tokens in
 * the lanes at every count (avx512vnni-lanes), for the chooser to measure
 * against each other: the rows won where a broadcast load costs a
 * multiply-add's port, and nothing says they win where it does not. */
PROMPT_KERNELS(avx512, 1)
PROMPT_KERNELS(avx512_lanes, 0)

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
