/* mlb_load.c - opening an .mlb model: map it read-only, apply the loader's
 * validation table (mlb(5)) in the spec's order, bind every array in place
 * (scales as stored, f32 or f16; block types' arrays as they are).  A
 * wtype 3 file's type table is checked entry by entry as the layout reaches
 * each matrix.  One pass over the file at most: the scan of Q8_0 quants
 * for the forbidden byte -128. */
#include "base/io.h"

#include <stdio.h>
#include <stdlib.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "libmlcore binds arrays in place and needs a little-endian host"
#endif

struct ml_mlb {
    ml__input in;
    ml_mlb_header h;
    ml_mlb_derived d;
    const uint8_t *flags; /* n_layers bytes, or NULL */
    const uint8_t *types; /* wtype 3: the type table, else NULL */
    ml_tensor *tensors;
    size_t n_tensors;
    size_t *first_expert; /* per layer: index of exp.0.w1, SIZE_MAX if none */
};

/* Rejects the byte -128 (0x80) anywhere in a Q8_0 quant array. */
static ml_status scan_q8(const uint8_t *base, const ml_tensor *t, ml_error *err)
{
    const uint8_t *q = base + t->offset;
    const uint8_t *hit = memchr(q, 0x80, (size_t)t->nbytes);
    if (!hit)
        return ML_OK;
    uint64_t i = (uint64_t)(hit - q);
    return ml__err(err, ML_E_FORMAT, t->name, (int64_t)(t->offset + i),
                   "Q8_0 quant of row %llu, column %llu is -128 (quants must be in [-127, 127])",
                   (unsigned long long)(i / t->cols), (unsigned long long)(i % t->cols));
}

static int is_quant(const ml_tensor *t)
{
    return t->type == ML_TYPE_Q8_0 || t->type == ML_TYPE_Q4_0;
}

/* Counts the arrays, stopping at the first that does not fit in the file:
 * every array starts 64 bytes after the previous one at least, so the work
 * is bounded by the file size, not by the n_layers a short file claims. */
static ml_status count_arrays(const ml_mlb *m, size_t *n, ml_error *err)
{
    ml_mlb_layout it;
    ml_tensor t;
    int r;
    ml_error local;
    if (!err)
        err = &local;
    *n = 0;
    ml_mlb_layout_begin_types(&it, &m->h, m->flags, m->types);
    while ((r = ml_mlb_layout_next(&it, &t, err)) == 1) {
        uint64_t e = t.scale_nbytes ? t.scale_offset + t.scale_nbytes : t.offset + t.nbytes;
        if (e > m->in.size)
            return ml__err(err, ML_E_FORMAT, t.name, (int64_t)t.offset,
                           "array ends at byte %llu but the file has %zu bytes "
                           "(truncated, or the header is wrong)",
                           (unsigned long long)e, m->in.size);
        ++*n;
    }
    return r < 0 ? err->code : ML_OK;
}

/* Where each layer's experts start, for ml_mlb_get_expert. */
static ml_status index_experts(ml_mlb *m, ml_error *err)
{
    if (!m->h.n_experts)
        return ML_OK;
    m->first_expert = malloc(m->h.n_layers * sizeof *m->first_expert);
    if (!m->first_expert)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    for (uint32_t l = 0; l < m->h.n_layers; l++)
        m->first_expert[l] = SIZE_MAX;
    for (size_t i = 0; i < m->n_tensors; i++) {
        const ml_tensor *t = &m->tensors[i];
        if (t->role == ML_R_EW1 && t->expert == 0)
            m->first_expert[t->layer] = i;
    }
    return ML_OK;
}

/* Checks the body fits in the file, and collects the tensors. */
static ml_status bind_tensors(ml_mlb *m, ml_error *err)
{
    size_t n = 0;
    ml_status s = count_arrays(m, &n, err);
    if (s)
        return s;
    ml_mlb_layout it;
    ml_tensor t;
    /* Every array starts 64 bytes after the previous one at least, so n is
     * bounded by the file size and the allocation by what we mapped. */
    m->tensors = calloc(n, sizeof *m->tensors);
    if (!m->tensors)
        return ml__err(err, ML_E_NOMEM, "", -1, "cannot allocate %zu tensor entries", n);
    ml_mlb_layout_begin_types(&it, &m->h, m->flags, m->types);
    while (ml_mlb_layout_next(&it, &t, NULL) == 1) {
        const void *sc = m->in.data + t.scale_offset;
        t.data = m->in.data + t.offset;
        if (is_quant(&t) && m->h.scale_f16)
            t.scales_f16 = sc;
        else if (is_quant(&t))
            t.scales = sc;
        m->tensors[m->n_tensors++] = t;
    }
    for (size_t i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].type == ML_TYPE_Q8_0 && (s = scan_q8(m->in.data, &m->tensors[i], err)))
            return s;
    return index_experts(m, err);
}

