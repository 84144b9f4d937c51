/* mli.c - importance matrices (.mli, the spec's "Importance matrix file"):
 * a 40-byte little-endian header and float64 sums of squares per input
 * channel, for each layer the inputs of wq/wk/wv (dim), of wo (q_dim), of
 * w1/w3 (dim) and of w2 (hidden_dim), then the classifier's input (dim).
 * Reading with validation, creating for a model, merging, writing; the
 * runtime adds to the sums through ml__mli_slot (mli_impl.h). */
#include "format/mli_impl.h"

#include "base/io.h"

#include <math.h>
#include <stdlib.h>

struct ml_mli {
    ml_mli_info info;
    uint64_t per_layer; /* doubles per layer */
    uint64_t n;         /* doubles in all */
    double *sums;
};

static uint32_t eff_q_dim(const ml_mli_info *i)
{
    return i->q_dim ? i->q_dim : i->dim;
}

/* Shapes checked against the .mlb limits, so every count below fits 64
 * bits (each term below 2^18, n_layers below 2^17) and, once bounded by
 * a file size or an allocation, size_t. */
static void set_counts(ml_mli *m)
{
    const ml_mli_info *i = &m->info;
    m->per_layer = 2ull * i->dim + eff_q_dim(i) + i->hidden_dim;
    m->n = (uint64_t)i->n_layers * m->per_layer + i->dim;
}

static ml_status alloc_sums(ml_mli *m, ml_error *err)
{
    size_t bytes;
    if (m->n > SIZE_MAX / 8 || ml__to_size(8 * m->n, &bytes))
        return ml__err(err, ML_E_NOMEM, "", -1, "%llu sums do not fit in memory",
                       (unsigned long long)m->n);
    m->sums = calloc(m->n ? m->n : 1, sizeof(double));
    if (!m->sums)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory for %llu sums",
                       (unsigned long long)m->n);
    return ML_OK;
}

static ml_status parse_header(ml_mli *m, const uint8_t *p, size_t size, ml_error *err)
{
    if (size < ML_MLI_HEADER_SIZE)
        return ml__err(err, ML_E_FORMAT, "", (int64_t)size,
                       "%zu bytes: shorter than the %d-byte header", size, ML_MLI_HEADER_SIZE);
    if (memcmp(p, "MLI1", 4) != 0)
        return ml__err(err, ML_E_FORMAT, "magic", 0, "\"%.4s\" is not \"MLI1\"%s", (const char *)p,
                       memcmp(p, "MLB1", 4) == 0 ? ": this is an .mlb model" : "");
    ml_mli_info *i = &m->info;
    i->version = ml__rd32(p + 4);
    i->n_layers = ml__rd32(p + 8);
    i->dim = ml__rd32(p + 12);
    i->hidden_dim = ml__rd32(p + 16);
    i->q_dim = ml__rd32(p + 20);
    i->layer_tokens = ml__rd64(p + 24);
    i->cls_tokens = ml__rd64(p + 32);
    if (i->version == 0)
        return ml__err(err, ML_E_FORMAT, "version", 4, "0 is not a version");
    if (i->version > 1)
        return ml__err(err, ML_E_UNSUPPORTED, "version", 4, "version %u is newer than 1",
                       i->version);
    static const struct {
        const char *name;
        unsigned off;
    } dims[] = {{"n_layers", 8}, {"dim", 12}, {"hidden_dim", 16}};
    for (size_t k = 0; k < 3; k++) {
        uint32_t v = ml__rd32(p + dims[k].off);
        if (v == 0 || v > ML_MLB_DIM_LIMIT)
            return ml__err(err, ML_E_SHAPE, dims[k].name, dims[k].off, "%u is outside 1..%u", v,
                           ML_MLB_DIM_LIMIT);
    }
    if (i->q_dim > ML_MLB_QDIM_LIMIT)
        return ml__err(err, ML_E_SHAPE, "q_dim", 20, "%u is above %u", i->q_dim, ML_MLB_QDIM_LIMIT);
    set_counts(m);
    uint64_t want = ML_MLI_HEADER_SIZE + 8 * m->n;
    if ((uint64_t)size != want)
        return ml__err(err, ML_E_FORMAT, "", (int64_t)(size < want ? size : want),
                       "%zu bytes, the header implies %llu (40 + 8 x %llu sums)", size,
                       (unsigned long long)want, (unsigned long long)m->n);
    return ML_OK;
}

