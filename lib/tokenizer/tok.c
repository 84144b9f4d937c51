/* tok.c - encoding text to token ids and decoding ids to text for .mlt
 * tokenizers (mlt(5)), matching the Hugging Face tokenizers library:
 *
 *   1. Invalid UTF-8 becomes U+FFFD; the BOS id goes first if asked for.
 *   2. Added tokens are matched literally, leftmost first and longest at a
 *      position (a trie walk), and split the text into segments.
 *   3. Kind 1 (SentencePiece-style): each segment gets ▁ in front (all of
 *      them; with flag 4 only the first, unless it starts with a space;
 *      none with flag 128) and ▁ for every space, and is one BPE word of
 *      characters, a character missing from the vocabulary falling back to
 *      its <0xXX> byte tokens (cut into shorter words where no merge can
 *      span the cut, which gives the same tokens).
 *      Kind 2 (byte-level): each segment is NFC-normalized (flag 8), split
 *      by the pre-tokenizer regex (tok_pretok.c), and every pre-token is a BPE
 *      word of bytes, or one token with flag 2 when it is a vocabulary piece.
 *   4. BPE applies the lowest-ranked merge first, the leftmost among equal
 *      ranks: a binary heap of (rank, position) over a linked list of
 *      symbols, entries checked when popped, so a word of n symbols costs
 *      O(n log n) instead of a rescan per merge.  Words are cached.
 *
 * Decoding concatenates the pieces (▁ as a space and byte tokens as their
 * byte for kind 1) and repairs UTF-8 as it goes, holding back a sequence
 * that may still be completed by the next token. */
#include "tokenizer/tok.h"

#include <mlcore/buf.h>

#include <stdlib.h>

#define NO_NODE UINT32_MAX /* edge_find: the trie has no such edge */
#define SPM_SPACE "\xe2\x96\x81" /* U+2581 ▁ */

/* ---------------------------------------------------------------------------
 * Hashing
 * ------------------------------------------------------------------------- */

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = (h ^ v) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    uint64_t v = 0;
    memcpy(&v, p, n);
    h = (h ^ v) * 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 29);
}

static uint64_t hash_u64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

/* Smallest power of two at least 2n (and 16). */
static size_t table_size(size_t n)
{
    size_t s = 16;
    while (s < 2 * n)
        s *= 2;
    return s;
}

/* ---------------------------------------------------------------------------
 * The encoder's tables
 * ------------------------------------------------------------------------- */

typedef struct merge_slot {
    uint64_t key;   /* left << 32 | right; UINT64_MAX empty */
    uint32_t rank;
    uint32_t merged;
} merge_slot;

typedef struct sym {
    uint32_t id;
    int32_t prev, next;
} sym;

typedef struct cache_slot {
    uint64_t hash;
    uint32_t key_off, key_len, ids_off, n_ids; /* key_len 0: empty */
} cache_slot;

#define CACHE_SLOTS (1u << 15)
#define CACHE_MAX_KEY 256
#define CACHE_KEY_BYTES (1u << 21)
#define CACHE_IDS (1u << 19)

struct ml_tok {
    const ml_mlt *t;
    ml_mlt_header h;
    /* pieces -> id: normal tokens first, added ones where no normal one has
     * the same bytes (they take part in kind 1 words, e.g. Gemma's "\n"). */
    uint32_t *piece;
    size_t piece_mask;
    merge_slot *merge;
    size_t merge_mask;
    uint32_t byte_piece[256]; /* kind 2: the piece of each single byte */
    uint32_t byte_tok[256];   /* attr-2 byte tokens (byte fallback) */
    int has_byte_tokens;
    /* Kind 1: a word may be cut before a ▁ that follows byte b unless some
     * merged piece holds b▁ (b the last byte of a character other than ▁):
     * then no token can span the cut, and BPE on the parts gives what BPE
     * on the whole gives, with short words the cache can hold. */
    uint8_t spm_nocut[256];
    /* Added tokens as a trie: node edges hashed on (node << 8 | byte). */
    uint8_t can_start[256];
    uint64_t *edge_key;       /* UINT64_MAX empty */
    uint32_t *edge_to;
    size_t edge_mask;
    uint32_t *term;           /* per node: token id or ML_TOKEN_NONE */
    uint32_t n_nodes;
    /* Pre-token cache. */
    cache_slot *cache;
    uint8_t *cache_keys;
    uint32_t *cache_ids;
    uint32_t cache_count, cache_key_used, cache_ids_used;
    /* Work buffers. */
    sym *syms;
    size_t syms_cap;
    uint64_t *heap;
    size_t heap_cap;
    uint8_t *norm;
    size_t norm_cap;
};

static ml_mlt_token tok_at(const ml_tok *k, uint32_t id)
{
    return ml_mlt_get_token(k->t, id);
}

