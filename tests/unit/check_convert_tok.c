/* check_convert_tok.c - the GGUF vocabulary -> .mlt conversion
 * (lib/convert/convert_tok.c).  Three kinds of tests:
 *   - the committed vocabulary GGUFs (tests/fixtures/vocab, made by
 *     tools/make-vocab-ggufs.py): each .mlt against the one json2mlt.py
 *     made from the same tokenizer.json (byte for byte, or the same tokens
 *     and the same set of merges where only the rank of merges producing
 *     the same piece differs), and every golden case encoded with and
 *     without BOS, id for id;
 *   - small GGUFs built here whose .mlt is predicted byte for byte: attrs,
 *     GPT-2 byte map, ▁ restored in user-defined pieces, the merge ranking,
 *     flags from the model, pre-tokenizer and architecture, BOS and EOS;
 *   - hostile metadata, each with its exact status, key and offset. */
#include "gguf_build.h"
#include "suites.h"
#include "testutil.h"

#include <mlcore/convert_tok.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <zlib.h>

/* ---------------------------------------------------------------------------
 * Files
 * ------------------------------------------------------------------------- */

static const char *fixture_path(const char *sub, const char *name)
{
    static char path[2][512];
    static int k;
    const char *dir = getenv("MLCORE_FIXTURES");
    k ^= 1;
    snprintf(path[k], sizeof path[k], "%s/%s/%s", dir ? dir : "tests/fixtures", sub, name);
    return path[k];
}

/* The whole of a file, gunzipped when it is compressed (gzread passes
 * plain files through). */
static uint8_t *slurp(const char *path, size_t *len)
{
    gzFile f = gzopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    size_t cap = 1 << 20, n = 0;
    uint8_t *p = malloc(cap);
    ck_assert_ptr_nonnull(p);
    int k;
    while ((k = gzread(f, p + n, (unsigned)(cap - n))) > 0) {
        n += (size_t)k;
        if (n == cap) {
            cap *= 2;
            p = realloc(p, cap);
            ck_assert_ptr_nonnull(p);
        }
    }
    ck_assert_msg(k == 0, "read error in %s", path);
    gzclose(f);
    *len = n;
    return p;
}

/* ---------------------------------------------------------------------------
 * Converting and comparing
 * ------------------------------------------------------------------------- */

typedef struct result {
    tu_mem mem;
    ml_mlt *t;
    ml_mlt_convert_info info;
} result;

/* Converts g; on success opens the result, which must pass the reader. */
static ml_status convert(const ml_gguf *g, result *o, ml_error *err)
{
    tu_mem_init(&o->mem);
    o->t = NULL;
    memset(&o->info, 0xA5, sizeof o->info);
    ml_status s = ml_mlt_from_gguf_ex(g, tu_mem_sink, &o->mem, &o->info, err);
    if (s) {
        ck_assert_uint_eq(o->mem.len, 0);
        return s;
    }
    ml_error e;
    ck_assert_msg(ml_mlt_open_memory(o->mem.p, o->mem.len, &o->t, &e) == ML_OK, "%s", e.msg);
    return ML_OK;
}

static void out_free(result *o)
{
    ml_mlt_close(o->t);
    tu_mem_free(&o->mem);
}

static int merge_cmp(const void *a, const void *b)
{
    return memcmp(a, b, 12);
}

/* The merge rules as 12-byte big-endian records (memcmp then orders them
 * by left, right, merged), in rank order or sorted. */
static uint32_t *merges_of(const ml_mlt *t, int sorted)
{
    uint32_t n = ml_mlt_get_header(t)->n_merges;
    uint32_t *m = malloc((size_t)n * 12 + 1);
    ck_assert_ptr_nonnull(m);
    for (uint32_t r = 0; r < n; r++) {
        uint32_t ids[3];
        ml_mlt_get_merge(t, r, &ids[0], &ids[1], &ids[2]);
        for (int k = 0; k < 3; k++) {
            uint8_t *p = (uint8_t *)&m[3 * (size_t)r + k];
            p[0] = (uint8_t)(ids[k] >> 24), p[1] = (uint8_t)(ids[k] >> 16);
            p[2] = (uint8_t)(ids[k] >> 8), p[3] = (uint8_t)ids[k];
        }
    }
    if (sorted)
        qsort(m, n, 12, merge_cmp);
    return m;
}

/* How a converted .mlt must relate to json2mlt.py's. */
enum {
    SAME_BYTES,  /* identical files */
    SAME_SET,    /* same tokens; same merges, some ranked differently */
    SAME_PREFIX  /* the GGUF's tokens are the first of json2mlt's; same merges */
};

/* json2mlt.py marks every added token 1: it does not tell control tokens
 * from user-defined ones (attr 3), which only the GGUF's token types say. */
static uint8_t as_json2mlt(uint8_t attr)
{
    return attr == ML_MLT_USER ? ML_MLT_ADDED : attr;
}

/* A converted file's bytes as json2mlt.py would write them: attr 3 as 1
 * and without flag user_tokens. */
static uint8_t *json2mlt_view(const ml_mlt *t, const uint8_t *p, size_t len)
{
    uint8_t *v = malloc(len);
    ck_assert_ptr_nonnull(v);
    memcpy(v, p, len);
    v[29] &= (uint8_t)~(ML_MLT_USER_TOKENS >> 8);
    for (uint32_t i = 0; i < ml_mlt_get_header(t)->n_vocab; i++) {
        uint64_t off = ml_mlt_token_offset(t, i);
        v[off] = as_json2mlt(v[off]);
    }
    return v;
}

static void compare_tokens(const ml_mlt *a, const ml_mlt *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        ml_mlt_token x = ml_mlt_get_token(a, i), y = ml_mlt_get_token(b, i);
        TU_REQUIRE(as_json2mlt(x.attr) == y.attr && x.len == y.len && memcmp(x.bytes, y.bytes, x.len) == 0,
                   "token %u differs (attr %u/%u, len %u/%u)", i, x.attr, y.attr, x.len, y.len);
    }
}

static void compare_with_json2mlt(const result *o, const char *ref_name, int how)
{
    size_t len;
    uint8_t *ref = slurp(fixture_path("tok", ref_name), &len);
    if (how == SAME_BYTES) {
        /* json2mlt.py writes no chat section: the same bytes up to it, and
         * the same header but for its flag */
        ck_assert_uint_ge(o->mem.len, len);
        uint8_t *v = json2mlt_view(o->t, o->mem.p, o->mem.len);
        ck_assert_msg(memcmp(v, ref, 28) == 0 && memcmp(v + 32, ref + 32, len - 32) == 0,
                      "%s: the bytes differ", ref_name);
        free(v);
        uint32_t fo = ml_mlt_get_header(o->t)->flags, fr = (uint32_t)ref[28] | (uint32_t)ref[29] << 8;
        ck_assert_uint_eq(fo & ~(uint32_t)(ML_MLT_CHAT | ML_MLT_USER_TOKENS), fr);
        ck_assert_uint_eq(o->mem.len > len, (fo & ML_MLT_CHAT) != 0);
        free(ref);
        return;
    }
    ml_mlt *r;
    ml_error e;
    ck_assert_msg(ml_mlt_open_memory(ref, len, &r, &e) == ML_OK, "%s", e.msg);
    const ml_mlt_header *hr = ml_mlt_get_header(r), *ho = ml_mlt_get_header(o->t);
    ck_assert_uint_eq(ho->n_merges, hr->n_merges);
    if (how == SAME_SET)
        ck_assert_uint_eq(ho->n_vocab, hr->n_vocab);
    else
        ck_assert_uint_lt(ho->n_vocab, hr->n_vocab);
    compare_tokens(o->t, r, ho->n_vocab < hr->n_vocab ? ho->n_vocab : hr->n_vocab);
    int sorted = how == SAME_SET;
    uint32_t *mo = merges_of(o->t, sorted), *mr = merges_of(r, sorted);
    ck_assert_msg(memcmp(mo, mr, (size_t)hr->n_merges * 12) == 0, "%s: merges differ", ref_name);
    free(mo);
    free(mr);
    ml_mlt_close(r);
    free(ref);
}

