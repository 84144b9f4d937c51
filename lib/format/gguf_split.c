/* gguf_split.c - models split by llama.cpp's gguf-split: the split.* keys
 * of the first part, the other parts' names made from the first's name
 * (the pattern of llama.cpp's llama_split_prefix and llama_split_path),
 * each part opened and checked against the first, and the parts handed to
 * gguf.c, which lists their tensors as one model.  Nothing is copied: each
 * part stays mapped for as long as the model is open.  The rules are in
 * include/mlcore/gguf.h; the facts come from llama.cpp's
 * tools/gguf-split/gguf-split.cpp (what a part holds) and
 * src/llama-model-loader.cpp (how the loader finds and checks parts). */
#include "gguf_impl.h"

#include <stdio.h>
#include <stdlib.h>

/* A part's split keys; count_kv NULL when split.count is absent. */
typedef struct split_keys {
    const ml_gguf_kv *count_kv, *no_kv, *tensors_kv;
    uint32_t count, no;
    uint64_t tensors;
} split_keys;

ml_status ml__gguf_part_err(ml_error *err, ml_status s, size_t i, size_t n, const char *path)
{
    if (!err)
        return s;
    const ml_error inner = *err;
    ml__err(err, s, "", -1, "part %zu of %zu (%s): %s", i + 1, n, path, inner.msg);
    err->sys_errno = inner.sys_errno;
    err->offset = inner.offset;
    memcpy(err->field, inner.field, sizeof err->field);
    return s;
}

static int64_t value_at(const ml_gguf_kv *kv)
{
    return (int64_t)kv->value.offset;
}

/* split.count, and when it is 1 or more split.no and split.tensors.count,
 * which gguf-split writes into every part. */
static ml_status read_keys(const ml_gguf *g, split_keys *k, ml_error *err)
{
    memset(k, 0, sizeof *k);
    ml_status s;
    k->count_kv = ml_gguf_find(g, "split.count");
    if (!k->count_kv)
        return ML_OK;
    if ((s = ml_gguf_value_u32(&k->count_kv->value, &k->count, err)))
        return s;
    if (k->count > ML_GGUF_MAX_PARTS)
        return ml__err(err, ML_E_FORMAT, "split.count", value_at(k->count_kv),
                       "%u parts: gguf-split writes at most %d", k->count, ML_GGUF_MAX_PARTS);
    if (k->count == 0) /* a model merged back into one file */
        return ML_OK;
    if ((s = ml_gguf_get_u32(g, "split.no", &k->no, NULL, err)) ||
        (s = ml_gguf_get_u64(g, "split.tensors.count", &k->tensors, NULL, err)))
        return s;
    k->no_kv = ml_gguf_find(g, "split.no");
    k->tensors_kv = ml_gguf_find(g, "split.tensors.count");
    return ML_OK;
}

/* ===========================================================================
 * Part names: PREFIX-00001-of-00003.gguf
 * ========================================================================= */

/* The length of path's prefix when it names part `no` of `count`, else 0
 * (an empty prefix does not count, as in llama_split_prefix). */
static size_t name_prefix(const char *path, uint32_t no, uint32_t count)
{
    char tail[40];
    snprintf(tail, sizeof tail, "-%05u-of-%05u.gguf", no + 1, count);
    size_t n = strlen(path), t = strlen(tail);
    if (n <= t || strcmp(path + n - t, tail) != 0)
        return 0;
    return n - t;
}

/* Part `no`'s name (malloc'd, NULL when out of memory). */
static char *part_name(const char *path, size_t prefix, uint32_t no, uint32_t count)
{
    char tail[40];
    int t = snprintf(tail, sizeof tail, "-%05u-of-%05u.gguf", no + 1, count);
    char *s = malloc(prefix + (size_t)t + 1);
    if (s) {
        memcpy(s, path, prefix);
        memcpy(s + prefix, tail, (size_t)t + 1);
    }
    return s;
}

/* ===========================================================================
 * The first part
 * ========================================================================= */

/* split.no 0, and with a hint naming part 1 when the file follows the
 * pattern; split.tensors.count within this reader's limit. */
static ml_status check_first(const ml_gguf *g, const split_keys *k, ml_error *err)
{
    if (k->no >= k->count)
        return ml__err(err, ML_E_FORMAT, "split.no", value_at(k->no_kv),
                       "%u is not below split.count %u", k->no, k->count);
    if (k->no != 0) {
        const char *path = ml_gguf_part_at(g, 0)->path;
        size_t pre = name_prefix(path, k->no, k->count);
        char *first = pre ? part_name(path, pre, 0, k->count) : NULL;
        ml__err(err, ML_E_FORMAT, "split.no", value_at(k->no_kv),
                "%u: this is part %u of %u of a split model; give part 1%s%s%s", k->no, k->no + 1,
                k->count, first ? " (" : "", first ? first : "", first ? ")" : "");
        free(first);
        return ML_E_FORMAT;
    }
    if (k->tensors > ML_GGUF_MAX_TENSORS)
        return ml__err(err, ML_E_UNSUPPORTED, "split.tensors.count", value_at(k->tensors_kv),
                       "%llu tensors exceed this reader's limit of %u",
                       (unsigned long long)k->tensors, ML_GGUF_MAX_TENSORS);
    return ML_OK;
}

/* A model in one file that says so (split.count 1). */
static ml_status check_single(const ml_gguf *g, const split_keys *k, ml_error *err)
{
    if (k->tensors != ml_gguf_n_tensors(g))
        return ml__err(err, ML_E_FORMAT, "split.tensors.count", value_at(k->tensors_kv),
                       "%llu, but the file holds %zu tensors", (unsigned long long)k->tensors,
                       ml_gguf_n_tensors(g));
    return ML_OK;
}

