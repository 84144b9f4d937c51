/* quant_matrix.c - quantizing whole matrices into the two arrays .mlb
 * stores (quants, then scales in the file's encoding), checking the input
 * and splitting the rows over threads.
 *
 * Rows are independent, so threads only decide who computes a row, never
 * what it holds: the bytes are the same for any thread count.  Errors are
 * deterministic too: each worker stops at its first bad row, workers skip
 * only rows after the earliest bad row found so far, and the earliest of
 * all is reported, so the message never depends on scheduling. */
#include "quant/quant_impl.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define QK ML_QK
#define ML__MAX_THREADS 1024u

typedef struct job {
    const float *x;
    size_t rows, cols;
    const ml_quant_opts *o;
    uint8_t *q, *s;          /* outputs */
    size_t q_row, s_row;     /* bytes per row in each */
    size_t chunk;            /* rows handed out at a time */
    atomic_size_t next;      /* first row of the next chunk */
    atomic_size_t fail_row;  /* earliest bad row so far; SIZE_MAX: none */
} job;

typedef struct worker {
    job *j;
    pthread_t tid;
    int started;
    ml_status st;
    size_t row;              /* the bad row when st != ML_OK */
    ml_error err;
} worker;

static const char *tensor_name(const ml_quant_opts *o)
{
    return o->name ? o->name : "";
}

/* ---- one row ---- */

static ml_status check_finite(const job *j, const float *x, size_t r, ml_error *err)
{
    for (size_t c = 0; c < j->cols; c++)
        if (!isfinite(x[c]))
            return ml__err(err, ML_E_FORMAT, tensor_name(j->o), -1,
                           "row %zu, column %zu: %g is not a finite weight", r, c, (double)x[c]);
    return ML_OK;
}

static ml_status scale_too_big(const job *j, size_t r, size_t b, float d, ml_error *err)
{
    return ml__err(err, ML_E_UNSUPPORTED, tensor_name(j->o), -1,
                   "row %zu, columns %zu-%zu: the scale %g is above 65504, the largest f16", r,
                   b * QK, b * QK + QK - 1, (double)d);
}

/* Stores block b's scale in the file's encoding. */
static ml_status put_scale(const job *j, uint8_t *s, size_t r, size_t b, float d, ml_error *err)
{
    if (!j->o->scale_f16) {
        ml__wrf32(s + 4 * b, d);
        return ML_OK;
    }
    uint16_t h = ml_f32_to_f16(d);
    if ((h & 0x7fff) == 0x7c00)
        return scale_too_big(j, r, b, d, err);
    s[2 * b] = (uint8_t)h;
    s[2 * b + 1] = (uint8_t)(h >> 8);
    return ML_OK;
}

static ml_status row_q8(const job *j, const float *x, uint8_t *q, uint8_t *s, size_t r,
                        ml_error *err)
{
    for (size_t b = 0; b < j->cols / QK; b++) {
        int8_t *qb = (int8_t *)(q + b * QK);
        if (!j->o->scale_f16) {
            float d;
            ml__q8_block(x + b * QK, qb, &d);
            ml__wrf32(s + 4 * b, d);
            continue;
        }
        uint16_t h;
        float big;
        if (ml__q8_block_f16(x + b * QK, qb, &h, &big))
            return scale_too_big(j, r, b, big, err);
        s[2 * b] = (uint8_t)h;
        s[2 * b + 1] = (uint8_t)(h >> 8);
    }
    return ML_OK;
}

static ml_status row_q4(const job *j, const float *x, uint8_t *q, uint8_t *s, size_t r,
                        ml_error *err)
{
    const float *imp = j->o->imp;
    double s2 = imp ? ml__row_mean_sq(x, j->cols) : 0.0;
    for (size_t b = 0; b < j->cols / QK; b++) {
        float d;
        if (j->o->q4_rule == ML_Q4_ROUND)
            ml__q4_round_block(x + b * QK, q + b * (QK / 2), &d);
        else
            ml__q4_fit_block(x + b * QK, imp ? imp + b * QK : NULL, s2, q + b * (QK / 2), &d);
        ml_status st = put_scale(j, s, r, b, d, err);
        if (st)
            return st;
    }
    return ML_OK;
}

static ml_status do_row(const job *j, size_t r, ml_error *err)
{
    const float *x = j->x + r * j->cols;
    ml_status st = check_finite(j, x, r, err);
    if (st)
        return st;
    uint8_t *q = j->q + r * j->q_row, *s = j->s + r * j->s_row;
    if (j->o->type == ML_TYPE_Q8_0)
        return row_q8(j, x, q, s, r, err);
    return row_q4(j, x, q, s, r, err);
}