/* ---------------------------------------------------------------------------
 * Golden cases: TOKENIZER \t NAME \t WITH_SPECIAL \t ROUNDTRIP \t HEX \t IDS
 * ------------------------------------------------------------------------- */

static size_t unhex(const char *s, uint8_t *out)
{
    size_t n = strlen(s) / 2;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        TU_REQUIRE(sscanf(s + 2 * i, "%2x", &v) == 1, "bad hex");
        out[i] = (uint8_t)v;
    }
    return n;
}

/* Encodes text and checks the ids against want (space-separated). */
static int encode_matches(ml_tok *k, const uint8_t *text, size_t n, int bos, const char *want)
{
    ml_ids ids = {0};
    ml_error e;
    ck_assert_msg(ml_tok_encode(k, text, n, bos, &ids, &e) == ML_OK, "%s", e.msg);
    const char *p = want;
    size_t i = 0;
    int ok = 1;
    while (ok && *p) {
        char *end;
        unsigned long v = strtoul(p, &end, 10);
        ok = end != p && i < ids.n && ids.v[i] == v;
        i++;
        p = *end ? end + 1 : end;
    }
    ok = ok && i == ids.n;
    ml_ids_free(&ids);
    return ok;
}

/* Runs the cases of tokenizer `name` in a TSV; returns how many. */
static unsigned run_cases(const ml_mlt *t, const char *sub, const char *file, const char *name)
{
    ml_tok *k;
    ml_error e;
    ck_assert_msg(ml_tok_new(t, &k, &e) == ML_OK, "%s", e.msg);
    const ml_mlt_header *h = ml_mlt_get_header(t);
    size_t len;
    char *data = (char *)slurp(fixture_path(sub, file), &len);
    data = realloc(data, len + 1);
    data[len] = 0;
    uint8_t *text = malloc(len / 2 + 1);
    unsigned n = 0;
    char *save = NULL;
    for (char *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *col[6] = {line};
        int c = 1;
        for (char *p = line; c < 6 && (p = strchr(p, '\t')); c++)
            *p++ = 0, col[c] = p;
        if (c < 6 || strcmp(col[0], name) != 0)
            continue;
        size_t tn = unhex(col[4], text);
        int special = col[2][0] == '1';
        TU_REQUIRE(encode_matches(k, text, tn, special ? ML_TOK_BOS_AUTO : ML_TOK_BOS_NO, col[5]),
                   "%s %s (special %d): ids differ from %s", file, col[1], special, col[5]);
        /* With BOS forced: the BOS id, then the ids without special tokens. */
        if (!special && h->bos != ML_TOKEN_NONE) {
            char want[32 + 8];
            snprintf(want, sizeof want, "%u", h->bos);
            size_t wl = strlen(want) + strlen(col[5]) + 2;
            char *w = malloc(wl);
            snprintf(w, wl, "%s%s%s", want, col[5][0] ? " " : "", col[5]);
            TU_REQUIRE(encode_matches(k, text, tn, ML_TOK_BOS_YES, w), "%s %s with BOS", file,
                       col[1]);
            free(w);
        }
        n++;
    }
    free(text);
    free(data);
    ml_tok_free(k);
    return n;
}

/* ---------------------------------------------------------------------------
 * The committed vocabularies
 * ------------------------------------------------------------------------- */

typedef struct fixture {
    const char *gguf;       /* in tests/fixtures/vocab */
    const char *ref;        /* json2mlt.py's .mlt in tests/fixtures/tok, or NULL */
    int how;                /* SAME_* */
    uint32_t kind, flags, n_vocab, n_merges;
    ml_token bos, eos;
    uint32_t n_added, n_bytes, n_respaced;
    const char *cases_dir, *cases[3], *name; /* golden ids: files and tokenizer name */
    unsigned n_cases;       /* cases expected in those files */
    const char *eog;        /* the end-of-generation ids, as "1 106 212" */
    uint32_t template_len;  /* bytes of the "default" chat template, 0 for none */
} fixture;

#define PUBLIC "tok", {"cases-public.tsv", "cases-hard.tsv", "cases-llamacpp.tsv"}

/* flags: + 1024 (user_tokens) where the GGUF has USER_DEFINED tokens. */
static const fixture fixtures[] = {
    /* Made by llama.cpp's convert_hf_to_gguf.py from the tokenizer.json. */
    {"llama2.gguf.gz", "llama2.mlt", SAME_SET, 1, 1, 32000, 61249, 1, 2, 3, 256, 0, PUBLIC,
     "llama2", 172 + 236 + 54, "2", 0},
    {"mistral.gguf.gz", "mistral.mlt", SAME_SET, 1, 1, 32000, 58980, 1, 2, 3, 256, 0, PUBLIC,
     "mistral", 172 + 236, "2", 0},
    {"gemma3.gguf.gz", "gemma3.mlt", SAME_BYTES, 1, 1665, 262145, 514906, 2, 106, 6415, 256, 30,
     PUBLIC, "gemma3", 172 + 236, "1 106 212", 1532},
    {"llama3.gguf.gz", "llama3.mlt", SAME_BYTES, 2, 514, 128256, 280147, 128000, 128001, 256, 0, 0,
     PUBLIC, "llama3", 172 + 236 + 44, "128001 128009", 348},
    {"llama3_1.gguf.gz", "llama3_1.mlt", SAME_BYTES, 2, 515, 128256, 280147, 128000, 128009, 256,
     0, 0, PUBLIC, "llama3_1", 172 + 236 + 44, "128001 128009", 389},
    {"qwen3.gguf.gz", "qwen3.mlt", SAME_BYTES, 2, 1560, 151669, 151387, ML_TOKEN_NONE, 151645, 26,
     0, 0, PUBLIC, "qwen3", 172 + 236 + 43, "128247 151643 151645 151662 151663 151664", 4116},
    /* Real vocabularies: llama.cpp's test files and two published models. */
    {"ggml-vocab-llama-spm.gguf.gz", "llama2.mlt", SAME_SET, 1, 1, 32000, 61249, 1, 2, 3, 256, 0,
     PUBLIC, "llama2", 172 + 236 + 54, "2", 0},
    {"ggml-vocab-llama-spm.gguf.gz", NULL, 0, 1, 1, 32000, 61249, 1, 2, 3, 256, 0, "vocab",
     {"cases-llama-spm.tsv"}, "llama-spm", 46, "2", 0},
    {"ggml-vocab-phi-3.gguf.gz", NULL, 0, 1, 1537, 32064, 61249, 1, 32000, 67, 256, 0, "vocab",
     {"cases-phi-3.tsv"}, "phi-3", 46, "2 32000 32007", 269},
    {"ggml-vocab-qwen35.gguf.gz", NULL, 0, 2, 1808, 151936, 151387, 151643, 151643, 293, 0, 0,
     "vocab", {"cases-qwen35.tsv"}, "qwen35", 50, "128247 151643 151645", 327},
    {"ggml-vocab-gpt-2.gguf.gz", NULL, 0, 2, 32, 50257, 50000, 50256, 50256, 1, 0, 0, "vocab",
     {"cases-gpt-2.tsv"}, "gpt-2", 46, "50256", 0},
    {"gemma3-270m.gguf.gz", "gemma3.mlt", SAME_PREFIX, 1, 1665, 262144, 514906, 2, 1, 6414, 256,
     30, PUBLIC, "gemma3", 172 + 236, "1 106 212", 0},
    {"smollm2-135m.gguf.gz", NULL, 0, 2, 608, 49152, 48900, 1, 2, 17, 0, 0, "vocab",
     {"cases-smollm.tsv"}, "smollm", 46, "0 2 4", 368},
    /* o200k (gpt-4o): llama.cpp's ids, and Hugging Face's where they differ
     * (tools/make-o200k-fixtures.py); harmony's EOG set without <|end|>. */
    {"gpt-4o-llama3.gguf.gz", NULL, 0, 2, 2560, 128009, 280147, 128000, 128002, 9, 0, 0, "vocab",
     {"cases-gpt-4o-llama3.tsv", "cases-gpt-4o-llama3-hf.tsv"}, "gpt-4o-llama3", 261,
     "128001 128002 128008", 16738},
    {"gpt-oss.gguf.gz", NULL, 0, 2, 2560, 390, 125, 381, 383, 9, 0, 0, "vocab",
     {"cases-gpt-oss.tsv"}, "gpt-oss", 261, "382 383 389", 16738},
};

