/* check_runtime_blk.c - the forward pass with block-type matrices (ggml's
 * layouts, kernels.h's rule 5).  The loader for such files is another
 * piece of work, so the matrices are swapped in memory: the llama-q8
 * fixture's model is bound, and its matrices are replaced by the same
 * weights requantized here to each type (simple round-to-nearest
 * quantizers, enough to give ggml's layouts their meaning).  The logits
 * must follow those of F32 weights of the same values (the Q8_0 ones, or
 * ggml's dequantization of the blocks), and keep the runtime's promises: the same bits
 * for any batch, thread count and kernel variant.  The fixture's rows
 * are 64 and 96 long; the 256-element types run on a random model of
 * rows 256 and 512 long (ml_mlb_write_random), their matrices random
 * blocks, against F32 matrices of ggml's dequantization of them. */
#include "suites.h"
#include "testutil.h"

#include "mlcore.h"

#include "kernels/kernels.h"
#include "runtime/runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIX "tests/fixtures/runtime/"

typedef struct blk_model {
    ml_mlb *mlb;
    ml_model *model;
    ml_token ids[64];
    size_t n;
    uint32_t vocab;
    void *owned[64]; /* the swapped matrices' bytes */
    size_t n_owned;
} blk_model;

static void model_open(blk_model *b)
{
    ml_error err;
    memset(b, 0, sizeof *b);
    ck_assert_msg(ml_mlb_open(FIX "llama-q8.mlb", &b->mlb, &err) == ML_OK, "%s", err.msg);
    ck_assert_msg(ml_model_new(b->mlb, &b->model, &err) == ML_OK, "%s", err.msg);
    b->vocab = ml_mlb_get_header(b->mlb)->vocab;
    FILE *f = fopen(FIX "llama-q8.ids", "r");
    ck_assert_ptr_nonnull(f);
    long v;
    while (b->n < 64 && fscanf(f, "%ld", &v) == 1)
        b->ids[b->n++] = (ml_token)v;
    fclose(f);
    ck_assert_uint_ge(b->n, 8);
}

static void model_close(blk_model *b)
{
    ml_model_free(b->model);
    ml_mlb_close(b->mlb);
    for (size_t i = 0; i < b->n_owned; i++)
        free(b->owned[i]);
}

/* ---- quantizers to ggml's layouts (round to nearest; a test's needs) ---- */

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8);
}

static float amax_of(const float *x, int n)
{
    float a = 0;
    for (int i = 0; i < n; i++)
        a = fabsf(x[i]) > a ? fabsf(x[i]) : a;
    return a;
}

static int clampi(long v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : (int)v;
}

/* Element j of a 32-block goes to byte j % 16, low nibble for j < 16. */
static void put_nibble(uint8_t *qs, int j, int v)
{
    qs[j % 16] |= (uint8_t)(j < 16 ? v : v << 4);
}

static int nearest(const int8_t *levels, float v)
{
    int best = 0;
    for (int k = 1; k < 16; k++)
        if (fabsf((float)levels[k] - v) < fabsf((float)levels[best] - v))
            best = k;
    return best;
}

