/* probe.c - times one kernel slot of several tables on small synthetic
 * data, for dispatch.c's choice.  The data fit in the L2 cache: what
 * differs between variants on one CPU is how it executes their
 * instructions (Zen 4 splits 512-bit ones in two), not memory, which
 * every variant reads alike.  The tables run in turns, each turn timing
 * each table once, and each keeps its best turn: a burst of noise (another
 * process, an interrupt) then spoils one turn of every table, not all the
 * turns of one. */
#include "kernels/kernels.h"

#include "kernels/fmath.h"

#include "mlcore.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Shapes: small enough that every table's turns together stay short,
 * large enough that a turn is far above the clock's resolution. */
#define P_COLS 2048     /* matvec columns */
#define P_ROWS 64       /* matvec rows (Q8_0: 128 KiB) */
#define P_MM_COLS 512   /* matmul: rows x columns x tokens */
#define P_MM_ROWS 64
#define P_MM_TOK 64     /* above the AMX tiles' and matmul_x's thresholds */
#define P_KEYS 256      /* fmath: a head's keys, */
#define P_HEAD 64       /* its width, */
#define P_HIDDEN 2048   /* and an FFN's hidden width */
#define P_BLK_TYPE ML_TYPE_Q4_K /* the block kernels' slot: the common type */
#define P_BLK_ROWS 128  /* matvec_blk rows (Q4_K: 144 KiB) */
/* matmul_blk times Q6_K too (the K mixes' other type, 27 KiB), whose
 * prompts gain most from the rows in the lanes and Q4_K's least: the two
 * avx512vnni tables differ in that choice alone. */
#define P_BLK_TYPE2 ML_TYPE_Q6_K

typedef struct probe_data {
    int8_t *wq8, *xq;
    uint8_t *wq4, *wblk, *wblk2;
    uint16_t *wd;      /* f16 scales, as in most files */
    float *xd, *x, *y, *keys, *scores;
    void *xt;          /* matmul_x's rearranged activations */
    size_t xt_bytes;
} probe_data;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Deterministic bytes: the values matter only as far as they are typical. */
static void fill_bytes(void *p, size_t n, uint32_t seed)
{
    uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        b[i] = (uint8_t)(seed >> 24);
    }
}

static void fill_floats(float *f, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        f[i] = (float)((int32_t)seed >> 8) * (1.0f / 8388608.0f);
    }
}

static void probe_free(probe_data *d)
{
    free(d->wq8), free(d->xq), free(d->wq4), free(d->wblk), free(d->wblk2), free(d->wd);
    free(d->xd);
    free(d->x), free(d->y), free(d->keys), free(d->scores), free(d->xt);
}

/* The largest matmul_x form any of the tables makes for the probe's matmul. */
static size_t xt_bytes(const ml_kernels *const *ks, size_t n)
{
    size_t most = 0;
    for (size_t i = 0; i < n; i++)
        for (int q4 = 0; q4 <= 1; q4++) {
            const ml_matmul_x *mx = &ks[i]->matmul_x[q4];
            size_t b = mx->bytes ? mx->bytes(q4, P_MM_COLS, P_MM_TOK) : 0;
            most = b > most ? b : most;
        }
    return most;
}

static size_t blk_bytes(void)
{
    return P_BLK_ROWS * ml__blk_row_bytes(P_BLK_TYPE, P_COLS);
}

static size_t blk2_bytes(void)
{
    return P_MM_ROWS * ml__blk_row_bytes(P_BLK_TYPE2, P_MM_COLS);
}

/* n bytes of random blocks of `block` bytes, each with a typical (normal,
 * small) f16 at byte d_at and, where dmin_at >= 0, at dmin_at too: random
 * f16 bits would make subnormals and NaNs, which some CPUs compute
 * slowly. */
static void fill_k_blocks(uint8_t *w, size_t n, size_t block, size_t d_at, int dmin_at,
                          uint32_t seed)
{
    fill_bytes(w, n, seed);
    for (size_t i = 0; i < n / block; i++) {
        const uint16_t d = ml_f32_to_f16(0.001f * (float)(1 + i % 5));
        uint8_t *b = w + block * i;
        b[d_at] = (uint8_t)d, b[d_at + 1] = (uint8_t)(d >> 8);
        if (dmin_at >= 0)
            b[dmin_at] = (uint8_t)d, b[dmin_at + 1] = (uint8_t)(d >> 8);
    }
}