static uint32_t piece_find(const ml_tok *k, const uint8_t *p, size_t n)
{
    size_t i = hash_bytes(p, n) & k->piece_mask;
    for (;; i = (i + 1) & k->piece_mask) {
        uint32_t id = k->piece[i];
        if (id == ML_TOKEN_NONE)
            return ML_TOKEN_NONE;
        ml_mlt_token t = tok_at(k, id);
        if (t.len == n && memcmp(t.bytes, p, n) == 0)
            return id;
    }
}

static void piece_insert(ml_tok *k, uint32_t id)
{
    ml_mlt_token t = tok_at(k, id);
    if (piece_find(k, t.bytes, t.len) != ML_TOKEN_NONE)
        return; /* the lowest id of a normal piece wins */
    size_t i = hash_bytes(t.bytes, t.len) & k->piece_mask;
    while (k->piece[i] != ML_TOKEN_NONE)
        i = (i + 1) & k->piece_mask;
    k->piece[i] = id;
}

static const merge_slot *merge_find(const ml_tok *k, uint32_t left, uint32_t right)
{
    uint64_t key = (uint64_t)left << 32 | right;
    size_t i = hash_u64(key) & k->merge_mask;
    for (;; i = (i + 1) & k->merge_mask) {
        if (k->merge[i].key == key)
            return &k->merge[i];
        if (k->merge[i].key == UINT64_MAX)
            return NULL;
    }
}

/* A pair listed twice keeps its last rank, as the reference's hash map does. */
static void merge_insert(ml_tok *k, uint32_t left, uint32_t right, uint32_t rank, uint32_t merged)
{
    uint64_t key = (uint64_t)left << 32 | right;
    size_t i = hash_u64(key) & k->merge_mask;
    while (k->merge[i].key != UINT64_MAX && k->merge[i].key != key)
        i = (i + 1) & k->merge_mask;
    k->merge[i] = (merge_slot){key, rank, merged};
}

static uint32_t edge_find(const ml_tok *k, uint32_t node, uint8_t b)
{
    uint64_t key = (uint64_t)node << 8 | b;
    size_t i = hash_u64(key) & k->edge_mask;
    for (;; i = (i + 1) & k->edge_mask) {
        if (k->edge_key[i] == key)
            return k->edge_to[i];
        if (k->edge_key[i] == UINT64_MAX)
            return NO_NODE;
    }
}

static uint32_t edge_add(ml_tok *k, uint32_t node, uint8_t b)
{
    uint32_t to = edge_find(k, node, b);
    if (to != NO_NODE)
        return to;
    uint64_t key = (uint64_t)node << 8 | b;
    size_t i = hash_u64(key) & k->edge_mask;
    while (k->edge_key[i] != UINT64_MAX)
        i = (i + 1) & k->edge_mask;
    k->edge_key[i] = key;
    k->edge_to[i] = k->n_nodes;
    k->term[k->n_nodes] = ML_TOKEN_NONE;
    return k->n_nodes++;
}

static void trie_add(ml_tok *k, uint32_t id)
{
    ml_mlt_token t = tok_at(k, id);
    uint32_t node = 0;
    for (uint32_t i = 0; i < t.len; i++)
        node = edge_add(k, node, t.bytes[i]);
    if (k->term[node] == ML_TOKEN_NONE) /* the same text twice: the lower id */
        k->term[node] = id;
    k->can_start[t.bytes[0]] = 1;
}

/* calloc of n elements of size s, overflow-checked. */
static void *alloc_array(size_t n, size_t s)
{
    return n && s > SIZE_MAX / n ? NULL : calloc(n ? n : 1, s);
}

/* Control and user-defined added tokens alike are matched in text. */
static int is_added(uint8_t attr)
{
    return attr == ML_MLT_ADDED || attr == ML_MLT_USER;
}

static ml_status build_pieces(ml_tok *k, ml_error *err)
{
    size_t size = table_size(k->h.n_vocab);
    k->piece = alloc_array(size, sizeof *k->piece);
    if (!k->piece)
        return ml__err(err, ML_E_NOMEM, "", -1, "cannot allocate the piece table");
    memset(k->piece, 0xff, size * sizeof *k->piece);
    k->piece_mask = size - 1;
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t id = 0; id < k->h.n_vocab; id++) {
            ml_mlt_token t = tok_at(k, id);
            if (pass ? is_added(t.attr) : t.attr == ML_MLT_NORMAL)
                piece_insert(k, id);
        }
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        k->byte_piece[b] = piece_find(k, &c, 1);
        k->byte_tok[b] = ML_TOKEN_NONE;
    }
    for (uint32_t id = 0; id < k->h.n_vocab; id++) {
        ml_mlt_token t = tok_at(k, id);
        if (t.attr == ML_MLT_BYTE && k->byte_tok[t.bytes[0]] == ML_TOKEN_NONE) {
            k->byte_tok[t.bytes[0]] = id;
            k->has_byte_tokens = 1;
        }
    }
    return ML_OK;
}