static const int8_t iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                 1,    13,   25,  38,  53,  69,  89,  113};
static const int8_t mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* One 32-element block of x as type t at out. */
static void quantize_block(ml_type t, const float *x, uint8_t *out)
{
    float lo = x[0], hi = x[0], a = amax_of(x, 32);
    for (int i = 1; i < 32; i++)
        lo = x[i] < lo ? x[i] : lo, hi = x[i] > hi ? x[i] : hi;
    switch (t) {
    case ML_TYPE_Q5_0: {
        const float d = ml_f16_to_f32(ml_f32_to_f16(a / 15.0f));
        put16(out, ml_f32_to_f16(d));
        memset(out + 2, 0, 20);
        for (int j = 0; j < 32; j++) {
            int q = clampi(lroundf(d > 0 ? x[j] / d : 0) + 16, 0, 31);
            out[2 + j / 8] |= (uint8_t)((q >> 4) << (j % 8));
            put_nibble(out + 6, j, q & 15);
        }
        break;
    }
    case ML_TYPE_Q4_1:
    case ML_TYPE_Q5_1: {
        const int top = t == ML_TYPE_Q4_1 ? 15 : 31, qs = t == ML_TYPE_Q4_1 ? 4 : 8;
        const float d = ml_f16_to_f32(ml_f32_to_f16((hi - lo) / (float)top));
        const float m = ml_f16_to_f32(ml_f32_to_f16(lo));
        put16(out, ml_f32_to_f16(d)), put16(out + 2, ml_f32_to_f16(m));
        memset(out + 4, 0, (size_t)(qs - 4 + 16));
        for (int j = 0; j < 32; j++) {
            int q = clampi(lroundf(d > 0 ? (x[j] - m) / d : 0), 0, top);
            if (t == ML_TYPE_Q5_1)
                out[4 + j / 8] |= (uint8_t)((q >> 4) << (j % 8));
            put_nibble(out + qs, j, q & 15);
        }
        break;
    }
    case ML_TYPE_IQ4_NL: {
        const float d = ml_f16_to_f32(ml_f32_to_f16(a / 127.0f));
        put16(out, ml_f32_to_f16(d));
        memset(out + 2, 0, 16);
        for (int j = 0; j < 32; j++)
            put_nibble(out + 2, j, nearest(iq4nl, d > 0 ? x[j] / d : 0));
        break;
    }
    case ML_TYPE_MXFP4: { /* gguf-py's: e = floor(log2(amax)) - 2 + 127 */
        const int e = a > 0 ? clampi((long)floorf(log2f(a)) - 2 + 127, 2, 254) : 0;
        const float d = ldexpf(1.0f, e - 128);
        out[0] = (uint8_t)e;
        memset(out + 1, 0, 16);
        for (int j = 0; j < 32; j++)
            put_nibble(out + 1, j, nearest(mxfp4, x[j] / d));
        break;
    }
    case ML_TYPE_F16:
        for (int j = 0; j < 32; j++)
            put16(out + 2 * j, ml_f32_to_f16(x[j]));
        break;
    case ML_TYPE_BF16:
        for (int j = 0; j < 32; j++) {
            uint32_t u;
            memcpy(&u, &x[j], 4);
            put16(out + 2 * j, (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16));
        }
        break;
    default: /* F32 */
        memcpy(out, x, 32 * sizeof *x);
        break;
    }
}

/* Row r of a Q8_0 matrix (f32 scales, as llama-q8 has) as floats. */
static void q8_row(const ml_mat *w, size_t r, float *x)
{
    const int8_t *q = (const int8_t *)w->q + r * w->cols;
    const float *d = (const float *)w->d.p + r * (w->cols / 32);
    ck_assert(!w->d.f16);
    for (size_t i = 0; i < w->cols; i++)
        x[i] = (float)q[i] * d[i / 32];
}

/* ml_model_new saw the file's Q8_0 matrices only: a context made after a
 * swap must also quantize the activations w's products read (K
 * activations for the 256-element types, kernels.h's rule 6). */
static void note_acts(blk_model *b, const ml_mat *w)
{
    b->model->acts |= (uint8_t)ml__mat_acts(w);
}

/* Replaces *w (Q8_0) by its weights in type t; with `dequantized`, by
 * F32 rows holding what ggml's dequantizer makes of those blocks. */
static void swap_to(blk_model *b, ml_mat *w, ml_type t, int dequantized)
{
    ck_assert_uint_eq(w->type, ML_TYPE_Q8_0);
    const size_t row_bytes = ml__blk_row_bytes(t, w->cols), per = row_bytes / (w->cols / 32);
    ck_assert_uint_gt(row_bytes, 0);
    uint8_t *blocks = malloc(w->rows * row_bytes);
    float *x = malloc(w->cols * sizeof *x);
    ck_assert(blocks && x && b->n_owned < 64);
    for (size_t r = 0; r < w->rows; r++) {
        q8_row(w, r, x);
        for (size_t k = 0; k < w->cols / 32; k++)
            quantize_block(t, x + 32 * k, blocks + r * row_bytes + k * per);
    }
    free(x);
    uint32_t ggml = 0;
    if (dequantized && t != ML_TYPE_F32) {
        ck_assert(ml_type_block(t, NULL, NULL, &ggml));
        float *f = malloc(w->rows * w->cols * sizeof *f);
        ck_assert_ptr_nonnull(f);
        for (size_t r = 0; r < w->rows; r++)
            ck_assert(ml_gguf_dequantize_raw(ggml, blocks + r * row_bytes, w->cols,
                                             f + r * w->cols, NULL) == ML_OK);
        free(blocks);
        blocks = (uint8_t *)f;
        t = ML_TYPE_F32;
    }
    b->owned[b->n_owned++] = blocks;
    *w = (ml_mat){.type = t, .rows = w->rows, .cols = w->cols, .q = blocks,
                  .row_bytes = ml__blk_row_bytes(t, w->cols)};
    note_acts(b, w);
}