static int probe_alloc(probe_data *d, const ml_kernels *const *ks, size_t n)
{
    const size_t wbytes = (size_t)P_ROWS * P_COLS, xbytes = (size_t)P_MM_TOK * P_MM_COLS;
    memset(d, 0, sizeof *d);
    d->wq8 = aligned_alloc(64, wbytes);
    d->wq4 = aligned_alloc(64, wbytes);
    d->wblk = malloc(blk_bytes());
    d->wblk2 = malloc(blk2_bytes());
    d->wd = malloc(wbytes / 16 * sizeof *d->wd); /* Q4_0: two rows a Q8_0 row's bytes */
    d->xq = aligned_alloc(64, xbytes > P_HIDDEN ? xbytes : P_HIDDEN);
    d->xd = malloc(xbytes / 32 * sizeof *d->xd);
    d->x = aligned_alloc(64, (size_t)P_HIDDEN * 2 * sizeof *d->x);
    d->y = aligned_alloc(64, xbytes * sizeof *d->y);
    d->keys = aligned_alloc(64, (size_t)P_KEYS * P_HEAD * sizeof *d->keys);
    d->scores = aligned_alloc(64, (size_t)P_KEYS * sizeof *d->scores);
    d->xt_bytes = xt_bytes(ks, n);
    d->xt = d->xt_bytes ? aligned_alloc(64, (d->xt_bytes + 63) / 64 * 64) : NULL;
    if (!d->wq8 || !d->wq4 || !d->wblk || !d->wblk2 || !d->wd || !d->xq || !d->xd || !d->x || !d->y ||
        !d->keys || !d->scores || (d->xt_bytes && !d->xt)) {
        probe_free(d);
        return 0;
    }
    fill_bytes(d->wq8, wbytes, 1);
    for (size_t i = 0; i < wbytes; i++)
        d->wq8[i] = d->wq8[i] == -128 ? 127 : d->wq8[i]; /* the loader refuses -128 */
    fill_bytes(d->wq4, wbytes, 2);
    for (size_t i = 0; i < wbytes / 16; i++)
        d->wd[i] = ml_f32_to_f16(0.01f + 0.001f * (float)(i % 7));
    fill_k_blocks(d->wblk, blk_bytes(), 144, 0, 2, 5);      /* Q4_K: d, dmin */
    fill_k_blocks(d->wblk2, blk2_bytes(), 210, 208, -1, 6); /* Q6_K: d */
    fill_floats(d->x, (size_t)P_HIDDEN * 2, 3);
    fill_floats(d->keys, (size_t)P_KEYS * P_HEAD, 4);
    ml__kernels_scalar.quantize_q8_0(d->x, P_HIDDEN, d->xq, d->xd);
    for (size_t t = 1; t < xbytes / P_HIDDEN; t++) { /* the matmul's tokens: copies */
        memcpy(d->xq + t * P_HIDDEN, d->xq, P_HIDDEN);
        memcpy(d->xd + t * P_HIDDEN / 32, d->xd, P_HIDDEN / 32 * sizeof *d->xd);
    }
    return 1;
}

/* matmul as the runtime calls it (parallel.c): through matmul_x where the
 * table has it for these tokens, the rearranging included. */
static void run_matmul(const ml_kernels *k, int q4, probe_data *d)
{
    const ml_wscales wd = {d->wd, 1};
    const ml_matmul_x *mx = &k->matmul_x[q4];
    if (mx->bytes && mx->bytes(q4, P_MM_COLS, P_MM_TOK)) {
        mx->prepare(q4, d->xq, P_MM_COLS, P_MM_TOK, 0, 1, d->xt);
        mx->run(q4, q4 ? (const void *)d->wq4 : d->wq8, wd, P_MM_COLS, 0, P_MM_ROWS, d->xq, d->xt,
                d->xd, P_MM_TOK, d->y, P_MM_ROWS);
    } else if (q4) {
        k->matmul_q4_0(d->wq4, wd, P_MM_COLS, 0, P_MM_ROWS, d->xq, d->xd, P_MM_TOK, d->y,
                       P_MM_ROWS);
    } else {
        k->matmul_q8_0(d->wq8, wd, P_MM_COLS, 0, P_MM_ROWS, d->xq, d->xd, P_MM_TOK, d->y,
                       P_MM_ROWS);
    }
}

/* A decode step's float math for one head and the FFN: scores, softmax,
 * the weighted sum of values, the gated activation. */