static ml_status build_merges(ml_tok *k, ml_error *err)
{
    size_t size = table_size(k->h.n_merges);
    k->merge = alloc_array(size, sizeof *k->merge);
    if (!k->merge)
        return ml__err(err, ML_E_NOMEM, "", -1, "cannot allocate the merge table");
    for (size_t i = 0; i < size; i++)
        k->merge[i].key = UINT64_MAX;
    k->merge_mask = size - 1;
    const uint8_t *m = ml__mlt_merges(k->t);
    for (uint32_t r = 0; r < k->h.n_merges; r++, m += ML_MLT_MERGE_SIZE)
        merge_insert(k, ml__rd32(m), ml__rd32(m + 4), r, ml__rd32(m + 8));
    return ML_OK;
}

static int is_spm_space(const uint8_t *p)
{
    return p[0] == 0xe2 && p[1] == 0x96 && p[2] == 0x81;
}

static void build_spm_cuts(ml_tok *k)
{
    const uint8_t *m = ml__mlt_merges(k->t);
    for (uint32_t r = 0; r < k->h.n_merges; r++, m += ML_MLT_MERGE_SIZE) {
        ml_mlt_token t = tok_at(k, ml__rd32(m + 8));
        for (uint32_t i = 1; i + 3 <= t.len; i++)
            if (is_spm_space(t.bytes + i) && !(i >= 3 && is_spm_space(t.bytes + i - 3)))
                k->spm_nocut[t.bytes[i - 1]] = 1;
    }
}

static ml_status build_trie(ml_tok *k, ml_error *err)
{
    uint64_t bytes = 0;
    for (uint32_t id = 0; id < k->h.n_vocab; id++) {
        ml_mlt_token t = tok_at(k, id);
        if (is_added(t.attr))
            bytes += t.len;
    }
    /* Bounded by the file size, which is mapped. */
    size_t nodes = (size_t)bytes + 1, size = table_size(nodes);
    k->term = alloc_array(nodes, sizeof *k->term);
    k->edge_key = alloc_array(size, sizeof *k->edge_key);
    k->edge_to = alloc_array(size, sizeof *k->edge_to);
    if (!k->term || !k->edge_key || !k->edge_to)
        return ml__err(err, ML_E_NOMEM, "", -1, "cannot allocate the added-token trie");
    memset(k->edge_key, 0xff, size * sizeof *k->edge_key);
    k->edge_mask = size - 1;
    k->term[0] = ML_TOKEN_NONE;
    k->n_nodes = 1;
    for (uint32_t id = 0; id < k->h.n_vocab; id++)
        if (is_added(tok_at(k, id).attr))
            trie_add(k, id);
    return ML_OK;
}

static ml_status build_cache(ml_tok *k, ml_error *err)
{
    k->cache = alloc_array(CACHE_SLOTS, sizeof *k->cache);
    k->cache_keys = malloc(CACHE_KEY_BYTES);
    k->cache_ids = malloc(CACHE_IDS * sizeof *k->cache_ids);
    if (!k->cache || !k->cache_keys || !k->cache_ids)
        return ml__err(err, ML_E_NOMEM, "", -1, "cannot allocate the pre-token cache");
    return ML_OK;
}

ml_status ml_tok_new(const ml_mlt *t, ml_tok **out, ml_error *err)
{
    *out = NULL;
    if (!t)
        return ml__err(err, ML_E_INVAL, "", -1, "NULL tokenizer");
    ml_tok *k = calloc(1, sizeof *k);
    if (!k)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    k->t = t;
    k->h = *ml_mlt_get_header(t);
    ml__unicode_init();
    ml_status s = build_pieces(k, err);
    if (!s)
        s = build_merges(k, err);
    if (!s)
        s = build_trie(k, err);
    if (!s && k->h.kind == ML_MLT_KIND_SPM)
        build_spm_cuts(k);
    if (!s)
        s = build_cache(k, err);
    if (s) {
        ml_tok_free(k);
        return s;
    }
    *out = k;
    return ML_OK;
}

void ml_tok_free(ml_tok *k)
{
    if (!k)
        return;
    free(k->piece);
    free(k->merge);
    free(k->edge_key);
    free(k->edge_to);
    free(k->term);
    free(k->cache);
    free(k->cache_keys);
    free(k->cache_ids);
    free(k->syms);
    free(k->heap);
    free(k->norm);
    free(k);
}

const ml_mlt *ml_tok_mlt(const ml_tok *k)
{
    return k->t;
}

/* ---------------------------------------------------------------------------
 * Output ids
 * ------------------------------------------------------------------------- */

void ml_ids_free(ml_ids *ids)
{
    if (!ids)
        return;
    free(ids->v);
    memset(ids, 0, sizeof *ids);
}

static int ids_reserve(ml_ids *o, size_t more)
{
    if (more > SIZE_MAX - o->n)
        return -1;
    ml_token *v = ml_array_reserve(o->v, &o->cap, o->n + more, sizeof *v);
    if (!v)
        return -1;
    o->v = v;
    return 0;
}

