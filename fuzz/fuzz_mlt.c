/* fuzz_mlt.c - the .mlt reader (ml_mlt_open_memory), the encoder on
 * random text, and the decoders.  Input: two bytes giving the text's
 * length L (little-endian, cut to what is there), the .mlt, then L bytes of
 * text at the very end.
 *
 * Oracles besides the sanitizers: the error contract; every token lies in
 * the file and every merge joins its two pieces; ml_mlt_write of what was
 * read gives back the same bytes (the format has one encoding); encoding
 * is deterministic (the pre-token cache changes nothing), its ids are in
 * range and BOS handling is what ML_TOK_BOS_* say; ml_tok_decode equals an
 * independent model of it (pieces concatenated, U+2581 as space for kind
 * 1, invalid UTF-8 replaced by U+FFFD per maximal subpart, the start space
 * dropped) and equals the streaming decoder fed one id at a time. */
#include "fuzz.h"

#define MAX_TEXT 2048

static const uint8_t *g_mlt; /* the file under test, for bounds checks */
static size_t g_mlt_size;

static void check_tokens(const ml_mlt *t)
{
    const ml_mlt_header *h = ml_mlt_get_header(t);
    for (uint32_t i = 0; i < h->n_vocab; i++) {
        ml_mlt_token k = ml_mlt_get_token(t, i);
        uint64_t off = ml_mlt_token_offset(t, i);
        FUZZ_CHECK(k.len >= 1 && k.attr <= ML_MLT_USER);
        FUZZ_CHECK(off + ML_MLT_TOKEN_OVERHEAD + k.len <= g_mlt_size);
        FUZZ_CHECK(k.bytes == g_mlt + off + ML_MLT_TOKEN_OVERHEAD);
        FUZZ_CHECK(k.attr != ML_MLT_BYTE || k.len == 1);
    }
    for (uint32_t r = 0; r < h->n_merges; r++) {
        uint32_t a, b, c;
        ml_mlt_get_merge(t, r, &a, &b, &c);
        FUZZ_CHECK(a < h->n_vocab && b < h->n_vocab && c < h->n_vocab);
        ml_mlt_token ta = ml_mlt_get_token(t, a), tb = ml_mlt_get_token(t, b),
                     tc = ml_mlt_get_token(t, c);
        FUZZ_CHECK((uint64_t)ta.len + tb.len == tc.len);
        FUZZ_CHECK(memcmp(tc.bytes, ta.bytes, ta.len) == 0);
        FUZZ_CHECK(memcmp(tc.bytes + ta.len, tb.bytes, tb.len) == 0);
    }
    char names[256];
    ml_mlt_flag_names(h->flags, names, sizeof names);
    FUZZ_CHECK(memchr(names, 0, sizeof names) != NULL);
}

/* What was read, written again, is the same file (its chat section
 * too, when it has one). */
static void check_rewrite(const ml_mlt *t)
{
    const ml_mlt_header *h = ml_mlt_get_header(t);
    ml_mlt_token *toks = malloc((h->n_vocab ? h->n_vocab : 1) * sizeof *toks);
    uint32_t *merges = malloc((h->n_merges ? h->n_merges : 1) * 3 * sizeof *merges);
    uint32_t eog[ML_MLT_MAX_EOG];
    ml_mlt_template tmpl[ML_MLT_MAX_TEMPLATES];
    ml_mlt_chat chat = {.eog = eog, .n_eog = ml_mlt_n_eog(t), .templates = tmpl,
                        .n_templates = ml_mlt_n_templates(t)};
    FUZZ_CHECK(toks && merges && chat.n_eog <= ML_MLT_MAX_EOG &&
               chat.n_templates <= ML_MLT_MAX_TEMPLATES);
    for (uint32_t i = 0; i < h->n_vocab; i++)
        toks[i] = ml_mlt_get_token(t, i);
    for (uint32_t r = 0; r < h->n_merges; r++)
        ml_mlt_get_merge(t, r, &merges[3 * r], &merges[3 * r + 1], &merges[3 * r + 2]);
    for (uint32_t i = 0; i < chat.n_eog; i++)
        eog[i] = ml_mlt_eog(t, i);
    for (uint32_t i = 0; i < chat.n_templates; i++)
        tmpl[i] = ml_mlt_get_template(t, i);
    fuzz_buf out = {0};
    ml_error err;
    fuzz_err_init(&err);
    ml_status st = ml_mlt_write_chat(h, toks, h->n_vocab, merges, h->n_merges,
                                     h->flags & ML_MLT_CHAT ? &chat : NULL, fuzz_buf_sink, &out,
                                     &err);
    fuzz_check_err(st, &err, 0);
    FUZZ_CHECK(st == ML_OK);
    FUZZ_CHECK(out.n == g_mlt_size && memcmp(out.p, g_mlt, out.n) == 0);
    free(out.p);
    free(toks);
    free(merges);
}