/* Every matrix of the model to type t, or each to one of `types` in turn
 * (n > 1), so that q, k and v differ in type and share one input. */
static void swap_all(blk_model *b, const ml_type *types, size_t n, int dequantized)
{
    ml_model *m = b->model;
    size_t k = 0;
#define NEXT types[k++ % n], dequantized
    swap_to(b, &m->tok_emb, NEXT);
    for (uint32_t l = 0; l < m->h.n_layers; l++) {
        ml_layer *L = &m->layers[l];
        swap_to(b, &L->wq, NEXT), swap_to(b, &L->wk, NEXT), swap_to(b, &L->wv, NEXT);
        swap_to(b, &L->wo, NEXT), swap_to(b, &L->w1, NEXT), swap_to(b, &L->w2, NEXT);
        swap_to(b, &L->w3, NEXT);
    }
    swap_to(b, &m->wcls, NEXT);
#undef NEXT
}

/* All logits of the prompt: batch, threads, and with the table k. */
static float *run(const blk_model *b, const ml_kernels *k, uint32_t batch, unsigned threads)
{
    b->model->k = k;
    ml_ctx_params p = {.n_ctx = 64, .n_batch = batch, .n_threads = threads};
    ml_ctx *c;
    ml_error err;
    ck_assert_msg(ml_ctx_new(b->model, &p, &c, &err) == ML_OK, "%s", err.msg);
    float *out = malloc(b->n * b->vocab * sizeof *out);
    ck_assert(out);
    ck_assert_msg(ml_ctx_eval(c, b->ids, b->n, out, 1, &err) == ML_OK, "%s", err.msg);
    ml_ctx_free(c);
    return out;
}

/* The largest |a - b| over the largest |a|. */
static double rel_diff(const float *a, const float *b, size_t n)
{
    double most = 0, top = 0;
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(isfinite(b[i]), "logit %zu is %g", i, (double)b[i]);
        most = fmax(most, fabs((double)a[i] - (double)b[i]));
        top = fmax(top, fabs((double)a[i]));
    }
    return most / top;
}

/* Logits of the same weights computed two ways (integer sums of block
 * types against F32 float sums): each token's logits to float precision,
 * but a token now and then further.  Float sums in another order move a
 * layer's output by an ulp, and an activation's Q8_0 rounding (rule 1)
 * then and there can land on the other side of a half, a whole quant
 * step that the next layers carry (the random model 256 wide with IQ4_XS
 * weights: 19 tokens of 20 within 4e-7 of the largest logit, one 0.34
 * off, 0.0074 of the largest).  So: at most one token in ten beyond 1e-4
 * of its largest logit, none beyond 5e-2. */
static void require_close(const float *want, const float *got, size_t n, uint32_t vocab,
                          const char *what)
{
    size_t off = 0;
    for (size_t t = 0; t < n; t++) {
        const double d = rel_diff(want + t * vocab, got + t * vocab, vocab);
        ck_assert_msg(d < 5e-2, "%s: token %zu's logits %.3g away", what, t, d);
        off += d > 1e-4;
    }
    ck_assert_msg(off * 10 <= n, "%s: %zu of %zu tokens' logits beyond 1e-4", what, off, n);
}

/* F32 matrices hold the Q8_0 weights exactly: the logits differ from the
 * Q8_0 model's only by rule 5's float sums against rule 3's integer ones. */
START_TEST(f32_weights_follow_q8)
{
    blk_model b;
    model_open(&b);
    const ml_kernels *scalar = &ml__kernels_scalar;
    float *q8 = run(&b, scalar, 64, 1);
    const ml_type f32 = ML_TYPE_F32;
    swap_all(&b, &f32, 1, 0);
    float *got = run(&b, scalar, 64, 1);
    require_close(q8, got, b.n, b.vocab, "F32 weights against Q8_0's");
    free(q8);
    free(got);
    model_close(&b);
}
END_TEST

/* Each type alone for every matrix against F32 matrices of what ggml's
 * dequantizer makes of the same blocks: the kernels and the embedding
 * read the blocks as ggml does (a misread layout is nowhere near). */
