/* mlt.c - the .mlt tokenizer format (mlt(5)): header decoding, every
 * validation rule of the reader, access to tokens and merges in place, and
 * the writer, which serializes and then applies the reader's rules so that
 * it can never produce a file the reader refuses.  The optional chat
 * section after the merges is mlt_chat.c's. */
#include "base/io.h"
#include "tokenizer/tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ml_mlt {
    ml__input in;           /* the file, when opened by path */
    const uint8_t *data;
    size_t size;
    ml_mlt_header h;
    size_t *tok_off;        /* n_vocab record offsets */
    size_t merge_off;       /* offset of the first merge rule */
    ml__mlt_chat chat;      /* with flag ML_MLT_CHAT (mlt_chat.c) */
};

/* ---------------------------------------------------------------------------
 * Header
 * ------------------------------------------------------------------------- */

void ml_mlt_header_decode(const uint8_t buf[ML_MLT_HEADER_SIZE], ml_mlt_header *h)
{
    memcpy(h->magic, buf, 4);
    h->version = ml__rd32(buf + 4);
    h->kind = ml__rd32(buf + 8);
    h->n_vocab = ml__rd32(buf + 12);
    h->n_merges = ml__rd32(buf + 16);
    h->bos = ml__rd32(buf + 20);
    h->eos = ml__rd32(buf + 24);
    h->flags = ml__rd32(buf + 28);
}

void ml_mlt_header_encode(const ml_mlt_header *h, uint8_t buf[ML_MLT_HEADER_SIZE])
{
    memcpy(buf, h->magic, 4);
    ml__wr32(buf + 4, h->version);
    ml__wr32(buf + 8, h->kind);
    ml__wr32(buf + 12, h->n_vocab);
    ml__wr32(buf + 16, h->n_merges);
    ml__wr32(buf + 20, h->bos);
    ml__wr32(buf + 24, h->eos);
    ml__wr32(buf + 28, h->flags);
}

int32_t ml_mlt_id_i32(ml_token id)
{
    /* Two's complement written out: converting an unsigned value above
     * INT32_MAX to int32_t is implementation-defined in C. */
    return id <= INT32_MAX ? (int32_t)id : -(int32_t)(UINT32_MAX - id) - 1;
}

static const char *const flag_names[] = {
    "add_bos", "ignore_merges", "prefix_first", "nfc", "single_digits",
    "gpt2_regex", "split_digits", "no_prefix", "marks_regex", "chat", "user_tokens", "o200k_regex",
};

void ml_mlt_flag_names(uint32_t flags, char *buf, size_t n)
{
    size_t w = 0;
    if (!n)
        return;
    buf[0] = 0;
    for (unsigned b = 0; b < 32 && w < n; b++) {
        if (!(flags & (1u << b)))
            continue;
        int k;
        if (b < sizeof flag_names / sizeof flag_names[0])
            k = snprintf(buf + w, n - w, "%s%s", w ? " " : "", flag_names[b]);
        else
            k = snprintf(buf + w, n - w, "%sbit%u", w ? " " : "", b);
        w += k > 0 ? (size_t)k : 0;
    }
}

/* ---------------------------------------------------------------------------
 * Validation, rule by rule in file order
 * ------------------------------------------------------------------------- */

/* Header field offsets, for messages. */
enum { O_MAGIC = 0, O_VERSION = 4, O_KIND = 8, O_NVOCAB = 12, O_NMERGES = 16, O_BOS = 20,
       O_EOS = 24, O_FLAGS = 28 };

/* A wrong file is more common than a corrupt one: say what it is. */
static ml_status check_magic(const uint8_t *m, ml_error *err)
{
    if (memcmp(m, "MLT1", 4) == 0)
        return ML_OK;
    const char *what = "not an .mlt tokenizer";
    if (memcmp(m, "MLB1", 4) == 0)
        what = "this is an .mlb model, not a tokenizer";
    else if (memcmp(m, "GGUF", 4) == 0)
        what = "this is a GGUF file; convert it with gguf2mlb";
    else if (memcmp(m, "MLI1", 4) == 0)
        what = "this is an .mli importance matrix, not a tokenizer";
    else if (m[0] == '{')
        what = "this looks like JSON (a tokenizer.json?); convert it with tools/json2mlt.py";
    char shown[17];
    ml__magic_shown(m, shown);
    return ml__err(err, ML_E_FORMAT, "magic", O_MAGIC, "\"%s\" is not \"MLT1\": %s", shown, what);
}

