/* requant.c - requantizing an .mlb model (ml-quant from an .mlb): the same
 * model with another weight type, q8_mask, scale encoding, Q4_0 rule or
 * importance matrix.  A matrix whose type and scale encoding stay is
 * copied bit for bit, Q4_0 to Q8_0 and f16 to f32 scales are re-encoded
 * without loss; everything else is dequantized and quantized again by the
 * spec's rules, chunk by chunk so memory stays near one output matrix.
 * With a mix (llama.cpp's Q4_K_M, ...) the output has a type table and
 * its block types are quantized by ml_quantize_matrix_blocks. */
#include "base/internal.h"

#include <math.h>
#include <stdlib.h>

#define CHUNK_FLOATS (1u << 20) /* 4 MiB of floats per chunk */

typedef struct rq {
    const ml_mlb *src;
    const ml_requant_opts *o;
    ml_mlb_header h; /* the output's */
    uint64_t done, total;
    ml_error *err;
} rq;

static ml_status progress(rq *r, uint64_t bytes)
{
    r->done += bytes;
    if (r->o->progress && r->o->progress(r->o->progress_ctx, r->done, r->total))
        return ml__err(r->err, ML_E_IO, "", -1, "interrupted");
    return ML_OK;
}

void ml_requant_opts_init(ml_requant_opts *o)
{
    memset(o, 0, sizeof *o);
    o->q8_mask = -1;
    o->scale_f16 = -1;
    o->q4_rule = ML_Q4_FIT;
    o->threads = 1;
}

ml_status ml_requant_header(const ml_mlb *src, const ml_requant_opts *o, ml_mlb_header *h,
                            ml_error *err)
{
    *h = *ml_mlb_get_header(src);
    if (o->mix && (!strcmp(ml_quant_mix_name(o->mix), "?") || o->wtype || o->q8_mask >= 0))
        return ml__err(err, ML_E_INVAL, "mix", -1,
                       "%d is not a mix, or comes with a wtype or q8_mask", (int)o->mix);
    if (o->wtype == ML_WTYPE_TABLE) /* the types a table keeps are a GGUF's */
        return ml__err(err, ML_E_UNSUPPORTED, "wtype", -1,
                       "an .mlb cannot be requantized to a type table (from a GGUF it can)");
    if (o->wtype != 0 && o->wtype != ML_WTYPE_Q8_0 && o->wtype != ML_WTYPE_Q4_0)
        return ml__err(err, ML_E_INVAL, "wtype", -1,
                       "%u is not a weight type an .mlb can be requantized to (Q8_0 or Q4_0)",
                       o->wtype);
    if (o->q8_mask < -1 || o->q8_mask > ML_Q8_ALL)
        return ml__err(err, ML_E_INVAL, "q8_mask", -1, "%lld is not a class mask",
                       (long long)o->q8_mask);
    if (o->q4_rule != ML_Q4_FIT && o->q4_rule != ML_Q4_ROUND)
        return ml__err(err, ML_E_INVAL, "q4_rule", -1, "%d is not a rule", o->q4_rule);
    if (o->imatrix && o->q4_rule == ML_Q4_ROUND)
        return ml__err(err, ML_E_INVAL, "imatrix", -1,
                       "importances need the fit rule; the round rule cannot use them");
    uint32_t src_wtype = h->wtype;
    if (src_wtype == ML_WTYPE_TABLE && !o->wtype && !o->mix) /* the converter's to make */
        return ml__err(err, ML_E_UNSUPPORTED, "wtype", 44,
                       "a model with a type table (wtype 3) can only be requantized to one "
                       "weight type (Q8_0 or Q4_0)");
    if (o->wtype)
        h->wtype = o->wtype;
    if (o->mix)
        h->wtype = ML_WTYPE_TABLE, h->q8_mask = 0;
    if (o->scale_f16 >= 0)
        h->scale_f16 = o->scale_f16 ? 1 : 0;
    if (o->mix) {
    } else if (h->wtype == ML_WTYPE_Q8_0) {
        if (o->q8_mask > 0)
            return ml__err(err, ML_E_INVAL, "q8_mask", -1,
                           "a Q8_0 model stores every matrix as Q8_0; q8_mask is for Q4_0 models");
        h->q8_mask = 0;
    } else if (o->q8_mask >= 0) {
        h->q8_mask = (uint32_t)o->q8_mask;
    } else if (src_wtype != ML_WTYPE_Q4_0) {
        h->q8_mask = 0;
    }
    ml_status s = ml_mlb_header_validate(h, NULL, NULL, err);
    if (!s && o->imatrix)
        s = ml_mli_check_model(o->imatrix, h, err);
    if (!s && o->imatrix && ml_mli_get_info(o->imatrix)->layer_tokens == 0)
        s = ml__err(err, ML_E_INVAL, "imatrix", -1, "the importance matrix holds no tokens");
    return s;
}

