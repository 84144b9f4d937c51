/* fuzz_grammar.c - GBNF grammars: ml_grammar_parse on arbitrary text and,
 * when it parses, the matcher and the logit processor on texts.  Input:
 * the grammar, then NUL-separated texts (a grammar cannot hold NUL).
 *
 * Oracles besides the sanitizers: the error contract (only the statuses
 * <mlcore/grammar.h> documents, the field a line and column or
 * "grammar", offsets inside the input); a text fed whole and fed a byte at
 * a time gives the same status, failing byte and completeness; the processor's mask
 * over a small built-in vocabulary (every byte, a few words and split
 * characters, an end-of-text token) allows exactly the tokens whose text
 * a matcher takes after the text kept so far, and the end exactly where
 * the matcher says the text is complete; a few tokens are then kept, the
 * first allowed each time. */
#include "fuzz.h"

#define MAX_TEXTS 4
#define STEPS 4

static void check_parse_err(ml_status st, const ml_error *err, size_t size)
{
    fuzz_check_err(st, err, size);
    FUZZ_CHECK(st == ML_E_FORMAT || st == ML_E_UNSUPPORTED || st == ML_E_NOMEM);
    FUZZ_CHECK(!strcmp(err->field, "grammar") || !strncmp(err->field, "line ", 5) ||
               st == ML_E_NOMEM);
}

static void check_match_err(ml_status st, const ml_error *err)
{
    fuzz_check_err(st, err, 0);
    FUZZ_CHECK(st == ML_OK || st == ML_E_MISMATCH || st == ML_E_UNSUPPORTED || st == ML_E_NOMEM);
}

/* Whole and byte by byte agree. */
static void check_text(const ml_grammar *g, const uint8_t *s, size_t n)
{
    ml_grammar_match *a, *b;
    ml_error err;
    fuzz_err_init(&err);
    ml_status st = ml_grammar_match_new(g, &a, &err);
    check_match_err(st, &err);
    if (st)
        return;
    FUZZ_CHECK(ml_grammar_match_new(g, &b, &err) == ML_OK);
    ml_status whole = ml_grammar_match_feed(a, s, n, &err), bytes = ML_OK;
    check_match_err(whole, &err);
    int64_t at = whole == ML_E_MISMATCH ? err.offset : -1;
    size_t i = 0;
    for (; i < n && !bytes; i++) {
        bytes = ml_grammar_match_feed(b, s + i, 1, &err);
        check_match_err(bytes, &err);
    }
    FUZZ_CHECK(whole == bytes);
    /* a failed feed leaves the matcher as it was: only a success compares */
    FUZZ_CHECK(whole || ml_grammar_match_complete(a) == ml_grammar_match_complete(b));
    FUZZ_CHECK(whole != ML_E_MISMATCH || at == (int64_t)i - 1);
    ml_grammar_match_free(a);
    ml_grammar_match_free(b);
}

/* ------------------------------------------------------------------------
 * The processor on a built-in vocabulary
 * ------------------------------------------------------------------------ */
static const char *const WORDS[] = {"ab", "abc", "{\"", "\":", "true", "12", " x", "\xc3\xa9",
                                    "\xe2\x82", "\xac", "\xe2\x82\xac!", "\xf0\x9f\x98\x80",
                                    "\n\n", "</s>"};
#define N_WORDS (sizeof WORDS / sizeof WORDS[0])
#define N_VOCAB (256 + N_WORDS)
#define EOS (N_VOCAB - 1)