/* Flags a kind does not use are refused rather than ignored: a file that
 * asks for a behaviour we would silently skip would encode wrongly. */
#define KIND1_FLAGS (ML_MLT_ADD_BOS | ML_MLT_IGNORE_MERGES | ML_MLT_PREFIX_FIRST | \
                     ML_MLT_NO_PREFIX | ML_MLT_CHAT | ML_MLT_USER_TOKENS)
#define KIND2_FLAGS (ML_MLT_ADD_BOS | ML_MLT_IGNORE_MERGES | ML_MLT_NFC | ML_MLT_SINGLE_DIGITS | \
                     ML_MLT_GPT2_REGEX | ML_MLT_SPLIT_DIGITS | ML_MLT_MARKS_REGEX | ML_MLT_CHAT | \
                     ML_MLT_USER_TOKENS | ML_MLT_O200K_REGEX)

static ml_status check_flags(const ml_mlt_header *h, ml_error *err)
{
    uint32_t f = h->flags;
    if (f & ~(uint32_t)ML_MLT_KNOWN_FLAGS)
        return ml__err(err, ML_E_FORMAT, "flags", O_FLAGS,
                       "0x%x has unknown bits 0x%x (this build knows 0x%x)", f,
                       f & ~(uint32_t)ML_MLT_KNOWN_FLAGS, (unsigned)ML_MLT_KNOWN_FLAGS);
    uint32_t allowed = h->kind == ML_MLT_KIND_SPM ? KIND1_FLAGS : KIND2_FLAGS;
    if (f & ~allowed)
        return ml__err(err, ML_E_FORMAT, "flags", O_FLAGS, "bits 0x%x do not apply to kind %u",
                       f & ~allowed, h->kind);
    if ((f & ML_MLT_PREFIX_FIRST) && (f & ML_MLT_NO_PREFIX))
        return ml__err(err, ML_E_FORMAT, "flags", O_FLAGS,
                       "prefix_first (4) and no_prefix (128) contradict each other");
    if ((f & ML_MLT_GPT2_REGEX) && (f & (ML_MLT_SINGLE_DIGITS | ML_MLT_MARKS_REGEX)))
        return ml__err(err, ML_E_FORMAT, "flags", O_FLAGS,
                       "single_digits (16) and marks_regex (256) modify the Llama 3 regex, "
                       "not the GPT-2 one (32)");
    if ((f & ML_MLT_O200K_REGEX) &&
        (f & (ML_MLT_GPT2_REGEX | ML_MLT_SINGLE_DIGITS | ML_MLT_MARKS_REGEX)))
        return ml__err(err, ML_E_FORMAT, "flags", O_FLAGS,
                       "o200k_regex (2048) is a regex of its own: gpt2_regex (32), "
                       "single_digits (16) and marks_regex (256) cannot modify it");
    if ((f & ML_MLT_ADD_BOS) && h->bos == ML_TOKEN_NONE)
        return ml__err(err, ML_E_FORMAT, "flags", O_FLAGS, "add_bos (1) is set but bos is -1");
    return ML_OK;
}

/* The message prints the field as the file's i32: a negative id other
 * than -1 reads as such, not as a large unsigned number. */
static ml_status check_special(const char *name, int64_t off, ml_token id, uint32_t n_vocab,
                               ml_error *err)
{
    if (id != ML_TOKEN_NONE && id >= n_vocab)
        return ml__err(err, ML_E_FORMAT, name, off, "%d is neither -1 nor a token id below %u",
                       (int)ml_mlt_id_i32(id), n_vocab);
    return ML_OK;
}

