/* check_linear_attn.c - the chunked gated delta rule (lib/runtime/linear_attn.c)
 * against mlb(5)'s five steps computed token by token in double precision,
 * over random inputs in several regimes (ordinary values, extreme decays
 * and betas, decay 1 with repeated keys, decay 0), for head sizes 16 to
 * 128 and sequences crossing several chunk boundaries; and the promises
 * the forward pass relies on: the same bits for any split of a sequence
 * into batches, any thread count and any kernel variant, a reset that
 * really starts over, the state size mlb(5) gives, and whole-model logits
 * that do not depend on the batch size across chunk boundaries. */
#include "suites.h"
#include "testutil.h"

#include "kernels/kernels.h"
#include "runtime/linear_attn.h"
#include "runtime/pool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct shape {
    uint32_t K, V, dk, dv, taps;
} shape;

/* One layer's weights and a sequence of inputs. */
typedef struct problem {
    shape sh;
    size_t n;                /* tokens */
    uint32_t n_qkv, n_vd;
    float *qkv, *z, *ba;     /* (n, n_qkv), (n, n_vd), (n, 2V) */
    float *lconv, *dt_bias, *A_log, *lnorm;
    ml_layer L;
    ml_mlb_header h;
} problem;

enum { ORDINARY, EXTREME, NO_DECAY, FULL_DECAY, N_REGIMES };
static const char *const regime_names[] = {"ordinary", "extreme", "no decay", "full decay"};

static double uni(tu_rng *r, double lo, double hi)
{
    return lo + (hi - lo) * (double)(tu_next(r) >> 11) / 9007199254740992.0;
}

static float *floats(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    ck_assert(p);
    return p;
}

static void fill(float *p, size_t n, tu_rng *r, double lo, double hi)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (float)uni(r, lo, hi);
}

static const float pick[] = {-40, -8, 0, 8, 40};

/* b and a for the regime: EXTREME mixes betas from 4e-18 to 1 and
 * softplus arguments from -40 to 40 token by token. */
static void fill_gates(problem *p, int regime, tu_rng *r)
{
    uint32_t V = p->sh.V;
    for (size_t t = 0; t < p->n; t++)
        for (uint32_t h = 0; h < V; h++) {
            float *b = &p->ba[t * 2 * V + h], *a = &p->ba[t * 2 * V + V + h];
            if (regime == EXTREME) {
                *b = pick[tu_below(r, 5)];
                *a = pick[tu_below(r, 5)];
            } else if (regime == NO_DECAY) {
                *b = 40;   /* β = 1 */
                *a = -200; /* softplus underflows to 0: decay exactly 1 */
            } else {
                *b = (float)uni(r, -3, 3);
                *a = (float)uni(r, -3, 3);
            }
        }
    for (uint32_t h = 0; h < V; h++) {
        p->dt_bias[h] = regime == NO_DECAY ? 0 : (float)uni(r, -1, 1);
        if (regime == EXTREME)
            p->A_log[h] = (float)(h % 4 == 0 ? -10 : h % 4 == 1 ? 0 : h % 4 == 2 ? 3 : 8);
        else if (regime == FULL_DECAY)
            p->A_log[h] = 40; /* g = -e^40 softplus(.): decay 0 */
        else
            p->A_log[h] = (float)uni(r, -2, 1);
    }
}

static void problem_init(problem *p, shape sh, size_t n, int regime, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    tu_rng r = {seed};
    p->sh = sh, p->n = n;
    p->n_qkv = 2 * sh.K * sh.dk + sh.V * sh.dv, p->n_vd = sh.V * sh.dv;
    p->qkv = floats(n * p->n_qkv), p->z = floats(n * p->n_vd), p->ba = floats(n * 2 * sh.V);
    p->lconv = floats((size_t)p->n_qkv * sh.taps), p->dt_bias = floats(sh.V);
    p->A_log = floats(sh.V), p->lnorm = floats(sh.dv);
    fill(p->qkv, n * p->n_qkv, &r, -2, 2);
    fill(p->z, n * p->n_vd, &r, -3, 3);
    fill(p->lconv, (size_t)p->n_qkv * sh.taps, &r, -0.8, 0.8);
    fill(p->lnorm, sh.dv, &r, 0.5, 1.5);
    if (regime == NO_DECAY) /* keys from 3 directions only: much cancellation */
        for (size_t t = 3; t < n; t++)
            memcpy(p->qkv + t * p->n_qkv, p->qkv + (t % 3) * p->n_qkv,
                   2 * sh.K * sh.dk * sizeof(float));
    fill_gates(p, regime, &r);
    p->L.lconv = p->lconv, p->L.dt_bias = p->dt_bias, p->L.A_log = p->A_log;
    p->L.lnorm = p->lnorm;
    ml_mlb_header_init(&p->h);
    p->h.lin_k_heads = sh.K, p->h.lin_v_heads = sh.V, p->h.lin_k_dim = sh.dk;
    p->h.lin_v_dim = sh.dv, p->h.lin_conv = sh.taps, p->h.norm_eps = 1e-6f;
}

