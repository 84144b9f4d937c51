/* gguf.c - the GGUF reader: validates a whole file at open (header, every
 * key/value including nested arrays, tensor infos, data placement), then
 * answers lookups from the read-only mapping.  The rules and the decisions
 * where the format is silent are listed in include/mlcore/gguf.h; the
 * facts come from ggml's docs/gguf.md and src/gguf.cpp (gguf-mapping.md,
 * sections 1 and 4).
 *
 * Every read goes through a cursor that knows how many bytes are left, and
 * every count or length is compared with that before it is used, so a
 * hostile file costs at most a walk over its own bytes and allocations
 * proportional to them. */
#include "base/io.h"
#include "gguf_impl.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Offset tables of a KV's array of strings or arrays, and the width of
 * lengths and counts (4 in version 1, else 8), for ml_gguf_array_get. */
typedef struct arr_index {
    uint32_t count_size;
    const uint64_t *elem; /* file offset of each element; NULL: walk */
} arr_index;

/* Element walks inside nested arrays need only the count width. */
static const arr_index nested_v1 = {4, NULL};
static const arr_index nested_v2 = {8, NULL};

/* Open-addressing table of indices (stored + 1; 0 is an empty slot). */
typedef struct name_table {
    size_t *slot;
    size_t mask;
} name_table;

struct ml_gguf {
    ml__input in;
    const uint8_t *p;
    uint64_t size;
    uint32_t version;
    uint32_t count_size;   /* 4 (v1) or 8 */
    uint32_t alignment;
    uint64_t data_offset;
    ml_gguf_kv *kv;
    size_t n_kv;
    char *keys;            /* NUL-terminated copies of every key */
    arr_index *indexes;    /* one per KV; used by top-level string/array arrays */
    uint64_t **tables;     /* per KV, the elem table (or NULL), for freeing */
    ml_gguf_tensor *tensors;
    size_t n_tensors;
    name_table kv_names, tensor_names;
    char *path;            /* as opened, a copy; "" for memory */
    ml_gguf_part *part_info; /* n_parts: this file, then the other parts */
    size_t n_parts;
    ml_gguf **parts;       /* [1..n_parts): the other parts, owning their
                              mappings (their tensors are listed here) */
};

/* ===========================================================================
 * The cursor
 * ========================================================================= */

typedef struct rd {
    const uint8_t *p;
    uint64_t size, pos;
    uint32_t cs;     /* count size: 4 in version 1, else 8 */
    ml_error *err;
} rd;

static uint64_t left(const rd *r)
{
    return r->size - r->pos;
}

/* Fails unless n bytes remain; `what` names the field for the message. */
static ml_status need(rd *r, uint64_t n, const char *field, const char *what)
{
    if (n <= left(r))
        return ML_OK;
    return ml__err(r->err, ML_E_FORMAT, field, (int64_t)r->pos,
                   "%s needs %llu bytes but the file ends %llu bytes later (truncated?)", what,
                   (unsigned long long)n, (unsigned long long)left(r));
}

static ml_status get_u32(rd *r, uint32_t *v, const char *field, const char *what)
{
    ml_status s = need(r, 4, field, what);
    if (s)
        return s;
    *v = ml__rd32(r->p + r->pos);
    r->pos += 4;
    return ML_OK;
}

static ml_status get_u64(rd *r, uint64_t *v, const char *field, const char *what)
{
    ml_status s = need(r, 8, field, what);
    if (s)
        return s;
    *v = ml__rd64(r->p + r->pos);
    r->pos += 8;
    return ML_OK;
}

/* A count or length: u32 in version 1, u64 after. */
static ml_status get_count(rd *r, uint64_t *v, const char *field, const char *what)
{
    if (r->cs == 8)
        return get_u64(r, v, field, what);
    uint32_t u = 0;
    ml_status s = get_u32(r, &u, field, what);
    *v = u;
    return s;
}

/* A string: its length, then that many bytes, which must be in the file.
 * Errors point at the length, the number that is wrong. */
static ml_status get_str(rd *r, const uint8_t **str, uint64_t *len, const char *field,
                         const char *what)
{
    uint64_t at = r->pos;
    ml_status s = get_count(r, len, field, what);
    if (s)
        return s;
    if (*len > left(r)) {
        r->pos = at;
        return ml__err(r->err, ML_E_FORMAT, field, (int64_t)at,
                       "%s length %llu exceeds the %llu bytes left in the file", what,
                       (unsigned long long)*len, (unsigned long long)left(r) - r->cs);
    }
    *str = r->p + r->pos;
    r->pos += *len;
    return ML_OK;
}

/* ===========================================================================
 * Name tables (keys and tensor names): FNV-1a, linear probing
 * ========================================================================= */

