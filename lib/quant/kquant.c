/* kquant.c - quantizers that write ggml's block layouts (issue 38):
 * Q4_K, Q5_K, Q6_K, IQ4_XS, Q5_0, Q5_1 and IQ4_NL, byte for byte as llama.cpp stores
 * them, so that ggml's dequantizers (ours in lib/format/gguf_dequant.c,
 * llama.cpp's, gguf-py's) read them.  Our own search, not a port of
 * ggml-quants.c: per sub-block a continuous fit (a sweep of candidate
 * scales, each refined by weighted least squares), then the integer
 * sub-block scales against the super-block's f16 scale by a local search
 * with a least-squares refit of the f16 scale.  The objective is
 * sum imp[j] (x[j] - y[j])^2 with an importance vector, the plain squared
 * error without.  docs/quant-decisions.md ("ggml block types") has the
 * details and the measured errors against llama.cpp.
 *
 * Plain float arithmetic in a fixed order, no threads, no allocation:
 * the same bytes on every machine (the build has -ffp-contract=off).
 * The search is in kquant_blocks.h, built here for the build's baseline
 * and, on x86, also for AVX2 and AVX-512, taken as the CPU allows. */
#include "quant/kquant_blocks.h"

#if defined(__x86_64__)
#include "kernels/kernels.h"

#include <pthread.h>

static int x86_level;
static pthread_once_t x86_level_once = PTHREAD_ONCE_INIT;

static void x86_level_find(void)
{
    x86_level = ml__cpu_x86_level();
}
#endif

/* The widest build of the search this CPU runs (whatever ML_KERNELS says:
 * every build writes the same bytes). */
static void rows_here(ml_type t, const float *x, size_t n, const float *imp, uint8_t *out)
{
#if defined(__x86_64__)
    pthread_once(&x86_level_once, x86_level_find);
    switch (x86_level) {
    case 2: ml__kquant_rows_avx512(t, x, n, imp, out); return;
    case 1: ml__kquant_rows_avx2(t, x, n, imp, out); return;
    default: break;
    }
#endif
    kquant_rows(t, x, n, imp, out);
}

void ml__kquant_rows_base(ml_type t, const float *x, size_t n, const float *imp, uint8_t *out)
{
    kquant_rows(t, x, n, imp, out);
}

int ml_quant_block_supported(ml_type type)
{
    int sub;
    return block_of(type, &sub) != NULL;
}

ml_status ml_quantize_row_blocks(ml_type type, const float *x, size_t n, const float *imp,
                                 void *out, ml_error *err)
{
    int sub;
    uint32_t elems, bytes;
    block_fn fn = block_of(type, &sub);
    if (!fn || !ml_type_block(type, &elems, &bytes, NULL))
        return ml__err(err, ML_E_INVAL, "", -1, "type %s: no block quantizer",
                       ml_type_name(type));
    if (n % elems)
        return ml__err(err, ML_E_INVAL, "", -1, "%s: row length %zu is not a multiple of %u",
                       ml_type_name(type), n, elems);
    for (size_t j = 0; imp && j < n; j++)
        if (!(imp[j] >= 0.0f) || !isfinite(imp[j]))
            return ml__err(err, ML_E_INVAL, "", -1,
                           "importance of column %zu is %g, not finite and >= 0", j,
                           (double)imp[j]);
    rows_here(type, x, n, imp, out);
    return ML_OK;
}