/* ---- workers ---- */

/* fail_row = min(fail_row, r) */
static void note_failure(job *j, size_t r)
{
    size_t cur = atomic_load(&j->fail_row);
    while (r < cur && !atomic_compare_exchange_weak(&j->fail_row, &cur, r))
        ;
}

static void *work(void *arg)
{
    worker *w = arg;
    job *j = w->j;
    for (;;) {
        size_t start = atomic_fetch_add(&j->next, j->chunk);
        /* Chunks are handed out in row order: once one starts after the
         * earliest failure, so do all later ones. */
        if (start >= j->rows || start > atomic_load(&j->fail_row))
            return NULL;
        size_t end = j->rows - start < j->chunk ? j->rows : start + j->chunk;
        for (size_t r = start; r < end; r++) {
            if (r > atomic_load(&j->fail_row))
                return NULL;
            ml_status st = do_row(j, r, &w->err);
            if (st) {
                w->st = st;
                w->row = r;
                note_failure(j, r);
                return NULL;
            }
        }
    }
}

/* Runs the job on n workers, the calling thread being the first.  A
 * thread that cannot be started leaves its share to the others. */
static ml_status run_job(job *j, unsigned n, ml_error *err)
{
    worker *ws = calloc(n, sizeof *ws);
    if (!ws)
        return ml__err(err, ML_E_NOMEM, tensor_name(j->o), -1,
                       "cannot allocate %u thread records", n);
    for (unsigned i = 0; i < n; i++)
        ws[i].j = j;
    for (unsigned i = 1; i < n; i++)
        ws[i].started = pthread_create(&ws[i].tid, NULL, work, &ws[i]) == 0;
    work(&ws[0]);
    for (unsigned i = 1; i < n; i++)
        if (ws[i].started)
            pthread_join(ws[i].tid, NULL);
    const worker *first = NULL;
    for (unsigned i = 0; i < n; i++)
        if (ws[i].st && (!first || ws[i].row < first->row))
            first = &ws[i];
    ml_status st = ML_OK;
    if (first) {
        st = first->st;
        if (err)
            *err = first->err;
    }
    free(ws);
    return st;
}

/* ---- checks and entry points ---- */

ml_status ml_quant_sizes(ml_type type, int scale_f16, uint64_t rows, uint64_t cols,
                         size_t *quant_bytes, size_t *scale_bytes, ml_error *err)
{
    if (type != ML_TYPE_Q8_0 && type != ML_TYPE_Q4_0)
        return ml__err(err, ML_E_INVAL, "", -1, "type %d is not Q8_0 or Q4_0", (int)type);
    if (cols % QK)
        return ml__err(err, ML_E_INVAL, "", -1, "%llu columns are not a multiple of 32",
                       (unsigned long long)cols);
    uint64_t n, qb, sb;
    size_t qz, sz;
    if (ml__mul64(rows, cols, &n))
        return ml__err(err, ML_E_NOMEM, "", -1, "%llu x %llu elements overflow 64 bits",
                       (unsigned long long)rows, (unsigned long long)cols);
    qb = type == ML_TYPE_Q8_0 ? n : n / 2;
    sb = n / QK * (scale_f16 ? 2 : 4);
    if (ml__to_size(qb, &qz) || ml__to_size(sb, &sz))
        return ml__err(err, ML_E_NOMEM, "", -1, "%llu x %llu matrix does not fit in memory",
                       (unsigned long long)rows, (unsigned long long)cols);
    if (quant_bytes)
        *quant_bytes = qz;
    if (scale_bytes)
        *scale_bytes = sz;
    return ML_OK;
}

static ml_status check_opts(const ml_quant_opts *o, size_t cols, ml_error *err)
{
    const char *name = tensor_name(o);
    if (o->scale_f16 != 0 && o->scale_f16 != 1)
        return ml__err(err, ML_E_INVAL, name, -1, "scale_f16 is %d, not 0 or 1", o->scale_f16);
    if (o->type != ML_TYPE_Q4_0)
        return ML_OK;
    if (o->q4_rule != ML_Q4_FIT && o->q4_rule != ML_Q4_ROUND)
        return ml__err(err, ML_E_INVAL, name, -1, "unknown Q4_0 rule %d", (int)o->q4_rule);
    if (!o->imp)
        return ML_OK;
    if (o->q4_rule == ML_Q4_ROUND)
        return ml__err(err, ML_E_INVAL, name, -1,
                       "importances apply to the fit rule, not to --q4-rule round");
    for (size_t c = 0; c < cols; c++)
        if (!(o->imp[c] > 0.0f) || !isfinite(o->imp[c]))
            return ml__err(err, ML_E_INVAL, name, -1,
                           "importance of column %zu is %g, not a positive finite number", c,
                           (double)o->imp[c]);
    return ML_OK;
}

