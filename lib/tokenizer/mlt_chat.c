/* mlt_chat.c - the chat section of an .mlt (flag 512, mlt(5) CHAT
 * SECTION): the ids that end a generation (EOS, end of turn, end of
 * message) and the model's named chat templates.  Its rules, access to it
 * in place, and its serialization for the writer.
 *
 *     u32 n_eog, then n_eog u32 ids (increasing, below n_vocab, EOS among them)
 *     u32 n_templates, then per template:
 *         u32 name_len, the name ([A-Za-z0-9_.-], unique)
 *         u32 len, the text (UTF-8 without NUL)
 *
 * and nothing after it. */
#include "tokenizer/tok.h"

#include <stdio.h>
#include <stdlib.h>

/* ---------------------------------------------------------------------------
 * Reading
 * ------------------------------------------------------------------------- */

/* A bounds-checked cursor over the section. */
typedef struct cursor {
    const uint8_t *d;
    size_t size, pos;
    ml_error *err;
} cursor;

static ml_status take_u32(cursor *c, const char *field, uint32_t *v)
{
    if (c->size - c->pos < 4)
        return ml__err(c->err, ML_E_FORMAT, field, (int64_t)c->pos,
                       "the file ends inside the chat section");
    *v = ml__rd32(c->d + c->pos);
    c->pos += 4;
    return ML_OK;
}

static ml_status read_eog(cursor *c, const ml_mlt_header *h, ml__mlt_chat *out)
{
    uint32_t n;
    int64_t at = (int64_t)c->pos;
    ml_status s = take_u32(c, "chat.n_eog", &n);
    if (s)
        return s;
    if (n == 0 || n > ML_MLT_MAX_EOG)
        return ml__err(c->err, ML_E_FORMAT, "chat.n_eog", at, "%u is outside 1..%u", n,
                       (unsigned)ML_MLT_MAX_EOG);
    out->eog_off = c->pos;
    out->n_eog = n;
    int has_eos = h->eos == ML_TOKEN_NONE;
    char name[32];
    for (uint32_t i = 0, prev = 0; i < n; i++) {
        uint32_t id = 0;
        snprintf(name, sizeof name, "chat.eog %u", i);
        at = (int64_t)c->pos;
        if ((s = take_u32(c, name, &id)))
            return s;
        if (id >= h->n_vocab)
            return ml__err(c->err, ML_E_FORMAT, name, at, "id %u is not below n_vocab %u", id,
                           h->n_vocab);
        if (i > 0 && id <= prev)
            return ml__err(c->err, ML_E_FORMAT, name, at,
                           "id %u does not follow %u: the ids are in increasing order", id, prev);
        has_eos |= id == h->eos;
        prev = id;
    }
    if (!has_eos)
        return ml__err(c->err, ML_E_FORMAT, "chat.eog", (int64_t)out->eog_off,
                       "the EOS id %u is not among the end-of-generation ids", h->eos);
    return ML_OK;
}

static int name_char(uint8_t ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '.' || ch == '-';
}

/* A length-prefixed string of 1 to max bytes: its u32 length, then the
 * bytes, which *p points at (the cursor moves past them). */
static ml_status take_string(cursor *c, const char *field, uint32_t max, const uint8_t **p,
                             uint32_t *len)
{
    int64_t at = (int64_t)c->pos;
    ml_status s = take_u32(c, field, len);
    if (s)
        return s;
    if (*len == 0 || *len > max || *len > c->size - c->pos)
        return ml__err(c->err, ML_E_FORMAT, field, at, "length %u is outside 1..%u%s", *len,
                       (unsigned)max,
                       *len > c->size - c->pos ? " or runs past the end of the file" : "");
    *p = c->d + c->pos;
    c->pos += *len;
    return ML_OK;
}

