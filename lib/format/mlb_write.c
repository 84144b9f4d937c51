/* mlb_write.c - the .mlb writer: streams a model through a sink, tensor by
 * tensor in file order, with exact alignment and zero padding, so no model
 * is ever held in memory whole.  A wtype 3 model's type table is written
 * after the layer flags, from the table given at creation.  Also a generator of valid models with
 * deterministic pseudo-random weights, for tests and benchmarks. */
#include "base/internal.h"

#include <stdlib.h>

struct ml_mlb_writer {
    ml_mlb_header h;
    uint8_t *flags;
    uint8_t *types; /* wtype 3: ml_mlb_matrix_count bytes */
    uint32_t n_types;
    ml_write_fn fn;
    void *ctx;
    uint64_t pos;
    ml_mlb_layout it;
    ml_tensor next;
    int has_next;
    ml_status failed;    /* sticky: a failed writer accepts nothing more */
};

static const uint8_t zeros[ML_MLB_ALIGN];

static ml_status emit(ml_mlb_writer *w, const void *buf, size_t n, ml_error *err)
{
    if (!n)
        return ML_OK;
    ml_status s = w->fn(w->ctx, buf, n, err);
    if (s)
        return w->failed = s;
    w->pos += n;
    return ML_OK;
}

static ml_status pad_to(ml_mlb_writer *w, uint64_t to, ml_error *err)
{
    return emit(w, zeros, (size_t)(to - w->pos), err);
}

static void advance(ml_mlb_writer *w)
{
    w->has_next = ml_mlb_layout_next(&w->it, &w->next, NULL) == 1;
}

void ml_mlb_writer_free(ml_mlb_writer *w)
{
    if (!w)
        return;
    free(w->flags);
    free(w->types);
    free(w);
}

/* Copies n bytes of src (n may be 0) into *dst. */
static int dup_bytes(uint8_t **dst, const uint8_t *src, size_t n)
{
    if (!(*dst = malloc(n ? n : 1)))
        return 0;
    if (n)
        memcpy(*dst, src, n);
    return 1;
}

/* Header, layer flags and type table: everything before the first tensor
 * the caller puts. */
static ml_status write_head(ml_mlb_writer *w, ml_error *err)
{
    uint8_t raw[ML_MLB_HEADER_SIZE];
    ml_mlb_header_encode(&w->h, raw);
    ml_status s = emit(w, raw, sizeof raw, err);
    while (!s && w->has_next && w->next.type == ML_TYPE_U8) { /* ours to write */
        const ml_tensor *t = &w->next;
        const uint8_t *src = t->role == ML_R_MAT_TYPES ? w->types : w->flags;
        if (!(s = pad_to(w, t->offset, err)))
            s = emit(w, src, (size_t)t->nbytes, err);
        advance(w);
    }
    return s;
}

ml_status ml_mlb_writer_new_types(const ml_mlb_header *h, const uint8_t *flags,
                                  const uint8_t *types, ml_write_fn fn, void *ctx,
                                  ml_mlb_writer **out, ml_error *err)
{
    *out = NULL;
    ml_status s = ml_mlb_header_validate(h, NULL, NULL, err);
    if (s)
        return s;
    if (h->layer_flags && !flags)
        return ml__err(err, ML_E_INVAL, "layer_flags", -1, "the header sets layer_flags but no "
                                                           "flags were given");
    if (h->layer_flags && (s = ml_mlb_layer_flags_validate(h, flags, err)))
        return s;
    int table = h->wtype == ML_WTYPE_TABLE;
    if (table && !types)
        return ml__err(err, ML_E_INVAL, "mat_types", -1,
                       "wtype 3 but no type table was given");
    uint64_t end;
    if ((s = ml_mlb_layout_size_types(h, flags, types, &end, NULL, err)))
        return s;
    ml_mlb_writer *w = calloc(1, sizeof *w);
    if (!w)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    w->h = *h;
    w->fn = fn;
    w->ctx = ctx;
    w->n_types = table ? ml_mlb_matrix_count(h, flags) : 0;
    if ((h->layer_flags && !dup_bytes(&w->flags, flags, h->n_layers)) ||
        (table && !dup_bytes(&w->types, types, w->n_types))) {
        ml_mlb_writer_free(w);
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    }
    ml_mlb_layout_begin_types(&w->it, &w->h, w->flags, w->types);
    advance(w);
    if ((s = write_head(w, err))) {
        ml_mlb_writer_free(w);
        return s;
    }
    *out = w;
    return ML_OK;
}

ml_status ml_mlb_writer_new(const ml_mlb_header *h, const uint8_t *flags, ml_write_fn fn, void *ctx,
                            ml_mlb_writer **out, ml_error *err)
{
    *out = NULL;
    if (h->wtype == ML_WTYPE_TABLE)
        return ml__err(err, ML_E_INVAL, "wtype", 44,
                       "3 (type table): use ml_mlb_writer_new_types with the table");
    return ml_mlb_writer_new_types(h, flags, NULL, fn, ctx, out, err);
}

const ml_tensor *ml_mlb_writer_expect(const ml_mlb_writer *w)
{
    return w->has_next ? &w->next : NULL;
}