static const ml_type each[] = {ML_TYPE_F16,  ML_TYPE_BF16,   ML_TYPE_Q5_0, ML_TYPE_Q5_1,
                               ML_TYPE_Q4_1, ML_TYPE_IQ4_NL, ML_TYPE_MXFP4};

START_TEST(each_type_follows_ggml)
{
    blk_model ref, b;
    model_open(&ref);
    model_open(&b);
    swap_all(&ref, &each[_i], 1, 1);
    swap_all(&b, &each[_i], 1, 0);
    float *want = run(&ref, &ml__kernels_scalar, 64, 1);
    float *got = run(&b, &ml__kernels_scalar, 64, 1);
    require_close(want, got, b.n, b.vocab, ml_type_name(each[_i]));
    free(want);
    free(got);
    model_close(&ref);
    model_close(&b);
}
END_TEST

/* Q4_1, then Q5_1, in every matrix: the prompt in one batch goes past
 * the few-token rows to the lanes, whose form both threads lay out; the
 * same bits as the scalar reference with every variant, one and two
 * threads. */
START_TEST(lanes_32_invariant)
{
    static const ml_type types[] = {ML_TYPE_Q4_1, ML_TYPE_Q5_1};
    const ml_type t = types[_i];
    blk_model b;
    model_open(&b);
    swap_all(&b, &t, 1, 0);
    const size_t bytes = b.n * b.vocab * sizeof(float);
    float *ref = run(&b, &ml__kernels_scalar, 64, 1);
    const ml_kernels *vs[8];
    const size_t nv = ml__kernels_available(vs, 8);
    for (size_t v = 0; v < nv; v++)
        for (unsigned threads = 2; threads >= 1; threads--) { /* two first: a
            * fresh context's form is not the last one's left in memory */
            float *got = run(&b, vs[v], 64, threads);
            ck_assert_msg(memcmp(ref, got, bytes) == 0, "%s, %s, %u threads: differs from scalar",
                          ml_type_name(t), vs[v]->name, threads);
            free(got);
        }
    free(ref);
    model_close(&b);
}
END_TEST

/* ml_ctx_step_group: the group of Q4_1's lanes where a variant has them
 * (from as many tokens as they take), 1 with the scalar table and for
 * Q8_0 weights, whose products cost by the token. */
START_TEST(step_group_follows_kernels)
{
    static const ml_type q41 = ML_TYPE_Q4_1;
    blk_model b;
    model_open(&b);
    const ml_kernels *vs[8];
    const size_t nv = ml__kernels_available(vs, 8);
    for (int swapped = 0; swapped < 2; swapped++) {
        if (swapped)
            swap_all(&b, &q41, 1, 0);
        for (size_t v = 0; v < nv; v++) {
            b.model->k = vs[v];
            ml_ctx_params p = {.n_ctx = 64, .n_batch = 64, .n_threads = 1};
            ml_ctx *c;
            ml_error err;
            ck_assert_msg(ml_ctx_new(b.model, &p, &c, &err) == ML_OK, "%s", err.msg);
            const ml_matmul_blk_x *bx = &vs[v]->matmul_blk_x;
            for (uint32_t n = 1; n <= 64; n++) {
                const size_t want = swapped && bx->group ? bx->group(q41, b.model->h.dim, n) : 1;
                ck_assert_msg(ml_ctx_step_group(c, n) == want,
                              "%s, %s, %u tokens: group %u, not %zu", vs[v]->name,
                              swapped ? "Q4_1" : "Q8_0", n, ml_ctx_step_group(c, n), want);
            }
            ml_ctx_free(c);
        }
    }
    model_close(&b);
}
END_TEST

/* A model of mixed types (q, k, v of different types on one input): the
 * same bits for batches of 64 and 1, one and two threads, and every
 * variant's block kernels, whole or with the rest scalar. */
