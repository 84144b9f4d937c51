/* kquant_avx2.c - the ggml block-type quantizers' search (kquant_blocks.h)
 * built for AVX2 (the avx2 files' flags; -ffp-contract=off still holds,
 * so nothing is fused); kquant.c takes it where the CPU runs it.  The
 * same bytes as every other build of it. */
#include "quant/quant_impl.h"

#if defined(__x86_64__)

#include "quant/kquant_blocks.h"

void ml__kquant_rows_avx2(ml_type t, const float *x, size_t n, const float *imp, uint8_t *out)
{
    kquant_rows(t, x, n, imp, out);
}

#endif