static int is_matrix(const ml_tensor *t)
{
    return t->ndim == 2 && t->role != ML_R_LCONV && t->role != ML_R_WR && t->type != ML_TYPE_U8;
}

/* Matrix types a mix quantizes without allow_requantize. */
static int mix_source_ok(ml_type t)
{
    return t == ML_TYPE_Q8_0 || t == ML_TYPE_F32 || t == ML_TYPE_F16 || t == ML_TYPE_BF16;
}

ml_status ml_requant_types(const ml_mlb *src, const ml_requant_opts *o, uint8_t **types,
                           ml_error *err)
{
    *types = NULL;
    if (!o->mix)
        return ML_OK;
    const ml_mlb_header *h = ml_mlb_get_header(src);
    uint8_t *fl = NULL;
    if (h->layer_flags && !(fl = malloc(h->n_layers)))
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    for (uint32_t l = 0; fl && l < h->n_layers; l++)
        fl[l] = ml_mlb_layer_flag(src, l);
    uint32_t n = ml_mlb_matrix_count(h, fl), k = 0, n_v = 0, i_v = 0;
    uint8_t *t8 = malloc(n ? n : 1);
    ml_status s = t8 ? ML_OK : ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    for (int pass = 0; pass < 2 && !s; pass++) {
        ml_mlb_layout it;
        ml_tensor t;
        ml_mlb_layout_begin_types(&it, h, fl, ml_mlb_types(src));
        while (!s && ml_mlb_layout_next(&it, &t, NULL) == 1) {
            if (!is_matrix(&t))
                continue;
            int v = t.role == ML_R_WV || t.role == ML_R_LQKV;
            if (pass == 0) {
                n_v += v;
                continue;
            }
            if (!o->allow_requantize && !mix_source_ok(t.type)) {
                s = ml__err(err, ML_E_UNSUPPORTED, t.name, (int64_t)t.offset,
                            "is %s: a mix quantizes Q8_0, F32, F16 or BF16 matrices; "
                            "requantizing another type needs allow_requantize "
                            "(ml-quant --allow-requantize)",
                            ml_type_name(t.type));
                break;
            }
            ml_mix_tensor m = {.role = t.role,
                               .cols = t.cols,
                               .tied = t.role == ML_R_TOK_EMB && h->shared_classifier,
                               .has_imatrix = o->imatrix != NULL,
                               .n_gqa = h->n_kv_heads ? h->n_heads / h->n_kv_heads : 1};
            if (v)
                m.index = i_v++, m.count = n_v;
            else if (t.role == ML_R_W2)
                m.index = t.layer, m.count = h->n_layers;
            /* lb and la: Q8_0, as the converter's mixes have them */
            t8[k++] = t.role == ML_R_LB || t.role == ML_R_LA ? (uint8_t)ML_TYPE_Q8_0
                                                              : (uint8_t)ml_quant_mix_type(o->mix, &m);
        }
    }
    free(fl);
    if (!s && k != n)
        s = ml__err(err, ML_E_INVAL, "", -1, "internal: %u matrices, %u types", n, k);
    if (s) {
        free(t8);
        return s;
    }
    *types = t8;
    return ML_OK;
}

/* Whether every scale of a matrix is an f16 value (f32 scales narrow then
 * without loss: the quants stay valid). */
static int scales_fit_f16(const ml_tensor *t)
{
    uint64_t n = (uint64_t)t->rows * t->cols / 32;
    for (uint64_t b = 0; b < n; b++) {
        float d = ml_tensor_scale(t, b);
        if (ml_f16_to_f32(ml_f32_to_f16(d)) != d)
            return 0;
    }
    return 1;
}

