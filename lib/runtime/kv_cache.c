/* kv_cache.c - a KV cache row stored as its ml_cache_type holds it and
 * read back: f16 by the float math's conversion, Q8_0 and Q4_0 by the
 * spec's reference quantizers, a block at a time (the blocks of a row
 * lie one after the other, each scale before its quants). */
#include "runtime/kv_cache.h"

#include <mlcore/quant.h>

#include <string.h>

_Static_assert(sizeof(ml_kv_q8) == 36, "a Q8_0 cache block is 36 bytes");
_Static_assert(sizeof(ml_kv_q4) == 20, "a Q4_0 cache block is 20 bytes");

void ml__kv_store(const ml_fmath *fm, ml_cache_type t, void *out, const float *x, size_t n)
{
    switch (t) {
    case ML_CACHE_F16: fm->to_f16(out, x, n); return;
    case ML_CACHE_Q8_0:
        for (size_t b = 0; b < n / 32; b++) {
            ml_kv_q8 *blk = (ml_kv_q8 *)out + b;
            ml_quantize_row_q8_0(x + 32 * b, 32, blk->q, &blk->d);
        }
        return;
    case ML_CACHE_Q4_0:
        /* llama.cpp's rounding, not the fit search: a cache row is
         * quantized once per token and layer, on the way */
        for (size_t b = 0; b < n / 32; b++) {
            ml_kv_q4 *blk = (ml_kv_q4 *)out + b;
            ml_quantize_row_q4_0_round(x + 32 * b, 32, blk->qs, &blk->d);
        }
        return;
    default: memcpy(out, x, n * sizeof(float)); return;
    }
}

void ml__kv_load(ml_cache_type t, float *y, const void *in, size_t n)
{
    for (size_t b = 0; b < n / 32; b++) {
        if (t == ML_CACHE_Q8_0) {
            const ml_kv_q8 *blk = (const ml_kv_q8 *)in + b;
            ml_dequantize_row_q8_0(blk->q, &blk->d, 32, y + 32 * b);
        } else if (t == ML_CACHE_Q4_0) {
            const ml_kv_q4 *blk = (const ml_kv_q4 *)in + b;
            ml_dequantize_row_q4_0(blk->qs, &blk->d, 32, y + 32 * b);
        }
    }
}
