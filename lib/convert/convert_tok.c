/* convert_tok.c - a GGUF vocabulary (tokenizer.ggml.*) as an .mlt
 * tokenizer: token texts and attributes, the flags the tokenizer model,
 * pre-tokenizer and architecture imply, BOS and EOS, and the merge rules,
 * read from tokenizer.ggml.merges for byte-level BPE and derived from the
 * pieces and their scores for SentencePiece.  The rules are listed in
 * mlcore/convert_tok.h; docs/tokenizer-conversion.md says why. */
#include "convert/convert_impl.h"
#include "tokenizer/tok.h"

#include <mlcore/convert_tok.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define K_MODEL "tokenizer.ggml.model"
#define K_PRE "tokenizer.ggml.pre"
#define K_TOKENS "tokenizer.ggml.tokens"
#define K_TYPES "tokenizer.ggml.token_type"
#define K_SCORES "tokenizer.ggml.scores"
#define K_MERGES "tokenizer.ggml.merges"
#define K_BOS "tokenizer.ggml.bos_token_id"
#define K_EOS "tokenizer.ggml.eos_token_id"
#define K_ADD_BOS "tokenizer.ggml.add_bos_token"
#define K_SPACE "tokenizer.ggml.add_space_prefix"
#define K_ARCH "general.architecture"

/* GGUF token types (llama.cpp's llama_token_type); the numbers are the file's. */
enum { TT_UNDEFINED, TT_NORMAL, TT_UNKNOWN, TT_CONTROL, TT_USER_DEFINED, TT_UNUSED, TT_BYTE,
       TT_COUNT };

/* Pieces are shown in messages up to this many bytes. */
#define SHOW 40

typedef struct text {
    const uint8_t *p;
    uint32_t n;
} text;

typedef struct conv {
    const ml_gguf *g;
    ml_error *err;
    ml_mlt_header h;
    char arch[32];          /* general.architecture, cut to fit ("" if absent) */
    uint32_t n;             /* tokens */
    text *src;              /* token texts as the GGUF stores them */
    uint64_t *src_off;      /* their file offsets, for messages */
    uint8_t *type;          /* GGUF token types */
    ml_mlt_token *tok;      /* the .mlt tokens */
    uint8_t *arena;         /* bytes of the tokens whose text changed */
    size_t arena_used;
    const text *key;        /* what the lookup is keyed by: src (kind 2) or tok (kind 1) */
    text *tok_text;         /* kind 1: the .mlt tokens as texts */
    uint32_t *slot;         /* open-addressing hash: id + 1, 0 when empty */
    size_t mask;
    uint32_t *merges;       /* 3 per rule: left, right, merged */
    uint32_t n_merges;
    ml_mlt_convert_info info;
} conv;

/* Every byte value, for the byte tokens to point at. */
static const uint8_t all_bytes[256] = {
#define R16(b) b, b + 1, b + 2, b + 3, b + 4, b + 5, b + 6, b + 7, b + 8, b + 9, b + 10, b + 11, \
               b + 12, b + 13, b + 14, b + 15
    R16(0), R16(16), R16(32), R16(48), R16(64), R16(80), R16(96), R16(112),
    R16(128), R16(144), R16(160), R16(176), R16(192), R16(208), R16(224), R16(240)
#undef R16
};

static int eq(const char *s, size_t n, const char *lit)
{
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

/* A bounded copy of a file string, for info and messages. */
static void copy_str(char *dst, size_t cap, const char *s, size_t n)
{
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, s, n);
    dst[n] = 0;
}

static void *alloc_n(conv *c, uint64_t count, size_t size, const char *what)
{
    uint64_t bytes;
    size_t sz;
    if (ml__mul64(count, size, &bytes) || ml__to_size(bytes, &sz)) {
        ml__err(c->err, ML_E_NOMEM, what, -1, "%llu elements do not fit in memory here",
                (unsigned long long)count);
        return NULL;
    }
    void *p = calloc(sz ? sz : 1, 1);
    if (!p)
        ml__err(c->err, ML_E_NOMEM, what, -1, "cannot allocate %zu bytes", sz);
    return p;
}

/* ---------------------------------------------------------------------------
 * Text to id lookup (first id wins when two tokens have the same text)
 * ------------------------------------------------------------------------- */

