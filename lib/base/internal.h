/* internal.h - helpers shared by the library's files; never installed.
 * Overflow-checked size arithmetic, little-endian loads and stores, and the
 * one function that fills an ml_error. */
#ifndef ML_INTERNAL_H
#define ML_INTERNAL_H

#include "mlcore.h"

#include <stdarg.h>
#include <stdint.h>
#include <string.h>

/* Checked arithmetic: return 1 on overflow, else store the result. */
static inline int ml__mul64(uint64_t a, uint64_t b, uint64_t *r)
{
    return __builtin_mul_overflow(a, b, r);
}
static inline int ml__add64(uint64_t a, uint64_t b, uint64_t *r)
{
    return __builtin_add_overflow(a, b, r);
}
/* A 64-bit size as size_t, failing where size_t is narrower. */
static inline int ml__to_size(uint64_t v, size_t *r)
{
    if (v > (uint64_t)SIZE_MAX)
        return 1;
    *r = (size_t)v;
    return 0;
}
/* Rounds up to a multiple of a (a power of two); 1 on overflow. */
static inline int ml__align_up(uint64_t v, uint64_t a, uint64_t *r)
{
    if (ml__add64(v, a - 1, r))
        return 1;
    *r &= ~(a - 1);
    return 0;
}

static inline uint32_t ml__rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t ml__rd64(const uint8_t *p)
{
    return (uint64_t)ml__rd32(p) | (uint64_t)ml__rd32(p + 4) << 32;
}
static inline uint16_t ml__rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}
static inline float ml__rdf32(const uint8_t *p)
{
    uint32_t u = ml__rd32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline void ml__wr32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}
static inline void ml__wr16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void ml__wr64(uint8_t *p, uint64_t v)
{
    ml__wr32(p, (uint32_t)v);
    ml__wr32(p + 4, (uint32_t)(v >> 32));
}
static inline void ml__wrf32(uint8_t *p, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    ml__wr32(p, u);
}
static inline uint32_t ml__f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Fills err (if non-NULL): code, field, offset (-1 for none) and a message
 * "FIELD (offset N): detail" built from fmt.  Returns code. */
ml_status ml__err(ml_error *err, ml_status code, const char *field, int64_t offset,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* A 4-byte magic for messages: printable ASCII as is, anything else (and
 * backslash and quote) as \xNN.  out holds at least 17 bytes. */
void ml__magic_shown(const uint8_t m[4], char out[17]);

/* Same for ML_E_IO with errno kept: "what: strerror(errno)". */
ml_status ml__err_io(ml_error *err, const char *what, int64_t offset);

#endif