/* How a matrix gets from the source to the output. */
ml_requant_method ml_requant_method_of(const ml_tensor *from, const ml_tensor *to, int from_f16,
                                       int to_f16)
{
    if (ml_type_block(to->type, NULL, NULL, NULL))
        return from->type == to->type ? ML_REQUANT_COPY : ML_REQUANT_QUANTIZE;
    if (from->type == to->type && from_f16 == to_f16)
        return ML_REQUANT_COPY;
    if (from->type == to->type && (from_f16 || scales_fit_f16(from)))
        return ML_REQUANT_EXACT; /* f16 scales widen exactly, or f32 ones narrow */
    if (from->type == ML_TYPE_Q4_0 && to->type == ML_TYPE_Q8_0 &&
        (from_f16 || !to_f16 || scales_fit_f16(from)))
        return ML_REQUANT_EXACT; /* levels -8..7 with the same scale */
    return ML_REQUANT_QUANTIZE;
}

static void put_scale(uint8_t *p, size_t k, float d, int f16)
{
    if (f16)
        ml__wr16(p + 2 * k, ml_f32_to_f16(d));
    else
        ml__wrf32(p + 4 * k, d);
}

/* COPY and EXACT: quants and scales re-encoded block by block. */
static void reencode(const ml_tensor *from, const ml_tensor *to, int to_f16, uint8_t *q,
                     uint8_t *sc)
{
    uint64_t blocks = (uint64_t)from->rows * from->cols / 32;
    const uint8_t *fq = from->data;
    for (uint64_t b = 0; b < blocks; b++) {
        put_scale(sc, b, ml_tensor_scale(from, b), to_f16);
        if (from->type == to->type) {
            size_t bb = to->type == ML_TYPE_Q8_0 ? 32 : 16;
            memcpy(q + b * bb, fq + b * bb, bb);
        } else { /* Q4_0 -> Q8_0 */
            const uint8_t *blk = fq + b * 16;
            for (int j = 0; j < 16; j++) {
                q[b * 32 + j] = (uint8_t)(int8_t)((blk[j] & 15) - 8);
                q[b * 32 + j + 16] = (uint8_t)(int8_t)((blk[j] >> 4) - 8);
            }
        }
    }
}

static ml_status quantize(rq *r, const ml_tensor *from, const ml_tensor *to, uint8_t *q,
                          uint8_t *sc, ml_quant_error *qe)
{
    size_t cols = to->cols, qrow = (size_t)(to->nbytes / to->rows);
    size_t srow = (size_t)(to->scale_nbytes / to->rows);
    uint64_t chunk = CHUNK_FLOATS / cols ? CHUNK_FLOATS / cols : 1;
    float *x = malloc((size_t)(chunk < to->rows ? chunk : to->rows) * cols * sizeof *x);
    float *imp = NULL;
    ml_status s = ML_OK;
    if (!x)
        s = ml__err(r->err, ML_E_NOMEM, to->name, -1, "out of memory");
    int used = 0;
    int blocks = ml_type_block(to->type, NULL, NULL, NULL);
    if (!s && r->o->imatrix &&
        ((to->type == ML_TYPE_Q4_0 && r->o->q4_rule == ML_Q4_FIT) ||
         ml_quant_block_supported(to->type))) {
        if (!(imp = malloc(cols * sizeof *imp)))
            s = ml__err(r->err, ML_E_NOMEM, to->name, -1, "out of memory");
        else
            s = ml_mli_importance(r->o->imatrix, &r->h, to->role, to->layer, cols, imp, &used,
                                  r->err);
    }
    ml_quant_opts o = {.type = to->type,
                       .q4_rule = (ml_q4_rule)r->o->q4_rule,
                       .scale_f16 = r->h.scale_f16 != 0,
                       .imp = used ? imp : NULL,
                       .threads = r->o->threads,
                       .name = to->name};
    for (uint64_t r0 = 0; !s && r0 < to->rows; r0 += chunk) {
        uint64_t n = to->rows - r0 < chunk ? to->rows - r0 : chunk;
        ml_tensor_dequantize_rows(from, r0, n, x);
        if (to->type == ML_TYPE_F16) /* a mix's fallback */
            for (size_t e = 0; e < (size_t)n * cols; e++)
                ml__wr16(q + r0 * qrow + 2 * e, ml_f32_to_f16(x[e]));
        else if (blocks)
            s = ml_quantize_matrix_blocks(to->type, x, (size_t)n, cols, o.imp, r->o->threads,
                                          to->name, q + r0 * qrow, (size_t)n * qrow, r->err);
        else
            s = ml_quantize_matrix(x, (size_t)n, cols, &o, q + r0 * qrow, (size_t)n * qrow,
                                   sc + r0 * srow, (size_t)n * srow, r->err);
        if (!s && qe && blocks)
            ml_quant_error_add_blocks(qe, x, (size_t)n, cols, to->type, q + r0 * qrow);
        else if (!s && qe)
            ml_quant_error_add(qe, x, (size_t)n, cols, to->type, o.scale_f16, q + r0 * qrow,
                               sc + r0 * srow);
        if (!s)
            s = progress(r, n * (qrow + srow));
    }
    free(x);
    free(imp);
    return s;
}