static int ids_push(ml_ids *o, ml_token id)
{
    if (ids_reserve(o, 1))
        return -1;
    o->v[o->n++] = id;
    return 0;
}

/* ---------------------------------------------------------------------------
 * BPE over one word
 * ------------------------------------------------------------------------- */

static void heap_push(uint64_t *h, size_t *n, uint64_t v)
{
    size_t i = (*n)++;
    while (i) {
        size_t p = (i - 1) / 2;
        if (h[p] <= v)
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n)
{
    uint64_t top = h[0], v = h[--*n];
    size_t i = 0, m = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m)
            break;
        if (c + 1 < m && h[c + 1] < h[c])
            c++;
        if (h[c] >= v)
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
    return top;
}

/* Pushes the merge of symbol i with its right neighbour, if there is one. */
static void push_pair(ml_tok *k, size_t *nh, int32_t i)
{
    if (i < 0 || k->syms[i].next < 0)
        return;
    const merge_slot *m = merge_find(k, k->syms[i].id, k->syms[k->syms[i].next].id);
    if (m)
        heap_push(k->heap, nh, (uint64_t)m->rank << 32 | (uint32_t)i);
}

/* Merges k->syms[0..n) (linked in order) and appends the ids to out. */
static ml_status bpe_word(ml_tok *k, size_t n, ml_ids *out, ml_error *err)
{
    if (n > 1) {
        uint64_t *heap = ml_array_reserve(k->heap, &k->heap_cap, 3 * n, sizeof *heap);
        if (!heap)
            return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
        k->heap = heap;
        size_t nh = 0;
        for (size_t i = 0; i + 1 < n; i++)
            push_pair(k, &nh, (int32_t)i);
        while (nh) {
            uint64_t top = heap_pop(k->heap, &nh);
            int32_t i = (int32_t)(uint32_t)top;
            sym *a = &k->syms[i];
            if (a->id == ML_TOKEN_NONE || a->next < 0)
                continue;
            sym *b = &k->syms[a->next];
            const merge_slot *m = merge_find(k, a->id, b->id);
            if (!m || m->rank != (uint32_t)(top >> 32))
                continue; /* stale: a neighbour changed since the push */
            a->id = m->merged;
            b->id = ML_TOKEN_NONE;
            a->next = b->next;
            if (b->next >= 0)
                k->syms[b->next].prev = i;
            push_pair(k, &nh, a->prev);
            push_pair(k, &nh, i);
        }
    }
    if (ids_reserve(out, n))
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    for (int32_t i = n ? 0 : -1; i >= 0; i = k->syms[i].next)
        out->v[out->n++] = k->syms[i].id;
    return ML_OK;
}

/* Appends one symbol; returns its index. */
static int add_sym(ml_tok *k, size_t *n, uint32_t id)
{
    /* Links and heap entries hold positions in 31 bits. */
    if (*n >= INT32_MAX)
        return -1;
    sym *syms = ml_array_reserve(k->syms, &k->syms_cap, *n + 1, sizeof *syms);
    if (!syms)
        return -1;
    k->syms = syms;
    size_t i = (*n)++;
    k->syms[i] = (sym){id, (int32_t)i - 1, -1};
    if (i)
        k->syms[i - 1].next = (int32_t)i;
    return 0;
}

/* The initial symbol of a unit the vocabulary lacks: its bytes as byte
 * tokens, or nothing when the file has none (the reference would emit an
 * unknown token, which .mlt does not name). */
static int add_fallback(ml_tok *k, size_t *n, const uint8_t *p, size_t len)
{
    if (!k->has_byte_tokens)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (k->byte_tok[p[i]] == ML_TOKEN_NONE)
            return 0;
    for (size_t i = 0; i < len; i++)
        if (add_sym(k, n, k->byte_tok[p[i]]))
            return -1;
    return 0;
}

/* ---------------------------------------------------------------------------
 * Pre-token cache
 * ------------------------------------------------------------------------- */

static void cache_clear(ml_tok *k)
{
    memset(k->cache, 0, CACHE_SLOTS * sizeof *k->cache);
    k->cache_count = k->cache_key_used = k->cache_ids_used = 0;
}

static cache_slot *cache_find(ml_tok *k, const uint8_t *p, size_t n, uint64_t h)
{
    size_t i = h & (CACHE_SLOTS - 1);
    for (;; i = (i + 1) & (CACHE_SLOTS - 1)) {
        cache_slot *c = &k->cache[i];
        if (!c->key_len)
            return c;
        if (c->hash == h && c->key_len == n && memcmp(k->cache_keys + c->key_off, p, n) == 0)
            return c;
    }
}

