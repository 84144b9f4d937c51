/* kernels_x86.h - private: helpers shared by the AVX2 and AVX-512 kernel
 * files, which both compile it with at least -mavx2.  Static inline, so
 * each file gets its own copy built for its own instruction set. */
#ifndef ML_KERNELS_X86_H
#define ML_KERNELS_X86_H

#include "kernels/kernels.h"

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The block-type kernels' entries (blocks_avx2.c, blocks_avx512.c). */
void ml__matvec_blk_avx2(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                         const int8_t *xq, const float *xd, float *y);
void ml__matmul_blk_avx2(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                         const int8_t *xq, const float *xd, size_t n_tok, float *y, size_t ldy);
void ml__matvec_blk_avx512(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                           const int8_t *xq, const float *xd, float *y);
void ml__matmul_blk_avx512(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                           const int8_t *xq, const float *xd, size_t n_tok, float *y,
                           size_t ldy);
/* matmul_blk_x's steps (kernels.h). */
size_t ml__blk_x_bytes_avx2(ml_type t, size_t cols, size_t n_tok);
size_t ml__blk_x_group_avx2(ml_type t, size_t cols, size_t n_tok);
void ml__blk_x_prepare_avx2(ml_type t, const int8_t *xq, const float *xd, size_t cols,
                            size_t n_tok, unsigned part, unsigned parts, void *xt);
void ml__blk_x_run_avx2(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                        const int8_t *xq, const float *xd, const void *xt, size_t n_tok,
                        float *y, size_t ldy);
size_t ml__blk_x_bytes_avx512(ml_type t, size_t cols, size_t n_tok);
size_t ml__blk_x_group_avx512(ml_type t, size_t cols, size_t n_tok);
void ml__blk_x_prepare_avx512(ml_type t, const int8_t *xq, const float *xd, size_t cols,
                              size_t n_tok, unsigned part, unsigned parts, void *xt);
void ml__blk_x_run_avx512(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                          const int8_t *xq, const float *xd, const void *xt, size_t n_tok,
                          float *y, size_t ldy);
/* The same without the rows in the lanes (blocks_avx512.c). */
void ml__matmul_blk_avx512_lanes(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                                 const int8_t *xq, const float *xd, size_t n_tok, float *y,
                                 size_t ldy);
size_t ml__blk_x_bytes_avx512_lanes(ml_type t, size_t cols, size_t n_tok);
size_t ml__blk_x_group_avx512_lanes(ml_type t, size_t cols, size_t n_tok);
void ml__blk_x_prepare_avx512_lanes(ml_type t, const int8_t *xq, const float *xd, size_t cols,
                                    size_t n_tok, unsigned part, unsigned parts, void *xt);
void ml__blk_x_run_avx512_lanes(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                                const int8_t *xq, const float *xd, const void *xt,
                                size_t n_tok, float *y, size_t ldy);
int ml__blk_to_q8_0_avx2(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                         int8_t *q, float *d);
int ml__blk_to_q8_0_avx512(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                           int8_t *q, float *d);
/* blocks_x86.h's blk_unpack, and blk_unpack_k for Q4_K and Q5_K (their
 * sub-blocks' scales and mins at sm), for kernels_amx.c. */
int ml__blk_unpack_avx512(ml_type t, const uint8_t *w, size_t cols, size_t r0, size_t r1,
                          int8_t *q, float *d, float *m, uint8_t *sm);

#define ALWAYS_INLINE static inline __attribute__((always_inline))
/* Loops over registers must be unrolled for the registers to stay registers. */
#define UNROLL _Pragma("GCC unroll 16")

