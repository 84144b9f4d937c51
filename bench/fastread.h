/* fastread.h - the fastest way this CPU reads memory, shared by
 * bench-bound.c (the weights' pages, next to each decoded token) and
 * bandwidth.c (a large array): both must measure the same best read, or
 * a "bound" can be beaten by the decode it bounds.  sum_bytes(p, n) sums
 * n bytes; choose_sum() picks the widest loads (BENCH_BOUND_READ=words,
 * avx2 or avx512 forces one), sum_name() says which.  CHUNK is the piece
 * that threads take from a shared counter.  Included once per program. */
#ifndef ML_BENCH_FASTREAD_H
#define ML_BENCH_FASTREAD_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The read side must be a bound: at least as fast as any way of reading
 * these bytes, or "tokens/s against the bound" exceeds 1 (it did, where
 * a word-at-a-time loop read slower than decode).
 * So: the widest loads the CPU has (AVX-512, AVX2, else 16-byte words the
 * compiler vectorizes), four independent sums, software prefetch
 * PREFETCH bytes ahead as the kernels do, and the threads taking CHUNK-
 * byte pieces from a shared counter, so that one started late or
 * preempted by a neighbour does not leave the others idle at the end. */
#define CHUNK (256u << 10)
#ifndef PREFETCH
#define PREFETCH 2048
#endif

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx512f"))) static uint64_t sum_avx512(const uint8_t *p, size_t n)
{
    __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
    size_t i = 0;
    for (; i + 256 <= n; i += 256) {
        _mm_prefetch((const char *)p + i + PREFETCH, _MM_HINT_T0);
        _mm_prefetch((const char *)p + i + PREFETCH + 64, _MM_HINT_T0);
        _mm_prefetch((const char *)p + i + PREFETCH + 128, _MM_HINT_T0);
        _mm_prefetch((const char *)p + i + PREFETCH + 192, _MM_HINT_T0);
        a = _mm512_add_epi64(a, _mm512_loadu_si512(p + i));
        b = _mm512_add_epi64(b, _mm512_loadu_si512(p + i + 64));
        c = _mm512_add_epi64(c, _mm512_loadu_si512(p + i + 128));
        d = _mm512_add_epi64(d, _mm512_loadu_si512(p + i + 192));
    }
    uint64_t s = (uint64_t)_mm512_reduce_add_epi64(_mm512_add_epi64(_mm512_add_epi64(a, b),
                                                                    _mm512_add_epi64(c, d)));
    for (; i < n; i++)
        s += p[i];
    return s;
}

__attribute__((target("avx2"))) static uint64_t sum_avx2(const uint8_t *p, size_t n)
{
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    size_t i = 0;
    for (; i + 128 <= n; i += 128) {
        _mm_prefetch((const char *)p + i + PREFETCH, _MM_HINT_T0);
        _mm_prefetch((const char *)p + i + PREFETCH + 64, _MM_HINT_T0);
        a = _mm256_add_epi64(a, _mm256_loadu_si256((const __m256i *)(p + i)));
        b = _mm256_add_epi64(b, _mm256_loadu_si256((const __m256i *)(p + i + 32)));
        c = _mm256_add_epi64(c, _mm256_loadu_si256((const __m256i *)(p + i + 64)));
        d = _mm256_add_epi64(d, _mm256_loadu_si256((const __m256i *)(p + i + 96)));
    }
    uint64_t w[4];
    _mm256_storeu_si256((__m256i *)w, _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d)));
    uint64_t s = w[0] + w[1] + w[2] + w[3];
    for (; i < n; i++)
        s += p[i];
    return s;
}
#endif

/* Portable: 64 bytes a round into four 16-byte vectors of GCC's vector
 * extension (SSE2 on x86, NEON on ARM), about as fast as AVX2 where both
 * were measured; a plain loop over eight words read far slower than
 * AVX-512. */
typedef uint64_t u64x2 __attribute__((vector_size(16)));

static uint64_t sum_words(const uint8_t *p, size_t n)
{
    u64x2 a = {0, 0}, b = a, c = a, d = a, w[4];
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __builtin_prefetch(p + i + PREFETCH);
        memcpy(w, p + i, 64);
        a += w[0], b += w[1], c += w[2], d += w[3];
    }
    u64x2 t = a + b + c + d;
    uint64_t s = t[0] + t[1];
    for (; i < n; i++)
        s += p[i];
    return s;
}

static uint64_t (*sum_bytes)(const uint8_t *, size_t) = sum_words;

/* The widest the CPU has, or what BENCH_BOUND_READ names (words, avx2,
 * avx512: to compare them). */
static void choose_sum(void)
{
    const char *want = getenv("BENCH_BOUND_READ");
    want = want ? want : "";
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && (!*want || !strcmp(want, "avx512")))
        sum_bytes = sum_avx512;
    else if (__builtin_cpu_supports("avx2") && (!*want || !strcmp(want, "avx2")))
        sum_bytes = sum_avx2;
#endif
}

static inline const char *sum_name(void)
{
#if defined(__x86_64__)
    if (sum_bytes == sum_avx512)
        return "avx512";
    if (sum_bytes == sum_avx2)
        return "avx2";
#endif
    return "words";
}

#endif