static void cache_put(ml_tok *k, const uint8_t *p, size_t n, uint64_t h, const uint32_t *ids,
                      size_t n_ids)
{
    if (k->cache_count >= CACHE_SLOTS / 2 || k->cache_key_used + n > CACHE_KEY_BYTES ||
        k->cache_ids_used + n_ids > CACHE_IDS)
        cache_clear(k);
    cache_slot *c = cache_find(k, p, n, h);
    memcpy(k->cache_keys + k->cache_key_used, p, n);
    if (n_ids) /* a word may give no ids (no piece, no byte token): ids NULL */
        memcpy(k->cache_ids + k->cache_ids_used, ids, n_ids * sizeof *ids);
    *c = (cache_slot){h, k->cache_key_used, (uint32_t)n, k->cache_ids_used, (uint32_t)n_ids};
    k->cache_key_used += (uint32_t)n;
    k->cache_ids_used += (uint32_t)n_ids;
    k->cache_count++;
}

/* Appends the ids of a cached word, if it is in the cache; *h receives
 * the key's hash (words longer than the cache's keys: not cached). */
static int cache_get(ml_tok *k, const uint8_t *p, size_t n, uint64_t *h, ml_ids *out)
{
    if (n > CACHE_MAX_KEY)
        return 0;
    *h = hash_bytes(p, n);
    cache_slot *c = cache_find(k, p, n, *h);
    if (!c->key_len || ids_reserve(out, c->n_ids))
        return 0;
    if (c->n_ids) /* out->v may still be NULL */
        memcpy(out->v + out->n, k->cache_ids + c->ids_off, c->n_ids * sizeof *out->v);
    out->n += c->n_ids;
    return 1;
}

/* The ids appended since `before`, or NULL when there are none yet. */
static const uint32_t *ids_since(const ml_ids *ids, size_t before)
{
    return ids->n > before ? ids->v + before : NULL;
}

/* ---------------------------------------------------------------------------
 * Words
 * ------------------------------------------------------------------------- */

/* A byte-level pre-token. */
static ml_status encode_bytes_word(ml_tok *k, const uint8_t *p, size_t n, ml_ids *out,
                                   ml_error *err)
{
    if ((k->h.flags & ML_MLT_IGNORE_MERGES)) {
        uint32_t id = piece_find(k, p, n);
        if (id != ML_TOKEN_NONE)
            return ids_push(out, id) ? ml__err(err, ML_E_NOMEM, "", -1, "out of memory") : ML_OK;
    }
    uint64_t h = 0;
    if (cache_get(k, p, n, &h, out))
        return ML_OK;
    size_t ns = 0, before = out->n;
    for (size_t i = 0; i < n; i++) {
        int r = k->byte_piece[p[i]] != ML_TOKEN_NONE ? add_sym(k, &ns, k->byte_piece[p[i]])
                                             : add_fallback(k, &ns, p + i, 1);
        if (r)
            return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    }
    ml_status s = bpe_word(k, ns, out, err);
    if (!s && n <= CACHE_MAX_KEY)
        cache_put(k, p, n, h, ids_since(out, before), out->n - before);
    return s;
}

typedef struct word_ctx {
    ml_tok *k;
    ml_ids *out;
    ml_error *err;
    ml_status s;
} word_ctx;

static int on_pretoken(void *ctx, const uint8_t *p, size_t n)
{
    word_ctx *w = ctx;
    w->s = encode_bytes_word(w->k, p, n, w->out, w->err);
    return w->s != ML_OK;
}

static ml_status encode_bytes_segment(ml_tok *k, const uint8_t *p, size_t n, ml_ids *out,
                                      ml_error *err)
{
    uint8_t *nfc = NULL;
    size_t nn = n;
    if (k->h.flags & ML_MLT_NFC) {
        ml_status s = ml__nfc(p, n, &nfc, &nn, err);
        if (s)
            return s;
        if (nfc)
            p = nfc;
    }
    word_ctx w = {k, out, err, ML_OK};
    ml__pretokenize(k->h.flags, p, nn, on_pretoken, &w);
    free(nfc);
    return w.s;
}

/* One SentencePiece word: its characters, those missing from the
 * vocabulary as byte tokens, merged. */
static ml_status spm_word(ml_tok *k, const uint8_t *d, size_t w, ml_ids *out, ml_error *err)
{
    uint64_t h = 0;
    if (cache_get(k, d, w, &h, out))
        return ML_OK;
    size_t ns = 0, before = out->n;
    for (size_t i = 0; i < w;) {
        int l = ml__utf8_seq(d + i, w - i);
        size_t len = (size_t)(l < 0 ? -l : l);
        uint32_t id = piece_find(k, d + i, len);
        int r = id != ML_TOKEN_NONE ? add_sym(k, &ns, id) : add_fallback(k, &ns, d + i, len);
        if (r)
            return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
        i += len;
    }
    ml_status s = bpe_word(k, ns, out, err);
    if (!s && w <= CACHE_MAX_KEY)
        cache_put(k, d, w, h, ids_since(out, before), out->n - before);
    return s;
}