/* Rule 3's fold: ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)). */
ALWAYS_INLINE float fold8(__m256 acc)
{
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

/* Lane k = the sum of the eight lanes of v[k]. */
ALWAYS_INLINE __m256i hsum8x8(const __m256i v[8])
{
    __m256i a[4], b[2];
    UNROLL
    for (int i = 0; i < 4; i++)
        a[i] = _mm256_add_epi32(_mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]),
                                _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
    UNROLL
    for (int i = 0; i < 2; i++)
        b[i] = _mm256_add_epi32(_mm256_unpacklo_epi64(a[2 * i], a[2 * i + 1]),
                                _mm256_unpackhi_epi64(a[2 * i], a[2 * i + 1]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(b[0], b[1], 0x20),
                            _mm256_permute2x128_si256(b[0], b[1], 0x31));
}

/* In place: afterwards v[g] lane k holds dword g of the old v[k]. */
ALWAYS_INLINE void transpose8x8(__m256i v[8])
{
    __m256i t[8], u[8];
    UNROLL
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
    }
    UNROLL
    for (int i = 0; i < 2; i++) {
        u[4 * i + 0] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    UNROLL
    for (int g = 0; g < 4; g++) {
        v[g] = _mm256_permute2x128_si256(u[g], u[g + 4], 0x20);
        v[g + 4] = _mm256_permute2x128_si256(u[g], u[g + 4], 0x31);
    }
}

/* Decode streams every weight once from memory; the hardware prefetcher
 * stops at each 4 KiB page, so the rows ahead are asked for explicitly,
 * so many bytes of quants ahead (scales as many blocks ahead).  How far
 * is the CPU's: ml__prefetch (kernels.h), one profile a process, chosen
 * by dispatch.c.  A prefetch into L1 (T0) holds one of the core's few L1
 * miss buffers until its line arrives, a whole memory latency when it is
 * far ahead; one into L2 (T1) waits in L2's larger queue instead, so one
 * core keeps more lines on the way.  Q8_0 and Q4_0 (and the 32-element
 * block types) ask twice, far ahead into L2 and near into L1, so the far
 * lines are on the way and the near ones in L1 when the loads come; the
 * 256-element types' row dots (rule 6) once, into L2 (into L1 they
 * waited on memory).  A CPU that treats the hints alike loses nothing.
 * A row's last partial group prefetches too: the rows are contiguous, so
 * its lines ahead belong to a later row's first groups, and without it
 * rows whose blocks are no multiple of 8 (640 or 576 columns: Gemma 3,
 * SmolLM2) left one line in five or nine to a demand miss.  (Every
 * distance measured: docs/speed-history.md.) */
#define PREFETCH_Q8_L2 (ml__prefetch.q8_l2)
#define PREFETCH_Q8 (ml__prefetch.q8_l1)
#define PREFETCH_Q4_L2 (ml__prefetch.q4_l2)
#define PREFETCH_Q4 (ml__prefetch.q4_l1)
#define PREFETCH_K (ml__prefetch.k_l2)

/* The `lines` cache lines `ahead` bytes after p, into L1. */
ALWAYS_INLINE void prefetch_ahead(const void *p, size_t ahead, int lines)
{
    const char *a = (const char *)p + ahead;
    UNROLL
    for (int i = 0; i < lines; i++)
        _mm_prefetch(a + 64 * i, _MM_HINT_T0);
}

/* The same into L2. */
ALWAYS_INLINE void prefetch_ahead_l2(const void *p, size_t ahead, int lines)
{
    const char *a = (const char *)p + ahead;
    UNROLL
    for (int i = 0; i < lines; i++)
        _mm_prefetch(a + 64 * i, _MM_HINT_T1);
}

/* Rule 3 for one group: acc + (float)isum * (wd * xd), lane by lane. */
ALWAYS_INLINE __m256 combine(__m256 acc, __m256i isum, __m256 sc)
{
    return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(isum), sc));
}

/* Where scale i of a matrix is stored. */
ALWAYS_INLINE const char *wscale_at(ml_wscales wd, size_t i, int f16)
{
    return (const char *)wd.p + i * (f16 ? 2 : 4);
}

/* For a group of 8 blocks: 256 bytes of Q8_0 quants, 32 or 16 of scales
 * (sc points at the group's first). */
ALWAYS_INLINE void prefetch_q8(const int8_t *w, const char *sc, int f16)
{
    prefetch_ahead_l2(w, PREFETCH_Q8_L2, 4);
    prefetch_ahead(w, PREFETCH_Q8, 4);
    _mm_prefetch(sc + PREFETCH_Q8_L2 / 32 * (f16 ? 2 : 4), _MM_HINT_T1);
    _mm_prefetch(sc + PREFETCH_Q8 / 32 * (f16 ? 2 : 4), _MM_HINT_T0);
}