static void problem_free(problem *p)
{
    free(p->qkv), free(p->z), free(p->ba);
    free(p->lconv), free(p->dt_bias), free(p->A_log), free(p->lnorm);
}

/* ---- the spec's five steps, token by token, in double ---- */

static double silu_d(double x)
{
    return x / (1 + exp(-x));
}

/* Steps 1-2 for one token in place: conv + SiLU, then L2 norms. */
static void ref_conv(const problem *p, double *hist, double *x)
{
    uint32_t n = p->n_qkv, taps = p->sh.taps, K = p->sh.K, dk = p->sh.dk;
    for (uint32_t ch = 0; ch < n; ch++) {
        double acc = (double)p->lconv[(size_t)ch * taps + taps - 1] * x[ch];
        for (uint32_t i = 0; i + 1 < taps; i++)
            acc += (double)p->lconv[(size_t)ch * taps + i] * hist[(size_t)i * n + ch];
        for (uint32_t i = 0; i + 2 < taps; i++)
            hist[(size_t)i * n + ch] = hist[(size_t)(i + 1) * n + ch];
        if (taps > 1)
            hist[(size_t)(taps - 2) * n + ch] = x[ch];
        x[ch] = silu_d(acc);
    }
    for (uint32_t h = 0; h < 2 * K; h++) {
        double *v = x + (size_t)h * dk, ss = 0;
        for (uint32_t i = 0; i < dk; i++)
            ss += v[i] * v[i];
        double inv = 1 / sqrt(ss + 1e-6) / (h < K ? sqrt(dk) : 1);
        for (uint32_t i = 0; i < dk; i++)
            v[i] *= inv;
    }
}

/* Steps 3-5 (up to lout) for value head h of one token. */
static void ref_head(const problem *p, double *S, const double *x, size_t t, uint32_t h,
                     double *out)
{
    uint32_t K = p->sh.K, V = p->sh.V, dk = p->sh.dk, dv = p->sh.dv, kh = h / (V / K);
    const double *q = x + (size_t)kh * dk, *k = x + (size_t)(K + kh) * dk;
    const double *v = x + (size_t)2 * K * dk + (size_t)h * dv;
    const float *ba = p->ba + t * 2 * V;
    double beta = 1 / (1 + exp(-(double)ba[h]));
    double sp = (double)ba[V + h] + p->dt_bias[h];
    sp = sp > 20 ? sp : log1p(exp(sp));
    double decay = exp(-exp((double)p->A_log[h]) * sp);
    for (size_t i = 0; i < (size_t)dk * dv; i++)
        S[i] *= decay;
    for (uint32_t c = 0; c < dv; c++) {
        double sk = 0;
        for (uint32_t r = 0; r < dk; r++)
            sk += S[(size_t)r * dv + c] * k[r];
        out[c] = beta * (v[c] - sk); /* the delta, for now */
    }
    for (uint32_t r = 0; r < dk; r++)
        for (uint32_t c = 0; c < dv; c++)
            S[(size_t)r * dv + c] += k[r] * out[c];
    double ss = 0;
    for (uint32_t c = 0; c < dv; c++) {
        double acc = 0;
        for (uint32_t r = 0; r < dk; r++)
            acc += S[(size_t)r * dv + c] * q[r];
        out[c] = acc;
        ss += acc * acc;
    }
    double inv = 1 / sqrt(ss / dv + (double)p->h.norm_eps);
    for (uint32_t c = 0; c < dv; c++)
        out[c] *= inv * p->lnorm[c] * silu_d(p->z[t * p->n_vd + (size_t)h * dv + c]);
}

