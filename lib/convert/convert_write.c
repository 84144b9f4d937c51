/* convert_write.c - executing a GGUF -> .mlb plan: every array of the body
 * in file order, through the .mlb writer.
 *
 * Three ways in (ml_convert_method):
 *   - blocks: a GGUF Q8_0/Q4_0/Q5_0/IQ4_NL matrix whose blocks survive the
 *     plan's transforms is re-laid block by block: .mlb keeps all quants of
 *     a matrix, then all its scales, where GGUF interleaves [d][quants].
 *     Quants are copied or widened to their exact int8 levels; the f16
 *     scale is kept as is or widened to f32 exactly.  Q8_0 quants of -128,
 *     which .mlb forbids, become -127 and are counted.
 *   - floats: anything else is dequantized (bit-exact with ggml), rows
 *     are moved as the plan says, and the result is quantized with the
 *     spec's rules in chunks of rows, so memory stays bounded whatever the
 *     tensor's size (the quantizer's row rules make chunking invisible).
 *   - F32 arrays (norms, biases, lconv, A_log) are dequantized whole.
 *   - kept: a matrix of a ggml block type in a wtype 3 model is the GGUF's
 *     bytes, row by row (rows are whole blocks, so row moves are row
 *     copies; lout's head columns move as whole blocks).
 *   - a mix's block types (and its F16 fallback) take the float path,
 *     each chunk of rows quantized by ml_quantize_matrix_blocks.
 * Row moves are always "destination unit u takes source unit
 * ml__conv_src_unit(u)"; columns move only for lout, by whole heads. */
#include "convert/convert_impl.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

/* IQ4_NL's levels (ggml's kvalues_iq4nl). */
static const int8_t iq4nl_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                        1,    13,   25,  38,  53,  69,  89,  113};

typedef struct wctx {
    const ml_convert_plan *p;
    ml_convert_stats *st;
    ml_error *err;
    uint64_t done, total;
    uint8_t *qbuf, *sbuf; /* output arrays, reused: fresh pages cost faults */
    size_t qcap, scap;
} wctx;

uint64_t ml__conv_src_unit(const ml__conv_item *it, uint64_t u)
{
    uint32_t t = it->pub.transform;
    uint64_t s = u;
    if ((t & ML_CONV_VHEADS) && u >= it->vstart) {
        /* .mlb value head h (grouped: h / R is its key head) is GGUF head
         * j = (h mod R) K + h / R (llama.cpp's tiled order). */
        uint64_t v = u - it->vstart, h = v / it->vhs, o = v % it->vhs;
        uint64_t j = (h % it->vr) * it->vk + h / it->vr;
        s = it->vstart + j * it->vhs + o;
    }
    if (t & (ML_CONV_ROPE_PERM | ML_CONV_QGATE)) {
        uint64_t h = u / it->hd, j = u % it->hd;
        if ((t & ML_CONV_ROPE_PERM) && j < it->rot) /* new 2i + s <- old s * rot/2 + i */
            j = (j & 1) * (it->rot / 2) + j / 2;
        s = it->qgate ? 2 * it->hd * h + (it->qgate == 2 ? it->hd : 0) + j : h * it->hd + j;
    }
    return it->row0 + s;
}

/* The source column of column c of lout (value heads regrouped). */
static uint64_t src_col(const ml__conv_item *it, uint64_t c)
{
    uint64_t h = c / it->vhs, o = c % it->vhs;
    return ((h % it->vr) * it->vk + h / it->vr) * it->vhs + o;
}

uint64_t ml__conv_src_block(const ml__conv_item *it, uint64_t b)
{
    if (!(it->pub.transform & ML_CONV_VHEAD_COLS))
        return b;
    return src_col(it, b * ML_QK) / ML_QK;
}