static uint64_t hash(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static ml_status lookup_init(conv *c, const text *key)
{
    size_t cap = 16;
    while (cap < (size_t)c->n * 2) /* n <= 2^24: no overflow */
        cap *= 2;
    c->slot = alloc_n(c, cap, sizeof *c->slot, "lookup");
    if (!c->slot)
        return ML_E_NOMEM;
    c->mask = cap - 1;
    c->key = key;
    return ML_OK;
}

static ml_token lookup(const conv *c, const uint8_t *p, size_t n)
{
    for (size_t i = (size_t)hash(p, n) & c->mask;; i = (i + 1) & c->mask) {
        uint32_t v = c->slot[i];
        if (!v)
            return ML_TOKEN_NONE;
        const text *k = &c->key[v - 1];
        if (k->n == n && memcmp(k->p, p, n) == 0)
            return v - 1;
    }
}

static void lookup_add(conv *c, uint32_t id)
{
    const text *k = &c->key[id];
    size_t i = (size_t)hash(k->p, k->n) & c->mask;
    for (; c->slot[i]; i = (i + 1) & c->mask) {
        const text *o = &c->key[c->slot[i] - 1];
        if (o->n == k->n && memcmp(o->p, k->p, k->n) == 0)
            return;
    }
    c->slot[i] = id + 1;
}

/* ---------------------------------------------------------------------------
 * Kind and flags: tokenizer model, pre-tokenizer, architecture
 * ------------------------------------------------------------------------- */

/* Byte-level pre-tokenizers .mlt expresses (gguf-mapping.md 3.4), with
 * llama.cpp's add_bos default for each. */
static const struct pre_rule {
    const char *name;
    uint32_t flags;
    int add_bos;
} pre_rules[] = {
    {"llama-bpe", ML_MLT_IGNORE_MERGES, 1},
    {"llama3", ML_MLT_IGNORE_MERGES, 1},
    {"llama-v3", ML_MLT_IGNORE_MERGES, 1},
    /* Llama 3's tokenizer without the BOS template hashes as Smaug's. */
    {"smaug-bpe", ML_MLT_IGNORE_MERGES, 0},
    {"qwen2", ML_MLT_NFC | ML_MLT_SINGLE_DIGITS, 0},
    /* Qwen3.5's tokenizer has no NFC normalizer: Hugging Face's ids for
     * llama.cpp's qwen35 vectors keep "e" + U+0301 apart. */
    {"qwen35", ML_MLT_SINGLE_DIGITS | ML_MLT_MARKS_REGEX, 0},
    {"smollm", ML_MLT_GPT2_REGEX | ML_MLT_SPLIT_DIGITS, 0},
    {"gpt-2", ML_MLT_GPT2_REGEX, 0},
    /* o200k (gpt-oss); llama.cpp's default adds no BOS for it. */
    {"gpt-4o", ML_MLT_O200K_REGEX, 0},
};

static ml_status read_arch(conv *c)
{
    const char *s = "";
    size_t n = 0;
    int found;
    ml_status st = ml_gguf_get_str(c->g, K_ARCH, &s, &n, &found, c->err);
    if (!st)
        copy_str(c->arch, sizeof c->arch, s, n);
    return st;
}

static int arch_is(const conv *c, const char *name)
{
    return strcmp(c->arch, name) == 0;
}

/* Reads a bool key; *v keeps its default when the key is absent.  *off
 * receives the value's offset (-1 when absent). */
static ml_status get_bool(conv *c, const char *key, int *v, int64_t *off)
{
    const ml_gguf_kv *kv = ml_gguf_find(c->g, key);
    *off = -1;
    if (!kv)
        return ML_OK;
    *off = (int64_t)kv->value.offset;
    return ml_gguf_value_bool(&kv->value, v, c->err);
}

static ml_status byte_level_flags(conv *c, int *add_bos)
{
    const char *pre;
    size_t n;
    const ml_gguf_kv *kv = ml_gguf_find(c->g, K_PRE);
    /* Without the key llama.cpp guesses a "default" regex of its own (and
     * warns that quality will suffer): no .mlt flag expresses it. */
    if (!kv)
        return ml__err(c->err, ML_E_UNSUPPORTED, K_PRE, -1,
                       "the key is missing: llama.cpp's fallback pre-tokenizer \"default\" "
                       "has no .mlt equivalent");
    ml_status s = ml_gguf_get_str(c->g, K_PRE, &pre, &n, NULL, c->err);
    if (s)
        return s;
    copy_str(c->info.pre, sizeof c->info.pre, pre, n);
    /* A Qwen3.5 file whose pre-tokenizer is called qwen2 is still Qwen3.5's. */
    const char *name = pre;
    size_t name_n = n;
    if (eq(pre, n, "qwen2") && (arch_is(c, "qwen35") || arch_is(c, "qwen35moe"))) {
        name = "qwen35";
        name_n = 6;
    }
    for (size_t i = 0; i < sizeof pre_rules / sizeof pre_rules[0]; i++) {
        if (eq(name, name_n, pre_rules[i].name)) {
            c->h.flags |= pre_rules[i].flags;
            *add_bos = pre_rules[i].add_bos;
            return ML_OK;
        }
    }
    return ml__err(c->err, ML_E_UNSUPPORTED, K_PRE, (int64_t)kv->value.offset,
                   "pre-tokenizer \"%.*s\" has no .mlt equivalent (supported: llama-bpe, "
                   "llama3, llama-v3, smaug-bpe, qwen2, qwen35, smollm, gpt-2, gpt-4o)",
                   (int)(n < SHOW ? n : SHOW), pre);
}

static ml_status spm_flags(conv *c)
{
    const char *pre = "";
    size_t n = 0;
    int found, prefix = 1;
    int64_t off;
    ml_status s = ml_gguf_get_str(c->g, K_PRE, &pre, &n, &found, c->err);
    if (s)
        return s;
    copy_str(c->info.pre, sizeof c->info.pre, pre, n);
    /* Gemma's SentencePiece never prepends ▁; its GGUFs say so, but a file
     * without the key is still Gemma's. */
    if (strncmp(c->arch, "gemma", 5) == 0)
        prefix = 0;
    if ((s = get_bool(c, K_SPACE, &prefix, &off)))
        return s;
    if (!prefix)
        c->h.flags |= ML_MLT_NO_PREFIX;
    return ML_OK;
}

static ml_status read_kind(conv *c, int *add_bos)
{
    const char *m;
    size_t n;
    ml_status s = read_arch(c);
    if (!s)
        s = ml_gguf_get_str(c->g, K_MODEL, &m, &n, NULL, c->err);
    if (s)
        return s;
    copy_str(c->info.model, sizeof c->info.model, m, n);
    if (eq(m, n, "llama")) {
        c->h.kind = ML_MLT_KIND_SPM;
        *add_bos = 1;
        return spm_flags(c);
    }
    if (eq(m, n, "gpt2")) {
        c->h.kind = ML_MLT_KIND_BYTE_BPE;
        int prefix = 0;
        int64_t off;
        if ((s = get_bool(c, K_SPACE, &prefix, &off)))
            return s;
        if (prefix)
            return ml__err(c->err, ML_E_UNSUPPORTED, K_SPACE, off,
                           "a space prefix before byte-level BPE has no .mlt equivalent");
        return byte_level_flags(c, add_bos);
    }
    const ml_gguf_kv *kv = ml_gguf_find(c->g, K_MODEL);
    return ml__err(c->err, ML_E_UNSUPPORTED, K_MODEL, (int64_t)kv->value.offset,
                   "tokenizer model \"%.*s\" has no .mlt equivalent (llama and gpt2 have)",
                   (int)(n < SHOW ? n : SHOW), m);
}

/* ---------------------------------------------------------------------------
 * Tokens
 * ------------------------------------------------------------------------- */

static ml_status read_texts(conv *c)
{
    ml_gguf_value arr, el;
    ml_status s = ml_gguf_get_array(c->g, K_TOKENS, &arr, NULL, c->err);
    if (s)
        return s;
    if (arr.elem_type != ML_GGUF_STRING)
        return ml__err(c->err, ML_E_FORMAT, K_TOKENS, (int64_t)arr.offset,
                       "an array of %s, expected strings", ml_gguf_vtype_name(arr.elem_type));
    if (arr.count == 0)
        return ml__err(c->err, ML_E_FORMAT, K_TOKENS, (int64_t)arr.offset, "no tokens");
    if (arr.count > ML_MLB_VOCAB_LIMIT)
        return ml__err(c->err, ML_E_UNSUPPORTED, K_TOKENS, (int64_t)arr.offset,
                       "%llu tokens, more than the %u an .mlt holds",
                       (unsigned long long)arr.count, (unsigned)ML_MLB_VOCAB_LIMIT);
    c->n = (uint32_t)arr.count;
    if (!(c->src = alloc_n(c, c->n, sizeof *c->src, K_TOKENS)) ||
        !(c->src_off = alloc_n(c, c->n, sizeof *c->src_off, K_TOKENS)) ||
        !(c->type = alloc_n(c, c->n, 1, K_TYPES)) ||
        !(c->tok = alloc_n(c, c->n, sizeof *c->tok, K_TOKENS)))
        return ML_E_NOMEM;
    for (uint32_t i = 0; i < c->n; i++) {
        const char *p;
        size_t len;
        if ((s = ml_gguf_array_get(&arr, i, &el, c->err)) ||
            (s = ml_gguf_value_str(&el, &p, &len, c->err)))
            return s;
        if (len == 0 || len > UINT32_MAX)
            return ml__err(c->err, ML_E_FORMAT, K_TOKENS, (int64_t)el.offset,
                           "element %u: %s token (an .mlt piece has 1 to 2^32-1 bytes)", i,
                           len ? "an oversized" : "an empty");
        c->src[i].p = (const uint8_t *)p;
        c->src[i].n = (uint32_t)len;
        c->src_off[i] = el.offset;
    }
    return ML_OK;
}

/* tokenizer.ggml.token_type: absent means every token is NORMAL, as in
 * llama.cpp. */
static ml_status read_types(conv *c)
{
    ml_gguf_value arr, el;
    int found;
    ml_status s = ml_gguf_get_array(c->g, K_TYPES, &arr, &found, c->err);
    if (s)
        return s;
    if (!found) {
        memset(c->type, TT_NORMAL, c->n);
        return ML_OK;
    }
    if (arr.count != c->n)
        return ml__err(c->err, ML_E_FORMAT, K_TYPES, (int64_t)arr.offset,
                       "%llu types for %u tokens", (unsigned long long)arr.count, c->n);
    for (uint32_t i = 0; i < c->n; i++) {
        int32_t t;
        if ((s = ml_gguf_array_get(&arr, i, &el, c->err)) ||
            (s = ml_gguf_value_i32(&el, &t, c->err)))
            return s;
        if (t < 0 || t >= TT_COUNT)
            return ml__err(c->err, ML_E_FORMAT, K_TYPES, (int64_t)el.offset,
                           "element %u: token type %d is not 0..6", i, (int)t);
        c->type[i] = (uint8_t)t;
    }
    return ML_OK;
}

/* The byte GPT-2's reversible map draws as code point cp, or -1.  Bytes
 * 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF stand for themselves; the other 68
 * (0x00-0x20, 0x7F-0xA0, 0xAD), in increasing order, are U+0100..U+0143. */
static int gpt2_byte(uint32_t cp)
{
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp < 0x100 || cp > 0x143)
        return -1;
    uint32_t k = cp - 0x100;
    if (k <= 0x20)
        return (int)k;
    if (k < 33 + 34)
        return (int)(0x7F + (k - 33));
    return 0xAD;
}

