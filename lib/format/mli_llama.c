/* mli_llama.c - llama.cpp's importance matrices read as an .mli: the GGUF
 * files llama-imatrix writes (general.type "imatrix"; per matrix a tensor
 * NAME.in_sum2, the sums of its squared inputs per channel, and
 * NAME.counts, the tokens summed) and its older .dat files (per matrix
 * its name, a number of chunks and the mean squares times it).  Each
 * matrix goes to the slot that feeds it (mli(5)), its sums scaled to the
 * largest count among the layers' so that every slot reads as if summed
 * over the same tokens: the quantizer uses only each slot's mean square
 * per channel, relative to the slot's mean. */
#include "format/mli_impl.h"

#include "base/io.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One matrix's sums, as found in the file. */
typedef struct entry {
    char name[ML_GGUF_NAME_MAX + 1]; /* for messages */
    const uint8_t *sums;             /* float32, little-endian */
    uint64_t cols;
    int64_t at;                      /* file offset of its record */
    double count;                    /* tokens (GGUF) or chunks (.dat) */
    int slot;
    uint32_t layer;
    int is_wo;                       /* attn_output (q_dim), not ssm_out */
} entry;

/* Which slot a matrix of llama.cpp's names reads (X of "blk.N.X.weight"),
 * -1 for the rest (experts, shared experts). */
static int slot_of(const char *what)
{
    static const struct {
        const char *name;
        int slot;
    } table[] = {
        {"attn_q", ML_MLI_ATTN_IN},    {"attn_k", ML_MLI_ATTN_IN},
        {"attn_v", ML_MLI_ATTN_IN},    {"attn_qkv", ML_MLI_ATTN_IN},
        {"attn_gate", ML_MLI_ATTN_IN}, {"ssm_beta", ML_MLI_ATTN_IN},
        {"ssm_alpha", ML_MLI_ATTN_IN}, {"attn_output", ML_MLI_WO_IN},
        {"ssm_out", ML_MLI_WO_IN},     {"ffn_gate", ML_MLI_FFN_IN},
        {"ffn_up", ML_MLI_FFN_IN},     {"ffn_down", ML_MLI_W2_IN},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(what, table[i].name) == 0)
            return table[i].slot;
    return -1;
}

/* e->name ("blk.N.X.weight" or "output.weight") into its slot and layer;
 * 0 when the .mli has no slot for it. */
static int place(entry *e)
{
    if (strcmp(e->name, "output.weight") == 0) {
        e->slot = ML_MLI_CLS_IN, e->layer = 0;
        return 1;
    }
    unsigned layer;
    int n = 0;
    char what[64];
    if (sscanf(e->name, "blk.%u.%63[a-z_]%n", &layer, what, &n) != 2 ||
        strcmp(e->name + n, ".weight") != 0)
        return 0;
    e->slot = slot_of(what), e->layer = layer, e->is_wo = strcmp(what, "attn_output") == 0;
    return e->slot >= 0 && layer < ML_MLB_DIM_LIMIT;
}

/* n float32 at p (file offset at) finite and >= 0 (name: for messages). */
static ml_status check_sums(const uint8_t *p, uint64_t n, int64_t at, const char *name,
                            ml_error *err)
{
    for (uint64_t k = 0; k < n; k++) {
        float v;
        memcpy(&v, p + 4 * k, 4);
        if (!(v >= 0) || !isfinite(v))
            return ml__err(err, ML_E_FORMAT, name, at + (int64_t)(4 * k),
                           "sum %llu is %g; sums of squares are finite and >= 0",
                           (unsigned long long)k, (double)v);
    }
    return ML_OK;
}

/* A count (of tokens or chunks) in 0..2^53 (a whole u64, and not NaN). */
static ml_status check_count(double v, const char *name, int64_t at, ml_error *err)
{
    if (v >= 0 && v <= 0x1p53)
        return ML_OK;
    return ml__err(err, ML_E_FORMAT, name, at, "a count of %g", v);
}

/* ---- llama-imatrix's GGUF ---- */

/* The tensor NAME.counts beside sums (NAME.in_sum2): F32, one count per
 * matrix (experts have several), into e->count; *mats: the matrices. */