static ml_status put_matrix(rq *r, const ml_tensor *from, const ml_tensor *to,
                            ml_mlb_writer *w)
{
    size_t qb, sb;
    if (ml__to_size(to->nbytes, &qb) || ml__to_size(to->scale_nbytes, &sb))
        return ml__err(r->err, ML_E_NOMEM, to->name, -1, "the tensor does not fit in memory");
    uint8_t *q = malloc(qb ? qb : 1), *sc = malloc(sb ? sb : 1);
    ml_status s = ML_OK;
    ml_quant_error qe = {0};
    int from_f16 = ml_mlb_get_header(r->src)->scale_f16 != 0;
    ml_requant_method m = ml_requant_method_of(from, to, from_f16, r->h.scale_f16 != 0);
    if (!q || !sc)
        s = ml__err(r->err, ML_E_NOMEM, to->name, -1, "out of memory");
    else if (m == ML_REQUANT_QUANTIZE)
        s = quantize(r, from, to, q, sc, r->o->on_tensor ? &qe : NULL);
    else if (ml_type_block(to->type, NULL, NULL, NULL) && !(s = progress(r, qb)))
        memcpy(q, from->data, qb); /* the same block type */
    else if (!(s = (reencode(from, to, r->h.scale_f16 != 0, q, sc), ML_OK)))
        s = progress(r, (uint64_t)qb + sb);
    if (!s)
        s = ml_mlb_writer_put(w, q, qb, sb ? sc : NULL, sb, r->err);
    if (!s && r->o->on_tensor)
        r->o->on_tensor(r->o->tensor_ctx, to, m, m == ML_REQUANT_QUANTIZE ? &qe : NULL);
    free(q);
    free(sc);
    return s;
}

ml_status ml_requant_write(const ml_mlb *src, const ml_requant_opts *o, ml_write_fn fn, void *ctx,
                           ml_error *err)
{
    rq r = {.src = src, .o = o, .err = err};
    ml_status s = ml_requant_header(src, o, &r.h, err);
    if (s)
        return s;
    uint8_t *flags = NULL;
    if (r.h.layer_flags) {
        if (!(flags = malloc(r.h.n_layers)))
            return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
        for (uint32_t l = 0; l < r.h.n_layers; l++)
            flags[l] = ml_mlb_layer_flag(src, l);
    }
    uint8_t *types = NULL;
    if ((s = ml_requant_types(src, o, &types, err)) ||
        (s = ml_mlb_layout_size_types(&r.h, flags, types, &r.total, NULL, err))) {
        free(flags);
        free(types);
        return s;
    }
    ml_mlb_writer *w;
    s = ml_mlb_writer_new_types(&r.h, flags, types, fn, ctx, &w, err);
    free(flags);
    free(types);
    if (s)
        return s;
    const ml_tensor *to;
    while (!s && (to = ml_mlb_writer_expect(w))) {
        const ml_tensor *from = ml_mlb_get(src, to->role, to->layer);
        if (!from) {
            s = ml__err(err, ML_E_INVAL, to->name, -1, "internal: the source has no %s", to->name);
        } else if (to->type == ML_TYPE_F32 || to->type == ML_TYPE_U8) {
            ml_tensor t = *to; /* the writer's pointer moves on put */
            s = ml_mlb_writer_put(w, from->data, (size_t)from->nbytes, NULL, 0, err);
            if (!s)
                s = progress(&r, t.nbytes);
            if (!s && o->on_tensor)
                o->on_tensor(o->tensor_ctx, &t, ML_REQUANT_COPY, NULL);
        } else {
            ml_tensor t = *to;
            s = put_matrix(&r, from, &t, w);
        }
    }
    if (s) {
        ml_mlb_writer_free(w);
        return s;
    }
    return ml_mlb_writer_finish(w, err);
}