/* The size was checked against the header, so the sums fit in memory. */
static ml_status parse(ml_mli *m, const uint8_t *p, size_t size, ml_error *err)
{
    ml_status s = parse_header(m, p, size, err);
    if (s || (s = alloc_sums(m, err)))
        return s;
    for (uint64_t k = 0; k < m->n; k++) {
        uint64_t bits = ml__rd64(p + ML_MLI_HEADER_SIZE + 8 * k);
        double v;
        memcpy(&v, &bits, 8);
        if (!(v >= 0) || !isfinite(v))
            return ml__err(err, ML_E_FORMAT, "sums", (int64_t)(ML_MLI_HEADER_SIZE + 8 * k),
                           "sum %llu is %g; sums of squares are finite and >= 0",
                           (unsigned long long)k, v);
        m->sums[k] = v;
    }
    return ML_OK;
}

static ml_status open_bytes(const uint8_t *p, size_t size, ml_mli **out, ml_error *err)
{
    if ((size >= 4 && memcmp(p, "GGUF", 4) == 0) || ml__mli_looks_llama_dat(p, size))
        return ml__mli_from_llama(p, size, out, err);
    ml_mli *m = calloc(1, sizeof *m);
    if (!m)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    ml_status s = parse(m, p, size, err);
    if (s) {
        ml_mli_close(m);
        return s;
    }
    *out = m;
    return ML_OK;
}

ml_status ml_mli_open(const char *path, ml_mli **out, ml_error *err)
{
    *out = NULL;
    ml__input in;
    ml_status s = ml__input_open(path, &in, err);
    if (s)
        return s;
    s = open_bytes(in.data, in.size, out, err);
    ml__input_close(&in);
    return s;
}

ml_status ml_mli_open_memory(const void *buf, size_t len, ml_mli **out, ml_error *err)
{
    *out = NULL;
    return open_bytes(buf, len, out, err);
}

ml_status ml_mli_new(const ml_mlb_header *h, ml_mli **out, ml_error *err)
{
    *out = NULL;
    ml_mlb_derived d;
    ml_status s = ml_mlb_header_validate(h, NULL, &d, err);
    if (s)
        return s;
    const ml_mli_info shape = {.version = 1,
                               .n_layers = h->n_layers,
                               .dim = h->dim,
                               .hidden_dim = h->hidden_dim,
                               .q_dim = d.q_dim == h->dim ? 0 : d.q_dim};
    return ml__mli_alloc(&shape, out, err);
}

ml_status ml__mli_alloc(const ml_mli_info *shape, ml_mli **out, ml_error *err)
{
    *out = NULL;
    ml_mli *m = calloc(1, sizeof *m);
    if (!m)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    m->info = *shape;
    m->info.layer_tokens = m->info.cls_tokens = 0;
    set_counts(m);
    ml_status s = alloc_sums(m, err);
    if (s) {
        ml_mli_close(m);
        return s;
    }
    *out = m;
    return ML_OK;
}

void ml_mli_close(ml_mli *m)
{
    if (!m)
        return;
    free(m->sums);
    free(m);
}

const ml_mli_info *ml_mli_get_info(const ml_mli *m)
{
    return &m->info;
}

/* Compares the four shape fields; k names the first that differs. */
static ml_status check_shape(const ml_mli_info *i, const uint32_t want[4], const char *have_name,
                             const char *want_name, ml_error *err)
{
    static const char *const names[] = {"n_layers", "dim", "hidden_dim", "q_dim"};
    uint32_t have[] = {i->n_layers, i->dim, i->hidden_dim, eff_q_dim(i)};
    for (int k = 0; k < 4; k++)
        if (have[k] != want[k])
            return ml__err(err, ML_E_MISMATCH, names[k], 8 + 4 * k,
                           "%s has %u, %s %u", have_name, have[k], want_name, want[k]);
    return ML_OK;
}