static ml_mlt *vocab(void)
{
    static ml_mlt *t;
    static fuzz_buf file;
    if (t)
        return t;
    ml_mlt_token tok[N_VOCAB];
    static uint8_t bytes[256];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (uint8_t)i;
        tok[i] = (ml_mlt_token){bytes + i, 1, ML_MLT_NORMAL};
    }
    for (size_t i = 0; i < N_WORDS; i++)
        tok[256 + i] = (ml_mlt_token){(const uint8_t *)WORDS[i], (uint32_t)strlen(WORDS[i]),
                                      i + 1 == N_WORDS ? ML_MLT_ADDED : ML_MLT_NORMAL};
    ml_mlt_header h = {.kind = ML_MLT_KIND_BYTE_BPE, .bos = ML_TOKEN_NONE, .eos = EOS};
    ml_error err;
    FUZZ_CHECK(ml_mlt_write(&h, tok, N_VOCAB, NULL, 0, fuzz_buf_sink, &file, &err) == ML_OK);
    FUZZ_CHECK(ml_mlt_open_memory(file.p, file.n, &t, &err) == ML_OK);
    return t;
}

/* 1 when the matcher takes kept[0..nk) then token id's text. */
static int takes(ml_grammar_match *m, const uint8_t *kept, size_t nk, ml_token id)
{
    ml_mlt_token k = ml_mlt_get_token(vocab(), id);
    ml_error err;
    ml_grammar_match_reset(m);
    return ml_grammar_match_feed(m, kept, nk, &err) == ML_OK &&
           ml_grammar_match_feed(m, k.bytes, k.len, &err) == ML_OK;
}

static void check_proc(const ml_grammar *g)
{
    ml_grammar_proc *p;
    ml_grammar_match *m;
    ml_error err;
    fuzz_err_init(&err);
    ml_status st = ml_grammar_proc_new(g, vocab(), &p, &err);
    check_match_err(st, &err);
    if (st)
        return;
    FUZZ_CHECK(ml_grammar_match_new(g, &m, &err) == ML_OK);
    uint8_t kept[64];
    size_t nk = 0;
    for (int step = 0; step < STEPS; step++) {
        float l[N_VOCAB + 2] = {0};
        st = ml_grammar_proc_apply(p, l, N_VOCAB + 2, NULL, 0, &err);
        check_match_err(st, &err);
        ml_grammar_match_reset(m);
        if (ml_grammar_match_feed(m, kept, nk, &err) != ML_OK)
            break; /* a cap the matcher hit as well */
        int complete = ml_grammar_match_complete(m);
        FUZZ_CHECK(ml_grammar_proc_complete(p) == complete);
        if (st)
            break;
        ml_token first = ML_TOKEN_NONE;
        for (ml_token id = 0; id < N_VOCAB + 2; id++) {
            int allowed = l[id] == 0;
            int want = id == EOS ? complete : id < EOS && takes(m, kept, nk, id);
            FUZZ_CHECK(allowed == want);
            if (allowed && id != EOS && first == ML_TOKEN_NONE)
                first = id;
        }
        if (first == ML_TOKEN_NONE)
            break;
        ml_mlt_token k = ml_mlt_get_token(vocab(), first);
        memcpy(kept + nk, k.bytes, k.len);
        nk += k.len;
        ml_grammar_proc_accept(p, first);
    }
    ml_grammar_match_free(m);
    ml_grammar_proc_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t glen = nul ? (size_t)(nul - data) : size;
    ml_grammar *g = NULL;
    ml_error err;
    fuzz_err_init(&err);
    ml_status st = ml_grammar_parse((const char *)data, glen, NULL, &g, &err);
    FUZZ_CHECK((st == ML_OK) == (g != NULL));
    if (st) {
        check_parse_err(st, &err, glen);
        return 0;
    }
    FUZZ_CHECK(ml_grammar_n_rules(g) >= 1);
    const uint8_t *p = nul ? nul + 1 : data + size, *end = data + size;
    for (int i = 0; i < MAX_TEXTS && p <= end; i++) {
        const uint8_t *q = memchr(p, 0, (size_t)(end - p));
        size_t n = q ? (size_t)(q - p) : (size_t)(end - p);
        check_text(g, p, n);
        p += n + 1;
    }
    check_proc(g);
    ml_grammar_free(g);
    return 0;
}