/* The end-of-generation ids and the default template's length. */
static void check_chat(const ml_mlt *t, const fixture *f)
{
    char got[256] = "";
    size_t w = 0;
    for (uint32_t i = 0; i < ml_mlt_n_eog(t) && w < sizeof got; i++)
        w += (size_t)snprintf(got + w, sizeof got - w, "%s%u", i ? " " : "", ml_mlt_eog(t, i));
    ck_assert_msg(strcmp(got, f->eog) == 0, "%s: end-of-generation ids \"%s\", expected \"%s\"",
                  f->gguf, got, f->eog);
    ml_mlt_template k = {NULL, 0, NULL, 0};
    ck_assert_int_eq(ml_mlt_find_template(t, "default", &k), f->template_len > 0);
    ck_assert_uint_eq(k.len, f->template_len);
    ck_assert_uint_eq(ml_mlt_n_templates(t), f->template_len > 0);
}

START_TEST(committed_vocabularies)
{
    const fixture *f = &fixtures[_i];
    size_t len;
    uint8_t *buf = slurp(fixture_path("vocab", f->gguf), &len);
    ml_gguf *g;
    ml_error e;
    ck_assert_msg(ml_gguf_open_memory(buf, len, &g, &e) == ML_OK, "%s: %s", f->gguf, e.msg);
    result o;
    ck_assert_msg(convert(g, &o, &e) == ML_OK, "%s: %s: %s", f->gguf, e.field, e.msg);
    const ml_mlt_header *h = ml_mlt_get_header(o.t);
    ck_assert_uint_eq(h->kind, f->kind);
    ck_assert_uint_eq(h->flags, f->flags);
    ck_assert_uint_eq(h->n_vocab, f->n_vocab);
    ck_assert_uint_eq(h->n_merges, f->n_merges);
    ck_assert_int_eq(h->bos, f->bos);
    ck_assert_int_eq(h->eos, f->eos);
    ck_assert_mem_eq(&o.info.header, h, sizeof *h);
    ck_assert_uint_eq(o.info.n_added, f->n_added);
    ck_assert_uint_eq(o.info.n_bytes, f->n_bytes);
    ck_assert_uint_eq(o.info.n_respaced, f->n_respaced);
    if (f->ref)
        compare_with_json2mlt(&o, f->ref, f->how);
    check_chat(o.t, f);
    unsigned n = 0;
    for (int k = 0; k < 3 && f->cases[k]; k++)
        n += run_cases(o.t, f->cases_dir, f->cases[k], f->name);
    ck_assert_uint_eq(n, f->n_cases);
    out_free(&o);
    ml_gguf_close(g);
    free(buf);
}
END_TEST

/* ---------------------------------------------------------------------------
 * Small vocabularies built here
 * ------------------------------------------------------------------------- */

enum { MAX_KV = 16, MAX_ELEMS = 24 };

/* One key: a scalar, or an array of n elements. */
typedef struct kv {
    const char *key;
    uint32_t vtype;            /* of the scalar, or of the array's elements */
    int arr;                   /* an array */
    uint32_t n;                /* its elements */
    const char *const *s;      /* array: strings */
    const double *d;           /* array: floats */
    const int64_t *i;          /* array: integers and bools */
    const char *str;           /* scalar string (a literal) */
    int64_t ival;              /* scalar integer or bool */
} kv;

typedef struct vocab {
    kv kv[MAX_KV];
    size_t n_kv;
} vocab;

/* Where the builder put each value (ml_gguf_value.offset): the data of a
 * scalar or string, the first element of an array, each element. */
typedef struct built {
    gb b;
    size_t val_at[MAX_KV];
    size_t elem_at[MAX_KV][MAX_ELEMS];
    ml_gguf *g;
} built;

static uint64_t bits_of(const kv *k, uint32_t j)
{
    if (k->vtype == ML_GGUF_F32) {
        float f = (float)k->d[j];
        uint32_t u;
        memcpy(&u, &f, 4);
        return u;
    }
    if (k->vtype == ML_GGUF_F64) {
        uint64_t u;
        memcpy(&u, &k->d[j], 8);
        return u;
    }
    return (uint64_t)k->i[j];
}

static size_t put_one(gb *b, const kv *k, uint32_t j)
{
    return k->vtype == ML_GGUF_STRING ? gb_v_str(b, k->s[j]) : gb_e_fixed(b, k->vtype, bits_of(k, j));
}

static void put_value(built *bt, size_t i, const kv *k)
{
    gb *b = &bt->b;
    if (!k->arr) {
        bt->val_at[i] = k->vtype == ML_GGUF_STRING ? gb_v_str(b, k->str)
                                                    : gb_v_fixed(b, k->vtype, (uint64_t)k->ival);
        return;
    }
    bt->val_at[i] = gb_v_arr(b, k->vtype, k->n) + 8;
    for (uint32_t j = 0; j < k->n; j++) {
        size_t at = put_one(b, k, j);
        if (j < MAX_ELEMS)
            bt->elem_at[i][j] = at;
    }
}

/* Builds and opens the GGUF (which must be valid). */
static void build(const vocab *v, built *bt)
{
    memset(bt, 0, sizeof *bt);
    gb_init(&bt->b, 3);
    gb_header(&bt->b, 0, v->n_kv);
    for (size_t i = 0; i < v->n_kv; i++) {
        gb_kv(&bt->b, i, v->kv[i].key, v->kv[i].arr ? ML_GGUF_ARRAY : v->kv[i].vtype);
        put_value(bt, i, &v->kv[i]);
    }
    gb_data(&bt->b, 32, 0);
    ml_error e;
    ck_assert_msg(ml_gguf_open_memory(bt->b.p, bt->b.len, &bt->g, &e) == ML_OK, "%s", e.msg);
}

static void built_free(built *bt)
{
    ml_gguf_close(bt->g);
    gb_free(&bt->b);
}

static size_t find_kv(const vocab *v, const char *key)
{
    for (size_t i = 0; i < v->n_kv; i++)
        if (strcmp(v->kv[i].key, key) == 0)
            return i;
    return SIZE_MAX;
}

/* Adds or replaces a key. */
static void set(vocab *v, kv k)
{
    size_t i = find_kv(v, k.key);
    if (i == SIZE_MAX) {
        ck_assert_uint_lt(v->n_kv, MAX_KV);
        i = v->n_kv++;
    }
    v->kv[i] = k;
}

static void drop(vocab *v, const char *key)
{
    size_t i = find_kv(v, key);
    ck_assert_uint_ne(i, SIZE_MAX);
    memmove(&v->kv[i], &v->kv[i + 1], (v->n_kv - i - 1) * sizeof v->kv[0]);
    v->n_kv--;
}

#define NELEM(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))
/* Arrays must have static storage: the kv keeps pointers to them. */
#define STR(key, text) ((kv){key, ML_GGUF_STRING, 0, 1, NULL, NULL, NULL, text, 0})
#define INT(key, t, v) ((kv){key, t, 0, 1, NULL, NULL, NULL, NULL, v})
#define BOOL(key, v) INT(key, ML_GGUF_BOOL, v)
#define STRS(key, a) ((kv){key, ML_GGUF_STRING, 1, NELEM(a), a, NULL, NULL, NULL, 0})
#define INTS(key, t, a) ((kv){key, t, 1, NELEM(a), NULL, NULL, a, NULL, 0})
#define FLOATS(key, t, a) ((kv){key, t, 1, NELEM(a), NULL, a, NULL, NULL, 0})
#define EMPTY(key) ((kv){key, ML_GGUF_STRING, 1, 0, NULL, NULL, NULL, NULL, 0})

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