ml_status ml_mli_check_model(const ml_mli *m, const ml_mlb_header *h, ml_error *err)
{
    ml_mlb_derived d;
    ml_status s = ml_mlb_header_validate(h, NULL, &d, err);
    if (s)
        return s;
    uint32_t want[] = {h->n_layers, h->dim, h->hidden_dim, d.q_dim};
    return check_shape(&m->info, want, "the importance matrix", "the model", err);
}

size_t ml_mli_slot_size(const ml_mli *m, ml_mli_slot slot)
{
    const ml_mli_info *i = &m->info;
    switch (slot) {
    case ML_MLI_WO_IN: return eff_q_dim(i);
    case ML_MLI_W2_IN: return i->hidden_dim;
    case ML_MLI_ATTN_IN:
    case ML_MLI_FFN_IN:
    case ML_MLI_CLS_IN: return i->dim;
    }
    return 0;
}

double *ml__mli_slot(ml_mli *m, ml_mli_slot slot, uint32_t layer)
{
    const ml_mli_info *i = &m->info;
    if (slot == ML_MLI_CLS_IN)
        return m->sums + (uint64_t)i->n_layers * m->per_layer;
    uint64_t off[] = {0, i->dim, (uint64_t)i->dim + eff_q_dim(i), 2ull * i->dim + eff_q_dim(i)};
    return m->sums + layer * m->per_layer + off[slot];
}

void ml__mli_count(ml_mli *m, uint64_t layer_tokens, uint64_t cls_tokens)
{
    m->info.layer_tokens += layer_tokens;
    m->info.cls_tokens += cls_tokens;
}

ml_status ml_mli_sums(const ml_mli *m, ml_mli_slot slot, uint32_t layer, double *out, size_t n,
                      uint64_t *tokens, ml_error *err)
{
    if (slot < ML_MLI_ATTN_IN || slot > ML_MLI_CLS_IN ||
        (slot != ML_MLI_CLS_IN && layer >= m->info.n_layers))
        return ml__err(err, ML_E_INVAL, "", -1, "no slot %d of layer %u", (int)slot, layer);
    size_t len = ml_mli_slot_size(m, slot);
    if (n != len)
        return ml__err(err, ML_E_INVAL, "", -1, "slot %d holds %zu sums, %zu asked", (int)slot,
                       len, n);
    memcpy(out, ml__mli_slot((ml_mli *)m, slot, layer), n * sizeof *out);
    if (tokens)
        *tokens = slot == ML_MLI_CLS_IN ? m->info.cls_tokens : m->info.layer_tokens;
    return ML_OK;
}

ml_status ml_mli_merge(ml_mli *dst, const ml_mli *src, ml_error *err)
{
    const ml_mli_info *d = &dst->info, *s = &src->info;
    uint32_t want[] = {d->n_layers, d->dim, d->hidden_dim, eff_q_dim(d)};
    ml_status st = check_shape(s, want, "this file", "the first file", err);
    if (st)
        return st;
    uint64_t lt, ct;
    if (ml__add64(d->layer_tokens, s->layer_tokens, &lt) ||
        ml__add64(d->cls_tokens, s->cls_tokens, &ct))
        return ml__err(err, ML_E_FORMAT, "layer_tokens", 24,
                       "the token counts overflow 64 bits when added");
    for (uint64_t k = 0; k < dst->n; k++)
        if (!isfinite(dst->sums[k] + src->sums[k]))
            return ml__err(err, ML_E_FORMAT, "sums", (int64_t)(ML_MLI_HEADER_SIZE + 8 * k),
                           "sum %llu overflows when added", (unsigned long long)k);
    for (uint64_t k = 0; k < dst->n; k++)
        dst->sums[k] += src->sums[k];
    dst->info.layer_tokens = lt;
    dst->info.cls_tokens = ct;
    return ML_OK;
}