static uint64_t hash_bytes(const void *s, size_t n)
{
    const uint8_t *p = s;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* Room for n names at a load of at most one half. */
static ml_status table_init(name_table *t, size_t n, ml_error *err)
{
    size_t cap = 8;
    while (cap < 2 * n)
        cap *= 2; /* n <= 2^20, no overflow */
    t->slot = calloc(cap, sizeof *t->slot);
    if (!t->slot)
        return ml__err(err, ML_E_NOMEM, "", -1, "cannot allocate a table of %zu names", n);
    t->mask = cap - 1;
    return ML_OK;
}

/* The slot holding `name`, or the empty slot where it belongs.  name_of
 * gives the stored names. */
typedef const char *(*name_of_fn)(const void *ctx, size_t i, size_t *len);

static size_t *table_slot(const name_table *t, const char *name, size_t len, name_of_fn name_of,
                          const void *ctx)
{
    size_t i = (size_t)hash_bytes(name, len) & t->mask;
    for (;; i = (i + 1) & t->mask) {
        size_t *sl = &t->slot[i];
        if (!*sl)
            return sl;
        size_t l2;
        const char *n2 = name_of(ctx, *sl - 1, &l2);
        if (l2 == len && memcmp(n2, name, len) == 0)
            return sl;
    }
}

static const char *kv_name(const void *ctx, size_t i, size_t *len)
{
    const ml_gguf *g = ctx;
    *len = g->kv[i].key_len;
    return g->kv[i].key;
}

static const char *tensor_name(const void *ctx, size_t i, size_t *len)
{
    const ml_gguf *g = ctx;
    *len = strlen(g->tensors[i].name);
    return g->tensors[i].name;
}

/* ===========================================================================
 * Metadata values
 * ========================================================================= */

/* Bytes of a fixed-size value type; 0 for strings, arrays and invalid ids. */
static uint32_t fixed_size(uint32_t t)
{
    static const uint8_t sz[ML_GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < ML_GGUF_VTYPE_COUNT ? sz[t] : 0;
}

const char *ml_gguf_vtype_name(uint32_t t)
{
    static const char *const names[ML_GGUF_VTYPE_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
    return t < ML_GGUF_VTYPE_COUNT ? names[t] : "?";
}

static ml_status skip_elements(rd *r, ml_gguf_value *v, uint64_t count_at, unsigned depth,
                               const char *key);

/* Reads a value of type t at the cursor into *v (data, size, count).
 * type_at is the offset of the type field, for its error. */
static ml_status read_value(rd *r, uint32_t t, uint64_t type_at, unsigned depth, const char *key,
                            ml_gguf_value *v)
{
    ml_status s;
    v->type = (ml_gguf_vtype)t;
    v->elem_type = (ml_gguf_vtype)t;
    v->count = 1;
    v->priv = NULL;
    if (t >= ML_GGUF_VTYPE_COUNT)
        return ml__err(r->err, ML_E_FORMAT, key, (int64_t)type_at,
                       "value type %u is not a GGUF value type (0-12)", t);
    if (t == ML_GGUF_STRING) {
        v->offset = r->pos + r->cs;
        s = get_str(r, &v->data, &v->nbytes, key, "string");
        return s;
    }
    if (t != ML_GGUF_ARRAY) {
        v->nbytes = fixed_size(t);
        v->offset = r->pos;
        v->data = r->p + r->pos;
        s = need(r, v->nbytes, key, ml_gguf_vtype_name(t));
        if (!s)
            r->pos += v->nbytes;
        return s;
    }
    if (depth >= ML_GGUF_MAX_DEPTH)
        return ml__err(r->err, ML_E_UNSUPPORTED, key, (int64_t)type_at,
                       "arrays nested deeper than %d levels", ML_GGUF_MAX_DEPTH);
    uint32_t et = 0;
    uint64_t et_at = r->pos;
    if ((s = get_u32(r, &et, key, "array element type")))
        return s;
    if (et >= ML_GGUF_VTYPE_COUNT)
        return ml__err(r->err, ML_E_FORMAT, key, (int64_t)et_at,
                       "array element type %u is not a GGUF value type (0-12)", et);
    v->elem_type = (ml_gguf_vtype)et;
    uint64_t count_at = r->pos;
    if ((s = get_count(r, &v->count, key, "array count")))
        return s;
    v->offset = r->pos;
    v->data = r->p + r->pos;
    if ((s = skip_elements(r, v, count_at, depth + 1, key)))
        return s;
    v->nbytes = r->pos - v->offset;
    return ML_OK;
}

/* Moves the cursor over the elements of array v.  Fixed-size elements are
 * bounded by one multiplication; strings and arrays are walked one by one,
 * each taking at least a length, so the walk is bounded by the file. */
static ml_status skip_elements(rd *r, ml_gguf_value *v, uint64_t count_at, unsigned depth,
                               const char *key)
{
    uint32_t sz = fixed_size(v->elem_type);
    if (sz) {
        uint64_t bytes;
        if (ml__mul64(v->count, sz, &bytes) || bytes > left(r))
            return ml__err(r->err, ML_E_FORMAT, key, (int64_t)count_at,
                           "array of %llu %s needs more than the %llu bytes left in the file",
                           (unsigned long long)v->count, ml_gguf_vtype_name(v->elem_type),
                           (unsigned long long)left(r));
        r->pos += bytes;
        return ML_OK;
    }
    for (uint64_t i = 0; i < v->count; i++) {
        ml_gguf_value e;
        uint64_t at = r->pos;
        ml_status s = read_value(r, v->elem_type, at, depth, key, &e);
        if (s)
            return s;
    }
    return ML_OK;
}

/* Fills the offset table of a KV's array of strings or arrays by walking
 * it again (it was validated, so this cannot fail). */
static ml_status index_array(ml_gguf *g, size_t k, ml_error *err)
{
    ml_gguf_value *v = &g->kv[k].value;
    arr_index *ix = &g->indexes[k];
    ix->count_size = g->count_size;
    ix->elem = NULL;
    v->priv = ix;
    if (v->count == 0)
        return ML_OK;
    /* Every element takes at least count_size bytes of the array, so the
     * table is at most 8 / count_size times the array's bytes. */
    size_t n, bytes;
    if (ml__to_size(v->count, &n) || n > SIZE_MAX / sizeof(uint64_t))
        return ml__err(err, ML_E_NOMEM, g->kv[k].key, (int64_t)v->offset,
                       "an index of %llu elements does not fit in memory here",
                       (unsigned long long)v->count);
    bytes = n * sizeof(uint64_t);
    uint64_t *t = malloc(bytes);
    if (!t)
        return ml__err(err, ML_E_NOMEM, g->kv[k].key, (int64_t)v->offset,
                       "cannot allocate an index of %zu bytes", bytes);
    g->tables[k] = t;
    rd r = {g->p, g->size, v->offset, g->count_size, NULL};
    for (size_t i = 0; i < n; i++) {
        ml_gguf_value e;
        t[i] = r.pos;
        if (read_value(&r, v->elem_type, r.pos, 1, g->kv[k].key, &e))
            return ml__err(err, ML_E_FORMAT, g->kv[k].key, (int64_t)t[i],
                           "the file changed while it was read");
    }
    ix->elem = t;
    return ML_OK;
}

/* ===========================================================================
 * Header and KVs
 * ========================================================================= */

/* Users hand us the wrong file more often than a corrupt one: say what it is. */
static const char *magic_hint(const uint8_t *m)
{
    static const struct {
        const char magic[5];
        const char *hint;
    } hints[] = {
        {"MLB1", "this is an .mlb model, which needs no conversion"},
        {"MLT1", "this is an .mlt tokenizer, not a GGUF file"},
        {"MLI1", "this is an .mli importance matrix, not a GGUF file"},
        {"lmgg", "this is a pre-GGUF ggml file; convert it to GGUF with llama.cpp first"},
        {"fmgg", "this is a pre-GGUF GGMF file; convert it to GGUF with llama.cpp first"},
        {"tjgg", "this is a pre-GGUF GGJT file; convert it to GGUF with llama.cpp first"},
        {"vers", "this looks like a Git LFS pointer, not the file itself (git lfs pull?)"},
        {"<!DO", "this is an HTML page (a web page downloaded instead of the file?)"},
        {"<htm", "this is an HTML page (a web page downloaded instead of the file?)"},
        {"<HTM", "this is an HTML page (a web page downloaded instead of the file?)"},
    };
    for (size_t i = 0; i < sizeof hints / sizeof hints[0]; i++)
        if (memcmp(m, hints[i].magic, 4) == 0)
            return hints[i].hint;
    return "not a GGUF file";
}

static ml_status check_magic(rd *r)
{
    ml_status s = need(r, 4, "magic", "the magic");
    if (s)
        return s;
    const uint8_t *m = r->p;
    if (memcmp(m, "GGUF", 4) == 0) {
        r->pos = 4;
        return ML_OK;
    }
    char shown[17];
    ml__magic_shown(m, shown);
    return ml__err(r->err, ML_E_FORMAT, "magic", 0, "\"%s\" is not \"GGUF\": %s", shown,
                   magic_hint(m));
}

static ml_status check_version(rd *r, uint32_t *version)
{
    ml_status s = get_u32(r, version, "version", "the version");
    if (s)
        return s;
    uint32_t v = *version;
    if (v == 0)
        return ml__err(r->err, ML_E_FORMAT, "version", 4, "version 0 does not exist");
    /* ggml's test: a byte-swapped small version has zero low 16 bits. */
    if ((v & 0xffff) == 0)
        return ml__err(r->err, ML_E_UNSUPPORTED, "version", 4,
                       "version %u is a byte-swapped %u: this is a big-endian GGUF file, "
                       "which this reader does not handle",
                       v, (unsigned)(((v >> 24) & 0xff) | ((v >> 8) & 0xff00)));
    if (v > 3)
        return ml__err(r->err, ML_E_UNSUPPORTED, "version", 4,
                       "version %u is newer than this reader (1 to 3)", v);
    r->cs = v == 1 ? 4 : 8;
    return ML_OK;
}

/* Smallest encodings: a KV with a one-character key and a one-byte value,
 * a tensor info with a one-character name and one dimension. */
static uint64_t min_kv_size(uint32_t cs)
{
    return cs + 1 + 4 + 1;
}
static uint64_t min_tensor_size(uint32_t cs)
{
    return cs + 1 + 4 + cs + 4 + 8;
}

/* tensor_count and kv_count, bounded by the bytes after them before any
 * allocation, then by this reader's limits. */
static ml_status read_counts(rd *r, uint64_t *nt, uint64_t *nkv)
{
    const uint64_t nt_at = 8, nkv_at = 8 + r->cs;
    ml_status s;
    if ((s = get_count(r, nt, "tensor_count", "tensor_count")) ||
        (s = get_count(r, nkv, "kv_count", "kv_count")))
        return s;
    uint64_t tbytes, kbytes, total;
    if (ml__mul64(*nt, min_tensor_size(r->cs), &tbytes) || tbytes > left(r))
        return ml__err(r->err, ML_E_FORMAT, "tensor_count", (int64_t)nt_at,
                       "%llu tensor infos cannot fit in the %llu bytes left (each takes %llu "
                       "at least)",
                       (unsigned long long)*nt, (unsigned long long)left(r),
                       (unsigned long long)min_tensor_size(r->cs));
    if (ml__mul64(*nkv, min_kv_size(r->cs), &kbytes) || ml__add64(kbytes, tbytes, &total) ||
        total > left(r))
        return ml__err(r->err, ML_E_FORMAT, "kv_count", (int64_t)nkv_at,
                       "%llu keys and %llu tensor infos cannot fit in the %llu bytes left",
                       (unsigned long long)*nkv, (unsigned long long)*nt,
                       (unsigned long long)left(r));
    if (*nt > ML_GGUF_MAX_TENSORS)
        return ml__err(r->err, ML_E_UNSUPPORTED, "tensor_count", (int64_t)nt_at,
                       "%llu tensors exceed this reader's limit of %u",
                       (unsigned long long)*nt, ML_GGUF_MAX_TENSORS);
    if (*nkv > ML_GGUF_MAX_KV)
        return ml__err(r->err, ML_E_UNSUPPORTED, "kv_count", (int64_t)nkv_at,
                       "%llu keys exceed this reader's limit of %u", (unsigned long long)*nkv,
                       ML_GGUF_MAX_KV);
    return ML_OK;
}

/* One KV: key, type, value.  Keys still point into the file here. */
static ml_status read_kv(ml_gguf *g, rd *r, size_t i)
{
    ml_gguf_kv *kv = &g->kv[i];
    char label[32];
    snprintf(label, sizeof label, "kv[%zu]", i);
    const uint8_t *key;
    uint64_t len, at = r->pos;
    ml_status s = get_str(r, &key, &len, label, "key");
    if (s)
        return s;
    if (len == 0)
        return ml__err(r->err, ML_E_FORMAT, label, (int64_t)at, "empty key");
    if (memchr(key, 0, (size_t)len))
        return ml__err(r->err, ML_E_FORMAT, label, (int64_t)at, "key contains a NUL byte");
    kv->key = (const char *)key;
    kv->key_len = (size_t)len;
    kv->offset = at;
    /* The error field is the key itself from here on; ml_error cuts it. */
    char field[64];
    snprintf(field, sizeof field, "%.*s", (int)(len < 63 ? len : 63), (const char *)key);
    size_t *slot = table_slot(&g->kv_names, kv->key, kv->key_len, kv_name, g);
    if (*slot)
        return ml__err(r->err, ML_E_FORMAT, field, (int64_t)at,
                       "duplicate key (first at offset %llu)",
                       (unsigned long long)g->kv[*slot - 1].offset);
    uint32_t t = 0;
    uint64_t type_at = r->pos;
    if ((s = get_u32(r, &t, field, "value type")) ||
        (s = read_value(r, t, type_at, 0, field, &kv->value)))
        return s;
    kv->value.index = -1;
    *slot = i + 1;
    g->n_kv = i + 1;
    return ML_OK;
}

/* Copies the keys out of the file to NUL-terminate them, then builds the
 * element tables of string and array arrays. */
static ml_status finish_kvs(ml_gguf *g, ml_error *err)
{
    size_t total = 0;
    for (size_t i = 0; i < g->n_kv; i++)
        total += g->kv[i].key_len + 1; /* keys are disjoint parts of the file */
    g->keys = malloc(total ? total : 1);
    g->indexes = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->indexes);
    g->tables = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->tables);
    if (!g->keys || !g->indexes || !g->tables)
        return ml__err(err, ML_E_NOMEM, "", -1, "cannot allocate the keys");
    char *k = g->keys;
    for (size_t i = 0; i < g->n_kv; i++) {
        ml_gguf_kv *kv = &g->kv[i];
        memcpy(k, kv->key, kv->key_len);
        k[kv->key_len] = 0;
        kv->key = k;
        kv->value.key = k;
        k += kv->key_len + 1;
    }
    for (size_t i = 0; i < g->n_kv; i++) {
        ml_gguf_value *v = &g->kv[i].value;
        if (v->type != ML_GGUF_ARRAY)
            continue;
        if (v->elem_type == ML_GGUF_STRING || v->elem_type == ML_GGUF_ARRAY) {
            ml_status s = index_array(g, i, err);
            if (s)
                return s;
        }
    }
    return ML_OK;
}

/* general.alignment: optional, any integer type, a power of two. */
static ml_status read_alignment(ml_gguf *g, ml_error *err)
{
    g->alignment = ML_GGUF_DEFAULT_ALIGNMENT;
    const ml_gguf_kv *kv = ml_gguf_find(g, "general.alignment");
    if (!kv)
        return ML_OK;
    uint64_t a;
    ml_status s = ml_gguf_value_u64(&kv->value, &a, err);
    if (s)
        return s;
    if (a == 0 || (a & (a - 1)) || a > (1u << 31))
        return ml__err(err, ML_E_FORMAT, kv->key, (int64_t)kv->value.offset,
                       "alignment %llu is not a power of two from 1 to 2^31",
                       (unsigned long long)a);
    g->alignment = (uint32_t)a;
    return ML_OK;
}

/* ===========================================================================
 * Tensor infos
 * ========================================================================= */

/* Offset of the info's `offset` field: name, n_dims, dims, type before it. */
static uint64_t offset_field(const ml_gguf *g, const ml_gguf_tensor *t)
{
    return t->info_offset + g->count_size + strlen(t->name) + 4 +
           (uint64_t)t->n_dims * g->count_size + 4;
}

static ml_status read_tensor_name(ml_gguf *g, rd *r, size_t i, ml_gguf_tensor *t)
{
    char label[32];
    snprintf(label, sizeof label, "tensor[%zu]", i);
    const uint8_t *name;
    uint64_t len, at = r->pos;
    ml_status s = get_str(r, &name, &len, label, "tensor name");
    if (s)
        return s;
    if (len == 0)
        return ml__err(r->err, ML_E_FORMAT, label, (int64_t)at, "empty tensor name");
    if (len > ML_GGUF_NAME_MAX)
        return ml__err(r->err, ML_E_FORMAT, label, (int64_t)at,
                       "tensor name of %llu bytes is longer than %d (ggml's limit): \"%.40s...\"",
                       (unsigned long long)len, ML_GGUF_NAME_MAX, (const char *)name);
    if (memchr(name, 0, (size_t)len))
        return ml__err(r->err, ML_E_FORMAT, label, (int64_t)at, "tensor name contains a NUL byte");
    memcpy(t->name, name, (size_t)len);
    t->name[len] = 0;
    t->info_offset = at;
    size_t *slot = table_slot(&g->tensor_names, t->name, (size_t)len, tensor_name, g);
    if (*slot)
        return ml__err(r->err, ML_E_FORMAT, t->name, (int64_t)at,
                       "duplicate tensor name (first at offset %llu)",
                       (unsigned long long)g->tensors[*slot - 1].info_offset);
    *slot = i + 1;
    return ML_OK;
}

/* n_dims and dims: 1..4 dimensions, each >= 1, product within int64. */
static ml_status read_dims(rd *r, ml_gguf_tensor *t, uint64_t *dim0_at)
{
    uint64_t at = r->pos;
    ml_status s = get_u32(r, &t->n_dims, t->name, "n_dims");
    if (s)
        return s;
    if (t->n_dims == 0 || t->n_dims > ML_GGUF_MAX_DIMS)
        return ml__err(r->err, ML_E_SHAPE, t->name, (int64_t)at,
                       "n_dims %u is not between 1 and %d", t->n_dims, ML_GGUF_MAX_DIMS);
    uint64_t n = 1;
    *dim0_at = r->pos;
    for (uint32_t d = 0; d < ML_GGUF_MAX_DIMS; d++) {
        t->dims[d] = 1;
        if (d >= t->n_dims)
            continue;
        at = r->pos;
        if ((s = get_count(r, &t->dims[d], t->name, "dimension")))
            return s;
        if (t->dims[d] == 0)
            return ml__err(r->err, ML_E_SHAPE, t->name, (int64_t)at,
                           "dims[%u] is 0: a tensor without elements", d);
        if (ml__mul64(n, t->dims[d], &n) || n > (uint64_t)INT64_MAX)
            return ml__err(r->err, ML_E_SHAPE, t->name, (int64_t)at,
                           "dims[%u] = %llu makes the element count overflow", d,
                           (unsigned long long)t->dims[d]);
    }
    t->n_elements = n;
    t->cols = t->dims[0];
    t->rows = n / t->cols;
    return ML_OK;
}

/* The type: known size, dims[0] a whole number of blocks, byte size. */
static ml_status read_type(rd *r, ml_gguf_tensor *t, uint64_t dim0_at)
{
    uint64_t at = r->pos;
    ml_status s = get_u32(r, &t->type, t->name, "type");
    if (s)
        return s;
    uint32_t be, bb;
    const char *tn = ml_gguf_type_name(t->type);
    if (!ml_gguf_type_size(t->type, &be, &bb)) {
        if (tn)
            return ml__err(r->err, ML_E_UNSUPPORTED, t->name, (int64_t)at,
                           "type %u (%s) was removed from ggml; its layout is unknown",
                           t->type, tn);
        return ml__err(r->err, ML_E_UNSUPPORTED, t->name, (int64_t)at,
                       "type id %u is unknown to this reader (known: 0 to %d)", t->type,
                       ML_GGML_TYPE_COUNT - 1);
    }
    t->type_name = tn;
    if (t->cols % be)
        return ml__err(r->err, ML_E_SHAPE, t->name, (int64_t)dim0_at,
                       "dims[0] = %llu is not a multiple of the %s block size %u",
                       (unsigned long long)t->cols, tn, be);
    if (ml__mul64(t->n_elements / be, bb, &t->nbytes))
        return ml__err(r->err, ML_E_SHAPE, t->name, (int64_t)dim0_at,
                       "the size in bytes of %llu %s elements overflows",
                       (unsigned long long)t->n_elements, tn);
    t->row_bytes = t->cols / be * bb;
    return ML_OK;
}

static ml_status read_tensor(ml_gguf *g, rd *r, size_t i)
{
    ml_gguf_tensor *t = &g->tensors[i];
    uint64_t dim0_at = 0;
    ml_status s;
    if ((s = read_tensor_name(g, r, i, t)) || (s = read_dims(r, t, &dim0_at)) ||
        (s = read_type(r, t, dim0_at)) || (s = get_u64(r, &t->offset, t->name, "offset")))
        return s;
    g->n_tensors = i + 1;
    return ML_OK;
}

/* ===========================================================================
 * Data placement
 * ========================================================================= */

/* Aligned and inside the file; binds the data pointer. */
static ml_status place_tensor(ml_gguf *g, ml_gguf_tensor *t, ml_error *err)
{
    const uint64_t at = offset_field(g, t);
    uint64_t start, end;
    if (t->offset % g->alignment)
        return ml__err(err, ML_E_FORMAT, t->name, (int64_t)at,
                       "data offset %llu is not a multiple of the alignment %u",
                       (unsigned long long)t->offset, g->alignment);
    if (ml__add64(g->data_offset, t->offset, &start) || ml__add64(start, t->nbytes, &end) ||
        end > g->size)
        return ml__err(err, ML_E_FORMAT, t->name, (int64_t)at,
                       "data of %llu bytes at data offset %llu ends past the end of the file "
                       "(%llu bytes; data section at %llu)",
                       (unsigned long long)t->nbytes, (unsigned long long)t->offset,
                       (unsigned long long)g->size, (unsigned long long)g->data_offset);
    t->file_offset = start;
    t->data = g->p + start;
    return ML_OK;
}

/* Merge sort of tensor indices by data offset (stable, no global state
 * as qsort would need). */
static void sort_indices(const ml_gguf_tensor *t, size_t *ix, size_t *tmp, size_t n)
{
    if (n < 2)
        return;
    size_t h = n / 2;
    sort_indices(t, ix, tmp, h);
    sort_indices(t, ix + h, tmp, n - h);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = t[ix[j]].offset < t[ix[i]].offset ? ix[j++] : ix[i++];
    while (i < h)
        tmp[k++] = ix[i++];
    while (j < n)
        tmp[k++] = ix[j++];
    memcpy(ix, tmp, n * sizeof *ix);
}

/* No two tensors share a byte: sort by offset, compare neighbours. */
static ml_status check_overlap(ml_gguf *g, ml_error *err)
{
    size_t n = g->n_tensors;
    if (n < 2)
        return ML_OK;
    size_t *ix = malloc(2 * n * sizeof *ix);
    if (!ix)
        return ml__err(err, ML_E_NOMEM, "", -1, "cannot sort %zu tensors", n);
    for (size_t i = 0; i < n; i++)
        ix[i] = i;
    sort_indices(g->tensors, ix, ix + n, n);
    ml_status s = ML_OK;
    for (size_t i = 1; i < n && !s; i++) {
        const ml_gguf_tensor *a = &g->tensors[ix[i - 1]], *b = &g->tensors[ix[i]];
        if (a->offset + a->nbytes > b->offset)
            s = ml__err(err, ML_E_FORMAT, b->name, (int64_t)offset_field(g, b),
                        "data at %llu..%llu overlaps tensor \"%s\" at %llu..%llu",
                        (unsigned long long)b->file_offset,
                        (unsigned long long)(b->file_offset + b->nbytes), a->name,
                        (unsigned long long)a->file_offset,
                        (unsigned long long)(a->file_offset + a->nbytes));
    }
    free(ix);
    return s;
}

/* ===========================================================================
 * Opening and closing
 * ========================================================================= */

static ml_status parse(ml_gguf *g, ml_error *err)
{
    rd r = {g->p, g->size, 0, 8, err};
    uint64_t nt, nkv;
    ml_status s;
    if ((s = check_magic(&r)) || (s = check_version(&r, &g->version)) ||
        (s = read_counts(&r, &nt, &nkv)))
        return s;
    g->count_size = r.cs;
    /* Both counts are bounded by the file size and by 2^20 now. */
    g->kv = calloc(nkv ? (size_t)nkv : 1, sizeof *g->kv);
    g->tensors = calloc(nt ? (size_t)nt : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors)
        return ml__err(err, ML_E_NOMEM, "", -1, "cannot allocate %llu keys and %llu tensors",
                       (unsigned long long)nkv, (unsigned long long)nt);
    if ((s = table_init(&g->kv_names, (size_t)nkv, err)) ||
        (s = table_init(&g->tensor_names, (size_t)nt, err)))
        return s;
    for (size_t i = 0; i < nkv; i++)
        if ((s = read_kv(g, &r, i)))
            return s;
    if ((s = finish_kvs(g, err)) || (s = read_alignment(g, err)))
        return s;
    for (size_t i = 0; i < nt; i++)
        if ((s = read_tensor(g, &r, i)))
            return s;
    /* ggml aligns the data section only when there are tensors. */
    g->data_offset = r.pos;
    if (nt && ml__align_up(r.pos, g->alignment, &g->data_offset))
        return ml__err(err, ML_E_FORMAT, "", (int64_t)r.pos, "data offset overflows");
    for (size_t i = 0; i < g->n_tensors; i++)
        if ((s = place_tensor(g, &g->tensors[i], err)))
            return s;
    return check_overlap(g, err);
}

/* The one-part view of a file just parsed. */
static ml_status own_part(ml_gguf *g, const char *path, ml_error *err)
{
    g->path = strdup(path);
    g->part_info = calloc(1, sizeof *g->part_info);
    if (!g->path || !g->part_info)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    g->n_parts = 1;
    g->part_info[0] = (ml_gguf_part){
        .path = g->path,
        .version = g->version,
        .alignment = g->alignment,
        .file_size = g->size,
        .data_offset = g->data_offset,
        .first_tensor = 0,
        .n_tensors = g->n_tensors,
    };
    return ML_OK;
}

static ml_status open_input(ml_gguf *g, const char *path, ml_gguf **out, ml_error *err)
{
    ml_status s = parse(g, err);
    if (!s)
        s = own_part(g, path, err);
    if (s) {
        ml_gguf_close(g);
        return s;
    }
    *out = g;
    return ML_OK;
}

ml_status ml__gguf_open_file(const char *path, ml_gguf **out, ml_error *err)
{
    *out = NULL;
    ml_gguf *g = calloc(1, sizeof *g);
    if (!g)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    ml_status s = ml__input_open(path, &g->in, err);
    if (s) {
        free(g);
        return s;
    }
    g->p = g->in.data;
    g->size = g->in.size;
    return open_input(g, path, out, err);
}

ml_status ml_gguf_open_parts(const char *const *paths, size_t n, ml_gguf **out, ml_error *err)
{
    if (!out || !paths || n == 0)
        return ml__err(err, ML_E_INVAL, "", -1, "NULL argument");
    for (size_t i = 0; i < n; i++)
        if (!paths[i])
            return ml__err(err, ML_E_INVAL, "", -1, "NULL argument");
    ml_gguf *g;
    ml_status s = ml__gguf_open_file(paths[0], &g, err);
    if (!s && (s = ml__gguf_split(g, paths, n, err))) {
        ml_gguf_close(g);
        g = NULL;
    }
    *out = g;
    return s;
}

ml_status ml_gguf_open(const char *path, ml_gguf **out, ml_error *err)
{
    return ml_gguf_open_parts(&path, 1, out, err);
}

ml_status ml_gguf_open_memory(const void *buf, size_t len, ml_gguf **out, ml_error *err)
{
    if (!out || (!buf && len))
        return ml__err(err, ML_E_INVAL, "", -1, "NULL argument");
    *out = NULL;
    ml_gguf *g = calloc(1, sizeof *g);
    if (!g)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    g->p = buf;
    g->size = len;
    ml_gguf *opened = NULL;
    ml_status s = open_input(g, "", &opened, err);
    if (!s && (s = ml__gguf_split(opened, NULL, 0, err))) {
        ml_gguf_close(opened);
        opened = NULL;
    }
    *out = opened;
    return s;
}

/* ===========================================================================
 * The parts of a split model, joined into one view
 * ========================================================================= */

/* The name table over every tensor listed, rebuilt; a name seen twice is
 * in two parts (each part's names were unique), and both are named. */
static ml_status index_tensor_names(ml_gguf *g, ml_error *err)
{
    free(g->tensor_names.slot);
    g->tensor_names.slot = NULL;
    ml_status s = table_init(&g->tensor_names, g->n_tensors, err);
    for (size_t i = 0; i < g->n_tensors && !s; i++) {
        const ml_gguf_tensor *t = &g->tensors[i];
        size_t *slot = table_slot(&g->tensor_names, t->name, strlen(t->name), tensor_name, g);
        if (!*slot) {
            *slot = i + 1;
            continue;
        }
        const ml_gguf_tensor *first = &g->tensors[*slot - 1];
        ml__err(err, ML_E_FORMAT, t->name, (int64_t)t->info_offset,
                "tensor also in part %u (%s) at offset %llu", first->part + 1,
                g->part_info[first->part].path, (unsigned long long)first->info_offset);
        s = ml__gguf_part_err(err, ML_E_FORMAT, t->part, g->n_parts, g->part_info[t->part].path);
    }
    return s;
}

ml_status ml__gguf_join(ml_gguf *g, ml_gguf **parts, size_t n, ml_error *err)
{
    ml_gguf_part *info = realloc(g->part_info, n * sizeof *info);
    if (!info) {
        for (size_t i = 1; i < n; i++)
            ml_gguf_close(parts[i]);
        free(parts);
        return ml__err(err, ML_E_NOMEM, "", -1, "cannot list %zu parts", n);
    }
    g->part_info = info;
    g->parts = parts;
    g->n_parts = n;
    size_t total = g->n_tensors; /* at most 2^20 per part, 65535 parts */
    for (size_t i = 1; i < n; i++) {
        info[i] = parts[i]->part_info[0];
        info[i].first_tensor = total;
        total += parts[i]->n_tensors;
    }
    ml_gguf_tensor *t = realloc(g->tensors, (total ? total : 1) * sizeof *t);
    if (!t)
        return ml__err(err, ML_E_NOMEM, "", -1, "cannot list %zu tensors", total);
    g->tensors = t;
    for (size_t i = 1; i < n; i++) {
        memcpy(t + info[i].first_tensor, parts[i]->tensors,
               parts[i]->n_tensors * sizeof *t);
        for (size_t k = 0; k < parts[i]->n_tensors; k++)
            t[info[i].first_tensor + k].part = (uint32_t)i;
    }
    g->n_tensors = total;
    return index_tensor_names(g, err);
}

size_t ml_gguf_n_parts(const ml_gguf *g)
{
    return g->n_parts;
}

const ml_gguf_part *ml_gguf_part_at(const ml_gguf *g, size_t i)
{
    return i < g->n_parts ? &g->part_info[i] : NULL;
}

void ml_gguf_close(ml_gguf *g)
{
    if (!g)
        return;
    for (size_t i = 1; g->parts && i < g->n_parts; i++)
        ml_gguf_close(g->parts[i]);
    free(g->parts);
    free(g->part_info);
    free(g->path);
    if (g->tables)
        for (size_t i = 0; i < g->n_kv; i++)
            free(g->tables[i]);
    free(g->tables);
    free(g->indexes);
    free(g->keys);
    free(g->kv);
    free(g->tensors);
    free(g->kv_names.slot);
    free(g->tensor_names.slot);
    ml__input_close(&g->in);
    free(g);
}

uint32_t ml_gguf_version(const ml_gguf *g)
{
    return g->version;
}
uint32_t ml_gguf_alignment(const ml_gguf *g)
{
    return g->alignment;
}
uint64_t ml_gguf_data_offset(const ml_gguf *g)
{
    return g->data_offset;
}
uint64_t ml_gguf_file_size(const ml_gguf *g)
{
    return g->size;
}
const uint8_t *ml_gguf_file_data(const ml_gguf *g)
{
    return g->p;
}

/* ===========================================================================
 * Lookups
 * ========================================================================= */

size_t ml_gguf_n_kv(const ml_gguf *g)
{
    return g->n_kv;
}

const ml_gguf_kv *ml_gguf_kv_at(const ml_gguf *g, size_t i)
{
    return i < g->n_kv ? &g->kv[i] : NULL;
}

const ml_gguf_kv *ml_gguf_find(const ml_gguf *g, const char *key)
{
    if (!key || !g->kv_names.slot)
        return NULL;
    size_t *sl = table_slot(&g->kv_names, key, strlen(key), kv_name, g);
    return *sl ? &g->kv[*sl - 1] : NULL;
}

size_t ml_gguf_n_tensors(const ml_gguf *g)
{
    return g->n_tensors;
}

const ml_gguf_tensor *ml_gguf_tensor_at(const ml_gguf *g, size_t i)
{
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const ml_gguf_tensor *ml_gguf_find_tensor(const ml_gguf *g, const char *name)
{
    if (!name || !g->tensor_names.slot)
        return NULL;
    size_t *sl = table_slot(&g->tensor_names, name, strlen(name), tensor_name, g);
    return *sl ? &g->tensors[*sl - 1] : NULL;
}

/* ===========================================================================
 * Value conversions
 * ========================================================================= */

/* ML_E_FORMAT about value v: field is its key, offset its data, and the
 * message names the element of an array. */
static ml_status bad_value(const ml_gguf_value *v, ml_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static ml_status bad_value(const ml_gguf_value *v, ml_error *err, const char *fmt, ...)
{
    char detail[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (v->index >= 0)
        return ml__err(err, ML_E_FORMAT, v->key, (int64_t)v->offset, "element %lld: %s",
                       (long long)v->index, detail);
    return ml__err(err, ML_E_FORMAT, v->key, (int64_t)v->offset, "%s", detail);
}

static int is_signed_int(uint32_t t)
{
    return t == ML_GGUF_I8 || t == ML_GGUF_I16 || t == ML_GGUF_I32 || t == ML_GGUF_I64;
}

/* An integer value as sign and magnitude: 1 if it is one. */
static int int_of(const ml_gguf_value *v, int *neg, uint64_t *mag)
{
    const uint8_t *p = v->data;
    uint64_t u;
    switch (v->type) {
    case ML_GGUF_U8: case ML_GGUF_I8: u = p[0]; break;
    case ML_GGUF_U16: case ML_GGUF_I16: u = ml__rd16(p); break;
    case ML_GGUF_U32: case ML_GGUF_I32: u = ml__rd32(p); break;
    case ML_GGUF_U64: case ML_GGUF_I64: u = ml__rd64(p); break;
    default: return 0;
    }
    *neg = 0;
    *mag = u;
    if (is_signed_int(v->type)) {
        unsigned bits = 8 * fixed_size(v->type);
        uint64_t sign = (uint64_t)1 << (bits - 1);
        if (u & sign) {
            /* Two's complement magnitude within the type's width. */
            uint64_t mask = bits == 64 ? ~(uint64_t)0 : (((uint64_t)1 << bits) - 1);
            *neg = 1;
            *mag = ((~u) & mask) + 1;
        }
    }
    return 1;
}

/* The integer of v when it lies in [-max_neg, max_pos]. */
static ml_status int_in(const ml_gguf_value *v, uint64_t max_neg, uint64_t max_pos,
                        const char *want, int *neg, uint64_t *mag, ml_error *err)
{
    if (!int_of(v, neg, mag))
        return bad_value(v, err, "value is %s, expected an integer (%s)",
                         ml_gguf_vtype_name(v->type), want);
    if (*neg ? *mag > max_neg : *mag > max_pos)
        return bad_value(v, err, "%s%llu (%s) does not fit %s", *neg ? "-" : "",
                         (unsigned long long)*mag, ml_gguf_vtype_name(v->type), want);
    return ML_OK;
}

ml_status ml_gguf_value_u32(const ml_gguf_value *v, uint32_t *out, ml_error *err)
{
    int neg;
    uint64_t m;
    ml_status s = int_in(v, 0, UINT32_MAX, "u32", &neg, &m, err);
    if (!s)
        *out = (uint32_t)m;
    return s;
}

ml_status ml_gguf_value_u64(const ml_gguf_value *v, uint64_t *out, ml_error *err)
{
    int neg;
    uint64_t m;
    ml_status s = int_in(v, 0, UINT64_MAX, "u64", &neg, &m, err);
    if (!s)
        *out = m;
    return s;
}

ml_status ml_gguf_value_i32(const ml_gguf_value *v, int32_t *out, ml_error *err)
{
    int neg;
    uint64_t m;
    ml_status s = int_in(v, (uint64_t)INT32_MAX + 1, INT32_MAX, "i32", &neg, &m, err);
    if (!s)
        *out = neg ? (int32_t)(-(int64_t)m) : (int32_t)m;
    return s;
}

ml_status ml_gguf_value_i64(const ml_gguf_value *v, int64_t *out, ml_error *err)
{
    int neg;
    uint64_t m;
    ml_status s = int_in(v, (uint64_t)INT64_MAX + 1, INT64_MAX, "i64", &neg, &m, err);
    if (!s)
        *out = neg ? (m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m) : (int64_t)m;
    return s;
}

ml_status ml_gguf_value_f64(const ml_gguf_value *v, double *out, ml_error *err)
{
    if (v->type == ML_GGUF_F32) {
        *out = ml__rdf32(v->data);
        return ML_OK;
    }
    if (v->type == ML_GGUF_F64) {
        uint64_t u = ml__rd64(v->data);
        memcpy(out, &u, 8);
        return ML_OK;
    }
    return bad_value(v, err, "value is %s, expected a float", ml_gguf_vtype_name(v->type));
}

ml_status ml_gguf_value_f32(const ml_gguf_value *v, float *out, ml_error *err)
{
    double d;
    ml_status s = ml_gguf_value_f64(v, &d, err);
    if (s)
        return s;
    if (isfinite(d) && fabs(d) > FLT_MAX)
        return bad_value(v, err, "%g is beyond the range of f32", d);
    *out = (float)d;
    return ML_OK;
}

ml_status ml_gguf_value_bool(const ml_gguf_value *v, int *out, ml_error *err)
{
    if (v->type != ML_GGUF_BOOL)
        return bad_value(v, err, "value is %s, expected a bool", ml_gguf_vtype_name(v->type));
    if (v->data[0] > 1)
        return bad_value(v, err, "bool value %u is neither 0 nor 1", v->data[0]);
    *out = v->data[0];
    return ML_OK;
}

ml_status ml_gguf_value_str(const ml_gguf_value *v, const char **s, size_t *len, ml_error *err)
{
    if (v->type != ML_GGUF_STRING)
        return bad_value(v, err, "value is %s, expected a string", ml_gguf_vtype_name(v->type));
    *s = (const char *)v->data;
    *len = (size_t)v->nbytes; /* inside the mapping, so it fits */
    return ML_OK;
}

/* ===========================================================================
 * Array elements
 * ========================================================================= */

/* Decodes the element of type t at file offset `at` of the file that holds
 * arr (validated at open, so the cursor cannot fail). */
static void element_at(const ml_gguf_value *arr, const arr_index *ix, uint64_t at,
                       ml_gguf_value *out)
{
    const uint8_t *base = arr->data - arr->offset;
    /* The cursor ends where the array ends: no element lies beyond. */
    rd r = {base, arr->offset + arr->nbytes, at, ix->count_size, NULL};
    read_value(&r, arr->elem_type, at, 1, arr->key, out);
    if (out->type == ML_GGUF_ARRAY && (out->elem_type == ML_GGUF_STRING ||
                                       out->elem_type == ML_GGUF_ARRAY))
        out->priv = ix->count_size == 4 ? &nested_v1 : &nested_v2;
}

ml_status ml_gguf_array_get(const ml_gguf_value *arr, uint64_t i, ml_gguf_value *out,
                            ml_error *err)
{
    if (!arr || !out || arr->type != ML_GGUF_ARRAY)
        return ml__err(err, ML_E_INVAL, arr ? arr->key : "", -1, "not an array");
    const ml_gguf_value a = *arr; /* out may be arr */
    if (i >= a.count)
        return ml__err(err, ML_E_INVAL, a.key, (int64_t)a.offset,
                       "element %llu of an array of %llu", (unsigned long long)i,
                       (unsigned long long)a.count);
    uint32_t sz = fixed_size(a.elem_type);
    if (sz) {
        out->type = out->elem_type = a.elem_type;
        out->count = 1;
        out->data = a.data + i * sz;
        out->nbytes = sz;
        out->offset = a.offset + i * sz;
        out->priv = NULL;
    } else {
        const arr_index *ix = a.priv;
        if (!ix)
            return ml__err(err, ML_E_INVAL, a.key, -1, "array value not from ml_gguf");
        uint64_t at = a.offset;
        if (ix->elem) {
            at = ix->elem[i];
        } else {
            /* Nested: walk to element i. */
            ml_gguf_value skip;
            for (uint64_t k = 0; k < i; k++) {
                element_at(&a, ix, at, &skip);
                at = skip.offset + skip.nbytes;
            }
        }
        element_at(&a, ix, at, out);
    }
    out->key = a.key;
    out->index = (int64_t)i;
    return ML_OK;
}

/* ===========================================================================
 * Getters by key
 * ========================================================================= */

/* The KV of key, or the "missing" outcome described in gguf.h. */
static ml_status lookup(const ml_gguf *g, const char *key, const ml_gguf_kv **kv, int *found,
                        ml_error *err)
{
    *kv = ml_gguf_find(g, key);
    if (found)
        *found = *kv != NULL;
    if (*kv || found)
        return ML_OK;
    return ml__err(err, ML_E_FORMAT, key, -1, "required key is missing");
}

#define GETTER(name, type)                                                                    \
    ml_status ml_gguf_get_##name(const ml_gguf *g, const char *key, type *out, int *found,    \
                                 ml_error *err)                                               \
    {                                                                                         \
        const ml_gguf_kv *kv;                                                                 \
        ml_status s = lookup(g, key, &kv, found, err);                                        \
        if (s || !kv)                                                                         \
            return s;                                                                         \
        return ml_gguf_value_##name(&kv->value, out, err);                                    \
    }

GETTER(u32, uint32_t)
GETTER(i32, int32_t)
GETTER(u64, uint64_t)
GETTER(i64, int64_t)
GETTER(f32, float)
GETTER(f64, double)
GETTER(bool, int)

ml_status ml_gguf_get_str(const ml_gguf *g, const char *key, const char **str, size_t *len,
                          int *found, ml_error *err)
{
    const ml_gguf_kv *kv;
    ml_status s = lookup(g, key, &kv, found, err);
    if (s || !kv)
        return s;
    return ml_gguf_value_str(&kv->value, str, len, err);
}

ml_status ml_gguf_get_array(const ml_gguf *g, const char *key, ml_gguf_value *out, int *found,
                            ml_error *err)
{
    const ml_gguf_kv *kv;
    ml_status s = lookup(g, key, &kv, found, err);
    if (s || !kv)
        return s;
    if (kv->value.type != ML_GGUF_ARRAY)
        return bad_value(&kv->value, err, "value is %s, expected an array",
                         ml_gguf_vtype_name(kv->value.type));
    *out = kv->value;
    return ML_OK;
}