ml_status ml_quantize_matrix(const float *x, size_t rows, size_t cols, const ml_quant_opts *o,
                             void *quants, size_t quant_bytes, void *scales, size_t scale_bytes,
                             ml_error *err)
{
    if (!o)
        return ml__err(err, ML_E_INVAL, "", -1, "no options");
    size_t qz, sz;
    ml_error e;
    ml_status st = ml_quant_sizes(o->type, o->scale_f16, rows, cols, &qz, &sz, &e);
    if (st)
        return ml__err(err, st, tensor_name(o), -1, "%s", e.msg);
    if ((st = check_opts(o, cols, err)))
        return st;
    uint64_t n_in, in_bytes;
    size_t unused;
    if (ml__mul64(rows, cols, &n_in) || ml__mul64(n_in, sizeof(float), &in_bytes) ||
        ml__to_size(in_bytes, &unused))
        return ml__err(err, ML_E_NOMEM, tensor_name(o), -1, "the input does not fit in memory");
    if (quant_bytes != qz || scale_bytes != sz)
        return ml__err(err, ML_E_INVAL, tensor_name(o), -1,
                       "buffers of %zu and %zu bytes, expected %zu bytes of quants and %zu of "
                       "scales",
                       quant_bytes, scale_bytes, qz, sz);
    if (!rows || !cols)
        return ML_OK;
    if (!x || !quants || !scales)
        return ml__err(err, ML_E_INVAL, tensor_name(o), -1, "NULL buffer");

    job j = {.x = x, .rows = rows, .cols = cols, .o = o, .q = quants, .s = scales,
             .q_row = o->type == ML_TYPE_Q8_0 ? cols : cols / 2,
             .s_row = cols / QK * (o->scale_f16 ? 2 : 4)};
    unsigned n = o->threads ? o->threads : 1;
    if (n > ML__MAX_THREADS)
        n = ML__MAX_THREADS;
    if (n > rows)
        n = (unsigned)rows;
    /* About eight chunks per thread: enough to even out the load. */
    j.chunk = rows / ((size_t)n * 8);
    if (j.chunk == 0)
        j.chunk = 1;
    atomic_init(&j.next, 0);
    atomic_init(&j.fail_row, SIZE_MAX);
    return run_job(&j, n, err);
}

/* ===========================================================================
 * Quantization error (ml-quant --stats)
 * ========================================================================= */

/* Scale k of a row in the file's encoding. */
static float file_scale(const uint8_t *s, size_t k, int scale_f16)
{
    return scale_f16 ? ml_f16_to_f32(ml__rd16(s + 2 * k)) : ml__rdf32(s + 4 * k);
}

void ml_quant_error_add(ml_quant_error *e, const float *x, size_t rows, size_t cols, ml_type type,
                        int scale_f16, const void *quants, const void *scales)
{
    const uint8_t *q = quants, *s = scales;
    size_t qrow = type == ML_TYPE_Q8_0 ? cols : cols / 2, srow = cols / QK * (scale_f16 ? 2 : 4);
    for (size_t r = 0; r < rows; r++, q += qrow, s += srow)
        for (size_t c = 0; c < cols; c++) {
            float d = file_scale(s, c / QK, scale_f16), y;
            if (type == ML_TYPE_Q8_0) {
                y = (float)(int8_t)q[c] * d;
            } else {
                uint8_t b = q[(c / QK) * 16 + (c % QK) % 16];
                y = (float)(((c % QK) < 16 ? b & 15 : b >> 4) - 8) * d;
            }
            double v = x[r * cols + c], err = fabs((double)y - v);
            e->sse += err * err;
            e->ssq += v * v;
            if (err > e->max_abs)
                e->max_abs = err;
        }
    e->n += (uint64_t)rows * cols;
}

void ml_quant_error_merge(ml_quant_error *dst, const ml_quant_error *src)
{
    dst->n += src->n;
    dst->sse += src->sse;
    dst->ssq += src->ssq;
    if (src->max_abs > dst->max_abs)
        dst->max_abs = src->max_abs;
}