/* ---------------------------------------------------------------------------
 * The decoder's model: lossy UTF-8 as the Unicode standard's "maximal
 * subpart" practice (and Rust's from_utf8_lossy) defines it.
 * ------------------------------------------------------------------------- */

/* Bytes of a well-formed sequence at p, or -k for an invalid maximal
 * subpart of k bytes (k >= 1). */
static int utf8_step(const uint8_t *p, size_t n)
{
    uint8_t b = p[0];
    int need;
    uint8_t lo = 0x80, hi = 0xbf;
    if (b < 0x80)
        return 1;
    if (b >= 0xc2 && b <= 0xdf)
        need = 1;
    else if (b == 0xe0)
        need = 2, lo = 0xa0;
    else if ((b >= 0xe1 && b <= 0xec) || b == 0xee || b == 0xef)
        need = 2;
    else if (b == 0xed)
        need = 2, hi = 0x9f;
    else if (b == 0xf0)
        need = 3, lo = 0x90;
    else if (b >= 0xf1 && b <= 0xf3)
        need = 3;
    else if (b == 0xf4)
        need = 3, hi = 0x8f;
    else
        return -1;
    for (int k = 1; k <= need; k++) {
        if ((size_t)k >= n)
            return -k;
        uint8_t c = p[k];
        if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xbf))
            return -k;
    }
    return need + 1;
}

static void lossy(const uint8_t *p, size_t n, fuzz_buf *out)
{
    size_t i = 0;
    while (i < n) {
        int l = utf8_step(p + i, n - i);
        if (l > 0) {
            fuzz_buf_sink(out, p + i, (size_t)l, NULL);
            i += (size_t)l;
        } else {
            fuzz_buf_sink(out, "\xef\xbf\xbd", 3, NULL);
            i += (size_t)-l;
        }
    }
}

static void model_decode(const ml_mlt *t, const uint32_t *ids, size_t n, unsigned opts,
                         fuzz_buf *out)
{
    const ml_mlt_header *h = ml_mlt_get_header(t);
    fuzz_buf raw = {0};
    for (size_t i = 0; i < n; i++) {
        if ((opts & ML_TOK_SKIP_BOS_EOS) && (ids[i] == h->bos || ids[i] == h->eos))
            continue;
        ml_mlt_token k = ml_mlt_get_token(t, ids[i]);
        for (uint32_t j = 0; j < k.len; j++) {
            if (h->kind == ML_MLT_KIND_SPM && k.attr != ML_MLT_BYTE && j + 3 <= k.len &&
                memcmp(k.bytes + j, "\xe2\x96\x81", 3) == 0) {
                fuzz_buf_sink(&raw, " ", 1, NULL);
                j += 2;
            } else {
                fuzz_buf_sink(&raw, k.bytes + j, 1, NULL);
            }
        }
    }
    fuzz_buf fixed = {0};
    lossy(raw.p, raw.n, &fixed);
    size_t skip = h->kind == ML_MLT_KIND_SPM && !(h->flags & ML_MLT_NO_PREFIX) &&
                  !(opts & ML_TOK_KEEP_SPACE) && fixed.n && fixed.p[0] == ' ';
    fuzz_buf_sink(out, fixed.p ? fixed.p + skip : NULL, fixed.n - skip, NULL);
    free(raw.p);
    free(fixed.p);
}

static void check_decode(const ml_mlt *t, const uint32_t *ids, size_t n, unsigned opts)
{
    char *s = NULL;
    size_t len = 0;
    ml_error err;
    fuzz_err_init(&err);
    ml_status st = ml_tok_decode(t, ids, n, opts, &s, &len, &err);
    fuzz_check_err(st, &err, 0);
    FUZZ_CHECK(st == ML_OK && s != NULL && s[len] == 0);
    fuzz_buf want = {0};
    model_decode(t, ids, n, opts, &want);
    FUZZ_CHECK(want.n == len && (len == 0 || memcmp(want.p, s, len) == 0));
    /* One id at a time through the streaming decoder. */
    fuzz_buf got = {0};
    ml_tok_stream ts;
    ml_tok_stream_init(&ts, t, opts);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(ml_tok_stream_put(&ts, ids[i], fuzz_buf_sink, &got, NULL) == ML_OK);
    FUZZ_CHECK(ml_tok_stream_end(&ts, fuzz_buf_sink, &got, NULL) == ML_OK);
    FUZZ_CHECK(got.n == len && (len == 0 || memcmp(got.p, s, len) == 0));
    free(got.p);
    free(want.p);
    free(s);
}