START_TEST(mixed_types_invariant)
{
    static const ml_type mix[] = {ML_TYPE_F16,    ML_TYPE_Q5_0,  ML_TYPE_IQ4_NL, ML_TYPE_Q4_1,
                                  ML_TYPE_Q5_1,   ML_TYPE_MXFP4, ML_TYPE_BF16,   ML_TYPE_F32,
                                  ML_TYPE_IQ4_NL, ML_TYPE_Q5_0,  ML_TYPE_Q4_1};
    blk_model b;
    model_open(&b);
    swap_all(&b, mix, sizeof mix / sizeof mix[0], 0);
    const size_t bytes = b.n * b.vocab * sizeof(float);
    float *ref = run(&b, &ml__kernels_scalar, 64, 1);
    float *got = run(&b, &ml__kernels_scalar, 1, 1);
    ck_assert_msg(memcmp(ref, got, bytes) == 0, "batch 1 differs from batch 64");
    free(got);
    got = run(&b, &ml__kernels_scalar, 7, 2);
    ck_assert_msg(memcmp(ref, got, bytes) == 0, "2 threads, batch 7 differ");
    free(got);
    const ml_kernels *vs[8];
    const size_t nv = ml__kernels_available(vs, 8);
    for (size_t v = 0; v < nv; v++) {
        ml_kernels t = ml__kernels_scalar;
        ml__kernels_take(&t, ML_KS_MATVEC_BLK, vs[v]);
        ml__kernels_take(&t, ML_KS_MATMUL_BLK, vs[v]);
        for (int whole = 0; whole <= 1; whole++) {
            got = run(&b, whole ? vs[v] : &t, 5, 2);
            ck_assert_msg(memcmp(ref, got, bytes) == 0, "%s%s differs from scalar", vs[v]->name,
                          whole ? "" : "'s block kernels");
            free(got);
        }
    }
    free(ref);
    model_close(&b);
}
END_TEST

/* A matrix of a type the kernels have no code for is refused at load,
 * by name, never multiplied: a type that cannot hold the row (Q4_K's
 * super-blocks of 256 in a row of 64), U8, a code from the future.  (The
 * loader of this build makes no such tensors; the test changes a bound
 * one's type in place.) */
START_TEST(unsupported_matrix_refused)
{
    static const ml_type bad[] = {ML_TYPE_Q4_K, ML_TYPE_U8, (ml_type)99};
    ml_mlb *mlb;
    ml_error err;
    ck_assert_msg(ml_mlb_open(FIX "llama-q8.mlb", &mlb, &err) == ML_OK, "%s", err.msg);
    ml_tensor *t = (ml_tensor *)ml_mlb_get(mlb, ML_R_WK, 1);
    ck_assert_ptr_nonnull(t);
    const ml_type was = t->type;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ml_model *m = NULL;
        t->type = bad[i];
        ck_assert_int_eq(ml_model_new(mlb, &m, &err), ML_E_UNSUPPORTED);
        ck_assert_ptr_null(m);
        ck_assert_str_eq(err.field, "blk.1.wk");
        ck_assert_msg(strstr(err.msg, ml_type_name(bad[i])) && strstr(err.msg, "no kernel"), "%s",
                      err.msg);
    }
    t->type = was;
    ml_mlb_close(mlb);
}
END_TEST

/* ---- the 256-element types, on a random model 256 wide ---- */

/* A random Q8_0 model (dim 256, FFN 512, 2 layers) bound like the
 * fixture; its prompt: 20 ids. */
static void random_model_open(blk_model *b, tu_mem *file)
{
    ml_mlb_header h;
    ml_error err;
    tu_base_header(&h);
    h.dim = 256, h.hidden_dim = 512, h.n_layers = 2, h.vocab = 64, h.wtype = ML_WTYPE_Q8_0;
    tu_write_random(&h, NULL, 38, file);
    memset(b, 0, sizeof *b);
    ck_assert_msg(ml_mlb_open_memory(file->p, file->len, &b->mlb, &err) == ML_OK, "%s", err.msg);
    ck_assert_msg(ml_model_new(b->mlb, &b->model, &err) == ML_OK, "%s", err.msg);
    b->vocab = h.vocab;
    for (b->n = 0; b->n < 20; b->n++)
        b->ids[b->n] = (ml_token)((b->n * 7 + 3) % h.vocab);
}

static void put_f16(uint8_t *p, float f)
{
    put16(p, ml_f32_to_f16(f));
}

/* Random blocks of type t for `rows` rows of `cols`, the same for the
 * same seed: random bytes, the f16 fields (d, dmin, m; the float types'
 * values) small, so that a layer's outputs stay near 1. */
