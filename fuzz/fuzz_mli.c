/* fuzz_mli.c - the .mli reader (ml_mli_open_memory and its accessors),
 * checked against a small fixed model: a 2-layer llama GGUF with F32
 * weights built in memory on the first call (dim 32, hidden 64, q_dim 32).
 * When the importance matrix fits it, the model is converted to Q4_0 with
 * the fit rule weighted by it.
 *
 * llama.cpp's importance matrices (GGUF, .dat) go through the same reader
 * and are checked as the .mli they read as (written out and reopened).
 *
 * Oracles besides the sanitizers: the error contract; an open file has
 * exactly the size its header implies and every sum is finite and >= 0;
 * ml_mli_sums gives the bytes at the documented place and refuses a wrong
 * count; ml_mli_check_model and ml_convert_plan_new agree on whether the
 * file fits; the converted model loads. */
#include "fuzz.h"

#include <math.h>

/* ---------------------------------------------------------------------------
 * The fixed model
 * ------------------------------------------------------------------------- */
enum { DIM = 32, HIDDEN = 64, LAYERS = 2, HEADS = 2, KV_HEADS = 1, VOCAB = 32 };

static fuzz_buf g_model;

static void put(fuzz_buf *b, const void *p, size_t n)
{
    fuzz_buf_sink(b, p, n, NULL);
}
static void put_u32(fuzz_buf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, x, 4);
}
static void put_u64(fuzz_buf *b, uint64_t v)
{
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}
static void put_str(fuzz_buf *b, const char *s)
{
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void kv_u32(fuzz_buf *b, const char *k, uint32_t v)
{
    put_str(b, k);
    put_u32(b, 4); /* u32 */
    put_u32(b, v);
}
static void kv_f32(fuzz_buf *b, const char *k, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    put_str(b, k);
    put_u32(b, 6); /* f32 */
    put_u32(b, u);
}

typedef struct tinfo {
    char name[40];
    uint64_t cols, rows; /* ggml dims[0], dims[1] (rows 0: a vector) */
} tinfo;

static size_t model_tensors(tinfo *t)
{
    size_t n = 0;
    static const struct {
        const char *name;
        uint64_t cols, rows;
    } layer[] = {{"attn_norm", DIM, 0},
                 {"attn_q", DIM, DIM},
                 {"attn_k", DIM, DIM / HEADS * KV_HEADS},
                 {"attn_v", DIM, DIM / HEADS * KV_HEADS},
                 {"attn_output", DIM, DIM},
                 {"ffn_norm", DIM, 0},
                 {"ffn_gate", DIM, HIDDEN},
                 {"ffn_up", DIM, HIDDEN},
                 {"ffn_down", HIDDEN, DIM}};
    t[n++] = (tinfo){"token_embd.weight", DIM, VOCAB};
    for (int l = 0; l < LAYERS; l++)
        for (size_t k = 0; k < sizeof layer / sizeof layer[0]; k++, n++) {
            snprintf(t[n].name, sizeof t[n].name, "blk.%d.%s.weight", l, layer[k].name);
            t[n].cols = layer[k].cols, t[n].rows = layer[k].rows;
        }
    t[n++] = (tinfo){"output_norm.weight", DIM, 0};
    t[n++] = (tinfo){"output.weight", DIM, VOCAB};
    return n;
}

/* A little deterministic noise for the weights; norms near 1. */
static float weight(uint32_t *s, int norm)
{
    *s = *s * 1664525u + 1013904223u;
    float u = (float)(*s >> 8) / 16777216.0f - 0.5f;
    return norm ? 1.0f + 0.1f * u : 0.2f * u;
}

static void build_model(void)
{
    tinfo t[2 + 9 * LAYERS + 2];
    size_t nt = model_tensors(t);
    fuzz_buf *b = &g_model;
    put(b, "GGUF", 4);
    put_u32(b, 3);
    put_u64(b, nt);
    put_u64(b, 9);
    put_str(b, "general.architecture");
    put_u32(b, 8); /* string */
    put_str(b, "llama");
    kv_u32(b, "llama.block_count", LAYERS);
    kv_u32(b, "llama.context_length", 64);
    kv_u32(b, "llama.embedding_length", DIM);
    kv_u32(b, "llama.feed_forward_length", HIDDEN);
    kv_u32(b, "llama.attention.head_count", HEADS);
    kv_u32(b, "llama.attention.head_count_kv", KV_HEADS);
    kv_f32(b, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    kv_f32(b, "llama.rope.freq_base", 10000.0f);
    uint64_t off = 0;
    for (size_t i = 0; i < nt; i++) {
        put_str(b, t[i].name);
        put_u32(b, t[i].rows ? 2 : 1);
        put_u64(b, t[i].cols);
        if (t[i].rows)
            put_u64(b, t[i].rows);
        put_u32(b, 0); /* F32 */
        put_u64(b, off);
        off += 4 * t[i].cols * (t[i].rows ? t[i].rows : 1);
        off = (off + 31) & ~(uint64_t)31;
    }
    while (b->n % 32)
        put(b, "", 1);
    size_t data = b->n;
    uint32_t seed = 1;
    off = 0;
    for (size_t i = 0; i < nt; i++) {
        while (b->n < data + off)
            put(b, "", 1);
        uint64_t n = t[i].cols * (t[i].rows ? t[i].rows : 1);
        for (uint64_t k = 0; k < n; k++) {
            float w = weight(&seed, t[i].rows == 0);
            put(b, &w, 4);
        }
        off += 4 * n;
        off = (off + 31) & ~(uint64_t)31;
    }
}

/* ---------------------------------------------------------------------------
 * The harness
 * ------------------------------------------------------------------------- */

/* Every slot of the first, middle and last layers: the sums are the
 * file's doubles at the place the .mli format gives, a wrong count is
 * refused. */
static void check_sums(const ml_mli *m, const uint8_t *data)
{
    const ml_mli_info *i = ml_mli_get_info(m);
    uint32_t q = i->q_dim ? i->q_dim : i->dim;
    uint64_t lens[5] = {i->dim, q, i->dim, i->hidden_dim, i->dim};
    uint64_t per_layer = 2ull * i->dim + q + i->hidden_dim;
    uint64_t most = i->dim > q ? i->dim : q;
    most = most > i->hidden_dim ? most : i->hidden_dim;
    double *buf = malloc(sizeof(double) * (most + 1));
    FUZZ_CHECK(buf != NULL);
    ml_error err;
    uint32_t last = i->n_layers - 1;
    uint32_t layers[3] = {0, last / 2, last};
    for (int li = 0; li < 3; li++) {
        uint64_t at = 0;
        for (int s = 0; s < 5; s++) {
            uint64_t tokens = 0;
            uint64_t start = s == 4 ? (uint64_t)i->n_layers * per_layer
                                    : (uint64_t)layers[li] * per_layer + at;
            fuzz_err_init(&err);
            ml_status st = ml_mli_sums(m, (ml_mli_slot)s, layers[li], buf, (size_t)lens[s],
                                       &tokens, &err);
            fuzz_check_err(st, &err, 0);
            FUZZ_CHECK(st == ML_OK);
            FUZZ_CHECK(memcmp(buf, data + ML_MLI_HEADER_SIZE + 8 * start, 8 * lens[s]) == 0);
            for (uint64_t k = 0; k < lens[s]; k++)
                FUZZ_CHECK(isfinite(buf[k]) && buf[k] >= 0);
            FUZZ_CHECK(tokens == (s == 4 ? i->cls_tokens : i->layer_tokens));
            at += lens[s];
            fuzz_err_init(&err);
            st = ml_mli_sums(m, (ml_mli_slot)s, layers[li], buf, (size_t)lens[s] + 1, NULL, &err);
            fuzz_check_err(st, &err, 0);
            FUZZ_CHECK(st == ML_E_INVAL);
        }
    }
    fuzz_err_init(&err);
    ml_status st = ml_mli_sums(m, ML_MLI_ATTN_IN, i->n_layers, buf, i->dim, NULL, &err);
    fuzz_check_err(st, &err, 0);
    FUZZ_CHECK(st == ML_E_INVAL);
    free(buf);
}

/* The fixed model converted to Q4_0 with these importances. */
static void convert_with(const ml_mli *m, ml_status fits)
{
    ml_gguf *g = NULL;
    FUZZ_CHECK(ml_gguf_open_memory(g_model.p, g_model.n, &g, NULL) == ML_OK);
    ml_convert_opts o;
    ml_convert_opts_init(&o);
    o.wtype = ML_WTYPE_Q4_0;
    o.q4_rule = ML_Q4_FIT;
    o.q8_mask = 0;
    o.imatrix = m;
    ml_convert_plan *p = NULL;
    ml_error err;
    fuzz_err_init(&err);
    ml_status st = ml_convert_plan_new(g, &o, &p, &err);
    fuzz_check_err(st, &err, 0);
    /* A matrix summed over no tokens says nothing: refused as a bad option. */
    ml_status want = fits ? ML_E_MISMATCH : ml_mli_get_info(m)->layer_tokens ? ML_OK : ML_E_INVAL;
    if (st != want)
        fprintf(stderr, "plan: %s, expected %s: %s\n", ml_status_name(st), ml_status_name(want),
                err.msg);
    FUZZ_CHECK(st == want);
    if (p) {
        fuzz_buf out = {0};
        fuzz_err_init(&err);
        st = ml_convert_write(p, fuzz_buf_sink, &out, NULL, &err);
        fuzz_check_err(st, &err, 0);
        FUZZ_CHECK(st == ML_OK);
        ml_mlb *mlb = NULL;
        fuzz_err_init(&err);
        st = ml_mlb_open_memory(out.p, out.n, &mlb, &err);
        fuzz_check_err(st, &err, 0);
        FUZZ_CHECK(st == ML_OK);
        ml_mlb_close(mlb);
        free(out.p);
    }
    ml_convert_plan_free(p);
    ml_gguf_close(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_model.n)
        build_model();
    ml_mli *m = NULL;
    ml_error err;
    fuzz_err_init(&err);
    ml_status st = ml_mli_open_memory(data, size, &m, &err);
    fuzz_check_err(st, &err, size);
    FUZZ_CHECK((st == ML_OK) == (m != NULL));
    if (!m)
        return 0;
    const ml_mli_info *i = ml_mli_get_info(m);
    FUZZ_CHECK(i->version == 1 && i->n_layers >= 1 && i->dim >= 1 && i->hidden_dim >= 1);
    uint32_t q = i->q_dim ? i->q_dim : i->dim;
    /* llama.cpp's files (GGUF, .dat) are checked through the .mli they
     * read as: written out, it must open and hold the same sums */
    fuzz_buf as_mli = {0};
    if (size < 4 || memcmp(data, "MLI1", 4) != 0) {
        FUZZ_CHECK(ml_mli_write(m, fuzz_buf_sink, &as_mli, &err) == ML_OK);
        ml_mli *again = NULL;
        FUZZ_CHECK(ml_mli_open_memory(as_mli.p, as_mli.n, &again, &err) == ML_OK);
        ml_mli_close(again);
        data = as_mli.p, size = as_mli.n;
    }
    FUZZ_CHECK(size == ML_MLI_HEADER_SIZE + 8 * ((uint64_t)i->n_layers *
                                                 (2ull * i->dim + q + i->hidden_dim) + i->dim));
    check_sums(m, data);
    ml_mlb_header h;
    ml_mlb_header_init(&h);
    h.dim = DIM, h.n_layers = LAYERS, h.n_heads = HEADS, h.n_kv_heads = KV_HEADS;
    h.hidden_dim = HIDDEN, h.vocab = VOCAB, h.max_seq = 64, h.rope_theta = 10000.0f;
    h.norm_eps = 1e-5f, h.wtype = ML_WTYPE_Q4_0;
    fuzz_err_init(&err);
    ml_status fits = ml_mli_check_model(m, &h, &err);
    fuzz_check_err(fits, &err, 0);
    FUZZ_CHECK(fits == ML_OK || fits == ML_E_MISMATCH);
    FUZZ_CHECK((fits == ML_OK) == (i->n_layers == LAYERS && i->dim == DIM &&
                                   i->hidden_dim == HIDDEN && q == DIM));
    convert_with(m, fits);
    ml_mli_close(m);
    free(as_mli.p);
    return 0;
}