static double *reference(const problem *p)
{
    uint32_t n = p->n_qkv, V = p->sh.V, dk = p->sh.dk, dv = p->sh.dv;
    double *S = calloc((size_t)V * dk * dv, sizeof(double));
    double *hist = calloc((size_t)p->sh.taps * n, sizeof(double));
    double *x = malloc(n * sizeof(double)), *out = malloc(p->n * p->n_vd * sizeof(double));
    ck_assert(S && hist && x && out);
    for (size_t t = 0; t < p->n; t++) {
        for (uint32_t i = 0; i < n; i++)
            x[i] = p->qkv[t * n + i];
        ref_conv(p, hist, x);
        for (uint32_t h = 0; h < V; h++)
            ref_head(p, S + (size_t)h * dk * dv, x, t, h, out + t * p->n_vd + (size_t)h * dv);
    }
    free(S), free(hist), free(x);
    return out;
}

/* ---- the library, in batches ---- */

/* Runs the whole sequence with batch sizes splits[0], splits[1], ...
 * (cycling; n_splits of them) on `threads` threads with kernel table k. */
static float *run(const problem *p, const ml_kernels *k, unsigned threads, const size_t *splits,
                  size_t n_splits)
{
    ml_error err;
    ml_pool *pool;
    ml_lin_layer *s;
    uint64_t state, chunk;
    ck_assert_msg(ml__pool_new(threads, &pool, &err) == ML_OK, "%s", err.msg);
    ck_assert_msg(ml__lin_new(&p->h, &p->L, k, threads, &s, &state, &chunk, &err) == ML_OK, "%s",
                  err.msg);
    float *qkv = floats(p->n * p->n_qkv), *o = floats(p->n * p->n_vd);
    memcpy(qkv, p->qkv, p->n * p->n_qkv * sizeof(float));
    uint32_t V = p->sh.V;
    for (size_t pos = 0, i = 0; pos < p->n; i++) {
        size_t b = splits[i % n_splits];
        if (b > p->n - pos)
            b = p->n - pos;
        ml__lin_forward(s, pool, (uint32_t)pos, b, qkv + pos * p->n_qkv,
                        p->z + pos * p->n_vd, p->ba + pos * 2 * V, o + pos * p->n_vd);
        pos += b;
    }
    free(qkv);
    ml__lin_free(s);
    ml__pool_free(pool);
    return o;
}

static float *run_whole(const problem *p)
{
    size_t all = p->n;
    return run(p, &ml__kernels_scalar, 1, &all, 1);
}

/* max over tokens of max |got - want| / max |want| over the token's outputs */
static double rel_error(const float *got, const double *want, size_t n, uint32_t width)
{
    double worst = 0;
    for (size_t t = 0; t < n; t++) {
        double diff = 0, mag = 0;
        for (uint32_t i = 0; i < width; i++) {
            double w = want[t * width + i], g = got[t * width + i];
            ck_assert_msg(isfinite(g), "output %zu/%u is %g", t, i, g);
            if (fabs(w) > mag)
                mag = fabs(w);
            if (fabs(g - w) > diff)
                diff = fabs(g - w);
        }
        if (mag > 0 && diff / mag > worst)
            worst = diff / mag;
    }
    return worst;
}

/* ---- tests ---- */

