/* check_runtime.c - the forward pass against tools/mlb.py, the numpy
 * reference written from the spec (fixtures in tests/fixtures/runtime,
 * made by tools/make-runtime-fixtures.sh), and the invariances the runtime
 * promises: the same bits for any batch size, thread count and kernel
 * variant; cache memory equal to what mlb-info reports; clean errors for a
 * full context and bad token ids. */
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

static const char *const models[] = {"llama-q8", "llama-q4",  "llama3-rope", "linear-rope",
                                     "yarn-rope", "qwen",     "gemma",       "gated",
                                     "window",   "qwen35"};
#define N_MODELS (sizeof models / sizeof models[0])

typedef struct fixture {
    ml_mlb *mlb;
    ml_model *model;
    ml_token ids[64];
    size_t n;
    float *want; /* n x vocab */
    uint32_t vocab;
} fixture;

static void *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s (run the tests from the repository root)", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc((size_t)n + 1);
    ck_assert(p && fread(p, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return p;
}

static void fixture_open(fixture *fx, const char *name)
{
    char path[256];
    ml_error err;
    memset(fx, 0, sizeof *fx);
    snprintf(path, sizeof path, FIX "%s.mlb", name);
    ck_assert_msg(ml_mlb_open(path, &fx->mlb, &err) == ML_OK, "%s: %s", path, err.msg);
    ck_assert_msg(ml_model_new(fx->mlb, &fx->model, &err) == ML_OK, "%s: %s", path, err.msg);
    fx->vocab = ml_mlb_get_header(fx->mlb)->vocab;
    size_t len;
    snprintf(path, sizeof path, FIX "%s.ids", name);
    char *text = slurp(path, &len), *p = text, *end;
    text[len] = 0;
    while (fx->n < 64) {
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        fx->ids[fx->n++] = (ml_token)v;
        p = end;
    }
    free(text);
    snprintf(path, sizeof path, FIX "%s.f32", name);
    fx->want = slurp(path, &len);
    ck_assert_uint_eq(len, fx->n * fx->vocab * sizeof(float));
}

static void fixture_close(fixture *fx)
{
    ml_model_free(fx->model);
    ml_mlb_close(fx->mlb);
    free(fx->want);
}

/* All logits of the fixture's prompt with the given batch and threads. */
static float *run_all(const fixture *fx, uint32_t batch, unsigned threads)
{
    ml_ctx_params p = {.n_ctx = 64, .n_batch = batch, .n_threads = threads};
    ml_ctx *c;
    ml_error err;
    ck_assert_msg(ml_ctx_new(fx->model, &p, &c, &err) == ML_OK, "%s", err.msg);
    float *out = malloc(fx->n * fx->vocab * sizeof(float));
    ck_assert(out);
    ck_assert_msg(ml_ctx_eval(c, fx->ids, fx->n, out, 1, &err) == ML_OK, "%s", err.msg);
    ck_assert_uint_eq(ml_ctx_pos(c), fx->n);
    ml_ctx_free(c);
    return out;
}

static int argmax(const float *v, uint32_t n)
{
    int b = 0;
    for (uint32_t i = 1; i < n; i++)
        if (v[i] > v[b])
            b = (int)i;
    return b;
}

/* Agreement with the numpy reference (tools/mlb.py).  The two quantize
 * activations by the same float32 rule but sum in different orders, so a
 * value landing next to a rounding boundary can take the other quant now
 * and then: such a flip moves that position's logits by up to ~1e-3 of
 * their range, and every later one's too when it lands in a key or value
 * the cache keeps (window: since attention's products are fused
 * multiply-adds, a flip at position 23 of 26, the last three at
 * 0.9-1.2e-2, where the positions before it stay within 5e-7).  A wrong
 * formula moves nearly every position.  So: at least 85% of positions
 * agree within 1e-5 (relative to the largest logit), every position
 * within 2e-2, and the argmax is the same wherever the reference's top
 * two are not nearly tied. */
START_TEST(test_matches_reference)
{
    fixture fx;
    fixture_open(&fx, models[_i]);
    float *got = run_all(&fx, 64, 1);
    size_t close = 0;
    for (size_t t = 0; t < fx.n; t++) {
        const float *a = got + t * fx.vocab, *b = fx.want + t * fx.vocab;
        double maxabs = 0, diff = 0;
        for (uint32_t i = 0; i < fx.vocab; i++) {
            ck_assert_msg(isfinite(a[i]), "%s: logit %zu/%u not finite", models[_i], t, i);
            if (fabs(b[i]) > maxabs)
                maxabs = fabs(b[i]);
            if (fabs(a[i] - b[i]) > diff)
                diff = fabs(a[i] - b[i]);
        }
        double rel = diff / (maxabs > 1e-6 ? maxabs : 1e-6);
        ck_assert_msg(rel < 2e-2, "%s: position %zu: relative difference %g", models[_i], t, rel);
        close += rel < 1e-5;
        int ga = argmax(a, fx.vocab), gb = argmax(b, fx.vocab);
        if (ga != gb) {
            float second = -INFINITY;
            for (uint32_t i = 0; i < fx.vocab; i++)
                if ((int)i != gb && b[i] > second)
                    second = b[i];
            ck_assert_msg(b[gb] - second < 1e-3 * maxabs,
                          "%s: position %zu: argmax %d, reference %d (margin %g)", models[_i], t,
                          ga, gb, (double)(b[gb] - second));
        }
    }
    ck_assert_msg(close * 20 >= fx.n * 17, "%s: only %zu of %zu positions within 1e-5",
                  models[_i], close, fx.n);
    free(got);
    fixture_close(&fx);
}
END_TEST

/* Batch sizes and thread counts change nothing, not one bit. */
START_TEST(test_invariance)
{
    fixture fx;
    fixture_open(&fx, models[_i]);
    float *ref = run_all(&fx, 64, 1);
    size_t bytes = fx.n * fx.vocab * sizeof(float);
    const uint32_t batches[] = {1, 7, 16};
    for (size_t b = 0; b < 3; b++) {
        float *x = run_all(&fx, batches[b], 1);
        ck_assert_msg(memcmp(x, ref, bytes) == 0, "%s: batch %u differs", models[_i],
                      batches[b]);
        free(x);
    }
    for (unsigned t = 2; t <= 3; t++) {
        float *x = run_all(&fx, 5, t);
        ck_assert_msg(memcmp(x, ref, bytes) == 0, "%s: %u threads differ", models[_i], t);
        free(x);
    }
    /* Token by token: decode's shares with stealing (up to 16 threads),
     * and the even split beyond. */
    const unsigned decode_threads[] = {2, 3, 16, 17};
    for (size_t i = 0; i < 4; i++) {
        float *x = run_all(&fx, 1, decode_threads[i]);
        ck_assert_msg(memcmp(x, ref, bytes) == 0, "%s: decode on %u threads differs", models[_i],
                      decode_threads[i]);
        free(x);
    }
    free(ref);
    fixture_close(&fx);
}
END_TEST

/* fx's tokens pooled with ctx params p. */
static void embed_with(fixture *fx, ml_ctx_params p, ml_pooling pool, size_t n, float *out)
{
    ml_ctx *c;
    ml_error err;
    ck_assert(ml_ctx_new(fx->model, &p, &c, &err) == ML_OK);
    ck_assert_msg(ml_ctx_embed(c, fx->ids, n, pool, out, &err) == ML_OK, "%s", err.msg);
    ck_assert_uint_eq(ml_ctx_pos(c), n); /* sequence 0 holds them */
    /* embedding again resets the sequence first: the same bits */
    float *again = malloc(ml_model_header(fx->model)->dim * sizeof *again);
    ck_assert(ml_ctx_embed(c, fx->ids, n, pool, again, &err) == ML_OK);
    ck_assert(memcmp(again, out, ml_model_header(fx->model)->dim * sizeof *out) == 0);
    free(again);
    ml_ctx_free(c);
}

/* Embeddings: batches and threads change no bit; cls pooling is the first
 * position's vector; mean pooling is the mean of every position's, which
 * last pooling of each prefix gives (attention is causal). */
START_TEST(test_embed)
{
    fixture fx;
    fixture_open(&fx, models[_i]);
    uint32_t dim = ml_model_header(fx.model)->dim;
    size_t n = fx.n < 12 ? fx.n : 12;
    float *ref = malloc(dim * sizeof *ref), *x = malloc(dim * sizeof *x);
    float *sum = calloc(dim, sizeof *sum);
    ml_ctx_params p = {.n_ctx = 64, .n_batch = 64, .n_threads = 1};
    embed_with(&fx, p, ML_POOL_MEAN, n, ref);
    ml_ctx_params q = {.n_ctx = 64, .n_batch = 5, .n_threads = 3};
    embed_with(&fx, q, ML_POOL_MEAN, n, x);
    ck_assert_msg(memcmp(x, ref, dim * sizeof *x) == 0, "%s: batch/threads differ", models[_i]);
    for (size_t k = 1; k <= n; k++) { /* position k-1's vector: the last of k tokens */
        embed_with(&fx, p, ML_POOL_LAST, k, x);
        for (uint32_t j = 0; j < dim; j++)
            sum[j] += x[j];
        if (k == 1) {
            float *y = malloc(dim * sizeof *y);
            embed_with(&fx, p, ML_POOL_CLS, n, y);
            ck_assert_msg(memcmp(x, y, dim * sizeof *y) == 0, "%s: cls is not position 0",
                          models[_i]);
            free(y);
        }
    }
    for (uint32_t j = 0; j < dim; j++)
        ck_assert_msg(sum[j] / (float)n == ref[j], "%s: mean %u: %g, positions give %g",
                      models[_i], j, (double)ref[j], (double)(sum[j] / (float)n));
    ml_ctx *c;
    ml_error err;
    ck_assert(ml_ctx_new(fx.model, &p, &c, &err) == ML_OK);
    ck_assert_int_eq(ml_ctx_embed(c, fx.ids, 0, ML_POOL_MEAN, x, &err), ML_E_INVAL);
    ck_assert_int_eq(ml_ctx_embed(c, fx.ids, 1, (ml_pooling)9, x, &err), ML_E_INVAL);
    ml_token bad = ml_model_header(fx.model)->vocab;
    ck_assert_int_eq(ml_ctx_embed(c, &bad, 1, ML_POOL_MEAN, x, &err), ML_E_INVAL);
    ml_ctx_free(c);
    free(ref), free(x), free(sum);
    fixture_close(&fx);
}
END_TEST

/* Every kernel variant this CPU runs gives the scalar reference's bits. */
START_TEST(test_kernel_variants)
{
    const char *names[] = {"scalar", "avx2", "avx512", "neon", "neondot"};
    float *ref = NULL;
    fixture fx;
    for (size_t v = 0; v < 5; v++) {
        setenv("ML_KERNELS", names[v], 1);
        ml_mlb *mlb;
        ml_model *model;
        ml_error err;
        ck_assert(ml_mlb_open(FIX "gemma.mlb", &mlb, &err) == ML_OK);
        if (ml_model_new(mlb, &model, &err) != ML_OK) { /* not on this CPU */
            ml_mlb_close(mlb);
            continue;
        }
        ml_model_free(model);
        ml_mlb_close(mlb);
        fixture_open(&fx, "gemma");
        float *x = run_all(&fx, 16, 2);
        if (!ref)
            ref = x;
        else {
            ck_assert_msg(memcmp(x, ref, fx.n * fx.vocab * sizeof(float)) == 0,
                          "kernels %s differ from scalar", names[v]);
            free(x);
        }
        fixture_close(&fx);
    }
    unsetenv("ML_KERNELS");
    free(ref);
}
END_TEST

/* The logits of a fixture's prompt with kernel table k: all but the last
 * token in one batch (the matmuls; over 32 tokens, the AMX tiles and
 * matmul_x), then the last alone (the matvecs). */
static void run_table(const fixture *fx, const ml_kernels *k, float *out)
{
    fx->model->k = k; /* a context takes its table from the model when made */
    ml_ctx_params p = {.n_ctx = 64, .n_batch = 64, .n_threads = 1};
    ml_ctx *c;
    ml_error err;
    ck_assert_msg(ml_ctx_new(fx->model, &p, &c, &err) == ML_OK, "%s", err.msg);
    ck_assert_msg(ml_ctx_eval(c, fx->ids, fx->n - 1, out, 1, &err) == ML_OK, "%s", err.msg);
    ck_assert_msg(ml_ctx_eval(c, fx->ids + fx->n - 1, 1, out + (fx->n - 1) * fx->vocab, 1, &err) ==
                      ML_OK,
                  "%s", err.msg);
    ml_ctx_free(c);
}

/* Each slot's distinct codes among the variants this CPU runs (two
 * variants may share one: AMX's matvecs are AVX-512's). */
typedef struct slot_options {
    const ml_kernels *from[ML_KS_COUNT][8];
    size_t n[ML_KS_COUNT];
} slot_options;

static void list_options(slot_options *o)
{
    const ml_kernels *vs[8];
    const size_t nv = ml__kernels_available(vs, 8);
    for (int s = 0; s < ML_KS_COUNT; s++) {
        o->n[s] = 0;
        for (size_t v = 0; v < nv; v++) {
            size_t j = 0;
            while (j < o->n[s] && !ml__kernels_same((ml_kslot)s, o->from[s][j], vs[v]))
                j++;
            if (j == o->n[s])
                o->from[s][o->n[s]++] = vs[v];
        }
    }
}

/* Combination `index`, read as a number whose digit s (base n[s]) picks
 * slot s's code, and a description of it for a failure. */
static void compose(const slot_options *o, size_t index, ml_kernels *t, char *what, size_t cap)
{
    *t = ml__kernels_scalar;
    size_t len = 0;
    for (int s = 0; s < ML_KS_COUNT; s++) {
        const ml_kernels *from = o->from[s][index % o->n[s]];
        index /= o->n[s];
        ml__kernels_take(t, (ml_kslot)s, from);
        len += (size_t)snprintf(what + len, len < cap ? cap - len : 0, " %s=%s",
                                ml_kernels_slot((unsigned)s), from->name);
    }
}

/* The table the chooser made for this process (ML_KERNELS unset). */
static const ml_kernels *chosen_table(void)
{
    char *saved = getenv("ML_KERNELS") ? strdup(getenv("ML_KERNELS")) : NULL;
    unsetenv("ML_KERNELS");
    const char *why = NULL;
    const ml_kernels *k = ml__kernels_select(&why);
    if (saved)
        setenv("ML_KERNELS", saved, 1);
    free(saved);
    ck_assert_ptr_nonnull(k);
    return k;
}

typedef struct combo_run {
    fixture fx;
    size_t bytes;
    float *ref, *got;
} combo_run;

static void combo_open(combo_run *r, const char *name)
{
    fixture_open(&r->fx, name);
    r->bytes = r->fx.n * r->fx.vocab * sizeof(float);
    r->ref = malloc(r->bytes), r->got = malloc(r->bytes);
    ck_assert(r->ref && r->got);
    run_table(&r->fx, &ml__kernels_scalar, r->ref);
}

static void combo_check(combo_run *r, const ml_kernels *k, const char *what)
{
    run_table(&r->fx, k, r->got);
    ck_assert_msg(memcmp(r->got, r->ref, r->bytes) == 0, "differs from scalar with%s", what);
}

static void combo_close(combo_run *r)
{
    free(r->ref);
    free(r->got);
    fixture_close(&r->fx);
}

/* llama-q4 has no block-type matrix: the block kernels' slots would only
 * multiply the combinations (by 9 on an AVX-512 CPU) without running.
 * They keep scalar's here; check_runtime_blk.c runs each of their codes on
 * a model of block types. */
static void keep_blk_slots_scalar(slot_options *o)
{
    o->n[ML_KS_MATVEC_BLK] = o->n[ML_KS_MATMUL_BLK] = 1;
}

/* Every table the chooser can compose gives the scalar reference's bits:
 * every combination of each kernel's distinct codes among the variants
 * this CPU runs (scalar included), and
 * the table it chose.  llama-q4 has Q4_0 and Q8_0 matrices (q8_mask) and
 * batches of 39 tokens and of 1, so every kernel runs. */
START_TEST(test_kernel_combinations)
{
    slot_options o;
    list_options(&o);
    keep_blk_slots_scalar(&o);
    size_t combos = 1;
    for (int s = 0; s < ML_KS_COUNT; s++)
        combos *= o.n[s];
    combo_run r;
    combo_open(&r, "llama-q4");
    combo_check(&r, chosen_table(), " the chosen table");
    for (size_t i = 0; i < combos; i++) {
        ml_kernels t;
        char what[256];
        compose(&o, i, &t, what, sizeof what);
        combo_check(&r, &t, what);
    }
    fprintf(stderr, "check_runtime: %zu kernel combinations give scalar's bits\n", combos);
    combo_close(&r);
}
END_TEST

/* On a model of more float math (gemma: GELU, softcaps, a sliding window,
 * Q4_0 and Q8_0), where every combination would take seconds: each
 * kernel's every code with the others as chosen, and the chosen table.
 * With the combinations above this covers it: kernels meet only in the
 * reference's data (Q8_0 activations, f32 results), which each computes
 * to the bit whatever the others are. */
START_TEST(test_kernel_slots)
{
    slot_options o;
    list_options(&o);
    combo_run r;
    combo_open(&r, "gemma");
    const ml_kernels *chosen = chosen_table();
    combo_check(&r, chosen, " the chosen table");
    for (int s = 0; s < ML_KS_COUNT; s++)
        for (size_t j = 0; j < o.n[s]; j++) {
            ml_kernels t = *chosen;
            char what[64];
            ml__kernels_take(&t, (ml_kslot)s, o.from[s][j]);
            snprintf(what, sizeof what, " %s=%s", ml_kernels_slot((unsigned)s), o.from[s][j]->name);
            combo_check(&r, &t, what);
        }
    combo_close(&r);
}
END_TEST

START_TEST(test_state_bytes_and_errors)
{
    fixture fx;
    fixture_open(&fx, "gemma");
    const ml_mlb_header *h = ml_mlb_get_header(fx.mlb);
    ml_ctx_params p = {.n_ctx = 100, .n_batch = 16, .n_threads = 1};
    ml_ctx *c;
    ml_error err;
    ck_assert(ml_ctx_new(fx.model, &p, &c, &err) == ML_OK);
    uint64_t want = 0;
    for (uint32_t l = 0; l < h->n_layers; l++)
        want += ml_mlb_layer_state_bytes(h, ml_mlb_layer_flag(fx.mlb, l), 100);
    ck_assert_uint_eq(ml_ctx_state_bytes(c), want);
    /* Sliding layers hold their window only: 2 of 4 layers at 8 positions. */
    ck_assert_uint_eq(want, (uint64_t)2 * 8 * 64 * 2 * 4 + (uint64_t)2 * 100 * 64 * 2 * 4);
    ml_token bad = h->vocab;
    ck_assert_int_eq(ml_ctx_eval(c, &bad, 1, NULL, 0, &err), ML_E_INVAL);
    ck_assert_uint_eq(ml_ctx_pos(c), 0);
    ml_token many[101] = {0};
    ck_assert_int_eq(ml_ctx_eval(c, many, 101, NULL, 0, &err), ML_E_INVAL);
    ck_assert_int_eq(ml_ctx_eval(c, many, 100, NULL, 0, &err), ML_OK);
    ck_assert_int_eq(ml_ctx_eval(c, many, 1, NULL, 0, &err), ML_E_INVAL);
    ml_ctx_free(c);
    p.n_ctx = h->max_seq + 1;
    ck_assert_int_eq(ml_ctx_new(fx.model, &p, &c, &err), ML_E_INVAL);
    fixture_close(&fx);
}
END_TEST

/* Taking a context back (a chat's next turn): after k prompt tokens and
 * three others, truncating to k and evaluating the rest of the prompt
 * gives the logits of one straight run, bit for bit.  Models whose state
 * cannot go back refuse: linear attention always, a sliding window once
 * its ring has wrapped. */
START_TEST(test_truncate)
{
    fixture fx;
    fixture_open(&fx, models[_i]);
    float *want = run_all(&fx, 64, 1);
    const size_t k = 2;
    ml_ctx_params p = {.n_ctx = 64, .n_batch = 16, .n_threads = 2};
    ml_ctx *c;
    ml_error err;
    ck_assert(ml_ctx_new(fx.model, &p, &c, &err) == ML_OK);
    ml_token other[3] = {1, 2, 3};
    ck_assert(ml_ctx_eval(c, fx.ids, k, NULL, 0, &err) == ML_OK);
    ck_assert(ml_ctx_eval(c, other, 3, NULL, 0, &err) == ML_OK);
    ck_assert_int_eq(ml_ctx_truncate(c, 6, &err), ML_E_INVAL);
    ml_status s = ml_ctx_truncate(c, k, &err);
    int linear = strcmp(models[_i], "qwen35") == 0 || strcmp(models[_i], "linear") == 0;
    if (linear) {
        ck_assert_int_eq(s, ML_E_UNSUPPORTED);
        ck_assert_uint_eq(ml_ctx_pos(c), k + 3);
        /* ml_ctx_seq_keep falls back on a reset there */
        ck_assert_uint_eq(ml_ctx_seq_keep(c, 0, k), 0);
        ck_assert_uint_eq(ml_ctx_pos(c), 0);
    } else {
        ck_assert_msg(s == ML_OK, "%s: %s", models[_i], err.msg);
        float *got = malloc((fx.n - k) * fx.vocab * sizeof(float));
        ck_assert(got);
        ck_assert(ml_ctx_eval(c, fx.ids + k, fx.n - k, got, 1, &err) == ML_OK);
        ck_assert_msg(memcmp(got, want + k * fx.vocab, (fx.n - k) * fx.vocab * sizeof(float)) == 0,
                      "%s: logits after truncating differ", models[_i]);
        ck_assert_uint_eq(ml_ctx_seq_keep(c, 0, ml_ctx_pos(c) + 5), ml_ctx_pos(c));
        /* Truncating to where it is changes nothing; a wrapped window refuses. */
        ck_assert_int_eq(ml_ctx_truncate(c, ml_ctx_pos(c), &err), ML_OK);
        const ml_mlb_header *h = ml_mlb_get_header(fx.mlb);
        int wrapped = 0;
        for (uint32_t l = 0; l < h->n_layers; l++) /* as lib/runtime/model.c decides */
            wrapped |= (h->layer_flags ? (ml_mlb_layer_flag(fx.mlb, l) & ML_LAYER_SLIDING) != 0
                                       : h->sliding_window != 0) &&
                       h->sliding_window < ml_ctx_pos(c);
        ck_assert_int_eq(ml_ctx_truncate(c, 1, &err), wrapped ? ML_E_UNSUPPORTED : ML_OK);
        free(got);
    }
    ml_ctx_free(c);
    free(want);
    fixture_close(&fx);
}
END_TEST

/* Speculation's room: that many tokens evaluated can all be taken back;
 * one more wraps a sliding window's ring (where the window is what
 * limits it); linear attention has none. */
START_TEST(test_rewind_room)
{
    fixture fx;
    fixture_open(&fx, models[_i]);
    ml_ctx_params p = {.n_ctx = 64, .n_batch = 16, .n_threads = 2};
    ml_ctx *c;
    ml_error err;
    ck_assert(ml_ctx_new(fx.model, &p, &c, &err) == ML_OK);
    ck_assert(ml_ctx_eval(c, fx.ids, 2, NULL, 0, &err) == ML_OK);
    uint32_t room = ml_ctx_seq_rewind_room(c, 0);
    ck_assert_uint_eq(ml_ctx_seq_rewind_room(c, 1), 0);
    int linear = strcmp(models[_i], "qwen35") == 0 || strcmp(models[_i], "linear") == 0;
    if (linear) {
        ck_assert_uint_eq(room, 0);
    } else {
        ck_assert(room >= 1 && room <= 62);
        ml_token one = 1;
        for (uint32_t i = 0; i < room; i++)
            ck_assert(ml_ctx_eval(c, &one, 1, NULL, 0, &err) == ML_OK);
        ck_assert_msg(ml_ctx_truncate(c, 2, &err) == ML_OK, "%s: %s", models[_i], err.msg);
        if (room < 62) { /* a window: one more wraps it */
            for (uint32_t i = 0; i <= room; i++)
                ck_assert(ml_ctx_eval(c, &one, 1, NULL, 0, &err) == ML_OK);
            ck_assert_int_eq(ml_ctx_truncate(c, 2, &err), ML_E_UNSUPPORTED);
        }
    }
    ml_ctx_free(c);
    fixture_close(&fx);
}
END_TEST

/* Greedy sampling is argmax; a fixed seed reproduces a sequence. */
START_TEST(test_sampler)
{
    ml_sampler_params sp = {0, 0, 1, 0, 1, 64, 1, 0, 0};
    ml_sampler *s;
    ml_error err;
    float logits[8] = {0.1f, 3.0f, 2.9f, -1, 0, 0, 3.0f, 0};
    ck_assert(ml_sampler_new(&sp, 8, &s, &err) == ML_OK);
    ck_assert_int_eq(ml_sampler_next(s, logits, NULL, 0), 1);
    ml_sampler_free(s);
    sp.temperature = 1;
    sp.seed = 42;
    ml_token seq[2][32];
    for (int r = 0; r < 2; r++) {
        ck_assert(ml_sampler_new(&sp, 8, &s, &err) == ML_OK);
        for (int i = 0; i < 32; i++) {
            float l[8] = {1, 2, 3, 4, 4, 3, 2, 1};
            seq[r][i] = ml_sampler_next(s, l, NULL, 0);
        }
        ml_sampler_free(s);
    }
    ck_assert(memcmp(seq[0], seq[1], sizeof seq[0]) == 0);
    sp.top_k = 1; /* top-k 1 is greedy whatever the temperature */
    ck_assert(ml_sampler_new(&sp, 8, &s, &err) == ML_OK);
    float l2[8] = {1, 2, 3, 9, 4, 3, 2, 1};
    ck_assert_int_eq(ml_sampler_next(s, l2, NULL, 0), 3);
    ml_sampler_free(s);
}
END_TEST

/* ---- The sampler against a reference that ranks the whole vocabulary ---- */

typedef struct ref_cand { float logit; ml_token id; } ref_cand;

static int ref_desc(const void *a, const void *b)
{
    const ref_cand *x = a, *y = b;
    if (x->logit != y->logit)
        return x->logit < y->logit ? 1 : -1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The sampler's generator (splitmix64 from seed ^ the golden ratio), to
 * draw the same uniform numbers. */
static double ref_uniform(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

/* mlcore/runtime.h's sampling by its definition: rank every token (NaN as
 * -inf; larger logit first, then lower id), keep the top k, then top-p's
 * shortest prefix holding top_p of the mass (at temperature 1, over the
 * top k, or over every token in id order without top-k), then min-p's
 * floor, then draw at the temperature.  Without any filter the tokens
 * stay in id order. */
static ml_token ref_sample(const float *logits, uint32_t V, const ml_sampler_params *p,
                          uint64_t *rng, uint32_t *kept)
{
    ref_cand *c = malloc(V * sizeof *c);
    for (uint32_t i = 0; i < V; i++)
        c[i] = (ref_cand){logits[i] == logits[i] ? logits[i] : -INFINITY, (ml_token)i};
    int topk = p->top_k && p->top_k < V, topp = p->top_p > 0 && p->top_p < 1;
    if (topk || topp || p->min_p > 0)
        qsort(c, V, sizeof *c, ref_desc);
    uint32_t n = topk ? p->top_k : V;
    double max = -INFINITY, sum = 0;
    for (uint32_t i = 0; i < n; i++)
        max = c[i].logit > max ? c[i].logit : max;
    if (topk)
        for (uint32_t i = 0; i < n; i++)
            sum += exp(c[i].logit - max);
    else
        for (uint32_t i = 0; i < V; i++)
            if (logits[i] == logits[i])
                sum += exp(logits[i] - max);
    ml_token pick;
    if (max == -INFINITY) {
        pick = 0;
        for (uint32_t i = 0; i < V; i++)
            if (logits[i] == logits[i]) {
                pick = (ml_token)i;
                break;
            }
        free(c);
        *kept = 0;
        return pick;
    }
    if (topp) {
        double cum = 0;
        for (uint32_t i = 0; i < n; i++) {
            cum += exp(c[i].logit - max) / sum;
            if (cum >= p->top_p) {
                n = i + 1;
                break;
            }
        }
    }
    if (p->min_p > 0) {
        double floor_logit = max + log(p->min_p);
        uint32_t keep = 1;
        while (keep < n && c[keep].logit >= floor_logit)
            keep++;
        n = keep;
    }
    double total = 0, acc = 0;
    for (uint32_t i = 0; i < n; i++)
        total += exp((c[i].logit - max) / p->temperature);
    double r = ref_uniform(rng) * total;
    pick = c[n - 1].id;
    for (uint32_t i = 0; i < n; i++) {
        acc += exp((c[i].logit - max) / p->temperature);
        if (r < acc) {
            pick = c[i].id;
            break;
        }
    }
    free(c);
    *kept = n;
    return pick;
}

/* Every combination of top-k (off, 1, small, the default 40, vocab - 1,
 * vocab, above), top-p (off, 0.5, 0.95) and min-p (off, 0.05, 1), at two
 * temperatures, over vocabularies of 1 to 3000 tokens with ties, NaNs
 * and -inf among the logits (and all -inf): the same token as the
 * reference for 12 draws each, from the same seed.  Ranking only the
 * tokens the filters can keep must change nothing. */
START_TEST(test_sampler_reference)
{
    const uint32_t vocabs[] = {1, 2, 7, 40, 41, 64, 300, 3000};
    tu_rng r = {11};
    size_t checked = 0, filtered = 0;
    for (size_t vi = 0; vi < sizeof vocabs / sizeof vocabs[0]; vi++) {
        uint32_t V = vocabs[vi];
        float *x = malloc(V * sizeof *x), *copy = malloc(V * sizeof *x);
        for (int shape = 0; shape < 4; shape++) {
            for (uint32_t i = 0; i < V; i++) {
                uint32_t u = tu_below(&r, 1000);
                x[i] = shape == 3 ? -INFINITY
                       : u < 20   ? NAN
                       : u < 40   ? -INFINITY
                       : shape == 0 ? (float)(u % 7) /* many ties */
                       : shape == 1 ? (float)u / 100.0f
                                    : (float)u / 20.0f; /* peaked: few above the floor */
            }
            const uint32_t ks[] = {0, 1, 5, 40, V - 1, V, V + 3};
            const float ps[] = {1, 0.5f, 0.95f}, mins[] = {0, 0.05f, 1}, temps[] = {0.7f, 1.5f};
            for (size_t a = 0; a < 7; a++)
                for (size_t b = 0; b < 3; b++)
                    for (size_t d = 0; d < 3; d++)
                        for (size_t t = 0; t < 2; t++) {
                            ml_sampler_params sp = {temps[t], ks[a], ps[b], mins[d], 1, 64,
                                                    1000 + a * 97 + b * 13 + d, 0, 0};
                            ml_sampler *s;
                            ml_error err;
                            ck_assert(ml_sampler_new(&sp, V, &s, &err) == ML_OK);
                            uint64_t rng = sp.seed ^ 0x9e3779b97f4a7c15ull;
                            for (int draw = 0; draw < 12; draw++) {
                                uint32_t kept;
                                memcpy(copy, x, V * sizeof *x);
                                ml_token got = ml_sampler_next(s, copy, NULL, 0);
                                ml_token want = ref_sample(x, V, &sp, &rng, &kept);
                                ck_assert_msg(got == want,
                                              "vocab %u shape %d k %u p %g min-p %g temp %g "
                                              "draw %d: %d, not %d",
                                              V, shape, sp.top_k, (double)sp.top_p,
                                              (double)sp.min_p, (double)sp.temperature, draw,
                                              got, want);
                                checked++;
                                filtered += kept > 1 && kept < V;
                            }
                            ml_sampler_free(s);
                        }
        }
        free(x);
        free(copy);
    }
    ck_assert(filtered > checked / 4); /* the filters did cut, often */
}
END_TEST

/* Greedy picks the first index of the largest logit over any length: ties
 * (the lowest index wins), NaNs (never win), -inf, and the tail after the
 * last full group of eight. */
static int32_t first_max(const float *x, uint32_t n)
{
    int32_t best = -1;
    for (uint32_t i = 0; i < n; i++)
        if (x[i] == x[i] && (best < 0 || x[i] > x[best]))
            best = (int32_t)i;
    return best < 0 ? 0 : best;
}

START_TEST(test_greedy_argmax)
{
    ml_sampler_params sp = {0, 0, 1, 0, 1, 64, 1, 0, 0};
    ml_error err;
    uint64_t r = 7;
    for (uint32_t n = 1; n <= 70; n++)
        for (int rep = 0; rep < 20; rep++) {
            float *x = malloc(n * sizeof *x), *copy = malloc(n * sizeof *x);
            for (uint32_t i = 0; i < n; i++) {
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                unsigned v = (unsigned)(r >> 33) % 12;
                x[i] = v == 0 ? NAN : v == 1 ? -INFINITY : v == 2 ? -0.0f : (float)(v % 5);
            }
            memcpy(copy, x, n * sizeof *x);
            ml_sampler *s;
            ck_assert(ml_sampler_new(&sp, n, &s, &err) == ML_OK);
            ck_assert_int_eq(ml_sampler_next(s, copy, NULL, 0), first_max(x, n));
            ml_sampler_free(s);
            free(x);
            free(copy);
        }
}
END_TEST

/* Sliding-window and linear-attention layers keep the same memory whatever
 * the context: from --ctx 4096 to 32768 only the full-attention layers
 * grow, each by 2 x kv_dim floats per position. */
typedef struct growbuf {
    uint8_t *p;
    size_t len;
} growbuf;

static ml_status mem_sink(void *ctx, const void *buf, size_t n, ml_error *err)
{
    (void)err;
    growbuf *g = ctx;
    uint8_t *p = realloc(g->p, g->len + n);
    if (!p)
        return ML_E_NOMEM;
    memcpy(p + g->len, buf, n);
    g->p = p;
    g->len += n;
    return ML_OK;
}

START_TEST(test_memory_does_not_grow)
{
    ml_mlb_header h;
    ml_mlb_header_init(&h);
    h.dim = 64, h.n_layers = 4, h.n_heads = 4, h.n_kv_heads = 2, h.hidden_dim = 64;
    h.vocab = 16, h.max_seq = 32768, h.rope_theta = 10000, h.norm_eps = 1e-5f;
    h.wtype = ML_WTYPE_Q8_0, h.layer_flags = 1, h.sliding_window = 512;
    h.rope_local_theta = 10000, h.lin_k_heads = 1, h.lin_v_heads = 4, h.lin_k_dim = 16;
    h.lin_v_dim = 16, h.lin_conv = 4;
    const uint8_t flags[4] = {ML_LAYER_SLIDING, ML_LAYER_LINEAR, 0, ML_LAYER_SLIDING | 2};
    growbuf buf = {NULL, 0};
    ml_error err;
    ck_assert_msg(ml_mlb_write_random(&h, flags, 1, mem_sink, &buf, &err) == ML_OK, "%s", err.msg);
    ml_mlb *mlb;
    ml_model *m;
    ck_assert(ml_mlb_open_memory(buf.p, buf.len, &mlb, &err) == ML_OK);
    ck_assert(ml_model_new(mlb, &m, &err) == ML_OK);
    uint64_t bytes[2];
    const uint32_t ctx[2] = {4096, 32768};
    for (int i = 0; i < 2; i++) {
        ml_ctx_params p = {.n_ctx = ctx[i], .n_batch = 8, .n_threads = 1};
        ml_ctx *c;
        ck_assert_msg(ml_ctx_new(m, &p, &c, &err) == ML_OK, "%s", err.msg);
        bytes[i] = ml_ctx_state_bytes(c);
        ml_token ids[3] = {1, 2, 3};
        ck_assert(ml_ctx_eval(c, ids, 3, NULL, 0, &err) == ML_OK);
        ml_ctx_free(c);
    }
    uint64_t kv_dim = 32; /* head_dim 16 x 2 KV heads */
    ck_assert_uint_eq(bytes[1] - bytes[0], (uint64_t)(32768 - 4096) * 2 * kv_dim * 4);
    /* At 4096: two sliding layers at 512, one full layer, the linear state. */
    uint64_t lin = 4 * ((uint64_t)4 * 16 * 16 + (uint64_t)3 * (2 * 16 + 4 * 16));
    ck_assert_uint_eq(bytes[0], 2 * 512 * 2 * kv_dim * 4 + 4096 * 2 * kv_dim * 4 + lin);
    ml_model_free(m);
    ml_mlb_close(mlb);
    free(buf.p);
}
END_TEST

Suite *suite_runtime(void)
{
    Suite *s = suite_create("runtime");
    TCase *tc = tcase_create("forward");
    tcase_add_loop_test(tc, test_matches_reference, 0, N_MODELS);
    tcase_add_loop_test(tc, test_invariance, 0, N_MODELS);
    tcase_add_loop_test(tc, test_embed, 0, N_MODELS);
    tcase_add_test(tc, test_kernel_variants);
    tcase_add_test(tc, test_kernel_combinations);
    tcase_add_test(tc, test_kernel_slots);
    tcase_add_test(tc, test_state_bytes_and_errors);
    tcase_add_loop_test(tc, test_truncate, 0, N_MODELS);
    tcase_add_loop_test(tc, test_rewind_room, 0, N_MODELS);
    tcase_add_test(tc, test_sampler);
    tcase_add_test(tc, test_sampler_reference);
    tcase_add_test(tc, test_greedy_argmax);
    tcase_add_test(tc, test_memory_does_not_grow);
    suite_add_tcase(s, tc);
    return s;
}