static uint8_t *random_blocks(ml_type t, size_t rows, size_t cols, uint64_t seed)
{
    static const struct { ml_type t; int at[2]; } fields[] = {
        {ML_TYPE_Q4_1, {0, 2}},   {ML_TYPE_Q5_0, {0, -1}},   {ML_TYPE_Q5_1, {0, 2}},
        {ML_TYPE_Q2_K, {80, 82}}, {ML_TYPE_Q3_K, {108, -1}}, {ML_TYPE_Q4_K, {0, 2}},
        {ML_TYPE_Q5_K, {0, 2}},   {ML_TYPE_Q6_K, {208, -1}}, {ML_TYPE_IQ4_NL, {0, -1}},
        {ML_TYPE_IQ4_XS, {0, -1}},
    };
    uint32_t elems = 1, bytes = 4;
    ml_type_block(t, &elems, &bytes, NULL);
    const size_t row_bytes = ml__blk_row_bytes(t, cols), units = rows * cols / elems;
    uint8_t *w = malloc(rows * row_bytes);
    ck_assert_ptr_nonnull(w);
    tu_rng r = {seed};
    for (size_t i = 0; i < rows * row_bytes; i++)
        w[i] = (uint8_t)tu_next(&r);
    for (size_t u = 0; u < units; u++) {
        uint8_t *b = w + u * bytes;
        const float small = (float)(1 + tu_below(&r, 8)) * 1e-4f;
        for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++)
            for (int j = 0; fields[k].t == t && j < 2; j++)
                if (fields[k].at[j] >= 0)
                    put_f16(b + fields[k].at[j], small);
        if (t == ML_TYPE_MXFP4)
            b[0] = (uint8_t)(118 + tu_below(&r, 4));
        if (t == ML_TYPE_F16)
            put_f16(b, ((float)tu_below(&r, 2001) - 1000.0f) * 5e-5f);
        if (t == ML_TYPE_BF16)
            put16(b, (uint16_t)(tu_below(&r, 2) << 15 | (0x3a00 + tu_below(&r, 0x300))));
        if (t == ML_TYPE_F32) {
            const float f = ((float)tu_below(&r, 2001) - 1000.0f) * 5e-5f;
            memcpy(b, &f, 4);
        }
    }
    return w;
}

/* *w replaced by random blocks of type t (seeded by `seed`), or by F32
 * rows of ggml's dequantization of the same blocks. */
static void swap_random(blk_model *b, ml_mat *w, ml_type t, uint64_t seed, int dequantized)
{
    uint8_t *blocks = random_blocks(t, w->rows, w->cols, seed);
    const size_t row_bytes = ml__blk_row_bytes(t, w->cols);
    uint32_t ggml = 0;
    if (dequantized && ml_type_block(t, NULL, NULL, &ggml)) {
        float *f = malloc((size_t)w->rows * w->cols * sizeof *f);
        ck_assert_ptr_nonnull(f);
        for (size_t r = 0; r < w->rows; r++)
            ck_assert(ml_gguf_dequantize_raw(ggml, blocks + r * row_bytes, w->cols,
                                             f + r * w->cols, NULL) == ML_OK);
        free(blocks);
        blocks = (uint8_t *)f;
        t = ML_TYPE_F32;
    }
    ck_assert(b->n_owned < 64);
    b->owned[b->n_owned++] = blocks;
    *w = (ml_mat){.type = t, .rows = w->rows, .cols = w->cols, .q = blocks,
                  .row_bytes = ml__blk_row_bytes(t, w->cols)};
    note_acts(b, w);
}

/* Every matrix to types[k % n] in turn, random blocks. */
static void swap_all_random(blk_model *b, const ml_type *types, size_t n, int dequantized)
{
    ml_model *m = b->model;
    size_t k = 0;
#define NEXT(w) swap_random(b, w, types[k % n], 1000 + k, dequantized), k++
    NEXT(&m->tok_emb);
    for (uint32_t l = 0; l < m->h.n_layers; l++) {
        ml_layer *L = &m->layers[l];
        NEXT(&L->wq), NEXT(&L->wk), NEXT(&L->wv), NEXT(&L->wo);
        NEXT(&L->w1), NEXT(&L->w2), NEXT(&L->w3);
    }
    NEXT(&m->wcls);
#undef NEXT
}

static const ml_type k_types[] = {ML_TYPE_Q2_K, ML_TYPE_Q3_K, ML_TYPE_Q4_K,
                                  ML_TYPE_Q5_K, ML_TYPE_Q6_K, ML_TYPE_IQ4_XS};

/* The K activations (rule 6) as Q8_0 ones: each super-block's one scale
 * for its eight blocks (n % 256 == 0: this model's rows are 256 and 512
 * long). */