/* A byte-level vocabulary in GPT-2's characters: U+0120 "Ġ" is a space,
 * U+010A a newline, "Ã©" the two bytes of é. */
#define G_SP "\xc4\xa0"
static const char *const bl_tokens[] = {
    "a", "b", "ab", G_SP, G_SP "ab", "<|end|>", "\xc4\x8a", "\xc3\x83\xc2\xa9", "[PAD8]",
};
static const int64_t bl_types[] = {1, 1, 1, 1, 1, 3, 1, 1, 5};
static const char *const bl_merges[] = {"a b", G_SP " ab"};

static void byte_level(vocab *v)
{
    memset(v, 0, sizeof *v);
    set(v, STR(K_ARCH, "gpt2"));
    set(v, STR(K_MODEL, "gpt2"));
    set(v, STR(K_PRE, "gpt-2"));
    set(v, STRS(K_TOKENS, bl_tokens));
    set(v, INTS(K_TYPES, ML_GGUF_I32, bl_types));
    set(v, STRS(K_MERGES, bl_merges));
    set(v, INT(K_BOS, ML_GGUF_U32, 5));
    set(v, INT(K_EOS, ML_GGUF_U32, 5));
}

/* A SentencePiece vocabulary.  The user-defined "▁▁" (10) is stored with
 * spaces and scored -1000, as llama.cpp's converter writes it; "x" (11)
 * is UNUSED; "éa" (16) scores -0, as the first piece of Gemma's does. */
#define SP "\xe2\x96\x81"
static const char *const spm_tokens[] = {
    "<unk>", "<s>", "</s>", "<0x41>", SP, "a", "b", "ab", SP "a", SP "ab", "  ", "x", "xa",
    "ba", "bb", "\xc3\xa9", "\303\251a",
};
static const int64_t spm_types[] = {2, 3, 3, 6, 1, 1, 1, 1, 1, 1, 4, 5, 1, 1, 1, 1, 1};
static const double spm_scores[] = {0, 0, 0, 0, -100, -101, -102, -1, -2, -3, -1000, -5, -0.5,
                                    -4, -4, -103, -0.0};

static void sentencepiece(vocab *v)
{
    memset(v, 0, sizeof *v);
    set(v, STR(K_ARCH, "llama"));
    set(v, STR(K_MODEL, "llama"));
    set(v, STR(K_PRE, "default"));
    set(v, STRS(K_TOKENS, spm_tokens));
    set(v, INTS(K_TYPES, ML_GGUF_I32, spm_types));
    set(v, FLOATS(K_SCORES, ML_GGUF_F32, spm_scores));
    set(v, INT(K_BOS, ML_GGUF_U32, 1));
    set(v, INT(K_EOS, ML_GGUF_U32, 2));
}

/* Converts v, which must succeed. */
static void convert_ok(const vocab *v, built *bt, result *o)
{
    build(v, bt);
    ml_error e;
    ml_status s = convert(bt->g, o, &e);
    ck_assert_msg(s == ML_OK, "%s: %s: %s", ml_status_name(s), e.field, e.msg);
}

/* The .mlt must be exactly what ml_mlt_write makes of these parts. */
static void expect_mlt(const result *o, uint32_t kind, uint32_t flags, ml_token bos, ml_token eos,
                       const ml_mlt_token *tok, uint32_t n, const uint32_t *m, uint32_t nm)
{
    ml_mlt_header h = {{0}, 0, kind, 0, 0, bos, eos, flags};
    tu_mem want;
    tu_mem_init(&want);
    ml_error e;
    ck_assert_msg(ml_mlt_write(&h, tok, n, m, nm, tu_mem_sink, &want, &e) == ML_OK, "%s", e.msg);
    ck_assert_uint_eq(o->mem.len, want.len);
    ck_assert_mem_eq(o->mem.p, want.p, want.len);
    tu_mem_free(&want);
}

#define T(s, a) {(const uint8_t *)(s), sizeof(s) - 1, a}

START_TEST(byte_level_exact)
{
    vocab v;
    byte_level(&v);
    built bt;
    result o;
    convert_ok(&v, &bt, &o);
    static const ml_mlt_token tok[] = {
        T("a", 0), T("b", 0), T("ab", 0), T(" ", 0), T(" ab", 0), T("<|end|>", 1), T("\n", 0),
        T("\xc3\xa9", 0), T("[PAD8]", 0),
    };
    static const uint32_t m[] = {0, 1, 2, 3, 2, 4};
    expect_mlt(&o, 2, ML_MLT_GPT2_REGEX, 5, 5, tok, 9, m, 2);
    ck_assert_str_eq(o.info.model, "gpt2");
    ck_assert_str_eq(o.info.pre, "gpt-2");
    ck_assert_uint_eq(o.info.n_added, 1);
    ck_assert_uint_eq(o.info.n_bytes, 0);
    ck_assert_uint_eq(o.info.n_respaced, 0);
    out_free(&o);
    built_free(&bt);
}
END_TEST

/* Every character of GPT-2's map decodes to its byte; tokens without
 * token_type are NORMAL; an empty merge list is fine. */
START_TEST(gpt2_byte_map)
{
    static char text[256][4];
    static const char *toks[256];
    uint32_t next = 0x100;
    for (int byte = 0; byte < 256; byte++) {
        int self = (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) ||
                   byte >= 0xAE;
        uint32_t cp = self ? (uint32_t)byte : next++;
        if (cp < 0x80) {
            text[byte][0] = (char)cp;
        } else {
            text[byte][0] = (char)(0xC0 | cp >> 6);
            text[byte][1] = (char)(0x80 | (cp & 0x3F));
        }
        toks[byte] = text[byte];
    }
    ck_assert_uint_eq(next, 0x144);
    vocab v;
    byte_level(&v);
    set(&v, (kv){K_TOKENS, ML_GGUF_STRING, 1, 256, toks, NULL, NULL, NULL, 0});
    drop(&v, K_TYPES);
    set(&v, EMPTY(K_MERGES));
    built bt;
    result o;
    convert_ok(&v, &bt, &o);
    for (uint32_t b = 0; b < 256; b++) {
        ml_mlt_token t = ml_mlt_get_token(o.t, b);
        ck_assert_msg(t.len == 1 && t.bytes[0] == b && t.attr == 0, "byte %u", b);
    }
    ck_assert_uint_eq(ml_mlt_get_header(o.t)->n_merges, 0);
    out_free(&o);
    built_free(&bt);
}
END_TEST

START_TEST(sentencepiece_exact)
{
    vocab v;
    sentencepiece(&v);
    built bt;
    result o;
    convert_ok(&v, &bt, &o);
    static const ml_mlt_token tok[] = {
        T("<unk>", 1), T("<s>", 1), T("</s>", 1), T("A", 2), T(SP, 0), T("a", 0), T("b", 0),
        T("ab", 0), T(SP "a", 0), T(SP "ab", 0), T(SP SP, 3), T("x", 0), T("xa", 0),
        T("ba", 0), T("bb", 0), T("\xc3\xa9", 0), T("\303\251a", 0),
    };
    /* User-defined pieces score 0 and tie with "éa" (-0): longer left
     * first, then the piece's id.  "xa" has none ("x" is UNUSED).  "▁ab"
     * splits as "▁a b" before "▁ ab" (longer left).  "ba" and "bb" tie:
     * by id. */
    static const uint32_t m[] = {
        4, 4, 10,  15, 5, 16,  5, 6, 7,  4, 5, 8,  8, 6, 9,  4, 7, 9,  6, 5, 13,  6, 6, 14,
    };
    /* The USER_DEFINED "▁▁" is attr 3, which sets flag user_tokens. */
    expect_mlt(&o, 1, ML_MLT_ADD_BOS | ML_MLT_USER_TOKENS, 1, 2, tok, NELEM(tok), m, NELEM(m) / 3);
    ck_assert_str_eq(o.info.model, "llama");
    ck_assert_str_eq(o.info.pre, "default");
    ck_assert_uint_eq(o.info.n_added, 4);
    ck_assert_uint_eq(o.info.n_bytes, 1);
    ck_assert_uint_eq(o.info.n_respaced, 1);
    out_free(&o);
    built_free(&bt);
}
END_TEST