static ml_status gguf_count(const ml_gguf *g, const ml_gguf_tensor *sums, entry *e,
                            uint64_t *mats, ml_error *err)
{
    char name[ML_GGUF_NAME_MAX + 16];
    snprintf(name, sizeof name, "%s.counts", e->name);
    const ml_gguf_tensor *c = ml_gguf_find_tensor(g, name);
    if (!c)
        return ml__err(err, ML_E_FORMAT, sums->name, (int64_t)sums->info_offset,
                       "no tensor %s beside it", name);
    const ml_gguf_tensor *bad = sums->type != ML_GGML_F32 ? sums : c->type != ML_GGML_F32 ? c : NULL;
    if (bad)
        return ml__err(err, ML_E_FORMAT, bad->name, (int64_t)bad->info_offset, "type %s, not F32",
                       bad->type_name);
    if (c->n_elements != sums->rows)
        return ml__err(err, ML_E_FORMAT, c->name, (int64_t)c->info_offset,
                       "%llu counts for %llu rows of sums", (unsigned long long)c->n_elements,
                       (unsigned long long)sums->rows);
    float v;
    memcpy(&v, c->data, 4);
    e->count = v, *mats = sums->rows;
    return check_count(e->count, c->name, (int64_t)c->file_offset, err);
}

/* general.type, when there, must say "imatrix". */
static ml_status gguf_kind(const ml_gguf *g, ml_error *err)
{
    const ml_gguf_kv *kv = ml_gguf_find(g, "general.type");
    const char *type;
    size_t len;
    if (!kv)
        return ML_OK;
    ml_status s = ml_gguf_value_str(&kv->value, &type, &len, err);
    if (s || (len == 7 && memcmp(type, "imatrix", 7) == 0))
        return s;
    const int n = (int)(len < 40 ? len : 40);
    return ml__err(err, ML_E_FORMAT, "general.type", (int64_t)kv->value.offset,
                   "\"%.*s\": a GGUF %.*s, not an importance matrix", n, type, n, type);
}

/* The matrices of a GGUF with a slot into es[0..*n) (es: one per tensor);
 * experts (several rows of sums) are left out. */
static ml_status gguf_collect(const ml_gguf *g, entry *es, size_t *n, ml_error *err)
{
    ml_status s = gguf_kind(g, err);
    for (size_t i = 0; !s && i < ml_gguf_n_tensors(g); i++) {
        const ml_gguf_tensor *t = ml_gguf_tensor_at(g, i);
        size_t len = strlen(t->name);
        if (len < 8 || strcmp(t->name + len - 8, ".in_sum2") != 0)
            continue;
        entry e = {.sums = t->data, .cols = t->cols, .at = (int64_t)t->info_offset};
        snprintf(e.name, sizeof e.name, "%.*s", (int)(len - 8), t->name);
        uint64_t mats = 0;
        if (!(s = gguf_count(g, t, &e, &mats, err)) &&
            !(s = check_sums(t->data, t->n_elements, (int64_t)t->file_offset, t->name, err)) &&
            mats == 1 && place(&e))
            es[(*n)++] = e;
    }
    return s;
}

/* ---- llama-imatrix's .dat ----
 * i32 n_entries; per entry i32 len, the name, i32 ncall, i32 nval and
 * nval float32 (mean squares times ncall); then, in files since mid 2023,
 * i32 the last chunk, i32 len and the text's file name.  No magic: a
 * file is taken for one when its first entry's name looks like a
 * matrix's. */

/* An i32 at *at (advanced), in 0..max, or ML_E_FORMAT naming what. */
static ml_status dat_i32(const uint8_t *p, size_t size, size_t *at, uint32_t max, uint32_t *v,
                         const char *what, ml_error *err)
{
    if (size - *at < 4)
        return ml__err(err, ML_E_FORMAT, what, (int64_t)*at, "the file ends inside it");
    int32_t x = (int32_t)ml__rd32(p + *at);
    if (x < 0 || (uint32_t)x > max)
        return ml__err(err, ML_E_FORMAT, what, (int64_t)*at, "%d is outside 0..%u", x, max);
    *at += 4, *v = (uint32_t)x;
    return ML_OK;
}

int ml__mli_looks_llama_dat(const uint8_t *p, size_t size)
{
    if (size < 12)
        return 0;
    int32_t n = (int32_t)ml__rd32(p), len = (int32_t)ml__rd32(p + 4);
    return n > 0 && len > 4 && len <= ML_GGUF_NAME_MAX && (size_t)len <= size - 8 &&
           (memcmp(p + 8, "blk.", 4) == 0 || memcmp(p + 8, "outp", 4) == 0);
}