static ml_status gpt2_decode(conv *c, uint32_t i)
{
    const text *t = &c->src[i];
    uint8_t *out = c->arena + c->arena_used;
    uint32_t n = 0;
    for (uint32_t k = 0; k < t->n;) {
        int len = ml__utf8_seq(t->p + k, t->n - k);
        if (len <= 0)
            return ml__err(c->err, ML_E_FORMAT, K_TOKENS, (int64_t)c->src_off[i],
                           "element %u: byte %u is not valid UTF-8", i, k);
        uint32_t cp = ml__utf8_decode(t->p + k, len);
        int b = gpt2_byte(cp);
        if (b < 0)
            return ml__err(c->err, ML_E_FORMAT, K_TOKENS, (int64_t)c->src_off[i],
                           "element %u: U+%04X (byte %u) is not a character of GPT-2's byte "
                           "map", i, (unsigned)cp, k);
        out[n++] = (uint8_t)b;
        k += (uint32_t)len;
    }
    c->tok[i].bytes = out;
    c->tok[i].len = n;
    c->arena_used += n;
    return ML_OK;
}

/* llama.cpp's converter turned the ▁ of user-defined SentencePiece tokens
 * into spaces ("pre-normalized"); the tokenizer.json matched them with ▁. */
static void respace(conv *c, uint32_t i)
{
    const text *t = &c->src[i];
    uint8_t *out = c->arena + c->arena_used;
    uint32_t n = 0;
    for (uint32_t k = 0; k < t->n; k++) {
        if (t->p[k] == ' ') {
            memcpy(out + n, "\xe2\x96\x81", 3);
            n += 3;
        } else {
            out[n++] = t->p[k];
        }
    }
    c->tok[i].bytes = out;
    c->tok[i].len = n;
    c->arena_used += n;
    c->info.n_respaced += n != t->n;
}