/* Integer scores (llama.cpp accepts them), and a duplicate text: the first
 * id is the one merges use. */
START_TEST(integer_scores_and_duplicates)
{
    static const char *const toks[] = {"a", "b", "ab", "ab", "c"};
    static const int64_t types[] = {1, 1, 1, 1, 1};
    static const int64_t scores[] = {-10, -11, -1, -2, -12};
    vocab v;
    sentencepiece(&v);
    set(&v, STRS(K_TOKENS, toks));
    set(&v, INTS(K_TYPES, ML_GGUF_I32, types));
    set(&v, INTS(K_SCORES, ML_GGUF_I32, scores));
    drop(&v, K_BOS);
    drop(&v, K_EOS);
    built bt;
    result o;
    convert_ok(&v, &bt, &o);
    static const ml_mlt_token tok[] = {T("a", 0), T("b", 0), T("ab", 0), T("ab", 0), T("c", 0)};
    static const uint32_t m[] = {0, 1, 2};
    expect_mlt(&o, 1, 0, ML_TOKEN_NONE, ML_TOKEN_NONE, tok, 5, m, 1);
    out_free(&o);
    built_free(&bt);

    static const char *const btoks[] = {"a", "b", "ab", "ab"};
    static const char *const bmerges[] = {"a b"};
    byte_level(&v);
    set(&v, STRS(K_TOKENS, btoks));
    drop(&v, K_TYPES);
    set(&v, STRS(K_MERGES, bmerges));
    set(&v, INT(K_BOS, ML_GGUF_U32, 3));
    set(&v, INT(K_EOS, ML_GGUF_U32, 3));
    convert_ok(&v, &bt, &o);
    uint32_t l, r, mm;
    ml_mlt_get_merge(o.t, 0, &l, &r, &mm);
    ck_assert_uint_eq(mm, 2);
    out_free(&o);
    built_free(&bt);
}
END_TEST

/* ---------------------------------------------------------------------------
 * Flags, BOS and EOS
 * ------------------------------------------------------------------------- */

enum { KEEP = -2, ABSENT = -1 };

typedef struct flag_case {
    int spm;               /* base: sentencepiece() or byte_level() */
    const char *arch, *pre;
    int add_bos, space;    /* KEEP, ABSENT, 0 or 1 */
    int bos;               /* KEEP, ABSENT, 1: i32 -1, 2: u32 0xFFFFFFFF, 3: i64 0 */
    uint32_t flags;
    ml_token want_bos;
} flag_case;

static const flag_case flag_cases[] = {
    {1, NULL, NULL, KEEP, KEEP, KEEP, 1025, 1},
    {1, NULL, NULL, 0, KEEP, KEEP, 1024, 1},
    {1, NULL, NULL, KEEP, 0, KEEP, 1153, 1},
    {1, NULL, NULL, KEEP, 1, KEEP, 1025, 1},
    {1, "gemma3", NULL, KEEP, KEEP, KEEP, 1153, 1},
    {1, "gemma", NULL, KEEP, KEEP, KEEP, 1153, 1},
    {1, "gemma3", NULL, KEEP, 1, KEEP, 1025, 1},
    {1, NULL, "whatever", KEEP, KEEP, KEEP, 1025, 1},
    {1, NULL, NULL, KEEP, KEEP, ABSENT, 1024, ML_TOKEN_NONE},
    {1, NULL, NULL, KEEP, KEEP, 1, 1024, ML_TOKEN_NONE},
    {1, NULL, NULL, KEEP, KEEP, 2, 1024, ML_TOKEN_NONE},
    {1, NULL, NULL, KEEP, KEEP, 3, 1025, 0},
    {1, NULL, NULL, 0, KEEP, ABSENT, 1024, ML_TOKEN_NONE},
    {0, NULL, NULL, KEEP, KEEP, KEEP, 32, 5},
    {0, NULL, NULL, 1, KEEP, KEEP, 33, 5},
    {0, NULL, NULL, KEEP, 0, KEEP, 32, 5},
    {0, NULL, "llama-bpe", KEEP, KEEP, KEEP, 3, 5},
    {0, NULL, "llama3", KEEP, KEEP, KEEP, 3, 5},
    {0, NULL, "llama-v3", KEEP, KEEP, KEEP, 3, 5},
    {0, NULL, "llama-bpe", 0, KEEP, KEEP, 2, 5},
    {0, NULL, "llama-bpe", KEEP, KEEP, ABSENT, 2, ML_TOKEN_NONE},
    {0, NULL, "smaug-bpe", KEEP, KEEP, KEEP, 2, 5},
    {0, NULL, "qwen2", KEEP, KEEP, KEEP, 24, 5},
    {0, "qwen35", "qwen2", KEEP, KEEP, KEEP, 272, 5},
    {0, "qwen35moe", "qwen2", KEEP, KEEP, KEEP, 272, 5},
    {0, "qwen3", "qwen35", KEEP, KEEP, KEEP, 272, 5},
    {0, NULL, "smollm", KEEP, KEEP, KEEP, 96, 5},
};

static void apply_flag_case(vocab *v, const flag_case *c)
{
    if (c->spm)
        sentencepiece(v);
    else
        byte_level(v);
    if (c->arch)
        set(v, STR(K_ARCH, c->arch));
    if (c->pre)
        set(v, STR(K_PRE, c->pre));
    if (c->add_bos >= 0)
        set(v, BOOL(K_ADD_BOS, c->add_bos));
    if (c->space >= 0)
        set(v, BOOL(K_SPACE, c->space));
    if (c->bos == ABSENT)
        drop(v, K_BOS);
    else if (c->bos == 1)
        set(v, INT(K_BOS, ML_GGUF_I32, -1));
    else if (c->bos == 2)
        set(v, INT(K_BOS, ML_GGUF_U32, 0xFFFFFFFF));
    else if (c->bos == 3)
        set(v, INT(K_BOS, ML_GGUF_I64, 0));
}

START_TEST(flags_and_specials)
{
    const flag_case *c = &flag_cases[_i];
    vocab v;
    apply_flag_case(&v, c);
    built bt;
    result o;
    convert_ok(&v, &bt, &o);
    const ml_mlt_header *h = ml_mlt_get_header(o.t);
    ck_assert_msg(h->flags == c->flags, "case %d: flags %u, expected %u", _i, h->flags, c->flags);
    ck_assert_int_eq(h->bos, c->want_bos);
    ck_assert_int_eq(h->eos, c->spm ? 2 : 5);
    ck_assert_uint_eq(h->kind, c->spm ? 1 : 2);
    out_free(&o);
    built_free(&bt);
}
END_TEST

/* ---------------------------------------------------------------------------
 * Hostile metadata
 * ------------------------------------------------------------------------- */

static const char *const t_empty[] = {"a", "b", "", G_SP, G_SP "ab", "<|end|>", "\xc4\x8a",
                                      "\xc3\x83\xc2\xa9", "[PAD8]"};
static const char *const t_space[] = {"a", " b", "ab", G_SP, G_SP "ab", "<|end|>", "\xc4\x8a",
                                      "\xc3\x83\xc2\xa9", "[PAD8]"};
static const char *const t_utf8[] = {"a", "b", "ab", G_SP, G_SP "ab", "<|end|>", "\xc4",
                                     "\xc3\x83\xc2\xa9", "[PAD8]"};
static const char *const t_raw[] = {"a", "b", "ab", G_SP, G_SP "ab", G_SP G_SP, "\xc4\x8a",
                                    "\xc3\x83\xc2\xa9", "[PAD8]"};