/* For a group of 8 blocks: 128 bytes of Q4_0 quants, 32 or 16 of scales. */
ALWAYS_INLINE void prefetch_q4(const uint8_t *w, const char *sc, int f16)
{
    prefetch_ahead_l2(w, PREFETCH_Q4_L2, 2);
    prefetch_ahead(w, PREFETCH_Q4, 2);
    _mm_prefetch(sc + PREFETCH_Q4_L2 / 16 * (f16 ? 2 : 4), _MM_HINT_T1);
    _mm_prefetch(sc + PREFETCH_Q4 / 16 * (f16 ? 2 : 4), _MM_HINT_T0);
}

/* Scales i .. i + m - 1 (m <= 8) of a matrix as f32 lanes, +0 after:
 * vcvtph2ps widens f16 exactly, as the reference's ml_f16_to_f32 does. */
ALWAYS_INLINE __m256 wscales8(ml_wscales wd, size_t i, size_t m, int f16)
{
    /* A partial group (the end of a row whose blocks are not a multiple
     * of 8) is gathered in registers: copying it to the stack and loading
     * 16 or 32 bytes back stalled on store forwarding, which doubled the
     * time of a 640-column row (Gemma 3's dim). */
    if (f16) {
        const uint16_t *p = (const uint16_t *)wd.p + i;
        if (m == 8)
            return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
        __m128i v = m >= 4 ? _mm_loadl_epi64((const __m128i *)p) : _mm_setzero_si128();
        switch (m) { /* the lanes 4k and up that remain, by constant lane numbers */
        case 7: v = _mm_insert_epi16(v, p[6], 6); /* fall through */
        case 6: v = _mm_insert_epi16(v, p[5], 5); /* fall through */
        case 5: v = _mm_insert_epi16(v, p[4], 4); break;
        case 3: v = _mm_insert_epi16(v, p[2], 2); /* fall through */
        case 2: v = _mm_insert_epi16(v, p[1], 1); /* fall through */
        case 1: v = _mm_insert_epi16(v, p[0], 0); break;
        default: break;
        }
        return _mm256_cvtph_ps(v);
    }
    const float *p = (const float *)wd.p + i;
    if (m == 8)
        return _mm256_loadu_ps(p);
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)m),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_maskload_ps(p, mask); /* lanes past m read nothing and are +0 */
}

/* The scales of rows r .. r + n - 1 (nb each) as f32: in place for f32
 * files, widened into buf for f16 ones. */
static inline const float *panel_scales(ml_wscales wd, size_t r, size_t n, size_t nb, float *buf)
{
    if (!wd.f16)
        return (const float *)wd.p + r * nb;
    const uint16_t *p = (const uint16_t *)wd.p + r * nb;
    const size_t k = n * nb;
    size_t i = 0;
    for (; i + 8 <= k; i += 8)
        _mm256_storeu_ps(buf + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + i))));
    for (; i < k; i++)
        buf[i] = _cvtsh_ss(p[i]);
    return buf;
}

/* matmul's scratch: all tokens' activations and one panel of rb weight
 * rows, rearranged in transposed groups (XG_BYTES per token and group of
 * 8 blocks, WG_BYTES per row and group), and the panel's scales as f32. */
#define XG_BYTES 288
#define WG_BYTES 256

typedef struct mm_scratch {
    void *base;
    uint8_t *xt;  /* n_tok * ng * XG_BYTES */
    uint8_t *wt;  /* rb * ng * WG_BYTES */
    float *wd;    /* rb * 8 * ng: a panel's widened f16 scales */
} mm_scratch;

static inline int scratch_new(mm_scratch *s, size_t n_tok, size_t ng, size_t rb)
{
    size_t xgroup, xbytes, wbytes, dbytes, total;
    if (__builtin_mul_overflow(ng, (size_t)XG_BYTES, &xgroup) ||
        __builtin_mul_overflow(n_tok, xgroup, &xbytes) ||
        __builtin_mul_overflow(rb, ng * WG_BYTES, &wbytes) ||
        __builtin_mul_overflow(rb * 32, ng, &dbytes) ||
        __builtin_add_overflow(xbytes, wbytes + 63, &total) ||
        __builtin_add_overflow(total, dbytes, &total))
        return 0;
    s->base = aligned_alloc(64, total & ~(size_t)63); /* a multiple of the alignment */
    if (!s->base)
        return 0;
    s->xt = s->base;
    s->wt = s->xt + xbytes;
    s->wd = (float *)(void *)(s->wt + wbytes);
    return 1;
}