static const shape shapes[] = {
    {2, 4, 32, 16, 4},    /* dk != dv, two value heads per key head */
    {1, 4, 128, 128, 4},  /* Qwen3.5's head sizes */
    {4, 4, 16, 32, 1},    /* no convolution history */
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

/* Every shape in every regime, over 4+ chunks, as one batch and token by
 * token: within 1e-5 of the double-precision recurrence (relative to the
 * token's largest output).  Measured: 5e-7 to 5.3e-6, where a
 * token-by-token float32 recurrence with libm's expf lands at 7e-7 to 6e-6
 * on the same inputs; scaling one decay factor by 1 + 1e-5 already fails,
 * a wrong formula is off by O(1). */
START_TEST(test_matches_recurrence)
{
    int regime = _i % N_REGIMES;
    shape sh = shapes[_i / N_REGIMES];
    size_t n = sh.dk == 128 ? 150 : 230;
    problem p;
    problem_init(&p, sh, n, regime, 100 + (uint64_t)_i);
    double *want = reference(&p);
    float *got = run_whole(&p);
    double e = rel_error(got, want, n, p.n_vd);
    ck_assert_msg(e < 1e-5, "%s, dk %u dv %u: relative error %g", regime_names[regime], sh.dk,
                  sh.dv, e);
    size_t one = 1;
    float *got1 = run(&p, &ml__kernels_scalar, 1, &one, 1);
    ck_assert_msg(memcmp(got, got1, n * p.n_vd * sizeof(float)) == 0,
                  "%s: one token at a time differs", regime_names[regime]);
    free(want), free(got), free(got1);
    problem_free(&p);
}
END_TEST

/* A sequence of 200 tokens split into batches every which way, on 1-3
 * threads: not one bit changes. */
START_TEST(test_batch_invariance)
{
    static const size_t s1[] = {1}, s7[] = {7}, s64[] = {64}, s100[] = {100},
                        mixed[] = {63, 1, 65, 2, 5, 128, 3};
    static const struct {
        const size_t *v;
        size_t n;
    } splits[] = {{s1, 1}, {s7, 1}, {s64, 1}, {s100, 1}, {mixed, 7}};
    shape sh = shapes[_i];
    problem p;
    problem_init(&p, sh, 200, EXTREME, 7);
    float *want = run_whole(&p);
    size_t bytes = p.n * p.n_vd * sizeof(float);
    for (size_t i = 0; i < sizeof splits / sizeof splits[0]; i++)
        for (unsigned th = 1; th <= 3; th++) {
            float *got = run(&p, &ml__kernels_scalar, th, splits[i].v, splits[i].n);
            ck_assert_msg(memcmp(got, want, bytes) == 0, "split %zu, %u threads: differs", i, th);
            free(got);
        }
    free(want);
    problem_free(&p);
}
END_TEST

/* Every kernel table this CPU runs gives the scalar table's bits, also
 * with head sizes that leave partial vectors (20 = 16 + 4, 24 = 16 + 8). */
static const shape odd_shapes[] = {{1, 4, 128, 128, 4}, {2, 4, 24, 20, 4}, {1, 2, 12, 24, 3}};

START_TEST(test_kernel_variants)
{
    const ml_kernels *v[8];
    size_t nv = ml__kernels_available(v, 8);
    static const size_t mixed[] = {9, 64, 1, 30};
    problem p;
    problem_init(&p, odd_shapes[_i], 140, ORDINARY, 11);
    float *want = run(&p, &ml__kernels_scalar, 2, mixed, 4);
    for (size_t i = 1; i < nv; i++) {
        float *got = run(&p, v[i], 2, mixed, 4);
        ck_assert_msg(memcmp(got, want, p.n * p.n_vd * sizeof(float)) == 0, "%s differs",
                      v[i]->name);
        free(got);
    }
    free(want);
    problem_free(&p);
}
END_TEST

/* After ml__lin_reset a layer that has seen 100 tokens computes what a
 * new one does. */
START_TEST(test_reset)
{
    problem p;
    problem_init(&p, shapes[0], 100, ORDINARY, 5);
    float *want = run_whole(&p);
    ml_error err;
    ml_pool *pool;
    ml_lin_layer *s;
    uint64_t state, chunk;
    ck_assert(ml__pool_new(1, &pool, &err) == ML_OK);
    ck_assert(ml__lin_new(&p.h, &p.L, &ml__kernels_scalar, 1, &s, &state, &chunk, &err) == ML_OK);
    float *qkv = floats(p.n * p.n_qkv), *o = floats(p.n * p.n_vd);
    for (int round = 0; round < 2; round++) {
        memcpy(qkv, p.qkv, p.n * p.n_qkv * sizeof(float));
        memset(o, 0, p.n * p.n_vd * sizeof(float));
        if (round)
            ml__lin_reset(s);
        ml__lin_forward(s, pool, 0, p.n, qkv, p.z, p.ba, o);
        ck_assert_msg(memcmp(o, want, p.n * p.n_vd * sizeof(float)) == 0, "round %d", round);
    }
    free(qkv), free(o), free(want);
    ml__lin_free(s);
    ml__pool_free(pool);
    problem_free(&p);
}
END_TEST

/* The state is what mlb(5) says (S and the convolution history); the
 * chunk memory comes on top. */
START_TEST(test_state_bytes)
{
    ml_mlb_header h;
    ml_mlb_header_init(&h);
    h.dim = 64, h.n_layers = 2, h.n_heads = 4, h.n_kv_heads = 2, h.hidden_dim = 64;
    h.vocab = 16, h.max_seq = 256, h.rope_theta = 10000, h.norm_eps = 1e-5f;
    h.wtype = ML_WTYPE_Q8_0, h.layer_flags = 1, h.lin_k_heads = 2, h.lin_v_heads = 4;
    h.lin_k_dim = 32, h.lin_v_dim = 16, h.lin_conv = 4;
    ml_error err;
    ml_lin_layer *s;
    uint64_t state, chunk;
    float lconv[4 * (2 * 2 * 32 + 4 * 16)] = {0};
    ml_layer L = {0};
    L.lconv = lconv;
    ck_assert(ml__lin_new(&h, &L, &ml__kernels_scalar, 3, &s, &state, &chunk, &err) == ML_OK);
    ck_assert_uint_eq(state, ml_mlb_layer_state_bytes(&h, ML_LAYER_LINEAR, 256));
    ck_assert_uint_eq(state, 4 * (4 * 32 * 16 + 3 * (2 * 2 * 32 + 4 * 16)));
    /* keys, delta values and log decays of one chunk, the transposed conv
     * weights, then 3 threads' scratch */
    uint64_t least = 4 * (uint64_t)ML_LIN_CHUNK * (2 * 32 + 4 * 16) + 8 * ML_LIN_CHUNK * 4 +
                     sizeof lconv;
    ck_assert_uint_ge(chunk, least);
    ck_assert_uint_le(chunk, least + 3 * 20480);
    ml__lin_free(s);
    ml__lin_free(NULL);
}
END_TEST

/* A whole Qwen3.5-like model (linear layers and a gated attention layer):
 * logits of 150 positions, over four chunk boundaries, are the same bits
 * for batches of 150, 1, 7 and 64 tokens and 1-3 threads. */
START_TEST(test_model_batch_invariance)
{
    ml_mlb_header h;
    ml_mlb_header_init(&h);
    h.dim = 64, h.n_layers = 3, h.n_heads = 4, h.n_kv_heads = 2, h.hidden_dim = 64;
    h.vocab = 64, h.max_seq = 256, h.rope_theta = 10000, h.norm_eps = 1e-6f;
    h.wtype = ML_WTYPE_Q8_0, h.layer_flags = 1, h.attn_gate = 1, h.qk_norm = 1;
    h.lin_k_heads = 2, h.lin_v_heads = 4, h.lin_k_dim = 16, h.lin_v_dim = 32, h.lin_conv = 4;
    const uint8_t flags[3] = {ML_LAYER_LINEAR, ML_LAYER_LINEAR, 0};
    tu_mem mem;
    tu_mem_init(&mem);
    ml_error err;
    ck_assert_msg(ml_mlb_write_random(&h, flags, 3, tu_mem_sink, &mem, &err) == ML_OK, "%s",
                  err.msg);
    ml_mlb *mlb;
    ml_model *m;
    ck_assert(ml_mlb_open_memory(mem.p, mem.len, &mlb, &err) == ML_OK);
    ck_assert_msg(ml_model_new(mlb, &m, &err) == ML_OK, "%s", err.msg);
    enum { N = 150 };
    ml_token ids[N];
    for (int i = 0; i < N; i++)
        ids[i] = (i * 37 + 11) % 64;
    static const struct {
        uint32_t batch;
        unsigned threads;
    } runs[] = {{150, 1}, {1, 1}, {7, 2}, {64, 3}, {100, 2}};
    float *want = NULL;
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        ml_ctx_params cp = {.n_ctx = 256, .n_batch = runs[r].batch,
                            .n_threads = runs[r].threads};
        ml_ctx *c;
        ck_assert_msg(ml_ctx_new(m, &cp, &c, &err) == ML_OK, "%s", err.msg);
        float *got = floats((size_t)N * 64);
        ck_assert_msg(ml_ctx_eval(c, ids, N, got, 1, &err) == ML_OK, "%s", err.msg);
        ml_ctx_free(c);
        if (!want) {
            want = got;
            for (size_t i = 0; i < (size_t)N * 64; i++)
                ck_assert(isfinite(want[i]));
            continue;
        }
        ck_assert_msg(memcmp(got, want, (size_t)N * 64 * sizeof(float)) == 0,
                      "batch %u, %u threads: logits differ", runs[r].batch, runs[r].threads);
        free(got);
    }
    free(want);
    ml_model_free(m);
    ml_mlb_close(mlb);
    tu_mem_free(&mem);
}
END_TEST

Suite *suite_linear_attn(void)
{
    Suite *s = suite_create("linear_attn");
    TCase *tc = tcase_create("chunked");
    tcase_add_loop_test(tc, test_matches_recurrence, 0, (int)(N_REGIMES * N_SHAPES));
    tcase_add_loop_test(tc, test_batch_invariance, 0, (int)N_SHAPES);
    tcase_add_loop_test(tc, test_kernel_variants, 0, 3);
    tcase_add_test(tc, test_reset);
    tcase_add_test(tc, test_state_bytes);
    tcase_add_test(tc, test_model_batch_invariance);
    suite_add_tcase(s, tc);
    return s;
}
