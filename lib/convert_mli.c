/* convert_mli.c - reading .mli importance matrices (the spec's "Importance
 * matrix file"): a 40-byte little-endian header and float64 sums of squares
 * per input channel, for each layer the inputs of wq/wk/wv (dim), of wo
 * (q_dim), of w1/w3 (dim) and of w2 (hidden_dim), then the classifier's
 * input (dim).  The converter turns them into Q4_0 fit importances. */
#include "convert_impl.h"
#include "io.h"

#include <math.h>
#include <stdlib.h>

struct ml_mli {
    ml__input in; /* when opened from a path */
    const uint8_t *data;
    size_t size;
    ml_mli_info info;
    uint64_t per_layer; /* doubles per layer */
};

static uint32_t eff_q_dim(const ml_mli_info *i)
{
    return i->q_dim ? i->q_dim : i->dim;
}

static ml_status parse(ml_mli *m, ml_error *err)
{
    const uint8_t *p = m->data;
    if (m->size < ML_MLI_HEADER_SIZE)
        return ml__err(err, ML_E_FORMAT, "", (int64_t)m->size,
                       "%zu bytes: shorter than the %d-byte header", m->size, ML_MLI_HEADER_SIZE);
    if (memcmp(p, "MLI1", 4) != 0)
        return ml__err(err, ML_E_FORMAT, "magic", 0, "\"%.4s\" is not \"MLI1\"%s", (const char *)p,
                       memcmp(p, "MLB1", 4) == 0   ? ": this is an .mlb model"
                       : memcmp(p, "GGUF", 4) == 0 ? ": this is a GGUF file (llama.cpp's imatrix "
                                                     "files are not .mli)"
                                                   : "");
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
    /* Each term is below 2^18 and n_layers below 2^17: no overflow in 64 bits. */
    m->per_layer = 2ull * i->dim + eff_q_dim(i) + i->hidden_dim;
    uint64_t n = (uint64_t)i->n_layers * m->per_layer + i->dim;
    uint64_t want = ML_MLI_HEADER_SIZE + 8 * n;
    if ((uint64_t)m->size != want)
        return ml__err(err, ML_E_FORMAT, "", (int64_t)(m->size < want ? m->size : want),
                       "%zu bytes, the header implies %llu (40 + 8 x %llu sums)", m->size,
                       (unsigned long long)want, (unsigned long long)n);
    for (uint64_t k = 0; k < n; k++) {
        double v;
        uint64_t bits = ml__rd64(p + ML_MLI_HEADER_SIZE + 8 * k);
        memcpy(&v, &bits, 8);
        if (!(v >= 0) || !isfinite(v))
            return ml__err(err, ML_E_FORMAT, "sums", (int64_t)(ML_MLI_HEADER_SIZE + 8 * k),
                           "sum %llu is %g; sums of squares are finite and >= 0",
                           (unsigned long long)k, v);
    }
    return ML_OK;
}

static ml_status finish_open(ml_mli *m, ml_mli **out, ml_error *err)
{
    ml_status s = parse(m, err);
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
    ml_mli *m = calloc(1, sizeof *m);
    if (!m)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    ml_status s = ml__input_open(path, &m->in, err);
    if (s) {
        free(m);
        return s;
    }
    m->data = m->in.data;
    m->size = m->in.size;
    return finish_open(m, out, err);
}

ml_status ml_mli_open_memory(const void *buf, size_t len, ml_mli **out, ml_error *err)
{
    *out = NULL;
    ml_mli *m = calloc(1, sizeof *m);
    if (!m)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    m->data = buf;
    m->size = len;
    return finish_open(m, out, err);
}

void ml_mli_close(ml_mli *m)
{
    if (!m)
        return;
    ml__input_close(&m->in);
    free(m);
}

const ml_mli_info *ml_mli_get_info(const ml_mli *m)
{
    return &m->info;
}

ml_status ml_mli_check_model(const ml_mli *m, const ml_mlb_header *h, ml_error *err)
{
    const ml_mli_info *i = &m->info;
    ml_mlb_derived d;
    ml_status s = ml_mlb_header_validate(h, NULL, &d, err);
    if (s)
        return s;
    uint32_t want_q = d.q_dim == h->dim ? 0 : d.q_dim;
    static const char *const names[] = {"n_layers", "dim", "hidden_dim", "q_dim"};
    uint32_t have[] = {i->n_layers, i->dim, i->hidden_dim, i->q_dim};
    uint32_t want[] = {h->n_layers, h->dim, h->hidden_dim, want_q};
    for (int k = 0; k < 4; k++)
        if (have[k] != want[k] && !(k == 3 && eff_q_dim(i) == d.q_dim))
            return ml__err(err, ML_E_MISMATCH, names[k], 8 + 4 * k,
                           "the importance matrix has %u, the model %u", have[k], want[k]);
    return ML_OK;
}

ml_status ml_mli_sums(const ml_mli *m, ml_mli_slot slot, uint32_t layer, double *out, size_t n,
                      uint64_t *tokens, ml_error *err)
{
    const ml_mli_info *i = &m->info;
    uint64_t start, len;
    if (slot == ML_MLI_CLS_IN) {
        start = (uint64_t)i->n_layers * m->per_layer, len = i->dim;
    } else {
        if (layer >= i->n_layers || slot < ML_MLI_ATTN_IN || slot > ML_MLI_W2_IN)
            return ml__err(err, ML_E_INVAL, "", -1, "no slot %d of layer %u", (int)slot, layer);
        uint64_t off[] = {0, i->dim, (uint64_t)i->dim + eff_q_dim(i), 2ull * i->dim + eff_q_dim(i)};
        uint64_t lens[] = {i->dim, eff_q_dim(i), i->dim, i->hidden_dim};
        start = layer * m->per_layer + off[slot], len = lens[slot];
    }
    if (n != len)
        return ml__err(err, ML_E_INVAL, "", -1, "slot %d holds %llu sums, %zu asked", (int)slot,
                       (unsigned long long)len, n);
    const uint8_t *p = m->data + ML_MLI_HEADER_SIZE + 8 * start;
    for (size_t k = 0; k < n; k++) {
        uint64_t bits = ml__rd64(p + 8 * k);
        memcpy(&out[k], &bits, 8);
    }
    if (tokens)
        *tokens = slot == ML_MLI_CLS_IN ? i->cls_tokens : i->layer_tokens;
    return ML_OK;
}