/* A SentencePiece-style segment: ▁ prefix, spaces as ▁, then words. */
static ml_status encode_spm_segment(ml_tok *k, const uint8_t *p, size_t n, int prefix,
                                    ml_ids *out, ml_error *err)
{
    size_t spaces = 0;
    for (size_t i = 0; i < n; i++)
        spaces += p[i] == ' ';
    uint64_t need = (uint64_t)n + 2 * (uint64_t)spaces + 3;
    size_t cap;
    uint8_t *d = ml__to_size(need, &cap) ? NULL : ml_array_reserve(k->norm, &k->norm_cap, cap, 1);
    if (!d)
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    k->norm = d;
    size_t w = 0;
    if (prefix) {
        memcpy(d, SPM_SPACE, 3);
        w = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (p[i] == ' ') {
            memcpy(d + w, SPM_SPACE, 3);
            w += 3;
        } else {
            d[w++] = p[i];
        }
    }
    if (k->h.flags & ML_MLT_IGNORE_MERGES) {
        uint32_t id = piece_find(k, d, w);
        if (id != ML_TOKEN_NONE)
            return ids_push(out, id) ? ml__err(err, ML_E_NOMEM, "", -1, "out of memory") : ML_OK;
    }
    /* Cut before each ▁ that follows a character whose last byte no merged
     * piece puts before a ▁. */
    size_t from = 0;
    for (size_t i = 1; i + 3 <= w; i++) {
        if (!is_spm_space(d + i) || k->spm_nocut[d[i - 1]] || (i >= 3 && is_spm_space(d + i - 3)))
            continue;
        ml_status s = spm_word(k, d + from, i - from, out, err);
        if (s)
            return s;
        from = i;
    }
    return spm_word(k, d + from, w - from, out, err);
}

static ml_status encode_segment(ml_tok *k, const uint8_t *p, size_t n, int at_start,
                                ml_ids *out, ml_error *err)
{
    if (!n)
        return ML_OK;
    if (k->h.kind == ML_MLT_KIND_BYTE_BPE)
        return encode_bytes_segment(k, p, n, out, err);
    int prefix = !(k->h.flags & ML_MLT_NO_PREFIX);
    /* Flag 4 is the reference's Metaspace prepend scheme "first": only the
     * segment at the start of the text, and not when it already starts
     * with a space (▁ after normalization). */
    if (k->h.flags & ML_MLT_PREFIX_FIRST)
        prefix = at_start && p[0] != ' ' && !(n >= 3 && memcmp(p, SPM_SPACE, 3) == 0);
    return encode_spm_segment(k, p, n, prefix, out, err);
}

/* A UTF-8 continuation byte: not the start of a character. */
static int is_cont(uint8_t b)
{
    return (b & 0xc0) == 0x80;
}

/* Length and id of the longest added token at p that ends where a
 * character ends, or 0; control tokens only up to control_max bytes (0
 * in a user's text, and never past its start).  The text is valid UTF-8 here, but .mlt pieces may be
 * any bytes: a piece that is part of a character ("\xe2") must not split
 * one, or the text around it is no longer UTF-8 (and NFC refuses it).
 * Pieces that are UTF-8 always end on a boundary. */
static size_t added_at(const ml_tok *k, const uint8_t *p, size_t n, size_t control_max,
                       uint32_t *id)
{
    uint32_t node = 0;
    size_t best = 0;
    for (size_t i = 0; i < n; i++) {
        node = edge_find(k, node, p[i]);
        if (node == NO_NODE)
            break;
        uint32_t t = k->term[node];
        if (t != ML_TOKEN_NONE && (i + 1 == n || !is_cont(p[i + 1])) &&
            (i < control_max || tok_at(k, t).attr != ML_MLT_ADDED)) {
            best = i + 1;
            *id = t;
        }
    }
    return best;
}

/* Where control tokens may match: outside the user's spans.  At i, the
 * room is how many bytes a control token may take (up to the next span);
 * 0 inside a span. */
typedef struct user_spans {
    const ml_span *v;
    size_t n, next; /* the first span that does not end at or before i */
} user_spans;

static size_t control_room(user_spans *u, size_t i, size_t n)
{
    while (u->next < u->n && u->v[u->next].start + u->v[u->next].len <= i)
        u->next++;
    if (u->next == u->n)
        return n - i;
    return u->v[u->next].start > i ? u->v[u->next].start - i : 0;
}

/* Splits the text at added tokens and encodes the segments between them,
 * each whole: a user's span is not a segment of its own, so the text
 * around it is split exactly as if it had been typed in one piece. */
static ml_status encode_valid(ml_tok *k, const uint8_t *s, size_t n, user_spans *u, ml_ids *out,
                              ml_error *err)
{
    ml_status st = ML_OK;
    size_t seg = 0;
    for (size_t i = 0; i < n && !st;) {
        uint32_t id;
        size_t m = 0;
        /* Added tokens match at character starts only (see added_at). */
        if (k->can_start[s[i]] && !is_cont(s[i]))
            m = added_at(k, s + i, n - i, control_room(u, i, n), &id);
        if (!m) {
            i++;
            continue;
        }
        st = encode_segment(k, s + seg, i - seg, seg == 0, out, err);
        if (!st && ids_push(out, id))
            st = ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
        i += m;
        seg = i;
    }
    return st ? st : encode_segment(k, s + seg, n - seg, seg == 0, out, err);
}