/* One entry at *at (advanced) into e; kept (*keep) when it has a slot. */
static ml_status dat_entry(const uint8_t *p, size_t size, size_t *at, entry *e, int *keep,
                           ml_error *err)
{
    uint32_t len, ncall, nval;
    const size_t start = *at;
    ml_status s = dat_i32(p, size, at, ML_GGUF_NAME_MAX, &len, "name length", err);
    if (s)
        return s;
    if (size - *at < len)
        return ml__err(err, ML_E_FORMAT, "name", (int64_t)*at, "the file ends inside it");
    memcpy(e->name, p + *at, len);
    e->name[len] = '\0', *at += len, e->at = (int64_t)start;
    if ((s = dat_i32(p, size, at, INT32_MAX, &ncall, e->name, err)) ||
        (s = dat_i32(p, size, at, INT32_MAX, &nval, e->name, err)))
        return s;
    if ((size - *at) / 4 < nval)
        return ml__err(err, ML_E_FORMAT, e->name, (int64_t)*at,
                       "%u sums, past the end of the file", nval);
    e->sums = p + *at, e->cols = nval, e->count = ncall;
    s = check_sums(e->sums, nval, (int64_t)*at, e->name, err);
    *at += 4 * (size_t)nval;
    *keep = !s && nval > 0 && place(e);
    return s;
}

static ml_status dat_collect(const uint8_t *p, size_t size, entry **es, size_t *n, ml_error *err)
{
    size_t at = 0;
    uint32_t n_entries, v;
    ml_status s = dat_i32(p, size, &at, (uint32_t)(size / 16), &n_entries, "n_entries", err);
    if (s || !(*es = calloc(n_entries, sizeof **es)))
        return s ? s : ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    for (uint32_t i = 0; i < n_entries && !s; i++) {
        int keep = 0;
        s = dat_entry(p, size, &at, &(*es)[*n], &keep, err);
        *n += keep;
    }
    if (s || at == size) /* older files end with the entries */
        return s;
    if ((s = dat_i32(p, size, &at, INT32_MAX, &v, "last chunk", err)))
        return s;
    const size_t left = size - at >= 4 ? size - at - 4 : 0; /* past the length */
    if ((s = dat_i32(p, size, &at, left < INT32_MAX ? (uint32_t)left : INT32_MAX, &v,
                     "dataset length", err)))
        return s;
    if (size - at != v)
        return ml__err(err, ML_E_FORMAT, "dataset", (int64_t)(at + v),
                       "%zu bytes after the dataset's name", size - at - v);
    return ML_OK;
}

/* ---- either: the shape and the slots ---- */

/* A width every entry of the slots in `want` (a bit per slot; only
 * attn_output's for wo_in, as ssm_out may be narrower) agrees on, 0 when
 * none has one. */
static ml_status width_of(const entry *es, size_t n, unsigned want, uint32_t *w, ml_error *err)
{
    *w = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(want >> es[i].slot & 1) || (es[i].slot == ML_MLI_WO_IN && !es[i].is_wo))
            continue;
        if (es[i].cols == 0 || es[i].cols > ML_MLB_DIM_LIMIT || (*w && es[i].cols != *w))
            return ml__err(err, ML_E_SHAPE, es[i].name, es[i].at,
                           "%llu channels where the other matrices of its kind have %u",
                           (unsigned long long)es[i].cols, *w);
        *w = (uint32_t)es[i].cols;
    }
    return ML_OK;
}

/* The model's shape as the file shows it: every width must appear. */
static ml_status shape_of(const entry *es, size_t n, ml_mli_info *info, ml_error *err)
{
    uint32_t dim, q_dim, hidden, n_layers = 0;
    ml_status s;
    if ((s = width_of(es, n, 1u << ML_MLI_ATTN_IN | 1u << ML_MLI_FFN_IN | 1u << ML_MLI_CLS_IN,
                      &dim, err)) ||
        (s = width_of(es, n, 1u << ML_MLI_WO_IN, &q_dim, err)) ||
        (s = width_of(es, n, 1u << ML_MLI_W2_IN, &hidden, err)))
        return s;
    for (size_t i = 0; i < n; i++)
        if (es[i].slot != ML_MLI_CLS_IN && es[i].layer + 1 > n_layers)
            n_layers = es[i].layer + 1;
    const char *missing = !n_layers ? "no sums of a layer's matrices"
                          : !dim    ? "no attn_q, ffn_up or output sums (the model's width)"
                          : !q_dim  ? "no attn_output sums (the attention's width)"
                          : !hidden ? "no ffn_down sums (the FFN's width)"
                                    : NULL;
    if (missing)
        return ml__err(err, ML_E_FORMAT, "", -1,
                       "%s: not an importance matrix of a model mlcore quantizes with one "
                       "(mixtures of experts' are not read)",
                       missing);
    *info = (ml_mli_info){.version = 1,
                          .n_layers = n_layers,
                          .dim = dim,
                          .hidden_dim = hidden,
                          .q_dim = q_dim == dim ? 0 : q_dim};
    return ML_OK;
}