static ml_status read_name(cursor *c, uint32_t i, ml__mlt_chat *out)
{
    char field[48];
    snprintf(field, sizeof field, "template %u name", i);
    const uint8_t *p;
    uint32_t len;
    size_t at = c->pos;
    ml_status s = take_string(c, field, ML_MLT_TEMPLATE_NAME_MAX, &p, &len);
    if (s)
        return s;
    size_t off = (size_t)(p - c->d);
    for (uint32_t k = 0; k < len; k++)
        if (!name_char(p[k]))
            return ml__err(c->err, ML_E_FORMAT, field, (int64_t)(off + k),
                           "byte 0x%02x: a name is made of A-Z a-z 0-9 _ . -", p[k]);
    for (uint32_t j = 0; j < i; j++)
        if (out->tmpl[j].name_len == len && memcmp(c->d + out->tmpl[j].name_off, p, len) == 0)
            return ml__err(c->err, ML_E_FORMAT, field, (int64_t)at,
                           "the name \"%.*s\" is taken by template %u", (int)len, (const char *)p, j);
    out->tmpl[i].name_off = off;
    out->tmpl[i].name_len = len;
    return ML_OK;
}

static ml_status read_text(cursor *c, uint32_t i, ml__mlt_chat *out)
{
    char field[48];
    snprintf(field, sizeof field, "template %u text", i);
    const uint8_t *p;
    uint32_t len;
    ml_status s = take_string(c, field, ML_MLT_TEMPLATE_MAX, &p, &len);
    if (s)
        return s;
    size_t off = (size_t)(p - c->d);
    for (uint32_t k = 0; k < len;) {
        int n = p[k] ? ml__utf8_seq(p + k, len - k) : -1;
        if (n < 0)
            return ml__err(c->err, ML_E_FORMAT, field, (int64_t)(off + k),
                           p[k] ? "invalid UTF-8" : "a NUL byte in the text");
        k += (uint32_t)n;
    }
    out->tmpl[i].text_off = off;
    out->tmpl[i].len = len;
    return ML_OK;
}

ml_status ml__mlt_chat_read(const uint8_t *d, size_t size, size_t pos, const ml_mlt_header *h,
                            ml__mlt_chat *out, ml_error *err)
{
    cursor c = {d, size, pos, err};
    memset(out, 0, sizeof *out);
    ml_status s = read_eog(&c, h, out);
    if (s)
        return s;
    uint32_t n;
    int64_t at = (int64_t)c.pos;
    if ((s = take_u32(&c, "chat.n_templates", &n)))
        return s;
    if (n > ML_MLT_MAX_TEMPLATES)
        return ml__err(err, ML_E_FORMAT, "chat.n_templates", at, "%u is above %u", n,
                       (unsigned)ML_MLT_MAX_TEMPLATES);
    for (uint32_t i = 0; i < n; i++) {
        if ((s = read_name(&c, i, out)) || (s = read_text(&c, i, out)))
            return s;
        out->n_templates = i + 1;
    }
    if (c.pos != size)
        return ml__err(err, ML_E_FORMAT, "chat", (int64_t)c.pos,
                       "%zu bytes after the chat section", size - c.pos);
    return ML_OK;
}

/* ---------------------------------------------------------------------------
 * Access
 * ------------------------------------------------------------------------- */

uint32_t ml_mlt_n_eog(const ml_mlt *t)
{
    const ml__mlt_chat *ch = ml__mlt_chat_of(t);
    if (ch)
        return ch->n_eog;
    return ml_mlt_get_header(t)->eos != ML_TOKEN_NONE;
}

ml_token ml_mlt_eog(const ml_mlt *t, uint32_t i)
{
    const ml__mlt_chat *ch = ml__mlt_chat_of(t);
    if (ch)
        return i < ch->n_eog ? ml__rd32(ml__mlt_data(t) + ch->eog_off + 4 * (size_t)i) : 0;
    return ml_mlt_get_header(t)->eos;
}