static ml_status progress(wctx *w, uint64_t bytes)
{
    w->done += bytes;
    if (w->p->progress && w->p->progress(w->p->progress_ctx, w->done, w->total))
        return ml__err(w->err, ML_E_IO, "", -1, "interrupted");
    return ML_OK;
}

/* File offset of element e of a tensor (its block for quantized types). */
static int64_t elem_offset(const ml_gguf_tensor *t, uint64_t e)
{
    uint32_t be = 1, bb = 4;
    ml_gguf_type_size(t->type, &be, &bb);
    return (int64_t)(t->file_offset + e / be * bb);
}

/* ===========================================================================
 * Block re-layout (lossless)
 * ========================================================================= */

/* One GGUF block's quants into .mlb quants at q: Q4_0 keeps its 16 bytes
 * (same nibble order), the others become int8 levels.  Q8_0 quants are
 * copied as they are; -128 is dealt with over the whole matrix after. */
static void block_quants(uint32_t src, ml_type dst, const uint8_t *blk, uint8_t *q)
{
    if (dst == ML_TYPE_Q4_0) {
        memcpy(q, blk + 2, 16);
        return;
    }
    int8_t *o = (int8_t *)q;
    switch (src) {
    case ML_GGML_Q8_0: memcpy(q, blk + 2, ML_QK); break;
    case ML_GGML_Q4_0:
        for (int j = 0; j < 16; j++) {
            o[j] = (int8_t)((blk[2 + j] & 15) - 8);
            o[j + 16] = (int8_t)((blk[2 + j] >> 4) - 8);
        }
        break;
    case ML_GGML_Q5_0: {
        uint32_t qh = ml__rd32(blk + 2);
        for (int j = 0; j < 16; j++) {
            int lo = (blk[6 + j] & 15) | (int)((qh >> j) & 1) << 4;
            int hi = (blk[6 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            o[j] = (int8_t)(lo - 16);
            o[j + 16] = (int8_t)(hi - 16);
        }
        break;
    }
    default: /* IQ4_NL */
        for (int j = 0; j < 16; j++) {
            o[j] = iq4nl_levels[blk[2 + j] & 15];
            o[j + 16] = iq4nl_levels[blk[2 + j] >> 4];
        }
        break;
    }
}

/* .mlb forbids the Q8_0 quant -128 (a GGUF may hold it): -127 instead. */
static void clamp_minus_128(wctx *w, const char *name, uint8_t *q, size_t n)
{
    uint64_t before = w->st->clamped_q8;
    for (uint8_t *p = memchr(q, 0x80, n); p; p = memchr(p + 1, 0x80, n - (size_t)(p + 1 - q))) {
        *p = 0x81;
        w->st->clamped_q8++;
        if (p + 1 == q + n)
            break;
    }
    if (w->st->clamped_q8 != before && !w->st->first_clamped[0])
        snprintf(w->st->first_clamped, sizeof w->st->first_clamped, "%s", name);
}

static ml_status bad_scale(wctx *w, const ml_gguf_tensor *s, const uint8_t *blk, uint16_t d)
{
    return ml__err(w->err, ML_E_FORMAT, s->name,
                   (int64_t)(s->file_offset + (uint64_t)(blk - s->data)),
                   "the scale of a block is %s", (d & 0x3ff) ? "NaN" : "infinite");
}

/* Row r's blocks: quants to q (qrow bytes a block), scales to sc. */
static ml_status row_blocks(wctx *w, const ml__conv_item *it, uint64_t r, uint32_t bpb, uint8_t *q,
                            uint8_t *sc)
{
    const ml_tensor *t = &it->pub.dst;
    const ml_gguf_tensor *s = it->pub.src;
    const uint8_t *row = s->data + ml__conv_src_unit(it, r) * s->row_bytes;
    uint64_t nb = t->cols / ML_QK;
    size_t qblk = t->type == ML_TYPE_Q8_0 ? ML_QK : ML_QK / 2;
    int f16 = w->p->h.scale_f16 != 0, moved = (it->pub.transform & ML_CONV_VHEAD_COLS) != 0;
    for (uint64_t b = 0; b < nb; b++) {
        const uint8_t *blk = row + (moved ? ml__conv_src_block(it, b) : b) * bpb;
        uint16_t d = ml__rd16(blk);
        if ((d & 0x7c00) == 0x7c00)
            return bad_scale(w, s, blk, d);
        block_quants(s->type, t->type, blk, q + b * qblk);
        if (f16)
            memcpy(sc + 2 * b, blk, 2);
        else
            ml__wrf32(sc + 4 * b, ml_f16_to_f32(d));
    }
    return ML_OK;
}

static ml_status put_blocks(wctx *w, const ml__conv_item *it, uint8_t *q, uint8_t *sc)
{
    const ml_tensor *t = &it->pub.dst;
    uint32_t bpb = 0;
    ml_gguf_type_size(it->pub.src->type, NULL, &bpb);
    size_t qrow = t->type == ML_TYPE_Q8_0 ? t->cols : t->cols / 2;
    size_t srow = t->cols / ML_QK * (w->p->h.scale_f16 ? 2 : 4);
    for (uint64_t r = 0; r < t->rows; r++) {
        ml_status s = row_blocks(w, it, r, bpb, q + r * qrow, sc + r * srow);
        if (s)
            return s;
    }
    if (t->type == ML_TYPE_Q8_0 && it->pub.src->type == ML_GGML_Q8_0)
        clamp_minus_128(w, it->pub.src->name, q, t->rows * qrow);
    return ML_OK;
}

/* ===========================================================================
 * Float path
 * ========================================================================= */

/* Destination rows [r0, r0 + n) as floats into x (n * cols). */
static ml_status fill_rows(const ml__conv_item *it, uint64_t r0, uint64_t n, float *x, float *tmp,
                           ml_error *err)
{
    const ml_gguf_tensor *s = it->pub.src;
    uint64_t cols = it->pub.dst.cols;
    ml_status st;
    uint32_t moves = it->pub.transform & (ML_CONV_ROPE_PERM | ML_CONV_QGATE | ML_CONV_VHEADS);
    if (!moves) {
        if ((st = ml_gguf_dequantize(s, it->row0 + r0, n, x, err)))
            return st;
    } else {
        for (uint64_t r = 0; r < n; r++)
            if ((st = ml_gguf_dequantize(s, ml__conv_src_unit(it, r0 + r), 1, x + r * cols, err)))
                return st;
    }
    if (it->pub.transform & ML_CONV_VHEAD_COLS) {
        for (uint64_t r = 0; r < n; r++) {
            float *row = x + r * cols;
            memcpy(tmp, row, cols * sizeof *tmp);
            for (uint64_t c = 0; c < cols; c++)
                row[c] = tmp[src_col(it, c)];
        }
    }
    return ML_OK;
}

/* Requantization runs on a small pool: each worker takes the next chunk of
 * rows, dequantizes and moves them into its own buffer and quantizes them
 * with one thread into their place in the output.  Rows are independent,
 * so the bytes do not depend on the number of workers or the order they
 * finish in.  After a failure no chunk beyond the failing one is started;
 * every chunk before it has been, so the error reported is the first in
 * row order whatever the timing.  Only the calling thread reports
 * progress. */
typedef struct qjob {
    wctx *w;
    const ml__conv_item *it;
    uint8_t *q, *sc;
    size_t qrow, srow;
    uint64_t chunk, n_chunks;
    _Atomic uint64_t next; /* next chunk to hand out */
    _Atomic uint64_t rows_done;
    _Atomic uint64_t fail_chunk; /* UINT64_MAX: none */
    _Atomic int stop;            /* cancelled */
    pthread_mutex_t mu;
    ml_quant_error *chunk_err; /* (n_chunks) with on_tensor, else NULL */
    ml_status st; /* of fail_chunk */
    ml_error err;
} qjob;

static void record_failure(qjob *j, uint64_t c, ml_status st, const ml_error *e)
{
    pthread_mutex_lock(&j->mu);
    if (c < atomic_load(&j->fail_chunk)) {
        atomic_store(&j->fail_chunk, c);
        j->st = st;
        j->err = *e;
    }
    pthread_mutex_unlock(&j->mu);
}

/* Finite values only: .mlb holds none other, and the message names the
 * GGUF element. */
static ml_status check_finite(const ml__conv_item *it, uint64_t r0, uint64_t n, const float *x,
                              ml_error *err)
{
    uint64_t cols = it->pub.dst.cols;
    for (uint64_t k = 0; k < n * cols; k++) {
        if (isfinite(x[k]))
            continue;
        const ml_gguf_tensor *s = it->pub.src;
        uint64_t r = r0 + k / cols, c = k % cols;
        if (it->pub.transform & ML_CONV_VHEAD_COLS)
            c = src_col(it, c);
        uint64_t e = ml__conv_src_unit(it, r) * s->cols + c;
        return ml__err(err, ML_E_FORMAT, s->name, elem_offset(s, e),
                       "row %llu, column %llu is %g; only finite weights can be quantized",
                       (unsigned long long)(e / s->cols), (unsigned long long)c, (double)x[k]);
    }
    return ML_OK;
}

static ml_status do_chunk(qjob *j, uint64_t c, float *x, float *tmp, ml_error *e)
{
    const ml__conv_item *it = j->it;
    const ml_tensor *t = &it->pub.dst;
    uint64_t r0 = c * j->chunk, n = t->rows - r0 < j->chunk ? t->rows - r0 : j->chunk;
    ml_quant_opts o = {.type = t->type,
                       .q4_rule = (ml_q4_rule)j->w->p->q4_rule,
                       .scale_f16 = j->w->p->h.scale_f16 != 0,
                       .imp = it->imp,
                       .threads = 1,
                       .name = it->pub.src->name};
    int blocks = ml_type_block(t->type, NULL, NULL, NULL);
    uint8_t *q = j->q + r0 * j->qrow;
    ml_status s = fill_rows(it, r0, n, x, tmp, e);
    if (!s)
        s = check_finite(it, r0, n, x, e);
    if (!s && t->type == ML_TYPE_F16) /* a mix's fallback for rows 32 does not divide */
        for (size_t k = 0; k < (size_t)n * t->cols; k++)
            ml__wr16(q + 2 * k, ml_f32_to_f16(x[k]));
    else if (!s && blocks)
        s = ml_quantize_matrix_blocks(t->type, x, (size_t)n, (size_t)t->cols, it->imp, 1,
                                      it->pub.src->name, q, (size_t)n * j->qrow, e);
    else if (!s)
        s = ml_quantize_matrix(x, (size_t)n, (size_t)t->cols, &o, q, (size_t)n * j->qrow,
                               j->sc + r0 * j->srow, (size_t)n * j->srow, e);
    if (!s && j->chunk_err && blocks)
        ml_quant_error_add_blocks(&j->chunk_err[c], x, (size_t)n, (size_t)t->cols, t->type, q);
    else if (!s && j->chunk_err)
        ml_quant_error_add(&j->chunk_err[c], x, (size_t)n, (size_t)t->cols, t->type,
                           o.scale_f16, q, j->sc + r0 * j->srow);
    if (s && e && s != ML_E_FORMAT) { /* the quantizer counts rows from the chunk's start */
        char m[sizeof e->msg + 48];
        snprintf(m, sizeof m, "%s (rows from %llu)", e->msg, (unsigned long long)r0);
        memcpy(e->msg, m, sizeof e->msg - 1);
        e->msg[sizeof e->msg - 1] = 0;
    }
    if (!s)
        atomic_fetch_add(&j->rows_done, n);
    return s;
}

/* One worker; returns after the last chunk.  `main` reports progress. */
static void run_chunks(qjob *j, int main_thread)
{
    const ml_tensor *t = &j->it->pub.dst;
    size_t nx = (size_t)(j->chunk * t->cols);
    float *x = malloc(nx * sizeof *x), *tmp = malloc((size_t)t->cols * sizeof *tmp);
    uint64_t reported = 0, row_out = j->qrow + j->srow;
    ml_error e;
    if (!x || !tmp) {
        ml__err(&e, ML_E_NOMEM, t->name, -1, "out of memory");
        record_failure(j, atomic_fetch_add(&j->next, 1), ML_E_NOMEM, &e);
    }
    while (x && tmp && !atomic_load(&j->stop)) {
        uint64_t c = atomic_fetch_add(&j->next, 1);
        if (c >= j->n_chunks || c > atomic_load(&j->fail_chunk))
            break;
        ml_status s = do_chunk(j, c, x, tmp, &e);
        if (s)
            record_failure(j, c, s, &e);
        if (main_thread) {
            uint64_t now = atomic_load(&j->rows_done);
            if (progress(j->w, (now - reported) * row_out))
                atomic_store(&j->stop, 1);
            reported = now;
        }
    }
    if (main_thread && !atomic_load(&j->stop))
        j->w->done += (atomic_load(&j->rows_done) - reported) * row_out; /* the others' rest */
    free(x);
    free(tmp);
}

static void *worker(void *arg)
{
    run_chunks(arg, 0);
    return NULL;
}

#define CHUNK_FLOATS_PER_WORKER (1u << 18) /* 1 MiB of floats */
#define MAX_WORKERS             256

static ml_status quantize_item(wctx *w, const ml__conv_item *it, uint8_t *q, size_t qbytes,
                               uint8_t *sc, size_t sbytes, ml_quant_error *qe)
{
    const ml_tensor *t = &it->pub.dst;
    unsigned n = w->p->threads > MAX_WORKERS ? MAX_WORKERS : w->p->threads;
    qjob j = {
        .w = w, .it = it, .q = q, .sc = sc, .qrow = qbytes / t->rows, .srow = sbytes / t->rows};
    j.chunk = CHUNK_FLOATS_PER_WORKER / t->cols ? CHUNK_FLOATS_PER_WORKER / t->cols : 1;
    if (t->rows / j.chunk < 4ull * n) /* several chunks a worker, to even out the load */
        j.chunk = t->rows / (4ull * n) ? t->rows / (4ull * n) : 1;
    j.n_chunks = (t->rows + j.chunk - 1) / j.chunk;
    if (n > j.n_chunks)
        n = (unsigned)j.n_chunks;
    if (qe && !(j.chunk_err = calloc(j.n_chunks, sizeof *j.chunk_err)))
        return ml__err(w->err, ML_E_NOMEM, t->name, -1, "out of memory");
    atomic_init(&j.next, 0);
    atomic_init(&j.rows_done, 0);
    atomic_init(&j.fail_chunk, UINT64_MAX);
    atomic_init(&j.stop, 0);
    pthread_mutex_init(&j.mu, NULL);
    pthread_t tid[MAX_WORKERS];
    unsigned started = 0;
    for (; started + 1 < n; started++)
        if (pthread_create(&tid[started], NULL, worker, &j))
            break; /* fewer workers: same bytes */
    run_chunks(&j, 1);
    for (unsigned i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    pthread_mutex_destroy(&j.mu);
    for (uint64_t c = 0; j.chunk_err && c < j.n_chunks; c++) /* row order: same sums for any n */
        ml_quant_error_merge(qe, &j.chunk_err[c]);
    free(j.chunk_err);
    if (atomic_load(&j.fail_chunk) != UINT64_MAX) {
        if (w->err)
            *w->err = j.err;
        return j.st;
    }
    if (atomic_load(&j.stop))
        return ml__err(w->err, ML_E_IO, "", -1, "interrupted");
    return ML_OK;
}

/* ===========================================================================
 * F32 arrays
 * ========================================================================= */

static ml_status fill_f32(wctx *w, const ml__conv_item *it, float *x)
{
    const ml_tensor *t = &it->pub.dst;
    const ml_gguf_tensor *s = it->pub.src;
    uint64_t n = (uint64_t)t->rows * t->cols;
    ml_status st;
    if (it->pub.transform & ML_CONV_ZEROS) {
        memset(x, 0, n * sizeof *x);
        return ML_OK;
    }
    if (t->ndim == 2) { /* lconv (rows are channels), F32 matrices of a type table */
        float *tmp = malloc((size_t)t->cols * sizeof *tmp); /* lout's column moves */
        if (!tmp)
            return ml__err(w->err, ML_E_NOMEM, t->name, -1, "out of memory");
        st = fill_rows(it, 0, t->rows, x, tmp, w->err);
        free(tmp);
        return st;
    }
    size_t ns;
    float *all;
    if (ml__to_size(s->n_elements * sizeof *all, &ns) || !(all = malloc(ns)))
        return ml__err(w->err, ML_E_NOMEM, "", -1, "out of memory");
    if (!(st = ml_gguf_dequantize(s, 0, s->rows, all, w->err)))
        for (uint64_t e = 0; e < n; e++)
            x[e] = all[ml__conv_src_unit(it, e)];
    free(all);
    return st;
}

/* A_log = ln(-ssm_a): llama.cpp's converter stored -exp(A_log). */
static ml_status undo_neg_exp(wctx *w, const ml__conv_item *it, float *x, uint64_t n)
{
    for (uint64_t e = 0; e < n; e++) {
        if (!(x[e] < 0) || !isfinite(x[e])) {
            const ml_gguf_tensor *s = it->pub.src;
            return ml__err(w->err, ML_E_FORMAT, s->name, elem_offset(s, ml__conv_src_unit(it, e)),
                           "element %llu is %g; -exp(A_log) is negative",
                           (unsigned long long)ml__conv_src_unit(it, e), (double)x[e]);
        }
        x[e] = (float)log(-(double)x[e]);
    }
    return ML_OK;
}

static ml_status put_f32(wctx *w, const ml__conv_item *it, ml_mlb_writer *mw)
{
    const ml_tensor *t = &it->pub.dst;
    uint64_t n = (uint64_t)t->rows * t->cols;
    size_t nb;
    float *x;
    if (ml__to_size(n * sizeof *x, &nb) || !(x = malloc(nb ? nb : 1)))
        return ml__err(w->err, ML_E_NOMEM, t->name, -1, "out of memory");
    ml_status s = fill_f32(w, it, x);
    if (!s && (it->pub.transform & ML_CONV_A_LOG))
        s = undo_neg_exp(w, it, x, n);
    for (uint64_t e = 0; !s && e < n; e++)
        if (!isfinite(x[e])) {
            const ml_gguf_tensor *src = it->pub.src;
            uint64_t su = t->ndim == 2
                              ? ml__conv_src_unit(it, e / t->cols) * src->cols + e % t->cols
                              : ml__conv_src_unit(it, e);
            s = ml__err(w->err, ML_E_FORMAT, src->name, elem_offset(src, su),
                        "element %llu is %g; .mlb arrays hold finite values",
                        (unsigned long long)su, (double)x[e]);
        }
    for (uint64_t e = 0; !s && e < n; e++) /* little-endian on every host */
        ml__wrf32((uint8_t *)&x[e], x[e]);
    if (!s)
        s = ml_mlb_writer_put(mw, x, nb, NULL, 0, w->err);
    if (!s)
        s = progress(w, nb);
    if (!s && w->p->on_tensor)
        w->p->on_tensor(w->p->tensor_ctx, &it->pub, NULL);
    free(x);
    return s;
}

/* ===========================================================================
 * Items and the model
 * ========================================================================= */

/* Grows a reused buffer to n bytes. */
static uint8_t *scratch(uint8_t **buf, size_t *cap, size_t n)
{
    if (n > *cap) {
        free(*buf);
        *cap = 0;
        if (!(*buf = malloc(n ? n : 1)))
            return NULL;
        *cap = n;
    }
    return *buf;
}

static ml_status put_matrix(wctx *w, const ml__conv_item *it, ml_mlb_writer *mw)
{
    const ml_tensor *t = &it->pub.dst;
    size_t qb, sb;
    if (ml__to_size(t->nbytes, &qb) || ml__to_size(t->scale_nbytes, &sb))
        return ml__err(w->err, ML_E_NOMEM, t->name, -1, "the tensor does not fit in memory");
    uint8_t *q = scratch(&w->qbuf, &w->qcap, qb), *sc = scratch(&w->sbuf, &w->scap, sb);
    if (!q || !sc)
        return ml__err(w->err, ML_E_NOMEM, t->name, -1, "out of memory");
    ml_status s;
    ml_quant_error qe = {0};
    int quantized = it->pub.method == ML_CONV_QUANTIZE;
    if (quantized)
        s = quantize_item(w, it, q, qb, sc, sb, w->p->on_tensor ? &qe : NULL);
    else if (!(s = put_blocks(w, it, q, sc)))
        s = progress(w, (uint64_t)qb + sb);
    if (!s)
        s = ml_mlb_writer_put(mw, q, qb, sc, sb, w->err);
    if (!s && w->p->on_tensor)
        w->p->on_tensor(w->p->tensor_ctx, &it->pub, quantized ? &qe : NULL);
    return s;
}

/* A mix's block-type matrix quantized from floats (the chunk pool above). */
static ml_status put_quant_blocks(wctx *w, const ml__conv_item *it, ml_mlb_writer *mw)
{
    const ml_tensor *t = &it->pub.dst;
    size_t nb;
    if (ml__to_size(t->nbytes, &nb))
        return ml__err(w->err, ML_E_NOMEM, t->name, -1, "the tensor does not fit in memory");
    uint8_t *q = scratch(&w->qbuf, &w->qcap, nb);
    if (!q)
        return ml__err(w->err, ML_E_NOMEM, t->name, -1, "out of memory");
    ml_quant_error qe = {0};
    ml_status s = quantize_item(w, it, q, nb, NULL, 0, w->p->on_tensor ? &qe : NULL);
    if (!s)
        s = ml_mlb_writer_put(mw, q, nb, NULL, 0, w->err);
    if (!s && w->p->on_tensor)
        w->p->on_tensor(w->p->tensor_ctx, &it->pub, &qe);
    return s;
}

/* A block-type matrix as the GGUF holds it, rows moved as the plan says. */
static ml_status put_kept(wctx *w, const ml__conv_item *it, ml_mlb_writer *mw)
{
    const ml_tensor *t = &it->pub.dst;
    const ml_gguf_tensor *s = it->pub.src;
    uint32_t elems = 1, bb = 1;
    ml_type_block(t->type, &elems, &bb, NULL);
    size_t nb, rb = (size_t)ml_tensor_row_bytes(t);
    if (ml__to_size(t->nbytes, &nb))
        return ml__err(w->err, ML_E_NOMEM, t->name, -1, "the tensor does not fit in memory");
    uint8_t *q = scratch(&w->qbuf, &w->qcap, nb);
    if (!q)
        return ml__err(w->err, ML_E_NOMEM, t->name, -1, "out of memory");
    int moved = (it->pub.transform & ML_CONV_VHEAD_COLS) != 0;
    for (uint64_t r = 0; r < t->rows; r++) {
        const uint8_t *src = s->data + ml__conv_src_unit(it, r) * s->row_bytes;
        uint8_t *dst = q + r * rb;
        if (!moved) {
            memcpy(dst, src, rb);
            continue;
        }
        for (uint64_t b = 0; b < t->cols / elems; b++) /* heads are whole blocks */
            memcpy(dst + b * bb, src + src_col(it, b * elems) / elems * bb, bb);
    }
    ml_status st = ml_mlb_writer_put(mw, q, nb, NULL, 0, w->err);
    if (!st)
        st = progress(w, nb);
    if (!st && w->p->on_tensor)
        w->p->on_tensor(w->p->tensor_ctx, &it->pub, NULL);
    return st;
}

static void count(ml_convert_stats *st, ml_convert_method m)
{
    switch (m) {
    case ML_CONV_COPY: st->copied++; break;
    case ML_CONV_EXACT: st->exact++; break;
    case ML_CONV_QUANTIZE: st->quantized++; break;
    default: st->derived++; break;
    }
}

/* Counts the bytes reaching the sink, and hands them over in pieces of at
 * most 1 MiB: one write() of a whole 64 MiB tensor costs the kernel more
 * system time than the same bytes in 1 MiB writes (measured with dd),
 * and a sink that is a pipe wants small pieces anyway. */
typedef struct counting_sink {
    ml_write_fn fn;
    void *ctx;
    uint64_t bytes;
} counting_sink;

#define SINK_PIECE (1u << 20)

static ml_status count_bytes(void *ctx, const void *buf, size_t n, ml_error *err)
{
    counting_sink *c = ctx;
    const uint8_t *p = buf;
    while (n) {
        size_t k = n < SINK_PIECE ? n : SINK_PIECE;
        ml_status s = c->fn(c->ctx, p, k, err);
        if (s)
            return s;
        c->bytes += k;
        p += k, n -= k;
    }
    return ML_OK;
}

ml_status ml_convert_write(const ml_convert_plan *p, ml_write_fn fn, void *ctx,
                           ml_convert_stats *st, ml_error *err)
{
    ml_convert_stats local;
    if (!st)
        st = &local;
    memset(st, 0, sizeof *st);
    wctx w = {.p = p, .st = st, .err = err};
    for (size_t i = 0; i < p->n_items; i++)
        w.total += p->items[i].pub.dst.nbytes + p->items[i].pub.dst.scale_nbytes;
    counting_sink cs = {fn, ctx, 0};
    ml_mlb_writer *mw;
    ml_status s = ml_mlb_writer_new_types(&p->h, p->h.layer_flags ? p->flags : NULL, p->types,
                                          count_bytes, &cs, &mw, err);
    if (s)
        return s;
    for (size_t i = 0; !s && i < p->n_items; i++) {
        const ml__conv_item *it = &p->items[i];
        const ml_tensor *t = ml_mlb_writer_expect(mw);
        if (!t || t->role != it->pub.dst.role || t->layer != it->pub.dst.layer) {
            s = ml__err(err, ML_E_INVAL, it->pub.dst.name, -1, "internal: the writer expects %s",
                        t ? t->name : "nothing");
            break;
        }
        int blocks = ml_type_block(it->pub.dst.type, NULL, NULL, NULL);
        s = it->pub.dst.type == ML_TYPE_F32                          ? put_f32(&w, it, mw)
            : blocks && it->pub.method == ML_CONV_QUANTIZE ? put_quant_blocks(&w, it, mw)
            : blocks                                       ? put_kept(&w, it, mw)
                                                           : put_matrix(&w, it, mw);
        if (!s)
            count(st, it->pub.method);
    }
    free(w.qbuf);
    free(w.sbuf);
    if (s) {
        ml_mlb_writer_free(mw);
        return s;
    }
    s = ml_mlb_writer_finish(mw, err);
    st->bytes = cs.bytes;
    return s;
}