static const char *const m_raw[] = {"a b", G_SP " " G_SP};
static const char *const m_nospace[] = {"a b", "ab"};
static const char *const m_lead[] = {" ab"};
static const char *const m_unknown[] = {"a b", "a c"};
static const char *const m_merged[] = {"b a"};
static const int64_t ty_short[] = {1, 1, 1, 1, 1, 3, 1, 1};
static const int64_t ty_seven[] = {1, 1, 1, 7, 1, 3, 1, 1, 5};
static const int64_t ty_byte[] = {1, 1, 1, 1, 1, 3, 1, 6, 5};
static const char *const ty_str[] = {"1", "1", "1", "1", "1", "3", "1", "1", "5"};
static const int64_t m_ints[] = {1, 2};
static const double sc_short[] = {0, 0, 0};
static const double sc_equal[] = {0, 0, 0, 0, -1000, -1000, -1000, -1000, -1000, -1000, -1000,
                                  -1000, -1000, -1000, -1000, -1000, -1000};
static const char *const t_badbyte[] = {
    "<unk>", "<s>", "</s>", "<0xG1>", SP, "a", "b", "ab", SP "a", SP "ab", "  ", "x", "xa",
    "ba", "bb", "\xc3\xa9", "\303\251a"};
static const char *const t_shortbyte[] = {
    "<unk>", "<s>", "</s>", "<0x4>", SP, "a", "b", "ab", SP "a", SP "ab", "  ", "x", "xa",
    "ba", "bb", "\xc3\xa9", "\303\251a"};
static const char *const t_badspm[] = {
    "<unk>", "<s>", "</s>", "<0x41>", SP, "\xc3", "b", "ab", SP "a", SP "ab", "  ", "x", "xa",
    "ba", "bb", "\xc3\xa9", "\303\251a"};

static void h_no_model(vocab *v) { drop(v, K_MODEL); }
static void h_bert(vocab *v) { set(v, STR(K_MODEL, "bert")); }
static void h_model_u32(vocab *v) { set(v, INT(K_MODEL, ML_GGUF_U32, 1)); }
static void h_arch_u32(vocab *v) { set(v, INT(K_ARCH, ML_GGUF_U32, 1)); }
static void h_no_tokens(vocab *v) { drop(v, K_TOKENS); }
static void h_tokens_i32(vocab *v) { set(v, INTS(K_TOKENS, ML_GGUF_I32, bl_types)); }
static void h_tokens_str(vocab *v) { set(v, STR(K_TOKENS, "a")); }
static void h_tokens_none(vocab *v) { set(v, EMPTY(K_TOKENS)); }
static void h_token_empty(vocab *v) { set(v, STRS(K_TOKENS, t_empty)); }
static void h_types_short(vocab *v) { set(v, INTS(K_TYPES, ML_GGUF_I32, ty_short)); }
static void h_types_seven(vocab *v) { set(v, INTS(K_TYPES, ML_GGUF_I32, ty_seven)); }
static void h_types_str(vocab *v) { set(v, STRS(K_TYPES, ty_str)); }
static void h_bos_range(vocab *v) { set(v, INT(K_BOS, ML_GGUF_U32, 9)); }
static void h_eos_neg(vocab *v) { set(v, INT(K_EOS, ML_GGUF_I32, -2)); }
static void h_bos_str(vocab *v) { set(v, STR(K_BOS, "5")); }
static void h_add_bos_nobos(vocab *v) { drop(v, K_BOS); set(v, BOOL(K_ADD_BOS, 1)); }
static void h_add_bos_u8(vocab *v) { set(v, INT(K_ADD_BOS, ML_GGUF_U8, 1)); }
static void h_add_bos_two(vocab *v) { set(v, BOOL(K_ADD_BOS, 2)); }
static void h_no_pre(vocab *v) { drop(v, K_PRE); }
static void h_pre_tekken(vocab *v) { set(v, STR(K_PRE, "tekken")); }
static void h_pre_default(vocab *v) { set(v, STR(K_PRE, "default")); }
static void h_space_bl(vocab *v) { set(v, BOOL(K_SPACE, 1)); }
static void h_no_merges(vocab *v) { drop(v, K_MERGES); }
static void h_merges_u32(vocab *v) { set(v, INTS(K_MERGES, ML_GGUF_U32, m_ints)); }
static void h_merge_nospace(vocab *v) { set(v, STRS(K_MERGES, m_nospace)); }
static void h_merge_lead(vocab *v) { set(v, STRS(K_MERGES, m_lead)); }
static void h_merge_unknown(vocab *v) { set(v, STRS(K_MERGES, m_unknown)); }
static void h_merge_merged(vocab *v) { set(v, STRS(K_MERGES, m_merged)); }
static void h_merge_raw(vocab *v) { set(v, STRS(K_TOKENS, t_raw)); set(v, STRS(K_MERGES, m_raw)); }
static void h_token_space(vocab *v) { set(v, STRS(K_TOKENS, t_space)); }
static void h_token_utf8(vocab *v) { set(v, STRS(K_TOKENS, t_utf8)); }
static void h_byte_in_bl(vocab *v) { set(v, INTS(K_TYPES, ML_GGUF_I32, ty_byte)); }
static void h_no_scores(vocab *v) { drop(v, K_SCORES); }
static void h_scores_short(vocab *v) { set(v, FLOATS(K_SCORES, ML_GGUF_F32, sc_short)); }
static void h_scores_str(vocab *v) { set(v, STRS(K_SCORES, spm_tokens)); }
static void h_scores_equal(vocab *v) { set(v, FLOATS(K_SCORES, ML_GGUF_F32, sc_equal)); }
static void h_bad_byte(vocab *v) { set(v, STRS(K_TOKENS, t_badbyte)); }
static void h_short_byte(vocab *v) { set(v, STRS(K_TOKENS, t_shortbyte)); }
static void h_bad_utf8_spm(vocab *v) { set(v, STRS(K_TOKENS, t_badspm)); }
static void h_space_str(vocab *v) { set(v, STR(K_SPACE, "no")); }

static double nan_scores[NELEM(spm_scores)];
static void h_scores_nan(vocab *v)
{
    memcpy(nan_scores, spm_scores, sizeof nan_scores);
    nan_scores[7] = NAN;
    set(v, FLOATS(K_SCORES, ML_GGUF_F32, nan_scores));
}

typedef struct hostile {
    const char *what;
    int spm;
    void (*mutate)(vocab *v);
    ml_status status;
    const char *field;
    const char *at_key;  /* offset: this key's value, NULL for -1 */
    int elem;            /* -1: the value itself, else that element */
} hostile;

