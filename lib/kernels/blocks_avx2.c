/* blocks_avx2.c - the block-type kernels (blocks_x86.h) compiled for
 * AVX2 (vpmaddubsw + vpmaddwd byte dot products).  The rows in the
 * lanes need VNNI: the K prompts keep their tokens in the lanes here
 * (kr_on 0). */
#include "kernels/kernels.h"

#if defined(__x86_64__)

#include "kernels/blocks_x86.h"

void ml__matvec_blk_avx2(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, float *y)
{
    matvec_blk(t, w, cols, r0, r1, xq, xd, y);
}

PROMPT_KERNELS(avx2, 0)

int ml__blk_to_q8_0_avx2(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                       int8_t *q, float *d)
{
    return ml__blk_as_q8_0(t) && blk_unpack(t, w, cols, r0, r1, q, d, NULL);
}

#endif