ml_status ml_mlb_writer_put(ml_mlb_writer *w, const void *data, size_t nbytes, const void *scales,
                            size_t scale_nbytes, ml_error *err)
{
    if (w->failed)
        return ml__err(err, ML_E_INVAL, "", -1, "the writer failed earlier");
    if (!w->has_next)
        return ml__err(err, ML_E_INVAL, "", -1, "every tensor has been written already");
    const ml_tensor *t = &w->next;
    if (nbytes != t->nbytes || scale_nbytes != t->scale_nbytes ||
        (t->scale_nbytes && !scales))
        return ml__err(err, ML_E_INVAL, t->name, -1,
                       "expected %llu bytes and %llu bytes of scales, got %zu and %zu",
                       (unsigned long long)t->nbytes, (unsigned long long)t->scale_nbytes, nbytes,
                       scale_nbytes);
    if (t->type == ML_TYPE_Q8_0 && memchr(data, 0x80, nbytes))
        return ml__err(err, ML_E_INVAL, t->name, -1, "Q8_0 quants contain -128");
    ml_status s;
    if ((s = pad_to(w, t->offset, err)) || (s = emit(w, data, nbytes, err)))
        return s;
    if (t->scale_nbytes &&
        ((s = pad_to(w, t->scale_offset, err)) || (s = emit(w, scales, scale_nbytes, err))))
        return s;
    advance(w);
    if (!w->has_next) { /* close the file on a 64-byte boundary */
        uint64_t end;
        ml__align_up(w->pos, ML_MLB_ALIGN, &end);
        return pad_to(w, end, err);
    }
    return ML_OK;
}

ml_status ml_mlb_writer_finish(ml_mlb_writer *w, ml_error *err)
{
    ml_status s = ML_OK;
    if (w->failed)
        s = w->failed;
    else if (w->has_next)
        s = ml__err(err, ML_E_INVAL, w->next.name, -1, "the model is incomplete: this tensor "
                                                       "and the ones after it were not written");
    ml_mlb_writer_free(w);
    return s;
}

/* ---------------------------------------------------------------------------
 * Deterministic random models
 * ------------------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float unit(uint64_t *s)
{
    return (float)((double)(splitmix(s) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

/* Vectors: norms near 1, A_log and dt_bias in a sane range, the rest small. */
static float vector_value(ml_role role, uint64_t *s)
{
    switch (role) {
    case ML_R_ATTN_NORM: case ML_R_FFN_NORM: case ML_R_POST_ATTN_NORM:
    case ML_R_POST_FFN_NORM: case ML_R_FINAL_NORM: case ML_R_Q_NORM:
    case ML_R_K_NORM: case ML_R_LNORM:
        return 1.0f + 0.1f * unit(s);
    default:
        return 0.1f * unit(s);
    }
}

static void fill_scales(uint8_t *dst, size_t n, int f16, uint64_t *s)
{
    for (size_t i = 0; i < n; i++) {
        float d = 0.002f + 0.001f * unit(s);
        if (f16)
            dst[2 * i] = (uint8_t)ml_f32_to_f16(d), dst[2 * i + 1] = (uint8_t)(ml_f32_to_f16(d) >> 8);
        else
            ml__wrf32(dst + 4 * i, d);
    }
}

static ml_status put_random(ml_mlb_writer *w, const ml_tensor *t, uint64_t *s, ml_error *err)
{
    size_t nb, sb;
    if (ml__to_size(t->nbytes, &nb) || ml__to_size(t->scale_nbytes, &sb))
        return ml__err(err, ML_E_NOMEM, t->name, -1, "tensor does not fit in memory");
    uint8_t *data = malloc(nb ? nb : 1), *scales = malloc(sb ? sb : 1);
    if (!data || !scales) {
        free(data);
        free(scales);
        return ml__err(err, ML_E_NOMEM, t->name, -1, "cannot allocate %zu bytes", nb + sb);
    }
    if (t->type == ML_TYPE_F32) {
        for (size_t i = 0; i < nb / 4; i++)
            ml__wrf32(data + 4 * i, vector_value(t->role, s));
    } else {
        int block = ml_type_block(t->type, NULL, NULL, NULL);
        for (size_t i = 0; i < nb; i += 8) {
            uint64_t r = splitmix(s);
            for (size_t k = 0; k < 8 && i + k < nb; k++) {
                uint8_t b = (uint8_t)(r >> (8 * k));
                /* Q8_0: any byte but 0x80 (-128); block types: below 0x40,
                 * so every f16/bf16 field in them is finite. */
                data[i + k] = t->type == ML_TYPE_Q8_0 && b == 0x80 ? 0x81 : block ? b & 0x3f : b;
            }
        }
        fill_scales(scales, sb / (w->h.scale_f16 ? 2 : 4), (int)w->h.scale_f16, s);
    }
    ml_status st = ml_mlb_writer_put(w, data, nb, t->scale_nbytes ? scales : NULL, sb, err);
    free(data);
    free(scales);
    return st;
}

ml_status ml_mlb_write_random(const ml_mlb_header *h, const uint8_t *flags, uint64_t seed,
                              ml_write_fn fn, void *ctx, ml_error *err)
{
    if (h->wtype == ML_WTYPE_TABLE)
        return ml__err(err, ML_E_INVAL, "wtype", 44,
                       "3 (type table): use ml_mlb_write_random_types with the table");
    return ml_mlb_write_random_types(h, flags, NULL, seed, fn, ctx, err);
}

ml_status ml_mlb_write_random_types(const ml_mlb_header *h, const uint8_t *flags,
                                    const uint8_t *types, uint64_t seed, ml_write_fn fn, void *ctx,
                                    ml_error *err)
{
    ml_mlb_writer *w;
    ml_status s = ml_mlb_writer_new_types(h, flags, types, fn, ctx, &w, err);
    if (s)
        return s;
    const ml_tensor *t;
    while (s == ML_OK && (t = ml_mlb_writer_expect(w))) {
        ml_tensor copy = *t;
        s = put_random(w, &copy, &seed, err);
    }
    if (s) {
        ml_mlb_writer_free(w);
        return s;
    }
    return ml_mlb_writer_finish(w, err);
}