static const hostile hostiles[] = {
    {"no model", 0, h_no_model, ML_E_FORMAT, K_MODEL, NULL, -1},
    {"bert", 0, h_bert, ML_E_UNSUPPORTED, K_MODEL, K_MODEL, -1},
    {"model u32", 0, h_model_u32, ML_E_FORMAT, K_MODEL, K_MODEL, -1},
    {"arch u32", 1, h_arch_u32, ML_E_FORMAT, K_ARCH, K_ARCH, -1},
    {"no tokens", 0, h_no_tokens, ML_E_FORMAT, K_TOKENS, NULL, -1},
    {"tokens i32", 0, h_tokens_i32, ML_E_FORMAT, K_TOKENS, K_TOKENS, -1},
    {"tokens scalar", 0, h_tokens_str, ML_E_FORMAT, K_TOKENS, K_TOKENS, -1},
    {"no token", 0, h_tokens_none, ML_E_FORMAT, K_TOKENS, K_TOKENS, -1},
    {"empty token", 0, h_token_empty, ML_E_FORMAT, K_TOKENS, K_TOKENS, 2},
    {"types short", 0, h_types_short, ML_E_FORMAT, K_TYPES, K_TYPES, -1},
    {"type 7", 0, h_types_seven, ML_E_FORMAT, K_TYPES, K_TYPES, 3},
    {"types strings", 0, h_types_str, ML_E_FORMAT, K_TYPES, K_TYPES, 0},
    {"bos range", 0, h_bos_range, ML_E_FORMAT, K_BOS, K_BOS, -1},
    {"eos -2", 1, h_eos_neg, ML_E_FORMAT, K_EOS, K_EOS, -1},
    {"bos string", 0, h_bos_str, ML_E_FORMAT, K_BOS, K_BOS, -1},
    {"add_bos without bos", 1, h_add_bos_nobos, ML_E_FORMAT, K_ADD_BOS, K_ADD_BOS, -1},
    {"add_bos u8", 0, h_add_bos_u8, ML_E_FORMAT, K_ADD_BOS, K_ADD_BOS, -1},
    {"add_bos 2", 0, h_add_bos_two, ML_E_FORMAT, K_ADD_BOS, K_ADD_BOS, -1},
    {"no pre (llama.cpp guesses \"default\")", 0, h_no_pre, ML_E_UNSUPPORTED, K_PRE, NULL, -1},
    {"pre tekken", 0, h_pre_tekken, ML_E_UNSUPPORTED, K_PRE, K_PRE, -1},
    {"pre default", 0, h_pre_default, ML_E_UNSUPPORTED, K_PRE, K_PRE, -1},
    {"byte-level space prefix", 0, h_space_bl, ML_E_UNSUPPORTED, K_SPACE, K_SPACE, -1},
    {"no merges", 0, h_no_merges, ML_E_FORMAT, K_MERGES, NULL, -1},
    {"merges u32", 0, h_merges_u32, ML_E_FORMAT, K_MERGES, K_MERGES, -1},
    {"merge without space", 0, h_merge_nospace, ML_E_FORMAT, K_MERGES, K_MERGES, 1},
    {"merge with a leading space only", 0, h_merge_lead, ML_E_FORMAT, K_MERGES, K_MERGES, 0},
    {"merge of an unknown piece", 0, h_merge_unknown, ML_E_FORMAT, K_MERGES, K_MERGES, 1},
    {"merge to an unknown piece", 0, h_merge_merged, ML_E_FORMAT, K_MERGES, K_MERGES, 0},
    {"merge to a raw token", 0, h_merge_raw, ML_E_FORMAT, K_MERGES, K_MERGES, 1},
    {"real space", 0, h_token_space, ML_E_FORMAT, K_TOKENS, K_TOKENS, 1},
    {"bad UTF-8", 0, h_token_utf8, ML_E_FORMAT, K_TOKENS, K_TOKENS, 6},
    {"byte token in gpt2", 0, h_byte_in_bl, ML_E_FORMAT, K_TOKENS, K_TOKENS, 7},
    {"no scores", 1, h_no_scores, ML_E_FORMAT, K_SCORES, NULL, -1},
    {"scores short", 1, h_scores_short, ML_E_FORMAT, K_SCORES, K_SCORES, -1},
    {"scores strings", 1, h_scores_str, ML_E_FORMAT, K_SCORES, K_SCORES, -1},
    {"NaN score", 1, h_scores_nan, ML_E_FORMAT, K_SCORES, K_SCORES, 7},
    {"equal scores", 1, h_scores_equal, ML_E_UNSUPPORTED, K_SCORES, K_SCORES, -1},
    {"byte token <0xG1>", 1, h_bad_byte, ML_E_FORMAT, K_TOKENS, K_TOKENS, 3},
    {"byte token <0x4>", 1, h_short_byte, ML_E_FORMAT, K_TOKENS, K_TOKENS, 3},
    {"bad UTF-8 piece", 1, h_bad_utf8_spm, ML_E_FORMAT, K_TOKENS, K_TOKENS, 5},
    {"space prefix string", 1, h_space_str, ML_E_FORMAT, K_SPACE, K_SPACE, -1},
};

START_TEST(hostile_metadata)
{
    const hostile *c = &hostiles[_i];
    vocab v;
    if (c->spm)
        sentencepiece(&v);
    else
        byte_level(&v);
    c->mutate(&v);
    built bt;
    build(&v, &bt);
    int64_t off = -1;
    if (c->at_key) {
        size_t k = find_kv(&v, c->at_key);
        ck_assert_uint_ne(k, SIZE_MAX);
        off = (int64_t)(c->elem < 0 ? bt.val_at[k] : bt.elem_at[k][c->elem]);
    }
    result o;
    ml_error e;
    tu_err_reset(&e);
    TU_CHECK_ERR(c->what, convert(bt.g, &o, &e), e, c->status, c->field, off);
    built_free(&bt);
    tu_mem_free(&o.mem);
}
END_TEST

/* ---------------------------------------------------------------------------
 * The chat section: end-of-generation ids and templates
 * ------------------------------------------------------------------------- */

static const char *const chat_tokens[] = {
    "a", "b", "ab", G_SP, G_SP "ab", "<|end|>", "<|return|>", "<|call|>", "</s>",
    "<|im_end|>", "<|fim_pad|>", "<PAD>", "<|tool_response>", "<|eom_id|>", "c",
};

/* The first n_tokens of chat_tokens, EOS <|im_end|> (9), every type NORMAL. */
static void chat_vocab(vocab *v, uint32_t n_tokens)
{
    byte_level(v);
    drop(v, K_TYPES);
    set(v, (kv){K_TOKENS, ML_GGUF_STRING, 1, n_tokens, chat_tokens, NULL, NULL, NULL, 0});
    set(v, INT(K_EOS, ML_GGUF_U32, 9));
}

/* The ids of t's end-of-generation set, as "6 7 9". */
static void eog_string(const ml_mlt *t, char *buf, size_t n)
{
    size_t w = 0;
    buf[0] = 0;
    for (uint32_t i = 0; i < ml_mlt_n_eog(t) && w < n; i++)
        w += (size_t)snprintf(buf + w, n - w, "%s%u", i ? " " : "", ml_mlt_eog(t, i));
}

typedef struct chat_case {
    const char *what;
    uint32_t n_tokens;
    int64_t eot, eom, fim_pad; /* key values, -2: absent */
    const char *eog;
} chat_case;

static const chat_case chat_cases[] = {
    /* <|end|> is no end beside <|return|> and <|call|>; </s> none beside <|tool_response>;
     * <|eom_id|> and the fill-in-middle pad texts are ends */
    {"every marker", 15, -2, -2, -2, "6 7 9 10 11 12 13"},
    {"<|end|> is an end without <|return|> and <|call|>", 6, -2, -2, -2, "5 9"},
    {"no <|tool_response>: </s> is an end", 12, -2, -2, -2, "6 7 8 9 10 11"},
    {"EOT and EOM keys add their ids", 6, 1, 0, -2, "0 1 5 9"},
    {"a pad key replaces the pad texts", 15, -2, -2, 14, "6 7 9 12 13 14"},
    {"a key of -1 is none", 6, -1, 0xFFFFFFFFll, -1, "5 9"},
};

START_TEST(chat_ids)
{
    const chat_case *c = &chat_cases[_i];
    vocab v;
    /* n_tokens 6: the first six, then plain tokens up to <|im_end|> (9) */
    static const char *const six[] = {"a", "b", "ab", G_SP, G_SP "ab", "<|end|>", "x", "y",
                                      "z", "<|im_end|>"};
    chat_vocab(&v, c->n_tokens == 6 ? 10 : c->n_tokens);
    if (c->n_tokens == 6)
        set(&v, STRS(K_TOKENS, six));
    if (c->eot != -2)
        set(&v, INT("tokenizer.ggml.eot_token_id", ML_GGUF_I64, c->eot));
    if (c->eom != -2)
        set(&v, INT("tokenizer.ggml.eom_token_id", ML_GGUF_I64, c->eom));
    if (c->fim_pad != -2)
        set(&v, INT("tokenizer.ggml.fim_pad_token_id", ML_GGUF_I64, c->fim_pad));
    built bt;
    result o;
    convert_ok(&v, &bt, &o);
    char got[128];
    eog_string(o.t, got, sizeof got);
    ck_assert_msg(strcmp(got, c->eog) == 0, "%s: \"%s\", expected \"%s\"", c->what, got, c->eog);
    ck_assert_uint_eq(ml_mlt_get_header(o.t)->flags & ML_MLT_CHAT,
                      strcmp(c->eog, "9") ? ML_MLT_CHAT : 0);
    ck_assert_uint_eq(o.info.n_eog, ml_mlt_n_eog(o.t));
    built_free(&bt);
    out_free(&o);
}
END_TEST