static int hexval(uint8_t ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

static ml_status byte_token(conv *c, uint32_t i)
{
    const text *t = &c->src[i];
    if (c->h.kind != ML_MLT_KIND_SPM)
        return ml__err(c->err, ML_E_FORMAT, K_TOKENS, (int64_t)c->src_off[i],
                       "element %u: a BYTE token in a byte-level (gpt2) vocabulary", i);
    int hi = t->n == 6 ? hexval(t->p[3]) : -1, lo = t->n == 6 ? hexval(t->p[4]) : -1;
    if (t->n != 6 || memcmp(t->p, "<0x", 3) != 0 || t->p[5] != '>' || hi < 0 || lo < 0)
        return ml__err(c->err, ML_E_FORMAT, K_TOKENS, (int64_t)c->src_off[i],
                       "element %u: BYTE token \"%.*s\" is not <0xXX>", i,
                       (int)(t->n < SHOW ? t->n : SHOW), (const char *)t->p);
    c->tok[i].bytes = &all_bytes[hi * 16 + lo];
    c->tok[i].len = 1;
    c->tok[i].attr = ML_MLT_BYTE;
    c->info.n_bytes++;
    return ML_OK;
}

static int decoded_kind2(const conv *c, uint32_t i)
{
    return c->h.kind == ML_MLT_KIND_BYTE_BPE &&
           (c->type[i] == TT_NORMAL || c->type[i] == TT_UNDEFINED);
}

static int respaced_kind1(const conv *c, uint32_t i)
{
    return c->h.kind == ML_MLT_KIND_SPM && c->type[i] == TT_USER_DEFINED;
}

/* The arena holds every token whose bytes differ from the GGUF text. */
static ml_status arena_alloc(conv *c)
{
    uint64_t need = 0;
    for (uint32_t i = 0; i < c->n; i++) {
        uint64_t k = 0;
        if (decoded_kind2(c, i)) {
            k = c->src[i].n;
        } else if (respaced_kind1(c, i)) {
            k = c->src[i].n;
            for (uint32_t j = 0; j < c->src[i].n; j++)
                k += c->src[i].p[j] == ' ' ? 2 : 0;
        }
        if (ml__add64(need, k, &need))
            return ml__err(c->err, ML_E_NOMEM, K_TOKENS, -1, "token bytes overflow");
    }
    c->arena = alloc_n(c, need, 1, K_TOKENS);
    return c->arena ? ML_OK : ML_E_NOMEM;
}

static ml_status convert_tokens(conv *c)
{
    ml_status s = arena_alloc(c);
    for (uint32_t i = 0; !s && i < c->n; i++) {
        ml_mlt_token *t = &c->tok[i];
        t->bytes = c->src[i].p;
        t->len = c->src[i].n;
        t->attr = ML_MLT_NORMAL;
        switch (c->type[i]) {
        case TT_BYTE:
            s = byte_token(c, i);
            break;
        case TT_CONTROL:
        case TT_UNKNOWN:
        case TT_USER_DEFINED:
            /* llama.cpp matches USER_DEFINED tokens even in text parsed
             * without specials; CONTROL and UNKNOWN are text there. */
            t->attr = c->type[i] == TT_USER_DEFINED ? ML_MLT_USER : ML_MLT_ADDED;
            if (t->attr == ML_MLT_USER)
                c->h.flags |= ML_MLT_USER_TOKENS;
            c->info.n_added++;
            if (respaced_kind1(c, i))
                respace(c, i);
            break;
        default: /* NORMAL, UNDEFINED, UNUSED */
            if (decoded_kind2(c, i))
                s = gpt2_decode(c, i);
            break;
        }
    }
    return s;
}

/* ---------------------------------------------------------------------------
 * BOS and EOS
 * ------------------------------------------------------------------------- */

/* A token id key: absent, -1 or 0xFFFFFFFF (llama.cpp's "none") give
 * ML_TOKEN_NONE. */
static ml_status read_id(conv *c, const char *key, ml_token *id)
{
    const ml_gguf_kv *kv = ml_gguf_find(c->g, key);
    *id = ML_TOKEN_NONE;
    if (!kv)
        return ML_OK;
    int64_t v;
    ml_status s = ml_gguf_value_i64(&kv->value, &v, c->err);
    if (s || v == -1 || v == (int64_t)UINT32_MAX)
        return s;
    if (v < 0 || v >= (int64_t)c->n)
        return ml__err(c->err, ML_E_FORMAT, key, (int64_t)kv->value.offset,
                       "token id %lld is not below the %u tokens", (long long)v, c->n);
    *id = (ml_token)v;
    return ML_OK;
}

static ml_status read_specials(conv *c, int add_bos)
{
    int64_t off;
    ml_status s = read_id(c, K_BOS, &c->h.bos);
    if (!s)
        s = read_id(c, K_EOS, &c->h.eos);
    if (!s)
        s = get_bool(c, K_ADD_BOS, &add_bos, &off);
    if (s)
        return s;
    if (add_bos && off >= 0 && c->h.bos == ML_TOKEN_NONE)
        return ml__err(c->err, ML_E_FORMAT, K_ADD_BOS, off,
                       "is true but the file has no " K_BOS);
    if (add_bos && c->h.bos != ML_TOKEN_NONE)
        c->h.flags |= ML_MLT_ADD_BOS;
    return ML_OK;
}

/* ---------------------------------------------------------------------------
 * Merges of a byte-level vocabulary: "LEFT RIGHT" strings, rank = index
 * ------------------------------------------------------------------------- */

static ml_status merge_ids(conv *c, const ml_gguf_value *el, uint32_t r, uint8_t *scratch,
                           uint32_t *ids)
{
    const uint8_t *p = el->data;
    size_t n = (size_t)el->nbytes;
    /* llama.cpp splits at the first space after the first byte. */
    const uint8_t *sp = n > 1 ? memchr(p + 1, ' ', n - 1) : NULL;
    if (!sp)
        return ml__err(c->err, ML_E_FORMAT, K_MERGES, (int64_t)el->offset,
                       "element %u: \"%.*s\" is not two pieces separated by a space", r,
                       (int)(n < SHOW ? n : SHOW), (const char *)p);
    size_t ln = (size_t)(sp - p), rn = n - ln - 1;
    memcpy(scratch, p, ln);
    memcpy(scratch + ln, sp + 1, rn);
    const uint8_t *part[3] = {p, sp + 1, scratch};
    size_t len[3] = {ln, rn, ln + rn};
    static const char *const which[3] = {"left", "right", "merged"};
    for (int k = 0; k < 3; k++) {
        ids[k] = lookup(c, part[k], len[k]);
        if (ids[k] == ML_TOKEN_NONE)
            return ml__err(c->err, ML_E_FORMAT, K_MERGES, (int64_t)el->offset,
                           "element %u: the %s piece \"%.*s\" is not a token", r, which[k],
                           (int)(len[k] < SHOW ? len[k] : SHOW), (const char *)part[k]);
    }
    const ml_mlt_token *t = c->tok;
    if ((uint64_t)t[ids[0]].len + t[ids[1]].len != t[ids[2]].len ||
        memcmp(t[ids[2]].bytes, t[ids[0]].bytes, t[ids[0]].len) != 0 ||
        memcmp(t[ids[2]].bytes + t[ids[0]].len, t[ids[1]].bytes, t[ids[1]].len) != 0)
        return ml__err(c->err, ML_E_FORMAT, K_MERGES, (int64_t)el->offset,
                       "element %u: token %u is not token %u followed by token %u (one of "
                       "them is stored without GPT-2's byte map)", r, ids[2], ids[0], ids[1]);
    return ML_OK;
}

static ml_status merges_from_strings(conv *c)
{
    ml_gguf_value arr, el;
    ml_status s = ml_gguf_get_array(c->g, K_MERGES, &arr, NULL, c->err);
    if (s)
        return s;
    if (arr.elem_type != ML_GGUF_STRING)
        return ml__err(c->err, ML_E_FORMAT, K_MERGES, (int64_t)arr.offset,
                       "an array of %s, expected strings", ml_gguf_vtype_name(arr.elem_type));
    if (arr.count > UINT32_MAX)
        return ml__err(c->err, ML_E_UNSUPPORTED, K_MERGES, (int64_t)arr.offset,
                       "%llu merges, more than an .mlt holds", (unsigned long long)arr.count);
    if ((s = lookup_init(c, c->src)))
        return s;
    for (uint32_t i = 0; i < c->n; i++)
        lookup_add(c, i);
    c->n_merges = (uint32_t)arr.count;
    c->merges = alloc_n(c, (uint64_t)c->n_merges * 3, sizeof *c->merges, K_MERGES);
    if (!c->merges)
        return ML_E_NOMEM;
    uint8_t *scratch = NULL;
    size_t cap = 0;
    for (uint32_t r = 0; !s && r < c->n_merges; r++) {
        const char *p;
        size_t n;
        if ((s = ml_gguf_array_get(&arr, r, &el, c->err)) ||
            (s = ml_gguf_value_str(&el, &p, &n, c->err)))
            break;
        if (n > cap) { /* n is bounded by the file size */
            free(scratch);
            cap = n;
            if (!(scratch = malloc(cap))) {
                s = ml__err(c->err, ML_E_NOMEM, K_MERGES, -1, "cannot allocate %zu bytes", cap);
                break;
            }
        }
        s = merge_ids(c, &el, r, scratch, c->merges + 3 * (size_t)r);
    }
    free(scratch);
    return s;
}

/* ---------------------------------------------------------------------------
 * Merges of a SentencePiece vocabulary, derived from pieces and scores
 * ------------------------------------------------------------------------- */

/* One candidate merge: piece p split into l and r. */
typedef struct rec {
    double score;       /* p's score; 0 for USER_DEFINED pieces */
    uint32_t p, l, r;
    uint32_t lcp, rcp;  /* characters of l and r */
    uint8_t ud;         /* p is USER_DEFINED */
} rec;

typedef struct recs {
    rec *v;
    size_t n, cap;
} recs;

/* transformers ranks by (score, len l, len r), highest first, keeping
 * equal keys in vocabulary order: p, then l, then r. */
static int rec_cmp(const void *a, const void *b)
{
    const rec *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    if (x->lcp != y->lcp)
        return x->lcp > y->lcp ? -1 : 1;
    if (x->rcp != y->rcp)
        return x->rcp > y->rcp ? -1 : 1;
    if (x->p != y->p)
        return x->p < y->p ? -1 : 1;
    if (x->l != y->l)
        return x->l < y->l ? -1 : 1;
    return (x->r > y->r) - (x->r < y->r);
}

static int spm_candidate(const conv *c, uint32_t i)
{
    uint8_t t = c->type[i];
    return t == TT_NORMAL || t == TT_UNDEFINED || t == TT_USER_DEFINED;
}

static ml_status read_scores(conv *c, double *score)
{
    ml_gguf_value arr, el;
    ml_status s = ml_gguf_get_array(c->g, K_SCORES, &arr, NULL, c->err);
    if (s)
        return s;
    uint32_t et = arr.elem_type;
    int is_float = et == ML_GGUF_F32 || et == ML_GGUF_F64;
    if (et == ML_GGUF_BOOL || et == ML_GGUF_STRING || et == ML_GGUF_ARRAY)
        return ml__err(c->err, ML_E_FORMAT, K_SCORES, (int64_t)arr.offset,
                       "an array of %s, expected numbers", ml_gguf_vtype_name(et));
    if (arr.count != c->n)
        return ml__err(c->err, ML_E_FORMAT, K_SCORES, (int64_t)arr.offset,
                       "%llu scores for %u tokens", (unsigned long long)arr.count, c->n);
    for (uint32_t i = 0; i < c->n; i++) {
        int64_t iv = 0;
        if ((s = ml_gguf_array_get(&arr, i, &el, c->err)))
            return s;
        s = is_float ? ml_gguf_value_f64(&el, &score[i], c->err)
                     : ml_gguf_value_i64(&el, &iv, c->err);
        if (s)
            return s;
        if (!is_float)
            score[i] = (double)iv;
        if (isnan(score[i]))
            return ml__err(c->err, ML_E_FORMAT, K_SCORES, (int64_t)el.offset,
                           "element %u: NaN", i);
    }
    return ML_OK;
}

static ml_status recs_push(conv *c, recs *rs, const rec *x)
{
    rec *v = ml_array_reserve(rs->v, &rs->cap, rs->n + 1, sizeof *v);
    if (!v)
        return ml__err(c->err, ML_E_NOMEM, K_SCORES, -1, "too many merges for memory");
    rs->v = v;
    rs->v[rs->n++] = *x;
    return ML_OK;
}

/* Every split of piece p, at character boundaries, into two pieces. */
static ml_status splits_of(conv *c, uint32_t p, const double *score, recs *rs)
{
    const ml_mlt_token *t = &c->tok[p];
    uint32_t ncp = 0;
    for (uint32_t k = 0; k < t->len; ncp++) {
        int len = ml__utf8_seq(t->bytes + k, t->len - k);
        if (len <= 0)
            return ml__err(c->err, ML_E_FORMAT, K_TOKENS, (int64_t)c->src_off[p],
                           "element %u: byte %u is not valid UTF-8", p, k);
        k += (uint32_t)len;
    }
    /* SentencePiece scores user-defined pieces 0; llama.cpp's converter
     * writes -1000 for every added token, which would rank them among the
     * ordinary pieces. */
    int ud = c->type[p] == TT_USER_DEFINED;
    rec x = {ud ? 0.0 : score[p], p, 0, 0, 0, 0, (uint8_t)ud};
    uint32_t k = (uint32_t)ml__utf8_seq(t->bytes, t->len);
    for (uint32_t j = 1; j < ncp; j++) {
        x.l = lookup(c, t->bytes, k);
        x.r = lookup(c, t->bytes + k, t->len - k);
        x.lcp = j;
        x.rcp = ncp - j;
        if (x.l != ML_TOKEN_NONE && x.r != ML_TOKEN_NONE) {
            ml_status s = recs_push(c, rs, &x);
            if (s)
                return s;
        }
        k += (uint32_t)ml__utf8_seq(t->bytes + k, t->len - k);
    }
    return ML_OK;
}

/* GGUFs made from a tokenizer.json without tokenizer.model give every
 * piece the same score; no merge order can be recovered from them. */
static ml_status check_order_known(conv *c, const recs *rs)
{
    const rec *first = NULL;
    int distinct_p = 0;
    for (size_t i = 0; i < rs->n; i++) {
        const rec *x = &rs->v[i];
        if (x->ud)
            continue;
        if (!first) {
            first = x;
        } else if (x->score != first->score) {
            return ML_OK;
        } else if (x->p != first->p) {
            distinct_p = 1;
        }
    }
    if (!distinct_p)
        return ML_OK;
    const ml_gguf_kv *kv = ml_gguf_find(c->g, K_SCORES);
    return ml__err(c->err, ML_E_UNSUPPORTED, K_SCORES, (int64_t)kv->value.offset,
                   "every piece that merges has score %g, so the merge order is unknown "
                   "(convert from the original tokenizer instead)", first->score);
}

static ml_status merges_from_scores(conv *c)
{
    recs rs = {NULL, 0, 0};
    double *score = alloc_n(c, c->n, sizeof *score, K_SCORES);
    c->tok_text = alloc_n(c, c->n, sizeof *c->tok_text, K_TOKENS);
    ml_status s = score && c->tok_text ? read_scores(c, score) : ML_E_NOMEM;
    if (!s)
        s = lookup_init(c, c->tok_text);
    for (uint32_t i = 0; !s && i < c->n; i++) {
        c->tok_text[i].p = c->tok[i].bytes;
        c->tok_text[i].n = c->tok[i].len;
        if (spm_candidate(c, i))
            lookup_add(c, i);
    }
    for (uint32_t p = 0; !s && p < c->n; p++)
        if (spm_candidate(c, p) && lookup(c, c->tok[p].bytes, c->tok[p].len) == p)
            s = splits_of(c, p, score, &rs);
    if (!s)
        s = check_order_known(c, &rs);
    if (!s && rs.n > UINT32_MAX)
        s = ml__err(c->err, ML_E_UNSUPPORTED, K_SCORES, -1, "%zu merges, more than an .mlt "
                    "holds", rs.n);
    if (!s) {
        qsort(rs.v, rs.n, sizeof *rs.v, rec_cmp);
        c->n_merges = (uint32_t)rs.n;
        c->merges = alloc_n(c, (uint64_t)rs.n * 3, sizeof *c->merges, K_SCORES);
        s = c->merges ? ML_OK : ML_E_NOMEM;
    }
    for (size_t i = 0; !s && i < rs.n; i++) {
        c->merges[3 * i] = rs.v[i].l;
        c->merges[3 * i + 1] = rs.v[i].r;
        c->merges[3 * i + 2] = rs.v[i].p;
    }
    free(rs.v);
    free(score);
    return s;
}

/* ---------------------------------------------------------------------------
 * The conversion
 * ------------------------------------------------------------------------- */

static ml_status discard(void *ctx, const void *buf, size_t n, ml_error *err)
{
    (void)ctx;
    (void)buf;
    (void)n;
    (void)err;
    return ML_OK;
}

static ml_status convert(conv *c, ml_write_fn fn, void *ctx)
{
    int add_bos = 0;
    c->h.bos = c->h.eos = ML_TOKEN_NONE;
    ml_status s = read_kind(c, &add_bos);
    if (!s)
        s = read_texts(c);
    if (!s)
        s = read_types(c);
    if (!s)
        s = convert_tokens(c);
    if (!s)
        s = read_specials(c, add_bos);
    if (!s)
        s = c->h.kind == ML_MLT_KIND_SPM ? merges_from_scores(c) : merges_from_strings(c);
    ml__conv_chat *chat = s ? NULL : malloc(sizeof *chat);
    if (!s && !chat)
        s = ml__err(c->err, ML_E_NOMEM, "", -1, "out of memory");
    if (!s)
        s = ml__conv_chat_read(c->g, c->h.eos, chat, c->err);
    if (!s)
        s = ml_mlt_write_chat(&c->h, c->tok, c->n, c->merges, c->n_merges,
                              chat->needed ? &chat->chat : NULL, fn ? fn : discard, ctx, c->err);
    if (!s && chat->needed) {
        c->info.n_eog = chat->n_eog;
        c->info.n_templates = chat->n_templates;
        c->h.flags |= ML_MLT_CHAT;
    }
    free(chat);
    return s;
}

ml_status ml_mlt_from_gguf_ex(const ml_gguf *g, ml_write_fn fn, void *ctx,
                              ml_mlt_convert_info *info, ml_error *err)
{
    if (!g)
        return ml__err(err, ML_E_INVAL, "", -1, "NULL GGUF");
    conv c;
    memset(&c, 0, sizeof c);
    c.g = g;
    c.err = err;
    ml_status s = convert(&c, fn, ctx);
    if (!s && info) {
        c.info.header = c.h;
        memcpy(c.info.header.magic, "MLT1", 4);
        c.info.header.version = ML_MLT_VERSION;
        c.info.header.n_vocab = c.n;
        c.info.header.n_merges = c.n_merges;
        *info = c.info;
    }
    free(c.src);
    free(c.src_off);
    free(c.type);
    free(c.tok);
    free(c.arena);
    free(c.tok_text);
    free(c.slot);
    free(c.merges);
    return s;
}

ml_status ml_mlt_from_gguf(const ml_gguf *g, ml_write_fn fn, void *ctx, ml_error *err)
{
    if (!fn)
        return ml__err(err, ML_E_INVAL, "", -1, "NULL sink");
    return ml_mlt_from_gguf_ex(g, fn, ctx, NULL, err);
}
