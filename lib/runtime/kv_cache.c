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

/* One block's values (the arithmetic of quant.h's dequantizers), its
 * scale and quants taken first: y may not alias them, so the compiler
 * vectorizes the 32 (a call per block cost a tenth of a prompt's time
 * with a q8_0 cache). */
static void load_q8(const ml_kv_q8 *blk, float *restrict y)
{
    const float d = blk->d;
    int8_t q[32];
    memcpy(q, blk->q, sizeof q);
    for (int i = 0; i < 32; i++)
        y[i] = (float)q[i] * d;
}

static void load_q4(const ml_kv_q4 *blk, float *restrict y)
{
    const float d = blk->d;
    uint8_t qs[16];
    memcpy(qs, blk->qs, sizeof qs);
    for (int i = 0; i < 16; i++) {
        y[i] = (float)((qs[i] & 0x0f) - 8) * d;
        y[i + 16] = (float)((qs[i] >> 4) - 8) * d;
    }
}

void ml__kv_load(ml_cache_type t, float *y, const void *in, size_t n)
{
    for (size_t b = 0; b < n / 32; b++) {
        if (t == ML_CACHE_Q8_0)
            load_q8((const ml_kv_q8 *)in + b, y + 32 * b);
        else if (t == ML_CACHE_Q4_0)
            load_q4((const ml_kv_q4 *)in + b, y + 32 * b);
    }
}

void ml__kv_rotate(float *x, size_t n)
{
    const float norm = 0.17677669529663687f; /* 1 / sqrt(32) */
    for (size_t b = 0; b < n / 32; b++) {
        float *v = x + 32 * b;
        for (int h = 1; h < 32; h *= 2)
            for (int i = 0; i < 32; i += 2 * h)
                for (int j = i; j < i + h; j++) {
                    const float a = v[j], c = v[j + h];
                    v[j] = a + c;
                    v[j + h] = a - c;
                }
        for (int i = 0; i < 32; i++)
            v[i] *= norm;
    }
}