/* The type table must be in the file before the layout can read it; its
 * entries are checked as the layout reaches each matrix. */
static ml_status bind_types(ml_mlb *m, ml_error *err)
{
    uint64_t off = ml_mlb_types_offset(&m->h), n = ml_mlb_matrix_count(&m->h, m->flags);
    if (off > m->in.size || m->in.size - off < n)
        return ml__err(err, ML_E_FORMAT, "mat_types", (int64_t)off,
                       "array ends at byte %llu but the file has %zu bytes "
                       "(truncated, or the header is wrong)",
                       (unsigned long long)(off + n), m->in.size);
    m->types = m->in.data + off;
    return ML_OK;
}

static ml_status load(ml_mlb *m, ml_error *err)
{
    if (m->in.size == 0)
        return ml__err(err, ML_E_FORMAT, "", 0, "empty file");
    if (m->in.size < ML_MLB_HEADER_SIZE)
        return ml__err(err, ML_E_FORMAT, "", 0,
                       "the file has %zu bytes, fewer than the 256-byte header", m->in.size);
    ml_mlb_header_decode(m->in.data, &m->h);
    ml_status s = ml_mlb_header_validate(&m->h, m->in.data, &m->d, err);
    if (s)
        return s;
    if (m->h.layer_flags) {
        if (m->in.size - ML_MLB_HEADER_SIZE < m->h.n_layers)
            return ml__err(err, ML_E_FORMAT, "layer_flags", ML_MLB_HEADER_SIZE,
                           "%u flag bytes do not fit in the file's %zu bytes", m->h.n_layers,
                           m->in.size);
        m->flags = m->in.data + ML_MLB_HEADER_SIZE;
        if ((s = ml_mlb_layer_flags_validate(&m->h, m->flags, err)))
            return s;
    }
    if (m->h.wtype == ML_WTYPE_TABLE && (s = bind_types(m, err)))
        return s;
    return bind_tensors(m, err);
}

static ml_status finish_open(ml_mlb *m, ml_mlb **out, ml_error *err)
{
    ml_status s = load(m, err);
    if (s) {
        ml_mlb_close(m);
        return s;
    }
    *out = m;
    return ML_OK;
}

ml_status ml_mlb_open(const char *path, ml_mlb **out, ml_error *err)
{
    return ml_mlb_open_ex(path, 0, out, err);
}

/* The model's bytes copied out of the mapping (ml__input_copy), every
 * pointer into them moved along. */
static ml_status copy_out(ml_mlb *m, ml_error *err)
{
    const uint8_t *old = m->in.data;
    ml_status s = ml__input_copy(&m->in, err);
    if (s || m->in.data == old)
        return s;
#define REBASE(p) ((p) = (void *)(m->in.data + ((const uint8_t *)(p) - old)))
    if (m->flags)
        REBASE(m->flags);
    if (m->types)
        REBASE(m->types);
    for (size_t i = 0; i < m->n_tensors; i++) {
        ml_tensor *t = &m->tensors[i];
        REBASE(t->data);
        if (t->scales)
            REBASE(t->scales);
        if (t->scales_f16)
            REBASE(t->scales_f16);
    }
#undef REBASE
    return ML_OK;
}

ml_status ml_mlb_open_ex(const char *path, unsigned flags, ml_mlb **out, ml_error *err)
{
    *out = NULL;
    if (flags & ~ML_MLB_READ)
        return ml__err(err, ML_E_INVAL, "", -1, "unknown flags 0x%x", flags & ~ML_MLB_READ);
    ml_mlb *m = calloc(1, sizeof *m);
    if (!m)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    ml_status s = ml__input_open(path, &m->in, err);
    if (s) {
        free(m);
        return s;
    }
    /* Checked on the mapping first: a file that is not a model is refused
     * before anything is copied, with the mapping's very error. */
    if ((s = finish_open(m, out, err)) || !(flags & ML_MLB_READ))
        return s;
    if ((s = copy_out(*out, err))) {
        ml_mlb_close(*out);
        *out = NULL;
    }
    return s;
}