int ml_mlt_is_eog(const ml_mlt *t, ml_token id)
{
    uint32_t lo = 0, hi = ml_mlt_n_eog(t);
    while (lo < hi) { /* the ids are increasing */
        uint32_t mid = lo + (hi - lo) / 2, v = ml_mlt_eog(t, mid);
        if (v == id)
            return 1;
        if (v < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

uint32_t ml_mlt_n_templates(const ml_mlt *t)
{
    const ml__mlt_chat *ch = ml__mlt_chat_of(t);
    return ch ? ch->n_templates : 0;
}

ml_mlt_template ml_mlt_get_template(const ml_mlt *t, uint32_t i)
{
    ml_mlt_template r = {"", 0, "", 0};
    const ml__mlt_chat *ch = ml__mlt_chat_of(t);
    if (!ch || i >= ch->n_templates)
        return r;
    const char *d = (const char *)ml__mlt_data(t);
    r.name = d + ch->tmpl[i].name_off;
    r.name_len = ch->tmpl[i].name_len;
    r.text = d + ch->tmpl[i].text_off;
    r.len = ch->tmpl[i].len;
    return r;
}

int ml_mlt_find_template(const ml_mlt *t, const char *name, ml_mlt_template *out)
{
    size_t n = strlen(name);
    for (uint32_t i = 0; i < ml_mlt_n_templates(t); i++) {
        ml_mlt_template k = ml_mlt_get_template(t, i);
        if (k.name_len == n && memcmp(k.name, name, n) == 0) {
            if (out)
                *out = k;
            return 1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------------------
 * Writing
 * ------------------------------------------------------------------------- */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The writer's id set: chat's ids and EOS, sorted, without repeats. */
static ml_status eog_set(const ml_mlt_chat *chat, ml_token eos, uint32_t **out, uint32_t *n,
                         ml_error *err)
{
    uint32_t *v = malloc(((size_t)chat->n_eog + 1) * sizeof *v);
    if (!v)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    uint32_t k = 0;
    for (uint32_t i = 0; i < chat->n_eog; i++)
        v[k++] = chat->eog[i];
    if (eos != ML_TOKEN_NONE)
        v[k++] = eos;
    qsort(v, k, sizeof *v, cmp_u32);
    uint32_t m = 0;
    for (uint32_t i = 0; i < k; i++)
        if (m == 0 || v[i] != v[m - 1])
            v[m++] = v[i];
    *out = v;
    *n = m;
    return ML_OK;
}

ml_status ml__mlt_chat_size(const ml_mlt_chat *chat, ml_token eos, uint64_t *size, ml_error *err)
{
    if ((!chat->eog && chat->n_eog) || (!chat->templates && chat->n_templates))
        return ml__err(err, ML_E_INVAL, "", -1, "NULL chat arrays");
    if (chat->n_eog > ML_MLT_MAX_EOG || chat->n_templates > ML_MLT_MAX_TEMPLATES)
        return ml__err(err, ML_E_INVAL, "", -1, "%u ids, %u templates: more than %u and %u",
                       chat->n_eog, chat->n_templates, (unsigned)ML_MLT_MAX_EOG,
                       (unsigned)ML_MLT_MAX_TEMPLATES);
    uint64_t total = 8 + 4 * ((uint64_t)chat->n_eog + (eos != ML_TOKEN_NONE));
    for (uint32_t i = 0; i < chat->n_templates; i++) {
        const ml_mlt_template *k = &chat->templates[i];
        if (k->name_len > ML_MLT_TEMPLATE_NAME_MAX || k->len > ML_MLT_TEMPLATE_MAX ||
            (!k->name && k->name_len) || (!k->text && k->len))
            return ml__err(err, ML_E_INVAL, "", -1, "template %u: bad name or text", i);
        total += 8 + (uint64_t)k->name_len + k->len;
    }
    *size = total; /* an upper bound: repeated ids are dropped */
    return ML_OK;
}

ml_status ml__mlt_chat_write(const ml_mlt_chat *chat, ml_token eos, uint8_t *buf, size_t *len,
                             ml_error *err)
{
    uint32_t *ids = NULL, n = 0;
    ml_status s = eog_set(chat, eos, &ids, &n, err);
    if (s)
        return s;
    size_t pos = 0;
    ml__wr32(buf + pos, n);
    pos += 4;
    for (uint32_t i = 0; i < n; i++, pos += 4)
        ml__wr32(buf + pos, ids[i]);
    free(ids);
    ml__wr32(buf + pos, chat->n_templates);
    pos += 4;
    for (uint32_t i = 0; i < chat->n_templates; i++) {
        const ml_mlt_template *k = &chat->templates[i];
        ml__wr32(buf + pos, k->name_len);
        if (k->name_len)
            memcpy(buf + pos + 4, k->name, k->name_len);
        pos += 4 + k->name_len;
        ml__wr32(buf + pos, k->len);
        if (k->len)
            memcpy(buf + pos + 4, k->text, k->len);
        pos += 4 + k->len;
    }
    *len = pos;
    return ML_OK;
}