static ml_status check_header(const ml_mlt_header *h, size_t size, ml_error *err)
{
    if (h->version != ML_MLT_VERSION)
        return ml__err(err, ML_E_FORMAT, "version", O_VERSION,
                       "%u is not 1 (this build reads version 1)", h->version);
    if (h->kind != ML_MLT_KIND_SPM && h->kind != ML_MLT_KIND_BYTE_BPE)
        return ml__err(err, ML_E_FORMAT, "kind", O_KIND,
                       "unknown kind %u (1 SentencePiece-style BPE, 2 byte-level BPE)", h->kind);
    if (h->n_vocab == 0 || h->n_vocab > ML_MLB_VOCAB_LIMIT)
        return ml__err(err, ML_E_FORMAT, "n_vocab", O_NVOCAB, "%u is outside 1..%u", h->n_vocab,
                       (unsigned)ML_MLB_VOCAB_LIMIT);
    /* Each token takes at least 5 bytes and each merge 12: compare with the
     * file before anything is allocated or read. */
    uint64_t need = (uint64_t)h->n_vocab * ML_MLT_TOKEN_OVERHEAD;
    if (need > size - ML_MLT_HEADER_SIZE)
        return ml__err(err, ML_E_FORMAT, "n_vocab", O_NVOCAB,
                       "%u tokens need at least %llu bytes, the file has %llu after the header",
                       h->n_vocab, (unsigned long long)need,
                       (unsigned long long)(size - ML_MLT_HEADER_SIZE));
    uint64_t need_m = (uint64_t)h->n_merges * ML_MLT_MERGE_SIZE;
    if (need_m > size - ML_MLT_HEADER_SIZE - need)
        return ml__err(err, ML_E_FORMAT, "n_merges", O_NMERGES,
                       "%u merges need %llu bytes, the file has at most %llu after the tokens",
                       h->n_merges, (unsigned long long)need_m,
                       (unsigned long long)(size - ML_MLT_HEADER_SIZE - need));
    ml_status s = check_special("bos", O_BOS, h->bos, h->n_vocab, err);
    if (!s)
        s = check_special("eos", O_EOS, h->eos, h->n_vocab, err);
    if (!s)
        s = check_flags(h, err);
    return s;
}

static ml_status check_tokens(const uint8_t *d, size_t size, const ml_mlt_header *h,
                              size_t *off, size_t *end, ml_error *err)
{
    size_t pos = ML_MLT_HEADER_SIZE;
    char name[32];
    int has_user = 0;
    for (uint32_t i = 0; i < h->n_vocab; i++) {
        snprintf(name, sizeof name, "token %u", i);
        if (size - pos < ML_MLT_TOKEN_OVERHEAD)
            return ml__err(err, ML_E_FORMAT, name, (int64_t)pos,
                           "the file ends inside the token record");
        uint8_t attr = d[pos];
        uint32_t len = ml__rd32(d + pos + 1);
        if (attr > ML_MLT_USER)
            return ml__err(err, ML_E_FORMAT, name, (int64_t)pos,
                           "attr %u is not 0 (normal), 1 (added), 2 (byte) or 3 (user)", attr);
        if (attr == ML_MLT_USER && !(h->flags & ML_MLT_USER_TOKENS))
            return ml__err(err, ML_E_FORMAT, name, (int64_t)pos,
                           "attr 3 (user) needs flag user_tokens (1024)");
        has_user |= attr == ML_MLT_USER;
        if (len > size - pos - ML_MLT_TOKEN_OVERHEAD)
            return ml__err(err, ML_E_FORMAT, name, (int64_t)pos + 1,
                           "length %u runs past the end of the file", len);
        if (attr == ML_MLT_BYTE && len != 1)
            return ml__err(err, ML_E_FORMAT, name, (int64_t)pos + 1,
                           "a byte token holds exactly 1 byte, not %u", len);
        if (len == 0)
            return ml__err(err, ML_E_FORMAT, name, (int64_t)pos + 1, "empty piece");
        off[i] = pos;
        pos += ML_MLT_TOKEN_OVERHEAD + (size_t)len;
    }
    /* The flag says what the records hold, so that it cannot lie. */
    if ((h->flags & ML_MLT_USER_TOKENS) && !has_user)
        return ml__err(err, ML_E_FORMAT, "flags", O_FLAGS,
                       "user_tokens (1024) is set but no token has attr 3");
    *end = pos;
    return ML_OK;
}

