/* convert_build.c - what every step of building a GGUF -> .mlb plan
 * uses (convert.c orders the steps, convert_header.c reads the header,
 * convert_bind.c binds the arrays): metadata keys of the architecture,
 * notes for people, refusals and errors that name the key or tensor and
 * its offset, tensor look-ups that record which tensors were used, and
 * shape and type checks. */
#include "convert/convert_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>


const char *ml__conv_key(ml__conv_build *b, const char *suffix)
{
    snprintf(b->key, sizeof b->key, "%s.%s", b->p->arch, suffix);
    return b->key;
}

int ml__conv_is_linear(const ml__conv_build *b, uint32_t l)
{
    return (b->flags[l] & ML_LAYER_LINEAR) != 0;
}

ml_status ml__conv_note(ml__conv_build *b, const char *fmt, ...)
{
    ml_convert_plan *p = b->p;
    char **notes = ml_array_reserve(p->notes, &p->cap_notes, p->n_notes + 1, sizeof *notes);
    if (!notes)
        return ml__err(b->err, ML_E_NOMEM, "", -1, "out of memory");
    p->notes = notes;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    size_t len = strlen(buf) + 1;
    if (!(p->notes[p->n_notes] = malloc(len)))
        return ml__err(b->err, ML_E_NOMEM, "", -1, "out of memory");
    memcpy(p->notes[p->n_notes++], buf, len);
    return ML_OK;
}

int64_t ml__conv_kv_offset(ml__conv_build *b, const char *key)
{
    const ml_gguf_kv *kv = ml_gguf_find(b->g, key);
    return kv ? (int64_t)kv->value.offset : -1;
}

/* A value .mlb cannot hold: ML_E_UNSUPPORTED naming the key. */
ml_status ml__conv_refuse(ml__conv_build *b, const char *key, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return ml__err(b->err, ML_E_UNSUPPORTED, key, ml__conv_kv_offset(b, key), "%s", buf);
}

/* A key whose value is wrong: ML_E_FORMAT naming "{arch}.suffix". */
ml_status ml__conv_bad_key(ml__conv_build *b, const char *suffix, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    const char *key = ml__conv_key(b, suffix);
    return ml__err(b->err, ML_E_FORMAT, key, ml__conv_kv_offset(b, key), "%s", buf);
}

/* ---- tensors ---- */

static size_t tensor_index(ml__conv_build *b, const ml_gguf_tensor *t)
{
    const ml_gguf_tensor *base = ml_gguf_tensor_at(b->g, 0);
    if (base && t >= base && (size_t)(t - base) < b->n_tensors &&
        ml_gguf_tensor_at(b->g, (size_t)(t - base)) == t)
        return (size_t)(t - base);
    for (size_t i = 0; i < b->n_tensors; i++)
        if (ml_gguf_tensor_at(b->g, i) == t)
            return i;
    return SIZE_MAX;
}

/* Finds a tensor by formatted name and marks it used. */
const ml_gguf_tensor *ml__conv_tensor(ml__conv_build *b, const char *fmt, ...)
{
    char name[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    const ml_gguf_tensor *t = ml_gguf_find_tensor(b->g, name);
    if (t) {
        size_t i = tensor_index(b, t);
        if (i != SIZE_MAX)
            b->used[i] = 1;
    }
    return t;
}

ml_status ml__conv_missing(ml__conv_build *b, const char *name)
{
    return ml__err(b->err, ML_E_FORMAT, name, -1, "required tensor is missing");
}

/* Checks a tensor holds `rows` rows of `cols` (rows 0: a vector of cols). */
ml_status ml__conv_shape(ml__conv_build *b, const ml_gguf_tensor *t, uint64_t cols, uint64_t rows,
                         const char *what)
{
    int ok = t->dims[2] == 1 && t->dims[3] == 1;
    if (rows == 0)
        ok = ok && t->n_elements == cols && t->cols == cols;
    else
        ok = ok && t->cols == cols && t->rows == rows;
    if (ok)
        return ML_OK;
    if (rows == 0)
        return ml__err(b->err, ML_E_SHAPE, t->name, (int64_t)t->info_offset,
                       "shape [%llu, %llu], expected [%llu] (%s)", (unsigned long long)t->dims[0],
                       (unsigned long long)t->dims[1], (unsigned long long)cols, what);
    return ml__err(b->err, ML_E_SHAPE, t->name, (int64_t)t->info_offset,
                   "shape [%llu, %llu, %llu], expected [%llu, %llu] (%s)",
                   (unsigned long long)t->dims[0], (unsigned long long)t->dims[1],
                   (unsigned long long)t->dims[2], (unsigned long long)cols,
                   (unsigned long long)rows, what);
}

ml_status ml__conv_check_type(ml__conv_build *b, const ml_gguf_tensor *t)
{
    if (ml_gguf_type_supported(t->type))
        return ML_OK;
    return ml__err(b->err, ML_E_UNSUPPORTED, t->name, (int64_t)t->info_offset,
                   "tensor type %s cannot be converted (supported: F32, F16, BF16, Q4_0, Q4_1, "
                   "Q5_0, Q5_1, Q8_0, Q2_K-Q6_K, IQ4_NL, IQ4_XS, MXFP4)",
                   t->type_name ? t->type_name : "?");
}
