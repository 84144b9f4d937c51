/* kquant_avx512.c - the ggml block-type quantizers' search
 * (kquant_blocks.h) built for AVX-512 (the avx512 files' flags, so the
 * CPUs ml__cpu_x86_level calls 2); kquant.c takes it where the CPU runs
 * it.  The same bytes as every other build of it. */
#include "quant/quant_impl.h"

#if defined(__x86_64__)

#include "quant/kquant_blocks.h"

void ml__kquant_rows_avx512(ml_type t, const float *x, size_t n, const float *imp,
                            uint8_t *out)
{
    kquant_rows(t, x, n, imp, out);
}

#endif