static ml_status check_merges(const uint8_t *d, size_t size, size_t pos, const ml_mlt_header *h,
                              const size_t *off, ml_error *err)
{
    uint64_t need = (uint64_t)h->n_merges * ML_MLT_MERGE_SIZE;
    if (need > size - pos)
        return ml__err(err, ML_E_FORMAT, "n_merges", O_NMERGES,
                       "%u merges need %llu bytes, %llu remain after the tokens", h->n_merges,
                       (unsigned long long)need, (unsigned long long)(size - pos));
    if (need < size - pos && !(h->flags & ML_MLT_CHAT))
        return ml__err(err, ML_E_FORMAT, "merges", (int64_t)(pos + need),
                       "%llu bytes after the last merge", (unsigned long long)(size - pos - need));
    char name[32];
    for (uint32_t r = 0; r < h->n_merges; r++, pos += ML_MLT_MERGE_SIZE) {
        uint32_t id[3];
        for (int k = 0; k < 3; k++) {
            id[k] = ml__rd32(d + pos + 4 * k);
            if (id[k] >= h->n_vocab) {
                snprintf(name, sizeof name, "merge %u", r);
                return ml__err(err, ML_E_FORMAT, name, (int64_t)pos + 4 * k,
                               "%s id %u is not below n_vocab %u",
                               k == 0 ? "left" : k == 1 ? "right" : "merged", id[k], h->n_vocab);
            }
        }
        uint32_t ll = ml__rd32(d + off[id[0]] + 1), rl = ml__rd32(d + off[id[1]] + 1);
        uint32_t ml = ml__rd32(d + off[id[2]] + 1);
        const uint8_t *mp = d + off[id[2]] + ML_MLT_TOKEN_OVERHEAD;
        if ((uint64_t)ll + rl != ml || memcmp(mp, d + off[id[0]] + ML_MLT_TOKEN_OVERHEAD, ll) ||
            memcmp(mp + ll, d + off[id[1]] + ML_MLT_TOKEN_OVERHEAD, rl)) {
            snprintf(name, sizeof name, "merge %u", r);
            return ml__err(err, ML_E_FORMAT, name, (int64_t)pos + 8,
                           "token %u is not token %u followed by token %u", id[2], id[0], id[1]);
        }
    }
    return ML_OK;
}

/* Every rule over a byte range; fills t's header, offsets and merge start. */
static ml_status validate(ml_mlt *t, ml_error *err)
{
    const uint8_t *d = t->data;
    size_t size = t->size;
    if (size < ML_MLT_HEADER_SIZE) {
        if (size >= 4 && check_magic(d, err))
            return ML_E_FORMAT;
        return ml__err(err, ML_E_FORMAT, "header", 0,
                       "the file has %zu bytes, fewer than the %d-byte header%s", size,
                       ML_MLT_HEADER_SIZE, size ? "" : " (empty file)");
    }
    ml_status s = check_magic(d, err);
    if (s)
        return s;
    ml_mlt_header_decode(d, &t->h);
    if ((s = check_header(&t->h, size, err)))
        return s;
    /* n_vocab is bounded by the file size (5 bytes each) and by 2^24. */
    size_t n;
    if (ml__to_size((uint64_t)t->h.n_vocab * sizeof *t->tok_off, &n))
        return ml__err(err, ML_E_NOMEM, "n_vocab", O_NVOCAB, "offset table does not fit");
    t->tok_off = malloc(n);
    if (!t->tok_off)
        return ml__err(err, ML_E_NOMEM, "n_vocab", O_NVOCAB, "cannot allocate %zu bytes", n);
    if ((s = check_tokens(d, size, &t->h, t->tok_off, &t->merge_off, err)))
        return s;
    if ((s = check_merges(d, size, t->merge_off, &t->h, t->tok_off, err)))
        return s;
    if (!(t->h.flags & ML_MLT_CHAT))
        return ML_OK;
    return ml__mlt_chat_read(d, size, t->merge_off + (size_t)t->h.n_merges * ML_MLT_MERGE_SIZE,
                             &t->h, &t->chat, err);
}

/* ---------------------------------------------------------------------------
 * Opening and access
 * ------------------------------------------------------------------------- */

static ml_status open_common(ml_mlt *t, ml_mlt **out, ml_error *err)
{
    ml_status s = validate(t, err);
    if (s) {
        ml_mlt_close(t);
        return s;
    }
    *out = t;
    return ML_OK;
}