static void run_fmath(const ml_fmath *fm, probe_data *d)
{
    const float *q = d->x, *s = d->scores;
    float *out = d->y;
    fm->dots(1, &q, P_KEYS, d->keys, P_HEAD, P_HEAD, d->scores, P_KEYS);
    float top = fm->scale_max(d->scores, P_KEYS, 0.125f);
    fm->exp_norm(d->scores, P_KEYS, top);
    fm->gemm(1, &s, P_KEYS, d->keys, P_HEAD, P_HEAD, 0.0f, &out);
    memcpy(d->y, d->x, P_HIDDEN * sizeof *d->y);
    fm->glu(d->y, d->x + P_HIDDEN, P_HIDDEN, 0);
}

static void run_slot(ml_kslot s, const ml_kernels *k, probe_data *d)
{
    const ml_wscales wd = {d->wd, 1};
    switch (s) {
    case ML_KS_QUANTIZE_Q8_0:
        for (int i = 0; i < 4; i++) /* one row is short: a few make a turn */
            k->quantize_q8_0(d->x, P_HIDDEN, d->xq, d->xd);
        break;
    case ML_KS_MATVEC_Q8_0:
        k->matvec_q8_0(d->wq8, wd, P_COLS, 0, P_ROWS, d->xq, d->xd, d->y);
        break;
    case ML_KS_MATVEC_Q4_0: /* twice the rows: the same bytes as Q8_0's */
        k->matvec_q4_0(d->wq4, wd, P_COLS, 0, 2 * P_ROWS, d->xq, d->xd, d->y);
        break;
    case ML_KS_MATMUL_Q8_0:
    case ML_KS_MATMUL_Q4_0:
        run_matmul(k, s == ML_KS_MATMUL_Q4_0, d);
        break;
    case ML_KS_MATVEC_BLK:
        k->matvec_blk(P_BLK_TYPE, d->wblk, P_COLS, 0, P_BLK_ROWS, d->xq, d->xd, d->y);
        break;
    case ML_KS_MATMUL_BLK:
        k->matmul_blk(P_BLK_TYPE, d->wblk, P_MM_COLS, 0, P_MM_ROWS, d->xq, d->xd, P_MM_TOK, d->y,
                      P_MM_ROWS);
        k->matmul_blk(P_BLK_TYPE2, d->wblk2, P_MM_COLS, 0, P_MM_ROWS, d->xq, d->xd, P_MM_TOK,
                      d->y, P_MM_ROWS);
        break;
    case ML_KS_FMATH:
        for (int i = 0; i < 4; i++)
            run_fmath(k->fmath, d);
        break;
    default:
        break;
    }
}

/* Slot s of each table: its best turn, a table running another's code
 * taking that one's time. */
static void time_slot(ml_kslot s, const ml_kernels *const *ks, size_t n, unsigned reps,
                      probe_data *d, double *secs)
{
    for (size_t i = 0; i < n; i++) { /* untimed: warms the caches and the wide units */
        run_slot(s, ks[i], d);
        secs[i] = 1e30;
    }
    for (unsigned r = 0; r < reps; r++)
        for (size_t i = 0; i < n; i++) {
            double t0 = now();
            run_slot(s, ks[i], d);
            double t = now() - t0;
            secs[i] = t < secs[i] ? t : secs[i];
        }
}

int ml__kernels_probe(const ml_kernels *const *ks, size_t n, unsigned slots, unsigned reps,
                      double (*secs)[ML_PROBE_MAX])
{
    probe_data d;
    if (!probe_alloc(&d, ks, n))
        return 0;
    const ml_kernels *distinct[ML_PROBE_MAX];
    double best[ML_PROBE_MAX];
    for (int s = 0; s < ML_KS_COUNT; s++) {
        if (!(slots & 1u << s))
            continue;
        size_t nd = 0, which[ML_PROBE_MAX];
        for (size_t i = 0; i < n && i < ML_PROBE_MAX; i++) {
            size_t j = 0;
            while (j < nd && !ml__kernels_same((ml_kslot)s, distinct[j], ks[i]))
                j++;
            if (j == nd)
                distinct[nd++] = ks[i];
            which[i] = j;
        }
        time_slot((ml_kslot)s, distinct, nd, reps, &d, best);
        for (size_t i = 0; i < n && i < ML_PROBE_MAX; i++)
            secs[s][i] = best[which[i]];
    }
    probe_free(&d);
    return 1;
}
