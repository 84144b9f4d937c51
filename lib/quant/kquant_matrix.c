/* kquant_matrix.c - whole matrices in ggml's block types: the checks,
 * the rows of ml_quantize_row_blocks split over threads, and the error
 * report of such a matrix.  Rows are independent, so threads only decide
 * who computes a row: the bytes are the same for any thread count. */
#include "quant/quant_impl.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define MAX_THREADS 1024u

typedef struct bjob {
    ml_type type;
    const float *x, *imp;
    size_t rows, cols, row_bytes;
    uint8_t *out;
    atomic_size_t next; /* the next row to take */
} bjob;

static void *bwork(void *arg)
{
    bjob *j = arg;
    for (;;) {
        size_t r = atomic_fetch_add(&j->next, 1);
        if (r >= j->rows)
            return NULL;
        /* Cannot fail: the arguments were checked for every row at once. */
        ml_quantize_row_blocks(j->type, j->x + r * j->cols, j->cols, j->imp,
                               j->out + r * j->row_bytes, NULL);
    }
}

/* The first non-finite value in row order, refused as ml_quantize_matrix
 * refuses it: weights with a NaN make an invalid model. */
static ml_status check_values(const float *x, size_t rows, size_t cols, const char *name,
                              ml_error *err)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            if (!isfinite(x[r * cols + c]))
                return ml__err(err, ML_E_FORMAT, name, -1,
                               "row %zu, column %zu: %g is not a finite weight", r, c,
                               (double)x[r * cols + c]);
    return ML_OK;
}

ml_status ml_quant_block_bytes(ml_type type, uint64_t rows, uint64_t cols, size_t *bytes,
                               ml_error *err)
{
    uint32_t elems, bb;
    if (!ml_quant_block_supported(type) || !ml_type_block(type, &elems, &bb, NULL))
        return ml__err(err, ML_E_INVAL, "", -1, "type %s: no block quantizer",
                       ml_type_name(type));
    if (cols % elems)
        return ml__err(err, ML_E_INVAL, "", -1, "%s: %llu columns are not a multiple of %u",
                       ml_type_name(type), (unsigned long long)cols, elems);
    uint64_t n;
    size_t z;
    if (ml__mul64(rows, cols / elems, &n) || ml__mul64(n, bb, &n) || ml__to_size(n, &z))
        return ml__err(err, ML_E_NOMEM, "", -1, "%llu x %llu matrix does not fit in memory",
                       (unsigned long long)rows, (unsigned long long)cols);
    if (bytes)
        *bytes = z;
    return ML_OK;
}

ml_status ml_quantize_matrix_blocks(ml_type type, const float *x, size_t rows, size_t cols,
                                    const float *imp, unsigned threads, const char *name,
                                    void *out, size_t out_bytes, ml_error *err)
{
    size_t want;
    ml_error e;
    const char *field = name ? name : "";
    ml_status st = ml_quant_block_bytes(type, rows, cols, &want, &e);
    if (st)
        return ml__err(err, st, field, -1, "%s", e.msg);
    if (out_bytes != want)
        return ml__err(err, ML_E_INVAL, field, -1, "a buffer of %zu bytes, expected %zu",
                       out_bytes, want);
    if (!rows || !cols)
        return ML_OK;
    if (!x || !out)
        return ml__err(err, ML_E_INVAL, field, -1, "NULL buffer");
    for (size_t c = 0; imp && c < cols; c++)
        if (!(imp[c] >= 0.0f) || !isfinite(imp[c]))
            return ml__err(err, ML_E_INVAL, field, -1,
                           "importance of column %zu is %g, not finite and >= 0", c,
                           (double)imp[c]);
    if ((st = check_values(x, rows, cols, field, err)))
        return st;

    bjob j = {.type = type, .x = x, .imp = imp, .rows = rows, .cols = cols,
              .row_bytes = want / rows, .out = out};
    atomic_init(&j.next, 0);
    unsigned n = threads ? threads : 1;
    if (n > MAX_THREADS)
        n = MAX_THREADS;
    if (n > rows)
        n = (unsigned)rows;
    pthread_t *tid = n > 1 ? calloc(n, sizeof *tid) : NULL;
    int *started = n > 1 ? calloc(n, sizeof *started) : NULL;
    if (n > 1 && (!tid || !started)) /* no thread table: this thread does it all */
        n = 1;
    for (unsigned i = 1; i < n; i++)
        started[i] = pthread_create(&tid[i], NULL, bwork, &j) == 0;
    bwork(&j);
    for (unsigned i = 1; i < n; i++)
        if (started[i])
            pthread_join(tid[i], NULL);
    free(tid);
    free(started);
    return ML_OK;
}

void ml_quant_error_add_blocks(ml_quant_error *e, const float *x, size_t rows, size_t cols,
                               ml_type type, const void *blocks)
{
    uint32_t elems, bb, ggml;
    if (!ml_type_block(type, &elems, &bb, &ggml) || elems > 256 || cols % elems)
        return;
    float y[256];
    const uint8_t *p = blocks;
    for (size_t r = 0; r < rows; r++)
        for (size_t b = 0; b < cols / elems; b++, p += bb) {
            const float *xs = x + r * cols + b * elems;
            if (ml_gguf_dequantize_raw(ggml, p, elems, y, NULL) != ML_OK)
                return;
            for (uint32_t k = 0; k < elems; k++) {
                double d = (double)xs[k] - (double)y[k], a = fabs(d);
                e->sse += d * d;
                e->ssq += (double)xs[k] * (double)xs[k];
                if (a > e->max_abs)
                    e->max_abs = a;
            }
            e->n += elems;
        }
}