/* e's sums, times scale, into its slot of m (a matrix narrower than the
 * slot, as lout can be, fills its first channels; a wider one is left
 * out, as mli(5) says). */
static void put(ml_mli *m, const entry *e, double scale)
{
    size_t slot_n = ml_mli_slot_size(m, (ml_mli_slot)e->slot);
    if (e->cols > slot_n)
        return;
    double *d = ml__mli_slot(m, (ml_mli_slot)e->slot, e->layer);
    memset(d, 0, slot_n * sizeof *d);
    for (uint64_t c = 0; c < e->cols; c++) {
        float v;
        memcpy(&v, e->sums + 4 * c, 4);
        d[c] = (double)v * scale;
    }
}

/* The slots from the entries: the layers' at the largest count among
 * them (a slot several matrices read, wq, wk and wv, takes the
 * best-counted one: they saw the same inputs), the classifier's as is;
 * .dat's sums are mean squares times the count, so the same scale. */
static ml_status fill(ml_mli *m, const entry *es, size_t n, ml_error *err)
{
    const uint32_t n_layers = ml_mli_get_info(m)->n_layers;
    double tokens = 0, cls_tokens = 0;
    for (size_t i = 0; i < n; i++)
        if (es[i].slot != ML_MLI_CLS_IN && es[i].count > tokens)
            tokens = es[i].count;
    double *taken = calloc((size_t)n_layers * 4 + 1, sizeof *taken); /* a slot's count */
    if (!taken)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const entry *e = &es[i];
        const int cls = e->slot == ML_MLI_CLS_IN;
        const size_t k = cls ? (size_t)n_layers * 4 : (size_t)e->layer * 4 + (size_t)e->slot;
        if (e->count <= taken[k])
            continue;
        taken[k] = e->count;
        put(m, e, cls ? 1.0 : tokens / e->count);
        if (cls)
            cls_tokens = e->count;
    }
    free(taken);
    ml__mli_count(m, (uint64_t)tokens, (uint64_t)cls_tokens);
    return ML_OK;
}

/* The .mli of the entries of a file of `size` bytes.  Its sums are at
 * most one per byte of the file (a layer's matrices hold more floats
 * than its slots take), so a small hostile file cannot claim a huge
 * model and have it allocated. */
static ml_status from_entries(const entry *es, size_t n, size_t size, ml_mli **out,
                              ml_error *err)
{
    ml_mli_info info;
    ml_status s = shape_of(es, n, &info, err);
    if (s)
        return s;
    const uint64_t q = info.q_dim ? info.q_dim : info.dim,
                   sums = (uint64_t)info.n_layers * (2ull * info.dim + q + info.hidden_dim) + info.dim;
    if (sums > size)
        return ml__err(err, ML_E_FORMAT, "", -1,
                       "%u layers of width %u take %llu sums, more than a file of %zu bytes "
                       "can have given",
                       info.n_layers, info.dim, (unsigned long long)sums, size);
    if ((s = ml__mli_alloc(&info, out, err)))
        return s;
    if ((s = fill(*out, es, n, err))) {
        ml_mli_close(*out);
        *out = NULL;
    }
    return s;
}

ml_status ml__mli_from_llama(const uint8_t *p, size_t size, ml_mli **out, ml_error *err)
{
    *out = NULL;
    entry *es = NULL;
    size_t n = 0;
    ml_status s;
    if (size >= 4 && memcmp(p, "GGUF", 4) == 0) {
        ml_gguf *g;
        if ((s = ml_gguf_open_memory(p, size, &g, err)))
            return s;
        es = calloc(ml_gguf_n_tensors(g) + 1, sizeof *es);
        s = es ? gguf_collect(g, es, &n, err) : ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
        if (!s)
            s = from_entries(es, n, size, out, err);
        ml_gguf_close(g);
    } else if (!(s = dat_collect(p, size, &es, &n, err))) {
        s = from_entries(es, n, size, out, err);
    }
    free(es);
    return s;
}