START_TEST(chat_templates)
{
    vocab v;
    byte_level(&v);
    built bt;
    result o;
    /* EOS alone and no template: no section, the bytes of before */
    convert_ok(&v, &bt, &o);
    ck_assert_uint_eq(ml_mlt_get_header(o.t)->flags & ML_MLT_CHAT, 0);
    ck_assert_uint_eq(o.info.n_templates, 0);
    built_free(&bt);
    out_free(&o);
    set(&v, STR("tokenizer.chat_template.tool_use", "{{ tools | tojson }}"));
    set(&v, STR("tokenizer.chat_template", "{% for m in messages %}{{ m.content }}{% endfor %}"));
    set(&v, STR("tokenizer.chat_templates", "ignored"));
    convert_ok(&v, &bt, &o);
    ck_assert_uint_eq(ml_mlt_n_templates(o.t), 2);
    ck_assert_uint_eq(o.info.n_templates, 2);
    ml_mlt_template k;
    ck_assert_int_eq(ml_mlt_find_template(o.t, "tool_use", &k), 1);
    ck_assert_uint_eq(k.len, 20);
    ck_assert_int_eq(memcmp(k.text, "{{ tools | tojson }}", 20), 0);
    ck_assert_int_eq(ml_mlt_find_template(o.t, "default", &k), 1);
    ck_assert_int_eq(memcmp(k.text, "{% for m", 8), 0);
    /* the file's order: tool_use came first */
    ck_assert_int_eq(memcmp(ml_mlt_get_template(o.t, 0).name, "tool_use", 8), 0);
    char ids[32];
    eog_string(o.t, ids, sizeof ids);
    ck_assert_str_eq(ids, "5");
    built_free(&bt);
    out_free(&o);
}
END_TEST

typedef struct chat_bad {
    const char *what, *key, *value;
    ml_status status;
} chat_bad;

static const chat_bad chat_bads[] = {
    {"a name with a space", "tokenizer.chat_template.a b", "x", ML_E_UNSUPPORTED},
    {"a name of 65 bytes",
     "tokenizer.chat_template.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "x",
     ML_E_UNSUPPORTED},
    {"an empty template", "tokenizer.chat_template", "", ML_E_UNSUPPORTED},
    {"two templates called default", "tokenizer.chat_template.default", "x", ML_E_UNSUPPORTED},
};

START_TEST(chat_refusals)
{
    const chat_bad *c = &chat_bads[_i];
    vocab v;
    byte_level(&v);
    set(&v, STR("tokenizer.chat_template", "t"));
    set(&v, STR(c->key, c->value));
    built bt;
    build(&v, &bt);
    size_t k = find_kv(&v, c->key);
    result o;
    ml_error e;
    tu_err_reset(&e);
    ml_status s = convert(bt.g, &o, &e);
    ck_assert_msg(s == c->status, "%s: %s (%s)", c->what, ml_status_name(s), e.msg);
    ck_assert_int_eq(strncmp(e.field, c->key, sizeof e.field - 1), 0); /* (cut to fit) */
    /* the value's offset, or the key's for a bad name */
    ck_assert_msg(e.offset == (int64_t)bt.val_at[k] || (e.offset > 0 && e.offset < (int64_t)bt.val_at[k]),
                  "%s: offset %lld", c->what, (long long)e.offset);
    built_free(&bt);
    tu_mem_free(&o.mem);
}
END_TEST

START_TEST(chat_id_out_of_range)
{
    vocab v;
    byte_level(&v);
    set(&v, INT("tokenizer.ggml.eot_token_id", ML_GGUF_U32, NELEM(bl_tokens)));
    built bt;
    build(&v, &bt);
    result o;
    ml_error e;
    tu_err_reset(&e);
    TU_CHECK_ERR("EOT id = n_vocab", convert(bt.g, &o, &e), e, ML_E_FORMAT,
                 "tokenizer.ggml.eot_token_id",
                 (int64_t)bt.val_at[find_kv(&v, "tokenizer.ggml.eot_token_id")]);
    built_free(&bt);
    tu_mem_free(&o.mem);
}
END_TEST

/* ---------------------------------------------------------------------------
 * Arguments and sinks
 * ------------------------------------------------------------------------- */

START_TEST(arguments_and_sinks)
{
    vocab v;
    sentencepiece(&v);
    built bt;
    build(&v, &bt);
    ml_error e;
    ml_mlt_convert_info info;
    tu_err_reset(&e);
    TU_CHECK_ERR("NULL gguf", ml_mlt_from_gguf(NULL, tu_mem_sink, NULL, &e), e, ML_E_INVAL, "",
                 -1);
    tu_err_reset(&e);
    TU_CHECK_ERR("NULL sink", ml_mlt_from_gguf(bt.g, NULL, NULL, &e), e, ML_E_INVAL, "", -1);
    /* No sink in _ex: everything is checked, the info is filled. */
    memset(&info, 0, sizeof info);
    ck_assert_int_eq(ml_mlt_from_gguf_ex(bt.g, NULL, NULL, &info, &e), ML_OK);
    ck_assert_uint_eq(info.header.n_vocab, NELEM(spm_tokens));
    ck_assert_uint_eq(info.header.n_merges, 8);
    ck_assert_mem_eq(info.header.magic, "MLT1", 4);
    /* A failing sink: its status, and nothing but its write attempts. */
    tu_mem m;
    tu_mem_init(&m);
    m.fail_at = 0;
    tu_err_reset(&e);
    ck_assert_int_eq(ml_mlt_from_gguf(bt.g, tu_mem_sink, &m, &e), ML_E_IO);
    ck_assert_int_eq(e.code, ML_E_IO);
    ck_assert_uint_eq(m.len, 0);
    tu_mem_free(&m);
    /* The plain call writes what _ex writes. */
    tu_mem a, b;
    tu_mem_init(&a);
    tu_mem_init(&b);
    ck_assert_int_eq(ml_mlt_from_gguf(bt.g, tu_mem_sink, &a, &e), ML_OK);
    ck_assert_int_eq(ml_mlt_from_gguf_ex(bt.g, tu_mem_sink, &b, NULL, &e), ML_OK);
    ck_assert_uint_eq(a.len, b.len);
    ck_assert_mem_eq(a.p, b.p, a.len);
    tu_mem_free(&a);
    tu_mem_free(&b);
    built_free(&bt);
}
END_TEST

Suite *suite_convert_tok(void)
{
    Suite *s = suite_create("convert_tok");
    TCase *tc = tcase_create("vocabularies");
    tcase_add_loop_test(tc, committed_vocabularies, 0, (int)NELEM(fixtures));
    suite_add_tcase(s, tc);
    tc = tcase_create("rules");
    tcase_add_test(tc, byte_level_exact);
    tcase_add_test(tc, gpt2_byte_map);
    tcase_add_test(tc, sentencepiece_exact);
    tcase_add_test(tc, integer_scores_and_duplicates);
    tcase_add_loop_test(tc, flags_and_specials, 0, (int)NELEM(flag_cases));
    tcase_add_loop_test(tc, hostile_metadata, 0, (int)NELEM(hostiles));
    tcase_add_test(tc, arguments_and_sinks);
    tcase_add_loop_test(tc, chat_ids, 0, (int)NELEM(chat_cases));
    tcase_add_test(tc, chat_templates);
    tcase_add_loop_test(tc, chat_refusals, 0, (int)NELEM(chat_bads));
    tcase_add_test(tc, chat_id_out_of_range);
    suite_add_tcase(s, tc);
    return s;
}