ml_status ml_mlb_open_memory(const void *buf, size_t len, ml_mlb **out, ml_error *err)
{
    *out = NULL;
    ml_mlb *m = calloc(1, sizeof *m);
    if (!m)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    if (((uintptr_t)buf % ML_MLB_ALIGN) == 0) {
        m->in.data = buf;
    } else { /* arrays are read in place and must be aligned */
        void *copy = NULL;
        if (posix_memalign(&copy, ML_MLB_ALIGN, len ? len : 1)) {
            free(m);
            return ml__err(err, ML_E_NOMEM, "", -1, "cannot allocate %zu bytes", len);
        }
        if (len)
            memcpy(copy, buf, len);
        m->in.data = copy;
        m->in.owned = copy;
    }
    m->in.size = len;
    return finish_open(m, out, err);
}

void ml_mlb_close(ml_mlb *m)
{
    if (!m)
        return;
    ml__input_close(&m->in);
    free(m->tensors);
    free(m->first_expert);
    free(m);
}

const ml_mlb_header *ml_mlb_get_header(const ml_mlb *m)
{
    return &m->h;
}

const ml_mlb_derived *ml_mlb_get_derived(const ml_mlb *m)
{
    return &m->d;
}

uint64_t ml_mlb_file_size(const ml_mlb *m)
{
    return m->in.size;
}

const uint8_t *ml_mlb_file_data(const ml_mlb *m)
{
    return m->in.data;
}

uint8_t ml_mlb_layer_flag(const ml_mlb *m, uint32_t l)
{
    return m->flags && l < m->h.n_layers ? m->flags[l] : 0;
}

const uint8_t *ml_mlb_types(const ml_mlb *m)
{
    return m->types;
}

size_t ml_mlb_n_tensors(const ml_mlb *m)
{
    return m->n_tensors;
}

const ml_tensor *ml_mlb_tensor(const ml_mlb *m, size_t i)
{
    return i < m->n_tensors ? &m->tensors[i] : NULL;
}

const ml_tensor *ml_mlb_find(const ml_mlb *m, const char *name)
{
    for (size_t i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0)
            return &m->tensors[i];
    return NULL;
}

const ml_tensor *ml_mlb_get(const ml_mlb *m, ml_role role, int32_t layer)
{
    for (size_t i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].role == role && m->tensors[i].layer == layer)
            return &m->tensors[i];
    return NULL;
}

const ml_tensor *ml_mlb_get_expert(const ml_mlb *m, ml_role role, int32_t layer, uint32_t expert)
{
    if (role < ML_R_EW1 || role > ML_R_EB3 || !m->first_expert || layer < 0 ||
        (uint32_t)layer >= m->h.n_layers || expert >= m->h.n_experts)
        return NULL;
    size_t first = m->first_expert[layer];
    if (first == SIZE_MAX)
        return NULL;
    /* a span is 3 arrays, or 6 with the experts' biases (mlb(5)) */
    size_t per = m->h.moe_flags & ML_MOE_EXPERT_BIAS ? 6 : 3, off = (size_t)(role - ML_R_EW1);
    if (off >= per)
        return NULL;
    return &m->tensors[first + expert * per + off];
}

/* Bytes of an array with its padding, as it lies in the file. */
static uint64_t padded(const ml_tensor *t)
{
    uint64_t end = t->scale_nbytes ? t->scale_offset + t->scale_nbytes : t->offset + t->nbytes;
    return (end + ML_MLB_ALIGN - 1) / ML_MLB_ALIGN * ML_MLB_ALIGN - t->offset;
}

void ml_mlb_moe_sizes_of(const ml_mlb *m, ml_mlb_moe_sizes *out)
{
    memset(out, 0, sizeof *out);
    for (uint32_t l = 0; l < m->h.n_layers; l++) {
        if (!ml_mlb_layer_is_moe(&m->h, ml_mlb_layer_flag(m, l)))
            continue;
        out->moe_layers++;
        const ml_tensor *a = ml_mlb_get_expert(m, ML_R_EW1, (int32_t)l, 0);
        const ml_tensor *b = m->h.n_experts > 1
                                 ? ml_mlb_get_expert(m, ML_R_EW1, (int32_t)l, 1)
                                 : NULL;
        uint64_t span = 0;
        if (b) { /* spans follow each other: one span is the distance */
            span = b->offset - a->offset;
        } else if (a) {
            for (unsigned r = ML_R_EW1; r <= ML_R_EB3; r++) {
                const ml_tensor *t = ml_mlb_get_expert(m, (ml_role)r, (int32_t)l, 0);
                span += t ? padded(t) : 0;
            }
        }
        if (out->moe_layers == 1)
            out->expert_bytes = span;
        out->active_bytes += span * m->h.n_experts_used;
    }
    for (size_t i = 0; i < m->n_tensors; i++) {
        const ml_tensor *t = &m->tensors[i];
        if (t->type != ML_TYPE_U8 && t->expert < 0)
            out->active_bytes += t->nbytes + t->scale_nbytes;
    }
}