ml_status ml_mlt_open_memory(const void *buf, size_t len, ml_mlt **out, ml_error *err)
{
    *out = NULL;
    if (!buf && len)
        return ml__err(err, ML_E_INVAL, "", -1, "NULL buffer");
    ml_mlt *t = calloc(1, sizeof *t);
    if (!t)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    t->data = buf ? buf : (const uint8_t *)"";
    t->size = len;
    return open_common(t, out, err);
}

ml_status ml_mlt_open(const char *path, ml_mlt **out, ml_error *err)
{
    *out = NULL;
    ml_mlt *t = calloc(1, sizeof *t);
    if (!t)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    ml_status s = ml__input_open(path, &t->in, err);
    if (s) {
        free(t);
        return s;
    }
    t->data = t->in.data ? t->in.data : (const uint8_t *)"";
    t->size = t->in.size;
    return open_common(t, out, err);
}

void ml_mlt_close(ml_mlt *t)
{
    if (!t)
        return;
    ml__input_close(&t->in);
    free(t->tok_off);
    free(t);
}

const ml_mlt_header *ml_mlt_get_header(const ml_mlt *t)
{
    return &t->h;
}

uint64_t ml_mlt_file_size(const ml_mlt *t)
{
    return t->size;
}

ml_mlt_token ml_mlt_get_token(const ml_mlt *t, ml_token id)
{
    ml_mlt_token k = {NULL, 0, 0};
    if (id >= t->h.n_vocab)
        return k;
    const uint8_t *r = t->data + t->tok_off[id];
    k.attr = r[0];
    k.len = ml__rd32(r + 1);
    k.bytes = r + ML_MLT_TOKEN_OVERHEAD;
    return k;
}

uint64_t ml_mlt_token_offset(const ml_mlt *t, ml_token id)
{
    return id < t->h.n_vocab ? t->tok_off[id] : 0;
}

void ml_mlt_get_merge(const ml_mlt *t, uint32_t rank, uint32_t *left, uint32_t *right,
                      uint32_t *merged)
{
    if (rank >= t->h.n_merges) {
        *left = *right = *merged = 0;
        return;
    }
    const uint8_t *p = t->data + t->merge_off + (size_t)rank * ML_MLT_MERGE_SIZE;
    *left = ml__rd32(p);
    *right = ml__rd32(p + 4);
    *merged = ml__rd32(p + 8);
}

const uint8_t *ml__mlt_merges(const ml_mlt *t)
{
    return t->data + t->merge_off;
}

const uint8_t *ml__mlt_data(const ml_mlt *t)
{
    return t->data;
}

const ml__mlt_chat *ml__mlt_chat_of(const ml_mlt *t)
{
    return t->h.flags & ML_MLT_CHAT ? &t->chat : NULL;
}

ml_status ml_mlt_check_vocab(const ml_mlt *t, uint32_t model_vocab, ml_error *err)
{
    if (t->h.n_vocab > model_vocab)
        return ml__err(err, ML_E_SHAPE, "n_vocab", O_NVOCAB,
                       "the tokenizer has %u tokens, the model only %u embeddings", t->h.n_vocab,
                       model_vocab);
    return ML_OK;
}

/* Same ids for the same tokens: what a model drafting for another needs
 * (its guesses are the other's ids).  Merges and flags change how text is
 * split, not what an id stands for, so they are not compared. */
ml_status ml_mlt_same_tokens(const ml_mlt *a, const ml_mlt *b, ml_error *err)
{
    if (a->h.kind != b->h.kind)
        return ml__err(err, ML_E_MISMATCH, "kind", O_KIND, "kind %u, the other tokenizer's %u",
                       b->h.kind, a->h.kind);
    if (a->h.n_vocab != b->h.n_vocab)
        return ml__err(err, ML_E_MISMATCH, "n_vocab", O_NVOCAB,
                       "%u tokens, the other tokenizer's %u", b->h.n_vocab, a->h.n_vocab);
    for (ml_token id = 0; id < a->h.n_vocab; id++) {
        ml_mlt_token x = ml_mlt_get_token(a, id), y = ml_mlt_get_token(b, id);
        if (x.attr != y.attr || x.len != y.len || memcmp(x.bytes, y.bytes, x.len) != 0)
            return ml__err(err, ML_E_MISMATCH, "tokens", (int64_t)ml_mlt_token_offset(b, id),
                           "token %u differs from the other tokenizer's (piece or attribute)", id);
    }
    return ML_OK;
}