/* ===========================================================================
 * The other parts
 * ========================================================================= */

/* Part i's keys against part 1's (k). */
static ml_status check_part(ml_gguf *const *parts, size_t i, const split_keys *k, ml_error *err)
{
    split_keys pk;
    ml_status s = read_keys(parts[i], &pk, err);
    if (s)
        return s;
    const char *first = ml_gguf_part_at(parts[0], 0)->path;
    if (!pk.count_kv)
        return ml__err(err, ML_E_FORMAT, "split.count", -1,
                       "missing: this file is not a part of a split model");
    if (pk.count != k->count)
        return ml__err(err, ML_E_FORMAT, "split.count", value_at(pk.count_kv),
                       "%u, but part 1 (%s) says %u: a part of another split?", pk.count, first,
                       k->count);
    if (pk.no < i)
        return ml__err(err, ML_E_FORMAT, "split.no", value_at(pk.no_kv),
                       "%u, the number of part %u (%s): the same part given twice?", pk.no,
                       pk.no + 1, ml_gguf_part_at(parts[pk.no], 0)->path);
    if (pk.no != i)
        return ml__err(err, ML_E_FORMAT, "split.no", value_at(pk.no_kv),
                       "%u where part %zu (split.no %zu) belongs: parts out of order?", pk.no,
                       i + 1, i);
    if (pk.tensors != k->tensors)
        return ml__err(err, ML_E_FORMAT, "split.tensors.count", value_at(pk.tensors_kv),
                       "%llu, but part 1 (%s) says %llu: a part of another model?",
                       (unsigned long long)pk.tensors, first, (unsigned long long)k->tensors);
    return ML_OK;
}

/* Opens and checks parts 1..count-1 named in names[], then joins them to
 * parts[0] == g (which then owns them). */
static ml_status open_parts(ml_gguf *g, const char *const *names, const split_keys *k,
                            ml_error *err)
{
    const size_t n = k->count;
    ml_gguf **parts = calloc(n, sizeof *parts);
    if (!parts)
        return ml__err(err, ML_E_NOMEM, "", -1, "cannot list %zu parts", n);
    parts[0] = g;
    ml_status s = ML_OK;
    uint64_t total = ml_gguf_n_tensors(g);
    for (size_t i = 1; i < n && !s; i++) {
        s = ml__gguf_open_file(names[i], &parts[i], err);
        if (!s)
            s = check_part(parts, i, k, err);
        if (s)
            ml__gguf_part_err(err, s, i, n, names[i]);
        else
            total += ml_gguf_n_tensors(parts[i]);
    }
    if (!s && total != k->tensors)
        s = ml__err(err, ML_E_FORMAT, "split.tensors.count", value_at(k->tensors_kv),
                    "%llu, but the %zu parts hold %llu tensor%s", (unsigned long long)k->tensors,
                    n, (unsigned long long)total, total == 1 ? "" : "s");
    if (!s)
        return ml__gguf_join(g, parts, n, err);
    for (size_t i = 1; i < n; i++)
        ml_gguf_close(parts[i]);
    free(parts);
    return s;
}

/* Standard input or a buffer has no name to find the other parts by. */
static ml_status not_from_a_file(const split_keys *k, ml_error *err)
{
    return ml__err(err, ML_E_UNSUPPORTED, "split.count", value_at(k->count_kv),
                   "part 1 of %u of a split model, not read from a file: the other parts "
                   "cannot be found (give the file's name)",
                   k->count);
}

/* Part 1 was given alone: the other names come from its own. */
static ml_status open_by_name(ml_gguf *g, const char *path, const split_keys *k, ml_error *err)
{
    if (strcmp(path, "-") == 0)
        return not_from_a_file(k, err);
    size_t pre = name_prefix(path, 0, k->count);
    if (!pre)
        return ml__err(err, ML_E_FORMAT, "split.count", value_at(k->count_kv),
                       "part 1 of %u of a split model, but the name does not end in "
                       "-00001-of-%05u.gguf, so the other parts cannot be found (name every "
                       "part, in order)",
                       k->count, k->count);
    char **names = calloc(k->count, sizeof *names);
    ml_status s = names ? ML_OK : ML_E_NOMEM;
    for (uint32_t i = 1; i < k->count && !s; i++)
        if (!(names[i] = part_name(path, pre, i, k->count)))
            s = ML_E_NOMEM;
    if (s)
        ml__err(err, s, "", -1, "cannot name %u parts", k->count);
    else
        s = open_parts(g, (const char *const *)names, k, err);
    for (uint32_t i = 0; names && i < k->count; i++)
        free(names[i]);
    free(names);
    return s;
}

ml_status ml__gguf_split(ml_gguf *g, const char *const *paths, size_t n, ml_error *err)
{
    split_keys k;
    ml_status s = read_keys(g, &k, err);
    if (s)
        return s;
    if (!k.count_kv || k.count == 0) {
        if (n > 1)
            return ml__err(err, ML_E_INVAL, "split.count", -1,
                           "%zu files given, but %s is not a part of a split model (%s)", n,
                           paths[0], k.count_kv ? "split.count is 0" : "no split.count");
        return ML_OK;
    }
    if ((s = check_first(g, &k, err)))
        return s;
    if (n > 1 && n != k.count)
        return ml__err(err, ML_E_INVAL, "split.count", value_at(k.count_kv),
                       "%u parts, but %zu files given", k.count, n);
    if (k.count == 1)
        return check_single(g, &k, err);
    if (!paths)
        return not_from_a_file(&k, err);
    if (n == 1)
        return open_by_name(g, paths[0], &k, err);
    return open_parts(g, paths, &k, err);
}