ml_status ml_tok_encode(ml_tok *k, const void *text, size_t len, int bos, ml_ids *out,
                        ml_error *err)
{
    if (!k || !out || (!text && len))
        return ml__err(err, ML_E_INVAL, "", -1, "NULL argument");
    int want_bos = bos == ML_TOK_BOS_YES || (bos == ML_TOK_BOS_AUTO && (k->h.flags & ML_MLT_ADD_BOS));
    if (want_bos && k->h.bos == ML_TOKEN_NONE)
        return ml__err(err, ML_E_INVAL, "bos", 20, "BOS requested but the tokenizer has none");
    if (want_bos && ids_push(out, k->h.bos))
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    uint8_t *fixed = NULL;
    size_t n = len;
    ml_status st = ml__utf8_lossy(text, n, &fixed, &n, err);
    user_spans none = {NULL, 0, 0};
    if (!st)
        st = encode_valid(k, fixed ? fixed : text, n, &none, out, err);
    free(fixed);
    return st;
}

ml_status ml_tok_encode_chat(ml_tok *k, const void *text, size_t len, const ml_span *user,
                             size_t n_user, ml_ids *out, ml_error *err)
{
    if (!k || !out || (!text && len) || (!user && n_user))
        return ml__err(err, ML_E_INVAL, "", -1, "NULL argument");
    for (size_t i = 0, end = 0; i < n_user; i++) {
        if (user[i].start < end || user[i].len > len || user[i].start > len - user[i].len)
            return ml__err(err, ML_E_INVAL, "", -1,
                           "user span %zu is out of order or past the text's %zu bytes", i, len);
        end = user[i].start + user[i].len;
    }
    /* Replacing bad UTF-8 would move the spans; chat text is built valid. */
    uint8_t *fixed = NULL;
    size_t n = len;
    ml_status st = ml__utf8_lossy(text, len, &fixed, &n, err);
    if (!st && fixed)
        st = ml__err(err, ML_E_INVAL, "", -1, "the chat text is not UTF-8");
    free(fixed);
    user_spans u = {user, n_user, 0};
    return st ? st : encode_valid(k, text, len, &u, out, err);
}

ml_status ml_tok_encode_text(ml_tok *k, const void *text, size_t len, ml_ids *out, ml_error *err)
{
    if (!k || !out || (!text && len))
        return ml__err(err, ML_E_INVAL, "", -1, "NULL argument");
    uint8_t *fixed = NULL;
    size_t n = len;
    ml_status st = ml__utf8_lossy(text, n, &fixed, &n, err);
    ml_span all = {0, n};
    user_spans u = {&all, 1, 0};
    if (!st)
        st = encode_valid(k, fixed ? fixed : text, n, &u, out, err);
    free(fixed);
    return st;
}

/* ---------------------------------------------------------------------------
 * Decoding
 * ------------------------------------------------------------------------- */

void ml_tok_stream_init(ml_tok_stream *s, const ml_mlt *t, unsigned opts)
{
    memset(s, 0, sizeof *s);
    s->t = t;
    s->opts = opts;
    const ml_mlt_header *h = ml_mlt_get_header(t);
    /* Only a kind-1 prefix leaves a space to drop at the start. */
    if (h->kind != ML_MLT_KIND_SPM || (h->flags & ML_MLT_NO_PREFIX) || (opts & ML_TOK_KEEP_SPACE))
        s->started = 1;
}

/* Writes well-formed bytes, dropping the prefix's space at the very start. */
static ml_status out_bytes(ml_tok_stream *s, const uint8_t *p, size_t n, ml_write_fn fn,
                           void *ctx, ml_error *err)
{
    if (!n)
        return ML_OK;
    if (!s->started) {
        s->started = 1;
        if (p[0] == ' ') {
            p++;
            n--;
            if (!n)
                return ML_OK;
        }
    }
    return fn(ctx, p, n, err);
}

/* Feeds bytes through the UTF-8 repair: complete sequences go out, an
 * invalid subpart becomes U+FFFD, an unfinished tail waits in s->pend. */