static void quantize_k_as_q8_0(const float *x, size_t n, int8_t *q, float *d)
{
    ck_assert_uint_eq(n % 256, 0);
    ml_quantize_row_q8_k(x, n, q, d);
    for (size_t i = n / 32; i-- > 0;) /* d[i / 8] is read before d[i] is written */
        d[i] = d[i / 8];
}

/* Each 256-element type alone, against F32 matrices of its blocks
 * dequantized by ggml's rules, those fed the same K activations (the
 * reference table's Q8_0 quantizer made rule 6's): the same logits to
 * float precision.  (With their own Q8_0 activations the two differ by
 * the rounding of activations per 32 against per 256: up to 8% of the
 * logits' range on this random model.) */
START_TEST(k_types_follow_ggml)
{
    tu_mem f1, f2;
    blk_model ref, b;
    random_model_open(&ref, &f1);
    random_model_open(&b, &f2);
    swap_all_random(&ref, &k_types[_i], 1, 1);
    swap_all_random(&b, &k_types[_i], 1, 0);
    ml_kernels k_acts = ml__kernels_scalar;
    k_acts.quantize_q8_0 = quantize_k_as_q8_0;
    float *want = run(&ref, &k_acts, 64, 1);
    float *got = run(&b, &ml__kernels_scalar, 64, 1);
    require_close(want, got, b.n, b.vocab, ml_type_name(k_types[_i]));
    free(want);
    free(got);
    model_close(&ref);
    model_close(&b);
    tu_mem_free(&f1);
    tu_mem_free(&f2);
}
END_TEST

/* Q4_K_M's mix and the rest (q, k, v of different types on one input):
 * the same bits for any batch and thread count, and every variant's
 * block kernels (prefill's tiles among them; from 8 tokens on 2 threads,
 * the K lanes' form laid out by both threads and read by both). */
START_TEST(k_mixed_invariant)
{
    static const ml_type mix[] = {ML_TYPE_Q6_K, ML_TYPE_Q4_K,   ML_TYPE_Q4_K, ML_TYPE_Q6_K,
                                  ML_TYPE_Q5_K, ML_TYPE_IQ4_XS, ML_TYPE_Q3_K, ML_TYPE_Q2_K,
                                  ML_TYPE_F16,  ML_TYPE_Q5_0};
    tu_mem file;
    blk_model b;
    random_model_open(&b, &file);
    swap_all_random(&b, mix, sizeof mix / sizeof mix[0], 0);
    const size_t bytes = b.n * b.vocab * sizeof(float);
    float *ref = run(&b, &ml__kernels_scalar, 64, 1);
    for (size_t i = 0; i < b.n * b.vocab; i++)
        ck_assert_msg(isfinite(ref[i]), "logit %zu: %g", i, (double)ref[i]);
    float *got = run(&b, &ml__kernels_scalar, 1, 1);
    ck_assert_msg(memcmp(ref, got, bytes) == 0, "batch 1 differs from batch 64");
    free(got);
    const ml_kernels *vs[8];
    const size_t nv = ml__kernels_available(vs, 8);
    for (size_t v = 0; v < nv; v++)
        for (unsigned threads = 1; threads <= 2; threads++)
            for (size_t batch = 7; batch <= 64; batch += 57) {
                got = run(&b, vs[v], batch, threads);
                ck_assert_msg(memcmp(ref, got, bytes) == 0,
                              "%s, %u threads, batch %zu: differs from scalar", vs[v]->name,
                              threads, batch);
                free(got);
            }
    free(ref);
    model_close(&b);
    tu_mem_free(&file);
}
END_TEST

Suite *suite_runtime_blk(void)
{
    Suite *s = suite_create("runtime_blk");
    TCase *tc = tcase_create("blk");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, f32_weights_follow_q8);
    tcase_add_loop_test(tc, each_type_follows_ggml, 0, (int)(sizeof each / sizeof each[0]));
    tcase_add_test(tc, mixed_types_invariant);
    tcase_add_loop_test(tc, lanes_32_invariant, 0, 2);
    tcase_add_test(tc, step_group_follows_kernels);
    tcase_add_test(tc, unsupported_matrix_refused);
    tcase_add_loop_test(tc, k_types_follow_ggml, 0, (int)(sizeof k_types / sizeof k_types[0]));
    tcase_add_test(tc, k_mixed_invariant);
    suite_add_tcase(s, tc);
    return s;
}