static void encode(ml_tok *k, const uint8_t *text, size_t n, int bos, ml_ids *ids, ml_status *st)
{
    ml_error err;
    fuzz_err_init(&err);
    *st = ml_tok_encode(k, text, n, bos, ids, &err);
    fuzz_check_err(*st, &err, 0);
}

static int same_ids(const ml_ids *a, const ml_ids *b, size_t from)
{
    return a->n == b->n + from &&
           (b->n == 0 || memcmp(a->v + from, b->v, b->n * sizeof *b->v) == 0);
}

static void check_encoder(const ml_mlt *t, const uint8_t *text, size_t n)
{
    const ml_mlt_header *h = ml_mlt_get_header(t);
    ml_tok *k = NULL;
    ml_error err;
    fuzz_err_init(&err);
    ml_status st = ml_tok_new(t, &k, &err);
    fuzz_check_err(st, &err, 0);
    FUZZ_CHECK(st == ML_OK && ml_tok_mlt(k) == t);
    ml_ids plain = {0}, again = {0}, with = {0}, autob = {0};
    encode(k, text, n, ML_TOK_BOS_NO, &plain, &st);
    FUZZ_CHECK(st == ML_OK);
    for (size_t i = 0; i < plain.n; i++)
        FUZZ_CHECK(plain.v[i] < h->n_vocab);
    encode(k, text, n, ML_TOK_BOS_NO, &again, &st); /* now from the cache */
    FUZZ_CHECK(st == ML_OK && same_ids(&again, &plain, 0));
    encode(k, text, n, ML_TOK_BOS_YES, &with, &st);
    if (h->bos == ML_TOKEN_NONE) {
        FUZZ_CHECK(st == ML_E_INVAL);
    } else {
        FUZZ_CHECK(st == ML_OK && with.n >= 1 && with.v[0] == h->bos);
        FUZZ_CHECK(same_ids(&with, &plain, 1));
    }
    encode(k, text, n, ML_TOK_BOS_AUTO, &autob, &st);
    FUZZ_CHECK(st == ML_OK);
    FUZZ_CHECK(same_ids(&autob, &plain, (h->flags & ML_MLT_ADD_BOS) ? 1 : 0));
    for (unsigned opts = 0; opts < 4; opts++)
        check_decode(t, autob.v, autob.n, opts);
    /* Ids straight from the text's bytes, whatever they mean. */
    uint32_t raw[64];
    size_t nr = 0;
    for (size_t i = 0; i + 1 < n && nr < 64; i += 2)
        raw[nr++] = (uint32_t)(text[i] | text[i + 1] << 8) % h->n_vocab;
    check_decode(t, raw, nr, (unsigned)(n & 3));
    uint32_t bad = h->n_vocab;
    char *s = NULL;
    fuzz_err_init(&err);
    st = ml_tok_decode(t, &bad, 1, 0, &s, NULL, &err);
    fuzz_check_err(st, &err, 0);
    FUZZ_CHECK(st == ML_E_INVAL && s == NULL);
    ml_ids_free(&plain);
    ml_ids_free(&again);
    ml_ids_free(&with);
    ml_ids_free(&autob);
    ml_tok_free(k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t tlen = (size_t)(data[0] | data[1] << 8);
    if (tlen > size - 2)
        tlen = size - 2;
    const uint8_t *text = data + size - tlen;
    g_mlt = data + 2;
    g_mlt_size = size - 2 - tlen;
    ml_mlt *t = NULL;
    ml_error err;
    fuzz_err_init(&err);
    ml_status st = ml_mlt_open_memory(g_mlt, g_mlt_size, &t, &err);
    fuzz_check_err(st, &err, g_mlt_size);
    FUZZ_CHECK((st == ML_OK) == (t != NULL));
    if (!t)
        return 0;
    FUZZ_CHECK(ml_mlt_file_size(t) == g_mlt_size);
    check_tokens(t);
    check_rewrite(t);
    check_encoder(t, text, tlen < MAX_TEXT ? tlen : MAX_TEXT);
    ml_mlt_close(t);
    return 0;
}
