/* kv_cache.h - private: the KV cache's element types (ml_cache_type) as
 * bytes: where a row's values lie, and how a row of floats is stored as
 * the cache holds it and read back as floats (kv_cache.c). */
#ifndef ML_KV_CACHE_H
#define ML_KV_CACHE_H

#include "kernels/fmath.h"
#include <mlcore/runtime.h>

#include <stddef.h>
#include <stdint.h>

/* A Q8_0 and a Q4_0 block of the cache: the spec's quants of 32 values
 * (quant.h's layouts) after their f32 scale. */
typedef struct ml_kv_q8 {
    float d;
    int8_t q[32];
} ml_kv_q8;
typedef struct ml_kv_q4 {
    float d;
    uint8_t qs[16];
} ml_kv_q4;

/* 1 for the types stored in blocks of 32 (Q8_0, Q4_0). */
static inline int ml__kv_blocked(ml_cache_type t)
{
    return t == ML_CACHE_Q8_0 || t == ML_CACHE_Q4_0;
}

/* Bytes of n values of type t (n a multiple of 32 for blocked types). */
static inline size_t ml__kv_bytes(ml_cache_type t, size_t n)
{
    switch (t) {
    case ML_CACHE_F16: return n * 2;
    case ML_CACHE_Q8_0: return n / 32 * sizeof(ml_kv_q8);
    case ML_CACHE_Q4_0: return n / 32 * sizeof(ml_kv_q4);
    default: return n * 4;
    }
}

/* Value i of a row of type t at p (i a multiple of 32 for blocked types). */
static inline const void *ml__kv_at(const void *p, size_t i, ml_cache_type t)
{
    return (const char *)p + ml__kv_bytes(t, i);
}

/* n floats (a multiple of 32 for blocked types) as type t into out:
 * fm's to_f16 for F16, the spec's reference quantizers for Q8_0 and
 * Q4_0 (the same bits whatever the kernels), a copy for F32. */
void ml__kv_store(const ml_fmath *fm, ml_cache_type t, void *out, const float *x, size_t n);
/* n values of a blocked type (n a multiple of 32) back to floats: q·d,
 * (nibble − 8)·d, one float multiplication each. */
void ml__kv_load(ml_cache_type t, float *y, const void *in, size_t n);

/* The orthonormal Walsh-Hadamard transform of each block of 32 of x[0..n)
 * (n a multiple of 32), in place; its own inverse.  Keys, queries and
 * values go through it before a blocked cache holds them, as llama.cpp
 * rotates them: q·k and the weighted sum of values are the same up to
 * rounding, and an outlying component is spread over its block instead
 * of setting the block's scale alone.  A fixed order of float
 * operations, the same bits on every CPU. */
void ml__kv_rotate(float *x, size_t n);

#endif