/* ---------------------------------------------------------------------------
 * Writing
 * ------------------------------------------------------------------------- */

static ml_status serialized_size(const ml_mlt_token *tokens, uint32_t n_vocab, uint32_t n_merges,
                                 const ml_mlt_chat *chat, ml_token eos, size_t *out, ml_error *err)
{
    uint64_t total = ML_MLT_HEADER_SIZE, m, c = 0;
    for (uint32_t i = 0; i < n_vocab; i++)
        if (ml__add64(total, (uint64_t)ML_MLT_TOKEN_OVERHEAD + tokens[i].len, &total))
            return ml__err(err, ML_E_NOMEM, "", -1, "tokenizer size overflows");
    if (chat) {
        ml_status s = ml__mlt_chat_size(chat, eos, &c, err);
        if (s)
            return s;
    }
    if (ml__mul64(n_merges, ML_MLT_MERGE_SIZE, &m) || ml__add64(total, m, &total) ||
        ml__add64(total, c, &total) || ml__to_size(total, out))
        return ml__err(err, ML_E_NOMEM, "", -1, "tokenizer size does not fit in memory");
    return ML_OK;
}

ml_status ml_mlt_write_chat(const ml_mlt_header *h, const ml_mlt_token *tokens, uint32_t n_vocab,
                            const uint32_t *merges, uint32_t n_merges, const ml_mlt_chat *chat,
                            ml_write_fn fn, void *ctx, ml_error *err)
{
    if (!h || (!tokens && n_vocab) || (!merges && n_merges) || !fn)
        return ml__err(err, ML_E_INVAL, "", -1, "NULL argument");
    for (uint32_t i = 0; i < n_vocab; i++)
        if (!tokens[i].bytes && tokens[i].len)
            return ml__err(err, ML_E_INVAL, "", -1, "token %u: NULL bytes", i);
    size_t size = 0;
    ml_status s = serialized_size(tokens, n_vocab, n_merges, chat, h->eos, &size, err);
    if (s)
        return s;
    uint8_t *buf = malloc(size);
    if (!buf)
        return ml__err(err, ML_E_NOMEM, "", -1, "cannot allocate %zu bytes", size);
    ml_mlt_header hh = *h;
    memcpy(hh.magic, "MLT1", 4);
    hh.version = ML_MLT_VERSION;
    hh.n_vocab = n_vocab;
    hh.n_merges = n_merges;
    hh.flags = chat ? hh.flags | ML_MLT_CHAT : hh.flags & ~(uint32_t)ML_MLT_CHAT;
    hh.flags &= ~(uint32_t)ML_MLT_USER_TOKENS;
    for (uint32_t i = 0; i < n_vocab; i++)
        if (tokens[i].attr == ML_MLT_USER)
            hh.flags |= ML_MLT_USER_TOKENS;
    ml_mlt_header_encode(&hh, buf);
    size_t pos = ML_MLT_HEADER_SIZE;
    for (uint32_t i = 0; i < n_vocab; i++) {
        buf[pos] = tokens[i].attr;
        ml__wr32(buf + pos + 1, tokens[i].len);
        if (tokens[i].len)
            memcpy(buf + pos + ML_MLT_TOKEN_OVERHEAD, tokens[i].bytes, tokens[i].len);
        pos += ML_MLT_TOKEN_OVERHEAD + tokens[i].len;
    }
    for (size_t r = 0; r < (size_t)n_merges * 3; r++, pos += 4)
        ml__wr32(buf + pos, merges[r]);
    if (chat) {
        size_t n;
        if ((s = ml__mlt_chat_write(chat, h->eos, buf + pos, &n, err))) {
            free(buf);
            return s;
        }
        size = pos + n;
    }
    ml_mlt *t;
    s = ml_mlt_open_memory(buf, size, &t, err);
    if (!s) {
        ml_mlt_close(t);
        s = fn(ctx, buf, size, err);
    }
    free(buf);
    return s;
}

ml_status ml_mlt_write(const ml_mlt_header *h, const ml_mlt_token *tokens, uint32_t n_vocab,
                       const uint32_t *merges, uint32_t n_merges, ml_write_fn fn, void *ctx,
                       ml_error *err)
{
    return ml_mlt_write_chat(h, tokens, n_vocab, merges, n_merges, NULL, fn, ctx, err);
}