static ml_status feed(ml_tok_stream *s, const uint8_t *p, size_t n, ml_write_fn fn, void *ctx,
                      ml_error *err)
{
    ml_status st = ML_OK;
    /* First the held-back bytes, joined with the start of p. */
    while (s->npend && n) {
        uint8_t b[12];
        size_t take = n < 8 ? n : 8, nb = s->npend + take;
        memcpy(b, s->pend, s->npend);
        memcpy(b + s->npend, p, take);
        int l = ml__utf8_seq_partial(b, nb);
        if (l == 0 && take == n) { /* still unfinished: keep everything */
            memcpy(s->pend + s->npend, p, n);
            s->npend += (unsigned)n;
            return ML_OK;
        }
        size_t used = (size_t)(l < 0 ? -l : l); /* bytes of b consumed */
        st = l > 0 ? out_bytes(s, b, used, fn, ctx, err)
                   : out_bytes(s, (const uint8_t *)"\xef\xbf\xbd", 3, fn, ctx, err);
        if (st)
            return st;
        if (used >= s->npend) {
            p += used - s->npend;
            n -= used - s->npend;
            s->npend = 0;
        } else { /* the subpart ended inside the held-back bytes */
            memmove(s->pend, s->pend + used, s->npend - used);
            s->npend -= (unsigned)used;
        }
    }
    size_t run = 0, i = 0;
    while (i < n) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        int l = ml__utf8_seq_partial(p + i, n - i);
        if (l > 0) {
            i += (size_t)l;
            continue;
        }
        if ((st = out_bytes(s, p + run, i - run, fn, ctx, err)))
            return st;
        if (l == 0) { /* an unfinished sequence at the end */
            memcpy(s->pend, p + i, n - i);
            s->npend = (unsigned)(n - i);
            return ML_OK;
        }
        if ((st = out_bytes(s, (const uint8_t *)"\xef\xbf\xbd", 3, fn, ctx, err)))
            return st;
        i += (size_t)-l;
        run = i;
    }
    return out_bytes(s, p + run, n - run, fn, ctx, err);
}

ml_status ml_tok_stream_put(ml_tok_stream *s, ml_token id, ml_write_fn fn, void *ctx,
                            ml_error *err)
{
    const ml_mlt_header *h = ml_mlt_get_header(s->t);
    if (id >= h->n_vocab)
        return ml__err(err, ML_E_INVAL, "", -1, "token id %u is not below n_vocab %u", id,
                       h->n_vocab);
    if ((s->opts & ML_TOK_SKIP_BOS_EOS) && (id == h->bos || id == h->eos))
        return ML_OK;
    ml_mlt_token t = ml_mlt_get_token(s->t, id);
    if (h->kind != ML_MLT_KIND_SPM || t.attr == ML_MLT_BYTE)
        return feed(s, t.bytes, t.len, fn, ctx, err);
    /* Kind 1: ▁ is a space, in every piece (the reference's Replace
     * decoder sees added tokens too). */
    ml_status st = ML_OK;
    size_t from = 0;
    for (size_t i = 0; i + 3 <= t.len && !st; i++) {
        if (memcmp(t.bytes + i, SPM_SPACE, 3) != 0)
            continue;
        st = feed(s, t.bytes + from, i - from, fn, ctx, err);
        if (!st)
            st = feed(s, (const uint8_t *)" ", 1, fn, ctx, err);
        i += 2;
        from = i + 1;
    }
    return st ? st : feed(s, t.bytes + from, t.len - from, fn, ctx, err);
}

ml_status ml_tok_stream_end(ml_tok_stream *s, ml_write_fn fn, void *ctx, ml_error *err)
{
    ml_status st = ML_OK;
    /* A held-back tail is an incomplete sequence: one maximal subpart at a
     * time, each a U+FFFD. */
    while (s->npend && !st) {
        int l = ml__utf8_seq(s->pend, s->npend);
        size_t used = (size_t)(l < 0 ? -l : l);
        st = out_bytes(s, (const uint8_t *)"\xef\xbf\xbd", 3, fn, ctx, err);
        memmove(s->pend, s->pend + used, s->npend - used);
        s->npend -= (unsigned)used;
    }
    return st;
}

/* ml_write_fn into an ml_buf, keeping a byte free for the terminator. */
static ml_status mem_sink(void *ctx, const void *buf, size_t n, ml_error *err)
{
    ml_buf *m = ctx;
    if (ml_buf_append(m, buf, n) || ml_buf_reserve(m, 1))
        return ml__err(err, ML_E_NOMEM, "", -1, "out of memory");
    return ML_OK;
}

ml_status ml_tok_decode(const ml_mlt *t, const ml_token *ids, size_t n, unsigned opts, char **out,
                        size_t *len, ml_error *err)
{
    *out = NULL;
    if (len)
        *len = 0;
    if (!t || (!ids && n))
        return ml__err(err, ML_E_INVAL, "", -1, "NULL argument");
    ml_buf m = {0};
    ml_tok_stream s;
    ml_tok_stream_init(&s, t, opts);
    ml_status st = mem_sink(&m, "", 0, err);
    for (size_t i = 0; i < n && !st; i++)
        st = ml_tok_stream_put(&s, ids[i], mem_sink, &m, err);
    if (!st)
        st = ml_tok_stream_end(&s, mem_sink, &m, err);
    if (st) {
        ml_buf_free(&m);
        return st;
    }
    m.data[m.len] = 0;
    *out = m.data;
    if (len)
        *len = m.len;
    return ML_OK;
}