/* The 32 elements of a Q4_0 block as unsigned nibbles in natural order. */
ALWAYS_INLINE __m256i q4_unpack(const uint8_t *w)
{
    const __m128i b = _mm_loadu_si128((const __m128i *)w);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(15));
}

ALWAYS_INLINE void store8(uint8_t *dst, const __m256i v[8])
{
    UNROLL
    for (int g = 0; g < 8; g++)
        _mm256_store_si256((__m256i *)(dst + 32 * g), v[g]);
}

/* ---- Q4_0 decode with the activation regrouped once per product ----
 *
 * One 32-byte load holds two blocks' nibble bytes; masking gives the low
 * nibbles of both (elements 0..15 of each) and the high ones (16..31).
 * Rather than regroup those per block for every row, the activation is
 * regrouped the same way once: for blocks 2k and 2k+1, 64 bytes of
 * x[2k][0..15], x[2k+1][0..15], x[2k][16..31], x[2k+1][16..31].  A pair
 * then gives one register of int32 partial sums (lanes 0-3 block 2k, 4-7
 * block 2k+1), and three vphaddd fold a group's four pairs into one
 * register holding blocks 0, 2, 4, 6, 1, 3, 5, 7: lane order PAIR_ORDER.
 * The float side works in that order throughout (scales permuted to
 * match) and the accumulator goes back to block order for rule 3's fold:
 * the same operations on the same values as the reference. */
#define PAIR_COLS 16384 /* longer rows take the per-block path (stack use stays ~16 KiB) */
#define PAIR_ORDER 0, 2, 4, 6, 1, 3, 5, 7
#define PAIR_INVERSE 0, 4, 1, 5, 2, 6, 3, 7

typedef struct q4_pairs {
    int8_t x[PAIR_COLS];                 /* the regrouped activation */
    __m256i corr[PAIR_COLS / 256];       /* -8·Σx per block, pair order */
    __m256 xd[PAIR_COLS / 256];          /* activation scales, pair order */
} q4_pairs;

/* Fills x and xd of qp (nb <= PAIR_COLS / 32 blocks); corr is the
 * caller's. */
static inline void q4_pairs_regroup(q4_pairs *qp, const int8_t *x, const float *xd, size_t nb)
{
    const __m256i order = _mm256_setr_epi32(PAIR_ORDER);
    for (size_t b = 0; b < nb; b += 2) {
        int8_t *dst = qp->x + 32 * b;
        const int8_t *x0 = x + 32 * b;
        memcpy(dst, x0, 16);
        memcpy(dst + 32, x0 + 16, 16);
        if (b + 1 < nb) {
            memcpy(dst + 16, x0 + 32, 16);
            memcpy(dst + 48, x0 + 48, 16);
        } else {
            memset(dst + 16, 0, 16);
            memset(dst + 48, 0, 16);
        }
    }
    for (size_t j = 0; j < (nb + 7) / 8; j++) {
        const size_t m = nb - 8 * j < 8 ? nb - 8 * j : 8;
        float part[8] = {0};
        memcpy(part, xd + 8 * j, 4 * m);
        qp->xd[j] = _mm256_permutevar8x32_ps(_mm256_loadu_ps(part), order);
    }
}

/* The two blocks' nibble bytes at w as (low nibbles, high nibbles); with
 * `one`, only the first block's 16 bytes are read and the second's lanes
 * are zero. */
ALWAYS_INLINE void q4_pair_nibbles(const uint8_t *w, int one, __m256i *lo, __m256i *hi)
{
    const __m256i b = one ? _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)w))
                          : _mm256_loadu_si256((const __m256i *)w);
    const __m256i m4 = _mm256_set1_epi8(15);
    *lo = _mm256_and_si256(b, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m4);
}

/* Four pairs' partial-sum registers to the group's block sums, pair order. */
ALWAYS_INLINE __m256i q4_pairs_fold(const __m256i p[4])
{
    return _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
}

#endif