ml_status ml_mli_write(const ml_mli *m, ml_write_fn fn, void *ctx, ml_error *err)
{
    const ml_mli_info *i = &m->info;
    uint8_t buf[4096];
    memcpy(buf, "MLI1", 4);
    ml__wr32(buf + 4, 1);
    ml__wr32(buf + 8, i->n_layers);
    ml__wr32(buf + 12, i->dim);
    ml__wr32(buf + 16, i->hidden_dim);
    ml__wr32(buf + 20, i->q_dim);
    ml__wr64(buf + 24, i->layer_tokens);
    ml__wr64(buf + 32, i->cls_tokens);
    ml_status s = fn(ctx, buf, ML_MLI_HEADER_SIZE, err);
    for (uint64_t k = 0; !s && k < m->n;) {
        size_t n = 0;
        for (; n < sizeof buf / 8 && k < m->n; n++, k++) {
            uint64_t bits;
            memcpy(&bits, &m->sums[k], 8);
            ml__wr64(buf + 8 * n, bits);
        }
        s = fn(ctx, buf, 8 * n, err);
    }
    return s;
}

int ml_mli_matrix_slot(const ml_mlb_header *h, ml_role role, size_t *channels)
{
    uint32_t head_dim = h->head_dim ? h->head_dim : (h->n_heads ? h->dim / h->n_heads : 0);
    uint64_t q_dim = (uint64_t)h->n_heads * head_dim;
    uint64_t lin_vd = (uint64_t)h->lin_v_heads * h->lin_v_dim;
    size_t n = h->dim;
    int slot;
    switch (role) {
    case ML_R_WQ:
    case ML_R_WK:
    case ML_R_WV:
    case ML_R_WG:
    case ML_R_LQKV:
    case ML_R_LZ:
    case ML_R_LB:
    case ML_R_LA: slot = ML_MLI_ATTN_IN; break;
    case ML_R_WO: slot = ML_MLI_WO_IN, n = (size_t)q_dim; break;
    case ML_R_LOUT:
        if (lin_vd > q_dim)
            return -1;
        slot = ML_MLI_WO_IN, n = (size_t)lin_vd;
        break;
    case ML_R_W1:
    case ML_R_W3: slot = ML_MLI_FFN_IN; break;
    case ML_R_W2: slot = ML_MLI_W2_IN, n = h->hidden_dim; break;
    case ML_R_WCLS: slot = ML_MLI_CLS_IN; break;
    case ML_R_TOK_EMB:
        if (!h->shared_classifier)
            return -1;
        slot = ML_MLI_CLS_IN;
        break;
    default: return -1;
    }
    if (channels)
        *channels = n;
    return slot;
}

ml_status ml_mli_importance(const ml_mli *m, const ml_mlb_header *h, ml_role role, int32_t layer,
                            size_t cols, float *imp, int *used, ml_error *err)
{
    *used = 0;
    size_t channels;
    int slot = ml_mli_matrix_slot(h, role, &channels);
    if (slot < 0)
        return ML_OK;
    if (channels != cols || (slot != ML_MLI_CLS_IN && (layer < 0 || (uint32_t)layer >= m->info.n_layers)))
        return ml__err(err, ML_E_MISMATCH, "", -1,
                       "a matrix of %zu columns in layer %d does not fit slot %d of the "
                       "importance matrix",
                       cols, (int)layer, slot);
    uint64_t tokens = slot == ML_MLI_CLS_IN ? m->info.cls_tokens : m->info.layer_tokens;
    if (tokens == 0)
        return ML_OK;
    const double *sums = ml__mli_slot((ml_mli *)m, (ml_mli_slot)slot, layer < 0 ? 0 : (uint32_t)layer);
    ml_status s = ml_quant_importance(sums, cols, tokens, imp, err);
    if (!s)
        *used = 1;
    return s;
}
